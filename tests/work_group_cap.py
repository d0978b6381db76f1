"""A pytest plugin (``-p tests.work_group_cap``) for the run that tests/test_work_groups.py
starts under NNLIB_MAX_WORK_GROUP: it records every kernel enqueued (its name, how often,
the largest work-group it ran with, whether a launch left the work-group to the driver) and
every kernel of pyopencl's own (array arithmetic, fill, reductions), and writes them with
the run's exit status to the JSON file that WORK_GROUP_LOG names."""

import json
import math
import os
import sys
from pathlib import Path

import pyopencl as cl
import pyopencl.array as cla
import pyopencl.elementwise
import pyopencl.reduction

LOG = "WORK_GROUP_LOG"
launches: dict = {}  # kernel name -> {"count", "largest" work-group, "driver": left to it}
helpers: list = []  # names of pyopencl's own kernels launched


def _record(kernel, local_size) -> None:
    entry = launches.setdefault(kernel.function_name,
                                {"count": 0, "largest": 0, "driver": False})
    entry["count"] += 1
    if local_size is None:
        entry["driver"] = True
    else:
        entry["largest"] = max(entry["largest"], math.prod(local_size))


def _recording_enqueue(enqueue):
    def recording(queue, kernel, global_size, local_size, *args, **kwargs):
        _record(kernel, local_size)
        return enqueue(queue, kernel, global_size, local_size, *args, **kwargs)
    return recording


def _recording_helper(cls):
    call = cls.__call__

    def recording(self, *args, **kwargs):
        helpers.append(f"{cls.__name__} {getattr(self, 'name', '')} from {_caller()}")
        return call(self, *args, **kwargs)
    cls.__call__ = recording


def _caller() -> str:
    """Where the code outside pyopencl that led to this call is, as ``file:line``."""
    frame = sys._getframe(2)
    while frame and "pyopencl" in frame.f_code.co_filename:
        frame = frame.f_back
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}" if frame else "?"


def _array_hook(kernel, queue, global_size, local_size, *args, wait_for=None):
    helpers.append(f"pyopencl.array {kernel.function_name} from {_caller()}")
    return kernel(queue, global_size, local_size, *args, wait_for=wait_for)


def pytest_configure(config):
    cl.enqueue_nd_range_kernel = _recording_enqueue(cl.enqueue_nd_range_kernel)
    cla.ARRAY_KERNEL_EXEC_HOOK = _array_hook
    _recording_helper(pyopencl.elementwise.ElementwiseKernel)
    _recording_helper(pyopencl.reduction.ReductionKernel)


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ[LOG], "w") as f:
        json.dump({"exitstatus": int(exitstatus), "launches": launches, "helpers": helpers},
                  f, indent=1)
