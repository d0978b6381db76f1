"""OpenCL devices: the platforms and devices on this machine, which one nnlib uses
(``find_device``: the argument, ``PYOPENCL_CTX``, a GPU, the CPU that ``make doctor``
measured fastest; Oclgrind only by name), and the limits kernels may assume about it
(``device_limits``), under ``NNLIB_PROFILE=gpu`` those of a typical GPU.

Taught in notebooks/00_devices.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, replace

import pyopencl as cl

from . import environment
from .environment import PROFILES, profile_from_env  # noqa: F401 (re-exported)
from .sources import program_source
from .tuning import (TARGET_VARIABLE, preferred_device, set_widest_vector, target_options,
                     widest_vectors)

POCL_HINT = (
    "No OpenCL platform was found. Install one: `pip install \"pyopencl[pocl]\"` "
    "(a CPU device from PyPI, no system package needed), or `conda install -c conda-forge "
    "pocl`, or your GPU vendor's OpenCL driver."
)


ONLY_SIMULATOR_HINT = (
    "Only the Oclgrind simulator is installed: it checks kernels for memory errors and "
    "races, far too slowly to train (ask for it by name, nnlib.use_device('oclgrind')). "
    "Install a device that runs them: `pip install \"pyopencl[pocl]\"` (a CPU device from "
    "PyPI), `sudo apt-get install pocl-opencl-icd` (Debian/Ubuntu), `conda install -c "
    "conda-forge pocl`, or your GPU vendor's OpenCL driver."
)


class NoPlatformError(RuntimeError):
    """No OpenCL platform (ICD) is installed."""


class DeviceNotFoundError(LookupError):
    """The requested OpenCL device does not exist on this machine."""



def platforms() -> list[cl.Platform]:
    environment.check()  # before the first OpenCL call: a bad value crashes the driver
    try:
        found = cl.get_platforms()
    except (cl.LogicError, cl.RuntimeError) as err:
        raise NoPlatformError(f"{POCL_HINT} ({err})") from None
    if not found:
        raise NoPlatformError(POCL_HINT)
    return found


def is_simulator(device: cl.Device) -> bool:
    return "oclgrind" in device.platform.name.lower()


def is_pocl(device: cl.Device) -> bool:
    """PoCL (PyPI's or a distribution's build): the runtime POCL_* variables steer."""
    return "Portable Computing Language" in device.platform.name


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


def can_compile(device: cl.Device) -> bool:
    """Whether ``device`` builds the smallest kernel file (``vector.cl``). PoCL 3.0 from PyPI
    (LLVM 14) fails on CPUs newer than LLVM 14 knows ("unknown target CPU 'generic'"), e.g.
    AMD Zen 5."""
    key = (device.platform.name, device.platform.version, device.name)
    if key not in _usable_cache:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", cl.CompilerWarning)
                cl.Program(cl.Context([device]), program_source("vector")).build(
                    options=list(target_options()))
            _usable_cache[key] = True
        except cl.Error:
            _usable_cache[key] = False
    return _usable_cache[key]


def kernel_names(program: cl.Program) -> str:
    """The names of a built program's kernels, "" where it has none. Their number is asked
    first: for a program with no kernels, Intel's runtime answers INVALID_PROGRAM_EXECUTABLE
    to the names and NVIDIA's driver (580) crashes the process."""
    try:
        return program.kernel_names if program.num_kernels else ""
    except cl.LogicError:
        return ""


def _builds_natively(device: cl.Device, width: int) -> bool:
    """Whether ``kernels/widths.cl`` at vector width ``width`` builds into a program that
    has its kernel, with no "changes the ABI" warning in the build log."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)
            prg = cl.Program(cl.Context([device]), program_source("widths")).build(
                options=[f"-DVW={width}", *target_options()])
    except cl.Error:
        return False
    log = prg.get_build_info(device, cl.program_build_info.LOG)
    return bool(kernel_names(prg)) and "changes the ABI" not in log


def _device_id(device: cl.Device) -> str:
    """The device, its platform and driver, and the compile target Intel's runtime was told
    to use (nnlib.bench.emulate), if any."""
    target = os.environ.get(TARGET_VARIABLE, "")
    return " | ".join(x.strip() for x in (device.platform.name, device.platform.version,
                                          device.name, device.driver_version)
                      + ((f"target {target}",) if target else ()))


def _probe(device: cl.Device, width: int) -> bool:
    """:func:`_builds_natively` in a child process: a compiler that aborts or hangs on the
    width (PoCL 3.0 does both) takes only the child with it."""
    try:
        child = subprocess.run([sys.executable, "-m", __name__, _device_id(device), str(width)],
                               capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        return False
    return child.returncode == 0 and child.stdout.strip().splitlines()[-1:] == ["native"]


VECTOR_WIDTHS = (1, 2, 4, 8, 16)  # OpenCL C's float vector widths (float3 is not probed)


def widest_vector(device: cl.Device) -> int:
    """The widest float vector (16, 8, 4, 2, else 1 lane) that ``device``'s compiler emits
    natively (see kernels/widths.cl), probed once per machine and stored beside the tuning
    results. PoCL 3.0 from PyPI on AMD Zen 4/5 prefers 16 lanes but compiles 16-lane code
    without AVX-512 and crashes or hangs at launch; its widest is 8."""
    key = _device_id(device)
    known = widest_vectors(VECTOR_WIDTHS)
    if key not in known:
        width = next((w for w in (16, 8, 4, 2) if _probe(device, w)), 1)
        set_widest_vector(key, width)
        return width
    return known[key]


VECTORISED = re.compile(r"was successfully vectorized \((\d+)\)")  # Intel's build log
LANES = (0, *VECTOR_WIDTHS, 32, 64)  # the lanes vector_lanes may find (0: none found)


def vector_lanes(device: cl.Device) -> int:
    """How many work-items one vector instruction runs on a CPU whose compiler vectorises
    across work-items (a preferred float width of 1: Intel's CPU runtime, whose build log
    says "was successfully vectorized (16)" with AVX-512 and 8 with AVX2): kernels/widths.cl
    built as scalars, once per machine, stored beside the widest vectors. 0 for any other
    device, or where the log does not say."""
    if _kind(device) != "CPU" or device.preferred_vector_width_float != 1:
        return 0
    key = _device_id(device)
    known = widest_vectors(LANES, "vector_lanes")
    if key not in known:
        with tempfile.TemporaryDirectory() as fresh, warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)
            try:  # an empty binary cache: a cached program's log says nothing of vectors
                prg = cl.Program(cl.Context([device]), program_source("widths")).build(
                    options=["-DVW=1", *target_options()], cache_dir=fresh)
                log = prg.get_build_info(device, cl.program_build_info.LOG)
            except cl.Error:
                log = ""
        found = VECTORISED.search(log)
        lanes = int(found.group(1)) if found else 0
        lanes = lanes if lanes in LANES else 0
        set_widest_vector(key, lanes, "vector_lanes")
        return lanes
    return known[key]


NO_COMPILER_HINT = (
    "No OpenCL device on this machine can compile kernels. PoCL 3.0 from PyPI (LLVM 14) "
    "does not know some CPUs newer than it, AMD's Zen 5 among them (its build log says "
    "\"unknown target CPU 'generic'\"). Install a newer PoCL beside it: "
    "`sudo apt-get install pocl-opencl-icd` (Debian/Ubuntu), or "
    "`conda install -c conda-forge pocl`, or Intel's CPU runtime into the venv (no root): "
    "`python -m nnlib.doctor --install-intel`; `make doctor` checks again."
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
            raise DeviceNotFoundError(ONLY_SIMULATOR_HINT)
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
    vector_width: int  # preferred float vector width, a power of two up to widest_vector
    widest_vector: int  # the widest float vector the compiler emits natively (up to 16)
    max_work_group_size: int  # work-items per work-group, all dimensions together
    max_work_item_sizes: tuple  # work-items per work-group along each dimension
    work_group_multiple: int  # work-group sizes should be multiples of this (a GPU's warp)
    local_mem_size: int  # bytes of local memory per work-group
    compute_units: int  # work-groups that run at once (cores of a CPU, a GPU's multiprocessors)
    inlines_vector_loads: bool = True  # vloadN/vstoreN compile to plain loads (not PoCL 3.0)
    vector_lanes: int = 0  # work-items per vector instruction where the compiler runs them so

    @property
    def few_vector_registers(self) -> bool:
        """A CPU that vectorises across work-items in vectors of 8 floats or fewer: AVX2 (or
        older), whose 16 vector registers hold half the accumulators of AVX-512's 32."""
        return self.vectorises_across_work_items and 0 < self.vector_lanes <= 8

    @property
    def vectorises_across_work_items(self) -> bool:
        """A CPU whose OpenCL compiler prefers float vectors of width 1 (Intel's CPU runtime):
        it runs neighbouring work-items in the lanes of one vector instruction, as a GPU runs
        a warp, once it has split the kernel's own vectors into scalars. A work-group of one
        work-item gets vectors there only from the kernel's own vector types."""
        return self.kind == "CPU" and self.vector_width == 1

    @property
    def explicit_vector_width(self) -> int:
        """The float width of kernels whose work-items each update a run of elements (the
        optimizers' element-wise updates, the fused training step): the preferred width, but
        the widest native one on a CPU that vectorises across work-items, where those kernels
        run many times faster with vectors of their own than as scalar work-items."""
        return self.widest_vector if self.vectorises_across_work_items else self.vector_width


# NNLIB_PROFILE=gpu: what a typical discrete GPU reports (NVIDIA since 2017, AMD RDNA): scalar
# float code (the 32-wide warps are the vectors), 1024 work-items per group, warps of 32,
# 48 KiB of local memory. Sizes are capped by the real device's: every launch stays legal.
GPU_PROFILE = {"kind": "GPU", "vector_width": 1, "max_work_group_size": 1024,
               "max_work_item_sizes": (1024, 1024, 64), "work_group_multiple": 32,
               "local_mem_size": 48 * 1024}
# NNLIB_MAX_WORK_GROUP=64: work-groups of at most 64 work-items (in all and along each
# dimension), as on a device that allows no more; unset, the device's (or profile's) limit.
MAX_WORK_GROUP_ENV = "NNLIB_MAX_WORK_GROUP"


def max_work_group_from_env(value: int | None = None) -> int | None:
    """The work-group cap ``value`` or, if None, ``NNLIB_MAX_WORK_GROUP`` (unset or empty:
    None, no cap beyond the device's)."""
    if value is None:
        text = os.environ.get(MAX_WORK_GROUP_ENV, "").strip()
        if not text:
            return None
        try:
            value = int(text)
        except ValueError:
            value = text
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"the work-group cap ({MAX_WORK_GROUP_ENV}) must be a whole number "
                         f">= 1 of work-items, got {value!r}")
    return value


def _preferred_multiple(device: cl.Device) -> int:
    try:  # a device query since OpenCL 3.0; a kernel query before
        return int(device.preferred_work_group_size_multiple)
    except (cl.Error, AttributeError):
        kernel = cl.Kernel(cl.Program(cl.Context([device]), program_source("vector")).build(
            options=list(target_options())), "vector_add")
        return int(kernel.get_work_group_info(
            cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, device))


def inlines_vector_loads(device: cl.Device) -> bool:
    """Whether the device's compiler turns the vloadN/vstoreN builtins into plain vector
    loads and stores. PoCL 3.0 (PyPI's) leaves them as calls, which made its dense and
    optimizer kernels several times slower than the same loads written one float at a time
    (the kernels' VLOAD 0); later PoCL builds and Intel's runtime inline them."""
    return "PoCL 3.0" not in device.platform.version


def device_limits(device: cl.Device, profile: str = "device",
                  max_work_group: int | None = None) -> Limits:
    """The limits of ``device``, or under ``profile="gpu"`` a typical GPU's within them;
    work-groups at most ``max_work_group`` work-items (None: ``NNLIB_MAX_WORK_GROUP``, if
    set)."""
    width, widest = device.preferred_vector_width_float, widest_vector(device)
    limits = Limits(kind=_kind(device),
                    vector_width=min(2 ** int(math.log2(width)), widest) if width >= 1 else 1,
                    widest_vector=widest,
                    max_work_group_size=device.max_work_group_size,
                    max_work_item_sizes=tuple(device.max_work_item_sizes),
                    work_group_multiple=_preferred_multiple(device),
                    local_mem_size=device.local_mem_size,
                    compute_units=device.max_compute_units,
                    inlines_vector_loads=inlines_vector_loads(device),
                    vector_lanes=vector_lanes(device))
    if profile_from_env(profile) == "gpu":
        limits = replace(limits, **GPU_PROFILE)
    cap = max_work_group_from_env(max_work_group)
    return _within(limits, device, cap)


def _within(limits: Limits, device: cl.Device, cap: int | None) -> Limits:
    """``limits`` with every work-group and local-memory size within the device's own and
    ``cap``."""
    most = min(device.max_work_group_size, cap or device.max_work_group_size)
    sizes = tuple(min(a, b, most) for a, b in zip(limits.max_work_item_sizes,
                                                  device.max_work_item_sizes))
    return replace(limits, max_work_group_size=min(limits.max_work_group_size, most),
                   max_work_item_sizes=sizes,
                   work_group_multiple=min(limits.work_group_multiple, most),
                   local_mem_size=min(limits.local_mem_size, device.local_mem_size))




if __name__ == "__main__":  # the child process of _probe: "<device id>" <width>
    _device = next(d for d in all_devices() if _device_id(d) == sys.argv[1])
    print("native" if _builds_natively(_device, int(sys.argv[2])) else "not native", flush=True)
    os._exit(0)  # PoCL 3.0 may abort while releasing a build that failed
