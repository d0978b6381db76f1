"""One fused training step of an MLP in numpy: what kernels/fused_mlp.cl computes per step.

Taught in notebooks/03_cpu_vs_gpu.
"""

import numpy as np

from .dense import activate, activate_grad, cross_entropy, mse, output_gradient
from .optim import adam_step, sgd_step

__all__ = ["fused_mlp_step"]


def fused_mlp_step(weights, biases, state, x, t, acts, loss, rule, t_step=1, **hyper):
    """Forward, loss, backward and update of the Dense layers (``weights[l]`` (n_out, n_in),
    ``acts[l]`` their activations, softmax only last) on the batch (x, t), in place.

    ``rule`` is "sgd" (``state`` one velocity list per tensor: ``state["v"]``) or "adam"
    (``state["m"]``, ``state["v"]``), tensors ordered W0, b0, W1, b1, ...; ``hyper`` holds the
    optimizer's keyword arguments of :func:`sgd_step` / :func:`adam_step`. Returns the loss.
    """
    outs = [x]
    for w, b, act in zip(weights, biases, acts):
        outs.append(activate(outs[-1] @ w.T + b, act))
    y = outs[-1]
    value = cross_entropy(y, t) if loss == "cross_entropy" else mse(y, t)
    dz = output_gradient(y, t, loss, acts[-1])
    grads = []
    for i in reversed(range(len(weights))):
        grads[:0] = [dz.T @ outs[i], dz.sum(axis=0)]
        if i:
            dz = (dz @ weights[i]) * activate_grad(outs[i], acts[i - 1])
    params = [p for pair in zip(weights, biases) for p in pair]
    for k, (p, g) in enumerate(zip(params, grads)):
        if rule == "sgd":
            p[...], state["v"][k][...] = sgd_step(p, g, state["v"][k], **hyper)
        else:
            p[...], state["m"][k][...], state["v"][k][...] = adam_step(
                p, g, state["m"][k], state["v"][k], t_step, **hyper)
    return value
