"""What a check reports: a :class:`Verdict` built from :class:`Case` runs of the student's
code against the reference, naming the first failing case and, where a known mistake
matches, its hint."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyopencl as cl


class NotYet(Exception):
    """Stops a check (or one case) with what to tell the student."""


@dataclass
class Verdict:
    check: str
    passed: bool
    report: str

    def __bool__(self):
        return self.passed

    def __repr__(self):
        return self.report


@dataclass
class Case:
    """One run of the student's code: ``run()`` returns its result, ``want`` the reference."""

    label: str
    run: Callable[[], object]
    want: np.ndarray
    out: str  # the output's name in messages
    mistakes: dict = field(default_factory=dict)  # hint -> what that mistake produces
    hint: str = ""  # said when no known mistake matches


def verdict(check: str, what: str, cases: Callable[[], list], rtol=1e-4, atol=1e-5) -> Verdict:
    """Run every case and write the report; a NotYet raised while preparing stops early."""
    try:
        results = []
        for case in cases():
            try:
                problem = find_problem(case, case.run(), rtol, atol)
            except NotYet as err:
                problem = str(err)
            except cl.Error as err:
                problem = f"the launch failed: {err}"
            results.append((case, problem))
    except NotYet as err:
        return Verdict(check, False, f"{check}: not yet. {err}")
    failed = [r for r in results if r[1]]
    if not failed:
        return Verdict(check, True, f"{check}: PASSED. {what} matches the reference in all "
                                    f"{len(results)} cases.")
    lines = [f"{check}: not yet. {len(failed)} of {len(results)} cases fail ({what})."]
    for case, problem in results:
        lines.append(f"  {'FAILED' if problem else 'ok':6}  {case.label}"
                     + (f": {problem}" if problem else ""))
    return Verdict(check, False, "\n".join(lines))


def find_problem(case: Case, got, rtol: float, atol: float) -> str | None:
    """None if ``got`` matches ``case.want``, else what is wrong, with a hint: a known mistake's
    when exactly one matches ``got`` (when several do, the case cannot tell them apart and
    gives its general hint)."""
    want, out = case.want, case.out
    got = _numbers(got, want, out)
    if isinstance(got, str):
        return got
    if got.shape != want.shape:
        return f"{out} has shape {got.shape}, expected {want.shape}"
    bad = ~np.isfinite(got) & np.isfinite(want)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        what = "NaN" if np.isnan(got[first]) else "inf"
        message = (f"{bad.sum()} of {bad.size} values of {out} are NaN or inf where the reference "
                   f"is finite, the first ({what}) at {out}{list(first)}: an overflow (exp of a "
                   f"large number), 0 * inf, or a read past the end of an input?")
        return f"{message} Hint: {case.hint}" if case.hint else message
    err = np.abs(got - want)
    if np.all(err <= atol + rtol * np.abs(want)):
        return None
    at = np.unravel_index(np.nanargmax(np.where(np.isnan(err), np.inf, err)), err.shape)
    where = f" at {out}{[int(i) for i in at]}" if want.ndim else ""
    message = f"max |error| {err[at]:.2g}{where} (got {got[at]:.4g}, expected {want[at]:.4g})"
    matching = [hint for hint, wrong in case.mistakes.items()
                if np.shape(wrong) == want.shape and np.allclose(got, wrong, rtol=rtol, atol=atol)]
    if len(matching) == 1:
        return f"{message}. Hint: {matching[0]}"
    return f"{message}. Hint: {case.hint}" if case.hint else message


def _numbers(got, want: np.ndarray, out: str):
    """``got`` as an array of ``want``'s dtype, or what is wrong with its type."""
    if got is None:
        return f"got None instead of {out}"
    if isinstance(got, (str, bytes)):
        return f"{out} should be a number, got the text {got!r:.40}"
    try:
        array = np.asarray(got)
    except Exception as err:  # the student's object: report it, never a traceback
        return f"{out} could not be read as numbers: {type(err).__name__}: {err}"
    kinds = "biufc" if want.dtype.kind == "c" else "iu" if want.dtype.kind in "iu" else "biuf"
    if array.dtype.kind not in kinds:
        wanted = {"biufc": "numbers", "iu": "integer counts", "biuf": "real numbers"}[kinds]
        return f"{out} should hold {wanted}, got {type(got).__name__} of {array.dtype}"
    return array.astype(want.dtype)
