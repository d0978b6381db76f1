// 1-D convolution over multivariate sequences, real (float) and complex (float2).
// x (batch, variables, length); weights w (groups, filters, window), groups = variables
// (independent filters per variable) or 1 (shared); bias (groups, filters).
// Rows of the group g are bv = g, g + variables, ... (groups > 1) or all rows (groups == 1).
// The output of row bv = b * variables + v, filter f, position t is stored at
// bv * filters * out_len + f * sf + t * st: sf = out_len, st = 1 for the "channels" layout
// (batch, variables, filters, out_len), sf = 1, st = filters for "tokens" (..., out_len, filters).
//   z[bv, f, t] = bias[g, f] + sum_{k < window} w[g, f, k] x[bv, t * step + k],
// with g = v for independent filters, g = 0 for shared ones.
// Every gradient element is computed by one work-item (no atomics, nothing overwritten).
// requires: activation.cl
// requires: complex.cl

#define GROUP(v) (groups == 1 ? 0 : (v))
#define OUT(bv, f, t) ((size_t)(bv) * filters * out_len + (size_t)(f) * sf + (size_t)(t) * st)

// The output positions t whose window covers input i: t_lo <= t <= t_hi (empty if t_lo > t_hi).
inline int first_t(int i, int window, int step)
{
    return i >= window ? (i - window) / step + 1 : 0;
}
inline int last_t(int i, int step, int out_len) { return min(i / step, out_len - 1); }

// ---------------------------------------------------------------- real
// One work-item per output (t, f, bv): y = act(z), act as in activation.cl.
kernel void conv1d_forward(global const float *x, global const float *w,
                           global const float *bias, global float *y, int rows, int variables,
                           int length, int window, int step, int filters, int out_len,
                           int groups, int sf, int st, int act)
{
    int t = get_global_id(0), f = get_global_id(1), bv = get_global_id(2);
    if (t >= out_len || f >= filters || bv >= rows)
        return;
    int gf = GROUP(bv % variables) * filters + f;
    global const float *xr = x + (size_t)bv * length + (size_t)t * step;
    global const float *wr = w + (size_t)gf * window;
    float sum = bias[gf];
    for (int k = 0; k < window; ++k)
        sum += wr[k] * xr[k];
    y[OUT(bv, f, t)] = activate(sum, act);
}

// One work-item per input element (i, bv): dx = sum_f sum_t w[g, f, i - t step] dz[bv, f, t]
// over the positions t whose window covers i.
kernel void conv1d_backward_input(global const float *dz, global const float *w,
                                  global float *dx, int rows, int variables, int length,
                                  int window, int step, int filters, int out_len, int groups,
                                  int sf, int st)
{
    int i = get_global_id(0), bv = get_global_id(1);
    if (i >= length || bv >= rows)
        return;
    int t_lo = first_t(i, window, step), t_hi = last_t(i, step, out_len);
    global const float *wg = w + (size_t)GROUP(bv % variables) * filters * window;
    float sum = 0.0f;
    for (int f = 0; f < filters; ++f)
        for (int t = t_lo; t <= t_hi; ++t)
            sum += wg[f * window + i - t * step] * dz[OUT(bv, f, t)];
    dx[(size_t)bv * length + i] = sum;
}

// One work-item per weight (k, f, g), k == window standing for the bias:
// dw[g, f, k] += sum over the batch, the group's variables and t of dz[bv, f, t] x[bv, t step + k];
// db[g, f] += the same sum with x replaced by 1.
kernel void conv1d_backward_weight(global const float *dz, global const float *x,
                                   global float *dw, global float *db, int rows, int variables,
                                   int length, int window, int step, int filters, int out_len,
                                   int groups, int sf, int st)
{
    int k = get_global_id(0), f = get_global_id(1), g = get_global_id(2);
    if (k > window || f >= filters || g >= groups)
        return;
    float sum = 0.0f;
    for (int bv = groups > 1 ? g : 0; bv < rows; bv += groups > 1 ? variables : 1) {
        global const float *xr = x + (size_t)bv * length + min(k, window - 1);
        for (int t = 0; t < out_len; ++t)
            sum += dz[OUT(bv, f, t)] * (k < window ? xr[(size_t)t * step] : 1.0f);
    }
    if (k < window)
        dw[((size_t)g * filters + f) * window + k] += sum;
    else
        db[g * filters + f] += sum;
}

// ---------------------------------------------------------------- complex
// The same three products on float2. The backward ones use conj(w) and conj(x): for a real
// loss, G_x = conj(w) G_z and G_w = sum conj(x) G_z (see complex.cl). Activations are
// separate elementwise kernels (below), so these write the pre-activation z.

// One work-item per output (t, f, bv): z = bias + sum_k w x.
kernel void cconv1d_forward(global const float2 *x, global const float2 *w,
                            global const float2 *bias, global float2 *z, int rows,
                            int variables, int length, int window, int step, int filters,
                            int out_len, int groups, int sf, int st)
{
    int t = get_global_id(0), f = get_global_id(1), bv = get_global_id(2);
    if (t >= out_len || f >= filters || bv >= rows)
        return;
    int gf = GROUP(bv % variables) * filters + f;
    global const float2 *xr = x + (size_t)bv * length + (size_t)t * step;
    global const float2 *wr = w + (size_t)gf * window;
    float2 sum = bias[gf];
    for (int k = 0; k < window; ++k)
        sum += cmul(wr[k], xr[k]);
    z[OUT(bv, f, t)] = sum;
}

// The register-blocked forward for step 1 (the dense layer's lessons on float2): one
// work-item per (block of CV consecutive positions t, block of CF filters, row bv), with CF
// pairs of CV-float vectors of accumulators, each holding CV / 2 outputs as (re, im) pairs
// the way they lie in memory. Each window step k loads the 2 CV floats x[t + k .. t + k + CV)
// once as two vectors X and forms i X (neighbours swapped, one sign flipped), then adds
// Re w[f, k] X + Im w[f, k] i X for each of the CF weights: 4 CF vector multiply-adds per
// step, no shuffles between the lanes. Positions past out_len are computed from clamped
// loads and never stored. Vectors are loaded and stored one float at a time (floatv.h's
// LOAD_BY_HAND), which compilers turn into vector accesses, where some call vloadN instead
// of inlining it. CV (4, 8 or 16), CF and, for the gradients' kernels, VLOAD (1: vloadN /
// vstoreN, 0: by hand) come from nnlib/layers/conv.py.
#ifndef CV
#define CV 8
#endif
#ifndef CF
#define CF 4
#endif
#ifndef VLOAD
#define VLOAD 1
#endif
#define VW CV
#include "floatv.h"
typedef floatv cvec;
#if VLOAD
#define CV_LOAD(p) vloadv(0, p)
#define CV_STORE(x, p) vstorev(x, 0, p)
#else
#define CV_LOAD(p) LOAD_BY_HAND(p)
#define CV_STORE(x, p) STORE_BY_HAND(x, p)
#endif
// the CV complex numbers at p (2 CV floats), real and imaginary parts apart
#define CV_EVEN_ODD(p, re, im) { cvec a_ = CV_LOAD(p), b_ = CV_LOAD((p) + CV);             \
                                  re = (cvec)(a_.even, b_.even);                          \
                                  im = (cvec)(a_.odd, b_.odd); }
// i times each complex number of v, CV / 2 of them as (re, im) pairs: (-im, re, -im, re, ..)
#define ALT4 ((float4)(-1.0f, 1.0f, -1.0f, 1.0f))
#if CV == 16
#define CV_MUL_I(v) ((v).s1032547698badcfe * (float16)(ALT4, ALT4, ALT4, ALT4))
#elif CV == 8
#define CV_MUL_I(v) ((v).s10325476 * (float8)(ALT4, ALT4))
#else
#define CV_MUL_I(v) ((v).s1032 * ALT4)
#endif

kernel void cconv1d_forward_blocked(global const float2 *x, global const float2 *w,
                                    global const float2 *bias, global float2 *z, int rows,
                                    int variables, int length, int window, int filters,
                                    int out_len, int groups, int sf, int st)
{
    int t0 = get_global_id(0) * CV, f0 = get_global_id(1) * CF, bv = get_global_id(2);
    if (t0 >= out_len || f0 >= filters || bv >= rows)
        return;
    int g = GROUP(bv % variables);
    global const float2 *wg = w + (size_t)g * filters * window;
    // the last block starts early enough to stay inside the row (positions before t0 are
    // computed again but not stored); a row with out_len < CV uses clamped loads instead
    int start = min(t0, max(length - window - CV + 1, 0));
    global const float *xr = (global const float *)(x + (size_t)bv * length + start);
    cvec lo[CF], hi[CF];
    int fs[CF];
    #pragma unroll
    for (int j = 0; j < CF; ++j) {
        fs[j] = min(f0 + j, filters - 1) * window;
        lo[j] = (cvec)(0.0f);
        hi[j] = (cvec)(0.0f);
    }
    bool whole = start + CV + window - 1 <= length;
    for (int k = 0; k < window; ++k) {
        cvec x0, x1;
        if (whole) {
            x0 = LOAD_BY_HAND(xr + 2 * k);
            x1 = LOAD_BY_HAND(xr + 2 * k + CV);
        } else {  // a row shorter than CV + window - 1: element by element
            float v[2 * CV];
            for (int c = 0; c < CV; ++c) {
                int i = min(start + c + k, length - 1) - start;
                v[2 * c] = xr[2 * i];
                v[2 * c + 1] = xr[2 * i + 1];
            }
            x0 = LOAD_BY_HAND(v);
            x1 = LOAD_BY_HAND(v + CV);
        }
        cvec y0 = CV_MUL_I(x0), y1 = CV_MUL_I(x1);
        #pragma unroll
        for (int j = 0; j < CF; ++j) {
            float2 wk = wg[fs[j] + k];
            lo[j] += wk.x * x0;
            lo[j] += wk.y * y0;
            hi[j] += wk.x * x1;
            hi[j] += wk.y * y1;
        }
    }
    #pragma unroll
    for (int j = 0; j < CF && f0 + j < filters; ++j) {
        float a[2 * CV];
        STORE_BY_HAND(lo[j], a);
        STORE_BY_HAND(hi[j], a + CV);
        float2 add = bias[g * filters + f0 + j];
        for (int c = 0; c < CV; ++c) {
            int t = start + c;
            if (t >= t0 && t < out_len)
                z[OUT(bv, f0 + j, t)] = (float2)(a[2 * c], a[2 * c + 1]) + add;
        }
    }
}

// One work-item per input element (i, bv): G_x = sum_f sum_t conj(w[g, f, i - t step]) G_z.
kernel void cconv1d_backward_input(global const float2 *dz, global const float2 *w,
                                   global float2 *dx, int rows, int variables, int length,
                                   int window, int step, int filters, int out_len, int groups,
                                   int sf, int st)
{
    int i = get_global_id(0), bv = get_global_id(1);
    if (i >= length || bv >= rows)
        return;
    int t_lo = first_t(i, window, step), t_hi = last_t(i, step, out_len);
    global const float2 *wg = w + (size_t)GROUP(bv % variables) * filters * window;
    float2 sum = (float2)(0.0f, 0.0f);
    for (int f = 0; f < filters; ++f)
        for (int t = t_lo; t <= t_hi; ++t)
            sum += cmulconj(wg[f * window + i - t * step], dz[OUT(bv, f, t)]);
    dx[(size_t)bv * length + i] = sum;
}

// One work-item per weight (k, f, g), k == window for the bias:
// G_w[g, f, k] += sum conj(x[bv, t step + k]) G_z[bv, f, t]; G_b[g, f] += sum G_z.
kernel void cconv1d_backward_weight(global const float2 *dz, global const float2 *x,
                                    global float2 *dw, global float2 *db, int rows,
                                    int variables, int length, int window, int step,
                                    int filters, int out_len, int groups, int sf, int st)
{
    int k = get_global_id(0), f = get_global_id(1), g = get_global_id(2);
    if (k > window || f >= filters || g >= groups)
        return;
    float2 sum = (float2)(0.0f, 0.0f);
    for (int bv = groups > 1 ? g : 0; bv < rows; bv += groups > 1 ? variables : 1) {
        global const float2 *xr = x + (size_t)bv * length + min(k, window - 1);
        for (int t = 0; t < out_len; ++t) {
            float2 gz = dz[OUT(bv, f, t)];
            sum += k < window ? cmulconj(xr[(size_t)t * step], gz) : gz;
        }
    }
    if (k < window)
        dw[((size_t)g * filters + f) * window + k] += sum;
    else
        db[g * filters + f] += sum;
}

// The register-blocked input gradient for step 1. G_z is first copied by cconv1d_pad_grad into
// rows of P = length + window - 1 values per (row bv, filter f), in the channels order with
// window - 1 zeros on both sides: gp[bv, f, j] = G_z[bv, f, j - (window - 1)] (0 outside).
// Then G_x[bv, i] = sum_f sum_k conj(w[g, f, window - 1 - k]) gp[bv, f, i + k], a correlation
// like the forward one, summed over the filters: one work-item per (block of CV consecutive
// inputs i, row bv), two vector loads of gp's CV complex values per (f, k) (INPUT_TAP), CF
// filters at a time in CF separate pairs of accumulators (independent multiply-add chains).
// One work-item per (j, bv), for every filter.
kernel void cconv1d_pad_grad(global const float2 *dz, global float2 *gp, int rows, int length,
                             int window, int filters, int out_len, int sf, int st)
{
    int j = get_global_id(0), bv = get_global_id(1);
    int p = length + window - 1, t = j - (window - 1);
    if (j >= p || bv >= rows)
        return;
    global float2 *out = gp + (size_t)bv * filters * p + j;
    if (t < 0 || t >= out_len) {
        for (int f = 0; f < filters; ++f)
            out[(size_t)f * p] = (float2)(0.0f, 0.0f);
        return;
    }
    for (int f = 0; f < filters; ++f)
        out[(size_t)f * p] = dz[OUT(bv, f, t)];
}

// lo, hi += conj(wk) G for the CV gradients G at row pointer gr, offset o, as the forward
// adds w X: Re wk G - Im wk i G, the CV complex numbers as two vectors of (re, im) pairs the
// way they lie in memory (lo the first CV / 2, hi the rest): no shuffles between the lanes,
// which AVX2's 256-bit halves make costly. A vector load each, or element by element with
// clamped indices (short rows).
#define INPUT_TAP(lo, hi, wk, gr, o)                                                     \
    {                                                                                    \
        cvec g0, g1;                                                                     \
        LOAD_PAIRS(gr, o, g0, g1);                                                       \
        lo += (wk).x * g0 - (wk).y * CV_MUL_I(g0);                                       \
        hi += (wk).x * g1 - (wk).y * CV_MUL_I(g1);                                       \
    }

kernel void cconv1d_backward_input_blocked(global const float2 *gp, global const float2 *w,
                                           global float2 *dx, int rows, int variables,
                                           int length, int window, int filters, int groups)
{
    int i0 = get_global_id(0) * CV, bv = get_global_id(1);
    if (i0 >= length || bv >= rows)
        return;
    int p = length + window - 1;
    global const float2 *wg = w + (size_t)GROUP(bv % variables) * filters * window;
    // the last block starts early enough to stay inside the row, as in the forward
    int start = min(i0, max(length - CV, 0));
    bool whole = start + CV <= length;
    global const float *gb = (global const float *)(gp + (size_t)bv * filters * p + start);
    cvec lo[CF], hi[CF];
    #pragma unroll
    for (int j = 0; j < CF; ++j) {
        lo[j] = (cvec)(0.0f);
        hi[j] = (cvec)(0.0f);
    }
#define LOAD_PAIRS(gr, o, g0, g1)                                                        \
    if (whole) {                                                                         \
        g0 = CV_LOAD((gr) + 2 * (o));                                                    \
        g1 = CV_LOAD((gr) + 2 * (o) + CV);                                               \
    } else {                                                                             \
        float v_[2 * CV];                                                                \
        for (int c = 0; c < CV; ++c) {                                                   \
            int e = min(c + (o), p - 1 - start);                                         \
            v_[2 * c] = (gr)[2 * e];                                                     \
            v_[2 * c + 1] = (gr)[2 * e + 1];                                             \
        }                                                                                \
        g0 = CV_LOAD(v_);                                                                \
        g1 = CV_LOAD(v_ + CV);                                                           \
    }
    int f = 0;
    for (; f + CF <= filters; f += CF)
        for (int k = 0; k < window; ++k)
            #pragma unroll
            for (int j = 0; j < CF; ++j) {
                global const float *gr = gb + (size_t)2 * (f + j) * p;
                INPUT_TAP(lo[j], hi[j], wg[(f + j) * window + window - 1 - k], gr, k)
            }
    for (; f < filters; ++f) {  // the filters left over, in the first accumulators
        global const float *gr = gb + (size_t)2 * f * p;
        for (int k = 0; k < window; ++k)
            INPUT_TAP(lo[0], hi[0], wg[f * window + window - 1 - k], gr, k)
    }
#undef LOAD_PAIRS
    #pragma unroll
    for (int j = 1; j < CF; ++j) {
        lo[0] += lo[j];
        hi[0] += hi[j];
    }
    float a[2 * CV];
    CV_STORE(lo[0], a);
    CV_STORE(hi[0], a + CV);
    for (int c = 0; c < CV; ++c) {
        int i = start + c;
        if (i >= i0 && i < length)
            dx[(size_t)bv * length + i] = (float2)(a[2 * c], a[2 * c + 1]);
    }
}

// The register-blocked weight gradient, any step: one work-item per (block of CV consecutive
// taps k, block of CF filters, group g and chunk c of the group's rows), summing
//   conj(x[bv, t step + k]) G_z[bv, f, t] over its rows and all t: per t, one vector load of
// the CV inputs x[t step + k ..] and CF scalar gradients, 4 CF vector multiply-adds. The
// work-items of the first tap block also sum G_z (the bias gradient). Each chunk writes its
// sums to part[c, g, f, 0 .. window] (the bias at index window); cconv1d_weight_reduce adds
// the chunks to dw and db. The last tap block starts early enough to stay inside the window
// (taps before k0 computed again but not stored); a window shorter than CV uses clamped loads.
kernel void cconv1d_backward_weight_blocked(global const float2 *dz, global const float2 *x,
                                            global float2 *part, int rows, int variables,
                                            int length, int window, int step, int filters,
                                            int out_len, int groups, int sf, int st,
                                            int chunks)
{
    int k0 = get_global_id(0) * CV, f0 = get_global_id(1) * CF, gc = get_global_id(2);
    int g = gc / chunks, c = gc % chunks;
    if (k0 >= window || f0 >= filters || g >= groups)
        return;
    // the group's rows are bv = first + m * stride, m < count; this chunk takes m in [lo, hi)
    int first = groups > 1 ? g : 0, stride = groups > 1 ? variables : 1;
    int count = groups > 1 ? rows / variables : rows;
    int lo = (int)((long)c * count / chunks), hi = (int)((long)(c + 1) * count / chunks);
    int start = min(k0, max(window - CV, 0));
    bool whole = start + CV <= window;
    cvec re[CF], im[CF];
    float2 bsum[CF];
    int fs[CF];
    #pragma unroll
    for (int j = 0; j < CF; ++j) {
        fs[j] = min(f0 + j, filters - 1);
        re[j] = (cvec)(0.0f);
        im[j] = (cvec)(0.0f);
        bsum[j] = (float2)(0.0f, 0.0f);
    }
    for (int m = lo; m < hi; ++m) {
        int bv = first + m * stride;
        global const float *xr = (global const float *)(x + (size_t)bv * length + start);
        for (int t = 0; t < out_len; ++t) {
            cvec xre, xim;
            if (whole) {
                CV_EVEN_ODD(xr + (size_t)2 * t * step, xre, xim);
            } else {
                float re_[CV], im_[CV];
                for (int e = 0; e < CV; ++e) {
                    int i = min(t * step + e, length - 1 - start);
                    re_[e] = xr[2 * i];
                    im_[e] = xr[2 * i + 1];
                }
                xre = CV_LOAD(re_);
                xim = CV_LOAD(im_);
            }
            #pragma unroll
            for (int j = 0; j < CF; ++j) {
                float2 gz = dz[OUT(bv, fs[j], t)];
                re[j] += xre * gz.x + xim * gz.y;
                im[j] += xre * gz.y - xim * gz.x;
                bsum[j] += gz;
            }
        }
    }
    #pragma unroll
    for (int j = 0; j < CF && f0 + j < filters; ++j) {
        global float2 *out = part + (((size_t)c * groups + g) * filters + f0 + j) * (window + 1);
        float a[CV], b[CV];
        CV_STORE(re[j], a);
        CV_STORE(im[j], b);
        for (int e = 0; e < CV; ++e) {
            int k = start + e;
            if (k >= k0 && k < window)
                out[k] = (float2)(a[e], b[e]);
        }
        if (k0 == 0)
            out[window] = bsum[j];
    }
}

// One work-item per weight (k, f, g), k == window for the bias: dw (or db) += the sum of the
// chunks' partial sums.
kernel void cconv1d_weight_reduce(global const float2 *part, global float2 *dw,
                                  global float2 *db, int window, int filters, int groups,
                                  int chunks)
{
    int k = get_global_id(0), f = get_global_id(1), g = get_global_id(2);
    if (k > window || f >= filters || g >= groups)
        return;
    size_t size = (size_t)groups * filters * (window + 1);
    global const float2 *p = part + ((size_t)g * filters + f) * (window + 1) + k;
    float2 sum = (float2)(0.0f, 0.0f);
    for (int c = 0; c < chunks; ++c)
        sum += p[c * size];
    if (k < window)
        dw[((size_t)g * filters + f) * window + k] += sum;
    else
        db[g * filters + f] += sum;
}

// ---------------------------------------------------------------- complex, lanes design
// For devices that vectorise across work-items (Intel's CPU runtime, GPUs; the dense layer's
// lanes design, dense.cl): work-groups of (lanes, 1, 1) work-items, lane l of a work-group at
// position start + l of one row, so that the lanes' loads of x (or of the padded gradient)
// are one contiguous vector, while the weights (or gradients) they read are the same in every
// lane. Each work-item keeps CF complex scalar accumulators. The last work-group of a row
// starts early enough to stay inside it (positions before its own computed again, not
// stored); a row shorter than the work-group clamps its lanes' positions, in a second copy of
// the loop (the clamped addresses are loaded lane by lane, so they stay out of the first).

// The first position of this work-group's lanes: its own, or n - lanes for the last one
// of a row of n positions (0 if the row is shorter than the work-group).
inline size_t lanes_start(int n)
{
    size_t own = get_group_id(0) * get_local_size(0);
    return min(own, (size_t)max(n - (int)get_local_size(0), 0));
}

// acc + a b as four multiply-adds into acc (each a * b + c, which the compiler contracts), where
// acc + cmul(a, b) takes two products, a multiply-add and an add
inline float2 cmac(float2 acc, float2 a, float2 b)
{
    acc.x += a.x * b.x;
    acc.x -= a.y * b.y;
    acc.y += a.x * b.y;
    acc.y += a.y * b.x;
    return acc;
}

// acc[j] += sum_k w[fs[j] + k] xr[k]: the forward's sums of one position.
inline void forward_sums(float2 *acc, global const float2 *xr, global const float2 *wg,
                         const int *fs, int window)
{
    for (int k = 0; k < window; ++k) {
        float2 xk = xr[k];
        #pragma unroll
        for (int j = 0; j < CF; ++j)
            acc[j] = cmac(acc[j], wg[fs[j] + k], xk);
    }
}

// One work-item per (position t, block of CF filters, row bv), step 1: z = bias + sum_k w x.
kernel void cconv1d_forward_lanes(global const float2 *x, global const float2 *w,
                                  global const float2 *bias, global float2 *z, int rows,
                                  int variables, int length, int window, int filters,
                                  int out_len, int groups, int sf, int st)
{
    int f0 = get_global_id(1) * CF, bv = get_global_id(2);
    if (f0 >= filters || bv >= rows)
        return;
    size_t lane = get_local_id(0), t = lanes_start(out_len) + lane;
    int g = GROUP(bv % variables);
    global const float2 *xr = x + (size_t)bv * length;
    global const float2 *wg = w + (size_t)g * filters * window;
    float2 acc[CF];
    int fs[CF];
    #pragma unroll
    for (int j = 0; j < CF; ++j) {
        fs[j] = min(f0 + j, filters - 1) * window;
        acc[j] = (float2)(0.0f, 0.0f);
    }
    if (out_len >= get_local_size(0))
        forward_sums(acc, xr + t, wg, fs, window);
    else
        forward_sums(acc, xr + min(t, (size_t)out_len - 1), wg, fs, window);
    if (t < get_global_id(0) - lane || t >= out_len)
        return;
    #pragma unroll
    for (int j = 0; j < CF && f0 + j < filters; ++j)
        z[OUT(bv, f0 + j, t)] = acc[j] + bias[g * filters + f0 + j];
}

// acc[j] (acc[0] for the filters left over a multiple of CF) += sum_f sum_k
// conj(w[f, window - 1 - k]) gr[f p + k]: the input gradient's sums of one input.
inline void input_sums(float2 *acc, global const float2 *gr, global const float2 *wg,
                       int window, int filters, size_t p)
{
    int f = 0;
    for (; f + CF <= filters; f += CF)
        for (int k = 0; k < window; ++k)
            #pragma unroll
            for (int j = 0; j < CF; ++j)
                acc[j] += cmulconj(wg[(f + j) * window + window - 1 - k], gr[(f + j) * p + k]);
    for (; f < filters; ++f)
        for (int k = 0; k < window; ++k)
            acc[0] += cmulconj(wg[f * window + window - 1 - k], gr[f * p + k]);
}

// One work-item per (input i, row bv), step 1, from cconv1d_pad_grad's rows gp:
// G_x[bv, i] = sum_f sum_k conj(w[g, f, window - 1 - k]) gp[bv, f, i + k], CF filters at a
// time in CF accumulators (independent multiply-add chains).
kernel void cconv1d_backward_input_lanes(global const float2 *gp, global const float2 *w,
                                         global float2 *dx, int rows, int variables,
                                         int length, int window, int filters, int groups)
{
    int bv = get_global_id(1);
    if (bv >= rows)
        return;
    size_t lane = get_local_id(0), i = lanes_start(length) + lane;
    size_t p = length + window - 1;
    global const float2 *wg = w + (size_t)GROUP(bv % variables) * filters * window;
    global const float2 *gr = gp + (size_t)bv * filters * p;
    float2 acc[CF];
    #pragma unroll
    for (int j = 0; j < CF; ++j)
        acc[j] = (float2)(0.0f, 0.0f);
    if (length >= get_local_size(0))
        input_sums(acc, gr + i, wg, window, filters, p);
    else
        input_sums(acc, gr + min(i, (size_t)length - 1), wg, window, filters, p);
    #pragma unroll
    for (int j = 1; j < CF; ++j)
        acc[0] += acc[j];
    if (i >= get_global_id(0) - lane && i < length)
        dx[(size_t)bv * length + i] = acc[0];
}

// acc[j] += sum_t conj(xr[t step]) G_z[bv, fs[j], t], bsum[j] += sum_t G_z[bv, fs[j], t]:
// the weight gradient's sums of one tap over one row.
inline void weight_sums(float2 *acc, float2 *bsum, global const float2 *xr,
                        global const float2 *dz, const int *fs, int bv, int step, int filters,
                        int out_len, int sf, int st)
{
    for (int t = 0; t < out_len; ++t) {
        float2 xt = xr[(size_t)t * step];
        #pragma unroll
        for (int j = 0; j < CF; ++j) {
            float2 gz = dz[OUT(bv, fs[j], t)];
            acc[j] += cmulconj(xt, gz);
            bsum[j] += gz;
        }
    }
}

// One work-item per (tap k, block of CF filters, group g and chunk c of its rows), any step:
// the sums of cconv1d_backward_weight_blocked (same chunks, same part layout), the bias's
// (the sum of G_z) written by the work-items of tap 0.
kernel void cconv1d_backward_weight_lanes(global const float2 *dz, global const float2 *x,
                                          global float2 *part, int rows, int variables,
                                          int length, int window, int step, int filters,
                                          int out_len, int groups, int sf, int st, int chunks)
{
    int f0 = get_global_id(1) * CF, gc = get_global_id(2);
    int g = gc / chunks, c = gc % chunks;
    if (f0 >= filters || g >= groups)
        return;
    size_t lane = get_local_id(0), k = lanes_start(window) + lane;
    int first = groups > 1 ? g : 0, stride = groups > 1 ? variables : 1;
    int count = groups > 1 ? rows / variables : rows;
    int lo = (int)((long)c * count / chunks), hi = (int)((long)(c + 1) * count / chunks);
    float2 acc[CF], bsum[CF];
    int fs[CF];
    #pragma unroll
    for (int j = 0; j < CF; ++j) {
        fs[j] = min(f0 + j, filters - 1);
        acc[j] = bsum[j] = (float2)(0.0f, 0.0f);
    }
    for (int m = lo; m < hi; ++m) {
        int bv = first + m * stride;
        global const float2 *xr = x + (size_t)bv * length;
        if (window >= get_local_size(0))
            weight_sums(acc, bsum, xr + k, dz, fs, bv, step, filters, out_len, sf, st);
        else
            weight_sums(acc, bsum, xr + min(k, (size_t)window - 1), dz, fs, bv, step,
                        filters, out_len, sf, st);
    }
    if (k < get_global_id(0) - lane || k >= window)
        return;
    #pragma unroll
    for (int j = 0; j < CF && f0 + j < filters; ++j) {
        global float2 *out = part + (((size_t)c * groups + g) * filters + f0 + j) * (window + 1);
        out[k] = acc[j];
        if (k == 0)
            out[window] = bsum[j];
    }
}

// One work-item per element: y = cact(z), a complex activation of complex.cl.
kernel void complex_activation_forward(global const float2 *z, global float2 *y, int count,
                                       int cact, float modrelu_b)
{
    int i = get_global_id(0);
    if (i < count)
        y[i] = cactivate(z[i], cact, modrelu_b);
}

// One work-item per element: G_z from G_y (conjugate convention).
kernel void complex_activation_backward(global const float2 *z, global const float2 *y,
                                        global const float2 *gy, global float2 *gz, int count,
                                        int cact, float modrelu_b)
{
    int i = get_global_id(0);
    if (i < count)
        gz[i] = cactivate_grad(z[i], y[i], gy[i], cact, modrelu_b);
}
