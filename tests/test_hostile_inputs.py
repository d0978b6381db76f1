"""Regression tests of issue 14's hostile inputs: array layouts, numpy into the CATCH ops, bool
sizes, wrong runtimes, eps = 0, use_device and the program cache. Scenarios that once
segfaulted run in their own process (tests/isolated.py)."""

import inspect

import numpy as np
import pyopencl.array as cla
import pytest

import nnlib
from nnlib import optim
from nnlib import reference as ref
from nnlib import runtime as runtime_module
from nnlib.registry import OPTIMIZERS
from nnlib.catch import CATCH
from nnlib.catch.ops import GELU, LayerNorm, MaskGenerator

from .isolated import run_isolated


def device_layouts(rt, x):
    """``x`` as device arrays of several layouts: contiguous, transposed back, every second
    row of a bigger array, an offset slice."""
    big = np.zeros((2 * x.shape[0],) + x.shape[1:], np.float32)
    big[::2] = x
    padded = np.concatenate([np.ones((3,) + x.shape[1:], np.float32), x])
    return {
        "contiguous": rt.to_device(x),
        "transposed": cla.to_device(rt.queue, np.ascontiguousarray(x.T)).T,
        "strided": cla.to_device(rt.queue, big)[::2],
        "offset": cla.to_device(rt.queue, padded)[3:],
    }


def test_non_contiguous_device_arrays_give_dense_the_right_result(rt, rng):
    layer = nnlib.Dense(4, 3, "tanh", runtime=rt)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    want = layer.forward(x).get()
    for kind, xd in device_layouts(rt, x).items():
        np.testing.assert_allclose(layer.forward(xd).get(), want, rtol=1e-6, err_msg=kind)


@pytest.mark.parametrize("cls", [nnlib.Conv1d, nnlib.ComplexConv1d])
def test_non_contiguous_device_arrays_give_conv_the_right_result(rt, rng, cls):
    layer = cls(3, 2, 2, variables=2, runtime=rt)
    x = rng.standard_normal((3, 2, 9)).astype(np.float32)
    if cls is nnlib.ComplexConv1d:
        x = (x + 1j * rng.standard_normal(x.shape)).astype(np.complex64)
        both = np.concatenate([x[::-1], x])
        on_device = cla.to_device(rt.queue, both)
        for kind, xd, host in (("offset", on_device[3:], x), ("strided", on_device[::2],
                                                                both[::2])):
            np.testing.assert_allclose(layer.forward(xd).get(), layer.forward(host).get(),
                                       rtol=1e-6, err_msg=kind)
        return
    want = layer.forward(x).get()
    for kind, xd in device_layouts(rt, x).items():
        np.testing.assert_allclose(layer.forward(xd).get(), want, rtol=1e-6, err_msg=kind)


def test_non_contiguous_loss_targets_give_the_true_loss(rt, rng):
    net = nnlib.Sequential([nnlib.Dense(4, 3, runtime=rt)])
    x = rng.standard_normal((6, 4)).astype(np.float32)
    y = rng.standard_normal((6, 3)).astype(np.float32)
    want = net.compute_loss(x, y)
    assert want == pytest.approx(ref.mse(net.predict(x).astype(np.float64), y), rel=1e-5)
    for kind, yd in device_layouts(rt, y).items():
        assert net.compute_loss(x, yd) == pytest.approx(want, rel=1e-6), kind


def test_numpy_and_strided_input_to_catch_ops_does_not_segfault():
    out = run_isolated("""
        import numpy as np, pyopencl.array as cla, nnlib
        from nnlib import reference as ref
        from nnlib.catch.ops import GELU, LayerNorm, MaskGenerator
        rt = nnlib.get_runtime()
        x = np.linspace(-3, 3, 12).reshape(3, 4).astype(np.float32)
        g = GELU(rt)
        for inp in (np.ones(2, np.float32), x, x.T, cla.to_device(rt.queue, x).T):
            want = ref.gelu(np.asarray(inp.get() if hasattr(inp, "get") else inp, np.float64))
            assert np.allclose(g.forward(inp).get(), want, atol=1e-6)
        assert np.allclose(g.backward(np.ones((4, 3))).get(), ref.gelu_grad(x.T.astype(float)),
                           atol=1e-5)
        norm = LayerNorm(4, rt)
        y, _, _ = ref.layer_norm_forward(x.astype(float), np.ones(4), np.zeros(4))
        assert np.allclose(norm.forward(x).get(), y, atol=1e-5)
        mg = MaskGenerator(2, 3, runtime=rt)
        mask = mg.forward(np.zeros((4, 2, 3)), np.zeros((4, 2, 2)))
        mg.backward(np.ones((4, 2, 2)))
        assert mask.shape == (4, 2, 2)
        for bad in (lambda: norm.forward(np.ones((2, 5))), lambda: GELU(rt).backward(x),
                    lambda: mg.forward(np.zeros((4, 3, 3)), np.zeros((4, 3, 3)))):
            try:
                bad()
            except (ValueError, RuntimeError) as err:
                print(type(err).__name__, err)
            else:
                raise AssertionError("accepted")
    """)
    assert "LayerNorm input: expected" in out and "before forward" in out
    assert "MaskGenerator patches: expected shape" in out


def test_offset_device_slice_is_copied_not_a_pyopencl_error(rt, rng):
    x = rng.standard_normal((10, 4)).astype(np.float32)
    whole = rt.to_device(x)
    layer = nnlib.Dense(4, 2, runtime=rt)
    np.testing.assert_allclose(layer.forward(whole[3:7]).get(), layer.forward(x[3:7]).get(),
                               rtol=1e-6)
    assert rt.to_device(whole[3:7]).offset == 0


@pytest.mark.parametrize("make", [
    lambda rt: nnlib.Dense(True, 3, runtime=rt),
    lambda rt: nnlib.Dense(3, False, runtime=rt),
    lambda rt: nnlib.Conv1d(True, 1, 2, 2, runtime=rt),
    lambda rt: LayerNorm(True, rt),
    lambda rt: MaskGenerator(2, True, runtime=rt),
    lambda rt: CATCH(True, runtime=rt),
], ids=["dense_n_in", "dense_n_out", "conv_window", "layer_norm", "mask_generator", "catch"])
def test_bool_for_an_integer_size_is_refused(rt, make):
    with pytest.raises(ValueError, match="must be a positive integer, got (True|False)"):
        make(rt)


@pytest.mark.parametrize("make", [
    lambda bad: nnlib.Dense(3, 2, runtime=bad),
    lambda bad: nnlib.Conv1d(2, 1, 2, 2, runtime=bad),
    lambda bad: nnlib.Parameter(np.zeros(3), runtime=bad),
    lambda bad: LayerNorm(3, bad),
    lambda bad: GELU(bad),
    lambda bad: CATCH(2, runtime=bad),
], ids=["dense", "conv", "parameter", "layer_norm", "gelu", "catch"])
@pytest.mark.parametrize("bad", ["cpu", 0, np.zeros(2)], ids=["str", "int", "array"])
def test_wrong_runtime_argument_gets_nnlib_message(make, bad):
    with pytest.raises(TypeError, match="runtime must be an nnlib.Runtime"):
        make(bad)


def test_sizes_beyond_32_bits_are_refused_before_any_launch(rt):
    """Fuzzing found a checkpoint with step 2**40 that loaded, then overflowed np.int32."""
    with pytest.raises(ValueError, match="step must be a positive integer, got 1099511627776"):
        nnlib.Conv1d(2, 2**40, 1, 1, runtime=rt)


def test_seed_must_be_a_non_negative_integer(rt):
    for seed in (-1, 1.5, "0", None):
        with pytest.raises(ValueError, match="seed must be a non-negative integer"):
            nnlib.Dense(3, 2, seed=seed, runtime=rt)


@pytest.mark.parametrize("name", [n for n, c in OPTIMIZERS.items()
                                  if "eps" in inspect.signature(c).parameters])
def test_adam_eps0_zero_gradient_keeps_weights_finite(rt, name):
    layer = nnlib.Dense(5, 3, runtime=rt)
    before = [p.numpy() for p in layer.parameters()]
    opt = getattr(optim, name)(layer.parameters(), eps=0.0, weight_decay=0.0)
    for _ in range(3):
        opt.step()  # the gradients are zero
    for p, b in zip(layer.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)
    assert opt.skipped_steps == 0
    layer.weight.grad.fill(0.5)  # a real gradient still moves the weights, finitely
    opt.step()
    assert np.isfinite(layer.weight.numpy()).all()
    assert not np.array_equal(layer.weight.numpy(), before[0])


def test_use_device_reuses_the_runtime_of_a_device(rt):
    assert nnlib.use_device(rt.device) is rt
    assert nnlib.get_runtime() is rt


def test_use_device_does_not_leak():
    out = run_isolated("""
        import nnlib
        def rss_mib():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * 4096 / 2**20
        device = nnlib.get_runtime().device
        for _ in range(3):
            nnlib.Dense(3, 2, runtime=nnlib.use_device(device))
        start = rss_mib()
        for _ in range(40):
            nnlib.Dense(3, 2, runtime=nnlib.use_device(device))
        print(f"{rss_mib() - start:.1f}")
    """)
    assert float(out) < 20  # was ~2.2 MB per call: 88 MB for 40 calls


def test_program_cache_is_bounded_for_distinct_student_files(rt, tmp_path, monkeypatch):
    monkeypatch.setattr(runtime_module, "MAX_PROGRAMS", 3)
    fresh = nnlib.Runtime(rt.device)
    text = runtime_module.source("vector")
    built = []
    for i in range(5):  # five edits of a student's file: five distinct sources
        (tmp_path / "vector.cl").write_text(f"// edit {i}\n{text}")
        built.append(fresh.program("vector", folder=tmp_path))
    assert len(fresh._programs) == 3
    assert fresh.program("vector", folder=tmp_path) is built[-1]  # the newest stays cached


def test_fit_and_predict_give_nnlib_messages_for_weak_arguments(rt, rng):
    net = nnlib.Sequential([nnlib.Dense(3, 2, "softmax", runtime=rt)], loss="cross_entropy")
    x = rng.standard_normal((4, 3))
    sgd = optim.SGD(net.parameters())
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got True"):
        net.fit(x, [0, 1, 0, 1], sgd, batch_size=True, progress=False)
    with pytest.raises(ValueError, match="epochs >= 0"):
        net.fit(x, [0, 1, 0, 1], sgd, epochs=1.5, progress=False)
    with pytest.raises(TypeError, match="predict input: expected an array of numbers"):
        net.predict("abc")
    with pytest.raises(ValueError, match="predict: batch_size must be a positive integer"):
        net.predict(x, batch_size=0)
    with pytest.raises(ValueError, match=r"class labels: expected shape \(4\)"):
        net.compute_loss(x, [0, 1])
    labels = [0, 1, 1, 0]  # a list of labels, as a numpy array would be
    assert net.compute_loss(x, labels) == net.compute_loss(x, np.array(labels))
    np.testing.assert_array_equal(net.predict(rt.to_device(x).T.T), net.predict(x))


# ---------------------------------------------------------------- issue 32, part 6
def _mlp(rt, n_out=3, act="softmax"):
    return nnlib.Sequential([nnlib.Dense(4, n_out, act, runtime=rt)],
                            loss="cross_entropy" if act == "softmax" else "mse")


def test_bad_validation_labels_are_refused_before_training(rt, rng):
    net = _mlp(rt)
    opt = optim.SGD(net.parameters(), lr=0.1)
    x, y = rng.standard_normal((8, 4)), np.arange(8) % 3
    before = net.layers[0].weight.numpy()
    for bad, words in (((x, np.full(8, 7)), "labels must lie"), ((x[:, :3], y), "shape"),
                       ((x, y[:5]), "as many"), ((x + 1j, y), "real and finite"), (x, "pair")):
        with pytest.raises((ValueError, TypeError), match=words):
            net.fit(x, y, opt, epochs=1, validation_data=bad, progress=False)
    np.testing.assert_array_equal(net.layers[0].weight.numpy(), before)  # nothing trained


def test_another_models_optimizer_and_layers_of_two_runtimes_are_refused(rt, rng):
    net, other = _mlp(rt), _mlp(rt)
    with pytest.raises(ValueError, match="not this network's"):
        net.train_step(rng.standard_normal((2, 4)), [0, 1], optim.SGD(other.parameters()))
    second = nnlib.Runtime(rt.device)
    with pytest.raises(ValueError, match="another runtime"):
        nnlib.Sequential([nnlib.Dense(4, 3, runtime=second), nnlib.Dense(3, 2, runtime=rt)])


def test_fused_mlp_fit_refuses_complex_input(rt, rng):
    from nnlib.fused import FusedMLP

    net = _mlp(rt, 2, "tanh")
    fused = FusedMLP(net, optim.SGD(net.parameters(), lr=0.1))
    with pytest.raises(TypeError, match="complex|dtype"):
        fused.fit(rng.standard_normal((4, 4)) + 1j, rng.standard_normal((4, 2)), epochs=1)


def test_catch_options_scores_and_huge_inputs_get_clear_errors(rng):
    tiny = dict(window=32, patch_size=8, patch_stride=4, cf_dim=6, e_layers=1, n_heads=2,
                head_dim=4, d_ff=8, d_model=4, batch_size=16)
    for key, value in (("batch_size", 0), ("patch_stride", 0), ("train_stride", 0),
                       ("e_layers", 0), ("n_heads", 0), ("temperature", 0),
                       ("score_lambda", float("nan")), ("lr", float("inf"))):
        with pytest.raises(ValueError, match=f"CATCH: {key} must be"):
            CATCH(2, **{**tiny, key: value})
    model = CATCH(2, **tiny)
    series = rng.standard_normal((80, 2))
    with pytest.raises(RuntimeError, match="call fit first"):
        model.score(series)
    model.fit(series, epochs=1, progress=False)
    assert np.isfinite(model.score(series)).all()
    with pytest.raises(ValueError, match="standard deviations"):
        model.score(series * 1e30)


def test_buffers_above_the_devices_largest_are_refused_before_allocating(rt):
    huge = int(np.sqrt(rt.max_alloc / 4)) + 2
    with pytest.raises(MemoryError, match="CL_DEVICE_MAX_MEM_ALLOC_SIZE"):
        nnlib.Dense(huge, huge, runtime=rt)
    filters = 4096  # an output of filters x length values from a small input
    layer = nnlib.Conv1d(1, 1, filters, 1, runtime=rt)
    length = rt.max_alloc // (4 * filters) + 16
    with pytest.raises(MemoryError, match="allocates at most"):
        layer.forward(np.ones((1, 1, length), np.float32))


def test_checkpoint_paths_long_empty_and_not_regular(rt, tmp_path):
    net = _mlp(rt)
    long_name = tmp_path / ("n" * 250)
    net.save(long_name)
    assert nnlib.Sequential.load(long_name).layers[0].n_out == 3
    for bad, error in (("", ValueError), (tmp_path, IsADirectoryError),
                       (tmp_path / ("n" * 300), ValueError)):
        with pytest.raises(error, match="save_checkpoint"):
            net.save(bad)
    with pytest.raises(nnlib.CheckpointError, match="not a regular file"):
        nnlib.Sequential.load("/dev/zero")


def test_two_threads_training_one_network_take_turns(rt, rng):
    import threading

    net = _mlp(rt)
    opt = optim.SGD(net.parameters(), lr=0.01)
    x, y = rng.standard_normal((16, 4)), np.arange(16) % 3
    errors = []

    def train():
        try:
            for _ in range(30):
                float(net.train_step(x, y, opt))
        except Exception as err:  # noqa: BLE001
            errors.append(err)
    threads = [threading.Thread(target=train) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
