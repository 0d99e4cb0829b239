/*
 * fxrt_nn_qconv.c - 8-bit 2-D convolutions on weights packed at compile
 * time, int32 accumulation and the fixed-point requantization of
 * fxrt_nn_qgemm.c fused into the store (API in fxrt_nn.h).  Activations
 * are NCHW at the boundary, as QLinearConv's are; two paths:
 *
 *   - group 1: the packed int8 GEMM (fxrt_qgemm) over im2col rows.  A band
 *     of output rows at a time, the input rows it reads are transposed to
 *     NHWC with the padding written as the input zero point, so that each
 *     kernel row of an im2col row is one copy of kernel_w x C bytes (C per
 *     tap when dilated); a 1x1 stride-1 unpadded convolution uses the NHWC
 *     band itself as the GEMM's A, no im2col.  The packed weights' k runs
 *     (kh, kw, c) with each kernel row rounded up to whole k-groups of four
 *     bytes (zero weights after its kernel_w x C), so that no k-group spans
 *     two kernel rows: on AVX-512 VNNI or AVX2, when each k-group is then
 *     contiguous in the band (C a multiple of 4, or undilated rows: a
 *     3-channel stem's 9-byte rows as three groups, the last reading three
 *     bytes of the next pixel against zero weights), the tiles read the
 *     band directly (fxrt_qgemm_gather: a pointer per output pixel, an
 *     offset per k-group), no im2col either.  The GEMM writes the band's
 *     outputs pixel-major and they are transposed back into NCHW (both
 *     transposes in 16 x 16 SSE2 blocks on the host).  Scratch holds one
 *     band (about BAND_BYTES of im2col, at least one output row), not the
 *     image;
 *   - depthwise (group = in = out channels): a direct kernel per channel
 *     plane.  The zero-padded plane is split into stride_h x stride_w phase
 *     planes of Hq x Wq, so that every tap of every output reads one
 *     contiguous run: output (oy, ox) is at flat index oy * Wq + ox of every
 *     phase plane, and tap (kh, kw) reads its phase plane at that index plus
 *     a constant.  The kernel walks the flat index 16 (AVX-512, AVX2: 8)
 *     outputs at a time however narrow the image, computing Wq - OW unused
 *     columns per row, and copies the OW real ones out.  Dilation works the
 *     same way (tap kh sits kh x dilation rows down).  The planes' padding
 *     is the same for every channel, so it is written once per call;
 *     scratch holds one channel's planes and outputs.  With NHWC
 *     activations (x_nhwc, y_nhwc) the channels are in the vector lanes
 *     instead: on AVX-512 VNNI 64 channels, four kernel rows per vpdpbusd
 *     from column quads built once per output row (dw_block_vnni), on AVX2
 *     runs of output pixels, 16 channels and two taps per vpmaddwd
 *     (dw_avx2_tables).
 *
 * The depthwise accumulators start from a per-channel seed, bias - x_zp x
 * sum(w), so that the taps multiply the raw activation bytes; padding holds
 * x_zp and so adds nothing, as in the reference.  Products fit in int16
 * (|255 x -128| < 2^15), so the SIMD kernels widen the activations to
 * int16 for vpmaddwd: the NCHW ones to int32 lanes whose high halves it
 * multiplies by zero, the NHWC one to pairs of taps.  Sums are int32 and
 * wrap like fxrt_conv_integer's; the requantization is fxrt_quant_rescale
 * (fxrt_quant_x86.h on vectors: a float product away from ties, its
 * 64-bit form near them), exact against fxrt_requantize below |acc + bias|
 * = 2^29.  The SIMD kernels exist only on host builds (FXRT_USE_CBLAS,
 * x86-64, GCC or Clang), chosen by CPUID at each call and capped by
 * fxrt_qconv_limit_isa (fxrt_isa.h), which caps the GEMM's tiles too.
 *
 * The small path (fxrt_qconv_small; fxrt_qconv itself when the runtime is
 * built with FXRT_SMALL_KERNELS, as --target cortex-m writes it) is for
 * firmware, where RAM is scarcer than cycles: group 1 gathers the im2col
 * rows of PIXELS output pixels straight from the NCHW input into scratch
 * (PIXELS x k bytes) and runs the same packed GEMM on them, then scatters
 * the PIXELS x out_channels results into NCHW; no band, no transposes.  The
 * GEMM and its requantization are the same, so the bytes are too.  A 1x1
 * stride-1 layer of as many outputs as inputs, and a depthwise layer, can
 * then write over their input (fxrt_qconv_inplace): a pixel's (a channel
 * plane's) input is in scratch before its outputs are stored.
 *
 * Refused by fxrt_qconv_applies (callers keep the reference loops): 3-D
 * convolutions, groups other than 1 or depthwise, a depthwise channel
 * multiplier other than 1.
 */
#include <string.h>

#include "fxrt.h"
#include "fxrt_config.h"
#include "fxrt_isa.h"

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_QCONV_X86 1
#include "fxrt_quant_x86.h"
#endif

/* Bytes of im2col rows (or of NHWC input for a 1x1 convolution) one band
 * of output rows may take: small enough for L1/L2 and for firmware RAM. */
enum { BAND_BYTES = 32 * 1024 };
/* Bytes after each depthwise buffer that vector loads may read. */
enum { SLACK = 64 };
/* Output pixels per GEMM call on the small path: the portable tile's
 * rows, so that each weight byte loaded serves four pixels. */
enum { PIXELS = 4 };

static int64_t align64(int64_t v) { return (v + 63) / 64 * 64; }

static int64_t kernel_taps(const FxrtConvParams *p) { return p->kernel[1] * p->kernel[2]; }

/* The packed k of a kernel row: kernel_w x C rounded up to a k-group. */
static int64_t k_row(const FxrtConvParams *p) { return (p->kernel[2] * p->in_channels + 3) / 4 * 4; }

/* The packed k of a group-1 convolution: kernel_h rows of k_row. */
static int64_t k_packed(const FxrtConvParams *p) { return p->kernel[1] * k_row(p); }

static int64_t y_bytes(const FxrtQConv *q) { return q->y_type == FXRT_DTYPE_INT32 ? 4 : 1; }

int fxrt_qconv_is_depthwise(const FxrtConvParams *p)
{
    return p->groups > 1 && p->groups == p->in_channels && p->groups == p->out_channels;
}

int fxrt_qconv_applies(const FxrtConvParams *p)
{
    return p->in_size[0] == 1 && p->kernel[0] == 1 && p->out_size[0] == 1 &&
           p->pad_begin[0] == 0 && p->batch >= 1 && p->in_channels >= 1 &&
           p->out_channels >= 1 && (p->groups == 1 || fxrt_qconv_is_depthwise(p));
}

/* The per-channel int32 arrays of a depthwise blob, then its int8 taps
 * [c][tap].  The NHWC kernels' tables are built in their scratch at each
 * call rather than stored: two to four times the taps' bytes in flash for
 * layouts firmware never uses. */
static int32_t *dw_columns(const void *packed) { return (int32_t *)(uintptr_t)packed; }
static const int8_t *dw_taps(const FxrtConvParams *p, const void *packed)
{
    return (const int8_t *)packed + 3 * p->out_channels * (int64_t)sizeof(int32_t);
}

int64_t fxrt_qconv_packed_bytes(const FxrtConvParams *p)
{
    if (fxrt_qconv_is_depthwise(p))
        return p->out_channels * (3 * (int64_t)sizeof(int32_t) + kernel_taps(p));
    return fxrt_qgemm_packed_bytes(p->out_channels, k_packed(p));
}

int64_t fxrt_qconv_pack_scratch_bytes(const FxrtConvParams *p)
{
    return fxrt_qconv_is_depthwise(p) ? 0 : k_packed(p) * p->out_channels;
}

int fxrt_qconv_pack(const FxrtConvParams *p, const FxrtQConv *q, const int8_t *w,
                    const int32_t *bias, const float *scale, int64_t scale_count, void *packed,
                    void *scratch)
{
    int64_t taps = kernel_taps(p), m = p->out_channels, c = p->in_channels;
    if (!fxrt_qconv_is_depthwise(p)) {
        /* W [m][c][kh][kw] -> B [(kh, kw, c)][m], the order of the NHWC
         * im2col rows, each kernel row k_row long (zeros after its taps). */
        int8_t *b = (int8_t *)scratch;
        int64_t kw_n = p->kernel[2], row = k_row(p);
        memset(b, 0, (size_t)(k_packed(p) * m));
        for (int64_t o = 0; o < m; o++)
            for (int64_t ch = 0; ch < c; ch++)
                for (int64_t t = 0; t < taps; t++)
                    b[(t / kw_n * row + t % kw_n * c + ch) * m + o] = w[(o * c + ch) * taps + t];
        return fxrt_qgemm_pack_b(m, k_packed(p), b, bias, scale, scale_count,
                                 (FxrtDType)q->x_type, q->x_zp, packed);
    }
    int32_t *seed = dw_columns(packed), *mult = seed + m, *shift = mult + m;
    memcpy((int8_t *)packed + 3 * m * (int64_t)sizeof(int32_t), w, (size_t)(m * taps));
    for (int64_t o = 0; o < m; o++) {
        int64_t sum = 0;
        for (int64_t t = 0; t < taps; t++)
            sum += w[o * taps + t];
        /* Modulo 2^32 like the accumulators it seeds. */
        seed[o] = (int32_t)(uint32_t)((uint64_t)(bias ? bias[o] : 0) -
                                      (uint64_t)((int64_t)q->x_zp * sum));
        mult[o] = 0;
        shift[o] = 31;
        if (scale) {
            int s;
            if (fxrt_quant_multiplier(scale[scale_count == 1 ? 0 : o], &mult[o], &s) != 0)
                return -1;
            shift[o] = s;
        }
    }
    return 0;
}

/* --- geometry -------------------------------------------------------------- */

#if !FXRT_SMALL_KERNELS
/* The group-1 path's band: rows output rows at a time, reading in_rows
 * input rows of padded_w pixels (NHWC, C bytes each). */
typedef struct Band {
    int64_t rows, in_rows, padded_w, k;
    /* The im2col rows' stride, k_packed: each kernel row rounded up to the
     * GEMM's groups of four, where the packed weights are zero, so the GEMM
     * reads every group whole. */
    int64_t k_padded;
    int pointwise; /* 1x1, stride 1, no padding: the NHWC band is A */
    int64_t band_bytes, col_bytes, out_bytes;
} Band;

static Band band_plan(const FxrtConvParams *p, const FxrtQConv *q)
{
    Band b;
    int64_t ow = p->out_size[2], oh = p->out_size[1], c = p->in_channels;
    b.k = kernel_taps(p) * c;
    b.k_padded = k_packed(p);
    b.pointwise = p->kernel[1] == 1 && p->kernel[2] == 1 && p->stride[1] == 1 &&
                  p->stride[2] == 1 && p->pad_begin[1] == 0 && p->pad_begin[2] == 0 &&
                  oh == p->in_size[1] && ow == p->in_size[2];
    int64_t row_bytes = ow * b.k_padded;
    b.rows = BAND_BYTES / (row_bytes > 0 ? row_bytes : 1);
    b.rows = b.rows < 1 ? 1 : b.rows > oh ? oh : b.rows;
    b.in_rows = fxrt_window_extent(b.rows, p->stride[1], p->kernel[1], p->dilation[1]);
    /* Wide enough for the last tap of the last output column. */
    int64_t need_w = fxrt_window_extent(ow, p->stride[2], p->kernel[2], p->dilation[2]);
    b.padded_w = p->in_size[2] + p->pad_begin[2];
    if (b.padded_w < need_w)
        b.padded_w = need_w;
    /* and the three bytes past its last pixel that a kernel row's last
     * k-group may read (against zero weights) */
    b.band_bytes = align64(b.in_rows * b.padded_w * c + 3);
    b.col_bytes = b.pointwise ? 0 : align64(b.rows * ow * b.k_padded);
    /* or, for the SIMD tiles' implicit im2col, a pointer per pixel and an
     * offset per k-group, aligned in scratch of any alignment */
    int64_t gather_bytes = 64 + align64(b.rows * ow * (int64_t)sizeof(void *)) + b.k_padded;
    if (!b.pointwise && b.col_bytes < gather_bytes)
        b.col_bytes = align64(gather_bytes);
    b.out_bytes = align64(b.rows * ow * p->out_channels * y_bytes(q));
    return b;
}

#endif

/* The depthwise path's phase planes: stride_h x stride_w planes of hq x wq
 * bytes (plus SLACK each), and the staging rows of oh x wq outputs. */
typedef struct Phases {
    int64_t hq, wq, plane_bytes, stage_bytes;
} Phases;

static Phases phase_plan(const FxrtConvParams *p, const FxrtQConv *q)
{
    Phases f;
    /* int quotients: a 32-bit core divides 64-bit ones through libgcc */
    f.hq = p->out_size[1] + (int)((p->kernel[1] - 1) * p->dilation[1]) / (int)p->stride[1];
    f.wq = p->out_size[2] + (int)((p->kernel[2] - 1) * p->dilation[2]) / (int)p->stride[2];
    f.plane_bytes = align64(f.hq * f.wq + SLACK);
    f.stage_bytes = align64((p->out_size[1] * f.wq + SLACK) * y_bytes(q));
    return f;
}

static int64_t depthwise_scratch_bytes(const FxrtConvParams *p, const FxrtQConv *q)
{
    Phases f = phase_plan(p, q);
    return p->stride[1] * p->stride[2] * f.plane_bytes + f.stage_bytes;
}

#if !FXRT_SMALL_KERNELS
/* The NHWC depthwise kernels' tables, built in scratch at each call (two
 * to four times the taps' bytes: not worth flash in the blob): the AVX2
 * kernel's groups of 16 channels (dw_avx2_tables: at most
 * DW_GROUP_AVX2_BYTES of seeds and scales each, then the weights, aligned
 * to 32 bytes) or the VNNI kernel's block of 64 channels and row of
 * column quads (dw_vnni_tables_bytes); room for either. */
enum { DW_BLOCK = 64, DW_GROUP = 16, DW_GROUP_AVX2_BYTES = 512 };
/* The AVX2 kernel's groups: none below 16 channels (the portable loop
 * takes those), else C / 16 rounded up, the last one overlapping. */
static int64_t dw_avx2_groups(int64_t c)
{
    return c < DW_GROUP ? 0 : (c + DW_GROUP - 1) / DW_GROUP;
}
/* The VNNI kernel's row groups: kernel rows 4 g .. 4 g + 3 (dw_block_vnni). */
static int64_t dw_vnni_row_groups(const FxrtConvParams *p) { return (p->kernel[1] + 3) / 4; }

/* The input columns one output row reads, from column -pad_begin. */
static int64_t dw_vnni_columns(const FxrtConvParams *p)
{
    return fxrt_window_extent(p->out_size[2], p->stride[2], p->kernel[2], p->dilation[2]);
}

/* One block's weight vectors [row group][kx][accumulator] and its seed,
 * multiplier and shift columns, then one row's quads [row group][column]
 * [accumulator]: 64 bytes each, from the next 64-byte boundary. */
static int64_t dw_vnni_tables_bytes(const FxrtConvParams *p)
{
    int64_t groups = dw_vnni_row_groups(p);
    return 64 + (groups * p->kernel[2] * 4 + 3 * 4 + groups * dw_vnni_columns(p) * 4) * DW_BLOCK;
}

static int64_t dw_nhwc_tables_bytes(const FxrtConvParams *p)
{
    int64_t c = p->in_channels, taps = kernel_taps(p);
    int64_t vnni = dw_vnni_tables_bytes(p);
    int64_t pairs = (taps + 1) / 2;
    /* 32: the AVX2 tables start at the next 32-byte boundary */
    int64_t avx2 = 32 + dw_avx2_groups(c) * (DW_GROUP_AVX2_BYTES +
                                             pairs * DW_GROUP * 2 * (int64_t)sizeof(int16_t));
    return vnni > avx2 ? vnni : avx2;
}
#endif

/* The small path's depthwise scratch also holds the int32 sums of a
 * channel for the DSP kernel (dw_channel_dsp: each output row rounded up
 * to pairs), on every build, so that fxcc's plan on the host sizes the
 * firmware's arena. */
static int64_t dw_dsp_sums_bytes(const FxrtConvParams *p)
{
    return p->out_size[1] * ((p->out_size[2] + 1) / 2 * 2) * (int64_t)sizeof(int32_t);
}

int64_t fxrt_qconv_small_scratch_bytes(const FxrtConvParams *p, const FxrtQConv *q)
{
    if (fxrt_qconv_is_depthwise(p))
        return depthwise_scratch_bytes(p, q) + dw_dsp_sums_bytes(p);
    return align64(PIXELS * k_packed(p)) + PIXELS * p->out_channels * y_bytes(q);
}

int64_t fxrt_qconv_scratch_bytes(const FxrtConvParams *p, const FxrtQConv *q)
{
#if FXRT_SMALL_KERNELS
    return fxrt_qconv_small_scratch_bytes(p, q);
#else
    if (fxrt_qconv_is_depthwise(p) && q->x_nhwc)
        return align64(p->in_channels + SLACK) + dw_nhwc_tables_bytes(p);
    if (fxrt_qconv_is_depthwise(p))
        return depthwise_scratch_bytes(p, q);
    Band b = band_plan(p, q);
    return b.band_bytes + b.col_bytes + b.out_bytes;
#endif
}

/* --- group 1: im2col bands and the packed GEMM ------------------------------- */

#if !FXRT_SMALL_KERNELS

/* dst[j * dst_stride + i] = src[i * src_stride + j] for a rows x cols
 * byte matrix: the layout changes at the NCHW boundary.  16 x 16 blocks
 * by SSE2 unpacks on host builds (baseline x86-64), the edges and the
 * portable build byte by byte. */
#if defined(FXRT_QCONV_X86) && defined(__SSE2__)
static void transpose_block16(const uint8_t *src, int64_t src_stride, uint8_t *dst,
                              int64_t dst_stride)
{
    __m128i a[16], b[16];
    for (int i = 0; i < 16; i++)
        a[i] = _mm_loadu_si128((const __m128i *)(src + i * src_stride));
    /* Each step doubles the run of one column's rows that a unit holds:
     * b[2k] rows 2k, 2k+1 of columns 0-7, b[2k + 1] of columns 8-15 ... */
    for (int k = 0; k < 8; k++) {
        b[2 * k] = _mm_unpacklo_epi8(a[2 * k], a[2 * k + 1]);
        b[2 * k + 1] = _mm_unpackhi_epi8(a[2 * k], a[2 * k + 1]);
    }
    /* ... a[4g + q]: rows 4g to 4g + 3 of columns 4q to 4q + 3 ... */
    for (int g = 0; g < 4; g++) {
        a[4 * g] = _mm_unpacklo_epi16(b[4 * g], b[4 * g + 2]);
        a[4 * g + 1] = _mm_unpackhi_epi16(b[4 * g], b[4 * g + 2]);
        a[4 * g + 2] = _mm_unpacklo_epi16(b[4 * g + 1], b[4 * g + 3]);
        a[4 * g + 3] = _mm_unpackhi_epi16(b[4 * g + 1], b[4 * g + 3]);
    }
    /* ... b[8h + r]: rows 8h to 8h + 7 of columns 2r, 2r + 1 ... */
    for (int h = 0; h < 2; h++)
        for (int q = 0; q < 4; q++) {
            b[8 * h + 2 * q] = _mm_unpacklo_epi32(a[8 * h + q], a[8 * h + 4 + q]);
            b[8 * h + 2 * q + 1] = _mm_unpackhi_epi32(a[8 * h + q], a[8 * h + 4 + q]);
        }
    /* ... and all 16 rows of one column. */
    for (int r = 0; r < 8; r++) {
        _mm_storeu_si128((__m128i *)(dst + 2 * r * dst_stride), _mm_unpacklo_epi64(b[r], b[8 + r]));
        _mm_storeu_si128((__m128i *)(dst + (2 * r + 1) * dst_stride),
                         _mm_unpackhi_epi64(b[r], b[8 + r]));
    }
}
#endif

static void transpose_bytes(const uint8_t *src, int64_t src_stride, uint8_t *dst,
                            int64_t dst_stride, int64_t rows, int64_t cols)
{
    int64_t i0 = 0;
#if defined(FXRT_QCONV_X86) && defined(__SSE2__)
    for (; i0 + 16 <= rows; i0 += 16) {
        int64_t j0 = 0;
        for (; j0 + 16 <= cols; j0 += 16)
            transpose_block16(src + i0 * src_stride + j0, src_stride, dst + j0 * dst_stride + i0,
                              dst_stride);
        for (int64_t i = i0; i < i0 + 16; i++)
            for (int64_t j = j0; j < cols; j++)
                dst[j * dst_stride + i] = src[i * src_stride + j];
    }
#endif
    for (int64_t i = i0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            dst[j * dst_stride + i] = src[i * src_stride + j];
}

/* Input rows [iy0, iy0 + b->in_rows) of image x (NCHW bytes), NHWC into
 * band with pad_begin[2] columns of x_zp on the left and x_zp wherever the
 * window leaves the image. */
/* Fills n bytes with v without a call when n is a pixel's padding (tens of
 * bytes, at both ends of every band row), as im2col_copy copies. */
static void fill_short(uint8_t *dst, uint8_t v, int64_t n)
{
    if (n > 64) {
        memset(dst, v, (size_t)n);
    } else if (n >= 16) {
        int64_t i = 0;
        for (; i + 16 <= n; i += 16)
            memset(dst + i, v, 16);
        if (i < n)
            memset(dst + n - 16, v, 16);
    } else {
        for (int64_t i = 0; i < n; i++)
            dst[i] = v;
    }
}

static void band_to_nhwc(const FxrtConvParams *p, const Band *b, uint8_t zp, int x_nhwc,
                         const uint8_t *x, int64_t iy0, uint8_t *band)
{
    int64_t c = p->in_channels, h = p->in_size[1], w = p->in_size[2];
    int64_t row_bytes = b->padded_w * c, left = p->pad_begin[2];
    for (int64_t r = 0; r < b->in_rows; r++) {
        int64_t iy = iy0 + r;
        uint8_t *dst = band + r * row_bytes;
        if (iy < 0 || iy >= h) {
            memset(dst, zp, (size_t)row_bytes);
            continue;
        }
        fill_short(dst, zp, left * c);
        fill_short(dst + (left + w) * c, zp, (b->padded_w - left - w) * c);
        if (x_nhwc) /* the row as it is */
            memcpy(dst + left * c, x + iy * w * c, (size_t)(w * c));
        else /* the row of every channel, a C x W matrix of stride H x W */
            transpose_bytes(x + iy * w, h * w, dst + left * c, c, c, w);
    }
    /* What a last k-group may read past the band: defined bytes. */
    fill_short(band + b->in_rows * row_bytes, zp, 3);
}

/* Copies one im2col run (kernel_w x C bytes, or C) without a call: 16-byte
 * steps with the last one overlapping, two overlapping 8-byte copies below
 * 16, bytes below 8.  The runs are tens of bytes, where a call to memcpy
 * cost as much as the GEMM on them (ResNet-8's 16-channel layers). */
static void im2col_copy(uint8_t *dst, const uint8_t *src, int64_t n)
{
    if (n >= 16) {
        int64_t i = 0;
        for (; i + 16 <= n; i += 16)
            memcpy(dst + i, src + i, 16);
        if (i < n)
            memcpy(dst + n - 16, src + n - 16, 16);
    } else if (n >= 8) {
        memcpy(dst, src, 8);
        memcpy(dst + n - 8, src + n - 8, 8);
    } else {
        for (int64_t i = 0; i < n; i++)
            dst[i] = src[i];
    }
}

/* The im2col rows of output rows [oy0, oy0 + rows) from the NHWC band that
 * starts at their first input row: (kh, kw, c) order, as packed, each
 * kernel row k_row bytes with zeros after its kernel_w x C. */
static void band_im2col(const FxrtConvParams *p, const Band *b, const uint8_t *band,
                        int64_t rows, uint8_t *col)
{
    int64_t c = p->in_channels, ow = p->out_size[2], kh_n = p->kernel[1], kw_n = p->kernel[2];
    int64_t sh = p->stride[1], sw = p->stride[2], dh = p->dilation[1], dw = p->dilation[2];
    int64_t row = k_row(p), run = kw_n * c;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t ox = 0; ox < ow; ox++)
            for (int64_t kh = 0; kh < kh_n; kh++) {
                uint8_t *dst = col + (r * ow + ox) * b->k_padded + kh * row;
                const uint8_t *src = band + ((r * sh + kh * dh) * b->padded_w + ox * sw) * c;
                if (dw == 1)
                    im2col_copy(dst, src, run);
                else
                    for (int64_t kw = 0; kw < kw_n; kw++)
                        im2col_copy(dst + kw * c, src + kw * dw * c, c);
                fill_short(dst + run, 0, row - run);
            }
}

/* out [pixels][m] (elements of `size` bytes) into the NCHW planes of y at
 * pixel offset `at`, plane stride `plane`. */
static void pixels_to_nchw(const uint8_t *out, int64_t pixels, int64_t m, int64_t size,
                           uint8_t *y, int64_t at, int64_t plane)
{
    if (size == 1) {
        transpose_bytes(out, m, y + at, plane, pixels, m);
        return;
    }
    for (int64_t o = 0; o < m; o++) {
        uint8_t *dst = y + (o * plane + at) * size;
        for (int64_t i = 0; i < pixels; i++)
            memcpy(dst + i * size, out + (i * m + o) * size, (size_t)size);
    }
}

#ifdef FXRT_QCONV_X86
/* Whether the GEMM reads its A rows straight from the NHWC band (the SIMD
 * tiles' gather) rather than from im2col rows: every k-group of four bytes
 * must be contiguous in the band, which it is when C is a multiple of 4
 * (four channels of one tap) or when a kernel row's taps are adjacent
 * (dilation_w 1: DS-CNN's one-channel 10 x 4 stem, ResNet-8's 3-channel
 * 3 x 3 one). */
static int implicit_im2col(const FxrtConvParams *p, const Band *b)
{
    int contiguous = p->in_channels % 4 == 0 || p->dilation[2] == 1;
    return !b->pointwise && contiguous && fxrt_qgemm_gather_in_use();
}

/* Where the k-groups of an im2col row ((kh, kw, c) order, kernel rows
 * k_row apart) lie relative to its window's corner in the band. */
static void band_k_offsets(const FxrtConvParams *p, const Band *b, int32_t *k_offsets)
{
    int64_t c = p->in_channels, row_run = k_row(p);
    for (int64_t g = 0; g < b->k_padded / 4; g++) {
        int64_t e = 4 * g, kh = e / row_run, in_row = e % row_run;
        int64_t row_at = kh * p->dilation[1] * b->padded_w * c;
        /* a dilated row's taps are dilation_w pixels apart */
        int64_t kw = in_row / c, ch = in_row % c;
        k_offsets[g] = (int32_t)(row_at + kw * p->dilation[2] * c + ch);
    }
}

/* The window corners of output rows [0, rows) of the band: pixel (r, ox)
 * reads from band row r x stride_h, column ox x stride_w. */
static void band_rows(const FxrtConvParams *p, const Band *b, const uint8_t *band, int64_t rows,
                      const uint8_t **a_rows)
{
    int64_t c = p->in_channels, ow = p->out_size[2];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t ox = 0; ox < ow; ox++)
            a_rows[r * ow + ox] =
                band + ((r * p->stride[1]) * b->padded_w + ox * p->stride[2]) * c;
}
#endif

static void qconv_gemm(const FxrtConvParams *p, const FxrtQConv *q, const uint8_t *x,
                       const void *packed, uint8_t *y, uint8_t *scratch)
{
    Band b = band_plan(p, q);
    uint8_t *band = scratch, *col = scratch + b.band_bytes, *out = col + b.col_bytes;
    int64_t c = p->in_channels, m = p->out_channels, oh = p->out_size[1], ow = p->out_size[2];
    int64_t in_image = c * p->in_size[1] * p->in_size[2], out_plane = oh * ow;
    int64_t k = b.pointwise ? b.k : b.k_padded; /* A's k and row stride */
    FxrtQGemm g = {.n = m, .k = k, .a_type = q->x_type, .y_type = q->y_type,
                   .y_zp = q->y_zp, .y_min = q->y_min, .y_max = q->y_max};
    int64_t size = y_bytes(q);
#ifdef FXRT_QCONV_X86
    int implicit = implicit_im2col(p, &b);
    const uint8_t **a_rows = (const uint8_t **)(void *)(col + (64 - (uintptr_t)col % 64) % 64);
    int32_t *k_offsets = (int32_t *)(void *)((uint8_t *)a_rows +
                                             align64(b.rows * ow * (int64_t)sizeof(void *)));
    if (implicit)
        band_k_offsets(p, &b, k_offsets);
#endif
    for (int64_t n = 0; n < p->batch; n++)
        for (int64_t oy0 = 0; oy0 < oh; oy0 += b.rows) {
            int64_t rows = oh - oy0 < b.rows ? oh - oy0 : b.rows;
            const uint8_t *a = band;
            if (b.pointwise && q->x_nhwc) /* the NHWC rows are A already */
                a = x + n * in_image + oy0 * ow * c;
            else
                band_to_nhwc(p, &b, (uint8_t)q->x_zp, q->x_nhwc, x + n * in_image,
                             oy0 * p->stride[1] - p->pad_begin[1], band);
            uint8_t *image = y + n * m * out_plane * size;
#ifdef FXRT_QCONV_X86
            if (implicit) {
                band_rows(p, &b, band, rows, a_rows);
                uint8_t *dst = q->y_nhwc ? image + oy0 * ow * m * size : out;
                fxrt_qgemm_gather(&g, rows * ow, a_rows, k_offsets, packed, dst, m);
                if (!q->y_nhwc)
                    pixels_to_nchw(out, rows * ow, m, size, image, oy0 * ow, out_plane);
                continue;
            }
#endif
            if (!b.pointwise) {
                band_im2col(p, &b, band, rows, col);
                a = col;
            }
            if (q->y_nhwc) { /* pixel-major rows are NHWC's */
                fxrt_qgemm(&g, rows * ow, a, k, packed, image + oy0 * ow * m * size, m);
                continue;
            }
            fxrt_qgemm(&g, rows * ow, a, k, packed, out, m);
            pixels_to_nchw(out, rows * ow, m, size, image, oy0 * ow, out_plane);
        }
}

#endif /* !FXRT_SMALL_KERNELS */

/* --- group 1, small: PIXELS im2col rows gathered from NCHW ------------------- */

static void qconv_gemm_small(const FxrtConvParams *p, const FxrtQConv *q, const uint8_t *x,
                             const void *packed, uint8_t *y, uint8_t *scratch)
{
    /* int indices: a 32-bit core divides 64-bit ones through libgcc */
    int c = (int)p->in_channels, ih = (int)p->in_size[1], iw = (int)p->in_size[2];
    int ow = (int)p->out_size[2], kh_count = (int)p->kernel[1], kw_count = (int)p->kernel[2];
    int plane = (int)(p->out_size[1] * p->out_size[2]), in_plane = ih * iw;
    int64_t m = p->out_channels, k = k_packed(p), row_k = k_row(p), size = y_bytes(q);
    uint8_t *rows = scratch, *out = scratch + align64(PIXELS * k);
    /* 1x1, stride 1, unpadded: pixel i reads pixel i of each channel plane */
    int pointwise = kh_count == 1 && kw_count == 1 && p->stride[1] == 1 && p->stride[2] == 1 &&
                    p->pad_begin[1] == 0 && p->pad_begin[2] == 0 && p->out_size[2] == iw &&
                    p->out_size[1] == ih;
    FxrtQGemm g = {.n = m, .k = k, .a_type = q->x_type, .y_type = q->y_type,
                   .y_zp = q->y_zp, .y_min = q->y_min, .y_max = q->y_max};
    for (int64_t n = 0; n < p->batch; n++) {
        const uint8_t *xn = x + n * c * in_plane;
        uint8_t *yn = y + n * m * plane * size;
        int oy = 0, ox = 0; /* of pixel px0 + r */
        for (int px0 = 0; px0 < plane; px0 += PIXELS) {
            int count = plane - px0 < PIXELS ? plane - px0 : PIXELS;
            /* Row r, column kh * k_row + kw * C + ch: the packed B's k
             * order; padding reads as the input zero point.  A pointwise
             * layer's four pixels are a run of each channel plane: a
             * channel at a time, unrolled over the PIXELS (4) pixels. */
            if (pointwise && count == PIXELS) {
                const uint8_t *from = xn + px0;
                for (int ch = 0; ch < c; ch++, from += in_plane) {
                    rows[ch] = from[0];
                    rows[k + ch] = from[1];
                    rows[2 * k + ch] = from[2];
                    rows[3 * k + ch] = from[3];
                }
            }
            for (int r = 0; r < count && !(pointwise && count == PIXELS); r++) {
                uint8_t *row = rows + r * k;
                if (row_k != (int64_t)kw_count * c) /* the kernel rows' ends */
                    memset(row, 0, (size_t)k);
                for (int kh = 0; kh < kh_count; kh++) {
                    int iy = oy * (int)p->stride[1] - (int)p->pad_begin[1] + kh * (int)p->dilation[1];
                    for (int kw = 0; kw < kw_count; kw++) {
                        int ix = ox * (int)p->stride[2] - (int)p->pad_begin[2] +
                                 kw * (int)p->dilation[2];
                        uint8_t *at = row + kh * row_k + kw * c;
                        if (iy >= 0 && iy < ih && ix >= 0 && ix < iw) {
                            const uint8_t *from = xn + iy * iw + ix;
                            for (int ch = 0; ch < c; ch++)
                                at[ch] = from[ch * in_plane];
                        } else {
                            memset(at, (uint8_t)q->x_zp, (size_t)c);
                        }
                    }
                }
                if (++ox == ow) {
                    ox = 0;
                    oy++;
                }
            }
            if (pointwise && count == PIXELS) { /* the rows' (oy, ox) stepped too */
                ox += PIXELS;
                while (ox >= ow) {
                    ox -= ow;
                    oy++;
                }
            }
            fxrt_qgemm(&g, count, rows, k, packed, out, m);
            if (size == 1 && count == PIXELS) {
                uint8_t *to = yn + px0;
                for (int64_t o = 0; o < m; o++, to += plane) {
                    to[0] = out[o];
                    to[1] = out[m + o];
                    to[2] = out[2 * m + o];
                    to[3] = out[3 * m + o];
                }
            } else if (size == 1) {
                for (int r = 0; r < count; r++) {
                    uint8_t *to = yn + px0 + r;
                    const uint8_t *from = out + r * m, *end = from + m;
                    for (; from < end; from++, to += plane)
                        *to = *from;
                }
            } else {
                for (int r = 0; r < count; r++)
                    for (int64_t o = 0; o < m; o++)
                        memcpy(yn + (o * plane + px0 + r) * size, out + (r * m + o) * size,
                               (size_t)size);
            }
        }
    }
}

/* --- depthwise: phase planes ------------------------------------------------- */

/* Copies n bytes: short runs (narrow images) inline, long ones by memcpy. */
static void copy_bytes(uint8_t *dst, const uint8_t *src, int64_t n)
{
    if (n >= 32) {
        memcpy(dst, src, (size_t)n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        dst[i] = src[i];
}

/* Fills the phase planes with the zero point: their padding, the same for
 * every channel, is written once per call. */
static void dw_fill_planes(const FxrtConvParams *p, const Phases *f, uint8_t zp, uint8_t *planes)
{
    memset(planes, zp, (size_t)(p->stride[1] * p->stride[2] * f->plane_bytes));
}

/* The image part of the phase planes of one channel plane x (h x w bytes). */
static void dw_phase_planes(const FxrtConvParams *p, const Phases *f, const uint8_t *x,
                            uint8_t *planes)
{
    int64_t h = p->in_size[1], w = p->in_size[2], sh = p->stride[1], sw = p->stride[2];
    int64_t top = p->pad_begin[1], left = p->pad_begin[2];
    for (int64_t ph = 0; ph < sh; ph++)
        for (int64_t pw = 0; pw < sw; pw++) {
            uint8_t *plane = planes + (ph * sw + pw) * f->plane_bytes;
            /* Columns j with 0 <= j * sw + pw - left < w read the row. */
            int64_t first = left > pw ? (int)(left - pw + sw - 1) / (int)sw : 0;
            int64_t end = (int)(w + left - pw + sw - 1) / (int)sw;
            first = first > f->wq ? f->wq : first;
            end = end > f->wq ? f->wq : end < first ? first : end;
            for (int64_t i = 0; i < f->hq; i++) {
                int64_t iy = i * sh + ph - top;
                if (iy < 0 || iy >= h || end == first)
                    continue;
                uint8_t *dst = plane + i * f->wq;
                const uint8_t *row = x + iy * w;
                if (sw == 1)
                    copy_bytes(dst + first, row + first + pw - left, end - first);
                else
                    for (int64_t j = first; j < end; j++)
                        dst[j] = row[j * sw + pw - left];
            }
        }
}

/* The largest kernel whose tap addresses the kernels hold on the stack;
 * larger ones compute each tap's address per output (portable C only). */
enum { DW_MAX_TAPS = 64 };

/* Where tap t of the kernel reads: its phase plane and the offset in it. */
static void dw_tap(const FxrtConvParams *p, const Phases *f, int64_t t, int64_t *plane,
                   int64_t *offset)
{
    int kernel_w = (int)p->kernel[2], sh = (int)p->stride[1], sw = (int)p->stride[2];
    int kh = (int)t / kernel_w, kw = (int)t % kernel_w;
    int dy = kh * (int)p->dilation[1], dx = kw * (int)p->dilation[2];
    *plane = (dy % sh) * sw + dx % sw;
    *offset = (dy / sh) * f->wq + dx / sw;
}

/* What one channel's kernel needs. */
typedef struct DwChannel {
    const FxrtConvParams *p;
    const FxrtQConv *q;
    const Phases *f;
    const uint8_t *planes;
    const int8_t *taps;
    int32_t seed, mult, shift;
    FxrtRescale32 rescale; /* of mult, shift */
    int64_t count; /* flat outputs: out rows x wq */
    uint8_t *stage;
    /* Where each tap reads from planes (its phase plane's start plus its
     * offset), for the first DW_MAX_TAPS taps: computed once per call. */
    const int64_t *tap_at;
} DwChannel;

static void dw_store_scalar(const DwChannel *d, int64_t i, uint32_t acc)
{
    const FxrtQConv *q = d->q;
    if (q->y_type == FXRT_DTYPE_INT32) {
        int32_t v = (int32_t)acc;
        memcpy(d->stage + i * 4, &v, sizeof v);
        return;
    }
    int32_t v = fxrt_rescale32_apply((int32_t)acc, &d->rescale) + q->y_zp;
    v = v < q->y_min ? q->y_min : v > q->y_max ? q->y_max : v;
    d->stage[i] = (uint8_t)v; /* modulo 256: an int8's two's complement byte */
}

/* The byte tap t reads for flat output i (kernels too large to hold). */
static uint8_t dw_tap_byte(const DwChannel *d, int64_t t, int64_t i)
{
    int64_t plane, offset;
    dw_tap(d->p, d->f, t, &plane, &offset);
    return d->planes[plane * d->f->plane_bytes + offset + i];
}

/* The taps of one output, in the loop's native integer width: on a 32-bit
 * core 64-bit indices and a branch per tap cost more than the multiply
 * (the first version: 34 instructions per tap on a Cortex-M4, this one 6). */
#define DW_TAPS_LOOP(load)                                                          \
    for (ptrdiff_t i = 0; i < count; i++) {                                        \
        uint32_t acc = seed;                                                       \
        for (int t = 0; t < taps; t++)                                             \
            acc += (uint32_t)((int32_t)load(src[t][i]) * weight[t]);              \
        dw_store_scalar(d, i, acc);                                                \
    }
#define DW_AS_INT8(b) (int8_t)(b)
#define DW_AS_UINT8(b) (b)

static void dw_channel_portable(const DwChannel *d)
{
    int64_t all_taps = kernel_taps(d->p);
    int is_int8 = d->q->x_type == FXRT_DTYPE_INT8;
    uint32_t seed = (uint32_t)d->seed;
    if (all_taps > DW_MAX_TAPS) {
        for (int64_t i = 0; i < d->count; i++) {
            uint32_t acc = seed;
            for (int64_t t = 0; t < all_taps; t++) {
                uint8_t byte = dw_tap_byte(d, t, i);
                int32_t xv = is_int8 ? (int32_t)(int8_t)byte : (int32_t)byte;
                acc += (uint32_t)(xv * d->taps[t]);
            }
            dw_store_scalar(d, i, acc);
        }
        return;
    }
    int taps = (int)all_taps;
    ptrdiff_t count = (ptrdiff_t)d->count;
    const uint8_t *src[DW_MAX_TAPS];
    int32_t weight[DW_MAX_TAPS];
    for (int t = 0; t < taps; t++) {
        src[t] = d->planes + d->tap_at[t];
        weight[t] = d->taps[t];
    }
    if (is_int8) {
        DW_TAPS_LOOP(DW_AS_INT8)
    } else {
        DW_TAPS_LOOP(DW_AS_UINT8)
    }
}

#if FXRT_ARM_DSP
/* Undilated 3x3 kernels at stride 1 on the DSP extension (the small path): two
 * neighbouring outputs of a row per step.  Kernel row r reads the word of
 * bytes x0..x3 under them; UXTB16 (SXTB16 for int8) splits it into the
 * halfword pairs (x0, x2) and (x1, x3), and with the row's taps as the
 * pairs (w0, w2) and (w1, w1), SMLAD, SMLABB and SMLATB give both
 * w0 x0 + w1 x1 + w2 x2 and w0 x1 + w1 x2 + w2 x3: 7 instructions for 6
 * products, 6 weight registers for the kernel.  Two passes a channel, so
 * that neither spills on the Cortex-M4's 13 registers: the sums into int32
 * scratch (dw_dsp_sums_bytes), then their requantization, its constants in
 * registers, stored straight into the output plane (the input's
 * channel plane is in the phase planes by then, so in place works).  Only
 * the image's columns are computed (the flat loop computes Wq - OW more a
 * row); an odd row's last pair computes one sum past the row. */
static int dw_dsp_applies(const FxrtConvParams *p, const FxrtQConv *q)
{
    return FXRT_SMALL_KERNELS && p->kernel[1] == 3 && p->kernel[2] == 3 && p->stride[1] == 1 &&
           p->stride[2] == 1 && p->dilation[1] == 1 && p->dilation[2] == 1 &&
           q->y_type != FXRT_DTYPE_INT32;
}

static inline uint32_t dw_word(const uint8_t *at)
{
    uint32_t word;
    memcpy(&word, at, sizeof word);
    return word;
}

/* Two int16 lanes: lo in the low halfword. */
static inline int16x2_t dw_pair(int32_t lo, int32_t hi)
{
    return (int16x2_t)(((uint32_t)lo & 0xFFFFu) | (uint32_t)hi << 16);
}

#define SXTB16(v) __sxtb16(v)
#define SXTB16_ror8(v) fxrt_sxtb16_ror8(v)
#define UXTB16(v) __uxtb16(v)
#define UXTB16_ror8(v) fxrt_uxtb16_ror8(v)

#define DW_DSP_ROW(src, k_outer, k_mid, extend)                                   \
    do {                                                                          \
        uint32_t word = dw_word(src);                                             \
        int16x2_t even = extend(word), odd = extend##_ror8(word);                 \
        acc_a = __smlabb(odd, k_mid, __smlad(even, k_outer, acc_a));              \
        acc_b = __smlatb(even, k_mid, __smlad(odd, k_outer, acc_b));              \
    } while (0)
#define DW_DSP_LOOP(extend)                                                       \
    for (int oy = 0; oy < oh; oy++) {                                             \
        const uint8_t *src = row0 + oy * wq;                                      \
        for (int ox = 0; ox < ow; ox += 2, sums += 2) {                           \
            int32_t acc_a = seed, acc_b = seed;                                   \
            DW_DSP_ROW(src + ox, k0, k0_mid, extend);                             \
            DW_DSP_ROW(src + ox + wq, k1, k1_mid, extend);                        \
            DW_DSP_ROW(src + ox + 2 * wq, k2, k2_mid, extend);                    \
            sums[0] = acc_a;                                                      \
            sums[1] = acc_b;                                                      \
        }                                                                         \
    }

static void dw_channel_dsp(const DwChannel *d, int32_t *sums, uint8_t *y)
{
    int oh = (int)d->p->out_size[1], ow = (int)d->p->out_size[2], wq = (int)d->f->wq;
    const uint8_t *row0 = d->planes + d->tap_at[0];
    const int8_t *w = d->taps;
    int16x2_t k0 = dw_pair(w[0], w[2]), k1 = dw_pair(w[3], w[5]), k2 = dw_pair(w[6], w[8]);
    int16x2_t k0_mid = dw_pair(w[1], w[1]), k1_mid = dw_pair(w[4], w[4]);
    int16x2_t k2_mid = dw_pair(w[7], w[7]);
    int32_t seed = d->seed, *first = sums;
    if (d->q->x_type == FXRT_DTYPE_INT8) {
        DW_DSP_LOOP(SXTB16)
    } else {
        DW_DSP_LOOP(UXTB16)
    }
    FxrtRescale32 rescale = d->rescale;
    int32_t y_zp = d->q->y_zp, y_min = d->q->y_min, y_max = d->q->y_max;
    int pairs = (ow + 1) / 2 * 2;
    for (int oy = 0; oy < oh; oy++, y += ow) {
        const int32_t *from = first + oy * pairs;
        for (int ox = 0; ox < ow; ox++) {
            int32_t v = fxrt_rescale32_apply(from[ox], &rescale) + y_zp;
            y[ox] = (uint8_t)(v < y_min ? y_min : v > y_max ? y_max : v);
        }
    }
}
#endif

#ifdef FXRT_QCONV_X86
#define DW_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
#define DW_AVX2_TARGET __attribute__((target("avx2")))

DW_AVX512_TARGET static void dw_channel_avx512(const DwChannel *d)
{
    int64_t taps = kernel_taps(d->p);
    const uint8_t *src[DW_MAX_TAPS];
    __m512i weight[DW_MAX_TAPS];
    for (int64_t t = 0; t < taps; t++) {
        src[t] = d->planes + d->tap_at[t];
        /* The tap in the low int16 of each lane, 0 in the high one. */
        weight[t] = _mm512_set1_epi32((int32_t)(uint16_t)(int16_t)d->taps[t]);
    }
    const FxrtQConv *q = d->q;
    int is_int8 = q->x_type == FXRT_DTYPE_INT8;
    FxrtQuantScaleAvx512 scale = fxrt_quant_scale_avx512(
        _mm512_set1_epi32(d->mult), _mm512_set1_epi32(d->shift), q->y_zp, q->y_min, q->y_max);
    for (int64_t i = 0; i < d->count; i += 16) {
        __m512i acc = _mm512_set1_epi32(d->seed);
        for (int64_t t = 0; t < taps; t++) {
            __m128i bytes = _mm_loadu_si128((const __m128i *)(src[t] + i));
            __m512i xv = is_int8 ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
            acc = _mm512_add_epi32(acc, _mm512_madd_epi16(xv, weight[t]));
        }
        if (q->y_type == FXRT_DTYPE_INT32) {
            _mm512_storeu_si512(d->stage + i * 4, acc);
            continue;
        }
        __m512i y = fxrt_quant_requantize_scaled_avx512(acc, &scale);
        _mm_storeu_si128((__m128i *)(d->stage + i), _mm512_cvtepi32_epi8(y));
    }
}

DW_AVX2_TARGET static void dw_channel_avx2(const DwChannel *d)
{
    int64_t taps = kernel_taps(d->p);
    const uint8_t *src[DW_MAX_TAPS];
    __m256i weight[DW_MAX_TAPS];
    for (int64_t t = 0; t < taps; t++) {
        src[t] = d->planes + d->tap_at[t];
        weight[t] = _mm256_set1_epi32((int32_t)(uint16_t)(int16_t)d->taps[t]);
    }
    const FxrtQConv *q = d->q;
    int is_int8 = q->x_type == FXRT_DTYPE_INT8;
    FxrtQuantScaleAvx2 scale = fxrt_quant_scale_avx2(
        _mm256_set1_epi32(d->mult), _mm256_set1_epi32(d->shift), q->y_zp, q->y_min, q->y_max);
    for (int64_t i = 0; i < d->count; i += 8) {
        __m256i acc = _mm256_set1_epi32(d->seed);
        for (int64_t t = 0; t < taps; t++) {
            __m128i bytes = _mm_loadl_epi64((const __m128i *)(src[t] + i));
            __m256i xv = is_int8 ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(xv, weight[t]));
        }
        if (q->y_type == FXRT_DTYPE_INT32) {
            _mm256_storeu_si256((__m256i *)(d->stage + i * 4), acc);
            continue;
        }
        __m256i y = fxrt_quant_requantize_scaled_avx2(acc, &scale);
        _mm_storel_epi64((__m128i *)(d->stage + i), fxrt_quant_low_bytes_avx2(y));
    }
}

/* The widest depthwise kernel in use: 2 AVX-512, 1 AVX2, 0 portable. */
static int isa_cap = 2;

void fxrt_qconv_limit_isa(int level)
{
    isa_cap = level;
    fxrt_qgemm_limit_isa(level);
}

static int dw_isa(const FxrtConvParams *p)
{
    if (kernel_taps(p) > DW_MAX_TAPS)
        return 0;
    if (isa_cap >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        return 2;
    return isa_cap >= 1 && __builtin_cpu_supports("avx2") ? 1 : 0;
}

/* The NHWC depthwise kernels: 2 AVX-512 VNNI, 1 AVX2 (also on AVX-512
 * without VNNI), 0 portable. */
static int dw_nhwc_isa(const FxrtConvParams *p)
{
    if (kernel_taps(p) > DW_MAX_TAPS)
        return 0;
    if (isa_cap >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
        return 2;
    return isa_cap >= 1 && __builtin_cpu_supports("avx2") ? 1 : 0;
}
#else
void fxrt_qconv_limit_isa(int level) { fxrt_qgemm_limit_isa(level); }
#endif

static void qconv_depthwise(const FxrtConvParams *p, const FxrtQConv *q, const uint8_t *x,
                            const void *packed, uint8_t *y, uint8_t *scratch)
{
    Phases f = phase_plan(p, q);
    uint8_t *planes = scratch;
    int64_t phases = p->stride[1] * p->stride[2], taps = kernel_taps(p);
    int64_t c = p->in_channels, oh = p->out_size[1], ow = p->out_size[2];
    int64_t in_plane = p->in_size[1] * p->in_size[2], size = y_bytes(q);
    const int32_t *columns = dw_columns(packed);
    DwChannel d = {.p = p, .q = q, .f = &f, .planes = planes, .count = oh * f.wq,
                   .stage = planes + phases * f.plane_bytes};
#ifdef FXRT_QCONV_X86
    int isa = dw_isa(p);
#endif
#if FXRT_ARM_DSP
    int dsp = dw_dsp_applies(p, q);
#endif
    int64_t tap_at[DW_MAX_TAPS];
    for (int64_t t = 0; t < taps && t < DW_MAX_TAPS; t++) {
        int64_t phase, offset;
        dw_tap(p, &f, t, &phase, &offset);
        tap_at[t] = phase * f.plane_bytes + offset;
    }
    d.tap_at = tap_at;
    dw_fill_planes(p, &f, (uint8_t)q->x_zp, planes);
    for (int64_t plane = 0, ch = 0; plane < p->batch * c; plane++, ch = ch + 1 < c ? ch + 1 : 0) {
        dw_phase_planes(p, &f, x + plane * in_plane, planes);
        d.taps = dw_taps(p, packed) + ch * taps;
        d.seed = columns[ch];
        d.mult = columns[c + ch];
        d.shift = columns[2 * c + ch];
        d.rescale = fxrt_rescale32_make(d.mult, (int)d.shift);
        uint8_t *dst = y + plane * oh * ow * size;
#if FXRT_ARM_DSP
        if (dsp) {
            dw_channel_dsp(&d, (int32_t *)(void *)(d.stage + f.stage_bytes), dst);
            continue;
        }
#endif
#ifdef FXRT_QCONV_X86
        if (isa == 2)
            dw_channel_avx512(&d);
        else if (isa == 1)
            dw_channel_avx2(&d);
        else
#endif
            dw_channel_portable(&d);
        for (int64_t oy = 0; oy < oh; oy++)
            copy_bytes(dst + oy * ow * size, d.stage + oy * f.wq * size, ow * size);
    }
}

/* --- depthwise, NHWC: channels in the vector lanes ------------------------------ */

int fxrt_qconv_nhwc_applies(const FxrtConvParams *p)
{
    return !fxrt_qconv_is_depthwise(p) || kernel_taps(p) <= DW_MAX_TAPS;
}

#if !FXRT_SMALL_KERNELS /* the firmware build is NCHW only (qconv-nhwc is host-only) */

/* A run of output pixels of the NHWC depthwise convolution along one output
 * row: pixel i reads tap t's input pixel (C bytes) at src[t] + i * step, a
 * row of zero points where the window leaves the image (the padding, which
 * the seed's - x_zp x sum(w) cancels as in the reference; step 0 then), and
 * writes its C outputs at y + i * C (elements). */
typedef struct DwRun {
    const uint8_t *src[DW_MAX_TAPS];
    int64_t step, count;
    uint8_t *y;
} DwRun;

typedef struct DwPixel {
    const FxrtQConv *q;
    int64_t c, taps;
    const int32_t *seed, *mult, *shift; /* [C] */
    const int8_t *w;                    /* [C][taps] */
    /* The AVX2 kernel's tables (dw_avx2_tables): per group of 16 channels
     * its seeds and scales, then per group and pair of taps two vectors of
     * int16 weight pairs. */
    const void *avx2_groups;
} DwPixel;

/* One image of the NHWC depthwise convolution and where its taps read. */
typedef struct DwImage {
    const FxrtConvParams *p;
    const uint8_t *x, *zp_row; /* the NHWC image; C zero points */
    uint8_t *y;                /* its NHWC output */
    int64_t tap_dy[DW_MAX_TAPS], tap_dx[DW_MAX_TAPS]; /* from the window's corner */
    int64_t inner_lo, inner_hi;                       /* fxrt_window_inner */
} DwImage;

/* The run of output row oy that starts at column ox.  A row is at most
 * three runs: the left edge and the right one pixel by pixel, the inside
 * columns as one run with a step of stride_w pixels; a row whose window
 * leaves the image at the top or bottom goes pixel by pixel. */
static void dw_run_at(const DwImage *m, int64_t c, int64_t size, int64_t oy, int64_t ox,
                      DwRun *r)
{
    const FxrtConvParams *p = m->p;
    int64_t h = p->in_size[1], w = p->in_size[2], taps = kernel_taps(p);
    int64_t iy0 = oy * p->stride[1] - p->pad_begin[1], ix0 = ox * p->stride[2] - p->pad_begin[2];
    int inside = iy0 >= 0 && iy0 + m->tap_dy[taps - 1] < h && ox >= m->inner_lo &&
                 ox < m->inner_hi;
    r->count = inside ? m->inner_hi - ox : 1;
    r->step = inside ? p->stride[2] * c : 0;
    r->y = m->y + (oy * p->out_size[2] + ox) * c * size;
    for (int64_t t = 0; t < taps; t++) {
        int64_t iy = iy0 + m->tap_dy[t], ix = ix0 + m->tap_dx[t];
        r->src[t] = iy >= 0 && iy < h && ix >= 0 && ix < w ? m->x + (iy * w + ix) * c : m->zp_row;
    }
}

/* Steps (oy, ox) past the run r holds (count 0 at the start) and fills r
 * with the next one; 0 at the end of the image. */
static int dw_next_run(const DwImage *m, int64_t c, int64_t size, int64_t *oy, int64_t *ox,
                       DwRun *r)
{
    *ox += r->count;
    if (*ox >= m->p->out_size[2]) {
        *ox = 0;
        ++*oy;
    }
    if (*oy >= m->p->out_size[1])
        return 0;
    dw_run_at(m, c, size, *oy, *ox, r);
    return 1;
}

/* Channels [from, c) of a run in portable C. */
static void dw_run_portable(const DwPixel *d, const DwRun *r, int64_t from)
{
    const FxrtQConv *q = d->q;
    int is_int8 = q->x_type == FXRT_DTYPE_INT8;
    int64_t size = y_bytes(q);
    for (int64_t i = 0; i < r->count; i++) {
        uint8_t *y = r->y + i * d->c * size;
        for (int64_t ch = from; ch < d->c; ch++) {
            uint32_t acc = (uint32_t)d->seed[ch];
            for (int64_t t = 0; t < d->taps; t++) {
                uint8_t byte = r->src[t][i * r->step + ch];
                int32_t xv = is_int8 ? (int32_t)(int8_t)byte : (int32_t)byte;
                acc += (uint32_t)(xv * d->w[ch * d->taps + t]);
            }
            if (q->y_type == FXRT_DTYPE_INT32) {
                int32_t v = (int32_t)acc;
                memcpy(y + ch * 4, &v, sizeof v);
                continue;
            }
            int64_t v = fxrt_quant_rescale((int32_t)acc, d->mult[ch], d->shift[ch]) + q->y_zp;
            v = v < q->y_min ? q->y_min : v > q->y_max ? q->y_max : v;
            y[ch] = (uint8_t)v; /* modulo 256: an int8's two's complement byte */
        }
    }
}

/* Channels [from, c) of the image in portable C. */
static void dw_image_portable(const DwPixel *d, const DwImage *m, int64_t from)
{
    DwRun r = {.count = 0};
    for (int64_t oy = 0, ox = 0; dw_next_run(m, d->c, y_bytes(d->q), &oy, &ox, &r);)
        dw_run_portable(d, &r, from);
}

#ifdef FXRT_QCONV_X86
#define DW_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* Where channel ch of a 64-channel block sits in the VNNI kernel's four
 * accumulators: the byte unpacks below leave channel 16 L + 4 k + j (128-bit
 * lane L, j < 4) in accumulator k, int32 lane 4 L + j. */
static int64_t dw_quad_slot(int64_t ch) { return (ch % 16 / 4) * 16 + ch / 16 * 4 + ch % 4; }

/* The VNNI kernel works on column quads: for an output row, a block of 64
 * channels and kernel rows 4 g .. 4 g + 3 (a row group), the quad of input
 * column ix holds per channel the four rows' bytes at ix, [x_r0 x_r1 x_r2
 * x_r3], as four vectors in dw_quad_slot's order.  Every output pixel of
 * the row whose window covers ix reads that quad, so a row's quads are
 * built once (two rounds of byte unpacks) and each output pixel is one
 * vpdpbusd per row group, kernel column and accumulator, against the
 * weights [w(4g, kx) .. w(4g + 3, kx)] per channel.  Rows past the kernel
 * have zero weights; rows and columns outside the image read the zero
 * point (which the seed's - x_zp x sum(w) cancels, as in the reference). */

/* Fills block b's weight vectors and columns at `tables`.  An int8
 * activation is read as x + 128 (its top bit flipped) so that vpdpbusd's
 * unsigned operand serves both types: the seed then loses 128 x sum(w).
 * Channels past C get zero weights and seeds.  Kernels of at most 16 taps
 * and four (row group, kx) words per channel (3x3, 4x4, 1x3 ...) build a
 * channel's words with one byte shuffle, the rest byte by byte: this runs
 * at every call, and a DS-CNN layer's 64 channels cost a fifth of the
 * layer byte by byte. */
DW_VNNI_TARGET static void dw_vnni_block_tables(const DwPixel *d, const FxrtConvParams *p,
                                                int64_t b, uint8_t *tables)
{
    int64_t kh = p->kernel[1], kw = p->kernel[2], groups = dw_vnni_row_groups(p);
    int64_t words = groups * kw;
    int32_t *columns = (int32_t *)(void *)(tables + words * 4 * DW_BLOCK);
    int shuffled = d->taps <= 16 && words <= 4, is_int8 = d->q->x_type == FXRT_DTYPE_INT8;
    int8_t order[16];
    for (int64_t u = 0; u < 4; u++)
        for (int64_t r = 0; r < 4; r++) {
            int64_t ky = u / kw * 4 + r, kx = u % kw;
            order[4 * u + r] = (int8_t)(u < words && ky < kh ? ky * kw + kx : -1); /* -1: 0 */
        }
    const __m128i control = _mm_loadu_si128((const __m128i *)(const void *)order);
    const __mmask16 tap_bytes = (__mmask16)((1u << (d->taps < 16 ? d->taps : 16)) - 1u);
    for (int64_t i = 0; i < DW_BLOCK; i++) {
        int64_t ch = b * DW_BLOCK + i, slot = dw_quad_slot(i);
        const int8_t *w = ch < d->c ? d->w + ch * d->taps : NULL;
        /* Word u = (row group, kx) of this lane in vector u of its
         * accumulator; zero past C. */
        uint8_t *lane = tables + slot / 16 * DW_BLOCK + slot % 16 * 4;
        uint32_t word[4] = {0, 0, 0, 0};
        if (w && shuffled)
            _mm_storeu_si128((__m128i *)(void *)word,
                             _mm_shuffle_epi8(_mm_maskz_loadu_epi8(tap_bytes, w), control));
        for (int64_t u = 0; u < words; u++) {
            uint32_t quad = word[u % 4];
            for (int64_t r = 0; w && !shuffled && r < 4; r++) {
                int64_t ky = u / kw * 4 + r;
                if (ky < kh)
                    quad |= (uint32_t)(uint8_t)w[ky * kw + u % kw] << (8 * r);
            }
            memcpy(lane + u * 4 * DW_BLOCK, &quad, sizeof quad);
        }
        uint32_t seed = 0;
        int32_t mult = 0, shift = 31;
        if (w) {
            seed = (uint32_t)d->seed[ch];
            for (int64_t t = 0; is_int8 && t < d->taps; t++)
                seed -= 128u * (uint32_t)(int32_t)w[t];
            mult = d->mult[ch];
            shift = d->shift[ch];
        }
        columns[slot] = (int32_t)seed;
        columns[DW_BLOCK + slot] = mult;
        columns[2 * DW_BLOCK + slot] = shift;
    }
}

/* Stores one pixel's 64 (live) int32 sums from the four accumulators. */
DW_VNNI_TARGET __attribute__((always_inline)) static inline void
dw_store_int32_vnni(const __m512i *acc, int64_t left, uint8_t *y)
{
    for (int k = 0; k < 4; k++) {
        __m128i part[4] = {
            _mm512_extracti32x4_epi32(acc[k], 0), _mm512_extracti32x4_epi32(acc[k], 1),
            _mm512_extracti32x4_epi32(acc[k], 2), _mm512_extracti32x4_epi32(acc[k], 3)};
        for (int lane = 0; lane < 4; lane++) {
            int64_t first = 16 * lane + 4 * k, real = left - first;
            __mmask8 keep = (__mmask8)(real >= 4 ? 0xf : real <= 0 ? 0 : (1u << real) - 1u);
            _mm_mask_storeu_epi32(y + first * 4, keep, part[lane]);
        }
    }
}

/* Output row oy's column quads of block c0 (live its channels) into quads. */
DW_VNNI_TARGET __attribute__((always_inline)) static inline void
dw_row_quads_vnni(const FxrtConvParams *p, const DwImage *m, int64_t oy, int64_t c0,
                  __mmask64 live, const int is_int8, __m512i *quads)
{
    int64_t h = p->in_size[1], w = p->in_size[2], c = p->in_channels;
    int64_t kh = p->kernel[1], columns = dw_vnni_columns(p), left = p->pad_begin[2];
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int64_t g = 0; g < dw_vnni_row_groups(p); g++) {
        const uint8_t *row[4];
        for (int r = 0; r < 4; r++) {
            int64_t ky = 4 * g + r, iy = oy * p->stride[1] - p->pad_begin[1] + ky * p->dilation[1];
            row[r] = ky < kh && iy >= 0 && iy < h ? m->x + iy * w * c : NULL;
        }
        for (int64_t col = 0; col < columns; col++) {
            int64_t ix = col - left;
            __m512i x[4];
            for (int r = 0; r < 4; r++) {
                const uint8_t *at = row[r] && ix >= 0 && ix < w ? row[r] + ix * c : m->zp_row;
                x[r] = _mm512_maskz_loadu_epi8(live, at + c0);
                if (is_int8)
                    x[r] = _mm512_xor_si512(x[r], flip);
            }
            __m512i low01 = _mm512_unpacklo_epi8(x[0], x[1]);
            __m512i high01 = _mm512_unpackhi_epi8(x[0], x[1]);
            __m512i low23 = _mm512_unpacklo_epi8(x[2], x[3]);
            __m512i high23 = _mm512_unpackhi_epi8(x[2], x[3]);
            __m512i *quad = quads + (g * columns + col) * 4;
            _mm512_storeu_si512(quad, _mm512_unpacklo_epi16(low01, low23));
            _mm512_storeu_si512(quad + 1, _mm512_unpackhi_epi16(low01, low23));
            _mm512_storeu_si512(quad + 2, _mm512_unpacklo_epi16(high01, high23));
            _mm512_storeu_si512(quad + 3, _mm512_unpackhi_epi16(high01, high23));
        }
    }
}

/* Block b of the image, row by row, its tables built (dw_vnni_block_tables);
 * groups and kw constants where the caller inlines it.  The scales clamp to
 * [y_min - zp, y_max - zp], so the narrowing packs (which put the channels
 * back in order) and the zero point's int16 add are exact. */
DW_VNNI_TARGET __attribute__((always_inline)) static inline void
dw_block_vnni(const DwPixel *d, const DwImage *m, int64_t b, uint8_t *tables,
              const int64_t groups, const int64_t kw, const int is_int8)
{
    const FxrtConvParams *p = m->p;
    const FxrtQConv *q = d->q;
    int64_t c0 = b * DW_BLOCK, left = d->c - c0, columns = dw_vnni_columns(p);
    int64_t ow = p->out_size[2], sw = p->stride[2], dx = p->dilation[2];
    __mmask64 live = left >= DW_BLOCK ? ~(__mmask64)0 : ((__mmask64)1 << left) - 1u;
    const __m512i *weight = (const __m512i *)(const void *)tables;
    const int32_t *column = (const int32_t *)(const void *)(tables + groups * kw * 4 * DW_BLOCK);
    __m512i *quads = (__m512i *)(void *)(tables + (groups * kw + 3) * 4 * DW_BLOCK);
    __m512i seed[4];
    FxrtQuantScaleAvx512 scale[4];
    for (int k = 0; k < 4; k++) {
        seed[k] = _mm512_loadu_si512(column + k * 16);
        scale[k] = fxrt_quant_scale_avx512(_mm512_loadu_si512(column + DW_BLOCK + k * 16),
                                           _mm512_loadu_si512(column + 2 * DW_BLOCK + k * 16),
                                           0, q->y_min - q->y_zp, q->y_max - q->y_zp);
    }
    const __m512i zp = _mm512_set1_epi16((short)q->y_zp);
    for (int64_t oy = 0; oy < p->out_size[1]; oy++) {
        dw_row_quads_vnni(p, m, oy, c0, live, is_int8, quads);
        uint8_t *y = m->y + oy * ow * d->c * y_bytes(q);
        for (int64_t ox = 0; ox < ow; ox++) {
            __m512i acc[4] = {seed[0], seed[1], seed[2], seed[3]};
            for (int64_t g = 0; g < groups; g++)
                for (int64_t kx = 0; kx < kw; kx++) {
                    const __m512i *quad = quads + (g * columns + ox * sw + kx * dx) * 4;
                    const __m512i *w = weight + (g * kw + kx) * 4;
                    for (int k = 0; k < 4; k++)
                        acc[k] = _mm512_dpbusd_epi32(acc[k], _mm512_loadu_si512(quad + k),
                                                     _mm512_loadu_si512(w + k));
                }
            if (q->y_type == FXRT_DTYPE_INT32) {
                dw_store_int32_vnni(acc, left, y + (ox * d->c + c0) * 4);
                continue;
            }
            __m512i rescaled[4];
            for (int k = 0; k < 4; k++)
                rescaled[k] = fxrt_quant_requantize_scaled_avx512(acc[k], &scale[k]);
            __m512i words01 = _mm512_add_epi16(_mm512_packs_epi32(rescaled[0], rescaled[1]), zp);
            __m512i words23 = _mm512_add_epi16(_mm512_packs_epi32(rescaled[2], rescaled[3]), zp);
            __m512i bytes = q->y_type == FXRT_DTYPE_UINT8 ? _mm512_packus_epi16(words01, words23)
                                                          : _mm512_packs_epi16(words01, words23);
            _mm512_mask_storeu_epi8(y + ox * d->c + c0, live, bytes);
        }
    }
}

/* Every image of the batch (x and y advancing by x_image and y_image
 * bytes), a block of 64 channels at a time, so that a block's tables are
 * built once for the batch.  tables: dw_vnni_tables_bytes. */
DW_VNNI_TARGET static void dw_images_vnni(const DwPixel *d, DwImage *m, const uint8_t *x,
                                          int64_t x_image, uint8_t *y, int64_t y_image,
                                          uint8_t *tables)
{
    const FxrtConvParams *p = m->p;
    tables += -(uintptr_t)tables & 63;
    int is_int8 = d->q->x_type == FXRT_DTYPE_INT8;
    int64_t groups = dw_vnni_row_groups(p), kw = p->kernel[2];
    for (int64_t b = 0; b * DW_BLOCK < d->c; b++) {
        dw_vnni_block_tables(d, p, b, tables);
        for (int64_t n = 0; n < p->batch; n++) {
            m->x = x + n * x_image;
            m->y = y + n * y_image;
            /* 3x3 (one row group, three columns), the common kernel, unrolled. */
            if (groups == 1 && kw == 3 && !is_int8)
                dw_block_vnni(d, m, b, tables, 1, 3, 0);
            else if (groups == 1 && kw == 3)
                dw_block_vnni(d, m, b, tables, 1, 3, 1);
            else
                dw_block_vnni(d, m, b, tables, groups, kw, is_int8);
        }
    }
}

/* The AVX2 kernel: 16 channels (a group) and two taps per vpmaddwd.  Tap
 * t's 16 activation bytes widen to int16 (vpmovzxbw, vpmovsxbw for int8),
 * and unpacklo/hi_epi16 interleave taps t and t + 1 into (x_t, x_t+1) pairs
 * per channel; those unpacks work within 128-bit lanes, so accumulator 0
 * holds channels 0-3 and 8-11 of the group and accumulator 1 channels 4-7
 * and 12-15 (dw_avx2_channel).  The table holds, per group and pair, the
 * matching (w_t, w_t+1) int16 pairs of both accumulators; an odd last tap
 * is paired with itself times 0.  A C not a multiple of 16 ends with the
 * group at C - 16, which overlaps the one before: the shared channels are
 * computed twice, the same bytes, and no load reads past a pixel. */
static int64_t dw_avx2_first(int64_t c, int64_t g)
{
    return (g + 1) * DW_GROUP > c ? c - DW_GROUP : g * DW_GROUP;
}

/* The channel of its group in int32 lane j of accumulator k. */
static int64_t dw_avx2_channel(int64_t k, int64_t j) { return 8 * (j / 4) + 4 * k + j % 4; }

/* A group's seeds and scales in accumulator lane order, built once per
 * call: the kernel walks the image's runs once and every group within
 * each, so that a run's tap addresses serve all C channels. */
typedef struct DwGroupAvx2 {
    __m256i seed[2];
    FxrtQuantScaleAvx2 scale[2];
    int64_t c0;
} DwGroupAvx2;
/* A negative array size unless DW_GROUP_AVX2_BYTES holds a DwGroupAvx2. */
typedef char dw_group_avx2_fits[sizeof(DwGroupAvx2) <= DW_GROUP_AVX2_BYTES ? 1 : -1];

/* Channels c0 .. c0 + 15 of a per-channel int32 array in accumulator k's
 * lane order. */
DW_AVX2_TARGET __attribute__((always_inline)) static inline __m256i
dw_avx2_column(const int32_t *column, int64_t c0, int k)
{
    __m256i low = _mm256_loadu_si256((const __m256i *)(const void *)(column + c0));
    __m256i high = _mm256_loadu_si256((const __m256i *)(const void *)(column + c0 + 8));
    return k ? _mm256_permute2x128_si256(low, high, 0x31)
             : _mm256_permute2x128_si256(low, high, 0x20);
}

/* Fills the AVX2 tables at `tables` (dw_nhwc_tables_bytes, any alignment;
 * the tables start at the next 32-byte boundary): a DwGroupAvx2 per group
 * (DW_GROUP_AVX2_BYTES apart), then the weight pairs [group][pair][2]. */
DW_AVX2_TARGET static void dw_avx2_tables(DwPixel *d, uint8_t *tables)
{
    const FxrtQConv *q = d->q;
    int64_t taps = d->taps, pairs = (taps + 1) / 2, groups = dw_avx2_groups(d->c);
    uint8_t *aligned = tables + (-(uintptr_t)tables & 31);
    uint8_t *weights = aligned + groups * DW_GROUP_AVX2_BYTES;
    for (int64_t g = 0; g < groups; g++) {
        int64_t c0 = dw_avx2_first(d->c, g);
        DwGroupAvx2 *e = (DwGroupAvx2 *)(void *)(aligned + g * DW_GROUP_AVX2_BYTES);
        e->c0 = c0;
        for (int k = 0; k < 2; k++) {
            e->seed[k] = dw_avx2_column(d->seed, c0, k);
            e->scale[k] = fxrt_quant_scale_avx2(dw_avx2_column(d->mult, c0, k),
                                                dw_avx2_column(d->shift, c0, k), q->y_zp,
                                                q->y_min, q->y_max);
        }
        for (int64_t u = 0; u < pairs; u++)
            for (int64_t k = 0; k < 2; k++)
                for (int64_t j = 0; j < 8; j++) {
                    const int8_t *w = d->w + (c0 + dw_avx2_channel(k, j)) * taps;
                    int8_t second = 2 * u + 1 < taps ? w[2 * u + 1] : 0;
                    uint32_t pair = (uint32_t)(uint16_t)(int16_t)w[2 * u] |
                                    (uint32_t)(uint16_t)(int16_t)second << 16;
                    int64_t at = ((g * pairs + u) * 2 + k) * 8 + j;
                    memcpy(weights + at * (int64_t)sizeof pair, &pair, sizeof pair);
                }
    }
    d->avx2_groups = aligned;
}

/* Pixels i .. i + n - 1 of run r in one group, n (1 or 2) a constant: the
 * pixels share each weight load.  The two accumulators' requantized lanes
 * narrow back into channel order: packs takes lanes 0-3 of each 128-bit
 * half from accumulator 0 and 4-7 from accumulator 1. */
DW_AVX2_TARGET __attribute__((always_inline)) static inline void
dw_pixels_avx2(const DwPixel *d, const DwGroupAvx2 *e, const __m256i *weights, const DwRun *r,
               int64_t i, const int n, const int64_t taps, const int is_int8)
{
    const FxrtQConv *q = d->q;
    __m256i acc[2][2];
#pragma GCC unroll 2
    for (int j = 0; j < n; j++)
        acc[j][0] = e->seed[0], acc[j][1] = e->seed[1];
    /* Unrolled for the 3x3 kernel's five pairs. */
#pragma GCC unroll 5
    for (int64_t t = 0; t < taps; t += 2) {
        int64_t next = t + 1 < taps ? t + 1 : t;
        __m256i w0 = _mm256_load_si256(weights + t); /* pair t / 2 */
        __m256i w1 = _mm256_load_si256(weights + t + 1);
#pragma GCC unroll 2
        for (int j = 0; j < n; j++) {
            int64_t at = (i + j) * r->step + e->c0;
            __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)(r->src[t] + at));
            __m128i next_bytes =
                _mm_loadu_si128((const __m128i *)(const void *)(r->src[next] + at));
            __m256i x = is_int8 ? _mm256_cvtepi8_epi16(bytes) : _mm256_cvtepu8_epi16(bytes);
            __m256i next_x = is_int8 ? _mm256_cvtepi8_epi16(next_bytes)
                                     : _mm256_cvtepu8_epi16(next_bytes);
            acc[j][0] = _mm256_add_epi32(
                acc[j][0], _mm256_madd_epi16(_mm256_unpacklo_epi16(x, next_x), w0));
            acc[j][1] = _mm256_add_epi32(
                acc[j][1], _mm256_madd_epi16(_mm256_unpackhi_epi16(x, next_x), w1));
        }
    }
#pragma GCC unroll 2
    for (int j = 0; j < n; j++) {
        if (q->y_type == FXRT_DTYPE_INT32) {
            __m256i *y = (__m256i *)(void *)(r->y + ((i + j) * d->c + e->c0) * 4);
            _mm256_storeu_si256(y, _mm256_permute2x128_si256(acc[j][0], acc[j][1], 0x20));
            _mm256_storeu_si256(y + 1, _mm256_permute2x128_si256(acc[j][0], acc[j][1], 0x31));
            continue;
        }
        /* In [y_min, y_max]: packs is exact, and the low bytes are the
         * outputs (an int8's two's complement byte). */
        __m256i words =
            _mm256_packs_epi32(fxrt_quant_requantize_scaled_avx2(acc[j][0], &e->scale[0]),
                               fxrt_quant_requantize_scaled_avx2(acc[j][1], &e->scale[1]));
        words = _mm256_and_si256(words, _mm256_set1_epi16(0xff));
        __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words),
                                         _mm256_extracti128_si256(words, 1));
        _mm_storeu_si128((__m128i *)(void *)(r->y + (i + j) * d->c + e->c0), bytes);
    }
}

/* The image, run by run, every group within each run two pixels at a
 * time; taps and is_int8 constants where the caller inlines it. */
DW_AVX2_TARGET __attribute__((always_inline)) static inline void
dw_runs_avx2(const DwPixel *d, const DwImage *m, const int64_t taps, const int is_int8)
{
    int64_t pairs = (taps + 1) / 2;
    const uint8_t *groups = d->avx2_groups;
    int64_t count = dw_avx2_groups(d->c);
    const __m256i *weights =
        (const __m256i *)(const void *)(groups + count * DW_GROUP_AVX2_BYTES);
    DwRun run = {.count = 0}, *r = &run;
    for (int64_t oy = 0, ox = 0; dw_next_run(m, d->c, y_bytes(d->q), &oy, &ox, r);)
        for (int64_t g = 0; g < count; g++) {
            const DwGroupAvx2 *e =
                (const DwGroupAvx2 *)(const void *)(groups + g * DW_GROUP_AVX2_BYTES);
            const __m256i *w = weights + g * pairs * 2;
            int64_t i = 0;
            for (; i + 2 <= r->count; i += 2)
                dw_pixels_avx2(d, e, w, r, i, 2, taps, is_int8);
            if (i < r->count)
                dw_pixels_avx2(d, e, w, r, i, 1, taps, is_int8);
        }
}

/* The groups of 16 channels; returns where the portable tail starts (C, or
 * 0 below 16 channels). */
DW_AVX2_TARGET static int64_t dw_image_avx2(const DwPixel *d, const DwImage *m)
{
    int is_int8 = d->q->x_type == FXRT_DTYPE_INT8;
    if (d->c < DW_GROUP)
        return 0;
    /* 3x3, the common kernel, unrolled. */
    if (d->taps == 9 && !is_int8)
        dw_runs_avx2(d, m, 9, 0);
    else if (d->taps == 9)
        dw_runs_avx2(d, m, 9, 1);
    else
        dw_runs_avx2(d, m, d->taps, is_int8);
    return d->c;
}
#endif

static void qconv_depthwise_nhwc(const FxrtConvParams *p, const FxrtQConv *q, const uint8_t *x,
                                 const void *packed, uint8_t *y, uint8_t *scratch)
{
    int64_t c = p->in_channels, taps = kernel_taps(p);
    const int32_t *columns = dw_columns(packed);
    DwPixel d = {.q = q, .c = c, .taps = taps, .seed = columns, .mult = columns + c,
                 .shift = columns + 2 * c, .w = dw_taps(p, packed)};
    uint8_t *zp_row = scratch, *tables = scratch + align64(c + SLACK);
    memset(zp_row, (uint8_t)q->x_zp, (size_t)c);
#ifdef FXRT_QCONV_X86
    int isa = dw_nhwc_isa(p);
    if (isa == 1)
        dw_avx2_tables(&d, tables);
#else
    (void)tables;
#endif
    DwImage m = {.p = p, .zp_row = zp_row};
    for (int64_t t = 0; t < taps; t++) {
        m.tap_dy[t] = (t / p->kernel[2]) * p->dilation[1];
        m.tap_dx[t] = (t % p->kernel[2]) * p->dilation[2];
    }
    fxrt_window_inner(p->in_size[2], p->out_size[2], p->kernel[2], p->stride[2], p->dilation[2],
                      p->pad_begin[2], &m.inner_lo, &m.inner_hi);
    int64_t x_image = p->in_size[1] * p->in_size[2] * c;
    int64_t y_image = p->out_size[1] * p->out_size[2] * c * y_bytes(q);
#ifdef FXRT_QCONV_X86
    if (isa == 2) {
        dw_images_vnni(&d, &m, x, x_image, y, y_image, tables);
        return;
    }
#endif
    for (int64_t n = 0; n < p->batch; n++) {
        m.x = x + n * x_image;
        m.y = y + n * y_image;
#ifdef FXRT_QCONV_X86
        if (isa == 1)
            dw_image_portable(&d, &m, dw_image_avx2(&d, &m));
        else
#endif
            dw_image_portable(&d, &m, 0);
    }
}

#endif /* !FXRT_SMALL_KERNELS */

void fxrt_qconv_small(const FxrtConvParams *p, const FxrtQConv *q, const void *x,
                      const void *packed, void *y, void *scratch)
{
    if (fxrt_qconv_is_depthwise(p))
        qconv_depthwise(p, q, (const uint8_t *)x, packed, (uint8_t *)y, (uint8_t *)scratch);
    else
        qconv_gemm_small(p, q, (const uint8_t *)x, packed, (uint8_t *)y, (uint8_t *)scratch);
}

void fxrt_qconv(const FxrtConvParams *p, const FxrtQConv *q, const void *x, const void *packed,
                void *y, void *scratch)
{
#if FXRT_SMALL_KERNELS
    fxrt_qconv_small(p, q, x, packed, y, scratch);
#else
    if (fxrt_qconv_is_depthwise(p) && q->x_nhwc)
        qconv_depthwise_nhwc(p, q, (const uint8_t *)x, packed, (uint8_t *)y, (uint8_t *)scratch);
    else if (fxrt_qconv_is_depthwise(p))
        qconv_depthwise(p, q, (const uint8_t *)x, packed, (uint8_t *)y, (uint8_t *)scratch);
    else
        qconv_gemm(p, q, (const uint8_t *)x, packed, (uint8_t *)y, (uint8_t *)scratch);
#endif
}

/* Depthwise: a channel plane is copied into the phase planes before its
 * outputs are stored, and output plane k ends where input plane k + 1
 * starts at the earliest (the output is no larger).  Pointwise: a pixel's
 * channels are gathered before its outputs are stored, into the same
 * offsets (same plane size), and no more outputs than inputs. */
int fxrt_qconv_inplace_applies(const FxrtConvParams *p, const FxrtQConv *q)
{
    if (!fxrt_qconv_applies(p) || y_bytes(q) != 1 || q->x_nhwc || q->y_nhwc)
        return 0;
    if (fxrt_qconv_is_depthwise(p))
        return p->out_size[1] * p->out_size[2] <= p->in_size[1] * p->in_size[2];
    return p->kernel[1] == 1 && p->kernel[2] == 1 && p->stride[1] == 1 && p->stride[2] == 1 &&
           p->pad_begin[1] == 0 && p->pad_begin[2] == 0 && p->out_size[1] == p->in_size[1] &&
           p->out_size[2] == p->in_size[2] && p->out_channels <= p->in_channels;
}

void fxrt_qconv_inplace(const FxrtConvParams *p, const FxrtQConv *q, void *xy,
                        const void *packed, void *scratch)
{
    fxrt_qconv_small(p, q, xy, packed, xy, scratch);
}
