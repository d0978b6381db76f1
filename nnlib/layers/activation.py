"""A layer's elementwise activation on the device, from the activation table
(:mod:`nnlib.activations`): which code the layer's product kernel applies, and the
derivative, written with y or, where the table says the derivative needs it, with z.

Taught in notebooks/01_dense_kernels.
"""

from __future__ import annotations

import numpy as np

from ..activations import activation


class DeviceActivation:
    """The activation ``name`` of a layer on ``runtime``.

    ``in_product`` is the code the layer's product kernel applies as it writes its output:
    the activation's own, or none where the derivative needs z (the product then writes z
    and :meth:`apply` computes y from it). Softmax passes through (the layer applies it per
    row)."""

    def __init__(self, runtime, name: str):
        self.entry = activation(name)
        self.runtime = runtime
        self.keeps_z = self.entry.needs == "z"
        self.in_product = 0 if self.keeps_z else self.entry.code
        self._forward = runtime.launcher("activation", "activation_forward")
        self._backward = runtime.launcher("activation", "activation_backward")

    def apply(self, out) -> tuple:
        """(y, s) from the product kernel's ``out``: the layer's output y, and s, what the
        derivative is written with (y, or z = ``out`` where it needs z)."""
        if not self.keeps_z:
            return out, out
        y = self.runtime.empty(out.shape)
        self._forward((out.size,), None, out.data, y.data, np.int32(out.size),
                      np.int32(self.entry.code))
        return y, out

    def backward(self, s, dy):
        """dL/dz = dy * act'(s), s as :meth:`apply` returned it; ``dy`` itself where the
        derivative is 1 (no activation: nothing to launch)."""
        if self.entry.name == "none":
            return dy
        dz = self.runtime.empty(dy.shape)
        self._backward((dy.size,), None, s.data, dy.data, dz.data, np.int32(dy.size),
                       np.int32(self.entry.code))
        return dz
