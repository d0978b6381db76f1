"""What a kernel launch and a host<->device copy cost: why batch 1 is launch-bound.

    .venv/bin/python -m nnlib.bench.launch [--count 200] [--repeat 7] [--pocl-threads 2]

Microseconds (medians) per: enqueue of a tiny kernel (arguments set beforehand, as
pyopencl's call does them, and through nnlib's ``Launcher``, which declares the numbers'
types and sets every argument, with new arguments each time and with the same ones);
the preset enqueue again on a queue that records kernel times (``profiling=True``: some
drivers charge for it at every launch); enqueue followed by ``queue.finish()`` (a
synchronous round trip); blocking copies host -> device and device -> host of 64 bytes to
16 MiB; and the device time of the tiny kernel from profiling events.
Writes build/bench/launch.json.

Used in notebooks/03_cpu_vs_gpu.
"""

import argparse
import itertools

import numpy as np

from .common import environment, median_s, set_pocl_threads, shown, write_json

SIZES = (64, 4096, 2**20, 2**24)  # bytes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="launches per timed run")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--pocl-threads", type=int, default=None)
    args = parser.parse_args(argv)
    set_pocl_threads(args.pocl_threads)

    import pyopencl as cl

    import nnlib
    from nnlib.runtime import Runtime, time_kernel

    rt = nnlib.get_runtime()
    timed = Runtime(rt.device, rt.profile, rt.cap, profiling=True)  # records kernel times
    n = 256
    a = rt.zeros((n,))
    out, other = rt.empty((n,)), rt.empty((n,))
    launcher = rt.launcher("vector", "vector_add")
    # pyopencl's own kernel objects, from the runtimes' programs (not launcher.kernel.program:
    # Intel's runtime answers that query with a released program once the runtime's cache has
    # let it go)
    kernel = cl.Kernel(rt.program("vector"), "vector_add")
    timed_kernel = cl.Kernel(timed.program("vector"), "vector_add")
    count = args.count

    def per_launch(enqueue, queue=rt.queue):
        def run():
            for _ in range(count):
                enqueue()
            queue.finish()
        return median_s(run, args.repeat) / count * 1e6

    kernel.set_args(a.data, a.data, out.data, np.int32(n))
    ta, tout = timed.zeros((n,)), timed.empty((n,))
    timed_kernel.set_args(ta.data, ta.data, tout.data, np.int32(n))
    timed_launcher = timed.launcher("vector", "vector_add")
    outs = itertools.cycle([out, other])  # a changed argument on every launch
    rows = [
        {"what": "enqueue, arguments preset",
         "us": per_launch(lambda: cl.enqueue_nd_range_kernel(rt.queue, kernel, (n,), None))},
        {"what": "enqueue, arguments preset, profiling queue",
         "us": per_launch(lambda: cl.enqueue_nd_range_kernel(timed.queue, timed_kernel, (n,),
                                                             None), timed.queue)},
        {"what": "enqueue, pyopencl call",
         "us": per_launch(lambda: kernel(rt.queue, (n,), None, a.data, a.data, out.data,
                                         np.int32(n)))},
        {"what": "enqueue, Launcher (new arguments)",
         "us": per_launch(lambda: launcher((n,), None, a.data, a.data, next(outs).data,
                                           np.int32(n)))},
        {"what": "enqueue, Launcher (same arguments)",
         "us": per_launch(lambda: launcher((n,), None, a.data, a.data, out.data,
                                           np.int32(n)))},
        {"what": "enqueue + finish (round trip)",
         "us": median_s(lambda: (launcher((n,), None, a.data, a.data, out.data,
                                          np.int32(n)), rt.queue.finish()), args.repeat * 20)
         * 1e6},
        {"what": "kernel run time (profiling event)",
         "us": time_kernel(lambda: timed_launcher((n,), None, ta.data, ta.data, tout.data,
                                                  np.int32(n))) * 1e3},
    ]
    for size in args.sizes:
        host = np.zeros(size // 4, np.float32)
        dev = rt.to_device(host)
        rows.append({"what": f"copy host -> device {size} B",
                     "us": median_s(lambda: dev.set(host), args.repeat) * 1e6})
        rows.append({"what": f"copy device -> host {size} B",
                     "us": median_s(lambda: dev.get(ary=host), args.repeat) * 1e6})
    for row in rows:
        print(f"{row['what']:44s} {row['us']:10.1f} us")
    path = write_json("launch", rows, environment(rt))
    print(f"wrote {shown(path)}")
    return rows


if __name__ == "__main__":
    main()
