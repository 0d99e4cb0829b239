/*
 * check_runtime_qlinear.c - the kernels of ONNX Runtime's com.microsoft
 * QLinear ops (runtime/fxrt_nn_qlinear.c) against hand-worked values and
 * against a double-precision reference.
 *
 * The hand-worked cases pin the rounding (half to even on exact ties),
 * saturation and zero points, compared exactly.  The random cases compute
 * the dequantized result in double and round it; the kernels compute in
 * float, as ORT does, so a value within 1e-3 of a .5 tie may round either
 * way: those may differ by one, every other value must be equal.  The
 * strided integer GEMM (QGemm's transA/transB) is compared exactly with
 * fxrt_gemm_integer on explicitly transposed copies.  QLinearAdd and
 * QLinearMul's vector rows (AVX-512, AVX2; fxrt_qlinear_limit_isa) are
 * compared exactly, at every level, with ORT's float C path written out
 * here, on broadcast shapes that give contiguous rows, rows broadcast from
 * one element, strided odometer walks, vector tails, ties and NaN.  Built
 * for the host and the portable runtime.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"

static uint32_t rng_state;

static int32_t rnd_range(int32_t lo, int32_t hi) /* inclusive */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return lo + (int32_t)((rng_state >> 8) % (uint32_t)(hi - lo + 1));
}

/* The reference quantization of a double value v and whether it lies
 * within 1e-3 of a rounding tie (where float and double may disagree). */
static int32_t ref_quantize(double v, double y_scale, int32_t y_zp, int lo, int hi, int *near_tie)
{
    double r = v / y_scale, frac = r - floor(r);
    *near_tie = fabs(frac - 0.5) < 1e-3;
    double q = nearbyint(r) + y_zp;
    return (int32_t)(q < lo ? lo : q > hi ? hi : q);
}

static void expect_close(int32_t got, int32_t want, int near_tie, const char *what, int64_t i)
{
    int32_t d = got > want ? got - want : want - got;
    ck_assert_msg(d == 0 || (near_tie && d == 1), "%s[%lld]: %d, reference %d", what,
                  (long long)i, got, want);
}

/* --- hand-worked values -------------------------------------------------- */

START_TEST(test_add_hand)
{
    /* a: 0.5 x (q - 128) = 1.0, -14.0, 0.5, 1.5; b: 0.25 x q = 2.5, 0, 0, 0;
     * y = rint(sum / 0.5) + 10 = 17, -18 -> 0 (saturated), 11, 13 */
    static const uint8_t a[4] = {130, 100, 129, 131}, b[4] = {10, 0, 0, 0};
    static const int64_t dims[1] = {4}, st[1] = {1};
    uint8_t y[4];
    fxrt_qlinear_binary(FXRT_QLINEAR_ADD, FXRT_DTYPE_UINT8, 1, dims, a, st, 0.5f, 128, b, st,
                        0.25f, 0, 0.5f, 10, y);
    ck_assert_int_eq(y[0], 17);
    ck_assert_int_eq(y[1], 0);
    ck_assert_int_eq(y[2], 11); /* 0.5 / 0.5 = 1 */
    ck_assert_int_eq(y[3], 13); /* 1.5 / 0.5 = 3 */
    /* ties with y_scale 1: 0.5 -> 0, 1.5 -> 2 (half to even) */
    fxrt_qlinear_binary(FXRT_QLINEAR_ADD, FXRT_DTYPE_UINT8, 1, dims, a, st, 0.5f, 128, b, st,
                        0.25f, 0, 1.0f, 0, y);
    ck_assert_int_eq(y[2], 0);
    ck_assert_int_eq(y[3], 2);
}
END_TEST

START_TEST(test_mul_hand)
{
    /* int8: a = 0.5 x q = -2, 3, 63.5; b = (q - 1) = 2, 2, 126; products
     * -4, 6, 8001 -> /0.5 - 1 = -9, 11, 127 (saturated) */
    static const int8_t a[3] = {-4, 6, 127}, b[3] = {3, 3, 127};
    static const int64_t dims[1] = {3}, st[1] = {1};
    int8_t y[3];
    fxrt_qlinear_binary(FXRT_QLINEAR_MUL, FXRT_DTYPE_INT8, 1, dims, a, st, 0.5f, 0, b, st, 1.0f,
                        1, 0.5f, -1, y);
    ck_assert_int_eq(y[0], -9);
    ck_assert_int_eq(y[1], 11);
    ck_assert_int_eq(y[2], 127);
}
END_TEST

START_TEST(test_global_avgpool_hand)
{
    /* plane 0: mean 25.25 / 0.5 = 50.5 -> 50 (tie to even) + 3 = 53;
     * plane 1: x_zp 2 -> (1 + 1 + 1 + 1) / 4 = 1 / 0.5 = 2 + 3 = 5 */
    static const uint8_t x[8] = {10, 20, 30, 41, 3, 3, 3, 3};
    uint8_t y[2];
    fxrt_qlinear_global_avgpool(FXRT_DTYPE_UINT8, 1, 4, x, 1.0f, 0, 0.5f, 3, y);
    ck_assert_int_eq(y[0], 53);
    fxrt_qlinear_global_avgpool(FXRT_DTYPE_UINT8, 1, 4, x + 4, 1.0f, 2, 0.5f, 3, y + 1);
    ck_assert_int_eq(y[1], 5);
}
END_TEST

START_TEST(test_concat_hand)
{
    /* two inputs along the last axis of [2, 3] and [2, 1]: the first copied
     * (same parameters), the second requantized: 0.25 x (q - 4) / 0.5 + 1 */
    static const int8_t x0[6] = {1, 2, 3, 4, 5, 6}, x1[2] = {8, -128};
    int8_t y[8];
    fxrt_qlinear_concat_part(FXRT_DTYPE_INT8, 2, 3, 4, x0, 0.5f, 1, 0.5f, 1, y);
    fxrt_qlinear_concat_part(FXRT_DTYPE_INT8, 2, 1, 4, x1, 0.25f, 4, 0.5f, 1, y + 3);
    static const int8_t want[8] = {1, 2, 3, 3, 4, 5, 6, -65};
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(y[i], want[i]);
}
END_TEST

/* --- random values against double ----------------------------------------- */

START_TEST(test_binary_broadcast_random)
{
    /* y [3, 4, 5] = a [3, 1, 5] op b [4, 1], both types, both ops */
    rng_state = 7;
    static const int64_t dims[3] = {3, 4, 5};
    int64_t sa[3], sb[3];
    static const int64_t adims[3] = {3, 1, 5}, bdims[2] = {4, 1};
    fxrt_broadcast_strides(3, dims, 3, adims, sa);
    fxrt_broadcast_strides(3, dims, 2, bdims, sb);
    for (int variant = 0; variant < 4; variant++) {
        FxrtDType t = variant & 1 ? FXRT_DTYPE_INT8 : FXRT_DTYPE_UINT8;
        FxrtQLinearOp op = variant & 2 ? FXRT_QLINEAR_MUL : FXRT_QLINEAR_ADD;
        int lo = t == FXRT_DTYPE_UINT8 ? 0 : -128, hi = lo + 255;
        uint8_t a[15], b[4], y[60];
        for (int i = 0; i < 15; i++)
            a[i] = (uint8_t)rnd_range(0, 255);
        for (int i = 0; i < 4; i++)
            b[i] = (uint8_t)rnd_range(0, 255);
        float as = 0.037f, bs = 0.021f, ys = op == FXRT_QLINEAR_MUL ? 0.11f : 0.043f;
        int32_t az = rnd_range(lo, hi), bz = rnd_range(lo, hi), yz = rnd_range(lo, hi);
        fxrt_qlinear_binary(op, t, 3, dims, a, sa, as, az, b, sb, bs, bz, ys, yz, y);
        for (int i0 = 0; i0 < 3; i0++)
            for (int i1 = 0; i1 < 4; i1++)
                for (int i2 = 0; i2 < 5; i2++) {
                    int64_t i = (i0 * 4 + i1) * 5 + i2;
                    int32_t qa = t == FXRT_DTYPE_UINT8 ? a[i0 * 5 + i2] : (int8_t)a[i0 * 5 + i2];
                    int32_t qb = t == FXRT_DTYPE_UINT8 ? b[i1] : (int8_t)b[i1];
                    double va = (double)as * (qa - az), vb = (double)bs * (qb - bz);
                    int tie;
                    int32_t want = ref_quantize(op == FXRT_QLINEAR_MUL ? va * vb : va + vb, ys,
                                                yz, lo, hi, &tie);
                    int32_t got = t == FXRT_DTYPE_UINT8 ? y[i] : (int8_t)y[i];
                    expect_close(got, want, tie, "qlinear_binary", i);
                }
    }
}
END_TEST

/* ORT's C path for one element, float operations in order (this file is
 * built without contraction into fused multiply-adds). */
static int32_t ort_binary(FxrtQLinearOp op, int lo, int hi, int32_t qa, float as, int32_t az,
                          int32_t qb, float bs, int32_t bz, float ys, int32_t yz)
{
    float va = as * (float)(qa - az), vb = bs * (float)(qb - bz);
    float q = nearbyintf((op == FXRT_QLINEAR_MUL ? va * vb : va + vb) / ys) + (float)yz;
    q = q > (float)hi ? (float)hi : q >= (float)lo ? q : (float)lo;
    return (int32_t)q;
}

/* y = a op b on the broadcast of adims and bdims (rank 3, output dims). */
static void check_binary_exact(const int64_t *dims, const int64_t *adims, const int64_t *bdims,
                               float as, float bs, float ys)
{
    enum { MAXN = 512 };
    int64_t sa[3], sb[3], na = 1, nb = 1, n = dims[0] * dims[1] * dims[2];
    fxrt_broadcast_strides(3, dims, 3, adims, sa);
    fxrt_broadcast_strides(3, dims, 3, bdims, sb);
    for (int d = 0; d < 3; d++) {
        na *= adims[d];
        nb *= bdims[d];
    }
    ck_assert(n <= MAXN && na <= MAXN && nb <= MAXN);
    uint8_t a[MAXN], b[MAXN], y[MAXN + 16];
    static const int levels[] = {2, 1, 0};
    for (int variant = 0; variant < 4; variant++) {
        FxrtDType t = variant & 1 ? FXRT_DTYPE_INT8 : FXRT_DTYPE_UINT8;
        FxrtQLinearOp op = variant & 2 ? FXRT_QLINEAR_MUL : FXRT_QLINEAR_ADD;
        int lo = t == FXRT_DTYPE_UINT8 ? 0 : -128, hi = lo + 255;
        for (int64_t i = 0; i < na; i++)
            a[i] = (uint8_t)rnd_range(0, 255);
        for (int64_t i = 0; i < nb; i++)
            b[i] = (uint8_t)rnd_range(0, 255);
        int32_t az = rnd_range(lo, hi), bz = rnd_range(lo, hi), yz = rnd_range(lo, hi);
        for (int l = 0; l < 3; l++) {
            fxrt_qlinear_limit_isa(levels[l]);
            memset(y, 0xA5, sizeof y);
            fxrt_qlinear_binary(op, t, 3, dims, a, sa, as, az, b, sb, bs, bz, ys, yz, y);
            for (int64_t i0 = 0, i = 0; i0 < dims[0]; i0++)
                for (int64_t i1 = 0; i1 < dims[1]; i1++)
                    for (int64_t i2 = 0; i2 < dims[2]; i2++, i++) {
                        uint8_t ra = a[i0 * sa[0] + i1 * sa[1] + i2 * sa[2]];
                        uint8_t rb = b[i0 * sb[0] + i1 * sb[1] + i2 * sb[2]];
                        int32_t qa = t == FXRT_DTYPE_UINT8 ? ra : (int8_t)ra;
                        int32_t qb = t == FXRT_DTYPE_UINT8 ? rb : (int8_t)rb;
                        int32_t want = ort_binary(op, lo, hi, qa, as, az, qb, bs, bz, ys, yz);
                        int32_t got = t == FXRT_DTYPE_UINT8 ? y[i] : (int8_t)y[i];
                        ck_assert_msg(got == want,
                                      "isa %d op %d type %d dims %lldx%lldx%lld [%lld]: %d, "
                                      "want %d",
                                      levels[l], (int)op, (int)t, (long long)dims[0],
                                      (long long)dims[1], (long long)dims[2], (long long)i, got,
                                      want);
                    }
            for (int64_t i = n; i < n + 16; i++)
                ck_assert_int_eq(y[i], 0xA5);
        }
    }
    fxrt_qlinear_limit_isa(2);
}

/* Every pair of input bytes, at every ISA level, against ORT's float
 * operations, for scales whose reciprocals are inexact: quotients land
 * within 2^-13 of a half-integer hundreds of times, where a vector row that
 * multiplied by a reciprocal instead of dividing would round some the
 * other way. */
START_TEST(test_binary_all_pairs)
{
    enum { PAIRS = 256 * 256 };
    static uint8_t a[PAIRS], b[PAIRS], y[PAIRS];
    static const float scales[][3] = {{0.037f, 0.021f, 0.043f}, {0.011f, 0.7f, 0.29f},
                                      {0.1f, 0.1f, 0.3f}, {0.0123f, 0.0456f, 0.0789f}};
    static const int levels[] = {2, 1, 0};
    int64_t dims[1] = {PAIRS}, st[1] = {1};
    for (int i = 0; i < PAIRS; i++) {
        a[i] = (uint8_t)(i & 255);
        b[i] = (uint8_t)(i >> 8);
    }
    int64_t near_ties = 0;
    for (int s = 0; s < 4; s++)
        for (int variant = 0; variant < 4; variant++) {
            FxrtDType t = variant & 1 ? FXRT_DTYPE_INT8 : FXRT_DTYPE_UINT8;
            FxrtQLinearOp op = variant & 2 ? FXRT_QLINEAR_MUL : FXRT_QLINEAR_ADD;
            int lo = t == FXRT_DTYPE_UINT8 ? 0 : -128, hi = lo + 255;
            int32_t az = lo + 100, bz = lo + 155, yz = lo + 77;
            float as = scales[s][0], bs = scales[s][1], ys = scales[s][2];
            for (int l = 0; l < 3; l++) {
                fxrt_qlinear_limit_isa(levels[l]);
                fxrt_qlinear_binary(op, t, 1, dims, a, st, as, az, b, st, bs, bz, ys, yz, y);
                for (int i = 0; i < PAIRS; i++) {
                    int32_t qa = t == FXRT_DTYPE_UINT8 ? a[i] : (int8_t)a[i];
                    int32_t qb = t == FXRT_DTYPE_UINT8 ? b[i] : (int8_t)b[i];
                    int32_t want = ort_binary(op, lo, hi, qa, as, az, qb, bs, bz, ys, yz);
                    int32_t got = t == FXRT_DTYPE_UINT8 ? y[i] : (int8_t)y[i];
                    /* a test, not ck_assert per element: Check records each one, which
                     * under ASan took this test past its timeout */
                    if (got != want)
                        ck_abort_msg("isa %d op %d type %d scales %d pair %d: %d, want %d",
                                     levels[l], (int)op, (int)t, s, i, got, want);
                    if (l == 0) {
                        float va = as * (float)(qa - az), vb = bs * (float)(qb - bz);
                        double q = (double)(op == FXRT_QLINEAR_MUL ? va * vb : va + vb) / ys;
                        near_ties += fabs(q - floor(q) - 0.5) < 0x1p-13;
                    }
                }
            }
        }
    fxrt_qlinear_limit_isa(2);
    ck_assert_int_gt(near_ties, 100);
}
END_TEST

/* The vector rows against the scalar C on more scales than the cases
 * above: every pair of uint8 operands, under 300 output scales from 2^-12
 * to 2^4 with random significands and operand scales, byte for byte. */
START_TEST(test_binary_quotient_many_scales)
{
    enum { PAIRS = 256 * 256 };
    static uint8_t a[PAIRS], b[PAIRS], y[PAIRS];
    int64_t dims[1] = {PAIRS}, st[1] = {1};
    for (int i = 0; i < PAIRS; i++) {
        a[i] = (uint8_t)(i & 255);
        b[i] = (uint8_t)(i >> 8);
    }
    rng_state = 77;
    for (int s = 0; s < 300; s++) {
        float ys = ldexpf(1.0f + (float)rnd_range(0, (1 << 22) - 1) * 0x1p-22f, rnd_range(-12, 4));
        float as = ldexpf(1.0f + (float)rnd_range(0, (1 << 22) - 1) * 0x1p-22f, rnd_range(-10, 0));
        float bs = ldexpf(1.0f + (float)rnd_range(0, (1 << 22) - 1) * 0x1p-22f, rnd_range(-10, 0));
        FxrtQLinearOp op = s % 2 ? FXRT_QLINEAR_MUL : FXRT_QLINEAR_ADD;
        for (int level = 2; level >= 1; level--) {
            fxrt_qlinear_limit_isa(level);
            fxrt_qlinear_binary(op, FXRT_DTYPE_UINT8, 1, dims, a, st, as, 128, b, st, bs, 120, ys,
                                7, y);
            for (int i = 0; i < PAIRS; i++) {
                int32_t want = ort_binary(op, 0, 255, a[i], as, 128, b[i], bs, 120, ys, 7);
                if (y[i] != want) /* as in test_binary_all_pairs */
                    ck_abort_msg("isa %d scale set %d pair %d: %d, want %d", level, s, i, y[i],
                                 want);
            }
        }
    }
    fxrt_qlinear_limit_isa(2);
}
END_TEST

START_TEST(test_binary_isa_levels)
{
    rng_state = 21;
    /* scales with many exact ties, and ordinary ones */
    static const float scales[][3] = {{0.5f, 0.25f, 0.5f}, {0.037f, 0.021f, 0.043f},
                                      {0.0625f, 0.125f, 1.0f}, {0.011f, 0.7f, 0.29f}};
    for (int s = 0; s < 4; s++) {
        float as = scales[s][0], bs = scales[s][1], ys = scales[s][2];
        for (int64_t n = 1; n <= 70; n++) { /* same shape: one row, every tail */
            int64_t d[3] = {1, 1, n};
            check_binary_exact(d, d, d, as, bs, ys);
        }
        {
            int64_t d[3] = {2, 3, 37}, ad[3] = {2, 3, 37}, bd[3] = {1, 1, 37};
            check_binary_exact(d, ad, bd, as, bs, ys); /* a row broadcast */
        }
        {
            int64_t d[3] = {1, 5, 19}, ad[3] = {1, 5, 19}, bd[3] = {1, 5, 1};
            check_binary_exact(d, ad, bd, as, bs, ys); /* one element per row */
            check_binary_exact(d, bd, ad, as, bs, ys);
        }
        {
            int64_t d[3] = {4, 3, 6}, ad[3] = {4, 1, 6}, bd[3] = {1, 3, 1};
            check_binary_exact(d, ad, bd, as, bs, ys);
        }
        {
            int64_t d[3] = {3, 17, 2}, ad[3] = {3, 17, 2}, bd[3] = {1, 17, 1};
            check_binary_exact(d, ad, bd, as, bs, ys); /* rows of 2, odometer */
        }
        {
            int64_t d[3] = {1, 1, 40}, ad[3] = {1, 1, 40}, bd[3] = {1, 1, 1};
            check_binary_exact(d, ad, bd, as, bs, ys); /* a scalar operand */
        }
    }
    /* an infinite scale: inf x 0 is NaN, which saturates to the lower bound */
    int64_t d[3] = {1, 1, 33};
    check_binary_exact(d, d, d, INFINITY, 0.5f, 0.25f);
}
END_TEST

START_TEST(test_global_avgpool_random)
{
    rng_state = 9;
    enum { PLANES = 6, SIZE = 49 };
    int8_t x[PLANES * SIZE], y[PLANES];
    for (int i = 0; i < PLANES * SIZE; i++)
        x[i] = (int8_t)rnd_range(-128, 127);
    fxrt_qlinear_global_avgpool(FXRT_DTYPE_INT8, PLANES, SIZE, x, 0.05f, -3, 0.01f, 5, y);
    for (int p = 0; p < PLANES; p++) {
        double sum = 0;
        for (int i = 0; i < SIZE; i++)
            sum += 0.05 * (x[p * SIZE + i] + 3);
        int tie;
        int32_t want = ref_quantize(sum / SIZE, 0.01, 5, -128, 127, &tie);
        expect_close(y[p], want, tie, "global_avgpool", p);
    }
}
END_TEST

/* --- the strided integer GEMM ---------------------------------------------- */

/* QLinearAveragePool's kernel against the float path it replaces:
 * dequantize, fxrt_avgpool_f32, quantize; equal bytes, padded windows with
 * and without the padding counted, both 8-bit types. */
START_TEST(test_avgpool_float_path)
{
    srand(7);
    for (int variant = 0; variant < 4; variant++) {
        FxrtDType t = variant % 2 ? FXRT_DTYPE_INT8 : FXRT_DTYPE_UINT8;
        FxrtPoolParams p = {.planes = 6, .in_size = {1, 9, 7}, .out_size = {1, 5, 4},
                            .kernel = {1, 3, 3}, .stride = {1, 2, 2}, .dilation = {1, 1, 1},
                            .pad_begin = {0, 1, 1}, .pad_end = {0, 1, 1},
                            .count_include_pad = variant / 2};
        enum { NX = 6 * 9 * 7, NY = 6 * 5 * 4 };
        uint8_t x[NX], got[NY], want[NY];
        float fx[NX], fy[NY];
        for (int i = 0; i < NX; i++)
            x[i] = (uint8_t)(rand() & 0xff);
        float xs = 0.0371f, ys = 0.0293f;
        uint8_t xzp_u = 131, yzp_u = 120;
        int8_t xzp_s = -7, yzp_s = 5;
        const void *xzp = t == FXRT_DTYPE_UINT8 ? (const void *)&xzp_u : (const void *)&xzp_s;
        const void *yzp = t == FXRT_DTYPE_UINT8 ? (const void *)&yzp_u : (const void *)&yzp_s;
        int32_t xz = t == FXRT_DTYPE_UINT8 ? xzp_u : xzp_s, yz = t == FXRT_DTYPE_UINT8 ? yzp_u : yzp_s;
        ck_assert_int_eq(fxrt_dequantize_linear(t, x, 1, 1, NX, &xs, xzp, fx), 0);
        fxrt_avgpool_f32(&p, fx, fy);
        ck_assert_int_eq(fxrt_quantize_linear(FXRT_DTYPE_FLOAT32, fy, 1, 1, NY, &ys, t, yzp, want), 0);
        fxrt_qlinear_avgpool(&p, t, x, xs, xz, ys, yz, got);
        ck_assert_int_eq(memcmp(got, want, NY), 0);
    }
}
END_TEST

/* A window that is the whole plane (DS-CNN's AveragePool; on AVX-512 hosts
 * 16 planes per vector, on AVX2 8, a gather per four taps): the same bytes
 * as the float path at every ISA cap, for plane sizes with and without a
 * partial last four taps and plane counts past whole vectors. */
/* The NHWC forms of both global averages (QLinearAveragePool over the
 * whole image, QLinearGlobalAveragePool) against the NCHW ones on the
 * transposed input, byte for byte, at every ISA level: channel counts
 * around the vectors' 8 and 16 and their groups of four, batch 2. */
START_TEST(test_avgpool_nhwc)
{
    srand(9);
    const int64_t shapes[][3] = {{64, 25, 5}, {7, 3, 3}, {16, 8, 8}, {37, 5, 5},
                                 {100, 1, 4}, {129, 2, 3}, {8, 7, 7}};
    enum { BATCH = 2, MAX_X = BATCH * 129 * 64, MAX_Y = BATCH * 129 };
    static uint8_t nchw[MAX_X], nhwc[MAX_X], want[MAX_Y], got[MAX_Y];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int variant = 0; variant < 2; variant++) {
            FxrtDType t = variant ? FXRT_DTYPE_INT8 : FXRT_DTYPE_UINT8;
            int64_t ch = shapes[s][0], h = shapes[s][1], w = shapes[s][2], size = h * w;
            ck_assert(BATCH * ch * size <= MAX_X);
            for (int64_t i = 0; i < BATCH * ch * size; i++)
                nchw[i] = (uint8_t)(rand() & 0xff);
            for (int64_t n = 0; n < BATCH; n++)
                for (int64_t c = 0; c < ch; c++)
                    for (int64_t i = 0; i < size; i++)
                        nhwc[(n * size + i) * ch + c] = nchw[(n * ch + c) * size + i];
            int32_t xz = variant ? -7 : 131, yz = variant ? 5 : 120;
            float xs = 0.0371f, ys = 0.00293f;
            FxrtPoolParams p = {.planes = BATCH * ch, .in_size = {1, h, w},
                                .out_size = {1, 1, 1}, .kernel = {1, h, w},
                                .stride = {1, 1, 1}, .dilation = {1, 1, 1}};
            fxrt_qlinear_limit_isa(0);
            fxrt_qlinear_avgpool(&p, t, nchw, xs, xz, ys, yz, want);
            for (int level = 2; level >= 0; level--) {
                fxrt_qlinear_limit_isa(level);
                memset(got, 0, sizeof got);
                fxrt_qlinear_avgpool_whole_nhwc(t, BATCH, size, ch, nhwc, xs, xz, ys, yz, got);
                ck_assert_msg(memcmp(got, want, (size_t)(BATCH * ch)) == 0,
                              "average pool, shape %zu type %d at ISA level %d", s, variant,
                              level);
            }
            fxrt_qlinear_limit_isa(2);
            fxrt_qlinear_global_avgpool(t, BATCH * ch, size, nchw, xs, xz, ys, yz, want);
            memset(got, 0, sizeof got);
            fxrt_qlinear_global_avgpool_nhwc(t, BATCH, size, ch, nhwc, xs, xz, ys, yz, got);
            ck_assert_msg(memcmp(got, want, (size_t)(BATCH * ch)) == 0,
                          "global average pool, shape %zu type %d", s, variant);
        }
}
END_TEST

START_TEST(test_avgpool_whole_plane)
{
    srand(8);
    const int64_t shapes[][3] = {{37, 25, 5}, {16, 2, 2}, {3, 1, 7}, {20, 4, 4}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int variant = 0; variant < 2; variant++) {
            FxrtDType t = variant ? FXRT_DTYPE_INT8 : FXRT_DTYPE_UINT8;
            int64_t planes = shapes[s][0], h = shapes[s][1], w = shapes[s][2];
            FxrtPoolParams p = {.planes = planes, .in_size = {1, h, w}, .out_size = {1, 1, 1},
                                .kernel = {1, h, w}, .stride = {1, 1, 1},
                                .dilation = {1, 1, 1}};
            enum { MAX_X = 37 * 25 * 5, MAX_Y = 37 };
            uint8_t x[MAX_X], got[MAX_Y], want[MAX_Y];
            float fx[MAX_X], fy[MAX_Y];
            int64_t nx = planes * h * w;
            for (int64_t i = 0; i < nx; i++)
                x[i] = (uint8_t)(rand() & 0xff);
            float xs = 0.0371f, ys = 0.00293f;
            uint8_t xzp_u = 131, yzp_u = 120;
            int8_t xzp_s = -7, yzp_s = 5;
            const void *xzp = t == FXRT_DTYPE_UINT8 ? (const void *)&xzp_u : (const void *)&xzp_s;
            const void *yzp = t == FXRT_DTYPE_UINT8 ? (const void *)&yzp_u : (const void *)&yzp_s;
            int32_t xz = t == FXRT_DTYPE_UINT8 ? xzp_u : xzp_s;
            int32_t yz = t == FXRT_DTYPE_UINT8 ? yzp_u : yzp_s;
            ck_assert_int_eq(fxrt_dequantize_linear(t, x, 1, 1, nx, &xs, xzp, fx), 0);
            fxrt_avgpool_f32(&p, fx, fy);
            ck_assert_int_eq(
                fxrt_quantize_linear(FXRT_DTYPE_FLOAT32, fy, 1, 1, planes, &ys, t, yzp, want), 0);
            for (int level = 2; level >= 0; level--) {
                fxrt_qlinear_limit_isa(level);
                memset(got, 0, sizeof got);
                fxrt_qlinear_avgpool(&p, t, x, xs, xz, ys, yz, got);
                ck_assert_msg(memcmp(got, want, (size_t)planes) == 0, "shape %zu at ISA level %d",
                              s, level);
            }
            fxrt_qlinear_limit_isa(2);
        }
}
END_TEST

START_TEST(test_gemm_strided_transposes)
{
    rng_state = 3;
    enum { M = 5, N = 7, K = 9 };
    uint8_t a[M * K], at[K * M];
    int8_t b[K * N], bt[N * K];
    int32_t bzp[N], want[M * N], got[M * N];
    for (int i = 0; i < M; i++)
        for (int p = 0; p < K; p++)
            at[p * M + i] = a[i * K + p] = (uint8_t)rnd_range(0, 255);
    for (int p = 0; p < K; p++)
        for (int j = 0; j < N; j++)
            bt[j * K + p] = b[p * N + j] = (int8_t)rnd_range(-128, 127);
    for (int j = 0; j < N; j++)
        bzp[j] = rnd_range(-5, 5);
    int32_t azp = 131;
    fxrt_gemm_integer(M, N, K, FXRT_DTYPE_UINT8, a, &azp, 1, FXRT_DTYPE_INT8, b, bzp, N, want);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            memset(got, 0x55, sizeof got);
            fxrt_gemm_integer_strided(M, N, K, FXRT_DTYPE_UINT8, ta ? at : a, ta ? 1 : K,
                                      ta ? M : 1, azp, FXRT_DTYPE_INT8, tb ? bt : b, tb ? 1 : N,
                                      tb ? K : 1, bzp, N, got);
            for (int i = 0; i < M * N; i++)
                ck_assert_msg(got[i] == want[i], "transA %d transB %d [%d]: %d, want %d", ta, tb,
                              i, got[i], want[i]);
        }
}
END_TEST

static Suite *qlinear_suite(void)
{
    Suite *s = suite_create("qlinear");
    TCase *tc = tcase_create("kernels");
    tcase_add_test(tc, test_add_hand);
    tcase_add_test(tc, test_mul_hand);
    tcase_add_test(tc, test_global_avgpool_hand);
    tcase_add_test(tc, test_concat_hand);
    tcase_add_test(tc, test_binary_broadcast_random);
    tcase_add_test(tc, test_binary_isa_levels);
    tcase_add_test(tc, test_binary_all_pairs);
    tcase_add_test(tc, test_binary_quotient_many_scales);
    tcase_add_test(tc, test_global_avgpool_random);
    tcase_add_test(tc, test_gemm_strided_transposes);
    tcase_add_test(tc, test_avgpool_float_path);
    tcase_add_test(tc, test_avgpool_whole_plane);
    tcase_add_test(tc, test_avgpool_nhwc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(qlinear_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
