"""Checkpoints (nnlib/checkpoint.py): issue 14's crafted files, half-written optimizer state,
kills during a save, file modes, fsyncs, and resuming a training run bit for bit."""

import json
import os
import signal
import stat
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

import nnlib
from nnlib import optim
from nnlib.catch import CATCH, TINY
from nnlib.checkpoint import CheckpointError, read_npz, save_npz
from nnlib.registry import LAYERS, OPTIMIZERS

from .isolated import child_env, run_isolated



def mlp(rt, seed=0):
    return nnlib.Sequential([nnlib.Dense(6, 5, "tanh", seed=seed, runtime=rt),
                             nnlib.Dense(5, 3, "softmax", seed=seed + 1, runtime=rt)],
                            loss="cross_entropy")


def batches(n=6):
    rng = np.random.default_rng(3)
    return [(rng.standard_normal((7, 6)).astype(np.float32), rng.integers(0, 3, 7))
            for _ in range(n)]


def snapshot(model, opt=None) -> list:
    values = [p.numpy() for p in model._checkpoint_parameters()]
    if opt is not None:
        values += [np.asarray(v) for _, v in sorted(opt.state_dict().items())]
    return values


def assert_same(a: list, b: list):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def rewrite(src, dst, change):
    """Copy the checkpoint ``src`` to ``dst`` after ``change(meta, arrays)``."""
    meta, arrays = read_npz(src)
    change(meta, arrays)
    save_npz(dst, arrays, meta)


@pytest.fixture
def saved(rt, tmp_path):
    model = mlp(rt)
    opt = optim.Adam(model.parameters(), lr=0.01)
    for x, y in batches(2):
        model.train_step(x, y, opt)
    path = tmp_path / "run.npz"
    nnlib.save_checkpoint(path, model, opt, epoch=2)
    return path, model, opt


# ---------------------------------------------------------------- resuming
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_resuming_from_a_checkpoint_continues_bit_for_bit(rt, tmp_path, name):
    kwargs = {"momentum": 0.9} if name == "SGD" else {}
    model = mlp(rt)
    opt = getattr(optim, name)(model.parameters(), lr=0.01, **kwargs)
    data = batches()
    for x, y in data[:3]:
        model.train_step(x, y, opt)
    nnlib.save_checkpoint(tmp_path / "run.npz", model, opt, epoch=3)
    for x, y in data[3:]:
        model.train_step(x, y, opt)
    resumed, opt2, epoch = nnlib.load_checkpoint(tmp_path / "run.npz", runtime=rt)
    assert epoch == 3 and type(opt2) is type(opt) and opt2.config() == opt.config()
    for x, y in data[3:]:
        resumed.train_step(x, y, opt2)
    assert_same(snapshot(resumed, opt2), snapshot(model, opt))


def test_loading_into_the_same_objects_restores_them(rt, saved):
    path, model, opt = saved
    want = snapshot(model, opt)
    for x, y in batches(2):
        model.train_step(x, y, opt)
    assert nnlib.load_checkpoint(path, model, opt).epoch == 2
    assert_same(snapshot(model, opt), want)


def test_a_mismatched_model_or_optimizer_changes_nothing(rt, saved):
    path = saved[0]
    other = nnlib.Sequential([nnlib.Dense(6, 4, runtime=rt), nnlib.Dense(4, 3, runtime=rt)])
    before = snapshot(other)
    with pytest.raises(CheckpointError, match="another architecture"):
        nnlib.load_checkpoint(path, other)
    assert_same(snapshot(other), before)
    model = mlp(rt, seed=5)
    sgd = optim.SGD(model.parameters(), momentum=0.9)
    before = snapshot(model, sgd)
    with pytest.raises(CheckpointError, match="holds Adam state, not SGD"):
        nnlib.load_checkpoint(path, model, sgd)
    assert_same(snapshot(model, sgd), before)


def test_sequential_load_refuses_a_catch_checkpoint(rt, tmp_path):
    CATCH(2, runtime=rt, **TINY).save(tmp_path / "c.npz")
    with pytest.raises(CheckpointError, match="holds a 'CATCH', not a Sequential"):
        nnlib.Sequential.load(tmp_path / "c.npz")


def test_only_public_layers_are_saved(rt, tmp_path):
    from nnlib.catch.ops import LayerNorm
    net = nnlib.Sequential([nnlib.Dense(3, 3, runtime=rt), LayerNorm(3, rt)])
    with pytest.raises(TypeError, match="LayerNorm cannot be saved"):
        net.save(tmp_path / "x.npz")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- crafted files
@pytest.mark.parametrize("cls", ["LayerNorm", "_Conv1dBase", "Layer", "FFT", "GELU"])
def test_crafted_checkpoint_naming_an_internal_layer_is_refused(tmp_path, cls):
    """Such a 600-byte file used to build the class and segfault in predict."""
    out = run_isolated("""
        import sys, numpy as np, nnlib
        from nnlib.checkpoint import read_npz, save_npz
        good, bad = sys.argv[1] + "/good.npz", sys.argv[1] + "/bad.npz"
        nnlib.Sequential([nnlib.Dense(4, 4)]).save(good)
        meta, arrays = read_npz(good)
        meta["model"]["arch"]["layers"][0] = {"class": sys.argv[2], "config": {"width": 4}}
        save_npz(bad, arrays, meta)
        try:
            nnlib.Sequential.load(bad).predict(np.ones((2, 4)))
        except nnlib.CheckpointError as err:
            print(err)
    """, args=(tmp_path, cls))
    assert f"class '{cls}' is not one of {list(LAYERS)}" in out


def test_checkpoint_declaring_a_huge_dense_is_refused_before_building(rt, tmp_path,
                                                                     monkeypatch):
    """A 966-byte file declaring Dense(30000, 30000) used to allocate ~7 GB first."""
    nnlib.Sequential([nnlib.Dense(3, 2, runtime=rt)]).save(tmp_path / "good.npz")

    def huge(meta, arrays):
        meta["model"]["arch"]["layers"][0]["config"].update(n_in=30000, n_out=30000)
    rewrite(tmp_path / "good.npz", tmp_path / "huge.npz", huge)
    assert (tmp_path / "huge.npz").stat().st_size < 2000
    built = []
    monkeypatch.setattr(nnlib.Parameter, "__init__", lambda *a, **k: built.append(a))
    with pytest.raises(CheckpointError, match=r"declares float32 \(30000, 30000\)"):
        nnlib.Sequential.load(tmp_path / "huge.npz")
    assert built == []


def test_npy_header_declaring_a_huge_array_is_refused_before_reading(tmp_path):
    path = tmp_path / "x.npz"
    header = {"descr": "<f4", "fortran_order": False, "shape": (30000, 30000)}
    with zipfile.ZipFile(path, "w") as z, z.open("model.0.weight.npy", "w") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(b"\0" * 16)
    with pytest.raises(CheckpointError, match="header does not match its size"):
        nnlib.load_checkpoint(path)


def test_foreign_and_damaged_files_get_nnlib_errors(tmp_path):
    np.savez(tmp_path / "plain.npz", a=np.zeros(3))
    (tmp_path / "text.npz").write_text("hello")
    np.savez_compressed(tmp_path / "packed.npz", __meta__=np.array("{}"))
    np.savez(tmp_path / "pickled.npz", __meta__=np.array([{}], dtype=object))
    for name, message in (("plain", "not an nnlib checkpoint"), ("text", "not a readable"),
                          ("packed", "compressed"), ("pickled", "not a JSON string")):
        with pytest.raises(CheckpointError, match=message):
            nnlib.load_checkpoint(tmp_path / f"{name}.npz")


@pytest.mark.parametrize("change, message", [
    (lambda m, a: m.update(version=2), "checkpoint version 2"),
    (lambda m, a: m["model"]["arch"]["layers"][0]["config"].update(n_in=2**40), "n_in"),
    (lambda m, a: m.update(kind="Pickle"), "kind 'Pickle' is not one of"),
    (lambda m, a: m["optimizer"].update({"class": "Evil"}), "optimizer class 'Evil' is not"),
    (lambda m, a: m["model"]["arch"]["layers"][0].update({"class": []}), "class"),
    (lambda m, a: m["model"]["arch"]["layers"][0]["config"].update(variant="x"), "variant"),
    (lambda m, a: m["optimizer"].update(params=[0, 0]), "distinct parameter indices"),
    (lambda m, a: m["optimizer"].update(params=[0, 9]), "parameter index"),
    (lambda m, a: m["optimizer"]["config"].update(lr=-1.0), "learning rate|configuration"),
    (lambda m, a: m.update(epoch=-1), "epoch"),
    (lambda m, a: a.update({"model.0.weight": a["model.0.weight"].astype(np.float64)}),
     "float64"),
    (lambda m, a: a["model.1.bias"].__setitem__(0, np.nan), "NaN or infinity"),
    (lambda m, a: a.pop("model.1.bias"), "model.1.bias is missing"),
    (lambda m, a: a.update(extra=np.zeros(1)), "unexpected arrays"),
    (lambda m, a: a["optimizer.v.0"].__setitem__(0, np.nan), "v.0: holds NaN"),
    (lambda m, a: a["optimizer.v.1"].__setitem__(0, -1.0), "second moment is negative"),
    (lambda m, a: a.update({"optimizer.steps": np.int64(-3)}), "steps"),
], ids=["version", "huge_size", "kind", "opt_class", "layer_class_list", "variant",
        "opt_params_repeat", "opt_params_range", "opt_lr",
        "epoch", "dtype", "nan", "missing", "extra", "nan_moment", "negative_v", "steps"])
def test_tampered_checkpoint_is_refused_and_changes_nothing(rt, saved, tmp_path, change,
                                                            message):
    path, model, opt = saved
    rewrite(path, tmp_path / "bad.npz", change)
    target = mlp(rt, seed=9)
    target_opt = optim.Adam(target.parameters(), lr=0.01)
    before = snapshot(target, target_opt)
    with pytest.raises(CheckpointError, match=message):
        nnlib.load_checkpoint(tmp_path / "bad.npz", target, target_opt)
    assert_same(snapshot(target, target_opt), before)
    with pytest.raises(CheckpointError, match=message):
        nnlib.load_checkpoint(tmp_path / "bad.npz")


# ---------------------------------------------------------------- optimizer state dicts
@pytest.mark.parametrize("change, message", [
    (lambda s: s.update({"m.1": np.zeros(7, np.float32)}), r"m.1: shape \(7,\)"),
    (lambda s: s.pop("steps"), "lacks steps"),
    (lambda s: s.update(skipped="x"), "state skipped"),
    (lambda s: s.update(skipped=np.array([0, 5])), "state skipped"),
    (lambda s: s.update(skipped=np.array([9, 0])), "state skipped"),
    (lambda s: s["v.0"].__setitem__((0, 0), np.nan), "v.0: holds NaN"),
    (lambda s: s.update({"m.0": s["m.0"].astype(np.int32)}), "floating point"),
    (lambda s: s.update(velocity=np.zeros(3)), "does not"),
], ids=["shape_after_good", "no_steps", "skipped_str", "skipped_flag", "skipped_count",
        "nan_moment", "int_moment", "unknown_entry"])
def test_failed_load_state_dict_leaves_the_state_unchanged(rt, change, message):
    model = mlp(rt)
    opt = optim.Adam(model.parameters(), lr=0.01)
    for x, y in batches(2):
        model.train_step(x, y, opt)
    state = opt.state_dict()
    before, steps = snapshot(model, opt), opt.steps
    bad = {k: np.array(v) for k, v in state.items()}
    change(bad)
    fresh = optim.Adam(model.parameters(), lr=0.01)
    fresh_before = [np.asarray(v) for _, v in sorted(fresh.state_dict().items())]
    with pytest.raises(CheckpointError, match=message):
        fresh.load_state_dict(bad)
    assert_same([np.asarray(v) for _, v in sorted(fresh.state_dict().items())], fresh_before)
    assert fresh.steps == 0
    assert_same(snapshot(model, opt), before) and opt.steps == steps


# ---------------------------------------------------------------- CATCH
@pytest.mark.parametrize("change, message", [
    (lambda a: a.update({"model.scale_std": np.ones(3)}), r"scale_std: float64 \(3,\)"),
    (lambda a: a.update({"model.scale_mean": np.ones((2, 1))}), "scale_mean"),
    (lambda a: a["model.scale_std"].__setitem__(1, 0.0), "scale_std holds a value <= 0"),
    (lambda a: a["model.scale_std"].__setitem__(1, np.inf), "NaN or infinity"),
], ids=["std_shape", "mean_shape", "zero_std", "inf_std"])
def test_catch_load_refuses_bad_scales(rt, tmp_path, change, message):
    model = CATCH(2, runtime=rt, **TINY)
    model.save(tmp_path / "c.npz")
    rewrite(tmp_path / "c.npz", tmp_path / "bad.npz", lambda m, a: change(a))
    with pytest.raises(CheckpointError, match=message):
        CATCH.load(tmp_path / "bad.npz", runtime=rt)


def test_catch_round_trip_keeps_scales_and_scores(rt, tmp_path):
    rng = np.random.default_rng(0)
    model = CATCH(2, runtime=rt, **TINY)
    model.scale_mean, model.scale_std = np.array([0.5, -1.0]), np.array([2.0, 0.25])
    x = rng.standard_normal((40, 2))
    model.save(tmp_path / "c.npz")
    back = CATCH.load(tmp_path / "c.npz", runtime=rt)
    np.testing.assert_array_equal(back.scale_std, model.scale_std)
    np.testing.assert_array_equal(back._score(x), model._score(x))  # unfitted: as such


def test_catch_parameter_shapes_match_the_built_network(rt):
    from nnlib.catch.detector import CATCHNet, net_arguments
    for options in ({"projection": "linear"}, {"projection": "complex", "e_layers": 2},
                    {"mask_input": "amplitude", "dc_source": "patches"}):
        model = CATCH(3, runtime=rt, **{**TINY, **options})
        built = {k: p.shape for k, p in model.net.named_parameters().items()}
        assert CATCHNet.parameter_shapes(net_arguments(3, model.seed, model.config)) == built


# ---------------------------------------------------------------- writing
def test_checkpoint_file_mode_follows_the_umask(rt, tmp_path):
    old = os.umask(0o022)
    try:
        nnlib.Sequential([nnlib.Dense(2, 2, runtime=rt)]).save(tmp_path / "m.npz")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m.npz").stat().st_mode) == 0o644


def test_the_folder_is_fsynced_after_the_rename(rt, tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def record(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real(fd)
    monkeypatch.setattr(os, "fsync", record)
    nnlib.Sequential([nnlib.Dense(2, 2, runtime=rt)]).save(tmp_path / "m.npz")
    assert synced == [False, True]  # the file, then its folder


def test_a_failed_save_removes_its_temporary_file(saved, monkeypatch):
    path, model, opt = saved
    before = path.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        nnlib.save_checkpoint(path, model, opt, epoch=3)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["run.npz"]


WRITER = """
import sys, numpy as np, nnlib
from nnlib import optim
net = nnlib.Sequential([nnlib.Dense(400, 400), nnlib.Dense(400, 10)])
opt = optim.Adam(net.parameters())
epoch = 0
while True:
    epoch += 1
    nnlib.save_checkpoint(sys.argv[1], net, opt, epoch=epoch)
    print(epoch, flush=True)
"""


@pytest.mark.slow
def test_kill_during_save_leaves_a_loadable_file_and_the_next_save_cleans_up(tmp_path):
    path = tmp_path / "run.npz"
    env = child_env()
    rng = np.random.default_rng(0)
    for trial in range(4):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], env=env,
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout.readline()  # one checkpoint written
        time.sleep(rng.uniform(0, 0.3))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        model, opt, epoch = nnlib.load_checkpoint(path)  # never a broken file
        assert epoch >= 1 and opt.steps == 0
    temps = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    nnlib.save_checkpoint(path, model, opt, epoch=epoch)
    assert [p.name for p in tmp_path.iterdir()] == ["run.npz"], temps


def test_header_is_plain_json(saved):
    with zipfile.ZipFile(saved[0]) as z:
        meta = json.loads(str(np.lib.format.read_array(z.open("__meta__.npy"))))
    assert meta["format"] == "nnlib.checkpoint" and meta["kind"] == "Sequential"
    assert meta["optimizer"]["class"] == "Adam" and meta["epoch"] == 2
