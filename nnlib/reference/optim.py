"""The optimizer update rules in numpy: one function per rule, one step each.

Each takes the weights, the gradient, the state arrays and the step number ``t`` (from 1)
and returns the new weights and state. They work in float64 for checks.

Taught in notebooks/04_optimizers.
"""

import numpy as np

__all__ = ["sgd_step", "adam_step", "adam_mini_step", "adan_step"]


def sgd_step(w, g, v, lr, momentum=0.0, nesterov=False, weight_decay=0.0):
    """torch.optim.SGD (dampening 0); returns (w, v)."""
    g = g + weight_decay * w
    if not momentum:
        return w - lr * g, v
    v = momentum * v + g
    return w - lr * (g + momentum * v if nesterov else v), v


def adam_step(w, g, m, v, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              decoupled=False):
    """torch.optim.Adam (``decoupled=False``) or AdamW (``True``); returns (w, m, v)."""
    b1, b2 = betas
    if decoupled:
        w = w * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * w
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    denom = np.sqrt(v) / np.sqrt(1 - b2**t) + eps
    return w - lr / (1 - b1**t) * m / denom, m, v


def adam_mini_step(w, g, m, vb, t, block, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                   weight_decay=0.0):
    """Adam-mini v1.1.1 on a tensor split into consecutive blocks of ``block`` elements, with
    one second moment per block in ``vb``; returns (w, m, vb)."""
    b1, b2 = betas
    shape = w.shape
    w, g, m = (a.reshape(-1, block) for a in (w, g, m))
    w = w * (1 - lr * weight_decay)
    m = b1 * m + (1 - b1) * g
    vb = b2 * vb + (1 - b2) * np.mean(g * g, axis=1)
    denom = np.sqrt(vb)[:, None] / np.sqrt(1 - b2**t) + eps
    w = w - lr / (1 - b1**t) * m / denom
    return w.reshape(shape), m.reshape(shape), vb


def adan_step(w, g, m, d, n, g_prev, t, lr=1e-3, betas=(0.98, 0.92, 0.99), eps=1e-8,
              weight_decay=0.0, no_prox=False):
    """The official Adan code (its beta convention); returns (w, m, d, n, g_prev)."""
    b1, b2, b3 = betas
    diff = np.zeros_like(g) if t == 1 else g - g_prev
    m = b1 * m + (1 - b1) * g
    d = b2 * d + (1 - b2) * diff
    n = b3 * n + (1 - b3) * (g + b2 * diff) ** 2
    denom = np.sqrt(n) / np.sqrt(1 - b3**t) + eps
    step = lr / (1 - b1**t) * m / denom + lr * b2 / (1 - b2**t) * d / denom
    if no_prox:
        w = w * (1 - lr * weight_decay) - step
    else:
        w = (w - step) / (1 + lr * weight_decay)
    return w, m, d, n, g.copy()
