"""The FFT algorithms of kernels/fft.cl in numpy, along the last axis (np.fft is the oracle).

Taught in notebooks/05_complex_and_fft.
"""

import numpy as np

from ..sizes import is_smooth, radices  # the stages the kernels use

__all__ = ["dft", "radices", "is_smooth", "stockham_stage", "fft_stages", "fft_pow2",
           "fft_mixed", "bluestein", "fft_adjoint"]


def dft(x, inverse: bool = False):
    """The O(n^2) definition: X_k = sum_j x_j exp(-+2 pi i jk/n), unnormalised."""
    n = x.shape[-1]
    sign = 1 if inverse else -1
    jk = np.outer(np.arange(n), np.arange(n)) % n
    return x @ np.exp(sign * 2j * np.pi * jk / n)


def stockham_stage(src, p: int, radix: int, inverse: bool = False):
    """One stage, as ``fft_radix2_stage`` / ``fft_radix4_stage``: merge the length-p
    transforms into length-(radix p) ones. For j < n/radix, k = j mod p:
    a_r = src[j + r n/radix] w^(rk), w = exp(-+2 pi i/(radix p));
    dst[(j - k) radix + k + q p] = sum_r a_r exp(-+2 pi i rq/radix)."""
    n = src.shape[-1]
    sign = 1 if inverse else -1
    j = np.arange(n // radix)
    k = j % p
    a = [src[..., j + r * (n // radix)] * np.exp(sign * 2j * np.pi * r * k / (radix * p))
         for r in range(radix)]
    dst = np.empty(src.shape, complex)
    for q in range(radix):
        dst[..., (j - k) * radix + k + q * p] = sum(
            a[r] * np.exp(sign * 2j * np.pi * r * q / radix) for r in range(radix))
    return dst


def fft_stages(x, inverse: bool = False, radix_list=None):
    """Every intermediate array of the Stockham FFT (unnormalised), the input first.
    ``radix_list`` defaults to the kernels' ``radices(n)``; [2] * log2(n) is the textbook
    radix-2 FFT."""
    out, p = [np.asarray(x, dtype=complex)], 1
    for radix in radix_list or radices(x.shape[-1]):
        out.append(stockham_stage(out[-1], p, radix, inverse))
        p *= radix
    if p != x.shape[-1]:
        raise ValueError(f"radices {radix_list} do not multiply to n = {x.shape[-1]}")
    return out


def fft_pow2(x, inverse: bool = False):
    n = x.shape[-1]
    if n < 2 or n & (n - 1):
        raise ValueError(f"need a power-of-two length >= 2, got {n}")
    return fft_stages(x, inverse)[-1]


def fft_mixed(x, inverse: bool = False):
    """The mixed-radix Stockham FFT (radices 2, 4, 3, 5) of a length 2^a 3^b 5^c."""
    return fft_stages(x, inverse)[-1]


def bluestein(x, inverse: bool = False):
    """The length-n DFT as a circular convolution of length m >= 2n - 1 (unnormalised)."""
    if inverse:
        return np.conj(bluestein(np.conj(x)))
    n = x.shape[-1]
    m = 1 << (2 * n - 2).bit_length()
    j = np.arange(n)
    chirp = np.exp(-1j * np.pi * (j * j % (2 * n)) / n)
    a = np.zeros(x.shape[:-1] + (m,), complex)
    a[..., :n] = x * chirp
    b = np.zeros(m, complex)
    b[:n], b[m - n + 1:] = chirp.conj(), chirp.conj()[1:][::-1]
    return chirp * np.fft.ifft(np.fft.fft(a) * np.fft.fft(b))[..., :n]


def fft_adjoint(g, norm: str = "backward"):
    """G_x for y = np.fft.fft(x, norm=norm) given G_y (conjugate convention): F^H G_y."""
    dual = {"backward": "forward", "ortho": "ortho", "forward": "backward"}[norm]
    return np.fft.ifft(g, norm=dual)
