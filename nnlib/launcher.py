"""Launcher: the one way nnlib starts a kernel; one handle per kernel and build options.

``rt.launcher(topic, name, options)`` gives the kernel ``name`` of ``kernels/<topic>.cl``
built with ``options``; calling it with the global size, the local size and the arguments
enqueues the kernel::

    add = rt.launcher("vector", "vector_add")
    add((n,), None, a.data, b.data, out.data, np.int32(n))

One work-group rule holds for every launch: a work-group never exceeds the runtime's
``Limits`` (``max_work_group_size``, ``max_work_item_sizes``; ``NNLIB_MAX_WORK_GROUP`` caps
both) nor the kernel's own CL_KERNEL_WORK_GROUP_SIZE (together: ``launcher.work_group_size``).
A local size asked for above them is a :class:`WorkGroupError` naming the kernel and the
limit. Without one (``None``), :func:`choose_local` picks it: a power-of-two multiple of
``Limits.work_group_multiple``, large enough that the work spreads over about
GROUPS_PER_UNIT work-groups per compute unit, within the limits; each dimension is padded
to a power of two (a power-of-two multiple for dimension 0). Either way the global size
is rounded up to whole work-groups, so every kernel returns early for (or skips) the
work-items past its data.

Arguments go by position in the order of the ``.cl`` signature, or by name
(``add((n,), None, a=..., b=..., out=..., n=np.int32(n))``). With ``NNLIB_CHECK_ARGS=1``
(on in the tests) every call is compared with the signature read from the ``.cl`` file
(:mod:`nnlib.signatures`): a missing or extra argument, a buffer where a number belongs, or
a number of the wrong numpy type raises :class:`KernelArgumentError` naming the kernel, the
argument and the file. Always, whatever that setting: an argument that carries a code
(``act``, ``cact``, ``loss``: :data:`nnlib.codes.CODED_ARGUMENTS`) must be one of its
table's codes, so a kernel's switch never meets a code it has no case for.

Setting a number with pyopencl's ``set_arg`` is slow: it tries each kind of argument in turn
(buffer, local memory, sampler...) and fails its way to a number. Told the scalar types,
pyopencl packs them at once: a launcher declares them from the ``.cl`` signature
(``set_scalar_arg_dtypes``) and then sets every argument on every call, which then costs
about as much as the enqueue itself (``python -m nnlib.bench.launch`` measures both).
Setting and enqueueing happen under the runtime's lock, so a launcher shared by two threads
never enqueues another call's arguments.

Taught in notebooks/00_devices, notebooks/03_cpu_vs_gpu.
"""

from __future__ import annotations

import math
import os
import threading

import numpy as np
import pyopencl as cl

from .codes import CODED_ARGUMENTS
from .environment import check_not_forked
from .sizes import ceil_div, round_up

# Work-groups per compute unit a launch without a local size is spread over: enough that a
# unit which finishes early takes another, few enough that the cost of starting a group
# (a task on a CPU) stays small next to its work.
GROUPS_PER_UNIT = 4


class KernelArgumentError(TypeError):
    """A kernel was called with arguments that do not match its ``.cl`` signature."""


class WorkGroupError(ValueError):
    """A launch asked for a work-group its kernel may not run with on this runtime."""


def choose_local(global_size: tuple, limit: int, item_sizes: tuple, multiple: int,
                 units: int) -> tuple:
    """The local size of a launch of ``global_size`` work-items that names none: a
    power-of-two multiple of ``multiple`` work-items, the smallest that leaves at most
    GROUPS_PER_UNIT work-groups per compute unit (``units``), at most ``limit``. Dimension 0
    takes what covers its work-items, rounded up to a power-of-two multiple of ``multiple``;
    each next dimension what is left, rounded up to a power of two; each at most its
    ``item_sizes`` entry. Powers of two keep the shapes few: PoCL compiles a kernel again
    for each work-group shape it runs with."""
    multiple = max(1, min(multiple, limit))
    per_group = ceil_div(math.prod(global_size), GROUPS_PER_UNIT * units * multiple)
    size = min(limit, _pow2_multiple(per_group, multiple))
    local = []
    for d, (items, most) in enumerate(zip(global_size, item_sizes)):
        step = multiple if d == 0 else 1
        local.append(max(1, min(_pow2_multiple(ceil_div(items, step), step), size, most)))
        size //= local[-1]
    return tuple(local)


def _pow2_multiple(count: int, step: int) -> int:
    """``step`` times the smallest power of two >= ``count``."""
    return step << max(0, (count - 1).bit_length())


def checking() -> bool:
    """Whether launchers made now check every call (``NNLIB_CHECK_ARGS=1``)."""
    return os.environ.get("NNLIB_CHECK_ARGS", "").strip() not in ("", "0")


def check_args(signature, args: tuple) -> None:
    """Raise :class:`KernelArgumentError` unless ``args`` fit ``signature``."""
    where = f"kernel {signature.name} ({signature.file})"
    if len(args) != len(signature.args):
        raise KernelArgumentError(
            f"{where} takes {len(signature.args)} arguments, got {len(args)}: {signature}")
    for i, (arg, want) in enumerate(zip(args, signature.args)):
        what = f"{where}: argument {i} {want.name!r} ({want.ctype})"
        if want.kind == "global":
            if not (arg is None or isinstance(arg, cl.MemoryObjectHolder)):
                raise KernelArgumentError(f"{what} is a buffer (pass array.data), got "
                                          f"{type(arg).__name__}")
        elif want.kind == "local":
            if not isinstance(arg, cl.LocalMemory):
                raise KernelArgumentError(f"{what} is local memory (pass "
                                          f"cl.LocalMemory(bytes)), got {type(arg).__name__}")
        elif isinstance(arg, (cl.MemoryObjectHolder, cl.LocalMemory)):
            raise KernelArgumentError(f"{what} is a number, got a buffer")
        elif want.dtype is not None and (not isinstance(arg, np.generic)
                                         or arg.dtype != want.dtype):
            got = arg.dtype if isinstance(arg, np.generic) else type(arg).__name__
            raise KernelArgumentError(f"{what} needs np.{want.dtype}, got {got} {arg!r}")


class Launcher:
    """Enqueue one kernel with its arguments, in work-groups within the runtime's limits (the
    module's rule); the global size is padded up to a multiple of the local size. Made by
    ``rt.launcher``, one per runtime, kernel and options."""

    def __init__(self, runtime, topic: str, name: str, options: tuple = (), folder=None):
        self.runtime, self.name = runtime, name
        program = runtime.program(topic, options, folder)
        try:
            self.kernel = cl.Kernel(program, name)
        except cl.Error:
            raise KeyError(f"{runtime.kernel_file(topic, folder)} has no kernel "
                           f"{name!r}") from None
        self.signature = runtime.signatures(topic, folder).get(name)
        self.check = checking() and self.signature is not None
        # (position, name, {code: name}) of each argument that carries a code
        self._coded = tuple((i, a.name, {c: n for n, c in CODED_ARGUMENTS[a.name].items()})
                            for i, a in enumerate(self.signature.args)
                            if a.kind == "scalar" and a.name in CODED_ARGUMENTS) \
            if self.signature is not None else ()
        if self.signature is not None and len(self.signature.args) == self.kernel.num_args:
            self.kernel.set_scalar_arg_dtypes([a.dtype if a.kind == "scalar" else None
                                               for a in self.signature.args])
        self.where = f"kernel {name} ({runtime.kernel_file(topic, folder)})"
        limits = runtime.limits
        self.own_work_group_size = self.kernel.get_work_group_info(
            cl.kernel_work_group_info.WORK_GROUP_SIZE, runtime.device)
        # The largest work-group this runtime runs the kernel with, all dimensions together,
        # and along each dimension.
        self.work_group_size = min(limits.max_work_group_size, self.own_work_group_size)
        self.max_work_item_sizes = tuple(min(n, self.work_group_size)
                                         for n in limits.max_work_item_sizes)
        # Work-groups of this kernel should be multiples of this many work-items.
        self.work_group_multiple = min(limits.work_group_multiple, self.work_group_size)
        self._chosen: dict = {}  # global size -> the local size choose_local gives it
        self._allowed: set = set()  # (dimensions, local size) checked against the limits
        self._grids: dict = {}  # (global size, local size asked) -> (padded global, local)

    def __repr__(self):
        return f"<Launcher {self.signature or self.name}>"

    def local_size(self, global_size: tuple, local_size: tuple | None = None) -> tuple:
        """The local size a launch of ``global_size`` runs with: ``local_size`` once checked
        against the limits (:class:`WorkGroupError` if it exceeds them), or without one the
        choice of :func:`choose_local`."""
        if local_size is None:
            key = tuple(global_size)
            if key not in self._chosen:
                limits = self.runtime.limits
                self._chosen[key] = choose_local(key, self.work_group_size,
                                                 self.max_work_item_sizes,
                                                 self.work_group_multiple,
                                                 limits.compute_units)
            return self._chosen[key]
        key = (len(global_size), tuple(local_size))
        if key not in self._allowed:
            self._check_local(*key)
            self._allowed.add(key)
        return key[1]

    def _check_local(self, dims: int, local_size: tuple) -> None:
        """Raise :class:`WorkGroupError` unless ``local_size`` fits a launch of ``dims``
        dimensions of this kernel."""
        if len(local_size) != dims or not all(
                isinstance(n, (int, np.integer)) and n >= 1 for n in local_size):
            raise WorkGroupError(f"{self.where}: the local size must be {dims} whole "
                                 f"numbers >= 1 (one per dimension of the global size), or "
                                 f"None to let nnlib choose; got {local_size}")
        items = math.prod(local_size)
        if items > self.work_group_size:
            raise WorkGroupError(
                f"{self.where}: a work-group of {local_size} is {items} work-items; at most "
                f"{self.work_group_size} are allowed (Limits.max_work_group_size "
                f"{self.runtime.max_work_group_size}, the kernel's CL_KERNEL_WORK_GROUP_SIZE "
                f"{self.own_work_group_size}); pass None to let nnlib choose")
        for d, (n, most) in enumerate(zip(local_size, self.max_work_item_sizes)):
            if n > most:
                raise WorkGroupError(
                    f"{self.where}: a work-group of {local_size} has {n} work-items along "
                    f"dimension {d}; at most {most} are allowed there "
                    f"(Limits.max_work_item_sizes {self.runtime.limits.max_work_item_sizes})")

    def _bind(self, args: tuple, named: dict) -> tuple:
        """Positional ``args`` followed by the ``named`` ones, in the signature's order."""
        if self.signature is None:
            raise KernelArgumentError(f"kernel {self.name}: arguments by name need a "
                                      f"signature nnlib can read; pass them by position")
        names = [a.name for a in self.signature.args]
        unknown = sorted(set(named) - set(names))
        twice = sorted(set(named) & set(names[:len(args)]))
        if unknown or twice:
            raise KernelArgumentError(
                f"kernel {self.name} ({self.signature.file}): "
                + (f"no argument {unknown}; " if unknown else "")
                + (f"{twice} given by position and by name; " if twice else "")
                + f"signature {self.signature}")
        missing = [n for n in names[len(args):] if n not in named]
        if missing:
            raise KernelArgumentError(f"kernel {self.name} ({self.signature.file}): missing "
                                      f"{missing}; signature {self.signature}")
        return (*args, *(named[n] for n in names[len(args):]))

    def __call__(self, global_size, local_size, *args, wait_for=None, **named) -> cl.Event:
        if named:
            args = self._bind(args, named)
        if self.check:
            check_args(self.signature, args)
        check_not_forked()  # a forked child's OpenCL call would hang
        for i, name, codes in self._coded:
            if i < len(args) and args[i] not in codes:
                raise KernelArgumentError(
                    f"kernel {self.name} ({self.signature.file}): argument {i} {name!r} is "
                    f"{args[i]}, not a code of {codes} (nnlib/codes.py)")
        if 0 in global_size:  # nothing to compute (an empty array)
            return cl.enqueue_marker(self.runtime.queue, wait_for=wait_for)
        grid = self._grid(global_size, local_size)
        with self.runtime.lock:
            self.kernel.set_args(*args)
            event = cl.enqueue_nd_range_kernel(self.runtime.queue, self.kernel, *grid,
                                               wait_for=wait_for)
        if self.runtime.recordings:  # training steps being recorded (nnlib.step_replay)
            recording = self.runtime.recordings.get(threading.get_ident())
            if recording is not None:
                recording.add(self.kernel, *grid, args, waits=bool(wait_for))
        return event

    def _grid(self, global_size, local_size) -> tuple:
        """(global size padded to whole work-groups, local size) of a launch, worked out
        once per pair of sizes a call site uses."""
        key = (tuple(global_size), None if local_size is None else tuple(local_size))
        grid = self._grids.get(key)
        if grid is None:
            local = self.local_size(*key)
            grid = self._grids[key] = (tuple(map(round_up, key[0], local)), local)
        return grid
