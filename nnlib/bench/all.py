"""Every speed goal (nnlib.bench.goals) measured in one command, and the figures it keeps.

    python -m nnlib.bench.all [--store] [--runs 3] [--official-path DIR]   # PYOPENCL_CTX picks

Runs, on the default OpenCL device, each goal's benchmark through its ``main(argv)``: the
dense layer (width 1024; numpy and PyTorch in the same run), one MLP training step at batch
64 and 1, the article's epochs (``net.fit``), the FFT and the complex convolution, CATCH
against the official PyTorch model (only with ``--official-path``, a checkout of
decisionintelligence/CATCH; "not measured" without one), and launch costs. Then prints one
table: each goal's measured ratio, its target, met or NOT met, and the command that
reproduces the row. ``--quick`` runs tiny variants (a smoke test, seconds; its ratios mean
nothing). ``--runs N`` runs them all N times over: each goal's ratio is then its median run's,
printed with the runs' range (a ratio near its target can fall either side of it from one
run to the next). With ``--store`` it writes ``nnlib/bench/stored/<name>.json``: "meta" (the
device, its platform and driver, the CPU model and its vector ISA, the date, PoCL's
POCL_AFFINITY, the number of runs), the table ("goals") and each benchmark's rows (the last
run's); where that file exists and numpy's own dense pass
ran there more than 1 / BASELINE_SHARE times as fast as now (a busier machine: other
processes, a shared host's neighbours, which move every ratio against numpy), it keeps the
file, says why and exits with status 1 (``--replace`` stores the run anyway). Notebook 03
draws every stored file beside the figures it measures live; send yours (a pull request)
to add your device. Every tuning search it starts runs to its end before it is timed (the
first run on a device takes a few minutes longer): the goals are those of the tuned kernels.

Used in notebooks/03_cpu_vs_gpu.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
from pathlib import Path

import pyopencl as cl

from . import catch, dense, emulate, goals, launch, seed_experiment, train_step
from . import complex as bench_complex
from .common import STORED, cpu_model, shown

OFFICIAL = "DIR"  # the official CATCH checkout in RUNS and in the commands printed and stored
# --store keeps the file of an earlier run on this device unless numpy's own dense pass ran
# at least this share of that run's speed
BASELINE_SHARE = 0.8


# CATCH at the course's sizes only: at the official defaults (210 M parameters, about 8 GiB
# of memory for the two codes) a batch takes each code seconds on 2 CPU cores, and this
# run's 10 batches x 5 rounds would add a quarter of an hour; `python -m nnlib.bench.catch
# --compare official --sizes official --batches 2 --rounds 3` times them.
CATCH_OFFICIAL = ["--compare", "official", "--official-path", OFFICIAL]
# benchmark: (its module, its main(argv) -> rows, quick argv, full argv)
RUNS = {
    "dense": ("dense", dense.main,
              ["--widths", "1024", "--batches", "64", "--repeat", "1", "--article-max-width", "0"],
              ["--widths", "1024", "--batches", "1", "16", "64", "256", "--repeat", "7",
               "--article-max-width", "0"]),
    "train_step": ("train_step", train_step.main,
                   ["--batches", "64", "1", "--steps", "2", "--repeat", "1", "--no-tinygrad"],
                   ["--batches", "64", "1", "--steps", "20", "--repeat", "7", "--no-tinygrad"]),
    "seed_experiment": ("seed_experiment", seed_experiment.main,
                        ["--samples", "20", "--epochs", "1"],
                        ["--samples", "2000", "--batch", "64", "--epochs", "3"]),
    "complex": ("complex", bench_complex.main, ["--quick", "--repeat", "1"], ["--repeat", "7"]),
    "catch_speed": ("catch", catch.main,
                    [*CATCH_OFFICIAL, "--sizes", "nnlib", "--batches", "1", "--threads", "2",
                     "--rounds", "1"],
                    [*CATCH_OFFICIAL, "--sizes", "nnlib", "--batches", "10", "--threads", "2",
                     "--rounds", "5"]),
    "launch": ("launch", launch.main, ["--count", "3", "--repeat", "1", "--sizes", "64"],
               ["--count", "200", "--repeat", "7"]),
}


def context_index(device) -> str:
    """``device`` as a PYOPENCL_CTX value, "platform:device" indices."""
    for p, plat in enumerate(cl.get_platforms()):
        for d, dev in enumerate(plat.get_devices()):
            if dev.int_ptr == device.int_ptr:
                return f"{p}:{d}"
    raise LookupError(f"{device.name.strip()} is not among this machine's OpenCL devices")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set:
    """The CPU's feature flags ("flags" on x86, "Features" on Arm); empty if unreadable."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def isa_level(flags: set) -> str:
    """The widest float vector instructions in ``flags``: AVX-512, AVX2, AVX, SSE4.2, NEON."""
    for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"),
                       ("sse4_2", "SSE4.2"), ("asimd", "NEON")):
        if flag in flags:
            return name
    return "unknown"


def isa_name(limits=None, flags: set | None = None) -> str:
    """The vector ISA the benchmarks ran: the one nnlib.bench.emulate emulates, labelled
    "(emulated)"; else the host's (:func:`isa_level` of ``flags``, default the CPU's), except
    for a CPU device (``limits``, nnlib's Limits) whose compiler emits vectors of at most 8
    floats on an AVX-512 CPU: "AVX2 code, AVX-512 CPU" (PyPI's PoCL 3.0, whose LLVM 14 knows
    no CPU after Zen 3, compiles for Zen 3 on Zen 4 and 5)."""
    emulated = emulate.emulated_isa()
    if emulated:
        return f"{emulated} (emulated)"
    host = isa_level(cpu_flags() if flags is None else flags)
    if limits is not None and limits.kind == "CPU" and host == "AVX-512" \
            and limits.widest_vector <= 8:
        return f"AVX2 code, {host} CPU"
    return host


def device_meta(rt) -> dict:
    """Who measured: the device, its platform and driver, its real type (the profile says
    whether NNLIB_PROFILE=gpu was on), the host's CPU and vector ISA, and the date; for PoCL,
    whether its threads were pinned (POCL_AFFINITY as the run had it: the reader's, or what
    nnlib.environment set from the doctor's choice)."""
    from nnlib.opencl_devices import device_limits, is_pocl

    d = rt.device
    pin = ({"pocl_affinity": os.environ.get("POCL_AFFINITY", "unset")}
           if is_pocl(d) else {})
    return {"device": d.name.strip(), "platform": d.platform.name.strip(),
            "platform_version": d.platform.version.strip(), "driver": d.driver_version.strip(),
            "type": device_limits(d, "device").kind, "profile": rt.profile,
            "pyopencl_ctx": context_index(d), "cpu": cpu_model(), "isa": isa_name(rt.limits),
            "host": platform.machine(), "date": datetime.date.today().isoformat(), **pin}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def file_name(meta: dict) -> str:
    """``<device>.json`` for a GPU (``nvidia-geforce-rtx-4090.json``); for a CPU device the
    CPU model, its vector ISA (a virtual machine may name only "AMD EPYC"), the OpenCL
    platform and its driver, so that two OpenCL builds on one CPU (Debian's and PyPI's PoCL)
    keep a file each (``amd-epyc-avx-512-portable-computing-language-3-1-debian.json``);
    ``-gpu-profile`` added under NNLIB_PROFILE=gpu."""
    if meta["type"] == "CPU":
        name = "-".join(slug(meta[k]) for k in ("cpu", "isa", "platform", "driver"))
    else:
        name = slug(meta["device"])
    return f"{name or 'device'}{'-gpu-profile' if meta['profile'] == 'gpu' else ''}.json"


def command(module: str, argv: list, meta: dict) -> str:
    env = f"PYOPENCL_CTX={meta['pyopencl_ctx']} "
    if meta.get("pocl_affinity", "unset") != "unset":
        env += f"POCL_AFFINITY={meta['pocl_affinity']} "
    if meta["profile"] == "gpu":
        env += "NNLIB_PROFILE=gpu "
    emulated = emulate.emulated_isa()
    runner = f"nnlib.bench.emulate {emulated.lower()} " if emulated else "nnlib.bench."
    return f"{env}python -m {runner}{module} {shlex.join(argv)}".rstrip()


def run(quick: bool = False, official: str | None = None, runs: int = 1) -> dict:
    """Every goal's benchmark on the default device: {"meta", "goals": the table's rows,
    and each benchmark's rows under its name}; CATCH only with ``official``. The kernels'
    tuning searches run to their end first (nnlib.tuning.complete_searches): the goals are
    the tuned kernels', not those of a first run's first seconds of search. With ``runs``
    above 1, all the benchmarks run that many times, one round after another: each goal's row
    is its median run's (goals.median_run), each benchmark's rows the last run's, and "meta"
    says how many runs."""
    import nnlib
    from nnlib import tuning

    result = {"meta": device_meta(nnlib.get_runtime())}
    if runs > 1:
        result["meta"]["runs"] = runs
    argvs = {bench: quick_argv if quick else full_argv
             for bench, (_, _, quick_argv, full_argv) in RUNS.items()}
    commands = {bench: command(RUNS[bench][0], argv, result["meta"])
                for bench, argv in argvs.items()}
    missing = {bench: "needs --official-path, a checkout of decisionintelligence/CATCH (and "
               "einops)" for bench, argv in argvs.items() if OFFICIAL in argv and not official}
    tables = []
    with tuning.complete_searches():
        for turn in range(runs):
            for bench, argv in argvs.items():
                if bench in missing:
                    continue
                of = f"  (run {turn + 1} of {runs})" if runs > 1 else ""
                print(f"== {commands[bench]}{of}", flush=True)
                result[bench] = RUNS[bench][1]([official if a == OFFICIAL else a for a in argv])
            tables.append(goals.goal_rows(result, result["meta"], commands, missing))
    result["goals"] = goals.median_run(tables)
    return result


def store(result: dict, folder: Path = STORED) -> Path:
    """Write ``result`` to its file in ``folder`` as a checkpoint is written (a temporary file
    renamed over it: a reader never sees half a file, and an interrupted run leaves the old
    one)."""
    from nnlib.checkpoint import write_atomically

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(result["meta"])
    text = json.dumps(result, indent=1) + "\n"
    write_atomically(path, lambda f: f.write(text.encode()))
    return path


def baseline_gflops(result: dict) -> dict:
    """numpy's own speed in ``result``'s dense benchmark, forward + backward at width 1024 and
    batch 64: {"numpy_1": GFLOP/s on 1 thread, "numpy_2": on 2}, where measured."""
    for row in result.get("dense") or []:
        if (row.get("n"), row.get("batch"), row.get("pass")) == (1024, 64, "fwd+bwd"):
            return {k: row[k] for k in ("numpy_1", "numpy_2") if k in row}
    return {}


def busier_than(result: dict, stored: dict) -> str | None:
    """Why ``result`` should not replace ``stored``, the file of its name: numpy's own dense
    pass ran at under BASELINE_SHARE of its speed then (a busier or a slower machine); None
    where it did not, or where either has no such figure."""
    now, then = baseline_gflops(result), baseline_gflops(stored)
    slower = [k for k in now if k in then and now[k] < BASELINE_SHARE * then[k]]
    if not slower:
        return None
    figures = "; ".join(f"{now[k]:.0f} against {then[k]:.0f} GFLOP/s on {k[len('numpy_'):]} "
                        f"thread(s)" for k in slower)
    return (f"numpy's own dense pass (width 1024, batch 64, forward + backward) ran at "
            f"{figures} in the stored file ({stored.get('meta', {}).get('date', 'undated')}): "
            f"this machine is busier than then (other processes, or a shared host's "
            f"neighbours) or slower, and every ratio measured against numpy moves with that. "
            f"Measure again on a quiet machine, or pass --replace to store these anyway")


def stored_file(path: Path) -> dict | None:
    """The stored file at ``path``, read; None if there is none, or if it is no JSON object
    (nothing to keep)."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return stored if isinstance(stored, dict) else None


def dense_points(rows: list, n: int = 1024) -> list:
    """(batch, GFLOP/s) of the blocked kernel, forward + backward at width ``n``."""
    return sorted((r["batch"], r["blocked"]) for r in rows
                  if r["n"] == n and r["pass"] == "fwd+bwd")


def plot_dense(ax, live_rows: list, live_label: str, stored: list, n: int = 1024):
    """The fast dense kernel's GFLOP/s against the batch: measured now, and from every stored
    file (``common.stored_results("dense")``) labelled with its device (a CPU's with its
    vector ISA), driver and date."""
    ax.plot(*zip(*dense_points(live_rows, n)), "s-", color="black",
            label=f"{live_label} (measured now)")
    for result in stored:
        points, meta = dense_points(result["rows"], n), result["meta"]
        if points:
            kind = f"CPU, {meta['isa']}" if meta["type"] == "CPU" else meta["type"]
            ax.plot(*zip(*points), "o--", label=f"{meta['device']} ({kind}), driver "
                    f"{meta['driver']}, {meta['date']} (stored)")
    ax.set(xscale="log", yscale="log", xlabel="batch", ylabel="GFLOP/s",
           title=f"fast dense kernel, forward + backward, width {n}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1),
              borderaxespad=0)  # beside the axes: one line per stored file


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", action="store_true",
                        help="write nnlib/bench/stored/<name>.json")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    parser.add_argument("--runs", type=int, default=1,
                        help="run every benchmark this many times: each goal's ratio is its "
                        "median run's, with the runs' range")
    parser.add_argument("--official-path", help="a checkout of decisionintelligence/CATCH: "
                        "also time CATCH against it")
    parser.add_argument("--folder", type=Path, default=STORED, help="where --store writes")
    parser.add_argument("--replace", action="store_true",
                        help="with --store: replace the stored file of this device even where "
                        "numpy ran slower than in it (a busier machine)")
    args = parser.parse_args(argv)
    if args.official_path:  # before the benchmarks' minutes, not after them
        from .catch_speed import official_classes
        try:
            official_classes(args.official_path)
        except (FileNotFoundError, ImportError) as err:
            parser.error(f"--official-path: {err}")
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, not {args.runs}")
    result = run(args.quick, args.official_path, args.runs)
    print("\n" + goals.format_table(result["meta"], result["goals"]))
    if args.store:
        path = args.folder / file_name(result["meta"])
        stored = None if args.replace else stored_file(path)
        why = busier_than(result, stored) if stored else None
        if why:
            parser.exit(1, f"not stored in {shown(path)}: {why}\n")
        print(f"wrote {shown(store(result, args.folder))}")
    return result


if __name__ == "__main__":
    main()
