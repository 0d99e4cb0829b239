/*
 * fxrt_nn_nchwc_conv.c - the 2-D convolution (groups 1) with Y in the
 * channel-blocked layout NCHWc (see fxrt_nn.h); groups > 1 goes to
 * fxrt_conv_nchwc_depthwise_f32.
 *
 * A direct convolution, no im2col: each call of the tile kernel computes fb
 * output channel blocks (eight channels each) of np consecutive output
 * pixels of one row, fb x np vectors of partial sums that stay in
 * registers over the whole reduction.  The reduction runs over input
 * channel blocks, kernel rows, kernel columns and the eight lanes of an
 * input block; each step broadcasts one input value per pixel and
 * multiplies it by fb weight vectors, which the packing laid out
 * contiguously for exactly this walk.  With X plain NCHW (a first layer of
 * one to three channels) the same walk sees a single "block" whose lanes
 * are the input channels, one plane apart.
 *
 * Padding is never tested per tap: the kernel-row range is clipped once
 * per output row, and only the output columns whose window crosses the
 * left or right edge run with a clipped kernel-column range, one pixel at a
 * time; the interior columns run full tiles.
 *
 * Cache blocking: the weights one tile sweeps are limited to a chunk of
 * input channel blocks that fits in L1 (partial sums go to Y between
 * chunks and come back for the next one), and the output rows are taken a
 * few at a time so that the input rows they read stay in L2 while every
 * output block group passes over them.
 *
 * The epilogue is applied as the last chunk of a tile is stored: bias,
 * residual and relu / clip on the registers; other activations through
 * fxrt_epilogue_apply_f32 on the stored [np x 8] block of each output
 * channel block.
 *
 * On host (FXRT_USE_CBLAS, x86-64, GCC or Clang) the tile kernel is AVX2/FMA
 * intrinsics, one instance per (fb, np) so that the partial sums are named
 * registers, chosen at run time when the CPU has them; the portable kernel
 * is plain C whose innermost loops run over the eight lanes of a block.
 */
#include <math.h>
#include <string.h>

#include "fxrt.h"

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_NCHWC_AVX2 1
#include <immintrin.h>
#endif

#define BLOCK FXRT_NCHWC_BLOCK

/* Output channel blocks per tile, and the pixels per tile for each count:
 * twelve accumulators or so, the most AVX2's sixteen registers hold next to
 * the weight vectors and the broadcast. */
enum { MAX_FB = 4, MAX_NP = 8 };
static const int64_t tile_pixels[MAX_FB + 1] = {0, 8, 6, 4, 3};

/* Floats of weights one tile sweeps per chunk (16 KiB of L1), and floats of
 * input one band of output rows reads (128 KiB of L2). */
enum { L1_WEIGHT_FLOATS = 1 << 12, L2_INPUT_FLOATS = 1 << 15 };

/* One tile: fb output blocks x np pixels.  x points at the input of the
 * first pixel for the first tap of the clipped ranges, w at that tap's
 * weights of the first output block; the strides are in floats. */
typedef struct Tile {
    const float *x;
    int64_t x_pixel, x_block, x_row, x_col, x_lane;
    int64_t blocks, rows, cols, lanes;
    const float *w;
    int64_t w_ob, w_block, w_row; /* the column stride is lanes * 8 */
    float *y;
    int64_t y_ob;
    int accumulate; /* start from the partial sums in Y instead of zero */
    /* The epilogue done on the registers (only with the last chunk): bias
     * (at the first output block), residual (at the tile), and a clamp to
     * [lo, hi] when `clamp` (relu and clip). */
    const float *bias, *residual;
    int residual_after, clamp;
    float lo, hi;
} Tile;

static void tile_plain(const Tile *t, int64_t fb, int64_t np)
{
    float acc[MAX_FB][MAX_NP][BLOCK];
    for (int64_t f = 0; f < fb; f++)
        for (int64_t q = 0; q < np; q++)
            for (int o = 0; o < BLOCK; o++)
                acc[f][q][o] = t->accumulate ? t->y[f * t->y_ob + q * BLOCK + o] : 0.0f;
    for (int64_t b = 0; b < t->blocks; b++)
        for (int64_t r = 0; r < t->rows; r++)
            for (int64_t c = 0; c < t->cols; c++) {
                const float *xs = t->x + b * t->x_block + r * t->x_row + c * t->x_col;
                const float *ws = t->w + b * t->w_block + r * t->w_row + c * t->lanes * BLOCK;
                for (int64_t l = 0; l < t->lanes; l++)
                    for (int64_t f = 0; f < fb; f++) {
                        const float *wv = ws + f * t->w_ob + l * BLOCK;
                        for (int64_t q = 0; q < np; q++) {
                            float xv = xs[q * t->x_pixel + l * t->x_lane];
                            for (int o = 0; o < BLOCK; o++)
                                acc[f][q][o] += xv * wv[o];
                        }
                    }
            }
    for (int64_t f = 0; f < fb; f++)
        for (int64_t q = 0; q < np; q++) {
            float *v = acc[f][q];
            const float *res = t->residual ? t->residual + f * t->y_ob + q * BLOCK : NULL;
            if (t->bias)
                for (int o = 0; o < BLOCK; o++)
                    v[o] += t->bias[f * BLOCK + o];
            if (res && !t->residual_after)
                for (int o = 0; o < BLOCK; o++)
                    v[o] += res[o];
            if (t->clamp)
                for (int o = 0; o < BLOCK; o++) {
                    float c = v[o] < t->lo ? t->lo : v[o];
                    v[o] = c > t->hi ? t->hi : c;
                }
            if (res && t->residual_after)
                for (int o = 0; o < BLOCK; o++)
                    v[o] += res[o];
            memcpy(t->y + f * t->y_ob + q * BLOCK, v, sizeof acc[0][0]);
        }
}

typedef void (*TileFn)(const Tile *t);

#ifdef FXRT_NCHWC_AVX2
/* The kernel body for a constant fb and np: once inlined into its instance
 * every loop over f and q unrolls and acc[f][q] is a register. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile_avx2_body(const Tile *t, const int fb, const int np)
{
    __m256 acc[MAX_FB][MAX_NP];
#pragma GCC unroll 4
    for (int f = 0; f < fb; f++)
#pragma GCC unroll 8
        for (int q = 0; q < np; q++)
            acc[f][q] = t->accumulate ? _mm256_loadu_ps(t->y + f * t->y_ob + q * BLOCK)
                                      : _mm256_setzero_ps();
    const int64_t lanes = t->lanes, x_lane = t->x_lane, x_pixel = t->x_pixel;
    for (int64_t b = 0; b < t->blocks; b++)
        for (int64_t r = 0; r < t->rows; r++) {
            const float *xs = t->x + b * t->x_block + r * t->x_row;
            const float *ws = t->w + b * t->w_block + r * t->w_row;
            for (int64_t c = 0; c < t->cols; c++, xs += t->x_col)
                for (int64_t l = 0; l < lanes; l++, ws += BLOCK) {
                    __m256 wv[MAX_FB];
#pragma GCC unroll 4
                    for (int f = 0; f < fb; f++)
                        wv[f] = _mm256_loadu_ps(ws + f * t->w_ob);
#pragma GCC unroll 8
                    for (int q = 0; q < np; q++) {
                        __m256 xv = _mm256_broadcast_ss(xs + q * x_pixel + l * x_lane);
#pragma GCC unroll 4
                        for (int f = 0; f < fb; f++)
                            acc[f][q] = _mm256_fmadd_ps(xv, wv[f], acc[f][q]);
                    }
                }
        }
    __m256 lo = _mm256_set1_ps(t->lo), hi = _mm256_set1_ps(t->hi);
#pragma GCC unroll 4
    for (int f = 0; f < fb; f++) {
        __m256 bias = t->bias ? _mm256_loadu_ps(t->bias + f * BLOCK) : _mm256_setzero_ps();
#pragma GCC unroll 8
        for (int q = 0; q < np; q++) {
            __m256 v = _mm256_add_ps(acc[f][q], bias);
            const float *res = t->residual ? t->residual + f * t->y_ob + q * BLOCK : NULL;
            if (res && !t->residual_after)
                v = _mm256_add_ps(v, _mm256_loadu_ps(res));
            /* max(lo, v), min(hi, v): a NaN in v comes through as in the
             * scalar epilogue. */
            if (t->clamp)
                v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
            if (res && t->residual_after)
                v = _mm256_add_ps(v, _mm256_loadu_ps(res));
            _mm256_storeu_ps(t->y + f * t->y_ob + q * BLOCK, v);
        }
    }
}

#define TILE_AVX2(fb, np)                                                                      \
    __attribute__((target("avx2,fma"))) static void tile_avx2_##fb##_##np(const Tile *t)     \
    {                                                                                          \
        tile_avx2_body(t, fb, np);                                                             \
    }
TILE_AVX2(1, 1) TILE_AVX2(1, 2) TILE_AVX2(1, 3) TILE_AVX2(1, 4)
TILE_AVX2(1, 5) TILE_AVX2(1, 6) TILE_AVX2(1, 7) TILE_AVX2(1, 8)
TILE_AVX2(2, 1) TILE_AVX2(2, 2) TILE_AVX2(2, 3) TILE_AVX2(2, 4) TILE_AVX2(2, 5) TILE_AVX2(2, 6)
TILE_AVX2(3, 1) TILE_AVX2(3, 2) TILE_AVX2(3, 3) TILE_AVX2(3, 4)
TILE_AVX2(4, 1) TILE_AVX2(4, 2) TILE_AVX2(4, 3)
#undef TILE_AVX2

/* tiles_avx2[fb][np], for np up to tile_pixels[fb]. */
static const TileFn tiles_avx2[MAX_FB + 1][MAX_NP + 1] = {
    {0},
    {0, tile_avx2_1_1, tile_avx2_1_2, tile_avx2_1_3, tile_avx2_1_4, tile_avx2_1_5,
     tile_avx2_1_6, tile_avx2_1_7, tile_avx2_1_8},
    {0, tile_avx2_2_1, tile_avx2_2_2, tile_avx2_2_3, tile_avx2_2_4, tile_avx2_2_5,
     tile_avx2_2_6},
    {0, tile_avx2_3_1, tile_avx2_3_2, tile_avx2_3_3, tile_avx2_3_4},
    {0, tile_avx2_4_1, tile_avx2_4_2, tile_avx2_4_3},
};

static int cpu_has_avx2(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

/* The convolution's shape, strides in floats, and the epilogue. */
typedef struct Conv {
    const FxrtConvParams *p;
    const FxrtEpilogue *ep;
    const float *residual; /* ep's, at the current image */
    int64_t in_h, in_w, out_h, out_w, kernel_h, kernel_w;
    int64_t stride_h, stride_w, dil_h, dil_w, pad_h, pad_w;
    int64_t in_blocks, out_blocks, lanes;
    int64_t x_image, x_row, x_col; /* x_row, x_col: one input row / column */
    Tile proto;                    /* the strides every tile shares */
    int generic_epilogue;          /* an activation the registers do not do */
    int avx2;
} Conv;

/* Computes the tile of fb blocks from ob and np pixels from (oh, ow) with
 * kernel rows [r0, r1) and columns [c0, c1), input blocks [b0, b0 +
 * blocks); `last` when these are the last blocks, which finishes Y. */
static void run_tile(const Conv *cv, const float *x, const float *w, float *y, int64_t ob,
                     int64_t fb, int64_t oh, int64_t ow, int64_t np, int64_t r0, int64_t r1,
                     int64_t c0, int64_t c1, int64_t b0, int64_t blocks, int last)
{
    Tile t = cv->proto;
    int64_t y_off = ob * t.y_ob + (oh * cv->out_w + ow) * BLOCK;
    t.y = y + y_off;
    t.accumulate = b0 > 0;
    t.blocks = blocks;
    t.rows = r1 - r0;
    t.cols = c1 - c0;
    t.x = x;
    t.w = w;
    if (t.rows > 0 && t.cols > 0) {
        t.x = x + b0 * t.x_block + (oh * cv->stride_h - cv->pad_h + r0 * cv->dil_h) * cv->x_row +
              (ow * cv->stride_w - cv->pad_w + c0 * cv->dil_w) * cv->x_col;
        t.w = w + ob * t.w_ob + b0 * t.w_block + r0 * t.w_row + c0 * t.lanes * BLOCK;
    } else {
        t.rows = 0;
    }
    const FxrtEpilogue *ep = cv->ep;
    int register_epilogue = last && ep && !cv->generic_epilogue;
    if (register_epilogue) {
        t.bias = ep->bias ? ep->bias + ob * BLOCK : NULL;
        t.residual = cv->residual ? cv->residual + y_off : NULL;
    }
    t.clamp &= register_epilogue;
#ifdef FXRT_NCHWC_AVX2
    if (cv->avx2)
        tiles_avx2[fb][np](&t);
    else
#endif
        tile_plain(&t, fb, np);
    if (last && ep && cv->generic_epilogue)
        for (int64_t f = 0; f < fb; f++) {
            FxrtEpilogue e = *ep;
            e.bias = ep->bias ? ep->bias + (ob + f) * BLOCK : NULL;
            e.bias_row_stride = 0;
            e.bias_col_stride = 1;
            e.residual = cv->residual ? cv->residual + y_off + f * t.y_ob : NULL;
            e.residual_ld = BLOCK;
            fxrt_epilogue_apply_f32(&e, 0, 0, np, BLOCK, t.y + f * t.y_ob, BLOCK);
        }
}

/* One output row of fb blocks from ob, input blocks [b0, b0 + blocks). */
static void conv_row(const Conv *cv, const float *x, const float *w, float *y, int64_t ob,
                     int64_t fb, int64_t oh, int64_t b0, int64_t blocks, int last)
{
    int64_t r0, r1, c0, c1;
    fxrt_window_range(oh, cv->stride_h, cv->pad_h, cv->dil_h, cv->in_h, cv->kernel_h, &r0, &r1);
    /* Columns [inner0, inner1) have their whole window inside the input. */
    int64_t reach = (cv->kernel_w - 1) * cv->dil_w;
    int64_t inner0 = (cv->pad_w + cv->stride_w - 1) / cv->stride_w;
    int64_t inner1 = cv->in_w - reach + cv->pad_w > 0
                         ? (cv->in_w - 1 - reach + cv->pad_w) / cv->stride_w + 1
                         : 0;
    if (inner0 > cv->out_w)
        inner0 = cv->out_w;
    if (inner1 > cv->out_w)
        inner1 = cv->out_w;
    if (inner1 < inner0)
        inner1 = inner0;
    for (int64_t ow = 0; ow < cv->out_w;) {
        if (ow >= inner0 && ow < inner1) {
            int64_t np = inner1 - ow < tile_pixels[fb] ? inner1 - ow : tile_pixels[fb];
            run_tile(cv, x, w, y, ob, fb, oh, ow, np, r0, r1, 0, cv->kernel_w, b0, blocks,
                     last);
            ow += np;
        } else {
            fxrt_window_range(ow, cv->stride_w, cv->pad_w, cv->dil_w, cv->in_w, cv->kernel_w,
                              &c0, &c1);
            run_tile(cv, x, w, y, ob, fb, oh, ow, 1, r0, r1, c0, c1, b0, blocks, last);
            ow++;
        }
    }
}

void fxrt_conv_nchwc_f32(const FxrtConvParams *p, int x_blocked, const float *x,
                         const float *packed_w, const FxrtEpilogue *ep, float *y)
{
    if (p->groups > 1) {
        fxrt_conv_nchwc_depthwise_f32(p, x, packed_w, ep, y);
        return;
    }
    Conv cv;
    memset(&cv, 0, sizeof cv);
    cv.p = p;
    cv.ep = fxrt_epilogue_active(ep) ? ep : NULL;
    cv.in_h = p->in_size[1];
    cv.in_w = p->in_size[2];
    cv.out_h = p->out_size[1];
    cv.out_w = p->out_size[2];
    cv.kernel_h = p->kernel[1];
    cv.kernel_w = p->kernel[2];
    cv.stride_h = p->stride[1];
    cv.stride_w = p->stride[2];
    cv.dil_h = p->dilation[1];
    cv.dil_w = p->dilation[2];
    cv.pad_h = p->pad_begin[1];
    cv.pad_w = p->pad_begin[2];
    cv.out_blocks = fxrt_nchwc_blocks(p->out_channels);
    int64_t plane = cv.in_h * cv.in_w;
    Tile *t = &cv.proto;
    if (x_blocked) {
        cv.in_blocks = fxrt_nchwc_blocks(p->in_channels);
        cv.lanes = BLOCK;
        cv.x_col = BLOCK;
        t->x_lane = 1;
        t->x_block = plane * BLOCK;
    } else {
        cv.in_blocks = 1;
        cv.lanes = p->in_channels;
        cv.x_col = 1;
        t->x_lane = plane;
        t->x_block = 0;
    }
    cv.x_row = cv.in_w * cv.x_col;
    cv.x_image = x_blocked ? cv.in_blocks * plane * BLOCK : p->in_channels * plane;
    t->x_pixel = cv.stride_w * cv.x_col;
    t->x_row = cv.dil_h * cv.x_row;
    t->x_col = cv.dil_w * cv.x_col;
    t->lanes = cv.lanes;
    t->w_row = cv.kernel_w * cv.lanes * BLOCK;
    t->w_block = cv.kernel_h * t->w_row;
    t->w_ob = cv.in_blocks * t->w_block;
    t->y_ob = cv.out_h * cv.out_w * BLOCK;
    if (cv.ep) {
        t->residual_after = cv.ep->residual_after;
        switch ((FxrtActivation)cv.ep->activation) {
        case FXRT_ACT_NONE: break;
        case FXRT_ACT_RELU:
            t->clamp = 1;
            t->lo = 0.0f;
            t->hi = INFINITY;
            break;
        case FXRT_ACT_CLIP:
            t->clamp = 1;
            t->lo = cv.ep->alpha;
            t->hi = cv.ep->beta;
            break;
        default: cv.generic_epilogue = 1; break;
        }
    }
#ifdef FXRT_NCHWC_AVX2
    cv.avx2 = cpu_has_avx2();
#endif

    /* Output block groups of at most MAX_FB blocks, as even as possible. */
    int64_t groups = (cv.out_blocks + MAX_FB - 1) / MAX_FB;
    /* Bands of output rows whose input rows fit in L2. */
    int64_t band = 1;
    while (band < cv.out_h) {
        int64_t in_rows = band * cv.stride_h + (cv.kernel_h - 1) * cv.dil_h + 1;
        if (in_rows * cv.x_row * cv.in_blocks * (x_blocked ? 1 : cv.lanes) > L2_INPUT_FLOATS)
            break;
        band++;
    }
    int64_t y_image = cv.out_blocks * t->y_ob;
    for (int64_t n = 0; n < p->batch; n++) {
        const float *xn = x + n * cv.x_image;
        float *yn = y + n * y_image;
        cv.residual = cv.ep && cv.ep->residual ? cv.ep->residual + n * y_image : NULL;
        for (int64_t oh0 = 0; oh0 < cv.out_h; oh0 += band) {
            int64_t oh1 = oh0 + band < cv.out_h ? oh0 + band : cv.out_h;
            for (int64_t g = 0, ob = 0; g < groups; g++) {
                int64_t fb = cv.out_blocks / groups + (g < cv.out_blocks % groups);
                int64_t chunk = L1_WEIGHT_FLOATS / (fb * t->w_block);
                if (chunk < 1)
                    chunk = 1;
                for (int64_t b0 = 0; b0 < cv.in_blocks; b0 += chunk) {
                    int64_t blocks = cv.in_blocks - b0 < chunk ? cv.in_blocks - b0 : chunk;
                    for (int64_t oh = oh0; oh < oh1; oh++)
                        conv_row(&cv, xn, packed_w, yn, ob, fb, oh, b0, blocks,
                                 b0 + blocks == cv.in_blocks);
                }
                ob += fb;
            }
        }
    }
}
