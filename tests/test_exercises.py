"""Exercises: the generator strips the solutions, the exercise notebooks run and say "not yet",
the solutions pass every check, and typical mistakes are caught with a useful message."""

import re
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
KERNEL_CHECKS = ["check_vector_add", "check_dense_forward", "check_activation_grad",
                 "check_output_gradient", "check_sgd_update", "check_cmulconj",
                 "check_fft_radix2_stage", "check_gumbel_softmax", "check_masked_softmax"]


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
    solutions = {"vector.cl": "out[i] = a[i] + b[i]", "dense.cl": "float sum = bias[j];",
                 "activation.cl": "return 1.0f - y * y;", "loss.cl": "float d = y[i] - t[i];",
                 "complex.cl": "a.x * b.x + a.y * b.y", "fft.cl": "int o = 2 * j - k;",
                 "optim.cl": "floatv step = grad;",
                 "attention.cl": "top = fmax(top, a[j]);"}
    for name, text in kernels.items():
        assert "SOLUTION" not in text and "YOUR CODE HERE" in text, name
        assert solutions[name] not in text, f"{name} still holds its solution"
    real = nnlib_source("dense")  # everything but the exercise is kept
    names = re.compile(r"kernel void (\w+)")
    assert names.findall(kernels["dense.cl"]) == names.findall(real)
    tail = real[real.index("kernel void dense_backward_input_seed"):]
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
        cells = [c for c in nb.cells if c.cell_type == "code" and "exercises.check_" in c.source]
        if not cells:
            continue  # identical to the solution notebook, which nbval runs
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        for cell in cells:
            shown = "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "")
                            for o in cell.outputs)
            assert ": not yet." in shown, f"{path.name}: {cell.source!r} showed {shown!r}"
            checked += 1
    assert checked >= 5


# ---------------------------------------------------------------- the checks

@pytest.mark.parametrize("name", KERNEL_CHECKS)
def test_solution_kernels_pass(name):
    verdict = getattr(exercises, name)(kernel_dir())
    assert verdict, verdict.report
    assert "PASSED" in repr(verdict)


def test_solution_function_passes():
    fn = _solution_function("02_train_fractal_classifier.py", "balanced_accuracy")
    assert exercises.check_balanced_accuracy(fn)
    assert exercises.check_auc_roc(_solution_function("06_attention_primer.py", "auc_roc"))


WRONG_KERNELS = [  # check, file, solution text, mistake, what the report must say
    ("check_dense_forward", "dense", "float sum = bias[j];", "float sum = 0.0f;",
     "the bias is missing"),
    ("check_dense_forward", "dense", "y[(size_t)b * n_out + j] = activate(sum, act);",
     "y[(size_t)b * n_out + j] = sum;", "the activation is missing"),
    ("check_activation_grad", "activation", "return 1.0f - y * y;", "return 1.0f - y;",
     "FAILED  tanh, n = 37: max |error|"),
    ("check_activation_grad", "activation", "case ACT_SIGMOID: return y * (1.0f - y);", "",
     "activate_grad returns 1 for sigmoid"),
    ("check_output_gradient", "loss", "2.0f * d * inv_count", "d * inv_count",
     "the factor 2 is missing"),
    ("check_output_gradient", "loss", ": d * inv_count;", ": d;", "the mean is missing"),
    ("check_vector_add", "vector", "if (i < n)  // the global size may be rounded up past n",
     "", "wrote past the end of out"),
    ("check_vector_add", "vector", "a[i] + b[i]", "a[i] + bb[i]",
     "vector.cl does not build. The compiler says:"),
    ("check_vector_add", "vector", "int n)", "int n, int extra)", "takes 5 parameters"),
    ("check_vector_add", "vector", "void vector_add(", "void vector_sum(",
     "has no kernel named vector_add"),
    ("check_cmulconj", "complex", "a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x",
     "a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x", "the conjugate is missing"),
    ("check_fft_radix2_stage", "fft", "w.y = -w.y;", ";", "conjugate the twiddle"),
    ("check_sgd_update", "optim", "store_v(wi - lr * step,", "store_v(wi + lr * step,",
     "the step has the wrong sign"),
    ("check_masked_softmax", "attention", "a[j] /= sum;", ";", "divide every exp by the row"),
    ("check_masked_softmax", "attention", "lse[((size_t)g * heads + h) * n + i] = top + log(sum);",
     "lse[((size_t)g * heads + h) * n + i] = log(sum);", "add back the maximum"),
    ("check_masked_softmax", "attention", "!hard ? exp(a[j] - top) : m[j] != 0.0f ? m[j] * "
     "exp(a[j] - top)", "!hard ? exp(a[j]) : m[j] != 0.0f ? m[j] * exp(a[j])",
     "FAILED  2 groups, n = 6, 1 heads of 4, finite mask, large logits"),
    ("check_masked_softmax", "attention", "m[j] != 0.0f ? m[j] * exp(a[j] - top) : 0.0f",
     "exp(a[j] - top)", "the hard mask multiplies exp by m[j]"),
    ("check_gumbel_softmax", "activation", "h[c] = c == best ? 1.0f : 0.0f;", "h[c] = y[c];",
     "hard is the one-hot of soft's largest entry"),
    ("check_gumbel_softmax", "activation", "y[c] = (z[c] + g[c]) / tau;", "y[c] = z[c] / tau;",
     "add the Gumbel noise"),
    ("check_gumbel_softmax", "activation", "y[c] = (z[c] + g[c]) / tau;", "y[c] = z[c] + g[c];",
     "divide logits + noise by the temperature tau"),
    ("check_gumbel_softmax", "activation", "y[c] = exp(y[c] - top);", "y[c] = exp(y[c]);",
     "FAILED  3 rows of 6, tau = 1.0, large logits"),
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
