/*
 * nchwc_depthwise.c - times the NCHWc depthwise kernel
 * (fxrt_conv_nchwc_depthwise_f32) against the NCHW one
 * (fxrt_conv_depthwise_f32) on the depthwise layers of MobileNet-v2 (224)
 * and DS-CNN, each with its bias + ReLU6 / ReLU epilogue.  Prints, per
 * shape, the best time of several rounds for both kernels and the NCHWc
 * kernel's bandwidth (bytes of X and Y over time).  Times are the thread's
 * CPU time, so that other processes on a shared machine do not count
 * while they hold the core (they still share its caches).  An argument keeps the
 * shapes whose name contains it.  Run with OPENBLAS_NUM_THREADS=1.  Build against the runtime of a cmake build:
 *
 *   cc -std=c99 -O2 -Iruntime bench/nchwc_depthwise.c build/libfxrt.a \
 *      -lopenblas -lm -o /tmp/nchwc_depthwise
 */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fxrt.h"

typedef struct Shape {
    const char *name;
    int64_t channels, size, kernel, stride;
    FxrtActivation act;
} Shape;

static const Shape shapes[] = {
    {"mnv2 32ch 112 s1", 32, 112, 3, 1, FXRT_ACT_CLIP},
    {"mnv2 96ch 112 s2", 96, 112, 3, 2, FXRT_ACT_CLIP},
    {"mnv2 144ch 56 s1", 144, 56, 3, 1, FXRT_ACT_CLIP},
    {"mnv2 144ch 56 s2", 144, 56, 3, 2, FXRT_ACT_CLIP},
    {"mnv2 192ch 28 s1", 192, 28, 3, 1, FXRT_ACT_CLIP},
    {"mnv2 192ch 28 s2", 192, 28, 3, 2, FXRT_ACT_CLIP},
    {"mnv2 384ch 14 s1", 384, 14, 3, 1, FXRT_ACT_CLIP},
    {"mnv2 576ch 14 s1", 576, 14, 3, 1, FXRT_ACT_CLIP},
    {"mnv2 576ch 14 s2", 576, 14, 3, 2, FXRT_ACT_CLIP},
    {"mnv2 960ch 7 s1", 960, 7, 3, 1, FXRT_ACT_CLIP},
    {"dscnn 64ch 25x5", 64, 0, 3, 1, FXRT_ACT_RELU},
    {"5x5 96ch 28 s1", 96, 28, 5, 1, FXRT_ACT_RELU},
    {"5x5 96ch 28 s2", 96, 28, 5, 2, FXRT_ACT_RELU},
    /* X and Y in L2 (400 KiB): the compute ceiling of the kernel. */
    {"L2 16ch 56 s1", 16, 56, 3, 1, FXRT_ACT_CLIP},
    {"effnet 5x5 672ch 14 s1", 672, 14, 5, 1, FXRT_ACT_SILU},
    {"effnet 5x5 1152ch 7 s1", 1152, 7, 5, 1, FXRT_ACT_SILU},
    {"convnext 7x7 96ch 56", 96, 56, 7, 1, FXRT_ACT_NONE},
    {"convnext 7x7 384ch 14", 384, 14, 7, 1, FXRT_ACT_NONE},
    {"convnext 7x7 768ch 7", 768, 7, 7, 1, FXRT_ACT_NONE},
};

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* 64-byte aligned, as the generated code's arena is. */
static float *filled(int64_t n)
{
    void *block = NULL;
    float *v = posix_memalign(&block, 64, (size_t)n * sizeof *v) == 0 ? block : NULL;
    if (!v) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    return v;
}

enum { ROUNDS = 15 };

/* Best seconds per call over ROUNDS rounds of `reps` calls. */
static double best_time(int blocked, int reps, const FxrtConvParams *p, const float *x,
                        const float *w, const FxrtEpilogue *ep, float *y)
{
    double best = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_seconds();
        for (int i = 0; i < reps; i++) {
            if (blocked)
                fxrt_conv_nchwc_depthwise_f32(p, x, w, ep, y);
            else
                fxrt_conv_depthwise_f32(p, x, w, ep, y);
        }
        double t = (now_seconds() - t0) / reps;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    printf("%-18s %10s %10s %8s %10s\n", "shape", "nchw ms", "nchwc ms", "speedup", "GB/s");
    double total_nchw = 0.0, total_nchwc = 0.0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const Shape *sh = &shapes[s];
        if (argc > 1 && !strstr(sh->name, argv[1]))
            continue;
        int64_t h = sh->size ? sh->size : 25, wd = sh->size ? sh->size : 5;
        int64_t c = sh->channels, k = sh->kernel, pad = k / 2;
        int64_t oh = (h + 2 * pad - k) / sh->stride + 1, ow = (wd + 2 * pad - k) / sh->stride + 1;
        FxrtConvParams p;
        memset(&p, 0, sizeof p);
        p.batch = 1;
        p.in_channels = p.out_channels = p.groups = c;
        int64_t in[3] = {1, h, wd}, out[3] = {1, oh, ow};
        for (int i = 0; i < 3; i++) {
            p.in_size[i] = in[i];
            p.out_size[i] = out[i];
            p.kernel[i] = i ? k : 1;
            p.stride[i] = i ? sh->stride : 1;
            p.dilation[i] = 1;
            p.pad_begin[i] = i ? pad : 0;
        }
        int64_t cb = fxrt_nchwc_blocks(c);
        float *x = filled(c * h * wd), *w = filled(c * k * k), *bias = filled(cb * 8);
        float *y = filled(c * oh * ow);
        float *xb = filled(cb * 8 * h * wd), *wb = filled(fxrt_conv_nchwc_packed_floats(&p, 1));
        float *yb = filled(cb * 8 * oh * ow);
        fxrt_to_nchwc_f32(1, c, h * wd, x, xb);
        fxrt_conv_nchwc_pack_f32(&p, 1, w, wb);
        FxrtEpilogue ep;
        memset(&ep, 0, sizeof ep);
        ep.bias = bias;
        ep.activation = (int32_t)sh->act;
        ep.alpha = 0.0f;
        ep.beta = 6.0f;
        double bytes = (double)(cb * 8 * (h * wd + oh * ow)) * sizeof(float);
        int reps = (int)(1e8 / bytes) + 1; /* about 5 ms per round at 20 GB/s */
        double t_nchw = best_time(0, reps, &p, x, w, &ep, y);
        double t_nchwc = best_time(1, reps, &p, xb, wb, &ep, yb);
        total_nchw += t_nchw;
        total_nchwc += t_nchwc;
        printf("%-18s %10.4f %10.4f %7.2fx %10.1f\n", sh->name, 1e3 * t_nchw, 1e3 * t_nchwc,
               t_nchw / t_nchwc, bytes / t_nchwc * 1e-9);
        free(x);
        free(w);
        free(bias);
        free(y);
        free(xb);
        free(wb);
        free(yb);
    }
    printf("%-18s %10.4f %10.4f %7.2fx\n", "sum", 1e3 * total_nchw, 1e3 * total_nchwc,
           total_nchw / total_nchwc);
    return 0;
}
