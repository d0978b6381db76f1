"""Measuring CATCH's channel masks (notebook 07): the generator's probabilities on a series,
how well they separate planted channel groups, and how coherent the generator's gradient
is across windows.

    probs = mask_probabilities(model, series)         # (windows, bands, n, n)
    sep = group_separation(probs, data["groups"])     # per band: within - across

Taught in notebooks/07_catch.
"""

from __future__ import annotations

import numpy as np

from ..data import planted_groups
from .detector import CATCH


def mask_probabilities(model, series, stride: int = 1) -> np.ndarray:
    """The generator's probabilities (windows, bands, n, n) on every ``stride``-th window
    of ``series`` (time, channels): every phase of a periodic series when stride is 1."""
    n = model.n_channels
    windows = model.windows(series, stride)
    probs = []
    for batch in model.batches(windows):
        model.net.forward(model.runtime.to_device(batch))
        probs.append(model.net.mask_generator.prob.get())
    return np.concatenate(probs).reshape(len(windows), model.net.patches, n, n)


def _pairs(groups):
    groups = np.asarray(groups)
    within = (groups[:, None] == groups[None, :]) & ~np.eye(len(groups), dtype=bool)
    return within, groups[:, None] != groups[None, :]


def group_separation(probs, groups) -> np.ndarray:
    """Per band: the mean probability of the off-diagonal within-group pairs minus that of
    the across-group pairs (0: no grouping learned; up to 1)."""
    within, across = _pairs(groups)
    mean = np.asarray(probs).mean(0)  # (bands, n, n)
    return mean[:, within].mean(-1) - mean[:, across].mean(-1)


def generator_gradients(model, series, groups, stride: int = 7, seed: int = 0) -> dict:
    """The mask generator's gradient on ``series`` windows, from the reconstruction loss
    and from the dc loss separately (the model's weights unchanged): the mean dL/dm over
    within- and across-group pairs (negative: the loss wants the pair kept), and the
    coherence |sum over windows of dL/dW| / sum over windows of |dL/dW| (1: every window
    pushes W the same way; about 1/sqrt(windows) for random signs)."""
    net = model.net
    within, across = _pairs(groups)
    windows = model.windows(series, stride)
    rng = np.random.default_rng(seed)
    out = {}
    for part, rec, dc in (("recon", 1.0, 0.0), ("dc", 0.0, 1.0)):
        dm_in, dm_across, total, norms = [], [], 0.0, 0.0
        for batch in model.batches(windows):
            model.backward(*model.forward(batch, model.mask_noise(rng, len(batch))),
                           time=rec, freq=0.0, dc=dc)
            dm = net.mask_grad.get()
            z, slope = (a.get() for a in net.mask_generator.saved())
            per_group = np.einsum("gcd,gck->gdk", dm * slope, z)
            total = total + per_group.sum(0)
            norms += np.linalg.norm(per_group.reshape(len(per_group), -1), axis=1).sum()
            dm_in.append(dm[:, within].mean())
            dm_across.append(dm[:, across].mean())
        out[part] = {"within": float(np.mean(dm_in)), "across": float(np.mean(dm_across)),
                     "coherence": float(np.linalg.norm(total) / norms)}
    for p in net.parameters():
        p.zero_grad()
    return out


# The generator designs compared in notebook 07: CATCH's own and the deviations.
DESIGNS = {"official": {}, "amplitude input": {"mask_input": "amplitude"},
           "dc on patches": {"dc_source": "patches"},
           "both": {"mask_input": "amplitude", "dc_source": "patches"}}
# A model that learns masks in seconds on 2 cores.
TRAINABLE = dict(window=48, patch_size=8, patch_stride=8, cf_dim=8, e_layers=1, n_heads=1,
                 head_dim=4, d_ff=8, d_model=4, batch_size=32, inference_patch_size=8)


def separation_grid(rates=(1e-5, 1e-4, 1e-3, 1e-2), seeds=(0,), designs=DESIGNS,
                    epochs: int = 1, train_length: int = 800, test_length: int = 300,
                    **options) -> list:
    """Train a TRAINABLE CATCH on planted_groups for every design, mask learning rate and seed;
    one row each with the best band's separation and the mean |prob - 1/2|."""
    rows = []
    for seed in seeds:
        data = planted_groups(train_length, test_length, seed=seed)
        for design, extra in designs.items():
            for rate in rates:
                model = CATCH(data["train"].shape[1], seed=seed,
                              **{**TRAINABLE, **options, **extra, "mask_lr": rate})
                model.fit(data["train"], epochs=epochs, progress=False)
                probs = mask_probabilities(model, data["test"])
                rows.append({"design": design, "mask_lr": rate, "seed": seed,
                             "separation": float(group_separation(probs, data["groups"]).max()),
                             "spread": float(np.abs(probs - 0.5).mean())})
    return rows
