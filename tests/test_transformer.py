"""One channel-masked transformer layer (nnlib.catch.TransformerBlock, the layer CATCH
stacks) against its numpy reference, and its input gradient against finite differences."""

import numpy as np
import pytest

from nnlib import reference as ref
from nnlib.catch import TransformerBlock

from .gradcheck import numeric_grad


def block_and_params(rt, width, heads, fill="finite"):
    block = TransformerBlock(width, heads, 3, 7, fill, 0.07, 0.5, 5, rt)
    params = {f"{name}.{p.name}": p.numpy().astype(np.float64)
              for name, layer in block.named().items() for p in layer.parameters()}
    return block, params


def case(rng, groups, n, width):
    mask = (rng.random((groups, n, n)) < 0.5).astype(float)
    mask[:, np.arange(n), np.arange(n)] = 1.0
    return rng.standard_normal((groups * n, width)), mask


@pytest.mark.parametrize("fill", ["finite", "inf"])
def test_block_matches_reference(rt, rng, fill):
    wide = rt.max_work_group_size + 3
    for groups, n, width, heads in ((1, 1, 4, 1), (3, 5, 6, 2), (-(-wide // 3), 3, 5, 2)):
        block, params = block_and_params(rt, width, heads, fill)
        h, mask = case(rng, groups, n, width)
        got = block.forward(rt.to_device(h), rt.to_device(mask)).get()
        want, _ = ref.transformer_block(h, params, mask, heads, hard=fill == "inf")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_block_input_gradient_matches_finite_differences(rt, rng):
    block, params = block_and_params(rt, 6, 2)
    h, mask = case(rng, 2, 4, 6)
    r = rng.standard_normal(h.shape)
    block.forward(rt.to_device(h), rt.to_device(mask))
    dmask = rt.zeros(mask.shape)
    dh = block.backward(rt.to_device(r), dmask, first=True, dc_weight=0.0).get()

    def loss():
        return (r * ref.transformer_block(h, params, mask, 2)[0]).sum()

    np.testing.assert_allclose(dh, numeric_grad(loss, h, 1e-5), rtol=1e-3, atol=1e-4)
