"""1-D convolution over multivariate sequences: Conv1d (real) and ComplexConv1d (kernels/conv.cl).

Geometry, the same for both layers:
  input  x (batch, variables, length);
  weight (groups, filters, window), groups = variables (independent filters per variable,
         the seed's design) or 1 with ``shared=True`` (one filter bank for all variables);
  bias   (groups, filters);
  output (batch, variables, filters, out_len) for ``layout="channels"`` (read it as
         (batch, variables * filters, out_len) to stack another Conv1d), or
         (batch, variables, out_len, filters) for ``layout="tokens"`` (one feature vector per
         window, e.g. a patch embedding);
  out_len = (length - window) // step + 1; length < window is an error.
ComplexConv1d stores its complex weights as float32 arrays with a trailing axis (re, im),
which is float2 on the device; their gradients are dL/dRe + i dL/dIm.

Taught in notebooks/05_complex_and_fft.
"""

from __future__ import annotations

import numpy as np

from ..codes import ACTIVATIONS, COMPLEX_ACTIVATIONS, activation_code
from ..parameter import Parameter
from ..sizes import ceil_div
from .base import Layer, check_seed, positive_int

LAYOUTS = ("channels", "tokens")


def forward_tile(rt) -> tuple:
    """(positions, filters) of a work-item's tile in cconv1d_forward_blocked: as many
    positions as the device's preferred float vector width (4 to 16: real and imaginary
    parts are separate vectors), 4 filters (8 vector accumulators)."""
    return min(max(rt.vector_width, 4), 16), 4


class _Conv1dBase(Layer):
    """Geometry, parameters' shapes, input checks and launches shared by both layers."""

    dtype = np.float32
    prefix = ""  # kernel names: conv1d_* or cconv1d_*

    def __init__(self, window, step, filters, variables, shared, layout, seed, runtime):
        super().__init__(runtime)
        name = type(self).__name__
        self.window = positive_int(name, "window", window)
        self.step = positive_int(name, "step", step)
        self.filters = positive_int(name, "filters", filters)
        self.variables = positive_int(name, "variables", variables)
        if layout not in LAYOUTS:
            raise ValueError(f"{name}: unknown layout {layout!r}; choose one of {LAYOUTS}")
        self.shared, self.layout, self.seed = bool(shared), layout, check_seed(name, seed)
        self.groups = 1 if self.shared else self.variables
        self._forward, self._input, self._weight = (
            self.runtime.launcher("conv", f"{self.prefix}conv1d_{product}")
            for product in ("forward", "backward_input", "backward_weight"))
        self._blocked = None  # a register-blocked forward for step 1, if the layer has one
        self._x = self._y = None

    def out_len(self, length: int) -> int:
        """Output positions for an input of ``length``: (length - window) // step + 1."""
        if length < self.window:
            raise ValueError(f"{type(self).__name__}: input length {length} is shorter than "
                             f"the window {self.window}")
        return (length - self.window) // self.step + 1

    def output_shape(self, batch: int, length: int) -> tuple:
        t = self.out_len(length)
        tail = (self.filters, t) if self.layout == "channels" else (t, self.filters)
        return (batch, self.variables) + tail

    def config(self) -> dict:
        return {"window": self.window, "step": self.step, "filters": self.filters,
                "variables": self.variables, "activation": self.activation,
                "shared": self.shared, "layout": self.layout, "seed": self.seed}

    def parameters(self) -> list:
        return [self.weight, self.bias]

    def __repr__(self):
        kind = "shared" if self.shared else "per-variable"
        return (f"{type(self).__name__}(window={self.window}, step={self.step}, "
                f"filters={self.filters} {kind}, variables={self.variables}, "
                f"{self.activation}, {self.layout})")

    def _take_input(self, x):
        name = f"{type(self).__name__} input"
        x = self.runtime.to_device(x, name, shape=(None, self.variables, None),
                                   dtype=self.dtype)
        if x.shape[0] == 0:
            raise ValueError(f"{name}: batch is empty")
        self.out_len(x.shape[2])
        return x

    def _geometry(self, x):
        batch, _, length = x.shape
        t = self.out_len(length)
        sf, st = (t, 1) if self.layout == "channels" else (1, self.filters)
        return [np.int32(v) for v in (batch * self.variables, self.variables, length,
                                      self.window, self.step, self.filters, t, self.groups,
                                      sf, st)]

    def _conv_forward(self, x, out, *extra):
        geo = self._geometry(x)
        rows, t = int(geo[0]), int(geo[6])
        if self._blocked is not None and self.step == 1:
            cv, cf = self._tile
            self._blocked((ceil_div(t, cv), ceil_div(self.filters, cf), rows),
                          None, x.data, self.weight.value.data, self.bias.value.data,
                          out.data, *geo[:4], *geo[5:])
            return
        self._forward((t, self.filters, rows), None, x.data,
                      self.weight.value.data, self.bias.value.data, out.data, *geo,
                      *extra)

    def _conv_backward(self, dz):
        """dL/dx from dL/dz (before the activation); accumulates weight.grad and bias.grad."""
        x, geo = self._x, self._geometry(self._x)
        rows, length = int(geo[0]), x.shape[2]
        self._weight((self.window + 1, self.filters, self.groups), None,
                     dz.data, x.data, self.weight.grad.data, self.bias.grad.data, *geo)
        dx = self.runtime.empty(x.shape, self.dtype)
        self._input((length, rows), None, dz.data,
                    self.weight.value.data, dx.data, *geo)
        return dx

    def release(self) -> None:
        self._x = self._y = None

    def _take_grad(self, grad_out):
        if self._x is None:
            raise RuntimeError(f"{type(self).__name__}.backward called before forward")
        return self.runtime.to_device(grad_out, f"{type(self).__name__} grad_out",
                                      shape=self._y.shape, dtype=self.dtype)


class Conv1d(_Conv1dBase):
    """Real 1-D convolution, y = act(z) with z[b, v, f, t] = bias[g, f]
    + sum_k weight[g, f, k] x[b, v, t*step + k] (see the module docstring for the shapes).

    ``activation``: none, tanh, sigmoid, relu, leaky_relu. Initialised like torch.nn.Conv1d:
    uniform in +-1/sqrt(window). Adam-mini blocks: one per filter (weight), one per bias.
    """

    def __init__(self, window: int, step: int, filters: int, variables: int,
                 activation: str = "none", shared: bool = False, layout: str = "channels",
                 seed: int = 0, runtime=None):
        super().__init__(window, step, filters, variables, shared, layout, seed, runtime)
        self.act = activation_code(activation)
        if self.act == ACTIVATIONS["softmax"]:
            raise ValueError("Conv1d: softmax is not an elementwise activation")
        self.activation = activation
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(self.window)
        shape = (self.groups, self.filters)
        self.weight = Parameter(rng.uniform(-bound, bound, shape + (self.window,)), "weight",
                                block_size=self.window, runtime=self.runtime)
        self.bias = Parameter(rng.uniform(-bound, bound, shape), "bias", block_size=1,
                              runtime=self.runtime)
        self._act_backward = self.runtime.launcher("activation", "activation_backward")

    def forward(self, x):
        x = self._take_input(x)
        y = self.runtime.empty(self.output_shape(x.shape[0], x.shape[2]))
        self._conv_forward(x, y, np.int32(self.act))
        self._x, self._y = x, y
        return y

    def backward(self, grad_out):
        """dL/dx from dL/dy; accumulates weight.grad and bias.grad."""
        dy = self._take_grad(grad_out)
        dz = self.runtime.empty(dy.shape)
        self._act_backward((dy.size,), None, self._y.data, dy.data,
                           dz.data, np.int32(dy.size), np.int32(self.act))
        return self._conv_backward(dz)


class ComplexConv1d(_Conv1dBase):
    """Complex 1-D convolution on complex64 inputs: y = act(z), z = bias + sum_k w x with
    complex w, bias (``weight.value`` is float32 (groups, filters, window, 2), (re, im)).

    Gradients follow the conjugate convention: G_x = conj(w) G_z, G_w = sum conj(x) G_z, so
    ``w -= lr * weight.grad`` decreases a real loss. ``activation``: none, tanh (complex,
    holomorphic), split_sigmoid (sigmoid of Re and Im), modrelu (relu(|z| + b) z/|z| with
    the fixed threshold ``modrelu_b`` <= 0). Initialised uniform in +-1/sqrt(2 window) for
    both parts. Adam-mini blocks: one per filter (2 window floats), one per complex bias.
    """

    dtype = np.complex64
    prefix = "c"

    def __init__(self, window: int, step: int, filters: int, variables: int,
                 activation: str = "none", shared: bool = False, layout: str = "channels",
                 modrelu_b: float = -0.5, seed: int = 0, runtime=None):
        super().__init__(window, step, filters, variables, shared, layout, seed, runtime)
        if activation not in COMPLEX_ACTIVATIONS:
            raise ValueError(f"ComplexConv1d: unknown activation {activation!r}; choose one "
                             f"of {list(COMPLEX_ACTIVATIONS)}")
        if not np.isfinite(modrelu_b) or modrelu_b > 0:
            raise ValueError(f"ComplexConv1d: modrelu_b must be <= 0, got {modrelu_b!r}")
        self.activation, self.act = activation, COMPLEX_ACTIVATIONS[activation]
        self.modrelu_b = float(modrelu_b)
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(2 * self.window)
        shape = (self.groups, self.filters)
        self.weight = Parameter(rng.uniform(-bound, bound, shape + (self.window, 2)), "weight",
                                block_size=2 * self.window, runtime=self.runtime)
        self.bias = Parameter(rng.uniform(-bound, bound, shape + (2,)), "bias", block_size=2,
                              runtime=self.runtime)
        self._act = [self.runtime.launcher("conv", f"complex_activation_{s}")
                     for s in ("forward", "backward")]
        self._tile = forward_tile(self.runtime)
        self._blocked = self.runtime.launcher("conv", "cconv1d_forward_blocked",
                                            (f"-DCV={self._tile[0]}", f"-DCF={self._tile[1]}"))
        self._z = None

    def release(self) -> None:
        super().release()
        self._z = None

    def config(self) -> dict:
        return {**super().config(), "modrelu_b": self.modrelu_b}

    def complex_weight(self) -> np.ndarray:
        """The weights as a complex128 numpy array (groups, filters, window)."""
        w = self.weight.numpy().astype(np.float64)
        return w[..., 0] + 1j * w[..., 1]

    def complex_bias(self) -> np.ndarray:
        b = self.bias.numpy().astype(np.float64)
        return b[..., 0] + 1j * b[..., 1]

    def forward(self, x):
        x = self._take_input(x)
        z = self.runtime.empty(self.output_shape(x.shape[0], x.shape[2]), np.complex64)
        self._conv_forward(x, z)
        y = z
        if self.act:
            y = self.runtime.empty(z.shape, np.complex64)
            self._act[0]((z.size,), None, z.data, y.data,
                         np.int32(z.size), np.int32(self.act),
                         np.float32(self.modrelu_b))
        self._x, self._z, self._y = x, z, y
        return y

    def backward(self, grad_out):
        """G_x from G_y; accumulates weight.grad and bias.grad (all dL/dRe + i dL/dIm)."""
        gy = self._take_grad(grad_out)
        gz = gy
        if self.act:
            gz = self.runtime.empty(gy.shape, np.complex64)
            self._act[1]((gy.size,), None, self._z.data, self._y.data,
                         gy.data, gz.data, np.int32(gy.size), np.int32(self.act),
                         np.float32(self.modrelu_b))
        return self._conv_backward(gz)
