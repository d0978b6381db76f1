"""CATCH's elementwise GELU kernels (kernels/catch.cl, VW floats per work-item) under the
limits named on the command line (see _limits.py), on sizes below, at and past a vector:
partial vectors at the end, a tensor shorter than one vector."""

import numpy as np
from _limits import oclgrind_runtime

from nnlib import reference as ref
from nnlib.catch.ops import GELU

rt, config = oclgrind_runtime()
rng = np.random.default_rng(0)
for size in (1, 7, 16, 37):
    x = rng.standard_normal(size)
    layer = GELU(rt)
    y = layer.forward(rt.to_device(x)).get()
    dx = layer.backward(rt.to_device(np.ones(size))).get()
    assert np.allclose(y, ref.gelu(x), atol=1e-6) and np.allclose(dx, ref.gelu_grad(x), atol=1e-5)
rt.queue.finish()
print("kernels run: gelu_forward, gelu_backward")
