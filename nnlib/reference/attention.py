"""Channel-masked multi-head attention and the clustering loss of kernels/attention.cl.

``qkv`` is (groups, n, 3 * heads * dh) ([q heads | k heads | v heads] per token), ``mask``
(groups, n, n). See the kernel file for the formulas; here they are written with arrays.

Taught in notebooks/06_attention_primer, notebooks/07_catch.
"""

import numpy as np

from ..codes import FINITE_FILL

__all__ = ["FINITE_FILL", "split_qkv", "masked_attention_forward",
           "masked_attention_backward", "channel_dc_rows", "channel_dc_backward",
           "seed_masked_attention_forward", "seed_attention_key_grad"]



def split_qkv(qkv, heads: int):
    """q, k, v as (groups, heads, n, dh) views."""
    g, n, width = qkv.shape
    dh = width // (3 * heads)
    parts = qkv.reshape(g, n, 3, heads, dh).transpose(2, 0, 3, 1, 4)
    return parts[0], parts[1], parts[2]


def _logits(q, k, mask, fill, hard):
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2)  # (g, h, n, n)
    m = mask[:, None]
    z = scale * s if hard else scale * (m * s + (1 - m) * fill)
    return s, z, m, scale


def masked_attention_forward(qkv, mask, heads: int, fill=FINITE_FILL, hard: bool = False):
    """out (groups, n, heads * dh), probs (groups, heads, n, n), lse (groups, heads, n)."""
    q, k, v = split_qkv(qkv, heads)
    _, z, m, _ = _logits(q, k, mask, fill, hard)
    weight = m if hard else np.ones_like(z)
    top = np.where(weight > 0, z, -np.inf).max(-1, keepdims=True)
    used = weight != 0  # a masked key's logit may exceed top: never take its exp
    e = np.where(used, weight * np.exp(np.where(used, z - top, 0.0)), 0.0)
    total = e.sum(-1, keepdims=True)
    probs = e / total
    out = probs @ v  # (g, h, n, dh)
    g, n = qkv.shape[:2]
    return out.transpose(0, 2, 1, 3).reshape(g, n, -1), probs, (top + np.log(total))[..., 0]


def masked_attention_backward(qkv, mask, dout, heads: int, fill=FINITE_FILL,
                              hard: bool = False):
    """dqkv (like qkv) and dmask (like mask, summed over heads) from dL/dout."""
    q, k, v = split_qkv(qkv, heads)
    s, z, m, scale = _logits(q, k, mask, fill, hard)
    _, probs, lse = masked_attention_forward(qkv, mask, heads, fill, hard)
    g, n = qkv.shape[:2]
    go = dout.reshape(g, n, heads, -1).transpose(0, 2, 1, 3)
    da = go @ np.swapaxes(v, -1, -2)
    centred = da - (probs * da).sum(-1, keepdims=True)
    dz = probs * centred
    if hard:
        dmask = (np.exp(z - lse[..., None]) * centred).sum(1)
        ds = scale * dz
    else:
        dmask = (scale * dz * (s - fill)).sum(1)
        ds = scale * m * dz
    dq, dk, dv = ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(probs, -1, -2) @ go
    dqkv = np.stack([dq, dk, dv]).transpose(1, 3, 0, 2, 4).reshape(qkv.shape)
    return dqkv, dmask


def _cosines(qkv, heads):
    q, k, _ = split_qkv(qkv, heads)
    qn = np.maximum(np.linalg.norm(q, axis=-1, keepdims=True), 1e-12)
    kn = np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), 1e-12)
    cos_h = (q / qn) @ np.swapaxes(k / kn, -1, -2)  # (g, h, n, n)
    return q, k, qn, kn, cos_h


def channel_dc_rows(qkv, mask, heads: int, tau: float = 0.07, reg: float = 0.5):
    """The loss rows (groups, n); the layer's loss is rows.sum() / groups."""
    n = mask.shape[-1]
    c = _cosines(qkv, heads)[-1].mean(1)
    e = np.exp((c - c.max(-1, keepdims=True)) / tau)
    clustering = (np.log(e.sum(-1)) - np.log((mask * e).sum(-1))) / n
    if n == 1:
        return clustering
    off = (mask * (1 - np.eye(n))).sum(-1)
    return clustering + reg * off / (n * (n - 1))


def channel_dc_backward(qkv, mask, heads: int, tau: float = 0.07, reg: float = 0.5,
                        weight: float = 1.0):
    """dqkv (zero for v) and dmask of ``weight * rows.sum()``."""
    n = mask.shape[-1]
    q, k, qn, kn, cos_h = _cosines(qkv, heads)
    c = cos_h.mean(1)
    e = np.exp((c - c.max(-1, keepdims=True)) / tau)
    all_, pos = e.sum(-1, keepdims=True), (mask * e).sum(-1, keepdims=True)
    dc = weight / (n * tau) * (e / all_ - mask * e / pos)
    off = reg / (n * (n - 1)) * (1 - np.eye(n)) if n > 1 else 0.0
    dmask = weight * (-e / (n * pos) + off)
    dch = dc[:, None] / heads  # (g, 1, n, n), the same for every head
    qh, kh = q / qn, k / kn
    dq = (dch @ kh - (dch * cos_h).sum(-1, keepdims=True) * qh) / qn
    dk = (np.swapaxes(dch, -1, -2) @ qh - (dch * cos_h).sum(-2)[..., None] * kh) / kn
    dqkv = np.stack([dq, dk, np.zeros_like(dk)]).transpose(1, 3, 0, 2, 4).reshape(qkv.shape)
    return dqkv, dmask


def seed_masked_attention_forward(qkv, mask, heads: int):
    """The seed's MaskAttentionComplex as it runs (real case): the score is overwritten
    inside the loop and then unused, so every kept logit is exp(0) = 1 and the attention
    is the normalised mask; q and k have no effect. For the notebook's gradient check."""
    _, _, v = split_qkv(qkv, heads)
    probs = np.broadcast_to(mask[:, None] / mask.sum(-1, keepdims=True)[:, None],
                            v.shape[:2] + mask.shape[1:])
    g, n = qkv.shape[:2]
    return (probs @ v).transpose(0, 2, 1, 3).reshape(g, n, -1)


def seed_attention_key_grad(qkv, mask, dout, heads: int):
    """The seed's key gradient: sum_v A_v (G . V_k) (delta_vk - A_k) with the key's own value
    V_k where V_v belongs; it equals (G . V_k) A_k (1 - sum_v A_v) = 0 for every row."""
    q, k, v = split_qkv(qkv, heads)
    _, probs, _ = masked_attention_forward(qkv, mask, heads)
    g, n = qkv.shape[:2]
    go = dout.reshape(g, n, heads, -1).transpose(0, 2, 1, 3)
    gv = go @ np.swapaxes(v, -1, -2)  # (g, h, i, k): G_i . V_k
    eye = np.eye(n)
    # sum over v of A_iv (G_i . V_k) (delta_vk - A_ik)
    coeff = (probs[..., :, :, None] * (eye[None, None, None] - probs[..., :, None, :])).sum(-2)
    return np.einsum("ghik,ghid->ghkd", gv * coeff, q)
