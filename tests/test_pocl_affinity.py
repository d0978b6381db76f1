"""POCL_AFFINITY=1 makes PoCL pin its worker thread i to CPU i; where such a CPU does not
exist or is not one the process may use, PoCL aborts (or leaves a taskset's CPUs): nnlib
refuses that value before the first OpenCL call, with a message (nnlib.environment)."""

import os
import subprocess
import sys

import pytest

from nnlib import environment
from nnlib.environment import EnvironmentSettingError

from .isolated import ROOT, child_env

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"),
                                reason="PoCL pins threads on Linux only")


@pytest.fixture
def env(monkeypatch):
    for name in ("POCL_AFFINITY", "POCL_MAX_PTHREAD_COUNT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    return monkeypatch


@pytest.mark.parametrize("value, threads, cpus", [
    ("1", None, {0, 1, 2, 3}), ("1", "2", {0, 1, 3}), ("0", "6", {0, 1, 2, 3}),
    ("", "6", {2, 3}), ("yes", "6", {2, 3}), (None, "6", {2, 3})])
def test_a_pin_pocl_can_make_or_no_pin_is_accepted(env, value, threads, cpus):
    if value is not None:
        env.setenv("POCL_AFFINITY", value)
    if threads:
        env.setenv("POCL_MAX_PTHREAD_COUNT", threads)
    env.setattr(os, "sched_getaffinity", lambda pid: cpus)
    environment._check_pocl_affinity()
    assert os.environ.get("POCL_AFFINITY") == value


@pytest.mark.parametrize("value, threads, cpus", [
    ("1", "6", {0, 1, 2, 3}),      # more workers than CPUs: PoCL aborts
    ("1", None, {1, 2, 3}),        # a container's CPU set or a taskset without CPU 0
    ("10", "2", {2, 3})])
def test_a_pin_pocl_cannot_make_is_refused_with_the_allowed_cpus(env, value, threads, cpus):
    env.setenv("POCL_AFFINITY", value)
    if threads:
        env.setenv("POCL_MAX_PTHREAD_COUNT", threads)
    env.setattr(os, "sched_getaffinity", lambda pid: cpus)
    with pytest.raises(EnvironmentSettingError,
                       match=rf"POCL_AFFINITY='{value}'.*CPUs \[.*POCL_AFFINITY=0"):
        environment._check_pocl_affinity()


def test_a_pin_that_made_pocl_abort_is_refused_before_it_starts():
    code = ("import sys, numpy as np, nnlib\n"
            "try:\n"
            "    nnlib.Dense(3, 2).forward(np.ones((1, 3))).get()\n"
            "except nnlib.EnvironmentSettingError as err:\n"
            "    sys.stderr.write(f'REFUSED {err}')\n")
    env = child_env(POCL_AFFINITY="1", POCL_MAX_PTHREAD_COUNT=str(os.cpu_count() + 2),
                    NNLIB_TUNE="0")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env=env)
    assert run.returncode == 0 and "REFUSED POCL_AFFINITY" in run.stderr, run.stderr


@pytest.mark.parametrize("stored, preset, cpus, want", [
    ("1", None, {0, 1, 2, 3}, "1"),   # doctor measured pinned fastest: pinned
    ("0", None, {0, 1, 2, 3}, None),  # measured: unpinned
    (None, None, {0, 1, 2, 3}, None),  # never measured
    ("1", "0", {0, 1, 2, 3}, "0"),    # the reader's own value stays
    ("1", None, {1, 2, 3}, None)])    # PoCL could not pin here
def test_the_doctors_pin_is_applied_where_the_variable_is_unset(env, tuning_cache, stored,
                                                               preset, cpus, want):
    from nnlib import tuning
    tuning.set_preferred_device("PoCL 9", "pthread-x", {}, pocl_affinity=stored)
    if preset is not None:
        env.setenv("POCL_AFFINITY", preset)
    env.setattr(os, "sched_getaffinity", lambda pid: cpus)
    env.setattr(environment, "_pin_applied", False)
    environment._apply_stored_pin()
    assert os.environ.get("POCL_AFFINITY") == want
    assert environment.reader_set_pin() == (preset is not None)
