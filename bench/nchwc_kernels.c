/*
 * nchwc_kernels.c - times the NCHWc convolution (fxrt_conv_nchwc_f32)
 * against the NCHW one (fxrt_conv_f32, im2col or 1x1 GEMM through
 * OpenBLAS) and, for the 3x3 stride-1 layers, Winograd F(4x4, 3x3)
 * (fxrt_conv_nchwc_winograd_f32) on the convolution layers of the bench
 * models, one thread:
 *
 *   cc -std=c99 -O2 -DFXRT_USE_CBLAS -I. -Iruntime runtime/fxrt*.c bench/nchwc_kernels.c \
 *      -o /tmp/nchwc_kernels $(pkg-config --cflags --libs openblas) -lm
 *   OPENBLAS_NUM_THREADS=1 /tmp/nchwc_kernels [NAME-SUBSTRING [ISA]]
 *
 * ISA caps the tiles (runtime/fxrt_isa.h): 1 times the AVX2 kernels on an
 * AVX-512 host, as an AVX2-only CPU would run them (the same core's
 * caches and clock, so a guide, not a measurement of such a CPU).
 *
 * Each layer runs with a bias and relu, and with the scratch the compiler
 * would give it (1x1 layers: slabs of their input).  Winograd's GFLOP/s count the direct
 * convolution's multiply-adds, so that the columns compare times.  Each time is the best of many
 * short trials (a few ms each), so that a slow spell of a shared machine
 * is skipped rather than averaged in; GFLOP/s count a multiply-add as two.
 * The "cold" column is the NCHWc kernel as a model runs it: before each
 * call, 64 MiB written past every cache (a network's weights outgrow L3, so
 * each layer's come from DRAM) and a blocked input converted again (the
 * layer before has just produced it); best of COLD_TRIALS single calls.
 * The FMA peak (AVX-512 where the CPU has it, else AVX2) is measured the
 * same way, with independent FMA chains.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "bench/bench_timing.h"
#endif

enum { TRIALS = 60 };

static double best_seconds(void (*fn)(void *), void *arg)
{
    return best_seconds_of(TRIALS, fn, arg);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Ten independent FMA chains: enough to cover the FMA latency on two
 * pipes, so this runs at the FMA throughput.  Distinct starting values, or
 * the compiler merges the chains; they depend on the previous call's
 * result, or GCC -O3 drops repeated calls as redundant. */
#define FMA_CHAINS(name, isa, vec, set1, add, fmadd, mul, storeu)                        \
    __attribute__((target(isa))) static void name(void *arg)                              \
    {                                                                                         \
        float *out = arg;                                                                     \
        vec m = set1(0.999999f), c = set1(1e-7f);                                             \
        vec a0 = set1(1.0f + 1e-3f * out[0]);                                                 \
        vec a1 = add(a0, set1(0.1f)), a2 = add(a1, a1), a3 = add(a2, a0), a4 = add(a3, a0);  \
        vec a5 = add(a4, a0), a6 = add(a5, a0), a7 = add(a6, a0), a8 = add(a7, a0);          \
        vec a9 = add(a8, a0);                                                                 \
        for (int k = 0; k < 100000; k++) {                                                    \
            a0 = fmadd(a0, m, c);                                                             \
            a1 = fmadd(a1, m, c);                                                             \
            a2 = fmadd(a2, m, c);                                                             \
            a3 = fmadd(a3, m, c);                                                             \
            a4 = fmadd(a4, m, c);                                                             \
            a5 = fmadd(a5, m, c);                                                             \
            a6 = fmadd(a6, m, c);                                                             \
            a7 = fmadd(a7, m, c);                                                             \
            a8 = fmadd(a8, m, c);                                                             \
            a9 = fmadd(a9, m, c);                                                             \
        }                                                                                     \
        vec s = add(add(add(a0, a1), add(a2, a3)), add(add(a4, a5), add(a6, a7)));            \
        storeu(out, mul(add(s, add(a8, a9)), set1(1e-2f)));                                   \
    }
FMA_CHAINS(fma_chains_avx2, "avx2,fma", __m256, _mm256_set1_ps, _mm256_add_ps, _mm256_fmadd_ps,
           _mm256_mul_ps, _mm256_storeu_ps)
FMA_CHAINS(fma_chains_avx512, "avx512f", __m512, _mm512_set1_ps, _mm512_add_ps, _mm512_fmadd_ps,
           _mm512_mul_ps, _mm512_storeu_ps)
#undef FMA_CHAINS

/* The FMA peak of the widest vectors the NCHWc tiles use on this CPU. */
static double peak_gflops(const char **isa)
{
    float sink[16] = {0};
    if (fxrt_nchwc_conv_isa() >= 2) {
        *isa = "AVX-512";
        return 100000.0 * 10 * 32 / best_seconds(fma_chains_avx512, sink) / 1e9;
    }
    *isa = "AVX2/FMA";
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return 0.0;
    return 100000.0 * 10 * 16 / best_seconds(fma_chains_avx2, sink) / 1e9;
}
#else
static double peak_gflops(const char **isa)
{
    *isa = "FMA";
    return 0.0;
}
#endif

typedef struct Layer {
    const char *name;
    int plain; /* X in NCHW (a first layer), else NCHWc */
    int64_t in_c, out_c, h, w, kernel_h, kernel_w, stride, pad_t, pad_l, pad_b, pad_r;
} Layer;

static const Layer layers[] = {
    {"resnet8 stem 3-16 3x3 @32", 1, 3, 16, 32, 32, 3, 3, 1, 1, 1, 1, 1},
    {"resnet8 16-16 3x3 @32", 0, 16, 16, 32, 32, 3, 3, 1, 1, 1, 1, 1},
    {"resnet8 16-32 3x3 s2 @32", 0, 16, 32, 32, 32, 3, 3, 2, 1, 1, 1, 1},
    {"resnet8 32-32 3x3 @16", 0, 32, 32, 16, 16, 3, 3, 1, 1, 1, 1, 1},
    {"resnet8 32-64 3x3 s2 @16", 0, 32, 64, 16, 16, 3, 3, 2, 1, 1, 1, 1},
    {"resnet8 64-64 3x3 @8", 0, 64, 64, 8, 8, 3, 3, 1, 1, 1, 1, 1},
    {"resnet8 16-32 1x1 s2 @32", 0, 16, 32, 32, 32, 1, 1, 2, 0, 0, 0, 0},
    {"resnet8 32-64 1x1 s2 @16", 0, 32, 64, 16, 16, 1, 1, 2, 0, 0, 0, 0},
    {"mobilenetv2 stem 3-32 s2 @224", 1, 3, 32, 224, 224, 3, 3, 2, 0, 0, 1, 1},
    {"mobilenetv2 16-96 1x1 @112", 0, 16, 96, 112, 112, 1, 1, 1, 0, 0, 0, 0},
    {"mobilenetv2 96-24 1x1 @56", 0, 96, 24, 56, 56, 1, 1, 1, 0, 0, 0, 0},
    {"mobilenetv2 24-144 1x1 @56", 0, 24, 144, 56, 56, 1, 1, 1, 0, 0, 0, 0},
    {"mobilenetv2 32-192 1x1 @28", 0, 32, 192, 28, 28, 1, 1, 1, 0, 0, 0, 0},
    {"mobilenetv2 64-384 1x1 @14", 0, 64, 384, 14, 14, 1, 1, 1, 0, 0, 0, 0},
    {"mobilenetv2 384-64 1x1 @14", 0, 384, 64, 14, 14, 1, 1, 1, 0, 0, 0, 0},
    {"mobilenetv2 160-960 1x1 @7", 0, 160, 960, 7, 7, 1, 1, 1, 0, 0, 0, 0},
    {"mobilenetv2 960-160 1x1 @7", 0, 960, 160, 7, 7, 1, 1, 1, 0, 0, 0, 0},
    {"mobilenetv2 320-1280 1x1 @7", 0, 320, 1280, 7, 7, 1, 1, 1, 0, 0, 0, 0},
    {"resnet50 stem 3-64 7x7 s2 @224", 1, 3, 64, 224, 224, 7, 7, 2, 3, 3, 3, 3},
    {"resnet50 64-64 3x3 @56", 0, 64, 64, 56, 56, 3, 3, 1, 1, 1, 1, 1},
    {"resnet50 64-256 1x1 @56", 0, 64, 256, 56, 56, 1, 1, 1, 0, 0, 0, 0},
    {"resnet50 256-256 3x3 @14", 0, 256, 256, 14, 14, 3, 3, 1, 1, 1, 1, 1},
    {"resnet50 256-256 3x3 s2 @28", 0, 256, 256, 28, 28, 3, 3, 2, 1, 1, 1, 1},
    {"resnet50 256-512 1x1 s2 @56", 0, 256, 512, 56, 56, 1, 1, 2, 0, 0, 0, 0},
    {"resnet50 512-1024 1x1 s2 @28", 0, 512, 1024, 28, 28, 1, 1, 2, 0, 0, 0, 0},
    {"resnet50 512-512 3x3 @7", 0, 512, 512, 7, 7, 3, 3, 1, 1, 1, 1, 1},
    {"resnet50 512-512 3x3 s2 @14", 0, 512, 512, 14, 14, 3, 3, 2, 1, 1, 1, 1},
    {"resnet50 1024-2048 1x1 s2 @14", 0, 1024, 2048, 14, 14, 1, 1, 2, 0, 0, 0, 0},
    {"resnet50 512-2048 1x1 @7", 0, 512, 2048, 7, 7, 1, 1, 1, 0, 0, 0, 0},
    {"resnet50 2048-512 1x1 @7", 0, 2048, 512, 7, 7, 1, 1, 1, 0, 0, 0, 0},
    {"resnet50 1024-256 1x1 @14", 0, 1024, 256, 14, 14, 1, 1, 1, 0, 0, 0, 0},
    {"resnet50 256-1024 1x1 @14", 0, 256, 1024, 14, 14, 1, 1, 1, 0, 0, 0, 0},
    {"resnet50 1024-512 1x1 @14", 0, 1024, 512, 14, 14, 1, 1, 1, 0, 0, 0, 0},
    {"resnet50 512-128 1x1 @28", 0, 512, 128, 28, 28, 1, 1, 1, 0, 0, 0, 0},
    {"resnet50 256-64 1x1 @56", 0, 256, 64, 56, 56, 1, 1, 1, 0, 0, 0, 0},
    {"densenet121 512-128 1x1 @28", 0, 512, 128, 28, 28, 1, 1, 1, 0, 0, 0, 0},
    {"densenet121 1024-128 1x1 @7", 0, 1024, 128, 7, 7, 1, 1, 1, 0, 0, 0, 0},
    {"resnet18 128-128 3x3 @28", 0, 128, 128, 28, 28, 3, 3, 1, 1, 1, 1, 1},
    {"googlenet 96-128 3x3 @28", 0, 96, 128, 28, 28, 3, 3, 1, 1, 1, 1, 1},
    {"googlenet 128-192 3x3 @28", 0, 128, 192, 28, 28, 3, 3, 1, 1, 1, 1, 1},
    {"googlenet 96-208 3x3 @14", 0, 96, 208, 14, 14, 3, 3, 1, 1, 1, 1, 1},
    {"googlenet 160-320 3x3 @7", 0, 160, 320, 7, 7, 3, 3, 1, 1, 1, 1, 1},
    {"googlenet 32-96 3x3 @28", 0, 32, 96, 28, 28, 3, 3, 1, 1, 1, 1, 1},
    {"densenet121 128-32 3x3 @56", 0, 128, 32, 56, 56, 3, 3, 1, 1, 1, 1, 1},
    {"densenet121 128-32 3x3 @28", 0, 128, 32, 28, 28, 3, 3, 1, 1, 1, 1, 1},
    {"densenet121 128-32 3x3 @14", 0, 128, 32, 14, 14, 3, 3, 1, 1, 1, 1, 1},
    {"densenet121 128-32 3x3 @7", 0, 128, 32, 7, 7, 3, 3, 1, 1, 1, 1, 1},
    {"googlenet 16-32 3x3 @28", 0, 16, 32, 28, 28, 3, 3, 1, 1, 1, 1, 1},
    {"googlenet 24-64 3x3 @14", 0, 24, 64, 14, 14, 3, 3, 1, 1, 1, 1, 1},
    {"googlenet 192-384 3x3 @7", 0, 192, 384, 7, 7, 3, 3, 1, 1, 1, 1, 1},
    {"googlenet 48-128 3x3 @7", 0, 48, 128, 7, 7, 3, 3, 1, 1, 1, 1, 1},
    {"squeezenet 16-64 3x3 @55", 0, 16, 64, 55, 55, 3, 3, 1, 1, 1, 1, 1},
    {"squeezenet 32-128 3x3 @27", 0, 32, 128, 27, 27, 3, 3, 1, 1, 1, 1, 1},
    {"squeezenet 48-192 3x3 @13", 0, 48, 192, 13, 13, 3, 3, 1, 1, 1, 1, 1},
    {"squeezenet 64-256 3x3 @13", 0, 64, 256, 13, 13, 3, 3, 1, 1, 1, 1, 1},
    {"dscnn stem 1-64 10x4 s2 @49x10", 1, 1, 64, 49, 10, 10, 4, 2, 4, 1, 5, 2},
    {"dscnn 64-64 1x1 @25x5", 0, 64, 64, 25, 5, 1, 1, 1, 0, 0, 0, 0},
};

typedef struct Run {
    FxrtConvParams p;
    int plain;
    float *x, *x_blocked, *w, *w_packed, *w_winograd, *y, *y_blocked, *scratch, *bias;
    float *winograd_scratch, *nchwc_scratch;
    FxrtEpilogue ep;
} Run;

static void run_nchw(void *arg)
{
    Run *r = arg;
    fxrt_conv_f32(&r->p, r->x, r->w, &r->ep, r->y, r->scratch);
}

static void run_nchwc(void *arg)
{
    Run *r = arg;
    fxrt_conv_nchwc_f32(&r->p, !r->plain, r->plain ? r->x : r->x_blocked, r->w_packed, &r->ep,
                        r->y_blocked, r->nchwc_scratch);
}

static void run_winograd(void *arg)
{
    Run *r = arg;
    fxrt_conv_nchwc_winograd_f32(&r->p, r->x_blocked, r->w_winograd, &r->ep, r->y_blocked,
                                 r->winograd_scratch);
}

enum { COLD_TRIALS = 15, EVICT_BYTES = 64 << 20 };

/* Best time of one NCHWc call after the caches are evicted and the input
 * rewritten (see the top of the file). */
static double cold_seconds(Run *r, const Layer *l)
{
    static char *evict;
    if (!evict && !(evict = malloc(EVICT_BYTES))) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    double best = 1e30;
    for (int trial = 0; trial < COLD_TRIALS; trial++) {
        memset(evict, trial, EVICT_BYTES);
        if (!r->plain)
            fxrt_to_nchwc_f32(1, l->in_c, l->h * l->w, r->x, r->x_blocked);
        double a = now();
        run_nchwc(r);
        double t = now() - a;
        best = t < best ? t : best;
    }
    return best;
}

/* 64-byte aligned, as the generated code's weights and arena are. */
static float *random_floats(int64_t n)
{
    float *a = NULL;
    if (posix_memalign((void **)&a, 64, (size_t)n * sizeof *a) != 0)
        a = NULL;
    if (!a) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return a;
}

int main(int argc, char **argv)
{
    if (argc > 2)
        fxrt_nchwc_conv_limit_isa(atoi(argv[2]));
    const char *isa;
    double peak = peak_gflops(&isa);
    printf("%s peak (measured): %.1f GFLOP/s\n", isa, peak);
    printf("%-32s %8s %10s %10s %7s %6s %10s %7s\n", "layer", "MFLOP", "NCHW GF/s", "NCHWc GF/s",
           "% peak", "cold", "Winograd", "speedup");
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        const Layer *l = &layers[i];
        if (argc > 1 && !strstr(l->name, argv[1]))
            continue;
        Run r;
        memset(&r, 0, sizeof r);
        FxrtConvParams *p = &r.p;
        p->batch = 1;
        p->in_channels = l->in_c;
        p->out_channels = l->out_c;
        p->groups = 1;
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
        r.plain = l->plain;
        int64_t in_sp = l->h * l->w, out_sp = p->out_size[1] * p->out_size[2];
        int64_t icb = fxrt_nchwc_blocks(l->in_c), ocb = fxrt_nchwc_blocks(l->out_c);
        r.x = random_floats(l->in_c * in_sp);
        r.x_blocked = random_floats(icb * 8 * in_sp);
        r.w = random_floats(l->out_c * l->in_c * l->kernel_h * l->kernel_w);
        r.w_packed = random_floats(fxrt_conv_nchwc_packed_floats(p, !r.plain));
        r.y = random_floats(l->out_c * out_sp);
        r.y_blocked = random_floats(ocb * 8 * out_sp);
        r.scratch = random_floats(fxrt_conv_scratch_floats(p) + 1);
        r.nchwc_scratch = random_floats(fxrt_conv_nchwc_scratch_floats(p, !r.plain) + 1);
        r.bias = calloc((size_t)(ocb * 8), sizeof *r.bias);
        if (!r.bias)
            return 1;
        fxrt_to_nchwc_f32(1, l->in_c, in_sp, r.x, r.x_blocked);
        fxrt_conv_nchwc_pack_f32(p, !r.plain, r.w, r.w_packed);
        r.ep.bias = r.bias;
        r.ep.bias_row_stride = 1;
        r.ep.activation = FXRT_ACT_RELU;
        double flops = 2.0 * (double)(l->in_c * l->out_c * l->kernel_h * l->kernel_w * out_sp);
        double nchw = flops / best_seconds(run_nchw, &r) / 1e9;
        double nchwc = flops / best_seconds(run_nchwc, &r) / 1e9;
        double cold = flops / cold_seconds(&r, l) / 1e9;
        printf("%-32s %8.2f %10.1f %10.1f %6.0f%% %6.1f", l->name, flops / 1e6, nchw, nchwc,
               peak > 0 ? 100 * nchwc / peak : 0.0, cold);
        if (!r.plain && fxrt_conv_nchwc_winograd_applies(p)) {
            r.w_winograd = random_floats(fxrt_conv_nchwc_winograd_packed_floats(p));
            r.winograd_scratch = random_floats(fxrt_conv_nchwc_winograd_scratch_floats(p));
            fxrt_conv_nchwc_winograd_pack_f32(p, r.w, r.w_winograd);
            double winograd = flops / best_seconds(run_winograd, &r) / 1e9;
            printf(" %10.1f %6.2fx", winograd, winograd / nchwc);
        }
        printf("\n");
        free(r.x);
        free(r.x_blocked);
        free(r.w);
        free(r.w_packed);
        free(r.y);
        free(r.y_blocked);
        free(r.scratch);
        free(r.nchwc_scratch);
        free(r.bias);
        free(r.w_winograd);
        free(r.winograd_scratch);
    }
    return 0;
}
