"""Generate the exercise version of the workbook from its solutions: a plain hand-out, or an
nbgrader course.

    python tools/make_exercises.py --out build/exercises            # the hand-out
    python tools/make_exercises.py --nbgrader --out build/course    # source/ and release/

Solution regions use nbgrader's markers. In notebook code cells (notebooks/NN_*.py):

    ### BEGIN SOLUTION          the solution, replaced by nbgrader's stub:
    ...                         # YOUR CODE HERE / raise NotImplementedError()
    ### END SOLUTION
    ### BEGIN HIDDEN TESTS      in grade cells: removed from what students get
    ...
    ### END HIDDEN TESTS

with each cell's nbgrader metadata (solution / grade / locked, grade_id, points) in its
percent-format header, `# %% nbgrader={...}`. In kernels/*.cl, in `//` comments:

    // ### BEGIN SOLUTION
    // HINT: kept in the exercise, as a comment
    // STUB: return 1.0f;        (becomes code in the exercise)
    ...the solution, removed from the exercise...
    // ### END SOLUTION

Kernels listed in WHOLE_KERNELS lose their whole body instead, so files that must stay
marker-free can still hold an exercise. nbgrader processes only notebooks, so the kernel
files are stripped here for both outputs.

The hand-out: <out>/notebooks/NN_*.ipynb (every notebook, without outputs) and
<out>/kernels/*.cl (the files that hold exercises); its checks read "../kernels".
The course: <out>/source/NN_topic/ (each notebook with its solutions and nbgrader metadata,
next to kernels/ with the exercise files), <out>/nbgrader_config.py, and release/ made by
`nbgrader generate_assignment`; there the checks read "kernels".
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext

from nnlib.sources import EDITION_MARKER

ROOT = Path(__file__).resolve().parent.parent
PUZZLE_DIR = ROOT / "puzzles" / "solutions"  # the puzzles' solutions: never in the wheel

# file -> {kernel: hint lines}. kernels/dense.cl stays marker-free: notebook 03 owns it.
WHOLE_KERNELS = {
    "dense.cl": {
        "dense_forward_seed": (
            "one work-item per output value; which two ids name it, and what must a "
            "work-item past the data do?",
            "exercises.hint(\"dense_forward\", 2) gives the formula",
        ),
        "dense_backward_input_seed": (
            "one work-item per input gradient value dx[b, i]: which row of dz and which "
            "column of W does it read?",
            "exercises.hint(\"dense_backward_input\", 2) gives the formula",
        ),
        "dense_backward_weight_seed": (
            "one work-item per weight gradient dw[j, i], summed over the batch; does it "
            "overwrite dw or add to it?",
            "exercises.hint(\"dense_backward_weight\", 2) gives the formula",
        ),
    },
}

MARKER = re.compile(r"^(?P<indent>\s*)(#+|//)\s*(###\s*)?(?P<word>BEGIN SOLUTION|END SOLUTION|"
                    r"BEGIN HIDDEN TESTS|END HIDDEN TESTS|HINT:|STUB:)\s?(?P<text>.*)$")
# A line that only names the work-item's ids (taught in 00 and in every kernel the course
# prints), e.g. "int j = get_global_id(0), b = get_global_id(1);": no exercise's answer.
WORK_ITEM_IDS = re.compile(r"^int \w+ = get_global_id\(\d\)(, \w+ = get_global_id\(\d\))*;$")
PYTHON_STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")  # nbgrader's code stub

NOTE = ("**Exercise version.** The parts marked `YOUR CODE HERE`, in this notebook and in your "
        "copies of the kernels in `{kernels}/`, are yours to write; each `exercises.check_...` "
        "cell tells you whether your code is right, and if not, why "
        "(`exercises.hint(\"name\", 1)` gives a nudge, level 2 the formula).")


class MarkerError(ValueError):
    """A solution region is not closed, nested, or names a kernel that does not exist."""


def strip_solutions(text: str, comment: str, where: str, python: bool) -> tuple[str, int]:
    """``text`` with every solution region replaced by its stub and every hidden-test region
    removed; returns (text, solution regions)."""
    out, region, count = [], None, 0
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        m = MARKER.match(line)
        word = m["word"] if m else None
        if word in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS"):
            if region is not None:
                raise MarkerError(f"{where}:{number}: {word} inside the region opened "
                                  f"at line {region['line']}")
            region = {"line": number, "indent": m["indent"], "hints": [], "stubs": [],
                      "end": word.replace("BEGIN", "END")}
        elif region is None:
            if word in ("END SOLUTION", "END HIDDEN TESTS"):
                raise MarkerError(f"{where}:{number}: {word} without "
                                  f"{word.replace('END', 'BEGIN')}")
            out.append(line)
        elif word == region["end"]:
            if word == "END SOLUTION":
                indent = region["indent"]
                if python:
                    out += [f"{indent}{line}\n" for line in PYTHON_STUB]
                else:
                    out.append(f"{indent}{comment} YOUR CODE HERE\n")
                    out += [f"{indent}{comment} HINT: {hint}\n" for hint in region["hints"]]
                    out += region["stubs"]
                count += 1
            region = None
        elif word in ("END SOLUTION", "END HIDDEN TESTS"):
            raise MarkerError(f"{where}:{number}: {word} closes the region opened at line "
                              f"{region['line']}")
        elif word == "HINT:":
            region["hints"].append(m["text"])
        elif word == "STUB:":
            region["stubs"].append(f"{m['indent']}{m['text']}\n")
    if region is not None:
        raise MarkerError(f"{where}:{region['line']}: {region['end'].replace('END', 'BEGIN')} "
                          f"is never closed")
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
    """The exercise text of every kernel file of ``kernel_dir`` that holds an exercise, by
    file name."""
    return {path.name: text for path, text in _exercise_files(kernel_dir)}


def _exercise_files(kernel_dir: Path) -> list[tuple[Path, str]]:
    found = []
    for path in sorted(kernel_dir.glob("*.cl")):
        text, count = strip_solutions(path.read_text(), "//", str(path), python=False)
        for name, hints in WHOLE_KERNELS.get(path.name, {}).items():
            text, count = strip_kernel_body(text, name, hints, str(path)), count + 1
        if count:
            found.append((path, text))
    return found


def student_kernels(kernel_dir: Path = ROOT / "kernels") -> dict[str, str]:
    """What the student's kernels/ folder receives: nnlib's kernel files that hold an
    exercise, and the puzzles' files (puzzles/solutions/), each with its solutions removed."""
    return {**exercise_kernels(kernel_dir), **exercise_kernels(PUZZLE_DIR)}


def exercise_notebook(path: Path, kernels: str = "../kernels", strip: bool = True):
    """The notebook of ``path`` (jupytext percent), its checks reading ``kernels``, with a note;
    its solutions stubbed and hidden tests removed unless ``strip`` is false (nbgrader's
    source, which nbgrader strips itself)."""
    text = path.read_text().replace('"../puzzles/solutions', f'"{kernels}')
    text = text.replace('"../kernels', f'"{kernels}')
    if strip:
        text, _ = strip_solutions(text, "#", str(path), python=True)
    nb = jupytext.reads(text, fmt="py:percent")
    note = NOTE.format(kernels=kernels)
    nb.cells.insert(1, jupytext.reads(f"# %% [markdown]\n# {note}\n", fmt="py:percent").cells[0])
    return nb


def solution_lines(notebook_dir: Path = ROOT / "notebooks", kernel_dir: Path = ROOT / "kernels",
                   puzzle_dir: Path = PUZZLE_DIR) -> set[str]:
    """Every code line of a solution (a region, a hidden test, a blanked kernel body) that
    neither the exercise versions nor nnlib's other kernel files (which the course prints)
    hold: none of them may reach a student."""
    removed, kept = set(), set()
    pairs = [(p.read_text(), t) for p, t in _exercise_files(kernel_dir)
             + _exercise_files(puzzle_dir)]
    pairs += [(p.read_text(), strip_solutions(p.read_text(), "#", str(p), True)[0])
              for p in notebooks(notebook_dir)]
    exercises = {path for path, _ in _exercise_files(kernel_dir)}
    for path in sorted(set(kernel_dir.glob("*.cl")) - exercises):  # shown whole by the course
        kept |= _code_lines(path.read_text())
    for original, exercise in pairs:
        lines, left = _code_lines(original), _code_lines(exercise)
        removed |= lines - left
        kept |= left
    return {line for line in removed - kept if len(line) > 12
            and not line.startswith(("#", "//")) and not MARKER.match(line)
            and not WORK_ITEM_IDS.match(line)}


def _code_lines(text: str) -> set[str]:
    """The stripped lines of ``text``, a trailing ``//`` comment removed."""
    return {re.sub(r"\s+//(?!.*\").*$", "", line).strip() for line in text.splitlines()}


def notebooks(notebook_dir: Path) -> list[Path]:
    return sorted(notebook_dir.glob("[0-9][0-9]_*.py"))


def _write_kernels(folder: Path, kernels: dict) -> list[Path]:
    """The student's kernel files in ``folder``, and the student-edition marker beside it (so
    that ``nnlib.source`` shows these files, not nnlib's solutions)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in kernels.items():
        (folder / name).write_text(text)
    marker = folder.parent / EDITION_MARKER
    marker.write_text(f"{folder.name}\n")
    return [folder / name for name in kernels] + [marker]


def generate(out: Path, notebook_dir: Path = ROOT / "notebooks",
             kernel_dir: Path = ROOT / "kernels") -> list[Path]:
    """Write the hand-out's notebooks and kernels under ``out``; returns the written files."""
    written = _write_kernels(out / "kernels", student_kernels(kernel_dir))
    for path in notebooks(notebook_dir):
        target = out / "notebooks" / f"{path.stem}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        jupytext.write(exercise_notebook(path), target)
        written.append(target)
    return written


COURSE_CONFIG = """\
# nbgrader's configuration for the workbook's course (written by `make assignments`).
# Run nbgrader in this folder (the course's root); the folder may be moved or copied.
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "nnlib"
c.ExecutePreprocessor.timeout = 600  # seconds per cell: training cells take a minute
# autograde grades the students' kernels: never overwrite them with the source's stubs
c.Autograde.exclude_overwriting = {exclude!r}
"""


def generate_course(out: Path, notebook_dir: Path = ROOT / "notebooks",
                    kernel_dir: Path = ROOT / "kernels", release: bool = True) -> list[str]:
    """An nbgrader course under ``out``: source/<NN_topic>/ per notebook and, if ``release``,
    release/ by `nbgrader generate_assignment`; returns the assignment names."""
    kernels = student_kernels(kernel_dir)
    (out / "source").mkdir(parents=True, exist_ok=True)
    names = [path.stem for path in notebooks(notebook_dir)]
    exclude = {name: [f"kernels/{k}" for k in kernels] for name in names}
    (out / "nbgrader_config.py").write_text(
        COURSE_CONFIG.format(exclude=exclude))
    for path in notebooks(notebook_dir):
        folder = out / "source" / path.stem
        if folder.exists():
            shutil.rmtree(folder)
        _write_kernels(folder / "kernels", kernels)
        jupytext.write(exercise_notebook(path, "kernels", strip=False),
                       folder / f"{path.stem}.ipynb")
    if release:
        for name in names:
            nbgrader(out, "generate_assignment", name, "--force")
    return names


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``nbgrader args`` in ``course`` (the command a teacher types), failing loudly."""
    env = dict(os.environ)  # nbgrader runs `alembic` from the same environment's bin/
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--nbgrader", action="store_true",
                        help="an nbgrader course (source/ and release/) instead of the hand-out")
    args = parser.parse_args()
    out = args.out or ROOT / "build" / ("course" if args.nbgrader else "exercises")
    try:
        if args.nbgrader:
            names = generate_course(out)
            print("\n".join(names))
            print(f"the nbgrader course is in {out}/ (source/ and release/)")
            return 0
        written = generate(out)
    except MarkerError as err:
        print(f"make_exercises: {err}", file=sys.stderr)
        return 1
    for path in written:
        print(path.relative_to(out))
    print(f"exercise notebooks and kernels are in {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
