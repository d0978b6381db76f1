// Kernel puzzle 16 (notebook 06): a softmax over each row, one work-group per row.

// row softmax: x is rows x cols (row-major); work-group r (get_group_id(0)) writes
// y[r, c] = exp(x[r, c] - top) / sum_c' exp(x[r, c'] - top), top = the row's largest value.
// Its L = get_local_size(0) work-items stride over the row (c = l, l + L, ...), and combine
// their partial maximum, then their partial sum, by tree reductions in scratch (L floats).
// Budget: at most 3 global loads and 1 global store per element.
kernel void puzzle_softmax(global const float *x, global float *y, local float *scratch,
                           int rows, int cols)
{
    // ### BEGIN SOLUTION
    // HINT: subtract the row's maximum before exp (exp(89) overflows a float); read
    // HINT: scratch[0] into a register and pass a barrier before scratch is reused
    int r = get_group_id(0), l = get_local_id(0), size = get_local_size(0);
    global const float *xr = x + r * cols;
    float top = -INFINITY;
    for (int c = l; c < cols; c += size)
        top = fmax(top, xr[c]);
    scratch[l] = top;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = size / 2; s > 0; s /= 2) {
        if (l < s)
            scratch[l] = fmax(scratch[l], scratch[l + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    top = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    float sum = 0.0f;
    for (int c = l; c < cols; c += size)
        sum += exp(xr[c] - top);
    scratch[l] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = size / 2; s > 0; s /= 2) {
        if (l < s)
            scratch[l] += scratch[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float total = scratch[0];
    for (int c = l; c < cols; c += size)
        y[r * cols + c] = exp(xr[c] - top) / total;
    // ### END SOLUTION
}
