// Kernel puzzle 15 (notebook 05): one stage of a radix-2 FFT. Complex numbers are float2
// (x: real part, y: imaginary part).

// butterfly: n is a power of two, s the half-span of this stage (1, 2, 4, ... n/2); the
// twiddle table tw holds tw[m] = exp(-2 pi i m / n) for m < n/2. Work-item j < n/2 owns
// one butterfly: k = j mod s, i0 = 2 * s * (j / s) + k, i1 = i0 + s, w = tw[k * n / (2 * s)]:
//     dst[i0] = src[i0] + w src[i1],   dst[i1] = src[i0] - w src[i1].
kernel void puzzle_butterfly(global const float2 *src, global float2 *dst,
                             global const float2 *tw, int n, int s)
{
    // ### BEGIN SOLUTION
    // HINT: (a.x + i a.y)(b.x + i b.y) = (a.x b.x - a.y b.y) + i (a.x b.y + a.y b.x)
    int j = get_global_id(0);
    if (j >= n / 2)
        return;
    int k = j % s, i0 = (j / s) * 2 * s + k, i1 = i0 + s;
    float2 w = tw[k * (n / (2 * s))], b = src[i1];
    float2 t = (float2)(w.x * b.x - w.y * b.y, w.x * b.y + w.y * b.x);
    dst[i0] = src[i0] + t;
    dst[i1] = src[i0] - t;
    // ### END SOLUTION
}
