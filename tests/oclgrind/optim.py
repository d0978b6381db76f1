"""Every optimizer kernel on odd sizes, with one work-item per element (Oclgrind's preferred
vector width) and with 16-wide vectors (a CPU's), over the flat layout and tensor by tensor
(partial vectors at every tensor's end); Adam-mini with its default group (2 under Oclgrind)
and with a group of 64, on blocks of 301 and 5 elements."""

import numpy as np

import nnlib
from nnlib import optim
from nnlib.runtime import Runtime

nnlib.use_device("oclgrind")
rng = np.random.default_rng(0)
params = [nnlib.Parameter(rng.standard_normal((3, 301)), "weight", block_size=301),
          nnlib.Parameter(rng.standard_normal(3), "bias", block_size=1),
          nnlib.Parameter(rng.standard_normal(5), "w")]
makers = (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
          lambda ps: optim.AdamW(ps, lr=0.1), optim.AdamMini,
          lambda ps: optim.AdamMini(ps, group_size=64), optim.Adan)
for width in (1, 16):
    Runtime.vector_width = property(lambda self, width=width: width)
    for make in makers:
        opt = make(params)
        for fused in (True, False):
            if not fused:
                make(params)  # takes the parameters: opt now launches per tensor
            for _ in range(2):
                for p in params:
                    p.grad.set(rng.standard_normal(p.shape).astype(np.float32))
                opt.step()
        params[2].grad.fill(np.nan)
        opt.step()
        assert opt.skipped_steps == 1
nnlib.get_runtime().queue.finish()
print("kernels run: optim (skip_begin, check_finite, sgd, adam, adam_mini, adan), VW 1 and 16")
