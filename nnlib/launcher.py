"""Launcher: the one way nnlib starts a kernel; one handle per kernel and build options.

``rt.launcher(topic, name, options)`` gives the kernel ``name`` of ``kernels/<topic>.cl``
built with ``options``; calling it enqueues the kernel::

    add = rt.launcher("vector", "vector_add")
    add((n,), (64,), a.data, b.data, out.data, np.int32(n))   # global size padded to 64

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

import os

import numpy as np
import pyopencl as cl

from .environment import check_not_forked
from .codes import CODED_ARGUMENTS
from .sizes import round_up


class KernelArgumentError(TypeError):
    """A kernel was called with arguments that do not match its ``.cl`` signature."""


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
    """Enqueue one kernel with its arguments; the global size is padded up to a multiple of
    the local size. Made by ``rt.launcher``, one per runtime, kernel and options."""

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

    def __repr__(self):
        return f"<Launcher {self.signature or self.name}>"

    @property
    def work_group_size(self) -> int:
        """The largest work-group this device (and profile) runs the kernel with."""
        return min(self.runtime.max_work_group_size, self.kernel.get_work_group_info(
            cl.kernel_work_group_info.WORK_GROUP_SIZE, self.runtime.device))

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
        if local_size is not None:
            global_size = tuple(map(round_up, global_size, local_size))
        with self.runtime.lock:
            self.kernel.set_args(*args)
            return cl.enqueue_nd_range_kernel(self.runtime.queue, self.kernel, global_size,
                                              local_size, wait_for=wait_for)
