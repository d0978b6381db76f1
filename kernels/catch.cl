// The CATCH detector's own kernels (the attention core is in attention.cl). Series are laid
// out (batch, channels, time): a "row" is one channel of one window. Every work-item writes
// only its own outputs; sums over a batch run in one work-item, in a fixed order.
// VW: floats per work-item of the elementwise kernels (GELU), as one vector (floatv.h), set
// by the host from the device's vector width; VLOAD as in dot4.h.

#ifndef VW
#define VW 1
#endif
#include "dot4.h"
#include "floatv.h"

// The mean and the biased variance of n values, in two passes (no cancellation), each
// summed in the four lanes of a float4 (four chains of adds, not one), then the rest.
inline float2 mean_var(global const float *x, int n)
{
    float4 m4 = (float4)(0.0f), v4 = (float4)(0.0f);
    int i = 0;
    for (; i + 4 <= n; i += 4)
        m4 += LOAD4(x + i);
    float m = (m4.x + m4.y) + (m4.z + m4.w);
    for (; i < n; ++i)
        m += x[i];
    m /= n;
    for (i = 0; i + 4 <= n; i += 4) {
        float4 d = LOAD4(x + i) - m;
        v4 += d * d;
    }
    float v = (v4.x + v4.y) + (v4.z + v4.w);
    for (; i < n; ++i)
        v += (x[i] - m) * (x[i] - m);
    return (float2)(m, v / n);
}

// ---------------------------------------------------------------- RevIN
// One work-item per row of (rows, t): mean and std = sqrt(var + 1e-5) over time (biased var),
// out = (x - mean) / std. The statistics are constants for the gradient (as in CATCH).
kernel void revin_norm(global const float *x, global float *out, global float *mean,
                       global float *std, int rows, int t)
{
    int r = get_global_id(0);
    // ### BEGIN SOLUTION
    // HINT: the row r is x[r * t] .. x[r * t + t - 1], and work-items past the rows do nothing;
    // HINT: write out, mean[r] and std[r]. exercises.hint("revin_norm", 1) a nudge, 2 the formula
    if (r >= rows)
        return;
    global const float *xr = x + (size_t)r * t;
    float2 mv = mean_var(xr, t);
    float m = mv.x, s = sqrt(mv.y + 1e-5f);
    for (int i = 0; i < t; ++i)
        out[(size_t)r * t + i] = (xr[i] - m) / s;
    mean[r] = m;
    std[r] = s;
    // ### END SOLUTION
}

// One work-item per element (i, row): out = y * std + shift * mean. The backward pass of
// denormalising is the same kernel with shift = 0 (dy = dout * std).
kernel void revin_denorm(global const float *y, global const float *mean,
                         global const float *std, global float *out, int rows, int t,
                         int shift)
{
    int i = get_global_id(0), r = get_global_id(1);
    if (i >= t || r >= rows)
        return;
    size_t at = (size_t)r * t + i;
    out[at] = y[at] * std[r] + (shift ? mean[r] : 0.0f);
}

// ---------------------------------------------------------------- frequency patches
// One work-item per output row (channel c, patch l, sample b): the spectrum
// (batch, channels, t) cut into patches of size p with stride s, as CATCH's block layout
// out[b, l, c, :] = [Re X[l s .. l s + p) | Im X[l s .. l s + p)], p bins in a loop.
kernel void freq_patches(global const float2 *spec, global float *out, int batch,
                         int channels, int t, int p, int s, int patches)
{
    int c = get_global_id(0), l = get_global_id(1), b = get_global_id(2);
    if (c >= channels || l >= patches || b >= batch)
        return;
    global const float2 *src = spec + ((size_t)b * channels + c) * t + l * s;
    global float *dst = out + (((size_t)b * patches + l) * channels + c) * 2 * p;
    for (int k = 0; k < p; ++k) {
        dst[k] = src[k].x;
        dst[p + k] = src[k].y;
    }
}

// One work-item per output (k, row): the amplitude |X_k| of each bin of [Re | Im] patch
// rows (rows, 2p) -> (rows, p). The phase-free input of the mask generator's "amplitude"
// deviation (a nnlib option, not CATCH's design).
kernel void patch_amplitude(global const float *z, global float *out, int rows, int p)
{
    int k = get_global_id(0), r = get_global_id(1);
    if (k >= p || r >= rows)
        return;
    size_t o = (size_t)r * 2 * p;
    out[(size_t)r * p + k] = hypot(z[o + k], z[o + p + k]);
}

// One work-item per row (i, j, a): out[a, j, i, :] = x[a, i, j, :], the swap of axes 1 and 2
// of (n0, n1, n2, n3), its n3 values copied in a loop (no index division per value). Its
// adjoint is the same swap with n1, n2 exchanged.
kernel void swap_axes12(global const float *x, global float *out, int n0, int n1, int n2,
                        int n3)
{
    int i = get_global_id(0), j = get_global_id(1), a = get_global_id(2);
    if (i >= n1 || j >= n2 || a >= n0)
        return;
    global const float *src = x + (((size_t)a * n1 + i) * n2 + j) * n3;
    global float *dst = out + (((size_t)a * n2 + j) * n1 + i) * n3;
    for (int d = 0; d < n3; ++d)
        dst[d] = src[d];
}

// ---------------------------------------------------------------- mask generator
// One work-item per entry (d, c, g) of the channel masks (groups, n, n):
//   a = sum_k w[d, k] z[g, c, k] (the patch of channel c), prob = sigmoid(a);
//   Gumbel straight-through: u = sharpen * a + noise (noise = the difference of two Gumbel
//   draws, i.e. logistic; sharpen = 2 for the code's logits +-logit(p), 1 for a true
//   Bernoulli(p); noise = 0 thresholds prob at 0.5), mask = [u >= 0],
//   slope = d soft / d a = sharpen * y (1 - y) with y = sigmoid(u). The diagonal is 1
//   with slope 0.
kernel void mask_sample(global const float *z, global const float *w,
                        global const float *noise, global float *mask, global float *prob,
                        global float *slope, int groups, int n, int width, float sharpen)
{
    int d = get_global_id(0), c = get_global_id(1), g = get_global_id(2);
    if (d >= n || c >= n || g >= groups)
        return;
    float a = dot4(w + (size_t)d * width, z + ((size_t)g * n + c) * width, width);
    size_t at = ((size_t)g * n + c) * n + d;
    float u = sharpen * a + noise[at];
    float y = 1.0f / (1.0f + exp(-u));
    prob[at] = 1.0f / (1.0f + exp(-a));
    mask[at] = c == d || u >= 0.0f ? 1.0f : 0.0f;
    slope[at] = c == d ? 0.0f : sharpen * y * (1.0f - y);
}

// One work-item per four weights (k4, d), k = 4 k4 .. 4 k4 + 3 (fewer past width), and slice
// s of the (g, c) pairs (dimension 2): sum_{g, c} dmask[g, c, d] slope[g, c, d] z[g, c, k]
// over the slice's pairs [s run, (s + 1) run), run = ceil(groups n / slices), in their
// order (four lanes of a float4 side by side, not a split of one sum). One slice adds its
// sums to dw (n, width); more write slice s's to dw + s n width, a (slices, n, width) buffer
// that mask_weight_sum_slices adds up: a GPU then walks the pairs in many short runs side
// by side, not in n width / 4 long ones.
kernel void mask_weight_grad(global const float *z, global const float *slope,
                             global const float *dmask, global float *dw, int groups, int n,
                             int width, int slices)
{
    int k = 4 * get_global_id(0), d = get_global_id(1), s = get_global_id(2);
    if (k >= width || d >= n || s >= slices)
        return;
    int pairs = groups * n, run = (pairs + slices - 1) / slices;
    int p0 = min(pairs, s * run), p1 = min(pairs, p0 + run);
    global float *out = dw + (size_t)s * n * width + (size_t)d * width;
    if (k + 4 <= width) {
        float4 sum = (float4)(0.0f);
        for (int gc = p0; gc < p1; ++gc) {
            size_t at = (size_t)gc * n + d;
            sum += dmask[at] * slope[at] * LOAD4(z + (size_t)gc * width + k);
        }
        STORE4(slices == 1 ? LOAD4(out + k) + sum : sum, out + k);
        return;
    }
    for (; k < width; ++k) {
        float sum = 0.0f;
        for (int gc = p0; gc < p1; ++gc) {
            size_t at = (size_t)gc * n + d;
            sum += dmask[at] * slope[at] * z[(size_t)gc * width + k];
        }
        out[k] = slices == 1 ? out[k] + sum : sum;
    }
}

// One work-item per weight i < count: dw[i] += the slices' sums pw[s, i]
// (mask_weight_grad's, (slices, count)), in slice order: the column sums of pw, as
// dense.cl's dense_backward_bias, here so that CATCH builds no other program for them.
kernel void mask_weight_sum_slices(global const float *pw, global float *dw, int slices,
                                   int count)
{
    int i = get_global_id(0);
    if (i >= count)
        return;
    float sum = 0.0f;
    for (int s = 0; s < slices; ++s)
        sum += pw[(size_t)s * count + i];
    dw[i] += sum;
}

// ---------------------------------------------------------------- layer norm, GELU
// One work-item per row of (rows, c): xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + 1e-5),
// y = gamma * xhat + beta.
kernel void layer_norm_forward(global const float *x, global const float *gamma,
                               global const float *beta, global float *y, global float *xhat,
                               global float *rstd, int rows, int c)
{
    int r = get_global_id(0);
    if (r >= rows)
        return;
    global const float *xr = x + (size_t)r * c;
    float2 mv = mean_var(xr, c);
    float m = mv.x, rs = rsqrt(mv.y + 1e-5f);
    for (int i = 0; i < c; ++i) {
        float h = (xr[i] - m) * rs;
        xhat[(size_t)r * c + i] = h;
        y[(size_t)r * c + i] = gamma[i] * h + beta[i];
    }
    rstd[r] = rs;
}

// One work-item per row of (rows, c): the residual sum s = x + r into sum, then
// layer_norm_forward of s (the sum and the next layer norm in one pass).
kernel void add_layer_norm_forward(global const float *x, global const float *r,
                                   global const float *gamma, global const float *beta,
                                   global float *sum, global float *y, global float *xhat,
                                   global float *rstd, int rows, int c)
{
    int row = get_global_id(0);
    if (row >= rows)
        return;
    size_t o = (size_t)row * c;
    for (int i = 0; i < c; ++i)
        sum[o + i] = x[o + i] + r[o + i];
    float2 mv = mean_var(sum + o, c);
    float m = mv.x, rs = rsqrt(mv.y + 1e-5f);
    for (int i = 0; i < c; ++i) {
        float h = (sum[o + i] - m) * rs;
        xhat[o + i] = h;
        y[o + i] = gamma[i] * h + beta[i];
    }
    rstd[row] = rs;
}

// The input gradient of row r: with gy = dy * gamma,
// dx = rstd (gy - mean(gy) - xhat mean(gy xhat)), added to dx when accumulate != 0 (a
// residual branch's sum).
inline void layer_norm_input_grad(global const float *dy, global const float *gamma,
                                  global const float *xhat, global const float *rstd,
                                  global float *dx, int r, int c, int accumulate)
{
    size_t o = (size_t)r * c;
    float4 s1 = (float4)(0.0f), s2 = (float4)(0.0f);  // four lanes of each sum
    int i = 0;
    for (; i + 4 <= c; i += 4) {
        float4 gy = LOAD4(dy + o + i) * LOAD4(gamma + i);
        s1 += gy;
        s2 += gy * LOAD4(xhat + o + i);
    }
    float m1 = (s1.x + s1.y) + (s1.z + s1.w), m2 = (s2.x + s2.y) + (s2.z + s2.w);
    for (; i < c; ++i) {
        float gy = dy[o + i] * gamma[i];
        m1 += gy;
        m2 += gy * xhat[o + i];
    }
    m1 /= c;
    m2 /= c;
    for (int i = 0; i < c; ++i)
        dx[o + i] = (accumulate ? dx[o + i] : 0.0f)
                    + rstd[r] * (dy[o + i] * gamma[i] - m1 - xhat[o + i] * m2);
}

// The parameters' gradients of features i .. i + 3 (fewer past c) over rows r0 .. r1 - 1:
// sum_r dy xhat into pg, sum_r dy into pb (added to what they hold when add != 0), each
// feature's sums in row order (the four side by side in a float4).
inline void layer_norm_params_grad(global const float *dy, global const float *xhat,
                                   global float *pg, global float *pb, int i, int r0, int r1,
                                   int c, int add)
{
    if (i + 4 <= c) {
        float4 sg = (float4)(0.0f), sb = (float4)(0.0f);
        for (int r = r0; r < r1; ++r) {
            float4 d = LOAD4(dy + (size_t)r * c + i);
            sg += d * LOAD4(xhat + (size_t)r * c + i);
            sb += d;
        }
        STORE4(add ? LOAD4(pg + i) + sg : sg, pg + i);
        STORE4(add ? LOAD4(pb + i) + sb : sb, pb + i);
        return;
    }
    for (; i < c; ++i) {
        float sg = 0.0f, sb = 0.0f;
        for (int r = r0; r < r1; ++r) {
            sg += dy[(size_t)r * c + i] * xhat[(size_t)r * c + i];
            sb += dy[(size_t)r * c + i];
        }
        pg[i] = add ? pg[i] + sg : sg;
        pb[i] = add ? pb[i] + sb : sb;
    }
}

// Layer norm's backward pass in one launch of rows + slices * ceil(c / 4) work-items:
// work-item r < rows writes row r of dx (layer_norm_input_grad); each of the next ones
// sums four features over one slice of the rows (slice s: rows s * ceil(rows / slices) on,
// as many or fewer). With one slice they add to dgamma and dbeta (pg, pb); with more, they
// write slice s's sums to row s of pg and pb, (slices, c), which layer_norm_sum_slices adds
// up: a GPU then walks the rows in many short runs side by side, not in c / 4 long ones.
kernel void layer_norm_backward(global const float *dy, global const float *gamma,
                                global const float *xhat, global const float *rstd,
                                global float *dx, global float *pg, global float *pb,
                                int rows, int c, int accumulate, int slices)
{
    int id = get_global_id(0), quads = (c + 3) / 4;
    if (id < rows) {
        layer_norm_input_grad(dy, gamma, xhat, rstd, dx, id, c, accumulate);
        return;
    }
    int s = (id - rows) / quads, q = (id - rows) % quads;
    if (s >= slices)
        return;
    int run = (rows + slices - 1) / slices, r0 = min(rows, s * run), r1 = min(rows, r0 + run);
    layer_norm_params_grad(dy, xhat, pg + (size_t)s * c, pb + (size_t)s * c, 4 * q, r0, r1, c,
                           slices == 1);
}

// One work-item per feature i < c: dgamma[i] and dbeta[i] += the slices' sums pg[s, i] and
// pb[s, i] (layer_norm_backward's, (slices, c)), in slice order.
kernel void layer_norm_sum_slices(global const float *pg, global const float *pb,
                                  global float *dgamma, global float *dbeta, int slices, int c)
{
    int i = get_global_id(0);
    if (i >= c)
        return;
    float sg = 0.0f, sb = 0.0f;
    for (int s = 0; s < slices; ++s) {
        sg += pg[(size_t)s * c + i];
        sb += pb[(size_t)s * c + i];
    }
    dgamma[i] += sg;
    dbeta[i] += sb;
}

// One work-item per VW elements (a vector; lanes past count are left alone): the exact GELU
// y = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 and its derivative slope = Phi(x) + x phi(x),
// kept for the backward pass (erf and phi share one exp). erf(v) by Abramowitz & Stegun
// 7.1.26 (|error| < 1.5e-7, float32's own rounding): PoCL's built-in erf is not vectorised
// and is much slower, and PoCL 3.0 does not vectorise scalar work-items at all (python -m
// nnlib.bench.catch --compare profiles the step).
// erf_with(v, e) takes e = exp(-v^2) from its caller, who needs it too.
inline floatv erf_with(floatv v, floatv e)
{
    floatv a = fabs(v), t = 1.0f / (1.0f + 0.3275911f * a);
    floatv p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f
               + t * (-1.453152027f + t * 1.061405429f))));
    return copysign(1.0f - p * e, v);
}

kernel void gelu_forward(global const float *x, global float *y, global float *slope,
                         int count)
{
    int first = get_global_id(0) * VW;
    if (first >= count)
        return;
    floatv v = load_v(x, first, count), u = v * M_SQRT1_2_F;
    floatv e = exp(-u * u);  // exp(-x^2 / 2)
    floatv erf_u = erf_with(u, e), pdf = e * (0.5f * M_2_SQRTPI_F * M_SQRT1_2_F);
    store_v(0.5f * v * (1.0f + erf_u), y, first, count);
    store_v(0.5f * (1.0f + erf_u) + v * pdf, slope, first, count);
}

// One work-item per VW elements: dx = dy * slope (the derivative gelu_forward kept).
kernel void gelu_backward(global const float *slope, global const float *dy, global float *dx,
                          int count)
{
    int first = get_global_id(0) * VW;
    if (first < count)
        store_v(load_v(dy, first, count) * load_v(slope, first, count), dx, first, count);
}

// ---------------------------------------------------------------- reconstruction
// One work-item per element (i, row) of out (rows, na + nb): out = [a | b] per row.
kernel void join_rows(global const float *a, global const float *b, global float *out,
                      int rows, int na, int nb)
{
    int i = get_global_id(0), r = get_global_id(1);
    if (i >= na + nb || r >= rows)
        return;
    out[(size_t)r * (na + nb) + i] = i < na ? a[(size_t)r * na + i]
                                            : b[(size_t)r * nb + i - na];
}

// One work-item per element (k, row) of (rows, t): z = re + i im, the spectrum of the two
// flatten heads as complex numbers for the inverse FFT.
kernel void join_complex(global const float *re, global const float *im, global float2 *z,
                         int rows, int t)
{
    int k = get_global_id(0), r = get_global_id(1);
    if (k >= t || r >= rows)
        return;
    size_t at = (size_t)r * t + k;
    z[at] = (float2)(re[at], im[at]);
}

// One work-item per frequency (k, row) of complex rows (rows, t): the modulus e = |z - y|
// into err, and the gradient in (dL/dRe + i dL/dIm, the inverse FFT's backward pass) plus
// w (z - y) / e (0 where e == 0), the gradient of w * sum |z - y|, split into its real
// parts dre and imaginary parts dim (the two flatten heads' gradients).
kernel void freq_mae(global const float2 *z, global const float2 *y, global const float2 *in,
                     global float *err, global float *dre, global float *dim, int rows, int t,
                     float w)
{
    int k = get_global_id(0), r = get_global_id(1);
    if (k >= t || r >= rows)
        return;
    size_t at = (size_t)r * t + k;
    float2 d = z[at] - y[at], g = in[at];
    float e = sqrt(d.x * d.x + d.y * d.y);  // hypot is a slow library call on PoCL
    err[at] = e;
    if (e > 0.0f)
        g += w * d / e;
    dre[at] = g.x;
    dim[at] = g.y;
}

// ---------------------------------------------------------------- scoring
// One work-item per sample (k, j, row): the sub-window j (length p, stride 1) of the residual
// r = x - xhat of each row (rows, t), as complex numbers for the FFT: out[row, j, k].
kernel void residual_windows(global const float *x, global const float *xhat,
                             global float2 *out, int rows, int t, int p)
{
    int k = get_global_id(0), j = get_global_id(1), r = get_global_id(2);
    int count = t - p + 1;
    if (k >= p || j >= count || r >= rows)
        return;
    size_t at = (size_t)r * t + j + k;
    out[((size_t)r * count + j) * p + k] = (float2)(x[at] - xhat[at], 0.0f);
}

// One work-item per time step (i, b) of windows (batch, channels, t), sub-window spectra
// spec (batch, channels, t - p + 1, p):
//   time = mean_c (x - xhat)^2,
//   freq = mean_c of the mean over the sub-windows j <= i < j + p of mean_k |spec[b, c, j, k]|,
//   score = time + lam * freq (CATCH's per-step anomaly score, inference stride 1).
kernel void step_scores(global const float *x, global const float *xhat,
                        global const float2 *spec, global float *score, int batch,
                        int channels, int t, int p, float lam)
{
    int i = get_global_id(0), b = get_global_id(1);
    if (i >= t || b >= batch)
        return;
    int count = t - p + 1, lo = max(0, i - p + 1), hi = min(i, count - 1);
    float time = 0.0f, freq = 0.0f;
    for (int c = 0; c < channels; ++c) {
        size_t row = (size_t)b * channels + c;
        float d = x[row * t + i] - xhat[row * t + i];
        time += d * d;
        float f = 0.0f;
        for (int j = lo; j <= hi; ++j)
            for (int k = 0; k < p; ++k)
                f += length(spec[(row * count + j) * p + k]);
        freq += f / ((hi - lo + 1) * p);
    }
    score[(size_t)b * t + i] = (time + lam * freq) / channels;
}
