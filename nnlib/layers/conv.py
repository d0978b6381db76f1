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

from typing import NamedTuple

import numpy as np

from .. import tuning
from ..codes import ACTIVATIONS, COMPLEX_ACTIVATIONS, activation_code
from ..parameter import Parameter
from ..registry import LAYERS
from ..sizes import ceil_div, vector_width
from .activation import DeviceActivation
from .base import Layer, check_seed, positive_int
from .dense_params import lanes_by_default, lanes_work_group

LAYOUTS = ("channels", "tokens")


class Geometry(NamedTuple):
    """The sizes conv.cl's kernels take, named and ordered as their arguments (int32): rows
    = batch x variables, out_len output positions, groups of filters, and the output's
    strides between filters (sf) and positions (st), which make its layout."""

    rows: np.int32
    variables: np.int32
    length: np.int32
    window: np.int32
    step: np.int32
    filters: np.int32
    out_len: np.int32
    groups: np.int32
    sf: np.int32
    st: np.int32

    def take(self, *names) -> tuple:
        """The values of ``names``, in that order (for a kernel that takes only some)."""
        return tuple(getattr(self, name) for name in names)

TILE_WIDTHS = (4, 8, 16)  # conv.cl's CV
LANES_FILTERS = (4, 2, 8)  # conv.cl's CF in the lanes design, the default first


def tile_candidates(rt) -> list:
    """Tiles of the register-blocked complex kernels, the default first: ``CV`` positions
    (taps for the weight gradient) as one vector, times ``CF`` filters per work-item, and
    ``VLOAD`` (the gradients' loads, 1: vloadN/vstoreN builtins, 0: one float at a time, for
    compilers that call the builtins instead of inlining them, as dense.cl; the forward loads
    by hand always). Default: the device's preferred float vector width (4 to 16), 4
    filters, the builtins; the tuner then tries the default without them, the other widths
    and 2 filters (fewer registers), no wider than the compiler emits natively, with and
    without. A device that vectorises across work-items
    (dense_params.lanes_by_default) takes the lanes design (:func:`lanes_tiles`) by default,
    and the tuner tries the tiles after it."""
    default = {"CV": vector_width(rt.vector_width, TILE_WIDTHS), "CF": 4, "VLOAD": 1}
    out = [default, dict(default, VLOAD=0)] + [
        {"CV": cv, "CF": cf, "VLOAD": v} for v in (1, 0) for cv in (8, 16, 4) for cf in (4, 2)
        if cv <= max(rt.limits.widest_vector, 4)]
    if lanes_by_default(rt):
        out = lanes_tiles(rt) + out
    return [c for i, c in enumerate(out) if c not in out[:i]]


def design(tile: dict) -> str:
    """The step-1 kernels ``tile`` builds: "lanes" (conv.cl's *_lanes) or "blocked"."""
    return "lanes" if tile.get("LANES") else "blocked"


def lanes_tiles(rt) -> list:
    """The lanes design's tiles (conv.cl's *_lanes kernels): work-groups of ``LANES``
    neighbouring positions (dense_params.lanes_work_group), ``CF`` filters per work-item;
    then twice as many lanes."""
    lanes = lanes_work_group(rt)
    out = [{"LANES": lanes, "CF": cf} for cf in LANES_FILTERS]
    return out + [{"LANES": 2 * lanes, "CF": LANES_FILTERS[0]}]


# the parts of a step-1 layer whose tiles are tuned apart: the forward's one kernel, and the
# gradients' three (the padding of G_z and both products), which share theirs
TILE_PARTS = ("forward", "gradients")


def _measure_tile(rt, tile: dict, part: str) -> float:
    """Seconds per forward (``part`` "forward") or per backward ("gradients") of a
    ComplexConv1d with ``tile`` (step 1, tokens, batch 8, 8 variables, length 1024, window
    16, 16 filters: benchmarks.complex's shape)."""
    layer = ComplexConv1d(16, 1, 16, 8, layout="tokens", runtime=rt, _tile=tile)
    rng = np.random.default_rng(0)
    x = rt.to_device(rng.standard_normal((8, 8, 1024)) * (1 + 1j), dtype=np.complex64)
    g = rt.to_device(np.ones(layer.output_shape(8, 1024), np.complex64), dtype=np.complex64)
    layer.forward(x)  # what the backward reads
    run = (lambda: layer.forward(x)) if part == "forward" else (lambda: layer.backward(g))
    return tuning.time_launches(run, rt.queue.finish, launches=2)


def complex_tiles(rt) -> dict:
    """The tiles of the register-blocked complex kernels on ``rt``'s device, by part
    (TILE_PARTS), each tuned on its own: the forward and the gradients run different loops,
    whose best tiles (work-group, filters per work-item) need not be the same."""
    candidates = tile_candidates(rt)
    return {part: tuning.tuned(rt, "conv.complex", part, candidates,
                               lambda tile, part=part: _measure_tile(rt, tile, part),
                               candidates[0])
            for part in TILE_PARTS}


class _Conv1dBase(Layer):
    """Geometry, parameters' shapes, input checks and launches shared by both layers."""

    dtype = np.float32
    prefix = ""  # kernel names: conv1d_* or cconv1d_*
    choices = {"layout": LAYOUTS}  # the arguments that name one of a list

    @classmethod
    def parameter_shapes(cls, config: dict) -> dict:
        """The shape of each parameter for ``config`` (as :meth:`config` returns it); a
        complex value is a trailing axis of 2 floats."""
        groups = 1 if config["shared"] else config["variables"]
        pair = (2,) if cls.dtype == np.complex64 else ()
        return {"weight": (groups, config["filters"], config["window"]) + pair,
                "bias": (groups, config["filters"]) + pair}

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
        self.runtime.check_alloc((self.groups, self.filters, self.window, 2), np.float32,
                                 f"{name} weight")
        self._forward, self._input, self._weight = (
            self.runtime.launcher("conv", f"{self.prefix}conv1d_{product}")
            for product in ("forward", "backward_input", "backward_weight"))
        self._blocked = None  # a register-blocked forward for step 1, if the layer has one

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

    def _geometry(self, x) -> Geometry:
        batch, _, length = x.shape
        t = self.out_len(length)
        sf, st = (t, 1) if self.layout == "channels" else (1, self.filters)
        return Geometry(*(np.int32(v) for v in (
            batch * self.variables, self.variables, length, self.window, self.step,
            self.filters, t, self.groups, sf, st)))

    def _conv_forward(self, x, out, *extra):
        geo = self._geometry(x)
        rows, t = int(geo.rows), int(geo.out_len)
        if self._blocked is not None and self.step == 1:
            cv, cf = self._per_item("forward"), self._tiles["forward"]["CF"]
            self._blocked((ceil_div(t, cv), ceil_div(self.filters, cf), rows),
                          self._local(self._blocked, 3, "forward"), x.data, self.weight.value.data,
                          self.bias.value.data, out.data,
                          *geo.take("rows", "variables", "length", "window", "filters",
                                    "out_len", "groups", "sf", "st"))
            return
        self._forward((t, self.filters, rows), None, x.data,
                      self.weight.value.data, self.bias.value.data, out.data, *geo,
                      *extra)

    def _conv_backward(self, dz):
        """dL/dx from dL/dz (before the activation); accumulates weight.grad and bias.grad."""
        x = self.saved()[0]
        geo = self._geometry(x)
        rows, length = int(geo.rows), x.shape[2]
        self._weight((self.window + 1, self.filters, self.groups), None,
                     dz.data, x.data, self.weight.grad.data, self.bias.grad.data, *geo)
        dx = self.runtime.empty(x.shape, self.dtype)
        self._input((length, rows), None, dz.data,
                    self.weight.value.data, dx.data, *geo)
        return dx

    def _take_grad(self, grad_out):
        """grad_out on the device, checked against the output the last forward saved
        (``save_for_backward(x, y, ...)``)."""
        y = self.saved()[1]
        return self.runtime.to_device(grad_out, f"{type(self).__name__} grad_out",
                                      shape=y.shape, dtype=self.dtype)


@LAYERS.register
class Conv1d(_Conv1dBase):
    """Real 1-D convolution, y = act(z) with z[b, v, f, t] = bias[g, f]
    + sum_k weight[g, f, k] x[b, v, t*step + k] (see the module docstring for the shapes).

    ``activation``: an elementwise one of the activation table (:mod:`nnlib.activations`).
    Initialised like torch.nn.Conv1d: uniform in +-1/sqrt(window). Adam-mini blocks: one per
    filter (weight), one per bias.
    """

    def __init__(self, window: int, step: int, filters: int, variables: int,
                 activation: str = "none", shared: bool = False, layout: str = "channels",
                 seed: int = 0, runtime=None):
        super().__init__(window, step, filters, variables, shared, layout, seed, runtime)
        self.act = activation_code(activation)
        if self.act == ACTIVATIONS["softmax"]:
            raise ValueError("Conv1d: softmax is not an elementwise activation")
        self.activation = activation
        self._activation = DeviceActivation(self.runtime, activation)
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(self.window)
        shapes = self.parameter_shapes(self.config())
        self.weight = Parameter(rng.uniform(-bound, bound, shapes["weight"]), "weight",
                                block_size=self.window, runtime=self.runtime)
        self.bias = Parameter(rng.uniform(-bound, bound, shapes["bias"]), "bias", block_size=1,
                              runtime=self.runtime)

    def forward(self, x):
        x = self._take_input(x)
        out = self.runtime.empty(self.output_shape(x.shape[0], x.shape[2]))
        self._conv_forward(x, out, np.int32(self._activation.in_product))
        y, s = self._activation.apply(out)
        self.save_for_backward(x, y, s)
        return y

    def backward(self, grad_out):
        """dL/dx from dL/dy; accumulates weight.grad and bias.grad."""
        dy = self._take_grad(grad_out)
        return self._conv_backward(self._activation.backward(self.saved()[2], dy))


@LAYERS.register
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
                 modrelu_b: float = -0.5, seed: int = 0, runtime=None, _tile=None):
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
        shapes = self.parameter_shapes(self.config())
        self.weight = Parameter(rng.uniform(-bound, bound, shapes["weight"]), "weight",
                                block_size=2 * self.window, runtime=self.runtime)
        self.bias = Parameter(rng.uniform(-bound, bound, shapes["bias"]), "bias", block_size=2,
                              runtime=self.runtime)
        self._act = [self.runtime.launcher("conv", f"complex_activation_{s}")
                     for s in ("forward", "backward")]
        # each part's tile (TILE_PARTS), tuned; _tile (the tuner's trials, tests): one tile
        # for both parts, or a tile by part
        if not _tile:
            self._tiles = complex_tiles(self.runtime)
        elif set(_tile) == set(TILE_PARTS):
            self._tiles = dict(_tile)
        else:
            self._tiles = dict.fromkeys(TILE_PARTS, _tile)

        def tiled(name, part):
            tile = self._tiles[part]
            return self.runtime.launcher("conv", name, tuple(
                f"-D{k}={v}" for k, v in sorted(tile.items()) if k != "LANES"))
        forward, gradients = self._tiles["forward"], self._tiles["gradients"]
        self._blocked = tiled(f"cconv1d_forward_{design(forward)}", "forward")
        self._pad = tiled("cconv1d_pad_grad", "gradients")
        self._input_blocked = tiled(f"cconv1d_backward_input_{design(gradients)}", "gradients")
        self._weight_blocked = tiled(f"cconv1d_backward_weight_{design(gradients)}",
                                     "gradients")
        self._reduce = tiled("cconv1d_weight_reduce", "gradients")

    def config(self) -> dict:
        return {**super().config(), "modrelu_b": self.modrelu_b}

    def _per_item(self, part: str) -> int:
        """Positions (or taps) per work-item of ``part``'s step-1 kernels: CV, 1 in the lanes
        design."""
        tile = self._tiles[part]
        return 1 if design(tile) == "lanes" else tile["CV"]

    def _local(self, launcher, dims: int, part: str):
        """The local size of a step-1 kernel of ``part``: None (the launcher chooses) for
        the blocked design, (lanes, 1, ...) for the lanes design."""
        lanes = self._tiles[part].get("LANES", 0)
        if not lanes:
            return None
        return (min(lanes, launcher.work_group_size),) + (1,) * (dims - 1)

    def _chunks(self, rows: int) -> int:
        """Chunks the weight gradient splits each group's rows into: enough work-items
        (tap blocks x filter blocks x groups x chunks) to keep every compute unit busy."""
        items = (ceil_div(self.window, self._per_item("gradients"))
                 * ceil_div(self.filters, self._tiles["gradients"]["CF"]) * self.groups)
        per_group = rows // self.variables if self.groups > 1 else rows
        want = 512 * self.runtime.limits.compute_units
        return max(1, min(per_group, ceil_div(want, items)))

    def _conv_backward(self, dz):
        """The register-blocked gradients (step 1 for the input gradient, any step for the
        weights'); accumulates weight.grad and bias.grad, returns G_x."""
        rt, x = self.runtime, self.saved()[0]
        geo = self._geometry(x)
        rows, length = int(geo.rows), x.shape[2]
        cv, cf = self._per_item("gradients"), self._tiles["gradients"]["CF"]
        w, f = self.window, self.filters
        chunks = self._chunks(rows)
        part = rt.empty((chunks, self.groups, f, w + 1), np.complex64)
        self._weight_blocked((ceil_div(w, cv), ceil_div(f, cf), self.groups * chunks),
                             self._local(self._weight_blocked, 3, "gradients"),
                             dz.data, x.data, part.data, *geo, np.int32(chunks))
        self._reduce((w + 1, f, self.groups), None, part.data, self.weight.grad.data,
                     self.bias.grad.data, np.int32(w), np.int32(f), np.int32(self.groups),
                     np.int32(chunks))
        if self.step != 1:
            dx = rt.empty(x.shape, self.dtype)
            self._input((length, rows), None, dz.data, self.weight.value.data, dx.data, *geo)
            return dx
        padded = rt.empty((rows, f, length + w - 1), np.complex64)
        self._pad((length + w - 1, rows), None, dz.data, padded.data,
                  *geo.take("rows", "length", "window", "filters", "out_len", "sf", "st"))
        dx = rt.empty(x.shape, self.dtype)
        self._input_blocked((ceil_div(length, cv), rows),
                            self._local(self._input_blocked, 2, "gradients"),
                            padded.data,
                            self.weight.value.data, dx.data,
                            *geo.take("rows", "variables", "length", "window", "filters",
                                      "groups"))
        return dx

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
        self.save_for_backward(x, y, z)
        return y

    def backward(self, grad_out):
        """G_x from G_y; accumulates weight.grad and bias.grad (all dL/dRe + i dL/dIm)."""
        gy = self._take_grad(grad_out)
        gz = gy
        if self.act:
            _, y, z = self.saved()
            gz = self.runtime.empty(gy.shape, np.complex64)
            self._act[1]((gy.size,), None, z.data, y.data,
                         gy.data, gz.data, np.int32(gy.size), np.int32(self.act),
                         np.float32(self.modrelu_b))
        return self._conv_backward(gz)
