"""FusedMLP (kernels/fused_mlp.cl): one launch per run of training steps, or steps split over
several work-groups (partial gradients + fused_mlp_apply), gives the layer-by-layer path's
results (SGD, Adam, per sample and mini-batch, odd widths, widths above the work-group size)
and the numpy reference's; networks that do not fit are refused clearly."""

import re

import numpy as np
import pytest

import nnlib
from nnlib import fused
from nnlib.activations import FROM_Y, TABLE
from nnlib.fused import FusedMLP, NetworkDoesNotFit
from nnlib.reference.fused import fused_mlp_step
from nnlib.sources import kernel_dir


def mlp(rt, sizes, acts, loss):
    return nnlib.Sequential([nnlib.Dense(a, b, act, seed=i + 1, runtime=rt)
                             for i, (a, b, act) in enumerate(zip(sizes, sizes[1:], acts))],
                            loss=loss)


def optimizer(kind, params):
    if kind == "sgd":
        return nnlib.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)
    if kind == "adamw":
        return nnlib.optim.AdamW(params, lr=3e-3, weight_decay=0.05)
    return nnlib.optim.Adam(params, lr=3e-3, weight_decay=1e-3)


CASES = [  # sizes, activations, loss, optimizer, batch, local size (None: the default)
    ((7, 13, 5, 3), ("tanh", "sigmoid", "softmax"), "cross_entropy", "sgd", 1, None),
    ((7, 13, 5, 3), ("tanh", "sigmoid", "softmax"), "cross_entropy", "adam", 1, 4),
    ((11, 37, 9, 2), ("relu", "leaky_relu", "none"), "mse", "adamw", 5, 3),
    ((11, 37, 9, 2), ("tanh", "tanh", "sigmoid"), "mse", "sgd", 7, 16),
]


SPLIT_CASES = [  # steps split over several work-groups: sizes, ..., local size, groups
    ((7, 13, 5, 3), ("tanh", "sigmoid", "softmax"), "cross_entropy", "sgd", 20, None, 3),
    ((11, 37, 9, 2), ("relu", "leaky_relu", "none"), "mse", "adamw", 33, 5, 2),
    ((11, 37, 9, 2), ("tanh", "tanh", "sigmoid"), "mse", "adam", 17, None, 4),
]


@pytest.mark.parametrize("sizes,acts,loss,kind,batch,local", CASES + [
    ((6, 9, 2), (act, "none"), "mse", "sgd", 5, None) for act in FROM_Y])
def test_fused_fit_equals_layer_by_layer(rt, rng, sizes, acts, loss, kind, batch, local):
    check_fit_equals_layer_by_layer(rt, rng, sizes, acts, loss, kind, batch, local)


@pytest.mark.parametrize("sizes,acts,loss,kind,batch,local,groups", SPLIT_CASES)
def test_split_steps_equal_layer_by_layer(rt, rng, sizes, acts, loss, kind, batch, local,
                                          groups):
    """Each step's batch split over `groups` work-groups (partial gradients, then one launch
    that sums them and updates), the last smaller batch too."""
    check_fit_equals_layer_by_layer(rt, rng, sizes, acts, loss, kind, batch, local, groups)


@pytest.mark.parametrize("sizes,acts,loss,kind,batch,local,groups,team,run", [
    ((11, 37, 9, 2), ("tanh", "sigmoid", "none"), "mse", "sgd", 1, 37, None, 4, 4),
    ((7, 13, 5, 3), ("tanh", "sigmoid", "softmax"), "cross_entropy", "adam", 3, 3, None, 8, 2),
    ((83, 37, 9, 2), ("relu", "leaky_relu", "none"), "mse", "adamw", 5, 16, None, 8, 4),
    ((83, 37, 9, 2), ("tanh", "tanh", "sigmoid"), "mse", "adam", 17, 24, 4, 8, 3)])
def test_teams_share_the_forward_dot_products(monkeypatch, rt, rng, sizes, acts, loss, kind,
                                               batch, local, groups, team, run):
    """The GPU's design on whatever device runs the test: teams of work-items per forward
    tile of rows (teams that leave work-items over, 37 = 9 x 4 + 1; a team wider than the
    work-group, 8 > 3; more tiles than teams; steps split over work-groups), and runs of
    `run` vectors of columns per work-item in the weight update (83 columns leave single
    vectors and tail columns over at every vector width from 1 to 16)."""
    monkeypatch.setattr(fused, "WEIGHT_RUN", run)
    check_fit_equals_layer_by_layer(rt, rng, sizes, acts, loss, kind, batch, local, groups,
                                    team)


def test_tile_constants_are_the_kernels():
    """nnlib/fused.py sizes the forward's local scratch with the kernel's rows per tile."""
    text = (kernel_dir() / "fused_mlp.cl").read_text()
    assert re.search(r"^#define RB (\d+)", text, re.MULTILINE).group(1) == str(fused.TILE_ROWS)


def check_fit_equals_layer_by_layer(rt, rng, sizes, acts, loss, kind, batch, local,
                                    groups=None, team=None):
    n = 101  # steps per epoch: 101 per sample, with a last smaller batch otherwise
    x = rng.standard_normal((n, sizes[0])).astype(np.float32)
    y = (rng.integers(0, sizes[-1], n) if loss == "cross_entropy"
         else rng.uniform(0.1, 0.9, (n, sizes[-1])).astype(np.float32))
    fused_net, layer_net = mlp(rt, sizes, acts, loss), mlp(rt, sizes, acts, loss)
    fused_opt = optimizer(kind, fused_net.parameters())
    layer_opt = optimizer(kind, layer_net.parameters())
    trainer = FusedMLP(fused_net, fused_opt, local_size=local, team=team)
    assert groups is None or trainer._split_batch(batch, groups)[0] > 1
    epochs = 3 if batch == 1 else 12 if batch < 10 else 60  # several hundred steps
    got = trainer.fit(x, y, epochs=epochs, batch_size=batch, seed=3, groups=groups)["loss"]
    want = layer_net.fit(x, y, layer_opt, epochs=epochs, batch_size=batch, seed=3,
                         progress=False, fused=False)["loss"]
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6)
    assert fused_opt.steps == layer_opt.steps
    for p, q in zip(fused_net.parameters(), layer_net.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-3, atol=2e-5)
    # the optimizer's state went along: the layer path continues where the kernel stopped
    for a, b in zip(fused_opt.state_dict().values(), layer_opt.state_dict().values()):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=2e-5)


@pytest.mark.parametrize("kind,groups", [("sgd", 1), ("adam", 1), ("sgd", 2), ("adam", 3)])
def test_fused_step_equals_numpy_reference(rt, rng, kind, groups):
    sizes, acts = (6, 10, 4), ("tanh", "softmax")
    net = mlp(rt, sizes, acts, "cross_entropy")
    opt = optimizer(kind, net.parameters())
    trainer = FusedMLP(net, opt)
    weights = [layer.weight.numpy().astype(np.float64) for layer in net.layers]
    biases = [layer.bias.numpy().astype(np.float64) for layer in net.layers]
    zeros = [np.zeros_like(p) for pair in zip(weights, biases) for p in pair]
    state = {"v": [z.copy() for z in zeros], "m": [z.copy() for z in zeros]}
    hyper = ({"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3}
             if kind == "sgd" else {"lr": 3e-3, "weight_decay": 1e-3})
    for step in range(1, 6):
        x = rng.standard_normal((3, 6)).astype(np.float32)
        labels = rng.integers(0, 4, 3)
        value = float(trainer.step(x, labels, groups=groups))
        want = fused_mlp_step(weights, biases, state, x.astype(np.float64),
                              np.eye(4)[labels], acts, "cross_entropy", kind, step, groups,
                              **hyper)
        assert abs(value - want) < 1e-5 * max(1.0, abs(want))
        for layer, w, b in zip(net.layers, weights, biases):
            np.testing.assert_allclose(layer.weight.numpy(), w, rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(layer.bias.numpy(), b, rtol=1e-4, atol=1e-6)


def test_inline_tanh_is_within_4e_7_of_tanh(rt):
    """The fused forward pass computes tanh as a rational function (activation.cl's
    tanh_rational4, through activate4): one tanh unit with weight 1 and target 0 at lr 0
    leaves tanh(x)^2 as each sample's loss, for x across and beyond the function's range, in
    every tile position (1..5 outputs)."""
    x = np.concatenate([np.linspace(-12, 12, 2429), [-1e-6, 1e-7, 0.0]]).astype(np.float32)
    for n_out in range(1, 6):
        net = mlp(rt, (1, n_out), ("tanh",), "mse")
        rt.fill(net.layers[0].weight.value, 1)
        rt.fill(net.layers[0].bias.value, 0)
        trainer = FusedMLP(net, nnlib.optim.SGD(net.parameters(), lr=0.0))
        losses = rt.empty((len(x),))
        trainer.run(rt.to_device(x[:, None]), rt.zeros((len(x), n_out)),
                    np.arange(len(x), dtype=np.int32), 64, losses)  # 38 steps of 64
        got = np.sqrt(losses.get().astype(np.float64) / n_out)
        np.testing.assert_allclose(got, np.abs(np.tanh(x.astype(np.float64))), rtol=0,
                                   atol=4e-7)


def test_widths_above_the_work_group_size(rt, rng):
    probe = FusedMLP(*(lambda net: (net, nnlib.optim.SGD(net.parameters())))(
        mlp(rt, (3, 2), ("none",), "mse")))
    wide = probe.max_local_size + 3
    sizes, acts = (wide, 5, 2), ("tanh", "none")
    x = rng.standard_normal((4, wide)).astype(np.float32)
    y = rng.standard_normal((4, 2)).astype(np.float32)
    nets = [mlp(rt, sizes, acts, "mse") for _ in range(2)]
    opts = [nnlib.optim.SGD(net.parameters(), lr=0.01, momentum=0.5) for net in nets]
    trainer = FusedMLP(nets[0], opts[0], local_size=probe.max_local_size)
    # the largest batch up to 3 whose activations fit local memory (a device with large
    # work-groups, such as Intel's CPU runtime's 8192, may fit only 2 samples this wide)
    batch = max((b for b in (1, 2, 3) if trainer.local_bytes(b) <= rt.local_mem_size),
                default=0)
    if not batch:
        pytest.skip(f"one sample {wide} wide needs more local memory than the device's "
                    f"{rt.local_mem_size} bytes")
    trainer.fit(x, y, epochs=2, batch_size=batch)
    nets[1].fit(x, y, opts[1], epochs=2, batch_size=batch, progress=False, fused=False)
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-4, atol=1e-6)


def test_networks_that_do_not_fit_are_refused(rt):
    net = mlp(rt, (240, 128, 3), ("tanh", "softmax"), "cross_entropy")
    trainer = FusedMLP(net, nnlib.optim.Adam(net.parameters()))
    assert trainer.local_bytes(2) > trainer.local_bytes(1) > 4 * (240 + 128 + 3)
    too_many = 1
    while trainer.local_bytes(too_many) <= rt.local_mem_size:
        too_many *= 2
    x = np.zeros((too_many, 240), np.float32)
    with pytest.raises(NetworkDoesNotFit, match="batch .* fits"):
        trainer.fit(x, np.zeros(too_many, int), epochs=1, batch_size=too_many)
    with pytest.raises(ValueError, match="exactly net.parameters"):
        FusedMLP(net, nnlib.optim.SGD(mlp(rt, (240, 128, 3), ("tanh", "softmax"),
                                          "cross_entropy").parameters()))
    with pytest.raises(TypeError, match="AdamMini"):
        FusedMLP(net, nnlib.optim.AdamMini(net.parameters()))
    with pytest.raises(ValueError, match="groups"):
        trainer.fit(x[:4], np.zeros(4, int), epochs=1, batch_size=2, groups=3)
    with pytest.raises(ValueError, match="local_size"):
        FusedMLP(net, nnlib.optim.SGD(net.parameters()), local_size=0)
    with pytest.raises(ValueError, match="team must be an integer >= 1, got 0"):
        FusedMLP(net, nnlib.optim.SGD(net.parameters()), team=0)
    conv = nnlib.Sequential([nnlib.Conv1d(4, 1, 2, 3, runtime=rt)], loss="mse")
    with pytest.raises(TypeError, match="Dense"):
        FusedMLP(conv, nnlib.optim.SGD(conv.parameters()))
    for act in (a.name for a in TABLE if a.needs == "z"):  # the kernel keeps only y
        z_net = mlp(rt, (4, 3, 2), (act, "none"), "mse")
        with pytest.raises(ValueError, match=f"derivative of {act} needs z"):
            FusedMLP(z_net, nnlib.optim.SGD(z_net.parameters()))


@pytest.mark.parametrize("groups", [1, 2])
def test_non_finite_steps_are_skipped_and_reported(rt, rng, groups):
    net = mlp(rt, (4, 3, 2), ("tanh", "none"), "mse")
    opt = nnlib.optim.SGD(net.parameters(), lr=0.1)
    net.layers[1].weight.set(np.full((2, 3), np.inf, np.float32))
    before = [p.numpy() for p in net.parameters()]
    x = rng.standard_normal((6, 4)).astype(np.float32)
    with pytest.raises(FloatingPointError, match="skipped"):
        FusedMLP(net, opt).fit(x, np.zeros((6, 2), np.float32), epochs=1, batch_size=2,
                               groups=groups)
    assert opt.skipped_steps == 3
    for p, value in zip(net.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), value)


def test_adam_without_eps_leaves_never_moved_weights_like_the_layer_path(rt, rng):
    """eps = 0 and a gradient that is always 0 (an input that is always 0) make Adam's step
    0/0: optim.cl takes it as 0, and the fused kernel must too (not NaN)."""
    x = rng.standard_normal((9, 5)).astype(np.float32)
    x[:, 2] = 0.0
    y = rng.standard_normal((9, 2)).astype(np.float32)
    nets = [mlp(rt, (5, 4, 2), ("tanh", "none"), "mse") for _ in range(2)]
    opts = [nnlib.optim.Adam(net.parameters(), lr=1e-2, eps=0.0) for net in nets]
    FusedMLP(nets[0], opts[0]).fit(x, y, epochs=2, batch_size=3, seed=1)
    nets[1].fit(x, y, opts[1], epochs=2, batch_size=3, seed=1, progress=False, fused=False)
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):
        assert np.isfinite(p.numpy()).all()
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-4, atol=1e-6)
    first = nets[0].layers[0].weight
    np.testing.assert_array_equal(first.numpy()[:, 2], nets[1].layers[0].weight.numpy()[:, 2])
