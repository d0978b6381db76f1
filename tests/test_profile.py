"""The device limits view and NNLIB_PROFILE=gpu: a CPU device that reports a typical GPU's
limits, so the code paths a GPU takes run (and are checked against numpy) without a GPU."""

from types import SimpleNamespace

import numpy as np
import pytest

import nnlib
from nnlib import reference as ref
from nnlib import fft, optim
from nnlib.layers import conv, dense_params
from nnlib.opencl_devices import inlines_vector_loads
from nnlib.runtime import GPU_PROFILE, Limits, Runtime, profile_from_env
from nnlib.sizes import vector_width


@pytest.fixture(scope="module")
def gpu(rt):
    return Runtime(rt.device, profile="gpu")


def test_a_cpu_that_vectorises_across_work_items_gets_its_own_vectors_and_fma():
    """A CPU whose compiler prefers float width 1 (Intel's CPU runtime) builds the
    element-wise and fused kernels with its widest native vectors and the dense gradients
    with fma(); a CPU that prefers vectors, and a GPU, keep their preferred width and a * b + c.
    """
    common = {"widest_vector": 16, "max_work_group_size": 8192, "work_group_multiple": 128,
              "local_mem_size": 256 * 1024, "max_work_item_sizes": (8192, 8192, 8192),
              "compute_units": 2}
    for kind, width, own, fma in [("CPU", 1, 16, 1), ("CPU", 8, 8, 0), ("GPU", 1, 1, 0)]:
        limits = Limits(kind=kind, vector_width=width, **common)
        assert limits.vectorises_across_work_items == (own != width)
        assert limits.explicit_vector_width == own
        fake = SimpleNamespace(limits=limits, vector_width=width, is_gpu=kind == "GPU",
                               work_group_multiple=limits.work_group_multiple)
        assert optim.default_params(fake)["VW"] == own
        for product in dense_params.PRODUCTS:
            assert dense_params.default_params(fake, product)["FMA"] == fma
            assert {c["FMA"] for c in dense_params.candidates(fake, product, "b64")} == {0, 1}


def test_a_compiler_that_leaves_vector_loads_as_calls_gets_loads_by_hand():
    """Where vloadN is not inlined (PoCL 3.0), the dense and optimizer kernels load one float
    at a time by default (VLOAD 0) and the finiteness check ORs comparisons rather than call
    max() (CHECK_MAX 0); elsewhere they use vloadN and max(). Which compiler is which comes
    from the platform's version."""
    common = {"kind": "CPU", "vector_width": 8, "widest_vector": 16,
              "max_work_group_size": 4096, "work_group_multiple": 8,
              "local_mem_size": 1 << 20, "max_work_item_sizes": (4096,) * 3,
              "compute_units": 2}
    for inlines in (True, False):
        limits = Limits(**common, inlines_vector_loads=inlines)
        fake = SimpleNamespace(limits=limits, vector_width=8, is_gpu=False,
                               work_group_multiple=8)
        assert optim.default_params(fake)["VLOAD"] == optim.default_params(fake)[
            "CHECK_MAX"] == inlines
        for product in ("forward", "weight"):
            assert dense_params.default_params(fake, product, lanes=False)["VLOAD"] == inlines
    platform = SimpleNamespace(version="OpenCL 3.0 PoCL 3.0-rc2  Linux, Release, RELOC")
    assert not inlines_vector_loads(SimpleNamespace(platform=platform))
    for version in ("OpenCL 3.0 PoCL 3.1+debian  Linux", "OpenCL 3.1 LINUX",
                    "OpenCL 3.0 CUDA 12.4.131"):
        assert inlines_vector_loads(SimpleNamespace(platform=SimpleNamespace(version=version)))


def test_unknown_profile_is_a_clear_error(monkeypatch, rt):
    monkeypatch.setenv("NNLIB_PROFILE", "tpu")
    with pytest.raises(ValueError, match="unknown nnlib profile 'tpu'.*'device', 'gpu'"):
        Runtime(rt.device)


def test_profile_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("NNLIB_PROFILE", raising=False)
    assert profile_from_env() == "device"
    monkeypatch.setenv("NNLIB_PROFILE", " GPU ")
    assert profile_from_env() == "gpu"
    assert profile_from_env("device") == "device"  # an argument wins


def test_device_profile_reports_the_device(rt):
    own = Runtime(rt.device, profile="device")
    assert own.profile == "device"
    assert own.max_work_group_size == rt.device.max_work_group_size
    assert own.local_mem_size == rt.device.local_mem_size
    assert own.vector_width in (1, 2, 4, 8, 16) and own.work_group_multiple >= 1


def test_gpu_profile_reports_a_typical_gpu(gpu, rt):
    assert gpu.profile == "gpu" and gpu.is_gpu and "GPU profile" in repr(gpu)
    assert gpu.vector_width == 1 and gpu.work_group_multiple == GPU_PROFILE["work_group_multiple"]
    assert gpu.max_work_group_size == min(1024, rt.device.max_work_group_size)
    assert gpu.local_mem_size == min(48 * 1024, rt.device.local_mem_size)
    assert gpu.launcher("vector", "vector_add").work_group_size <= gpu.max_work_group_size


def test_one_vector_width_rule(gpu):
    """Every kernel's default width is the device's preferred one moved to the nearest width
    the kernel supports: a GPU's 1 becomes the register tiles' 4 and fft's 2 rows."""
    assert [vector_width(p, (4, 8, 16)) for p in (1, 2, 4, 8, 16)] == [4, 4, 4, 8, 16]
    assert [vector_width(p, (2, 4, 8)) for p in (1, 2, 8, 16)] == [2, 2, 8, 8]
    assert [vector_width(p) for p in (1, 2, 4, 8, 16)] == [1, 2, 4, 8, 16]
    assert dense_params.default_params(gpu, "input", lanes=False)["VW"] == 4
    blocked = [c for c in conv.tile_candidates(gpu) if "CV" in c]
    assert blocked[0]["CV"] == 4 and conv.tile_candidates(gpu)[0] == conv.lanes_tiles(gpu)[0]
    assert optim.default_params(gpu)["VW"] == 1
    assert vector_width(gpu.vector_width, fft.ROW_WIDTHS) == 2


def test_gpu_profile_dense_path_matches_numpy(gpu, rng):
    """The GPU path: the forward's 4-wide vectors, the gradients' lanes design, work-groups
    of 64, a layer wider than 1024."""
    n_in = gpu.max_work_group_size + 5
    layer = nnlib.Dense(n_in, 7, "tanh", seed=1, runtime=gpu)
    for product in ("forward", "input", "weight"):
        params = layer.kernels.params(product, 3)
        assert params.get("VW", 4) == 4 and params["LOCAL"] == 64
        assert params.get("TN_LANES", 0) == (product != "forward")
    x = rng.standard_normal((3, n_in)).astype(np.float32)
    dy = rng.standard_normal((3, 7)).astype(np.float32)
    y = layer.forward(x).get()
    dx = layer.backward(dy).get()
    w, b = layer.weight.numpy(), layer.bias.numpy()
    np.testing.assert_allclose(y, ref.dense_forward(x, w, b, "tanh"), atol=1e-5)
    dx_ref, dw_ref, db_ref = ref.dense_backward(x, w, y, dy, "tanh")
    np.testing.assert_allclose(dx, dx_ref, atol=1e-4)
    np.testing.assert_allclose(layer.weight.grad.get(), dw_ref, atol=1e-4)
    np.testing.assert_allclose(layer.bias.grad.get(), db_ref, atol=1e-4)


def test_gpu_profile_optimizers_match_numpy(gpu, rng):
    """Scalar update kernels (VW 1) and Adam-mini's reduction in groups of 64."""
    shape = (2, gpu.max_work_group_size + 3)
    p = nnlib.Parameter(rng.standard_normal(shape), "weight", block_size=shape[1], runtime=gpu)
    opt = nnlib.optim.AdamMini([p], lr=0.01)
    assert opt._vw == 1 and opt.group_size == 2 * GPU_PROFILE["work_group_multiple"]
    w, m, vb = p.numpy().astype(np.float64), np.zeros(shape), np.zeros(2)
    for t in range(1, 4):
        g = rng.standard_normal(shape).astype(np.float32)
        p.grad.set(g)
        opt.step()
        w, m, vb = ref.adam_mini_step(w, g.astype(np.float64), m, vb, t, shape[1], 0.01)
    np.testing.assert_allclose(p.numpy(), w, atol=1e-5)
