// loss_term(y, t, loss): one output element's share of its sample's loss, the sum over a row
// of which loss_rows (loss.cl) and head_step (head.cl) store: MSE (y - t)^2; cross-entropy
// -t log(y), floored at y = 1e-12 and 0 where t is 0 (no 0 * log 0). The codes LOSS_* come
// from nnlib/codes.py as -D build options; larger.h is included before it.
#ifndef LOSS_TERM_H
#define LOSS_TERM_H
inline float loss_term(float y, float t, int loss)
{
    if (loss == LOSS_MSE) {
        float d = y - t;
        return d * d;
    }
    return t != 0.0f ? -t * log(larger(1e-12f, y)) : 0.0f;
}
#endif
