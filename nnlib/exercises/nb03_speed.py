"""Checks of notebook 03_cpu_vs_gpu: arithmetic intensity and the blocked dense kernel."""

from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..codes import ACTIVATIONS
from ..runtime import get_runtime
from ..sizes import ceil_div
from .harness import (
    Output,
    call_student,
    expect_function,
    guard,
    new_rng,
    student_kernel,
    to_device,
    wide,
)
from .nb01_dense import dense_case
from .registry import exercise
from .verdicts import Case, NotYet, Verdict, verdict


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
SPEED_SHARE = 1.5  # the student's blocked kernel may take this many times nnlib's
ROUNDS = 9  # rounds of the three kernels launched back to back (the first warms up)


def _blocked_launch(kernel, x, w, b, act="tanh"):
    """``kernel`` (dense_forward_blocked's signature) over R x R blocks; returns (y, event)."""
    (batch, n_in), n_out = x.shape, w.shape[0]
    grid = (ceil_div(n_out, BLOCK), ceil_div(batch, BLOCK))
    y = Output((batch, n_out), BLOCK * BLOCK * guard(grid))
    limit = kernel.work_group_size
    local = (min(16, limit), max(1, min(4, limit // 16)))
    event = kernel(grid, local, to_device(x).data, to_device(w).data, to_device(b).data,
                   y.array.data, np.int32(batch), np.int32(n_in), np.int32(n_out),
                   np.int32(ACTIVATIONS[act]))
    event.wait()
    return y, event


@exercise("03_cpu_vs_gpu", points=2, kernel=True, hints=(
    "Keep an R x R block of sums in registers: per step of k, load R float4 of x and R "
    "of W, and use each in R dot products.",
    "acc[r][c] += dot(vload4(0, x + (b0 + r) n_in + k), vload4(0, w + (j0 + c) n_in + k)) "
    "for k in steps of 4, the tail one by one; store activate(acc[r][c] + bias[j0 + c]) "
    "where b0 + r < batch and j0 + c < n_out."))
def check_dense_forward_blocked(folder, speed: bool = True) -> Verdict:
    """``dense_forward_blocked`` in ``<folder>/blocked.cl``: right on awkward sizes and, with
    ``speed``, at least N times as fast as the one-work-item-per-output kernel
    (dense_forward_seed) on this device, N being the speedup nnlib's own blocked kernel
    reaches over it in the same run, divided by SPEED_SHARE. (On a GPU N is well above 1; on
    a CPU, where PoCL vectorizes the one-per-output kernel across work-items, it may not be.)"""
    def cases():
        kernel = student_kernel(folder, "blocked", "dense_forward_blocked", _DENSE_PARAMS)
        rng = new_rng()
        for batch, n_in, n_out, act in ((1, 13, 7, "tanh"), (5, 33, 17, "sigmoid"),
                                        (19, 38, 49, "relu"), (3, wide(), 9, "none"),
                                        (6, 5, 4 * wide() + 2, "leaky_relu")):
            x, w, _ = dense_case(rng, batch, n_in, n_out)
            b = rng.standard_normal(n_out).astype(np.float32)

            def run(x=x, w=w, b=b, act=act):
                return _blocked_launch(kernel, x, w, b, act)[0].get("y")
            z = x @ w.T
            yield Case(f"batch {batch}, {n_in} -> {n_out}, {act}", run,
                       ref.dense_forward(x, w, b, act), "y",
                       {"the bias is missing: add bias[j0 + c]": ref.activate(z, act),
                        "the activation is missing: store activate(sum + bias, act)": z + b},
                       "y[b0 + r, j0 + c] = activate(bias[j0 + c] + sum_k x[b0 + r, k] "
                       "w[j0 + c, k], act) for every r, c inside the data")
        if speed:
            yield _speed_case(kernel, rng)
    return verdict("check_dense_forward_blocked", "dense_forward_blocked", cases)


def _speed_case(kernel, rng) -> Case:
    """Times the one-work-item-per-output kernel, nnlib's blocked kernel and the student's."""
    rt = get_runtime()
    naive = rt.launcher("dense", "dense_forward_seed")
    reference = rt.launcher("blocked", "dense_forward_blocked")
    batch, n_in, n_out = 128, 512, 512
    x, w, _ = dense_case(rng, batch, n_in, n_out)
    b = np.zeros(n_out, np.float32)

    def naive_launch():
        y = rt.empty((batch, n_out))
        limit = naive.work_group_size
        event = naive((n_out, batch), (min(16, limit), max(1, min(4, limit // 16))),
                      to_device(x).data, to_device(w).data, to_device(b).data, y.data,
                      np.int32(batch), np.int32(n_in), np.int32(n_out), np.int32(0))
        event.wait()
        return y, event

    def run():
        # Rounds of the three launched back to back, each kernel's time summed over the
        # rounds: a busy moment slows all three alike, and a PoCL thread that wakes late for
        # one launch (on a VM that halts idle cores, half the speed for that launch) moves a
        # sum far less than a single launch, which a comparison of fastest times rests on.
        launches = (naive_launch, lambda: _blocked_launch(reference, x, w, b, "none"),
                    lambda: _blocked_launch(kernel, x, w, b, "none"))
        times = np.array([[event_seconds(launch()[1]) for launch in launches]
                          for _ in range(ROUNDS)])
        t_naive, t_ref, t_student = times[1:].sum(axis=0)
        need, got = t_naive / t_ref / SPEED_SHARE, t_naive / t_student
        if got < need:
            raise NotYet(f"your kernel is {got:.2f} times as fast as the one-work-item-per-"
                         f"output kernel; at least {need:.2f} is needed (nnlib's blocked kernel "
                         f"reaches {t_naive / t_ref:.2f} on this device, in this run). Does each "
                         f"value loaded from x and W serve R outputs?")
        return np.array(0.0)
    return Case(f"speed: batch {batch}, {n_in} -> {n_out}", run, np.array(0.0), "speed")


def event_seconds(event) -> float:
    return (event.profile.end - event.profile.start) * 1e-9
