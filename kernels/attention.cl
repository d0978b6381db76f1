// Channel-masked multi-head attention (CATCH's Channel Fusion Module) and its clustering loss.
// Every group g (one sample x one frequency band) holds n tokens (the channels). Layouts:
//   qkv   (groups, n, 3 * heads * dh): per token [q heads | k heads | v heads], head h at h * dh;
//   mask  (groups, n, n), one mask shared by every head (1 keeps a pair, 0 masks it);
//   out   (groups, n, heads * dh);  probs (groups, heads, n, n);  lse (groups, heads, n).
// Logits z_ij = scale * s_ij with s_ij = q_i . k_j and scale = 1 / sqrt(dh), then
//   finite mask (CATCH's code):  z_ij = scale * (m_ij s_ij + (1 - m_ij) fill), A = softmax_j z;
//   hard mask (the paper's -inf): A_ij = m_ij exp(z_ij) / sum_u m_iu exp(z_iu).
// Both are smooth in m (the mask gradient is a true derivative) and equal the official
// forward pass for a 0/1 mask. Softmax subtracts the row's maximum; lse = log sum kept.
// No atomics: each work-item owns the rows it writes.

#define QKV(g, t, part) (qkv + ((size_t)(g) * n + (t)) * 3 * inner + (part) * inner)
#define DQKV(g, t, part) (dqkv + ((size_t)(g) * n + (t)) * 3 * inner + (part) * inner)
#define ROW(buf, g, h, i) (buf + (((size_t)(g) * heads + (h)) * n + (i)) * n)

#include "dot4.h"
#include "larger.h"

inline float dot_dh(global const float *a, global const float *b, int dh)
{
    return dot4(a, b, dh);
}

// out[d] = sum_j c[j cs] x[j xs + d] for d < dh, j < n: four outputs at a time (vectors),
// each the same sum in the same order as one at a time.
inline void combine_rows(global float *out, global const float *c, int cs,
                         global const float *x, int xs, int n, int dh)
{
    int d = 0;
    for (; d + 4 <= dh; d += 4) {
        float4 s = (float4)(0.0f);
        for (int j = 0; j < n; ++j)
            s += c[j * cs] * LOAD4(x + (size_t)j * xs + d);
        STORE4(s, out + d);
    }
    for (; d < dh; ++d) {
        float s = 0.0f;
        for (int j = 0; j < n; ++j)
            s += c[j * cs] * x[(size_t)j * xs + d];
        out[d] = s;
    }
}

inline float masked_logit(float s, float m, float scale, float fill, int hard)
{
    return hard ? scale * s : scale * (m * s + (1.0f - m) * fill);
}

// One work-item per (query i, head h, group g): the row of probabilities and the output.
kernel void masked_attention_forward(global const float *qkv, global const float *mask,
                                     global float *out, global float *probs,
                                     global float *lse, int groups, int n, int heads, int dh,
                                     float fill, int hard)
{
    int i = get_global_id(0), h = get_global_id(1), g = get_global_id(2);
    if (i >= n || h >= heads || g >= groups)
        return;
    int inner = heads * dh;
    float scale = rsqrt((float)dh);
    global const float *q = QKV(g, i, 0) + h * dh;
    global const float *m = mask + ((size_t)g * n + i) * n;
    global float *a = ROW(probs, g, h, i);
    // ### BEGIN SOLUTION
    // HINT: the logits of query i against every key (masked_logit, dot_dh, QKV), then a
    // HINT: softmax that cannot overflow; lse[((size_t)g * heads + h) * n + i] = log of the sum
    // HINT: of exp(logit). exercises.hint("masked_softmax", 1) a nudge, 2 the formula
    float top = -INFINITY;
    for (int j = 0; j < n; ++j) {
        a[j] = masked_logit(dot_dh(q, QKV(g, j, 1) + h * dh, dh), m[j], scale, fill, hard);
        if (!hard || m[j] > 0.0f)
            top = larger(top, a[j]);
    }
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) {
        // a masked key's logit may exceed top: never take its exp (0 * inf is NaN)
        a[j] = !hard ? exp(a[j] - top) : m[j] != 0.0f ? m[j] * exp(a[j] - top) : 0.0f;
        sum += a[j];
    }
    for (int j = 0; j < n; ++j)
        a[j] /= sum;
    lse[((size_t)g * heads + h) * n + i] = top + log(sum);
    // ### END SOLUTION
    combine_rows(out + ((size_t)g * n + i) * inner + h * dh, a, 1, QKV(g, 0, 2) + h * dh,
                 3 * inner, n, dh);
}

// ---------------------------------------------------------------- clustering loss
// CATCH's channel-correlation ("dynamical contrastive") loss of one layer, per group:
//   c_ij = mean_h cos(q_hi, k_hj)   (unmasked; norms clamped at 1e-12),
//   row_i = (1/n) [log sum_j e_ij - log sum_j m_ij e_ij] + reg sum_{j != i} m_ij / (n (n-1)),
// with e_ij = exp((c_ij - max_j c_ij) / tau). The loss is sum_{g,i} row_gi / groups; the
// regular part is 0 when n == 1 (the official code divides by zero there). For a 0/1 mask
// with unit diagonal sum_{j != i} m_ij / (n (n-1)) summed over i is ||I - M||_1 / (n (n-1)).
// The forward pass keeps each head's cosines cos_hij (groups, heads, n, n) and the norms
// |q_hi|, |k_hi| (groups, heads, n) each: the backward kernels take no dot product or root.

inline float norm_dh(global const float *a, int dh)
{
    return larger(1e-12f, sqrt(dot_dh(a, a, dh)));
}

// da += w (b / |b| - cos(a, b) a / |a|) / |a|: w times the gradient of cos(a, b) in a,
// given na = |a|, nb = |b| (clamped as norm_dh) and c = cos(a, b); four elements at a time
// (vectors), then the rest.
inline void add_cos_grad(global float *da, global const float *a, float na,
                         global const float *b, float nb, float c, float w, int dh)
{
    float wb = w / (na * nb), wa = w * c / (na * na);  // da += wb b - wa a: no division each
    int d = 0;
    for (; d + 4 <= dh; d += 4)
        STORE4(LOAD4(da + d) + wb * LOAD4(b + d) - wa * LOAD4(a + d), da + d);
    for (; d < dh; ++d)
        da[d] += wb * b[d] - wa * a[d];
}

// One work-item per (row i, group g): c_ij into cos (groups, n, n), cos_hij into cos_heads,
// |q_hi| and |k_hi| into qnorm and knorm (groups, heads, n), and row_gi into rows.
kernel void channel_dc_forward(global const float *qkv, global const float *mask,
                               global float *cos_out, global float *cos_heads,
                               global float *qnorm, global float *knorm, global float *rows,
                               int groups, int n, int heads, int dh, float tau, float reg)
{
    int i = get_global_id(0), g = get_global_id(1);
    if (i >= n || g >= groups)
        return;
    global const float *m = mask + ((size_t)g * n + i) * n;
    global float *c = cos_out + ((size_t)g * n + i) * n;
    int inner = heads * dh;
    for (int h = 0; h < heads; ++h) {  // sum over heads, |q_hi| once per head
        global const float *q = QKV(g, i, 0) + h * dh;
        global float *ch = ROW(cos_heads, g, h, i);
        float nq = norm_dh(q, dh);
        for (int j = 0; j < n; ++j) {
            global const float *k = QKV(g, j, 1) + h * dh;
            float nk = norm_dh(k, dh);
            float cos_h = dot_dh(q, k, dh) / (nq * nk);
            ch[j] = cos_h;
            c[j] = h == 0 ? cos_h : c[j] + cos_h;
            if (j == i)
                knorm[((size_t)g * heads + h) * n + i] = nk;
        }
        qnorm[((size_t)g * heads + h) * n + i] = nq;
    }
    float top = -INFINITY;
    for (int j = 0; j < n; ++j) {
        c[j] /= heads;
        top = larger(top, c[j]);
    }
    float all = 0.0f, pos = 0.0f, off = 0.0f;
    for (int j = 0; j < n; ++j) {
        float e = exp((c[j] - top) / tau);
        all += e;
        pos += m[j] * e;
        off += j == i ? 0.0f : m[j];
    }
    float regular = n > 1 ? reg * off / (n * (n - 1.0f)) : 0.0f;
    rows[(size_t)g * n + i] = (log(all) - log(pos)) / n + regular;
}

// The clustering loss's gradient for weight w = dL/d row, of row i of group g:
//   dc_ij = w / (n tau) (P_ij - Q_ij), P = softmax_j, Q = the masked softmax (into dcos);
//   dm_ij += w (-e_ij / (n sum_u m_iu e_iu) + [j != i] reg / (n (n-1)));
//   dq_hi += sum_j dc_ij / heads * (k^_hj - cos_hij q^_hi) / |q_hi|   (x^ = x / |x|).
inline void dc_query_grad(global const float *qkv, global const float *mask,
                          global const float *cos_in, global const float *cos_heads,
                          global const float *qnorm, global const float *knorm,
                          global float *dcos, global float *dqkv, global float *dmask, int g,
                          int i, int n, int heads, int dh, float tau, float reg, float w)
{
    int inner = heads * dh;
    global const float *m = mask + ((size_t)g * n + i) * n;
    global const float *c = cos_in + ((size_t)g * n + i) * n;
    global float *dc = dcos + ((size_t)g * n + i) * n;
    global float *dm = dmask + ((size_t)g * n + i) * n;
    float top = -INFINITY;
    for (int j = 0; j < n; ++j)
        top = larger(top, c[j]);
    float all = 0.0f, pos = 0.0f;
    for (int j = 0; j < n; ++j) {
        dc[j] = exp((c[j] - top) / tau);  // e_ij, replaced below
        all += dc[j];
        pos += m[j] * dc[j];
    }
    float off = n > 1 ? reg / (n * (n - 1.0f)) : 0.0f;
    for (int j = 0; j < n; ++j) {
        float e = dc[j];
        dc[j] = w / (n * tau) * (e / all - m[j] * e / pos);
        dm[j] += w * (-e / (n * pos) + (j == i ? 0.0f : off));
    }
    for (int h = 0; h < heads; ++h) {
        global const float *q = QKV(g, i, 0) + h * dh;
        global const float *ch = ROW(cos_heads, g, h, i);
        global const float *kn = knorm + ((size_t)g * heads + h) * n;
        float nq = qnorm[((size_t)g * heads + h) * n + i];
        for (int j = 0; j < n; ++j)
            add_cos_grad(DQKV(g, i, 0) + h * dh, q, nq, QKV(g, j, 1) + h * dh, kn[j], ch[j],
                         dc[j] / heads, dh);
    }
}

// Head h's part of the clustering loss's key gradient, from dcos (dc_query_grad's, every
// row of the group): dk_hj += sum_i dc_ij / heads (q^_hi - cos_hij k^_hj) / |k_hj|.
inline void dc_key_grad(global const float *qkv, global const float *cos_heads,
                        global const float *qnorm, global const float *knorm,
                        global const float *dcos, global float *dqkv, int g, int j, int h,
                        int n, int heads, int dh)
{
    int inner = heads * dh;
    global const float *k = QKV(g, j, 1) + h * dh;
    global const float *qn = qnorm + ((size_t)g * heads + h) * n;
    float nk = knorm[((size_t)g * heads + h) * n + j];
    for (int i = 0; i < n; ++i)
        add_cos_grad(DQKV(g, j, 1) + h * dh, k, nk, QKV(g, i, 0) + h * dh, qn[i],
                     ROW(cos_heads, g, h, i)[j], dcos[((size_t)g * n + i) * n + j] / heads, dh);
}

// The clustering loss's gradient alone (the attention backward kernels add it themselves
// when their dc != 0): one work-item per (row i, group g), dcos written, dq and dm added.
kernel void channel_dc_backward_query(global const float *qkv, global const float *mask,
                                      global const float *cos_in,
                                      global const float *cos_heads,
                                      global const float *qnorm, global const float *knorm,
                                      global float *dcos, global float *dqkv,
                                      global float *dmask, int groups, int n, int heads,
                                      int dh, float tau, float reg, float w)
{
    int i = get_global_id(0), g = get_global_id(1);
    if (i < n && g < groups)
        dc_query_grad(qkv, mask, cos_in, cos_heads, qnorm, knorm, dcos, dqkv, dmask, g, i, n,
                      heads, dh, tau, reg, w);
}

// One work-item per (key j, group g), after channel_dc_backward_query: dk added, every head.
kernel void channel_dc_backward_keys(global const float *qkv, global const float *cos_heads,
                                     global const float *qnorm, global const float *knorm,
                                     global const float *dcos, global float *dqkv, int groups,
                                     int n, int heads, int dh)
{
    int j = get_global_id(0), g = get_global_id(1);
    if (j >= n || g >= groups)
        return;
    for (int h = 0; h < heads; ++h)
        dc_key_grad(qkv, cos_heads, qnorm, knorm, dcos, dqkv, g, j, h, n, heads, dh);
}

// One work-item per (query i, group g), looping over heads. With G the output gradient:
//   dA_ij = G_i . v_j,  dz_ij = A_ij (dA_ij - sum_u A_iu dA_iu)  (softmax Jacobian);
//   finite: ds_ij = scale m_ij dz_ij,  dm_ij += scale dz_ij (s_ij - fill);
//   hard:   ds_ij = scale dz_ij,       dm_ij += exp(z_ij - lse_i) (dA_ij - sum_u A_iu dA_iu);
//   dq_i = sum_j ds_ij k_j (written), ds kept in dscores for the key kernel.
// dm (this row of dmask, summed over heads) is added to the stored row when accumulate != 0.
// With dc != 0 the clustering loss's gradient of weight w follows (dc_query_grad, from the
// buffers of channel_dc_forward; unused, they may be any buffers when dc == 0).
kernel void masked_attention_backward_query(global const float *qkv, global const float *mask,
                                            global const float *probs,
                                            global const float *lse, global const float *dout,
                                            global float *dqkv, global float *dscores,
                                            global float *dmask, int groups, int n, int heads,
                                            int dh, float fill, int hard, int accumulate,
                                            int dc, global const float *cos_in,
                                            global const float *cos_heads,
                                            global const float *qnorm,
                                            global const float *knorm, global float *dcos,
                                            float tau, float reg, float w)
{
    int i = get_global_id(0), g = get_global_id(1);
    if (i >= n || g >= groups)
        return;
    int inner = heads * dh;
    float scale = rsqrt((float)dh);
    global const float *m = mask + ((size_t)g * n + i) * n;
    global float *dm = dmask + ((size_t)g * n + i) * n;
    if (!accumulate)
        for (int j = 0; j < n; ++j)
            dm[j] = 0.0f;
    for (int h = 0; h < heads; ++h) {
        global const float *q = QKV(g, i, 0) + h * dh;
        global const float *go = dout + ((size_t)g * n + i) * inner + h * dh;
        global const float *a = ROW(probs, g, h, i);
        global float *ds = ROW(dscores, g, h, i);
        float row_lse = lse[((size_t)g * heads + h) * n + i];
        float rowdot = 0.0f;
        for (int j = 0; j < n; ++j) {
            ds[j] = dot_dh(go, QKV(g, j, 2) + h * dh, dh);  // dA_ij, replaced below
            rowdot += a[j] * ds[j];
        }
        for (int j = 0; j < n; ++j) {
            float s = dot_dh(q, QKV(g, j, 1) + h * dh, dh);
            float centred = ds[j] - rowdot;
            float dz = a[j] * centred;
            if (hard) {
                dm[j] += exp(scale * s - row_lse) * centred;
                ds[j] = scale * dz;
            } else {
                dm[j] += scale * dz * (s - fill);
                ds[j] = scale * m[j] * dz;
            }
        }
        combine_rows(DQKV(g, i, 0) + h * dh, ds, 1, QKV(g, 0, 1) + h * dh, 3 * inner, n, dh);
    }
    if (dc)
        dc_query_grad(qkv, mask, cos_in, cos_heads, qnorm, knorm, dcos, dqkv, dmask, g, i, n,
                      heads, dh, tau, reg, w);
}

// One work-item per (key j, head h, group g): dk_j = sum_i ds_ij q_i, dv_j = sum_i A_ij G_i
// (both written); with dc != 0 the clustering loss's part of dk added (dc_key_grad).
kernel void masked_attention_backward_keys(global const float *qkv, global const float *probs,
                                           global const float *dout,
                                           global const float *dscores, global float *dqkv,
                                           int groups, int n, int heads, int dh, int dc,
                                           global const float *cos_heads,
                                           global const float *qnorm,
                                           global const float *knorm,
                                           global const float *dcos)
{
    int j = get_global_id(0), h = get_global_id(1), g = get_global_id(2);
    if (j >= n || h >= heads || g >= groups)
        return;
    int inner = heads * dh;
    combine_rows(DQKV(g, j, 1) + h * dh, ROW(dscores, g, h, 0) + j, n, QKV(g, 0, 0) + h * dh,
                 3 * inner, n, dh);
    combine_rows(DQKV(g, j, 2) + h * dh, ROW(probs, g, h, 0) + j, n,
                 dout + (size_t)g * n * inner + h * dh, inner, n, dh);
    if (dc)
        dc_key_grad(qkv, cos_heads, qnorm, knorm, dcos, dqkv, g, j, h, n, heads, dh);
}
