"""The benchmarks a reader with a GPU runs, in one command, and the figures it keeps.

    python -m nnlib.bench.all --store     # on the default device (PYOPENCL_CTX picks another)

Runs, on the default OpenCL device: the dense layer (width 1024, batches 1 to 256, forward
and forward + backward, numpy and PyTorch in the same run), one MLP training step at batch
64 and 1, and launch and transfer costs. With ``--store`` it writes
``nnlib/bench/stored/<device>.json``: the device, its driver and the date in "meta", and each
benchmark's rows. Notebook 03 draws every stored file beside the figures it measures live;
send yours (a pull request) to add your GPU.

Used in notebooks/03_cpu_vs_gpu.
"""

import argparse
import datetime
import json
import platform
import re
from pathlib import Path

from . import dense, launch, train_step
from .common import STORED, shown

DENSE_QUICK = ["--widths", "64", "--batches", "1", "16", "--repeat", "1"]
DENSE_FULL = ["--widths", "1024", "--batches", "1", "16", "64", "256", "--repeat", "7",
              "--article-max-width", "1024"]
STEP_QUICK = ["--batches", "2", "--steps", "2", "--repeat", "1", "--no-tinygrad"]
STEP_FULL = ["--batches", "64", "1", "--steps", "20", "--repeat", "7", "--no-tinygrad"]
LAUNCH_QUICK = ["--count", "3", "--repeat", "1", "--sizes", "64"]
LAUNCH_FULL = ["--count", "200", "--repeat", "7"]


def device_meta(rt) -> dict:
    """Who measured: the device, its driver, the profile, the host and the date."""
    d = rt.device
    return {"device": d.name.strip(), "platform": d.platform.name.strip(),
            "platform_version": d.platform.version.strip(), "driver": d.driver_version.strip(),
            "type": rt.limits.kind, "profile": rt.profile, "host": platform.processor() or
            platform.machine(), "date": datetime.date.today().isoformat()}


def file_name(meta: dict) -> str:
    """``<device>.json`` in lower case, e.g. ``nvidia-geforce-rtx-4090.json``."""
    slug = re.sub(r"[^a-z0-9]+", "-", meta["device"].lower()).strip("-") or "device"
    return f"{slug}{'-gpu-profile' if meta['profile'] == 'gpu' else ''}.json"


def run(quick: bool = False) -> dict:
    """Every benchmark on the default device: {"meta": ..., "dense": rows, ...}."""
    import nnlib

    result = {"meta": device_meta(nnlib.get_runtime())}
    result["dense"] = dense.main(DENSE_QUICK if quick else DENSE_FULL)
    result["train_step"] = train_step.main(STEP_QUICK if quick else STEP_FULL)
    result["launch"] = launch.main(LAUNCH_QUICK if quick else LAUNCH_FULL)
    return result


def store(result: dict, folder: Path = STORED) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(result["meta"])
    path.write_text(json.dumps(result, indent=1) + "\n")
    return path


def dense_points(rows: list, n: int = 1024) -> list:
    """(batch, GFLOP/s) of the blocked kernel, forward + backward at width ``n``."""
    return sorted((r["batch"], r["blocked"]) for r in rows
                  if r["n"] == n and r["pass"] == "fwd+bwd")


def plot_dense(ax, live_rows: list, live_label: str, stored: list, n: int = 1024):
    """The fast dense kernel's GFLOP/s against the batch: measured now, and from every stored
    file (``common.stored_results("dense")``) labelled with its device, driver and date."""
    ax.plot(*zip(*dense_points(live_rows, n)), "s-", label=f"{live_label} (measured now)")
    for result in stored:
        points, meta = dense_points(result["rows"], n), result["meta"]
        if points:
            ax.plot(*zip(*points), "o--", label=f"{meta['device']} ({meta['type']}), driver "
                    f"{meta['driver']}, {meta['date']} (stored)")
    ax.set(xscale="log", yscale="log", xlabel="batch", ylabel="GFLOP/s",
           title=f"fast dense kernel, forward + backward, width {n}")
    ax.legend(fontsize=8)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", action="store_true",
                        help="write nnlib/bench/stored/<device>.json")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    parser.add_argument("--folder", type=Path, default=STORED, help="where --store writes")
    args = parser.parse_args(argv)
    result = run(args.quick)
    if args.store:
        print(f"wrote {shown(store(result, args.folder))}")
    return result


if __name__ == "__main__":
    main()
