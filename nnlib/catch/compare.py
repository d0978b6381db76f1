"""CATCH against the baselines on one labelled split: the rows of the results table.

Taught in notebooks/07_catch.
"""

from __future__ import annotations

import time

import numpy as np

from .baselines import BASELINES
from .detector import CATCH
from .metrics import evaluate


def compare(data: dict, seed: int = 0, epochs: int = 3, anomaly_ratio: float = 5.0,
            methods=None, progress: bool = False, **catch_options) -> list:
    """Fit every method on ``data["train"]``, score ``data["test"]`` and evaluate against
    ``data["labels"]``: one dict per method with its metrics and fit seconds (for CATCH
    also the median seconds per training epoch, ``epoch_s``)."""
    methods = list(methods or ["CATCH", *BASELINES])
    rows = []
    for name in methods:
        start = time.perf_counter()
        if name == "CATCH":
            model = CATCH(data["train"].shape[1], seed=seed, **catch_options)
            model.fit(data["train"], epochs=epochs, progress=progress)
        else:
            model = BASELINES[name](seed=seed).fit(data["train"])
        seconds = time.perf_counter() - start
        scores = model.score(data["test"])
        row = {"method": name, "seed": seed, "fit_s": seconds}
        if name == "CATCH":
            row["epoch_s"] = float(np.median([h["seconds"] for h in model.history]))
        rows.append({**row, **evaluate(data["labels"], scores, anomaly_ratio)})
    return rows
