"""Optimizers whose update rules run as kernels (kernels/optim.cl)."""

from __future__ import annotations

import math

import numpy as np

from .parameter import Parameter


class Optimizer:
    """Holds the parameters and the per-parameter state buffers of one update rule."""

    def __init__(self, params, lr: float):
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        for p in self.params:
            if not isinstance(p, Parameter):
                raise TypeError(f"optimizer parameters must be nnlib.Parameter, got {type(p)}")
        if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr >= 0):
            raise ValueError(f"learning rate must be a finite number >= 0, got {lr!r}")
        self.lr = float(lr)
        self.runtime = self.params[0].runtime
        self.steps = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.zero_grad()

    def step(self) -> None:
        raise NotImplementedError

    def _buffers(self) -> dict:
        """State arrays on the device, by name; each a list with one entry per parameter."""
        return {}

    def state_nbytes(self) -> int:
        """Bytes of optimizer state allocated on the device."""
        return sum(a.nbytes for arrays in self._buffers().values() for a in arrays)

    def state_dict(self) -> dict:
        state = {"steps": np.int64(self.steps)}
        for name, arrays in self._buffers().items():
            for i, a in enumerate(arrays):
                state[f"{name}.{i}"] = a.get()
        return state

    def load_state_dict(self, state: dict) -> None:
        for name, arrays in self._buffers().items():
            for i, a in enumerate(arrays):
                host = np.asarray(state[f"{name}.{i}"], dtype=a.dtype)
                if host.shape != a.shape:
                    raise ValueError(f"state {name}.{i}: shape {host.shape}, need {a.shape}")
                a.set(host)
        self.steps = int(state["steps"])


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, as torch.optim.SGD (dampening 0)."""

    def __init__(self, params, lr: float = 0.01, momentum: float = 0.0):
        super().__init__(params, lr)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.momentum = float(momentum)
        self._kernel = self.runtime.kernel("optim", "sgd_update")
        self.velocity = [self.runtime.zeros(p.shape) for p in self.params] if momentum else []

    def _buffers(self) -> dict:
        return {"velocity": self.velocity}

    def step(self) -> None:
        for i, p in enumerate(self.params):
            v = self.velocity[i] if self.velocity else p.grad  # unused without momentum
            self.runtime.launch(self._kernel, (p.size,), None, p.value.data, p.grad.data,
                                v.data, np.int32(p.size), np.float32(self.lr),
                                np.float32(self.momentum))
        self.steps += 1
