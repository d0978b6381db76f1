"""Property-based tests (Hypothesis): every public layer and op, on drawn shapes, dtypes,
layouts (numpy C/Fortran order, transposed and strided views; device arrays contiguous,
transposed, strided and offset slices) and values, against nnlib.reference.

The "ci" profile (the default) draws a fixed, derandomized set of examples, bounded so that
the file runs in well under a minute on 2 cores; ``NNLIB_HYPOTHESIS=dev`` draws new random
examples, more of them, each run.
"""

import os

import numpy as np
import pyopencl.array as cla
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nnlib
from nnlib import fft, optim
from nnlib import reference as ref
from nnlib.activations import BY_NAME
from nnlib.catch import ops
from nnlib.registry import OPTIMIZERS

settings.register_profile("ci", max_examples=15, deadline=None, derandomize=True,
                          database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.function_scoped_fixture])
settings.register_profile("dev", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("NNLIB_HYPOTHESIS", "ci"))

LAYOUTS = ("numpy", "fortran", "transposed", "strided", "device", "device_transposed",
           "device_strided", "device_offset")
REAL_DTYPES = (np.float32, np.float64, np.float16, np.int16)


def values(shape, complex_=False, low=-3.0, high=3.0):
    """Arrays of ``shape`` with finite values in [low, high] (float32-exact)."""
    part = hnp.arrays(np.float64, shape, elements=st.floats(low, high, width=32))
    if not complex_:
        return part
    return st.tuples(part, part).map(lambda p: p[0] + 1j * p[1])


@st.composite
def laid_out(draw, x, dtype=None):
    """``x`` in a drawn layout and dtype; returns (input, the float64 values it holds)."""
    layout = draw(st.sampled_from(LAYOUTS))
    if dtype is None:
        dtype = np.complex64 if np.iscomplexobj(x) else draw(st.sampled_from(REAL_DTYPES))
    if np.issubdtype(dtype, np.integer):
        x = np.round(x)
    held = x.astype(dtype)
    rt = nnlib.get_runtime()
    axes = tuple(reversed(range(held.ndim)))
    if layout == "fortran":
        held = np.asfortranarray(held)
    elif layout == "transposed":
        held = np.ascontiguousarray(held.transpose(axes)).transpose(axes)
    elif layout == "strided":
        held = np.repeat(held, 2, axis=0)[::2]
    if not layout.startswith("device"):
        return held, held.astype(np.complex128 if np.iscomplexobj(held) else np.float64)
    if layout == "device":
        return cla.to_device(rt.queue, np.ascontiguousarray(held)), held.astype(np.float64) \
            if not np.iscomplexobj(held) else held.astype(np.complex128)
    if layout == "device_transposed":
        dev = cla.to_device(rt.queue, np.ascontiguousarray(held.transpose(axes)))
        dev = dev.transpose(axes)
    elif layout == "device_strided":
        dev = cla.to_device(rt.queue, np.repeat(held, 2, axis=0))[::2]
    else:
        pad = draw(st.integers(1, 3))
        dev = cla.to_device(rt.queue, np.concatenate([held[:1].repeat(pad, 0), held]))[pad:]
    return dev, held.astype(np.complex128 if np.iscomplexobj(held) else np.float64)


def close(got, want, tol=2e-4):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def real_input(shape):
    return values(shape).flatmap(laid_out)


@given(st.data(), st.integers(1, 9), st.integers(1, 21), st.integers(1, 21),
       st.sampled_from(list(BY_NAME)),
       st.sampled_from(["blocked", "article"]))
def test_dense_forward_and_backward(data, batch, n_in, n_out, act, variant):
    layer = nnlib.Dense(n_in, n_out, act, variant=variant)
    x, xv = data.draw(real_input((batch, n_in)))
    dy, dyv = data.draw(real_input((batch, n_out)))
    w, b = layer.weight.numpy().astype(float), layer.bias.numpy().astype(float)
    z = xv @ w.T + b
    y = ref.activate(z, act)
    close(layer.forward(x).get(), y)
    dx, dw, db = ref.dense_backward(xv, w, y, dyv, act, z)
    close(layer.backward(dy).get(), dx, 1e-3)
    close(layer.weight.grad.get(), dw, 1e-3)
    close(layer.bias.grad.get(), db, 1e-3)


@given(st.data(), st.integers(1, 4), st.integers(1, 3), st.integers(1, 5), st.integers(1, 3),
       st.integers(1, 3), st.booleans(), st.sampled_from(["channels", "tokens"]),
       st.sampled_from(["none", "tanh", "relu"]))
def test_conv1d_forward_and_backward(data, batch, variables, window, step, filters, shared,
                                     layout, act):
    length = data.draw(st.integers(window, window + 12))
    layer = nnlib.Conv1d(window, step, filters, variables, act, shared=shared, layout=layout)
    x, xv = data.draw(real_input((batch, variables, length)))
    w, b = layer.weight.numpy().astype(float), layer.bias.numpy().astype(float)
    y = ref.conv1d_layer_forward(xv, w, b, step, act, layout)
    close(layer.forward(x).get(), y)
    dy, dyv = data.draw(real_input(y.shape))
    dx, dw, db = ref.conv1d_layer_backward(xv, w, b, dyv, step, act, layout)
    close(layer.backward(dy).get(), dx, 1e-3)
    close(layer.weight.grad.get(), dw, 1e-3)
    close(layer.bias.grad.get(), db, 1e-3)


@given(st.data(), st.integers(1, 3), st.integers(1, 3), st.integers(1, 4), st.integers(1, 3),
       st.sampled_from(["none", "tanh", "split_sigmoid", "modrelu"]))
def test_complex_conv1d_forward(data, batch, variables, window, filters, act):
    length = data.draw(st.integers(window, window + 9))
    layer = nnlib.ComplexConv1d(window, 1, filters, variables, act)
    x, xv = data.draw(values((batch, variables, length), complex_=True).flatmap(laid_out))
    y = ref.conv1d_layer_forward(xv, layer.complex_weight(), layer.complex_bias(), 1, act)
    close(layer.forward(x).get(), y, 1e-3)


@given(st.data(), st.integers(1, 8), st.integers(1, 6))
def test_sequential_loss_against_any_target_layout(data, batch, n_out):
    net = nnlib.Sequential([nnlib.Dense(3, n_out)])
    x, _ = data.draw(real_input((batch, 3)))
    y, yv = data.draw(real_input((batch, n_out)))
    out = net.predict(x).astype(np.float64)  # predict takes any layout too
    assert net.compute_loss(x, y) == pytest.approx(ref.mse(out, yv), rel=1e-4, abs=1e-5)


@given(st.data(), st.lists(st.integers(1, 6), min_size=1, max_size=3))
def test_gelu_forward_and_backward(data, shape):
    layer = ops.GELU()
    x, xv = data.draw(real_input(tuple(shape)))
    close(layer.forward(x).get(), ref.gelu(xv))
    dy, dyv = data.draw(real_input(tuple(shape)))
    close(layer.backward(dy).get(), dyv * ref.gelu_grad(xv), 1e-3)


@given(st.data(), st.integers(1, 7), st.integers(2, 12))
def test_layer_norm_forward_and_backward(data, rows, width):
    layer = ops.LayerNorm(width)
    x, xv = data.draw(values((rows, width), low=-2, high=2).map(
        lambda v: v + np.arange(width)).flatmap(lambda v: laid_out(v, np.float32)))
    y, xhat, rstd = ref.layer_norm_forward(xv, np.ones(width), np.zeros(width))
    close(layer.forward(x).get(), y, 1e-3)
    dy, dyv = data.draw(real_input((rows, width)))
    dx, dgamma, dbeta = ref.layer_norm_backward(dyv, np.ones(width), xhat, rstd)
    close(layer.backward(dy).get(), dx, 2e-3)
    close(layer.gamma.grad.get(), dgamma, 2e-3)
    close(layer.beta.grad.get(), dbeta, 2e-3)


@given(st.data(), st.integers(1, 4), st.integers(1, 4), st.integers(1, 6))
def test_mask_generator_forward(data, groups, n, width):
    layer = ops.MaskGenerator(n, width)
    w = data.draw(values((n, width), low=-1, high=1))
    layer.weight.set(w)
    z, zv = data.draw(real_input((groups, n, width)))
    noise, noisev = data.draw(real_input((groups, n, n)))
    mask, prob, _ = ref.mask_sample(zv, w.astype(np.float32).astype(float), noisev)
    got = layer.forward(z, noise).get()
    u = 2 * zv @ w.astype(np.float32).astype(float).T + noisev
    decided = np.abs(u) > 1e-4  # a logit at 0 may round either way in float32
    np.testing.assert_array_equal(got[decided], mask[decided])
    close(layer.prob.get(), prob, 1e-3)


@given(st.data(), st.integers(1, 3), st.integers(1, 3), st.integers(2, 12))
def test_revin_norm(data, batch, channels, t):
    x, xv = data.draw(values((batch, channels, t)).map(
        lambda v: v + np.arange(t)).flatmap(lambda v: laid_out(v, np.float32)))
    out, mean, std = ops.revin_norm(nnlib.get_runtime(), x)
    want, wmean, wstd = ref.revin_norm(xv)
    close(out.get(), want, 1e-3)
    close(mean.get(), wmean[..., 0], 1e-4)
    close(std.get(), wstd[..., 0], 1e-4)


@given(st.data(), st.lists(st.integers(1, 3), max_size=2), st.integers(1, 40))
def test_fft_of_any_layout(data, batch, n):
    x, xv = data.draw(values(tuple(batch) + (n,), complex_=True).flatmap(laid_out))
    close(fft.fft(x).get(), np.fft.fft(xv), 1e-3 * max(1, np.sqrt(n)))
    close(fft.ifft(x).get(), np.fft.ifft(xv), 1e-3)


# every elementwise rule (Adam-mini shares v across a block: tests/test_optim.py)
@given(st.data(), st.sampled_from([n for n, c in OPTIMIZERS.items() if c.flat]),
       st.integers(1, 40), st.sampled_from([0.0, 1e-8]))
def test_one_optimizer_step(data, name, size, eps):
    w = data.draw(values((size,)))
    g = data.draw(values((size,)))
    p = nnlib.Parameter(w)
    kwargs = {"momentum": 0.9} if name == "SGD" else {"eps": eps}
    opt = getattr(optim, name)([p], lr=0.01, **kwargs)
    p.grad.set(g.astype(np.float32))
    opt.step()
    w32, g32 = w.astype(np.float32).astype(float), g.astype(np.float32).astype(float)
    zeros = np.zeros(size)
    with np.errstate(invalid="ignore", divide="ignore"):
        if name == "SGD":
            want = ref.sgd_step(w32, g32, zeros, 0.01, 0.9)[0]
        elif name == "Adan":
            want = ref.adan_step(w32, g32, zeros, zeros, zeros, g32, 1, lr=0.01, eps=eps)[0]
        else:
            assert name in ("Adam", "AdamW"), f"no reference step for {name}"
            want = ref.adam_step(w32, g32, zeros, zeros, 1, lr=0.01, eps=eps,
                                 weight_decay=0.01 if name == "AdamW" else 0.0,
                                 decoupled=name == "AdamW")[0]
    # With eps = 0 the step is m / sqrt(v). Where v underflows in float32 (g^2 near or below
    # the smallest normal float32: the kernels flush subnormals to zero) the kernel takes no
    # step, while the float64 reference divides by (nearly) 0: either is right there.
    got = p.numpy()
    assert np.isfinite(got).all()
    edge = (eps == 0) & (g32 ** 2 < 1e4 * np.finfo(np.float32).tiny) if name != "SGD" else False
    decayed = w32 * (1 - 0.01 * 0.01) if name == "AdamW" else w32
    with np.errstate(invalid="ignore"):
        ok = np.isclose(got, want, rtol=1e-5, atol=1e-5) | (
            edge & np.isclose(got, decayed, rtol=1e-5, atol=1e-5))
    assert ok.all(), f"differs at {np.flatnonzero(~ok)}: got {got[~ok]}, want {want[~ok]}"


@given(st.sampled_from([np.array(["a", "b"]), np.array([None, 1.0], dtype=object),
                        np.array([1 + 1j, 2]), [[1.0, 2.0], [3.0]], "text"]),
       st.sampled_from(["dense", "gelu", "layer_norm"]))
def test_non_numbers_get_nnlib_type_errors(bad, target):
    layer = {"dense": lambda: nnlib.Dense(2, 2), "gelu": ops.GELU,
             "layer_norm": lambda: ops.LayerNorm(2)}[target]()
    with pytest.raises(TypeError, match="(expected (numbers|an array)|dtype)"):
        layer.forward(bad)
