"""Kernel fusion: a whole training step of a small MLP in one launch (kernels/fused_mlp.cl).

    trainer = nnlib.fused.FusedMLP(net, optimizer)      # net: Sequential of Dense layers
    history = trainer.fit(x, y, epochs=5, batch_size=1)  # same results as net.fit(...)

One work-group runs forward, loss gradient, backward and the SGD/Adam update of every layer,
for a run of consecutive mini-batches (by default a whole epoch) per launch; the weights and
optimizer state are the network's and the optimizer's own arrays (the network's flat
layout), updated in place, so ``net`` and ``optimizer`` go on with the layer-by-layer path
afterwards. ``Parameter.grad`` is not written (gradients never leave the kernel).

One work-group uses one core of a CPU (one compute unit of a GPU). On a GPU a mini-batch step
is therefore split over the compute units (:meth:`FusedMLP.groups`): each work-group leaves
the gradient of its slice of the batch, and a second launch sums them and updates (two
launches a step). It pays where launches dominate: small widths and small batches. A
work-group's slice of the batch must fit in local memory: :meth:`FusedMLP.local_bytes` says
how much a batch size needs.

Taught in notebooks/03_cpu_vs_gpu.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl

from .activations import BY_NAME
from .codes import ACTIVATIONS, LOSSES
from .layers.dense import Dense
from .loss import DeviceLoss
from .optim import SGD, Adam, AdamMini
from .runtime import check_shape, host_numbers
from .sizes import round_up

__all__ = ["FusedMLP", "NetworkDoesNotFit"]

TABLE = 8  # ints per layer in the network table (see kernels/fused_mlp.cl)
RULES = {"sgd": 0, "momentum": 1, "adam": 2}
DEFAULT_RUN = 4096  # samples per launch at most (a launch is one long kernel)
MIN_SLICE = 2  # samples a work-group takes at least where a step is split over work-groups
TILE_ROWS = 4  # RB in kernels/fused_mlp.cl: rows of a forward tile
GPU_TEAM = 8  # TEAM in kernels/fused_mlp.cl on a GPU: work-items sharing a forward tile
WEIGHT_RUN = 2  # WG in kernels/fused_mlp.cl: vectors of columns a work-item updates at once


class NetworkDoesNotFit(ValueError):
    """The network (or the batch) is too wide for one work-group's local memory."""


def _rule(optimizer) -> str:
    if isinstance(optimizer, AdamMini) or not isinstance(optimizer, (SGD, Adam)):
        raise TypeError(f"FusedMLP supports SGD, Adam and AdamW, not {type(optimizer).__name__}")
    if isinstance(optimizer, Adam):
        return "adam"
    return "momentum" if optimizer.momentum else "sgd"


class FusedMLP:
    """Trains ``net`` (a Sequential of Dense layers) with ``optimizer`` (SGD, Adam or AdamW over
    exactly ``net.parameters()``), one launch per run of steps.

    ``local_size``: work-items of the one work-group; by default one on a CPU (PoCL runs a
    work-group on one thread and vectorises the inner loops) and the kernel's preferred
    multiple, up to the widest layer, on a GPU. ``team``: work-items that share each
    forward dot product, reading a row's weights side by side (on a GPU neighbouring
    work-items must read neighbouring addresses); by default GPU_TEAM on a GPU, 1 (each
    work-item a tile of rows of its own) on a CPU.
    """

    def __init__(self, net, optimizer, local_size: int | None = None,
                 team: int | None = None):
        layers = net.layers
        if not all(isinstance(layer, Dense) for layer in layers):
            raise TypeError("FusedMLP needs a Sequential of Dense layers only")
        if any(layer.activation == "softmax" for layer in layers[:-1]):
            raise ValueError("FusedMLP: softmax is only supported on the last layer")
        keeps_z = [layer.activation for layer in layers if BY_NAME[layer.activation].needs == "z"]
        if keeps_z:
            raise ValueError(f"FusedMLP keeps only each layer's output y; the derivative of "
                             f"{keeps_z[0]} needs z: train with net.fit")
        if net.loss == "mse" and layers[-1].activation == "softmax":
            raise ValueError("mse after softmax is not supported; use loss='cross_entropy'")
        if len({id(layer) for layer in layers}) != len(layers):
            raise ValueError("FusedMLP: a layer appears twice in the network")
        params = net.parameters()
        if [id(p) for p in optimizer.params] != [id(p) for p in params]:
            raise ValueError("FusedMLP: the optimizer must hold exactly net.parameters(), "
                             "in that order")
        self.rule = _rule(optimizer)
        if not optimizer.fused:  # the kernel reads the network's one flat buffer
            raise ValueError("FusedMLP: the network's parameters are not one flat layout (a "
                             "layer of it was laid out by another model first)")
        self.net, self.optimizer, self.runtime = net, optimizer, net.runtime
        rt = self.runtime
        self.widths = [layers[0].n_in] + [layer.n_out for layer in layers]
        # a CPU runs the kernel as one work-item per work-group: its vectors are its own; a
        # GPU's work-items read a row's weights side by side (TEAM)
        if team is None:
            team = GPU_TEAM if rt.is_gpu else 1
        if not isinstance(team, (int, np.integer)) or team < 1:
            raise ValueError(f"team must be an integer >= 1, got {team!r}")
        self.team = int(team)
        options = (f"-DVW={rt.limits.explicit_vector_width}", f"-DRULE={RULES[self.rule]}",
                   f"-DTEAM={self.team}", f"-DWG={WEIGHT_RUN}")
        self._launch = rt.launcher("fused_mlp", "fused_mlp_train", options)
        self._options = options
        self._split = None  # (partial, apply) launchers, made when a batch is first split
        self.max_local_size = self._launch.work_group_size
        if local_size is None:
            if rt.is_gpu:
                local_size = min(self.max_local_size, round_up(max(self.widths),
                                                               self._launch.work_group_multiple))
            else:
                local_size = 1
        if not isinstance(local_size, (int, np.integer)) or not \
                1 <= local_size <= self.max_local_size:
            raise ValueError(f"local_size must be an integer in [1, {self.max_local_size}] "
                             f"on this device, got {local_size!r}")
        self.local_size = int(local_size)
        self._tables: dict = {}

    def __repr__(self):
        return (f"FusedMLP({'-'.join(map(str, self.widths))}, {self.rule}, "
                f"local_size={self.local_size})")

    def groups(self, batch: int) -> int:
        """Work-groups a step of ``batch`` samples is split over by default. On a GPU, one
        per compute unit, each with a slice of at least MIN_SLICE samples: one work-group
        would leave all multiprocessors but one idle. On a CPU, one: the whole step, updates
        included, and a run of steps per launch on one core. Split, each group leaves the
        gradient of its slice and a second launch sums them and updates: two launches a
        step, and on PoCL the second core often joins a short kernel only after it is over,
        so the split step is slower than the whole one. Pass ``groups`` to :meth:`fit` to
        split anyway."""
        return self.split_groups(batch) if self.runtime.is_gpu else 1

    def split_groups(self, batch: int) -> int:
        """Work-groups a step of ``batch`` samples splits into over the compute units: one
        per unit, each with a slice of at least MIN_SLICE samples."""
        return max(1, min(self.runtime.limits.compute_units, batch // MIN_SLICE))

    # ------------------------------------------------------------------ layout
    def _layout(self, batch: int) -> tuple:
        """(network table, local floats) for ``batch`` samples per step."""
        offsets = self.optimizer.layout.offsets
        acts, a = [], 0
        for n in self.widths:
            acts.append(a)
            a += batch * n
        wide = max(self.widths)
        table = []
        for i, layer in enumerate(self.net.layers):
            table += [offsets[2 * i], offsets[2 * i + 1], layer.n_in, layer.n_out,
                      ACTIVATIONS[layer.activation], acts[i], acts[i + 1], 0]
        scratch = a + 2 * batch * wide  # the forward's partial sums, on a GPU
        table += [a, a + batch * wide, scratch]
        return np.array(table, np.int32), scratch + (
            TILE_ROWS * self.local_size if self.team > 1 else 0)

    def local_bytes(self, batch: int = 1) -> int:
        """Local memory one work-group needs for steps of ``batch`` samples (its slice)."""
        return 4 * self._layout(self._split_batch(batch)[1])[1]

    def _split_batch(self, batch: int, groups: int | None = None) -> tuple:
        """(groups, samples per group) of a step of ``batch`` samples, no group empty."""
        slice_ = -(-batch // (self.groups(batch) if groups is None else groups))
        return -(-batch // slice_), slice_

    def check_batch(self, batch: int) -> None:
        """Raise :class:`NetworkDoesNotFit` (saying which batch fits) if a step of ``batch``
        samples, split as :meth:`groups` says, does not fit in a work-group's local memory."""
        self._table(batch, self._split_batch(batch)[1])

    def _table(self, batch: int, slice_: int):
        if slice_ not in self._tables:
            table, floats = self._layout(slice_)
            limit = self.runtime.local_mem_size
            if 4 * floats > limit:
                fits = max((b for b in range(1, batch) if self.local_bytes(b) <= limit),
                           default=0)
                raise NetworkDoesNotFit(
                    f"FusedMLP: widths {self.widths} at batch {batch} need "
                    f"{4 * floats} bytes of local memory, the device has {limit}"
                    + (f"; batch {fits} fits" if fits else
                       "; the network is too wide for one work-group: use net.fit"))
            self._tables[slice_] = (self.runtime.to_device(table, "table", dtype=np.int32),
                                    cl.LocalMemory(4 * floats))
        return self._tables[slice_]

    # ------------------------------------------------------------------ training
    def _corrections(self, steps: int) -> np.ndarray:
        """Per step (step_size, sqrt(1 - beta2^t)) for Adam, in float64 as the optimizer."""
        opt = self.optimizer
        out = np.ones((steps, 2), np.float64)
        if self.rule == "adam":
            t = opt.steps + 1 + np.arange(steps)
            out[:, 0] = opt.lr / (1.0 - opt.beta1 ** t)
            out[:, 1] = np.sqrt(1.0 - opt.beta2 ** t)
        return out.astype(np.float32)

    def run(self, x, targets, order, batch: int, losses, offset: int = 0,
            groups: int | None = None) -> None:
        """Enqueue ``len(order) // batch`` steps on device data: step s trains on rows
        ``order[s*batch:(s+1)*batch]`` of ``x`` (n, n_in) and ``targets`` (n, n_out) and
        writes their losses to ``losses[offset + s*batch + b]``, each step split over
        ``groups`` work-groups (default :meth:`groups`). Waits for nothing."""
        rt, opt = self.runtime, self.optimizer
        steps = len(order) // batch
        groups, slice_ = self._split_batch(batch, groups)
        table, local = self._table(batch, slice_)
        run = steps if groups > 1 else max(1, DEFAULT_RUN // batch)
        for first in range(0, steps, run):
            count = min(steps - first, run)
            part = np.ascontiguousarray(order[first * batch:(first + count) * batch], np.int32)
            rows = rt.to_device(part, "order", dtype=np.int32)
            corr = rt.to_device(self._corrections(count), "corrections")
            launch = self._enqueue if groups == 1 else self._enqueue_split
            launch(x, targets, rows, batch, count, corr, losses, offset + first * batch,
                   table, local, groups, slice_)
            opt.steps += count

    def _args(self) -> tuple:
        """(state1, state2, hyper-parameter arguments) of both kernels."""
        opt = self.optimizer
        state = [s.flat for s in opt._buffers().values() if s]
        state1 = state[0] if state else opt.layout.grad  # unused without state
        state2 = state[1] if len(state) > 1 else state1
        adam = self.rule == "adam"
        f32, i32 = np.float32, np.int32
        hyper = (f32(opt.lr), f32(getattr(opt, "momentum", 0.0)),
                 i32(getattr(opt, "nesterov", 0)), f32(opt.weight_decay),
                 f32(opt.beta1 if adam else 0.0), f32(opt.beta2 if adam else 0.0),
                 f32(opt.eps if adam else 0.0), i32(getattr(opt, "decoupled", False)))
        return state1, state2, hyper

    def _train_args(self, batch: int) -> tuple:
        divisor = batch * (self.widths[-1] if self.net.loss == "mse" else 1)
        return (np.int32(LOSSES[self.net.loss]), np.float32(1.0 / divisor))

    def _enqueue(self, x, targets, rows, batch, count, corr, losses, offset, table, local,
                 groups, slice_):
        opt = self.optimizer
        state1, state2, hyper = self._args()
        i32 = np.int32
        self._launch(
            (self.local_size,), (self.local_size,), opt.layout.value.data, state1.data,
            state2.data, table.data, i32(len(self.net.layers)), x.data, targets.data,
            rows.data, i32(batch), i32(0), i32(count), i32(batch), opt.layout.grad.data,
            i32(0), *self._train_args(batch), *hyper, corr.data, losses.data, i32(offset),
            opt._skip.data, local)

    def _enqueue_split(self, x, targets, rows, batch, count, corr, losses, offset, table,
                       local, groups, slice_):
        """Two launches a step: ``groups`` work-groups each leave the gradient of their
        slice of the batch in a buffer of ``groups`` gradients; fused_mlp_apply sums them
        and updates."""
        rt, opt = self.runtime, self.optimizer
        if self._split is None:
            self._split = (
                rt.launcher("fused_mlp", "fused_mlp_train", self._options + ("-DPARTIAL=1",)),
                rt.launcher("fused_mlp", "fused_mlp_apply", self._options))
        partial, apply = self._split
        n = opt.layout.value.shape[0]
        # fused_mlp_apply strides over the parameters: one work-group of the kernel's
        # preferred multiple per compute unit (a work-group per few parameters would cost
        # PoCL more than the update itself)
        wg = apply.work_group_multiple
        spread = wg * rt.limits.compute_units
        grads, flags = rt.empty((groups * n,)), rt.empty((groups,), dtype=np.int32)
        state1, state2, hyper = self._args()
        i32 = np.int32
        train = self._train_args(batch)
        for s in range(count):
            partial((groups * self.local_size,), (self.local_size,), opt.layout.value.data,
                    state1.data, state2.data, table.data, i32(len(self.net.layers)), x.data,
                    targets.data, rows.data, i32(batch), i32(s), i32(1), i32(slice_),
                    grads.data, i32(n), *train, *hyper, corr.data, losses.data, i32(offset),
                    flags.data, local)
            apply((spread,), (wg,), opt.layout.value.data, state1.data, state2.data,
                  grads.data, i32(groups), i32(n), flags.data, opt._skip.data, i32(s), *hyper,
                  corr.data)

    def fit(self, x, y, epochs: int = 10, batch_size: int = 1, seed: int = 0,
            groups: int | None = None) -> dict:
        """Like ``Sequential.fit`` (the same shuffling from ``seed``, the same steps): returns
        ``{"loss": [...]}``, the mean training loss of each epoch. The data go to the device
        once; each epoch is one launch per DEFAULT_RUN samples (and one for a last, smaller
        batch), or two launches a step where a step is split over ``groups`` work-groups
        (default :meth:`groups`)."""
        net, rt = self.net, self.runtime
        x = host_numbers(x, "fit inputs")  # not cast here: complex inputs are refused, not cut
        n = len(x)
        if len(y) != n:
            raise ValueError(f"fit: {n} inputs but {len(y)} targets")
        if n == 0 or not isinstance(batch_size, (int, np.integer)) or batch_size < 1 \
                or epochs < 0 or groups is not None and not 1 <= groups <= batch_size:
            raise ValueError("fit: needs data, batch_size >= 1, epochs >= 0 and groups in "
                             "[1, batch_size]")
        xd = rt.to_device(x, "fit inputs", shape=(None, self.widths[0]))
        targets = net.targets(np.asarray(y), n)
        rng = np.random.default_rng(seed)
        losses = rt.empty((n,))
        per_sample = self.widths[-1] if net.loss == "mse" else 1
        history = {"loss": []}
        for _ in range(epochs):
            skipped_before = self.optimizer.skipped_steps
            self.epoch(xd, targets, rng.permutation(n), batch_size, losses, groups)
            history["loss"].append(float(DeviceLoss(losses, n * per_sample)))
            skipped = self.optimizer.skipped_steps - skipped_before
            if skipped:
                raise FloatingPointError(
                    f"fit: {skipped} steps of epoch {len(history['loss'])} were skipped because "
                    "the loss gradient held NaN or infinity; lower the learning rate")
        return history

    def epoch(self, x, targets, order, batch: int, losses, groups: int | None = None) -> None:
        """Enqueue an epoch on device data: steps of ``batch`` rows of ``x`` (n, n_in) and
        ``targets`` (n, n_out) taken in ``order``, then one step of the rows left over; the
        loss of the sample at place i of the order goes to ``losses[i]``. Waits for nothing
        (``Sequential.fit``'s epoch on the fused path)."""
        check_shape("fit inputs", x.shape, (None, self.widths[0]))
        order = np.asarray(order, np.int32)
        n = len(order)
        full = n // batch * batch
        if full:
            self.run(x, targets, order[:full], batch, losses, groups=groups)
        if full < n:
            self.run(x, targets, order[full:], n - full, losses, full,
                     None if groups is None else min(groups, n - full))

    def step(self, x, y, groups: int | None = None) -> DeviceLoss:
        """One training step on the batch (x, y) in one launch, or two if split over
        ``groups`` work-groups (plus the copies of x and y), like ``Sequential.train_step``;
        returns the loss on the device."""
        rt = self.runtime
        xd = rt.to_device(x, "step inputs", shape=(None, self.widths[0]))
        batch = xd.shape[0]
        if batch == 0:
            raise ValueError("step: batch is empty")
        targets = self.net.targets(y, batch)
        losses = rt.empty((batch,))
        self.run(xd, targets, np.arange(batch, dtype=np.int32), batch, losses, groups=groups)
        divisor = batch * (self.widths[-1] if self.net.loss == "mse" else 1)
        return DeviceLoss(losses, divisor)

