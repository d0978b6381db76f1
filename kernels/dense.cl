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
// All three products are one kernel, gemm_bcast: C = A B with B's rows contiguous, so that
// each work-item computes RB rows x VW consecutive columns of C in RB vector accumulators:
// per step k it loads one VW-wide vector of B and multiplies it by RB scalars of A.
//   forward  Y^T = W X^T  (A = W, B = X^T, which transpose_pad makes; bias + activation)
//   input    dX  = dZ W   (A = dZ, B = W)
//   weight   dW += dZ^T X (A = dZ read with strides, B = X; accumulated)
// nnlib/layers/dense.py passes -DRB and -DVW (the device's preferred float vector width).
#ifndef RB
#define RB 12
#endif
#ifndef VW
#define VW 8
#endif
#if VW == 16
#define floatv float16
#define vloadv vload16
#define vstorev vstore16
#elif VW == 8
#define floatv float8
#define vloadv vload8
#define vstorev vstore8
#else
#define floatv float4
#define vloadv vload4
#define vstorev vstore4
#endif

// One work-item per element of dst (cols_pad x rows): dst = src^T, zero past src's rows.
kernel void transpose_pad(global const float *src, global float *dst, int rows, int cols,
                          int rows_pad)
{
    int r = get_global_id(0), c = get_global_id(1);
    if (r >= rows_pad || c >= cols)
        return;
    dst[(size_t)c * rows_pad + r] = r < rows ? src[(size_t)r * cols + c] : 0.0f;
}

// One work-item per tile of RB rows x VW columns of C (an nrows x ncols matrix stored at
// c[row * c_row + col * c_col]); A[row, k] = a[row * a_row + k * a_k]; B[k, col] = b[k * ldb +
// col]. Rows past the edge are clamped for loading and never stored; a partial last column
// tile loads its columns one by one. Then C = act(acc + bias[row]) or C += acc.
kernel void gemm_bcast(global const float *a, int a_row, int a_k,
                       global const float *b, int ldb,
                       global float *c, int c_row, int c_col,
                       int nrows, int ncols, int nk,
                       global const float *bias, int use_bias, int act, int accumulate)
{
    int c0 = get_global_id(0) * VW, r0 = get_global_id(1) * RB;
    if (c0 >= ncols || r0 >= nrows)
        return;
    global const float *ar[RB];
    for (int r = 0; r < RB; ++r)
        ar[r] = a + (size_t)min(r0 + r, nrows - 1) * a_row;
    floatv acc[RB];
    for (int r = 0; r < RB; ++r)
        acc[r] = (floatv)(0.0f);
    if (c0 + VW <= ldb) {  // a whole vector of B lies inside its row
        for (int k = 0; k < nk; ++k) {
            floatv bv = vloadv(0, b + (size_t)k * ldb + c0);
            for (int r = 0; r < RB; ++r)
                acc[r] += ar[r][(size_t)k * a_k] * bv;
        }
    } else {
        for (int k = 0; k < nk; ++k) {
            float tail[VW];
            for (int q = 0; q < VW; ++q)
                tail[q] = c0 + q < ncols ? b[(size_t)k * ldb + c0 + q] : 0.0f;
            floatv bv = vloadv(0, tail);
            for (int r = 0; r < RB; ++r)
                acc[r] += ar[r][(size_t)k * a_k] * bv;
        }
    }
    for (int r = 0; r < RB && r0 + r < nrows; ++r) {
        float out[VW];
        vstorev(acc[r], 0, out);
        float add = use_bias ? bias[r0 + r] : 0.0f;
        for (int q = 0; q < VW && c0 + q < ncols; ++q) {
            size_t o = (size_t)(r0 + r) * c_row + (size_t)(c0 + q) * c_col;
            c[o] = accumulate ? c[o] + out[q] : activate(out[q] + add, act);
        }
    }
}
