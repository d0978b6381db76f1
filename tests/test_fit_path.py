"""Sequential.fit's choice of path (nnlib/fit_path.py): a qualifying network trains on the
fused kernel by default and that is the same training as the layer path (loss curve,
weights, optimizer state; batch 1 and 64); the measured rule keeps the faster path per
shape and batch, stored with the tuning results; fused=True says why a network does not
qualify; fused=False keeps the layer path."""

import numpy as np
import pytest

import nnlib
from nnlib import fit_path, tuning
from nnlib.fused import FusedMLP, NetworkDoesNotFit


def classifier(rt, sizes=(13, 17, 9, 3)):
    acts = ["tanh"] * (len(sizes) - 2) + ["softmax"]
    return nnlib.Sequential([nnlib.Dense(a, b, act, seed=i + 1, runtime=rt)
                             for i, (a, b, act) in enumerate(zip(sizes, sizes[1:], acts))],
                            loss="cross_entropy")


def regressor(rt):
    return nnlib.Sequential([nnlib.Dense(5, 11, "relu", seed=1, runtime=rt),
                             nnlib.Dense(11, 2, "sigmoid", seed=2, runtime=rt)], loss="mse")


@pytest.mark.parametrize("batch,kind", [(1, "sgd"), (64, "sgd"), (1, "adam"), (64, "adam")])
def test_plain_fit_takes_the_fused_path_and_trains_as_the_layer_path(rt, rng, tmp_path,
                                                                     batch, kind):
    """301 samples: batch 64 ends with a step of 45; the weights after fit are the layers'
    Parameters (predict and a checkpoint see them) and the optimizer's state went along."""
    n = 301
    x = rng.standard_normal((n, 13)).astype(np.float32)
    y = rng.integers(0, 3, n)
    runs = []
    for fused in (None, False):
        net = classifier(rt)
        opt = (nnlib.optim.SGD(net.parameters(), lr=0.01, momentum=0.9) if kind == "sgd"
               else nnlib.optim.Adam(net.parameters(), lr=1e-3))
        history = net.fit(x, y, opt, epochs=3, batch_size=batch, seed=5, progress=False,
                          validation_data=(x[:20], y[:20]), fused=fused)
        runs.append((net, opt, history))
    (net, opt, auto), (layer_net, layer_opt, layers) = runs
    assert (auto["path"], layers["path"]) == ("fused", "layers")
    np.testing.assert_allclose(auto["loss"], layers["loss"], rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(auto["val_loss"], layers["val_loss"], rtol=1e-3, atol=1e-6)
    assert opt.steps == layer_opt.steps == 3 * -(-n // batch)
    for p, q in zip(net.parameters(), layer_net.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-3, atol=2e-5)
    for a, b in zip(opt.state_dict().values(), layer_opt.state_dict().values()):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=2e-5)
    np.testing.assert_allclose(net.predict(x), layer_net.predict(x), rtol=1e-3, atol=2e-5)
    net.save(tmp_path / "fused.nnlib")
    back = nnlib.Sequential.load(tmp_path / "fused.nnlib", runtime=rt)
    for p, q in zip(back.parameters(), net.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_fit_forced_onto_the_fused_path_says_why_a_network_does_not_qualify(rt, rng):
    x = rng.standard_normal((8, 13)).astype(np.float32)
    y = rng.integers(0, 3, 8)
    net = classifier(rt)
    with pytest.raises(TypeError, match=r"fused=True.*does not qualify.*AdamMini"):
        net.fit(x, y, nnlib.optim.AdamMini(net.parameters()), epochs=1, fused=True)
    with pytest.raises(ValueError, match=r"fused=True.*exactly net.parameters"):
        net.fit(x, y, nnlib.optim.SGD(net.parameters()[2:]), epochs=1, fused=True)
    conv = nnlib.Sequential([nnlib.Conv1d(4, 1, 2, 3, runtime=rt)], loss="mse")
    with pytest.raises(TypeError, match=r"fused=True.*Dense"):
        conv.fit(rng.standard_normal((3, 4)), np.zeros((3, 2)),
                 nnlib.optim.SGD(conv.parameters()), epochs=1, fused=True)
    probe = FusedMLP(net, nnlib.optim.SGD(net.parameters()))
    too_many = 1
    while probe.local_bytes(too_many) <= rt.local_mem_size:
        too_many *= 2
    big_x = np.zeros((too_many, 13), np.float32)
    with pytest.raises(NetworkDoesNotFit, match=r"fused=True.*batch \d+ fits"):
        net.fit(big_x, np.zeros(too_many, int), nnlib.optim.SGD(net.parameters()),
                epochs=1, batch_size=too_many, fused=True)
    with pytest.raises(TypeError, match="fused must be None"):
        net.fit(x, y, nnlib.optim.SGD(net.parameters()), epochs=1, fused="yes")


def test_networks_that_do_not_qualify_train_layer_by_layer(rt, rng):
    x = rng.standard_normal((8, 13)).astype(np.float32)
    y = rng.integers(0, 3, 8)
    net = classifier(rt)
    frozen = net.fit(x, y, nnlib.optim.SGD(net.parameters()[2:]), epochs=1, batch_size=3,
                     progress=False)
    mini = net.fit(x, y, nnlib.optim.AdamMini(net.parameters()), epochs=1, batch_size=3,
                   progress=False)
    assert frozen["path"] == mini["path"] == "layers"
    # a batch larger than the data is a step of all of it: it qualifies if that fits
    whole = net.fit(x, y, nnlib.optim.SGD(net.parameters()), epochs=1, batch_size=10**6,
                    progress=False)
    assert whole["path"] == "fused"


def test_fused_path_rejects_inputs_of_the_wrong_width(rt, rng):
    net = classifier(rt)
    with pytest.raises(ValueError, match=r"fit inputs: expected shape \(any, 13\)"):
        net.fit(rng.standard_normal((6, 12)), rng.integers(0, 3, 6),
                nnlib.optim.SGD(net.parameters()), epochs=1, fused=True, progress=False)


@pytest.mark.parametrize("faster", ["fused", "layers"])
def test_the_measured_rule_keeps_the_faster_path_and_stores_it(rt, rng, tuning_cache,
                                                               monkeypatch, faster):
    timed = []

    def seconds(trial, path):
        timed.append((trial.batch, path))
        return 1.0 if path == faster else 2.0
    monkeypatch.setattr(fit_path.Trial, "seconds", seconds)
    x = rng.standard_normal((40, 5)).astype(np.float32)
    y = rng.uniform(0.1, 0.9, (40, 2)).astype(np.float32)
    net = regressor(rt)
    opt = nnlib.optim.Adam(net.parameters())
    assert net.fit(x, y, opt, epochs=1, batch_size=8, progress=False)["path"] == faster
    assert {path for _, path in timed} == {"fused", "layers"} and {b for b, _ in timed} == {8}
    stored = tuning.stored(rt)["fused_mlp.path/5-11-2/mse/adam/b8"]
    assert stored["params"] == {"path": faster}
    count = len(timed)
    assert net.fit(x, y, opt, epochs=1, batch_size=8, progress=False)["path"] == faster
    tuning.set_mode("1")  # forgets this process's results: the next read is the file's
    assert net.fit(x, y, opt, epochs=1, batch_size=8, progress=False)["path"] == faster
    assert len(timed) == count  # measured once
    net.fit(x, y, opt, epochs=1, batch_size=5, progress=False)
    assert len(timed) > count  # another batch size is another measurement
    assert net.fit(x, y, opt, epochs=1, batch_size=8, progress=False, fused=True)["path"] \
        == "fused"
    assert net.fit(x, y, opt, epochs=1, batch_size=8, progress=False, fused=False)["path"] \
        == "layers"


@pytest.mark.parametrize("batch", [1, 6])
def test_a_trial_times_scratch_copies(rt, rng, batch):
    """The timed runs train copies: the caller's weights, state and step count stay."""
    net = regressor(rt)
    opt = nnlib.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    before = [p.numpy() for p in net.parameters()]
    state = opt.state_dict()
    trial = fit_path.Trial(FusedMLP(net, opt), batch)
    for path in ("fused", "layers"):
        assert 0 < trial.seconds(path) < float("inf")
    assert trial.optimizer.steps == 2 * 2 * trial.steps  # warm-up and timed run each way
    for p, value in zip(net.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), value)
    for key, value in opt.state_dict().items():
        np.testing.assert_array_equal(value, state[key])
