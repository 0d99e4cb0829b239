/*
 * fxrt_math.h - exp and the sigmoid family as branch-free float32
 * polynomials, inlined into the kernels' loops so that those loops
 * vectorize.  libm's expf is a call per element: a Sigmoid or SiLU after a
 * convolution cost more than the convolution (EfficientNet-B0 spent 60% of
 * its time in them).
 *
 * Internal to the runtime; not part of fxrt.h's interface.  One definition
 * of each formula, so that the elementwise kernels and the portable
 * epilogues compute the same bits (up to FMA contraction, which a target
 * attribute without FMA avoids); on x86 hosts the epilogues and the NCHWc
 * tiles use fxrt_math_x86.h's register forms, a few ulp away.  The
 * interpreter calls the same kernels as the generated code, so the two
 * agree on any one machine.
 */
#ifndef FXRT_MATH_H
#define FXRT_MATH_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
/* GCC will not if-convert the selects below under the default
 * -ftrapping-math, which leaves their loops scalar; nothing reads the
 * floating-point exception flags they could raise.  Every function that
 * inlines these carries the option too. */
#define FXRT_NO_TRAPPING_MATH __attribute__((optimize("no-trapping-math")))
#else
#define FXRT_NO_TRAPPING_MATH
#endif

/* acc += a * b as one fused multiply-add where the FPU has a
 * single-precision one and the code runs on it (a Cortex-M4F's VFMA): the
 * firmware builds in ISO C (-std=c99), where GCC does not contract a * b + c
 * into it.  Elsewhere (x86 without -mfma: fmaf would be a library call)
 * the plain expression. */
#if defined(__GNUC__) && defined(__ARM_FEATURE_FMA) && defined(__ARM_FP) && (__ARM_FP & 4)
#define FXRT_MAC(acc, a, b) ((acc) = __builtin_fmaf((a), (b), (acc)))
#else
#define FXRT_MAC(acc, a, b) ((acc) += (a) * (b))
#endif

/* exp(x) for x <= 0 (or NaN), within 2 ulp of expf: x = n ln 2 + r with
 * |r| <= ln 2 / 2 (n rounded by adding 1.5 * 2^23, ln 2 split in two so
 * that n * LN2_HI is exact), Cephes's degree-7 polynomial for exp(r), and
 * 2^n built in the exponent bits, which the rounding constant left in the
 * low bits of t.  Below -126 ln 2, where exp is no longer a normal float,
 * the result is 0. */
FXRT_NO_TRAPPING_MATH static inline float fxrt_exp_nonpositive(float x)
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

/* 1 / (1 + exp(-v)) without overflow: with e = exp(-|v|) <= 1 it is
 * 1 / (1 + e) for v >= 0 and e / (1 + e) below.  Within 3 ulp of the
 * libm form; NaN stays NaN. */
FXRT_NO_TRAPPING_MATH static inline float fxrt_sigmoid(float v)
{
    float e = fxrt_exp_nonpositive(v < 0.0f ? v : -v);
    float r = 1.0f / (1.0f + e);
    return v >= 0.0f ? r : e * r;
}

/* SiLU (swish): v * sigmoid(v), the activation of EfficientNet and most
 * mobile networks since. */
FXRT_NO_TRAPPING_MATH static inline float fxrt_silu(float v)
{
    return v * fxrt_sigmoid(v);
}

/* erf as x * P(x^2) / Q(x^2), fitted by least squares to erf(x) / x on
 * [0, 4] (relative weights) and checked in float32 on [-5, 5]: at most 4e-7
 * from erf; exactly +-1 beyond |x| = 4, where erf is within 2e-8 of it.
 * Unlike libm's erff it has no branches or table, so the GELU loop
 * vectorizes: the exact-GELU epilogue would otherwise cost as much as the
 * matrix product it follows (a transformer FFN).  The coefficients are
 * named so that fxrt_math_x86.h evaluates the same polynomials. */
#define FXRT_ERF_LIMIT 4.0f
#define FXRT_ERF_P0 1.128378784e+00f
#define FXRT_ERF_P1 2.153511107e-01f
#define FXRT_ERF_P2 5.610030838e-02f
#define FXRT_ERF_P3 4.861013601e-03f
#define FXRT_ERF_P4 3.133980736e-04f
#define FXRT_ERF_P5 1.901090465e-06f
#define FXRT_ERF_Q1 5.241757674e-01f
#define FXRT_ERF_Q2 1.244718129e-01f
#define FXRT_ERF_Q3 1.714450071e-02f
#define FXRT_ERF_Q4 1.436344086e-03f
#define FXRT_ERF_Q5 3.805828947e-05f

FXRT_NO_TRAPPING_MATH static inline float fxrt_erf_rational(float x)
{
    float c = x < -FXRT_ERF_LIMIT ? -FXRT_ERF_LIMIT : (x > FXRT_ERF_LIMIT ? FXRT_ERF_LIMIT : x);
    float z = c * c;
    float p = FXRT_ERF_P0 +
              z * (FXRT_ERF_P1 +
                   z * (FXRT_ERF_P2 + z * (FXRT_ERF_P3 + z * (FXRT_ERF_P4 + z * FXRT_ERF_P5))));
    float q = 1.0f + z * (FXRT_ERF_Q1 +
                          z * (FXRT_ERF_Q2 +
                               z * (FXRT_ERF_Q3 + z * (FXRT_ERF_Q4 + z * FXRT_ERF_Q5))));
    float r = c * p / q;
    r = r > 1.0f ? 1.0f : (r < -1.0f ? -1.0f : r);
    return x <= -FXRT_ERF_LIMIT ? -1.0f : (x >= FXRT_ERF_LIMIT ? 1.0f : r);
}

#endif
