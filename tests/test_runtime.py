"""Device choice, program building and the errors a reader meets first."""

import json
import os
import re

import numpy as np
import pyopencl as cl
import pytest

import nnlib
from nnlib import runtime, sources, tuning
from nnlib.runtime import kernel_dir


def test_devices_lists_limits():
    found = nnlib.devices()
    assert found
    for d in found:
        assert d["max_work_group_size"] >= 1 and d["compute_units"] >= 1
        assert {"platform", "device", "type", "local_mem_kib", "global_mem_mib"} <= set(d)


def test_default_device_is_never_the_simulator(monkeypatch):
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    device = runtime.find_device()
    assert not runtime.is_simulator(device)
    assert runtime.can_compile(device)


def test_device_by_argument_and_by_pyopencl_ctx(monkeypatch, rt):
    name = rt.device.name.strip()
    assert runtime.find_device(rt.device) is rt.device
    # the first device whose name holds the part (Intel's runtime calls this CPU "AMD EPYC",
    # PoCL "pthread-AMD EPYC")
    assert name[:8] in runtime.find_device(name[:8]).name
    platforms = runtime.platforms()
    index = next(i for i, p in enumerate(platforms) if p == rt.device.platform)
    device_index = platforms[index].get_devices().index(rt.device)
    monkeypatch.setenv("PYOPENCL_CTX", f"{index}:{device_index}")
    assert runtime.find_device() == rt.device


def test_unknown_device_names_the_available_ones():
    with pytest.raises(nnlib.DeviceNotFoundError, match="no OpenCL device matches 'nope'.*available"):
        nnlib.use_device("nope")


def test_missing_platform_says_how_to_install_pocl(monkeypatch):
    monkeypatch.setattr(cl, "get_platforms", lambda: [])
    with pytest.raises(nnlib.NoPlatformError, match=r'pip install "pyopencl\[pocl\]"'):
        runtime.find_device()


def test_build_error_carries_file_line_and_log(monkeypatch, tmp_path, rt):
    (tmp_path / "broken.cl").write_text("// a comment\nkernel void f(global float *a) { a[0] = ; }\n")
    monkeypatch.setattr(sources, "kernel_dir", lambda: tmp_path)
    with pytest.raises(nnlib.KernelBuildError, match=r"(?s)kernels/broken.cl failed.*broken.cl:2"):
        runtime.Runtime(rt.device).program("broken")


def test_a_log_that_counts_lines_of_the_whole_text_names_file_and_line(monkeypatch, tmp_path):
    # NVIDIA's compiler ignores #line: it numbers the lines of the text it was given
    (tmp_path / "base.cl").write_text("// one\n// two\n")
    (tmp_path / "part.h").write_text("#define TWICE(x) (2 * (x))\n")
    (tmp_path / "broken.cl").write_text('// requires: base.cl\n#include "part.h"\n'
                                        "kernel void f(global float *a) { a[0] = ; }\n")
    monkeypatch.setattr(sources, "kernel_dir", lambda: tmp_path)
    text = runtime.program_source("broken").split("\n")
    bad = next(i for i, line in enumerate(text, 1) if "a[0] = ;" in line)
    define = next(i for i, line in enumerate(text, 1) if "TWICE" in line)
    log = f"<kernel>:{bad}:41: error: expected expression\n<kernel>:{define}:9: note: here"
    assert sources.name_lines(log, "\n".join(text)) == (
        "kernels/broken.cl:3:41: error: expected expression\nkernels/part.h:1:9: note: here")

    def nvidia_build(self, options=None, devices=None):
        raise cl.RuntimeError(log)
    monkeypatch.setattr(cl.Program, "build", nvidia_build)
    with pytest.raises(nnlib.KernelBuildError, match="kernels/broken.cl:3:41: error"):
        runtime.Runtime(nnlib.get_runtime().device).program("broken")


def test_a_program_without_its_kernels_is_a_build_error(monkeypatch, tmp_path, rt):
    # what PoCL 3.0 returns from its cache for code it miscompiled: a program with no kernels
    (tmp_path / "hidden.cl").write_text("#if 0\nkernel void f(global float *a) { }\n#endif\n")
    monkeypatch.setattr(sources, "kernel_dir", lambda: tmp_path)
    with pytest.raises(nnlib.KernelBuildError, match="hidden.cl built into a program with no"):
        runtime.Runtime(rt.device).program("hidden")


def test_widest_vector_builds_and_bounds_the_default_widths(rt):
    from nnlib.opencl_devices import _probe

    widest = rt.limits.widest_vector
    assert widest in (1, 2, 4, 8, 16) and rt.vector_width <= widest
    assert widest == 1 or _probe(rt.device, widest)
    assert widest == 16 or not _probe(rt.device, 2 * widest)


def test_vector_lanes_are_read_from_the_build_log_of_a_device_that_vectorises_work_items(
        rt, tuning_cache):
    """Intel's CPU runtime says how many work-items one vector instruction runs (16 with
    AVX-512, 8 with AVX2); every other device (PoCL's own vectors, GPUs, Oclgrind) says none.
    Found once, it is stored: the next process reads it back without building."""
    from nnlib.opencl_devices import VECTORISED, _device_id, vector_lanes

    lanes = vector_lanes(rt.device)
    if "Intel" in rt.device.platform.name and rt.device.type & cl.device_type.CPU:
        assert lanes in (4, 8, 16)
    else:
        assert lanes == 0
    assert rt.limits.few_vector_registers == (0 < rt.limits.vector_lanes <= 8
                                              and rt.limits.vectorises_across_work_items)
    if lanes:
        assert json.loads((tuning_cache / "vector_lanes.json").read_text()) == {
            _device_id(rt.device): lanes}
    assert VECTORISED.search('Kernel "k" was successfully vectorized (8)\nDone.').group(1) == "8"


def test_a_compile_target_is_part_of_the_device_id(rt, monkeypatch):
    """Intel's runtime told to compile AVX2 code (nnlib.bench.emulate) is another device for
    the stored vector widths and lanes, and for the tuning results."""
    from nnlib.opencl_devices import _device_id

    plain, key = _device_id(rt.device), tuning.device_key(rt)
    monkeypatch.setenv("CL_CONFIG_CPU_TARGET_ARCH", "core-avx2")
    assert _device_id(rt.device) == plain + " | target core-avx2"
    assert tuning.device_key(rt) == dict(key, target="core-avx2")


def test_a_runtimes_own_profile_keeps_its_tuning_results_apart(rt):
    """A runtime made with profile="gpu" (notebook 03 makes one beside the default) is tuned
    among the GPU profile's candidates: its results go to the file NNLIB_PROFILE=gpu uses, not
    to the device's own, whatever the environment says (sharing one, each runtime found the
    other's parameters outside its candidates and searched again)."""
    own = runtime.Runtime(rt.device, profile="device")
    gpu = runtime.Runtime(rt.device, profile="gpu")
    assert tuning.device_key(own)["profile"] == "" and tuning.device_key(gpu)["profile"] == "gpu"
    assert tuning.cache_file(own) != tuning.cache_file(gpu)


def test_a_program_built_for_another_target_is_not_taken_from_the_binary_cache(tmp_path):
    """Under CL_CONFIG_CPU_TARGET_ARCH every build carries the target as a define, so that
    pyopencl's binary cache, whose key holds the source and the options only, does not hand
    Intel's runtime a binary made for another ISA (it fails to load, and pyopencl 2026.1's
    fallback then raises KeyError). Intel's runtime reads the variable when a process starts,
    so each build runs in a process of its own."""
    import subprocess
    import sys

    from nnlib.bench.emulate import is_intel_cpu
    from nnlib.doctor import real_devices

    assert tuning.target_options(None) == ()
    assert tuning.target_options("core-avx2") == ("-DNNLIB_CPU_TARGET_core_avx2",)
    intel = [spec for spec, d in real_devices() if is_intel_cpu(d)]
    if not intel:
        pytest.skip("needs Intel's CPU runtime for OpenCL (make doctor INTEL=1)")
    build = ("import sys; from nnlib.runtime import Runtime, find_device; "
             "from nnlib.opencl_devices import kernel_names; "
             "print(kernel_names(Runtime(find_device(sys.argv[1])).program('vector')))")
    env = {k: v for k, v in os.environ.items() if k != "CL_CONFIG_CPU_TARGET_ARCH"}
    env.update(NNLIB_TUNING_DIR=str(tmp_path))
    for target in ({}, {"CL_CONFIG_CPU_TARGET_ARCH": "core-avx2"}):  # native first, cached
        child = subprocess.run([sys.executable, "-c", build, intel[0]], env={**env, **target},
                               capture_output=True, text=True, timeout=300, check=False)
        assert child.returncode == 0, child.stderr[-2000:]
        assert "vector_add" in child.stdout


def test_requires_joins_sources_in_order(monkeypatch, tmp_path):
    (tmp_path / "base.cl").write_text("inline float twice(float x) { return 2 * x; }\n")
    (tmp_path / "top.cl").write_text("// requires: base.cl\nkernel void k() {}\n")
    monkeypatch.setattr(sources, "kernel_dir", lambda: tmp_path)
    src = runtime.program_source("top")
    assert src.index('#line 1 "kernels/base.cl"') < src.index('#line 1 "kernels/top.cl"')


def test_unknown_kernel_file_lists_topics():
    with pytest.raises(FileNotFoundError, match="known topics.*dense"):
        nnlib.source("nope")


def test_launchers_are_built_and_fetched_once(rt):
    assert rt.launcher("vector", "vector_add") is rt.launcher("vector", "vector_add")
    assert rt.program("vector") is rt.program("vector")


def test_vector_add_and_profiling(rt, rng):
    timed = runtime.Runtime(rt.device, rt.profile, rt.cap, profiling=True)
    n = timed.max_work_group_size + 3
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    a_dev, b_dev, out = timed.to_device(a), timed.to_device(b), timed.empty((n,))
    knl = timed.launcher("vector", "vector_add")
    local = (min(64, knl.work_group_size),)
    event = knl((n,), local, a_dev.data, b_dev.data, out.data, np.int32(n))
    assert runtime.event_ms(event) > 0
    np.testing.assert_array_equal(out.get(), nnlib.reference.vector_add(a, b))
    assert runtime.time_kernel(lambda: knl((n,), None, a_dev.data, b_dev.data,
                                           out.data, np.int32(n)), repeat=3) > 0


def test_kernel_times_only_from_a_runtime_made_with_profiling(monkeypatch, rt):
    """The queue records kernel times only when asked (NVIDIA's driver charges for it at
    every launch); reading them from any other queue is an error that says how to ask."""
    monkeypatch.delenv("NNLIB_PROFILING", raising=False)
    assert runtime.environment.profiling_from_env() is False
    monkeypatch.setenv("NNLIB_PROFILING", "1")
    assert runtime.environment.profiling_from_env() is True
    plain = runtime.Runtime(rt.device, rt.profile, rt.cap, profiling=False)
    assert not plain.queue.properties & cl.command_queue_properties.PROFILING_ENABLE
    a = plain.zeros((5,))
    event = plain.launcher("vector", "vector_add")((5,), None, a.data, a.data, a.data,
                                                   np.int32(5))
    with pytest.raises(RuntimeError, match=r"profiling=True"):
        runtime.event_ms(event)
    with pytest.raises(TypeError, match="profiling must be True, False or None"):
        runtime.Runtime(rt.device, profiling=1)
    monkeypatch.setenv("NNLIB_PROFILING", "yes")
    with pytest.raises(nnlib.EnvironmentSettingError, match="NNLIB_PROFILING"):
        runtime.environment._check_nnlib()


def test_use_device_keeps_one_runtime_per_profiling_choice(rt):
    try:
        timed = nnlib.use_device(rt.device, profiling=True)
        assert timed.profiling and nnlib.get_runtime() is timed and "profiling" in repr(timed)
        assert nnlib.use_device(rt.device, profiling=True) is timed
        assert nnlib.use_device(rt.device, profiling=False) is not timed
    finally:
        nnlib.use_device(rt.device, profiling=rt.profiling)
    assert nnlib.get_runtime() is rt


def test_a_kernel_folder_overrides_and_edits_rebuild(tmp_path, rt, rng):
    """Exercise kernels: a student's folder is searched first, and an edited file is rebuilt."""
    student = tmp_path / "vector.cl"
    text = nnlib.source("vector")
    student.write_text(text.replace("a[i] + b[i]", "a[i] - b[i]"))
    a, b = rng.standard_normal(5).astype(np.float32), np.ones(5, np.float32)
    a_dev, b_dev, out = rt.to_device(a), rt.to_device(b), rt.empty((5,))

    def run():
        knl = rt.launcher("vector", "vector_add", folder=tmp_path)
        knl((5,), None, a_dev.data, b_dev.data, out.data, np.int32(5))
        return out.get()

    np.testing.assert_array_equal(run(), a - b)
    student.write_text(text)
    np.testing.assert_array_equal(run(), a + b)


def test_source_of_one_kernel_with_its_comment():
    text = nnlib.source("vector", "vector_add")
    assert text.startswith("// A first kernel") and text.rstrip().endswith("}")
    assert text.count("kernel void") == 1
    with pytest.raises(KeyError, match="no kernel 'nope'"):
        nnlib.source("vector", "nope")


def test_source_of_a_kernel_whose_if_branches_open_a_block_each(tmp_path):
    """A block opened in both branches of an #if (dense.cl's gemm_nt: a loop over k-blocks
    or one block) is counted once: the text ends at the kernel's own closing brace, in every
    kernel of kernels/."""
    (tmp_path / "k.cl").write_text(
        "// first\nkernel void first(int n)\n{\n#if B\n    for (;;) {\n#else\n    {\n"
        "#endif\n        n++;\n    }\n}\n\n// second\nkernel void second(int n)\n{\n}\n")
    assert nnlib.source("k", "first", folder=tmp_path).endswith("        n++;\n    }\n}")
    for path in kernel_dir().glob("*.cl"):
        for name in set(re.findall(r"^kernel void (\w+)\(", path.read_text(), re.MULTILINE)):
            text = nnlib.source(path.stem, name)
            assert text.count("kernel void") == 1 and text.endswith("}"), (path.name, name)


def test_to_device_copies_without_waiting_and_keeps_its_own_data(rt, rng):
    """The copy is queued behind running kernels, so it must not read the caller's array
    later: changing the array right after the call leaves the device copy as it was."""
    host = rng.standard_normal((3, 1000)).astype(np.float32)
    want = host.copy()
    rt.empty((1 << 23,)).fill(1.0)  # queued work for the copy to wait behind
    dev = rt.to_device(host)
    host[:] = 0
    np.testing.assert_array_equal(dev.get(), want)
    empty = rt.to_device(np.zeros((0, 4)))
    assert empty.shape == (0, 4)


def test_empty_matches_pyopencl_layout(rt):
    """Runtime.empty uses pyopencl's fast constructor: same shape, strides and size."""
    import pyopencl.array as cla
    for shape, dtype in (((3,), np.float32), ((2, 5), np.int32), ((0, 4), np.float32),
                         ((7, 1, 3), np.complex64), (5, np.float32)):
        a, b = rt.empty(shape, dtype), cla.empty(rt.queue, shape, dtype)
        assert (a.shape, a.strides, a.size, a.nbytes, a.dtype) == \
            (b.shape, b.strides, b.size, b.nbytes, b.dtype)
    with pytest.raises(ValueError, match="negative"):
        rt.empty((2, -1))


def test_reshape_is_a_view_like_pyopencls(rt, rng):
    """Runtime.reshape: the same buffer, offset, shape and strides as pyopencl's reshape,
    -1 included; a strided array and bad shapes go to pyopencl (its view, its errors)."""
    x = rt.to_device(rng.standard_normal((6, 10)))
    for a, shape in ((x, (3, 20)), (x, (2, -1, 5)), (x[2:], (-1,)), (x, (60, 1))):
        got, want = rt.reshape(a, *shape), a.reshape(shape)
        assert (got.shape, got.strides, got.offset, got.base_data) == \
            (want.shape, want.strides, want.offset, want.base_data)
        np.testing.assert_array_equal(got.get(), a.get().reshape(shape))
    strided, want = rt.reshape(x[:, ::2], 3, 2, 5), x[:, ::2].reshape(3, 2, 5)
    assert (strided.shape, strided.strides) == (want.shape, want.strides)
    with pytest.raises(ValueError):
        rt.reshape(x, 7, -1)


def test_source_hides_exercise_markers_and_reads_a_folder(tmp_path):
    assert "BEGIN SOLUTION" in (kernel_dir() / "vector.cl").read_text()
    shown = nnlib.source("vector")
    assert "SOLUTION" not in shown and "HINT:" not in shown and "a[i] + b[i]" in shown
    (tmp_path / "vector.cl").write_text("// a student's copy\n")
    assert nnlib.source("vector", folder=tmp_path) == "// a student's copy\n"
    assert "a[i] + b[i]" in nnlib.source("vector", folder=tmp_path / "absent")


def test_use_kernels_builds_the_layers_from_a_folder(tmp_path, rng):
    rt = nnlib.Runtime()
    text = (kernel_dir() / "dense.cl").read_text()
    (tmp_path / "dense.cl").write_text(text.replace("float sum = bias[j];", "float sum = 0.0f;"))
    x = rng.standard_normal((3, 5)).astype(np.float32)

    def forward():
        layer = nnlib.Dense(5, 4, seed=1, variant="article", runtime=rt)
        layer.bias.value.set(np.ones(4, np.float32))
        return layer.forward(rt.to_device(x)).get(), layer.weight.numpy()

    y, w = forward()
    np.testing.assert_allclose(y, x @ w.T + 1, rtol=1e-5, atol=1e-5)
    nnlib.use_kernels(tmp_path, topics=("dense",), runtime=rt)
    y, w = forward()
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-5, atol=1e-5)  # the folder's kernel: no bias
    nnlib.use_kernels(None, runtime=rt)
    np.testing.assert_allclose(forward()[0], x @ w.T + 1, rtol=1e-5, atol=1e-5)
    with pytest.raises(FileNotFoundError, match="use_kernels: no folder"):
        nnlib.use_kernels(tmp_path / "absent", runtime=rt)
