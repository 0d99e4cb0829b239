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
#include "fxrt_isa.h"

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_POOL_X86 1
#include <immintrin.h>
#endif

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

/* The mean of `count` taps summed to s, quantized as fxrt_quantize_linear
 * does, into element q of y. */
static void store_mean_q8(FxrtDType t, void *y, int64_t q, float s, int64_t count, float y_scale,
                          int32_t y_zp)
{
    const double lo = t == FXRT_DTYPE_UINT8 ? 0.0 : -128.0;
    const double hi = t == FXRT_DTYPE_UINT8 ? 255.0 : 127.0;
    float mean = count > 0 ? s / (float)count : 0.0f;
    double r = (double)fxrt_round_half_even_f32(mean / y_scale) + (double)y_zp;
    if (!(r == r))
        r = (double)y_zp;
    r = r < lo ? lo : r > hi ? hi : r;
    if (t == FXRT_DTYPE_UINT8)
        ((uint8_t *)y)[q] = (uint8_t)r;
    else
        ((int8_t *)y)[q] = (int8_t)r;
}

/* The widest whole-plane kernel fxrt_qlinear_avgpool may use: 2 AVX-512,
 * 1 AVX2, 0 the scalar loop (fxrt_isa.h). */
static int qavgpool_isa_cap = 2;

void fxrt_qlinear_avgpool_limit_isa(int level) { qavgpool_isa_cap = level; }

#ifdef FXRT_POOL_X86
#define POOL_AVX512_TARGET __attribute__((target("avx512f")))
/* Without "fma": GCC must not contract a multiply and an add into one. */
#define POOL_AVX2_TARGET __attribute__((target("avx2")))
/* A macro: the intrinsics want an immediate even in unoptimized builds. */
#define POOL_NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* The global pool's fast path: the planes' bytes in order
 * (fxrt_pool_window_is_plane), with flat offsets that fit int32. */
static int window_is_plane(const FxrtPoolParams *p)
{
    return fxrt_pool_window_is_plane(p) && spatial_numel(p->in_size) >= 4 &&
           p->planes * spatial_numel(p->in_size) <= INT32_MAX;
}

/* Planes [plane0, plane0 + 16) (`live` of them) summed, one per lane, with
 * the scalar loop's float operations in its order (explicitly rounded, so
 * never contracted into a fused multiply-add): four taps per gather (bytes
 * i to i + 3 of each plane), the last partial four from one more gather
 * that ends at the plane's end. */
POOL_AVX512_TARGET static void plane_sums_avx512(FxrtDType t, const uint8_t *x, int64_t plane0,
                                                 int live, int64_t size, float x_scale,
                                                 int32_t x_zp, float *sums)
{
    __mmask16 lanes = (__mmask16)((1u << live) - 1u);
    __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                                      13, 14, 15),
                                    _mm512_set1_epi32((int32_t)size));
    const uint8_t *base = x + plane0 * size;
    __m512 zx = _mm512_set1_ps((float)x_zp), scale = _mm512_set1_ps(x_scale);
    __m512 s = _mm512_setzero_ps();
    for (int64_t i = 0; i < size; i += 4) {
        int64_t from = i + 4 <= size ? i : size - 4, first = i - from;
        __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), lanes, at,
                                                    base + from, 1);
        for (int64_t b = first; b < 4; b++) {
            /* byte b to the top, then down with zero or sign fill (shift
             * counts in a register: b is not an immediate) */
            __m512i top = _mm512_sll_epi32(words, _mm_cvtsi32_si128((int)(24 - 8 * b)));
            __m512i v = t == FXRT_DTYPE_UINT8 ? _mm512_srli_epi32(top, 24)
                                              : _mm512_srai_epi32(top, 24);
            __m512 d = _mm512_sub_round_ps(_mm512_cvtepi32_ps(v), zx, POOL_NEAREST);
            s = _mm512_add_round_ps(s, _mm512_mul_round_ps(d, scale, POOL_NEAREST), POOL_NEAREST);
        }
    }
    _mm512_storeu_ps(sums, s);
}

/* plane_sums_avx512 on AVX2: 8 planes per vector; the same operations in
 * the same order, each rounded (no FMA in this target). */
POOL_AVX2_TARGET static void plane_sums_avx2(FxrtDType t, const uint8_t *x, int64_t plane0,
                                             int live, int64_t size, float x_scale, int32_t x_zp,
                                             float *sums)
{
    const __m256i lane_index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(live), lane_index);
    __m256i at = _mm256_mullo_epi32(lane_index, _mm256_set1_epi32((int32_t)size));
    const uint8_t *base = x + plane0 * size;
    __m256 zx = _mm256_set1_ps((float)x_zp), scale = _mm256_set1_ps(x_scale);
    __m256 s = _mm256_setzero_ps();
    for (int64_t i = 0; i < size; i += 4) {
        int64_t from = i + 4 <= size ? i : size - 4, first = i - from;
        __m256i words = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(),
                                                    (const int *)(const void *)(base + from), at,
                                                    lanes, 1);
        for (int64_t b = first; b < 4; b++) {
            __m256i top = _mm256_sll_epi32(words, _mm_cvtsi32_si128((int)(24 - 8 * b)));
            __m256i v = t == FXRT_DTYPE_UINT8 ? _mm256_srli_epi32(top, 24)
                                              : _mm256_srai_epi32(top, 24);
            __m256 d = _mm256_sub_ps(_mm256_cvtepi32_ps(v), zx);
            s = _mm256_add_ps(s, _mm256_mul_ps(d, scale));
        }
    }
    _mm256_storeu_ps(sums, s);
}

/* Sums of channels [c0, c0 + 16 groups) (groups up to 4, each its own
 * chain of additions) of an NHWC image of `size` pixels, pixel by pixel:
 * per channel, plane_sums_avx512's operations in its order.  Inlined with
 * a constant `groups` (channel_sums), so that the sums stay in registers. */
__attribute__((target("avx512f"), always_inline)) static inline void
channel_sums_avx512(FxrtDType t, const uint8_t *x, int64_t size, int64_t channels, int64_t c0,
                    const int groups, float x_scale, int32_t x_zp, float *sums)
{
    __m512 zx = _mm512_set1_ps((float)x_zp), scale = _mm512_set1_ps(x_scale);
    __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    for (int64_t i = 0; i < size; i++) {
        const uint8_t *row = x + i * channels + c0;
        for (int g = 0; g < 4; g++) {
            if (g == groups)
                break;
            __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)(row + 16 * g));
            __m512i v = t == FXRT_DTYPE_UINT8 ? _mm512_cvtepu8_epi32(bytes)
                                              : _mm512_cvtepi8_epi32(bytes);
            __m512 d = _mm512_sub_round_ps(_mm512_cvtepi32_ps(v), zx, POOL_NEAREST);
            s[g] = _mm512_add_round_ps(s[g], _mm512_mul_round_ps(d, scale, POOL_NEAREST),
                                       POOL_NEAREST);
        }
    }
    for (int g = 0; g < groups; g++)
        _mm512_storeu_ps(sums + 16 * g, s[g]);
}

/* channel_sums_avx512 on AVX2: 8 channels per vector, no FMA. */
__attribute__((target("avx2"), always_inline)) static inline void
channel_sums_avx2(FxrtDType t, const uint8_t *x, int64_t size, int64_t channels, int64_t c0,
                  const int groups, float x_scale, int32_t x_zp, float *sums)
{
    __m256 zx = _mm256_set1_ps((float)x_zp), scale = _mm256_set1_ps(x_scale);
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int64_t i = 0; i < size; i++) {
        const uint8_t *row = x + i * channels + c0;
        for (int g = 0; g < 4; g++) {
            if (g == groups)
                break;
            __m128i bytes = _mm_loadl_epi64((const __m128i *)(const void *)(row + 8 * g));
            __m256i v = t == FXRT_DTYPE_UINT8 ? _mm256_cvtepu8_epi32(bytes)
                                              : _mm256_cvtepi8_epi32(bytes);
            __m256 d = _mm256_sub_ps(_mm256_cvtepi32_ps(v), zx);
            s[g] = _mm256_add_ps(s[g], _mm256_mul_ps(d, scale));
        }
    }
    for (int g = 0; g < groups; g++)
        _mm256_storeu_ps(sums + 8 * g, s[g]);
}

/* channel_sums_avx512 (level 2) or channel_sums_avx2 (level 1) with groups
 * a constant. */
#define CHANNEL_SUMS(isa, target, g)                                                           \
    target static void channel_sums_##isa##_##g(FxrtDType t, const uint8_t *x, int64_t size,   \
                                                int64_t channels, int64_t c0, float x_scale,   \
                                                int32_t x_zp, float *sums)                     \
    {                                                                                          \
        channel_sums_##isa(t, x, size, channels, c0, g, x_scale, x_zp, sums);                  \
    }
CHANNEL_SUMS(avx512, POOL_AVX512_TARGET, 1)
CHANNEL_SUMS(avx512, POOL_AVX512_TARGET, 2)
CHANNEL_SUMS(avx512, POOL_AVX512_TARGET, 3)
CHANNEL_SUMS(avx512, POOL_AVX512_TARGET, 4)
CHANNEL_SUMS(avx2, POOL_AVX2_TARGET, 1)
CHANNEL_SUMS(avx2, POOL_AVX2_TARGET, 2)
CHANNEL_SUMS(avx2, POOL_AVX2_TARGET, 3)
CHANNEL_SUMS(avx2, POOL_AVX2_TARGET, 4)
#undef CHANNEL_SUMS

typedef void (*ChannelSums)(FxrtDType t, const uint8_t *x, int64_t size, int64_t channels,
                            int64_t c0, float x_scale, int32_t x_zp, float *sums);
/* [level - 1][groups - 1] */
static const ChannelSums channel_sums[2][4] = {
    {channel_sums_avx2_1, channel_sums_avx2_2, channel_sums_avx2_3, channel_sums_avx2_4},
    {channel_sums_avx512_1, channel_sums_avx512_2, channel_sums_avx512_3, channel_sums_avx512_4},
};
#endif

/* QLinearAveragePool without float buffers: each tap dequantized as
 * fxrt_dequantize_linear does ((x - zp) x scale in float), summed in
 * fxrt_avgpool_f32's order, divided by the same count and quantized as
 * fxrt_quantize_linear does, so the bytes equal dequantize -> pool ->
 * quantize while the scratch (4 bytes per input and output element, most
 * of a small model's RAM) is gone.  On host builds with AVX-512 (AVX2), a
 * window that is the whole plane sums 16 (8) planes at once, one per lane,
 * in the same order with the same operations. */
void fxrt_qlinear_avgpool(const FxrtPoolParams *p, FxrtDType t, const void *x, float x_scale,
                          int32_t x_zp, float y_scale, int32_t y_zp, void *y)
{
    const int64_t *is = p->in_size;
    int64_t in_n = spatial_numel(is);
#ifdef FXRT_POOL_X86
    int level = qavgpool_isa_cap >= 2 && __builtin_cpu_supports("avx512f")  ? 2
                : qavgpool_isa_cap >= 1 && __builtin_cpu_supports("avx2") ? 1
                                                                           : 0;
    if (window_is_plane(p) && level > 0) {
        int width = level == 2 ? 16 : 8;
        for (int64_t plane0 = 0; plane0 < p->planes; plane0 += width) {
            int live = p->planes - plane0 < width ? (int)(p->planes - plane0) : width;
            float sums[16];
            if (level == 2)
                plane_sums_avx512(t, (const uint8_t *)x, plane0, live, in_n, x_scale, x_zp, sums);
            else
                plane_sums_avx2(t, (const uint8_t *)x, plane0, live, in_n, x_scale, x_zp, sums);
            for (int j = 0; j < live; j++)
                store_mean_q8(t, y, plane0 + j, sums[j], in_n, y_scale, y_zp);
        }
        return;
    }
#endif
    int64_t q = 0;
    const float zx = (float)x_zp;
    for (int64_t plane = 0; plane < p->planes; plane++) {
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
                            int64_t row = plane * in_n + (id * is[1] + ih) * is[2];
                            for (int64_t kw = win.lo[2]; kw < win.hi[2]; kw++) {
                                int64_t i = row + win.start[2] + kw * p->dilation[2];
                                float v = t == FXRT_DTYPE_UINT8 ? (float)((const uint8_t *)x)[i]
                                                                : (float)((const int8_t *)x)[i];
                                s += (v - zx) * x_scale;
                            }
                        }
                    }
                    store_mean_q8(t, y, q, s, avgpool_count(p, o, &win), y_scale, y_zp);
                }
    }
}

/* Channels in vectors along the pixels, where the NCHW kernel above
 * gathers a byte of each plane: the same operations per channel, in the
 * same order.  Channels past the last whole vector take the scalar loop. */
void fxrt_qlinear_avgpool_whole_nhwc(FxrtDType t, int64_t batch, int64_t size, int64_t channels,
                                     const void *x, float x_scale, int32_t x_zp, float y_scale,
                                     int32_t y_zp, void *y)
{
    const float zx = (float)x_zp;
    for (int64_t n = 0; n < batch; n++) {
        const uint8_t *xn = (const uint8_t *)x + n * size * channels;
        int64_t c = 0;
#ifdef FXRT_POOL_X86
        int level = qavgpool_isa_cap >= 2 && __builtin_cpu_supports("avx512f")  ? 2
                    : qavgpool_isa_cap >= 1 && __builtin_cpu_supports("avx2") ? 1
                                                                               : 0;
        int width = level == 2 ? 16 : 8;
        while (level > 0 && channels - c >= width) {
            int64_t vectors = (channels - c) / width;
            int groups = vectors < 4 ? (int)vectors : 4;
            float sums[64];
            channel_sums[level - 1][groups - 1](t, xn, size, channels, c, x_scale, x_zp, sums);
            for (int j = 0; j < groups * width; j++)
                store_mean_q8(t, y, n * channels + c + j, sums[j], size, y_scale, y_zp);
            c += groups * width;
        }
#endif
        for (; c < channels; c++) {
            float s = 0.0f;
            for (int64_t i = 0; i < size; i++) {
                int64_t at = i * channels + c;
                float v = t == FXRT_DTYPE_UINT8 ? (float)xn[at] : (float)((const int8_t *)xn)[at];
                s += (v - zx) * x_scale;
            }
            store_mean_q8(t, y, n * channels + c, s, size, y_scale, y_zp);
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
/* The same windows over planes of 8-lane pixels: every tap is one vector.
 * The window along each dimension is found once per output index of that
 * dimension, and not at all for the columns whose window lies inside the
 * input, so that an output pixel costs its taps and little else (a window
 * per pixel made GoogLeNet's 3x3 pools a fifth of its time). */

#define LANES FXRT_NCHWC_BLOCK

#if defined(FXRT_USE_CBLAS) && defined(__SSE2__)
#define POOL_SSE2 1
#include <emmintrin.h>
#endif

/* A window along one dimension: taps [lo, hi) from input position start,
 * and its share of AveragePool's divisor. */
typedef struct Span1 {
    int64_t lo, hi, start, count;
} Span1;

static Span1 span_at(const FxrtPoolParams *p, int i, int64_t o)
{
    Span1 s;
    fxrt_window_range(o, p->stride[i], p->pad_begin[i], p->dilation[i], p->in_size[i], p->kernel[i],
                      &s.lo, &s.hi);
    s.start = o * p->stride[i] - p->pad_begin[i];
    s.count = p->count_include_pad
                  ? taps_inside(o, p->stride[i], p->dilation[i], p->kernel[i],
                                p->in_size[i] + p->pad_begin[i] + p->pad_end[i])
                  : s.hi - s.lo;
    return s;
}

/* Where tap row (kd, kh) of a window starts: the pixel at depth
 * d.start + kd x dilation, row h.start + kh x dilation, column iw of the
 * plane at xp. */
static inline __attribute__((always_inline)) const float *
tap_row(const FxrtPoolParams *p, const float *xp, Span1 d, int64_t kd, Span1 h, int64_t kh,
        int64_t iw)
{
    int64_t id = d.start + kd * p->dilation[0], ih = h.start + kh * p->dilation[1];
    return xp + ((id * p->in_size[1] + ih) * p->in_size[2] + iw) * LANES;
}

/* One output pixel: the window's taps (kernel positions d x h x w, input
 * rows and columns as the spans say) reduced by max or sum in registers,
 * then AveragePool's division.  max keeps the accumulator unless a tap is
 * greater, which is what MAXPS does with the tap first, so both paths give
 * the same results, NaN included.  Inlined with a constant take_max, so
 * that each pool gets its own loop without a test per tap. */
static inline __attribute__((always_inline)) void
pool_window(const FxrtPoolParams *p, const float *xp, Span1 d, Span1 h, Span1 w, int take_max,
            float *y)
{
    int64_t col_step = p->dilation[2] * LANES;
    float count = (float)(d.count * h.count * w.count);
#ifdef POOL_SSE2
    __m128 a0 = _mm_set1_ps(take_max ? -FLT_MAX : 0.0f), a1 = a0;
    for (int64_t kd = d.lo; kd < d.hi; kd++) {
        for (int64_t kh = h.lo; kh < h.hi; kh++) {
            const float *v = tap_row(p, xp, d, kd, h, kh, w.start + w.lo * p->dilation[2]);
            for (int64_t kw = w.lo; kw < w.hi; kw++, v += col_step) {
                __m128 v0 = _mm_loadu_ps(v), v1 = _mm_loadu_ps(v + 4);
                a0 = take_max ? _mm_max_ps(v0, a0) : _mm_add_ps(a0, v0);
                a1 = take_max ? _mm_max_ps(v1, a1) : _mm_add_ps(a1, v1);
            }
        }
    }
    if (!take_max) {
        /* count 0 (a window wholly in the padding) gives 0, as below. */
        __m128 divisor = _mm_set1_ps(count);
        a0 = count > 0.0f ? _mm_div_ps(a0, divisor) : _mm_setzero_ps();
        a1 = count > 0.0f ? _mm_div_ps(a1, divisor) : _mm_setzero_ps();
    }
    _mm_storeu_ps(y, a0);
    _mm_storeu_ps(y + 4, a1);
#else
    float acc[LANES];
    for (int l = 0; l < LANES; l++)
        acc[l] = take_max ? -FLT_MAX : 0.0f;
    for (int64_t kd = d.lo; kd < d.hi; kd++) {
        for (int64_t kh = h.lo; kh < h.hi; kh++) {
            const float *v = tap_row(p, xp, d, kd, h, kh, w.start + w.lo * p->dilation[2]);
            for (int64_t kw = w.lo; kw < w.hi; kw++, v += col_step)
                for (int l = 0; l < LANES; l++)
                    acc[l] = take_max ? (v[l] > acc[l] ? v[l] : acc[l]) : acc[l] + v[l];
        }
    }
    for (int l = 0; l < LANES; l++)
        y[l] = take_max ? acc[l] : count > 0.0f ? acc[l] / count : 0.0f;
#endif
}

#ifdef POOL_SSE2
/* Output pixels per run of interior columns: a tap's max or add waits for
 * the previous tap's (4 cycles), so one pixel's window is a chain of its
 * taps; four pixels are eight independent chains (GoogLeNet's 3x3 stride-1
 * pools ran at 4 cycles per tap, one pixel at a time). */
enum { POOL_RUN = 4 };

/* POOL_RUN interior pixels from column ow on: pool_window's sums, the
 * pixels' windows `pixel_step` floats apart in the input. */
static inline __attribute__((always_inline)) void
pool_run(const FxrtPoolParams *p, const float *xp, Span1 d, Span1 h, int64_t ow, int take_max,
         float *y)
{
    int64_t col_step = p->dilation[2] * LANES, pixel_step = p->stride[2] * LANES;
    int64_t iw = ow * p->stride[2] - p->pad_begin[2];
    __m128 a[POOL_RUN][2];
#pragma GCC unroll 4
    for (int j = 0; j < POOL_RUN; j++)
        a[j][0] = a[j][1] = _mm_set1_ps(take_max ? -FLT_MAX : 0.0f);
    for (int64_t kd = d.lo; kd < d.hi; kd++) {
        for (int64_t kh = h.lo; kh < h.hi; kh++) {
            const float *v = tap_row(p, xp, d, kd, h, kh, iw);
            for (int64_t kw = 0; kw < p->kernel[2]; kw++, v += col_step)
#pragma GCC unroll 4
                for (int j = 0; j < POOL_RUN; j++) {
                    __m128 v0 = _mm_loadu_ps(v + j * pixel_step);
                    __m128 v1 = _mm_loadu_ps(v + j * pixel_step + 4);
                    a[j][0] = take_max ? _mm_max_ps(v0, a[j][0]) : _mm_add_ps(a[j][0], v0);
                    a[j][1] = take_max ? _mm_max_ps(v1, a[j][1]) : _mm_add_ps(a[j][1], v1);
                }
        }
    }
    float count = (float)(d.count * h.count * p->kernel[2]);
#pragma GCC unroll 4
    for (int j = 0; j < POOL_RUN; j++) {
        if (!take_max) {
            __m128 divisor = _mm_set1_ps(count);
            a[j][0] = count > 0.0f ? _mm_div_ps(a[j][0], divisor) : _mm_setzero_ps();
            a[j][1] = count > 0.0f ? _mm_div_ps(a[j][1], divisor) : _mm_setzero_ps();
        }
        _mm_storeu_ps(y + j * LANES, a[j][0]);
        _mm_storeu_ps(y + j * LANES + 4, a[j][1]);
    }
}
#endif

#ifdef FXRT_POOL_X86
/* Output pixels per AVX2 run: a pixel's block is one ymm, so eight pixels
 * are eight independent chains in eight registers, and each tap is a load
 * and a max or add.  The SSE2 runs take two of each per tap and move their
 * accumulators between registers as well: GoogLeNet's 3x3 pools, 6-7% of
 * its time, ran at 4-5 cycles per tap.  Calls of both alternating on the
 * same just-written input (100 pairs): 1.35-1.95x on the 3x3 pools of
 * GoogLeNet, ResNet and SqueezeNet (faster in 99-100 pairs), the same on
 * rows of fewer than eight outputs. */
enum { POOL_RUN_AVX2 = 8 };

static int pool_isa_cap = 1;

void fxrt_pool_nchwc_limit_isa(int level) { pool_isa_cap = level; }

/* pool_run with POOL_RUN_AVX2 pixels; the same taps in the same order and
 * the same max with the tap first, so both give the same results. */
__attribute__((target("avx2"), always_inline)) static inline void
pool_run_avx2_body(const FxrtPoolParams *p, const float *xp, Span1 d, Span1 h, int64_t ow,
                   int take_max, float *y)
{
    int64_t col_step = p->dilation[2] * LANES, pixel_step = p->stride[2] * LANES;
    int64_t iw = ow * p->stride[2] - p->pad_begin[2];
    __m256 a[POOL_RUN_AVX2];
#pragma GCC unroll 8
    for (int j = 0; j < POOL_RUN_AVX2; j++)
        a[j] = _mm256_set1_ps(take_max ? -FLT_MAX : 0.0f);
    for (int64_t kd = d.lo; kd < d.hi; kd++) {
        for (int64_t kh = h.lo; kh < h.hi; kh++) {
            const float *v = tap_row(p, xp, d, kd, h, kh, iw);
            for (int64_t kw = 0; kw < p->kernel[2]; kw++, v += col_step)
#pragma GCC unroll 8
                for (int j = 0; j < POOL_RUN_AVX2; j++) {
                    __m256 tap = _mm256_loadu_ps(v + j * pixel_step);
                    a[j] = take_max ? _mm256_max_ps(tap, a[j]) : _mm256_add_ps(a[j], tap);
                }
        }
    }
    float count = (float)(d.count * h.count * p->kernel[2]);
#pragma GCC unroll 8
    for (int j = 0; j < POOL_RUN_AVX2; j++) {
        if (!take_max)
            a[j] = count > 0.0f ? _mm256_div_ps(a[j], _mm256_set1_ps(count))
                                : _mm256_setzero_ps();
        _mm256_storeu_ps(y + j * LANES, a[j]);
    }
}

__attribute__((target("avx2"))) static void pool_run_max_avx2(const FxrtPoolParams *p,
                                                              const float *xp, Span1 d,
                                                              Span1 h, int64_t ow, float *y)
{
    pool_run_avx2_body(p, xp, d, h, ow, 1, y);
}

__attribute__((target("avx2"))) static void pool_run_avg_avx2(const FxrtPoolParams *p,
                                                              const float *xp, Span1 d,
                                                              Span1 h, int64_t ow, float *y)
{
    pool_run_avx2_body(p, xp, d, h, ow, 0, y);
}
#else
void fxrt_pool_nchwc_limit_isa(int level) { (void)level; }
#endif

/* Border columns per side whose windows pool_nchwc keeps. */
enum { BORDER_SPANS = 4 };

/* MaxPool (take_max) or AveragePool over every output pixel. */
static inline __attribute__((always_inline)) void pool_nchwc(const FxrtPoolParams *p,
                                                             const float *x, float *y,
                                                             int take_max)
{
    const int64_t *is = p->in_size, *os = p->out_size;
    int64_t in_n = spatial_numel(is);
    /* Columns [inner0, inner1) have their whole window inside the input. */
    int64_t reach = (p->kernel[2] - 1) * p->dilation[2];
    int64_t inner0 = (p->pad_begin[2] + p->stride[2] - 1) / p->stride[2], inner1 = inner0;
    while (inner1 < os[2] && inner1 * p->stride[2] - p->pad_begin[2] + reach < is[2])
        inner1++;
    Span1 inner = {0, p->kernel[2], 0, p->kernel[2]};
    /* The border columns' windows, the same in every row, found once when
     * there are few (finding them per pixel took as long as the interior
     * of GoogLeNet's 14x14 pools). */
    Span1 border[2 * BORDER_SPANS];
    int64_t left_cols = inner0 < os[2] ? inner0 : os[2];
    int64_t right_cols = inner1 < os[2] ? os[2] - inner1 : 0;
    for (int64_t ow = 0; ow < left_cols && left_cols <= BORDER_SPANS; ow++)
        border[ow] = span_at(p, 2, ow);
    for (int64_t ow = inner1; ow < os[2] && right_cols <= BORDER_SPANS; ow++)
        border[BORDER_SPANS + ow - inner1] = span_at(p, 2, ow);
#ifdef FXRT_POOL_X86
    int avx2 = pool_isa_cap >= 1 && __builtin_cpu_supports("avx2");
#endif
    for (int64_t plane = 0; plane < p->planes; plane++) {
        const float *xp = x + plane * in_n * LANES;
        for (int64_t od = 0; od < os[0]; od++) {
            Span1 d = span_at(p, 0, od);
            for (int64_t oh = 0; oh < os[1]; oh++) {
                Span1 h = span_at(p, 1, oh);
                for (int64_t ow = 0; ow < os[2];) {
                    Span1 w = inner;
#ifdef FXRT_POOL_X86
                    /* The interior in runs, the last one overlapping the
                     * one before rather than leaving single pixels (a
                     * pixel alone cost as much as a run of eight). */
                    if (avx2 && ow == inner0 && inner1 - inner0 >= POOL_RUN_AVX2) {
                        for (int64_t at = inner0; at < inner1; at += POOL_RUN_AVX2) {
                            if (at + POOL_RUN_AVX2 > inner1)
                                at = inner1 - POOL_RUN_AVX2;
                            float *y_at = y + (at - inner0) * LANES;
                            if (take_max)
                                pool_run_max_avx2(p, xp, d, h, at, y_at);
                            else
                                pool_run_avg_avx2(p, xp, d, h, at, y_at);
                        }
                        y += (inner1 - inner0) * LANES;
                        ow = inner1;
                        continue;
                    }
#endif
#ifdef POOL_SSE2
                    if (ow >= inner0 && ow + POOL_RUN <= inner1) {
                        pool_run(p, xp, d, h, ow, take_max, y);
                        ow += POOL_RUN;
                        y += POOL_RUN * LANES;
                        continue;
                    }
#endif
                    if (ow >= inner0 && ow < inner1)
                        w.start = ow * p->stride[2] - p->pad_begin[2];
                    else if (ow < left_cols && left_cols <= BORDER_SPANS)
                        w = border[ow];
                    else if (ow >= inner1 && right_cols <= BORDER_SPANS)
                        w = border[BORDER_SPANS + ow - inner1];
                    else
                        w = span_at(p, 2, ow);
                    pool_window(p, xp, d, h, w, take_max, y);
                    ow++;
                    y += LANES;
                }
            }
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
#if FXRT_SMALL_KERNELS
    /* An int conversion: int64 to float is a library routine on a 32-bit core. */
    const float count = (float)(int)size;
#else
    const float count = (float)size;
#endif
    for (int64_t i = 0; i < planes; i++) {
        const float *xp = x + i * size * LANES;
        float s[LANES] = {0};
        for (int64_t j = 0; j < size; j++)
            for (int l = 0; l < LANES; l++)
                s[l] += xp[j * LANES + l];
        for (int l = 0; l < LANES; l++)
            y[i * LANES + l] = s[l] / count;
    }
}
