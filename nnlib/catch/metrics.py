"""Anomaly-detection metrics on per-step scores and 0/1 labels: AUC-ROC and AUC-PR (as
scikit-learn computes them: tests/test_anomalies.py compares), best F1 over thresholds and F1
at a percentile threshold.

Taught in notebooks/06_attention_primer, notebooks/07_catch.
"""

from __future__ import annotations

import numpy as np


def _check(labels, scores):
    y, s = np.asarray(labels), np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"labels {y.shape} and scores {s.shape} must be equal 1-D shapes")
    if not np.isfinite(s).all():
        raise ValueError("scores contain NaN or infinity")
    if not np.isin(y, (0, 1)).all() or y.min() == y.max():
        raise ValueError("labels must be 0/1 and contain both classes")
    return y.astype(np.int64), s


def _curve(y, s):
    """True and false positive counts at each distinct threshold, highest score first."""
    order = np.argsort(-s, kind="mergesort")
    y, s = y[order], s[order]
    last = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # the last index of each score
    tp = np.cumsum(y)[last]
    return tp, (last + 1) - tp, s[last]


def auc_roc(labels, scores) -> float:
    """Area under the ROC curve: the trapezoids between the (false, true positive rate)
    points of every distinct threshold, from (0, 0) (scikit-learn's roc_auc_score)."""
    tp, fp, _ = _curve(*_check(labels, scores))
    tpr, fpr = np.r_[0, tp] / tp[-1], np.r_[0, fp] / fp[-1]
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))


def auc_pr(labels, scores) -> float:
    """Average precision, the usual AUC-PR: the precision at each distinct threshold times
    the recall it adds (scikit-learn's average_precision_score)."""
    tp, fp, _ = _curve(*_check(labels, scores))
    recall = np.r_[0, tp] / tp[-1]
    return float(np.sum(np.diff(recall) * tp / (tp + fp)))


def f1_at(labels, predicted) -> dict:
    """Precision, recall and F1 of 0/1 predictions."""
    y, p = np.asarray(labels).astype(bool), np.asarray(predicted).astype(bool)
    tp = int((y & p).sum())
    precision = tp / max(int(p.sum()), 1)
    recall = tp / max(int(y.sum()), 1)
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def best_f1(labels, scores) -> dict:
    """The best F1 over every threshold (predict score >= threshold), with that threshold."""
    y, s = _check(labels, scores)
    tp, fp, thresholds = _curve(y, s)
    f1 = 2 * tp / (2 * tp + fp + (tp[-1] - tp))
    i = int(np.argmax(f1))
    return {"f1": float(f1[i]), "threshold": float(thresholds[i])}


def evaluate(labels, scores, anomaly_ratio: float | None = None) -> dict:
    """AUC-ROC, AUC-PR, best F1 and (with ``anomaly_ratio`` in percent) the F1 when the top
    anomaly_ratio % of the scores are flagged."""
    out = {"auc_roc": auc_roc(labels, scores), "auc_pr": auc_pr(labels, scores),
           "best_f1": best_f1(labels, scores)["f1"]}
    if anomaly_ratio is not None:
        threshold = np.percentile(scores, 100 - anomaly_ratio)
        out["f1_pct"] = f1_at(labels, np.asarray(scores) > threshold)["f1"]
    return out
