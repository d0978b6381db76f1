// The discrete Fourier transform X_k = scale * sum_j x_j exp(-+2 pi i jk / n) of every row of a
// (rows, n) float2 array; `inverse` flips the sign of the exponent. nnlib/fft.py picks:
//   n = 2^a 3^b 5^c, two rows fit in local memory
//                     -> every Stockham stage (radix 2, 4, 3 and 5) between two local
//                        buffers, one launch in all: fft_local (a GPU: the work-items of a
//                        group share a row's butterflies) or fft_rows (a CPU: a work-item
//                        transforms several rows at once, one per pair of SIMD lanes);
//   longer such n     -> Stockham stages in global memory, ping-pong between two buffers, one
//                        launch per stage: fft_radix4_stage (preceded by one
//                        fft_radix2_stage when log2(n) is odd) for powers of two, fft_stage
//                        (any of the radices) otherwise;
//   n small otherwise -> dft_direct, O(n^2) per row but one launch;
//   n large otherwise -> Bluestein: a chirp turns the length-n DFT into a circular convolution
//                        of length m >= 2n - 1 (a power of two), done with the FFTs above.
// Twiddle and chirp tables are computed in float64 on the host, so every factor is exact
// to float32 precision.
// requires: complex.cl

// One work-item per butterfly (j, row), j < n/2, of the stage that merges the length-p
// transforms (p = 1, 2, 4, ..., n/2) into length-2p ones:
//   a = src[j], b = src[j + n/2] * w^k with k = j mod p, w = exp(-2 pi i / 2p);
//   dst[2j - k] = a + b, dst[2j - k + p] = a - b.
// Stockham's autosort order: the last stage leaves the transform in natural order, with no
// bit-reversal pass. tw[m] = exp(-2 pi i m / n), so w^k = tw[k * n / 2p].
kernel void fft_radix2_stage(global const float2 *src, global float2 *dst,
                             global const float2 *tw, int rows, int n, int p, int inverse,
                             float scale)
{
    int j = get_global_id(0), row = get_global_id(1);
    int nh = n / 2;
    if (j >= nh || row >= rows)
        return;
    src += (size_t)row * n;
    dst += (size_t)row * n;
    // ### BEGIN SOLUTION
    // HINT: one butterfly per work-item: it reads src[j] and src[j + n/2], writes two outputs
    // HINT: p apart; exercises.hint("fft_radix2_stage", 2) gives the formula
    int k = j & (p - 1);
    float2 w = tw[k * (nh / p)];
    if (inverse)
        w.y = -w.y;
    float2 a = src[j], b = cmul(src[j + nh], w);
    int o = 2 * j - k;
    dst[o] = (a + b) * scale;
    dst[o + p] = (a - b) * scale;
    // ### END SOLUTION
}

// One work-item per radix-4 butterfly (j, row), j < n/4, merging length-p transforms into
// length-4p ones (p = 1 or 2, then times 4): with k = j mod p and w = exp(-2 pi i / 4p),
//   a_r = src[j + r n/4] w^(rk), r = 0..3;   dst[4j - 3k + q p] = sum_r a_r (-i)^(rq),
// a 4-point DFT that needs only additions and swaps. Half the passes over memory of radix 2.
kernel void fft_radix4_stage(global const float2 *src, global float2 *dst,
                             global const float2 *tw, int rows, int n, int p, int inverse,
                             float scale)
{
    int j = get_global_id(0), row = get_global_id(1);
    int nq = n / 4;
    if (j >= nq || row >= rows)
        return;
    src += (size_t)row * n;
    dst += (size_t)row * n;
    int k = j & (p - 1), s = nq / p;  // w^(rk) = tw[r k s]
    float2 w1 = tw[k * s], w2 = tw[2 * k * s], w3 = tw[3 * k * s];
    if (inverse) {
        w1.y = -w1.y;
        w2.y = -w2.y;
        w3.y = -w3.y;
    }
    float2 a0 = src[j], a1 = cmul(src[j + nq], w1);
    float2 a2 = cmul(src[j + 2 * nq], w2), a3 = cmul(src[j + 3 * nq], w3);
    float2 s02 = a0 + a2, d02 = a0 - a2, s13 = a1 + a3, d13 = a1 - a3;
    float2 rot = inverse ? (float2)(-d13.y, d13.x) : (float2)(d13.y, -d13.x);  // -+i d13
    int o = 4 * j - 3 * k;
    dst[o] = (s02 + s13) * scale;
    dst[o + p] = (d02 + rot) * scale;
    dst[o + 2 * p] = (s02 - s13) * scale;
    dst[o + 3 * p] = (d02 - rot) * scale;
}

// ---------------------------------------------------------------- mixed radix
// A Stockham stage of radix r (2, 3, 4 or 5) merges the length-p transforms into length-rp
// ones. Butterfly j < n/r, with k = j mod p and w = exp(-+2 pi i / rp), reads
//   a_q = src[j + q n/r] w^(qk)  (q < r; w^(qk) = tw[q k n/(rp)]; tw is conjugated, by the
//                                 host, for an inverse transform)
// and writes dst[r j - (r-1) k + q' p] = sum_q a_q exp(-+2 pi i q q' / r), the r-point DFT.
// The r-point DFTs below work in place on a[0 .. r-1]; sgn is 1 forward, -1 inverse, and
// rot(z, sgn) = -+i z. Each radix has its own function and its own copy of the stage loop
// (STAGE), so that r is a constant there: the loops over q unroll and a[] stays in registers.
// They are written once for any complex type T (DFTS(T)): float2, and rowsv of fft_rows below
// (several rows' values, interleaved (re, im) pairs), where rot swaps each pair.
#ifndef VR
#define VR 8
#endif
#define ALT2 -1.0f, 1.0f
#define ALT4 ALT2, ALT2
#define ALT8 ALT4, ALT4
// GATHER(in, i): element i of the rows in[0 .. VR-1] as one rowsv; SCATTER(out, i, v) the
// reverse (plain loads, stores and swizzles: PyPI's PoCL calls vloadN/vstoreN, slowly).
#define G2(in, i, r) (in)[r][i], (in)[(r) + 1][i]
#if VR == 2
typedef float4 rowsv;
#define SWAP_PAIRS(z) ((z).s1032)
#define PAIR_SIGNS ((rowsv)(ALT4))
#define GATHER(in, i) ((rowsv)(G2(in, i, 0)))
#define SCATTER(out, i, v) { rowsv v_ = (v); (out)[0][i] = v_.s01; (out)[1][i] = v_.s23; }
#elif VR == 4
typedef float8 rowsv;
#define SWAP_PAIRS(z) ((z).s10325476)
#define PAIR_SIGNS ((rowsv)(ALT8))
#define GATHER(in, i) ((rowsv)(G2(in, i, 0), G2(in, i, 2)))
#define SCATTER(out, i, v) { rowsv v_ = (v); (out)[0][i] = v_.s01; (out)[1][i] = v_.s23;   \
                             (out)[2][i] = v_.s45; (out)[3][i] = v_.s67; }
#else
typedef float16 rowsv;
#define SWAP_PAIRS(z) ((z).s1032547698badcfe)
#define PAIR_SIGNS ((rowsv)(ALT8, ALT8))
#define GATHER(in, i) ((rowsv)(G2(in, i, 0), G2(in, i, 2), G2(in, i, 4), G2(in, i, 6)))
#define SCATTER(out, i, v) { rowsv v_ = (v); (out)[0][i] = v_.s01; (out)[1][i] = v_.s23;   \
                             (out)[2][i] = v_.s45; (out)[3][i] = v_.s67;                 \
                             (out)[4][i] = v_.s89; (out)[5][i] = v_.sab;                 \
                             (out)[6][i] = v_.scd; (out)[7][i] = v_.sef; }
#endif
#define OVL __attribute__((overloadable))

inline float2 OVL rot(float2 z, float sgn) { return sgn * (float2)(z.y, -z.x); }

// i z of each pair: (re, im) -> (-im, re)
inline rowsv times_i(rowsv z) { return SWAP_PAIRS(z) * PAIR_SIGNS; }

inline rowsv OVL rot(rowsv z, float sgn) { return -sgn * times_i(z); }

// each pair (row) times the same complex w
inline rowsv cmul_rows(rowsv z, float2 w) { return z * w.x + times_i(z) * w.y; }

// (c1, c2 = cos 2pi/5, cos 4pi/5; s1, s2 the sines)
#define DFTS(T)                                                                          \
inline void OVL dft2(T *a, float sgn)                                                    \
{                                                                                        \
    T t = a[0] - a[1];                                                                   \
    a[0] += a[1];                                                                        \
    a[1] = t;                                                                            \
}                                                                                        \
                                                                                         \
inline void OVL dft3(T *a, float sgn)                                                    \
{                                                                                        \
    const float s3 = 0.866025403784438647f; /* sin(2 pi / 3) */                          \
    T t = a[1] + a[2], d = s3 * (a[1] - a[2]), m = a[0] - 0.5f * t;                      \
    a[0] += t;                                                                           \
    a[1] = m + rot(d, sgn);                                                              \
    a[2] = m - rot(d, sgn);                                                              \
}                                                                                        \
                                                                                         \
inline void OVL dft4(T *a, float sgn)                                                    \
{                                                                                        \
    T s02 = a[0] + a[2], d02 = a[0] - a[2], s13 = a[1] + a[3], d13 = a[1] - a[3];        \
    a[0] = s02 + s13;                                                                    \
    a[1] = d02 + rot(d13, sgn);                                                          \
    a[2] = s02 - s13;                                                                    \
    a[3] = d02 - rot(d13, sgn);                                                          \
}                                                                                        \
                                                                                         \
inline void OVL dft5(T *a, float sgn)                                                    \
{                                                                                        \
    const float c1 = 0.309016994374947424f, c2 = -0.809016994374947424f; /* cos */       \
    const float s1 = 0.951056516295153572f, s2 = 0.587785252292473129f; /* sin */        \
    T t1 = a[1] + a[4], t2 = a[2] + a[3], d1 = a[1] - a[4], d2 = a[2] - a[3];            \
    T m1 = a[0] + c1 * t1 + c2 * t2, m2 = a[0] + c2 * t1 + c1 * t2;                      \
    T r1 = rot(s1 * d1 + s2 * d2, sgn), r2 = rot(s2 * d1 - s1 * d2, sgn);                \
    a[0] += t1 + t2;                                                                     \
    a[1] = m1 + r1;                                                                      \
    a[4] = m1 - r1;                                                                      \
    a[2] = m2 + r2;                                                                      \
    a[3] = m2 - r2;                                                                      \
}
DFTS(float2)
DFTS(rowsv)

// Butterflies j = first, first + step, ... < n/R of one radix-R stage from x to y, the
// outputs times `scale`.
#define STAGE(R, x, y, first, step)                                                      \
    for (int j = (first); j < n / (R); j += (step)) {                                    \
        int k = j % p, o = (R) * j - ((R) - 1) * k, s = n / ((R) * p);                   \
        float2 a[R];                                                                     \
        a[0] = (x)[j];                                                                   \
        for (int q = 1; q < (R); ++q)                                                    \
            a[q] = cmul((x)[j + q * (n / (R))], tw[q * k * s]);                          \
        dft##R(a, sgn);                                                                  \
        for (int q = 0; q < (R); ++q)                                                    \
            (y)[o + q * p] = a[q] * scale;                                               \
    }

// One work-item per butterfly (j, row) of one stage of radix r in global memory.
kernel void fft_stage(global const float2 *src, global float2 *dst, global const float2 *tw,
                      int rows, int n, int p, int r, int inverse, float scale)
{
    int j0 = get_global_id(0), row = get_global_id(1);
    if (j0 >= n / r || row >= rows)
        return;
    src += (size_t)row * n;
    dst += (size_t)row * n;
    float sgn = inverse ? -1.0f : 1.0f;
    switch (r) {
    case 2: STAGE(2, src, dst, j0, n) break;
    case 3: STAGE(3, src, dst, j0, n) break;
    case 4: STAGE(4, src, dst, j0, n) break;
    default: STAGE(5, src, dst, j0, n) break;
    }
}

// One work-group per `per_group` consecutive rows (so that a CPU, which runs a work-group as
// one task, does not pay its scheduling cost per short row), the whole transform of each in
// local memory (two buffers of n values): the work-items copy a row in (element i,
// i + size, ...), then for each stage take butterflies j = lid, lid + size, ... with a barrier
// between stages, and copy it out scaled. The radices (stages of them, from the host)
// multiply to n. One launch, one pass over global memory.
kernel void fft_local(global const float2 *src, global float2 *dst, global const float2 *tw,
                      global const int *radices, int stages, int rows, int n, int per_group,
                      int inverse, float out_scale, local float2 *buf)
{
    int lid = get_local_id(0), size = get_local_size(0);
    int first = get_group_id(1) * per_group, last = min(first + per_group, rows);
    const float sgn = inverse ? -1.0f : 1.0f, scale = 1.0f;
    for (int row = first; row < last; ++row) {  // the same count for every work-item
        local float2 *x = buf, *y = buf + n;
        global const float2 *in = src + (size_t)row * n;
        for (int i = lid; i < n; i += size)
            x[i] = in[i];
        barrier(CLK_LOCAL_MEM_FENCE);
        int p = 1;
        for (int st = 0; st < stages; ++st) {
            int r = radices[st];
            switch (r) {
            case 2: STAGE(2, x, y, lid, size) break;
            case 3: STAGE(3, x, y, lid, size) break;
            case 4: STAGE(4, x, y, lid, size) break;
            default: STAGE(5, x, y, lid, size) break;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            local float2 *t = x;
            x = y;
            y = t;
            p *= r;
        }
        global float2 *out = dst + (size_t)row * n;
        for (int i = lid; i < n; i += size)
            out[i] = x[i] * out_scale;
        barrier(CLK_LOCAL_MEM_FENCE);  // the next row overwrites the buffers
    }
}

// One radix-R stage of fft_rows from x to y: the butterflies j = jj + k (k = j mod p) taken
// k by k, so that the R - 1 twiddles are loaded once per k and no index needs a division.
#define ROWS_STAGE(R)                                                                    \
    for (int k = 0, s = n / ((R) * p); k < p; ++k) {                                     \
        float2 w[R];                                                                     \
        for (int q = 1; q < (R); ++q)                                                    \
            w[q] = tw[q * k * s];                                                        \
        for (int jj = 0; jj < n / (R); jj += p) {                                        \
            rowsv a[R];                                                                  \
            a[0] = x[jj + k];                                                            \
            for (int q = 1; q < (R); ++q)                                                \
                a[q] = cmul_rows(x[jj + k + q * (n / (R))], w[q]);                       \
            dft##R(a, sgn);                                                              \
            for (int q = 0; q < (R); ++q)                                                \
                y[(R) * jj + k + q * p] = a[q];                                          \
        }                                                                                \
    }

// The CPU's variant of fft_local: each work-item transforms VR rows at once, element i of the
// VR rows held in one rowsv (row r in the pair of lanes 2r, 2r + 1), so that every butterfly
// is VR butterflies in SIMD lanes with the same twiddles. Work-groups of one work-item, each
// taking `per_group` consecutive blocks of VR rows (PoCL pays a task per work-group); every
// Stockham stage of a block runs between two local buffers of n rowsv. Rows past the last are
// read clamped and never stored.
kernel void fft_rows(global const float2 *src, global float2 *dst, global const float2 *tw,
                     global const int *radices, int stages, int rows, int n, int per_group,
                     int inverse, float out_scale, local rowsv *buf)
{
    const float sgn = inverse ? -1.0f : 1.0f;
    int blocks = (rows + VR - 1) / VR;
    int first = get_group_id(0) * per_group, last = min(first + per_group, blocks);
    for (int b = first; b < last; ++b) {
        local rowsv *x = buf, *y = buf + n;
        global const float2 *in[VR];  // the block's rows, the last one repeated past the end
        global float2 *out[VR];
        for (int r = 0; r < VR; ++r) {
            size_t row = min(b * VR + r, rows - 1);
            in[r] = src + row * n;
            out[r] = dst + row * n;
        }
        for (int i = 0; i < n; ++i)
            x[i] = GATHER(in, i);
        barrier(CLK_LOCAL_MEM_FENCE);
        int p = 1;
        for (int st = 0; st < stages; ++st) {
            int r = radices[st];
            switch (r) {
            case 2: ROWS_STAGE(2) break;
            case 3: ROWS_STAGE(3) break;
            case 4: ROWS_STAGE(4) break;
            default: ROWS_STAGE(5) break;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            local rowsv *t = x;
            x = y;
            y = t;
            p *= r;
        }
        // a repeated row is written again with the same values, after the real one
        for (int i = 0; i < n; ++i)
            SCATTER(out, i, x[i] * out_scale);
        barrier(CLK_LOCAL_MEM_FENCE);  // the next block overwrites the buffers
    }
}

// One work-item per output (k, row): X_k = scale * sum_j x_j tw[jk mod n], with
// tw[m] = exp(-2 pi i m / n) (conjugated when inverse). The index jk mod n is stepped, never
// multiplied, so it cannot overflow.
kernel void dft_direct(global const float2 *src, global float2 *dst, global const float2 *tw,
                       int rows, int n, int inverse, float scale)
{
    int k = get_global_id(0), row = get_global_id(1);
    if (k >= n || row >= rows)
        return;
    global const float2 *x = src + (size_t)row * n;
    float2 sum = (float2)(0.0f, 0.0f);
    int m = 0;
    for (int j = 0; j < n; ++j) {
        float2 w = tw[m];
        if (inverse)
            w.y = -w.y;
        sum += cmul(x[j], w);
        m += k;
        if (m >= n)
            m -= n;
    }
    dst[(size_t)row * n + k] = sum * scale;
}

// Bluestein, step 1. One work-item per (j, row) of the padded (rows, m) array:
// a_j = x_j c_j for j < n, 0 after, with the chirp c_j = exp(-i pi j^2 / n).
// An inverse transform is conj(forward(conj(x))): x is conjugated here, the result in step 3.
kernel void bluestein_chirp_in(global const float2 *src, global float2 *dst,
                               global const float2 *chirp, int rows, int n, int m, int inverse)
{
    int j = get_global_id(0), row = get_global_id(1);
    if (j >= m || row >= rows)
        return;
    float2 v = (float2)(0.0f, 0.0f);
    if (j < n) {
        v = src[(size_t)row * n + j];
        if (inverse)
            v.y = -v.y;
        v = cmul(v, chirp[j]);
    }
    dst[(size_t)row * m + j] = v;
}

// Bluestein, step 2 (between the FFTs). One work-item per (j, row): a_j *= filter_j, the
// spectrum of the conjugate chirp laid out circularly (the convolution theorem).
kernel void bluestein_multiply(global float2 *a, global const float2 *filter, int rows, int m)
{
    int j = get_global_id(0), row = get_global_id(1);
    if (j >= m || row >= rows)
        return;
    size_t i = (size_t)row * m + j;
    a[i] = cmul(a[i], filter[j]);
}

// Bluestein, step 3. One work-item per output (k, row): X_k = scale * c_k y_k, conjugated
// back for an inverse transform. y is the (rows, m) circular convolution.
kernel void bluestein_chirp_out(global const float2 *y, global float2 *dst,
                                global const float2 *chirp, int rows, int n, int m,
                                int inverse, float scale)
{
    int k = get_global_id(0), row = get_global_id(1);
    if (k >= n || row >= rows)
        return;
    float2 v = cmul(y[(size_t)row * m + k], chirp[k]) * scale;
    if (inverse)
        v.y = -v.y;
    dst[(size_t)row * n + k] = v;
}

// ---------------------------------------------------------------- real <-> complex
// Each pair below is a map and its adjoint (the backward pass of the other).

// One work-item per element: z = x + 0i. Adjoint: real_part.
kernel void to_complex(global const float *x, global float2 *z, int count)
{
    int i = get_global_id(0);
    if (i < count)
        z[i] = (float2)(x[i], 0.0f);
}

// One work-item per element: x = Re z.
kernel void real_part(global const float2 *z, global float *x, int count)
{
    int i = get_global_id(0);
    if (i < count)
        x[i] = z[i].x;
}

// One work-item per complex element (j, row) of (rows, n): the real (rows, 2n) array
// [Re z | Im z], the block layout CATCH feeds to its real layers. Adjoint (and inverse):
// from_re_im, since G_z = dL/dRe + i dL/dIm.
kernel void re_im(global const float2 *z, global float *out, int rows, int n)
{
    int j = get_global_id(0), row = get_global_id(1);
    if (j >= n || row >= rows)
        return;
    float2 v = z[(size_t)row * n + j];
    out[(size_t)row * 2 * n + j] = v.x;
    out[(size_t)row * 2 * n + n + j] = v.y;
}

// One work-item per complex element (j, row): z = out[row, j] + i out[row, n + j].
kernel void from_re_im(global const float *r, global float2 *z, int rows, int n)
{
    int j = get_global_id(0), row = get_global_id(1);
    if (j >= n || row >= rows)
        return;
    size_t o = (size_t)row * 2 * n;
    z[(size_t)row * n + j] = (float2)(r[o + j], r[o + n + j]);
}
