"""One training step of the MLP 240 -> 512 -> 256 -> 3 (tanh, MSE, Adam): nnlib vs numpy vs
PyTorch CPU (vs tinygrad on OpenCL, if installed), in one run.

    .venv/bin/python -m nnlib.bench.train_step [--batches 64 1] [--steps 20] [--repeat 5]
                                              [--pocl-threads 2] [--no-tinygrad]

Each figure is the median over ``--repeat`` runs of ``--steps`` steps, divided by the steps,
the libraries taking turns within each repeat (interleaved);
the device (or the host) is waited for once per run, after its last step, as a training loop
does. The batch is already in each library's memory (on the OpenCL device for nnlib). numpy
runs with 1 and 2 BLAS threads (threadpoolctl), PyTorch with 2 threads and fused Adam.
tinygrad runs in its own process on its OpenCL backend (DEV=CL), jitted (TinyJit).
Writes build/bench/train_step.json.

Used in notebooks/03_cpu_vs_gpu.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

from .common import (ROOT, environment, interleaved_s, passive_openmp,
                     print_environment, set_pocl_threads, shown, write_json)
from .numpy_mlp import NumpyMLP

SIZES = (240, 512, 256, 3)


def nnlib_net(nnlib):
    acts = ["tanh"] * (len(SIZES) - 2) + ["none"]
    return nnlib.Sequential([nnlib.Dense(a, b, act, seed=i)
                             for i, (a, b, act) in enumerate(zip(SIZES, SIZES[1:], acts))],
                            loss="mse")


def torch_stepper(torch, weights, biases, x, y):
    layers = []
    for i, (w, b) in enumerate(zip(weights, biases)):
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            lin.bias.copy_(torch.from_numpy(b))
        layers += [lin] + ([torch.nn.Tanh()] if i < len(weights) - 1 else [])
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def run(steps):
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(tx), ty)
            loss.backward()
            opt.step()
        return loss.item()
    return run


def tinygrad_ms(batch: int, steps: int, repeat: int) -> dict:
    """Run nnlib/bench/tinygrad_step.py in its own process; {} if tinygrad is missing."""
    if importlib.util.find_spec("tinygrad") is None:
        return {}
    env = dict(os.environ, DEV="CL", TRAINING="1")
    run = subprocess.run([sys.executable, "-m", "nnlib.bench.tinygrad_step", str(batch),
                          str(steps), str(repeat)], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    if run.returncode:
        print(f"tinygrad failed:\n{run.stderr[-2000:]}")
        return {}
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 1])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--pocl-threads", type=int, default=None)
    parser.add_argument("--no-tinygrad", action="store_true")
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args(argv)
    set_pocl_threads(args.pocl_threads)

    import nnlib  # after the thread limit is set
    from threadpoolctl import threadpool_limits

    torch = None
    if not args.no_torch and importlib.util.find_spec("torch"):
        passive_openmp()
        import torch
        torch.set_num_threads(2)
    rt = nnlib.get_runtime()
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'batch':>5} {'nnlib':>8} {'np 1thr':>8} {'np 2thr':>8} {'torch':>8} "
          f"{'tinygrad':>8}   ms per step; fastest other / nnlib (>= 1: nnlib no slower)")
    for batch in args.batches:
        x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
        y = rng.standard_normal((batch, SIZES[-1])).astype(np.float32)
        net = nnlib_net(nnlib)
        opt = nnlib.optim.Adam(net.parameters(), lr=1e-3)
        x_dev, y_dev = rt.to_device(x), rt.to_device(y)
        weights = [layer.weight.numpy() for layer in net.layers]
        biases = [layer.bias.numpy() for layer in net.layers]

        def nnlib_run(steps):
            for _ in range(steps):
                loss = net.train_step(x_dev, y_dev, opt)
            return float(loss)

        steps = args.steps
        runs = {"nnlib": lambda: nnlib_run(steps)}
        for threads in (1, 2):
            ref = NumpyMLP(weights, biases)
            runs[f"numpy_{threads}"] = (lambda ref=ref: [ref.step(x, y) for _ in range(steps)],
                                        lambda t=threads: threadpool_limits(t))
        if torch is not None:
            torch_run = torch_stepper(torch, weights, biases, x, y)
            runs["torch"] = lambda: torch_run(steps)
        row = {"batch": batch, **{k: s / steps * 1e3
                                  for k, s in interleaved_s(runs, args.repeat).items()}}
        if not args.no_tinygrad:
            tg = tinygrad_ms(batch, args.steps, args.repeat)
            if tg:
                row["tinygrad"], row["tinygrad_device"] = tg["ms"], tg["device"]
        others = [row[k] for k in ("numpy_1", "numpy_2", "torch") if k in row]
        row["fastest_other_over_nnlib"] = min(others) / row["nnlib"]
        rows.append(row)
        print(f"{batch:5d} {row['nnlib']:8.3f} {row['numpy_1']:8.3f} {row['numpy_2']:8.3f} "
              f"{row.get('torch', float('nan')):8.3f} {row.get('tinygrad', float('nan')):8.3f}"
              f"   {row['fastest_other_over_nnlib']:.2f}")
    meta = environment(rt)
    print_environment(meta)
    path = write_json("train_step", rows, meta)
    print(f"wrote {shown(path)}")
    return rows


if __name__ == "__main__":
    main()
