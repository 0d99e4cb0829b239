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

#endif
