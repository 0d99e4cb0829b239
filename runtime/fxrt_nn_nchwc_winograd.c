/*
 * fxrt_nn_nchwc_winograd.c - 3x3 stride-1 convolutions (groups 1, X and Y
 * NCHWc) by Winograd's minimal filtering F(4x4, 3x3), for the layers of
 * many channels where the direct kernel is bound by its multiply-adds.
 *
 * A 4x4 block of outputs is A^T [(G g G^T) . (B^T d B)] A for the 6x6
 * input tile d around it and the 3x3 kernel g, with . the elementwise
 * product over the 36 points.  Summed over the input channels, each of the
 * 36 points is a matrix product: [tiles x C_in] x [C_in x C_out].  So the
 * kernel transforms the input tiles into 36 planes, runs each plane as a
 * 1x1 convolution through fxrt_conv_nchwc_f32 (the same AVX-512, AVX2 and
 * portable tiles, 36 pointwise weight sets that the packing transformed
 * once), and transforms the 36 planes of products back into 4x4 outputs:
 * 36 multiply-adds per output pixel and channel pair instead of the direct
 * kernel's 144 per 4x4/9, i.e. 2.25 instead of 9 per output.
 *
 * Points 0, 1, -1, 2, -2 and infinity: the transform matrices then hold
 * only small integers and the weights' transform 1/4, 1/6, 1/12 and 1/24,
 * which the packing applies in double.  The float error is about 1e-5 of
 * the outputs' magnitude against the direct kernel's 1e-6; the pass that
 * chooses this kernel (opt/pass_winograd.c) takes it only where that is
 * within the compiler's tolerance, i.e. on the host, never for firmware.
 *
 * The tiles are taken in bands whose planes fit in the scratch the caller
 * passes (sized by fxrt_conv_nchwc_winograd_scratch_floats): a band's
 * transformed input and its products stay in L2 between the three steps,
 * and the weights of all 36 planes are read once per band.
 */
#include <math.h>
#include <string.h>

#include "fxrt.h"
#include "fxrt_isa.h"

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_WINOGRAD_AVX2 1
#include <immintrin.h>
#endif

#define BLOCK FXRT_NCHWC_BLOCK

enum {
    TILE = 4,   /* output pixels per tile side */
    POINTS = 6, /* input pixels per tile side, TILE + 3 - 1 */
    PLANES = POINTS * POINTS,
    /* Floats of transformed input plus products per band: 1 MiB, L2's
     * size on the AMD EPYC this was tuned on. */
    BAND_FLOATS = 1 << 18,
    /* Tiles a band takes at least, so that each weight read from L3 serves
     * enough pixels even for the widest layers. */
    MIN_BAND_TILES = 32
};

int fxrt_conv_nchwc_winograd_applies(const FxrtConvParams *p)
{
    return p->groups == 1 && p->in_size[0] == 1 && p->out_size[0] == 1 &&
           p->kernel[0] == 1 && p->kernel[1] == 3 && p->kernel[2] == 3 &&
           p->stride[1] == 1 && p->stride[2] == 1 && p->dilation[1] == 1 &&
           p->dilation[2] == 1;
}

static int64_t tiles_of(const FxrtConvParams *p)
{
    return ((p->out_size[1] + TILE - 1) / TILE) * ((p->out_size[2] + TILE - 1) / TILE);
}

/* Tiles per band: as many as BAND_FLOATS holds, at least MIN_BAND_TILES,
 * and bands of equal size rather than a short last one. */
static int64_t band_tiles(const FxrtConvParams *p)
{
    int64_t channel_blocks = fxrt_nchwc_blocks(p->in_channels) + fxrt_nchwc_blocks(p->out_channels);
    int64_t most = BAND_FLOATS / (PLANES * BLOCK * channel_blocks);
    if (most < MIN_BAND_TILES)
        most = MIN_BAND_TILES;
    int64_t tiles = tiles_of(p);
    if (most >= tiles)
        return tiles;
    int64_t bands = (tiles + most - 1) / most;
    return (tiles + bands - 1) / bands;
}

/* The product at one of the points: [count pixels x C_in] x [C_in x C_out],
 * a 1x1 convolution over a 1 x count image. */
static FxrtConvParams pointwise_params(const FxrtConvParams *p, int64_t count)
{
    FxrtConvParams pointwise;
    memset(&pointwise, 0, sizeof pointwise);
    pointwise.batch = 1;
    pointwise.in_channels = p->in_channels;
    pointwise.out_channels = p->out_channels;
    pointwise.groups = 1;
    for (int i = 0; i < FXRT_CONV_MAX_SPATIAL; i++) {
        pointwise.in_size[i] = pointwise.out_size[i] = 1;
        pointwise.kernel[i] = pointwise.stride[i] = pointwise.dilation[i] = 1;
    }
    pointwise.in_size[2] = pointwise.out_size[2] = count;
    return pointwise;
}

int64_t fxrt_conv_nchwc_winograd_packed_floats(const FxrtConvParams *p)
{
    FxrtConvParams pointwise = pointwise_params(p, 1);
    return PLANES * fxrt_conv_nchwc_packed_floats(&pointwise, 1);
}

/* Floats from one plane of a band to the next: its blocks x tiles x 8,
 * rounded up to an odd number of 64-byte lines.  The transforms write and
 * read a vector in each of the 36 planes per tile; a stride of a multiple
 * of 4 KiB (DenseNet's 128-32 layers at 56x56: 16 blocks x 40 tiles x 32
 * bytes) would put all 36 in one set of the L1 cache, which holds 8 to 12:
 * that layer took 1097 instead of 924 us on the AVX-512 Xeon.  An odd
 * number of lines puts 36 consecutive planes in 36 different sets. */
static int64_t plane_stride(int64_t blocks, int64_t tiles)
{
    int64_t lines = (blocks * tiles * BLOCK + 15) / 16;
    return (lines | 1) * 16;
}

int64_t fxrt_conv_nchwc_winograd_scratch_floats(const FxrtConvParams *p)
{
    int64_t tiles = band_tiles(p);
    return PLANES * (plane_stride(fxrt_nchwc_blocks(p->in_channels), tiles) +
                     plane_stride(fxrt_nchwc_blocks(p->out_channels), tiles));
}

/* G, the kernel's transform, rows for the points 0, 1, -1, 2, -2, inf. */
static const double kernel_transform[POINTS][3] = {
    {1.0 / 4, 0, 0},
    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
    {1.0 / 24, 1.0 / 12, 1.0 / 6},
    {1.0 / 24, -1.0 / 12, 1.0 / 6},
    {0, 0, 1},
};

/* Plane k = 6 * row + column holds the transformed weights G g G^T at that
 * point, in fxrt_conv_nchwc_pack_f32's 1x1 layout. */
void fxrt_conv_nchwc_winograd_pack_f32(const FxrtConvParams *p, const float *w, float *packed)
{
    FxrtConvParams pointwise = pointwise_params(p, 1);
    int64_t plane = fxrt_conv_nchwc_packed_floats(&pointwise, 1);
    memset(packed, 0, (size_t)(PLANES * plane) * sizeof *packed);
    for (int64_t oc = 0; oc < p->out_channels; oc++)
        for (int64_t ic = 0; ic < p->in_channels; ic++) {
            const float *g = w + (oc * p->in_channels + ic) * 9;
            double gt[POINTS][3]; /* G g */
            for (int i = 0; i < POINTS; i++)
                for (int j = 0; j < 3; j++)
                    gt[i][j] = kernel_transform[i][0] * g[j] + kernel_transform[i][1] * g[3 + j] +
                               kernel_transform[i][2] * g[6 + j];
            float *at = packed + fxrt_conv_nchwc_packed_index(&pointwise, 1, oc, ic, 0);
            for (int i = 0; i < POINTS; i++)
                for (int j = 0; j < POINTS; j++)
                    at[(i * POINTS + j) * plane] =
                        (float)(gt[i][0] * kernel_transform[j][0] + gt[i][1] * kernel_transform[j][1] +
                                gt[i][2] * kernel_transform[j][2]);
        }
}

/* The band being computed and where its steps read and write. */
typedef struct Band {
    const FxrtConvParams *p;
    int64_t in_blocks, out_blocks, tiles_w;
    int64_t first, count; /* tiles [first, first + count) of the image */
    float *planes_in;     /* [36][ICB][count][8], planes in_plane floats apart */
    float *planes_out;    /* [36][OCB][count][8], planes out_plane floats apart */
    int64_t in_plane, out_plane;
} Band;

/* The output pixel (h0, w0) at the top left of the band's tile t; its 6x6
 * input starts the padding above and left of it. */
static void tile_origin(const Band *b, int64_t t, int64_t *h0, int64_t *w0)
{
    int64_t tile = b->first + t;
    *h0 = tile / b->tiles_w * TILE;
    *w0 = tile % b->tiles_w * TILE;
}

/* B^T over six vectors of eight lanes, in[i * in_step] to out[i * out_step]:
 * the rows of B^T are (4 0 -5 0 1 0), (0 -4 -4 1 1 0), (0 4 -4 -1 1 0),
 * (0 -2 -1 2 1 0), (0 2 -1 -2 1 0), (0 4 0 -5 0 1).  Through local copies,
 * which alias nothing, so that each lane loop is one vector operation at
 * any optimization level. */
__attribute__((always_inline)) static inline void input_transform_1d(const float *in,
                                                                     int64_t in_step, float *out,
                                                                     int64_t out_step)
{
    float d[POINTS][BLOCK], o[POINTS][BLOCK];
    for (int i = 0; i < POINTS; i++)
        memcpy(d[i], in + i * in_step, sizeof d[i]);
    for (int l = 0; l < BLOCK; l++) {
        float d4_d2 = d[4][l] - d[2][l], d3_d1 = d[3][l] - d[1][l];
        o[0][l] = 4.0f * d[0][l] - 5.0f * d[2][l] + d[4][l];
        o[1][l] = (d[3][l] + d[4][l]) - 4.0f * (d[1][l] + d[2][l]);
        o[2][l] = (d[4][l] - d[3][l]) + 4.0f * (d[1][l] - d[2][l]);
        o[3][l] = d4_d2 + 2.0f * d3_d1;
        o[4][l] = d4_d2 - 2.0f * d3_d1;
        o[5][l] = 4.0f * d[1][l] - 5.0f * d[3][l] + d[5][l];
    }
    for (int i = 0; i < POINTS; i++)
        memcpy(out + i * out_step, o[i], sizeof o[i]);
}

/* A^T over six vectors: rows (1 1 1 1 1 0), (0 1 -1 2 -2 0), (0 1 1 4 4 0),
 * (0 1 -1 8 -8 1). */
__attribute__((always_inline)) static inline void output_transform_1d(const float *in,
                                                                      int64_t in_step, float *out,
                                                                      int64_t out_step)
{
    float m[POINTS][BLOCK], o[TILE][BLOCK];
    for (int i = 0; i < POINTS; i++)
        memcpy(m[i], in + i * in_step, sizeof m[i]);
    for (int l = 0; l < BLOCK; l++) {
        float m1p2 = m[1][l] + m[2][l], m1m2 = m[1][l] - m[2][l];
        float m3p4 = m[3][l] + m[4][l], m3m4 = m[3][l] - m[4][l];
        o[0][l] = m[0][l] + m1p2 + m3p4;
        o[1][l] = m1m2 + 2.0f * m3m4;
        o[2][l] = m1p2 + 4.0f * m3p4;
        o[3][l] = m1m2 + 8.0f * m3m4 + m[5][l];
    }
    for (int i = 0; i < TILE; i++)
        memcpy(out + i * out_step, o[i], sizeof o[i]);
}

/* The band's input tiles, block by block, into its 36 planes.  A tile that
 * lies inside the image is read in place; one that overlaps the padding is
 * copied into a zeroed 6x6 first. */
static void transform_input_plain(const Band *b, const float *x)
{
    const FxrtConvParams *p = b->p;
    int64_t in_h = p->in_size[1], in_w = p->in_size[2];
    int64_t plane = b->in_plane;
    float padded[POINTS * POINTS * BLOCK], rows[POINTS * POINTS * BLOCK];
    for (int64_t cb = 0; cb < b->in_blocks; cb++)
        for (int64_t t = 0; t < b->count; t++) {
            int64_t h0, w0;
            tile_origin(b, t, &h0, &w0);
            h0 -= p->pad_begin[1];
            w0 -= p->pad_begin[2];
            const float *image = x + cb * in_h * in_w * BLOCK;
            const float *d;
            int64_t row_step;
            if (h0 >= 0 && w0 >= 0 && h0 + POINTS <= in_h && w0 + POINTS <= in_w) {
                d = image + (h0 * in_w + w0) * BLOCK;
                row_step = in_w * BLOCK;
            } else {
                memset(padded, 0, sizeof padded);
                for (int64_t i = 0; i < POINTS; i++) {
                    if (h0 + i < 0 || h0 + i >= in_h)
                        continue;
                    for (int64_t j = 0; j < POINTS; j++)
                        if (w0 + j >= 0 && w0 + j < in_w)
                            memcpy(padded + (i * POINTS + j) * BLOCK,
                                   image + ((h0 + i) * in_w + w0 + j) * BLOCK,
                                   BLOCK * sizeof *padded);
                }
                d = padded;
                row_step = POINTS * BLOCK;
            }
            /* B^T d down each column, then B^T across each row of that. */
            for (int j = 0; j < POINTS; j++)
                input_transform_1d(d + j * BLOCK, row_step, rows + j * BLOCK, POINTS * BLOCK);
            float *out = b->planes_in + (cb * b->count + t) * BLOCK;
            for (int i = 0; i < POINTS; i++)
                input_transform_1d(rows + i * POINTS * BLOCK, BLOCK, out + i * POINTS * plane,
                                   plane);
        }
}

/* What the output transform applies after the bias: a clamp [lo, hi] (relu,
 * clip) with the residual added before or after it, or, for any other
 * activation, the residual and the activation both left to
 * fxrt_epilogue_apply_f32. */
typedef struct OutputSteps {
    float lo, hi;
    int generic, residual_before, residual_after;
} OutputSteps;

static OutputSteps output_steps(const FxrtEpilogue *ep)
{
    OutputSteps s = {-INFINITY, INFINITY, 0, 0, 0};
    if (ep)
        switch ((FxrtActivation)ep->activation) {
        case FXRT_ACT_NONE: break;
        case FXRT_ACT_RELU: s.lo = 0.0f; break;
        case FXRT_ACT_CLIP:
            s.lo = ep->alpha;
            s.hi = ep->beta;
            break;
        default: s.generic = 1; break;
        }
    s.residual_before = ep && ep->residual && !ep->residual_after && !s.generic;
    s.residual_after = ep && ep->residual && ep->residual_after && !s.generic;
    return s;
}

/* An activation other than a clamp, with the residual, on `cols` stored
 * pixels of one output row (the bias is already in). */
static void finish_generic(const FxrtEpilogue *ep, const float *res, int64_t cols, float *dst)
{
    FxrtEpilogue e = *ep;
    e.bias = NULL;
    e.residual = res;
    e.residual_ld = BLOCK;
    fxrt_epilogue_apply_f32(&e, 0, 0, cols, BLOCK, dst, BLOCK);
}

/* The band's products back to 4x4 outputs, with the bias, then the
 * epilogue: a clamp (relu, clip) and the residual here, any other
 * activation through fxrt_epilogue_apply_f32 on each output row of the
 * tile. */
static void transform_output_plain(const Band *b, const FxrtEpilogue *ep, float *y)
{
    const FxrtConvParams *p = b->p;
    int64_t out_h = p->out_size[1], out_w = p->out_size[2];
    int64_t plane = b->out_plane;
    OutputSteps steps = output_steps(ep);
    float lo = steps.lo, hi = steps.hi;
    int generic = steps.generic, residual_before = steps.residual_before;
    int residual_after = steps.residual_after;
    float columns[TILE * POINTS * BLOCK], outputs[TILE * TILE * BLOCK];
    for (int64_t cb = 0; cb < b->out_blocks; cb++)
        for (int64_t t = 0; t < b->count; t++) {
            int64_t h0, w0;
            tile_origin(b, t, &h0, &w0);
            const float *m = b->planes_out + (cb * b->count + t) * BLOCK;
            /* A^T down each of the 6 columns of points, then across. */
            for (int j = 0; j < POINTS; j++)
                output_transform_1d(m + j * plane, POINTS * plane, columns + j * BLOCK,
                                    POINTS * BLOCK);
            for (int i = 0; i < TILE; i++)
                output_transform_1d(columns + i * POINTS * BLOCK, BLOCK,
                                    outputs + i * TILE * BLOCK, BLOCK);
            int64_t rows = out_h - h0 < TILE ? out_h - h0 : TILE;
            int64_t cols = out_w - w0 < TILE ? out_w - w0 : TILE;
            float bias[BLOCK] = {0};
            if (ep && ep->bias)
                memcpy(bias, ep->bias + cb * BLOCK, sizeof bias);
            for (int64_t i = 0; i < rows; i++) {
                int64_t at = (cb * out_h + h0 + i) * out_w * BLOCK + w0 * BLOCK;
                const float *res = ep && ep->residual ? ep->residual + at : NULL;
                float *dst = y + at;
                for (int64_t j = 0; j < cols; j++) {
                    float v[BLOCK], r[BLOCK];
                    memcpy(v, outputs + (i * TILE + j) * BLOCK, sizeof v);
                    if (res)
                        memcpy(r, res + j * BLOCK, sizeof r);
                    for (int l = 0; l < BLOCK; l++)
                        v[l] += bias[l];
                    if (residual_before)
                        for (int l = 0; l < BLOCK; l++)
                            v[l] += r[l];
                    for (int l = 0; l < BLOCK; l++) {
                        v[l] = v[l] < lo ? lo : v[l];
                        v[l] = v[l] > hi ? hi : v[l];
                    }
                    if (residual_after)
                        for (int l = 0; l < BLOCK; l++)
                            v[l] += r[l];
                    memcpy(dst + j * BLOCK, v, sizeof v);
                }
                if (generic)
                    finish_generic(ep, res, cols, dst);
            }
        }
}

#ifdef FXRT_WINOGRAD_AVX2
/* The same steps in AVX2 registers, one block of 8 channels per ymm: the
 * plain code's copies through small arrays compile to 16-byte stores read
 * back as 32-byte loads, which the CPU cannot forward, and that stall made
 * the transforms 60-70% of the layer's time (bench/RESULTS.md,
 * 2026-12-07).  The column and row passes are the plain code's, with FMA. */
#define AVX2_FN __attribute__((target("avx2,fma"), always_inline)) static inline

/* B^T over six vectors, as input_transform_1d. */
AVX2_FN void input_transform_avx2(const __m256 d[POINTS], __m256 o[POINTS])
{
    const __m256 two = _mm256_set1_ps(2.0f), four = _mm256_set1_ps(4.0f);
    const __m256 five = _mm256_set1_ps(5.0f);
    __m256 d4_d2 = _mm256_sub_ps(d[4], d[2]), d3_d1 = _mm256_sub_ps(d[3], d[1]);
    o[0] = _mm256_fmadd_ps(four, d[0], _mm256_fnmadd_ps(five, d[2], d[4]));
    o[1] = _mm256_fnmadd_ps(four, _mm256_add_ps(d[1], d[2]), _mm256_add_ps(d[3], d[4]));
    o[2] = _mm256_fmadd_ps(four, _mm256_sub_ps(d[1], d[2]), _mm256_sub_ps(d[4], d[3]));
    o[3] = _mm256_fmadd_ps(two, d3_d1, d4_d2);
    o[4] = _mm256_fnmadd_ps(two, d3_d1, d4_d2);
    o[5] = _mm256_fmadd_ps(four, d[1], _mm256_fnmadd_ps(five, d[3], d[5]));
}

/* A^T over six vectors, as output_transform_1d. */
AVX2_FN void output_transform_avx2(const __m256 m[POINTS], __m256 o[TILE])
{
    const __m256 two = _mm256_set1_ps(2.0f), four = _mm256_set1_ps(4.0f);
    const __m256 eight = _mm256_set1_ps(8.0f);
    __m256 m1p2 = _mm256_add_ps(m[1], m[2]), m1m2 = _mm256_sub_ps(m[1], m[2]);
    __m256 m3p4 = _mm256_add_ps(m[3], m[4]), m3m4 = _mm256_sub_ps(m[3], m[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], m1p2), m3p4);
    o[1] = _mm256_fmadd_ps(two, m3m4, m1m2);
    o[2] = _mm256_fmadd_ps(four, m3p4, m1p2);
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(eight, m3m4, m1m2), m[5]);
}

/* A tile's pixels outside the image (the padding) read as zeros, with no
 * copy. */
__attribute__((target("avx2,fma"))) static void transform_input_avx2(const Band *b,
                                                                     const float *x)
{
    const FxrtConvParams *p = b->p;
    int64_t in_h = p->in_size[1], in_w = p->in_size[2];
    int64_t plane = b->in_plane;
    for (int64_t cb = 0; cb < b->in_blocks; cb++)
        for (int64_t t = 0; t < b->count; t++) {
            int64_t h0, w0;
            tile_origin(b, t, &h0, &w0);
            h0 -= p->pad_begin[1];
            w0 -= p->pad_begin[2];
            const float *image = x + cb * in_h * in_w * BLOCK;
            int inside = h0 >= 0 && w0 >= 0 && h0 + POINTS <= in_h && w0 + POINTS <= in_w;
            __m256 rows[POINTS][POINTS]; /* B^T d */
            for (int j = 0; j < POINTS; j++) {
                __m256 d[POINTS], column[POINTS];
                if (inside) {
                    const float *at = image + (h0 * in_w + w0 + j) * BLOCK;
                    for (int i = 0; i < POINTS; i++)
                        d[i] = _mm256_loadu_ps(at + i * in_w * BLOCK);
                } else {
                    int column_inside = w0 + j >= 0 && w0 + j < in_w;
                    for (int i = 0; i < POINTS; i++)
                        d[i] = column_inside && h0 + i >= 0 && h0 + i < in_h
                                   ? _mm256_loadu_ps(image + ((h0 + i) * in_w + w0 + j) * BLOCK)
                                   : _mm256_setzero_ps();
                }
                input_transform_avx2(d, column);
                for (int i = 0; i < POINTS; i++)
                    rows[i][j] = column[i];
            }
            float *out = b->planes_in + (cb * b->count + t) * BLOCK;
            for (int i = 0; i < POINTS; i++) {
                __m256 o[POINTS];
                input_transform_avx2(rows[i], o);
                for (int j = 0; j < POINTS; j++)
                    _mm256_storeu_ps(out + (i * POINTS + j) * plane, o[j]);
            }
        }
}

__attribute__((target("avx2,fma"))) static void
transform_output_avx2(const Band *b, const FxrtEpilogue *ep, float *y)
{
    const FxrtConvParams *p = b->p;
    int64_t out_h = p->out_size[1], out_w = p->out_size[2];
    int64_t plane = b->out_plane;
    OutputSteps steps = output_steps(ep);
    const __m256 lo = _mm256_set1_ps(steps.lo), hi = _mm256_set1_ps(steps.hi);
    for (int64_t cb = 0; cb < b->out_blocks; cb++) {
        __m256 bias = ep && ep->bias ? _mm256_loadu_ps(ep->bias + cb * BLOCK) : _mm256_setzero_ps();
        for (int64_t t = 0; t < b->count; t++) {
            int64_t h0, w0;
            tile_origin(b, t, &h0, &w0);
            const float *m = b->planes_out + (cb * b->count + t) * BLOCK;
            __m256 columns[TILE][POINTS]; /* A^T m */
            for (int j = 0; j < POINTS; j++) {
                __m256 v[POINTS], o[TILE];
                for (int i = 0; i < POINTS; i++)
                    v[i] = _mm256_loadu_ps(m + (i * POINTS + j) * plane);
                output_transform_avx2(v, o);
                for (int i = 0; i < TILE; i++)
                    columns[i][j] = o[i];
            }
            int64_t rows = out_h - h0 < TILE ? out_h - h0 : TILE;
            int64_t cols = out_w - w0 < TILE ? out_w - w0 : TILE;
            for (int64_t i = 0; i < rows; i++) {
                __m256 o[TILE];
                output_transform_avx2(columns[i], o);
                int64_t at = (cb * out_h + h0 + i) * out_w * BLOCK + w0 * BLOCK;
                const float *res = ep && ep->residual ? ep->residual + at : NULL;
                float *dst = y + at;
                for (int64_t j = 0; j < cols; j++) {
                    __m256 v = _mm256_add_ps(o[j], bias);
                    if (steps.residual_before)
                        v = _mm256_add_ps(v, _mm256_loadu_ps(res + j * BLOCK));
                    /* max(lo, v) and min(hi, v) return v when it is NaN. */
                    v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
                    if (steps.residual_after)
                        v = _mm256_add_ps(v, _mm256_loadu_ps(res + j * BLOCK));
                    _mm256_storeu_ps(dst + j * BLOCK, v);
                }
                if (steps.generic)
                    finish_generic(ep, res, cols, dst);
            }
        }
    }
}
#undef AVX2_FN
#endif

void fxrt_conv_nchwc_winograd_f32(const FxrtConvParams *p, const float *x, const float *packed_w,
                                  const FxrtEpilogue *ep, float *y, float *scratch)
{
    Band b;
    b.p = p;
    b.in_blocks = fxrt_nchwc_blocks(p->in_channels);
    b.out_blocks = fxrt_nchwc_blocks(p->out_channels);
    b.tiles_w = (p->out_size[2] + TILE - 1) / TILE;
    if (!fxrt_epilogue_active(ep))
        ep = NULL;
    int64_t tiles = tiles_of(p), per_band = band_tiles(p);
    b.in_plane = plane_stride(b.in_blocks, per_band);
    b.out_plane = plane_stride(b.out_blocks, per_band);
    int64_t x_image = b.in_blocks * p->in_size[1] * p->in_size[2] * BLOCK;
    int64_t y_image = b.out_blocks * p->out_size[1] * p->out_size[2] * BLOCK;
    FxrtConvParams pointwise_one = pointwise_params(p, 1);
    int64_t weight_plane = fxrt_conv_nchwc_packed_floats(&pointwise_one, 1);
#ifdef FXRT_WINOGRAD_AVX2
    int avx2 = fxrt_nchwc_conv_isa() >= 1;
#endif
    for (int64_t n = 0; n < p->batch; n++) {
        const float *xn = x + n * x_image;
        float *yn = y + n * y_image;
        FxrtEpilogue ep_n;
        if (ep) {
            ep_n = *ep;
            ep_n.residual = ep->residual ? ep->residual + n * y_image : NULL;
        }
        for (b.first = 0; b.first < tiles; b.first += per_band) {
            b.count = tiles - b.first < per_band ? tiles - b.first : per_band;
            b.planes_in = scratch;
            b.planes_out = scratch + PLANES * b.in_plane;
#ifdef FXRT_WINOGRAD_AVX2
            if (avx2)
                transform_input_avx2(&b, xn);
            else
#endif
                transform_input_plain(&b, xn);
            FxrtConvParams pointwise = pointwise_params(p, b.count);
            for (int k = 0; k < PLANES; k++)
                fxrt_conv_nchwc_f32(&pointwise, 1, b.planes_in + k * b.in_plane,
                                    packed_w + k * weight_plane, NULL,
                                    b.planes_out + k * b.out_plane, NULL);
#ifdef FXRT_WINOGRAD_AVX2
            if (avx2)
                transform_output_avx2(&b, ep ? &ep_n : NULL, yn);
            else
#endif
                transform_output_plain(&b, ep ? &ep_n : NULL, yn);
        }
    }
}
