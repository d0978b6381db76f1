// Mini-batches gathered on the device: Sequential.fit uploads the training set once and
// takes each shuffled batch from it here, instead of copying every batch from the host.

// A mini-batch's inputs and targets in one launch. Work-item b copies row order[first + b]
// whole into row b of the batch: x_batch[b, :] = x[order[first + b], :] and
// t_batch[b, :] = t[order[first + b], :], for b < rows. A row a work-item runs through
// contiguous memory, which a CPU compiler turns into vector copies; one work-item per element
// (a 2-D launch) ran several times slower on every CPU runtime measured.
kernel void gather_rows(global const float *x, global const float *t, global const int *order,
                        int first, int rows, int cols_x, int cols_t, global float *x_batch,
                        global float *t_batch)
{
    int b = get_global_id(0);
    if (b >= rows)
        return;
    size_t r = order[first + b];
    global const float *x_row = x + r * cols_x;
    global const float *t_row = t + r * cols_t;
    global float *x_out = x_batch + (size_t)b * cols_x;
    global float *t_out = t_batch + (size_t)b * cols_t;
    for (int j = 0; j < cols_x; ++j)
        x_out[j] = x_row[j];
    for (int j = 0; j < cols_t; ++j)
        t_out[j] = t_row[j];
}

// The same in the lanes design, for devices that run neighbouring work-items in the lanes of
// one vector instruction (Intel's CPU runtime, GPUs; nnlib.layers.dense_params
// .lanes_by_default): work-group (lanes, 1) copies row order[first + b] (b = get_global_id(1))
// and lane l the columns l, l + lanes, ..., so that the lanes read and write neighbouring
// floats. One work-item per row there puts 16 rows side by side in the lanes, each lane
// striding through its own row.
kernel void gather_rows_lanes(global const float *x, global const float *t,
                              global const int *order, int first, int rows, int cols_x,
                              int cols_t, global float *x_batch, global float *t_batch)
{
    int lane = get_local_id(0), lanes = get_local_size(0), b = get_global_id(1);
    if (b >= rows)
        return;
    size_t r = order[first + b];
    for (int j = lane; j < cols_x; j += lanes)
        x_batch[(size_t)b * cols_x + j] = x[r * cols_x + j];
    for (int j = lane; j < cols_t; j += lanes)
        t_batch[(size_t)b * cols_t + j] = t[r * cols_t + j];
}
