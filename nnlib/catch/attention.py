"""The channel-masked attention core and the clustering loss on the device
(kernels/attention.cl). Both work on the packed ``qkv`` (groups, n, 3 * heads * dh) that one
Dense layer produces from the channel tokens, and on one mask (groups, n, n) for all heads.

Taught in notebooks/06_attention_primer, notebooks/07_catch.
"""

from __future__ import annotations

import numpy as np

from ..layers.base import Layer
from ..codes import FINITE_FILL
from .ops import launcher

MASK_FILLS = ("finite", "inf")


def _geometry(qkv, mask, heads):
    groups, n, width = qkv.shape
    if width % (3 * heads):
        raise ValueError(f"qkv width {width} is not 3 * heads ({heads}) * head_dim")
    if mask.shape != (groups, n, n):
        raise ValueError(f"mask: expected shape {(groups, n, n)}, got {mask.shape}")
    return groups, n, width // (3 * heads)


class MaskedAttention(Layer):
    """softmax over channels of each group with the mask applied before it (see
    kernels/attention.cl); ``fill="finite"`` is the official code's -ln(1e10) fill,
    ``"inf"`` the paper's hard mask. ``forward`` keeps what ``backward`` needs."""

    def __init__(self, heads: int, fill: str = "finite", runtime=None):
        super().__init__(runtime)
        if fill not in MASK_FILLS:
            raise ValueError(f"unknown mask fill {fill!r}; choose one of {MASK_FILLS}")
        self.heads, self.fill = int(heads), fill
        rt = self.runtime
        self._fwd, self._bq, self._bk = (
            launcher(rt, "attention", f"masked_attention_{part}")
            for part in ("forward", "backward_query", "backward_keys"))

    def config(self) -> dict:
        return {"heads": self.heads, "fill": self.fill}

    def _consts(self):
        return np.float32(FINITE_FILL), np.int32(self.fill == "inf")

    def forward(self, qkv, mask):
        """out (groups, n, heads * dh); probs (groups, heads, n, n) stay in ``self.probs``."""
        rt, h = self.runtime, self.heads
        g, n, dh = _geometry(qkv, mask, h)
        out = rt.empty((g, n, h * dh))
        probs, lse = rt.empty((g, h, n, n)), rt.empty((g, h, n))
        i32 = np.int32
        self._fwd((n, h, g), None, qkv.data, mask.data, out.data, probs.data,
                  lse.data, i32(g), i32(n), i32(h), i32(dh), *self._consts())
        self.probs = probs
        self.save_for_backward(qkv, mask, lse)
        return out

    def backward(self, grad_out, mask_grad, accumulate: bool = True, dc=None,
                 dc_weight: float = 0.0):
        """dqkv (new array); dL/dmask summed over heads is added to ``mask_grad`` (or
        written there without ``accumulate``). ``dc``: a :class:`ChannelDCLoss` run forward
        on the same qkv and mask, whose backward pass of ``dc_weight`` the same two launches
        then add."""
        qkv, mask, lse = self.saved()
        rt, h = self.runtime, self.heads
        g, n, dh = _geometry(qkv, mask, h)
        dqkv, dscores = rt.empty(qkv.shape), rt.empty((g, h, n, n))
        i32, f32 = np.int32, np.float32
        if dc is None:
            unused = rt.empty((1,))
            cos, cos_heads, qnorm, knorm, dcos = (unused,) * 5
            tau = reg = 0.0
        else:
            cos, cos_heads, qnorm, knorm, dcos, tau, reg = dc.backward_buffers(qkv, mask)
        self._bq((n, g), None, qkv.data, mask.data, self.probs.data, lse.data,
                  grad_out.data, dqkv.data, dscores.data, mask_grad.data, i32(g), i32(n),
                  i32(h), i32(dh), *self._consts(), i32(accumulate), i32(dc is not None),
                  cos.data, cos_heads.data, qnorm.data, knorm.data, dcos.data, f32(tau),
                  f32(reg), f32(dc_weight))
        self._bk((n, h, g), None, qkv.data, self.probs.data, grad_out.data,
                  dscores.data, dqkv.data, i32(g), i32(n), i32(h), i32(dh), i32(dc is not None),
                  cos_heads.data, qnorm.data, knorm.data, dcos.data)
        return dqkv


class ChannelDCLoss(Layer):
    """One layer's clustering + regular loss: ``forward(qkv, mask)`` gives rows (groups, n)
    whose sum / groups is the loss; ``backward(weight, qkv_grad, mask_grad)`` adds
    weight * d(rows.sum()) to both (a loss term: its upstream gradient is the weight)."""

    def __init__(self, heads: int, tau: float = 0.07, reg: float = 0.5, runtime=None):
        super().__init__(runtime)
        self.heads, self.tau, self.reg = int(heads), float(tau), float(reg)
        rt = self.runtime
        self._fwd, self._bq, self._bk = (
            launcher(rt, "attention", f"channel_dc_{part}")
            for part in ("forward", "backward_query", "backward_keys"))

    def config(self) -> dict:
        return {"heads": self.heads, "tau": self.tau, "reg": self.reg}

    def forward(self, qkv, mask):
        rt, h = self.runtime, self.heads
        g, n, dh = _geometry(qkv, mask, h)
        cos, cos_heads, rows = rt.empty((g, n, n)), rt.empty((g, h, n, n)), rt.empty((g, n))
        qnorm, knorm = rt.empty((g, h, n)), rt.empty((g, h, n))
        i32 = np.int32
        self._fwd((n, g), None, qkv.data, mask.data, cos.data, cos_heads.data, qnorm.data,
                  knorm.data, rows.data, i32(g), i32(n), i32(h), i32(dh), np.float32(self.tau),
                  np.float32(self.reg))
        self.save_for_backward(qkv, mask, cos, cos_heads, qnorm, knorm)
        return rows

    def backward_buffers(self, qkv, mask) -> tuple:
        """What the backward kernels read of the last forward pass on ``qkv`` and ``mask``
        (checked to be those), a new dcos buffer, tau and reg."""
        saved = self.saved()
        if saved[0] is not qkv or saved[1] is not mask:
            raise ValueError("ChannelDCLoss: the backward pass needs the qkv and mask of its "
                             "last forward pass")
        g, n = mask.shape[:2]
        return (*saved[2:], self.runtime.empty((g, n, n)), self.tau, self.reg)

    def backward(self, weight: float, qkv_grad, mask_grad):
        qkv, mask = self.saved()[:2]
        cos, cos_heads, qnorm, knorm, dcos, tau, reg = self.backward_buffers(qkv, mask)
        h = self.heads
        g, n, dh = _geometry(qkv, mask, h)
        i32, f32 = np.int32, np.float32
        self._bq((n, g), None, qkv.data, mask.data, cos.data, cos_heads.data, qnorm.data,
                  knorm.data, dcos.data, qkv_grad.data, mask_grad.data, i32(g), i32(n),
                  i32(h), i32(dh), f32(tau), f32(reg), f32(weight))
        self._bk((n, g), None, qkv.data, cos_heads.data, qnorm.data, knorm.data, dcos.data,
                  qkv_grad.data, i32(g), i32(n), i32(h), i32(dh))
