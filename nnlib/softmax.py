"""Softmax over rows and the Gumbel-softmax straight-through estimator on the device
(kernels/activation.cl). Rows run along the last axis of an array of any shape.

Taught in notebooks/06_attention_primer.
"""

from __future__ import annotations

import numpy as np

from .runtime import resolve_runtime

i32, f32 = np.int32, np.float32


def _rows(x, name: str):
    if x.ndim < 1 or x.size == 0:
        raise ValueError(f"{name}: expected a non-empty array of rows, got shape {x.shape}")
    return x.size // x.shape[-1], x.shape[-1]


def softmax(x, runtime=None):
    """softmax over the last axis (the row's maximum subtracted first), a new device array."""
    rt = resolve_runtime(runtime)
    x = rt.to_device(x, "softmax input")
    rows, cols = _rows(x, "softmax input")
    y = x.copy(queue=rt.queue)  # softmax_rows works in place
    rt.launcher("activation", "softmax_rows")((rows,), None, y.data, i32(rows), i32(cols))
    return y


def softmax_backward(y, dy, runtime=None):
    """dL/dz from y = softmax(z) and dL/dy: y (dy - sum(dy y)) per row."""
    rt = resolve_runtime(runtime)
    y = rt.to_device(y, "softmax_backward y")
    dy = rt.to_device(dy, "softmax_backward dy", shape=y.shape)
    rows, cols = _rows(y, "softmax_backward y")
    dz = rt.empty(y.shape)
    rt.launcher("activation", "softmax_backward_rows")((rows,), None, y.data, dy.data, dz.data,
                                                       i32(rows), i32(cols))
    return dz


def gumbel_noise(shape, seed: int = 0) -> np.ndarray:
    """Gumbel draws -log(-log u), u uniform in (0, 1), float64 (on the host, seeded)."""
    u = np.random.default_rng(seed).uniform(np.finfo(float).tiny, 1.0, shape)
    return -np.log(-np.log(u))


class GumbelSoftmax:
    """A one-hot sample per row of the categorical distribution softmax(logits), with the
    straight-through gradient: ``forward`` returns the hard one-hot and keeps the soft
    relaxation softmax((logits + noise) / tau) in ``self.soft``; ``backward(dhard)`` sends
    the gradient through the soft one. ``noise`` holds Gumbel draws (``gumbel_noise``)."""

    def __init__(self, tau: float = 1.0, runtime=None):
        if not np.isfinite(tau) or tau <= 0:
            raise ValueError(f"GumbelSoftmax: tau must be a positive number, got {tau}")
        self.rt, self.tau = resolve_runtime(runtime), float(tau)
        self.soft = None

    def forward(self, logits, noise):
        rt = self.rt
        logits = rt.to_device(logits, "GumbelSoftmax logits")
        noise = rt.to_device(noise, "GumbelSoftmax noise", shape=logits.shape)
        rows, cols = _rows(logits, "GumbelSoftmax logits")
        soft, hard = rt.empty(logits.shape), rt.empty(logits.shape)
        rt.launcher("activation", "gumbel_softmax_forward")(
            (rows,), None, logits.data, noise.data, soft.data, hard.data, i32(rows), i32(cols),
            f32(self.tau))
        self.soft = soft
        return hard

    def backward(self, dhard):
        if self.soft is None:
            raise RuntimeError("GumbelSoftmax.backward called before forward")
        rt, soft = self.rt, self.soft
        dhard = rt.to_device(dhard, "GumbelSoftmax dhard", shape=soft.shape)
        rows, cols = _rows(soft, "GumbelSoftmax dhard")
        dlogits = rt.empty(soft.shape)
        rt.launcher("activation", "gumbel_softmax_backward")(
            (rows,), None, soft.data, dhard.data, dlogits.data, i32(rows), i32(cols),
            f32(self.tau))
        return dlogits
