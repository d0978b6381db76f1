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
  no zeroing first (a launch per tensor saved).
"""

from __future__ import annotations

from .activations import BY_NAME
from .layers.dense import Dense


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

    def zero_grad(self) -> None:
        """Zero the optimizer's gradients that the backward pass adds to."""
        for p in self._zeroed:
            p.zero_grad()

    def backward(self, dz) -> None:
        """Backward from the output layer's dL/dz (dL/dy where the chain is empty), through
        the chain, then layer by layer."""
        grad = dz
        for i in reversed(range(len(self.layers))):
            layer = self.layers[i]
            if i not in self.chain:
                grad = layer.backward(grad)
                continue
            below = self.layers[i - 1].activation if i - 1 in self.chain else "none"
            grad = layer.backward_preactivation(grad, below, input_grad=i > 0,
                                                accumulate=layer not in self.overwrite)
