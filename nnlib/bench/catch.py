"""CATCH against IsolationForest, PCA and a dense autoencoder: AUC-ROC, AUC-PR, best F1 and
F1 at the percentile threshold, per dataset, mean and spread over seeds.

    .venv/bin/python -m nnlib.bench.catch [--seeds 0 1 2] [--epochs 3] [--quick]

Datasets: the five TODS anomaly types (nnlib.data.anomaly_dataset, 5 channels, train 4000,
test 2000 steps) and EURUSD H1 with injected anomalies. CATCH runs with its defaults
(nnlib.catch.DEFAULTS). Prints the table and the seconds per CATCH epoch, and writes
build/bench/catch.json.
"""

import argparse

import numpy as np

import nnlib
from nnlib.catch.compare import compare
from nnlib.data import ANOMALY_KINDS, anomaly_dataset, eurusd_anomaly_split

from .common import environment, write_json

METRICS = ("auc_roc", "auc_pr", "best_f1", "f1_pct")


def datasets(seed, quick):
    size = (1000, 600) if quick else (4000, 2000)
    for kind in ANOMALY_KINDS:
        yield kind, anomaly_dataset(kind, *size, seed=seed), 5.0
    yield "eurusd", eurusd_anomaly_split(nnlib.data.load_eurusd(), seed=seed), 3.0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="short series, one epoch")
    args = parser.parse_args(argv)
    epochs = 1 if args.quick else args.epochs
    rows = []
    for seed in args.seeds:
        for name, data, ratio in datasets(seed, args.quick):
            for row in compare(data, seed=seed, epochs=epochs, anomaly_ratio=ratio):
                rows.append({"dataset": name, **row})
    print(f"{'dataset':17s}{'method':17s}" + "".join(f"{m:>15s}" for m in METRICS))
    for name in dict.fromkeys(r["dataset"] for r in rows):
        for method in dict.fromkeys(r["method"] for r in rows):
            sel = [r for r in rows if r["dataset"] == name and r["method"] == method]
            cells = "".join(f"{np.mean([r[m] for r in sel]):9.3f}±{np.std([r[m] for r in sel]):.3f}"
                            for m in METRICS)
            print(f"{name:17s}{method:17s}{cells}")
    fits = [r for r in rows if r["method"] == "CATCH"]
    d = nnlib.catch.DEFAULTS
    print(f"CATCH: {np.median([r['epoch_s'] for r in fits]):.2f} s per epoch (median over "
          f"{len(fits)} fits; window {d['window']}, patch {d['patch_size']}/"
          f"{d['patch_stride']}, cf {d['cf_dim']}, {d['e_layers']} layers, batch "
          f"{d['batch_size']}), {np.mean([r['fit_s'] for r in fits]):.1f} s per fit of "
          f"{epochs} epochs with scoring of the training series")
    write_json("catch", rows, {**environment(nnlib.get_runtime()), "epochs": epochs,
                                "defaults": nnlib.catch.DEFAULTS})
    return rows


if __name__ == "__main__":
    main()
