// Optimizer update rules, one work-item per parameter element.

// SGD with momentum, as torch.optim.SGD: v = mu v + g; w -= lr v (v is unused when mu = 0).
kernel void sgd_update(global float *w, global const float *g, global float *v,
                       int n, float lr, float momentum)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    float step = g[i];
    if (momentum != 0.0f) {
        step += momentum * v[i];
        v[i] = step;
    }
    w[i] -= lr * step;
}
