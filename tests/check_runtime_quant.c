/*
 * check_runtime_quant.c - QuantizeLinear and DequantizeLinear of 8-bit data
 * (fxrt_quantize_linear, fxrt_dequantize_linear) at every ISA level the host
 * has (AVX-512, AVX2, portable C through fxrt_quantize_limit_isa), compared
 * exactly with a scalar statement of ONNX's formulas written here:
 *
 *     quantize:   y = saturate(round_half_even(x / scale) + zero_point),
 *                 the division in float32, NaN -> zero_point
 *     dequantize: y = (x - zero_point) * scale in float32
 *
 * Inputs cover exact ties (x / scale = k + 0.5 for both parities), values
 * one ulp either side of a tie, saturation both ways, infinities, NaN, -0,
 * denormals, every row length from 1 to 70 (the vector tails) and per-axis
 * scales.  Built for the host and the portable runtime.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"

static const int isa_levels[] = {2, 1, 0};

static uint32_t rng_state;

static uint32_t rnd_u32(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state;
}

/* Half to even without the FPU's rounding mode: a statement of the rule. */
static double ref_round_half_even(float v)
{
    double f = floor((double)v), d = (double)v - f;
    if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0.0))
        f += 1.0;
    return f;
}

static int32_t ref_quantize(float x, float scale, int32_t zp, int lo, int hi)
{
    float r = x / scale; /* float32, as the reference for float32 data */
    if (r != r)
        return zp;
    double q = isinf(r) ? (double)r : ref_round_half_even(r) + zp;
    return (int32_t)(q < lo ? lo : q > hi ? hi : q);
}

/* n floats around the quantization grid of scale: ties, their neighbours,
 * saturation and special values. */
static void fill_values(float *x, int n, float scale)
{
    for (int i = 0; i < n; i++) {
        uint32_t r = rnd_u32() >> 8;
        float k = (float)((int32_t)(r % 601) - 300); /* beyond both ranges */
        switch (r % 9) {
        case 0: x[i] = (k + 0.5f) * scale; break; /* a tie (exact when representable) */
        case 1: x[i] = nextafterf((k + 0.5f) * scale, INFINITY); break;
        case 2: x[i] = nextafterf((k + 0.5f) * scale, -INFINITY); break;
        case 3: x[i] = k * scale; break;
        case 4: x[i] = (float)((int32_t)(r % 2000001) - 1000000) * 1e-3f; break;
        default: x[i] = ((float)(r % 100000) / 100000.0f - 0.5f) * 600.0f * scale; break;
        }
    }
    static const float special[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, FLT_MAX, -FLT_MAX,
                                    FLT_MIN / 4.0f, 1e30f, -1e30f};
    for (int i = 0; i < n; i += 7)
        x[i] = special[(unsigned)i / 7u % (sizeof special / sizeof special[0])];
}

START_TEST(test_quantize_rows)
{
    enum { N = 70 };
    rng_state = 7u;
    float x[N];
    uint8_t got[N + 16], want[N];
    static const float scales[] = {0.5f, 0.0078125f, 0.0237f, 1.0f / 255.0f, 3.0f};
    for (int l = 0; l < 3; l++) {
        fxrt_quantize_limit_isa(isa_levels[l]);
        for (int signed_out = 0; signed_out < 2; signed_out++)
            for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++)
                for (int n = 1; n <= N; n++) {
                    FxrtDType yt = signed_out ? FXRT_DTYPE_INT8 : FXRT_DTYPE_UINT8;
                    int lo = signed_out ? -128 : 0, hi = signed_out ? 127 : 255;
                    int32_t zp = signed_out ? (int32_t)(rnd_u32() >> 8) % 256 - 128
                                            : (int32_t)(rnd_u32() >> 8) % 256;
                    uint8_t zp_byte = (uint8_t)zp;
                    fill_values(x, n, scales[si]);
                    memset(got, 0xA5, sizeof got);
                    ck_assert_int_eq(fxrt_quantize_linear(FXRT_DTYPE_FLOAT32, x, 1, 1, (size_t)n,
                                                          &scales[si], yt, &zp_byte, got),
                                     0);
                    for (int i = 0; i < n; i++) {
                        want[i] = (uint8_t)ref_quantize(x[i], scales[si], zp, lo, hi);
                        ck_assert_msg(got[i] == want[i],
                                      "isa %d %s scale %g n %d [%d]: x %a -> %d, want %d",
                                      isa_levels[l], signed_out ? "int8" : "uint8",
                                      (double)scales[si], n, i, (double)x[i], got[i], want[i]);
                    }
                    for (int i = n; i < n + 16; i++) /* nothing past the row */
                        ck_assert_int_eq(got[i], 0xA5);
                }
    }
    fxrt_quantize_limit_isa(2);
}
END_TEST

START_TEST(test_quantize_per_axis)
{
    /* (outer 3, channels 4, inner 21): one scale and zero point per channel */
    enum { O = 3, C = 4, I = 21 };
    rng_state = 11u;
    float x[O * C * I];
    static const float scale[C] = {0.1f, 0.02f, 0.7f, 0.0039f};
    static const uint8_t zp[C] = {0, 128, 255, 17};
    uint8_t got[O * C * I];
    fill_values(x, O * C * I, 0.05f);
    for (int l = 0; l < 3; l++) {
        fxrt_quantize_limit_isa(isa_levels[l]);
        ck_assert_int_eq(fxrt_quantize_linear(FXRT_DTYPE_FLOAT32, x, O, C, I, scale,
                                              FXRT_DTYPE_UINT8, zp, got),
                         0);
        for (int o = 0; o < O; o++)
            for (int c = 0; c < C; c++)
                for (int i = 0; i < I; i++) {
                    int at = (o * C + c) * I + i;
                    ck_assert_int_eq(got[at], ref_quantize(x[at], scale[c], zp[c], 0, 255));
                }
    }
    fxrt_quantize_limit_isa(2);
}
END_TEST

START_TEST(test_dequantize_rows)
{
    enum { N = 70 };
    rng_state = 3u;
    uint8_t x[N];
    float got[N + 16];
    static const float scales[] = {0.5f, 0.0078125f, 0.0237f, 1.0f / 255.0f, 3.0e-7f};
    for (int l = 0; l < 3; l++) {
        fxrt_quantize_limit_isa(isa_levels[l]);
        for (int signed_in = 0; signed_in < 2; signed_in++)
            for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++)
                for (int n = 1; n <= N; n++) {
                    for (int i = 0; i < n; i++)
                        x[i] = (uint8_t)(rnd_u32() >> 24);
                    uint8_t zp_byte = (uint8_t)(rnd_u32() >> 24);
                    float zp = signed_in ? (float)(int8_t)zp_byte : (float)zp_byte;
                    for (int i = 0; i < n + 16; i++)
                        got[i] = -1234.5f;
                    ck_assert_int_eq(fxrt_dequantize_linear(signed_in ? FXRT_DTYPE_INT8
                                                                      : FXRT_DTYPE_UINT8,
                                                            x, 1, 1, (size_t)n, &scales[si],
                                                            &zp_byte, got),
                                     0);
                    for (int i = 0; i < n; i++) {
                        float v = signed_in ? (float)(int8_t)x[i] : (float)x[i];
                        float want = (v - zp) * scales[si];
                        ck_assert_msg(memcmp(&got[i], &want, sizeof want) == 0,
                                      "isa %d n %d [%d]: %a, want %a", isa_levels[l], n, i,
                                      (double)got[i], (double)want);
                    }
                    for (int i = n; i < n + 16; i++)
                        ck_assert(got[i] == -1234.5f);
                }
    }
    fxrt_quantize_limit_isa(2);
}
END_TEST

static Suite *quant_suite(void)
{
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("rows");
    tcase_add_test(tc, test_quantize_rows);
    tcase_add_test(tc, test_quantize_per_axis);
    tcase_add_test(tc, test_dequantize_rows);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(quant_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
