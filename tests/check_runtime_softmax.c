/*
 * check_runtime_softmax.c - the softmax kernels against double-precision
 * references: fxrt_softmax_exp_f32's polynomial exp (accuracy over its whole
 * range, its limits, the same bits for every stride) and fxrt_softmax_f32
 * over outer x len x inner layouts, rows of any length, -inf and huge
 * inputs.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"

/* Distance in units of the last place of `want` (a float) of got. */
static double ulps(float got, double want)
{
    double ulp = ldexp(1.0, ilogb((float)want) - 23);
    return fabs((double)got - want) / ulp;
}

/* The bit pattern of v, for checks that two paths computed the same float. */
static uint32_t bits_of(float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

START_TEST(test_exp_accuracy_over_range)
{
    /* every argument from -87.3 to 0 in steps that hit both halves of each
     * ln 2 interval many times */
    enum { N = 200000 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(y);
    for (int i = 0; i < N; i++)
        x[i] = -87.3f * (float)i / (float)(N - 1);
    double sum_want = 0.0;
    for (int i = 0; i < N; i++)
        sum_want += exp((double)x[i]);
    float sum = fxrt_softmax_exp_f32(x, y, N, 1, 0.0f);
    double worst = 0.0;
    for (int i = 0; i < N; i++) {
        double u = ulps(y[i], exp((double)x[i]));
        worst = u > worst ? u : worst;
    }
    ck_assert_msg(worst <= 2.0, "exp is %.2f ulp off", worst);
    /* a float sum of 200000 terms: eight chains of 25000 */
    ck_assert_double_eq_tol(sum, sum_want, sum_want * 1e-4);
    free(x);
    free(y);
}
END_TEST

START_TEST(test_exp_shift_and_limits)
{
    /* x - shift: 0, the smallest normal result, below it, -inf, NaN */
    const float x[6] = {3.5f, 3.5f - 87.33f, 3.5f - 88.0f, -INFINITY, NAN, 2.0f};
    float y[6];
    float sum = fxrt_softmax_exp_f32(x, y, 6, 1, 3.5f);
    ck_assert_float_eq_tol(y[0], 1.0f, 1e-7f);
    double near_limit = exp((double)(x[1] - 3.5f));
    ck_assert_msg(y[1] > 0.0f && ulps(y[1], near_limit) <= 2.0, "exp(%.9g) = %g, want %g",
                  (double)(x[1] - 3.5f), y[1], near_limit);
    ck_assert_float_eq_tol(y[2], 0.0f, 1e-37f);
    ck_assert_uint_eq(bits_of(y[3]), bits_of(0.0f));
    ck_assert_msg(isnan(y[4]), "exp(NaN) = %g", y[4]);
    ck_assert_float_eq_tol(y[5], (float)exp(-1.5), 2e-7f);
    ck_assert_msg(isnan(sum), "a NaN term must make the sum NaN, not %g", sum);
}
END_TEST

START_TEST(test_exp_strided_matches_contiguous)
{
    enum { LEN = 37, STRIDE = 3 };
    float x[LEN], xs[LEN * STRIDE], y[LEN], ys[LEN * STRIDE];
    for (int l = 0; l < LEN; l++) {
        x[l] = -0.37f * (float)((l * 7) % LEN);
        xs[l * STRIDE] = x[l];
    }
    float sum = fxrt_softmax_exp_f32(x, y, LEN, 1, 0.25f);
    float sum_strided = fxrt_softmax_exp_f32(xs, ys, LEN, STRIDE, 0.25f);
    /* the same arithmetic in the same order, so the same bits */
    ck_assert_uint_eq(bits_of(sum_strided), bits_of(sum));
    for (int l = 0; l < LEN; l++)
        ck_assert_uint_eq(bits_of(ys[l * STRIDE]), bits_of(y[l]));
    ck_assert_double_eq_tol(sum, 2.518, 1e-3);
}
END_TEST

/* Softmax of x along the middle axis, in double after the float
 * subtraction of the maximum (which the kernel rounds too). */
static void softmax_ref(int64_t outer, int64_t len, int64_t inner, const float *x, double *y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xp = x + o * len * inner + i;
            double *yp = y + o * len * inner + i;
            double m = -INFINITY, s = 0.0;
            for (int64_t l = 0; l < len; l++)
                m = xp[l * inner] > m ? xp[l * inner] : m;
            for (int64_t l = 0; l < len; l++)
                s += exp((double)(xp[l * inner] - (float)m));
            for (int64_t l = 0; l < len; l++)
                yp[l * inner] = exp((double)(xp[l * inner] - (float)m)) / s;
        }
}

static void check_softmax(int64_t outer, int64_t len, int64_t inner, const float *x)
{
    int64_t n = outer * len * inner;
    float *y = malloc((size_t)n * sizeof *y);
    double *want = malloc((size_t)n * sizeof *want);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_nonnull(want);
    fxrt_softmax_f32(outer, len, inner, x, y);
    softmax_ref(outer, len, inner, x, want);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabs(y[i] - want[i]) <= 2e-6 * want[i] + 1e-30,
                      "%lld x %lld x %lld: element %lld is %.9g, want %.9g", (long long)outer,
                      (long long)len, (long long)inner, (long long)i, y[i], want[i]);
    free(y);
    free(want);
}

START_TEST(test_softmax_layouts)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 7, 1}, {2, 128, 1}, {4, 33, 5}, {1, 9, 16}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t n = shapes[s][0] * shapes[s][1] * shapes[s][2];
        float *x = malloc((size_t)n * sizeof *x);
        ck_assert_ptr_nonnull(x);
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)((i * 2654435761u) % 1000) / 50.0f - 10.0f;
        check_softmax(shapes[s][0], shapes[s][1], shapes[s][2], x);
        free(x);
    }
}
END_TEST

START_TEST(test_softmax_masked_and_large)
{
    /* a masked row (-inf terms get exactly 0), and ONNX's large_number row,
     * where exp without the max subtracted would overflow */
    const float x[2][4] = {{1.0f, -INFINITY, 2.0f, -INFINITY}, {10000.0f, 10001.0f, 10002.0f, 10003.0f}};
    float y[2][4];
    fxrt_softmax_f32(2, 4, 1, &x[0][0], &y[0][0]);
    ck_assert_uint_eq(bits_of(y[0][1]), bits_of(0.0f));
    ck_assert_uint_eq(bits_of(y[0][3]), bits_of(0.0f));
    check_softmax(2, 4, 1, &x[0][0]);
}
END_TEST

START_TEST(test_softmax_all_minus_inf_is_nan)
{
    const float x[3] = {-INFINITY, -INFINITY, -INFINITY};
    float y[3];
    fxrt_softmax_f32(1, 3, 1, x, y);
    for (int l = 0; l < 3; l++)
        ck_assert_msg(isnan(y[l]), "element %d is %g, not NaN", l, y[l]);
}
END_TEST

static Suite *softmax_suite(void)
{
    Suite *s = suite_create("runtime_softmax");
    TCase *e = tcase_create("exp");
    tcase_add_test(e, test_exp_accuracy_over_range);
    tcase_add_test(e, test_exp_shift_and_limits);
    tcase_add_test(e, test_exp_strided_matches_contiguous);
    suite_add_tcase(s, e);
    TCase *k = tcase_create("softmax");
    tcase_add_test(k, test_softmax_layouts);
    tcase_add_test(k, test_softmax_masked_and_large);
    tcase_add_test(k, test_softmax_all_minus_inf_is_nan);
    suite_add_tcase(s, k);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(softmax_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
