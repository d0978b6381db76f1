"""The worker process that runs the checks: a kernel that crashes or never ends, or a function
that sleeps, exits or kills its process, becomes a verdict instead of taking the notebook (or a
teacher's grading run) with it; Ctrl-C stops a check. ``simulate=True`` runs a kernel check on
the Oclgrind simulator, whose messages (the line of an out-of-bounds access) join the report.

The student's function travels to the worker by value (cloudpickle), and is unpacked there with
the exercise's shortcuts (a library call that computes the answer) unavailable. What the code
prints is kept out of the caller's output: the report shows its first lines."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import cloudpickle

from .verdicts import NotYet, Verdict

TIMEOUT = 60.0  # seconds a check may take on a device (Oclgrind: SIMULATED_TIMEOUT)
SIMULATED_TIMEOUT = 600.0
SHOWN_LINES = 20  # lines of the student's printed output a report shows

CHECKS: dict = {}  # check name -> (the check itself, its shortcuts), run inside the worker
IN_WORKER = False


class Worker:
    """A child process that runs checks, started on first use and reused (one OpenCL
    initialisation per session); a crash or a timeout ends it and the next check starts
    another. It ends itself when its caller dies."""

    def __init__(self, simulate: bool):
        if multiprocessing.current_process().daemon:
            raise NotYet("checks cannot run inside a multiprocessing.Pool worker (a daemonic "
                         "process may not start the check's worker process): call the check "
                         "from the main process, or use concurrent.futures."
                         "ProcessPoolExecutor, whose workers may")
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        with tempfile.NamedTemporaryFile(prefix="nnlib-check-", suffix=".out",
                                         delete=False) as printed:
            self.printed = Path(printed.name)
        self.process = ctx.Process(target=serve, daemon=True,
                                   args=(child, simulate, os.getpid(), str(self.printed)))
        with _script_not_rerun():
            self.process.start()
        child.close()

    def stop(self):
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()
        self.printed.unlink(missing_ok=True)

    def call(self, name: str, payload: bytes, timeout: float, kernel: bool) -> Verdict:
        self.conn.send((name, payload))
        code = "kernel" if kernel else "function"
        deadline = time.monotonic() + timeout
        while not self.conn.poll(0.05):  # short waits: Ctrl-C is seen between them
            if not self.process.is_alive():
                break
            if time.monotonic() > deadline:
                printed = _printed_lines(self.printed)
                self.stop()
                if printed > 10 * SHOWN_LINES:
                    return Verdict(name, False, f"{name}: not yet. Your {code} printed "
                                                f"{printed} lines and did not finish in "
                                                f"{timeout:g} s: a print inside a loop that "
                                                f"never ends?")
                return Verdict(name, False, f"{name}: not yet. Your {code} did not finish in "
                                            f"{timeout:g} s: an endless loop (a loop whose "
                                            f"counter never reaches its bound)?")
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self.stop()
            if not kernel:
                return Verdict(name, False, f"{name}: not yet. Your function ended the "
                                            f"checker's process (os._exit, a signal, or a crash "
                                            f"in native code): return a value instead.")
            return Verdict(name, False, f"{name}: not yet. Your kernel crashed: probably an "
                                        f"out-of-bounds access; run it under Oclgrind with "
                                        f"exercises.{name}(..., simulate=True), which names "
                                        f"the line.")


WORKERS: dict = {}  # simulate -> its worker


@contextlib.contextmanager
def _script_not_rerun():
    """Hides the caller's ``__main__`` from spawn while the worker starts: spawn would re-run a
    script without an ``if __name__ == "__main__":`` guard in the child (which needs nothing
    from it: the checks live in nnlib, the student's function travels by value)."""
    main = sys.modules["__main__"]
    saved = {key: main.__dict__.pop(key) for key in ("__file__",) if key in main.__dict__}
    spec = getattr(main, "__spec__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.update(saved)
        main.__spec__ = spec


def _printed_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0


def _die_with(parent: int) -> None:
    """Ends this process when ``parent`` is gone (Linux: at once; elsewhere within a second)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


def serve(conn, simulate: bool, parent: int, printed: str) -> None:
    """The worker's loop: run each check asked for and send back its verdict."""
    global IN_WORKER
    IN_WORKER = True
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends this process
    out = os.open(printed, os.O_RDWR | os.O_TRUNC)
    os.dup2(out, 1)  # what the student's code prints goes to the report, not the caller
    if simulate:
        from ..runtime import use_device
        # Oclgrind stops reporting after 1000 errors in a process: a long-lived worker would
        # then pass a faulty kernel silently
        os.environ["OCLGRIND_MAX_ERRORS"] = "1000000000"
        use_device("oclgrind")
    while True:
        try:
            name, payload = conn.recv()
        except EOFError:
            return
        with stderr_captured(simulate) as said:
            verdict = _run(name, payload)
        sys.stdout.flush()
        shown = _take_printed(out, printed)
        if shown:
            verdict.report += "\nYour code printed:\n" + shown
        if said:
            verdict.report += "\nOclgrind says:\n" + "\n".join(f"    {line}" for line in said)
        conn.send(verdict)


def _run(name: str, payload: bytes) -> Verdict:
    check, shortcuts = CHECKS[name]
    try:
        with shortcuts_blocked(shortcuts):
            subject, args, kwargs = cloudpickle.loads(payload)
            return check(subject, *args, **kwargs)
    except ImportError as err:
        return Verdict(name, False, f"{name}: not yet. Your function uses {err.name or err}, "
                                    f"which this exercise leaves out: the point is to compute "
                                    f"it yourself, with numpy.")
    except NotYet as err:
        return Verdict(name, False, f"{name}: not yet. {err}")
    except Exception as err:  # a bug of the check itself: report it, keep serving
        return Verdict(name, False, f"{name}: the check failed: {type(err).__name__}: {err}")


def _take_printed(fd: int, path: str) -> str:
    """The first lines printed since the last check (then forgotten), indented."""
    count = _printed_lines(Path(path))
    os.lseek(fd, 0, os.SEEK_SET)
    lines = os.read(fd, 64 * 1024).decode(errors="replace").splitlines()[:SHOWN_LINES]
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    shown = [f"    {line[:200]}" for line in lines]
    if count > len(lines):
        shown.append(f"    ... ({count - len(lines)} more lines)")
    return "\n".join(shown)


class Shortcut(Exception):
    """Raised by a library function an exercise asks the student to write instead."""


@contextlib.contextmanager
def shortcuts_blocked(shortcuts: tuple):
    """Makes each shortcut unavailable: ``"sklearn"`` a module (importing it fails),
    ``"nnlib.catch.metrics:auc_roc"`` one function (calling it raises :class:`Shortcut`)."""
    patched = []
    for module, attr in (s.split(":") for s in shortcuts if ":" in s):
        owner = importlib.import_module(module)
        patched.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, _refusing(f"{module}.{attr}"))
    modules = {name: sys.modules.get(name) for name in list(sys.modules)
               if any(name == s or name.startswith(f"{s}.") for s in shortcuts if ":" not in s)}
    for shortcut in shortcuts:
        if ":" not in shortcut:
            sys.modules[shortcut] = None
    for name in modules:
        sys.modules[name] = None
    try:
        yield
    finally:
        for shortcut in shortcuts:
            if ":" not in shortcut:
                sys.modules.pop(shortcut, None)
        for name, module in modules.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        for owner, attr, original in patched:
            setattr(owner, attr, original)


def _refusing(name: str):
    def refuse(*args, **kwargs):
        raise Shortcut(f"{name} computes the answer this exercise asks you to write: use numpy")
    return refuse


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


def in_worker(check, kernel: bool = True, shortcuts: tuple = ()):
    """Run ``check(subject, ...)`` in the worker process, with a time limit: ``subject`` is the
    folder of the student's kernels (``kernel``) or the student's function."""
    name = check.__name__
    CHECKS[name] = (check, tuple(shortcuts))

    @functools.wraps(check)
    def run(subject, *args, simulate: bool = False, timeout: float | None = None, **kwargs):
        if IN_WORKER:
            return check(subject, *args, **kwargs)
        if kernel:
            subject = str(Path(subject).resolve())
        try:
            payload = cloudpickle.dumps((subject, args, kwargs))
        except Exception as err:
            return Verdict(name, False, f"{name}: not yet. Your function could not be sent to "
                                        f"the checker ({type(err).__name__}: {err}): let it use "
                                        f"only numpy and plain Python values.")
        try:
            worker = WORKERS.get(simulate)
            if worker is None or not worker.process.is_alive():
                worker = WORKERS[simulate] = Worker(simulate)
        except NotYet as err:
            return Verdict(name, False, f"{name}: not yet. {err}")
        limit = timeout or (SIMULATED_TIMEOUT if simulate else TIMEOUT)
        try:
            return worker.call(name, payload, limit, kernel)
        except BaseException:  # Ctrl-C (or anything else): the worker's state is unknown
            worker.stop()
            WORKERS.pop(simulate, None)
            raise
    return run
