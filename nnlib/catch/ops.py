"""Small device operations of the CATCH graph (kernels/catch.cl): layer norm, GELU, the mask
generator, RevIN, frequency patches, axis swaps, row joins, the frequency loss and the
per-step scores. Arrays are pyopencl arrays; series are (batch, channels, time)."""

from __future__ import annotations

import numpy as np

from .. import fft
from ..layers.base import Layer
from ..parameter import Parameter

i32, f32 = np.int32, np.float32


def _k(rt, name):
    return rt.kernel("catch", name)


class LayerNorm(Layer):
    """Layer normalisation over the last axis (eps 1e-5), gamma = 1 and beta = 0 at first."""

    def __init__(self, width: int, runtime=None):
        super().__init__(runtime)
        self.width = int(width)
        self.gamma = Parameter(np.ones(width), "gamma", runtime=self.runtime)
        self.beta = Parameter(np.zeros(width), "beta", runtime=self.runtime)
        self._saved = None

    def config(self) -> dict:
        return {"width": self.width}

    def parameters(self) -> list:
        return [self.gamma, self.beta]

    def forward(self, x):
        rt, c = self.runtime, self.width
        rows = x.size // c
        y, xhat, rstd = rt.empty(x.shape), rt.empty(x.shape), rt.empty((rows,))
        rt.launch(_k(rt, "layer_norm_forward"), (rows,), None, x.data, self.gamma.value.data,
                  self.beta.value.data, y.data, xhat.data, rstd.data, i32(rows), i32(c))
        self._saved = (xhat, rstd)
        return y

    def backward(self, grad_out):
        rt, c = self.runtime, self.width
        xhat, rstd = self._saved
        rows = xhat.size // c
        dx = rt.empty(xhat.shape)
        rt.launch(_k(rt, "layer_norm_backward_input"), (rows,), None, grad_out.data,
                  self.gamma.value.data, xhat.data, rstd.data, dx.data, i32(rows), i32(c))
        rt.launch(_k(rt, "layer_norm_backward_params"), (c,), None, grad_out.data, xhat.data,
                  self.gamma.grad.data, self.beta.grad.data, i32(rows), i32(c))
        return dx


class GELU(Layer):
    """The exact GELU, x Phi(x), elementwise."""

    def config(self) -> dict:
        return {}

    def forward(self, x):
        y = self.runtime.empty(x.shape)
        self.runtime.launch(_k(self.runtime, "gelu_forward"), (x.size,), None, x.data, y.data,
                            i32(x.size))
        self._x = x
        return y

    def backward(self, grad_out):
        dx = self.runtime.empty(grad_out.shape)
        self.runtime.launch(_k(self.runtime, "gelu_backward"), (dx.size,), None, self._x.data,
                            grad_out.data, dx.data, i32(dx.size))
        return dx


class MaskGenerator(Layer):
    """CATCH's mask generator: prob = sigmoid(patch W^T) per (channel, channel) pair, a 0/1
    mask drawn by Gumbel straight-through from logistic ``noise`` (zero noise thresholds
    prob at 0.5), diagonal 1. ``gumbel="code"`` uses the official logits +-logit(p), which
    sharpen the draw to p^2 / (p^2 + (1-p)^2); ``"bernoulli"`` draws with probability p.
    W (n, width) starts at zero (prob 0.5), as in the official code."""

    def __init__(self, n: int, width: int, gumbel: str = "code", runtime=None):
        super().__init__(runtime)
        if gumbel not in ("code", "bernoulli"):
            raise ValueError(f"unknown gumbel mode {gumbel!r}; choose 'code' or 'bernoulli'")
        self.n, self.width, self.gumbel = int(n), int(width), gumbel
        self.weight = Parameter(np.zeros((n, width)), "weight", block_size=width,
                                runtime=self.runtime)
        self._saved = None

    def config(self) -> dict:
        return {"n": self.n, "width": self.width, "gumbel": self.gumbel}

    def parameters(self) -> list:
        return [self.weight]

    def forward(self, z, noise):
        """z (groups, n, width) patches, noise (groups, n, n) -> mask (groups, n, n)."""
        rt, n = self.runtime, self.n
        groups = z.shape[0]
        mask, prob, slope = (rt.empty((groups, n, n)) for _ in range(3))
        rt.launch(_k(rt, "mask_sample"), (n, n, groups), None, z.data, self.weight.value.data,
                  noise.data, mask.data, prob.data, slope.data, i32(groups), i32(n),
                  i32(self.width), f32(2.0 if self.gumbel == "code" else 1.0))
        self.prob, self._saved = prob, (z, slope)
        return mask

    def backward(self, grad_out):
        """Adds dL/dW (straight-through) to weight.grad; the patches need no gradient."""
        rt = self.runtime
        z, slope = self._saved
        rt.launch(_k(rt, "mask_weight_grad"), (self.width, self.n), None, z.data, slope.data,
                  grad_out.data, self.weight.grad.data, i32(z.shape[0]), i32(self.n),
                  i32(self.width))


def revin_norm(rt, x):
    """x (batch, channels, t) -> (normalised, mean, std), statistics per row."""
    b, c, t = x.shape
    out, mean, std = rt.empty(x.shape), rt.empty((b, c)), rt.empty((b, c))
    rt.launch(_k(rt, "revin_norm"), (b * c,), None, x.data, out.data, mean.data, std.data,
              i32(b * c), i32(t))
    return out, mean, std


def revin_denorm(rt, y, mean, std, shift: bool = True):
    """y * std + mean per row; ``shift=False`` gives the backward pass (times std)."""
    rows, t = mean.size, y.size // mean.size
    out = rt.empty(y.shape)
    rt.launch(_k(rt, "revin_denorm"), (t, rows), None, y.data, mean.data, std.data, out.data,
              i32(rows), i32(t), i32(shift))
    return out


def freq_patches(rt, spec, p: int, s: int):
    """spectrum (batch, channels, t) complex -> (batch, patches, channels, 2p) [Re | Im]."""
    b, c, t = spec.shape
    patches = (t - p) // s + 1
    out = rt.empty((b, patches, c, 2 * p))
    rt.launch(_k(rt, "freq_patches"), (2 * p, c, b * patches), None, spec.data, out.data,
              i32(b), i32(c), i32(t), i32(p), i32(s), i32(patches))
    return out


def swap_axes12(rt, x):
    """(n0, n1, n2, n3) -> (n0, n2, n1, n3), a new array."""
    n0, n1, n2, n3 = x.shape
    out = rt.empty((n0, n2, n1, n3))
    rt.launch(_k(rt, "swap_axes12"), (n3, n1 * n2, n0), None, x.data, out.data, i32(n0),
              i32(n1), i32(n2), i32(n3))
    return out


def join_rows(rt, a, b):
    """[a | b] row by row: (rows, na), (rows, nb) -> (rows, na + nb)."""
    rows, na, nb = a.shape[0], a.shape[1], b.shape[1]
    out = rt.empty((rows, na + nb))
    rt.launch(_k(rt, "join_rows"), (na + nb, rows), None, a.data, b.data, out.data, i32(rows),
              i32(na), i32(nb), i32(0))
    return out


def split_rows(rt, x, na: int):
    """The adjoint of ``join_rows``: (rows, na + nb) -> (rows, na), (rows, nb)."""
    rows, width = x.shape
    a, b = rt.empty((rows, na)), rt.empty((rows, width - na))
    rt.launch(_k(rt, "join_rows"), (width, rows), None, a.data, b.data, x.data, i32(rows),
              i32(na), i32(width - na), i32(1))
    return a, b


def freq_mae(rt, z, y, grad, weight: float):
    """|z - y| per frequency of [Re | Im] rows (rows, 2t) -> err (rows, t); adds
    weight * d sum|z - y| to ``grad``."""
    rows, t = z.shape[0], z.shape[1] // 2
    err = rt.empty((rows, t))
    rt.launch(_k(rt, "freq_mae"), (t, rows), None, z.data, y.data, err.data, grad.data,
              i32(rows), i32(t), f32(weight))
    return err


def add(rt, a, b):
    """a + b elementwise, a new array (kernels/vector.cl)."""
    out = rt.empty(a.shape)
    rt.launch(rt.kernel("vector", "vector_add"), (a.size,), None, a.data, b.data, out.data,
              i32(a.size))
    return out


def step_scores(rt, x, xhat, p: int, lam: float):
    """Per-step scores (batch, t) of windows x, xhat (batch, channels, t): see
    ``reference.step_scores``. Sub-window spectra come from nnlib.fft."""
    b, c, t = x.shape
    count = t - p + 1
    windows = rt.empty((b, c, count, p), np.complex64)
    rt.launch(_k(rt, "residual_windows"), (p, count, b * c), None, x.data, xhat.data,
              windows.data, i32(b * c), i32(t), i32(p))
    spec = fft.fft(windows, runtime=rt)
    out = rt.empty((b, t))
    rt.launch(_k(rt, "step_scores"), (t, b), None, x.data, xhat.data, spec.data, out.data,
              i32(b), i32(c), i32(t), i32(p), f32(lam))
    return out
