// larger(a, b): b where b > a, else a; fmax(a, b) wherever a is not NaN (a running maximum
// started at -INFINITY, or a floor such as 1e-12f put first), and like fmax it returns a
// where b is NaN. A compare and a select, which every compiler inlines: PoCL 3.0 calls
// fmax() as a library function, once per use. Included (`#include "larger.h"`) by each
// kernel file that uses it.
#ifndef LARGER_H
#define LARGER_H
inline float larger(float a, float b) { return b > a ? b : a; }
#endif
