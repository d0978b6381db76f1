"""Issue 32, the environment as hostile input: POCL_MAX_PTHREAD_COUNT, PYOPENCL_CTX, NNLIB_*
and the file-size limit are checked before the first OpenCL call, with a message saying what
is allowed; a forked child of a process that used OpenCL gets an error naming 'spawn' instead
of hanging. Values that once crashed the driver run in their own process."""

import subprocess
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnlib import environment
from nnlib.environment import EnvironmentSettingError

from .isolated import ROOT, child_env, run_isolated


def pocl_threads_ok(text: str) -> bool:
    value = text.strip()
    return value == "" or (value.isascii() and value.isdigit() and 1 <= int(value) <= 4096)


ENV_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                   max_size=25)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.integers(-10**25, 10**25).map(str), ENV_TEXT,
                 st.sampled_from(["-1", "0", "1", "4096", "4097", "100000", " 8 ", "1e3",
                                  "12345678901234567890", "\u0663"])))
def test_pocl_threads_are_accepted_exactly_when_pocl_can_start_them(value):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POCL_MAX_PTHREAD_COUNT", value)
        if pocl_threads_ok(value):
            environment._check_pocl_threads()
        else:
            with pytest.raises(EnvironmentSettingError, match="an integer from 1 to 4096"):
                environment._check_pocl_threads()


@pytest.mark.parametrize("name, value, words", [
    ("PYOPENCL_CTX", "0:0:0", "'<platform>:<device>'"),
    ("NNLIB_TUNE", "yes", "NNLIB_TUNE must be one of"),
    ("NNLIB_PROFILE", "tpu", "unknown nnlib profile"),
    ("NNLIB_CHECK_ARGS", "2", "allowed are"),
])
def test_bad_nnlib_and_context_values_say_what_is_allowed(monkeypatch, name, value, words):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=words):
        environment._check_context()
        environment._check_nnlib()


def test_tuning_dir_that_is_a_file_is_refused(monkeypatch, tmp_path):
    (tmp_path / "f").write_text("")
    monkeypatch.setenv("NNLIB_TUNING_DIR", str(tmp_path / "f"))
    with pytest.raises(EnvironmentSettingError, match="is a file"):
        environment._check_nnlib()


def _first_layer_call(env: dict, limit_fsize: int | None = None) -> subprocess.CompletedProcess:
    """A fresh process makes its first layer call with ``env`` (and a file-size limit)."""
    code = ("import resource, sys\n"
            + (f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_fsize}, {limit_fsize}))\n"
               if limit_fsize else "")
            + "import numpy as np, nnlib\n"
              "try:\n"
              "    nnlib.Dense(3, 2).forward(np.ones((1, 3)))\n"
              "except nnlib.EnvironmentSettingError as err:\n"
              "    sys.stderr.write(f'REFUSED {err}'); sys.stderr.flush()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT,
                          env=child_env(env, NNLIB_TUNE="0"))


@pytest.mark.parametrize("value", ["-1", "12345678901234567890", "100000"])
def test_pocl_threads_that_crashed_pocl_are_refused_before_it_starts(value):
    import os
    run = _first_layer_call({**os.environ, "POCL_MAX_PTHREAD_COUNT": value})
    assert run.returncode == 0 and "REFUSED POCL_MAX_PTHREAD_COUNT" in run.stderr, run.stderr


@pytest.mark.parametrize("limit", [64, 1024])
def test_a_file_size_limit_is_named_not_blamed_on_the_cpu(limit):
    import os
    run = _first_layer_call(dict(os.environ), limit)
    assert run.returncode == 0 and "REFUSED the file-size limit" in run.stderr, run.stderr
    assert "newer than" not in run.stderr


def test_a_forked_child_gets_an_error_naming_spawn_instead_of_hanging():
    out = run_isolated("""
        import multiprocessing as mp, os, numpy as np, nnlib
        layer = nnlib.Dense(4, 2)
        layer.forward(np.ones((1, 4))).get()
        def child(_):
            out = []
            for call in (lambda: layer.forward(np.ones((1, 4))), nnlib.Runtime,
                         lambda: nnlib.get_runtime().to_device(np.ones(3))):
                try:
                    call()
                    out.append("ran")
                except nnlib.ForkedProcessError as err:
                    out.append("spawn" in str(err))
            return out
        with mp.get_context("fork").Pool(1) as pool:
            print(pool.map(child, [0]))
        with mp.get_context("spawn").Pool(1) as pool:  # the way that works
            print(pool.map(abs, [-2]))
    """, timeout=120)
    assert out.splitlines() == ["[[True, True, True]]", "[2]"]


def test_only_oclgrind_installed_says_what_to_install(monkeypatch):
    from nnlib import opencl_devices

    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    oclgrind = SimpleNamespace(platform=SimpleNamespace(name="Oclgrind"), name="Oclgrind")
    monkeypatch.setattr(opencl_devices, "all_devices", lambda: [oclgrind])
    with pytest.raises(opencl_devices.DeviceNotFoundError, match="pip install"):
        opencl_devices.find_device(None)
