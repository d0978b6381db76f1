// Built by nnlib at each float vector width VW (4, 8, 16) once per device and process, to find
// the widest the compiler emits natively: PoCL 3.0 from PyPI reports a preferred width of 16 on
// AVX-512 CPUs it does not know (AMD Zen 4 and 5), then compiles without AVX-512 ("changes the
// ABI" in the build log), crashes or hangs at launch, and returns an empty program from its
// cache. A helper taking and returning floatv makes the compiler check the vector ABI.
#ifndef VW
#define VW 1  // built alone (tests/test_signatures.py): scalar
#endif
#include "floatv.h"

floatv twice(floatv x) { return x + x; }

// One work-item doubles VW consecutive floats, vector i of the n at p.
kernel void double_floatv(global float *p, int n)
{
    int i = get_global_id(0);
    if (i < n)
        vstorev(twice(vloadv(i, p)), i, p);
}
