// A first kernel: one work-item adds one pair of elements.
kernel void vector_add(global const float *a, global const float *b, global float *out, int n)
{
    int i = get_global_id(0);
    // ### BEGIN SOLUTION
    // HINT: the global size may be rounded up past n: which work-items must do nothing?
    if (i < n)  // the global size may be rounded up past n
        out[i] = a[i] + b[i];
    // ### END SOLUTION
}

// One work-item scales one element: out = alpha * a.
kernel void vector_scale(global const float *a, global float *out, float alpha, int n)
{
    int i = get_global_id(0);
    // ### BEGIN SOLUTION
    // HINT: like vector_add: one element per work-item, and only the first n
    if (i < n)
        out[i] = alpha * a[i];
    // ### END SOLUTION
}
