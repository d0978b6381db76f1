"""The Lab server of ``make lab`` (root: notebooks/) finds the jupytext settings: saving a
notebook through its contents manager, as Lab's autosave does, leaves the paired .py as it is
in the repository (no ``jupytext_version`` line, nothing else changed)."""

import shutil
from pathlib import Path

import pytest
from jupytext import TextFileContentsManager

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
STEMS = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.py"))


@pytest.mark.parametrize("stem", STEMS)
@pytest.mark.parametrize("opened", [".py", ".ipynb"])
def test_saving_in_lab_keeps_the_py_twin_unchanged(tmp_path, stem, opened):
    for name in ("jupytext.toml", f"{stem}.py", f"{stem}.ipynb"):
        shutil.copy(NOTEBOOKS / name, tmp_path / name)
    cm = TextFileContentsManager(root_dir=str(tmp_path))  # the server's root: notebooks/
    assert cm.get_config(stem + opened) is not None, "jupytext.toml not found from Lab's root"
    cm.save(cm.get(stem + opened), stem + opened)
    saved = (tmp_path / f"{stem}.py").read_text()
    assert "jupytext_version" not in saved.replace("-jupytext.text_representation.jupytext_version", "")
    assert saved == (NOTEBOOKS / f"{stem}.py").read_text()
