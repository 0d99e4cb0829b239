/*
 * fxrt_nn_softmax.c - Softmax, LogSoftmax and Hardmax along the middle axis
 * of a tensor folded to outer x len x inner.
 *
 * The maximum is subtracted before exp so that large inputs cannot
 * overflow (the ONNX "large_number" tests check exactly that).  A row of
 * only -inf gives NaN, as in the ONNX reference; the kernels do not invent
 * another answer.  Sums are float: every term is at most 1.
 *
 * Softmax's exponentials are those of fxrt_softmax_exp_f32, which the fused
 * loops of compiled models call too (ir/ops/fused_reduction.c), so that the
 * interpreter and the generated code compute the same bits.  Its exp is a
 * polynomial without branches or calls, which vectorizes: libm's expf per
 * element cost more than the attention products it normalizes.
 */
#include <math.h>
#include <string.h>

#include "fxrt.h"

static float row_max(const float *x, int64_t len, int64_t inner)
{
    float m = -INFINITY;
    for (int64_t l = 0; l < len; l++)
        m = x[l * inner] > m ? x[l * inner] : m;
    return m;
}

#if defined(__GNUC__) && !defined(__clang__)
/* GCC will not if-convert exp_nonpositive's selects under the default
 * -ftrapping-math, which would leave its loops scalar; nothing reads the
 * floating-point exception flags they could raise. */
#define NO_TRAPPING_MATH __attribute__((optimize("no-trapping-math")))
#else
#define NO_TRAPPING_MATH
#endif

/* exp(x) for x <= 0 (or NaN), within 2 ulp of expf: x = n ln 2 + r with
 * |r| <= ln 2 / 2 (n rounded by adding 1.5 * 2^23, ln 2 split in two so
 * that n * LN2_HI is exact), Cephes's degree-7 polynomial for exp(r), and
 * 2^n built in the exponent bits, which the rounding constant left in the
 * low bits of t.  Below -126 ln 2, where exp is no longer a normal float,
 * the result is 0 (a softmax term that small vanishes next to the row's 1). */
NO_TRAPPING_MATH static inline float exp_nonpositive(float x)
{
    const float round_magic = 12582912.0f; /* 1.5 * 2^23 */
    const float log2e = 1.44269504f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    float c = x < -87.33654f ? -87.33654f : x;
    float t = c * log2e + round_magic;
    float n = t - round_magic;
    float r = (c - n * ln2_hi) - n * ln2_lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float e = p * (r * r) + r + 1.0f;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    /* t's low bits hold n + 2^22; the exponent field wants n + 127 */
    uint32_t scale_bits = (bits - 0x4B400000u + 127u) << 23;
    float scale;
    memcpy(&scale, &scale_bits, sizeof scale);
    return x < -87.33654f ? 0.0f : e * scale;
}

/* The sum of v[0], v[stride], ... in eight interleaved chains, combined
 * pairwise: an order that vectorizes and that does not depend on stride. */
static float lane_sum(const float *v, int64_t len, int64_t stride)
{
    float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    int64_t whole = len / 8 * 8;
    for (int64_t l = 0; l < whole; l += 8)
        for (int k = 0; k < 8; k++)
            s[k] += v[(l + k) * stride];
    for (int64_t l = whole; l < len; l++)
        s[0] += v[l * stride];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

NO_TRAPPING_MATH static void exp_row(const float *x, float *y, int64_t len, float shift)
{
    for (int64_t l = 0; l < len; l++)
        y[l] = exp_nonpositive(x[l] - shift);
}

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
/* On host, the same loop eight lanes wide when the CPU has AVX2 (a target
 * attribute chosen at run time, as in fxrt_nn_gemm.c).  Without FMA in the
 * target the compiler cannot contract the polynomial, so both versions
 * round alike and give the same bits. */
#define FXRT_SOFTMAX_AVX2 1
NO_TRAPPING_MATH __attribute__((target("avx2"))) static void exp_row_avx2(const float *x,
                                                                          float *y, int64_t len,
                                                                          float shift)
{
    for (int64_t l = 0; l < len; l++)
        y[l] = exp_nonpositive(x[l] - shift);
}
#endif

float fxrt_softmax_exp_f32(const float *x, float *y, int64_t len, int64_t stride, float shift)
{
    if (stride != 1)
        for (int64_t l = 0; l < len; l++)
            y[l * stride] = exp_nonpositive(x[l * stride] - shift);
#ifdef FXRT_SOFTMAX_AVX2
    else if (__builtin_cpu_supports("avx2"))
        exp_row_avx2(x, y, len, shift);
#endif
    else
        exp_row(x, y, len, shift);
    return lane_sum(y, len, stride);
}

void fxrt_softmax_f32(int64_t outer, int64_t len, int64_t inner, const float *x, float *y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xp = x + o * len * inner + i;
            float *yp = y + o * len * inner + i;
            float m = row_max(xp, len, inner);
            float s = fxrt_softmax_exp_f32(xp, yp, len, inner, m);
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
