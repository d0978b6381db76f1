"""1-D convolution over multivariate sequences (real or complex) and complex activations.

Shapes (the kernels in kernels/conv.cl use the same): x (batch, variables, length);
weights w (groups, filters, window) with groups = variables (independent filters per
variable) or 1 (one filter bank shared by all variables); bias (groups, filters); output
(batch, variables, filters, out_len) for layout "channels", (batch, variables, out_len,
filters) for "tokens"; out_len = (length - window) // step + 1.
Complex gradients use the conjugate convention G = dL/dRe + i dL/dIm.

Taught in notebooks/05_complex_and_fft.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .dense import activate, derivative

__all__ = ["conv_out_len", "conv1d_forward", "conv1d_backward", "complex_activate",
           "complex_activate_grad", "conv1d_layer_forward", "conv1d_layer_backward"]


def conv_out_len(length: int, window: int, step: int) -> int:
    return (length - window) // step + 1


def _windows(x, window, step):
    """(batch, variables, out_len, window): the input under each position of the filter."""
    return sliding_window_view(x, window, axis=-1)[:, :, ::step, :]


def _per_variable(a, variables):
    return np.broadcast_to(a, (variables,) + a.shape[1:])


def _to_layout(z, layout):
    return z if layout == "channels" else np.swapaxes(z, -1, -2)


def conv1d_forward(x, w, b, step: int, layout: str = "channels"):
    """z[b, v, f, t] = bias[g, f] + sum_k w[g, f, k] x[b, v, t*step + k], g = v or 0."""
    variables, window = x.shape[1], w.shape[-1]
    win = _windows(x, window, step)
    z = np.einsum("bvtk,vfk->bvft", win, _per_variable(w, variables))
    return _to_layout(z + _per_variable(b, variables)[None, :, :, None], layout)


def conv1d_backward(x, w, dz, step: int, layout: str = "channels", conjugate: bool = True):
    """(dx, dw, db) from dL/dz. Complex: G_x = conj(w) G_z, G_w = sum conj(x) G_z.
    ``conjugate=False`` is the seed's formula, right only for real weights and inputs."""
    cj = np.conj if conjugate else (lambda a: a)
    groups, filters, window = w.shape
    variables = x.shape[1]
    dz = _to_layout(dz, layout)  # back to (batch, variables, filters, out_len)
    out_len = dz.shape[-1]
    win = _windows(x, window, step)
    dwin = np.einsum("vfk,bvft->bvtk", cj(_per_variable(w, variables)), dz)
    dx = np.zeros(x.shape, dwin.dtype)
    for k in range(window):
        dx[..., k: k + step * (out_len - 1) + 1: step] += dwin[..., k]
    dw = np.einsum("bvtk,bvft->vfk", cj(win), dz)
    db = dz.sum(axis=(0, 3))
    if groups == 1:
        dw, db = dw.sum(axis=0, keepdims=True), db.sum(axis=0, keepdims=True)
    return dx, dw, db


def complex_activate(z, act: str, modrelu_b: float = -0.5):
    """none, tanh (complex), split_sigmoid (sigmoid of Re and of Im), modrelu
    (relu(|z| + b) z/|z|, b <= 0)."""
    if act == "tanh":
        return np.tanh(z)
    if act == "split_sigmoid":
        s = lambda a: 1 / (1 + np.exp(-a))  # noqa: E731
        return s(z.real) + 1j * s(z.imag)
    if act == "modrelu":
        r = np.abs(z)
        return np.where(r + modrelu_b > 0, z * (r + modrelu_b) / np.where(r > 0, r, 1), 0)
    return z


def complex_activate_grad(z, g, act: str, modrelu_b: float = -0.5, conjugate: bool = True):
    """G_z from G_y for y = complex_activate(z): conj(f'(z)) G_y for the holomorphic tanh
    (``conjugate=False``: the seed's f'(z) G_y), componentwise for split_sigmoid, the
    transposed R^2 Jacobian for modrelu."""
    y = complex_activate(z, act, modrelu_b)
    if act == "tanh":
        return (np.conj(1 - y * y) if conjugate else 1 - y * y) * g
    if act == "split_sigmoid":
        return g.real * y.real * (1 - y.real) + 1j * g.imag * y.imag * (1 - y.imag)
    if act == "modrelu":
        r = np.abs(z)
        on = r + modrelu_b > 0
        r = np.where(on, r, 1)
        u = z / r
        grad = (1 + modrelu_b / r) * g - (modrelu_b / r) * np.real(np.conj(g) * u) * u
        return np.where(on, grad, 0)
    return g


def conv1d_layer_forward(x, w, b, step, act="none", layout="channels", modrelu_b=-0.5):
    """A whole layer: a complex activation when x or w is complex, else a real one."""
    z = conv1d_forward(x, w, b, step, layout)
    if np.iscomplexobj(z):
        return complex_activate(z, act, modrelu_b)
    return activate(z, act)


def conv1d_layer_backward(x, w, b, dy, step, act="none", layout="channels", modrelu_b=-0.5,
                          conjugate=True):
    """(dx, dw, db) of ``conv1d_layer_forward`` from dL/dy."""
    z = conv1d_forward(x, w, b, step, layout)
    if np.iscomplexobj(z):
        dz = complex_activate_grad(z, dy, act, modrelu_b, conjugate)
    else:
        dz = dy * derivative(act, activate(z, act), z)
    return conv1d_backward(x, w, dz, step, layout, conjugate)
