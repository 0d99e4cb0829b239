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
 *
 * QLinearAdd and QLinearMul walk the output a row at a time (the innermost
 * axis, after merging the axes along which all three tensors are
 * contiguous); a row whose inputs are contiguous or broadcast from one
 * element runs on AVX-512 or AVX2 on host builds (chosen by CPUID at each
 * call, capped by fxrt_qlinear_limit_isa), 16 or 8 outputs per vector.
 * The vector rows perform the scalar loop's float operations one for one,
 * each IEEE-rounded the same way (integer subtraction, exact conversion,
 * multiplication, addition or multiplication, division, round half to
 * even, zero point, clamp with NaN -> the lower bound), so they give the
 * same bytes: no reciprocal in place of the division, and no fused
 * multiply-add (the AVX-512 row uses explicitly rounded operations, which
 * the compiler cannot contract; the AVX2 row is compiled without FMA).
 */
#include <math.h>

#include "fxrt.h"
#include "fxrt_isa.h"

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_QLINEAR_X86 1
#include "fxrt_quant_x86.h"
#endif

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

/* One output row of n elements: a and b advance by a_step and b_step
 * (1, or 0 when broadcast), y by 1. */
typedef struct QBinaryRow {
    FxrtQLinearOp op;
    FxrtDType t;
    float a_scale, b_scale, y_scale;
    int32_t a_zp, b_zp, y_zp;
} QBinaryRow;

static void qbinary_row_scalar(const QBinaryRow *r, const void *a, int64_t a_step, const void *b,
                               int64_t b_step, void *y, int64_t from, int64_t n)
{
    for (int64_t i = from; i < n; i++) {
        float va = r->a_scale * (float)(load_q8(r->t, a, i * a_step) - r->a_zp);
        float vb = r->b_scale * (float)(load_q8(r->t, b, i * b_step) - r->b_zp);
        store_quantized(r->t, y, i, r->op == FXRT_QLINEAR_MUL ? va * vb : va + vb, r->y_scale,
                        r->y_zp);
    }
}

#ifdef FXRT_QLINEAR_X86
#define QL_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
#define QL_AVX2_TARGET __attribute__((target("avx2")))
#define QL_ROUND (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* 2 AVX-512, 1 AVX2, 0 the portable loops. */
static int qlinear_isa_cap = 2;

void fxrt_qlinear_limit_isa(int level)
{
    qlinear_isa_cap = level;
    fxrt_qlinear_avgpool_limit_isa(level);
}

static int qlinear_isa(void)
{
    if (qlinear_isa_cap >= 2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return 2;
    return qlinear_isa_cap >= 1 && __builtin_cpu_supports("avx2") ? 1 : 0;
}

/* scale * (float)(q - zp) for 16 bytes at p (all 16 the same one when step
 * is 0), only the `live` lanes read. */
QL_AVX512_TARGET static inline __m512 dequant16(const uint8_t *p, int64_t step, __mmask16 live,
                                                int is_int8, __m512i zp, __m512 scale)
{
    __m128i bytes = step ? _mm_maskz_loadu_epi8(live, p) : _mm_set1_epi8((char)*p);
    __m512i v = is_int8 ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
    return _mm512_mul_round_ps(scale, _mm512_cvtepi32_ps(_mm512_sub_epi32(v, zp)), QL_ROUND);
}

QL_AVX512_TARGET static void qbinary_row_avx512(const QBinaryRow *r, const uint8_t *a,
                                                int64_t a_step, const uint8_t *b, int64_t b_step,
                                                uint8_t *y, int64_t n)
{
    int is_int8 = r->t == FXRT_DTYPE_INT8;
    const __m512 a_scale = _mm512_set1_ps(r->a_scale), b_scale = _mm512_set1_ps(r->b_scale);
    const __m512 y_scale = _mm512_set1_ps(r->y_scale), y_zp = _mm512_set1_ps((float)r->y_zp);
    const __m512i a_zp = _mm512_set1_epi32(r->a_zp), b_zp = _mm512_set1_epi32(r->b_zp);
    const __m512 lo = _mm512_set1_ps(is_int8 ? -128.0f : 0.0f);
    const __m512 hi = _mm512_set1_ps(is_int8 ? 127.0f : 255.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 live = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        __m512 va = dequant16(a + i * a_step, a_step, live, is_int8, a_zp, a_scale);
        __m512 vb = dequant16(b + i * b_step, b_step, live, is_int8, b_zp, b_scale);
        __m512 v = r->op == FXRT_QLINEAR_MUL ? _mm512_mul_round_ps(va, vb, QL_ROUND)
                                              : _mm512_add_round_ps(va, vb, QL_ROUND);
        v = _mm512_roundscale_ps(_mm512_div_round_ps(v, y_scale, QL_ROUND),
                                 _MM_FROUND_TO_NEAREST_INT);
        v = _mm512_add_round_ps(v, y_zp, QL_ROUND);
        /* vmaxps returns its second operand when the first is NaN: NaN -> lo */
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        _mm512_mask_cvtepi32_storeu_epi8(y + i, live, _mm512_cvttps_epi32(v));
    }
}

QL_AVX2_TARGET static inline __m256 dequant8(const uint8_t *p, int64_t step, int is_int8,
                                             __m256i zp, __m256 scale)
{
    __m128i bytes = step ? _mm_loadl_epi64((const __m128i *)p) : _mm_set1_epi8((char)*p);
    __m256i v = is_int8 ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
    return _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_sub_epi32(v, zp)));
}

/* Whole vectors only; returns how many outputs it wrote. */
QL_AVX2_TARGET static int64_t qbinary_row_avx2(const QBinaryRow *r, const uint8_t *a,
                                               int64_t a_step, const uint8_t *b, int64_t b_step,
                                               uint8_t *y, int64_t n)
{
    int is_int8 = r->t == FXRT_DTYPE_INT8;
    const __m256 a_scale = _mm256_set1_ps(r->a_scale), b_scale = _mm256_set1_ps(r->b_scale);
    const __m256 y_scale = _mm256_set1_ps(r->y_scale), y_zp = _mm256_set1_ps((float)r->y_zp);
    const __m256i a_zp = _mm256_set1_epi32(r->a_zp), b_zp = _mm256_set1_epi32(r->b_zp);
    const __m256 lo = _mm256_set1_ps(is_int8 ? -128.0f : 0.0f);
    const __m256 hi = _mm256_set1_ps(is_int8 ? 127.0f : 255.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 va = dequant8(a + i * a_step, a_step, is_int8, a_zp, a_scale);
        __m256 vb = dequant8(b + i * b_step, b_step, is_int8, b_zp, b_scale);
        __m256 v = r->op == FXRT_QLINEAR_MUL ? _mm256_mul_ps(va, vb) : _mm256_add_ps(va, vb);
        v = _mm256_round_ps(_mm256_div_ps(v, y_scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, y_zp), lo), hi);
        _mm_storel_epi64((__m128i *)(y + i), fxrt_quant_low_bytes_avx2(_mm256_cvttps_epi32(v)));
    }
    return i;
}
#else
void fxrt_qlinear_limit_isa(int level) { fxrt_qlinear_avgpool_limit_isa(level); }
#endif

static void qbinary_row(const QBinaryRow *r, const void *a, int64_t a_step, const void *b,
                        int64_t b_step, void *y, int64_t n)
{
    int64_t from = 0;
#ifdef FXRT_QLINEAR_X86
    int isa = a_step <= 1 && b_step <= 1 && a_step >= 0 && b_step >= 0 ? qlinear_isa() : 0;
    if (isa == 2) {
        qbinary_row_avx512(r, a, a_step, b, b_step, y, n);
        return;
    }
    if (isa == 1)
        from = qbinary_row_avx2(r, a, a_step, b, b_step, y, n);
#endif
    qbinary_row_scalar(r, a, a_step, b, b_step, y, from, n);
}

void fxrt_qlinear_binary(FxrtQLinearOp op, FxrtDType t, int rank, const int64_t *dims,
                         const void *a, const int64_t *a_strides, float a_scale, int32_t a_zp,
                         const void *b, const int64_t *b_strides, float b_scale, int32_t b_zp,
                         float y_scale, int32_t y_zp, void *y)
{
    /* Merge axis d into axis d + 1 wherever both inputs step over d as over
     * d + 1's whole extent (the output is contiguous), so that the rows are
     * as long as the layout allows: same-shape inputs become one row. */
    int64_t n_dims[FXRT_MAX_RANK], as[FXRT_MAX_RANK], bs[FXRT_MAX_RANK];
    int r = 0;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 1)
            continue;
        if (r > 0 && as[r - 1] == a_strides[d] * dims[d] && bs[r - 1] == b_strides[d] * dims[d]) {
            n_dims[r - 1] *= dims[d];
            as[r - 1] = a_strides[d];
            bs[r - 1] = b_strides[d];
            continue;
        }
        n_dims[r] = dims[d];
        as[r] = a_strides[d];
        bs[r] = b_strides[d];
        r++;
    }
    if (r == 0) { /* one element */
        n_dims[0] = 1;
        as[0] = bs[0] = 0;
        r = 1;
    }
    QBinaryRow row = {.op = op, .t = t, .a_scale = a_scale, .b_scale = b_scale,
                      .y_scale = y_scale, .a_zp = a_zp, .b_zp = b_zp, .y_zp = y_zp};
    int64_t len = n_dims[r - 1], rows = 1;
    for (int d = 0; d < r - 1; d++)
        rows *= n_dims[d];
    int64_t idx[FXRT_MAX_RANK] = {0}, ia = 0, ib = 0;
    for (int64_t k = 0; k < rows; k++) {
        qbinary_row(&row, (const uint8_t *)a + ia, as[r - 1], (const uint8_t *)b + ib, bs[r - 1],
                    (uint8_t *)y + k * len, len);
        /* odometer over the outer axes, moving both input offsets */
        for (int d = r - 2; d >= 0; d--) {
            ia += as[d];
            ib += bs[d];
            if (++idx[d] < n_dims[d])
                break;
            ia -= as[d] * n_dims[d];
            ib -= bs[d] * n_dims[d];
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

/* The integer sums of up to CHANNEL_CHUNK channels at a time, pixel by
 * pixel along the rows of channels: contiguous bytes, where the planes of
 * the NCHW form are a transpose away. */
enum { CHANNEL_CHUNK = 64 };

void fxrt_qlinear_global_avgpool_nhwc(FxrtDType t, int64_t batch, int64_t size,
                                      int64_t channels, const void *x, float x_scale,
                                      int32_t x_zp, float y_scale, int32_t y_zp, void *y)
{
    float scale = x_scale / (y_scale * (float)size);
    for (int64_t n = 0; n < batch; n++)
        for (int64_t c0 = 0; c0 < channels; c0 += CHANNEL_CHUNK) {
            int64_t count = channels - c0 < CHANNEL_CHUNK ? channels - c0 : CHANNEL_CHUNK;
            int64_t sums[CHANNEL_CHUNK];
            for (int64_t c = 0; c < count; c++)
                sums[c] = -(int64_t)x_zp * size;
            for (int64_t i = 0; i < size; i++) {
                int64_t row = (n * size + i) * channels + c0;
                for (int64_t c = 0; c < count; c++)
                    sums[c] += load_q8(t, x, row + c);
            }
            for (int64_t c = 0; c < count; c++)
                store_quantized(t, y, n * channels + c0 + c, (float)sums[c] * scale, 1.0f, y_zp);
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
