/*
 * fxrt_quant_x86.h - internal to the runtime: fxrt_quant_rescale on AVX2
 * and AVX-512 registers, the vector forms of the fixed-point
 * requantization that the 8-bit GEMM tiles (fxrt_nn_qgemm.c) and the 8-bit
 * depthwise convolution (fxrt_nn_qconv.c) apply to their accumulators
 * before storing bytes; and the entry to the GEMM's VNNI tiles that the
 * convolution's implicit im2col uses.  Included only by host builds on x86-64 with GCC or
 * Clang (FXRT_USE_CBLAS); the functions carry their own target attributes.
 *
 * Both work in floor arithmetic on 64-bit lanes: with arithmetic shifts,
 * (p + 2^(s-1) - 1 + bit s of p) >> s is p / 2^s rounded half to even for
 * either sign, which is fxrt_quant_rescale's result; |p| < 2^62, so the sum
 * cannot overflow.  The even and odd int32 lanes take one 64-bit pass each
 * and are clamped while still 64-bit, so a result beyond int32 cannot wrap
 * back into range.
 *
 * The scaled forms (fxrt_quant_scale_*, fxrt_quant_requantize_scaled_*)
 * give the same bytes in about half the instructions, for loops that apply
 * one set of column scales to many accumulators (the scale is built once)
 * and outputs of 8 bits: p = float(acc) x float(multiplier x 2^-shift),
 * clamped to the output window [y_min - zp, y_max - zp], rounded to
 * nearest even.  Each of the three float roundings errs by at most 2^-23
 * of its value (2^-24 to nearest; 2^-23 in any directed mode the caller's
 * MXCSR might set), so an unclamped |p| <= 1024 is within 3 x 2^-13 <
 * 2^-11 of the exact product: unless p lies within 2^-11 of a half-integer
 * (FXRT_QUANT_NEAR_HALF), the exact product rounds to the same integer.
 * A clamped lane is exact too: p beyond a bound means the exact product is
 * beyond it or within 2^-11 of it, and rounds to the bound either way.  A
 * vector with a lane near a half-integer (about one lane in a thousand,
 * and every exact tie) takes the 64-bit path, so every lane is exact
 * whatever the accumulator.
 */
#ifndef FXRT_QUANT_X86_H
#define FXRT_QUANT_X86_H

#include <immintrin.h>
#include <stdint.h>

#define FXRT_QUANT_AVX2_TARGET __attribute__((target("avx2")))
#define FXRT_QUANT_AVX512_TARGET __attribute__((target("avx512f")))

/* x >> s per 64-bit lane, arithmetic, which AVX2 lacks: a negative x is
 * complemented around a logical shift (~(~x >> s) is floor(x / 2^s)). */
FXRT_QUANT_AVX2_TARGET __attribute__((always_inline)) static inline __m256i
fxrt_quant_sra64_avx2(__m256i x, __m256i s)
{
    __m256i negative = _mm256_cmpgt_epi64(_mm256_setzero_si256(), x);
    return _mm256_xor_si256(_mm256_srlv_epi64(_mm256_xor_si256(x, negative), s), negative);
}

/* The rescale of the low halves of the 64-bit lanes, clamped to [lo, hi]. */
FXRT_QUANT_AVX2_TARGET __attribute__((always_inline)) static inline __m256i
fxrt_quant_lanes_avx2(__m256i v, __m256i mult, __m256i shift, __m256i lo, __m256i hi)
{
    __m256i one = _mm256_set1_epi64x(1);
    __m256i round = _mm256_sub_epi64(_mm256_sllv_epi64(one, _mm256_sub_epi64(shift, one)), one);
    __m256i p = _mm256_mul_epi32(v, mult);
    __m256i odd = _mm256_and_si256(fxrt_quant_sra64_avx2(p, shift), one);
    __m256i y = fxrt_quant_sra64_avx2(_mm256_add_epi64(p, _mm256_add_epi64(round, odd)), shift);
    y = _mm256_blendv_epi8(y, lo, _mm256_cmpgt_epi64(lo, y));
    return _mm256_blendv_epi8(y, hi, _mm256_cmpgt_epi64(y, hi));
}

/* Eight int32 accumulators with their multipliers and shifts (int32 per
 * lane) -> clamp(rescale(acc) + zp, y_min, y_max) as int32 lanes. */
FXRT_QUANT_AVX2_TARGET __attribute__((always_inline)) static inline __m256i
fxrt_quant_requantize_avx2(__m256i acc, __m256i mult, __m256i shift, int32_t zp, int32_t y_min,
                           int32_t y_max)
{
    __m256i low32 = _mm256_set1_epi64x(0xffffffff);
    __m256i lo = _mm256_set1_epi64x((int64_t)y_min - zp);
    __m256i hi = _mm256_set1_epi64x((int64_t)y_max - zp);
    __m256i even = fxrt_quant_lanes_avx2(acc, mult, _mm256_and_si256(shift, low32), lo, hi);
    __m256i odd = fxrt_quant_lanes_avx2(_mm256_srli_epi64(acc, 32), _mm256_srli_epi64(mult, 32),
                                        _mm256_srli_epi64(shift, 32), lo, hi);
    __m256i y = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xaa);
    return _mm256_add_epi32(y, _mm256_set1_epi32(zp));
}

/* The low byte of each of eight int32 lanes, in order, in the low 8 bytes. */
FXRT_QUANT_AVX2_TARGET __attribute__((always_inline)) static inline __m128i
fxrt_quant_low_bytes_avx2(__m256i y)
{
    const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                               -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1,
                                               -1, -1, -1, -1, -1, -1);
    y = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(y, low_bytes),
                                    _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
    return _mm256_castsi256_si128(y);
}

FXRT_QUANT_AVX512_TARGET __attribute__((always_inline)) static inline __m512i
fxrt_quant_lanes_avx512(__m512i v, __m512i mult, __m512i shift)
{
    __m512i one = _mm512_set1_epi64(1);
    __m512i round = _mm512_sub_epi64(_mm512_sllv_epi64(one, _mm512_sub_epi64(shift, one)), one);
    __m512i p = _mm512_mul_epi32(v, mult);
    __m512i odd = _mm512_and_si512(_mm512_srav_epi64(p, shift), one);
    return _mm512_srav_epi64(_mm512_add_epi64(p, _mm512_add_epi64(round, odd)), shift);
}

/* Sixteen int32 accumulators -> clamp(rescale(acc) + zp, y_min, y_max). */
FXRT_QUANT_AVX512_TARGET __attribute__((always_inline)) static inline __m512i
fxrt_quant_requantize_avx512(__m512i acc, __m512i mult, __m512i shift, int32_t zp,
                             int32_t y_min, int32_t y_max)
{
    __m512i low32 = _mm512_set1_epi64(0xffffffff);
    __m512i even = fxrt_quant_lanes_avx512(acc, mult, _mm512_and_si512(shift, low32));
    __m512i odd = fxrt_quant_lanes_avx512(_mm512_srli_epi64(acc, 32), _mm512_srli_epi64(mult, 32),
                                          _mm512_srli_epi64(shift, 32));
    __m512i lo = _mm512_set1_epi64((int64_t)y_min - zp);
    __m512i hi = _mm512_set1_epi64((int64_t)y_max - zp);
    even = _mm512_min_epi64(_mm512_max_epi64(even, lo), hi);
    odd = _mm512_min_epi64(_mm512_max_epi64(odd, lo), hi);
    __m512i y = _mm512_mask_blend_epi32(0xaaaa, even, _mm512_slli_epi64(odd, 32));
    return _mm512_add_epi32(y, _mm512_set1_epi32(zp));
}

/* The SIMD tiles of fxrt_nn_qgemm.c for fxrt_nn_qconv.c's implicit im2col:
 * whether fxrt_qgemm runs them (the CPU has AVX-512 VNNI or AVX2, not capped
 * to the portable tiles by fxrt_qgemm_limit_isa), and fxrt_qgemm on an A
 * whose row i has its k-group p (four bytes) at a_rows[i] + k_offsets[p]; k
 * a multiple of 4.  The same bytes as fxrt_qgemm on the gathered matrix. */
int fxrt_qgemm_gather_in_use(void);
void fxrt_qgemm_gather(const FxrtQGemm *q, int64_t m, const uint8_t *const *a_rows,
                       const int32_t *k_offsets, const void *packed, void *y, int64_t ldy);

/* Round to nearest even, exceptions suppressed: a macro, since the
 * intrinsics want an immediate even in unoptimized builds. */
#define FXRT_QUANT_NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* A float product this close to a half-integer might round the other way
 * than the exact one (see the file comment's error bound). */
#define FXRT_QUANT_NEAR_HALF (0.5f - 0x1p-11f)

/* Multiplier x 2^-shift rounded to float, per lane: the multiplier
 * rounded to float (the only rounding: a power of two scales exactly)
 * times 2^-shift built in the exponent field.  fxrt_quant_multiplier's
 * shifts are 31 to 62, where that power is a normal float. */
FXRT_QUANT_AVX2_TARGET __attribute__((always_inline)) static inline __m256
fxrt_quant_float_scale_avx2(__m256i mult, __m256i shift)
{
    __m256i power = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(127), shift), 23);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(mult), _mm256_castsi256_ps(power));
}

/* Eight columns' requantization to an 8-bit type, built once for many
 * accumulators: y_max - zp and zp - y_min at most 1024. */
typedef struct FxrtQuantScaleAvx2 {
    __m256 scale;        /* multiplier x 2^-shift, rounded to float */
    __m256 lo, hi;       /* y_min - zp, y_max - zp */
    __m256i mult, shift; /* for the 64-bit path */
    int32_t zp, y_min, y_max;
} FxrtQuantScaleAvx2;

FXRT_QUANT_AVX2_TARGET __attribute__((always_inline)) static inline FxrtQuantScaleAvx2
fxrt_quant_scale_avx2(__m256i mult, __m256i shift, int32_t zp, int32_t y_min, int32_t y_max)
{
    FxrtQuantScaleAvx2 s;
    s.scale = fxrt_quant_float_scale_avx2(mult, shift);
    s.lo = _mm256_set1_ps((float)(y_min - zp));
    s.hi = _mm256_set1_ps((float)(y_max - zp));
    s.mult = mult;
    s.shift = shift;
    s.zp = zp;
    s.y_min = y_min;
    s.y_max = y_max;
    return s;
}

/* fxrt_quant_requantize_avx2's result: the float product clamped to the
 * output window and rounded, or the 64-bit path where a lane's product lies
 * near a tie.  The clamp comes first, so a clamped lane is an integer and
 * never takes that path. */
FXRT_QUANT_AVX2_TARGET __attribute__((always_inline)) static inline __m256i
fxrt_quant_requantize_scaled_avx2(__m256i acc, const FxrtQuantScaleAvx2 *s)
{
    __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), s->scale);
    p = _mm256_min_ps(_mm256_max_ps(p, s->lo), s->hi);
    __m256 r = _mm256_round_ps(p, FXRT_QUANT_NEAREST);
    __m256 distance = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(p, r));
    __m256 near = _mm256_cmp_ps(distance, _mm256_set1_ps(FXRT_QUANT_NEAR_HALF), _CMP_GT_OQ);
    if (__builtin_expect(_mm256_movemask_ps(near) != 0, 0))
        return fxrt_quant_requantize_avx2(acc, s->mult, s->shift, s->zp, s->y_min, s->y_max);
    return _mm256_add_epi32(_mm256_cvttps_epi32(r), _mm256_set1_epi32(s->zp));
}

/* Sixteen columns' requantization to an 8-bit type, built once for many
 * accumulators: y_max - zp and zp - y_min at most 1024. */
typedef struct FxrtQuantScaleAvx512 {
    __m512 scale;        /* multiplier x 2^-shift, rounded to float */
    __m512 lo, hi;       /* y_min - zp, y_max - zp */
    __m512i mult, shift; /* for the 64-bit path */
    int32_t zp, y_min, y_max;
} FxrtQuantScaleAvx512;

FXRT_QUANT_AVX512_TARGET __attribute__((always_inline)) static inline FxrtQuantScaleAvx512
fxrt_quant_scale_avx512(__m512i mult, __m512i shift, int32_t zp, int32_t y_min, int32_t y_max)
{
    FxrtQuantScaleAvx512 s;
    /* As fxrt_quant_float_scale_avx2, the rounding explicit. */
    __m512i power = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(127), shift), 23);
    s.scale = _mm512_mul_ps(_mm512_cvt_roundepi32_ps(mult, FXRT_QUANT_NEAREST),
                            _mm512_castsi512_ps(power));
    s.lo = _mm512_set1_ps((float)(y_min - zp));
    s.hi = _mm512_set1_ps((float)(y_max - zp));
    s.mult = mult;
    s.shift = shift;
    s.zp = zp;
    s.y_min = y_min;
    s.y_max = y_max;
    return s;
}

/* fxrt_quant_requantize_avx512's result, as fxrt_quant_requantize_scaled_avx2
 * finds it; every rounding explicit, whatever the caller's MXCSR. */
FXRT_QUANT_AVX512_TARGET __attribute__((always_inline)) static inline __m512i
fxrt_quant_requantize_scaled_avx512(__m512i acc, const FxrtQuantScaleAvx512 *s)
{
    __m512 p = _mm512_mul_round_ps(_mm512_cvt_roundepi32_ps(acc, FXRT_QUANT_NEAREST), s->scale,
                                   FXRT_QUANT_NEAREST);
    p = _mm512_min_ps(_mm512_max_ps(p, s->lo), s->hi);
    __m512i r = _mm512_cvt_roundps_epi32(p, FXRT_QUANT_NEAREST);
    __m512 distance = _mm512_abs_ps(_mm512_sub_ps(p, _mm512_cvtepi32_ps(r)));
    if (__builtin_expect(_mm512_cmp_ps_mask(distance, _mm512_set1_ps(FXRT_QUANT_NEAR_HALF),
                                            _CMP_GT_OQ) != 0,
                         0))
        return fxrt_quant_requantize_avx512(acc, s->mult, s->shift, s->zp, s->y_min, s->y_max);
    return _mm512_add_epi32(r, _mm512_set1_epi32(s->zp));
}

#endif
