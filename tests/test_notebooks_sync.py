"""Every notebook is a jupytext pair: the .py source and the executed .ipynb hold the same cells."""

from pathlib import Path

import jupytext
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
PAIRS = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def test_every_notebook_has_both_files():
    py = {p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.py")}
    ipynb = {p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")}
    assert py, "no notebooks found"
    assert py == ipynb, f"unpaired: {sorted(py ^ ipynb)}"


@pytest.mark.parametrize("stem", PAIRS)
def test_pair_in_sync(stem):
    source = jupytext.read(NOTEBOOKS / f"{stem}.py")
    executed = jupytext.read(NOTEBOOKS / f"{stem}.ipynb")
    assert [(c.cell_type, c.source.strip()) for c in executed.cells] == \
        [(c.cell_type, c.source.strip()) for c in source.cells], \
        f"run `make notebook NB=notebooks/{stem}.py` to refresh {stem}.ipynb"


@pytest.mark.parametrize("stem", PAIRS)
def test_notebook_is_executed(stem):
    nb = jupytext.read(NOTEBOOKS / f"{stem}.ipynb")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), \
        f"{stem}.ipynb has unexecuted cells: run `make notebook NB=notebooks/{stem}.py`"
