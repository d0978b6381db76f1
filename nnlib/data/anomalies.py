"""Labelled anomaly data: a seeded generator of the five TODS anomaly types on multivariate
periodic series (the synthetic sets of the CATCH paper have 5 channels), and EURUSD H1 bars
as a multichannel series with anomalies injected at known places.

    data = anomaly_dataset("shapelet", seed=0)   # dict: train, test, labels, kind
    series, names = eurusd_channels(load_eurusd())

Taught in notebooks/07_catch.
"""

from __future__ import annotations

import numpy as np

ANOMALY_KINDS = ("point_global", "point_contextual", "shapelet", "seasonal", "trend")
EURUSD_CHANNELS = ("log return", "log range", "body", "upper wick", "log volume")


def _base(rng, length: int, n_channels: int, start: int = 0):
    """Sums of two sinusoids per channel, channels sharing one latent phase (so that they
    correlate), plus small noise. Returns the series and each channel's (amplitude,
    period, phase) of its main wave, for the seasonal and shapelet anomalies."""
    t = np.arange(start, start + length, dtype=np.float64)
    shared = rng.uniform(0, 2 * np.pi)
    out, waves = np.empty((length, n_channels)), []
    for c in range(n_channels):
        amp, period = rng.uniform(0.5, 1.5), rng.uniform(20, 60)
        phase = shared + rng.uniform(-0.5, 0.5)
        out[:, c] = (amp * np.sin(2 * np.pi * t / period + phase)
                     + 0.3 * amp * np.sin(4 * np.pi * t / period + 2 * phase)
                     + 0.05 * rng.standard_normal(length))
        waves.append((amp, period, phase))
    return out, waves


def _segments(rng, length: int, ratio: float, seg: tuple, margin: int = 10):
    """Non-overlapping [start, end) segments covering about ``ratio`` of ``length``."""
    taken, spans, budget = np.zeros(length, bool), [], ratio * length
    for _ in range(1000):
        if sum(e - s for s, e in spans) >= budget:
            break
        size = int(rng.integers(seg[0], seg[1] + 1))
        s = int(rng.integers(margin, length - size - margin))
        if not taken[max(0, s - margin):s + size + margin].any():
            taken[s:s + size] = True
            spans.append((s, s + size))
    return sorted(spans)


def inject(series, kind: str, rng, ratio: float = 0.05, waves=None, start: int = 0):
    """A copy of ``series`` (time, channels) with anomalies of ``kind`` over about ``ratio``
    of the steps, each in a random non-empty subset of channels, and the 0/1 labels.

    point_global: spikes beyond the channel's range; point_contextual: a jump of 3 local
    standard deviations that stays inside the global range; shapelet: the segment replaced
    by a square wave of the same period; seasonal: the main wave at twice its frequency;
    trend: a ramp added over the segment. ``waves`` (from the generator) gives the periodic
    model; without it (real data) shapelet and seasonal use the segment's own statistics."""
    if kind not in ANOMALY_KINDS:
        raise ValueError(f"unknown anomaly kind {kind!r}; choose one of {ANOMALY_KINDS}")
    x = np.array(series, dtype=np.float64)
    length, n_channels = x.shape
    point = kind.startswith("point")
    spans = _segments(rng, length, ratio, (1, 1) if point else (15, 40))
    labels = np.zeros(length, np.int64)
    lo, hi, sd = x.min(0), x.max(0), x.std(0)
    for s, e in spans:
        labels[s:e] = 1
        chans = rng.choice(n_channels, int(rng.integers(1, n_channels + 1)), replace=False)
        t = np.arange(start + s, start + e)
        for c in chans:
            if kind == "point_global":
                sign = rng.choice([-1, 1])
                x[s, c] = (hi[c] if sign > 0 else lo[c]) + sign * rng.uniform(0.5, 1.0) * (
                    hi[c] - lo[c])
            elif kind == "point_contextual":
                local = x[max(0, s - 10):s + 11, c]
                jump = 3 * max(local.std(), 0.1 * sd[c]) * rng.choice([-1, 1])
                x[s, c] = np.clip(local.mean() + jump, lo[c], hi[c])
            elif kind == "trend":
                x[s:e, c] += np.linspace(0, rng.choice([-1, 1]) * 2 * sd[c], e - s)
            else:
                if waves is not None:
                    amp, period, phase = waves[c]
                else:
                    amp, period, phase = np.sqrt(2) * x[s:e, c].std(), (e - s) / 2.0, 0.0
                main = amp * np.sin(2 * np.pi * t / period + phase)
                if kind == "shapelet":
                    new = amp * np.sign(np.sin(2 * np.pi * t / period + phase))
                else:
                    new = amp * np.sin(4 * np.pi * t / period + phase)
                x[s:e, c] += new - main
    return x, labels


def anomaly_dataset(kind: str, train_length: int = 4000, test_length: int = 2000,
                    n_channels: int = 5, ratio: float = 0.05, seed: int = 0) -> dict:
    """A clean training series and a labelled test series that continues it, with
    anomalies of ``kind`` (one of ANOMALY_KINDS, or "mixed" for all five in turn)."""
    kinds = ANOMALY_KINDS if kind == "mixed" else (kind,)
    if kind != "mixed" and kind not in ANOMALY_KINDS:
        raise ValueError(f"unknown anomaly kind {kind!r}; choose one of "
                         f"{ANOMALY_KINDS + ('mixed',)}")
    for label, n in (("train_length", train_length), ("test_length", test_length),
                     ("n_channels", n_channels)):
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"{label} must be a positive integer, got {n!r}")
    if test_length < 200:
        raise ValueError(f"test_length must be at least 200 to hold anomalies, got {test_length}")
    rng = np.random.default_rng(seed)
    series, waves = _base(rng, train_length + test_length, n_channels)
    test, labels = series[train_length:].copy(), np.zeros(test_length, np.int64)
    cuts = np.linspace(0, test_length, len(kinds) + 1).astype(int)
    for k, a, b in zip(kinds, cuts[:-1], cuts[1:]):
        part, lab = inject(test[a:b], k, rng, ratio, waves, start=train_length + a)
        test[a:b], labels[a:b] = part, lab
    return {"train": series[:train_length], "test": test, "labels": labels, "kind": kind}


def eurusd_channels(bars: dict):
    """EURUSD bars (``load_eurusd()``) as a (time, 5) series: log return of the close,
    log(high / low), body (close - open) / open, upper wick (high - max(open, close)) / open,
    log(1 + volume); and the channel names."""
    o, h, lo, c, v = (np.asarray(bars[k], dtype=np.float64)
                      for k in ("open", "high", "low", "close", "volume"))
    if len(c) < 2:
        raise ValueError("eurusd_channels: need at least two bars")
    ret = np.diff(np.log(c), prepend=np.log(c[0]))
    series = np.stack([ret, np.log(h / lo), (c - o) / o, (h - np.maximum(o, c)) / o,
                       np.log1p(v)], 1)
    return series, EURUSD_CHANNELS


def eurusd_anomaly_split(bars: dict, train_fraction: float = 0.7, ratio: float = 0.03,
                         seed: int = 0) -> dict:
    """The EURUSD channels split in time: the first part for training (as is), the rest
    with point-global, trend and shapelet anomalies injected in thirds, and labels."""
    series, names = eurusd_channels(bars)
    cut = int(len(series) * train_fraction)
    if cut < 100 or len(series) - cut < 300:
        raise ValueError("eurusd_anomaly_split: too few bars for a train and a test part")
    rng = np.random.default_rng(seed)
    test, labels = series[cut:].copy(), np.zeros(len(series) - cut, np.int64)
    thirds = np.linspace(0, len(test), 4).astype(int)
    for k, a, b in zip(("point_global", "trend", "shapelet"), thirds[:-1], thirds[1:]):
        test[a:b], labels[a:b] = inject(test[a:b], k, rng, ratio)
    return {"train": series[:cut], "test": test, "labels": labels, "names": names,
            "time": np.asarray(bars["time"])[cut:]}
