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
// work-item per (block of CV consecutive positions t, block of CF filters, row bv). Real
// and imaginary parts are kept apart, as CF pairs of CV-wide vectors of accumulators: each
// window step k loads the CV inputs x[t + k .. t + k + CV) once (one vload of 2 CV floats split
// into .even = Re and .odd = Im) and multiplies them by the CF weights w[f, k], 4 CF vector
// multiply-adds per load. Positions past out_len are computed from clamped loads and never
// stored. CV (4, 8 or 16) and CF come from nnlib/layers/conv.py.
#ifndef CV
#define CV 8
#endif
#ifndef CF
#define CF 4
#endif
#if CV == 16
typedef float16 cvec;
#define cvload vload16
#define cvstore vstore16
#define CV_EVEN_ODD(p, re, im) { float16 a_ = vload16(0, p), b_ = vload16(1, p);          \
                                  re = (float16)(a_.even, b_.even);                       \
                                  im = (float16)(a_.odd, b_.odd); }
#elif CV == 8
typedef float8 cvec;
#define cvload vload8
#define cvstore vstore8
#define CV_EVEN_ODD(p, re, im) { float16 a_ = vload16(0, p); re = a_.even; im = a_.odd; }
#else
typedef float4 cvec;
#define cvload vload4
#define cvstore vstore4
#define CV_EVEN_ODD(p, re, im) { float8 a_ = vload8(0, p); re = a_.even; im = a_.odd; }
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
    cvec re[CF], im[CF];
    int fs[CF];
    for (int j = 0; j < CF; ++j) {
        fs[j] = min(f0 + j, filters - 1);
        re[j] = (cvec)(0.0f);
        im[j] = (cvec)(0.0f);
    }
    if (start + CV + window - 1 <= length) {
        for (int k = 0; k < window; ++k) {
            cvec xre, xim;
            CV_EVEN_ODD(xr + 2 * k, xre, xim);
            for (int j = 0; j < CF; ++j) {
                float2 wk = wg[fs[j] * window + k];
                re[j] += wk.x * xre - wk.y * xim;
                im[j] += wk.x * xim + wk.y * xre;
            }
        }
    } else {  // a row shorter than CV + window - 1: element by element
        for (int k = 0; k < window; ++k) {
            float xre_[CV], xim_[CV];
            for (int c = 0; c < CV; ++c) {
                int i = min(start + c + k, length - 1);
                xre_[c] = xr[2 * (i - start)];
                xim_[c] = xr[2 * (i - start) + 1];
            }
            cvec xre = cvload(0, xre_), xim = cvload(0, xim_);
            for (int j = 0; j < CF; ++j) {
                float2 wk = wg[fs[j] * window + k];
                re[j] += wk.x * xre - wk.y * xim;
                im[j] += wk.x * xim + wk.y * xre;
            }
        }
    }
    for (int j = 0; j < CF && f0 + j < filters; ++j) {
        float a[CV], b[CV];
        cvstore(re[j], 0, a);
        cvstore(im[j], 0, b);
        float2 add = bias[g * filters + f0 + j];
        for (int c = 0; c < CV; ++c) {
            int t = start + c;
            if (t >= t0 && t < out_len)
                z[OUT(bv, f0 + j, t)] = (float2)(a[c], b[c]) + add;
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

// One work-item per element: y = act(z), a complex activation of complex.cl.
kernel void complex_activation_forward(global const float2 *z, global float2 *y, int count,
                                       int act, float modrelu_b)
{
    int i = get_global_id(0);
    if (i < count)
        y[i] = cactivate(z[i], act, modrelu_b);
}

// One work-item per element: G_z from G_y (conjugate convention).
kernel void complex_activation_backward(global const float2 *z, global const float2 *y,
                                        global const float2 *gy, global float2 *gz, int count,
                                        int act, float modrelu_b)
{
    int i = get_global_id(0);
    if (i < count)
        gz[i] = cactivate_grad(z[i], y[i], gy[i], act, modrelu_b);
}
