// Mini-batches gathered on the device: Sequential.fit uploads the training set once and
// takes each shuffled batch from it here, instead of copying every batch from the host.

// Work-item (j, b) copies element j of row order[first + b] of the data set into row b of
// the batch: batch[b, j] = data[order[first + b], j], for b < rows and j < cols.
kernel void gather_rows(global const float *data, global const int *order, int first,
                        int rows, int cols, global float *batch)
{
    int j = get_global_id(0), b = get_global_id(1);
    if (j >= cols || b >= rows)
        return;
    batch[(size_t)b * cols + j] = data[(size_t)order[first + b] * cols + j];
}
