/*
 * fxrt_nn_nchwc_depthwise.c - 2-D depthwise convolution in the NCHWc layout
 * (see fxrt_nn.h): X, Y and the residual are [N, CB, H, W, 8], the weights
 * [CB][KH][KW][8].
 *
 * In NCHWc one pixel of a channel block is eight contiguous floats, so a
 * depthwise convolution is purely vertical: each output pixel is the sum over
 * the kernel taps of (8 weights) * (the 8 floats of one input pixel), lane by
 * lane, with no reduction across lanes and no dependence on how narrow the
 * image is.  The work is done one output row of one channel block at a time:
 * the kernel rows that fall inside the input are clipped once per row, the
 * interior columns (whose every kernel column lies inside the input) run in
 * runs of several output pixels that share each weight load, and the few
 * border columns clip their kernel columns one pixel at a time.  The
 * epilogue runs on the finished row while it is in L1.
 */
#include "fxrt.h"

#define BLOCK FXRT_NCHWC_BLOCK

/* Output pixels computed together in the interior of a row: each weight
 * vector is loaded once per run instead of once per pixel. */
enum { DW_RUN = 4 };

/* The shape of one channel-block plane, from FxrtConvParams entries 1 and 2. */
typedef struct DwGeom {
    int64_t ih, iw, oh, ow;
    int64_t kh, kw, sh, sw, dh, dw, pt, pl;
    /* Output columns [col_lo, col_hi) read only input columns inside the
     * row for every kernel column; the others are border columns. */
    int64_t col_lo, col_hi;
} DwGeom;

static void dw_geom(const FxrtConvParams *p, DwGeom *g)
{
    g->ih = p->in_size[1];
    g->iw = p->in_size[2];
    g->oh = p->out_size[1];
    g->ow = p->out_size[2];
    g->kh = p->kernel[1];
    g->kw = p->kernel[2];
    g->sh = p->stride[1];
    g->sw = p->stride[2];
    g->dh = p->dilation[1];
    g->dw = p->dilation[2];
    g->pt = p->pad_begin[1];
    g->pl = p->pad_begin[2];
    /* ow * sw - pl >= 0 and ow * sw - pl + (kw - 1) * dw <= iw - 1. */
    int64_t lo = (g->pl + g->sw - 1) / g->sw;
    int64_t last = g->iw - 1 - (g->kw - 1) * g->dw + g->pl;
    int64_t hi = last < 0 ? 0 : last / g->sw + 1;
    lo = lo > g->ow ? g->ow : lo;
    hi = hi > g->ow ? g->ow : hi < lo ? lo : hi;
    g->col_lo = lo;
    g->col_hi = hi;
}

/* The epilogue of one channel-block plane, seen as a matrix of pixels x 8
 * lanes with row stride 8: the bias is per lane (column), the residual is
 * the plane of Y's shape. */
static FxrtEpilogue dw_plane_epilogue(const FxrtEpilogue *ep, int64_t cb, const float *residual)
{
    FxrtEpilogue e = *ep;
    e.bias = ep->bias ? ep->bias + cb * BLOCK : NULL;
    e.bias_row_stride = 0;
    e.bias_col_stride = 1;
    e.residual = residual;
    e.residual_ld = BLOCK;
    return e;
}

/* acc[l] += the taps [kw0, kw1) of kernel row wrow over the input pixels
 * from xpix on (dw pixels apart). */
static void dw_taps_row(const float *xpix, const float *wrow, int64_t kw0, int64_t kw1,
                        int64_t dw, float *acc)
{
    for (int64_t k = kw0; k < kw1; k++) {
        const float *xv = xpix + k * dw * BLOCK, *wv = wrow + k * BLOCK;
        for (int l = 0; l < BLOCK; l++)
            acc[l] += wv[l] * xv[l];
    }
}

/* Output row `row` of one plane into yrow (ow pixels x 8 lanes). */
static void dw_row_portable(const DwGeom *g, int64_t row, const float *xp, const float *wp,
                            float *yrow)
{
    int64_t h0, h1;
    fxrt_window_range(row, g->sh, g->pt, g->dh, g->ih, g->kh, &h0, &h1);
    int64_t ih0 = row * g->sh - g->pt;
    int64_t col = 0;
    while (col < g->ow) {
        if (col >= g->col_lo && col + DW_RUN <= g->col_hi) {
            float acc[DW_RUN][BLOCK] = {{0.0f}};
            for (int64_t kh = h0; kh < h1; kh++) {
                const float *xrow = xp + ((ih0 + kh * g->dh) * g->iw + col * g->sw - g->pl) * BLOCK;
                const float *wrow = wp + kh * g->kw * BLOCK;
                for (int64_t k = 0; k < g->kw; k++) {
                    const float *wv = wrow + k * BLOCK;
                    for (int j = 0; j < DW_RUN; j++) {
                        const float *xv = xrow + (j * g->sw + k * g->dw) * BLOCK;
                        for (int l = 0; l < BLOCK; l++)
                            acc[j][l] += wv[l] * xv[l];
                    }
                }
            }
            for (int j = 0; j < DW_RUN; j++)
                for (int l = 0; l < BLOCK; l++)
                    yrow[(col + j) * BLOCK + l] = acc[j][l];
            col += DW_RUN;
            continue;
        }
        /* A border column, or the tail of the interior: one pixel. */
        int64_t w0, w1;
        fxrt_window_range(col, g->sw, g->pl, g->dw, g->iw, g->kw, &w0, &w1);
        float acc[BLOCK] = {0.0f};
        for (int64_t kh = h0; kh < h1; kh++)
            dw_taps_row(xp + ((ih0 + kh * g->dh) * g->iw + col * g->sw - g->pl) * BLOCK,
                        wp + kh * g->kw * BLOCK, w0, w1, g->dw, acc);
        for (int l = 0; l < BLOCK; l++)
            yrow[col * BLOCK + l] = acc[l];
        col++;
    }
}

void fxrt_conv_nchwc_depthwise_f32(const FxrtConvParams *p, const float *x,
                                   const float *packed_w, const FxrtEpilogue *ep, float *y)
{
    DwGeom g;
    dw_geom(p, &g);
    int64_t blocks = fxrt_nchwc_blocks(p->out_channels);
    int64_t in_plane = g.ih * g.iw * BLOCK, out_plane = g.oh * g.ow * BLOCK;
    int active = fxrt_epilogue_active(ep);
    for (int64_t n = 0; n < p->batch; n++)
        for (int64_t cb = 0; cb < blocks; cb++) {
            int64_t plane = n * blocks + cb;
            const float *xp = x + plane * in_plane;
            const float *wp = packed_w + cb * g.kh * g.kw * BLOCK;
            float *yp = y + plane * out_plane;
            FxrtEpilogue e = {0};
            if (active)
                e = dw_plane_epilogue(ep, cb, ep->residual ? ep->residual + plane * out_plane
                                                           : NULL);
            for (int64_t row = 0; row < g.oh; row++) {
                float *yrow = yp + row * g.ow * BLOCK;
                dw_row_portable(&g, row, xp, wp, yrow);
                if (active)
                    fxrt_epilogue_apply_f32(&e, row * g.ow, 0, g.ow, BLOCK, yrow, BLOCK);
            }
        }
}
