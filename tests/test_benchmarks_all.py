"""``python -m nnlib.bench.all --store`` measures every speed goal (nnlib.bench.goals) and
writes a labelled file that notebook 03 draws beside the live figures; the GPU rooflines are
a model from published figures. No timing is asserted: only the rows, their reading of each
benchmark and the file's format."""

import json
import os

from types import SimpleNamespace

import matplotlib
import numpy as np
import pyopencl as cl
import pytest

from nnlib.bench import all as bench_all
from nnlib.bench import catch_speed, common, goals
from nnlib.bench import complex as bench_complex
from nnlib.bench.common import stored_results
from nnlib.bench.roofline import GPUS, dense_intensity, roof
from nnlib.opencl_devices import find_device

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


CPU_META = dict(META, type="CPU", device="pthread-AMD EPYC", cpu="AMD EPYC 9R14", isa="AVX-512",
                platform="Portable Computing Language", driver="3.0-rc2")


def test_file_names_name_the_device_and_the_profile():
    assert bench_all.file_name(META) == "nvidia-geforce-rtx-4090.json"
    assert bench_all.file_name(dict(META, profile="gpu")) == \
        "nvidia-geforce-rtx-4090-gpu-profile.json"
    pypi = bench_all.file_name(CPU_META)
    debian = bench_all.file_name(dict(CPU_META, device="pthread-skylake-avx512-AMD EPYC",
                                      driver="3.1+debian"))
    assert pypi == "amd-epyc-9r14-avx-512-portable-computing-language-3-0-rc2.json"
    assert debian != pypi  # two PoCL builds on one CPU keep a file each
    intel = dict(CPU_META, platform="Intel(R) OpenCL", driver="2026.22.10.0.01_160000")
    assert bench_all.file_name(dict(intel, isa="AVX2 (emulated)")) == \
        "amd-epyc-9r14-avx2-emulated-intel-r-opencl-2026-22-10-0-01-160000.json"


def test_an_emulated_isa_labels_the_figures_and_the_commands(monkeypatch):
    """Under nnlib.bench.emulate the ISA is the emulated one, and each printed command runs
    its benchmark through the emulation again."""
    meta = dict(CPU_META, pyopencl_ctx="3:0")
    monkeypatch.delenv("NNLIB_EMULATED_ISA", raising=False)
    assert "emulated" not in bench_all.isa_name()
    assert bench_all.command("dense", ["--widths", "64"], meta) == \
        "PYOPENCL_CTX=3:0 python -m nnlib.bench.dense --widths 64"
    assert bench_all.command("dense", [], dict(meta, pocl_affinity="1")) == \
        "PYOPENCL_CTX=3:0 POCL_AFFINITY=1 python -m nnlib.bench.dense"
    assert bench_all.command("dense", [], dict(meta, pocl_affinity="unset")) == \
        "PYOPENCL_CTX=3:0 python -m nnlib.bench.dense"
    monkeypatch.setenv("NNLIB_EMULATED_ISA", "AVX2")
    assert bench_all.isa_name() == "AVX2 (emulated)"
    assert bench_all.command("dense", ["--widths", "64"], meta) == \
        "PYOPENCL_CTX=3:0 python -m nnlib.bench.emulate avx2 dense --widths 64"
    fig, ax = plt.subplots()
    stored = [{"meta": dict(CPU_META, isa="AVX2 (emulated)"), "rows": rows(2.0)}]
    bench_all.plot_dense(ax, rows(1.0), "live", stored)
    assert "(CPU, AVX2 (emulated))" in ax.get_lines()[1].get_label()
    plt.close(fig)


def test_the_emulation_sets_each_librarys_isa_on_intels_runtime_or_an_avx2_compiler():
    """nnlib.bench.emulate tells Intel's runtime, OpenBLAS and PyTorch to run AVX2 code; a PoCL that compiles AVX2 code already (PyPI's 3.0 on
    Zen 4) gets the host libraries' variables only; a PoCL that emits AVX-512 code cannot be
    told, so it is refused with what to do instead, as is a GPU."""
    from nnlib.bench import emulate

    env = emulate.ISAS["avx2"]
    assert env["CL_CONFIG_CPU_TARGET_ARCH"] == "core-avx2"
    assert env["OPENBLAS_CORETYPE"] == "Haswell" and env["ATEN_CPU_CAPABILITY"] == "avx2"
    pocl = SimpleNamespace(platform=SimpleNamespace(name="Portable Computing Language"),
                           name="pthread-AMD EPYC", type=cl.device_type.CPU)
    with pytest.raises(ValueError, match="needs Intel's CPU runtime.*make doctor INTEL=auto"):
        emulate.child_env("avx2", pocl, 16)
    host_only = emulate.child_env("avx2", pocl, 8)
    assert host_only["OPENBLAS_CORETYPE"] == "Haswell" and host_only["NNLIB_EMULATED_ISA"]
    assert not set(emulate.OPENCL_TARGET) & set(host_only)
    intel = SimpleNamespace(name="Intel(R) OpenCL")
    assert emulate.child_env("avx2", SimpleNamespace(platform=intel, name="AMD EPYC",
                                                     type=cl.device_type.CPU), 1) == env
    with pytest.raises(ValueError):
        emulate.child_env("avx2", SimpleNamespace(platform=intel, name="Intel GPU",
                                                  type=cl.device_type.GPU), 1)


@pytest.mark.parametrize("flags, isa", [
    ("fpu sse4_2 avx avx2 avx512f avx512bw", "AVX-512"), ("fpu sse4_2 avx avx2 fma", "AVX2"),
    ("fpu sse4_2", "SSE4.2"), ("fp asimd evtstrm", "NEON"), ("", "unknown")])
def test_the_vector_isa_is_read_from_the_cpu_flags(tmp_path, flags, isa):
    key = "Features" if "asimd" in flags else "flags"
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: Some CPU\n{key}\t\t: {flags}\n")
    assert bench_all.isa_level(bench_all.cpu_flags(cpuinfo)) == isa
    assert bench_all.cpu_flags(tmp_path / "missing") == set()


def test_a_compiler_that_emits_avx2_on_an_avx512_cpu_is_labelled_so(monkeypatch):
    """PyPI's PoCL 3.0 compiles for Zen 3 (AVX2: 8 floats a vector) on Zen 4: its figures are
    AVX2 code's, and keep a file of their own; a GPU's figures keep the host's ISA."""
    monkeypatch.delenv("NNLIB_EMULATED_ISA", raising=False)
    avx512 = {"avx2", "avx512f"}
    pocl_3_0 = SimpleNamespace(kind="CPU", widest_vector=8)
    assert bench_all.isa_name(pocl_3_0, avx512) == "AVX2 code, AVX-512 CPU"
    assert bench_all.isa_name(pocl_3_0, {"avx2"}) == "AVX2"
    assert bench_all.isa_name(SimpleNamespace(kind="CPU", widest_vector=16), avx512) == \
        "AVX-512" == bench_all.isa_name(SimpleNamespace(kind="GPU", widest_vector=1), avx512)
    assert bench_all.file_name(dict(CPU_META, isa="AVX2 code, AVX-512 CPU")) == \
        "amd-epyc-9r14-avx2-code-avx-512-cpu-portable-computing-language-3-0-rc2.json"


def fake_results(official: bool) -> dict:
    """Each benchmark's rows as its main() returns them, with known ratios."""
    dev = {"device": "pthread-AMD EPYC", "platform": "OpenCL 3.0 PoCL 3.0-rc2  Linux"}
    results = {
        "dense": [{"n": 1024, "batch": 64, "pass": "fwd+bwd", "blocked": 30.0, "numpy_2": 20.0},
                  {"n": 1024, "batch": 64, "pass": "fwd", "blocked": 1.0, "numpy_2": 20.0}],
        "train_step": [{"batch": 64, "numpy_1": 2.0, "numpy_2": 1.5, "torch": 3.0,
                        "nnlib": 1.0, "fastest_other_over_nnlib": 1.5},
                       {"batch": 1, "numpy_1": 0.1, "numpy_2": 0.2, "nnlib": 0.2,
                        "fastest_other_over_nnlib": 0.5}],
        "seed_experiment": [dict(dev, device="another device"),
                            {**dev, "per_sample_fused_vs_numpy": 6.0,
                             "per_sample_layers_vs_numpy": 0.2,
                             "mini_batch_fused_vs_numpy": 0.5,
                             "mini_batch_layers_vs_numpy": 0.7}],
        "complex": [{"operation": "complex conv forward", "size": "B4", "device_s": 1.0,
                     "numpy_s": 3.0},
                    {"operation": "fft (local)", "size": "n=24", "device_s": 1.0, "numpy_s": 2.0},
                    {"operation": "fft (global)", "size": "n=1000", "device_s": 2.0,
                     "numpy_s": 1.0}]}
    if official:
        results["catch_speed"] = [{"sizes": "nnlib", "batches": 10, "batch_size": 64,
                                   "nnlib_s": 1.0, "official_s": 2.5, "ratio": 2.5}]
    return results


def test_the_goal_table_has_a_row_per_measured_case_with_its_target():
    meta = {"device": "pthread-AMD EPYC", "platform_version": "OpenCL 3.0 PoCL 3.0-rc2  Linux"}
    commands = {bench: f"python -m nnlib.bench.{bench}" for bench in bench_all.RUNS}
    rows = goals.goal_rows(fake_results(official=False), meta, commands,
                           {"catch_speed": "needs --official-path"})
    got = {(r["goal"], r["case"]): (r["ratio"], r["status"]) for r in rows}
    assert got == {
        ("dense", "width 1024, batch 64"): (1.5, "met"),
        ("train_step", "batch 64"): (1.5, "met"),
        ("train_step", "batch 1"): (0.5, "NOT met"),
        ("fit_batch_1", "per-sample epoch"): (6.0, "met"),  # the faster path: fused
        ("fit_mini_batch", "mini-batch epoch"): (0.7, "NOT met"),  # layer by layer
        ("layers_mini_batch", "mini-batch epoch"): (0.7, "NOT met"),
        ("fft", "(local), n=24"): (2.0, "met"),
        ("fft", "(global), n=1000"): (0.5, "NOT met"),
        ("complex_conv", "forward, B4"): (3.0, "met"),
        ("catch", ""): (None, "not measured")}
    targets = {g.key: g.target for g in goals.GOALS}
    assert all(r["target"] == targets[r["goal"]] and r["device"] == meta["device"] and
               r["command"] == commands[next(g.bench for g in goals.GOALS if g.key == r["goal"])]
               for r in rows)
    assert rows[-1]["note"] == "needs --official-path"
    [catch] = [r for r in goals.goal_rows(fake_results(official=True), meta, commands)
               if r["goal"] == "catch"]
    assert (catch["ratio"], catch["status"]) == (2.5, "met")
    table = goals.format_rows(rows).splitlines()
    assert len(table) == 1 + len(rows) + 1 + len(set(commands.values()) - {commands["launch"]})
    assert table[1].split()[:6] == ["dense", "width", "1024,", "batch", "64", "1.50x"]


def test_several_runs_keep_each_cases_median_run_and_every_ratio():
    meta = {"device": "pthread-AMD EPYC", "platform_version": "OpenCL 3.0 PoCL 3.0-rc2  Linux"}
    commands = {bench: f"python -m nnlib.bench.{bench}" for bench in bench_all.RUNS}

    def run(dense, fused, layers):
        fake = fake_results(official=False)
        fake["dense"][0] = dict(fake["dense"][0], blocked=dense, numpy_2=1.0)
        fake["seed_experiment"][1] = dict(fake["seed_experiment"][1],
                                          mini_batch_fused_vs_numpy=fused,
                                          mini_batch_layers_vs_numpy=layers)
        return goals.goal_rows(fake, meta, commands, {"catch_speed": "needs --official-path"})
    tables = [run(1.03, 0.9, 1.2), run(0.97, 1.3, 1.0), run(1.01, 0.8, 0.95)]
    rows = {(r["goal"], r["case"]): r for r in goals.median_run(tables)}
    dense = rows["dense", "width 1024, batch 64"]
    assert (dense["ratio"], dense["status"], dense["ratios"]) == (1.01, "met", [1.03, 0.97, 1.01])
    fit = rows["fit_mini_batch", "mini-batch epoch"]  # each run's faster path: 1.2, 1.3, 0.95
    assert (fit["ratio"], fit["note"], fit["ratios"]) == (1.2, "layers path", [1.2, 1.3, 0.95])
    catch = rows["catch", ""]
    assert (catch["ratio"], catch["status"], catch["ratios"]) == (None, "not measured", [None] * 3)
    assert list(rows) == [(r["goal"], r["case"]) for r in tables[0]]  # the goals' order
    assert goals.median_run(tables[:2])[0]["ratio"] == 0.97  # of two, the lower
    assert goals.median_run(tables[:1]) == [dict(r, ratios=[r["ratio"]]) for r in tables[0]]
    line = goals.format_rows(goals.median_run(tables)).splitlines()[1]
    assert line.split()[5] == "1.01x" and "runs 0.97-1.03x" in line
    assert "runs" not in goals.format_rows(goals.median_run(tables[:1])).splitlines()[1]


def test_the_printed_targets_are_the_goal_table():
    lines = goals.format_targets().splitlines()[1:]
    assert [line.split()[:2] for line in lines] == \
        [[g.key, f"{g.target:.1f}x"] for g in goals.GOALS]


def test_the_command_runs_each_benchmark_and_names_no_local_folder(tmp_path, monkeypatch,
                                                                  capsys):
    fake, calls = fake_results(official=True), []

    def official_of(bench):
        return bench_all.CATCH_OFFICIAL if bench == "catch_speed" else []
    monkeypatch.setattr(bench_all, "RUNS", {
        bench: (module, lambda argv, bench=bench: calls.append((bench, argv)) or fake.get(bench),
                [*official_of(bench), "--quick-run"], [*official_of(bench), "--full-run"])
        for bench, (module, *_) in bench_all.RUNS.items()})
    official = str(tmp_path / "CATCH")
    monkeypatch.setattr(catch_speed, "official_classes", lambda path: None)  # a checkout
    result = bench_all.main(["--store", "--folder", str(tmp_path), "--official-path", official])
    with_path = [*bench_all.CATCH_OFFICIAL[:3], official]
    assert calls == [(bench, [*(with_path if bench == "catch_speed" else []), "--full-run"])
                     for bench in bench_all.RUNS]
    [catch] = [r for r in result["goals"] if r["goal"] == "catch"]
    assert catch["ratio"] == 2.5 and official not in catch["command"]
    assert "--official-path DIR" in catch["command"]
    printed = capsys.readouterr().out
    assert "catch " in printed and official not in printed.split("Speed goals")[1]
    calls.clear()
    result = bench_all.main(["--quick"])  # no checkout: no CATCH run, a row saying why
    assert [bench for bench, _ in calls] == [b for b in bench_all.RUNS if b != "catch_speed"]
    assert all(argv == ["--quick-run"] for _, argv in calls)
    [catch] = [r for r in result["goals"] if r["goal"] == "catch"]
    assert catch["status"] == "not measured" and "--official-path" in catch["note"]
    assert "runs" not in result["meta"]
    calls.clear()
    result = bench_all.main(["--quick", "--runs", "2"])  # every benchmark, round after round
    assert [bench for bench, _ in calls] == 2 * [b for b in bench_all.RUNS if b != "catch_speed"]
    assert result["meta"]["runs"] == 2
    assert all(len(r["ratios"]) == 2 for r in result["goals"])
    assert "median of 2 runs" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench_all.main(["--runs", "0"])
    assert "--runs must be at least 1" in capsys.readouterr().err


def test_a_folder_without_the_official_catch_is_refused_before_any_benchmark(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_all, "RUNS", {})
    with pytest.raises(SystemExit):
        bench_all.main(["--official-path", str(tmp_path)])
    err = capsys.readouterr().err
    assert "--official-path" in err and "CATCH_model.py" in err


def faked_runs(monkeypatch, numpy_2: float) -> None:
    """bench_all.RUNS replaced by benchmarks that return fake_results at once, numpy's own
    dense pass at ``numpy_2`` GFLOP/s."""
    fake = fake_results(official=False)
    fake["dense"][0] = dict(fake["dense"][0], numpy_1=numpy_2 / 2, numpy_2=numpy_2)
    monkeypatch.setattr(bench_all, "RUNS", {
        bench: (module, lambda argv, bench=bench: fake.get(bench), [], [])
        for bench, (module, *_) in bench_all.RUNS.items() if bench != "catch_speed"})


def test_a_run_on_a_busier_machine_does_not_replace_the_stored_file(tmp_path, monkeypatch,
                                                                    capsys):
    """--store keeps the file of an earlier run where numpy's own dense pass now runs under
    BASELINE_SHARE of its speed then, and says why; at about the same speed, or with
    --replace, the new run replaces it."""
    faked_runs(monkeypatch, 200.0)
    first = bench_all.main(["--store", "--folder", str(tmp_path)])
    [path] = tmp_path.glob("*.json")
    faked_runs(monkeypatch, 200.0 * bench_all.BASELINE_SHARE - 1)
    with pytest.raises(SystemExit) as refused:
        bench_all.main(["--store", "--folder", str(tmp_path)])
    assert refused.value.code == 1
    err = capsys.readouterr().err
    assert "not stored" in err and "159 against 200 GFLOP/s on 2 thread(s)" in err
    assert "--replace" in err and path.name in err
    assert json.loads(path.read_text()) == json.loads(json.dumps(first))
    replaced = bench_all.main(["--store", "--replace", "--folder", str(tmp_path)])
    assert json.loads(path.read_text()) == json.loads(json.dumps(replaced))
    faked_runs(monkeypatch, 200.0 * bench_all.BASELINE_SHARE + 1)  # about as fast: stored
    bench_all.main(["--store", "--folder", str(tmp_path)])
    assert baseline(path) == 161 and [p.name for p in tmp_path.iterdir()] == [path.name]


def baseline(path):
    return bench_all.baseline_gflops(json.loads(path.read_text()))["numpy_2"]


def test_an_interrupted_store_leaves_the_old_file(tmp_path, monkeypatch):
    """A store that fails before its rename leaves the old file whole and no temporary."""
    faked_runs(monkeypatch, 100.0)
    result = bench_all.run()
    path = bench_all.store(result, tmp_path)

    def fail(*args):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        bench_all.store(dict(result, dense=[]), tmp_path)
    assert baseline(path) == 100 and [p.name for p in tmp_path.iterdir()] == [path.name]


@pytest.mark.slow
def test_one_command_measures_every_goal_and_stores_it(tmp_path, rt, monkeypatch):
    # each benchmark's own JSON goes to tmp_path/bench, not build/bench/, which
    # tests/test_benchmarks.py reads back, perhaps at the same time on another xdist worker
    monkeypatch.setattr(common, "OUT", tmp_path / "bench")
    monkeypatch.setattr(bench_complex, "OUT", tmp_path / "bench" / "complex.json")
    result = bench_all.main(["--quick", "--store", "--folder", str(tmp_path)])
    [path] = tmp_path.glob("*.json")
    saved = json.loads(path.read_text())
    assert saved == json.loads(json.dumps(result))
    meta = saved["meta"]
    assert {"device", "platform", "platform_version", "driver", "type", "profile", "cpu", "isa",
            "pyopencl_ctx", "date"} <= set(meta)
    assert meta["device"] == rt.device.name.strip() and meta["profile"] == rt.profile
    assert path.name == bench_all.file_name(meta)
    assert find_device(meta["pyopencl_ctx"]).int_ptr == rt.device.int_ptr
    for bench in ("dense", "train_step", "seed_experiment", "complex", "launch"):
        assert saved[bench], bench
    assert "catch_speed" not in saved  # no official checkout given
    rows = saved["goals"]
    assert [g.key for g in goals.GOALS] == list(dict.fromkeys(r["goal"] for r in rows))
    assert all(r["status"] == goals.status(r["ratio"], r["target"]) for r in rows)
    assert all(r["ratio"] > 0 for r in rows if r["goal"] != "catch")
    assert [r["status"] for r in rows if r["goal"] == "catch"] == ["not measured"]
    assert all(r["command"].startswith(f"PYOPENCL_CTX={meta['pyopencl_ctx']} ") for r in rows)
    # what notebook 03 reads back: the dense figures and the goal table
    assert stored_results("goals", tmp_path) == [{"meta": meta, "rows": rows}]
    assert stored_results("dense", tmp_path)[0]["rows"] == saved["dense"]


def test_gpu_rooflines_are_a_model_of_published_figures():
    for name, (gflops, gbps, source) in GPUS.items():
        assert gflops > 1000 and gbps > 100 and source, name
    low, high = dense_intensity(1024, 1024, 1), 1e4
    gflops, gbps, _ = GPUS["NVIDIA H100 SXM"]
    assert roof(low, gflops, gbps) == pytest.approx(low * gbps)  # memory-bound at batch 1
    assert roof(high, gflops, gbps) == gflops
    assert np.all(np.diff(roof(np.logspace(-1, 3, 20), gflops, gbps)) >= 0)


@pytest.mark.parametrize("platform, says_pocl", [
    ("Portable Computing Language", True), ("Intel(R) OpenCL", False)])
def test_the_printed_environment_names_pocls_threads_only_for_pocl(capsys, monkeypatch, platform,
                                                                   says_pocl):
    monkeypatch.setenv("POCL_AFFINITY", "1")
    monkeypatch.delenv("POCL_MAX_PTHREAD_COUNT", raising=False)
    device = SimpleNamespace(name="cpu", driver_version="1",
                             platform=SimpleNamespace(name=platform, version="OpenCL 3.0"))
    monkeypatch.setattr(common, "cpu_model", lambda: "AMD EPYC")
    monkeypatch.setattr("nnlib.tuning.mode", lambda: "0")  # no tuned parameters to read
    meta = common.environment(SimpleNamespace(device=device))
    common.print_environment(meta)
    assert ("PoCL threads all (POCL_AFFINITY 1)" in capsys.readouterr().out) == says_pocl


def test_the_stored_meta_says_whether_pocl_ran_pinned(monkeypatch):
    """device_meta records POCL_AFFINITY as the run had it, for PoCL only (no other runtime
    reads it); each PoCL device that compiles is checked, with the variable set and unset."""
    from nnlib.doctor import real_devices
    from nnlib.opencl_devices import is_pocl
    from nnlib.runtime import Runtime

    for _, device in real_devices():
        rt = Runtime(device)
        for pin in ("1", None):
            if pin is None:
                monkeypatch.delenv("POCL_AFFINITY", raising=False)
            else:
                monkeypatch.setenv("POCL_AFFINITY", pin)
            meta = bench_all.device_meta(rt)
            assert meta.get("pocl_affinity") == ((pin or "unset") if is_pocl(device) else None)
