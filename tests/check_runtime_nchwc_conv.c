/*
 * check_runtime_nchwc_conv.c - the NCHWc convolution (fxrt_conv_nchwc_f32,
 * groups 1; groups > 1 only as far as the dispatch to the depthwise kernel)
 * against the NCHW kernel fxrt_conv_f32 on random
 * inputs: X (blocked or plain) and the residual go through the reorders, W
 * through the packing, Y comes back through fxrt_from_nchwc_f32.  The
 * shapes cover the kernel's paths: tiles narrower than the image and wider,
 * clipped kernel rows and columns (asymmetric pads, dilation, windows that
 * hang over both edges), input-channel chunks, several output block groups
 * of uneven sizes, and every epilogue.  Padding lanes of Y must hold
 * act(0 + residual) (act(0) + residual with the residual after).
 * Pointwise and depthwise cases also run in place (fxrt_conv_nchwc_inplace_f32, Y over a
 * copy of X), checked the same way.  1x1 layers with large inputs, which
 * copy the pixels they read into scratch a slab at a time and run as
 * pointwise ones (strided, or wide at stride 1), also run without the
 * scratch (the general path), and must not write past the scratch they ask
 * for.
 * The suite is built twice (tests/CMakeLists.txt): check_runtime_nchwc_conv
 * links the host runtime, whose tile kernels are AVX-512 or AVX2/FMA where
 * the CPU has them, and check_runtime_nchwc_conv_portable the runtime built
 * without FXRT_USE_CBLAS, whose plain C tile kernel is the one a Cortex-M
 * runs.  The host build runs every case three times, with the tiles capped
 * at AVX-512, AVX2 and portable C (fxrt_nchwc_conv_limit_isa), so that one
 * machine checks all three; a CPU without AVX-512 runs its AVX2 tiles twice.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"

typedef struct Case {
    int64_t batch, in_c, out_c, in_h, in_w, kernel_h, kernel_w;
    int64_t stride_h, stride_w, dil_h, dil_w;
    int64_t pad_top, pad_left, pad_bottom, pad_right;
    int x_blocked;
    int bias;
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
    float *a = malloc((size_t)n * sizeof *a);
    ck_assert_ptr_nonnull(a);
    for (int64_t i = 0; i < n; i++)
        a[i] = rnd();
    return a;
}

static FxrtConvParams params_of(const Case *c, int64_t groups)
{
    FxrtConvParams p;
    memset(&p, 0, sizeof p);
    p.batch = c->batch;
    p.in_channels = c->in_c;
    p.out_channels = c->out_c;
    p.groups = groups;
    int64_t in[3] = {1, c->in_h, c->in_w}, k[3] = {1, c->kernel_h, c->kernel_w};
    int64_t s[3] = {1, c->stride_h, c->stride_w}, d[3] = {1, c->dil_h, c->dil_w};
    int64_t pb[3] = {0, c->pad_top, c->pad_left}, pe[3] = {0, c->pad_bottom, c->pad_right};
    for (int i = 0; i < 3; i++) {
        p.in_size[i] = in[i];
        p.kernel[i] = k[i];
        p.stride[i] = s[i];
        p.dilation[i] = d[i];
        p.pad_begin[i] = pb[i];
        p.out_size[i] = (in[i] + pb[i] + pe[i] - d[i] * (k[i] - 1) - 1) / s[i] + 1;
    }
    return p;
}

/* Case c with `groups` groups (1, or in_c for a depthwise convolution). */
static void check_grouped(const Case *c, int64_t groups, uint32_t seed)
{
    rng_state = seed;
    FxrtConvParams p = params_of(c, groups);
    int64_t out_h = p.out_size[1], out_w = p.out_size[2], out_sp = out_h * out_w;
    int64_t in_sp = c->in_h * c->in_w;
    ck_assert_int_gt(out_h, 0);
    ck_assert_int_gt(out_w, 0);
    int64_t icb = fxrt_nchwc_blocks(c->in_c), ocb = fxrt_nchwc_blocks(c->out_c);
    int64_t y_n = c->batch * c->out_c * out_sp, yb_n = c->batch * ocb * out_sp * 8;
    float *x = rnd_array(c->batch * c->in_c * in_sp);
    float *w = rnd_array(c->out_c * (c->in_c / p.groups) * c->kernel_h * c->kernel_w);
    float *bias = rnd_array(ocb * 8);
    for (int64_t i = c->out_c; i < ocb * 8; i++)
        bias[i] = 0.0f;
    float *res = rnd_array(y_n);

    FxrtEpilogue ep;
    memset(&ep, 0, sizeof ep);
    ep.bias = c->bias ? bias : NULL;
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

    /* The reference, NCHW. */
    float *want = malloc((size_t)y_n * sizeof *want);
    float *scratch = malloc((size_t)(fxrt_conv_scratch_floats(&p) + 1) * sizeof *scratch);
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(scratch);
    FxrtEpilogue ep_ref = ep;
    ep_ref.residual = c->residual ? res : NULL;
    fxrt_conv_f32(&p, x, w, &ep_ref, want, scratch);

    /* The kernel, NCHWc. */
    float *xk = x, *xb = NULL;
    if (c->x_blocked) {
        xb = malloc((size_t)(c->batch * icb * in_sp * 8) * sizeof *xb);
        ck_assert_ptr_nonnull(xb);
        fxrt_to_nchwc_f32(c->batch, c->in_c, in_sp, x, xb);
        xk = xb;
    }
    float *packed = malloc((size_t)fxrt_conv_nchwc_packed_floats(&p, c->x_blocked) * sizeof *packed);
    float *res_b = malloc((size_t)yb_n * sizeof *res_b);
    float *yb = malloc((size_t)yb_n * sizeof *yb);
    float *got = malloc((size_t)y_n * sizeof *got);
    ck_assert_ptr_nonnull(packed);
    ck_assert_ptr_nonnull(res_b);
    ck_assert_ptr_nonnull(yb);
    ck_assert_ptr_nonnull(got);
    fxrt_conv_nchwc_pack_f32(&p, c->x_blocked, w, packed);
    fxrt_to_nchwc_f32(c->batch, c->out_c, out_sp, res, res_b);
    /* Nonzero residual padding lanes, so that they show up in Y's. */
    for (int64_t i = 0; i < yb_n; i++)
        if ((i / (out_sp * 8)) % ocb * 8 + i % 8 >= c->out_c)
            res_b[i] = rnd();
    FxrtEpilogue ep_k = ep;
    ep_k.residual = c->residual ? res_b : NULL;
    /* Mode 0: Y apart from X, with the scratch fxrt_conv_nchwc_f32 asks for
     * and guard values past it; where they apply, mode 1: the same without
     * scratch; mode 2: Y over a copy of X with exactly the scratch
     * fxrt_conv_nchwc_inplace_f32 asks for; mode 3: Y over a copy of the
     * residual, which is ep's residual too (a residual added before the
     * activation, groups 1: the plan's accumulates_into). */
    enum { GUARD = 64 };
    const float guard_value = 12345.0f;
    int64_t scratch_floats = fxrt_conv_nchwc_scratch_floats(&p, c->x_blocked);
    for (int mode = 0; mode < 4; mode++) {
        int inplace = mode == 2, over_residual = mode == 3;
        if ((mode == 1 && scratch_floats == 0) ||
            (inplace && !fxrt_conv_nchwc_inplace_applies(&p, c->x_blocked)) ||
            (over_residual && (groups != 1 || c->residual != 1)))
            continue;
        if (inplace) {
            /* A depthwise layer of stride 2 makes Y smaller than X. */
            int64_t xb_n = c->batch * icb * in_sp * 8;
            ck_assert_int_ge(xb_n, yb_n);
            float *xy = malloc((size_t)xb_n * sizeof *xy);
            float *inplace_scratch =
                malloc((size_t)fxrt_conv_nchwc_inplace_scratch_floats(&p) * sizeof *inplace_scratch);
            ck_assert_ptr_nonnull(xy);
            ck_assert_ptr_nonnull(inplace_scratch);
            memcpy(xy, xb, (size_t)xb_n * sizeof *xy);
            fxrt_conv_nchwc_inplace_f32(&p, xy, packed, &ep_k, inplace_scratch);
            memcpy(yb, xy, (size_t)yb_n * sizeof *yb);
            free(xy);
            free(inplace_scratch);
        } else {
            FxrtEpilogue ep_y = ep_k;
            if (over_residual) {
                memcpy(yb, res_b, (size_t)yb_n * sizeof *yb);
                ep_y.residual = yb;
            } else {
                for (int64_t i = 0; i < yb_n; i++)
                    yb[i] = NAN;
            }
            float *conv_scratch = malloc((size_t)(scratch_floats + GUARD) * sizeof *conv_scratch);
            ck_assert_ptr_nonnull(conv_scratch);
            for (int64_t i = 0; i < scratch_floats + GUARD; i++)
                conv_scratch[i] = guard_value;
            fxrt_conv_nchwc_f32(&p, c->x_blocked, xk, packed, &ep_y, yb,
                                mode != 1 && scratch_floats ? conv_scratch : NULL);
            for (int64_t i = scratch_floats; i < scratch_floats + GUARD; i++)
                ck_assert_msg(conv_scratch[i] == guard_value, "scratch[%ld] past the end written",
                              (long)i);
            free(conv_scratch);
        }
        fxrt_from_nchwc_f32(c->batch, c->out_c, out_sp, yb, got);

        float scale = 1.0f;
        for (int64_t i = 0; i < y_n; i++)
            scale = fabsf(want[i]) > scale ? fabsf(want[i]) : scale;
        float tol = 2e-6f * scale * sqrtf((float)(c->in_c * c->kernel_h * c->kernel_w)) + 1e-6f;
        for (int64_t i = 0; i < y_n; i++)
            ck_assert_msg(fabsf(got[i] - want[i]) <= tol,
                          "case %ux%ux%ux%u k%ux%u%s: Y[%ld] = %g, want %g (tol %g)",
                          (unsigned)c->in_c, (unsigned)c->out_c, (unsigned)c->in_h,
                          (unsigned)c->in_w, (unsigned)c->kernel_h, (unsigned)c->kernel_w,
                          mode == 3   ? " over the residual"
                          : mode == 2 ? " in place"
                          : mode == 1 ? " without scratch"
                                      : "",
                          (long)i,
                          (double)got[i], (double)want[i], (double)tol);
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
    }
    free(x);
    free(w);
    free(bias);
    free(res);
    free(want);
    free(scratch);
    free(xb);
    free(packed);
    free(res_b);
    free(yb);
    free(got);
}

static void check_case(const Case *c, uint32_t seed) { check_grouped(c, 1, seed); }

/* A stride-1 "same" conv of the given size with no epilogue. */
static Case simple(int64_t in_c, int64_t out_c, int64_t h, int64_t w, int64_t k)
{
    Case c = {1, in_c, out_c, h, w, k, k, 1, 1, 1, 1, k / 2, k / 2, (k - 1) / 2, (k - 1) / 2,
              1, 0, FXRT_ACT_NONE, 0};
    return c;
}

START_TEST(test_kernel_sizes)
{
    int64_t ks[] = {1, 3, 5};
    for (int i = 0; i < 3; i++) {
        check_case(&(Case){1, 16, 16, 9, 11, ks[i], ks[i], 1, 1, 1, 1, ks[i] / 2, ks[i] / 2,
                           ks[i] / 2, ks[i] / 2, 1, 1, FXRT_ACT_NONE, 0},
                   11u + (uint32_t)i);
        check_case(&(Case){1, 13, 21, 7, 6, ks[i], ks[i], 1, 1, 1, 1, 0, 0, 0, 0, 1, 1,
                           FXRT_ACT_RELU, 0},
                   21u + (uint32_t)i);
    }
    /* DS-CNN's first layer shape, but blocked input; and a tall kernel. */
    check_case(&(Case){1, 5, 12, 15, 10, 10, 4, 2, 2, 1, 1, 4, 1, 5, 2, 1, 1, FXRT_ACT_RELU, 0},
               31u);
    check_case(&(Case){1, 9, 7, 12, 5, 4, 10, 1, 1, 1, 1, 1, 4, 2, 5, 1, 0, FXRT_ACT_NONE, 0},
               32u);
}
END_TEST

START_TEST(test_channel_counts)
{
    /* Channels below, at and past multiples of 8; output block counts 1..9
     * split into groups of uneven sizes. */
    int64_t cs[] = {1, 7, 8, 9, 16, 20, 24, 33, 40, 72};
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 10; j += 3)
            check_case(&(Case){1, cs[i], cs[j], 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                               FXRT_ACT_NONE, 0},
                       (uint32_t)(100 + i * 10 + j));
    /* Enough input blocks to need several chunks of weights. */
    check_case(&(Case){1, 136, 40, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_NONE, 0},
               200u);
    check_case(&(Case){1, 320, 36, 3, 4, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, FXRT_ACT_RELU, 1},
               201u);
    /* Weights and image both larger than half of an L2 (up to 2 MiB): chunks
     * of input channels outermost, the groups passing over each; the 3x3
     * also in several bands of rows where L2 is small. */
    check_case(&(Case){1, 1024, 320, 16, 18, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, FXRT_ACT_RELU, 1},
               202u);
    check_case(&(Case){1, 128, 256, 40, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_NONE, 0},
               203u);
}
END_TEST

START_TEST(test_stride_pad_dilation)
{
    /* Stride 2, asymmetric pads, dilation 2, stride 2 with dilation. */
    check_case(&(Case){1, 16, 32, 16, 16, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 1, 1, FXRT_ACT_NONE, 0},
               300u);
    check_case(&(Case){1, 12, 10, 11, 13, 3, 3, 1, 1, 1, 1, 0, 2, 2, 0, 1, 1, FXRT_ACT_NONE, 0},
               301u);
    check_case(&(Case){1, 16, 16, 12, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, 1, FXRT_ACT_NONE, 0},
               302u);
    check_case(&(Case){1, 8, 24, 13, 14, 3, 5, 2, 1, 2, 2, 3, 1, 0, 4, 1, 0, FXRT_ACT_NONE, 0},
               303u);
    check_case(&(Case){1, 16, 32, 15, 15, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0, FXRT_ACT_NONE, 0},
               304u);
    /* Pads wider than the kernel reach: whole rows and columns of only
     * padding. */
    check_case(&(Case){1, 9, 9, 4, 4, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3, 1, 1, FXRT_ACT_RELU, 0},
               305u);
}
END_TEST

START_TEST(test_narrow_images)
{
    /* Narrower than any tile, width 1, height 1, a window wider than the
     * image on both sides. */
    check_case(&(Case){1, 16, 32, 5, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_NONE, 0},
               400u);
    check_case(&(Case){1, 16, 16, 7, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_NONE, 0},
               401u);
    check_case(&(Case){1, 24, 8, 1, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_NONE, 0},
               402u);
    check_case(&(Case){1, 8, 16, 3, 3, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3, 1, 1, FXRT_ACT_NONE, 0},
               403u);
    Case one = simple(16, 16, 1, 1, 1);
    check_case(&one, 404u);
    /* Rows of at most 8 outputs take AVX-512's tiles of up to 8 blocks:
     * ResNet's late 3x3 at 7x7 (64 channels, all 8 blocks), an odd block
     * count with a residual, a 5x5 on rows of 8 and a dilated 3x3 on rows
     * of 6; a stride-2 layer keeps the 4-block tiles. */
    check_case(&(Case){1, 24, 64, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_RELU, 0},
               405u);
    check_case(&(Case){1, 16, 52, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_RELU, 1},
               406u);
    check_case(&(Case){1, 8, 40, 9, 8, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, FXRT_ACT_CLIP, 2},
               407u);
    check_case(&(Case){1, 8, 48, 10, 6, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, 0, FXRT_ACT_NONE, 0},
               408u);
    check_case(&(Case){1, 16, 64, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_RELU, 0},
               409u);
}
END_TEST

START_TEST(test_batch)
{
    check_case(&(Case){2, 12, 20, 7, 9, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_RELU, 1},
               500u);
    check_case(&(Case){2, 3, 16, 9, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 1, FXRT_ACT_NONE, 2},
               501u);
}
END_TEST

START_TEST(test_plain_input)
{
    /* First layers: ResNet's 3 -> 16, MobileNet's stem, DS-CNN's 1 -> 64
     * 10x4 stride 2; plus odd shapes and ResNet's 7x7 stride-2 stem. */
    check_case(&(Case){1, 3, 16, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, FXRT_ACT_RELU, 0},
               600u);
    check_case(&(Case){1, 3, 32, 17, 19, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 0, 1, FXRT_ACT_CLIP, 0},
               601u);
    check_case(&(Case){1, 1, 64, 49, 10, 10, 4, 2, 2, 1, 1, 4, 1, 5, 2, 0, 1, FXRT_ACT_RELU, 0},
               602u);
    check_case(&(Case){1, 1, 5, 6, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, FXRT_ACT_NONE, 1},
               603u);
    check_case(&(Case){1, 2, 12, 8, 7, 3, 3, 1, 1, 2, 2, 2, 1, 2, 1, 0, 0, FXRT_ACT_NONE, 0},
               604u);
    check_case(&(Case){1, 1, 16, 9, 11, 3, 5, 2, 1, 2, 2, 2, 3, 1, 3, 0, 1, FXRT_ACT_NONE, 0},
               605u);
    check_case(&(Case){1, 3, 56, 23, 21, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 0, 1, FXRT_ACT_RELU, 1},
               606u);
    /* AVX-512's tiles of 5 to 8 blocks, which a plain input takes when it
     * outweighs the weights, in spans of every length from 1 to 8 pixels:
     * the n interior columns of a tall image n + 2 wide at 3x3. */
    int64_t outs[] = {40, 48, 56, 64};
    for (int i = 0; i < 4; i++)
        for (int64_t n = 1; n <= 8; n++)
            check_case(&(Case){1, 3, outs[i], 440 / (n + 2) + 2, n + 2, 3, 3, 1, 1, 1, 1, 1, 1,
                               1, 1, 0, 1, FXRT_ACT_RELU, (int)(n % 3)},
                       (uint32_t)(610 + i * 10 + n));
}
END_TEST

START_TEST(test_epilogues)
{
    /* Every activation, each with the residual before and after, on a shape
     * with border columns, several output block groups and padding lanes. */
    for (int act = FXRT_ACT_NONE; act <= FXRT_ACT_SILU; act++)
        for (int residual = 0; residual <= 2; residual++)
            for (int blocked = 0; blocked <= 1; blocked++) {
                Case c = {1, blocked ? 20 : 3, 44, 6, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1,
                          blocked, 1, (FxrtActivation)act, residual};
                check_case(&c, (uint32_t)(700 + act * 10 + residual * 2 + blocked));
            }
    /* The activations applied after the store, on the paths that split the
     * work differently: several weight chunks (3x3 and 1x1), pointwise rows
     * of several image rows, batch 2. */
    check_case(&(Case){1, 72, 24, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_SIGMOID, 2},
               790u);
    check_case(&(Case){1, 400, 20, 3, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, FXRT_ACT_TANH, 1},
               791u);
    check_case(&(Case){2, 16, 24, 30, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, FXRT_ACT_GELU, 1},
               792u);
    check_case(&(Case){2, 40, 12, 30, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, FXRT_ACT_CLIP, 2},
               793u);
}
END_TEST

START_TEST(test_mlperf_tiny_layers)
{
    /* The layers of bench/make_models.py's MLPerf Tiny models that the
     * small build's register tiles (fxrt_nn_conv_mcu.c: 3 pixels at a
     * time, a rest of 1 or 2 as the last 3 again or pixel by pixel) run
     * on the Cortex-M4: DS-CNN's 10x4 stride-2 stem on one plain channel
     * (border columns on both sides), VWW's 3x3 stride-2 stem on three
     * with TensorFlow's pads at the end only, ResNet-8's stride-2 3x3 and
     * 1x1 shortcut, and pointwise layers on rows of 1 to 7 pixels, clip and
     * a residual in Y among them. */
    check_case(&(Case){1, 1, 64, 49, 10, 10, 4, 2, 2, 1, 1, 4, 1, 5, 1, 0, 1, FXRT_ACT_RELU, 0},
               900u);
    check_case(&(Case){1, 3, 8, 96, 96, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 0, 1, FXRT_ACT_RELU, 0},
               901u);
    check_case(&(Case){1, 16, 32, 32, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_RELU, 0},
               902u);
    check_case(&(Case){1, 16, 32, 32, 32, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, FXRT_ACT_NONE, 0},
               903u);
    for (int w = 1; w <= 7; w++)
        for (int residual = 0; residual <= 1; residual++)
            check_case(&(Case){1, 24, 20, 3, w, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1,
                               residual ? FXRT_ACT_CLIP : FXRT_ACT_RELU, residual},
                       (uint32_t)(910 + 2 * w + residual));
    /* a 3x3 layer whose rows hold 1 to 5 interior pixels, residual in Y */
    for (int w = 3; w <= 7; w++)
        check_case(&(Case){1, 8, 16, 4, w, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_RELU, 1},
                   (uint32_t)(930 + w));
}
END_TEST

START_TEST(test_bench_shapes)
{
    /* The layers of the benchmark models, at reduced size where big. */
    check_case(&(Case){1, 16, 16, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_RELU, 0},
               800u);
    check_case(&(Case){1, 32, 64, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_RELU, 0},
               801u);
    check_case(&(Case){1, 64, 64, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_NONE, 1},
               802u);
    check_case(&(Case){1, 24, 144, 14, 14, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, FXRT_ACT_CLIP, 0},
               803u);
    check_case(&(Case){1, 160, 960, 7, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, FXRT_ACT_CLIP, 0},
               804u);
    check_case(&(Case){1, 64, 64, 25, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, FXRT_ACT_RELU, 0},
               805u);
}
END_TEST

START_TEST(test_wide_pointwise_tiles)
{
    /* AVX-512 runs the pointwise layers whose image outweighs their
     * weights (64 pixels and more here) on tiles of 5 to 8 output blocks
     * (the others up to 4): each block count, with images whose pixels
     * split into tiles of every size the path takes (64, 65, 70 and 66
     * pixels: 8 and 7 pixels for 5 and 6 blocks, 6 and 5 for 7 and 8),
     * input channels in chunks (264 in), the residual. */
    int64_t outs[] = {40, 48, 56, 64};
    int64_t sizes[][2] = {{8, 8}, {13, 5}, {10, 7}, {6, 11}};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            check_case(&(Case){1, 24, outs[i], sizes[j][0], sizes[j][1], 1, 1, 1, 1, 1, 1, 0, 0,
                               0, 0, 1, 1, FXRT_ACT_RELU, j % 3},
                       (uint32_t)(850 + i * 10 + j));
    check_case(&(Case){1, 264, 56, 9, 12, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, FXRT_ACT_NONE, 1},
               899u);
}
END_TEST

/* Case c, which must (or must not) take the slab path: the pixels of X it
 * reads copied into scratch, then the pointwise kernel.  The small kernels
 * (FXRT_SMALL_KERNELS) never take it. */
static void check_slab_pointwise(const Case *c, int takes_path, uint32_t seed)
{
    FxrtConvParams p = params_of(c, 1);
    int64_t scratch_floats = fxrt_conv_nchwc_scratch_floats(&p, c->x_blocked);
    if (FXRT_SMALL_KERNELS || !takes_path)
        ck_assert_int_eq(scratch_floats, 0);
    else
        ck_assert_int_gt(scratch_floats, 0);
    check_case(c, seed);
}

START_TEST(test_slab_pointwise)
{
    /* The layers are large enough for the path (small images stay in
     * cache and run as they are).  ResNet's downsample shape: stride 2, an
     * even image, bias and relu. */
    check_slab_pointwise(&(Case){1, 64, 128, 24, 24, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_RELU, 0},
                         1, 1000u);
    /* Odd sizes (the last row and column of X unread), channel counts off
     * the block size, the residual before and after, several activations
     * (clip on the registers, tanh after the store). */
    check_slab_pointwise(&(Case){1, 20, 44, 41, 39, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_CLIP, 1},
                         1, 1001u);
    check_slab_pointwise(&(Case){1, 21, 13, 43, 37, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0,
                                 FXRT_ACT_TANH, 2},
                         1, 1002u);
    /* Stride (2, 1), (1, 2) and 3: whole rows, single columns skipped. */
    check_slab_pointwise(&(Case){1, 24, 16, 40, 36, 1, 1, 2, 1, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_SILU, 2},
                         1, 1003u);
    check_slab_pointwise(&(Case){1, 13, 21, 45, 50, 1, 1, 1, 2, 1, 1, 0, 0, 0, 0, 1, 0,
                                 FXRT_ACT_NONE, 0},
                         1, 1004u);
    check_slab_pointwise(&(Case){1, 40, 24, 47, 38, 1, 1, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_SIGMOID, 1},
                         1, 1005u);
    /* Images in slabs of output rows, the last one short; weights larger
     * than the subsampled image (one slab, the whole image); batch 2 with
     * a residual. */
    check_slab_pointwise(&(Case){1, 72, 40, 30, 62, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_RELU, 1},
                         1, 1006u);
    check_slab_pointwise(&(Case){1, 264, 136, 24, 22, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_RELU, 0},
                         1, 1007u);
    check_slab_pointwise(&(Case){2, 36, 52, 28, 34, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_LEAKY_RELU, 2},
                         1, 1008u);
    /* Stride 1, a wide input over 1 MiB: slabs of 4 rows, the last one of
     * 1, channel counts off the block size, the residual; batch 2.  (The
     * scratch is asked for; the AVX-512 tiles read such a layer in place
     * and leave it unused.) */
    check_slab_pointwise(&(Case){1, 260, 20, 37, 29, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_RELU, 1},
                         1, 1014u);
    check_slab_pointwise(&(Case){2, 300, 12, 36, 30, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_SILU, 2},
                         1, 1015u);
    /* Stride 1 and not this path: fewer than 256 channels, under 1 MiB,
     * weights larger than the image. */
    check_slab_pointwise(&(Case){1, 200, 20, 50, 40, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_RELU, 0},
                         0, 1016u);
    check_slab_pointwise(&(Case){1, 264, 20, 20, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_RELU, 0},
                         0, 1017u);
    check_slab_pointwise(&(Case){1, 1032, 264, 16, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_NONE, 0},
                         0, 1018u);
    /* Not this path: padding at the end (an output on padding only), a
     * dilated 3x3 of stride 2, plain X, a small image. */
    check_slab_pointwise(&(Case){1, 24, 16, 40, 36, 1, 1, 2, 2, 1, 1, 0, 0, 1, 1, 1, 1,
                                 FXRT_ACT_RELU, 0},
                         0, 1010u);
    check_slab_pointwise(&(Case){1, 24, 16, 40, 36, 3, 3, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1,
                                 FXRT_ACT_RELU, 0},
                         0, 1011u);
    check_slab_pointwise(&(Case){1, 3, 16, 64, 64, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0, 1,
                                 FXRT_ACT_RELU, 0},
                         0, 1012u);
    check_slab_pointwise(&(Case){1, 16, 32, 15, 15, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0,
                                 FXRT_ACT_NONE, 0},
                         0, 1013u);
}
END_TEST

START_TEST(test_depthwise_dispatch)
{
    /* groups > 1 goes to fxrt_conv_nchwc_depthwise_f32 (tested in depth by
     * its own suite); here only that the dispatch gets it right. */
    check_grouped(&(Case){1, 20, 20, 9, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, FXRT_ACT_RELU, 1},
                  20, 900u);
    check_grouped(&(Case){2, 32, 32, 8, 8, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 1, 1, FXRT_ACT_CLIP, 0},
                  32, 901u);
}
END_TEST

/* fxrt_window_range against counting one output's taps inside the input
 * one by one; fxrt_window_inner's outputs are those with every tap inside. */
static void check_windows(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dil,
                          int64_t pad)
{
    int64_t inner = 0, inner_first = -1;
    for (int64_t o = 0; o < out; o++) {
        int64_t first = -1, count = 0;
        for (int64_t k = 0; k < kernel; k++) {
            int64_t at = o * stride - pad + k * dil;
            if (at >= 0 && at < in) {
                first = first < 0 ? k : first;
                count++;
            }
        }
        int64_t lo, hi;
        fxrt_window_range(o, stride, pad, dil, in, kernel, &lo, &hi);
        if (hi - lo != count || (count > 0 && lo != first))
            ck_abort_msg("window_range(o %ld stride %ld pad %ld dil %ld in %ld kernel %ld) = "
                         "[%ld, %ld), want %ld taps from %ld",
                         (long)o, (long)stride, (long)pad, (long)dil, (long)in, (long)kernel,
                         (long)lo, (long)hi, (long)count, (long)first);
        if (count == kernel) {
            inner_first = inner_first < 0 ? o : inner_first;
            inner++;
        }
    }
    int64_t lo, hi;
    fxrt_window_inner(in, out, kernel, stride, dil, pad, &lo, &hi);
    if (lo < 0 || hi > out || hi - lo != inner || (inner > 0 && lo != inner_first))
        ck_abort_msg("window_inner(in %ld out %ld kernel %ld stride %ld dil %ld pad %ld) = "
                     "[%ld, %ld), want %ld from %ld",
                     (long)in, (long)out, (long)kernel, (long)stride, (long)dil, (long)pad,
                     (long)lo, (long)hi, (long)inner, (long)inner_first);
}

/* The window helpers of fxrt_nn.h, which every kernel here trusts for its
 * borders: all small strides, paddings, dilations, input lengths and
 * kernel sizes, with windows wholly in the padding, and output lengths
 * shorter than the padding. */
START_TEST(test_window_helpers)
{
    const int64_t outs[] = {1, 2, 12};
    for (int64_t in = 1; in <= 9; in++)
        for (int64_t kernel = 1; kernel <= 5; kernel++)
            for (int64_t stride = 1; stride <= 3; stride++)
                for (int64_t dil = 1; dil <= 3; dil++)
                    for (int64_t pad = 0; pad <= 4; pad++)
                        for (int i = 0; i < 3; i++)
                            check_windows(in, outs[i], kernel, stride, dil, pad);
}
END_TEST

static void use_avx512(void) { fxrt_nchwc_conv_limit_isa(2); }
static void use_avx2(void) { fxrt_nchwc_conv_limit_isa(1); }
static void use_portable(void) { fxrt_nchwc_conv_limit_isa(0); }

static Suite *nchwc_conv_suite(void)
{
    Suite *s = suite_create("nchwc_conv");
    const char *names[] = {"widest", "avx2", "portable"};
    void (*caps[])(void) = {use_avx512, use_avx2, use_portable};
    for (int k = 0; k < 3; k++) {
        TCase *tc = tcase_create(names[k]);
        tcase_add_checked_fixture(tc, caps[k], use_avx512);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_kernel_sizes);
        tcase_add_test(tc, test_channel_counts);
        tcase_add_test(tc, test_stride_pad_dilation);
        tcase_add_test(tc, test_narrow_images);
        tcase_add_test(tc, test_batch);
        tcase_add_test(tc, test_plain_input);
        tcase_add_test(tc, test_epilogues);
        tcase_add_test(tc, test_bench_shapes);
        tcase_add_test(tc, test_mlperf_tiny_layers);
        tcase_add_test(tc, test_wide_pointwise_tiles);
        tcase_add_test(tc, test_slab_pointwise);
        tcase_add_test(tc, test_depthwise_dispatch);
        if (k == 0)
            tcase_add_test(tc, test_window_helpers);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(nchwc_conv_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
