/*
 * fxrt_nn_epilogue.c - the epilogue of the GEMM and convolution kernels:
 * bias, residual and activation applied to a tile of the output while the
 * tile is still in cache, instead of as separate passes over memory.
 *
 * The kernels call fxrt_epilogue_apply_f32 on each block they have just
 * finished (a microkernel tile, the rows one cblas_sgemm call produced, an
 * output row of the depthwise loop).  The work is split into one loop per
 * step over a row segment, with the activation chosen outside its loop, so
 * that each loop vectorizes.  The formulas are those of the elementwise
 * kernels (fxrt_elementwise.c), so a fused node computes what the unfused
 * ops did, up to the rounding of the bias and residual additions' order.
 */
#include <math.h>

#include "fxrt.h"

int fxrt_epilogue_active(const FxrtEpilogue *ep)
{
    return ep && (ep->bias || ep->residual || ep->activation != FXRT_ACT_NONE);
}

static inline float sigmoid(float v)
{
    if (v >= 0.0f)
        return 1.0f / (1.0f + expf(-v));
    float e = expf(v);
    return e / (1.0f + e);
}

static inline float hard_sigmoid(float v, float alpha, float beta)
{
    float t = alpha * v + beta;
    return t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
}

static void activate(const FxrtEpilogue *ep, float *v, int64_t len)
{
    float a = ep->alpha, b = ep->beta;
    switch ((FxrtActivation)ep->activation) {
    case FXRT_ACT_NONE: break;
    case FXRT_ACT_RELU:
        for (int64_t t = 0; t < len; t++)
            v[t] = v[t] < 0.0f ? 0.0f : v[t];
        break;
    case FXRT_ACT_CLIP:
        for (int64_t t = 0; t < len; t++) {
            float x = v[t] < a ? a : v[t];
            v[t] = x > b ? b : x;
        }
        break;
    case FXRT_ACT_LEAKY_RELU:
        for (int64_t t = 0; t < len; t++)
            v[t] = v[t] < 0.0f ? a * v[t] : v[t];
        break;
    case FXRT_ACT_SIGMOID:
        for (int64_t t = 0; t < len; t++)
            v[t] = sigmoid(v[t]);
        break;
    case FXRT_ACT_HARD_SWISH:
        for (int64_t t = 0; t < len; t++)
            v[t] = v[t] * hard_sigmoid(v[t], 1.0f / 6.0f, 0.5f);
        break;
    case FXRT_ACT_HARD_SIGMOID:
        for (int64_t t = 0; t < len; t++)
            v[t] = hard_sigmoid(v[t], a, b);
        break;
    case FXRT_ACT_TANH:
        for (int64_t t = 0; t < len; t++)
            v[t] = tanhf(v[t]);
        break;
    case FXRT_ACT_GELU:
        /* In the order of the Div, Erf, Add, Mul, Mul chain exporters write. */
        for (int64_t t = 0; t < len; t++)
            v[t] = v[t] * (erff(v[t] / 1.41421354f) + 1.0f) * a;
        break;
    }
}

void fxrt_epilogue_apply_f32(const FxrtEpilogue *ep, int64_t row0, int64_t col0, int64_t rows,
                             int64_t cols, float *c, int64_t ldc)
{
    if (!fxrt_epilogue_active(ep))
        return;
    for (int64_t i = 0; i < rows; i++) {
        float *v = c + i * ldc;
        int64_t r = row0 + i;
        if (ep->bias) {
            const float *b = ep->bias + r * ep->bias_row_stride + col0 * ep->bias_col_stride;
            if (ep->bias_col_stride == 0) {
                float bv = b[0];
                for (int64_t t = 0; t < cols; t++)
                    v[t] += bv;
            } else if (ep->bias_col_stride == 1) {
                for (int64_t t = 0; t < cols; t++)
                    v[t] += b[t];
            } else {
                for (int64_t t = 0; t < cols; t++)
                    v[t] += b[t * ep->bias_col_stride];
            }
        }
        const float *res = ep->residual ? ep->residual + r * ep->residual_ld + col0 : NULL;
        if (res && !ep->residual_after)
            for (int64_t t = 0; t < cols; t++)
                v[t] += res[t];
        activate(ep, v, cols);
        if (res && ep->residual_after)
            for (int64_t t = 0; t < cols; t++)
                v[t] += res[t];
    }
}
