"""Checks of notebook 00_devices: the first kernels."""

from __future__ import annotations

import numpy as np

from .. import reference as ref
from .harness import Output, guard, launch, new_rng, student_kernel, to_device, wide
from .registry import exercise
from .verdicts import Case, Verdict, verdict


@exercise("00_devices", points=2, kernel=True, hints=(
    "The global size is rounded up to whole work-groups: some work-items have no element.",
    "work-item i = get_global_id(0) writes out[i] = a[i] + b[i] when i < n, and does "
    "nothing otherwise."))
def check_vector_add(folder) -> Verdict:
    """``vector_add(a, b, out, n)`` in ``<folder>/vector.cl``: out = a + b."""
    def cases():
        kernel = student_kernel(folder, "vector", "vector_add", ("a", "b", "out", "n"))
        rng = new_rng()
        for n in (1, 1000, wide()):
            a, b = rng.standard_normal((2, n)).astype(np.float32)

            def run(a=a, b=b, n=n):
                out = Output((n,), guard((n,)))
                launch(kernel, (n,), to_device(a).data, to_device(b).data, out.array.data,
                        np.int32(n))
                return out.get("out")
            yield Case(f"n = {n}", run, ref.vector_add(a, b), "out",
                       {"you computed a - b: add instead": a - b,
                        "out holds a only: add b[i]": a})
    return verdict("check_vector_add", "vector_add", cases)


@exercise("00_devices", points=2, kernel=True, hints=(
    "Like vector_add, one element per work-item; alpha arrives as a float argument.",
    "work-item i = get_global_id(0) writes out[i] = alpha a[i] when i < n, and does nothing "
    "otherwise."))
def check_vector_scale(folder) -> Verdict:
    """``vector_scale(a, out, alpha, n)`` in ``<folder>/vector.cl``: out = alpha * a."""
    def cases():
        kernel = student_kernel(folder, "vector", "vector_scale", ("a", "out", "alpha", "n"))
        rng = new_rng()
        for n, alpha in ((1, 2.5), (999, -0.5), (wide(), 3.0)):
            a = rng.standard_normal(n).astype(np.float32)

            def run(a=a, alpha=alpha):
                out = Output(a.shape, guard(a.shape))
                launch(kernel, a.shape, to_device(a).data, out.array.data, np.float32(alpha),
                        np.int32(a.size))
                return out.get("out")
            yield Case(f"n = {n}, alpha = {alpha}", run, ref.vector_scale(a, alpha), "out",
                       {"out holds a: multiply by alpha": a,
                        "out holds alpha everywhere: multiply it by a[i]":
                            np.full_like(a, alpha),
                        "you added alpha: multiply instead": a + alpha})
    return verdict("check_vector_scale", "vector_scale", cases)
