"""Checks of notebook 04_optimizers: SGD and Adan as kernels."""

from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..runtime import get_runtime
from ..sizes import ceil_div
from .harness import (Output, guard, launch, new_rng, student_kernel, to_device, wide)
from .registry import exercise
from .verdicts import Case, Verdict, verdict


@exercise("04_optimizers", points=2, kernel=True, hints=(
    "Weight decay goes into the gradient first; momentum keeps a velocity per weight.",
    "g' = g + wd w; v = momentum v + g'; w -= lr v (Nesterov: lr (g' + momentum v); "
    "momentum 0: lr g')."))
def check_sgd_update(folder) -> Verdict:
    """``sgd_update(w, g, v, skip, n, lr, momentum, nesterov, weight_decay)`` in
    ``<folder>/optim.cl``; compares ``(w, v)`` after one step: [0, i] is w[i], [1, i] v[i]."""
    params = ("w", "g", "v", "skip", "n", "lr", "momentum", "nesterov", "weight_decay")

    def cases():
        vw = get_runtime().vector_width  # built and launched as nnlib.optim does
        kernel = student_kernel(folder, "optim", "sgd_update", params, (f"-DVW={vw}",))
        rng = new_rng()
        skip = to_device(np.zeros(2, np.int32), np.int32)
        for n, momentum, nesterov, wd in ((1, 0.9, 0, 0.0), (37, 0.0, 0, 0.01),
                                          (wide(), 0.9, 1, 0.01)):
            w, g, v = rng.standard_normal((3, n)).astype(np.float32)

            def run(w=w, g=g, v=v, momentum=momentum, nesterov=nesterov, wd=wd):
                w_dev = Output(w.shape, guard(w.shape), initial=w)
                v_dev = Output(v.shape, guard(v.shape), initial=v)
                launch(kernel, (ceil_div(w.size, vw),), w_dev.array.data, to_device(g).data,
                        v_dev.array.data, skip.data, np.int32(w.size), np.float32(0.1),
                        np.float32(momentum), np.int32(nesterov), np.float32(wd))
                return np.stack([w_dev.get("w"), v_dev.get("v")])
            w_new, v_new = ref.sgd_step(w, g, v, 0.1, momentum, bool(nesterov), wd)
            mistakes = {"the step has the wrong sign: w -= lr * step":
                        np.stack([2 * w - w_new, v_new]),
                        "the velocity is not stored: v[i] = the new velocity":
                        np.stack([w_new, v])}
            yield Case(f"n = {n}, momentum {momentum}, nesterov {nesterov}, decay {wd}", run,
                       np.stack([w_new, v_new]), "(w, v)", mistakes,
                       "g' = g + wd w; v = momentum v + g'; w -= lr v "
                       "(Nesterov: lr (g' + momentum v); momentum 0: lr g')")
    return verdict("check_sgd_update", "sgd_update", cases)


@exercise("04_optimizers", points=2, kernel=True, hints=(
    "Adan keeps three moments: of g, of the gradient difference g - g_prev, and of the "
    "squared look-ahead u = g + beta2 (g - g_prev).",
    "m = b1 m + (1-b1) g; d = b2 d + (1-b2) diff; n = b3 n + (1-b3) u^2; "
    "denom = sqrt(n) / sqrt_bc3 + eps; step = step_size m/denom + step_size_d d/denom; "
    "w = (w - step) / (1 + lr wd); g_prev = g."))
def check_adan_update(folder) -> Verdict:
    """``adan_update`` in ``<folder>/optim.cl`` (launched as nnlib.optim.Adan does) against
    ``nnlib.reference.adan_step``; compares (w, m, d, n, g_prev) after the first and after a
    later step."""
    params = ("w", "g", "m", "d", "nu", "g_prev", "skip", "n", "lr", "beta1", "beta2", "beta3",
              "eps", "weight_decay", "no_prox", "t", "step_size", "step_size_d", "sqrt_bc3")

    def cases():
        vw = get_runtime().vector_width
        kernel = student_kernel(folder, "optim", "adan_update", params, (f"-DVW={vw}",))
        rng = new_rng()
        skip = to_device(np.zeros(2, np.int32), np.int32)
        lr, betas, eps = 0.01, (0.98, 0.92, 0.99), 1e-8
        # a decay large enough that dividing and multiplying differ beyond the tolerance
        # (at lr wd = 2e-4 the two rules agree to 1e-6)
        for n, t, wd, no_prox in ((1, 1, 0.0, 0), (37, 3, 3.0, 0), (wide(), 2, 3.0, 1)):
            w, g, g_prev = rng.standard_normal((3, n)).astype(np.float32)
            m, d = (0.1 * rng.standard_normal((2, n))).astype(np.float32)
            nu = (0.1 * rng.random(n)).astype(np.float32)
            state = (w, m, d, nu, g_prev)
            bc1, bc2, bc3 = (1 - b**t for b in betas)

            def run(state=state, g=g, t=t, wd=wd, no_prox=no_prox, bc=(bc1, bc2, bc3)):
                outs = [Output(a.shape, guard(a.shape), initial=a) for a in state]
                launch(kernel, (ceil_div(g.size, vw),), outs[0].array.data, to_device(g).data,
                        *(o.array.data for o in outs[1:]), skip.data, np.int32(g.size),
                        np.float32(lr), *(np.float32(b) for b in betas), np.float32(eps),
                        np.float32(wd), np.int32(no_prox), np.int32(t),
                        np.float32(lr / bc[0]), np.float32(lr * betas[1] / bc[1]),
                        np.float32(np.sqrt(bc[2])))
                return np.stack([o.get(name) for o, name in
                                 zip(outs, ("w", "m", "d", "n", "g_prev"))])
            args = dict(lr=lr, betas=betas, eps=eps, weight_decay=wd, no_prox=bool(no_prox))
            want = np.stack(ref.adan_step(*(a.astype(np.float64) for a in (w, g, m, d, nu,
                                                                          g_prev)), t, **args))
            mistakes = {"store g in g_prev: the next step's difference needs it":
                        np.concatenate([want[:4], g_prev[None]])}
            denom = np.sqrt(want[3]) / np.sqrt(bc3) + eps
            extra = (betas[1] - 1) * lr * betas[1] / bc2 * want[2] / denom
            twice = want.copy()
            twice[0] -= extra if no_prox else extra / (1 + lr * wd)
            mistakes["step_size_d = lr beta2 / (1 - beta2^t) already holds beta2: the d term is "
                     "step_size_d d / denom"] = twice
            if t > 1:
                no_diff = np.stack(ref.adan_step(*(a.astype(np.float64) for a in (
                    w, g, m, d, nu, g)), t, **args))
                mistakes["diff = g - g_prev (0 only on the first step)"] = no_diff
            if wd:
                other = dict(args, no_prox=not no_prox)
                mistakes["proximal decay (no_prox = 0) divides: w = (w - step) / (1 + lr wd); "
                         "no_prox multiplies: w (1 - lr wd) - step"] = np.stack(
                    ref.adan_step(*(a.astype(np.float64) for a in (w, g, m, d, nu, g_prev)),
                                  t, **other))
            yield Case(f"n = {n}, step {t}, decay {wd}{', no_prox' if no_prox else ''}", run,
                       want, "(w, m, d, n, g_prev)", mistakes,
                       "m, d, n are moving averages of g, diff and u^2 (u = g + beta2 diff), "
                       "see exercises.hint(\"adan_update\", 2)")
    return verdict("check_adan_update", "adan_update", cases, rtol=1e-4, atol=1e-5)
