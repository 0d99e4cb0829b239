/*
 * check_runtime_qgemm.c - the packed 8-bit GEMM (fxrt_qgemm) and its
 * fixed-point requantization against the reference path of
 * fxrt_nn_quant.c: fxrt_gemm_integer for the int32 product, then the bias
 * and fxrt_requantize's double arithmetic, then the clamp.  Integers, so
 * the results must be equal, not close: the shapes keep |acc + bias| below
 * 2^29, where the double product of the reference is exact (see
 * test_rescale_ties for what happens beyond).
 *
 * Shapes: m, n, k of 1, odd sizes, k not a multiple of 4 (the last k-group
 * read byte by byte), n not a multiple of 16 or 32 (padded panels), row
 * tails of every tile height, strided A and Y, packed weights above and
 * below the size that swaps the loop order; uint8 and int8 activations
 * with zero points, per-tensor and per-column scales, uint8, int8 and int32
 * outputs, clamp bounds, and the extreme values (-128, 127, 255
 * everywhere) that would catch int16 saturation or a wrong correction.
 * Built twice (tests/CMakeLists.txt); the host build runs every GEMM case
 * with the tiles capped at AVX-512 VNNI, AVX2 and portable C
 * (fxrt_qgemm_limit_isa), so one machine checks all three.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"

static uint32_t rng_state;

static uint32_t rnd_u32(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state;
}

/* Uniform in [0, 1). */
static double rnd_unit(void) { return (double)(rnd_u32() >> 8) / (double)(1u << 24); }

static int32_t rnd_range(int32_t lo, int32_t hi) /* inclusive */
{
    uint32_t hi_bits = rnd_u32() >> 16, lo_bits = rnd_u32() >> 16;
    uint32_t r = (hi_bits << 16) | lo_bits;
    return lo + (int32_t)(r % (uint32_t)(hi - lo + 1));
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* --- fxrt_quant_multiplier and fxrt_quant_rescale ------------------------ */

START_TEST(test_multiplier_range)
{
    rng_state = 11;
    for (int t = 0; t < 100000; t++) {
        /* Float scales over the whole accepted range, 2^-32 to just below 1. */
        float s = (float)ldexp(0.5 + 0.5 * rnd_unit(), -rnd_range(0, 31));
        if (!(s >= 0x1p-32f && s < 1.0f))
            continue;
        int32_t mult;
        int shift;
        ck_assert_int_eq(fxrt_quant_multiplier(s, &mult, &shift), 0);
        ck_assert_int_ge(mult, 1 << 30);
        ck_assert_int_ge(shift, 30);
        ck_assert_int_le(shift, 62);
        /* A float's 24 bits fit in the 31 of the multiplier: exact. */
        ck_assert(ldexp((double)mult, -shift) == (double)s);
    }
    int32_t mult;
    int shift;
    ck_assert_int_eq(fxrt_quant_multiplier(0x1p-32, &mult, &shift), 0);
    ck_assert_int_eq(mult, 1 << 30);
    ck_assert_int_eq(shift, 62);
    /* The largest double below 1 rounds up to 2^31, renormalized: 1 x 2^0. */
    ck_assert_int_eq(fxrt_quant_multiplier(nextafter(1.0, 0.0), &mult, &shift), 0);
    ck_assert_int_eq(mult, 1 << 30);
    ck_assert_int_eq(shift, 30);
    const double refused[] = {0.0, -0.5, 1.0, 2.0, 0x1p-33, nextafter(0x1p-32, 0.0), NAN, INFINITY};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        ck_assert_int_eq(fxrt_quant_multiplier(refused[i], &mult, &shift), -1);
}
END_TEST

/* v x multiplier / 2^shift rounded half to even, computed another way:
 * floor division, then the remainder against the half. */
static int64_t exact_rescale(int32_t v, int32_t mult, int shift)
{
    int64_t p = (int64_t)v * mult;
    int64_t unit = (int64_t)1 << shift;
    int64_t q = p / unit, r = p % unit;
    if (r < 0) {
        q -= 1;
        r += unit;
    }
    if (2 * r > unit || (2 * r == unit && (q & 1)))
        q += 1;
    return q;
}

/* How far v x s lies from the nearest .5 tie, relative to |v x s|, in
 * exact arithmetic on the fixed-point pair. */
static double tie_distance(int32_t v, int32_t mult, int shift)
{
    int64_t p = (int64_t)v * mult;
    int64_t unit = (int64_t)1 << shift;
    int64_t r = p % unit;
    r = r < 0 ? r + unit : r;
    double d = fabs((double)r - (double)(unit / 2)) / (double)unit;
    return d / fabs(ldexp((double)p, -shift));
}

START_TEST(test_rescale_exact)
{
    rng_state = 12;
    for (int t = 0; t < 1000000; t++) {
        float s = (float)ldexp(0.5 + 0.5 * rnd_unit(), -rnd_range(0, 31));
        int32_t mult;
        int shift;
        ck_assert_int_eq(fxrt_quant_multiplier(s, &mult, &shift), 0);
        int32_t v = (int32_t)rnd_u32();
        ck_assert_int_eq(fxrt_quant_rescale(v, mult, shift), exact_rescale(v, mult, shift));
        /* Below 2^29 the double product of ONNX's formula is exact too. */
        int32_t small = v / 8;
        ck_assert(fxrt_quant_rescale(small, mult, shift) == (int64_t)nearbyint((double)small * s));
    }
    /* Exact ties round to even, both signs. */
    int32_t mult;
    int shift;
    ck_assert_int_eq(fxrt_quant_multiplier(0.5, &mult, &shift), 0);
    const int32_t ties[][2] = {{1, 0}, {3, 2}, {5, 2}, {-1, 0}, {-3, -2}, {-5, -2}, {7, 4}};
    for (size_t i = 0; i < sizeof ties / sizeof ties[0]; i++)
        ck_assert_int_eq(fxrt_quant_rescale(ties[i][0], mult, shift), ties[i][1]);
    ck_assert_int_eq(fxrt_quant_rescale(INT32_MIN, mult, shift), -(1 << 30));
    ck_assert_int_eq(fxrt_quant_multiplier(nextafter(1.0, 0.0), &mult, &shift), 0);
    ck_assert_int_eq(fxrt_quant_rescale(INT32_MAX, mult, shift), INT32_MAX);
    ck_assert_int_eq(fxrt_quant_rescale(INT32_MIN, mult, shift), INT32_MIN);
}
END_TEST

/* fxrt_quant_rescale32 (the 32-bit cores' words) against the 64-bit
 * fxrt_quant_rescale: equal for every pair fxrt_quant_multiplier makes,
 * over the whole int32 range and every shift (30 after rounding up to a
 * power of two, 31 and 32 where the half and the tie straddle the two
 * words), and on values aimed at exact ties (v x mult a multiple of
 * 2^(shift - 1)) and one either side of them, where half to even decides. */
START_TEST(test_rescale32)
{
    rng_state = 14;
    int shifts_seen[63] = {0};
    for (int t = 0; t < 2000000; t++) {
        double s = t % 1000 == 0 ? nextafter(1.0, 0.0)
                                 : ldexp(0.5 + 0.5 * rnd_unit(), -rnd_range(0, 31));
        int32_t mult;
        int shift;
        ck_assert_int_eq(fxrt_quant_multiplier(s, &mult, &shift), 0);
        shifts_seen[shift] = 1;
        int32_t v = (int32_t)(rnd_u32() << 8 ^ rnd_u32());
        if (t % 4 == 1)
            v >>= rnd_range(0, 31); /* small magnitudes too */
        ck_assert_int_eq(fxrt_quant_rescale32(v, mult, shift), fxrt_quant_rescale(v, mult, shift));
    }
    for (int shift = 30; shift <= 62; shift++)
        ck_assert_msg(shifts_seen[shift], "shift %d not drawn", shift);
    /* Ties: mult = 2^30 and v = (2j + 1) x 2^(shift - 31) put v x mult
     * exactly on a half; v - 1 and v + 1 lie either side. */
    for (int shift = 31; shift <= 61; shift++)
        for (int j = -40; j <= 40; j++) {
            int64_t base = (int64_t)(2 * j + 1) * ((int64_t)1 << (shift - 31));
            for (int64_t d = -1; d <= 1; d++) {
                int64_t v = base + d;
                if (v < INT32_MIN || v > INT32_MAX)
                    continue;
                ck_assert_int_eq(fxrt_quant_rescale32((int32_t)v, 1 << 30, shift),
                                 fxrt_quant_rescale((int32_t)v, 1 << 30, shift));
            }
        }
    /* The range's ends with the largest multiplier (shift 30 comes only
     * with 2^30, a scale rounded up to 1). */
    const int32_t edges[] = {INT32_MIN, INT32_MIN + 1, -1, 0, 1, INT32_MAX};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        ck_assert_int_eq(fxrt_quant_rescale32(edges[i], 1 << 30, 30),
                         fxrt_quant_rescale(edges[i], 1 << 30, 30));
        for (int shift = 31; shift <= 62; shift++)
            ck_assert_int_eq(fxrt_quant_rescale32(edges[i], 0x7FFFFFFF, shift),
                             fxrt_quant_rescale(edges[i], 0x7FFFFFFF, shift));
    }
}
END_TEST

/* Over the whole int32 range and with double scales (not representable by
 * the pair), fxrt_quant_rescale may differ from rint(v x s) by one, but
 * only near a tie: within 1e-9 relative (the pair's own error is below
 * 2^-31 relative).  Measured with this generator: 605 of 10^7 pairs (v, s)
 * differ, each by one and within 1e-9 of a tie; with float scales (exact
 * pairs) over the whole int32 range, none of 10^7 differ, since the double
 * product is exact below 2^29 and a rounding of it beyond that must land
 * within 2^-53 of a tie to matter.  The share is asserted too, so that a
 * wrong rescale cannot hide behind the exception. */
START_TEST(test_rescale_ties)
{
    rng_state = 13;
    int trials = 1000000, differ = 0;
    for (int t = 0; t < trials; t++) {
        double s = ldexp(0.5 + 0.5 * rnd_unit() + 0x1p-40 * rnd_unit(), -rnd_range(0, 31));
        int32_t mult;
        int shift;
        if (fxrt_quant_multiplier(s, &mult, &shift) != 0)
            continue;
        int32_t v = (int32_t)rnd_u32();
        int64_t fixed = fxrt_quant_rescale(v, mult, shift);
        int64_t reference = (int64_t)nearbyint((double)v * s);
        if (fixed != reference) {
            differ++;
            ck_assert_int_le(llabs(fixed - reference), 1);
            ck_assert_double_le(tie_distance(v, mult, shift), 1e-9);
        }
    }
    ck_assert_int_le(differ, trials / 1000);
}
END_TEST

/* --- fxrt_qgemm against the reference ------------------------------------ */

typedef enum Fill { FILL_RANDOM, FILL_MAX, FILL_MIN, FILL_MIXED } Fill;

typedef struct Case {
    int64_t m, n, k;
    FxrtDType a_type;
    int32_t a_zp;
    int per_column; /* scales per column, else one */
    int bias;
    FxrtDType y_type;
    int32_t y_zp;
    int clamp; /* bounds tighter than the type's */
    int64_t lda_pad, ldy_pad;
    Fill fill;
    int weight_max; /* 0: weights across int8; else in [-weight_max, weight_max] */
} Case;

static int32_t a_value(const Case *c, int64_t i)
{
    int lo = c->a_type == FXRT_DTYPE_UINT8 ? 0 : -128, hi = lo + 255;
    switch (c->fill) {
    case FILL_MAX: return hi;
    case FILL_MIN: return lo;
    case FILL_MIXED: return i % 3 == 0 ? lo : hi;
    default: return rnd_range(lo, hi);
    }
}

static int8_t b_value(const Case *c, int64_t i)
{
    if (c->weight_max) {
        int wm = c->weight_max;
        switch (c->fill) {
        case FILL_MAX: return (int8_t)-wm;
        case FILL_MIN: return (int8_t)wm;
        case FILL_MIXED: return (int8_t)(i % 2 ? -wm : wm);
        default: return (int8_t)rnd_range(-wm, wm);
        }
    }
    switch (c->fill) {
    case FILL_MAX: return -128; /* against the largest A: the largest magnitude */
    case FILL_MIN: return 127;
    case FILL_MIXED: return i % 2 ? -128 : 127;
    default: return (int8_t)rnd_range(-128, 127);
    }
}

static void check_case(const Case *c, uint32_t seed)
{
    rng_state = seed;
    int64_t m = c->m, n = c->n, k = c->k, lda = k + c->lda_pad, ldy = n + c->ldy_pad;
    size_t ysize = fxrt_dtype_size(c->y_type);
    uint8_t *a = xmalloc((size_t)(m * lda));
    uint8_t *a_dense = xmalloc((size_t)(m * k));
    int8_t *b = xmalloc((size_t)(k * n));
    int32_t *bias = xmalloc((size_t)n * sizeof *bias);
    float *scale = xmalloc((size_t)n * sizeof *scale);
    int32_t *acc = xmalloc((size_t)(m * n) * sizeof *acc);
    uint8_t *expected = xmalloc((size_t)(m * n) * ysize);
    uint8_t *y = xmalloc((size_t)(m * ldy) * ysize);
    void *packed = xmalloc((size_t)fxrt_qgemm_packed_bytes(n, k));

    for (int64_t i = 0; i < m * lda; i++) /* the padding too: it must not be read */
        a[i] = (uint8_t)(c->a_type == FXRT_DTYPE_UINT8 ? a_value(c, i) : (int8_t)a_value(c, i));
    for (int64_t i = 0; i < m; i++)
        memcpy(a_dense + i * k, a + i * lda, (size_t)k);
    for (int64_t i = 0; i < k * n; i++)
        b[i] = b_value(c, i);
    for (int64_t j = 0; j < n; j++)
        bias[j] = c->bias ? rnd_range(-(1 << 20), 1 << 20) : 0;
    /* Scales that put typical outputs across the 8-bit range, some of them
     * saturating; every one has a fixed-point pair. */
    double typical = 128.0 * 80.0 * sqrt((double)k) + 1.0;
    int64_t scale_count = c->per_column ? n : 1;
    for (int64_t j = 0; j < scale_count; j++) {
        double s = (64.0 + 256.0 * rnd_unit()) / typical;
        scale[j] = (float)(s < 0.999 ? s : 0.999);
    }
    ck_assert_int_eq(fxrt_qgemm_pack_b(n, k, b, c->bias ? bias : NULL, scale, scale_count,
                                       c->a_type, c->a_zp, packed),
                     0);

    int32_t zero = 0;
    fxrt_gemm_integer(m, n, k, c->a_type, a_dense, &c->a_zp, 1, FXRT_DTYPE_INT8, b, &zero, 1,
                      acc);
    int32_t type_lo = c->y_type == FXRT_DTYPE_UINT8 ? 0 : -128, type_hi = type_lo + 255;
    FxrtQGemm q = {n, k, c->a_type, c->y_type, c->y_zp, type_lo, type_hi};
    if (c->clamp) { /* a fused Relu6-like window around the zero point */
        q.y_min = c->y_zp > type_lo + 10 ? c->y_zp : type_lo + 10;
        q.y_max = q.y_min + 90 < type_hi ? q.y_min + 90 : type_hi;
    }
    if (c->y_type == FXRT_DTYPE_INT32) {
        for (int64_t i = 0; i < m * n; i++)
            ((int32_t *)expected)[i] = acc[i] + (c->bias ? bias[i % n] : 0);
    } else {
        fxrt_requantize(m, n, 1, acc, c->bias ? bias : NULL, scale, scale_count, c->y_zp,
                        (FxrtDType)c->y_type, expected);
        for (int64_t i = 0; i < m * n; i++) {
            int32_t v = c->y_type == FXRT_DTYPE_UINT8 ? expected[i] : (int8_t)expected[i];
            v = v < q.y_min ? q.y_min : v > q.y_max ? q.y_max : v;
            if (c->y_type == FXRT_DTYPE_UINT8)
                expected[i] = (uint8_t)v;
            else
                ((int8_t *)expected)[i] = (int8_t)v;
        }
    }

    memset(y, 0xa5, (size_t)(m * ldy) * ysize);
    fxrt_qgemm(&q, m, a, lda, packed, y, ldy);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            int64_t got, want;
            if (c->y_type == FXRT_DTYPE_INT32) {
                got = ((int32_t *)y)[i * ldy + j];
                want = ((int32_t *)expected)[i * n + j];
            } else if (c->y_type == FXRT_DTYPE_UINT8) {
                got = y[i * ldy + j];
                want = expected[i * n + j];
            } else {
                got = ((int8_t *)y)[i * ldy + j];
                want = ((int8_t *)expected)[i * n + j];
            }
            ck_assert_msg(got == want,
                          "m=%lld n=%lld k=%lld a_type=%d y_type=%d fill=%d: y[%lld][%lld] = "
                          "%lld, expected %lld",
                          (long long)m, (long long)n, (long long)k, (int)c->a_type,
                          (int)c->y_type, (int)c->fill, (long long)i, (long long)j,
                          (long long)got, (long long)want);
        }
        for (int64_t j = n * (int64_t)ysize; j < ldy * (int64_t)ysize; j++)
            ck_assert_msg(y[i * ldy * (int64_t)ysize + j] == 0xa5, "row %lld: padding written",
                          (long long)i);
    }
    free(a);
    free(a_dense);
    free(b);
    free(bias);
    free(scale);
    free(acc);
    free(expected);
    free(y);
    free(packed);
}

static const FxrtDType a_types[] = {FXRT_DTYPE_UINT8, FXRT_DTYPE_INT8};
static const FxrtDType y_types[] = {FXRT_DTYPE_UINT8, FXRT_DTYPE_INT8, FXRT_DTYPE_INT32};

static Case basic(int64_t m, int64_t n, int64_t k, FxrtDType a_type, FxrtDType y_type)
{
    Case c = {m, n, k, a_type, 0, 0, 1, y_type, 0, 0, 0, 0, FILL_RANDOM, 0};
    c.a_zp = a_type == FXRT_DTYPE_UINT8 ? 131 : -7;
    c.y_zp = y_type == FXRT_DTYPE_UINT8 ? 120 : y_type == FXRT_DTYPE_INT8 ? -3 : 0;
    return c;
}

/* Every small m, n, k: all tile heights, panel tails and k-group tails. */
START_TEST(test_small_shapes)
{
    const int64_t sizes_m[] = {1, 2, 3, 4, 5, 6, 7, 13};
    const int64_t sizes_n[] = {1, 3, 15, 16, 17, 31, 32, 33, 48};
    const int64_t sizes_k[] = {1, 2, 3, 4, 5, 7, 8, 9, 63};
    uint32_t seed = 100;
    for (size_t im = 0; im < sizeof sizes_m / sizeof sizes_m[0]; im++)
        for (size_t in = 0; in < sizeof sizes_n / sizeof sizes_n[0]; in++)
            for (size_t ik = 0; ik < sizeof sizes_k / sizeof sizes_k[0]; ik++) {
                Case c = basic(sizes_m[im], sizes_n[in], sizes_k[ik], a_types[seed % 2],
                               y_types[seed % 3]);
                c.per_column = (int)(seed / 2 % 2);
                check_case(&c, seed++);
            }
}
END_TEST

/* Every activation type, output type, scale kind, bias and clamp. */
START_TEST(test_types_and_options)
{
    uint32_t seed = 200;
    for (int ia = 0; ia < 2; ia++)
        for (int iy = 0; iy < 3; iy++)
            for (int opts = 0; opts < 8; opts++) {
                Case c = basic(11, 37, 45, a_types[ia], y_types[iy]);
                c.per_column = opts & 1;
                c.bias = (opts >> 1) & 1;
                c.clamp = (opts >> 2) & 1;
                c.lda_pad = opts % 3;
                c.ldy_pad = opts % 5;
                check_case(&c, seed++);
            }
}
END_TEST

/* Zero points across their range, including the ends. */
START_TEST(test_zero_points)
{
    const int32_t u8_zps[] = {0, 1, 128, 254, 255}, i8_zps[] = {-128, -1, 0, 1, 127};
    const int32_t y_zps_u8[] = {0, 255, 77}, y_zps_i8[] = {-128, 127, 5};
    uint32_t seed = 300;
    for (int ia = 0; ia < 2; ia++)
        for (int z = 0; z < 5; z++)
            for (int iy = 0; iy < 2; iy++)
                for (int yz = 0; yz < 3; yz++) {
                    Case c = basic(7, 21, 30, a_types[ia], y_types[iy]);
                    c.a_zp = ia == 0 ? u8_zps[z] : i8_zps[z];
                    c.y_zp = iy == 0 ? y_zps_u8[yz] : y_zps_i8[yz];
                    c.per_column = z % 2;
                    check_case(&c, seed++);
                }
}
END_TEST

/* Every value at an end of its range: the largest products, summed over a
 * long k, and the zero point that makes A - a_zp reach -255 or 255. */
START_TEST(test_extremes)
{
    const Fill fills[] = {FILL_MAX, FILL_MIN, FILL_MIXED};
    uint32_t seed = 400;
    for (int ia = 0; ia < 2; ia++)
        for (int f = 0; f < 3; f++)
            for (int iy = 0; iy < 3; iy++)
                for (int zp_end = 0; zp_end < 2; zp_end++) {
                    Case c = basic(9, 35, 1157, a_types[ia], y_types[iy]);
                    c.fill = fills[f];
                    if (ia == 0)
                        c.a_zp = zp_end ? 255 : 0;
                    else
                        c.a_zp = zp_end ? 127 : -128;
                    check_case(&c, seed++);
                }
}
END_TEST

/* Conv-like shapes of the benchmarks, shrunk in m, with B both below and
 * above the size at which the column blocks become the outer loop. */
START_TEST(test_large_shapes)
{
    const int64_t shapes[][3] = {
        {50, 64, 576}, {23, 128, 1152}, {49, 512, 4608}, {1, 1000, 512}, {3, 1001, 515}};
    uint32_t seed = 500;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ia = 0; ia < 2; ia++) {
            Case c = basic(shapes[s][0], shapes[s][1], shapes[s][2], a_types[ia],
                           y_types[(s + (size_t)ia) % 3]);
            c.per_column = ia;
            check_case(&c, seed++);
        }
}
END_TEST

/* The tiles requantize through a float product away from ties and in
 * 64-bit integers near them (fxrt_quant_x86.h): accumulators from 2^21 to
 * past 2^29, and multipliers with more than 24 significant bits (written
 * into the blob: a double scale's, which fxrt_quant_multiplier also makes),
 * must give fxrt_quant_rescale's bytes exactly.  The reference is the fixed
 * point itself, since fxrt_requantize's double product is inexact there. */
START_TEST(test_requantize_wide)
{
    rng_state = 600;
    const int64_t m = 7, n = 37, k = 20000;
    /* The last row is the zero point: its accumulators are the biases. */
    const uint8_t row_value[7] = {0, 1, 3, 17, 100, 255, 2};
    uint8_t *a = xmalloc((size_t)(m * k));
    int8_t *b = xmalloc((size_t)(k * n));
    int32_t *bias = xmalloc((size_t)n * sizeof *bias);
    float *scale = xmalloc((size_t)n * sizeof *scale);
    int32_t *acc = xmalloc((size_t)(m * n) * sizeof *acc);
    uint8_t *y = xmalloc((size_t)(m * n));
    int64_t packed_bytes = fxrt_qgemm_packed_bytes(n, k);
    void *packed = xmalloc((size_t)packed_bytes);
    for (int64_t i = 0; i < m; i++)
        memset(a + i * k, row_value[i], (size_t)k);
    /* Half the columns at the largest magnitude, half random. */
    for (int64_t i = 0; i < k * n; i++)
        b[i] = i % n < n / 2 ? -128 : (int8_t)rnd_range(-128, 127);
    for (int64_t j = 0; j < n; j++) {
        bias[j] = rnd_range(-1000, 1000);
        scale[j] = (float)ldexp(0.5 + 0.5 * rnd_unit(), -(int)(8 + j % 24));
    }
    /* Beyond 2^29 the double product can round onto a tie: this one's
     * exact value rounds to 35, its double product to 34. */
    const int32_t near_tie = 1799789345;
    bias[0] = near_tie;
    scale[0] = 0x1.4951c2p-26f;
    ck_assert(nearbyint((double)near_tie * (double)scale[0]) == 34.0);
    const int32_t a_zp = 2, y_zp = 100;
    ck_assert_int_eq(fxrt_qgemm_pack_b(n, k, b, bias, scale, n, FXRT_DTYPE_UINT8, a_zp, packed),
                     0);
    /* After the weights, n padded to 16 int32 each of seed, multiplier and
     * shift (fxrt_nn.h); odd columns get 31 significant bits. */
    int64_t n_pad = (n + 15) / 16 * 16, k_pad = (k + 3) / 4 * 4;
    ck_assert_int_eq(packed_bytes, n_pad * k_pad + (3 * n_pad + n_pad / 16) * 4);
    uint8_t *mult_at = (uint8_t *)packed + n_pad * k_pad + n_pad * (int64_t)sizeof(int32_t);
    int32_t mult[37], shift[37];
    for (int64_t j = 0; j < n; j++) {
        memcpy(&mult[j], mult_at + j * 4, 4);
        memcpy(&shift[j], mult_at + (n_pad + j) * 4, 4);
        if (j % 2) {
            mult[j] |= 0x55;
            memcpy(mult_at + j * 4, &mult[j], 4);
        }
    }
    int32_t zero = 0;
    fxrt_gemm_integer(m, n, k, FXRT_DTYPE_UINT8, a, &a_zp, 1, FXRT_DTYPE_INT8, b, &zero, 1, acc);
    FxrtQGemm q = {n, k, FXRT_DTYPE_UINT8, FXRT_DTYPE_UINT8, y_zp, 0, 255};
    fxrt_qgemm(&q, m, a, k, packed, y, n);
    int unsaturated = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int32_t v = (int32_t)((uint32_t)acc[i * n + j] + (uint32_t)bias[j]);
            int64_t want = fxrt_quant_rescale(v, mult[j], shift[j]) + y_zp;
            want = want < 0 ? 0 : want > 255 ? 255 : want;
            unsaturated += want > 0 && want < 255;
            ck_assert_msg(y[i * n + j] == want, "y[%lld][%lld] = %d, expected %lld (acc %d)",
                          (long long)i, (long long)j, y[i * n + j], (long long)want, v);
        }
    ck_assert_int_gt(unsaturated, m * n / 4);
    ck_assert_int_eq(y[(m - 1) * n], 35 + y_zp);
    free(a);
    free(b);
    free(bias);
    free(scale);
    free(acc);
    free(y);
    free(packed);
}
END_TEST

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#include <fenv.h>

#include "runtime/fxrt_quant_x86.h"

enum { LANES = 16 };

/* One vector of each width through the scaled requantization. */
FXRT_QUANT_AVX512_TARGET static void scaled_avx512(const int32_t *acc, const int32_t *mult,
                                                   const int32_t *shift, int32_t zp,
                                                   int32_t y_min, int32_t y_max, int32_t *y)
{
    FxrtQuantScaleAvx512 s = fxrt_quant_scale_avx512(_mm512_loadu_si512(mult),
                                                     _mm512_loadu_si512(shift), zp, y_min, y_max);
    _mm512_storeu_si512(y, fxrt_quant_requantize_scaled_avx512(_mm512_loadu_si512(acc), &s));
}

FXRT_QUANT_AVX2_TARGET static void scaled_avx2(const int32_t *acc, const int32_t *mult,
                                               const int32_t *shift, int32_t zp, int32_t y_min,
                                               int32_t y_max, int32_t *y)
{
    for (int half = 0; half < 2; half++) {
        const __m256i *at = (const __m256i *)(const void *)(acc + 8 * half);
        FxrtQuantScaleAvx2 s = fxrt_quant_scale_avx2(
            _mm256_loadu_si256((const __m256i *)(const void *)(mult + 8 * half)),
            _mm256_loadu_si256((const __m256i *)(const void *)(shift + 8 * half)), zp, y_min,
            y_max);
        _mm256_storeu_si256((__m256i *)(void *)(y + 8 * half),
                            fxrt_quant_requantize_scaled_avx2(_mm256_loadu_si256(at), &s));
    }
}

/* The scaled forms take a float product and fall back to the 64-bit path
 * only near a half-integer (fxrt_quant_x86.h): every lane must equal
 * fxrt_quant_rescale's clamped result, for accumulators aimed at ties
 * (exact ones, and 2^-24 .. 2^-9 away on either side, across the band's
 * edge), at the window's bounds, and over the whole int32 range; for float
 * multipliers and 31-bit ones; and for AVX2, whose products round by the
 * caller's MXCSR, in all four rounding modes. */
START_TEST(test_requantize_scaled_lanes)
{
    int avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
    if (!avx2)
        return;
    rng_state = 700;
    static const int modes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    int64_t near_tie = 0, lanes = 0;
    for (int t = 0; t < 60000; t++) {
        int32_t acc[LANES], mult[LANES], shift[LANES], got[LANES];
        int is_uint8 = t % 2;
        int32_t zp = is_uint8 ? rnd_range(0, 255) : rnd_range(-128, 127);
        int32_t y_min = is_uint8 ? 0 : -128, y_max = is_uint8 ? 255 : 127;
        if (t % 5 == 0) /* a fused Relu: the clamp at the zero point */
            y_min = zp;
        for (int j = 0; j < LANES; j++) {
            double real = ldexp(0.5 + 0.5 * rnd_unit(), -rnd_range(1, 24));
            int s;
            ck_assert_int_eq(fxrt_quant_multiplier(real, &mult[j], &s), 0);
            if (j % 2) /* a float scale's multiplier has its low 7 bits zero */
                mult[j] &= ~0x7f;
            shift[j] = s;
            double scale = ldexp((double)mult[j], -s);
            int kind = (int)(rnd_u32() % 4);
            if (kind == 0) { /* the whole range */
                acc[j] = (int32_t)rnd_u32();
            } else if (kind == 1) { /* around the window's bounds */
                int32_t bound = rnd_u32() % 2 ? y_max - zp : y_min - zp;
                double target = bound + 2.0 * rnd_unit() - 1.0;
                acc[j] = (int32_t)fmin(fmax(nearbyint(target / scale), INT32_MIN), INT32_MAX);
            } else { /* aimed at a tie inside the window: exactly, or from either side */
                double offset = kind == 3 ? 0.0
                                          : ldexp(rnd_u32() % 2 ? 1.0 : -1.0, -rnd_range(9, 24));
                double target = rnd_range(y_min - zp, y_max - zp) + 0.5 + offset;
                acc[j] = (int32_t)fmin(fmax(nearbyint(target / scale), INT32_MIN), INT32_MAX);
            }
            near_tie += tie_distance(acc[j], mult[j], s) * fabs((double)acc[j] * scale) < 0x1p-11;
        }
        /* Ways 0-3: AVX2 in each rounding mode; 4: AVX-512. */
        for (int way = 0; way < (avx512 ? 5 : 4); way++) {
            if (way < 4) {
                ck_assert_int_eq(fesetround(modes[way]), 0);
                scaled_avx2(acc, mult, shift, zp, y_min, y_max, got);
                ck_assert_int_eq(fesetround(FE_TONEAREST), 0);
            } else {
                scaled_avx512(acc, mult, shift, zp, y_min, y_max, got);
            }
            for (int j = 0; j < LANES; j++) {
                int64_t want = fxrt_quant_rescale(acc[j], mult[j], shift[j]) + zp;
                want = want < y_min ? y_min : want > y_max ? y_max : want;
                ck_assert_msg(got[j] == want,
                              "way %d lane %d: acc %d mult %d shift %d zp %d -> %d, expected %lld",
                              way, j, acc[j], mult[j], shift[j], zp, got[j], (long long)want);
            }
        }
        lanes += LANES;
    }
    /* The aimed accumulators really reach the band (a quarter of lanes
     * aim within 2^-9, some at exact ties). */
    ck_assert_int_gt(near_tie, lanes / 20);
}
END_TEST
#endif

/* A scale without a fixed-point pair refuses the packing. */
START_TEST(test_pack_refuses_scale)
{
    int8_t b[6] = {1, 2, 3, 4, 5, 6};
    float scales[3] = {0.25f, 1.5f, 0.5f};
    void *packed = xmalloc((size_t)fxrt_qgemm_packed_bytes(3, 2));
    ck_assert_int_eq(fxrt_qgemm_pack_b(3, 2, b, NULL, scales, 3, FXRT_DTYPE_UINT8, 0, packed), -1);
    scales[1] = 0.0f;
    ck_assert_int_eq(fxrt_qgemm_pack_b(3, 2, b, NULL, scales, 3, FXRT_DTYPE_UINT8, 0, packed), -1);
    scales[1] = 0.75f;
    ck_assert_int_eq(fxrt_qgemm_pack_b(3, 2, b, NULL, scales, 3, FXRT_DTYPE_UINT8, 0, packed), 0);
    ck_assert_int_eq(fxrt_qgemm_pack_b(3, 2, b, NULL, NULL, 0, FXRT_DTYPE_INT8, 3, packed), 0);
    free(packed);
}
END_TEST

/* 7-bit weights (|b| <= 64, pairs up to 128) take the AVX2 vpmaddubsw
 * tile, exact only because no pair sum can leave int16: the largest
 * products (A 255 against -64 and 64 pairs, summed over a long k), every
 * tile height and tail, and a weight of 65 among them, which must send the
 * product back to the int16 tile with the same bytes. */
START_TEST(test_seven_bit_weights)
{
    const Fill fills[] = {FILL_RANDOM, FILL_MAX, FILL_MIN, FILL_MIXED};
    const int64_t sizes_m[] = {1, 5, 6, 7, 13};
    const int64_t sizes_n[] = {3, 16, 17, 40};
    uint32_t seed = 700;
    for (int ia = 0; ia < 2; ia++)
        for (int f = 0; f < 4; f++)
            for (size_t im = 0; im < sizeof sizes_m / sizeof sizes_m[0]; im++)
                for (size_t in = 0; in < sizeof sizes_n / sizeof sizes_n[0]; in++) {
                    Case c = basic(sizes_m[im], sizes_n[in], f == 0 ? 45 : 1157, a_types[ia],
                                   y_types[seed % 3]);
                    c.fill = fills[f];
                    c.weight_max = seed % 7 == 0 ? 65 : 64;
                    c.a_zp = ia == 0 ? (f == 0 ? 131 : 0) : (f == 0 ? -7 : -128);
                    c.per_column = (int)(seed % 2);
                    check_case(&c, seed++);
                }
}
END_TEST

static void use_vnni(void) { fxrt_qgemm_limit_isa(2); }
static void use_avx2(void) { fxrt_qgemm_limit_isa(1); }
static void use_portable(void) { fxrt_qgemm_limit_isa(0); }

static Suite *qgemm_suite(void)
{
    Suite *s = suite_create("qgemm");
    TCase *rescale = tcase_create("rescale");
    tcase_set_timeout(rescale, 120);
    tcase_add_test(rescale, test_multiplier_range);
    tcase_add_test(rescale, test_rescale_exact);
    tcase_add_test(rescale, test_rescale_ties);
    tcase_add_test(rescale, test_rescale32);
    tcase_add_test(rescale, test_pack_refuses_scale);
#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
    tcase_add_test(rescale, test_requantize_scaled_lanes);
#endif
    suite_add_tcase(s, rescale);
    const char *names[] = {"vnni", "avx2", "portable"};
    void (*caps[])(void) = {use_vnni, use_avx2, use_portable};
    for (int i = 0; i < 3; i++) {
        TCase *tc = tcase_create(names[i]);
        tcase_set_timeout(tc, 300);
        tcase_add_checked_fixture(tc, caps[i], use_vnni);
        tcase_add_test(tc, test_small_shapes);
        tcase_add_test(tc, test_types_and_options);
        tcase_add_test(tc, test_zero_points);
        tcase_add_test(tc, test_extremes);
        tcase_add_test(tc, test_large_shapes);
        tcase_add_test(tc, test_requantize_wide);
        tcase_add_test(tc, test_seven_bit_weights);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(qgemm_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
