"""Conv1d kernels against nnlib.reference and np.correlate, finite differences, bad geometry."""

import numpy as np
import pytest

import nnlib
from nnlib import reference as ref
from nnlib.activations import ELEMENTWISE

from .gradcheck import numeric_grad

ACTS = ELEMENTWISE


def geometries(rt):
    """(batch, variables, length, window, step, filters): batch 1, odd sizes, window ==
    length, step > window, and a length above the device's maximum work-group size."""
    big = rt.max_work_group_size + 4
    return [(1, 1, 5, 5, 1, 1), (2, 3, 17, 4, 3, 5), (1, 2, 30, 3, 7, 2), (3, 2, big, 7, 2, 3),
            (2, 1, 9, 2, 1, 3)]


def host_params(layer):
    """Weights and bias as float64 (real) or complex128 numpy arrays."""
    if isinstance(layer, nnlib.ComplexConv1d):
        return layer.complex_weight(), layer.complex_bias()
    return layer.weight.numpy().astype(np.float64), layer.bias.numpy().astype(np.float64)


def host_grads(layer):
    gw, gb = layer.weight.grad.get().astype(np.float64), layer.bias.grad.get().astype(np.float64)
    if isinstance(layer, nnlib.ComplexConv1d):
        return gw[..., 0] + 1j * gw[..., 1], gb[..., 0] + 1j * gb[..., 1]
    return gw, gb


def sample(rng, shape, complex_=False, scale=1.0):
    a = rng.standard_normal(shape)
    if complex_:
        a = a + 1j * rng.standard_normal(shape)
    return scale * a


def check_against_reference(rt, rng, cls, act, geometry, shared, layout, scale=1.0, **kw):
    batch, variables, length, window, step, filters = geometry
    layer = cls(window, step, filters, variables, activation=act, shared=shared,
                layout=layout, seed=3, runtime=rt, **kw)
    cplx = cls is nnlib.ComplexConv1d
    dtype = np.complex64 if cplx else np.float32
    x = sample(rng, (batch, variables, length), cplx, scale).astype(dtype)
    y = layer.forward(x).get()
    assert y.shape == layer.output_shape(batch, length)
    dy = sample(rng, y.shape, cplx).astype(dtype)
    dx = layer.backward(dy).get()
    w, b = host_params(layer)
    x64 = x.astype(np.complex128 if cplx else np.float64)
    extra = {"modrelu_b": layer.modrelu_b} if cplx else {}
    want = ref.conv1d_layer_forward(x64, w, b, step, act, layout, **extra)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    dx_r, dw_r, db_r = ref.conv1d_layer_backward(x64, w, b, dy, step, act, layout, **extra)
    gw, gb = host_grads(layer)
    for got, exp in ((dx, dx_r), (gw, dw_r), (gb, db_r)):
        np.testing.assert_allclose(got, exp, rtol=1e-4, atol=1e-4 * max(1, np.abs(exp).max()))


def test_reference_matches_np_correlate(rng):
    x = rng.standard_normal((2, 3, 23))
    w = rng.standard_normal((3, 4, 5))
    b = rng.standard_normal((3, 4))
    z = ref.conv1d_forward(x, w, b, step=3)
    for bi in range(2):
        for v in range(3):
            for f in range(4):
                full = np.correlate(x[bi, v], w[v, f], mode="valid")[::3] + b[v, f]
                np.testing.assert_allclose(z[bi, v, f], full, rtol=1e-12)
    shared = ref.conv1d_forward(x, w[:1], b[:1], step=3, layout="tokens")
    np.testing.assert_allclose(shared[1, 2, :, 0],
                               np.correlate(x[1, 2], w[0, 0], "valid")[::3] + b[0, 0])


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("layout", ["channels", "tokens"])
def test_kernels_match_reference(rt, rng, act, shared, layout):
    for geometry in geometries(rt):
        check_against_reference(rt, rng, nnlib.Conv1d, act, geometry, shared, layout)


@pytest.mark.parametrize("act", ["tanh", "sigmoid", "leaky_relu"])
@pytest.mark.parametrize("shared", [False, True])
def test_gradients_match_finite_differences(rt, act, shared):
    """dL/dx, dL/dw, dL/db of L = sum(y * r) against central differences of the float64
    reference; every input position is covered by 0, 1 or 2 windows (step 2, window 3)."""
    rng = np.random.default_rng(5)
    layer = nnlib.Conv1d(3, 2, 2, 3, activation=act, shared=shared, seed=4, runtime=rt)
    x = rng.standard_normal((2, 3, 10))
    r = rng.standard_normal((2, 3, 2, 4))
    layer.forward(x.astype(np.float32))
    dx = layer.backward(r.astype(np.float32)).get()
    w, b = host_params(layer)

    def loss():
        return float(np.sum(ref.conv1d_layer_forward(x, w, b, 2, act) * r))

    gw, gb = host_grads(layer)
    for got, var in ((dx, x), (gw, w), (gb, b)):
        np.testing.assert_allclose(got, numeric_grad(loss, var, eps=1e-5), rtol=1e-3,
                                   atol=1e-4)
    assert not dx[..., -1].any()  # the last input lies under no window


def test_backward_accumulates_parameter_gradients(rt, rng):
    layer = nnlib.Conv1d(3, 1, 2, 2, activation="tanh", runtime=rt)
    x = rng.standard_normal((2, 2, 8)).astype(np.float32)
    dy = rng.standard_normal((2, 2, 2, 6)).astype(np.float32)
    layer.forward(x)
    layer.backward(dy)
    once = layer.weight.grad.get()
    layer.forward(x)
    layer.backward(dy)
    np.testing.assert_allclose(layer.weight.grad.get(), 2 * once, rtol=1e-6)


def test_parameters_shapes_blocks_and_config(rt):
    layer = nnlib.Conv1d(4, 2, 3, 5, activation="relu", runtime=rt)
    assert layer.weight.shape == (5, 3, 4) and layer.bias.shape == (5, 3)
    assert layer.weight.block_size == 4 and layer.bias.block_size == 1
    shared = nnlib.Conv1d(**{**layer.config(), "shared": True}, runtime=rt)
    assert shared.weight.shape == (1, 3, 4)
    assert shared.output_shape(2, 11) == (2, 5, 3, 4)
    assert nnlib.Conv1d(4, 2, 3, 5, layout="tokens", runtime=rt).output_shape(2, 11) == \
        (2, 5, 4, 3)


@pytest.mark.torch
def test_matches_torch_conv1d_with_groups(rt, rng):
    torch = pytest.importorskip("torch")
    layer = nnlib.Conv1d(4, 3, 2, 3, runtime=rt)
    x = rng.standard_normal((2, 3, 19)).astype(np.float32)
    got = layer.forward(x).get()
    w, b = layer.weight.numpy(), layer.bias.numpy()
    want = torch.nn.functional.conv1d(torch.from_numpy(x), torch.from_numpy(w.reshape(6, 1, 4)),
                                      torch.from_numpy(b.reshape(6)), stride=3, groups=3)
    np.testing.assert_allclose(got.reshape(2, 6, -1), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls", [nnlib.Conv1d, nnlib.ComplexConv1d])
def test_bad_geometry_gets_clear_errors(rt, cls):
    dtype = np.complex64 if cls is nnlib.ComplexConv1d else np.float32
    with pytest.raises(ValueError, match="window must be a positive integer, got 0"):
        cls(0, 1, 2, 3, runtime=rt)
    with pytest.raises(ValueError, match="step must be a positive integer"):
        cls(3, -1, 2, 3, runtime=rt)
    with pytest.raises(ValueError, match="filters must be a positive integer"):
        cls(3, 1, 2.5, 3, runtime=rt)
    with pytest.raises(ValueError, match="unknown layout"):
        cls(3, 1, 2, 3, layout="nlc", runtime=rt)
    with pytest.raises(ValueError, match="unknown activation"):
        cls(3, 1, 2, 3, activation="softplus", runtime=rt)
    layer = cls(5, 2, 2, 3, runtime=rt)
    with pytest.raises(ValueError, match="input length 4 is shorter than the window 5"):
        layer.forward(np.zeros((2, 3, 4), dtype))
    with pytest.raises(ValueError, match=r"expected shape \(any, 3, any\), got \(2, 4, 9\)"):
        layer.forward(np.zeros((2, 4, 9), dtype))
    with pytest.raises(ValueError, match="batch is empty"):
        layer.forward(np.zeros((0, 3, 9), dtype))
    with pytest.raises(RuntimeError, match="backward called before forward"):
        layer.backward(np.zeros((2, 3, 2, 3), dtype))
    layer.forward(np.zeros((2, 3, 9), dtype))
    with pytest.raises(ValueError, match=r"grad_out: expected shape \(2, 3, 2, 3\)"):
        layer.backward(np.zeros((2, 3, 3, 2), dtype))


def test_softmax_is_refused(rt):
    with pytest.raises(ValueError, match="softmax is not an elementwise activation"):
        nnlib.Conv1d(3, 1, 2, 3, activation="softmax", runtime=rt)
