// Kernel puzzles 1-5 (notebook 00): one work-item, one element. Each kernel's comment says
// what its work-item computes; write the body where it says YOUR CODE HERE.

// map: n work-items exactly (no more). Work-item i writes out[i] = a[i] + 10.
kernel void puzzle_map(global const float *a, global float *out)
{
    // ### BEGIN SOLUTION
    // HINT: get_global_id(0) names the work-item, and so the element it owns
    int i = get_global_id(0);
    out[i] = a[i] + 10.0f;
    // ### END SOLUTION
}

// zip: n work-items exactly. Work-item i writes out[i] = a[i] + b[i].
kernel void puzzle_zip(global const float *a, global const float *b, global float *out)
{
    // ### BEGIN SOLUTION
    // HINT: like puzzle_map, with two inputs read at the same index
    int i = get_global_id(0);
    out[i] = a[i] + b[i];
    // ### END SOLUTION
}

// guard: more work-items than elements (the global size is rounded up to whole
// work-groups). Work-item i < n writes out[i] = a[i] + 10; the others do nothing.
kernel void puzzle_guard(global const float *a, global float *out, int n)
{
    // ### BEGIN SOLUTION
    // HINT: a work-item past the data must neither read nor write
    int i = get_global_id(0);
    if (i < n)
        out[i] = a[i] + 10.0f;
    // ### END SOLUTION
}

// 2-D indexing: a is rows x cols, row-major. Work-item (c, r) = (get_global_id(0),
// get_global_id(1)) writes out[r, c] = a[r, c] + 10 when it lies inside the matrix.
kernel void puzzle_map2d(global const float *a, global float *out, int rows, int cols)
{
    // ### BEGIN SOLUTION
    // HINT: row-major: element (r, c) is at r * cols + c; guard both dimensions
    int c = get_global_id(0), r = get_global_id(1);
    if (r < rows && c < cols)
        out[r * cols + c] = a[r * cols + c] + 10.0f;
    // ### END SOLUTION
}

// broadcast: a has cols values (a row), b has rows values (a column). Work-item
// (c, r) writes out[r, c] = a[c] + b[r] when it lies inside the rows x cols output.
kernel void puzzle_broadcast(global const float *a, global const float *b, global float *out,
                             int rows, int cols)
{
    // ### BEGIN SOLUTION
    // HINT: a is indexed by the column, b by the row
    int c = get_global_id(0), r = get_global_id(1);
    if (r < rows && c < cols)
        out[r * cols + c] = a[c] + b[r];
    // ### END SOLUTION
}
