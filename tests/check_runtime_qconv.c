/*
 * check_runtime_qconv.c - the packed 8-bit convolutions (fxrt_qconv) against
 * the reference path of QLinearConv and ConvInteger: fxrt_conv_integer for
 * the int32 sums, then the bias and fxrt_requantize's double arithmetic,
 * then the fused clamp.  Integers, so the bytes must be equal, not close;
 * the scales keep |acc + bias| below 2^29, where fxrt_requantize's double
 * product is exact (check_runtime_qgemm covers what lies beyond).
 *
 * Shapes: 1x1 (stride 1 unpadded, the no-im2col path, and strided), 3x3,
 * 5x5, 1x3 and 3x1, strides 1 to 3, symmetric and asymmetric padding,
 * dilation, 1-D, batch 2, images narrower than a vector and wider than a
 * band, odd channel counts (n not a multiple of the 16-column panels, k not
 * of the 4-byte groups); group 1 (on AVX-512 VNNI read from the band
 * without im2col when each k-group is contiguous there: C a multiple of 4,
 * or kernel rows of a multiple of 4 bytes) and depthwise.  Each with uint8 and int8
 * activations and zero points (padding must read x_zp), per-tensor and
 * per-channel scales, a bias, uint8, int8 and int32 outputs, and clamp
 * bounds tighter than the type (a fused Relu); for the NHWC depthwise
 * kernel, channel counts past whole groups of 16 and odd and even tap
 * counts.  Built twice (tests/CMakeLists.txt); the host build runs every
 * case with the kernels capped at AVX-512, AVX2 and portable C
 * (fxrt_qconv_limit_isa).  Every case runs with NCHW and with NHWC
 * activations (x_nhwc, y_nhwc: all four combinations for group 1, both
 * sides NHWC for depthwise), the NHWC tensors made from and compared
 * through the NCHW reference.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"

/* The firmware build's fxrt_qconv is the small path, NCHW only (the
 * qconv-nhwc pass is host-only). */
#if defined(FXRT_SMALL_KERNELS) && FXRT_SMALL_KERNELS
#define SMALL_BUILD 1
#else
#define SMALL_BUILD 0
#endif
#include "runtime/fxrt_isa.h"

static uint32_t rng_state;

static uint32_t rnd_u32(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

static int32_t rnd_range(int32_t lo, int32_t hi) /* inclusive */
{
    return lo + (int32_t)(rnd_u32() % (uint32_t)(hi - lo + 1));
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* One convolution's geometry: 2-D unless h == 1 and kh == 1. */
typedef struct Shape {
    int64_t batch, c, m, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    int depthwise;
} Shape;

static FxrtConvParams params_of(const Shape *s)
{
    FxrtConvParams p;
    memset(&p, 0, sizeof p);
    p.batch = s->batch;
    p.in_channels = s->c;
    p.out_channels = s->depthwise ? s->c : s->m;
    p.groups = s->depthwise ? s->c : 1;
    p.in_size[0] = p.out_size[0] = p.kernel[0] = p.stride[0] = p.dilation[0] = 1;
    p.in_size[1] = s->h;
    p.in_size[2] = s->w;
    p.kernel[1] = s->kh;
    p.kernel[2] = s->kw;
    p.stride[1] = s->sh;
    p.stride[2] = s->sw;
    p.dilation[1] = s->dh;
    p.dilation[2] = s->dw;
    p.pad_begin[1] = s->pt;
    p.pad_begin[2] = s->pl;
    p.out_size[1] = (s->h + s->pt + s->pb - (s->kh - 1) * s->dh - 1) / s->sh + 1;
    p.out_size[2] = (s->w + s->pl + s->pr - (s->kw - 1) * s->dw - 1) / s->sw + 1;
    return p;
}

/* The options of one run. */
typedef struct Quant {
    FxrtDType x_type, y_type;
    int per_channel, with_bias, relu;
    int x_nhwc, y_nhwc;
} Quant;

/* NCHW <-> NHWC of n images of c planes of hw elements of `size` bytes:
 * to_nhwc 1 reads NCHW src and writes NHWC dst, 0 the other way. */
static void relayout(int to_nhwc, const uint8_t *src, uint8_t *dst, int64_t n, int64_t c,
                     int64_t hw, size_t size)
{
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t i = 0; i < hw; i++) {
                int64_t nchw = (b * c + ch) * hw + i, nhwc = (b * hw + i) * c + ch;
                memcpy(dst + (to_nhwc ? nhwc : nchw) * (int64_t)size,
                       src + (to_nhwc ? nchw : nhwc) * (int64_t)size, size);
            }
}

/* Runs one case through fxrt_qconv and the reference and compares. */
/* How many cases also ran in place (some must). */
static int inplace_cases;

static void check_case(const Shape *s, const Quant *o)
{
    FxrtConvParams p = params_of(s);
    ck_assert(fxrt_qconv_applies(&p));
    int64_t m = p.out_channels, cg = s->depthwise ? 1 : s->c;
    int64_t taps = s->kh * s->kw, k = cg * taps;
    int64_t x_n = s->batch * s->c * s->h * s->w, w_n = m * k;
    int64_t out_pixels = p.out_size[1] * p.out_size[2], y_n = s->batch * m * out_pixels;
    uint8_t *x = xmalloc((size_t)x_n);
    int8_t *w = xmalloc((size_t)w_n);
    int32_t *bias = xmalloc((size_t)m * sizeof *bias);
    float *scale = xmalloc((size_t)m * sizeof *scale);
    int32_t *acc = xmalloc((size_t)y_n * sizeof *acc);
    int is_int8 = o->x_type == FXRT_DTYPE_INT8;
    for (int64_t i = 0; i < x_n; i++)
        x[i] = (uint8_t)rnd_range(0, 255);
    for (int64_t i = 0; i < w_n; i++)
        w[i] = (int8_t)rnd_range(-128, 127);
    /* The extremes somewhere in every tensor. */
    x[0] = is_int8 ? 0x80 : 0;
    x[x_n - 1] = is_int8 ? 0x7f : 0xff;
    w[0] = -128;
    w[w_n - 1] = 127;
    FxrtQConv q = {.x_type = o->x_type, .y_type = o->y_type,
                   .x_zp = is_int8 ? rnd_range(-128, 127) : rnd_range(0, 255),
                   .x_nhwc = o->x_nhwc, .y_nhwc = o->y_nhwc};
    int quantized = o->y_type != FXRT_DTYPE_INT32;
    int32_t type_lo = o->y_type == FXRT_DTYPE_UINT8 ? 0 : -128;
    q.y_zp = quantized ? rnd_range(type_lo, type_lo + 255) : 0;
    q.y_min = quantized ? (o->relu ? q.y_zp : type_lo) : INT32_MIN;
    q.y_max = quantized ? type_lo + 255 : INT32_MAX;
    int64_t scale_count = o->per_channel ? m : 1;
    /* Outputs spread over the 8-bit range: the sums have a spread of about
     * sqrt(k) x 128 x 74. */
    for (int64_t j = 0; j < scale_count; j++)
        scale[j] = (float)((0.5 + rnd_range(0, 1000) / 1000.0) * 60.0 /
                           (sqrt((double)k) * 128.0 * 74.0));
    for (int64_t j = 0; j < m; j++)
        bias[j] = rnd_range(-100000, 100000);
    const int32_t *b = quantized && o->with_bias ? bias : NULL;

    int64_t packed_n = fxrt_qconv_packed_bytes(&p);
    void *packed = xmalloc((size_t)packed_n);
    void *pack_scratch = xmalloc((size_t)fxrt_qconv_pack_scratch_bytes(&p));
    ck_assert_int_eq(fxrt_qconv_pack(&p, &q, w, b, quantized ? scale : NULL,
                                     quantized ? scale_count : 0, packed, pack_scratch),
                     0);
    int64_t scratch_n = fxrt_qconv_scratch_bytes(&p, &q);
    uint8_t *scratch = xmalloc((size_t)scratch_n + 1);
    size_t y_size = (size_t)y_n * (quantized ? 1 : 4);
    /* Guard bytes after the output catch a write past its end. */
    uint8_t *y = xmalloc(y_size + 64), *want = xmalloc(y_size + 1);
    memset(y, 0xa5, y_size + 64);
    /* The scratch's last byte too. */
    scratch[scratch_n] = 0x5a;
    uint8_t *x_in = x;
    if (o->x_nhwc) {
        x_in = xmalloc((size_t)x_n);
        relayout(1, x, x_in, s->batch, s->c, s->h * s->w, 1);
    }
    fxrt_qconv(&p, &q, x_in, packed, y, scratch);
    ck_assert_int_eq(scratch[scratch_n], 0x5a);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(y[y_size + i], 0xa5);
    if (x_in != x)
        free(x_in);
    if (o->y_nhwc) { /* back to NCHW for the comparison */
        uint8_t *nchw = xmalloc(y_size);
        relayout(0, y, nchw, s->batch, m, out_pixels, quantized ? 1 : 4);
        memcpy(y, nchw, y_size);
        free(nchw);
    }

    int32_t wzp = 0;
    fxrt_conv_integer(&p, o->x_type, x, q.x_zp, FXRT_DTYPE_INT8, w, &wzp, 1, acc);
    if (quantized) {
        fxrt_requantize(s->batch, m, out_pixels, acc, b, scale, scale_count, q.y_zp, o->y_type,
                        want);
        for (int64_t i = 0; i < y_n; i++) {
            int32_t v = o->y_type == FXRT_DTYPE_UINT8 ? want[i] : (int8_t)want[i];
            v = v < q.y_min ? q.y_min : v;
            want[i] = (uint8_t)v;
        }
    } else {
        memcpy(want, acc, y_size);
    }
    for (size_t i = 0; i < y_size; i++)
        if (y[i] != want[i])
            ck_abort_msg("byte %zu of %zu differs (%d, want %d): c %lld m %lld %lldx%lld k "
                         "%lldx%lld s %lldx%lld d %lldx%lld pads %lld %lld %lld %lld %s, x %s, y "
                         "type %d, nhwc x %d y %d",
                         i, y_size, y[i], want[i], (long long)s->c, (long long)m,
                         (long long)s->h, (long long)s->w, (long long)s->kh, (long long)s->kw,
                         (long long)s->sh, (long long)s->sw, (long long)s->dh, (long long)s->dw,
                         (long long)s->pt, (long long)s->pl, (long long)s->pb, (long long)s->pr,
                         s->depthwise ? "depthwise" : "group 1", is_int8 ? "int8" : "uint8",
                         (int)o->y_type, o->x_nhwc, o->y_nhwc);
    /* The small path (firmware's, NCHW only) gives the same bytes in its
     * own scratch, and in place where it applies. */
    int64_t small_n = fxrt_qconv_small_scratch_bytes(&p, &q);
    size_t y2_size = (size_t)x_n > y_size ? (size_t)x_n : y_size; /* in place: X's too */
    if (o->x_nhwc || o->y_nhwc)
        goto done;
    uint8_t *small_scratch = xmalloc((size_t)small_n + 1), *y2 = xmalloc(y2_size + 64);
    small_scratch[small_n] = 0x5a;
    memset(y2, 0xa5, y2_size + 64);
    fxrt_qconv_small(&p, &q, x, packed, y2, small_scratch);
    ck_assert_int_eq(small_scratch[small_n], 0x5a);
    ck_assert_int_eq(memcmp(y2, y, y_size), 0);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(y2[y_size + i], 0xa5);
    if (fxrt_qconv_inplace_applies(&p, &q)) {
        ck_assert((size_t)x_n >= y_size);
        memcpy(y2, x, (size_t)x_n);
        fxrt_qconv_inplace(&p, &q, y2, packed, small_scratch);
        ck_assert_int_eq(small_scratch[small_n], 0x5a);
        ck_assert_int_eq(memcmp(y2, y, y_size), 0);
        inplace_cases++;
    }
    free(small_scratch);
    free(y2);
done:
    free(x);
    free(w);
    free(bias);
    free(scale);
    free(acc);
    free(packed);
    free(pack_scratch);
    free(scratch);
    free(y);
    free(want);
}

/* Every option on one shape. */
static void check_options(const Shape *s)
{
    const FxrtDType xs[] = {FXRT_DTYPE_UINT8, FXRT_DTYPE_INT8};
    const FxrtDType ys[] = {FXRT_DTYPE_UINT8, FXRT_DTYPE_INT8, FXRT_DTYPE_INT32};
    for (int layout = 0; layout < 4; layout++) {
        int x_nhwc = layout & 1, y_nhwc = layout >> 1;
        FxrtConvParams p = params_of(s);
        if ((s->depthwise && x_nhwc != y_nhwc) || (layout && !fxrt_qconv_nhwc_applies(&p)) ||
            (layout && SMALL_BUILD))
            continue; /* depthwise keeps its layout; no NHWC past 64 taps or on firmware */
        for (int xi = 0; xi < 2; xi++)
            for (int yi = 0; yi < 3; yi++) {
                Quant o = {.x_type = xs[xi], .y_type = ys[yi], .per_channel = (xi + yi) % 2,
                           .with_bias = yi != 1, .relu = xi == 1 && yi == 0,
                           .x_nhwc = x_nhwc, .y_nhwc = y_nhwc};
                check_case(s, &o);
            }
    }
}

/* batch c m h w kh kw sh sw dh dw pt pl pb pr depthwise */
static const Shape group1_shapes[] = {
    {1, 3, 5, 6, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},      /* 1x1: A is the NHWC band */
    {2, 16, 32, 9, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},    /* 1x1, batch 2 */
    {1, 64, 40, 30, 31, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},  /* 1x1, several bands */
    {1, 17, 33, 11, 13, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0},  /* 1x1 stride 2: im2col */
    {1, 8, 16, 7, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0},     /* 1x1 padded */
    {1, 3, 8, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0},    /* 3x3 pad 1, RGB */
    {1, 5, 7, 10, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},     /* 3x3 stride 2 */
    {1, 32, 48, 20, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0},  /* several bands */
    {2, 6, 9, 8, 11, 3, 3, 1, 2, 1, 1, 0, 2, 1, 0, 0},     /* asymmetric */
    {1, 4, 6, 14, 15, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 0},    /* 5x5 */
    {1, 7, 5, 16, 16, 5, 5, 3, 3, 1, 1, 2, 1, 0, 2, 0},    /* 5x5 stride 3 */
    {1, 6, 10, 13, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 0},   /* dilated */
    {1, 5, 4, 9, 10, 3, 3, 1, 1, 3, 1, 1, 0, 3, 2, 0},     /* dilated rows only */
    {1, 8, 12, 13, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 0},   /* dilated, C of 4s: implicit im2col */
    {1, 2, 17, 9, 8, 3, 2, 2, 1, 1, 1, 1, 0, 1, 1, 0},     /* 3x2 of 2 channels: 4-byte rows */
    {1, 3, 20, 9, 10, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1, 0},    /* 1x3 */
    {1, 9, 3, 10, 6, 3, 1, 2, 1, 1, 1, 1, 0, 1, 0, 0},     /* 3x1 */
    {1, 6, 11, 1, 25, 1, 5, 1, 2, 1, 1, 0, 2, 0, 2, 0},    /* 1-D */
    {1, 2, 3, 3, 3, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 0},      /* one output */
    {1, 1, 1, 4, 4, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0},      /* one channel */
    {1, 1, 64, 49, 10, 10, 4, 2, 2, 1, 1, 4, 1, 5, 1, 0},  /* DS-CNN's first layer */
    {1, 64, 64, 25, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},   /* DS-CNN pointwise: in place */
    {1, 12, 9, 5, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},     /* fewer outputs: in place */
};

static const Shape depthwise_shapes[] = {
    {1, 3, 0, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},      /* 3x3 pad 1 */
    {2, 5, 0, 9, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},      /* stride 2, batch 2 */
    {1, 16, 0, 25, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},    /* DS-CNN: narrower than a vector */
    {1, 7, 0, 11, 13, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 1},    /* 5x5 */
    {1, 4, 0, 12, 12, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, 1},    /* 5x5 stride 2 */
    {1, 6, 0, 10, 11, 3, 3, 2, 1, 1, 1, 0, 1, 1, 0, 1},    /* asymmetric */
    {1, 3, 0, 12, 40, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1},    /* unpadded, wide */
    {1, 5, 0, 13, 14, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1},    /* dilated */
    {1, 3, 0, 9, 17, 3, 3, 3, 2, 1, 2, 3, 1, 2, 0, 1},     /* stride 3 rows, dilated cols */
    {1, 4, 0, 1, 30, 1, 5, 1, 2, 1, 1, 0, 2, 0, 2, 1},     /* 1-D */
    {1, 2, 0, 3, 3, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 1},      /* one output */
    {1, 3, 0, 9, 9, 9, 9, 1, 1, 1, 1, 4, 4, 4, 4, 1},      /* 9x9: more taps than SIMD holds */
    {1, 96, 0, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* MobileNet-sized */
    {1, 37, 0, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     /* channels past 2 vectors */
    {1, 64, 0, 25, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},    /* DS-CNN's layer */
    /* NHWC on AVX2: groups of 16 channels, the last one overlapping, and
     * two taps per vpmaddwd, an odd last one paired with itself */
    {1, 24, 0, 11, 10, 5, 5, 2, 2, 1, 1, 2, 2, 2, 1, 1},   /* 5x5 stride 2, 16 + 8 channels */
    {1, 17, 0, 7, 9, 2, 2, 1, 1, 1, 1, 0, 1, 1, 0, 1},     /* 2x2: even taps; 16 + 1 */
    {2, 33, 0, 5, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1},     /* 1x1: one tap; 32 + 1 */
    {1, 20, 0, 9, 8, 3, 2, 1, 2, 2, 1, 1, 0, 2, 1, 1},     /* 3x2 of 6 taps, dilated rows */
    {1, 15, 0, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     /* 15: short of one group */
    /* NHWC on VNNI: column quads of up to four kernel rows, blocks of 64 */
    {1, 70, 0, 10, 9, 7, 4, 2, 1, 1, 2, 3, 2, 3, 3, 1},    /* two row groups; 64 + 6 */
    {1, 130, 0, 6, 6, 4, 4, 1, 1, 1, 1, 2, 1, 1, 2, 1},    /* one full row group; 3 blocks */
    {2, 70, 0, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     /* batch 2 over two blocks */
};

START_TEST(test_group1)
{
    rng_state = 31;
    inplace_cases = 0;
    for (size_t i = 0; i < sizeof group1_shapes / sizeof group1_shapes[0]; i++)
        check_options(&group1_shapes[i]);
    ck_assert_int_gt(inplace_cases, 0);
}
END_TEST

START_TEST(test_depthwise)
{
    rng_state = 32;
    inplace_cases = 0;
    for (size_t i = 0; i < sizeof depthwise_shapes / sizeof depthwise_shapes[0]; i++)
        check_options(&depthwise_shapes[i]);
    ck_assert_int_gt(inplace_cases, 0);
}
END_TEST

/* ResNet-sized layers, one option set each: bands, panels, many k-groups. */
START_TEST(test_large)
{
    rng_state = 33;
    const Shape shapes[] = {
        {1, 64, 64, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0},
        {1, 64, 128, 28, 28, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 0},
        {1, 128, 256, 14, 14, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},
        {1, 3, 24, 49, 49, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int nhwc = 0; nhwc < (SMALL_BUILD ? 1 : 2); nhwc++) {
            Quant o = {.x_type = i % 2 ? FXRT_DTYPE_INT8 : FXRT_DTYPE_UINT8,
                       .y_type = FXRT_DTYPE_UINT8, .per_channel = 1, .with_bias = 1,
                       .x_nhwc = nhwc, .y_nhwc = nhwc};
            check_case(&shapes[i], &o);
        }
}
END_TEST

/* What fxrt_qconv_applies refuses. */
START_TEST(test_applies)
{
    Shape s = {1, 4, 8, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    FxrtConvParams p = params_of(&s);
    ck_assert(fxrt_qconv_applies(&p) && !fxrt_qconv_is_depthwise(&p));
    p.groups = 2; /* grouped */
    ck_assert(!fxrt_qconv_applies(&p));
    p.groups = 4; /* channel multiplier 2 */
    ck_assert(!fxrt_qconv_applies(&p));
    p = params_of(&s);
    p.in_size[0] = p.out_size[0] = 2; /* 3-D */
    ck_assert(!fxrt_qconv_applies(&p));
    s.depthwise = 1;
    p = params_of(&s);
    ck_assert(fxrt_qconv_applies(&p) && fxrt_qconv_is_depthwise(&p));
    /* A scale without a fixed-point pair refuses the packing. */
    FxrtQConv q = {.x_type = FXRT_DTYPE_UINT8, .y_type = FXRT_DTYPE_UINT8, .y_max = 255};
    int8_t w[4 * 9] = {0};
    float scale = 1.5f;
    void *packed = xmalloc((size_t)fxrt_qconv_packed_bytes(&p));
    ck_assert_int_eq(fxrt_qconv_pack(&p, &q, w, NULL, &scale, 1, packed, NULL), -1);
    free(packed);
}
END_TEST

static void use_avx512(void) { fxrt_qconv_limit_isa(2); }
static void use_avx2(void) { fxrt_qconv_limit_isa(1); }
static void use_portable(void) { fxrt_qconv_limit_isa(0); }

static Suite *qconv_suite(void)
{
    Suite *s = suite_create("qconv");
    TCase *applies = tcase_create("applies");
    tcase_add_test(applies, test_applies);
    suite_add_tcase(s, applies);
    const char *names[] = {"avx512", "avx2", "portable"};
    void (*caps[])(void) = {use_avx512, use_avx2, use_portable};
    for (int i = 0; i < 3; i++) {
        TCase *tc = tcase_create(names[i]);
        tcase_set_timeout(tc, 300);
        tcase_add_checked_fixture(tc, caps[i], use_avx512);
        tcase_add_test(tc, test_group1);
        tcase_add_test(tc, test_depthwise);
        tcase_add_test(tc, test_large);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(qconv_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
