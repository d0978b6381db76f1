"""Baseline detectors on the same splits as CATCH, each ``fit(train)`` then
``score(series)`` -> one score per step. Features at step t are the ``lags`` last steps of
every channel (the series' first value repeated before its start), standard-scaled on train.
IsolationForest and PCA come from scikit-learn; the autoencoder is an nnlib Sequential.

Taught in notebooks/07_catch.
"""

from __future__ import annotations

import numpy as np
from tqdm.auto import trange

from ..layers import Dense
from ..network import Sequential
from .. import optim


def lagged(x, lags: int):
    """(time, channels) -> (time, lags * channels): rows x[t - lags + 1 .. t] flattened."""
    padded = np.concatenate([np.repeat(x[:1], lags - 1, 0), x])
    idx = np.arange(len(x))[:, None] + np.arange(lags)
    return padded[idx].reshape(len(x), -1)


class _Lagged:
    def __init__(self, lags: int = 16, seed: int = 0):
        self.lags, self.seed = lags, seed

    def _features(self, series, fit=False):
        x = np.asarray(series, dtype=np.float64)
        x = x[:, None] if x.ndim == 1 else x
        if fit:
            self.mean, self.std = x.mean(0), np.where(x.std(0) > 0, x.std(0), 1.0)
        return lagged((x - self.mean) / self.std, self.lags)


class IsolationForestDetector(_Lagged):
    def fit(self, train):
        from sklearn.ensemble import IsolationForest

        self.model = IsolationForest(n_estimators=100, random_state=self.seed)
        self.model.fit(self._features(train, fit=True))
        return self

    def score(self, series):
        return -self.model.score_samples(self._features(series))


class PCADetector(_Lagged):
    """Reconstruction error of the lagged features from their top principal components."""

    def __init__(self, lags: int = 16, variance: float = 0.9, seed: int = 0):
        super().__init__(lags, seed)
        self.variance = variance

    def fit(self, train):
        from sklearn.decomposition import PCA

        self.model = PCA(n_components=self.variance, random_state=self.seed)
        self.model.fit(self._features(train, fit=True))
        return self

    def score(self, series):
        f = self._features(series)
        rec = self.model.inverse_transform(self.model.transform(f))
        return ((f - rec) ** 2).mean(1)


class AutoencoderDetector(_Lagged):
    """A dense autoencoder (lags*channels -> 32 -> 8 -> 32 -> lags*channels) trained with
    Adam on the lagged features; the score is the reconstruction MSE."""

    def fit(self, train, epochs: int = 20, batch: int = 128, progress: bool = False):
        f = self._features(train, fit=True).astype(np.float32)
        width = f.shape[1]
        sizes = [width, 32, 8, 32, width]
        acts = ["tanh", "tanh", "tanh", "none"]
        self.net = Sequential([Dense(a, b, act, seed=self.seed + i)
                               for i, (a, b, act) in enumerate(zip(sizes, sizes[1:], acts))])
        opt = optim.Adam(self.net.parameters(), lr=1e-3)
        rng = np.random.default_rng(self.seed)
        for _ in trange(epochs, disable=not progress):
            order = rng.permutation(len(f))
            for i in range(0, len(f), batch):
                rows = f[order[i:i + batch]]
                self.net.train_step(rows, rows, opt)
        return self

    def score(self, series):
        f = self._features(series).astype(np.float32)
        return ((self.net.forward(f).get() - f) ** 2).mean(1)


BASELINES = {"IsolationForest": IsolationForestDetector, "PCA": PCADetector,
             "Autoencoder": AutoencoderDetector}
