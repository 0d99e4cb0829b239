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
 * interior columns (whose every kernel column lies inside the input) need no
 * test, and the few border columns clip their kernel columns.  The epilogue
 * runs on each finished row while it is in L1.
 *
 * The portable path takes one pixel at a time with its eight sums in
 * registers (fused multiply-adds where the FPU has them: FXRT_MAC).  On x86-64 host builds (FXRT_USE_CBLAS, GCC or Clang) an
 * AVX2/FMA path is chosen at run time, when the CPU has it and the cap of
 * the convolution tiles (fxrt_nchwc_conv_isa, fxrt_isa.h) allows: one __m256 per
 * pixel, the interior in runs of up to 8 pixels (accumulators) that share
 * each weight load, the taps' offsets constants for 3x3 and 5x5 kernels at
 * stride 1 and 2, and the epilogue applied in registers before the store
 * (tanh and GELU by fxrt_epilogue_apply_f32 on the stored plane).  The
 * border columns of the rows whose kernel rows are all inside the input
 * are done last, in runs down each column, independent sums like a row's.
 * Narrow stride-1 planes of wide kernels are first copied with their
 * padding to the stack, so that all their pixels are interior.
 *
 * In place (fxrt_conv_nchwc_depthwise_inplace_f32, where the memory plan
 * lets Y overwrite X): each input plane is copied to a plane of scratch and
 * read from there.
 */
#include <string.h>

#include "fxrt.h"
#include "fxrt_math.h"

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_DW_AVX2 1
#include "fxrt_isa.h"
#include "fxrt_math_x86.h"
#endif

#define BLOCK FXRT_NCHWC_BLOCK

/* The shape of one channel-block plane, from FxrtConvParams entries 1 and 2. */
/* int in a small build (FXRT_SMALL_KERNELS): a core without 64-bit
 * arithmetic would otherwise spend library calls on the indices. */
#if FXRT_SMALL_KERNELS
typedef int DwIndex;
#else
typedef int64_t DwIndex;
#endif

typedef struct DwGeom {
    DwIndex ih, iw, oh, ow;
    DwIndex kh, kw, sh, sw, dh, dw, pt, pl;
    /* Output columns [col_lo, col_hi) read only input columns inside the
     * row for every kernel column; the others are border columns.  The
     * same for rows: [row_lo, row_hi) read no row outside the input. */
    DwIndex col_lo, col_hi, row_lo, row_hi;
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
    int64_t lo, hi;
    fxrt_window_inner(g->iw, g->ow, g->kw, g->sw, g->dw, g->pl, &lo, &hi);
    g->col_lo = (DwIndex)lo;
    g->col_hi = (DwIndex)hi;
    fxrt_window_inner(g->ih, g->oh, g->kh, g->sh, g->dh, g->pt, &lo, &hi);
    g->row_lo = (DwIndex)lo;
    g->row_hi = (DwIndex)hi;
}

/* The epilogue of one channel-block plane, seen as a matrix of pixels x 8
 * lanes with row stride 8: the bias is per lane (column), the residual is
 * the plane of Y's shape. */
static FxrtEpilogue dw_plane_epilogue(const FxrtEpilogue *ep, DwIndex cb, const float *residual)
{
    FxrtEpilogue e = *ep;
    e.bias = ep->bias ? ep->bias + cb * BLOCK : NULL;
    e.bias_row_stride = 0;
    e.bias_col_stride = 1;
    e.residual = residual;
    e.residual_ld = BLOCK;
    return e;
}

/* One output pixel (8 lanes) into out: kernel rows [h0, h1) and columns
 * [k0, k1), x0 being the input pixel of tap (h0, k0) (the next kernel row's
 * row_step floats on, the next column's dw pixels on).  The eight sums are named scalars, not
 * an array: compilers keep them in registers and vectorize the eight
 * statements into one or two vectors, where an array (GCC) is stored and
 * reloaded at every tap, three times slower. */
static void dw_pixel_portable(const float *x0, const float *wp, DwIndex h0, DwIndex h1,
                              DwIndex row_step, DwIndex kw, DwIndex k0, DwIndex k1, DwIndex dw,
                              float *out)
{
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f;
    for (DwIndex kh = h0; kh < h1; kh++) {
        const float *xr = x0 + (kh - h0) * row_step, *wr = wp + kh * kw * BLOCK;
        for (DwIndex k = k0; k < k1; k++) {
            const float *xv = xr + (k - k0) * dw * BLOCK, *wv = wr + k * BLOCK;
            FXRT_MAC(s0, wv[0], xv[0]);
            FXRT_MAC(s1, wv[1], xv[1]);
            FXRT_MAC(s2, wv[2], xv[2]);
            FXRT_MAC(s3, wv[3], xv[3]);
            FXRT_MAC(s4, wv[4], xv[4]);
            FXRT_MAC(s5, wv[5], xv[5]);
            FXRT_MAC(s6, wv[6], xv[6]);
            FXRT_MAC(s7, wv[7], xv[7]);
        }
    }
    out[0] = s0;
    out[1] = s1;
    out[2] = s2;
    out[3] = s3;
    out[4] = s4;
    out[5] = s5;
    out[6] = s6;
    out[7] = s7;
}

/* Output row `row` of one plane into yrow (ow pixels x 8 lanes), without
 * the epilogue; border columns clip their kernel columns. */
static void dw_row_portable(const DwGeom *g, DwIndex row, const float *xp, const float *wp,
                            float *yrow)
{
    int64_t h0, h1;
    fxrt_window_range(row, g->sh, g->pt, g->dh, g->ih, g->kh, &h0, &h1);
    /* Input row of kernel row h0 (only formed when there is one). */
    DwIndex ih = row * g->sh - g->pt + h0 * g->dh;
    const float *xr = h1 > h0 ? xp + ih * g->iw * BLOCK : xp;
    DwIndex row_step = g->dh * g->iw * BLOCK;
    for (DwIndex col = 0; col < g->ow; col++) {
        int64_t k0 = 0, k1 = g->kw;
        if (col < g->col_lo || col >= g->col_hi)
            fxrt_window_range(col, g->sw, g->pl, g->dw, g->iw, g->kw, &k0, &k1);
        float *out = yrow + col * BLOCK;
        if (k1 > k0)
            dw_pixel_portable(xr + (col * g->sw - g->pl + k0 * g->dw) * BLOCK, wp, h0, h1,
                              row_step, g->kw, k0, k1, g->dw, out);
        else
            for (int l = 0; l < BLOCK; l++)
                out[l] = 0.0f;
    }
}

/* One plane; e is its epilogue (dw_plane_epilogue), applied to each
 * finished row. */
static void dw_plane_portable(const DwGeom *g, const float *xp, const float *wp,
                              const FxrtEpilogue *e, float *yp)
{
    int active = fxrt_epilogue_active(e);
    for (DwIndex row = 0; row < g->oh; row++) {
        float *yrow = yp + row * g->ow * BLOCK;
        dw_row_portable(g, row, xp, wp, yrow);
        if (active)
            fxrt_epilogue_apply_f32(e, row * g->ow, 0, g->ow, BLOCK, yrow, BLOCK);
    }
}

#ifdef FXRT_DW_AVX2
/* The AVX2/FMA path: one __m256 is one pixel of a block.  The row body is
 * inlined into specializations for the common kernel widths and strides, so
 * that the taps' offsets are constants and the run's accumulators stay in
 * registers. */
#define DW_AVX2 __attribute__((target("avx2,fma")))
#define DW_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* Interior pixels per run: 8 accumulators, leaving registers for the
 * weight and the input loads. */
enum { DW_AVX2_RUN = 8 };

/* The part of the epilogue applied in registers before the store: bias,
 * residual and every activation but tanh and GELU, which leave this empty
 * and run fxrt_epilogue_apply_f32 on the stored row instead. */
typedef struct DwVecEpilogue {
    __m256 bias, alpha, beta;
    int32_t activation;
    int residual_before, residual_after;
    int in_registers;
} DwVecEpilogue;

DW_AVX2 static void dw_vec_epilogue(const FxrtEpilogue *e, DwVecEpilogue *ve)
{
    FxrtActivation act = (FxrtActivation)e->activation;
    ve->in_registers = act == FXRT_ACT_NONE || act == FXRT_ACT_RELU || act == FXRT_ACT_CLIP ||
                       act == FXRT_ACT_LEAKY_RELU || act == FXRT_ACT_HARD_SIGMOID ||
                       act == FXRT_ACT_HARD_SWISH || act == FXRT_ACT_SIGMOID ||
                       act == FXRT_ACT_SILU;
    int use = ve->in_registers;
    ve->bias = use && e->bias ? _mm256_loadu_ps(e->bias) : _mm256_setzero_ps();
    ve->alpha = _mm256_set1_ps(act == FXRT_ACT_HARD_SWISH ? 1.0f / 6.0f : e->alpha);
    ve->beta = _mm256_set1_ps(act == FXRT_ACT_HARD_SWISH ? 0.5f : e->beta);
    ve->activation = use ? e->activation : FXRT_ACT_NONE;
    ve->residual_before = use && e->residual && !e->residual_after;
    ve->residual_after = use && e->residual && e->residual_after;
}

/* Where one output row reads: `rows` kernel rows from w0 on (kw taps of 8
 * each), over the input rows from xr on, row_step floats apart. */
typedef struct DwRowTaps {
    const float *xr, *w0;
    int64_t rows, row_step;
} DwRowTaps;

/* Stores the run's pixels, acc[j] (which started at the bias) at y + j *
 * step (BLOCK along a row, a row's floats down a column), with the rest of
 * the epilogue, the residual's pixels at res + j * step; one test per step
 * for the whole run, not per pixel. */
DW_AVX2_INLINE void dw_store_run(__m256 *acc, int run, const DwVecEpilogue *ve,
                                 const float *res, int64_t step, float *y)
{
    __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    if (ve->residual_before)
#pragma GCC unroll 8
        for (int j = 0; j < run; j++)
            acc[j] = _mm256_add_ps(acc[j], _mm256_loadu_ps(res + j * step));
    switch ((FxrtActivation)ve->activation) {
    case FXRT_ACT_RELU:
#pragma GCC unroll 8
        for (int j = 0; j < run; j++)
            acc[j] = _mm256_max_ps(zero, acc[j]);
        break;
    case FXRT_ACT_CLIP:
#pragma GCC unroll 8
        for (int j = 0; j < run; j++)
            acc[j] = _mm256_min_ps(ve->beta, _mm256_max_ps(ve->alpha, acc[j]));
        break;
    case FXRT_ACT_LEAKY_RELU:
#pragma GCC unroll 8
        for (int j = 0; j < run; j++)
            acc[j] = _mm256_blendv_ps(acc[j], _mm256_mul_ps(ve->alpha, acc[j]),
                                      _mm256_cmp_ps(acc[j], zero, _CMP_LT_OQ));
        break;
    case FXRT_ACT_HARD_SIGMOID:
#pragma GCC unroll 8
        for (int j = 0; j < run; j++) {
            __m256 t = _mm256_add_ps(_mm256_mul_ps(ve->alpha, acc[j]), ve->beta);
            acc[j] = _mm256_min_ps(one, _mm256_max_ps(zero, t));
        }
        break;
    case FXRT_ACT_HARD_SWISH:
#pragma GCC unroll 8
        for (int j = 0; j < run; j++) {
            __m256 t = _mm256_add_ps(_mm256_mul_ps(ve->alpha, acc[j]), ve->beta);
            acc[j] = _mm256_mul_ps(acc[j], _mm256_min_ps(one, _mm256_max_ps(zero, t)));
        }
        break;
    case FXRT_ACT_SIGMOID:
#pragma GCC unroll 8
        for (int j = 0; j < run; j++)
            acc[j] = fxrt_sigmoid_avx2(acc[j]);
        break;
    case FXRT_ACT_SILU:
#pragma GCC unroll 8
        for (int j = 0; j < run; j++)
            acc[j] = fxrt_silu_avx2(acc[j]);
        break;
    default: break;
    }
    if (ve->residual_after)
#pragma GCC unroll 8
        for (int j = 0; j < run; j++)
            acc[j] = _mm256_add_ps(acc[j], _mm256_loadu_ps(res + j * step));
#pragma GCC unroll 8
    for (int j = 0; j < run; j++)
        _mm256_storeu_ps(y + j * step, acc[j]);
}

/* Interior pixels col .. col + run - 1 into yrow, with the epilogue, for
 * a kernel width known only at run time: every tap is one weight load and
 * `run` input loads, one FMA each. */
DW_AVX2_INLINE void dw_run_avx2(const DwGeom *g, const DwRowTaps *t, const DwVecEpilogue *ve,
                                const float *res_row, int64_t col, int run, float *yrow)
{
    int64_t kw = g->kw, sw = g->sw, dw = g->dw;
    __m256 acc[DW_AVX2_RUN];
#pragma GCC unroll 8
    for (int j = 0; j < run; j++)
        acc[j] = ve->bias;
    const float *x0 = t->xr + (col * sw - g->pl) * BLOCK;
    for (int64_t r = 0; r < t->rows; r++) {
        const float *xrow = x0 + r * t->row_step, *wrow = t->w0 + r * kw * BLOCK;
        for (int64_t k = 0; k < kw; k++) {
            __m256 wv = _mm256_loadu_ps(wrow + k * BLOCK);
#pragma GCC unroll 8
            for (int j = 0; j < run; j++)
                acc[j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xrow + (j * sw + k * dw) * BLOCK),
                                         acc[j]);
        }
    }
    dw_store_run(acc, run, ve, res_row ? res_row + col * BLOCK : NULL, BLOCK, yrow + col * BLOCK);
}

/* The same for a constant kernel width kw <= DW_FIXED_MAX_KW, stride sw
 * and dilation 1, and, when fixed_rows is not 0, a constant number of
 * kernel rows: the taps unroll completely, the kernel row's weights are
 * held in registers, and an input vector that neighbouring pixels share
 * (stride 1) can be loaded once. */
enum { DW_FIXED_MAX_KW = 5 };

DW_AVX2_INLINE void dw_run_fixed_avx2(const DwGeom *g, const DwRowTaps *t,
                                      const DwVecEpilogue *ve, const float *res_row,
                                      int64_t col, int run, int kw, int sw, int fixed_rows,
                                      float *yrow)
{
    int64_t rows = fixed_rows ? fixed_rows : t->rows;
    __m256 acc[DW_AVX2_RUN], wv[DW_FIXED_MAX_KW];
#pragma GCC unroll 8
    for (int j = 0; j < run; j++)
        acc[j] = ve->bias;
    const float *x0 = t->xr + (col * sw - g->pl) * BLOCK;
#pragma GCC unroll 5
    for (int64_t r = 0; r < rows; r++) {
        const float *xrow = x0 + r * t->row_step, *wrow = t->w0 + r * kw * BLOCK;
#pragma GCC unroll 5
        for (int k = 0; k < kw; k++)
            wv[k] = _mm256_loadu_ps(wrow + k * BLOCK);
#pragma GCC unroll 8
        for (int j = 0; j < run; j++)
#pragma GCC unroll 5
            for (int k = 0; k < kw; k++)
                acc[j] = _mm256_fmadd_ps(wv[k], _mm256_loadu_ps(xrow + (j * sw + k) * BLOCK),
                                         acc[j]);
    }
    dw_store_run(acc, run, ve, res_row ? res_row + col * BLOCK : NULL, BLOCK, yrow + col * BLOCK);
}

/* A border pixel: only the kernel columns that fall inside the input. */
DW_AVX2_INLINE void dw_border_avx2(const DwGeom *g, const DwRowTaps *t, const DwVecEpilogue *ve,
                                   const float *res_row, int64_t col, float *yrow)
{
    int64_t kw = g->kw, sw = g->sw, dw = g->dw;
    int64_t k0, k1;
    fxrt_window_range(col, sw, g->pl, dw, g->iw, kw, &k0, &k1);
    __m256 acc = ve->bias;
    if (k1 > k0) {
        const float *x0 = t->xr + (col * sw - g->pl + k0 * dw) * BLOCK;
        for (int64_t r = 0; r < t->rows; r++)
            for (int64_t k = k0; k < k1; k++)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(t->w0 + (r * kw + k) * BLOCK),
                                      _mm256_loadu_ps(x0 + r * t->row_step + (k - k0) * dw * BLOCK),
                                      acc);
    }
    dw_store_run(&acc, 1, ve, res_row ? res_row + col * BLOCK : NULL, BLOCK, yrow + col * BLOCK);
}

/* The interior of a row from *col on with dw_run_fixed_avx2; fixed_rows
 * as there. */
DW_AVX2_INLINE void dw_runs_fixed_avx2(const DwGeom *g, const DwRowTaps *t,
                                       const DwVecEpilogue *ve, const float *res_row,
                                       int64_t *col, int kw, int sw, int fixed_rows,
                                       float *yrow)
{
    /* Five weights leave room for 7 accumulators only. */
    int long_run = kw > 3 ? 7 : DW_AVX2_RUN;
    int64_t c = *col;
    for (; c + long_run <= g->col_hi; c += long_run)
        dw_run_fixed_avx2(g, t, ve, res_row, c, long_run, kw, sw, fixed_rows, yrow);
    /* The rest as one run: each pixel's taps are a chain of dependent
     * multiply-adds, so runs of 4, 2 and 1 (a 7-wide row's rest) waited on
     * the FMA latency; the cases give each length its own constant. */
    switch (g->col_hi - c) {
    case 7: dw_run_fixed_avx2(g, t, ve, res_row, c, 7, kw, sw, fixed_rows, yrow); break;
    case 6: dw_run_fixed_avx2(g, t, ve, res_row, c, 6, kw, sw, fixed_rows, yrow); break;
    case 5: dw_run_fixed_avx2(g, t, ve, res_row, c, 5, kw, sw, fixed_rows, yrow); break;
    case 4: dw_run_fixed_avx2(g, t, ve, res_row, c, 4, kw, sw, fixed_rows, yrow); break;
    case 3: dw_run_fixed_avx2(g, t, ve, res_row, c, 3, kw, sw, fixed_rows, yrow); break;
    case 2: dw_run_fixed_avx2(g, t, ve, res_row, c, 2, kw, sw, fixed_rows, yrow); break;
    case 1: dw_run_fixed_avx2(g, t, ve, res_row, c, 1, kw, sw, fixed_rows, yrow); break;
    default: break;
    }
    *col = g->col_hi;
}

/* One output row: left border, interior, right border (the borders only
 * when `borders`).  fixed_kw is 0, or the kernel width, a constant in the
 * specializations, which then take the dw_run_fixed_avx2 path with stride
 * fixed_sw (runs of 8 or 6, then one run of the rest); other kernels run
 * dw_run_avx2 (runs of 8, then the rest). */
DW_AVX2_INLINE void dw_row_avx2_body(const DwGeom *g, const DwRowTaps *t,
                                     const DwVecEpilogue *ve, const float *res_row,
                                     int fixed_kw, int fixed_sw, int borders, float *yrow)
{
    int64_t col = 0;
    for (; borders && col < g->col_lo; col++)
        dw_border_avx2(g, t, ve, res_row, col, yrow);
    col = g->col_lo;
    if (fixed_kw && t->rows == fixed_kw)
        dw_runs_fixed_avx2(g, t, ve, res_row, &col, fixed_kw, fixed_sw, fixed_kw, yrow);
    else if (fixed_kw)
        dw_runs_fixed_avx2(g, t, ve, res_row, &col, fixed_kw, fixed_sw, 0, yrow);
    else {
        for (; col + DW_AVX2_RUN <= g->col_hi; col += DW_AVX2_RUN)
            dw_run_avx2(g, t, ve, res_row, col, DW_AVX2_RUN, yrow);
        /* The rest as one run, as in dw_runs_fixed_avx2. */
        switch (g->col_hi - col) {
        case 7: dw_run_avx2(g, t, ve, res_row, col, 7, yrow); break;
        case 6: dw_run_avx2(g, t, ve, res_row, col, 6, yrow); break;
        case 5: dw_run_avx2(g, t, ve, res_row, col, 5, yrow); break;
        case 4: dw_run_avx2(g, t, ve, res_row, col, 4, yrow); break;
        case 3: dw_run_avx2(g, t, ve, res_row, col, 3, yrow); break;
        case 2: dw_run_avx2(g, t, ve, res_row, col, 2, yrow); break;
        case 1: dw_run_avx2(g, t, ve, res_row, col, 1, yrow); break;
        default: break;
        }
        col = g->col_hi;
    }
    for (; borders && col < g->ow; col++)
        dw_border_avx2(g, t, ve, res_row, col, yrow);
}

/* Border column col of output rows row .. row + run - 1, rows whose kernel
 * rows all lie inside the input, over the kernel columns inside it.  Down
 * a column the sums are independent, where the border pixels of one row
 * are a lone chain of multiply-adds each (EfficientNet's 5x5 layer at
 * 28x28, two border pixels a side: 1.27x with the columns in runs). */
DW_AVX2_INLINE void dw_column_run_avx2(const DwGeom *g, const float *xp, const float *wp,
                                       const DwVecEpilogue *ve, const float *res_plane,
                                       int64_t col, int64_t row, int run, float *yp)
{
    int64_t k0, k1;
    fxrt_window_range(col, g->sw, g->pl, g->dw, g->iw, g->kw, &k0, &k1);
    const int64_t x_next = g->sh * g->iw * BLOCK, row_step = g->dh * g->iw * BLOCK;
    __m256 acc[DW_AVX2_RUN];
#pragma GCC unroll 8
    for (int j = 0; j < run; j++)
        acc[j] = ve->bias;
    if (k1 > k0) {
        const float *x0 =
            xp + ((row * g->sh - g->pt) * g->iw + col * g->sw - g->pl + k0 * g->dw) * BLOCK;
        for (int64_t r = 0; r < g->kh; r++)
            for (int64_t k = k0; k < k1; k++) {
                __m256 wv = _mm256_loadu_ps(wp + (r * g->kw + k) * BLOCK);
                const float *xk = x0 + r * row_step + (k - k0) * g->dw * BLOCK;
#pragma GCC unroll 8
                for (int j = 0; j < run; j++)
                    acc[j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xk + j * x_next), acc[j]);
            }
    }
    int64_t at = (row * g->ow + col) * BLOCK;
    dw_store_run(acc, run, ve, res_plane ? res_plane + at : NULL, g->ow * BLOCK, yp + at);
}

/* The border columns of rows [row_lo, row_hi), in runs down each column. */
DW_AVX2 static void dw_border_columns_avx2(const DwGeom *g, const float *xp, const float *wp,
                                           const DwVecEpilogue *ve, const float *res_plane,
                                           float *yp)
{
    for (int64_t col = 0; col < g->ow; col++) {
        if (col == g->col_lo)
            col = g->col_hi;
        if (col >= g->ow)
            break;
        int64_t row = g->row_lo;
        for (; row + DW_AVX2_RUN <= g->row_hi; row += DW_AVX2_RUN)
            dw_column_run_avx2(g, xp, wp, ve, res_plane, col, row, DW_AVX2_RUN, yp);
        switch (g->row_hi - row) {
        case 7: dw_column_run_avx2(g, xp, wp, ve, res_plane, col, row, 7, yp); break;
        case 6: dw_column_run_avx2(g, xp, wp, ve, res_plane, col, row, 6, yp); break;
        case 5: dw_column_run_avx2(g, xp, wp, ve, res_plane, col, row, 5, yp); break;
        case 4: dw_column_run_avx2(g, xp, wp, ve, res_plane, col, row, 4, yp); break;
        case 3: dw_column_run_avx2(g, xp, wp, ve, res_plane, col, row, 3, yp); break;
        case 2: dw_column_run_avx2(g, xp, wp, ve, res_plane, col, row, 2, yp); break;
        case 1: dw_column_run_avx2(g, xp, wp, ve, res_plane, col, row, 1, yp); break;
        default: break;
        }
    }
}

/* The rows of one plane, then the border columns of those whose kernel
 * rows all lie inside the input; fixed_kw and fixed_sw as for
 * dw_row_avx2_body. */
DW_AVX2_INLINE void dw_plane_rows_avx2(const DwGeom *g, const float *xp, const float *wp,
                                       const FxrtEpilogue *e, const DwVecEpilogue *ve,
                                       int fixed_kw, int fixed_sw, float *yp)
{
    for (int64_t row = 0; row < g->oh; row++) {
        int64_t h0, h1;
        fxrt_window_range(row, g->sh, g->pt, g->dh, g->ih, g->kh, &h0, &h1);
        DwRowTaps t;
        t.rows = h1 - h0;
        t.row_step = g->dh * g->iw * BLOCK;
        t.xr = t.rows > 0 ? xp + (row * g->sh - g->pt + h0 * g->dh) * g->iw * BLOCK : xp;
        t.w0 = wp + h0 * g->kw * BLOCK;
        float *yrow = yp + row * g->ow * BLOCK;
        const float *res_row = e->residual ? e->residual + row * g->ow * BLOCK : NULL;
        int borders = row < g->row_lo || row >= g->row_hi;
        dw_row_avx2_body(g, &t, ve, res_row, fixed_kw, fixed_sw, borders, yrow);
    }
    dw_border_columns_avx2(g, xp, wp, ve, e->residual, yp);
}

/* Stride-1 planes of kernels wider than 3 whose rows are narrower than
 * two kernel widths, and whose zero-padded input fits in this many pixels
 * (16 KiB), are first copied, padding included, into a buffer on the
 * stack: then every output pixel is interior, with no border columns and
 * no clipped kernel rows.  Most of such a row is border (EfficientNet's
 * 5x5 and ConvNeXt's 7x7 layers at 7x7: 1.2x and 1.3x with the copy).
 * Elsewhere the copy costs more than the border columns, which run down
 * the columns: 3x3 layers at 25x5 (DS-CNN), 14x14 and 7x7 were 1.1-1.25x
 * faster without it, 5x5 and 7x7 ones at 14x14 1.1-1.2x; at stride 2 it
 * would copy four input pixels per output pixel. */
enum { DW_PADDED_MAX_PIXELS = 512 };

/* The geometry of the padded copy of g's input, as large as the output
 * reads; 0 when g is not a plane to copy (see above). */
static int dw_padded_geom(const DwGeom *g, DwGeom *pg)
{
    *pg = *g;
    pg->ih = (DwIndex)fxrt_window_extent(g->oh, g->sh, g->kh, g->dh);
    pg->iw = (DwIndex)fxrt_window_extent(g->ow, g->sw, g->kw, g->dw);
    pg->pt = pg->pl = 0;
    pg->col_lo = pg->row_lo = 0;
    pg->col_hi = g->ow;
    pg->row_hi = g->oh;
    int reads_padding = g->pt > 0 || g->pl > 0 || pg->ih > g->ih || pg->iw > g->iw;
    return reads_padding && g->sh == 1 && g->sw == 1 && g->kw > 3 && g->ow < 2 * g->kw &&
           pg->ih * pg->iw <= DW_PADDED_MAX_PIXELS;
}

DW_AVX2 static void dw_pad_plane(const DwGeom *g, const DwGeom *pg, const float *xp, float *buf)
{
    /* Locals, not g's fields: the vector stores may alias anything, so
     * fields would be read again after every store. */
    const int64_t ih = g->ih, iw = g->iw, pt = g->pt, pl = g->pl, rows = pg->ih, cols = pg->iw;
    const int64_t c0 = pl < cols ? pl : cols, c1 = pl + iw < cols ? pl + iw : cols;
    const __m256 zero = _mm256_setzero_ps();
    float *dst = buf;
    for (int64_t r = 0; r < rows; r++, dst += cols * BLOCK) {
        int64_t ir = r - pt;
        /* Columns [lo, hi) of this row come from the input, from its
         * pixel 0 on; one loop for zeros and copy: as three, GCC makes
         * them memset and memcpy calls, which cost more than these rows
         * of a few pixels. */
        int inside = ir >= 0 && ir < ih;
        int64_t lo = inside ? c0 : cols, hi = inside ? c1 : cols;
        const float *src = inside ? xp + ir * iw * BLOCK : xp;
        for (int64_t c = 0; c < cols; c++)
            _mm256_storeu_ps(dst + c * BLOCK,
                             c >= lo && c < hi ? _mm256_loadu_ps(src + (c - lo) * BLOCK) : zero);
    }
}

/* The specialization for g's kernel width and stride, or the kernel for
 * any width. */
DW_AVX2 static void dw_plane_rows(const DwGeom *g, const float *xp, const float *wp,
                                  const FxrtEpilogue *e, const DwVecEpilogue *ve, float *yp)
{
    if (g->kw == 3 && g->dw == 1 && g->sw == 1)
        dw_plane_rows_avx2(g, xp, wp, e, ve, 3, 1, yp);
    else if (g->kw == 3 && g->dw == 1 && g->sw == 2)
        dw_plane_rows_avx2(g, xp, wp, e, ve, 3, 2, yp);
    else if (g->kw == 5 && g->dw == 1 && g->sw == 1)
        dw_plane_rows_avx2(g, xp, wp, e, ve, 5, 1, yp);
    else if (g->kw == 5 && g->dw == 1 && g->sw == 2)
        dw_plane_rows_avx2(g, xp, wp, e, ve, 5, 2, yp);
    else
        dw_plane_rows_avx2(g, xp, wp, e, ve, 0, 0, yp);
}

DW_AVX2 static void dw_plane_avx2(const DwGeom *g, const float *xp, const float *wp,
                                  const FxrtEpilogue *e, float *yp)
{
    float padded[DW_PADDED_MAX_PIXELS * BLOCK];
    DwGeom pg;
    if (dw_padded_geom(g, &pg)) {
        dw_pad_plane(g, &pg, xp, padded);
        g = &pg;
        xp = padded;
    }
    DwVecEpilogue ve;
    dw_vec_epilogue(e, &ve);
    dw_plane_rows(g, xp, wp, e, &ve, yp);
    /* The epilogue that is not done in registers, on the finished plane. */
    if (!ve.in_registers && fxrt_epilogue_active(e))
        fxrt_epilogue_apply_f32(e, 0, 0, g->oh * g->ow, BLOCK, yp, BLOCK);
}
#endif

/* The planes one after the other; with `scratch`, each input plane is
 * copied there first and read from it, so that Y may be X. */
static void depthwise(const FxrtConvParams *p, const float *x, const float *packed_w,
                      const FxrtEpilogue *ep, float *y, float *scratch)
{
    DwGeom g;
    dw_geom(p, &g);
    DwIndex blocks = (DwIndex)fxrt_nchwc_blocks(p->out_channels);
    DwIndex in_plane = g.ih * g.iw * BLOCK, out_plane = g.oh * g.ow * BLOCK;
    int active = fxrt_epilogue_active(ep);
#ifdef FXRT_DW_AVX2
    int isa = fxrt_nchwc_conv_isa();
#endif
    for (DwIndex n = 0; n < (DwIndex)p->batch; n++)
        for (DwIndex cb = 0; cb < blocks; cb++) {
            DwIndex plane = n * blocks + cb;
            const float *xp = x + plane * in_plane;
            const float *wp = packed_w + cb * g.kh * g.kw * BLOCK;
            float *yp = y + plane * out_plane;
            if (scratch) {
                memcpy(scratch, xp, (size_t)in_plane * sizeof *scratch);
                xp = scratch;
            }
            FxrtEpilogue e = {0};
            if (active)
                e = dw_plane_epilogue(ep, cb, ep->residual ? ep->residual + plane * out_plane
                                                           : NULL);
#ifdef FXRT_DW_AVX2
            if (isa >= 1) {
                dw_plane_avx2(&g, xp, wp, &e, yp);
                continue;
            }
#endif
            dw_plane_portable(&g, xp, wp, &e, yp);
        }
}

void fxrt_conv_nchwc_depthwise_f32(const FxrtConvParams *p, const float *x,
                                   const float *packed_w, const FxrtEpilogue *ep, float *y)
{
    depthwise(p, x, packed_w, ep, y, NULL);
}

/* Plane k of Y is written after plane k of X was copied out, and Y's planes
 * are no larger than X's (fxrt_conv_nchwc_inplace_applies), so writing it
 * never reaches an input plane still to be read. */
void fxrt_conv_nchwc_depthwise_inplace_f32(const FxrtConvParams *p, float *xy,
                                           const float *packed_w, const FxrtEpilogue *ep,
                                           float *scratch)
{
    depthwise(p, xy, packed_w, ep, xy, scratch);
}
