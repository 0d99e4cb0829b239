/*
 * fxrt_nn_sparse.c - float convolutions and matrix products whose weights
 * magnitude pruning made mostly zero, stored as compressed rows (the
 * sparse-weights pass, opt/pass_sparse_weights.c): a row per output
 * channel with its nonzero values and 16-bit input indices.
 *
 * Why rows of single weights and not blocks: unstructured pruning leaves
 * the nonzeros scattered, so blocks of output channels (1x4, 4x1) would
 * store many zeros again at the sparsities pruning reaches (at 80% a 1x4
 * block is entirely zero only 41% of the time).  Vectors run along the
 * pixels instead, as in XNNPACK's sparse 1x1 kernels: each nonzero weight is
 * a broadcast multiplied into a run of pixels of one input plane, so every
 * lane does useful work whatever the pattern of the zeros.
 *
 * Convolution, im2col-free.  The image is padded and split into its stride
 * phases (in scratch; a stride-1 layer without padding reads X itself), all
 * at once, or for the firmware kernels (FXRT_SMALL_KERNELS) a band of output
 * rows at a time so that the scratch stays near 8 KiB: phase (a, b) of channel c holds padded pixel (r*sh + a, q*sw + b)
 * at (r, q), in planes of wq columns.  Output (oh, ow) then reads, for tap
 * (kh, kw), phase (kh % sh, kw % sw) at (oh + kh / sh, ow + kw / sw): one
 * constant offset per weight plus oh * wq + ow.  Walking the output in the
 * "wide" order oh * wq + ow (wq >= out_w; the columns past out_w are
 * computed and dropped), a tile of consecutive wide positions is, for every
 * weight, one contiguous run of the input at that weight's offset:
 *
 *     acc[t] += value[p] * image[offset[p] + q0 + t]
 *
 * the same loop for 1x1 and kxk, any stride.  Tiles of pixels are outermost,
 * so the input run they read stays in L1 across the output channels; the
 * offsets are computed once per call into scratch.  Then the tile goes to Y
 * (a row segment at a time when wq > out_w) and the epilogue
 * (fxrt_nn_epilogue.c) runs on it while it is in L1.
 *
 * Tiles, the widest the CPU has, chosen by CPUID at each call and capped by
 * fxrt_sparse_limit_isa (fxrt_isa.h): AVX-512 64 pixels (4 zmm
 * accumulators, masked tails), AVX2/FMA 32 (4 ymm), portable C 16 (the
 * firmware path and the tests' reference).  Each sums a row's weights in
 * their stored order, so the levels differ only by FMA's single rounding.
 *
 * Matrix product: C[i, j] = sum over row j's nonzeros of value * A[i, col],
 * a gather per weight; 16 (AVX-512) or 8 (AVX2) weights a step into lanes
 * added at the end, one at a time in C.  At one row of A this streams 6
 * bytes per kept weight where the dense GEMV streams 4 per weight.
 *
 * A 1x1 stride-1 layer with as many outputs as inputs can also write over
 * its input (the planner's in-place hook off the host): each tile's outputs
 * of every channel are summed into scratch and stored over X's pixels of
 * that tile, which no later tile reads.
 *
 * No allocation; the caller passes scratch of fxrt_sparse_conv_scratch_bytes.
 */
#include <math.h>
#include <string.h>

#include "fxrt.h"
#include "fxrt_isa.h"

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_SPARSE_X86 1
#include <immintrin.h>
#endif

enum { TILE_PORTABLE = 16, TILE_AVX2 = 32, TILE_AVX512 = 64, TILE_MAX = 64 };

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The phase-split image the rows read, a band of output rows at a time. */
typedef struct Phases {
    int64_t ph, pw;       /* phases used: min(stride, kernel) per axis */
    int64_t band;         /* output rows per band (all of them but with small bands) */
    int64_t hq, wq;       /* rows and columns of one phase plane of a band */
    int64_t channel;      /* floats per input channel: ph * pw * hq * wq */
    int direct;           /* stride 1, no padding: X itself is the image, one band */
} Phases;

/* Bytes of split image a band may take with small bands (the firmware
 * kernels, FXRT_SMALL_KERNELS); at least one output row's worth. */
enum { SMALL_BAND_BYTES = 8192 };

static Phases phases_of(const FxrtSparseConvParams *p, int small)
{
    Phases f;
    f.ph = min64(p->stride_h, p->kernel_h);
    f.pw = min64(p->stride_w, p->kernel_w);
    f.wq = ceil_div((p->out_w - 1) * p->stride_w + p->kernel_w, p->stride_w);
    /* phase rows a band of `band` output rows reads: band + extra */
    int64_t extra = (p->kernel_h - 1) / p->stride_h;
    f.direct = p->stride_h == 1 && p->stride_w == 1 && p->pad_top == 0 && p->pad_left == 0 &&
               p->out_h + extra == p->in_h && f.wq == p->in_w;
    f.band = p->out_h;
    if (small && !f.direct) {
        int64_t row_bytes = p->in_channels * f.ph * f.pw * f.wq * (int64_t)sizeof(float);
        f.band = SMALL_BAND_BYTES / (row_bytes > 0 ? row_bytes : 1) - extra;
        f.band = f.band < 1 ? 1 : f.band > p->out_h ? p->out_h : f.band;
    }
    f.hq = f.band + extra;
    f.channel = f.ph * f.pw * f.hq * f.wq;
    return f;
}

#ifdef FXRT_SMALL_KERNELS
enum { SMALL_BANDS = 1 };
#else
enum { SMALL_BANDS = 0 };
#endif

static int64_t offsets_bytes(int64_t nonzeros)
{
    return (int64_t)align64((size_t)(nonzeros > 0 ? nonzeros : 1) * sizeof(int32_t));
}

static int64_t scratch_bytes(const FxrtSparseConvParams *p, int64_t nonzeros, int small)
{
    Phases f = phases_of(p, small);
    size_t image = f.direct ? 0 : align64((size_t)(p->in_channels * f.channel) * sizeof(float));
    return offsets_bytes(nonzeros) + (int64_t)image;
}

int64_t fxrt_sparse_conv_scratch_bytes(const FxrtSparseConvParams *p, int64_t nonzeros)
{
    return scratch_bytes(p, nonzeros, SMALL_BANDS);
}

int64_t fxrt_sparse_conv_small_scratch_bytes(const FxrtSparseConvParams *p, int64_t nonzeros)
{
    return scratch_bytes(p, nonzeros, 1);
}

/* Padded pixel (r * sh + a, q * sw + b) of every channel of one image, for
 * the phase rows r = row0 .. row0 + hq - 1 of a band, into its phase plane;
 * outside X it is zero. */
static void split_phases(const FxrtSparseConvParams *p, const Phases *f, const float *x,
                         int64_t row0, float *image)
{
    for (int64_t c = 0; c < p->in_channels; c++) {
        const float *plane = x + c * p->in_h * p->in_w;
        for (int64_t a = 0; a < f->ph; a++)
            for (int64_t b = 0; b < f->pw; b++) {
                float *out = image + c * f->channel + (a * f->pw + b) * f->hq * f->wq;
                for (int64_t r = row0; r < row0 + f->hq; r++, out += f->wq) {
                    int64_t ih = r * p->stride_h + a - p->pad_top;
                    if (ih < 0 || ih >= p->in_h) {
                        memset(out, 0, (size_t)f->wq * sizeof *out);
                        continue;
                    }
                    const float *row = plane + ih * p->in_w;
                    for (int64_t q = 0; q < f->wq; q++) {
                        int64_t iw = q * p->stride_w + b - p->pad_left;
                        out[q] = iw >= 0 && iw < p->in_w ? row[iw] : 0.0f;
                    }
                }
            }
    }
}

/* Input offset of every stored weight within the phase-split image. */
static void weight_offsets(const FxrtSparseConvParams *p, const Phases *f, int64_t nonzeros,
                           const uint16_t *columns, int32_t *offsets)
{
    int64_t taps = p->kernel_h * p->kernel_w;
    for (int64_t k = 0; k < nonzeros; k++) {
        int64_t c = columns[k] / taps, tap = columns[k] % taps;
        int64_t kh = tap / p->kernel_w, kw = tap % p->kernel_w;
        int64_t phase = (kh % p->stride_h) * f->pw + kw % p->stride_w;
        offsets[k] = (int32_t)(c * f->channel + phase * f->hq * f->wq +
                               (kh / p->stride_h) * f->wq + kw / p->stride_w);
    }
}

/* What a tile does to its sums before the store: + bias, then clamped to
 * [lo, hi] (Relu, Clip; infinite bounds for none).  NaN passes through, as
 * in the epilogue's Relu and Clip.  Other epilogues (a residual, sigmoid,
 * ...) go through fxrt_epilogue_apply_f32 after the store: calling it per
 * tile and channel costs more than the sparse sums themselves. */
typedef struct RowClamp {
    float bias, lo, hi;
} RowClamp;

/* out[0 .. count) = clamp(bias + sum over weights k in [begin, end) of
 * values[k] * x[offsets[k] + t]). */
typedef void (*RowTileFn)(const float *x, const int32_t *offsets, const float *values,
                          int32_t begin, int32_t end, int64_t count, RowClamp clamp, float *out);

static void row_tile_portable(const float *x, const int32_t *offsets, const float *values,
                              int32_t begin, int32_t end, int64_t count, RowClamp clamp,
                              float *out)
{
    float acc[TILE_PORTABLE] = {0};
    for (int32_t k = begin; k < end; k++) {
        const float w = values[k], *in = x + offsets[k];
        for (int64_t t = 0; t < count; t++)
            acc[t] += w * in[t];
    }
    for (int64_t t = 0; t < count; t++) {
        float v = acc[t] + clamp.bias;
        v = v < clamp.lo ? clamp.lo : v;
        out[t] = v > clamp.hi ? clamp.hi : v;
    }
}

#ifdef FXRT_SPARSE_X86
__attribute__((target("avx2,fma"))) static void row_tile_avx2(const float *x,
                                                               const int32_t *offsets,
                                                               const float *values, int32_t begin,
                                                               int32_t end, int64_t count,
                                                               RowClamp clamp, float *out)
{
    const __m256 bias = _mm256_set1_ps(clamp.bias), lo = _mm256_set1_ps(clamp.lo),
                 hi = _mm256_set1_ps(clamp.hi);
#define FINISH8(a) _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_add_ps(a, bias)))
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    if (count == TILE_AVX2) {
        for (int32_t k = begin; k < end; k++) {
            __m256 w = _mm256_set1_ps(values[k]);
            const float *in = x + offsets[k];
            a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(in), a0);
            a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(in + 8), a1);
            a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(in + 16), a2);
            a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(in + 24), a3);
        }
        _mm256_storeu_ps(out, FINISH8(a0));
        _mm256_storeu_ps(out + 8, FINISH8(a1));
        _mm256_storeu_ps(out + 16, FINISH8(a2));
        _mm256_storeu_ps(out + 24, FINISH8(a3));
        return;
    }
    /* A tail: lanes at or past count are neither read nor written. */
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count), lanes);
    __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count - 8), lanes);
    __m256i m2 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count - 16), lanes);
    __m256i m3 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count - 24), lanes);
    for (int32_t k = begin; k < end; k++) {
        __m256 w = _mm256_set1_ps(values[k]);
        const float *in = x + offsets[k];
        a0 = _mm256_fmadd_ps(w, _mm256_maskload_ps(in, m0), a0);
        a1 = _mm256_fmadd_ps(w, _mm256_maskload_ps(in + 8, m1), a1);
        a2 = _mm256_fmadd_ps(w, _mm256_maskload_ps(in + 16, m2), a2);
        a3 = _mm256_fmadd_ps(w, _mm256_maskload_ps(in + 24, m3), a3);
    }
    _mm256_maskstore_ps(out, m0, FINISH8(a0));
    _mm256_maskstore_ps(out + 8, m1, FINISH8(a1));
    _mm256_maskstore_ps(out + 16, m2, FINISH8(a2));
    _mm256_maskstore_ps(out + 24, m3, FINISH8(a3));
#undef FINISH8
}

__attribute__((target("avx512f"))) static void row_tile_avx512(const float *x,
                                                                const int32_t *offsets,
                                                                const float *values, int32_t begin,
                                                                int32_t end, int64_t count,
                                                                RowClamp clamp, float *out)
{
    const __m512 bias = _mm512_set1_ps(clamp.bias), lo = _mm512_set1_ps(clamp.lo),
                 hi = _mm512_set1_ps(clamp.hi);
#define FINISH16(a) _mm512_min_ps(hi, _mm512_max_ps(lo, _mm512_add_ps(a, bias)))
    __mmask16 m[4];
    for (int i = 0; i < 4; i++) {
        int64_t left = count - 16 * i;
        m[i] = left >= 16 ? (__mmask16)0xFFFF
                          : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
    }
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int32_t k = begin; k < end; k++) {
        __m512 w = _mm512_set1_ps(values[k]);
        const float *in = x + offsets[k];
        a0 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m[0], in), a0);
        a1 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m[1], in + 16), a1);
        a2 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m[2], in + 32), a2);
        a3 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(m[3], in + 48), a3);
    }
    _mm512_mask_storeu_ps(out, m[0], FINISH16(a0));
    _mm512_mask_storeu_ps(out + 16, m[1], FINISH16(a1));
    _mm512_mask_storeu_ps(out + 32, m[2], FINISH16(a2));
    _mm512_mask_storeu_ps(out + 48, m[3], FINISH16(a3));
#undef FINISH16
}

/* The widest tiles in use: 2 AVX-512, 1 AVX2, 0 portable; capped by
 * fxrt_sparse_limit_isa (runtime/fxrt_isa.h). */
static int isa_cap = 2;

void fxrt_sparse_limit_isa(int level) { isa_cap = level; }

static int isa_level(void)
{
    if (isa_cap >= 2 && __builtin_cpu_supports("avx512f"))
        return 2;
    if (isa_cap >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 1;
    return 0;
}
#else
void fxrt_sparse_limit_isa(int level) { (void)level; }
#endif

/* The row tile of the widest level in use and its width. */
static RowTileFn row_tile_chosen(int64_t *tile)
{
    *tile = TILE_PORTABLE;
#ifdef FXRT_SPARSE_X86
    switch (isa_level()) {
    case 2:
        *tile = TILE_AVX512;
        return row_tile_avx512;
    case 1:
        *tile = TILE_AVX2;
        return row_tile_avx2;
    default:
        break;
    }
#endif
    return row_tile_portable;
}

/* Output channel oc's wide positions [q0, q0 + count) of the band starting
 * at output row oh0 from acc into its plane of Y (the positions past out_w
 * dropped), the epilogue on each segment stored. */
static void store_wide(const FxrtSparseConvParams *p, const Phases *f, const FxrtEpilogue *ep,
                       int64_t oc, int64_t oh0, int64_t q0, int64_t count, const float *acc,
                       float *y)
{
    int64_t pixels = p->out_h * p->out_w;
    float *plane = y + oc * pixels;
    for (int64_t q = q0; q < q0 + count;) {
        int64_t oh = q / f->wq, ow = q - oh * f->wq;
        if (ow >= p->out_w) {
            q = (oh + 1) * f->wq;
            continue;
        }
        int64_t len = min64(p->out_w - ow, q0 + count - q), at = (oh0 + oh) * p->out_w + ow;
        memcpy(plane + at, acc + (q - q0), (size_t)len * sizeof *acc);
        if (ep)
            fxrt_epilogue_apply_f32(ep, oc, at, 1, len, plane + at, pixels);
        q += len;
    }
}

/* One convolution, Y separate from X or (tile_rows given: a 1x1 stride-1
 * layer with as many outputs as inputs) written over it: then every output
 * channel's tile is summed into tile_rows first, and stored once no later
 * channel of that tile needs X's pixels there; later tiles read only later
 * pixels. */
static void sparse_conv(const FxrtSparseConvParams *p, const float *x, const int32_t *row_start,
                        const uint16_t *columns, const float *values, const FxrtEpilogue *ep,
                        float *y, void *scratch, float *tile_rows)
{
    int64_t pixels = p->out_h * p->out_w, in_pixels = p->in_h * p->in_w;
    if (p->batch <= 0 || p->out_channels <= 0 || pixels <= 0)
        return;
    if (!fxrt_epilogue_active(ep))
        ep = NULL;
    /* Bias and Relu/Clip in the tiles; anything else after each store. */
    int clamps = !ep || (!ep->residual && (ep->activation == FXRT_ACT_NONE ||
                                           ep->activation == FXRT_ACT_RELU ||
                                           ep->activation == FXRT_ACT_CLIP));
    RowClamp clamp = {0.0f, -INFINITY, INFINITY};
    if (clamps && ep && ep->activation == FXRT_ACT_RELU)
        clamp.lo = 0.0f;
    if (clamps && ep && ep->activation == FXRT_ACT_CLIP) {
        clamp.lo = ep->alpha;
        clamp.hi = ep->beta;
    }
    const float *bias = clamps && ep ? ep->bias : NULL;
    Phases f = phases_of(p, SMALL_BANDS);
    int64_t nonzeros = row_start[p->out_channels];
    int32_t *offsets = scratch;
    float *image = (float *)((char *)scratch + offsets_bytes(nonzeros));
    weight_offsets(p, &f, nonzeros, columns, offsets);
    int64_t tile;
    RowTileFn row_tile = row_tile_chosen(&tile);
    if (tile_rows)
        tile = min64(tile, TILE_PORTABLE);
    int contiguous = f.wq == p->out_w;
    float acc[TILE_MAX];
    for (int64_t b = 0; b < p->batch; b++) {
        const float *xb = x + b * p->in_channels * in_pixels;
        float *yb = y + b * p->out_channels * pixels;
        FxrtEpilogue image_ep;
        const FxrtEpilogue *after = NULL;
        if (!clamps) {
            image_ep = *ep;
            image_ep.bias_row_stride = 1;
            image_ep.bias_col_stride = 0;
            image_ep.residual_ld = pixels;
            if (ep->residual)
                image_ep.residual = ep->residual + b * p->out_channels * pixels;
            after = &image_ep;
        }
        for (int64_t oh0 = 0; oh0 < p->out_h; oh0 += f.band) {
            int64_t rows = min64(f.band, p->out_h - oh0);
            const float *src = xb;
            if (!f.direct) {
                split_phases(p, &f, xb, oh0, image);
                src = image;
            }
            /* Wide positions up to the band's last output: the last row's
             * dropped columns are not computed, so no read passes the
             * image's end. */
            int64_t wide = (rows - 1) * f.wq + p->out_w, base = oh0 * p->out_w;
            for (int64_t q0 = 0; q0 < wide; q0 += tile) {
                int64_t count = min64(tile, wide - q0);
                for (int64_t oc = 0; oc < p->out_channels; oc++) {
                    clamp.bias = bias ? bias[oc] : 0.0f;
                    float *out = tile_rows    ? tile_rows + oc * TILE_PORTABLE
                                 : contiguous ? yb + oc * pixels + base + q0
                                              : acc;
                    row_tile(src + q0, offsets, values, row_start[oc], row_start[oc + 1], count,
                             clamp, out);
                    if (tile_rows)
                        continue;
                    if (!contiguous)
                        store_wide(p, &f, after, oc, oh0, q0, count, acc, yb);
                    else if (after)
                        fxrt_epilogue_apply_f32(after, oc, base + q0, 1, count, out, pixels);
                }
                for (int64_t oc = 0; tile_rows && oc < p->out_channels; oc++) {
                    float *out = yb + oc * pixels + q0;
                    memcpy(out, tile_rows + oc * TILE_PORTABLE, (size_t)count * sizeof *out);
                    if (after)
                        fxrt_epilogue_apply_f32(after, oc, q0, 1, count, out, pixels);
                }
            }
        }
    }
}

void fxrt_sparse_conv_f32(const FxrtSparseConvParams *p, const float *x, const int32_t *row_start,
                          const uint16_t *columns, const float *values, const FxrtEpilogue *ep,
                          float *y, void *scratch)
{
    sparse_conv(p, x, row_start, columns, values, ep, y, scratch, NULL);
}

int fxrt_sparse_conv_inplace_applies(const FxrtSparseConvParams *p)
{
    return p->kernel_h == 1 && p->kernel_w == 1 && p->stride_h == 1 && p->stride_w == 1 &&
           p->pad_top == 0 && p->pad_left == 0 && p->out_h == p->in_h && p->out_w == p->in_w &&
           p->out_channels == p->in_channels;
}

int64_t fxrt_sparse_conv_inplace_scratch_bytes(const FxrtSparseConvParams *p, int64_t nonzeros)
{
    return offsets_bytes(nonzeros) +
           (int64_t)align64((size_t)(p->out_channels * TILE_PORTABLE) * sizeof(float));
}

void fxrt_sparse_conv_inplace_f32(const FxrtSparseConvParams *p, float *xy,
                                  const int32_t *row_start, const uint16_t *columns,
                                  const float *values, const FxrtEpilogue *ep, void *scratch)
{
    float *tile_rows = (float *)((char *)scratch + offsets_bytes(row_start[p->out_channels]));
    sparse_conv(p, xy, row_start, columns, values, ep, xy, scratch, tile_rows);
}

/* --- the matrix product ------------------------------------------------------ */

/* sum over k in [begin, end) of values[k] * a[columns[k]]. */
typedef float (*RowDotFn)(const float *a, const uint16_t *columns, const float *values,
                          int32_t begin, int32_t end);

static float row_dot_portable(const float *a, const uint16_t *columns, const float *values,
                              int32_t begin, int32_t end)
{
    float sum = 0.0f;
    for (int32_t k = begin; k < end; k++)
        sum += values[k] * a[columns[k]];
    return sum;
}

#ifdef FXRT_SPARSE_X86
__attribute__((target("avx2,fma"))) static float row_dot_avx2(const float *a,
                                                               const uint16_t *columns,
                                                               const float *values, int32_t begin,
                                                               int32_t end)
{
    __m256 acc = _mm256_setzero_ps();
    int32_t k = begin;
    for (; k + 8 <= end; k += 8) {
        __m256i idx = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(columns + k)));
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(values + k), _mm256_i32gather_ps(a, idx, 4), acc);
    }
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    float sum = _mm_cvtss_f32(s);
    for (; k < end; k++)
        sum += values[k] * a[columns[k]];
    return sum;
}

__attribute__((target("avx512f"))) static float row_dot_avx512(const float *a,
                                                                const uint16_t *columns,
                                                                const float *values, int32_t begin,
                                                                int32_t end)
{
    __m512 acc = _mm512_setzero_ps();
    int32_t k = begin;
    for (; k + 16 <= end; k += 16) {
        __m512i idx = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(columns + k)));
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(values + k), _mm512_i32gather_ps(idx, a, 4), acc);
    }
    if (k < end) {
        /* 16-bit masked loads need AVX512BW: the tail's indices go through
         * a zeroed copy, and masked-off lanes are not gathered. */
        uint16_t tail[16] = {0};
        memcpy(tail, columns + k, (size_t)(end - k) * sizeof *tail);
        __mmask16 m = (__mmask16)((1u << (end - k)) - 1u);
        __m512i idx = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)tail));
        __m512 v = _mm512_maskz_loadu_ps(m, values + k);
        acc = _mm512_fmadd_ps(v, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, a, 4),
                              acc);
    }
    return _mm512_reduce_add_ps(acc);
}
#endif

void fxrt_sparse_gemm_f32(int64_t m, int64_t n, const float *a, int64_t lda,
                          const int32_t *row_start, const uint16_t *columns, const float *values,
                          float *c, int64_t ldc, const FxrtEpilogue *ep)
{
    if (m <= 0 || n <= 0)
        return;
    if (!fxrt_epilogue_active(ep))
        ep = NULL;
    RowDotFn dot = row_dot_portable;
#ifdef FXRT_SPARSE_X86
    switch (isa_level()) {
    case 2:
        dot = row_dot_avx512;
        break;
    case 1:
        dot = row_dot_avx2;
        break;
    default:
        break;
    }
#endif
    for (int64_t i = 0; i < m; i++) {
        const float *row = a + i * lda;
        float *out = c + i * ldc;
        for (int64_t j = 0; j < n; j++)
            out[j] = dot(row, columns, values, row_start[j], row_start[j + 1]);
        if (ep)
            fxrt_epilogue_apply_f32(ep, i, 0, 1, n, out, ldc);
    }
}
