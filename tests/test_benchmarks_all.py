"""``python -m nnlib.bench.all --store`` writes a labelled file that notebook 03 draws beside
the live figures; the GPU rooflines are a model from published figures."""

import json

import matplotlib
import numpy as np
import pytest

from nnlib.bench import all as bench_all
from nnlib.bench import common
from nnlib.bench.common import stored_results
from nnlib.bench.roofline import GPUS, dense_intensity, roof

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows(rate):
    return [{"n": n, "batch": b, "pass": p, "blocked": rate * b}
            for n in (64, 1024) for b in (1, 16, 64) for p in ("fwd", "fwd+bwd")]


META = {"device": "NVIDIA GeForce RTX 4090", "type": "GPU", "driver": "550.54",
        "date": "2026-01-02", "profile": "device"}


def test_a_stored_file_is_drawn_beside_the_live_figures(tmp_path):
    (tmp_path / "nvidia-geforce-rtx-4090.json").write_text(
        json.dumps({"meta": META, "dense": rows(100.0), "launch": []}))
    (tmp_path / "other.json").write_text(json.dumps({"meta": META, "launch": []}))
    stored = stored_results("dense", tmp_path)
    assert [s["meta"]["device"] for s in stored] == [META["device"]]  # only files with dense
    fig, ax = plt.subplots()
    bench_all.plot_dense(ax, rows(1.0), "pthread-AMD EPYC", stored)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[0] == "pthread-AMD EPYC (measured now)"
    assert all(word in labels[1] for word in ("RTX 4090", "550.54", "2026-01-02", "stored"))
    assert list(ax.get_lines()[1].get_ydata()) == [100.0, 1600.0, 6400.0]
    plt.close(fig)


def test_file_names_name_the_device_and_the_profile():
    assert bench_all.file_name(META) == "nvidia-geforce-rtx-4090.json"
    assert bench_all.file_name(dict(META, device="pthread-AMD EPYC", profile="gpu")) == \
        "pthread-amd-epyc-gpu-profile.json"


@pytest.mark.slow
def test_one_command_stores_every_benchmark_with_its_labels(tmp_path, rt, monkeypatch):
    # each benchmark's own JSON goes to tmp_path/bench, not build/bench/, which
    # tests/test_benchmarks.py reads back, perhaps at the same time on another xdist worker
    monkeypatch.setattr(common, "OUT", tmp_path / "bench")
    result = bench_all.main(["--quick", "--store", "--folder", str(tmp_path)])
    [path] = tmp_path.glob("*.json")
    saved = json.loads(path.read_text())
    assert saved == json.loads(json.dumps(result))
    assert {"device", "driver", "platform_version", "date", "type", "profile"} <= set(saved["meta"])
    assert saved["meta"]["device"] == rt.device.name.strip()
    assert saved["dense"] and saved["train_step"] and saved["launch"]


def test_gpu_rooflines_are_a_model_of_published_figures():
    for name, (gflops, gbps, source) in GPUS.items():
        assert gflops > 1000 and gbps > 100 and source, name
    low, high = dense_intensity(1024, 1024, 1), 1e4
    gflops, gbps, _ = GPUS["NVIDIA H100 SXM"]
    assert roof(low, gflops, gbps) == pytest.approx(low * gbps)  # memory-bound at batch 1
    assert roof(high, gflops, gbps) == gflops
    assert np.all(np.diff(roof(np.logspace(-1, 3, 20), gflops, gbps)) >= 0)
