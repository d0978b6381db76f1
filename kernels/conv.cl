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
