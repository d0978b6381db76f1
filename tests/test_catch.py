"""CATCH: its kernels (kernels/catch.cl) against numpy and finite differences, the whole
graph's forward pass against nnlib.reference.catch_forward and its gradients against
PyTorch autograd, scoring on hand-made cases, training, checkpoints and bad input."""

import numpy as np
import pytest

from nnlib import reference as ref
from nnlib.catch import CATCH, TINY, ops

from .gradcheck import numeric_grad

# overlapping patches, two layers of two heads, odd widths
DEEPER = {**TINY, "window": 32, "patch_stride": 4, "e_layers": 2, "n_heads": 2, "cf_dim": 6,
          "head_dim": 3, "d_ff": 5, "d_model": 3}


def big(rt):
    return rt.max_work_group_size + 3  # rows beyond one work-group


def test_revin_and_denorm_match_reference(rt, rng):
    for shape in ((1, 1, 7), (3, big(rt), 5)):
        x = rng.standard_normal(shape) * 3 + 2
        out, mean, std = ops.revin_norm(rt, rt.to_device(x))
        w_out, w_mean, w_std = ref.revin_norm(x)
        np.testing.assert_allclose(out.get(), w_out, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(std.get(), w_std[..., 0], rtol=1e-5)
        back = ops.revin_denorm(rt, out, mean, std).get()
        np.testing.assert_allclose(back, x, rtol=1e-4, atol=1e-4)
        grad = ops.revin_denorm(rt, out, mean, std, shift=False).get()
        np.testing.assert_allclose(grad, w_out * w_std, rtol=1e-4, atol=1e-4)


def test_patches_swap_and_join_match_numpy(rt, rng):
    for shape in ((2, 3, 21), (1, big(rt), 9)):
        spec = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        got = ops.freq_patches(rt, rt.to_device(spec, dtype=np.complex64), 5, 3).get()
        np.testing.assert_allclose(got, ref.freq_patches(spec, 5, 3), rtol=1e-6)
    for shape in ((1, 1, 1, 1), (2, 3, 5, 7), (1, big(rt), 2, 1)):
        x = rng.standard_normal(shape)
        np.testing.assert_array_equal(ops.swap_axes12(rt, rt.to_device(x)).get(),
                                      x.swapaxes(1, 2).astype(np.float32))
    a, b = rng.standard_normal((big(rt), 3)), rng.standard_normal((big(rt), 4))
    joined = ops.join_rows(rt, rt.to_device(a), rt.to_device(b))
    np.testing.assert_allclose(joined.get(), np.concatenate([a, b], 1), rtol=1e-6)
    for rows, t in ((1, 1), (3, 7), (2, big(rt))):
        re, im = rng.standard_normal((rows, t)), rng.standard_normal((rows, t))
        z = ops.join_complex(rt, rt.to_device(re), rt.to_device(im)).get()
        np.testing.assert_array_equal(z, (re + 1j * im).astype(np.complex64))


@pytest.mark.parametrize("gumbel", ["code", "bernoulli"])
def test_mask_generator_matches_reference_and_finite_differences(rt, rng, gumbel):
    n, width = 4, 6
    sharpen = 2.0 if gumbel == "code" else 1.0
    for groups in (1, big(rt) // 4):
        z = rng.standard_normal((groups, n, width))
        w = rng.standard_normal((n, width)) * 0.5
        noise = rng.logistic(size=(groups, n, n))
        mg = ops.MaskGenerator(n, width, gumbel, runtime=rt)
        mg.weight.set(w)
        mask = mg.forward(rt.to_device(z), rt.to_device(noise)).get()
        w_mask, w_prob, slope = ref.mask_sample(z, w, noise, sharpen)
        assert (mask == w_mask).mean() > 0.999  # a draw may flip where u is ~1e-7
        assert (np.diagonal(mask, axis1=1, axis2=2) == 1).all()
        np.testing.assert_allclose(mg.prob.get(), w_prob, rtol=1e-5, atol=1e-6)
        dmask = rng.standard_normal(mask.shape)
        mg.backward(rt.to_device(dmask))
        np.testing.assert_allclose(mg.weight.grad.get(), ref.mask_weight_grad(z, slope, dmask),
                                   rtol=1e-3, atol=1e-3)
    # straight-through: the gradient of the soft sample sigmoid(sharpen a + noise)
    eye = np.eye(n, dtype=bool)

    def soft_loss():
        soft = 1 / (1 + np.exp(-(sharpen * z @ w.T + noise)))
        return float((np.where(eye, 0, soft) * dmask).sum())

    np.testing.assert_allclose(ref.mask_weight_grad(z, slope, dmask),
                               numeric_grad(soft_loss, w, 1e-6), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("slices", [3, 9])
def test_mask_weight_gradient_summed_in_slices_of_the_pairs(rt, rng, monkeypatch, slices):
    """The weight's gradient over slices of the (group, channel) pairs (forced: 3 of unequal
    length; 9, more than 1 group of 5 channels has, so some slices are empty), widths a
    multiple of four and not, and added to what the gradient holds (two passes)."""
    monkeypatch.setattr(ops.MaskGenerator, "pair_slices", staticmethod(lambda *_: slices))
    for groups, n, width in ((1, 5, 8), (7, 3, 6), (big(rt) // 2, 2, 13)):
        z = rng.standard_normal((groups, n, width))
        mg = ops.MaskGenerator(n, width, runtime=rt)
        mg.weight.set(rng.standard_normal((n, width)) * 0.5)
        noise = rng.logistic(size=(groups, n, n))
        mg.forward(rt.to_device(z), rt.to_device(noise))
        slope = ref.mask_sample(z, mg.weight.numpy().astype(np.float64), noise, 2.0)[2]
        dmask = rng.standard_normal((groups, n, n))
        want = ref.mask_weight_grad(z, slope, dmask)
        for passes in (1, 2):
            mg.backward(rt.to_device(dmask))
            np.testing.assert_allclose(mg.weight.grad.get(), passes * want, rtol=1e-3,
                                       atol=1e-3)


def test_mask_generator_zero_noise_thresholds_at_one_half(rt, rng):
    z = rng.standard_normal((5, 3, 4))
    mg = ops.MaskGenerator(3, 4, runtime=rt)
    mg.weight.set(rng.standard_normal((3, 4)))
    mask = mg.forward(rt.to_device(z), rt.zeros((5, 3, 3))).get()
    want = np.where(np.eye(3, dtype=bool), 1.0, mg.prob.get() >= 0.5)
    np.testing.assert_array_equal(mask, want)


@pytest.mark.parametrize("slices", [3, 9])
def test_layer_norm_parameter_gradients_summed_in_slices_of_the_rows(rt, rng, monkeypatch,
                                                                      slices):
    """The parameters' gradients over slices of the rows (forced: 3 of unequal length; 9,
    more than rows 1 and 5 have, so some slices are empty), features a multiple of four and
    not, and added to what the gradients hold (two passes)."""
    monkeypatch.setattr(ops.LayerNorm, "row_slices", staticmethod(lambda *_: slices))
    for rows, c in ((1, 3), (5, 8), (big(rt), 13)):
        x, dy = rng.standard_normal((rows, c)), rng.standard_normal((rows, c))
        gamma = rng.standard_normal(c)
        ln = ops.LayerNorm(c, runtime=rt)
        ln.gamma.set(gamma)
        ln.forward(rt.to_device(x))
        w_dx, dg, db = ref.layer_norm_backward(dy, gamma, *ref.layer_norm_forward(x, gamma,
                                                                                 0 * gamma)[1:])
        for passes in (1, 2):
            np.testing.assert_allclose(ln.backward(rt.to_device(dy)).get(), w_dx, rtol=1e-3,
                                       atol=1e-3)
            np.testing.assert_allclose(ln.gamma.grad.get(), passes * dg, rtol=1e-3, atol=1e-3)
            np.testing.assert_allclose(ln.beta.grad.get(), passes * db, rtol=1e-3, atol=1e-3)


def test_layer_norm_splits_its_rows_only_where_work_groups_are_few():
    """CATCH's layer norms (1920 rows, 32 features) on a GPU of 132 multiprocessors: one
    work-group of the parameters' sums becomes 30 slices of 64 rows; on a 2-core CPU, 2."""
    assert ops.LayerNorm.row_slices(132, 1, 1920) == 30
    assert ops.LayerNorm.row_slices(2, 1, 1920) == 4
    assert ops.LayerNorm.row_slices(2, 4, 1920) == 1
    assert ops.LayerNorm.row_slices(132, 1, 100) == 1


def test_layer_norm_and_gelu_match_reference_and_finite_differences(rt, rng):
    for rows, c in ((1, 1), (big(rt), 7), (3, 8), (5, 13)):
        x = rng.standard_normal((rows, c))
        ln = ops.LayerNorm(c, runtime=rt)
        gamma, beta = rng.standard_normal(c), rng.standard_normal(c)
        ln.gamma.set(gamma)
        ln.beta.set(beta)
        y = ln.forward(rt.to_device(x)).get()
        w_y, xhat, rstd = ref.layer_norm_forward(x, gamma, beta)
        np.testing.assert_allclose(y, w_y, rtol=1e-4, atol=1e-4)
        dy = rng.standard_normal(x.shape)
        dx = ln.backward(rt.to_device(dy)).get()
        w_dx, dg, db = ref.layer_norm_backward(dy, gamma, xhat, rstd)
        np.testing.assert_allclose(dx, w_dx, rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(ln.gamma.grad.get(), dg, rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(ln.beta.grad.get(), db, rtol=1e-3, atol=1e-3)
        base = rng.standard_normal(x.shape)  # into: dx added to a residual branch's sum
        into = rt.to_device(base)
        assert ln.backward(rt.to_device(dy), into=into) is into
        np.testing.assert_allclose(into.get(), base + w_dx, rtol=1e-3, atol=1e-3)
        with pytest.raises(ValueError, match="into"):
            ln.backward(into, into=into)
        r = rng.standard_normal(x.shape)  # forward_sum: the residual sum and its norm
        total, y = ln.forward_sum(rt.to_device(x), rt.to_device(r))
        np.testing.assert_allclose(total.get(), x + r, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(y.get(), ref.layer_norm_forward(x + r, gamma, beta)[0],
                                   rtol=1e-4, atol=1e-4)
        g = ops.GELU(rt)
        np.testing.assert_allclose(g.forward(rt.to_device(x)).get(), ref.gelu(x), atol=1e-6)
        np.testing.assert_allclose(g.backward(rt.to_device(dy)).get(), dy * ref.gelu_grad(x),
                                   rtol=1e-5, atol=1e-6)
    x = rng.standard_normal((3, 5))
    gamma, beta, dy = rng.standard_normal(5), rng.standard_normal(5), rng.standard_normal((3, 5))
    dx, dg, _ = ref.layer_norm_backward(dy, gamma, *ref.layer_norm_forward(x, gamma, beta)[1:])
    np.testing.assert_allclose(dx, numeric_grad(
        lambda: float((ref.layer_norm_forward(x, gamma, beta)[0] * dy).sum()), x, 1e-6),
        atol=1e-6)
    np.testing.assert_allclose(dg, numeric_grad(
        lambda: float((ref.layer_norm_forward(x, gamma, beta)[0] * dy).sum()), gamma, 1e-6),
        atol=1e-6)
    np.testing.assert_allclose(ref.gelu_grad(x), numeric_grad(
        lambda: float(ref.gelu(x).sum()), x, 1e-6).reshape(x.shape), atol=1e-6)


def test_freq_mae_matches_reference_and_finite_differences(rt, rng):
    for rows, t in ((1, 1), (big(rt), 5)):
        z = rng.standard_normal((rows, t)) + 1j * rng.standard_normal((rows, t))
        y = rng.standard_normal((rows, t)) + 1j * rng.standard_normal((rows, t))
        y[0, :] = z[0, :]  # |z - y| = 0: gradient 0, not NaN
        grad = rng.standard_normal((rows, t)) + 1j * rng.standard_normal((rows, t))
        err, dre, dim = (a.get() for a in ops.freq_mae(
            rt, *(rt.to_device(a, dtype=np.complex64) for a in (z, y, grad)), 0.5))
        w_err, w_grad = ref.freq_mae(z, y)
        np.testing.assert_allclose(err, w_err, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(dre + 1j * dim, grad + 0.5 * w_grad, rtol=1e-4, atol=1e-5)
    t = 5
    small = rng.standard_normal((2, 2 * t))
    yc = rng.standard_normal((2, t)) + 1j * rng.standard_normal((2, t))

    def loss():
        d = small[:, :t] + 1j * small[:, t:] - yc
        return float(np.abs(d).sum())

    g = ref.freq_mae(small[:, :t] + 1j * small[:, t:], yc)[1]
    np.testing.assert_allclose(np.concatenate([g.real, g.imag], 1),
                               numeric_grad(loss, small, 1e-6), atol=1e-6)


def test_step_scores_on_hand_made_cases(rt, rng):
    t, p = 12, 4
    x = rng.standard_normal((2, 3, t))
    same = ops.step_scores(rt, rt.to_device(x), rt.to_device(x), p, 0.5).get()
    np.testing.assert_array_equal(same, 0.0)  # perfect reconstruction scores 0
    xhat = x.copy()
    xhat[0, 1, 5] += 3.0  # one error of 3 in one of 3 channels at step 5
    got = ops.step_scores(rt, rt.to_device(x), rt.to_device(xhat), p, 0.0).get()
    want = np.zeros((2, t))
    want[0, 5] = 9.0 / 3
    np.testing.assert_allclose(got, want, atol=1e-5)
    # with the frequency term: |FFT| of a length-4 window holding one 3 is 3 at every
    # frequency, so the sub-windows j = 2..5 (those holding step 5) have error 3; step i
    # averages the sub-windows max(0, i - 3) .. min(i, 8) that hold it, over 3 channels
    got = ops.step_scores(rt, rt.to_device(x), rt.to_device(xhat), p, 1.0).get()
    e = np.where((np.arange(9) >= 2) & (np.arange(9) <= 5), 3.0, 0.0)
    for i in range(t):
        want[0, i] += e[max(0, i - 3):min(i, 8) + 1].mean() / 3
    np.testing.assert_allclose(got, want, atol=1e-5)
    xhat = x + rng.standard_normal(x.shape)
    for batch, tt in ((1, 9), (big(rt) // 8, 33)):
        xs, xh = rng.standard_normal((batch, 2, tt)), rng.standard_normal((batch, 2, tt))
        np.testing.assert_allclose(ops.step_scores(rt, rt.to_device(xs), rt.to_device(xh), 5,
                                                   0.3).get(),
                                   ref.step_scores(xs, xh, 5, 0.3), rtol=1e-4, atol=1e-4)


def tiny_model(n, rng, **kw):
    model = CATCH(n, seed=1, **{**DEEPER, **kw})
    named = model.net.named_parameters()
    named["mask_generator.weight"].set(rng.standard_normal((n, 16)) * 0.3)
    return model, named


@pytest.mark.parametrize("projection", ["linear", "complex"])
@pytest.mark.parametrize("n", [1, 3])
def test_forward_matches_numpy_reference(rng, projection, n):
    model, named = tiny_model(n, rng, projection=projection)
    params = {k: p.numpy().astype(np.float64) for k, p in named.items()}
    x = rng.standard_normal((2, 32, n)) * 2 + 1
    noise = rng.logistic(size=(2 * model.net.patches, n, n))
    rt = model.runtime
    xhat = model.net.forward(rt.to_device(x.transpose(0, 2, 1)), rt.to_device(noise)).get()
    want, _, mask, _, dc = ref.catch_forward(x, params, model.config, noise)
    np.testing.assert_allclose(xhat, want.transpose(0, 2, 1), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(model.net.mask.get(), mask)
    assert abs(float(model.net.dc_loss()) - dc) < 1e-5


@pytest.mark.torch
@pytest.mark.parametrize("projection,fill", [("linear", "finite"), ("complex", "inf"),
                                             ("linear", "inf")])
@pytest.mark.parametrize("n", [1, 3])
def test_loss_gradients_match_pytorch(rng, projection, fill, n):
    pytest.importorskip("torch")
    from .catch_torch import catch_loss, torch_params

    model, named = tiny_model(n, rng, projection=projection, mask_fill=fill, dc_lambda=0.3,
                              auxi_lambda=0.2)
    x = rng.standard_normal((2, 32, n)) * 2 + 1
    noise = rng.logistic(size=(2 * model.net.patches, n, n))
    for p in named.values():
        p.zero_grad()
    model.backward(*model.forward(x.transpose(0, 2, 1).astype(np.float32), noise))
    tp = torch_params(named)
    catch_loss(x, tp, model.config, noise).backward()
    for k, p in named.items():
        want = tp[k].grad.numpy()
        np.testing.assert_allclose(p.grad.get(), want, rtol=1e-3,
                                   atol=1e-4 * (np.abs(want).max() + 1e-3), err_msg=k)
    if n > 1:
        assert np.abs(named["mask_generator.weight"].grad.get()).max() > 0


@pytest.mark.parametrize("n", [1, 2])
def test_fit_score_threshold_predict_and_checkpoint(rng, tmp_path, n):
    t = np.arange(600)
    train = np.stack([np.sin(t / (5 + c)) for c in range(n)], 1)
    test = train[:250].copy()
    test[120, 0] += 6.0
    model = CATCH(n, seed=0, **DEEPER)
    held = [(p.value, p.grad) for p in model.net.parameters()]
    history = model.fit(train, epochs=2, progress=False)
    # training replaced no parameter's arrays; each of the two groups is one flat layout
    assert all(p.value is v and p.grad is g for p, (v, g) in zip(model.net.parameters(), held))
    assert all(opt.fused for opt in model._optimizers())
    assert len(history) == 2 and history[-1]["time"] < history[0]["time"]
    scores = model.score(test)
    assert scores.shape == (250,) and np.isfinite(scores).all()  # 250 = 7 windows + a tail
    assert scores.argmax() in range(116, 125)
    np.testing.assert_array_equal(scores, model.score(test))  # the sampled mask repeats
    thr = model.threshold(test, anomaly_ratio=1.0)
    assert thr == np.percentile(np.r_[model.train_scores, scores], 99)
    assert model.predict(test)[120] == 1
    model.save(tmp_path / "catch.npz")
    back = CATCH.load(tmp_path / "catch.npz")
    np.testing.assert_allclose(back.score(test), scores, rtol=1e-6)
    assert back.threshold_value == thr and back.history == model.history


def test_threshold_eval_mask_is_deterministic_and_tail_is_scored(rng):
    model = CATCH(2, seed=0, eval_mask="threshold", **DEEPER)
    x = rng.standard_normal((70, 2))
    model.scale_mean, model.scale_std = x.mean(0), x.std(0)
    s = model._score(x)  # scoring as such: the untrained network's scores
    assert s.shape == (70,) and np.isfinite(s).all()
    np.testing.assert_allclose(s[64:], model._score(x[-32:])[-6:], rtol=1e-5)  # tail window


def test_bad_input_gets_clear_errors(rng):
    model = CATCH(2, **DEEPER)
    with pytest.raises(ValueError, match="shorter than the window"):
        model.score(rng.standard_normal((20, 2)))
    bad = rng.standard_normal((100, 2))
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit(bad, epochs=1)
    with pytest.raises(ValueError, match="expected shape"):
        model.score(rng.standard_normal((100, 3)))
    with pytest.raises(ValueError, match="training part"):
        model.fit(rng.standard_normal((35, 2)), epochs=1)
    with pytest.raises(TypeError, match="unknown options"):
        CATCH(2, windw=10)
    with pytest.raises(ValueError, match="mask_fill"):
        CATCH(2, mask_fill="zero")
    with pytest.raises(ValueError, match="n_channels"):
        CATCH(0)
    with pytest.raises(RuntimeError, match="fit first"):
        model.threshold()
    with pytest.raises(RuntimeError, match="threshold first"):
        model.predict(rng.standard_normal((40, 2)))


def test_official_schedule_rates_match_the_official_code():
    """Epoch 1 at lr / 25 and mask_lr / 25 with Adam beta1 0.95 (what PyTorch's OneCycleLR
    constructor sets; the official code never steps it), then lr * 0.5^(e - 2) for both."""
    model = CATCH(2, schedule="official", lr=1e-3, mask_lr=1e-4, **DEEPER)
    main, mask = model._optimizers()
    rates = []
    for epoch in range(3):
        model._set_rates(main, mask, epoch)
        rates.append((main.lr, mask.lr))
    np.testing.assert_allclose(rates, [(4e-5, 4e-6), (1e-3, 1e-3), (5e-4, 5e-4)])
    np.testing.assert_allclose(model.learning_rates(3), rates)
    assert main.beta1 == mask.beta1 == 0.95
    simple = CATCH(2, **DEEPER)
    main, mask = simple._optimizers()
    simple._set_rates(main, mask, 2)
    assert (main.lr, mask.lr, main.beta1) == (simple.config["lr"], simple.config["mask_lr"], 0.9)
    with pytest.raises(ValueError, match="schedule"):
        CATCH(2, schedule="cosine")


@pytest.mark.torch
def test_official_schedule_first_epoch_matches_pytorch_one_cycle():
    torch = pytest.importorskip("torch")
    param = torch.nn.Parameter(torch.zeros(1))
    for lr in (1e-4, 3e-3):
        opt = torch.optim.Adam([param], lr=lr)
        torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, steps_per_epoch=10, epochs=3,
                                            pct_start=0.3)
        model = CATCH(2, schedule="official", lr=lr, mask_lr=lr / 10, **DEEPER)
        main, mask = model._optimizers()
        model._set_rates(main, mask, 0)
        group = opt.param_groups[0]
        assert np.isclose(main.lr, group["lr"]) and main.beta1 == group["betas"][0]


def test_catch_layers_share_the_layer_contract(rt, rng):
    from nnlib.catch.attention import ChannelDCLoss, MaskedAttention
    from nnlib.layers.base import Layer

    model = CATCH(2, runtime=rt, **DEEPER)
    net = model.net
    cases = [(ops.LayerNorm(4, rt), 1), (ops.GELU(rt), 1),
             (ops.MaskGenerator(3, 4, runtime=rt), 1),
             (MaskedAttention(2, runtime=rt), 2), (ChannelDCLoss(2, runtime=rt), 3), (net, 3),
             (net.blocks[0], 4), (net.head_real, 1)]
    for layer, n_args in cases:
        assert isinstance(layer, Layer) and layer.runtime is rt
        with pytest.raises(RuntimeError, match=f"{type(layer).__name__}.backward called "
                                               "before forward"):
            layer.backward(*[None] * n_args)
    assert len(model.net.parameters()) == len(model.net.named_parameters())
    norm = cases[0][0]
    norm.forward(rng.standard_normal((3, 4)))
    norm.release()
    with pytest.raises(RuntimeError, match="before forward"):
        norm.backward(rng.standard_normal((3, 4)))
    mask = ops.MaskGenerator(3, 4, runtime=rt).forward(rng.standard_normal((2, 3, 4)))
    assert mask.shape == (2, 3, 3)  # no noise: the mask thresholded at 0.5
