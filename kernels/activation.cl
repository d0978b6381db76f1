// Activation functions shared by the layer kernels (joined with `// requires: activation.cl`).
// The codes ACT_NONE, ACT_TANH, ... ACT_SOFTMAX and LEAKY_SLOPE come from nnlib/codes.py as
// -D build options.

// act(z); softmax is applied per row by softmax_rows, so it passes z through here.
inline float activate(float z, int act)
{
    switch (act) {
    case ACT_TANH: return tanh(z);
    case ACT_SIGMOID: return 1.0f / (1.0f + exp(-z));
    case ACT_RELU: return z > 0.0f ? z : 0.0f;
    case ACT_LEAKY_RELU: return z > 0.0f ? z : LEAKY_SLOPE * z;
    default: return z;
    }
}

// d act / d z written with the output y = act(z), as the seed does.
inline float activate_grad(float y, int act)
{
    switch (act) {
    // BEGIN SOLUTION
    // HINT: one case per activation (ACT_TANH, ...), each returning f'(z) written with y = f(z)
    case ACT_TANH: return 1.0f - y * y;
    case ACT_SIGMOID: return y * (1.0f - y);
    case ACT_RELU: return y > 0.0f ? 1.0f : 0.0f;
    case ACT_LEAKY_RELU: return y > 0.0f ? 1.0f : LEAKY_SLOPE;
    // END SOLUTION
    default: return 1.0f;
    }
}

// One work-item per element: dz = dy * act'(y) (any activation except softmax).
kernel void activation_backward(global const float *y, global const float *dy,
                                global float *dz, int n, int act)
{
    int i = get_global_id(0);
    if (i < n)
        dz[i] = dy[i] * activate_grad(y[i], act);
}

// One work-item per row: y = softmax(z) in place, max subtracted for stability.
kernel void softmax_rows(global float *z, int rows, int cols)
{
    int r = get_global_id(0);
    if (r >= rows)
        return;
    global float *row = z + (size_t)r * cols;
    float m = row[0];
    for (int c = 1; c < cols; ++c)
        m = fmax(m, row[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) {
        row[c] = exp(row[c] - m);
        s += row[c];
    }
    for (int c = 0; c < cols; ++c)
        row[c] /= s;
}

// One work-item per row: dz = y * (dy - sum(dy * y)), the softmax Jacobian applied to dy.
kernel void softmax_backward_rows(global const float *y, global const float *dy,
                                  global float *dz, int rows, int cols)
{
    int r = get_global_id(0);
    if (r >= rows)
        return;
    size_t o = (size_t)r * cols;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c)
        s += dy[o + c] * y[o + c];
    for (int c = 0; c < cols; ++c)
        dz[o + c] = y[o + c] * (dy[o + c] - s);
}
