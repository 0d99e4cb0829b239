/*
 * qgemm_kernels.c - times the packed 8-bit GEMM (fxrt_qgemm, uint8
 * activations, int8 weights, requantized uint8 output) with its tiles
 * capped at AVX-512 VNNI, AVX2 and portable C, against the float GEMM
 * fxrt_gemm_f32 (OpenBLAS sgemm) of the same shape, one thread:
 *
 *   cc -std=c99 -O2 -DFXRT_USE_CBLAS -I. -Iruntime runtime/fxrt*.c bench/qgemm_kernels.c \
 *      -o /tmp/qgemm_kernels $(pkg-config --cflags --libs openblas) -lm
 *   OPENBLAS_NUM_THREADS=1 /tmp/qgemm_kernels [SHAPE-SUBSTRING]
 *
 * The shapes are convolutions as GEMMs (m output pixels, n output
 * channels, k = input channels x kernel taps) and a classifier.  Weights
 * span int8; the "AVX2 w7" column repeats the AVX2 run with 7-bit weights
 * (|b| <= 64), where the AVX2 tiles use vpmaddubsw.  Before
 * timing, every path's output is compared with fxrt_gemm_integer followed
 * by fxrt_requantize, and must be equal.  Each time is the best of many
 * short trials (a few ms each), so that a slow spell of a shared machine
 * is skipped rather than averaged in; GOP/s count a multiply-add as two.
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

typedef struct Shape {
    const char *name;
    int64_t m, n, k;
} Shape;

static const Shape shapes[] = {
    {"resnet 64-64 3x3 @56", 3136, 64, 576},
    {"resnet 128-128 3x3 @28", 784, 128, 1152},
    {"resnet 512-512 3x3 @7", 49, 512, 4608},
    {"classifier 512-1000", 1, 1000, 512},
};

typedef struct Run {
    FxrtQGemm q;
    int64_t m, n, k;
    uint8_t *a, *y;
    void *packed;
    float *af, *bf, *yf;
} Run;

static void run_qgemm(void *arg)
{
    Run *r = arg;
    fxrt_qgemm(&r->q, r->m, r->a, r->k, r->packed, r->y, r->n);
}

static void run_sgemm(void *arg)
{
    Run *r = arg;
    fxrt_gemm_f32(0, 0, r->m, r->n, r->k, 1.0f, r->af, r->k, r->bf, r->n, 0.0f, r->yf, r->n);
}

static void *alloc_or_die(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    const char *isa_names[] = {"portable", "AVX2", "VNNI"};
    printf("%-26s %6s %9s %9s %9s %9s %9s %8s\n", "shape (m x n x k)", "MOP", "VNNI", "AVX2",
           "AVX2 w7", "portable", "sgemm", "VNNI/f32");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const Shape *sh = &shapes[s];
        if (argc > 1 && !strstr(sh->name, argv[1]))
            continue;
        Run r;
        memset(&r, 0, sizeof r);
        r.m = sh->m;
        r.n = sh->n;
        r.k = sh->k;
        int64_t m = r.m, n = r.n, k = r.k;
        r.a = alloc_or_die((size_t)(m * k));
        int8_t *b = alloc_or_die((size_t)(k * n));
        int32_t *bias = alloc_or_die((size_t)n * sizeof *bias);
        float *scale = alloc_or_die((size_t)n * sizeof *scale);
        r.af = alloc_or_die((size_t)(m * k) * sizeof(float));
        r.bf = alloc_or_die((size_t)(k * n) * sizeof(float));
        r.yf = alloc_or_die((size_t)(m * n) * sizeof(float));
        r.y = alloc_or_die((size_t)(m * n));
        uint8_t *expected = alloc_or_die((size_t)(m * n));
        int32_t *acc = alloc_or_die((size_t)(m * n) * sizeof *acc);
        r.packed = alloc_or_die((size_t)fxrt_qgemm_packed_bytes(n, k));
        for (int64_t i = 0; i < m * k; i++) {
            r.a[i] = (uint8_t)(rand() & 0xff);
            r.af[i] = (float)r.a[i];
        }
        FxrtQGemm q = {n, k, FXRT_DTYPE_UINT8, FXRT_DTYPE_UINT8, 128, 0, 255};
        r.q = q;
        /* [0..2]: the levels on full-range weights; [3]: AVX2 on 7-bit ones */
        double seconds[4];
        const int weight_maxes[] = {127, 64};
        for (int wi = 0; wi < 2; wi++) {
            const int weight_max = weight_maxes[wi];
            for (int64_t i = 0; i < k * n; i++) {
                b[i] = (int8_t)(rand() % (2 * weight_max + 1) - weight_max);
                r.bf[i] = (float)b[i];
            }
            for (int64_t j = 0; j < n; j++) {
                bias[j] = rand() % 20001 - 10000;
                scale[j] = (float)((0.5 + (double)rand() / RAND_MAX) / (80.0 * sqrt((double)k)));
            }
            int32_t a_zp = 128, zero = 0;
            if (fxrt_qgemm_pack_b(n, k, b, bias, scale, n, FXRT_DTYPE_UINT8, a_zp, r.packed) !=
                0) {
                fprintf(stderr, "%s: scale without a fixed-point pair\n", sh->name);
                return 1;
            }
            fxrt_gemm_integer(m, n, k, FXRT_DTYPE_UINT8, r.a, &a_zp, 1, FXRT_DTYPE_INT8, b, &zero,
                              1, acc);
            fxrt_requantize(m, n, 1, acc, bias, scale, n, 128, FXRT_DTYPE_UINT8, expected);
            for (int level = 2; level >= 0; level--) {
                if (weight_max == 64 && level != 1)
                    continue;
                fxrt_qgemm_limit_isa(level);
                memset(r.y, 0, (size_t)(m * n));
                run_qgemm(&r);
                if (memcmp(r.y, expected, (size_t)(m * n)) != 0) {
                    fprintf(stderr, "%s: the %s tiles disagree with the reference (|b| <= %d)\n",
                            sh->name, isa_names[level], weight_max);
                    return 1;
                }
                seconds[weight_max == 64 ? 3 : level] = best_seconds(run_qgemm, &r);
            }
        }
        fxrt_qgemm_limit_isa(2);
        double sgemm = best_seconds(run_sgemm, &r);
        double ops = 2.0 * (double)m * (double)n * (double)k;
        char label[64];
        snprintf(label, sizeof label, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
        printf("%-26s %6.1f %9.1f %9.1f %9.1f %9.1f %9.1f %8.2f   %s\n", label, ops / 1e6,
               ops / seconds[2] / 1e9, ops / seconds[1] / 1e9, ops / seconds[3] / 1e9,
               ops / seconds[0] / 1e9, ops / sgemm / 1e9, sgemm / seconds[2], sh->name);
        free(r.a);
        free(b);
        free(bias);
        free(scale);
        free(r.af);
        free(r.bf);
        free(r.yf);
        free(r.y);
        free(expected);
        free(acc);
        free(r.packed);
    }
    printf("(GOP/s; a multiply-add counts as two; one thread)\n");
    return 0;
}
