/*
 * check_runtime_epilogue.c - the GEMM epilogue: its GELU against erf in
 * double, over rows of every length (so that the vector loops' remainders
 * run too), with the scale the linear fold leaves (0.5) and none (1), and
 * on NaN, infinities and erf's clamp; its
 * Sigmoid and SiLU with bias and residual on contiguous and strided
 * blocks, and on NaN, infinities and exp's underflow; and a
 * product large enough for BLAS, whose bias goes into C before the call,
 * against a double-precision product with bias, residual and activation.
 * The activations run at every vector width the host has.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"

/* Every test runs at each vector width the host has: AVX-512, AVX2 and the
 * portable loops (fxrt_epilogue_limit_isa). */
static const int isa_levels[] = {2, 1, 0};

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

START_TEST(test_gelu_scaled)
{
    for (int l = 0; l < 3; l++) {
        fxrt_epilogue_limit_isa(isa_levels[l]);
        check_gelu_rows(0.5f);
    }
    fxrt_epilogue_limit_isa(2);
}
END_TEST

START_TEST(test_gelu_unscaled)
{
    for (int l = 0; l < 3; l++) {
        fxrt_epilogue_limit_isa(isa_levels[l]);
        check_gelu_rows(1.0f);
    }
    fxrt_epilogue_limit_isa(2);
}
END_TEST

/* GELU at erf's clamp (|v / sqrt 2| = 4), beyond it, and on NaN and the
 * infinities, 37 values so that the vector loops' tails see them too: NaN
 * stays NaN, +inf is +inf, and -inf is NaN as the unfused chain's
 * -inf * (erf(-inf) + 1) = -inf * 0. */
START_TEST(test_gelu_special_values)
{
    const float specials[] = {NAN,    INFINITY, -INFINITY, 0.0f,   -0.0f,  5.65685f, -5.65685f,
                              5.6569f, -5.6569f, 30.0f,    -30.0f, 1e30f, -1e30f,   1e-40f};
    enum { LEN = 37 };
    for (int l = 0; l < 3; l++) {
        fxrt_epilogue_limit_isa(isa_levels[l]);
        float c[LEN];
        for (int i = 0; i < LEN; i++)
            c[i] = specials[i % 14];
        const FxrtEpilogue ep = {.activation = FXRT_ACT_GELU, .alpha = 0.5f};
        fxrt_epilogue_apply_f32(&ep, 0, 0, 1, LEN, c, LEN);
        for (int i = 0; i < LEN; i++) {
            double v = specials[i % 14];
            double want = v == -INFINITY ? NAN : 0.5 * v * (erf(v / sqrt(2.0)) + 1.0);
            if (isnan(want))
                ck_assert_msg(isnan(c[i]), "isa %d: gelu(%g) = %g, want NaN", isa_levels[l], v,
                              (double)c[i]);
            else if (isinf(want))
                ck_assert_msg(c[i] == (float)want, "isa %d: gelu(%g) = %g, want %g",
                              isa_levels[l], v, (double)c[i], want);
            else
                ck_assert_msg(fabs(c[i] - want) <= 1e-6 * (fabs(v) + 1.0),
                              "isa %d: gelu(%g) = %.9g, want %.9g", isa_levels[l], v,
                              (double)c[i], want);
        }
    }
    fxrt_epilogue_limit_isa(2);
}
END_TEST

/* Sigmoid and SiLU (the polynomial exp of fxrt_math.h) with a per-column
 * bias and a residual added before or after the activation, on a block of
 * `rows` rows of `cols` values with row stride ld: ld == cols is the
 * one-pass path the NCHWc kernels' [pixels x 8] blocks take, ld > cols the
 * row-by-row one.  Against the formulas in double, over inputs from -90 to
 * 90 (exp underflows below -87) and every remainder of the vector loops. */
static void check_sigmoid_family(FxrtActivation act, int rows, int cols, int ld, int after)
{
    enum { MAX = 9 * 70 };
    float c[MAX], x[MAX], bias[70], res[MAX];
    ck_assert(rows * ld <= MAX && cols <= 70);
    for (int i = 0; i < rows * ld; i++) {
        x[i] = c[i] = -90.0f + 180.0f * (float)((i * 37) % (rows * ld)) / (float)(rows * ld);
        res[i] = (float)(i % 7 - 3) / 4.0f;
    }
    for (int j = 0; j < cols; j++)
        bias[j] = (float)(j % 5 - 2) / 8.0f;
    const FxrtEpilogue ep = {.bias = bias, .bias_row_stride = 0, .bias_col_stride = 1,
                             .residual = res, .residual_ld = ld, .activation = act,
                             .residual_after = after};
    fxrt_epilogue_apply_f32(&ep, 0, 0, rows, cols, c, ld);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < ld; j++) {
            int at = r * ld + j;
            double v = (double)x[at], want = v;
            if (j < cols) {
                v += bias[j] + (after ? 0.0 : res[at]);
                double sig = 1.0 / (1.0 + exp(-v));
                want = (act == FXRT_ACT_SILU ? v * sig : sig) + (after ? res[at] : 0.0);
            }
            ck_assert_msg(fabs(c[at] - want) <= 2e-6 * (fabs(want) + 1.0),
                          "%s rows %d cols %d ld %d after %d: [%d][%d] = %.9g, want %.9g",
                          act == FXRT_ACT_SILU ? "silu" : "sigmoid", rows, cols, ld, after, r, j,
                          (double)c[at], want);
        }
}

START_TEST(test_sigmoid_family)
{
    const FxrtActivation acts[] = {FXRT_ACT_SIGMOID, FXRT_ACT_SILU};
    for (int l = 0; l < 3; l++) {
        fxrt_epilogue_limit_isa(isa_levels[l]);
        for (int a = 0; a < 2; a++)
            for (int after = 0; after < 2; after++) {
                check_sigmoid_family(acts[a], 9, 8, 8, after);   /* one pass over 72 */
                check_sigmoid_family(acts[a], 5, 13, 13, after); /* one pass, odd length */
                check_sigmoid_family(acts[a], 4, 37, 70, after); /* row by row */
                check_sigmoid_family(acts[a], 1, 3, 3, after);   /* shorter than a vector */
            }
    }
    fxrt_epilogue_limit_isa(2);
}
END_TEST

/* No activation, Relu and Clip with a bias per column (bias_stride 1) or
 * one per row (0), a residual before or after, on rows of 16 to 70 values
 * (the one-pass row path of wide vectors, its masked tail included) and a
 * NaN in every row: against the formulas in double, and NaN where the
 * input was NaN (max and min must keep it, as the scalar comparisons do). */
static void check_clamp_family(FxrtActivation act, int rows, int cols, int ld, int bias_stride,
                               int after)
{
    enum { MAX = 9 * 70 };
    float c[MAX], x[MAX], bias[70 * 9], res[MAX];
    ck_assert(rows * ld <= MAX && cols <= 70 && rows <= 9);
    for (int i = 0; i < rows * ld; i++) {
        x[i] = c[i] = -4.0f + 8.0f * (float)((i * 37) % (rows * ld)) / (float)(rows * ld);
        res[i] = (float)(i % 7 - 3) / 4.0f;
    }
    for (int r = 0; r < rows; r++)
        x[r * ld + (5 * r) % cols] = c[r * ld + (5 * r) % cols] = NAN;
    for (int j = 0; j < 70 * 9; j++)
        bias[j] = (float)(j % 5 - 2) / 8.0f;
    const float lo = -0.75f, hi = 1.5f;
    const FxrtEpilogue ep = {.bias = bias, .bias_row_stride = bias_stride ? 0 : 1,
                             .bias_col_stride = bias_stride, .residual = res,
                             .residual_ld = ld, .activation = act, .residual_after = after,
                             .alpha = lo, .beta = hi};
    fxrt_epilogue_apply_f32(&ep, 0, 0, rows, cols, c, ld);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < ld; j++) {
            int at = r * ld + j;
            double v = (double)x[at], want = v;
            if (j < cols) {
                v += (bias_stride ? bias[j] : bias[r]) + (after ? 0.0 : res[at]);
                want = act == FXRT_ACT_RELU   ? (v < 0.0 ? 0.0 : v)
                       : act == FXRT_ACT_CLIP ? (v < lo ? lo : v > hi ? hi : v)
                                              : v;
                want += after ? res[at] : 0.0;
            }
            if (isnan(x[at])) {
                ck_assert_msg(isnan(c[at]), "act %d: [%d][%d] = %.9g, want NaN", act, r, j,
                              (double)c[at]);
                continue;
            }
            ck_assert_msg(fabs(c[at] - want) <= 1e-6 * (fabs(want) + 1.0),
                          "act %d rows %d cols %d ld %d bias stride %d after %d: [%d][%d] = "
                          "%.9g, want %.9g",
                          act, rows, cols, ld, bias_stride, after, r, j, (double)c[at], want);
        }
}

START_TEST(test_clamp_family)
{
    const FxrtActivation acts[] = {FXRT_ACT_NONE, FXRT_ACT_RELU, FXRT_ACT_CLIP};
    for (int l = 0; l < 3; l++) {
        fxrt_epilogue_limit_isa(isa_levels[l]);
        for (int a = 0; a < 3; a++)
            for (int stride = 0; stride < 2; stride++)
                for (int after = 0; after < 2; after++) {
                    check_clamp_family(acts[a], 4, 16, 16, stride, after);
                    check_clamp_family(acts[a], 3, 37, 70, stride, after);
                    check_clamp_family(acts[a], 9, 70, 70, stride, after);
                    check_clamp_family(acts[a], 5, 8, 8, stride, after); /* NCHWc blocks */
                }
    }
    fxrt_epilogue_limit_isa(2);
}
END_TEST

/* NaN, infinities, signed zeros, values around exp's underflow and a
 * denormal, 37 of them so that the vector loops' tails see them too: NaN
 * stays NaN, and SiLU(-inf) is NaN as the unfused Mul(x, Sigmoid(x)) is. */
START_TEST(test_sigmoid_special_values)
{
    const float specials[] = {NAN,    INFINITY, -INFINITY, 0.0f,  -0.0f,  -87.3f, -87.4f,
                              -88.0f, -103.0f,  -1e30f,    1e30f, 20.0f,  -20.0f, 1e-40f};
    enum { LEN = 37 };
    const FxrtActivation acts[] = {FXRT_ACT_SIGMOID, FXRT_ACT_SILU};
    for (int a = 0; a < 2; a++) {
        float c[LEN];
        for (int i = 0; i < LEN; i++)
            c[i] = specials[i % 14];
        const FxrtEpilogue ep = {.activation = acts[a]};
        fxrt_epilogue_apply_f32(&ep, 0, 0, 1, LEN, c, LEN);
        for (int i = 0; i < LEN; i++) {
            double v = specials[i % 14];
            double sig = v == -INFINITY ? 0.0 : 1.0 / (1.0 + exp(-v));
            double want = acts[a] == FXRT_ACT_SILU ? v * sig : sig;
            if (isnan(want))
                ck_assert_msg(isnan(c[i]), "%d(%g) = %g, want NaN", acts[a], v, (double)c[i]);
            else if (isinf(want))
                ck_assert_msg(c[i] == (float)want, "%d(%g) = %g, want %g", acts[a], v,
                              (double)c[i], want);
            else
                ck_assert_msg(fabs(c[i] - want) <= 2e-6 * (fabs(want) + 1.0),
                              "%d(%g) = %.9g, want %.9g", acts[a], v, (double)c[i], want);
        }
    }
}
END_TEST

/* C = act(alpha * A B + bias + R) for A m x k, B k x n, bias per column
 * (per_row 0) or per row (1), in double. */
static void check_large_gemm(int per_row, int trans_b)
{
    enum { M = 96, N = 200, K = 300 }; /* 5.8M multiply-adds: the BLAS path */
    float *a = malloc(M * K * sizeof *a), *b = malloc(K * N * sizeof *b);
    float *c = malloc(M * N * sizeof *c), *res = malloc(M * N * sizeof *res);
    float bias[N > M ? N : M];
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(res);
    for (int i = 0; i < M * K; i++)
        a[i] = (float)((i * 7) % 13 - 6) / 8.0f;
    for (int i = 0; i < K * N; i++)
        b[i] = (float)((i * 5) % 11 - 5) / 16.0f;
    for (int i = 0; i < M * N; i++) {
        res[i] = (float)(i % 9 - 4) / 4.0f;
        c[i] = NAN; /* beta 0: C must not be read */
    }
    for (int i = 0; i < (N > M ? N : M); i++)
        bias[i] = (float)(i % 17 - 8) / 2.0f;
    const FxrtEpilogue ep = {.bias = bias, .bias_row_stride = per_row, .bias_col_stride = !per_row,
                             .residual = res, .residual_ld = N, .activation = FXRT_ACT_RELU};
    /* B as stored: K x N, or N x K when transposed */
    fxrt_gemm_ep_f32(0, trans_b, M, N, K, 0.5f, a, K, b, trans_b ? K : N, 0.0f, c, N, &ep);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int p = 0; p < K; p++)
                s += (double)a[i * K + p] * b[trans_b ? j * K + p : p * N + j];
            double v = 0.5 * s + bias[per_row ? i : j] + res[i * N + j];
            double want = v < 0.0 ? 0.0 : v;
            ck_assert_msg(fabs(c[i * N + j] - want) <= 1e-4 * (fabs(want) + 1.0),
                          "per_row %d trans_b %d: c[%d][%d] = %.9g, want %.9g", per_row,
                          trans_b, i, j, (double)c[i * N + j], want);
        }
    free(a);
    free(b);
    free(c);
    free(res);
}

START_TEST(test_large_gemm_bias_per_column) { check_large_gemm(0, 0); }
END_TEST

START_TEST(test_large_gemm_bias_per_row_trans_b) { check_large_gemm(1, 1); }
END_TEST

static Suite *epilogue_suite(void)
{
    Suite *s = suite_create("runtime_epilogue");
    TCase *t = tcase_create("gelu");
    tcase_add_test(t, test_gelu_scaled);
    tcase_add_test(t, test_gelu_unscaled);
    tcase_add_test(t, test_gelu_special_values);
    tcase_add_test(t, test_sigmoid_family);
    tcase_add_test(t, test_sigmoid_special_values);
    tcase_add_test(t, test_clamp_family);
    suite_add_tcase(s, t);
    TCase *g = tcase_create("gemm");
    tcase_add_test(g, test_large_gemm_bias_per_column);
    tcase_add_test(g, test_large_gemm_bias_per_row_trans_b);
    suite_add_tcase(s, g);
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
