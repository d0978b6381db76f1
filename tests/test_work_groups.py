"""One work-group rule (nnlib/launcher.py): every launch keeps within the runtime's Limits and
the kernel's own CL_KERNEL_WORK_GROUP_SIZE; a launch without a local size gets the rule's;
NNLIB_MAX_WORK_GROUP caps them all, as a device that allows no more than 64 work-items would,
and every kernel family still matches its numpy reference under that cap."""

import json
import math
import re
import subprocess
import sys

import numpy as np
import pyopencl.array as cla
import pytest

from nnlib import reference as ref
from nnlib.codes import ACTIVATIONS
from nnlib.launcher import GROUPS_PER_UNIT, WorkGroupError, choose_local
from nnlib.runtime import Runtime
from nnlib.signatures import parse
from nnlib.sources import kernel_dir, program_source

from . import work_group_cap
from .isolated import ROOT, child_env

CAP = 64


@pytest.fixture(scope="module")
def capped(rt):
    return Runtime(rt.device, max_work_group=CAP)


@pytest.mark.parametrize("limit, sizes, multiple, units", [
    (64, (64, 64, 64), 8, 2), (1024, (1024, 1024, 64), 32, 132), (4096, (4096,) * 3, 8, 2),
    (1, (1, 1, 1), 32, 4), (48, (48, 48, 48), 32, 1), (256, (256, 256, 16), 64, 8)])
def test_chosen_local_sizes_keep_within_the_limits(limit, sizes, multiple, units):
    for global_size in [(1,), (37,), (4099,), (10**6,), (3, 1000), (1000, 3), (5, 2, 96),
                        (4097, 3, 70), (1, 1, 5000)]:
        local = choose_local(global_size, limit, sizes, multiple, units)
        assert len(local) == len(global_size) and min(local) >= 1
        assert math.prod(local) <= limit
        assert all(n <= most for n, most in zip(local, sizes))
        # no dimension padded past the next power of two (times the multiple in dimension 0)
        assert local[0] < 2 * max(global_size[0], multiple)
        assert all(n < 2 * items for n, items in zip(local[1:], global_size[1:]))


def test_chosen_local_size_spreads_the_work_over_the_compute_units():
    """A large 1-D launch gets groups of a power-of-two multiple of the preferred multiple:
    GROUPS_PER_UNIT per compute unit, unless the limit makes them smaller (and more)."""
    assert choose_local((4096,), 4096, (4096,) * 3, 8, 2) == (4096 // (GROUPS_PER_UNIT * 2),)
    assert choose_local((10**6,), 1024, (1024, 1024, 64), 32, 132) == (1024,)
    assert choose_local((10**6,), 64, (64,) * 3, 8, 2) == (64,)
    assert choose_local((100,), 1024, (1024,) * 3, 32, 1) == (32,)
    assert choose_local((3, 1000), 4096, (4096,) * 3, 8, 1) == (8, 128)
    assert choose_local((5, 2, 96), 64, (64,) * 3, 8, 2) == (8, 2, 4)


def test_the_cap_is_read_into_limits(monkeypatch, rt):
    monkeypatch.setenv("NNLIB_MAX_WORK_GROUP", str(CAP))
    for profile in ("device", "gpu"):
        capped = Runtime(rt.device, profile=profile)
        assert capped.max_work_group_size == min(CAP, rt.device.max_work_group_size)
        assert max(capped.limits.max_work_item_sizes) <= CAP
        assert capped.work_group_multiple <= CAP
        assert f"work-groups <= {CAP}" in repr(capped)
    for bad in ("sixty", "0", "-3"):
        monkeypatch.setenv("NNLIB_MAX_WORK_GROUP", bad)
        with pytest.raises(ValueError, match=r"NNLIB_MAX_WORK_GROUP\) must be a whole number"):
            Runtime(rt.device)


def test_a_local_size_above_the_limit_names_the_kernel_and_the_limit(capped, rt):
    add = capped.launcher("vector", "vector_add")
    buf = capped.zeros((2 * CAP,))
    args = (buf.data, buf.data, buf.data, np.int32(2 * CAP))
    with pytest.raises(WorkGroupError, match=rf"kernel vector_add \(kernels/vector.cl\): a "
                       rf"work-group of \({2 * CAP},\) is {2 * CAP} work-items; at most "
                       rf"{CAP} are allowed \(Limits.max_work_group_size {CAP}"):
        add((2 * CAP,), (2 * CAP,), *args)
    with pytest.raises(WorkGroupError, match=r"vector_add .*must be 1 whole numbers >= 1"):
        add((2 * CAP,), (8, 8), *args)
    with pytest.raises(WorkGroupError, match=r"must be 1 whole numbers >= 1"):
        add((2 * CAP,), (0,), *args)
    add((2 * CAP,), (CAP,), *args).wait()  # the limit itself is allowed
    # the GPU profile allows 64 work-items along dimension 2, fewer than in all
    gpu = Runtime(rt.device, profile="gpu")
    swap = gpu.launcher("catch", "swap_axes12")
    x = gpu.zeros((128, 1, 1, 1))
    most = gpu.limits.max_work_item_sizes[2]
    if most < swap.work_group_size:
        with pytest.raises(WorkGroupError, match=rf"swap_axes12 .* along dimension 2; at "
                           rf"most {most} are allowed there"):
            swap((1, 1, 128), (1, 1, 2 * most), x.data, x.data, *map(np.int32, (128, 1, 1, 1)))


def test_launches_without_a_local_size_stay_within_the_cap(capped, rng):
    """The rule pads the global size up to whole work-groups; the kernel skips the rest."""
    n = 1000
    add = capped.launcher("vector", "vector_add")
    assert math.prod(add.local_size((n,))) <= CAP
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = capped.empty((n,))
    add((n,), None, capped.to_device(a).data, capped.to_device(b).data, out.data,
        np.int32(n))
    np.testing.assert_array_equal(out.get(), a + b)
    local = capped.launcher("catch", "swap_axes12").local_size((37, 5, 3))
    assert math.prod(local) <= CAP


def test_the_register_blocked_exercise_kernel_under_the_cap(capped, rng):
    """kernels/blocked.cl (notebook 03's exercise, not used by nnlib's layers): awkward
    sizes, each dimension padded past the data."""
    blocked = capped.launcher("blocked", "dense_forward_blocked")
    for batch, n_in, n_out in ((1, 13, 7), (19, 38, 4 * CAP + 2), (4 * CAP + 1, 5, 3)):
        x = rng.standard_normal((batch, n_in)).astype(np.float32)
        w = rng.standard_normal((n_out, n_in)).astype(np.float32)
        b = rng.standard_normal(n_out).astype(np.float32)
        y = capped.empty((batch, n_out))
        blocked((-(-n_out // 4), -(-batch // 4)), None, capped.to_device(x).data,
                capped.to_device(w).data, capped.to_device(b).data, y.data, np.int32(batch),
                np.int32(n_in), np.int32(n_out), np.int32(ACTIVATIONS["tanh"]))
        np.testing.assert_allclose(y.get(), ref.dense_forward(x, w, b, "tanh"), atol=1e-5)


@pytest.mark.parametrize("dtype, value", [(np.float32, 1.5), (np.int32, 7),
                                          (np.complex64, 2 - 1j)])
def test_fill_runs_no_kernel(monkeypatch, rt, dtype, value):
    """rt.fill is the queue's fill command, not pyopencl's fill kernel (which picks its own
    work-group); a slice is filled and nothing around it."""
    def no_kernel(*args, **kwargs):
        raise AssertionError("pyopencl launched a kernel of its own")
    monkeypatch.setattr(cla, "ARRAY_KERNEL_EXEC_HOOK", no_kernel)
    a = rt.to_device(np.zeros(11, dtype), dtype=dtype)
    rt.fill(a[3:8], value)
    want = np.zeros(11, dtype)
    want[3:8] = value
    np.testing.assert_array_equal(a.get(), want)
    rt.fill(a[:0], value)  # nothing to fill
    with pytest.raises(ValueError, match="C-contiguous"):
        rt.fill(rt.to_device(np.zeros((4, 4), dtype), dtype=dtype)[:, 1], value)


def _kernel_tests() -> list:
    """The kernel tests the Makefile runs on every device (KERNEL_TESTS), CATCH's kernel
    tests and the launcher's."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    files = re.search(r"^KERNEL_TESTS := (.*)$", text, re.MULTILINE).group(1).split()
    return files + [f"tests/test_catch.py::test_{name}" for name in (
        "revin_and_denorm_match_reference", "patches_swap_and_join_match_numpy",
        "mask_generator_matches_reference_and_finite_differences",
        "layer_norm_and_gelu_match_reference_and_finite_differences",
        "layer_norm_parameter_gradients_summed_in_slices_of_the_rows",
        "mask_weight_gradient_summed_in_slices_of_the_pairs",
        "freq_mae_matches_reference_and_finite_differences", "step_scores_on_hand_made_cases")
    ] + ["tests/test_catch_masks.py::test_patch_amplitude_matches_reference",
         "tests/test_launcher.py"]


# Kernels the run does not launch: the vector-width probe (built, never launched), notebook
# 03's exercise kernel (launched above), the complex convolution's weight gradient one
# work-item per weight (complex layers use the blocked kernel).
NOT_LAUNCHED = {"double_floatv", "dense_forward_blocked", "cconv1d_backward_weight"}


def _kernel_names() -> set:
    """Every kernel that kernels/ defines."""
    return {name for path in kernel_dir().glob("*.cl")
            for name in parse(program_source(path.stem), path.name)}


def test_every_kernel_family_under_a_cap_of_64_work_items(tmp_path):
    """The kernel tests of every family pass with NNLIB_MAX_WORK_GROUP=64, every kernel of
    kernels/ runs in them (but NOT_LAUNCHED), and no launch ran a work-group above 64, left
    one to the driver, or went through pyopencl's own kernels."""
    log = tmp_path / "launches.json"
    env = child_env(NNLIB_MAX_WORK_GROUP=str(CAP), **{work_group_cap.LOG: str(log)})
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:xdist", "-p",
                          "no:cacheprovider", "-p", "tests.work_group_cap", *_kernel_tests()],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=880,
                         check=False)
    output = f"--- stdout\n{run.stdout[-4000:]}\n--- stderr\n{run.stderr[-2000:]}"
    assert log.exists(), output
    found = json.loads(log.read_text())
    assert found["exitstatus"] == 0, output
    launches = found["launches"]
    too_large = {k: v["largest"] for k, v in launches.items() if v["largest"] > CAP}
    assert not too_large, f"work-groups above {CAP}: {too_large}"
    assert not [k for k, v in launches.items() if v["driver"]], "left to the driver"
    assert found["helpers"] == [], f"pyopencl's own kernels ran: {found['helpers'][:5]}"
    kernels = _kernel_names()
    assert NOT_LAUNCHED <= kernels
    assert not set(launches) - kernels, "kernels from outside kernels/"
    missing = kernels - NOT_LAUNCHED - set(launches)
    assert not missing, f"kernels that did not run: {missing}"
