/*
 * fxrt_quant_x86.h - internal to the runtime: fxrt_quant_rescale on AVX2
 * and AVX-512 registers, the one vector form of the fixed-point
 * requantization that the 8-bit GEMM tiles (fxrt_nn_qgemm.c) and the 8-bit
 * depthwise convolution (fxrt_nn_qconv.c) apply to their accumulators
 * before storing bytes.  Included only by host builds on x86-64 with GCC or
 * Clang (FXRT_USE_CBLAS); the functions carry their own target attributes.
 *
 * Both work in floor arithmetic on 64-bit lanes: with arithmetic shifts,
 * (p + 2^(s-1) - 1 + bit s of p) >> s is p / 2^s rounded half to even for
 * either sign, which is fxrt_quant_rescale's result; |p| < 2^62, so the sum
 * cannot overflow.  The even and odd int32 lanes take one 64-bit pass each
 * and are clamped while still 64-bit, so a result beyond int32 cannot wrap
 * back into range.
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

#endif
