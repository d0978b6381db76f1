"""A training set kept on the device, served in shuffled mini-batches gathered there
(kernels/batches.cl): what ``Sequential.fit`` trains from.

Copying each mini-batch from the host costs more than the kernels of a small network's
step: gathering the rows on the host, checking them and making a buffer, while one gather
launch (inputs and targets together) costs a fraction of that. The data go to the device
once per ``fit`` and the shuffled order once per epoch.

Taught in notebooks/03_cpu_vs_gpu.
"""

from __future__ import annotations

import numpy as np

from .layers.dense_params import lanes_by_default, lanes_work_group


def gather_rows(data: np.ndarray, order: np.ndarray, first: int, rows: int) -> np.ndarray:
    """The numpy reference of the gather kernel (for the inputs and for the targets): rows
    ``order[first:first + rows]`` of ``data`` (n, cols)."""
    return data[order[first:first + rows]]


class DeviceBatches:
    """``inputs`` (n, n_in) and ``targets`` (n, n_out), device arrays or host arrays of
    finite numbers (copied once), served as mini-batches of rows in the order of
    :meth:`shuffle`. ``lanes``: gather in the lanes design (kernels/batches.cl); None: where
    the device's kernels take it (``dense_params.lanes_by_default``)."""

    def __init__(self, runtime, inputs, targets, lanes: bool | None = None):
        self.runtime = runtime
        self.inputs = runtime.to_device(inputs, "fit inputs", shape=(None, None), wait=True)
        self.targets = runtime.to_device(targets, "fit targets",
                                         shape=(self.inputs.shape[0], None), wait=True)
        self.order = None
        self._batches: dict = {}  # rows -> (inputs, targets) arrays, reused
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
        same two arrays as the last batch of as many rows (the queue runs in order, so they
        are overwritten only after the kernels already queued have read them)."""
        if self.order is None:
            raise RuntimeError("batch: call shuffle(order) first")
        if not (0 <= first and 1 <= rows and first + rows <= self.order.shape[0]):
            raise ValueError(f"batch: rows {first}..{first + rows} outside the order of "
                             f"{self.order.shape[0]}")
        if rows not in self._batches:
            self._batches[rows] = tuple(self.runtime.empty((rows, data.shape[1]))
                                        for data in (self.inputs, self.targets))
        x, t = self._batches[rows]
        grid, local = ((self._lanes, rows), (self._lanes, 1)) if self._lanes else ((rows,), None)
        self._gather(grid, local, self.inputs.data, self.targets.data,
                     self.order.data, np.int32(first), np.int32(rows), np.int32(x.shape[1]),
                     np.int32(t.shape[1]), x.data, t.data)
        return x, t
