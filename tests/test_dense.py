"""Dense kernels against nnlib.reference, and finite-difference gradient checks."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pyopencl as cl
import pytest

import nnlib
from nnlib import reference as ref
from nnlib.activations import BY_NAME, ELEMENTWISE
from nnlib.layers.dense import (PRODUCTS, TUNE_SHAPE, VARIANTS, DenseKernels, build_options,
                                candidates, default_params, shape_class)
from nnlib.layers.dense_blocked import TRANSPOSE_GROUP, BlockedDenseKernels, transpose_group
from nnlib.layers.dense_params import (BLOCKED_KERNELS, FORWARD_TN_CLASSES, FORWARD_YT_TILES,
                                       K_BLOCK, MAX_K_SLICES, MIN_K_SLICE, REGISTER_GROUP,
                                       SMALL_KERNELS, TUNE_ALSO, TWO_ROW_GROUP,
                                       WEIGHT_REGISTER_GROUP,
                                       forward_yt_params, k_slices, lanes_by_default,
                                       lanes_candidates, lanes_params, register_tiles)

from .gradcheck import numeric_grad

ACTS = list(BY_NAME)


def shapes(rt):
    big = rt.max_work_group_size + 4  # above the device's work-group limit, no multiple of 4
    # Small batches take the one-output-per-item forward, larger ones the tiled one.
    return [(1, 1, 1), (1, 13, 7), (5, 3, 9), (7, 33, 17), (2, big, 3), (3, 5, big),
            (9, 37, 21), (33, big, 5), (17, 6, big), (6, 11, 4)]


def run_layer(rt, variant, act, batch, n_in, n_out, rng, params=None):
    """A fresh layer's forward and backward (its kernels' ``params`` if given)."""
    layer = nnlib.Dense(n_in, n_out, activation=act, seed=3, variant=variant, runtime=rt)
    if params is not None:
        layer.kernels = DenseKernels(rt, params=params)
    x = rng.standard_normal((batch, n_in)).astype(np.float32)
    dy = rng.standard_normal((batch, n_out)).astype(np.float32)
    y = layer.forward(x).get()
    dx = layer.backward(dy).get()
    return layer, x, dy, y, dx


def check_layer(rt, rng, variant, act, sizes, params=None):
    """:func:`run_layer` on each (batch, n_in, n_out) of ``sizes`` against the reference."""
    for batch, n_in, n_out in sizes:
        layer, x, dy, y, dx = run_layer(rt, variant, act, batch, n_in, n_out, rng, params)
        w, b = layer.weight.numpy().astype(np.float64), layer.bias.numpy().astype(np.float64)
        z = x.astype(np.float64) @ w.T + b
        want = ref.activate(z, act)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
        dx_ref, dw_ref, db_ref = ref.dense_backward(x.astype(np.float64), w, want, dy, act, z)
        np.testing.assert_allclose(dx, dx_ref, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(layer.weight.grad.get(), dw_ref, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(layer.bias.grad.get(), db_ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("act", ACTS)
def test_forward_and_backward_match_reference(rt, rng, variant, act):
    check_layer(rt, rng, variant, act, shapes(rt))


def test_variants_agree_on_a_large_batch(rt, rng):
    x = rng.standard_normal((67, 130)).astype(np.float32)
    out = [nnlib.Dense(130, 45, "tanh", seed=1, variant=v, runtime=rt).forward(x).get()
           for v in VARIANTS]
    np.testing.assert_allclose(out[0], out[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", VARIANTS)
def test_backward_accumulates_gradients_or_overwrites_them(rt, rng, variant):
    layer, x, dy, _, _ = run_layer(rt, variant, "tanh", 3, 6, 4, rng)
    once = [p.grad.get() for p in (layer.weight, layer.bias)]
    layer.forward(x)
    layer.backward(dy)
    for p, g in zip((layer.weight, layer.bias), once):
        np.testing.assert_allclose(p.grad.get(), 2 * g, rtol=1e-6)
    layer.forward(x)
    layer.backward(dy, accumulate=False)
    for p, g in zip((layer.weight, layer.bias), once):
        np.testing.assert_allclose(p.grad.get(), g, rtol=1e-6)


@pytest.mark.parametrize("variant", VARIANTS)
def test_backward_into_adds_the_input_gradient(rt, rng, variant):
    """``into`` gets dL/dx added (a residual branch's sum) and is returned; it may not be
    dz's own buffer (an identity activation passes dy on as dz)."""
    for batch, n_in, n_out in shapes(rt):
        layer, x, dy, _, dx = run_layer(rt, variant, "relu", batch, n_in, n_out, rng)
        base = rng.standard_normal(x.shape).astype(np.float32)
        into = rt.to_device(base)
        assert layer.backward(rt.to_device(dy), into=into) is into
        np.testing.assert_allclose(into.get(), base + dx, rtol=1e-5, atol=1e-5)
    square = nnlib.Dense(3, 3, variant=variant, runtime=rt)
    square.forward(rng.standard_normal((2, 3)))
    dy = rt.to_device(rng.standard_normal((2, 3)))
    with pytest.raises(ValueError, match="into"):
        square.backward(dy, into=dy)
    with pytest.raises(ValueError, match="into"):
        square.backward(dy, into=np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("act", ACTS)
def test_gradients_match_finite_differences(rt, variant, act):
    """The kernels' dL/dx, dL/dW, dL/db for L = sum(y * r) against central differences of
    the float64 reference forward."""
    rng = np.random.default_rng(7)
    layer = nnlib.Dense(5, 4, activation=act, seed=2, variant=variant, runtime=rt)
    x = rng.standard_normal((3, 5))
    r = rng.standard_normal((3, 4))
    layer.forward(x.astype(np.float32))
    dx = layer.backward(r.astype(np.float32)).get()
    w, b = layer.weight.numpy().astype(np.float64), layer.bias.numpy().astype(np.float64)

    def loss():
        return float(np.sum(ref.dense_forward(x, w, b, act) * r))

    for got, var in ((dx, x), (layer.weight.grad.get(), w), (layer.bias.grad.get(), b)):
        np.testing.assert_allclose(got, numeric_grad(loss, var, eps=1e-5), rtol=1e-3, atol=1e-4)


def test_bad_inputs_get_clear_errors(rt):
    layer = nnlib.Dense(4, 2, runtime=rt)
    with pytest.raises(ValueError, match=r"expected shape \(any, 4\), got \(3, 5\)"):
        layer.forward(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="expected shape"):
        layer.forward(np.zeros(4))
    with pytest.raises(ValueError, match="NaN or infinity"):
        layer.forward(np.array([[0.0, np.nan, 0.0, 0.0]]))
    with pytest.raises(TypeError, match="expected numbers"):
        layer.forward(np.array([["a", "b", "c", "d"]]))
    # a float64 device array is converted, as a float64 numpy array is
    want = layer.forward(np.zeros((1, 4))).get()
    np.testing.assert_array_equal(layer.forward(rt.zeros((1, 4), dtype=np.float64)).get(), want)
    with pytest.raises(TypeError, match="dtype"):
        layer.forward(rt.zeros((1, 4), dtype=np.complex64))
    with pytest.raises(ValueError, match="unknown activation 'gelu'"):
        nnlib.Dense(4, 2, activation="gelu", runtime=rt)
    with pytest.raises(ValueError, match="n_in must be a positive integer"):
        nnlib.Dense(0, 2, runtime=rt)
    with pytest.raises(ValueError, match="unknown dense variant"):
        nnlib.Dense(4, 2, variant="turbo", runtime=rt)
    for old, new in (("fast", "blocked"), ("seed", "article")):
        with pytest.warns(DeprecationWarning, match=f"'{old}' is now called '{new}'"):
            assert nnlib.Dense(4, 2, variant=old, runtime=rt).variant == new
    fresh = nnlib.Dense(4, 2, runtime=rt)
    with pytest.raises(RuntimeError, match="Dense.backward called before forward"):
        fresh.backward(np.zeros((1, 2)))
    with pytest.raises(RuntimeError, match="Dense.backward called before forward"):
        fresh.backward_preactivation(rt.zeros((1, 2)))
    fresh.forward(np.zeros((1, 4)))
    fresh.release()  # drops what forward saved: backward needs a forward again
    with pytest.raises(RuntimeError, match="Dense.backward called before forward"):
        fresh.backward(np.zeros((1, 2)))


def test_integer_and_float64_inputs_are_converted(rt):
    layer = nnlib.Dense(3, 2, runtime=rt)
    a = layer.forward(np.array([[1, 2, 3]])).get()
    b = layer.forward(np.array([[1.0, 2.0, 3.0]], dtype=np.float64)).get()
    np.testing.assert_array_equal(a, b)


def test_device_array_input_is_used_as_is(rt, rng):
    layer = nnlib.Dense(6, 3, runtime=rt)
    x = rng.standard_normal((2, 6)).astype(np.float32)
    np.testing.assert_array_equal(layer.forward(rt.to_device(x)).get(), layer.forward(x).get())


def every_candidate(source=candidates):
    """(product, params) for every parameter set the tuner may choose on this device (of
    ``source``'s choosing: e.g. ``lanes_candidates``, those of the lanes design)."""
    rt = nnlib.get_runtime()
    out = []
    for product in PRODUCTS:
        for shape in TUNE_SHAPE:
            out += [(product, c) for c in source(rt, product, shape)
                    if (product, c) not in out]
    return out


@pytest.mark.parametrize("product, params", every_candidate(),
                         ids=lambda v: v if isinstance(v, str) else build_options(v))
def test_every_tuning_candidate_matches_reference(rt, rng, product, params):
    """Whatever the tuner picks is correct: each candidate of each product, on odd sizes,
    sizes above the work-group limit and batch 1, the other products at their defaults."""
    big = rt.max_work_group_size + 3
    # 2600 inputs: whole k-blocks of gemm_nt's NT_KB, a partial one and a partial vector
    for batch, n_in, n_out in [(1, 13, 7), (7, 33, 17), (2, big, 3), (17, 6, big), (33, 37, 21),
                               (3, 2600, 5)]:
        layer = nnlib.Dense(n_in, n_out, "tanh", seed=3, runtime=rt)
        layer.kernels = DenseKernels(rt, params={product: params})
        x = rng.uniform(-1, 1, (batch, n_in)).astype(np.float32)
        dy = rng.standard_normal((batch, n_out)).astype(np.float32)
        rt.fill(layer.weight.grad, 0.5)  # the weight gradient accumulates
        y = layer.forward(x).get()
        dz = rt.to_device(dy * (1 - y.astype(np.float64) ** 2))
        dx = layer.backward_preactivation(dz, input_act="tanh").get()  # x as a tanh output
        w, b = layer.weight.numpy().astype(np.float64), layer.bias.numpy().astype(np.float64)
        want = ref.dense_forward(x.astype(np.float64), w, b, "tanh")
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
        dx_ref, dw_ref, db_ref = ref.dense_backward(x.astype(np.float64), w, want, dy, "tanh")
        np.testing.assert_allclose(dx, dx_ref * (1 - x.astype(np.float64) ** 2), rtol=1e-4,
                                   atol=1e-4)
        np.testing.assert_allclose(layer.weight.grad.get(), dw_ref + 0.5, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(layer.bias.grad.get(), db_ref, rtol=1e-4, atol=1e-4)


def test_input_gradient_on_packed_weights(rt, rng):
    """The input gradient with TN_PACKED (W packed into panels before each product, a wide
    layer's candidate): dx = dz W and, without a gate, dx += dz W, on odd sizes, sizes
    above the work-group limit and batch 1."""
    params = next(c for c in candidates(rt, "input", "wide") if c.get("TN_PACKED"))
    kernels = BlockedDenseKernels(rt, params={"input": params})
    big = rt.max_work_group_size + 3
    for batch, n_in, n_out in [(1, 13, 7), (7, 33, 17), (2, big, 3), (17, 6, big)]:
        dz, w = (rng.standard_normal(s).astype(np.float32) for s in ((batch, n_out),
                                                                      (n_out, n_in)))
        before = rng.standard_normal((batch, n_in)).astype(np.float32)
        want = dz.astype(np.float64) @ w
        dx = rt.empty((batch, n_in))
        kernels.backward_input(rt.to_device(dz), rt.to_device(w), dx)
        np.testing.assert_allclose(dx.get(), want, rtol=1e-4, atol=1e-4)
        into = rt.to_device(before)
        kernels.backward_input(rt.to_device(dz), rt.to_device(w), into, accumulate=True)
        np.testing.assert_allclose(into.get(), before + want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("product, params", every_candidate(lanes_candidates),
                         ids=lambda v: v if isinstance(v, str) else build_options(v))
def test_lanes_design_matches_reference_on_any_device(rt, rng, product, params):
    """The lanes design (dense.cl's TN_LANES) is correct on every device, also where the
    tuner does not try it."""
    test_every_tuning_candidate_matches_reference(rt, rng, product, params)


# gemm_tn's parameters in each design, for a split of k
SPLIT_DESIGNS = {
    "tiles": lambda rt, product: default_params(rt, product, lanes=False),
    "tiles, k-blocks": lambda rt, product: dict(default_params(rt, product, lanes=False),
                                                TN_KB=64),
    "lanes": lambda rt, product: lanes_params(rt, product, "b64"),
}


@pytest.mark.parametrize("design", list(SPLIT_DESIGNS))
@pytest.mark.parametrize("product", [*PRODUCTS, "forward on x"])
def test_gemm_tn_split_over_k_matches_reference(rt, rng, monkeypatch, design, product):
    """gemm_tn's k in slices (dimension 2 of the launch, added up by a tn_sum_splits
    kernel), as a device of many compute units runs a product of few tiles: the forward on
    Y^T and on x in place with its bias and activation, the input gradient gated by the
    activation, the weight gradient accumulated with the bias sums; three slices, unequal
    where k is no multiple of 3, some empty where k < 3 (batch 1, 2), on the sizes of every
    tuning candidate's test."""
    splits = []
    monkeypatch.setattr(BlockedDenseKernels, "k_slices",
                        staticmethod(lambda units, groups, nk: splits.append(nk) or 3))
    params = SPLIT_DESIGNS[design](rt, "input" if product.startswith("forward") else product)
    if product.startswith("forward"):
        route = "FWD_YT" if product == "forward" else "FWD_TN"
        params = (forward_yt_params(rt, "b64", route=route) if design == "lanes"
                  else params | {route: 1})
        product = "forward"
    test_every_tuning_candidate_matches_reference(rt, rng, product, params)
    assert 1 in splits and max(splits) > 3


def test_each_product_keeps_its_own_parameters_for_the_same_kernel(rt, rng):
    """The forward on Y^T and the input gradient both run gemm_tn: each with its own
    parameters, whichever ran first."""
    params = {"forward": forward_yt_params(rt, "b64"),
              "input": default_params(rt, "input", lanes=False)}
    kernels = DenseKernels(rt, params=params)
    layer = nnlib.Dense(33, 17, "tanh", seed=3, runtime=rt)
    layer.kernels = kernels
    x = rng.standard_normal((7, 33)).astype(np.float32)
    layer.forward(x)
    dx = rt.empty((7, 33))
    kernels.backward_input(rt.to_device(np.ones((7, 17), np.float32)), layer.weight.value,
                           dx)
    for product in ("forward", "input"):
        assert kernels._launcher(product, 7, 33 * 17, "gemm_tn")[1] == params[product]
    np.testing.assert_allclose(dx.get(), np.ones((7, 17)) @ layer.weight.numpy(), rtol=1e-5,
                               atol=1e-5)


def test_k_is_split_only_for_too_few_work_groups():
    assert k_slices(2, 16, 10_000) == 1  # a 2-core CPU: enough work-groups already
    assert k_slices(132, 32, 9000) == 9  # 132 multiprocessors, 32 tiles: two groups for each
    assert k_slices(132, 4, 9000) == MAX_K_SLICES  # 66 wanted, at most MAX_K_SLICES
    assert k_slices(132, 1, 2 * MIN_K_SLICE - 1) == 1  # each slice at least MIN_K_SLICE long
    assert k_slices(132, 1, 3 * MIN_K_SLICE) == 3


@pytest.mark.parametrize("forward", ["gemm_nt", "on Y^T", "tiles on Y^T", "on x",
                                     "tiles on x"])
@pytest.mark.parametrize("act", ACTS)
def test_lanes_design_matches_reference_for_every_activation(rt, rng, act, forward):
    """All three products in the lanes design, each activation (softmax of up to four
    outputs in the forward kernel itself, or after it on Y^T and on x), odd sizes, batch 1
    and a batch above a tile; the forward also on Y^T (FWD_YT) and by gemm_tn_bias on x in
    place (FWD_TN), each in the lanes design and in the tiles one, also above the device's
    work-group limit."""
    params = {p: lanes_params(rt, p, "b64") for p in PRODUCTS}
    tiles_tn = default_params(rt, "input", lanes=False)
    params["forward"] = {"gemm_nt": params["forward"], "on Y^T": forward_yt_params(rt, "b64"),
                         "tiles on Y^T": tiles_tn | {"FWD_YT": 1},
                         "on x": forward_yt_params(rt, "b64", route="FWD_TN"),
                         "tiles on x": tiles_tn | {"FWD_TN": 1}}[forward]
    sizes = [(1, 13, 3), (19, 9, 4), (5, 37, 21), (33, 6, 70)]
    if forward != "gemm_nt":
        big = rt.max_work_group_size + 3
        sizes += [(2, big, 5), (35, 7, big)]
    check_layer(rt, rng, "blocked", act, sizes, params)


def test_lanes_softmax_waits_for_every_lane_of_its_work_group(rt, rng):
    """The lanes forward's softmax (up to four outputs) gathers the rows' values in local
    memory: each row is read only after every lane wrote its column. Repeated on fresh inputs
    and a second block of rows, so that values left in local memory by an earlier launch
    cannot pass for this one's (PyPI's PoCL 3.0 skipped a barrier placed inside the branch:
    about one launch in six read the previous one's values)."""
    params = {p: lanes_params(rt, p, "b64") for p in PRODUCTS}
    for t in range(60):
        batch, n_in, n_out = [(19, 9, 4), (19, 9, 3), (33, 5, 2)][t % 3]
        layer = nnlib.Dense(n_in, n_out, activation="softmax", seed=t, runtime=rt)
        layer.kernels = DenseKernels(rt, params=params)
        x = rng.standard_normal((batch, n_in)).astype(np.float32)
        w, b = layer.weight.numpy().astype(np.float64), layer.bias.numpy().astype(np.float64)
        want = ref.activate(x.astype(np.float64) @ w.T + b, "softmax")
        np.testing.assert_allclose(layer.forward(x).get(), want, rtol=1e-4, atol=1e-5,
                                   err_msg=f"launch {t}, {batch} x {n_in} -> {n_out}")


def test_candidates_cover_the_choices_the_kernel_offers(rt):
    """The search space: tile rows per batch class, both load styles, fma, two widths, two
    work-group sizes (three with the register tiles), the gradients with and without a
    local-memory k-block; the default is
    always a candidate."""
    for product in PRODUCTS:
        for shape in TUNE_SHAPE:
            everything = candidates(rt, product, shape)
            assert default_params(rt, product) in everything
            found = [c for c in everything if not c.get("TN_LANES")]  # the tiles design
            lanes = lanes_candidates(rt, product, shape)
            assert all(c in everything for c in lanes) == lanes_by_default(rt) == \
                (lanes_params(rt, product, shape) in everything)
            for key in ("VLOAD", "FMA", "VW"):
                one_width = key == "VW" and rt.limits.widest_vector < 8  # dense.cl needs 4+
                assert len({c[key] for c in found}) == 1 + (not one_width), (product, shape, key)
            # the default's and four times it; register_tiles' TWO_ROW_GROUP on a compiler
            # that vectorises across work-items (the forward on x in place, FWD_TN, takes
            # the input gradient's group)
            groups = {c["LOCAL"] for c in found if not c.get("FWD_TN")}
            base = default_params(rt, product, shape, lanes=False)["LOCAL"]
            assert {base, 4 * base} <= groups <= {base, 4 * base, TWO_ROW_GROUP}, (product, shape)
            if product != "forward":
                assert 0 in {c["TN_KB"] for c in found} and len({c["TN_KB"] for c in found}) > 1
            assert {c.get("DZT", 0) for c in found} == ({0, 1} if product == "weight" else {0})
            packed = {c.get("TN_PACKED", 0) for c in found}
            assert packed == ({0, 1} if product == "weight" or (product, shape) == (
                "input", "wide") else {0}), (product, shape)
            assert all(c["TN_KB"] == 0 for c in found if c.get("TN_PACKED"))
    wide_weight = [c for c in candidates(rt, "weight", "wide") if c.get("TN_PACKED")]
    tiles = {(c["TN_R"], c["TN_V"]) for c in wide_weight}
    b64, wide = (default_params(rt, "weight", s, lanes=False) for s in ("b64", "wide"))
    registers = {(c["TN_R"], c["TN_V"]) for c in register_tiles(rt, "weight", wide, "wide")
                 if c.get("TN_PACKED")}
    assert tiles == {(b64["TN_R"], b64["TN_V"]), (wide["TN_R"], wide["TN_V"])} | registers
    wide_forward = candidates(rt, "forward", "wide")
    assert {c.get("NT_KB", 0) > 0 for c in wide_forward} == {False, True}
    assert {c.get("LOCAL_J", 1) for c in wide_forward} == {1, 4}
    assert {c["NT_I"] for c in candidates(rt, "forward", "b1")} == {  # and the b64 default's
        1, 2, default_params(rt, "forward")["NT_I"]}
    for shape in TUNE_SHAPE:  # the forward on Y^T and on x: candidates of the large batches
        for source in (candidates, lanes_candidates):
            assert any(c.get("FWD_YT") for c in source(rt, "forward", shape)) == (
                shape in FORWARD_YT_TILES)
            assert any(c.get("FWD_TN") for c in source(rt, "forward", shape)) == (
                shape in FORWARD_TN_CLASSES)
    assert shape_class("forward", 1) == "b1" and shape_class("input", 64) == "b64"
    assert shape_class("weight", 1) == "b64"
    assert shape_class("forward", 64, 240 * 128) == "small" == shape_class("weight", 1, 256 ** 2)
    assert shape_class("forward", 1920, 32 * 96) == "tall" == shape_class("input", 256, 9)
    assert shape_class("input", 255, 9) == "small" == shape_class("weight", 255, 32 * 96)
    assert shape_class("weight", 1920, 32 * 96) == "tall"
    assert shape_class("input", 64, 256 ** 2 + 1) == "b64" and shape_class("input", 4, 9) == "b4"
    assert shape_class("forward", 1, 2048 * 2048) == "wide" == shape_class("weight", 64, 4096 ** 2)


def cpu_vectorising_work_items(rt, lanes: int) -> SimpleNamespace:
    """``rt`` as a CPU whose compiler runs ``lanes`` work-items per vector instruction, as
    Intel's runtime does (8: AVX2, 16: AVX-512), with vectors of up to 16 floats."""
    limits = replace(rt.limits, kind="CPU", vector_width=1, widest_vector=16,
                     vector_lanes=lanes, work_group_multiple=128)
    return SimpleNamespace(limits=limits, vector_width=1, is_gpu=False,
                           work_group_multiple=128)


def test_avx2_registers_take_tiles_that_fit_them(rt):
    """With 8 lanes a vector (AVX2: 16 registers) the gradients beyond batch 1 take 6 rows of
    one 16-float vector (12 registers) with k-blocks, not the lanes design's 16 accumulators
    (on large layers the weight gradient's on dZ transposed first, in larger groups, and on
    dZ a candidate), and the forward 3 rows of x at width 8 (12 accumulators; 2 at batches
    up to 4), both candidates; at batch 1 (1 x 8
    accumulators) and with 16 lanes (AVX-512: 32 registers) the lanes design stays. Each
    default is a candidate, and the register tiles are candidates with 16 lanes too, in
    work-groups of the default's size; so are the gradients' 2 rows of 2 vectors, with
    k-blocks, in work-groups of TWO_ROW_GROUP, and their 4 rows of 3 vectors at width 8 in
    both orders (the input gradient's with k-blocks, beyond batch 1; the weight gradient's
    with x packed into panels, on dZ transposed first and on dZ)."""
    avx2, avx512 = cpu_vectorising_work_items(rt, 8), cpu_vectorising_work_items(rt, 16)
    assert avx2.limits.few_vector_registers and not avx512.limits.few_vector_registers
    for shape in ("b4", "b64", "small", "tall"):
        for product, block in (("input", 256), ("weight", 64)):
            got = default_params(avx2, product, shape)
            weight = product == "weight"
            large = weight and shape == "b64"  # small layers: no transpose
            assert (got["TN_R"], got["TN_V"], got["VW"], got["TN_KB"], got["LOCAL"]) == \
                (6, 1, 16, block, WEIGHT_REGISTER_GROUP if large else REGISTER_GROUP)
            assert got.get("DZT", 0) == large
            assert "TN_LANES" not in got and got in candidates(avx2, product, shape)
            assert default_params(avx512, product, shape)["TN_LANES"] == 1
            assert dict(got, LOCAL=2 * avx512.work_group_multiple) in candidates(avx512, product,
                                                                             shape)
            on_dz = {k: v for k, v in got.items() if k != "DZT"}
            both = (on_dz, dict(on_dz, DZT=1))  # dZ in place and transposed first
            assert all(c in candidates(avx2, product, shape) for c in both) == weight
            tile = ("TN_R", "TN_V", "VW", "LOCAL")
            two = [c for c in candidates(avx2, product, shape)
                   if [c.get(k) for k in tile] == [2, 2, 16, TWO_ROW_GROUP]]
            assert [(c["TN_KB"], c.get("DZT", 0)) for c in two] == \
                [(block // 2, 0) if product == "input" else (4 * block, 1)]
            three = [(c.get("TN_ORDER", 0), c["TN_KB"], c.get("TN_PACKED", 0), c.get("DZT", 0),
                      c["LOCAL"]) for c in candidates(avx2, product, shape)
                     if [c.get(k) for k in tile[:3]] == [4, 3, 8]]
            assert three == ([(order, 0, 1, dzt, WEIGHT_REGISTER_GROUP)
                              for order, dzt in ((1, 1), (1, 0), (0, 1), (0, 0))]
                             if weight else [(0, block // 2, 0, 0, REGISTER_GROUP),
                                             (1, block // 2, 0, 0, REGISTER_GROUP)])
        forward = default_params(avx2, "forward", shape)
        assert (forward["NT_I"], forward["VW"]) == (2 if shape == "b4" else 3, 8)
        assert forward in candidates(avx512, "forward", shape)
        rows = {c.get("NT_I") for c in candidates(avx2, "forward", shape) if c.get("VW") == 8}
        assert {2, 3} <= rows
    assert default_params(avx2, "input", "b1") == default_params(avx512, "input", "b1") == \
        lanes_params(avx2, "input", "b1")
    assert not any(c.get("TN_V") == 3 for c in candidates(avx2, "input", "b1"))
    # this device's tiles: one width for all three products, the forward's half of it with
    # few vector registers (Intel's runtime under nnlib.bench.emulate avx2)
    width = default_params(rt, "input", "b64", lanes=False)["VW"]
    assert default_params(rt, "forward")["VW"] == width // (
        2 if rt.limits.few_vector_registers else 1)


def test_a_cpus_wide_layers_take_the_tiles_by_default(rt):
    """On a CPU that vectorises across work-items (Intel's runtime, AVX-512) the gradients
    of the other classes take the lanes design, those of the wide class the tiles, with
    the lanes design a candidate; a GPU's wide layers keep the lanes design."""
    avx512 = cpu_vectorising_work_items(rt, 16)
    gpu = SimpleNamespace(**{**vars(avx512), "is_gpu": True})
    for product in ("input", "weight"):
        assert default_params(avx512, product, "b64")["TN_LANES"] == 1
        wide = default_params(avx512, product, "wide")
        assert "TN_LANES" not in wide and wide == default_params(avx512, product, "wide",
                                                                 lanes=False)
        found = candidates(avx512, product, "wide")
        assert found[0] == wide and lanes_params(avx512, product, "wide") in found
        assert default_params(gpu, product, "wide")["TN_LANES"] == 1


def test_each_build_holds_only_the_blocked_kernel_it_launches(rt):
    """A blocked kernel's build leaves out the other four (ONLY), the small kernels' builds
    all five, a build without ONLY holds all five (on the lanes design's tiles: the tiles'
    defaults take Intel's compiler seconds)."""
    def names(options):
        program = rt.program("dense", options)
        return set(program.get_info(cl.program_info.KERNEL_NAMES).split(";"))
    small = {"transpose", "dense_forward_seed", "tn_sum_splits", "pack_panels"}
    for product, kernel in [("forward", "gemm_nt"), ("input", "gemm_tn_gated"),
                            ("weight", "gemm_tn_rowsum")]:
        got = names(build_options(default_params(rt, product), kernel))
        assert got & set(BLOCKED_KERNELS) == {kernel} and small <= got
    assert not names(SMALL_KERNELS) & set(BLOCKED_KERNELS) and small <= names(SMALL_KERNELS)
    assert set(BLOCKED_KERNELS) <= names(build_options(lanes_params(rt, "weight", "b64")))


@pytest.mark.parametrize("kernel", ["transpose", "transpose_by_columns", "transpose_bias_act"])
@pytest.mark.parametrize("group", ["the launcher's", "transpose_group"])
def test_transpose_matches_numpy(rt, rng, kernel, group):
    """The transposes of dZ (DZT) and of X, and Y's from Y^T with bias and tanh (FWD_YT):
    partial 4 x 4 blocks at both edges, one row, one column, and more rows and more columns
    than a work-group holds work-items; in the launcher's work-groups and in the tiles of
    transpose_group, which the dense layer launches them in."""
    launcher = rt.launcher("dense", kernel, SMALL_KERNELS)
    local = transpose_group(launcher) if group == "transpose_group" else None
    big = 4 * rt.max_work_group_size + 5
    for rows, cols in [(1, 1), (1, 13), (13, 1), (4, 8), (7, 9), (big, 6), (5, big),
                       (37, 131)]:
        a = rng.standard_normal((rows, cols)).astype(np.float32)
        bias = rng.standard_normal(rows).astype(np.float32)
        out, blocks = rt.empty((cols, rows)), ((rows + 3) // 4, (cols + 3) // 4)
        args = [rt.to_device(a).data, out.data, np.int32(rows), np.int32(cols)]
        if kernel == "transpose_bias_act":
            launcher(blocks, local, *args, rt.to_device(bias).data,
                     np.int32(BY_NAME["tanh"].code))
            want = ref.activate((a.astype(np.float64) + bias[:, None]).T, "tanh")
            np.testing.assert_allclose(out.get(), want, rtol=1e-5, atol=1e-6)
            continue
        launcher(blocks[::-1] if kernel == "transpose_by_columns" else blocks, local, *args)
        np.testing.assert_array_equal(out.get(), a.T)


@pytest.mark.parametrize("kernel", ["backward_gate", "backward_gate_by_columns"])
@pytest.mark.parametrize("transposed", [True, False])
def test_backward_gate_matches_numpy(rt, rng, kernel, transposed):
    """dz = dy * act'(s) for every elementwise activation (s = y, or z where its derivative
    needs z), with dz^T beside it or none: partial 4 x 4 blocks at both edges, batch 1, one
    column, more rows and more columns than a work-group holds work-items."""
    launcher = rt.launcher("dense", kernel, SMALL_KERNELS)
    big = 4 * rt.max_work_group_size + 5
    for rows, cols in [(1, 1), (1, 13), (13, 1), (4, 8), (7, 9), (big, 6), (5, big)]:
        for act in ELEMENTWISE:
            z = rng.standard_normal((rows, cols)) * 2
            s = (z if BY_NAME[act].needs == "z" else ref.activate(z, act)).astype(np.float32)
            dy = rng.standard_normal((rows, cols)).astype(np.float32)
            dz, dz_t = rt.empty((rows, cols)), rt.empty((cols, rows)) if transposed else None
            blocks = ((rows + 3) // 4, (cols + 3) // 4)
            launcher(blocks[::-1] if kernel.endswith("columns") else blocks,
                     transpose_group(launcher), rt.to_device(s).data, rt.to_device(dy).data,
                     dz.data, dz_t.data if transposed else None, np.int32(rows),
                     np.int32(cols), np.int32(BY_NAME[act].code))
            want = dy * ref.activate_grad(s.astype(np.float64), act)
            np.testing.assert_allclose(dz.get(), want, rtol=1e-5, atol=1e-6, err_msg=act)
            if transposed:
                np.testing.assert_array_equal(dz_t.get(), dz.get().T)


@pytest.mark.parametrize("act", ["tanh", "silu"])
def test_weight_gradient_on_dzt_reads_the_gates_transpose(rt, rng, monkeypatch, act):
    """With DZT, Dense.backward's weight gradient reads the dz^T that backward_gate wrote
    beside dz (no transpose launch of its own); without DZT, the gate writes no dz^T."""
    weight = dict(default_params(rt, "weight", "b64"), DZT=1)
    gate, seen = BlockedDenseKernels.backward_gate, []
    monkeypatch.setattr(BlockedDenseKernels, "transposed",
                        lambda self, dz: pytest.fail("dz transposed"))
    monkeypatch.setattr(BlockedDenseKernels, "backward_gate",
                        lambda *a: seen.append(gate(*a)) or seen[-1])
    for dzt in (1, 0):
        seen.clear()
        check_layer(rt, rng, "blocked", act, [(6, 9, 11), (33, 17, 5)],
                    params={"weight": dict(weight, DZT=dzt)})
        assert [t is None for _, t in seen] == [not dzt] * 2


def test_transpose_group_fits_the_launchers_limits():
    """TRANSPOSE_GROUP where it fits; halved along its longer side until it fits a smaller
    work-group or dimension limit, never below one work-item."""
    def fake(size, items):
        return SimpleNamespace(work_group_size=size, max_work_item_sizes=items)
    assert transpose_group(fake(1024, (1024, 1024, 64))) == TRANSPOSE_GROUP == (8, 32)
    assert transpose_group(fake(64, (64, 64, 64))) == (8, 8)
    assert transpose_group(fake(256, (256, 4, 1))) == (8, 4)
    assert transpose_group(fake(16, (4, 16, 1))) == (4, 4)
    assert transpose_group(fake(1, (1, 1, 1))) == (1, 1)


@pytest.mark.parametrize("local_kib", [None, 48, 16])
def test_gradient_k_blocks_fit_the_local_memory(rt, monkeypatch, local_kib):
    """The gradients' local-memory k-blocks the tuner tries beside the default's: half of
    K_BLOCK among them (a panel that fits a smaller L1 cache), each only where its panel
    (TN_KB rows of TN_V * VW floats) fits the device's local memory: this device's (where
    every candidate's panel fits), a GPU's 48 KiB and 16 KiB."""
    if local_kib is not None:
        monkeypatch.setattr(rt, "limits", replace(rt.limits, local_mem_size=local_kib << 10))
    for product in ("input", "weight"):
        for shape in TUNE_SHAPE:
            found = candidates(rt, product, shape)
            base = default_params(rt, product, shape, lanes=False)
            row = base["TN_V"] * base["VW"] * 4  # bytes of one row of a k-block's panel
            blocks = {c["TN_KB"] for c in found if "TN_KB" in c
                      and c == dict(base, TN_KB=c["TN_KB"], VLOAD=c["VLOAD"])}
            assert all(kb * row <= rt.limits.local_mem_size for kb in blocks - {base["TN_KB"]})
            half = K_BLOCK[product] // 2
            assert (half in blocks) == (half * row <= rt.limits.local_mem_size), (product, shape)
            if local_kib is None:
                assert all(c["TN_KB"] * c["TN_V"] * c["VW"] * 4 <= rt.limits.local_mem_size
                           for c in found if c.get("TN_KB")), (product, shape)


@pytest.mark.parametrize("lanes, kernel", [(0, "transpose"), (8, "transpose_by_columns")])
def test_dz_is_transposed_along_its_rows_where_lanes_run_work_items(rt, rng, monkeypatch, lanes,
                                                                    kernel):
    """The weight gradient's dZ^T (DZT): by transpose, except on a compiler that runs
    work-items in the lanes of a vector (Intel's runtime), whose lanes then read along dZ's
    rows (transpose_by_columns); both give dZ^T, on more columns than a work-group holds."""
    from nnlib.bench.profile_step import recording
    monkeypatch.setattr(rt, "limits", replace(rt.limits, kind="CPU", vector_lanes=lanes,
                                              vector_width=1 if lanes else 8))
    assert rt.limits.vectorises_across_work_items == bool(lanes)
    dz = rng.standard_normal((5, 4 * rt.max_work_group_size + 3)).astype(np.float32)
    with recording(rt) as events:
        out = BlockedDenseKernels(rt).transposed(rt.to_device(dz))
    assert [name for name, _ in events] == [kernel]
    np.testing.assert_array_equal(out.get(), dz.T)


def test_a_class_is_timed_on_each_of_its_problems(monkeypatch):
    """The tuner's time of a candidate for "tall" is the sum of its times on the class's
    problem and on each of TUNE_ALSO's (CATCH's two kinds of layer); classes without
    TUNE_ALSO time one."""
    from nnlib.layers import dense_blocked
    calls = []

    def fake(rt, product, params, batch, n, act_name):
        calls.append((product, batch, n, act_name))
        return batch * 1e-6
    monkeypatch.setattr(dense_blocked, "measure_one", fake)
    assert dense_blocked.measure(None, "input", "tall", {}) == pytest.approx(
        sum(b * 1e-6 for b, _ in [TUNE_SHAPE["tall"], *TUNE_ALSO["tall"]]))
    assert calls == [("input", b, n, "relu") for b, n in [TUNE_SHAPE["tall"], *TUNE_ALSO["tall"]]]
    assert (320, 192) in TUNE_ALSO["tall"]
    calls.clear()
    dense_blocked.measure(None, "weight", "b1", {})
    assert "b1" not in TUNE_ALSO and calls == [("weight", *TUNE_SHAPE["b1"], "tanh")]


def test_wide_layer_uses_the_wide_class_and_matches_reference(rt, rng):
    """A layer of WIDE_WEIGHTS weights or more runs the wide class's parameters (without
    tuning: its defaults) and still matches the reference, on an odd batch and odd widths."""
    from nnlib.layers.dense_params import WIDE_WEIGHTS

    n_in, n_out = 2053, WIDE_WEIGHTS // 2053 + 1
    layer = nnlib.Dense(n_in, n_out, "relu", seed=4, runtime=rt)
    for product in PRODUCTS:
        assert layer.kernels.params(product, 5, n_in * n_out) == \
            default_params(rt, product, "wide")
    x = rng.uniform(-1, 1, (5, n_in)).astype(np.float32)
    dy = rng.standard_normal((5, n_out)).astype(np.float32)
    y = layer.forward(x).get()
    dz = rt.to_device(dy * (y > 0))
    dx = layer.backward_preactivation(dz).get()
    w, b = layer.weight.numpy().astype(np.float64), layer.bias.numpy().astype(np.float64)
    want = ref.dense_forward(x.astype(np.float64), w, b, "relu")
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    dx_ref, dw_ref, db_ref = ref.dense_backward(x.astype(np.float64), w, want, dy, "relu")
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(layer.weight.grad.get(), dw_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(layer.bias.grad.get(), db_ref, rtol=1e-4, atol=1e-4)


def test_tuned_parameters_come_from_the_search(rt, tmp_path, monkeypatch):
    """With tuning on, a layer runs the candidate the (here faked) measurements favour."""
    from nnlib import tuning
    from nnlib.layers import dense_blocked

    monkeypatch.setenv("NNLIB_TUNING_DIR", str(tmp_path))
    want = candidates(rt, "forward", "b4")[-1]
    monkeypatch.setattr(dense_blocked, "measure", lambda rt, product, shape, p: 1.0 - (p == want))
    tuning.set_mode("1")
    try:
        kernels = DenseKernels(rt)
        assert kernels.params("forward", 3) == want
        assert tuning.stored(rt)["dense.forward/b4"]["params"] == want
    finally:
        tuning.set_mode(None)


def test_unknown_product_is_refused(rt):
    with pytest.raises(ValueError, match="unknown dense product"):
        DenseKernels(rt, params={"sideways": {}})
