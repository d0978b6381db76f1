"""Dense (fully connected) layer: y = act(x @ weight.T + bias), as OpenCL kernels."""

from __future__ import annotations

import numpy as np

from ..activations import ACTIVATIONS, activation_code
from ..launcher import Launcher
from ..parameter import Parameter
from .base import Layer

# Tile sizes of the blocked kernels (kernels/dense.cl), measured best on PoCL (AVX-512):
# gemm_nt (forward) computes NT_TILE = (rows of X, rows of W) per work-item (the 4 is fixed
# in the kernel); gemm_tn (gradients) TN_ROWS rows x TN_VECTORS vectors of columns.
NT_TILE = (6, 4)
TN_ROWS, TN_VECTORS = 6, 4
VARIANTS = ("fast", "seed")


def _blocks(n: int, tile: int) -> int:
    return -(-n // tile)


class DenseKernels:
    """The products of a dense layer on one runtime, in one of two designs.

    ``"seed"``: one work-item per output value (the source article's design);
    ``"fast"``: register-blocked kernels (the default), ``gemm_nt`` for the forward pass and
    ``gemm_tn`` for both gradients, with vectors as wide as the device prefers. Each
    method only enqueues work.
    """

    def __init__(self, runtime, variant: str = "fast"):
        if variant not in VARIANTS:
            raise ValueError(f"unknown dense variant {variant!r}; choose one of {VARIANTS}")
        self.runtime, self.variant = runtime, variant
        width = runtime.vector_width
        self.vector = 16 if width >= 16 else 8 if width >= 8 else 4
        opts = (f"-DVW={self.vector}", f"-DNT_I={NT_TILE[0]}",
                f"-DTN_R={TN_ROWS}", f"-DTN_V={TN_VECTORS}")
        k = lambda name: runtime.kernel("dense", name, opts)  # noqa: E731
        if variant == "seed":
            self._forward = k("dense_forward_seed")
            self._input = k("dense_backward_input_seed")
            self._weight = k("dense_backward_weight_seed")
            self._bias = k("dense_backward_bias")
            self._act_backward = runtime.kernel("activation", "activation_backward")
        else:
            nt, tn = k("gemm_nt"), k("gemm_tn")
            # One launcher per product: each keeps its arguments from one step to the next.
            self._nt = Launcher(runtime, nt)
            self._tn_input, self._tn_weight = Launcher(runtime, tn), Launcher(runtime, tn)
            # CPUs run a work-group as one task: 16 work-items of large tiles is plenty;
            # GPUs want at least a few warps.
            want = 64 if runtime.is_gpu else 16
            self._local_nt = (min(want, runtime.work_group_size(nt)), 1)
            self._local_tn = (min(want, runtime.work_group_size(tn)), 1)

    def forward(self, x, w, b, y, act: int):
        batch, n_in = x.shape
        n_out = w.shape[0]
        i32 = np.int32
        if self.variant == "seed":
            return self.runtime.launch(self._forward, (n_out, batch), None, x.data, w.data,
                                       b.data, y.data, i32(batch), i32(n_in), i32(n_out),
                                       i32(act))
        grid = (_blocks(batch, NT_TILE[0]), _blocks(n_out, NT_TILE[1]))
        return self._nt(grid, self._local_nt, x.data, w.data, y.data, i32(batch), i32(n_out),
                        i32(n_in), b.data, i32(act))

    def _tn(self, launcher, p, p_k, p_r, b, c, nrows, ncols, nk, accumulate, gate=None,
            act=0, rowsum=None):
        """C (+)= P^T B on gemm_tn, times act'(gate) if ``act``; ``rowsum`` (a device array)
        also gets P's column sums."""
        grid = (_blocks(nrows, TN_ROWS), _blocks(ncols, TN_VECTORS * self.vector))
        i32 = np.int32
        return launcher(grid, self._local_tn, p.data, i32(p_k), i32(p_r), b.data, c.data,
                        i32(nrows), i32(ncols), i32(nk), i32(accumulate),
                        (c if gate is None else gate).data, i32(act), i32(rowsum is not None),
                        (c if rowsum is None else rowsum).data)

    def backward_input(self, dz, w, dx, x=None, act: int = 0):
        """dx = dz W; with ``act``, times act'(x) (x = the previous layer's output y)."""
        batch, n_out = dz.shape
        n_in = w.shape[1]
        if self.variant == "fast":  # dX = (dZ^T)^T W
            return self._tn(self._tn_input, dz, 1, n_out, w, dx, batch, n_in, n_out, False,
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
            return self._tn(self._tn_weight, dz, n_out, 1, x, dw, n_out, n_in, batch,
                            accumulate, rowsum=db)
        if not accumulate:
            dw.fill(0)
            db.fill(0)
        i32 = np.int32
        self.runtime.launch(self._weight, (n_in, n_out), None, dz.data, x.data, dw.data,
                            i32(batch), i32(n_in), i32(n_out))
        return self.runtime.launch(self._bias, (n_out,), None, dz.data, db.data, i32(batch),
                                   i32(n_out))


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
