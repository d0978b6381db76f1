"""The same MLP in plain numpy (float32, in-place updates): the baseline of the benchmarks.

Used in notebooks/03_cpu_vs_gpu."""

import numpy as np


class NumpyMLP:
    """Dense layers with ``hidden`` activation (tanh) and a linear output (``loss="mse"``) or
    a softmax output (``loss="cross_entropy"``), trained by SGD or Adam (PyTorch's rules).
    ``weights`` are (n_out, n_in) arrays as nnlib and torch store them."""

    def __init__(self, weights, biases, loss="mse", optimizer="adam", lr=1e-3, momentum=0.0):
        self.w = [np.array(w, dtype=np.float32) for w in weights]
        self.b = [np.array(b, dtype=np.float32) for b in biases]
        self.loss, self.optimizer, self.lr, self.momentum = loss, optimizer, lr, momentum
        params = self.w + self.b
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def forward(self, x):
        outs = [x]
        for i, (w, b) in enumerate(zip(self.w, self.b)):
            z = outs[-1] @ w.T + b
            if i < len(self.w) - 1:
                z = np.tanh(z)
            elif self.loss == "cross_entropy":
                z = np.exp(z - z.max(axis=1, keepdims=True))
                z /= z.sum(axis=1, keepdims=True)
            outs.append(z)
        return outs

    def step(self, x, y) -> float:
        """One training step on (x, y) (y one-hot for cross-entropy); returns the loss."""
        outs = self.forward(x)
        out = outs[-1]
        if self.loss == "mse":
            loss = float(np.mean((out - y) ** 2))
            dz = (2.0 / out.size) * (out - y)
        else:
            loss = float(-np.sum(y * np.log(out + 1e-12)) / len(x))
            dz = (out - y) / len(x)
        grads = []
        for i in reversed(range(len(self.w))):
            grads.append((dz.T @ outs[i], dz.sum(axis=0)))
            if i:
                dz = (dz @ self.w[i]) * (1.0 - outs[i] * outs[i])
        gw, gb = zip(*reversed(grads))
        self._update(self.w + self.b, list(gw) + list(gb))
        return loss

    def _update(self, params, grads):
        self.t += 1
        for p, g, m, v in zip(params, grads, self.m, self.v):
            if self.optimizer == "sgd":
                m *= self.momentum
                m += g
                p -= self.lr * m
                continue
            m *= 0.9
            m += 0.1 * g
            v *= 0.999
            v += 0.001 * g * g
            step = self.lr / (1 - 0.9 ** self.t)
            p -= step * m / (np.sqrt(v / (1 - 0.999 ** self.t)) + 1e-8)
