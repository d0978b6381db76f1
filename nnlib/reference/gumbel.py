"""Softmax's gradient and the Gumbel-softmax straight-through estimator of
kernels/activation.cl, in numpy (rows along the last axis).

Taught in notebooks/06_attention_primer.
"""

import numpy as np

from .dense import softmax

__all__ = ["softmax_backward", "gumbel_softmax", "gumbel_softmax_backward"]


def softmax_backward(y, dy, scale: float = 1.0):
    """scale * y (dy - sum(dy y)): the softmax Jacobian applied to dy, with y = softmax(z)."""
    return scale * y * (dy - (dy * y).sum(-1, keepdims=True))


def gumbel_softmax(logits, noise, tau: float):
    """soft = softmax((logits + noise) / tau) and hard, the one-hot of its largest entry."""
    soft = softmax((logits + noise) / tau)
    hard = np.zeros_like(soft)
    np.put_along_axis(hard, soft.argmax(-1)[..., None], 1.0, -1)
    return soft, hard


def gumbel_softmax_backward(soft, dhard, tau: float):
    """The straight-through gradient dL/dlogits: dL/dhard sent through soft's Jacobian."""
    return softmax_backward(soft, dhard, 1.0 / tau)
