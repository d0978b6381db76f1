"""EURUSD H1 bars, read from the installed ``backtesting`` package (never copied here:
its licence is AGPL), and the seed's fractal classifier dataset.

Taught in notebooks/02_train_fractal_classifier.
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import numpy as np

COLUMNS = ("Open", "High", "Low", "Close", "Volume")
CLASS_NAMES = ("upper fractal", "lower fractal", "none")
FEATURES = ("body", "upper wick", "lower wick", "range", "return", "volume",
            "rsi", "macd", "macd signal", "atr", "close - sma20", "close - ema50")


def eurusd_path() -> Path:
    """``backtesting/test/EURUSD.csv`` of the installed package, found without importing it."""
    spec = importlib.util.find_spec("backtesting")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("EURUSD H1 data comes with the PyPI package 'backtesting': "
                                "pip install backtesting")
    return Path(list(spec.submodule_search_locations)[0]) / "test" / "EURUSD.csv"


def load_eurusd(path=None) -> dict:
    """The bars as a dict of arrays: ``time`` (datetime64) and ``open``, ``high``, ``low``,
    ``close``, ``volume`` (float64). Missing files, missing columns, unparsable or NaN
    values and impossible bars (high < low) raise ``ValueError``/``FileNotFoundError``."""
    path = Path(path) if path is not None else eurusd_path()
    if not path.is_file():
        raise FileNotFoundError(f"no bar file at {path}")
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise ValueError(f"{path} is empty")
    header = rows[0]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}; found {header}")
    cols = [header.index(c) for c in COLUMNS]
    times, values = [], []
    for line, row in enumerate(rows[1:], start=2):
        try:
            values.append([float(row[c]) for c in cols])
            times.append(np.datetime64(row[0].replace(" ", "T")))
        except (ValueError, IndexError):
            raise ValueError(f"{path}, line {line}: cannot parse {row}") from None
    data = np.array(values, dtype=np.float64).reshape(-1, len(COLUMNS))
    bad = ~np.isfinite(data).all(axis=1)
    if bad.any():
        raise ValueError(f"{path}: {bad.sum()} rows hold NaN or infinity "
                         f"(first at line {np.argmax(bad) + 2})")
    if (data[:, 1] < data[:, 2]).any():
        raise ValueError(f"{path}: some bars have high < low")
    out = {name.lower(): data[:, i] for i, name in enumerate(COLUMNS)}
    out["time"] = np.array(times)
    return out


def _ema(x: np.ndarray, span: int) -> np.ndarray:
    alpha, out = 2.0 / (span + 1), np.empty_like(x)
    out[0] = x[0]
    for i in range(1, len(x)):
        out[i] = alpha * x[i] + (1 - alpha) * out[i - 1]
    return out


def _sma(x: np.ndarray, n: int) -> np.ndarray:
    c = np.cumsum(np.insert(x, 0, 0.0))
    out = np.empty_like(x)
    out[n - 1:] = (c[n:] - c[:-n]) / n
    out[:n - 1] = c[1:n] / np.arange(1, n)
    return out


def candle_features(bars: dict) -> np.ndarray:
    """Twelve features per bar (see ``FEATURES``), shape (bars, 12), not yet normalised.
    Indicators (RSI 14, MACD 12/26/9, ATR 14, SMA 20, EMA 50) use past bars only."""
    o, h, lo, c, v = (bars[k] for k in ("open", "high", "low", "close", "volume"))
    prev = np.concatenate([[c[0]], c[:-1]])
    ret = c - prev
    gain = _ema(np.maximum(ret, 0), 27)
    loss = _ema(np.maximum(-ret, 0), 27)
    rsi = gain / np.maximum(gain + loss, 1e-12) - 0.5
    macd = _ema(c, 12) - _ema(c, 26)
    true_range = np.maximum(h, prev) - np.minimum(lo, prev)
    return np.stack([c - o, h - np.maximum(o, c), np.minimum(o, c) - lo, h - lo, ret,
                     np.log1p(v), rsi, macd, _ema(macd, 9), _ema(true_range, 27),
                     c - _sma(c, 20), c - _ema(c, 50)], axis=1)


def fractal_labels(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """Bill Williams fractals: bar i is an upper fractal (0) if its high is above the highs of
    the two bars on each side, a lower fractal (1) if its low is below their lows, else 2.
    A bar that is both is ambiguous and labelled 2. The last two bars cannot be known: -1."""
    n = len(high)
    labels = np.full(n, 2, dtype=np.int64)
    for i in range(2, n - 2):
        up = all(high[i] > high[i + d] for d in (-2, -1, 1, 2))
        down = all(low[i] < low[i + d] for d in (-2, -1, 1, 2))
        if up != down:
            labels[i] = 0 if up else 1
    labels[n - 2:] = -1
    return labels


def fractal_dataset(window: int = 20, test_fraction: float = 0.25, bars: dict | None = None):
    """The seed's task: from the last ``window`` candles, will the newest one turn out to be an
    upper fractal, a lower fractal, or neither (known two bars later)?

    Returns ``(x_train, y_train, x_test, y_test)``: x of shape (samples, window * 12), float32,
    z-scored with the training rows' statistics; y class indices. The split is in time order,
    with a gap of ``window + 2`` bars so no bar is seen by both sides.
    """
    bars = load_eurusd() if bars is None else bars
    feats = candle_features(bars)
    labels = fractal_labels(bars["high"], bars["low"])
    n = len(feats)
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if window < 1 or n < 4 * (window + 2):
        raise ValueError(f"need at least {4 * (window + 2)} bars for window {window}, got {n}")
    ends = np.arange(window - 1, n - 2)  # index of the newest candle of each window
    split = int(len(ends) * (1 - test_fraction))
    train_ends, test_ends = ends[:split], ends[split + window + 2:]
    mean = feats[:train_ends[-1] + 1].mean(axis=0)
    std = feats[:train_ends[-1] + 1].std(axis=0) + 1e-12
    z = (feats - mean) / std

    def windows(e):
        idx = e[:, None] + np.arange(1 - window, 1)[None, :]
        return z[idx].reshape(len(e), -1).astype(np.float32)

    return windows(train_ends), labels[train_ends], windows(test_ends), labels[test_ends]
