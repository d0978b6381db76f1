"""Softmax and the Gumbel-softmax straight-through estimator (kernels/activation.cl): the
kernels against numpy on awkward sizes, the gradients against finite differences."""

import numpy as np
import pyopencl.array as cla
import pytest

from nnlib import reference as ref
from nnlib.softmax import GumbelSoftmax, gumbel_noise, softmax, softmax_backward

from .gradcheck import numeric_grad


def shapes(rt):
    wide = rt.max_work_group_size + 3  # more rows, or columns, than one work-group holds
    return [(1, 7), (13, 33), (wide, 5), (3, wide), (2, 3, 1)]


def test_softmax_kernels_match_reference(rt, rng):
    for shape in shapes(rt):
        z = 30 * rng.standard_normal(shape)  # exp(z) alone would overflow float32
        y = softmax(z, rt).get()
        np.testing.assert_allclose(y, ref.softmax(z), rtol=1e-4, atol=1e-6)
        dy = rng.standard_normal(shape)
        np.testing.assert_allclose(softmax_backward(y, dy, rt).get(),
                                   ref.softmax_backward(y, dy), rtol=1e-4, atol=1e-5)


def test_softmax_backward_matches_finite_differences(rng):
    z, r = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    grad = ref.softmax_backward(ref.softmax(z), r)
    np.testing.assert_allclose(grad, numeric_grad(lambda: (r * ref.softmax(z)).sum(), z, 1e-6),
                               atol=1e-8)


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_gumbel_softmax_kernels_match_reference(rt, rng, tau):
    for shape in shapes(rt):
        logits, noise = 3 * rng.standard_normal(shape), gumbel_noise(shape, seed=1)
        gs = GumbelSoftmax(tau, rt)
        hard = gs.forward(logits, noise).get()
        soft, hard_ref = ref.gumbel_softmax(logits.astype(np.float32), noise.astype(np.float32),
                                            tau)
        np.testing.assert_array_equal(hard, hard_ref)
        np.testing.assert_allclose(gs.soft.get(), soft, rtol=1e-4, atol=1e-6)
        dhard = rng.standard_normal(shape)
        np.testing.assert_allclose(gs.backward(dhard).get(),
                                   ref.gumbel_softmax_backward(soft, dhard, tau), rtol=1e-4,
                                   atol=1e-5)


def test_gumbel_straight_through_gradient_is_the_soft_one(rng):
    logits, noise, r = rng.standard_normal((4, 6)), gumbel_noise((4, 6)), rng.standard_normal((4, 6))
    soft, _ = ref.gumbel_softmax(logits, noise, 0.5)

    def soft_loss():
        return (r * ref.gumbel_softmax(logits, noise, 0.5)[0]).sum()

    np.testing.assert_allclose(ref.gumbel_softmax_backward(soft, r, 0.5),
                               numeric_grad(soft_loss, logits, 1e-6), atol=1e-7)


def test_gumbel_max_samples_the_softmax_distribution(rt):
    logits = np.log([[0.1, 0.2, 0.3, 0.4]]).repeat(20000, 0)
    hard = GumbelSoftmax(0.5, rt).forward(logits, gumbel_noise(logits.shape, seed=3)).get()
    np.testing.assert_allclose(hard.mean(0), [0.1, 0.2, 0.3, 0.4], atol=0.01)
    assert (hard.sum(-1) == 1).all()


def test_bad_input_gets_clear_errors(rt):
    with pytest.raises(ValueError, match="tau must be a positive number"):
        GumbelSoftmax(0.0, rt)
    gs = GumbelSoftmax(1.0, rt)
    with pytest.raises(RuntimeError, match="before forward"):
        gs.backward(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="GumbelSoftmax noise"):
        gs.forward(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="non-empty"):
        softmax(np.zeros((2, 0)), rt)
    with pytest.raises(ValueError, match="NaN or infinity"):
        softmax(np.array([1.0, np.nan]), rt)


def test_strided_and_offset_device_input(rt, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    both = cla.to_device(rt.queue, np.concatenate([x, x]))
    for inp, host in ((cla.to_device(rt.queue, x).T, x.T), (both[::2], x[[0, 2, 0, 2]]),
                      (both[4:], x)):
        np.testing.assert_allclose(softmax(inp, rt).get(), ref.softmax(host.astype(float)),
                                   rtol=1e-5)
