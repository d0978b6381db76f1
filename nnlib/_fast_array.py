"""Internal: device arrays built with pyopencl's unchecked constructor.

pyopencl's public ``Array(...)`` checks its arguments, a noticeable part of a batch-1
training step's host time. Its own ``empty_like`` uses the unchecked form, with
private keyword arguments (``_fast``, ``_size``, ``_context``, ``_queue``); this module is
the one place nnlib relies on them (tests/test_runtime.py checks the result's layout).
"""

from __future__ import annotations

import math

import numpy as np
import pyopencl as cl
import pyopencl.array as cla


def c_strides(shape: tuple, itemsize: int) -> tuple:
    """The strides of a C-contiguous array of ``shape``."""
    strides, stride = [], itemsize
    for n in shape[::-1]:
        strides.append(stride)
        stride *= n or 1
    return tuple(strides[::-1])


def is_c_contiguous(array: cla.Array) -> bool:
    """``array.flags.c_contiguous`` without building pyopencl's flags object."""
    return array.strides == c_strides(array.shape, array.dtype.itemsize) or \
        array.flags.c_contiguous  # a size-1 axis may carry any stride


def _array(shape: tuple, dtype: np.dtype, context, queue, **kwargs) -> cla.Array:
    return cla.Array(None, shape, dtype, strides=c_strides(shape, dtype.itemsize), _fast=True,
                     _size=math.prod(shape), _context=context, _queue=queue, **kwargs)


def empty(shape: tuple, dtype: np.dtype, allocator, context, queue) -> cla.Array:
    """An uninitialised C-contiguous array of ``shape`` (a tuple of ints >= 0)."""
    return _array(shape, dtype, context, queue, allocator=allocator)


def copy_of(host: np.ndarray, context, queue) -> cla.Array:
    """A device array holding a copy of the C-contiguous, non-empty ``host``, in a buffer of
    its own made with CL_MEM_COPY_HOST_PTR: the bytes are copied before this returns, outside
    the queue, so it neither waits for queued kernels nor makes them wait."""
    data = cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                     hostbuf=host)
    return _array(host.shape, host.dtype, context, queue, data=data)


def reshape(array: cla.Array, shape: tuple) -> cla.Array:
    """``array.reshape(shape)`` (one axis may be -1) on the same buffer, offset and events,
    built with the unchecked constructor when ``array`` is C-contiguous; pyopencl's own
    reshape (its stride search and its errors) otherwise."""
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        if known and shape.count(-1) == 1:
            shape = tuple(array.size // known if n == -1 else n for n in shape)
    if math.prod(shape) != array.size or not array.size or not is_c_contiguous(array):
        return array.reshape(shape)
    return _array(shape, array.dtype, array.context, array.queue, data=array.base_data,
                  offset=array.offset, events=array.events, allocator=array.allocator)
