/*
 * check_runtime_squeeze_excite.c - the squeeze-and-excite kernel
 * (fxrt_nn_squeeze_excite.c) against the block computed in double: the
 * channel means, the hidden layer with its activation (Relu, SiLU), the gate
 * (Sigmoid, HardSigmoid) and the scaled input.  Channel counts that leave
 * padding lanes (which are poisoned: no mean may read them), squeezed
 * widths from 1 to past a vector, 1 to 49 pixels, a batch of two, with and
 * without biases.  The gate folded into the weights of the 1x1 convolution
 * that reads the block (fxrt_squeeze_excite_weights_nchwc_f32) must give,
 * image by image, what that convolution gives on the gated tensor.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "runtime/fxrt.h"

enum { BATCH = 2, BLOCK = FXRT_NCHWC_BLOCK };

static float value(int i, int salt) { return (float)(((i * 37 + salt * 11) % 101) - 50) / 50.0f; }

static double activate(FxrtActivation a, double v, double alpha, double beta)
{
    switch (a) {
    case FXRT_ACT_RELU:
        return v > 0.0 ? v : 0.0;
    case FXRT_ACT_SILU:
        return v / (1.0 + exp(-v));
    case FXRT_ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-v));
    case FXRT_ACT_HARD_SIGMOID:
        return fmin(fmax(alpha * v + beta, 0.0), 1.0);
    default:
        return v;
    }
}

/* For each image of x (its gated form y, from the kernel checked above):
 * conv(x, gated weights) against conv(y, weights), a 1x1 convolution to
 * 3 and to 19 output channels (one pair of blocks, and two pairs). */
static void check_gated_weights(int channels, int squeezed, int spatial, const float *x,
                                const float *y, const float *w1, const FxrtEpilogue *hidden_ep,
                                const float *w2, const FxrtEpilogue *gate_ep, float *scratch)
{
    int padded = (int)fxrt_nchwc_blocks(channels) * BLOCK;
    const int outs[] = {3, 19};
    for (int o = 0; o < 2; o++) {
        FxrtConvParams p = {.batch = 1, .in_channels = channels, .out_channels = outs[o],
                            .groups = 1, .in_size = {1, 1, spatial}, .out_size = {1, 1, spatial},
                            .kernel = {1, 1, 1}, .stride = {1, 1, 1}, .dilation = {1, 1, 1}};
        size_t wn = (size_t)fxrt_conv_nchwc_packed_floats(&p, 1);
        size_t zn = (size_t)fxrt_nchwc_blocks(outs[o]) * BLOCK * spatial;
        float *w = malloc((size_t)outs[o] * channels * sizeof *w), *packed = malloc(wn * sizeof *packed);
        float *gated = malloc(wn * sizeof *gated), *want = malloc(zn * sizeof *want),
              *got = malloc(zn * sizeof *got);
        ck_assert(w && packed && gated && want && got);
        for (int i = 0; i < outs[o] * channels; i++)
            w[i] = value(i, 6) / 3.0f;
        fxrt_conv_nchwc_pack_f32(&p, 1, w, packed);
        for (int n = 0; n < BATCH; n++) {
            const float *xn = x + (size_t)n * padded * spatial, *yn = y + (size_t)n * padded * spatial;
            fxrt_squeeze_excite_weights_nchwc_f32(channels, squeezed, spatial, xn, w1, hidden_ep,
                                                  w2, gate_ep, (int64_t)wn / (padded * FXRT_NCHWC_PAIR),
                                                  packed, gated, scratch);
            fxrt_conv_nchwc_f32(&p, 1, yn, packed, NULL, want, NULL);
            fxrt_conv_nchwc_f32(&p, 1, xn, gated, NULL, got, NULL);
            for (int oc = 0; oc < outs[o]; oc++)
                for (int q = 0; q < spatial; q++) {
                    size_t i = ((size_t)(oc / BLOCK) * spatial + q) * BLOCK + oc % BLOCK;
                    ck_assert_msg(fabsf(got[i] - want[i]) <= 1e-5f * (fabsf(want[i]) + 1.0f),
                                  "gated weights, channels %d squeezed %d spatial %d outs %d: "
                                  "z[%d][oc %d][p %d] = %.9g, want %.9g",
                                  channels, squeezed, spatial, outs[o], n, oc, q, got[i], want[i]);
                }
        }
        free(w);
        free(packed);
        free(gated);
        free(want);
        free(got);
    }
}

static void check_block(int channels, int squeezed, int spatial, FxrtActivation hidden_act,
                        FxrtActivation gate_act, int with_bias)
{
    int blocks = (int)fxrt_nchwc_blocks(channels), padded = blocks * BLOCK;
    size_t elems = (size_t)BATCH * padded * spatial;
    float *x = malloc(elems * sizeof *x), *y = malloc(elems * sizeof *y);
    float *w1 = malloc((size_t)channels * squeezed * sizeof *w1);
    float *w2 = calloc((size_t)squeezed * padded, sizeof *w2);
    float *b1 = malloc((size_t)squeezed * sizeof *b1), *b2 = calloc((size_t)padded, sizeof *b2);
    float *scratch = malloc((size_t)fxrt_squeeze_excite_nchwc_scratch_floats(channels, squeezed) *
                            sizeof *scratch);
    double *hidden = malloc((size_t)squeezed * sizeof *hidden);
    ck_assert(x && y && w1 && w2 && b1 && b2 && scratch && hidden);
    for (size_t i = 0; i < elems; i++) {
        int c = (int)(i / BLOCK / (size_t)spatial % (size_t)blocks) * BLOCK + (int)(i % BLOCK);
        x[i] = c >= channels ? 1e4f : 2.0f + value((int)i, 1);
    }
    for (int i = 0; i < channels * squeezed; i++)
        w1[i] = value(i, 2) / 4.0f;
    for (int s = 0; s < squeezed; s++) {
        b1[s] = value(s, 3) / 2.0f;
        for (int c = 0; c < channels; c++)
            w2[s * padded + c] = value(s * channels + c, 4) / 2.0f;
    }
    for (int c = 0; c < channels; c++)
        b2[c] = value(c, 5) / 2.0f;
    const float alpha = gate_act == FXRT_ACT_HARD_SIGMOID ? 1.0f / 6.0f : 0.0f,
                beta = gate_act == FXRT_ACT_HARD_SIGMOID ? 0.5f : 0.0f;
    FxrtEpilogue hidden_ep = {.bias = with_bias ? b1 : NULL, .bias_col_stride = 1,
                              .activation = hidden_act};
    FxrtEpilogue gate_ep = {.bias = with_bias ? b2 : NULL, .bias_col_stride = 1,
                            .activation = gate_act, .alpha = alpha, .beta = beta};
    fxrt_squeeze_excite_nchwc_f32(BATCH, channels, squeezed, spatial, x, w1, &hidden_ep, w2,
                                  &gate_ep, y, scratch);
    for (int n = 0; n < BATCH; n++) {
        const float *xn = x + (size_t)n * padded * spatial, *yn = y + (size_t)n * padded * spatial;
        for (int s = 0; s < squeezed; s++) {
            double acc = with_bias ? b1[s] : 0.0;
            for (int c = 0; c < channels; c++) {
                double mean = 0.0;
                for (int p = 0; p < spatial; p++)
                    mean += xn[((c / BLOCK) * spatial + p) * BLOCK + c % BLOCK];
                acc += mean / spatial * w1[c * squeezed + s];
            }
            hidden[s] = activate(hidden_act, acc, 0.0, 0.0);
        }
        for (int c = 0; c < channels; c++) {
            double acc = with_bias ? b2[c] : 0.0;
            for (int s = 0; s < squeezed; s++)
                acc += hidden[s] * w2[s * padded + c];
            double gate = activate(gate_act, acc, alpha, beta);
            for (int p = 0; p < spatial; p++) {
                size_t i = ((size_t)(c / BLOCK) * spatial + p) * BLOCK + c % BLOCK;
                double want = xn[i] * gate, got = yn[i];
                ck_assert_msg(fabs(got - want) <= 1e-5 * (fabs(want) + 1.0),
                              "channels %d squeezed %d spatial %d acts %d/%d bias %d: "
                              "y[%d][c %d][p %d] = %.9g, want %.9g",
                              channels, squeezed, spatial, hidden_act, gate_act, with_bias, n, c,
                              p, got, want);
            }
        }
    }
    check_gated_weights(channels, squeezed, spatial, x, y, w1, &hidden_ep, w2, &gate_ep, scratch);
    free(x);
    free(y);
    free(w1);
    free(w2);
    free(b1);
    free(b2);
    free(scratch);
    free(hidden);
}

START_TEST(test_shapes)
{
    const int channels[] = {5, 8, 13, 96}, squeezed[] = {1, 3, 8, 24}, spatial[] = {1, 7, 49};
    for (int c = 0; c < 4; c++)
        for (int s = 0; s < 4; s++)
            for (int p = 0; p < 3; p++) {
                check_block(channels[c], squeezed[s], spatial[p], FXRT_ACT_SILU,
                            FXRT_ACT_SIGMOID, (c + s + p) % 2);
                check_block(channels[c], squeezed[s], spatial[p], FXRT_ACT_RELU,
                            FXRT_ACT_HARD_SIGMOID, (c + s + p + 1) % 2);
            }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("runtime_squeeze_excite");
    TCase *t = tcase_create("squeeze_excite");
    tcase_add_test(t, test_shapes);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
