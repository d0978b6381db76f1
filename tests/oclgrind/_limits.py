"""The limits a script runs its kernels under, from its command line: ``gpu`` (the limits of
NNLIB_PROFILE=gpu), ``vwN`` (Oclgrind's own limits with a preferred vector width of N), or
nothing (Oclgrind's own limits)."""

import sys
from dataclasses import replace

import nnlib


def oclgrind_runtime():
    """The default runtime on Oclgrind, with the limits named by ``sys.argv[1]``."""
    config = sys.argv[1] if len(sys.argv) > 1 else "device"
    rt = nnlib.use_device("oclgrind", profile="gpu" if config == "gpu" else "device")
    if config.startswith("vw"):
        rt.limits = replace(rt.limits, vector_width=int(config[2:]))
    elif config not in ("gpu", "device"):
        raise SystemExit(f"unknown configuration {config!r}: gpu, vwN or nothing")
    return rt, config
