"""Shared helpers of the benchmarks: medians of wall-clock times, thread limits, JSON output."""

import json
import os
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "build" / "bench"


def set_pocl_threads(threads):
    """Limit PoCL's CPU threads; only effective before the first OpenCL call of the process."""
    if threads:
        os.environ["POCL_MAX_PTHREAD_COUNT"] = str(threads)


def median_s(fn, repeat: int) -> float:
    """Median seconds of ``fn()`` over ``repeat`` runs after one warm-up run."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def write_json(name: str, rows: list, meta: dict) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return path


def environment(rt) -> dict:
    return {"device": rt.device.name.strip(), "platform": rt.device.platform.version,
            "pocl_threads": os.environ.get("POCL_MAX_PTHREAD_COUNT", "all"),
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "unset")}
