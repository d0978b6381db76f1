"""Generate the exercise version of the workbook from its solutions.

    python tools/make_exercises.py --out build/exercises

Solution regions are marked in notebooks/NN_*.py and kernels/*.cl with nbgrader's words,
in the file's comment syntax (`//` in kernels, `#` in Python):

    // BEGIN SOLUTION
    // HINT: kept in the exercise, as a comment
    // STUB: return 1.0f;        (becomes code in the exercise; Python stubs default to `pass`)
    ...the solution, removed from the exercise...
    // END SOLUTION

Kernels listed in WHOLE_KERNELS lose their whole body instead, so files that must stay
marker-free can still hold an exercise. Writes <out>/notebooks/NN_*.ipynb (every notebook,
without outputs) and <out>/kernels/*.cl (the files that hold exercises); the notebooks' checks
read the student's kernels from "../kernels".
"""

import argparse
import re
import sys
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parent.parent

# file -> {kernel: hint lines}. kernels/dense.cl stays marker-free: notebook 03 owns it.
WHOLE_KERNELS = {
    "dense.cl": {
        "dense_forward_seed": (
            "one work-item per output: j = get_global_id(0), b = get_global_id(1);",
            "return at once if j >= n_out or b >= batch (the global size may be rounded up);",
            "sum = bias[j] + the sum over k of x[b * n_in + k] * w[j * n_in + k];",
            "y[b * n_out + j] = activate(sum, act)",
        ),
    },
}

MARKER = re.compile(r"^(?P<indent>\s*)(#+|//)\s*(?P<word>BEGIN SOLUTION|END SOLUTION|HINT:|STUB:)"
                    r"\s?(?P<text>.*)$")

NOTE = ("**Exercise version.** The parts marked `YOUR CODE HERE`, in this notebook and in your "
        "copies of the kernels in `../kernels/`, are yours to write; each `exercises.check_...` "
        "cell tells you whether your code is right, and if not, why.")


class MarkerError(ValueError):
    """A solution region is not closed, nested, or names a kernel that does not exist."""


def strip_solutions(text: str, comment: str, where: str, python: bool) -> tuple[str, int]:
    """``text`` with every solution region replaced by its stub; returns (text, regions)."""
    out, region, count = [], None, 0
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        m = MARKER.match(line)
        word = m["word"] if m else None
        if word == "BEGIN SOLUTION":
            if region is not None:
                raise MarkerError(f"{where}:{number}: BEGIN SOLUTION inside the region opened "
                                  f"at line {region['line']}")
            region = {"line": number, "indent": m["indent"], "hints": [], "stubs": []}
        elif region is None:
            if word == "END SOLUTION":
                raise MarkerError(f"{where}:{number}: END SOLUTION without BEGIN SOLUTION")
            out.append(line)
        elif word == "END SOLUTION":
            indent = region["indent"]
            out.append(f"{indent}{comment} YOUR CODE HERE\n")
            out += [f"{indent}{comment} HINT: {hint}\n" for hint in region["hints"]]
            out += region["stubs"] or ([f"{indent}pass\n"] if python else [])
            region, count = None, count + 1
        elif word == "HINT:":
            region["hints"].append(m["text"])
        elif word == "STUB:":
            region["stubs"].append(f"{m['indent']}{m['text']}\n")
    if region is not None:
        raise MarkerError(f"{where}:{region['line']}: BEGIN SOLUTION is never closed")
    return "".join(out), count


def strip_kernel_body(text: str, name: str, hints: tuple, where: str) -> str:
    """``text`` with the body of ``kernel void name(...)`` replaced by hints."""
    m = re.search(rf"\bkernel\s+void\s+{name}\s*\(", text)
    if not m:
        raise MarkerError(f"{where}: no kernel named {name}")
    start = text.index("{", m.end())
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            break
    body = "".join(["{\n    // YOUR CODE HERE\n"] + [f"    // HINT: {h}\n" for h in hints] + ["}"])
    return text[:start] + body + text[end + 1:]


def exercise_kernels(kernel_dir: Path) -> dict[str, str]:
    """The exercise text of every kernel file that holds an exercise, by file name."""
    found = {}
    for path in sorted(kernel_dir.glob("*.cl")):
        text, count = strip_solutions(path.read_text(), "//", str(path), python=False)
        for name, hints in WHOLE_KERNELS.get(path.name, {}).items():
            text, count = strip_kernel_body(text, name, hints, str(path)), count + 1
        if count:
            found[path.name] = text
    return found


def exercise_notebook(path: Path):
    """The notebook of ``path`` (jupytext percent) with its solutions stubbed, and a note."""
    text, _ = strip_solutions(path.read_text(), "#", str(path), python=True)
    nb = jupytext.reads(text, fmt="py:percent")
    nb.cells.insert(1, jupytext.reads(f"# %% [markdown]\n# {NOTE}\n", fmt="py:percent").cells[0])
    return nb


def generate(out: Path, notebook_dir: Path = ROOT / "notebooks",
             kernel_dir: Path = ROOT / "kernels") -> list[Path]:
    """Write the exercise notebooks and kernels under ``out``; returns the written files."""
    written = []
    for name, text in exercise_kernels(kernel_dir).items():
        target = out / "kernels" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        written.append(target)
    for path in sorted(notebook_dir.glob("[0-9][0-9]_*.py")):
        target = out / "notebooks" / f"{path.stem}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        jupytext.write(exercise_notebook(path), target)
        written.append(target)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "exercises")
    args = parser.parse_args()
    try:
        written = generate(args.out)
    except MarkerError as err:
        print(f"make_exercises: {err}", file=sys.stderr)
        return 1
    for path in written:
        print(path.relative_to(args.out))
    print(f"exercise notebooks and kernels are in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
