"""EURUSD H1 loading, fractal labels and the dataset split."""

import numpy as np
import pytest

from nnlib import data
from nnlib.data import eurusd

HEADER = ",Open,High,Low,Close,Volume\n"


def write_bars(path, n, nan_at=None):
    rng = np.random.default_rng(0)
    close = 1.1 + np.cumsum(rng.normal(0, 1e-3, n))
    lines = [HEADER]
    for i, c in enumerate(close):
        o = c - 2e-4
        h = "nan" if i == nan_at else f"{max(o, c) + 5e-4:.5f}"
        lines.append(f"2020-01-01 {i % 24:02d}:00:00,{o:.5f},{h},{min(o, c) - 5e-4:.5f},"
                     f"{c:.5f},{100 + i}\n")
    path.write_text("".join(lines))
    return path


def test_eurusd_comes_from_the_installed_package():
    bars = data.load_eurusd()
    assert len(bars["close"]) == 5000
    assert (bars["high"] >= bars["low"]).all()
    assert np.all(np.diff(bars["time"]) > np.timedelta64(0))
    assert "site-packages" in str(eurusd.eurusd_path()) or "backtesting" in str(eurusd.eurusd_path())


def test_fractal_labels_on_a_hand_made_series():
    high = np.array([1, 2, 5, 2, 1, 1, 1, 1.0])
    low = np.array([1, 1, 1, 1, 0, 1, 1, 1.0]) - 0.5
    labels = data.fractal_labels(high, low)
    assert labels[2] == 0  # the peak
    assert labels[4] == 1  # the trough
    assert labels[3] == 2
    assert list(labels[-2:]) == [-1, -1]


def test_dataset_shapes_split_and_normalisation():
    x_tr, y_tr, x_te, y_te = data.fractal_dataset(window=20)
    assert x_tr.shape[1] == x_te.shape[1] == 20 * len(data.FEATURES) == 240
    assert x_tr.dtype == np.float32
    assert set(np.unique(y_tr)) == {0, 1, 2} and (y_te >= 0).all()
    assert len(x_tr) + len(x_te) < 5000 - 20
    assert abs(float(x_tr.mean())) < 0.1 and 0.8 < float(x_tr.std()) < 1.2


def test_missing_file_nan_rows_and_short_series(tmp_path):
    with pytest.raises(FileNotFoundError, match="no bar file"):
        data.load_eurusd(tmp_path / "none.csv")
    with pytest.raises(ValueError, match="NaN"):
        data.load_eurusd(write_bars(tmp_path / "nan.csv", 50, nan_at=7))
    short = data.load_eurusd(write_bars(tmp_path / "short.csv", 60))
    with pytest.raises(ValueError, match="need at least 88 bars"):
        data.fractal_dataset(window=20, bars=short)
    (tmp_path / "cols.csv").write_text(",Open,High\n2020-01-01,1,2\n")
    with pytest.raises(ValueError, match="missing columns"):
        data.load_eurusd(tmp_path / "cols.csv")
    (tmp_path / "junk.csv").write_text(HEADER + "2020-01-01 00:00:00,1,x,1,1,1\n")
    with pytest.raises(ValueError, match="line 2: cannot parse"):
        data.load_eurusd(tmp_path / "junk.csv")
