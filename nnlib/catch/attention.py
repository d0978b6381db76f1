"""The channel-masked attention core and the clustering loss on the device
(kernels/attention.cl). Both work on the packed ``qkv`` (groups, n, 3 * heads * dh) that one
Dense layer produces from the channel tokens, and on one mask (groups, n, n) for all heads.

Taught in notebooks/06_attention_primer, notebooks/07_catch.
"""

from __future__ import annotations

import numpy as np

from ..codes import FINITE_FILL
from ..runtime import get_runtime

MASK_FILLS = ("finite", "inf")


def _geometry(qkv, mask, heads):
    groups, n, width = qkv.shape
    if width % (3 * heads):
        raise ValueError(f"qkv width {width} is not 3 * heads ({heads}) * head_dim")
    if mask.shape != (groups, n, n):
        raise ValueError(f"mask: expected shape {(groups, n, n)}, got {mask.shape}")
    return groups, n, width // (3 * heads)


class MaskedAttention:
    """softmax over channels of each group with the mask applied before it (see
    kernels/attention.cl); ``fill="finite"`` is the official code's -ln(1e10) fill,
    ``"inf"`` the paper's hard mask. ``forward`` keeps what ``backward`` needs."""

    def __init__(self, heads: int, fill: str = "finite", runtime=None):
        if fill not in MASK_FILLS:
            raise ValueError(f"unknown mask fill {fill!r}; choose one of {MASK_FILLS}")
        self.rt = runtime or get_runtime()
        self.heads, self.fill = int(heads), fill
        self._fwd, self._bq, self._bk = (
            self.rt.launcher("attention", f"masked_attention_{part}")
            for part in ("forward", "backward_query", "backward_keys"))
        self._saved = None

    def _consts(self):
        return np.float32(FINITE_FILL), np.int32(self.fill == "inf")

    def forward(self, qkv, mask):
        """out (groups, n, heads * dh); probs (groups, heads, n, n) stay in ``self.probs``."""
        rt, h = self.rt, self.heads
        g, n, dh = _geometry(qkv, mask, h)
        out = rt.empty((g, n, h * dh))
        probs, lse = rt.empty((g, h, n, n)), rt.empty((g, h, n))
        i32 = np.int32
        self._fwd((n, h, g), None, qkv.data, mask.data, out.data, probs.data,
                  lse.data, i32(g), i32(n), i32(h), i32(dh), *self._consts())
        self.probs, self._saved = probs, (qkv, mask, lse)
        return out

    def backward(self, dout, dmask, accumulate: bool = True):
        """dqkv (new array); dL/dmask summed over heads is added to ``dmask`` (or written
        there without ``accumulate``)."""
        if self._saved is None:
            raise RuntimeError("MaskedAttention.backward called before forward")
        rt, h = self.rt, self.heads
        qkv, mask, lse = self._saved
        g, n, dh = _geometry(qkv, mask, h)
        dqkv, dscores = rt.empty(qkv.shape), rt.empty((g, h, n, n))
        i32 = np.int32
        self._bq((n, g), None, qkv.data, mask.data, self.probs.data, lse.data,
                 dout.data, dqkv.data, dscores.data, dmask.data, i32(g), i32(n), i32(h),
                 i32(dh), *self._consts(), i32(accumulate))
        self._bk((n, h, g), None, qkv.data, self.probs.data, dout.data,
                 dscores.data, dqkv.data, i32(g), i32(n), i32(h), i32(dh))
        return dqkv


class ChannelDCLoss:
    """One layer's clustering + regular loss: rows (groups, n) whose sum / groups is the
    loss; ``backward(weight, dqkv, dmask)`` adds weight * d(rows.sum()) to both."""

    def __init__(self, heads: int, tau: float = 0.07, reg: float = 0.5, runtime=None):
        self.rt = runtime or get_runtime()
        self.heads, self.tau, self.reg = int(heads), float(tau), float(reg)
        self._fwd, self._bq, self._bk = (
            self.rt.launcher("attention", f"channel_dc_{part}")
            for part in ("forward", "backward_query", "backward_keys"))
        self._saved = None

    def forward(self, qkv, mask):
        rt, h = self.rt, self.heads
        g, n, dh = _geometry(qkv, mask, h)
        cos, rows = rt.empty((g, n, n)), rt.empty((g, n))
        i32 = np.int32
        self._fwd((n, g), None, qkv.data, mask.data, cos.data, rows.data, i32(g),
                  i32(n), i32(h), i32(dh), np.float32(self.tau), np.float32(self.reg))
        self._saved = (qkv, mask, cos)
        return rows

    def backward(self, weight: float, dqkv, dmask):
        if self._saved is None:
            raise RuntimeError("ChannelDCLoss.backward called before forward")
        rt, h = self.rt, self.heads
        qkv, mask, cos = self._saved
        g, n, dh = _geometry(qkv, mask, h)
        dcos = rt.empty((g, n, n))
        i32 = np.int32
        self._bq((n, g), None, qkv.data, mask.data, cos.data, dcos.data,
                 dqkv.data, dmask.data, i32(g), i32(n), i32(h), i32(dh),
                 np.float32(self.tau), np.float32(self.reg), np.float32(weight))
        self._bk((n, g), None, qkv.data, dcos.data, dqkv.data, i32(g), i32(n),
                 i32(h), i32(dh))
