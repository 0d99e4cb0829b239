/*
 * check_runtime_norm.c - the statistics of LayerNormalization and
 * InstanceNormalization (fxrt_nn_norm.c), whose sums run in independent
 * lanes: against mean, variance and the normalized rows in double, on rows
 * of every length around the lane count (so that the remainders run too),
 * on centred data and on data offset by 1000 over a spread of 1 (which a
 * plain float sum would round away), with and without scale and bias.
 * The same for the LayerNorm over the channels of NCHWc data, with the
 * reorders between NCHWc and NHWC, in its AVX2 form (where the CPU has it)
 * and in portable C.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"

/* Row r, column j of the test data: a spread of about 1 around `offset`. */
static float sample(int r, int j, float offset)
{
    return offset + (float)(((r * 31 + j * 17) % 97) - 48) / 40.0f;
}

static void reference_stats(const float *v, int len, double *mean, double *inv_std, double eps)
{
    double s = 0.0, q = 0.0;
    for (int j = 0; j < len; j++)
        s += v[j];
    *mean = s / len;
    for (int j = 0; j < len; j++)
        q += (v[j] - *mean) * (v[j] - *mean);
    *inv_std = 1.0 / sqrt(q / len + eps);
}

/* Tolerance of a normalized value: offset data leave the float mean within
 * about an ulp of 1000 (6e-5) of the true one, which normalization divides
 * by a spread of about 0.5. */
static double tolerance(float offset, double want)
{
    return (offset != 0.0f ? 3e-4 : 2e-6) * (fabs(want) + 1.0);
}

static void check_layernorm(int rows, int cols, float offset, int affine)
{
    const float eps = 1e-6f;
    float *x = malloc((size_t)rows * cols * sizeof *x), *y = malloc((size_t)rows * cols * sizeof *y);
    float *scale = malloc((size_t)cols * sizeof *scale), *bias = malloc((size_t)cols * sizeof *bias);
    float *mean = malloc((size_t)rows * sizeof *mean), *inv = malloc((size_t)rows * sizeof *inv);
    ck_assert(x && y && scale && bias && mean && inv);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++)
            x[r * cols + j] = sample(r, j, offset);
    for (int j = 0; j < cols; j++) {
        scale[j] = (float)(j % 7 + 1) / 4.0f;
        bias[j] = (float)(j % 5 - 2) / 8.0f;
    }
    fxrt_layernorm_f32(rows, cols, x, affine ? scale : NULL, affine ? bias : NULL, eps, y, mean,
                       inv);
    for (int r = 0; r < rows; r++) {
        double m, is;
        reference_stats(x + r * cols, cols, &m, &is, eps);
        ck_assert_msg(fabs(mean[r] - m) <= 1e-6 * (fabs(m) + 1.0),
                      "rows %d cols %d offset %g: mean[%d] = %.9g, want %.9g", rows, cols,
                      (double)offset, r, (double)mean[r], m);
        ck_assert_msg(fabs(inv[r] - is) <= (offset != 0.0f ? 3e-4 : 2e-6) * is,
                      "rows %d cols %d offset %g: inv_std[%d] = %.9g, want %.9g", rows, cols,
                      (double)offset, r, (double)inv[r], is);
        for (int j = 0; j < cols; j++) {
            double want = (x[r * cols + j] - m) * is;
            if (affine)
                want = want * scale[j] + bias[j];
            double got = y[r * cols + j];
            ck_assert_msg(fabs(got - want) <= tolerance(offset, want),
                          "rows %d cols %d offset %g affine %d: y[%d][%d] = %.9g, want %.9g",
                          rows, cols, (double)offset, affine, r, j, got, want);
        }
    }
    free(x);
    free(y);
    free(scale);
    free(bias);
    free(mean);
    free(inv);
}

START_TEST(test_layernorm_lengths)
{
    const int lengths[] = {1, 2, 15, 16, 17, 33, 96, 100, 768};
    for (int i = 0; i < 9; i++)
        for (int affine = 0; affine < 2; affine++) {
            check_layernorm(5, lengths[i], 0.0f, affine);
            check_layernorm(3, lengths[i], 1000.0f, affine);
        }
}
END_TEST

/* InstanceNormalization shares the statistics: n x c planes of `inner`. */
static void check_instancenorm(int inner, float offset)
{
    enum { N = 2, C = 3 };
    const float eps = 1e-5f;
    float *x = malloc((size_t)N * C * inner * sizeof *x), *y = malloc((size_t)N * C * inner * sizeof *y);
    const float scale[C] = {0.5f, 1.0f, 2.0f}, bias[C] = {-1.0f, 0.0f, 0.25f};
    ck_assert(x && y);
    for (int p = 0; p < N * C; p++)
        for (int j = 0; j < inner; j++)
            x[p * inner + j] = sample(p, j, offset);
    fxrt_instancenorm_f32(N, C, inner, x, scale, bias, eps, y);
    for (int p = 0; p < N * C; p++) {
        double m, is;
        reference_stats(x + p * inner, inner, &m, &is, eps);
        for (int j = 0; j < inner; j++) {
            double want = (x[p * inner + j] - m) * is * scale[p % C] + bias[p % C];
            double got = y[p * inner + j];
            ck_assert_msg(fabs(got - want) <= tolerance(offset, want),
                          "inner %d offset %g: y[%d][%d] = %.9g, want %.9g", inner,
                          (double)offset, p, j, got, want);
        }
    }
    free(x);
    free(y);
}

START_TEST(test_instancenorm_lengths)
{
    const int lengths[] = {1, 7, 16, 49, 196};
    for (int i = 0; i < 5; i++) {
        check_instancenorm(lengths[i], 0.0f);
        check_instancenorm(lengths[i], 1000.0f);
    }
}
END_TEST

/* The channels-last LayerNorm of NCHWc data (ConvNeXt), and the reorders
 * between NCHWc and NHWC: batch 2 of `spatial` pixels by `channels`, whose
 * padding lanes are poisoned after the reorder into NCHWc checked they were
 * zero: no statistic, no output and no reorder back may read them. */
static void check_layernorm_nchwc(int channels, int spatial, float offset, int with_bias)
{
    enum { N = 2, BLOCK = FXRT_NCHWC_BLOCK };
    const float eps = 1e-6f;
    int blocks = (int)fxrt_nchwc_blocks(channels), elems = N * spatial * channels;
    float *x = malloc((size_t)elems * sizeof *x), *back = malloc((size_t)elems * sizeof *back);
    float *y = malloc((size_t)elems * sizeof *y);
    float *xb = malloc((size_t)N * blocks * spatial * BLOCK * sizeof *xb);
    float *scale = malloc((size_t)channels * sizeof *scale), *bias = malloc((size_t)channels * sizeof *bias);
    ck_assert(x && back && y && xb && scale && bias);
    for (int p = 0; p < N * spatial; p++)
        for (int c = 0; c < channels; c++)
            x[p * channels + c] = sample(p, c, offset);
    for (int c = 0; c < channels; c++) {
        scale[c] = (float)(c % 7 + 1) / 4.0f;
        bias[c] = (float)(c % 5 - 2) / 8.0f;
    }
    fxrt_nhwc_to_nchwc_f32(N, channels, spatial, x, xb);
    for (int n = 0; n < N; n++)
        for (int cb = 0; cb < blocks; cb++)
            for (int s = 0; s < spatial; s++)
                for (int l = 0; l < BLOCK; l++) {
                    float *v = &xb[((n * blocks + cb) * spatial + s) * BLOCK + l];
                    int c = cb * BLOCK + l;
                    float want = c < channels ? x[(n * spatial + s) * channels + c] : 0.0f;
                    ck_assert_msg(*v == want, "channels %d spatial %d: NCHWc [%d][%d][%d][%d] = %g, want %g",
                                  channels, spatial, n, cb, s, l, (double)*v, (double)want);
                    if (c >= channels)
                        *v = 1e4f;
                }
    fxrt_nchwc_to_nhwc_f32(N, channels, spatial, xb, back);
    for (int i = 0; i < elems; i++)
        ck_assert_msg(back[i] == x[i], "channels %d spatial %d: NHWC [%d] = %g, want %g",
                      channels, spatial, i, (double)back[i], (double)x[i]);
    fxrt_layernorm_nchwc_f32(N, channels, spatial, xb, scale, with_bias ? bias : NULL, eps, y);
    for (int p = 0; p < N * spatial; p++) {
        double m, is;
        reference_stats(x + p * channels, channels, &m, &is, eps);
        for (int c = 0; c < channels; c++) {
            double want = (x[p * channels + c] - m) * is * scale[c] + (with_bias ? bias[c] : 0.0f);
            double got = y[p * channels + c];
            ck_assert_msg(fabs(got - want) <= tolerance(offset, want),
                          "channels %d spatial %d offset %g bias %d: y[%d][%d] = %.9g, want %.9g",
                          channels, spatial, (double)offset, with_bias, p, c, got, want);
        }
    }
    free(x);
    free(back);
    free(y);
    free(xb);
    free(scale);
    free(bias);
}

START_TEST(test_layernorm_nchwc)
{
    const int channels[] = {1, 7, 8, 13, 96, 100}, spatials[] = {1, 7, 8, 15, 16, 17, 49};
    for (int isa = 1; isa >= 0; isa--) {
        fxrt_layernorm_nchwc_limit_isa(isa);
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 7; j++) {
                check_layernorm_nchwc(channels[i], spatials[j], 0.0f, j % 2);
                check_layernorm_nchwc(channels[i], spatials[j], 1000.0f, 1 - j % 2);
            }
    }
    fxrt_layernorm_nchwc_limit_isa(1);
}
END_TEST

static Suite *norm_suite(void)
{
    Suite *s = suite_create("runtime_norm");
    TCase *t = tcase_create("stats");
    tcase_add_test(t, test_layernorm_lengths);
    tcase_add_test(t, test_instancenorm_lengths);
    tcase_add_test(t, test_layernorm_nchwc);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(norm_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
