"""Losses on the device, the twin of ``kernels/loss.cl`` (taught in notebook 01).

A :class:`Loss` enqueues the per-sample losses (``loss_rows``) and the gradient of the mean
loss with respect to the output layer's pre-activation (``output_gradient``); neither waits
for the device. The value comes back as a :class:`DeviceLoss`, read only when asked for.
"""

from __future__ import annotations

import numpy as np

from .activations import BY_NAME
from .codes import ACTIVATIONS, loss_code


class DeviceLoss:
    """A loss still on the device: reading it (``float(loss)``) waits for the step. It is
    the sum of ``rows[offset:offset + length]`` (all of ``rows`` by default) over ``count``;
    the slice is taken only when read (pyopencl's slicing costs a tenth of a small step)."""

    def __init__(self, rows, count: int, offset: int = 0, length: int | None = None):
        self._rows, self._count, self._span = rows, count, (offset, length)

    def __float__(self):
        offset, length = self._span
        rows = self._rows if length is None else self._rows[offset:offset + length]
        return float(rows.get().astype(np.float64).sum() / self._count)

    item = __float__

    def __repr__(self):
        return f"DeviceLoss({float(self):.6f})"


class Loss:
    """``"mse"`` (mean over every element) or ``"cross_entropy"`` (after softmax, mean over
    the batch) of an output ``out`` (batch, n) against ``target`` of the same shape."""

    def __init__(self, name: str, runtime):
        self.name, self.code, self.runtime = name, loss_code(name), runtime
        self._rows = runtime.launcher("loss", "loss_rows")
        self._gradient = runtime.launcher("loss", "output_gradient")

    def divisor(self, out) -> int:
        """What the summed per-sample losses are divided by: the batch or every element."""
        return out.shape[0] if self.name == "cross_entropy" else out.size

    def rows(self, out, target, rows_buf=None, offset: int = 0):
        """Enqueue each sample's summed loss into ``rows_buf[offset:]`` (a new array if
        None); returns ``rows_buf``."""
        rows, cols = out.shape
        if rows_buf is None:
            rows_buf = self.runtime.empty((rows,))
        self._rows((rows,), None, out.data, target.data, rows_buf.data, np.int32(offset),
                   np.int32(rows), np.int32(cols), np.int32(self.code))
        return rows_buf

    def value(self, out, target) -> DeviceLoss:
        return DeviceLoss(self.rows(out, target), self.divisor(out))

    def output_gradient(self, out, target, activation: str = "none"):
        """dL/dz of the output layer whose activation (``activation``, one whose derivative
        is written with its output) gave ``out``; dL/dout with ``"none"``."""
        if activation in BY_NAME and BY_NAME[activation].needs == "z":
            raise ValueError(f"output_gradient: {activation}'s derivative needs z, not the "
                             "output: take dL/dout (activation 'none') through the layer's "
                             "backward")
        dz = self.runtime.empty(out.shape)
        self._gradient((out.size,), None, out.data, target.data, dz.data, np.int32(out.size),
                       np.float32(1.0 / self.divisor(out)), np.int32(self.code),
                       np.int32(ACTIVATIONS.get(activation, 0)))
        return dz
