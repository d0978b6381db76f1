"""The CATCH kernels of kernels/catch.cl in numpy (series laid out (batch, channels, time)),
plus the whole forward pass of the detector for the tests.

Taught in notebooks/06_attention_primer, notebooks/07_catch.
"""

import numpy as np

from .attention import channel_dc_rows
from .transformer import transformer_block

__all__ = ["revin_norm", "freq_patches", "patch_amplitude", "mask_sample", "mask_weight_grad",
           "freq_mae", "step_scores", "catch_forward"]


def revin_norm(x):
    """(x - mean) / std over the last axis, std = sqrt(var + 1e-5); returns out, mean, std."""
    mean = x.mean(-1, keepdims=True)
    std = np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    return (x - mean) / std, mean, std


def freq_patches(spec, p: int, s: int):
    """(batch, channels, t) complex -> (batch, patches, channels, 2p) [Re | Im] patches."""
    t = spec.shape[-1]
    starts = np.arange((t - p) // s + 1) * s
    idx = starts[:, None] + np.arange(p)
    patch = spec[..., idx]  # (b, c, l, p)
    return np.concatenate([patch.real, patch.imag], -1).transpose(0, 2, 1, 3)


def patch_amplitude(z):
    """[Re | Im] patch rows (..., 2p) -> the amplitudes (..., p)."""
    p = z.shape[-1] // 2
    return np.hypot(z[..., :p], z[..., p:])


def mask_sample(z, w, noise, sharpen: float = 2.0):
    """mask, prob, slope of ``mask_sample`` for patches z (groups, n, width), w (n, width)."""
    a = z @ w.T
    u = sharpen * a + noise
    y = 1 / (1 + np.exp(-u))
    eye = np.eye(z.shape[1], dtype=bool)
    mask = np.where(eye, 1.0, (u >= 0).astype(float))
    slope = np.where(eye, 0.0, sharpen * y * (1 - y))
    return mask, 1 / (1 + np.exp(-a)), slope


def mask_weight_grad(z, slope, dmask):
    """dL/dw through the straight-through estimator: sum_{g,c} dmask slope (x) z."""
    return np.einsum("gcd,gck->dk", dmask * slope, z)


def freq_mae(z, y):
    """Elementwise |z - y| of complex arrays and its gradient dL/dRe + i dL/dIm (0 at 0)."""
    d = z - y
    e = np.abs(d)
    return e, np.where(e > 0, d / np.where(e > 0, e, 1), 0)


def step_scores(x, xhat, p: int, lam: float):
    """Per-step anomaly scores of windows (batch, channels, t): mean over channels of the
    squared residual plus lam times the mean |FFT| of the residual's length-p sub-windows
    (stride 1), averaged over the sub-windows that contain the step."""
    r = x - xhat
    t = r.shape[-1]
    count = t - p + 1
    idx = np.arange(count)[:, None] + np.arange(p)
    e = np.abs(np.fft.fft(r[..., idx], axis=-1)).mean(-1)  # (b, c, count)
    freq = np.zeros(r.shape)
    for i in range(t):
        lo, hi = max(0, i - p + 1), min(i, count - 1)
        freq[..., i] = e[..., lo:hi + 1].mean(-1)
    return ((r ** 2) + lam * freq).mean(1)


def catch_forward(x, params, cfg, noise):
    """The detector's forward pass in numpy: x (batch, t, n) windows, ``params`` a dict of
    float64 arrays named like ``CATCH.named_parameters()``, ``cfg`` its config, ``noise``
    the logistic noise of the mask sampler. Returns (xhat (batch, t, n), spectrum Z
    (batch, n, t) complex, masks, the normalised input's spectrum, dc loss)."""
    def lin(name, v):
        return v @ params[f"{name}.weight"].T + params[f"{name}.bias"]

    b, t, n = x.shape
    p, s = cfg["patch_size"], cfg["patch_stride"]
    xn, mean, std = revin_norm(x.transpose(0, 2, 1))
    spec = np.fft.fft(xn, axis=-1)
    z = freq_patches(spec, p, s)  # (b, l, n, 2p)
    patches = z.shape[1]
    groups = z.reshape(b * patches, n, 2 * p)
    mg_in = patch_amplitude(groups) if cfg.get("mask_input") == "amplitude" else groups
    mask, _, _ = mask_sample(mg_in, params["mask_generator.weight"], noise,
                             2.0 if cfg["gumbel"] == "code" else 1.0)
    if cfg["projection"] == "linear":
        h = lin("embed", groups)
    else:
        w = params["embed.weight"][0, ..., 0] + 1j * params["embed.weight"][0, ..., 1]
        bias = params["embed.bias"][0, :, 0] + 1j * params["embed.bias"][0, :, 1]
        idx = (np.arange(patches) * s)[:, None] + np.arange(p)
        c = spec[..., idx] @ w.T + bias  # (b, n, l, filters)
        h = np.concatenate([c.real, c.imag], -1).transpose(0, 2, 1, 3).reshape(b * patches, n, -1)
    heads = cfg["n_heads"]
    dc = 0.0
    for i in range(cfg["e_layers"]):
        layer = {k[len(f"layer{i}."):]: v for k, v in params.items()
                 if k.startswith(f"layer{i}.")}
        h, qkv = transformer_block(h, layer, mask, heads, hard=cfg["mask_fill"] == "inf")
        dc += channel_dc_rows(qkv, mask, heads, cfg["temperature"],
                              cfg["regular_lambda"]).sum() / groups.shape[0]
    h = lin("to_model", h)  # (b l, n, D)
    parts = []
    for part in ("real", "imag"):
        v = lin(f"get_{part[0]}", h).reshape(b, patches, n, -1).transpose(0, 2, 1, 3)
        v = v.reshape(b, n, -1)
        for j in range(3):
            v = np.maximum(lin(f"head_{part}.res{j}", v), 0) + v
        parts.append(lin(f"head_{part}.out", v))
    zhat = parts[0] + 1j * parts[1]
    rec = np.fft.ifft(zhat, axis=-1)
    y = lin("ircom", np.concatenate([rec.real, rec.imag], -1))
    xhat = (y * std + mean).transpose(0, 2, 1)
    return xhat, zhat, mask, spec, dc / cfg["e_layers"]
