"""One pre-norm transformer layer over channel tokens, as CATCH stacks them, in numpy:
h += Attn(LN h, mask); h += FF(LN h), FF = Linear -> GELU -> Linear; and its pieces, LayerNorm
and GELU (kernels/catch.cl), with their gradients.

Taught in notebooks/06_attention_primer.
"""

from math import erf

import numpy as np

from .attention import masked_attention_forward

__all__ = ["layer_norm_forward", "layer_norm_backward", "gelu", "gelu_grad", "transformer_block"]

_erf = np.vectorize(erf)


def layer_norm_forward(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    xhat = (x - mean) * rstd
    return gamma * xhat + beta, xhat, rstd


def layer_norm_backward(dy, gamma, xhat, rstd):
    """dx, dgamma, dbeta (x of shape (rows, c))."""
    gy = dy * gamma
    dx = rstd * (gy - gy.mean(-1, keepdims=True) - xhat * (gy * xhat).mean(-1, keepdims=True))
    return dx, (dy * xhat).sum(0), dy.sum(0)


def gelu(x):
    return 0.5 * x * (1 + _erf(x / np.sqrt(2)))


def gelu_grad(x):
    return 0.5 * (1 + _erf(x / np.sqrt(2))) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)


def transformer_block(h, params, mask, heads: int, hard: bool = False):
    """h (groups * n, width) or (groups, n, width) tokens, mask (groups, n, n), ``params``
    float arrays named like the layers' parameters ("norm1.gamma", "qkv.weight", ...).
    Returns the new h and the qkv (groups, n, 3 * inner) the attention used."""

    def lin(name, v):
        return v @ params[f"{name}.weight"].T + params[f"{name}.bias"]

    def norm(name, v):
        return layer_norm_forward(v, params[f"{name}.gamma"], params[f"{name}.beta"])[0]

    groups, n = mask.shape[:2]
    qkv = lin("qkv", norm("norm1", h)).reshape(groups, n, -1)
    att = masked_attention_forward(qkv, mask, heads, hard=hard)[0]
    h = h + lin("out", att.reshape(*h.shape[:-1], -1))
    return h + lin("ff2", gelu(lin("ff1", norm("norm2", h)))), qkv
