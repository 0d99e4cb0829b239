/*
 * leaf_ops.c - the C side of the leaf-op test models (scripts/make_leaf_models.py):
 * the fxcc_leaf_OP functions fxcc's generated header declares.  The same file
 * is built two ways: as a MODULE library that the interpreter dlopens
 * (--leaf-lib, tests/CMakeLists.txt) and, copied by --leaf-source, into the
 * compiled model.  Plain C99, warning-free under -Wall -Wextra -pedantic, as
 * the generated code's build demands.  Each function checks the shapes it
 * was written for and refuses others with a non-zero status.
 */
#include <math.h>
#include <stdint.h>

/* Running maximum along the last axis of a rank-2 tensor. */
int fxcc_leaf_CumMaxRows(const float *x0, const int64_t *x0_shape, int x0_rank, float *y0,
                         const int64_t *y0_shape, int y0_rank);
int fxcc_leaf_CumMaxRows(const float *x0, const int64_t *x0_shape, int x0_rank, float *y0,
                         const int64_t *y0_shape, int y0_rank)
{
    if (x0_rank != 2 || y0_rank != 2 || x0_shape[0] != y0_shape[0] || x0_shape[1] != y0_shape[1])
        return 1;
    for (int64_t i = 0; i < x0_shape[0]; i++) {
        const float *row = x0 + i * x0_shape[1];
        float *out = y0 + i * x0_shape[1];
        for (int64_t j = 0; j < x0_shape[1]; j++)
            out[j] = j == 0 || row[j] > out[j - 1] ? row[j] : out[j - 1];
    }
    return 0;
}

/* Per row of x0 + x1 (x1 broadcast along the rows): the maximum and the
 * first index holding it. */
int fxcc_leaf_RowMaxShifted(const float *x0, const int64_t *x0_shape, int x0_rank,
                            const float *x1, const int64_t *x1_shape, int x1_rank, float *y0,
                            const int64_t *y0_shape, int y0_rank, int64_t *y1,
                            const int64_t *y1_shape, int y1_rank);
int fxcc_leaf_RowMaxShifted(const float *x0, const int64_t *x0_shape, int x0_rank,
                            const float *x1, const int64_t *x1_shape, int x1_rank, float *y0,
                            const int64_t *y0_shape, int y0_rank, int64_t *y1,
                            const int64_t *y1_shape, int y1_rank)
{
    if (x0_rank != 2 || x1_rank != 1 || y0_rank != 1 || y1_rank != 1 ||
        x1_shape[0] != x0_shape[1] || y0_shape[0] != x0_shape[0] || y1_shape[0] != x0_shape[0] ||
        x0_shape[1] < 1)
        return 1;
    for (int64_t i = 0; i < x0_shape[0]; i++) {
        int64_t best = 0;
        for (int64_t j = 1; j < x0_shape[1]; j++)
            if (x0[i * x0_shape[1] + j] + x1[j] > x0[i * x0_shape[1] + best] + x1[best])
                best = j;
        y0[i] = x0[i * x0_shape[1] + best] + x1[best];
        y1[i] = best;
    }
    return 0;
}

/* Square root that refuses negative input with status 5. */
int fxcc_leaf_SqrtChecked(const float *x0, const int64_t *x0_shape, int x0_rank, float *y0,
                          const int64_t *y0_shape, int y0_rank);
int fxcc_leaf_SqrtChecked(const float *x0, const int64_t *x0_shape, int x0_rank, float *y0,
                          const int64_t *y0_shape, int y0_rank)
{
    int64_t n = 1;
    if (x0_rank != y0_rank)
        return 1;
    for (int i = 0; i < x0_rank; i++) {
        if (x0_shape[i] != y0_shape[i])
            return 1;
        n *= x0_shape[i];
    }
    for (int64_t i = 0; i < n; i++) {
        if (x0[i] < 0)
            return 5;
        y0[i] = sqrtf(x0[i]);
    }
    return 0;
}

/* ONNX's Softsign, x / (1 + |x|), for any shape: a leaf standing in for an
 * op fxcc implements itself (--leaf Softsign), so the two can be compared. */
int fxcc_leaf_Softsign(const float *x0, const int64_t *x0_shape, int x0_rank, float *y0,
                       const int64_t *y0_shape, int y0_rank);
int fxcc_leaf_Softsign(const float *x0, const int64_t *x0_shape, int x0_rank, float *y0,
                       const int64_t *y0_shape, int y0_rank)
{
    int64_t n = 1;
    (void)y0_shape;
    (void)y0_rank;
    for (int i = 0; i < x0_rank; i++)
        n *= x0_shape[i];
    for (int64_t i = 0; i < n; i++)
        y0[i] = x0[i] / (1.0f + fabsf(x0[i]));
    return 0;
}
