"""Launcher: one call site's kernel, whose arguments are set again only when they change.

pyopencl sets every argument of a kernel on every call, a few microseconds each: a kernel
with a dozen arguments costs 25-50 µs of host time per launch, while the enqueue itself
costs 1-2 µs. In a training step the same kernels run with the same buffers (the memory
pool hands back the same ones) and the same sizes every time, so a Launcher keeps its own
copy of the kernel and compares each argument with the last launch's: buffers by their
OpenCL handle, numbers by type and value. Setting and enqueueing happen under the runtime's
lock, so a launcher shared by two threads never enqueues another call's arguments.
"""

from __future__ import annotations

import pyopencl as cl


class Launcher:
    """Enqueue ``kernel`` like ``Runtime.launch`` (the global size padded to a multiple of the
    local size), setting only the arguments that differ from the previous launch."""

    def __init__(self, runtime, kernel: cl.Kernel):
        self.runtime = runtime
        self.kernel = cl.Kernel(kernel.program, kernel.function_name)  # its own arguments
        self.name = kernel.function_name
        self._last = [None] * kernel.num_args

    def __call__(self, global_size, local_size, *args) -> cl.Event:
        if local_size is not None:
            global_size = [-(-g // n) * n for g, n in zip(global_size, local_size)]
        last = self._last
        with self.runtime.lock:
            for i, arg in enumerate(args):
                key = (arg.int_ptr if isinstance(arg, cl.MemoryObjectHolder)
                       else (arg.__class__, arg))
                if key != last[i]:
                    self.kernel.set_arg(i, arg)
                    last[i] = key
            return cl.enqueue_nd_range_kernel(self.runtime.queue, self.kernel, global_size,
                                              local_size)
