"""The numpy maths of the kernel puzzles (nnlib.exercises.puzzles): what each puzzle's kernel
must compute. Block-wise puzzles take ``group``, the work-group size L: work-group g owns the
elements g L .. g L + L - 1.

Taught in notebooks/00_devices, 03_cpu_vs_gpu, 05_complex_and_fft, 06_attention_primer.
"""

from __future__ import annotations

import numpy as np


def _blocks(a: np.ndarray, group: int) -> list[np.ndarray]:
    return [a[start:start + group] for start in range(0, a.size, group)]


def window(a: np.ndarray, width: int = 3) -> np.ndarray:
    """out[i] = a[i - width + 1] + ... + a[i], values before a[0] counting as 0."""
    padded = np.concatenate([np.zeros(width - 1, a.dtype), a])
    return sum(padded[k:k + a.size] for k in range(width)).astype(a.dtype)


def block_reverse(a: np.ndarray, group: int) -> np.ndarray:
    """Each block of ``group`` elements reversed (the last block may be shorter)."""
    return np.concatenate([b[::-1] for b in _blocks(a, group)])


def block_sum(a: np.ndarray, group: int) -> np.ndarray:
    return np.array([b.sum(dtype=np.float64) for b in _blocks(a, group)], a.dtype)


def block_max(a: np.ndarray, group: int) -> np.ndarray:
    return np.array([b.max() for b in _blocks(a, group)], a.dtype)


def block_dot(a: np.ndarray, b: np.ndarray, group: int) -> np.ndarray:
    return block_sum((a.astype(np.float64) * b).astype(a.dtype), group)


def block_scan(a: np.ndarray, group: int) -> np.ndarray:
    """Inclusive prefix sums within each block."""
    return np.concatenate([np.cumsum(b, dtype=np.float64) for b in _blocks(a, group)]).astype(
        a.dtype)


def histogram(values: np.ndarray, bins: int) -> np.ndarray:
    return np.bincount(values, minlength=bins).astype(np.int32)


def twiddles(n: int) -> np.ndarray:
    """tw[m] = exp(-2 pi i m / n) for m < n / 2."""
    return np.exp(-2j * np.pi * np.arange(n // 2) / n).astype(np.complex64)


def butterfly_stage(src: np.ndarray, span: int) -> np.ndarray:
    """One radix-2 stage of half-span ``span``: butterfly j (k = j mod span, i0 = (j // span)
    2 span + k, i1 = i0 + span) writes src[i0] +- tw[k n / (2 span)] src[i1]."""
    n = src.size
    j = np.arange(n // 2)
    k = j % span
    i0 = (j // span) * 2 * span + k
    i1 = i0 + span
    t = twiddles(n)[k * (n // (2 * span))].astype(np.complex128) * src[i1]
    dst = np.empty(n, np.complex128)
    dst[i0], dst[i1] = src[i0] + t, src[i0] - t
    return dst.astype(np.complex64)


def row_softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    return (z / z.sum(axis=-1, keepdims=True)).astype(x.dtype)
