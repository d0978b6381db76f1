// Optimizer update rules. Each update kernel handles one parameter tensor: one work-item per
// element, except Adam-mini, which uses one work-group per block.
//
// Non-finite gradients: before a step, check_finite raises skip[1] if any gradient element is
// NaN or infinite; every update kernel then returns without touching weights or state, and
// skip_end adds the skipped step to skip[0] (read by the host only when asked).
// Host-side numbers: step_size = lr / (1 - beta1^t), sqrt_bc2 = sqrt(1 - beta2^t), computed in
// float64 on the host as PyTorch does.

// One work-item: clear this step's flag.
kernel void skip_begin(global int *skip)
{
    skip[1] = 0;
}

// One work-item per gradient element: flag the step if the element is NaN or infinite.
kernel void check_finite(global const float *g, int n, global int *skip)
{
    int i = get_global_id(0);
    if (i < n && !isfinite(g[i]))
        atomic_or(&skip[1], 1);
}

// One work-item: count the step if it was skipped.
kernel void skip_end(global int *skip)
{
    skip[0] += skip[1];
}

// SGD as torch.optim.SGD (dampening 0): g' = g + wd w; v = mu v + g';
// w -= lr (g' + mu v) with Nesterov, else w -= lr v (without momentum, w -= lr g').
kernel void sgd_update(global float *w, global const float *g, global float *v,
                       global const int *skip, int n, float lr, float momentum,
                       int nesterov, float weight_decay)
{
    int i = get_global_id(0);
    if (i >= n || skip[1])
        return;
    // BEGIN SOLUTION
    // HINT: g' = g + weight_decay w; v = momentum v + g'; w -= lr v (Nesterov: lr (g' + momentum v))
    float grad = g[i] + weight_decay * w[i];
    float step = grad;
    if (momentum != 0.0f) {
        float vel = momentum * v[i] + grad;
        v[i] = vel;
        step = nesterov ? grad + momentum * vel : vel;
    }
    w[i] -= lr * step;
    // END SOLUTION
}

// Adam / AdamW as torch.optim: with decoupled decay (AdamW) w *= 1 - lr wd first, else (Adam)
// g' = g + wd w; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
// w -= step_size m / (sqrt(v) / sqrt_bc2 + eps)   (eps outside the root, after correction).
kernel void adam_update(global float *w, global const float *g, global float *m,
                        global float *v, global const int *skip, int n, float lr,
                        float beta1, float beta2, float eps, float weight_decay, int decoupled,
                        float step_size, float sqrt_bc2)
{
    int i = get_global_id(0);
    if (i >= n || skip[1])
        return;
    float wi = w[i], grad = g[i];
    if (decoupled)
        wi *= 1.0f - lr * weight_decay;
    else
        grad += weight_decay * wi;
    float mi = beta1 * m[i] + (1.0f - beta1) * grad;
    float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    w[i] = wi - step_size * mi / (sqrt(vi) / sqrt_bc2 + eps);
}

// Adam-mini (official v1.1.1): one work-group per block of `block` consecutive elements.
// The group's work-items stride over the block summing g^2 (any block size works, whatever
// the work-group size), reduce the sums in local memory by halving (the local size is a power
// of two), and update the block's single second moment vb = b2 vb + (1-b2) mean(g^2). Then
// they stride again to update m and w as AdamW does, with vb in place of v.
kernel void adam_mini_update(global float *w, global const float *g, global float *m,
                             global float *vb, global const int *skip, int block,
                             float lr, float beta1, float beta2, float eps,
                             float weight_decay, float step_size, float sqrt_bc2,
                             local float *partial)
{
    int b = get_group_id(0), lid = get_local_id(0), size = get_local_size(0);
    if (skip[1])
        return;
    size_t first = (size_t)b * block;
    float sum = 0.0f;
    for (int i = lid; i < block; i += size)
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
    if (lid == 0)
        vb[b] = v;
    float denom = sqrt(v) / sqrt_bc2 + eps;
    for (int i = lid; i < block; i += size) {
        size_t k = first + i;
        float mi = beta1 * m[k] + (1.0f - beta1) * g[k];
        m[k] = mi;
        w[k] = w[k] * (1.0f - lr * weight_decay) - step_size * mi / denom;
    }
}

// Adan (official sail-sg code; betas in the code's convention, e.g. 0.98, 0.92, 0.99):
// diff = g - g_prev (0 on the first step, where g_prev = g; t is the host's step count,
// skip[0] the steps skipped before); m = b1 m + (1-b1) g;
// d = b2 d + (1-b2) diff; u = g + b2 diff; n = b3 n + (1-b3) u^2;
// denom = sqrt(n) / sqrt_bc3 + eps; step = step_size m / denom + step_size_d d / denom;
// proximal decay: w = (w - step) / (1 + lr wd); no_prox: w = w (1 - lr wd) - step.
kernel void adan_update(global float *w, global const float *g, global float *m,
                        global float *d, global float *nu, global float *g_prev,
                        global const int *skip, int n, float lr, float beta1, float beta2,
                        float beta3, float eps, float weight_decay, int no_prox, int t,
                        float step_size, float step_size_d, float sqrt_bc3)
{
    int i = get_global_id(0);
    if (i >= n || skip[1])
        return;
    float grad = g[i];
    int first = t - skip[0] == 1;  // the first step not skipped: g_prev = g
    float diff = first ? 0.0f : grad - g_prev[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * grad;
    float di = beta2 * d[i] + (1.0f - beta2) * diff;
    float u = grad + beta2 * diff;
    float ni = beta3 * nu[i] + (1.0f - beta3) * u * u;
    m[i] = mi;
    d[i] = di;
    nu[i] = ni;
    g_prev[i] = grad;
    float denom = sqrt(ni) / sqrt_bc3 + eps;
    float step = step_size * mi / denom + step_size_d * di / denom;
    w[i] = no_prox ? w[i] * (1.0f - lr * weight_decay) - step
                   : (w[i] - step) / (1.0f + lr * weight_decay);
}
