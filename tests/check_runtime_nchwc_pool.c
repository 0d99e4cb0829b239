/*
 * check_runtime_nchwc_pool.c - the blocked pools (fxrt_maxpool_nchwc_f32,
 * fxrt_avgpool_nchwc_f32) against the NCHW ones (fxrt_maxpool_f32,
 * fxrt_avgpool_f32, the reference) on random inputs: X goes through
 * fxrt_to_nchwc_f32 with its padding lanes poisoned, Y comes back through
 * fxrt_from_nchwc_f32.  The shapes cover channel counts that do not fill a
 * block, batch 2, kernels of 1 to 7, strides 1 to 3, dilation, asymmetric
 * padding, ceil_mode's extra output (a window past the padded input),
 * windows wider than the image, count_include_pad, and the pools of
 * GoogLeNet, ResNet and DenseNet, and more border columns than the kernel
 * keeps the windows of.  As a runtime suite it runs twice: with the host
 * runtime, where every case runs with the AVX2 runs and again with SSE2
 * alone (fxrt_pool_nchwc_limit_isa), and with the portable one (plain C).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"

#define BLOCK FXRT_NCHWC_BLOCK

typedef struct PoolCase {
    int64_t batch, channels, h, w;
    int64_t kh, kw, sh, sw, dh, dw;
    int64_t pad_top, pad_left, pad_bottom, pad_right;
    int ceil_mode, count_include_pad;
} PoolCase;

static uint32_t rng_state = 2024u;
static float uniform(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f;
}

static float *alloc_floats(int64_t n)
{
    float *v = calloc((size_t)(n > 0 ? n : 1), sizeof *v);
    ck_assert_ptr_nonnull(v);
    return v;
}

/* ONNX's output size, floor or ceil; with ceil, ONNX drops a last window
 * that would start in the end padding. */
static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                        int ceil_mode)
{
    int64_t span = in + pb + pe - d * (k - 1) - 1;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pb)
        o--;
    return o;
}

static FxrtPoolParams pool_params(const PoolCase *c, int64_t planes)
{
    FxrtPoolParams p;
    memset(&p, 0, sizeof p);
    p.planes = planes;
    int64_t oh = out_size(c->h, c->kh, c->sh, c->dh, c->pad_top, c->pad_bottom, c->ceil_mode);
    int64_t ow = out_size(c->w, c->kw, c->sw, c->dw, c->pad_left, c->pad_right, c->ceil_mode);
    int64_t in[3] = {1, c->h, c->w}, out[3] = {1, oh, ow}, k[3] = {1, c->kh, c->kw};
    int64_t s[3] = {1, c->sh, c->sw}, d[3] = {1, c->dh, c->dw};
    int64_t pb[3] = {0, c->pad_top, c->pad_left}, pe[3] = {0, c->pad_bottom, c->pad_right};
    for (int i = 0; i < 3; i++) {
        p.in_size[i] = in[i];
        p.out_size[i] = out[i];
        p.kernel[i] = k[i];
        p.stride[i] = s[i];
        p.dilation[i] = d[i];
        p.pad_begin[i] = pb[i];
        p.pad_end[i] = pe[i];
    }
    p.count_include_pad = c->count_include_pad;
    return p;
}

static void check_pool(const PoolCase *c, int take_max, const char *label)
{
    int64_t ch = c->channels, cb = fxrt_nchwc_blocks(ch), in_sp = c->h * c->w;
    FxrtPoolParams plain = pool_params(c, c->batch * ch);
    FxrtPoolParams blocked = pool_params(c, c->batch * cb);
    int64_t out_sp = plain.out_size[1] * plain.out_size[2];
    ck_assert_int_ge(out_sp, 1);

    float *x = alloc_floats(c->batch * ch * in_sp);
    for (int64_t i = 0; i < c->batch * ch * in_sp; i++)
        x[i] = uniform();
    float *ref = alloc_floats(c->batch * ch * out_sp);
    if (take_max)
        fxrt_maxpool_f32(&plain, x, ref, NULL);
    else
        fxrt_avgpool_f32(&plain, x, ref);

    /* Padding lanes larger than any value: a max that read them would show. */
    float *xb = alloc_floats(c->batch * cb * in_sp * BLOCK);
    fxrt_to_nchwc_f32(c->batch, ch, in_sp, x, xb);
    for (int64_t i = 0; i < c->batch * cb * in_sp * BLOCK; i++)
        if ((i / (in_sp * BLOCK) % cb) * BLOCK + i % BLOCK >= ch)
            xb[i] = 1e6f;
    float *yb = alloc_floats(c->batch * cb * out_sp * BLOCK);
    for (int64_t i = 0; i < c->batch * cb * out_sp * BLOCK; i++)
        yb[i] = NAN;
    if (take_max)
        fxrt_maxpool_nchwc_f32(&blocked, xb, yb);
    else
        fxrt_avgpool_nchwc_f32(&blocked, xb, yb);
    for (int64_t i = 0; i < c->batch * cb * out_sp * BLOCK; i++)
        ck_assert_msg(!isnan(yb[i]), "%s: lane %lld of Y not written", label, (long long)i);

    float *got = alloc_floats(c->batch * ch * out_sp);
    fxrt_from_nchwc_f32(c->batch, ch, out_sp, yb, got);
    for (int64_t i = 0; i < c->batch * ch * out_sp; i++)
        ck_assert_msg(fabsf(got[i] - ref[i]) <= 1e-6f * (1.0f + fabsf(ref[i])),
                      "%s: element %lld (plane %lld, pos %lld): %.7g, reference %.7g", label,
                      (long long)i, (long long)(i / out_sp), (long long)(i % out_sp),
                      (double)got[i], (double)ref[i]);
    free(x);
    free(ref);
    free(xb);
    free(yb);
    free(got);
}

/* batch, channels, h, w, kh, kw, sh, sw, dh, dw, pads t l b r, ceil, count_include_pad */
static const PoolCase cases[] = {
    {1, 64, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0}, /* ResNet's stem pool */
    {1, 64, 112, 112, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0}, /* GoogLeNet's, ceil_mode */
    {1, 192, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0},  /* inception branch 4 */
    {1, 128, 56, 56, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0},  /* DenseNet's transition */
    {2, 13, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
    {1, 5, 10, 9, 3, 3, 2, 2, 1, 1, 1, 0, 0, 1, 1, 0},     /* asymmetric pads, ceil */
    {1, 13, 12, 12, 3, 3, 2, 2, 2, 2, 2, 1, 0, 2, 0, 0},   /* dilation 2 */
    {1, 8, 11, 11, 5, 5, 3, 3, 1, 1, 2, 2, 2, 2, 1, 0},    /* stride 3 */
    {1, 8, 3, 4, 5, 7, 1, 1, 1, 1, 2, 3, 2, 3, 0, 0},      /* windows wider than the image */
    {1, 9, 7, 8, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0},      /* 1x1, strided */
    {1, 16, 13, 20, 3, 2, 1, 2, 1, 1, 1, 0, 1, 1, 0, 0},   /* kernels and strides differ */
    {2, 21, 6, 6, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3, 0, 0},
    {1, 8, 6, 30, 3, 21, 1, 1, 1, 1, 1, 10, 1, 10, 0, 0},  /* 10 border columns a side */
    {1, 832, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},  /* GoogLeNet's at 14x14 */
};

/* The instruction-set caps each case runs under: the host runtime's AVX2
 * runs, then its SSE2 taps alone (a no-op in the portable runtime). */
static const int isa_levels[] = {1, 0};

START_TEST(test_maxpool)
{
    for (size_t level = 0; level < sizeof isa_levels / sizeof isa_levels[0]; level++) {
        fxrt_pool_nchwc_limit_isa(isa_levels[level]);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char label[64];
            snprintf(label, sizeof label, "maxpool case %zu, isa %d", i, isa_levels[level]);
            check_pool(&cases[i], 1, label);
        }
    }
    fxrt_pool_nchwc_limit_isa(1);
}
END_TEST

START_TEST(test_avgpool)
{
    for (size_t level = 0; level < sizeof isa_levels / sizeof isa_levels[0]; level++) {
        fxrt_pool_nchwc_limit_isa(isa_levels[level]);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (int include_pad = 0; include_pad < 2; include_pad++) {
                PoolCase c = cases[i];
                c.count_include_pad = include_pad;
                char label[96];
                snprintf(label, sizeof label, "avgpool case %zu%s, isa %d", i,
                         include_pad ? ", count_include_pad" : "", isa_levels[level]);
                check_pool(&c, 0, label);
            }
    }
    fxrt_pool_nchwc_limit_isa(1);
}
END_TEST

static Suite *nchwc_pool_suite(void)
{
    Suite *s = suite_create("nchwc_pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_maxpool);
    tcase_add_test(tc, test_avgpool);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(nchwc_pool_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
