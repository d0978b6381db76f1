"""Checks for the workbook's exercises: is a student's kernel (or function) right, and if not, why?

    from nnlib import exercises
    exercises.check_dense_forward("../kernels")   # the folder holding your copy of dense.cl
    exercises.hint("dense_forward", 1)            # a nudge; level 2: the formula

Each check runs the student's code on awkward cases (batch 1, odd sizes, sizes above the
device's largest work-group) against ``nnlib.reference`` and returns a :class:`Verdict`: it
displays as a short report (which case failed, the largest error, a hint) and is truthy when
every case passes. Kernel checks run in a worker process (:mod:`.worker`), so a kernel that
crashes or never ends becomes a verdict instead of killing the notebook; Ctrl-C stops a check.
``simulate=True`` runs the kernel on the Oclgrind simulator, which names the line of an
out-of-bounds access.

The package: :mod:`.registry` (the exercises, one record each), :mod:`.verdicts` (cases and
reports), :mod:`.worker`, :mod:`.harness` (what kernel checks share), and one module of checks
per notebook (``nb00_devices`` ... ``nb07_catch``).
"""

from . import (  # noqa: F401 (they register)
               nb00_devices,
               nb01_dense,
               nb02_metrics,
               nb03_speed,
               nb04_optimizers,
               nb05_fft,
               nb06_primer,
               nb07_catch,
               puzzles,  # the worker runs its checks too
)
from .registry import EXERCISES, Exercise, hint, of_notebook
from .verdicts import Verdict
from .worker import TIMEOUT

CHECKS = {f"check_{e.name}": e.check for e in EXERCISES.values() if not e.puzzle}
globals().update(CHECKS)

__all__ = ["EXERCISES", "Exercise", "TIMEOUT", "Verdict", "hint", "of_notebook", "puzzles",
           *sorted(CHECKS)]
