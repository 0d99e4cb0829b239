/*
 * fxrt_elementwise_cast.c - element type conversion (ONNX Cast) and linear
 * quantization (QuantizeLinear / DequantizeLinear, per tensor or per axis).
 *
 * Conversions that C leaves undefined are given a definite result here, so
 * that the interpreter and generated code agree and sanitizers stay quiet:
 * a float that does not fit the target integer type saturates (NaN gives
 * 0), a double beyond float's range becomes an infinity, integer narrowing
 * wraps modulo 2^bits through unsigned arithmetic.  The common pairs
 * (float32 <-> float64, float32 <-> int32/int64/uint8) have direct loops;
 * the others go through one int64/uint64/double value per element.
 * float16, bfloat16 and strings are refused (FXRT_EW_ERR_TYPE).
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "fxrt.h"
#include "fxrt_isa.h"

static bool cast_type_ok(FxrtDType t)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: case FXRT_DTYPE_FLOAT64: case FXRT_DTYPE_UINT8:
    case FXRT_DTYPE_INT8: case FXRT_DTYPE_UINT16: case FXRT_DTYPE_INT16:
    case FXRT_DTYPE_INT32: case FXRT_DTYPE_INT64: case FXRT_DTYPE_UINT32:
    case FXRT_DTYPE_UINT64: case FXRT_DTYPE_BOOL:
        return true;
    default:
        return false;
    }
}

static bool is_float(FxrtDType t) { return t == FXRT_DTYPE_FLOAT32 || t == FXRT_DTYPE_FLOAT64; }

static bool is_unsigned(FxrtDType t)
{
    return t == FXRT_DTYPE_UINT8 || t == FXRT_DTYPE_UINT16 || t == FXRT_DTYPE_UINT32 ||
           t == FXRT_DTYPE_UINT64 || t == FXRT_DTYPE_BOOL;
}

/* double -> float without the undefined out-of-range conversion: values at
 * or beyond FLT_MAX + half an ulp round to infinity, as IEEE does. */
static inline float f64_to_f32(double v)
{
    const double limit = 0x1.ffffffp+127;
    if (v >= limit)
        return INFINITY;
    if (v <= -limit)
        return -INFINITY;
    return (float)v;
}

/* Truncates a float toward zero and saturates to the integer type t; the
 * result is the value's bit pattern as int64 (uint64 for unsigned types). */
static int64_t f64_to_int(FxrtDType t, double v)
{
    if (!(v == v))
        return 0;
    v = trunc(v);
    if (is_unsigned(t)) {
        double max = t == FXRT_DTYPE_UINT8    ? 255.0
                     : t == FXRT_DTYPE_UINT16 ? 65535.0
                     : t == FXRT_DTYPE_UINT32 ? 4294967295.0
                                              : 18446744073709551615.0;
        if (v <= 0.0)
            return 0;
        if (v >= max)
            return t == FXRT_DTYPE_UINT64 ? (int64_t)UINT64_MAX : (int64_t)max;
        return (int64_t)(uint64_t)v;
    }
    double lo, hi;
    switch (t) {
    case FXRT_DTYPE_INT8: lo = -128.0; hi = 127.0; break;
    case FXRT_DTYPE_INT16: lo = -32768.0; hi = 32767.0; break;
    case FXRT_DTYPE_INT32: lo = -2147483648.0; hi = 2147483647.0; break;
    default:
        /* int64: 2^63 itself is out of range, -2^63 is not */
        if (v >= 9223372036854775808.0)
            return INT64_MAX;
        if (v <= -9223372036854775808.0)
            return INT64_MIN;
        return (int64_t)v;
    }
    return (int64_t)(v < lo ? lo : (v > hi ? hi : v));
}

/* One element through the widest value of its class. */
static void cast_one(FxrtDType from, const void *x, FxrtDType to, void *y, size_t i)
{
    if (is_float(from)) {
        double v = fxrt_load_f64(from, x, i);
        if (to == FXRT_DTYPE_FLOAT32)
            ((float *)y)[i] = f64_to_f32(v);
        else if (to == FXRT_DTYPE_FLOAT64)
            ((double *)y)[i] = v;
        else if (to == FXRT_DTYPE_BOOL)
            ((uint8_t *)y)[i] = v != 0.0; /* NaN is true, as in NumPy */
        else
            fxrt_store_i64(to, y, i, f64_to_int(to, v));
        return;
    }
    int64_t v = fxrt_load_i64(from, x, i); /* bool reads as 0/1 */
    if (to == FXRT_DTYPE_FLOAT32)
        ((float *)y)[i] = is_unsigned(from) ? (float)(uint64_t)v : (float)v;
    else if (to == FXRT_DTYPE_FLOAT64)
        ((double *)y)[i] = is_unsigned(from) ? (double)(uint64_t)v : (double)v;
    else
        fxrt_store_i64(to, y, i, v); /* wraps; bool becomes v != 0 */
}

int fxrt_cast(FxrtDType from, const void *x, FxrtDType to, void *y, size_t n)
{
    if (!cast_type_ok(from) || !cast_type_ok(to))
        return FXRT_EW_ERR_TYPE;
    if (from == to) {
        if (from == FXRT_DTYPE_BOOL) {
            const uint8_t *xb = x;
            uint8_t *yb = y;
            for (size_t i = 0; i < n; i++)
                yb[i] = xb[i] != 0;
        } else if (x != y) {
            memmove(y, x, n * fxrt_dtype_size(from));
        }
        return FXRT_EW_OK;
    }
    if (from == FXRT_DTYPE_FLOAT32 && to == FXRT_DTYPE_FLOAT64) {
        const float *xf = x;
        double *yd = y;
        for (size_t i = 0; i < n; i++)
            yd[i] = xf[i];
    } else if (from == FXRT_DTYPE_FLOAT64 && to == FXRT_DTYPE_FLOAT32) {
        const double *xd = x;
        float *yf = y;
        for (size_t i = 0; i < n; i++)
            yf[i] = f64_to_f32(xd[i]);
    } else if (from == FXRT_DTYPE_INT64 && to == FXRT_DTYPE_FLOAT32) {
        const int64_t *xi = x;
        float *yf = y;
        for (size_t i = 0; i < n; i++)
            yf[i] = (float)xi[i];
    } else if (from == FXRT_DTYPE_INT32 && to == FXRT_DTYPE_FLOAT32) {
        const int32_t *xi = x;
        float *yf = y;
        for (size_t i = 0; i < n; i++)
            yf[i] = (float)xi[i];
    } else if (from == FXRT_DTYPE_UINT8 && to == FXRT_DTYPE_FLOAT32) {
        const uint8_t *xi = x;
        float *yf = y;
        for (size_t i = 0; i < n; i++)
            yf[i] = (float)xi[i];
    } else if (from == FXRT_DTYPE_FLOAT32 && to == FXRT_DTYPE_INT64) {
        const float *xf = x;
        int64_t *yi = y;
        for (size_t i = 0; i < n; i++)
            yi[i] = f64_to_int(to, xf[i]);
    } else if (from == FXRT_DTYPE_INT32 && to == FXRT_DTYPE_INT64) {
        const int32_t *xi = x;
        int64_t *yi = y;
        for (size_t i = 0; i < n; i++)
            yi[i] = xi[i];
    } else {
        for (size_t i = 0; i < n; i++)
            cast_one(from, x, to, y, i);
    }
    return FXRT_EW_OK;
}

/* --- linear quantization ------------------------------------------------ */

/* The rows of QuantizeLinear (float32 -> 8 bits) and DequantizeLinear (8
 * bits -> float32) run on AVX-512 or AVX2 on host builds (the widest the
 * CPU has, chosen by CPUID at each call and capped by
 * fxrt_quantize_limit_isa), portable C elsewhere.  The vector forms give
 * the scalar loop's bytes and floats exactly: the division x / scale is
 * IEEE's correctly rounded one on every path (never a multiplication by
 * the reciprocal, which differs in the last bit), rounding is half to even
 * by an explicit rounding-mode operand (not MXCSR), the clamp to
 * [lo - zp, hi - zp] before rounding equals the clamp after it because the
 * bounds are integers, and a NaN becomes the zero point as in the scalar
 * loop.  Dequantizing is (x - zp) * scale, the subtraction exact in float,
 * one rounded multiplication, as in the scalar loop. */
#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_QUANT_ROWS_X86 1
#include "fxrt_quant_x86.h"

#define QROW_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
#define QROW_AVX2_TARGET __attribute__((target("avx2")))

/* 2 AVX-512, 1 AVX2, 0 the portable loops. */
static int quant_isa_cap = 2;

void fxrt_quantize_limit_isa(int level) { quant_isa_cap = level; }

static int quant_isa(void)
{
    if (quant_isa_cap >= 2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return 2;
    return quant_isa_cap >= 1 && __builtin_cpu_supports("avx2") ? 1 : 0;
}

/* y[i] = clamp(rint(x[i] / s)) + z for i < n, 16 at a time (masked tail). */
QROW_AVX512_TARGET static void quantize_row_avx512(const float *x, size_t n, float s, int32_t z,
                                                   int32_t lo, int32_t hi, uint8_t *y)
{
    const __m512 scale = _mm512_set1_ps(s);
    const __m512 min = _mm512_set1_ps((float)(lo - z)), max = _mm512_set1_ps((float)(hi - z));
    const __m512i zp = _mm512_set1_epi32(z);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 live = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(live, x + i), scale);
        /* NaN -> 0 (the zero point once z is added); max/min would pass it on */
        v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
        v = _mm512_min_ps(_mm512_max_ps(v, min), max);
        __m512i q = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm512_mask_cvtepi32_storeu_epi8(y + i, live, _mm512_add_epi32(q, zp));
    }
}

QROW_AVX2_TARGET static size_t quantize_row_avx2(const float *x, size_t n, float s, int32_t z,
                                                 int32_t lo, int32_t hi, uint8_t *y)
{
    const __m256 scale = _mm256_set1_ps(s);
    const __m256 min = _mm256_set1_ps((float)(lo - z)), max = _mm256_set1_ps((float)(hi - z));
    const __m256i zp = _mm256_set1_epi32(z);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), scale);
        v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
        v = _mm256_min_ps(_mm256_max_ps(v, min), max);
        v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256i q = _mm256_add_epi32(_mm256_cvttps_epi32(v), zp);
        _mm_storel_epi64((__m128i *)(y + i), fxrt_quant_low_bytes_avx2(q));
    }
    return i; /* the scalar loop does the rest */
}

/* y[i] = (x[i] - z) * s for 8-bit x, 16 at a time (masked tail). */
QROW_AVX512_TARGET static void dequantize_row_avx512(int is_int8, const uint8_t *x, size_t n,
                                                     float s, float z, float *y)
{
    const __m512 scale = _mm512_set1_ps(s), zp = _mm512_set1_ps(z);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 live = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        __m128i bytes = _mm_maskz_loadu_epi8(live, x + i);
        __m512i v = is_int8 ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
        __m512 f = _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(v), zp), scale);
        _mm512_mask_storeu_ps(y + i, live, f);
    }
}

QROW_AVX2_TARGET static size_t dequantize_row_avx2(int is_int8, const uint8_t *x, size_t n,
                                                   float s, float z, float *y)
{
    const __m256 scale = _mm256_set1_ps(s), zp = _mm256_set1_ps(z);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i bytes = _mm_loadl_epi64((const __m128i *)(x + i));
        __m256i v = is_int8 ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(v), zp), scale));
    }
    return i;
}
#else
void fxrt_quantize_limit_isa(int level) { (void)level; }
#endif

static int64_t zero_point_at(FxrtDType t, const void *zp, size_t c)
{
    return zp ? fxrt_load_i64(t, zp, c) : 0;
}

/* One row of QuantizeLinear from float32: the vector kernel, then the scalar
 * loop for what it left (all of it in portable builds). */
static void quantize_row_f32(const float *x, size_t n, float s, int32_t z, FxrtDType yt, void *y)
{
    const int32_t lo = yt == FXRT_DTYPE_UINT8 ? 0 : -128;
    const int32_t hi = yt == FXRT_DTYPE_UINT8 ? 255 : 127;
    size_t from = 0;
#ifdef FXRT_QUANT_ROWS_X86
    int isa = quant_isa();
    if (isa == 2) {
        quantize_row_avx512(x, n, s, z, lo, hi, (uint8_t *)y);
        return;
    }
    if (isa == 1)
        from = quantize_row_avx2(x, n, s, z, lo, hi, (uint8_t *)y);
#endif
    for (size_t i = from; i < n; i++) {
        double q = (double)fxrt_round_half_even_f32(x[i] / s) + (double)z;
        if (!(q == q))
            q = z;
        q = q < lo ? lo : (q > hi ? hi : q);
        if (yt == FXRT_DTYPE_UINT8)
            ((uint8_t *)y)[i] = (uint8_t)q;
        else
            ((int8_t *)y)[i] = (int8_t)q;
    }
}

int fxrt_quantize_linear(FxrtDType xt, const void *x, size_t outer, size_t channels,
                         size_t inner, const float *scale, FxrtDType yt,
                         const void *zero_point, void *y)
{
    if ((xt != FXRT_DTYPE_FLOAT32 && xt != FXRT_DTYPE_INT32) ||
        (yt != FXRT_DTYPE_UINT8 && yt != FXRT_DTYPE_INT8))
        return FXRT_EW_ERR_TYPE;
    const double lo = yt == FXRT_DTYPE_UINT8 ? 0.0 : -128.0;
    const double hi = yt == FXRT_DTYPE_UINT8 ? 255.0 : 127.0;
    for (size_t o = 0; o < outer; o++) {
        for (size_t c = 0; c < channels; c++) {
            const float s = scale[c];
            size_t base = (o * channels + c) * inner;
            if (xt == FXRT_DTYPE_FLOAT32) {
                /* The reference divides in float32 for float32 data. */
                quantize_row_f32((const float *)x + base, inner, s,
                                 (int32_t)zero_point_at(yt, zero_point, c), yt,
                                 (uint8_t *)y + base);
                continue;
            }
            const double z = (double)zero_point_at(yt, zero_point, c);
            for (size_t i = 0; i < inner; i++) {
                /* int32 data divides in double (NumPy's promotion). */
                double q = fxrt_round_half_even_f64((double)((const int32_t *)x)[base + i] /
                                                    (double)s);
                q += z;
                if (!(q == q)) /* 0 / 0 */
                    q = z;
                q = q < lo ? lo : (q > hi ? hi : q);
                if (yt == FXRT_DTYPE_UINT8)
                    ((uint8_t *)y)[base + i] = (uint8_t)q;
                else
                    ((int8_t *)y)[base + i] = (int8_t)q;
            }
        }
    }
    return FXRT_EW_OK;
}

int fxrt_dequantize_linear(FxrtDType xt, const void *x, size_t outer, size_t channels,
                           size_t inner, const float *scale, const void *zero_point,
                           float *y)
{
    if (xt != FXRT_DTYPE_UINT8 && xt != FXRT_DTYPE_INT8 && xt != FXRT_DTYPE_INT32)
        return FXRT_EW_ERR_TYPE;
#ifdef FXRT_QUANT_ROWS_X86
    int isa = xt == FXRT_DTYPE_INT32 ? 0 : quant_isa();
#endif
    for (size_t o = 0; o < outer; o++) {
        for (size_t c = 0; c < channels; c++) {
            const float s = scale[c];
            const float z = (float)zero_point_at(xt, zero_point, c);
            size_t base = (o * channels + c) * inner, from = 0;
            float *yc = y + base;
#ifdef FXRT_QUANT_ROWS_X86
            const uint8_t *xb = (const uint8_t *)x + base;
            if (isa == 2) {
                dequantize_row_avx512(xt == FXRT_DTYPE_INT8, xb, inner, s, z, yc);
                continue;
            }
            if (isa == 1)
                from = dequantize_row_avx2(xt == FXRT_DTYPE_INT8, xb, inner, s, z, yc);
#endif
            if (xt == FXRT_DTYPE_UINT8) {
                const uint8_t *xc = (const uint8_t *)x + base;
                for (size_t i = from; i < inner; i++)
                    yc[i] = ((float)xc[i] - z) * s;
            } else if (xt == FXRT_DTYPE_INT8) {
                const int8_t *xc = (const int8_t *)x + base;
                for (size_t i = from; i < inner; i++)
                    yc[i] = ((float)xc[i] - z) * s;
            } else {
                const int32_t *xc = (const int32_t *)x + base;
                for (size_t i = from; i < inner; i++)
                    yc[i] = ((float)xc[i] - z) * s;
            }
        }
    }
    return FXRT_EW_OK;
}
