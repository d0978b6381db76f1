"""Which path ``Sequential.fit`` trains on: the fused kernel (:mod:`nnlib.fused`, one launch
per run of steps) or layer by layer (``Sequential.train_step``, 8 launches a step of
notebook 02's network).

``fit(fused=None)``, the default, takes the fused kernel when the network qualifies and it is
the faster path for that batch size on that device:

* **qualifies**: :class:`~nnlib.fused.FusedMLP` accepts the network and the optimizer (Dense
  layers only, softmax last if anywhere, SGD, Adam or AdamW over exactly the network's
  parameters) and a step of the batch fits in a work-group's local memory
  (:meth:`FusedMLP.check_batch`);
* **faster**: the first time a network shape (widths, loss, update rule) and batch size are
  seen on a device, :func:`nnlib.tuning.tuned` times a short run of steps each way on
  scratch copies of the network and optimizer (the caller's weights and state are not
  touched; the layer path replays its steps after the first two, as in a fit) and keeps
  the faster path, in memory and in the tuning cache with the kernel
  parameters (searched again when kernels/fused_mlp.cl changes). With ``NNLIB_TUNE=0``
  (tests, the notebook checks) nothing is timed and a qualifying network takes the fused
  kernel.

``fused=False`` keeps the layer path; ``fused=True`` takes the fused kernel or raises the
error that says why the network does not qualify.

Taught in notebooks/01_dense_kernels, notebooks/02_train_fractal_classifier.
"""

from __future__ import annotations

import time

import numpy as np

from . import tuning
from .batches import DeviceBatches
from .fused import FusedMLP

PATHS = [{"path": "fused"}, {"path": "layers"}]  # what the measured rule chooses between
TRIAL_SAMPLES = 256  # samples of the timed run of steps: 2 to TRIAL_STEPS steps
TRIAL_STEPS = 16
# what a trial times, stored with the choice: one stored for another trial (before the
# layer path replayed its steps, nnlib.step_replay) is measured again
TRIAL = {"layers": "train_step, replayed"}


def trainer(net, optimizer, batch: int, fused: bool | None) -> FusedMLP | None:
    """The fused trainer ``net.fit`` uses for steps of ``batch`` samples, or None for the
    layer path (``fused``: None chooses, False never, True always or the reason why not)."""
    if fused is False:
        return None
    try:
        chosen = FusedMLP(net, optimizer)
        chosen.check_batch(batch)
    except (TypeError, ValueError) as err:
        if fused:
            raise type(err)(f"fit(fused=True): the network does not qualify for the fused "
                            f"kernel: {err}") from err
        return None
    return chosen if fused or faster_path(chosen, batch) == "fused" else None


def faster_path(chosen: FusedMLP, batch: int) -> str:
    """"fused" or "layers": the measured choice for ``chosen``'s network at ``batch``."""
    net = chosen.net
    shape = f"{'-'.join(map(str, chosen.widths))}/{net.loss}/{chosen.rule}/b{batch}"
    trial = None

    def measure(params):
        nonlocal trial
        if trial is None:
            trial = Trial(chosen, batch)
        return trial.seconds(params["path"])
    return tuning.tuned(net.runtime, "fused_mlp.path", shape, PATHS, measure, PATHS[0],
                        problem=TRIAL)["path"]


class Trial:
    """Scratch copies of a fused trainer's network and optimizer and a short run of steps
    on random data, timed on either path."""

    def __init__(self, chosen: FusedMLP, batch: int):
        net, opt, rt = chosen.net, chosen.optimizer, chosen.runtime
        self.net = type(net)([type(layer)(**layer.config(), runtime=rt)
                              for layer in net.layers], loss=net.loss)
        self.optimizer = type(opt)(self.net.parameters(), **opt.config())
        self.fused = FusedMLP(self.net, self.optimizer, local_size=chosen.local_size)
        self.batch, self.steps = batch, max(2, min(TRIAL_STEPS, TRIAL_SAMPLES // batch))
        n, n_in, n_out = self.steps * batch, chosen.widths[0], chosen.widths[-1]
        rng = np.random.default_rng(0)
        targets = np.eye(n_out, dtype=np.float32)[rng.integers(0, n_out, n)]
        self.data = DeviceBatches(rt, rng.standard_normal((n, n_in)).astype(np.float32),
                                  targets)
        self.order = np.arange(n)
        self.data.shuffle(self.order)
        self.losses = rt.empty((n,))
        self.warm: set = set()

    def run(self, path: str) -> None:
        """Enqueue the run of steps on ``path``."""
        if path == "fused":
            self.fused.epoch(self.data.inputs, self.data.targets, self.order, self.batch,
                             self.losses)
            return
        for s in range(self.steps):
            first = s * self.batch
            self.net.train_step(*self.data.batch(first, self.batch), self.optimizer,
                                self.losses, first)

    def seconds(self, path: str) -> float:
        """Seconds of the run on ``path``, after one run to warm it (kernels built, the layer
        kernels' parameters tuned, buffers pooled)."""
        finish = self.net.runtime.queue.finish
        if path not in self.warm:
            self.run(path)
            finish()
            self.warm.add(path)
        start = time.perf_counter()
        self.run(path)
        finish()
        return time.perf_counter() - start
