"""Small device operations of the CATCH graph (kernels/catch.cl): layer norm, GELU, the mask
generator, RevIN, frequency patches, axis swaps, row joins, the frequency loss and the
per-step scores. Arrays are numpy or pyopencl arrays of any layout (each goes through
``Runtime.to_device``); series are (batch, channels, time).

Taught in notebooks/06_attention_primer, notebooks/07_catch.
"""

from __future__ import annotations

import numpy as np

from .. import fft
from ..layers.base import Layer, positive_int
from ..layers.dense_params import k_slices
from ..parameter import Parameter
from ..sizes import ceil_div, vector_width

i32, f32 = np.int32, np.float32


def elementwise_width(rt) -> int:
    """Floats per work-item of catch.cl's elementwise kernels (the VW of kernels/floatv.h):
    the device's vector width for kernels written with explicit vectors (1 on GPUs)."""
    return vector_width(rt.limits.explicit_vector_width)


def launcher(rt, topic: str, name: str):
    """The launcher of CATCH's kernel ``name`` of kernels/<topic>.cl (catch or attention),
    built with :func:`elementwise_width` as VW, and VLOAD 0 where the device's compiler
    leaves vloadN/vstoreN as calls (``Limits.inlines_vector_loads``, kernels/dot4.h)."""
    options = (f"-DVW={elementwise_width(rt)}",)
    return rt.launcher(topic, name, options if rt.limits.inlines_vector_loads
                       else options + ("-DVLOAD=0",))


def elementwise(rt, name: str, count: int, *args) -> None:
    """catch.cl's elementwise kernel ``name`` over ``count`` floats, :func:`elementwise_width`
    of them per work-item; ``args`` come before the count."""
    launcher(rt, "catch", name)((ceil_div(count, elementwise_width(rt)),), None, *args,
                                i32(count))


class LayerNorm(Layer):
    """Layer normalisation over the last axis (eps 1e-5), gamma = 1 and beta = 0 at first."""

    # How many slices of the rows the parameters' gradients are summed in: gemm_tn's rule
    # for splitting k (two work-groups per compute unit, slices of at least 64 rows); tests
    # force a split.
    row_slices = staticmethod(k_slices)

    @staticmethod
    def parameter_shapes(config: dict) -> dict:
        """The shape of each parameter for ``config`` (as :meth:`config` returns it)."""
        return {"gamma": (config["width"],), "beta": (config["width"],)}

    def __init__(self, width: int, runtime=None):
        super().__init__(runtime)
        self.width = positive_int("LayerNorm", "width", width)
        self.gamma = Parameter(np.ones(width), "gamma", runtime=self.runtime)
        self.beta = Parameter(np.zeros(width), "beta", runtime=self.runtime)

    def config(self) -> dict:
        return {"width": self.width}

    def parameters(self) -> list:
        return [self.gamma, self.beta]

    def forward(self, x):
        rt, c = self.runtime, self.width
        x = rt.to_device(x, "LayerNorm input")
        if x.ndim < 1 or x.shape[-1] != c or x.size == 0:
            raise ValueError(f"LayerNorm input: expected a non-empty shape (..., {c}), got "
                             f"{x.shape}")
        rows = x.size // c
        y, xhat, rstd = rt.empty(x.shape), rt.empty(x.shape), rt.empty((rows,))
        launcher(rt, "catch", "layer_norm_forward")((rows,), None, x.data, self.gamma.value.data,
                  self.beta.value.data, y.data, xhat.data, rstd.data, i32(rows), i32(c))
        self.save_for_backward(xhat, rstd)
        return y

    def forward_sum(self, x, r):
        """(s, y): the residual sum s = x + r and y = forward(s), in one launch."""
        rt, c = self.runtime, self.width
        x = rt.to_device(x, "LayerNorm input")
        r = rt.to_device(r, "LayerNorm residual", shape=x.shape)
        if x.ndim < 1 or x.shape[-1] != c or x.size == 0:
            raise ValueError(f"LayerNorm input: expected a non-empty shape (..., {c}), got "
                             f"{x.shape}")
        rows = x.size // c
        s, y, xhat, rstd = rt.empty(x.shape), rt.empty(x.shape), rt.empty(x.shape), \
            rt.empty((rows,))
        launcher(rt, "catch", "add_layer_norm_forward")((rows,), None, x.data, r.data,
                  self.gamma.value.data, self.beta.value.data, s.data, y.data, xhat.data,
                  rstd.data, i32(rows), i32(c))
        self.save_for_backward(xhat, rstd)
        return s, y

    def backward(self, grad_out, into=None):
        """dL/dx (a new array, or added to ``into``, a device array of the input's shape
        apart from grad_out, and returned); accumulates the parameters' gradients. Their
        sums over the rows run in :meth:`row_slices` slices side by side where the rows
        are many and the features few (CATCH's 1920 rows of 32-64 features: on a GPU,
        c / 4 work-items walking all rows took 39 % of a training step)."""
        rt, c = self.runtime, self.width
        xhat, rstd = self.saved()
        grad_out = rt.to_device(grad_out, "LayerNorm grad_out", shape=xhat.shape)
        rows = xhat.size // c
        dx = rt.empty(xhat.shape) if into is None else into
        if into is not None and (rt.to_device(into, "LayerNorm into", shape=xhat.shape)
                                 is not into or into.data == grad_out.data):
            raise ValueError("LayerNorm.backward: into must be a float32 device array of "
                             f"the input's shape {xhat.shape}, apart from grad_out")
        quads = ceil_div(c, 4)  # work-items of one slice of the parameters' sums
        slices = self.row_slices(rt.limits.compute_units,
                                 ceil_div(quads, rt.work_group_multiple), rows)
        pg, pb = ((self.gamma.grad, self.beta.grad) if slices == 1
                  else (rt.empty((slices, c)), rt.empty((slices, c))))
        launcher(rt, "catch", "layer_norm_backward")((rows + slices * quads,), None,
                  grad_out.data, self.gamma.value.data, xhat.data, rstd.data, dx.data,
                  pg.data, pb.data, i32(rows), i32(c), i32(into is not None), i32(slices))
        if slices > 1:
            launcher(rt, "catch", "layer_norm_sum_slices")((c,), None, pg.data, pb.data,
                      self.gamma.grad.data, self.beta.grad.data, i32(slices), i32(c))
        return dx


class GELU(Layer):
    """The exact GELU, x Phi(x), elementwise; ``forward`` keeps its derivative for
    ``backward``."""

    def config(self) -> dict:
        return {}

    def forward(self, x):
        x = self.runtime.to_device(x, "GELU input")
        y, slope = self.runtime.empty(x.shape), self.runtime.empty(x.shape)
        elementwise(self.runtime, "gelu_forward", x.size, x.data, y.data, slope.data)
        self.save_for_backward(slope)
        return y

    def backward(self, grad_out):
        (slope,) = self.saved()
        grad_out = self.runtime.to_device(grad_out, "GELU grad_out", shape=slope.shape)
        dx = self.runtime.empty(grad_out.shape)
        elementwise(self.runtime, "gelu_backward", dx.size, slope.data, grad_out.data, dx.data)
        return dx


class MaskGenerator(Layer):
    """CATCH's mask generator: prob = sigmoid(patch W^T) per (channel, channel) pair, a 0/1
    mask drawn by Gumbel straight-through from logistic ``noise`` (zero noise thresholds
    prob at 0.5), diagonal 1. ``gumbel="code"`` uses the official logits +-logit(p), which
    sharpen the draw to p^2 / (p^2 + (1-p)^2); ``"bernoulli"`` draws with probability p.
    W (n, width) starts at zero (prob 0.5), as in the official code."""

    # How many slices of the (group, channel) pairs the weight's gradient is summed in:
    # gemm_tn's rule for splitting k, as LayerNorm's rows; tests force a split.
    pair_slices = staticmethod(k_slices)

    @staticmethod
    def parameter_shapes(config: dict) -> dict:
        """The shape of each parameter for ``config`` (as :meth:`config` returns it)."""
        return {"weight": (config["n"], config["width"])}

    def __init__(self, n: int, width: int, gumbel: str = "code", runtime=None):
        super().__init__(runtime)
        if gumbel not in ("code", "bernoulli"):
            raise ValueError(f"unknown gumbel mode {gumbel!r}; choose 'code' or 'bernoulli'")
        self.n = positive_int("MaskGenerator", "n", n)
        self.width = positive_int("MaskGenerator", "width", width)
        self.gumbel = gumbel
        self.weight = Parameter(np.zeros((n, width)), "weight", block_size=width,
                                runtime=self.runtime)

    def config(self) -> dict:
        return {"n": self.n, "width": self.width, "gumbel": self.gumbel}

    def parameters(self) -> list:
        return [self.weight]

    def forward(self, z, noise=None):
        """z (groups, n, width) patches, logistic noise (groups, n, n) -> mask (groups, n,
        n); without noise the mask is prob thresholded at 0.5."""
        rt, n = self.runtime, self.n
        z = rt.to_device(z, "MaskGenerator patches", shape=(None, n, self.width))
        groups = z.shape[0]
        if groups == 0:
            raise ValueError("MaskGenerator patches: batch is empty")
        noise = rt.zeros((groups, n, n)) if noise is None else rt.to_device(
            noise, "MaskGenerator noise", shape=(groups, n, n))
        mask, prob, slope = (rt.empty((groups, n, n)) for _ in range(3))
        launcher(rt, "catch", "mask_sample")((n, n, groups), None, z.data, self.weight.value.data,
                  noise.data, mask.data, prob.data, slope.data, i32(groups), i32(n),
                  i32(self.width), f32(2.0 if self.gumbel == "code" else 1.0))
        self.prob = prob
        self.save_for_backward(z, slope)
        return mask

    def backward(self, grad_out):
        """Adds dL/dW (straight-through) to weight.grad; the patches need no gradient. The
        sums over the (group, channel) pairs run in :meth:`pair_slices` slices side by side
        where the pairs are many and the weights few (on a GPU, n width / 4 work-items
        walking all the pairs took 0.40 ms of CATCH's training step, in one launch)."""
        rt, n, width = self.runtime, self.n, self.width
        z, slope = self.saved()
        grad_out = rt.to_device(grad_out, "MaskGenerator grad_out", shape=slope.shape)
        groups, quads = z.shape[0], ceil_div(width, 4)
        slices = self.pair_slices(rt.limits.compute_units,
                                  ceil_div(quads * n, rt.work_group_multiple), groups * n)
        out = self.weight.grad if slices == 1 else rt.empty((slices, n, width))
        launcher(rt, "catch", "mask_weight_grad")(
            (quads, n, slices), None, z.data, slope.data, grad_out.data, out.data, i32(groups),
            i32(n), i32(width), i32(slices))
        if slices > 1:
            launcher(rt, "catch", "mask_weight_sum_slices")(
                (n * width,), None, out.data, self.weight.grad.data, i32(slices), i32(n * width))


def revin_norm(rt, x):
    """x (batch, channels, t) -> (normalised, mean, std), statistics per row."""
    x = rt.to_device(x, "revin_norm input", shape=(None, None, None))
    b, c, t = x.shape
    out, mean, std = rt.empty(x.shape), rt.empty((b, c)), rt.empty((b, c))
    launcher(rt, "catch", "revin_norm")((b * c,), None, x.data, out.data, mean.data, std.data,
              i32(b * c), i32(t))
    return out, mean, std


def revin_denorm(rt, y, mean, std, shift: bool = True):
    """y * std + mean per row; ``shift=False`` gives the backward pass (times std)."""
    mean = rt.to_device(mean, "revin_denorm mean")
    std = rt.to_device(std, "revin_denorm std", shape=mean.shape)
    y = rt.to_device(y, "revin_denorm input")
    if mean.size == 0 or y.size % mean.size:
        raise ValueError(f"revin_denorm: {y.shape} does not split into {mean.size} rows")
    rows, t = mean.size, y.size // mean.size
    out = rt.empty(y.shape)
    launcher(rt, "catch", "revin_denorm")((t, rows), None, y.data, mean.data, std.data, out.data,
              i32(rows), i32(t), i32(shift))
    return out


def freq_patches(rt, spec, p: int, s: int):
    """spectrum (batch, channels, t) complex -> (batch, patches, channels, 2p) [Re | Im]."""
    spec = rt.to_device(spec, "freq_patches spectrum", shape=(None, None, None),
                        dtype=np.complex64)
    b, c, t = spec.shape
    if not 1 <= p <= t or s < 1:
        raise ValueError(f"freq_patches: need 1 <= p <= {t} and s >= 1, got p={p}, s={s}")
    patches = (t - p) // s + 1
    out = rt.empty((b, patches, c, 2 * p))
    launcher(rt, "catch", "freq_patches")((c, patches, b), None, spec.data, out.data,
              i32(b), i32(c), i32(t), i32(p), i32(s), i32(patches))
    return out


def patch_amplitude(rt, z):
    """[Re | Im] patch rows (..., 2p) -> amplitudes (..., p) (the mask generator's phase-free
    input under the ``mask_input="amplitude"`` deviation)."""
    z = rt.to_device(z, "patch_amplitude input")
    if z.ndim < 1 or z.shape[-1] % 2 or z.size == 0:
        raise ValueError(f"patch_amplitude: expected a non-empty shape (..., 2p), got {z.shape}")
    p = z.shape[-1] // 2
    rows = z.size // (2 * p)
    out = rt.empty(z.shape[:-1] + (p,))
    launcher(rt, "catch", "patch_amplitude")((p, rows), None, z.data, out.data, i32(rows), i32(p))
    return out


def swap_axes12(rt, x):
    """(n0, n1, n2, n3) -> (n0, n2, n1, n3), a new array."""
    x = rt.to_device(x, "swap_axes12 input", shape=(None, None, None, None))
    n0, n1, n2, n3 = x.shape
    out = rt.empty((n0, n2, n1, n3))
    launcher(rt, "catch", "swap_axes12")((n1, n2, n0), None, x.data, out.data, i32(n0),
              i32(n1), i32(n2), i32(n3))
    return out


def join_rows(rt, a, b):
    """[a | b] row by row: (rows, na), (rows, nb) -> (rows, na + nb)."""
    a = rt.to_device(a, "join_rows a", shape=(None, None))
    b = rt.to_device(b, "join_rows b", shape=(a.shape[0], None))
    rows, na, nb = a.shape[0], a.shape[1], b.shape[1]
    out = rt.empty((rows, na + nb))
    launcher(rt, "catch", "join_rows")((na + nb, rows), None, a.data, b.data, out.data, i32(rows),
              i32(na), i32(nb))
    return out


def join_complex(rt, re, im):
    """re + i im: two (rows, t) float arrays -> (rows, t) complex64."""
    re = rt.to_device(re, "join_complex re", shape=(None, None))
    im = rt.to_device(im, "join_complex im", shape=re.shape)
    rows, t = re.shape
    z = rt.empty((rows, t), np.complex64)
    launcher(rt, "catch", "join_complex")((t, rows), None, re.data, im.data, z.data, i32(rows),
              i32(t))
    return z


def freq_mae(rt, z, y, grad, weight: float):
    """|z - y| of complex rows (rows, t) -> (err, dre, dim): err (rows, t), and grad
    (complex, rows, t) plus weight * d sum|z - y|, split into its real and imaginary
    parts (rows, t) each."""
    z = rt.to_device(z, "freq_mae z", shape=(None, None), dtype=np.complex64)
    y = rt.to_device(y, "freq_mae y", shape=z.shape, dtype=np.complex64)
    grad = rt.to_device(grad, "freq_mae grad", shape=z.shape, dtype=np.complex64)
    rows, t = z.shape
    err, dre, dim = (rt.empty((rows, t)) for _ in range(3))
    launcher(rt, "catch", "freq_mae")((t, rows), None, z.data, y.data, grad.data, err.data,
              dre.data, dim.data, i32(rows), i32(t), f32(weight))
    return err, dre, dim


def add(rt, a, b):
    """a + b elementwise, a new array (kernels/vector.cl)."""
    a = rt.to_device(a, "add a")
    b = rt.to_device(b, "add b", shape=a.shape)
    out = rt.empty(a.shape)
    rt.launcher("vector", "vector_add")((a.size,), None, a.data, b.data, out.data,
              i32(a.size))
    return out


def step_scores(rt, x, xhat, p: int, lam: float):
    """Per-step scores (batch, t) of windows x, xhat (batch, channels, t): see
    ``reference.step_scores``. Sub-window spectra come from nnlib.fft."""
    x = rt.to_device(x, "step_scores x", shape=(None, None, None))
    xhat = rt.to_device(xhat, "step_scores xhat", shape=x.shape)
    b, c, t = x.shape
    if not 1 <= p <= t:
        raise ValueError(f"step_scores: need 1 <= p <= {t}, got {p}")
    count = t - p + 1
    windows = rt.empty((b, c, count, p), np.complex64)
    launcher(rt, "catch", "residual_windows")((p, count, b * c), None, x.data, xhat.data,
              windows.data, i32(b * c), i32(t), i32(p))
    spec = fft.fft(windows, runtime=rt)
    out = rt.empty((b, t))
    launcher(rt, "catch", "step_scores")((t, b), None, x.data, xhat.data, spec.data, out.data,
              i32(b), i32(c), i32(t), i32(p), f32(lam))
    return out
