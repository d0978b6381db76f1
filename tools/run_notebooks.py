"""Execute the workbook's notebooks headless, in reading order.

    python tools/run_notebooks.py --out build/workbook     # executed copies + figures
    python tools/run_notebooks.py --inplace notebooks/01_dense_kernels.ipynb

Prints one line per notebook (pass/fail and seconds); exits non-zero if any failed.
"""

import argparse
import base64
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent


def execute(path: Path, timeout: int) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    # the widget state goes into the notebook's metadata: Lab and the site draw the panels
    # from it before anything runs
    NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="default: every notebooks/NN_*.ipynb in order")
    parser.add_argument("--out", type=Path, help="folder for executed copies and figures")
    parser.add_argument("--inplace", action="store_true", help="store outputs in the notebook")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args()
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    failed = 0
    for path in paths:
        start = time.perf_counter()
        try:
            nb = execute(path.resolve(), args.timeout)
            status, detail = "pass", ""
        except CellExecutionError as err:
            nb, status, detail = None, "FAIL", str(err).strip().splitlines()[-1]
            failed += 1
        seconds = time.perf_counter() - start
        if nb is not None and args.inplace:
            nbformat.write(nb, path)
        if nb is not None and args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, args.out / path.name)
            figures = save_figures(nb, path.stem, args.out / "figures")
            detail = f"{figures} figures"
        print(f"{status}  {seconds:6.1f} s  {path.name}  {detail}", flush=True)
    if args.out:
        print(f"executed notebooks and figures are in {args.out}/")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
