/*
 * fxrt_elementwise.c - unary elementwise kernels: math functions and
 * activations for float32 (the fast path: one switch per call, then a
 * tight loop per op that the compiler can vectorize), their float64 twins,
 * the exact integer versions of Neg/Abs/Sign/Relu, Clip, IsNaN/IsInf and
 * Not.  Nothing here allocates or fails on float data; integer entry points
 * return FXRT_EW_ERR_TYPE for ops that ONNX defines on floats only.
 *
 * Numerics follow the ONNX reference (NumPy) where it matters for the
 * backend tests' tolerance, but avoid its overflows: Sigmoid and Softplus
 * use the forms that never compute exp of a large positive number (Sigmoid
 * fxrt_math.h's vectorizable one, shared with the epilogues), Elu,
 * Selu and Celu use expm1 near zero, and Round is half-to-even without
 * depending on the FPU's rounding mode.
 */
#include <math.h>

#include "fxrt.h"
#include "fxrt_math.h"

int fxrt_unary_num_params(FxrtUnaryOp op)
{
    switch (op) {
    case FXRT_UNARY_LEAKY_RELU:
    case FXRT_UNARY_ELU:
    case FXRT_UNARY_CELU:
    case FXRT_UNARY_THRESHOLDED_RELU:
        return 1;
    case FXRT_UNARY_SELU:
    case FXRT_UNARY_HARD_SIGMOID:
    case FXRT_UNARY_SHRINK:
        return 2;
    default:
        return 0;
    }
}

float fxrt_round_half_even_f32(float x)
{
    float r = roundf(x); /* half away from zero */
    if (fabsf(x - truncf(x)) == 0.5f)
        r = 2.0f * roundf(x * 0.5f);
    return r;
}

double fxrt_round_half_even_f64(double x)
{
    double r = round(x);
    if (fabs(x - trunc(x)) == 0.5)
        r = 2.0 * round(x * 0.5);
    return r;
}

/* --- float32 ------------------------------------------------------------ */

static inline float softplus_f32(float v)
{
    /* log(1 + e^v) = max(v, 0) + log1p(e^-|v|): no overflow for large v. */
    return (v > 0.0f ? v : 0.0f) + log1pf(expf(-fabsf(v)));
}

static inline float sign_f32(float v) { return v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : v); }

static inline float hard_sigmoid_f32(float v, float alpha, float beta)
{
    float t = alpha * v + beta;
    return t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
}

/* y[i] = EXPR with v = x[i]; one loop per op so that each vectorizes.  The
 * loop works in blocks of 8 whose loads precede its stores, so that the
 * compiler vectorizes it without run-time alias checks (GCC's -O2 cost
 * model refuses those) while y == x stays allowed. */
#define MAP(EXPR)                                                                        \
    do {                                                                                 \
        size_t i = 0;                                                                    \
        for (; i + 8 <= n; i += 8) {                                                     \
            T r_[8];                                                                     \
            for (int k_ = 0; k_ < 8; k_++) {                                             \
                T v = x[i + k_];                                                         \
                r_[k_] = (EXPR);                                                         \
            }                                                                            \
            for (int k_ = 0; k_ < 8; k_++)                                               \
                y[i + k_] = r_[k_];                                                      \
        }                                                                                \
        for (; i < n; i++) {                                                             \
            T v = x[i];                                                                  \
            y[i] = (EXPR);                                                               \
        }                                                                                \
    } while (0);                                                                         \
    break

FXRT_NO_TRAPPING_MATH void fxrt_unary_f32(FxrtUnaryOp op, const float *x, float *y, size_t n, const float *params)
{
    typedef float T;
    const float p0 = fxrt_unary_num_params(op) > 0 ? params[0] : 0.0f;
    const float p1 = fxrt_unary_num_params(op) > 1 ? params[1] : 0.0f;
    switch (op) {
    case FXRT_UNARY_NEG: MAP(-v);
    case FXRT_UNARY_ABS: MAP(fabsf(v));
    case FXRT_UNARY_SIGN: MAP(sign_f32(v));
    case FXRT_UNARY_RELU: MAP(v < 0.0f ? 0.0f : v);
    case FXRT_UNARY_SQRT: MAP(sqrtf(v));
    case FXRT_UNARY_EXP: MAP(expf(v));
    case FXRT_UNARY_LOG: MAP(logf(v));
    case FXRT_UNARY_RECIPROCAL: MAP(1.0f / v);
    case FXRT_UNARY_ERF: MAP(erff(v));
    case FXRT_UNARY_TANH: MAP(tanhf(v));
    case FXRT_UNARY_SIGMOID: MAP(fxrt_sigmoid(v));
    case FXRT_UNARY_LEAKY_RELU: MAP(v < 0.0f ? p0 * v : v);
    case FXRT_UNARY_ELU: MAP(v < 0.0f ? p0 * expm1f(v) : v);
    case FXRT_UNARY_SELU: MAP(v > 0.0f ? p1 * v : p1 * p0 * expm1f(v));
    case FXRT_UNARY_CELU: MAP(v > 0.0f ? v : p0 * expm1f(v / p0));
    case FXRT_UNARY_HARD_SIGMOID: MAP(hard_sigmoid_f32(v, p0, p1));
    case FXRT_UNARY_HARD_SWISH: MAP(v * hard_sigmoid_f32(v, 1.0f / 6.0f, 0.5f));
    case FXRT_UNARY_SOFTPLUS: MAP(softplus_f32(v));
    case FXRT_UNARY_SOFTSIGN: MAP(v / (1.0f + fabsf(v)));
    case FXRT_UNARY_THRESHOLDED_RELU: MAP(v > p0 ? v : 0.0f);
    case FXRT_UNARY_SHRINK: MAP(v < -p1 ? v + p0 : (v > p1 ? v - p0 : 0.0f));
    case FXRT_UNARY_FLOOR: MAP(floorf(v));
    case FXRT_UNARY_CEIL: MAP(ceilf(v));
    case FXRT_UNARY_ROUND: MAP(fxrt_round_half_even_f32(v));
    case FXRT_UNARY_SIN: MAP(sinf(v));
    case FXRT_UNARY_COS: MAP(cosf(v));
    case FXRT_UNARY_TAN: MAP(tanf(v));
    case FXRT_UNARY_ASIN: MAP(asinf(v));
    case FXRT_UNARY_ACOS: MAP(acosf(v));
    case FXRT_UNARY_ATAN: MAP(atanf(v));
    case FXRT_UNARY_SINH: MAP(sinhf(v));
    case FXRT_UNARY_COSH: MAP(coshf(v));
    case FXRT_UNARY_ASINH: MAP(asinhf(v));
    case FXRT_UNARY_ACOSH: MAP(acoshf(v));
    case FXRT_UNARY_ATANH: MAP(atanhf(v));
    case FXRT_UNARY_GELU: MAP(0.5f * v * (1.0f + erff(v * 0.70710678f)));
    case FXRT_UNARY_GELU_TANH:
        MAP(0.5f * v * (1.0f + tanhf(0.79788456f * (v + 0.044715f * v * v * v))));
    case FXRT_UNARY_MISH: MAP(v * tanhf(softplus_f32(v)));
    case FXRT_UNARY_COUNT_: break;
    }
}

/* --- float64 ------------------------------------------------------------ */

static inline double sigmoid_f64(double v)
{
    if (v >= 0.0)
        return 1.0 / (1.0 + exp(-v));
    double e = exp(v);
    return e / (1.0 + e);
}

static inline double softplus_f64(double v)
{
    return (v > 0.0 ? v : 0.0) + log1p(exp(-fabs(v)));
}

static inline double sign_f64(double v) { return v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : v); }

static inline double hard_sigmoid_f64(double v, double alpha, double beta)
{
    double t = alpha * v + beta;
    return t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
}

void fxrt_unary_f64(FxrtUnaryOp op, const double *x, double *y, size_t n,
                    const double *params)
{
    typedef double T;
    const double p0 = fxrt_unary_num_params(op) > 0 ? params[0] : 0.0;
    const double p1 = fxrt_unary_num_params(op) > 1 ? params[1] : 0.0;
    switch (op) {
    case FXRT_UNARY_NEG: MAP(-v);
    case FXRT_UNARY_ABS: MAP(fabs(v));
    case FXRT_UNARY_SIGN: MAP(sign_f64(v));
    case FXRT_UNARY_RELU: MAP(v < 0.0 ? 0.0 : v);
    case FXRT_UNARY_SQRT: MAP(sqrt(v));
    case FXRT_UNARY_EXP: MAP(exp(v));
    case FXRT_UNARY_LOG: MAP(log(v));
    case FXRT_UNARY_RECIPROCAL: MAP(1.0 / v);
    case FXRT_UNARY_ERF: MAP(erf(v));
    case FXRT_UNARY_TANH: MAP(tanh(v));
    case FXRT_UNARY_SIGMOID: MAP(sigmoid_f64(v));
    case FXRT_UNARY_LEAKY_RELU: MAP(v < 0.0 ? p0 * v : v);
    case FXRT_UNARY_ELU: MAP(v < 0.0 ? p0 * expm1(v) : v);
    case FXRT_UNARY_SELU: MAP(v > 0.0 ? p1 * v : p1 * p0 * expm1(v));
    case FXRT_UNARY_CELU: MAP(v > 0.0 ? v : p0 * expm1(v / p0));
    case FXRT_UNARY_HARD_SIGMOID: MAP(hard_sigmoid_f64(v, p0, p1));
    case FXRT_UNARY_HARD_SWISH: MAP(v * hard_sigmoid_f64(v, 1.0 / 6.0, 0.5));
    case FXRT_UNARY_SOFTPLUS: MAP(softplus_f64(v));
    case FXRT_UNARY_SOFTSIGN: MAP(v / (1.0 + fabs(v)));
    case FXRT_UNARY_THRESHOLDED_RELU: MAP(v > p0 ? v : 0.0);
    case FXRT_UNARY_SHRINK: MAP(v < -p1 ? v + p0 : (v > p1 ? v - p0 : 0.0));
    case FXRT_UNARY_FLOOR: MAP(floor(v));
    case FXRT_UNARY_CEIL: MAP(ceil(v));
    case FXRT_UNARY_ROUND: MAP(fxrt_round_half_even_f64(v));
    case FXRT_UNARY_SIN: MAP(sin(v));
    case FXRT_UNARY_COS: MAP(cos(v));
    case FXRT_UNARY_TAN: MAP(tan(v));
    case FXRT_UNARY_ASIN: MAP(asin(v));
    case FXRT_UNARY_ACOS: MAP(acos(v));
    case FXRT_UNARY_ATAN: MAP(atan(v));
    case FXRT_UNARY_SINH: MAP(sinh(v));
    case FXRT_UNARY_COSH: MAP(cosh(v));
    case FXRT_UNARY_ASINH: MAP(asinh(v));
    case FXRT_UNARY_ACOSH: MAP(acosh(v));
    case FXRT_UNARY_ATANH: MAP(atanh(v));
    case FXRT_UNARY_GELU: MAP(0.5 * v * (1.0 + erf(v * 0.70710678118654752)));
    case FXRT_UNARY_GELU_TANH:
        MAP(0.5 * v * (1.0 + tanh(0.79788456080286536 * (v + 0.044715 * v * v * v))));
    case FXRT_UNARY_MISH: MAP(v * tanh(softplus_f64(v)));
    case FXRT_UNARY_COUNT_: break;
    }
}

#undef MAP

/* --- integers ----------------------------------------------------------- */

static int dtype_is_unsigned(FxrtDType t)
{
    return t == FXRT_DTYPE_UINT8 || t == FXRT_DTYPE_UINT16 || t == FXRT_DTYPE_UINT32 ||
           t == FXRT_DTYPE_UINT64 || t == FXRT_DTYPE_BOOL;
}

static int dtype_is_integer(FxrtDType t)
{
    switch (t) {
    case FXRT_DTYPE_UINT8: case FXRT_DTYPE_INT8: case FXRT_DTYPE_UINT16:
    case FXRT_DTYPE_INT16: case FXRT_DTYPE_INT32: case FXRT_DTYPE_INT64:
    case FXRT_DTYPE_UINT32: case FXRT_DTYPE_UINT64:
        return 1;
    default:
        return 0;
    }
}

/* Integer ops on values loaded as int64 (unsigned types: their uint64 bit
 * pattern).  Negation goes through uint64 so that INT64_MIN wraps instead
 * of overflowing. */
static int64_t unary_int(FxrtUnaryOp op, int is_unsigned, int64_t v, const double *params)
{
    switch (op) {
    case FXRT_UNARY_NEG:
        return (int64_t)(0u - (uint64_t)v);
    case FXRT_UNARY_ABS:
        return (is_unsigned || v >= 0) ? v : (int64_t)(0u - (uint64_t)v);
    case FXRT_UNARY_SIGN:
        if (is_unsigned)
            return v != 0;
        return v > 0 ? 1 : (v < 0 ? -1 : 0);
    case FXRT_UNARY_RELU:
        return (is_unsigned || v > 0) ? v : 0;
    default: /* SHRINK: checked by the caller */ {
        double d = is_unsigned ? (double)(uint64_t)v : (double)v;
        double bias = params[0], lambd = params[1];
        double r = d < -lambd ? d + bias : (d > lambd ? d - bias : 0.0);
        r = trunc(r);
        if (!(r == r))
            return 0;
        if (is_unsigned) {
            if (r <= 0.0)
                return 0;
            if (r >= 18446744073709551616.0)
                return (int64_t)UINT64_MAX;
            return (int64_t)(uint64_t)r;
        }
        if (r >= 9223372036854775808.0)
            return INT64_MAX;
        if (r < -9223372036854775808.0)
            return INT64_MIN;
        return (int64_t)r;
    }
    }
}

int fxrt_unary(FxrtUnaryOp op, FxrtDType t, const void *x, void *y, size_t n,
               const double *params)
{
    if (t == FXRT_DTYPE_FLOAT32) {
        float p[2] = {0.0f, 0.0f};
        for (int k = 0; k < fxrt_unary_num_params(op); k++)
            p[k] = (float)params[k];
        fxrt_unary_f32(op, x, y, n, p);
        return FXRT_EW_OK;
    }
    if (t == FXRT_DTYPE_FLOAT64) {
        fxrt_unary_f64(op, x, y, n, params);
        return FXRT_EW_OK;
    }
    if (!dtype_is_integer(t))
        return FXRT_EW_ERR_TYPE;
    if (op != FXRT_UNARY_NEG && op != FXRT_UNARY_ABS && op != FXRT_UNARY_SIGN &&
        op != FXRT_UNARY_RELU && op != FXRT_UNARY_SHRINK)
        return FXRT_EW_ERR_TYPE;
    int is_unsigned = dtype_is_unsigned(t);
    if (t == FXRT_DTYPE_INT64 && op == FXRT_UNARY_RELU) {
        /* the common integer case (shape arithmetic) gets a direct loop */
        const int64_t *xi = x;
        int64_t *yi = y;
        for (size_t i = 0; i < n; i++)
            yi[i] = xi[i] > 0 ? xi[i] : 0;
        return FXRT_EW_OK;
    }
    for (size_t i = 0; i < n; i++)
        fxrt_store_i64(t, y, i, unary_int(op, is_unsigned, fxrt_load_i64(t, x, i), params));
    return FXRT_EW_OK;
}

/* --- Clip ------------------------------------------------------------------ */

void fxrt_clip_f32(const float *x, float *y, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        y[i] = v > hi ? hi : v;
    }
}

int fxrt_clip(FxrtDType t, const void *x, void *y, size_t n, const void *lo, const void *hi)
{
    if (t == FXRT_DTYPE_FLOAT32) {
        fxrt_clip_f32(x, y, n, lo ? *(const float *)lo : -INFINITY,
                      hi ? *(const float *)hi : INFINITY);
        return FXRT_EW_OK;
    }
    if (t == FXRT_DTYPE_FLOAT64) {
        const double *xd = x;
        double *yd = y;
        double l = lo ? *(const double *)lo : -INFINITY, h = hi ? *(const double *)hi : INFINITY;
        for (size_t i = 0; i < n; i++) {
            double v = xd[i];
            v = v < l ? l : v;
            yd[i] = v > h ? h : v;
        }
        return FXRT_EW_OK;
    }
    if (!dtype_is_integer(t))
        return FXRT_EW_ERR_TYPE;
    if (dtype_is_unsigned(t)) {
        uint64_t l = lo ? (uint64_t)fxrt_load_i64(t, lo, 0) : 0;
        uint64_t h = hi ? (uint64_t)fxrt_load_i64(t, hi, 0) : UINT64_MAX;
        for (size_t i = 0; i < n; i++) {
            uint64_t v = (uint64_t)fxrt_load_i64(t, x, i);
            v = v < l ? l : v;
            fxrt_store_i64(t, y, i, (int64_t)(v > h ? h : v));
        }
    } else {
        int64_t l = lo ? fxrt_load_i64(t, lo, 0) : INT64_MIN;
        int64_t h = hi ? fxrt_load_i64(t, hi, 0) : INT64_MAX;
        for (size_t i = 0; i < n; i++) {
            int64_t v = fxrt_load_i64(t, x, i);
            v = v < l ? l : v;
            fxrt_store_i64(t, y, i, v > h ? h : v);
        }
    }
    return FXRT_EW_OK;
}

/* --- predicates and Not ---------------------------------------------------- */

void fxrt_isnan_f32(const float *x, uint8_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] != x[i];
}

void fxrt_isinf_f32(const float *x, uint8_t *y, size_t n, int detect_negative,
                    int detect_positive)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (detect_positive && x[i] == INFINITY) || (detect_negative && x[i] == -INFINITY);
}

int fxrt_isnan(FxrtDType t, const void *x, uint8_t *y, size_t n)
{
    if (t == FXRT_DTYPE_FLOAT32) {
        fxrt_isnan_f32(x, y, n);
        return FXRT_EW_OK;
    }
    if (t != FXRT_DTYPE_FLOAT64)
        return FXRT_EW_ERR_TYPE;
    const double *xd = x;
    for (size_t i = 0; i < n; i++)
        y[i] = xd[i] != xd[i];
    return FXRT_EW_OK;
}

int fxrt_isinf(FxrtDType t, const void *x, uint8_t *y, size_t n, int detect_negative,
               int detect_positive)
{
    if (t == FXRT_DTYPE_FLOAT32) {
        fxrt_isinf_f32(x, y, n, detect_negative, detect_positive);
        return FXRT_EW_OK;
    }
    if (t != FXRT_DTYPE_FLOAT64)
        return FXRT_EW_ERR_TYPE;
    const double *xd = x;
    for (size_t i = 0; i < n; i++)
        y[i] = (detect_positive && xd[i] == INFINITY) || (detect_negative && xd[i] == -INFINITY);
    return FXRT_EW_OK;
}

void fxrt_not_bool(const uint8_t *x, uint8_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] == 0;
}
