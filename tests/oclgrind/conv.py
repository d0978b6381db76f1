"""Conv1d and ComplexConv1d kernels (every activation path) and complex_ops on small odd cases."""

import numpy as np

import nnlib

rt = nnlib.use_device("oclgrind")
rng = np.random.default_rng(0)
x = rng.standard_normal((2, 3, 11))
z = x + 1j * rng.standard_normal(x.shape)
for shared, layout in ((False, "channels"), (True, "tokens")):
    real = nnlib.Conv1d(4, 3, 2, 3, activation="tanh", shared=shared, layout=layout)
    real.backward(real.forward(x).get())
    for act in ("none", "tanh", "split_sigmoid", "modrelu"):
        layer = nnlib.ComplexConv1d(4, 3, 2, 3, activation=act, shared=shared, layout=layout)
        layer.backward(layer.forward(z.astype(np.complex64)).get())
a = rt.to_device(z[0].astype(np.complex64), dtype=np.complex64)
out = rt.empty(a.shape, np.complex64)
for op in range(7):
    complex_ops = rt.launcher("complex", "complex_ops")
    complex_ops((a.size,), None, a.data, a.data, out.data,
                np.int32(a.size), np.int32(op))
rt.queue.finish()
print("kernels run: conv1d_*, cconv1d_*, complex_activation_*, complex_ops")
