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
# # 01 · A dense layer as four kernels
#
# A dense (fully connected) layer is the workhorse of neural networks. The source article
# this workbook starts from splits it into four OpenCL kernels: **feed forward**, the
# **output gradient**, the **hidden gradient** and the **weight update**. We derive the maths,
# read each kernel, run it, and check it against a numpy reference and against finite
# differences.
#
# The source article: "Neural networks made easy (part 5): multithreaded computing in OpenCL",
# read in its Chinese translation ("神经网络变得轻松(第五部分)OpenCL中的多线程计算"); the copy
# used records no author, publication or link.

# %% tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt
import numpy as np

import nnlib
from nnlib import reference as ref

rng = np.random.default_rng(0)
rt = nnlib.get_runtime()
print(rt)

# %% [markdown]
# ## The maths
#
# For a batch of inputs $X \in \mathbb{R}^{B \times n_{in}}$, weights
# $W \in \mathbb{R}^{n_{out} \times n_{in}}$ (one row per output neuron, the layout of
# `torch.nn.Linear`) and bias $b \in \mathbb{R}^{n_{out}}$:
#
# $$Z = X W^\top + b, \qquad Y = f(Z).$$
#
# Given the gradient of the loss with respect to the output, $\partial L / \partial Y$, the
# chain rule gives, with $\odot$ the elementwise product:
#
# $$\frac{\partial L}{\partial Z} = \frac{\partial L}{\partial Y} \odot f'(Z), \qquad
# \frac{\partial L}{\partial X} = \frac{\partial L}{\partial Z}\, W, \qquad
# \frac{\partial L}{\partial W} = \Big(\frac{\partial L}{\partial Z}\Big)^{\!\top} X, \qquad
# \frac{\partial L}{\partial b} = \sum_{\text{batch}} \frac{\partial L}{\partial Z}.$$
#
# For the usual activations $f'$ can be written with the output $y$ alone
# (tanh: $1 - y^2$; sigmoid: $y(1-y)$; ReLU: $[y > 0]$), so a layer keeps its output, not $Z$.
# Here is the numpy reference that every kernel is tested against:

# %%
import inspect

print(inspect.getsource(ref.dense_forward))
print(inspect.getsource(ref.dense_backward))

# %% [markdown]
# ## Kernel 1: feed forward
#
# The article's design gives each work-item one output neuron of one sample: it walks the
# weight row and the input row together, four values at a time with `dot` on `float4`
# vectors, adds the bias and applies the activation. The activation functions are shared by
# several kernel files, so they live in `kernels/activation.cl`. Its tanh is a ratio of two
# polynomials, within 4e-7 of the real one: a few multiply-adds inline, where PoCL's built-in
# `tanh` is a library call for every value.

# %%
print(nnlib.source("activation", folder="../kernels").split("// One work-item per element")[0])

# %% [markdown]
# And the dense kernels (`kernels/dense.cl`). The first section is the article's design; the
# second, *blocked* design computes a small tile of outputs per work-item with independent
# accumulators: notebook 03 explains why it is many times faster on the same hardware.

# %%
print(nnlib.source("dense", folder="../kernels"))

# %% [markdown]
# `nnlib.Dense` launches these kernels. Both variants must agree with numpy on awkward sizes:
# batch 1, sizes that are no multiple of any tile or work-group, and a layer wider than the
# device's largest work-group.

# %%
big = rt.max_work_group_size + 4  # printed as "big": the number depends on the device
sizes = [(1, 13, 7), (5, 33, 17), (3, big, 9)]
for variant in ("article", "blocked"):
    for batch, n_in, n_out in sizes:
        layer = nnlib.Dense(n_in, n_out, activation="tanh", seed=1, variant=variant)
        x = rng.standard_normal((batch, n_in)).astype(np.float32)
        y = layer.forward(x).get()
        want = ref.dense_forward(x, layer.weight.numpy(), layer.bias.numpy(), "tanh")
        width = "big" if n_in == big else n_in
        print(f"{variant:4}  batch {batch}  {width:>5} -> {n_out:2}:  "
              f"max |error| < 1e-5: {np.abs(y - want).max() < 1e-5}")

# %% [markdown]
# The errors themselves are float32 rounding: their size depends on the order in which a
# device adds the products (vector width, tile), so they differ from device to device. Here:

# %% tags=["nbval-ignore-output"]
print(f"max |error| of the last layer: {np.abs(y - want).max():.1e}")

# %% [markdown]
# ## Kernels 2 and 3: the output gradient and the hidden gradient
#
# The **output gradient** starts back-propagation. For the mean squared error
# $L = \frac{1}{B\,n_{out}} \sum (y - t)^2$ it is
# $\partial L/\partial Z = \frac{2}{B\,n_{out}}(y - t) \odot f'(y)$; for softmax followed by
# cross-entropy the two derivatives combine into the famous $(p - t)/B$. One work-item per
# output element (`kernels/loss.cl`):

# %%
print(nnlib.source("loss", "output_gradient", folder="../kernels"))

# %% [markdown]
# The **hidden gradient** passes the gradient to the layer below:
# $\partial L / \partial X = (\partial L / \partial Z)\, W$. In the article each work-item
# handles one input neuron and walks down a column of $W$; the blocked kernel lets
# neighbouring work-items read neighbouring weights instead. Then the layer below multiplies
# by its own $f'$ (the `activation_backward` kernel; the blocked design's `backward_gate`
# does the same in blocks of 4 x 4 values and can write the result transposed beside it, for
# a weight-gradient kernel that reads $\partial L / \partial Z$ by columns: notebook 03).
#
# ## Kernel 4: the weight gradient and the update
#
# $\partial L / \partial W$ sums, over the batch, the outer product of the output gradient and
# the input. `backward` *adds* it to `weight.grad` (so gradients of several batches can be
# accumulated), and an optimizer applies the update; the simplest is SGD with momentum,
# $v \leftarrow \mu v + g,\ w \leftarrow w - \eta v$ (`kernels/optim.cl`; notebook 04 adds
# Nesterov momentum, Adam, Adam-mini and Adan, and explains the `skip` flag that protects the
# weights from a NaN gradient). Each work-item updates `VW` consecutive weights held in one
# vector (`floatv`, `VW` = the device's preferred vector width, 16 on a CPU with AVX-512, 1 on
# a GPU); the arithmetic reads as for a single weight, and `load_v`/`store_v` deal with the
# last, partial vector. Notebook 03 explains why the vectors are written out by hand:

# %%
print(nnlib.source("optim", "sgd_update", folder="../kernels"))

# %% [markdown]
# All the backward kernels against numpy, with the same awkward sizes:

# %%
for variant in ("article", "blocked"):
    for batch, n_in, n_out in sizes:
        layer = nnlib.Dense(n_in, n_out, activation="sigmoid", seed=2, variant=variant)
        x = rng.standard_normal((batch, n_in)).astype(np.float32)
        dy = rng.standard_normal((batch, n_out)).astype(np.float32)
        y = layer.forward(x).get()
        dx = layer.backward(dy).get()
        dx_ref, dw_ref, db_ref = ref.dense_backward(x, layer.weight.numpy(), y, dy, "sigmoid")
        ok = all(np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in
                 [(dx, dx_ref), (layer.weight.grad.get(), dw_ref), (layer.bias.grad.get(), db_ref)])
        width = "big" if n_in == big else n_in
        print(f"{variant:4}  batch {batch}  {width:>5} -> {n_out:2}:  dx, dW, db match numpy: {ok}")

# %% [markdown]
# ## Are the formulas right? A finite-difference check
#
# Matching numpy only proves that the kernels compute the formulas above. To check the
# formulas themselves we compare with central differences,
# $\partial L/\partial w \approx \frac{L(w + \epsilon) - L(w - \epsilon)}{2\epsilon}$,
# in float64, for a loss $L = \sum Y \odot R$ with a fixed random $R$ (so
# $\partial L/\partial Y = R$).

# %%
layer = nnlib.Dense(6, 4, activation="tanh", seed=3)
x = rng.standard_normal((2, 6))
r = rng.standard_normal((2, 4))
layer.forward(x)
layer.backward(r)
w, b = layer.weight.numpy().astype(np.float64), layer.bias.numpy().astype(np.float64)


def loss():
    return np.sum(ref.dense_forward(x, w, b, "tanh") * r)


eps = 1e-5
numeric = np.zeros_like(w)
for i in range(w.shape[0]):
    for j in range(w.shape[1]):
        keep = w[i, j]
        w[i, j] = keep + eps
        up = loss()
        w[i, j] = keep - eps
        numeric[i, j] = (up - loss()) / (2 * eps)
        w[i, j] = keep
kernel_grad = layer.weight.grad.get()
print(f"max |kernel - finite difference| < 1e-5: {np.abs(kernel_grad - numeric).max() < 1e-5}")

# %% caption="Each weight gradient from the backward kernel plotted against its finite-difference estimate. Every point lies on the dashed diagonal: the kernel's gradient is the derivative of the loss."
plt.figure(figsize=(4.5, 4))
plt.scatter(numeric.ravel(), kernel_grad.ravel(), s=18)
lim = np.abs(numeric).max() * 1.1
plt.plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
plt.xlabel("finite difference")
plt.ylabel("kernel dL/dW")
plt.title("every weight gradient on the diagonal")
plt.show()

# %% [markdown]
# ## A whole network
#
# `nnlib.Sequential` chains layers, computes the loss on the device and runs the backward
# kernels in reverse order. `train_step` enqueues forward, loss, backward and update without
# waiting for the device; the loss it returns is read only when you ask for it. A tiny
# regression problem, fitted with SGD; `fused=False` makes `fit` run this notebook's kernels
# layer by layer, one `train_step` per mini-batch (what plain `fit` does instead comes after
# the plot):

# %% tags=["nbval-ignore-output"]
x = rng.uniform(-2, 2, (256, 1)).astype(np.float32)
t = (np.sin(2 * x) * 0.5 + 0.5).astype(np.float32)


def regressor():
    return nnlib.Sequential([nnlib.Dense(1, 32, "tanh", seed=4),
                             nnlib.Dense(32, 1, "sigmoid", seed=5)])


net = regressor()
opt = nnlib.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
history = net.fit(x, t, opt, epochs=60, batch_size=32, seed=0, progress=False, fused=False)
print(f"loss: first epoch {history['loss'][0]:.4f}, last epoch {history['loss'][-1]:.4f}")

# %% [markdown]
# The losses' last digits depend on the device's float32 rounding; on any correct device the
# fit ends far below where it started:

# %%
assert history["loss"][-1] < 0.2 * history["loss"][0] and history["loss"][-1] < 0.01

# %% caption="Left: the training loss per epoch, on a log scale; right: the trained network's curve over the noisy data points. The loss falls steadily and the red curve follows the shape of the data, so forward, backward and update work together."
grid = np.linspace(-2, 2, 200, dtype=np.float32)[:, None]
fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.5))
a1.plot(history["loss"])
a1.set(xlabel="epoch", ylabel="MSE", yscale="log", title="training loss")
a2.scatter(x, t, s=6, alpha=0.4, label="data")
a2.plot(grid, net.predict(grid), "r", label="network")
a2.legend()
a2.set_title("fit")
plt.show()

# %% [markdown]
# ### The same fit, plainly called
# Without `fused=False`, `fit` takes the fused kernel of `nnlib.fused` (notebook 03 reads
# it) when the network qualifies (Dense layers only, SGD or Adam over all its parameters, a
# batch that fits in one work-group's local memory) and it is the faster path for that batch
# size on this device: the first time `fit` meets a network shape and batch size on a
# device, it times a few steps each way and remembers the answer with the kernels' tuning
# results. One launch then runs many training steps. The steps are the same, so the losses
# agree up to float32 rounding; `history["path"]` says which path ran. Timed on fresh copies,
# each way three times, taking turns:

# %% tags=["nbval-ignore-output"]
import time


def timed_fit(fused):
    """(seconds, history) of the fit above on a fresh copy of the network."""
    model = regressor()
    sgd = nnlib.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    start = time.perf_counter()
    out = model.fit(x, t, sgd, epochs=60, batch_size=32, seed=0, progress=False, fused=fused)
    return time.perf_counter() - start, out


timed_fit(None)  # the first plain fit chooses its path (and builds the fused kernel)
runs = {False: [], None: []}
for _ in range(3):
    for fused, times in runs.items():
        times.append(timed_fit(fused))
layer_s, plain_s = (min(s for s, _ in runs[fused]) for fused in (False, None))
plain = runs[None][0][1]
print(f"plain fit took the {plain['path']} path: {1e3 * plain_s:.0f} ms, layer by layer "
      f"{1e3 * layer_s:.0f} ms ({layer_s / plain_s:.1f}x); largest loss difference "
      f"{np.abs(np.subtract(plain['loss'], history['loss'])).max():.1e}")

# %% [markdown]
# ## Summary
# - A dense layer is one forward product and three backward products; the activation
#   derivative is written with the layer's output.
# - Each kernel is tested against `nnlib.reference` on awkward sizes, and its maths against
#   finite differences.
# - `Sequential.train_step` strings the kernels together without synchronising the host;
#   `fit(..., fused=False)` trains with it, plain `fit` takes the fused kernel where that is
#   faster.
#
# ## Exercises
# 1. Derive the output gradient of softmax + cross-entropy and check that it is $(p - t)/B$.
# 2. Copy `dense.cl` into a folder of your own (as in notebook 00), remove the bias from
#    `dense_forward_seed` there (`float sum = 0.0f;`) and run
#    `exercises.check_dense_forward("my_kernels")`. What does it say, and which of the
#    comparisons above would have caught it?
# 3. Why does `dense_backward_weight` *add* to `dw` instead of overwriting it? What would go
#    wrong in `fit` if it overwrote?
#
# ### Checked exercises: write the kernels yourself
# In the exercise version of this notebook (`make exercises`, or `make assignments` for
# nbgrader), five pieces are missing from your copies of the kernels in `../kernels/`: the
# bodies of `dense_forward_seed`, `dense_backward_input_seed` and `dense_backward_weight_seed`
# (`dense.cl`: the forward pass and the two backward products), the cases of `activate_grad`
# (`activation.cl`) and the body of `output_gradient` (`loss.cl`). Write each one and run its
# check: it launches your kernel on awkward sizes (batch 1, odd sizes, a size above the
# device's largest work-group), compares with `nnlib.reference` and names the likely mistake.
# Stuck? `exercises.hint("dense_backward_weight", 1)` gives a nudge, level 2 the formula.

# %% nbgrader={"grade": true, "grade_id": "dense_forward", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from nnlib import exercises

verdict = exercises.check_dense_forward("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "activation_grad", "locked": true, "points": 2, "schema_version": 3, "solution": false}
verdict = exercises.check_activation_grad("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "output_gradient", "locked": true, "points": 2, "schema_version": 3, "solution": false}
verdict = exercises.check_output_gradient("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "dense_backward_input", "locked": true, "points": 2, "schema_version": 3, "solution": false}
verdict = exercises.check_dense_backward_input("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "dense_backward_weight", "locked": true, "points": 2, "schema_version": 3, "solution": false}
verdict = exercises.check_dense_backward_weight("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS
