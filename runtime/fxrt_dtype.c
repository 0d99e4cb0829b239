/*
 * fxrt_dtype.c - element sizes and the type-generic element access used by
 * the slow (non-float32) paths of the kernels.  Booleans are stored as one
 * byte holding 0 or 1, as ONNX and NumPy do.
 */
#include <string.h>

#include "fxrt.h"

size_t fxrt_dtype_size(FxrtDType t)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: return 4;
    case FXRT_DTYPE_UINT8: return 1;
    case FXRT_DTYPE_INT8: return 1;
    case FXRT_DTYPE_UINT16: return 2;
    case FXRT_DTYPE_INT16: return 2;
    case FXRT_DTYPE_INT32: return 4;
    case FXRT_DTYPE_INT64: return 8;
    case FXRT_DTYPE_BOOL: return 1;
    case FXRT_DTYPE_FLOAT16: return 2;
    case FXRT_DTYPE_FLOAT64: return 8;
    case FXRT_DTYPE_UINT32: return 4;
    case FXRT_DTYPE_UINT64: return 8;
    default: return 0;
    }
}

int fxrt_dtype_is_float(FxrtDType t)
{
    return t == FXRT_DTYPE_FLOAT32 || t == FXRT_DTYPE_FLOAT64 || t == FXRT_DTYPE_FLOAT16;
}

double fxrt_load_f64(FxrtDType t, const void *base, size_t i)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: return ((const float *)base)[i];
    case FXRT_DTYPE_FLOAT64: return ((const double *)base)[i];
    case FXRT_DTYPE_UINT64: return (double)((const uint64_t *)base)[i];
    default: return (double)fxrt_load_i64(t, base, i);
    }
}

int64_t fxrt_load_i64(FxrtDType t, const void *base, size_t i)
{
    switch (t) {
    case FXRT_DTYPE_UINT8: return ((const uint8_t *)base)[i];
    case FXRT_DTYPE_INT8: return ((const int8_t *)base)[i];
    case FXRT_DTYPE_UINT16: return ((const uint16_t *)base)[i];
    case FXRT_DTYPE_INT16: return ((const int16_t *)base)[i];
    case FXRT_DTYPE_INT32: return ((const int32_t *)base)[i];
    case FXRT_DTYPE_INT64: return ((const int64_t *)base)[i];
    case FXRT_DTYPE_BOOL: return ((const uint8_t *)base)[i] != 0;
    case FXRT_DTYPE_UINT32: return ((const uint32_t *)base)[i];
    case FXRT_DTYPE_UINT64: return (int64_t)((const uint64_t *)base)[i];
    case FXRT_DTYPE_FLOAT32: {
        float v = ((const float *)base)[i];
        /* out-of-range float -> int conversion is undefined in C: saturate */
        if (!(v == v)) return 0;
        if (v >= 9.2233720368547758e18f) return INT64_MAX;
        if (v <= -9.2233720368547758e18f) return INT64_MIN;
        return (int64_t)v;
    }
    case FXRT_DTYPE_FLOAT64: {
        double v = ((const double *)base)[i];
        if (!(v == v)) return 0;
        if (v >= 9.2233720368547758e18) return INT64_MAX;
        if (v <= -9.2233720368547758e18) return INT64_MIN;
        return (int64_t)v;
    }
    default: return 0;
    }
}

void fxrt_store_f64(FxrtDType t, void *base, size_t i, double v)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: ((float *)base)[i] = (float)v; break;
    case FXRT_DTYPE_FLOAT64: ((double *)base)[i] = v; break;
    case FXRT_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0.0; break;
    default: {
        int64_t iv;
        if (!(v == v)) iv = 0;
        else if (v >= 9.2233720368547758e18) iv = INT64_MAX;
        else if (v <= -9.2233720368547758e18) iv = INT64_MIN;
        else iv = (int64_t)v;
        fxrt_store_i64(t, base, i, iv);
    }
    }
}

void fxrt_store_i64(FxrtDType t, void *base, size_t i, int64_t v)
{
    /* Narrowing wraps modulo 2^n, as ONNX Cast and NumPy astype do; done on
     * unsigned values so that it is defined behaviour in C. */
    uint64_t u = (uint64_t)v;
    switch (t) {
    case FXRT_DTYPE_UINT8: ((uint8_t *)base)[i] = (uint8_t)u; break;
    case FXRT_DTYPE_INT8: { uint8_t b = (uint8_t)u; memcpy((int8_t *)base + i, &b, 1); break; }
    case FXRT_DTYPE_UINT16: ((uint16_t *)base)[i] = (uint16_t)u; break;
    case FXRT_DTYPE_INT16: { uint16_t h = (uint16_t)u; memcpy((int16_t *)base + i, &h, 2); break; }
    case FXRT_DTYPE_INT32: { uint32_t w = (uint32_t)u; memcpy((int32_t *)base + i, &w, 4); break; }
    case FXRT_DTYPE_INT64: ((int64_t *)base)[i] = v; break;
    case FXRT_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0; break;
    case FXRT_DTYPE_UINT32: ((uint32_t *)base)[i] = (uint32_t)u; break;
    case FXRT_DTYPE_UINT64: ((uint64_t *)base)[i] = u; break;
    case FXRT_DTYPE_FLOAT32: ((float *)base)[i] = (float)v; break;
    case FXRT_DTYPE_FLOAT64: ((double *)base)[i] = (double)v; break;
    default: break;
    }
}
