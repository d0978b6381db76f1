// The dense forward pass y = act(x W^T + b), register-blocked (notebook 03's exercise;
// nnlib's layers use the tuned kernels of kernels/dense.cl). Work-item (get_global_id(0),
// get_global_id(1)) computes the R x R block of y of samples b0 .. b0 + R - 1 and outputs
// j0 .. j0 + R - 1 (b0 = R get_global_id(1), j0 = R get_global_id(0)) in registers: each
// float4 of x and of W that it loads serves R dot products instead of one, as in the
// one-work-item-per-output kernel (dense_forward_seed).
// requires: activation.cl
#define R 4

kernel void dense_forward_blocked(global const float *x, global const float *w,
                                  global const float *bias, global float *y,
                                  int batch, int n_in, int n_out, int act)
{
    int j0 = R * get_global_id(0), b0 = R * get_global_id(1);
    if (j0 >= n_out || b0 >= batch)
        return;
    // ### BEGIN SOLUTION
    // HINT: rows past the data (b0 + r >= batch, j0 + c >= n_out) must be neither read nor
    // HINT: written; clamp the row you read and skip the store
    float acc[R][R] = {{0.0f}};
    global const float *xr[R], *wr[R];
    for (int r = 0; r < R; ++r) {  // rows past the data read the last row; never stored
        xr[r] = x + (size_t)min(b0 + r, batch - 1) * n_in;
        wr[r] = w + (size_t)min(j0 + r, n_out - 1) * n_in;
    }
    int k = 0;
    for (; k + 4 <= n_in; k += 4) {
        float4 xv[R], wv[R];
        for (int r = 0; r < R; ++r) {
            xv[r] = vload4(0, xr[r] + k);
            wv[r] = vload4(0, wr[r] + k);
        }
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < R; ++c)
                acc[r][c] += dot(xv[r], wv[c]);
    }
    for (; k < n_in; ++k)
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < R; ++c)
                acc[r][c] += xr[r][k] * wr[c][k];
    for (int r = 0; r < R && b0 + r < batch; ++r)
        for (int c = 0; c < R && j0 + c < n_out; ++c)
            y[(size_t)(b0 + r) * n_out + j0 + c] = activate(acc[r][c] + bias[j0 + c], act);
    // ### END SOLUTION
}
