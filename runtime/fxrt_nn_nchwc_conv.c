/*
 * fxrt_nn_nchwc_conv.c - the 2-D convolution (groups 1) with Y in the
 * channel-blocked layout NCHWc (see fxrt_nn.h); groups > 1 goes to
 * fxrt_conv_nchwc_depthwise_f32.
 *
 * A direct convolution, no im2col: the tile kernel computes fb output
 * channel blocks (eight channels each) of np output pixels, fb x np vectors
 * of partial sums that stay in registers over the whole reduction.  The
 * reduction runs over input channel blocks, kernel rows, kernel columns and
 * the eight lanes of an input block; each step broadcasts one input value
 * per pixel and multiplies it by fb weight vectors, which the packing laid
 * out in the order of this walk.  With X plain NCHW (a first layer of one
 * to three channels) the same walk sees a single "block" whose lanes are
 * the input channels, one plane apart.  One kernel call runs a segment of
 * equal tiles in each of several output rows, so that the call and its
 * set-up are paid once per band of rows, not per tile.  Loop levels of the
 * reduction that the strides make contiguous are merged into the lane loop
 * (kernel columns of blocked input, input blocks of a 1x1 kernel).
 *
 * Padding is never tested per tap.  The pixels of a tile share their
 * clipped kernel ranges: a segment is either the interior columns of one
 * output row (kernel rows clipped for that row, all kernel columns) or one
 * border column over the interior rows (all kernel rows, kernel columns
 * clipped for that column; its pixels lie an output row apart).  Only the
 * corners, where both ranges are clipped, run one pixel at a time.  A
 * pointwise convolution has no border at all and runs as rows of several
 * image rows each, which leaves fewer short tiles at row ends.  A 1x1
 * convolution without padding whose input outgrows L2 (strided, or of 256
 * channels and more at stride 1) copies the pixels it reads into scratch
 * (fxrt_conv_nchwc_scratch_floats), a slab of output rows at a time, and
 * runs as a pointwise one on that dense copy (conv_slabs).
 *
 * Cache blocking: the weights one tile sweeps are limited to a chunk of
 * input channel blocks that fits in L1 (partial sums go to Y between
 * chunks and come back for the next one), and the output rows are taken a
 * band at a time so that the input rows they read stay in L2 while every
 * group of output blocks passes over them.  On the host, the tiles of a
 * layer whose weights outweigh its image ask for the weights a few KiB
 * ahead of where they read (the first tile of each chunk takes them from
 * DRAM).
 *
 * The epilogue is applied as the last chunk of a tile is stored: bias,
 * residual, relu / clip and sigmoid / SiLU on the registers; other
 * activations through fxrt_epilogue_apply_f32 on the stored [pixels x 8]
 * blocks of the segment.
 *
 * On host (FXRT_USE_CBLAS, x86-64, GCC or Clang) the tile kernel is AVX2/FMA
 * intrinsics, one instance per (fb, np) so that the partial sums are named
 * registers, chosen at run time when the CPU has them; the portable kernel
 * is plain C whose innermost loops run over the eight lanes of a block.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fxrt.h"
#include "fxrt_isa.h"
#include "fxrt_math.h"

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_NCHWC_AVX2 1
#include <cpuid.h>

#include "fxrt_math_x86.h"
#endif

#define BLOCK FXRT_NCHWC_BLOCK
#define PAIR FXRT_NCHWC_PAIR

#if !FXRT_SMALL_KERNELS

/* Whether ep's residual is Y itself (the compiler's plan gives a residual
 * that dies here Y's buffer) and is added before the activation: the sums
 * then start from Y and the epilogue adds no residual. */
static int residual_is_y(const FxrtEpilogue *ep, const float *y)
{
    return ep && ep->residual == y && !ep->residual_after;
}

/* Output channel blocks per tile, one pair of the packing (fxrt_nn.h) or
 * the lone last block, and the pixels per tile for each count: twelve
 * accumulators or so, what AVX2's sixteen registers hold next to the
 * weight vectors and the broadcast.  Two pairs of three pixels would need
 * seventeen registers (four blocks of three, measured before the pairing,
 * ran 10-25% slower than three blocks of four). */
enum { MAX_FB = 2, MAX_NP = 8 };
static const int64_t tile_pixels[MAX_FB + 1] = {0, 8, 6};

/* Floats of weights one tile sweeps per chunk (32 KiB, L1's size: the best
 * of 8 to 64 KiB measured on the AMD EPYC this was tuned on), floats of
 * input one band of output rows reads (128 KiB of L2; see also
 * weights_outer_band_floats), and the most pixels a pointwise convolution
 * puts in one row. */
enum { L1_WEIGHT_FLOATS = 1 << 13, L2_INPUT_FLOATS = 1 << 15, POINTWISE_ROW = 256 };

/* `lines` segments of `count` tiles of fb output blocks x np pixels.  x
 * points at the input of the first pixel for the first tap of the clipped
 * ranges, w at that tap's weights of the first output block, y at the first
 * pixel of the first output block; the strides are in floats, consecutive
 * tiles are np pixels apart and consecutive segments x_line / y_line. */
typedef struct Tile {
    const float *x;
    int64_t x_pixel, x_block, x_row, x_col, x_lane;
    int64_t blocks, rows, cols, lanes, count, lines, x_line;
    const float *w;
    /* w_pair: floats from one pair of output blocks to the next (see
     * w_block_offset); the column stride is lanes * 16. */
    int64_t w_pair, w_block, w_row;
    float *y;
    int64_t y_ob, y_pixel, y_line;
    int accumulate; /* start from the partial sums in Y instead of zero */
    int prefetch;   /* ask for the weights ahead (prefetch_weights_ahead) */
    /* The epilogue done on the registers (only with the last chunk): bias
     * (at the first output block), residual (at y's pixel), a clamp to
     * [lo, hi], which is relu and clip, and with infinite bounds no
     * activation, then `act` (FXRT_ACT_SIGMOID, FXRT_ACT_SILU or
     * FXRT_ACT_NONE). */
    const float *bias, *residual;
    int residual_after;
    float lo, hi;
    int act;
} Tile;

/* The clamp, then t->act, on one output value. */
static inline float finish_plain(const Tile *t, float v)
{
    float c = v < t->lo ? t->lo : v;
    c = c > t->hi ? t->hi : c;
    return t->act == FXRT_ACT_SILU ? fxrt_silu(c) : t->act == FXRT_ACT_SIGMOID ? fxrt_sigmoid(c) : c;
}

/* Where block f of a tile starts in the packed weights (fxrt_nn.h's pairs:
 * a tile starts at an even block), from the tile's first block. */
static inline int64_t w_block_offset(int64_t f, int64_t w_pair)
{
    return f / 2 * w_pair + f % 2 * BLOCK;
}

static void tile_plain(const Tile *t, int64_t fb, int64_t np)
{
    float acc[MAX_FB][MAX_NP][BLOCK];
    int64_t line_x = 0, line_y = 0, k = 0;
    for (int64_t tile = 0; tile < t->lines * t->count; tile++) {
        const float *x = t->x + line_x + k * np * t->x_pixel;
        float *y = t->y + line_y + k * np * t->y_pixel;
        const float *res = t->residual ? t->residual + line_y + k * np * t->y_pixel : NULL;
        if (++k == t->count) {
            k = 0;
            line_x += t->x_line;
            line_y += t->y_line;
        }
        for (int64_t f = 0; f < fb; f++)
            for (int64_t q = 0; q < np; q++)
                for (int o = 0; o < BLOCK; o++)
                    acc[f][q][o] = t->accumulate ? y[f * t->y_ob + q * t->y_pixel + o] : 0.0f;
        for (int64_t b = 0; b < t->blocks; b++)
            for (int64_t r = 0; r < t->rows; r++)
                for (int64_t c = 0; c < t->cols; c++) {
                    const float *xs = x + b * t->x_block + r * t->x_row + c * t->x_col;
                    const float *ws =
                        t->w + b * t->w_block + r * t->w_row + c * t->lanes * PAIR;
                    for (int64_t l = 0; l < t->lanes; l++)
                        for (int64_t f = 0; f < fb; f++) {
                            const float *wv = ws + w_block_offset(f, t->w_pair) + l * PAIR;
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
                const float *rv = res ? res + f * t->y_ob + q * t->y_pixel : NULL;
                if (t->bias)
                    for (int o = 0; o < BLOCK; o++)
                        v[o] += t->bias[f * BLOCK + o];
                if (rv && !t->residual_after)
                    for (int o = 0; o < BLOCK; o++)
                        v[o] += rv[o];
                for (int o = 0; o < BLOCK; o++)
                    v[o] = finish_plain(t, v[o]);
                if (rv && t->residual_after)
                    for (int o = 0; o < BLOCK; o++)
                        v[o] += rv[o];
                memcpy(y + f * t->y_ob + q * t->y_pixel, v, sizeof acc[0][0]);
            }
    }
}

typedef void (*TileFn)(const Tile *t);

#ifdef FXRT_NCHWC_AVX2
/* Unrolls a loop of constant trip count completely: GCC's pragma wants a
 * count, Clang's does without.  Clang (14) unrolls only part of the body
 * before inlining gives it the constants and keeps the accumulators in
 * memory: its build of these kernels runs at a third of GCC's. */
#ifdef __clang__
#define UNROLL_FULL _Pragma("unroll")
#else
#define UNROLL_FULL _Pragma("GCC unroll 8")
#endif

/* How far ahead of the weights a tile reads it asks for them: 4 KiB (2 and
 * 8 KiB measured no better).  A model's weights outgrow L3, so each chunk of
 * a layer's comes from DRAM for its first tile, and the hardware prefetcher,
 * which loses the stream wherever a chunk or group starts over, leaves that
 * tile waiting on it.  Calls with and without, alternating on the same
 * just-written input after a cache flush (40 pairs each, ResNet-50's
 * layers): 2048-512 1x1 at 7x7 2737 -> 2492 us (faster in 39 pairs),
 * 512-2048 with a residual 2617 -> 2416 (36), 512-512 3x3 at 7x7 6211 ->
 * 5329 (40), the same at stride 2 from 14x14 4800 -> 4019 (40), 256-1024 at
 * 14x14 2434 -> 2314 (38), 1024-256 2340 -> 2303 (27).  Only layers whose
 * weights outweigh their image ask (conv_nchwc's weights_outer): in the
 * others each weight serves many pixels from L1 or L2 and the prefetches,
 * all hits, only take load slots (early layers' medians moved from 8%
 * faster to 2% slower with them).  A prefetch never faults, so the address may run
 * past the weights; it is formed as an integer, since a pointer past the
 * end of its array would be undefined. */
enum { WEIGHT_PREFETCH_BYTES = 4096 };

__attribute__((always_inline)) static inline void prefetch_weights_ahead(const float *w)
{
    __builtin_prefetch((const void *)((uintptr_t)w + WEIGHT_PREFETCH_BYTES), 0, 3);
}

/* The clamp, max(lo, v) and min(hi, v) so that a NaN in v comes through
 * as in the scalar epilogue, then the sigmoid or SiLU of t->act. */
FXRT_AVX2_FN __m256 finish_avx2(int act, __m256 lo, __m256 hi, __m256 v)
{
    v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
    return act == FXRT_ACT_SILU ? fxrt_silu_avx2(v) : act == FXRT_ACT_SIGMOID ? fxrt_sigmoid_avx2(v) : v;
}

/* The kernel body for a constant fb and np: once inlined into its instance
 * every loop over f and q unrolls and acc[f][q] is a register.  The lane
 * loop stays a loop: unrolled, GCC runs out of registers for the pixel
 * addresses and spills accumulators (a third slower). */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile_avx2_body(const Tile *t, const int fb, const int np)
{
    const int64_t blocks = t->blocks, rows = t->rows, cols = t->cols, lanes = t->lanes;
    const int64_t x_block = t->x_block, x_row = t->x_row, x_col = t->x_col;
    const int64_t x_lane = t->x_lane, x_pixel = t->x_pixel;
    const int64_t w_pair = t->w_pair, w_block = t->w_block, w_row = t->w_row;
    const int64_t y_ob = t->y_ob, y_pixel = t->y_pixel;
    const int accumulate = t->accumulate, residual_after = t->residual_after;
    const int prefetch = t->prefetch;
    const float *bias = t->bias;
    const __m256 lo = _mm256_set1_ps(t->lo), hi = _mm256_set1_ps(t->hi);
    const int act = t->act;
    int64_t line_x = 0, line_y = 0, k = 0;
    for (int64_t tile = 0; tile < t->lines * t->count; tile++) {
        const float *x = t->x + line_x + k * np * x_pixel;
        float *y = t->y + line_y + k * np * y_pixel;
        const float *res = t->residual ? t->residual + line_y + k * np * y_pixel : NULL;
        if (++k == t->count) {
            k = 0;
            line_x += t->x_line;
            line_y += t->y_line;
        }
        /* Starting from the bias saves the adds at the end. */
        __m256 acc[MAX_FB][MAX_NP];
        UNROLL_FULL
        for (int f = 0; f < fb; f++) {
            __m256 start =
                bias && !accumulate ? _mm256_loadu_ps(bias + f * BLOCK) : _mm256_setzero_ps();
            UNROLL_FULL
            for (int q = 0; q < np; q++)
                acc[f][q] = accumulate ? _mm256_loadu_ps(y + f * y_ob + q * y_pixel) : start;
        }
        const float *xb = x, *wb = t->w;
        for (int64_t b = 0; b < blocks; b++, xb += x_block, wb += w_block) {
            const float *xr = xb, *wr = wb;
            for (int64_t r = 0; r < rows; r++, xr += x_row, wr += w_row) {
                const float *xs = xr, *ws = wr;
                for (int64_t c = 0; c < cols; c++, xs += x_col) {
                    for (int64_t l = 0; l < lanes; l++, ws += PAIR) {
                        if (prefetch)
                            prefetch_weights_ahead(ws);
                        __m256 wv[MAX_FB];
                        UNROLL_FULL
                        for (int f = 0; f < fb; f++)
                            wv[f] = _mm256_loadu_ps(ws + w_block_offset(f, w_pair));
                        UNROLL_FULL
                        for (int q = 0; q < np; q++) {
                            __m256 xv = _mm256_broadcast_ss(xs + q * x_pixel + l * x_lane);
                            UNROLL_FULL
                            for (int f = 0; f < fb; f++)
                                acc[f][q] = _mm256_fmadd_ps(xv, wv[f], acc[f][q]);
                        }
                    }
                }
            }
        }
        /* The common case, no residual and the bias already in, is the
         * activation alone. */
        if (!res && !(bias && accumulate)) {
            UNROLL_FULL
            for (int f = 0; f < fb; f++)
                UNROLL_FULL
                for (int q = 0; q < np; q++)
                    _mm256_storeu_ps(y + f * y_ob + q * y_pixel,
                                     finish_avx2(act, lo, hi, acc[f][q]));
            continue;
        }
        UNROLL_FULL
        for (int f = 0; f < fb; f++) {
            __m256 late = bias && accumulate ? _mm256_loadu_ps(bias + f * BLOCK)
                                             : _mm256_setzero_ps();
            UNROLL_FULL
            for (int q = 0; q < np; q++) {
                int64_t at = f * y_ob + q * y_pixel;
                __m256 v = _mm256_add_ps(acc[f][q], late);
                if (res && !residual_after)
                    v = _mm256_add_ps(v, _mm256_loadu_ps(res + at));
                v = finish_avx2(act, lo, hi, v);
                if (res && residual_after)
                    v = _mm256_add_ps(v, _mm256_loadu_ps(res + at));
                _mm256_storeu_ps(y + at, v);
            }
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
#undef TILE_AVX2

/* tiles_avx2[fb][np], for np up to tile_pixels[fb]. */
static const TileFn tiles_avx2[MAX_FB + 1][MAX_NP + 1] = {
    {0},
    {0, tile_avx2_1_1, tile_avx2_1_2, tile_avx2_1_3, tile_avx2_1_4, tile_avx2_1_5,
     tile_avx2_1_6, tile_avx2_1_7, tile_avx2_1_8},
    {0, tile_avx2_2_1, tile_avx2_2_2, tile_avx2_2_3, tile_avx2_2_4, tile_avx2_2_5,
     tile_avx2_2_6},
};

static int cpu_has_avx2(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* --- AVX-512 -----------------------------------------------------------------
 *
 * One zmm holds two consecutive output blocks (16 channels) of a pixel, so a
 * tile of fb blocks is fb / 2 pairs plus, for an odd fb, one ymm block, and
 * the 32 registers hold 24 accumulators (2 pairs by 12 pixels, or 4 by 6)
 * next to the weights and the broadcast.  A pair's 16 weights of one step
 * are contiguous in the packing (fxrt_nn.h), one load shared by the tile's
 * pixels; the output blocks of Y are a plane apart, so a pair of them is
 * stored as two halves.  On CPUs with two 512-bit FMA units this doubles
 * the multiply-adds per cycle of the AVX2 tiles. */
enum { MAX_FB512 = 8, MAX_NP512 = 16 };
static const int64_t tile_pixels512[MAX_FB512 + 1] = {0, 16, 14, 12, 12, 8, 8, 6, 6};

#define AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx2,fma")))
/* Tiles of up to 16 pixels: UNROLL_FULL's count of 8 would leave the pixel
 * loop rolled and the accumulators in memory. */
#ifdef __clang__
#define UNROLL_16 _Pragma("unroll")
#else
#define UNROLL_16 _Pragma("GCC unroll 16")
#endif

AVX512_TARGET __attribute__((always_inline)) static inline __m512 load_pair(const float *lo,
                                                                             const float *hi)
{
    __m512d low = _mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(lo)));
    return _mm512_castpd_ps(_mm512_insertf64x4(low, _mm256_castps_pd(_mm256_loadu_ps(hi)), 1));
}

AVX512_TARGET __attribute__((always_inline)) static inline void store_pair(float *lo, float *hi,
                                                                            __m512 v)
{
    _mm256_storeu_ps(lo, _mm512_castps512_ps256(v));
    _mm256_storeu_ps(hi, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* tile_avx2_body's walk with pairs of blocks; the same order of additions
 * per output element, so both give the same results up to FMA's rounding,
 * which both use. */
AVX512_TARGET __attribute__((always_inline)) static inline void
tile_avx512_body(const Tile *t, const int fb, const int np)
{
    const int pairs = fb / 2, odd = fb % 2;
    const int64_t blocks = t->blocks, rows = t->rows, cols = t->cols, lanes = t->lanes;
    const int64_t x_block = t->x_block, x_row = t->x_row, x_col = t->x_col;
    const int64_t x_lane = t->x_lane, x_pixel = t->x_pixel;
    const int64_t w_pair = t->w_pair, w_block = t->w_block, w_row = t->w_row;
    const int64_t y_ob = t->y_ob, y_pixel = t->y_pixel;
    const int accumulate = t->accumulate, residual_after = t->residual_after;
    const int prefetch = t->prefetch;
    const float *bias = t->bias;
    const __m512 lo = _mm512_set1_ps(t->lo), hi = _mm512_set1_ps(t->hi);
    const int act = t->act;
    int64_t line_x = 0, line_y = 0, k = 0;
    for (int64_t tile = 0; tile < t->lines * t->count; tile++) {
        const float *x = t->x + line_x + k * np * x_pixel;
        float *y = t->y + line_y + k * np * y_pixel;
        const float *res = t->residual ? t->residual + line_y + k * np * y_pixel : NULL;
        if (++k == t->count) {
            k = 0;
            line_x += t->x_line;
            line_y += t->y_line;
        }
        /* acc[p] holds blocks 2p and 2p + 1, single[] the odd last one */
        __m512 acc[MAX_FB512 / 2][MAX_NP512];
        __m256 single[MAX_NP512];
        UNROLL_16
        for (int f = 0; f < pairs; f++) {
            __m512 start = bias && !accumulate ? _mm512_loadu_ps(bias + 2 * f * BLOCK)
                                               : _mm512_setzero_ps();
            UNROLL_16
            for (int q = 0; q < np; q++)
                acc[f][q] = accumulate ? load_pair(y + 2 * f * y_ob + q * y_pixel,
                                                   y + (2 * f + 1) * y_ob + q * y_pixel)
                                       : start;
        }
        if (odd) {
            __m256 start = bias && !accumulate ? _mm256_loadu_ps(bias + (fb - 1) * BLOCK)
                                               : _mm256_setzero_ps();
            UNROLL_16
            for (int q = 0; q < np; q++)
                single[q] = accumulate ? _mm256_loadu_ps(y + (fb - 1) * y_ob + q * y_pixel)
                                       : start;
        }
        const float *xb = x, *wb = t->w;
        for (int64_t b = 0; b < blocks; b++, xb += x_block, wb += w_block) {
            const float *xr = xb, *wr = wb;
            for (int64_t r = 0; r < rows; r++, xr += x_row, wr += w_row) {
                const float *xs = xr, *ws = wr;
                for (int64_t c = 0; c < cols; c++, xs += x_col) {
                    for (int64_t l = 0; l < lanes; l++, ws += PAIR) {
                        __m512 wv[MAX_FB512 / 2];
                        UNROLL_16
                        for (int f = 0; f < pairs; f++) {
                            if (prefetch)
                                prefetch_weights_ahead(ws + f * w_pair);
                            wv[f] = _mm512_loadu_ps(ws + f * w_pair);
                        }
                        __m256 w1 = odd ? _mm256_loadu_ps(ws + w_block_offset(fb - 1, w_pair))
                                        : _mm256_setzero_ps();
                        UNROLL_16
                        for (int q = 0; q < np; q++) {
                            __m512 xv = _mm512_set1_ps(xs[q * x_pixel + l * x_lane]);
                            UNROLL_16
                            for (int f = 0; f < pairs; f++)
                                acc[f][q] = _mm512_fmadd_ps(xv, wv[f], acc[f][q]);
                            if (odd)
                                single[q] =
                                    _mm256_fmadd_ps(_mm512_castps512_ps256(xv), w1, single[q]);
                        }
                    }
                }
            }
        }
        /* The epilogue of tile_avx2_body, a pair at a time. */
        UNROLL_16
        for (int f = 0; f < pairs; f++) {
            __m512 late = bias && accumulate ? _mm512_loadu_ps(bias + 2 * f * BLOCK)
                                             : _mm512_setzero_ps();
            UNROLL_16
            for (int q = 0; q < np; q++) {
                int64_t at0 = 2 * f * y_ob + q * y_pixel, at1 = at0 + y_ob;
                __m512 v = _mm512_add_ps(acc[f][q], late);
                if (res && !residual_after)
                    v = _mm512_add_ps(v, load_pair(res + at0, res + at1));
                v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
                v = act == FXRT_ACT_SILU      ? fxrt_silu_avx512(v)
                    : act == FXRT_ACT_SIGMOID ? fxrt_sigmoid_avx512(v)
                                              : v;
                if (res && residual_after)
                    v = _mm512_add_ps(v, load_pair(res + at0, res + at1));
                store_pair(y + at0, y + at1, v);
            }
        }
        if (odd) {
            __m256 late = bias && accumulate ? _mm256_loadu_ps(bias + (fb - 1) * BLOCK)
                                             : _mm256_setzero_ps();
            __m256 lo8 = _mm512_castps512_ps256(lo), hi8 = _mm512_castps512_ps256(hi);
            UNROLL_16
            for (int q = 0; q < np; q++) {
                int64_t at = (fb - 1) * y_ob + q * y_pixel;
                __m256 v = _mm256_add_ps(single[q], late);
                if (res && !residual_after)
                    v = _mm256_add_ps(v, _mm256_loadu_ps(res + at));
                v = finish_avx2(act, lo8, hi8, v);
                if (res && residual_after)
                    v = _mm256_add_ps(v, _mm256_loadu_ps(res + at));
                _mm256_storeu_ps(y + at, v);
            }
        }
    }
}

#define TILE_AVX512(fb, np)                                                                    \
    AVX512_TARGET static void tile_avx512_##fb##_##np(const Tile *t)                          \
    {                                                                                          \
        tile_avx512_body(t, fb, np);                                                           \
    }
#define TILES_AVX512_8(fb, a)                                                                  \
    TILE_AVX512(fb, a##1) TILE_AVX512(fb, a##2) TILE_AVX512(fb, a##3) TILE_AVX512(fb, a##4)   \
    TILE_AVX512(fb, a##5) TILE_AVX512(fb, a##6) TILE_AVX512(fb, a##7) TILE_AVX512(fb, a##8)
TILES_AVX512_8(1, ) TILE_AVX512(1, 9) TILE_AVX512(1, 10) TILE_AVX512(1, 11) TILE_AVX512(1, 12)
TILE_AVX512(1, 13) TILE_AVX512(1, 14) TILE_AVX512(1, 15) TILE_AVX512(1, 16)
TILES_AVX512_8(2, ) TILE_AVX512(2, 9) TILE_AVX512(2, 10) TILE_AVX512(2, 11) TILE_AVX512(2, 12)
TILE_AVX512(2, 13) TILE_AVX512(2, 14)
TILES_AVX512_8(3, ) TILE_AVX512(3, 9) TILE_AVX512(3, 10) TILE_AVX512(3, 11) TILE_AVX512(3, 12)
TILES_AVX512_8(4, ) TILE_AVX512(4, 9) TILE_AVX512(4, 10) TILE_AVX512(4, 11) TILE_AVX512(4, 12)
TILES_AVX512_8(5, )
TILES_AVX512_8(6, )
TILE_AVX512(7, 1) TILE_AVX512(7, 2) TILE_AVX512(7, 3) TILE_AVX512(7, 4) TILE_AVX512(7, 5)
TILE_AVX512(7, 6)
TILE_AVX512(8, 1) TILE_AVX512(8, 2) TILE_AVX512(8, 3) TILE_AVX512(8, 4) TILE_AVX512(8, 5)
TILE_AVX512(8, 6)
#undef TILES_AVX512_8
#undef TILE_AVX512

#define ROW_AVX512_6(fb)                                                                       \
    tile_avx512_##fb##_1, tile_avx512_##fb##_2, tile_avx512_##fb##_3, tile_avx512_##fb##_4,    \
        tile_avx512_##fb##_5, tile_avx512_##fb##_6
#define ROW_AVX512(fb)                                                                         \
    ROW_AVX512_6(fb), tile_avx512_##fb##_7, tile_avx512_##fb##_8, tile_avx512_##fb##_9,        \
        tile_avx512_##fb##_10, tile_avx512_##fb##_11, tile_avx512_##fb##_12
/* tiles_avx512[fb][np], for np up to tile_pixels512[fb]. */
static const TileFn tiles_avx512[MAX_FB512 + 1][MAX_NP512 + 1] = {
    {0},
    {0, ROW_AVX512(1), tile_avx512_1_13, tile_avx512_1_14, tile_avx512_1_15, tile_avx512_1_16},
    {0, ROW_AVX512(2), tile_avx512_2_13, tile_avx512_2_14},
    {0, ROW_AVX512(3)},
    {0, ROW_AVX512(4)},
    {0, ROW_AVX512_6(5), tile_avx512_5_7, tile_avx512_5_8},
    {0, ROW_AVX512_6(6), tile_avx512_6_7, tile_avx512_6_8},
    {0, ROW_AVX512_6(7)},
    {0, ROW_AVX512_6(8)},
};
#undef ROW_AVX512_6
#undef ROW_AVX512

/* The widest tiles in use: 2 AVX-512, 1 AVX2, 0 portable; capped by
 * fxrt_nchwc_conv_limit_isa (runtime/fxrt_isa.h). */
static int isa_cap = 2;

void fxrt_nchwc_conv_limit_isa(int level) { isa_cap = level; }

static int cpu_has_avx512(void)
{
    return isa_cap >= 2 && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl") && cpu_has_avx2();
}

int fxrt_nchwc_conv_isa(void)
{
    return cpu_has_avx512() ? 2 : isa_cap >= 1 && cpu_has_avx2() ? 1 : 0;
}

/* The input floats a band may read when the weights are the outer loop
 * (late layers): half of this core's L2 as CPUID reports it (leaf
 * 0x80000006, which Intel and AMD both fill), at least L2_INPUT_FLOATS.
 * Each band sweeps all of a group's weights once more, so the band should
 * be as tall as the L2 keeps its input rows: with 128 KiB, ResNet-50's
 * stride-2 3x3 layer at 14x14 took one output row per band and ran at
 * 110 GFLOP/s; with the 1 MiB of a 2 MiB L2, the whole image and
 * 150 GFLOP/s (bench/RESULTS.md, 2026-12-06).  The band changes which
 * pixels a tile takes, never the order of any output's additions. */
static int64_t weights_outer_band_floats(void)
{
    static int64_t floats;
    if (!floats) {
        unsigned eax, ebx, ecx, edx;
        int64_t l2_bytes = __get_cpuid(0x80000006u, &eax, &ebx, &ecx, &edx)
                               ? (int64_t)(ecx >> 16) * 1024
                               : 0;
        floats = l2_bytes / 2 / (int64_t)sizeof(float);
        if (floats < L2_INPUT_FLOATS)
            floats = L2_INPUT_FLOATS;
    }
    return floats;
}
#else
void fxrt_nchwc_conv_limit_isa(int level) { (void)level; }
int fxrt_nchwc_conv_isa(void) { return 0; }

static int64_t weights_outer_band_floats(void) { return L2_INPUT_FLOATS; }
#endif

/* The convolution's shape, strides in floats, and the epilogue. */
typedef struct Conv {
    const FxrtEpilogue *ep;
    const float *residual; /* ep's, at the current image */
    int64_t in_h, in_w, out_h, out_w, kernel_h, kernel_w;
    int64_t stride_h, stride_w, dil_h, dil_w, pad_h, pad_w;
    int64_t in_blocks, out_blocks;
    int64_t x_row, x_col; /* one input row / column */
    /* Rows and columns whose window lies inside the input. */
    int64_t inner_row0, inner_row1, inner_col0, inner_col1;
    Tile proto; /* the strides every tile shares */
    int generic_epilogue; /* an activation the registers do not do */
    int residual_in_y;    /* ep's residual is Y: accumulate onto it */
    int avx2, avx512;
    const int64_t *tile_pixels; /* tile_pixels or tile_pixels512 */
} Conv;

/* Where one call computes: output blocks [ob, ob + fb), pixels from (oh,
 * ow) on, `step` floats of Y apart (8 along a row, a row's worth down a
 * column), the same in `lines` rows from oh on (along a row only), over
 * kernel rows [r0, r1), columns [c0, c1) and input blocks
 * [b0, b0 + blocks); `last` when those are the last blocks, which
 * finishes Y. */
typedef struct Span {
    int64_t ob, fb, oh, ow, step, lines, r0, r1, c0, c1, b0, blocks;
    int last;
} Span;

/* Runs `count` tiles of np pixels from pixel `first` of span s, in each of
 * its lines. */
static void run_tiles(const Conv *cv, const Span *s, const float *x, const float *w, float *y,
                      int64_t first, int64_t np, int64_t count)
{
    Tile t = cv->proto;
    int64_t along_row = s->step == BLOCK;
    int64_t oh = s->oh + (along_row ? 0 : first), ow = s->ow + (along_row ? first : 0);
    int64_t y_off = s->ob * t.y_ob + (oh * cv->out_w + ow) * BLOCK;
    t.y = y + y_off;
    t.y_pixel = s->step;
    t.count = count;
    t.lines = s->lines;
    t.x_line = cv->stride_h * cv->x_row;
    t.y_line = cv->out_w * BLOCK;
    t.accumulate = s->b0 > 0 || cv->residual_in_y;
    t.blocks = s->blocks;
    t.rows = s->r1 - s->r0;
    t.cols = s->c1 - s->c0;
    if (!along_row)
        t.x_pixel = cv->stride_h * cv->x_row;
    t.x = x;
    t.w = w;
    if (t.rows > 0 && t.cols > 0) {
        t.x = x + s->b0 * t.x_block +
              (oh * cv->stride_h - cv->pad_h + s->r0 * cv->dil_h) * cv->x_row +
              (ow * cv->stride_w - cv->pad_w + s->c0 * cv->dil_w) * cv->x_col;
        t.w = w + w_block_offset(s->ob, t.w_pair) + s->b0 * t.w_block + s->r0 * t.w_row +
              s->c0 * t.lanes * PAIR;
    } else {
        t.rows = 0;
    }
    /* A 1x1 kernel: the weights of consecutive input blocks follow each
     * other like those of kernel columns, so the block loop can run as the
     * column loop, one loop level less per tile. */
    if (t.rows == 1 && t.cols == 1 && t.w_block == t.lanes * PAIR) {
        t.cols = t.blocks;
        t.x_col = t.x_block;
        t.blocks = 1;
    }
    /* When the input of consecutive kernel columns is as contiguous as
     * that of lanes (blocked input with dilation 1, or a single plain
     * channel), the column and lane loops are one longer loop, which
     * halves the loop overhead of a 3x3 and removes most of a 1-channel
     * layer's. */
    if (t.lanes == 1)
        t.x_lane = t.x_col;
    if (t.x_col == t.lanes * t.x_lane) {
        t.lanes *= t.cols;
        t.cols = 1;
    }
    const FxrtEpilogue *ep = cv->ep;
    int register_epilogue = s->last && ep && !cv->generic_epilogue;
    if (register_epilogue) {
        t.bias = ep->bias ? ep->bias + s->ob * BLOCK : NULL;
        t.residual = cv->residual ? cv->residual + y_off : NULL;
    } else {
        t.lo = -INFINITY;
        t.hi = INFINITY;
        t.act = FXRT_ACT_NONE;
    }
#ifdef FXRT_NCHWC_AVX2
    if (cv->avx512)
        tiles_avx512[s->fb][np](&t);
    else if (cv->avx2)
        tiles_avx2[s->fb][np](&t);
    else
#endif
        tile_plain(&t, s->fb, np);
    if (s->last && ep && cv->generic_epilogue)
        for (int64_t line = 0; line < t.lines; line++)
            for (int64_t f = 0; f < s->fb; f++) {
                int64_t at = y_off + line * t.y_line + f * t.y_ob;
                FxrtEpilogue e = *ep;
                e.bias = ep->bias ? ep->bias + (s->ob + f) * BLOCK : NULL;
                e.bias_row_stride = 0;
                e.bias_col_stride = 1;
                e.residual = cv->residual ? cv->residual + at : NULL;
                e.residual_ld = s->step;
                fxrt_epilogue_apply_f32(&e, 0, 0, count * np, BLOCK, y + at, s->step);
            }
}

/* The `pixels` pixels of span s in as few tiles as the register block
 * allows, of sizes that differ by at most one (7 pixels of at most 3 are
 * 3 + 2 + 2, not 3 + 3 + 1: a lone pixel is a short dependency chain). */
static void run_span(const Conv *cv, const Span *s, const float *x, const float *w, float *y,
                     int64_t pixels)
{
    if (pixels <= 0)
        return;
    int64_t per = cv->tile_pixels[s->fb];
    int64_t tiles = (pixels + per - 1) / per;
    int64_t np = (pixels + tiles - 1) / tiles;
    int64_t full = pixels - tiles * (np - 1); /* tiles of np; the rest have np - 1 */
    run_tiles(cv, s, x, w, y, 0, np, full);
    if (full < tiles)
        run_tiles(cv, s, x, w, y, full * np, np - 1, tiles - full);
}

/* Output rows [oh0, oh1) of blocks [ob, ob + fb) over input blocks [b0, b0
 * + blocks): the interior columns of the interior rows as one call, those
 * of each border row (kernel rows clipped) as one call per row, the border
 * columns of the interior rows as column spans, and the corners pixel by
 * pixel. */
static void conv_band(const Conv *cv, const float *x, const float *w, float *y, Span s,
                      int64_t oh0, int64_t oh1)
{
    int64_t row0 = oh0 > cv->inner_row0 ? oh0 : cv->inner_row0;
    int64_t row1 = oh1 < cv->inner_row1 ? oh1 : cv->inner_row1;
    s.step = BLOCK;
    s.lines = 1;
    for (int64_t oh = oh0; oh < oh1; oh++) {
        if (oh >= row0 && oh < row1)
            continue;
        fxrt_window_range(oh, cv->stride_h, cv->pad_h, cv->dil_h, cv->in_h, cv->kernel_h, &s.r0,
                          &s.r1);
        s.oh = oh;
        s.ow = cv->inner_col0;
        s.c0 = 0;
        s.c1 = cv->kernel_w;
        run_span(cv, &s, x, w, y, cv->inner_col1 - cv->inner_col0);
        for (int64_t ow = 0; ow < cv->out_w; ow++) {
            if (ow == cv->inner_col0)
                ow = cv->inner_col1;
            if (ow >= cv->out_w)
                break;
            fxrt_window_range(ow, cv->stride_w, cv->pad_w, cv->dil_w, cv->in_w, cv->kernel_w,
                              &s.c0, &s.c1);
            s.ow = ow;
            run_tiles(cv, &s, x, w, y, 0, 1, 1);
        }
    }
    if (row0 >= row1)
        return;
    s.oh = row0;
    s.ow = cv->inner_col0;
    s.lines = row1 - row0;
    s.r0 = 0;
    s.r1 = cv->kernel_h;
    s.c0 = 0;
    s.c1 = cv->kernel_w;
    run_span(cv, &s, x, w, y, cv->inner_col1 - cv->inner_col0);
    s.step = cv->out_w * BLOCK;
    s.lines = 1;
    for (int64_t ow = 0; ow < cv->out_w; ow++) {
        if (ow == cv->inner_col0)
            ow = cv->inner_col1;
        if (ow >= cv->out_w)
            break;
        fxrt_window_range(ow, cv->stride_w, cv->pad_w, cv->dil_w, cv->in_w, cv->kernel_w,
                          &s.c0, &s.c1);
        s.ow = ow;
        run_span(cv, &s, x, w, y, row1 - row0);
    }
}

/* The convolution with Y's output blocks y_ob floats apart (0: an output
 * plane, Y a whole NCHWc tensor); the residual has Y's layout. */
static void conv_nchwc(const FxrtConvParams *p, int x_blocked, const float *x,
                       const float *packed_w, const FxrtEpilogue *ep, float *y, int64_t y_ob)
{
    Conv cv;
    memset(&cv, 0, sizeof cv);
    cv.ep = fxrt_epilogue_active(ep) ? ep : NULL;
    /* Every chunk starts from Y, so the first one starts from the residual. */
    cv.residual_in_y = residual_is_y(cv.ep, y);
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
    int64_t plane = cv.in_h * cv.in_w;
    if (cv.kernel_h == 1 && cv.kernel_w == 1 && cv.stride_h == 1 && cv.stride_w == 1 &&
        cv.pad_h == 0 && cv.pad_w == 0 && cv.out_h == cv.in_h && cv.out_w == cv.in_w) {
        /* Pointwise: consecutive image rows are consecutive pixels, so
         * rows of up to POINTWISE_ROW pixels (a whole number of image
         * rows) compute the same. */
        int64_t merge = 1;
        for (int64_t r = 2; r <= cv.in_h && r * cv.in_w <= POINTWISE_ROW; r++)
            if (cv.in_h % r == 0)
                merge = r;
        cv.in_w = cv.out_w = cv.in_w * merge;
        cv.in_h = cv.out_h = cv.in_h / merge;
    }
    cv.out_blocks = fxrt_nchwc_blocks(p->out_channels);
    Tile *t = &cv.proto;
    if (x_blocked) {
        cv.in_blocks = fxrt_nchwc_blocks(p->in_channels);
        cv.x_col = BLOCK;
        t->lanes = BLOCK;
        t->x_lane = 1;
        t->x_block = plane * BLOCK;
    } else {
        cv.in_blocks = 1;
        cv.x_col = 1;
        t->lanes = p->in_channels;
        t->x_lane = plane;
        t->x_block = 0;
    }
    cv.x_row = cv.in_w * cv.x_col;
    t->x_pixel = cv.stride_w * cv.x_col;
    t->x_row = cv.dil_h * cv.x_row;
    t->x_col = cv.dil_w * cv.x_col;
    t->w_row = cv.kernel_w * t->lanes * PAIR;
    t->w_block = cv.kernel_h * t->w_row;
    t->w_pair = cv.in_blocks * t->w_block;
    t->y_ob = y_ob ? y_ob : cv.out_h * cv.out_w * BLOCK;
    fxrt_window_inner(cv.in_h, cv.out_h, cv.kernel_h, cv.stride_h, cv.dil_h, cv.pad_h,
                      &cv.inner_row0, &cv.inner_row1);
    fxrt_window_inner(cv.in_w, cv.out_w, cv.kernel_w, cv.stride_w, cv.dil_w, cv.pad_w,
                      &cv.inner_col0, &cv.inner_col1);
    t->lo = -INFINITY;
    t->hi = INFINITY;
    if (cv.ep) {
        t->residual_after = cv.ep->residual_after;
        switch ((FxrtActivation)cv.ep->activation) {
        case FXRT_ACT_NONE: break;
        case FXRT_ACT_RELU: t->lo = 0.0f; break;
        case FXRT_ACT_CLIP:
            t->lo = cv.ep->alpha;
            t->hi = cv.ep->beta;
            break;
        case FXRT_ACT_SIGMOID:
        case FXRT_ACT_SILU: t->act = cv.ep->activation; break;
        default: cv.generic_epilogue = 1; break;
        }
    }
    int64_t x_image = cv.in_blocks * plane * (x_blocked ? BLOCK : t->lanes);
    int64_t y_image = cv.out_blocks * t->y_ob;
    /* What stays in cache while the other streams past.  Early layers,
     * with large images and few weights, take a band of input rows at a
     * time and pass every group of output blocks over it.  Late layers,
     * whose weights outweigh the image (each weight used by only a few
     * dozen pixels), read each weight once: when the image fits in half
     * of L2, each group runs over the whole image (its weights in
     * order, which the prefetcher follows); when it does not (ResNet-50's
     * 1024-channel layers at 14x14), a chunk of input channels of the whole
     * image stays in L2 while every group passes over it, so that the
     * image is read once per layer instead of once per group (the
     * stride-2 1x1 512-1024 at 28x28: 70 -> 85 GFLOP/s; a stride-2 3x3
     * at 14x14 with 9 MiB of weights, banded by rows of all channels, read
     * its weights once per output row and ran at 75). */
    int weights_outer = (cv.out_blocks + 1) / 2 * t->w_pair > x_image;
    t->prefetch = weights_outer;
    int64_t band_floats = weights_outer ? weights_outer_band_floats() : L2_INPUT_FLOATS;
    int groups_outer = weights_outer && x_image <= band_floats;
    int pointwise = t->w_block == t->lanes * PAIR && x_blocked;

    /* Groups of at most max_fb / 2 pairs of output blocks, as even as
     * possible: each starts at an even block (the packing's pairs) and the
     * last ends at out_blocks, one block short of its pairs when that is
     * odd.  On AVX-512, the pointwise layers of early stages take tiles of
     * up to 8 blocks (64 channels) by 6 pixels, so that ResNet-50's
     * 256-64 layers at 56x56 read their input once, not once per group of
     * 32 channels, with fewer broadcasts per multiply-add (MobileNet-v2's
     * 16-96 and 24-144 at 112x112 and 56x56: 1.12x), and so do the first
     * layers on plain input, whatever their image (ResNet-50's 7x7 stem:
     * 1.09x; DS-CNN's 10x4 stem on a 49x10 input, whose weights outweigh
     * it: 1.31x), and the stride-1 layers of larger kernels on rows of at
     * most 8 outputs, whose rows leave 12-pixel tiles half empty (ResNet's
     * 512-512 3x3 at 7x7: 4 blocks by 5 pixels, 10 sums, were 1.09x slower
     * than 8 by 5, ResNet-18 and -50 1.02x); the others keep 4 by 12, which
     * the blocked 3x3 direct and strided layers need (8 by 6 ran the
     * 256-256 3x3 at stride 2 at 0.74x) and the weights-outer pointwise
     * ones prefer (2048-512 at 7x7: 0.96x with 8). */
    int64_t max_fb = MAX_FB;
    cv.tile_pixels = tile_pixels;
#ifdef FXRT_NCHWC_AVX2
    cv.avx2 = isa_cap >= 1 && cpu_has_avx2();
    cv.avx512 = cpu_has_avx512();
    if (cv.avx512) {
        int short_rows = !pointwise && cv.stride_w == 1 && cv.out_w <= 8;
        max_fb = !x_blocked || (pointwise && !weights_outer) || short_rows ? MAX_FB512
                                                                           : MAX_FB512 / 2;
        cv.tile_pixels = tile_pixels512;
    }
#endif
    int64_t pairs = (cv.out_blocks + 1) / 2, max_pairs = max_fb / 2;
    int64_t groups = (pairs + max_pairs - 1) / max_pairs;
    int64_t group_pairs_max = (pairs + groups - 1) / groups;
    /* Input blocks per pass, whose weights fit in L1 next to what a tile
     * reads of the input.  A pointwise tile reads about a third as much
     * input as weights, so it takes half the chunk (16 KiB of weights;
     * ResNet-50's 1024-256 at 14x14: 72 -> 87 GFLOP/s), except when the
     * groups are outermost (small images: 7x7 layers, Winograd's planes):
     * there a chunk serves few pixels, and the partial sums stored
     * between chunks cost more than the L1 misses saved. */
    int64_t chunk_floats = pointwise && !groups_outer ? L1_WEIGHT_FLOATS / 2 : L1_WEIGHT_FLOATS;
    int64_t chunk = chunk_floats / (group_pairs_max * t->w_block);
    if (chunk < 1)
        chunk = 1;
    if (chunk > cv.in_blocks)
        chunk = cv.in_blocks;
    /* Bands of output rows whose input rows (of one chunk) fit in L2. */
    int64_t band = 1,
            x_rows_floats = cv.x_row * (groups_outer ? cv.in_blocks : chunk) * (x_blocked ? 1 : t->lanes);
    while (band < cv.out_h &&
           ((band + 1) * cv.stride_h + (cv.kernel_h - 1) * cv.dil_h) * x_rows_floats <=
               band_floats)
        band++;
    int64_t bands = (cv.out_h + band - 1) / band, chunks = (cv.in_blocks + chunk - 1) / chunk;
    for (int64_t n = 0; n < p->batch; n++) {
        const float *xn = x + n * x_image;
        float *yn = y + n * y_image;
        cv.residual = cv.ep && cv.ep->residual && !cv.residual_in_y ? cv.ep->residual + n * y_image
                                                                     : NULL;
        for (int64_t step = 0; step < groups * bands * chunks; step++) {
            /* groups_outer: group, band, chunk; else band, chunk, group. */
            int64_t g, band_index, chunk_index;
            if (groups_outer) {
                g = step / (bands * chunks);
                band_index = step / chunks % bands;
                chunk_index = step % chunks;
            } else {
                band_index = step / (chunks * groups);
                chunk_index = step / groups % chunks;
                g = step % groups;
            }
            int64_t oh0 = band_index * band, oh1 = oh0 + band < cv.out_h ? oh0 + band : cv.out_h;
            Span s;
            memset(&s, 0, sizeof s);
            int64_t group_pairs = pairs / groups + (g < pairs % groups);
            s.ob = 2 * (g * (pairs / groups) + (g < pairs % groups ? g : pairs % groups));
            s.fb = 2 * group_pairs < cv.out_blocks - s.ob ? 2 * group_pairs : cv.out_blocks - s.ob;
            s.b0 = chunk_index * chunk;
            s.blocks = cv.in_blocks - s.b0 < chunk ? cv.in_blocks - s.b0 : chunk;
            s.last = s.b0 + s.blocks == cv.in_blocks;
            conv_band(&cv, xn, packed_w, yn, s, oh0, oh1);
        }
    }
}
#else /* FXRT_SMALL_KERNELS */

void fxrt_nchwc_conv_limit_isa(int level) { (void)level; }
int fxrt_nchwc_conv_isa(void) { return 0; }

/* The small build's kernel is fxrt_nn_conv_mcu.c's, register-tiled for a
 * microcontroller's scalar FPU. */
static void conv_nchwc(const FxrtConvParams *p, int x_blocked, const float *x,
                       const float *packed_w, const FxrtEpilogue *ep, float *y, int64_t y_ob)
{
    fxrt_conv_nchwc_mcu_f32(p, x_blocked, x, packed_w, ep, y, y_ob);
}

#endif /* FXRT_SMALL_KERNELS */

#if !FXRT_SMALL_KERNELS
/* The input a stride-1 layer must have for conv_slabs: at least this many
 * blocks (256 channels) and floats (1 MiB, twice L2).  Alternating calls
 * of the two paths on the same just-written input, the slabs won 84-98 of
 * 100 pairs from 256 channels at 56x56 and 384 at 28x28 (3-20%), and lost
 * 65-90 of 100 (3-13%) on 192 channels at 56x56 and on every image under
 * 1 MiB, whose planes are few or stay in cache as they are. */
enum { SLAB_STRIDE1_BLOCKS = 32, SLAB_STRIDE1_FLOATS = 1 << 18 };

/* The output rows per slab when conv_slabs runs p, 0 when it does not: p
 * must be a 1x1 convolution without padding (all of its outputs inside the
 * input) with blocked X larger than a band's budget; an image that small
 * stays in cache as it is, and the copy cost the 1x1 s2 layers of ResNet-8
 * 10%.  A stride-1 layer also needs the input above and its weights no
 * larger than the image.
 * A slab is the whole image when the weights outweigh it (conv_nchwc then
 * wants all of it in L2 to read each weight once), else as many rows as a
 * band of the pointwise path would take (L2_INPUT_FLOATS, all input
 * channels), so that the copy is still in L2 when the tiles read it.  Only
 * p decides, never the CPU: the compiler sizes the scratch. */
static int64_t slab_rows(const FxrtConvParams *p, int x_blocked)
{
    int strided = p->stride[1] > 1 || p->stride[2] > 1;
    for (int d = 1; d <= 2; d++)
        if (p->kernel[d] != 1 || p->pad_begin[d] != 0 ||
            (p->out_size[d] - 1) * p->stride[d] >= p->in_size[d])
            return 0;
    int64_t blocks = fxrt_nchwc_blocks(p->in_channels);
    int64_t image = blocks * p->in_size[1] * p->in_size[2] * BLOCK;
    if (!x_blocked || p->groups != 1 || image <= L2_INPUT_FLOATS ||
        (!strided && (blocks < SLAB_STRIDE1_BLOCKS || image < SLAB_STRIDE1_FLOATS)))
        return 0;
    int64_t out_h = p->out_size[1], row_floats = blocks * p->out_size[2] * BLOCK;
    int64_t weights = (fxrt_nchwc_blocks(p->out_channels) + 1) / 2 * blocks * BLOCK * PAIR;
    if (weights > out_h * row_floats)
        return strided ? out_h : 0;
    int64_t rows = L2_INPUT_FLOATS / row_floats;
    return rows < 1 ? 1 : rows > out_h ? out_h : rows;
}

/* A 1x1 convolution as a stride-1 one over dense slabs: the input pixels of
 * each slab of output rows are copied into scratch, a dense NCHWc image of
 * the slab, which then takes the pointwise path into the slab's rows of Y.
 * Strided, read in place, a tile's pixels are a stride apart, so that each
 * cache line brings half the floats it could (a block is 32 bytes, a
 * stride-2 step 64), the tiles stop at every row end instead of running
 * along several rows, and the cache blocking counts the whole input,
 * skipped rows and columns included: it took bands and chunks where the
 * pixels read fit L2 as a whole.  ResNet-50's downsample layers, medians of
 * alternating runs: 1024-2048 at 14x14 74 -> 83 GFLOP/s, 256-512 at
 * 56x56 84 -> 87, 512-1024 at 28x28 87 -> 90 (bench/nchwc_kernels.c,
 * 2026-12-06).  Stride 1, in place, the tiles of a wide layer read one
 * stream per input block, each a whole plane apart (100352 bytes at 56x56:
 * every other stream on the same L1 sets), fed from L3 since the layer
 * before wrote them; in the slab they are a few KiB apart and in L2 (see
 * SLAB_STRIDE1_BLOCKS for which layers gain).  The copy reads no more of X
 * than the tiles did in place, and each slab is read back from L2. */
static void conv_slabs(const FxrtConvParams *p, const float *x, const float *packed_w,
                       const FxrtEpilogue *ep, float *y, float *scratch, int64_t slab)
{
    const int64_t blocks = fxrt_nchwc_blocks(p->in_channels);
    const int64_t in_row = p->in_size[2] * BLOCK, in_plane = p->in_size[1] * in_row;
    const int64_t out_h = p->out_size[1], out_w = p->out_size[2];
    const int64_t stride_h = p->stride[1], stride_w = p->stride[2];
    const int64_t y_plane = out_h * out_w * BLOCK;
    const int64_t y_image = fxrt_nchwc_blocks(p->out_channels) * y_plane;
    FxrtConvParams dense = *p;
    dense.batch = 1;
    dense.in_size[2] = p->out_size[2];
    for (int d = 1; d <= 2; d++)
        dense.stride[d] = dense.dilation[d] = 1;
    FxrtEpilogue ep_slab;
    if (ep)
        ep_slab = *ep;
    for (int64_t n = 0; n < p->batch; n++)
        for (int64_t oh0 = 0; oh0 < out_h; oh0 += slab) {
            int64_t rows = out_h - oh0 < slab ? out_h - oh0 : slab;
            const float *xn = x + n * blocks * in_plane;
            float *to = scratch;
            for (int64_t b = 0; b < blocks; b++)
                for (int64_t oh = oh0; oh < oh0 + rows; oh++) {
                    const float *from = xn + b * in_plane + oh * stride_h * in_row;
                    if (stride_w == 1) {
                        memcpy(to, from, (size_t)(out_w * BLOCK) * sizeof *to);
                        to += out_w * BLOCK;
                        continue;
                    }
                    for (int64_t ow = 0; ow < out_w; ow++, to += BLOCK)
                        memcpy(to, from + ow * stride_w * BLOCK, BLOCK * sizeof *to);
                }
            int64_t y_at = n * y_image + oh0 * out_w * BLOCK;
            if (ep && ep->residual)
                ep_slab.residual = ep->residual + y_at;
            dense.in_size[1] = dense.out_size[1] = rows;
            conv_nchwc(&dense, 1, scratch, packed_w, ep ? &ep_slab : NULL, y + y_at, y_plane);
        }
}

/* A first layer on a small plain input runs on a zero-padded copy of it.
 * In place, its tiles run along the interior of one output row at a time,
 * between border pixels that run alone (DS-CNN's 10x4 stride-2 stem on a
 * 49x10 input: rows of five outputs, three interior, and ten border rows).
 * On the copy every output is interior: one call runs the whole image as
 * rows of one full tile each.  The copy holds the input's rows and columns
 * that the windows reach, padding included; it is kept for inputs of at
 * most PADDED_FLOATS floats (a few KiB of copying), where the border is a
 * large part of the image. */
enum { PADDED_FLOATS = 1 << 13 };

/* The extent of the padded copy along spatial dimension d. */
static int64_t padded_extent(const FxrtConvParams *p, int d)
{
    return fxrt_window_extent(p->out_size[d], p->stride[d], p->kernel[d], p->dilation[d]);
}

static int64_t padded_floats(const FxrtConvParams *p, int x_blocked)
{
    if (x_blocked || p->groups != 1)
        return 0;
    int padded = 0;
    for (int d = 1; d <= 2; d++)
        padded |= p->pad_begin[d] > 0 || padded_extent(p, d) - p->pad_begin[d] > p->in_size[d];
    int64_t floats = p->in_channels * padded_extent(p, 1) * padded_extent(p, 2);
    return padded && floats <= PADDED_FLOATS ? floats : 0;
}

/* Each image copied into scratch with its padding, then convolved there
 * without any. */
static void conv_padded(const FxrtConvParams *p, const float *x, const float *packed_w,
                        const FxrtEpilogue *ep, float *y, float *scratch)
{
    const int64_t in_h = p->in_size[1], in_w = p->in_size[2];
    const int64_t top = p->pad_begin[1], left = p->pad_begin[2];
    const int64_t rows = padded_extent(p, 1), cols = padded_extent(p, 2);
    /* Padded columns [col0, col1) hold input columns from 0 on. */
    const int64_t col0 = left < cols ? left : cols;
    const int64_t col1 = left + in_w < cols ? left + in_w : cols;
    const int64_t y_image =
        fxrt_nchwc_blocks(p->out_channels) * p->out_size[1] * p->out_size[2] * BLOCK;
    FxrtConvParams padded = *p;
    padded.batch = 1;
    padded.in_size[1] = rows;
    padded.in_size[2] = cols;
    padded.pad_begin[1] = padded.pad_begin[2] = 0;
    FxrtEpilogue ep_image;
    if (ep)
        ep_image = *ep;
    for (int64_t n = 0; n < p->batch; n++) {
        float *to = scratch;
        for (int64_t ch = 0; ch < p->in_channels; ch++)
            for (int64_t r = 0; r < rows; r++, to += cols) {
                int64_t ih = r - top;
                if (ih < 0 || ih >= in_h || col1 <= col0) {
                    memset(to, 0, (size_t)cols * sizeof *to);
                    continue;
                }
                const float *from = x + ((n * p->in_channels + ch) * in_h + ih) * in_w;
                memset(to, 0, (size_t)col0 * sizeof *to);
                memcpy(to + col0, from, (size_t)(col1 - col0) * sizeof *to);
                memset(to + col1, 0, (size_t)(cols - col1) * sizeof *to);
            }
        if (ep && ep->residual)
            ep_image.residual = ep->residual + n * y_image;
        conv_nchwc(&padded, 0, scratch, packed_w, ep ? &ep_image : NULL, y + n * y_image, 0);
    }
}
#endif

int64_t fxrt_conv_nchwc_scratch_floats(const FxrtConvParams *p, int x_blocked)
{
#if FXRT_SMALL_KERNELS
    /* The small kernel walks the strides itself. */
    (void)p;
    (void)x_blocked;
    return 0;
#else
    return padded_floats(p, x_blocked) +
           slab_rows(p, x_blocked) * fxrt_nchwc_blocks(p->in_channels) * p->out_size[2] * BLOCK;
#endif
}

void fxrt_conv_nchwc_f32(const FxrtConvParams *p, int x_blocked, const float *x,
                         const float *packed_w, const FxrtEpilogue *ep, float *y, float *scratch)
{
    if (p->groups > 1) {
        fxrt_conv_nchwc_depthwise_f32(p, x, packed_w, ep, y);
        return;
    }
#if FXRT_SMALL_KERNELS
    (void)scratch;
#else
    /* The compiler sizes the scratch for the slabs; at stride 1 they pay
     * where the tiles read each input plane many times in place (AVX2's
     * 16-channel groups: 4 over ResNet-50's 256-64 at 56x56).  AVX-512's
     * 64-channel groups read it once for 64 outputs, twice for 128, and
     * the copy cost more than it saved: with those tiles, ResNet-50 55.3
     * -> 54.7 ms and DenseNet-121 38.4 -> 37.9 without it. */
    if (scratch && padded_floats(p, x_blocked)) {
        conv_padded(p, x, packed_w, ep, y, scratch);
        return;
    }
    int64_t slab = scratch ? slab_rows(p, x_blocked) : 0;
    int strided = p->stride[1] > 1 || p->stride[2] > 1;
    if (slab && (strided || fxrt_nchwc_conv_isa() < 2)) {
        conv_slabs(p, x, packed_w, ep, y, scratch, slab);
        return;
    }
#endif
    conv_nchwc(p, x_blocked, x, packed_w, ep, y, 0);
}

static int is_pointwise(const FxrtConvParams *p)
{
    return p->groups == 1 && p->in_channels == p->out_channels && p->kernel[1] == 1 &&
           p->kernel[2] == 1 && p->stride[1] == 1 && p->stride[2] == 1 &&
           p->pad_begin[1] == 0 && p->pad_begin[2] == 0 && p->in_size[1] == p->out_size[1] &&
           p->in_size[2] == p->out_size[2];
}

int fxrt_conv_nchwc_inplace_applies(const FxrtConvParams *p, int x_blocked)
{
    int depthwise = p->groups > 1 && p->out_size[1] * p->out_size[2] <= p->in_size[1] * p->in_size[2];
    return x_blocked && (depthwise || is_pointwise(p));
}

int64_t fxrt_conv_nchwc_inplace_scratch_floats(const FxrtConvParams *p)
{
    int64_t row = p->in_size[2] * BLOCK;
    return p->groups > 1 ? p->in_size[1] * row : fxrt_nchwc_blocks(p->in_channels) * row;
}

/* Pointwise, one image row at a time: the row's pixels of every input block
 * are gathered into scratch (a one-row NCHWc image), then the row's outputs
 * are computed from there into Y's blocks, a plane apart, over the input
 * row that is no longer needed. */
void fxrt_conv_nchwc_inplace_f32(const FxrtConvParams *p, float *xy, const float *packed_w,
                                 const FxrtEpilogue *ep, float *scratch)
{
    if (p->groups > 1) {
        fxrt_conv_nchwc_depthwise_inplace_f32(p, xy, packed_w, ep, scratch);
        return;
    }
#if FXRT_SMALL_KERNELS
    typedef int Index; /* no 64-bit arithmetic on a small build's 32-bit core */
#else
    typedef int64_t Index;
#endif
    Index blocks = (Index)fxrt_nchwc_blocks(p->in_channels), rows = (Index)p->in_size[1];
    Index row = (Index)p->in_size[2] * BLOCK, plane = rows * row, image = blocks * plane;
    FxrtConvParams one_row = *p;
    one_row.batch = 1;
    one_row.in_size[1] = one_row.out_size[1] = 1;
    FxrtEpilogue e;
    if (ep)
        e = *ep;
    for (Index n = 0; n < (Index)p->batch; n++)
        for (Index r = 0; r < rows; r++) {
            float *at = xy + n * image + r * row;
            for (Index b = 0; b < blocks; b++)
                memcpy(scratch + b * row, at + b * plane, (size_t)row * sizeof *scratch);
            if (ep && ep->residual)
                e.residual = ep->residual + n * image + r * row;
            conv_nchwc(&one_row, 1, scratch, packed_w, ep ? &e : NULL, at, plane);
        }
}
