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
 * ops did, up to the rounding of the bias and residual additions' order
 * and, for GELU, erf_rational's 4e-7.
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

/* erf as x * P(x^2) / Q(x^2), fitted by least squares to erf(x) / x on
 * [0, 4] (relative weights) and checked in float32 on [-5, 5]: at most 4e-7
 * from erf; exactly +-1 beyond |x| = 4, where erf is within 2e-8 of it.
 * Unlike libm's erff it has no branches or table, so the GELU loop
 * vectorizes: the exact-GELU epilogue would otherwise cost as much as the
 * matrix product it follows (a transformer FFN). */
#if defined(__GNUC__) && !defined(__clang__)
/* GCC will not if-convert the clamps of erf_rational under the default
 * -ftrapping-math, which leaves the GELU loop scalar; nothing reads the
 * floating-point exception flags it could raise.  Both functions carry the
 * option so that one inlines into the other. */
#define NO_TRAPPING_MATH __attribute__((optimize("no-trapping-math")))
#else
#define NO_TRAPPING_MATH
#endif

NO_TRAPPING_MATH static inline float erf_rational(float x)
{
    float c = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x);
    float z = c * c;
    float p = 1.128378784e+00f +
              z * (2.153511107e-01f +
                   z * (5.610030838e-02f +
                        z * (4.861013601e-03f + z * (3.133980736e-04f + z * 1.901090465e-06f))));
    float q = 1.0f + z * (5.241757674e-01f +
                          z * (1.244718129e-01f +
                               z * (1.714450071e-02f + z * (1.436344086e-03f + z * 3.805828947e-05f))));
    float r = c * p / q;
    r = r > 1.0f ? 1.0f : (r < -1.0f ? -1.0f : r);
    return x <= -4.0f ? -1.0f : (x >= 4.0f ? 1.0f : r);
}

/* GELU with a final scale, v[t] * (erf(v[t] / sqrt 2) + 1) * scale, in
 * the order of the Div, Erf, Add, Mul, Mul chain exporters write. */
NO_TRAPPING_MATH static void gelu(float *v, int64_t len, float scale)
{
    for (int64_t t = 0; t < len; t++)
        v[t] = v[t] * (erf_rational(v[t] / 1.41421354f) + 1.0f) * scale;
}

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
/* On host, the same loop eight lanes wide when the CPU has AVX2 (chosen at
 * run time, as in fxrt_nn_gemm.c): its two divisions make it the costliest
 * step after the products.  Without FMA in the target nothing is
 * contracted, so both versions give the same bits. */
#define FXRT_EPILOGUE_AVX2 1
NO_TRAPPING_MATH __attribute__((target("avx2"))) static void gelu_avx2(float *v, int64_t len,
                                                                       float scale)
{
    for (int64_t t = 0; t < len; t++)
        v[t] = v[t] * (erf_rational(v[t] / 1.41421354f) + 1.0f) * scale;
}
#endif

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
#ifdef FXRT_EPILOGUE_AVX2
        if (__builtin_cpu_supports("avx2")) {
            gelu_avx2(v, len, a);
            break;
        }
#endif
        gelu(v, len, a);
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
