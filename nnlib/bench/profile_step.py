"""Per-kernel device time of a training step (median of 10), from OpenCL profiling events.

    .venv/bin/python -m nnlib.bench.profile_step [--batch 64]

Used in notebooks/03_cpu_vs_gpu.
"""

import argparse
import contextlib
from collections import defaultdict

import numpy as np

from nnlib.launcher import Launcher


@contextlib.contextmanager
def recording(rt):
    """While active, every kernel launch (every ``Launcher`` call) on ``rt`` also appends
    (kernel name, event) to the list."""
    events, call = [], Launcher.__call__

    def recorded_call(launcher, *args, **kwargs):
        event = call(launcher, *args, **kwargs)
        if launcher.runtime is rt:
            events.append((launcher.name, event))
        return event
    Launcher.__call__ = recorded_call
    try:
        yield events
    finally:
        Launcher.__call__ = call


def step_breakdown(net, x, y, optimizer, steps: int = 10) -> dict:
    """{kernel name: (launches per step, device microseconds per step)} of
    ``net.train_step``: the median over ``steps`` steps, each waited for before the next.
    The steps are not replayed (nnlib.step_replay): a replay bypasses the launchers that
    name the kernels, and runs the same kernels. ``net`` must live on a runtime whose queue
    records kernel times (``nnlib.use_device(profiling=True)``)."""
    if not net.runtime.profiling:
        raise RuntimeError("step_breakdown reads kernel times from profiling events: build "
                           "the network on a runtime made with profiling=True, e.g. after "
                           "nnlib.use_device(profiling=True)")
    replay, net.replay_steps = net.replay_steps, False
    try:
        float(net.train_step(x, y, optimizer))  # warm: programs built, buffers pooled
        runs = []
        for _ in range(steps):
            with recording(net.runtime) as events:
                float(net.train_step(x, y, optimizer))
            table = defaultdict(lambda: [0, 0.0])
            for name, event in events:
                table[name][0] += 1
                table[name][1] += (event.profile.end - event.profile.start) * 1e-3
            runs.append(table)
    finally:
        net.replay_steps = replay
    median = {name: (count, float(np.median([run[name][1] for run in runs])))
              for name, (count, _) in runs[0].items()}
    return dict(sorted(median.items(), key=lambda kv: -kv[1][1]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args(argv)
    import nnlib

    from .train_step import SIZES, nnlib_net
    nnlib.use_device(profiling=True)
    rng = np.random.default_rng(0)
    net = nnlib_net(nnlib)
    opt = nnlib.optim.Adam(net.parameters(), lr=1e-3)
    x = rng.standard_normal((args.batch, SIZES[0])).astype(np.float32)
    y = rng.standard_normal((args.batch, SIZES[-1])).astype(np.float32)
    table = step_breakdown(net, x, y, opt)
    for name, (count, us) in table.items():
        print(f"{name:24s} x{count:<3d} {us:9.1f} us")
    return table


if __name__ == "__main__":
    main()
