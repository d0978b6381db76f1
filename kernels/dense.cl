// The dense layer y = act(x W^T + b) as kernels. Row-major float32:
// x (batch, n_in), W (n_out, n_in) as torch.nn.Linear, b (n_out), y and dz (batch, n_out).
// Two designs of each product: the seed's (one work-item per output value, float4 dot
// products) and a register-blocked one (the default), where each work-item computes a
// small tile with independent accumulators and walks memory contiguously.
// requires: activation.cl

// ---------------------------------------------------------------- seed design
// One work-item per (output neuron j, sample b): y[b,j] = act(dot(x[b,:], W[j,:]) + b[j]).
kernel void dense_forward_seed(global const float *x, global const float *w,
                               global const float *bias, global float *y,
                               int batch, int n_in, int n_out, int act)
{
    int j = get_global_id(0), b = get_global_id(1);
    if (j >= n_out || b >= batch)
        return;
    global const float *xr = x + (size_t)b * n_in, *wr = w + (size_t)j * n_in;
    float sum = bias[j];
    int k = 0;
    for (; k + 4 <= n_in; k += 4)
        sum += dot((float4)(xr[k], xr[k + 1], xr[k + 2], xr[k + 3]),
                   (float4)(wr[k], wr[k + 1], wr[k + 2], wr[k + 3]));
    for (; k < n_in; ++k)
        sum += xr[k] * wr[k];
    y[(size_t)b * n_out + j] = activate(sum, act);
}

// One work-item per (input i, sample b): dx[b,i] = sum_j dz[b,j] W[j,i] (the hidden gradient
// before the previous layer's activation derivative).
kernel void dense_backward_input_seed(global const float *dz, global const float *w,
                                      global float *dx, int batch, int n_in, int n_out)
{
    int i = get_global_id(0), b = get_global_id(1);
    if (i >= n_in || b >= batch)
        return;
    global const float *g = dz + (size_t)b * n_out;
    float sum = 0.0f;
    for (int j = 0; j < n_out; ++j)
        sum += g[j] * w[(size_t)j * n_in + i];
    dx[(size_t)b * n_in + i] = sum;
}

// One work-item per weight (i, j): dW[j,i] += sum_b dz[b,j] x[b,i].
kernel void dense_backward_weight_seed(global const float *dz, global const float *x,
                                       global float *dw, int batch, int n_in, int n_out)
{
    int i = get_global_id(0), j = get_global_id(1);
    if (i >= n_in || j >= n_out)
        return;
    float sum = 0.0f;
    for (int b = 0; b < batch; ++b)
        sum += dz[(size_t)b * n_out + j] * x[(size_t)b * n_in + i];
    dw[(size_t)j * n_in + i] += sum;
}

// One work-item per output neuron j: db[j] += sum_b dz[b,j] (both designs use it).
kernel void dense_backward_bias(global const float *dz, global float *db, int batch, int n_out)
{
    int j = get_global_id(0);
    if (j >= n_out)
        return;
    float sum = 0.0f;
    for (int b = 0; b < batch; ++b)
        sum += dz[(size_t)b * n_out + j];
    db[j] += sum;
}

// ---------------------------------------------------------------- blocked design
#ifndef TB
#define TB 4  // samples per work-item (nnlib/layers/dense.py passes -DTB)
#endif
#ifndef TJ
#define TJ 4  // output neurons per work-item
#endif

// One work-item per tile of TB samples x TJ neurons: TB*TJ independent accumulators fed by
// contiguous rows of x and W. Rows past the edge are clamped for loading, never stored.
kernel void dense_forward(global const float *x, global const float *w,
                          global const float *bias, global float *y,
                          int batch, int n_in, int n_out, int act)
{
    int j0 = get_global_id(0) * TJ, b0 = get_global_id(1) * TB;
    if (j0 >= n_out || b0 >= batch)
        return;
    global const float *xr[TB], *wr[TJ];
    for (int r = 0; r < TB; ++r)
        xr[r] = x + (size_t)min(b0 + r, batch - 1) * n_in;
    for (int c = 0; c < TJ; ++c)
        wr[c] = w + (size_t)min(j0 + c, n_out - 1) * n_in;
    float acc[TB][TJ];
    for (int r = 0; r < TB; ++r)
        for (int c = 0; c < TJ; ++c)
            acc[r][c] = 0.0f;
    for (int k = 0; k < n_in; ++k) {
        float xv[TB], wv[TJ];
        for (int r = 0; r < TB; ++r)
            xv[r] = xr[r][k];
        for (int c = 0; c < TJ; ++c)
            wv[c] = wr[c][k];
        for (int r = 0; r < TB; ++r)
            for (int c = 0; c < TJ; ++c)
                acc[r][c] += xv[r] * wv[c];
    }
    for (int r = 0; r < TB && b0 + r < batch; ++r)
        for (int c = 0; c < TJ && j0 + c < n_out; ++c)
            y[(size_t)(b0 + r) * n_out + j0 + c] = activate(acc[r][c] + bias[j0 + c], act);
}

// One work-item per (input i, tile of TB samples): dx[b,i] = sum_j dz[b,j] W[j,i].
// Neighbouring work-items read neighbouring W[j,i], so the device can vectorise across them.
kernel void dense_backward_input(global const float *dz, global const float *w,
                                 global float *dx, int batch, int n_in, int n_out)
{
    int i = get_global_id(0), b0 = get_global_id(1) * TB;
    if (i >= n_in || b0 >= batch)
        return;
    global const float *g[TB];
    for (int r = 0; r < TB; ++r)
        g[r] = dz + (size_t)min(b0 + r, batch - 1) * n_out;
    float acc[TB];
    for (int r = 0; r < TB; ++r)
        acc[r] = 0.0f;
    for (int j = 0; j < n_out; ++j) {
        float wv = w[(size_t)j * n_in + i];
        for (int r = 0; r < TB; ++r)
            acc[r] += g[r][j] * wv;
    }
    for (int r = 0; r < TB && b0 + r < batch; ++r)
        dx[(size_t)(b0 + r) * n_in + i] = acc[r];
}

// One work-item per (input i, tile of TJ neurons): dW[j,i] += sum_b dz[b,j] x[b,i].
kernel void dense_backward_weight(global const float *dz, global const float *x,
                                  global float *dw, int batch, int n_in, int n_out)
{
    int i = get_global_id(0), j0 = get_global_id(1) * TJ;
    if (i >= n_in || j0 >= n_out)
        return;
    int jc[TJ];
    for (int c = 0; c < TJ; ++c)
        jc[c] = min(j0 + c, n_out - 1);
    float acc[TJ];
    for (int c = 0; c < TJ; ++c)
        acc[c] = 0.0f;
    for (int b = 0; b < batch; ++b) {
        float xv = x[(size_t)b * n_in + i];
        global const float *g = dz + (size_t)b * n_out;
        for (int c = 0; c < TJ; ++c)
            acc[c] += g[jc[c]] * xv;
    }
    for (int c = 0; c < TJ && j0 + c < n_out; ++c)
        dw[(size_t)(j0 + c) * n_in + i] += acc[c];
}
