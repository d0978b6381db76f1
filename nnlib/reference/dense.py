"""Dense layer, activations and losses in numpy.

Taught in notebooks/01_dense_kernels.
"""

import numpy as np

from ..activations import activation, softmax

__all__ = ["activate", "activate_grad", "derivative", "softmax", "dense_forward",
           "dense_backward", "mse", "cross_entropy", "loss_rows", "output_gradient",
           "head_step", "vector_add", "vector_scale"]


def vector_add(a, b):
    return a + b


def vector_scale(a, alpha):
    return alpha * a


def activate(z, act: str):
    """y = act(z) (softmax along the last axis), from the activation table."""
    return activation(act).forward(z)


def activate_grad(s, act: str):
    """d act/dz, elementwise activations only, written with s: the output y, or the
    pre-activation z for an activation whose derivative needs z (the table's ``needs``)."""
    entry = activation(act)
    if entry.derivative is None:
        raise ValueError(f"{act}'s derivative is not elementwise")
    return entry.derivative(s)


def derivative(act: str, y, z=None):
    """act'(z) from the output y, or from z where the table says the derivative needs it."""
    if activation(act).needs == "z":
        if z is None:
            raise ValueError(f"{act}'s derivative needs z, the pre-activation")
        return activate_grad(z, act)
    return activate_grad(y, act)


def dense_forward(x, w, b, act: str = "none"):
    """y = act(x @ w.T + b) for x (batch, n_in), w (n_out, n_in), b (n_out,)."""
    return activate(x @ w.T + b, act)


def dense_backward(x, w, y, dy, act: str = "none", z=None):
    """(dx, dw, db) from dL/dy of ``y = dense_forward(x, w, b, act)``; ``z`` (x w^T + b) is
    needed for an activation whose derivative needs it."""
    if act == "softmax":
        dz = y * (dy - (dy * y).sum(axis=-1, keepdims=True))
    else:
        dz = dy * derivative(act, y, z)
    return dz @ w, dz.T @ x, dz.sum(axis=0)


def mse(y, t):
    return np.mean((y - t) ** 2)


def cross_entropy(p, t):
    """Mean over the batch of -sum t log p, for probabilities p and one-hot (or soft) t."""
    return -np.sum(t * np.log(np.maximum(p, 1e-12))) / p.shape[0]


def loss_rows(y, t, loss: str):
    """Each sample's summed loss (a row of y against t), as kernels/loss.cl's loss_rows
    stores it: the mean losses above are their sum over the batch divided by the rows
    (cross-entropy) or by every element (MSE)."""
    if loss == "cross_entropy":
        return -np.sum(t * np.log(np.maximum(y, 1e-12)), axis=1)
    return np.sum((y - t) ** 2, axis=1)


def output_gradient(y, t, loss: str, act: str, z=None):
    """dL/dz of the output layer: MSE through any elementwise activation (``z`` for one whose
    derivative needs it), or CE + softmax."""
    if loss == "cross_entropy":
        return (y - t) / y.shape[0]
    return 2 * (y - t) / y.size * derivative(act, y, z)


def head_step(x, w, b, t, loss: str, act: str, below: str = "none"):
    """The output layer's step that kernels/head.cl runs in one launch: (y, dz, dx, dw, db)
    with y = dense_forward(x, w, b, act), dz = output_gradient(y, t, loss, act), dx = dz w
    times below's derivative at x (the layer below's output: its dL/dz; ``"none"``: dL/dx),
    and the weight and bias gradients dz^T x and the sum of dz."""
    y = dense_forward(x, w, b, act)
    dz = output_gradient(y, t, loss, act)
    return y, dz, (dz @ w) * derivative(below, x), dz.T @ x, dz.sum(axis=0)
