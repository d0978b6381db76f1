"""Checks of notebook 07_catch: the masked softmax and RevIN."""

from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..codes import FINITE_FILL
from .harness import (LARGE_LOGITS, Output, guard, launch, new_rng, student_kernel, to_device, wide)
from .registry import exercise
from .verdicts import Case, Verdict, verdict


@exercise("07_catch", points=2, kernel=True, hints=(
    "Subtract the row's largest kept logit before exp; a masked key under the hard mask "
    "must get 0 without computing its exp.",
    "a[j] = masked_logit(...); top = max over kept keys; a[j] = hard ? (m[j] != 0 ? m[j] "
    "exp(a[j] - top) : 0) : exp(a[j] - top); divide by the sum; lse = top + log(sum)."))
def check_masked_softmax(folder) -> Verdict:
    """The probabilities and log-sum-exp of ``masked_attention_forward(qkv, mask, out,
    probs, lse, groups, n, heads, dh, fill, hard)`` in ``<folder>/attention.cl``, compared
    with ``nnlib.reference.masked_attention_forward`` as rows of probs followed by lse."""
    params = ("qkv", "mask", "out", "probs", "lse", "groups", "n", "heads", "dh", "fill",
              "hard")

    def joined(probs, lse):
        return np.concatenate([probs, lse[..., None]], -1).astype(np.float32)

    def cases():
        kernel = student_kernel(folder, "attention", "masked_attention_forward", params)
        rng = new_rng()
        for groups, n, heads, dh, hard, size in ((1, 1, 1, 1, 0, 1.0), (3, 5, 2, 7, 0, 1.0),
                                                  (3, 5, 2, 7, 1, 1.0), (wide(), 3, 2, 4, 1, 1.0),
                                                  (2, 6, 1, 4, 0, 40.0), (2, 6, 1, 4, 1, 40.0)):
            qkv = size * rng.standard_normal((groups, n, 3 * heads * dh))
            mask = (rng.random((groups, n, n)) < 0.5).astype(np.float32)
            mask[:, np.arange(n), np.arange(n)] = 1

            def run(qkv=qkv, mask=mask, heads=heads, dh=dh, hard=hard):
                groups, n = mask.shape[:2]
                grid = (n, heads, groups)
                probs = Output((groups, heads, n, n), n * guard(grid))
                lse = Output((groups, heads, n), guard(grid))
                out = Output((groups, n, heads * dh), heads * dh * guard(grid))
                launch(kernel, grid, to_device(qkv).data, to_device(mask).data, out.array.data,
                        probs.array.data, lse.array.data, np.int32(groups), np.int32(n),
                        np.int32(heads), np.int32(dh), np.float32(FINITE_FILL),
                        np.int32(hard))
                return joined(probs.get("probs"), lse.get("lse"))
            _, probs, lse = ref.masked_attention_forward(qkv, mask, heads, hard=bool(hard))
            largest = probs.max(-1)  # exp(top - lse): the row's largest probability
            mistakes = {
                "lse = top + log(sum): add back the maximum taken out before exp":
                joined(probs, -np.log(largest)),
                "divide every exp by the row's sum": joined(probs / largest[..., None], lse)}
            split = qkv.reshape(groups, n, 3, heads, dh)
            if heads > 1:  # every head's logits against head 0's keys
                first_keys = split.copy()
                first_keys[:, :, 1] = split[:, :, 1, :1]
                mistakes["key j of head h starts at QKV(g, j, 1) + h * dh: each head has its "
                         "own keys"] = joined(*ref.masked_attention_forward(
                             first_keys.reshape(qkv.shape), mask, heads, hard=bool(hard))[1:])
            if dh > 1:  # logits not divided by sqrt(dh)
                unscaled = split.copy()
                unscaled[:, :, 0] *= np.sqrt(dh)
                mistakes["scale the logits by 1 / sqrt(dh): pass scale to masked_logit"] = joined(
                    *ref.masked_attention_forward(unscaled.reshape(qkv.shape), mask, heads,
                                                  hard=bool(hard))[1:])
            if n > 1:
                mistakes["m[j] is the mask of (query i, key j): row i of the group's mask, "
                         "mask[(g n + i) n + j]"] = joined(*ref.masked_attention_forward(
                             qkv, mask.transpose(0, 2, 1).copy(), heads, hard=bool(hard))[1:])
            if hard:
                unmasked = ref.masked_attention_forward(qkv, np.ones_like(mask), heads, hard=True)
                mistakes["the hard mask multiplies exp by m[j] (a masked key gets 0)"] = joined(
                    *unmasked[1:])
            hint = ("subtract the row's largest logit before exp (large logits overflow "
                    "otherwise), then divide by the sum")
            if hard and size > 1:
                hint = ("under the hard mask a masked key's logit may lie far above the kept "
                        "keys' maximum, so exp(a[j] - top) overflows and m[j] * inf is NaN: "
                        "give a masked key 0 without taking its exp")
            label = (f"{groups} groups, n = {n}, {heads} heads of {dh}, "
                     f"{'hard' if hard else 'finite'} mask" + (LARGE_LOGITS if size > 1 else ""))
            yield Case(label, run, joined(probs, lse), "probs | lse", mistakes, hint)
    return verdict("check_masked_softmax", "the masked softmax", cases)


@exercise("07_catch", points=2, kernel=True, hints=(
    "One work-item per row: the row's mean, its variance (biased: divided by t), then "
    "every value shifted and scaled; mean[r] and std[r] are outputs too.",
    "if (r >= rows) return; (m, var) = mean_var(x + r t, t), two passes; s = sqrt(var + "
    "1e-5); out[r t + i] = (x[r t + i] - m) / s; mean[r] = m; std[r] = s."))
def check_revin_norm(folder) -> Verdict:
    """``revin_norm(x, out, mean, std, rows, t)`` in ``<folder>/catch.cl``, compared with
    ``nnlib.reference.revin_norm`` as rows of out followed by mean and std."""
    params = ("x", "out", "mean", "std", "rows", "t")

    def revin(x, ddof=0, eps=1e-5, root=True, divide=True, centre=True, after=0.0):
        """RevIN of the rows of x as [out | mean | std], or one of its typical mistakes."""
        mean = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True, ddof=ddof) + eps
        std = (np.sqrt(var) if root else var) + after
        shifted = x - mean if centre else x
        out = shifted / std if divide else shifted * std
        return np.concatenate([out, mean, std], -1)

    formula = ("out = (x - mean) / std with std = sqrt(var + 1e-5), the variance biased "
               "(divided by t)")
    kinds = {  # kind of rows -> (the case label's tail, the hint when no known mistake matches)
        "": ("", formula), "quiet": (", quiet rows (variance 1e-6)", formula),
        "constant": (", constant rows (variance 0)", "a constant channel has variance 0: "
                     "std = sqrt(var + 1e-5) keeps x - mean = 0 divided by a number that is not 0"),
        "offset": (", mean 100", "E[x^2] - mean^2 loses the variance when the mean is large "
                   "(float32 cancellation): take the mean first, then the mean of (x - mean)^2, "
                   "as mean_var does")}

    def cases():
        kernel = student_kernel(folder, "catch", "revin_norm", params)
        rng = new_rng()
        for rows, t, kind in ((1, 1, ""), (1, 7, ""), (13, 33, ""), (wide(), 5, ""),
                              (3, 9, "constant"), (4, 40, "quiet"), (6, 48, "offset")):
            x = rng.standard_normal((rows, t))
            if kind == "constant":  # a dead sensor: variance 0
                x = np.full((rows, t), 3.0)
            elif kind == "quiet":  # variance 1e-6, well below the 1e-5 added to it
                x *= 1e-3
            elif kind == "offset":  # a large mean: E[x^2] - mean^2 cancels in float32
                x += 100.0
            x = x.astype(np.float32).astype(np.float64)

            def run(x=x):
                rows, t = x.shape
                out = Output((rows, t), t * guard((rows,)))
                mean, std = (Output((rows, 1), guard((rows,))) for _ in "ms")
                launch(kernel, (rows,), to_device(x).data, out.array.data, mean.array.data,
                        std.array.data, np.int32(rows), np.int32(t))
                return np.concatenate([out.get("out"), mean.get("mean"), std.get("std")], -1)
            mistakes = {"std is a square root: std = sqrt(var + 1e-5)": revin(x, root=False),
                        "divide x - mean by std, do not multiply": revin(x, divide=False),
                        "subtract the row's mean before dividing by std": revin(x, centre=False)}
            if t > 1:
                mistakes["the variance divides by t (biased, as RevIN's), not t - 1"] = revin(
                    x, ddof=1)
            if t > 1 and kind != "constant":
                mistakes["add 1e-5 to the variance before the square root"] = revin(x, eps=0.0)
                mistakes["add 1e-5 to the variance inside the square root, not to std"] = revin(
                    x, eps=0.0, after=1e-5)
            tail, hint = kinds["constant" if t == 1 else kind]
            label = f"{rows} row{'s' * (rows > 1)} of {t}{tail if t > 1 else ''}"
            yield Case(label, run, revin(x), "out | mean | std", mistakes, hint)
    return verdict("check_revin_norm", "RevIN", cases, rtol=1e-4, atol=1e-4)
