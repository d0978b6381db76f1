"""Recorded steps (nnlib/step_replay.py): a replayed training step computes what the step it
recorded would compute again, on the batch now in the arrays, and a step is replayed only
where its launches are the same."""

import sys
import threading

import numpy as np
import pytest

import nnlib
from nnlib.batches import DeviceBatches
from nnlib.runtime import Runtime

SIZES = (37, 70, 9, 3)  # widths that are no multiple of a work-group or vector width


def net(rt, variant="blocked"):
    acts = ("tanh", "relu", "softmax")
    return nnlib.Sequential([nnlib.Dense(a, b, act, seed=i + 1, variant=variant, runtime=rt)
                             for i, (a, b, act) in enumerate(zip(SIZES, SIZES[1:], acts))],
                            loss="cross_entropy")


def data(rt, rng, n):
    x = rng.standard_normal((n, SIZES[0])).astype(np.float32)
    labels = rng.integers(0, SIZES[-1], n)
    return x, labels


def train(model, rt, x, labels, batch, epochs=3, between=None):
    """Epochs of train_step over DeviceBatches (as fit's layer-by-layer path), SGD with
    momentum; ``between(model)`` runs after every step. Returns the per-sample losses and
    the parameters."""
    opt = nnlib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    n = len(x)
    batches = DeviceBatches(rt, x, model.targets(labels, n))
    rows = rt.empty((n,))
    order_rng = np.random.default_rng(5)
    losses = []
    for _ in range(epochs):
        batches.shuffle(order_rng.permutation(n))
        for start in range(0, n, batch):
            model.train_step(*batches.batch(start, min(batch, n - start)), opt, rows, start)
            if between is not None:
                between(model)
        losses.append(rows.get())
    return np.array(losses), [p.numpy() for p in model.parameters()]


def assert_same_training(a, b):
    np.testing.assert_array_equal(a[0], b[0])
    for p, q in zip(a[1], b[1]):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize("batch", [1, 16, 1100])
def test_replayed_steps_train_exactly_as_steps_worked_out_again(rt, rng, batch):
    """Batch 1, a batch with a shorter last one (45 = 2 x 16 + 13), and one batch of more
    rows than any device's largest work-group: the same losses and weights, bit for bit, as
    with replay_steps off, and the steps after the second of each batch size replayed."""
    n = 1100 if batch == 1100 else 45
    x, labels = data(rt, rng, n)
    plain = net(rt)
    plain.replay_steps = False
    replayed = net(rt)
    epochs = 1 if batch == 1 else 3
    assert_same_training(train(replayed, rt, x, labels, batch, epochs),
                         train(plain, rt, x, labels, batch, epochs))
    steps = epochs * -(-n // batch)
    sizes = len({min(batch, n - s) for s in range(0, n, batch)})
    assert plain._replay.replays == 0 and not plain._replay.recordings
    assert len(replayed._replay.recordings) == sizes
    assert replayed._replay.replays == steps - 2 * sizes  # seen, recorded, then replayed


def test_a_replayed_step_stores_its_losses_where_it_is_told(rt, rng):
    """The output head stores each sample's loss; a replay sets its loss array and offset
    anew: a step given no array returns its own (a new one each step), and a step given
    one fills only its rows."""
    x, labels = data(rt, rng, 16)
    plain, replayed = net(rt), net(rt)
    plain.replay_steps = False
    values = []
    for model in (plain, replayed):
        opt = nnlib.optim.SGD(model.parameters(), lr=0.05)
        xb, yb = rt.to_device(x), model.targets(labels, 16)
        own = [model.train_step(xb, yb, opt) for _ in range(4)]
        rows = rt.to_device(np.full(40, -1.0, np.float32))
        for offset in (0, 20, 4):
            model.train_step(xb, yb, opt, rows, offset)
        values.append(([float(v) for v in own], rows.get()))
        assert model._backward_plan[1].head is not None
    assert replayed._replay.replays == 7 - 2
    assert values[0][0] == values[1][0] and len(set(values[1][0])) == 4
    np.testing.assert_array_equal(values[0][1], values[1][1])
    assert (values[1][1][36:] == -1).all() and (values[1][1][:36] != -1).all()


def test_a_forward_pass_between_steps_changes_nothing(rt, rng):
    """A validation pass between steps (new arrays through the same layers) neither changes
    the replayed steps nor leaves the layers holding its arrays after the next step: a
    backward call then uses the step's."""
    x, labels = data(rt, rng, 45)
    other = rt.to_device(rng.standard_normal((5, SIZES[0])).astype(np.float32))

    def validate(model):
        model.forward(other)

    plain = net(rt)
    plain.replay_steps = False
    replayed = net(rt)
    assert_same_training(train(replayed, rt, x, labels, 16, between=validate),
                         train(plain, rt, x, labels, 16, between=validate))
    assert replayed._replay.replays > 0
    batches = DeviceBatches(rt, x, replayed.targets(labels, 45))
    batches.shuffle(np.arange(45))
    xb, yb = batches.batch(0, 16)
    opt = nnlib.optim.SGD(replayed.parameters(), lr=0.0)
    replays = replayed._replay.replays
    for _ in range(3):  # seen, recorded, replayed
        replayed.forward(other)
        assert replayed.layers[0].saved()[0] is other
        replayed.train_step(xb, yb, opt)
        assert all(layer.saved()[0] is x_in for layer, x_in in
                   zip(replayed.layers, [xb] + [layer.saved()[1] for layer in
                                                replayed.layers[:-1]]))
    assert replayed._replay.replays == replays + 1


def test_threads_record_and_replay_their_own_steps(rt, rng):
    """Two networks on one runtime, trained at once by two threads: each records only its
    own launches, and both train as they would alone without replay."""
    x, labels = data(rt, rng, 45)
    alone = []
    for _ in range(2):
        plain = net(rt)
        plain.replay_steps = False
        alone.append(train(plain, rt, x, labels, 4))
    results = [None, None]

    def work(i):
        results[i] = train(net(rt), rt, x, labels, 4)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns within steps, not only between
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    for got, want in zip(results, alone):
        assert_same_training(got, want)
    assert not rt.recordings


def test_host_data_and_fills_are_not_replayed(rt, rng):
    """Host arrays are uploaded into new buffers each step, and the article's kernels zero
    the gradients with a fill inside the step: neither is replayed, and both train as before."""
    x, labels = data(rt, rng, 16)
    model = net(rt)
    opt = nnlib.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(4):
        model.train_step(x, labels, opt)
    assert model._replay.replays == 0 and not model._replay.recordings
    plain = net(rt, "article")
    plain.replay_steps = False
    article = net(rt, "article")
    assert_same_training(train(article, rt, x, labels, 8),
                         train(plain, rt, x, labels, 8))
    assert article._replay.replays == 0 and article._replay.refused


def test_a_new_optimizer_is_recorded_anew(rt, rng):
    """The step's backward plan belongs to its optimizer (which gradients it writes, which it
    zeroes first): each switch makes a new plan, recorded anew (seen, recorded, replayed)."""
    x, labels = data(rt, rng, 16)
    models = [net(rt), net(rt)]
    models[1].replay_steps = False
    for model in models:
        batches = DeviceBatches(rt, x, model.targets(labels, 16))
        batches.shuffle(np.arange(16))
        xb, yb = batches.batch(0, 16)
        every = nnlib.optim.SGD(model.parameters(), lr=0.05)
        last = nnlib.optim.SGD(model.parameters()[-2:], lr=0.05)
        for opt in (every,) * 3 + (last,) * 3 + (every,) * 2:
            model.train_step(xb, yb, opt)
    for p, q in zip(*(m.parameters() for m in models)):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
        np.testing.assert_array_equal(p.grad.get(), q.grad.get())
    assert models[0]._replay.replays == 2 and len(models[0]._replay.recordings) == 3


def test_a_later_fit_replays_from_its_first_step(rt, rng):
    """Each fit gathers its batches into the network's same arrays: once the first fits have
    recorded both batch sizes (45 = 2 x 16 + 13), every step of the next one replays."""
    x, labels = data(rt, rng, 45)
    model = net(rt)
    opt = nnlib.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(2):
        model.fit(x, labels, opt, epochs=1, batch_size=16, progress=False, fused=False)
    replays = model._replay.replays
    model.fit(x, labels, opt, epochs=1, batch_size=16, progress=False, fused=False)
    assert model._replay.replays == replays + 3 and len(model._replay.recordings) == 2


def test_the_step_profile_sees_every_kernel_of_a_step_that_would_be_replayed(rt, rng):
    """nnlib.bench.profile_step times each kernel through the launchers, which a replay
    bypasses: on device arrays (replayable) it still finds every kernel at every step, and
    leaves replay_steps as it found it. It needs a runtime whose queue records kernel times,
    and says so on any other."""
    from nnlib.bench.profile_step import step_breakdown
    with pytest.raises(RuntimeError, match="profiling=True"):
        step_breakdown(net(Runtime(rt.device, rt.profile, rt.cap, profiling=False)), None,
                       None, None)
    timed = Runtime(rt.device, rt.profile, rt.cap, profiling=True)
    model = net(timed)
    opt = nnlib.optim.SGD(model.parameters(), lr=0.05)
    x, labels = data(timed, rng, 16)
    y = model.targets(labels, 16)
    table = step_breakdown(model, timed.to_device(x), y, opt, steps=4)
    assert model.replay_steps and model._replay.replays == 0
    assert sum(count for count, _ in table.values()) >= 3 + 3 + 2  # forward, weights, inputs
    assert all(us > 0 for _, us in table.values())
