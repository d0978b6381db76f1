"""Data for the workbook: EURUSD H1 bars and the seed's fractal classification task.

Taught in notebooks/02_train_fractal_classifier.
"""

from .anomalies import ANOMALY_KINDS, anomaly_dataset, eurusd_anomaly_split, eurusd_channels, inject  # noqa: F401,E501
from .eurusd import (
    CLASS_NAMES,
    FEATURES,
    candle_features,
    fractal_dataset,
    fractal_labels,
    load_eurusd,
)

__all__ = ["CLASS_NAMES", "FEATURES", "candle_features", "fractal_dataset", "fractal_labels",
           "load_eurusd"]
