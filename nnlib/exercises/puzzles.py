"""Kernel puzzles: short kernels a student writes from an empty body, in rising difficulty, from
one work-item per element (map, zip, guard, 2-D indexing, broadcast) to work-groups sharing
local memory (a window, barriers, reductions, a scan, a transpose, a tiled matrix product, a
row softmax), atomics (a histogram) and an FFT butterfly stage.

    from nnlib.exercises import puzzles
    puzzles.check("window", "../kernels")      # your puzzles_local.cl in ../kernels
    puzzles.show("window")                     # who reads and writes what, in the reference
    puzzles.show("window", "../kernels")       # ... and in your kernel
    puzzles.hint("window", 1)

A check compares the student's kernel with :mod:`nnlib.reference.puzzles` on awkward sizes
(1, not a multiple of the work-group size, above the device's largest work-group) and at two
work-group sizes, in the worker process. Puzzles about memory traffic also run once on the
Oclgrind simulator (:mod:`.budget`): that run counts their global and local loads and stores
and barriers against the puzzle's budget, exactly, and reports data races (a missing barrier,
a non-atomic update) and out-of-bounds reads on any device.

The stubs students receive are made from the solutions in the repository's puzzles/ folder,
which no wheel or student edition contains.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..reference import puzzles as ref
from . import budget as counting
from .harness import FILL, Output, new_rng, student_kernel, to_device, wide
from .registry import Exercise, register
from .verdicts import Case, NotYet, Verdict, verdict
from .worker import in_worker

GUARD = 1 << 14  # words after each output that a bounds-checked kernel never touches
LARGEST_GROUP = 256  # the puzzles' work-groups: powers of two up to this, within the kernel's


@dataclass(frozen=True)
class Rule:
    """A budget line: ``value(budget, problem)`` at most (or, ``least``, at least) ``limit``."""

    what: str
    value: Callable
    limit: Callable
    advice: str
    least: bool = False


@dataclass(frozen=True)
class Puzzle:
    name: str
    notebook: str  # "00_devices"
    topic: str  # the student's <folder>/<topic>.cl
    kernel: str
    params: tuple
    what: str  # one line: what the kernel computes
    problems: Callable  # (rng, work-group limit) -> [problem]; a problem is a dict
    launch: Callable  # (runner, problem) -> the output
    reference: Callable  # problem -> the output
    out: str
    hints: tuple  # a nudge, the formula
    example: Callable  # () -> a tiny problem for pictures and the Oclgrind audit
    mistakes: Callable = lambda p: {}  # problem -> {hint: what that mistake outputs}
    hint: str = ""  # said when no known mistake matches
    unwritten: str = ""  # said when some outputs were never written
    budget: tuple = ()  # Rules, counted on the example
    audit: bool = False  # run the example on Oclgrind (races, out-of-bounds reads)
    rows: str = "work-item i writes out[i]"  # the picture's rows
    diagnose: Callable = lambda got, p: None  # a hint from the output's pattern, or None
    tolerance: tuple = (1e-4, 1e-5)  # rtol, atol


PUZZLES: dict[str, Puzzle] = {}


def _puzzle(**kw) -> None:
    PUZZLES[kw["name"]] = Puzzle(**kw)


# ---------------------------------------------------------------- runners

class _Checked:
    """Runs a launch on the default device with NaN-filled, guarded outputs."""

    def __init__(self, launcher, unwritten: str = ""):
        self.launcher, self.unwritten = launcher, unwritten

    def input(self, array):
        array = np.asarray(array)
        return to_device(array, array.dtype).data

    def output(self, shape, dtype=np.float32, initial=None):
        return Output(shape, GUARD, dtype, initial)

    def go(self, grid, local, *args):
        args = [a.array.data if isinstance(a, Output) else a for a in args]
        self.launcher(grid, local, *args).wait()

    def get(self, out: Output, name: str):
        try:
            return out.get(name)
        except NotYet as err:
            if "never written" in str(err) and self.unwritten:
                raise NotYet(f"{err}: {self.unwritten}") from None
            raise


class _Raw(_Checked):
    """As _Checked, but returns the output as it is (NaN where never written) and whether the
    kernel wrote past its end."""

    past_end = False

    def get(self, out: Output, name: str):
        host = out.array.get()
        self.past_end |= bool((host.view(np.uint32)[out.size * (host.itemsize // 4):]
                               != FILL).any())
        return host[:out.size].reshape(out.shape)


class _Counted:
    """Makes a launch's buffers on the counting (Oclgrind) runtime and records its sizes."""

    def __init__(self, launcher, buffers):
        self.launcher, self.buffers, self.sizes = launcher, buffers, None

    def input(self, array):
        return self.buffers.input(array).data

    def output(self, shape, dtype=np.float32, initial=None):
        return self.buffers.output(shape, dtype, initial)

    def go(self, grid, local, *args):
        args = [a.data if hasattr(a, "queue") else a for a in args]
        self.launcher(grid, local, *args)
        self.sizes = (tuple(grid if local is None else map(_round_up, grid, local)), local)

    def get(self, out, name):
        return out.get()


def _round_up(value, multiple):
    return -(-value // multiple) * multiple


def _local(count: int) -> "object":
    import pyopencl as cl
    return cl.LocalMemory(4 * max(1, count))


# ---------------------------------------------------------------- sizes

def _pow2(value: int) -> int:
    return 1 << (max(1, int(value)).bit_length() - 1)


def _groups(limit: int) -> list[int]:
    """1-D work-group sizes: a small one and the largest power of two the kernel allows."""
    big = _pow2(min(limit, LARGEST_GROUP))
    return sorted({min(16, big), big})


def _tiles(limit: int) -> list[int]:
    """Square T x T work-groups: T = 4 and the largest power of two with T^2 allowed."""
    big = _pow2(math.isqrt(min(limit, LARGEST_GROUP)))
    return sorted({min(4, big), big})


def _normal(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _log2(value: int) -> int:
    return int(value).bit_length() - 1


# ---------------------------------------------------------------- notebook 00: one element each

def _exact(r, n: int) -> tuple:
    """A work-group size that divides n (no work-item past the data, several work-groups)."""
    return (math.gcd(n, min(64, _pow2(r.launcher.work_group_size))),)


def _map_launch(r, p):
    out = r.output(p["a"].shape)
    r.go(p["a"].shape, _exact(r, p["a"].size), r.input(p["a"]), out)
    return r.get(out, "out")


_puzzle(
    name="map", notebook="00_devices", topic="puzzles_basics", kernel="puzzle_map",
    params=("a", "out"), what="out[i] = a[i] + 10",
    problems=lambda rng, limit: [{"a": _normal(rng, n)} for n in (1, 40, wide())],
    launch=_map_launch, reference=lambda p: p["a"] + 10, out="out",
    mistakes=lambda p: {"out holds a: add 10 to each value": p["a"],
                        "you multiplied by 10: add it": p["a"] * 10},
    hint="out[i] = a[i] + 10, i = get_global_id(0)",
    unwritten="each work-item writes the element of its global id, get_global_id(0) (the "
              "local id restarts at 0 in every work-group)",
    hints=("There are exactly as many work-items as elements: get_global_id(0) tells a "
           "work-item which one is its own.",
           "i = get_global_id(0); out[i] gets a[i] plus 10."),
    example=lambda: {"a": np.arange(12, dtype=np.float32)})


def _zip_launch(r, p):
    out = r.output(p["a"].shape)
    r.go(p["a"].shape, _exact(r, p["a"].size), r.input(p["a"]), r.input(p["b"]), out)
    return r.get(out, "out")


_puzzle(
    name="zip", notebook="00_devices", topic="puzzles_basics", kernel="puzzle_zip",
    params=("a", "b", "out"), what="out[i] = a[i] + b[i]",
    problems=lambda rng, limit: [{"a": _normal(rng, n), "b": _normal(rng, n)}
                                 for n in (1, 40, wide())],
    launch=_zip_launch, reference=lambda p: p["a"] + p["b"], out="out",
    mistakes=lambda p: {"add b[i], not a[i] twice": 2 * p["a"],
                        "you computed a - b: add instead": p["a"] - p["b"],
                        "out holds b only: add a[i]": p["b"]},
    hint="out[i] = a[i] + b[i]",
    unwritten="each work-item writes the element of its global id, get_global_id(0)",
    hints=("As puzzle_map, with two inputs read at the same index.",
           "i = get_global_id(0); out[i] gets a[i] plus b[i]."),
    example=lambda: {"a": np.arange(12, dtype=np.float32), "b": np.ones(12, np.float32)})


def _guard_launch(r, p):
    out = r.output(p["a"].shape)
    n = p["a"].size
    r.go((n,), (min(64, _pow2(r.launcher.work_group_size)),), r.input(p["a"]), out,
         np.int32(n))
    return r.get(out, "out")


_puzzle(
    name="guard", notebook="00_devices", topic="puzzles_basics", kernel="puzzle_guard",
    params=("a", "out", "n"), what="out[i] = a[i] + 10 with more work-items than elements",
    problems=lambda rng, limit: [{"a": _normal(rng, n)} for n in (1, 37, wide())],
    launch=_guard_launch, reference=lambda p: p["a"] + 10, out="out",
    mistakes=lambda p: {"out holds a: add 10 to each value": p["a"]},
    hint="if (i < n) out[i] = a[i] + 10",
    unwritten="every work-item i < n writes out[i], the last one (i = n - 1) included",
    hints=("The global size is rounded up to whole work-groups: some work-items have no "
           "element and must do nothing.",
           "i = get_global_id(0); only while i < n: out[i] gets a[i] plus 10."),
    example=lambda: {"a": np.arange(10, dtype=np.float32)})


def _grid2d_launch(r, p, *inputs):
    rows, cols = p["shape"]
    out = r.output((rows, cols))
    limit = r.launcher.work_group_size
    local = (8, 4) if limit >= 32 else (_pow2(limit), 1)
    r.go((cols, rows), local, *map(r.input, inputs), out, np.int32(rows), np.int32(cols))
    return r.get(out, "out")


def _shapes():
    """(rows, cols) of the 2-D puzzles' cases."""
    return [(1, 1), (5, 7), (3, 4 * 128 + 5), (wide(), 2)]


_puzzle(
    name="map2d", notebook="00_devices", topic="puzzles_basics", kernel="puzzle_map2d",
    params=("a", "out", "rows", "cols"), what="out[r, c] = a[r, c] + 10 over a 2-D grid",
    problems=lambda rng, limit: [{"shape": s, "a": _normal(rng, *s)} for s in _shapes()],
    launch=lambda r, p: _grid2d_launch(r, p, p["a"]), reference=lambda p: p["a"] + 10,
    out="out", mistakes=lambda p: {
        "out holds a: add 10 to each value": p["a"],
        "element (r, c) is at r * cols + c (you read a[c * rows + r])":
            p["a"].reshape(p["shape"][::-1]).T + 10},
    hint="element (r, c) is at r * cols + c",
    unwritten="get_global_id(0) is the column c, get_global_id(1) the row r, and element "
              "(r, c) is at r * cols + c",
    hints=("Work-item (c, r) owns element (r, c); a row-major matrix stores row r from "
           "r * cols on. Guard both dimensions.",
           "c = get_global_id(0) (the column), r = get_global_id(1) (the row); inside the "
           "matrix (r below rows and c below cols), element r * cols + c of out gets that of a "
           "plus 10."),
    rows="work-item (c, r) writes out[r, c] (rows: elements of out, row-major)",
    example=lambda: {"shape": (3, 4), "a": np.arange(12, dtype=np.float32).reshape(3, 4)})


_puzzle(
    name="broadcast", notebook="00_devices", topic="puzzles_basics", kernel="puzzle_broadcast",
    params=("a", "b", "out", "rows", "cols"),
    what="out[r, c] = a[c] + b[r]: a row plus a column",
    problems=lambda rng, limit: [{"shape": s, "a": _normal(rng, s[1]), "b": _normal(rng, s[0])}
                                 for s in [(6, 6), *_shapes()]],
    launch=lambda r, p: _grid2d_launch(r, p, p["a"], p["b"]),
    reference=lambda p: p["a"][None, :] + p["b"][:, None], out="out",
    mistakes=lambda p: {
        **({"a is indexed by the column c, b by the row r": p["a"][:, None] + p["b"][None, :],
            "b is indexed by the row r: out[r, c] = a[c] + b[r]":
                np.tile(p["a"] + p["b"], (p["shape"][0], 1))}
           if p["shape"][0] == p["shape"][1] else {}),
        "you multiplied: add a[c] and b[r]": p["a"][None, :] * p["b"][:, None]},
    hint="out[r * cols + c] = a[c] + b[r]",
    unwritten="get_global_id(0) is the column c, get_global_id(1) the row r",
    hints=("a is a row (one value per column), b a column (one value per row): numpy's "
           "a[None, :] + b[:, None].",
           "c = get_global_id(0) (the column), r = get_global_id(1) (the row); inside the "
           "output, element r * cols + c of out gets a[c] plus b[r]."),
    rows="work-item (c, r) writes out[r, c] (rows: elements of out, row-major)",
    example=lambda: {"shape": (3, 4), "a": np.arange(4, dtype=np.float32),
                     "b": 10 * np.arange(3, dtype=np.float32)})


# ---------------------------------------------------------------- notebook 03: local memory

def _blocks_launch(r, p, *inputs, out_size, scratch, name="out"):
    """A 1-D launch over n work-items in work-groups of p["group"]: inputs..., out, local
    scratch of ``scratch`` floats, n."""
    n, group = p["a"].size, p["group"]
    out = r.output((out_size,))
    r.go((n,), (group,), *map(r.input, inputs), out, _local(scratch), np.int32(n))
    return r.get(out, name)


def _group_problems(make):
    def problems(rng, limit):
        return [make(rng, n, group) for group in _groups(limit)
                for n in sorted({1, group + 3, 3 * group - 1, wide()})]
    return problems


def _in_blocks(p) -> str:
    return f"n = {p['a'].size}, work-groups of {p['group']}"


def _per_item(field_name):
    return lambda b, p: getattr(b, field_name) / b.work_items


def _per_group(field_name):
    return lambda b, p: getattr(b, field_name) / b.work_groups


_NO_MORE_LOADS = Rule("global loads per work-item", _per_item("global_loads"), lambda p: 1,
                      "load each element of a once, into local memory, and read it there")
_THROUGH_LOCAL = Rule("local loads per element written", lambda b, p: b.local_loads / max(
    1, b.global_stores), lambda p: 1, "the values must pass through local memory", least=True)
_SHARED = Rule("local stores per work-item", _per_item("local_stores"), lambda p: 1,
               "a work-group reduction shares its values through local memory: each work-item "
               "stores its value in scratch", least=True)
_ONE_STORE = Rule("global stores per work-group", _per_group("global_stores"), lambda p: 1,
                  "only one work-item of the group writes its result")


def _tree_barriers(extra):
    return Rule("barriers per work-item", _per_item("barriers"),
                lambda p: extra(_log2(p["group"])),
                "a tree reduction needs log2(L) halving steps, one barrier each (and one "
                "after the loads)")


def _window_diagnose(got, p):
    want = ref.window(p["a"])
    wrong = ~np.isclose(got, want, rtol=1e-4, atol=1e-5)
    starts = (np.arange(p["a"].size) % p["group"]) < 2
    if wrong.any() and not (wrong & ~starts).any():
        return ("only the first two outputs of work-groups are wrong: they need the 2 values "
                "before the block (tile[0] and tile[1], loaded by work-items 0 and 1)")
    return None


_puzzle(
    name="window", notebook="03_cpu_vs_gpu", topic="puzzles_local", kernel="puzzle_window",
    params=("a", "out", "tile", "n"), what="out[i] = a[i-2] + a[i-1] + a[i] through local memory",
    problems=_group_problems(lambda rng, n, group: {"a": _normal(rng, n), "group": group}),
    launch=lambda r, p: _blocks_launch(r, p, p["a"], out_size=p["a"].size,
                                       scratch=p["group"] + 2),
    reference=lambda p: ref.window(p["a"]), out="out",
    mistakes=lambda p: {"sum three values: a[i - 2], a[i - 1] and a[i]":
                        ref.window(p["a"], 2)},
    hint="tile[l + 2] holds a[i], tile[l + 1] a[i - 1], tile[l] a[i - 2]",
    diagnose=_window_diagnose,
    hints=("Work-item l stores a[i] at tile[l + 2]; work-items 0 and 1 also fetch the two values "
           "before the block. After a barrier every work-item reads three neighbours from tile.",
           "tile[l + 2] = i < n ? a[i] : 0; if (l < 2) tile[l] = (i >= 2 && i - 2 < n) ? a[i - 2] "
           ": 0; barrier(CLK_LOCAL_MEM_FENCE); if (i < n) out[i] = tile[l] + tile[l + 1] + "
           "tile[l + 2];"),
    example=lambda: {"a": np.arange(20, dtype=np.float32), "group": 8},
    budget=(Rule("global loads per work-item", _per_item("global_loads"), lambda p: 1.5,
                 "load each value once into tile (plus the 2 before the block) and read the "
                 "three neighbours from there"),),
    audit=True)


def _reverse_diagnose(got, p):
    want = ref.block_reverse(p["a"], p["group"])
    last = (p["a"].size - 1) // p["group"] * p["group"]
    wrong = ~np.isclose(got, want)
    if wrong.any() and not wrong[:last].any() and p["a"].size % p["group"]:
        return ("only the last, shorter block is wrong: it holds len = min(L, n - start) "
                "elements, so work-item l writes tile[len - 1 - l]")
    return None


_puzzle(
    name="reverse", notebook="03_cpu_vs_gpu", topic="puzzles_local", kernel="puzzle_reverse",
    params=("a", "out", "tile", "n"), what="each block of L elements reversed, through local "
    "memory (a barrier between writing and reading it)",
    problems=_group_problems(lambda rng, n, group: {"a": _normal(rng, n), "group": group}),
    launch=lambda r, p: _blocks_launch(r, p, p["a"], out_size=p["a"].size, scratch=p["group"]),
    reference=lambda p: ref.block_reverse(p["a"], p["group"]), out="out",
    mistakes=lambda p: {"out holds a unchanged: write tile[len - 1 - l]": p["a"]},
    hint="out[start + l] = tile[len - 1 - l], len = min(L, n - start)",
    diagnose=_reverse_diagnose,
    hints=("Store your element in tile[l], wait for the whole work-group (a barrier), then read "
           "the mirrored one.",
           "start = get_group_id(0) L; len = min(L, n - start); if (l < len) tile[l] = "
           "a[start + l]; barrier(CLK_LOCAL_MEM_FENCE); if (l < len) out[start + l] = "
           "tile[len - 1 - l];"),
    example=lambda: {"a": np.arange(20, dtype=np.float32), "group": 8},
    budget=(_NO_MORE_LOADS, _THROUGH_LOCAL), audit=True)


def _reduction(name, kernel, what, reduce, identity_hint, mistakes, hints, loads=1):
    inputs = ("a", "b") if loads == 2 else ("a",)

    def make(rng, n, group):
        p = {k: _normal(rng, n) for k in inputs}
        if name == "max" and n > 1:
            p["a"] = -np.abs(p["a"]) - 0.5  # all negative: 0 is no identity of max
        return {**p, "group": group}
    _puzzle(
        name=name, notebook="03_cpu_vs_gpu", topic="puzzles_local", kernel=kernel,
        params=(*inputs, "partial", "scratch", "n"), what=what,
        problems=_group_problems(make),
        launch=lambda r, p: _blocks_launch(r, p, *(p[k] for k in inputs),
                                           out_size=-(-p["a"].size // p["group"]),
                                           scratch=p["group"], name="partial"),
        reference=reduce, tolerance=(1e-4, 1e-4), out="partial", mistakes=mistakes,
        hint=identity_hint,
        hints=hints, rows="work-group g writes partial[g]",
        example=lambda: {**{k: np.arange(20, dtype=np.float32) - 7 for k in inputs},
                         "group": 8},
        budget=(Rule("global loads per work-item", _per_item("global_loads"),
                     lambda p: loads, "each work-item loads its element(s) once"),
                _ONE_STORE, _SHARED, _tree_barriers(lambda steps: steps + 1)),
        audit=True)


def _halves_skipped_last(a, group):
    """What a tree that stops before its last step (s = 1) leaves in scratch[0]: the sum of
    the block's even positions."""
    return np.array([b[::2].sum() for b in (a[s:s + group] for s in range(0, a.size, group))],
                    np.float32)


_reduction(
    "sum", "puzzle_sum", "partial[g] = the sum of work-group g's block",
    lambda p: ref.block_sum(p["a"], p["group"]),
    "partial[g] = sum of a[g L .. g L + L - 1] (elements below n only)",
    lambda p: {"the last halving step (s = 1) is missing: loop while s > 0":
               _halves_skipped_last(p["a"], p["group"]),
               "you took the maximum: add the values": ref.block_max(p["a"], p["group"])},
    ("Each work-item stores its element (0 past n) in scratch; then halve: the lower half adds "
     "the upper half, a barrier after each step.",
     "scratch[l] gets a[i] (0 for i >= n); barrier; for s = L/2, L/4, ... 1: work-items l < s "
     "add scratch[l + s] into scratch[l], then a barrier; work-item 0 writes scratch[0] to "
     "partial[get_group_id(0)]."))


def _padded_blocks(p, fill) -> np.ndarray:
    """a in rows of one work-group each, the last row padded with ``fill``."""
    a, group = p["a"], p["group"]
    padded = np.full(-(-a.size // group) * group, fill, np.float32)
    padded[:a.size] = a
    return padded.reshape(-1, group)


_reduction(
    "max", "puzzle_max", "partial[g] = the largest value of work-group g's block",
    lambda p: ref.block_max(p["a"], p["group"]),
    "partial[g] = max of a[g L .. g L + L - 1] (elements below n only)",
    lambda p: {**({"0 is not the identity of max (the data may all be negative): work-items "
                   "past n hold -INFINITY": _padded_blocks(p, 0).max(1)}
                  if p["a"].size % p["group"] else {}),
               "you summed: take fmax": _padded_blocks(p, -np.inf).sum(1),
               "you took the smallest value: fmax, not fmin": _padded_blocks(p, -np.inf).min(1)},
    ("As puzzle_sum with fmax; a work-item past n must hold a value that never wins.",
     "work-items past n hold -INFINITY; each step keeps the larger of scratch[l] and "
     "scratch[l + s] (fmax) in scratch[l]."))

_reduction(
    "dot", "puzzle_dot", "partial[g] = sum of a[i] b[i] over work-group g's block",
    lambda p: ref.block_dot(p["a"], p["b"], p["group"]),
    "partial[g] = sum of a[i] b[i] over the block",
    lambda p: {"multiply a[i] by b[i] (you added them)":
               ref.block_sum(p["a"] + p["b"], p["group"]),
               "you summed a only: multiply by b[i]": ref.block_sum(p["a"], p["group"])},
    ("Multiply while loading, then reduce the products as in puzzle_sum.",
     "scratch[l] = i < n ? a[i] * b[i] : 0; then the tree of puzzle_sum."),
    loads=2)


_puzzle(
    name="scan", notebook="03_cpu_vs_gpu", topic="puzzles_local", kernel="puzzle_scan",
    params=("a", "out", "scratch", "n"),
    what="out[i] = a[g L] + ... + a[i]: an inclusive prefix sum within each work-group",
    problems=_group_problems(lambda rng, n, group: {"a": _normal(rng, n), "group": group}),
    launch=lambda r, p: _blocks_launch(r, p, p["a"], out_size=p["a"].size, scratch=p["group"]),
    reference=lambda p: ref.block_scan(p["a"], p["group"]), out="out",
    tolerance=(1e-4, 1e-4),
    mistakes=lambda p: {
        "an inclusive scan: out[i] includes a[i] itself (you wrote the exclusive scan)":
            ref.block_scan(p["a"], p["group"]) - p["a"],
        "the scan restarts in every work-group: out[i] sums its own block only, from g L":
            np.cumsum(p["a"], dtype=np.float64).astype(np.float32)},
    hint="out[i] = sum of a[g L .. i]",
    hints=("In step s = 1, 2, 4, ... each work-item adds the value s places to its left; read "
           "it, pass a barrier, then add, then another barrier.",
           "scratch[l] gets a[i] (0 for i >= n); barrier; for s = 1, 2, 4, ... below L: left = "
           "scratch[l - s] (0 for l < s), barrier, add left into scratch[l], barrier; finally "
           "out[i] gets scratch[l] for i < n."),
    example=lambda: {"a": np.arange(20, dtype=np.float32), "group": 8},
    budget=(_NO_MORE_LOADS, _SHARED,
            Rule("barriers per work-item", _per_item("barriers"),
                 lambda p: 2 * _log2(p["group"]) + 1,
                 "log2(L) steps of two barriers each, and one after the loads")),
    audit=True)


def _tile_problems(make, shapes):
    def problems(rng, limit):
        return [make(rng, shape, t) for t in _tiles(limit) for shape in shapes()]
    return problems


def _transpose_launch(r, p):
    rows, cols = p["a"].shape
    t = p["tile"]
    out = r.output((cols, rows))
    r.go((cols, rows), (t, t), r.input(p["a"]), out, _local(t * (t + 1)), np.int32(rows),
         np.int32(cols))
    return r.get(out, "out")


def _tile_untransposed(p):
    """What a transpose that reads tile[y][x] instead of tile[x][y] writes: each T x T block
    lands in the transposed position unflipped (only defined for whole tiles)."""
    a, t = p["a"], p["tile"]
    rows, cols = a.shape
    out = np.empty((cols, rows), a.dtype)
    for r0 in range(0, rows, t):
        for c0 in range(0, cols, t):
            out[c0:c0 + t, r0:r0 + t] = a[r0:r0 + t, c0:c0 + t]
    return out


_puzzle(
    name="transpose", notebook="03_cpu_vs_gpu", topic="puzzles_local", kernel="puzzle_transpose",
    params=("a", "out", "tile", "rows", "cols"),
    what="out = a^T through a local tile: reads and writes both along rows",
    problems=_tile_problems(lambda rng, s, t: {"a": _normal(rng, *s), "tile": t},
                            lambda: [(1, 1), (16, 32), (5, 19), (3, wide())]),
    launch=_transpose_launch, reference=lambda p: p["a"].T.copy(), out="out",
    mistakes=lambda p: ({"read the tile transposed: tile[x][y], not tile[y][x]":
                         _tile_untransposed(p)}
                        if not any(s % p["tile"] for s in p["a"].shape) else {}),
    hint="out[c0 + y, r0 + x] = tile[x][y], (r0, c0) the block's origin in a",
    hints=("Read a T x T block of a into the tile with consecutive work-items on consecutive "
           "columns; after a barrier, write the transposed block the same way.",
           "tile[y (T+1) + x] = a[(r0 + y) cols + c0 + x]; barrier; out[(c0 + y) rows + r0 + x] "
           "= tile[x (T+1) + y], each guarded by the matrix's bounds."),
    rows="work-item (x, y) of its block writes out[c0 + y, r0 + x] (rows: elements of out)",
    example=lambda: {"a": np.arange(30, dtype=np.float32).reshape(5, 6), "tile": 4},
    budget=(_NO_MORE_LOADS, _THROUGH_LOCAL), audit=True)


def _matmul_launch(r, p):
    (m, k), n, t = p["a"].shape, p["b"].shape[1], p["tile"]
    c = r.output((m, n))
    r.go((n, m), (t, t), r.input(p["a"]), r.input(p["b"]), c, _local(t * t), _local(t * t),
         np.int32(m), np.int32(k), np.int32(n))
    return r.get(c, "c")


_puzzle(
    name="matmul", notebook="03_cpu_vs_gpu", topic="puzzles_local", kernel="puzzle_matmul",
    params=("a", "b", "c", "ta", "tb", "m", "k", "n"),
    what="c = a b with T x T tiles of a and b in local memory",
    problems=_tile_problems(
        lambda rng, s, t: {"a": _normal(rng, s[0], s[1]), "b": _normal(rng, s[1], s[2]),
                           "tile": t},
        lambda: [(1, 1, 1), (5, 7, 9), (17, 33, 6), (2, wide(), 3)]),
    launch=_matmul_launch,
    reference=lambda p: (p["a"].astype(np.float64) @ p["b"]).astype(np.float32), out="c",
    tolerance=(1e-3, 1e-4),
    hint="c[r, col] = sum_q a[r, q] b[q, col]; tile entries outside a or b must be 0",
    hints=("Each work-group walks k in blocks of T: stage a T x T tile of a and of b in local "
           "memory, barrier, T products from local memory each, barrier.",
           "for (k0 = 0; k0 < k; k0 += T) { ta[y T + x] = a[row, k0 + x] or 0; tb[y T + x] = "
           "b[k0 + y, col] or 0; barrier; for q < T: acc += ta[y T + q] tb[q T + x]; barrier; }"),
    rows="work-item (x, y) of block (gx, gy) writes c[gy T + y, gx T + x] (rows: elements of c)",
    example=lambda: {"a": np.arange(30, dtype=np.float32).reshape(5, 6) / 10,
                     "b": np.arange(42, dtype=np.float32).reshape(6, 7) / 10, "tile": 4},
    budget=(Rule("global loads per work-item", _per_item("global_loads"),
                 lambda p: 2 * -(-p["a"].shape[1] // p["tile"]),
                 "each work-item loads one element of a and one of b per tile step, "
                 "2 ceil(k / T) in all; the products read the tiles"),),
    audit=True)


def _histogram_launch(r, p):
    values, bins = p["values"], p["bins"]
    counts = r.output((bins,), np.int32, np.zeros(bins, np.int32))
    n = values.size
    r.go((n,), (min(64, _pow2(r.launcher.work_group_size)),), r.input(values), counts,
         np.int32(n), np.int32(bins))
    return r.get(counts, "counts")


def _values(rng, n, bins):
    return {"values": rng.integers(0, bins, n).astype(np.int32), "bins": bins}


_puzzle(
    name="histogram", notebook="03_cpu_vs_gpu", topic="puzzles_local",
    kernel="puzzle_histogram", params=("values", "counts", "n", "bins"),
    what="counts[v] = how many values equal v, with atomic additions",
    problems=lambda rng, limit: [_values(rng, n, bins) for n, bins in
                                 ((1, 3), (1000, 7), (wide(), 5), (37, 64))],
    launch=_histogram_launch, reference=lambda p: ref.histogram(p["values"], p["bins"]),
    out="counts",
    mistakes=lambda p: {
        "counts stay 0: add 1 to counts[values[i]] for each value": np.zeros(p["bins"]),
        "count every value: add 1 atomically, do not set 1": (ref.histogram(
            p["values"], p["bins"]) > 0).astype(np.int32),
        "add 1 per value, not the value itself": ref.histogram(p["values"], p["bins"]) *
        np.arange(p["bins"])},
    hint="for each i < n, add 1 to counts[values[i]] with atomic_inc",
    hints=("Many work-items add to the same bin at the same time: the read-add-write must be "
           "one atomic step.",
           "i = get_global_id(0); for i < n, atomic_inc on the bin counts[values[i]] (one "
           "indivisible read, add 1, write)."),
    rows="bin v of counts (counts[v] depends on the values equal to v)",
    example=lambda: {"values": (np.arange(20, dtype=np.int32) * 7) % 5, "bins": 5},
    audit=True)


# ---------------------------------------------------------------- notebook 05: a butterfly

def _butterfly_launch(r, p):
    src, s = p["src"], p["s"]
    n = src.size
    dst = r.output((n,), np.complex64)
    r.go((n // 2,), (min(64, _pow2(r.launcher.work_group_size)),), r.input(src), dst,
         r.input(ref.twiddles(n)), np.int32(n), np.int32(s))
    return r.get(dst, "dst")


def _butterfly_with(p, twiddle):
    src, s = p["src"].astype(np.complex128), p["s"]
    n = src.size
    j = np.arange(n // 2)
    k = j % s
    i0 = (j // s) * 2 * s + k
    t = twiddle(k, n, s) * src[i0 + s]
    dst = np.empty(n, np.complex128)
    dst[i0], dst[i0 + s] = src[i0] + t, src[i0] - t
    return dst.astype(np.complex64)


def _complex(rng, n):
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)


_puzzle(
    name="butterfly", notebook="05_complex_and_fft", topic="puzzles_fft",
    kernel="puzzle_butterfly", params=("src", "dst", "tw", "n", "s"),
    what="one radix-2 FFT stage: dst[i0], dst[i1] = src[i0] +- w src[i1]",
    problems=lambda rng, limit: [{"src": _complex(rng, n), "s": s} for n, s in
                                 ((2, 1), (16, 1), (16, 4), (64, 32), (4096, 512))],
    launch=_butterfly_launch, reference=lambda p: ref.butterfly_stage(p["src"], p["s"]),
    out="dst",
    mistakes=lambda p: {
        "tw holds exp(-2 pi i m / n): multiply by w as it is (conjugating it gives the inverse "
        "transform's stage)": _butterfly_with(p, lambda k, n, s: np.conj(
            ref.twiddles(n)[k * (n // (2 * s))])),
        "the twiddle index is k * n / (2 * s), not k": _butterfly_with(
            p, lambda k, n, s: ref.twiddles(n)[k]),
        "no twiddle: multiply src[i1] by w = tw[k * n / (2 * s)]": _butterfly_with(
            p, lambda k, n, s: 1.0)},
    hint="k = j mod s, i0 = 2 * s * (j / s) + k, i1 = i0 + s, w = tw[k * n / (2 * s)]",
    hints=("Work-item j owns one butterfly: two inputs s apart, two outputs at the same places.",
           "k = j % s; i0 = (j / s) * 2 * s + k; i1 = i0 + s; w = tw[k * (n / (2 * s))]; t = w "
           "src[i1] (complex product); dst[i0] gets src[i0] + t, dst[i1] gets src[i0] - t."),
    rows="work-item j writes dst[i0] and dst[i1] (rows: elements of dst)",
    example=lambda: {"src": (np.arange(8) + 1j).astype(np.complex64), "s": 2})


# ---------------------------------------------------------------- notebook 06: row softmax

def _softmax_launch(r, p):
    x, group = p["x"], p["group"]
    rows, cols = x.shape
    y = r.output((rows, cols))
    r.go((rows * group,), (group,), r.input(x), y, _local(group), np.int32(rows),
         np.int32(cols))
    return r.get(y, "y")


def _unnormalised(x):
    return np.exp(x.astype(np.float64) - x.max(-1, keepdims=True)).astype(np.float32)


_puzzle(
    name="softmax", notebook="06_attention_primer", topic="puzzles_softmax",
    kernel="puzzle_softmax", params=("x", "y", "scratch", "rows", "cols"),
    what="a softmax over each row, one work-group per row, with work-group max and sum",
    problems=lambda rng, limit: [
        {"x": _normal(rng, rows, cols) * scale, "group": group}
        for group in _groups(limit)
        for rows, cols, scale in ((1, 1, 1), (3, group + 5, 1), (2, wide(), 1), (4, 9, 100))],
    launch=_softmax_launch, reference=lambda p: ref.row_softmax(p["x"]), out="y",
    mistakes=lambda p: {"divide by the row's sum of exp(x - top)": _unnormalised(p["x"])},
    hint="subtract the row's largest value before exp: exp(89) overflows a float",
    hints=("Three passes over the row with a stride of L: the largest value, the sum of "
           "exp(x - top), the outputs; the first two end in tree reductions in scratch.",
           "top = max over c = l, l + L, ... then a max tree; sum of exp(x[c] - top) then a sum "
           "tree; y[c] = exp(x[c] - top) / total. Read scratch[0] and pass a barrier before "
           "scratch is reused."),
    rows="row r's work-group writes y[r, :] (rows: elements of y)",
    example=lambda: {"x": np.arange(27, dtype=np.float32).reshape(3, 9) % 5, "group": 4},
    budget=(Rule("global loads per element", lambda b, p: b.global_loads / p["x"].size,
                 lambda p: 3, "read the row three times in all: for the maximum, the sum, "
                 "the outputs"),
            Rule("global stores per element", lambda b, p: b.global_stores / p["x"].size,
                 lambda p: 1, "write each output once"),
            _SHARED),
    audit=True)


# ---------------------------------------------------------------- checks

def _get(name: str) -> Puzzle:
    if name not in PUZZLES:
        raise KeyError(f"no puzzle named {name!r}; the puzzles: {', '.join(PUZZLES)}")
    return PUZZLES[name]


def _label(p: dict) -> str:
    parts = []
    for key, value in p.items():
        if isinstance(value, np.ndarray):
            parts.append(f"{key}[{', '.join(map(str, value.shape))}]")
        elif key == "group":
            parts.append(f"work-groups of {value}")
        elif key == "tile":
            parts.append(f"{value} x {value} tiles")
        elif key != "shape":
            parts.append(f"{key} = {value}")
    return ", ".join(parts)


def _case(pz: Puzzle, launcher, p: dict) -> Case:
    want = pz.reference(p)

    def run():
        got = pz.launch(_Checked(launcher, pz.unwritten), p)
        said = pz.diagnose(got, p)
        if said:
            raise NotYet(said)
        if not np.isfinite(got).all():  # a mistake that gives infinities, as -INFINITY padding
            for hint, wrong in mistakes.items():
                if np.shape(wrong) == got.shape and np.allclose(got, wrong, *pz.tolerance):
                    raise NotYet(f"{pz.out} holds infinities, as a known mistake does. "
                                 f"Hint: {hint}")
        return got
    mistakes = pz.mistakes(p)
    return Case(_label(p), run, want, pz.out, mistakes, pz.hint)


def audit(pz: Puzzle, folder) -> counting.Budget:
    """The example's run on Oclgrind: counts, races, out-of-bounds accesses."""
    p = pz.example()

    def launch(launcher, buffers):
        runner = _Counted(launcher, buffers)
        pz.launch(runner, p)
        return runner.sizes
    return counting.measure(pz.topic, pz.kernel, folder, launch)


def budget_lines(pz: Puzzle, b: counting.Budget) -> list[tuple[bool, str]]:
    """(within the rule, what was counted against it) for each rule of the puzzle's budget."""
    p, lines = pz.example(), []
    for rule in pz.budget:
        value, limit = rule.value(b, p), rule.limit(p)
        within = value >= limit if rule.least else value <= limit
        bound = "at least" if rule.least else "at most"
        lines.append((within, f"{rule.what}: {value:.3g}, the budget is {bound} {limit:g}"
                              + ("" if within else f": {rule.advice}")))
    return lines


def budget_report(pz: Puzzle, b: counting.Budget) -> list[str]:
    """What breaks the budget, one line per rule broken (empty: within budget)."""
    return [line for within, line in budget_lines(pz, b) if not within]


@in_worker
def measured(folder, name) -> str:
    """What one run of the student's kernel on the puzzle's example counted on Oclgrind,
    against the puzzle's budget."""
    pz = _get(name)
    try:
        student_kernel(folder, pz.topic, pz.kernel, pz.params)
        b = audit(pz, folder)
    except NotYet as err:
        return f"puzzle {name}: not yet. {err}"
    lines = [f"puzzle {name}, counted on Oclgrind ({_label(pz.example())}, {b.work_items} "
             f"work-items in {b.work_groups} work-groups, {b.local_bytes} bytes of local "
             f"memory per work-group):"]
    lines += [f"  {'ok' if within else 'OVER':6}  {line}" for within, line in budget_lines(pz, b)]
    lines += [f"  {counting.race_message(b)}"] if counting.race_message(b) else []
    return "\n".join(lines)


def budget(name: str, folder) -> None:
    """Prints the budget of puzzle ``name`` as your kernel in ``folder`` meets it."""
    print(measured(folder, name))


def _audit_case(pz: Puzzle, folder) -> Case:
    p = pz.example()

    def run():
        b = audit(pz, folder)
        problems = [m for m in [counting.race_message(b)] if m] + budget_report(pz, b)
        if problems:
            raise NotYet("; ".join(problems))
        return np.array(0.0)
    what = "budget and races" if pz.budget else "races"
    return Case(f"{what}, counted on Oclgrind: {_label(p)}", run, np.array(0.0), "budget")


@in_worker
def check_puzzle(folder, name) -> Verdict:
    pz = _get(name)

    def cases():
        launcher = student_kernel(folder, pz.topic, pz.kernel, pz.params)
        rng = new_rng()
        for p in pz.problems(rng, launcher.work_group_size):
            yield _case(pz, launcher, p)
        if pz.audit:
            yield _audit_case(pz, folder)
    return verdict(f"puzzle {name}", f"{pz.kernel} ({pz.what})", cases, *pz.tolerance)


def check(name: str, folder, simulate: bool = False) -> Verdict:
    """Checks puzzle ``name`` in ``<folder>/<topic>.cl`` (the puzzle's file)."""
    _get(name)
    return check_puzzle(folder, name, simulate=simulate)


def task(name: str, folder) -> str:
    """Puzzle ``name``'s kernel as the student receives it: the comment saying what each
    work-item computes and the signature, read from ``<folder>/<topic>.cl``, without a body."""
    import re
    from pathlib import Path
    pz = _get(name)
    path = Path(folder) / f"{pz.topic}.cl"
    if not path.is_file():
        raise FileNotFoundError(f"there is no {path}: pass the folder that holds your "
                                f"{pz.topic}.cl")
    text = path.read_text()
    match = re.search(rf"^kernel void {pz.kernel}\(", text, re.MULTILINE)
    if match is None:
        raise KeyError(f"{path} has no kernel {pz.kernel}")
    lines = text[:match.start()].splitlines()
    comment = []
    while lines and lines[-1].startswith("//"):
        comment.insert(0, lines.pop())
    signature = text[match.start():text.index("{", match.start())].rstrip()
    return "\n".join(comment + [signature])


def hint(name: str, level: int = 1) -> None:
    """Prints a hint: level 1 a nudge, 2 the formula."""
    hints = _get(name).hints
    if not 1 <= level <= len(hints):
        raise ValueError(f"hint levels for {name} are 1 (a nudge) to {len(hints)} (the formula)")
    print(hints[level - 1])


# ---------------------------------------------------------------- who touches what

def touches(run: Callable, p: dict) -> dict:
    """Which inputs each output element depends on, found by changing one input element at a
    time and rerunning ``run(p)`` (``run`` returns the output, NaN where never written):
    {"depends": bool [outputs, inputs], "written": bool [outputs], "inputs": [(name, size)]}."""
    base = np.asarray(run(p))
    flat = base.reshape(-1)
    keys = [k for k, v in p.items() if isinstance(v, np.ndarray)]
    columns = []
    for key in keys:
        for index in range(p[key].size):
            changed = p[key].copy()
            view = changed.reshape(-1)
            if changed.dtype.kind == "i":
                view[index] = (view[index] + 1) % p.get("bins", view[index] + 2)
            else:
                view[index] += 1000
            other = np.asarray(run({**p, key: changed})).reshape(-1)
            columns.append(~((other == flat) | (np.isnan(other) & np.isnan(flat))))
    return {"depends": np.stack(columns, 1) if columns else np.zeros((flat.size, 0), bool),
            "written": ~np.isnan(flat.astype(np.complex128).real) if flat.dtype.kind != "i"
            else np.ones(flat.size, bool),
            "inputs": [(k, p[k].size) for k in keys]}


@in_worker
def kernel_touches(folder, name) -> dict:
    """:func:`touches` of the student's kernel on the puzzle's example, or a Verdict saying
    why it cannot run."""
    pz = _get(name)
    try:
        launcher = student_kernel(folder, pz.topic, pz.kernel, pz.params)
        runner = _Raw(launcher)
        found = touches(lambda p: pz.launch(runner, p), pz.example())
    except NotYet as err:
        return Verdict(f"puzzle {name}", False, f"puzzle {name}: not yet. {err}")
    found["past_end"] = runner.past_end
    return found


def reference_touches(name: str) -> dict:
    pz = _get(name)
    return touches(pz.reference, pz.example())


def show(name: str, folder=None):
    """Draws who reads and writes what in puzzle ``name``: the reference, and with ``folder``
    the student's kernel beside it. Returns the matplotlib figure."""
    from .pictures import draw
    pz = _get(name)
    panels = [("reference", reference_touches(name))]
    if folder is not None:
        found = kernel_touches(folder, name)
        if isinstance(found, Verdict):
            print(found.report)
        else:
            panels.append(("your kernel", found))
    return draw(pz, panels)


for _pz in PUZZLES.values():  # the course's one list of exercises holds the puzzles too
    register(Exercise(f"puzzle_{_pz.name}", _pz.notebook, 1, _pz.hints,
                      functools.partial(check, _pz.name), True, (), puzzle=True))
