"""Every optimizer kernel on odd sizes, under the limits named on the command line (see
_limits.py: one work-item per element at VW 1, a CPU's vectors at VW 16), over the flat
layout and tensor by tensor (partial vectors at every tensor's end); Adam-mini with its
default group (twice the work-group multiple) and with a group of 64, on blocks of 301 and 5
elements."""

import numpy as np
from _limits import oclgrind_runtime

import nnlib
from nnlib.registry import OPTIMIZERS

rt, config = oclgrind_runtime()
rng = np.random.default_rng(0)
params = [nnlib.Parameter(rng.standard_normal((3, 301)), "weight", block_size=301),
          nnlib.Parameter(rng.standard_normal(3), "bias", block_size=1),
          nnlib.Parameter(rng.standard_normal(5), "w")]
# every registered rule; SGD with momentum (its state), Adam-mini also with a group of 64
options = {"SGD": [dict(momentum=0.9, nesterov=True)], "AdamMini": [{}, dict(group_size=64)]}
makers = [lambda ps, cls=cls, extra=extra: cls(ps, lr=0.1, **extra)
          for name, cls in OPTIMIZERS.items() for extra in options.get(name, [{}])]
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
rt.queue.finish()
print(f"kernels run ({config}, VW {rt.vector_width}): optim (check_finite, sgd, "
      "adam, adam_mini, adan)")
