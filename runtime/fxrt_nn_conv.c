/*
 * fxrt_nn_conv.c - convolutions over NC[D]HW tensors.
 *
 * Three float paths, chosen by fxrt_conv_algo:
 *  - a 1x1 kernel with stride 1 and no padding is already a matrix product
 *    (W[M/g, C/g] x X[C/g, positions]) and goes straight to GEMM;
 *  - depthwise convolution (one input channel per group) has too little
 *    reduction for GEMM to pay off, so it runs as a direct loop whose tap
 *    ranges are clipped once per output position instead of testing every
 *    tap against the padding;
 *  - everything else unfolds the input (im2col: one column of C/g * kernel
 *    taps per output position, padding as zeros) a tile of output positions
 *    at a time, the tile small enough that the column buffer and the output
 *    tile stay in L2, and multiplies with GEMM straight into Y.
 * The bias, residual and activation (FxrtEpilogue) are applied by the GEMM
 * to each output tile as it is finished, and by the depthwise loop to each
 * output row, so a fused Conv + Add + Relu reads and writes Y once.
 * Transposed convolution is the adjoint: GEMM with W transposed into column
 * form, then a scatter-add (col2im) into Y.  The integer convolution is a
 * direct loop (a reference kernel; the quantized fast paths are future
 * work).  Every spatial array holds three dims, right-aligned, so 1-D and
 * 2-D convolutions run through the same loops with unit leading dims.
 */
#include <string.h>

#include "fxrt.h"

#define SP FXRT_CONV_MAX_SPATIAL

static int64_t spatial_numel(const int64_t *size)
{
    int64_t n = 1;
    for (int i = 0; i < SP; i++)
        n *= size[i];
    return n;
}

FxrtConvAlgo fxrt_conv_algo(const FxrtConvParams *p)
{
    int pointwise = 1;
    for (int i = 0; i < SP; i++)
        pointwise &= p->kernel[i] == 1 && p->stride[i] == 1 && p->pad_begin[i] == 0 &&
                     p->out_size[i] == p->in_size[i];
    if (pointwise)
        return FXRT_CONV_ALGO_GEMM_1X1;
    if (p->groups == p->in_channels && p->groups > 1)
        return FXRT_CONV_ALGO_DEPTHWISE;
    return FXRT_CONV_ALGO_IM2COL;
}

/* Floats of column buffer plus output tile that one im2col tile may use: a
 * 128 KiB working set, which stays in L2 while the GEMM runs over it. */
enum { CONV_L2_FLOATS = 1 << 15, CONV_MIN_TILE = 16 };

/* Output positions unfolded per im2col tile: col_tile (0 = all of them),
 * and no more than keeps the tile in L2. */
static int64_t conv_tile(const FxrtConvParams *p, int64_t positions)
{
    int64_t rows = p->in_channels / p->groups * spatial_numel(p->kernel);
    int64_t per_position = rows + p->out_channels / p->groups;
    int64_t t = p->col_tile > 0 && p->col_tile < positions ? p->col_tile : positions;
    int64_t fit = per_position > 0 ? CONV_L2_FLOATS / per_position : t;
    fit -= fit % CONV_MIN_TILE;
    if (fit < CONV_MIN_TILE)
        fit = CONV_MIN_TILE;
    return t < fit ? t : fit;
}

/* Padded inputs of at most this many floats (1 MiB) take the implicit
 * path below; larger ones are unfolded tile by tile. */
enum { CONV_IMPLICIT_MAX_FLOATS = 1 << 18 };

/* The implicit path of a 2-D (or 1-D) convolution: no unfolding.  The input
 * is split, zero-padded, into sh x sw phase planes (plane (a, b) holds the
 * padded rows a, a + sh, ... and columns b, b + sw, ...; one plane for
 * stride 1), each hq x wq with wq = Wo + (KW - 1) * dw / sw.  Output
 * position (oh, ow) is column oh * wq + ow of a wider output; kernel tap
 * (c, kh, kw) then reads, for every column j, element j of its plane from
 * row (kh * dh) / sh and column (kw * dw) / sw on: the GEMM's B is the phase
 * planes themselves, one row offset per tap (fxrt_gemm_rows_f32).  The wq -
 * Wo extra columns per output row are computed and dropped.  A dilation
 * that is not a multiple of the stride would need more phases than that
 * and is left to im2col. */
typedef struct ImplicitConv {
    int64_t sh, sw;  /* strides = phases per axis */
    int64_t hq, wq;  /* one phase plane */
    int64_t rows;    /* output rows per GEMM, so the output tile stays in L2 */
    int64_t cols;    /* wide columns per GEMM: rows * wq rounded up to whole tiles */
    int64_t taps;    /* K = C/g * KH * KW */
} ImplicitConv;

enum { IMPLICIT_COL_ALIGN = 16 }; /* the microkernel's tile width */

static int implicit_conv(const FxrtConvParams *p, ImplicitConv *ic)
{
    if (p->kernel[0] != 1 || p->in_size[0] != 1 || p->out_size[0] != 1)
        return 0;
    int64_t cg = p->in_channels / p->groups, mg = p->out_channels / p->groups;
    ic->sh = p->stride[1];
    ic->sw = p->stride[2];
    if ((p->dilation[1] != 1 && ic->sh != 1) || (p->dilation[2] != 1 && ic->sw != 1))
        return 0;
    ic->hq = p->out_size[1] + (p->kernel[1] - 1) * p->dilation[1] / ic->sh;
    ic->wq = p->out_size[2] + (p->kernel[2] - 1) * p->dilation[2] / ic->sw;
    ic->taps = cg * p->kernel[1] * p->kernel[2];
    if (mg < 1 || ic->wq < 1 ||
        ic->sh * ic->sw * cg * ic->hq * ic->wq > CONV_IMPLICIT_MAX_FLOATS)
        return 0;
    ic->rows = CONV_L2_FLOATS / (mg * ic->wq);
    ic->rows = ic->rows < 1 ? 1 : ic->rows > p->out_size[1] ? p->out_size[1] : ic->rows;
    ic->cols = (ic->rows * ic->wq + IMPLICIT_COL_ALIGN - 1) / IMPLICIT_COL_ALIGN *
               IMPLICIT_COL_ALIGN;
    return 1;
}

/* Floats of the phase planes, with slack for the wide columns of the last
 * row of the last plane, which read past it. */
static int64_t implicit_planes_floats(const FxrtConvParams *p, const ImplicitConv *ic)
{
    return ic->sh * ic->sw * (p->in_channels / p->groups) * ic->hq * ic->wq + ic->cols +
           ic->wq;
}

/* Scratch of the implicit path, in floats: the tap offsets (int64, two
 * floats each, first so that they are aligned), the phase planes, and the
 * wide output tile. */
static int64_t implicit_scratch_floats(const FxrtConvParams *p, const ImplicitConv *ic)
{
    return 2 * ic->taps + implicit_planes_floats(p, ic) + p->out_channels / p->groups * ic->cols;
}

int64_t fxrt_conv_scratch_floats(const FxrtConvParams *p)
{
    if (fxrt_conv_algo(p) != FXRT_CONV_ALGO_IM2COL)
        return 0;
    ImplicitConv ic;
    if (implicit_conv(p, &ic))
        return implicit_scratch_floats(p, &ic);
    int64_t rows = p->in_channels / p->groups * spatial_numel(p->kernel);
    return rows * conv_tile(p, spatial_numel(p->out_size));
}

/* The epilogue of output channels [m0, ...) of image n from position q0 on,
 * as a GEMM sees it: rows are channels, columns positions. */
static FxrtEpilogue conv_epilogue(const FxrtEpilogue *ep, const FxrtConvParams *p, int64_t n,
                                  int64_t m0, int64_t q0)
{
    FxrtEpilogue e;
    memset(&e, 0, sizeof e);
    if (!fxrt_epilogue_active(ep))
        return e;
    int64_t out_n = spatial_numel(p->out_size);
    e = *ep;
    e.bias = ep->bias ? ep->bias + m0 : NULL;
    e.bias_row_stride = 1;
    e.bias_col_stride = 0;
    e.residual = ep->residual ? ep->residual + (n * p->out_channels + m0) * out_n + q0 : NULL;
    e.residual_ld = out_n;
    return e;
}

/* Y += bias per channel: ConvTranspose's bias, added after the scatter. */
static void add_bias(int64_t batch, int64_t channels, int64_t positions, const float *bias,
                     float *y)
{
    if (!bias)
        return;
    for (int64_t n = 0; n < batch; n++)
        for (int64_t c = 0; c < channels; c++) {
            float b = bias[c];
            float *row = y + (n * channels + c) * positions;
            for (int64_t i = 0; i < positions; i++)
                row[i] += b;
        }
}

void fxrt_conv_1x1_f32(const FxrtConvParams *p, const float *x, const float *w,
                       const FxrtEpilogue *ep, float *y)
{
    int64_t s = spatial_numel(p->in_size);
    int64_t cg = p->in_channels / p->groups, mg = p->out_channels / p->groups;
    for (int64_t n = 0; n < p->batch; n++)
        for (int64_t g = 0; g < p->groups; g++) {
            FxrtEpilogue e = conv_epilogue(ep, p, n, g * mg, 0);
            fxrt_gemm_ep_f32(0, 0, mg, s, cg, 1.0f, w + g * mg * cg, cg,
                             x + (n * p->in_channels + g * cg) * s, s, 0.0f,
                             y + (n * p->out_channels + g * mg) * s, s, &e);
        }
}

/* Output columns ow whose tap reads inside an input row of length in:
 * ow * stride + off in [0, in). */
static void tap_columns(int64_t off, int64_t stride, int64_t in, int64_t out, int64_t *lo,
                        int64_t *hi);

/* The output columns each tap of a kernel row covers, the same for every
 * row, so computed once per call (for kernels up to DW_MAX_TAPS wide; wider
 * ones compute them per row): tap kw covers [lo[kw], hi[kw]), and with
 * three taps all of them cover [all_lo, all_hi). */
enum { DW_MAX_TAPS = 16, DW_EPILOGUE_FLOATS = 512 };

typedef struct DepthwiseCols {
    int64_t lo[DW_MAX_TAPS], hi[DW_MAX_TAPS];
    int64_t all_lo, all_hi;
} DepthwiseCols;

static void depthwise_cols(const FxrtConvParams *p, DepthwiseCols *dc)
{
    int64_t kn = p->kernel[2] < DW_MAX_TAPS ? p->kernel[2] : DW_MAX_TAPS;
    for (int64_t kw = 0; kw < kn; kw++)
        tap_columns(kw * p->dilation[2] - p->pad_begin[2], p->stride[2], p->in_size[2],
                    p->out_size[2], &dc->lo[kw], &dc->hi[kw]);
    dc->all_lo = dc->all_hi = 0;
    if (p->kernel[2] == 3 && dc->hi[2] > dc->lo[0]) {
        /* The taps' ranges shift left as kw grows. */
        dc->all_lo = dc->lo[0];
        dc->all_hi = dc->hi[2];
    }
}

/* yrow[ow] += the taps of one kernel row over input row xrow.  Three taps
 * (the 3x3 kernels of MobileNet and DS-CNN) run as one pass over the output
 * columns where all three lie inside the input, the few border columns tap
 * by tap; other widths tap by tap. */
static void depthwise_row(const FxrtConvParams *p, const DepthwiseCols *dc, const float *xrow,
                          const float *wrow, float *yrow)
{
    int64_t sw = p->stride[2], dw = p->dilation[2], kn = p->kernel[2];
    int64_t pad = p->pad_begin[2], all_lo = dc->all_lo, all_hi = dc->all_hi;
    if (all_hi > all_lo) {
        float w0 = wrow[0], w1 = wrow[1], w2 = wrow[2];
        const float *x0 = xrow + all_lo * sw - pad;
        float *dst = yrow + all_lo;
        if (sw == 1)
            for (int64_t i = 0; i < all_hi - all_lo; i++)
                dst[i] += w0 * x0[i] + w1 * x0[i + dw] + w2 * x0[i + 2 * dw];
        else
            for (int64_t i = 0; i < all_hi - all_lo; i++)
                dst[i] += w0 * x0[i * sw] + w1 * x0[i * sw + dw] + w2 * x0[i * sw + 2 * dw];
    }
    for (int64_t kw = 0; kw < kn; kw++) {
        int64_t off = kw * dw - pad, lo, hi;
        if (kw < DW_MAX_TAPS) {
            lo = dc->lo[kw];
            hi = dc->hi[kw];
        } else {
            tap_columns(off, sw, p->in_size[2], p->out_size[2], &lo, &hi);
        }
        float wv = wrow[kw];
        /* [lo, hi) minus the fused range: the part on its left, then right. */
        for (int side = 0; side < 2; side++) {
            int64_t a = lo, b = hi;
            if (all_hi > all_lo) {
                a = side == 0 ? lo : (all_hi > lo ? all_hi : lo);
                b = side == 0 ? (all_lo < hi ? all_lo : hi) : hi;
            } else if (side == 1) {
                break;
            }
            if (b <= a)
                continue;
            const float *src = xrow + a * sw + off;
            float *dst = yrow + a;
            if (sw == 1)
                for (int64_t i = 0; i < b - a; i++)
                    dst[i] += wv * src[i];
            else
                for (int64_t i = 0; i < b - a; i++)
                    dst[i] += wv * src[i * sw];
        }
    }
}

/* One output plane at a time, one output row at a time: the row starts at
 * zero and every kernel tap adds weight * (a shifted input row) over the
 * output columns whose tap lies inside the input, a loop the compiler
 * vectorizes (contiguous for stride 1).  The epilogue runs on each finished
 * block of rows of at least DW_EPILOGUE_FLOATS (one row when rows are that
 * long), while the block is in L1. */
void fxrt_conv_depthwise_f32(const FxrtConvParams *p, const float *x, const float *w,
                             const FxrtEpilogue *ep, float *y)
{
    const int64_t *is = p->in_size, *os = p->out_size, *ks = p->kernel;
    int64_t in_n = spatial_numel(is), out_n = spatial_numel(os), k_n = spatial_numel(ks);
    int64_t mult = p->out_channels / p->groups; /* output channels per input channel */
    DepthwiseCols dc;
    depthwise_cols(p, &dc);
    for (int64_t n = 0; n < p->batch; n++)
        for (int64_t m = 0; m < p->out_channels; m++) {
            const float *xp = x + (n * p->in_channels + m / mult) * in_n;
            const float *wp = w + m * k_n;
            float *yp = y + (n * p->out_channels + m) * out_n;
            /* The plane is one row of the epilogue, all of channel m. */
            FxrtEpilogue e = conv_epilogue(ep, p, n, m, 0);
            e.bias_row_stride = 0;
            int64_t done = 0; /* positions of the plane the epilogue has seen */
            for (int64_t od = 0; od < os[0]; od++) {
                int64_t d0, d1;
                fxrt_window_range(od, p->stride[0], p->pad_begin[0], p->dilation[0], is[0],
                                  ks[0], &d0, &d1);
                for (int64_t oh = 0; oh < os[1]; oh++) {
                    int64_t h0, h1;
                    fxrt_window_range(oh, p->stride[1], p->pad_begin[1], p->dilation[1], is[1],
                                      ks[1], &h0, &h1);
                    float *yrow = yp + (od * os[1] + oh) * os[2];
                    for (int64_t ow = 0; ow < os[2]; ow++)
                        yrow[ow] = 0.0f;
                    for (int64_t kd = d0; kd < d1; kd++) {
                        int64_t id = od * p->stride[0] - p->pad_begin[0] + kd * p->dilation[0];
                        for (int64_t kh = h0; kh < h1; kh++) {
                            int64_t ih = oh * p->stride[1] - p->pad_begin[1] + kh * p->dilation[1];
                            depthwise_row(p, &dc, xp + (id * is[1] + ih) * is[2],
                                          wp + (kd * ks[1] + kh) * ks[2], yrow);
                        }
                    }
                    int64_t end = (od * os[1] + oh + 1) * os[2];
                    if (end - done >= DW_EPILOGUE_FLOATS || end == out_n) {
                        fxrt_epilogue_apply_f32(&e, 0, done, 1, end - done, yp + done, out_n);
                        done = end;
                    }
                }
            }
        }
}

/* ceil(a / b) for b > 0 and any a. */
static int64_t ceil_div(int64_t a, int64_t b) { return a > 0 ? (a + b - 1) / b : -(-a / b); }

static void tap_columns(int64_t off, int64_t stride, int64_t in, int64_t out, int64_t *lo,
                        int64_t *hi)
{
    int64_t l = stride == 1 ? -off : ceil_div(-off, stride);
    int64_t h = stride == 1 ? in - off : ceil_div(in - off, stride);
    l = l < 0 ? 0 : l > out ? out : l;
    h = h > out ? out : h < l ? l : h;
    *lo = l;
    *hi = h;
}

/* Unfolds output positions [q0, q0 + t) of image xg (cg channels) into
 * cols[cg * kernel taps][t].  Works a row of output positions at a time: the
 * taps of a row that fall inside the input form one contiguous range of
 * output columns, so the row is zeros, then a (strided) copy, then zeros,
 * with no bounds test per element.  The range's ends depend only on the tap
 * column, and the output rows are stepped through without division: this
 * loop dominated conv time while it divided per row. */
static void im2col_tile(const FxrtConvParams *p, const float *xg, int64_t cg, int64_t q0,
                        int64_t t, float *cols)
{
    const int64_t *is = p->in_size, *os = p->out_size, *ks = p->kernel;
    int64_t in_n = spatial_numel(is), sw = p->stride[2];
    int64_t ow_start = q0 % os[2], row_start = q0 / os[2];
    int64_t oh_start = row_start % os[1], od_start = row_start / os[1];
    float *col = cols;
    for (int64_t c = 0; c < cg; c++) {
        const float *xc = xg + c * in_n;
        for (int64_t kd = 0; kd < ks[0]; kd++)
            for (int64_t kh = 0; kh < ks[1]; kh++)
                for (int64_t kw = 0; kw < ks[2]; kw++) {
                    int64_t off = kw * p->dilation[2] - p->pad_begin[2]; /* iw = ow * sw + off */
                    /* Output columns whose tap lies inside the input row. */
                    int64_t first = sw == 1 ? -off : ceil_div(-off, sw);
                    int64_t last = sw == 1 ? is[2] - off : ceil_div(is[2] - off, sw);
                    float *dst = col;
                    int64_t ow0 = ow_start, oh = oh_start, od = od_start;
                    for (int64_t q = q0, end = q0 + t; q < end;) {
                        int64_t run = os[2] - ow0 < end - q ? os[2] - ow0 : end - q;
                        int64_t id = od * p->stride[0] - p->pad_begin[0] + kd * p->dilation[0];
                        int64_t ih = oh * p->stride[1] - p->pad_begin[1] + kh * p->dilation[1];
                        int64_t lo = 0, hi = 0;
                        if (id >= 0 && id < is[0] && ih >= 0 && ih < is[1]) {
                            lo = first - ow0;
                            hi = last - ow0;
                            lo = lo < 0 ? 0 : lo > run ? run : lo;
                            hi = hi > run ? run : hi < lo ? lo : hi;
                        }
                        for (int64_t i = 0; i < lo; i++)
                            dst[i] = 0.0f;
                        if (hi > lo) {
                            const float *src = xc + (id * is[1] + ih) * is[2] + ow0 * sw + off;
                            if (sw == 1)
                                for (int64_t i = lo; i < hi; i++)
                                    dst[i] = src[i];
                            else
                                for (int64_t i = lo; i < hi; i++)
                                    dst[i] = src[i * sw];
                        }
                        for (int64_t i = hi; i < run; i++)
                            dst[i] = 0.0f;
                        dst += run;
                        q += run;
                        ow0 = 0;
                        if (++oh == os[1]) {
                            oh = 0;
                            od++;
                        }
                    }
                    col += t;
                }
    }
}

/* Fills the phase planes of image xg (cg channels). */
static void implicit_fill(const FxrtConvParams *p, const ImplicitConv *ic, const float *xg,
                          int64_t cg, float *planes)
{
    int64_t h = p->in_size[1], wd = p->in_size[2];
    int64_t pt = p->pad_begin[1], pl = p->pad_begin[2];
    float *dst = planes;
    for (int64_t a = 0; a < ic->sh; a++)
        for (int64_t b = 0; b < ic->sw; b++) {
            /* Columns j of this phase read input column j * sw + b - pl. */
            int64_t j0 = ceil_div(pl - b, ic->sw), j1 = ceil_div(wd + pl - b, ic->sw);
            j0 = j0 < 0 ? 0 : j0 > ic->wq ? ic->wq : j0;
            j1 = j1 > ic->wq ? ic->wq : j1 < j0 ? j0 : j1;
            for (int64_t c = 0; c < cg; c++)
                for (int64_t i = 0; i < ic->hq; i++, dst += ic->wq) {
                    int64_t iy = i * ic->sh + a - pt;
                    if (iy < 0 || iy >= h || j1 == j0) {
                        for (int64_t j = 0; j < ic->wq; j++)
                            dst[j] = 0.0f;
                        continue;
                    }
                    const float *src = xg + (c * h + iy) * wd + b - pl;
                    for (int64_t j = 0; j < j0; j++)
                        dst[j] = 0.0f;
                    if (ic->sw == 1)
                        for (int64_t j = j0; j < j1; j++)
                            dst[j] = src[j];
                    else
                        for (int64_t j = j0; j < j1; j++)
                            dst[j] = src[j * ic->sw];
                    for (int64_t j = j1; j < ic->wq; j++)
                        dst[j] = 0.0f;
                }
        }
    for (int64_t i = 0, slack = ic->cols + ic->wq; i < slack; i++)
        dst[i] = 0.0f;
}

static void conv_implicit_f32(const FxrtConvParams *p, const ImplicitConv *ic, const float *x,
                              const float *w, const FxrtEpilogue *ep, float *y, float *scratch)
{
    int64_t cg = p->in_channels / p->groups, mg = p->out_channels / p->groups;
    int64_t ho = p->out_size[1], wo = p->out_size[2], wq = ic->wq;
    int64_t plane = ic->hq * wq, in_n = spatial_numel(p->in_size), out_n = ho * wo;
    int64_t *offsets = (int64_t *)(void *)scratch;
    float *planes = scratch + 2 * ic->taps, *wide = planes + implicit_planes_floats(p, ic);
    int64_t t = 0;
    for (int64_t c = 0; c < cg; c++)
        for (int64_t kh = 0; kh < p->kernel[1]; kh++)
            for (int64_t kw = 0; kw < p->kernel[2]; kw++) {
                int64_t ry = kh * p->dilation[1], rx = kw * p->dilation[2];
                int64_t phase = (ry % ic->sh) * ic->sw + rx % ic->sw;
                offsets[t++] = (phase * cg + c) * plane + ry / ic->sh * wq + rx / ic->sw;
            }
    for (int64_t n = 0; n < p->batch; n++)
        for (int64_t g = 0; g < p->groups; g++) {
            float *yg = y + (n * p->out_channels + g * mg) * out_n;
            implicit_fill(p, ic, x + (n * p->in_channels + g * cg) * in_n, cg, planes);
            FxrtEpilogue e = conv_epilogue(ep, p, n, g * mg, 0);
            for (int64_t oh0 = 0; oh0 < ho; oh0 += ic->rows) {
                int64_t r = ho - oh0 < ic->rows ? ho - oh0 : ic->rows;
                fxrt_gemm_rows_f32(mg, ic->cols, ic->taps, w + g * mg * ic->taps,
                                   planes + oh0 * wq, offsets, wide, ic->cols);
                for (int64_t m = 0; m < mg; m++)
                    for (int64_t oh = 0; oh < r; oh++)
                        memcpy(yg + m * out_n + (oh0 + oh) * wo, wide + m * ic->cols + oh * wq,
                               (size_t)wo * sizeof *yg);
                fxrt_epilogue_apply_f32(&e, 0, oh0 * wo, mg, r * wo, yg + oh0 * wo, out_n);
            }
        }
}

void fxrt_conv_im2col_f32(const FxrtConvParams *p, const float *x, const float *w,
                          const FxrtEpilogue *ep, float *y, float *scratch)
{
    ImplicitConv ic;
    if (implicit_conv(p, &ic)) {
        conv_implicit_f32(p, &ic, x, w, ep, y, scratch);
        return;
    }
    int64_t in_n = spatial_numel(p->in_size), out_n = spatial_numel(p->out_size);
    int64_t cg = p->in_channels / p->groups, mg = p->out_channels / p->groups;
    int64_t rows = cg * spatial_numel(p->kernel);
    int64_t tile = conv_tile(p, out_n);
    for (int64_t n = 0; n < p->batch; n++)
        for (int64_t g = 0; g < p->groups; g++) {
            const float *xg = x + (n * p->in_channels + g * cg) * in_n;
            float *yg = y + (n * p->out_channels + g * mg) * out_n;
            for (int64_t q0 = 0; q0 < out_n; q0 += tile) {
                int64_t t = out_n - q0 < tile ? out_n - q0 : tile;
                FxrtEpilogue e = conv_epilogue(ep, p, n, g * mg, q0);
                im2col_tile(p, xg, cg, q0, t, scratch);
                fxrt_gemm_ep_f32(0, 0, mg, t, rows, 1.0f, w + g * mg * rows, rows, scratch, t,
                                 0.0f, yg + q0, out_n, &e);
            }
        }
}

void fxrt_conv_f32(const FxrtConvParams *p, const float *x, const float *w,
                   const FxrtEpilogue *ep, float *y, float *scratch)
{
    switch (fxrt_conv_algo(p)) {
    case FXRT_CONV_ALGO_GEMM_1X1: fxrt_conv_1x1_f32(p, x, w, ep, y); break;
    case FXRT_CONV_ALGO_DEPTHWISE: fxrt_conv_depthwise_f32(p, x, w, ep, y); break;
    case FXRT_CONV_ALGO_IM2COL: fxrt_conv_im2col_f32(p, x, w, ep, y, scratch); break;
    }
}

/* --- transposed convolution ----------------------------------------------- */

/* Input positions per transposed-convolution tile (col_tile, 0 = all). */
static int64_t transpose_tile(const FxrtConvParams *p, int64_t positions)
{
    return p->col_tile > 0 && p->col_tile < positions ? p->col_tile : positions;
}

int64_t fxrt_conv_transpose_scratch_floats(const FxrtConvParams *p)
{
    int64_t rows = p->out_channels / p->groups * spatial_numel(p->kernel);
    return rows * transpose_tile(p, spatial_numel(p->in_size));
}

/* Adds cols[mg * kernel taps][t] (input positions q0..q0+t) into yg. */
static void col2im_tile(const FxrtConvParams *p, const float *cols, int64_t mg, int64_t q0,
                        int64_t t, float *yg)
{
    const int64_t *is = p->in_size, *os = p->out_size, *ks = p->kernel;
    int64_t out_n = spatial_numel(os);
    const float *col = cols;
    for (int64_t m = 0; m < mg; m++) {
        float *ym = yg + m * out_n;
        for (int64_t kd = 0; kd < ks[0]; kd++)
            for (int64_t kh = 0; kh < ks[1]; kh++)
                for (int64_t kw = 0; kw < ks[2]; kw++) {
                    int64_t iw = q0 % is[2], ih = q0 / is[2] % is[1], id = q0 / is[2] / is[1];
                    for (int64_t i = 0; i < t; i++) {
                        int64_t od = id * p->stride[0] - p->pad_begin[0] + kd * p->dilation[0];
                        int64_t oh = ih * p->stride[1] - p->pad_begin[1] + kh * p->dilation[1];
                        int64_t ow = iw * p->stride[2] - p->pad_begin[2] + kw * p->dilation[2];
                        if (od >= 0 && od < os[0] && oh >= 0 && oh < os[1] && ow >= 0 &&
                            ow < os[2])
                            ym[(od * os[1] + oh) * os[2] + ow] += col[i];
                        if (++iw == is[2]) {
                            iw = 0;
                            if (++ih == is[1]) {
                                ih = 0;
                                id++;
                            }
                        }
                    }
                    col += t;
                }
    }
}

void fxrt_conv_transpose_f32(const FxrtConvParams *p, const float *x, const float *w,
                             const float *bias, float *y, float *scratch)
{
    int64_t in_n = spatial_numel(p->in_size), out_n = spatial_numel(p->out_size);
    int64_t cg = p->in_channels / p->groups, mg = p->out_channels / p->groups;
    int64_t rows = mg * spatial_numel(p->kernel);
    int64_t tile = transpose_tile(p, in_n);
    for (int64_t i = 0, total = p->batch * p->out_channels * out_n; i < total; i++)
        y[i] = 0.0f;
    for (int64_t n = 0; n < p->batch; n++)
        for (int64_t g = 0; g < p->groups; g++) {
            const float *xg = x + (n * p->in_channels + g * cg) * in_n;
            float *yg = y + (n * p->out_channels + g * mg) * out_n;
            for (int64_t q0 = 0; q0 < in_n; q0 += tile) {
                int64_t t = in_n - q0 < tile ? in_n - q0 : tile;
                /* W_g is [cg, rows]: its transpose times X_g[cg, t]. */
                fxrt_gemm_f32(1, 0, rows, t, cg, 1.0f, w + g * cg * rows, rows, xg + q0, in_n,
                              0.0f, scratch, t);
                col2im_tile(p, scratch, mg, q0, t, yg);
            }
        }
    add_bias(p->batch, p->out_channels, out_n, bias, y);
}

/* --- integer convolution --------------------------------------------------- */

static int32_t load_q8(FxrtDType t, const void *base, int64_t i)
{
    return t == FXRT_DTYPE_UINT8 ? (int32_t)((const uint8_t *)base)[i]
                                 : (int32_t)((const int8_t *)base)[i];
}

void fxrt_conv_integer(const FxrtConvParams *p, FxrtDType x_type, const void *x, int32_t x_zp,
                       FxrtDType w_type, const void *w, const int32_t *w_zp,
                       int64_t w_zp_count, int32_t *y)
{
    const int64_t *is = p->in_size, *os = p->out_size, *ks = p->kernel;
    int64_t in_n = spatial_numel(is), out_n = spatial_numel(os), k_n = spatial_numel(ks);
    int64_t cg = p->in_channels / p->groups, mg = p->out_channels / p->groups;
    for (int64_t n = 0; n < p->batch; n++)
        for (int64_t m = 0; m < p->out_channels; m++) {
            int64_t g = m / mg;
            int32_t wz = w_zp[w_zp_count == 1 ? 0 : m];
            int32_t *yp = y + (n * p->out_channels + m) * out_n;
            for (int64_t od = 0; od < os[0]; od++) {
                int64_t d0, d1;
                fxrt_window_range(od, p->stride[0], p->pad_begin[0], p->dilation[0], is[0],
                                  ks[0], &d0, &d1);
                for (int64_t oh = 0; oh < os[1]; oh++) {
                    int64_t h0, h1;
                    fxrt_window_range(oh, p->stride[1], p->pad_begin[1], p->dilation[1], is[1],
                                      ks[1], &h0, &h1);
                    for (int64_t ow = 0; ow < os[2]; ow++) {
                        int64_t w0, w1;
                        fxrt_window_range(ow, p->stride[2], p->pad_begin[2], p->dilation[2],
                                          is[2], ks[2], &w0, &w1);
                        /* A 32-bit accumulator that wraps, computed unsigned
                         * so that the wrap is defined behaviour. */
                        uint32_t acc = 0;
                        for (int64_t c = 0; c < cg; c++) {
                            int64_t xbase = (n * p->in_channels + g * cg + c) * in_n;
                            int64_t wbase = (m * cg + c) * k_n;
                            for (int64_t kd = d0; kd < d1; kd++) {
                                int64_t id =
                                    od * p->stride[0] - p->pad_begin[0] + kd * p->dilation[0];
                                for (int64_t kh = h0; kh < h1; kh++) {
                                    int64_t ih =
                                        oh * p->stride[1] - p->pad_begin[1] + kh * p->dilation[1];
                                    int64_t xrow = xbase + (id * is[1] + ih) * is[2];
                                    int64_t wrow = wbase + (kd * ks[1] + kh) * ks[2];
                                    int64_t iw0 = ow * p->stride[2] - p->pad_begin[2];
                                    for (int64_t kw = w0; kw < w1; kw++) {
                                        int32_t xv =
                                            load_q8(x_type, x, xrow + iw0 + kw * p->dilation[2]);
                                        int32_t wv = load_q8(w_type, w, wrow + kw);
                                        acc += (uint32_t)((xv - x_zp) * (wv - wz));
                                    }
                                }
                            }
                        }
                        yp[(od * os[1] + oh) * os[2] + ow] = (int32_t)acc;
                    }
                }
            }
        }
}
