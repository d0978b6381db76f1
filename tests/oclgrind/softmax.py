"""Softmax and Gumbel-softmax kernels (kernels/activation.cl) on small odd sizes."""

import numpy as np

import nnlib
from nnlib.softmax import GumbelSoftmax, gumbel_noise, softmax, softmax_backward

rt = nnlib.use_device("oclgrind")
rng = np.random.default_rng(0)
for shape in ((1, 1), (3, 7), (5, 2)):
    z = rng.standard_normal(shape)
    softmax_backward(softmax(z, rt), z, rt)
    gs = GumbelSoftmax(0.5, rt)
    gs.forward(z, gumbel_noise(shape))
    gs.backward(z)
rt.queue.finish()
print("kernels run: softmax_rows, softmax_backward_rows, gumbel_softmax_forward, "
      "gumbel_softmax_backward")
