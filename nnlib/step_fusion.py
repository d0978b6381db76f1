"""The shortcuts of ``Sequential.train_step``: the same gradients as zero_grad followed by
the layer-by-layer backward pass, with fewer launches (taught in notebooks/03_cpu_vs_gpu).

* the **pre-activation chain**: from the last layer down through the Dense layers below it
  (not past another kind of layer or an activation whose derivative is not written with its
  output y: softmax, silu) each layer's backward starts from dL/dz, and
  the input-gradient kernel of one also multiplies by the activation derivative of the one
  below, so no separate activation-backward launch runs between them;
* the first layer computes no input gradient;
* **no zeroing**: a layer of the chain whose parameters the optimizer holds (and that
  appears once in the network) writes its gradients instead of adding to them, so they need
  no zeroing first (a launch per tensor saved);
* the **output head**: a last Dense layer of at most HEAD_MAX_OUT outputs at the top of the
  chain (a classifier's) runs its forward, the loss's gradient and its backward in one
  launch (kernels/head.cl, :class:`OutputHead`) instead of four, where a batch's work is at
  most HEAD_MAX_WORK multiply-adds a product: one work-group does it all.
"""

from __future__ import annotations

import numpy as np

from .activations import BY_NAME
from .codes import ACTIVATIONS
from .layers.dense import Dense
from .sizes import vector_width

HEAD_MAX_OUT = 16  # outputs of a head layer: kernels/head.cl is built for each number
HEAD_MAX_WORK = 1 << 18  # rows * n_in * n_out of a step the head's one work-group takes
HEAD_GROUP = 256  # work-items of that work-group (fewer where the device allows fewer)
HEAD_TOPICS = ("head", "dense", "loss", "activation")  # not where a student's replace them


def preactivation_chain(layers: list) -> list:
    """Indices of the layers whose backward starts from dL/dz (before their activation):
    the last layer (unless its activation's derivative needs z: the loss gradient kernel
    has only y), then each Dense layer below whose activation's derivative is written with y
    (the input of the layer above), down to the first that is not. Between two of them one
    kernel gives the lower layer's dL/dz."""
    last = BY_NAME.get(getattr(layers[-1], "activation", "none"))
    if last is not None and last.needs == "z":
        return []
    chain = [len(layers) - 1]
    for i in range(len(layers) - 2, -1, -1):
        layer = layers[i]
        if not isinstance(layer, Dense) or BY_NAME[layer.activation].needs != "y":
            break
        chain.append(i)
    return chain


class FusedBackward:
    """The backward pass of one training step of ``layers`` with ``optimizer``: made for
    each optimizer (and its list of parameters) a network trains with, it zeroes only the
    gradients the pass adds to and runs the pass from the output layer's dL/dz."""

    def __init__(self, layers: list, optimizer):
        self.layers = layers
        self.chain = preactivation_chain(layers)
        owned = {id(p) for p in optimizer.params}
        self.overwrite = [layers[i] for i in self.chain if layers.count(layers[i]) == 1
                          and all(id(p) in owned for p in layers[i].parameters())]
        written = {id(p) for layer in self.overwrite for p in layer.parameters()}
        self._zeroed = [p for p in optimizer.params if id(p) not in written]
        self.head = OutputHead.of(self) if self.chain else None

    def zero_grad(self) -> None:
        """Zero the optimizer's gradients that the backward pass adds to."""
        for p in self._zeroed:
            p.zero_grad()

    def backward(self, dz, top: int | None = None) -> None:
        """Backward from the dL/dz (dL/dy where the chain is empty) of layer ``top`` (default:
        the output layer), through the chain, then layer by layer."""
        grad = dz
        top = len(self.layers) - 1 if top is None else top
        for i in reversed(range(top + 1)):
            layer = self.layers[i]
            if i not in self.chain:
                grad = layer.backward(grad)
                continue
            below = self.layers[i - 1].activation if i - 1 in self.chain else "none"
            grad = layer.backward_preactivation(grad, below, input_grad=i > 0,
                                                accumulate=layer not in self.overwrite)


def head_vector_width(rt) -> int:
    """The columns a work-item of kernels/head.cl's second phase takes: one on a compiler
    that vectorises across work-items (Intel's CPU runtime ran the head step at vectors of
    16 several times slower than scalar) or on a GPU, else the device's preferred width."""
    limits = rt.limits
    return 1 if limits.vectorises_across_work_items else vector_width(limits.vector_width)


class OutputHead:
    """The last layer's step of a :class:`FusedBackward` in one launch (kernels/head.cl):
    made by :meth:`of` where the layer qualifies; :meth:`step` runs it for a batch."""

    def __init__(self, fused: FusedBackward):
        layers = fused.layers
        self.layer = layers[-1]
        below = len(layers) - 2
        self.below = layers[below].activation if below in fused.chain else "none"
        self.want_dx = below >= 0
        self.accumulate = self.layer not in fused.overwrite
        rt = self.layer.runtime
        self._launch = rt.launcher("head", "head_step", (
            f"-DN_OUT={self.layer.n_out}", f"-DVW={head_vector_width(rt)}"))
        self._local = (min(HEAD_GROUP, self._launch.work_group_size),)

    @classmethod
    def of(cls, fused: FusedBackward) -> "OutputHead | None":
        """The head of ``fused``'s step, or None where its last layer does not qualify: a
        Dense layer of the blocked design with at most HEAD_MAX_OUT outputs at the top of
        the chain, appearing once, on a runtime that builds HEAD_TOPICS from kernels/."""
        layer = fused.layers[-1]
        rt = layer.runtime
        if not (fused.chain and fused.chain[0] == len(fused.layers) - 1
                and type(layer) is Dense and layer.variant == "blocked"
                and layer.n_out <= HEAD_MAX_OUT and fused.layers.count(layer) == 1):
            return None
        if rt.kernel_folder is not None and (
                rt.kernel_topics is None or set(HEAD_TOPICS) & set(rt.kernel_topics)):
            return None
        return cls(fused)

    @property
    def kernel(self):
        """The head_step kernel object its launches use (a recorded step's, to find it)."""
        return self._launch.kernel

    @property
    def loss_args(self) -> tuple:
        """Positions of head_step's per-sample loss buffer and offset among its arguments:
        the two a replayed step (nnlib/step_replay.py) sets anew each time."""
        names = [a.name for a in self._launch.signature.args]
        return names.index("losses"), names.index("loss_offset")

    def takes(self, rows: int) -> bool:
        """Whether a batch of ``rows`` is small enough for the head's one work-group."""
        return rows * self.layer.n_in * self.layer.n_out <= HEAD_MAX_WORK

    def step(self, x, target, loss, rows_buf, offset: int = 0) -> tuple:
        """Enqueue the head's step on ``x`` (the last layer's input, a device array) against
        ``target`` with ``loss`` (a :class:`~nnlib.loss.Loss`), each sample's loss stored
        into ``rows_buf[offset:]`` as :meth:`~nnlib.loss.Loss.rows` stores it; returns
        (y, dx), the output and the layer below's dL/dz (dL/dx where its activation is not
        in the chain; None for a network of one layer). The layer keeps (x, y, y) as its
        forward would."""
        layer = self.layer
        rows = x.shape[0]
        rt = layer.runtime
        y, dz = rt.empty((rows, layer.n_out)), rt.empty((rows, layer.n_out))
        dx = rt.empty(x.shape) if self.want_dx else None
        self._launch(self._local, self._local, x.data, layer.weight.value.data,
                     layer.bias.value.data, target.data, y.data, dz.data,
                     (dx if dx is not None else dz).data, layer.weight.grad.data,
                     layer.bias.grad.data, rows_buf.data, np.int32(offset),
                     np.int32(rows), np.int32(layer.n_in),
                     np.float32(1.0 / loss.divisor(y)),
                     np.int32(loss.code), np.int32(layer.act), np.int32(ACTIVATIONS[self.below]),
                     np.int32(self.want_dx), np.int32(self.accumulate))
        layer.save_for_backward(x, y, y)
        return y, dx
