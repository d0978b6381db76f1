"""Launcher: every argument set on every launch, numbers packed by the types the kernel's
.cl signature declares; every call checked against that signature (NNLIB_CHECK_ARGS=1, set
in conftest.py)."""

import threading

import numpy as np
import pyopencl as cl
import pytest

from nnlib.launcher import KernelArgumentError, check_args


def test_launcher_follows_changed_buffers_and_sizes(rt, rng):
    add = rt.launcher("vector", "vector_add")
    a, b, c = (rng.standard_normal(37).astype(np.float32) for _ in range(3))
    da, db, dc = rt.to_device(a), rt.to_device(b), rt.to_device(c)
    out1, out2 = rt.empty((37,)), rt.empty((37,))
    add((37,), (8,), da.data, db.data, out1.data, np.int32(37))
    np.testing.assert_allclose(out1.get(), a + b)
    add((37,), (8,), da.data, dc.data, out2.data, np.int32(20))  # two buffers and n changed
    np.testing.assert_allclose(out2.get()[:20], a[:20] + c[:20])
    add((37,), None, da.data, dc.data, out2.data, np.int32(37))  # only n changed
    np.testing.assert_allclose(out2.get(), a + c)


def test_numbers_are_packed_by_the_signature_types(rt, rng):
    """The launcher declares the scalar types from the .cl file (numbers then cost pyopencl
    no failed conversions); a launcher shared by two call sites sets each call's own."""
    add = rt.launcher("vector", "vector_add")
    assert add is rt.launcher("vector", "vector_add")
    a = rt.to_device(rng.standard_normal(7).astype(np.float32))
    out1, out2 = rt.zeros((7,)), rt.zeros((7,))
    add((7,), None, a.data, a.data, out1.data, np.int32(7))
    add((7,), None, a.data, out1.data, out2.data, np.int32(3))
    np.testing.assert_allclose(out1.get(), 2 * a.get(), rtol=1e-6)
    np.testing.assert_allclose(out2.get()[:3], 3 * a.get()[:3], rtol=1e-6)
    np.testing.assert_array_equal(out2.get()[3:], 0)
    scale = rt.launcher("vector", "vector_scale")
    scale((7,), None, a.data, out1.data, np.float32(0.5), np.int32(7))
    np.testing.assert_allclose(out1.get(), 0.5 * a.get(), rtol=1e-6)


def test_arguments_by_name(rt, rng):
    add = rt.launcher("vector", "vector_add")
    a = rng.standard_normal(9).astype(np.float32)
    da, out = rt.to_device(a), rt.empty((9,))
    add((9,), None, da.data, n=np.int32(9), out=out.data, b=da.data).wait()
    np.testing.assert_allclose(out.get(), 2 * a)
    with pytest.raises(KernelArgumentError, match=r"no argument \['m'\].*vector_add\("):
        add((9,), None, da.data, da.data, out.data, m=np.int32(9))
    with pytest.raises(KernelArgumentError, match=r"\['a'\] given by position and by name"):
        add((9,), None, da.data, a=da.data, b=da.data, out=out.data, n=np.int32(9))
    with pytest.raises(KernelArgumentError, match=r"missing \['n'\]"):
        add((9,), None, da.data, da.data, out=out.data)


@pytest.mark.parametrize("args, message", [
    (("a", "a", "out"), r"vector_add \(kernels/vector.cl\) takes 4 arguments, got 3"),
    (("a", "a", "out", np.int32(9), np.int32(1)), r"takes 4 arguments, got 5"),
    (("a", "a", "out", "a"), r"argument 3 'n' \(int\) is a number, got a buffer"),
    (("a", np.int32(1), "out", np.int32(9)), r"argument 1 'b' \(float \*\) is a buffer"),
    (("a", "a", "out", 9), r"argument 3 'n' \(int\) needs np.int32, got int 9"),
    (("a", "a", "out", np.int64(9)), r"'n' \(int\) needs np.int32, got int64"),
])
def test_bad_arguments_name_kernel_argument_and_file(rt, args, message):
    buffers = {"a": rt.zeros((9,)).data, "out": rt.empty((9,)).data}
    call = [buffers.get(a, a) if isinstance(a, str) else a for a in args]
    with pytest.raises(KernelArgumentError, match=message):
        rt.launcher("vector", "vector_add")((9,), None, *call)


def test_local_memory_is_checked_and_null_buffers_pass(rt):
    signature = rt.launcher("fft", "fft_local").signature

    def args(local):
        return [local if a.kind == "local" else None if a.kind == "global" else
                a.dtype.type(0) for a in signature.args]

    check_args(signature, args(cl.LocalMemory(8)))
    with pytest.raises(KernelArgumentError, match="is local memory"):
        check_args(signature, args(None))


def test_empty_grid_enqueues_nothing(rt):
    event = rt.launcher("vector", "vector_add")((0,), (8,), None, None, None, np.int32(0))
    event.wait()


def test_unknown_kernel_names_the_file(rt):
    with pytest.raises(KeyError, match="kernels/vector.cl has no kernel 'nope'"):
        rt.launcher("vector", "nope")


def test_one_launcher_from_two_threads(rt, rng):
    """Each call's arguments are set and enqueued under the runtime's lock."""
    add = rt.launcher("vector", "vector_add")
    a = rng.standard_normal(1000).astype(np.float32)
    da, errors = rt.to_device(a), []

    def work(scale):
        db = rt.to_device(np.full(1000, scale, np.float32))
        for _ in range(50):
            out = rt.empty((1000,))
            add((1000,), None, da.data, db.data, out.data, np.int32(1000))
            if not np.allclose(out.get(), a + scale):
                errors.append(scale)

    threads = [threading.Thread(target=work, args=(s,)) for s in (1.0, 2.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_freed_buffer_whose_handle_comes_back_is_set_again(rt, rng):
    """A new buffer that arrives under a freed one's handle (the exercises' fresh buffers) is
    the one the kernel uses."""
    import pyopencl.array as cla

    add = rt.launcher("vector", "vector_add")
    for k in range(20):
        a = cla.to_device(rt.queue, np.full(64, k, np.float32))
        out = cla.to_device(rt.queue, np.zeros(64, np.float32))
        add((64,), None, a.data, a.data, out.data, np.int32(64))
        np.testing.assert_array_equal(out.get(), np.full(64, 2 * k, np.float32))
        del a, out
