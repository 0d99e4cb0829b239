/*
 * check_runtime_epilogue.c - the GEMM epilogue's GELU against erf in double,
 * over rows of every length (so that the vector loops' remainders run too),
 * with the scale the linear fold leaves (0.5) and none (1).
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "runtime/fxrt.h"

static void check_gelu_rows(float scale)
{
    enum { ROWS = 5, LD = 70 };
    float c[ROWS * LD], x[ROWS * LD];
    for (int i = 0; i < ROWS * LD; i++)
        x[i] = c[i] = -6.5f + 13.0f * (float)((i * 37) % (ROWS * LD)) / (float)(ROWS * LD);
    const FxrtEpilogue ep = {.activation = FXRT_ACT_GELU, .alpha = scale};
    /* row r holds 13 * r + 5 values of the block, the rest stays untouched */
    for (int r = 0; r < ROWS; r++)
        fxrt_epilogue_apply_f32(&ep, r, 0, 1, 13 * r + 5, c + r * LD, LD);
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < LD; j++) {
            double v = x[r * LD + j];
            double want = j < 13 * r + 5 ? v * (erf(v / sqrt(2.0)) + 1.0) * scale : v;
            ck_assert_msg(fabs(c[r * LD + j] - want) <= 1e-6 * (fabs(v) + 1.0),
                          "scale %g, row %d, column %d: gelu(%.9g) = %.9g, want %.9g",
                          (double)scale, r, j, v, (double)c[r * LD + j], want);
        }
}

START_TEST(test_gelu_scaled) { check_gelu_rows(0.5f); }
END_TEST

START_TEST(test_gelu_unscaled) { check_gelu_rows(1.0f); }
END_TEST

static Suite *epilogue_suite(void)
{
    Suite *s = suite_create("runtime_epilogue");
    TCase *t = tcase_create("gelu");
    tcase_add_test(t, test_gelu_scaled);
    tcase_add_test(t, test_gelu_unscaled);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(epilogue_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
