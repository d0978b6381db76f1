// Mini-batches gathered on the device: Sequential.fit uploads the training set once and
// takes each shuffled batch from it here, instead of copying every batch from the host.

// A mini-batch's inputs and targets in one launch. Work-item (j, b) copies element j of
// row order[first + b] into row b of the batch: of the inputs for j < cols_x,
// x_batch[b, j] = x[order[first + b], j]; of the targets for the next cols_t,
// t_batch[b, j - cols_x] = t[order[first + b], j - cols_x]; for b < rows.
kernel void gather_rows(global const float *x, global const float *t, global const int *order,
                        int first, int rows, int cols_x, int cols_t, global float *x_batch,
                        global float *t_batch)
{
    int j = get_global_id(0), b = get_global_id(1);
    if (j >= cols_x + cols_t || b >= rows)
        return;
    size_t r = order[first + b];
    if (j < cols_x)
        x_batch[(size_t)b * cols_x + j] = x[r * cols_x + j];
    else
        t_batch[(size_t)b * cols_t + j - cols_x] = t[r * cols_t + j - cols_x];
}
