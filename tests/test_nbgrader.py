"""The nbgrader round: `make assignments` builds source/ and release/, a teacher runs
`nbgrader autograde` and `generate_feedback` on two submissions of notebook 00 and its
puzzles (the solution kernels, and kernels with a planted mistake), and the scores and the
feedback say why."""

import shutil
from pathlib import Path

import jupytext
import nbformat
import pytest

from nnlib.runtime import kernel_dir

from .tools import load_tool

pytest.importorskip("nbgrader")
make_exercises = load_tool("make_exercises")
ASSIGNMENT = "00_devices"


def _submit(course: Path, student: str, vector_cl: str, puzzles_cl: str) -> None:
    """The released assignment, with ``vector_cl`` and ``puzzles_cl`` as the student's
    kernels/vector.cl and kernels/puzzles_basics.cl."""
    folder = course / "submitted" / student / ASSIGNMENT
    shutil.copytree(course / "release" / ASSIGNMENT, folder)
    (folder / "kernels" / "vector.cl").write_text(vector_cl)
    (folder / "kernels" / "puzzles_basics.cl").write_text(puzzles_cl)


def _scores(course: Path) -> dict:
    """student -> {grade cell: (score, max)} from the gradebook nbgrader wrote."""
    from nbgrader.api import Gradebook
    found: dict = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        cells = gradebook.find_notebook(ASSIGNMENT, ASSIGNMENT).grade_cells
        for student in ("alice", "bob"):
            for cell in cells:
                grade = gradebook.find_grade(cell.name, ASSIGNMENT, ASSIGNMENT, student)
                found.setdefault(student, {})[cell.name] = (grade.score, grade.max_score)
    return found


@pytest.mark.slow
def test_autograde_and_feedback(tmp_path):
    course = tmp_path / "course"
    make_exercises.generate_course(course, release=False)
    make_exercises.nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    released = nbformat.read(course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", 4)
    assert not any("HIDDEN TESTS" in cell.source or "assert verdict" in cell.source
                   for cell in released.cells)
    solutions = make_exercises.solution_lines()
    for path in (course / "release").rglob("*.*"):
        text = path.read_text()
        assert not [line for line in solutions if line in text], f"{path} leaks a solution"

    solution = (kernel_dir() / "vector.cl").read_text()
    mistake = solution.replace("a[i] + b[i]", "a[i] - b[i]")
    puzzles = (make_exercises.PUZZLE_DIR / "puzzles_basics.cl").read_text()
    puzzle_mistake = puzzles.replace("out[i] = a[i] + b[i];", "out[i] = a[i] - b[i];")
    assert mistake != solution and puzzle_mistake != puzzles
    _submit(course, "alice", solution, puzzles)
    _submit(course, "bob", mistake, puzzle_mistake)
    make_exercises.nbgrader(course, "autograde", ASSIGNMENT, "--force")
    make_exercises.nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")

    scores = _scores(course)
    assert all(score == top > 0 for score, top in scores["alice"].values()), scores
    assert scores["bob"]["vector_add"] == (0, scores["alice"]["vector_add"][1]), scores
    assert scores["bob"]["vector_scale"] == scores["alice"]["vector_scale"], scores
    assert scores["alice"]["puzzle_zip"] == (1, 1) and scores["bob"]["puzzle_zip"] == (0, 1)
    assert scores["bob"]["puzzle_map"] == (1, 1), scores  # the mistake is in zip alone

    feedback = (course / "feedback" / "bob" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "check_vector_add: not yet." in feedback
    assert "you computed a - b: add instead" in feedback
    assert "puzzle zip: not yet." in feedback and "you computed a - b" in feedback
    assert "AssertionError" in feedback
    good = (course / "feedback" / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "check_vector_add: PASSED." in good and "AssertionError" not in good


def test_every_marked_region_is_in_a_cell_nbgrader_accepts():
    # generate_assignment refuses a solution region outside a solution cell and a hidden-test
    # region outside a grade cell ("Solution region detected in a non-solution cell")
    for path in make_exercises.notebooks(make_exercises.ROOT / "notebooks"):
        for cell in jupytext.read(path).cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and "BEGIN SOLUTION" in cell.source:
                assert meta.get("solution"), f"{path.name}: {cell.source[:60]!r}"
            if cell.cell_type == "code" and "BEGIN HIDDEN TESTS" in cell.source:
                assert meta.get("grade"), f"{path.name}: {cell.source[:60]!r}"
