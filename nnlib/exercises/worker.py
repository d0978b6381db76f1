"""The worker process that runs kernel checks: a kernel that crashes or never ends becomes a
verdict instead of killing the notebook, and Ctrl-C stops a check. ``simulate=True`` runs the
check on the Oclgrind simulator, whose messages (the line of an out-of-bounds access) join the
report."""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from .verdicts import Verdict

TIMEOUT = 60.0  # seconds a kernel check may take on a device (Oclgrind: SIMULATED_TIMEOUT)
SIMULATED_TIMEOUT = 600.0


KERNEL_CHECKS: dict = {}  # name -> the check itself, run inside the worker
IN_WORKER = False


class Worker:
    """A child process that runs kernel checks, started on first use and reused (one OpenCL
    initialisation per session); a crash or a timeout ends it and the next check starts
    another."""

    def __init__(self, simulate: bool):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=serve, args=(child, simulate), daemon=True)
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


WORKERS: dict = {}  # simulate -> its worker


def serve(conn, simulate: bool) -> None:
    """The worker's loop: run each check asked for and send back its verdict."""
    global IN_WORKER
    IN_WORKER = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends this process
    if simulate:
        from ..runtime import use_device
        use_device("oclgrind")
    while True:
        try:
            name, args, kwargs = conn.recv()
        except EOFError:
            return
        with stderr_captured(simulate) as said:
            try:
                verdict = KERNEL_CHECKS[name](*args, **kwargs)
            except Exception as err:  # a bug of the check itself: report it, keep serving
                verdict = Verdict(name, False,
                                  f"{name}: the check failed: {type(err).__name__}: {err}")
        if said:
            verdict.report += "\nOclgrind says:\n" + "\n".join(f"    {line}" for line in said)
        conn.send(verdict)


@contextlib.contextmanager
def stderr_captured(capture: bool):
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


def in_worker(check):
    """Run ``check(folder, ...)`` in the worker process, with a time limit."""
    KERNEL_CHECKS[check.__name__] = check

    @functools.wraps(check)
    def run(folder, *args, simulate: bool = False, timeout: float | None = None, **kwargs):
        if IN_WORKER:
            return check(folder, *args, **kwargs)
        worker = WORKERS.get(simulate)
        if worker is None or not worker.process.is_alive():
            worker = WORKERS[simulate] = Worker(simulate)
        limit = timeout or (SIMULATED_TIMEOUT if simulate else TIMEOUT)
        try:
            return worker.call(check.__name__, (str(Path(folder).resolve()), *args), kwargs,
                               limit)
        except BaseException:  # Ctrl-C (or anything else): the worker's state is unknown
            worker.stop()
            WORKERS.pop(simulate, None)
            raise
    return run


