"""Vector, dense, activation, loss and SGD kernels on a small odd-sized case, under the
limits named on the command line (see _limits.py)."""

import numpy as np
from _limits import oclgrind_runtime

import nnlib
from nnlib.activations import TABLE
from nnlib.layers.dense import PRODUCTS, DenseKernels, default_params
from nnlib.layers.dense_blocked import BlockedDenseKernels
from nnlib.layers.dense_params import forward_yt_params, k_slices, lanes_params

rt, config = oclgrind_runtime()
rng = np.random.default_rng(0)
x = rng.standard_normal((3, 37))  # 37 inputs: whole vectors and a partial one
for variant in ("article", "blocked"):
    for act in {a.needs: a.name for a in TABLE}.values():  # one per kind of derivative
        layer = nnlib.Dense(37, 5, activation=act, variant=variant, seed=1)
        layer.backward(layer.forward(x).get())
nnlib.Dense(37, 5, "tanh").forward(rng.standard_normal((19, 37)))
# gemm_nt's k-blocks (two whole ones and a partial vector) on work-groups of 2 x 2 tiles
forward = default_params(rt, "forward")
blocked = nnlib.Dense(2 * 2 * forward["VW"] + 3, 7, "tanh", seed=1)
blocked.kernels = DenseKernels(rt, params={"forward": dict(
    forward, NT_KB=2 * forward["VW"], LOCAL=4, LOCAL_J=2)})
blocked.forward(rng.standard_normal((9, blocked.n_in)))
# the forward on Y^T (FWD_YT) and on x in place (FWD_TN) in both designs: partial 4 x 4
# blocks of the transposes, gemm_tn_bias's partial column blocks
for route in ("FWD_YT", "FWD_TN"):
    for tn in (forward_yt_params(rt, "b64", route=route),
               default_params(rt, "input", lanes=False) | {route: 1}):
        blocked.kernels = DenseKernels(rt, params={"forward": tn})
        blocked.forward(rng.standard_normal((9, blocked.n_in)))
# the weight gradient on dZ transposed first (DZT): partial 4 x 4 blocks of the transpose;
# and on x packed into panels (TN_PACKED): a partial last panel
for packed in (0, 1):
    weight = dict(default_params(rt, "weight", lanes=False), DZT=1, TN_PACKED=packed, TN_KB=0)
    blocked.kernels = DenseKernels(rt, params={"weight": weight})
    blocked.backward(blocked.forward(rng.standard_normal((9, blocked.n_in))).get())
# gemm_tn's k in three slices (dimension 2) and their sums, in both designs and with the
# tiles' k-blocks: the forward on Y^T and on x (its bias and tanh after the sum), the gated
# input gradient, the weight gradient
BlockedDenseKernels.k_slices = staticmethod(lambda units, groups, nk: 3)
for route in ("FWD_YT", "FWD_TN"):
    for design in ({p: default_params(rt, "input" if p == "forward" else p, lanes=False)
                    for p in PRODUCTS},
                   {p: dict(default_params(rt, "input" if p == "forward" else p, lanes=False),
                            TN_KB=8) for p in PRODUCTS},
                   {p: dict(default_params(rt, "input" if p == "forward" else p, lanes=False),
                            TN_KB=0, TN_PACKED=int(p == "weight")) for p in PRODUCTS},
                   {"forward": forward_yt_params(rt, "b64", route=route),
                    "input": lanes_params(rt, "input", "b64"),
                    "weight": lanes_params(rt, "weight", "b64")}):
        design["forward"] = design["forward"] | {route: 1}
        net = nnlib.Sequential([nnlib.Dense(37, 11, "tanh", seed=1), nnlib.Dense(11, 5, seed=2)])
        for layer in net.layers:
            layer.kernels = DenseKernels(rt, params=design)
        net.backward(net.forward(rng.standard_normal((10, 37))).get())
BlockedDenseKernels.k_slices = staticmethod(k_slices)
net = nnlib.Sequential([nnlib.Dense(37, 5, "relu"), nnlib.Dense(5, 3, "softmax")],
                       loss="cross_entropy")
opt = nnlib.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
float(net.train_step(x, np.array([0, 2, 1]), opt))
mse = nnlib.Sequential([nnlib.Dense(37, 2, "sigmoid")])
float(mse.train_step(x, rng.random((3, 2)), nnlib.optim.SGD(mse.parameters(), lr=0.1)))
a = rt.to_device(rng.standard_normal(37))
out = rt.empty((37,))
vector_add = rt.launcher("vector", "vector_add")
vector_add((37,), (8,), a.data, a.data, out.data, np.int32(37))
rt.queue.finish()
print(f"kernels run ({config}, VW {rt.vector_width}): vector, dense, activation, loss, "
      "optim.sgd_update")
