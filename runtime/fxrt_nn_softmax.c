/*
 * fxrt_nn_softmax.c - Softmax, LogSoftmax and Hardmax along the middle axis
 * of a tensor folded to outer x len x inner.
 *
 * The maximum is subtracted before exp so that large inputs cannot
 * overflow (the ONNX "large_number" tests check exactly that).  A row of
 * only -inf gives NaN, as in the ONNX reference; the kernels do not invent
 * another answer.  Sums are float: every term is at most 1.
 */
#include <math.h>

#include "fxrt.h"

static float row_max(const float *x, int64_t len, int64_t inner)
{
    float m = -INFINITY;
    for (int64_t l = 0; l < len; l++)
        m = x[l * inner] > m ? x[l * inner] : m;
    return m;
}

void fxrt_softmax_f32(int64_t outer, int64_t len, int64_t inner, const float *x, float *y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xp = x + o * len * inner + i;
            float *yp = y + o * len * inner + i;
            float m = row_max(xp, len, inner);
            float s = 0.0f;
            for (int64_t l = 0; l < len; l++) {
                float e = expf(xp[l * inner] - m);
                yp[l * inner] = e;
                s += e;
            }
            float inv = 1.0f / s;
            for (int64_t l = 0; l < len; l++)
                yp[l * inner] *= inv;
        }
}

void fxrt_logsoftmax_f32(int64_t outer, int64_t len, int64_t inner, const float *x, float *y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xp = x + o * len * inner + i;
            float *yp = y + o * len * inner + i;
            float m = row_max(xp, len, inner);
            float s = 0.0f;
            for (int64_t l = 0; l < len; l++)
                s += expf(xp[l * inner] - m);
            float shift = m + logf(s);
            for (int64_t l = 0; l < len; l++)
                yp[l * inner] = xp[l * inner] - shift;
        }
}

void fxrt_hardmax_f32(int64_t outer, int64_t len, int64_t inner, const float *x, float *y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xp = x + o * len * inner + i;
            float *yp = y + o * len * inner + i;
            int64_t best = 0;
            for (int64_t l = 1; l < len; l++)
                if (xp[l * inner] > xp[best * inner])
                    best = l;
            for (int64_t l = 0; l < len; l++)
                yp[l * inner] = l == best ? 1.0f : 0.0f;
        }
}
