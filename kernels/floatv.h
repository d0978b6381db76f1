// floatv: VW floats as one OpenCL vector (VW 1, 2, 4, 8 or 16, a build option nnlib derives
// from the device's preferred width by nnlib.sizes.vector_width), with vloadv/vstorev its
// vloadN/vstoreN. Included (`#include "floatv.h"`) after the file has settled VW.
#ifndef FLOATV_H
#define FLOATV_H
#ifndef VW
#error "define VW before including floatv.h"
#elif VW == 1
typedef float floatv;
#define vloadv(i, p) ((p)[i])
#define vstorev(x, i, p) ((p)[i] = (x))
#else
#define FLOATV_CAT_(a, b) a##b
#define FLOATV_CAT(a, b) FLOATV_CAT_(a, b)
typedef FLOATV_CAT(float, VW) floatv;
#define vloadv FLOATV_CAT(vload, VW)
#define vstorev FLOATV_CAT(vstore, VW)
#endif
#endif
