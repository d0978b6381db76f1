"""The wheel ships the kernels but not the benchmarks, and environment.yml names pyproject's
dependencies and the course extra."""

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from .tools import load_tool

ROOT = Path(__file__).resolve().parent.parent


def _names(requirements) -> set:
    return {re.split(r"[\[<>=!~ ]", r.strip(), maxsplit=1)[0].lower() for r in requirements}


def test_environment_yml_names_the_dependencies_of_the_course():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["course"]
    want = _names(deps) - {"pyopencl"} | {"pyopencl", "pocl"}
    entries = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    pip = next(e["pip"] for e in entries if isinstance(e, dict))
    listed = _names([e for e in entries if isinstance(e, str)] + pip)
    assert want <= listed, f"environment.yml lacks {sorted(want - listed)}"
    assert listed - want <= {"python", "pip", "ocl-icd-system"}, sorted(listed - want)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(out), str(ROOT)], check=True, capture_output=True)
    return next(out.glob("nnlib-*.whl"))


@pytest.mark.slow
def test_wheel_holds_every_kernel_and_no_benchmark(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for cl_file in (ROOT / "kernels").glob("*.cl"):
        assert f"nnlib/kernels/{cl_file.name}" in names
    assert "nnlib/optim.py" in names
    assert not [n for n in names if n.startswith("nnlib/bench")]


@pytest.mark.slow
def test_installed_wheel_runs_a_kernel(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    code = ("import numpy as np, nnlib; from nnlib import runtime; "
            "assert 'site' in str(runtime.kernel_dir()), runtime.kernel_dir(); "
            "print(nnlib.Dense(3, 2, seed=0).forward(np.ones((1, 3))).get().shape)")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "(1, 2)"


@pytest.mark.slow
def test_installed_wheel_holds_no_answer_but_nnlib_kernels(wheel, tmp_path):
    # The puzzles' and the notebooks' solutions are in no file of the installed wheel; the
    # answers of the exercises cut into nnlib's own kernels may stand only in nnlib/kernels/
    # (the library runs them).
    make_exercises = load_tool("make_exercises")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, capture_output=True)
    everything = make_exercises.solution_lines()
    in_kernels = make_exercises.solution_lines(notebook_dir=tmp_path / "none",
                                               puzzle_dir=tmp_path / "none")
    answers = everything - in_kernels
    assert len(answers) > 50  # the puzzles' and notebooks' lines, not a handful
    installed = [p for p in target.rglob("*") if p.is_file() and p.suffix in (".py", ".cl", ".h")]
    assert installed
    for path in installed:
        text = path.read_text(errors="replace")
        leaks = [line for line in (everything if "kernels" not in path.parts else answers)
                 if line in text]
        assert not leaks, f"{path.relative_to(target)} holds {leaks[:3]}"
