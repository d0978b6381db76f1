"""nnlib.tuning: the search, the modes of NNLIB_TUNE and the per-device disk cache."""

import json
from types import SimpleNamespace

import pytest

from nnlib import tuning

CANDIDATES = [{"rows": 2}, {"rows": 4}, {"rows": 8}]
COST = {2: 3.0, 4: 1.0, 8: 2.0}  # seconds a fake kernel "takes": rows=4 is the fastest


def fake_rt(device="Fake CPU", driver="1.0", compute_units=2):
    platform = SimpleNamespace(name="Fake Platform", version="OpenCL 3.0 fake")
    return SimpleNamespace(device=SimpleNamespace(name=device, platform=platform,
                                                  driver_version=driver,
                                                  max_compute_units=compute_units),
                           not_a_launch=lambda: None)


class Meter:
    def __init__(self):
        self.calls = []

    def __call__(self, params):
        self.calls.append(params["rows"])
        if params["rows"] == 8 and "fail8" in self.__dict__:
            raise RuntimeError("build failed")
        return COST[params["rows"]]


def test_search_picks_the_fastest_and_stores_it(tuning_cache):
    meter = Meter()
    got = tuning.tuned(fake_rt(), "gemm", "b64", CANDIDATES, meter, {"rows": 2})
    assert got == {"rows": 4}
    assert sorted(set(meter.calls)) == [2, 4, 8]
    files = list(tuning_cache.glob("*.json"))
    assert len(files) == 1 and files[0].name.startswith("Fake-CPU-")
    data = json.loads(files[0].read_text())
    assert data["device"]["driver"] == "1.0"
    assert data["results"]["gemm/b64"]["params"] == {"rows": 4}
    assert [t for _, t in data["results"]["gemm/b64"]["candidates"]] == [3.0, 1.0, 2.0]


def test_the_fastest_few_are_timed_again_side_by_side(tuning_cache):
    """A burst of load on the fastest kernel's first samples (1.25 s where it takes 1.0 s)
    and none on its rival's (1.1 s) would hand the search to the rival; the confirming
    rounds time the two again in turns and the faster wins. A candidate far behind (3.0 s)
    is not timed again."""
    calls = {2: 0, 4: 0, 8: 0}

    def measure(params):
        rows = params["rows"]
        calls[rows] += 1
        return {2: 3.0, 4: 1.25 if calls[4] <= 3 else 1.0, 8: 1.1}[rows]
    got = tuning.tuned(fake_rt(), "gemm", "b64", CANDIDATES, measure, {"rows": 2})
    assert got == {"rows": 4}
    assert calls == {2: 3, 4: 3 + tuning.CONFIRM_ROUNDS, 8: 3 + tuning.CONFIRM_ROUNDS}


def test_a_search_cut_short_confirms_nothing_yet(tuning_cache):
    """Two close candidates timed and one left for the next process: no confirming rounds
    until the last one has been timed."""
    calls = []

    def measure(params):
        calls.append(params["rows"])
        return {2: 1.05, 4: 1.0, 8: 2.0}[params["rows"]]
    results = tuning.search(CANDIDATES, measure, budget_s=0.0, known=[1.05, None, None])
    assert [t for _, t in results] == [1.05, 1.0, None]
    assert sorted(calls) == [2, 2, 4, 4, 4]  # rows=4's first time, then two rounds each


def test_a_search_tells_the_runtime_it_enqueues_more_than_a_step(tuning_cache):
    """A search launches its candidates and waits for them: a training step recorded around
    it (nnlib.step_replay) must not keep them, so the search says so; a result already
    found launches nothing and says nothing."""
    said = []
    rt = fake_rt()
    rt.not_a_launch = lambda: said.append(True)
    tuning.tuned(rt, "gemm", "b64", CANDIDATES, Meter(), {"rows": 2})
    assert said == [True]
    tuning.tuned(rt, "gemm", "b64", CANDIDATES, Meter(), {"rows": 2})
    assert said == [True]


def test_next_process_reads_the_cache_without_measuring(tuning_cache):
    tuning.tuned(fake_rt(), "gemm", "b64", CANDIDATES, Meter(), {"rows": 2})
    tuning.set_mode("1")  # forgets this process's results, as a new process would
    meter = Meter()
    assert tuning.tuned(fake_rt(), "gemm", "b64", CANDIDATES, meter, {"rows": 2}) == {"rows": 4}
    assert meter.calls == []


def test_other_driver_cores_profile_or_shape_class_search_again(tuning_cache, monkeypatch):
    """A search run with fewer compute units (PoCL under POCL_MAX_PTHREAD_COUNT=1) keeps its
    own results, apart from the whole device's."""
    tuning.tuned(fake_rt(), "gemm", "b64", CANDIDATES, Meter(), {"rows": 2})
    for rt, shape in ((fake_rt(driver="2.0"), "b64"), (fake_rt(compute_units=1), "b64"),
                      (fake_rt(), "b1")):
        meter = Meter()
        tuning.tuned(rt, "gemm", shape, CANDIDATES, meter, {"rows": 2})
        assert meter.calls
    monkeypatch.setenv("NNLIB_PROFILE", "gpu")
    assert tuning.cache_file(fake_rt()) != tuning.cache_file(fake_rt(driver="2.0"))
    meter = Meter()
    tuning.tuned(fake_rt(), "gemm", "b64", CANDIDATES, meter, {"rows": 2})
    assert meter.calls
    assert len(list(tuning_cache.glob("*.json"))) == 4


def test_times_of_another_problem_are_searched_again(tuning_cache):
    """A class whose representative problem changed (dense's "small": 512 rows, then 64) is
    timed again; the same problem is read from the cache."""
    tuning.tuned(fake_rt(), "gemm", "small", CANDIDATES, Meter(), {"rows": 2},
                 problem=[512, 128, "tanh"])
    for problem, searched in (([512, 128, "tanh"], False), ([64, 128, "tanh"], True)):
        tuning.set_mode("1")
        meter = Meter()
        tuning.tuned(fake_rt(), "gemm", "small", CANDIDATES, meter, {"rows": 2},
                     problem=problem)
        assert bool(meter.calls) == searched, problem
    assert tuning.stored(fake_rt())["gemm/small"]["problem"] == [64, 128, "tanh"]


def test_results_of_an_earlier_way_of_searching_are_searched_again(tuning_cache):
    """A result stored before the confirming rounds (no "search" field) is timed again."""
    rt = fake_rt()
    tuning.tuned(rt, "gemm", "b64", CANDIDATES, Meter(), {"rows": 2})
    path = tuning.cache_file(rt)
    data = json.loads(path.read_text())
    del data["results"]["gemm/b64"]["search"]
    path.write_text(json.dumps(data))
    tuning.set_mode("1")
    meter = Meter()
    tuning.tuned(rt, "gemm", "b64", CANDIDATES, meter, {"rows": 2})
    assert meter.calls
    assert tuning.stored(rt)["gemm/b64"]["search"] == tuning.SEARCH_VERSION


def test_mode_0_uses_the_default_and_touches_nothing(tuning_cache):
    tuning.set_mode("0")
    meter = Meter()
    assert tuning.tuned(fake_rt(), "gemm", "b64", CANDIDATES, meter, {"rows": 2}) == {"rows": 2}
    assert meter.calls == [] and not list(tuning_cache.iterdir())


def test_retune_measures_again(tuning_cache):
    tuning.tuned(fake_rt(), "gemm", "b64", CANDIDATES, Meter(), {"rows": 2})
    tuning.set_mode("retune")
    meter = Meter()
    tuning.tuned(fake_rt(), "gemm", "b64", CANDIDATES, meter, {"rows": 2})
    assert meter.calls


def test_a_changed_kernel_source_searches_again(tuning_cache, monkeypatch):
    """Timings hold for the source they were measured on: an edited kernel file is timed
    again (conv.cl's loads changed, and its stored timings described the old kernel)."""
    rt = fake_rt()
    tuning.tuned(rt, "dense.forward", "b64", CANDIDATES, Meter(), {"rows": 2})
    assert tuning.stored(rt)["dense.forward/b64"]["source"] == tuning.source_digest("dense")
    tuning.set_mode("1")
    meter = Meter()
    tuning.tuned(rt, "dense.forward", "b64", CANDIDATES, meter, {"rows": 2})
    assert meter.calls == []  # the same source: read from the cache
    assert tuning.source_digest("gemm") is None  # no kernels/gemm.cl
    monkeypatch.setattr(tuning, "source_digest", lambda family: "edited")
    tuning.set_mode("1")
    meter = Meter()
    assert tuning.tuned(rt, "dense.forward", "b64", CANDIDATES, meter, {"rows": 2}) == {"rows": 4}
    assert sorted(set(meter.calls)) == [2, 4, 8]


def test_the_digest_covers_required_files_and_headers(tmp_path, monkeypatch):
    """dense.cl's kernels include activation.cl (``// requires:``) and floatv.h: an edit of
    either is an edit of dense's kernels; a file dense.cl does not use is not."""
    from nnlib import sources

    for path in sources.kernel_dir().iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    monkeypatch.setattr(sources, "kernel_dir", lambda: tmp_path)
    before = tuning.source_digest("dense")
    with open(tmp_path / "fft.cl", "a") as f:
        f.write("// an edit elsewhere\n")
    assert tuning.source_digest("dense") == before
    for name in ("activation.cl", "floatv.h"):
        with open(tmp_path / name, "a") as f:
            f.write("// an edit\n")
        assert tuning.source_digest("dense") != before, name
        before = tuning.source_digest("dense")


def test_clear_and_a_changed_candidate_list_search_again(tuning_cache):
    rt = fake_rt()
    tuning.tuned(rt, "gemm", "b64", CANDIDATES, Meter(), {"rows": 2})
    tuning.clear(rt)
    assert tuning.stored(rt) == {}
    tuning.tuned(rt, "gemm", "b64", CANDIDATES, Meter(), {"rows": 2})
    tuning.set_mode("1")
    meter = Meter()  # the stored winner (rows=4) is no longer a candidate
    assert tuning.tuned(rt, "gemm", "b64", [{"rows": 2}, {"rows": 8}], meter,
                        {"rows": 2}) == {"rows": 8}
    assert meter.calls


def test_failing_candidates_are_ruled_out(tuning_cache):
    meter = Meter()
    meter.fail8 = True
    assert tuning.tuned(fake_rt(), "gemm", "b64", [{"rows": 2}, {"rows": 8}], meter,
                        {"rows": 4}) == {"rows": 2}


def test_all_candidates_failing_gives_the_default(tuning_cache):
    def broken(params):
        raise RuntimeError("no")
    assert tuning.tuned(fake_rt(), "gemm", "b64", CANDIDATES, broken, {"rows": 2}) == {"rows": 2}


def test_damaged_cache_file_is_searched_again(tuning_cache):
    rt = fake_rt()
    tuning.cache_file(rt).parent.mkdir(parents=True, exist_ok=True)
    tuning.cache_file(rt).write_text("{not json")
    assert tuning.tuned(rt, "gemm", "b64", CANDIDATES, Meter(), {"rows": 2}) == {"rows": 4}


def test_bad_mode_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="tuning mode"):
        tuning.set_mode("fast")
    monkeypatch.setenv("NNLIB_TUNE", "yes")
    with pytest.raises(ValueError, match="NNLIB_TUNE must be one of"):
        tuning.mode()


def test_xdg_cache_home_is_used(monkeypatch, tmp_path):
    monkeypatch.delenv("NNLIB_TUNING_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tuning.cache_dir() == tmp_path / "nnlib" / "tuning"


def test_preferred_device_is_stored_and_read(tuning_cache):
    assert tuning.preferred_device() is None
    tuning.set_preferred_device("PoCL 9", "pthread-x", {"pthread-x": 1.0})
    assert tuning.preferred_device()["device"] == "pthread-x"


def test_default_device_follows_the_preference(tuning_cache, monkeypatch):
    """With two CPU devices that compile, the stored preference decides the default."""
    from nnlib.opencl_devices import _kind, all_devices, can_compile, find_device, is_simulator

    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    real = [d for d in all_devices() if not is_simulator(d) and can_compile(d)]
    cpus = [d for d in real if _kind(d) == "CPU"]
    if len(cpus) < 2 or any(_kind(d) == "GPU" for d in real):
        pytest.skip("needs two CPU OpenCL devices that compile and no GPU")
    for d in cpus:
        tuning.set_preferred_device(d.platform.version.strip(), d.name.strip(), {})
        assert find_device(None) == d


def test_complete_searches_times_every_candidate_whatever_the_budget(tuning_cache,
                                                                     monkeypatch):
    """Within complete_searches a new search and one a budget cut short both run to their
    last candidate (nnlib.bench.all times tuned kernels); outside it the budget holds."""
    monkeypatch.setattr(tuning, "BUDGET_S", 0.0)  # one new candidate per process
    meter, rt = Meter(), fake_rt()
    tuning.tuned(rt, "gemm", "b64", CANDIDATES, meter, {"rows": 8})
    assert tuning.stored(rt)["gemm/b64"]["untried"] == 2
    tuning.set_mode("1")  # a new process
    with tuning.complete_searches():
        assert tuning.tuned(rt, "gemm", "b64", CANDIDATES, meter, {"rows": 8}) == {"rows": 4}
        tuning.tuned(rt, "gemm", "b1", CANDIDATES, meter, {"rows": 8})
    assert tuning.stored(rt)["gemm/b64"]["untried"] == 0
    assert tuning.stored(rt)["gemm/b1"]["untried"] == 0
    tuning.tuned(rt, "gemm", "b4", CANDIDATES, meter, {"rows": 8})  # the budget again
    assert tuning.stored(rt)["gemm/b4"]["untried"] == 2


def test_a_search_out_of_budget_goes_on_in_the_next_process(tuning_cache, monkeypatch):
    monkeypatch.setattr(tuning, "BUDGET_S", 0.0)  # one new candidate per process
    meter, rt = Meter(), fake_rt()
    assert tuning.tuned(rt, "gemm", "b64", CANDIDATES, meter, {"rows": 8}) == {"rows": 2}
    assert set(meter.calls) == {2} and tuning.stored(rt)["gemm/b64"]["untried"] == 2
    for untried in (1, 0):
        tuning.set_mode("1")  # a new process
        tuning.tuned(rt, "gemm", "b64", CANDIDATES, meter, {"rows": 8})
        assert tuning.stored(rt)["gemm/b64"]["untried"] == untried
    assert tuning.stored(rt)["gemm/b64"]["params"] == {"rows": 4}
    tuning.set_mode("1")
    calls = len(meter.calls)
    tuning.tuned(rt, "gemm", "b64", CANDIDATES, meter, {"rows": 8})
    assert len(meter.calls) == calls  # complete: read from the cache
