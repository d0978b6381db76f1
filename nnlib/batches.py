"""A training set kept on the device, served in shuffled mini-batches gathered there
(kernels/batches.cl): what ``Sequential.fit`` trains from.

Copying each mini-batch from the host costs more than the kernels of a small network's
step: gathering the rows on the host, checking them and making a buffer, while one gather
launch (inputs and targets together) costs a fraction of that. The data go to the device
once per ``fit`` and the shuffled order once per epoch. A network hands each of its fits
the same batch arrays (``arrays``), so that the steps of a later fit are the same launches on
the same arrays and replay from its first step (:mod:`nnlib.step_replay`).

Taught in notebooks/03_cpu_vs_gpu.
"""

from __future__ import annotations

import numpy as np

from .layers.dense_params import lanes_by_default, lanes_work_group

KEPT_SHAPES = 8  # batch shapes whose arrays an ``arrays`` dict keeps: the ones made last


def gather_rows(data: np.ndarray, order: np.ndarray, first: int, rows: int) -> np.ndarray:
    """The numpy reference of the gather kernel (for the inputs and for the targets): rows
    ``order[first:first + rows]`` of ``data`` (n, cols)."""
    return data[order[first:first + rows]]


class DeviceBatches:
    """``inputs`` (n, n_in) and ``targets`` (n, n_out), device arrays or host arrays of
    finite numbers (copied once), served as mini-batches of rows in the order of
    :meth:`shuffle`. ``lanes``: gather in the lanes design (kernels/batches.cl); None: where
    the device's kernels take it (``dense_params.lanes_by_default``). ``arrays``: a dict to
    keep the batch arrays in, {(rows, input columns, target columns): (inputs, targets)},
    shared with earlier DeviceBatches of the same runtime (a new one if None)."""

    def __init__(self, runtime, inputs, targets, lanes: bool | None = None,
                 arrays: dict | None = None):
        self.runtime = runtime
        self.inputs = runtime.to_device(inputs, "fit inputs", shape=(None, None), wait=True)
        self.targets = runtime.to_device(targets, "fit targets",
                                         shape=(self.inputs.shape[0], None), wait=True)
        self.order = None
        self._batches = {} if arrays is None else arrays  # shape -> arrays, reused
        if lanes_by_default(runtime) if lanes is None else lanes:
            self._gather = runtime.launcher("batches", "gather_rows_lanes")
            self._lanes = min(lanes_work_group(runtime), self._gather.work_group_size)
        else:
            self._gather, self._lanes = runtime.launcher("batches", "gather_rows"), 0

    def __len__(self):
        return self.inputs.shape[0]

    def shuffle(self, order) -> None:
        """Serve the rows in ``order`` (a permutation of range(n), or any row indices)."""
        order = np.asarray(order)
        if order.ndim != 1 or not np.issubdtype(order.dtype, np.integer) or \
                len(order) and (order.min() < 0 or order.max() >= len(self)):
            raise ValueError(f"shuffle: order must be row indices in [0, {len(self)})")
        self.order = self.runtime.to_device(order, "order", dtype=np.int32)

    def batch(self, first: int, rows: int) -> tuple:
        """(inputs, targets) of the rows ``order[first:first + rows]``, enqueued into the
        same two arrays as the last batch of that shape (the queue runs in order, so they
        are overwritten only after the kernels already queued have read them)."""
        if self.order is None:
            raise RuntimeError("batch: call shuffle(order) first")
        if not (0 <= first and 1 <= rows and first + rows <= self.order.shape[0]):
            raise ValueError(f"batch: rows {first}..{first + rows} outside the order of "
                             f"{self.order.shape[0]}")
        shape = (rows, self.inputs.shape[1], self.targets.shape[1])
        if shape not in self._batches:
            while len(self._batches) >= KEPT_SHAPES:
                del self._batches[next(iter(self._batches))]
            self._batches[shape] = tuple(self.runtime.empty((rows, columns))
                                         for columns in shape[1:])
        x, t = self._batches[shape]
        grid, local = ((self._lanes, rows), (self._lanes, 1)) if self._lanes else ((rows,), None)
        self._gather(grid, local, self.inputs.data, self.targets.data,
                     self.order.data, np.int32(first), np.int32(rows), np.int32(x.shape[1]),
                     np.int32(t.shape[1]), x.data, t.data)
        return x, t
