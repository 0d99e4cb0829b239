/*
 * fxrt_nn_nchwc.c - the channel-blocked layout NCHWc (see fxrt_nn.h): the
 * reorders into and out of it, and the packing of convolution weights for
 * the NCHWc kernels (fxrt_nn_nchwc_conv.c, fxrt_nn_nchwc_depthwise.c).
 * Packing runs once per weight, in the compiler, so it is written for
 * clarity rather than speed; the reorders run at every layout boundary of
 * a model and are simple strided copies the compiler vectorizes.
 */
#include <string.h>

#include "fxrt.h"

#define BLOCK FXRT_NCHWC_BLOCK

int64_t fxrt_nchwc_blocks(int64_t channels) { return (channels + BLOCK - 1) / BLOCK; }

void fxrt_to_nchwc_f32(int64_t batch, int64_t channels, int64_t spatial, const float *x,
                       float *y)
{
    int64_t blocks = fxrt_nchwc_blocks(channels);
    for (int64_t n = 0; n < batch; n++)
        for (int64_t cb = 0; cb < blocks; cb++) {
            float *yb = y + (n * blocks + cb) * spatial * BLOCK;
            int64_t lanes = channels - cb * BLOCK < BLOCK ? channels - cb * BLOCK : BLOCK;
            if (lanes < BLOCK)
                memset(yb, 0, (size_t)(spatial * BLOCK) * sizeof *yb);
            for (int64_t l = 0; l < lanes; l++) {
                const float *xc = x + (n * channels + cb * BLOCK + l) * spatial;
                for (int64_t s = 0; s < spatial; s++)
                    yb[s * BLOCK + l] = xc[s];
            }
        }
}

void fxrt_from_nchwc_f32(int64_t batch, int64_t channels, int64_t spatial, const float *x,
                         float *y)
{
    int64_t blocks = fxrt_nchwc_blocks(channels);
    for (int64_t n = 0; n < batch; n++)
        for (int64_t c = 0; c < channels; c++) {
            const float *xb = x + (n * blocks + c / BLOCK) * spatial * BLOCK + c % BLOCK;
            float *yc = y + (n * channels + c) * spatial;
            for (int64_t s = 0; s < spatial; s++)
                yc[s] = xb[s * BLOCK];
        }
}

/* The pixel-major reorders copy one block of one pixel (eight contiguous
 * floats) at a time, a tile of pixels per block, so that every block is read
 * or written as a run of TILE * 32 bytes instead of 32 bytes a stream. */
enum { PIXEL_TILE = 16 };

void fxrt_nchwc_to_nhwc_f32(int64_t batch, int64_t channels, int64_t spatial, const float *x,
                            float *y)
{
    int64_t blocks = fxrt_nchwc_blocks(channels), full = channels / BLOCK;
    int64_t tail = channels - full * BLOCK;
    for (int64_t n = 0; n < batch; n++)
        for (int64_t s0 = 0; s0 < spatial; s0 += PIXEL_TILE) {
            int64_t tile = spatial - s0 < PIXEL_TILE ? spatial - s0 : PIXEL_TILE;
            for (int64_t cb = 0; cb < blocks; cb++) {
                const float *xb = x + ((n * blocks + cb) * spatial + s0) * BLOCK;
                float *yb = y + (n * spatial + s0) * channels + cb * BLOCK;
                if (cb < full)
                    for (int64_t s = 0; s < tile; s++)
                        memcpy(yb + s * channels, xb + s * BLOCK, BLOCK * sizeof *yb);
                else
                    for (int64_t s = 0; s < tile; s++)
                        memcpy(yb + s * channels, xb + s * BLOCK, (size_t)tail * sizeof *yb);
            }
        }
}

void fxrt_nhwc_to_nchwc_f32(int64_t batch, int64_t channels, int64_t spatial, const float *x,
                            float *y)
{
    int64_t blocks = fxrt_nchwc_blocks(channels), full = channels / BLOCK;
    int64_t tail = channels - full * BLOCK;
    for (int64_t n = 0; n < batch; n++)
        for (int64_t s0 = 0; s0 < spatial; s0 += PIXEL_TILE) {
            int64_t tile = spatial - s0 < PIXEL_TILE ? spatial - s0 : PIXEL_TILE;
            for (int64_t cb = 0; cb < blocks; cb++) {
                const float *xb = x + (n * spatial + s0) * channels + cb * BLOCK;
                float *yb = y + ((n * blocks + cb) * spatial + s0) * BLOCK;
                if (cb < full) {
                    for (int64_t s = 0; s < tile; s++)
                        memcpy(yb + s * BLOCK, xb + s * channels, BLOCK * sizeof *yb);
                    continue;
                }
                for (int64_t s = 0; s < tile; s++) {
                    memcpy(yb + s * BLOCK, xb + s * channels, (size_t)tail * sizeof *yb);
                    memset(yb + s * BLOCK + tail, 0, (size_t)(BLOCK - tail) * sizeof *yb);
                }
            }
        }
}

int64_t fxrt_conv_nchwc_packed_floats(const FxrtConvParams *p, int x_blocked)
{
    int64_t taps = p->kernel[1] * p->kernel[2];
    int64_t ocb = fxrt_nchwc_blocks(p->out_channels);
    if (p->groups > 1)
        return ocb * taps * BLOCK;
    int64_t pairs = (ocb + 1) / 2;
    int64_t in = x_blocked ? fxrt_nchwc_blocks(p->in_channels) * BLOCK : p->in_channels;
    return pairs * taps * in * FXRT_NCHWC_PAIR;
}

int64_t fxrt_conv_nchwc_packed_index(const FxrtConvParams *p, int x_blocked, int64_t oc,
                                     int64_t ic, int64_t tap)
{
    int64_t taps = p->kernel[1] * p->kernel[2];
    int64_t ob = oc / BLOCK, lane = ob % 2 * BLOCK + oc % BLOCK;
    if (p->groups > 1) /* [CB][KH][KW][8] */
        return (ob * taps + tap) * BLOCK + oc % BLOCK;
    if (x_blocked) /* [OCB / 2][ICB][KH][KW][8 in][2 x 8 out] */
        return (((ob / 2 * fxrt_nchwc_blocks(p->in_channels) + ic / BLOCK) * taps + tap) * BLOCK +
                ic % BLOCK) * FXRT_NCHWC_PAIR + lane;
    /* [OCB / 2][KH][KW][in_channels][2 x 8 out] */
    return ((ob / 2 * taps + tap) * p->in_channels + ic) * FXRT_NCHWC_PAIR + lane;
}

/* W is ONNX's [out_channels, in_channels / groups, KH, KW]. */
void fxrt_conv_nchwc_pack_f32(const FxrtConvParams *p, int x_blocked, const float *w,
                              float *packed)
{
    int64_t taps = p->kernel[1] * p->kernel[2];
    int64_t cin = p->groups > 1 ? 1 : p->in_channels;
    memset(packed, 0, (size_t)fxrt_conv_nchwc_packed_floats(p, x_blocked) * sizeof *packed);
    for (int64_t oc = 0; oc < p->out_channels; oc++)
        for (int64_t ic = 0; ic < cin; ic++)
            for (int64_t t = 0; t < taps; t++)
                packed[fxrt_conv_nchwc_packed_index(p, x_blocked, oc, ic, t)] =
                    w[(oc * cin + ic) * taps + t];
}
