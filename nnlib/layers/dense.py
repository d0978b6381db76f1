"""Dense (fully connected) layer: y = act(x @ weight.T + bias), as OpenCL kernels."""

from __future__ import annotations

import numpy as np

from ..activations import ACTIVATIONS, activation_code
from ..parameter import Parameter
from .base import Layer

# Tile sizes of the blocked kernels (samples x neurons per work-item), passed as -D options.
TILE_B, TILE_J = 4, 4
VARIANTS = ("fast", "seed")


def _blocks(n: int, tile: int) -> int:
    return -(-n // tile)


class DenseKernels:
    """The four products of a dense layer on one runtime, in one of two designs.

    ``"seed"``: one work-item per output value (the source article's design);
    ``"fast"``: register-blocked tiles (the default). Each method only enqueues work.
    """

    def __init__(self, runtime, variant: str = "fast"):
        if variant not in VARIANTS:
            raise ValueError(f"unknown dense variant {variant!r}; choose one of {VARIANTS}")
        self.runtime, self.variant = runtime, variant
        opts = (f"-DTB={TILE_B}", f"-DTJ={TILE_J}")
        suffix = "_seed" if variant == "seed" else ""
        k = lambda name: runtime.kernel("dense", name, opts)  # noqa: E731
        self._forward = k("dense_forward" + suffix)
        self._input = k("dense_backward_input" + suffix)
        self._weight = k("dense_backward_weight" + suffix)
        self._bias = k("dense_backward_bias")

    def forward(self, x, w, b, y, act: int):
        batch, n_in = x.shape
        n_out = w.shape[0]
        if self.variant == "seed":
            grid = (n_out, batch)
        else:
            grid = (_blocks(n_out, TILE_J), _blocks(batch, TILE_B))
        return self.runtime.launch(self._forward, grid, None, x.data, w.data, b.data, y.data,
                                   np.int32(batch), np.int32(n_in), np.int32(n_out),
                                   np.int32(act))

    def backward_input(self, dz, w, dx):
        batch, n_out = dz.shape
        n_in = w.shape[1]
        grid = (n_in, batch if self.variant == "seed" else _blocks(batch, TILE_B))
        return self.runtime.launch(self._input, grid, None, dz.data, w.data, dx.data,
                                   np.int32(batch), np.int32(n_in), np.int32(n_out))

    def backward_weight(self, dz, x, dw, db):
        batch, n_out = dz.shape
        n_in = x.shape[1]
        grid = (n_in, n_out if self.variant == "seed" else _blocks(n_out, TILE_J))
        self.runtime.launch(self._weight, grid, None, dz.data, x.data, dw.data,
                            np.int32(batch), np.int32(n_in), np.int32(n_out))
        return self.runtime.launch(self._bias, (n_out,), None, dz.data, db.data,
                                   np.int32(batch), np.int32(n_out))


class Dense(Layer):
    """A fully connected layer with ``weight`` (n_out, n_in) and ``bias`` (n_out,).

    Initialised like ``torch.nn.Linear``: uniform in +-1/sqrt(n_in), from ``seed``.
    ``activation`` is one of none, tanh, sigmoid, relu, leaky_relu, softmax.
    """

    def __init__(self, n_in: int, n_out: int, activation: str = "none", seed: int = 0,
                 variant: str = "fast", runtime=None):
        super().__init__(runtime)
        for label, n in (("n_in", n_in), ("n_out", n_out)):
            if not isinstance(n, (int, np.integer)) or n < 1:
                raise ValueError(f"Dense: {label} must be a positive integer, got {n!r}")
        self.n_in, self.n_out = int(n_in), int(n_out)
        self.activation, self.act = activation, activation_code(activation)
        self.seed = seed
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(n_in)
        self.weight = Parameter(rng.uniform(-bound, bound, (n_out, n_in)), "weight",
                                block_size=self.n_in, runtime=self.runtime)
        self.bias = Parameter(rng.uniform(-bound, bound, n_out), "bias", block_size=1,
                              runtime=self.runtime)
        self.kernels = DenseKernels(self.runtime, variant)
        self._act_backward = self.runtime.kernel("activation", "activation_backward")
        self._softmax = self.runtime.kernel("activation", "softmax_rows")
        self._softmax_backward = self.runtime.kernel("activation", "softmax_backward_rows")
        self._x = self._y = None

    @property
    def variant(self) -> str:
        return self.kernels.variant

    def __repr__(self):
        return f"Dense({self.n_in} -> {self.n_out}, {self.activation})"

    def config(self) -> dict:
        return {"n_in": self.n_in, "n_out": self.n_out, "activation": self.activation,
                "seed": self.seed, "variant": self.variant}

    def parameters(self) -> list:
        return [self.weight, self.bias]

    def forward(self, x):
        x = self.runtime.to_device(x, "Dense input", shape=(None, self.n_in))
        batch = x.shape[0]
        if batch == 0:
            raise ValueError("Dense input: batch is empty")
        y = self.runtime.empty((batch, self.n_out))
        self.kernels.forward(x, self.weight.value, self.bias.value, y, self.act)
        if self.act == ACTIVATIONS["softmax"]:
            self.runtime.launch(self._softmax, (batch,), None, y.data, np.int32(batch),
                                np.int32(self.n_out))
        self._x, self._y = x, y
        return y

    def _require_forward(self):
        if self._x is None:
            raise RuntimeError("Dense.backward called before forward")

    def backward(self, grad_out):
        """dL/dx from dL/dy; accumulates weight.grad and bias.grad."""
        self._require_forward()
        dy = self.runtime.to_device(grad_out, "Dense grad_out", shape=self._y.shape)
        dz = self.runtime.empty(dy.shape)
        if self.act == ACTIVATIONS["softmax"]:
            rows, cols = dy.shape
            self.runtime.launch(self._softmax_backward, (rows,), None, self._y.data, dy.data,
                                dz.data, np.int32(rows), np.int32(cols))
        else:
            self.runtime.launch(self._act_backward, (dy.size,), None, self._y.data, dy.data,
                                dz.data, np.int32(dy.size), np.int32(self.act))
        return self.backward_preactivation(dz)

    def backward_preactivation(self, dz):
        """dL/dx from dL/dz (z = x W^T + b, before the activation); accumulates grads."""
        self._require_forward()
        self.kernels.backward_weight(dz, self._x, self.weight.grad, self.bias.grad)
        dx = self.runtime.empty(self._x.shape)
        self.kernels.backward_input(dz, self.weight.value, dx)
        return dx
