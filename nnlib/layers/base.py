"""The Layer interface every layer follows (Sequential and save/load rely on it).

Taught in notebooks/01_dense_kernels.
"""

from __future__ import annotations

import numpy as np

from ..runtime import Runtime, resolve_runtime


def positive_int(owner: str, label: str, n) -> int:
    """``n`` as an int if it is a positive integer (not a bool) that the kernels' 32-bit
    sizes hold, else a clear error."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n < 2**31:
        raise ValueError(f"{owner}: {label} must be a positive integer, got {n!r} (the "
                         f"kernels' sizes are 32-bit: at most 2**31 - 1)")
    return int(n)


def check_seed(owner: str, seed) -> int:
    """``seed`` as an int if it is a non-negative integer, else a clear error."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{owner}: seed must be a non-negative integer, got {seed!r}")
    return int(seed)


class Layer:
    """``forward(x)`` returns a device array and keeps what ``backward`` needs;
    ``backward(grad_out)`` returns the input gradient and *accumulates* parameter grads.
    ``config()`` returns the constructor's keyword arguments (JSON values) so that
    ``Sequential.load`` can rebuild the layer by class name.
    """

    registry: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        Layer.registry[cls.__name__] = cls

    def __init__(self, runtime: Runtime | None = None):
        self.runtime = resolve_runtime(runtime)

    def forward(self, x):
        raise NotImplementedError

    def backward(self, grad_out):
        raise NotImplementedError

    def parameters(self) -> list:
        return []

    def release(self) -> None:
        """Drop the arrays kept from the last forward pass for ``backward``."""

    def config(self) -> dict:
        raise NotImplementedError

    def __call__(self, x):
        return self.forward(x)
