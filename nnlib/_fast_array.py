"""Internal: a device array built with pyopencl's unchecked constructor.

pyopencl's public ``Array(...)`` checks its arguments, which costs about 9 µs: a tenth of a
batch-1 training step's host time. Its own ``empty_like`` uses the unchecked form, with
private keyword arguments (``_fast``, ``_size``, ``_context``, ``_queue``); this module is
the one place nnlib relies on them (tests/test_runtime.py checks the result's layout).
"""

from __future__ import annotations

import math

import numpy as np
import pyopencl.array as cla


def empty(shape: tuple, dtype: np.dtype, allocator, context, queue) -> cla.Array:
    """An uninitialised C-contiguous array of ``shape`` (a tuple of ints >= 0)."""
    strides, stride = [], dtype.itemsize
    for n in shape[::-1]:
        strides.append(stride)
        stride *= n or 1
    return cla.Array(None, shape, dtype, allocator=allocator, strides=tuple(strides[::-1]),
                     _fast=True, _size=math.prod(shape), _context=context, _queue=queue)
