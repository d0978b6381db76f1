"""``python -m nnlib.doctor``: list the OpenCL devices, check that one compiles kernels, and
when several CPU devices compile (e.g. PoCL from PyPI and Debian's), measure each briefly
(:data:`WORKLOADS`: a wide layer's kernels, a small network's launch-bound training steps) and
make the fastest over both the default (stored beside the tuning results, see nnlib.tuning).
Each device is measured in a process of its own, as a reader's process uses one (another
runtime's threads, still spinning after its turn, would slow the next device), in
:data:`ROUNDS` turns, of which its fastest counts. Where the reader has not set
``POCL_AFFINITY``, PoCL's devices are also measured with their worker threads pinned
(``POCL_AFFINITY=1``), and whether PoCL's fastest run was pinned is stored with the choice,
whichever device won (:mod:`nnlib.environment` then sets the variable in later processes,
for a PoCL device picked by ``PYOPENCL_CTX`` as for the default).

``python -m nnlib.doctor --others`` prints, one per line, the ``PYOPENCL_CTX`` of every other
real device that compiles kernels (``make test`` runs the notebooks on each of them too).

``python -m nnlib.doctor --install-intel`` installs Intel's CPU runtime for OpenCL into the
venv first (``make doctor INTEL=1``; ``make doctor`` does so by itself where no device
compiles and Debian's PoCL cannot be installed), ``--offer-intel`` does so where the runtime
can be had (Linux on x86-64, a venv with PyPI's pyopencl) and says why not elsewhere (``make
test``, so that its other-devices pass runs on a second compiler), ``--remove-intel`` removes
it (:mod:`nnlib.intel_runtime`); each then checks the devices as above.

Taught in notebooks/00_devices.
"""

import argparse
import ctypes.util
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pyopencl as cl

from . import environment, intel_runtime, tuning
from .opencl_devices import is_pocl
from .runtime import (DeviceNotFoundError, NoPlatformError, Runtime, can_compile, devices,
                      find_device, get_runtime, is_simulator, platforms)

# PoCL 3.0 from PyPI cannot be told the CPU model: its library reads no such variable and
# refuses -target-cpu/-march/-mcpu build options (checked on 3.0-rc2). Debian's PoCL 3.1
# reads POCL_LLVM_CPU_NAME (a Debian patch, upstream from PoCL 4.0).
CPU_NAME_HINT = (
    "  PoCL 3.0 from PyPI cannot be told the CPU model; a newer PoCL can: Debian's "
    "pocl-opencl-icd reads POCL_LLVM_CPU_NAME (e.g. POCL_LLVM_CPU_NAME=x86-64-v3).")


def unregistered_nvidia(found: list) -> str | None:
    """The file name of NVIDIA's OpenCL library where the system has one but ``found`` (as
    :func:`nnlib.devices` lists them) holds no NVIDIA device: a container's driver often
    comes without the ICD file that names it, and the ICD loader then never opens it."""
    if any("nvidia" in d["platform"].lower() for d in found):
        return None
    return ctypes.util.find_library("nvidia-opencl")


def report_unregistered_nvidia(found: list) -> None:
    """Print how to register NVIDIA's OpenCL library where :func:`unregistered_nvidia` finds
    one."""
    library = unregistered_nvidia(found)
    if library:
        print(f"nnlib doctor: {library} (NVIDIA's OpenCL driver) is installed, but no ICD "
              "file names it, so its GPU is not listed. To use it:\n"
              f"  mkdir -p ~/icd && echo {library} > ~/icd/nvidia.icd && "
              "export OCL_ICD_VENDORS=~/icd\n"
              "  (the ICD loader then reads the drivers named in that folder only)")


def _name(d) -> str:
    return f"{d.name.strip()} ({d.platform.version.strip()})"


def _fastest_s(run, warm: int = 3, timed: int = 5) -> float:
    """The fastest of ``timed`` calls of ``run`` (each waits for the device), after ``warm``."""
    times = []
    for _ in range(warm + timed):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times[warm:])


def dense_step_s(rt) -> float:
    """Seconds of one dense 512 -> 512 forward + backward at batch 64: the kernels' speed."""
    from .layers.dense import Dense

    layer = Dense(512, 512, "tanh", runtime=rt)
    rng = np.random.default_rng(0)
    x, dy = (rt.to_device(rng.standard_normal((64, 512))) for _ in range(2))

    def run():
        layer.forward(x)
        layer.backward(dy)
        rt.queue.finish()
    return _fastest_s(run)


def train_steps_s(rt, steps: int = 10) -> float:
    """Seconds of ``steps`` training steps of notebook 02's classifier (240-128-64-3, batch
    64, layer by layer): 9 small launches each, where the launch costs decide."""
    from .layers.dense import Dense
    from .network import Sequential
    from .optim import SGD

    sizes, acts = (240, 128, 64, 3), ("tanh", "tanh", "softmax")
    net = Sequential([Dense(a, b, act, seed=i, runtime=rt)
                      for i, (a, b, act) in enumerate(zip(sizes, sizes[1:], acts))],
                     loss="cross_entropy")
    opt = SGD(net.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = rt.to_device(rng.standard_normal((64, 240)))
    y = net.targets(rng.integers(0, 3, 64), 64)

    def run():
        for _ in range(steps):
            net.train_step(x, y, opt)
        rt.queue.finish()
    return _fastest_s(run, warm=1, timed=3)


# What doctor times on each CPU device (default kernel parameters): a wide layer's kernels
# and a small network's training steps; the default is the device with the least geometric
# mean of its times over the fastest device's.
WORKLOADS = {"dense 512 -> 512, batch 64, forward + backward": dense_step_s,
             "10 training steps of 240-128-64-3, batch 64": train_steps_s}


def relative_times(figures: dict) -> dict:
    """{device: the geometric mean over the workloads of its time over the fastest device's}
    from ``figures`` = {workload: {device: seconds}} (1.0: the fastest at everything)."""
    names = next(iter(figures.values()))
    return {name: float(np.exp(np.mean([np.log(times[name] / min(times.values()))
                                        for times in figures.values()])))
            for name in names}


PINNED = " with POCL_AFFINITY=1"  # appended to a device's name: measured pinned
MEASURE_TIMEOUT_S = 600  # a device's child process (first compilations included)
# Rounds of child processes, each round every device once (in turn, starting one further
# each round); a device's time is its fastest over the rounds, so that one slow turn (another
# program's burst on a shared machine) does not decide the default.
ROUNDS = 3


def real_devices() -> list:
    """[(``"platform:device"`` index, device)] of the real devices that compile kernels."""
    return [(f"{pi}:{di}", d) for pi, p in enumerate(platforms())
            for di, d in enumerate(p.get_devices()) if not is_simulator(d) and can_compile(d)]


def cpu_devices() -> list:
    """:func:`real_devices` that are CPUs."""
    return [(spec, d) for spec, d in real_devices() if d.type & cl.device_type.CPU]


def measure_here(spec: str) -> dict:
    """{workload: seconds} of WORKLOADS on device ``spec``, in this process (default kernel
    parameters, no tuning search)."""
    tuning.set_mode("0")
    try:
        with warnings.catch_warnings():  # Intel's compiler logs every build it vectorises
            warnings.simplefilter("ignore", cl.CompilerWarning)
            rt = Runtime(find_device(spec))
            return {work: measure(rt) for work, measure in WORKLOADS.items()}
    finally:
        tuning.set_mode(None)


def measure_apart(spec: str, pin: str | None) -> dict | None:
    """:func:`measure_here` in a child process (``--measure``), with ``POCL_AFFINITY`` set to
    ``pin`` (None: as in this process); None where the child fails (it says why)."""
    env = None if pin is None else {**os.environ, "POCL_AFFINITY": pin}  # None: inherited
    try:
        child = subprocess.run([sys.executable, "-m", "nnlib.doctor", "--measure", spec],
                               env=env, capture_output=True, text=True, check=False,
                               timeout=MEASURE_TIMEOUT_S)
        why = None if child.returncode == 0 else \
            (child.stderr.strip().splitlines() or ["no output"])[-1]
    except subprocess.TimeoutExpired:
        why = f"no answer in {MEASURE_TIMEOUT_S} s"
    if why is not None:
        print(f"nnlib doctor: device {spec} not measured{PINNED if pin == '1' else ''}: {why}")
        return None
    return json.loads(child.stdout.strip().splitlines()[-1])


def prefer_fastest_cpu() -> None:
    """Measure every CPU device that compiles, each in a process of its own (ROUNDS turns
    each, the fastest counts), and PoCL's also pinned where the reader left POCL_AFFINITY
    unset and PoCL can pin; store the fastest as the default device, with whether PoCL's
    fastest run was pinned. A device whose child fails is left out."""
    cpus = cpu_devices()
    choose_pin = not environment.reader_set_pin() and environment.can_pin()
    runs = [(spec, d, "0" if choose_pin else None) for spec, d in cpus]
    if choose_pin:
        runs += [(spec, d, "1") for spec, d in cpus
                 if is_pocl(d)]
    if len(runs) < 2:
        return
    measured, failed = {}, set()
    for turn in range(ROUNDS):
        for spec, d, pin in runs[turn % len(runs):] + runs[:turn % len(runs)]:
            name = _name(d) + (PINNED if pin == "1" else "")
            if name in failed:
                continue
            result = measure_apart(spec, pin)
            if result is None:
                failed.add(name)
                measured.pop(name, None)
                continue
            best = measured.get(name, (d, pin, result))[2]
            measured[name] = (d, pin, {work: min(result[work], best[work]) for work in result})
    if not measured:
        return
    figures = {work: {name: result[work] for name, (_, _, result) in measured.items()}
               for work in WORKLOADS}
    score = relative_times(figures)
    print(f"nnlib doctor: each device's fastest of {ROUNDS} turns, each in a process of its own:")
    for work, times in figures.items():
        print(f"  {work}:")
        for name, seconds in times.items():
            print(f"    {seconds * 1e3:8.2f} ms on {name}")
    best_name = min(score, key=score.get)
    best, pin, _ = measured[best_name]
    pocl = [name for name, (d, _, _) in measured.items() if is_pocl(d)]
    if pocl:  # PoCL reads the variable whichever device a process picks: its fastest run's
        pin = measured[min(pocl, key=score.get)][1]
    tuning.set_preferred_device(best.platform.version.strip(), best.name.strip(),
                                {work: {k: round(v * 1e3, 3) for k, v in times.items()}
                                 for work, times in figures.items()},
                                pocl_affinity=pin)
    print(f"nnlib doctor: default CPU device from now on: the fastest over both (its times "
          f"{score[best_name]:.2f}x the best's, geometric mean), {best_name}")


def other_devices() -> list[str]:
    """``"platform:device"`` indices of the real devices, besides the default, that compile."""
    default = get_runtime().device
    return [spec for spec, d in real_devices() if d != default]


def main() -> int:
    try:
        found = devices()
    except NoPlatformError as err:
        print(f"nnlib doctor: {err}")
        report_unregistered_nvidia([])
        return 1
    for d in found:
        mark = "ok " if d["compiles"] else "NO "
        print(f"  [{mark}] {d['platform']}: {d['device']} ({d['type']}, "
              f"{d['compute_units']} compute units, max work-group {d['max_work_group_size']})")
    if any(not d["compiles"] and d["type"] == "CPU" for d in found):
        print(CPU_NAME_HINT)
    report_unregistered_nvidia(found)
    prefer_fastest_cpu()
    try:
        rt = get_runtime()
    except DeviceNotFoundError as err:
        print(f"nnlib doctor: {err}")
        return 1
    print(f"nnlib doctor: default device is {rt.device.name.strip()} "
          f"({rt.device.platform.name})")
    return 0


def _install_intel() -> None:
    print(f"nnlib doctor: installing Intel's CPU runtime for OpenCL "
          f"({' '.join(intel_runtime.PACKAGES)}) into this venv (`make remove-intel` or "
          f"`python -m nnlib.doctor --remove-intel` removes it) ...")
    print(f"nnlib doctor: wrote {intel_runtime.install()}")


def cli(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnlib.doctor", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--others", action="store_true",
                        help="print the PYOPENCL_CTX of every other device that compiles")
    action.add_argument("--install-intel", action="store_true",
                        help="install Intel's CPU runtime for OpenCL into this venv, then check")
    action.add_argument("--offer-intel", action="store_true",
                        help="install Intel's CPU runtime where it can be had, else say why not")
    action.add_argument("--remove-intel", action="store_true",
                        help="remove Intel's CPU runtime from this venv, then check")
    action.add_argument("--measure", metavar="PLATFORM:DEVICE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:  # a child of measure_apart
        print(json.dumps(measure_here(args.measure)))
        return 0
    if args.others:
        print("\n".join(other_devices()))
        return 0
    try:
        if args.offer_intel and not intel_runtime.installed():
            reason = intel_runtime.unavailable()
            if reason:
                print(f"nnlib doctor: not installing Intel's CPU runtime: {reason}")
            else:
                _install_intel()
        elif args.install_intel:
            _install_intel()
        elif args.remove_intel:
            removed = intel_runtime.remove()
            print(f"nnlib doctor: removed Intel's CPU runtime "
                  f"({', '.join(removed) or 'its ICD file'})")
    except intel_runtime.IntelRuntimeError as err:
        print(f"nnlib doctor: {err}")
        return 1
    return main()


if __name__ == "__main__":
    sys.exit(cli())
