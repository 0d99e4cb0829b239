/*
 * fxrt_nn_quant.c - the integer side of ONNX's quantized ops: the 8-bit
 * matrix product with zero points behind MatMulInteger and QLinearMatMul,
 * and the requantization that turns 32-bit accumulators back into 8-bit
 * values for QLinearMatMul and QLinearConv.
 *
 * Accumulators are 32-bit and wrap like the hardware ones they model; the
 * arithmetic is done on uint32_t so that the wrap is defined behaviour in C.
 * Requantization forms the product in double from float scales and rounds
 * half to even, which is what the ONNX reference (numpy.rint over int32 x
 * float32 promoted to float64) computes, so results match it bit for bit.
 */
#include <math.h>

#include "fxrt.h"

static int32_t load_q8(FxrtDType t, const void *base, int64_t i)
{
    return t == FXRT_DTYPE_UINT8 ? (int32_t)((const uint8_t *)base)[i]
                                 : (int32_t)((const int8_t *)base)[i];
}

void fxrt_gemm_integer(int64_t m, int64_t n, int64_t k, FxrtDType a_type, const void *a,
                       const int32_t *a_zp, int64_t a_zp_count, FxrtDType b_type,
                       const void *b, const int32_t *b_zp, int64_t b_zp_count, int32_t *y)
{
    for (int64_t i = 0; i < m; i++) {
        /* int32_t storage accessed as its unsigned counterpart: allowed
         * aliasing, and the wrap-around is defined. */
        uint32_t *acc = (uint32_t *)(y + i * n);
        int32_t za = a_zp[a_zp_count == 1 ? 0 : i];
        for (int64_t j = 0; j < n; j++)
            acc[j] = 0;
        for (int64_t p = 0; p < k; p++) {
            int32_t av = load_q8(a_type, a, i * k + p) - za;
            if (b_type == FXRT_DTYPE_UINT8) {
                const uint8_t *brow = (const uint8_t *)b + p * n;
                for (int64_t j = 0; j < n; j++)
                    acc[j] += (uint32_t)(av * ((int32_t)brow[j] - b_zp[b_zp_count == 1 ? 0 : j]));
            } else {
                const int8_t *brow = (const int8_t *)b + p * n;
                for (int64_t j = 0; j < n; j++)
                    acc[j] += (uint32_t)(av * ((int32_t)brow[j] - b_zp[b_zp_count == 1 ? 0 : j]));
            }
        }
    }
}

void fxrt_requantize(int64_t outer, int64_t channels, int64_t inner, const int32_t *acc,
                     const int32_t *bias, const float *scale, int64_t scale_count, int32_t y_zp,
                     FxrtDType y_type, void *y)
{
    double lo = y_type == FXRT_DTYPE_UINT8 ? 0.0 : -128.0;
    double hi = y_type == FXRT_DTYPE_UINT8 ? 255.0 : 127.0;
    int64_t q = 0;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < channels; c++) {
            double s = (double)scale[scale_count == 1 ? 0 : c];
            int64_t b = bias ? bias[c] : 0;
            for (int64_t i = 0; i < inner; i++, q++) {
                double v = nearbyint((double)((int64_t)acc[q] + b) * s) + (double)y_zp;
                v = v > hi ? hi : v >= lo ? v : lo; /* NaN (a NaN scale) -> lo */
                if (y_type == FXRT_DTYPE_UINT8)
                    ((uint8_t *)y)[q] = (uint8_t)v;
                else
                    ((int8_t *)y)[q] = (int8_t)v;
            }
        }
}

void fxrt_matmul_integer(const FxrtMatMulParams *p, FxrtDType a_type, const void *a,
                         int32_t a_zp, FxrtDType b_type, const void *b, const int32_t *b_zp,
                         int64_t b_zp_count, int32_t *y)
{
    int64_t count = fxrt_matmul_batch_count(p), mn = p->m * p->n;
    for (int64_t e = 0; e < count; e++) {
        int64_t oa, ob;
        fxrt_matmul_batch_offsets(p, e, &oa, &ob);
        fxrt_gemm_integer(p->m, p->n, p->k, a_type, (const uint8_t *)a + oa, &a_zp, 1, b_type,
                          (const uint8_t *)b + ob, b_zp, b_zp_count, y + e * mn);
    }
}
