/*
 * fxrt_nn_conv_mcu.c - the float NCHWc convolutions of the small build
 * (FXRT_SMALL_KERNELS, --target cortex-m) on a microcontroller's scalar FPU:
 * Cortex-M4F's FPv4-SP, M7's FPv5 (32 single-precision registers, a fused
 * multiply-add, no vectors).  Plain C, correct on any target; on a core
 * whose FPU fuses (__ARM_FEATURE_FMA with single precision) each step is
 * one VFMA through __builtin_fmaf, since the firmware builds in ISO C
 * (-std=c99), where GCC does not contract a * b + c.
 *
 * Group 1 (fxrt_conv_nchwc_mcu_f32): a tile is one output block (8
 * channels) by 3 pixels of one output row, 24 sums in registers over the
 * whole reduction; each step loads the pixels' input values, then one
 * weight at a time that every pixel multiplies (24 sums, 3 inputs and a
 * weight: 28 of the 32 registers, where 8 weights held at once would
 * spill): 42 instructions per 24 multiply-adds with the pointer steps
 * (arm-none-eabi-gcc 12 -O2).  A single pixel runs as a tile whose three
 * sums are that pixel's (three times the work, one copy of the code in
 * flash, which the firmware budgets count).  The reduction walks input
 * blocks, the clipped kernel rows, and kernel columns times input lanes,
 * which blocked input and the packed weights ([pairs][in blocks][KH][KW][8
 * in][2 x 8 out], fxrt_nn.h) both store contiguously; plain input (a first
 * layer's 1-3 channels) walks the lanes a plane apart.  Interior pixels share the kernel's columns; border
 * columns run one pixel at a time with their columns clipped.  A 1x1
 * stride-1 layer without padding runs its image as one row.
 *
 * Depthwise layers keep fxrt_nn_nchwc_depthwise.c's loop (a pixel's 8
 * lanes at a time, fused multiply-adds where the FPU has them).
 *
 * Bias and relu or clip are the tile's (the sums start from the bias, the
 * clamp is applied to the stored tile); other epilogues go through
 * fxrt_epilogue_apply_f32 on the stored row.  The sums run in another
 * order than the interpreter's NCHW loops (taps of a pixel in kernel
 * order, input channels outermost, the bias first), fused or not: results
 * agree to about 1e-6 of their magnitude, not bit for bit.
 */
#include <string.h>

#include "fxrt.h"
#include "fxrt_math.h"

#if FXRT_SMALL_KERNELS

#define MAC FXRT_MAC

#define BLOCK FXRT_NCHWC_BLOCK
#define PAIR FXRT_NCHWC_PAIR

/* How a tile finishes: `fused` when the epilogue is only a bias and a clamp
 * to [lo, hi] (relu, clip; none: infinite bounds), which the tile applies;
 * otherwise the tile stores the raw sums for fxrt_epilogue_apply_f32. */
typedef struct McuFinish {
    int fused;
    const float *bias; /* the tile's output block's 8, or NULL */
    float lo, hi;
    int from_y; /* the sums start from Y (the residual is Y, added before the activation) */
} McuFinish;

static McuFinish finish_of(const FxrtEpilogue *ep, const float *y)
{
    McuFinish f;
    memset(&f, 0, sizeof f);
    f.lo = -__builtin_huge_valf();
    f.hi = __builtin_huge_valf();
    int act = ep ? ep->activation : FXRT_ACT_NONE;
    f.from_y = ep && ep->residual == y && ep->residual && !ep->residual_after;
    int plain_residual = ep && ep->residual && !f.from_y;
    f.fused = !plain_residual &&
              (act == FXRT_ACT_NONE || act == FXRT_ACT_RELU || act == FXRT_ACT_CLIP);
    if (f.fused && ep) {
        f.bias = ep->bias;
        if (act == FXRT_ACT_RELU) {
            f.lo = 0.0f;
        } else if (act == FXRT_ACT_CLIP) {
            f.lo = ep->alpha;
            f.hi = ep->beta;
        }
    }
    return f;
}

static inline float clamp(float v, float lo, float hi)
{
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

/* The reduction of one tile: `blocks` input blocks (x_block, w_block floats
 * apart), `rows` kernel rows (x_row, w_row apart), `cols` runs (x_col,
 * w_col apart) of `steps` input values of a pixel, x_step floats apart in X
 * and w_step in W.  Blocked input: one run per kernel row, its columns
 * times the 8 lanes, all contiguous (with dilation, a run per column);
 * plain input: a run per lane (a plane apart), along the kernel columns. */
typedef struct McuReduce {
    int blocks, rows, cols, steps;
    int x_block, x_row, x_col, x_step;
    int w_block, w_row, w_col, w_step;
} McuReduce;

/* Clamps the stored n outputs to [f->lo, f->hi] (relu, clip). */
static __attribute__((noinline)) void clamp_stored(const McuFinish *f, float *y, int n)
{
    const float lo = f->lo, hi = f->hi;
    if (lo > -__builtin_huge_valf())
        for (int i = 0; i < n; i++)
            y[i] = y[i] < lo ? lo : y[i];
    if (hi < __builtin_huge_valf())
        for (int i = 0; i < n; i++)
            y[i] = y[i] > hi ? hi : y[i];
}

/* One output block by 3 pixels, x_pixel floats apart in X and y_pixel in
 * Y (one pixel: both 0, the three sums then equal): x at the first pixel's
 * first tap, w at that tap's weights of the output block, y at the first
 * pixel's 8 outputs. */
static __attribute__((noinline)) void tile(const McuReduce *r, int x_pixel, int y_pixel,
                                           const float *x, const float *w, const McuFinish *f,
                                           float *y)
{
    float *y1 = y + y_pixel, *y2 = y1 + y_pixel;
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    float b0 = 0, b1 = 0, b2 = 0, b3 = 0, b4 = 0, b5 = 0, b6 = 0, b7 = 0;
    float c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0;
    if (f->bias) {
        const float *bs = f->bias;
        a0 = b0 = c0 = bs[0];
        a1 = b1 = c1 = bs[1];
        a2 = b2 = c2 = bs[2];
        a3 = b3 = c3 = bs[3];
        a4 = b4 = c4 = bs[4];
        a5 = b5 = c5 = bs[5];
        a6 = b6 = c6 = bs[6];
        a7 = b7 = c7 = bs[7];
    }
    if (f->from_y) {
        a0 += y[0], a1 += y[1], a2 += y[2], a3 += y[3];
        a4 += y[4], a5 += y[5], a6 += y[6], a7 += y[7];
        b0 += y1[0], b1 += y1[1], b2 += y1[2], b3 += y1[3];
        b4 += y1[4], b5 += y1[5], b6 += y1[6], b7 += y1[7];
        c0 += y2[0], c1 += y2[1], c2 += y2[2], c3 += y2[3];
        c4 += y2[4], c5 += y2[5], c6 += y2[6], c7 += y2[7];
    }
    const int xs = r->x_step, ws = r->w_step;
    for (int b = 0; b < r->blocks; b++)
        for (int kr = 0; kr < r->rows; kr++)
            for (int kc = 0; kc < r->cols; kc++) {
                const float *xv = x + b * r->x_block + kr * r->x_row + kc * r->x_col;
                const float *wv = w + b * r->w_block + kr * r->w_row + kc * r->w_col;
                const float *xv1 = xv + x_pixel, *xv2 = xv + 2 * x_pixel;
                for (int s = 0; s < r->steps; s++) {
                    float u = *xv, v = *xv1, t = *xv2;
/* The input values of the pixels times weight o, one weight at a time
 * (24 sums, 3 inputs and a weight: 28 of the 32 registers). */
#define STEP(o, A, B, C)   \
    do {                   \
        float wo = wv[o];  \
        MAC(A, wo, u);     \
        MAC(B, wo, v);     \
        MAC(C, wo, t);     \
    } while (0)
                    STEP(0, a0, b0, c0);
                    STEP(1, a1, b1, c1);
                    STEP(2, a2, b2, c2);
                    STEP(3, a3, b3, c3);
                    STEP(4, a4, b4, c4);
                    STEP(5, a5, b5, c5);
                    STEP(6, a6, b6, c6);
                    STEP(7, a7, b7, c7);
#undef STEP
                    xv += xs, xv1 += xs, xv2 += xs, wv += ws;
                }
            }
    /* the last pixel first: with y_pixel 0, all three land on y */
    y2[0] = c0, y2[1] = c1, y2[2] = c2, y2[3] = c3, y2[4] = c4, y2[5] = c5, y2[6] = c6, y2[7] = c7;
    y1[0] = b0, y1[1] = b1, y1[2] = b2, y1[3] = b3, y1[4] = b4, y1[5] = b5, y1[6] = b6, y1[7] = b7;
    y[0] = a0, y[1] = a1, y[2] = a2, y[3] = a3, y[4] = a4, y[5] = a5, y[6] = a6, y[7] = a7;
    clamp_stored(f, y, y_pixel ? 3 * BLOCK : BLOCK);
}

/* Pixels [0, count) of a run x_pixel floats apart in X, 8 apart in Y, in
 * tiles of 3; a rest of 1 or 2 as the run's last 3 again when there are
 * that many and Y is not also an input (a recomputed pixel gets the same
 * value), else pixel by pixel. */
static __attribute__((noinline)) void run_tiles(const McuReduce *r, int count, int x_pixel, const float *x,
                      const float *w, const McuFinish *f, float *y)
{
    int j = 0;
    for (; j + 3 <= count; j += 3)
        tile(r, x_pixel, BLOCK, x + j * x_pixel, w, f, y + j * BLOCK);
    if (j < count && count >= 3 && !f->from_y)
        tile(r, x_pixel, BLOCK, x + (count - 3) * x_pixel, w, f, y + (count - 3) * BLOCK);
    else
        for (; j < count; j++)
            tile(r, 0, 0, x + j * x_pixel, w, f, y + j * BLOCK);
}

/* A layer's geometry in ints (a 32-bit core's arithmetic), and the walk of
 * its reduction; a 1x1 stride-1 layer without padding is one row of all its
 * pixels. */
typedef struct McuConv {
    int in_h, in_w, out_h, out_w, stride_h, stride_w, dil_h, dil_w, pad_h, pad_w;
    int kernel_h, kernel_w, lanes, x_blocked, in_blocks, out_blocks, batch;
    int x_col, x_image, y_block, y_image;
    McuReduce r;
} McuConv;

/* Output columns [c_lo, c_hi) of every row, which read kernel columns
 * [k0, k1). */
static __attribute__((noinline)) void conv_columns(const McuConv *cv, int c_lo, int c_hi,
                                                   int k0, int k1, const float *x,
                                                   const float *packed_w, const McuFinish *f,
                                                   float *y)
{
    McuReduce r = cv->r;
    const int taps = k1 - k0;
    if (!cv->x_blocked) {
        r.cols = cv->lanes;
        r.steps = taps;
    } else if (cv->dil_w == 1) {
        r.cols = 1;
        r.steps = taps * BLOCK;
    } else {
        r.cols = taps;
        r.steps = BLOCK;
    }
    const float *xc = x + (c_lo * cv->stride_w - cv->pad_w + k0 * cv->dil_w) * cv->x_col;
    const float *wc = packed_w + k0 * (cv->x_blocked ? BLOCK : cv->lanes) * PAIR;
    for (int n = 0; n < cv->batch; n++)
        for (int ob = 0; ob < cv->out_blocks; ob++) {
            McuFinish fb = *f;
            if (f->bias)
                fb.bias = f->bias + ob * BLOCK;
            for (int oh = 0; oh < cv->out_h; oh++) {
                int64_t r0, r1;
                fxrt_window_range(oh, cv->stride_h, cv->pad_h, cv->dil_h, cv->in_h,
                                  cv->kernel_h, &r0, &r1);
                r.rows = (int)(r1 - r0);
                run_tiles(&r, c_hi - c_lo, cv->stride_w * cv->x_col,
                          xc + n * cv->x_image +
                              (oh * cv->stride_h - cv->pad_h + (int)r0 * cv->dil_h) * cv->in_w *
                                  cv->x_col,
                          wc + ob / 2 * cv->in_blocks * r.w_block + ob % 2 * BLOCK +
                              (int)r0 * r.w_row,
                          &fb,
                          y + n * cv->y_image + ob * cv->y_block + (oh * cv->out_w + c_lo) * BLOCK);
            }
        }
}

/* Epilogues other than bias and clamp, on each finished row, Y's blocks
 * being 8 columns of the epilogue's matrix. */
static __attribute__((noinline)) void conv_epilogue(const McuConv *cv, const FxrtEpilogue *ep,
                                                    int from_y, float *y)
{
    for (int n = 0; n < cv->batch; n++)
        for (int ob = 0; ob < cv->out_blocks; ob++)
            for (int oh = 0; oh < cv->out_h; oh++) {
                float *yr = y + n * cv->y_image + ob * cv->y_block + oh * cv->out_w * BLOCK;
                FxrtEpilogue e = *ep;
                e.bias = ep->bias ? ep->bias + ob * BLOCK : NULL;
                e.bias_row_stride = 0;
                e.bias_col_stride = 1;
                e.residual = ep->residual && !from_y ? ep->residual + (yr - y) : NULL;
                e.residual_ld = BLOCK;
                fxrt_epilogue_apply_f32(&e, 0, 0, cv->out_w, BLOCK, yr, BLOCK);
            }
}

void fxrt_conv_nchwc_mcu_f32(const FxrtConvParams *p, int x_blocked, const float *x,
                             const float *packed_w, const FxrtEpilogue *ep, float *y,
                             int64_t y_ob)
{
    McuConv cv;
    cv.in_h = (int)p->in_size[1], cv.in_w = (int)p->in_size[2];
    cv.out_h = (int)p->out_size[1], cv.out_w = (int)p->out_size[2];
    cv.stride_h = (int)p->stride[1], cv.stride_w = (int)p->stride[2];
    cv.dil_h = (int)p->dilation[1], cv.dil_w = (int)p->dilation[2];
    cv.pad_h = (int)p->pad_begin[1], cv.pad_w = (int)p->pad_begin[2];
    cv.kernel_h = (int)p->kernel[1], cv.kernel_w = (int)p->kernel[2];
    cv.batch = (int)p->batch;
    cv.x_blocked = x_blocked;
    cv.lanes = x_blocked ? BLOCK : (int)p->in_channels;
    cv.in_blocks = x_blocked ? (int)fxrt_nchwc_blocks(p->in_channels) : 1;
    cv.out_blocks = (int)fxrt_nchwc_blocks(p->out_channels);
    cv.x_image = cv.in_blocks * cv.in_h * cv.in_w * (x_blocked ? BLOCK : cv.lanes);
    cv.y_block = y_ob ? (int)y_ob : cv.out_h * cv.out_w * BLOCK;
    cv.y_image = cv.out_blocks * cv.y_block;
    if (cv.kernel_h == 1 && cv.kernel_w == 1 && cv.stride_h == 1 && cv.stride_w == 1 &&
        cv.pad_h == 0 && cv.pad_w == 0 && cv.out_h == cv.in_h && cv.out_w == cv.in_w) {
        cv.out_w = cv.in_w = cv.out_h * cv.out_w;
        cv.out_h = cv.in_h = 1;
    }
    cv.x_col = x_blocked ? BLOCK : 1;
    McuReduce *r = &cv.r;
    r->blocks = cv.in_blocks;
    r->x_block = cv.in_h * cv.in_w * BLOCK;
    r->x_row = cv.dil_h * cv.in_w * cv.x_col;
    r->w_block = cv.kernel_h * cv.kernel_w * cv.lanes * PAIR;
    r->w_row = cv.kernel_w * cv.lanes * PAIR;
    /* blocked: runs along the lanes (of all kernel columns when they are
     * contiguous); plain: along the kernel columns, a run per lane */
    r->x_col = x_blocked ? cv.dil_w * BLOCK : cv.in_h * cv.in_w;
    r->w_col = x_blocked ? BLOCK * PAIR : PAIR;
    r->x_step = x_blocked ? 1 : cv.dil_w;
    r->w_step = x_blocked ? PAIR : cv.lanes * PAIR;
    int64_t lo, hi;
    fxrt_window_inner(cv.in_w, cv.out_w, cv.kernel_w, cv.stride_w, cv.dil_w, cv.pad_w, &lo, &hi);
    McuFinish f = finish_of(ep, y);
    /* The interior columns as one run, each border column alone. */
    for (int c_lo = 0, c_hi; c_lo < cv.out_w; c_lo = c_hi) {
        int64_t k0 = 0, k1 = cv.kernel_w;
        c_hi = c_lo + 1;
        if (c_lo == (int)lo && hi > lo)
            c_hi = (int)hi;
        else
            fxrt_window_range(c_lo, cv.stride_w, cv.pad_w, cv.dil_w, cv.in_w, cv.kernel_w, &k0,
                              &k1);
        conv_columns(&cv, c_lo, c_hi, (int)k0, (int)k1, x, packed_w, &f, y);
    }
    if (!f.fused && fxrt_epilogue_active(ep))
        conv_epilogue(&cv, ep, f.from_y, y);
}

#endif /* FXRT_SMALL_KERNELS */
