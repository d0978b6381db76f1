"""The speed goals (issue #30): what each benchmark must show against its baseline, and how
the ratio is read off that benchmark's rows. This table is the one home of the targets:
``python -m nnlib.bench.all`` measures and prints them, ``--store`` writes them with the
figures, notebook 03 shows them; ``python -m nnlib.bench.goals`` prints the table alone.

Every ratio is a speed-up, the baseline's time over nnlib's (higher is faster), measured in
one run on one device; a goal is met when the ratio reaches its target.

Used in notebooks/03_cpu_vs_gpu.
"""

from collections.abc import Callable
from dataclasses import dataclass

MET, NOT_MET, NOT_MEASURED = "met", "NOT met", "not measured"


def dense_cases(rows: list, device: dict) -> list:
    """The blocked kernel at width 1024, batch 64, forward + backward, over numpy's 2 threads."""
    return [("width 1024, batch 64", r["blocked"] / r["numpy_2"], "") for r in rows
            if (r["n"], r["batch"], r["pass"]) == (1024, 64, "fwd+bwd")]


def train_step_cases(rows: list, device: dict) -> list:
    """One case per batch: the fastest of numpy (1 or 2 threads) and PyTorch over nnlib."""
    def fastest(r):
        return min((k for k in ("numpy_1", "numpy_2", "torch") if k in r), key=r.get)
    return [(f"batch {r['batch']}", r["fastest_other_over_nnlib"], f"fastest: {fastest(r)}")
            for r in rows]


def fit_cases(mode: str, path: str | None = None) -> Callable:
    """``net.fit``'s epoch in ``mode`` ("per_sample" or "mini_batch") over single-threaded
    numpy, on ``device`` only: on ``path`` ("fused" or "layers"), or (None) the faster of the
    two, the one fit itself chooses (nnlib.fit_path)."""
    def cases(rows, device):
        out = []
        for r in rows:
            if (r["device"].strip(), r["platform"].strip()) == (device["device"],
                                                                device["platform_version"]):
                chosen = path or max(("fused", "layers"),
                                     key=lambda p: r[f"{mode}_{p}_vs_numpy"])
                out.append((f"{mode.replace('_', '-')} epoch", r[f"{mode}_{chosen}_vs_numpy"],
                            f"{chosen} path"))
        return out
    return cases


def complex_cases(prefix: str) -> Callable:
    """numpy's time over the device's, one case per row of nnlib.bench.complex whose operation
    starts with ``prefix``."""
    def cases(rows, device):
        return [(f"{r['operation'][len(prefix):].strip()}, {r['size']}".lstrip(", "),
                 r["numpy_s"] / r["device_s"], "") for r in rows
                if r["operation"].startswith(prefix) and r["numpy_s"]]
    return cases


def catch_cases(rows: list, device: dict) -> list:
    """The official PyTorch CATCH's epoch over nnlib's, at each compared set of sizes."""
    return [(f"{r['sizes']} sizes, {r['batches']} batches of {r['batch_size']}", r["ratio"], "")
            for r in rows if "ratio" in r]


@dataclass(frozen=True)
class Goal:
    key: str
    what: str            # what is timed
    baseline: str        # against what
    target: float        # the least speed-up that meets the goal
    bench: str           # the nnlib.bench module that measures it
    cases: Callable      # (that module's rows, the device's meta) -> [(case, ratio, note)]


GOALS = (
    Goal("dense", "dense layer forward + backward", "numpy, 2 BLAS threads", 1.0, "dense",
         dense_cases),
    Goal("train_step", "MLP training step (nnlib.bench.train_step)",
         "the faster of numpy and PyTorch", 1.0, "train_step", train_step_cases),
    Goal("fit_batch_1", "net.fit, one sample a step (nnlib.bench.seed_experiment)",
         "numpy, 1 thread", 5.0, "seed_experiment", fit_cases("per_sample")),
    Goal("fit_mini_batch", "net.fit, mini-batch (nnlib.bench.seed_experiment)",
         "numpy, 1 thread", 1.0, "seed_experiment", fit_cases("mini_batch")),
    Goal("layers_mini_batch", "net.fit(fused=False), mini-batch: the layer-by-layer path",
         "numpy, 1 thread", 1.0, "seed_experiment", fit_cases("mini_batch", "layers")),
    Goal("fft", "FFT, at every length", "numpy.fft", 1.0, "complex", complex_cases("fft")),
    Goal("complex_conv", "complex convolution", "numpy (BLAS)", 2.0, "complex",
         complex_cases("complex conv")),
    Goal("catch", "CATCH training epoch", "the official PyTorch CATCH", 2.0, "catch_speed",
         catch_cases),
)


def status(ratio, target: float) -> str:
    if ratio is None:
        return NOT_MEASURED
    return MET if ratio >= target else NOT_MET


def goal_rows(results: dict, device: dict, commands: dict, missing: dict | None = None) -> list:
    """One row per measured case of every goal: ``results[goal.bench]`` are that benchmark's
    rows (absent: not run), ``commands[goal.bench]`` the command that reproduces them,
    ``missing[goal.bench]`` why a benchmark was not run. A goal without a case gets one row
    marked "not measured"."""
    missing = missing or {}
    rows = []
    for goal in GOALS:
        head = {"goal": goal.key, "what": goal.what, "baseline": goal.baseline,
                "target": goal.target, "device": device["device"],
                "command": commands.get(goal.bench, "")}
        cases = goal.cases(results[goal.bench], device) if goal.bench in results else []
        for case, ratio, note in cases:
            rows.append({**head, "case": case, "ratio": ratio,
                         "status": status(ratio, goal.target), "note": note})
        if not cases:
            rows.append({**head, "case": "", "ratio": None, "status": NOT_MEASURED,
                         "note": missing.get(goal.bench, "no case of this goal was measured")})
    return rows


def median_run(tables: list) -> list:
    """The goal rows of several runs of the same benchmarks (``tables``: one list of rows per
    run, as :func:`goal_rows` gives them) as one table: each (goal, case) takes the row of its
    median run (of an even count, the lower middle one: a ratio one run measured, with that
    run's note), with "ratios", every run's ratio in the order of the runs."""
    cases = {}
    for rows in tables:
        for r in rows:
            cases.setdefault((r["goal"], r["case"]), []).append(r)
    out = []
    for same in cases.values():
        measured = sorted((r for r in same if r["ratio"] is not None), key=lambda r: r["ratio"])
        row = measured[(len(measured) - 1) // 2] if measured else same[0]
        out.append({**row, "ratios": [r["ratio"] for r in same]})
    order = [g.key for g in GOALS]
    return sorted(out, key=lambda r: order.index(r["goal"]))


def format_targets() -> str:
    lines = [f"{'goal':17s} {'target':>7s}  what, against what"]
    lines += [f"{g.key:17s} {g.target:6.1f}x  {g.what}, against {g.baseline}" for g in GOALS]
    return "\n".join(lines)


def format_table(meta: dict, rows: list) -> str:
    """Who measured (the "meta" of nnlib.bench.all), then the rows."""
    pin = f", POCL_AFFINITY={meta['pocl_affinity']}" if "pocl_affinity" in meta else ""
    runs = f", median of {meta['runs']} runs" if meta.get("runs", 1) > 1 else ""
    return (f"Speed goals on {meta['device']} ({meta['type']}, {meta['platform']} "
            f"{meta['driver']}, profile {meta['profile']}{pin}); CPU {meta['cpu']} "
            f"({meta['isa']}); {meta['date']}{runs}\n{format_rows(rows)}")


def format_rows(rows: list) -> str:
    """The table as printed: one line per row, then the commands, numbered."""
    commands = list(dict.fromkeys(r["command"] for r in rows))
    wide = max(len(r["case"]) for r in rows)
    key = max(len(r["goal"]) for r in rows)
    head = f"{'goal':{key}s} {'case':{wide}s} {'ratio':>7s} {'target':>7s}  {'status':13s} run"
    lines = [head + "  note"]
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:6.2f}x"
        measured = [x for x in r.get("ratios", []) if x is not None]
        spread = f"runs {min(measured):.2f}-{max(measured):.2f}x" if len(measured) > 1 else ""
        note = "  ".join(part for part in (spread, r["note"]) if part)
        lines.append(f"{r['goal']:{key}s} {r['case']:{wide}s} {ratio:>7s} {r['target']:6.1f}x  "
                     f"{r['status']:13s} [{commands.index(r['command']) + 1}]  {note}")
    lines.append("(ratio: the baseline's time / nnlib's, both measured in the same run; of several "
                 "runs, the median run's, and the runs' range before the note; reproduce a row "
                 "with its command)")
    lines += [f"[{i + 1}] {c}" for i, c in enumerate(commands)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_targets())
