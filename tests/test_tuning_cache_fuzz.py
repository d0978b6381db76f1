"""Issue 32, the tuning cache as hostile data: whatever a stored entry holds, a family gets one
of its candidates or its default (never a stored value outside them), dropped entries are
named in a one-line warning, concurrent writers lose nothing, and a full disk is named as one.
Real kernels with planted entries run in their own process (a bad parameter once aborted
PoCL)."""

import errno
import json
import logging
import multiprocessing
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnlib import tuning

from .isolated import run_isolated
from .test_tuning import CANDIDATES, Meter, fake_rt

FAMILY, SHAPE, KEY = "gemm", "b64", "gemm/b64"
DEFAULT = {"rows": 2}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=4),
    max_leaves=12)
params = st.one_of(st.sampled_from(CANDIDATES), st.fixed_dictionaries({"rows": json_values}),
                   json_values)
times = st.one_of(st.none(), st.just("failed"), st.floats(), json_values)
entries = st.one_of(
    json_values,
    st.fixed_dictionaries({
        "params": params,
        "source": st.one_of(st.none(), st.text(max_size=3)),
        "search": st.one_of(st.just(tuning.SEARCH_VERSION), json_values),
        "candidates": st.one_of(json_values, st.lists(st.tuples(params, times).map(list),
                                                      max_size=4)),
    }))


def plant(rt, results) -> None:
    path = tuning.cache_file(rt)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"device": tuning.device_key(rt), "results": results}))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entry=entries)
def test_any_stored_entry_gives_a_candidate_or_the_default(tuning_cache, entry):
    rt = fake_rt()
    plant(rt, {KEY: entry})
    tuning.set_mode("1")
    got = tuning.tuned(rt, FAMILY, SHAPE, CANDIDATES, Meter(), DEFAULT)
    assert got in CANDIDATES or got == DEFAULT


def test_a_planted_entry_outside_the_candidates_is_dropped_with_a_warning(tuning_cache, caplog):
    rt = fake_rt()
    for planted in ({"rows": 3}, {"rows": 0}, {"rows": 4, "extra": 1}, [1], "x"):
        plant(rt, {KEY: {"params": planted, "source": None,
                         "candidates": [[c, 1.0] for c in CANDIDATES]}})
        tuning.set_mode("1")
        with caplog.at_level(logging.WARNING, "nnlib.tuning"):
            caplog.clear()
            assert tuning.tuned(rt, FAMILY, SHAPE, CANDIDATES, Meter(), DEFAULT) == {"rows": 4}
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and str(tuning.cache_file(rt)) in lines[0], lines
        assert "\n" not in lines[0]


def test_stored_times_that_do_not_choose_the_stored_parameters_are_dropped(tuning_cache, caplog):
    rt = fake_rt()
    plant(rt, {KEY: {"params": {"rows": 8}, "source": None, "search": tuning.SEARCH_VERSION,
                     "candidates": [[c, t] for c, t in zip(CANDIDATES, (3.0, 1.0, 2.0))]}})
    with caplog.at_level(logging.WARNING, "nnlib.tuning"):
        assert tuning.tuned(rt, FAMILY, SHAPE, CANDIDATES, Meter(), DEFAULT) == {"rows": 4}
    assert "not the fastest" in caplog.text


@pytest.mark.parametrize("text", ["[" * 100000, '{"results": ' * 5000, "\xff\xfe",
                                  '{"results": [1]}', "1e999999"])
def test_damaged_files_are_named_and_searched_again(tuning_cache, caplog, text):
    rt = fake_rt()
    tuning.cache_file(rt).parent.mkdir(parents=True, exist_ok=True)
    tuning.cache_file(rt).write_text(text, errors="surrogateescape")
    with caplog.at_level(logging.WARNING, "nnlib.tuning"):
        assert tuning.tuned(rt, FAMILY, SHAPE, CANDIDATES, Meter(), DEFAULT) == {"rows": 4}
    assert tuning.cache_file(rt).name in caplog.text or text == "1e999999"


@pytest.mark.parametrize("width", [0, 3, 5, -8, True, 32, "8", 8.0, None])
def test_bad_vector_widths_are_dropped_with_a_warning(tuning_cache, caplog, width):
    (tuning_cache / "vector_widths.json").write_text(json.dumps({"dev": width, "good": 8}))
    with caplog.at_level(logging.WARNING, "nnlib.tuning"):
        assert tuning.widest_vectors((1, 2, 4, 8, 16)) == {"good": 8}
    assert "vector_widths.json" in caplog.text and repr(width) in caplog.text


def _store_keys(folder: str, first: int, count: int, start) -> None:
    os.environ["NNLIB_TUNING_DIR"] = folder
    rt = fake_rt()
    start.wait(60)  # both processes write at the same time
    for i in range(first, first + count):
        tuning._write(rt, f"k{i}", {"params": {"rows": 2}})


def test_two_processes_writing_at_once_lose_no_keys(tuning_cache):
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    workers = [ctx.Process(target=_store_keys, args=(str(tuning_cache), i * 150, 150, start))
               for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    assert len(tuning.stored(fake_rt())) == 300
    assert not list(tuning_cache.glob("*.tmp"))


def test_stale_temporaries_are_removed_and_a_full_disk_is_named(tuning_cache, caplog, monkeypatch):
    rt = fake_rt()
    stale = tuning_cache / f"{tuning.cache_file(rt).name}abc.tmp"
    stale.write_text("{half")
    tuning._write(rt, KEY, {"params": {"rows": 2}})
    assert not stale.exists()
    for code, words in ((errno.ENOSPC, "the disk is full"), (errno.EFBIG, "file-size limit")):
        def full(*args, **kwargs):
            raise OSError(code, os.strerror(code))
        monkeypatch.setattr(json, "dump", full)
        with caplog.at_level(logging.WARNING, "nnlib.tuning"):
            caplog.clear()
            tuning._write(rt, "other", {"params": {"rows": 2}})
        assert words in caplog.text and "newer than" not in caplog.text
        monkeypatch.undo()
        monkeypatch.setenv("NNLIB_TUNING_DIR", str(tuning_cache))
        assert not list(tuning_cache.glob("*.tmp"))  # the failed write's temporary is gone


def test_real_families_refuse_planted_parameters(tmp_path):
    """fft.local VR=3 (FFTs off by 1e37) and LOCAL=0 (NaN), dense.input TN_KB=100000 (PoCL
    aborted), dense.forward NT_I=1000 (compiled for minutes), optim VW=5: each dropped with a
    warning; the layers then give the reference's results."""
    out = run_isolated(f"""
        import json, logging, os
        os.environ.update(NNLIB_TUNING_DIR={str(tmp_path)!r}, NNLIB_TUNE="1")
        import numpy as np, nnlib
        from nnlib import fft, tuning
        tuning.BUDGET_S = 0.0  # one new candidate per family: the test stays short
        rt = nnlib.get_runtime()
        src = lambda family: tuning.source_digest(family)
        bad = {{"fft.local/n64": {{"VR": 3, "LOCAL": 0, "GROUPS_PER_CU": 16}},
               "dense.input/b4": {{"TN_KB": 100000, "TN_R": 6, "TN_V": 2, "VW": 8, "VLOAD": 1,
                                   "FMA": 0, "LOCAL": 16}},
               "dense.forward/b4": {{"NT_I": 1000, "VW": 8, "VLOAD": 1, "FMA": 0, "LOCAL": 16}},
               "optim.elementwise/flat": {{"VW": 5, "VLOAD": 1, "LOCAL": 0}}}}
        path = tuning.cache_file(rt)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({{"device": tuning.device_key(rt), "results": {{
            k: {{"params": p, "source": src(k.split("/")[0]), "candidates": [[p, 1e-6]]}}
            for k, p in bad.items()}}}}))
        x = np.random.default_rng(0).standard_normal((3, 64)) + 0j
        got = fft.fft(rt.to_device(x, dtype=np.complex64)).get()
        assert np.abs(got - np.fft.fft(x)).max() < 1e-3
        layer = nnlib.Dense(40, 24, runtime=rt)
        xs = np.random.default_rng(1).standard_normal((4, 40)).astype(np.float32)
        y = layer.forward(xs).get()
        w, b = layer.weight.numpy(), layer.bias.numpy()
        assert np.abs(y - (xs @ w.T + b)).max() < 1e-4
        dx = layer.backward(rt.to_device(np.ones((4, 24), np.float32))).get()
        assert np.abs(dx - np.ones((4, 24)) @ w).max() < 1e-4
        opt = nnlib.optim.SGD(layer.parameters(), lr=0.1)
        assert opt.kernel_params["VW"] in (1, 2, 4, 8, 16) and opt.kernel_params in \\
            nnlib.optim.candidates(rt)
        print("held")
    """, timeout=240)
    assert out.strip().endswith("held")
