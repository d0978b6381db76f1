"""Fuzzing the checkpoint loader: random mutations of valid checkpoints (flipped bytes,
truncations, edited JSON headers, arrays of other dtypes, shapes and values, missing and extra
arrays). Every load must end in a clean load (after which the model runs) or nnlib's
CheckpointError, and a refused load into existing objects must leave them unchanged. The
cases run in their own process, so a crash fails this test, not the run."""

import json

import pytest

from .isolated import run_isolated

FUZZ = r"""
import json, sys, numpy as np, nnlib
from nnlib import optim
from nnlib.catch import CATCH, TINY
from nnlib.checkpoint import CheckpointError, read_npz, save_npz

folder, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(seed)
X = {"mlp": np.ones((3, 6)), "conv": np.ones((2, 2, 7)), "catch": np.ones((20, 2))}


def make(kind, seed=0):
    if kind == "mlp":
        m = nnlib.Sequential([nnlib.Dense(6, 5, "tanh", seed=seed),
                              nnlib.Dense(5, 3, seed=seed + 1)])
        return m, optim.Adam(m.parameters(), lr=0.01)
    if kind == "conv":
        m = nnlib.Sequential([nnlib.ComplexConv1d(3, 2, 2, 2, seed=seed)
                              if seed % 2 else nnlib.Conv1d(3, 2, 2, 2, seed=seed)])
        return m, optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    return CATCH(2, seed=seed, **TINY), None


def run(model, kind):
    # the loaded model runs (its outputs may overflow: a weight of 1e38 is a valid float)
    if kind == "catch":
        return model._score(X[kind])  # fitted or not: the loaded network runs
    x = X[kind].astype(np.complex64) if isinstance(model.layers[0], nnlib.ComplexConv1d) \
        else X[kind]
    return model.predict(x)


def snapshot(model, opt):
    values = [p.numpy() for p in model._checkpoint_parameters()]
    if opt is not None:
        values += [np.asarray(v) for _, v in sorted(opt.state_dict().items())]
    return values


sources = {}
for kind in ("mlp", "conv", "catch"):
    model, opt = make(kind)
    if opt is not None:
        for p in model.parameters():
            p.grad.fill(0.5)
        opt.step()
    path = f"{folder}/{kind}.npz"
    nnlib.save_checkpoint(path, model, opt, epoch=1)
    sources[kind] = path

POOL = [0, -1, 1, 3, 2**31, 2**40, 1.5, -0.0, 1e308, "x", "", None, True, False, [], [0], {},
        "Dense", "Conv1d", "LayerNorm", "_Conv1dBase", "Adam", "SGD", "seed", "complex",
        30000, "nnlib.checkpoint"]


def paths(node, prefix=()):
    yield prefix
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for k, v in items:
        yield from paths(v, prefix + (k,))


def edit_meta(meta):
    where = list(paths(meta))[1:]
    path = where[rng.integers(len(where))]
    parent = meta
    for k in path[:-1]:
        parent = parent[k]
    if rng.random() < 0.2 and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = POOL[rng.integers(len(POOL))]


def edit_array(arrays):
    key = list(arrays)[rng.integers(len(arrays))]
    a = arrays[key]
    choice = rng.integers(7)
    if choice == 0:
        arrays[key] = a.astype([np.float64, np.int32, np.int64, np.float32][rng.integers(4)])
    elif choice == 1:
        arrays[key] = a.ravel()[: max(0, a.size - 1 - rng.integers(3))]
    elif choice == 2:
        arrays[key] = a[..., None]
    elif choice == 3 and a.size and a.dtype.kind == "f":
        a = a.copy()
        a.flat[rng.integers(a.size)] = [np.nan, np.inf, -1.0, 1e38, 0.0][rng.integers(5)]
        arrays[key] = a
    elif choice == 4:
        del arrays[key]
    elif choice == 5:
        arrays[f"model.{rng.integers(3)}.weight"] = np.zeros(rng.integers(1, 4), np.float32)
    else:
        arrays[key] = np.asarray(a.ravel()[:1].sum() if a.size else 0)


def mutate(src, dst):
    kind = rng.integers(4)
    if kind < 2:
        data = bytearray(open(src, "rb").read())
        if kind == 0:
            for _ in range(rng.integers(1, 9)):
                data[rng.integers(len(data))] = rng.integers(256)
        else:
            data = data[: rng.integers(len(data))]
        open(dst, "wb").write(bytes(data))
        return ("flip", "truncate")[kind]
    meta, arrays = read_npz(src)
    for _ in range(rng.integers(1, 3)):
        (edit_meta(meta) if kind == 2 else edit_array(arrays))
    save_npz(dst, arrays, meta)
    return ("meta", "arrays")[kind - 2]


targets = {kind: make(kind, seed=5) for kind in sources}
counts = {"cases": 0, "loaded": 0, "refused": 0}
failures = []
for case in range(count):
    kind = list(sources)[case % 3]
    how = mutate(sources[kind], f"{folder}/bad.npz")
    model, opt = targets[kind]
    before = snapshot(model, opt)
    counts["cases"] += 1
    try:
        built = nnlib.load_checkpoint(f"{folder}/bad.npz")
        run(built.model, kind)
    except CheckpointError:
        built = None
    except Exception as err:
        failures.append(f"case {case} ({kind}, {how}): {type(err).__name__}: {err}"[:300])
        continue
    try:
        nnlib.load_checkpoint(f"{folder}/bad.npz", model, opt)
        run(model, kind)
        counts["loaded"] += 1
        if built is None:
            failures.append(f"case {case} ({kind}, {how}): loads into a model, not alone")
        nnlib.load_checkpoint(sources[kind], model, opt)  # back to a known state
    except CheckpointError:
        counts["refused"] += 1
        if any(not np.array_equal(a, b) for a, b in zip(snapshot(model, opt), before)):
            failures.append(f"case {case} ({kind}, {how}): a refused load changed the model")
    except Exception as err:
        failures.append(f"case {case} ({kind}, {how}): {type(err).__name__}: {err}"[:300])
counts["failures"] = failures
print(json.dumps(counts))
"""


@pytest.mark.slow
def test_random_mutations_of_checkpoints_load_cleanly_or_are_refused(tmp_path):
    out = run_isolated(FUZZ, timeout=600, args=(tmp_path, 14, 300))
    counts = json.loads(out.splitlines()[-1])
    print(counts)
    assert counts["cases"] == 300 and counts["refused"] > 150
    assert counts["failures"] == []
