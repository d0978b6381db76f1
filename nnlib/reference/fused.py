"""One fused training step of an MLP in numpy: what kernels/fused_mlp.cl computes per step.

Taught in notebooks/03_cpu_vs_gpu.
"""


from .dense import activate, activate_grad, cross_entropy, mse, output_gradient
from .optim import adam_step, sgd_step

__all__ = ["fused_mlp_step"]


def fused_mlp_step(weights, biases, state, x, t, acts, loss, rule, t_step=1, groups=1,
                   **hyper):
    """Forward, loss, backward and update of the Dense layers (``weights[l]`` (n_out, n_in),
    ``acts[l]`` their activations, softmax only last) on the batch (x, t), in place.

    ``rule`` is "sgd" (``state`` one velocity list per tensor: ``state["v"]``) or "adam"
    (``state["m"]``, ``state["v"]``), tensors ordered W0, b0, W1, b1, ...; ``hyper`` holds the
    optimizer's keyword arguments of :func:`sgd_step` / :func:`adam_step`. Returns the loss.
    ``groups`` > 1: the step split as the kernel splits it (fused_mlp_train with PARTIAL=1,
    then fused_mlp_apply): the gradient of each slice of the batch, then their sum.
    """
    if groups > 1:
        size = -(-len(x) // groups)
        parts = [slice(i, i + size) for i in range(0, len(x), size)]
        each = [_gradients(weights, biases, x[p], t[p], acts, loss, len(x[p]) / len(x))
                for p in parts]
        value = sum(v for v, _ in each)
        grads = [sum(g) for g in zip(*(g for _, g in each))]
    else:
        value, grads = _gradients(weights, biases, x, t, acts, loss)
    params = [p for pair in zip(weights, biases) for p in pair]
    for k, (p, g) in enumerate(zip(params, grads)):
        if rule == "sgd":
            p[...], state["v"][k][...] = sgd_step(p, g, state["v"][k], **hyper)
        else:
            p[...], state["m"][k][...], state["v"][k][...] = adam_step(
                p, g, state["m"][k], state["v"][k], t_step, **hyper)
    return value


def _gradients(weights, biases, x, t, acts, loss, share=1.0):
    """(loss, [dW0, db0, dW1, ...]) of the batch (x, t), both times ``share`` (a slice's
    share of the whole batch, whose mean the loss is)."""
    outs = [x]
    for w, b, act in zip(weights, biases, acts):
        outs.append(activate(outs[-1] @ w.T + b, act))
    y = outs[-1]
    value = share * (cross_entropy(y, t) if loss == "cross_entropy" else mse(y, t))
    dz = share * output_gradient(y, t, loss, acts[-1])
    grads = []
    for i in reversed(range(len(weights))):
        grads[:0] = [dz.T @ outs[i], dz.sum(axis=0)]
        if i:
            dz = (dz @ weights[i]) * activate_grad(outs[i], acts[i - 1])
    return value, grads
