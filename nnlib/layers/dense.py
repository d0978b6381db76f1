"""Dense (fully connected) layer: y = act(x @ weight.T + bias), as OpenCL kernels.

The products run in one of two designs with one interface (``forward``, ``backward_input``,
``backward_weight``), named by ``variant``: "article" (:mod:`.dense_article`, one work-item per
output, as the source article) or "blocked" (:mod:`.dense_blocked`, register tiles, tuned with
:mod:`.dense_params`; the default).

Taught in notebooks/01_dense_kernels, notebooks/03_cpu_vs_gpu.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..activations import activation
from ..codes import ACTIVATIONS, activation_code
from ..parameter import Parameter
from ..registry import LAYERS
from .activation import DeviceActivation
from .base import Layer, check_seed, positive_int
from .dense_article import ArticleDenseKernels
from .dense_blocked import BlockedDenseKernels, measure, measure_one  # noqa: F401
from .dense_params import (PRODUCTS, TUNE_ALSO, TUNE_SHAPE, build_options,  # noqa: F401
                           candidates, default_params, shape_class)

VARIANTS = ("blocked", "article")
# The names of nnlib 0.1, accepted with a DeprecationWarning until the next release.
RENAMED = {"fast": "blocked", "seed": "article"}


def variant_name(variant: str) -> str:
    """``variant`` checked, an old name replaced by its new one (with a warning)."""
    if variant in RENAMED:
        warnings.warn(f"dense variant {variant!r} is now called {RENAMED[variant]!r}",
                      DeprecationWarning, stacklevel=4)
        return RENAMED[variant]
    if variant not in VARIANTS:
        raise ValueError(f"unknown dense variant {variant!r}; choose one of {VARIANTS}")
    return variant


def DenseKernels(runtime, variant: str = "blocked", params: dict | None = None):
    """The products of a dense layer on ``runtime`` in the design ``variant``: "article"
    (one work-item per output) or "blocked" (``params`` fixes its tuning parameters,
    ``{product: {...}}``)."""
    if variant_name(variant) == "article":
        return ArticleDenseKernels(runtime)
    return BlockedDenseKernels(runtime, params)


@LAYERS.register
class Dense(Layer):
    """A fully connected layer with ``weight`` (n_out, n_in) and ``bias`` (n_out,).

    Initialised like ``torch.nn.Linear``: uniform in +-1/sqrt(n_in), from ``seed``.
    ``activation``: a name of the activation table (:mod:`nnlib.activations`); ``variant``
    the design of its kernels, "blocked" or "article" (:func:`DenseKernels`).
    """

    choices = {"variant": VARIANTS + tuple(RENAMED)}  # arguments that name one of a list

    @staticmethod
    def parameter_shapes(config: dict) -> dict:
        """The shape of each parameter for ``config`` (as :meth:`config` returns it)."""
        return {"weight": (config["n_out"], config["n_in"]), "bias": (config["n_out"],)}

    def __init__(self, n_in: int, n_out: int, activation: str = "none", seed: int = 0,
                 variant: str = "blocked", runtime=None):
        super().__init__(runtime)
        self.n_in, self.n_out = positive_int("Dense", "n_in", n_in), positive_int(
            "Dense", "n_out", n_out)
        self.activation, self.act = activation, activation_code(activation)
        self.seed = check_seed("Dense", seed)
        self.runtime.check_alloc((self.n_out, self.n_in), np.float32, "Dense weight")
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(n_in)
        shapes = self.parameter_shapes({"n_in": n_in, "n_out": n_out})
        self.weight = Parameter(rng.uniform(-bound, bound, shapes["weight"]), "weight",
                                block_size=self.n_in, runtime=self.runtime)
        self.bias = Parameter(rng.uniform(-bound, bound, shapes["bias"]), "bias", block_size=1,
                              runtime=self.runtime)
        self.kernels = DenseKernels(self.runtime, variant)
        rt = self.runtime
        self._activation = DeviceActivation(rt, activation)
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
        out = self.runtime.empty((batch, self.n_out))
        self.kernels.forward(x, self.weight.value, self.bias.value, out,
                             self._activation.in_product)
        if self.act == ACTIVATIONS["softmax"] and not self.kernels.softmax_in_forward(
                self.n_out):
            self._softmax((batch,), None, out.data, np.int32(batch), np.int32(self.n_out))
        y, s = self._activation.apply(out)
        self.save_for_backward(x, y, s)
        return y

    def backward(self, grad_out, into=None, accumulate: bool = True):
        """dL/dx from dL/dy; accumulates weight.grad and bias.grad (overwrites them with
        ``accumulate=False``). ``into``: see :meth:`backward_preactivation`."""
        _, y, s = self.saved()
        dy = self.runtime.to_device(grad_out, "Dense grad_out", shape=y.shape)
        dz_t = None  # dz transposed, where the kernels write it with dz
        if self.act == ACTIVATIONS["softmax"]:
            rows, cols = dy.shape
            dz = self.runtime.empty(dy.shape)
            self._softmax_backward((rows,), None, y.data, dy.data, dz.data,
                                   np.int32(rows), np.int32(cols))
        elif self.act == ACTIVATIONS["none"]:
            dz = dy
        else:
            dz, dz_t = self.kernels.backward_gate(s, dy, self.act, self.n_in)
        return self.backward_preactivation(dz, accumulate=accumulate, into=into, dz_t=dz_t)

    def backward_preactivation(self, dz, input_act: str = "none", input_grad: bool = True,
                               accumulate: bool = True, into=None, dz_t=None):
        """dL/dx from dL/dz (z = x W^T + b, before the activation); accumulates grads.

        For Sequential's training step: ``input_act`` (the previous layer's activation, one
        whose derivative is written with its output y, this layer's input) returns that
        layer's dL/dz instead, in the same kernel; ``input_grad=False`` returns None (the
        first layer); ``accumulate=False`` overwrites the grads; ``into`` (a device array of
        the input's shape, not dz's buffer) gets dL/dx added and is returned, in place of a
        new array (a residual branch's sum without a launch of its own); ``dz_t``: dz
        transposed, where the kernels' ``backward_gate`` wrote it with dz.
        """
        x = self.saved()[0]
        needs = activation(input_act).needs
        if needs != "y":
            raise ValueError(f"backward_preactivation: {input_act}'s derivative "
                             + ("is not elementwise" if needs == "row" else
                                "needs its layer's z, not this layer's input"))
        self.kernels.backward_weight(dz, x, self.weight.grad, self.bias.grad, accumulate,
                                     dz_t)
        if not input_grad:
            return None
        if into is None:
            dx = self.runtime.empty(x.shape)
            self.kernels.backward_input(dz, self.weight.value, dx, x,
                                        activation_code(input_act))
            return dx
        if input_act != "none" or self.runtime.to_device(
                into, "Dense into", shape=x.shape) is not into or into.data == dz.data:
            raise ValueError(f"backward_preactivation: into must be a float32 device array "
                             f"of the input's shape {x.shape}, apart from dz, without "
                             f"input_act; got {getattr(into, 'shape', into)}")
        self.kernels.backward_input(dz, self.weight.value, into, accumulate=True)
        return into
