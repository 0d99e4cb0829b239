/*
 * fxrt_nn_gemm_packed.c - the float matrix product against weights packed
 * once, at compile time (the gemm-pack pass), for the linear layers of
 * small-batch transformers and MLPs: C = epilogue(alpha * A B), A row-major
 * m x k, B given to fxrt_gemm_pack_b_f32 in either layout.
 *
 * Why: at a few dozen rows cblas_sgemm spends most of its time packing B
 * again on every call, and the unpacked microkernel of fxrt_nn_gemm.c reads
 * B through its row stride.  Packed, each step of the K loop reads one
 * contiguous 64-byte row of a panel.
 *
 * The packing (one for every instruction set): panels of 16 columns, panel
 * q holding columns 16q..16q+15 as k rows of 16 floats, zeros past n, so
 * that a tile never reads outside the blob and needs no column tail code
 * before its store.
 *
 * Tiles, the widest the CPU has chosen by CPUID at each call and capped by
 * fxrt_gemm_packed_limit_isa (fxrt_isa.h):
 *   - AVX-512: up to 8 rows x 32 columns (two panels), 16 zmm accumulators,
 *     masked stores for a column tail;
 *   - AVX2/FMA: up to 6 rows x 16 columns, 12 ymm accumulators, an
 *     instance for each row count;
 *   - portable C99: 4 rows x 16 columns in local arrays the compiler keeps
 *     in registers (the firmware path, and the reference the tests compare
 *     the others with).
 * Each accumulates over the whole K range from zero, in the order of p, so
 * every level rounds the same way except for FMA's single rounding.  A
 * missing row of a tail tile reads the last real row again (its result is
 * never stored; the AVX2 tiles have no missing rows).  Zero multipliers
 * are not skipped (0 x inf stays NaN).
 *
 * Walk: blocks of columns whose panels fit in L2 (B_BLOCK_BYTES) are
 * outermost; within a block each tile of rows sweeps all its panels, then
 * the epilogue (fxrt_nn_epilogue.c) runs on that rows x block strip while
 * it is still in L1.
 */
#include <stdbool.h>
#include <string.h>

#include "fxrt.h"
#include "fxrt_isa.h"

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_GEMM_PACKED_X86 1
#include <immintrin.h>
#endif

enum { PANEL = 16, MR_PORTABLE = 4, MR_AVX2 = 6, MR_AVX512 = 8 };

/* Bytes of packed B one column block may span: a share of L2 that leaves
 * room for the rows of A and C passing over it. */
static const int64_t B_BLOCK_BYTES = 256 * 1024;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

int64_t fxrt_gemm_packed_floats(int64_t n, int64_t k)
{
    return (n + PANEL - 1) / PANEL * PANEL * k;
}

void fxrt_gemm_pack_b_f32(int trans_b, int64_t n, int64_t k, const float *b, int64_t ldb,
                          float *packed)
{
    for (int64_t q = 0; q * PANEL < n; q++)
        for (int64_t p = 0; p < k; p++) {
            float *row = packed + (q * k + p) * PANEL;
            for (int64_t j = 0; j < PANEL; j++) {
                int64_t col = q * PANEL + j;
                row[j] = col >= n ? 0.0f : trans_b ? b[col * ldb + p] : b[p * ldb + col];
            }
        }
}

/* What every tile reads: A with its row stride, the panels, alpha. */
typedef struct PackedGemm {
    const float *a;
    int64_t lda, k;
    const float *panels; /* panel q at panels + q * k * PANEL */
    float alpha;
    float *c;
    int64_t ldc;
} PackedGemm;

/* Rows row0.. (rows of them) x columns col0.. (cols <= PANEL) in plain C. */
static void tile_portable(const PackedGemm *g, int64_t row0, int rows, int64_t col0, int cols)
{
    float acc[MR_PORTABLE][PANEL];
    const float *arow[MR_PORTABLE];
    for (int r = 0; r < MR_PORTABLE; r++) {
        arow[r] = g->a + (row0 + (r < rows ? r : rows - 1)) * g->lda;
        for (int j = 0; j < PANEL; j++)
            acc[r][j] = 0.0f;
    }
    const float *b = g->panels + col0 / PANEL * g->k * PANEL;
    for (int64_t p = 0; p < g->k; p++, b += PANEL)
        for (int r = 0; r < MR_PORTABLE; r++) {
            float av = arow[r][p];
            for (int j = 0; j < PANEL; j++)
                acc[r][j] += av * b[j];
        }
    for (int r = 0; r < rows; r++) {
        float *crow = g->c + (row0 + r) * g->ldc + col0;
        for (int j = 0; j < cols; j++)
            crow[j] = g->alpha * acc[r][j];
    }
}

typedef void (*TileFn)(const PackedGemm *, int64_t, int, int64_t, int);

#ifdef FXRT_GEMM_PACKED_X86
/* The accumulators stay in registers only if the loops over a tile's rows
 * are unrolled, which gcc does at -O3 but not at -O2 (there the tiles ran
 * at half speed, the arrays spilled to the stack): asked for explicitly. */
#define UNROLL_ROWS _Pragma("GCC unroll 8")
/* Four steps of the K loop per iteration: one step per iteration left the
 * loop's own instructions (pointer bumps, compare, branch) between every
 * 16 multiply-adds, 12-17% of the AVX-512 tile's speed on ConvNeXt's and
 * the transformers' shapes (eight steps measured the same as four). */
#define UNROLL_K _Pragma("GCC unroll 4")

/* R x 16 with AVX2/FMA, R <= 6 fixed at compile time (tile_avx2 below
 * picks the instance): per step one panel row in two ymm, one broadcast per
 * row, no work on rows the tile does not have. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile_avx2_rows(const PackedGemm *g, int64_t row0, const int R, int64_t col0, int cols)
{
    __m256 acc[MR_AVX2][2];
    const float *arow[MR_AVX2];
    UNROLL_ROWS
    for (int r = 0; r < R; r++) {
        arow[r] = g->a + (row0 + r) * g->lda;
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    }
    const float *b = g->panels + col0 / PANEL * g->k * PANEL;
    UNROLL_K
    for (int64_t p = 0; p < g->k; p++, b += PANEL) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        UNROLL_ROWS
        for (int r = 0; r < R; r++) {
            __m256 x = _mm256_broadcast_ss(arow[r] + p);
            acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
        }
    }
    __m256 va = _mm256_set1_ps(g->alpha);
    UNROLL_ROWS
    for (int r = 0; r < R; r++) {
        float *crow = g->c + (row0 + r) * g->ldc + col0;
        __m256 y0 = _mm256_mul_ps(va, acc[r][0]), y1 = _mm256_mul_ps(va, acc[r][1]);
        if (cols == PANEL) {
            _mm256_storeu_ps(crow, y0);
            _mm256_storeu_ps(crow + 8, y1);
        } else {
            float tail[PANEL];
            _mm256_storeu_ps(tail, y0);
            _mm256_storeu_ps(tail + 8, y1);
            memcpy(crow, tail, (size_t)cols * sizeof *crow);
        }
    }
}

__attribute__((target("avx2,fma"))) static void tile_avx2(const PackedGemm *g, int64_t row0,
                                                          int rows, int64_t col0, int cols)
{
    switch (rows) {
    case 1: tile_avx2_rows(g, row0, 1, col0, cols); break;
    case 2: tile_avx2_rows(g, row0, 2, col0, cols); break;
    case 3: tile_avx2_rows(g, row0, 3, col0, cols); break;
    case 4: tile_avx2_rows(g, row0, 4, col0, cols); break;
    case 5: tile_avx2_rows(g, row0, 5, col0, cols); break;
    default: tile_avx2_rows(g, row0, 6, col0, cols); break;
    }
}

/* Up to 8 x 32 with AVX-512: two panels (the second only when cols > 16),
 * 16 zmm accumulators. */
__attribute__((target("avx512f"))) static void tile_avx512(const PackedGemm *g, int64_t row0,
                                                           int rows, int64_t col0, int cols)
{
    __m512 acc[MR_AVX512][2];
    const float *arow[MR_AVX512];
    UNROLL_ROWS
    for (int r = 0; r < MR_AVX512; r++) {
        arow[r] = g->a + (row0 + (r < rows ? r : rows - 1)) * g->lda;
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    }
    const float *b0p = g->panels + col0 / PANEL * g->k * PANEL;
    if (cols > PANEL) {
        const float *b1p = b0p + g->k * PANEL;
        UNROLL_K
        for (int64_t p = 0; p < g->k; p++) {
            __m512 b0 = _mm512_loadu_ps(b0p + p * PANEL), b1 = _mm512_loadu_ps(b1p + p * PANEL);
            UNROLL_ROWS
            for (int r = 0; r < MR_AVX512; r++) {
                __m512 x = _mm512_set1_ps(arow[r][p]);
                acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
            }
        }
    } else {
        UNROLL_K
        for (int64_t p = 0; p < g->k; p++) {
            __m512 b0 = _mm512_loadu_ps(b0p + p * PANEL);
            UNROLL_ROWS
            for (int r = 0; r < MR_AVX512; r++)
                acc[r][0] = _mm512_fmadd_ps(_mm512_set1_ps(arow[r][p]), b0, acc[r][0]);
        }
    }
    __m512 va = _mm512_set1_ps(g->alpha);
    __mmask16 m0 = (__mmask16)(cols >= PANEL ? 0xFFFF : (1u << cols) - 1u);
    __mmask16 m1 = (__mmask16)(cols >= 2 * PANEL ? 0xFFFF
                               : cols > PANEL    ? (1u << (cols - PANEL)) - 1u
                                                 : 0u);
    UNROLL_ROWS
    for (int r = 0; r < MR_AVX512; r++) {
        if (r >= rows)
            break;
        float *crow = g->c + (row0 + r) * g->ldc + col0;
        _mm512_mask_storeu_ps(crow, m0, _mm512_mul_ps(va, acc[r][0]));
        _mm512_mask_storeu_ps(crow + PANEL, m1, _mm512_mul_ps(va, acc[r][1]));
    }
}

/* The widest tiles in use: 2 AVX-512, 1 AVX2, 0 portable; capped by
 * fxrt_gemm_packed_limit_isa (runtime/fxrt_isa.h). */
static int isa_cap = 2;

void fxrt_gemm_packed_limit_isa(int level) { isa_cap = level; }
#else
void fxrt_gemm_packed_limit_isa(int level) { (void)level; }
#endif

void fxrt_gemm_packed_f32(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                          int64_t lda, const float *packed, float *c, int64_t ldc,
                          const FxrtEpilogue *ep)
{
    if (m <= 0 || n <= 0)
        return;
    if (!fxrt_epilogue_active(ep))
        ep = NULL;
    if (k <= 0) {
        /* An empty sum: C is the epilogue of zeros. */
        for (int64_t i = 0; i < m; i++)
            memset(c + i * ldc, 0, (size_t)n * sizeof *c);
        if (ep)
            fxrt_epilogue_apply_f32(ep, 0, 0, m, n, c, ldc);
        return;
    }
    PackedGemm g = {.a = a, .lda = lda, .k = k, .panels = packed, .alpha = alpha, .c = c,
                    .ldc = ldc};
    TileFn tile = tile_portable;
    int64_t mr = MR_PORTABLE, nr = PANEL;
    /* Whether the tile does work only for the rows it is given; the others
     * compute mr rows whatever the count, so their tiles are kept full. */
    bool exact_rows = false;
#ifdef FXRT_GEMM_PACKED_X86
    if (isa_cap >= 2 && __builtin_cpu_supports("avx512f")) {
        tile = tile_avx512;
        mr = MR_AVX512;
        nr = 2 * PANEL;
    } else if (isa_cap >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        tile = tile_avx2;
        mr = MR_AVX2;
        exact_rows = true;
    }
#endif
    /* The rows go to as few tiles as mr allows; with exact tiles they are
     * shared out evenly, since a tile of two rows (four accumulators) waits
     * on the FMA latency: 32 rows as 6+6+5+5+5+5 rather than 6+6+6+6+6+2
     * took 12-25% less time on a transformer's 32-token layers (Zen 3). */
    int64_t tiles = (m + mr - 1) / mr;
    int64_t base_rows = exact_rows ? m / tiles : mr, taller = exact_rows ? m % tiles : 0;
    /* Whole tiles of columns per block, at least one. */
    int64_t block = B_BLOCK_BYTES / ((int64_t)sizeof(float) * k) / nr * nr;
    if (block < nr)
        block = nr;
    for (int64_t j0 = 0; j0 < n; j0 += block) {
        int64_t j1 = min64(n, j0 + block);
        int64_t i0 = 0;
        for (int64_t t = 0; t < tiles; t++) {
            int rows = (int)min64(base_rows + (t < taller), m - i0);
            for (int64_t j = j0; j < j1; j += nr)
                tile(&g, i0, rows, j, (int)min64(nr, j1 - j));
            if (ep)
                fxrt_epilogue_apply_f32(ep, i0, j0, rows, j1 - j0, c + i0 * ldc + j0, ldc);
            i0 += rows;
        }
    }
}
