/*
 * fxrt_nn_pool.c - windowed and global pools over N*C independent planes.
 *
 * The windowed pools share one loop shape with the depthwise convolution:
 * per output position, the window's taps are clipped to the input once
 * (fxrt_window_range), so the inner loop never tests for padding.  MaxPool
 * exists for float, double and the 8-bit types ONNX allows, all
 * made from one macro so that they cannot drift apart.  Sums accumulate in
 * float; pools are short reductions and float keeps them cheap on cores
 * without a double-precision FPU.
 */
#include <float.h>
#include <math.h>

#include "fxrt.h"

#define SP FXRT_CONV_MAX_SPATIAL

static int64_t spatial_numel(const int64_t *size)
{
    int64_t n = 1;
    for (int i = 0; i < SP; i++)
        n *= size[i];
    return n;
}

/* Clipped tap ranges of one output position (od, oh, ow). */
typedef struct Window {
    int64_t lo[SP], hi[SP];
    int64_t start[SP]; /* input position of tap 0 per dim */
} Window;

static void window_at(const FxrtPoolParams *p, const int64_t *o, Window *w)
{
    for (int i = 0; i < SP; i++) {
        fxrt_window_range(o[i], p->stride[i], p->pad_begin[i], p->dilation[i], p->in_size[i],
                          p->kernel[i], &w->lo[i], &w->hi[i]);
        w->start[i] = o[i] * p->stride[i] - p->pad_begin[i];
    }
}

/* Position (row- or column-major) of input element (id, ih, iw). */
static int64_t pool_position(const FxrtPoolParams *p, int64_t id, int64_t ih, int64_t iw)
{
    const int64_t *is = p->in_size;
    if (p->storage_order == 1)
        return id + is[0] * (ih + is[1] * iw);
    return (id * is[1] + ih) * is[2] + iw;
}

#define DEFINE_MAXPOOL(NAME, T, LOWEST)                                                    \
    void NAME(const FxrtPoolParams *p, const T *x, T *y, int64_t *indices)                 \
    {                                                                                      \
        const int64_t *is = p->in_size;                                                    \
        int64_t in_n = spatial_numel(is), out_n = spatial_numel(p->out_size);              \
        for (int64_t plane = 0; plane < p->planes; plane++) {                              \
            const T *xp = x + plane * in_n;                                                \
            int64_t o[SP], q = plane * out_n;                                              \
            for (o[0] = 0; o[0] < p->out_size[0]; o[0]++)                                  \
                for (o[1] = 0; o[1] < p->out_size[1]; o[1]++)                              \
                    for (o[2] = 0; o[2] < p->out_size[2]; o[2]++, q++) {                   \
                        Window win;                                                        \
                        window_at(p, o, &win);                                             \
                        T best = LOWEST;                                                   \
                        int64_t bi = -1, bd = 0, bh = 0, bw = 0;                           \
                        for (int64_t kd = win.lo[0]; kd < win.hi[0]; kd++) {               \
                            int64_t id = win.start[0] + kd * p->dilation[0];               \
                            for (int64_t kh = win.lo[1]; kh < win.hi[1]; kh++) {           \
                                int64_t ih = win.start[1] + kh * p->dilation[1];           \
                                const T *row = xp + (id * is[1] + ih) * is[2];             \
                                for (int64_t kw = win.lo[2]; kw < win.hi[2]; kw++) {       \
                                    int64_t iw = win.start[2] + kw * p->dilation[2];       \
                                    if (bi < 0 || row[iw] > best) {                        \
                                        best = row[iw];                                    \
                                        bi = 0;                                            \
                                        bd = id;                                           \
                                        bh = ih;                                           \
                                        bw = iw;                                           \
                                    }                                                      \
                                }                                                          \
                            }                                                              \
                        }                                                                  \
                        y[q] = best;                                                       \
                        if (indices)                                                       \
                            indices[q] =                                                   \
                                bi < 0 ? -1 : plane * in_n + pool_position(p, bd, bh, bw); \
                    }                                                                      \
        }                                                                                  \
    }

/* Internal: the macro's definition keeps this declaration's static linkage. */
static void maxpool_general_f32(const FxrtPoolParams *p, const float *x, float *y,
                                int64_t *indices);
DEFINE_MAXPOOL(maxpool_general_f32, float, -FLT_MAX)

/* Whether every window lies inside the input (no padding, no dilation, no
 * ceil-mode overhang): then no tap needs clipping. */
static int windows_inside(const FxrtPoolParams *p)
{
    for (int i = 0; i < SP; i++)
        if (p->pad_begin[i] != 0 || p->dilation[i] != 1 ||
            (p->out_size[i] - 1) * p->stride[i] + p->kernel[i] > p->in_size[i])
            return 0;
    return 1;
}

/* The common CNN case (e.g. 2x2 stride 2 on an unpadded input) without the
 * per-output window computation, which dominated LeNet's pooling time. */
static void maxpool_inside_f32(const FxrtPoolParams *p, const float *x, float *y)
{
    const int64_t *is = p->in_size, *os = p->out_size, *ks = p->kernel, *st = p->stride;
    int64_t in_n = spatial_numel(is), q = 0;
    for (int64_t plane = 0; plane < p->planes; plane++) {
        const float *xp = x + plane * in_n;
        for (int64_t od = 0; od < os[0]; od++)
            for (int64_t oh = 0; oh < os[1]; oh++)
                for (int64_t ow = 0; ow < os[2]; ow++, q++) {
                    const float *base = xp + ((od * st[0]) * is[1] + oh * st[1]) * is[2] + ow * st[2];
                    float best = base[0];
                    for (int64_t kd = 0; kd < ks[0]; kd++)
                        for (int64_t kh = 0; kh < ks[1]; kh++) {
                            const float *row = base + (kd * is[1] + kh) * is[2];
                            for (int64_t kw = 0; kw < ks[2]; kw++)
                                best = row[kw] > best ? row[kw] : best;
                        }
                    y[q] = best;
                }
    }
}

void fxrt_maxpool_f32(const FxrtPoolParams *p, const float *x, float *y, int64_t *indices)
{
    if (!indices && windows_inside(p))
        maxpool_inside_f32(p, x, y);
    else
        maxpool_general_f32(p, x, y, indices);
}
DEFINE_MAXPOOL(fxrt_maxpool_u8, uint8_t, 0)
DEFINE_MAXPOOL(fxrt_maxpool_i8, int8_t, INT8_MIN)
DEFINE_MAXPOOL(fxrt_maxpool_f64, double, -DBL_MAX)

/* Taps of the window inside the padded input along one dim. */
static int64_t taps_inside(int64_t o, int64_t stride, int64_t dilation, int64_t kernel,
                           int64_t padded_len)
{
    int64_t lo, hi;
    /* relative to the padded input, tap 0 sits at o * stride */
    fxrt_window_range(o, stride, 0, dilation, padded_len, kernel, &lo, &hi);
    return hi - lo;
}

/* AveragePool's divisor for output position o with window win: the taps
 * inside the input, or with count_include_pad inside the padded input. */
static int64_t avgpool_count(const FxrtPoolParams *p, const int64_t *o, const Window *win)
{
    int64_t count = 1;
    for (int i = 0; i < SP; i++)
        count *= p->count_include_pad
                     ? taps_inside(o[i], p->stride[i], p->dilation[i], p->kernel[i],
                                   p->in_size[i] + p->pad_begin[i] + p->pad_end[i])
                     : win->hi[i] - win->lo[i];
    return count;
}

void fxrt_avgpool_f32(const FxrtPoolParams *p, const float *x, float *y)
{
    const int64_t *is = p->in_size;
    int64_t in_n = spatial_numel(is);
    int64_t q = 0;
    for (int64_t plane = 0; plane < p->planes; plane++) {
        const float *xp = x + plane * in_n;
        int64_t o[SP];
        for (o[0] = 0; o[0] < p->out_size[0]; o[0]++)
            for (o[1] = 0; o[1] < p->out_size[1]; o[1]++)
                for (o[2] = 0; o[2] < p->out_size[2]; o[2]++, q++) {
                    Window win;
                    window_at(p, o, &win);
                    float s = 0.0f;
                    for (int64_t kd = win.lo[0]; kd < win.hi[0]; kd++) {
                        int64_t id = win.start[0] + kd * p->dilation[0];
                        for (int64_t kh = win.lo[1]; kh < win.hi[1]; kh++) {
                            int64_t ih = win.start[1] + kh * p->dilation[1];
                            const float *row = xp + (id * is[1] + ih) * is[2];
                            for (int64_t kw = win.lo[2]; kw < win.hi[2]; kw++)
                                s += row[win.start[2] + kw * p->dilation[2]];
                        }
                    }
                    int64_t count = avgpool_count(p, o, &win);
                    y[q] = count > 0 ? s / (float)count : 0.0f;
                }
    }
}

void fxrt_lppool_f32(const FxrtPoolParams *p, const float *x, float *y)
{
    const int64_t *is = p->in_size;
    int64_t in_n = spatial_numel(is);
    int64_t q = 0;
    for (int64_t plane = 0; plane < p->planes; plane++) {
        const float *xp = x + plane * in_n;
        int64_t o[SP];
        for (o[0] = 0; o[0] < p->out_size[0]; o[0]++)
            for (o[1] = 0; o[1] < p->out_size[1]; o[1]++)
                for (o[2] = 0; o[2] < p->out_size[2]; o[2]++, q++) {
                    Window win;
                    window_at(p, o, &win);
                    float s = 0.0f;
                    for (int64_t kd = win.lo[0]; kd < win.hi[0]; kd++) {
                        int64_t id = win.start[0] + kd * p->dilation[0];
                        for (int64_t kh = win.lo[1]; kh < win.hi[1]; kh++) {
                            int64_t ih = win.start[1] + kh * p->dilation[1];
                            const float *row = xp + (id * is[1] + ih) * is[2];
                            for (int64_t kw = win.lo[2]; kw < win.hi[2]; kw++) {
                                float v = fabsf(row[win.start[2] + kw * p->dilation[2]]);
                                s += p->p == 2.0f ? v * v : powf(v, p->p);
                            }
                        }
                    }
                    y[q] = p->p == 2.0f ? sqrtf(s) : p->p == 1.0f ? s : powf(s, 1.0f / p->p);
                }
    }
}

void fxrt_global_avgpool_f32(int64_t planes, int64_t size, const float *x, float *y)
{
    for (int64_t i = 0; i < planes; i++) {
        const float *xp = x + i * size;
        float s = 0.0f;
        for (int64_t j = 0; j < size; j++)
            s += xp[j];
        y[i] = s / (float)size;
    }
}

void fxrt_global_maxpool_f32(int64_t planes, int64_t size, const float *x, float *y)
{
    for (int64_t i = 0; i < planes; i++) {
        const float *xp = x + i * size;
        float m = size > 0 ? xp[0] : -FLT_MAX;
        for (int64_t j = 1; j < size; j++)
            m = xp[j] > m ? xp[j] : m;
        y[i] = m;
    }
}

void fxrt_global_lppool_f32(int64_t planes, int64_t size, float p, const float *x, float *y)
{
    for (int64_t i = 0; i < planes; i++) {
        const float *xp = x + i * size;
        float s = 0.0f;
        for (int64_t j = 0; j < size; j++) {
            float v = fabsf(xp[j]);
            s += p == 2.0f ? v * v : powf(v, p);
        }
        y[i] = p == 2.0f ? sqrtf(s) : p == 1.0f ? s : powf(s, 1.0f / p);
    }
}

/* --- NCHWc ------------------------------------------------------------------- */
/* The same windows over planes of 8-lane pixels: every tap is one vector. */

#define LANES FXRT_NCHWC_BLOCK

/* The taps of window win of plane xp reduced into acc[8], by max or sum. */
static void window_reduce_nchwc(const FxrtPoolParams *p, const float *xp, const Window *win,
                                int take_max, float *acc)
{
    const int64_t *is = p->in_size;
    for (int64_t kd = win->lo[0]; kd < win->hi[0]; kd++) {
        int64_t id = win->start[0] + kd * p->dilation[0];
        for (int64_t kh = win->lo[1]; kh < win->hi[1]; kh++) {
            int64_t ih = win->start[1] + kh * p->dilation[1];
            const float *row = xp + (id * is[1] + ih) * is[2] * LANES;
            for (int64_t kw = win->lo[2]; kw < win->hi[2]; kw++) {
                const float *v = row + (win->start[2] + kw * p->dilation[2]) * LANES;
                if (take_max)
                    for (int l = 0; l < LANES; l++)
                        acc[l] = v[l] > acc[l] ? v[l] : acc[l];
                else
                    for (int l = 0; l < LANES; l++)
                        acc[l] += v[l];
            }
        }
    }
}

/* MaxPool (take_max) or AveragePool over every output pixel. */
static void pool_nchwc(const FxrtPoolParams *p, const float *x, float *y, int take_max)
{
    const int64_t *is = p->in_size;
    int64_t in_n = spatial_numel(is), q = 0;
    for (int64_t plane = 0; plane < p->planes; plane++) {
        const float *xp = x + plane * in_n * LANES;
        int64_t o[SP];
        for (o[0] = 0; o[0] < p->out_size[0]; o[0]++)
            for (o[1] = 0; o[1] < p->out_size[1]; o[1]++)
                for (o[2] = 0; o[2] < p->out_size[2]; o[2]++, q++) {
                    Window win;
                    window_at(p, o, &win);
                    float acc[LANES];
                    for (int l = 0; l < LANES; l++)
                        acc[l] = take_max ? -FLT_MAX : 0.0f;
                    window_reduce_nchwc(p, xp, &win, take_max, acc);
                    int64_t count = take_max ? 1 : avgpool_count(p, o, &win);
                    for (int l = 0; l < LANES; l++)
                        y[q * LANES + l] = take_max    ? acc[l]
                                           : count > 0 ? acc[l] / (float)count
                                                       : 0.0f;
                }
    }
}

void fxrt_maxpool_nchwc_f32(const FxrtPoolParams *p, const float *x, float *y)
{
    pool_nchwc(p, x, y, 1);
}

void fxrt_avgpool_nchwc_f32(const FxrtPoolParams *p, const float *x, float *y)
{
    pool_nchwc(p, x, y, 0);
}

void fxrt_global_avgpool_nchwc_f32(int64_t planes, int64_t size, const float *x, float *y)
{
    for (int64_t i = 0; i < planes; i++) {
        const float *xp = x + i * size * LANES;
        float s[LANES] = {0};
        for (int64_t j = 0; j < size; j++)
            for (int l = 0; l < LANES; l++)
                s[l] += xp[j * LANES + l];
        for (int l = 0; l < LANES; l++)
            y[i * LANES + l] = s[l] / (float)size;
    }
}
