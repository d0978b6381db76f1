"""Recorded training steps: ``Sequential.train_step`` records the launches of a step's
forward pass, output gradient and backward pass once, and enqueues them again, with the
same arguments, in the steps that follow (what CUDA Graphs do on a GPU, on the host side).

In a fit every step of one batch size launches the same kernels with the same arguments: the
same batch arrays (refilled by the gather kernel, nnlib/batches.py, and kept by the network
from one fit to the next), the same parameter and gradient buffers, the same activations
(kept by the recording). Working them out again in Python costs several times the enqueue
itself; a replay is one ``set_args`` and one enqueue per launch. What changes from step to
step (the batch's rows, the loss's offset, the optimizer's flags and bias corrections) stays
outside the recording.

A step is replayed only where that gives the same launches: the network is all
:class:`~nnlib.layers.dense.Dense` layers, inputs and targets are device arrays (host data
are uploaded into a new buffer each step), and nothing recorded changed: the layers, the
parameters' buffers, the backward plan, the kernel folder (``nnlib.use_kernels``). A step is
recorded the second time its key is seen (the first builds and tunes the kernels), and a
recording during which anything but a kernel launch was enqueued (a fill, a copy, a tuning
search) is thrown away and that key run as before.

Taught in notebooks/03_cpu_vs_gpu.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from . import _fast_array
from .environment import check_not_forked
from .layers.dense import Dense

MAX_RECORDINGS = 4  # kept per network: a fit has two batch sizes (full and last)
MAX_SEEN = 64  # keys seen once, remembered for their second step


class Recording:
    """The launches one thread enqueues while it is in ``rt.recordings``: (kernel, global
    size, local size, arguments) each; ``spoiled`` once anything else was enqueued or
    uploaded on the runtime (``Runtime.not_a_launch``), or a launch waited for events (a
    replay does not know them)."""

    def __init__(self):
        self.launches: list = []
        self.spoiled = False

    def add(self, kernel, global_size, local_size, args, waits: bool = False) -> None:
        self.launches.append((kernel, global_size, local_size, args))
        self.spoiled |= waits


class StepReplay:
    """The recorded steps of one network; :meth:`step` runs (or replays) one."""

    def __init__(self, net):
        self.net = net
        # key -> (launches, output, target, the layers' kept arrays, the key's objects,
        # the head's launch index and loss arguments or None)
        self.recordings: OrderedDict = OrderedDict()
        self.seen: OrderedDict = OrderedDict()  # key -> True once its step has run
        self.refused: set = set()  # keys whose recording was spoiled
        self.replays = 0  # steps replayed so far

    def step(self, x, y, backward, loss_buf, offset: int, work) -> tuple:
        """(output, target, losses) of a training step of ``x`` and ``y`` (as given to
        train_step) with ``backward`` (its FusedBackward): the recorded launches enqueued
        again, else ``work()`` (which enqueues them and returns the three), recorded the
        second time its key is seen. ``losses`` is the array the step's output head stored
        each sample's loss into (``loss_buf`` from ``offset``, a new one if None), None
        without a head."""
        key = self.key(x, y, backward)
        if key in self.recordings:
            return self._replay(key, loss_buf, offset)
        if not self._record_now(key):
            return work()
        recording = self.net.runtime.recordings[threading.get_ident()] = Recording()
        try:
            out, target, losses = work()
        finally:
            self.net.runtime.recordings.pop(threading.get_ident(), None)
        self._keep(key, recording, (x, y, backward), out, target, losses is not None)
        return out, target, losses

    def key(self, x, y, backward) -> tuple | None:
        """What the step's launches depend on, or None where it is not replayed."""
        net = self.net
        if not (_device_input(x) and _device_input(y)):
            return None
        layers = net.layers
        if not all(type(layer) is Dense for layer in layers):
            return None
        rt = net.runtime
        return (id(x.base_data), x.shape, id(y.base_data), y.shape, id(backward),
                tuple(map(id, layers)), rt.kernel_folder, rt.kernel_topics,
                tuple((id(p.value), id(p.grad)) for p in net.parameters()))

    def _replay(self, key, loss_buf, offset: int) -> tuple:
        launches, out, target, saved, _, head = self.recordings[key]
        check_not_forked()
        rt = self.net.runtime
        losses = None
        if head is not None:
            losses = rt.empty((out.shape[0],)) if loss_buf is None else loss_buf
        queue = rt.queue
        with rt.lock:
            if head is not None:  # the head's launch, given this step's loss array and offset
                at, (buf_arg, offset_arg) = head
                args = launches[at][3]  # a list, which _keep made it
                args[buf_arg], args[offset_arg] = losses.data, np.int32(offset)
            for kernel, global_size, local_size, args in launches:
                kernel.set_args(*args)
                cl.enqueue_nd_range_kernel(queue, kernel, global_size, local_size)
        for layer, kept in zip(self.net.layers, saved):
            layer._saved = kept  # as the forward pass leaves them, for a later backward
        self.replays += 1
        return out, target, losses

    def _record_now(self, key) -> bool:
        """Whether the step of ``key`` about to run is recorded: the second time the key is
        seen, unless its recording was spoiled before."""
        if key is None or key in self.refused:
            return False
        if key in self.seen:
            return True
        self.seen[key] = True
        while len(self.seen) > MAX_SEEN:
            self.seen.popitem(last=False)
        return False

    def _keep(self, key, recording: Recording, objects: tuple, out, target,
              headed: bool) -> None:
        """Keep ``recording`` as the step of ``key`` (unless spoiled), with the arrays the
        step left (its output and target, what each layer kept for its backward) and
        ``objects`` (x, y, backward) and the parameters' arrays, whose ids the key holds:
        kept alive, so that no other object takes their ids. ``headed``: the step's output
        head stored the losses, in the one launch of its kernel, whose loss arguments each
        replay sets anew."""
        self.seen.pop(key, None)
        head = None
        if headed:
            backward = objects[2]
            at = [i for i, launch in enumerate(recording.launches)
                  if launch[0] is backward.head.kernel]
            recording.spoiled |= len(at) != 1
            if len(at) == 1:
                kernel, global_size, local_size, args = recording.launches[at[0]]
                recording.launches[at[0]] = (kernel, global_size, local_size, list(args))
                head = (at[0], backward.head.loss_args)
        if recording.spoiled or not recording.launches:
            if len(self.refused) >= MAX_SEEN:
                self.refused.clear()
            self.refused.add(key)
            return
        net = self.net
        saved = [layer._saved for layer in net.layers]
        anchors = (objects, [(p.value, p.grad) for p in net.parameters()])
        self.recordings[key] = (recording.launches, out, target, saved, anchors, head)
        while len(self.recordings) > MAX_RECORDINGS:
            self.recordings.popitem(last=False)


def _device_input(a) -> bool:
    """Whether ``a`` reaches the kernels as it is: a contiguous float32 device array at
    offset 0 (``Runtime.to_device`` passes it on without a copy)."""
    return isinstance(a, cla.Array) and a.offset == 0 and a.dtype == np.float32 \
        and _fast_array.is_c_contiguous(a)
