/*
 * check_runtime_nchwc_depthwise.c - fxrt_conv_nchwc_depthwise_f32 against the
 * NCHW depthwise kernel (fxrt_conv_depthwise_f32, the reference) on random
 * inputs: the input, the residual and the weights go through the NCHWc
 * reorders and the packing, the output comes back through
 * fxrt_from_nchwc_f32.  Shapes cover channel counts that do not fill a
 * block, 3x3, 5x5 and odd kernels, strides 1 to 3, dilation, asymmetric and
 * oversized padding, images smaller than the kernel, batch 2, and every
 * activation with the residual before and after it.  The padding lanes of
 * the output must be written too: Y starts as NaN, and those lanes must
 * come out as the activation of zero even when the padding lanes of X hold
 * something else.  Where the in-place form applies (output planes no
 * larger than the input's), fxrt_conv_nchwc_inplace_f32 runs each case too,
 * Y written over a copy of X with exactly the scratch it asks for.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"

/* The kernel once more, built as the portable target builds it (no
 * FXRT_USE_CBLAS, so no AVX2 path) under another name: on a machine with
 * AVX2 the library's kernel never runs its plain C loop. */
void portable_nchwc_depthwise_f32(const FxrtConvParams *p, const float *x,
                                  const float *packed_w, const FxrtEpilogue *ep, float *y);
void portable_nchwc_depthwise_inplace_f32(const FxrtConvParams *p, float *xy,
                                          const float *packed_w, const FxrtEpilogue *ep,
                                          float *scratch);
#undef FXRT_USE_CBLAS
#define fxrt_conv_nchwc_depthwise_f32 portable_nchwc_depthwise_f32
#define fxrt_conv_nchwc_depthwise_inplace_f32 portable_nchwc_depthwise_inplace_f32
#include "runtime/fxrt_nn_nchwc_depthwise.c"
#undef fxrt_conv_nchwc_depthwise_f32
#undef fxrt_conv_nchwc_depthwise_inplace_f32

#undef BLOCK
#define BLOCK FXRT_NCHWC_BLOCK

typedef void (*DwKernel)(const FxrtConvParams *p, const float *x, const float *packed_w,
                         const FxrtEpilogue *ep, float *y);

enum { RESIDUAL_NONE, RESIDUAL_BEFORE, RESIDUAL_AFTER };

typedef struct DwCase {
    int64_t batch, channels, h, w;
    int64_t kh, kw, sh, sw, dh, dw;
    int64_t pad_top, pad_left, pad_bottom, pad_right;
} DwCase;

typedef struct DwEpilogue {
    FxrtActivation act;
    int residual; /* RESIDUAL_* */
    int bias;
} DwEpilogue;

/* Deterministic uniform values in [-1, 1). */
static uint32_t rng_state = 12345u;
static float uniform(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f;
}

static float *random_floats(int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = uniform();
    return v;
}

static float *alloc_floats(int64_t n)
{
    float *v = calloc((size_t)(n > 0 ? n : 1), sizeof *v);
    ck_assert_ptr_nonnull(v);
    return v;
}

static FxrtConvParams dw_params(const DwCase *c)
{
    FxrtConvParams p;
    memset(&p, 0, sizeof p);
    p.batch = c->batch;
    p.in_channels = p.out_channels = p.groups = c->channels;
    int64_t oh = (c->h + c->pad_top + c->pad_bottom - c->dh * (c->kh - 1) - 1) / c->sh + 1;
    int64_t ow = (c->w + c->pad_left + c->pad_right - c->dw * (c->kw - 1) - 1) / c->sw + 1;
    int64_t in[3] = {1, c->h, c->w}, out[3] = {1, oh, ow}, k[3] = {1, c->kh, c->kw};
    int64_t s[3] = {1, c->sh, c->sw}, d[3] = {1, c->dh, c->dw}, pad[3] = {0, c->pad_top,
                                                                         c->pad_left};
    for (int i = 0; i < 3; i++) {
        p.in_size[i] = in[i];
        p.out_size[i] = out[i];
        p.kernel[i] = k[i];
        p.stride[i] = s[i];
        p.dilation[i] = d[i];
        p.pad_begin[i] = pad[i];
    }
    return p;
}

static FxrtEpilogue make_epilogue(const DwEpilogue *de, const float *bias, const float *residual)
{
    FxrtEpilogue ep;
    memset(&ep, 0, sizeof ep);
    ep.bias = de->bias ? bias : NULL;
    ep.residual = de->residual != RESIDUAL_NONE ? residual : NULL;
    ep.residual_after = de->residual == RESIDUAL_AFTER;
    ep.activation = (int32_t)de->act;
    switch (de->act) {
    case FXRT_ACT_CLIP: ep.alpha = -0.3f; ep.beta = 0.6f; break;
    case FXRT_ACT_LEAKY_RELU: ep.alpha = 0.1f; break;
    case FXRT_ACT_HARD_SIGMOID: ep.alpha = 0.2f; ep.beta = 0.5f; break;
    case FXRT_ACT_GELU: ep.alpha = 0.5f; break;
    default: break;
    }
    return ep;
}

/* Runs one case through the reference and `kernel` and compares.  no_ep
 * passes a NULL epilogue to the NCHWc kernel (de must then change nothing). */
static void check_kernel(DwKernel kernel, const DwCase *c, const DwEpilogue *de, int no_ep,
                         const char *label)
{
    FxrtConvParams p = dw_params(c);
    int64_t ch = c->channels, cb = fxrt_nchwc_blocks(ch);
    int64_t in_sp = c->h * c->w, out_sp = p.out_size[1] * p.out_size[2];
    int64_t taps = c->kh * c->kw;
    ck_assert_int_ge(out_sp, 1);

    float *x = random_floats(c->batch * ch * in_sp);
    float *w = random_floats(ch * taps);
    float *bias = random_floats(ch);
    float *res = random_floats(c->batch * ch * out_sp);
    FxrtEpilogue ep = make_epilogue(de, bias, res);

    /* Reference, and the magnitude sum |w| |x| + |bias| + |residual| that
     * scales the tolerance. */
    float *ref = alloc_floats(c->batch * ch * out_sp);
    float *mag = alloc_floats(c->batch * ch * out_sp);
    float *ax = alloc_floats(c->batch * ch * in_sp), *aw = alloc_floats(ch * taps);
    for (int64_t i = 0; i < c->batch * ch * in_sp; i++)
        ax[i] = fabsf(x[i]);
    for (int64_t i = 0; i < ch * taps; i++)
        aw[i] = fabsf(w[i]);
    fxrt_conv_depthwise_f32(&p, x, w, &ep, ref);
    fxrt_conv_depthwise_f32(&p, ax, aw, NULL, mag);

    /* The NCHWc operands; the padding lanes of X hold a value that must not
     * reach any output. */
    float *xb = alloc_floats(c->batch * cb * in_sp * BLOCK);
    fxrt_to_nchwc_f32(c->batch, ch, in_sp, x, xb);
    for (int64_t i = 0; i < c->batch * cb * in_sp * BLOCK; i++)
        if ((i / (in_sp * BLOCK) % cb) * BLOCK + i % BLOCK >= ch)
            xb[i] = 7.0f;
    float *wb = alloc_floats(fxrt_conv_nchwc_packed_floats(&p, 1));
    ck_assert_int_eq(fxrt_conv_nchwc_packed_floats(&p, 1), cb * taps * BLOCK);
    fxrt_conv_nchwc_pack_f32(&p, 1, w, wb);
    float *bb = alloc_floats(cb * BLOCK);
    memcpy(bb, bias, (size_t)ch * sizeof *bb);
    float *rb = alloc_floats(c->batch * cb * out_sp * BLOCK);
    fxrt_to_nchwc_f32(c->batch, ch, out_sp, res, rb);
    FxrtEpilogue epb = make_epilogue(de, bb, rb);
    float *yb = alloc_floats(c->batch * cb * out_sp * BLOCK);
    for (int64_t i = 0; i < c->batch * cb * out_sp * BLOCK; i++)
        yb[i] = NAN;
    kernel(&p, xb, wb, no_ep ? NULL : &epb, yb);

    /* Padding lanes: act(0 + 0 + 0), the padded bias, weights and residual
     * being zero. */
    FxrtEpilogue act_only = make_epilogue(de, NULL, NULL);
    act_only.bias = NULL;
    act_only.residual = NULL;
    float act_zero = 0.0f;
    fxrt_epilogue_apply_f32(&act_only, 0, 0, 1, 1, &act_zero, 1);
    for (int64_t i = 0; i < c->batch * cb * out_sp * BLOCK; i++) {
        ck_assert_msg(isfinite(yb[i]), "%s: lane %lld of Y not written (or not finite)", label,
                      (long long)i);
        if ((i / (out_sp * BLOCK) % cb) * BLOCK + i % BLOCK >= ch)
            ck_assert_msg(fabsf(yb[i] - act_zero) <= 1e-6f,
                          "%s: padding lane %lld is %g, not act(0) = %g", label, (long long)i,
                          (double)yb[i], (double)act_zero);
    }

    float *got = alloc_floats(c->batch * ch * out_sp);
    fxrt_from_nchwc_f32(c->batch, ch, out_sp, yb, got);
    for (int64_t i = 0; i < c->batch * ch * out_sp; i++) {
        float m = mag[i] + (ep.bias ? fabsf(bias[i / out_sp % ch]) : 0.0f) +
                  (ep.residual ? fabsf(res[i]) : 0.0f);
        float tol = 1e-5f * (m + 1.0f);
        ck_assert_msg(fabsf(got[i] - ref[i]) <= tol,
                      "%s: element %lld (n %lld, c %lld, pos %lld): %.7g, reference %.7g", label,
                      (long long)i, (long long)(i / (out_sp * ch)), (long long)(i / out_sp % ch),
                      (long long)(i % out_sp), (double)got[i], (double)ref[i]);
    }
    free(x);
    free(w);
    free(bias);
    free(res);
    free(ref);
    free(mag);
    free(ax);
    free(aw);
    free(xb);
    free(wb);
    free(bb);
    free(rb);
    free(yb);
    free(got);
}

/* The in-place form as a DwKernel: X copied into a buffer that then also
 * holds Y, scratch allocated to exactly the size asked for (ASan sees an
 * overrun). */
static void inplace_depthwise(const FxrtConvParams *p, const float *x, const float *packed_w,
                              const FxrtEpilogue *ep, float *y)
{
    int64_t blocks = p->batch * fxrt_nchwc_blocks(p->in_channels);
    int64_t in = blocks * p->in_size[1] * p->in_size[2] * BLOCK;
    int64_t out = blocks * p->out_size[1] * p->out_size[2] * BLOCK;
    float *xy = alloc_floats(in);
    float *scratch = alloc_floats(fxrt_conv_nchwc_inplace_scratch_floats(p));
    memcpy(xy, x, (size_t)in * sizeof *xy);
    fxrt_conv_nchwc_inplace_f32(p, xy, packed_w, ep, scratch);
    memcpy(y, xy, (size_t)out * sizeof *y);
    free(xy);
    free(scratch);
}

/* Both builds of the kernel: the library's (AVX2 when the CPU has it) and
 * the portable one; and the library's in place where that applies.  (The
 * library's kernel is AVX2 on AVX2 and AVX-512 hosts alike.) */
static void check_case(const DwCase *c, const DwEpilogue *de, int no_ep, const char *label)
{
    char full[160];
    snprintf(full, sizeof full, "%s [library]", label);
    check_kernel(fxrt_conv_nchwc_depthwise_f32, c, de, no_ep, full);
    snprintf(full, sizeof full, "%s [portable]", label);
    check_kernel(portable_nchwc_depthwise_f32, c, de, no_ep, full);
    FxrtConvParams p = dw_params(c);
    if (fxrt_conv_nchwc_inplace_applies(&p, 1)) {
        snprintf(full, sizeof full, "%s [in place]", label);
        check_kernel(inplace_depthwise, c, de, no_ep, full);
    }
}

/* batch, channels, h, w, kh, kw, sh, sw, dh, dw, pad top, left, bottom, right */
static const DwCase shape_cases[] = {
    {1, 5, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {1, 8, 25, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    /* DS-CNN */
    {1, 64, 25, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   /* DS-CNN */
    {2, 13, 9, 11, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    {1, 16, 14, 14, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
    {1, 13, 14, 15, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},
    {1, 8, 7, 7, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},     /* SAME, stride 2 */
    {1, 8, 8, 9, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0},
    {1, 5, 10, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},    /* dilation 2 */
    {1, 13, 12, 12, 3, 3, 2, 2, 2, 2, 1, 2, 0, 1},
    {1, 8, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     /* 1x1 image */
    {1, 5, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 5, 2, 3, 5, 5, 2, 1, 1, 1, 2, 2, 2, 2},
    {1, 8, 2, 2, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},     /* image smaller than the kernel */
    {1, 8, 4, 4, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3},     /* rows and columns with no tap */
    {1, 8, 6, 6, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0},
    {1, 8, 11, 11, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1},   /* stride 3 */
    {1, 16, 13, 20, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1},  /* strides differ */
    {1, 9, 10, 10, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},
    {1, 8, 5, 12, 1, 5, 1, 1, 1, 1, 0, 2, 0, 2},
    {1, 8, 12, 5, 5, 1, 2, 1, 1, 1, 2, 0, 1, 0},
    {2, 24, 5, 25, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {1, 32, 112, 112, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, /* MobileNet-v2 */
    {1, 16, 112, 112, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},
    {1, 20, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    /* Rows of every remainder after the long runs (8 pixels for 3x3, 7 for
     * 5x5 and the general kernel widths' 8), each one run. */
    {1, 16, 15, 15, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   /* 8 + 7 */
    {1, 16, 13, 13, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},   /* 7 + 6 */
    {1, 16, 11, 12, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},   /* 7 + 5 */
    {1, 24, 7, 7, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},     /* ConvNeXt's last stage */
    {1, 16, 14, 14, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},   /* 8 + 6 */
    {1, 16, 11, 11, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},   /* stride 2, 6 columns */
    /* Planes too large to copy with their padding: the border columns of
     * the inner rows in runs down each column (8 + 3, 8 + 8 + 5). */
    {1, 16, 15, 40, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
    {1, 13, 25, 33, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},   /* dilation 2 */
    {1, 8, 23, 40, 7, 7, 2, 1, 1, 1, 3, 3, 3, 3},    /* row stride 2, 7 wide: 8 */
    /* Rows narrower than two kernel widths: copied with their padding. */
    {1, 16, 25, 5, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
};

static const char *act_names[] = {"none",      "relu",        "clip", "leaky_relu", "sigmoid",
                                  "hardswish", "hardsigmoid", "tanh", "gelu",       "silu"};
static const char *residual_names[] = {"no residual", "residual before", "residual after"};

START_TEST(test_shapes)
{
    /* Each shape with a different activation and residual mode, all with a
     * bias. */
    for (size_t i = 0; i < sizeof shape_cases / sizeof shape_cases[0]; i++) {
        DwEpilogue de = {(FxrtActivation)(i % 10), (int)(i % 3), 1};
        char label[128];
        snprintf(label, sizeof label, "shape %zu (%s, %s)", i, act_names[de.act],
                 residual_names[de.residual]);
        check_case(&shape_cases[i], &de, 0, label);
    }
}
END_TEST

START_TEST(test_every_epilogue)
{
    static const DwCase cases[] = {
        {2, 13, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
        {1, 13, 10, 9, 5, 5, 2, 2, 1, 1, 2, 1, 2, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int act = FXRT_ACT_NONE; act <= FXRT_ACT_SILU; act++)
            for (int r = RESIDUAL_NONE; r <= RESIDUAL_AFTER; r++)
                for (int b = 0; b < 2; b++) {
                    DwEpilogue de = {(FxrtActivation)act, r, b};
                    char label[128];
                    snprintf(label, sizeof label, "case %zu, %s, %s, %s", i, act_names[act],
                             residual_names[r], b ? "bias" : "no bias");
                    check_case(&cases[i], &de, 0, label);
                }
}
END_TEST

START_TEST(test_no_epilogue)
{
    DwEpilogue none = {FXRT_ACT_NONE, RESIDUAL_NONE, 0};
    for (size_t i = 0; i < 6; i++) {
        check_case(&shape_cases[i], &none, 1, "NULL epilogue");
        check_case(&shape_cases[i], &none, 0, "zeroed epilogue");
    }
}
END_TEST

static Suite *nchwc_depthwise_suite(void)
{
    Suite *s = suite_create("nchwc_depthwise");
    TCase *tc = tcase_create("depthwise");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_shapes);
    tcase_add_test(tc, test_every_epilogue);
    tcase_add_test(tc, test_no_epilogue);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(nchwc_depthwise_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
