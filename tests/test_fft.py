"""nnlib.fft against np.fft, round trip, Parseval, the adjoint by finite differences, the
numpy references of the algorithms (Stockham radices 2, 3, 4, 5 in local or global memory,
direct, Bluestein), the real <-> complex helpers and bad input."""

import weakref

import numpy as np
import pytest

import nnlib
from nnlib import fft as F
from nnlib import reference as ref

from .test_complex_conv import complex_numeric_grad


def lengths(rt):
    """Every algorithm, odd and prime lengths, and lengths above the max work-group size."""
    big = rt.max_work_group_size
    return [1, 2, 3, 5, 7, 8, 15, 17, 24, 63, F.DIRECT_MAX, F.DIRECT_MAX + 1, 96, 97, 100,
            1000, 1024, 2 * big, big + 4]


@pytest.fixture
def global_stages(monkeypatch):
    """Plans made while this fixture is active see no local memory: smooth lengths then run
    one launch per stage in global memory ("pow2" / "mixed")."""
    monkeypatch.setattr(F, "_local_mem_size", lambda rt: 0)
    monkeypatch.setattr(F, "_plans", weakref.WeakKeyDictionary())


def cdata(rng, shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def assert_close(got, want, tol=1e-5):
    """Errors of an FFT in float32 scale with the largest coefficient, not with each one."""
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * max(np.abs(want).max(), 1e-30))


def test_each_length_uses_the_expected_algorithm(rt):
    big = next(n for n in range(rt.max_work_group_size + 1, 10**9) if not ref.is_smooth(n))
    want = {1: "direct", 2: "local", 1024: "local", 96: "local", 1000: "local", 25: "local",
            17: "direct", F.DIRECT_MAX - 1: "direct", 7: "direct", 2 * 97: "bluestein",
            big: "bluestein"}
    assert {n: F.plan(rt, n).kind for n in want} == want
    too_long = F._local_mem_size(rt) // 16 + 1  # two rows of it do not fit in local memory
    pow2 = 1 << (too_long - 1).bit_length()
    assert F.plan(rt, pow2).kind == "pow2" and F.plan(rt, 3 * pow2).kind == "mixed"


def test_global_memory_stages_match_numpy(rt, rng, global_stages):
    for n in (2, 3, 5, 8, 15, 24, 96, 1000, 1024):
        assert F.plan(rt, n).kind == ("pow2" if n & (n - 1) == 0 else "mixed")
        for rows in (1, 3):
            x = cdata(rng, (rows, n))
            assert_close(F.fft(x, runtime=rt).get(), np.fft.fft(x.astype(np.complex128)))
            assert_close(F.ifft(x, "ortho", rt).get(),
                         np.fft.ifft(x.astype(np.complex128), norm="ortho"))


@pytest.mark.slow
def test_long_rows_beyond_local_memory(rt, rng):
    pow2 = 1 << (F._local_mem_size(rt) // 16).bit_length()
    for n in (pow2, 3 * pow2 // 2):
        x = cdata(rng, (2, n))
        assert F.plan(rt, n).kind == ("pow2" if n == pow2 else "mixed")
        assert_close(F.fft(x, runtime=rt).get(), np.fft.fft(x.astype(np.complex128)))
        back = F.ifft(F.fft(x, runtime=rt), runtime=rt).get()
        np.testing.assert_allclose(back, x, rtol=0, atol=3e-6 * np.abs(x).max())


@pytest.mark.parametrize("norm", F.NORMS)
def test_fft_and_ifft_match_numpy(rt, rng, norm):
    for n in lengths(rt):
        for shape in ((1, n), (3, n), (2, 1, n)):
            x = cdata(rng, shape)
            x128 = x.astype(np.complex128)
            assert_close(F.fft(x, norm, rt).get(), np.fft.fft(x128, norm=norm))
            assert_close(F.ifft(x, norm, rt).get(), np.fft.ifft(x128, norm=norm))


def test_one_dimensional_and_real_input(rt, rng):
    x = rng.standard_normal(100)
    assert F.fft(x, runtime=rt).shape == (100,)
    assert_close(F.fft(x, runtime=rt).get(), np.fft.fft(x))
    assert_close(F.fft(list(x[:8]), runtime=rt).get(), np.fft.fft(x[:8]))


def test_round_trip_and_parseval(rt, rng):
    for n in lengths(rt):
        x = cdata(rng, (4, n))
        back = F.ifft(F.fft(x, runtime=rt), runtime=rt).get()
        np.testing.assert_allclose(back, x, rtol=0, atol=3e-6 * np.abs(x).max())
        spectrum = F.fft(x, runtime=rt).get().astype(np.complex128)
        energy = np.sum(np.abs(x.astype(np.complex128)) ** 2, axis=-1)
        np.testing.assert_allclose(np.sum(np.abs(spectrum) ** 2, axis=-1) / n, energy,
                                   rtol=1e-5)
        ortho = F.fft(x, "ortho", rt).get().astype(np.complex128)
        np.testing.assert_allclose(np.sum(np.abs(ortho) ** 2, axis=-1), energy, rtol=1e-5)


def test_device_input_is_left_unchanged(rt, rng):
    x = cdata(rng, (2, 16))
    dev = rt.to_device(x, dtype=np.complex64)
    F.fft(dev, runtime=rt)
    F.ifft(dev, runtime=rt)
    np.testing.assert_array_equal(dev.get(), x)


@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("norm", F.NORMS)
@pytest.mark.parametrize("n", [8, 5, 24, 70])
def test_layer_backward_matches_finite_differences(rt, inverse, norm, n):
    """G_x of L = Re sum(conj(r) y) is the adjoint transform of G_y = r."""
    rng = np.random.default_rng(n)
    x = cdata(rng, (2, n)).astype(np.complex128)
    r = cdata(rng, (2, n))
    layer = F.FFT(inverse=inverse, norm=norm, runtime=rt)
    layer.forward(x.astype(np.complex64))
    got = layer.backward(r).get()
    op = np.fft.ifft if inverse else np.fft.fft

    def loss():
        return float(np.real(np.sum(np.conj(r) * op(x, norm=norm))))

    np.testing.assert_allclose(got, complex_numeric_grad(loss, x), rtol=0, atol=1e-4)
    if not inverse:
        assert_close(got, ref.fft_adjoint(r.astype(np.complex128), norm))


def test_layer_config_and_errors(rt):
    layer = F.FFT(inverse=True, norm="ortho", runtime=rt)
    assert F.FFT(**layer.config(), runtime=rt).config() == {"inverse": True, "norm": "ortho"}
    with pytest.raises(RuntimeError, match="before forward"):
        layer.backward(np.zeros((1, 4), np.complex64))
    layer.forward(np.zeros((2, 4), np.complex64))
    with pytest.raises(ValueError, match=r"expected shape \(2, 4\), got \(2, 5\)"):
        layer.backward(np.zeros((2, 5), np.complex64))
    assert F.dual_norm("backward") == "forward" and F.dual_norm("ortho") == "ortho"


@pytest.mark.parametrize("n", [2, 8, 64, 3, 15, 24, 96, 100, 131])
def test_reference_algorithms_match_numpy(rng, n):
    x = cdata(rng, (3, n)).astype(np.complex128)
    np.testing.assert_allclose(ref.dft(x), np.fft.fft(x), atol=1e-9)
    np.testing.assert_allclose(ref.dft(x, inverse=True), n * np.fft.ifft(x), atol=1e-9)
    np.testing.assert_allclose(ref.bluestein(x), np.fft.fft(x), atol=1e-9)
    np.testing.assert_allclose(ref.bluestein(x, inverse=True), n * np.fft.ifft(x), atol=1e-9)
    if n & (n - 1) == 0:
        log = n.bit_length() - 1
        assert ref.radices(n) == [2] * (log % 2) + [4] * (log // 2)
        np.testing.assert_allclose(ref.fft_pow2(x), np.fft.fft(x), atol=1e-9)
        np.testing.assert_allclose(ref.fft_pow2(x, True), n * np.fft.ifft(x), atol=1e-9)
        radix2 = ref.fft_stages(x, radix_list=[2] * log)
        assert len(radix2) == log + 1
        np.testing.assert_allclose(radix2[-1], np.fft.fft(x), atol=1e-9)
    if ref.is_smooth(n):
        np.testing.assert_allclose(ref.fft_mixed(x), np.fft.fft(x), atol=1e-9)
        np.testing.assert_allclose(ref.fft_mixed(x, True), n * np.fft.ifft(x), atol=1e-9)
        np.testing.assert_allclose(ref.fft_stages(x, radix_list=ref.radices(n)[::-1])[-1],
                                   np.fft.fft(x), atol=1e-9)  # any order of the stages


def test_mixed_radices():
    assert ref.radices(96) == [2, 4, 4, 3] and ref.radices(1000) == [2, 4, 5, 5, 5]
    assert ref.radices(15) == [3, 5] and ref.radices(24) == [2, 4, 3]
    assert [n for n in range(1, 31) if ref.is_smooth(n)] == [
        2, 3, 4, 5, 6, 8, 9, 10, 12, 15, 16, 18, 20, 24, 25, 27, 30]
    with pytest.raises(ValueError, match="prime factors are 2, 3 and 5"):
        ref.radices(14)


def test_reference_stockham_refuses_other_lengths():
    with pytest.raises(ValueError, match="power-of-two length"):
        ref.fft_pow2(np.ones(6))
    with pytest.raises(ValueError, match="do not multiply to n = 8"):
        ref.fft_stages(np.ones(8), radix_list=[2, 2])


def test_real_complex_helpers_and_their_adjoints(rt, rng):
    big = rt.max_work_group_size + 5
    x = rng.standard_normal((3, big)).astype(np.float32)
    z = cdata(rng, (3, big))
    np.testing.assert_array_equal(F.to_complex(x, rt).get(), x.astype(np.complex64))
    np.testing.assert_array_equal(F.real_part(z, rt).get(), z.real)
    blocks = F.re_im(z, rt).get()
    np.testing.assert_array_equal(blocks, np.concatenate([z.real, z.imag], axis=-1))
    np.testing.assert_array_equal(F.from_re_im(blocks, rt).get(), z)
    # <A x, y>_R == <x, A^T y>_R: real_part is the adjoint of to_complex, from_re_im of re_im
    inner = lambda a, b: np.sum(np.real(np.conj(a.astype(complex)) * b))  # noqa: E731 (float64)
    np.testing.assert_allclose(inner(F.to_complex(x, rt).get(), z),
                               inner(x, F.real_part(z, rt).get()), rtol=1e-5)
    r = rng.standard_normal((3, 2 * big)).astype(np.float32)
    np.testing.assert_allclose(inner(F.re_im(z, rt).get(), r),
                               inner(z, F.from_re_im(r, rt).get()), rtol=1e-5)


def test_bad_input_gets_clear_errors(rt):
    with pytest.raises(ValueError, match="unknown norm 'unitary'"):
        F.fft(np.ones(4), "unitary", rt)
    with pytest.raises(ValueError, match="last axis of length >= 1"):
        F.fft(np.ones((3, 0)), runtime=rt)
    with pytest.raises(ValueError, match="at least one axis"):
        F.ifft(np.complex64(1), runtime=rt)
    with pytest.raises(ValueError, match="NaN or infinity"):
        F.fft(np.array([1.0, np.nan]), runtime=rt)
    with pytest.raises(TypeError, match="device array has dtype float32, need"):
        F.fft(rt.zeros(4), runtime=rt)
    with pytest.raises(ValueError, match="even length"):
        F.from_re_im(np.ones((2, 5)), rt)
    with pytest.raises(TypeError, match="need"):
        F.to_complex(np.ones(3, np.complex64), rt)
    assert nnlib.fft is F


@pytest.mark.parametrize("vr", F.ROW_WIDTHS)
def test_fft_rows_matches_numpy_on_any_device(rt, rng, vr):
    """fft_rows, a CPU's one-launch transform (a work-item transforms VR rows at once), run on
    whatever device runs the tests, a GPU too (whose tuner never picks it): every length that
    fits the device's local memory, one row per group and rows spread over the compute
    units, on batch 1, a batch that is no multiple of VR and (length 24) more blocks of VR
    rows than the device's largest work-group has work-items."""
    lengths = [n for n in (15, 24, 96, 1000) if 2 * 8 * n * vr <= rt.local_mem_size]
    assert 96 in lengths
    for n in lengths:
        for groups in (0, 4):
            plan = F._Plan(rt, n, local_params={"VR": vr, "LOCAL": 1, "GROUPS_PER_CU": groups})
            assert plan.kind == "local" and plan.local.name == "fft_rows"
            for rows in (1, 37) + ((vr * rt.max_work_group_size + 3,) if n == 24 else ()):
                x = cdata(rng, (rows, n))
                assert_close(plan.run(rt.to_device(x, dtype=np.complex64), False, 1.0).get(),
                             np.fft.fft(x), 2e-5)


@pytest.mark.parametrize("profile", ["device", "gpu"])
@pytest.mark.parametrize("n", [15, 24, 96, 1000])
def test_every_local_candidate_matches_numpy(rt, rng, profile, n):
    """Whatever the tuner picks for the one-launch transform (fft_rows' rows per work-item,
    fft_local's work-group shape) is correct: every candidate, on this device's own limits
    and under the GPU profile, on batch 1 and an odd batch."""
    own = nnlib.runtime.Runtime(rt.device, profile=profile)
    default, candidates = F.local_candidates(own, own.launcher("fft", "fft_local"), n)
    assert default in candidates
    for params in candidates:
        plan = F._Plan(own, n, local_params=params)
        assert plan.kind == "local"
        for rows in (1, 37):
            x = cdata(rng, (rows, n))
            assert_close(plan.run(own.to_device(x, dtype=np.complex64), False, 1.0).get(),
                         np.fft.fft(x), 2e-5)
