// Complex arithmetic on float2 (x = real part, y = imaginary part), written once and joined
// to the files that need it with `// requires: complex.cl`.
// Gradients use the conjugate (CR-calculus) convention: for a real loss L and z = a + ib the
// stored gradient is G = dL/da + i dL/db, so z -= lr * G decreases L. For y = w z it gives
// G_z = conj(w) G_y, and for a holomorphic f, G_z = conj(f'(z)) G_y.

inline float2 cmul(float2 a, float2 b)
{
    return (float2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

inline float2 cconj(float2 a) { return (float2)(a.x, -a.y); }

// conj(a) * b, the term of a Hermitian dot product and of every backward pass.
inline float2 cmulconj(float2 a, float2 b)
{
    // BEGIN SOLUTION
    // HINT: conj(a) b = (a.x b.x + a.y b.y) + i (a.x b.y - a.y b.x)
    // STUB: return (float2)(0.0f, 0.0f);
    return (float2)(a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x);
    // END SOLUTION
}

inline float cabs2(float2 a) { return a.x * a.x + a.y * a.y; }

// |a| without overflow for large parts (hypot scales internally).
inline float cabs(float2 a) { return hypot(a.x, a.y); }

// a / b, with b scaled by its larger part first so |b|^2 cannot overflow.
inline float2 cdiv(float2 a, float2 b)
{
    float s = fmax(fabs(b.x), fabs(b.y));
    float2 bs = b / s;
    return cmulconj(bs, a) / (s * cabs2(bs));
}

inline float2 cexp(float2 a)
{
    float e = exp(a.x);
    return (float2)(e * cos(a.y), e * sin(a.y));
}

// tanh(a + ib) = (sinh 2a + i sin 2b) / (cosh 2a + cos 2b), the denominator written as
// 2 (sinh^2 a + cos^2 b) to avoid cancellation near the poles b = pi/2 + k pi. For |a| > 10
// it is +-1 to float precision, and the formula would overflow.
inline float2 ctanh(float2 a)
{
    if (fabs(a.x) > 10.0f)
        return (float2)(copysign(1.0f, a.x), 0.0f);
    float sh = sinh(a.x), c = cos(a.y);
    return (float2)(sinh(2.0f * a.x), sin(2.0f * a.y)) / (2.0f * (sh * sh + c * c));
}

// The holomorphic sigmoid 1 / (1 + exp(-z)) of the seed: poles at z = i pi (2k + 1).
inline float2 csigmoid(float2 a)
{
    return cdiv((float2)(1.0f, 0.0f), (float2)(1.0f, 0.0f) + cexp(-a));
}

// ---------------------------------------------------------------- complex activations
// Codes (-D build options from nnlib/codes.py): CACT_NONE; CACT_TANH, complex tanh,
// holomorphic; CACT_SPLIT_SIGMOID, sigmoid(Re z) + i sigmoid(Im z); CACT_MODRELU,
// relu(|z| + b) z / |z|, b < 0 a fixed threshold.

inline float2 cactivate(float2 z, int act, float b)
{
    switch (act) {
    case CACT_TANH: return ctanh(z);
    case CACT_SPLIT_SIGMOID: return 1.0f / (1.0f + exp(-z));
    case CACT_MODRELU: {
        float r = cabs(z);
        return r + b > 0.0f ? z * ((r + b) / r) : (float2)(0.0f, 0.0f);
    }
    default: return z;
    }
}

// G_z from G_y for y = act(z) (y is passed too, to avoid recomputing it).
inline float2 cactivate_grad(float2 z, float2 y, float2 g, int act, float b)
{
    switch (act) {
    case CACT_TANH:  // holomorphic: conj(f'(z)) G_y with f' = 1 - y^2
        return cmulconj((float2)(1.0f, 0.0f) - cmul(y, y), g);
    case CACT_SPLIT_SIGMOID:  // two real sigmoids: componentwise
        return g * y * (1.0f - y);
    case CACT_MODRELU: {  // (1 + b/r) G - (b/r) Re(conj(G) u) u, u = z/r
        float r = cabs(z);
        if (r + b <= 0.0f)
            return (float2)(0.0f, 0.0f);
        float2 u = z / r;
        return (1.0f + b / r) * g - (b / r) * dot(g, u) * u;
    }
    default: return g;
    }
}

// One work-item per element: out = op(a, b) with op 0 mul, 1 conj(a) b, 2 div, 3 exp(a),
// 4 tanh(a), 5 sigmoid(a), 6 |a| (in out.x). A window on the helpers for tests and notebook.
kernel void complex_ops(global const float2 *a, global const float2 *b, global float2 *out,
                        int n, int op)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    float2 r;
    switch (op) {
    case 0: r = cmul(a[i], b[i]); break;
    case 1: r = cmulconj(a[i], b[i]); break;
    case 2: r = cdiv(a[i], b[i]); break;
    case 3: r = cexp(a[i]); break;
    case 4: r = ctanh(a[i]); break;
    case 5: r = csigmoid(a[i]); break;
    default: r = (float2)(cabs(a[i]), 0.0f);
    }
    out[i] = r;
}
