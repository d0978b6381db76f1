"""Parameter: a trainable float32 tensor on the device with its gradient."""

from __future__ import annotations

import numpy as np

from .runtime import Runtime, get_runtime


class Parameter:
    """``value`` and ``grad`` are pyopencl Arrays of the same shape (float32).

    ``block_size`` tells block-wise optimizers (Adam-mini) how the tensor splits into
    blocks of consecutive elements: a dense weight uses one block per output row, a bias
    ``1`` (one block per element); ``None`` means one block for the whole tensor.
    """

    def __init__(self, array, name: str = "param", block_size: int | None = None,
                 runtime: Runtime | None = None):
        self.runtime = runtime or get_runtime()
        host = np.asarray(array)
        if not np.issubdtype(host.dtype, np.floating):
            raise TypeError(f"{name}: a parameter needs floating-point values, got {host.dtype}")
        self.value = self.runtime.to_device(host, name=name)
        self.grad = self.runtime.zeros(self.value.shape)
        self.name = name
        if block_size is not None and (block_size < 1 or self.value.size % block_size):
            raise ValueError(f"{name}: block_size {block_size} does not divide size {self.size}")
        self.block_size = block_size

    @property
    def shape(self) -> tuple:
        return self.value.shape

    @property
    def size(self) -> int:
        return self.value.size

    def numpy(self) -> np.ndarray:
        return self.value.get()

    def set(self, array) -> None:
        """Overwrite the value from host data of the same shape."""
        self.value.set(np.ascontiguousarray(array, dtype=np.float32))

    def zero_grad(self) -> None:
        self.grad.fill(0)

    def __repr__(self):
        return f"Parameter({self.name}, shape={self.shape})"
