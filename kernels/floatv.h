// floatv: VW floats as one OpenCL vector (VW 1, 2, 4, 8 or 16, a build option nnlib derives
// from the device's preferred width by nnlib.sizes.vector_width), with vloadv/vstorev its
// vloadN/vstoreN, and LOAD_BY_HAND(p) / STORE_BY_HAND(x, p) the same VW floats at p (global,
// local or private) one at a time: PoCL 3.0 calls vloadN/vstoreN rather than inlining them,
// and the compiler turns the loads by hand into one vector access. LOAD_UPTO(p, m) /
// STORE_UPTO(x, p, m): only the first m lanes (a tensor's tail; lanes past it load as 0),
// lane by lane at constant indices: a private array indexed at run time (a union of the
// vector and a float[VW]) made Intel's compiler, which vectorises across work-items, run the
// whole kernel several times slower. Included (`#include "floatv.h"`) after the file has
// settled VW (and VLOAD, 1 unless set). LOADV(p) / STOREV(x, p): the VW floats at p by
// vloadN / vstoreN (VLOAD 1) or one at a time (VLOAD 0: compilers that call vloadN rather
// than inline it); load_v / store_v: the same at p + first of a global tensor of n floats,
// its tail (lanes at or past n) by LOAD_UPTO / STORE_UPTO. sum_lanes4 sums four vectors'
// lanes; finite_bits tests a float for NaN and the infinities.
#ifndef FLOATV_H
#define FLOATV_H
#define LOAD_UPTO1_(p, m) ((m) > 0 ? (p)[0] : 0.0f)
#define LOAD_UPTO2_(p, m) ((float2)(LOAD_UPTO1_(p, m), LOAD_UPTO1_((p) + 1, (m) - 1)))
#define LOAD_UPTO4_(p, m) ((float4)(LOAD_UPTO2_(p, m), LOAD_UPTO2_((p) + 2, (m) - 2)))
#define LOAD_UPTO8_(p, m) ((float8)(LOAD_UPTO4_(p, m), LOAD_UPTO4_((p) + 4, (m) - 4)))
#define LOAD_UPTO16_(p, m) ((float16)(LOAD_UPTO8_(p, m), LOAD_UPTO8_((p) + 8, (m) - 8)))
#define STORE_UPTO1_(x, p, m) do { if ((m) > 0) (p)[0] = (x); } while (0)
#define STORE_UPTO2_(x, p, m) \
    do { STORE_UPTO1_((x).s0, p, m); STORE_UPTO1_((x).s1, (p) + 1, (m) - 1); } while (0)
#define STORE_UPTO4_(x, p, m) \
    do { STORE_UPTO2_((x).lo, p, m); STORE_UPTO2_((x).hi, (p) + 2, (m) - 2); } while (0)
#define STORE_UPTO8_(x, p, m) \
    do { STORE_UPTO4_((x).lo, p, m); STORE_UPTO4_((x).hi, (p) + 4, (m) - 4); } while (0)
#define STORE_UPTO16_(x, p, m) \
    do { STORE_UPTO8_((x).lo, p, m); STORE_UPTO8_((x).hi, (p) + 8, (m) - 8); } while (0)
#ifndef VW
#error "define VW before including floatv.h"
#elif VW == 1
typedef float floatv;
#define vloadv(i, p) ((p)[i])
#define vstorev(x, i, p) ((p)[i] = (x))
#define LOAD_BY_HAND(p) (*(p))
#define STORE_BY_HAND(x, p) (*(p) = (x))
#define LOAD_UPTO(p, m) LOAD_UPTO1_(p, m)
#define STORE_UPTO(x, p, m) STORE_UPTO1_(x, p, m)
#else
#define FLOATV_CAT_(a, b) a##b
#define FLOATV_CAT(a, b) FLOATV_CAT_(a, b)
typedef FLOATV_CAT(float, VW) floatv;
#define vloadv FLOATV_CAT(vload, VW)
#define vstorev FLOATV_CAT(vstore, VW)
#define STORE2_(x, p) do { (p)[0] = (x).s0; (p)[1] = (x).s1; } while (0)
#define STORE4_(x, p) do { STORE2_((x).lo, p); STORE2_((x).hi, (p) + 2); } while (0)
#define STORE8_(x, p) do { STORE4_((x).lo, p); STORE4_((x).hi, (p) + 4); } while (0)
#if VW == 16
#define LOAD_BY_HAND(p) ((float16)((p)[0], (p)[1], (p)[2], (p)[3], (p)[4], (p)[5], (p)[6], \
    (p)[7], (p)[8], (p)[9], (p)[10], (p)[11], (p)[12], (p)[13], (p)[14], (p)[15]))
#define STORE_BY_HAND(x, p) do { STORE8_((x).lo, p); STORE8_((x).hi, (p) + 8); } while (0)
#define LOAD_UPTO(p, m) LOAD_UPTO16_(p, m)
#define STORE_UPTO(x, p, m) STORE_UPTO16_(x, p, m)
#elif VW == 8
#define LOAD_BY_HAND(p) \
    ((float8)((p)[0], (p)[1], (p)[2], (p)[3], (p)[4], (p)[5], (p)[6], (p)[7]))
#define STORE_BY_HAND(x, p) STORE8_(x, p)
#define LOAD_UPTO(p, m) LOAD_UPTO8_(p, m)
#define STORE_UPTO(x, p, m) STORE_UPTO8_(x, p, m)
#elif VW == 4
#define LOAD_BY_HAND(p) ((float4)((p)[0], (p)[1], (p)[2], (p)[3]))
#define STORE_BY_HAND(x, p) STORE4_(x, p)
#define LOAD_UPTO(p, m) LOAD_UPTO4_(p, m)
#define STORE_UPTO(x, p, m) STORE_UPTO4_(x, p, m)
#else
#define LOAD_BY_HAND(p) ((float2)((p)[0], (p)[1]))
#define STORE_BY_HAND(x, p) STORE2_(x, p)
#define LOAD_UPTO(p, m) LOAD_UPTO2_(p, m)
#define STORE_UPTO(x, p, m) STORE_UPTO2_(x, p, m)
#endif
#endif

#ifndef VLOAD
#define VLOAD 1
#endif
#ifndef WHOLE_VECTORS
#define WHOLE_VECTORS 0
#endif
#if VW == 1 || !VLOAD
#define LOADV(p) LOAD_BY_HAND(p)
#define STOREV(x, p) STORE_BY_HAND(x, p)
#else
#define LOADV(p) vloadv(0, p)
#define STOREV(x, p) vstorev(x, 0, p)
#endif

// Elements first .. first + VW - 1 of p; those at or past n read as 0 (the tail of a tensor
// whose size is not a multiple of VW). Built with WHOLE_VECTORS 1, for tensors whose size
// is a multiple of VW (the host's promise), there is no tail and no test for it: the test
// cost PoCL 3.0, which loads by hand (VLOAD 0), a large share of an update kernel's time.
floatv load_v(global const float *p, int first, int n)
{
#if WHOLE_VECTORS
    return LOADV(p + first);
#else
    return first + VW <= n ? LOADV(p + first) : LOAD_UPTO(p + first, n - first);
#endif
}

// Stores the lanes of x that fall before n at p[first ...].
void store_v(floatv x, global float *p, int first, int n)
{
#if WHOLE_VECTORS
    STOREV(x, p + first);
#else
    if (first + VW <= n)
        STOREV(x, p + first);
    else
        STORE_UPTO(x, p + first, n - first);
#endif
}

// (sum of a's lanes, b's, c's, d's): halves of the four vectors are added pairwise, so that
// every addition works on full vectors.
inline float4 sum_lanes4(floatv a, floatv b, floatv c, floatv d)
{
#if VW == 1
    return (float4)(a, b, c, d);
#elif VW == 2
    return (float4)(a.s0, b.s0, c.s0, d.s0) + (float4)(a.s1, b.s1, c.s1, d.s1);
#else
#if VW == 16
    float16 ab = (float16)(a.lo, b.lo) + (float16)(a.hi, b.hi);  // 8 partial sums each
    float16 cd = (float16)(c.lo, d.lo) + (float16)(c.hi, d.hi);
    float16 q = (float16)(ab.s0123, ab.s89ab, cd.s0123, cd.s89ab)
              + (float16)(ab.s4567, ab.scdef, cd.s4567, cd.scdef);  // 4 each
    float8 h = q.even + q.odd;  // 2 each
#elif VW == 8
    float8 ab = (float8)(a.lo, b.lo) + (float8)(a.hi, b.hi);  // 4 each
    float8 cd = (float8)(c.lo, d.lo) + (float8)(c.hi, d.hi);
    float8 h = (float8)(ab.s01, ab.s45, cd.s01, cd.s45)
             + (float8)(ab.s23, ab.s67, cd.s23, cd.s67);  // 2 each
#else
    float8 h = (float8)((float4)(a.lo, b.lo) + (float4)(a.hi, b.hi),
                        (float4)(c.lo, d.lo) + (float4)(c.hi, d.hi));  // 2 each
#endif
    return h.even + h.odd;
#endif
}

// Whether x is finite, by its bits: the exponent field (EXPONENT) is all ones only in NaN and
// the infinities. PoCL 3.0 calls isfinite() as a library function (a loop of them over 192
// floats in 64 work-items took it 20 us, against 0.8 us for this test), and a compiler told
// to assume finite math may fold isfinite() to true.
#define EXPONENT 0x7f800000u
inline int finite_bits(float x) { return (as_uint(x) & EXPONENT) != EXPONENT; }
#endif
