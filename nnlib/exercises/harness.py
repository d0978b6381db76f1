"""What kernel checks share: the student's kernel loaded with clear messages, device inputs,
outputs filled with a marked NaN and followed by a guard area (so "never written", "wrote
NaN/inf" and "wrote past the end" are told apart), launches padded to whole work-groups, and
the student's Python functions called with their errors reported."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from ..launcher import Launcher
from ..runtime import KernelBuildError, get_runtime
from ..sizes import round_up
from .verdicts import NotYet

FILL = np.uint32(0x7FC5A5A5)  # a quiet NaN whose payload no arithmetic produces


def student_kernel(folder, topic: str, name: str, params: tuple, options: tuple = ()) -> Launcher:
    """``name`` from the student's ``<folder>/<topic>.cl``, with clear messages for a missing
    file, a build error, a missing kernel or a different number of parameters."""
    path = Path(folder).resolve() / f"{topic}.cl"
    if not path.is_file():
        raise NotYet(f"there is no {path}; pass the folder that holds your {topic}.cl "
                     f"(`make exercises` writes it to build/exercises/kernels/)")
    rt = get_runtime()
    try:
        program = rt.program(topic, options, folder=path.parent)
    except KernelBuildError as err:
        too_much = _TOO_MUCH_LOCAL.search(str(err))
        if too_much:  # NVIDIA refuses at build what PoCL refuses at launch
            raise NotYet(too_much_local(too_much.group(1), int(too_much.group(2), 16),
                                        rt.device.local_mem_size)) from None
        raise NotYet(f"{topic}.cl does not build. The compiler says:\n" + build_errors(str(err)))
    if name not in program.get_info(cl.program_info.KERNEL_NAMES).split(";"):
        raise NotYet(f"{path} has no kernel named {name}")
    launcher = rt.launcher(topic, name, options, folder=path.parent)
    count = launcher.kernel.num_args
    if count != len(params):
        raise NotYet(f"{name} takes {count} parameters; the check passes "
                     f"{len(params)}: ({', '.join(params)}). Keep the exercise's signature.")
    local = launcher.kernel.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE,
                                                rt.device)
    if local > rt.device.local_mem_size:
        raise NotYet(too_much_local(name, local, rt.device.local_mem_size))
    return launcher


# NVIDIA's build log for a kernel whose local arrays exceed the device's local memory
_TOO_MUCH_LOCAL = re.compile(r"Entry function '(\w+)' uses too much shared data "
                             r"\((0x[0-9a-fA-F]+) bytes")


def too_much_local(name: str, asked: int, has: int) -> str:
    return (f"{name} asks for {asked} bytes of local memory; this device has {has} per "
            "work-group: make its local arrays smaller")


def build_errors(log: str) -> str:
    """The build log's error lines (file:line:column: message), else the whole log."""
    lines = [line.strip() for line in log.splitlines() if "error" in line.lower()
             and ".cl:" in line]
    return "\n".join(f"    {line}" for line in (lines or log.splitlines()))


def to_device(array, dtype=np.float32) -> cla.Array:
    return cla.to_device(get_runtime().queue, np.ascontiguousarray(array, dtype=dtype))


class Output:
    """A device output of ``shape`` filled with the marked NaN ``FILL``, followed by ``guard``
    more of it that a kernel with a correct bounds check never touches."""

    def __init__(self, shape, guard: int, dtype=np.float32, initial=None):
        self.shape, self.dtype, self.size = shape, np.dtype(dtype), int(np.prod(shape))
        words = self.dtype.itemsize // 4
        raw = np.full((self.size + guard) * words, FILL, np.uint32)
        host = raw.view(self.dtype)
        if initial is not None:
            host[:self.size] = np.ravel(initial)
        self.array = to_device(host, self.dtype)

    def get(self, name: str) -> np.ndarray:
        host = self.array.get()
        words = host.view(np.uint32).reshape(host.size, -1) == FILL
        if not words[self.size:].all():
            raise NotYet(f"the kernel wrote past the end of {name}: work-items beyond the "
                         f"data (the global size is rounded up) must do nothing")
        unwritten = words[:self.size].all(-1).reshape(self.shape)
        if unwritten.all():
            raise NotYet(f"nothing was written to {name} (it still holds the NaN the check put "
                         f"there; a kernel that adds to it with += keeps that NaN)")
        if unwritten.any():
            first = tuple(int(i) for i in np.argwhere(unwritten)[0])
            raise NotYet(f"{unwritten.sum()} of {unwritten.size} values of {name} were never "
                         f"written, the first at {name}{list(first)}")
        return host[:self.size].reshape(self.shape)


def launch(kernel, grid: tuple, *args) -> None:
    """Run ``kernel`` over ``grid``, the global size rounded up to whole work-groups of at
    most 64 per dimension, as nnlib's layers may launch it."""
    wanted = {1: (64,), 2: (16, 4), 3: (1, 1, 64)}[len(grid)]
    local, room = [], kernel.work_group_size
    for size, most in zip(wanted, kernel.max_work_item_sizes):
        local.append(max(1, min(size, most, room)))
        room //= local[-1]
    kernel(grid, tuple(local), *args).wait()


def guard(grid: tuple) -> int:
    """More elements than the padded work-items of ``launch`` can reach past the data."""
    return int(np.prod([round_up(g, 64) for g in grid]))


def wide() -> int:
    """A size above the device's largest work-group."""
    return get_runtime().max_work_group_size + 3


def new_rng():
    return np.random.default_rng(7)


# A case label: logits large enough that exp overflows in float32 unless shifted.
LARGE_LOGITS = ", large logits (exp overflows unless the row's largest logit is subtracted first)"


def complex_normal(rng, shape) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def expect_function(fn, name: str, params: tuple) -> None:
    if not callable(fn):
        raise NotYet(f"pass your function {name} itself, not a {type(fn).__name__}")
    try:
        inspect.signature(fn).bind(*params)
    except TypeError:
        raise NotYet(f"{name} must take ({', '.join(params)}); yours takes "
                     f"{inspect.signature(fn)}") from None


def call_student(fn, *args):
    name = getattr(fn, "__name__", "your function")
    try:
        return fn(*args)
    except SystemExit:
        raise NotYet(f"{name} called sys.exit (or exit): return the value instead") from None
    except ImportError as err:
        top = (err.name or "").split(".")[0]
        if not (top in sys.modules and sys.modules[top] is None):  # not a blocked shortcut
            raise NotYet(f"{name} raised {type(err).__name__}: {err}") from None
        raise NotYet(f"Your function uses {err.name}, which this exercise leaves out: the "
                     f"point is to compute it yourself, with numpy.") from None
    except Exception as err:  # the student's code: report it, never a traceback
        raise NotYet(f"{name} raised {type(err).__name__}: {err}") from None


