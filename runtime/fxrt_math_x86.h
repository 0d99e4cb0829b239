/*
 * fxrt_math_x86.h - fxrt_math.h's exp and sigmoid family on AVX2 and
 * AVX-512 registers, for the host kernels that apply them in registers (the
 * NCHWc convolution tiles) or over long rows (the epilogue loops).
 *
 * The same range reduction and polynomial as fxrt_exp_nonpositive, with
 * FMA, and the sigmoid's division replaced by the CPU's reciprocal estimate
 * and one Newton step: the division was the slowest step (a third of
 * EfficientNet-B0's time went to SiLU).  After the Newton step the
 * reciprocal is within 2 ulp (AVX2's 12-bit estimate) or 1 ulp (AVX-512's
 * 14-bit one), so these differ from the portable formulas by a few ulp,
 * never more than the kernels' tolerance against the reference.  NaN stays
 * NaN; exp underflows to 0 below -126 ln 2 as in the portable form.  GELU
 * is fxrt_erf_rational's rational function the same way: its division by
 * Q, and GELU's by sqrt 2, were two vector divisions per element, which
 * made ConvNeXt's GELU cost three quarters of the matrix product before it.
 *
 * Internal to the runtime; only for x86-64 builds with GCC or Clang.
 */
#ifndef FXRT_MATH_X86_H
#define FXRT_MATH_X86_H

#include <immintrin.h>

#include "fxrt_math.h"

#define FXRT_AVX2_FN __attribute__((target("avx2,fma"), always_inline)) static inline
#define FXRT_AVX512_FN __attribute__((target("avx512f,avx2,fma"), always_inline)) static inline

/* The constants of fxrt_exp_nonpositive. */
#define FXRT_EXP_LIMIT -87.33654f
#define FXRT_EXP_ROUND 12582912.0f /* 1.5 * 2^23 */
#define FXRT_EXP_BIAS (127 - 0x4B400000)

/* exp(x), or exp(-x) when `negated`, for x where that is a normal float:
 * returns exp(r) and sets *scale to 2^n, r = (-)x - n ln 2 within ln 2 / 2
 * of 0 (fxrt_exp_nonpositive's reduction and polynomial). */
FXRT_AVX2_FN __m256 exp_reduced_avx2(__m256 x, int negated, __m256 *scale)
{
    const __m256 round = _mm256_set1_ps(FXRT_EXP_ROUND);
    __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(negated ? -1.44269504f : 1.44269504f), round);
    __m256 n = _mm256_sub_ps(t, round);
    __m256 r = negated ? _mm256_fnmsub_ps(n, _mm256_set1_ps(0.693359375f), x)
                       : _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256i bits = _mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(FXRT_EXP_BIAS));
    *scale = _mm256_castsi256_ps(_mm256_slli_epi32(bits, 23));
    return _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
}

FXRT_AVX2_FN __m256 fxrt_exp_nonpositive_avx2(__m256 x)
{
    const __m256 limit = _mm256_set1_ps(FXRT_EXP_LIMIT);
    /* max(limit, x), not max(x, limit): a NaN x comes through */
    __m256 scale, e = exp_reduced_avx2(_mm256_max_ps(limit, x), 0, &scale);
    __m256 under = _mm256_cmp_ps(x, limit, _CMP_LT_OQ);
    return _mm256_andnot_ps(under, _mm256_mul_ps(e, scale));
}

/* 1 / (1 + exp(-v)), with v clamped to [-88, -FXRT_EXP_LIMIT] so that
 * exp(-v) is a normal float (the reciprocal of 1 + e^88 is 0 to float
 * precision, and the sigmoid of v past 87.3 is 1): no sign test, blend or
 * underflow mask, and the exponent's scale and the 1 + folded into one
 * FMA.  About 12 cycles a vector on Zen 3 against 16 for the form that
 * took exp(-|v|) and chose 1 / (1 + e) or e / (1 + e) by the sign; the
 * error is the same, within 3e-7 of the exact SiLU.  max and min with v
 * second pass a NaN through. */
FXRT_AVX2_FN __m256 fxrt_sigmoid_avx2(__m256 v)
{
    __m256 c = _mm256_min_ps(_mm256_set1_ps(-FXRT_EXP_LIMIT), _mm256_max_ps(_mm256_set1_ps(-88.0f), v));
    __m256 scale, e = exp_reduced_avx2(c, 1, &scale);
    __m256 d = _mm256_fmadd_ps(e, scale, _mm256_set1_ps(1.0f));
    __m256 q = _mm256_rcp_ps(d);
    return _mm256_mul_ps(q, _mm256_fnmadd_ps(d, q, _mm256_set1_ps(2.0f)));
}

FXRT_AVX2_FN __m256 fxrt_silu_avx2(__m256 v) { return _mm256_mul_ps(v, fxrt_sigmoid_avx2(v)); }

FXRT_AVX512_FN __m512 fxrt_exp_nonpositive_avx512(__m512 x)
{
    const __m512 limit = _mm512_set1_ps(FXRT_EXP_LIMIT), round = _mm512_set1_ps(FXRT_EXP_ROUND);
    __m512 c = _mm512_max_ps(limit, x);
    __m512 t = _mm512_fmadd_ps(c, _mm512_set1_ps(1.44269504f), round);
    __m512 n = _mm512_sub_ps(t, round);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), c);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    __m512i bits = _mm512_add_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(FXRT_EXP_BIAS));
    __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(bits, 23));
    __mmask16 kept = _mm512_cmp_ps_mask(x, limit, _CMP_NLT_UQ);
    return _mm512_maskz_mul_ps(kept, e, scale);
}

FXRT_AVX512_FN __m512 fxrt_sigmoid_avx512(__m512 v)
{
    __m512 minus_abs = _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u)));
    __m512 e = fxrt_exp_nonpositive_avx512(minus_abs);
    __m512 d = _mm512_add_ps(e, _mm512_set1_ps(1.0f));
    __m512 r = _mm512_rcp14_ps(d);
    r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
    __mmask16 nonnegative = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GE_OQ);
    return _mm512_mask_blend_ps(nonnegative, _mm512_mul_ps(e, r), r);
}

FXRT_AVX512_FN __m512 fxrt_silu_avx512(__m512 v) { return _mm512_mul_ps(v, fxrt_sigmoid_avx512(v)); }

/* scale * v * (1 + erf(v / sqrt 2)) with fxrt_erf_rational's polynomials:
 * v / sqrt 2 as a product, 1 / Q as the reciprocal estimate and a Newton
 * step, exactly +-1 beyond the limit as in the portable form (so that GELU
 * of -inf is NaN, as the unfused chain's -inf * 0).  NaN stays NaN: max and
 * min return their second operand when one is NaN. */
FXRT_AVX2_FN __m256 fxrt_gelu_avx2(__m256 v, __m256 scale)
{
    const __m256 limit = _mm256_set1_ps(FXRT_ERF_LIMIT), neg_limit = _mm256_set1_ps(-FXRT_ERF_LIMIT);
    const __m256 one = _mm256_set1_ps(1.0f), neg_one = _mm256_set1_ps(-1.0f);
    __m256 x = _mm256_mul_ps(v, _mm256_set1_ps(0.707106781f));
    __m256 c = _mm256_min_ps(limit, _mm256_max_ps(neg_limit, x));
    __m256 z = _mm256_mul_ps(c, c);
    __m256 p = _mm256_set1_ps(FXRT_ERF_P5);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(FXRT_ERF_P4));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(FXRT_ERF_P3));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(FXRT_ERF_P2));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(FXRT_ERF_P1));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(FXRT_ERF_P0));
    __m256 q = _mm256_set1_ps(FXRT_ERF_Q5);
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(FXRT_ERF_Q4));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(FXRT_ERF_Q3));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(FXRT_ERF_Q2));
    q = _mm256_fmadd_ps(q, z, _mm256_set1_ps(FXRT_ERF_Q1));
    q = _mm256_fmadd_ps(q, z, one);
    __m256 rq = _mm256_rcp_ps(q);
    rq = _mm256_mul_ps(rq, _mm256_fnmadd_ps(q, rq, _mm256_set1_ps(2.0f)));
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(c, p), rq);
    e = _mm256_min_ps(one, _mm256_max_ps(neg_one, e));
    e = _mm256_blendv_ps(e, one, _mm256_cmp_ps(x, limit, _CMP_GE_OQ));
    e = _mm256_blendv_ps(e, neg_one, _mm256_cmp_ps(x, neg_limit, _CMP_LE_OQ));
    return _mm256_mul_ps(_mm256_mul_ps(v, _mm256_add_ps(e, one)), scale);
}

FXRT_AVX512_FN __m512 fxrt_gelu_avx512(__m512 v, __m512 scale)
{
    const __m512 limit = _mm512_set1_ps(FXRT_ERF_LIMIT), neg_limit = _mm512_set1_ps(-FXRT_ERF_LIMIT);
    const __m512 one = _mm512_set1_ps(1.0f), neg_one = _mm512_set1_ps(-1.0f);
    __m512 x = _mm512_mul_ps(v, _mm512_set1_ps(0.707106781f));
    __m512 c = _mm512_min_ps(limit, _mm512_max_ps(neg_limit, x));
    __m512 z = _mm512_mul_ps(c, c);
    __m512 p = _mm512_set1_ps(FXRT_ERF_P5);
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(FXRT_ERF_P4));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(FXRT_ERF_P3));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(FXRT_ERF_P2));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(FXRT_ERF_P1));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(FXRT_ERF_P0));
    __m512 q = _mm512_set1_ps(FXRT_ERF_Q5);
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(FXRT_ERF_Q4));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(FXRT_ERF_Q3));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(FXRT_ERF_Q2));
    q = _mm512_fmadd_ps(q, z, _mm512_set1_ps(FXRT_ERF_Q1));
    q = _mm512_fmadd_ps(q, z, one);
    __m512 rq = _mm512_rcp14_ps(q);
    rq = _mm512_mul_ps(rq, _mm512_fnmadd_ps(q, rq, _mm512_set1_ps(2.0f)));
    __m512 e = _mm512_mul_ps(_mm512_mul_ps(c, p), rq);
    e = _mm512_min_ps(one, _mm512_max_ps(neg_one, e));
    e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, limit, _CMP_GE_OQ), one);
    e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, neg_limit, _CMP_LE_OQ), neg_one);
    return _mm512_mul_ps(_mm512_mul_ps(v, _mm512_add_ps(e, one)), scale);
}

#endif
