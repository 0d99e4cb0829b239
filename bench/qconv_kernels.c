/*
 * qconv_kernels.c - times the packed 8-bit convolution (fxrt_qconv: uint8
 * activations with zero point 128, int8 per-channel weights, int32 bias,
 * uint8 output) with its kernels capped at AVX-512 (VNNI for group 1),
 * AVX2 and portable C, against the float NCHWc convolution
 * (fxrt_conv_nchwc_f32 with bias and relu) of the same layer, on ResNet-,
 * MobileNet- and DS-CNN-like layers, one thread:
 *
 *   cc -std=c99 -O2 -DFXRT_USE_CBLAS -I. -Iruntime runtime/fxrt*.c bench/qconv_kernels.c \
 *      -o /tmp/qconv_kernels $(pkg-config --cflags --libs openblas) -lm
 *   OPENBLAS_NUM_THREADS=1 /tmp/qconv_kernels [NAME-SUBSTRING]
 *
 * For group-1 layers the column "GEMM" times fxrt_qgemm (VNNI) alone on the
 * layer's im2col matrix built beforehand: what the convolution would cost
 * if its input arrived as im2col rows, so the difference to "VNNI" is the
 * price of the NCHW boundary (transposes and im2col in the bands).  Before
 * timing, every path's output is compared with fxrt_conv_integer followed
 * by fxrt_requantize and must be equal.  Each time is the best of many
 * short trials (a few ms each), so that a slow spell of a shared machine is
 * skipped rather than averaged in; GOP/s count a multiply-add as two.
 * Depthwise layers run twice: with NCHW activations (the phase-plane
 * kernels) and, in the rows marked "nhwc", with NHWC ones (x_nhwc, y_nhwc:
 * the channels-in-lanes kernels, the layout between int8 layers).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"
#include "bench/bench_timing.h"

enum { TRIALS = 30 };

static double best_seconds(void (*fn)(void *), void *arg)
{
    return best_seconds_of(TRIALS, fn, arg);
}

typedef struct Layer {
    const char *name;
    int depthwise, nhwc;
    int64_t in_c, out_c, h, w, kernel_h, kernel_w, stride, pad_t, pad_l, pad_b, pad_r;
} Layer;

static const Layer layers[] = {
    {"resnet8 16-16 3x3 @32", 0, 0, 16, 16, 32, 32, 3, 3, 1, 1, 1, 1, 1},
    {"resnet8 32-64 3x3 s2 @16", 0, 0, 32, 64, 16, 16, 3, 3, 2, 1, 1, 1, 1},
    {"resnet8 16-32 1x1 s2 @32", 0, 0, 16, 32, 32, 32, 1, 1, 2, 0, 0, 0, 0},
    {"resnet50 64-64 3x3 @56", 0, 0, 64, 64, 56, 56, 3, 3, 1, 1, 1, 1, 1},
    {"resnet50 64-256 1x1 @56", 0, 0, 64, 256, 56, 56, 1, 1, 1, 0, 0, 0, 0},
    {"resnet18 128-128 3x3 @28", 0, 0, 128, 128, 28, 28, 3, 3, 1, 1, 1, 1, 1},
    {"resnet50 512-512 3x3 @7", 0, 0, 512, 512, 7, 7, 3, 3, 1, 1, 1, 1, 1},
    {"mobilenetv2 16-96 1x1 @112", 0, 0, 16, 96, 112, 112, 1, 1, 1, 0, 0, 0, 0},
    {"mobilenetv2 dw 96 3x3 s2 @112", 1, 0, 96, 96, 112, 112, 3, 3, 2, 0, 0, 1, 1},
    {"mobilenetv2 dw 96 3x3 s2 @112 nhwc", 1, 1, 96, 96, 112, 112, 3, 3, 2, 0, 0, 1, 1},
    {"mobilenetv2 dw 144 3x3 @56", 1, 0, 144, 144, 56, 56, 3, 3, 1, 1, 1, 1, 1},
    {"mobilenetv2 dw 144 3x3 @56 nhwc", 1, 1, 144, 144, 56, 56, 3, 3, 1, 1, 1, 1, 1},
    {"mobilenetv2 dw 960 3x3 @7", 1, 0, 960, 960, 7, 7, 3, 3, 1, 1, 1, 1, 1},
    {"mobilenetv2 dw 960 3x3 @7 nhwc", 1, 1, 960, 960, 7, 7, 3, 3, 1, 1, 1, 1, 1},
    {"resnet8 stem 3-16 3x3 @32", 0, 0, 3, 16, 32, 32, 3, 3, 1, 1, 1, 1, 1},
    {"dscnn stem 1-64 10x4 s2 @49x10", 0, 0, 1, 64, 49, 10, 10, 4, 2, 4, 1, 5, 2},
    {"dscnn dw 64 3x3 @25x5", 1, 0, 64, 64, 25, 5, 3, 3, 1, 1, 1, 1, 1},
    {"dscnn dw 64 3x3 @25x5 nhwc", 1, 1, 64, 64, 25, 5, 3, 3, 1, 1, 1, 1, 1},
    {"dscnn 64-64 1x1 @25x5", 0, 0, 64, 64, 25, 5, 1, 1, 1, 0, 0, 0, 0},
};

typedef struct Run {
    FxrtConvParams p;
    FxrtQConv q;
    uint8_t *x, *y, *scratch, *col;
    void *packed;
    float *xf, *wf, *wf_packed, *yf, *bias_f, *nchwc_scratch;
    FxrtEpilogue ep;
    FxrtQGemm g;
    int64_t m;
} Run;

static void run_qconv(void *arg)
{
    Run *r = arg;
    fxrt_qconv(&r->p, &r->q, r->x, r->packed, r->y, r->scratch);
}

static void run_gemm_alone(void *arg)
{
    Run *r = arg;
    fxrt_qgemm(&r->g, r->m, r->col, r->g.k, r->packed, r->y, r->g.n);
}

static void run_nchwc(void *arg)
{
    Run *r = arg;
    int blocked = r->p.in_channels > 3;
    fxrt_conv_nchwc_f32(&r->p, blocked, r->xf, r->wf_packed, &r->ep, r->yf, r->nchwc_scratch);
}

static void *alloc_or_die(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* The (kh, kw, c)-ordered im2col rows of x (NCHW uint8) that the packed
 * weights expect, padding as zp. */
static void im2col_nhwc(const FxrtConvParams *p, const uint8_t *x, uint8_t zp, uint8_t *col)
{
    int64_t c = p->in_channels, h = p->in_size[1], w = p->in_size[2];
    int64_t k = c * p->kernel[1] * p->kernel[2], i = 0;
    for (int64_t oy = 0; oy < p->out_size[1]; oy++)
        for (int64_t ox = 0; ox < p->out_size[2]; ox++, i++)
            for (int64_t kh = 0; kh < p->kernel[1]; kh++)
                for (int64_t kw = 0; kw < p->kernel[2]; kw++)
                    for (int64_t ch = 0; ch < c; ch++) {
                        int64_t iy = oy * p->stride[1] - p->pad_begin[1] + kh;
                        int64_t ix = ox * p->stride[2] - p->pad_begin[2] + kw;
                        col[i * k + (kh * p->kernel[2] + kw) * c + ch] =
                            iy >= 0 && iy < h && ix >= 0 && ix < w ? x[(ch * h + iy) * w + ix]
                                                                   : zp;
                    }
}

/* The NHWC copy of one image of c planes of hw bytes. */
static void nchw_to_nhwc(const uint8_t *src, uint8_t *dst, int64_t c, int64_t hw)
{
    for (int64_t ch = 0; ch < c; ch++)
        for (int64_t i = 0; i < hw; i++)
            dst[i * c + ch] = src[ch * hw + i];
}

int main(int argc, char **argv)
{
    const char *isa_names[] = {"portable", "AVX2", "AVX-512"};
    printf("%-36s %7s %8s %8s %8s %8s %9s %8s\n", "layer", "MOP", "AVX-512", "AVX2",
           "portable", "GEMM", "f32 NCHWc", "int8/f32");
    for (size_t li = 0; li < sizeof layers / sizeof *layers; li++) {
        const Layer *l = &layers[li];
        if (argc > 1 && !strstr(l->name, argv[1]))
            continue;
        Run r;
        memset(&r, 0, sizeof r);
        FxrtConvParams *p = &r.p;
        p->batch = 1;
        p->in_channels = l->in_c;
        p->out_channels = l->out_c;
        p->groups = l->depthwise ? l->in_c : 1;
        int64_t size[3] = {1, l->h, l->w}, kernel[3] = {1, l->kernel_h, l->kernel_w};
        int64_t pad_b[3] = {0, l->pad_t, l->pad_l}, pad_e[3] = {0, l->pad_b, l->pad_r};
        for (int d = 0; d < 3; d++) {
            p->in_size[d] = size[d];
            p->kernel[d] = kernel[d];
            p->stride[d] = d ? l->stride : 1;
            p->dilation[d] = 1;
            p->pad_begin[d] = pad_b[d];
            p->out_size[d] = (size[d] + pad_b[d] + pad_e[d] - kernel[d]) / p->stride[d] + 1;
        }
        int64_t cg = l->depthwise ? 1 : l->in_c, taps = l->kernel_h * l->kernel_w;
        int64_t in_sp = l->h * l->w, out_sp = p->out_size[1] * p->out_size[2];
        int64_t x_n = l->in_c * in_sp, w_n = l->out_c * cg * taps, y_n = l->out_c * out_sp;
        r.x = alloc_or_die((size_t)x_n);
        int8_t *w = alloc_or_die((size_t)w_n);
        int32_t *bias = alloc_or_die((size_t)l->out_c * sizeof *bias);
        float *scale = alloc_or_die((size_t)l->out_c * sizeof *scale);
        for (int64_t i = 0; i < x_n; i++)
            r.x[i] = (uint8_t)(rand() & 0xff);
        for (int64_t i = 0; i < w_n; i++)
            w[i] = (int8_t)(rand() % 255 - 127);
        for (int64_t j = 0; j < l->out_c; j++) {
            bias[j] = rand() % 20001 - 10000;
            scale[j] = (float)((0.5 + (double)rand() / RAND_MAX) /
                               (80.0 * sqrt((double)(cg * taps))));
        }
        r.q = (FxrtQConv){FXRT_DTYPE_UINT8, 128, FXRT_DTYPE_UINT8, 128, 128, 255, /* relu */
                          l->nhwc, l->nhwc};
        r.packed = alloc_or_die((size_t)fxrt_qconv_packed_bytes(p));
        void *pack_scratch = alloc_or_die((size_t)fxrt_qconv_pack_scratch_bytes(p));
        if (fxrt_qconv_pack(p, &r.q, w, bias, scale, l->out_c, r.packed, pack_scratch) != 0) {
            fprintf(stderr, "%s: scale without a fixed-point pair\n", l->name);
            return 1;
        }
        r.scratch = alloc_or_die((size_t)fxrt_qconv_scratch_bytes(p, &r.q));
        r.y = alloc_or_die((size_t)y_n);
        uint8_t *expected = alloc_or_die((size_t)y_n);
        int32_t *acc = alloc_or_die((size_t)y_n * sizeof *acc);
        int32_t zero = 0;
        fxrt_conv_integer(p, FXRT_DTYPE_UINT8, r.x, 128, FXRT_DTYPE_INT8, w, &zero, 1, acc);
        fxrt_requantize(1, l->out_c, out_sp, acc, bias, scale, l->out_c, 128, FXRT_DTYPE_UINT8,
                        expected);
        for (int64_t i = 0; i < y_n; i++)
            expected[i] = expected[i] < 128 ? 128 : expected[i];
        if (l->nhwc) { /* the reference was NCHW; the run and its check are not */
            uint8_t *nchw = alloc_or_die((size_t)(x_n > y_n ? x_n : y_n));
            memcpy(nchw, r.x, (size_t)x_n);
            nchw_to_nhwc(nchw, r.x, l->in_c, in_sp);
            memcpy(nchw, expected, (size_t)y_n);
            nchw_to_nhwc(nchw, expected, l->out_c, out_sp);
            free(nchw);
        }
        double seconds[3];
        for (int level = 2; level >= 0; level--) {
            fxrt_qconv_limit_isa(level);
            memset(r.y, 0, (size_t)y_n);
            run_qconv(&r);
            if (memcmp(r.y, expected, (size_t)y_n) != 0) {
                fprintf(stderr, "%s: the %s kernels disagree with the reference\n", l->name,
                        isa_names[level]);
                return 1;
            }
            seconds[level] = best_seconds(run_qconv, &r);
        }
        fxrt_qconv_limit_isa(2);
        double ops = 2.0 * (double)(l->out_c * cg * taps * out_sp);
        double gemm = 0.0;
        if (!l->depthwise) {
            r.m = out_sp;
            r.g = (FxrtQGemm){l->out_c, cg * taps, FXRT_DTYPE_UINT8, FXRT_DTYPE_UINT8, 128, 128,
                              255};
            r.col = alloc_or_die((size_t)(r.m * r.g.k));
            im2col_nhwc(p, r.x, 128, r.col);
            gemm = ops / best_seconds(run_gemm_alone, &r) / 1e9;
        }
        /* The float layer: same shape, bias and relu, NCHWc. */
        int blocked = l->in_c > 3;
        int64_t icb = fxrt_nchwc_blocks(l->in_c), ocb = fxrt_nchwc_blocks(l->out_c);
        r.xf = alloc_or_die((size_t)((blocked ? icb * 8 : l->in_c) * in_sp) * sizeof(float));
        for (int64_t i = 0; i < (blocked ? icb * 8 : l->in_c) * in_sp; i++)
            r.xf[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        r.wf = alloc_or_die((size_t)w_n * sizeof(float));
        for (int64_t i = 0; i < w_n; i++)
            r.wf[i] = (float)w[i] / 128.0f;
        r.wf_packed = alloc_or_die((size_t)fxrt_conv_nchwc_packed_floats(p, blocked) *
                                   sizeof(float));
        fxrt_conv_nchwc_pack_f32(p, blocked, r.wf, r.wf_packed);
        r.yf = alloc_or_die((size_t)(ocb * 8 * out_sp) * sizeof(float));
        r.nchwc_scratch =
            alloc_or_die((size_t)(fxrt_conv_nchwc_scratch_floats(p, blocked) + 1) * sizeof(float));
        r.bias_f = calloc((size_t)(ocb * 8), sizeof(float));
        if (!r.bias_f)
            return 1;
        r.ep.bias = r.bias_f;
        r.ep.bias_row_stride = 1;
        r.ep.activation = FXRT_ACT_RELU;
        double f32 = ops / best_seconds(run_nchwc, &r) / 1e9;
        printf("%-36s %7.2f %8.1f %8.1f %8.1f ", l->name, ops / 1e6, ops / seconds[2] / 1e9,
               ops / seconds[1] / 1e9, ops / seconds[0] / 1e9);
        if (gemm > 0)
            printf("%8.1f", gemm);
        else
            printf("%8s", "-");
        printf(" %9.1f %8.2f\n", f32, ops / seconds[2] / 1e9 / f32);
        free(r.x);
        free(w);
        free(bias);
        free(scale);
        free(r.packed);
        free(pack_scratch);
        free(r.scratch);
        free(r.y);
        free(expected);
        free(acc);
        free(r.col);
        free(r.xf);
        free(r.nchwc_scratch);
        free(r.wf);
        free(r.wf_packed);
        free(r.yf);
        free(r.bias_f);
    }
    printf("(GOP/s; a multiply-add counts as two; one thread)\n");
    return 0;
}
