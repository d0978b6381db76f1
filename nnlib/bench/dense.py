"""GFLOP/s of the dense layer: the article's design and the blocked one against numpy and PyTorch.

    .venv/bin/python -m nnlib.bench.dense [--widths 64 256 1024 4096] [--batches 1 16 64 256]
                                         [--pocl-threads 1 2] [--repeat 5] [--products]

For each width n (an n -> n layer, tanh) and batch: forward, and forward + backward (input
and weight gradients), as wall-clock medians (one wait for the device per pass) with the data
on the device; numpy with 1 and 2 BLAS threads (threadpoolctl) and PyTorch CPU with 2
threads, in the same run, taking turns (interleaved repeats). The article's kernel runs up to
--article-max-width. With --products, each product of the blocked design alone (forward, input
gradient dz W, weight gradient dz^T x) against numpy's same product (2 BLAS threads). The
gradients are written, not added to earlier ones (``accumulate=False``), as in a training step
of Sequential and as numpy's products make new arrays.
Prints the CPU, the OpenCL build and the tuned kernel parameters. With
several --pocl-threads values each runs in its own process (PoCL reads the variable once)
and the table ends with the blocked kernel's thread speedup. Writes build/bench/dense.json.

Used in notebooks/03_cpu_vs_gpu.
"""

import argparse

import numpy as np

from .common import (WARM_UP_S, environment, interleaved_s, passive_openmp, print_environment,
                     run_child, set_pocl_threads, shown, write_json)


def numpy_step(x, w, dy, backward, tanh=np.tanh):
    y = tanh(x @ w.T)
    if backward:
        dz = dy * (1 - y * y)
        return dz @ w, dz.T @ x
    return y


def product_runs(rt, layer, x, dy, w):
    """Each of the blocked design's three products alone (data on the device, the bias sum with
    the weight gradient, both written as in a training step) and numpy's same product."""
    kernels, dev = layer.kernels, {"x": rt.to_device(x), "dz": rt.to_device(dy)}
    y, dx = rt.empty((x.shape[0], w.shape[0])), rt.empty(x.shape)
    weight, bias = layer.weight, layer.bias

    def wait(enqueue):
        def run():
            enqueue()
            rt.queue.finish()
        return run
    return {
        "forward": (wait(lambda: kernels.forward(dev["x"], weight.value, bias.value, y, 0)),
                    lambda: x @ w.T),
        "input": (wait(lambda: kernels.backward_input(dev["dz"], weight.value, dx)),
                  lambda: dy @ w),
        "weight": (wait(lambda: kernels.backward_weight(dev["dz"], dev["x"], weight.grad,
                                                        bias.grad, accumulate=False)),
                   lambda: dy.T @ x)}


def product_table(rt, layer, x, dy, w, repeat, threadpool_limits):
    """GFLOP/s of each product, blocked kernel vs numpy (2 BLAS threads), interleaved."""
    flops = 2.0 * x.shape[0] * x.shape[1] * w.shape[0]
    out = []
    for product, (blocked, numpy_run) in product_runs(rt, layer, x, dy, w).items():
        seconds = interleaved_s({"blocked": blocked,
                                 "numpy_2": (numpy_run, lambda: threadpool_limits(2))}, repeat)
        row = {"product": product, **{k: flops / s / 1e9 for k, s in seconds.items()},
               "params": layer.kernels.params(product, x.shape[0])}
        print(f"{'':11} {product:>8} {'':8} {row['blocked']:8.1f} {'':8} {row['numpy_2']:8.1f}"
              f" {'':8}   blocked/numpy2 {row['blocked'] / row['numpy_2']:.2f}")
        out.append(row)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[64, 256, 1024, 4096])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--pocl-threads", type=int, nargs="+", default=[])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--warm-up", type=float, default=WARM_UP_S,
                        help="seconds of untimed calls of each run before its first turn")
    parser.add_argument("--article-max-width", type=int, default=1024,
                        help="run the slow kernel of the article's design up to this width "
                             "(0: never)")
    parser.add_argument("--products", action="store_true",
                        help="also time the blocked design's three products one by one")
    parser.add_argument("--name", default="dense", help="JSON file name under build/bench/")
    args = parser.parse_args(argv)
    if len(args.pocl_threads) > 1:
        return compare_threads(args)
    set_pocl_threads(args.pocl_threads[0] if args.pocl_threads else None)

    import nnlib  # after the thread limit is set
    from threadpoolctl import threadpool_limits

    passive_openmp()
    try:
        import torch
        torch.set_num_threads(2)
    except ImportError:
        torch = None
    rt = nnlib.get_runtime()
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'n':>5} {'batch':>5} {'pass':>8} {'article':>8} {'blocked':>8}"
          f" {'np 1thr':>8} {'np 2thr':>8} {'torch':>8}   GFLOP/s")
    for n in args.widths:
        variants = ["article", "blocked"] if n <= args.article_max_width else ["blocked"]
        for batch in args.batches:
            x = rng.standard_normal((batch, n)).astype(np.float32)
            dy = rng.standard_normal((batch, n)).astype(np.float32)
            layers = {v: nnlib.Dense(n, n, "tanh", seed=1, variant=v) for v in variants}
            x_dev, dy_dev = rt.to_device(x), rt.to_device(dy)
            w = layers[variants[0]].weight.numpy()
            for backward in (False, True):
                flops = 2.0 * batch * n * n * (3 if backward else 1)
                runs = {}
                for v, layer in layers.items():
                    def run(layer=layer):
                        layer.forward(x_dev)
                        if backward:
                            layer.backward(dy_dev, accumulate=False)
                        rt.queue.finish()
                    runs[v] = run
                for threads in (1, 2):
                    runs[f"numpy_{threads}"] = (lambda: numpy_step(x, w, dy, backward),
                                                lambda t=threads: threadpool_limits(t))
                if torch is not None:
                    tx, tw, tdy = (torch.from_numpy(a) for a in (x, w, dy))

                    def torch_run():
                        with torch.no_grad():
                            numpy_step(tx, tw, tdy, backward, torch.tanh)
                    runs["torch"] = torch_run
                seconds = interleaved_s(runs, args.repeat, args.warm_up)
                row = {"n": n, "batch": batch, "pass": "fwd+bwd" if backward else "fwd",
                       **{k: flops / s / 1e9 for k, s in seconds.items()}}
                rows.append(row)
                print(f"{n:5d} {batch:5d} {row['pass']:>8} {row.get('article', float('nan')):8.1f}"
                      f" {row['blocked']:8.1f} {row['numpy_1']:8.1f} {row['numpy_2']:8.1f} "
                      f"{row.get('torch', float('nan')):8.1f}"
                      f"   blocked/numpy2 {row['blocked'] / row['numpy_2']:.2f}")
            if args.products:
                products = product_table(rt, layers["blocked"], x, dy, w, args.repeat,
                                         threadpool_limits)
                rows += [{"n": n, "batch": batch, "pass": r.pop("product"), **r}
                         for r in products]
    meta = environment(rt)
    print_environment(meta)
    path = write_json(args.name, rows, meta)
    print(f"wrote {shown(path)}")
    return rows


def compare_threads(args):
    """Run the benchmark once per PoCL thread count, each in its own process; merge."""
    common = ["--widths", *map(str, args.widths), "--batches", *map(str, args.batches),
              "--repeat", str(args.repeat), "--warm-up", str(args.warm_up),
              "--article-max-width", str(args.article_max_width),
              *(["--products"] if args.products else [])]
    rows, meta = [], {}
    for threads in args.pocl_threads:
        print(f"PoCL threads: {threads}")
        out = run_child("dense", common + ["--pocl-threads", str(threads), "--name",
                                          f"dense_pocl{threads}"])
        rows += [dict(r, pocl_threads=threads) for r in out["rows"]]
        meta = out["meta"]
    low, high = min(args.pocl_threads), max(args.pocl_threads)
    print(f"blocked kernel, {high} vs {low} PoCL threads:")
    for r in rows:
        if r["pocl_threads"] == high:
            base = next(b for b in rows if b["pocl_threads"] == low and
                        (b["n"], b["batch"], b["pass"]) == (r["n"], r["batch"], r["pass"]))
            print(f"  n {r['n']:5d} batch {r['batch']:4d} {r['pass']:>8}: "
                  f"{r['blocked'] / base['blocked']:.2f}x")
    meta["pocl_threads"] = args.pocl_threads
    path = write_json(args.name, rows, meta)
    print(f"wrote {shown(path)}")
    return rows


if __name__ == "__main__":
    main()
