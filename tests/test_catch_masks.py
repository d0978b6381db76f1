"""CATCH's channel masks: why the official generator cannot learn a channel grouping of
sign-symmetric data, the planted-groups data, the amplitude-input deviation and the
patch_amplitude kernel."""

import numpy as np
import pytest

from nnlib import reference as ref
from nnlib.catch import CATCH, masks, ops
from nnlib.catch.masks import generator_gradients, group_separation, mask_probabilities
from nnlib.data import planted_groups

SMALL = dict(window=48, patch_size=8, patch_stride=8, cf_dim=16, e_layers=1, n_heads=2,
             head_dim=8, d_ff=16, d_model=8, batch_size=32, inference_patch_size=8)


def test_patch_amplitude_matches_reference(rt, rng):
    for shape in ((1, 1, 2), (3, 4, 10), (rt.max_work_group_size + 3, 1, 6)):
        z = rng.standard_normal(shape)
        got = ops.patch_amplitude(rt, rt.to_device(z)).get()
        np.testing.assert_allclose(got, ref.patch_amplitude(z), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="2p"):
        ops.patch_amplitude(rt, rt.to_device(np.ones((2, 3))))


def test_planted_groups_are_seeded_grouped_and_labelled():
    a, b = planted_groups(600, 400, seed=3), planted_groups(600, 400, seed=3)
    np.testing.assert_array_equal(a["test"], b["test"])
    assert a["train"].shape == (600, 6) and list(a["groups"]) == [0, 0, 0, 1, 1, 1]
    c = np.corrcoef(a["train"].T)
    same = a["groups"][:, None] == a["groups"][None, :]
    assert c[same].min() > 0.8 and np.abs(c[~same]).max() < 0.3
    assert 0.01 < a["labels"].mean() < 0.1
    clean = planted_groups(600, 400, ratio=0.0, seed=3)["test"]
    changed = np.abs(a["test"] - clean).max(1) > 1e-9
    assert not changed[a["labels"] == 0].any() and changed[a["labels"] == 1].mean() > 0.9
    with pytest.raises(ValueError, match="group_sizes"):
        planted_groups(group_sizes=(3,))


def test_official_generator_cannot_separate_groups_of_sign_symmetric_data(rng):
    """The generator is linear in the [Re | Im] patch and RevIN and the FFT are odd in x, so
    prob(-x) = 1 - prob(x) for every weight: over data where x and -x are equally likely
    (any periodic series over all its phases) every pair's mean probability is 1/2."""
    data = planted_groups(600, 300, seed=0)
    model = CATCH(6, seed=0, **SMALL)
    model.net.mask_generator.weight.set(rng.standard_normal((6, 16)))
    model.scale_mean, model.scale_std = np.zeros(6), np.ones(6)
    p, q = (mask_probabilities(model, s, stride=5) for s in (data["test"], -data["test"]))
    np.testing.assert_allclose(p + q, 1.0, atol=1e-5)
    assert np.abs(p - 0.5).mean() > 0.1  # the weights do move each window's probabilities
    both = group_separation(np.concatenate([p, q]), data["groups"])
    np.testing.assert_allclose(both, 0.0, atol=1e-6)
    amplitude = CATCH(6, seed=0, mask_input="amplitude", **SMALL)
    amplitude.net.mask_generator.weight.set(rng.standard_normal((6, 8)))
    amplitude.scale_mean, amplitude.scale_std = model.scale_mean, model.scale_std
    p, q = (mask_probabilities(amplitude, s, stride=5) for s in (data["test"], -data["test"]))
    np.testing.assert_allclose(p, q, atol=1e-5)  # phase-free input: no forced symmetry


TRAINABLE = {**masks.TRAINABLE, "mask_lr": 1e-2}
MARGIN = 0.3  # the best band's within - across mean probability, of at most 1


@pytest.mark.parametrize("seed", [0, 1])
def test_masks_learn_planted_groups_only_with_both_deviations(seed):
    """CATCH's own design (and either change alone) leaves the within-group and the
    across-group pairs at the same mean probability; with the phase-free generator input
    and the dc loss on the input patches' cosines the masks separate the groups."""
    rows = masks.separation_grid(rates=(1e-2,), seeds=(seed,))
    best = {r["design"]: r["separation"] for r in rows}
    assert best.pop("both") > MARGIN, best
    assert max(best.values()) < 0.05, best


def test_dc_on_patches_matches_the_reference_loss(rt, rng):
    """The patches deviation's dc loss is channel_dc_rows with q = k = the patch."""
    model = CATCH(3, seed=0, runtime=rt, dc_source="patches", **TRAINABLE)
    x = rng.standard_normal((2, 3, 48))
    model.net.forward(rt.to_device(x), rt.to_device(rng.logistic(size=(12, 3, 3))))
    z = ref.freq_patches(np.fft.fft(ref.revin_norm(x)[0], axis=-1), 8, 8).reshape(12, 3, 16)
    qkv = np.concatenate([z, z, np.zeros_like(z)], -1)
    want = ref.channel_dc_rows(qkv, model.net.mask.get(), 1, 0.07, 0.5).sum() / 12
    assert float(model.net.dc_loss()) == pytest.approx(want, rel=1e-4)


def test_generator_gradients_reports_both_losses():
    data = planted_groups(400, 300, seed=0)
    model = CATCH(6, seed=0, **TRAINABLE)
    model.fit(data["train"], epochs=1, progress=False)
    out = generator_gradients(model, data["test"], data["groups"], stride=11)
    assert set(out) == {"recon", "dc"}
    for part in out.values():
        assert 0 < part["coherence"] <= 1 and np.isfinite([part["within"], part["across"]]).all()
    assert all(float(np.abs(p.grad.get()).max()) == 0 for p in model.net.parameters())
