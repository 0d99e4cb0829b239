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
 * interpreter and the generated code compute the same bits.  Its exp is
 * fxrt_math.h's polynomial without branches or calls, which vectorizes: libm's expf per
 * element cost more than the attention products it normalizes.
 */
#include <math.h>
#include <string.h>

#include "fxrt.h"
#include "fxrt_math.h"

/* int in a small build (FXRT_SMALL_KERNELS): 64-bit loop counters cost a
 * 32-bit core extra instructions and code on every loop. */
#if FXRT_SMALL_KERNELS
typedef int SmIndex;
#else
typedef int64_t SmIndex;
#endif

static float row_max(const float *x, SmIndex len, SmIndex inner)
{
    float m = -INFINITY;
    for (SmIndex l = 0; l < len; l++)
        m = x[l * inner] > m ? x[l * inner] : m;
    return m;
}

/* The sum of v[0], v[stride], ... in eight interleaved chains, combined
 * pairwise: an order that vectorizes and that does not depend on stride. */
static float lane_sum(const float *v, SmIndex len, SmIndex stride)
{
    float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    SmIndex whole = len / 8 * 8;
    for (SmIndex l = 0; l < whole; l += 8)
        for (int k = 0; k < 8; k++)
            s[k] += v[(l + k) * stride];
    for (SmIndex l = whole; l < len; l++)
        s[0] += v[l * stride];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

FXRT_NO_TRAPPING_MATH static void exp_row(const float *x, float *y, SmIndex len, float shift)
{
    for (SmIndex l = 0; l < len; l++)
        y[l] = fxrt_exp_nonpositive(x[l] - shift);
}

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
/* On host, the same loop eight lanes wide when the CPU has AVX2 (a target
 * attribute chosen at run time, as in fxrt_nn_gemm.c).  Without FMA in the
 * target the compiler cannot contract the polynomial, so both versions
 * round alike and give the same bits. */
#define FXRT_SOFTMAX_AVX2 1
FXRT_NO_TRAPPING_MATH __attribute__((target("avx2"))) static void exp_row_avx2(const float *x,
                                                                          float *y, int64_t len,
                                                                          float shift)
{
    for (SmIndex l = 0; l < len; l++)
        y[l] = fxrt_exp_nonpositive(x[l] - shift);
}
#endif

float fxrt_softmax_exp_f32(const float *x, float *y, int64_t len64, int64_t stride64, float shift)
{
    SmIndex len = (SmIndex)len64, stride = (SmIndex)stride64;
    if (stride != 1)
        for (SmIndex l = 0; l < len; l++)
            y[l * stride] = fxrt_exp_nonpositive(x[l * stride] - shift);
#ifdef FXRT_SOFTMAX_AVX2
    else if (__builtin_cpu_supports("avx2"))
        exp_row_avx2(x, y, len, shift);
#endif
    else
        exp_row(x, y, len, shift);
    return lane_sum(y, len, stride);
}

void fxrt_softmax_f32(int64_t outer64, int64_t len64, int64_t inner64, const float *x, float *y)
{
    SmIndex outer = (SmIndex)outer64, len = (SmIndex)len64, inner = (SmIndex)inner64;
    for (SmIndex o = 0; o < outer; o++)
        for (SmIndex i = 0; i < inner; i++) {
            const float *xp = x + o * len * inner + i;
            float *yp = y + o * len * inner + i;
            float m = row_max(xp, len, inner);
            float s = fxrt_softmax_exp_f32(xp, yp, len, inner, m);
            float inv = 1.0f / s;
            for (SmIndex l = 0; l < len; l++)
                yp[l * inner] *= inv;
        }
}

void fxrt_logsoftmax_f32(int64_t outer, int64_t len, int64_t inner, const float *x, float *y)
{
    for (SmIndex o = 0; o < outer; o++)
        for (SmIndex i = 0; i < inner; i++) {
            const float *xp = x + o * len * inner + i;
            float *yp = y + o * len * inner + i;
            float m = row_max(xp, len, inner);
            float s = 0.0f;
            for (SmIndex l = 0; l < len; l++)
                s += expf(xp[l * inner] - m);
            float shift = m + logf(s);
            for (SmIndex l = 0; l < len; l++)
                yp[l * inner] = xp[l * inner] - shift;
        }
}

void fxrt_hardmax_f32(int64_t outer, int64_t len, int64_t inner, const float *x, float *y)
{
    for (SmIndex o = 0; o < outer; o++)
        for (SmIndex i = 0; i < inner; i++) {
            const float *xp = x + o * len * inner + i;
            float *yp = y + o * len * inner + i;
            int64_t best = 0;
            for (SmIndex l = 1; l < len; l++)
                if (xp[l * inner] > xp[best * inner])
                    best = l;
            for (SmIndex l = 0; l < len; l++)
                yp[l * inner] = l == best ? 1.0f : 0.0f;
        }
}
