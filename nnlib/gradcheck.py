"""Central finite differences, in float64, for gradient checks (tests and notebooks).

Taught in notebooks/06_attention_primer.
"""

import numpy as np


def numeric_grad(f, x: np.ndarray, eps: float = 1e-3) -> np.ndarray:
    """d f / d x for a scalar function ``f`` of an array ``x`` (x is restored afterwards)."""
    grad = np.zeros(x.shape, dtype=np.float64)
    flat, gflat = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + eps
        up = f()
        flat[i] = keep - eps
        down = f()
        flat[i] = keep
        gflat[i] = (up - down) / (2 * eps)
    return grad


def max_rel_error(got, want) -> float:
    """max |got - want| / max |want|: the largest error relative to the gradient's size."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-8))
