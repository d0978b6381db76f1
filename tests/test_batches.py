"""The training set on the device (nnlib/batches.py, kernels/batches.cl): gathered batches
against the numpy reference, fit's batches against the host's, and the copies into it."""

import numpy as np
import pytest

import nnlib
from nnlib.batches import KEPT_SHAPES, DeviceBatches, gather_rows


def _sizes(rt):
    big = rt.max_work_group_size + 3  # past one work-group in either dimension
    return [(1, 1), (1, 241), (37, 5), (5, big), (big, 3)]


@pytest.mark.parametrize("lanes", [False, True], ids=["row per work-item", "lanes design"])
@pytest.mark.parametrize("case", range(5))
def test_gathered_rows_match_reference(rt, rng, case, lanes):
    """Both kernels on every device, whichever the device takes by default."""
    rows, cols = _sizes(rt)[case]
    n = rows + 4
    data = rng.standard_normal((n, cols)).astype(np.float32)
    targets = rng.standard_normal((n, 2)).astype(np.float32)
    order = np.concatenate([rng.permutation(n), [n - 1, 0, n - 1]])  # repeats allowed
    batches = DeviceBatches(rt, data, targets, lanes=lanes)
    batches.shuffle(order)
    for first in (0, len(order) - rows):
        x, t = batches.batch(first, rows)
        np.testing.assert_array_equal(x.get(), gather_rows(data, order, first, rows))
        np.testing.assert_array_equal(t.get(), gather_rows(targets, order, first, rows))


def test_a_batch_reuses_its_arrays(rt, rng):
    data = rng.standard_normal((10, 3)).astype(np.float32)
    batches = DeviceBatches(rt, data, data)
    batches.shuffle(np.arange(10))
    first = batches.batch(0, 4)
    assert batches.batch(4, 4)[0] is first[0]
    assert batches.batch(8, 2)[0] is not first[0]
    np.testing.assert_array_equal(first[0].get(), data[4:8])  # the last batch of 4


def test_shared_arrays_serve_later_batches_of_the_same_shape(rt, rng):
    """Two DeviceBatches given one dict fill the same arrays for a batch of the same rows and
    columns, new ones for other columns; the dict keeps the KEPT_SHAPES shapes made last."""
    data = rng.standard_normal((12, 3)).astype(np.float32)
    wide = rng.standard_normal((12, 5)).astype(np.float32)
    kept: dict = {}
    first, second = (DeviceBatches(rt, data, data, arrays=kept) for _ in range(2))
    other = DeviceBatches(rt, wide, data, arrays=kept)
    for batches in (first, second, other):
        batches.shuffle(np.arange(12)[::-1])
    x = first.batch(0, 4)[0]
    assert second.batch(4, 4)[0] is x and other.batch(0, 4)[0] is not x
    np.testing.assert_array_equal(x.get(), data[::-1][4:8])
    for rows in range(1, KEPT_SHAPES + 1):
        first.batch(0, rows)
    assert len(kept) == KEPT_SHAPES and (4, 3, 3) not in kept and (4, 5, 3) in kept


def test_bad_orders_and_batches_are_refused(rt, rng):
    data = rng.standard_normal((6, 3)).astype(np.float32)
    batches = DeviceBatches(rt, data, data)
    with pytest.raises(RuntimeError, match="shuffle"):
        batches.batch(0, 2)
    for order in ([0, 6], [-1, 2], [0.5, 1], [[0, 1]]):
        with pytest.raises(ValueError, match=r"row indices in \[0, 6\)"):
            batches.shuffle(np.array(order))
    batches.shuffle(np.arange(6))
    for first, rows in ((5, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError, match="outside the order"):
            batches.batch(first, rows)
    with pytest.raises(ValueError, match="fit targets"):
        DeviceBatches(rt, data, data[:5])
    bad = data.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="fit inputs: contains NaN"):
        DeviceBatches(rt, bad, data)


def test_fit_trains_on_the_same_batches_as_train_step(rt, rng):
    """fit's batches, gathered on the device, are the host's shuffled rows (the last one
    short): the weights after two epochs match a loop of train_step on host batches."""
    x = rng.standard_normal((30, 5)).astype(np.float32)
    y = rng.integers(0, 3, 30)

    def net():
        return nnlib.Sequential([nnlib.Dense(5, 9, "tanh", seed=1, runtime=rt),
                                 nnlib.Dense(9, 3, "softmax", seed=2, runtime=rt)],
                                loss="cross_entropy")
    fitted, stepped = net(), net()
    opt_fit = nnlib.optim.SGD(fitted.parameters(), lr=0.1, momentum=0.9)
    opt_step = nnlib.optim.SGD(stepped.parameters(), lr=0.1, momentum=0.9)
    history = fitted.fit(x, y, opt_fit, epochs=2, batch_size=7, seed=3, progress=False,
                         fused=False)
    order = np.random.default_rng(3)
    losses = []
    for _ in range(2):
        idx = order.permutation(30)
        losses.append(sum(float(stepped.train_step(x[idx[s:s + 7]], y[idx[s:s + 7]],
                                                   opt_step)) * len(idx[s:s + 7])
                          for s in range(0, 30, 7)) / 30)
    for a, b in zip(fitted.parameters(), stepped.parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(history["loss"], losses, rtol=1e-5)


@pytest.mark.parametrize("wait", [False, True])
def test_to_device_copies_the_host_data_at_once(rt, rng, wait):
    """The copy is made before to_device returns, whether it waits for the queue or not:
    changing the host array afterwards changes nothing on the device."""
    host = rng.standard_normal((3, 70)).astype(np.float32)
    kept = host.copy()
    device = rt.to_device(host, wait=wait)
    host[:] = 0
    np.testing.assert_array_equal(device.get(), kept)
