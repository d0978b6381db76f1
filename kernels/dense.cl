// The dense layer y = act(x W^T + b) as kernels. Row-major float32:
// x (batch, n_in), W (n_out, n_in) as torch.nn.Linear, b (n_out), y and dz (batch, n_out).
// Two designs of each product: the seed's (one work-item per output value, float4 dot
// products) and a register-blocked one (the default), where each work-item computes a
// small tile of outputs in vector registers and walks memory contiguously.
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
// Two register-blocked kernels do the three products. Each work-item keeps a tile of
// outputs in vector accumulators (VW floats wide; the loops over the tile are unrolled so
// that the accumulators stay in registers) and reads every operand along contiguous rows:
//   forward  Y  = act(X W^T + b)          gemm_nt: X and W both walk along k (dot products)
//            or Y^T = W X^T with gemm_tn (the launch parameter FWD_YT, made for the lanes
//            design below): P = W^T (W read with strides), B = X^T, made by transpose first;
//            then transpose_bias_act writes Y
//            or Y  = act(X W^T + b) with gemm_tn_bias (the launch parameter FWD_TN): P = X^T
//            (X read with strides), B = W^T, made by transpose first (W is small): no
//            horizontal sums, which cost gemm_nt most where k (n_in) is short
//   input    dX = dZ W = (dZ^T)^T W       gemm_tn: P = dZ^T (read with strides), B = W,
//            times the previous layer's act'(X) when Sequential asks for its dZ directly
//   weight   dW += dZ^T X, db += sum_b dZ gemm_tn: P = dZ, B = X (accumulated); or P = the
//            rows of dZ^T, made by transpose first, or by backward_gate beside dZ itself
//            (the launch parameter DZT): P's columns then lie along rows, which the cache
//            keeps better than a column of dZ
// The best tile depends on the device and its compiler, so these are build options that
// nnlib/layers/dense_params.py chooses per device by measuring (nnlib/tuning.py):
//   VW    vector width (4, 8 or 16)        NT_I  rows of X per gemm_nt tile (x 4 rows of W)
//   NT_KB gemm_nt's k-block (floats, a multiple of VW; 0: none): the work-group's work-items
//         walk k one block at a time together, so that the block of its rows of X and W
//         stays in the cache while each of them uses it (wide layers' rows do not fit)
//   TN_R  rows per gemm_tn tile            TN_V  vectors of columns per gemm_tn tile
//   TN_KB gemm_tn's k-block shared by the work-group through local memory (0: none; the
//         work-group then runs along the row blocks of one column block)
//   TN_ORDER 1: gemm_tn's work-groups in the order of the columns first (0: rows first)
//   TN_PACKED 1: gemm_tn's B packed first by pack_panels into panels of TN_COLS columns,
//         each panel's nk rows contiguous (zeros past the last column): a column block's
//         k steps then read one stream, not rows a whole row of B apart (no TN_KB)
//   VLOAD 1: vloadN/vstoreN builtins, 0: one float at a time (compilers that do not inline
//         the builtins, such as PoCL 3.0, run a function call per vload)
//   FMA   1: fma() builtin, 0: plain a * b + c (which the compiler may contract itself)
//   TN_LANES 1: the lanes design below (0: the tiles above), for devices that vectorise
//         across work-items; TN_V then counts scalar columns, and VW, VLOAD, NT_KB, TN_KB
//         and TN_ORDER do not apply
//   NT_SOFTMAX 1: gemm_nt is built for a softmax layer of at most NT_J outputs (its act is
//         then not read); 0: not softmax, and the lanes design's launches then use no local
//         memory and no barrier
//   ONLY  defined, the build holds of the five blocked kernels (gemm_nt and the four gemm_tn
//         kernels) only the one defined as ONLY_<its name> (-DONLY -DONLY_gemm_tn_gated),
//         or none; undefined, all five. A compiler that compiles every kernel of a program
//         when it is built (Intel's CPU runtime; PoCL compiles a kernel at its first launch)
//         would otherwise compile all five, the file's largest, for each tile the tuner
//         tries of one, so nnlib builds each launch with only the kernel it runs
#ifndef VW
#define VW 8
#endif
#ifndef NT_I
#define NT_I 6
#endif
#define NT_J 4  // the outputs of one row of a tile go through activate4 together
#ifndef NT_KB
#define NT_KB 0
#endif
#ifndef TN_R
#define TN_R 6
#endif
#ifndef TN_V
#define TN_V 4
#endif
#ifndef TN_KB
#define TN_KB 0
#endif
#ifndef TN_ORDER
#define TN_ORDER 0
#endif
#ifndef TN_PACKED
#define TN_PACKED 0
#endif
#ifndef FMA
#define FMA 0
#endif
#ifndef TN_LANES
#define TN_LANES 0
#endif
#ifndef NT_SOFTMAX
#define NT_SOFTMAX 0
#endif
#include "floatv.h"
#include "dot4.h"
#include "activation_vector.h"
#include "larger.h"
#if VW < 4
#error "VW must be 4, 8 or 16"
#endif
#if FMA
#define MAD(a, b, c) fma(a, b, c)
#else
#define MAD(a, b, c) ((a) * (b) + (c))
#endif
#define TN_COLS (TN_V * VW)
#if TN_PACKED && TN_KB
#error "TN_PACKED reads B's panels in place: no TN_KB"
#endif
#if NT_KB % VW
#error "NT_KB must be a multiple of VW"
#endif

// Softmax over the first n <= NT_J lanes of z (the others 0), max subtracted: the whole
// row of a layer with at most NT_J outputs, which one work-item of gemm_nt holds.
inline float4 softmax4(float4 z, int n)
{
    float v[4];
    vstore4(z, 0, v);
    float m = v[0];
    for (int j = 1; j < n; ++j)
        m = larger(m, v[j]);
    float s = 0.0f;
    for (int j = 0; j < 4; ++j) {
        v[j] = j < n ? exp(v[j] - m) : 0.0f;
        s += v[j];
    }
    return vload4(0, v) / s;
}

// gemm_tn's split of k (both designs): dimension 2 of the launch cuts k into
// get_num_groups(2) slices (1: all of k); the work-group's slice is [x, y). Each slice
// writes its own partial C (and d), which a tn_sum_splits kernel adds up.
inline int2 k_slice(int nk)
{
    int chunk = (nk + (int)get_num_groups(2) - 1) / (int)get_num_groups(2);
    int begin = min(nk, (int)get_group_id(2) * chunk);
    return (int2)(begin, min(nk, begin + chunk));
}

#if !TN_LANES
#if !defined(ONLY) || defined(ONLY_gemm_nt)
// C = act(A B^T + bias) with A (ni x nk), B (nj x nk), C (ni x nj), all row-major; softmax
// built with NT_SOFTMAX, for nj <= NT_J (wider rows: softmax_rows afterwards).
// One work-item per tile of NT_I rows of A x NT_J rows of B: NT_I * NT_J vector
// accumulators, each step loading one vector from each of the NT_I + NT_J rows; the lanes
// are summed at the end (sum_lanes4). Dimension 0 runs over the row blocks of A, so that
// neighbouring work-items share the rows of B (the weights, the larger operand). Rows past
// the edge are clamped for loading and never stored. With NT_KB, every work-item of the
// work-group (which may span both dimensions) reaches the barriers, tiles past the edge too.
kernel void gemm_nt(global const float *a, global const float *b, global float *c,
                    int ni, int nj, int nk, global const float *bias, int act)
{
    int i0 = get_global_id(0) * NT_I, j0 = get_global_id(1) * NT_J;
#if NT_KB == 0
    if (i0 >= ni || j0 >= nj)
        return;
#endif
    global const float *ar[NT_I], *br[NT_J];
    #pragma unroll
    for (int i = 0; i < NT_I; ++i)
        ar[i] = a + (size_t)min(i0 + i, ni - 1) * nk;
    #pragma unroll
    for (int j = 0; j < NT_J; ++j)
        br[j] = b + (size_t)min(j0 + j, nj - 1) * nk;
    floatv acc[NT_I][NT_J];
    #pragma unroll
    for (int i = 0; i < NT_I; ++i)
        #pragma unroll
        for (int j = 0; j < NT_J; ++j)
            acc[i][j] = (floatv)(0.0f);
    int kv = nk - nk % VW;  // the whole vectors of k
#if NT_KB
    for (int kb = 0; kb < kv; kb += NT_KB) {
        int kend = min(kb + NT_KB, kv);
        barrier(CLK_LOCAL_MEM_FENCE);  // the whole work-group has finished the previous block
#else
    {  // one block: all of k
        int kb = 0, kend = kv;
#endif
        for (int k = kb; k < kend; k += VW) {
            floatv av[NT_I];
            #pragma unroll
            for (int i = 0; i < NT_I; ++i)
                av[i] = LOADV(ar[i] + k);
            #pragma unroll
            for (int j = 0; j < NT_J; ++j) {  // one vector of W at a time: live are the
                floatv bv = LOADV(br[j] + k);   // accumulators, x's NT_I vectors and this one
                #pragma unroll
                for (int i = 0; i < NT_I; ++i)
                    acc[i][j] = MAD(av[i], bv, acc[i][j]);
            }
        }
    }
    float4 sum[NT_I];
    #pragma unroll
    for (int i = 0; i < NT_I; ++i)
        sum[i] = sum_lanes4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    for (int k = kv; k < nk; ++k)  // the last nk % VW steps
        #pragma unroll
        for (int i = 0; i < NT_I; ++i)
            sum[i] += ar[i][k] * (float4)(br[0][k], br[1][k], br[2][k], br[3][k]);
    float4 add = (float4)(bias[min(j0, nj - 1)], bias[min(j0 + 1, nj - 1)],
                          bias[min(j0 + 2, nj - 1)], bias[min(j0 + 3, nj - 1)]);
    #pragma unroll
    for (int i = 0; i < NT_I; ++i) {
        if (i0 + i >= ni || j0 >= nj)
            break;
        float4 z = sum[i] + add;
        float4 out = NT_SOFTMAX ? softmax4(z, nj) : activate4(z, act);
        global float *cr = c + (size_t)(i0 + i) * nj + j0;
        if (j0 + 4 <= nj) {
            STORE4(out, cr);
        } else {
            float part[4];
            vstore4(out, 0, part);
            for (int j = 0; j < nj - j0; ++j)
                cr[j] = part[j];
        }
    }
}
#endif

// act(z + bias) of one vector of C (bias: its VW columns' biases), as activate4 on all VW
// lanes at once: written through four lanes at a time, the token layers' epilogue (short k)
// cost as much as their product.
inline floatv tanh_rationalv(floatv z) TANH_RATIONAL(floatv, z)
inline floatv bias_actv(floatv z, global const float *bias, int act)
{
    floatv x = z + LOADV(bias);
    switch (act) {
    case ACT_TANH: return tanh_rationalv(x);
    case ACT_SIGMOID: return 1.0f / (1.0f + exp(-x));
    case ACT_RELU: return x > 0.0f ? x : (floatv)(0.0f);
    case ACT_LEAKY_RELU: return x > 0.0f ? x : LEAKY_SLOPE * x;
    case ACT_SILU: return x / (1.0f + exp(-x));
    case ACT_NONE:
    case ACT_SOFTMAX:
    default: return x;
    }
}

// C = P^T B, or C += P^T B, with P[k, r] = p[k * p_k + r * p_r] (nk x nrows), B (nk x
// ncols) and C (nrows x ncols) row-major: a sum over k of outer products of row k of P and
// row k of B. One work-item per tile of TN_R rows x TN_COLS columns of C: TN_R * TN_V
// vector accumulators; each step broadcasts TN_R values of P against TN_V vectors of B.
// Dimension 0 runs over the row blocks, so that neighbouring work-items share the columns
// of B. The four kernels below differ only in what they do besides: with y (not 0), each
// value is multiplied by activate_grad(y, act), y of C's shape; with bias (not 0), each
// value of column j becomes activate(value + bias[j], act); with d (not 0), the work-items
// of the first column block also write (or add) the sums over k of P[k, r] to d[r]. The
// kernels pass 0 for what they lack, so the compiler drops that code.
// panel: TN_KB * TN_COLS floats of local memory (unused without TN_KB).
inline void tn_tile(global const float *p, int p_k, int p_r, global const float *b,
                    global float *c, int nrows, int ncols, int nk, int accumulate,
                    global const float *y, int act, global float *d,
                    global const float *bias, local float *panel)
{
#if TN_ORDER  // the work-groups walk along the columns first (the groups' row blocks last)
    int g = get_group_id(0) + get_num_groups(0) * get_group_id(1);
    int r0 = ((g / get_num_groups(1)) * get_local_size(0) + get_local_id(0)) * TN_R,
        c0 = (g % get_num_groups(1)) * TN_COLS;
#else
    int r0 = get_global_id(0) * TN_R, c0 = get_global_id(1) * TN_COLS;
#endif
    if (c0 >= ncols)  // the same for the whole work-group (its columns are one block)
        return;
#if TN_KB == 0
    if (r0 >= nrows)
        return;
#endif
    int2 ks = k_slice(nk);
    c += (size_t)get_group_id(2) * nrows * ncols;  // the slice's partial C (and d)
    if (d != 0)
        d += get_group_id(2) * nrows;
    size_t rows[TN_R];  // offsets of P's columns, clamped for loading
    #pragma unroll
    for (int r = 0; r < TN_R; ++r)
        rows[r] = (size_t)min(r0 + r, nrows - 1) * p_r;
    floatv acc[TN_R][TN_V];
    #pragma unroll
    for (int r = 0; r < TN_R; ++r)
        #pragma unroll
        for (int v = 0; v < TN_V; ++v)
            acc[r][v] = (floatv)(0.0f);
#if TN_KB
    // The work-group's work-items share one column block: each k-block of B's columns is
    // copied once into local memory, contiguous (a CPU's caches keep it; B's own rows are
    // often a power-of-two apart, which maps them all to the same few cache sets), and
    // every work-item reads it from there. Work-items past the last row only help copy.
    // The copy takes the vloadN / vstoreN builtins whatever VLOAD: where the compiler calls
    // them (PoCL 3.0), each call still moves a vector, while the loads by hand became one
    // float at a time there, and the row's cache miss then held up every float after it.
    int lid = get_local_id(0), lsize = get_local_size(0), width = min(TN_COLS, ncols - c0);
    for (int kb = ks.x; kb < ks.y; kb += TN_KB) {
        int kn = min(TN_KB, ks.y - kb);
        barrier(CLK_LOCAL_MEM_FENCE);  // the previous block has been used
        for (int q = lid; q < kn; q += lsize) {
            global const float *src = b + (size_t)(kb + q) * ncols + c0;
            local float *dst = panel + q * TN_COLS;
            if (width == TN_COLS) {
                #pragma unroll
                for (int v = 0; v < TN_V; ++v)
                    vstorev(vloadv(0, src + v * VW), 0, dst + v * VW);
            } else {
                for (int col = 0; col < TN_COLS; ++col)  // zeros past the edge
                    dst[col] = col < width ? src[col] : 0.0f;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (r0 >= nrows)
            continue;
#else
#if !TN_PACKED
    bool whole = c0 + TN_COLS <= ncols;
#endif
    {  // one block: the whole slice of k
        int kb = ks.x, kn = ks.y - ks.x;
#endif
        for (int k = kb; k < kb + kn; ++k) {
            global const float *pk = p + (size_t)k * p_k;
            floatv bv[TN_V];
#if TN_KB
            #pragma unroll
            for (int v = 0; v < TN_V; ++v)
                bv[v] = LOADV(panel + (k - kb) * TN_COLS + v * VW);
#elif TN_PACKED
            global const float *bk = b + ((size_t)(c0 / TN_COLS) * nk + k) * TN_COLS;
            #pragma unroll
            for (int v = 0; v < TN_V; ++v)
                bv[v] = LOADV(bk + v * VW);
#else
            global const float *bk = b + (size_t)k * ncols + c0;
            if (whole) {
                #pragma unroll
                for (int v = 0; v < TN_V; ++v)
                    bv[v] = LOADV(bk + v * VW);
            } else {  // the last, partial column block: zeros past the edge
                #pragma unroll
                for (int v = 0; v < TN_V; ++v) {
                    if (c0 + (v + 1) * VW <= ncols) {
                        bv[v] = LOADV(bk + v * VW);
                    } else if (c0 + v * VW >= ncols) {
                        bv[v] = (floatv)(0.0f);
                    } else {
                        float tail[VW];
                        for (int q = 0; q < VW; ++q)
                            tail[q] = c0 + v * VW + q < ncols ? bk[v * VW + q] : 0.0f;
                        bv[v] = LOADV(tail);
                    }
                }
            }
#endif
            #pragma unroll
            for (int r = 0; r < TN_R; ++r) {
                float s = pk[rows[r]];
                #pragma unroll
                for (int v = 0; v < TN_V; ++v)
                    acc[r][v] = MAD((floatv)(s), bv[v], acc[r][v]);
            }
        }
    }
    #pragma unroll
    for (int r = 0; r < TN_R; ++r) {
        if (r0 + r >= nrows)
            break;
        #pragma unroll
        for (int v = 0; v < TN_V; ++v) {
            size_t o = (size_t)(r0 + r) * ncols + c0 + v * VW;
            if (c0 + (v + 1) * VW <= ncols) {  // a whole vector
                floatv out = acc[r][v];
                if (y != 0)
                    out *= activate_gradv(LOADV(y + o), act);
                if (bias != 0)
                    out = bias_actv(out, bias + c0 + v * VW, act);
                if (accumulate)
                    out += LOADV(c + o);
                STOREV(out, c + o);
            } else if (c0 + v * VW < ncols) {
                float out[VW];
                STOREV(acc[r][v], out);
                for (int q = 0; q < min(VW, ncols - c0 - v * VW); ++q) {
                    float value = y == 0 ? out[q] : out[q] * activate_grad(y[o + q], act);
                    if (bias != 0)
                        value = activate(value + bias[c0 + v * VW + q], act);
                    c[o + q] = accumulate ? c[o + q] + value : value;
                }
            }
        }
    }
    if (d != 0 && c0 == 0) {  // the TN_R row sums side by side: independent additions
        float sums[TN_R];
        #pragma unroll
        for (int r = 0; r < TN_R; ++r)
            sums[r] = 0.0f;
        for (int k = ks.x; k < ks.y; ++k) {
            global const float *pk = p + (size_t)k * p_k;
            #pragma unroll
            for (int r = 0; r < TN_R; ++r)
                sums[r] += pk[rows[r]];
        }
        for (int r = 0; r < TN_R && r0 + r < nrows; ++r)
            d[r0 + r] = accumulate ? d[r0 + r] + sums[r] : sums[r];
    }
}

#else
// ---------------------------------------------------------------- lanes design (TN_LANES)
// For devices that vectorise across work-items (Intel's CPU runtime, GPUs): neighbouring
// work-items along dimension 0 run in the lanes of one vector instruction, so here they read
// neighbouring floats (one contiguous vector load across the lanes) and each keeps scalar
// accumulators. A work-group is one row of lanes: (lanes, 1) work-items. Indices that differ
// between the lanes are computed from get_local_id as size_t: computed in int, they would
// make the compiler gather the lanes' floats one by one.

// out[0 .. n) to c[0 .. n), n = min(4, what is left of the row).
inline void store_row4(float4 out, global float *c, int n)
{
    if (n >= 4) {
        vstore4(out, 0, c);
    } else {
        float part[4];
        vstore4(out, 0, part);
        for (int j = 0; j < n; ++j)
            c[j] = part[j];
    }
}

#if !defined(ONLY) || defined(ONLY_gemm_nt)
// C = act(A B^T + bias) as gemm_nt above. Lane j of a work-group owns column j of its
// block of C (row j of B) for NT_I rows of A: NT_I scalar accumulators; each step reads 8
// floats of its own row of B (the compiler loads the lanes' rows together and transposes
// them) and the same 8 floats of each row of A in every lane. Dimension 0's work-groups run
// over the column blocks, dimension 1's over the row blocks. Built with NT_SOFTMAX (a softmax
// layer, nj <= NT_J): the rows' values meet in local memory, where lane i finishes row i.
kernel void gemm_nt(global const float *a, global const float *b, global float *c,
                    int ni, int nj, int nk, global const float *bias, int act)
{
    size_t lane = get_local_id(0);
    int lanes = get_local_size(0), i0 = get_group_id(1) * NT_I;
    int j0 = get_group_id(0) * lanes, j = j0 + (int)lane;
    global const float *br = b + (size_t)min(j, nj - 1) * nk;
    size_t ao[NT_I];  // the rows' offsets, clamped for loading
    #pragma unroll
    for (int i = 0; i < NT_I; ++i)
        ao[i] = (size_t)min(i0 + i, ni - 1) * nk;
    float acc[NT_I];
    #pragma unroll
    for (int i = 0; i < NT_I; ++i)
        acc[i] = 0.0f;
    int k = 0;
    for (; k + 8 <= nk; k += 8) {
        float8 w = vload8(0, br + k);
        #pragma unroll
        for (int i = 0; i < NT_I; ++i) {
            float8 x = vload8(0, a + ao[i] + k);
            acc[i] = MAD(x.s0, w.s0, acc[i]);
            acc[i] = MAD(x.s1, w.s1, acc[i]);
            acc[i] = MAD(x.s2, w.s2, acc[i]);
            acc[i] = MAD(x.s3, w.s3, acc[i]);
            acc[i] = MAD(x.s4, w.s4, acc[i]);
            acc[i] = MAD(x.s5, w.s5, acc[i]);
            acc[i] = MAD(x.s6, w.s6, acc[i]);
            acc[i] = MAD(x.s7, w.s7, acc[i]);
        }
    }
    for (; k < nk; ++k)
        #pragma unroll
        for (int i = 0; i < NT_I; ++i)
            acc[i] = MAD(a[ao[i] + k], br[k], acc[i]);
    float add = bias[min(j, nj - 1)];
#if NT_SOFTMAX
    local float zs[NT_I * NT_J];
    #pragma unroll
    for (int i = 0; i < NT_I; ++i)
        if (j < nj)
            zs[i * NT_J + j] = acc[i] + add;
    barrier(CLK_LOCAL_MEM_FENCE);  // every lane has written its column of the rows
    for (int i = lane; i < NT_I && i0 + i < ni; i += lanes) {
        float4 z = vload4(i, zs);
        store_row4(softmax4(z, nj), c + (size_t)(i0 + i) * nj, nj);
    }
#else
    if (j >= nj)
        return;
    #pragma unroll
    for (int i = 0; i < NT_I; ++i)
        if (i0 + i < ni)
            c[(size_t)(i0 + i) * nj + j0 + lane] = activate(acc[i] + add, act);
#endif
}
#endif

// C (+)= P^T B and what it does besides, as tn_tile above. Work-item `lane` of a work-group
// owns TN_R rows x the TN_V columns lane, lane + lanes, ... of the work-group's block of
// lanes * TN_V columns (scalar accumulators): each step loads TN_V contiguous vectors of row
// k of B across the lanes and broadcasts TN_R values of P, the same for every lane.
// Dimension 0's work-groups run over the column blocks, dimension 1's over the row blocks;
// those of the first column block also write d. Always inlined: Intel's compiler otherwise
// calls one vectorised copy from the three kernels, which gathers every load.
__attribute__((always_inline)) inline void tn_tile(
    global const float *p, int p_k, int p_r, global const float *b, global float *c, int nrows,
    int ncols, int nk, int accumulate, global const float *y, int act, global float *d,
    global const float *bias, local float *panel)
{
    size_t lane = get_local_id(0);
    int lanes = get_local_size(0), r0 = get_group_id(1) * TN_R;
    int col0 = get_group_id(0) * lanes * TN_V, col = col0 + (int)lane;
    int2 ks = k_slice(nk);
    c += (size_t)get_group_id(2) * nrows * ncols;  // the slice's partial C (and d)
    if (d != 0)
        d += get_group_id(2) * nrows;
    size_t rows[TN_R];  // offsets of P's columns, clamped for loading
    #pragma unroll
    for (int r = 0; r < TN_R; ++r)
        rows[r] = (size_t)min(r0 + r, nrows - 1) * p_r;
    float acc[TN_R][TN_V], psum[TN_R];  // psum: the sums of P's columns, the same in each lane
    #pragma unroll
    for (int r = 0; r < TN_R; ++r) {
        psum[r] = 0.0f;
        #pragma unroll
        for (int v = 0; v < TN_V; ++v)
            acc[r][v] = 0.0f;
    }
    for (int k = ks.x; k < ks.y; ++k) {
        global const float *pk = p + (size_t)k * p_k;
        global const float *bk = b + (size_t)k * ncols + col0 + lane;
        float bv[TN_V];
        #pragma unroll
        for (int v = 0; v < TN_V; ++v)
            bv[v] = col + v * lanes < ncols ? bk[v * lanes] : 0.0f;
        #pragma unroll
        for (int r = 0; r < TN_R; ++r) {
            float s = pk[rows[r]];
            psum[r] += s;
            #pragma unroll
            for (int v = 0; v < TN_V; ++v)
                acc[r][v] = MAD(s, bv[v], acc[r][v]);
        }
    }
    #pragma unroll
    for (int r = 0; r < TN_R; ++r) {
        if (r0 + r >= nrows)
            break;
        #pragma unroll
        for (int v = 0; v < TN_V; ++v) {
            size_t o = (size_t)(r0 + r) * ncols + col0 + v * lanes + lane;
            if (col + v * lanes < ncols) {
                float value = y == 0 ? acc[r][v] : acc[r][v] * activate_grad(y[o], act);
                if (bias != 0)
                    value = activate(value + bias[col + v * lanes], act);
                c[o] = accumulate ? c[o] + value : value;
            }
        }
    }
    if (d != 0 && get_group_id(0) == 0 && lane == 0)
        #pragma unroll
        for (int r = 0; r < TN_R; ++r)
            if (r0 + r < nrows)
                d[r0 + r] = accumulate ? d[r0 + r] + psum[r] : psum[r];
}
#endif

#define TN_PANEL local float panel[TN_KB ? TN_KB * TN_COLS : 1]

#if !defined(ONLY) || defined(ONLY_gemm_tn)
// C (+)= P^T B: the plain product (the input gradient of a layer whose dZ Sequential does
// not fuse).
kernel void gemm_tn(global const float *p, int p_k, int p_r, global const float *b,
                    global float *c, int nrows, int ncols, int nk, int accumulate)
{
    TN_PANEL;
    tn_tile(p, p_k, p_r, b, c, nrows, ncols, nk, accumulate, 0, ACT_NONE, 0, 0, panel);
}
#endif

#if !defined(ONLY) || defined(ONLY_gemm_tn_gated)
// C = (P^T B) * act'(y): the input gradient times the previous layer's activation
// derivative (y is that layer's output), which makes it the previous layer's dZ in one pass.
kernel void gemm_tn_gated(global const float *p, int p_k, int p_r, global const float *b,
                          global float *c, int nrows, int ncols, int nk,
                          global const float *y, int act)
{
    TN_PANEL;
    tn_tile(p, p_k, p_r, b, c, nrows, ncols, nk, 0, y, act, 0, 0, panel);
}
#endif

#if !defined(ONLY) || defined(ONLY_gemm_tn_bias)
// C = act(P^T B + bias), bias along the columns: the forward Y = act(X W^T + b) with P[k, r]
// = X[r, k] (p_k 1, p_r n_in) and B = W^T (FWD_TN); not softmax (the caller runs
// softmax_rows after).
kernel void gemm_tn_bias(global const float *p, int p_k, int p_r, global const float *b,
                         global float *c, int nrows, int ncols, int nk,
                         global const float *bias, int act)
{
    TN_PANEL;
    tn_tile(p, p_k, p_r, b, c, nrows, ncols, nk, 0, 0, act, 0, bias, panel);
}
#endif

#if !defined(ONLY) || defined(ONLY_gemm_tn_rowsum)
// C (+)= P^T B and d (+)= the sums over k of P[k, r]: the weight gradient dW and the bias
// gradient db in one pass.
kernel void gemm_tn_rowsum(global const float *p, int p_k, int p_r, global const float *b,
                           global float *c, int nrows, int ncols, int nk, int accumulate,
                           global float *d)
{
    TN_PANEL;
    tn_tile(p, p_k, p_r, b, c, nrows, ncols, nk, accumulate, 0, ACT_NONE, d, 0, panel);
}
#endif

// C (+)= the sum of the `splits` partial products in part (count = nrows * ncols values
// each), written by the slices of k of a gemm_tn kernel launched with dimension 2; with y
// (not 0), times activate_grad(y, act); with bias (not 0), activate(sum + bias[o % ncols],
// act); with d (not 0), d (+)= the sum of the partial sums in dpart (nrows values each). One
// work-item per value of C; the first nrows also add up d.
inline void sum_splits(global const float *part, int splits, global float *c, int count,
                       int accumulate, global const float *y, int act,
                       global const float *dpart, global float *d, int nrows,
                       global const float *bias, int ncols)
{
    int o = get_global_id(0);
    if (o < count) {
        float sum = 0.0f;
        for (int s = 0; s < splits; ++s)
            sum += part[(size_t)s * count + o];
        if (y != 0)
            sum *= activate_grad(y[o], act);
        if (bias != 0)
            sum = activate(sum + bias[o % ncols], act);
        c[o] = accumulate ? c[o] + sum : sum;
    }
    if (d != 0 && o < nrows) {
        float sum = 0.0f;
        for (int s = 0; s < splits; ++s)
            sum += dpart[(size_t)s * nrows + o];
        d[o] = accumulate ? d[o] + sum : sum;
    }
}

// The end of gemm_tn split over k.
kernel void tn_sum_splits(global const float *part, int splits, global float *c, int count,
                          int accumulate)
{
    sum_splits(part, splits, c, count, accumulate, 0, ACT_NONE, 0, 0, 0, 0, 1);
}

// The end of gemm_tn_gated split over k (its slices run gemm_tn: the gate needs the sum).
kernel void tn_sum_splits_gated(global const float *part, int splits, global float *c,
                                int count, global const float *y, int act)
{
    sum_splits(part, splits, c, count, 0, y, act, 0, 0, 0, 0, 1);
}

// The end of gemm_tn_bias split over k (its slices run gemm_tn: the activation needs the
// sum).
kernel void tn_sum_splits_bias(global const float *part, int splits, global float *c,
                               int count, global const float *bias, int act, int ncols)
{
    sum_splits(part, splits, c, count, 0, 0, act, 0, 0, 0, bias, ncols);
}

// The end of gemm_tn_rowsum split over k.
kernel void tn_sum_splits_rowsum(global const float *part, int splits, global float *c,
                                 int count, int accumulate, global const float *dpart,
                                 global float *d, int nrows)
{
    sum_splits(part, splits, c, count, accumulate, 0, ACT_NONE, dpart, d, nrows, 0, 1);
}

// dst = src^T, src (rows x cols) and dst (cols x rows) row-major; with bias (not 0), dst[c, r]
// = activate(src[r, c] + bias[r], act). One work-item per block of 4 x 4 values from (r0,
// c0), read as four float4 rows of src and written as four float4 rows of dst (a partial
// block at the edges one value at a time). The kernels pass 0 for what they lack, so the
// compiler drops that code.
// The kernels that run it, and the others below that are written in vectors (pack_panels,
// backward_gate), say so with vec_type_hint: Intel's CPU compiler then runs each work-item as
// written, rather than 8 or 16 of them in the lanes of its vectors, which gathers their blocks
// value by value.
inline void transpose_tile(global const float *src, global float *dst, int rows, int cols,
                           int r0, int c0, global const float *bias, int act)
{
    if (r0 >= rows || c0 >= cols)
        return;
    if (r0 + 4 <= rows && c0 + 4 <= cols) {
        float4 a = LOAD4(src + (size_t)r0 * cols + c0),
               b = LOAD4(src + (size_t)(r0 + 1) * cols + c0),
               c = LOAD4(src + (size_t)(r0 + 2) * cols + c0),
               d = LOAD4(src + (size_t)(r0 + 3) * cols + c0);
        if (bias != 0) {
            a = activate4(a + bias[r0], act);
            b = activate4(b + bias[r0 + 1], act);
            c = activate4(c + bias[r0 + 2], act);
            d = activate4(d + bias[r0 + 3], act);
        }
        STORE4((float4)(a.x, b.x, c.x, d.x), dst + (size_t)c0 * rows + r0);
        STORE4((float4)(a.y, b.y, c.y, d.y), dst + (size_t)(c0 + 1) * rows + r0);
        STORE4((float4)(a.z, b.z, c.z, d.z), dst + (size_t)(c0 + 2) * rows + r0);
        STORE4((float4)(a.w, b.w, c.w, d.w), dst + (size_t)(c0 + 3) * rows + r0);
        return;
    }
    for (int r = r0; r < min(r0 + 4, rows); ++r)
        for (int c = c0; c < min(c0 + 4, cols); ++c) {
            float value = src[(size_t)r * cols + c];
            dst[(size_t)c * rows + r] = bias == 0 ? value : activate(value + bias[r], act);
        }
}

// dst = src^T, dimension 0 along src's rows, so that a work-group writes along dst's rows:
// the rows of dZ^T for the weight gradient (DZT above), except on a compiler that
// vectorises across work-items (transpose_by_columns there), and W^T (FWD_TN).
kernel __attribute__((vec_type_hint(float4)))
void transpose(global const float *src, global float *dst, int rows, int cols)
{
    transpose_tile(src, dst, rows, cols, get_global_id(0) * 4, get_global_id(1) * 4, 0,
                   ACT_NONE);
}

// B packed for gemm_tn (TN_PACKED): panel c of nk rows of TN_COLS floats holds columns
// c TN_COLS .. (c + 1) TN_COLS of b's rows, zeros past ncols. One work-item per (row k,
// panel c), dimension 0 along the rows: a work-group writes one panel's rows one after another.
kernel __attribute__((vec_type_hint(floatv)))
void pack_panels(global const float *b, global float *panels, int nk, int ncols)
{
    int k = get_global_id(0), c0 = get_global_id(1) * TN_COLS;
    if (k >= nk || c0 >= ncols)
        return;
    global const float *src = b + (size_t)k * ncols + c0;
    global float *dst = panels + ((size_t)get_global_id(1) * nk + k) * TN_COLS;
    if (c0 + TN_COLS <= ncols) {
        #pragma unroll
        for (int v = 0; v < TN_V; ++v)
            STOREV(LOADV(src + v * VW), dst + v * VW);
    } else {
        for (int col = 0; col < TN_COLS; ++col)
            dst[col] = c0 + col < ncols ? src[col] : 0.0f;
    }
}

// dst = src^T, dimension 0 along src's columns, so that a work-group reads along src's rows
// (where neighbouring work-items run in the lanes of a vector, its rows then do not meet in
// the same cache sets when they lie a power of two apart): X^T for the forward on Y^T, and
// dZ^T where the compiler vectorises across work-items.
kernel __attribute__((vec_type_hint(float4)))
void transpose_by_columns(global const float *src, global float *dst, int rows, int cols)
{
    transpose_tile(src, dst, rows, cols, get_global_id(1) * 4, get_global_id(0) * 4, 0,
                   ACT_NONE);
}

// The activation's backward of a layer, dz = dy * act'(s) (s its output y, or its z where the
// derivative needs z), on the 4 x 4 block from (r0, c0) of dy (rows x cols, row-major), read
// as four float4 rows; written to dz, and transposed to dzt (cols x rows) unless dzt is null:
// the weight gradient's dZ^T (DZT) in the same pass, without a transpose launch of its own.
// A partial block at the edges one value at a time.
inline void gate_tile(global const float *s, global const float *dy, global float *dz,
                      global float *dzt, int rows, int cols, int r0, int c0, int act)
{
    if (r0 >= rows || c0 >= cols)
        return;
    if (r0 + 4 <= rows && c0 + 4 <= cols) {
        float4 g[4];
        #pragma unroll
        for (int r = 0; r < 4; ++r) {
            size_t at = (size_t)(r0 + r) * cols + c0;
            float4 v = LOAD4(s + at);
            g[r] = LOAD4(dy + at) * (float4)(activate_grad(v.x, act), activate_grad(v.y, act),
                                            activate_grad(v.z, act), activate_grad(v.w, act));
            STORE4(g[r], dz + at);
        }
        if (dzt != 0) {
            STORE4((float4)(g[0].x, g[1].x, g[2].x, g[3].x), dzt + (size_t)c0 * rows + r0);
            STORE4((float4)(g[0].y, g[1].y, g[2].y, g[3].y), dzt + (size_t)(c0 + 1) * rows + r0);
            STORE4((float4)(g[0].z, g[1].z, g[2].z, g[3].z), dzt + (size_t)(c0 + 2) * rows + r0);
            STORE4((float4)(g[0].w, g[1].w, g[2].w, g[3].w), dzt + (size_t)(c0 + 3) * rows + r0);
        }
        return;
    }
    for (int r = r0; r < min(r0 + 4, rows); ++r)
        for (int c = c0; c < min(c0 + 4, cols); ++c) {
            size_t at = (size_t)r * cols + c;
            float value = dy[at] * activate_grad(s[at], act);
            dz[at] = value;
            if (dzt != 0)
                dzt[(size_t)c * rows + r] = value;
        }
}

// One work-item per 4 x 4 block of dy (gate_tile), dimension 0 along dy's rows, as transpose.
kernel __attribute__((vec_type_hint(float4)))
void backward_gate(global const float *s, global const float *dy, global float *dz,
                   global float *dzt, int rows, int cols, int act)
{
    gate_tile(s, dy, dz, dzt, rows, cols, get_global_id(0) * 4, get_global_id(1) * 4, act);
}

// One work-item per 4 x 4 block of dy (gate_tile), dimension 0 along dy's columns, as
// transpose_by_columns (for a compiler that vectorises across work-items).
kernel __attribute__((vec_type_hint(float4)))
void backward_gate_by_columns(global const float *s, global const float *dy, global float *dz,
                              global float *dzt, int rows, int cols, int act)
{
    gate_tile(s, dy, dz, dzt, rows, cols, get_global_id(1) * 4, get_global_id(0) * 4, act);
}

// Y = act(Y^T^T + bias), dimension 0 along Y^T's rows (the outputs): the end of the forward
// on Y^T (the launch parameter FWD_YT), src = Y^T (n_out x batch) from gemm_tn with P[k, r]
// = W[r, k] (p_k 1, p_r n_in: each value of W a broadcast across the lanes) and B = X^T;
// not softmax (the caller runs softmax_rows after).
kernel __attribute__((vec_type_hint(float4)))
void transpose_bias_act(global const float *src, global float *dst, int rows, int cols,
                        global const float *bias, int act)
{
    transpose_tile(src, dst, rows, cols, get_global_id(0) * 4, get_global_id(1) * 4, bias,
                   act);
}
