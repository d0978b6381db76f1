// dot4(a, b, n): the dot product of n floats summed in four lanes of a float4 (four
// independent chains of adds instead of one, which a CPU runs about four times faster),
// then the last n % 4 one at a time. Included (`#include "dot4.h"`) by the kernels whose
// short dot products are the work (attention.cl, catch.cl), and by dense.cl for LOAD4 /
// STORE4 (its transposes).
#ifndef DOT4_H
#define DOT4_H
// LOAD4(p) / STORE4(v, p): vload4 / vstore4 of four floats at p, or with VLOAD 0 (built so
// where the compiler leaves those builtins as calls: Limits.inlines_vector_loads) the four
// floats one at a time.
#ifndef VLOAD
#define VLOAD 1
#endif
#if VLOAD
#define LOAD4(p) vload4(0, (p))
#define STORE4(v, p) vstore4((v), 0, (p))
#else
#define LOAD4(p) ((float4)((p)[0], (p)[1], (p)[2], (p)[3]))
#define STORE4(v, p) do { float4 v4_ = (v); global float *p4_ = (p); p4_[0] = v4_.x; \
    p4_[1] = v4_.y; p4_[2] = v4_.z; p4_[3] = v4_.w; } while (0)
#endif
inline float dot4(global const float *a, global const float *b, int n)
{
    float4 s4 = (float4)(0.0f);
    int k = 0;
    for (; k + 4 <= n; k += 4)
        s4 += LOAD4(a + k) * LOAD4(b + k);
    float s = (s4.x + s4.y) + (s4.z + s4.w);
    for (; k < n; ++k)
        s += a[k] * b[k];
    return s;
}
#endif
