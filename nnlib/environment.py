"""What nnlib and the OpenCL driver read from the process's environment, checked before the
first OpenCL call, and the fork guard.

A bad value gets an :class:`EnvironmentSettingError` saying what is allowed, instead of a
crash inside the driver: PoCL segfaults on ``POCL_MAX_PTHREAD_COUNT=-1`` and aborts on
100000, and its compiler (LLVM) ends the process when a file-size limit (``ulimit -f``) or a
full disk stops it writing a compiled kernel.

``POCL_AFFINITY=1`` (PoCL pins its worker thread i to CPU i) is refused where a worker's CPU
is not one the process may use: PoCL aborts on some of those (:func:`_check_pocl_affinity`).
Unset, it is set to 1 where ``nnlib.doctor`` measured PoCL faster pinned on this machine and
stored so beside the default device (:func:`_apply_stored_pin`).

fork: OpenCL drivers do not survive ``fork()`` (PoCL's worker threads and a GPU's context
stay in the parent): any OpenCL call in a forked child of a process that used OpenCL hangs.
nnlib notices (``os.register_at_fork``) and raises :class:`ForkedProcessError` instead.

Taught in notebooks/00_devices.
"""

from __future__ import annotations

import os
import resource
import shutil
from pathlib import Path

from . import tuning


class EnvironmentSettingError(ValueError):
    """An environment variable or process limit that nnlib or the OpenCL driver cannot use."""


class ForkedProcessError(RuntimeError):
    """An OpenCL call in a forked child of a process that had used OpenCL."""


POCL_THREADS = (1, 4096)  # POCL_MAX_PTHREAD_COUNT: PoCL starts that many worker threads
# A compiled kernel is a file in the driver's cache (PoCL: tens of KiB, LLVM's temporaries
# more): a smaller file-size limit or less free disk stops the compiler.
MIN_FILE_BYTES = 16 << 20
MIN_FREE_BYTES = 16 << 20
SWITCHES = {"NNLIB_CHECK_ARGS": ("", "0", "1"), "NNLIB_PROFILING": ("", "0", "1")}

_checked = False


def _fail(name: str, value: str, allowed: str) -> None:
    raise EnvironmentSettingError(f"{name}={value!r} cannot be used: {allowed}. Change or "
                                  f"unset it before starting Python (`unset {name}`).")


def _check_pocl_threads() -> None:
    value = os.environ.get("POCL_MAX_PTHREAD_COUNT", "").strip()
    low, high = POCL_THREADS
    if value and not (value.isascii() and value.isdigit() and low <= int(value) <= high):
        _fail("POCL_MAX_PTHREAD_COUNT", value,
              f"it is the number of PoCL's worker threads, an integer from {low} to {high}")


def pocl_threads() -> int:
    """How many worker threads PoCL starts: ``POCL_MAX_PTHREAD_COUNT`` (checked), else one
    per online CPU."""
    value = os.environ.get("POCL_MAX_PTHREAD_COUNT", "").strip()
    return int(value) if value else os.cpu_count() or 1


def pinnable(threads: int) -> bool:
    """Whether PoCL may pin worker i to CPU i for each of ``threads`` workers: each such CPU
    is one this process may run on (Linux only: ``os.sched_getaffinity``)."""
    return set(range(threads)) <= os.sched_getaffinity(0)


def _check_pocl_affinity() -> None:
    """Refuse a ``POCL_AFFINITY`` pin that PoCL cannot make, before PoCL aborts on it.

    PoCL reads the variable as on when it starts with "1" and then pins its worker thread i
    to CPU i: it ends the process when such a CPU does not exist or lies outside a
    container's CPU set, and moves workers out of the CPUs a ``taskset`` allows. Pinned
    workers ran wide layers' kernels up to twice as fast on 2-core virtual machines, where
    unpinned ones at times share one core, and the layer-by-layer path's small launches
    slower, its worker then sharing a core with the Python thread: so nnlib pins only where
    ``nnlib.doctor`` measured it faster on the machine (:func:`_apply_stored_pin`)."""
    value = os.environ.get("POCL_AFFINITY", "")
    threads = pocl_threads()
    if value.startswith("1") and hasattr(os, "sched_getaffinity") and not pinnable(threads):
        _fail("POCL_AFFINITY", value,
              f"it pins PoCL's worker thread i to CPU i for each of its {threads} workers, "
              f"and this process may run on CPUs {sorted(os.sched_getaffinity(0))} only "
              f"(POCL_AFFINITY=0 leaves the threads unpinned)")


_pin_applied = False  # POCL_AFFINITY=1 set by _apply_stored_pin, not by the reader


def _apply_stored_pin() -> None:
    """POCL_AFFINITY=1 where the variable is unset, ``nnlib.doctor`` stored that PoCL's
    fastest run was pinned (``pocl_affinity`` with the preferred device, whichever runtime
    that is) and PoCL can pin here; before PoCL starts, which is when it reads the
    variable."""
    global _pin_applied
    if "POCL_AFFINITY" not in os.environ and can_pin() and \
            (tuning.preferred_device() or {}).get("pocl_affinity") == "1":
        os.environ["POCL_AFFINITY"] = "1"
        _pin_applied = True


def can_pin() -> bool:
    """Whether PoCL can pin each of its workers here (Linux, each worker's CPU allowed)."""
    return hasattr(os, "sched_getaffinity") and pinnable(pocl_threads())


def reader_set_pin() -> bool:
    """Whether the reader set POCL_AFFINITY (rather than leaving it unset, or to nnlib)."""
    return "POCL_AFFINITY" in os.environ and not _pin_applied


def _check_context() -> None:
    value = os.environ.get("PYOPENCL_CTX", "")
    if value.count(":") > 1 or not value.isprintable():
        _fail("PYOPENCL_CTX", value, "it names a device as '<platform>' or "
              "'<platform>:<device>', each an index or part of a name (e.g. '0:0', 'portable')")


PROFILES = ("device", "gpu")


def profiling_from_env(value: bool | None = None) -> bool:
    """Whether a runtime's queue records kernel times: ``value`` or, if None,
    ``NNLIB_PROFILING`` ("1": on; unset or "0": off)."""
    if value is None:
        return os.environ.get("NNLIB_PROFILING", "").strip() == "1"
    if not isinstance(value, bool):
        raise TypeError(f"profiling must be True, False or None, got {value!r}")
    return value


def profile_from_env(value: str | None = None) -> str:
    """The profile named by ``value`` or, if None, by ``NNLIB_PROFILE`` (unset: "device")."""
    name = (os.environ.get("NNLIB_PROFILE", "") if value is None else value).strip().lower()
    if name in ("", "device"):
        return "device"
    if name not in PROFILES:
        raise ValueError(f"unknown nnlib profile {name!r} (NNLIB_PROFILE); choose one of "
                         f"{PROFILES}: 'gpu' makes a CPU device report a typical GPU's limits")
    return name


def _check_nnlib() -> None:
    for name, allowed in SWITCHES.items():
        value = os.environ.get(name, "").strip()
        if value not in allowed:
            _fail(name, value, f"allowed are {allowed}")
    for check in (tuning.mode, profile_from_env):  # their own messages say what is allowed
        check()
    folder = os.environ.get("NNLIB_TUNING_DIR")
    if folder and Path(folder).exists() and not Path(folder).is_dir():
        _fail("NNLIB_TUNING_DIR", folder, "it is the folder of the tuning results, and this "
              "path is a file")


def _pocl_cache() -> Path:
    if os.environ.get("POCL_CACHE_DIR"):
        return Path(os.environ["POCL_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pocl"


def _check_disk() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY and soft < MIN_FILE_BYTES:
        raise EnvironmentSettingError(
            f"the file-size limit of this process (`ulimit -f`) is {soft} bytes: the OpenCL "
            f"compiler writes each compiled kernel to a file and stops at this limit. Raise "
            f"it to at least {MIN_FILE_BYTES >> 20} MiB (`ulimit -f unlimited`).")
    folder = _pocl_cache()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < MIN_FREE_BYTES:
        raise EnvironmentSettingError(
            f"the disk holding {folder} is full ({free >> 10} KiB free): the OpenCL compiler "
            f"writes each compiled kernel to a file there. Free at least "
            f"{MIN_FREE_BYTES >> 20} MiB, or set POCL_CACHE_DIR to a folder on another disk.")


def check() -> None:
    """Check the environment once per process, before its first OpenCL call (see the module
    docstring); raises :class:`EnvironmentSettingError` naming the value and what is allowed,
    or :class:`ForkedProcessError` in a forked child."""
    global _checked
    check_not_forked()
    if not _checked:
        for part in (_check_pocl_threads, _check_pocl_affinity, _check_context, _check_nnlib,
                     _check_disk, _apply_stored_pin):
            part()
        _checked = True
    mark_used()


# ---------------------------------------------------------------- fork
_used_in: int | None = None  # the process that made OpenCL calls through nnlib
_forked_from: int | None = None  # in a forked child of such a process: that process


def mark_used() -> None:
    global _used_in
    if _used_in is None:
        _used_in = os.getpid()


def _after_fork_in_child() -> None:
    global _forked_from
    if _used_in is not None and _forked_from is None:
        _forked_from = _used_in


os.register_at_fork(after_in_child=_after_fork_in_child)


def check_not_forked() -> None:
    """Raise :class:`ForkedProcessError` in a forked child of a process that used OpenCL."""
    if _forked_from is not None:
        raise ForkedProcessError(
            f"nnlib: this process was forked from process {_forked_from}, which had used "
            f"OpenCL; OpenCL does not survive fork() (any call would hang). Start worker "
            f"processes with the 'spawn' start method: "
            f"multiprocessing.get_context('spawn').Pool(...), or "
            f"multiprocessing.set_start_method('spawn') at the start of the main module "
            f"(concurrent.futures: ProcessPoolExecutor(mp_context=get_context('spawn'))).")
