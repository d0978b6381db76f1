"""The OpenCL runtime: choose a device, build programs from ``kernels/``, time kernels.

One :class:`Runtime` holds a context, a profiling queue and the programs built for it.
``get_runtime()`` returns the default one, created on first use (never at import):
``use_device(spec)`` replaces it. Device choice, in order: the argument, ``PYOPENCL_CTX``,
a GPU, the CPU. The Oclgrind simulator is only used when asked for by name.

Kernels and layers read a device's limits from the runtime (``rt.vector_width``,
``rt.max_work_group_size``, ``rt.work_group_multiple``, ``rt.local_mem_size``), never from
the device itself: the profile ``NNLIB_PROFILE=gpu`` makes the runtime report what a typical
GPU reports, so the code paths a GPU takes run, and are tested, on a CPU.

Taught in notebooks/00_devices.
"""

from __future__ import annotations

import math
import os
import re
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pyopencl.tools  # noqa: F401  (cl.tools.MemoryPool)

from . import _fast_array, signatures
from .codes import build_defines
from .launcher import Launcher
from .tuning import preferred_device

POCL_HINT = (
    "No OpenCL platform was found. Install one: `pip install \"pyopencl[pocl]\"` "
    "(a CPU device from PyPI, no system package needed), or `conda install -c conda-forge "
    "pocl`, or your GPU vendor's OpenCL driver."
)


class NoPlatformError(RuntimeError):
    """No OpenCL platform (ICD) is installed."""


class DeviceNotFoundError(LookupError):
    """The requested OpenCL device does not exist on this machine."""


class KernelBuildError(RuntimeError):
    """An OpenCL program failed to build; the message carries the device's build log."""


def kernel_dir() -> Path:
    """The folder holding the ``.cl`` files: inside the installed package, else the repo's."""
    packaged = resources.files("nnlib").joinpath("kernels")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "kernels"


_REQUIRES = re.compile(r"^//\s*requires:\s*(\w+)\.cl\s*$", re.MULTILINE)
_INCLUDE = re.compile(r'^#include "(\w+)\.h"\s*$', re.MULTILINE)


def _kernel_file(topic: str, folder=None, suffix: str = ".cl") -> Path:
    """``<folder>/<topic>.cl`` if ``folder`` holds it, else ``kernels/<topic>.cl`` (or
    ``.h``)."""
    if folder is not None and (Path(folder) / f"{topic}{suffix}").is_file():
        return Path(folder) / f"{topic}{suffix}"
    path = kernel_dir() / f"{topic}{suffix}"
    if not path.is_file():
        known = sorted(p.stem for p in kernel_dir().glob("*.cl"))
        raise FileNotFoundError(f"no kernel file {topic}{suffix}; known topics: {known}")
    return path


def _shown(path: Path) -> str:
    """How messages name a kernel file: ``kernels/x.cl`` for the workbook's own."""
    return f"kernels/{path.name}" if path.parent == kernel_dir() else str(path)


# The exercise markers of kernels/*.cl (tools/make_exercises.py): not part of what is shown.
_EXERCISE_MARKERS = re.compile(r"^[ \t]*//\s*(###\s*)?(BEGIN SOLUTION|END SOLUTION|HINT:|STUB:)"
                               r".*\n", re.MULTILINE)


def source(topic: str, kernel: str | None = None, folder=None) -> str:
    """The text of ``kernels/<topic>.cl`` (what a notebook prints to show a kernel), or only
    the kernel function ``kernel`` with the comment lines just above it, without exercise
    markers. ``folder``: read ``<folder>/<topic>.cl`` if it exists (a student's copy)."""
    text = _EXERCISE_MARKERS.sub("", _kernel_file(topic, folder).read_text())
    if kernel is None:
        return text
    match = re.search(rf"^kernel void {kernel}\(", text, re.MULTILINE)
    if match is None:
        raise KeyError(f"{topic}.cl has no kernel {kernel!r}")
    lines = text[:match.start()].splitlines()
    while lines and lines[-1].startswith("//"):
        lines.pop()
    start = len("\n".join(lines)) + (1 if lines else 0)
    depth, end = 0, text.index("{", match.start())
    for end in range(end, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            break
    return text[start:end + 1]


def program_source(topic: str, folder=None) -> str:
    """``<topic>.cl`` preceded by the files it names in ``// requires: x.cl`` lines.

    Files are looked up in ``folder`` first (e.g. a student's exercise kernels), then in
    ``kernels/``. Each part starts with a ``#line`` directive naming its file, so compiler
    messages point at the real file and line. A line ``#include "x.h"`` is replaced by the
    text of ``x.h``, looked up the same way (no compiler include path to set up).
    """
    parts, seen = [], []

    def include(path, text):
        def header(match):
            inner = _kernel_file(match.group(1), folder, ".h")
            line = text.count("\n", 0, match.start()) + 2
            return (f'#line 1 "{_shown(inner)}"\n{inner.read_text()}\n'
                    f'#line {line} "{_shown(path)}"')
        return _INCLUDE.sub(header, text)

    def add(name):
        if name in seen:
            return
        seen.append(name)
        path = _kernel_file(name, folder)
        text = path.read_text()
        for dep in _REQUIRES.findall(text):
            add(dep)
        parts.append(f'#line 1 "{_shown(path)}"\n{include(path, text)}')

    add(topic)
    return "\n".join(parts)


def platforms() -> list[cl.Platform]:
    try:
        found = cl.get_platforms()
    except (cl.LogicError, cl.RuntimeError) as err:
        raise NoPlatformError(f"{POCL_HINT} ({err})") from None
    if not found:
        raise NoPlatformError(POCL_HINT)
    return found


def is_simulator(device: cl.Device) -> bool:
    return "oclgrind" in device.platform.name.lower()


def _kind(device: cl.Device) -> str:
    if device.type & cl.device_type.GPU:
        return "GPU"
    if device.type & cl.device_type.CPU:
        return "CPU"
    return "accelerator"


def all_devices() -> list[cl.Device]:
    return [d for p in platforms() for d in p.get_devices()]


def devices() -> list[dict]:
    """Every OpenCL device on this machine with the limits a kernel author needs."""
    return [
        {
            "platform": d.platform.name,
            "device": d.name.strip(),
            "type": "simulator" if is_simulator(d) else _kind(d),
            "compute_units": d.max_compute_units,
            "max_work_group_size": d.max_work_group_size,
            "local_mem_kib": d.local_mem_size // 1024,
            "global_mem_mib": d.global_mem_size // 2**20,
            "opencl": d.version,
            "compiles": can_compile(d),
        }
        for d in all_devices()
    ]


def _matches(obj, key: str, index: int) -> bool:
    key = key.strip()
    return key == str(index) or key.lower() in obj.name.lower()


_usable_cache: dict = {}

# Subnormal floats are flushed to zero, as GPUs do by default: on a CPU, arithmetic on them
# can be many times slower, and a long training run makes them (Adam's moments of weights
# whose gradient stays 0 decay geometrically). Measured: a batch-1 Adam step of the MLP in
# nnlib.bench.train_step goes from 0.35 to 0.20 ms once its loss has reached 0.
# Every build also gets the shared codes (activations, losses) as -D options (nnlib/codes.py).
BUILD_OPTIONS = ("-cl-denorms-are-zero", *build_defines())


def can_compile(device: cl.Device) -> bool:
    """Whether ``device`` builds the smallest kernel file (``vector.cl``). PoCL 3.0 from PyPI
    (LLVM 14) fails on CPUs newer than LLVM 14 knows ("unknown target CPU 'generic'"), e.g.
    AMD Zen 5."""
    key = (device.platform.name, device.platform.version, device.name)
    if key not in _usable_cache:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", cl.CompilerWarning)
                cl.Program(cl.Context([device]), program_source("vector")).build()
            _usable_cache[key] = True
        except cl.Error:
            _usable_cache[key] = False
    return _usable_cache[key]


NO_COMPILER_HINT = (
    "No OpenCL device on this machine can compile kernels. PoCL 3.0 from PyPI (LLVM 14) "
    "does not know CPUs newer than 2022 (its build log says \"unknown target CPU "
    "'generic'\"). Install a newer PoCL beside it: `sudo apt-get install pocl-opencl-icd` "
    "(Debian/Ubuntu), or `conda install -c conda-forge pocl`; `make doctor` checks again."
)


def find_device(spec=None) -> cl.Device:
    """Resolve ``spec`` to a device.

    ``spec`` may be a ``pyopencl.Device``; a ``"platform:device"`` string in the
    ``PYOPENCL_CTX`` style (indices or case-insensitive name parts, e.g. ``"portable:0"``);
    a single name part matched against platform and device names (``"pocl"``,
    ``"oclgrind"``, ``"nvidia"``); or ``"gpu"`` / ``"cpu"``. ``None`` means
    ``PYOPENCL_CTX`` if set, else the first GPU, else the first CPU (never Oclgrind); among
    several that compile, the one ``make doctor`` measured fastest.
    """
    if isinstance(spec, cl.Device):
        return spec
    found = all_devices()
    if spec is None:
        env = os.environ.get("PYOPENCL_CTX", "").strip()
        if env:
            return find_device(env)
        real = [d for d in found if not is_simulator(d)]
        if not real:
            raise DeviceNotFoundError("only a simulator is installed; ask for it by name")
        rank = {"GPU": 0, "CPU": 1}
        pref = preferred_device() or {}
        wanted = (pref.get("platform"), pref.get("device"))

        def order(d):  # GPUs first; within a kind, the one `make doctor` measured fastest
            return rank.get(_kind(d), 2), (d.platform.version.strip(), d.name.strip()) != wanted

        for d in sorted(real, key=order):
            if can_compile(d):
                return d
        raise DeviceNotFoundError(NO_COMPILER_HINT)
    if not isinstance(spec, str):
        raise TypeError(f"device spec must be a str or pyopencl.Device, not {type(spec)}")
    text = spec.strip()
    if text.lower() in ("gpu", "cpu"):
        hits = [d for d in found if _kind(d) == text.upper() and not is_simulator(d)]
    elif ":" in text:
        pkey, dkey = text.split(":", 1)
        hits = [
            d
            for pi, p in enumerate(platforms())
            if _matches(p, pkey, pi)
            for di, d in enumerate(p.get_devices())
            if not dkey.strip() or _matches(d, dkey, di)
        ]
    else:
        hits = [
            d
            for pi, p in enumerate(platforms())
            for d in p.get_devices()
            if _matches(p, text, pi) or text.lower() in d.name.lower()
        ]
    if not hits:
        names = [f"{d.platform.name}: {d.name.strip()}" for d in found]
        raise DeviceNotFoundError(f"no OpenCL device matches {spec!r}; available: {names}")
    return hits[0]


@dataclass(frozen=True)
class Limits:
    """What kernels and layers may assume about the device: the one place they read it."""

    kind: str  # "GPU", "CPU" or "accelerator"
    vector_width: int  # preferred float vector width, a power of two from 1 to 16
    max_work_group_size: int
    work_group_multiple: int  # work-group sizes should be multiples of this (a GPU's warp)
    local_mem_size: int  # bytes of local memory per work-group


# NNLIB_PROFILE=gpu: what a typical discrete GPU reports (NVIDIA since 2017, AMD RDNA): scalar
# float code (the 32-wide warps are the vectors), 1024 work-items per group, warps of 32,
# 48 KiB of local memory. Sizes are capped by the real device's: every launch stays legal.
GPU_PROFILE = {"kind": "GPU", "vector_width": 1, "max_work_group_size": 1024,
               "work_group_multiple": 32, "local_mem_size": 48 * 1024}
PROFILES = ("device", "gpu")


def profile_from_env(value: str | None = None) -> str:
    """The profile named by ``value`` or, if None, by ``NNLIB_PROFILE`` (unset: "device")."""
    name = (os.environ.get("NNLIB_PROFILE", "") if value is None else value).strip().lower()
    if name in ("", "device"):
        return "device"
    if name not in PROFILES:
        raise ValueError(f"unknown nnlib profile {name!r} (NNLIB_PROFILE); choose one of "
                         f"{PROFILES}: 'gpu' makes a CPU device report a typical GPU's limits")
    return name


def _preferred_multiple(device: cl.Device) -> int:
    try:  # a device query since OpenCL 3.0; a kernel query before
        return int(device.preferred_work_group_size_multiple)
    except (cl.Error, AttributeError):
        kernel = cl.Kernel(cl.Program(cl.Context([device]), program_source("vector")).build(),
                           "vector_add")
        return int(kernel.get_work_group_info(
            cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, device))


def device_limits(device: cl.Device, profile: str = "device") -> Limits:
    """The limits of ``device``, or under ``profile="gpu"`` a typical GPU's within them."""
    width = device.preferred_vector_width_float
    own = Limits(kind=_kind(device),
                 vector_width=2 ** min(int(math.log2(width)), 4) if width >= 1 else 1,
                 max_work_group_size=device.max_work_group_size,
                 work_group_multiple=_preferred_multiple(device),
                 local_mem_size=device.local_mem_size)
    if profile_from_env(profile) == "device":
        return own
    capped = ("max_work_group_size", "local_mem_size")
    return replace(own, **{key: min(value, getattr(own, key)) if key in capped else value
                           for key, value in GPU_PROFILE.items()})


# Programs kept per runtime (least recently used dropped first): every distinct source text
# (e.g. each version of a student's kernel file) is a new program.
MAX_PROGRAMS = 64


class Runtime:
    """A device with its context, one in-order profiling queue and its built programs.

    ``profile`` ("device" or "gpu"; None: ``NNLIB_PROFILE``) chooses the limits it reports.
    """

    def __init__(self, device=None, profile: str | None = None):
        self.profile = profile_from_env(profile)
        self.device = find_device(device)
        self.limits = device_limits(self.device, self.profile)
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(
            self.context, properties=cl.command_queue_properties.PROFILING_ENABLE
        )
        # Freed device arrays return their buffers here, so per-step allocations are cheap.
        self.allocator = cl.tools.MemoryPool(cl.tools.ImmediateAllocator(self.queue))
        # (source, options) -> program, least recently used first
        self._programs: OrderedDict = OrderedDict()
        self._launchers: dict = {}  # (topic, name, options, folder's source) -> Launcher
        self._signatures: dict = {}  # source -> {kernel name: Signature}
        self.kernel_folder = None  # use_kernels(): a folder read before kernels/ ...
        self.kernel_topics = None  # ... for these topics (None: all)
        # Held while a launcher's arguments are set and its kernel enqueued (OpenCL kernel
        # arguments are not thread-safe), and while the caches change.
        self.lock = threading.RLock()

    def __repr__(self):
        gpu = ", GPU profile" if self.profile == "gpu" else ""
        return f"Runtime({self.device.platform.name}: {self.device.name.strip()}{gpu})"

    @property
    def is_simulator(self) -> bool:
        return is_simulator(self.device)

    def program(self, topic: str, options: tuple = (), folder=None) -> cl.Program:
        """``kernels/<topic>.cl`` (or ``<folder>/<topic>.cl``) built once per runtime, source
        text and option set: an edited file is built again. The last MAX_PROGRAMS builds are
        kept. Every build flushes subnormal floats (below 1.2e-38) to zero and defines the
        shared codes (BUILD_OPTIONS)."""
        folder = self._folder(topic, folder)
        src = program_source(topic, folder)
        key = (src, tuple(options))
        with self.lock:
            if key in self._programs:
                self._programs.move_to_end(key)
                return self._programs[key]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", cl.CompilerWarning)
                    prg = cl.Program(self.context, src).build(
                        options=[*BUILD_OPTIONS, *options])
            except cl.RuntimeError as err:
                hint = f"\n{NO_COMPILER_HINT}" if "unknown target CPU" in str(err) else ""
                raise KernelBuildError(
                    f"{_shown(_kernel_file(topic, folder))} failed to build on "
                    f"{self.device.name.strip()} "
                    f"({self.device.platform.name}). Build log:\n{err}{hint}"
                ) from None
            self._programs[key] = prg
            while len(self._programs) > MAX_PROGRAMS:
                self._programs.popitem(last=False)
            return prg

    def launcher(self, topic: str, name: str, options: tuple = (), folder=None):
        """The :class:`~nnlib.launcher.Launcher` of kernel ``name`` from ``kernels/<topic>.cl``
        (or ``<folder>/<topic>.cl``) built with ``options``: the one way to run a kernel.
        Made once per runtime, kernel and options, and kept (with ``folder``, once per text
        of its files: an edited exercise file gets a new one)."""
        folder = self._folder(topic, folder)
        key = (topic, name, tuple(options),
               None if folder is None else program_source(topic, folder))
        with self.lock:
            if key not in self._launchers:
                self._launchers[key] = Launcher(self, topic, name, tuple(options), folder)
            return self._launchers[key]

    def _folder(self, topic: str, folder):
        """``folder``, else the folder of :func:`use_kernels` if it covers ``topic``."""
        if folder is None and (self.kernel_topics is None or topic in self.kernel_topics):
            return self.kernel_folder
        return folder

    def signatures(self, topic: str, folder=None) -> dict:
        """{kernel name: :class:`~nnlib.signatures.Signature`} of the program ``topic``,
        read from its source once per text."""
        src = program_source(topic, folder)
        with self.lock:
            if src not in self._signatures:
                self._signatures[src] = signatures.parse(src, _shown(_kernel_file(topic, folder)))
            return self._signatures[src]

    @staticmethod
    def kernel_file(topic: str, folder=None) -> str:
        """The file of program ``topic`` as messages name it, e.g. ``kernels/dense.cl``."""
        return _shown(_kernel_file(topic, folder))

    @property
    def vector_width(self) -> int:
        """The preferred float vector width as a power of two from 1 to 16: 16 on PoCL with
        AVX-512, 1 on NVIDIA GPUs. Kernels get their default width from it by one rule,
        :func:`nnlib.sizes.vector_width`."""
        return self.limits.vector_width

    @property
    def max_work_group_size(self) -> int:
        return self.limits.max_work_group_size

    @property
    def work_group_multiple(self) -> int:
        """Work-group sizes should be multiples of this: 32 on NVIDIA (a warp), 8 on PoCL."""
        return self.limits.work_group_multiple

    @property
    def local_mem_size(self) -> int:
        return self.limits.local_mem_size

    @property
    def is_gpu(self) -> bool:
        """A GPU, or a device under the GPU profile."""
        return self.limits.kind == "GPU"

    def fill(self, array: cla.Array, value) -> None:
        """``array.fill(value)`` under the runtime's lock (pyopencl's fill kernel is shared
        by every thread using this context)."""
        with self.lock:
            array.fill(value)

    def empty(self, shape, dtype=np.float32) -> cla.Array:
        """An uninitialised C-contiguous array from the memory pool (made without pyopencl's
        argument checks, which cost a tenth of a small training step: nnlib/_fast_array.py)."""
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(map(int, shape))
        if min(shape, default=0) < 0:
            raise ValueError(f"negative dimensions are not allowed: {shape}")
        return _fast_array.empty(shape, np.dtype(dtype), self.allocator, self.context,
                                 self.queue)

    def zeros(self, shape, dtype=np.float32) -> cla.Array:
        out = self.empty(shape, dtype)
        self.fill(out, 0)
        return out

    def to_device(self, array, name: str = "input", shape=None, dtype=np.float32):
        """The one way in for arrays: a C-contiguous device array of ``dtype`` (float32 unless
        asked) from a numpy array, anything ``np.asarray`` takes, or a device array of any
        layout. A contiguous device array of the right dtype is passed on; any other is copied
        (an offset slice on the device, a strided view or another dtype via the host).

        Refuses non-numeric data, NaN/inf (in data copied through the host), arrays of
        another context and a wrong number of dimensions or wrong sizes (``shape`` may hold
        ``None`` for a free axis), with a message naming ``name``.
        """
        dtype = np.dtype(dtype)
        if isinstance(array, cla.Array):
            if array.context != self.context:
                raise ValueError(f"{name}: device array lives on another OpenCL context")
            check_shape(name, array.shape, shape)
            if array.dtype == dtype and array.flags.c_contiguous:
                if array.offset == 0:
                    return array
                out = self.empty(array.shape, dtype)  # an offset slice: copy on the device
                if array.size:
                    out.add_event(cl.enqueue_copy(
                        self.queue, out.data, array.base_data, src_offset=array.offset,
                        byte_count=array.nbytes, wait_for=array.events))
                return out
            if np.iscomplexobj(array) != np.issubdtype(dtype, np.complexfloating):
                raise TypeError(f"{name}: device array has dtype {array.dtype}, need {dtype}")
            array = to_host(array)
        elif not isinstance(array, np.ndarray):
            try:
                array = np.asarray(array)
            except (TypeError, ValueError) as err:
                raise TypeError(f"{name}: expected an array of numbers ({err})") from None
        host = array
        if not (np.issubdtype(host.dtype, np.number) or host.dtype == bool):
            raise TypeError(f"{name}: expected numbers, got dtype {host.dtype}")
        if np.iscomplexobj(host) != np.issubdtype(dtype, np.complexfloating):
            raise TypeError(f"{name}: got dtype {host.dtype}, need {dtype}")
        check_shape(name, host.shape, shape)
        with np.errstate(over="ignore", invalid="ignore"):
            converted = np.ascontiguousarray(host, dtype=dtype)
        if not np.isfinite(converted).all():
            raise ValueError(f"{name}: contains NaN or infinity (or values too large for "
                             f"{dtype})")
        if np.may_share_memory(converted, host):
            converted = converted.copy()  # the caller may change its array before the copy
        # Copy without waiting: a blocking copy would also wait for every kernel queued
        # before it. The array keeps the copy's event, which keeps the host copy alive.
        out = self.empty(converted.shape, dtype)
        if converted.size:
            out.add_event(cl.enqueue_copy(self.queue, out.data, converted, is_blocking=False))
        return out


def to_host(array: cla.Array) -> np.ndarray:
    """A device array of any strides and offset read to the host (waits for it), as a numpy
    array of the same layout (the bytes it spans are copied, then viewed with its strides)."""
    if array.size == 0:
        return np.empty(array.shape, array.dtype)
    itemsize = array.dtype.itemsize
    low = array.offset + sum(min(0, (n - 1) * s) for n, s in zip(array.shape, array.strides))
    high = array.offset + sum(max(0, (n - 1) * s) for n, s in zip(array.shape, array.strides))
    span = np.empty(high + itemsize - low, np.uint8)
    cl.enqueue_copy(array.queue, span, array.base_data, src_offset=low, is_blocking=True,
                    wait_for=array.events)
    return np.ndarray(array.shape, array.dtype, buffer=span, offset=array.offset - low,
                      strides=array.strides)


def check_shape(name: str, got: tuple, want) -> None:
    if want is None:
        return
    if len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want)):
        pretty = ", ".join("any" if w is None else str(w) for w in want)
        raise ValueError(f"{name}: expected shape ({pretty}), got {tuple(got)}")


_default: Runtime | None = None
_runtimes: dict = {}  # (device, profile) -> its runtime: asking use_device again reuses it
_default_lock = threading.Lock()


def get_runtime() -> Runtime:
    """The default runtime, created on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Runtime()
            _runtimes.setdefault((_default.device.int_ptr, _default.profile), _default)
        return _default


def use_device(spec=None, profile: str | None = None) -> Runtime:
    """Make the device ``spec`` (see :func:`find_device`) the default and return its runtime
    (``profile``: see :class:`Runtime`). Each device and profile gets one runtime, made on its
    first use and reused after (a context and its programs cost megabytes)."""
    global _default
    device, profile = find_device(spec), profile_from_env(profile)
    with _default_lock:
        key = (device.int_ptr, profile)
        if key not in _runtimes:
            _runtimes[key] = Runtime(device, profile)
        _default = _runtimes[key]
        return _default


def use_kernels(folder=None, topics=None, runtime=None) -> Runtime:
    """Build the kernels of ``topics`` (e.g. ``("dense", "activation", "loss")``; None: all)
    from ``<folder>/<topic>.cl`` where that file exists (a student's kernels), else from
    ``kernels/``; ``folder=None`` goes back to ``kernels/``. Layers and optimizers made after
    this call use them. Returns the runtime (default: the default one)."""
    rt = resolve_runtime(runtime)
    if folder is not None and not Path(folder).is_dir():
        raise FileNotFoundError(f"use_kernels: no folder {folder}")
    with rt.lock:
        rt.kernel_folder = None if folder is None else Path(folder).resolve()
        rt.kernel_topics = None if topics is None else tuple(topics)
    return rt


def resolve_runtime(runtime) -> Runtime:
    """``runtime`` if it is a :class:`Runtime`, the default one for ``None``, else a clear
    error (the argument every layer, parameter and model takes)."""
    if runtime is None:
        return get_runtime()
    if not isinstance(runtime, Runtime):
        raise TypeError(f"runtime must be an nnlib.Runtime (nnlib.get_runtime(), "
                        f"nnlib.use_device(...)) or None, got {type(runtime).__name__}")
    return runtime


def event_ms(*events: cl.Event) -> float:
    """Kernel time in milliseconds summed over profiled events (waits for them)."""
    cl.wait_for_events(list(events))
    return sum(e.profile.end - e.profile.start for e in events) * 1e-6


def time_kernel(launch, warmup: int = 2, repeat: int = 10) -> float:
    """Median kernel time (ms) of ``launch()``, which enqueues work and returns its event."""
    for _ in range(warmup):
        launch().wait()
    return float(np.median([event_ms(launch()) for _ in range(repeat)]))
