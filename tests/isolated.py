"""Run a fault scenario in its own Python process: a segfault fails one test, not the run.

The process ends with ``os._exit`` once the scenario has run: PoCL (Debian's 3.1 as PyPI's
3.0) sometimes crashes in its own teardown at exit when the process built kernels, about one
process in five on 2 busy cores with a cold kernel cache. That is the driver's exit, not
what the scenario tests."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXIT = "\nimport os, sys\nsys.stdout.flush()\nsys.stderr.flush()\nos._exit(0)\n"


def child_env(base=None, **settings) -> dict:
    """The environment of a child Python: ``base`` (default ``os.environ``) and ``settings``,
    with this repository's nnlib first on PYTHONPATH and the caller's path after it (where a
    machine keeps packages there)."""
    env = {**(os.environ if base is None else base), **settings}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def run_isolated(code: str, timeout: float = 300, args=()) -> str:
    """Run ``code`` (dedented) with this repository's nnlib first on the path; return its
    stdout. Fails with the exit status (a negative one names the signal) and stderr."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code) + EXIT, *map(str, args)],
                         capture_output=True, text=True, timeout=timeout, env=child_env(),
                         cwd=ROOT)
    assert run.returncode == 0, (
        f"exit status {run.returncode}\n--- stdout\n{run.stdout[-3000:]}\n"
        f"--- stderr\n{run.stderr[-3000:]}")
    return run.stdout
