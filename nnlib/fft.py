"""The FFT and its inverse along the last axis, on the device (kernels/fft.cl).

    z = nnlib.fft.fft(x)              # (..., n) complex64 device array, like np.fft.fft
    x2 = nnlib.fft.ifft(z)            # like np.fft.ifft; x2 == x to float32 precision
    layer = nnlib.fft.FFT(inverse=False, norm="backward")   # forward / backward, as a layer

Any length n. Lengths 2^a 3^b 5^c run Stockham stages of radix 2, 4, 3 and 5: all of them in
one launch in local memory ("local": on a GPU a work-group per row, on a CPU a work-item per
few rows, their values side by side in SIMD lanes), when two rows fit there; one
launch per stage in global memory otherwise ("pow2": radix-4/2 stages, "mixed"). Other lengths
use a direct DFT up to ``DIRECT_MAX`` and Bluestein above. ``norm`` has numpy's meaning
("backward": no scaling on the forward transform, 1/n on the inverse; "ortho": 1/sqrt(n) on
both; "forward": 1/n on the forward). Inputs: a numpy array (real or complex, converted to
complex64) or a complex64 device array; outputs are new complex64 device arrays of the same
shape.

Gradients follow the conjugate convention G = dL/dRe + i dL/dIm (see kernels/complex.cl).
The adjoint of the DFT matrix F is conj(F) = n * inverse DFT, so the backward pass of
``fft(., norm)`` is ``ifft(., dual(norm))`` and vice versa, where ``dual`` swaps "backward"
and "forward" and keeps "ortho".

Real <-> complex helpers, each with its adjoint (their backward passes):
``to_complex`` (x -> x + 0i) / ``real_part``; ``re_im`` ((..., n) complex -> (..., 2n) real
[Re | Im], CATCH's block layout) / ``from_re_im``.

Taught in notebooks/05_complex_and_fft.
"""

from __future__ import annotations

import weakref

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from . import tuning
from .layers.base import Layer
from .runtime import get_runtime
from .sizes import ceil_div, is_smooth, radices, vector_width

__all__ = ["fft", "ifft", "FFT", "to_complex", "real_part", "re_im", "from_re_im",
           "DIRECT_MAX", "NORMS", "dual_norm"]

DIRECT_MAX = 24  # lengths up to this with a prime factor above 5 use the O(n^2) direct DFT
NORMS = ("backward", "ortho", "forward")
ROW_WIDTHS = (2, 4, 8)  # fft.cl's VR: rows per work-item of fft_rows
_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}
_plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # runtime -> {n: _Plan}


def dual_norm(norm: str) -> str:
    """The normalisation whose inverse transform is the adjoint of ``norm``'s forward one."""
    _check_norm(norm)
    return _DUAL[norm]


def _check_norm(norm):
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}; choose one of {NORMS}")


def _scale(n: int, norm: str, inverse: bool) -> float:
    _check_norm(norm)
    if norm == "ortho":
        return 1.0 / np.sqrt(n)
    return 1.0 / n if (norm == "forward") != inverse else 1.0


def _is_pow2(n: int) -> bool:
    return n >= 2 and n & (n - 1) == 0


def _twiddles(n: int) -> np.ndarray:
    """exp(-2 pi i m / n) for m < n, from float64."""
    return np.exp(-2j * np.pi * np.arange(n) / n).astype(np.complex64)


def local_candidates(rt, kernel, n: int) -> tuple[dict, list]:
    """(default, candidates) for the one-launch transform of length ``n`` in local memory:
    ``VR`` 0 runs fft_local with ``LOCAL`` work-items per group sharing each row's
    butterflies; ``VR`` 2, 4 or 8 runs fft_rows, a work-item transforming VR rows at once in
    SIMD lanes (``LOCAL`` 1). ``GROUPS_PER_CU``: the work-groups per compute unit the rows
    are split into (0: one row per group).

    On a GPU, fft_local with one row per group, its butterflies spread over the work-items.
    On a CPU PoCL runs a work-group as a loop on one thread and schedules each as a task:
    fft_local with one short row per group pays that cost more than the transform, so one
    work-item walks all butterflies of a row, and fft_rows takes VR rows per work-item at
    once (VR = the device's float vector width is the default; the tuner measures the
    others)."""
    top = max(1, min(kernel.work_group_size, n // 2))
    if rt.is_gpu:
        sizes = sorted({top, min(top, 2 * rt.work_group_multiple),
                        min(top, rt.work_group_multiple)})
        return ({"VR": 0, "LOCAL": top, "GROUPS_PER_CU": 0},
                [{"VR": 0, "LOCAL": s, "GROUPS_PER_CU": 0} for s in sizes])
    rows = [{"VR": vr, "LOCAL": 1, "GROUPS_PER_CU": g}
            for vr in dict.fromkeys((vector_width(rt.vector_width, ROW_WIDTHS), 8, 4, 2))
            for g in (16, 4) if 2 * 8 * n * vr <= _local_mem_size(rt)]
    items = [{"VR": 0, "LOCAL": 1, "GROUPS_PER_CU": g} for g in (16, 4, 64)] + [
        {"VR": 0, "LOCAL": min(top, rt.work_group_multiple), "GROUPS_PER_CU": 16}]
    candidates = rows + items
    return candidates[0], candidates


def _measure_local(rt, n: int, params: dict) -> float:
    """Seconds per forward transform of about 2^18 values in rows of ``n`` with ``params``."""
    rows = max(1, 2**18 // n)
    rng = np.random.default_rng(0)
    x = rt.to_device((rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n))),
                     dtype=np.complex64)
    trial = _Plan(rt, n, local_params=params)
    return tuning.time_launches(lambda: trial.run(x, False, 1.0), rt.queue.finish)


def _local_mem_size(rt) -> int:
    """Bytes of local memory a work-group may use (the tests replace it to force the
    global-memory paths)."""
    return rt.local_mem_size


class _Plan:
    """How one length is transformed on one runtime, with its tables on the device."""

    def __init__(self, rt, n: int, local_params: dict | None = None):
        self.rt, self.n = rt, n
        if is_smooth(n):
            self.radices = radices(n)
            self.tw = cla.to_device(rt.queue, _twiddles(n))
            self.tw_inverse = cla.to_device(rt.queue, _twiddles(n).conj())
            self.kind = ("local" if 2 * 8 * n <= _local_mem_size(rt)
                         else "pow2" if _is_pow2(n) else "mixed")
        # the algorithm, the same on every device ("kind" also says where the stages run)
        self.algorithm = ("stockham" if is_smooth(n) else "direct" if n <= DIRECT_MAX
                          else "bluestein")
        if is_smooth(n) and self.kind == "local":
            if local_params is None:  # tuned per device, one class per power of two of n
                default, candidates = local_candidates(rt, rt.launcher("fft", "fft_local"), n)
                local_params = tuning.tuned(
                    rt, "fft.local", f"n{1 << (n - 1).bit_length()}", candidates,
                    lambda p: _measure_local(rt, n, p), default)
            self.vr = local_params["VR"]
            self.local = rt.launcher("fft", "fft_rows" if self.vr else "fft_local",
                                     (f"-DVR={self.vr}",) if self.vr else ())
            self.local_size = min(local_params["LOCAL"], self.local.work_group_size)
            self.groups_per_cu = local_params["GROUPS_PER_CU"]
            self.table = cla.to_device(rt.queue, np.array(self.radices, np.int32))
        elif is_smooth(n) and self.kind == "pow2":
            self.stages = [(rt.launcher("fft", f"fft_radix{r}_stage"), r) for r in self.radices]
        elif is_smooth(n):
            self.stages = [(rt.launcher("fft", "fft_stage"), r) for r in self.radices]
        elif n <= DIRECT_MAX:
            self.kind = "direct"
            self.dft = rt.launcher("fft", "dft_direct")
            self.tw = cla.to_device(rt.queue, _twiddles(n))
        else:
            self.kind = "bluestein"
            self.m = 1 << (2 * n - 2).bit_length()  # the power of two >= 2n - 1
            j = np.arange(n, dtype=np.int64)
            chirp = np.exp(-1j * np.pi * ((j * j) % (2 * n)) / n)  # exp(-i pi j^2 / n)
            self.chirp = cla.to_device(rt.queue, chirp.astype(np.complex64))
            b = np.zeros(self.m, np.complex128)
            b[:n], b[self.m - n + 1:] = chirp.conj(), chirp.conj()[1:][::-1]
            self.inner = plan(rt, self.m)
            self.filter = self.inner.run(cla.to_device(rt.queue, b.astype(np.complex64)),
                                         False, 1.0)
            self.chirp_in = rt.launcher("fft", "bluestein_chirp_in")
            self.multiply = rt.launcher("fft", "bluestein_multiply")
            self.chirp_out = rt.launcher("fft", "bluestein_chirp_out")

    def run(self, x, inverse: bool, scale: float):
        """A new array: the (unnormalised, times ``scale``) transform of each row of ``x``."""
        rt, n = self.rt, self.n
        rows = x.size // n
        out = rt.empty(x.shape, np.complex64)
        args = (np.int32(rows), np.int32(n))
        if self.kind == "direct":
            self.dft((n, rows), None, x.data, out.data, self.tw.data, *args,
                     np.int32(inverse), np.float32(scale))
        elif self.kind == "local":
            tw = self.tw_inverse if inverse else self.tw
            blocks = ceil_div(rows, max(self.vr, 1))  # fft_rows: blocks of VR rows
            spread = self.groups_per_cu * rt.limits.compute_units
            per_group = max(1, ceil_div(blocks, spread)) if spread else 1
            groups = ceil_div(blocks, per_group)
            size = self.local_size
            self.local((size, groups) if not self.vr else (groups,),
                       (size, 1) if not self.vr else (1,), x.data, out.data, tw.data,
                       self.table.data, np.int32(len(self.radices)), *args,
                       np.int32(per_group), np.int32(inverse), np.float32(scale),
                       cl.LocalMemory(2 * 8 * n * max(self.vr, 1)))
        elif self.kind in ("pow2", "mixed"):
            count = len(self.stages)
            spare = rt.empty(x.shape, np.complex64)
            # ping-pong so that the last stage writes `out`
            dst = out if count % 2 == 1 else spare
            src, p = x, 1
            for s, (stage, radix) in enumerate(self.stages):
                last = s == count - 1
                mixed = self.kind == "mixed"
                extra = (np.int32(radix),) if mixed else ()
                tw = self.tw_inverse if mixed and inverse else self.tw
                stage((n // radix, rows), None, src.data, dst.data, tw.data,
                      *args, np.int32(p), *extra, np.int32(inverse),
                      np.float32(scale if last else 1.0))
                src, dst, p = dst, (spare if dst is out else out), radix * p
        else:
            m = self.m
            padded = rt.empty((rows, m), np.complex64)
            self.chirp_in((m, rows), None, x.data, padded.data, self.chirp.data,
                          *args, np.int32(m), np.int32(inverse))
            spectrum = self.inner.run(padded, False, 1.0)
            self.multiply((m, rows), None, spectrum.data, self.filter.data,
                          np.int32(rows), np.int32(m))
            conv = self.inner.run(spectrum, True, 1.0 / m)
            self.chirp_out((n, rows), None, conv.data, out.data, self.chirp.data,
                           *args, np.int32(m), np.int32(inverse), np.float32(scale))
        return out


def plan(rt, n: int) -> _Plan:
    """The cached plan for length ``n`` on runtime ``rt`` (``plan(rt, n).kind`` says which
    algorithm runs: "local" (every Stockham stage in one launch), "pow2" or "mixed" (one
    launch per stage), "direct" or "bluestein")."""
    cache = _plans.setdefault(rt, {})
    if n not in cache:
        cache[n] = _Plan(rt, n)
    return cache[n]


def _complex_input(x, rt, name):
    if not isinstance(x, cla.Array):
        x = np.asarray(x)
        if x.ndim and not np.iscomplexobj(x):
            x = x.astype(np.float32).astype(np.complex64)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"{name}: need at least one axis and a last axis of length >= 1, "
                         f"got shape {x.shape}")
    x = rt.to_device(x, name, dtype=np.complex64)
    if not x.flags.c_contiguous:
        raise ValueError(f"{name}: device array must be C-contiguous")
    return x


def _transform(x, inverse, norm, runtime, name):
    rt = runtime or get_runtime()
    x = _complex_input(x, rt, name)
    n = x.shape[-1]
    if x.size == 0:
        return rt.empty(x.shape, np.complex64)
    return plan(rt, n).run(x, inverse, _scale(n, norm, inverse))


def fft(x, norm: str = "backward", runtime=None):
    """X_k = sum_j x_j exp(-2 pi i jk/n) along the last axis (times the ``norm`` factor)."""
    return _transform(x, False, norm, runtime, "fft input")


def ifft(x, norm: str = "backward", runtime=None):
    """x_j = (1/n) sum_k X_k exp(+2 pi i jk/n) along the last axis (``norm`` as numpy)."""
    return _transform(x, True, norm, runtime, "ifft input")


class FFT(Layer):
    """``fft`` (or ``ifft`` when ``inverse``) as a layer: ``backward(g)`` applies the adjoint,
    the opposite transform with the dual normalisation. Complex64 in and out, no parameters.
    """

    def __init__(self, inverse: bool = False, norm: str = "backward", runtime=None):
        super().__init__(runtime)
        _check_norm(norm)
        self.inverse, self.norm = bool(inverse), norm

    def __repr__(self):
        return f"FFT(inverse={self.inverse}, norm={self.norm!r})"

    def config(self) -> dict:
        return {"inverse": self.inverse, "norm": self.norm}

    def forward(self, x):
        op = ifft if self.inverse else fft
        y = op(x, self.norm, self.runtime)
        self.save_for_backward(y.shape)  # the adjoint needs only the shape
        return y

    def backward(self, grad_out):
        (shape,) = self.saved()
        g = _complex_input(grad_out, self.runtime, "FFT grad_out")
        if g.shape != shape:
            raise ValueError(f"FFT grad_out: expected shape {shape}, got {g.shape}")
        op = fft if self.inverse else ifft
        return op(g, _DUAL[self.norm], self.runtime)


def _elementwise(rt, name, src, out, count):
    rt.launcher("fft", name)((count,), None, src.data, out.data, np.int32(count))
    return out


def to_complex(x, runtime=None):
    """x + 0i as a complex64 device array. Its adjoint (backward pass) is ``real_part``."""
    rt = runtime or get_runtime()
    x = rt.to_device(x, "to_complex input")
    return _elementwise(rt, "to_complex", x, rt.empty(x.shape, np.complex64), x.size)


def real_part(z, runtime=None):
    """Re z as a float32 device array. Its adjoint is ``to_complex``."""
    rt = runtime or get_runtime()
    z = _complex_input(z, rt, "real_part input")
    return _elementwise(rt, "real_part", z, rt.empty(z.shape), z.size)


def re_im(z, runtime=None):
    """(..., n) complex -> (..., 2n) float32 [Re z | Im z]. Adjoint and inverse: ``from_re_im``."""
    rt = runtime or get_runtime()
    z = _complex_input(z, rt, "re_im input")
    n = z.shape[-1]
    out = rt.empty(z.shape[:-1] + (2 * n,))
    re_im = rt.launcher("fft", "re_im")
    re_im((n, z.size // n), None, z.data, out.data,
          np.int32(z.size // n), np.int32(n))
    return out


def from_re_im(r, runtime=None):
    """(..., 2n) float32 [Re | Im] -> (..., n) complex64. Adjoint and inverse: ``re_im``."""
    rt = runtime or get_runtime()
    r = rt.to_device(r, "from_re_im input")
    if r.ndim == 0 or r.shape[-1] % 2 or r.shape[-1] == 0:
        raise ValueError(f"from_re_im input: last axis must have even length >= 2, "
                         f"got shape {r.shape}")
    n = r.shape[-1] // 2
    z = rt.empty(r.shape[:-1] + (n,), np.complex64)
    from_re_im = rt.launcher("fft", "from_re_im")
    from_re_im((n, r.size // (2 * n)), None, r.data, z.data,
               np.int32(r.size // (2 * n)), np.int32(n))
    return z
