"""GFLOP/s of the dense layer: the seed-style and the fast kernels against numpy and PyTorch.

    .venv/bin/python -m benchmarks.dense [--widths 64 256 1024] [--batches 1 16 64 256]
                                         [--pocl-threads 2] [--repeat 5]

For each width n (an n -> n layer, tanh) and batch: forward, and forward + backward (input
and weight gradients), as wall-clock medians with the data on the device; numpy with 1 and 2
BLAS threads (threadpoolctl) and PyTorch CPU with 2 threads, in the same run. Run it with
--pocl-threads 1 and 2 to see what PoCL's threads buy. Writes build/bench/dense.json.
"""

import argparse

import numpy as np

from .common import environment, median_s, set_pocl_threads, write_json


def numpy_step(x, w, dy, backward, tanh=np.tanh):
    y = tanh(x @ w.T)
    if backward:
        dz = dy * (1 - y * y)
        return dz @ w, dz.T @ x
    return y


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[64, 256, 1024])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--pocl-threads", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-seed", action="store_true", help="skip the slow seed kernel")
    args = parser.parse_args(argv)
    set_pocl_threads(args.pocl_threads)

    import nnlib  # after the thread limit is set
    from threadpoolctl import threadpool_limits

    try:
        import torch
        torch.set_num_threads(2)
    except ImportError:
        torch = None
    rt = nnlib.get_runtime()
    rng = np.random.default_rng(0)
    variants = ["fast"] if args.no_seed else ["seed", "fast"]
    rows = []
    print(f"{'n':>5} {'batch':>5} {'pass':>8} " + " ".join(f"{v:>8}" for v in variants)
          + f" {'np 1thr':>8} {'np 2thr':>8} {'torch':>8}   GFLOP/s")
    for n in args.widths:
        for batch in args.batches:
            x = rng.standard_normal((batch, n)).astype(np.float32)
            dy = rng.standard_normal((batch, n)).astype(np.float32)
            layers = {v: nnlib.Dense(n, n, "tanh", seed=1, variant=v) for v in variants}
            x_dev, dy_dev = rt.to_device(x), rt.to_device(dy)
            w = layers[variants[0]].weight.numpy()
            for backward in (False, True):
                flops = 2.0 * batch * n * n * (3 if backward else 1)
                row = {"n": n, "batch": batch, "pass": "fwd+bwd" if backward else "fwd"}
                for v, layer in layers.items():
                    def run(layer=layer):
                        layer.forward(x_dev)
                        if backward:
                            layer.backward(dy_dev)
                        rt.queue.finish()
                    row[v] = flops / median_s(run, args.repeat) / 1e9
                for threads in (1, 2):
                    with threadpool_limits(threads):
                        row[f"numpy_{threads}"] = flops / median_s(
                            lambda: numpy_step(x, w, dy, backward), args.repeat) / 1e9
                if torch is not None:
                    tx, tw, tdy = (torch.from_numpy(a) for a in (x, w, dy))

                    def torch_run():
                        with torch.no_grad():
                            numpy_step(tx, tw, tdy, backward, torch.tanh)
                    row["torch"] = flops / median_s(torch_run, args.repeat) / 1e9
                rows.append(row)
                print(f"{n:5d} {batch:5d} {row['pass']:>8} "
                      + " ".join(f"{row[v]:8.1f}" for v in variants)
                      + f" {row['numpy_1']:8.1f} {row['numpy_2']:8.1f} "
                      f"{row.get('torch', float('nan')):8.1f}"
                      f"   fast/numpy2 {row['fast'] / row['numpy_2']:.2f}")
    path = write_json("dense", rows, environment(rt))
    print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
