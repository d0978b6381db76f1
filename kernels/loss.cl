// Losses and the output gradient (the seed's CalcOutputGradient), computed on the device.
// requires: activation.cl
// The codes LOSS_MSE and LOSS_CROSS_ENTROPY come from nnlib/codes.py as -D build options.
#include "larger.h"
#include "loss_term.h"

// One work-item per output element: dz = dL/dz of the output layer's pre-activation.
// MSE, mean over every element:  dz = 2 (y - t) / count * act'(y).
// Cross-entropy after softmax, mean over the batch: dz = (y - t) / batch.
kernel void output_gradient(global const float *y, global const float *t, global float *dz,
                            int n, float inv_count, int loss, int act)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    // ### BEGIN SOLUTION
    // HINT: differentiate the mean loss (MSE: through the output activation too);
    // HINT: exercises.hint("output_gradient", 2) gives the formula
    float d = y[i] - t[i];
    dz[i] = loss == LOSS_MSE ? 2.0f * d * inv_count * activate_grad(y[i], act) : d * inv_count;
    // ### END SOLUTION
}

// One work-item per sample: the row's summed loss, stored at out[out_offset + row]
// (the host adds the rows up when the value is asked for).
kernel void loss_rows(global const float *y, global const float *t, global float *out,
                      int out_offset,
                      int rows, int cols, int loss)
{
    int r = get_global_id(0);
    if (r >= rows)
        return;
    size_t o = (size_t)r * cols;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c)
        s += loss_term(y[o + c], t[o + c], loss);
    out[out_offset + r] = s;
}
