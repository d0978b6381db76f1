// dot4(a, b, n): the dot product of n floats summed in four lanes of a float4 (four
// independent chains of adds instead of one, which a CPU runs about four times faster),
// then the last n % 4 one at a time. Included (`#include "dot4.h"`) by the kernels whose
// short dot products are the work (attention.cl, catch.cl).
#ifndef DOT4_H
#define DOT4_H
inline float dot4(global const float *a, global const float *b, int n)
{
    float4 s4 = (float4)(0.0f);
    int k = 0;
    for (; k + 4 <= n; k += 4)
        s4 += vload4(0, a + k) * vload4(0, b + k);
    float s = (s4.x + s4.y) + (s4.z + s4.w);
    for (; k < n; ++k)
        s += a[k] * b[k];
    return s;
}
#endif
