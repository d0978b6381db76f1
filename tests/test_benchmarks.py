"""The benchmarks run end to end at tiny sizes (their figures are not checked here)."""

import json

import pytest

from benchmarks import dense
from benchmarks.common import OUT


@pytest.mark.slow
def test_dense_benchmark_runs_and_writes_json():
    rows = dense.main(["--widths", "33", "--batches", "1", "5", "--repeat", "1"])
    assert len(rows) == 4 and all(r["fast"] > 0 and r["numpy_2"] > 0 for r in rows)
    saved = json.loads((OUT / "dense.json").read_text())
    assert saved["rows"] == rows and "device" in saved["meta"]
