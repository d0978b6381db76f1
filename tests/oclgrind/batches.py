"""Both gather kernels (a row per work-item, and the lanes design) on odd sizes: a batch of 5
rows of 37 inputs and 3 targets from a set of 11 rows, the order with repeats, the batch at
the start and at the end of the order."""

import numpy as np
from _limits import oclgrind_runtime

from nnlib.batches import DeviceBatches, gather_rows

rt, config = oclgrind_runtime()
rng = np.random.default_rng(0)
data = rng.standard_normal((11, 37)).astype(np.float32)
targets = rng.standard_normal((11, 3)).astype(np.float32)
order = np.concatenate([rng.permutation(11), [10, 0]])
for lanes in (False, True):
    batches = DeviceBatches(rt, data, targets, lanes=lanes)
    batches.shuffle(order)
    for first in (0, len(order) - 5):
        x, t = batches.batch(first, 5)
        assert np.array_equal(x.get(), gather_rows(data, order, first, 5))
        assert np.array_equal(t.get(), gather_rows(targets, order, first, 5))
print("kernels run: gather_rows, gather_rows_lanes")
