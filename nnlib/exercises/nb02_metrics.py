"""Checks of notebook 02_train_fractal_classifier: honest classification metrics."""

from __future__ import annotations

import numpy as np

from .harness import (call_student, expect_function, new_rng)
from .registry import exercise
from .verdicts import Case, Verdict, verdict


def _recalls(y_true, y_pred, n_classes):
    return [np.mean(y_pred[y_true == k] == k) for k in range(n_classes) if np.any(y_true == k)]


@exercise("02_train_fractal_classifier", points=1, kernel=False, hints=(
    "A class's recall is the share of its true samples predicted as it.",
    "np.mean([np.mean(y_pred[y_true == k] == k) for k in classes present in y_true])."),
          shortcuts=("sklearn", "scipy", "torch"))
def check_balanced_accuracy(balanced_accuracy) -> Verdict:
    """``balanced_accuracy(y_true, y_pred, n_classes)``: the mean, over the classes present in
    ``y_true``, of each class's recall (the share of its samples predicted as it)."""
    params = ("y_true", "y_pred", "n_classes")

    def cases():
        expect_function(balanced_accuracy, "balanced_accuracy", params)
        rng = new_rng()
        labelled = [(np.array([2]), np.array([2]), 3),
                    (rng.integers(0, 3, 7), rng.integers(0, 3, 7), 3),
                    (rng.choice(3, 1000, p=[0.13, 0.13, 0.74]), np.full(1000, 2), 3),  # "none"
                    (np.array([0, 0, 2, 2, 2]), np.array([0, 1, 2, 2, 0]), 3),
                    (rng.integers(0, 5, 101), rng.integers(0, 5, 101), 5)]
        for y_true, y_pred, k in labelled:
            recall_all = [np.mean(y_pred[y_true == c] == c) if np.any(y_true == c) else 0.0
                          for c in range(k)]
            precisions = [np.mean(y_true[y_pred == c] == c) for c in range(k)
                          if np.any(y_pred == c)]
            mistakes = {
                "that is the plain accuracy: average the recall of each class instead":
                    np.mean(y_true == y_pred),
                "that is the mean precision (right / predicted); recall divides by the class's "
                "true samples": np.mean(precisions),
                "skip the classes absent from y_true (their recall is undefined)":
                    np.mean(recall_all),
            }
            yield Case(f"length {len(y_true)}, {k} classes",
                       lambda a=y_true, b=y_pred, k=k: call_student(balanced_accuracy, a, b, k),
                       np.array(np.mean(_recalls(y_true, y_pred, k))), "the balanced accuracy",
                       mistakes)
    return verdict("check_balanced_accuracy", "balanced_accuracy", cases)


@exercise("02_train_fractal_classifier", points=1, kernel=False, hints=(
    "Count each (true, predicted) pair: row = the true class, column = the prediction.",
    "np.add.at(c, (y_true, y_pred), 1) on c = np.zeros((n_classes, n_classes), int)."),
          shortcuts=("sklearn", "scipy", "torch"))
def check_confusion_matrix(confusion_matrix) -> Verdict:
    """``confusion_matrix(y_true, y_pred, n_classes)``: counts c[i, j] of the samples of true
    class i predicted as class j, an (n_classes, n_classes) integer array."""
    params = ("y_true", "y_pred", "n_classes")

    def cases():
        expect_function(confusion_matrix, "confusion_matrix", params)
        rng = new_rng()
        for y_true, y_pred, k in ((np.array([2]), np.array([0]), 3),
                                  (rng.integers(0, 3, 50), rng.integers(0, 3, 50), 3),
                                  (np.array([0, 0, 1]), np.array([1, 1, 1]), 4),
                                  (rng.integers(0, 5, 301), rng.integers(0, 5, 301), 5)):
            want = np.zeros((k, k), np.int64)
            np.add.at(want, (y_true, y_pred), 1)
            mistakes = {"rows are the true classes, columns the predictions: c[y_true, y_pred]":
                        want.T,
                        "count every sample: np.add.at, or a loop; c[y_true, y_pred] += 1 "
                        "counts a repeated pair once": np.minimum(want, 1)}
            yield Case(f"{len(y_true)} samples, {k} classes",
                       lambda a=y_true, b=y_pred, k=k: call_student(confusion_matrix, a, b, k),
                       want, "the matrix", mistakes,
                       "c[i, j] counts the samples of true class i predicted as class j")
    return verdict("check_confusion_matrix", "confusion_matrix", cases, rtol=0, atol=0)
