"""The fused MLP training kernel: SGD with momentum and Adam, one sample and batches with a
smaller last one (2 and 9: partial and full register tiles), a work-group of several
work-items with odd widths, the GPU's forward in teams of work-items; steps split over two
work-groups (fused_mlp_apply)."""

import numpy as np

import nnlib
from nnlib.fused import FusedMLP

rt = nnlib.use_device("oclgrind")
rng = np.random.default_rng(0)
x = rng.standard_normal((11, 7)).astype(np.float32)
# (rule, loss, work-items, team): the last, a GPU's forward (forward_teams) with a work-item
# over (6 = 4 + 2) and more tiles than teams
for rule, loss, local, team in (("sgd", "cross_entropy", 1, 1), ("adam", "mse", 3, 1),
                                ("sgd", "cross_entropy", 6, 4)):
    acts = ("tanh", "softmax") if loss == "cross_entropy" else ("relu", "sigmoid")
    net = nnlib.Sequential([nnlib.Dense(7, 9, acts[0], seed=1), nnlib.Dense(9, 3, acts[1], seed=2)],
                           loss=loss)
    opt = (nnlib.optim.SGD(net.parameters(), lr=0.1, momentum=0.9) if rule == "sgd"
           else nnlib.optim.Adam(net.parameters(), lr=0.01))
    y = rng.integers(0, 3, 11) if loss == "cross_entropy" else rng.uniform(0, 1, (11, 3))
    trainer = FusedMLP(net, opt, local_size=local, team=team)
    trainer.fit(x, y, epochs=1, batch_size=1)
    trainer.fit(x, y, epochs=1, batch_size=2)
    trainer.fit(x, y, epochs=1, batch_size=9)
    trainer.fit(x, y, epochs=1, batch_size=9, groups=2)  # split: partial gradients, apply
rt.queue.finish()
print("kernels run: fused_mlp_train (SGD momentum, Adam; batch 1, 2 and 9; whole and split "
      "steps; teams of 4 work-items), fused_mlp_apply")
