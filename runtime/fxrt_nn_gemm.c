/*
 * fxrt_nn_gemm.c - matrix products: GEMM (a register-blocked microkernel,
 * or OpenBLAS), its double and integer variants, Gemm's bias broadcast, and
 * ONNX MatMul's batched, broadcasting product built on GEMM, and its
 * strided form that reads transposed operands in place.
 *
 * Every float GEMM ends with an epilogue (fxrt_nn_epilogue.c) applied to
 * each tile of C as soon as the tile is final, so that bias, residual and
 * activation cost no extra pass over memory.  Plain products run the same
 * code with no epilogue.
 *
 * The portable path (B not transposed) is a register-blocked microkernel:
 * an MR x NR tile of C accumulates in local arrays the compiler keeps in
 * vector registers over the whole K loop, reading a strip of B (K x NR,
 * which stays in L1/L2 while the row tiles of A pass over it) and
 * broadcasting single elements of A; the tile is stored once, with alpha,
 * beta and the epilogue.  It never skips a zero multiplier (0 * inf must
 * still make NaN).  A transposed B uses plain blocked dot products.
 *
 * On host (FXRT_USE_CBLAS) small products, where OpenBLAS's packing and call
 * overhead dominate (the convolutions of the small CNNs), run the
 * microkernel's full-width tiles as AVX2/FMA intrinsics (a target attribute,
 * chosen at run time when the CPU has them; the generated build passes no
 * -march); larger ones call
 * cblas_sgemm on blocks of rows of C that stay in L2 and apply the epilogue
 * to each block right after its call.  A single row (batch-1 linear layer)
 * is cblas_sgemv, which reads B in place instead of packing it.
 */
#include <limits.h>
#include <string.h>

#include "fxrt.h"

#ifdef FXRT_USE_CBLAS
#include <cblas.h>
#endif

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_GEMM_AVX2 1
#endif

/* Blocking of the transposed-B loop: a KB x NB panel of B is 32 KiB. */
enum { GEMM_MB = 32, GEMM_KB = 64, GEMM_NB = 128 };

/* Floats of C one cblas_sgemm call produces before its epilogue runs: a
 * 256 KiB block, which stays in L2 next to the panels BLAS packs. */
enum { GEMM_L2_TILE_FLOATS = 1 << 16 };

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* C = beta * C, with beta == 0 writing zeros without reading C. */
static void gemm_scale_f32(int64_t m, int64_t n, float beta, float *c, int64_t ldc)
{
    if (beta == 1.0f)
        return;
    for (int64_t i = 0; i < m; i++) {
        float *row = c + i * ldc;
        if (beta == 0.0f)
            for (int64_t j = 0; j < n; j++)
                row[j] = 0.0f;
        else
            for (int64_t j = 0; j < n; j++)
                row[j] *= beta;
    }
}

/* One MR x NR tile of op(A) B into acc, in plain C: A is read through
 * strides (a_rs per row, a_cs per column) so op(A) may be either layout; row
 * p of B starts at b + p * ldb, or at b + boff[p] when there is a row table
 * (fxrt_gemm_rows_f32).  Only mr x nr of the tile is computed. */
enum { MR = 4, NR = 16 };

static void tile_plain(int64_t mr, int64_t nr, int64_t k, const float *a, int64_t a_rs,
                       int64_t a_cs, const float *b, int64_t ldb, const int64_t *boff,
                       float acc[MR][NR])
{
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++)
            acc[r][j] = 0.0f;
    if (mr == MR && nr == NR) {
        /* Constant bounds, so the compiler unrolls and vectorizes over j. */
        for (int64_t p = 0; p < k; p++) {
            const float *brow = b + (boff ? boff[p] : p * ldb);
            for (int r = 0; r < MR; r++) {
                float av = a[r * a_rs + p * a_cs];
                for (int j = 0; j < NR; j++)
                    acc[r][j] += av * brow[j];
            }
        }
        return;
    }
    for (int64_t p = 0; p < k; p++) {
        const float *brow = b + (boff ? boff[p] : p * ldb);
        for (int64_t r = 0; r < mr; r++) {
            float av = a[r * a_rs + p * a_cs];
            for (int64_t j = 0; j < nr; j++)
                acc[r][j] += av * brow[j];
        }
    }
}

#ifdef FXRT_GEMM_AVX2
#include <immintrin.h>

/* A tile NR wide with AVX2/FMA: eight accumulators (4 rows x 2 vectors)
 * stay in registers over the whole K loop; each step loads one 16-float row
 * of B and broadcasts one element of A per row.  With mr < MR rows the last
 * row is read again in place of the missing ones.  Stores the mr rows
 * straight from the registers, c = alpha * acc + beta * c. */
__attribute__((target("avx2,fma"))) static void tile_avx2(int64_t mr, int64_t k, const float *a,
                                                          int64_t a_rs, int64_t a_cs,
                                                          const float *b, int64_t ldb,
                                                          const int64_t *boff, float alpha,
                                                          float beta, float *c, int64_t ldc)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
    __m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    const float *a0 = a, *a1 = a + (mr > 1 ? 1 : 0) * a_rs;
    const float *a2 = a + (mr > 2 ? 2 : mr - 1) * a_rs, *a3 = a + (mr > 3 ? 3 : mr - 1) * a_rs;
    for (int64_t p = 0; p < k; p++) {
        const float *brow = b + (boff ? boff[p] : p * ldb);
        __m256 b0 = _mm256_loadu_ps(brow), b1 = _mm256_loadu_ps(brow + 8);
        int64_t o = p * a_cs;
        __m256 x = _mm256_broadcast_ss(a0 + o);
        c00 = _mm256_fmadd_ps(x, b0, c00);
        c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a1 + o);
        c10 = _mm256_fmadd_ps(x, b0, c10);
        c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a2 + o);
        c20 = _mm256_fmadd_ps(x, b0, c20);
        c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a3 + o);
        c30 = _mm256_fmadd_ps(x, b0, c30);
        c31 = _mm256_fmadd_ps(x, b1, c31);
    }
    /* Row by row from the registers; the accumulators shift up so that the
     * loop names no register by index (which would force them to memory). */
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    for (int64_t r = 0; r < mr; r++) {
        float *crow = c + r * ldc;
        __m256 y0 = _mm256_mul_ps(va, c00), y1 = _mm256_mul_ps(va, c01);
        if (beta != 0.0f) {
            y0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(crow), y0);
            y1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(crow + 8), y1);
        }
        _mm256_storeu_ps(crow, y0);
        _mm256_storeu_ps(crow + 8, y1);
        c00 = c10;
        c01 = c11;
        c10 = c20;
        c11 = c21;
        c20 = c30;
        c21 = c31;
    }
}

static int cpu_has_avx2(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

/* C = alpha * op(A) B + beta * C tile by tile: a strip of NR columns of B
 * (K x NR floats, which stays in cache) is swept by every row tile of A, and
 * each finished tile is stored once, with alpha, beta and the epilogue. */
static void gemm_tiles(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                       int64_t a_rs, int64_t a_cs, const float *b, int64_t ldb,
                       const int64_t *boff, float beta, float *c, int64_t ldc,
                       const FxrtEpilogue *ep)
{
#ifdef FXRT_GEMM_AVX2
    int avx2 = cpu_has_avx2();
#endif
    float acc[MR][NR];
    for (int64_t j0 = 0; j0 < n; j0 += NR) {
        int64_t nr = min64(NR, n - j0);
        for (int64_t i0 = 0; i0 < m; i0 += MR) {
            int64_t mr = min64(MR, m - i0);
            const float *ap = a + i0 * a_rs, *bp = b + j0;
#ifdef FXRT_GEMM_AVX2
            if (avx2 && nr == NR) {
                tile_avx2(mr, k, ap, a_rs, a_cs, bp, ldb, boff, alpha, beta,
                          c + i0 * ldc + j0, ldc);
                if (ep)
                    fxrt_epilogue_apply_f32(ep, i0, j0, mr, nr, c + i0 * ldc + j0, ldc);
                continue;
            }
#endif
            tile_plain(mr, nr, k, ap, a_rs, a_cs, bp, ldb, boff, acc);
            for (int64_t r = 0; r < mr; r++) {
                float *crow = c + (i0 + r) * ldc + j0;
                if (beta == 0.0f)
                    for (int64_t j = 0; j < nr; j++)
                        crow[j] = alpha * acc[r][j];
                else
                    for (int64_t j = 0; j < nr; j++)
                        crow[j] = alpha * acc[r][j] + beta * crow[j];
            }
            if (ep)
                fxrt_epilogue_apply_f32(ep, i0, j0, mr, nr, c + i0 * ldc + j0, ldc);
        }
    }
}

/* B transposed (N x K): dot products over p, unit stride in B, in row blocks
 * whose epilogue runs once the block is complete. */
static void gemm_trans_b_f32(int trans_a, int64_t m, int64_t n, int64_t k, float alpha,
                             const float *a, int64_t lda, const float *b, int64_t ldb,
                             float beta, float *c, int64_t ldc, const FxrtEpilogue *ep)
{
    gemm_scale_f32(m, n, beta, c, ldc);
    for (int64_t i0 = 0; i0 < m; i0 += GEMM_MB) {
        int64_t i1 = min64(m, i0 + GEMM_MB);
        for (int64_t p0 = 0; p0 < k; p0 += GEMM_KB) {
            int64_t p1 = min64(k, p0 + GEMM_KB);
            for (int64_t j0 = 0; j0 < n; j0 += GEMM_NB) {
                int64_t j1 = min64(n, j0 + GEMM_NB);
                for (int64_t i = i0; i < i1; i++) {
                    float *crow = c + i * ldc;
                    for (int64_t j = j0; j < j1; j++) {
                        const float *bcol = b + j * ldb;
                        float s = 0.0f;
                        if (!trans_a) {
                            const float *arow = a + i * lda;
                            for (int64_t p = p0; p < p1; p++)
                                s += arow[p] * bcol[p];
                        } else {
                            for (int64_t p = p0; p < p1; p++)
                                s += a[p * lda + i] * bcol[p];
                        }
                        crow[j] += alpha * s;
                    }
                }
            }
        }
        fxrt_epilogue_apply_f32(ep, i0, 0, i1 - i0, n, c + i0 * ldc, ldc);
    }
}

static void gemm_portable_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                              float alpha, const float *a, int64_t lda, const float *b,
                              int64_t ldb, float beta, float *c, int64_t ldc,
                              const FxrtEpilogue *ep)
{
    if (trans_b) {
        gemm_trans_b_f32(trans_a, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ep);
        return;
    }
    gemm_tiles(m, n, k, alpha, a, trans_a ? 1 : lda, trans_a ? lda : 1, b, ldb, NULL, beta, c,
               ldc, ep);
}

#ifdef FXRT_USE_CBLAS
/* Multiply-accumulates below which the microkernel beats cblas_sgemm's
 * packing and dispatch on one core (measured on the bench's CNN layers). */
enum { GEMM_SMALL_MACS = 1 << 22 };

/* The rows x cols block of C at (row0, col0) = ep's bias there. */
static void bias_block(const FxrtEpilogue *ep, int64_t row0, int64_t col0, int64_t rows,
                       int64_t cols, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < rows; i++) {
        const float *b = ep->bias + (row0 + i) * ep->bias_row_stride + col0 * ep->bias_col_stride;
        float *row = c + i * ldc;
        if (ep->bias_col_stride == 1)
            memcpy(row, b, (size_t)cols * sizeof *row);
        else
            for (int64_t t = 0; t < cols; t++)
                row[t] = b[t * ep->bias_col_stride];
    }
}

/* cblas_sgemm / sgemv, or 0 when a size does not fit BLAS's int. */
static int gemm_cblas_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                          float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                          float beta, float *c, int64_t ldc, const FxrtEpilogue *ep)
{
    /* BLAS wants int sizes and leading dimensions >= 1; k == 0 is only a
     * scaling, which some BLAS builds reject with a printed message. */
    if (!(k > 0 && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX &&
          ldb <= INT_MAX && ldc <= INT_MAX))
        return 0;
    int ilda = (int)(lda > 0 ? lda : 1), ildb = (int)(ldb > 0 ? ldb : 1);
    int ildc = (int)(ldc > 0 ? ldc : 1);
    if (m == 1) {
        /* A row vector (batch 1): sgemv reads B in place, where sgemm
         * would first pack all of it, which dominated MLP time. */
        if (beta == 0.0f) /* C is not read when beta is 0, even if NaN */
            for (int64_t j = 0; j < n; j++)
                c[j] = 0.0f;
        int incx = trans_a ? ilda : 1;
        if (trans_b)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)k, alpha, b, ildb, a, incx,
                        beta, c, 1);
        else
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)k, (int)n, alpha, b, ildb, a, incx,
                        beta, c, 1);
        fxrt_epilogue_apply_f32(ep, 0, 0, 1, n, c, ldc);
        return 1;
    }
    /* A bias is written into C before the call, which then adds the
     * product to it (beta 1): that is the bias step of the epilogue in its
     * order, acc + bias, and it replaces the pass in which BLAS would zero C
     * for beta 0 (the rest of the epilogue follows the call as usual). */
    const FxrtEpilogue *bias = ep && ep->bias && beta == 0.0f ? ep : NULL;
    FxrtEpilogue after_bias;
    if (bias) {
        after_bias = *ep;
        after_bias.bias = NULL;
        ep = fxrt_epilogue_active(&after_bias) ? &after_bias : NULL;
    }
    /* Without an epilogue one call does it all; with one, blocks of C that
     * stay in L2 until their epilogue has run.  Each call packs its slice
     * of A and B again, so the blocks split the dimension whose operand is
     * the smaller one to re-pack: rows (B re-packed) when B is smaller than
     * A, else columns (A re-packed). */
    int tile_rows = (double)k * (double)n <= (double)m * (double)k;
    int64_t rows = m, cols = n;
    if (fxrt_epilogue_active(ep)) {
        if (tile_rows)
            rows = GEMM_L2_TILE_FLOATS / n < 8 ? 8 : GEMM_L2_TILE_FLOATS / n;
        else
            cols = GEMM_L2_TILE_FLOATS / m < 16 ? 16 : GEMM_L2_TILE_FLOATS / m;
    }
    for (int64_t i0 = 0; i0 < m; i0 += rows)
        for (int64_t j0 = 0; j0 < n; j0 += cols) {
            int64_t mr = min64(rows, m - i0), nc = min64(cols, n - j0);
            const float *ap = a + (trans_a ? i0 : i0 * lda);
            const float *bp = b + (trans_b ? j0 * ldb : j0);
            float *cp = c + i0 * ldc + j0;
            if (bias)
                bias_block(bias, i0, j0, mr, nc, cp, ldc);
            cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                        trans_b ? CblasTrans : CblasNoTrans, (int)mr, (int)nc, (int)k, alpha, ap,
                        ilda, bp, ildb, bias ? 1.0f : beta, cp, ildc);
            fxrt_epilogue_apply_f32(ep, i0, j0, mr, nc, cp, ldc);
        }
    return 1;
}
#endif

/* The small build's GEMM (FXRT_SMALL_KERNELS): one dot product per element
 * with int indices, the epilogue on each finished row; a few hundred bytes
 * of code for the classifier layers a microcontroller model ends with. */
static void gemm_small_f32(int trans_a, int trans_b, int m, int n, int k, float alpha,
                           const float *a, int lda, const float *b, int ldb, float beta, float *c,
                           int ldc, const FxrtEpilogue *ep)
{
    int a_row = trans_a ? 1 : lda, a_col = trans_a ? lda : 1;
    int b_row = trans_b ? 1 : ldb, b_col = trans_b ? ldb : 1;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            float s = 0.0f;
            for (int p = 0; p < k; p++)
                s += a[i * a_row + p * a_col] * b[p * b_row + j * b_col];
            float *cij = c + i * ldc + j;
            *cij = alpha * s + (beta == 0.0f ? 0.0f : beta * *cij);
        }
        if (ep)
            fxrt_epilogue_apply_f32(ep, i, 0, 1, n, c + i * ldc, ldc);
    }
}

void fxrt_gemm_ep_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc, const FxrtEpilogue *ep)
{
    if (m <= 0 || n <= 0)
        return;
    if (!fxrt_epilogue_active(ep))
        ep = NULL;
    if (FXRT_SMALL_KERNELS) {
        gemm_small_f32(trans_a, trans_b, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb,
                       beta, c, (int)ldc, ep);
        return;
    }
#ifdef FXRT_USE_CBLAS
    int small = !trans_b && m > 1 && (double)m * (double)n * (double)k <= GEMM_SMALL_MACS;
    if (!small && gemm_cblas_f32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                 ep))
        return;
#endif
    gemm_portable_f32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ep);
}

void fxrt_gemm_rows_f32(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                        const int64_t *b_rows, float *c, int64_t ldc)
{
    if (m > 0 && n > 0)
        gemm_tiles(m, n, k, 1.0f, a, k, 1, b, 0, b_rows, 0.0f, c, ldc, NULL);
}

void fxrt_gemm_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                   float *c, int64_t ldc)
{
    fxrt_gemm_ep_f32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL);
}

void fxrt_gemm_f64(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                   const double *a, int64_t lda, const double *b, int64_t ldb, double beta,
                   double *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0;
            for (int64_t p = 0; p < k; p++)
                s += (trans_a ? a[p * lda + i] : a[i * lda + p]) *
                     (trans_b ? b[j * ldb + p] : b[p * ldb + j]);
            double *cij = c + i * ldc + j;
            *cij = alpha * s + (beta == 0.0 ? 0.0 : beta * *cij);
        }
}

void fxrt_gemm_generic(FxrtDType t, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                       double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                       double beta, void *c, int64_t ldc)
{
    if (t == FXRT_DTYPE_FLOAT32) {
        fxrt_gemm_f32(trans_a, trans_b, m, n, k, (float)alpha, a, lda, b, ldb, (float)beta, c,
                      ldc);
        return;
    }
    if (t == FXRT_DTYPE_FLOAT64) {
        fxrt_gemm_f64(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    /* Integers: exact wrapping arithmetic when alpha is 1 and beta 0 or 1
     * (the only cases integer models use), else through double. */
    int exact = alpha == 1.0 && (beta == 0.0 || beta == 1.0);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            uint64_t s = 0;
            for (int64_t p = 0; p < k; p++) {
                uint64_t av = (uint64_t)fxrt_load_i64(t, a, (size_t)(trans_a ? p * lda + i
                                                                             : i * lda + p));
                uint64_t bv = (uint64_t)fxrt_load_i64(t, b, (size_t)(trans_b ? j * ldb + p
                                                                             : p * ldb + j));
                s += av * bv;
            }
            size_t ci = (size_t)(i * ldc + j);
            if (exact) {
                if (beta == 1.0)
                    s += (uint64_t)fxrt_load_i64(t, c, ci);
                fxrt_store_i64(t, c, ci, (int64_t)s);
            } else {
                double v = alpha * (double)(int64_t)s;
                if (beta != 0.0)
                    v += beta * fxrt_load_f64(t, c, ci);
                fxrt_store_f64(t, c, ci, v);
            }
        }
}

void fxrt_bias_fill_f32(int64_t m, int64_t n, const float *bias, int64_t bias_rows,
                        int64_t bias_cols, float *c, int64_t ldc)
{
    for (int64_t i = 0; i < m; i++) {
        const float *brow = bias + (bias_rows == 1 ? 0 : i) * bias_cols;
        float *crow = c + i * ldc;
        if (bias_cols == 1)
            for (int64_t j = 0; j < n; j++)
                crow[j] = brow[0];
        else
            memcpy(crow, brow, (size_t)n * sizeof *crow);
    }
}

/* --- MatMul --------------------------------------------------------------- */

int fxrt_matmul_params_init(FxrtMatMulParams *p, int a_rank, const int64_t *a_dims, int b_rank,
                            const int64_t *b_dims)
{
    memset(p, 0, sizeof *p);
    if (a_rank < 1 || b_rank < 1 || a_rank > FXRT_MAX_RANK || b_rank > FXRT_MAX_RANK)
        return -1;
    p->m = a_rank == 1 ? 1 : a_dims[a_rank - 2];
    p->k = a_dims[a_rank - 1];
    int64_t kb = b_rank == 1 ? b_dims[0] : b_dims[b_rank - 2];
    p->n = b_rank == 1 ? 1 : b_dims[b_rank - 1];
    if (kb != p->k)
        return -1;
    int abr = a_rank > 2 ? a_rank - 2 : 0, bbr = b_rank > 2 ? b_rank - 2 : 0;
    int br = abr > bbr ? abr : bbr;
    int64_t da[FXRT_MAX_RANK], db[FXRT_MAX_RANK];
    for (int d = 0; d < br; d++) {
        int ia = d - (br - abr), ib = d - (br - bbr);
        da[d] = ia >= 0 ? a_dims[ia] : 1;
        db[d] = ib >= 0 ? b_dims[ib] : 1;
        if (da[d] != db[d] && da[d] != 1 && db[d] != 1)
            return -1;
    }
    /* Element strides of each operand's batch dims (0 where broadcast),
     * keeping only dims of size > 1. */
    int64_t sa = p->m * p->k, sb = p->k * p->n;
    int64_t stride_a[FXRT_MAX_RANK], stride_b[FXRT_MAX_RANK];
    for (int d = br - 1; d >= 0; d--) {
        stride_a[d] = da[d] == 1 ? 0 : sa;
        stride_b[d] = db[d] == 1 ? 0 : sb;
        sa *= da[d];
        sb *= db[d];
    }
    int64_t total = 1;
    int a_full = 1, b_shared = 1;
    for (int d = 0; d < br; d++) {
        int64_t size = da[d] > db[d] ? da[d] : db[d];
        if (da[d] == 0 || db[d] == 0)
            size = 0;
        if (size == 1)
            continue;
        int r = p->batch_rank++;
        p->batch_dims[r] = size;
        p->a_strides[r] = stride_a[d];
        p->b_strides[r] = stride_b[d];
        a_full &= stride_a[d] != 0;
        b_shared &= stride_b[d] == 0;
        total *= size;
    }
    /* A [batch..., m, k] x shared B: the batch is just more rows. */
    if (p->batch_rank > 0 && a_full && b_shared) {
        p->m *= total;
        p->batch_rank = 0;
    }
    return 0;
}

/* Number of matrix products in the batch. */
int64_t fxrt_matmul_batch_count(const FxrtMatMulParams *p)
{
    int64_t total = 1;
    for (int r = 0; r < p->batch_rank; r++)
        total *= p->batch_dims[r];
    return total;
}

/* Element offsets of batch entry `index` in A and B (the division per
 * product costs nothing next to the product itself). */
void fxrt_matmul_batch_offsets(const FxrtMatMulParams *p, int64_t index, int64_t *oa,
                               int64_t *ob)
{
    *oa = *ob = 0;
    for (int r = p->batch_rank - 1; r >= 0; r--) {
        int64_t i = index % p->batch_dims[r];
        index /= p->batch_dims[r];
        *oa += i * p->a_strides[r];
        *ob += i * p->b_strides[r];
    }
}

void fxrt_matmul_f32(const FxrtMatMulParams *p, const float *a, const float *b, float *y)
{
    int64_t count = fxrt_matmul_batch_count(p), mn = p->m * p->n;
    for (int64_t e = 0; e < count; e++) {
        int64_t oa, ob;
        fxrt_matmul_batch_offsets(p, e, &oa, &ob);
        fxrt_gemm_f32(0, 0, p->m, p->n, p->k, 1.0f, a + oa, p->k, b + ob, p->n, 0.0f,
                      y + e * mn, p->n);
    }
}

void fxrt_matmul_strided_f32(const FxrtStridedMatMul *p, const float *a, const float *b,
                             float *y)
{
    int64_t count = 1;
    for (int r = 0; r < p->batch_rank; r++)
        count *= p->batch_dims[r];
    for (int64_t e = 0; e < count; e++) {
        int64_t oa = 0, ob = 0, oy = 0, index = e;
        for (int r = p->batch_rank - 1; r >= 0; r--) {
            int64_t i = index % p->batch_dims[r];
            index /= p->batch_dims[r];
            oa += i * p->a_strides[r];
            ob += i * p->b_strides[r];
            oy += i * p->y_strides[r];
        }
        fxrt_gemm_f32(p->trans_a, p->trans_b, p->m, p->n, p->k, 1.0f, a + oa, p->lda, b + ob,
                      p->ldb, 0.0f, y + oy, p->ldc);
    }
}

void fxrt_matmul_generic(FxrtDType t, const FxrtMatMulParams *p, const void *a, const void *b,
                         void *y)
{
    size_t es = fxrt_dtype_size(t);
    int64_t count = fxrt_matmul_batch_count(p), mn = p->m * p->n;
    for (int64_t e = 0; e < count; e++) {
        int64_t oa, ob;
        fxrt_matmul_batch_offsets(p, e, &oa, &ob);
        fxrt_gemm_generic(t, 0, 0, p->m, p->n, p->k, 1.0, (const char *)a + (size_t)oa * es,
                          p->k, (const char *)b + (size_t)ob * es, p->n, 0.0,
                          (char *)y + (size_t)(e * mn) * es, p->n);
    }
}
