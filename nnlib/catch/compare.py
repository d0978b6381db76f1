"""CATCH against the baselines: the rows of one labelled split (``compare``), the wider
evaluation over anomaly kinds and seeds (``evaluate``) and its mean and spread
(``summarize``, ``format_table``). Notebook 07 shows the table.

Taught in notebooks/07_catch.
"""

from __future__ import annotations

import time

import numpy as np

from ..data import ANOMALY_KINDS, SPECTRAL_KINDS, anomaly_dataset, planted_groups
from .baselines import BASELINES
from .detector import CATCH
from .metrics import evaluate as metrics_of

# The deviations of notebook 07 that let the masks learn (not CATCH's design).
LEARNED_MASKS = {"mask_input": "amplitude", "dc_source": "patches", "mask_lr": 1e-2}
METHODS = ("CATCH", "CATCH+masks", *BASELINES)
# Kinds of the wider evaluation: the six TODS types, two spectral kinds and a relation kind.
EVALUATION_KINDS = ANOMALY_KINDS + SPECTRAL_KINDS + ("group_break",)
METRICS = ("auc_roc", "auc_pr", "best_f1", "f1_pct")


def compare(data: dict, seed: int = 0, epochs: int = 3, anomaly_ratio: float = 5.0,
            methods=None, progress: bool = False, **catch_options) -> list:
    """Fit every method on ``data["train"]``, score ``data["test"]`` and evaluate against
    ``data["labels"]``: one dict per method with its metrics and fit seconds (for CATCH
    also the median seconds per training epoch, ``epoch_s``). "CATCH+masks" is CATCH with
    the LEARNED_MASKS deviations."""
    methods = list(methods or ["CATCH", *BASELINES])
    rows = []
    for name in methods:
        start = time.perf_counter()
        if name.startswith("CATCH"):
            extra = LEARNED_MASKS if name == "CATCH+masks" else {}
            model = CATCH(data["train"].shape[1], seed=seed, **{**catch_options, **extra})
            model.fit(data["train"], epochs=epochs, progress=progress)
        else:
            model = BASELINES[name](seed=seed).fit(data["train"])
        seconds = time.perf_counter() - start
        scores = model.score(data["test"])
        row = {"method": name, "seed": seed, "fit_s": seconds}
        if name.startswith("CATCH"):
            row["epoch_s"] = float(np.median([h["seconds"] for h in model.history]))
        rows.append({**row, **metrics_of(data["labels"], scores, anomaly_ratio)})
    return rows


def evaluation_data(kind: str, seed: int, train_length: int = 4000, test_length: int = 2000):
    """The labelled split of one evaluation kind (EVALUATION_KINDS)."""
    if kind == "group_break":
        return planted_groups(train_length, test_length, seed=seed)
    return anomaly_dataset(kind, train_length, test_length, seed=seed)


def evaluate(kinds=EVALUATION_KINDS, seeds=(0, 1, 2), epochs: int = 3, methods=None,
             train_length: int = 4000, test_length: int = 2000, progress: bool = False,
             **catch_options) -> list:
    """``compare`` on every kind and seed: one row per (kind, seed, method)."""
    rows = []
    for seed in seeds:
        for kind in kinds:
            data = evaluation_data(kind, seed, train_length, test_length)
            for row in compare(data, seed=seed, epochs=epochs, methods=methods,
                               progress=progress, **catch_options):
                rows.append({"dataset": kind, **row})
    return rows


def summarize(rows, metric: str = "auc_roc") -> dict:
    """{dataset: {method: (mean, std, count)}} of ``metric`` over the seeds."""
    out = {}
    for r in rows:
        out.setdefault(r["dataset"], {}).setdefault(r["method"], []).append(r[metric])
    return {d: {m: (float(np.mean(v)), float(np.std(v)), len(v)) for m, v in by.items()}
            for d, by in out.items()}


def format_table(rows, metric: str = "auc_roc") -> str:
    """The summary as text: one line per dataset, mean ± std of ``metric`` per method, the
    best mean marked with *."""
    table = summarize(rows, metric)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = [f"{metric} (mean ± std over seeds)", f"{'dataset':18s}" + "".join(
        f"{m:>17s}" for m in methods)]
    for dataset, by in table.items():
        best = max(v[0] for v in by.values())
        cells = "".join(f"{by[m][0]:10.3f}±{by[m][1]:.3f}{'*' if by[m][0] == best else ' '}"
                        if m in by else f"{'':>17s}" for m in methods)
        lines.append(f"{dataset:18s}{cells}")
    return "\n".join(lines)
