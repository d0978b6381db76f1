"""FFT kernels (Stockham stages in local memory: fft_local, and fft_rows as a CPU runs it;
in global memory; direct DFT, Bluestein) and the real <-> complex helpers, under the limits
named on the command line (see _limits.py)."""

import numpy as np
from _limits import oclgrind_runtime

from nnlib import fft

rt, config = oclgrind_runtime()
rng = np.random.default_rng(0)
kinds = {8: "local", 15: "local", 7: "direct", 70: "bluestein"}
for n in (8, 15, 7, 70):  # radices 2, 4, 3, 5 in local memory, direct, bluestein
    assert fft.plan(rt, n).kind == kinds[n]
    x = (rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))).astype(np.complex64)
    fft.ifft(fft.fft(x), norm="ortho").get()
vr = min(max(rt.vector_width, 2), 8)  # fft_rows (a CPU's choice) with this config's width
for n in (8, 15):
    rows = fft._Plan(rt, n, local_params={"VR": vr, "LOCAL": 1, "GROUPS_PER_CU": 1})
    x = (rng.standard_normal((vr + 3, n)) + 1j * rng.standard_normal((vr + 3, n)))
    rows.run(rt.to_device(x, dtype=np.complex64), True, 0.5).get()
fft._local_mem_size = lambda rt: 0  # later plans: one launch per stage in global memory
for n in (16, 30):
    assert fft.plan(rt, n).kind == {16: "pow2", 30: "mixed"}[n]
    x = (rng.standard_normal((3, n)) + 1j * rng.standard_normal((3, n))).astype(np.complex64)
    fft.ifft(fft.fft(x), norm="ortho").get()
r = fft.re_im(fft.to_complex(rng.standard_normal((3, 5))))
fft.real_part(fft.from_re_im(r)).get()
rt.queue.finish()
print(f"kernels run ({config}): fft_local, fft_rows, fft_stage, fft_radix2_stage, "
      "fft_radix4_stage, dft_direct, bluestein_*, to_complex, real_part, re_im, from_re_im")
