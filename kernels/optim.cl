// Optimizer update rules. Each work-item of the elementwise rules (SGD, Adam, Adan, the
// finiteness check) handles VW consecutive elements of a tensor, or of all the optimizer's
// tensors laid end to end in one buffer, as one vector; Adam-mini uses one work-group per
// block of one tensor.
//
// Non-finite gradients: skip = [steps skipped before this one, this step non-finite]. The
// host keeps two such pairs and steps use them in turns: a step's check_finite first moves
// the pair of the step before (whose updates have run: the queue is in order) into its own
// count, then raises its own flag if any gradient element is NaN or infinite; every update
// kernel of the step, given that pair, then returns without touching weights or state. The
// host adds up both pairs only when asked.
// A step divides a moment by a denominator that is 0 only if eps = 0 and the second moment is
// 0 (a zero gradient so far); that step is taken as 0 (PyTorch would give 0/0 = NaN).
// Host-side numbers: step_size = lr / (1 - beta1^t), sqrt_bc2 = sqrt(1 - beta2^t), computed in
// float64 on the host as PyTorch does.

// VW: floats per work-item (1, 2, 4, 8 or 16) and VLOAD (1: vloadN/vstoreN builtins, 0: one
// float at a time), set by the host per device (nnlib/optim.py measures them, see
// nnlib/tuning.py). A CPU runs a work-item's vector in one SIMD register; a GPU prefers 1
// (its warps are the vectors); PoCL 3.0 does not inline the vloadN builtins. CHECK_MAX (1
// unless set): how check_finite gathers its elements' exponents, by max() (1) or by OR-ing
// comparisons (0), set by the host from the device (nnlib/optim.py).
#ifndef VW
#define VW 1
#endif
#ifndef CHECK_MAX
#define CHECK_MAX 1
#endif
#include "floatv.h"
#if VW == 1
#define ANY(c) (c)
typedef uint uintv;
typedef int intv;
#define AS_UINTV(x) as_uint(x)
#else
#define ANY(c) any(c)
typedef FLOATV_CAT(uint, VW) uintv;
typedef FLOATV_CAT(int, VW) intv;
#define AS_UINTV(x) FLOATV_CAT(as_uint, VW)(x)
#endif

// a / d where d > 0, else 0 (lane by lane for vectors).
#define RATIO(a, d) ((d) > 0.0f ? (a) / (d) : 0.0f)

// Flag the step in skip if any of the n gradient elements is NaN or infinite: the work-items
// walk the whole vectors of g in steps of the grid (the host launches one work-item per
// CHECK_VECTORS of them: nnlib/optim.py), looking at each element's exponent field, which is
// all ones only in NaN and the infinities (as floatv.h's finite_bits). With CHECK_MAX each
// keeps the largest field seen (one max instruction a vector where the compiler inlines
// max(); Intel's runtime ran the other way several times slower), else it ORs the
// comparisons' results (PoCL 3.0 calls max() as a library function, one call a vector).
// Atomics only on a bad element.
// Work-item 0 also checks the tail (n % VW elements) and moves the last step's pair, last,
// into this step's count.
kernel void check_finite(global const float *g, int n, global int *skip, global int *last)
{
    int whole = n / VW;
#if CHECK_MAX
    uintv top = 0;
    for (int i = get_global_id(0); i < whole; i += get_global_size(0))
        top = max(top, AS_UINTV(LOADV(g + i * VW)) & EXPONENT);
    int bad = ANY(top == EXPONENT);
#else
    intv found = 0;  // lanes: 0, or all ones (a vector comparison's true) once one is bad
    for (int i = get_global_id(0); i < whole; i += get_global_size(0))
        found |= (AS_UINTV(LOADV(g + i * VW)) & EXPONENT) == EXPONENT;
    int bad = ANY(found);
#endif
    if (get_global_id(0) == 0) {
        skip[0] += last[0] + last[1];
        last[0] = last[1] = 0;
        for (int k = whole * VW; k < n; ++k)
            bad |= !finite_bits(g[k]);
    }
    if (bad)
        atomic_or(&skip[1], 1);
}

// SGD as torch.optim.SGD (dampening 0): g' = g + wd w; v = mu v + g';
// w -= lr (g' + mu v) with Nesterov, else w -= lr v (without momentum, w -= lr g').
// One work-item per VW elements: wi, grad, vel hold VW values and the arithmetic is written
// as for one (a number times a vector scales every lane).
kernel void sgd_update(global float *w, global const float *g, global float *v,
                       global const int *skip, int n, float lr, float momentum,
                       int nesterov, float weight_decay)
{
    int first = VW * get_global_id(0);
    if (first >= n || skip[1])
        return;
    floatv wi = load_v(w, first, n), grad = load_v(g, first, n);
    // ### BEGIN SOLUTION
    // HINT: the comment above the kernel is the rule; exercises.hint("sgd_update", 1) a nudge
    // HINT: load_v(v, first, n) reads this item's VW velocities, store_v(x, v, first, n) writes them
    grad += weight_decay * wi;
    floatv step = grad;
    if (momentum != 0.0f) {
        floatv vel = momentum * load_v(v, first, n) + grad;
        store_v(vel, v, first, n);
        step = nesterov ? grad + momentum * vel : vel;
    }
    store_v(wi - lr * step, w, first, n);
    // ### END SOLUTION
}

// Adam / AdamW as torch.optim: with decoupled decay (AdamW) w *= 1 - lr wd first, else (Adam)
// g' = g + wd w; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
// w -= step_size m / (sqrt(v) / sqrt_bc2 + eps)   (eps outside the root, after correction).
// One work-item per VW elements.
kernel void adam_update(global float *w, global const float *g, global float *m,
                        global float *v, global const int *skip, int n, float lr,
                        float beta1, float beta2, float eps, float weight_decay, int decoupled,
                        float step_size, float sqrt_bc2)
{
    int first = VW * get_global_id(0);
    if (first >= n || skip[1])
        return;
    floatv wi = load_v(w, first, n), grad = load_v(g, first, n);
    if (decoupled)
        wi *= 1.0f - lr * weight_decay;
    else
        grad += weight_decay * wi;
    floatv mi = beta1 * load_v(m, first, n) + (1.0f - beta1) * grad;
    floatv vi = beta2 * load_v(v, first, n) + (1.0f - beta2) * grad * grad;
    store_v(mi, m, first, n);
    store_v(vi, v, first, n);
    store_v(wi - step_size * RATIO(mi, sqrt(vi) / sqrt_bc2 + eps), w, first, n);
}

// Adam-mini (official v1.1.1): one work-group per block of `block` consecutive elements.
// The group's work-items stride over the block summing g^2 (any block size works, whatever
// the work-group size), reduce the sums in local memory by halving (the local size is a power
// of two), and update the block's single second moment vb = b2 vb + (1-b2) mean(g^2). Then
// they stride again to update m and w as AdamW does, with vb in place of v. A skipped step
// guards the loads and stores instead of returning early: a return before the barriers
// corrupted the host's heap on PyPI's PoCL 3.0 (a crash after a few hundred launches).
kernel void adam_mini_update(global float *w, global const float *g, global float *m,
                             global float *vb, global const int *skip, int block,
                             float lr, float beta1, float beta2, float eps,
                             float weight_decay, float step_size, float sqrt_bc2,
                             local float *partial)
{
    int b = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    int skipping = skip[1];
    size_t first = (size_t)b * block;
    float sum = 0.0f;
    for (int i = lid; i < block && !skipping; i += size)
        sum += g[first + i] * g[first + i];
    partial[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = size / 2; s > 0; s /= 2) {  // runs down to s = 1: no term is lost
        if (lid < s)
            partial[lid] += partial[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float v = beta2 * vb[b] + (1.0f - beta2) * partial[0] / block;
    barrier(CLK_GLOBAL_MEM_FENCE);  // every item has read vb[b] before it is written
    if (lid == 0 && !skipping)
        vb[b] = v;
    float denom = sqrt(v) / sqrt_bc2 + eps;
    for (int i = lid; i < block && !skipping; i += size) {
        size_t k = first + i;
        float mi = beta1 * m[k] + (1.0f - beta1) * g[k];
        m[k] = mi;
        w[k] = w[k] * (1.0f - lr * weight_decay) - step_size * RATIO(mi, denom);
    }
}

// Adan (official sail-sg code; betas in the code's convention, e.g. 0.98, 0.92, 0.99):
// diff = g - g_prev (0 on the first step, where g_prev = g; t is the host's step count,
// skip[0] the steps skipped before this one); m = b1 m + (1-b1) g;
// d = b2 d + (1-b2) diff; u = g + b2 diff; n = b3 n + (1-b3) u^2;
// denom = sqrt(n) / sqrt_bc3 + eps; step = step_size m / denom + step_size_d d / denom;
// proximal decay: w = (w - step) / (1 + lr wd); no_prox: w = w (1 - lr wd) - step.
// The host folds the bias corrections into three numbers per step: step_size = lr / (1 - b1^t),
// step_size_d = lr b2 / (1 - b2^t) and sqrt_bc3 = sqrt(1 - b3^t).
// One work-item per VW elements.
kernel void adan_update(global float *w, global const float *g, global float *m,
                        global float *d, global float *nu, global float *g_prev,
                        global const int *skip, int n, float lr, float beta1, float beta2,
                        float beta3, float eps, float weight_decay, int no_prox, int t,
                        float step_size, float step_size_d, float sqrt_bc3)
{
    int first = VW * get_global_id(0);
    if (first >= n || skip[1])
        return;
    floatv grad = load_v(g, first, n);
    int first_step = t - skip[0] == 1;  // the first step not skipped: g_prev = g
    // ### BEGIN SOLUTION
    // HINT: the comment above the kernel is the rule; exercises.hint("adan_update", 1) a nudge
    floatv diff = first_step ? (floatv)0.0f : grad - load_v(g_prev, first, n);
    floatv mi = beta1 * load_v(m, first, n) + (1.0f - beta1) * grad;
    floatv di = beta2 * load_v(d, first, n) + (1.0f - beta2) * diff;
    floatv u = grad + beta2 * diff;
    floatv ni = beta3 * load_v(nu, first, n) + (1.0f - beta3) * u * u;
    store_v(mi, m, first, n);
    store_v(di, d, first, n);
    store_v(ni, nu, first, n);
    store_v(grad, g_prev, first, n);
    floatv denom = sqrt(ni) / sqrt_bc3 + eps;
    floatv step = step_size * RATIO(mi, denom) + step_size_d * RATIO(di, denom);
    floatv wi = load_v(w, first, n);
    store_v(no_prox ? wi * (1.0f - lr * weight_decay) - step
                    : (wi - step) / (1.0f + lr * weight_decay), w, first, n);
    // ### END SOLUTION
}
