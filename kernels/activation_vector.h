// act'(y) on VW values at once, as activate_grad() in activation.cl, for the activations whose
// derivative is written with y (fused_mlp.cl keeps only y). Included after floatv.h; the codes
// come from nnlib/activations.py as -D build options, and tests/test_activations.py checks
// that the switch has a case for each.
#ifndef ACTIVATION_VECTOR_H
#define ACTIVATION_VECTOR_H
inline floatv activate_gradv(floatv y, int act)
{
    switch (act) {
    case ACT_TANH: return 1.0f - y * y;
    case ACT_SIGMOID: return y * (1.0f - y);
    case ACT_RELU: return y > 0.0f ? (floatv)(1.0f) : (floatv)(0.0f);
    case ACT_LEAKY_RELU: return y > 0.0f ? (floatv)(1.0f) : (floatv)(LEAKY_SLOPE);
    case ACT_NONE:
    default: return (floatv)(1.0f);
    }
}
#endif
