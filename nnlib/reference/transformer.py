"""One pre-norm transformer layer over channel tokens, as CATCH stacks them, in numpy:
h += Attn(LN h, mask); h += FF(LN h), FF = Linear -> GELU -> Linear.

Taught in notebooks/06_attention_primer.
"""

from .attention import masked_attention_forward
from .catch import gelu, layer_norm_forward

__all__ = ["transformer_block"]


def transformer_block(h, params, mask, heads: int, hard: bool = False):
    """h (groups * n, width) or (groups, n, width) tokens, mask (groups, n, n), ``params`` float arrays named like
    the layers' parameters ("norm1.gamma", "qkv.weight", ...). Returns the new h and the
    qkv (groups, n, 3 * inner) the attention used."""

    def lin(name, v):
        return v @ params[f"{name}.weight"].T + params[f"{name}.bias"]

    def norm(name, v):
        return layer_norm_forward(v, params[f"{name}.gamma"], params[f"{name}.beta"])[0]

    groups, n = mask.shape[:2]
    qkv = lin("qkv", norm("norm1", h)).reshape(groups, n, -1)
    att = masked_attention_forward(qkv, mask, heads, hard=hard)[0]
    h = h + lin("out", att.reshape(*h.shape[:-1], -1))
    return h + lin("ff2", gelu(lin("ff1", norm("norm2", h)))), qkv
