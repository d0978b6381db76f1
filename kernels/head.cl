// The output layer's training step in one launch (nnlib/step_fusion.py, OutputHead): for a
// layer of few outputs (a classifier's head), its forward, the loss (each sample's) and its
// gradient, and its backward. Layer by layer they take five launches (gemm_nt, loss_rows,
// output_gradient, gemm_tn_rowsum, gemm_tn_gated), each a few microseconds of arithmetic,
// and on a CPU each launch costs about as much again.
// requires: activation.cl
// N_OUT (-D, set by nnlib/step_fusion.py; 1 unless set): the layer's outputs, built into the
// program, so that the loops over them unroll and a row's values stay in registers. The codes
// ACT_*, LOSS_* come from nnlib/codes.py as -D build options.
// VW (-D, nnlib.step_fusion.head_vector_width; 1 unless set): the columns of x one
// work-item of the second phase takes, one vector (floatv.h), loaded lane by lane (VLOAD 0).
#ifndef N_OUT
#define N_OUT 1
#endif
#ifndef VW
#define VW 1
#endif
#include "larger.h"
#include "loss_term.h"
#define VLOAD 0
#include "floatv.h"
#include "activation_vector.h"

// x[r] . w over n_in floats, four at a time, loaded lane by lane (PoCL 3.0 calls vload4).
inline float dot_row(global const float *x, global const float *w, int n_in)
{
    float4 s4 = (float4)(0.0f);
    int k = 0;
    for (; k + 4 <= n_in; k += 4)
        s4 += (float4)(x[k], x[k + 1], x[k + 2], x[k + 3])
              * (float4)(w[k], w[k + 1], w[k + 2], w[k + 3]);
    float s = (s4.x + s4.y) + (s4.z + s4.w);
    for (; k < n_in; ++k)
        s += x[k] * w[k];
    return s;
}

// One work-group does the whole step, in two phases a barrier apart:
//   1. a work-item per row r of x (rows, n_in): z = x[r] W^T + b, y[r] = act(z) (softmax
//      over the row), dz[r] = dL/dz as output_gradient computes it (loss and inv_count as
//      there), into dz (rows, n_out), and the row's summed loss at losses[loss_offset + r]
//      as loss_rows stores it;
//   2. a work-item per column k of x, down all rows: dx[r, k] = (dz[r] . W[:, k]) *
//      act'(x[r, k]), the layer below's dL/dz (want_dx 0: none, the first layer), and
//      dW[:, k] = the sum over r of dz[r] x[r, k]; a work-item per output o: db[o] = the
//      sum of dz[:, o] (accumulate 1: dW and db added to).
kernel void head_step(global const float *x, global const float *w, global const float *b,
                      global const float *t, global float *y, global float *dz,
                      global float *dx, global float *dw, global float *db,
                      global float *losses, int loss_offset, int rows, int n_in,
                      float inv_count, int loss, int act, int below_act, int want_dx,
                      int accumulate)
{
    int lid = get_local_id(0), size = get_local_size(0);
    for (int r = lid; r < rows; r += size) {
        float z[N_OUT];
        float top = -INFINITY, sum = 0.0f;
        for (int o = 0; o < N_OUT; ++o) {
            float s = b[o] + dot_row(x + (size_t)r * n_in, w + (size_t)o * n_in, n_in);
            z[o] = act == ACT_SOFTMAX ? s : activate(s, act);
            top = larger(top, s);
        }
        if (act == ACT_SOFTMAX) {
            for (int o = 0; o < N_OUT; ++o) {
                z[o] = exp(z[o] - top);
                sum += z[o];
            }
            for (int o = 0; o < N_OUT; ++o)
                z[o] /= sum;
        }
        size_t row = (size_t)r * N_OUT;
        float row_loss = 0.0f;
        for (int o = 0; o < N_OUT; ++o) {
            float d = z[o] - t[row + o];
            y[row + o] = z[o];
            dz[row + o] = loss == LOSS_MSE ? 2.0f * d * inv_count * activate_grad(z[o], act)
                                           : d * inv_count;
            row_loss += loss_term(z[o], t[row + o], loss);
        }
        losses[loss_offset + r] = row_loss;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (int k = lid * VW; k < n_in; k += size * VW) {
        floatv wk[N_OUT], g[N_OUT];
        for (int o = 0; o < N_OUT; ++o) {
            wk[o] = load_v(w + (size_t)o * n_in, k, n_in);
            g[o] = 0.0f;
        }
        for (int r = 0; r < rows; ++r) {
            global const float *dzr = dz + (size_t)r * N_OUT;
            floatv xk = load_v(x + (size_t)r * n_in, k, n_in), s = 0.0f;
            for (int o = 0; o < N_OUT; ++o) {
                s += dzr[o] * wk[o];
                g[o] += dzr[o] * xk;
            }
            if (want_dx)
                store_v(s * activate_gradv(xk, below_act), dx + (size_t)r * n_in, k, n_in);
        }
        for (int o = 0; o < N_OUT; ++o) {
            global float *dwo = dw + (size_t)o * n_in;
            store_v(accumulate ? load_v(dwo, k, n_in) + g[o] : g[o], dwo, k, n_in);
        }
    }
    for (int o = lid; o < N_OUT; o += size) {
        float s = 0.0f;
        for (int r = 0; r < rows; ++r)
            s += dz[(size_t)r * N_OUT + o];
        db[o] = accumulate ? db[o] + s : s;
    }
}
