"""The train_step benchmark's MLP in tinygrad (run by nnlib/bench/train_step.py in its own
process with DEV=CL TRAINING=1): prints one JSON line {"ms": per step, "device": name}.

    DEV=CL TRAINING=1 .venv/bin/python -m nnlib.bench.tinygrad_step BATCH STEPS REPEAT

Used in notebooks/03_cpu_vs_gpu.
"""

import json
import sys

import numpy as np
from tinygrad import Device, Tensor, TinyJit, nn

from .common import per_step_s
from .train_step import SIZES


def main(batch: int, steps: int, repeat: int) -> dict:
    layers = [nn.Linear(a, b) for a, b in zip(SIZES, SIZES[1:])]
    opt = nn.optim.Adam(nn.state.get_parameters(layers), lr=1e-3)
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((batch, SIZES[0])).astype(np.float32))
    y = Tensor(rng.standard_normal((batch, SIZES[-1])).astype(np.float32))

    @TinyJit
    def step():
        opt.zero_grad()
        h = x
        for layer in layers[:-1]:
            h = layer(h).tanh()
        loss = ((layers[-1](h) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.realize()

    def run(n):
        for _ in range(n):
            loss = step()
        return loss.item()
    run(3)  # tinygrad compiles its kernels in the first steps (tens of seconds)
    device = Device[Device.DEFAULT]
    name = getattr(device, "device_name", Device.DEFAULT)
    return {"ms": per_step_s(run, steps, repeat) * 1e3, "device": f"{Device.DEFAULT}: {name}"}


if __name__ == "__main__":
    print(json.dumps(main(*(int(a) for a in sys.argv[1:4]))))
