/*
 * fxrt_nn_nchwc.c - the channel-blocked layout NCHWc (see fxrt_nn.h): the
 * reorders into and out of it, the channel gather that composes reorders
 * with channel slices, concatenations and shuffles (ChannelGather, made by
 * opt/pass_channel_gather.c), and the packing of convolution weights for
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

/* --- channel gather ------------------------------------------------------------
 *
 * A source channel is a run of `spatial` floats at stride 1 (plain) or 8
 * (blocked).  A plain Y channel is one such run: a memcpy from a plain
 * source.  A blocked Y block interleaves eight of them pixel by pixel; when
 * the eight are one whole source block in order it is a memcpy too, and
 * when all lanes share a stride one loop copies a pixel's eight lanes at a
 * time. */

/* Channel c of source s in image n, and the distance between its pixels. */
static const float *gather_channel(const FxrtGatherSource *s, int64_t n, int64_t c,
                                   int64_t spatial, int64_t *stride)
{
    if (!s->blocked) {
        *stride = 1;
        return s->x + (n * s->channels + c) * spatial;
    }
    *stride = BLOCK;
    return s->x + (n * fxrt_nchwc_blocks(s->channels) + c / BLOCK) * spatial * BLOCK + c % BLOCK;
}

/* The eight lanes' pointers are held in locals: read through the array,
 * each would be reloaded after every store to y, which may alias it for
 * all the compiler knows. */
static void gather_lanes(const float *const *x, int64_t stride, int64_t spatial, float *y)
{
    const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
    const float *x4 = x[4], *x5 = x[5], *x6 = x[6], *x7 = x[7];
    for (int64_t s = 0, i = 0; s < spatial; s++, i += stride, y += BLOCK) {
        y[0] = x0[i];
        y[1] = x1[i];
        y[2] = x2[i];
        y[3] = x3[i];
        y[4] = x4[i];
        y[5] = x5[i];
        y[6] = x6[i];
        y[7] = x7[i];
    }
}

/* The first `lanes` lanes of one Y block from x[l] at stride[l], zeros in
 * the rest. */
static void gather_block(const float *const *x, const int64_t *stride, int lanes,
                         int64_t spatial, float *y)
{
    int same_stride = lanes == BLOCK, whole_block = lanes == BLOCK && stride[0] == BLOCK;
    for (int l = 1; l < lanes; l++) {
        same_stride &= stride[l] == stride[0];
        whole_block &= stride[l] == BLOCK && x[l] == x[0] + l;
    }
    if (whole_block) {
        memcpy(y, x[0], (size_t)(spatial * BLOCK) * sizeof *y);
        return;
    }
    if (same_stride) {
        gather_lanes(x, stride[0], spatial, y);
        return;
    }
    for (int64_t s = 0; s < spatial; s++) {
        for (int l = 0; l < lanes; l++)
            y[s * BLOCK + l] = x[l][s * stride[l]];
        for (int l = lanes; l < BLOCK; l++)
            y[s * BLOCK + l] = 0.0f;
    }
}

void fxrt_channel_gather_f32(int64_t batch, int64_t spatial, const FxrtGatherSource *sources,
                             int64_t channels, const int32_t *from_source,
                             const int32_t *from_channel, int y_blocked, float *y)
{
    int64_t stride[BLOCK];
    const float *x[BLOCK];
    if (!y_blocked) {
        for (int64_t n = 0; n < batch; n++)
            for (int64_t c = 0; c < channels; c++) {
                const float *xc = gather_channel(&sources[from_source[c]], n, from_channel[c],
                                                 spatial, &stride[0]);
                float *yc = y + (n * channels + c) * spatial;
                if (stride[0] == 1)
                    memcpy(yc, xc, (size_t)spatial * sizeof *yc);
                else
                    for (int64_t s = 0; s < spatial; s++)
                        yc[s] = xc[s * BLOCK];
            }
        return;
    }
    int64_t blocks = fxrt_nchwc_blocks(channels);
    for (int64_t n = 0; n < batch; n++)
        for (int64_t cb = 0; cb < blocks; cb++) {
            int lanes = channels - cb * BLOCK < BLOCK ? (int)(channels - cb * BLOCK) : BLOCK;
            for (int l = 0; l < lanes; l++) {
                int64_t c = cb * BLOCK + l;
                x[l] = gather_channel(&sources[from_source[c]], n, from_channel[c], spatial,
                                      &stride[l]);
            }
            gather_block(x, stride, lanes, spatial, y + (n * blocks + cb) * spatial * BLOCK);
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
