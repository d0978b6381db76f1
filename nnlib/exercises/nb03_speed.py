"""Checks of notebook 03_cpu_vs_gpu: arithmetic intensity and the blocked dense kernel."""

from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..codes import ACTIVATIONS
from ..sizes import ceil_div
from . import budget
from .harness import (Output, call_student, expect_function, guard, launch, new_rng, student_kernel,
                      to_device, wide)
from .nb01_dense import dense_case
from .registry import exercise
from .verdicts import Case, Verdict, verdict


@exercise("03_cpu_vs_gpu", points=1, kernel=False, hints=(
    "Count the floating-point operations of x W^T and the bytes that must at least move "
    "once between memory and the device.",
    "flops = 2 batch n_in n_out; bytes = 4 (batch n_in + n_in n_out + batch n_out) (the "
    "bias is negligible); intensity = flops / bytes."),
          shortcuts=("nnlib.bench.roofline:dense_intensity",))
def check_intensity(intensity) -> Verdict:
    """``intensity(batch, n_in, n_out)``: the FLOP per byte of a dense forward pass whose
    float32 operands x, W and y each move once between memory and the device (the bias is
    negligible), as ``benchmarks.roofline.dense_intensity``."""
    def cases():
        expect_function(intensity, "intensity", ("batch", "n_in", "n_out"))
        for batch, n_in, n_out in ((1, 1024, 1024), (64, 512, 512), (7, 240, 3), (256, 64, 4096)):
            flops = 2.0 * batch * n_in * n_out
            operands = batch * n_in + n_in * n_out + batch * n_out
            mistakes = {
                "a multiply-add is 2 floating-point operations": flops / 2 / (4 * operands),
                "a float32 is 4 bytes: divide by bytes, not by values": flops / operands,
                "y is written to memory: count its bytes too":
                    flops / (4 * (batch * n_in + n_in * n_out)),
                "the weights move once per batch, not once per sample":
                    flops / (4 * batch * (n_in + n_in * n_out + n_out))}
            if batch == 1:
                del mistakes["the weights move once per batch, not once per sample"]
            yield Case(f"batch {batch}, {n_in} -> {n_out}",
                       lambda a=(batch, n_in, n_out): call_student(intensity, *a),
                       np.array(flops / (4 * operands)), "the intensity", mistakes,
                       "FLOP = 2 batch n_in n_out; bytes = 4 (batch n_in + n_in n_out + "
                       "batch n_out)")
    return verdict("check_intensity", "intensity", cases, rtol=1e-3, atol=0)


_DENSE_PARAMS = ("x", "w", "bias", "y", "batch", "n_in", "n_out", "act")
BLOCK = 4  # the R of kernels/blocked.cl: outputs per work-item along each dimension


def _blocked_launch(kernel, x, w, b, act="tanh") -> Output:
    """``kernel`` (dense_forward_blocked's signature) over R x R blocks; returns y."""
    (batch, n_in), n_out = x.shape, w.shape[0]
    grid = (ceil_div(n_out, BLOCK), ceil_div(batch, BLOCK))
    y = Output((batch, n_out), BLOCK * BLOCK * guard(grid))
    launch(kernel, grid, to_device(x).data, to_device(w).data, to_device(b).data,
           y.array.data, np.int32(batch), np.int32(n_in), np.int32(n_out),
           np.int32(ACTIVATIONS[act]))
    return y


@exercise("03_cpu_vs_gpu", points=2, kernel=True, hints=(
    "Keep an R x R block of sums in registers: per step of k, load R float4 of x and R "
    "of W, and use each in R dot products.",
    "acc[r][c] += dot(vload4(0, x + (b0 + r) n_in + k), vload4(0, w + (j0 + c) n_in + k)) "
    "for k in steps of 4, the tail one by one; store activate(acc[r][c] + bias[j0 + c]) "
    "where b0 + r < batch and j0 + c < n_out."))
def check_dense_forward_blocked(folder) -> Verdict:
    """``dense_forward_blocked`` in ``<folder>/blocked.cl``: right on awkward sizes, and
    blocked: it loads at most 1/R of the one-output-per-work-item kernel's global floats per
    output (plus one), counted exactly on Oclgrind, never timed."""
    def cases():
        kernel = student_kernel(folder, "blocked", "dense_forward_blocked", _DENSE_PARAMS)
        rng = new_rng()
        for batch, n_in, n_out, act in ((1, 13, 7, "tanh"), (5, 33, 17, "sigmoid"),
                                        (19, 38, 49, "relu"), (3, wide(), 9, "none"),
                                        (6, 5, 4 * wide() + 2, "leaky_relu")):
            x, w, _ = dense_case(rng, batch, n_in, n_out)
            b = rng.standard_normal(n_out).astype(np.float32)

            def run(x=x, w=w, b=b, act=act):
                return _blocked_launch(kernel, x, w, b, act).get("y")
            z = x @ w.T
            yield Case(f"batch {batch}, {n_in} -> {n_out}, {act}", run,
                       ref.dense_forward(x, w, b, act), "y",
                       {"the bias is missing: add bias[j0 + c]": ref.activate(z, act),
                        "the activation is missing: store activate(sum + bias, act)": z + b},
                       "y[b0 + r, j0 + c] = activate(bias[j0 + c] + sum_k x[b0 + r, k] "
                       "w[j0 + c, k], act) for every r, c inside the data")
        yield budget.blocked_dense_case(folder, BLOCK)
    return verdict("check_dense_forward_blocked", "dense_forward_blocked", cases)
