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
# # 03 · CPU vs GPU: why the same kernel is fast or slow
#
# The source article reports one number: its network trained 9.35x faster per epoch with
# OpenCL than without, on a 2-core laptop. This notebook turns that number into something you
# can measure and explain on your own machine:
# 1. the devices present, and the two designs of the dense kernels from notebook 01;
# 2. why the article's design is slow and the blocked one fast: memory access, work-group
#    shape, register blocking;
# 3. time and GFLOP/s against width and batch, next to numpy and PyTorch, in one run;
# 4. the roofline: when a kernel is bound by memory and when by arithmetic;
# 5. threads, launch overhead and one training step kernel by kernel;
# 6. when a GPU wins, and how this course checks its GPU code path without a GPU;
# 7. autotuning, and three compilers on one CPU: explicit vectors against vectorisation
#    across work-items (Intel's CPU runtime, as on a GPU).
#
# Every figure comes from `nnlib.bench` (the same code as the command-line benchmarks, at
# small sizes so the notebook runs in under two minutes). Timings vary from run to run and
# from machine to machine: compare ratios taken in the same run, and read the conclusions
# off the tables printed here, on your machine. (The stored copy of this notebook does not
# compare them: those cells are tagged `nbval-ignore-output`, and each measurement is
# followed by a check of what must hold on any device.)

# %% tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt
import numpy as np

import nnlib
from nnlib import tuning
from nnlib.bench import dense, goals, launch, train_step
from nnlib.bench.all import plot_dense
from nnlib.bench.common import run_child, stored_results
from nnlib.bench.profile_step import step_breakdown
from nnlib.bench.roofline import GPUS, dense_intensity, machine_limits, roof

rng = np.random.default_rng(0)
rt = nnlib.get_runtime()
print(rt)

# %% [markdown]
# ## The devices
#
# Every OpenCL device on this machine. The simulator (Oclgrind) checks kernels for errors; it
# is far too slow to time, so the measurements below use the real devices that compile.

# %% tags=["nbval-ignore-output"]
for d in nnlib.devices():
    print(f"{d['type']:9s} {d['device'][:40]:40s} compute units {d['compute_units']:3d}, "
          f"max work-group {d['max_work_group_size']:5d}, compiles: {d['compiles']}")

# %% [markdown]
# ## Two designs of the same product
#
# The article's forward kernel gives each work-item one output: `y[b, j]` is a dot product of
# row `b` of x with row `j` of W.

# %%
print(nnlib.source("dense", "dense_forward_seed", folder="../kernels"))

# %% [markdown]
# The blocked forward kernel gives each work-item a tile of 6 samples x 4 neurons. It keeps 24
# vector accumulators (`VW` floats wide, the device's preferred width: 8 with AVX2, 16 with
# AVX-512) and, at each step, loads one vector from each of the 6 rows of x and 4 rows of W:
# each loaded value is used 4 or 6 times.

# %%
print(nnlib.source("dense", "gemm_nt", folder="../kernels"))

# %% [markdown]
# Why the difference matters on a CPU:
#
# * **Register blocking.** The article's kernel has one accumulator, so each multiply-add
#   waits for the previous one (several cycles of latency), and each one needs two loads. A
#   tile of 24 independent vector accumulators keeps the FMA units busy and makes 10 loads
#   serve 24 vector multiply-adds. The unrolled loops matter too: if the compiler cannot keep
#   the tile in registers, every accumulation goes through memory.
# * **Memory access.** The article's input-gradient kernel walks down a *column* of W (a stride
#   of `n_in` floats per step): every load touches a new cache line. Its weight-gradient kernel
#   reads x and dz column by column too. The blocked kernels walk along rows only.
# * **Work-group shape.** PoCL runs the work-items of a work-group as a loop and vectorises
#   across neighbouring work-items. In the article's kernels neighbours read *different rows*, so
#   the vector loads become gathers. The blocked kernels put the vectors inside each
#   work-item instead, and order work-items so that neighbours share the large operand (W)
#   while it is in cache.
# * **Local memory** (the classic GPU tiling) does not help on a CPU: its "local memory" is
#   ordinary cache, so copying tiles there is extra work. That is the main difference in
#   strategy between the two kinds of device.
#
# The gradients use a second blocked kernel, `gemm_tn`: a sum over k of outer products (a row
# of dz against a row of x or W), the classic CPU micro-kernel. Its tile reads a strip of
# columns down many rows; when the rows are a power of two apart (a width of 1024), every row
# of the strip lands in the same few cache sets and the strip does not stay in cache. So
# `gemm_tn` may copy a block of the strip into local memory once per work-group (`TN_KB`):
# on a CPU the copy pays for a different reason than on a GPU, and the autotuner below
# decides per device whether it does.
#
# ## Measured: width and batch
#
# `nnlib.bench.dense` times one n -> n tanh layer, forward and forward + backward, with the
# article's kernels ("article" in the table) and the blocked ones, numpy (1 and 2 BLAS threads) and
# PyTorch, in one run, on each device that compiles (GFLOP/s: higher is faster; the other
# devices at width 1024 and batch 64 only, where the designs differ most, and with the blocked
# kernels' default parameters: the autotuner, further down, would spend half a minute per
# device searching; `PYOPENCL_CTX=<device> python -m nnlib.bench.dense` times that device
# tuned). Each size warms up for 0.05 s before its timed turns (`--warm-up`; the benchmark's
# default is 0.2 s): this cell then takes about half a minute once the kernels are compiled
# and tuned. Each turn starts once the threads of the turn before have gone idle (numpy's
# OpenBLAS threads spin for a while after each call), and after such a spin with a longer
# warm-up, so that no run pays for another's threads.

# %% tags=["nbval-ignore-output"]
default = rt.device
real = [d for d in nnlib.runtime.all_devices()
        if not nnlib.runtime.is_simulator(d) and nnlib.runtime.can_compile(d)]
results = {}
for device in real:
    nnlib.use_device(device)
    print(device.name.strip())
    sizes = (["--widths", "64", "256", "1024", "--batches", "1", "16", "64"] if device == default
             else ["--widths", "1024", "--batches", "64"])
    tuning.set_mode(None if device == default else "0")  # "0": default parameters, no search
    try:
        results[device.name.strip()] = dense.main(
            sizes + ["--repeat", "2", "--warm-up", "0.05", "--article-max-width", "1024",
                     "--name", "notebook_dense"])
    finally:
        tuning.set_mode(None)
rt = nnlib.use_device(default)
rows = results[default.name.strip()]

# %%
assert len(rows) == 3 * 3 * 2 and all(r[k] > 0 for r in rows for k in ("article", "blocked", "numpy_2"))

# %% caption="Forward plus backward time against the layer width at batch 64 (left) and throughput against the batch at width 1024 (right), for each kernel, numpy and PyTorch. At small widths every OpenCL kernel sits on the same floor, the round trip to the device; the kernels part ways only where there is work to share."
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for key, style in (("article", "o-"), ("blocked", "s-"), ("numpy_1", "^--"), ("numpy_2", "v--"),
                   ("torch", "d:")):
    pts = [(r["n"], r["batch"] * 2 * r["n"] ** 2 * 3 / r[key] / 1e6) for r in rows
           if r["batch"] == 64 and r["pass"] == "fwd+bwd" and key in r]
    axes[0].plot(*zip(*pts), style, label=key)
    pts = [(r["batch"], r[key]) for r in rows
           if r["n"] == 1024 and r["pass"] == "fwd+bwd" and key in r]
    axes[1].plot(*zip(*pts), style, label=key)
axes[0].set(xscale="log", yscale="log", xlabel="width n", ylabel="ms",
            title="forward + backward, batch 64: time")
axes[1].set(xscale="log", yscale="log", xlabel="batch", ylabel="GFLOP/s",
            title="forward + backward, width 1024")
axes[1].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# How to read the table and the curves, on your machine:
# * each OpenCL pass here ends with a wait for the device (its cost is the "round trip" in
#   the launch table further down): at small widths that fixed cost is all you see, and
#   numpy, which never leaves the host, is hard to beat;
# * at width 1024 and batch 16-64, compare the blocked kernels with numpy and with the
#   article's kernels: how close "blocked" comes to numpy depends on the CPU, on
#   the PoCL build (see its compiler's CPU target in the device list) and on which kernels
#   OpenBLAS picked, so two machines rank them differently; the article's kernels stay far
#   below both;
# * at batch 1 a layer is a matrix-vector product: each weight is used once, so no kernel
#   can beat memory bandwidth (next section).
#
# ## The roofline
#
# A kernel that does F floating-point operations while moving B bytes has an *arithmetic
# intensity* of F/B. It cannot run faster than `min(peak FLOP/s, intensity x bandwidth)`.
# Below we measure the two roofs of this machine (a numpy copy for the bandwidth, numpy's best
# matrix product as a practical compute roof) and place the fast kernel's points on them.

# %% tags=["nbval-ignore-output"]
limits = machine_limits(repeat=3)
for key, value in limits.items():
    print(f"{key:22s} {value:8.1f}")

# %%
assert all(value > 0 for value in limits.values())

# %% caption="The dense forward kernels on this machine's roofline: squares for the fast kernel, faint circles for the article's, one colour per batch. Batch 1 sits on the sloped, memory-bound part; from batch 16 on the roof is flat, and the distance below it is what register blocking wins back."
peak = max(limits["sgemm_1thr_GFLOPs"], limits["sgemm_2thr_GFLOPs"],
           max(r["blocked"] for r in rows))
intensity = np.logspace(-1, 3, 100)
plt.figure(figsize=(6, 4))
plt.plot(intensity, np.minimum(peak, intensity * limits["copy_GBps"]), "k-", label="roof")
for r in rows:
    if r["pass"] == "fwd":
        ai = dense_intensity(r["n"], r["n"], r["batch"])
        plt.plot(ai, r["blocked"], "s", color=f"C{[1, 16, 64].index(r['batch'])}")
        plt.plot(ai, r["article"], "o", color=f"C{[1, 16, 64].index(r['batch'])}", alpha=0.4)
for i, b in enumerate((1, 16, 64)):
    plt.plot([], [], "s", color=f"C{i}", label=f"batch {b} (fast: squares, article: circles)")
plt.xscale("log")
plt.yscale("log")
plt.xlabel("FLOP per byte")
plt.ylabel("GFLOP/s")
plt.title("dense forward on the roofline")
plt.legend(fontsize=8)
plt.show()

# %% [markdown]
# Batch 1 sits at 0.5 FLOP per byte: memory-bound on any device. From batch 16 on the layer
# is compute-bound in principle, and only register blocking can get a kernel near the roof;
# look where the circles (the article's kernel) sit: below the roof at every intensity
# means limited by latency, not by bandwidth. Small layers miss the roof for a third
# reason: launch overhead.
#
# A point *above* the memory roof is no measuring error. The intensity on the x axis assumes
# that every operand comes from main memory once per launch, and the roof assumes the
# bandwidth of a copy far larger than the caches. A small layer's weights (a 256 x 256 layer
# is 256 KiB) stay in the CPU's caches from one timed repetition to the next, and caches
# deliver several times the bandwidth of main memory, so the kernel beats a roof drawn for
# main memory. A roofline with one roof per cache level (L1, L2, L3, memory) places such
# points under the roof of the level that holds the data.
#
# ## Threads
#
# PoCL runs work-groups on as many threads as `POCL_MAX_PTHREAD_COUNT` allows. The variable
# is read when the OpenCL context is created, so each setting runs in its own process. Both
# processes run the kernels with their default parameters (`NNLIB_TUNE=0`), so that the
# thread count is the one thing that changes: the autotuner (further down) would pick other
# tiles for one thread than for two, and it keeps a device's results per number of compute
# units.

# %% tags=["nbval-ignore-output"]
by_threads = {t: run_child("dense", ["--widths", "256", "1024", "--batches", "64",
                                     "--repeat", "3", "--warm-up", "0.05",
                                     "--article-max-width", "0",
                                     "--pocl-threads", str(t), "--name", f"notebook_t{t}"],
                           env={"NNLIB_TUNE": "0"})
              for t in (1, 2)}

# %%
assert all(r["blocked"] > 0 for t in (1, 2) for r in by_threads[t]["rows"])

# %% caption="The speed-up of the fast kernel from one PoCL thread to two, per width and pass, against the dotted ideal of 2. Large products come near 2; small ones do not, having too few work-groups to share."
labels = [f"n {r['n']} {r['pass']}" for r in by_threads[1]["rows"]]
speedup = [b["blocked"] / a["blocked"] for a, b in zip(by_threads[1]["rows"], by_threads[2]["rows"])]
plt.figure(figsize=(6, 3))
plt.bar(labels, speedup)
plt.axhline(2, color="k", ls=":", label="ideal on 2 cores")
plt.ylabel("2 threads / 1 thread")
plt.title("fast kernel, batch 64: PoCL thread speedup")
plt.legend()
plt.show()

# %% [markdown]
# Read the bars against the dotted line. On a machine whose two cores are both free, a
# large product (n 1024) can come close to 2, and a small one (n 256) often cannot, because
# its work is split into too few work-groups, and because the Python thread that enqueues
# the kernels shares the same two cores. On a shared or busy machine bars below 1 are
# common: a launch ends with its slowest work-group, and one that waits for a core another
# process holds delays the whole launch. The tables above tell the two apart: their
# `np 1thr` and `np 2thr` columns are numpy with one BLAS thread and with two, in the same
# run. Where numpy gains from the second thread and the kernel does not, the kernel is the
# limit; where neither gains, the machine is. Look at your bars before you conclude either.
#
# ## Launch overhead and transfers
#
# A kernel launch costs microseconds on the host whatever the kernel does, and waiting for
# the device (`queue.finish()`, or reading a result back) costs far more.

# %% tags=["nbval-ignore-output"]
costs = launch.main(["--count", "100", "--repeat", "7", "--sizes", "64", "1048576"])

# %%
assert costs and all(r["us"] > 0 for r in costs)

# %% [markdown]
# Seven lessons for a training step:
# * never wait for the device inside it: `train_step` returns a loss that is read only when
#   asked, and `to_device` copies host data into a new buffer as it makes it, outside the
#   queue (a copy through the queue runs after every kernel queued before it, and pyopencl
#   waits for it when its event is dropped, so the host would wait for them all); `fit`
#   uploads the training set once and gathers each shuffled batch on the device
#   (`nnlib/batches.py`: one work-item copies a whole row, contiguous memory that a CPU
#   compiler copies with vector loads; one work-item per element ran several times slower;
#   where the compiler runs neighbouring work-items in the lanes of a vector, as Intel's
#   does, a work-group of lanes copies a row, neighbouring columns in neighbouring lanes);
# * Python costs more than the enqueue: pyopencl's `set_arg` fails its way through the kinds
#   of argument before it takes a number (about 7 µs each), so nnlib's `Launcher`
#   (`nnlib/launcher.py`) declares the numbers' types from the `.cl` signature and pyopencl
#   packs them at once; `Runtime.empty` uses pyopencl's fast array constructor (the
#   checked one costs about as much as a launch);
# * fewer launches: the backward pass multiplies by the previous layer's activation
#   derivative inside the input-gradient kernel, computes the bias gradient inside the
#   weight-gradient kernel, skips the first layer's input gradient and writes the gradients
#   instead of zeroing them first; the network lays every parameter end to end in one
#   buffer when it is built (`nnlib.parameter.FlatLayout`), so the optimizer's finiteness
#   check and update are one launch each for all six tensors, and the check also carries the
#   last step's skip flag into the count (steps take two flags in turns), so no launch resets
#   it. A classifier's last layer of a few outputs (3 here) is an **output head**
#   (`kernels/head.cl`, `nnlib.step_fusion.OutputHead`): its forward, each sample's loss, the
#   loss's gradient and its two gradient products, five launches of a few microseconds of
#   arithmetic each, run as one launch of one work-group, with a barrier between the rows'
#   outputs and the column sums that need all of them. One work-group uses one core of a
#   CPU, so it is taken only while a batch's head is small (`HEAD_MAX_WORK` multiply-adds a
#   product). A batch-1 step is 8 launches;
# * replay what does not change: within a fit, and from one fit of a network to the next,
#   every step of one batch size launches the same kernels with the same arguments (the
#   gather kernel refills the same batch arrays, which the network keeps, and activations
#   and gradients keep their buffers), so `train_step` records the launches of
#   its forward and backward passes the second time it sees such a step and from then on
#   enqueues them again, one `set_args` and one enqueue each, without the Python that worked
#   them out (`nnlib/step_replay.py`; `net.replay_steps = False` turns it off). What changes
#   per step, the gather's rows, the loss's offset and the optimizer's flags, is launched as
#   before. The cell after this list times the host's part of a step both ways;
# * record only what you read: a queue made to record kernel times (profiling, notebook 00)
#   costs some drivers time at every launch (compare the table's two preset enqueues: the
#   second is on such a queue), so the default runtime's queue does not record, and the
#   kernel-by-kernel breakdown further down makes a runtime of its own that does;
# * help the compiler vectorize: PoCL runs the work-items of a group as a loop and turns it
#   into SIMD code only when it can prove the loop has no data-dependent exits. The update
#   kernels' `if (skip[1]) return;` defeated that, so each work-item now handles `VW`
#   consecutive elements as one vector (`VW` = the device's preferred width: 8 with AVX2,
#   16 with AVX-512, 1 on a GPU, whose warps are the vectors); `python -m
#   nnlib.bench.profile_step` times the update kernels on your device;
# * beware of subnormal numbers (magnitudes below 1.2e-38): once a weight's gradient stays 0,
#   Adam's moments decay towards them, and many CPUs compute on them far more slowly (a
#   training step on one batch, repeated until its loss reached 0, slowed down markedly when
#   we tried it). nnlib builds every kernel with `-cl-denorms-are-zero`, which allows the
#   compiler to flush them to 0; PoCL's CPU device does. GPUs differ: NVIDIA's compute
#   float32 subnormals at full speed, and flush them only in code built with flush-to-zero
#   (CUDA's `-ftz=true`, which `--use_fast_math` implies).
#
# The host's time per step (enqueueing only: the device runs behind it) and the whole
# step's, with and without replay, for notebook 02's network at batch 64 over device
# batches, as `fit` trains layer by layer:

# %% tags=["nbval-ignore-output"]
from time import perf_counter

from nnlib.batches import DeviceBatches
from nnlib.bench.seed_experiment import build


def step_us(replay: bool, n: int = 1280, batch: int = 64, epochs: int = 4) -> tuple:
    """(host µs, whole µs) per step, medians over the epochs after the first two."""
    model = build(nnlib, rt)
    model.replay_steps = replay
    opt = nnlib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = DeviceBatches(rt, rng.standard_normal((n, 240)).astype(np.float32),
                         model.targets(rng.integers(0, 3, n), n))
    rows, host, whole = rt.empty((n,)), [], []
    for _ in range(2 + epochs):
        data.shuffle(rng.permutation(n))
        start = perf_counter()
        for first in range(0, n, batch):
            model.train_step(*data.batch(first, batch), opt, rows, first)
        host.append(perf_counter() - start)
        rows.get()  # waits for the epoch's last step
        whole.append(perf_counter() - start)
    per_step = 1e6 * batch / n
    return np.median(host[2:]) * per_step, np.median(whole[2:]) * per_step, model


for replay in (False, True):
    host_us, whole_us, model = step_us(replay)
    print(f"replay {'on ' if replay else 'off'}: host {host_us:5.0f} µs a step, whole step "
          f"{whole_us:5.0f} µs ({model._replay.replays} steps replayed)")

# %%
assert model._replay.replays == 6 * 20 - 2  # every step after the first two, seen and recorded

# %% [markdown]
# The host's part shrinks by about as much as the Python it skips; the whole step shrinks
# only where the host was the limit. On a CPU device the kernels run on the same cores as
# the host, and a faster host mostly leaves them more room; on a GPU the host's enqueueing
# is the step when the kernels are short.
#
# ## One training step, kernel by kernel
#
# The MLP 240 -> 512 -> 256 -> 3 (tanh, MSE, Adam) from `nnlib.bench.train_step`, with the
# device time of each kernel from OpenCL profiling events, on a runtime whose queue records
# them (`profiling=True`, notebook 00):

# %% tags=["nbval-ignore-output"] caption="The device time of each kernel of one training step, at a small batch (left) and a large one (right). The matrix kernels grow with the batch while the optimizer's pass over every parameter stays the same: at a small batch it dominates."
timed = nnlib.use_device(rt.device, profiling=True)
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
for ax, batch in zip(axes, (64, 1)):
    net = train_step.nnlib_net(nnlib)
    opt = nnlib.optim.Adam(net.parameters(), lr=1e-3)
    x = rng.standard_normal((batch, 240)).astype(np.float32)
    y = rng.standard_normal((batch, 3)).astype(np.float32)
    table = step_breakdown(net, timed.to_device(x), timed.to_device(y), opt)
    ax.barh([f"{name} x{n}" for name, (n, _) in table.items()],
            [us for _, us in table.values()])
    ax.set(xlabel="device µs", title=f"batch {batch}")
    ax.invert_yaxis()
plt.tight_layout()
plt.show()
rt = nnlib.use_device(rt.device)  # back to the runtime whose queue does not record

# %% [markdown]
# Compare the two panels: the matrix kernels' share shrinks with the batch, while the
# optimizer's pass over all 255,491 parameters (four arrays read and three written every
# step, whatever the batch) stays: a memory-bound floor that dominates at small batches.
# (Device times measured while the host is still enqueueing run slower than alone: on 2
# cores the Python thread and PoCL's threads share the cores.) Now the whole step
# against numpy and PyTorch (tinygrad is left out here: its first step compiles for tens of
# seconds; `python -m nnlib.bench.train_step` runs it):

# %% tags=["nbval-ignore-output"]
steps = train_step.main(["--batches", "64", "1", "--steps", "10", "--repeat", "3",
                         "--no-tinygrad"])

# %%
assert [r["batch"] for r in steps] == [64, 1] and all(r["nnlib"] > 0 for r in steps)

# %% [markdown]
# ## When does a GPU win?
#
# A GPU has thousands of float32 lanes (an H100 SXM: 132 multiprocessors of 128, 16,896
# lanes; a CPU core has 8 or 16 in one AVX2 or AVX-512 vector) and many times a CPU's memory
# bandwidth, but every launch and every transfer crosses PCIe. It wins when there is enough
# work per launch to fill it: wide layers and large batches (high on the roofline's
# intensity axis). At batch 1 with small layers, a CPU, or numpy without OpenCL at all, is
# often faster, which is why the article's 9.35x is a statement about its baseline
# (interpreted MQL5 loops, one sample at a time) more than about OpenCL: `python -m
# nnlib.bench.seed_experiment` repeats its experiment against a numpy baseline.
#
# ### A GPU's roofline, as a model
#
# Without a GPU in the room we can still draw where one would be: a roofline needs only
# two figures, the peak float32 rate and the memory bandwidth, and vendors publish both.
# The lines below are such a model for a few GPUs (`nnlib.bench.roofline.GPUS`, with the
# datasheet each figure comes from), beside the roof measured on this machine above. They
# say what a kernel could reach at best, never what it does reach: what nnlib's kernels did
# reach on one of them, an H100, is among the stored figures further down.

# %% tags=["nbval-ignore-output"] caption="Rooflines from published peaks of a few GPUs (dashed, a model), beside this CPU's measured roof (solid black). The dotted lines mark a 1024-wide dense layer at batch 1, 16 and 64: batch 1 is memory-bound on every device, so a GPU helps it only through its memory bandwidth."
intensity = np.logspace(-1, 3, 100)
plt.figure(figsize=(7, 4.5))
for i, (name, (gflops, gbps, source)) in enumerate(GPUS.items()):
    plt.plot(intensity, roof(intensity, gflops, gbps), "--", color=f"C{i}",
             label=f"{name} (model: {gflops / 1000:.1f} TFLOP/s, {gbps:,} GB/s)")
plt.plot(intensity, roof(intensity, peak, limits["copy_GBps"]), "k-", lw=2,
         label="this machine (measured above)")
for b in (1, 16, 64):
    plt.axvline(dense_intensity(1024, 1024, b), color="grey", ls=":", lw=0.8)
plt.xscale("log")
plt.yscale("log")
plt.xlabel("FLOP per byte (dotted: a 1024-wide dense layer at batch 1, 16, 64)")
plt.ylabel("GFLOP/s")
plt.title("rooflines: published GPU peaks (a model) and this CPU (measured)")
plt.legend(fontsize=7)
plt.show()
for name, (_, _, source) in GPUS.items():
    print(f"{name}: {source}")

# %% [markdown]
# ### The GPU code path, checked without a GPU
#
# The blocked kernels are written for CPUs first but stay portable OpenCL 1.2: on a GPU
# the preferred vector width is 1, so `gemm_nt` keeps its smallest vectors (float4, a tile
# of 24 float4 accumulators), the gradients take the lanes design (see "Three compilers on
# one CPU" below), the optimizer kernels update one element per work-item, and work-groups
# hold 64 work-items (two 32-wide warps). A product of fewer tiles than two per compute
# unit (a layer of few features, summed over thousands of rows) also splits its sum over k
# into slices that run side by side and a second launch adds up
# (`nnlib.layers.dense_params.k_slices`): on an H100's 132 multiprocessors that is most of
# CATCH's gradient products, on two CPU cores only the smallest. Those are other code
# paths than a CPU's, and a path nobody runs is a path that breaks. So nnlib reads every
# limit a kernel depends on from one place (`rt.vector_width`, `rt.max_work_group_size`,
# `rt.work_group_multiple`, `rt.local_mem_size`), and the **GPU profile** makes that place
# report what a typical GPU reports, on any device:
#
# ```sh
# NNLIB_PROFILE=gpu make test     # every unit test and notebook, on the GPU's code paths
# ```
#
# or in Python `nnlib.use_device(profile="gpu")`. This is how this course checks its GPU path
# without a GPU: `make test` runs the unit tests and every notebook under both profiles,
# against the same stored outputs. (It checks the code path, not a GPU's speed or its
# compiler.) The two sets of limits on this machine:

# %% tags=["nbval-ignore-output"]
gpu = nnlib.runtime.Runtime(rt.device, profile="gpu")
print(f"{'':20s} {'this device':>12s} {'GPU profile':>12s}")
for key in ("kind", "vector_width", "max_work_group_size", "work_group_multiple",
            "local_mem_size"):
    print(f"{key:20s} {getattr(rt.limits, key):>12} {getattr(gpu.limits, key):>12}")

# %%
assert gpu.vector_width == 1 and gpu.work_group_multiple == 32
assert gpu.max_work_group_size <= 1024 and gpu.local_mem_size <= 48 * 1024

# %% [markdown]
# A layer built on the GPU profile's runtime takes the GPU's path, and still computes the
# same layer:

# %%
layer = nnlib.Dense(1029, 7, "tanh", seed=1, runtime=gpu)
x = rng.standard_normal((3, 1029)).astype(np.float32)
want = nnlib.reference.dense_forward(x, layer.weight.numpy(), layer.bias.numpy(), "tanh")
print(f"vector width {gpu.vector_width}, work-groups in multiples of {gpu.work_group_multiple}, "
      f"a layer wider than 1024: forward matches numpy: "
      f"{np.allclose(layer.forward(x).get(), want, atol=1e-5)}")

# %% [markdown]
# The profile's limits are the ones an NVIDIA H100 reports through NVIDIA's OpenCL (CUDA
# 13.0, driver 580.159): vector width 1, work-groups of up to 1024 work-items in multiples of
# 32, 48 KiB of local memory. The unit tests also ran on that GPU (2026-11-26), and its
# compiler showed what no profile can: it numbers build errors by the lines of the whole
# program text and ignores `#line` (nnlib maps its `<kernel>:3:41` back to the `.cl` file
# and the line there), it refuses at build a kernel whose local arrays do not fit
# (PoCL builds it, and the launch would fail), and its driver crashed when asked for the
# kernel names of a program that has none (nnlib asks how many there are first). A real
# device checks the compiler and the speed; its figures are stored with the others below.

# %% [markdown]
# ### Figures measured on other machines, and the speed goals
#
# nnlib sets itself speed goals, each a speed-up over a baseline measured in the same run
# (`nnlib.bench.goals.GOALS`, the one table of the targets):

# %%
print(goals.format_targets())

# %% [markdown]
# A reader with a GPU (or another CPU) runs one command, `python -m nnlib.bench.all --store
# --runs 3` (`PYOPENCL_CTX` picks the device), which measures every goal three times over,
# prints the table (each goal's ratio in its median run, the runs' range, its target, met or
# not, and the command that reproduces the row) and writes it to `nnlib/bench/stored/` with
# every figure: the device, its driver, the CPU model and its vector instructions, and the
# date. A ratio close to its target can land on either side of it from one run to the next,
# so read the range as well. Each stored file is drawn here beside the figures measured
# above, labelled with its device, driver and date, and its goals are printed below:

# %% tags=["nbval-ignore-output"] caption="Dense-layer throughput against the batch, from the results stored for other devices beside this machine's. Compare the slopes: a GPU needs a large batch before its many cores pay off."
stored = stored_results("dense")
fig, ax = plt.subplots(figsize=(7, 4))
plot_dense(ax, rows, rt.device.name.strip(), stored)
plt.show()
print(f"{len(stored)} stored file(s) with figures in nnlib/bench/stored/")
for table in stored_results("goals"):
    print("\n" + goals.format_table(table["meta"], table["rows"]))
gpus = sorted({s["meta"]["device"] for s in stored if s["meta"]["type"] == "GPU"})
print("\n" + (f"GPUs measured: {', '.join(gpus)}." if gpus else
              "No GPU was measured: nnlib/bench/stored/ holds no GPU's figures, so every "
              "figure in this notebook comes from a CPU."))

# %% [markdown]
# ## Why the best kernel depends on the device: autotuning
#
# The blocked kernels have knobs: how many rows of X one work-item computes (`NT_I`), how wide
# its vectors are (`VW`), whether it loads them with the `vloadN` builtins or one float at a
# time (`VLOAD`), `fma()` or plain `a * b + c` (`FMA`), and the work-group size. No setting is
# best everywhere: a compiler that inlines `vload8` makes the builtin free, one that does not
# (PoCL 3.0 from PyPI) turns every load into a function call (it calls `max()` too, so there
# the optimizers' check for NaN gradients ORs comparisons instead: `CHECK_MAX` in
# `kernels/optim.cl`); a CPU with 32 vector registers holds a larger tile than one with 16. So instead of constants, `nnlib` measures:
# on first use on a device, each kernel family times a few candidates on a representative
# problem and keeps the fastest (`nnlib/tuning.py`). CLBlast ships a database of such results
# per device; tinygrad's BEAM search measures them on your machine, as here. The results are
# cached per device, driver and number of compute units (a run with fewer PoCL threads
# searches on its own) under `~/.cache/nnlib/tuning/`; `NNLIB_TUNE=0` turns tuning
# off (the defaults, as in the tests), `NNLIB_TUNE=retune` searches again.
#
# Each class of problem has its own search on its own representative problem,
# `TUNE_SHAPE[class]` = (batch, n) for an n -> n layer: batch 1, batches up to 4, larger
# batches, small layers (at most 256 x 256 weights at batches above 4, such as notebook 02's
# at batches of 64), tall ones (a small layer at 256 rows or more, such as CATCH's 1920
# tokens of 32 features) and wide ones. In a small layer a launch costs as much as the
# arithmetic, so a transpose that pays for itself at 1024 -> 1024 may not pay there: the
# classes let the tuner answer differently. Each class's problem lies in the class; some
# classes are also timed on the problems in `TUNE_ALSO[class]` (the tall class on CATCH's
# 320 rows of 192 features, "b64" on 512 -> 512), and a candidate's time is the sum. A
# stored result remembers the problems it was timed on and is timed again if they change.
#
# Here is a small search run live: the forward product on the tuner's main problem for
# batch 64 and up (`TUNE_SHAPE["b64"]`: batch 64, 1024 -> 1024; `measure_one` times one
# problem), with three tile heights and both load styles, everything else at this device's
# defaults.

# %%
from nnlib.layers import dense as dense_kernels

base = dense_kernels.default_params(rt, "forward")
grid = [dict(base, NT_I=rows, VLOAD=vload) for rows in (2, 4, 8) for vload in (1, 0)]
print(f"{len(grid)} candidates: NT_I in (2, 4, 8) x VLOAD in (1, 0)")

# %% tags=["nbval-ignore-output"] caption="Time per launch of the gemm_nt candidates of the autotuning search, one bar per setting of rows per work-item and vector loads. The fastest bar is what the tuner keeps on this device; close candidates may swap places from run to run."
tune_batch, tune_n = dense_kernels.TUNE_SHAPE["b64"]
search_results = tuning.search(grid, lambda p: dense_kernels.measure_one(
    rt, "forward", p, tune_batch, tune_n, "tanh"))
micro = [t * 1e6 for _, t in search_results]
labels = [f"{p['NT_I']} rows\n{'vload' if p['VLOAD'] else 'by hand'}"
          for p, _ in search_results]
plt.bar(range(len(search_results)), micro, tick_label=labels)
plt.ylabel("µs per launch (fastest of several)")
plt.title(f"gemm_nt, batch {tune_batch}, {tune_n} -> {tune_n} on {rt.device.name.strip()}")
plt.show()
best, best_s = min(search_results, key=lambda r: r[1])
print(f"fastest: NT_I={best['NT_I']} VLOAD={best['VLOAD']}, {best_s * 1e6:.0f} µs; slowest "
      f"{max(micro):.0f} µs ({max(micro) / (best_s * 1e6):.1f}x)")

# %% [markdown]
# Whatever the search picks must still compute the right thing: the test suite runs every
# candidate against the numpy reference, and so does the cell below for the winner. Run the
# search again and the order of close candidates may change (the machine is never quiet):
# the tuner times every candidate several times, taking turns, and keeps each one's fastest;
# then it times the few closest to the fastest (`tuning.CONFIRM_WITHIN`) again, side by side
# (`tuning.CONFIRM_ROUNDS` rounds), so that a moment of quiet that fell on one candidate's
# samples cannot decide alone.

# %%
check = nnlib.Dense(37, 21, "tanh", seed=3, runtime=rt)
check.kernels = dense_kernels.DenseKernels(rt, params={"forward": best})
x_check = np.random.default_rng(0).uniform(-1, 1, (7, 37))
got = check.forward(x_check).get()
want = nnlib.reference.dense_forward(x_check, check.weight.numpy().astype(np.float64),
                                     check.bias.numpy().astype(np.float64), "tanh")
print("chosen kernel matches the reference, max |error| < 1e-5:",
      bool(np.abs(got - want).max() < 1e-5))
assert best_s <= max(t for _, t in search_results) and np.isfinite(best_s)

# %% [markdown]
# ## Three compilers on one CPU
#
# A device is hardware *and* a compiler. The same CPU can be driven by several OpenCL
# implementations, and they do not turn a kernel into machine code the same way:
#
# * **Explicit vectors (PoCL, from PyPI or Debian).** PoCL runs a work-group as a loop over
#   its work-items on one core and reports a preferred float width of 8 (AVX2) or 16
#   (AVX-512). It is fast when each work-item does its own vector arithmetic: `float8` tiles
#   loaded along contiguous rows, as in `gemm_nt` above, and few work-items per group.
# * **Implicit vectorisation across work-items (Intel's CPU runtime, and every GPU).**
#   Intel's runtime (`make doctor INTEL=1` adds it; it runs on AMD CPUs too) reports a
#   preferred width of 1: it compiles each work-item as scalar code and runs 8 or 16
#   neighbouring work-items in the lanes of one vector instruction, as a GPU runs a warp of
#   32; vector types in the source are split into scalars first. Such a compiler is fast
#   when neighbouring work-items (consecutive `get_global_id(0)`) read neighbouring
#   addresses: one vector load serves them all, where scattered addresses cost a gather, one
#   load per lane; a value that is the same for all of them is loaded once. It wants many
#   work-items per group (multiples of its vector width, a GPU's warp) and branches that all
#   lanes take the same way.
#
# They also compile at different times. PoCL compiles a kernel when it is first launched
# (again for each work-group size); Intel's runtime compiles every kernel of a program when
# the program is built. The tuner builds `dense.cl` once per candidate, so on Intel's
# runtime each candidate would also pay for the four kernels it does not launch. That is why
# `nnlib` builds each launch with only its own kernel (`dense.cl`'s option `ONLY`).
#
# The article's kernels and the blocked ones show the difference. In the article's input
# and weight gradients neighbouring work-items read neighbouring floats (coalesced, in GPU
# terms); in its forward pass they read different rows of W. The blocked kernels put the
# vectors inside each work-item. Below, each product of a 512 -> 512 layer at batch 64 in
# both designs, with the default parameters (no tuning), on every device that compiles on
# the machine running this notebook (Oclgrind, the simulator, left out). The stored copy
# was run on a machine without a GPU: no GPU was measured for it.

# %% tags=["nbval-ignore-output"]
import warnings

import pyopencl as cl

from nnlib.bench.common import interleaved_s
from nnlib.bench.dense import product_runs
from nnlib.runtime import Runtime, all_devices, can_compile, is_simulator


def design_us(device, x, dy):
    """µs per launch of each product in both designs on ``device``, and whether each
    design's forward pass matches numpy there."""
    runtime, runs, agree = Runtime(device), {}, []
    for variant in ("article", "blocked"):
        layer = nnlib.Dense(x.shape[1], dy.shape[1], "tanh", seed=5, variant=variant,
                            runtime=runtime)
        want = nnlib.reference.dense_forward(x, layer.weight.numpy(), layer.bias.numpy(),
                                             "tanh")
        agree.append(np.allclose(layer.forward(x).get(), want, atol=1e-4))
        for product, (run, _) in product_runs(runtime, layer, x, dy,
                                              layer.weight.numpy()).items():
            runs[f"{product} ({variant})"] = run
    return {k: s * 1e6 for k, s in interleaved_s(runs, repeat=5).items()}, all(agree)


def label(device):
    short = ("PoCL" if "Portable" in device.platform.name
             else device.platform.name.replace("(R)", "").split()[0])
    return f"{short} {'.'.join(device.driver_version.split('.')[:2])}"


compilers = [d for d in all_devices() if not is_simulator(d) and can_compile(d)]
x64, dy64 = (rng.standard_normal((64, 512)).astype(np.float32) for _ in range(2))
tuning.set_mode("0")  # the same kernels (default parameters) on every device, no search
try:
    with warnings.catch_warnings():  # Intel's compiler logs every kernel it vectorises
        warnings.simplefilter("ignore", cl.CompilerWarning)
        by_device = {(label(d), d.preferred_vector_width_float): design_us(d, x64, dy64)
                     for d in compilers}
finally:
    tuning.set_mode(None)
print(f"{'µs per launch':18s}" + "".join(f"{f'{n} (width {w})':>26s}" for n, w in by_device))
for key in next(iter(by_device.values()))[0]:
    print(f"{key:18s}" + "".join(f"{us[key]:26.0f}" for us, _ in by_device.values()))
if len(compilers) == 1:
    print(f"Only one device compiles here ({label(compilers[0])}): `make doctor INTEL=1` "
          "adds Intel's CPU runtime as a second column.")

# %%
assert all(ok and min(us.values()) > 0 for us, ok in by_device.values())

# %% [markdown]
# Read the rows across the columns. Where this was written (2 shared cores of an AMD EPYC,
# PyPI's PoCL 3.0 beside Intel's runtime 2026.2), the article's gradients ran 3 to 6 times
# faster on Intel's runtime than on PoCL: their coalesced reads are what a compiler that
# vectorises across work-items builds its vectors from. The article's forward pass, whose
# neighbouring work-items read different rows, gained nothing there (gathers). The blocked
# kernels stayed the fastest on both compilers, by 4 to 25 times: a tile of accumulators in
# registers pays whoever makes the vectors. What changed is how they must be written:
# Intel's compiler splits the `float4` tiles of `gemm_tn` into scalars, and ran them many
# times faster written with `fma()` than with `a * b + c`, so on a CPU that prefers width 1
# the default is `FMA=1` (the tuner tries both on every device). Better still is a third
# layout for the gradients, the **lanes design** (`TN_LANES=1` in `kernels/dense.cl`), the
# default wherever the compiler vectorises across work-items and on GPUs: neighbouring
# work-items own neighbouring columns of the output, each keeping a few rows x columns of
# scalar accumulators, so a row of B is one contiguous load across the lanes and each value
# of P, the same for every lane, one broadcast. (A lanes forward written like `gemm_nt` lost
# to the tiles: each lane would read its own row of W, a gather.) The forward joins it the
# other way round, as the same product on Y^T = W X^T (`FWD_YT`): W read in place, one
# broadcast value per output, and only the batch-sized X and Y transposed around it; the
# tuner tries it for the large batches on every device and keeps it where it wins, though not
# for small layers at notebook 02's batches of 64, where the two transposes of each layer
# cost its training step more than the product saves, nor for the widest layers (CATCH's
# official flatten heads, 5888 -> 5888), where it ran at half `gemm_nt`'s speed. A third
# route, `FWD_TN`, turns nothing around: `gemm_tn_bias` reads X in place as P, takes W^T
# (W is the small operand: one transpose first) as B, and adds the bias and the activation
# at the end of its tile. It has none of `gemm_nt`'s horizontal sums, which cost the most
# where k, the layer's inputs, is short: on CATCH's token layers (1920 rows, 32 -> 96) it
# took 119 µs where `gemm_nt` took 181 µs (Debian's PoCL on the same 2 EPYC cores,
# 2026-11-26). The tuner tries it for the classes "b64" and "tall" (the tuning section
# above); at notebook 02's batches of 64 the transpose of W costs more than it saves. Nor
# did Intel's compiler build vectors from work-items everywhere: the optimizers' element-wise updates ran
# several times faster with vectors of their own than as scalar work-items, and the fused
# training kernel of the next section runs as one work-item on a CPU, with no neighbours to
# fill the lanes. So on a CPU that prefers width 1, those kernels are built with the widest
# vectors its compiler emits (`rt.limits.explicit_vector_width`). A preferred width is a
# hint, not a promise: measure. The opposite mistake costs as much: a kernel written in
# vectors already, such as the transposes' blocks of 4 x 4 values, ran slowest where Intel's
# compiler still put 8 or 16 of its work-items in the lanes of its vectors and gathered
# each block value by value. `vec_type_hint(float4)` on the kernel says it is vectorised
# already; on the Xeon's 2 cores (2026-12-07) the transposes then ran up to 2.5x faster on
# Intel's runtime and the packing of B into panels up to 5x, and PoCL ran them as before. One
# such kernel, `backward_gate`, is the blocked layer's activation backward: dZ = dY * f'(Y)
# in blocks of 4 x 4 values, with dZ^T written beside dZ where the weight gradient reads it
# so (`DZT`), one launch where there were two.
#
# Registers are the other half of the story. The lanes design keeps 16 accumulators per
# work-item: with 16 lanes a vector (AVX-512, 32 vector registers) they fit; with 8 (AVX2,
# 16 registers) they spill to memory. Intel's build log says how many lanes it used ("was
# successfully vectorized (8)"), and where that is 8 or fewer
# (`rt.limits.few_vector_registers`) the gradients take 6 rows of one 16-float vector
# instead: 12 AVX2 registers, the classic 6 x 16 micro-kernel of CPU matrix libraries. To see
# what a reader with an AVX2 CPU gets, without one, `python -m nnlib.bench.emulate avx2
# dense` runs a benchmark with Intel's runtime (or PyPI's PoCL 3.0, which compiles AVX2 code
# on a Zen 4 already), numpy's OpenBLAS and PyTorch each told to run its AVX2 code. Run so on
# 2 cores of an AMD EPYC (Zen 4) on 2026-11-27, the dense layer above (1024 -> 1024, batch
# 64, forward and backward) went from 0.43x numpy with the lanes design to 0.85x with these
# tiles on Intel's runtime. On 2026-12-02, after more tuning candidates (the weight matrix copied
# into contiguous strips of columns before a product, for one), Intel's runtime and PyPI's PoCL both
# measured 0.95x there, and 1.13-1.28x and 1.04x in plain runs: on that CPU, OpenBLAS's AVX2 code
# ran the layer faster than its AVX-512 code (147-175 against 138-157 GFLOP/s), so the AVX2 baseline
# is the harder one. On 2 cores of an Intel Xeon with AVX-512 and AMX (2026-12-02) it was the other
# way round: numpy ran the layer at 167-206 GFLOP/s with its AVX-512 code and 140-166 with its AVX2
# code, and Intel's runtime measured 1.04-1.12x numpy in plain runs and 0.83-0.88x under the
# emulation; on a quiet machine on 2026-12-06, 1.02-1.12x and 0.86-0.88x. On 2026-12-07 the tuner
# also tried the gradients in tiles of 2 rows of two 16-float vectors (8 AVX2 registers) and took
# them under the emulation: 1.04-1.07x native and 0.88-0.96x emulated over five runs. Timed with
# the gradients written rather than added to earlier ones, as a training step writes them (and
# as the stored files drawn above were measured), 0.99-1.08x and 0.90-0.93x over four runs.
# Later that day the tuner also tried tiles of 8-float vectors that fill the 16 registers
# exactly (12 accumulators and the operands' vectors): 4 rows of 3 vectors for both
# gradients, 3 rows of x for the forward. Under the emulation it took them for the forward
# and the input gradient (143-145 GFLOP/s alone, against 123-125 before), and the dense layer
# measured 0.97x and 0.93x numpy in two stores of three runs each (0.90-0.97x, 0.90-0.95x);
# with `backward_gate` and the vector hints of the transposes (above), 0.95x (0.94-0.98x).

# %% [markdown]
# ## One launch for a whole training step: kernel fusion
#
# At batch 1 the layer-by-layer step above is 8 launches, and each one costs more than
# the arithmetic it starts: every launch wakes the device's threads, and on PoCL each of
# them waits for the last. The source article trains exactly like that, one sample at a
# time. **Kernel fusion** puts the whole step into one kernel: `kernels/fused_mlp.cl` runs
# forward, loss gradient, backward and the optimizer update of every layer in **one
# work-group** that walks the layers with a barrier between them. The weights and the
# optimizer's state stay where they are (global memory, updated in place), the sample's
# activations and gradients live in local memory, and since nothing has to return to the
# host between steps, one launch trains a whole run of samples (an epoch here).
# `nnlib.fused.FusedMLP` takes a `Sequential` of `Dense` layers and its SGD or Adam optimizer
# and trains them in place, with the same results as `Sequential.fit(..., fused=False)`
# (plain `fit` takes this kernel by itself where it qualifies and is faster: notebook 01).
#
# The article's classifier (240 -> 128 -> 64 -> 3, tanh, softmax, cross-entropy, SGD with
# momentum), one sample per step, both ways:

# %% tags=["nbval-ignore-output"]
import time

from nnlib.fused import FusedMLP, NetworkDoesNotFit

x_f, y_f, _, _ = nnlib.data.fractal_dataset()
x_f, y_f = x_f[:200], y_f[:200]


def classifier():
    sizes, acts = (240, 128, 64, 3), ("tanh", "tanh", "softmax")
    net = nnlib.Sequential([nnlib.Dense(a, b, act, seed=i + 1)
                            for i, (a, b, act) in enumerate(zip(sizes, sizes[1:], acts))],
                           loss="cross_entropy")
    return net, nnlib.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)


def epoch_ms(fit, repeat=3):
    """Median ms of fit() over ``repeat`` runs, after one more run (builds the kernels)."""
    fit()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fit()
        times.append(1e3 * (time.perf_counter() - start))
    return float(np.median(times))


layer_net, layer_opt = classifier()
fused_net, fused_opt = classifier()
fused = FusedMLP(fused_net, fused_opt)
layer_ms = epoch_ms(lambda: layer_net.fit(x_f, y_f, layer_opt, epochs=1, batch_size=1,
                                          progress=False, fused=False))
fused_ms = epoch_ms(lambda: fused.fit(x_f, y_f, epochs=1, batch_size=1))
print(f"{len(x_f)} samples, one per step: layer by layer {layer_ms:.1f} ms "
      f"({1e3 * layer_ms / len(x_f):.0f} µs a step), fused {fused_ms:.1f} ms "
      f"({1e3 * fused_ms / len(x_f):.0f} µs a step): {layer_ms / fused_ms:.1f}x")

# %%
# Two fresh copies trained one epoch each way end with the same weights on any device (up to
# float32 rounding: the kernels add in a different order, and per-sample SGD with momentum
# amplifies such differences over further epochs).
pair = [classifier() for _ in range(2)]
pair[0][0].fit(x_f, y_f, pair[0][1], epochs=1, batch_size=1, progress=False, fused=False)
FusedMLP(*pair[1]).fit(x_f, y_f, epochs=1, batch_size=1)
worst = max(float(np.abs(p.numpy() - q.numpy()).max())
            for p, q in zip(pair[0][0].parameters(), pair[1][0].parameters()))
print("fused and layer-by-layer weights agree within 1e-4:", worst < 1e-4)
assert worst < 1e-4 and pair[0][1].steps == pair[1][1].steps == len(x_f)

# %% [markdown]
# Where it stops paying. One work-group runs on one compute unit: one logical CPU of a CPU
# (under PoCL), one of the dozens of multiprocessors of a GPU. On a GPU `FusedMLP` therefore
# splits each step of a batch over the compute units (`fused.groups(batch)` work-groups, each
# with a slice of at least two samples): every work-group runs forward and
# backward for its slice and leaves that slice's gradient, and a second launch sums the
# gradients and updates the weights. Two launches a step instead of 9 (8 and the gather of
# the batch). Inside a GPU's work-group the kernel also reads its weights differently:
# neighbouring work-items must load neighbouring addresses together, so there a team of
# work-items shares each forward dot product, reading a row of weights side by side
# (`FusedMLP(..., team=8)`, the default on a GPU), where a CPU's single work-item walks a
# tile of rows of its own. On a CPU it keeps
# one work-group and a run of steps per launch: a split step (`fit(..., groups=2)`) costs a
# second launch and a sum, and PoCL's other threads must wake up for every short kernel, which
# often takes longer than the kernel (`python -m nnlib.bench.seed_experiment` times both ways
# on your machine). As the batch grows and the work per step outweighs the launches, the two
# paths come closer: compare the ratios below. And each work-group's slice must fit in local
# memory, a few tens of KiB on a GPU: wide layers or large batches simply do not fit
# (`FusedMLP` says so and how large a batch would).

# %% tags=["nbval-ignore-output"]
limit = rt.local_mem_size
too_many = next(b for b in range(1, 10**6) if fused.local_bytes(b) > limit)
fits = too_many - 1
for batch in (1, 8, 64):
    count = 8 * batch if batch > 1 else 64
    layer_b = epoch_ms(lambda: layer_net.fit(x_f[:count], y_f[:count], layer_opt, epochs=1,
                                             batch_size=batch, progress=False, fused=False))
    line = f"batch {batch:3d}: layer by layer {1e3 * layer_b / (count // batch):7.0f} µs a step, "
    if batch > fits:
        print(line + "fused: does not fit in local memory")
        continue
    fused_b = epoch_ms(lambda: fused.fit(x_f[:count], y_f[:count], epochs=1,
                                         batch_size=batch))
    print(line + f"fused {1e3 * fused_b / (count // batch):7.0f} µs a step "
          f"(work-groups: {fused.groups(batch)}): {layer_b / fused_b:5.1f}x")
print(f"local memory {limit // 1024} KiB: the classifier fits up to batch {fits} "
      f"({fused.local_bytes(1)} bytes a sample)")

# %%
# A batch beyond the device's local memory is refused with a clear error on every device.
try:
    fused.fit(np.zeros((too_many, 240), np.float32), np.zeros(too_many, int), epochs=1,
              batch_size=too_many)
    refused = False
except NetworkDoesNotFit:
    refused = True
print("a batch that does not fit is refused:", refused)
assert refused and fused.local_bytes(too_many) > rt.local_mem_size

# %% [markdown]
# GPUs fuse for the same reason, with more hands. A single work-group would leave a GPU
# nearly idle, so fused GPU training kernels give each work-group a slice of the batch (as
# the split steps above) and keep a narrow network's weights in shared memory and registers
# (the "fully fused" MLPs of tiny-cuda-nn, for widths of 64 or 128); optimizers update every
# tensor in one launch (PyTorch's `fused=True` Adam, as nnlib's flat layout does); and a
# fixed sequence of launches is recorded once and replayed with one submission (CUDA
# Graphs), which removes the host's cost but not the kernels' own start-up. What fusion buys
# is the same everywhere: the fewer times the host and the device have to meet per step, the
# more of the step is arithmetic. `python -m nnlib.bench.seed_experiment` compares both nnlib paths with numpy on
# the article's whole data set.

# %% [markdown]
# ## Summary
#
# * The same arithmetic runs many times faster (compare "blocked" with "article" in the table above)
#   when each work-item keeps a tile of results in registers and walks memory along rows:
#   that, not OpenCL itself, is what makes a kernel fast on a CPU.
# * Batch 1 is memory- and launch-bound on every device; large batches are compute-bound.
# * Never wait for the device inside a step, fuse small kernels, and write kernels the
#   compiler can vectorize.
# * Kernels read the device's limits from the runtime, never guess them; `NNLIB_PROFILE=gpu`
#   runs the GPU's code paths on a CPU.
# * A compiler is part of the device: PoCL wants vectors inside each work-item, Intel's CPU
#   runtime (like a GPU) builds them from neighbouring work-items reading neighbouring floats.
#
# ## Exercises
#
# 1. Extend the autotuning search above to rows 1, 6 and 12 and to `VW` 4 and 16. Why does a
#    smaller tile lose, and what limits a larger one?
# 2. Where on the roofline is the article's kernel at batch 64? Is it limited by bandwidth?
# 3. Run `python -m nnlib.bench.dense --pocl-threads 1 2 --widths 64 4096 --batches 64` and
#    explain why the speedup differs between the two widths.
#
# ### Checked exercises: intensity and a blocked kernel
# In the exercise version of this notebook (`make exercises`, or `make assignments` for
# nbgrader) two pieces are yours to write.
#
# **The arithmetic intensity** of a dense forward pass, `intensity(batch, n_in, n_out)`: its
# FLOP per byte when x, W and y each move once between memory and the device (float32, the
# bias neglected), the x axis of the roofline above.

# %% nbgrader={"grade": false, "grade_id": "intensity_code", "locked": false, "schema_version": 3, "solution": true}
from nnlib import exercises


def intensity(batch, n_in, n_out):
    # exercises.hint("intensity", 1) gives a nudge, level 2 the formula
    ### BEGIN SOLUTION
    return 2 * batch * n_in * n_out / (4 * (batch * n_in + n_in * n_out + batch * n_out))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "intensity", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = exercises.check_intensity(intensity)
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **A register-blocked kernel**, `dense_forward_blocked` in your copy of
# `../kernels/blocked.cl`: each work-item computes a 4 x 4 block of outputs (4 samples x 4
# neurons) in registers, so each float4 it loads from x or W serves 4 dot products instead of
# one. The check runs it on awkward sizes, then counts, on the Oclgrind simulator, the floats
# it loads from global memory per output: at most a quarter of what the
# one-work-item-per-output kernel (`dense_forward_seed`) loads, plus one. The count, not a
# timing, is what is graded: it is the same on every run and every device, while a timing
# on a CPU could not tell the two designs apart (PoCL already runs neighbouring work-items
# of the simple kernel as the lanes of one SIMD instruction, and caches hide the repeated
# loads); the measured speeds are in the tables above.

# %% nbgrader={"grade": true, "grade_id": "dense_forward_blocked", "locked": true, "points": 2, "schema_version": 3, "solution": false}
verdict = exercises.check_dense_forward_blocked("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# ## Puzzles: work-groups that share local memory
#
# The blocked kernel above is fast because each value loaded from memory serves several
# outputs. On a GPU the tool for that is **local memory**: a small scratchpad (tens of KiB
# per work-group, `CL_DEVICE_LOCAL_MEM_SIZE`) that the work-items of one work-group share,
# declared as a `local float *` argument. A work-group loads a block of data into it once,
# each work-item reading one element, then every work-item reads what the others loaded.
# Between the writes and the reads stands a **barrier**, `barrier(CLK_LOCAL_MEM_FENCE)`:
# no work-item of the group passes it until all have reached it, so no one reads a slot
# before its owner wrote it (without it the result depends on the order the work-items
# happen to run in: a *data race*). Every work-item of the group must reach the same
# barriers.
#
# With local memory and barriers come the patterns of the puzzles below: a window that
# reads its neighbours' values (a stencil), a **reduction** (a sum or a maximum halved in
# log2(L) steps of a work-group of L items), a **prefix scan**, a **transpose** whose reads
# and writes both walk along rows, a **tiled matrix product**, and **atomics**, which let
# many work-items add to one counter without a race.
#
# What these puzzles grade is the memory traffic, not the speed: each has a **budget**
# (global loads per work-item, local stores, barriers) counted exactly by running your
# kernel once on the Oclgrind simulator with its instruction counter, which also reports
# data races and out-of-bounds accesses. A timing could not tell a kernel that reuses its
# loads from one that does not on a CPU (PoCL runs a work-group's items as loops, and
# caches hide much of the waste); a count can, on any device, the same every run. Your
# copy is `puzzles_local.cl`; `puzzles.budget(name, folder)` prints each budget line.

# %%
from nnlib.exercises import puzzles

puzzles.budget("window", "../puzzles/solutions")

# %% [markdown]
# **Puzzle 6 · window.** A 3-wide moving sum. Each work-item loads one element (and the first two items of a group
# the two before the block, its halo) into local memory, then sums three values from there:
# about one global load per output instead of three.

# %%
print(puzzles.task("window", "../puzzles/solutions"))

# %% caption="Puzzle window: output i reads inputs i-2, i-1 and i, a band three wide. Each input is read by three outputs: the reuse local memory captures."
puzzles.show("window")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_window", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("window", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 7 · barrier.** Each block of L elements reversed through local memory: a work-item reads a value another
# work-item loaded, so a barrier must separate the loads from the reads.

# %%
print(puzzles.task("reverse", "../puzzles/solutions"))

# %% caption="Puzzle reverse: within each block, output i reads the input mirrored across the block. Look for the anti-diagonals, one per work-group."
puzzles.show("reverse")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_reverse", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("reverse", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 8 · reduction (sum).** Each work-group sums its block of L values into one partial sum, halving the active work-
# items each step (L/2, L/4, ..., 1) with a barrier after each.

# %%
print(puzzles.task("sum", "../puzzles/solutions"))

# %% caption="Puzzle sum: each partial sum reads the whole block of its work-group. Look for one wide band per work-group."
puzzles.show("sum")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_sum", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("sum", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 9 · reduction (max).** The same tree with fmax. The padding past the data must not win: what is the identity of
# max?

# %%
print(puzzles.task("max", "../puzzles/solutions"))

# %% caption="Puzzle max: the same access pattern as sum: each work-group's maximum reads its whole block."
puzzles.show("max")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_max", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("max", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 10 · dot product.** Multiply pairs, then reduce: one partial dot product per work-group.

# %%
print(puzzles.task("dot", "../puzzles/solutions"))

# %% caption="Puzzle dot: each partial result reads the same block of both a and b."
puzzles.show("dot")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_dot", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("dot", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 11 · prefix scan.** Output i is the sum of its work-group's inputs up to and including i (Hillis-Steele: log2(L)
# steps, each adding the value d places back, d = 1, 2, 4, ...).

# %%
print(puzzles.task("scan", "../puzzles/solutions"))

# %% caption="Puzzle scan: output i reads every input of its block up to i: a lower triangle per work-group."
puzzles.show("scan")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_scan", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("scan", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 12 · coalesced transpose.** A tile is loaded along rows of a, then written along rows of the output, swapping x and y in
# local memory, so both the reads and the writes are contiguous.

# %%
print(puzzles.task("transpose", "../puzzles/solutions"))

# %% caption="Puzzle transpose: output (r, c) reads a[c, r]. The picture is a permutation: one input per output."
puzzles.show("transpose")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_transpose", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("transpose", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 13 · tiled matrix product.** c = a b with T x T tiles of a and b staged in local memory: each value loaded serves T
# products, so 2 k / T global loads per output instead of 2 k.

# %%
print(puzzles.task("matmul", "../puzzles/solutions"))

# %% caption="Puzzle matmul: output (r, c) reads row r of a and column c of b. Each input is read by a whole row or column of outputs: the reuse tiling captures."
puzzles.show("matmul")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_matmul", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("matmul", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 14 · histogram with atomics.** Many work-items may add to the same bin at once: atomic_inc (or atomic_add) makes each
# addition whole.

# %%
print(puzzles.task("histogram", "../puzzles/solutions"))

# %% caption="Puzzle histogram: bin v (a row) depends on the inputs whose value is v, and on those that would move into v if they changed. Many work-items add to the same bin: hence the atomics."
puzzles.show("histogram")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_histogram", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("histogram", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS
