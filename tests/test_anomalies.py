"""The labelled anomaly data (nnlib.data.anomalies), the metrics against scikit-learn and
the baselines on one easy case."""

import numpy as np
import pytest
from sklearn import metrics as sk

import nnlib
from nnlib.catch import baselines, metrics
from nnlib.data import ANOMALY_KINDS, SPECTRAL_KINDS, anomaly_dataset, eurusd_anomaly_split, inject


@pytest.mark.parametrize("kind", ANOMALY_KINDS + SPECTRAL_KINDS + ("mixed",))
def test_generator_is_seeded_labelled_and_local(kind):
    a, b = anomaly_dataset(kind, 600, 800, seed=3), anomaly_dataset(kind, 600, 800, seed=3)
    np.testing.assert_array_equal(a["test"], b["test"])
    assert a["train"].shape == (600, 5) and a["test"].shape == (800, 5)
    ratio = a["labels"].mean()
    assert 0.005 < ratio < (0.2 if kind == "mixed" else 0.1)  # >= 1 segment per kind
    clean = anomaly_dataset(kind, 600, 800, ratio=0.0, seed=3)["test"]
    changed = np.abs(a["test"] - clean).max(1) > 1e-9
    assert not changed[a["labels"] == 0].any()  # only labelled steps are touched
    assert changed[a["labels"] == 1].mean() > 0.7


def test_point_global_leaves_the_range_and_contextual_stays_inside():
    rng = np.random.default_rng(0)
    x = np.sin(np.arange(500) / 5.0)[:, None].repeat(2, 1)
    g, lab = inject(x, "point_global", rng, 0.02)
    assert (np.abs(g[lab == 1]).max(1) > 1.4).all()
    c, lab = inject(x, "point_contextual", rng, 0.02)
    assert c.min() >= -1 and c.max() <= 1 and lab.sum() > 0


def test_generator_refuses_bad_arguments():
    with pytest.raises(ValueError, match="anomaly kind"):
        anomaly_dataset("spike")
    with pytest.raises(ValueError, match="test_length"):
        anomaly_dataset("trend", test_length=50)
    with pytest.raises(ValueError, match="train_length"):
        anomaly_dataset("trend", train_length=0)


def test_eurusd_split_has_labels_and_finite_channels():
    data = eurusd_anomaly_split(nnlib.data.load_eurusd(), seed=1)
    assert data["train"].shape[1] == data["test"].shape[1] == 5
    assert np.isfinite(data["test"]).all() and 0 < data["labels"].mean() < 0.1
    assert len(data["time"]) == len(data["test"])


def test_best_f1_matches_scikit_learn(rng):
    for size in (7, 500):
        labels = (rng.random(size) < 0.2).astype(int)
        labels[:2] = (0, 1)
        for scores in (rng.standard_normal(size), rng.integers(0, 4, size).astype(float)):
            p, r, _ = sk.precision_recall_curve(labels, scores)
            f1 = np.max(2 * p * r / np.maximum(p + r, 1e-300))
            assert metrics.best_f1(labels, scores)["f1"] == pytest.approx(f1)


def test_auc_roc_and_auc_pr_match_scikit_learn(rng):
    for size in (7, 500):
        labels = (rng.random(size) < 0.2).astype(int)
        labels[:2] = (0, 1)
        for scores in (rng.standard_normal(size), rng.integers(0, 4, size).astype(float)):
            assert metrics.auc_roc(labels, scores) == pytest.approx(
                sk.roc_auc_score(labels, scores), rel=1e-12)
            assert metrics.auc_pr(labels, scores) == pytest.approx(
                sk.average_precision_score(labels, scores), rel=1e-12)


def test_metrics_hand_made_and_bad_input():
    labels, scores = np.array([0, 0, 1, 1]), np.array([0.1, 0.2, 0.8, 0.9])
    assert metrics.evaluate(labels, scores, 50.0) == {"auc_roc": 1.0, "auc_pr": 1.0,
                                                      "best_f1": 1.0, "f1_pct": 1.0}
    assert metrics.f1_at(labels, [1, 0, 1, 0]) == {"precision": 0.5, "recall": 0.5, "f1": 0.5}
    with pytest.raises(ValueError, match="both classes"):
        metrics.auc_roc([0, 0], [1, 2])
    with pytest.raises(ValueError, match="NaN"):
        metrics.auc_pr([0, 1], [np.nan, 1])


@pytest.mark.parametrize("name", list(baselines.BASELINES))
def test_baselines_find_a_global_spike(name):
    data = anomaly_dataset("point_global", 800, 400, n_channels=2, seed=0)
    model = baselines.BASELINES[name]()
    model.fit(data["train"])
    scores = model.score(data["test"])
    assert scores.shape == (400,)
    assert metrics.auc_roc(data["labels"], scores) > 0.55


def test_evaluation_rows_and_table():
    from nnlib.catch.compare import evaluate, format_table, summarize

    rows = evaluate(kinds=("phase_shift", "group_break"), seeds=(0, 1), methods=["PCA"],
                    train_length=600, test_length=300)
    assert len(rows) == 4 and {r["dataset"] for r in rows} == {"phase_shift", "group_break"}
    table = summarize(rows)
    mean, std, count = table["group_break"]["PCA"]
    assert count == 2 and 0.5 < mean <= 1 and std >= 0
    text = format_table(rows)
    assert "group_break" in text and "*" in text and "±" in text
