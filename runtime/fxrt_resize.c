/*
 * fxrt_resize.c - Resize (and Upsample, which the compiler maps onto it):
 * nearest, linear and cubic resampling of an N-D tensor.
 *
 * Resampling is separable: output coordinate j of an axis is a weighted sum
 * of a few input coordinates of that axis (1 tap nearest, 2 linear, 4
 * cubic), the same for every position of the other axes.  So the work splits
 * in two: fxrt_resize_axis_plan turns the ONNX attributes into one sampling
 * table per axis (input indices, already clamped, and weights), which
 * generated code can compute at compile time and emit as const arrays; the
 * kernels only read tables.  Nearest is a gather and works for any element
 * size.  Linear and cubic make one pass per resampled axis, outermost first
 * (the ONNX reference's order), through scratch buffers; the common 2-D
 * bilinear case over the last two axes skips the scratch and reads its four
 * taps directly.
 *
 * Coordinates follow the ONNX reference implementation exactly, including
 * two details that differ from some runtimes: align_corners and
 * pytorch_half_pixel use the real-valued output width scale * in (not the
 * rounded one), and an axis whose scale is 1 with an unchanged size is left
 * untouched.  tf_crop_and_resize marks output coordinates that map outside
 * the input; they take the extrapolation value.  Nothing here refuses: the
 * caller has validated modes, scales (finite, > 0) and sizes.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fxrt.h"

int fxrt_resize_taps(FxrtResizeMode mode)
{
    switch (mode) {
    case FXRT_RESIZE_NEAREST: return 1;
    case FXRT_RESIZE_LINEAR: return 2;
    case FXRT_RESIZE_CUBIC: return 4;
    }
    return 1;
}

/* Input coordinate of output coordinate j (ONNX coordinate_transformation_mode). */
static double resize_source_coord(const FxrtResizeConfig *cfg, double j, int64_t in, int64_t out,
                                  double scale, double out_width, double roi_start,
                                  double roi_end)
{
    double fin = (double)in;
    switch (cfg->coord) {
    case FXRT_RESIZE_HALF_PIXEL: return (j + 0.5) / scale - 0.5;
    case FXRT_RESIZE_PYTORCH_HALF_PIXEL:
        return out_width == 1.0 ? -0.5 : (j + 0.5) / scale - 0.5;
    case FXRT_RESIZE_ALIGN_CORNERS:
        return out_width == 1.0 ? 0.0 : j * (fin - 1) / (out_width - 1);
    case FXRT_RESIZE_ASYMMETRIC: return j / scale;
    case FXRT_RESIZE_TF_HALF_PIXEL_FOR_NN: return (j + 0.5) / scale;
    case FXRT_RESIZE_TF_CROP_AND_RESIZE: {
        /* roi is float32 in models; both references form these two terms in
         * float32, and nearest rounding at .5 depends on it */
        double extent = (float)((float)roi_end - (float)roi_start);
        double start = (float)((float)roi_start * (float)(in - 1));
        double x = out_width == 1.0 ? extent * (fin - 1) / 2
                                    : j * extent * (fin - 1) / (out_width - 1);
        return x + start;
    }
    case FXRT_RESIZE_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)out / out_width, center = fin / 2;
        return center * (1 - adjustment) + (j + 0.5) / scale - 0.5;
    }
    }
    return j / scale;
}

/* Cubic convolution weights of the taps at floor-1, floor, floor+1, floor+2
 * for a fractional offset r in [0, 1) (Keys' kernel with parameter a). */
static void resize_cubic_weights(double r, double a, double *c)
{
    double s = r + 1, t = 1 - r, u = 2 - r;
    c[0] = ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;
    c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
    c[2] = ((a + 2) * t - (a + 3)) * t * t + 1;
    c[3] = ((a * u - 5 * a) * u + 8 * a) * u - 4 * a;
}

static int64_t clamp_index(int64_t i, int64_t in)
{
    return i < 0 ? 0 : i >= in ? in - 1 : i;
}

int fxrt_resize_axis_plan(const FxrtResizeConfig *cfg, int64_t in, int64_t out, double scale,
                          double roi_start, double roi_end, int64_t *idx, double *w,
                          uint8_t *outside, int *any_outside)
{
    int taps = fxrt_resize_taps(cfg->mode);
    double out_width = scale * (double)in;
    /* With sizes given scale is out/in, and out/in*in may miss out by an ulp. */
    if (fabs(out_width - (double)out) <= 1e-9 * (double)out)
        out_width = (double)out;
    *any_outside = 0;
    int exact_identity = out == in;
    for (int64_t j = 0; j < out; j++) {
        double xo = resize_source_coord(cfg, (double)j, in, out, scale, out_width, roi_start,
                                        roi_end);
        outside[j] = 0;
        if (cfg->coord == FXRT_RESIZE_TF_CROP_AND_RESIZE && (xo < 0 || xo > (double)(in - 1))) {
            outside[j] = 1;
            *any_outside = 1;
            exact_identity = 0;
        }
        /* Beyond a few pixels off the edge every tap clamps (or is excluded)
         * the same way; bounding xo keeps the int64 conversion defined. */
        if (!(xo >= -3.0))
            xo = -3.0;
        if (xo > (double)in + 2)
            xo = (double)in + 2;
        double fl = floor(xo), r = xo - fl;
        int64_t p = (int64_t)fl;
        int64_t *ix = idx + j * taps;
        double *wj = w ? w + j * taps : NULL;
        if (cfg->mode == FXRT_RESIZE_NEAREST) {
            int up = 0;
            if (r > 0) {
                switch (cfg->nearest) {
                case FXRT_RESIZE_ROUND_PREFER_FLOOR: up = r > 0.5; break;
                case FXRT_RESIZE_ROUND_PREFER_CEIL: up = r >= 0.5; break;
                case FXRT_RESIZE_FLOOR: up = 0; break;
                case FXRT_RESIZE_CEIL: up = 1; break;
                }
            }
            ix[0] = clamp_index(p + up, in);
            if (wj)
                wj[0] = 1.0;
            if (ix[0] != j)
                exact_identity = 0;
            continue;
        }
        double c[4];
        int64_t first;
        if (cfg->mode == FXRT_RESIZE_LINEAR) {
            c[0] = 1 - r;
            c[1] = r;
            first = p;
        } else {
            resize_cubic_weights(r, cfg->cubic_a, c);
            first = p - 1;
        }
        if (cfg->mode == FXRT_RESIZE_CUBIC && cfg->exclude_outside) {
            double sum = 0;
            for (int t = 0; t < taps; t++) {
                if (first + t < 0 || first + t >= in)
                    c[t] = 0;
                sum += c[t];
            }
            if (sum != 0)
                for (int t = 0; t < taps; t++)
                    c[t] /= sum;
        }
        int hits = 0, others = 0; /* identity: weight 1 on input j, 0 elsewhere */
        for (int t = 0; t < taps; t++) {
            ix[t] = clamp_index(first + t, in);
            wj[t] = c[t];
            if (c[t] == 1.0 && ix[t] == j)
                hits++;
            else if (c[t] != 0.0)
                others++;
        }
        if (hits != 1 || others != 0)
            exact_identity = 0;
    }
    /* The reference skips an axis whose scale is (close to) 1 and whose size
     * and region are unchanged, whatever the coordinate mode says. */
    int skip = out == in && fabs(scale - 1.0) <= 1e-9 &&
               cfg->coord != FXRT_RESIZE_TF_HALF_PIXEL_FOR_NN &&
               (cfg->coord != FXRT_RESIZE_TF_CROP_AND_RESIZE ||
                (roi_start == 0.0 && fabs(roi_end - 1.0) <= 1e-9));
    if (skip)
        *any_outside = 0;
    return exact_identity || skip;
}

/* ------------------------------------------------------------------------- */
/* Nearest: a gather                                                          */
/* ------------------------------------------------------------------------- */

static int64_t axis_src(const FxrtResizeAxis *a, int64_t j)
{
    return a->taps == 0 ? j : a->idx[j * a->taps];
}

static int axis_outside(const FxrtResizeAxis *a, int64_t j)
{
    return a->taps != 0 && a->outside && a->outside[j];
}

#define FXRT_GATHER_ROW(T)                                                                  \
    do {                                                                                    \
        const T *xs = (const T *)xrow;                                                      \
        T *yd = (T *)yrow;                                                                  \
        T e;                                                                                \
        memcpy(&e, extrapolation, sizeof e);                                                \
        for (int64_t q = 0; q < last->out; q++)                                             \
            yd[q] = row_out || axis_outside(last, q) ? e : xs[axis_src(last, q)];           \
    } while (0)

void fxrt_resize_nearest(size_t elem_size, const void *x, void *y, int rank,
                         const FxrtResizeAxis *axes, const void *extrapolation)
{
    if (rank == 0) {
        memcpy(y, x, elem_size);
        return;
    }
    int64_t istride[FXRT_MAX_RANK], s = 1, rows = 1;
    for (int d = rank - 1; d >= 0; d--) {
        istride[d] = s;
        s *= axes[d].in;
        if (d < rank - 1)
            rows *= axes[d].out;
    }
    const FxrtResizeAxis *last = &axes[rank - 1];
    if (rows == 0 || last->out == 0)
        return;
    int64_t j[FXRT_MAX_RANK] = {0};
    const unsigned char *xb = x;
    unsigned char *yrow = y;
    for (int64_t row = 0; row < rows; row++) {
        int64_t off = 0;
        int row_out = 0;
        for (int d = 0; d < rank - 1; d++) {
            off += axis_src(&axes[d], j[d]) * istride[d];
            row_out |= axis_outside(&axes[d], j[d]);
        }
        const unsigned char *xrow = xb + (size_t)off * elem_size;
        switch (elem_size) {
        case 1: FXRT_GATHER_ROW(uint8_t); break;
        case 2: FXRT_GATHER_ROW(uint16_t); break;
        case 4: FXRT_GATHER_ROW(uint32_t); break;
        default: FXRT_GATHER_ROW(uint64_t); break;
        }
        yrow += (size_t)last->out * elem_size;
        for (int d = rank - 2; d >= 0; d--) { /* next row: odometer over the outer axes */
            if (++j[d] < axes[d].out)
                break;
            j[d] = 0;
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Linear and cubic: separable passes                                         */
/* ------------------------------------------------------------------------- */

/* Elements of the scratch buffers the separable passes need: passes run on
 * the resampled axes in order, every result but the last goes to scratch,
 * alternating between two buffers of the largest intermediate's size. */
static uint64_t resize_scratch_elems(int rank, const FxrtResizeAxis *axes)
{
    uint64_t cur[FXRT_MAX_RANK], biggest = 0;
    int active = 0, done = 0;
    for (int d = 0; d < rank; d++) {
        cur[d] = (uint64_t)axes[d].in;
        active += axes[d].taps > 0;
    }
    for (int d = 0; d < rank; d++) {
        if (axes[d].taps == 0)
            continue;
        cur[d] = (uint64_t)axes[d].out;
        if (++done == active)
            break; /* the last pass writes the output */
        uint64_t n = 1;
        for (int k = 0; k < rank; k++) {
            if (cur[k] && n > UINT64_MAX / cur[k])
                return UINT64_MAX;
            n *= cur[k];
        }
        if (n > biggest)
            biggest = n;
    }
    if (active >= 3)
        return biggest > UINT64_MAX / 2 ? UINT64_MAX : 2 * biggest;
    return active == 2 ? biggest : 0;
}

static int resize_is_nearest(int rank, const FxrtResizeAxis *axes)
{
    for (int d = 0; d < rank; d++)
        if (axes[d].taps > 1)
            return 0;
    return 1;
}

/* Cubic weights go negative and cancel; float32 intermediates between
 * passes would lose digits, so float32 cubic runs in double. */
static int resize_is_cubic(int rank, const FxrtResizeAxis *axes)
{
    for (int d = 0; d < rank; d++)
        if (axes[d].taps == 4)
            return 1;
    return 0;
}

/* Bilinear applies when only the last two axes resample, both linearly. */
static int resize_is_bilinear(int rank, const FxrtResizeAxis *axes)
{
    if (rank < 2)
        return 0;
    for (int d = 0; d < rank - 2; d++)
        if (axes[d].taps != 0)
            return 0;
    int h = axes[rank - 2].taps, w = axes[rank - 1].taps;
    return (h == 2 || h == 0) && (w == 2 || w == 0) && (h || w);
}

static uint64_t numel_in(int rank, const FxrtResizeAxis *axes)
{
    uint64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= (uint64_t)axes[d].in;
    return n;
}

static uint64_t numel_out(int rank, const FxrtResizeAxis *axes)
{
    uint64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= (uint64_t)axes[d].out;
    return n;
}

size_t fxrt_resize_scratch_bytes(FxrtDType t, int rank, const FxrtResizeAxis *axes)
{
    if (resize_is_nearest(rank, axes))
        return 0;
    uint64_t elems = resize_scratch_elems(rank, axes), size;
    if (t == FXRT_DTYPE_FLOAT32 && !resize_is_cubic(rank, axes)) {
        if (resize_is_bilinear(rank, axes))
            return 0;
        size = sizeof(float);
    } else if (t == FXRT_DTYPE_FLOAT64) {
        size = sizeof(double);
    } else { /* integers and float32 cubic: input and output converted to
              * double, then the f64 passes */
        uint64_t io = numel_in(rank, axes) + numel_out(rank, axes);
        if (elems > UINT64_MAX - io)
            return SIZE_MAX;
        elems += io;
        size = sizeof(double);
    }
    if (elems > (uint64_t)SIZE_MAX / size)
        return SIZE_MAX;
    return (size_t)(elems * size);
}

/* T: element type, S: suffix. */
#define FXRT_RESIZE_DEFINE(T, S)                                                            \
    /* x [outer, a->in, inner] -> y [outer, a->out, inner] along one axis. */               \
    static void resize_pass_##S(const T *x, T *y, int64_t outer, int64_t inner,             \
                                const FxrtResizeAxis *a, T extrapolation)                   \
    {                                                                                       \
        int taps = a->taps;                                                                 \
        for (int64_t o = 0; o < outer; o++) {                                               \
            const T *xo = x + o * a->in * inner;                                            \
            for (int64_t j = 0; j < a->out; j++) {                                          \
                T *yr = y + (o * a->out + j) * inner;                                       \
                if (a->outside && a->outside[j]) {                                          \
                    for (int64_t i = 0; i < inner; i++)                                     \
                        yr[i] = extrapolation;                                              \
                    continue;                                                               \
                }                                                                           \
                const int64_t *ix = a->idx + j * taps;                                      \
                const double *wj = a->w + j * taps;                                         \
                if (inner == 1) {                                                           \
                    double acc = 0;                                                         \
                    for (int t = 0; t < taps; t++)                                          \
                        acc += wj[t] * xo[ix[t]];                                           \
                    yr[0] = (T)acc;                                                         \
                    continue;                                                               \
                }                                                                           \
                /* accumulating in double: cubic weights go negative and cancel */          \
                for (int64_t i = 0; i < inner; i++) {                                       \
                    double acc = 0;                                                         \
                    for (int t = 0; t < taps; t++)                                          \
                        acc += wj[t] * xo[ix[t] * inner + i];                               \
                    yr[i] = (T)acc;                                                         \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void resize_separable_##S(const T *x, T *y, int rank, const FxrtResizeAxis *axes, \
                                     T extrapolation, void *scratch)                        \
    {                                                                                       \
        int64_t cur[FXRT_MAX_RANK];                                                         \
        int active = 0, done = 0;                                                           \
        for (int d = 0; d < rank; d++) {                                                    \
            cur[d] = axes[d].in;                                                            \
            active += axes[d].taps > 0;                                                     \
        }                                                                                   \
        if (active == 0) {                                                                  \
            memcpy(y, x, (size_t)numel_in(rank, axes) * sizeof(T));                         \
            return;                                                                         \
        }                                                                                   \
        uint64_t half = active >= 3 ? resize_scratch_elems(rank, axes) / 2 : 0;             \
        T *buf[2] = {(T *)scratch, (T *)scratch + half};                                    \
        const T *src = x;                                                                   \
        for (int d = 0; d < rank; d++) {                                                    \
            if (axes[d].taps == 0)                                                          \
                continue;                                                                   \
            int64_t outer = 1, inner = 1;                                                   \
            for (int k = 0; k < d; k++)                                                     \
                outer *= cur[k];                                                            \
            for (int k = d + 1; k < rank; k++)                                              \
                inner *= cur[k];                                                            \
            T *dst = ++done == active ? y : buf[(done - 1) & 1];                            \
            resize_pass_##S(src, dst, outer, inner, &axes[d], extrapolation);               \
            cur[d] = axes[d].out;                                                           \
            src = dst;                                                                      \
        }                                                                                   \
    }

FXRT_RESIZE_DEFINE(float, f32)
FXRT_RESIZE_DEFINE(double, f64)

/* Rounds half to even and saturates into integer type t (NumPy's round then
 * clip, as the ONNX reference's saturate_cast does). */
static void store_rounded(FxrtDType t, void *y, size_t i, double v)
{
    unsigned bits = 8u * (unsigned)fxrt_dtype_size(t);
    int is_signed = t == FXRT_DTYPE_INT8 || t == FXRT_DTYPE_INT16 || t == FXRT_DTYPE_INT32 ||
                    t == FXRT_DTYPE_INT64;
    double lo = is_signed ? -ldexp(1.0, (int)bits - 1) : 0.0;
    double hi = is_signed ? ldexp(1.0, (int)bits - 1) : ldexp(1.0, (int)bits); /* exclusive */
    v = nearbyint(v);
    if (!(v == v))
        v = 0;
    if (t == FXRT_DTYPE_UINT64) {
        uint64_t u = v <= 0 ? 0 : v >= hi ? UINT64_MAX : (uint64_t)v;
        fxrt_store_i64(t, y, i, (int64_t)u);
        return;
    }
    int64_t iv = v <= lo ? (int64_t)lo : v >= hi ? (int64_t)(hi - 1) : (int64_t)v;
    fxrt_store_i64(t, y, i, iv);
}

/* Converts x to double in scratch, runs the f64 passes, converts back:
 * integers (rounded, saturated) and float32 cubic.  Scratch layout:
 * [x as double][y as double][f64 pass buffers]. */
static void resize_via_f64(FxrtDType t, const void *x, void *y, int rank,
                           const FxrtResizeAxis *axes, double extrapolation, void *scratch)
{
    size_t nin = (size_t)numel_in(rank, axes), nout = (size_t)numel_out(rank, axes);
    double *xd = scratch, *yd = xd + nin;
    for (size_t i = 0; i < nin; i++)
        xd[i] = fxrt_load_f64(t, x, i);
    resize_separable_f64(xd, yd, rank, axes, extrapolation, yd + nout);
    for (size_t i = 0; i < nout; i++) {
        if (t == FXRT_DTYPE_FLOAT32)
            ((float *)y)[i] = (float)yd[i];
        else
            store_rounded(t, y, i, yd[i]);
    }
}

/* The two taps of a linear axis at output j; an identity axis reads j. */
static void linear_taps(const FxrtResizeAxis *a, int64_t j, int64_t *i0, int64_t *i1, float *w0,
                        float *w1)
{
    if (a->taps == 0) {
        *i0 = *i1 = j;
        *w0 = 1.0f;
        *w1 = 0.0f;
        return;
    }
    *i0 = a->idx[2 * j];
    *i1 = a->idx[2 * j + 1];
    *w0 = (float)a->w[2 * j];
    *w1 = (float)a->w[2 * j + 1];
}

void fxrt_resize_bilinear_f32(const float *x, float *y, int64_t planes, const FxrtResizeAxis *h,
                              const FxrtResizeAxis *w, float extrapolation)
{
    for (int64_t p = 0; p < planes; p++) {
        const float *xp = x + p * h->in * w->in;
        for (int64_t oy = 0; oy < h->out; oy++) {
            float *yr = y + (p * h->out + oy) * w->out;
            if (axis_outside(h, oy)) {
                for (int64_t ox = 0; ox < w->out; ox++)
                    yr[ox] = extrapolation;
                continue;
            }
            int64_t y0, y1;
            float wy0, wy1;
            linear_taps(h, oy, &y0, &y1, &wy0, &wy1);
            const float *r0 = xp + y0 * w->in, *r1 = xp + y1 * w->in;
            for (int64_t ox = 0; ox < w->out; ox++) {
                if (axis_outside(w, ox)) {
                    yr[ox] = extrapolation;
                    continue;
                }
                int64_t x0, x1;
                float wx0, wx1;
                linear_taps(w, ox, &x0, &x1, &wx0, &wx1);
                yr[ox] = wy0 * (wx0 * r0[x0] + wx1 * r0[x1]) + wy1 * (wx0 * r1[x0] + wx1 * r1[x1]);
            }
        }
    }
}

void fxrt_resize_f32(const float *x, float *y, int rank, const FxrtResizeAxis *axes,
                     float extrapolation, void *scratch)
{
    if (resize_is_nearest(rank, axes)) {
        fxrt_resize_nearest(sizeof(float), x, y, rank, axes, &extrapolation);
        return;
    }
    if (resize_is_bilinear(rank, axes)) {
        int64_t planes = 1;
        for (int d = 0; d < rank - 2; d++)
            planes *= axes[d].in;
        fxrt_resize_bilinear_f32(x, y, planes, &axes[rank - 2], &axes[rank - 1], extrapolation);
        return;
    }
    if (resize_is_cubic(rank, axes)) {
        resize_via_f64(FXRT_DTYPE_FLOAT32, x, y, rank, axes, extrapolation, scratch);
        return;
    }
    resize_separable_f32(x, y, rank, axes, extrapolation, scratch);
}

void fxrt_resize_f64(const double *x, double *y, int rank, const FxrtResizeAxis *axes,
                     double extrapolation, void *scratch)
{
    if (resize_is_nearest(rank, axes)) {
        fxrt_resize_nearest(sizeof(double), x, y, rank, axes, &extrapolation);
        return;
    }
    resize_separable_f64(x, y, rank, axes, extrapolation, scratch);
}

int fxrt_resize(FxrtDType t, const void *x, void *y, int rank, const FxrtResizeAxis *axes,
                double extrapolation, void *scratch)
{
    size_t es = fxrt_dtype_size(t);
    if (es == 0 || t == FXRT_DTYPE_FLOAT16)
        return 0;
    if (t == FXRT_DTYPE_FLOAT32) {
        fxrt_resize_f32(x, y, rank, axes, (float)extrapolation, scratch);
        return 1;
    }
    if (t == FXRT_DTYPE_FLOAT64) {
        fxrt_resize_f64(x, y, rank, axes, extrapolation, scratch);
        return 1;
    }
    if (t == FXRT_DTYPE_BOOL)
        return 0;
    if (resize_is_nearest(rank, axes)) {
        unsigned char e[8] = {0};
        fxrt_store_f64(t, e, 0, extrapolation);
        fxrt_resize_nearest(es, x, y, rank, axes, e);
        return 1;
    }
    resize_via_f64(t, x, y, rank, axes, extrapolation, scratch);
    return 1;
}
