"""Channel-masked attention and the clustering loss (kernels/attention.cl): the numpy
reference by finite differences (mask entries at 0 included), the kernels against it."""

import numpy as np
import pytest

from nnlib import reference as ref
from nnlib.catch.attention import ChannelDCLoss, MaskedAttention

from .gradcheck import numeric_grad


def case(rng, groups, n, heads, dh, binary=True):
    qkv = rng.standard_normal((groups, n, 3 * heads * dh))
    if binary:
        mask = (rng.random((groups, n, n)) < 0.5).astype(float)
    else:
        mask = rng.uniform(0.05, 1.0, (groups, n, n))
    mask[:, np.arange(n), np.arange(n)] = 1.0
    return qkv, mask


@pytest.mark.parametrize("hard", [False, True])
def test_reference_attention_gradients_match_finite_differences(rng, hard):
    qkv, mask = case(rng, 2, 4, 2, 3)
    mask[0, 1, 2] = mask[1, 3, 0] = 0.0  # masked pairs must still get a gradient
    r = rng.standard_normal((2, 4, 6))

    def loss():
        return float((r * ref.masked_attention_forward(qkv, mask, 2, hard=hard)[0]).sum())

    dqkv, dmask = ref.masked_attention_backward(qkv, mask, r, 2, hard=hard)
    np.testing.assert_allclose(dqkv, numeric_grad(loss, qkv, 1e-6), atol=1e-6)
    np.testing.assert_allclose(dmask, numeric_grad(loss, mask, 1e-6), atol=1e-6)
    assert abs(dmask[0, 1, 2]) > 1e-6 and abs(dmask[1, 3, 0]) > 1e-6
    # the seed's bugs: attention that ignores q and k, a key gradient of zero
    k_part = dqkv[..., 6:12]
    assert np.abs(k_part).max() > 1e-3


def test_reference_dc_loss_gradients_match_finite_differences(rng):
    for n in (1, 4):
        qkv, mask = case(rng, 3, n, 2, 3)
        dqkv, dmask = ref.channel_dc_backward(qkv, mask, 2, tau=0.3, reg=0.5, weight=0.7)

        def loss():
            return 0.7 * float(ref.channel_dc_rows(qkv, mask, 2, tau=0.3, reg=0.5).sum())

        np.testing.assert_allclose(dqkv, numeric_grad(loss, qkv, 1e-6), atol=1e-6)
        np.testing.assert_allclose(dmask, numeric_grad(loss, mask, 1e-6), atol=1e-6)


def test_dc_loss_limits(rng):
    qkv, mask = case(rng, 2, 5, 1, 4)
    full = ref.channel_dc_rows(qkv, np.ones_like(mask), 1, reg=0.5).sum(-1)
    np.testing.assert_allclose(full, 0.5, atol=1e-12)  # all pairs kept: clustering 0, regular 1
    eye = ref.channel_dc_rows(qkv, np.broadcast_to(np.eye(5), mask.shape), 1, reg=0.5)
    assert (eye > 0).all()


def attention_sizes(rt):
    big = rt.max_work_group_size // 3 + 5  # groups * n * heads above the work-group limit
    return [(1, 1, 1, 1), (1, 5, 3, 7), (big, 3, 2, 5), (3, 17, 2, 4)]


@pytest.mark.parametrize("fill", ["finite", "inf"])
def test_attention_kernels_match_reference(rt, rng, fill):
    hard = fill == "inf"
    for groups, n, heads, dh in attention_sizes(rt):
        for binary in (True, False):
            qkv, mask = case(rng, groups, n, heads, dh, binary)
            dout = rng.standard_normal((groups, n, heads * dh))
            prior = rng.standard_normal(mask.shape)
            att = MaskedAttention(heads, fill, runtime=rt)
            q_dev, m_dev = rt.to_device(qkv), rt.to_device(mask)
            out = att.forward(q_dev, m_dev).get()
            want, probs, _ = ref.masked_attention_forward(qkv, mask, heads, hard=hard)
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(att.probs.get(), probs, rtol=1e-4, atol=1e-6)
            dmask = rt.to_device(prior)
            dqkv = att.backward(rt.to_device(dout), dmask, accumulate=True).get()
            w_dqkv, w_dmask = ref.masked_attention_backward(qkv, mask, dout, heads, hard=hard)
            np.testing.assert_allclose(dqkv, w_dqkv, rtol=1e-3, atol=1e-4)
            np.testing.assert_allclose(dmask.get(), prior + w_dmask, rtol=1e-3, atol=1e-4)
            att.backward(rt.to_device(dout), dmask, accumulate=False)
            np.testing.assert_allclose(dmask.get(), w_dmask, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("scale", [1.0, 100.0])
def test_attention_hard_mask_removes_masked_channels(rt, rng, scale):
    """Masked keys get probability 0, also when their logits are far above the kept ones
    (their exp would overflow: it must never be taken)."""
    qkv, mask = case(rng, 4, 6, 2, 3)
    qkv *= scale
    att = MaskedAttention(2, "inf", runtime=rt)
    att.forward(rt.to_device(qkv), rt.to_device(mask))
    probs = att.probs.get()
    assert (probs[np.broadcast_to(mask[:, None] == 0, probs.shape)] == 0).all()
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    with np.errstate(over="raise", invalid="raise"):
        want = ref.masked_attention_forward(qkv, mask, 2, hard=True)[1]
    np.testing.assert_allclose(probs, want, rtol=1e-4, atol=1e-6)


def test_dc_kernels_match_reference(rt, rng):
    for groups, n, heads, dh in attention_sizes(rt):
        qkv, mask = case(rng, groups, n, heads, dh)
        dc = ChannelDCLoss(heads, tau=0.1, reg=0.5, runtime=rt)
        q_dev, m_dev = rt.to_device(qkv), rt.to_device(mask)
        rows = dc.forward(q_dev, m_dev).get()
        np.testing.assert_allclose(rows, ref.channel_dc_rows(qkv, mask, heads, 0.1, 0.5),
                                   rtol=1e-4, atol=1e-5)
        base_q, base_m = rng.standard_normal(qkv.shape), rng.standard_normal(mask.shape)
        dqkv, dmask = rt.to_device(base_q), rt.to_device(base_m)
        dc.backward(0.3, dqkv, dmask)
        w_dqkv, w_dmask = ref.channel_dc_backward(qkv, mask, heads, 0.1, 0.5, weight=0.3)
        np.testing.assert_allclose(dqkv.get(), base_q + w_dqkv, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(dmask.get(), base_m + w_dmask, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("fill", ["finite", "inf"])
def test_attention_backward_with_the_dc_loss_adds_both_gradients(rt, rng, fill):
    """The attention backward kernels with dc: the attention's gradients plus the dc loss's,
    in the same two launches."""
    hard = fill == "inf"
    for groups, n, heads, dh in attention_sizes(rt):
        qkv, mask = case(rng, groups, n, heads, dh)
        dout = rng.standard_normal((groups, n, heads * dh))
        prior = rng.standard_normal(mask.shape)
        att = MaskedAttention(heads, fill, runtime=rt)
        dc = ChannelDCLoss(heads, tau=0.1, reg=0.5, runtime=rt)
        q_dev, m_dev = rt.to_device(qkv), rt.to_device(mask)
        att.forward(q_dev, m_dev)
        dc.forward(q_dev, m_dev)
        for accumulate in (True, False):
            dmask = rt.to_device(prior)
            dqkv = att.backward(rt.to_device(dout), dmask, accumulate, dc=dc, dc_weight=0.3)
            a_dqkv, a_dmask = ref.masked_attention_backward(qkv, mask, dout, heads, hard=hard)
            d_dqkv, d_dmask = ref.channel_dc_backward(qkv, mask, heads, 0.1, 0.5, weight=0.3)
            np.testing.assert_allclose(dqkv.get(), a_dqkv + d_dqkv, rtol=1e-3, atol=1e-4)
            np.testing.assert_allclose(dmask.get(), prior * accumulate + a_dmask + d_dmask,
                                       rtol=1e-3, atol=1e-4)
    other = rt.to_device(qkv)  # the dc loss's forward pass ran on another qkv
    att.forward(other, m_dev)
    with pytest.raises(ValueError, match="qkv and mask of its last forward"):
        att.backward(rt.to_device(dout), rt.to_device(prior), dc=dc, dc_weight=0.3)


def test_attention_refuses_bad_shapes(rt, rng):
    qkv, mask = case(rng, 2, 3, 2, 2)
    att = MaskedAttention(2, runtime=rt)
    with pytest.raises(ValueError, match="mask"):
        att.forward(rt.to_device(qkv), rt.to_device(mask[:, :2]))
    with pytest.raises(ValueError, match="qkv width"):
        MaskedAttention(5, runtime=rt).forward(rt.to_device(qkv), rt.to_device(mask))
    with pytest.raises(ValueError, match="mask fill"):
        MaskedAttention(2, "zero", runtime=rt)
    with pytest.raises(RuntimeError, match="before forward"):
        MaskedAttention(2, runtime=rt).backward(rt.to_device(qkv), rt.to_device(mask))


def test_gradient_check_catches_the_seed_attention(rng):
    qkv, mask = case(rng, 2, 4, 2, 3)
    r = rng.standard_normal((2, 4, 6))

    def seed_loss():
        return float((r * ref.seed_masked_attention_forward(qkv, mask, 2)).sum())

    assert np.abs(numeric_grad(seed_loss, qkv, 1e-6)[..., :12]).max() == 0  # blind to q, k
    assert np.abs(ref.seed_attention_key_grad(qkv, mask, r, 2)).max() < 1e-12
    true_dk = ref.masked_attention_backward(qkv, mask, r, 2)[0][..., 6:12]
    assert np.abs(true_dk).max() > 0.05
