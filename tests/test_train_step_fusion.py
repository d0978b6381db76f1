"""Sequential.train_step's shortcuts (fused activation derivative, no first-layer input
gradient, gradients written instead of zeroed) change nothing: the step equals zero_grad,
the layer-by-layer backward and the optimizer step."""

import numpy as np

import nnlib
from nnlib.step_fusion import preactivation_chain


def net(rt):
    return nnlib.Sequential([nnlib.Dense(7, 9, "tanh", seed=1, runtime=rt),
                             nnlib.Dense(9, 5, "softmax", seed=2, runtime=rt),
                             nnlib.Dense(5, 6, "relu", seed=3, runtime=rt),
                             nnlib.Dense(6, 3, "none", seed=4, runtime=rt)], loss="mse")


def plain_step_matches(fast, plain, x, y, opt_plain):
    """One step of ``plain`` by zero_grad, forward, backward (MSE) and step with
    ``opt_plain``; then its parameters and gradients equal ``fast``'s."""
    opt_plain.zero_grad()
    out = plain.forward(x).get()
    plain.backward((2.0 / out.size) * (out - y))
    opt_plain.step()
    for p, q in zip(fast.parameters(), plain.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(p.grad.get(), q.grad.get(), rtol=1e-5, atol=1e-6)


def test_train_step_equals_zero_grad_backward_step(rt, rng):
    x = rng.standard_normal((4, 7)).astype(np.float32)
    y = rng.standard_normal((4, 3)).astype(np.float32)
    fast, plain = net(rt), net(rt)
    assert preactivation_chain(fast.layers) == [3, 2]  # stops at the softmax layer
    # The first layer's parameters stay out of the optimizers: their gradients accumulate.
    opt_fast = nnlib.optim.SGD(fast.parameters()[2:], lr=0.1)
    opt_plain = nnlib.optim.SGD(plain.parameters()[2:], lr=0.1)
    for _ in range(3):
        fast.train_step(x, y, opt_fast)
        plain_step_matches(fast, plain, x, y, opt_plain)


def test_a_network_trained_by_turns_with_two_optimizers_follows_each(rt, rng):
    """The step's plan (which gradients it writes, which it zeroes) belongs to the optimizer
    of that step: one that owns every parameter, then one that owns the last layer's only
    (the others' gradients then accumulate), then the first again."""
    x = rng.standard_normal((4, 7)).astype(np.float32)
    y = rng.standard_normal((4, 3)).astype(np.float32)
    fast, plain = net(rt), net(rt)
    opts = [(nnlib.optim.SGD(n.parameters(), lr=0.1), nnlib.optim.SGD(n.parameters()[-2:],
                                                                      lr=0.1))
            for n in (fast, plain)]
    for turn in (0, 1, 1, 0):
        fast.train_step(x, y, opts[0][turn])
        plain_step_matches(fast, plain, x, y, opts[1][turn])
