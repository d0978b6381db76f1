"""ComplexConv1d and kernels/complex.cl: against numpy, finite differences on the real and
imaginary parts, PyTorch autograd on complex tensors, and the seed's unconjugated formula."""

import numpy as np
import pytest

import nnlib
from nnlib import reference as ref
from nnlib.codes import COMPLEX_ACTIVATIONS
from nnlib.layers.conv import TILE_PARTS, lanes_tiles, tile_candidates

from .gradcheck import numeric_grad
from .test_conv import check_against_reference, geometries, host_grads, host_params, sample

ACTS = list(COMPLEX_ACTIVATIONS)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("layout", ["channels", "tokens"])
def test_kernels_match_reference(rt, rng, act, shared, layout):
    # inputs scaled down so that z stays away from the poles of tanh (z = i pi/2 + k i pi)
    for geometry in geometries(rt):
        check_against_reference(rt, rng, nnlib.ComplexConv1d, act, geometry, shared, layout,
                                scale=0.5, modrelu_b=-0.3)


def complex_numeric_grad(loss, z):
    """dL/dRe z + i dL/dIm z by central differences on each part separately."""
    re, im = z.real.copy(), z.imag.copy()

    def part(var):
        def f():
            z[...] = re + 1j * im
            return loss()
        g = numeric_grad(f, var, eps=1e-6)
        z[...] = re + 1j * im
        return g

    return part(re) + 1j * part(im)


def gradcheck_case(rt, act, shared, layout="channels", seed=6, step=2, tile=None):
    rng = np.random.default_rng(seed)
    layer = nnlib.ComplexConv1d(3, step, 2, 2, activation=act, shared=shared, layout=layout,
                                modrelu_b=-0.4, seed=seed, runtime=rt, _tile=tile)
    x = sample(rng, (2, 2, 9), True, 0.7)
    y = layer.forward(x.astype(np.complex64))
    r = sample(rng, y.shape, True)
    dx = layer.backward(r.astype(np.complex64)).get()
    w, b = host_params(layer)

    def loss():  # a real loss: L = Re sum(conj(r) y), so G_y = r
        y = ref.conv1d_layer_forward(x, w, b, step, act, layout, modrelu_b=-0.4)
        return float(np.real(np.sum(np.conj(r) * y)))

    return layer, x, w, b, r, dx, loss


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("shared", [False, True])
def test_gradients_match_finite_differences(rt, act, shared):
    layer, x, w, b, r, dx, loss = gradcheck_case(rt, act, shared)
    gw, gb = host_grads(layer)
    for got, var in ((dx, x), (gw, w), (gb, b)):
        np.testing.assert_allclose(got, complex_numeric_grad(loss, var), rtol=1e-3, atol=2e-4)


@pytest.mark.parametrize("layout", ["channels", "tokens"])
@pytest.mark.parametrize("design", ["blocked", "lanes"])
def test_step1_gradients_match_finite_differences(rt, design, layout):
    """Step 1 runs the register-blocked or the lanes kernels, whatever the device's default."""
    tile = (tile_candidates(rt) if design == "blocked" else lanes_tiles(rt))[-1]
    layer, x, w, b, r, dx, loss = gradcheck_case(rt, "tanh", False, layout, step=1, tile=tile)
    gw, gb = host_grads(layer)
    for got, var in ((dx, x), (gw, w), (gb, b)):
        np.testing.assert_allclose(got, complex_numeric_grad(loss, var), rtol=1e-3, atol=2e-4)


def test_reference_gradients_match_finite_differences_in_tokens_layout():
    rng = np.random.default_rng(2)
    x, w = sample(rng, (1, 2, 8), True), sample(rng, (2, 3, 3), True)
    b = sample(rng, (2, 3), True)
    r = sample(rng, (1, 2, 3, 3), True)

    def loss():
        y = ref.conv1d_layer_forward(x, w, b, 2, "tanh", "tokens")
        return float(np.real(np.sum(np.conj(r) * y)))

    got = ref.conv1d_layer_backward(x, w, b, r, 2, "tanh", "tokens")
    for g, var in zip(got, (x, w, b)):
        np.testing.assert_allclose(g, complex_numeric_grad(loss, var), rtol=1e-6, atol=1e-8)


def test_seed_formula_without_conjugates_fails_the_gradient_check(rt):
    """The seed multiplies by w and f'(z) instead of conj(w) and conj(f'(z))."""
    layer, x, w, b, r, dx, loss = gradcheck_case(rt, "tanh", False)
    numeric = complex_numeric_grad(loss, x)
    seed_dx = ref.conv1d_layer_backward(x, w, b, r, 2, "tanh", conjugate=False)[0]
    ours = ref.conv1d_layer_backward(x, w, b, r, 2, "tanh")[0]
    np.testing.assert_allclose(ours, numeric, rtol=1e-6, atol=1e-8)
    assert np.abs(seed_dx - numeric).max() > 0.1 * np.abs(numeric).max()
    np.testing.assert_allclose(dx, numeric, rtol=1e-3, atol=2e-4)


def test_gradient_step_decreases_the_loss(rt):
    layer, x, w, b, r, _, loss = gradcheck_case(rt, "modrelu", False)
    before = loss()
    gw, gb = host_grads(layer)
    w -= 1e-3 * gw
    b -= 1e-3 * gb
    assert loss() < before - 1e-4


@pytest.mark.torch
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("shared", [False, True])
def test_matches_torch_autograd_on_complex_tensors(rt, act, shared):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(11)
    batch, variables, length, window, step, filters = 3, 2, 21, 4, 3, 5
    layer = nnlib.ComplexConv1d(window, step, filters, variables, activation=act,
                                shared=shared, modrelu_b=-0.3, seed=1, runtime=rt)
    x = sample(rng, (batch, variables, length), True, 0.5).astype(np.complex64)
    y = layer.forward(x).get()
    r = sample(rng, y.shape, True).astype(np.complex64)
    dx = layer.backward(r).get()

    w64, b64 = host_params(layer)
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w64.astype(np.complex64), requires_grad=True)
    bt = torch.tensor(b64.astype(np.complex64), requires_grad=True)
    if shared:
        z = F.conv1d(xt.reshape(batch * variables, 1, length), wt.reshape(filters, 1, window),
                     bt.reshape(filters), stride=step).reshape(y.shape)
    else:
        z = F.conv1d(xt, wt.reshape(variables * filters, 1, window), bt.reshape(-1),
                     stride=step, groups=variables).reshape(y.shape)
    if act == "tanh":
        z = torch.tanh(z)
    elif act == "split_sigmoid":
        z = torch.complex(torch.sigmoid(z.real), torch.sigmoid(z.imag))
    elif act == "modrelu":
        z = torch.relu(z.abs() - 0.3) * z / z.abs()
    np.testing.assert_allclose(y, z.detach().numpy(), rtol=1e-4, atol=1e-5)
    torch.real(torch.sum(torch.conj(torch.tensor(r)) * z)).backward()
    gw, gb = host_grads(layer)
    for got, want in ((dx, xt.grad), (gw, wt.grad), (gb, bt.grad)):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)


def test_complex_parameters_are_float2_pairs(rt):
    layer = nnlib.ComplexConv1d(4, 1, 3, 2, runtime=rt)
    assert layer.weight.shape == (2, 3, 4, 2) and layer.bias.shape == (2, 3, 2)
    assert layer.weight.block_size == 8 and layer.bias.block_size == 2
    assert layer.weight.value.dtype == np.float32
    with pytest.raises(ValueError, match="modrelu_b must be <= 0"):
        nnlib.ComplexConv1d(4, 1, 3, 2, modrelu_b=0.5, runtime=rt)
    with pytest.raises(TypeError, match="need complex64"):
        layer.forward(np.zeros((1, 2, 5), np.float32))


OPS = {"mul": (0, lambda a, b: a * b), "conj_mul": (1, lambda a, b: np.conj(a) * b),
       "div": (2, lambda a, b: a / b), "exp": (3, lambda a, b: np.exp(a)),
       "tanh": (4, lambda a, b: np.tanh(a)), "sigmoid": (5, lambda a, b: 1 / (1 + np.exp(-a))),
       "abs": (6, lambda a, b: np.abs(a) + 0j)}


@pytest.mark.parametrize("op", OPS)
def test_complex_helpers_match_numpy(rt, op):
    rng = np.random.default_rng(3)
    n = rt.max_work_group_size + 3
    a = sample(rng, n, True) * np.where(np.arange(n) % 7 == 0, 1e19, 1.0) if op in (
        "div", "abs") else sample(rng, n, True)
    b = sample(rng, n, True) * (1e19 if op == "div" else 1.0)
    a[:2] = [12 + 1j, -11 - 3j]  # tanh far from the origin, where the formula would overflow
    a, b = a.astype(np.complex64), b.astype(np.complex64)
    code, f = OPS[op]
    out = rt.empty(n, np.complex64)
    da, db = rt.to_device(a, dtype=np.complex64), rt.to_device(b, dtype=np.complex64)
    complex_ops = rt.launcher("complex", "complex_ops")
    complex_ops((n,), None, da.data, db.data, out.data,
                np.int32(n), np.int32(code))
    want = f(a.astype(np.complex128), b.astype(np.complex128))
    np.testing.assert_allclose(out.get(), want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("layout,shared", [("channels", False), ("tokens", True)])
def test_blocked_kernels_at_every_edge(rt, rng, layout, shared):
    """Step 1 runs the register-blocked kernels: the forward's tiles of CV positions x CF
    filters, the input gradient's CV inputs x CF filters, the weight gradient's CV taps x CF
    filters over chunks of rows; the last block of each shifted back inside its row (or
    window), short rows and windows loaded element-wise, filters left over a multiple of CF;
    with every tile the tuner may pick. The lanes design's work-groups of LANES positions
    (or taps) the same way: shifted back, clamped in rows (windows) shorter than LANES."""
    big = rt.max_work_group_size + 3
    for tile in tile_candidates(rt) + [t for t in lanes_tiles(rt)
                                       if t not in tile_candidates(rt)]:
        cv, cf = tile.get("CV", tile.get("LANES")), tile["CF"]
        for batch, variables, out_len, window, filters in (
                (1, 1, 1, 3, 1), (2, 3, cv - 1, 4, cf + 1), (1, 2, cv + 5, 16, 2 * cf + 3),
                (3, 1, 3 * cv + 1, 1, cf), (5, 2, 2, cv + 3, cf - 1),
                (1, 1, 2 * cv, 2 * cv + 1, 3), (1, 1, big, 3, 2)):
            check_against_reference(rt, rng, nnlib.ComplexConv1d, "none",
                                    (batch, variables, out_len + window - 1, window, 1, filters),
                                    shared, layout, _tile=tile)


@pytest.mark.parametrize("part", TILE_PARTS)
def test_tile_tuning_measures_a_layer(rt, part):
    """The tuner's trial of each part (a step-1 layer with a given tile, its forward or its
    backward) runs: a broken trial would count as a failed candidate and silently leave the
    default."""
    from nnlib.layers.conv import _measure_tile
    candidates = tile_candidates(rt)
    assert len(candidates) == len({tuple(sorted(c.items())) for c in candidates})
    assert 0 < _measure_tile(rt, candidates[-1], part) < np.inf


@pytest.mark.parametrize("forward", ["blocked", "lanes"])
def test_forward_and_gradients_take_tiles_of_their_own(rt, rng, forward):
    """The forward and the gradients are tuned apart (TILE_PARTS), so a layer may run the
    forward in one design and the gradients in the other: both ways round match numpy and
    finite differences, on rows longer than a work-group and with filters left over."""
    blocked, lanes = tile_candidates(rt)[-1], lanes_tiles(rt)[-1]
    tiles = {"forward": blocked, "gradients": lanes} if forward == "blocked" else \
        {"forward": lanes, "gradients": blocked}
    big = rt.max_work_group_size + 3
    for batch, variables, out_len, window, filters in ((1, 1, 1, 3, 1), (2, 3, 7, 4, 5),
                                                       (1, 1, big, 3, 2)):
        check_against_reference(rt, rng, nnlib.ComplexConv1d, "none",
                                (batch, variables, out_len + window - 1, window, 1, filters),
                                False, "tokens", _tile=tiles)
    layer, x, w, b, r, dx, loss = gradcheck_case(rt, "tanh", False, "tokens", step=1,
                                                 tile=tiles)
    gw, gb = host_grads(layer)
    for got, var in ((dx, x), (gw, w), (gb, b)):
        np.testing.assert_allclose(got, complex_numeric_grad(loss, var), rtol=1e-3, atol=2e-4)
