"""Execute the workbook's notebooks headless, in reading order.

    python tools/run_notebooks.py --out build/workbook     # executed copies + figures
    python tools/run_notebooks.py --inplace notebooks/01_dense_kernels.ipynb

Prints one line per notebook (ok or FAILED, seconds, figures) and a summary; exits non-zero
if any failed. What the notebook's kernel process writes to its own terminal (the echo of
low-level output: compiler warnings such as "12 warnings generated.", the tables and
"tuned ..." lines of benchmarks run in child processes) goes to a log file per notebook
instead, unless --verbose; the cells' stored outputs are the same either way.
"""

import argparse
import base64
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

ROOT = Path(__file__).resolve().parent.parent


def execute(path: Path, timeout: int, log=None) -> nbformat.NotebookNode:
    """Run every cell of ``path``; ``log``: a file for the kernel process's own stdout and
    stderr (None: this process's terminal)."""
    nb = nbformat.read(path, as_version=4)
    # the widget state goes into the notebook's metadata: Lab and the site draw the panels
    # from it before anything runs
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute(**({} if log is None else {"stdout": log, "stderr": log}))
    return nb


def save_figures(nb, name: str, folder: Path) -> int:
    count = 0
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png:
                count += 1
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"{name}_cell{i:02d}_{count}.png").write_bytes(base64.b64decode(png))
    return count


def duration(seconds: float) -> str:
    """``7.7 s`` under a minute, else ``3 min 47 s``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {round(seconds % 60):d} s"


def run(path: Path, args, log_dir: Path | None) -> tuple:
    """Execute one notebook and store it as asked: (ok, seconds, detail)."""
    start = time.perf_counter()
    log_path = None if log_dir is None else log_dir / f"{path.stem}.log"
    try:
        if log_path is None:
            nb = execute(path.resolve(), args.timeout)
        else:
            log_dir.mkdir(parents=True, exist_ok=True)
            with open(log_path, "w") as log:
                nb = execute(path.resolve(), args.timeout, log)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as err:
        report = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip() or type(err).__name__
        if log_path is None:
            print(report, file=sys.stderr)
            where = ""
        else:
            with open(log_path, "a") as log:
                log.write(f"\n{report}\n")
            where = f" (the failing cell and the kernel's output: {log_path})"
        return False, time.perf_counter() - start, report.splitlines()[-1] + where
    seconds = time.perf_counter() - start
    detail = ""
    if args.inplace:
        nbformat.write(nb, path)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, args.out / path.name)
        figures = save_figures(nb, path.stem, args.out / "figures")
        detail = f"{figures} figure{'' if figures == 1 else 's'}"
    return True, seconds, detail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="default: every notebooks/NN_*.ipynb in order")
    parser.add_argument("--out", type=Path, help="folder for executed copies and figures")
    parser.add_argument("--inplace", action="store_true", help="store outputs in the notebook")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    parser.add_argument("--verbose", action="store_true",
                        help="let the kernels' compiler and benchmark output through to this "
                             "terminal instead of a log file per notebook")
    args = parser.parse_args()
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    log_dir = None if args.verbose else (args.out or ROOT / "build") / "logs"
    results, start = [], time.perf_counter()
    for path in paths:
        ok, seconds, detail = run(path, args, log_dir)
        results.append(ok)
        print(f"{'ok' if ok else 'FAILED':6s} {duration(seconds):>10s}  {path.stem:30s} {detail}",
              flush=True)
    failed = results.count(False)
    print(f"{len(results)} notebook{'' if len(results) == 1 else 's'} in "
          f"{duration(time.perf_counter() - start)}: {len(results) - failed} ok, {failed} failed")
    if args.out:
        print(f"executed notebooks and figures are in {args.out}/")
    if log_dir is not None:
        print(f"the kernels' own output (compiler warnings, benchmark tables) is in {log_dir}/; "
              f"VERBOSE=1 (or --verbose) prints it here")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
