"""The Layer interface every layer follows (Sequential and save/load rely on it)."""

from __future__ import annotations

from ..runtime import Runtime, get_runtime


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
        self.runtime = runtime or get_runtime()

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
