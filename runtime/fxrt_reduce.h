/*
 * fxrt_reduce.h - reductions (ReduceSum ... ReduceLogSumExp), ArgMax/ArgMin,
 * TopK, CumSum and resampling (Resize, Upsample).  See fxrt.h for the rules.
 *
 * Every kernel sees its tensor through a small view fixed at compile time:
 *
 *  - Reductions over one axis (ArgMax, TopK, CumSum) and reductions whose
 *    axes form one contiguous run view the input as [outer, n, inner]: n is
 *    the extent of the reduced run, outer and inner the products of the axes
 *    before and after it.  The output is [outer, inner] (or [outer, k, inner]).
 *  - Reductions over arbitrary axes go through FxrtReduceView, which merges
 *    adjacent axes that are both kept or both reduced and drops size-1 axes;
 *    when one reduced run remains the contiguous kernel runs.
 *  - Resize precomputes, per axis, a sampling table (which input indices and
 *    weights make each output coordinate, FxrtResizeAxis); the kernels only
 *    read the tables, so generated code can emit them as const arrays.
 *
 * float32 has dedicated kernels; the FxrtDType entry points cover the other
 * types (float64 has its own loops, integers go through int64/uint64
 * accumulators) and return 0 for a type they do not handle.
 */
#ifndef FXRT_REDUCE_H
#define FXRT_REDUCE_H

#include "fxrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* Reductions (fxrt_reduce.c)                                                 */
/* ------------------------------------------------------------------------- */

typedef enum FxrtReduceOp {
    FXRT_REDUCE_SUM,
    FXRT_REDUCE_MEAN,
    FXRT_REDUCE_MAX,
    FXRT_REDUCE_MIN,
    FXRT_REDUCE_PROD,
    FXRT_REDUCE_L1,
    FXRT_REDUCE_L2,
    FXRT_REDUCE_LOG_SUM,
    FXRT_REDUCE_LOG_SUM_EXP,
    FXRT_REDUCE_SUM_SQUARE
} FxrtReduceOp;

/* The input shape with adjacent kept axes merged, adjacent reduced axes
 * merged and size-1 axes dropped.  The output holds the kept axes in order,
 * so its layout is the same with and without keepdims. */
typedef struct FxrtReduceView {
    int rank;                    /* merged rank, 0..FXRT_MAX_RANK */
    int64_t dims[FXRT_MAX_RANK]; /* merged extents */
    uint32_t reduced;            /* bit k set: merged axis k is reduced */
    int contiguous;              /* at most one reduced run: outer/n/inner valid */
    int64_t outer, n, inner;     /* [outer, n, inner] view when contiguous */
    int64_t count;               /* elements reduced into each output */
} FxrtReduceView;

/* axes_mask bit a set: input axis a is reduced.  rank <= FXRT_MAX_RANK. */
void fxrt_reduce_view_init(FxrtReduceView *v, int rank, const int64_t *dims, uint32_t axes_mask);

/* Contiguous reductions: x [outer, n, inner] -> y [outer, inner].  An empty
 * run (n == 0) gives the op's identity (0, 1, -inf, +inf; NaN for Mean). */
void fxrt_reduce_f32(FxrtReduceOp op, const float *x, float *y, int64_t outer, int64_t n,
                     int64_t inner);
void fxrt_reduce_f64(FxrtReduceOp op, const double *x, double *y, int64_t outer, int64_t n,
                     int64_t inner);
/* Any axes (uses the contiguous kernel when the view allows it). */
void fxrt_reduce_nd_f32(FxrtReduceOp op, const float *x, float *y, const FxrtReduceView *v);
void fxrt_reduce_nd_f64(FxrtReduceOp op, const double *x, double *y, const FxrtReduceView *v);
/* Any supported element type: float32, float64, int8..int64, uint8..uint64.
 * Integer Sum/Prod wrap modulo 2^64 and are then narrowed; Mean, L2,
 * LogSum and LogSumExp of integers are computed in double and truncated
 * toward zero (NumPy's astype), saturating.  Returns 0 for other types. */
int fxrt_reduce_nd(FxrtReduceOp op, FxrtDType t, const void *x, void *y,
                   const FxrtReduceView *v);

/* ArgMax / ArgMin along n: x [outer, n, inner] -> y [outer, inner] (int64).
 * Ties give the first index, or the last with select_last.  NaN counts as
 * the extreme value for both (NumPy's rule).  n must be > 0. */
void fxrt_argmax_f32(const float *x, int64_t *y, int64_t outer, int64_t n, int64_t inner,
                     int select_last);
void fxrt_argmin_f32(const float *x, int64_t *y, int64_t outer, int64_t n, int64_t inner,
                     int select_last);
int fxrt_arg_reduce(FxrtDType t, int is_min, const void *x, int64_t *y, int64_t outer,
                    int64_t n, int64_t inner, int select_last);

/* ------------------------------------------------------------------------- */
/* TopK and CumSum (fxrt_reduce_scan.c)                                       */
/* ------------------------------------------------------------------------- */

/* TopK along n: x [outer, n, inner] -> values [outer, k, inner] and indices
 * [outer, k, inner] (int64), 0 <= k <= n.  The k largest (or smallest)
 * elements, always sorted (best first); equal values keep the lower index
 * first; NaN is larger than every number.  scratch holds
 * fxrt_topk_scratch_bytes(k) bytes. */
size_t fxrt_topk_scratch_bytes(int64_t k);
void fxrt_topk_f32(const float *x, float *values, int64_t *indices, int64_t outer, int64_t n,
                   int64_t inner, int64_t k, int largest, void *scratch);
int fxrt_topk(FxrtDType t, const void *x, void *values, int64_t *indices, int64_t outer,
              int64_t n, int64_t inner, int64_t k, int largest, void *scratch);

/* Cumulative sum along n: x, y [outer, n, inner].  exclusive: y[i] is the
 * sum of the elements before i (y[0] = 0); reverse: sums run from the end.
 * Integer sums wrap.  x and y must not overlap. */
void fxrt_cumsum_f32(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
                     int exclusive, int reverse);
int fxrt_cumsum(FxrtDType t, const void *x, void *y, int64_t outer, int64_t n, int64_t inner,
                int exclusive, int reverse);

/* ------------------------------------------------------------------------- */
/* Resampling (fxrt_resize.c)                                                 */
/* ------------------------------------------------------------------------- */

typedef enum FxrtResizeMode {
    FXRT_RESIZE_NEAREST,
    FXRT_RESIZE_LINEAR,
    FXRT_RESIZE_CUBIC
} FxrtResizeMode;

/* ONNX coordinate_transformation_mode: how an output coordinate maps to an
 * input coordinate. */
typedef enum FxrtResizeCoord {
    FXRT_RESIZE_HALF_PIXEL,
    FXRT_RESIZE_PYTORCH_HALF_PIXEL,
    FXRT_RESIZE_ALIGN_CORNERS,
    FXRT_RESIZE_ASYMMETRIC,
    FXRT_RESIZE_TF_HALF_PIXEL_FOR_NN,
    FXRT_RESIZE_TF_CROP_AND_RESIZE,
    FXRT_RESIZE_HALF_PIXEL_SYMMETRIC
} FxrtResizeCoord;

/* ONNX nearest_mode: how a fractional input coordinate picks a pixel. */
typedef enum FxrtResizeNearest {
    FXRT_RESIZE_ROUND_PREFER_FLOOR,
    FXRT_RESIZE_ROUND_PREFER_CEIL,
    FXRT_RESIZE_FLOOR,
    FXRT_RESIZE_CEIL
} FxrtResizeNearest;

/* Sampling parameters of one axis, shared by all axes of a Resize. */
typedef struct FxrtResizeConfig {
    FxrtResizeMode mode;
    FxrtResizeCoord coord;
    FxrtResizeNearest nearest;
    double cubic_a;      /* cubic_coeff_a, -0.75 by default */
    int exclude_outside; /* cubic: weights of taps outside the input are 0 */
} FxrtResizeConfig;

/* The sampling table of one axis.  Output coordinate j reads input indices
 * idx[j*taps .. j*taps+taps-1] (all within [0, in)) with weights w[same]
 * (summing to 1; NULL for nearest).  outside[j] != 0 (tf_crop_and_resize
 * only; NULL when no coordinate falls outside) means the output takes the
 * extrapolation value.  taps == 0 marks an identity axis (out == in, no
 * resampling): idx, w and outside are then unused. */
typedef struct FxrtResizeAxis {
    int64_t in, out;
    int taps;
    const int64_t *idx;     /* [out * taps] */
    const double *w;        /* [out * taps] or NULL */
    const uint8_t *outside; /* [out] or NULL */
} FxrtResizeAxis;

/* Taps per output coordinate: 1 nearest, 2 linear, 4 cubic. */
int fxrt_resize_taps(FxrtResizeMode mode);
/* Fills one axis's table for `out` output coordinates (idx and w hold
 * out * fxrt_resize_taps(mode) entries, outside holds out; w may be NULL for
 * nearest).  scale is the ONNX scale of the axis (out/in when sizes are
 * given); roi_start/roi_end are used by tf_crop_and_resize only (its roi
 * terms are computed in float32, as ONNX Runtime and the ONNX reference do,
 * so that coordinates landing on .5 round alike).  Returns 1
 * when the axis is an identity (the caller then sets taps = 0), 0 otherwise;
 * *any_outside tells whether some outside[j] was set. */
int fxrt_resize_axis_plan(const FxrtResizeConfig *cfg, int64_t in, int64_t out, double scale,
                          double roi_start, double roi_end, int64_t *idx, double *w,
                          uint8_t *outside, int *any_outside);

/* Nearest: a gather, for any element size (1, 2, 4 or 8 bytes); extrapolation
 * points at one element (used where outside[j] is set). */
void fxrt_resize_nearest(size_t elem_size, const void *x, void *y, int rank,
                         const FxrtResizeAxis *axes, const void *extrapolation);
/* Linear or cubic: separable, one pass per non-identity axis (outermost
 * first), each pass writing the next intermediate; float32 cubic runs in
 * double because its weights cancel.  Nearest tables are accepted too (they
 * go to the gather).  scratch holds fxrt_resize_scratch_bytes(t, ...) bytes;
 * it is 0 for nearest, for the bilinear fast path and when at most one
 * float axis resamples linearly. */
size_t fxrt_resize_scratch_bytes(FxrtDType t, int rank, const FxrtResizeAxis *axes);
void fxrt_resize_f32(const float *x, float *y, int rank, const FxrtResizeAxis *axes,
                     float extrapolation, void *scratch);
void fxrt_resize_f64(const double *x, double *y, int rank, const FxrtResizeAxis *axes,
                     double extrapolation, void *scratch);
/* 2-D bilinear fast path: x [planes, h.in, w.in] -> y [planes, h.out, w.out],
 * h and w linear tables (taps 2, or 0 for identity). No scratch. */
void fxrt_resize_bilinear_f32(const float *x, float *y, int64_t planes, const FxrtResizeAxis *h,
                              const FxrtResizeAxis *w, float extrapolation);
/* Any supported element type; integer results are rounded half to even and
 * saturated (ONNX reference behaviour).  Returns 0 for other types. */
int fxrt_resize(FxrtDType t, const void *x, void *y, int rank, const FxrtResizeAxis *axes,
                double extrapolation, void *scratch);

#ifdef __cplusplus
}
#endif

#endif
