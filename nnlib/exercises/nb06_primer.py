"""Checks of notebook 06_attention_primer: Gumbel-softmax and AUC-ROC."""

from __future__ import annotations

import numpy as np

from .. import reference as ref
from .harness import (LARGE_LOGITS, Output, call_student, expect_function, guard, launch, new_rng,
                      student_kernel, to_device, wide)
from .registry import exercise
from .verdicts import Case, Verdict, verdict


@exercise("06_attention_primer", points=2, kernel=True, hints=(
    "Noise first, then temperature, then a stable softmax; hard is a one-hot, not a copy.",
    "y = (z + g) / tau; soft = exp(y - max y) / sum; hard[c] = c == argmax soft ? 1 : 0."))
def check_gumbel_softmax(folder) -> Verdict:
    """``gumbel_softmax_forward(logits, noise, soft, hard, rows, cols, tau)`` in
    ``<folder>/activation.cl``, compared as rows of soft followed by hard."""
    params = ("logits", "noise", "soft", "hard", "rows", "cols", "tau")

    def cases():
        kernel = student_kernel(folder, "activation", "gumbel_softmax_forward", params)
        rng = new_rng()
        for rows, cols, tau, size in ((1, 1, 1.0, 1.0), (1, 7, 1.0, 1.0), (13, 33, 0.5, 1.0),
                                      (wide(), 5, 2.0, 1.0), (3, 6, 1.0, 60.0), (4, 6, 1.0, 0.0)):
            logits = (size * rng.standard_normal((rows, cols))).astype(np.float32)
            noise = (-np.log(-np.log(rng.uniform(1e-6, 1.0, (rows, cols))))).astype(np.float32)
            if size == 0:  # ties: each row's largest value twice (or more), no noise
                logits = rng.integers(0, 3, (rows, cols)).astype(np.float32)
                logits[:, [1, 4]] = 3.0
                noise[:] = 0.0

            def run(logits=logits, noise=noise, tau=tau):
                rows, cols = logits.shape
                soft, hard = (Output((rows, cols), cols * guard((rows,))) for _ in "sh")
                launch(kernel, (rows,), to_device(logits).data, to_device(noise).data,
                        soft.array.data, hard.array.data, np.int32(rows), np.int32(cols),
                        np.float32(tau))
                return np.concatenate([soft.get("soft"), hard.get("hard")], -1)

            def joined(soft, hard):
                return np.concatenate([soft, hard], -1)
            soft, hard = ref.gumbel_softmax(logits, noise, tau)
            mistakes = {"hard is the one-hot of soft's largest entry: 1 there, 0 elsewhere":
                        joined(soft, soft),
                        "add the Gumbel noise to the logits before dividing by tau":
                        joined(*ref.gumbel_softmax(logits, 0 * noise, tau))}
            if tau != 1:
                mistakes["divide logits + noise by the temperature tau"] = joined(
                    *ref.gumbel_softmax(logits, noise, 1.0))
            if size == 0:
                last = np.zeros_like(hard)
                last[np.arange(rows), cols - 1 - np.argmax(soft[:, ::-1], -1)] = 1.0
                mistakes["on a tie hard marks the first largest entry: replace it only when a "
                         "value is strictly larger (>, not >=)"] = joined(soft, last)
            label = (f"{rows} rows of {cols}, tau = {tau}" + (LARGE_LOGITS if size > 1 else "")
                     + (", tied largest logits" if size == 0 else ""))
            yield Case(label, run, joined(soft, hard), "soft | hard", mistakes,
                       "soft = softmax((logits + noise) / tau) with the row's largest value "
                       "subtracted before exp; hard = the one-hot of soft's largest entry")
    return verdict("check_gumbel_softmax", "gumbel_softmax_forward", cases)


def _pairs(labels, scores):
    """The shares of (anomaly, normal) pairs where the anomaly scores higher, and equal."""
    pos, neg = scores[labels == 1][:, None], scores[labels == 0][None, :]
    return (pos > neg).mean(), (pos == neg).mean()


@exercise("06_attention_primer", points=1, kernel=False, hints=(
    "Compare every anomaly's score with every normal step's score.",
    "AUC = mean over (anomaly, normal) pairs of [s_a > s_n] + 0.5 [s_a == s_n]."),
          shortcuts=("sklearn", "scipy", "torch", "nnlib.catch.metrics:auc_roc"))
def check_auc_roc(auc_roc) -> Verdict:
    """``auc_roc(labels, scores)``: the probability that a random anomaly (label 1) scores
    higher than a random normal step (label 0), ties counting one half."""
    def cases():
        expect_function(auc_roc, "auc_roc", ("labels", "scores"))
        rng = new_rng()
        labelled = [(np.array([0, 1]), np.array([0.2, 0.7])),
                    (np.array([1, 0, 0, 1, 0]), np.array([0.9, 0.1, 0.9, 0.3, 0.3])),
                    (rng.random(200) < 0.1, rng.integers(0, 6, 200).astype(float)),
                    (rng.random(1001) < 0.05, rng.standard_normal(1001))]
        for labels, scores in labelled:
            labels = labels.astype(np.int64)
            higher, tied = _pairs(labels, scores)
            mistakes = {"a tie between an anomaly and a normal step counts one half, not 0":
                        np.array(higher),
                        "a tie counts one half, not 1": np.array(higher + tied),
                        "an anomaly should score higher than a normal step: you counted the "
                        "pairs where it scores lower": np.array(1 - higher - tied / 2)}
            yield Case(f"{labels.size} steps ({labels.sum()} anomalous)"
                       + (", tied scores" if tied else ""),
                       lambda a=labels, b=scores: call_student(auc_roc, a, b),
                       np.array(higher + tied / 2), "the AUC-ROC", mistakes,
                       "count the (anomaly, normal) pairs where the anomaly scores higher, "
                       "plus half the ties, over all such pairs")
    return verdict("check_auc_roc", "auc_roc", cases, rtol=1e-9, atol=1e-9)
