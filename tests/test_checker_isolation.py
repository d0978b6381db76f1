"""The checkers contain what a student's code does: function checks run in the worker like
kernel checks (a time limit, crashes and exits contained, shortcuts unavailable, results of
the wrong type refused), a script without a __main__ guard works, output is capped, the worker
dies with its caller, and a Pool worker is told why checks cannot run there."""

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnlib import exercises
from nnlib.runtime import kernel_dir


def _auc(labels, scores):
    anomalous, normal = scores[labels == 1][:, None], scores[labels == 0][None, :]
    return float((anomalous > normal).mean() + 0.5 * (anomalous == normal).mean())


def _sleeps(labels, scores):
    time.sleep(600)


def _exits_process(labels, scores):
    os._exit(3)


def _segfaults(labels, scores):
    os.kill(os.getpid(), signal.SIGSEGV)


def _calls_sys_exit(labels, scores):
    sys.exit(0)


def _as_text(labels, scores):
    return str(_auc(labels, scores))


def _as_complex(labels, scores):
    return np.complex128(_auc(labels, scores))


class _Unreadable:
    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("no array here")


def _unreadable(labels, scores):
    return _Unreadable()


def _with_sklearn(labels, scores):
    import sklearn.metrics
    return sklearn.metrics.roc_auc_score(labels, scores)


def _with_nnlib(labels, scores):
    from nnlib.catch import metrics
    return metrics.auc_roc(labels, scores)


def _prints(labels, scores):
    print("looking at", len(labels), "labels")
    return _auc(labels, scores)


@pytest.mark.parametrize("fn, timeout, message", [
    (_sleeps, 3, "Your function did not finish in 3 s"),
    (_exits_process, None, "Your function ended the checker's process"),
    (_segfaults, None, "Your function ended the checker's process"),
    (_calls_sys_exit, None, "_calls_sys_exit called sys.exit"),
    (_as_text, None, "the AUC-ROC should be a number, got the text"),
    (_as_complex, None, "the AUC-ROC should hold real numbers, got complex128"),
    (_unreadable, None, "could not be read as numbers: RuntimeError: no array here"),
    (_with_sklearn, None, "Your function uses sklearn.metrics, which this exercise leaves out"),
    (_with_nnlib, None, "nnlib.catch.metrics.auc_roc computes the answer this exercise asks"),
])
def test_a_function_check_contains_what_the_function_does(fn, timeout, message):
    verdict = exercises.check_auc_roc(fn, timeout=timeout)
    assert not verdict and message in verdict.report, verdict.report
    assert exercises.check_auc_roc(_auc)  # the caller lives on; a fresh worker takes over


def test_what_a_function_prints_is_shown_in_the_report(capfd):
    verdict = exercises.check_auc_roc(_prints)
    assert verdict and "Your code printed:\n    looking at 2 labels" in verdict.report
    assert "looking at" not in capfd.readouterr().out


def test_what_a_kernel_prints_is_capped(tmp_path, capfd):
    text = (kernel_dir() / "vector.cl").read_text()
    (tmp_path / "vector.cl").write_text(text.replace(
        "out[i] = a[i] + b[i];",
        "{\n        for (int k = 0; k < 50; ++k) printf(\"item %d, %d\\n\", i, k);\n"
        "        out[i] = a[i] + b[i];\n    }", 1))
    verdict = exercises.check_vector_add(tmp_path)
    assert verdict and "Your code printed:\n    item " in verdict.report, verdict.report
    assert "more lines)" in verdict.report and verdict.report.count("item ") == 20
    assert "item " not in capfd.readouterr().out


def test_a_huge_local_array_is_named(tmp_path):
    text = (kernel_dir() / "vector.cl").read_text()
    (tmp_path / "vector.cl").write_text(text.replace(
        "    int i = get_global_id(0);",
        "    local float big[1 << 26];\n    int i = get_global_id(0);\n"
        "    big[(i * 7919) % (1 << 26)] = 1.0f;\n    barrier(CLK_LOCAL_MEM_FENCE);\n"
        "    if (i < n) out[i] = big[i % 64] * 0.0f;", 1))
    verdict = exercises.check_vector_add(tmp_path)
    assert not verdict and "bytes of local memory; this device has" in verdict.report, \
        verdict.report


def test_local_memory_refused_at_build_is_named(tmp_path, monkeypatch):
    # NVIDIA's compiler refuses such a kernel at build, where PoCL builds it and the check
    # reads its local memory size
    from nnlib import runtime
    from nnlib.exercises.harness import student_kernel
    from nnlib.exercises.verdicts import NotYet

    (tmp_path / "vector.cl").write_text((kernel_dir() / "vector.cl").read_text())
    log = ("ptxas error   : Entry function 'vector_add' uses too much shared data "
           "(0x10000004 bytes, 0x38c00 max)")

    def nvidia_build(self, topic, options=(), folder=None):
        raise runtime.KernelBuildError(f"kernels/vector.cl failed to build. Build log:\n{log}")
    monkeypatch.setattr(runtime.Runtime, "program", nvidia_build)
    with pytest.raises(NotYet, match="vector_add asks for 268435460 bytes of local memory; "
                                     "this device has"):
        student_kernel(tmp_path, "vector", "vector_add", ("a", "b", "out", "n"))


def _run(script: str, *args, timeout=180):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def test_a_script_without_a_main_guard_checks_a_correct_kernel(tmp_path):
    script = tmp_path / "check.py"
    script.write_text("from nnlib import exercises\n"
                      f"print(exercises.check_vector_add({str(kernel_dir())!r}))\n"
                      "print(exercises.check_auc_roc(lambda labels, scores: 0.5))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=180)
    assert "check_vector_add: PASSED" in done.stdout, done.stdout + done.stderr
    assert "check_auc_roc: not yet" in done.stdout, done.stdout + done.stderr
    assert done.stdout.count("check_vector_add") == 1  # the script ran once, not in the worker


def test_the_worker_dies_with_its_caller(tmp_path):
    text = (kernel_dir() / "vector.cl").read_text()
    (tmp_path / "vector.cl").write_text(
        text.replace("out[i] = a[i] + b[i];", "while (a[0] == a[0]) out[i] += 1.0f;", 1))
    caller = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import multiprocessing, sys, threading, time
        from nnlib import exercises
        def report():
            while not multiprocessing.active_children():
                time.sleep(0.1)
            print(multiprocessing.active_children()[0].pid, flush=True)
        threading.Thread(target=report, daemon=True).start()
        exercises.check_vector_add(sys.argv[1], timeout=300)
        """), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(caller.stdout.readline())
        time.sleep(2)  # the worker builds the kernel and loops in it
        caller.kill()
        caller.wait(30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _alive(worker):
            time.sleep(0.2)
        assert not _alive(worker), "the worker outlived its caller"
    finally:
        caller.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def _check_in_pool(_):
    return exercises.check_auc_roc(_auc).report


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and fork: Linux")
def test_a_pool_worker_is_told_why_checks_cannot_run_there():
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        report = pool.map(_check_in_pool, [0])[0]
    assert "checks cannot run inside a multiprocessing.Pool worker" in report, report
    assert "ProcessPoolExecutor" in report


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6),
                 st.floats(allow_nan=True, allow_infinity=True), st.complex_numbers(),
                 st.lists(st.floats(allow_nan=True), max_size=4), st.binary(max_size=4),
                 st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)))
def test_any_value_a_function_returns_gets_a_verdict(value):
    # no returned value is the AUC-ROC of all four cases at once: every one is "not yet", in
    # a report, never a traceback or an escaped exception
    verdict = exercises.check_auc_roc(lambda labels, scores: value)
    assert not verdict and verdict.report.startswith("check_auc_roc: not yet."), verdict.report
    assert "Traceback" not in verdict.report
