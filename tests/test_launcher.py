"""Launcher: arguments kept between launches and re-set when they change."""

import numpy as np

from nnlib.launcher import Launcher


def test_launcher_follows_changed_buffers_and_sizes(rt, rng):
    add = Launcher(rt, rt.kernel("vector", "vector_add"))
    a, b, c = (rng.standard_normal(37).astype(np.float32) for _ in range(3))
    da, db, dc = rt.to_device(a), rt.to_device(b), rt.to_device(c)
    out1, out2 = rt.empty((37,)), rt.empty((37,))
    add((37,), (8,), da.data, db.data, out1.data, np.int32(37))
    np.testing.assert_allclose(out1.get(), a + b)
    add((37,), (8,), da.data, dc.data, out2.data, np.int32(20))  # two buffers and n changed
    np.testing.assert_allclose(out2.get()[:20], a[:20] + c[:20])
    add((37,), None, da.data, dc.data, out2.data, np.int32(37))  # only n changed
    np.testing.assert_allclose(out2.get(), a + c)


def test_launchers_of_one_kernel_keep_separate_arguments(rt, rng):
    kernel = rt.kernel("vector", "vector_add")
    first, second = Launcher(rt, kernel), Launcher(rt, kernel)
    a = rt.to_device(rng.standard_normal(5).astype(np.float32))
    out1, out2 = rt.empty((5,)), rt.empty((5,))
    first((5,), None, a.data, a.data, out1.data, np.int32(5))
    second((5,), None, a.data, out1.data, out2.data, np.int32(5))
    np.testing.assert_allclose(out2.get(), 3 * a.get(), rtol=1e-6)
    out1.fill(0)
    first((5,), None, a.data, a.data, out1.data, np.int32(5))  # nothing changed for first
    np.testing.assert_allclose(out1.get(), 2 * a.get(), rtol=1e-6)
