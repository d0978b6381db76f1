// A whole training step of a small MLP (Dense layers) in one launch: forward, loss gradient,
// backward and the optimizer update, for `steps` consecutive mini-batches of `batch` samples
// (batch 1 = the source article's one-sample-at-a-time training). ONE work-group does all of
// it, walking the layers with barriers between them; weights and optimizer state stay in
// global memory (the optimizer's flat layout), activations and gradients of the batch live in
// local memory. What it saves is launches: the layer-by-layer path needs a dozen kernels per
// step, each of which wakes the device's threads; here a step costs one barrier per phase.
// nnlib/fused.py checks that the network fits (widths vs local memory) and builds the table.
//
// Compile-time options (from nnlib/fused.py): RULE (0 SGD without momentum, 1 SGD with
// momentum, 2 Adam/AdamW), VW (the device's preferred float vector width, floatv.h), TEAM
// (1 on a CPU; on a GPU the work-items a forward dot product is split over, below) and WG
// (vectors of columns a work-item updates at once in a row of weights). The
// matrix products are register-blocked like dense.cl's: each work-item computes a tile of
// outputs x samples in independent vector accumulators, written as plain arithmetic
// (`acc += w * a`) that the compiler turns into SIMD instructions. What decides the speed on
// PoCL 3.0 (PyPI's build), which calls rather than inlines builtins such as vloadN, fma, min
// and tanh: vectors loaded by hand (floatv.h's LOAD_BY_HAND), activations four outputs at a
// time with tanh inline (activation.cl's tanh_rational4), and every loop over a tile
// unrolled so that its accumulators stay in registers (python -m nnlib.bench.seed_experiment
// times the step).
// requires: activation.cl

#ifndef VW
#define VW 1
#endif
#ifndef RULE
#define RULE 0
#endif
#ifndef PARTIAL
#define PARTIAL 0
#endif
#ifndef TEAM
#define TEAM 1
#endif
#ifndef WG
#define WG 2
#endif
#define RULE_SGD 0
#define RULE_MOMENTUM 1
#define RULE_ADAM 2

// The network table `net`, TABLE ints per layer l:
//   [w, b]        offsets of the weight (n_out, n_in) and bias in the flat parameter array
//   [n_in, n_out] widths
//   [act]         activation code (activation.cl); softmax only on the last layer
//   [a_in, a_out] offsets in local memory of the batch's input and output activations
// then, after the layers: [delta, dnext] offsets of two (batch, max width) gradient buffers in
// local memory (dL/dz of a layer's outputs and of its inputs), and [scratch] the offset of
// RB x (work-group size) floats where TEAM > 1 (the forward's partial sums).
#define TABLE 8

typedef struct {
    float lr, momentum, weight_decay, beta1, beta2, eps, step_size, sqrt_bc2;
    int nesterov, decoupled;
} Hyper;

#include "floatv.h"
#include "activation_vector.h"
#include "larger.h"
#include "loss_term.h"
#define RB 4  // forward tile: weight rows (sum_lanes4 and activate4 take four) ...
#define SB 3  // ... times samples (RB * SB vector accumulators)
#define BT 8  // input gradient tile: samples (x one vector of columns)
#define WB 6  // weight gradient tile: weight rows (x WG vectors of columns)

// LAST(i, n): i, or n - 1 past the end (plain arithmetic: PyPI PoCL calls builtins like min)
#define LAST(i, n) ((i) < (n) ? (i) : (n) - 1)
// The first column of unit u of a row cut into `vectors` vectors of VW values, then its tail
// columns (the row's length % VW) one unit each.
inline int unit_column(int u, int vectors)
{
    return u < vectors ? u * VW : vectors * VW + u - vectors;
}
#define load1(p) (*(p))
#define store1(x, p) (*(p) = (x))

// DOT_TILE(name, S): z[s] = (sum_j w[i n + j] a[s n + j] for the RB weight rows i from w)
// for S samples from a: one vector of partial sums per (row, sample), every loaded vector used
// by the whole tile; the lanes summed four rows at a time (sum_lanes4), the tail of a row (n
// not a multiple of VW) added one by one. Rows past `rows` repeat the last one (computed,
// never stored), so that every loop has constant bounds and the accumulators stay in
// registers.
#define DOT_TILE(name, S)                                                                \
inline void name(global const float *w, int n, local const float *a, int rows,           \
                 float4 z[SB])                                                           \
{                                                                                        \
    global const float *wr[RB];                                                          \
    _Pragma("unroll")                                                                    \
    for (int i = 0; i < RB; ++i)                                                         \
        wr[i] = w + LAST(i, rows) * n;                                                   \
    floatv acc[RB][S];                                                                   \
    _Pragma("unroll")                                                                    \
    for (int i = 0; i < RB; ++i)                                                         \
        _Pragma("unroll")                                                                \
        for (int s = 0; s < S; ++s)                                                      \
            acc[i][s] = (floatv)(0.0f);                                                  \
    int j = 0;                                                                           \
    for (; j + VW <= n; j += VW) {                                                       \
        floatv av[S], wv[RB];                                                            \
        _Pragma("unroll")                                                                \
        for (int s = 0; s < S; ++s)                                                      \
            av[s] = LOAD_BY_HAND(a + s * n + j);                                         \
        _Pragma("unroll")                                                                \
        for (int i = 0; i < RB; ++i)                                                     \
            wv[i] = LOAD_BY_HAND(wr[i] + j);                                             \
        _Pragma("unroll")                                                                \
        for (int i = 0; i < RB; ++i)                                                     \
            _Pragma("unroll")                                                            \
            for (int s = 0; s < S; ++s)                                                  \
                acc[i][s] += wv[i] * av[s];                                              \
    }                                                                                    \
    _Pragma("unroll")                                                                    \
    for (int s = 0; s < S; ++s) {                                                        \
        float4 sum = sum_lanes4(acc[0][s], acc[1][s], acc[2][s], acc[3][s]);             \
        for (int jj = j; jj < n; ++jj)                                                   \
            sum += (float4)(wr[0][jj], wr[1][jj], wr[2][jj], wr[3][jj]) * a[s * n + jj]; \
        z[s] = sum;                                                                      \
    }                                                                                    \
}
DOT_TILE(dot_tile, SB)
DOT_TILE(dot_tile1, 1)

#if TEAM > 1
// The forward of one layer on a GPU, whose neighbouring work-items must read neighbouring
// addresses: the work-items in teams of TEAM (of the work-group's size if smaller); team k
// takes tiles k, k + teams, ... of RB rows x one sample, lane l summing the columns l,
// l + TEAM, ... of the tile's rows (a team reads TEAM consecutive weights of a row at once).
// The lanes' partial sums meet in `scratch` (RB x size floats), where lane i adds up row i's
// and applies the activation. Every work-item runs every round (two barriers each); the
// last barrier ends the layer.
inline void forward_teams(global const float *w, global const float *bias, int n_in,
                          int n_out, local const float *a, local float *y, int count, int act,
                          local float *scratch, int lid, int size)
{
    const int span = min(TEAM, size), teams = size / span, team = lid / span, lane = lid % span;
    const int row_tiles = (n_out + RB - 1) / RB, tiles = row_tiles * count;
    for (int t0 = 0; t0 < tiles; t0 += teams) {
        const int t = t0 + team, busy = team < teams && t < tiles;
        const int r0 = t % row_tiles * RB, b = t / row_tiles, rows = min(RB, n_out - r0);
        float z[RB];
        #pragma unroll
        for (int i = 0; i < RB; ++i)
            z[i] = 0.0f;
        if (busy) {
            global const float *wr[RB];
            #pragma unroll
            for (int i = 0; i < RB; ++i)
                wr[i] = w + (r0 + LAST(i, rows)) * n_in;
            local const float *ar = a + b * n_in;
            for (int j = lane; j < n_in; j += span) {
                const float aj = ar[j];
                #pragma unroll
                for (int i = 0; i < RB; ++i)
                    z[i] += wr[i][j] * aj;
            }
        }
        #pragma unroll
        for (int i = 0; i < RB; ++i)
            scratch[i * size + lid] = z[i];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = lane; busy && i < rows; i += span) {
            local const float *part = scratch + i * size + team * span;
            float sum = bias[r0 + i];
            for (int m = 0; m < span; ++m)
                sum += part[m];
            y[b * n_out + r0 + i] = activate(sum, act);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}
#endif

// UPDATE(name, T, load, store): the update of the parameters at p[k ...] (one float or one
// vector T) from their gradient g, the rules of kernels/optim.cl (torch's):
// SGD  g' = g + wd w; v = mu v + g'; w -= lr (Nesterov: g' + mu v; else v; no momentum: g').
// Adam w *= 1 - lr wd (AdamW) or g' = g + wd w; m, v moving averages of g', g'^2;
//      w -= step_size m / (sqrt(v) / sqrt_bc2 + eps), the step taken as 0 where the
//      denominator is 0 (eps = 0 and v = 0: a gradient that has been 0 so far), as optim.cl.
#if PARTIAL  // the gradient itself, into the work-group's slice of `grads`
#define UPDATE(name, T, load, store)                                                     \
inline void name(global float *restrict p, global float *restrict s1,                    \
                 global float *restrict s2, int k, T g, const Hyper *h)                  \
{                                                                                        \
    store(g, p + k);                                                                     \
}
#elif RULE == RULE_ADAM
#define RATIO(a, d) ((d) > 0.0f ? (a) / (d) : 0.0f)
#define UPDATE(name, T, load, store)                                                     \
inline void name(global float *restrict p, global float *restrict s1,                    \
                 global float *restrict s2, int k, T g, const Hyper *h)                  \
{                                                                                        \
    T w = load(p + k);                                                                   \
    if (h->decoupled)                                                                    \
        w *= 1.0f - h->lr * h->weight_decay;                                             \
    else                                                                                 \
        g += h->weight_decay * w;                                                        \
    T m = h->beta1 * load(s1 + k) + (1.0f - h->beta1) * g;                               \
    T v = h->beta2 * load(s2 + k) + (1.0f - h->beta2) * g * g;                           \
    store(m, s1 + k);                                                                    \
    store(v, s2 + k);                                                                    \
    store(w - h->step_size * RATIO(m, sqrt(v) / h->sqrt_bc2 + h->eps), p + k);           \
}
#elif RULE == RULE_MOMENTUM
#define UPDATE(name, T, load, store)                                                     \
inline void name(global float *restrict p, global float *restrict s1,                    \
                 global float *restrict s2, int k, T g, const Hyper *h)                  \
{                                                                                        \
    T w = load(p + k);                                                                   \
    g += h->weight_decay * w;                                                            \
    T v = h->momentum * load(s1 + k) + g;                                                \
    store(v, s1 + k);                                                                    \
    store(w - h->lr * (h->nesterov ? g + h->momentum * v : v), p + k);                   \
}
#else
#define UPDATE(name, T, load, store)                                                     \
inline void name(global float *restrict p, global float *restrict s1,                    \
                 global float *restrict s2, int k, T g, const Hyper *h)                  \
{                                                                                        \
    T w = load(p + k);                                                                   \
    store(w - h->lr * (g + h->weight_decay * w), p + k);                                 \
}
#endif
UPDATE(update1, float, load1, store1)
UPDATE(updatev, floatv, LOAD_BY_HAND, STORE_BY_HAND)

// INPUT_GRAD(name, T, load, store, grad, S): the input gradient times the derivative of the
// activation `below` that gave the layer's input a,
//   dnext[b, j...] = (sum_i delta[b, i] W[i, j...]) act'(a[b, j...]),
// for the S samples from b0 (those past `samples` repeat the last, never stored) and the
// columns j ... of one T (a float or a vector) of a layer with n_in inputs and n_out
// outputs: each loaded row of W is used by all the tile's samples.
#define INPUT_GRAD(name, T, load, store, grad, S)                                        \
inline void name(global const float *w, int n_in, int n_out, local const float *delta,   \
                 local const float *a, int below, local float *dnext, int b0, int samples, \
                 int j)                                                                  \
{                                                                                        \
    T acc[S];                                                                            \
    local const float *dr[S];                                                            \
    _Pragma("unroll")                                                                    \
    for (int s = 0; s < S; ++s) {                                                        \
        acc[s] = (T)(0.0f);                                                              \
        dr[s] = delta + (b0 + LAST(s, samples)) * n_out;                                 \
    }                                                                                    \
    for (int i = 0; i < n_out; ++i) {                                                    \
        T wi = load(w + i * n_in + j);                                                   \
        _Pragma("unroll")                                                                \
        for (int s = 0; s < S; ++s)                                                      \
            acc[s] += dr[s][i] * wi;                                                     \
    }                                                                                    \
    for (int s = 0; s < S && s < samples; ++s) {                                         \
        const int k = (b0 + s) * n_in + j;                                               \
        store(acc[s] * grad(load(a + k), below), dnext + k);                             \
    }                                                                                    \
}
INPUT_GRAD(input_grad1, float, load1, store1, activate_grad, BT)
INPUT_GRAD(input_gradv, floatv, LOAD_BY_HAND, STORE_BY_HAND, activate_gradv, BT)
INPUT_GRAD(input_gradv1, floatv, LOAD_BY_HAND, STORE_BY_HAND, activate_gradv, 1)

// WEIGHT_STEP(name, T, load, update, V): the weight gradient of WB rows from r0 (those past
// `rows` repeat the last, never updated) and the columns j ... of V T's (floats or vectors),
// summed over the batch,
//   g[i] = sum_b delta[b, r0 + i] a[b, j...],
// then the update of those weights and their optimizer state.
#define WEIGHT_STEP(name, T, load, update, V)                                            \
inline void name(global float *restrict params, global float *restrict s1,               \
                 global float *restrict s2, int w_off, int n_in, int n_out,              \
                 local const float *a, local const float *delta, int batch, int r0,      \
                 int rows, int j, const Hyper *h)                                        \
{                                                                                        \
    T g[WB][V];                                                                          \
    _Pragma("unroll")                                                                    \
    for (int i = 0; i < WB; ++i)                                                         \
        _Pragma("unroll")                                                                \
        for (int v = 0; v < V; ++v)                                                      \
            g[i][v] = (T)(0.0f);                                                         \
    int ri[WB];                                                                          \
    _Pragma("unroll")                                                                    \
    for (int i = 0; i < WB; ++i)                                                         \
        ri[i] = r0 + LAST(i, rows);                                                      \
    for (int b = 0; b < batch; ++b) {                                                    \
        local const float *ar = a + b * n_in + j, *dr = delta + b * n_out;               \
        T ab[V];                                                                         \
        _Pragma("unroll")                                                                \
        for (int v = 0; v < V; ++v)                                                      \
            ab[v] = load(ar + v * VW);                                                   \
        _Pragma("unroll")                                                                \
        for (int i = 0; i < WB; ++i) {                                                   \
            float di = dr[ri[i]];                                                        \
            _Pragma("unroll")                                                            \
            for (int v = 0; v < V; ++v)                                                  \
                g[i][v] += di * ab[v];                                                   \
        }                                                                                \
    }                                                                                    \
    for (int i = 0; i < WB && i < rows; ++i)                                             \
        _Pragma("unroll")                                                                \
        for (int v = 0; v < V; ++v)                                                      \
            update(params, s1, s2, w_off + (r0 + i) * n_in + j + v * VW, g[i][v], h);    \
}
WEIGHT_STEP(weight_step1, float, load1, update1, 1)
WEIGHT_STEP(weight_stepv, floatv, LOAD_BY_HAND, updatev, 1)
WEIGHT_STEP(weight_stepvg, floatv, LOAD_BY_HAND, updatev, WG)

// The output layer's dL/dz of sample b into delta (n values), and its loss into *loss_out:
// softmax + cross-entropy: dz = (p - t) inv_count, loss = -sum t log p;
// MSE through an elementwise activation: dz = 2 (y - t) inv_count act'(y), loss = sum (y-t)^2.
inline void output_delta(local float *y, global const float *t, local float *delta, int n,
                         int act, int loss, float inv_count, global float *loss_out)
{
    if (act == ACT_SOFTMAX) {
        float m = y[0];
        for (int c = 1; c < n; ++c)
            m = larger(m, y[c]);
        float s = 0.0f;
        for (int c = 0; c < n; ++c) {
            y[c] = exp(y[c] - m);
            s += y[c];
        }
        for (int c = 0; c < n; ++c)
            y[c] /= s;
    }
    float l = 0.0f;
    for (int c = 0; c < n; ++c) {
        float d = y[c] - t[c];
        l += loss_term(y[c], t[c], loss);
        delta[c] = loss == LOSS_MSE ? 2.0f * d * inv_count * activate_grad(y[c], act)
                                    : d * inv_count;
    }
    *loss_out = l;
}

// The work-group (any size; its work-items share every loop below):
//   input      work-item i copies vectors i, i + size, ... of the batch's rows of x;
//   forward    work-item i computes tiles i, i + size, ... of RB outputs x SB samples of a
//              layer (dot_tile); on a GPU (TEAM > 1) teams of work-items share each tile of
//              RB outputs x one sample (forward_teams);
//   loss       work-item i takes samples i, i + size, ...: softmax, loss, output delta;
//   backward   first dL/dz of the layer below, from the old weights, in tiles of BT samples x
//              one vector of input columns (input_grad, the activation's derivative
//              included); after a barrier, the weight gradient summed over the batch and the
//              update of W and its optimizer state in place, in tiles of WB rows x WG
//              vectors of columns (weight_step), and the bias's, VW rows at a time.
//              No two work-items write the same value, so a layer needs no reduction, only
//              barriers.
// Barriers fence global memory too: the weights one work-item updates are read by the others
// in the next step's forward pass.
// A step whose output delta is not finite is skipped (no update; skip[0] counts it). Hidden
// deltas are finite then too while the weights are (|act'| <= 1 for tanh and sigmoid).
kernel void fused_mlp_train(global float *restrict params, global float *restrict state1,
                            global float *restrict state2, global const int *net, int layers,
                            global const float *x, global const float *t,
                            global const int *order, int batch, int step0, int steps,
                            int slice, global float *grads, int grad_stride, int loss,
                            float inv_count, float lr, float momentum, int nesterov,
                            float weight_decay, float beta1, float beta2, float eps,
                            int decoupled, global const float *corrections,
                            global float *losses, int loss_offset, global int *skip,
                            local float *mem)
{
    const int lid = get_local_id(0), size = get_local_size(0), group = get_group_id(0);
    const int first = group * slice, count = min(slice, batch - first);  // samples here
    global float *const target = PARTIAL ? grads + (size_t)group * grad_stride : params;
    global const int *top = net + (layers - 1) * TABLE;
    const int n0 = net[2], n_last = top[3], act_last = top[4];
    local float *const out = mem + top[6];
    local float *delta = mem + net[layers * TABLE];
    local float *dnext = mem + net[layers * TABLE + 1];
    Hyper h = {lr, momentum, weight_decay, beta1, beta2, eps, 0.0f, 1.0f, nesterov, decoupled};

    for (int s = step0; s < step0 + steps; ++s) {
        global const int *rows = order + s * batch + first;
        h.step_size = corrections[2 * s];
        h.sqrt_bc2 = corrections[2 * s + 1];
        const int in_vectors = n0 / VW, in_units = in_vectors + n0 % VW;
        for (int t = lid; t < count * in_units; t += size) {  // the batch's rows of x
            const int b = t / in_units, u = t % in_units, j = unit_column(u, in_vectors);
            global const float *src = x + (size_t)rows[b] * n0 + j;
            local float *dst = mem + net[5] + b * n0 + j;
            if (u < in_vectors)
                STORE_BY_HAND(LOAD_BY_HAND(src), dst);
            else
                *dst = *src;
        }
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);

        for (int l = 0; l < layers; ++l) {  // forward
            global const int *L = net + l * TABLE;
            const int n_in = L[2], n_out = L[3], act = L[4];
            local const float *a = mem + L[5];
            local float *y = mem + L[6];
#if TEAM > 1
            forward_teams(params + L[0], params + L[1], n_in, n_out, a, y, count, act,
                          mem + net[layers * TABLE + 2], lid, size);
#else
            const int row_tiles = (n_out + RB - 1) / RB;
            for (int t = lid; t < row_tiles * ((count + SB - 1) / SB); t += size) {
                const int r0 = t % row_tiles * RB, b0 = t / row_tiles * SB;
                const int rows = min(RB, n_out - r0), samples = min(SB, count - b0);
                global const float *w = params + L[0] + (size_t)r0 * n_in;
                float4 z[SB];
                if (samples == SB) {
                    dot_tile(w, n_in, a + b0 * n_in, rows, z);
                } else {  // the batch's last samples, one at a time
                    for (int s = 0; s < samples; ++s) {
                        float4 z1[SB];
                        dot_tile1(w, n_in, a + (b0 + s) * n_in, rows, z1);
                        z[s] = z1[0];
                    }
                }
                global const float *bias = params + L[1] + r0;
                float4 bv = (float4)(bias[0], bias[LAST(1, rows)], bias[LAST(2, rows)],
                                     bias[LAST(3, rows)]);
                for (int s = 0; s < samples; ++s) {
                    float4 out = activate4(z[s] + bv, act);
                    local float *yr = y + (b0 + s) * n_out + r0;
                    yr[0] = out.s0;
                    if (rows > 1)
                        yr[1] = out.s1;
                    if (rows > 2)
                        yr[2] = out.s2;
                    if (rows > 3)
                        yr[3] = out.s3;
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
#endif
        }

        global float *loss_out = losses + loss_offset + s * batch + first;
        for (int b = lid; b < count; b += size)
            output_delta(out + b * n_last, t + (size_t)rows[b] * n_last, delta + b * n_last,
                         n_last, act_last, loss, inv_count, loss_out + b);
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        int finite = 1;
        for (int c = 0; c < count * n_last; ++c)
            finite &= finite_bits(delta[c]);
        if (PARTIAL && lid == 0)
            skip[group] = !finite;  // read by fused_mlp_apply
        if (!finite) {  // every work-item takes this branch or none
            if (!PARTIAL && lid == 0)
                skip[0] += 1;
            barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
            continue;
        }

        for (int l = layers - 1; l >= 0; --l) {  // backward + update
            global const int *L = net + l * TABLE;
            const int n_in = L[2], n_out = L[3];
            local const float *a = mem + L[5];
            // column units: n_in / VW vectors, then the n_in % VW tail columns one by one
            const int vectors = n_in / VW, units = vectors + n_in % VW;
            if (l > 0) {  // dL/dz of the layer below, from the weights before their update
                const int below = net[(l - 1) * TABLE + 4];
                for (int t = lid; t < units * ((count + BT - 1) / BT); t += size) {
                    const int u = t % units, b0 = t / units * BT, samples = min(BT, count - b0);
                    global const float *w = params + L[0];
                    const int j = unit_column(u, vectors);
                    if (u >= vectors)
                        input_grad1(w, n_in, n_out, delta, a, below, dnext, b0, samples, j);
                    else if (samples == 1)  // per sample: no repeated work
                        input_gradv1(w, n_in, n_out, delta, a, below, dnext, b0, 1, j);
                    else
                        input_gradv(w, n_in, n_out, delta, a, below, dnext, b0, samples, j);
                }
                barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
            }
            // weight units: runs of WG vectors of columns, the single vectors left, the
            // tail columns
            const int runs = vectors / WG, singles = vectors - WG * runs;
            const int wunits = units - (WG - 1) * runs;
            for (int t = lid; t < wunits * ((n_out + WB - 1) / WB); t += size) {
                const int u = t % wunits, r0 = t / wunits * WB, rows = min(WB, n_out - r0);
                if (u < runs)
                    weight_stepvg(target, state1, state2, L[0], n_in, n_out, a, delta, count,
                                  r0, rows, u * WG * VW, &h);
                else if (u < runs + singles)
                    weight_stepv(target, state1, state2, L[0], n_in, n_out, a, delta, count, r0,
                                 rows, (u + (WG - 1) * runs) * VW, &h);
                else
                    weight_step1(target, state1, state2, L[0], n_in, n_out, a, delta, count, r0,
                                 rows, vectors * VW + u - runs - singles, &h);
            }
            // the bias: its gradient is delta summed over the batch, VW rows at a time
            const int bias_vectors = n_out / VW;
            for (int u = lid; u < bias_vectors + n_out % VW; u += size) {
                const int r = unit_column(u, bias_vectors);
                if (u < bias_vectors) {
                    floatv g = (floatv)(0.0f);
                    for (int b = 0; b < count; ++b)
                        g += LOAD_BY_HAND(delta + b * n_out + r);
                    updatev(target, state1, state2, L[1] + r, g, &h);
                } else {
                    float g = 0.0f;
                    for (int b = 0; b < count; ++b)
                        g += delta[b * n_out + r];
                    update1(target, state1, state2, L[1] + r, g, &h);
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
            local float *swap = delta;
            delta = dnext;
            dnext = swap;
        }
    }
}

#if !PARTIAL
// The second launch of a step split over `groups` work-groups (fused_mlp_train built with
// PARTIAL=1 left each group's gradient of its slice of the batch in grads[group, ...]):
// work-item k, k + global size, ... sums the groups' gradients of parameter k and updates it
// (the step is skipped, and counted in skip[0], if any group's loss gradient was not finite).
kernel void fused_mlp_apply(global float *restrict params, global float *restrict state1,
                            global float *restrict state2, global const float *grads,
                            int groups, int n, global const int *flags, global int *skip,
                            int step, float lr, float momentum, int nesterov,
                            float weight_decay, float beta1, float beta2, float eps,
                            int decoupled, global const float *corrections)
{
    int bad = 0;
    for (int g = 0; g < groups; ++g)
        bad |= flags[g];
    if (bad) {
        if (get_global_id(0) == 0)
            skip[0] += 1;
        return;
    }
    const Hyper h = {lr, momentum, weight_decay, beta1, beta2, eps, corrections[2 * step],
                     corrections[2 * step + 1], nesterov, decoupled};
    for (int k = get_global_id(0); k < n; k += get_global_size(0)) {
        float g = grads[k];
        for (int group = 1; group < groups; ++group)
            g += grads[(size_t)group * n + k];
        update1(params, state1, state2, k, g, &h);
    }
}
#endif
