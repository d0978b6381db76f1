# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 06 · Attention, normalisation and sampling: a primer for CATCH
#
# Notebook 07 builds **CATCH** ([Wu et al., ICLR 2025](https://arxiv.org/abs/2410.12261)), an
# anomaly detector for multivariate time series. Inside it sit the parts of a modern
# transformer, plus two tricks of its own. This notebook teaches each part on its own, small
# enough to see: what it computes and why, its numpy reference, its kernel, a comparison of
# the two, and a finite-difference check of its gradient.
#
# | part | paper | kernel |
# |---|---|---|
# | softmax, and its stable form | | `activation.cl` |
# | scaled dot-product attention, masks, several heads | [Vaswani et al. 2017](https://arxiv.org/abs/1706.03762) | `attention.cl` |
# | layer normalisation | [Ba, Kiros & Hinton 2016](https://arxiv.org/abs/1607.06450) | `catch.cl` |
# | GELU | [Hendrycks & Gimpel 2016](https://arxiv.org/abs/1606.08415) | `catch.cl` |
# | a transformer block | [Vaswani et al. 2017](https://arxiv.org/abs/1706.03762) | the above |
# | RevIN | [Kim et al., ICLR 2022](https://openreview.net/forum?id=cGDAkQo1C0p) | `catch.cl` |
# | Gumbel-softmax, straight-through | [Jang et al. 2017](https://arxiv.org/abs/1611.01144), [Maddison et al. 2017](https://arxiv.org/abs/1611.00712) | `activation.cl`, `catch.cl` |
#
# It ends with the yardsticks notebook 07 judges detectors by: AUC-ROC, AUC-PR, the best F1
# and the F1 at a top-k % threshold.

# %% tags=["nbval-ignore-output"]
import inspect

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import precision_recall_curve, roc_curve

import nnlib
from nnlib import reference as ref
from nnlib.catch import TransformerBlock, metrics
from nnlib.catch.attention import MaskedAttention
from nnlib.catch.baselines import PCADetector
from nnlib.catch.ops import GELU, LayerNorm, revin_denorm, revin_norm
from nnlib.data.anomalies import anomaly_dataset
from nnlib.gradcheck import max_rel_error, numeric_grad
from nnlib.softmax import GumbelSoftmax, gumbel_noise, softmax, softmax_backward

rng = np.random.default_rng(0)
rt = nnlib.get_runtime()
big = rt.max_work_group_size + 3  # more rows than one work-group holds; printed as "big"
print(rt)


# %% [markdown]
# Every gradient check below has the same shape as in notebook 01: a loss
# $L = \sum R \odot f(x)$ with a fixed random $R$ (so $\partial L / \partial f = R$), the
# kernel's gradient on one side and central differences of the float64 reference on the
# other (`nnlib.gradcheck.numeric_grad`), compared relative to the gradient's size.
#
# ## Softmax, and why the kernel subtracts the maximum
#
# Softmax turns a row of scores ("logits") into probabilities:
#
# $$\mathrm{softmax}(z)_j = \frac{e^{z_j}}{\sum_u e^{z_u}}.$$
#
# Written like that it breaks in float32: $e^{z}$ overflows to infinity once $z > 88.7$,
# and $\infty / \infty$ is NaN. Adding the same constant $c$ to every logit multiplies the
# numerator and the denominator by $e^c$, so the result does not change; with
# $c = -\max_u z_u$ the largest exponential is $e^0 = 1$: nothing overflows, and the sum is
# at least 1.

# %%
z = np.array([100.0, 101.0, 102.0], dtype=np.float32)
with np.errstate(over="ignore", invalid="ignore"):
    naive = np.exp(z) / np.exp(z).sum()
print("naive: ", naive)
print("stable:", ref.softmax(z.astype(np.float64)).round(3))

# %% [markdown]
# Its gradient: with $y = \mathrm{softmax}(z)$, $\partial y_j / \partial z_k = y_j(\delta_{jk} - y_k)$,
# so the gradient of the loss is
# $\partial L / \partial z = y \odot \big(\partial L/\partial y - \sum_u y_u\, \partial L/\partial y_u\big)$,
# one dot product per row and no matrix. The kernels (one work-item per row):

# %%
text = nnlib.source("activation")
print(text[text.index("// One work-item per row: y = softmax(z)"):text.index("// ----")])

# %% [markdown]
# Both against numpy, with logits up to a hundred (the naive form would overflow), on batch
# 1, odd sizes and more rows (or columns) than one work-group holds:

# %%
for rows, cols in [(1, 7), (13, 33), (big, 5), (3, big)]:
    z = 30 * rng.standard_normal((rows, cols))
    y = softmax(z).get()
    dy = rng.standard_normal((rows, cols))
    ok = np.allclose(y, ref.softmax(z), rtol=1e-4, atol=1e-6) and np.allclose(
        softmax_backward(y, dy).get(), ref.softmax_backward(y, dy), rtol=1e-4, atol=1e-5)
    shown = [("big" if s == big else s) for s in (rows, cols)]
    print(f"{shown[0]:>4} rows of {shown[1]:>4}: softmax and its gradient match numpy: {ok}")

# %%
z, r = rng.standard_normal((2, 5)), rng.standard_normal((2, 5))
kernel_grad = softmax_backward(softmax(z), r).get()
numeric = numeric_grad(lambda: np.sum(r * ref.softmax(z)), z, 1e-5)
print(f"softmax: max relative |kernel - finite difference| < 1e-3: "
      f"{max_rel_error(kernel_grad, numeric) < 1e-3}")

# %% [markdown]
# ## Scaled dot-product attention
#
# Attention lets each token of a sequence collect information from the others. Each token
# $i$ brings three vectors of width $d$: a **query** $q_i$ (what it looks for), a **key**
# $k_i$ (what it offers) and a **value** $v_i$ (what it hands over). Token $i$ scores every
# token $j$ by $q_i \cdot k_j$, turns the scores into weights with a softmax, and takes the
# weighted mean of the values:
#
# $$A = \mathrm{softmax}\!\Big(\frac{Q K^\top}{\sqrt d}\Big), \qquad \mathrm{out} = A V,$$
#
# the softmax taken along each row. In CATCH the tokens are the **channels** of a series
# inside one frequency band: attention is how a channel borrows from the channels that
# behave like it.
#
# Why $\sqrt d$? For random $q, k$ with unit-variance entries, $q \cdot k$ is a sum of $d$
# products and has variance $d$. Without the scaling the logits grow with the width, the
# softmax puts almost all its weight on one token, and its gradient (which has a factor
# $y_j(1 - y_j)$) vanishes. In float64, on random vectors:

# %% tags=["host-float64"]
for d in (4, 16, 64, 256):
    q, k = np.random.default_rng(d).standard_normal((2, 500, d))  # its own seed: same on any device
    logits = q @ k.T
    print(f"d = {d:3}: std of q.k {logits.std():5.1f}; mean largest weight of a row: "
          f"unscaled {ref.softmax(logits).max(-1).mean():.2f}, "
          f"scaled {ref.softmax(logits / np.sqrt(d)).max(-1).mean():.2f}")

# %% [markdown]
# Plain attention is three lines of numpy. In nnlib one dense layer produces all three
# vectors of every token at once, so the kernels take one array `qkv` of shape
# (groups, tokens, 3 · width), each token's row being $[q \mid k \mid v]$. Here is the
# forward kernel (it also takes a mask; the next section explains it; a mask of ones is
# plain attention):

# %%
print(nnlib.source("attention", "masked_attention_forward", folder="../kernels"))

# %%
for groups, n, d in [(1, 1, 4), (3, 5, 7), (big, 3, 4)]:
    qkv = rng.standard_normal((groups, n, 3 * d))
    q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]
    want = ref.softmax(q @ k.transpose(0, 2, 1) / np.sqrt(d)) @ v
    got = MaskedAttention(heads=1).forward(rt.to_device(qkv), rt.to_device(np.ones((groups, n, n))))
    print(f"{'big' if groups == big else groups:>4} groups of {n} tokens, width {d}: "
          f"matches softmax(Q K^T / sqrt d) V: {np.allclose(got.get(), want, rtol=1e-4, atol=1e-5)}")

# %% [markdown]
# ## Masked attention
#
# A **mask** $M$ says which pairs may attend: $m_{ij} = 1$ keeps key $j$ for query $i$,
# $m_{ij} = 0$ removes it. Language models use a *causal* mask (a token sees only the past);
# CATCH draws a channel mask per sample and frequency band, so that a channel attends only
# to the channels its mask generator groups with it. The textbook mask sets a removed
# logit to $-\infty$:
#
# $$A_{ij} = \frac{m_{ij}\, e^{z_{ij}}}{\sum_u m_{iu}\, e^{z_{iu}}}, \qquad z = \frac{QK^\top}{\sqrt d}.$$
#
# CATCH's official code does something softer: it replaces a removed score by
# $-\ln 10^{10} \approx -23$ *before* dividing by $\sqrt d$, so with $d = 64$ a removed
# pair keeps the logit $-2.9$ and some weight. nnlib has both: `fill="inf"` (the paper's
# figure) and `fill="finite"` (the code). With a causal mask:

# %% caption="Attention weights under a causal mask, with the removed scores set to minus infinity (left) and to the official code's finite fill (right). With the infinite fill the upper triangle is exactly zero; with the finite fill it keeps a little weight."
n, d = 6, 64
qkv = rng.standard_normal((1, n, 3 * d))
causal = np.tril(np.ones((n, n)))[None]
fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
for ax, fill in zip(axes, ("inf", "finite")):
    att = MaskedAttention(1, fill)
    att.forward(rt.to_device(qkv), rt.to_device(causal))
    probs = att.probs.get()[0, 0]
    ax.imshow(probs, cmap="viridis", vmin=0, vmax=1)
    ax.set(title=f'fill="{fill}"', xlabel="key j", ylabel="query i")
    removed = probs[causal[0] == 0]
    print(f'fill="{fill}": removed pairs get weight exactly 0: {bool((removed == 0).all())}')
plt.suptitle("attention weights under a causal mask")
plt.tight_layout()
plt.show()

# %% [markdown]
# Both forms are smooth in $m$, so the loss has a gradient with respect to the mask, also
# at pairs where $m_{ij} = 0$: that is how a training signal can reach CATCH's mask
# generator. For the finite fill $z_{ij} = (m_{ij} s_{ij} + (1 - m_{ij})\,f)/\sqrt d$ with
# $s = q \cdot k$, so $\partial z_{ij} / \partial m_{ij} = (s_{ij} - f)/\sqrt d$. The
# backward kernels return $\partial L/\partial\,qkv$ and $\partial L / \partial M$; both
# against finite differences of the reference, for both fills (two heads, a random 0/1
# mask):

# %%
qkv = rng.standard_normal((2, 4, 3 * 2 * 3))
mask = (rng.random((2, 4, 4)) < 0.5).astype(float)
mask[:, np.arange(4), np.arange(4)] = 1.0  # a channel always sees itself (as in CATCH)
r = rng.standard_normal((2, 4, 6))
for fill in ("finite", "inf"):
    att = MaskedAttention(2, fill)
    att.forward(rt.to_device(qkv), rt.to_device(mask))
    dmask = rt.empty(mask.shape)
    dqkv = att.backward(rt.to_device(r), dmask, accumulate=False).get()

    def loss():
        return np.sum(r * ref.masked_attention_forward(qkv, mask, 2, hard=fill == "inf")[0])

    ok = (max_rel_error(dqkv, numeric_grad(loss, qkv, 1e-5)) < 1e-3
          and max_rel_error(dmask.get(), numeric_grad(loss, mask, 1e-5)) < 1e-3)
    print(f'fill="{fill}": dL/dqkv and dL/dM match finite differences (1e-3): {ok}')

# %% [markdown]
# ## Several heads
#
# One softmax per row picks one kind of relation. **Multi-head** attention runs $H$
# attentions side by side on slices of the width: head $h$ uses columns
# $h\,d_h \ldots (h + 1)\,d_h$ of $q$, $k$ and $v$, has its own weights, and the heads'
# outputs are concatenated (a dense layer mixes them afterwards). In CATCH all heads share
# one mask. So two heads are exactly two one-head attentions on the slices:

# %%
heads, dh = 2, 4
qkv = rng.standard_normal((3, 5, 3 * heads * dh))
mask = (rng.random((3, 5, 5)) < 0.6).astype(float)
mask[:, np.arange(5), np.arange(5)] = 1.0
two = MaskedAttention(heads)
both = two.forward(rt.to_device(qkv), rt.to_device(mask)).get()
parts = []
for h in range(heads):
    cols = np.concatenate([qkv[..., (p * heads + h) * dh:(p * heads + h + 1) * dh]
                           for p in range(3)], -1)  # head h's q, k, v
    parts.append(MaskedAttention(1).forward(rt.to_device(cols), rt.to_device(mask)).get())
print(f"2 heads = two 1-head attentions, concatenated: "
      f"{np.allclose(both, np.concatenate(parts, -1), atol=1e-5)}")

# %% caption="The attention weights of two heads under the same channel mask. One mask, two different weightings: each head spreads its weight over the allowed pairs in its own way."
fig, axes = plt.subplots(1, 2, figsize=(7, 3.2))
for h, ax in enumerate(axes):
    ax.imshow(two.probs.get()[0, h], cmap="viridis", vmin=0, vmax=1)
    ax.set(title=f"head {h}", xlabel="key channel", ylabel="query channel")
plt.suptitle("one mask, two heads, two different weightings")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Layer normalisation
#
# Deep stacks train badly when the scale of the activations drifts from layer to layer.
# **LayerNorm** rescales each token on its own, over its $c$ features:
#
# $$\hat x = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}, \qquad y = \gamma \odot \hat x + \beta,$$
#
# with $\mu, \sigma^2$ the mean and (biased) variance of the token's features,
# $\epsilon = 10^{-5}$, and a learned scale $\gamma$ and shift $\beta$ per feature. Unlike
# batch normalisation it needs no batch statistics, so a sample is treated the same in
# training and in use. Since $\hat x$ depends on every feature through $\mu$ and $\sigma$,
# the gradient has two correction terms (with $g = \gamma \odot \partial L/\partial y$):
#
# $$\frac{\partial L}{\partial x} = \frac{1}{\sqrt{\sigma^2 + \epsilon}}
# \big(g - \mathrm{mean}(g) - \hat x\, \mathrm{mean}(g \odot \hat x)\big).$$
#
# The parameters' gradients are sums over the tokens: $\partial L/\partial\gamma =
# \sum_{\text{rows}} \partial L/\partial y \odot \hat x$ and $\partial L/\partial\beta =
# \sum_{\text{rows}} \partial L/\partial y$. In `layer_norm_backward` below, one work-item per
# row computes $\partial L/\partial x$ and each further work-item sums four features over the
# rows. CATCH has thousands of rows and only 32-64 features, so a GPU would get 8-16 work-items
# that each walk all the rows. The launch therefore cuts the rows into `slices` (as many as
# keep every compute unit busy, each at least 64 rows long); their sums are added up by a
# second kernel, `layer_norm_sum_slices`.

# %%
print(inspect.getsource(ref.layer_norm_forward))
print(inspect.getsource(ref.layer_norm_backward))
print(nnlib.source("catch", "layer_norm_forward"))
print(nnlib.source("catch", "layer_norm_backward"))

# %%
for rows, c in [(1, 5), (13, 33), (big, 6)]:
    norm = LayerNorm(c)
    gamma, beta = rng.uniform(0.5, 1.5, c), rng.standard_normal(c)
    norm.gamma.set(gamma)
    norm.beta.set(beta)
    x, dy = 3 + 2 * rng.standard_normal((2, rows, c))
    y = norm.forward(x).get()
    dx = norm.backward(dy).get()
    want_y, xhat, rstd = ref.layer_norm_forward(x, gamma, beta)
    want_dx, want_dgamma, _ = ref.layer_norm_backward(dy, gamma, xhat, rstd)
    ok = all(np.allclose(a, b, rtol=1e-3, atol=1e-4) for a, b in
             [(y, want_y), (dx, want_dx), (norm.gamma.grad.get(), want_dgamma)])
    print(f"{'big' if rows == big else rows:>4} tokens of {c}: y, dx, dgamma match numpy: {ok}")

# %%
norm = LayerNorm(6)
gamma, beta = rng.uniform(0.5, 1.5, 6), rng.standard_normal(6)
norm.gamma.set(gamma)
norm.beta.set(beta)
x, r = rng.standard_normal((2, 4, 6))
norm.forward(x)
dx = norm.backward(r).get()
numeric = numeric_grad(lambda: np.sum(r * ref.layer_norm_forward(x, gamma, beta)[0]), x, 1e-5)
dgamma = numeric_grad(lambda: np.sum(r * ref.layer_norm_forward(x, gamma, beta)[0]), gamma, 1e-5)
print(f"LayerNorm: dx and dgamma match finite differences (1e-3): "
      f"{max_rel_error(dx, numeric) < 1e-3 and max_rel_error(norm.gamma.grad.get(), dgamma) < 1e-3}")

# %% [markdown]
# ## GELU
#
# The transformer's feed-forward layers use the **GELU**,
# $\mathrm{GELU}(x) = x\,\Phi(x)$ with $\Phi$ the standard normal distribution function: the
# input weighted by the probability that a standard normal falls below it. It is a smooth
# ReLU: about $x$ for large $x$, about 0 for very negative $x$, with a small dip below zero
# in between and a derivative $\Phi(x) + x\,\varphi(x)$ that has no jump at 0.
#
# The forward kernel keeps that derivative for the backward pass, and $\Phi$ and $\varphi$
# share one `exp`: `erf_with(u, e)` is erf by the polynomial of Abramowitz & Stegun (formula
# 7.1.26, error below $1.5 \cdot 10^{-7}$, float32's own rounding) from $u$ and
# $e = e^{-u^2}$, with $\Phi(x) = (1 + \mathrm{erf}(x / \sqrt 2)) / 2$. As in notebook 01's
# update kernels, each work-item handles `VW` consecutive elements as one vector (`floatv`),
# and `load_v`/`store_v` deal with the last, partial vector: PoCL 3.0 (the build pip
# installs) does not turn neighbouring work-items into SIMD lanes by itself.

# %%
print(nnlib.source("catch", "gelu_forward"))
print(nnlib.source("catch", "gelu_backward"))

# %% caption="GELU against ReLU (left) and their derivatives (right). GELU is smooth: it dips slightly below zero for negative inputs and its derivative has no jump at zero."
x = np.linspace(-4, 3, 300)
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
axes[0].plot(x, ref.gelu(x), label="GELU")
axes[0].plot(x, np.maximum(x, 0), "--", label="ReLU")
axes[1].plot(x, ref.gelu_grad(x), label="GELU'")
axes[1].plot(x, (x > 0).astype(float), "--", label="ReLU'")
for ax, title in zip(axes, ("the function", "its derivative")):
    ax.legend()
    ax.set_title(title)
plt.tight_layout()
plt.show()

# %%
gelu = GELU()
for size in (1, 37, big):
    x, dy = 2 * rng.standard_normal((2, size))
    ok = np.allclose(gelu.forward(x).get(), ref.gelu(x), rtol=1e-4, atol=1e-6) and np.allclose(
        gelu.backward(dy).get(), dy * ref.gelu_grad(x), rtol=1e-4, atol=1e-6)
    print(f"{'big' if size == big else size:>4} values: GELU and its gradient match numpy: {ok}")
x, r = rng.standard_normal((2, 9))
gelu.forward(x)
numeric = numeric_grad(lambda: np.sum(r * ref.gelu(x)), x, 1e-5)
print(f"GELU: the kernel's gradient matches finite differences (1e-3): "
      f"{max_rel_error(gelu.backward(r).get(), numeric) < 1e-3}")

# %% [markdown]
# ## A transformer block
#
# A transformer layer puts the pieces together around two **residual** connections: each
# sub-layer adds a correction to the tokens instead of replacing them, so the gradient also
# flows straight through the sums. CATCH uses the *pre-norm* form (LayerNorm before each
# sub-layer, [Xiong et al. 2020](https://arxiv.org/abs/2002.04745) explain why it trains more
# easily than the original post-norm):
#
# $$h \leftarrow h + W_o\, \mathrm{Attn}(\mathrm{LN}_1 h,\ M), \qquad
# h \leftarrow h + W_2\, \mathrm{GELU}(W_1\, \mathrm{LN}_2 h).$$
#
# The numpy reference is the whole block; CATCH stacks `e_layers` of them:

# %%
print(inspect.getsource(ref.transformer_block))

# %% [markdown]
# `nnlib.catch.TransformerBlock` is the same block on the device: `LayerNorm`, `Dense`,
# `MaskedAttention` and `GELU` launched in turn, and their backward kernels in reverse. (Its
# `tau` and `reg` belong to CATCH's clustering loss, which notebook 07 explains; with
# `dc_weight=0` that loss adds no gradient.) The block against the reference, and its input
# gradient against finite differences:

# %%
width, heads = 8, 2
# width, heads, head width, feed-forward width, mask fill, tau, reg, seed, runtime
block = TransformerBlock(width, heads, 4, 16, "finite", 0.07, 0.5, 0, rt)
params = {f"{name}.{p.name}": p.numpy().astype(np.float64)
          for name, layer in block.named().items() for p in layer.parameters()}
h = rng.standard_normal((3 * 5, width))  # 3 groups of 5 channel tokens
mask = (rng.random((3, 5, 5)) < 0.5).astype(float)
mask[:, np.arange(5), np.arange(5)] = 1.0
out = block.forward(rt.to_device(h), rt.to_device(mask)).get()
want, _ = ref.transformer_block(h, params, mask, heads)
print(f"block output {out.shape} matches numpy: {np.allclose(out, want, rtol=1e-4, atol=1e-4)}")

r = rng.standard_normal(h.shape)
dh = block.backward(rt.to_device(r), rt.empty(mask.shape), first=True, dc_weight=0.0).get()
numeric = numeric_grad(lambda: np.sum(r * ref.transformer_block(h, params, mask, heads)[0]), h,
                       1e-5)
print(f"block: dL/dh matches finite differences (1e-3): {max_rel_error(dh, numeric) < 1e-3}")

# %% [markdown]
# ## RevIN: normalise each window, then undo it
#
# Real series drift: their level and scale change over time, so a model trained on last
# year's values sees unfamiliar numbers today. **RevIN** (reversible instance
# normalisation) normalises every window of every channel by its own mean and standard
# deviation over time, lets the model work on the normalised window, and multiplies the
# output back by the same statistics:
#
# $$\tilde x = \frac{x - \mu}{\sigma}, \quad \sigma = \sqrt{\mathrm{var}(x) + 10^{-5}},
# \qquad \hat y = y\,\sigma + \mu.$$
#
# The statistics are treated as constants for the gradient (both CATCH's and RevIN's
# official code detach them), so the backward pass of the denormalisation is
# $\partial L / \partial y = \sigma\,\partial L / \partial \hat y$: the same kernel without
# the shift. (Kim et al. also learn an affine map after the normalisation; CATCH switches
# it off.)

# %%
print(nnlib.source("catch", "revin_norm", folder="../kernels"))  # notebook 07 has its exercise
print(nnlib.source("catch", "revin_denorm"))

# %%
for batch, channels, t in [(1, 1, 5), (3, 5, 33), (big, 2, 8)]:
    x = 4 + 3 * rng.standard_normal((batch, channels, t))
    xn, mean, std = revin_norm(rt, x)
    want, want_mean, want_std = ref.revin_norm(x)
    ok = np.allclose(xn.get(), want, rtol=1e-4, atol=1e-4) and np.allclose(
        mean.get(), want_mean[..., 0], rtol=1e-5) and np.allclose(std.get(), want_std[..., 0], rtol=1e-4)
    back = np.allclose(revin_denorm(rt, xn, mean, std).get(), x, rtol=1e-4, atol=1e-4)
    print(f"{'big' if batch == big else batch:>4} windows of {channels} x {t}: matches numpy: {ok}; "
          f"denorm(norm(x)) = x: {back}")

# %%
x = rng.standard_normal((2, 3, 16))
moved = revin_norm(rt, 50 + 7 * x)[0].get()
print(f"norm(50 + 7 x) = norm(x) (a shifted, stretched window looks the same): "
      f"{np.allclose(moved, revin_norm(rt, x)[0].get(), atol=1e-3)}")
_, mean, std = ref.revin_norm(x)
y, r = rng.standard_normal((2,) + x.shape)
dy = revin_denorm(rt, r, mean[..., 0], std[..., 0], shift=False).get()
numeric = numeric_grad(lambda: np.sum(r * (y * std + mean)), y, 1e-5)
print(f"denorm: dL/dy matches finite differences (1e-3): {max_rel_error(dy, numeric) < 1e-3}")

# %% [markdown]
# The first line is RevIN's point, and a warning for anomaly detection: an anomaly that
# moves a whole window up, or stretches it, is invisible after the normalisation.
#
# ## Sampling with a gradient: Gumbel-softmax and the straight-through estimator
#
# CATCH's mask is **drawn at random**: a mask generator gives a probability for every pair
# of channels, and each mask entry is a 0/1 sample of it. A sample has no derivative with
# respect to its probability, yet CATCH trains the generator by gradient descent. Two ideas
# make that possible.
#
# **The Gumbel-max trick.** With $g_j = -\log(-\log u_j)$, $u_j$ uniform on $(0, 1)$
# (Gumbel noise), $\mathrm{argmax}_j\,(z_j + g_j)$ is a sample of the categorical distribution
# $\mathrm{softmax}(z)$: the randomness moves into noise that does not depend on $z$.
#
# **The relaxation** ([Jang et al. 2017](https://arxiv.org/abs/1611.01144);
# [Maddison et al. 2017](https://arxiv.org/abs/1611.00712), who call it the Concrete
# distribution): replace the argmax by $y = \mathrm{softmax}((z + g)/\tau)$. At temperature
# $\tau \to 0$, $y$ becomes the one-hot sample; at large $\tau$ it flattens towards uniform.
# $y$ is smooth in $z$. The **straight-through** estimator
# ([Bengio et al. 2013](https://arxiv.org/abs/1308.3432)) uses the hard one-hot sample in
# the forward pass and the soft $y$'s gradient in the backward pass,
# $\partial L / \partial z = \frac{1}{\tau}\, y \odot (g_{\text{hard}} - \sum_u y_u\, g_{\text{hard},u})$
# with $g_{\text{hard}} = \partial L / \partial\,\text{hard}$: a biased but useful gradient.

# %%
print(nnlib.source("activation", "gumbel_softmax_forward", folder="../kernels"))
print(nnlib.source("activation", "gumbel_softmax_backward"))

# %%
for rows, cols, tau in [(1, 7, 1.0), (13, 33, 0.5), (big, 5, 2.0)]:
    logits, noise, dhard = 3 * rng.standard_normal((rows, cols)), gumbel_noise((rows, cols)), \
        rng.standard_normal((rows, cols))
    gs = GumbelSoftmax(tau)
    hard = gs.forward(logits, noise).get()
    soft, want_hard = ref.gumbel_softmax(logits, noise, tau)
    ok = np.array_equal(hard, want_hard) and np.allclose(gs.soft.get(), soft, rtol=1e-4, atol=1e-5) \
        and np.allclose(gs.backward(dhard).get(), ref.gumbel_softmax_backward(soft, dhard, tau),
                        rtol=1e-3, atol=1e-4)
    print(f"{'big' if rows == big else rows:>4} rows of {cols}, tau = {tau}: hard, soft and the "
          f"gradient match numpy: {ok}")

# %% [markdown]
# The trick at work: 20 000 rows with the same logits $\log(0.1, 0.2, 0.3, 0.4)$ and
# independent noise. The one-hot samples fall in each class as often as the softmax says,
# and the soft versions show what the temperature does:

# %% caption="One soft Gumbel-softmax sample of the four-class distribution at four temperatures, tau from 0.1 to 5. At a low temperature the sample is nearly one-hot; as tau grows it spreads out towards uniform."
p = np.array([0.1, 0.2, 0.3, 0.4])
logits = np.log(p)[None].repeat(20000, 0)
noise = gumbel_noise(logits.shape, seed=1)
hard = GumbelSoftmax(1.0).forward(logits, noise).get()
print(f"one-hot samples are drawn with probabilities softmax(logits) (within 0.01): "
      f"{np.allclose(hard.mean(0), p, atol=0.01)}")

fig, axes = plt.subplots(1, 4, figsize=(11, 2.6), sharey=True)
for ax, tau in zip(axes, (0.1, 0.5, 1.0, 5.0)):
    gs = GumbelSoftmax(tau)
    gs.forward(logits[:1], noise[:1])
    ax.bar(range(4), gs.soft.get()[0])
    ax.set(title=f"soft sample, tau = {tau}", xticks=range(4))
plt.tight_layout()
plt.show()

# %%
logits, noise, r = rng.standard_normal((3, 5)), gumbel_noise((3, 5), seed=2), rng.standard_normal((3, 5))
gs = GumbelSoftmax(0.5)
gs.forward(logits, noise)
numeric = numeric_grad(lambda: np.sum(r * ref.gumbel_softmax(logits, noise, 0.5)[0]), logits, 1e-5)
print(f"straight-through gradient = the soft sample's gradient (finite differences, 1e-3): "
      f"{max_rel_error(gs.backward(r).get(), numeric) < 1e-3}")

# %% [markdown]
# **CATCH's binary case.** A mask entry is a choice between two classes, *keep* and *drop*.
# A Bernoulli($p$) sample needs the logits $(\log p, \log(1 - p))$; the difference of the
# two Gumbel draws is logistic noise, so the sample is $[\,\mathrm{logit}\,p + \ell \ge 0\,]$
# with $\ell$ logistic. CATCH's code passes $(\mathrm{logit}\,p, -\mathrm{logit}\,p)$
# instead: the logit difference doubles, and *keep* is drawn with probability
# $\sigma(2\,\mathrm{logit}\,p) = p^2 / (p^2 + (1 - p)^2)$, a sharpened Bernoulli.
# `mask_sample` in `catch.cl` implements both (`sharpen` = 1 or 2):

# %%
print(nnlib.source("catch", "mask_sample"))

# %%
prob = 0.7
logit = np.log(prob / (1 - prob))
noise = gumbel_noise((20000, 2), seed=3)
for name, pair, expected in [("(log p, log(1 - p))", (np.log(prob), np.log(1 - prob)), prob),
                             ("(logit p, -logit p)", (logit, -logit),
                              prob ** 2 / (prob ** 2 + (1 - prob) ** 2))]:
    keep = GumbelSoftmax(1.0).forward(np.tile(pair, (20000, 1)), noise).get()[:, 0].mean()
    print(f"logits {name}: keep drawn with probability {expected:.3f} (within 0.01): "
          f"{abs(keep - expected) < 0.01}")

# %% [markdown]
# Notebook 07 returns to this estimator: its gradient is what has to teach CATCH's mask
# generator which channels belong together.
#
# ## Scoring a detector: AUC-ROC, AUC-PR and F1
#
# A detector gives every time step a **score**; an alarm is a score above a threshold.
# Against the true labels, a threshold yields the *precision* (the share of alarms that are
# anomalies), the *recall* (the share of anomalies that raise an alarm) and their harmonic
# mean, the *F1*. The four numbers notebook 07 reports:
#
# * **AUC-ROC**: the area under the curve of the true-positive rate (recall) against the
#   false-positive rate, over every threshold. It equals the probability that a random
#   anomalous step scores higher than a random normal one (a tie counts one half): 0.5 is a
#   coin, 1 a perfect ranking. It ignores how rare anomalies are.
# * **AUC-PR** (average precision): the area under precision against recall. A random
#   detector scores the share of anomalous steps, so with rare anomalies it is the harder
#   and more telling number.
# * **Best F1**: the F1 at the best threshold, chosen *knowing the labels*: an optimistic
#   ceiling.
# * **F1 at top-k %**: flag the k % highest scores (`anomaly_ratio=k` in
#   `metrics.evaluate`), a threshold a user can set without labels, as CATCH's own
#   `anomaly_ratio` does.
#
# A small picture: a five-channel synthetic series with every anomaly kind of `nnlib.data`
# in turn, scored by a PCA baseline (the reconstruction error of each step's recent
# history):

# %%
data = anomaly_dataset("mixed", train_length=2000, test_length=1000, seed=0)
labels = data["labels"]
scores = PCADetector().fit(data["train"]).score(data["test"])
print(inspect.getsource(metrics.best_f1))

# %% tags=["nbval-ignore-output"] caption="Anomaly scores of a simple baseline with the anomalous steps shaded red and the top 5 % threshold dashed (left), beside its ROC and precision-recall curves. Shaded steps should have the high scores; the curves measure how well the scores rank them."
print(f"{labels.size} steps, {labels.sum()} anomalous")
result = metrics.evaluate(labels, scores, anomaly_ratio=5)
print({k: round(v, 3) for k, v in result.items()})
top = np.percentile(scores, 95)
fig, axes = plt.subplots(1, 3, figsize=(13, 3.4), gridspec_kw={"width_ratios": [2.2, 1, 1]})
axes[0].plot(scores, lw=0.7)
axes[0].fill_between(np.arange(labels.size), 0, scores.max(), where=labels == 1, color="red",
                     alpha=0.2, label="anomalous steps")
axes[0].axhline(top, color="k", ls="--", lw=0.8, label="top 5 % threshold")
axes[0].set(xlabel="step", ylabel="score", title="scores and labels")
axes[0].legend(loc="upper left", fontsize=8)
fpr, tpr, _ = roc_curve(labels, scores)
axes[1].plot(fpr, tpr)
axes[1].fill_between(fpr, tpr, alpha=0.2)
axes[1].plot([0, 1], [0, 1], "k:", lw=0.8)
axes[1].set(xlabel="false-positive rate", ylabel="recall", title=f"ROC: area {result['auc_roc']:.2f}")
precision, recall, _ = precision_recall_curve(labels, scores)
axes[2].plot(recall, precision)
axes[2].axhline(labels.mean(), color="k", ls=":", lw=0.8, label="random detector")
axes[2].set(xlabel="recall", ylabel="precision", title=f"PR: area {result['auc_pr']:.2f}")
axes[2].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# The numbers depend on the baseline's fit; any correct run ranks anomalies better than a
# coin, beats a random detector on AUC-PR, and cannot do better at 5 % than at the best
# threshold:

# %%
assert 0.5 < result["auc_roc"] <= 1 and result["auc_pr"] > labels.mean()
assert result["f1_pct"] <= result["best_f1"] <= 1

# %% [markdown]
# ## Summary
# - Softmax subtracts each row's maximum before `exp`; its gradient is one dot product per
#   row.
# - Attention is softmax$(QK^\top/\sqrt d)\,V$; $\sqrt d$ keeps the logits of order one. A
#   mask removes pairs ($-\infty$) or, in CATCH's code, only down-weights them; either way
#   the loss has a gradient with respect to the mask. Heads are attentions on slices of the
#   width, sharing CATCH's one mask.
# - LayerNorm normalises each token, GELU is a smooth ReLU; a pre-norm transformer block is
#   two residual sub-layers built from them.
# - RevIN normalises each window and undoes it on the output; its statistics are constants
#   for the gradient, and it hides anomalies that shift or stretch a whole window.
# - Gumbel noise turns sampling into an argmax; the straight-through estimator samples in
#   the forward pass and differentiates the soft relaxation in the backward pass. CATCH's
#   logits $\pm\mathrm{logit}\,p$ sharpen its Bernoulli masks.
# - AUC-ROC ranks, AUC-PR weighs the rarity of anomalies, the best F1 is a ceiling and the
#   F1 at top-k % a threshold a user can set.
#
# ## Exercises
# 1. Remove the subtraction of the maximum from a copy of `softmax_rows` (use
#    `rt.program("activation", folder=...)`). From which logits on does it return NaN?
# 2. Show that $\sum_j \partial L/\partial z_j = 0$ for softmax. Why must that hold?
# 3. Re-run the $\sqrt d$ cell with the entropy of each attention row instead of its
#    largest weight. What does the entropy of the unscaled rows tend to as $d$ grows?
# 4. Write the *post-norm* block, $h \leftarrow \mathrm{LN}(h + \mathrm{Attn}(h))$, with
#    `ref.layer_norm_forward` and `ref.masked_attention_forward`, and compare the size of
#    its input gradient with the pre-norm block's after stacking eight of each.
# 5. Build a series whose anomaly is a level shift lasting longer than the window. Which of
#    the metrics above can a RevIN-based detector still get right?
# 6. Give scores for which the best F1 is 1 but the F1 at the top 5 % is below 0.5.
#
# ### Checked exercises
# In the exercise version of this notebook (`make exercises`), the body of
# `gumbel_softmax_forward` is missing from your copy of `../kernels/activation.cl`: write
# it (soft sample, then the one-hot of its largest entry) and run its check. Then write
# `auc_roc` below from its definition (the probability that an anomaly outscores a normal
# step, ties counting one half), without scikit-learn. Each check runs your code on awkward
# cases and names the likely mistake.

# %% nbgrader={"grade": true, "grade_id": "gumbel_softmax", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from nnlib import exercises

verdict = exercises.check_gumbel_softmax("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "auc_roc_code", "locked": false, "schema_version": 3, "solution": true}
def auc_roc(labels, scores):
    # exercises.hint("auc_roc", 1) gives a nudge, level 2 the formula
    ### BEGIN SOLUTION
    anomalous, normal = scores[labels == 1][:, None], scores[labels == 0][None, :]
    return float((anomalous > normal).mean() + 0.5 * (anomalous == normal).mean())
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "auc_roc", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = exercises.check_auc_roc(auc_roc)
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# ## Puzzle: a row softmax with work-group reductions
#
# The softmax kernels above give each row to one work-item. A long row is better shared: one
# work-group per row, its items each taking a slice, a work-group maximum (notebook 03's
# reduction puzzle) before the exponentials and a work-group sum after. Your copy is
# `puzzles_softmax.cl`; its budget (global loads per element, counted on Oclgrind) is in the
# kernel's comment.

# %%
from nnlib.exercises import puzzles

# %% [markdown]
# **Puzzle 16 · row softmax.** One work-group per row: a maximum and a sum reduced through local memory, with a barrier
# wherever one work-item reads what another wrote.

# %%
print(puzzles.task("softmax", "../puzzles/solutions"))

# %% caption="Puzzle softmax: every output of a row reads the whole row (through its maximum and its sum). Look for one block per row."
puzzles.show("softmax")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_softmax", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("softmax", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS
