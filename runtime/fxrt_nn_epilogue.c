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
 * and, for GELU, fxrt_erf_rational's 4e-7.
 */
#include <math.h>

#include "fxrt.h"
#include "fxrt_math.h"

int fxrt_epilogue_active(const FxrtEpilogue *ep)
{
    return ep && (ep->bias || ep->residual || ep->activation != FXRT_ACT_NONE);
}

static inline float hard_sigmoid(float v, float alpha, float beta)
{
    float t = alpha * v + beta;
    return t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
}

/* GELU has a final scale, v[t] * (erf(v[t] / sqrt 2) + 1) * scale, in the
 * order of the Div, Erf, Add, Mul, Mul chain exporters write.  A loop of
 * inline polynomials that the compiler vectorizes. */
FXRT_NO_TRAPPING_MATH static void gelu(float *v, int64_t len, float scale)
{
    for (int64_t t = 0; t < len; t++)
        v[t] = v[t] * (fxrt_erf_rational(v[t] / 1.41421354f) + 1.0f) * scale;
}

FXRT_NO_TRAPPING_MATH static void sigmoid_family(int silu, float *v, int64_t len)
{
    if (silu)
        for (int64_t t = 0; t < len; t++)
            v[t] = fxrt_silu(v[t]);
    else
        for (int64_t t = 0; t < len; t++)
            v[t] = fxrt_sigmoid(v[t]);
}

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
/* On host, 8 and 16 lanes wide when the CPU has AVX2 or AVX-512 (chosen at
 * run time, as in fxrt_nn_gemm.c): these are the costliest step after the
 * products.  GELU and the sigmoid family are fxrt_math_x86.h's, within a
 * few ulp of the portable forms. */
#define FXRT_EPILOGUE_SIMD 1
#include "fxrt_isa.h"
#include "fxrt_math_x86.h"

/* The widest vectors in use: 2 AVX-512, 1 AVX2, 0 portable; capped by
 * fxrt_epilogue_limit_isa (runtime/fxrt_isa.h). */
static int isa_cap = 2;

void fxrt_epilogue_limit_isa(int level) { isa_cap = level; }

__attribute__((target("avx2,fma"))) static void gelu_avx2(float *v, int64_t len, float scale)
{
    __m256 s = _mm256_set1_ps(scale);
    int64_t t = 0;
    for (; t + 8 <= len; t += 8)
        _mm256_storeu_ps(v + t, fxrt_gelu_avx2(_mm256_loadu_ps(v + t), s));
    gelu(v + t, len - t, scale);
}

__attribute__((target("avx512f,avx2,fma"))) static void gelu_avx512(float *v, int64_t len,
                                                                    float scale)
{
    __m512 s = _mm512_set1_ps(scale);
    for (int64_t t = 0; t < len; t += 16) {
        __mmask16 m = len - t >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (len - t)) - 1u);
        __m512 x = _mm512_maskz_loadu_ps(m, v + t);
        _mm512_mask_storeu_ps(v + t, m, fxrt_gelu_avx512(x, s));
    }
}

__attribute__((target("avx2,fma"))) static void sigmoid_family_avx2(int silu, float *v,
                                                                    int64_t len)
{
    int64_t t = 0;
    for (; t + 8 <= len; t += 8) {
        __m256 x = _mm256_loadu_ps(v + t);
        _mm256_storeu_ps(v + t, silu ? fxrt_silu_avx2(x) : fxrt_sigmoid_avx2(x));
    }
    sigmoid_family(silu, v + t, len - t);
}

__attribute__((target("avx512f,avx2,fma"))) static void sigmoid_family_avx512(int silu, float *v,
                                                                              int64_t len)
{
    for (int64_t t = 0; t < len; t += 16) {
        __mmask16 m = len - t >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (len - t)) - 1u);
        __m512 x = _mm512_maskz_loadu_ps(m, v + t);
        _mm512_mask_storeu_ps(v + t, m, silu ? fxrt_silu_avx512(x) : fxrt_sigmoid_avx512(x));
    }
}

/* One row of apply_rows_avx512, for a constant act once inlined: a test
 * per vector of which activation to take cost half the loop's time. */
__attribute__((target("avx512f,avx2,fma"), always_inline)) static inline void
row_avx512(const FxrtEpilogue *ep, FxrtActivation act, const float *b, const float *res,
           int64_t cols, float *v)
{
    const __m512 zero = _mm512_setzero_ps(), lo = _mm512_set1_ps(ep->alpha);
    const __m512 hi = _mm512_set1_ps(ep->beta), scale = _mm512_set1_ps(ep->alpha);
    const int bias_row = b && ep->bias_col_stride == 1;
    const int residual_before = res && !ep->residual_after, residual_after = res && ep->residual_after;
    const __m512 one_bias = b && !bias_row ? _mm512_set1_ps(b[0]) : zero;
    for (int64_t t = 0; t < cols; t += 16) {
        __mmask16 m = cols - t >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (cols - t)) - 1u);
        __m512 x = _mm512_maskz_loadu_ps(m, v + t);
        if (b)
            x = _mm512_add_ps(x, bias_row ? _mm512_maskz_loadu_ps(m, b + t) : one_bias);
        if (residual_before)
            x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, res + t));
        if (act == FXRT_ACT_RELU)
            x = _mm512_max_ps(zero, x);
        else if (act == FXRT_ACT_CLIP)
            x = _mm512_min_ps(hi, _mm512_max_ps(lo, x));
        else if (act == FXRT_ACT_SIGMOID)
            x = fxrt_sigmoid_avx512(x);
        else if (act == FXRT_ACT_SILU)
            x = fxrt_silu_avx512(x);
        else if (act == FXRT_ACT_GELU)
            x = fxrt_gelu_avx512(x, scale);
        if (residual_after)
            x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, res + t));
        _mm512_mask_storeu_ps(v + t, m, x);
    }
}

/* The whole epilogue of rows of at least 16 columns in one pass over each
 * row, 16 lanes at a time (masked at the row's end): bias, residual, the
 * activation, residual.  The scalar loops below are one pass per step,
 * and at -O2 (fxcc bench and verify build the runtime so) GCC leaves them
 * scalar: a bias alone cost a cycle per element, GELU's two passes 2.4.
 * The operations are the scalar ones, in their order (max and min keep a
 * NaN operand as the comparisons do), so results do not depend on the path;
 * returns 0, having done nothing, for an activation it leaves to them. */
__attribute__((target("avx512f,avx2,fma"))) static int
apply_rows_avx512(const FxrtEpilogue *ep, int64_t row0, int64_t col0, int64_t rows, int64_t cols,
                  float *c, int64_t ldc)
{
    FxrtActivation act = (FxrtActivation)ep->activation;
    if (act != FXRT_ACT_NONE && act != FXRT_ACT_RELU && act != FXRT_ACT_CLIP &&
        act != FXRT_ACT_SIGMOID && act != FXRT_ACT_SILU && act != FXRT_ACT_GELU)
        return 0;
    if (ep->bias && ep->bias_col_stride != 0 && ep->bias_col_stride != 1)
        return 0;
    for (int64_t r = 0; r < rows; r++) {
        float *v = c + r * ldc;
        const float *b =
            ep->bias ? ep->bias + (row0 + r) * ep->bias_row_stride + col0 * ep->bias_col_stride
                     : NULL;
        const float *res = ep->residual ? ep->residual + (row0 + r) * ep->residual_ld + col0 : NULL;
        switch (act) {
        case FXRT_ACT_RELU: row_avx512(ep, FXRT_ACT_RELU, b, res, cols, v); break;
        case FXRT_ACT_CLIP: row_avx512(ep, FXRT_ACT_CLIP, b, res, cols, v); break;
        case FXRT_ACT_SIGMOID: row_avx512(ep, FXRT_ACT_SIGMOID, b, res, cols, v); break;
        case FXRT_ACT_SILU: row_avx512(ep, FXRT_ACT_SILU, b, res, cols, v); break;
        case FXRT_ACT_GELU: row_avx512(ep, FXRT_ACT_GELU, b, res, cols, v); break;
        default: row_avx512(ep, FXRT_ACT_NONE, b, res, cols, v); break;
        }
    }
    return 1;
}

static int cpu_has_avx512(void)
{
    return isa_cap >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma");
}
#else
#include "fxrt_isa.h"

void fxrt_epilogue_limit_isa(int level) { (void)level; }
#endif

static void transcendental(FxrtActivation act, float *v, int64_t len, float scale)
{
    int silu = act == FXRT_ACT_SILU;
#ifdef FXRT_EPILOGUE_SIMD
    if (cpu_has_avx512()) {
        if (act == FXRT_ACT_GELU)
            gelu_avx512(v, len, scale);
        else
            sigmoid_family_avx512(silu, v, len);
        return;
    }
    if (isa_cap >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        if (act == FXRT_ACT_GELU)
            gelu_avx2(v, len, scale);
        else
            sigmoid_family_avx2(silu, v, len);
        return;
    }
#endif
    /* The tests of FXRT_ACTIVATION_BUILT let a build without GELU or the
     * sigmoids drop their loops. */
    if (act == FXRT_ACT_GELU && FXRT_ACTIVATION_BUILT(FXRT_ACT_GELU))
        gelu(v, len, scale);
    else if (FXRT_ACTIVATION_BUILT(FXRT_ACT_SIGMOID) || FXRT_ACTIVATION_BUILT(FXRT_ACT_SILU))
        sigmoid_family(silu, v, len);
}

/* int in a small build (FXRT_SMALL_KERNELS): 64-bit loop counters cost a
 * 32-bit core extra instructions and code on every loop. */
#if FXRT_SMALL_KERNELS
typedef int EpIndex;
#else
typedef int64_t EpIndex;
#endif

static void activate(const FxrtEpilogue *ep, float *v, EpIndex len)
{
    float a = ep->alpha, b = ep->beta;
    switch ((FxrtActivation)ep->activation) {
    case FXRT_ACT_NONE: break;
    case FXRT_ACT_RELU:
        if (FXRT_ACTIVATION_BUILT(FXRT_ACT_RELU))
            for (EpIndex t = 0; t < len; t++)
                v[t] = v[t] < 0.0f ? 0.0f : v[t];
        break;
    case FXRT_ACT_CLIP:
        if (FXRT_ACTIVATION_BUILT(FXRT_ACT_CLIP))
            for (EpIndex t = 0; t < len; t++) {
                float x = v[t] < a ? a : v[t];
                v[t] = x > b ? b : x;
            }
        break;
    case FXRT_ACT_LEAKY_RELU:
        if (FXRT_ACTIVATION_BUILT(FXRT_ACT_LEAKY_RELU))
            for (EpIndex t = 0; t < len; t++)
                v[t] = v[t] < 0.0f ? a * v[t] : v[t];
        break;
    case FXRT_ACT_HARD_SWISH:
        if (FXRT_ACTIVATION_BUILT(FXRT_ACT_HARD_SWISH))
            for (EpIndex t = 0; t < len; t++)
                v[t] = v[t] * hard_sigmoid(v[t], 1.0f / 6.0f, 0.5f);
        break;
    case FXRT_ACT_HARD_SIGMOID:
        if (FXRT_ACTIVATION_BUILT(FXRT_ACT_HARD_SIGMOID))
            for (EpIndex t = 0; t < len; t++)
                v[t] = hard_sigmoid(v[t], a, b);
        break;
    case FXRT_ACT_TANH:
        if (FXRT_ACTIVATION_BUILT(FXRT_ACT_TANH))
            for (EpIndex t = 0; t < len; t++)
                v[t] = tanhf(v[t]);
        break;
    case FXRT_ACT_SIGMOID:
    case FXRT_ACT_SILU:
    case FXRT_ACT_GELU:
        if (FXRT_ACTIVATION_BUILT(ep->activation))
            transcendental((FxrtActivation)ep->activation, v, len, a);
        break;
    }
}

/* Adds the bias to the row segment v of row r, columns col0 on. */
static void add_bias(const FxrtEpilogue *ep, EpIndex r, EpIndex col0, float *v, EpIndex cols)
{
    const float *b = ep->bias + r * ep->bias_row_stride + col0 * ep->bias_col_stride;
    if (ep->bias_col_stride == 0) {
        float bv = b[0];
        for (EpIndex t = 0; t < cols; t++)
            v[t] += bv;
    } else if (ep->bias_col_stride == 1) {
        for (EpIndex t = 0; t < cols; t++)
            v[t] += b[t];
    } else {
        for (EpIndex t = 0; t < cols; t++)
            v[t] += b[t * ep->bias_col_stride];
    }
}

static void add_residual(const FxrtEpilogue *ep, EpIndex r, EpIndex col0, float *v,
                         EpIndex cols)
{
    const float *res = ep->residual + r * ep->residual_ld + col0;
    for (EpIndex t = 0; t < cols; t++)
        v[t] += res[t];
}

void fxrt_epilogue_apply_f32(const FxrtEpilogue *ep, int64_t row0, int64_t col0, int64_t rows,
                             int64_t cols, float *c, int64_t ldc)
{
    if (!fxrt_epilogue_active(ep))
        return;
#ifdef FXRT_EPILOGUE_SIMD
    if (cols >= 16 && cpu_has_avx512() && apply_rows_avx512(ep, row0, col0, rows, cols, c, ldc))
        return;
#endif
    /* Rows that follow each other in memory (the NCHWc kernels' [pixels x 8]
     * blocks) take the activation in one pass: eight-float rows are too
     * short for its vector loop. */
    EpIndex pass = ldc == cols ? (EpIndex)rows : 1;
    for (EpIndex i = 0; i < rows; i += pass) {
        for (EpIndex k = i; k < i + pass; k++) {
            if (ep->bias)
                add_bias(ep, (EpIndex)row0 + k, (EpIndex)col0, c + k * ldc, (EpIndex)cols);
            if (ep->residual && !ep->residual_after)
                add_residual(ep, (EpIndex)row0 + k, (EpIndex)col0, c + k * ldc, (EpIndex)cols);
        }
        activate(ep, c + i * ldc, pass * (EpIndex)cols);
        if (ep->residual && ep->residual_after)
            for (EpIndex k = i; k < i + pass; k++)
                add_residual(ep, (EpIndex)row0 + k, (EpIndex)col0, c + k * ldc, (EpIndex)cols);
    }
}
