"""Checks of notebook 01_dense_kernels: the dense layer's four kernels."""

from __future__ import annotations

import itertools

import numpy as np

from .. import reference as ref
from ..activations import DERIVATIVE_FORMULAS, FROM_Y
from ..codes import ACTIVATIONS, LOSSES
from ..layers.dense_params import SMALL_KERNELS
from .harness import (Output, guard, launch, new_rng, student_kernel, to_device, wide)
from .registry import exercise
from .verdicts import Case, Verdict, verdict


@exercise("01_dense_kernels", points=2, kernel=True, hints=(
    "One work-item per output value y[b, j]: j = get_global_id(0), b = get_global_id(1). "
    "Which row of x and which row of W does its dot product use?",
    "y[b * n_out + j] = activate(bias[j] + sum_k x[b * n_in + k] * w[j * n_in + k], act), "
    "after returning at once if j >= n_out or b >= batch."))
def check_dense_forward(folder) -> Verdict:
    """``dense_forward_seed(x, w, bias, y, batch, n_in, n_out, act)`` in ``<folder>/dense.cl``:
    one work-item per output value, j = get_global_id(0), sample = get_global_id(1)."""
    params = ("x", "w", "bias", "y", "batch", "n_in", "n_out", "act")

    def cases():
        kernel = student_kernel(folder, "dense", "dense_forward_seed", params, SMALL_KERNELS)
        rng, big = new_rng(), wide()
        shapes = [(1, 13, 7, "tanh"), (5, 33, 17, "sigmoid"), (4, 8, 3, "relu"),
                  (3, big, 9, "none"), (2, 6, big, "leaky_relu")]
        for batch, n_in, n_out, act in shapes:
            x = rng.standard_normal((batch, n_in)).astype(np.float32)
            w = (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
            b = rng.standard_normal(n_out).astype(np.float32)

            def run(x=x, w=w, b=b, act=act):
                (batch, n_in), n_out = x.shape, w.shape[0]
                y = Output((batch, n_out), guard((n_out, batch)))
                launch(kernel, (n_out, batch), to_device(x).data, to_device(w).data,
                        to_device(b).data, y.array.data, np.int32(batch), np.int32(n_in),
                        np.int32(n_out), np.int32(ACTIVATIONS[act]))
                return y.get("y")
            z = x @ w.T
            mistakes = {
                "the bias is missing: start the sum at bias[j]": ref.activate(z, act),
                "the activation is missing: store activate(sum, act)": z + b,
                "the bias is added after the activation: add it to the sum first":
                    ref.activate(z, act) + b,
                "W is (n_out, n_in), row-major: row j starts at w + j * n_in":
                    ref.activate(x @ w.reshape(n_in, n_out) + b, act),
            }
            yield Case(f"batch {batch}, {n_in} -> {n_out}, {act}", run,
                       ref.dense_forward(x, w, b, act), "y", mistakes,
                       "y[b, j] = activate(bias[j] + sum_k x[b, k] w[j, k], act), stored at "
                       "y[b * n_out + j]")
    return verdict("check_dense_forward", "dense_forward_seed", cases)


def dense_case(rng, batch, n_in, n_out):
    x = rng.standard_normal((batch, n_in)).astype(np.float32)
    w = (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
    dz = rng.standard_normal((batch, n_out)).astype(np.float32)
    return x, w, dz


_BACKWARD_SHAPES = lambda: [(1, 13, 7), (5, 33, 17), (3, wide(), 9), (2, 6, wide())]  # noqa: E731


@exercise("01_dense_kernels", points=2, kernel=True, hints=(
    "dx = dz W: one work-item per (input i, sample b) walks the column i of W.",
    "dx[b * n_in + i] = sum_j dz[b * n_out + j] * w[j * n_in + i]."))
def check_dense_backward_input(folder) -> Verdict:
    """``dense_backward_input_seed(dz, w, dx, batch, n_in, n_out)`` in ``<folder>/dense.cl``:
    dx = dz W, one work-item per (input i = get_global_id(0), sample b = get_global_id(1))."""
    def cases():
        kernel = student_kernel(folder, "dense", "dense_backward_input_seed",
                                ("dz", "w", "dx", "batch", "n_in", "n_out"), SMALL_KERNELS)
        rng = new_rng()
        for batch, n_in, n_out in _BACKWARD_SHAPES():
            x, w, dz = dense_case(rng, batch, n_in, n_out)

            def run(w=w, dz=dz):
                (batch, n_out), n_in = dz.shape, w.shape[1]
                dx = Output((batch, n_in), guard((n_in, batch)))
                launch(kernel, (n_in, batch), to_device(dz).data, to_device(w).data,
                        dx.array.data, np.int32(batch), np.int32(n_in), np.int32(n_out))
                return dx.get("dx")
            want = ref.dense_backward(x, w, x @ w.T, dz)[0]
            mistakes = {"W is (n_out, n_in): dx[b, i] walks the column i of W, "
                        "w[j * n_in + i], not the row": dz @ w.reshape(n_in, n_out).T}
            if batch > 1:
                mistakes["each sample has its own row of dz: dz[b * n_out + j]"] = np.repeat(
                    want[:1], batch, 0)
            yield Case(f"batch {batch}, {n_in} inputs, {n_out} outputs", run, want, "dx",
                       mistakes, "dx[b, i] = sum_j dz[b, j] w[j, i], stored at dx[b * n_in + i]")
    return verdict("check_dense_backward_input", "dense_backward_input_seed", cases)


@exercise("01_dense_kernels", points=2, kernel=True, hints=(
    "dW = dz^T x: one work-item per weight (i, j) sums over the batch, and gradients "
    "accumulate.",
    "dw[j * n_in + i] += sum_b dz[b * n_out + j] * x[b * n_in + i]."))
def check_dense_backward_weight(folder) -> Verdict:
    """``dense_backward_weight_seed(dz, x, dw, batch, n_in, n_out)`` in ``<folder>/dense.cl``:
    dW += dz^T x, one work-item per weight (i = get_global_id(0), j = get_global_id(1))."""
    def cases():
        kernel = student_kernel(folder, "dense", "dense_backward_weight_seed",
                                ("dz", "x", "dw", "batch", "n_in", "n_out"), SMALL_KERNELS)
        rng = new_rng()
        for batch, n_in, n_out in _BACKWARD_SHAPES():
            x, w, dz = dense_case(rng, batch, n_in, n_out)
            before = rng.standard_normal(w.shape).astype(np.float32)  # gradients accumulate

            def run(x=x, dz=dz, before=before):
                (batch, n_in), n_out = x.shape, dz.shape[1]
                dw = Output(before.shape, guard((n_in, n_out)), initial=before)
                launch(kernel, (n_in, n_out), to_device(dz).data, to_device(x).data,
                        dw.array.data, np.int32(batch), np.int32(n_in), np.int32(n_out))
                return dw.get("dw")
            grad = dz.T @ x
            mistakes = {"gradients accumulate: add the sum to dw (+=), do not overwrite it": grad,
                        "sum over every sample b, not only the first": before + np.outer(
                            dz[0], x[0])}
            if n_in != n_out:
                mistakes["dw[j, i] is stored at dw[j * n_in + i]"] = (
                    before + grad.T.reshape(w.shape))
            yield Case(f"batch {batch}, {n_in} inputs, {n_out} outputs", run, before + grad,
                       "dw", mistakes, "dw[j, i] += sum_b dz[b, j] x[b, i]")
    return verdict("check_dense_backward_weight", "dense_backward_weight_seed", cases)




@exercise("01_dense_kernels", points=2, kernel=True, hints=(
    "The derivative of each activation can be written with its output y = f(z).",
    "; ".join(f"{name}: {DERIVATIVE_FORMULAS[name]}" for name in FROM_Y) + "."))
def check_activation_grad(folder) -> Verdict:
    """``activate_grad(y, act)`` in ``<folder>/activation.cl``, run through the
    ``activation_backward(y, dy, dz, n, act)`` kernel: dz = dy * act'(z), written with y."""
    def cases():
        kernel = student_kernel(folder, "activation", "activation_backward",
                                ("y", "dy", "dz", "n", "act"))
        rng = new_rng()
        for act, n in zip(FROM_Y, itertools.cycle((37, 1, wide(), 100, 5))):
            y = ref.activate(rng.standard_normal(n) * 2, act).astype(np.float32)
            dy = rng.standard_normal(n).astype(np.float32)

            def run(y=y, dy=dy, act=act):
                dz = Output(y.shape, guard(y.shape))
                launch(kernel, y.shape, to_device(y).data, to_device(dy).data, dz.array.data,
                        np.int32(y.size), np.int32(ACTIVATIONS[act]))
                return dz.get("dz")
            formula = DERIVATIVE_FORMULAS[act]
            mistakes = {
                f"activate_grad returns 1 for {act}: add its case, {formula}": dy,
                f"activate_grad gets the output y = act(z), not z: write the derivative with y "
                f"({formula})": dy * ref.activate_grad(ref.activate(y, act), act),
            } if act != "none" else {}
            yield Case(f"{act}, n = {n}", run, dy * ref.activate_grad(y, act), "dz", mistakes,
                       f"the derivative of {act}, written with its output y, is {formula}")
    return verdict("check_activation_grad", "activate_grad", cases)


@exercise("01_dense_kernels", points=2, kernel=True, hints=(
    "Differentiate the mean loss with respect to the output (MSE) or the logits "
    "(softmax + cross-entropy).",
    "d = y - t; MSE: 2 d inv_count activate_grad(y, act); cross-entropy: d inv_count."))
def check_output_gradient(folder) -> Verdict:
    """``output_gradient(y, t, dz, n, inv_count, loss, act)`` in ``<folder>/loss.cl``:
    MSE 2 (y - t) inv_count act'(y); cross-entropy after softmax (y - t) inv_count."""
    params = ("y", "t", "dz", "n", "inv_count", "loss", "act")

    def cases():
        kernel = student_kernel(folder, "loss", "output_gradient", params)
        rng = new_rng()
        for loss, act, batch, cols in (("cross_entropy", "softmax", 1, 3),
                                       ("cross_entropy", "softmax", 7, 5), ("mse", "none", 5, 3),
                                       ("mse", "sigmoid", 4, 2), ("mse", "tanh", 1, wide())):
            y = ref.activate(rng.standard_normal((batch, cols)), act).astype(np.float32)
            if loss == "mse":
                t, inv_count = rng.standard_normal((batch, cols)).astype(np.float32), 1 / y.size
            else:
                t = np.eye(cols, dtype=np.float32)[rng.integers(0, cols, batch)]
                inv_count = 1 / batch

            def run(y=y, t=t, inv_count=inv_count, loss=loss, act=act):
                dz = Output(y.shape, guard((y.size,)))
                launch(kernel, (y.size,), to_device(y).data, to_device(t).data, dz.array.data,
                        np.int32(y.size), np.float32(inv_count), np.int32(LOSSES[loss]),
                        np.int32(ACTIVATIONS[act]))
                return dz.get("dz")
            want = ref.output_gradient(y, t, loss, act)
            mistakes = {"the mean is missing: multiply by inv_count": want / inv_count,
                        "the sign: the gradient points from t to y, (y - t), not (t - y)": -want}
            if loss == "mse":
                mistakes["the derivative of (y - t)^2 is 2 (y - t): the factor 2 is missing"] = (
                    want / 2)
                if act != "none":
                    mistakes["MSE goes back through the output activation: multiply by "
                             "activate_grad(y, act) (check_activation_grad must pass too)"] = (
                        2 * (y - t) * inv_count)
            else:
                mistakes["softmax + cross-entropy has no factor 2: dz = (y - t) inv_count"] = (
                    2 * want)
            yield Case(f"{loss}, {act}, batch {batch} x {cols}", run, want, "dz", mistakes)
    return verdict("check_output_gradient", "output_gradient", cases)
