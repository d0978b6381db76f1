"""The OpenCL runtime: one context and queue on the chosen device (:mod:`nnlib.opencl_devices`),
the programs built there from ``kernels/`` (:mod:`nnlib.sources`), arrays, kernel timing.

One :class:`Runtime` holds a context, an in-order queue and the programs built for it.
``get_runtime()`` returns the default one, created on first use (never at import):
``use_device(spec)`` replaces it. Device choice, in order: the argument, ``PYOPENCL_CTX``,
a GPU, the CPU. The Oclgrind simulator is only used when asked for by name. The queue
records kernel times (OpenCL profiling events, :func:`event_ms`) only in a runtime made with
``profiling=True`` (or ``NNLIB_PROFILING=1``): some drivers charge for it at every launch
(``python -m nnlib.bench.launch`` times a launch on both kinds of queue).

Kernels and layers read a device's limits from the runtime (``rt.vector_width``,
``rt.max_work_group_size``, ``rt.work_group_multiple``, ``rt.local_mem_size``, all in
``rt.limits``), never from the device itself: the profile ``NNLIB_PROFILE=gpu`` makes the
runtime report what a typical GPU reports, so the code paths a GPU takes run, and are
tested, on a CPU; ``NNLIB_MAX_WORK_GROUP=64`` caps every work-group at 64 work-items, as a
device that allows no more would. Every launch keeps to these limits
(:class:`~nnlib.launcher.Launcher`).

Taught in notebooks/00_devices.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pyopencl.tools  # noqa: F401  (cl.tools.MemoryPool)

from . import _fast_array, environment, signatures
from .codes import build_defines
from .opencl_devices import (  # noqa: F401  (public here since before the split)
    GPU_PROFILE, NO_COMPILER_HINT, POCL_HINT, PROFILES, DeviceNotFoundError,
    Limits, NoPlatformError, all_devices, can_compile, device_limits, devices, find_device,
    is_simulator, kernel_names, max_work_group_from_env, platforms, profile_from_env)
from .launcher import Launcher
from .sources import (kernel_dir, kernel_path, name_lines, program_source,  # noqa: F401
                      shown_path, source)
from .tuning import target_options


class KernelBuildError(RuntimeError):
    """An OpenCL program failed to build; the message carries the device's build log."""


class DeviceMemoryError(MemoryError):
    """An array larger than the device's largest buffer, or than the kernels' 32-bit sizes."""


# Subnormal floats are flushed to zero, as GPUs do by default: on a CPU, arithmetic on them
# can be many times slower, and a long training run makes them (Adam's moments of weights
# whose gradient stays 0 decay geometrically).
# Every build also gets the shared codes (activations, losses) as -D options (nnlib/codes.py).
BUILD_OPTIONS = ("-cl-denorms-are-zero", *build_defines())


# Programs kept per runtime (least recently used dropped first): every distinct source text
# (e.g. each version of a student's kernel file) is a new program.
MAX_PROGRAMS = 64


class Runtime:
    """A device with its context, one in-order queue and its built programs.

    ``profile`` ("device" or "gpu"; None: ``NNLIB_PROFILE``) chooses the limits it reports;
    ``max_work_group`` (None: ``NNLIB_MAX_WORK_GROUP``, if set) caps its work-groups;
    ``profiling`` (None: ``NNLIB_PROFILING``, off unless "1") makes the queue record each
    kernel's start and end (:func:`event_ms`).
    """

    def __init__(self, device=None, profile: str | None = None,
                 max_work_group: int | None = None, profiling: bool | None = None):
        environment.check()
        self.profile = profile_from_env(profile)
        self.cap = max_work_group_from_env(max_work_group)
        self.profiling = environment.profiling_from_env(profiling)
        self.device = find_device(device)
        self.limits = device_limits(self.device, self.profile, self.cap)
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context, properties=(
            cl.command_queue_properties.PROFILING_ENABLE if self.profiling else 0))
        # Freed device arrays return their buffers here, so per-step allocations are cheap.
        self.allocator = cl.tools.MemoryPool(cl.tools.ImmediateAllocator(self.queue))
        self._checked_shapes: dict = {}  # (shape, dtype) asked of empty() -> checked form
        # (source, options) -> program, least recently used first
        self._programs: OrderedDict = OrderedDict()
        self._launchers: dict = {}  # (topic, name, options, folder's source) -> Launcher
        self._signatures: dict = {}  # source -> {kernel name: Signature}
        self.kernel_folder = None  # use_kernels(): a folder read before kernels/ ...
        self.kernel_topics = None  # ... for these topics (None: all)
        # Held while a launcher's arguments are set and its kernel enqueued (OpenCL kernel
        # arguments are not thread-safe), and while the caches change.
        self.lock = threading.RLock()
        # {thread id: the nnlib.step_replay.Recording of the training step it records}
        self.recordings: dict = {}

    def __repr__(self):
        gpu = ", GPU profile" if self.profile == "gpu" else ""
        if self.cap is not None:
            gpu += f", work-groups <= {self.cap}"
        if self.profiling:
            gpu += ", profiling"
        return f"Runtime({self.device.platform.name}: {self.device.name.strip()}{gpu})"

    @property
    def is_simulator(self) -> bool:
        return is_simulator(self.device)

    def program(self, topic: str, options: tuple = (), folder=None) -> cl.Program:
        """``kernels/<topic>.cl`` (or ``<folder>/<topic>.cl``) built once per runtime, source
        text and option set: an edited file is built again. The last MAX_PROGRAMS builds are
        kept. Every build flushes subnormal floats (below 1.2e-38) to zero and defines the
        shared codes (BUILD_OPTIONS) and, for Intel's runtime told another ISA, that ISA
        (:func:`nnlib.tuning.target_options`)."""
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
                        options=[*BUILD_OPTIONS, *target_options(), *options])
            except cl.RuntimeError as err:
                hint = f"\n{NO_COMPILER_HINT}" if "unknown target CPU" in str(err) else ""
                raise self._build_error(topic, folder, "failed to build",
                                        name_lines(f"{err}{hint}", src)) from None
            if not kernel_names(prg) and self.signatures(topic, folder):
                # PoCL 3.0 (PyPI's) returns such a program from its own cache (so from the
                # second process on) for code that calls its builtins on vectors wider than
                # the target's registers, e.g. vload16 on AVX2; built fresh it has them
                log = prg.get_build_info(self.device, cl.program_build_info.LOG)
                raise self._build_error(topic, folder, "built into a program with no kernels",
                                        name_lines(log, src))
            self._programs[key] = prg
            while len(self._programs) > MAX_PROGRAMS:
                self._programs.popitem(last=False)
            return prg

    def _build_error(self, topic: str, folder, what: str, log: str) -> KernelBuildError:
        return KernelBuildError(f"{shown_path(kernel_path(topic, folder))} {what} on "
                                f"{self.device.name.strip()} ({self.device.platform.name}). "
                                f"Build log:\n{log}")

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
                self._signatures[src] = signatures.parse(src, self.kernel_file(topic, folder))
            return self._signatures[src]

    @staticmethod
    def kernel_file(topic: str, folder=None) -> str:
        """The file of program ``topic`` as messages name it, e.g. ``kernels/dense.cl``."""
        return shown_path(kernel_path(topic, folder))

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

    @property
    def max_alloc(self) -> int:
        """Bytes of the largest buffer the device allocates (CL_DEVICE_MAX_MEM_ALLOC_SIZE)."""
        return self.device.max_mem_alloc_size

    def check_alloc(self, shape: tuple, dtype=np.float32, what: str = "array") -> None:
        """A clear error, before anything is allocated, for an array of ``shape`` that the
        device cannot hold in one buffer or whose size the kernels' 32-bit indices cannot
        count."""
        count = math.prod(shape)
        nbytes = count * np.dtype(dtype).itemsize
        if nbytes > self.max_alloc or count >= 2**31:
            raise DeviceMemoryError(
                f"{what}: shape {tuple(shape)} of {np.dtype(dtype)} needs {nbytes / 2**20:,.0f} "
                f"MiB, {count:,} values; {self.device.name.strip()} allocates at most "
                f"{self.max_alloc / 2**20:,.0f} MiB in one buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE) "
                f"and the kernels count below 2**31 values. Use smaller batches, inputs or "
                f"layers.")

    def not_a_launch(self) -> None:
        """Say that something other than a kernel launch is enqueued or uploaded now: a
        training step being recorded then is not replayed (nnlib/step_replay.py)."""
        for recording in list(self.recordings.values()):
            recording.spoiled = True

    def fill(self, array: cla.Array, value) -> None:
        """Every element of the C-contiguous ``array`` set to ``value`` by the queue
        (clEnqueueFillBuffer: no kernel, so no work-group to keep within the limits, where
        pyopencl's ``array.fill`` launches a kernel of its own choice of work-group)."""
        if not array.size:
            return
        self.not_a_launch()
        if not _fast_array.is_c_contiguous(array):
            raise ValueError(f"fill: the array must be C-contiguous, got strides "
                             f"{array.strides} for shape {array.shape}")
        array.add_event(cl.enqueue_fill_buffer(
            self.queue, array.base_data, np.array(value, array.dtype), array.offset,
            array.nbytes, wait_for=array.events))

    def empty(self, shape, dtype=np.float32) -> cla.Array:
        """An uninitialised C-contiguous array from the memory pool (made without pyopencl's
        argument checks, which cost a tenth of a small training step: nnlib/_fast_array.py)."""
        environment.check_not_forked()
        checked = self._checked_shapes.get((shape, dtype)) if type(shape) is tuple else None
        if checked is None:
            key = shape
            shape = (int(shape),) if isinstance(shape, (int, np.integer)) else \
                tuple(map(int, shape))
            if min(shape, default=0) < 0:
                raise ValueError(f"negative dimensions are not allowed: {shape}")
            self.check_alloc(shape, dtype)
            checked = (shape, np.dtype(dtype))
            if type(key) is tuple:
                self._checked_shapes[(key, dtype)] = checked
        return _fast_array.empty(*checked, self.allocator, self.context, self.queue)

    def reshape(self, array: cla.Array, *shape) -> cla.Array:
        """``array.reshape(*shape)``, a view of the same data (made without pyopencl's
        general stride search for a C-contiguous array: nnlib/_fast_array.py)."""
        return _fast_array.reshape(array, tuple(map(int, shape)))

    def zeros(self, shape, dtype=np.float32) -> cla.Array:
        out = self.empty(shape, dtype)
        self.fill(out, 0)
        return out

    def to_device(self, array, name: str = "input", shape=None, dtype=np.float32,
                  wait: bool = False):
        """The one way in for arrays: a C-contiguous device array of ``dtype`` (float32 unless
        asked) from a numpy array, anything ``np.asarray`` takes, or a device array of any
        layout. A contiguous device array of the right dtype is passed on; any other is copied
        (an offset slice on the device, a strided view or another dtype via the host).

        Host data go into a buffer of their own, copied as it is made: neither the host nor
        the queue waits for the other. ``wait=True`` copies into a buffer from the memory
        pool instead, after every kernel queued so far: for a large array uploaded once, as
        a training set at the start of a fit (a new buffer's pages are touched for the
        first time by the copy, a pooled one's are mapped already).

        Refuses non-numeric data, NaN/inf (in data copied through the host), arrays of
        another context and a wrong number of dimensions or wrong sizes (``shape`` may hold
        ``None`` for a free axis), with a message naming ``name``.
        """
        environment.check_not_forked()
        dtype = np.dtype(dtype)
        if isinstance(array, cla.Array):
            if array.context != self.context:
                raise ValueError(f"{name}: device array lives on another OpenCL context")
            check_shape(name, array.shape, shape)
            if array.dtype == dtype and _fast_array.is_c_contiguous(array):
                if array.offset == 0:
                    return array
                self.not_a_launch()
                out = self.empty(array.shape, dtype)  # an offset slice: copy on the device
                if array.size:
                    out.add_event(cl.enqueue_copy(
                        self.queue, out.data, array.base_data, src_offset=array.offset,
                        byte_count=array.nbytes, wait_for=array.events))
                return out
            if np.iscomplexobj(array) != np.issubdtype(dtype, np.complexfloating):
                raise TypeError(f"{name}: device array has dtype {array.dtype}, need {dtype}")
            array = to_host(array)
        self.not_a_launch()  # a copy through the host follows
        if not isinstance(array, np.ndarray):
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
        self.check_alloc(host.shape, dtype, name)
        with np.errstate(over="ignore", invalid="ignore"):
            converted = np.ascontiguousarray(host, dtype=dtype)
        if not np.isfinite(converted).all():
            raise ValueError(f"{name}: contains NaN or infinity (or values too large for "
                             f"{dtype})")
        if not converted.size:
            return self.empty(converted.shape, dtype)
        if wait:
            out = self.empty(converted.shape, dtype)
            cl.enqueue_copy(self.queue, out.data, converted, is_blocking=True)
            return out
        # Not by the queue: an enqueued copy from host memory, even a non-blocking one, makes
        # pyopencl wait for it (so for every kernel queued before it) when its event is
        # dropped; the host then could not run ahead of the device.
        return _fast_array.copy_of(converted, self.context, self.queue)


def to_host(array: cla.Array) -> np.ndarray:
    """A device array of any strides and offset read to the host (waits for it), as a numpy
    array of the same layout (the bytes it spans are copied, then viewed with its strides)."""
    if array.size == 0:
        return np.empty(array.shape, array.dtype)
    environment.check_not_forked()
    itemsize = array.dtype.itemsize
    low = array.offset + sum(min(0, (n - 1) * s) for n, s in zip(array.shape, array.strides))
    high = array.offset + sum(max(0, (n - 1) * s) for n, s in zip(array.shape, array.strides))
    span = np.empty(high + itemsize - low, np.uint8)
    cl.enqueue_copy(array.queue, span, array.base_data, src_offset=low, is_blocking=True,
                    wait_for=array.events)
    return np.ndarray(array.shape, array.dtype, buffer=span, offset=array.offset - low,
                      strides=array.strides)


def host_numbers(array, name: str) -> np.ndarray:
    """A numpy array of numbers with at least one axis from a numpy or device array."""
    host = to_host(array) if isinstance(array, cla.Array) else np.asarray(array)
    if host.ndim == 0 or not (np.issubdtype(host.dtype, np.number) or host.dtype == bool):
        raise TypeError(f"{name}: expected an array of numbers, got {host.dtype} "
                        f"{host.shape}")
    return host


def check_shape(name: str, got: tuple, want) -> None:
    if want is None:
        return
    if len(got) != len(want) or any(w is not None and g != w for g, w in zip(got, want)):
        pretty = ", ".join("any" if w is None else str(w) for w in want)
        raise ValueError(f"{name}: expected shape ({pretty}), got {tuple(got)}")


_default: Runtime | None = None
_runtimes: dict = {}  # (device, profile, cap, profiling) -> its runtime, reused by use_device
_default_lock = threading.Lock()


def _key(device, profile: str, cap, profiling: bool) -> tuple:
    """What tells the runtimes of ``_runtimes`` apart."""
    return device.int_ptr, profile, cap, profiling


def get_runtime() -> Runtime:
    """The default runtime, created on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Runtime()
            _runtimes.setdefault(_key(_default.device, _default.profile, _default.cap,
                                      _default.profiling), _default)
        return _default


def use_device(spec=None, profile: str | None = None, profiling: bool | None = None) -> Runtime:
    """Make the device ``spec`` (see :func:`find_device`) the default and return its runtime
    (``profile`` and ``profiling``: see :class:`Runtime`). Each device, profile, work-group
    cap and profiling choice gets one runtime, made on its first use and reused after (a
    context and its programs cost megabytes)."""
    global _default
    device, profile = find_device(spec), profile_from_env(profile)
    cap, profiling = max_work_group_from_env(), environment.profiling_from_env(profiling)
    with _default_lock:
        key = _key(device, profile, cap, profiling)
        if key not in _runtimes:
            _runtimes[key] = Runtime(device, profile, cap, profiling)
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
    """Kernel time in milliseconds summed over profiled events (waits for them): events of a
    runtime made with ``profiling=True``, else a clear error."""
    for e in events:
        if not e.command_queue.properties & cl.command_queue_properties.PROFILING_ENABLE:
            raise RuntimeError(
                "kernel times need a queue that records them: make the runtime with "
                "profiling on, nnlib.use_device(profiling=True) or nnlib.Runtime(device, "
                "profiling=True) (or set NNLIB_PROFILING=1 before starting Python)")
    cl.wait_for_events(list(events))
    return sum(e.profile.end - e.profile.start for e in events) * 1e-6


def time_kernel(launch, warmup: int = 2, repeat: int = 10) -> float:
    """Median kernel time (ms) of ``launch()``, which enqueues work and returns its event."""
    for _ in range(warmup):
        launch().wait()
    return float(np.median([event_ms(launch()) for _ in range(repeat)]))
