// Kernel puzzles 6-14 (notebook 03): work-groups that share data through local memory.
// Work-group sizes are powers of two; get_local_size(0) gives yours (never assume a size).
// A `local float *` argument is scratch memory the host sized for you: its size is given
// in each kernel's comment. Write the bodies where it says YOUR CODE HERE.

// window: out[i] = a[i - 2] + a[i - 1] + a[i] for i < n, a value before a[0] counting as 0.
// Each work-group stages its L = get_local_size(0) elements and the 2 before them in tile
// (L + 2 floats), so each element of a is read from global memory about once, not three
// times. Budget: at most 1.5 global loads per element.
kernel void puzzle_window(global const float *a, global float *out, local float *tile, int n)
{
    // ### BEGIN SOLUTION
    // HINT: tile[l + 2] = a[i]; the first two work-items also fetch a[i - 2] into tile[l];
    // HINT: every work-item must have stored before any reads its neighbours' values
    int i = get_global_id(0), l = get_local_id(0);
    tile[l + 2] = i < n ? a[i] : 0.0f;
    if (l < 2)
        tile[l] = i >= 2 && i - 2 < n ? a[i - 2] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i < n)
        out[i] = tile[l] + tile[l + 1] + tile[l + 2];
    // ### END SOLUTION
}

// barriers: reverse each block of L = get_local_size(0) elements (the last block may be
// shorter: it holds the len = min(L, n - start) elements from start = get_group_id(0) L).
// Work-item l stores a[start + l] in tile (L floats); after a barrier it writes
// out[start + l] = tile[len - 1 - l]: global reads and writes both stay contiguous.
// Budget: one global load and one local load per element, at least one barrier.
kernel void puzzle_reverse(global const float *a, global float *out, local float *tile, int n)
{
    // ### BEGIN SOLUTION
    // HINT: the block's length is min(L, n - start); a barrier separates the stores to tile
    // HINT: from the loads of other work-items' values
    int l = get_local_id(0), start = get_group_id(0) * get_local_size(0);
    int len = min((int)get_local_size(0), n - start);
    if (l < len)
        tile[l] = a[start + l];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < len)
        out[start + l] = tile[len - 1 - l];
    // ### END SOLUTION
}

// sum: work-group g writes partial[g] = the sum of a[g L .. g L + L - 1] (the elements
// below n), L = get_local_size(0), by a tree reduction in scratch (L floats): log2(L)
// halving steps, each separated by a barrier. Budget: one global load per element, one
// global store per work-group, at most log2(L) + 1 barriers per work-item.
kernel void puzzle_sum(global const float *a, global float *partial, local float *scratch,
                       int n)
{
    // ### BEGIN SOLUTION
    // HINT: work-items past n contribute 0 (the identity of +); in each step, the lower half
    // HINT: adds the upper half: scratch[l] += scratch[l + s] for l < s
    int i = get_global_id(0), l = get_local_id(0);
    scratch[l] = i < n ? a[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s /= 2) {
        if (l < s)
            scratch[l] += scratch[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        partial[get_group_id(0)] = scratch[0];
    // ### END SOLUTION
}

// max: as puzzle_sum with the maximum: partial[g] = the largest of the work-group's
// elements below n. Budget: as puzzle_sum.
kernel void puzzle_max(global const float *a, global float *partial, local float *scratch,
                       int n)
{
    // ### BEGIN SOLUTION
    // HINT: which value can a work-item past n hold so that it never wins? (not 0: the data
    // HINT: may all be negative)
    int i = get_global_id(0), l = get_local_id(0);
    scratch[l] = i < n ? a[i] : -INFINITY;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s /= 2) {
        if (l < s)
            scratch[l] = fmax(scratch[l], scratch[l + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        partial[get_group_id(0)] = scratch[0];
    // ### END SOLUTION
}

// dot: work-group g writes partial[g] = sum of a[i] b[i] over its elements i < n
// (scratch: L floats). Budget: two global loads per element, one store per work-group.
kernel void puzzle_dot(global const float *a, global const float *b, global float *partial,
                       local float *scratch, int n)
{
    // ### BEGIN SOLUTION
    // HINT: multiply once while loading, then reduce the products as in puzzle_sum
    int i = get_global_id(0), l = get_local_id(0);
    scratch[l] = i < n ? a[i] * b[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s /= 2) {
        if (l < s)
            scratch[l] += scratch[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        partial[get_group_id(0)] = scratch[0];
    // ### END SOLUTION
}

// scan: out[i] = a[g L] + ... + a[i] for i < n (an inclusive prefix sum within each
// work-group's block), in scratch (L floats): in step s = 1, 2, 4, ... < L, work-item l
// adds the value s places to its left. Budget: one global load and one store per element,
// at most 2 log2(L) + 1 barriers per work-item.
kernel void puzzle_scan(global const float *a, global float *out, local float *scratch, int n)
{
    // ### BEGIN SOLUTION
    // HINT: read the left value into a register, barrier, then add it: reading and writing
    // HINT: scratch in the same step without a barrier between them is a race
    int i = get_global_id(0), l = get_local_id(0);
    scratch[l] = i < n ? a[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = 1; s < (int)get_local_size(0); s *= 2) {
        float left = l >= s ? scratch[l - s] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        scratch[l] += left;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < n)
        out[i] = scratch[l];
    // ### END SOLUTION
}

// transpose: a is rows x cols (row-major), out = a^T is cols x rows. Work-groups are
// T x T squares (T = get_local_size(0) = get_local_size(1)). Work-item (x, y) of group
// (gx, gy) reads a[gy T + y, gx T + x] into tile[y][x] (tile: T (T + 1) floats, row
// length T + 1), and after a barrier writes out[gx T + y, gy T + x] = tile[x][y]: both the
// reads and the writes walk along rows. Budget: one global load, one global store and one
// local load per element, at least one barrier.
kernel void puzzle_transpose(global const float *a, global float *out, local float *tile,
                             int rows, int cols)
{
    // ### BEGIN SOLUTION
    // HINT: the writing work-item (x, y) is not the one that read the value it writes:
    // HINT: the block's origin swaps (gx T, gy T) -> (gy T, gx T), the tile is read as [x][y]
    int x = get_local_id(0), y = get_local_id(1), t = get_local_size(0);
    int c0 = get_group_id(0) * t, r0 = get_group_id(1) * t;
    if (r0 + y < rows && c0 + x < cols)
        tile[y * (t + 1) + x] = a[(r0 + y) * cols + c0 + x];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (c0 + y < cols && r0 + x < rows)
        out[(c0 + y) * rows + r0 + x] = tile[x * (t + 1) + y];
    // ### END SOLUTION
}

// matmul: c = a b, a is m x k, b is k x n (row-major). Work-groups are T x T squares
// (T = get_local_size(0) = get_local_size(1)); work-item (x, y) of group (gx, gy) computes
// c[gy T + y, gx T + x]. For each block of T columns of a (rows of b) the work-group
// stages a T x T tile of a in ta and of b in tb (T T floats each), one element per
// work-item (0 outside the matrices), then each work-item takes T products from local
// memory. Budget: 2 ceil(k / T) global loads per output.
kernel void puzzle_matmul(global const float *a, global const float *b, global float *c,
                          local float *ta, local float *tb, int m, int k, int n)
{
    // ### BEGIN SOLUTION
    // HINT: two barriers per block: after the tiles are stored, and after they are used
    // HINT: (before the next block overwrites them)
    int x = get_local_id(0), y = get_local_id(1), t = get_local_size(0);
    int row = get_group_id(1) * t + y, col = get_group_id(0) * t + x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += t) {
        ta[y * t + x] = row < m && k0 + x < k ? a[row * k + k0 + x] : 0.0f;
        tb[y * t + x] = k0 + y < k && col < n ? b[(k0 + y) * n + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int q = 0; q < t; ++q)
            acc += ta[y * t + q] * tb[q * t + x];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < m && col < n)
        c[row * n + col] = acc;
    // ### END SOLUTION
}

// histogram: values holds n bin numbers in 0 .. bins - 1; counts (bins numbers, zero
// on entry) gets counts[v] = how many values equal v. Work-item i < n counts values[i];
// many work-items add to the same bin at once, so the addition must be atomic.
kernel void puzzle_histogram(global const int *values, global int *counts, int n, int bins)
{
    // ### BEGIN SOLUTION
    // HINT: counts[v]++ is a read, an add and a write: two work-items can read the same old
    // HINT: count; atomic_inc(&counts[v]) is one indivisible step
    int i = get_global_id(0);
    if (i < n)
        atomic_inc(&counts[values[i]]);
    // ### END SOLUTION
}
