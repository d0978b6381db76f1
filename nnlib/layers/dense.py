"""Dense (fully connected) layer: y = act(x @ weight.T + bias), as OpenCL kernels.

The products run in one of two designs with one interface (``forward``, ``backward_input``,
``backward_weight``): the article's (:mod:`.dense_article`, the teaching path) or the blocked
one (:mod:`.dense_blocked`, the speed path, tuned with :mod:`.dense_params`).

Taught in notebooks/01_dense_kernels, notebooks/03_cpu_vs_gpu.
"""

from __future__ import annotations

import numpy as np

from ..codes import ACTIVATIONS, activation_code
from ..parameter import Parameter
from .base import Layer, check_seed, positive_int
from .dense_article import ArticleDenseKernels
from .dense_blocked import BlockedDenseKernels
from .dense_params import (PRODUCTS, TUNE_SHAPE, TUNE_WIDTH, build_options,  # noqa: F401
                           candidates, default_params, measure, shape_class)

VARIANTS = ("fast", "seed")


def DenseKernels(runtime, variant: str = "fast", params: dict | None = None):
    """The products of a dense layer on ``runtime`` in the design ``variant``: "seed" (the
    article's, one work-item per output) or "fast" (blocked; ``params`` fixes its tuning
    parameters, ``{product: {...}}``)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown dense variant {variant!r}; choose one of {VARIANTS}")
    if variant == "seed":
        return ArticleDenseKernels(runtime)
    return BlockedDenseKernels(runtime, params)


class Dense(Layer):
    """A fully connected layer with ``weight`` (n_out, n_in) and ``bias`` (n_out,).

    Initialised like ``torch.nn.Linear``: uniform in +-1/sqrt(n_in), from ``seed``.
    ``activation`` is one of none, tanh, sigmoid, relu, leaky_relu, softmax.
    """

    def __init__(self, n_in: int, n_out: int, activation: str = "none", seed: int = 0,
                 variant: str = "fast", runtime=None):
        super().__init__(runtime)
        self.n_in, self.n_out = positive_int("Dense", "n_in", n_in), positive_int(
            "Dense", "n_out", n_out)
        self.activation, self.act = activation, activation_code(activation)
        self.seed = check_seed("Dense", seed)
        self.runtime.check_alloc((self.n_out, self.n_in), np.float32, "Dense weight")
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(n_in)
        self.weight = Parameter(rng.uniform(-bound, bound, (n_out, n_in)), "weight",
                                block_size=self.n_in, runtime=self.runtime)
        self.bias = Parameter(rng.uniform(-bound, bound, n_out), "bias", block_size=1,
                              runtime=self.runtime)
        self.kernels = DenseKernels(self.runtime, variant)
        rt = self.runtime
        self._act_backward = rt.launcher("activation", "activation_backward")
        self._softmax = rt.launcher("activation", "softmax_rows")
        self._softmax_backward = rt.launcher("activation", "softmax_backward_rows")

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
        if self.act == ACTIVATIONS["softmax"] and not self.kernels.softmax_in_forward(
                self.n_out):
            self._softmax((batch,), None, y.data, np.int32(batch), np.int32(self.n_out))
        self.save_for_backward(x, y)
        return y

    def backward(self, grad_out):
        """dL/dx from dL/dy; accumulates weight.grad and bias.grad."""
        _, y = self.saved()
        dy = self.runtime.to_device(grad_out, "Dense grad_out", shape=y.shape)
        dz = self.runtime.empty(dy.shape)
        if self.act == ACTIVATIONS["softmax"]:
            rows, cols = dy.shape
            self._softmax_backward((rows,), None, y.data, dy.data, dz.data,
                                   np.int32(rows), np.int32(cols))
        else:
            self._act_backward((dy.size,), None, y.data, dy.data, dz.data,
                               np.int32(dy.size), np.int32(self.act))
        return self.backward_preactivation(dz)

    def backward_preactivation(self, dz, input_act: str = "none", input_grad: bool = True,
                               accumulate: bool = True):
        """dL/dx from dL/dz (z = x W^T + b, before the activation); accumulates grads.

        For Sequential's training step: ``input_act`` (the previous layer's activation, not
        softmax) returns that layer's dL/dz instead, in the same kernel; ``input_grad=False``
        returns None (the first layer); ``accumulate=False`` overwrites the grads.
        """
        x, _ = self.saved()
        if input_act == "softmax":
            raise ValueError("backward_preactivation: softmax's derivative is not elementwise")
        self.kernels.backward_weight(dz, x, self.weight.grad, self.bias.grad, accumulate)
        if not input_grad:
            return None
        dx = self.runtime.empty(x.shape)
        self.kernels.backward_input(dz, self.weight.value, dx, x,
                                    activation_code(input_act))
        return dx
