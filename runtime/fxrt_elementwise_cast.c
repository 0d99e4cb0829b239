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

static int64_t zero_point_at(FxrtDType t, const void *zp, size_t c)
{
    return zp ? fxrt_load_i64(t, zp, c) : 0;
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
            const double z = (double)zero_point_at(yt, zero_point, c);
            size_t base = (o * channels + c) * inner;
            for (size_t i = 0; i < inner; i++) {
                /* The reference divides in the input's precision: float32
                 * for float32 data, double for int32 (NumPy's promotion). */
                double q = xt == FXRT_DTYPE_FLOAT32
                               ? (double)fxrt_round_half_even_f32(((const float *)x)[base + i] / s)
                               : fxrt_round_half_even_f64(
                                     (double)((const int32_t *)x)[base + i] / (double)s);
                q += z;
                if (!(q == q))
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
    for (size_t o = 0; o < outer; o++) {
        for (size_t c = 0; c < channels; c++) {
            const float s = scale[c];
            const float z = (float)zero_point_at(xt, zero_point, c);
            size_t base = (o * channels + c) * inner;
            float *yc = y + base;
            if (xt == FXRT_DTYPE_UINT8) {
                const uint8_t *xc = (const uint8_t *)x + base;
                for (size_t i = 0; i < inner; i++)
                    yc[i] = ((float)xc[i] - z) * s;
            } else if (xt == FXRT_DTYPE_INT8) {
                const int8_t *xc = (const int8_t *)x + base;
                for (size_t i = 0; i < inner; i++)
                    yc[i] = ((float)xc[i] - z) * s;
            } else {
                const int32_t *xc = (const int32_t *)x + base;
                for (size_t i = 0; i < inner; i++)
                    yc[i] = ((float)xc[i] - z) * s;
            }
        }
    }
    return FXRT_EW_OK;
}
