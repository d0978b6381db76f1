"""Sequential: losses on the device, a whole-network gradient check, training, checkpoints."""

import numpy as np
import pytest

import nnlib
from nnlib import reference as ref


def mlp(rt, loss="cross_entropy", variant="blocked"):
    out_act = "softmax" if loss == "cross_entropy" else "sigmoid"
    return nnlib.Sequential([
        nnlib.Dense(7, 9, "tanh", seed=1, variant=variant, runtime=rt),
        nnlib.Dense(9, 6, "leaky_relu", seed=2, variant=variant, runtime=rt),
        nnlib.Dense(6, 3, out_act, seed=3, variant=variant, runtime=rt),
    ], loss=loss)


def data(rng, batch=5):
    return rng.standard_normal((batch, 7)).astype(np.float32), rng.integers(0, 3, batch)


@pytest.mark.torch
@pytest.mark.parametrize("loss", ["cross_entropy", "mse"])
@pytest.mark.parametrize("batch", [1, 5])
def test_gradients_match_pytorch_autograd(rt, rng, loss, batch):
    torch = pytest.importorskip("torch")
    net = mlp(rt, loss)
    x, labels = data(rng, batch)
    target = np.eye(3, dtype=np.float32)[labels]
    opt = nnlib.optim.SGD(net.parameters(), lr=0.0)
    value = float(net.train_step(x, labels if loss == "cross_entropy" else target, opt))

    tw = [torch.tensor(p.numpy(), dtype=torch.float64, requires_grad=True)
          for p in net.parameters()]
    h = torch.tensor(x, dtype=torch.float64)
    h = torch.tanh(h @ tw[0].T + tw[1])
    h = torch.nn.functional.leaky_relu(h @ tw[2].T + tw[3], 0.01)
    z = h @ tw[4].T + tw[5]
    if loss == "cross_entropy":
        t_loss = torch.nn.functional.cross_entropy(z, torch.tensor(labels))
    else:
        t_loss = torch.nn.functional.mse_loss(torch.sigmoid(z), torch.tensor(target,
                                                                           dtype=torch.float64))
    t_loss.backward()
    assert value == pytest.approx(t_loss.item(), rel=1e-5)
    for p, t in zip(net.parameters(), tw):
        np.testing.assert_allclose(p.grad.get(), t.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_loss_matches_reference(rt, rng):
    net = mlp(rt)
    x, labels = data(rng, 4)
    probs = net.predict(x)
    want = ref.cross_entropy(probs.astype(np.float64), np.eye(3)[labels])
    assert net.compute_loss(x, labels) == pytest.approx(want, rel=1e-5)


def test_train_step_is_lazy_and_sgd_learns(rt, rng):
    net = mlp(rt)
    x, labels = data(rng, 16)
    opt = nnlib.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
    losses = [net.train_step(x, labels, opt) for _ in range(30)]
    assert isinstance(losses[0], nnlib.network.DeviceLoss)
    assert float(losses[-1]) < 0.5 * float(losses[0])


def test_sgd_step_matches_reference(rt, rng):
    p = nnlib.Parameter(rng.standard_normal(37), runtime=rt)
    g = rng.standard_normal(37).astype(np.float32)
    opt = nnlib.optim.SGD([p], lr=0.1, momentum=0.9)
    w, v = p.numpy().astype(np.float64), np.zeros(37)
    for _ in range(3):
        p.grad.set(g)
        opt.step()
        w, v = ref.sgd_step(w, g, v, 0.1, 0.9)
    np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-6)


def test_fit_reports_history_and_predict_batches(rt, rng):
    net = mlp(rt)
    x, labels = data(rng, 40)
    history = net.fit(x, labels, nnlib.optim.SGD(net.parameters(), lr=0.3), epochs=5,
                      batch_size=7, validation_data=(x, labels), progress=False)
    assert len(history["loss"]) == len(history["val_loss"]) == 5
    assert history["loss"][-1] < history["loss"][0]
    np.testing.assert_allclose(net.predict(x, batch_size=3), net.predict(x), rtol=1e-6)


def test_outputs_the_caller_keeps_stay_valid(rt, rng):
    """Layers let go of their last pass's arrays so the pool can reuse them; an output the
    caller still holds must not be among them."""
    net = nnlib.Sequential([nnlib.Dense(7, 5, "tanh", seed=1, runtime=rt),
                            nnlib.Dense(5, 3, seed=2, runtime=rt)])
    x1, x2 = rng.standard_normal((2, 4, 7)).astype(np.float32)
    first = net.forward(x1)
    want = first.get()
    for _ in range(3):
        net.forward(x2)
        net.train_step(x2, np.zeros((4, 3)), nnlib.optim.SGD(net.parameters(), lr=0.0))
    np.testing.assert_array_equal(first.get(), want)


def test_save_load_round_trip(rt, rng, tmp_path):
    net = mlp(rt, variant="article")
    x, _ = data(rng)
    path = tmp_path / "model.npz"
    net.save(path)
    loaded = nnlib.Sequential.load(path, runtime=rt)
    assert [layer.config() for layer in loaded.layers] == [layer.config() for layer in net.layers]
    np.testing.assert_array_equal(loaded.predict(x), net.predict(x))


def test_a_crash_while_saving_keeps_the_old_checkpoint(rt, tmp_path, monkeypatch):
    net = mlp(rt)
    path = tmp_path / "model.npz"
    net.save(path)
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        net.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.npz"]


def test_load_rejects_foreign_files(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, a=np.zeros(3))
    with pytest.raises(ValueError, match="not an nnlib checkpoint"):
        nnlib.Sequential.load(path)


def test_bad_configurations_and_targets(rt, rng):
    with pytest.raises(ValueError, match="cross_entropy needs a last layer with activation='softmax'"):
        nnlib.Sequential([nnlib.Dense(3, 2, runtime=rt)], loss="cross_entropy")
    with pytest.raises(ValueError, match="unknown loss"):
        nnlib.Sequential([nnlib.Dense(3, 2, runtime=rt)], loss="hinge")
    with pytest.raises(TypeError, match="non-empty list"):
        nnlib.Sequential([])
    net = mlp(rt)
    x, _ = data(rng, 2)
    with pytest.raises(ValueError, match=r"class labels must lie in \[0, 3\)"):
        net.compute_loss(x, np.array([0, 3]))
    with pytest.raises(ValueError, match="NaN"):
        net.fit(np.full((2, 7), np.nan), np.array([0, 1]), nnlib.optim.SGD(net.parameters()),
                progress=False)
    with pytest.raises(ValueError, match="learning rate"):
        nnlib.optim.SGD(net.parameters(), lr=-1)
