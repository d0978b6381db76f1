"""The kernel puzzles (nnlib.exercises.puzzles): each solution passes and draws the reference's
picture, each stub and planted mistake fails with its hint, budgets are counted exactly on
Oclgrind (the same verdict every time) and fail for kernels without the puzzle's memory
discipline, and the stubs hold no solution line."""

from pathlib import Path

import matplotlib
import numpy as np
import pytest

from nnlib.exercises import budget, puzzles
from nnlib.opencl_devices import find_device
from nnlib.sources import kernel_dir
from puzzles.planted import MISTAKES, NO_REUSE, OUT_OF_BOUNDS, RACE
from puzzles.stubs import SOLUTIONS, stubs

from .tools import load_tool

matplotlib.use("Agg")

MARKER = load_tool("make_exercises").MARKER
NAMES = list(puzzles.PUZZLES)
PLANTED = [(name, *m) for name, mistakes in MISTAKES.items() for m in mistakes]


def _oclgrind() -> bool:
    try:
        find_device("oclgrind")
        return True
    except Exception:
        return False


needs_oclgrind = pytest.mark.skipif(not _oclgrind(), reason="Oclgrind is not installed")


def _audited(name: str) -> list:
    """Oclgrind's marker for a puzzle whose check runs its example there (a budget or an
    audit for races): without Oclgrind that check always says "not yet"."""
    pz = puzzles.PUZZLES[name]
    return [needs_oclgrind] if pz.budget or pz.audit else []


# the mistakes that only Oclgrind's audit names, on any device
AUDIT_HINTS = (RACE, OUT_OF_BOUNDS)


def _body(text: str, kernel: str) -> tuple[int, int]:
    """Where the body of ``kernel`` lies in ``text``."""
    start = text.index("{", text.index(f"kernel void {kernel}("))
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return start, end + 1
    raise ValueError(f"{kernel}: unbalanced braces")


def _variant(folder, name: str, edit) -> str:
    """A copy of the puzzle's solution file in ``folder`` whose kernel body is ``edit(body)``."""
    pz = puzzles.PUZZLES[name]
    text = (SOLUTIONS / f"{pz.topic}.cl").read_text()
    start, end = _body(text, pz.kernel)
    (folder / f"{pz.topic}.cl").write_text(text[:start] + edit(text[start:end]) + text[end:])
    return str(folder)


def _replaced(old: str, new: str):
    def edit(body):
        assert body.count(old) == 1, f"{old!r} occurs {body.count(old)} times"
        return body.replace(old, new)
    return edit


def _whole(new_body: str):
    return lambda body: "{" + new_body + "}"


def test_every_puzzle_has_planted_mistakes_and_a_notebook():
    assert len(NAMES) >= 16
    assert set(MISTAKES) == set(NAMES)
    few = {name: len(m) for name, m in MISTAKES.items() if len(m) < 3}
    assert not few, few
    assert set(NO_REUSE) == {name for name, pz in puzzles.PUZZLES.items() if pz.budget}
    for pz in puzzles.PUZZLES.values():
        assert (SOLUTIONS / f"{pz.topic}.cl").is_file()
        assert not (kernel_dir() / f"{pz.topic}.cl").exists()  # never an nnlib kernel
        assert pz.notebook[:2] in ("00", "03", "05", "06")


@pytest.fixture(scope="module")
def stub_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stubs")
    for name, text in stubs().items():
        (folder / name).write_text(text)
    return folder


def test_stubs_hold_no_solution_line(stub_folder):
    for path in SOLUTIONS.glob("*.cl"):
        solution = {line.strip() for line in path.read_text().splitlines()}
        stub = {line.strip() for line in (stub_folder / path.name).read_text().splitlines()}
        removed = {line for line in solution - stub if line and not line.startswith("//")
                   and not MARKER.match(line)}
        assert removed, path.name
        assert not removed & stub
        assert "YOUR CODE HERE" in (stub_folder / path.name).read_text()


@pytest.mark.parametrize("name", [pytest.param(n, marks=_audited(n)) for n in NAMES])
def test_solution_passes_and_touches_what_the_reference_does(name):
    verdict = puzzles.check(name, SOLUTIONS)
    assert verdict, verdict.report
    found = puzzles.kernel_touches(SOLUTIONS, name)
    want = puzzles.reference_touches(name)
    assert not found["past_end"] and found["written"].all()
    np.testing.assert_array_equal(found["depends"], want["depends"])


@pytest.mark.parametrize("name", NAMES)
def test_stub_is_not_yet(stub_folder, name):
    verdict = puzzles.check(name, stub_folder)
    assert not verdict and "not yet" in verdict.report, verdict.report


@pytest.mark.parametrize("name,right,wrong,message", [
    pytest.param(*p, id=f"{p[0]}-{i}", marks=[needs_oclgrind] if p[3] in AUDIT_HINTS else [])
    for i, p in enumerate(PLANTED)])
def test_planted_mistake_is_caught_with_its_hint(tmp_path, name, right, wrong, message):
    verdict = puzzles.check(name, _variant(tmp_path, name, _replaced(right, wrong)))
    assert not verdict
    assert message in verdict.report, verdict.report


@needs_oclgrind
@pytest.mark.parametrize("name", list(NO_REUSE))
def test_budget_is_exact_and_fails_without_reuse(tmp_path, name):
    pz = puzzles.PUZZLES[name]
    body, broken = NO_REUSE[name]
    naive = _variant(tmp_path, name, _whole(body))
    assert puzzles.check(name, naive).report.count("FAILED") == 1  # right, over budget
    runs = [(puzzles.audit(pz, SOLUTIONS), puzzles.audit(pz, naive)) for _ in range(3)]
    assert all(run == runs[0] for run in runs)  # every count, every time
    solution, over = runs[0]
    assert not solution.races and not solution.invalid
    assert puzzles.budget_report(pz, solution) == []
    assert any(line.startswith(broken) for line in puzzles.budget_report(pz, over))


@needs_oclgrind
def test_blocked_dense_budget_tells_blocking_from_no_reuse(tmp_path):
    reference = kernel_dir()
    text = (reference / "blocked.cl").read_text()
    start, end = text.index("// ### BEGIN SOLUTION"), text.index("// ### END SOLUTION")
    (tmp_path / "blocked.cl").write_text(text[:start] + """
    for (int r = 0; r < R && b0 + r < batch; ++r)
        for (int c = 0; c < R && j0 + c < n_out; ++c) {
            float acc = 0.0f;
            for (int k = 0; k < n_in; ++k)
                acc += x[(b0 + r) * n_in + k] * w[(j0 + c) * n_in + k];
            y[(size_t)(b0 + r) * n_out + j0 + c] = activate(acc + bias[j0 + c], act);
        }
""" + text[end:].split("\n", 1)[1])
    for _ in range(3):
        budget.blocked_dense_case(reference, 4).run()
        with pytest.raises(budget.NotYet, match="R x R blocking must cut"):
            budget.blocked_dense_case(tmp_path, 4).run()
    got, naive = budget.blocked_dense_loads(reference, 4)
    assert got <= naive / 4 + 1 < naive


def test_budget_parses_oclgrind_counts():
    log = ("Instructions executed for kernel 'k':\n"
           "              10 - load global (40 bytes)\n"
           "               4 - call _Z6vload4mPU3AS1Kf()\n"
           "               8 - store local (32 bytes)\n"
           "              16 - call _Z7barrierj()\n"
           "               2 - call _Z10atomic_incPU3AS1Vi()\n\n"
           "Instructions executed for kernel 'other':\n"
           "              99 - load global (396 bytes)\n")
    b = budget.parse(log, "k", work_items=8, work_groups=2)
    assert (b.global_loads, b.local_stores, b.barriers, b.atomics) == (26, 8, 16, 2)
    assert b.global_loads_per_item == 26 / 8 and b.barriers_per_item == 2


def test_pictures_draw_reference_and_student(stub_folder):
    fig = puzzles.show("window", SOLUTIONS)
    assert [ax.get_title() for ax in fig.axes] == ["window: reference", "window: your kernel"]
    found = puzzles.kernel_touches(stub_folder, "map")
    assert not found["written"].any() and not found["depends"].any()  # a stub writes nothing


@needs_oclgrind
def test_check_runs_on_oclgrind():
    assert puzzles.check("reverse", SOLUTIONS, simulate=True)


def test_unknown_puzzle_is_named():
    with pytest.raises(KeyError, match="the puzzles: map, zip"):
        puzzles.check("nope", SOLUTIONS)


def test_solutions_stay_out_of_the_wheel():
    import tomllib
    wheel = tomllib.loads((SOLUTIONS.parent.parent / "pyproject.toml").read_text())[
        "tool"]["hatch"]["build"]["targets"]["wheel"]
    shipped = [*wheel["packages"], *wheel.get("force-include", {})]
    assert not [path for path in shipped if path.split("/")[0] == "puzzles"], shipped


def test_no_solution_line_is_in_nnlib(stub_folder):
    """The wheel is nnlib/ and kernels/: no line a stub lacks may appear in nnlib's Python,
    hints included, nor in kernels/ beyond lines as generic as nnlib's own kernels'."""
    from nnlib.sources import kernel_dir as kernels
    removed = set()
    for path in SOLUTIONS.glob("*.cl"):
        stub = {line.strip() for line in (stub_folder / path.name).read_text().splitlines()}
        removed |= {line.strip() for line in path.read_text().splitlines()
                    if len(line.strip()) > 12 and line.strip() not in stub
                    and not line.strip().startswith("//")}
    common = {line.strip() for p in kernels().glob("*.cl") for line in p.read_text().splitlines()}
    removed -= common  # lines as generic as "float sum = 0.0f;", which nnlib's kernels hold
    package = Path(puzzles.__file__).resolve().parent.parent
    found = {(str(p), line) for p in package.rglob("*.py") for line in removed
             if line in p.read_text()}
    assert not found, sorted(found)[:10]


@needs_oclgrind
def test_budget_printout_marks_what_is_over(tmp_path, capsys):
    puzzles.budget("transpose", SOLUTIONS)
    puzzles.budget("transpose", _variant(tmp_path, "transpose", _whole(NO_REUSE["transpose"][0])))
    within, over = capsys.readouterr().out.split("puzzle transpose, counted")[1:]
    assert "  ok      local loads per element written: 1," in within and "OVER" not in within
    assert "  OVER    local loads per element written: 0," in over


@needs_oclgrind
def test_races_are_reported_after_a_thousand_errors(tmp_path):
    """Oclgrind stops reporting after 1000 errors in a process unless told otherwise: a worker
    that audited many wrong kernels must still see the next race."""
    racy = _variant(tmp_path, "window", _replaced("barrier(CLK_LOCAL_MEM_FENCE);", ""))
    counts = [len(puzzles.audit(puzzles.PUZZLES["window"], racy).races) for _ in range(32)]
    assert counts[0] * 32 > 1000 and counts == counts[:1] * 32
