"""The output head (kernels/head.cl, nnlib.step_fusion.OutputHead): the last layer's forward,
loss gradient and backward in one launch, against the numpy reference and finite
differences, and where Sequential.train_step takes it."""

import numpy as np
import pytest

import nnlib
from nnlib import reference as ref
from nnlib import step_fusion
from nnlib.bench.profile_step import recording
from nnlib.step_fusion import HEAD_MAX_OUT, FusedBackward

from .gradcheck import numeric_grad

# (loss, the head's activation, the activation of the layer below)
KINDS = [("cross_entropy", "softmax", "tanh"), ("mse", "none", "relu"),
         ("mse", "tanh", "sigmoid"), ("mse", "sigmoid", "none"),
         ("mse", "leaky_relu", "leaky_relu")]


def head_of(rt, n_in, n_out, loss, act, below, owned=slice(None), layers=2):
    """A network (3 -> n_in with ``below``, n_in -> n_out with ``act``), its optimizer over
    parameters ``owned`` and the FusedBackward of their step (its head made)."""
    dense = [nnlib.Dense(3, n_in, below, seed=1, runtime=rt),
             nnlib.Dense(n_in, n_out, act, seed=2, runtime=rt)][2 - layers:]
    net = nnlib.Sequential(dense, loss=loss)
    opt = nnlib.optim.SGD(net.parameters()[owned], lr=0.1)
    fused = FusedBackward(net.layers, opt)
    assert fused.head is not None
    return net, fused.head


def data(rng, rows, n_in, n_out, loss, below):
    """An input that the layer below could have given (its activation's range) and targets
    (one-hot for cross-entropy)."""
    x = rng.standard_normal((rows, n_in))
    if below in ("tanh", "sigmoid", "relu"):
        x = ref.activate(x, below)
    t = np.eye(n_out)[rng.integers(0, n_out, rows)] if loss == "cross_entropy" \
        else rng.standard_normal((rows, n_out))
    return x.astype(np.float32), t.astype(np.float32)


def sizes(rt):
    """Odd sizes, batch 1, rows beyond the device's largest work-group, columns beyond the
    head's work-group's vectors, and the narrowest and widest heads."""
    wide = step_fusion.HEAD_GROUP * step_fusion.head_vector_width(rt) + 3
    return [(1, 7, 3), (37, 29, 5), (rt.max_work_group_size + 3, 13, 2), (3, wide, 2),
            (19, 64, 1), (11, 17, HEAD_MAX_OUT)]


@pytest.mark.parametrize("kind", KINDS, ids="-".join)
def test_head_step_matches_reference(rt, rng, kind):
    loss, act, below = kind
    for rows, n_in, n_out in sizes(rt):
        net, head = head_of(rt, n_in, n_out, loss, act, below)
        x, t = data(rng, rows, n_in, n_out, loss, below)
        layer = net.layers[-1]
        losses = rt.to_device(np.full(rows + 3, -1.0, np.float32))
        y, dx = head.step(rt.to_device(x), rt.to_device(t), net.loss_function, losses, 2)
        want = ref.head_step(x, layer.weight.numpy(), layer.bias.numpy(), t, loss, act, below)
        for got, w in zip((y, dx, layer.weight.grad, layer.bias.grad), want[:1] + want[2:]):
            np.testing.assert_allclose(got.get(), w, rtol=2e-4, atol=2e-6,
                                       err_msg=f"{rows} x {n_in} -> {n_out}")
        stored = losses.get()  # each sample's loss from the offset on, nothing around it
        np.testing.assert_allclose(stored[2:-1], ref.loss_rows(want[0], t, loss), rtol=2e-4,
                                   atol=2e-6, err_msg=f"losses, {rows} x {n_in} -> {n_out}")
        assert stored[:2].tolist() == [-1, -1] and stored[-1] == -1
        assert layer.saved()[1] is y  # as the layer's forward leaves it


def test_head_adds_to_gradients_it_does_not_own_and_skips_dx_of_a_first_layer(rt, rng):
    """A head whose parameters the optimizer does not hold adds to their gradients; the
    head of a one-layer network computes no input gradient."""
    net, head = head_of(rt, 9, 4, "mse", "tanh", "tanh", owned=slice(0, 2))
    assert head.accumulate
    layer = net.layers[-1]
    layer.weight.grad.set(np.ones((4, 9), np.float32))
    layer.bias.grad.set(np.ones(4, np.float32))
    x, t = data(rng, 6, 9, 4, "mse", "tanh")
    head.step(rt.to_device(x), rt.to_device(t), net.loss_function, rt.empty((6,)))
    _, _, _, dw, db = ref.head_step(x, layer.weight.numpy(), layer.bias.numpy(), t, "mse",
                                    "tanh", "tanh")
    np.testing.assert_allclose(layer.weight.grad.get(), dw + 1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.bias.grad.get(), db + 1, rtol=1e-5, atol=1e-6)
    single, head = head_of(rt, 5, 3, "cross_entropy", "softmax", "tanh", layers=1)
    assert not head.want_dx
    _, dx = head.step(rt.to_device(x[:, :5]), rt.to_device(np.eye(3, dtype=np.float32)[
        [0, 1, 2, 0, 1, 2]]), single.loss_function, rt.empty((6,)))
    assert dx is None


@pytest.mark.parametrize("kind", KINDS[:2], ids="-".join)
def test_head_gradients_match_finite_differences(rt, kind):
    """dL/dW, dL/db and dL/dx (the layer below's activation taken as none) against central
    differences of the float64 reference's loss."""
    loss, act, _ = kind
    rng = np.random.default_rng(3)
    net, head = head_of(rt, 6, 3, loss, act, "none")
    x, t = data(rng, 4, 6, 3, loss, "none")
    layer = net.layers[-1]
    _, dx = head.step(rt.to_device(x), rt.to_device(t), net.loss_function, rt.empty((4,)))
    w, b = layer.weight.numpy().astype(np.float64), layer.bias.numpy().astype(np.float64)
    x64, t64 = x.astype(np.float64), t.astype(np.float64)
    value = ref.cross_entropy if loss == "cross_entropy" else ref.mse

    def f():
        return value(ref.dense_forward(x64, w, b, act), t64)

    for got, var in ((dx.get(), x64), (layer.weight.grad.get(), w), (layer.bias.grad.get(), b)):
        np.testing.assert_allclose(got, numeric_grad(f, var, eps=1e-5), rtol=1e-3, atol=1e-5)


def launched(net, x, y, opt) -> list:
    with recording(net.runtime) as events:
        net.train_step(x, y, opt)
    return [name for name, _ in events]


def test_train_step_takes_the_head_where_it_qualifies(rt, rng):
    """One head launch instead of the last layer's product, output gradient and two
    gradient products; not for a batch past HEAD_MAX_WORK or a layer of more than
    HEAD_MAX_OUT outputs, nor where a student's kernels replace the ones it stands for."""
    def net_of(n_out):
        return nnlib.Sequential([nnlib.Dense(8, 16, "tanh", seed=1, runtime=rt),
                                 nnlib.Dense(16, n_out, "softmax", seed=2, runtime=rt)],
                                loss="cross_entropy")
    net = net_of(3)
    opt = nnlib.optim.SGD(net.parameters(), lr=0.1)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[[0, 1, 2, 1, 0]]
    names = launched(net, x, y, opt)
    assert names.count("head_step") == 1
    assert "output_gradient" not in names and "loss_rows" not in names
    assert names.count("gemm_nt") == 1  # the first layer's forward only
    rows = step_fusion.HEAD_MAX_WORK // (16 * 3) + 1
    big = launched(net, rng.standard_normal((rows, 8)).astype(np.float32),
                   np.eye(3, dtype=np.float32)[np.arange(rows) % 3], opt)
    assert "head_step" not in big and {"output_gradient", "loss_rows"} <= set(big)
    wide = net_of(HEAD_MAX_OUT + 1)
    assert "head_step" not in launched(wide, x, np.eye(HEAD_MAX_OUT + 1, dtype=np.float32)[
        [0, 1, 2, 1, 0]], nnlib.optim.SGD(wide.parameters(), lr=0.1))
    nnlib.use_kernels(nnlib.sources.kernel_dir(), topics=("loss",), runtime=rt)
    try:
        assert FusedBackward(net_of(3).layers, opt).head is None
    finally:
        nnlib.use_kernels(None, runtime=rt)


def test_training_with_and_without_the_head_agrees(rt, rng, monkeypatch):
    """Five steps of the seed network's shape with the head equal five without it."""
    x = rng.standard_normal((16, 24)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)]
    nets = []
    for use_head in (True, False):
        if not use_head:
            monkeypatch.setattr(step_fusion.OutputHead, "of", classmethod(lambda cls, f: None))
        net = nnlib.Sequential([nnlib.Dense(24, 12, "tanh", seed=1, runtime=rt),
                                nnlib.Dense(12, 8, "tanh", seed=2, runtime=rt),
                                nnlib.Dense(8, 3, "softmax", seed=3, runtime=rt)],
                               loss="cross_entropy")
        opt = nnlib.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        losses = [float(net.train_step(x, y, opt)) for _ in range(5)]
        nets.append((net, losses))
        assert (net._backward_plan[1].head is not None) == use_head
    (a, la), (b, lb) = nets
    np.testing.assert_allclose(la, lb, rtol=1e-5)
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-4, atol=1e-6)
