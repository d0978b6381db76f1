"""Dense (fully connected) layer: y = act(x @ weight.T + bias), as OpenCL kernels."""

from __future__ import annotations

import numpy as np

from ..activations import ACTIVATIONS, activation_code
from .. import tuning
from ..launcher import Launcher
from ..parameter import Parameter
from .base import Layer, check_seed, positive_int

VARIANTS = ("fast", "seed")
PRODUCTS = ("forward", "input", "weight")  # the three products of the fast design
# Batch classes: the tile that suits batch 64 wastes most of its rows on batch 1, so each
# class is tuned on its own representative problem (batch, 512 -> 512).
BATCH_CLASSES = ((1, "b1"), (4, "b4"), (None, "b64"))
TUNE_SHAPE = {"b1": 1, "b4": 4, "b64": 64}
TUNE_WIDTH = 512


def _blocks(n: int, tile: int) -> int:
    return -(-n // tile)


def shape_class(product: str, batch: int) -> str:
    """The batch class whose tuned parameters ``product`` uses at ``batch``. dW sums over
    the batch (its tile runs along n_out and n_in): one class serves every batch."""
    if product == "weight":
        return "b64"
    return next(name for limit, name in BATCH_CLASSES if limit is None or batch <= limit)


def _vector_widths(rt) -> list:
    """Vector widths worth trying: the device's preference (at least 4) and twice it (two
    registers per vector: more independent accumulators)."""
    base = max(4, rt.vector_width)
    return sorted({base, min(16, 2 * base)})


def _tn_vectors(vw: int) -> int:
    """gemm_tn's vectors per tile row: 16 columns (two AVX2 registers, the width of the
    classic 6 x 16 CPU micro-kernel), at least one vector."""
    return max(1, 16 // vw)


# gemm_tn's k-block copied to local memory (0: none): the input gradient reads W's columns
# over all n_out rows, the weight gradient x's over the batch.
K_BLOCK = {"input": 256, "weight": 64}


def default_params(rt, product: str) -> dict:
    """The parameters used without tuning (NNLIB_TUNE=0): measured good on PoCL CPUs. A GPU
    (or the GPU profile) gets work-groups of 64 (a few warps); a CPU runs a work-group as one
    task, where 16 work-items of large tiles are plenty."""
    vw = max(4, rt.vector_width)
    common = {"VW": vw, "VLOAD": 1, "FMA": 0, "LOCAL": 64 if rt.is_gpu else 16}
    if product == "forward":
        return {"NT_I": 2, **common}
    return {"TN_R": 6, "TN_V": _tn_vectors(vw), "TN_KB": 0 if rt.is_gpu else K_BLOCK[product],
            **common}


def candidates(rt, product: str, shape: str) -> list:
    """The parameter sets the tuner tries for ``product`` on problems of batch class
    ``shape``; every one is a correct kernel (tests/test_dense.py runs them all).

    Most promising first (a search that runs out of time goes on from there next time): the
    default (so tuning never loses to no tuning) and its loads by hand; tile rows suited to
    the batch class, each with vloadN and by hand, at the device's vector width; the middle
    tile at twice the width; for the gradients, the default without and with another
    local-memory k-block and with the work-groups in column order; the default with fma()
    and with a work-group four times larger.
    Few candidates: each costs PoCL a compilation of 1-3 s on first use."""
    rows = {"b1": (1, 2), "b4": (2, 4), "b64": (2, 4, 6)}[shape]
    if product == "weight":  # rows of dW (n_out), whatever the batch
        rows = (4, 6, 8)
    base = default_params(rt, product)
    wide = min(16, 2 * base["VW"])

    def tile(r, vw):
        if product == "forward":
            return {"NT_I": r, "VW": vw}
        return {"TN_R": r, "TN_V": _tn_vectors(vw), "VW": vw}

    out = [base, dict(base, VLOAD=0)]
    out += [dict(base, **tile(r, base["VW"]), VLOAD=v) for r in rows for v in (1, 0)]
    out.append(dict(base, **tile(rows[len(rows) // 2], wide), VLOAD=0))
    if product != "forward":
        other = 4 * K_BLOCK[product] if base["TN_KB"] else K_BLOCK[product]
        out += [dict(base, TN_KB=kb, VLOAD=v) for kb in (0, other) for v in (1, 0)]
        out.append(dict(base, TN_ORDER=1))
    out += [dict(base, FMA=1), dict(base, LOCAL=4 * base["LOCAL"])]
    return [c for i, c in enumerate(out) if c not in out[:i]]


def build_options(params: dict) -> tuple:
    return tuple(f"-D{k}={v}" for k, v in sorted(params.items()) if k != "LOCAL")


class DenseKernels:
    """The products of a dense layer on one runtime, in one of two designs.

    ``"seed"``: one work-item per output value (the source article's design);
    ``"fast"``: register-blocked kernels (the default), ``gemm_nt`` for the forward pass and
    ``gemm_tn`` for both gradients. Their parameters (tile rows, vector width, loads by
    ``vloadN`` or by hand, ``fma`` or plain arithmetic, work-group size) are chosen per device,
    product and batch class by :mod:`nnlib.tuning` on first use, or fixed with ``params``
    (``{product: {...}}``, e.g. for tests). Each method only enqueues work.
    """

    def __init__(self, runtime, variant: str = "fast", params: dict | None = None):
        if variant not in VARIANTS:
            raise ValueError(f"unknown dense variant {variant!r}; choose one of {VARIANTS}")
        self.runtime, self.variant = runtime, variant
        self._fixed = dict(params or {})
        for product in self._fixed:
            if product not in PRODUCTS:
                raise ValueError(f"unknown dense product {product!r}; choose from {PRODUCTS}")
        self._launchers: dict = {}  # (product, batch class) -> (Launcher, params)
        if variant == "seed":
            k = lambda name: runtime.kernel("dense", name)  # noqa: E731
            self._forward = k("dense_forward_seed")
            self._input = k("dense_backward_input_seed")
            self._weight = k("dense_backward_weight_seed")
            self._bias = k("dense_backward_bias")
            self._act_backward = runtime.kernel("activation", "activation_backward")

    def params(self, product: str, batch: int) -> dict:
        """The parameters ``product`` runs with at ``batch`` on this device."""
        if product in self._fixed:
            return dict(self._fixed[product])
        shape = shape_class(product, batch)
        return tuning.tuned(self.runtime, f"dense.{product}", shape,
                            candidates(self.runtime, product, shape),
                            lambda p: measure(self.runtime, product, shape, p),
                            default_params(self.runtime, product))

    def _launcher(self, product: str, batch: int):
        key = (product, shape_class(product, batch))
        if key not in self._launchers:
            params = self.params(product, batch)
            kernel = self.runtime.kernel("dense", "gemm_nt" if product == "forward" else
                                         "gemm_tn", build_options(params))
            local = (min(params["LOCAL"], self.runtime.work_group_size(kernel)), 1)
            self._launchers[key] = (Launcher(self.runtime, kernel), params, local)
        return self._launchers[key]

    def forward(self, x, w, b, y, act: int):
        batch, n_in = x.shape
        n_out = w.shape[0]
        i32 = np.int32
        if self.variant == "seed":
            return self.runtime.launch(self._forward, (n_out, batch), None, x.data, w.data,
                                       b.data, y.data, i32(batch), i32(n_in), i32(n_out),
                                       i32(act))
        launcher, p, local = self._launcher("forward", batch)
        grid = (_blocks(batch, p["NT_I"]), _blocks(n_out, 4))
        return launcher(grid, local, x.data, w.data, y.data, i32(batch), i32(n_out),
                        i32(n_in), b.data, i32(act))

    def _tn(self, product, batch, p, p_k, p_r, b, c, nrows, ncols, nk, accumulate, gate=None,
            act=0, rowsum=None):
        """C (+)= P^T B on gemm_tn, times act'(gate) if ``act``; ``rowsum`` (a device array)
        also gets P's column sums."""
        launcher, prm, local = self._launcher(product, batch)
        grid = (_blocks(nrows, prm["TN_R"]), _blocks(ncols, prm["TN_V"] * prm["VW"]))
        i32 = np.int32
        return launcher(grid, local, p.data, i32(p_k), i32(p_r), b.data, c.data,
                        i32(nrows), i32(ncols), i32(nk), i32(accumulate),
                        (c if gate is None else gate).data, i32(act), i32(rowsum is not None),
                        (c if rowsum is None else rowsum).data)

    def backward_input(self, dz, w, dx, x=None, act: int = 0):
        """dx = dz W; with ``act``, times act'(x) (x = the previous layer's output y)."""
        batch, n_out = dz.shape
        n_in = w.shape[1]
        if self.variant == "fast":  # dX = (dZ^T)^T W
            return self._tn("input", batch, dz, 1, n_out, w, dx, batch, n_in, n_out, False,
                            x, act)
        event = self.runtime.launch(self._input, (n_in, batch), None, dz.data, w.data,
                                    dx.data, np.int32(batch), np.int32(n_in), np.int32(n_out))
        if act:
            event = self.runtime.launch(self._act_backward, (dx.size,), None, x.data, dx.data,
                                        dx.data, np.int32(dx.size), np.int32(act))
        return event

    def backward_weight(self, dz, x, dw, db, accumulate: bool = True):
        """dw += dz^T x and db += column sums of dz (or = without ``accumulate``)."""
        batch, n_out = dz.shape
        n_in = x.shape[1]
        if self.variant == "fast":  # one launch
            return self._tn("weight", batch, dz, n_out, 1, x, dw, n_out, n_in, batch,
                            accumulate, rowsum=db)
        if not accumulate:
            self.runtime.fill(dw, 0)
            self.runtime.fill(db, 0)
        i32 = np.int32
        self.runtime.launch(self._weight, (n_in, n_out), None, dz.data, x.data, dw.data,
                            i32(batch), i32(n_in), i32(n_out))
        return self.runtime.launch(self._bias, (n_out,), None, dz.data, db.data, i32(batch),
                                   i32(n_out))


def measure(rt, product: str, shape: str, params: dict) -> float:
    """Seconds per launch of ``product`` with ``params`` on the representative problem of
    batch class ``shape`` (batch, TUNE_WIDTH -> TUNE_WIDTH, tanh), data on the device."""
    batch, n = TUNE_SHAPE[shape], TUNE_WIDTH
    rng = np.random.default_rng(0)
    x, w, dz = (rt.to_device(rng.standard_normal(s).astype(np.float32))
                for s in ((batch, n), (n, n), (batch, n)))
    b, out, dw = rt.zeros((n,)), rt.empty((batch, n)), rt.zeros((n, n))
    kernels = DenseKernels(rt, params={product: params})
    run = {"forward": lambda: kernels.forward(x, w, b, out, 1),
           "input": lambda: kernels.backward_input(dz, w, out, x, 1),
           "weight": lambda: kernels.backward_weight(dz, x, dw, b)}[product]
    return tuning.time_launches(run, rt.queue.finish)


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
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(n_in)
        self.weight = Parameter(rng.uniform(-bound, bound, (n_out, n_in)), "weight",
                                block_size=self.n_in, runtime=self.runtime)
        self.bias = Parameter(rng.uniform(-bound, bound, n_out), "bias", block_size=1,
                              runtime=self.runtime)
        self.kernels = DenseKernels(self.runtime, variant)
        rt = self.runtime
        self._act_backward = Launcher(rt, rt.kernel("activation", "activation_backward"))
        self._softmax = Launcher(rt, rt.kernel("activation", "softmax_rows"))
        self._softmax_backward = Launcher(rt, rt.kernel("activation", "softmax_backward_rows"))
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
            self._softmax((batch,), None, y.data, np.int32(batch), np.int32(self.n_out))
        self._x, self._y = x, y
        return y

    def release(self) -> None:
        self._x = self._y = None

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
            self._softmax_backward((rows,), None, self._y.data, dy.data, dz.data,
                                   np.int32(rows), np.int32(cols))
        else:
            self._act_backward((dy.size,), None, self._y.data, dy.data, dz.data,
                               np.int32(dy.size), np.int32(self.act))
        return self.backward_preactivation(dz)

    def backward_preactivation(self, dz, input_act: str = "none", input_grad: bool = True,
                               accumulate: bool = True):
        """dL/dx from dL/dz (z = x W^T + b, before the activation); accumulates grads.

        For Sequential's training step: ``input_act`` (the previous layer's activation, not
        softmax) returns that layer's dL/dz instead, in the same kernel; ``input_grad=False``
        returns None (the first layer); ``accumulate=False`` overwrites the grads.
        """
        self._require_forward()
        if input_act == "softmax":
            raise ValueError("backward_preactivation: softmax's derivative is not elementwise")
        self.kernels.backward_weight(dz, self._x, self.weight.grad, self.bias.grad, accumulate)
        if not input_grad:
            return None
        dx = self.runtime.empty(self._x.shape)
        self.kernels.backward_input(dz, self.weight.value, dx, self._x,
                                    activation_code(input_act))
        return dx
