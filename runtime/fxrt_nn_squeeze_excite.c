/*
 * fxrt_nn_squeeze_excite.c - squeeze-and-excite on an NCHWc activation as
 * one kernel: the channel means, the two small fully connected layers with
 * their activations, and the channel scale, where the graph had a global
 * pool, two 1x1 convolutions on a 1x1 image and a Mul, each a call with
 * its own pass over a tensor.
 *
 * The fully connected layers are products of a vector by a small matrix
 * (EfficientNet-B0: up to 1152 x 48).  Both weights are stored K-major
 * (W1 [channels][squeezed], W2 [squeezed][padded channels]) so that each
 * input value scales one contiguous row into the output vector: the inner
 * loop is an axpy the compiler vectorizes, and the padded channels of W2
 * make the gate a whole number of blocks.
 *
 * Where a pointwise convolution reads the gated tensor and has fewer output
 * channels than the image has pixels, the gate is better applied to that
 * convolution's weights: fxrt_squeeze_excite_weights_nchwc_f32 writes them,
 * out channels x in channels products instead of a pass that reads and
 * writes channels x pixels floats.
 */
#include <string.h>

#include "fxrt.h"

#define BLOCK FXRT_NCHWC_BLOCK

int64_t fxrt_squeeze_excite_nchwc_scratch_floats(int64_t channels, int64_t squeezed)
{
    return 2 * fxrt_nchwc_blocks(channels) * BLOCK + squeezed;
}

/* y[0..n) += a * row[0..n) */
static void axpy(float *restrict y, const float *restrict row, float a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += a * row[i];
}

static void scale_block(float *restrict y, const float *restrict x, const float *restrict gate)
{
    for (int l = 0; l < BLOCK; l++)
        y[l] = x[l] * gate[l];
}

/* The gate of one image xn [CB, spatial, 8]: CB * 8 floats in scratch,
 * which the caller laid out as fxrt_squeeze_excite_nchwc_scratch_floats
 * says (pooled, gate, hidden). */
static const float *excite(int64_t channels, int64_t squeezed, int64_t spatial, const float *xn,
                           const float *w1, const FxrtEpilogue *hidden_ep, const float *w2,
                           const FxrtEpilogue *gate_ep, float *scratch)
{
    int64_t blocks = fxrt_nchwc_blocks(channels), padded = blocks * BLOCK;
    float *pooled = scratch, *gate = scratch + padded, *hidden = gate + padded;
    fxrt_global_avgpool_nchwc_f32(blocks, spatial, xn, pooled);
    memset(hidden, 0, (size_t)squeezed * sizeof *hidden);
    for (int64_t c = 0; c < channels; c++)
        axpy(hidden, w1 + c * squeezed, pooled[c], squeezed);
    fxrt_epilogue_apply_f32(hidden_ep, 0, 0, 1, squeezed, hidden, squeezed);
    memset(gate, 0, (size_t)padded * sizeof *gate);
    for (int64_t s = 0; s < squeezed; s++)
        axpy(gate, w2 + s * padded, hidden[s], padded);
    fxrt_epilogue_apply_f32(gate_ep, 0, 0, 1, padded, gate, padded);
    return gate;
}

void fxrt_squeeze_excite_nchwc_f32(int64_t batch, int64_t channels, int64_t squeezed,
                                   int64_t spatial, const float *x, const float *w1,
                                   const FxrtEpilogue *hidden_ep, const float *w2,
                                   const FxrtEpilogue *gate_ep, float *y, float *scratch)
{
    int64_t blocks = fxrt_nchwc_blocks(channels), padded = blocks * BLOCK;
    for (int64_t n = 0; n < batch; n++) {
        const float *xn = x + n * padded * spatial;
        float *yn = y + n * padded * spatial;
        const float *gate =
                excite(channels, squeezed, spatial, xn, w1, hidden_ep, w2, gate_ep, scratch);
        for (int64_t cb = 0; cb < blocks; cb++)
            for (int64_t p = 0; p < spatial; p++)
                scale_block(yn + (cb * spatial + p) * BLOCK, xn + (cb * spatial + p) * BLOCK,
                            gate + cb * BLOCK);
    }
}

/* y[0..PAIR) = w[0..PAIR) * g */
static void scale_row(float *restrict y, const float *restrict w, float g)
{
    for (int j = 0; j < FXRT_NCHWC_PAIR; j++)
        y[j] = w[j] * g;
}

void fxrt_squeeze_excite_weights_nchwc_f32(int64_t channels, int64_t squeezed, int64_t spatial,
                                           const float *x, const float *w1,
                                           const FxrtEpilogue *hidden_ep, const float *w2,
                                           const FxrtEpilogue *gate_ep, int64_t pairs,
                                           const float *conv_w, float *gated_w, float *scratch)
{
    int64_t padded = fxrt_nchwc_blocks(channels) * BLOCK;
    const float *gate = excite(channels, squeezed, spatial, x, w1, hidden_ep, w2, gate_ep, scratch);
    /* [pairs][padded input channels][PAIR output lanes] */
    for (int64_t q = 0; q < pairs * padded; q++)
        scale_row(gated_w + q * FXRT_NCHWC_PAIR, conv_w + q * FXRT_NCHWC_PAIR, gate[q % padded]);
}
