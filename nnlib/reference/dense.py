"""Dense layer, activations and losses in numpy.

Taught in notebooks/01_dense_kernels.
"""

import numpy as np

from ..codes import LEAKY_SLOPE

__all__ = ["activate", "activate_grad", "softmax", "dense_forward", "dense_backward",
           "mse", "cross_entropy", "output_gradient", "vector_add"]


def vector_add(a, b):
    return a + b


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def activate(z, act: str):
    if act == "tanh":
        return np.tanh(z)
    if act == "sigmoid":
        return 1.0 / (1.0 + np.exp(-z))
    if act == "relu":
        return np.maximum(z, 0)
    if act == "leaky_relu":
        return np.where(z > 0, z, LEAKY_SLOPE * z)
    if act == "softmax":
        return softmax(z)
    return z


def activate_grad(y, act: str):
    """d act/dz as a function of the output y (elementwise activations only)."""
    if act == "tanh":
        return 1 - y * y
    if act == "sigmoid":
        return y * (1 - y)
    if act == "relu":
        return (y > 0).astype(y.dtype)
    if act == "leaky_relu":
        return np.where(y > 0, 1, LEAKY_SLOPE).astype(y.dtype)
    return np.ones_like(y)


def dense_forward(x, w, b, act: str = "none"):
    """y = act(x @ w.T + b) for x (batch, n_in), w (n_out, n_in), b (n_out,)."""
    return activate(x @ w.T + b, act)


def dense_backward(x, w, y, dy, act: str = "none"):
    """(dx, dw, db) from dL/dy of ``y = dense_forward(x, w, b, act)``."""
    if act == "softmax":
        dz = y * (dy - (dy * y).sum(axis=-1, keepdims=True))
    else:
        dz = dy * activate_grad(y, act)
    return dz @ w, dz.T @ x, dz.sum(axis=0)


def mse(y, t):
    return np.mean((y - t) ** 2)


def cross_entropy(p, t):
    """Mean over the batch of -sum t log p, for probabilities p and one-hot (or soft) t."""
    return -np.sum(t * np.log(np.maximum(p, 1e-12))) / p.shape[0]


def output_gradient(y, t, loss: str, act: str):
    """dL/dz of the output layer: MSE through any elementwise activation, or CE + softmax."""
    if loss == "cross_entropy":
        return (y - t) / y.shape[0]
    return 2 * (y - t) / y.size * activate_grad(y, act)
