"""Checks of notebook 05_complex_and_fft: complex products and an FFT stage."""

from __future__ import annotations

import numpy as np

from .. import reference as ref
from .harness import (Output, complex_normal, guard, launch, new_rng, student_kernel, to_device,
                      wide)
from .registry import exercise
from .verdicts import Case, Verdict, verdict


@exercise("05_complex_and_fft", points=2, kernel=True, hints=(
    "conj(a) flips the sign of the imaginary part of a; then multiply as complex numbers.",
    "conj(a) b = (a.x b.x + a.y b.y) + i (a.x b.y - a.y b.x)."))
def check_cmulconj(folder) -> Verdict:
    """``cmulconj(a, b)`` = conj(a) * b in ``<folder>/complex.cl``, run through the
    ``complex_ops(a, b, out, n, op)`` kernel with op 1."""
    def cases():
        kernel = student_kernel(folder, "complex", "complex_ops", ("a", "b", "out", "n", "op"))
        rng = new_rng()
        for n in (1, 37, wide()):
            a, b = complex_normal(rng, (2, n))

            def run(a=a, b=b):
                out = Output(a.shape, guard(a.shape), np.complex64)
                launch(kernel, a.shape, to_device(a, np.complex64).data,
                        to_device(b, np.complex64).data, out.array.data, np.int32(a.size),
                        np.int32(1))
                return out.get("out")
            yield Case(f"n = {n}", run, np.conj(a) * b, "out",
                       {"the conjugate is missing: conj(a) flips the sign of a.y": a * b,
                        "conjugate a, not b": a * np.conj(b),
                        "conjugate a only, not the whole product": np.conj(a * b)},
                       "conj(a) b = (a.x b.x + a.y b.y) + i (a.x b.y - a.y b.x)")
    return verdict("check_cmulconj", "cmulconj", cases)


@exercise("05_complex_and_fft", points=2, kernel=True, hints=(
    "One work-item per butterfly j: it reads src[j] and src[j + n/2] and writes two "
    "outputs p apart.",
    "k = j mod p; w = tw[k (n/2) / p] (conjugated if inverse); a = src[j], "
    "b = src[j + n/2] w; dst[2j - k] = (a + b) scale, dst[2j - k + p] = (a - b) scale."))
def check_fft_radix2_stage(folder) -> Verdict:
    """``fft_radix2_stage(src, dst, tw, rows, n, p, inverse, scale)`` in ``<folder>/fft.cl``:
    one Stockham radix-2 stage, compared with ``nnlib.reference.stockham_stage``."""
    params = ("src", "dst", "tw", "rows", "n", "p", "inverse", "scale")

    def cases():
        kernel = student_kernel(folder, "fft", "fft_radix2_stage", params)
        rng = new_rng()
        big = 2 ** int(np.ceil(np.log2(wide()))) * 2  # n/2 butterflies above the work-group limit
        for rows, n, p, inverse, scale in ((1, 8, 1, 0, 1.0), (3, 16, 4, 1, 0.5), (2, 8, 4, 0, 1.0),
                                           (1, big, 2, 0, 1.0)):
            src = complex_normal(rng, (rows, n))
            tw = np.exp(-2j * np.pi * np.arange(n) / n)

            def run(src=src, tw=tw, p=p, inverse=inverse, scale=scale):
                rows, n = src.shape
                dst = Output(src.shape, guard((n, rows)), np.complex64)
                launch(kernel, (n // 2, rows), to_device(src, np.complex64).data, dst.array.data,
                        to_device(tw, np.complex64).data, np.int32(rows), np.int32(n), np.int32(p),
                        np.int32(inverse), np.float32(scale))
                return dst.get("dst")
            stage = ref.stockham_stage(src, p, 2, bool(inverse)).astype(np.complex64)
            mistakes = {"inverse: conjugate the twiddle (w.y = -w.y)":
                        ref.stockham_stage(src, p, 2, not inverse) * scale}
            if scale != 1:
                mistakes["multiply both outputs by scale"] = stage
            yield Case(f"{rows} rows, n = {n}, p = {p}, {'inverse' if inverse else 'forward'}",
                       run, stage * np.complex64(scale), "dst", mistakes,
                       "k = j mod p, a = src[j], b = src[j + n/2] w^k; dst[2j - k] = a + b, "
                       "dst[2j - k + p] = a - b, both times scale")
    return verdict("check_fft_radix2_stage", "fft_radix2_stage", cases, rtol=1e-4, atol=1e-4)
