"""Shared helpers of the benchmarks: medians of wall-clock times, thread limits, JSON output.

Used in notebooks/03_cpu_vs_gpu and notebooks/07_catch."""

import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

_REPO = Path(__file__).resolve().parents[2]
# The figures go to build/bench/ of the repository nnlib runs from, else of the current folder
# (an installed nnlib never writes into its own package).
ROOT = _REPO if (_REPO / "pyproject.toml").is_file() else Path.cwd()
OUT = ROOT / "build" / "bench"
STORED = Path(__file__).resolve().parent / "stored"  # results from other machines (GPUs)


def set_pocl_threads(threads):
    """Limit PoCL's CPU threads; only effective before the first OpenCL call of the process."""
    if threads:
        os.environ["POCL_MAX_PTHREAD_COUNT"] = str(threads)


def passive_openmp() -> None:
    """Make PyTorch's OpenMP threads sleep when idle instead of spinning (before torch is
    imported). Runs that take turns with PyTorch need it: spinning threads kept both cores
    busy for the run after PyTorch's, and on 2 cores halved the next kernel's speed (the fast
    dense forward measured 47 vs 94 GFLOP/s, PyTorch itself 6 vs 48, in the same session)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


WARM_UP_S = 0.2


def median_s(fn, repeat: int) -> float:
    """Median seconds of ``fn()`` over ``repeat`` runs, after warm-up runs for at least
    WARM_UP_S seconds (builds, caches, and the cores' clocks and threads waking up: on this
    kind of machine a kernel timed right after idle cores runs up to 1.7x slower)."""
    start = time.perf_counter()
    fn()
    while time.perf_counter() - start < WARM_UP_S:
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


SETTLE_STEP_S = 0.01  # how often settle() looks at the process's CPU time
SETTLE_MAX_S = 0.5  # settle() gives up after this long (threads that never go idle)
BUSY_SHARE = 0.1  # the process counts as idle while its CPU time grows slower than this
TURN_CALLS = 3  # timed calls per turn of interleaved_s
TURN_WARM_UP_S = 0.02  # seconds of untimed calls that start each turn of interleaved_s
# ... and after a settle() that waited for spinning threads (OpenBLAS's, after each call):
# on a 2-core machine the run that follows starts slow for a while, PoCL's two workers (and
# PyTorch's threads) sharing one core, which numpy's own threads do not; this lets them
# spread out before the timed calls
SPUN_WARM_UP_S = 0.06


def settle() -> bool:
    """Wait until this process's threads have gone idle: its CPU time (every thread's) grows
    by less than BUSY_SHARE of the wall time over a SETTLE_STEP_S step, or SETTLE_MAX_S has
    passed. Thread pools keep their threads spinning for a while after each call (OpenBLAS
    until its THREAD_TIMEOUT, PoCL's workers too), and on a machine with few cores those
    threads take cores from whatever runs next in the process. Returns whether it waited
    for spinning threads (more than the first step)."""
    start = time.perf_counter()
    cpu = time.process_time()
    steps = 0
    while time.perf_counter() - start < SETTLE_MAX_S:
        time.sleep(SETTLE_STEP_S)
        steps += 1
        now = time.process_time()
        if now - cpu < BUSY_SHARE * SETTLE_STEP_S:
            break
        cpu = now
    return steps > 1


def interleaved_s(runs: dict, repeat: int, warm_up_s: float = WARM_UP_S) -> dict:
    """Median seconds of each ``runs[name]`` over ``repeat`` rounds, the runs taking turns
    within each round, so that a burst of load from other processes slows all of them
    rather than one: ratios of the medians are steadier than separately timed medians.

    Each turn first lets the previous run's threads go idle (:func:`settle`): a run timed
    while the one before still spins (numpy's OpenBLAS threads, PoCL's workers) loses cores
    to it, and on a 2-core machine whichever ran second would look several times slower
    than alone. Then untimed calls for TURN_WARM_UP_S (its own threads and the cores' clocks
    waking up), SPUN_WARM_UP_S where settle waited for spinning threads, and TURN_CALLS
    timed ones; the median is over every timed call of every round.
    The warm-up is a time, not a call: after idling, PoCL's two workers at times share one
    core of a 2-core virtual machine for several milliseconds, and a wide layer's first
    calls then take up to twice as long as in a training loop, which calls it back to back.

    A run is ``fn`` or ``(fn, context)``: ``context()`` (e.g. a BLAS thread limit) is entered
    for the whole turn. Each run is first warmed up as in :func:`median_s`, for ``warm_up_s``.
    """
    plain = {name: r if isinstance(r, tuple) else (r, contextlib.nullcontext)
             for name, r in runs.items()}
    for fn, context in plain.values():
        with context():
            start = time.perf_counter()
            fn()
            while time.perf_counter() - start < warm_up_s:
                fn()
    times: dict = {name: [] for name in plain}
    for _ in range(repeat):
        for name, (fn, context) in plain.items():
            warm_up = SPUN_WARM_UP_S if settle() else TURN_WARM_UP_S
            with context():
                start = time.perf_counter()
                fn()
                while time.perf_counter() - start < warm_up:
                    fn()
                for _ in range(TURN_CALLS):
                    start = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def per_step_s(run_steps, steps: int, repeat: int) -> float:
    """Median seconds per step of ``run_steps(steps)``, which runs ``steps`` steps and then
    waits for them: the device's queue is drained once per batch of steps, not per step."""
    return median_s(lambda: run_steps(steps), repeat) / steps


def run_child(module: str, argv: list, env: dict | None = None) -> dict:
    """Run ``python -m nnlib.bench.<module> *argv`` (its own process, so that environment
    variables such as POCL_MAX_PTHREAD_COUNT apply) and return the JSON it wrote."""
    subprocess.run([sys.executable, "-m", f"nnlib.bench.{module}", *argv], cwd=ROOT, check=True,
                   env=dict(os.environ, **(env or {})))
    name = argv[argv.index("--name") + 1] if "--name" in argv else module
    return json.loads((OUT / f"{name}.json").read_text())


def shown(path: Path) -> str:
    """``path`` as printed: relative to the repository (or the current folder), so that a
    notebook's stored output names no folder of the machine that ran it."""
    path = Path(path).resolve()
    for base in (ROOT, Path.cwd()):
        if path.is_relative_to(base.resolve()):
            return path.relative_to(base.resolve()).as_posix()
    return path.name


def write_json(name: str, rows: list, meta: dict) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(rt) -> dict:
    from nnlib import tuning
    from nnlib.opencl_devices import is_pocl
    pocl = ({"pocl_threads": os.environ.get("POCL_MAX_PTHREAD_COUNT", "all"),
             "pocl_affinity": os.environ.get("POCL_AFFINITY", "unset")}
            if is_pocl(rt.device) else {})
    return {"device": rt.device.name.strip(), "platform": rt.device.platform.version,
            "driver": rt.device.driver_version, "cpu": cpu_model(), **pocl,
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "unset"),
            "tuning": tuning.mode(),
            "tuned": {} if tuning.mode() == "0" else
            {k: v["params"] for k, v in sorted(tuning.stored(rt).items())}}


def print_environment(meta: dict) -> None:
    """The machine, the OpenCL build and the tuned kernel parameters a benchmark ran with."""
    pocl = (f"PoCL threads {meta['pocl_threads']} (POCL_AFFINITY {meta['pocl_affinity']}); "
            if "pocl_threads" in meta else "")
    print(f"CPU: {meta['cpu']}; OpenCL: {meta['device']} ({meta['platform']}); {pocl}"
          f"NNLIB_TUNE={meta['tuning']}")
    for family, params in meta["tuned"].items():
        print(f"  tuned {family}: " + " ".join(f"{k}={v}" for k, v in params.items()))


def stored_results(name: str, folder: Path = STORED) -> list:
    """Benchmark ``name``'s figures from every file in nnlib/bench/stored/ (written by
    ``python -m nnlib.bench.all --store``, e.g. on a GPU machine) that has them, as
    ``{"meta": {"device", "driver", "date", ...}, "rows": [...]}``."""
    found = [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))]
    return [{"meta": r["meta"], "rows": r[name]} for r in found if name in r]
