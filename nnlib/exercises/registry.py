"""The one home of the checked exercises: each :class:`Exercise` record holds its checker, the
notebook that asks for it, its points and its hints. ``nnlib.exercises`` exports the checkers,
the notebooks' grade cells and the teacher's guide are checked against it
(tests/test_exercises.py), and the planted mistakes each checker must recognise are keyed by
its name (tests/planted.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .worker import in_worker


@dataclass(frozen=True)
class Exercise:
    name: str  # "dense_forward": the grade cell's grade_id, check_<name> the checker
    notebook: str  # "01_dense_kernels"
    points: int
    hints: tuple  # a nudge, then the formula
    check: Callable
    kernel: bool  # checks the student's kernels/*.cl, else a Python function
    shortcuts: tuple  # what the student's function may not use (see worker.shortcuts_blocked)
    puzzle: bool = False  # a kernel puzzle (nnlib.exercises.puzzles), checked by name


EXERCISES: dict[str, Exercise] = {}


def exercise(notebook: str, points: int, kernel: bool, hints: tuple, shortcuts: tuple = ()):
    """Registers the decorated ``check_<name>``, which runs in the worker process."""
    def register_check(check):
        name = check.__name__.removeprefix("check_")
        run = in_worker(check, kernel, shortcuts)
        register(Exercise(name, notebook, points, tuple(hints), run, kernel, tuple(shortcuts)))
        return run
    return register_check


def register(record: Exercise) -> None:
    if record.name in EXERCISES:
        raise ValueError(f"two exercises named {record.name!r}")
    if len(record.hints) != 2:
        raise ValueError(f"{record.name}: hints are (a nudge, the formula)")
    EXERCISES[record.name] = record


def of_notebook(notebook: str) -> list[Exercise]:
    """The exercises ``notebook`` (e.g. "01_dense_kernels", or its number "01") asks for."""
    found = [e for e in EXERCISES.values() if e.notebook.split("_")[0] == notebook.split("_")[0]]
    if not found:
        known = sorted({e.notebook for e in EXERCISES.values()})
        raise KeyError(f"no exercises in notebook {notebook!r}; notebooks with exercises: "
                       f"{', '.join(known)}")
    return found


def hint(name: str, level: int = 1) -> None:
    """Prints a hint for the exercise ``name`` (e.g. "dense_forward"): level 1 a nudge, 2 the
    formula."""
    name = name.removeprefix("check_")
    if name not in EXERCISES:
        raise KeyError(f"no exercise named {name!r}; known: {', '.join(sorted(EXERCISES))}")
    tiers = EXERCISES[name].hints
    if not 1 <= level <= len(tiers):
        raise ValueError(f"hint levels for {name} are 1 (a nudge) to {len(tiers)} (the formula)")
    print(tiers[level - 1])
