"""The CATCH graph in PyTorch (float64, autograd): the test-only oracle for the gradients of
CATCHNet. Same maths as nnlib.reference.catch_forward, written with torch ops; the mask
is the straight-through sample m = hard + y - y.detach(), y = sigmoid(sharpen a + noise)."""

import math

import numpy as np
import torch

FILL = -math.log(1e10)


def catch_loss(x, params, cfg, noise):
    """The training loss of windows x (batch, t, n) (numpy) and the torch parameters."""
    P = params
    x = torch.as_tensor(x.transpose(0, 2, 1))  # (b, n, t)
    b, n, t = x.shape
    p, s, heads = cfg["patch_size"], cfg["patch_stride"], cfg["n_heads"]

    def lin(name, v):
        return v @ P[f"{name}.weight"].T + P[f"{name}.bias"]

    mean = x.mean(-1, keepdim=True)
    std = torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)
    xn = (x - mean) / std
    spec = torch.fft.fft(xn, dim=-1)
    re, im = spec.real.unfold(-1, p, s), spec.imag.unfold(-1, p, s)  # (b, n, l, p)
    patches = re.shape[2]
    z = torch.cat([re, im], -1).permute(0, 2, 1, 3).reshape(b * patches, n, 2 * p)
    sharpen = 2.0 if cfg["gumbel"] == "code" else 1.0
    u = sharpen * (z @ P["mask_generator.weight"].T) + torch.as_tensor(noise)
    y = torch.sigmoid(u)
    eye = torch.eye(n, dtype=x.dtype)
    mask = ((u >= 0).to(x.dtype) + y - y.detach()) * (1 - eye) + eye
    if cfg["projection"] == "linear":
        h = lin("embed", z)
    else:
        w = P["embed.weight"][0, ..., 0] + 1j * P["embed.weight"][0, ..., 1]
        bias = P["embed.bias"][0, :, 0] + 1j * P["embed.bias"][0, :, 1]
        c = spec.unfold(-1, p, s) @ w.T + bias
        h = torch.cat([c.real, c.imag], -1).permute(0, 2, 1, 3).reshape(b * patches, n, -1)
    dc = 0.0
    for i in range(cfg["e_layers"]):
        f = f"layer{i}."
        ln = torch.nn.functional.layer_norm(h, h.shape[-1:], P[f + "norm1.gamma"],
                                            P[f + "norm1.beta"], 1e-5)
        qkv = lin(f + "qkv", ln).reshape(b * patches, n, 3, heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        dh = q.shape[-1]
        sc = q @ k.transpose(-1, -2)
        m = mask[:, None]
        if cfg["mask_fill"] == "inf":  # m exp(z) / sum m exp(z): the -inf mask, smooth in m
            logits = sc / math.sqrt(dh)
            e = m * torch.exp(logits - logits.max(-1, keepdim=True).values.detach())
            probs = e / e.sum(-1, keepdim=True)
        else:
            probs = torch.softmax((m * sc + (1 - m) * FILL) / math.sqrt(dh), -1)
        att = probs @ v
        h = h + lin(f + "out", att.permute(0, 2, 1, 3).reshape(b * patches, n, -1))
        cos = (torch.nn.functional.normalize(q, dim=-1, eps=1e-12)
               @ torch.nn.functional.normalize(k, dim=-1, eps=1e-12).transpose(-1, -2)).mean(1)
        e = torch.exp(cos / cfg["temperature"])
        rows = (torch.log(e.sum(-1)) - torch.log((mask * e).sum(-1))) / n
        if n > 1:
            rows = rows + cfg["regular_lambda"] * (mask * (1 - eye)).sum(-1) / (n * (n - 1))
        dc = dc + rows.sum() / (b * patches)
        ln = torch.nn.functional.layer_norm(h, h.shape[-1:], P[f + "norm2.gamma"],
                                            P[f + "norm2.beta"], 1e-5)
        h = h + lin(f + "ff2", torch.nn.functional.gelu(lin(f + "ff1", ln)))
    hm = lin("to_model", h)
    parts = []
    for part in ("real", "imag"):
        v = lin(f"get_{part[0]}", hm).reshape(b, patches, n, -1).permute(0, 2, 1, 3)
        v = v.reshape(b, n, -1)
        for j in range(3):
            v = torch.relu(lin(f"head_{part}.res{j}", v)) + v
        parts.append(lin(f"head_{part}.out", v))
    zhat = torch.complex(parts[0], parts[1])
    rec = torch.fft.ifft(zhat, dim=-1)
    xhat = lin("ircom", torch.cat([rec.real, rec.imag], -1)) * std + mean
    time_loss = ((xhat - x) ** 2).mean()
    freq_loss = (zhat - spec).abs().mean()
    return (time_loss + cfg["auxi_lambda"] * freq_loss
            + cfg["dc_lambda"] * dc / cfg["e_layers"])


def torch_params(named):
    return {k: torch.tensor(p.numpy().astype(np.float64), requires_grad=True)
            for k, p in named.items()}
