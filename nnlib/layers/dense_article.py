"""The article's dense design: one work-item per output value (kernels/dense.cl,
``dense_*_seed``), each a plain loop over the shared dimension:
``Dense(variant="article")``.

Taught in notebooks/01_dense_kernels.
"""

from __future__ import annotations

import numpy as np

from .dense_params import SMALL_KERNELS


class ArticleDenseKernels:
    """The products of a dense layer in the article's design; each method only enqueues work
    (the same interface as :class:`~nnlib.layers.dense_blocked.BlockedDenseKernels`)."""

    variant = "article"

    def __init__(self, runtime):
        self.runtime = runtime
        self._forward = runtime.launcher("dense", "dense_forward_seed", SMALL_KERNELS)
        self._input = runtime.launcher("dense", "dense_backward_input_seed", SMALL_KERNELS)
        self._weight = runtime.launcher("dense", "dense_backward_weight_seed", SMALL_KERNELS)
        self._bias = runtime.launcher("dense", "dense_backward_bias", SMALL_KERNELS)
        self._act_backward = runtime.launcher("activation", "activation_backward")
        self._add = runtime.launcher("vector", "vector_add")

    @staticmethod
    def softmax_in_forward(n_out: int) -> bool:
        """Never: softmax (act 5) is left to the layer."""
        return False

    def forward(self, x, w, b, y, act: int):
        """y = act(x w^T + b); softmax (act 5) is left to the layer."""
        batch, n_in = x.shape
        n_out = w.shape[0]
        i32 = np.int32
        return self._forward((n_out, batch), None, x.data, w.data, b.data, y.data,
                             i32(batch), i32(n_in), i32(n_out), i32(act))

    def backward_input(self, dz, w, dx, x=None, act: int = 0, accumulate: bool = False):
        """dx = dz W (dx += dz W with ``accumulate``, through a second buffer); with ``act``,
        times act'(x) (x = the previous layer's output y; not with ``accumulate``)."""
        batch, n_out = dz.shape
        n_in = w.shape[1]
        out = self.runtime.empty(dx.shape) if accumulate else dx
        event = self._input((n_in, batch), None, dz.data, w.data, out.data, np.int32(batch),
                            np.int32(n_in), np.int32(n_out))
        if accumulate:
            event = self._add((dx.size,), None, dx.data, out.data, dx.data, np.int32(dx.size))
        if act:
            event = self._act_backward((dx.size,), None, x.data, dx.data, dx.data,
                                       np.int32(dx.size), np.int32(act))
        return event

    def backward_gate(self, s, dy, act: int, n_in: int) -> tuple:
        """(dz, None): dz = dy * act'(s) (s the layer's output y, or its z where the
        activation's derivative needs z; not softmax), one work-item per value; this design's
        weight gradient reads dz as it is."""
        dz = self.runtime.empty(dy.shape)
        self._act_backward((dy.size,), None, s.data, dy.data, dz.data, np.int32(dy.size),
                           np.int32(act))
        return dz, None

    def backward_weight(self, dz, x, dw, db, accumulate: bool = True, dz_t=None):
        """dw += dz^T x and db += column sums of dz (or = without ``accumulate``); ``dz_t``
        is not read (the blocked design's weight gradient may read dz^T)."""
        batch, n_out = dz.shape
        n_in = x.shape[1]
        if not accumulate:
            self.runtime.fill(dw, 0)
            self.runtime.fill(db, 0)
        i32 = np.int32
        self._weight((n_in, n_out), None, dz.data, x.data, dw.data, i32(batch), i32(n_in),
                     i32(n_out))
        return self._bias((n_out,), None, dz.data, db.data, i32(batch), i32(n_out))
