"""The planted mistakes each checker must recognise, keyed by the exercise's name in
nnlib.exercises.EXERCISES (tests/test_exercises.py checks both ways): a kernel mistake is
(file, solution text, mistaken text, what the report must say), a function mistake
(function, what the report must say). Not part of the wheel: they sit beside the answers."""

import numpy as np

KERNEL_MISTAKES = {
    "vector_add": [
        ("vector", "a[i] + b[i]", "a[i] - b[i]", "you computed a - b"),
        ("vector", "if (i < n)  // the global size may be rounded up past n",
         "", "wrote past the end of out"),
        ("vector", "a[i] + b[i]", "a[i] + bb[i]",
         "vector.cl does not build. The compiler says:"),
        ("vector", "int n)", "int n, int extra)", "takes 5 parameters"),
        ("vector", "void vector_add(", "void vector_sum(",
         "has no kernel named vector_add"),
    ],
    "vector_scale": [
        ("vector", "out[i] = alpha * a[i];", "out[i] = a[i];",
         "out holds a: multiply by alpha"),
        ("vector", "out[i] = alpha * a[i];", "out[i] = alpha;",
         "out holds alpha everywhere"),
        ("vector", "out[i] = alpha * a[i];", "out[i] = alpha + a[i];",
         "you added alpha: multiply instead"),
    ],
    "dense_forward": [
        ("dense", "float sum = bias[j];", "float sum = 0.0f;",
         "the bias is missing"),
        ("dense", "y[(size_t)b * n_out + j] = activate(sum, act);",
         "y[(size_t)b * n_out + j] = sum;", "the activation is missing"),
        ("dense", "y[(size_t)b * n_out + j] = activate(sum, act);",
         "y[(size_t)b * n_out + j] = activate(sum - bias[j], act) + bias[j];",
         "the bias is added after the activation"),
    ],
    "dense_backward_input": [
        ("dense", "sum += g[j] * w[(size_t)j * n_in + i];",
         "sum += g[j] * w[(size_t)i * n_out + j];", "walks the column i of W"),
        ("dense", "global const float *g = dz + (size_t)b * n_out;",
         "global const float *g = dz;", "each sample has its own row of dz"),
        ("dense", "dx[(size_t)b * n_in + i] = sum;",
         "dx[(size_t)b * n_in + i] += sum;", "adds to it with += keeps that NaN"),
    ],
    "dense_backward_weight": [
        ("dense", "dw[(size_t)j * n_in + i] += sum;",
         "dw[(size_t)j * n_in + i] = sum;", "gradients accumulate: add the sum to dw"),
        ("dense", "for (int b = 0; b < batch; ++b)\n        sum += dz",
         "for (int b = 0; b < 1; ++b)\n        sum += dz", "sum over every sample b"),
        ("dense", "dw[(size_t)j * n_in + i] += sum;",
         "dw[(size_t)i * n_out + j] += sum;", "dw[j, i] is stored at dw[j * n_in + i]"),
    ],
    "activation_grad": [
        ("activation", "return 1.0f - y * y;", "return 1.0f - y;",
         "FAILED  tanh, n = "),
        ("activation", "case ACT_SIGMOID: return y * (1.0f - y);", "",
         "activate_grad returns 1 for sigmoid"),
        ("activation", "case ACT_RELU: return y > 0.0f ? 1.0f : 0.0f;",
         "case ACT_RELU: return y;", "the derivative of relu, written with its output y, is 1"),
    ],
    "output_gradient": [
        ("loss", "2.0f * d * inv_count", "d * inv_count",
         "the factor 2 is missing"),
        ("loss", ": d * inv_count;", ": d;", "the mean is missing"),
        ("loss", "float d = y[i] - t[i];", "float d = t[i] - y[i];",
         "the sign: the gradient points from t to y"),
    ],
    "cmulconj": [
        ("complex", "a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x",
         "a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x", "the conjugate is missing"),
        ("complex", "a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x",
         "a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y", "conjugate a, not b"),
        ("complex", "a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x",
         "a.x * b.x - a.y * b.y, -(a.x * b.y + a.y * b.x)", "conjugate a only, not the whole"),
    ],
    "fft_radix2_stage": [
        ("fft", "w.y = -w.y;", ";", "conjugate the twiddle"),
        ("fft", "dst[o] = (a + b) * scale;\n    dst[o + p] = (a - b) * scale;",
         "dst[o] = a + b;\n    dst[o + p] = a - b;", "multiply both outputs by scale"),
        ("fft", "dst[o + p] = (a - b) * scale;", "", "were never written"),
    ],
    "sgd_update": [
        ("optim", "store_v(wi - lr * step,", "store_v(wi + lr * step,",
         "the step has the wrong sign"),
        ("optim", "store_v(vel, v, first, n);", "",
         "the velocity is not stored"),
        ("optim", "step = nesterov ? grad + momentum * vel : vel;",
         "step = vel;", "(Nesterov: lr (g' + momentum v)"),
    ],
    "masked_softmax": [
        ("attention", "a[j] /= sum;", ";", "divide every exp by the row"),
        ("attention", "lse[((size_t)g * heads + h) * n + i] = top + log(sum);",
         "lse[((size_t)g * heads + h) * n + i] = log(sum);", "add back the maximum"),
        ("attention", "!hard ? exp(a[j] - top) : m[j] != 0.0f ? m[j] * "
         "exp(a[j] - top)", "!hard ? exp(a[j]) : m[j] != 0.0f ? m[j] * exp(a[j])",
         "FAILED  2 groups, n = 6, 1 heads of 4, finite mask, large logits"),
        ("attention", "m[j] != 0.0f ? m[j] * exp(a[j] - top) : 0.0f",
         "exp(a[j] - top)", "the hard mask multiplies exp by m[j]"),
        ("attention", "m[j] != 0.0f ? m[j] * exp(a[j] - top) : 0.0f",
         "m[j] * exp(a[j] - top)", "give a masked key 0 without taking its exp"),
        ("attention", "QKV(g, j, 1) + h * dh, dh), m[j], scale", "QKV(g, j, 1), dh), m[j], scale",
         "each head has its own keys"),
        ("attention", "dh), m[j], scale, fill, hard);", "dh), m[j], 1.0f, fill, hard);",
         "scale the logits by 1 / sqrt(dh)"),
        ("attention", "dh), m[j], scale, fill, hard);",
         "dh), mask[((size_t)g * n + j) * n + i], scale, fill, hard);",
         "m[j] is the mask of (query i, key j)"),
    ],
    "adan_update": [
        ("optim", "store_v(grad, g_prev, first, n);", "",
         "store g in g_prev"),
        ("optim", "floatv diff = first_step ? (floatv)0.0f : grad - load_v(g_prev, first, n);",
         "floatv diff = (floatv)0.0f;", "diff = g - g_prev (0 only on the first step)"),
        ("optim", "store_v(no_prox ? wi * (1.0f - lr * weight_decay) - step\n"
         "                    : (wi - step) / (1.0f + lr * weight_decay), w, first, n);",
         "store_v(!no_prox ? wi * (1.0f - lr * weight_decay) - step\n"
         "                    : (wi - step) / (1.0f + lr * weight_decay), w, first, n);",
         "proximal decay (no_prox = 0) divides"),
        ("optim", "step_size_d * RATIO(di, denom)", "step_size_d * beta2 * RATIO(di, denom)",
         "step_size_d = lr beta2 / (1 - beta2^t) already holds beta2"),
    ],
    "dense_forward_blocked": [
        ("blocked", "activate(acc[r][c] + bias[j0 + c], act)",
         "activate(acc[r][c], act)", "the bias is missing"),
        ("blocked", "activate(acc[r][c] + bias[j0 + c], act)",
         "acc[r][c] + bias[j0 + c]", "the activation is missing"),
        ("blocked", "for (int r = 0; r < R && b0 + r < batch; ++r)",
         "for (int r = 0; r < R; ++r)", "wrote past the end of y"),
    ],
    "gumbel_softmax": [
        ("activation", "h[c] = c == best ? 1.0f : 0.0f;", "h[c] = y[c];",
         "hard is the one-hot of soft's largest entry"),
        ("activation", "y[c] = (z[c] + g[c]) / tau;", "y[c] = z[c] / tau;",
         "add the Gumbel noise"),
        ("activation", "y[c] = (z[c] + g[c]) / tau;", "y[c] = z[c] + g[c];",
         "divide logits + noise by the temperature tau"),
        ("activation", "y[c] = exp(y[c] - top);", "y[c] = exp(y[c]);",
         "FAILED  3 rows of 6, tau = 1.0, large logits"),
        ("activation", "if (y[c] > top) {", "if (y[c] >= top) {",
         "on a tie hard marks the first largest entry"),
    ],
    "revin_norm": [
        ("catch", "s = sqrt(mv.y + 1e-5f);",
         "s = sqrt(mv.y * t / (t - 1) + 1e-5f);",
         "the variance divides by t (biased, as RevIN's), not t - 1"),
        ("catch", "s = sqrt(mv.y + 1e-5f);", "s = mv.y + 1e-5f;",
         "std is a square root: std = sqrt(var + 1e-5)"),
        ("catch", "s = sqrt(mv.y + 1e-5f);", "s = sqrt(mv.y);",
         "a constant channel has variance 0: std = sqrt(var + 1e-5)"),
        ("catch", "s = sqrt(mv.y + 1e-5f);", "s = sqrt(mv.y);",
         "FAILED  4 rows of 40, quiet rows (variance 1e-6): max |error|"),
        ("catch", "(xr[i] - m) / s;", "(xr[i] - m) * s;",
         "divide x - mean by std, do not multiply"),
        ("catch", "    std[r] = s;\n", "", "nothing was written to std"),
        ("catch", "float2 mv = mean_var(xr, t);",
         "float a = 0.0f, q = 0.0f;\n    for (int i = 0; i < t; ++i) {\n        a += xr[i];\n"
         "        q += xr[i] * xr[i];\n    }\n    a /= t;\n"
         "    float2 mv = (float2)(a, q / t - a * a);",
         "E[x^2] - mean^2 loses the variance when the mean is large"),
    ],
}


def _higher(labels, scores):
    return scores[labels == 1][:, None] > scores[labels == 0][None, :]


def _tied(labels, scores):
    return scores[labels == 1][:, None] == scores[labels == 0][None, :]


def _precision(t, p, k):
    return np.mean([np.mean(t[p == c] == c) for c in range(k) if np.any(p == c)])


def _recall_all(t, p, k):
    return np.mean([np.mean(p[t == c] == c) if np.any(t == c) else 0.0 for c in range(k)])


FUNCTION_MISTAKES = {
    "balanced_accuracy": [
        (lambda y_true, y_pred: 0.5, "must take (y_true, y_pred, n_classes)"),
        (lambda y_true, y_pred, n_classes: None, "got None instead of the balanced accuracy"),
        (lambda y_true, y_pred, n_classes: 1 / 0, "raised ZeroDivisionError"),
        (lambda y_true, y_pred, n_classes: np.mean(y_true == y_pred), "the plain accuracy"),
        (_precision, "that is the mean precision"),
        (_recall_all, "skip the classes absent from y_true"),
        ("balanced_accuracy", "pass your function balanced_accuracy itself"),
    ],
    "confusion_matrix": [
        (lambda t, p, k: (np.eye(k, dtype=int)[p].T @ np.eye(k, dtype=int)[t]),
         "rows are the true classes, columns the predictions"),
        (lambda t, p, k: np.minimum(np.eye(k, dtype=int)[t].T @ np.eye(k, dtype=int)[p], 1),
         "counts a repeated pair once"),
        (lambda t, p, k: np.eye(k)[t].T @ np.eye(k)[p]
         / np.maximum(1, np.bincount(t, minlength=k))[:, None],
         "the matrix should hold integer counts, got ndarray of float64"),
        (lambda t, p: None, "must take (y_true, y_pred, n_classes)"),
    ],
    "intensity": [
        (lambda b, i, o: b * i * o / (4 * (b * i + i * o + b * o)),
         "a multiply-add is 2 floating-point operations"),
        (lambda b, i, o: 2 * b * i * o / (b * i + i * o + b * o), "a float32 is 4 bytes"),
        (lambda b, i, o: 2 * b * i * o / (4 * (b * i + i * o)),
         "y is written to memory: count its bytes too"),
        (lambda b, i, o: 2 * b * i * o / (4 * b * (i + i * o + o)),
         "the weights move once per batch"),
    ],
    "auc_roc": [
        (lambda labels: 0.5, "must take (labels, scores)"),
        (lambda labels, scores: float(_higher(labels, scores).mean()), "counts one half, not 0"),
        (lambda labels, scores: float((_higher(labels, scores) | _tied(labels, scores)).mean()),
         "a tie counts one half, not 1"),
        (lambda labels, scores: float((~_higher(labels, scores) & ~_tied(labels, scores)).mean()
                                      + _tied(labels, scores).mean() / 2),
         "you counted the pairs where it scores lower"),
    ],
}
