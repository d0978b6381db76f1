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
# # 05 · Complex numbers, convolution and the FFT on the device
#
# The CATCH model of notebook 07 looks at a time series through its spectrum: it takes the
# Fourier transform of each channel, cuts the spectrum into frequency patches and learns
# from them (with the transformer parts that notebook 06 teaches). This notebook builds the
# spectral pieces: complex numbers on the device, a 1-D convolution (real and complex), and
# the FFT with its inverse, each with gradients that let it sit inside a trained model.
# Along the way we meet the one rule that complex back-propagation adds, **the conjugate**,
# and see what the source article's kernels get wrong without it. The source article:
# "Redes neurais em trading: Identificação de anomalias no domínio da frequência (CATCH)"
# (Portuguese; original article <https://www.mql5.com/ru/articles/17649>); the model:
# Xingjian Wu et al., ["CATCH: Channel-Aware Multivariate Time Series Anomaly Detection via
# Frequency Patching"](https://arxiv.org/abs/2410.12261), ICLR 2025.

# %% tags=["nbval-ignore-output"]
import inspect
import time

import matplotlib.pyplot as plt
import numpy as np

import nnlib
from nnlib import fft
from nnlib import reference as ref
from nnlib.data import load_eurusd

rng = np.random.default_rng(0)
rt = nnlib.get_runtime()
print(rt)

# %% [markdown]
# ## Complex numbers as `float2`
#
# OpenCL has no complex type, but it has `float2`: two floats side by side, `.x` and `.y`.
# We store $z = a + ib$ as `(float2)(a, b)`, which is exactly numpy's `complex64` memory
# layout, so a complex64 array goes to the device unchanged. Addition and scaling are the
# vector operations `float2` already has; the product is not:
#
# $$(a + ib)(c + id) = (ac - bd) + i(ad + bc).$$
#
# `kernels/complex.cl` writes these helpers once; any kernel file that needs them starts
# with the line `// requires: complex.cl`, and the runtime joins the two sources.

# %%
print(nnlib.source("complex", folder="../kernels"))

# %% [markdown]
# The last kernel, `complex_ops`, is a window on the helpers: one work-item per element
# applies one of them. Compared with numpy (complex128) on 1001 random values, with some
# huge divisors that would overflow a naive $|b|^2$:

# %%
n = 1001
a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
b = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
b[::10] *= 1e20
ops = {"mul": lambda a, b: a * b, "conj(a) b": lambda a, b: np.conj(a) * b,
       "div": lambda a, b: a / b, "exp": lambda a, b: np.exp(a),
       "tanh": lambda a, b: np.tanh(a), "sigmoid": lambda a, b: 1 / (1 + np.exp(-a)),
       "abs": lambda a, b: np.abs(a) + 0j}
da, db = rt.to_device(a, dtype=np.complex64), rt.to_device(b, dtype=np.complex64)
out = rt.empty(n, np.complex64)
complex_ops = rt.launcher("complex", "complex_ops")
for code, (name, f) in enumerate(ops.items()):
    complex_ops((n,), None, da.data, db.data, out.data, np.int32(n), np.int32(code))
    want = f(a.astype(np.complex128), b.astype(np.complex128))
    err = np.abs(out.get() - want) / np.maximum(np.abs(want), 1e-30)
    print(f"{name:10s} relative error below 1e-5: {err.max() < 1e-5}")

# %% [markdown]
# ## Gradients of complex functions: the conjugate
#
# A loss is real. A complex parameter $z = a + ib$ is two real parameters, so its gradient
# is two real derivatives, which we store as one complex number:
#
# $$G_z = \frac{\partial L}{\partial a} + i\,\frac{\partial L}{\partial b}
#       \quad(= 2\,\partial L/\partial \bar z \text{ in Wirtinger / CR calculus}).$$
#
# With this convention $z \leftarrow z - \eta\, G_z$ is ordinary gradient descent on
# $(a, b)$, and PyTorch's `.grad` on complex tensors is the same number. A change $dz$
# changes the loss by $dL = \mathrm{Re}(\overline{G_z}\, dz)$. Now take $y = w x$: then
# $dL = \mathrm{Re}(\overline{G_y}\, w\, dx) = \mathrm{Re}(\overline{\bar w G_y}\, dx)$, so
#
# $$G_x = \bar w\, G_y, \qquad G_w = \bar x\, G_y, \qquad
#   G_z = \overline{f'(z)}\, G_y \ \text{ for a holomorphic } y = f(z) \text{ (e.g. tanh)}.$$
#
# The conjugates are the whole difference from the real case. The article's
# `CalcHiddenGradientComplexConv` multiplies by $w$ and by $f'(z) = 1 - y^2$ instead: right
# only when every imaginary part is zero. A finite-difference check on the real and the
# imaginary part of one input tells the two formulas apart:

# %% tags=["host-float64"]
x = rng.standard_normal((1, 1, 6)) + 1j * rng.standard_normal((1, 1, 6))
w = rng.standard_normal((1, 2, 3)) + 1j * rng.standard_normal((1, 2, 3))
bias = np.zeros((1, 2), complex)
r = rng.standard_normal((1, 1, 2, 4)) + 1j * rng.standard_normal((1, 1, 2, 4))


def loss():  # a real loss with G_y = r
    return np.real(np.sum(np.conj(r) * ref.conv1d_layer_forward(x, w, bias, 1, "tanh")))


eps, i = 1e-6, (0, 0, 2)
numeric = []
for unit in (1, 1j):  # perturb Re x_i, then Im x_i
    keep = x[i]
    x[i] = keep + eps * unit
    up = loss()
    x[i] = keep - eps * unit
    numeric.append((up - loss()) / (2 * eps))
    x[i] = keep
numeric = numeric[0] + 1j * numeric[1]
ours = ref.conv1d_layer_backward(x, w, bias, r, 1, "tanh")[0][i]
article = ref.conv1d_layer_backward(x, w, bias, r, 1, "tanh", conjugate=False)[0][i]
print(f"finite difference     {numeric:.3f}")
print(f"with conjugates       {ours:.3f}   matches: {abs(ours - numeric) < 1e-6}")
print(f"article (no conjugates) {article:.3f}  matches: {abs(article - numeric) < 1e-6}")

# %% [markdown]
# ### The Hermitian dot product is a real dot product
#
# The same conjugate appears in the complex inner product $\langle q, k\rangle = \sum_d
# \bar q_d k_d$. Its real part is exactly the real dot product of the stacked vectors
# $[\mathrm{Re}\,q; \mathrm{Im}\,q]$ and $[\mathrm{Re}\,k; \mathrm{Im}\,k]$:
#
# $$\mathrm{Re}\sum_d \bar q_d k_d = \sum_d (q^r_d k^r_d + q^i_d k^i_d).$$
#
# CATCH's official code never uses complex weights: it concatenates $[\mathrm{Re} \,|\,
# \mathrm{Im}]$ and works with real layers (`fft.re_im` builds that layout on the device).
# The article computes with complex numbers, and without the conjugate
# ($\mathrm{Re}\sum q_d k_d = \sum q^r k^r - q^i k^i$) the sign of the imaginary part flips:

# %% tags=["host-float64"]
q = rng.standard_normal(8) + 1j * rng.standard_normal(8)
k = rng.standard_normal(8) + 1j * rng.standard_normal(8)
stacked = np.concatenate([q.real, q.imag]) @ np.concatenate([k.real, k.imag])
print(f"Re <q, k> (Hermitian)    {np.real(np.vdot(q, k)):+.3f}")
print(f"[Re q; Im q].[Re k; Im k] {stacked:+.3f}")
print(f"Re sum q k (no conjugate) {np.real(np.sum(q * k)):+.3f}")

# %% [markdown]
# ## The convolution: a sliding dot product
#
# A 1-D convolution layer slides a short filter of `window` weights along each sequence,
# `step` positions at a time, and takes a dot product at every stop:
#
# $$z_{b,v,f,t} = \mathrm{bias}_{g,f} + \sum_{k<\mathrm{window}} w_{g,f,k}\;
#   x_{b,v,\,t\cdot\mathrm{step}+k}, \qquad t < \Big\lfloor\frac{\mathrm{length}-
#   \mathrm{window}}{\mathrm{step}}\Big\rfloor + 1.$$
#
# The input holds `variables` sequences per sample. As in the article, each variable has its
# own bank of `filters` filters ($g = v$); with `shared=True` one bank serves all ($g = 0$).
# The numpy reference is an `einsum` over sliding windows:

# %%
print(inspect.getsource(ref.conv1d_forward))
print(inspect.getsource(ref.conv1d_backward))

# %% [markdown]
# The backward pass has two products. The input gradient gathers, for each input
# position $i$, the output positions whose window covers it:
# $t$ from $\lceil (i - \mathrm{window} + 1)/\mathrm{step}\rceil$ to
# $\lfloor i/\mathrm{step}\rfloor$. The weight gradient sums over batch, variables of the
# group and positions. In the kernels each gradient element belongs to one work-item, so no
# two work-items ever write the same place (the article's hidden-gradient kernel had every
# variable's work-items overwrite one slot). The complex kernels are the real ones with
# `cmul` in the forward pass and `cmulconj` (the conjugate) in both backward ones. For step 1
# the complex layer runs register-blocked versions (the dense layer's lesson on `float2`):
# a work-item keeps a tile of outputs (consecutive positions, inputs or taps, times a few
# filters) in vector accumulators and loads each input once per tile (the forward keeps the
# outputs as (re, im) pairs, as they lie in memory: $w x = \mathrm{Re}\,w\,x +
# \mathrm{Im}\,w\,(i x)$, and $i x$ only swaps neighbours and flips a sign); the input
# gradient reads a zero-padded copy of $G_z$ so that its loads never leave the row, and the
# weight gradient splits its long sum over rows into chunks whose partial sums a second
# small kernel adds. On a device that vectorises across work-items (Intel's CPU runtime, a
# GPU) the three take the **lanes design** of notebook 03 instead (`*_lanes` kernels):
# neighbouring work-items at neighbouring positions, scalar `float2` accumulators, so that
# the lanes' loads of $x$ are one contiguous vector:

# %%
print(nnlib.source("conv"))

# %% [markdown]
# Run on the device and compared with the reference, for awkward geometries (window equal
# to the length, step larger than the window, a sequence longer than the device's largest
# work-group):

# %%
big = rt.max_work_group_size + 4  # printed as "big": the number depends on the device
for batch, variables, length, window, step, filters in [(1, 1, 5, 5, 1, 1), (2, 3, 17, 4, 3, 5),
                                                        (1, 2, 30, 3, 7, 2), (2, 2, big, 7, 2, 3)]:
    layer = nnlib.ComplexConv1d(window, step, filters, variables, activation="tanh", seed=1)
    x = 0.5 * (rng.standard_normal((batch, variables, length))
               + 1j * rng.standard_normal((batch, variables, length)))
    y = layer.forward(x.astype(np.complex64)).get()
    gy = (rng.standard_normal(y.shape) + 1j * rng.standard_normal(y.shape)).astype(np.complex64)
    dx = layer.backward(gy).get()
    w, b = layer.complex_weight(), layer.complex_bias()
    want = ref.conv1d_layer_forward(x, w, b, step, "tanh")
    dx_ref, dw_ref, _ = ref.conv1d_layer_backward(x, w, b, gy, step, "tanh")
    gw = layer.weight.grad.get()
    ok = (np.allclose(y, want, atol=1e-5) and np.allclose(dx, dx_ref, atol=1e-4)
          and np.allclose(gw[..., 0] + 1j * gw[..., 1], dw_ref, atol=1e-3))
    print(f"length {'big' if length == big else length}, variables {variables}, window {window}, "
          f"step {step}: forward and gradients match numpy: {ok}")

# %% [markdown]
# Complex activations: `tanh` is holomorphic, so its factor is $\overline{1 - y^2}$;
# `split_sigmoid` applies a real sigmoid to each part (not holomorphic: the derivative acts
# on each part separately); `modrelu` keeps the phase and shrinks the modulus,
# $\max(|z| + b, 0)\, z/|z|$ with a threshold $b \le 0$. The picture shows what each does
# to a grid of points in the complex plane (complex tanh has poles at $\pm i\pi/2$: the
# points near them fly off the plot, one reason CATCH keeps its layers real):

# %% caption="A grid of points in the complex plane after each complex activation, coloured by the input's modulus. modReLU keeps each point's direction and shrinks it; complex tanh sends the points near its poles far off the plot."
grid = np.array([complex(a, b) for a in np.linspace(-2, 2, 21) for b in np.linspace(-2, 2, 21)])
fig, axes = plt.subplots(1, 4, figsize=(13, 3.4))
for ax, act in zip(axes, ["none", "tanh", "split_sigmoid", "modrelu"]):
    layer = nnlib.ComplexConv1d(1, 1, 1, 1, activation=act, modrelu_b=-0.8)
    layer.weight.set(np.array([[[[1.0, 0.0]]]]))
    layer.bias.set(np.zeros((1, 1, 2)))
    y = layer.forward(grid.reshape(1, 1, -1).astype(np.complex64)).get().ravel()
    ax.scatter(y.real, y.imag, c=np.abs(grid), s=6, cmap="viridis")
    ax.set(title=act, xlabel="Re", ylabel="Im", aspect="equal", xlim=(-2.2, 2.2),
           ylim=(-2.2, 2.2))
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The FFT
#
# The discrete Fourier transform of a row $x_0 \dots x_{n-1}$ is
# $X_k = \sum_j x_j\, e^{-2\pi i jk/n}$, $n^2$ products. The FFT splits it into two
# half-size transforms of the even and the odd samples and merges them with **butterflies**:
#
# $$X_k = E_k + w^k O_k, \qquad X_{k+n/2} = E_k - w^k O_k, \qquad w = e^{-2\pi i/n},$$
#
# recursively, $\log_2 n$ stages of $n/2$ butterflies: $5 n \log_2 n$ flops instead of
# $8 n^2$. Our kernel uses Stockham's ordering: stage $s$ merges transforms of length
# $p = 2^s$ into length $2p$, reading from one buffer and writing to another, so the result
# comes out in natural order with no bit-reversal pass. One work-item computes one butterfly;
# one launch per stage. Two radix-2 stages merge into one **radix-4** stage (four inputs,
# three twiddles, then a 4-point DFT that needs only additions and swaps), which halves the
# passes over memory; the kernels do that, with one radix-2 stage first when $\log_2 n$ is
# odd. The numpy reference of one stage of either radix:

# %%
print(inspect.getsource(ref.stockham_stage))
print("stages for n = 1024:", ref.radices(1024), "  n = 8:", ref.radices(8))

# %% [markdown]
# The butterfly diagram of the textbook radix-2 FFT for $n = 8$: each column is one buffer,
# each pair of crossing lines one work-item (in blue the sum, in red the difference after
# the twiddle factor). A radix-4 stage does two of these columns in one step.

# %% caption="The butterflies of a radix-2 Stockham FFT of length 8: each column is a buffer, each pair of crossing lines one work-item (blue the sum, red the difference after the twiddle factor). Each stage doubles the length of the transforms merged, so three stages do eight points."
n = 8
fig, ax = plt.subplots(figsize=(8, 4))
p, stage = 1, 0
while p < n:
    for j in range(n // 2):
        k = j % p
        for src in (j, j + n // 2):
            for dst, colour in ((2 * j - k, "tab:blue"), (2 * j - k + p, "tab:red")):
                ax.plot([stage, stage + 1], [src, dst], color=colour, lw=1, alpha=0.7)
    p, stage = 2 * p, stage + 1
for s in range(stage + 1):
    ax.scatter([s] * n, range(n), color="k", zorder=3, s=15)
ax.set(xticks=range(stage + 1), xticklabels=["x"] + [f"stage {s + 1}" for s in range(stage)],
       yticks=range(n), ylabel="index in the row", title="radix-2 Stockham FFT, n = 8")
ax.invert_yaxis()
plt.show()

# %% [markdown]
# Other lengths need other stages (CATCH's windows are often 96 or 192 long). The same
# Stockham stage works for any radix $r$: merge $r$ transforms of length $p$ with an
# $r$-point DFT. The kernels have radix 3 and radix 5 butterflies besides 2 and 4, so every
# length $n = 2^a 3^b 5^c$ (24, 96, 1000, ...) is a chain of stages (`ref.radices(96)` is
# `[2, 4, 4, 3]`). When two rows fit in the device's local memory, **one** launch runs every
# stage: the rows are copied into local memory, the stages walked with a barrier between them
# and the result written once. On a GPU one work-group takes a row and its work-items share
# the butterflies (`fft_local`); on a CPU one work-item takes several rows at once, element
# $i$ of each row side by side in one vector, so that every butterfly runs on all of them in
# SIMD lanes with the same twiddle factors (`fft_rows`). Longer rows take one launch per
# stage through global memory. A short row of another length (up to `fft.DIRECT_MAX` = 24)
# uses the direct $O(n^2)$ DFT, one work-item per output. A longer one uses **Bluestein's**
# trick: with $jk = (j^2 + k^2 - (k-j)^2)/2$ the DFT becomes a convolution with the chirp
# $c_j = e^{-i\pi j^2/n}$,
#
# $$X_k = c_k \sum_j (x_j c_j)\, \bar c_{k-j},$$
#
# which is computed as a circular convolution of a power-of-two length $m \ge 2n - 1$: two
# FFTs of length $m$ per call (the chirp's own transform is computed once, with the plan).
# Since $2n - 1 \le m < 4n$, that is about 4 to 8 times the work of a mixed-radix FFT of the
# same $n$.
# The inverse transform is the same with $+i$ in the exponent and $1/n$.
# The kernels:

# %%
print(nnlib.source("fft", folder="../kernels"))

# %% [markdown]
# Each algorithm against numpy, on 3 rows, with the round trip $\mathrm{ifft}(\mathrm{fft}
# (x)) = x$ and Parseval's identity $\sum |x_j|^2 = \frac1n \sum |X_k|^2$:

# %%
lengths = {"8": 8, "1024": 1024, "15": 15, "96": 96, "97": 97, "1000": 1000,
           "2 x max work-group": 2 * big - 8, "max work-group + 4": big}
for label, n in lengths.items():
    x = (rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))).astype(np.complex64)
    X = fft.fft(x)
    want = np.fft.fft(x.astype(np.complex128))
    err = np.abs(X.get() - want).max() / np.abs(want).max()
    back = fft.ifft(X).get()
    parseval = np.allclose(np.sum(np.abs(X.get().astype(np.complex128)) ** 2, -1) / n,
                           np.sum(np.abs(x.astype(np.complex128)) ** 2, -1), rtol=1e-5)
    algorithm = fft.plan(rt, n).algorithm
    print(f"n = {label:18s} ({algorithm:9s}): error vs numpy < 1e-5: {err < 1e-5}, "
          f"round trip: {np.allclose(back, x, atol=1e-5)}, Parseval: {parseval}")

# %% [markdown]
# ### The FFT's gradient is the inverse FFT
#
# The DFT is a linear map $y = F x$ with $F_{kj} = e^{-2\pi i jk/n}$, so the rule
# $G_x = \bar w G_y$ becomes $G_x = F^H G_y = \bar F G_y = n \cdot \mathrm{ifft}(G_y)$: the
# backward pass of `fft` is an inverse FFT without the $1/n$, i.e. `ifft` with numpy's
# `norm="forward"`. `fft.FFT` is the transform as a layer with that backward:

# %%
layer = fft.FFT()
x = rng.standard_normal((2, 12)) + 1j * rng.standard_normal((2, 12))
r = rng.standard_normal((2, 12)) + 1j * rng.standard_normal((2, 12))
layer.forward(x.astype(np.complex64))
g = layer.backward(r.astype(np.complex64)).get()


def loss(x):  # real, with G_y = r
    return np.real(np.vdot(r, np.fft.fft(x)))


e = np.zeros((2, 12))
e[1, 5] = 1e-6
numeric = complex((loss(x + e) - loss(x - e)) / 2e-6, (loss(x + 1j * e) - loss(x - 1j * e)) / 2e-6)
print(f"backward matches finite differences: {abs(g[1, 5] - numeric) < 1e-4}")
print(f"backward equals n * ifft(r): {np.allclose(g, 12 * np.fft.ifft(r), atol=1e-4)}")

# %% [markdown]
# ## The spectrum of EURUSD H1 returns
#
# Hourly log returns look like noise, and their power spectrum is almost flat. Their size
# $|r_t|$ is not: the market is busier in some hours of the day than in others, every day,
# so the spectrum of $|r_t|$ has a peak at one cycle per 24 bars and at its harmonics. We
# transform 41 windows of 120 bars (5 trading days; $120 = 2^3 \cdot 3 \cdot 5$, so the
# plan chains Stockham stages) in one batched call and average their power:

# %%
close = load_eurusd()["close"]
returns = np.diff(np.log(close))
windows = np.abs(returns[: 41 * 120]).reshape(41, 120)
windows = windows - windows.mean(axis=1, keepdims=True)
power = np.abs(fft.fft(windows).get()) ** 2
freq = np.arange(120) / 120  # cycles per bar
half = slice(1, 61)
peak = freq[half][np.argmax(power.mean(0)[half])]
print(f"strongest cycle of |returns|: {1 / peak:.1f} bars")

# %% caption="EURUSD hourly log returns over the first 480 hours (left) and the mean power spectrum of the absolute returns (right). The peaks of the spectrum are the day's rhythms: volatility repeats every 24 hours and its fractions."
fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 3.5))
a1.plot(returns[:480] * 1e4, lw=0.8)
a1.set(xlabel="hour", ylabel="log return (bp)", title="EURUSD H1, first 480 hours")
mean_power = power.mean(0)[half]
a2.plot(freq[half], mean_power, marker=".")
inner = mean_power[1:-1]  # the three largest local maxima, from the data
peaks = np.flatnonzero((inner > mean_power[:-2]) & (inner > mean_power[2:])) + 1
peaks = np.sort(peaks[np.argsort(mean_power[peaks])[-3:]])
for f in freq[half][peaks]:
    a2.axvline(f, color="grey", ls=":", lw=0.8)
a2.set(xlabel="cycles per bar", ylabel="mean power of |return|",
       title="spectrum: largest peaks at " + ", ".join(f"1/{1 / f:.3g}" for f in freq[half][peaks]))
plt.show()

# %% [markdown]
# ## Why the frequency view shows some anomalies
#
# An anomaly that is weak in every single bar but regular, say an oscillation with a period
# of 5 bars and an amplitude of 0.6 of the window's own standard deviation, spreads over the
# whole window in time and is lost in the noise. In the spectrum all its energy falls into
# one frequency bin, whereas noise spreads its energy over all of them. Scoring each window
# by the share of its energy in its strongest frequency singles it out; the largest return,
# a time-domain score, points at a news spike instead:

# %%
signal = returns[: 41 * 120].reshape(41, 120).copy()
t = np.arange(120)
hidden = 20
signal[hidden] += 0.6 * signal[hidden].std() * np.sin(2 * np.pi * t / 5)
spectra = np.abs(fft.fft(signal - signal.mean(1, keepdims=True)).get()[:, half]) ** 2
score = (spectra / spectra.sum(axis=1, keepdims=True)).max(axis=1)
print(f"frequency score picks window {np.argmax(score)} (the hidden one is {hidden})")
print(f"largest |return| picks window {np.argmax(np.abs(signal).max(axis=1))}")

# %% caption="A window with a hidden weak oscillation in time (left), its spectrum against the median window's (middle), and a frequency score for every window (right). Nothing shows in time; in frequency the hidden period stands out as a peak, and its window's score stands above the rest."
fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(14, 3.3))
a1.plot(signal[hidden] * 1e4, lw=0.8)
a1.set(title=f"window {hidden} in time: nothing to see", xlabel="bar", ylabel="bp")
a2.plot(freq[half], spectra[hidden], label=f"window {hidden}")
a2.plot(freq[half], np.median(spectra, axis=0), label="median window")
a2.set(title=f"in frequency: a peak at 1/{1 / freq[half][np.argmax(spectra[hidden])]:.3g}",
       xlabel="cycles per bar")
a2.legend()
a3.bar(range(41), score)
a3.set(title="share of energy in the strongest frequency", xlabel="window")
plt.show()

# %% [markdown]
# CATCH does this with learned patterns instead of a fixed score: it reconstructs each
# window and measures the error both in time and in frequency, so a regular anomaly that is
# invisible bar by bar still raises its score.
#
# How fast are these kernels? `nnlib/bench/complex.py` measures GFLOP/s of the complex
# convolution and the FFT against numpy on the same sizes. A small timing here:

# %% tags=["nbval-ignore-output"]
x = (rng.standard_normal((1024, 1024)) + 1j * rng.standard_normal((1024, 1024))).astype(np.complex64)
xd = rt.to_device(x, dtype=np.complex64)
fft.fft(xd)
rt.queue.finish()
t0 = time.perf_counter()
for _ in range(5):
    fft.fft(xd)
rt.queue.finish()
device_s = (time.perf_counter() - t0) / 5
t0 = time.perf_counter()
for _ in range(5):
    np.fft.fft(x)
numpy_s = (time.perf_counter() - t0) / 5
flops = 5 * 1024 * 1024 * np.log2(1024)
print(f"FFT of 1024 rows x 1024: device {device_s * 1e3:.1f} ms ({flops / device_s * 1e-9:.1f} "
      f"GFLOP/s), numpy {numpy_s * 1e3:.1f} ms ({flops / numpy_s * 1e-9:.1f} GFLOP/s)")

# %%
assert device_s > 0 and numpy_s > 0

# %% [markdown]
# ## Summary
# - Complex numbers live in `float2`; `kernels/complex.cl` writes their arithmetic once.
# - For a real loss, a complex gradient is $\partial L/\partial\mathrm{Re} + i\,\partial
#   L/\partial\mathrm{Im}$, and every backward product takes the conjugate of the other
#   factor: $G_x = \bar w G_y$, $G_w = \bar x G_y$, $G_z = \overline{f'(z)} G_y$.
#   Without it (the article's kernels) the gradient is wrong as soon as anything is complex.
# - The Hermitian product's real part is the real dot product of $[\mathrm{Re};\mathrm{Im}]$:
#   complex layers and CATCH's real layers on $[\mathrm{Re}|\mathrm{Im}]$ are related.
# - A convolution is a sliding dot product; each gradient element belongs to one work-item,
#   and register tiles of `float2` (or, where the compiler vectorises across work-items,
#   neighbouring positions in neighbouring lanes) make the kernels fast.
# - The FFT: Stockham stages of radix 2, 3, 4 and 5 for $n = 2^a 3^b 5^c$, a direct DFT or
#   Bluestein otherwise; its gradient is the inverse transform with the dual normalisation.
# - Regular anomalies concentrate in one frequency bin: the reason CATCH looks at spectra.
#
# ## Exercises
# 1. Drop the conjugate from `cmulconj` in a copy of `cconv1d_backward_input` (use
#    `rt.program("conv", folder=...)`). Which test of `tests/test_complex_conv.py` fails, and
#    does it still pass when all imaginary parts are zero?
# 2. Show that `split_sigmoid` is not holomorphic (the Cauchy-Riemann equations fail), and
#    derive its backward formula from the definition $G_z = \partial L/\partial a +
#    i\,\partial L/\partial b$.
# 3. Write a radix-8 stage (`ref.stockham_stage(x, p, 8)` is its reference). How many
#    launches does $n = 4096$ need then, and why does that matter on a memory-bound device?
# 4. Bluestein needs $m \ge 2n - 1$. What goes wrong with $m = 2n - 2$? Try it in
#    `ref.bluestein`.
#
# ### Checked exercises: write the kernels yourself
# In the exercise version of this notebook (`make exercises`), two pieces are missing from
# your copies of the kernels in `../kernels/`: `cmulconj` in `complex.cl` (the product with a
# conjugate that every complex gradient needs) and the body of `fft_radix2_stage` in `fft.cl`
# (one butterfly). Write each one and run its check: it runs your code on awkward sizes,
# compares with `nnlib.reference` and names the likely mistake.

# %% nbgrader={"grade": true, "grade_id": "cmulconj", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from nnlib import exercises

verdict = exercises.check_cmulconj("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "fft_radix2_stage", "locked": true, "points": 2, "schema_version": 3, "solution": false}
verdict = exercises.check_fft_radix2_stage("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# ## Puzzle: one butterfly stage
#
# The FFT above is a sequence of radix-2 (and other) stages. Write one: your copy is
# `puzzles_fft.cl`, the rule is in its comment. `puzzles.hint("butterfly", 1)` gives a nudge.

# %%
from nnlib.exercises import puzzles

# %% [markdown]
# **Puzzle 15 · butterfly.** One work-item per butterfly: it reads two complex values, multiplies one by a twiddle factor
# and writes their sum and difference.

# %%
print(puzzles.task("butterfly", "../puzzles/solutions"))

# %% caption="Puzzle butterfly: the two outputs of a butterfly read the same two inputs (one of them times a twiddle factor). Look for the 2 x 2 checks, one per butterfly."
puzzles.show("butterfly")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_butterfly", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("butterfly", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS
