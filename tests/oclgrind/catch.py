"""CATCH kernels (kernels/attention.cl, kernels/catch.cl): one training step and scoring of a
tiny detector, both projections and both mask fills, on small odd sizes (head_dim 5: the
attention kernels' four-wide loops and their one-at-a-time rest)."""

import numpy as np

import nnlib
from nnlib.catch import CATCH, ops

rt = nnlib.use_device("oclgrind")
rng = np.random.default_rng(0)
tiny = dict(window=20, patch_size=5, patch_stride=3, cf_dim=4, e_layers=1, n_heads=2,
            head_dim=5, d_ff=5, d_model=2, batch_size=2, inference_patch_size=7)
for n, projection, fill in ((3, "linear", "finite"), (1, "complex", "inf")):
    model = CATCH(n, seed=0, runtime=rt, projection=projection, mask_fill=fill, **tiny)
    batch = rng.standard_normal((2, n, 20)).astype(np.float32)
    model.backward(*model.forward(batch, model.mask_noise(rng, 2)))
    model.scale_mean, model.scale_std = np.zeros(n), np.ones(n)
    model.history.append({"epoch": 0})  # scored as if fitted: the kernels are what is checked
    model.score(rng.standard_normal((23, n)))
ln = ops.LayerNorm(7, runtime=rt)  # the parameters' sums in 4 slices: 8, 8, 8 and 6 rows
ln.row_slices = lambda *_: 4
ln.forward(rng.standard_normal((30, 7)).astype(np.float32))
ln.backward(rng.standard_normal((30, 7)).astype(np.float32))
mg = ops.MaskGenerator(3, 6, runtime=rt)  # the weight's sums in 4 slices of the 21 pairs
mg.pair_slices = lambda *_: 4
mg.forward(rng.standard_normal((7, 3, 6)).astype(np.float32))
mg.backward(rng.standard_normal((7, 3, 3)).astype(np.float32))
rt.queue.finish()
print("kernels run: masked_attention_*, channel_dc_*, revin_*, freq_patches, swap_axes12, "
      "mask_* (the weight's gradient also in slices), layer_norm_* (also in slices), "
      "add_layer_norm_forward, gelu_*, join_complex, freq_mae, residual_windows, step_scores")
