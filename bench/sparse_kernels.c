/*
 * sparse_kernels.c - the measurement behind the sparse-weights pass's host
 * rule (opt/pass_sparse_weights.c): the sparse convolution
 * (fxrt_sparse_conv_f32) at weight densities 0.05 .. 0.6 against the dense
 * kernel the same layer runs at -O2 on the host, the faster of the NCHWc
 * convolution and (3x3 stride 1, 64+ channels, outputs above 7x7) Winograd,
 * with the NCHW one (im2col/1x1 GEMM through OpenBLAS) beside it; and the
 * sparse matrix-vector product (fxrt_sparse_gemm_f32, one row) against the
 * dense GEMV (fxrt_gemm_ep_f32, OpenBLAS at one row).  One thread:
 *
 *   cc -std=c99 -O2 -DFXRT_USE_CBLAS -I. -Iruntime runtime/fxrt*.c bench/sparse_kernels.c \
 *      -o /tmp/sparse_kernels $(pkg-config --cflags --libs openblas) -lm
 *   OPENBLAS_NUM_THREADS=1 /tmp/sparse_kernels [NAME-SUBSTRING]
 *
 * Every layer runs with a bias and Relu.  The sparse times leave out the
 * reorders an NCHW layer costs inside an NCHWc region (the pass counts those
 * separately); each time is the best of many short trials (a few ms each), so
 * that a slow spell of a shared machine is skipped rather than averaged in.
 * "crossover" is the highest density measured at which sparse is faster.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"
#include "bench/bench_timing.h"

enum { TRIALS = 60 };

static double best_seconds(void (*fn)(void *), void *arg)
{
    return best_seconds_of(TRIALS, fn, arg);
}

static float *random_floats(int64_t n)
{
    float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    if (!a) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return a;
}

typedef struct Layer {
    const char *name;
    int64_t in_c, out_c, h, w, kernel, stride, pad;
} Layer;

static const Layer layers[] = {
    {"resnet8 16-16 3x3 @32", 16, 16, 32, 32, 3, 1, 1},
    {"resnet8 32-32 3x3 @16", 32, 32, 16, 16, 3, 1, 1},
    {"resnet8 32-64 3x3 s2 @16", 32, 64, 16, 16, 3, 2, 1},
    {"resnet8 64-64 3x3 @8", 64, 64, 8, 8, 3, 1, 1},
    {"resnet 64-64 3x3 @56", 64, 64, 56, 56, 3, 1, 1},
    {"resnet 128-128 3x3 @28", 128, 128, 28, 28, 3, 1, 1},
    {"resnet 256-256 3x3 @14", 256, 256, 14, 14, 3, 1, 1},
    {"resnet 128-256 3x3 s2 @28", 128, 256, 28, 28, 3, 2, 1},
    {"resnet 64-256 1x1 @56", 64, 256, 56, 56, 1, 1, 0},
    {"resnet 256-64 1x1 @56", 256, 64, 56, 56, 1, 1, 0},
    {"resnet 128-128 1x1 @28", 128, 128, 28, 28, 1, 1, 0},
    {"resnet 256-256 1x1 @14", 256, 256, 14, 14, 1, 1, 0},
    {"resnet 256-512 1x1 s2 @28", 256, 512, 28, 28, 1, 2, 0},
    {"dscnn 64-64 1x1 @25x5", 64, 64, 25, 5, 1, 1, 0},
};

static const double densities[] = {0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6};
enum { NUM_DENSITIES = (int)(sizeof densities / sizeof densities[0]) };

typedef struct Run {
    FxrtConvParams p;
    FxrtSparseConvParams sp;
    float *x, *x_blocked, *w, *w_packed, *w_winograd, *y, *y_blocked, *scratch, *bias;
    float *winograd_scratch, *values, *nchwc_scratch;
    int32_t *row_start;
    uint16_t *columns;
    void *sparse_scratch;
    FxrtEpilogue ep;
    int64_t m, n, k; /* the GEMV */
} Run;

static void run_nchw(void *arg)
{
    Run *r = arg;
    fxrt_conv_f32(&r->p, r->x, r->w, &r->ep, r->y, r->scratch);
}

static void run_nchwc(void *arg)
{
    Run *r = arg;
    fxrt_conv_nchwc_f32(&r->p, 1, r->x_blocked, r->w_packed, &r->ep, r->y_blocked,
                        r->nchwc_scratch);
}

static void run_winograd(void *arg)
{
    Run *r = arg;
    fxrt_conv_nchwc_winograd_f32(&r->p, r->x_blocked, r->w_winograd, &r->ep, r->y_blocked,
                                 r->winograd_scratch);
}

static void run_sparse(void *arg)
{
    Run *r = arg;
    fxrt_sparse_conv_f32(&r->sp, r->x, r->row_start, r->columns, r->values, &r->ep, r->y,
                         r->sparse_scratch);
}

static void run_gemv(void *arg)
{
    Run *r = arg;
    fxrt_gemm_ep_f32(0, 1, 1, r->n, r->k, 1.0f, r->x, r->k, r->w, r->k, 0.0f, r->y, r->n, &r->ep);
}

static void run_sparse_gemv(void *arg)
{
    Run *r = arg;
    fxrt_sparse_gemm_f32(1, r->n, r->x, r->k, r->row_start, r->columns, r->values, r->y, r->n,
                         &r->ep);
}

/* rows x cols weights w with a fraction `density` kept, compressed into r. */
static void compress(Run *r, const float *w, int64_t rows, int64_t cols, double density)
{
    free(r->row_start);
    free(r->columns);
    free(r->values);
    r->row_start = malloc((size_t)(rows + 1) * sizeof *r->row_start);
    r->columns = malloc((size_t)(rows * cols + 1) * sizeof *r->columns);
    r->values = malloc((size_t)(rows * cols + 1) * sizeof *r->values);
    if (!r->row_start || !r->columns || !r->values)
        exit(1);
    int32_t at = 0;
    for (int64_t i = 0; i < rows; i++) {
        r->row_start[i] = at;
        for (int64_t j = 0; j < cols; j++)
            if ((double)rand() / RAND_MAX < density) {
                r->columns[at] = (uint16_t)j;
                r->values[at++] = w[i * cols + j];
            }
    }
    r->row_start[rows] = at;
}

static void print_densities(double dense, double *sparse)
{
    double crossover = 0;
    for (int d = 0; d < NUM_DENSITIES; d++) {
        printf(" %7.3f", sparse[d] * 1e3);
        if (sparse[d] < dense)
            crossover = densities[d];
    }
    printf("  %4.2f\n", crossover);
}

int main(int argc, char **argv)
{
    printf("times in ms; dense = the faster of NCHWc and Winograd (the -O2 host path)\n");
    printf("%-28s %8s %8s", "layer", "NCHW", "dense");
    for (int d = 0; d < NUM_DENSITIES; d++)
        printf("  d=%4.2f", densities[d]);
    printf("  crossover\n");
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
        int64_t size[3] = {1, l->h, l->w}, kernel[3] = {1, l->kernel, l->kernel};
        for (int d = 0; d < 3; d++) {
            p->in_size[d] = size[d];
            p->kernel[d] = kernel[d];
            p->stride[d] = d ? l->stride : 1;
            p->dilation[d] = 1;
            p->pad_begin[d] = d ? l->pad : 0;
            p->out_size[d] = (size[d] + 2 * p->pad_begin[d] - kernel[d]) / p->stride[d] + 1;
        }
        r.sp = (FxrtSparseConvParams){.batch = 1, .in_channels = l->in_c, .out_channels = l->out_c,
                                      .in_h = l->h, .in_w = l->w, .out_h = p->out_size[1],
                                      .out_w = p->out_size[2], .kernel_h = l->kernel,
                                      .kernel_w = l->kernel, .stride_h = l->stride,
                                      .stride_w = l->stride, .pad_top = l->pad,
                                      .pad_left = l->pad};
        int64_t in_sp = l->h * l->w, out_sp = p->out_size[1] * p->out_size[2];
        int64_t icb = fxrt_nchwc_blocks(l->in_c), ocb = fxrt_nchwc_blocks(l->out_c);
        int64_t cols = l->in_c * l->kernel * l->kernel;
        r.x = random_floats(l->in_c * in_sp);
        r.x_blocked = random_floats(icb * 8 * in_sp);
        r.w = random_floats(l->out_c * cols);
        r.w_packed = random_floats(fxrt_conv_nchwc_packed_floats(p, 1));
        r.y = random_floats(l->out_c * out_sp);
        r.y_blocked = random_floats(ocb * 8 * out_sp);
        r.scratch = random_floats(fxrt_conv_scratch_floats(p) + 1);
        r.nchwc_scratch = random_floats(fxrt_conv_nchwc_scratch_floats(p, 1) + 1);
        r.bias = calloc((size_t)(ocb * 8), sizeof *r.bias);
        if (!r.bias)
            return 1;
        fxrt_to_nchwc_f32(1, l->in_c, in_sp, r.x, r.x_blocked);
        fxrt_conv_nchwc_pack_f32(p, 1, r.w, r.w_packed);
        r.ep.bias = r.bias;
        r.ep.bias_row_stride = 1;
        r.ep.activation = FXRT_ACT_RELU;
        double nchw = best_seconds(run_nchw, &r), dense = best_seconds(run_nchwc, &r);
        if (fxrt_conv_nchwc_winograd_applies(p)) {
            r.w_winograd = random_floats(fxrt_conv_nchwc_winograd_packed_floats(p));
            r.winograd_scratch = random_floats(fxrt_conv_nchwc_winograd_scratch_floats(p));
            fxrt_conv_nchwc_winograd_pack_f32(p, r.w, r.w_winograd);
            double winograd = best_seconds(run_winograd, &r);
            dense = winograd < dense ? winograd : dense;
        }
        double sparse[NUM_DENSITIES];
        for (int d = 0; d < NUM_DENSITIES; d++) {
            compress(&r, r.w, l->out_c, cols, densities[d]);
            free(r.sparse_scratch);
            r.sparse_scratch = malloc((size_t)fxrt_sparse_conv_scratch_bytes(&r.sp, cols * l->out_c));
            if (!r.sparse_scratch)
                return 1;
            sparse[d] = best_seconds(run_sparse, &r);
        }
        printf("%-28s %8.3f %8.3f", l->name, nchw * 1e3, dense * 1e3);
        print_densities(dense, sparse);
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
        free(r.sparse_scratch);
        free(r.row_start);
        free(r.columns);
        free(r.values);
    }
    /* Fully connected layers at batch 1: GEMV against the sparse product. */
    const int64_t fc[][2] = {{64, 10}, {256, 256}, {512, 1000}, {1024, 1024}, {4096, 1024}};
    for (size_t i = 0; i < sizeof fc / sizeof *fc; i++) {
        Run r;
        memset(&r, 0, sizeof r);
        r.k = fc[i][0];
        r.n = fc[i][1];
        char name[64];
        snprintf(name, sizeof name, "fc %lld-%lld @1", (long long)r.k, (long long)r.n);
        if (argc > 1 && !strstr(name, argv[1]))
            continue;
        r.x = random_floats(r.k);
        r.w = random_floats(r.k * r.n);
        r.y = random_floats(r.n);
        r.bias = calloc((size_t)r.n, sizeof *r.bias);
        if (!r.bias)
            return 1;
        r.ep.bias = r.bias;
        r.ep.bias_col_stride = 1;
        r.ep.activation = FXRT_ACT_RELU;
        double dense = best_seconds(run_gemv, &r), sparse[NUM_DENSITIES];
        for (int d = 0; d < NUM_DENSITIES; d++) {
            compress(&r, r.w, r.n, r.k, densities[d]);
            sparse[d] = best_seconds(run_sparse_gemv, &r);
        }
        printf("%-28s %8s %8.3f", name, "", dense * 1e3);
        print_densities(dense, sparse);
        free(r.x);
        free(r.w);
        free(r.y);
        free(r.bias);
        free(r.row_start);
        free(r.columns);
        free(r.values);
    }
    return 0;
}
