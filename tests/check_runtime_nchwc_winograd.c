/*
 * check_runtime_nchwc_winograd.c - the Winograd F(4x4, 3x3) convolution
 * (fxrt_conv_nchwc_winograd_f32) against the NCHW kernel fxrt_conv_f32 on
 * random inputs: X and the residual go through the reorders, W through the
 * Winograd packing, Y comes back through fxrt_from_nchwc_f32.  The shapes
 * cover partial tiles at the right and bottom edges (sizes 1 to 17), tiles
 * that overlap the padding on every side (asymmetric pads, pads wider than
 * the kernel's reach, "valid" convolutions), several bands, channel counts
 * off the blocks, batch 2, and every epilogue.  Padding lanes of Y must hold
 * act(0 + residual).
 *
 * Built twice like the other runtime suites: the host build's pointwise
 * products run on the AVX-512, AVX2 and portable tiles in turn
 * (fxrt_nchwc_conv_limit_isa), its transforms on AVX2 under the first two
 * and on the plain C under the third; the portable build is the plain C
 * of both.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"

typedef struct Case {
    int64_t batch, in_c, out_c, in_h, in_w;
    int64_t pad_top, pad_left, pad_bottom, pad_right;
    FxrtActivation act;
    int residual; /* 0 none, 1 before the activation, 2 after */
} Case;

static uint32_t rng_state;

static float rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f; /* [-1, 1) */
}

static float *rnd_array(int64_t n)
{
    float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    ck_assert_ptr_nonnull(a);
    for (int64_t i = 0; i < n; i++)
        a[i] = rnd();
    return a;
}

static FxrtConvParams params_of(const Case *c)
{
    FxrtConvParams p;
    memset(&p, 0, sizeof p);
    p.batch = c->batch;
    p.in_channels = c->in_c;
    p.out_channels = c->out_c;
    p.groups = 1;
    int64_t in[3] = {1, c->in_h, c->in_w};
    int64_t pb[3] = {0, c->pad_top, c->pad_left}, pe[3] = {0, c->pad_bottom, c->pad_right};
    for (int i = 0; i < 3; i++) {
        p.in_size[i] = in[i];
        p.kernel[i] = i ? 3 : 1;
        p.stride[i] = 1;
        p.dilation[i] = 1;
        p.pad_begin[i] = pb[i];
        p.out_size[i] = in[i] + pb[i] + pe[i] - (p.kernel[i] - 1);
    }
    return p;
}

static void check_case(const Case *c, uint32_t seed)
{
    rng_state = seed;
    FxrtConvParams p = params_of(c);
    ck_assert(fxrt_conv_nchwc_winograd_applies(&p));
    int64_t out_sp = p.out_size[1] * p.out_size[2], in_sp = c->in_h * c->in_w;
    ck_assert_int_gt(out_sp, 0);
    int64_t icb = fxrt_nchwc_blocks(c->in_c), ocb = fxrt_nchwc_blocks(c->out_c);
    int64_t y_n = c->batch * c->out_c * out_sp, yb_n = c->batch * ocb * out_sp * 8;
    float *x = rnd_array(c->batch * c->in_c * in_sp);
    float *w = rnd_array(c->out_c * c->in_c * 9);
    float *bias = rnd_array(ocb * 8);
    for (int64_t i = c->out_c; i < ocb * 8; i++)
        bias[i] = 0.0f;
    float *res = rnd_array(y_n);

    FxrtEpilogue ep;
    memset(&ep, 0, sizeof ep);
    ep.bias = bias;
    ep.activation = (int32_t)c->act;
    ep.residual_after = c->residual == 2;
    if (c->act == FXRT_ACT_CLIP) {
        ep.alpha = -0.5f;
        ep.beta = 0.75f;
    } else if (c->act == FXRT_ACT_LEAKY_RELU) {
        ep.alpha = 0.1f;
    } else if (c->act == FXRT_ACT_HARD_SIGMOID) {
        ep.alpha = 0.2f;
        ep.beta = 0.5f;
    } else if (c->act == FXRT_ACT_GELU) {
        ep.alpha = 0.5f;
    }

    float *want = malloc((size_t)y_n * sizeof *want);
    float *scratch = malloc((size_t)(fxrt_conv_scratch_floats(&p) + 1) * sizeof *scratch);
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(scratch);
    FxrtEpilogue ep_ref = ep;
    ep_ref.residual = c->residual ? res : NULL;
    fxrt_conv_f32(&p, x, w, &ep_ref, want, scratch);

    float *xb = malloc((size_t)(c->batch * icb * in_sp * 8) * sizeof *xb);
    float *packed = malloc((size_t)fxrt_conv_nchwc_winograd_packed_floats(&p) * sizeof *packed);
    float *wscratch = malloc((size_t)fxrt_conv_nchwc_winograd_scratch_floats(&p) * sizeof *wscratch);
    float *res_b = malloc((size_t)yb_n * sizeof *res_b);
    float *yb = malloc((size_t)yb_n * sizeof *yb);
    float *got = malloc((size_t)y_n * sizeof *got);
    ck_assert_ptr_nonnull(xb);
    ck_assert_ptr_nonnull(packed);
    ck_assert_ptr_nonnull(wscratch);
    ck_assert_ptr_nonnull(res_b);
    ck_assert_ptr_nonnull(yb);
    ck_assert_ptr_nonnull(got);
    fxrt_to_nchwc_f32(c->batch, c->in_c, in_sp, x, xb);
    fxrt_conv_nchwc_winograd_pack_f32(&p, w, packed);
    fxrt_to_nchwc_f32(c->batch, c->out_c, out_sp, res, res_b);
    /* Nonzero residual padding lanes, so that they show up in Y's; NaN in
     * the scratch and in Y, so that a value read before it is written
     * shows up too. */
    for (int64_t i = 0; i < yb_n; i++)
        if ((i / (out_sp * 8)) % ocb * 8 + i % 8 >= c->out_c)
            res_b[i] = rnd();
    for (int64_t i = 0; i < yb_n; i++)
        yb[i] = NAN;
    for (int64_t i = 0; i < fxrt_conv_nchwc_winograd_scratch_floats(&p); i++)
        wscratch[i] = NAN;
    FxrtEpilogue ep_k = ep;
    ep_k.residual = c->residual ? res_b : NULL;
    fxrt_conv_nchwc_winograd_f32(&p, xb, packed, &ep_k, yb, wscratch);
    fxrt_from_nchwc_f32(c->batch, c->out_c, out_sp, yb, got);

    /* F(4x4, 3x3) loses about two more decimal digits than the direct
     * sum (its transforms scale by up to 8 and 1/24 and cancel): the
     * bound is 1e-5 of the outputs' magnitude per sqrt of the terms, 50x
     * the direct kernel suite's; measured errors stay below 0.4 of
     * it. */
    float scale = 1.0f;
    for (int64_t i = 0; i < y_n; i++)
        scale = fabsf(want[i]) > scale ? fabsf(want[i]) : scale;
    float tol = 1e-5f * scale * sqrtf((float)(c->in_c * 9)) + 1e-6f;
    for (int64_t i = 0; i < y_n; i++)
        ck_assert_msg(fabsf(got[i] - want[i]) <= tol,
                      "case %ux%u %ux%u pads %u,%u,%u,%u: Y[%ld] = %g, want %g (tol %g)",
                      (unsigned)c->in_c, (unsigned)c->out_c, (unsigned)c->in_h,
                      (unsigned)c->in_w, (unsigned)c->pad_top, (unsigned)c->pad_left,
                      (unsigned)c->pad_bottom, (unsigned)c->pad_right, (long)i, (double)got[i],
                      (double)want[i], (double)tol);
    for (int64_t i = 0; i < yb_n; i++) {
        if ((i / (out_sp * 8)) % ocb * 8 + i % 8 < c->out_c)
            continue;
        float pad = 0.0f;
        FxrtEpilogue ep_pad = ep;
        ep_pad.bias = NULL;
        ep_pad.residual = c->residual ? res_b + i : NULL;
        fxrt_epilogue_apply_f32(&ep_pad, 0, 0, 1, 1, &pad, 1);
        ck_assert_msg(fabsf(yb[i] - pad) <= 1e-6f, "padding lane %ld = %g, want %g", (long)i,
                      (double)yb[i], (double)pad);
    }
    free(x);
    free(w);
    free(bias);
    free(res);
    free(want);
    free(scratch);
    free(xb);
    free(packed);
    free(wscratch);
    free(res_b);
    free(yb);
    free(got);
}

/* A "same" convolution, relu, no residual. */
static Case same(int64_t in_c, int64_t out_c, int64_t h, int64_t w)
{
    Case c = {1, in_c, out_c, h, w, 1, 1, 1, 1, FXRT_ACT_RELU, 0};
    return c;
}

START_TEST(test_image_sizes)
{
    /* Every remainder of the 4x4 tiles, images smaller than one tile. */
    for (int64_t h = 1; h <= 17; h += 2)
        for (int64_t w = 1; w <= 17; w += 3) {
            Case c = same(8, 8, h, w);
            check_case(&c, (uint32_t)(100 + h * 20 + w));
        }
}
END_TEST

START_TEST(test_padding)
{
    /* Valid, asymmetric, and pads past the kernel's reach (whole tiles of
     * only padding). */
    check_case(&(Case){1, 16, 16, 12, 13, 0, 0, 0, 0, FXRT_ACT_NONE, 0}, 200u);
    check_case(&(Case){1, 16, 24, 11, 9, 0, 2, 2, 0, FXRT_ACT_NONE, 0}, 201u);
    check_case(&(Case){1, 8, 16, 6, 7, 2, 1, 0, 2, FXRT_ACT_RELU, 0}, 202u);
    check_case(&(Case){1, 9, 9, 5, 5, 4, 3, 5, 4, FXRT_ACT_RELU, 1}, 203u);
    check_case(&(Case){1, 16, 8, 3, 3, 0, 0, 0, 0, FXRT_ACT_NONE, 0}, 204u);
}
END_TEST

START_TEST(test_channel_counts)
{
    /* Channels below, at and past the blocks; enough input blocks for the
     * pointwise kernel's weight chunks. */
    int64_t cs[] = {1, 7, 8, 9, 20, 33, 72};
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 7; j += 2) {
            Case c = same(cs[i], cs[j], 9, 10);
            check_case(&c, (uint32_t)(300 + i * 10 + j));
        }
    Case wide = same(264, 40, 6, 6);
    check_case(&wide, 390u);
}
END_TEST

START_TEST(test_bands)
{
    /* More tiles than one band holds (the band is at least 32 tiles, at
     * most 1 MiB of planes): 64 + 64 channels over 40x44 is 110 tiles in
     * two bands of 55; 256 + 256 over 28x28 is 49 tiles in bands of 25. */
    Case many = same(64, 64, 40, 44);
    check_case(&many, 400u);
    Case wide = {1, 256, 256, 28, 28, 1, 1, 1, 1, FXRT_ACT_RELU, 1};
    check_case(&wide, 401u);
    Case batch = {2, 24, 40, 30, 21, 1, 1, 1, 1, FXRT_ACT_CLIP, 2};
    check_case(&batch, 402u);
}
END_TEST

START_TEST(test_epilogues)
{
    for (int act = FXRT_ACT_NONE; act <= FXRT_ACT_SILU; act++)
        for (int residual = 0; residual <= 2; residual++) {
            Case c = {1, 20, 44, 9, 10, 1, 1, 1, 1, (FxrtActivation)act, residual};
            check_case(&c, (uint32_t)(500 + act * 10 + residual));
        }
}
END_TEST

START_TEST(test_bench_shapes)
{
    /* The 3x3 layers of ResNet, GoogLeNet and DenseNet, at reduced size. */
    check_case(&(Case){1, 64, 64, 28, 28, 1, 1, 1, 1, FXRT_ACT_RELU, 0}, 600u);
    check_case(&(Case){1, 128, 128, 14, 14, 1, 1, 1, 1, FXRT_ACT_RELU, 1}, 601u);
    check_case(&(Case){1, 96, 208, 14, 14, 1, 1, 1, 1, FXRT_ACT_RELU, 0}, 602u);
    check_case(&(Case){1, 160, 320, 7, 7, 1, 1, 1, 1, FXRT_ACT_RELU, 0}, 603u);
}
END_TEST

START_TEST(test_applies)
{
    Case c = same(8, 8, 8, 8);
    FxrtConvParams p = params_of(&c);
    ck_assert(fxrt_conv_nchwc_winograd_applies(&p));
    FxrtConvParams strided = p;
    strided.stride[2] = 2;
    ck_assert(!fxrt_conv_nchwc_winograd_applies(&strided));
    FxrtConvParams dilated = p;
    dilated.dilation[1] = 2;
    ck_assert(!fxrt_conv_nchwc_winograd_applies(&dilated));
    FxrtConvParams grouped = p;
    grouped.groups = 8;
    ck_assert(!fxrt_conv_nchwc_winograd_applies(&grouped));
    FxrtConvParams five = p;
    five.kernel[1] = five.kernel[2] = 5;
    ck_assert(!fxrt_conv_nchwc_winograd_applies(&five));
}
END_TEST

static void use_avx512(void) { fxrt_nchwc_conv_limit_isa(2); }
static void use_avx2(void) { fxrt_nchwc_conv_limit_isa(1); }
static void use_portable(void) { fxrt_nchwc_conv_limit_isa(0); }

static Suite *winograd_suite(void)
{
    Suite *s = suite_create("nchwc_winograd");
    const char *names[] = {"widest", "avx2", "portable"};
    void (*caps[])(void) = {use_avx512, use_avx2, use_portable};
    for (int k = 0; k < 3; k++) {
        TCase *tc = tcase_create(names[k]);
        tcase_add_checked_fixture(tc, caps[k], use_avx512);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_image_sizes);
        tcase_add_test(tc, test_padding);
        tcase_add_test(tc, test_channel_counts);
        tcase_add_test(tc, test_bands);
        tcase_add_test(tc, test_epilogues);
        tcase_add_test(tc, test_bench_shapes);
        tcase_add_test(tc, test_applies);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(winograd_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
