/*
 * fxrt_nn_qlinear.c - the kernels of the QLinear ops that ONNX Runtime's
 * quantizer writes in its `com.microsoft` domain: QLinearAdd and QLinearMul
 * (with NumPy broadcasting), QLinearGlobalAveragePool, QLinearConcat's
 * per-input requantization, and QGemm's 8-bit product with either operand
 * transposed.  QLinearAveragePool, QLinearSoftmax, QLinearSigmoid and
 * QLinearLeakyRelu need no kernel of their own: their emitters dequantize
 * into scratch, run the float kernel and quantize (ir/ops/quant.c).
 *
 * Rounding follows ONNX Runtime's portable C paths, which compute in float:
 * a dequantized value is scale * (q - zero_point) in float, the result is
 * divided by the output scale in float and rounded half to even
 * (nearbyintf in the default rounding mode), then the zero point is added
 * and the result saturated.  ORT's vector paths (fixed-point QLinearAdd on
 * AVX2, table lookups for the unary ops) can differ from that by one
 * quantization step on values within a rounding error of a tie; the tests
 * allow that one step.
 */
#include <math.h>

#include "fxrt.h"

static int32_t load_q8(FxrtDType t, const void *base, int64_t i)
{
    return t == FXRT_DTYPE_UINT8 ? (int32_t)((const uint8_t *)base)[i]
                                 : (int32_t)((const int8_t *)base)[i];
}

/* rint(v / y_scale) + y_zp, saturated to t's range, stored at y[i]. */
static void store_quantized(FxrtDType t, void *y, int64_t i, float v, float y_scale, int32_t y_zp)
{
    float lo = t == FXRT_DTYPE_UINT8 ? 0.0f : -128.0f;
    float hi = t == FXRT_DTYPE_UINT8 ? 255.0f : 127.0f;
    float q = nearbyintf(v / y_scale) + (float)y_zp;
    q = q > hi ? hi : q >= lo ? q : lo; /* NaN -> lo */
    if (t == FXRT_DTYPE_UINT8)
        ((uint8_t *)y)[i] = (uint8_t)q;
    else
        ((int8_t *)y)[i] = (int8_t)q;
}

void fxrt_qlinear_binary(FxrtQLinearOp op, FxrtDType t, int rank, const int64_t *dims,
                         const void *a, const int64_t *a_strides, float a_scale, int32_t a_zp,
                         const void *b, const int64_t *b_strides, float b_scale, int32_t b_zp,
                         float y_scale, int32_t y_zp, void *y)
{
    int64_t idx[FXRT_MAX_RANK] = {0}, total = 1, ia = 0, ib = 0;
    for (int d = 0; d < rank; d++)
        total *= dims[d];
    for (int64_t i = 0; i < total; i++) {
        float va = a_scale * (float)(load_q8(t, a, ia) - a_zp);
        float vb = b_scale * (float)(load_q8(t, b, ib) - b_zp);
        store_quantized(t, y, i, op == FXRT_QLINEAR_MUL ? va * vb : va + vb, y_scale, y_zp);
        /* odometer over the output's axes, moving both input offsets */
        for (int d = rank - 1; d >= 0; d--) {
            ia += a_strides[d];
            ib += b_strides[d];
            if (++idx[d] < dims[d])
                break;
            ia -= a_strides[d] * dims[d];
            ib -= b_strides[d] * dims[d];
            idx[d] = 0;
        }
    }
}

void fxrt_qlinear_global_avgpool(FxrtDType t, int64_t planes, int64_t size, const void *x,
                                 float x_scale, int32_t x_zp, float y_scale, int32_t y_zp,
                                 void *y)
{
    /* ORT's order: an integer sum less the zero point's share, times one
     * float multiplier x_scale / (y_scale * size). */
    float scale = x_scale / (y_scale * (float)size);
    for (int64_t p = 0; p < planes; p++) {
        int64_t sum = -(int64_t)x_zp * size;
        for (int64_t i = 0; i < size; i++)
            sum += load_q8(t, x, p * size + i);
        store_quantized(t, y, p, (float)sum * scale, 1.0f, y_zp);
    }
}

void fxrt_qlinear_concat_part(FxrtDType t, int64_t outer, int64_t part, int64_t row,
                              const void *x, float x_scale, int32_t x_zp, float y_scale,
                              int32_t y_zp, void *y)
{
    int same = x_scale == y_scale && x_zp == y_zp;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < part; i++) {
            int32_t v = load_q8(t, x, o * part + i);
            int64_t at = o * row + i;
            if (same) {
                if (t == FXRT_DTYPE_UINT8)
                    ((uint8_t *)y)[at] = (uint8_t)v;
                else
                    ((int8_t *)y)[at] = (int8_t)v;
            } else {
                store_quantized(t, y, at, x_scale * (float)(v - x_zp), y_scale, y_zp);
            }
        }
}

void fxrt_gemm_integer_strided(int64_t m, int64_t n, int64_t k, FxrtDType a_type, const void *a,
                               int64_t a_row, int64_t a_col, int32_t a_zp, FxrtDType b_type,
                               const void *b, int64_t b_row, int64_t b_col, const int32_t *b_zp,
                               int64_t b_zp_count, int32_t *y)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int32_t zb = b_zp[b_zp_count == 1 ? 0 : j];
            /* unsigned so that the 32-bit wrap is defined, as in
             * fxrt_gemm_integer */
            uint32_t acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (uint32_t)((load_q8(a_type, a, i * a_row + p * a_col) - a_zp) *
                                  (load_q8(b_type, b, p * b_row + j * b_col) - zb));
            y[i * n + j] = (int32_t)acc;
        }
}
