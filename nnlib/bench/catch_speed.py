"""Seconds per training epoch of nnlib's CATCH and of the official PyTorch model, side by
side on the same windows and sizes (``python -m nnlib.bench.catch --compare official``), and
nnlib's device time per kernel from OpenCL profiling events (build/bench/catch_speed.json).

An epoch here is ``--batches`` batches of the same windows for both (the official loop:
zero_grad, the mask generator's Adam step every max(1, batches // 10) batches, forward,
MSE + dc_lambda dc + auxi_lambda frequency loss, backward, Adam step), after one untimed
batch; the two codes take turns for ``--rounds`` rounds and each figure is the median. The
official model files are imported from the reader's checkout (``--official-path``) without
running its package __init__ files, which pull in the whole benchmark; they are never
copied here.

Used in notebooks/07_catch.
"""

import importlib
import sys
import time
import types
from collections import defaultdict
from pathlib import Path

import numpy as np

import nnlib
from nnlib.catch import CATCH
from nnlib.catch.detector import sliding_windows
from nnlib.data import anomaly_dataset
from nnlib.runtime import Runtime, get_runtime

from .common import environment, set_pocl_threads, settle, write_json
from .profile_step import recording

# The official defaults (DEFAULT_TRANSFORMER_BASED_HYPER_PARAMS) of the sizes both share:
# 23 patches of 2 x 128 values, so each flatten head holds 3 x 5888^2 weights and the model
# 210.7 M parameters on 5 channels (the official count, 210.9 M, adds two unused Linear
# layers). The 14.8 M of issue 13 is window 96 with patch stride 16 (6 patches, nf 1536).
OFFICIAL_SIZES = dict(window=192, patch_size=16, patch_stride=8, cf_dim=64, e_layers=3,
                      n_heads=2, head_dim=64, d_ff=256, d_model=128, batch_size=128)
NNLIB_SIZES = {k: nnlib.catch.DEFAULTS[k] for k in OFFICIAL_SIZES}


def official_classes(path):
    """CATCHModel and frequency_loss from a checkout of decisionintelligence/CATCH."""
    root = Path(path) / "ts_benchmark"
    if not (root / "baselines" / "catch" / "models" / "CATCH_model.py").is_file():
        raise FileNotFoundError(f"{path}: no ts_benchmark/baselines/catch/models/CATCH_model.py")
    for name, folder in (("ts_benchmark", root), ("ts_benchmark.baselines", root / "baselines"),
                         ("ts_benchmark.baselines.catch", root / "baselines" / "catch")):
        if name not in sys.modules:  # empty packages: the __init__ files import everything
            module = types.ModuleType(name)
            module.__path__ = [str(folder)]
            sys.modules[name] = module
    model = importlib.import_module("ts_benchmark.baselines.catch.models.CATCH_model")
    loss = importlib.import_module("ts_benchmark.baselines.catch.utils.fre_rec_loss")
    return model.CATCHModel, loss.frequency_loss


def official_config(n_channels, sizes):
    t = sizes["window"]
    return types.SimpleNamespace(
        c_in=n_channels, seq_len=t, pred_len=t, patch_size=sizes["patch_size"],
        patch_stride=sizes["patch_stride"], cf_dim=sizes["cf_dim"], e_layers=sizes["e_layers"],
        n_heads=sizes["n_heads"], head_dim=sizes["head_dim"], d_ff=sizes["d_ff"],
        d_model=sizes["d_model"], dropout=0.2, head_dropout=0.1, individual=0, affine=0,
        subtract_last=0, regular_lambda=0.5, temperature=0.07, auxi_loss="MAE",
        auxi_type="complex", auxi_mode="fft", module_first=True, mask=False, add_noise=False,
        noise_amp=0.0, noise_freq_percentage=0.0, inference_patch_size=32,
        inference_patch_stride=1)


def official_epoch(path, windows, sizes, batches, threads, lr=1e-4, mask_lr=1e-5):
    """(epoch, parameter count) of the official model on ``windows`` (B, N, T): ``epoch()``
    runs one untimed step, then one timed epoch of the official training loop, and returns
    its seconds."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model_cls, freq_loss = official_classes(path)
    cfg = official_config(windows.shape[1], sizes)
    model = model_cls(cfg)
    criterion, auxi = torch.nn.MSELoss(), freq_loss(cfg)
    main = torch.optim.Adam([p for n, p in model.named_parameters()
                             if "mask_generator" not in n], lr=lr)
    mask = torch.optim.Adam(model.mask_generator.parameters(), lr=mask_lr)
    data = torch.as_tensor(windows.transpose(0, 2, 1).copy())  # (B, T, N), as theirs
    size, every = sizes["batch_size"], max(1, batches // 10)
    model.train()

    def step(i, x):
        main.zero_grad()
        out, out_complex, dc = model(x)
        loss = (criterion(out, x) + 0.005 * dc
                + 0.005 * auxi(out_complex, model.revin_layer(x, "transform")))
        if (i + 1) % every == 0:
            mask.step()
            mask.zero_grad()
        loss.backward()
        main.step()

    def epoch():
        step(0, data[:size])  # warm
        start = time.perf_counter()
        for i in range(batches):
            step(i, data[i * size:(i + 1) * size])
        return time.perf_counter() - start
    return epoch, sum(p.numel() for p in model.parameters())


def nnlib_model(n_channels, sizes, runtime=None):
    return CATCH(n_channels, seed=0, runtime=runtime, **sizes)


def nnlib_epoch(windows, sizes, batches):
    """(epoch, parameter count) of nnlib's CATCH: ``epoch()`` runs one untimed batch, then
    one timed epoch (the official loop, see the docstring), and returns its seconds."""
    model = nnlib_model(windows.shape[1], sizes)
    main, mask = model._optimizers()
    rng = np.random.default_rng(0)
    size = sizes["batch_size"]

    def epoch():
        model._train_epoch(windows[:size], main, mask, 1, rng)  # warm (first: programs built)
        start = time.perf_counter()
        model._train_epoch(windows[:batches * size], main, mask, max(1, batches // 10), rng)
        return time.perf_counter() - start
    return epoch, model.parameter_count()


def alternating_s(epochs: dict, rounds: int) -> dict:
    """{name: [seconds of each round]} of ``epochs[name]()``, the codes taking turns in each
    round (a burst of load slows both rather than one), each turn after the other's threads
    have gone idle (:func:`~nnlib.bench.common.settle`)."""
    times = {name: [] for name in epochs}
    for _ in range(rounds):
        for name, epoch in epochs.items():
            settle()
            times[name].append(epoch())
    return times


def kernel_profile(windows, sizes, steps: int = 3) -> dict:
    """{kernel: (launches per step, device ms per step)} of nnlib's training step, on a
    runtime of the default device whose queue records kernel times."""
    rt = get_runtime()
    timed = Runtime(rt.device, rt.profile, rt.cap, profiling=True)
    model = nnlib_model(windows.shape[1], sizes, timed)
    main, mask = model._optimizers()
    rng = np.random.default_rng(0)
    batch = windows[:sizes["batch_size"]]
    model._train_epoch(batch, main, mask, 1, rng)
    table = defaultdict(lambda: [0, 0.0])
    with recording(model.runtime) as events:
        for _ in range(steps):
            model._train_epoch(batch, main, mask, 1, rng)
    for name, event in events:
        table[name][0] += 1
        table[name][1] += (event.profile.end - event.profile.start) * 1e-6
    return {k: (c / steps, ms / steps) for k, (c, ms) in
            sorted(table.items(), key=lambda kv: -kv[1][1])}


def speed(args):
    """Both codes on ``args.threads`` CPU threads (PyTorch's and PoCL's; on a loaded machine
    PyTorch's spinning OpenMP threads slow it down many times over: use 1 there)."""
    set_pocl_threads(args.threads)
    rows = []
    size_sets = {"nnlib": NNLIB_SIZES, "official": OFFICIAL_SIZES}
    chosen = size_sets if args.sizes == "both" else {args.sizes: size_sets[args.sizes]}
    for label, sizes in chosen.items():
        batches = args.batches
        data = anomaly_dataset("shapelet", batches * sizes["batch_size"] + sizes["window"], 200)
        x = (data["train"] - data["train"].mean(0)) / data["train"].std(0)
        windows = sliding_windows(x, np.arange(batches * sizes["batch_size"]), sizes["window"])
        epochs, params = {}, {}
        epochs["nnlib"], params["nnlib"] = nnlib_epoch(windows, sizes, batches)
        if args.official_path:
            epochs["official"], params["official"] = official_epoch(
                args.official_path, windows, sizes, batches, args.threads)
        times = alternating_s(epochs, args.rounds)
        row = {"sizes": label, "batches": batches, "batch_size": sizes["batch_size"],
               "rounds": args.rounds, "parameters": params["nnlib"],
               "nnlib_s": float(np.median(times["nnlib"]))}
        if args.official_path:
            row["official_s"] = float(np.median(times["official"]))
            row["official_parameters"] = params["official"]
            row["ratio"] = row["official_s"] / row["nnlib_s"]
        profile = kernel_profile(windows, sizes)
        row["top_kernels"] = dict(list(profile.items())[:8])
        rows.append(row)
        ratio = f", official {row['official_s']:.2f} s, official / nnlib " \
                f"{row['ratio']:.2f}x" if "ratio" in row else " (no --official-path)"
        print(f"{label} sizes, {params['nnlib']} parameters, {batches} batches of "
              f"{sizes['batch_size']}, median of {args.rounds} alternating rounds: nnlib "
              f"{row['nnlib_s']:.2f} s{ratio}")
        total = sum(ms for _, ms in profile.values())
        for name, (count, ms) in list(profile.items())[:8]:
            print(f"  {name:34s} x{count:5.0f} {ms:9.2f} ms/step ({100 * ms / total:4.1f} %)")
    write_json("catch_speed", rows, {**environment(nnlib.get_runtime()),
                                     "threads": args.threads})
    return rows
