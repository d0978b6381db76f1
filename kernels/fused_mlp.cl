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
// momentum, 2 Adam/AdamW) and VW (the device's preferred float vector width: the number of
// independent accumulators of a dot product, written as plain arithmetic that the compiler
// turns into SIMD lanes; PyPI PoCL calls, rather than inlines, builtins such as vload/fma).
// requires: activation.cl

#ifndef VW
#define VW 1
#endif
#ifndef RULE
#define RULE 0
#endif
#define RULE_SGD 0
#define RULE_MOMENTUM 1
#define RULE_ADAM 2
#define LOSS_MSE 0

// The network table `net`, TABLE ints per layer l:
//   [w, b]        offsets of the weight (n_out, n_in) and bias in the flat parameter array
//   [n_in, n_out] widths
//   [act]         activation code (activation.cl); softmax only on the last layer
//   [a_in, a_out] offsets in local memory of the batch's input and output activations
// then, after the layers: [delta, dnext] offsets of two (batch, max width) gradient buffers in
// local memory (dL/dz of a layer's outputs and of its inputs).
#define TABLE 8

typedef struct {
    float lr, momentum, weight_decay, beta1, beta2, eps, step_size, sqrt_bc2;
    int nesterov, decoupled;
} Hyper;

#define RB 4  // weight rows in one register block

// floatv: VW floats, one SIMD register on a CPU (VW 4, 8 or 16 from the device).
#if VW >= 16
typedef float16 floatv;
#define vloadv vload16
#define vstorev vstore16
#define VL 16
inline float sum_lanes(floatv v)
{
    float8 h = v.lo + v.hi;
    float4 q = h.lo + h.hi;
    return q.x + q.y + q.z + q.w;
}
#elif VW == 8
typedef float8 floatv;
#define vloadv vload8
#define vstorev vstore8
#define VL 8
inline float sum_lanes(floatv v)
{
    float4 q = v.lo + v.hi;
    return q.x + q.y + q.z + q.w;
}
#else
typedef float4 floatv;
#define vloadv vload4
#define vstorev vstore4
#define VL 4
inline float sum_lanes(floatv v)
{
    return v.x + v.y + v.z + v.w;
}
#endif
#define load1(o, p) ((p)[o])
#define store1(x, o, p) ((p)[o] = (x))

// out[i] = sum_j w[i n + j] a[j] for the `rows` (RB or fewer) weight rows from w: one vector
// of partial sums per row, each load of a shared by the rows, the tail added one by one.
inline void dot_rows(global const float *w, int n, local const float *a, int rows, float *out)
{
    floatv acc[RB];
    for (int i = 0; i < RB; ++i)
        acc[i] = (floatv)(0.0f);
    int j = 0;
    for (; j + VL <= n; j += VL) {
        floatv av = vloadv(0, a + j);
        for (int i = 0; i < rows; ++i)
            acc[i] += vloadv(0, w + i * n + j) * av;
    }
    for (int i = 0; i < rows; ++i) {
        float s = sum_lanes(acc[i]);
        for (int jj = j; jj < n; ++jj)
            s += w[i * n + jj] * a[jj];
        out[i] = s;
    }
}

// UPDATE(name, T, load, store): the update of the parameters at p[k ...] (one float or one
// vector T) from their gradient g, the rules of kernels/optim.cl (torch's):
// SGD  g' = g + wd w; v = mu v + g'; w -= lr (Nesterov: g' + mu v; else v; no momentum: g').
// Adam w *= 1 - lr wd (AdamW) or g' = g + wd w; m, v moving averages of g', g'^2;
//      w -= step_size m / (sqrt(v) / sqrt_bc2 + eps), the step taken as 0 where the
//      denominator is 0 (eps = 0 and v = 0: a gradient that has been 0 so far), as optim.cl.
#if RULE == RULE_ADAM
#define RATIO(a, d) ((d) > 0.0f ? (a) / (d) : 0.0f)
#define UPDATE(name, T, load, store)                                                     \
inline void name(global float *restrict p, global float *restrict s1,                    \
                 global float *restrict s2, int k, T g, const Hyper *h)                  \
{                                                                                        \
    T w = load(0, p + k);                                                                \
    if (h->decoupled)                                                                    \
        w *= 1.0f - h->lr * h->weight_decay;                                             \
    else                                                                                 \
        g += h->weight_decay * w;                                                        \
    T m = h->beta1 * load(0, s1 + k) + (1.0f - h->beta1) * g;                            \
    T v = h->beta2 * load(0, s2 + k) + (1.0f - h->beta2) * g * g;                        \
    store(m, 0, s1 + k);                                                                 \
    store(v, 0, s2 + k);                                                                 \
    store(w - h->step_size * RATIO(m, sqrt(v) / h->sqrt_bc2 + h->eps), 0, p + k);        \
}
#elif RULE == RULE_MOMENTUM
#define UPDATE(name, T, load, store)                                                     \
inline void name(global float *restrict p, global float *restrict s1,                    \
                 global float *restrict s2, int k, T g, const Hyper *h)                  \
{                                                                                        \
    T w = load(0, p + k);                                                                \
    g += h->weight_decay * w;                                                            \
    T v = h->momentum * load(0, s1 + k) + g;                                             \
    store(v, 0, s1 + k);                                                                 \
    store(w - h->lr * (h->nesterov ? g + h->momentum * v : v), 0, p + k);                \
}
#else
#define UPDATE(name, T, load, store)                                                     \
inline void name(global float *restrict p, global float *restrict s1,                    \
                 global float *restrict s2, int k, T g, const Hyper *h)                  \
{                                                                                        \
    T w = load(0, p + k);                                                                \
    store(w - h->lr * (g + h->weight_decay * w), 0, p + k);                              \
}
#endif
UPDATE(update1, float, load1, store1)
UPDATE(updatev, floatv, vloadv, vstorev)

// SWEEP(name, T, load, store, update): the backward step of one register block, weight rows
// r0 .. r0 + rows - 1 (rows <= RB) times the columns j ... of one T (a float or a vector) of
// a layer with n_in inputs and n_out outputs:
//   g[i]           = sum_b delta[b, r0 + i] a[b, j...]        (the weight gradient),
//   dnext[b, j...] += sum_i delta[b, r0 + i] W[r0 + i, j...]    (when dnext is not 0),
// then the update of those weights. W is read once into registers before it changes.
#define SWEEP(name, T, load, store, update)                                              \
inline void name(global float *restrict params, global float *restrict s1,               \
                 global float *restrict s2, int w_off, int n_in, int n_out,              \
                 local const float *a, local const float *delta, local float *dnext,     \
                 int batch, int r0, int rows, int j, const Hyper *h)                     \
{                                                                                        \
    T g[RB], w[RB];                                                                      \
    for (int i = 0; i < rows; ++i) {                                                     \
        g[i] = (T)(0.0f);                                                                \
        w[i] = load(0, params + w_off + (r0 + i) * n_in + j);                            \
    }                                                                                    \
    for (int b = 0; b < batch; ++b) {                                                    \
        T ab = load(0, a + b * n_in + j), sum = (T)(0.0f);                               \
        for (int i = 0; i < rows; ++i) {                                                 \
            float d = delta[b * n_out + r0 + i];                                         \
            g[i] += d * ab;                                                              \
            sum += d * w[i];                                                             \
        }                                                                                \
        if (dnext)                                                                       \
            store(load(0, dnext + b * n_in + j) + sum, 0, dnext + b * n_in + j);         \
    }                                                                                    \
    for (int i = 0; i < rows; ++i)                                                       \
        update(params, s1, s2, w_off + (r0 + i) * n_in + j, g[i], h);                    \
}
SWEEP(sweep1, float, load1, store1, update1)
SWEEP(sweepv, floatv, vloadv, vstorev, updatev)

// The output layer's dL/dz of sample b into delta (n values), and its loss into *loss_out:
// softmax + cross-entropy: dz = (p - t) inv_count, loss = -sum t log p;
// MSE through an elementwise activation: dz = 2 (y - t) inv_count act'(y), loss = sum (y-t)^2.
inline void output_delta(local float *y, global const float *t, local float *delta, int n,
                         int act, int loss, float inv_count, global float *loss_out)
{
    if (act == ACT_SOFTMAX) {
        float m = y[0];
        for (int c = 1; c < n; ++c)
            m = fmax(m, y[c]);
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
        if (loss == LOSS_MSE) {
            l += d * d;
            delta[c] = 2.0f * d * inv_count * activate_grad(y[c], act);
        } else {
            if (t[c] != 0.0f)
                l -= t[c] * log(fmax(y[c], 1e-12f));
            delta[c] = d * inv_count;
        }
    }
    *loss_out = l;
}

// The work-group (any size; its work-items share every loop below):
//   input      work-item i copies elements i, i + size, ... of the batch's rows of x;
//   forward    work-item i computes outputs i, i + size, ... of a layer for every sample
//              (one dot product of a weight row with the sample's activations each);
//   loss       work-item i takes samples i, i + size, ...: softmax, loss, output delta;
//   backward   work-item i owns one contiguous chunk of a layer's input columns: for every
//              output row r it adds W[r, chunk] dz[r] to the input gradient of its columns,
//              forms the weight gradient dz[r] a[chunk] (summed over the batch) and updates
//              W[r, chunk] and its optimizer state in place (the old W was used just before);
//              the bias rows are split like the forward outputs. No two work-items write the
//              same value, so a layer needs no reduction, only a barrier before the next.
// Barriers fence global memory too: the weights one work-item updates are read by the others
// in the next step's forward pass.
// A step whose output delta is not finite is skipped (no update; skip[0] counts it). Hidden
// deltas are finite then too while the weights are (|act'| <= 1 for tanh and sigmoid).
kernel void fused_mlp_train(global float *restrict params, global float *restrict state1,
                            global float *restrict state2, global const int *net, int layers,
                            global const float *x, global const float *t,
                            global const int *order, int batch, int steps, int loss,
                            float inv_count, float lr, float momentum, int nesterov,
                            float weight_decay, float beta1, float beta2, float eps,
                            int decoupled, global const float *corrections,
                            global float *losses, int loss_offset, global int *skip,
                            local float *mem)
{
    const int lid = get_local_id(0), size = get_local_size(0);
    global const int *top = net + (layers - 1) * TABLE;
    const int n0 = net[2], n_last = top[3], act_last = top[4];
    local float *const out = mem + top[6];
    local float *delta = mem + net[layers * TABLE];
    local float *dnext = mem + net[layers * TABLE + 1];
    Hyper h = {lr, momentum, weight_decay, beta1, beta2, eps, 0.0f, 1.0f, nesterov, decoupled};

    for (int s = 0; s < steps; ++s) {
        global const int *rows = order + s * batch;
        h.step_size = corrections[2 * s];
        h.sqrt_bc2 = corrections[2 * s + 1];
        for (int b = 0; b < batch; ++b)
            for (int j = lid; j < n0; j += size)
                mem[net[5] + b * n0 + j] = x[(size_t)rows[b] * n0 + j];
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);

        for (int l = 0; l < layers; ++l) {  // forward
            global const int *L = net + l * TABLE;
            const int n_in = L[2], n_out = L[3], act = L[4];
            local const float *a = mem + L[5];
            local float *y = mem + L[6];
            for (int r0 = RB * lid; r0 < n_out; r0 += RB * size) {
                const int rows = min(RB, n_out - r0);
                global const float *w = params + L[0] + (size_t)r0 * n_in;
                for (int b = 0; b < batch; ++b) {
                    float z[RB];
                    if (rows == RB)
                        dot_rows(w, n_in, a + b * n_in, RB, z);
                    else
                        dot_rows(w, n_in, a + b * n_in, rows, z);
                    for (int i = 0; i < rows; ++i)
                        y[b * n_out + r0 + i] = activate(z[i] + params[L[1] + r0 + i], act);
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        }

        for (int b = lid; b < batch; b += size)
            output_delta(out + b * n_last, t + (size_t)rows[b] * n_last, delta + b * n_last,
                         n_last, act_last, loss, inv_count, losses + loss_offset + s * batch + b);
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        int finite = 1;
        for (int c = 0; c < batch * n_last; ++c)
            finite &= isfinite(delta[c]);
        if (!finite) {  // every work-item takes this branch or none
            if (lid == 0)
                skip[0] += 1;
            barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
            continue;
        }

        for (int l = layers - 1; l >= 0; --l) {  // backward + update
            global const int *L = net + l * TABLE;
            const int n_in = L[2], n_out = L[3];
            local const float *a = mem + L[5];
            const int below = l > 0 ? net[(l - 1) * TABLE + 4] : ACT_NONE;
            // this work-item's columns: a multiple of VL wide, except at the end
            const int chunk = (n_in + VL * size - 1) / (VL * size) * VL;
            const int j0 = min(lid * chunk, n_in), j1 = min(j0 + chunk, n_in);
            local float *dn = l > 0 ? dnext : 0;
            if (l > 0)
                for (int b = 0; b < batch; ++b)
                    for (int j = j0; j < j1; ++j)
                        dnext[b * n_in + j] = 0.0f;
            for (int r0 = 0; r0 < n_out; r0 += RB) {
                const int rows = min(RB, n_out - r0);
                int j = j0;
                for (; j + VL <= j1; j += VL)
                    if (rows == RB)
                        sweepv(params, state1, state2, L[0], n_in, n_out, a, delta, dn, batch,
                               r0, RB, j, &h);
                    else
                        sweepv(params, state1, state2, L[0], n_in, n_out, a, delta, dn, batch,
                               r0, rows, j, &h);
                for (; j < j1; ++j)
                    sweep1(params, state1, state2, L[0], n_in, n_out, a, delta, dn, batch, r0,
                           rows, j, &h);
            }
            for (int r = lid; r < n_out; r += size) {
                float g = 0.0f;
                for (int b = 0; b < batch; ++b)
                    g += delta[b * n_out + r];
                update1(params, state1, state2, L[1] + r, g, &h);
            }
            if (l > 0)
                for (int b = 0; b < batch; ++b)
                    for (int j = j0; j < j1; ++j)
                        dnext[b * n_in + j] *= activate_grad(a[b * n_in + j], below);
            barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
            local float *swap = delta;
            delta = dnext;
            dnext = swap;
        }
    }
}
