"""The seed's experiment: time per epoch of the EURUSD fractal classifier, nnlib on each
OpenCL device vs single-threaded numpy, one sample at a time (as the seed) and in mini-batches.

    .venv/bin/python -m benchmarks.seed_experiment [--samples 2000] [--batch 64] [--epochs 3]
                                                   [--pocl-threads 2]

The network is notebook 02's: 240 -> 128 -> 64 -> 3 (tanh, tanh, softmax, cross-entropy),
SGD with momentum. The per-sample epoch is timed on the first ``--samples`` training rows
and scaled to the whole training set; the mini-batch epochs run on all of it (medians of
``--epochs``). Both use ``Sequential.fit`` (host data, one ``train_step`` per batch). The
seed reported 9.35x (OpenCL vs plain MQL5, per-sample, a 2-core Core2 Duo T5750).
Writes build/bench/seed_experiment.json.
"""

import argparse
import time

import numpy as np

from .common import environment, set_pocl_threads, write_json
from .numpy_mlp import NumpyMLP

SEED_SPEEDUP = 9.35
SIZES = (240, 128, 64, 3)


def build(nnlib, runtime):
    acts = ["tanh"] * (len(SIZES) - 2) + ["softmax"]
    return nnlib.Sequential([nnlib.Dense(a, b, act, seed=i + 1, runtime=runtime)
                             for i, (a, b, act) in enumerate(zip(SIZES, SIZES[1:], acts))],
                            loss="cross_entropy")


def epoch_s(train_epoch, rows: int, total: int, epochs: int) -> float:
    """Median seconds of ``train_epoch()`` over ``rows`` rows, scaled to ``total`` rows."""
    times = []
    for _ in range(epochs):
        start = time.perf_counter()
        train_epoch()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * total / rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--pocl-threads", type=int, default=None)
    args = parser.parse_args(argv)
    set_pocl_threads(args.pocl_threads)

    import nnlib  # after the thread limit is set
    from nnlib import data
    from nnlib.runtime import Runtime, all_devices, can_compile, is_simulator
    from threadpoolctl import threadpool_limits

    x, y, _, _ = data.fractal_dataset()
    n = len(x)
    onehot = np.eye(SIZES[-1], dtype=np.float32)[y]
    few = min(args.samples, n)
    devices = [d for d in all_devices() if not is_simulator(d) and can_compile(d)]
    rows = []
    for device in devices:
        rt = Runtime(device)
        net = build(nnlib, rt)
        opt = nnlib.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        weights = [layer.weight.numpy() for layer in net.layers]
        biases = [layer.bias.numpy() for layer in net.layers]
        ref = NumpyMLP(weights, biases, loss="cross_entropy", optimizer="sgd", lr=0.01,
                       momentum=0.9)

        def numpy_epoch(rows_, batch):
            for i in range(0, rows_, batch):
                ref.step(x[i:i + batch], onehot[i:i + batch])

        row = {"device": device.name.strip(), "train_rows": n}
        for mode, batch, count in (("per_sample", 1, few), ("mini_batch", args.batch, n)):
            nn_s = epoch_s(lambda: net.fit(x[:count], y[:count], opt, epochs=1,
                                           batch_size=batch, progress=False), count, n,
                           args.epochs)
            with threadpool_limits(1):
                np_s = epoch_s(lambda: numpy_epoch(count, batch), count, n, args.epochs)
            row.update({f"{mode}_nnlib_s": nn_s, f"{mode}_numpy_s": np_s,
                        f"{mode}_speedup": np_s / nn_s})
        rows.append(row)
        print(f"{row['device']}: {n} training rows")
        print(f"  {'epoch':12s} {'nnlib s':>9} {'numpy 1thr s':>13} {'speedup':>8}")
        for mode in ("per_sample", "mini_batch"):
            print(f"  {mode:12s} {row[mode + '_nnlib_s']:9.2f} {row[mode + '_numpy_s']:13.2f} "
                  f"{row[mode + '_speedup']:7.2f}x")
        print(f"  the seed: {SEED_SPEEDUP}x per-sample (OpenCL vs plain MQL5 on 2 cores)")
    path = write_json("seed_experiment", rows, environment(nnlib.get_runtime()))
    print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
