// Activation functions shared by the layer kernels (joined with `// requires: activation.cl`):
// the kernels' half of the activation table nnlib/activations.py, which gives the codes
// ACT_NONE, ACT_TANH, ... and LEAKY_SLOPE as -D build options. Every switch here has a case
// for each code of the table (tests/test_activations.py checks it); a launcher refuses any
// other code (nnlib/codes.py, CODED_ARGUMENTS), so no switch's default is ever reached. The
// vector derivative of fused_mlp.cl is activation_vector.h's.
#include "larger.h"

// tanh as a rational function, x P(x^2) / Q(x^2) of x = z clamped to [-9, 9] (beyond, tanh
// rounds to +-1 in float32): the Pade-like form of fast tanh in vectorised math libraries,
// its coefficients fitted by weighted least squares on the relative error; within 4e-7 of
// tanh, about 6 float32 ulp. Ten multiply-adds and a division, inline in any kernel and for
// float or float4 (T); PoCL's tanh is a function call for every value or vector, which cost
// the forward of a 64 x 240 -> 128 layer half as much again as its product. The clamp is
// written as comparisons: PoCL 3.0 calls clamp() too.
#define TANH_RATIONAL(T, z)                                                                  \
    {                                                                                        \
        T x = z > 9.0f ? (T)(9.0f) : z < -9.0f ? (T)(-9.0f) : z, t = x * x;                 \
        T p = (((1.33565641e-08f * t + 2.06105205e-05f) * t + 3.495678065e-03f) * t          \
               + 0.1338110217f) * t + 0.9999999796f;                                         \
        T q = (((7.777356777e-07f * t + 3.285780158e-04f) * t + 2.587732685e-02f) * t        \
               + 0.4671441782f) * t + 1.0f;                                                  \
        return x * p / q;                                                                    \
    }
inline float tanh_rational(float z) TANH_RATIONAL(float, z)
inline float4 tanh_rational4(float4 z) TANH_RATIONAL(float4, z)

// act(z); softmax is applied per row by softmax_rows, so it passes z through here.
inline float activate(float z, int act)
{
    switch (act) {
    case ACT_TANH: return tanh_rational(z);
    case ACT_SIGMOID: return 1.0f / (1.0f + exp(-z));
    case ACT_RELU: return z > 0.0f ? z : 0.0f;
    case ACT_LEAKY_RELU: return z > 0.0f ? z : LEAKY_SLOPE * z;
    case ACT_SILU: return z / (1.0f + exp(-z));
    case ACT_NONE:
    case ACT_SOFTMAX:
    default: return z;
    }
}

// act(z) on four values at once, as activate(): on CPU devices the vector forms of tanh and
// exp cost about as much as one scalar call.
inline float4 activate4(float4 z, int act)
{
    switch (act) {
    case ACT_TANH: return tanh_rational4(z);
    case ACT_SIGMOID: return 1.0f / (1.0f + exp(-z));
    case ACT_RELU: return select((float4)(0.0f), z, z > 0.0f);
    case ACT_LEAKY_RELU: return select(LEAKY_SLOPE * z, z, z > 0.0f);
    case ACT_SILU: return z / (1.0f + exp(-z));
    case ACT_NONE:
    case ACT_SOFTMAX:
    default: return z;
    }
}

// d act / d z written with the output y = act(z), as the article's design does (or with z
// for an activation whose derivative needs it: the table's `needs`).
inline float activate_grad(float y, int act)
{
    switch (act) {
    // ### BEGIN SOLUTION
    // HINT: one case per activation (ACT_TANH, ...), each returning f'(z) written with y = f(z)
    case ACT_TANH: return 1.0f - y * y;
    case ACT_SIGMOID: return y * (1.0f - y);
    case ACT_RELU: return y > 0.0f ? 1.0f : 0.0f;
    case ACT_LEAKY_RELU: return y > 0.0f ? 1.0f : LEAKY_SLOPE;
    // ### END SOLUTION
    case ACT_SILU: {  // written with z: y does not determine z
        float s = 1.0f / (1.0f + exp(-y));
        return s * (1.0f + y * (1.0f - s));
    }
    case ACT_NONE:
    default: return 1.0f;
    }
}

// One work-item per element: y = act(z) (any activation except softmax), for a layer that
// keeps z because its activation's derivative needs it.
kernel void activation_forward(global const float *z, global float *y, int n, int act)
{
    int i = get_global_id(0);
    if (i < n)
        y[i] = activate(z[i], act);
}

// One work-item per element: dz = dy * act'(s) (any activation except softmax), s the output
// y, or z for an activation whose derivative needs it.
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
        m = larger(m, row[c]);
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) {
        row[c] = exp(row[c] - m);
        s += row[c];
    }
    for (int c = 0; c < cols; ++c)
        row[c] /= s;
}

// dz = scale * y * (dy - sum(dy * y)) on one row: the softmax Jacobian applied to dy.
inline void softmax_jacobian_row(global const float *y, global const float *dy,
                                 global float *dz, int cols, float scale)
{
    float s = 0.0f;
    for (int c = 0; c < cols; ++c)
        s += dy[c] * y[c];
    for (int c = 0; c < cols; ++c)
        dz[c] = scale * y[c] * (dy[c] - s);
}

// One work-item per row: dz = y * (dy - sum(dy * y)), the softmax Jacobian applied to dy.
kernel void softmax_backward_rows(global const float *y, global const float *dy,
                                  global float *dz, int rows, int cols)
{
    int r = get_global_id(0);
    if (r < rows)
        softmax_jacobian_row(y + (size_t)r * cols, dy + (size_t)r * cols,
                             dz + (size_t)r * cols, cols, 1.0f);
}

// ---------------------------------------------------------------- Gumbel-softmax
// Jang et al. 2017, Maddison et al. 2017. One work-item per row of (rows, cols), with noise
// holding Gumbel draws g = -log(-log u): soft = softmax((logits + g) / tau) (the row's largest
// value subtracted before exp), hard = the one-hot of soft's largest entry (the first one on
// a tie): a sample of the categorical distribution softmax(logits), whatever tau.
kernel void gumbel_softmax_forward(global const float *logits, global const float *noise,
                                   global float *soft, global float *hard, int rows, int cols,
                                   float tau)
{
    int r = get_global_id(0);
    if (r >= rows)
        return;
    global const float *z = logits + (size_t)r * cols, *g = noise + (size_t)r * cols;
    global float *y = soft + (size_t)r * cols, *h = hard + (size_t)r * cols;
    // ### BEGIN SOLUTION
    // HINT: first pass: (logit + noise) / tau into y, keeping the largest (top) and its index
    // HINT: then exp(y - top) into y and their sum; last, y / sum, and h = 1 at that index, else 0
    float top = -INFINITY;
    int best = 0;
    for (int c = 0; c < cols; ++c) {
        y[c] = (z[c] + g[c]) / tau;
        if (y[c] > top) {
            top = y[c];
            best = c;
        }
    }
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) {
        y[c] = exp(y[c] - top);
        sum += y[c];
    }
    for (int c = 0; c < cols; ++c) {
        y[c] /= sum;
        h[c] = c == best ? 1.0f : 0.0f;
    }
    // ### END SOLUTION
}

// One work-item per row: the straight-through gradient. The forward pass used hard, the
// backward pass takes dL/dhard as dL/dsoft: dlogits = soft (dhard - sum(dhard soft)) / tau.
kernel void gumbel_softmax_backward(global const float *soft, global const float *dhard,
                                    global float *dlogits, int rows, int cols, float tau)
{
    int r = get_global_id(0);
    if (r < rows)
        softmax_jacobian_row(soft + (size_t)r * cols, dhard + (size_t)r * cols,
                             dlogits + (size_t)r * cols, cols, 1.0f / tau);
}
