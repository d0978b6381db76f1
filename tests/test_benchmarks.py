"""The benchmarks run end to end at tiny sizes (their figures are not checked here)."""

import itertools
import json
import math

import pytest

from nnlib.bench import dense, launch, seed_experiment, train_step
from nnlib.bench.common import OUT, shown


def saved(name):
    return json.loads((OUT / f"{name}.json").read_text())


@pytest.mark.slow
def test_dense_benchmark_runs_and_writes_json():
    rows = dense.main(["--widths", "33", "--batches", "1", "5", "--repeat", "1"])
    assert len(rows) == 4 and all(r["blocked"] > 0 and r["article"] > 0 and r["numpy_2"] > 0
                                  for r in rows)
    assert saved("dense")["rows"] == rows and "device" in saved("dense")["meta"]


@pytest.mark.slow
def test_dense_benchmark_times_each_product_with_its_parameters():
    rows = dense.main(["--widths", "33", "--batches", "5", "--repeat", "1", "--products",
                       "--article-max-width", "0"])
    products = {r["pass"]: r for r in rows}
    assert list(products) == ["fwd", "fwd+bwd", "forward", "input", "weight"]
    # a product's parameters: tiles of vectors, or the lanes design (one float per lane)
    assert all(products[p]["blocked"] > 0 and products[p]["numpy_2"] > 0 and
               (products[p]["params"].get("TN_LANES") == 1 or products[p]["params"]["VW"] >= 4)
               for p in ("forward", "input", "weight"))


@pytest.mark.slow
def test_dense_benchmark_compares_thread_counts_in_subprocesses():
    rows = dense.main(["--widths", "9", "--batches", "2", "--repeat", "1",
                       "--pocl-threads", "1", "2"])
    assert sorted(r["pocl_threads"] for r in rows) == [1, 1, 2, 2]
    assert saved("dense")["meta"]["pocl_threads"] == [1, 2]


@pytest.mark.slow
def test_train_step_benchmark_runs_and_writes_json():
    rows = train_step.main(["--batches", "3", "--steps", "2", "--repeat", "1",
                            "--no-tinygrad"])
    assert [r["batch"] for r in rows] == [3]
    assert all(rows[0][k] > 0 for k in ("nnlib", "numpy_1", "numpy_2", "fastest_other_over_nnlib"))
    assert saved("train_step")["rows"] == rows


def test_numpy_mlp_learns_as_the_nnlib_network(rt, rng):
    """The numpy baseline computes the same training step as nnlib (same losses)."""
    import nnlib

    net = train_step.nnlib_net(nnlib)
    opt = nnlib.optim.Adam(net.parameters(), lr=1e-2)
    ref = train_step.NumpyMLP([layer.weight.numpy() for layer in net.layers],
                              [layer.bias.numpy() for layer in net.layers], lr=1e-2)
    x = rng.standard_normal((5, train_step.SIZES[0])).astype("float32")
    y = rng.standard_normal((5, train_step.SIZES[-1])).astype("float32")
    for _ in range(3):
        assert float(net.train_step(x, y, opt)) == pytest.approx(ref.step(x, y), rel=1e-4)


@pytest.mark.slow
def test_seed_experiment_runs_and_writes_json():
    rows = seed_experiment.main(["--samples", "8", "--batch", "64", "--epochs", "1"])
    assert rows and all(r["per_sample_fused_vs_numpy"] > 0 and r["mini_batch_fused_s"] > 0
                        and r["mini_batch_layers_s"] > 0 for r in rows)
    assert saved("seed_experiment")["rows"] == rows


def test_launch_benchmark_runs_and_writes_json():
    rows = launch.main(["--count", "3", "--repeat", "1", "--sizes", "64"])
    assert len(rows) == 9 and all(r["us"] > 0 for r in rows)
    assert "enqueue, arguments preset, profiling queue" in [r["what"] for r in rows]
    assert saved("launch")["rows"] == rows


@pytest.mark.slow
def test_catch_benchmark_runs_and_writes_json():
    from nnlib.bench import catch
    rows = catch.main(["--seeds", "0", "--quick"])
    assert {r["dataset"] for r in rows} >= {"shapelet", "eurusd"}
    assert {r["method"] for r in rows} >= {"CATCH", "PCA", "IsolationForest"}
    assert all(0 <= r["auc_roc"] <= 1 for r in rows)
    assert saved("catch")["rows"] == rows


def test_written_files_are_named_without_the_machines_folders(tmp_path):
    """What a benchmark prints ends up in a notebook's stored output: no absolute path."""
    assert shown(OUT / "dense.json") == "build/bench/dense.json"
    assert shown(tmp_path / "elsewhere.json") == "elsewhere.json"


class FakeClock:
    """Stands in for the time module: each call of a run advances it by a fixed step, so the
    tests below see the same times on a loaded machine as on a quiet one."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now

    def run(self, log, name, step):
        def call():
            log.append(name)
            self.now += step
        return call


def test_each_turn_times_a_run_only_after_its_warm_up(monkeypatch):
    """interleaved_s: every turn starts with TURN_WARM_UP_S of untimed calls of its own run,
    then TURN_CALLS timed ones (steady state, as in a training loop)."""
    from nnlib.bench import common
    clock, calls, step = FakeClock(), [], 2.0 ** -10  # a binary fraction: sums are exact
    monkeypatch.setattr(common, "time", clock)
    monkeypatch.setattr(common, "settle", lambda: None)
    got = common.interleaved_s({"a": clock.run(calls, "a", step),
                                "b": clock.run(calls, "b", 2 * step)}, repeat=2, warm_up_s=0.0)
    turns = [(name, len(list(group))) for name, group in itertools.groupby(calls)]
    assert turns[:2] == [("a", 1), ("b", 1)]  # the first warm-up: warm_up_s is 0
    warm = {"a": math.ceil(common.TURN_WARM_UP_S / step),
            "b": math.ceil(common.TURN_WARM_UP_S / (2 * step))}
    assert turns[2:] == [(name, warm[name] + common.TURN_CALLS) for name in "abab"]
    assert got == pytest.approx({"a": step, "b": 2 * step})


def test_a_turn_after_spinning_threads_warms_up_longer(monkeypatch):
    """interleaved_s: where settle() waited for spinning threads, the turn's untimed calls
    last SPUN_WARM_UP_S, not TURN_WARM_UP_S."""
    from nnlib.bench import common
    clock, calls, step = FakeClock(), [], 2.0 ** -10
    monkeypatch.setattr(common, "time", clock)
    spun = iter([True, False])
    monkeypatch.setattr(common, "settle", lambda: next(spun))
    common.interleaved_s({"a": clock.run(calls, "a", step), "b": clock.run(calls, "b", step)},
                         repeat=1, warm_up_s=0.0)
    turns = [len(list(group)) for _, group in itertools.groupby(calls)]
    assert turns[2:] == [math.ceil(w / step) + common.TURN_CALLS
                         for w in (common.SPUN_WARM_UP_S, common.TURN_WARM_UP_S)]


class SpinningProcess(FakeClock):
    """The time module of a process whose threads stay busy for ``busy_steps`` of settle()'s
    steps after the last call, then idle."""

    def __init__(self, busy_steps):
        super().__init__()
        self.cpu, self.busy_steps = 0.0, busy_steps

    def sleep(self, seconds):
        self.now += seconds
        if self.busy_steps:
            self.busy_steps -= 1
            self.cpu += seconds  # one thread spinning through the whole step

    def process_time(self):
        return self.cpu


@pytest.mark.parametrize("busy_steps, waited", [(0, False), (3, True)])
def test_settle_says_whether_it_waited_for_spinning_threads(monkeypatch, busy_steps, waited):
    from nnlib.bench import common
    clock = SpinningProcess(busy_steps)
    monkeypatch.setattr(common, "time", clock)
    assert common.settle() is waited
    assert clock.now == pytest.approx((busy_steps + 1) * common.SETTLE_STEP_S)


def test_the_epoch_benchmark_times_the_second_of_two_epochs(monkeypatch):
    """seed_experiment.epoch_s: each turn an untimed epoch, then the timed one."""
    clock, log = FakeClock(), []
    monkeypatch.setattr(seed_experiment, "time", clock)
    got = seed_experiment.epoch_s({"x": clock.run(log, "x", 0.002),
                                   "y": clock.run(log, "y", 0.001)}, 10, 20, 3)
    assert log == ["x", "x", "y", "y"] * 3
    assert got == pytest.approx({"x": 2 * 0.002, "y": 2 * 0.001})


def test_the_catch_comparison_alternates_the_codes(monkeypatch):
    """catch_speed.alternating_s: each round runs every code once, in turns, each turn after
    the threads have settled."""
    from nnlib.bench import catch_speed
    log = []
    monkeypatch.setattr(catch_speed, "settle", lambda: log.append("settle"))

    def epoch(name, seconds):
        def run():
            log.append(name)
            return seconds
        return run
    got = catch_speed.alternating_s({"nnlib": epoch("nnlib", 1.0),
                                     "official": epoch("official", 2.0)}, 3)
    assert log == ["settle", "nnlib", "settle", "official"] * 3
    assert got == {"nnlib": [1.0] * 3, "official": [2.0] * 3}


@pytest.mark.slow
def test_the_catch_comparison_runs_nnlib_alone_without_a_checkout():
    from nnlib.bench import catch
    rows = catch.main(["--compare", "official", "--sizes", "nnlib", "--batches", "1",
                       "--rounds", "2"])
    assert [(r["sizes"], r["rounds"], "official_s" in r) for r in rows] == [("nnlib", 2, False)]
    assert rows[0]["nnlib_s"] > 0 and "gemm_nt" in rows[0]["top_kernels"]
    assert saved("catch_speed")["rows"] == json.loads(json.dumps(rows))


def test_the_catch_comparison_needs_a_round(capsys):
    from nnlib.bench import catch
    with pytest.raises(SystemExit):
        catch.main(["--compare", "official", "--rounds", "0"])
    assert "--rounds must be at least 1, got 0" in capsys.readouterr().err
