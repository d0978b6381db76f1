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
# # 04 · Optimizers as kernels: SGD, Adam, Adam-mini and Adan
#
# A gradient says which way is downhill; the **optimizer** decides how far to go, per weight.
# Each rule below is one OpenCL kernel that updates every element of a parameter tensor in
# place, with the state it keeps beside it. We write the rules as maths, as numpy and as
# kernels, fix the bugs of the source article's Adam-mini kernel, and compare the four on two
# problems: memory, speed, and the loss they reach.
#
# Sources: "Neural Networks in Trading: Reducing Memory Consumption with Adam-mini
# Optimization" (the article's kernels; original article
# <https://www.mql5.com/ru/articles/15352>, read in English and Portuguese); Yushun Zhang
# et al., ["Adam-mini: Use Fewer Learning Rates To Gain More"](https://arxiv.org/abs/2406.16793),
# ICLR 2025; Xingyu Xie et al., ["Adan: Adaptive
# Nesterov Momentum Algorithm for Faster Optimizing Deep Models"](https://arxiv.org/abs/2208.06677),
# IEEE TPAMI 2024 (summarised in German by WBOY on the PHP Chinese website, php.cn,
# 2023-04-11).

# %% tags=["nbval-ignore-output"]
import inspect

import matplotlib.pyplot as plt
import numpy as np

import nnlib
from nnlib import data, optim
from nnlib.launcher import WorkGroupError
from nnlib.reference import optim as ref
from nnlib.runtime import event_ms

rng = np.random.default_rng(0)
rt = nnlib.use_device(profiling=True)  # a queue that records kernel times: "Speed" reads them
print(rt)

# %% [markdown]
# ## The rules
#
# With gradient $g_t$ at step $t$ (from 1), learning rate $\eta$ and weight decay $\lambda$:
#
# | rule | state per weight | update |
# |---|---|---|
# | SGD + momentum | $v$ | $v \leftarrow \mu v + g;\ w \leftarrow w - \eta v$ (Nesterov: $w \leftarrow w - \eta(g + \mu v)$) |
# | Adam | $m, v$ | $m \leftarrow \beta_1 m + (1-\beta_1) g;\ v \leftarrow \beta_2 v + (1-\beta_2) g^2;\ w \leftarrow w - \frac{\eta}{1-\beta_1^t} \frac{m}{\sqrt{v}/\sqrt{1-\beta_2^t} + \epsilon}$ |
# | Adam-mini | $m$, and one $v_b$ per **block** | as AdamW, with $v_b \leftarrow \beta_2 v_b + (1-\beta_2)\,\mathrm{mean}_{i \in b}\, g_i^2$ |
# | Adan | $m, d, n, g_{t-1}$ | $m \leftarrow \beta_1 m + (1-\beta_1) g;\ d \leftarrow \beta_2 d + (1-\beta_2)(g - g_{t-1});$ $n \leftarrow \beta_3 n + (1-\beta_3)(g + \beta_2 (g - g_{t-1}))^2;$ $w \leftarrow \frac{w - \eta_t (\hat m + \beta_2 \hat d)}{1 + \eta\lambda}$ with $\eta_t = \eta / (\sqrt{\hat n} + \epsilon)$ |
#
# The hats are the bias-corrected moments, as in Adam's column: $\hat m = m / (1-\beta_1^t)$,
# $\hat d = d / (1-\beta_2^t)$ and $\hat n = n / (1-\beta_3^t)$, with $t$ the step count. Adan's
# kernel receives them folded into three numbers the host computes once per step:
# `step_size` $= \eta / (1-\beta_1^t)$, `step_size_d` $= \eta \beta_2 / (1-\beta_2^t)$ and
# `sqrt_bc3` $= \sqrt{1-\beta_3^t}$.
#
# Adam-mini's observation: the curvature of a network is nearly block-diagonal (one block per
# neuron, per attention head), and inside a block one well-chosen step size serves all
# weights, so the per-weight second moment $v$ can shrink to one number per block: about half
# of Adam's optimizer memory. Adan adds a Nesterov-style look-ahead through the difference of
# consecutive gradients. Our rules copy the reference implementations exactly: PyTorch for
# SGD/Adam/AdamW (note where $\epsilon$ sits: outside the root, after the bias correction),
# the official `adam-mini` 1.1.1 and the official Adan code (its betas are one minus the paper's).
# The numpy reference of Adam:

# %%
print(inspect.getsource(ref.adam_step))

# %% [markdown]
# and the kernel: one work-item per weight. The host computes the bias corrections once per
# step in float64, as PyTorch does, and passes `step_size` $= \eta/(1-\beta_1^t)$ and
# `sqrt_bc2` $= \sqrt{1-\beta_2^t}$:

# %%
print(nnlib.source("optim", "adam_update", folder="../kernels"))

# %% [markdown]
# Every rule against its numpy reference for 25 steps, on a tensor wider than the device's
# largest work-group:

# %%
shape = (3, rt.max_work_group_size + 5)
rules = {
    "SGD (Nesterov)": (lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
                       lambda w, g, v, t: ref.sgd_step(w, g, v, 0.05, 0.9, True), 1),
    "Adam": (lambda ps: optim.Adam(ps, lr=0.01),
             lambda w, g, m, v, t: ref.adam_step(w, g, m, v, t, 0.01), 2),
    "Adan": (lambda ps: optim.Adan(ps, lr=0.01, weight_decay=0.02),
             lambda w, g, m, d, n, gp, t: ref.adan_step(w, g, m, d, n, gp, t, 0.01,
                                                        weight_decay=0.02), 4),
}
for label, (make, reference, n_state) in rules.items():
    p = nnlib.Parameter(rng.standard_normal(shape), "w")
    opt = make([p])
    w = p.numpy().astype(np.float64)
    state = [np.zeros_like(w) for _ in range(n_state)]
    for t in range(1, 26):
        g = rng.standard_normal(shape).astype(np.float32)
        p.grad.set(g)
        opt.step()
        w, *state = reference(w, g.astype(np.float64), *state, t)
    print(f"{label:15} matches numpy after 25 steps: {np.allclose(p.numpy(), w, atol=1e-5)}")

# %% [markdown]
# ## Adam-mini: a reduction per block, and the article's bugs
#
# Adam-mini needs, for every block, the mean of $g^2$ over the block: a **reduction**. Our
# kernel gives each block one work-group of fixed size; its work-items stride over the block
# (so a block may be far larger than the work-group), then halve the partial sums in local
# memory until one is left:

# %%
print(nnlib.source("optim", "adam_mini_update", folder="../kernels"))

# %% [markdown]
# The source article's kernel differs in three ways, each a bug.
#
# **1. It launches `inputs + 1` work-items per group.** A work-group cannot be larger than
# the device allows; a layer wider than that fails to launch, which is the error a reader of
# the article reported. This device's limit:

# %% tags=["nbval-ignore-output"]
print(f"max work-group size here: {rt.max_work_group_size}")

# %% [markdown]
# nnlib's launcher checks every work-group against that limit (and the kernel's own) before
# OpenCL sees it, and names the kernel and the limit (`WorkGroupError`):

# %%
too_wide = rt.max_work_group_size + 1
vector_add = rt.launcher("vector", "vector_add")
buf = rt.zeros((too_wide,))
try:
    vector_add((too_wide,), (too_wide,), buf.data, buf.data, buf.data, np.int32(too_wide))
    print("launched")
except WorkGroupError as err:
    print("a work-group one larger than the limit fails:",
          f"at most {vector_add.work_group_size} are allowed" in str(err))

# %% [markdown]
# Our kernel runs any block size with the same work-group: here blocks 4 items wider than
# the limit, checked against numpy.

# %%
wide = rt.max_work_group_size + 4
p = nnlib.Parameter(rng.standard_normal((2, wide)), "weight", block_size=wide)
opt = optim.AdamMini([p], lr=0.01)
w, m, vb = p.numpy().astype(np.float64), np.zeros((2, wide)), np.zeros(2)
for t in range(1, 6):
    g = rng.standard_normal((2, wide)).astype(np.float32)
    p.grad.set(g)
    opt.step()
    w, m, vb = ref.adam_mini_step(w, g.astype(np.float64), m, vb, t, wide, 0.01)
print(f"blocks wider than the work-group limit, {opt.group_size <= wide} times wider "
      f"than the group: matches numpy {np.allclose(p.numpy(), w, atol=1e-5)}")

# %% [markdown]
# **2. Its tree reduction stops one level early.** The loop halves `count` and exits as soon
# as `count` reaches 1, so the last addition `temp[0] += temp[1]` never runs and about half the
# terms are lost. Simulated in numpy with every $g^2 = 1$ (the true mean is 1), against our
# kernel's second moment after one step ($v_b = (1-\beta_2)\cdot\mathrm{mean}$):


# %%
def article_style_mean(values, local_size=64):
    """The article's reduction: partial sums per work-item, then halving while count > 1."""
    temp = np.array([values[i::local_size].sum() for i in range(min(local_size, len(values)))])
    count = (len(temp) + 1) // 2
    while True:
        for i in range(count):
            if i + count < len(temp):
                temp[i] += temp[i + count]
        count = (count + 1) // 2
        if count <= 1:
            break
    return temp[0] / len(values)


for n in (3, 8, 100, 200):
    p = nnlib.Parameter(np.zeros(n), "weight", block_size=n)
    opt = optim.AdamMini([p], lr=0.01, betas=(0.9, 0.5))
    p.grad.fill(1.0)
    opt.step()
    ours = opt.v[0].get()[0] / (1 - 0.5)
    print(f"block of {n:3}: article's mean {article_style_mean(np.ones(n)):.3f}, ours {ours:.3f}")

# %% [markdown]
# **3. `if (delta > 0)` applies only positive updates.** Every weight that should decrease
# stays where it is, while its first moment is still updated, so weights and state drift
# apart. Our kernels have no such condition; the only guard is for non-finite gradients, and
# it skips the *whole* step (weights and state untouched) and counts it:

# %%
p = nnlib.Parameter(np.zeros(4), "w")
opt = optim.Adam([p], lr=0.1)
p.grad.set(np.array([1.0, -1.0, np.nan, 2.0], np.float32))
opt.step()
print("weights after a NaN gradient:", p.numpy(), "skipped steps:", opt.skipped_steps)
p.grad.set(np.array([1.0, -1.0, 0.5, 2.0], np.float32))
opt.step()
print("after a finite one:          ", np.round(p.numpy(), 3))

# %% [markdown]
# The step after the skip moves each weight by 0.0744, not by $\eta = 0.1$ as Adam's first
# step would: the host counts steps without waiting for the device, so it used the bias
# corrections of step 2 while the moments have seen one gradient. `fit` stops with an error at
# the end of an epoch that skipped steps, so only a loop that carries on after a NaN sees this.

# %% [markdown]
# ## Memory
#
# The state each optimizer keeps for the fractal classifier of notebook 02
# (240 → 128 → 64 → 3). Adam-mini's blocks are the output neurons of each dense layer (one
# row of the weight matrix), and biases keep Adam's per-element moments, as in the official
# code.


# %%
def classifier(seed):
    return nnlib.Sequential([
        nnlib.Dense(240, 128, "tanh", seed=seed),
        nnlib.Dense(128, 64, "tanh", seed=seed + 1),
        nnlib.Dense(64, 3, "softmax", seed=seed + 2),
    ], loss="cross_entropy")


makers = {
    "SGD": lambda ps, lr=0.05: optim.SGD(ps, lr=lr, momentum=0.9),
    "Adam": lambda ps, lr=1e-3: optim.Adam(ps, lr=lr),
    "Adam-mini": lambda ps, lr=1e-3: optim.AdamMini(ps, lr=lr),
    "Adan": lambda ps, lr=1e-3: optim.Adan(ps, lr=lr),
}
params = classifier(0).parameters()
n_weights = sum(p.size for p in params)
state = {name: make(params).state_nbytes() for name, make in makers.items()}
for name, nbytes in state.items():
    print(f"{name:9} {nbytes:8d} bytes = {nbytes / 4 / n_weights:.3f} floats per weight")
print(f"Adam-mini / Adam: {state['Adam-mini'] / state['Adam']:.3f}")

# %% caption="The optimizer state each method keeps, in KiB, for the same network. Adam keeps two numbers per weight, Adam-mini about one, Adan four: memory is counted, not measured."
plt.figure(figsize=(5, 3))
plt.bar(list(state), [b / 1024 for b in state.values()], color=["C0", "C1", "C2", "C3"])
plt.ylabel("optimizer state (KiB)")
plt.title(f"{n_weights} weights")
plt.show()

# %% [markdown]
# ## Speed: time per step from profiling events
#
# The runtime of this notebook records each kernel's start and end (`profiling=True`, see
# notebook 00); `opt.events` holds the last step's update kernels. The update is
# memory-bound: it reads and writes every weight and its state.

# %% tags=["nbval-ignore-output"]
for name, make in makers.items():
    opt = make(params)
    for p in params:
        p.grad.fill(0.01)
    times = []
    for _ in range(20):
        opt.step()
        times.append(event_ms(*opt.events))
    print(f"{name:9} {np.median(times) * 1000:7.1f} us per step (kernels only)")
    assert 0 < np.median(times) < 1000

# %% [markdown]
# Adam-mini moves less memory than Adam (one second moment per block instead of one per
# weight), yet its kernel is usually not faster, often slower. The reason is the block
# reduction: a work-group must finish the mean of $g^2$ over its block before any of its
# work-items may update a weight, so each group reads its block's gradient twice (once for
# the sum, once for the update), waits at a barrier after every halving step of the local
# reduction (log2 of the group size steps, most work-items idle in the last ones), and runs
# one group per block: a small block leaves most of a large work-group idle, and on a CPU
# every barrier is a switch between work-items that PoCL cannot vectorize across. Adam's
# kernel is one pass with no barrier. What would make Adam-mini faster: reduce with the
# device's sub-group (warp) operations instead of local memory (`sub_group_reduce_add`),
# size the work-group to the block, fuse the sum of $g^2$ into the backward kernel that
# produces $g$ (so the gradient is read once), and update all tensors in one launch.

# %% [markdown]
# ## A toy with block-diagonal curvature
#
# The Adam-mini paper's toy: a quadratic $L(w) = \tfrac12 w^\top H w$ whose Hessian $H$ has
# three dense blocks with very different scales. One step size per block is all a diagonal
# method needs to do well here. The gradient $Hw$ is computed on the host; the update runs
# on the device. Each optimizer gets the best rate of a grid; three seeds, median curves. A
# run that diverges is stopped and counts as an infinite loss.


# %% caption="Loss per step on a block-diagonal quadratic whose blocks have very different scales, median of three seeds, each optimizer at its best rate. Adam-mini's one step size per block is all this problem needs: watch how soon each curve reaches the bottom."
def block_hessian(seed, sizes=(10, 10, 10), scales=(1.0, 10.0, 100.0)):
    r = np.random.default_rng(seed)
    h = np.zeros((sum(sizes), sum(sizes)))
    start = 0
    for size, scale in zip(sizes, scales):
        q, _ = np.linalg.qr(r.standard_normal((size, size)))
        h[start:start + size, start:start + size] = q @ np.diag(scale * r.uniform(0.5, 1.5, size)) @ q.T
        start += size
    return h


def toy_curve(name, seed, lr, steps=150):
    h = block_hessian(seed)
    p = nnlib.Parameter(np.random.default_rng(seed).standard_normal(30), "w", block_size=10)
    opt = makers[name]([p], lr=lr)
    losses = np.full(steps, np.inf)
    for t in range(steps):
        w = p.numpy().astype(np.float64)
        losses[t] = 0.5 * w @ h @ w
        if not losses[t] < 1e6:  # diverged: stop before float32 overflows
            break
        p.grad.set((h @ w).astype(np.float32))
        opt.step()
    return losses


toy_rates = [0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0]
toy = {}
for name in makers:
    runs = {lr: np.median([toy_curve(name, s, lr) for s in range(3)], axis=0) for lr in toy_rates}
    best = min(runs, key=lambda lr: runs[lr][-1])
    toy[name] = (best, runs[best])
plt.figure(figsize=(6, 3.5))
for name, (lr, curve) in toy.items():
    plt.semilogy(curve, label=f"{name} (lr {lr})")
plt.xlabel("step")
plt.ylabel("loss")
plt.legend()
plt.title("block-diagonal quadratic, median of 3 seeds, best rate of each")
plt.show()

# %% [markdown]
# Steps each needs to bring the loss from about 550 down to $10^{-3}$:

# %% tags=["nbval-ignore-output"]
for name, (lr, curve) in toy.items():
    hit = np.flatnonzero(curve <= 1e-3)
    steps = "-" if hit.size == 0 else str(hit[0])
    print(f"{name:9} best rate {lr:5}: loss after 150 steps {curve[-1]:.1e}, "
          f"steps to 1e-3: {steps}")

# %% [markdown]
# These figures went through float32 kernels, so their last digits (and, near a tie, the best
# rate) can differ from device to device. What holds on any correct device: every optimizer
# reaches $10^{-3}$ within the 150 steps at its best rate.

# %%
assert all(curve[-1] < 1e-3 for _, curve in toy.values())

# %% [markdown]
# ## The fractal classifier
#
# The network of notebook 02 trained for 8 epochs with each optimizer, three seeds each
# (network initialisation and batch order), at the usual default rates: Adam and Adam-mini
# share every hyper-parameter, so their curves answer whether one matches the other.

# %% tags=["nbval-ignore-output"] caption="Training cross-entropy per epoch on the fractal classifier at the default rates, median of three seeds. Adam and Adam-mini share every hyper-parameter: their curves lie close together."
x_train, y_train, x_test, y_test = data.fractal_dataset()
curves = {name: [] for name in makers}
for name, make in makers.items():
    for seed in range(3):
        net = classifier(10 * seed)
        history = net.fit(x_train, y_train, make(net.parameters()), epochs=8, batch_size=64,
                          seed=seed, progress=False)
        curves[name].append(history["loss"])
median = {name: np.median(c, axis=0) for name, c in curves.items()}

plt.figure(figsize=(6, 3.5))
for name, curve in median.items():
    plt.plot(range(1, 9), curve, marker="o", label=name)
plt.xlabel("epoch")
plt.ylabel("training cross-entropy")
plt.legend()
plt.title("fractal classifier at default rates, median of 3 seeds")
plt.show()
for name, runs in curves.items():
    final = ", ".join(f"{run[-1]:.4f}" for run in runs)
    print(f"{name:9} loss after 8 epochs per seed: {final}")

# %%
assert all(0.3 < run[-1] < 0.7 for runs in curves.values() for run in runs)  # from ln 3 = 1.1

# %% [markdown]
# ## Where each optimizer wants its rate
#
# Default rates are not a fair race: the Adan authors recommend rates several times Adam's.
# A small sweep, 4 epochs each, one seed. To see the loss step by step we call `train_step`
# ourselves; it returns the loss still on the device, and we read all of them at the end,
# so the host never waits inside the loop. A step's loss is noisy (one batch of 64), so we
# report the mean over the last epoch's steps, as `fit` does.

# %% tags=["nbval-ignore-output"] caption="The loss in epoch 4 against the learning rate, one curve per optimizer. Each curve has a valley: its bottom is the optimizer's best rate, and the valley's width says how forgiving the optimizer is."
steps_per_epoch = -(-len(x_train) // 64)


def train(name, lr, seed, epochs):
    """Per-step training losses of the classifier (batches of 64), and the network."""
    net = classifier(10 * seed)
    opt = makers[name](net.parameters(), lr=lr)
    order_rng = np.random.default_rng(seed)
    losses = []
    for _ in range(epochs):
        order = order_rng.permutation(len(x_train))
        for start in range(0, len(order), 64):
            idx = order[start:start + 64]
            losses.append(net.train_step(x_train[idx], y_train[idx], opt))
    return np.array([float(loss) for loss in losses]), net


adaptive = [3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
rates = {"SGD": [0.01, 0.03, 0.05, 0.1], "Adam": adaptive, "Adam-mini": adaptive,
         "Adan": adaptive}
sweep = {name: [train(name, lr, 0, 4)[0][-steps_per_epoch:].mean() for lr in grid]
         for name, grid in rates.items()}
best_rate = {name: rates[name][int(np.nanargmin(sweep[name]))] for name in rates}
plt.figure(figsize=(5, 3.2))
for name, losses in sweep.items():
    plt.semilogx(rates[name], losses, marker="o", label=name)
plt.xlabel("learning rate")
plt.ylabel("loss in epoch 4")
plt.legend()
plt.show()
for name, losses in sweep.items():
    print(f"{name:9} best rate {best_rate[name]:.0e}: loss {np.nanmin(losses):.4f}")

# %%
assert all(np.nanmin(losses) < 0.7 for losses in sweep.values())

# %% [markdown]
# ## Steps to reach Adam's loss
#
# Each optimizer at its best rate from the sweep, three seeds, 8 epochs. The curves are
# trailing means over one epoch of steps. The target is Adam's median loss after 6 epochs:
# how many steps does each optimizer need to get there?

# %% tags=["nbval-ignore-output"] caption="Training cross-entropy per step at each optimizer's best rate, median of three seeds, with Adam's loss after six epochs as the dotted target. Read off where each curve first crosses the target: the fewer steps, the faster the optimizer learns here."
budget = 8
window = np.ones(steps_per_epoch) / steps_per_epoch
smooth, test_loss = {}, {}
for name in makers:
    runs = [train(name, best_rate[name], seed, budget) for seed in range(3)]
    smooth[name] = [np.convolve(losses, window, "valid") for losses, _ in runs]
    test_loss[name] = [net.compute_loss(x_test, y_test) for _, net in runs]
after = np.arange(steps_per_epoch, budget * steps_per_epoch + 1)  # steps behind each mean
target = np.median([s[6 * steps_per_epoch - steps_per_epoch] for s in smooth["Adam"]])

plt.figure(figsize=(6, 3.5))
for name, runs in smooth.items():
    plt.plot(after[:len(runs[0])], np.median(runs, axis=0),
             label=f"{name} (lr {best_rate[name]:.0e})")
plt.axhline(target, color="gray", linestyle=":", label="target")
plt.xlabel("step")
plt.ylabel("training cross-entropy (last epoch's mean)")
plt.legend()
plt.title("fractal classifier at the best rates, median of 3 seeds")
plt.show()

reached = {name: [after[np.flatnonzero(s <= target)[0]] if (s <= target).any() else None
                  for s in runs] for name, runs in smooth.items()}
adam_steps = np.median(reached["Adam"])
print(f"target: {target:.4f}; budget {budget * steps_per_epoch} steps")
print("optimizer  rate   steps per seed      median  / Adam")
for name, steps in reached.items():
    shown = " ".join(f"{s:5d}" if s is not None else "    -" for s in steps)
    if None in steps:
        print(f"{name:9} {best_rate[name]:.0e}  {shown}       -       -")
    else:
        med = np.median(steps)
        print(f"{name:9} {best_rate[name]:.0e}  {shown}  {med:6.0f}  {med / adam_steps:6.2f}")

# %%
assert all(s is not None for s in reached["Adam"])  # Adam reaches its own median loss

# %% [markdown]
# These are *training* losses. On the held-out test set, after the 8 epochs:

# %% tags=["nbval-ignore-output"]
for name, losses in test_loss.items():
    print(f"{name:9} test cross-entropy per seed: " + ", ".join(f"{v:.4f}" for v in losses))

# %%
assert all(0.3 < v < 2.0 for losses in test_loss.values() for v in losses)

# %% [markdown]
# ## Try it
#
# Pick an optimizer, a learning rate and $\beta_1$, then press "Train 3 epochs" to train
# the classifier from the same start (this needs a live kernel: run the notebook first).
# Things to try: Adam at 1e-3 against Adan at 3e-3; SGD at 1e-3, then at 5e-2; Adam with
# $\beta_1 = 0.5$ (a short memory of about 2 steps) against the default 0.9 (about 10).

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets


def try_optimizer(name="Adam-mini", lr=1e-3, beta1=0.9):
    net = classifier(0)
    kwargs = {"lr": lr} if name == "SGD" else {"lr": lr, "betas": (beta1, 0.999)}
    if name == "Adan":
        kwargs["betas"] = (beta1, 0.92, 0.99)
    opt = {"SGD": optim.SGD, "Adam": optim.Adam, "Adam-mini": optim.AdamMini,
           "Adan": optim.Adan}[name](net.parameters(), **kwargs)
    history = net.fit(x_train, y_train, opt, epochs=3, batch_size=64, progress=False)
    print(f"{name}, lr {lr:.1e}: losses " + ", ".join(f"{v:.4f}" for v in history["loss"]))


wide = {"style": {"description_width": "18em"}, "layout": {"width": "40em"}}
widgets.interact_manual.options(manual_name="Train 3 epochs")(
    try_optimizer,
    name=widgets.Dropdown(options=list(makers), value="Adam-mini", description="optimizer",
                          **wide),
    lr=widgets.FloatLogSlider(value=1e-3, base=10, min=-4, max=-1, step=0.25,
                              readout_format=".1e", description="learning rate (per step)",
                              **wide),
    beta1=widgets.FloatSlider(value=0.9, min=0.5, max=0.99, step=0.01,
                              description="β₁: memory ≈ 1/(1-β₁) steps", **wide));

# %% [markdown]
# ## What to read in the tables
#
# The losses and step counts above are measurements: float32 rounding changes their last
# digits from device to device, and with three seeds the spread is large. Read them off
# the tables of your run:
# - **Memory** (counted, the same on every device): Adam-mini keeps 0.505 of Adam's state
#   for the classifier (one float per weight plus one per neuron, and Adam's two per bias),
#   Adan four floats per weight, twice Adam.
# - **Adam-mini vs Adam.** With the same rate and betas, compare their losses per seed, their
#   steps to the target and their steps on the toy. Where they are close, one step size per
#   neuron costs little, and it halves the state.
# - **Adan.** At Adam's default rate its $\beta_1 = 0.98$ averages about 50 steps, so expect
#   it to be slow on the classifier there. Look at its best rate in the sweep (its authors
#   recommend rates several times Adam's), at its steps to the target at that rate, and at
#   its *test* loss after 8 epochs: a training loss reached in fewer steps can come with
#   overfitting. One small network and one toy, rates from a coarse grid: a measurement,
#   not the paper's claim confirmed or refuted.
# - **SGD with momentum**: compare it at the default rates (Adam's default 1e-3 is well below
#   its best) and on the toy, where the stiffest block caps its rate.
#
# ## Summary
# - Each rule is one kernel per tensor, exact to its reference implementation, with a
#   non-finite gradient skipping the whole step.
# - Adam-mini's block mean is a work-group reduction: fixed group size, strided loads, a
#   halving loop that runs to the end.
# - Optimizer memory: SGD+momentum 1, Adam 2, Adam-mini about 1, Adan 4 floats per weight.
#
# ## Exercises
# 1. Turn Adam-mini's partition into one block per *tensor* (`block_size=None` on every
#    parameter). What happens to the memory and to the curves?
# 2. Set Adan's $\beta_2 = 0$. Show, with numbers, that it becomes Adam with
#    betas $(\beta_1, \beta_3)$.
# 3. Stop each run of the steps-to-target experiment when it reaches the target, and compare
#    the test losses then. Is Adan still behind?
# 4. Write the SGD update and the Adan update yourself (below).
#
# ### Checked exercises: the SGD and Adan updates
# In the exercise version of this notebook (`make exercises`, or `make assignments` for
# nbgrader) two kernels of your copy of `../kernels/optim.cl` are yours to write: the body of
# `sgd_update` (weight decay, momentum, Nesterov) and the middle of `adan_update` (its three
# moments, the step and the two kinds of weight decay; the comment above the kernel states
# the rule, after the official Adan code: Xie et al., "Adan: Adaptive Nesterov Momentum
# Algorithm for Faster Optimizing Deep Models", IEEE TPAMI 2024, arXiv:2208.06677). Each
# check runs your kernel as `nnlib.optim` launches it, on one weight, an odd size and more
# weights than a work-group holds. Stuck? `exercises.hint("adan_update", 1)`.

# %% nbgrader={"grade": true, "grade_id": "sgd_update", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from nnlib import exercises

verdict = exercises.check_sgd_update("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "adan_update", "locked": true, "points": 2, "schema_version": 3, "solution": false}
verdict = exercises.check_adan_update("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS
