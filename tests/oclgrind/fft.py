"""FFT kernels (radix-2, direct DFT, Bluestein) and the real <-> complex helpers."""

import numpy as np

import nnlib
from nnlib import fft

rt = nnlib.use_device("oclgrind")
rng = np.random.default_rng(0)
for n in (8, 7, 70):  # radix-2 + radix-4 stages, direct, bluestein
    assert fft.plan(rt, n).kind == {8: "pow2", 7: "direct", 70: "bluestein"}[n]
    x = (rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))).astype(np.complex64)
    fft.ifft(fft.fft(x), norm="ortho").get()
r = fft.re_im(fft.to_complex(rng.standard_normal((3, 5))))
fft.real_part(fft.from_re_im(r)).get()
rt.queue.finish()
print("kernels run: fft_radix2_stage, fft_radix4_stage, dft_direct, bluestein_*, to_complex, "
      "real_part, re_im, from_re_im")
