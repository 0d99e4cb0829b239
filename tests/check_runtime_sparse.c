/*
 * check_runtime_sparse.c - the kernels of pruned weights stored as
 * compressed rows (fxrt_sparse_conv_f32, fxrt_sparse_gemm_f32,
 * fxrt_nn_sparse.c) against a dense double-precision reference on the same
 * weights, zeros included, with bias, residual and Relu/Clip computed here.
 *
 * Tolerance: |y - ref| <= 1e-5 x (1 + sum |w x|) per element (the rounding
 * of a float sum of at most a few thousand terms, FMA's included).
 *
 * Cases: densities 0 (every row empty), 0.05 to 0.5 and 1 (every weight
 * stored); 1x1 stride 1 (the direct path, no copy), 1x1 stride 2, 3x3 with
 * padding at strides 1 and 2, asymmetric kernels and padding (a DS-CNN
 * stem), a stride-1 kxk layer without padding (direct, wide rows), widths
 * that leave every tail of the 16-, 32- and 64-pixel tiles, batch 2; the
 * matrix product at 1 and 3 rows, k up to 65536 with every gather tail; 1x1
 * layers written in place over X (fxrt_sparse_conv_inplace_f32).  The
 * host build runs each with the tiles capped at AVX-512, AVX2 and portable C
 * (fxrt_sparse_limit_isa); the portable and cortex-m builds run the C tiles,
 * the cortex-m one (FXRT_SMALL_KERNELS) on the image split a band of rows at
 * a time.
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

/* Dense rows x cols weights, each kept with probability density. */
static float *pruned_weights(int64_t rows, int64_t cols, double density)
{
    float *w = random_floats(rows * cols);
    for (int64_t i = 0; i < rows * cols; i++)
        if ((double)(rnd() * 0.5f + 0.5f) >= density)
            w[i] = 0.0f;
    return w;
}

typedef struct Compressed {
    int32_t *row_start;
    uint16_t *columns;
    float *values;
} Compressed;

static Compressed compress(const float *w, int64_t rows, int64_t cols)
{
    Compressed c;
    c.row_start = malloc((size_t)(rows + 1) * sizeof *c.row_start);
    c.columns = malloc((size_t)(rows * cols + 1) * sizeof *c.columns);
    c.values = malloc((size_t)(rows * cols + 1) * sizeof *c.values);
    ck_assert(c.row_start && c.columns && c.values);
    int32_t at = 0;
    for (int64_t r = 0; r < rows; r++) {
        c.row_start[r] = at;
        for (int64_t k = 0; k < cols; k++)
            if (fabsf(w[r * cols + k]) > 0.0f) {
                c.columns[at] = (uint16_t)k;
                c.values[at++] = w[r * cols + k];
            }
    }
    c.row_start[rows] = at;
    return c;
}

static void compressed_free(Compressed *c)
{
    free(c->row_start);
    free(c->columns);
    free(c->values);
}

static double activate(double v, FxrtActivation act)
{
    if (act == FXRT_ACT_RELU)
        return v > 0 ? v : 0;
    if (act == FXRT_ACT_CLIP)
        return v < -0.5 ? -0.5 : v > 0.5 ? 0.5 : v;
    return v;
}

typedef struct ConvCase {
    int64_t batch, in_c, out_c, in_h, in_w, kh, kw, sh, sw, pt, pl, pb, pr;
} ConvCase;

/* One convolution against the double reference; in place (a 1x1 stride-1
 * layer with as many outputs as inputs): Y written over a copy of X. */
static void check_conv_mode(const ConvCase *k, double density, FxrtActivation act, int with_bias,
                            int with_residual, uint32_t seed, int inplace)
{
    rng_state = seed;
    FxrtSparseConvParams p = {.batch = k->batch, .in_channels = k->in_c, .out_channels = k->out_c,
                              .in_h = k->in_h, .in_w = k->in_w, .kernel_h = k->kh,
                              .kernel_w = k->kw, .stride_h = k->sh, .stride_w = k->sw,
                              .pad_top = k->pt, .pad_left = k->pl};
    p.out_h = (k->in_h + k->pt + k->pb - k->kh) / k->sh + 1;
    p.out_w = (k->in_w + k->pl + k->pr - k->kw) / k->sw + 1;
    int64_t cols = k->in_c * k->kh * k->kw, pixels = p.out_h * p.out_w;
    int64_t ysize = k->batch * k->out_c * pixels;
    float *x = random_floats(k->batch * k->in_c * k->in_h * k->in_w);
    float *w = pruned_weights(k->out_c, cols, density);
    float *bias = random_floats(k->out_c), *res = random_floats(ysize);
    float *y = random_floats(ysize);
    Compressed c = compress(w, k->out_c, cols);
    int64_t bytes = inplace ? fxrt_sparse_conv_inplace_scratch_bytes(&p, c.row_start[k->out_c])
                            : fxrt_sparse_conv_scratch_bytes(&p, c.row_start[k->out_c]);
    ck_assert_int_gt(bytes, 0);
    void *scratch = malloc((size_t)bytes);
    ck_assert_ptr_nonnull(scratch);
    FxrtEpilogue ep = {.bias = with_bias ? bias : NULL,
                       .residual = with_residual ? res : NULL,
                       .activation = act, .alpha = -0.5f, .beta = 0.5f};
    if (inplace) {
        ck_assert(fxrt_sparse_conv_inplace_applies(&p));
        ck_assert_int_eq(ysize, k->batch * k->in_c * k->in_h * k->in_w);
        memcpy(y, x, (size_t)ysize * sizeof *y);
        fxrt_sparse_conv_inplace_f32(&p, y, c.row_start, c.columns, c.values, &ep, scratch);
    } else {
        ck_assert(!fxrt_sparse_conv_inplace_applies(&p) || k->kh == 1);
        fxrt_sparse_conv_f32(&p, x, c.row_start, c.columns, c.values, &ep, y, scratch);
    }
    for (int64_t b = 0; b < k->batch; b++)
        for (int64_t oc = 0; oc < k->out_c; oc++)
            for (int64_t oh = 0; oh < p.out_h; oh++)
                for (int64_t ow = 0; ow < p.out_w; ow++) {
                    double sum = 0, mag = 0;
                    for (int64_t ic = 0; ic < k->in_c; ic++)
                        for (int64_t i = 0; i < k->kh; i++)
                            for (int64_t j = 0; j < k->kw; j++) {
                                int64_t ih = oh * k->sh - k->pt + i, iw = ow * k->sw - k->pl + j;
                                if (ih < 0 || ih >= k->in_h || iw < 0 || iw >= k->in_w)
                                    continue;
                                double t = (double)w[oc * cols + (ic * k->kh + i) * k->kw + j] *
                                           x[((b * k->in_c + ic) * k->in_h + ih) * k->in_w + iw];
                                sum += t;
                                mag += fabs(t);
                            }
                    int64_t at = (b * k->out_c + oc) * pixels + oh * p.out_w + ow;
                    if (with_bias)
                        sum += bias[oc];
                    if (with_residual)
                        sum += res[at];
                    double want = activate(sum, act);
                    if (!(fabs((double)y[at] - want) <= 1e-5 * (1 + mag + 2)))
                        ck_abort_msg("conv %lldx%lld c%lld->%lld %lldx%lld s%lld,%lld density %.2f:"
                                     " y[%lld] = %.8g, want %.8g",
                                     (long long)k->in_h, (long long)k->in_w, (long long)k->in_c,
                                     (long long)k->out_c, (long long)k->kh, (long long)k->kw,
                                     (long long)k->sh, (long long)k->sw, density, (long long)at,
                                     (double)y[at], want);
                }
    compressed_free(&c);
    free(scratch);
    free(x);
    free(w);
    free(bias);
    free(res);
    free(y);
}

static void check_conv(const ConvCase *k, double density, FxrtActivation act, int with_bias,
                       int with_residual, uint32_t seed)
{
    check_conv_mode(k, density, act, with_bias, with_residual, seed, 0);
}

static const ConvCase conv_cases[] = {
    /* batch in out  h   w  kh kw sh sw pt pl pb pr */
    {1, 16, 24, 8, 8, 1, 1, 1, 1, 0, 0, 0, 0},     /* 1x1 direct, 64 pixels */
    {1, 7, 5, 5, 13, 1, 1, 1, 1, 0, 0, 0, 0},      /* 65 pixels: one past a tile */
    {2, 9, 11, 7, 9, 1, 1, 1, 1, 0, 0, 0, 0},      /* batch 2, 63 pixels */
    {1, 16, 32, 14, 14, 1, 1, 2, 2, 0, 0, 0, 0},   /* 1x1 stride 2 */
    {1, 16, 16, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1},   /* 3x3 pad 1 */
    {1, 8, 12, 17, 11, 3, 3, 2, 2, 1, 1, 1, 1},    /* 3x3 stride 2, odd sizes */
    {1, 5, 6, 9, 10, 3, 3, 1, 1, 0, 0, 0, 0},      /* 3x3 direct: wide rows */
    {1, 1, 8, 25, 10, 10, 4, 2, 2, 4, 1, 5, 2},    /* DS-CNN stem, asymmetric */
    {2, 3, 4, 6, 7, 2, 3, 1, 2, 0, 1, 1, 0},       /* mixed strides and pads */
    {1, 4, 3, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1},       /* 1x1 image, all padding */
    {1, 32, 40, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1},     /* a late 7x7 layer */
};

static const double densities[] = {0.0, 0.05, 0.2, 0.5, 1.0};

START_TEST(test_conv_densities)
{
    uint32_t seed = 1;
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++)
        for (size_t d = 0; d < sizeof densities / sizeof *densities; d++)
            check_conv(&conv_cases[i], densities[d], FXRT_ACT_NONE, 0, 0, seed++);
}
END_TEST

START_TEST(test_conv_epilogues)
{
    uint32_t seed = 100;
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++) {
        check_conv(&conv_cases[i], 0.2, FXRT_ACT_RELU, 1, 0, seed++);
        check_conv(&conv_cases[i], 0.3, FXRT_ACT_CLIP, 1, 1, seed++);
        check_conv(&conv_cases[i], 0.0, FXRT_ACT_RELU, 1, 1, seed++); /* all-zero weight */
    }
}
END_TEST

START_TEST(test_conv_layer_shapes)
{
    /* ResNet-ish layers at pruning's sparsities. */
    const ConvCase layers[] = {
        {1, 64, 64, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1},
        {1, 64, 128, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1},
        {1, 128, 64, 14, 14, 1, 1, 1, 1, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        check_conv(&layers[i], 0.1, FXRT_ACT_RELU, 1, 0, 7 + (uint32_t)i);
        check_conv(&layers[i], 0.2, FXRT_ACT_NONE, 1, 1, 17 + (uint32_t)i);
    }
}
END_TEST

START_TEST(test_conv_inplace)
{
    /* 1x1 stride 1, outputs = inputs: pixel counts around the 16-pixel
     * tiles, batch 2, the epilogue after the store (residual, sigmoid). */
    const ConvCase cases[] = {
        {1, 16, 16, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0},
        {2, 8, 8, 4, 9, 1, 1, 1, 1, 0, 0, 0, 0},
        {1, 64, 64, 25, 5, 1, 1, 1, 1, 0, 0, 0, 0},
    };
    uint32_t seed = 500;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (size_t d = 0; d < sizeof densities / sizeof *densities; d++) {
            check_conv_mode(&cases[i], densities[d], FXRT_ACT_RELU, 1, 0, seed++, 1);
            check_conv_mode(&cases[i], densities[d], FXRT_ACT_CLIP, 1, 1, seed++, 1);
        }
}
END_TEST

static void check_gemm(int64_t m, int64_t n, int64_t k, double density, int with_bias,
                       int with_residual, FxrtActivation act, uint32_t seed)
{
    rng_state = seed;
    int64_t lda = k + 3, ldc = n + 2;
    float *a = random_floats(m * lda), *w = pruned_weights(n, k, density);
    float *bias = random_floats(n), *res = random_floats(m * n), *c = random_floats(m * ldc);
    float *before = malloc((size_t)(m * ldc) * sizeof *before);
    ck_assert_ptr_nonnull(before);
    memcpy(before, c, (size_t)(m * ldc) * sizeof *c);
    Compressed z = compress(w, n, k);
    FxrtEpilogue ep = {.bias = with_bias ? bias : NULL, .bias_col_stride = 1,
                       .residual = with_residual ? res : NULL, .residual_ld = n,
                       .activation = act, .alpha = -0.5f, .beta = 0.5f};
    fxrt_sparse_gemm_f32(m, n, a, lda, z.row_start, z.columns, z.values, c, ldc, &ep);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double sum = 0, mag = 0;
            for (int64_t p = 0; p < k; p++) {
                double t = (double)w[j * k + p] * a[i * lda + p];
                sum += t;
                mag += fabs(t);
            }
            if (with_bias)
                sum += bias[j];
            if (with_residual)
                sum += res[i * n + j];
            double want = activate(sum, act);
            if (!(fabs((double)c[i * ldc + j] - want) <= 1e-5 * (1 + mag + 2)))
                ck_abort_msg("gemm %lldx%lldx%lld density %.2f: c[%lld, %lld] = %.8g, want %.8g",
                             (long long)m, (long long)n, (long long)k, density, (long long)i,
                             (long long)j, (double)c[i * ldc + j], want);
        }
        for (int64_t j = n; j < ldc; j++) /* the gap past each row stays */
            ck_assert(memcmp(&c[i * ldc + j], &before[i * ldc + j], sizeof *c) == 0);
    }
    compressed_free(&z);
    free(a);
    free(w);
    free(bias);
    free(res);
    free(c);
    free(before);
}

START_TEST(test_gemm)
{
    uint32_t seed = 300;
    const int64_t shapes[][3] = {{1, 10, 64},  {1, 33, 17},   {3, 7, 100},
                                 {1, 128, 512}, {1, 5, 70000}, {2, 1, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (size_t d = 0; d < sizeof densities / sizeof *densities; d++) {
            if (shapes[i][2] > 65536 && densities[d] > 0.3)
                continue; /* indices are 16 bits: rows of at most 65536 kept */
            int64_t k = shapes[i][2] > 65536 ? 65536 : shapes[i][2];
            check_gemm(shapes[i][0], shapes[i][1], k, densities[d], (int)(d & 1),
                       (int)(i & 1), d == 2 ? FXRT_ACT_RELU : FXRT_ACT_NONE, seed++);
        }
}
END_TEST

static void use_avx512(void) { fxrt_sparse_limit_isa(2); }
static void use_avx2(void) { fxrt_sparse_limit_isa(1); }
static void use_portable(void) { fxrt_sparse_limit_isa(0); }

static Suite *sparse_suite(void)
{
    Suite *s = suite_create("sparse");
    const char *names[] = {"avx512", "avx2", "portable"};
    void (*caps[])(void) = {use_avx512, use_avx2, use_portable};
    for (int i = 0; i < 3; i++) {
        TCase *tc = tcase_create(names[i]);
        tcase_set_timeout(tc, 120);
        tcase_add_checked_fixture(tc, caps[i], use_avx512);
        tcase_add_test(tc, test_conv_densities);
        tcase_add_test(tc, test_conv_epilogues);
        tcase_add_test(tc, test_conv_layer_shapes);
        tcase_add_test(tc, test_conv_inplace);
        tcase_add_test(tc, test_gemm);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sparse_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
