"""CATCH: the anomaly detector around CATCHNet: scaling, windows, bi-level training, scores,
thresholds, checkpoints.

    model = nnlib.catch.CATCH(n_channels, window=96, seed=0)
    model.fit(train, epochs=3)            # train: (time, channels) float array
    s = model.score(test)                 # one score per time step, the tail included
    model.threshold(anomaly_ratio=2.0)    # percentile of the training (and given) scores
    labels = model.predict(test)          # 0/1 per time step

Paper-vs-code switches (defaults follow the official code unless noted):
  projection "linear" (a real Dense on [Re | Im] patches, the code) or "complex" (the seed's
    complex convolution over each frequency patch);
  mask_fill "finite" (-ln 1e10 before the 1/sqrt(dh) scaling: masked channels only
    down-weighted, the code) or "inf" (removed, the paper's figure);
  gumbel "code" (logits +-logit p: a sharpened draw) or "bernoulli";
  eval_mask "sampled" (re-drawn at scoring time as the code does, from a fixed seed so
    scores repeat) or "threshold" (prob >= 0.5, deterministic);
  mask_input "spectrum" (the generator reads the [Re | Im] patch, the code) or "amplitude"
    (a nnlib DEVIATION, off by default: it reads the patch's amplitudes |X_k|, which do not
    change sign with the window's phase; see notebook 07 for why the official input
    cannot learn a grouping of sign-symmetric data);
  dc_source "attention" (the clustering loss on each layer's unmasked q-k cosines, the
    code) or "patches" (a nnlib DEVIATION, off by default: one clustering loss on the
    cosines of the channels' input patches, so that it asks for the pairs that really
    move together; with mask_input "amplitude" the masks then learn planted groups);
  schedule "simple" (lr and mask_lr all along, Adam betas 0.9 / 0.999; the default) or
    "official" (what the official code runs: its OneCycleLR objects are built but never
    stepped, so epoch 1 trains at lr / 25 and mask_lr / 25 with Adam beta1 0.95, and
    after epoch e both optimizers get lr * 0.5^(e - 1): epoch 2 at lr, epoch 3 at lr / 2,
    the mask generator on the main rate).
Deviations, all documented in the notebook: no dropout; the mask gradient is the derivative
of the smooth relaxation m s + (1 - m) fill; the regular term is sum_{i != j} m_ij / (N (N-1)),
0 for N = 1 (the official code divides by zero); every step is scored: non-overlapping
windows plus one window aligned to the series' end.

Taught in notebooks/07_catch.
"""

from __future__ import annotations

import inspect
import time

import numpy as np
from tqdm.auto import tqdm

from .. import optim
from ..checkpoint import (CheckpointError, check_dict, check_int, load_model,
                          save_checkpoint)
from ..loss import DeviceLoss, Loss
from ..layers.base import positive_int
from ..registry import MODELS
from ..runtime import resolve_runtime
from ..sizes import ceil_div
from .model import DC_SOURCES, MASK_INPUTS, PROJECTIONS, CATCHNet
from .ops import step_scores

SWITCHES = {"projection": PROJECTIONS, "mask_fill": ("finite", "inf"),
            "gumbel": ("code", "bernoulli"), "eval_mask": ("sampled", "threshold"),
            "schedule": ("simple", "official"), "mask_input": MASK_INPUTS,
            "dc_source": DC_SOURCES}
# Sized for a 2-core CPU; the official defaults are window 192, patch 16/8, cf 64,
# 3 layers, 2 x 64 heads, d_ff 256, d_model 128, lr 1e-4 / 1e-5, batch 128.
DEFAULTS = dict(window=96, patch_size=16, patch_stride=16, cf_dim=32, e_layers=2, n_heads=2,
                head_dim=16, d_ff=64, d_model=16, projection="linear", mask_fill="finite",
                gumbel="code", eval_mask="sampled", lr=1e-3, mask_lr=1e-4, batch_size=64,
                train_stride=1, dc_lambda=0.005, regular_lambda=0.5, temperature=0.07,
                auxi_lambda=0.005, score_lambda=0.05, inference_patch_size=32,
                val_fraction=0.2, patience=3, schedule="simple", mask_input="spectrum",
                dc_source="attention")
# The numeric options: integers >= 1, or reals in [low, high) (temperature divides: > 0).
POSITIVE_INTS = ("window", "patch_size", "patch_stride", "cf_dim", "e_layers", "n_heads",
                 "head_dim", "d_ff", "d_model", "batch_size", "train_stride",
                 "inference_patch_size", "patience")
REAL_RANGES = {"lr": (0.0, None), "mask_lr": (0.0, None), "dc_lambda": (0.0, None),
               "regular_lambda": (0.0, None), "auxi_lambda": (0.0, None),
               "score_lambda": (0.0, None), "temperature": (1e-6, None),
               "val_fraction": (0.0, 1.0)}
# Scaled series values beyond this overflow float32 in the losses and scores: the FFT of a
# window sums its values, and the frequency error squares that sum.
MAX_SCALED = float(np.sqrt(np.finfo(np.float32).max)) / 1024


def check_options(cfg: dict) -> None:
    """Every numeric option of ``cfg`` (DEFAULTS' keys) in its range, else a ValueError
    saying which and what is allowed."""
    for key in POSITIVE_INTS:
        positive_int("CATCH", key, cfg[key])
    for key, (low, high) in REAL_RANGES.items():
        value = cfg[key]
        ok = isinstance(value, (int, float, np.integer, np.floating)) \
            and not isinstance(value, bool) and np.isfinite(value) and value >= low \
            and (high is None or value < high)
        if not ok:
            span = f"[{low}, {high})" if high is not None else f">= {low}"
            raise ValueError(f"CATCH: {key} must be a finite number {span}, got {value!r}")


# The smallest model worth building (one layer, one head, a 16-step window): built and run in
# milliseconds, for tests and quick checks (tests override what they exercise).
TINY = dict(window=16, patch_size=8, patch_stride=8, cf_dim=4, e_layers=1, n_heads=1,
            head_dim=2, d_ff=4, d_model=2, batch_size=4, inference_patch_size=4)
# The official code's OneCycleLR (div_factor 25, max momentum 0.95), built and never stepped.
OFFICIAL_WARMUP_DIVISOR, OFFICIAL_BETAS = 25.0, (0.95, 0.999)


def check_series(series, n_channels: int, window: int, name: str = "series") -> np.ndarray:
    """A (time, channels) float64 copy of ``series``, or a clear error."""
    x = np.asarray(series)
    if x.ndim == 1 and n_channels == 1:
        x = x[:, None]
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == bool) or np.iscomplexobj(x):
        raise TypeError(f"{name}: expected real numbers, got dtype {x.dtype}")
    if x.ndim != 2 or x.shape[1] != n_channels:
        raise ValueError(f"{name}: expected shape (time, {n_channels}), got {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name}: contains NaN or infinity")
    if x.shape[0] < window:
        raise ValueError(f"{name}: {x.shape[0]} steps is shorter than the window {window}")
    return x.astype(np.float64)


def net_arguments(n_channels: int, seed: int, cfg: dict) -> dict:
    """CATCHNet's arguments (but the runtime) for ``n_channels`` and the options ``cfg``."""
    names = inspect.signature(CATCHNet).parameters
    return {"n_channels": n_channels, "seed": seed,
            **{k: v for k, v in cfg.items() if k in names}}


def sliding_windows(x, starts, window):
    """(count, channels, window) float32 windows of x (time, channels) at ``starts``."""
    idx = np.asarray(starts)[:, None] + np.arange(window)
    return np.ascontiguousarray(x[idx].transpose(0, 2, 1), dtype=np.float32)


class _EarlyStopping:
    """The official EarlyStopping: keeps the weights of the best validation loss and
    stops after ``patience`` epochs without improvement."""

    def __init__(self, params: dict, patience: int):
        self.params, self.patience = params, patience
        self.best, self.best_val, self.bad = None, np.inf, 0

    def stop(self, val: float) -> bool:
        if val < self.best_val:
            self.best_val, self.bad = val, 0
            self.best = {k: p.numpy() for k, p in self.params.items()}
            return False
        self.bad += 1
        return self.bad >= self.patience

    def restore(self) -> None:
        for k, p in self.params.items():
            p.set(self.best[k])


@MODELS.register
class CATCH:
    """The CATCH detector (see the module docstring); keyword arguments override DEFAULTS."""

    def __init__(self, n_channels: int, seed: int = 0, runtime=None, **options):
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"CATCH: unknown options {sorted(unknown)}")
        cfg = {**DEFAULTS, **options}
        if isinstance(n_channels, bool) or not isinstance(n_channels, (int, np.integer)) \
                or n_channels < 1:
            raise ValueError(f"CATCH: n_channels must be a positive integer, got {n_channels!r}")
        for key, allowed in SWITCHES.items():
            if cfg[key] not in allowed:
                raise ValueError(f"CATCH: unknown {key} {cfg[key]!r}; choose one of {allowed}")
        check_options(cfg)
        if not cfg["patch_size"] <= cfg["window"]:
            raise ValueError("CATCH: patch_size must not exceed the window")
        if not 1 <= cfg["inference_patch_size"] <= cfg["window"]:
            raise ValueError("CATCH: inference_patch_size must lie in [1, window]")
        self.n_channels, self.seed, self.config = int(n_channels), int(seed), cfg
        self.runtime = resolve_runtime(runtime)
        self.net = CATCHNet(**net_arguments(self.n_channels, self.seed, cfg),
                            runtime=self.runtime)
        self.window = cfg["window"]
        self._mse = Loss("mse", self.runtime)
        self.scale_mean = np.zeros(self.n_channels)
        self.scale_std = np.ones(self.n_channels)
        self.history: list = []
        self.train_scores = None
        self.threshold_value = None

    def __repr__(self):
        c = self.config
        return (f"CATCH(channels={self.n_channels}, window={self.window}, patch "
                f"{c['patch_size']}/{c['patch_stride']}, cf={c['cf_dim']}, "
                f"{c['e_layers']} layers, {c['n_heads']}x{c['head_dim']} heads, "
                f"{c['projection']}, {self.parameter_count()} parameters)")

    def parameter_count(self) -> int:
        return sum(p.size for p in self.net.named_parameters().values())

    # ------------------------------------------------------------------ helpers
    def _scale(self, x, name: str = "series"):
        """``x`` scaled by the training mean and std; values float32's losses cannot hold
        (beyond MAX_SCALED standard deviations) are refused."""
        out = (x - self.scale_mean) / self.scale_std
        peak = float(np.abs(out).max(initial=0.0))
        if not peak <= MAX_SCALED:
            raise ValueError(f"{name}: reaches {peak:.3g} training standard deviations from "
                             f"the training mean; at most {MAX_SCALED:.3g} can be scored in "
                             f"float32 (rescale the data, or fit on data of its scale)")
        return out

    def windows(self, series, stride: int | None = None) -> np.ndarray:
        """(count, channels, window) float32 windows of ``series`` (time, channels), scaled
        as in training: at every ``stride``-th step, or (None) the scoring's windows (side
        by side, the last one aligned to the end)."""
        x = self._scale(check_series(series, self.n_channels, self.window))
        starts = self._starts(len(x)) if stride is None \
            else np.arange(0, len(x) - self.window + 1, stride)
        return sliding_windows(x, starts, self.window)

    def batches(self, windows) -> list:
        """``windows`` in batches of the configured batch_size."""
        size = self.config["batch_size"]
        return [windows[i:i + size] for i in range(0, len(windows), size)]

    def mask_noise(self, rng, batch: int) -> np.ndarray:
        """Logistic noise (a difference of two Gumbel draws) for the mask sampler, or zeros
        (the mask thresholded at prob 0.5) without ``rng``."""
        shape = (batch * self.net.patches, self.n_channels, self.n_channels)
        if rng is None:
            return np.zeros(shape, np.float32)
        u = rng.uniform(1e-7, 1 - 1e-7, shape)
        return np.log(u) - np.log1p(-u)

    def _eval_rng(self):
        return np.random.default_rng(self.seed + 1) if self.config["eval_mask"] == "sampled" \
            else None

    def forward(self, batch, noise=None) -> tuple:
        """Windows ``batch`` (B, N, T) through the network with the mask sampler's ``noise``
        (:meth:`mask_noise`; None: zeros): (windows, reconstruction), both on the device."""
        x = self.runtime.to_device(batch)
        noise = self.mask_noise(None, len(batch)) if noise is None else noise
        return x, self.net.forward(x, self.runtime.to_device(noise))

    def backward(self, x, xhat, time: float = 1.0, freq: float = 1.0, dc: float = 1.0):
        """Add to the parameters' gradients those of the training loss of the last
        :meth:`forward` (windows ``x``, reconstruction ``xhat``): ``time`` x the time MSE,
        ``freq`` x the frequency loss (weighted auxi_lambda), ``dc`` x the dc loss (weighted
        dc_lambda), as in training at 1. Returns the frequency errors."""
        cfg = self.config
        grad = self._mse.output_gradient(xhat, x)
        groups = x.shape[0] * self.net.patches
        return self.net.backward(grad if time == 1.0 else grad * time,
                                 freq * cfg["auxi_lambda"] / x.size,
                                 dc * cfg["dc_lambda"] / (cfg["e_layers"] * groups))

    # ------------------------------------------------------------------ training
    def fit(self, train, epochs: int = 3, progress: bool = True) -> list:
        """Train on ``train`` (time, channels): a StandardScaler fitted on the first
        1 - val_fraction of it, stride-``train_stride`` windows shuffled, Adam on the main
        parameters every batch and Adam on the mask generator every
        max(1, min(batches // 10, 100)) batches with its gradients summed in between (the
        official bi-level step), at the rates of ``schedule``. Early stopping on the
        validation time MSE; the best epoch's weights are kept. Returns the history."""
        x = check_series(train, self.n_channels, self.window, "train")
        if not isinstance(epochs, (int, np.integer)) or epochs < 1:
            raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
        fit_w, val_w = self._scale_and_window(x)
        main, mask = self._optimizers()
        mask_every = max(1, min(ceil_div(len(fit_w), self.config["batch_size"]) // 10, 100))
        stopper = _EarlyStopping(self.net.named_parameters(), self.config["patience"])
        rng = np.random.default_rng(self.seed)
        bar = tqdm(range(epochs), desc="epochs", disable=not progress)
        for epoch in bar:
            start = time.perf_counter()
            self._set_rates(main, mask, epoch)
            losses = self._train_epoch(fit_w, main, mask, mask_every, rng)
            row = self._epoch_row(epoch, losses, val_w, time.perf_counter() - start)
            self.history.append(row)
            bar.set_postfix(loss=f"{row['loss']:.4f}", val=f"{row['val']:.4f}")
            if stopper.stop(row["val"]):
                break
        stopper.restore()
        self.train_scores = self._score(x)
        return self.history

    def _scale_and_window(self, x):
        """Fit the scaler on the training part; its shuffled-later windows and the
        validation part's non-overlapping windows (None if shorter than one window)."""
        cfg, t = self.config, self.window
        cut = int(len(x) * (1 - cfg["val_fraction"]))
        if cut < t:
            raise ValueError(f"train: the training part ({cut} steps) is shorter than the "
                             f"window {t}")
        self.scale_mean = x[:cut].mean(0)
        std = x[:cut].std(0)
        self.scale_std = np.where(std > 0, std, 1.0)
        xs = self._scale(x, "train")
        fit_w = sliding_windows(xs, np.arange(0, cut - t + 1, cfg["train_stride"]), t)
        val_w = sliding_windows(xs, np.arange(cut, len(x) - t + 1, t), t) if len(x) - cut >= t \
            else None
        return fit_w, val_w

    def _optimizers(self) -> tuple:
        """Adam on the main parameters and Adam on the mask generator's."""
        cfg = self.config
        betas = OFFICIAL_BETAS if cfg["schedule"] == "official" else (0.9, 0.999)
        main, mask = (optim.Adam(g, lr=lr, betas=betas)
                      for g, lr in zip(self.net.parameter_groups(), (cfg["lr"], cfg["mask_lr"])))
        mask.zero_grad()  # the mask generator's gradients are summed between its steps
        return main, mask

    def learning_rates(self, epochs: int) -> list:
        """(main, mask generator) learning rate of each epoch under ``schedule``."""
        cfg = self.config
        if cfg["schedule"] == "simple":
            return [(cfg["lr"], cfg["mask_lr"])] * epochs
        warm = (cfg["lr"] / OFFICIAL_WARMUP_DIVISOR, cfg["mask_lr"] / OFFICIAL_WARMUP_DIVISOR)
        return [warm] + [(cfg["lr"] * 0.5 ** (e - 1),) * 2 for e in range(1, epochs)]

    def _set_rates(self, main, mask, epoch: int) -> None:
        """The learning rates of 0-based ``epoch`` under the ``schedule`` switch."""
        main.lr, mask.lr = self.learning_rates(epoch + 1)[epoch]

    def _train_epoch(self, windows, main, mask, mask_every, rng) -> np.ndarray:
        """One pass over the shuffled windows; the mean (time, freq, dc) losses."""
        order = rng.permutation(len(windows))
        steps = []  # each step's losses, still on the device: read once per epoch
        for i, batch in enumerate(self.batches(windows[order])):
            main.zero_grad()
            if (i + 1) % mask_every == 0:  # before this batch's backward, as the official code
                mask.step()
                mask.zero_grad()
            steps.append(self._train_step(batch, rng, main))
        return np.mean([[float(v) for v in s] for s in steps], axis=0)

    def _epoch_row(self, epoch, losses, val_w, seconds) -> dict:
        cfg = self.config
        t_loss, f_loss, d_loss = losses
        val = self._validate(val_w) if val_w is not None else t_loss
        total = t_loss + cfg["auxi_lambda"] * f_loss + cfg["dc_lambda"] * d_loss
        if not np.isfinite(total) or not np.isfinite(val):
            raise RuntimeError(f"CATCH.fit: the loss is not finite in epoch {epoch + 1}; "
                               "lower lr")
        return {"epoch": epoch + 1, "loss": float(total), "time": float(t_loss),
                "freq": float(f_loss), "dc": float(d_loss), "val": float(val),
                "seconds": seconds}

    def _train_grads(self, batch, noise):
        """Forward and backward of windows (B, N, T) with the sampler's ``noise``: the
        gradients of the total loss are added to the parameters. Returns x, xhat, the
        frequency errors."""
        x, xhat = self.forward(batch, noise)
        return x, xhat, self.backward(x, xhat)

    def _train_step(self, batch, rng, main) -> tuple:
        """Gradients and the main update, enqueued without waiting; returns the step's
        (time, freq, dc) losses as DeviceLoss values, read when converted to float."""
        x, xhat, err = self._train_grads(batch, self.mask_noise(rng, len(batch)))
        main.step()
        return self._time_loss(xhat, x), DeviceLoss(err, x.size), self.net.dc_loss()

    def _time_loss(self, xhat, x) -> DeviceLoss:
        """The time MSE of windows (B, N, T), one row per window."""
        rt = self.runtime
        return self._mse.value(rt.reshape(xhat, len(xhat), -1), rt.reshape(x, len(x), -1))

    def _validate(self, windows) -> float:
        rng, total = self._eval_rng(), 0.0
        for batch in self.batches(windows):
            x, xhat = self.forward(batch, self.mask_noise(rng, len(batch)))
            total += float(self._time_loss(xhat, x)) * x.size
        return total / windows.size

    # ------------------------------------------------------------------ scoring
    def _starts(self, length):
        t = self.window
        starts = list(range(0, length - t + 1, t))
        if starts[-1] + t < length:
            starts.append(length - t)  # the tail: one window aligned to the end
        return starts

    def score(self, series) -> np.ndarray:
        """One anomaly score per time step of ``series`` (time, channels): time MSE over
        channels + score_lambda x the sub-window frequency error (CATCH's score)."""
        check_series(series, self.n_channels, self.window)  # its errors first
        if not self.history:
            raise RuntimeError("CATCH.score: call fit first (or load a fitted detector): an "
                               "untrained network's scores mean nothing")
        return self._score(series)

    def _score(self, series) -> np.ndarray:
        """:meth:`score` without the check that the detector was fitted."""
        cfg, t, length = self.config, self.window, len(series)
        windows, starts, rng = self.windows(series), self._starts(length), self._eval_rng()
        parts = []
        for batch in self.batches(windows):
            xd, xhat = self.forward(batch, self.mask_noise(rng, len(batch)))
            s = step_scores(self.runtime, xd, xhat, cfg["inference_patch_size"],
                            cfg["score_lambda"])
            parts.append(s.get())
        per_window = np.concatenate(parts).astype(np.float64)
        out, covered = np.empty(length), 0
        for s, w in zip(starts, per_window):  # the end-aligned window fills the rest only
            out[covered:s + t] = w[covered - s:]
            covered = s + t
        return out

    def channel_masks(self, series) -> np.ndarray:
        """The mean mask (patches, channels, channels) the generator draws on ``series``'s
        non-overlapping windows, with the eval_mask rule: which channels each channel
        attends to, per frequency band."""
        windows, rng = self.windows(series), self._eval_rng()
        total = np.zeros((self.net.patches, self.n_channels, self.n_channels))
        for batch in self.batches(windows):
            self.forward(batch, self.mask_noise(rng, len(batch)))
            m = self.net.mask.get().reshape(len(batch), self.net.patches, *total.shape[1:])
            total += m.sum(0)
        return total / len(windows)

    def threshold(self, *series, anomaly_ratio: float = 1.0) -> float:
        """The (100 - anomaly_ratio) percentile of the training scores and of the scores of
        any ``series`` given (the official code pools train and test scores); kept for
        ``predict``."""
        if self.train_scores is None:
            raise RuntimeError("CATCH.threshold: call fit first")
        if not 0 < anomaly_ratio < 100:
            raise ValueError(f"anomaly_ratio is a percentage in (0, 100), got {anomaly_ratio}")
        pool = np.concatenate([self.train_scores] + [self.score(s) for s in series])
        self.threshold_value = float(np.percentile(pool, 100 - anomaly_ratio))
        return self.threshold_value

    def predict(self, series) -> np.ndarray:
        """1 where the score exceeds the threshold, else 0, per time step."""
        if self.threshold_value is None:
            raise RuntimeError("CATCH.predict: call threshold first")
        return (self.score(series) > self.threshold_value).astype(np.int64)

    # ------------------------------------------------------------------ checkpoints
    def save(self, path) -> None:
        """Write the detector (weights, scaler, threshold, history) to ``path`` atomically
        (``nnlib.save_checkpoint``; no pickle)."""
        save_checkpoint(path, self)

    @classmethod
    def load(cls, path, runtime=None) -> "CATCH":
        """The detector saved at ``path``, checked completely before it is built."""
        return load_model(path, cls, runtime)

    def _checkpoint(self) -> tuple:
        arrays = {k: p.numpy() for k, p in self.net.named_parameters().items()}
        arrays.update(scale_mean=np.asarray(self.scale_mean, np.float64),
                      scale_std=np.asarray(self.scale_std, np.float64))
        if self.train_scores is not None:
            arrays["train_scores"] = np.asarray(self.train_scores, np.float64)
        arch = {"n_channels": self.n_channels, "seed": self.seed, "config": self.config}
        state = {"threshold": self.threshold_value, "history": self.history,
                 "train_scores": None if self.train_scores is None else len(self.train_scores)}
        return {"arch": arch, "state": state}, arrays

    def _checkpoint_parameters(self) -> list:
        return list(self.net.named_parameters().values())

    @staticmethod
    def _checkpoint_declared(spec) -> dict:
        arch = check_dict(spec.get("arch"), "model arch", ("n_channels", "seed", "config"))
        state = check_dict(spec.get("state"), "model state",
                           ("threshold", "history", "train_scores"))
        n = check_int(arch.get("n_channels"), "n_channels")
        check_int(arch.get("seed"), "seed", 0)
        cfg = {**DEFAULTS, **check_dict(arch.get("config"), "config", DEFAULTS)}
        for key, default in DEFAULTS.items():
            value = cfg[key]
            if isinstance(default, str):
                ok = isinstance(value, str)
            elif isinstance(default, int):
                ok = check_int(value, key) is not None
            else:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and np.isfinite(value)
            if not ok:
                raise CheckpointError(f"config {key}: {value!r} is not like {default!r}")
        try:
            check_options(cfg)
        except ValueError as err:
            raise CheckpointError(f"config: {err}") from None
        if not cfg["patch_size"] <= cfg["window"]:
            raise CheckpointError("config: patch_size exceeds the window")
        threshold = state.get("threshold")
        if threshold is not None and not (isinstance(threshold, (int, float))
                                          and not isinstance(threshold, bool)
                                          and np.isfinite(threshold)):
            raise CheckpointError(f"threshold: a finite number or null, got {threshold!r}")
        if not isinstance(state.get("history"), list) or not all(
                isinstance(row, dict) for row in state["history"]):
            raise CheckpointError("history: a list of objects")
        shapes = CATCHNet.parameter_shapes(net_arguments(n, arch["seed"], cfg))
        declared = {k: (shape, np.float32) for k, shape in shapes.items()}
        declared.update(scale_mean=((n,), np.float64), scale_std=((n,), np.float64, "positive"))
        if state.get("train_scores") is not None:
            length = check_int(state["train_scores"], "train_scores length", cfg["window"])
            declared["train_scores"] = ((length,), np.float64)
        return declared

    @classmethod
    def _checkpoint_build(cls, spec, runtime) -> "CATCH":
        arch = spec["arch"]
        return cls(arch["n_channels"], seed=arch["seed"], runtime=runtime, **arch["config"])

    def _checkpoint_restore(self, spec, values: dict) -> None:
        for k, p in self.net.named_parameters().items():
            p.set(values[k])
        self.scale_mean, self.scale_std = values["scale_mean"], values["scale_std"]
        self.train_scores = values.get("train_scores")
        self.threshold_value = spec["state"]["threshold"]
        self.history = list(spec["state"]["history"])

