"""The mask separation grid of ``python -m nnlib.bench.catch --masks``: the best band's
within - across mean mask probability on planted channel groups, per generator design and
mask learning rate, mean and spread over seeds (build/bench/catch_masks.json).

Used in notebooks/07_catch.
"""

import numpy as np

import nnlib
from nnlib.catch.masks import DESIGNS, separation_grid

from .common import environment, write_json

RATES = (1e-5, 1e-4, 1e-3, 1e-2)


def mask_grid(args):
    rows = separation_grid(rates=RATES, seeds=args.seeds)
    print(f"{'design':18s}" + "".join(f"{f'mask_lr {r:g}':>20s}" for r in RATES))
    for design in DESIGNS:
        cells = []
        for rate in RATES:
            sel = [r["separation"] for r in rows if r["design"] == design and r["mask_lr"] == rate]
            cells.append(f"{np.mean(sel):+13.3f}±{np.std(sel):.3f}")
        print(f"{design:18s}" + "".join(cells))
    write_json("catch_masks", rows, environment(nnlib.get_runtime()))
    return rows
