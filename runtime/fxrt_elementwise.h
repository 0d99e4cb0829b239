/*
 * fxrt_elementwise.h - elementwise kernels: unary math and activations,
 * binary arithmetic and comparisons with NumPy broadcasting, Where, Clip,
 * casts and linear (de)quantization.  See fxrt.h for the rules.
 *
 * Layout conventions, chosen so that generated code can pass constant
 * arrays:
 *  - Unary kernels work on n contiguous elements; y may be x (in place).
 *  - Broadcasting kernels take the output's rank and dims plus, for each
 *    input, a stride per output axis in elements (0 on an axis the input is
 *    broadcast along; fxrt_broadcast_strides computes them).  The output is
 *    contiguous.  Size-1 axes are dropped and neighbouring axes merged
 *    first, so same-shape inputs run as one flat loop and a scalar or a
 *    per-channel operand runs as a flat inner loop with a hoisted value.
 *    y may alias an input whose strides are the contiguous ones of the
 *    output shape (in place: every element is read before it is written).
 *  - float32 has its own entry points (the fast path); the type-generic
 *    entry points take a FxrtDType and route float32 there, float64 through
 *    a double twin, and integers through exact 64-bit arithmetic (int64 for
 *    signed types, uint64 for unsigned ones, wrapping like C unsigned
 *    arithmetic and NumPy).  bool is one byte holding 0 or 1; kernels that
 *    produce bool always write 0 or 1.
 *  - Kernels that can fail return FXRT_EW_OK (0) or a negative code; on
 *    float32/float64 data they fail only for ops not defined on floats.
 */
#ifndef FXRT_ELEMENTWISE_H
#define FXRT_ELEMENTWISE_H

#include "fxrt.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    FXRT_EW_OK = 0,
    FXRT_EW_ERR_TYPE = -1,     /* op not defined for this element type */
    FXRT_EW_ERR_DIV_ZERO = -2  /* integer Div or Mod by zero */
};

/* ------------------------------------------------------------------------- */
/* Unary (fxrt_elementwise.c)                                                 */
/* ------------------------------------------------------------------------- */

/* params[] holds the op's float attributes in the order given; ops without
 * any ignore params (it may be NULL). */
typedef enum FxrtUnaryOp {
    FXRT_UNARY_NEG,
    FXRT_UNARY_ABS,
    FXRT_UNARY_SIGN,
    FXRT_UNARY_RELU,
    FXRT_UNARY_SQRT,
    FXRT_UNARY_EXP,
    FXRT_UNARY_LOG,
    FXRT_UNARY_RECIPROCAL,
    FXRT_UNARY_ERF,
    FXRT_UNARY_TANH,
    FXRT_UNARY_SIGMOID,
    FXRT_UNARY_LEAKY_RELU,       /* alpha */
    FXRT_UNARY_ELU,              /* alpha */
    FXRT_UNARY_SELU,             /* alpha, gamma */
    FXRT_UNARY_CELU,             /* alpha */
    FXRT_UNARY_HARD_SIGMOID,     /* alpha, beta */
    FXRT_UNARY_HARD_SWISH,       /* x * hard_sigmoid(x; 1/6, 1/2) */
    FXRT_UNARY_SOFTPLUS,
    FXRT_UNARY_SOFTSIGN,
    FXRT_UNARY_THRESHOLDED_RELU, /* alpha */
    FXRT_UNARY_SHRINK,           /* bias, lambd */
    FXRT_UNARY_FLOOR,
    FXRT_UNARY_CEIL,
    FXRT_UNARY_ROUND,            /* half to even */
    FXRT_UNARY_SIN,
    FXRT_UNARY_COS,
    FXRT_UNARY_TAN,
    FXRT_UNARY_ASIN,
    FXRT_UNARY_ACOS,
    FXRT_UNARY_ATAN,
    FXRT_UNARY_SINH,
    FXRT_UNARY_COSH,
    FXRT_UNARY_ASINH,
    FXRT_UNARY_ACOSH,
    FXRT_UNARY_ATANH,
    FXRT_UNARY_GELU,             /* x/2 (1 + erf(x / sqrt 2)) */
    FXRT_UNARY_GELU_TANH,        /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    FXRT_UNARY_MISH,             /* x tanh(softplus(x)) */
    FXRT_UNARY_COUNT_
} FxrtUnaryOp;

/* Number of params[] entries the op reads (0, 1 or 2). */
int fxrt_unary_num_params(FxrtUnaryOp op);

void fxrt_unary_f32(FxrtUnaryOp op, const float *x, float *y, size_t n, const float *params);
void fxrt_unary_f64(FxrtUnaryOp op, const double *x, double *y, size_t n,
                    const double *params);
/* Any type.  Integer types support NEG, ABS, SIGN, RELU (exact) and SHRINK
 * (computed in double, truncated back); other ops on integers return
 * FXRT_EW_ERR_TYPE. */
int fxrt_unary(FxrtUnaryOp op, FxrtDType t, const void *x, void *y, size_t n,
               const double *params);

/* Round half to even, independent of the FPU rounding mode. */
float fxrt_round_half_even_f32(float x);
double fxrt_round_half_even_f64(double x);

/* y = min(max(x, lo), hi); NaN stays NaN.  fxrt_clip_f32 takes
 * -INFINITY/INFINITY for a missing bound; fxrt_clip takes pointers to one
 * element of type t, NULL meaning unbounded. */
void fxrt_clip_f32(const float *x, float *y, size_t n, float lo, float hi);
int fxrt_clip(FxrtDType t, const void *x, void *y, size_t n, const void *lo, const void *hi);

/* Float predicates with bool output. */
void fxrt_isnan_f32(const float *x, uint8_t *y, size_t n);
void fxrt_isinf_f32(const float *x, uint8_t *y, size_t n, int detect_negative,
                    int detect_positive);
int fxrt_isnan(FxrtDType t, const void *x, uint8_t *y, size_t n);
int fxrt_isinf(FxrtDType t, const void *x, uint8_t *y, size_t n, int detect_negative,
               int detect_positive);

/* Logical not of a bool array. */
void fxrt_not_bool(const uint8_t *x, uint8_t *y, size_t n);

/* ------------------------------------------------------------------------- */
/* Binary with broadcasting (fxrt_elementwise_binary.c)                      */
/* ------------------------------------------------------------------------- */

typedef enum FxrtBinaryOp {
    /* arithmetic: y has the inputs' type */
    FXRT_BINARY_ADD,
    FXRT_BINARY_SUB,
    FXRT_BINARY_MUL,
    FXRT_BINARY_DIV,       /* integers truncate toward zero */
    FXRT_BINARY_POW,
    FXRT_BINARY_MIN,       /* NaN propagates */
    FXRT_BINARY_MAX,
    FXRT_BINARY_MOD,       /* remainder with the divisor's sign (Python %, ONNX fmod=0) */
    FXRT_BINARY_FMOD,      /* remainder with the dividend's sign (C fmod, %) */
    FXRT_BINARY_PRELU,     /* a < 0 ? a * b : a */
    FXRT_BINARY_SHL,       /* unsigned only; shifts >= the bit width give 0 */
    FXRT_BINARY_SHR,
    /* comparisons: y is bool */
    FXRT_BINARY_EQUAL,
    FXRT_BINARY_LESS,
    FXRT_BINARY_LESS_EQUAL,
    FXRT_BINARY_GREATER,
    FXRT_BINARY_GREATER_EQUAL,
    /* logic: bool in, bool out */
    FXRT_BINARY_AND,
    FXRT_BINARY_OR,
    FXRT_BINARY_XOR,
    FXRT_BINARY_COUNT_
} FxrtBinaryOp;

/* Nonzero for the ops whose output is bool (comparisons and logic). */
int fxrt_binary_is_predicate(FxrtBinaryOp op);

/* Strides (in elements) of a contiguous input of shape in_dims[in_rank] read
 * as if broadcast to out_dims[out_rank] (in_rank <= out_rank, aligned on the
 * right): 0 on axes where the input has size 1 or is missing. */
void fxrt_broadcast_strides(int out_rank, const int64_t *out_dims, int in_rank,
                            const int64_t *in_dims, int64_t *strides);

/* float32 arithmetic (ADD..PRELU; other ops are ignored: y is untouched). */
void fxrt_binary_f32(FxrtBinaryOp op, int rank, const int64_t *dims, const float *a,
                     const int64_t *a_strides, const float *b, const int64_t *b_strides,
                     float *y);
/* float32 comparisons (EQUAL..GREATER_EQUAL). */
void fxrt_compare_f32(FxrtBinaryOp op, int rank, const int64_t *dims, const float *a,
                      const int64_t *a_strides, const float *b, const int64_t *b_strides,
                      uint8_t *y);
/* Any op, both inputs of type t; y is of type t, or bool for predicates.
 * Returns FXRT_EW_ERR_DIV_ZERO for an integer division or remainder by zero
 * (y is then partly written) and FXRT_EW_ERR_TYPE for an op the type does
 * not have (shifts on signed or float types, logic on non-bool types,
 * arithmetic on bool). */
int fxrt_binary(FxrtBinaryOp op, FxrtDType t, int rank, const int64_t *dims, const void *a,
                const int64_t *a_strides, const void *b, const int64_t *b_strides, void *y);
/* ONNX Pow with independent base and exponent types; y has the base's type.
 * A float base uses pow() (powf when both are float32); an integer base with
 * an integer exponent is exact (wrapping, negative exponents truncate
 * 1/b^k toward zero); an integer base with a float exponent is computed in
 * double and stored back with fxrt_store_f64 (saturating to int64, then wrapping). */
int fxrt_pow(int rank, const int64_t *dims, FxrtDType ta, const void *a,
             const int64_t *a_strides, FxrtDType tb, const void *b, const int64_t *b_strides,
             void *y);

/* ONNX Sum/Min/Max/Mean: y = x[0] op x[1] op ... op x[count-1] with each
 * x[k] broadcast by strides[k] to dims (the output, contiguous); mean
 * nonzero divides the result by count (float types only).  op is an
 * arithmetic op of the type (ADD, MIN, MAX...).  y may be any of the x[k]
 * that has the output's shape and type, even several of them (in place).
 * Returns what fxrt_binary returns. */
int fxrt_variadic(FxrtBinaryOp op, int mean, FxrtDType t, int rank, const int64_t *dims,
                  int count, const void *const *x, const int64_t *const *strides, void *y);

/* out = cond ? x : y with three broadcast operands; x, y and out hold
 * elements of elem_size bytes (any type; 1, 2, 4 and 8 have fast paths). */
void fxrt_where(size_t elem_size, int rank, const int64_t *dims, const uint8_t *cond,
                const int64_t *cond_strides, const void *x, const int64_t *x_strides,
                const void *y, const int64_t *y_strides, void *out);

/* ------------------------------------------------------------------------- */
/* Casts and quantization (fxrt_elementwise_cast.c)                           */
/* ------------------------------------------------------------------------- */

/* y[i] = (to) x[i] for every pair of supported types.  Float to integer
 * truncates toward zero; NaN gives 0 and values beyond the target's range
 * saturate.  Integer to integer wraps modulo 2^bits (NumPy's astype); any
 * nonzero value (NaN too) becomes true; bool reads as 0/1.  Returns
 * FXRT_EW_ERR_TYPE for float16, string and unknown types.  y may be x only
 * when from == to. */
int fxrt_cast(FxrtDType from, const void *x, FxrtDType to, void *y, size_t n);

/* ONNX QuantizeLinear / DequantizeLinear.  The data is viewed as
 * (outer, channels, inner) with one scale and zero point per channel:
 * channels = 1 is per-tensor, channels = dims[axis] is per-axis.
 * zero_point has type yt (resp. xt) and may be NULL (zero).
 * Quantize: y = saturate(round_half_even(x / scale) + zero_point) for x of
 * type float32 or int32, yt uint8 or int8.
 * Dequantize: y = (x - zero_point) * scale for xt uint8, int8 or int32. */
int fxrt_quantize_linear(FxrtDType xt, const void *x, size_t outer, size_t channels,
                         size_t inner, const float *scale, FxrtDType yt,
                         const void *zero_point, void *y);
int fxrt_dequantize_linear(FxrtDType xt, const void *x, size_t outer, size_t channels,
                           size_t inner, const float *scale, const void *zero_point,
                           float *y);

#ifdef __cplusplus
}
#endif

#endif
