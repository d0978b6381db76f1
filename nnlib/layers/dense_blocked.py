"""The blocked dense design: register tiles, ``gemm_nt`` for the forward pass and ``gemm_tn``
for both gradients (kernels/dense.cl), with parameters tuned per device:
``Dense(variant="blocked")``, the default.

Taught in notebooks/03_cpu_vs_gpu.
"""

from __future__ import annotations

import numpy as np

from .. import tuning
from ..codes import ACTIVATIONS
from ..sizes import ceil_div
from .dense_params import (PRODUCTS, TUNE_ACTIVATION, TUNE_ALSO, TUNE_SHAPE, build_options,
                           candidates, default_params, k_slices, shape_class, small_options,
                           work_group)


NT_J = 4  # outputs of a row per work-item of gemm_nt (kernels/dense.cl)
# gemm_nt's build for a softmax layer it finishes itself (the lanes design gathers the rows in
# local memory behind a barrier, which its other builds go without)
NT_SOFTMAX = ("-DNT_SOFTMAX=1",)


# The work-group of dense.cl's transposes (4 x 4 values a work-item): 8 x 32 work-items, a
# tile of 32 x 128 values of the source (its rows by its columns; the other way round for
# transpose_by_columns, whose dimension 0 runs along the columns), so that one work-group
# reads and writes whole cache lines while they are in the cache. The launcher's own rule
# gives long strips one 4-value block wide, whose lines leave the cache before the
# neighbouring strip reads the rest of them: on both CPU runtimes of an Intel Xeon it
# transposed 128 x 240 to 5888 x 5888 up to twice as slowly.
TRANSPOSE_GROUP = (8, 32)


def transpose_group(launcher) -> tuple:
    """TRANSPOSE_GROUP within ``launcher``'s limits: halved, along its longer side first,
    until it fits."""
    a, b = TRANSPOSE_GROUP
    most = launcher.max_work_item_sizes
    while a * b > launcher.work_group_size or a > most[0] or b > most[1]:
        if b >= a:
            b //= 2
        else:
            a //= 2
    return a, b


class BlockedDenseKernels:
    """The products of a dense layer in the blocked design. Their parameters (tile rows,
    vector width, loads by ``vloadN`` or by hand, ``fma`` or plain arithmetic, work-group
    size) are chosen per device, product and batch class by :mod:`nnlib.tuning` on first
    use, or fixed with ``params`` (``{product: {...}}``, e.g. for tests). Each method only
    enqueues work."""

    variant = "blocked"
    k_slices = staticmethod(k_slices)  # the rule that splits gemm_tn's k (tests force a split)

    def __init__(self, runtime, params: dict | None = None):
        self.runtime = runtime
        self._fixed = dict(params or {})
        for product in self._fixed:
            if product not in PRODUCTS:
                raise ValueError(f"unknown dense product {product!r}; choose from {PRODUCTS}")
        self._launchers: dict = {}  # (kernel, product, class) -> (Launcher, params, local)
        self._by_size: dict = {}  # (kernel, product, batch, weights) -> the same, found once
        self._route: dict = {}  # (batch, weights) -> "YT", "TN" or "NT": the forward's kernel

    def params(self, product: str, batch: int, weights: int = 0) -> dict:
        """The parameters ``product`` runs with at ``batch`` on a layer of ``weights``
        weights (n_in * n_out) on this device."""
        if product in self._fixed:
            return dict(self._fixed[product])
        shape = shape_class(product, batch, weights)
        return tuning.tuned(self.runtime, f"dense.{product}", shape,
                            candidates(self.runtime, product, shape),
                            lambda p: measure(self.runtime, product, shape, p),
                            default_params(self.runtime, product, shape),
                            problem=tune_problem(shape))

    def _launcher(self, product: str, batch: int, weights: int, kernel: str,
                  extra: tuple = ()):
        """The launcher of ``kernel`` (gemm_nt or a gemm_tn kernel) built with the
        parameters ``product`` runs with at ``batch`` on a layer of ``weights`` weights and
        the options ``extra``, its parameters and local size."""
        found = self._by_size.get((kernel, extra, product, batch, weights))
        if found is not None:
            return found
        key = (kernel, extra, product, shape_class(product, batch, weights))
        if key not in self._launchers:
            params = self.params(product, batch, weights)
            launcher = self.runtime.launcher("dense", kernel,
                                             build_options(params, kernel) + extra)
            local = work_group(params, launcher.work_group_size)
            self._launchers[key] = (launcher, params, local)
        found = self._by_size[(kernel, extra, product, batch, weights)] = self._launchers[key]
        return found

    @staticmethod
    def softmax_in_forward(n_out: int) -> bool:
        """Whether :meth:`forward` applies softmax itself: to rows of at most NT_J outputs,
        which one work-item holds whole (wider rows are left to the layer)."""
        return n_out <= NT_J

    def forward(self, x, w, b, y, act: int):
        """y = act(x w^T + b); softmax (act 5) only where :meth:`softmax_in_forward`."""
        batch, n_in = x.shape
        n_out = w.shape[0]
        i32 = np.int32
        route = self._route.get((batch, n_in * n_out))
        if route is None:  # found once per size: a look-up of the tuned parameters takes long
            p = self.params("forward", batch, n_in * n_out)
            route = self._route[(batch, n_in * n_out)] = (
                "YT" if p.get("FWD_YT") else "TN" if p.get("FWD_TN") else "NT")
        if route == "YT":
            return self._forward_yt(x, w, b, y, act)
        if route == "TN":
            return self._forward_tn(x, w, b, y, act)
        owns_softmax = act == ACTIVATIONS["softmax"] and self.softmax_in_forward(n_out)
        launcher, p, local = self._launcher("forward", batch, n_in * n_out, "gemm_nt",
                                            NT_SOFTMAX if owns_softmax else ())
        if p.get("TN_LANES"):  # dimension 0 along the outputs, one per work-item
            grid = (n_out, ceil_div(batch, p["NT_I"]))
        else:
            grid = (ceil_div(batch, p["NT_I"]), ceil_div(n_out, NT_J))
        return launcher(grid, local, x.data, w.data, y.data, i32(batch), i32(n_out),
                        i32(n_in), b.data, i32(act))

    def _forward_yt(self, x, w, b, y, act: int):
        """The forward with the parameter FWD_YT: x^T by transpose, y^T = W x^T by gemm_tn
        (P[k, r] = W[r, k], read in place), then y = act(y^T^T + b) by transpose_bias_act;
        the softmax it owns (:meth:`softmax_in_forward`) by softmax_rows. Only the
        batch-sized arrays are transposed."""
        batch, n_in = x.shape
        n_out = w.shape[0]
        i32 = np.int32
        x_t, y_t = self.runtime.empty((n_in, batch)), self.runtime.empty((n_out, batch))
        launcher = self.runtime.launcher
        self._transpose("transpose_by_columns", (ceil_div(n_in, 4), ceil_div(batch, 4)),
                        x.data, x_t.data, i32(batch), i32(n_in))
        self._tn("forward", "gemm_tn", batch, n_in * n_out, w, 1, n_in, x_t, y_t, n_out, batch,
                 n_in, i32(0))
        event = self._transpose("transpose_bias_act", (ceil_div(n_out, 4), ceil_div(batch, 4)),
                                y_t.data, y.data, i32(n_out), i32(batch), b.data,
                                i32(act))  # softmax passes through
        if act == ACTIVATIONS["softmax"] and self.softmax_in_forward(n_out):
            return launcher("activation", "softmax_rows")((batch,), None, y.data, i32(batch),
                                                          i32(n_out))
        return event

    def _forward_tn(self, x, w, b, y, act: int):
        """The forward with the parameter FWD_TN: W^T by transpose, then y = act(x W^T + b)
        by gemm_tn_bias (P[k, r] = x[r, k], read in place); the softmax it owns
        (:meth:`softmax_in_forward`) by softmax_rows."""
        batch, n_in = x.shape
        n_out = w.shape[0]
        i32 = np.int32
        w_t = self.runtime.empty((n_in, n_out))
        launcher = self.runtime.launcher
        self._transpose("transpose", (ceil_div(n_out, 4), ceil_div(n_in, 4)), w.data,
                        w_t.data, i32(n_out), i32(n_in))
        event = self._tn("forward", "gemm_tn_bias", batch, n_in * n_out, x, 1, n_in, w_t, y,
                         batch, n_out, n_in, b.data, i32(act))
        if act == ACTIVATIONS["softmax"] and self.softmax_in_forward(n_out):
            return launcher("activation", "softmax_rows")((batch,), None, y.data, i32(batch),
                                                          i32(n_out))
        return event

    def _tn(self, product, kernel, batch, weights, p, p_k, p_r, b, c, nrows, ncols, nk, *extra):
        """C (+)= P^T B on the gemm_tn ``kernel`` of a layer of ``weights`` weights;
        ``extra`` are the arguments after nk. Where the launch has too few work-groups for
        the device (:func:`~.dense_params.k_slices`), its k is split: each slice writes a
        partial product, and a tn_sum_splits kernel adds them up and does what ``kernel``
        does besides (its gate, its accumulation, its row sums)."""
        launcher, prm, local = self._launcher(product, batch, weights, kernel)
        if prm.get("TN_LANES"):  # dimension 0 along the columns, TN_V columns a work-item
            grid = (ceil_div(ncols, prm["TN_V"]), ceil_div(nrows, prm["TN_R"]))
        else:
            grid = (ceil_div(nrows, prm["TN_R"]), ceil_div(ncols, prm["TN_V"] * prm["VW"]))
        i32 = np.int32
        groups = ceil_div(grid[0], local[0]) * ceil_div(grid[1], local[1])
        slices = self.k_slices(self.runtime.limits.compute_units, groups, nk)
        if slices == 1:
            return launcher(grid, local, p.data, i32(p_k), i32(p_r), b.data, c.data,
                            i32(nrows), i32(ncols), i32(nk), *extra)
        count = nrows * ncols
        part = self.runtime.empty((slices, count))
        head = (p.data, i32(p_k), i32(p_r), b.data, part.data, i32(nrows), i32(ncols), i32(nk))
        grid, local = (*grid, slices), (*local, 1)
        sums = self.runtime.launcher("dense", f"tn_sum_splits{kernel[len('gemm_tn'):]}",
                                     build_options(prm, kernel))
        if kernel == "gemm_tn_rowsum":  # extra: accumulate, d
            d_part = self.runtime.empty((slices, nrows))
            launcher(grid, local, *head, i32(0), d_part.data)
            return sums((count,), None, part.data, i32(slices), c.data, i32(count), extra[0],
                        d_part.data, extra[1], i32(nrows))
        if kernel in ("gemm_tn_gated", "gemm_tn_bias"):  # the gate, the activation: on sums
            self._launcher(product, batch, weights, "gemm_tn")[0](grid, local, *head, i32(0))
            tail = (np.int32(ncols),) if kernel == "gemm_tn_bias" else ()  # bias's columns
            return sums((count,), None, part.data, i32(slices), c.data, i32(count), *extra,
                        *tail)
        launcher(grid, local, *head, i32(0))  # gemm_tn; extra: accumulate
        return sums((count,), None, part.data, i32(slices), c.data, i32(count), *extra)

    def backward_input(self, dz, w, dx, x=None, act: int = 0, accumulate: bool = False):
        """dx = dz W (dx += dz W with ``accumulate``); with ``act``, times act'(x) (x = the
        previous layer's output y; not with ``accumulate``); with TN_PACKED, after W is
        packed into panels (:meth:`pack_panels`)."""
        batch, n_out = dz.shape
        n_in = w.shape[1]  # dX = (dZ^T)^T W
        params = self._launcher("input", batch, n_in * n_out,
                                "gemm_tn_gated" if act else "gemm_tn")[1]
        if params.get("TN_PACKED"):
            w = self.pack_panels(w, params)
        args = (batch, n_in * n_out, dz, 1, n_out, w, dx, batch, n_in, n_out)
        if act:
            return self._tn("input", "gemm_tn_gated", *args, x.data, np.int32(act))
        return self._tn("input", "gemm_tn", *args, np.int32(accumulate))

    def backward_gate(self, s, dy, act: int, n_in: int) -> tuple:
        """(dz, dz^T): dz = dy * act'(s) (s the layer's output y, or its z where the
        activation's derivative needs z; not softmax), and with it dz^T where the weight
        gradient of this layer (``n_in`` inputs) reads dz transposed (DZT, a batch above 1),
        else None in its place: one launch of dense.cl's backward_gate, which writes both."""
        rows, cols = dy.shape
        dz = self.runtime.empty(dy.shape)
        reads_t = self._reads_dz_t(rows, self._weight_params(rows, n_in * cols))
        dz_t = self.runtime.empty((cols, rows)) if reads_t else None
        self._by_blocks("backward_gate", rows, cols, s.data, dy.data, dz.data,
                        None if dz_t is None else dz_t.data, np.int32(rows), np.int32(cols),
                        np.int32(act))
        return dz, dz_t

    def _weight_params(self, batch: int, weights: int) -> dict:
        """The weight gradient's parameters at ``batch`` on a layer of ``weights`` weights."""
        return self._launcher("weight", batch, weights, "gemm_tn_rowsum")[1]

    @staticmethod
    def _reads_dz_t(batch: int, params: dict) -> bool:
        """Whether the weight gradient with ``params`` reads dz transposed at ``batch``."""
        return batch > 1 and bool(params.get("DZT"))

    def backward_weight(self, dz, x, dw, db, accumulate: bool = True, dz_t=None):
        """dw += dz^T x and db += column sums of dz (or = without ``accumulate``), in one
        launch; with the parameter DZT and a batch above 1, on dz^T (``dz_t``, or a transpose
        of dz), so that gemm_tn reads each row of dz^T (a column of dz) contiguously; with
        TN_PACKED, after x is packed into panels (:meth:`pack_panels`)."""
        batch, n_out = dz.shape
        n_in = x.shape[1]
        strides = (n_out, 1)
        params = self._weight_params(batch, n_in * n_out)
        if self._reads_dz_t(batch, params):
            dz, strides = self.transposed(dz) if dz_t is None else dz_t, (1, batch)
        if params.get("TN_PACKED"):
            x = self.pack_panels(x, params)
        return self._tn("weight", "gemm_tn_rowsum", batch, n_in * n_out, dz, *strides, x, dw,
                        n_out, n_in, batch, np.int32(accumulate), db.data)

    def transposed(self, dz):
        """dz^T (a new array), by dense.cl's transpose; on a compiler that runs neighbouring
        work-items in the lanes of a vector (Intel's runtime) by transpose_by_columns, whose
        lanes read float4s along one row of dz, where transpose's lanes would read rows 4
        apart (``nnlib.bench.dense --products`` times the weight gradient with it)."""
        rows, cols = dz.shape
        out = self.runtime.empty((cols, rows))
        self._by_blocks("transpose", rows, cols, dz.data, out.data, np.int32(rows),
                        np.int32(cols))
        return out

    def _by_blocks(self, kernel: str, rows: int, cols: int, *args):
        """Enqueue dense.cl's ``kernel`` over the 4 x 4 blocks of a ``rows`` x ``cols``
        array, dimension 0 along its rows; on a compiler that runs neighbouring work-items
        in the lanes of a vector, its ``<kernel>_by_columns`` twin, dimension 0 along the
        columns (:meth:`transposed` says why)."""
        blocks = (ceil_div(rows, 4), ceil_div(cols, 4))
        if self.runtime.limits.vectorises_across_work_items:
            return self._transpose(f"{kernel}_by_columns", blocks[::-1], *args)
        return self._transpose(kernel, blocks, *args)

    def _transpose(self, kernel: str, blocks: tuple, *args):
        """Enqueue dense.cl's transpose ``kernel`` over ``blocks`` (4 x 4 blocks along its
        two dimensions) in work-groups of :func:`transpose_group`."""
        launcher = self.runtime.launcher("dense", kernel, small_options(self.runtime))
        return launcher(blocks, transpose_group(launcher), *args)

    def pack_panels(self, b, params: dict):
        """``b`` (nk x ncols) packed for gemm_tn with ``params`` (TN_PACKED): panels of
        TN_V * VW columns, each its nk rows in a row (dense.cl's pack_panels)."""
        nk, ncols = b.shape
        cols = params["TN_V"] * params["VW"]
        panels = self.runtime.empty((ceil_div(ncols, cols) * nk, cols))
        self.runtime.launcher("dense", "pack_panels", build_options(params, "gemm_tn_rowsum"))(
            (nk, ceil_div(ncols, cols)), None, b.data, panels.data, np.int32(nk),
            np.int32(ncols))
        return panels


def tune_problem(shape: str) -> list:
    """What :func:`measure` times for class ``shape``: [batch, n, activation], followed by
    the [batch, n] of each of TUNE_ALSO's problems of the class."""
    return [*TUNE_SHAPE[shape], TUNE_ACTIVATION.get(shape, "tanh"),
            *([b, n] for b, n in TUNE_ALSO.get(shape, ()))]


def measure(rt, product: str, shape: str, params: dict) -> float:
    """Seconds per launch of ``product`` with ``params`` on the representative problem of
    class ``shape`` (TUNE_SHAPE's batch, n -> n, TUNE_ACTIVATION's or tanh), data on the
    device; plus those of the class's TUNE_ALSO problems (the same activation)."""
    batch, n, act_name, *also = tune_problem(shape)
    return sum(measure_one(rt, product, params, b, m, act_name)
               for b, m in ([batch, n], *also))


def measure_one(rt, product: str, params: dict, batch: int, n: int, act_name: str) -> float:
    """Seconds per launch of ``product`` with ``params`` on a layer n -> n at ``batch``; the
    weight gradient written, not added to dW, as a training step of Sequential writes it."""
    act = ACTIVATIONS[act_name]
    rng = np.random.default_rng(0)
    x, w, dz = (rt.to_device(rng.standard_normal(s).astype(np.float32))
                for s in ((batch, n), (n, n), (batch, n)))
    b, out, dw = rt.zeros((n,)), rt.empty((batch, n)), rt.zeros((n, n))
    kernels = BlockedDenseKernels(rt, params={product: params})
    run = {"forward": lambda: kernels.forward(x, w, b, out, act),
           "input": lambda: kernels.backward_input(dz, w, out, x, act),
           "weight": lambda: kernels.backward_weight(dz, x, dw, b, accumulate=False)}[product]
    return tuning.time_launches(run, rt.queue.finish)
