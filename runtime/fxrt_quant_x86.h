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
 * give the same bytes in a third of the instructions, for loops that apply
 * one set of column scales to many accumulators (the scale is built once):
 * multiplier x 2^-shift is exact in a double, and so is acc x that double
 * while the two significands fit 53 bits together; rint of the exact
 * product is then the exact rounding half to even that fxrt_quant_rescale
 * computes.  A multiplier made from a float scale (fxrt_quant_multiplier)
 * has at most 24 significant bits (its low 7 are zero), so |acc| < 2^29
 * qualifies; any other multiplier, |acc| < 2^22.  A vector with a lane
 * beyond its bound takes the 64-bit path instead, so every lane is exact
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

/* Accumulator bounds below which the double product is exact: 2^29 for a
 * multiplier with its low 7 bits zero (24 significant bits), else 2^22. */
enum { FXRT_QUANT_EXACT_FLOAT_MULT = 1 << 29, FXRT_QUANT_EXACT_ANY_MULT = 1 << 22 };

/* Eight lanes of 2^-shift as doubles (shift in [0, 1022]): the exponent
 * field built directly. */
FXRT_QUANT_AVX2_TARGET __attribute__((always_inline)) static inline __m256d
fxrt_quant_pow2_avx2(__m128i shift)
{
    __m256i e = _mm256_sub_epi64(_mm256_set1_epi64x(1023), _mm256_cvtepi32_epi64(shift));
    return _mm256_castsi256_pd(_mm256_slli_epi64(e, 52));
}

/* Eight columns' requantization, built once for many accumulators. */
typedef struct FxrtQuantScaleAvx2 {
    __m256d low, high;           /* multiplier x 2^-shift of lanes 0-3, 4-7 */
    __m256i mult, shift;         /* for the 64-bit path */
    __m256i exact_max;           /* the largest |acc| whose product is exact */
    int32_t zp, y_min, y_max;
} FxrtQuantScaleAvx2;

FXRT_QUANT_AVX2_TARGET __attribute__((always_inline)) static inline FxrtQuantScaleAvx2
fxrt_quant_scale_avx2(__m256i mult, __m256i shift, int32_t zp, int32_t y_min, int32_t y_max)
{
    FxrtQuantScaleAvx2 s;
    s.low = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(mult)),
                          fxrt_quant_pow2_avx2(_mm256_castsi256_si128(shift)));
    s.high = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(mult, 1)),
                           fxrt_quant_pow2_avx2(_mm256_extracti128_si256(shift, 1)));
    s.mult = mult;
    s.shift = shift;
    __m256i float_mult = _mm256_cmpeq_epi32(_mm256_and_si256(mult, _mm256_set1_epi32(0x7f)),
                                            _mm256_setzero_si256());
    s.exact_max = _mm256_blendv_epi8(_mm256_set1_epi32(FXRT_QUANT_EXACT_ANY_MULT - 1),
                                     _mm256_set1_epi32(FXRT_QUANT_EXACT_FLOAT_MULT - 1),
                                     float_mult);
    s.zp = zp;
    s.y_min = y_min;
    s.y_max = y_max;
    return s;
}

/* fxrt_quant_requantize_avx2's result through doubles when exact. */
FXRT_QUANT_AVX2_TARGET __attribute__((always_inline)) static inline __m256i
fxrt_quant_requantize_scaled_avx2(__m256i acc, const FxrtQuantScaleAvx2 *s)
{
    /* Unsigned: |INT32_MIN| stays 2^31, beyond every bound. */
    __m256i magnitude = _mm256_abs_epi32(acc);
    __m256i within = _mm256_cmpeq_epi32(_mm256_max_epu32(magnitude, s->exact_max), s->exact_max);
    if (__builtin_expect(_mm256_movemask_epi8(within) != -1, 0))
        return fxrt_quant_requantize_avx2(acc, s->mult, s->shift, s->zp, s->y_min, s->y_max);
    __m256d low = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(acc)), s->low);
    __m256d high = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(acc, 1)), s->high);
    __m256i y = _mm256_set_m128i(_mm256_cvttpd_epi32(_mm256_round_pd(high, FXRT_QUANT_NEAREST)),
                                 _mm256_cvttpd_epi32(_mm256_round_pd(low, FXRT_QUANT_NEAREST)));
    y = _mm256_add_epi32(y, _mm256_set1_epi32(s->zp));
    return _mm256_min_epi32(_mm256_max_epi32(y, _mm256_set1_epi32(s->y_min)),
                            _mm256_set1_epi32(s->y_max));
}

FXRT_QUANT_AVX512_TARGET __attribute__((always_inline)) static inline __m512d
fxrt_quant_pow2_avx512(__m256i shift)
{
    __m512i e = _mm512_sub_epi64(_mm512_set1_epi64(1023), _mm512_cvtepi32_epi64(shift));
    return _mm512_castsi512_pd(_mm512_slli_epi64(e, 52));
}

/* Sixteen columns' requantization, built once for many accumulators. */
typedef struct FxrtQuantScaleAvx512 {
    __m512d low, high;           /* multiplier x 2^-shift of lanes 0-7, 8-15 */
    __m512i mult, shift;         /* for the 64-bit path */
    __m512i exact_bound;         /* |acc| below it: the product is exact */
    int32_t zp, y_min, y_max;
} FxrtQuantScaleAvx512;

FXRT_QUANT_AVX512_TARGET __attribute__((always_inline)) static inline FxrtQuantScaleAvx512
fxrt_quant_scale_avx512(__m512i mult, __m512i shift, int32_t zp, int32_t y_min, int32_t y_max)
{
    FxrtQuantScaleAvx512 s;
    s.low = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(mult)),
                          fxrt_quant_pow2_avx512(_mm512_castsi512_si256(shift)));
    s.high = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(mult, 1)),
                           fxrt_quant_pow2_avx512(_mm512_extracti64x4_epi64(shift, 1)));
    s.mult = mult;
    s.shift = shift;
    __mmask16 float_mult = _mm512_testn_epi32_mask(mult, _mm512_set1_epi32(0x7f));
    s.exact_bound =
        _mm512_mask_blend_epi32(float_mult, _mm512_set1_epi32(FXRT_QUANT_EXACT_ANY_MULT),
                                _mm512_set1_epi32(FXRT_QUANT_EXACT_FLOAT_MULT));
    s.zp = zp;
    s.y_min = y_min;
    s.y_max = y_max;
    return s;
}

/* Whether every lane's double product is exact.  Unsigned: |INT32_MIN|
 * stays 2^31, beyond every bound. */
FXRT_QUANT_AVX512_TARGET __attribute__((always_inline)) static inline int
fxrt_quant_exact_avx512(__m512i acc, const FxrtQuantScaleAvx512 *s)
{
    return _mm512_cmplt_epu32_mask(_mm512_abs_epi32(acc), s->exact_bound) == 0xffff;
}

/* rint(acc x scale) in int32 lanes, for accumulators fxrt_quant_exact_avx512
 * accepts. */
FXRT_QUANT_AVX512_TARGET __attribute__((always_inline)) static inline __m512i
fxrt_quant_rescale_double_avx512(__m512i acc, const FxrtQuantScaleAvx512 *s)
{
    __m512d low = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(acc)), s->low);
    __m512d high = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(acc, 1)), s->high);
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvt_roundpd_epi32(low, FXRT_QUANT_NEAREST)),
                              _mm512_cvt_roundpd_epi32(high, FXRT_QUANT_NEAREST), 1);
}

/* fxrt_quant_requantize_avx512's result through doubles when exact. */
FXRT_QUANT_AVX512_TARGET __attribute__((always_inline)) static inline __m512i
fxrt_quant_requantize_scaled_avx512(__m512i acc, const FxrtQuantScaleAvx512 *s)
{
    if (__builtin_expect(!fxrt_quant_exact_avx512(acc, s), 0))
        return fxrt_quant_requantize_avx512(acc, s->mult, s->shift, s->zp, s->y_min, s->y_max);
    __m512i y = _mm512_add_epi32(fxrt_quant_rescale_double_avx512(acc, s),
                                 _mm512_set1_epi32(s->zp));
    return _mm512_min_epi32(_mm512_max_epi32(y, _mm512_set1_epi32(s->y_min)),
                            _mm512_set1_epi32(s->y_max));
}

/* fxrt_quant_rescale of 16 accumulators saturated to int32, no zero point
 * or clamp: for callers that narrow with saturation and clamp the bytes. */
FXRT_QUANT_AVX512_TARGET __attribute__((always_inline)) static inline __m512i
fxrt_quant_rescale_scaled_avx512(__m512i acc, const FxrtQuantScaleAvx512 *s)
{
    if (__builtin_expect(!fxrt_quant_exact_avx512(acc, s), 0))
        return fxrt_quant_requantize_avx512(acc, s->mult, s->shift, 0, INT32_MIN, INT32_MAX);
    return fxrt_quant_rescale_double_avx512(acc, s);
}

#endif
