"""CATCH against IsolationForest, PCA and a dense autoencoder, and CATCH's speed.

    .venv/bin/python -m nnlib.bench.catch [--seeds 0 1 2] [--epochs 3] [--quick]
    .venv/bin/python -m nnlib.bench.catch --evaluate [--seeds 0 1 2] [--quick]
    .venv/bin/python -m nnlib.bench.catch --masks
    .venv/bin/python -m nnlib.bench.catch --compare official --official-path DIR

Default: the TODS anomaly types (nnlib.data.anomaly_dataset, 5 channels, train 4000, test
2000 steps) and EURUSD H1 with injected anomalies; AUC-ROC, AUC-PR, best F1 and F1 at the
percentile threshold, mean and spread over seeds (build/bench/catch.json).
--evaluate: the wider evaluation of nnlib.catch.compare.EVALUATION_KINDS (six TODS types,
two spectral kinds, planted channel groups broken) with CATCH, CATCH+masks (the notebook's
deviations) and the baselines; the AUC-ROC and AUC-PR tables (build/bench/catch_evaluation.json).
--masks: the planted-group separation of the learned masks for the official design and the
deviations at several mask learning rates (build/bench/catch_masks.json).
--compare official: seconds per training epoch of nnlib's CATCH and of the official
PyTorch model (its model files under DIR, a checkout of decisionintelligence/CATCH that
the reader fetches; never vendored; needs einops) on the same windows, at equal sizes, the
median of --rounds epochs of each taken in turns; nnlib alone without DIR
(build/bench/catch_speed.json).

Used in notebooks/07_catch.
"""

import argparse

import numpy as np

import nnlib
from nnlib.catch.compare import METHODS, METRICS, compare, evaluate, format_table
from nnlib.data import ANOMALY_KINDS, anomaly_dataset, eurusd_anomaly_split

from .common import environment, write_json


def datasets(seed, quick):
    size = (1000, 600) if quick else (4000, 2000)
    for kind in ANOMALY_KINDS:
        yield kind, anomaly_dataset(kind, *size, seed=seed), 5.0
    yield "eurusd", eurusd_anomaly_split(nnlib.data.load_eurusd(), seed=seed), 3.0


def table(args, epochs):
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


def wide_evaluation(args, epochs):
    size = (1000, 600) if args.quick else tuple(args.length)
    rows = evaluate(seeds=args.seeds, epochs=epochs, methods=args.methods,
                    train_length=size[0], test_length=size[1], progress=not args.quick)
    for metric in ("auc_roc", "auc_pr"):
        print(format_table(rows, metric), "\n")
    write_json("catch_evaluation", rows, {**environment(nnlib.get_runtime()),
                                          "epochs": epochs, "sizes": size})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="short series, one epoch")
    parser.add_argument("--evaluate", action="store_true", help="the wider evaluation")
    parser.add_argument("--length", type=int, nargs=2, default=[4000, 2000],
                        metavar=("TRAIN", "TEST"), help="series lengths of --evaluate")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS,
                        help="methods of --evaluate")
    parser.add_argument("--masks", action="store_true", help="the mask separation grid")
    parser.add_argument("--compare", choices=["official"], help="time against the official code")
    parser.add_argument("--official-path", help="a checkout of decisionintelligence/CATCH")
    parser.add_argument("--sizes", choices=["nnlib", "official", "both"], default="both",
                        help="model sizes of --compare")
    parser.add_argument("--batches", type=int, default=10, help="batches per --compare epoch")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of --compare")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating epochs of each code in --compare (the median is kept)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    epochs = 1 if args.quick else args.epochs
    if args.evaluate:
        return wide_evaluation(args, epochs)
    if args.masks:
        from .catch_masks import mask_grid
        return mask_grid(args)
    if args.compare:
        from nnlib import tuning

        from .catch_speed import speed
        with tuning.complete_searches():
            return speed(args)
    return table(args, epochs)


if __name__ == "__main__":
    main()
