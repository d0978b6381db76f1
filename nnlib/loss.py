"""The losses of kernels/loss.cl on the device, the twin of that file: per-row loss values
and the output gradient, shared by ``Sequential`` and the CATCH detector (notebook 02
teaches them).

    mse = Loss("mse", runtime)
    value = mse.value(out, target)          # a DeviceLoss: float(value) waits for the device
    dz = mse.gradient(out, target)          # dL/d out, the mean over every element
"""

from __future__ import annotations

import numpy as np

from .activations import ACTIVATIONS
from .launcher import Launcher

LOSSES = {"mse": 0, "cross_entropy": 1}


class DeviceLoss:
    """A loss still on the device: reading it (``float(loss)``) waits for the step."""

    def __init__(self, rows, count: int):
        self._rows, self._count = rows, count

    def __float__(self):
        return float(self._rows.get().astype(np.float64).sum() / self._count)

    item = __float__

    def __repr__(self):
        return f"DeviceLoss({float(self):.6f})"


class Loss:
    """One loss of kernels/loss.cl on 2-d (rows, cols) device arrays: MSE is the mean over
    every element, cross-entropy (after softmax) the mean over rows."""

    def __init__(self, name: str, runtime):
        if name not in LOSSES:
            raise ValueError(f"unknown loss {name!r}; choose one of {list(LOSSES)}")
        self.name, self.code, self.runtime = name, np.int32(LOSSES[name]), runtime
        self._gradient = Launcher(runtime, runtime.kernel("loss", "output_gradient"))
        self._rows = Launcher(runtime, runtime.kernel("loss", "loss_rows"))

    def divisor(self, out) -> int:
        return out.shape[0] if self.name == "cross_entropy" else out.size

    def rows(self, out, target, rows_buf=None, offset: int = 0):
        """Enqueue each row's summed loss into ``rows_buf[offset:]`` (a new array without)."""
        rows, cols = out.shape[0], out.size // out.shape[0]
        if rows_buf is None:
            rows_buf = self.runtime.empty((rows,))
        self._rows((rows,), None, out.data, target.data, rows_buf.data, np.int32(offset),
                   np.int32(rows), np.int32(cols), self.code)
        return rows_buf

    def value(self, out, target) -> DeviceLoss:
        """The mean loss, read from the device when converted to float."""
        return DeviceLoss(self.rows(out, target), self.divisor(out))

    def gradient(self, out, target, activation: str = "none"):
        """dL/dz, a new array: z is ``out`` before ``activation`` (its derivative fused)."""
        dz = self.runtime.empty(out.shape)
        self._gradient((out.size,), None, out.data, target.data, dz.data, np.int32(out.size),
                       np.float32(1.0 / self.divisor(out)), self.code,
                       np.int32(ACTIVATIONS.get(activation, 0)))
        return dz
