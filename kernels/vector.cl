// A first kernel: one work-item adds one pair of elements.
kernel void vector_add(global const float *a, global const float *b, global float *out, int n)
{
    int i = get_global_id(0);
    // BEGIN SOLUTION
    // HINT: the global size may be rounded up past n, so check i < n before writing out[i]
    if (i < n)  // the global size may be rounded up past n
        out[i] = a[i] + b[i];
    // END SOLUTION
}
