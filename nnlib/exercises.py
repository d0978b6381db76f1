"""Checks for the workbook's exercises: is a student's kernel (or function) right, and if not, why?

    from nnlib import exercises
    exercises.check_dense_forward("../kernels")   # the folder holding your copy of dense.cl
    exercises.hint("dense_forward", 1)            # a nudge; level 2: the formula

Each check runs the student's code on awkward cases (batch 1, odd sizes, sizes above the
device's largest work-group) against ``nnlib.reference`` and returns a :class:`Verdict`: it
displays as a short report (which case failed, the largest error, a hint) and is truthy when
every case passes. Kernel checks run in a worker process (one per Python session, reused), so
a kernel that crashes or never ends becomes a verdict instead of killing the notebook; Ctrl-C
stops a check. ``simulate=True`` runs the kernel on the Oclgrind simulator, which names the
line of an out-of-bounds access. Outputs are filled with a NaN of a marked bit pattern and
followed by a guard area, so "never written", "wrote NaN/inf" and "wrote past the end" are
told apart.

Used by the checked exercises of every notebook (notebooks/00_devices to 07_catch).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from . import reference as ref
from .codes import ACTIVATIONS, FINITE_FILL, LOSSES
from .launcher import Launcher
from .runtime import KernelBuildError, get_runtime
from .sizes import ceil_div, round_up

__all__ = ["Verdict", "check_activation_grad", "check_adan_update", "check_auc_roc",
           "check_balanced_accuracy", "check_cmulconj", "check_confusion_matrix",
           "check_dense_backward_input", "check_dense_backward_weight", "check_dense_forward",
           "check_dense_forward_blocked", "check_fft_radix2_stage", "check_gumbel_softmax",
           "check_intensity", "check_masked_softmax", "check_output_gradient",
           "check_revin_norm", "check_sgd_update", "check_vector_add", "check_vector_scale",
           "hint"]

TIMEOUT = 60.0  # seconds a kernel check may take on a device (Oclgrind: SIMULATED_TIMEOUT)
SIMULATED_TIMEOUT = 600.0
FILL = np.uint32(0x7FC5A5A5)  # a quiet NaN whose payload no arithmetic produces


class NotYet(Exception):
    """Stops a check (or one case) with what to tell the student."""


@dataclass
class Verdict:
    check: str
    passed: bool
    report: str

    def __bool__(self):
        return self.passed

    def __repr__(self):
        return self.report


@dataclass
class Case:
    """One run of the student's code: ``run()`` returns its result, ``want`` the reference."""

    label: str
    run: Callable[[], object]
    want: np.ndarray
    out: str  # the output's name in messages
    mistakes: dict = field(default_factory=dict)  # hint -> what that mistake produces
    hint: str = ""  # said when no known mistake matches


# ---------------------------------------------------------------- the worker process

_KERNEL_CHECKS: dict = {}  # name -> the check itself, run inside the worker
_IN_WORKER = False


class _Worker:
    """A child process that runs kernel checks, started on first use and reused (one OpenCL
    initialisation per session); a crash or a timeout ends it and the next check starts
    another."""

    def __init__(self, simulate: bool):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, simulate), daemon=True)
        self.process.start()
        child.close()

    def stop(self):
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()

    def call(self, name: str, args: tuple, kwargs: dict, timeout: float) -> Verdict:
        self.conn.send((name, args, kwargs))
        deadline = time.monotonic() + timeout
        while not self.conn.poll(0.05):  # short waits: Ctrl-C is seen between them
            if not self.process.is_alive():
                break
            if time.monotonic() > deadline:
                self.stop()
                return Verdict(name, False, f"{name}: not yet. Your kernel did not finish in "
                                            f"{timeout:g} s: an endless loop (a loop whose "
                                            f"counter never reaches its bound)?")
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self.stop()
            return Verdict(name, False, f"{name}: not yet. Your kernel crashed: probably an "
                                        f"out-of-bounds access; run it under Oclgrind with "
                                        f"exercises.{name}(..., simulate=True), which names "
                                        f"the line.")


_workers: dict = {}  # simulate -> its worker


def _serve(conn, simulate: bool) -> None:
    """The worker's loop: run each check asked for and send back its verdict."""
    global _IN_WORKER
    _IN_WORKER = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends this process
    if simulate:
        from .runtime import use_device
        use_device("oclgrind")
    while True:
        try:
            name, args, kwargs = conn.recv()
        except EOFError:
            return
        with _stderr_captured(simulate) as said:
            try:
                verdict = _KERNEL_CHECKS[name](*args, **kwargs)
            except Exception as err:  # a bug of the check itself: report it, keep serving
                verdict = Verdict(name, False,
                                  f"{name}: the check failed: {type(err).__name__}: {err}")
        if said:
            verdict.report += "\nOclgrind says:\n" + "\n".join(f"    {line}" for line in said)
        conn.send(verdict)


@contextlib.contextmanager
def _stderr_captured(capture: bool):
    """Collects what native code (Oclgrind) writes to file descriptor 2 into the yielded list
    (its first 30 non-empty lines)."""
    said: list = []
    if not capture:
        yield said
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+b") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            log.seek(0)
            said += [line for line in log.read().decode(errors="replace").splitlines()
                     if line.strip()][:30]


def _in_worker(check):
    """Run ``check(folder, ...)`` in the worker process, with a time limit."""
    _KERNEL_CHECKS[check.__name__] = check

    @functools.wraps(check)
    def run(folder, *args, simulate: bool = False, timeout: float | None = None, **kwargs):
        if _IN_WORKER:
            return check(folder, *args, **kwargs)
        worker = _workers.get(simulate)
        if worker is None or not worker.process.is_alive():
            worker = _workers[simulate] = _Worker(simulate)
        limit = timeout or (SIMULATED_TIMEOUT if simulate else TIMEOUT)
        try:
            return worker.call(check.__name__, (str(Path(folder).resolve()), *args), kwargs,
                               limit)
        except BaseException:  # Ctrl-C (or anything else): the worker's state is unknown
            worker.stop()
            _workers.pop(simulate, None)
            raise
    return run


# ---------------------------------------------------------------- verdicts

def _verdict(check: str, what: str, cases: Callable[[], list], rtol=1e-4, atol=1e-5) -> Verdict:
    """Run every case and write the report; a NotYet raised while preparing stops early."""
    try:
        results = []
        for case in cases():
            try:
                problem = _problem(case, case.run(), rtol, atol)
            except NotYet as err:
                problem = str(err)
            except cl.Error as err:
                problem = f"the launch failed: {err}"
            results.append((case, problem))
    except NotYet as err:
        return Verdict(check, False, f"{check}: not yet. {err}")
    failed = [r for r in results if r[1]]
    if not failed:
        return Verdict(check, True, f"{check}: PASSED. {what} matches the reference in all "
                                    f"{len(results)} cases.")
    lines = [f"{check}: not yet. {len(failed)} of {len(results)} cases fail ({what})."]
    for case, problem in results:
        lines.append(f"  {'FAILED' if problem else 'ok':6}  {case.label}"
                     + (f": {problem}" if problem else ""))
    return Verdict(check, False, "\n".join(lines))


def _problem(case: Case, got, rtol: float, atol: float) -> str | None:
    """None if ``got`` matches ``case.want``, else what is wrong, with a hint."""
    want, out = case.want, case.out
    if got is None:
        return f"got None instead of {out}"
    try:
        got = np.asarray(got, dtype=want.dtype)
    except (TypeError, ValueError):
        return f"{out} should be numbers, got {type(got).__name__}"
    if got.shape != want.shape:
        return f"{out} has shape {got.shape}, expected {want.shape}"
    bad = ~np.isfinite(got) & np.isfinite(want)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        what = "NaN" if np.isnan(got[first]) else "inf"
        message = (f"{bad.sum()} of {bad.size} values of {out} are NaN or inf where the reference "
                   f"is finite, the first ({what}) at {out}{list(first)}: an overflow (exp of a "
                   f"large number), 0 * inf, or a read past the end of an input?")
        return f"{message} Hint: {case.hint}" if case.hint else message
    err = np.abs(got - want)
    if np.all(err <= atol + rtol * np.abs(want)):
        return None
    at = np.unravel_index(np.nanargmax(np.where(np.isnan(err), np.inf, err)), err.shape)
    where = f" at {out}{[int(i) for i in at]}" if want.ndim else ""
    message = f"max |error| {err[at]:.2g}{where} (got {got[at]:.4g}, expected {want[at]:.4g})"
    for hint, wrong in case.mistakes.items():
        if np.allclose(got, wrong, rtol=rtol, atol=atol):
            return f"{message}. Hint: {hint}"
    return f"{message}. Hint: {case.hint}" if case.hint else message


# ---------------------------------------------------------------- kernels

def _kernel(folder, topic: str, name: str, params: tuple, options: tuple = ()) -> Launcher:
    """``name`` from the student's ``<folder>/<topic>.cl``, with clear messages for a missing
    file, a build error, a missing kernel or a different number of parameters."""
    path = Path(folder).resolve() / f"{topic}.cl"
    if not path.is_file():
        raise NotYet(f"there is no {path}; pass the folder that holds your {topic}.cl "
                     f"(`make exercises` writes it to build/exercises/kernels/)")
    rt = get_runtime()
    try:
        program = rt.program(topic, options, folder=path.parent)
    except KernelBuildError as err:
        raise NotYet(f"{topic}.cl does not build. The compiler says:\n" + _errors(str(err)))
    if name not in program.get_info(cl.program_info.KERNEL_NAMES).split(";"):
        raise NotYet(f"{path} has no kernel named {name}")
    launcher = rt.launcher(topic, name, options, folder=path.parent)
    count = launcher.kernel.num_args
    if count != len(params):
        raise NotYet(f"{name} takes {count} parameters; the check passes "
                     f"{len(params)}: ({', '.join(params)}). Keep the exercise's signature.")
    return launcher


def _errors(log: str) -> str:
    """The build log's error lines (file:line:column: message), else the whole log."""
    lines = [line.strip() for line in log.splitlines() if "error" in line.lower()
             and ".cl:" in line]
    return "\n".join(f"    {line}" for line in (lines or log.splitlines()))


def _device(array, dtype=np.float32) -> cla.Array:
    return cla.to_device(get_runtime().queue, np.ascontiguousarray(array, dtype=dtype))


class _Output:
    """A device output of ``shape`` filled with the marked NaN ``FILL``, followed by ``guard``
    more of it that a kernel with a correct bounds check never touches."""

    def __init__(self, shape, guard: int, dtype=np.float32, initial=None):
        self.shape, self.dtype, self.size = shape, np.dtype(dtype), int(np.prod(shape))
        words = self.dtype.itemsize // 4
        raw = np.full((self.size + guard) * words, FILL, np.uint32)
        host = raw.view(self.dtype)
        if initial is not None:
            host[:self.size] = np.ravel(initial)
        self.array = _device(host, self.dtype)

    def get(self, name: str) -> np.ndarray:
        host = self.array.get()
        words = host.view(np.uint32).reshape(host.size, -1) == FILL
        if not words[self.size:].all():
            raise NotYet(f"the kernel wrote past the end of {name}: work-items beyond the "
                         f"data (the global size is rounded up) must do nothing")
        unwritten = words[:self.size].all(-1).reshape(self.shape)
        if unwritten.all():
            raise NotYet(f"nothing was written to {name} (it still holds the NaN the check put "
                         f"there; a kernel that adds to it with += keeps that NaN)")
        if unwritten.any():
            first = tuple(int(i) for i in np.argwhere(unwritten)[0])
            raise NotYet(f"{unwritten.sum()} of {unwritten.size} values of {name} were never "
                         f"written, the first at {name}{list(first)}")
        return host[:self.size].reshape(self.shape)


def _launch(kernel, grid: tuple, *args) -> None:
    """Run ``kernel`` over ``grid``, the global size rounded up to whole work-groups of at
    most 64 per dimension, as nnlib's layers may launch it."""
    limit = kernel.work_group_size
    local = {1: (min(64, limit),), 2: (min(16, limit), max(1, min(4, limit // 16))),
             3: (1, 1, min(64, limit))}[len(grid)]
    kernel(grid, local, *args).wait()


def _guard(grid: tuple) -> int:
    """More elements than the padded work-items of ``_launch`` can reach past the data."""
    return int(np.prod([round_up(g, 64) for g in grid]))


def _wide() -> int:
    """A size above the device's largest work-group."""
    return get_runtime().max_work_group_size + 3


def _rng():
    return np.random.default_rng(7)


# A case label: logits large enough that exp overflows in float32 unless shifted.
_LARGE = ", large logits (exp overflows unless the row's largest logit is subtracted first)"


def _complex(rng, shape) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


# ---------------------------------------------------------------- notebook 00

@_in_worker
def check_vector_add(folder) -> Verdict:
    """``vector_add(a, b, out, n)`` in ``<folder>/vector.cl``: out = a + b."""
    def cases():
        kernel = _kernel(folder, "vector", "vector_add", ("a", "b", "out", "n"))
        rng = _rng()
        for n in (1, 1000, _wide()):
            a, b = rng.standard_normal((2, n)).astype(np.float32)

            def run(a=a, b=b, n=n):
                out = _Output((n,), _guard((n,)))
                _launch(kernel, (n,), _device(a).data, _device(b).data, out.array.data,
                        np.int32(n))
                return out.get("out")
            yield Case(f"n = {n}", run, ref.vector_add(a, b), "out",
                       {"you computed a - b: add instead": a - b,
                        "out holds a only: add b[i]": a})
    return _verdict("check_vector_add", "vector_add", cases)


@_in_worker
def check_vector_scale(folder) -> Verdict:
    """``vector_scale(a, out, alpha, n)`` in ``<folder>/vector.cl``: out = alpha * a."""
    def cases():
        kernel = _kernel(folder, "vector", "vector_scale", ("a", "out", "alpha", "n"))
        rng = _rng()
        for n, alpha in ((1, 2.5), (999, -0.5), (_wide(), 3.0)):
            a = rng.standard_normal(n).astype(np.float32)

            def run(a=a, alpha=alpha):
                out = _Output(a.shape, _guard(a.shape))
                _launch(kernel, a.shape, _device(a).data, out.array.data, np.float32(alpha),
                        np.int32(a.size))
                return out.get("out")
            yield Case(f"n = {n}, alpha = {alpha}", run, ref.vector_scale(a, alpha), "out",
                       {"out holds a: multiply by alpha": a,
                        "out holds alpha everywhere: multiply it by a[i]":
                            np.full_like(a, alpha),
                        "you added alpha: multiply instead": a + alpha})
    return _verdict("check_vector_scale", "vector_scale", cases)


# ---------------------------------------------------------------- notebook 01

@_in_worker
def check_dense_forward(folder) -> Verdict:
    """``dense_forward_seed(x, w, bias, y, batch, n_in, n_out, act)`` in ``<folder>/dense.cl``:
    one work-item per output value, j = get_global_id(0), sample = get_global_id(1)."""
    params = ("x", "w", "bias", "y", "batch", "n_in", "n_out", "act")

    def cases():
        kernel = _kernel(folder, "dense", "dense_forward_seed", params)
        rng, wide = _rng(), _wide()
        shapes = [(1, 13, 7, "tanh"), (5, 33, 17, "sigmoid"), (4, 8, 3, "relu"),
                  (3, wide, 9, "none"), (2, 6, wide, "leaky_relu")]
        for batch, n_in, n_out, act in shapes:
            x = rng.standard_normal((batch, n_in)).astype(np.float32)
            w = (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
            b = rng.standard_normal(n_out).astype(np.float32)

            def run(x=x, w=w, b=b, act=act):
                (batch, n_in), n_out = x.shape, w.shape[0]
                y = _Output((batch, n_out), _guard((n_out, batch)))
                _launch(kernel, (n_out, batch), _device(x).data, _device(w).data,
                        _device(b).data, y.array.data, np.int32(batch), np.int32(n_in),
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
    return _verdict("check_dense_forward", "dense_forward_seed", cases)


def _dense_case(rng, batch, n_in, n_out):
    x = rng.standard_normal((batch, n_in)).astype(np.float32)
    w = (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
    dz = rng.standard_normal((batch, n_out)).astype(np.float32)
    return x, w, dz


_BACKWARD_SHAPES = lambda: [(1, 13, 7), (5, 33, 17), (3, _wide(), 9), (2, 6, _wide())]  # noqa: E731


@_in_worker
def check_dense_backward_input(folder) -> Verdict:
    """``dense_backward_input_seed(dz, w, dx, batch, n_in, n_out)`` in ``<folder>/dense.cl``:
    dx = dz W, one work-item per (input i = get_global_id(0), sample b = get_global_id(1))."""
    def cases():
        kernel = _kernel(folder, "dense", "dense_backward_input_seed",
                         ("dz", "w", "dx", "batch", "n_in", "n_out"))
        rng = _rng()
        for batch, n_in, n_out in _BACKWARD_SHAPES():
            x, w, dz = _dense_case(rng, batch, n_in, n_out)

            def run(w=w, dz=dz):
                (batch, n_out), n_in = dz.shape, w.shape[1]
                dx = _Output((batch, n_in), _guard((n_in, batch)))
                _launch(kernel, (n_in, batch), _device(dz).data, _device(w).data,
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
    return _verdict("check_dense_backward_input", "dense_backward_input_seed", cases)


@_in_worker
def check_dense_backward_weight(folder) -> Verdict:
    """``dense_backward_weight_seed(dz, x, dw, batch, n_in, n_out)`` in ``<folder>/dense.cl``:
    dW += dz^T x, one work-item per weight (i = get_global_id(0), j = get_global_id(1))."""
    def cases():
        kernel = _kernel(folder, "dense", "dense_backward_weight_seed",
                         ("dz", "x", "dw", "batch", "n_in", "n_out"))
        rng = _rng()
        for batch, n_in, n_out in _BACKWARD_SHAPES():
            x, w, dz = _dense_case(rng, batch, n_in, n_out)
            before = rng.standard_normal(w.shape).astype(np.float32)  # gradients accumulate

            def run(x=x, dz=dz, before=before):
                (batch, n_in), n_out = x.shape, dz.shape[1]
                dw = _Output(before.shape, _guard((n_in, n_out)), initial=before)
                _launch(kernel, (n_in, n_out), _device(dz).data, _device(x).data,
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
    return _verdict("check_dense_backward_weight", "dense_backward_weight_seed", cases)


_DERIVATIVES = {"tanh": "1 - y*y", "sigmoid": "y * (1 - y)", "relu": "1 where y > 0, else 0",
                "leaky_relu": "1 where y > 0, else LEAKY_SLOPE", "none": "1"}


@_in_worker
def check_activation_grad(folder) -> Verdict:
    """``activate_grad(y, act)`` in ``<folder>/activation.cl``, run through the
    ``activation_backward(y, dy, dz, n, act)`` kernel: dz = dy * act'(z), written with y."""
    def cases():
        kernel = _kernel(folder, "activation", "activation_backward", ("y", "dy", "dz", "n", "act"))
        rng = _rng()
        for act, n in (("tanh", 37), ("sigmoid", 1), ("relu", _wide()), ("leaky_relu", 100),
                       ("none", 5)):
            y = ref.activate(rng.standard_normal(n) * 2, act).astype(np.float32)
            dy = rng.standard_normal(n).astype(np.float32)

            def run(y=y, dy=dy, act=act):
                dz = _Output(y.shape, _guard(y.shape))
                _launch(kernel, y.shape, _device(y).data, _device(dy).data, dz.array.data,
                        np.int32(y.size), np.int32(ACTIVATIONS[act]))
                return dz.get("dz")
            formula = _DERIVATIVES[act]
            mistakes = {
                f"activate_grad returns 1 for {act}: add its case, {formula}": dy,
                f"activate_grad gets the output y = act(z), not z: write the derivative with y "
                f"({formula})": dy * ref.activate_grad(ref.activate(y, act), act),
            } if act != "none" else {}
            yield Case(f"{act}, n = {n}", run, dy * ref.activate_grad(y, act), "dz", mistakes,
                       f"the derivative of {act}, written with its output y, is {formula}")
    return _verdict("check_activation_grad", "activate_grad", cases)


@_in_worker
def check_output_gradient(folder) -> Verdict:
    """``output_gradient(y, t, dz, n, inv_count, loss, act)`` in ``<folder>/loss.cl``:
    MSE 2 (y - t) inv_count act'(y); cross-entropy after softmax (y - t) inv_count."""
    params = ("y", "t", "dz", "n", "inv_count", "loss", "act")

    def cases():
        kernel = _kernel(folder, "loss", "output_gradient", params)
        rng = _rng()
        for loss, act, batch, cols in (("cross_entropy", "softmax", 1, 3),
                                       ("cross_entropy", "softmax", 7, 5), ("mse", "none", 5, 3),
                                       ("mse", "sigmoid", 4, 2), ("mse", "tanh", 1, _wide())):
            y = ref.activate(rng.standard_normal((batch, cols)), act).astype(np.float32)
            if loss == "mse":
                t, inv_count = rng.standard_normal((batch, cols)).astype(np.float32), 1 / y.size
            else:
                t = np.eye(cols, dtype=np.float32)[rng.integers(0, cols, batch)]
                inv_count = 1 / batch

            def run(y=y, t=t, inv_count=inv_count, loss=loss, act=act):
                dz = _Output(y.shape, _guard((y.size,)))
                _launch(kernel, (y.size,), _device(y).data, _device(t).data, dz.array.data,
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
    return _verdict("check_output_gradient", "output_gradient", cases)


# ---------------------------------------------------------------- notebook 02

def _function(fn, name: str, params: tuple) -> None:
    if not callable(fn):
        raise NotYet(f"pass your function {name} itself, not a {type(fn).__name__}")
    try:
        inspect.signature(fn).bind(*params)
    except TypeError:
        raise NotYet(f"{name} must take ({', '.join(params)}); yours takes "
                     f"{inspect.signature(fn)}") from None


def _call(fn, *args):
    try:
        return fn(*args)
    except Exception as err:  # the student's code: report it, never a traceback
        raise NotYet(f"{getattr(fn, '__name__', 'your function')} raised "
                     f"{type(err).__name__}: {err}") from None


def _recalls(y_true, y_pred, n_classes):
    return [np.mean(y_pred[y_true == k] == k) for k in range(n_classes) if np.any(y_true == k)]


def check_balanced_accuracy(balanced_accuracy) -> Verdict:
    """``balanced_accuracy(y_true, y_pred, n_classes)``: the mean, over the classes present in
    ``y_true``, of each class's recall (the share of its samples predicted as it)."""
    params = ("y_true", "y_pred", "n_classes")

    def cases():
        _function(balanced_accuracy, "balanced_accuracy", params)
        rng = _rng()
        labelled = [(np.array([2]), np.array([2]), 3),
                    (rng.integers(0, 3, 7), rng.integers(0, 3, 7), 3),
                    (rng.choice(3, 1000, p=[0.13, 0.13, 0.74]), np.full(1000, 2), 3),  # "none"
                    (np.array([0, 0, 2, 2, 2]), np.array([0, 1, 2, 2, 0]), 3),
                    (rng.integers(0, 5, 101), rng.integers(0, 5, 101), 5)]
        for y_true, y_pred, k in labelled:
            recall_all = [np.mean(y_pred[y_true == c] == c) if np.any(y_true == c) else 0.0
                          for c in range(k)]
            precisions = [np.mean(y_true[y_pred == c] == c) for c in range(k)
                          if np.any(y_pred == c)]
            mistakes = {
                "that is the plain accuracy: average the recall of each class instead":
                    np.mean(y_true == y_pred),
                "that is the mean precision (right / predicted); recall divides by the class's "
                "true samples": np.mean(precisions),
                "skip the classes absent from y_true (their recall is undefined)":
                    np.mean(recall_all),
            }
            yield Case(f"length {len(y_true)}, {k} classes",
                       lambda a=y_true, b=y_pred, k=k: _call(balanced_accuracy, a, b, k),
                       np.array(np.mean(_recalls(y_true, y_pred, k))), "the balanced accuracy",
                       mistakes)
    return _verdict("check_balanced_accuracy", "balanced_accuracy", cases)


def check_confusion_matrix(confusion_matrix) -> Verdict:
    """``confusion_matrix(y_true, y_pred, n_classes)``: counts c[i, j] of the samples of true
    class i predicted as class j, an (n_classes, n_classes) integer array."""
    params = ("y_true", "y_pred", "n_classes")

    def cases():
        _function(confusion_matrix, "confusion_matrix", params)
        rng = _rng()
        for y_true, y_pred, k in ((np.array([2]), np.array([0]), 3),
                                  (rng.integers(0, 3, 50), rng.integers(0, 3, 50), 3),
                                  (np.array([0, 0, 1]), np.array([1, 1, 1]), 4),
                                  (rng.integers(0, 5, 301), rng.integers(0, 5, 301), 5)):
            want = np.zeros((k, k))
            np.add.at(want, (y_true, y_pred), 1)
            mistakes = {"rows are the true classes, columns the predictions: c[y_true, y_pred]":
                        want.T,
                        "count every sample: np.add.at, or a loop; c[y_true, y_pred] += 1 "
                        "counts a repeated pair once": np.minimum(want, 1)}
            yield Case(f"{len(y_true)} samples, {k} classes",
                       lambda a=y_true, b=y_pred, k=k: _call(confusion_matrix, a, b, k),
                       want, "the matrix", mistakes)
    return _verdict("check_confusion_matrix", "confusion_matrix", cases, rtol=0, atol=0)


# ---------------------------------------------------------------- notebook 03

def check_intensity(intensity) -> Verdict:
    """``intensity(batch, n_in, n_out)``: the FLOP per byte of a dense forward pass whose
    float32 operands x, W and y each move once between memory and the device (the bias is
    negligible), as ``benchmarks.roofline.dense_intensity``."""
    def cases():
        _function(intensity, "intensity", ("batch", "n_in", "n_out"))
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
                       lambda a=(batch, n_in, n_out): _call(intensity, *a),
                       np.array(flops / (4 * operands)), "the intensity", mistakes,
                       "FLOP = 2 batch n_in n_out; bytes = 4 (batch n_in + n_in n_out + "
                       "batch n_out)")
    return _verdict("check_intensity", "intensity", cases, rtol=1e-3, atol=0)


_DENSE_PARAMS = ("x", "w", "bias", "y", "batch", "n_in", "n_out", "act")
BLOCK = 4  # the R of kernels/blocked.cl: outputs per work-item along each dimension
SPEED_SHARE = 1.5  # the student's blocked kernel may take this many times nnlib's
ROUNDS = 9  # rounds of the three kernels launched back to back (the first warms up)


def _blocked_launch(kernel, x, w, b, act="tanh"):
    """``kernel`` (dense_forward_blocked's signature) over R x R blocks; returns (y, event)."""
    (batch, n_in), n_out = x.shape, w.shape[0]
    grid = (ceil_div(n_out, BLOCK), ceil_div(batch, BLOCK))
    y = _Output((batch, n_out), BLOCK * BLOCK * _guard(grid))
    limit = kernel.work_group_size
    local = (min(16, limit), max(1, min(4, limit // 16)))
    event = kernel(grid, local, _device(x).data, _device(w).data, _device(b).data,
                   y.array.data, np.int32(batch), np.int32(n_in), np.int32(n_out),
                   np.int32(ACTIVATIONS[act]))
    event.wait()
    return y, event


@_in_worker
def check_dense_forward_blocked(folder, speed: bool = True) -> Verdict:
    """``dense_forward_blocked`` in ``<folder>/blocked.cl``: right on awkward sizes and, with
    ``speed``, at least N times as fast as the one-work-item-per-output kernel
    (dense_forward_seed) on this device, N being the speedup nnlib's own blocked kernel
    reaches over it in the same run, divided by SPEED_SHARE. (On a GPU N is well above 1; on
    a CPU, where PoCL vectorizes the one-per-output kernel across work-items, it may not be.)"""
    def cases():
        kernel = _kernel(folder, "blocked", "dense_forward_blocked", _DENSE_PARAMS)
        rng = _rng()
        for batch, n_in, n_out, act in ((1, 13, 7, "tanh"), (5, 33, 17, "sigmoid"),
                                        (19, 38, 49, "relu"), (3, _wide(), 9, "none"),
                                        (6, 5, 4 * _wide() + 2, "leaky_relu")):
            x, w, _ = _dense_case(rng, batch, n_in, n_out)
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
    return _verdict("check_dense_forward_blocked", "dense_forward_blocked", cases)


def _speed_case(kernel, rng) -> Case:
    """Times the one-work-item-per-output kernel, nnlib's blocked kernel and the student's."""
    rt = get_runtime()
    naive = rt.launcher("dense", "dense_forward_seed")
    reference = rt.launcher("blocked", "dense_forward_blocked")
    batch, n_in, n_out = 128, 512, 512
    x, w, _ = _dense_case(rng, batch, n_in, n_out)
    b = np.zeros(n_out, np.float32)

    def naive_launch():
        y = rt.empty((batch, n_out))
        limit = naive.work_group_size
        event = naive((n_out, batch), (min(16, limit), max(1, min(4, limit // 16))),
                      _device(x).data, _device(w).data, _device(b).data, y.data,
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
        times = np.array([[_event_seconds(launch()[1]) for launch in launches]
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


def _event_seconds(event) -> float:
    return (event.profile.end - event.profile.start) * 1e-9


# ---------------------------------------------------------------- notebook 04

@_in_worker
def check_sgd_update(folder) -> Verdict:
    """``sgd_update(w, g, v, skip, n, lr, momentum, nesterov, weight_decay)`` in
    ``<folder>/optim.cl``; compares ``(w, v)`` after one step: [0, i] is w[i], [1, i] v[i]."""
    params = ("w", "g", "v", "skip", "n", "lr", "momentum", "nesterov", "weight_decay")

    def cases():
        vw = get_runtime().vector_width  # built and launched as nnlib.optim does
        kernel = _kernel(folder, "optim", "sgd_update", params, (f"-DVW={vw}",))
        rng = _rng()
        skip = _device(np.zeros(2, np.int32), np.int32)
        for n, momentum, nesterov, wd in ((1, 0.9, 0, 0.0), (37, 0.0, 0, 0.01),
                                          (_wide(), 0.9, 1, 0.01)):
            w, g, v = rng.standard_normal((3, n)).astype(np.float32)

            def run(w=w, g=g, v=v, momentum=momentum, nesterov=nesterov, wd=wd):
                w_dev = _Output(w.shape, _guard(w.shape), initial=w)
                v_dev = _Output(v.shape, _guard(v.shape), initial=v)
                _launch(kernel, (ceil_div(w.size, vw),), w_dev.array.data, _device(g).data,
                        v_dev.array.data, skip.data, np.int32(w.size), np.float32(0.1),
                        np.float32(momentum), np.int32(nesterov), np.float32(wd))
                return np.stack([w_dev.get("w"), v_dev.get("v")])
            w_new, v_new = ref.sgd_step(w, g, v, 0.1, momentum, bool(nesterov), wd)
            mistakes = {"the step has the wrong sign: w -= lr * step":
                        np.stack([2 * w - w_new, v_new]),
                        "the velocity is not stored: v[i] = the new velocity":
                        np.stack([w_new, v])}
            yield Case(f"n = {n}, momentum {momentum}, nesterov {nesterov}, decay {wd}", run,
                       np.stack([w_new, v_new]), "(w, v)", mistakes,
                       "g' = g + wd w; v = momentum v + g'; w -= lr v "
                       "(Nesterov: lr (g' + momentum v); momentum 0: lr g')")
    return _verdict("check_sgd_update", "sgd_update", cases)


@_in_worker
def check_adan_update(folder) -> Verdict:
    """``adan_update`` in ``<folder>/optim.cl`` (launched as nnlib.optim.Adan does) against
    ``nnlib.reference.adan_step``; compares (w, m, d, n, g_prev) after the first and after a
    later step."""
    params = ("w", "g", "m", "d", "nu", "g_prev", "skip", "n", "lr", "beta1", "beta2", "beta3",
              "eps", "weight_decay", "no_prox", "t", "step_size", "step_size_d", "sqrt_bc3")

    def cases():
        vw = get_runtime().vector_width
        kernel = _kernel(folder, "optim", "adan_update", params, (f"-DVW={vw}",))
        rng = _rng()
        skip = _device(np.zeros(2, np.int32), np.int32)
        lr, betas, eps = 0.01, (0.98, 0.92, 0.99), 1e-8
        # a decay large enough that dividing and multiplying differ beyond the tolerance
        # (at lr wd = 2e-4 the two rules agree to 1e-6)
        for n, t, wd, no_prox in ((1, 1, 0.0, 0), (37, 3, 3.0, 0), (_wide(), 2, 3.0, 1)):
            w, g, g_prev = rng.standard_normal((3, n)).astype(np.float32)
            m, d = (0.1 * rng.standard_normal((2, n))).astype(np.float32)
            nu = (0.1 * rng.random(n)).astype(np.float32)
            state = (w, m, d, nu, g_prev)
            bc1, bc2, bc3 = (1 - b**t for b in betas)

            def run(state=state, g=g, t=t, wd=wd, no_prox=no_prox, bc=(bc1, bc2, bc3)):
                outs = [_Output(a.shape, _guard(a.shape), initial=a) for a in state]
                _launch(kernel, (ceil_div(g.size, vw),), outs[0].array.data, _device(g).data,
                        *(o.array.data for o in outs[1:]), skip.data, np.int32(g.size),
                        np.float32(lr), *(np.float32(b) for b in betas), np.float32(eps),
                        np.float32(wd), np.int32(no_prox), np.int32(t),
                        np.float32(lr / bc[0]), np.float32(lr * betas[1] / bc[1]),
                        np.float32(np.sqrt(bc[2])))
                return np.stack([o.get(name) for o, name in
                                 zip(outs, ("w", "m", "d", "n", "g_prev"))])
            args = dict(lr=lr, betas=betas, eps=eps, weight_decay=wd, no_prox=bool(no_prox))
            want = np.stack(ref.adan_step(*(a.astype(np.float64) for a in (w, g, m, d, nu,
                                                                          g_prev)), t, **args))
            mistakes = {"store g in g_prev: the next step's difference needs it":
                        np.concatenate([want[:4], g_prev[None]])}
            if t > 1:
                no_diff = np.stack(ref.adan_step(*(a.astype(np.float64) for a in (
                    w, g, m, d, nu, g)), t, **args))
                mistakes["diff = g - g_prev (0 only on the first step)"] = no_diff
            if wd:
                other = dict(args, no_prox=not no_prox)
                mistakes["proximal decay (no_prox = 0) divides: w = (w - step) / (1 + lr wd); "
                         "no_prox multiplies: w (1 - lr wd) - step"] = np.stack(
                    ref.adan_step(*(a.astype(np.float64) for a in (w, g, m, d, nu, g_prev)),
                                  t, **other))
            yield Case(f"n = {n}, step {t}, decay {wd}{', no_prox' if no_prox else ''}", run,
                       want, "(w, m, d, n, g_prev)", mistakes,
                       "m, d, n are moving averages of g, diff and u^2 (u = g + beta2 diff), "
                       "see exercises.hint(\"adan_update\", 2)")
    return _verdict("check_adan_update", "adan_update", cases, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- notebook 05

@_in_worker
def check_cmulconj(folder) -> Verdict:
    """``cmulconj(a, b)`` = conj(a) * b in ``<folder>/complex.cl``, run through the
    ``complex_ops(a, b, out, n, op)`` kernel with op 1."""
    def cases():
        kernel = _kernel(folder, "complex", "complex_ops", ("a", "b", "out", "n", "op"))
        rng = _rng()
        for n in (1, 37, _wide()):
            a, b = _complex(rng, (2, n))

            def run(a=a, b=b):
                out = _Output(a.shape, _guard(a.shape), np.complex64)
                _launch(kernel, a.shape, _device(a, np.complex64).data,
                        _device(b, np.complex64).data, out.array.data, np.int32(a.size),
                        np.int32(1))
                return out.get("out")
            yield Case(f"n = {n}", run, np.conj(a) * b, "out",
                       {"the conjugate is missing: conj(a) flips the sign of a.y": a * b,
                        "conjugate a, not b": a * np.conj(b),
                        "conjugate a only, not the whole product": np.conj(a * b)},
                       "conj(a) b = (a.x b.x + a.y b.y) + i (a.x b.y - a.y b.x)")
    return _verdict("check_cmulconj", "cmulconj", cases)


@_in_worker
def check_fft_radix2_stage(folder) -> Verdict:
    """``fft_radix2_stage(src, dst, tw, rows, n, p, inverse, scale)`` in ``<folder>/fft.cl``:
    one Stockham radix-2 stage, compared with ``nnlib.reference.stockham_stage``."""
    params = ("src", "dst", "tw", "rows", "n", "p", "inverse", "scale")

    def cases():
        kernel = _kernel(folder, "fft", "fft_radix2_stage", params)
        rng = _rng()
        wide = 2 ** int(np.ceil(np.log2(_wide()))) * 2  # n/2 butterflies above the work-group limit
        for rows, n, p, inverse, scale in ((1, 8, 1, 0, 1.0), (3, 16, 4, 1, 0.5), (2, 8, 4, 0, 1.0),
                                           (1, wide, 2, 0, 1.0)):
            src = _complex(rng, (rows, n))
            tw = np.exp(-2j * np.pi * np.arange(n) / n)

            def run(src=src, tw=tw, p=p, inverse=inverse, scale=scale):
                rows, n = src.shape
                dst = _Output(src.shape, _guard((n, rows)), np.complex64)
                _launch(kernel, (n // 2, rows), _device(src, np.complex64).data, dst.array.data,
                        _device(tw, np.complex64).data, np.int32(rows), np.int32(n), np.int32(p),
                        np.int32(inverse), np.float32(scale))
                return dst.get("dst")
            stage = ref.stockham_stage(src, p, 2, bool(inverse)).astype(np.complex64)
            mistakes = {"inverse: conjugate the twiddle (w.y = -w.y)":
                        ref.stockham_stage(src, p, 2, not inverse) * scale}
            if scale != 1:
                mistakes["multiply both outputs by scale"] = stage
            yield Case(f"{rows} rows, n = {n}, p = {p}, {'inverse' if inverse else 'forward'}",
                       run, stage * np.complex64(scale), "dst", mistakes,
                       "k = j mod p, a = src[j], b = src[j + n/2] w^k; dst[2j - k] = a + b, "
                       "dst[2j - k + p] = a - b, both times scale")
    return _verdict("check_fft_radix2_stage", "fft_radix2_stage", cases, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- notebook 06

@_in_worker
def check_gumbel_softmax(folder) -> Verdict:
    """``gumbel_softmax_forward(logits, noise, soft, hard, rows, cols, tau)`` in
    ``<folder>/activation.cl``, compared as rows of soft followed by hard."""
    params = ("logits", "noise", "soft", "hard", "rows", "cols", "tau")

    def cases():
        kernel = _kernel(folder, "activation", "gumbel_softmax_forward", params)
        rng = _rng()
        for rows, cols, tau, size in ((1, 1, 1.0, 1.0), (1, 7, 1.0, 1.0), (13, 33, 0.5, 1.0),
                                      (_wide(), 5, 2.0, 1.0), (3, 6, 1.0, 60.0)):
            logits = (size * rng.standard_normal((rows, cols))).astype(np.float32)
            noise = (-np.log(-np.log(rng.uniform(1e-6, 1.0, (rows, cols))))).astype(np.float32)

            def run(logits=logits, noise=noise, tau=tau):
                rows, cols = logits.shape
                soft, hard = (_Output((rows, cols), cols * _guard((rows,))) for _ in "sh")
                _launch(kernel, (rows,), _device(logits).data, _device(noise).data,
                        soft.array.data, hard.array.data, np.int32(rows), np.int32(cols),
                        np.float32(tau))
                return np.concatenate([soft.get("soft"), hard.get("hard")], -1)

            def joined(soft, hard):
                return np.concatenate([soft, hard], -1)
            soft, hard = ref.gumbel_softmax(logits, noise, tau)
            mistakes = {"hard is the one-hot of soft's largest entry: 1 there, 0 elsewhere":
                        joined(soft, soft),
                        "add the Gumbel noise to the logits before dividing by tau":
                        joined(*ref.gumbel_softmax(logits, 0 * noise, tau))}
            if tau != 1:
                mistakes["divide logits + noise by the temperature tau"] = joined(
                    *ref.gumbel_softmax(logits, noise, 1.0))
            label = f"{rows} rows of {cols}, tau = {tau}" + (_LARGE if size > 1 else "")
            yield Case(label, run, joined(soft, hard), "soft | hard", mistakes,
                       "soft = softmax((logits + noise) / tau) with the row's largest value "
                       "subtracted before exp; hard = the one-hot of soft's largest entry")
    return _verdict("check_gumbel_softmax", "gumbel_softmax_forward", cases)


def _pairs(labels, scores):
    """The shares of (anomaly, normal) pairs where the anomaly scores higher, and equal."""
    pos, neg = scores[labels == 1][:, None], scores[labels == 0][None, :]
    return (pos > neg).mean(), (pos == neg).mean()


def check_auc_roc(auc_roc) -> Verdict:
    """``auc_roc(labels, scores)``: the probability that a random anomaly (label 1) scores
    higher than a random normal step (label 0), ties counting one half."""
    def cases():
        _function(auc_roc, "auc_roc", ("labels", "scores"))
        rng = _rng()
        labelled = [(np.array([0, 1]), np.array([0.2, 0.7])),
                    (np.array([1, 0, 0, 1, 0]), np.array([0.9, 0.1, 0.9, 0.3, 0.3])),
                    (rng.random(200) < 0.1, rng.integers(0, 6, 200).astype(float)),
                    (rng.random(1001) < 0.05, rng.standard_normal(1001))]
        for labels, scores in labelled:
            labels = labels.astype(np.int64)
            higher, tied = _pairs(labels, scores)
            mistakes = {"a tie between an anomaly and a normal step counts one half, not 0":
                        np.array(higher),
                        "a tie counts one half, not 1": np.array(higher + tied),
                        "an anomaly should score higher than a normal step: you counted the "
                        "pairs where it scores lower": np.array(1 - higher - tied / 2)}
            yield Case(f"{labels.size} steps ({labels.sum()} anomalous)"
                       + (", tied scores" if tied else ""),
                       lambda a=labels, b=scores: _call(auc_roc, a, b),
                       np.array(higher + tied / 2), "the AUC-ROC", mistakes,
                       "count the (anomaly, normal) pairs where the anomaly scores higher, "
                       "plus half the ties, over all such pairs")
    return _verdict("check_auc_roc", "auc_roc", cases, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------- notebook 07

@_in_worker
def check_masked_softmax(folder) -> Verdict:
    """The probabilities and log-sum-exp of ``masked_attention_forward(qkv, mask, out,
    probs, lse, groups, n, heads, dh, fill, hard)`` in ``<folder>/attention.cl``, compared
    with ``nnlib.reference.masked_attention_forward`` as rows of probs followed by lse."""
    params = ("qkv", "mask", "out", "probs", "lse", "groups", "n", "heads", "dh", "fill",
              "hard")

    def joined(probs, lse):
        return np.concatenate([probs, lse[..., None]], -1).astype(np.float32)

    def cases():
        kernel = _kernel(folder, "attention", "masked_attention_forward", params)
        rng = _rng()
        for groups, n, heads, dh, hard, size in ((1, 1, 1, 1, 0, 1.0), (3, 5, 2, 7, 0, 1.0),
                                                  (3, 5, 2, 7, 1, 1.0), (_wide(), 3, 2, 4, 1, 1.0),
                                                  (2, 6, 1, 4, 0, 40.0), (2, 6, 1, 4, 1, 40.0)):
            qkv = size * rng.standard_normal((groups, n, 3 * heads * dh))
            mask = (rng.random((groups, n, n)) < 0.5).astype(np.float32)
            mask[:, np.arange(n), np.arange(n)] = 1

            def run(qkv=qkv, mask=mask, heads=heads, dh=dh, hard=hard):
                groups, n = mask.shape[:2]
                grid = (n, heads, groups)
                probs = _Output((groups, heads, n, n), n * _guard(grid))
                lse = _Output((groups, heads, n), _guard(grid))
                out = _Output((groups, n, heads * dh), heads * dh * _guard(grid))
                _launch(kernel, grid, _device(qkv).data, _device(mask).data, out.array.data,
                        probs.array.data, lse.array.data, np.int32(groups), np.int32(n),
                        np.int32(heads), np.int32(dh), np.float32(FINITE_FILL),
                        np.int32(hard))
                return joined(probs.get("probs"), lse.get("lse"))
            _, probs, lse = ref.masked_attention_forward(qkv, mask, heads, hard=bool(hard))
            largest = probs.max(-1)  # exp(top - lse): the row's largest probability
            mistakes = {
                "lse = top + log(sum): add back the maximum taken out before exp":
                joined(probs, -np.log(largest)),
                "divide every exp by the row's sum": joined(probs / largest[..., None], lse)}
            if hard:
                unmasked = ref.masked_attention_forward(qkv, np.ones_like(mask), heads, hard=True)
                mistakes["the hard mask multiplies exp by m[j] (a masked key gets 0)"] = joined(
                    *unmasked[1:])
            hint = ("subtract the row's largest logit before exp (large logits overflow "
                    "otherwise), then divide by the sum")
            if hard and size > 1:
                hint = ("under the hard mask a masked key's logit may lie far above the kept "
                        "keys' maximum, so exp(a[j] - top) overflows and m[j] * inf is NaN: "
                        "give a masked key 0 without taking its exp")
            label = (f"{groups} groups, n = {n}, {heads} heads of {dh}, "
                     f"{'hard' if hard else 'finite'} mask" + (_LARGE if size > 1 else ""))
            yield Case(label, run, joined(probs, lse), "probs | lse", mistakes, hint)
    return _verdict("check_masked_softmax", "the masked softmax", cases)


@_in_worker
def check_revin_norm(folder) -> Verdict:
    """``revin_norm(x, out, mean, std, rows, t)`` in ``<folder>/catch.cl``, compared with
    ``nnlib.reference.revin_norm`` as rows of out followed by mean and std."""
    params = ("x", "out", "mean", "std", "rows", "t")

    def revin(x, ddof=0, eps=1e-5, root=True, divide=True, centre=True, after=0.0):
        """RevIN of the rows of x as [out | mean | std], or one of its typical mistakes."""
        mean = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True, ddof=ddof) + eps
        std = (np.sqrt(var) if root else var) + after
        shifted = x - mean if centre else x
        out = shifted / std if divide else shifted * std
        return np.concatenate([out, mean, std], -1)

    formula = ("out = (x - mean) / std with std = sqrt(var + 1e-5), the variance biased "
               "(divided by t)")
    kinds = {  # kind of rows -> (the case label's tail, the hint when no known mistake matches)
        "": ("", formula), "quiet": (", quiet rows (variance 1e-6)", formula),
        "constant": (", constant rows (variance 0)", "a constant channel has variance 0: "
                     "std = sqrt(var + 1e-5) keeps x - mean = 0 divided by a number that is not 0"),
        "offset": (", mean 100", "E[x^2] - mean^2 loses the variance when the mean is large "
                   "(float32 cancellation): take the mean first, then the mean of (x - mean)^2, "
                   "as mean_var does")}

    def cases():
        kernel = _kernel(folder, "catch", "revin_norm", params)
        rng = _rng()
        for rows, t, kind in ((1, 1, ""), (1, 7, ""), (13, 33, ""), (_wide(), 5, ""),
                              (3, 9, "constant"), (4, 40, "quiet"), (6, 48, "offset")):
            x = rng.standard_normal((rows, t))
            if kind == "constant":  # a dead sensor: variance 0
                x = np.full((rows, t), 3.0)
            elif kind == "quiet":  # variance 1e-6, well below the 1e-5 added to it
                x *= 1e-3
            elif kind == "offset":  # a large mean: E[x^2] - mean^2 cancels in float32
                x += 100.0
            x = x.astype(np.float32).astype(np.float64)

            def run(x=x):
                rows, t = x.shape
                out = _Output((rows, t), t * _guard((rows,)))
                mean, std = (_Output((rows, 1), _guard((rows,))) for _ in "ms")
                _launch(kernel, (rows,), _device(x).data, out.array.data, mean.array.data,
                        std.array.data, np.int32(rows), np.int32(t))
                return np.concatenate([out.get("out"), mean.get("mean"), std.get("std")], -1)
            mistakes = {"std is a square root: std = sqrt(var + 1e-5)": revin(x, root=False),
                        "divide x - mean by std, do not multiply": revin(x, divide=False),
                        "subtract the row's mean before dividing by std": revin(x, centre=False)}
            if t > 1:
                mistakes["the variance divides by t (biased, as RevIN's), not t - 1"] = revin(
                    x, ddof=1)
            if t > 1 and kind != "constant":
                mistakes["add 1e-5 to the variance before the square root"] = revin(x, eps=0.0)
                mistakes["add 1e-5 to the variance inside the square root, not to std"] = revin(
                    x, eps=0.0, after=1e-5)
            tail, hint = kinds["constant" if t == 1 else kind]
            label = f"{rows} row{'s' * (rows > 1)} of {t}{tail if t > 1 else ''}"
            yield Case(label, run, revin(x), "out | mean | std", mistakes, hint)
    return _verdict("check_revin_norm", "RevIN", cases, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- hints

HINTS = {  # exercise -> hints, a nudge first, then the formula
    "vector_add": (
        "The global size is rounded up to whole work-groups: some work-items have no element.",
        "i = get_global_id(0); if (i < n) out[i] = a[i] + b[i];"),
    "vector_scale": (
        "Like vector_add, one element per work-item; alpha arrives as a float argument.",
        "i = get_global_id(0); if (i < n) out[i] = alpha * a[i];"),
    "dense_forward": (
        "One work-item per output value y[b, j]: j = get_global_id(0), b = get_global_id(1). "
        "Which row of x and which row of W does its dot product use?",
        "y[b * n_out + j] = activate(bias[j] + sum_k x[b * n_in + k] * w[j * n_in + k], act), "
        "after returning at once if j >= n_out or b >= batch."),
    "dense_backward_input": (
        "dx = dz W: one work-item per (input i, sample b) walks the column i of W.",
        "dx[b * n_in + i] = sum_j dz[b * n_out + j] * w[j * n_in + i]."),
    "dense_backward_weight": (
        "dW = dz^T x: one work-item per weight (i, j) sums over the batch, and gradients "
        "accumulate.",
        "dw[j * n_in + i] += sum_b dz[b * n_out + j] * x[b * n_in + i]."),
    "activation_grad": (
        "The derivative of each activation can be written with its output y = f(z).",
        "tanh: 1 - y^2; sigmoid: y (1 - y); relu: 1 where y > 0; leaky_relu: 1 where y > 0, "
        "else LEAKY_SLOPE; none: 1."),
    "output_gradient": (
        "Differentiate the mean loss with respect to the output (MSE) or the logits "
        "(softmax + cross-entropy).",
        "d = y - t; MSE: 2 d inv_count activate_grad(y, act); cross-entropy: d inv_count."),
    "balanced_accuracy": (
        "A class's recall is the share of its true samples predicted as it.",
        "np.mean([np.mean(y_pred[y_true == k] == k) for k in classes present in y_true])."),
    "confusion_matrix": (
        "Count each (true, predicted) pair: row = the true class, column = the prediction.",
        "np.add.at(c, (y_true, y_pred), 1) on c = np.zeros((n_classes, n_classes), int)."),
    "intensity": (
        "Count the floating-point operations of x W^T and the bytes that must at least move "
        "once between memory and the device.",
        "flops = 2 batch n_in n_out; bytes = 4 (batch n_in + n_in n_out + n_out + "
        "batch n_out); intensity = flops / bytes."),
    "dense_forward_blocked": (
        "Keep an R x R block of sums in registers: per step of k, load R float4 of x and R "
        "of W, and use each in R dot products.",
        "acc[r][c] += dot(vload4(0, x + (b0 + r) n_in + k), vload4(0, w + (j0 + c) n_in + k)) "
        "for k in steps of 4, the tail one by one; store activate(acc[r][c] + bias[j0 + c]) "
        "where b0 + r < batch and j0 + c < n_out."),
    "sgd_update": (
        "Weight decay goes into the gradient first; momentum keeps a velocity per weight.",
        "g' = g + wd w; v = momentum v + g'; w -= lr v (Nesterov: lr (g' + momentum v); "
        "momentum 0: lr g')."),
    "adan_update": (
        "Adan keeps three moments: of g, of the gradient difference g - g_prev, and of the "
        "squared look-ahead u = g + beta2 (g - g_prev).",
        "m = b1 m + (1-b1) g; d = b2 d + (1-b2) diff; n = b3 n + (1-b3) u^2; "
        "denom = sqrt(n) / sqrt_bc3 + eps; step = step_size m/denom + step_size_d d/denom; "
        "w = (w - step) / (1 + lr wd); g_prev = g."),
    "cmulconj": (
        "conj(a) flips the sign of the imaginary part of a; then multiply as complex numbers.",
        "conj(a) b = (a.x b.x + a.y b.y) + i (a.x b.y - a.y b.x)."),
    "fft_radix2_stage": (
        "One work-item per butterfly j: it reads src[j] and src[j + n/2] and writes two "
        "outputs p apart.",
        "k = j mod p; w = tw[k (n/2) / p] (conjugated if inverse); a = src[j], "
        "b = src[j + n/2] w; dst[2j - k] = (a + b) scale, dst[2j - k + p] = (a - b) scale."),
    "masked_softmax": (
        "Subtract the row's largest kept logit before exp; a masked key under the hard mask "
        "must get 0 without computing its exp.",
        "a[j] = masked_logit(...); top = max over kept keys; a[j] = hard ? (m[j] != 0 ? m[j] "
        "exp(a[j] - top) : 0) : exp(a[j] - top); divide by the sum; lse = top + log(sum)."),
    "revin_norm": (
        "One work-item per row: the row's mean, its variance (biased: divided by t), then "
        "every value shifted and scaled; mean[r] and std[r] are outputs too.",
        "if (r >= rows) return; (m, var) = mean_var(x + r t, t), two passes; s = sqrt(var + "
        "1e-5); out[r t + i] = (x[r t + i] - m) / s; mean[r] = m; std[r] = s."),
    "gumbel_softmax": (
        "Noise first, then temperature, then a stable softmax; hard is a one-hot, not a copy.",
        "y = (z + g) / tau; soft = exp(y - max y) / sum; hard[c] = c == argmax soft ? 1 : 0."),
    "auc_roc": (
        "Compare every anomaly's score with every normal step's score.",
        "AUC = mean over (anomaly, normal) pairs of [s_a > s_n] + 0.5 [s_a == s_n]."),
}


def hint(name: str, level: int = 1) -> None:
    """Prints a hint for the exercise ``name`` (e.g. "dense_forward"): level 1 a nudge, 2 the
    formula."""
    name = name.removeprefix("check_")
    if name not in HINTS:
        raise KeyError(f"no exercise named {name!r}; known: {', '.join(sorted(HINTS))}")
    tiers = HINTS[name]
    if not 1 <= level <= len(tiers):
        raise ValueError(f"hint levels for {name} are 1 (a nudge) to {len(tiers)} (the formula)")
    print(tiers[level - 1])
