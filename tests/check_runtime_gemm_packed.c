/*
 * check_runtime_gemm_packed.c - the float GEMM on compile-time packed
 * weights (fxrt_gemm_packed_f32, fxrt_nn_gemm_packed.c) against a double
 * product with the same epilogue applied by fxrt_epilogue_apply_f32.
 *
 * Tolerance: |y - ref| <= 1e-5 x (1 + sum_p |a_ip b_pj|) per element, the
 * float rounding of a k-term sum (k <= 1024 here) with room for FMA's.
 *
 * Shapes: m of 1 and every tail height of each tile (1..9 rows past a
 * multiple of 4, 6 and 8), n of 1, 15, 16, 17, 31, 33 (panel and two-panel
 * tails, masked stores), k of 1 and odd sizes, packed B above the column
 * block size (several blocks), B given transposed, strided A and C (whose
 * gaps must stay untouched), alpha, and epilogues with a per-column bias,
 * a residual and an activation.  Built twice (tests/CMakeLists.txt); the
 * host build runs every case with the tiles capped at AVX-512, AVX2 and
 * portable C (fxrt_gemm_packed_limit_isa), so one machine checks all three.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"

static uint32_t rng_state;

static float rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static float *random_floats(int64_t count)
{
    float *v = malloc((size_t)(count > 0 ? count : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < count; i++)
        v[i] = rnd();
    return v;
}

/* One product: m x n x k with the given B layout, strides padded by
 * pad_a / pad_c floats, alpha and epilogue (bias per column, residual). */
static void check_case(int64_t m, int64_t n, int64_t k, int trans_b, int64_t pad_a,
                       int64_t pad_c, float alpha, FxrtActivation act, int with_bias,
                       int with_residual, uint32_t seed)
{
    rng_state = seed;
    int64_t lda = k + pad_a, ldc = n + pad_c, ldb = trans_b ? k : n;
    float *a = random_floats(m * lda), *b = random_floats(k * n);
    float *bias = random_floats(n), *res = random_floats(m * n);
    float *c = random_floats(m * ldc), *ref = malloc((size_t)(m * ldc) * sizeof *ref);
    float *packed = malloc((size_t)fxrt_gemm_packed_floats(n, k) * sizeof *packed + 1);
    double *bound = malloc((size_t)(m * n) * sizeof *bound);
    ck_assert(ref && packed && bound);
    memcpy(ref, c, (size_t)(m * ldc) * sizeof *ref);
    FxrtEpilogue ep = {.bias = with_bias ? bias : NULL, .bias_col_stride = 1,
                       .residual = with_residual ? res : NULL, .residual_ld = n,
                       .activation = act, .alpha = -0.5f, .beta = 0.5f};
    if (act == FXRT_ACT_GELU)
        ep.alpha = 0.5f;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0, mag = 0.0;
            for (int64_t p = 0; p < k; p++) {
                double t = (double)a[i * lda + p] * (trans_b ? b[j * ldb + p] : b[p * ldb + j]);
                s += t;
                mag += fabs(t);
            }
            ref[i * ldc + j] = (float)(alpha * s);
            bound[i * n + j] = 1e-5 * (1.0 + fabs(alpha) * mag);
        }
    fxrt_epilogue_apply_f32(&ep, 0, 0, m, n, ref, ldc);
    fxrt_gemm_pack_b_f32(trans_b, n, k, b, ldb, packed);
    fxrt_gemm_packed_f32(m, n, k, alpha, a, lda, packed, c, ldc, &ep);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < ldc; j++) {
            float y = c[i * ldc + j], r = ref[i * ldc + j];
            if (j >= n) /* the gap between rows is never written */
                ck_assert_msg(y == r, "m %lld n %lld k %lld: gap (%lld, %lld) written",
                              (long long)m, (long long)n, (long long)k, (long long)i,
                              (long long)j);
            else
                ck_assert_msg(fabs((double)y - r) <= bound[i * n + j],
                              "m %lld n %lld k %lld trans_b %d: (%lld, %lld) %g, reference %g",
                              (long long)m, (long long)n, (long long)k, trans_b, (long long)i,
                              (long long)j, (double)y, (double)r);
        }
    free(a);
    free(b);
    free(bias);
    free(res);
    free(c);
    free(ref);
    free(packed);
    free(bound);
}

START_TEST(test_tails)
{
    const int64_t ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 17};
    const int64_t ns[] = {1, 15, 16, 17, 31, 32, 33, 48};
    const int64_t ks[] = {1, 2, 7, 64};
    uint32_t seed = 1;
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
            for (size_t p = 0; p < sizeof ks / sizeof ks[0]; p++, seed++)
                check_case(ms[i], ns[j], ks[p], (int)(seed % 2), seed % 3, seed % 5, 1.0f,
                           FXRT_ACT_NONE, 0, 0, seed);
}
END_TEST

START_TEST(test_epilogues)
{
    const FxrtActivation acts[] = {FXRT_ACT_NONE, FXRT_ACT_RELU, FXRT_ACT_GELU, FXRT_ACT_CLIP};
    uint32_t seed = 100;
    for (size_t t = 0; t < sizeof acts / sizeof acts[0]; t++)
        for (int bias = 0; bias < 2; bias++)
            for (int residual = 0; residual < 2; residual++, seed++)
                check_case(19, 45, 33, (int)(seed % 2), 3, 1, seed % 3 ? 1.0f : 0.75f, acts[t],
                           bias, residual, seed);
}
END_TEST

/* The encoder layers' sizes, and packed B beyond one column block. */
START_TEST(test_layer_shapes)
{
    const int64_t shapes[][3] = {{32, 192, 64},   {64, 256, 64},  {32, 64, 256},
                                 {128, 1024, 256}, {37, 100, 1024}, {3, 600, 200}};
    uint32_t seed = 200;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++, seed++)
        check_case(shapes[s][0], shapes[s][1], shapes[s][2], (int)(s % 2), 0, 0, 1.0f,
                   FXRT_ACT_RELU, 1, (int)(s % 2), seed);
}
END_TEST

/* k == 0: C is the epilogue of zeros. */
START_TEST(test_empty_sum)
{
    float bias[3] = {1.0f, -2.0f, 3.0f}, c[6] = {9, 9, 9, 9, 9, 9}, packed[1] = {0};
    FxrtEpilogue ep = {.bias = bias, .bias_col_stride = 1, .activation = FXRT_ACT_RELU};
    fxrt_gemm_packed_f32(2, 3, 0, 1.0f, NULL, 0, packed, c, 3, &ep);
    const float want[6] = {1, 0, 3, 1, 0, 3};
    for (int i = 0; i < 6; i++)
        ck_assert_float_eq_tol(c[i], want[i], 1e-6f);
}
END_TEST

static void use_avx512(void) { fxrt_gemm_packed_limit_isa(2); }
static void use_avx2(void) { fxrt_gemm_packed_limit_isa(1); }
static void use_portable(void) { fxrt_gemm_packed_limit_isa(0); }

static Suite *gemm_packed_suite(void)
{
    Suite *s = suite_create("gemm_packed");
    const char *names[] = {"avx512", "avx2", "portable"};
    void (*caps[])(void) = {use_avx512, use_avx2, use_portable};
    for (int i = 0; i < 3; i++) {
        TCase *tc = tcase_create(names[i]);
        tcase_set_timeout(tc, 300);
        tcase_add_checked_fixture(tc, caps[i], use_avx512);
        tcase_add_test(tc, test_tails);
        tcase_add_test(tc, test_epilogues);
        tcase_add_test(tc, test_layer_shapes);
        tcase_add_test(tc, test_empty_sum);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(gemm_packed_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
