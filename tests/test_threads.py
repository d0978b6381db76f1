"""Several threads on one runtime (issue 14): two threads training two networks (the article's
Dense kernels, through launchers the runtime shares, and the fast ones, through each layer's
own copies) and a CATCH detector scoring, with a tiny switch interval, must give what they give one at a time.
It runs in its own process: a race used to end in SIGSEGV."""

import pytest

from .isolated import run_isolated

SCRIPT = """
import sys, threading, numpy as np, nnlib
from nnlib import optim
from nnlib.catch import CATCH, TINY

SERIES = np.random.default_rng(0).standard_normal((70, 2))


def train(variant, seed):
    net = nnlib.Sequential([nnlib.Dense(8, 16, "tanh", seed=seed, variant=variant),
                            nnlib.Dense(16, 4, seed=seed + 1, variant=variant)])
    opt = optim.Adam(net.parameters(), lr=0.01)
    rng = np.random.default_rng(seed)
    for _ in range(30):
        x = rng.standard_normal((5, 8))
        net.train_step(x, np.tanh(x[:, :4]), opt)
    return [p.numpy() for p in net.parameters()]


def score(seed):
    return [CATCH(2, seed=seed, **TINY)._score(SERIES)]  # an unfitted network, scored as such


JOBS = [(train, "article", 0), (train, "article", 7), (train, "blocked", 3), (score, 1)]
want = [job(*args) for job, *args in JOBS]
sys.setswitchinterval(1e-6)
for trial in range(int(sys.argv[1])):
    got, errors = [None] * len(JOBS), []

    def run(i):
        try:
            got[i] = JOBS[i][0](*JOBS[i][1:])
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(JOBS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    for i, (a, b) in enumerate(zip(got, want)):
        for x, y in zip(a, b):
            assert np.array_equal(x, y), f"trial {trial}: job {i} differs"
print("same results in every trial")
"""


@pytest.mark.slow
def test_two_threads_training_two_networks_get_the_single_thread_results():
    assert "same results" in run_isolated(SCRIPT, args=(3,))
