"""Dense (fully connected) layer: y = act(x @ weight.T + bias), as OpenCL kernels."""

from __future__ import annotations

import numpy as np

from ..activations import ACTIVATIONS, activation_code
from ..parameter import Parameter
from .base import Layer

ROWS_PER_ITEM = 12  # rows of C per work-item in gemm_bcast (-DRB); 12 measured best on PoCL
VARIANTS = ("fast", "seed")


def _blocks(n: int, tile: int) -> int:
    return -(-n // tile)


class DenseKernels:
    """The products of a dense layer on one runtime, in one of two designs.

    ``"seed"``: one work-item per output value (the source article's design);
    ``"fast"``: one register-blocked kernel, ``gemm_bcast``, for all three products (the
    default), with vectors as wide as the device prefers. Each method only enqueues work.
    """

    def __init__(self, runtime, variant: str = "fast"):
        if variant not in VARIANTS:
            raise ValueError(f"unknown dense variant {variant!r}; choose one of {VARIANTS}")
        self.runtime, self.variant = runtime, variant
        width = runtime.device.preferred_vector_width_float
        self.vector = 16 if width >= 16 else 8 if width >= 8 else 4
        opts = (f"-DRB={ROWS_PER_ITEM}", f"-DVW={self.vector}")
        k = lambda name: runtime.kernel("dense", name, opts)  # noqa: E731
        self._bias = k("dense_backward_bias")
        self._forward = k("dense_forward_seed")
        if variant == "seed":
            self._input = k("dense_backward_input_seed")
            self._weight = k("dense_backward_weight_seed")
        else:
            self._gemm = k("gemm_bcast")
            self._transpose = k("transpose_pad")
            self._local = (min(16, runtime.work_group_size(self._gemm)), 1)

    def _gemm_launch(self, a, a_row, a_k, b, ldb, c, c_row, c_col, nrows, ncols, nk,
                     bias=None, act=0, accumulate=False):
        grid = (_blocks(ncols, self.vector), _blocks(nrows, ROWS_PER_ITEM))
        i32 = np.int32
        return self.runtime.launch(
            self._gemm, grid, self._local, a.data, i32(a_row), i32(a_k), b.data, i32(ldb),
            c.data, i32(c_row), i32(c_col), i32(nrows), i32(ncols), i32(nk),
            (a if bias is None else bias).data, i32(bias is not None), i32(act),
            i32(accumulate))

    def forward(self, x, w, b, y, act: int):
        batch, n_in = x.shape
        n_out = w.shape[0]
        i32 = np.int32
        # With fewer samples than half a vector, the tile would mostly compute padding: the
        # one-output-per-work-item kernel is faster there (a matrix-vector product).
        if self.variant == "seed" or 2 * batch < self.vector:
            return self.runtime.launch(self._forward, (n_out, batch), None, x.data, w.data,
                                       b.data, y.data, i32(batch), i32(n_in), i32(n_out),
                                       i32(act))
        padded = _blocks(batch, self.vector) * self.vector
        xt = self.runtime.empty((n_in, padded))
        self.runtime.launch(self._transpose, (padded, n_in), None, x.data, xt.data,
                            i32(batch), i32(n_in), i32(padded))
        # Y^T = W X^T: rows are neurons, columns samples; Y[b, j] sits at j + b * n_out.
        return self._gemm_launch(w, n_in, 1, xt, padded, y, 1, n_out, n_out, batch, n_in,
                                 bias=b, act=act)

    def backward_input(self, dz, w, dx):
        batch, n_out = dz.shape
        n_in = w.shape[1]
        if self.variant == "seed":
            return self.runtime.launch(self._input, (n_in, batch), None, dz.data, w.data,
                                       dx.data, np.int32(batch), np.int32(n_in),
                                       np.int32(n_out))
        return self._gemm_launch(dz, n_out, 1, w, n_in, dx, n_in, 1, batch, n_in, n_out)

    def backward_weight(self, dz, x, dw, db):
        batch, n_out = dz.shape
        n_in = x.shape[1]
        if self.variant == "seed":
            self.runtime.launch(self._weight, (n_in, n_out), None, dz.data, x.data, dw.data,
                                np.int32(batch), np.int32(n_in), np.int32(n_out))
        else:  # dW[j, :] += sum_b dZ[b, j] X[b, :]: A = dZ^T, read with strides
            self._gemm_launch(dz, 1, n_out, x, n_in, dw, n_in, 1, n_out, n_in, batch,
                              accumulate=True)
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
