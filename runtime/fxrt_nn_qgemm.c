/*
 * fxrt_nn_qgemm.c - the fast 8-bit matrix product: int8 weights packed once
 * (at compile time) into the order the tile kernels read, uint8 or int8
 * activations, int32 accumulation, and requantization in fixed point fused
 * into the store of each tile (see fxrt_nn.h for the layout and the API).
 *
 * One packing serves every instruction set.  A k-group is four consecutive
 * k values; for each group a panel of 16 columns holds 16 x 4 bytes, column
 * by column, which is one zmm of vpdpbusd's signed operand.  An int8
 * activation is read as a + 128 (flip its top bit), so that one unsigned
 * x signed product serves both activation types; the - (a_zp + 128) x
 * colsum(B) that this and the zero point leave in every sum is a constant
 * per column, folded into the packed bias together with the user's bias.
 * The accumulators start from that bias, so a finished tile only needs the
 * rescale, the output zero point and the clamp.
 *
 * Tiles, the widest the CPU has chosen by CPUID at each call and capped by
 * fxrt_qgemm_limit_isa (fxrt_isa.h):
 *   - AVX-512 VNNI: up to 6 rows x 32 columns, 12 zmm accumulators, one
 *     vpdpbusd per row, panel and k-group; A by row pointers or rows;
 *   - AVX2 when every pair of weights that vpmaddubsw would add has
 *     |b0| + |b1| <= 128 (7-bit weights): up to 6 rows x 16 columns by
 *     vpmaddubsw, which cannot saturate then, and vpmaddwd by ones;
 *   - AVX2 otherwise: up to 5 rows x 16 columns, in two passes of 8 columns that
 *     share the rows' A pointers.  vpmaddubsw would saturate its int16
 *     pair sums (255 x -128 twice does not fit), so A is zero-extended and
 *     B sign-extended to int16 and vpmaddwd sums the pairs into int32; each
 *     column then holds two partial sums (k0 k1 and k2 k3) that a
 *     horizontal add merges at the end.  Reads A by row pointers too, the
 *     implicit im2col of fxrt_nn_qconv.c;
 *   - portable C99: 4 rows x 16 columns of uint32 accumulators (unsigned so
 *     that a wrap is defined, as in fxrt_gemm_integer), the firmware path;
 *     on an Arm core with the DSP extension (__ARM_FEATURE_DSP: Cortex-M4,
 *     M7, M33, M55) the same tile by SMLAD, two products per instruction.
 * The SIMD kernels exist only on host builds (FXRT_USE_CBLAS, x86-64, GCC or
 * Clang); the portable runtime is plain C.
 *
 * Order of the walk: when the packed weights fit in L2 the row tiles are
 * outermost and every tile of rows sweeps all of B; otherwise (a large
 * fully connected layer) the column blocks are outermost, so that one block
 * of B stays in cache while all of A, the smaller operand there, streams
 * past it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fxrt.h"
#include "fxrt_isa.h"

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_QGEMM_X86 1
#include "fxrt_quant_x86.h"
#endif

enum { PANEL = 16, KGROUP = 4 };

/* Packed weights above this size make the column blocks the outer loop. */
static const int64_t B_IN_CACHE_BYTES = 512 * 1024;

static int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

int fxrt_quant_multiplier(double real_scale, int32_t *multiplier, int *shift)
{
    /* The negated form also refuses NaN. */
    if (!(real_scale >= 0x1p-32 && real_scale < 1.0))
        return -1;
    int exponent;
    double fraction = frexp(real_scale, &exponent); /* in [0.5, 1), exponent in [-31, 0] */
    int64_t m = (int64_t)nearbyint(ldexp(fraction, 31));
    if (m == ((int64_t)1 << 31)) { /* rounded up to the next power of two */
        m >>= 1;
        exponent++;
    }
    *multiplier = (int32_t)m;
    *shift = 31 - exponent;
    return 0;
}

int64_t fxrt_quant_rescale(int32_t v, int32_t multiplier, int shift)
{
    /* Round half to even is symmetric about 0, so the magnitude is rounded
     * in unsigned arithmetic, where every shift is defined. */
    int64_t p = (int64_t)v * multiplier;
    uint64_t u = p < 0 ? 0u - (uint64_t)p : (uint64_t)p;
    uint64_t odd = (u >> shift) & 1u;
    uint64_t q = (u + ((uint64_t)1 << (shift - 1)) - 1u + odd) >> shift;
    return p < 0 ? -(int64_t)q : (int64_t)q;
}

int64_t fxrt_qgemm_packed_bytes(int64_t n, int64_t k)
{
    int64_t n_pad = round_up(n, PANEL);
    return n_pad * round_up(k, KGROUP) + (3 * n_pad + n_pad / PANEL) * (int64_t)sizeof(int32_t);
}

/* The int32 arrays behind the weights: per column bias, multiplier and
 * shift, then per panel the largest |b0| + |b1| of a pair of weights that
 * vpmaddubsw would add (k 0 and 1, or 2 and 3, of a group). */
static int32_t *packed_columns(const void *packed, int64_t n, int64_t k)
{
    return (int32_t *)((uintptr_t)packed + (uintptr_t)(round_up(n, PANEL) * round_up(k, KGROUP)));
}

int fxrt_qgemm_pack_b(int64_t n, int64_t k, const int8_t *b, const int32_t *bias,
                      const float *scale, int64_t scale_count, FxrtDType a_type, int32_t a_zp,
                      void *packed)
{
    int64_t n_pad = round_up(n, PANEL), k_pad = round_up(k, KGROUP);
    int32_t *col_bias = packed_columns(packed, n, k);
    int32_t *col_mult = col_bias + n_pad, *col_shift = col_mult + n_pad;
    int32_t *panel_pair_max = col_shift + n_pad;
    int64_t a_offset = (int64_t)a_zp + (a_type == FXRT_DTYPE_INT8 ? 128 : 0);
    int8_t *w = (int8_t *)packed;
    for (int64_t j = 0; j < n_pad; j++) {
        int64_t colsum = 0;
        if (j % PANEL == 0)
            panel_pair_max[j / PANEL] = 0;
        for (int64_t p = 0; p < k_pad; p++) {
            int8_t v = j < n && p < k ? b[p * n + j] : 0;
            colsum += v;
            if (p % 2 == 1) {
                int8_t first = j < n && p - 1 < k ? b[(p - 1) * n + j] : 0;
                int32_t pair = abs(first) + abs(v);
                if (pair > panel_pair_max[j / PANEL])
                    panel_pair_max[j / PANEL] = pair;
            }
            w[(j / PANEL) * PANEL * k_pad + (p / KGROUP) * PANEL * KGROUP + (j % PANEL) * KGROUP +
              p % KGROUP] = v;
        }
        /* Modulo 2^32 like the accumulators it seeds. */
        uint64_t seed = (uint64_t)(j < n && bias ? bias[j] : 0) - (uint64_t)(a_offset * colsum);
        col_bias[j] = (int32_t)(uint32_t)seed;
        col_mult[j] = 0;
        col_shift[j] = 31;
        if (j < n && scale) {
            int s;
            if (fxrt_quant_multiplier(scale[scale_count == 1 ? 0 : j], &col_mult[j], &s) != 0)
                return -1;
            col_shift[j] = s;
        }
    }
    return 0;
}

/* What every tile kernel needs: the product's shape and operands. */
typedef struct QGemm {
    const FxrtQGemm *q;
    const uint8_t *a; /* bytes; an int8 A has flip = 0x80 */
    int64_t lda;
    /* Or A gathered (fxrt_qgemm_gather): row i's k-group p at
     * a_rows[i] + k_offsets[p]; NULL for the plain product. */
    const uint8_t *const *a_rows;
    const int32_t *k_offsets;
    uint8_t flip;
    const int8_t *w;
    const int32_t *col_bias, *col_mult, *col_shift;
    const int32_t *panel_pair_max;
    int64_t k_groups; /* k / 4, rounded up */
    uint8_t *y;
    int64_t ldy;
} QGemm;

/* The four values of A row `row` in k-group `group`, unsigned (an int8
 * one flipped), zeros past k: the last group must not read past the row
 * (its weights are zero padding, so the zeros add nothing). */
static void load_group(const QGemm *g, int64_t row, int64_t group, uint8_t bytes[KGROUP])
{
    const uint8_t *a = g->a + row * g->lda + group * KGROUP;
    int64_t left = g->q->k - group * KGROUP;
    for (int64_t i = 0; i < KGROUP; i++)
        bytes[i] = i < left ? (uint8_t)(a[i] ^ g->flip) : 0;
}

/* A tile kernel: rows <= its row count of A from row0, cols <= its column
 * count from col0 (a multiple of 16). */
typedef void (*TileFn)(const QGemm *g, int64_t row0, int rows, int64_t col0, int cols);

enum { MR_PORTABLE = 4 };

#if FXRT_ARM_DSP
/* Cortex-M4, M7, M33, M55 (the DSP extension): SMLAD forms two 16 x 16
 * products and adds both to an accumulator in one instruction.  A k-group's
 * four bytes, a0..a3 of a row of A (unsigned, an int8 one flipped) and
 * c0..c3 of a column, are split by UXTB16 and SXTB16 into the halfword
 * pairs (a0, a2), (a1, a3) and (c0, c2), (c1, c3) (the second pair after a
 * rotate by 8 bits, in the extension's operand), and two SMLADs add
 * a0 c0 + a2 c2 and a1 c1 + a3 c3.  Every product fits in int16 x int16 and
 * the sum wraps modulo 2^32 as the portable tile's does, so the bytes are
 * the same.  The tile is register-blocked 2 rows x 2 columns (4
 * accumulators, 2 A words and 2 weight words per k-group: 8 SMLADs for 4
 * loads and 8 extensions; 2 x 4 spilled on the Cortex-M4's 13 registers),
 * walked over the panel's columns and the call's rows; an odd last row or
 * column is computed on a duplicate and not stored.  The rescale is
 * fxrt_rescale32_apply, 32-bit words only. */
/* Four bytes as a word, any alignment (LDR on the Cortex-M4). */
static inline uint32_t load_word(const uint8_t *at)
{
    uint32_t word;
    memcpy(&word, at, sizeof word);
    return word;
}

/* Four products of a k-group: rows x0, x1 (A words) by columns c0, c1
 * (weight words) into the 2 x 2 accumulators. */
#define DSP_2X2(x0, x1, c0, c1)                                                  \
    do {                                                                         \
        int16x2_t x0e = __uxtb16(x0), x0o = fxrt_uxtb16_ror8(x0);              \
        int16x2_t x1e = __uxtb16(x1), x1o = fxrt_uxtb16_ror8(x1);              \
        int16x2_t c0e = __sxtb16(c0), c0o = fxrt_sxtb16_ror8(c0);              \
        int16x2_t c1e = __sxtb16(c1), c1o = fxrt_sxtb16_ror8(c1);              \
        acc00 = __smlad(x0e, c0e, __smlad(x0o, c0o, acc00));                     \
        acc01 = __smlad(x0e, c1e, __smlad(x0o, c1o, acc01));                     \
        acc10 = __smlad(x1e, c0e, __smlad(x1o, c0o, acc10));                     \
        acc11 = __smlad(x1e, c1e, __smlad(x1o, c1o, acc11));                     \
    } while (0)

static void tile_dsp(const QGemm *g, int64_t row0, int rows, int64_t col0, int cols)
{
    const int8_t *panel = g->w + col0 * g->k_groups * KGROUP;
    uint32_t flip = g->flip * 0x01010101u;
    int whole = (int)(g->q->k / KGROUP);
    int32_t acc[MR_PORTABLE + 1][PANEL]; /* + 1: an odd last row's duplicate */
    for (int r = 0; r < rows; r += 2) {
        const uint8_t *a0 = g->a + (row0 + r) * g->lda;
        const uint8_t *a1 = r + 1 < rows ? a0 + g->lda : a0;
        uint32_t tail0 = 0, tail1 = 0; /* a last partial k-group, zeros past k */
        if (whole < g->k_groups) {
            uint8_t v[KGROUP];
            load_group(g, row0 + r, whole, v);
            memcpy(&tail0, v, sizeof tail0);
            if (r + 1 < rows)
                load_group(g, row0 + r + 1, whole, v);
            memcpy(&tail1, v, sizeof tail1);
        }
        for (int j = 0; j < cols; j += 2) {
            const uint8_t *w = (const uint8_t *)(panel + j * KGROUP);
            int32_t acc00 = g->col_bias[col0 + j], acc01 = g->col_bias[col0 + j + 1];
            int32_t acc10 = acc00, acc11 = acc01;
            const uint8_t *x0 = a0, *x1 = a1, *end = a0 + whole * KGROUP;
            if (flip)
                for (; x0 < end; x0 += KGROUP, x1 += KGROUP, w += PANEL * KGROUP)
                    DSP_2X2(load_word(x0) ^ flip, load_word(x1) ^ flip, load_word(w),
                            load_word(w + KGROUP));
            else
                for (; x0 < end; x0 += KGROUP, x1 += KGROUP, w += PANEL * KGROUP)
                    DSP_2X2(load_word(x0), load_word(x1), load_word(w), load_word(w + KGROUP));
            if (whole < g->k_groups)
                DSP_2X2(tail0, tail1, load_word(w), load_word(w + KGROUP));
            /* the panel has 16 columns: j + 1 is one even past cols */
            acc[r][j] = acc00;
            acc[r][j + 1] = acc01;
            acc[r + 1][j] = acc10;
            acc[r + 1][j + 1] = acc11;
        }
    }
    /* Requantized a column at a time after the products, so that neither
     * loop spills on the Cortex-M4's 13 registers: the column's rescale
     * constants, zero point and bounds stay in registers (a byte store
     * may alias the structs, so they are locals). */
    ptrdiff_t ldy = (ptrdiff_t)g->ldy;
    if (g->q->y_type == FXRT_DTYPE_INT32) {
        for (int r = 0; r < rows; r++)
            memcpy(g->y + ((row0 + r) * ldy + col0) * (int64_t)sizeof(int32_t), acc[r],
                   (size_t)cols * sizeof(int32_t));
        return;
    }
    int32_t y_zp = g->q->y_zp, y_min = g->q->y_min, y_max = g->q->y_max;
    uint8_t *y = g->y + row0 * ldy + col0;
    for (int j = 0; j < cols; j++) {
        FxrtRescale32 rescale = fxrt_rescale32_make(g->col_mult[col0 + j], g->col_shift[col0 + j]);
        for (int r = 0; r < rows; r++) {
            int32_t v = fxrt_rescale32_apply(acc[r][j], &rescale) + y_zp;
            y[r * ldy + j] = (uint8_t)(v < y_min ? y_min : v > y_max ? y_max : v);
        }
    }
}
#define TILE_PLAIN tile_dsp
#else
/* One finished accumulator: rescaled, offset, clamped, stored at output
 * index `at`. */
static inline void store_one(const QGemm *g, int64_t at, int32_t acc, const FxrtRescale32 *rescale)
{
    const FxrtQGemm *q = g->q;
    if (q->y_type == FXRT_DTYPE_INT32) {
        memcpy(g->y + at * (int64_t)sizeof(int32_t), &acc, sizeof acc);
        return;
    }
    int32_t y = fxrt_rescale32_apply(acc, rescale) + q->y_zp;
    y = y < q->y_min ? q->y_min : y > q->y_max ? q->y_max : y;
    g->y[at] = (uint8_t)y; /* modulo 256: an int8's two's complement byte */
}

static void tile_portable(const QGemm *g, int64_t row0, int rows, int64_t col0, int cols)
{
    uint32_t acc[MR_PORTABLE][PANEL];
    const int8_t *panel = g->w + col0 * g->k_groups * KGROUP;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < PANEL; j++)
            acc[r][j] = (uint32_t)g->col_bias[col0 + j];
    for (int64_t p = 0; p < g->k_groups; p++) {
        const int8_t *w = panel + p * PANEL * KGROUP;
        for (int r = 0; r < rows; r++) {
            uint8_t v[KGROUP];
            load_group(g, row0 + r, p, v);
            int32_t a0 = v[0], a1 = v[1], a2 = v[2], a3 = v[3];
            for (int j = 0; j < PANEL; j++) {
                const int8_t *c = w + j * KGROUP;
                acc[r][j] += (uint32_t)(a0 * c[0] + a1 * c[1] + a2 * c[2] + a3 * c[3]);
            }
        }
    }
    for (int j = 0; j < cols; j++) {
        FxrtRescale32 rescale = fxrt_rescale32_make(g->col_mult[col0 + j], g->col_shift[col0 + j]);
        for (int r = 0; r < rows; r++)
            store_one(g, (row0 + r) * g->ldy + col0 + j, (int32_t)acc[r][j], &rescale);
    }
}
#define TILE_PLAIN tile_portable
#endif

#ifdef FXRT_QGEMM_X86
/* Unrolls a loop of constant trip count completely (see
 * fxrt_nn_nchwc_conv.c: Clang does without a count, GCC wants one). */
#ifdef __clang__
#define UNROLL_FULL _Pragma("unroll")
#else
#define UNROLL_FULL _Pragma("GCC unroll 8")
#endif

/* The k-groups of a row that can be read four bytes at a time: all but a
 * last partial one. */
static int64_t whole_groups(const QGemm *g) { return g->q->k / KGROUP; }

/* Where the tile's rows of A start: row pointers or strided rows. */
__attribute__((always_inline)) static inline void tile_rows(const QGemm *g, int64_t row0,
                                                            int rows, const uint8_t **row_at)
{
    for (int r = 0; r < rows; r++)
        row_at[r] = g->a_rows ? g->a_rows[row0 + r] : g->a + (row0 + r) * g->lda;
}

/* A row's last, partial k-group (from k-group `whole`) as one word: its
 * bytes unsigned (an int8 A's flipped), zeros past k, which meet the
 * weights' zero padding; the row is not read past its end.  Inline: a call
 * would make every accumulator live across it (no vector register is
 * preserved). */
__attribute__((always_inline)) static inline int32_t partial_group_word(const QGemm *g,
                                                                        const uint8_t *row,
                                                                        int64_t whole)
{
    uint8_t v[KGROUP] = {0};
    int32_t word;
    for (int64_t i = 0; i < g->q->k - whole * KGROUP; i++)
        v[i] = (uint8_t)(row[whole * KGROUP + i] ^ g->flip);
    memcpy(&word, v, sizeof word);
    return word;
}

/* --- AVX2 ----------------------------------------------------------------- */
/* Rows per tile and columns per pass: 5 rows x two accumulators, the half
 * panel's two B vectors, the A words and the spread constant fill the 16
 * ymm registers without spills (6 rows spilled accumulators under GCC 12:
 * 30% slower). */
enum { MR_AVX2 = 5, NR_AVX2 = 8 };

#define AVX2_TARGET __attribute__((target("avx2")))

/* A row's k-group at `group`, four unsigned bytes (an int8 A's flipped:
 * `flipped` is a constant where the tiles inline this) in every lane. */
AVX2_TARGET __attribute__((always_inline)) static inline __m256i group_avx2(const uint8_t *group,
                                                                           const int flipped)
{
    int32_t word;
    memcpy(&word, group, sizeof word);
    __m256i av = _mm256_set1_epi32(word);
    return flipped ? _mm256_xor_si256(av, _mm256_set1_epi8((char)0x80)) : av;
}

/* Stores the 8 accumulators of one row (columns from col, the first
 * `cols` real): int32 as they are, 8-bit requantized by the half panel's
 * scale. */
AVX2_TARGET __attribute__((always_inline)) static inline void
store_avx2(const QGemm *g, int64_t row, int64_t col, int cols, __m256i acc,
           const FxrtQuantScaleAvx2 *scale)
{
    int64_t at = row * g->ldy + col;
    if (g->q->y_type == FXRT_DTYPE_INT32) {
        if (cols >= NR_AVX2) {
            _mm256_storeu_si256((__m256i *)((int32_t *)g->y + at), acc);
        } else {
            int32_t v[NR_AVX2];
            _mm256_storeu_si256((__m256i *)v, acc);
            memcpy((int32_t *)g->y + at, v, (size_t)cols * sizeof(int32_t));
        }
        return;
    }
    __m128i bytes = fxrt_quant_low_bytes_avx2(fxrt_quant_requantize_scaled_avx2(acc, scale));
    if (cols >= NR_AVX2) {
        _mm_storel_epi64((__m128i *)(g->y + at), bytes);
        return;
    }
    uint8_t v[16];
    _mm_storeu_si128((__m128i *)v, bytes);
    memcpy(g->y + at, v, (size_t)cols);
}

/* Eight columns (half a panel, `half` 0 or 1) of `rows` rows from row0,
 * whose A rows start at row_at[]; `cols` of the panel real.  A k-group's
 * 8 x 4 weight bytes, sign-extended, are two vectors of four columns'
 * k0..k3 as int16; a row's four A bytes, zero-extended and repeated four
 * times, meet them in vpmaddwd, which leaves per column the pair sums
 * k0 + k1 and k2 + k3 (acc[r][0] columns 0-3, acc[r][1] columns 4-7) for a
 * horizontal add at the end.  `flipped` (an int8 A) is a constant where
 * the tiles inline this. */
AVX2_TARGET __attribute__((always_inline)) static inline void
tile_avx2_body(const QGemm *g, int64_t row0, const uint8_t *const *row_at, const int rows,
               int64_t col0, int half, int cols, const int flipped)
{
    const __m256i spread = _mm256_setr_epi8(0, -128, 1, -128, 2, -128, 3, -128, 0, -128, 1, -128,
                                            2, -128, 3, -128, 0, -128, 1, -128, 2, -128, 3, -128,
                                            0, -128, 1, -128, 2, -128, 3, -128);
    __m256i acc[MR_AVX2][2];
    UNROLL_FULL
    for (int r = 0; r < rows; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    const int8_t *w = g->w + col0 * g->k_groups * KGROUP + half * NR_AVX2 * KGROUP;
    int64_t whole = whole_groups(g);
    /* The whole k-groups, then the partial last one apart: one branch-free
     * loop keeps the accumulators in registers. */
    for (int64_t p = 0; p < whole; p++, w += PANEL * KGROUP) {
        int64_t at = g->k_offsets ? g->k_offsets[p] : p * KGROUP;
        __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w));
        __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 16)));
        UNROLL_FULL
        for (int r = 0; r < rows; r++) {
            __m256i av = group_avx2(row_at[r] + at, flipped);
            av = _mm256_shuffle_epi8(av, spread);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
        }
    }
    if (whole < g->k_groups) {
        __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w));
        __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 16)));
        UNROLL_FULL
        for (int r = 0; r < rows; r++) {
            __m256i av = _mm256_shuffle_epi8(
                _mm256_set1_epi32(partial_group_word(g, row_at[r], whole)), spread);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
        }
    }
    int64_t col = col0 + half * NR_AVX2;
    __m256i seed = _mm256_loadu_si256((const __m256i *)(g->col_bias + col));
    const FxrtQGemm *q = g->q;
    FxrtQuantScaleAvx2 scale = fxrt_quant_scale_avx2(
        _mm256_loadu_si256((const __m256i *)(g->col_mult + col)),
        _mm256_loadu_si256((const __m256i *)(g->col_shift + col)), q->y_zp, q->y_min, q->y_max);
    UNROLL_FULL
    for (int r = 0; r < rows; r++) {
        /* Per 128-bit lane the pair sums of columns 0 1 | 4 5 and 2 3 | 6 7:
         * the permute puts them in column order. */
        __m256i sums = _mm256_hadd_epi32(acc[r][0], acc[r][1]);
        sums = _mm256_permute4x64_epi64(sums, 0xd8);
        store_avx2(g, row0 + r, col, cols - half * NR_AVX2, _mm256_add_epi32(sums, seed), &scale);
    }
}

/* The largest |b0| + |b1| of a panel for which vpmaddubsw is exact: a pair
 * sum a0 b0 + a1 b1 with unsigned bytes a is at most 255 x 128 = 32640 in
 * magnitude, inside int16, so it never saturates.  Weights quantized to 7
 * bits (|b| <= 64: ONNX Runtime's reduce_range, fxcc's --weight-bits 7)
 * always qualify. */
enum { PAIR_MAX_EXACT = 128 };
/* Rows of the vpmaddubsw tile: 6 rows x 2 accumulators, the panel's two B
 * vectors, the A word and the ones constant fill the 16 ymm registers. */
enum { MR_PAIRS = 6 };

/* A whole panel (16 columns, `cols` real) of `rows` rows by vpmaddubsw,
 * for panels whose weight pairs fit (PAIR_MAX_EXACT): the k-group's bytes
 * are two vectors of 8 columns x k0..k3 as they are packed, a row's four A
 * bytes are broadcast, vpmaddubsw forms the pair sums k0 + k1 and k2 + k3
 * in int16 and vpmaddwd by ones adds each column's two into int32, in
 * column order: half the instructions per product of the int16 tile. */
AVX2_TARGET __attribute__((always_inline)) static inline void
tile_pairs_body(const QGemm *g, int64_t row0, const uint8_t *const *row_at, const int rows,
                int64_t col0, int cols, const int flipped)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[MR_PAIRS][2];
    UNROLL_FULL
    for (int r = 0; r < rows; r++) {
        acc[r][0] = _mm256_loadu_si256((const __m256i *)(g->col_bias + col0));
        acc[r][1] = _mm256_loadu_si256((const __m256i *)(g->col_bias + col0 + NR_AVX2));
    }
    const int8_t *w = g->w + col0 * g->k_groups * KGROUP;
    int64_t whole = whole_groups(g);
    for (int64_t p = 0; p < whole; p++, w += PANEL * KGROUP) {
        int64_t at = g->k_offsets ? g->k_offsets[p] : p * KGROUP;
        __m256i b0 = _mm256_loadu_si256((const __m256i *)w);
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(w + 32));
        UNROLL_FULL
        for (int r = 0; r < rows; r++) {
            __m256i av = group_avx2(row_at[r] + at, flipped);
            acc[r][0] = _mm256_add_epi32(acc[r][0],
                                         _mm256_madd_epi16(_mm256_maddubs_epi16(av, b0), ones));
            acc[r][1] = _mm256_add_epi32(acc[r][1],
                                         _mm256_madd_epi16(_mm256_maddubs_epi16(av, b1), ones));
        }
    }
    if (whole < g->k_groups) {
        __m256i b0 = _mm256_loadu_si256((const __m256i *)w);
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(w + 32));
        UNROLL_FULL
        for (int r = 0; r < rows; r++) {
            __m256i av = _mm256_set1_epi32(partial_group_word(g, row_at[r], whole));
            acc[r][0] = _mm256_add_epi32(acc[r][0],
                                         _mm256_madd_epi16(_mm256_maddubs_epi16(av, b0), ones));
            acc[r][1] = _mm256_add_epi32(acc[r][1],
                                         _mm256_madd_epi16(_mm256_maddubs_epi16(av, b1), ones));
        }
    }
    const FxrtQGemm *q = g->q;
    for (int half = 0; half < 2 && half * NR_AVX2 < cols; half++) {
        int64_t col = col0 + half * NR_AVX2;
        FxrtQuantScaleAvx2 scale = fxrt_quant_scale_avx2(
            _mm256_loadu_si256((const __m256i *)(g->col_mult + col)),
            _mm256_loadu_si256((const __m256i *)(g->col_shift + col)), q->y_zp, q->y_min,
            q->y_max);
        UNROLL_FULL
        for (int r = 0; r < rows; r++)
            store_avx2(g, row0 + r, col, cols - half * NR_AVX2, acc[r][half], &scale);
    }
}

#define TILE_PAIRS(mr, flipped)                                                                \
    AVX2_TARGET static void tile_pairs_##mr##_##flipped(const QGemm *g, int64_t row0,           \
                                                        int64_t col0, int cols)                 \
    {                                                                                           \
        const uint8_t *row_at[mr];                                                              \
        tile_rows(g, row0, mr, row_at);                                                         \
        tile_pairs_body(g, row0, row_at, mr, col0, cols, flipped);                              \
    }
#define TILE_PAIRS_ROWS(mr) TILE_PAIRS(mr, 0) TILE_PAIRS(mr, 1)
TILE_PAIRS_ROWS(1)
TILE_PAIRS_ROWS(2)
TILE_PAIRS_ROWS(3)
TILE_PAIRS_ROWS(4)
TILE_PAIRS_ROWS(5)
TILE_PAIRS_ROWS(6)
#undef TILE_PAIRS_ROWS
#undef TILE_PAIRS

#define TILE_AVX2(mr, flipped)                                                                 \
    AVX2_TARGET static void tile_avx2_##mr##_##flipped(const QGemm *g, int64_t row0,            \
                                                       int64_t col0, int cols)                  \
    {                                                                                           \
        const uint8_t *row_at[mr];                                                              \
        tile_rows(g, row0, mr, row_at);                                                         \
        tile_avx2_body(g, row0, row_at, mr, col0, 0, cols, flipped);                            \
        if (cols > NR_AVX2)                                                                     \
            tile_avx2_body(g, row0, row_at, mr, col0, 1, cols, flipped);                        \
    }
#define TILE_AVX2_ROWS(mr) TILE_AVX2(mr, 0) TILE_AVX2(mr, 1)
TILE_AVX2_ROWS(1)
TILE_AVX2_ROWS(2)
TILE_AVX2_ROWS(3)
TILE_AVX2_ROWS(4)
TILE_AVX2_ROWS(5)
#undef TILE_AVX2_ROWS
#undef TILE_AVX2

static void tile_avx2(const QGemm *g, int64_t row0, int rows, int64_t col0, int cols)
{
#define PAIR(mr) {tile_avx2_##mr##_0, tile_avx2_##mr##_1}
    static void (*const by_shape[MR_AVX2 + 1][2])(const QGemm *, int64_t, int64_t, int) = {
        {0, 0}, PAIR(1), PAIR(2), PAIR(3), PAIR(4), PAIR(5)};
#undef PAIR
    by_shape[rows][g->flip ? 1 : 0](g, row0, col0, cols);
}

static void tile_pairs(const QGemm *g, int64_t row0, int rows, int64_t col0, int cols)
{
#define PAIR(mr) {tile_pairs_##mr##_0, tile_pairs_##mr##_1}
    static void (*const by_shape[MR_PAIRS + 1][2])(const QGemm *, int64_t, int64_t, int) = {
        {0, 0}, PAIR(1), PAIR(2), PAIR(3), PAIR(4), PAIR(5), PAIR(6)};
#undef PAIR
    by_shape[rows][g->flip ? 1 : 0](g, row0, col0, cols);
}

/* Whether every panel's weight pairs let vpmaddubsw run exactly. */
static int pairs_fit(const QGemm *g)
{
    for (int64_t j = 0; j < round_up(g->q->n, PANEL) / PANEL; j++)
        if (g->panel_pair_max[j] > PAIR_MAX_EXACT)
            return 0;
    return 1;
}

/* --- AVX-512 VNNI ------------------------------------------------------------ */
enum { MR_VNNI = 6, NR_VNNI = 2 * PANEL };

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* Stores 16 accumulators of one row (columns from col, `keep` the real
 * ones): int32 as they are, 8-bit requantized by the panel's scale. */
VNNI_TARGET __attribute__((always_inline)) static inline void
store_vnni(const QGemm *g, int64_t row, int64_t col, __mmask16 keep, __m512i acc,
           const FxrtQuantScaleAvx512 *scale)
{
    int64_t at = row * g->ldy + col;
    if (g->q->y_type == FXRT_DTYPE_INT32) {
        _mm512_mask_storeu_epi32((int32_t *)g->y + at, keep, acc);
        return;
    }
    _mm512_mask_cvtepi32_storeu_epi8(g->y + at, keep,
                                     fxrt_quant_requantize_scaled_avx512(acc, scale));
}

/* acc += the dot products of av's unsigned and b's signed byte quads, in
 * place: GCC 12 copies the accumulators of _mm512_dpbusd_epi32 around
 * every step of the loop (a register move per accumulator and k-group). */
VNNI_TARGET __attribute__((always_inline)) static inline void dpbusd_in_place(__m512i *acc,
                                                                              __m512i av,
                                                                              __m512i b)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(*acc) : "v"(av), "v"(b));
}

/* `flipped` (an int8 A) is a constant where the tiles inline this, so that
 * a uint8 A's words are broadcast straight from memory. */
VNNI_TARGET __attribute__((always_inline)) static inline void
tile_vnni_body(const QGemm *g, int64_t row0, const int rows, int64_t col0, const int panels,
               int cols, const int flipped)
{
    __m512i acc[MR_VNNI][2];
    const int32_t *bias = g->col_bias + col0;
    UNROLL_FULL
    for (int r = 0; r < rows; r++)
        UNROLL_FULL
        for (int f = 0; f < panels; f++)
            acc[r][f] = _mm512_loadu_si512(bias + f * PANEL);
    const int8_t *w = g->w + col0 * g->k_groups * KGROUP;
    const int64_t panel_bytes = g->k_groups * PANEL * KGROUP;
    const uint8_t *row_at[MR_VNNI];
    tile_rows(g, row0, rows, row_at);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    int64_t whole = whole_groups(g);
    /* The whole k-groups, then the partial last one apart: one branch-free
     * loop keeps the accumulators in place. */
    for (int64_t p = 0; p < whole; p++, w += PANEL * KGROUP) {
        int64_t at = g->k_offsets ? g->k_offsets[p] : p * KGROUP;
        __m512i b[2];
        UNROLL_FULL
        for (int f = 0; f < panels; f++)
            b[f] = _mm512_loadu_si512(w + f * panel_bytes);
        UNROLL_FULL
        for (int r = 0; r < rows; r++) {
            int32_t word;
            memcpy(&word, row_at[r] + at, sizeof word);
            __m512i av = _mm512_set1_epi32(word);
            if (flipped)
                av = _mm512_xor_si512(av, flip);
            UNROLL_FULL
            for (int f = 0; f < panels; f++)
                dpbusd_in_place(&acc[r][f], av, b[f]);
        }
    }
    if (whole < g->k_groups) {
        __m512i b[2];
        UNROLL_FULL
        for (int f = 0; f < panels; f++)
            b[f] = _mm512_loadu_si512(w + f * panel_bytes);
        UNROLL_FULL
        for (int r = 0; r < rows; r++) {
            int32_t word = partial_group_word(g, row_at[r], whole);
            UNROLL_FULL
            for (int f = 0; f < panels; f++)
                acc[r][f] = _mm512_dpbusd_epi32(acc[r][f], _mm512_set1_epi32(word), b[f]);
        }
    }
    const FxrtQGemm *q = g->q;
    UNROLL_FULL
    for (int f = 0; f < panels; f++) {
        int left = cols - f * PANEL;
        __mmask16 keep = (__mmask16)(left >= PANEL ? 0xffff : (1u << left) - 1u);
        int64_t col = col0 + f * PANEL;
        /* One scale per panel serves all its rows. */
        FxrtQuantScaleAvx512 scale = fxrt_quant_scale_avx512(
            _mm512_loadu_si512(g->col_mult + col), _mm512_loadu_si512(g->col_shift + col), q->y_zp,
            q->y_min, q->y_max);
        UNROLL_FULL
        for (int r = 0; r < rows; r++)
            store_vnni(g, row0 + r, col, keep, acc[r][f], &scale);
    }
}

#define TILE_VNNI(mr, np)                                                                      \
    VNNI_TARGET static void tile_vnni_##mr##_##np(const QGemm *g, int64_t row0, int64_t col0,   \
                                                  int cols)                                     \
    {                                                                                           \
        if (g->flip)                                                                            \
            tile_vnni_body(g, row0, mr, col0, np, cols, 1);                                     \
        else                                                                                    \
            tile_vnni_body(g, row0, mr, col0, np, cols, 0);                                     \
    }
#define TILE_VNNI_ROWS(mr) TILE_VNNI(mr, 1) TILE_VNNI(mr, 2)
TILE_VNNI_ROWS(1)
TILE_VNNI_ROWS(2)
TILE_VNNI_ROWS(3)
TILE_VNNI_ROWS(4)
TILE_VNNI_ROWS(5)
TILE_VNNI_ROWS(6)
#undef TILE_VNNI_ROWS
#undef TILE_VNNI

static void tile_vnni(const QGemm *g, int64_t row0, int rows, int64_t col0, int cols)
{
#define PAIR(mr) {tile_vnni_##mr##_1, tile_vnni_##mr##_2}
    static void (*const by_shape[MR_VNNI + 1][2])(const QGemm *, int64_t, int64_t, int) = {
        {0, 0}, PAIR(1), PAIR(2), PAIR(3), PAIR(4), PAIR(5), PAIR(6)};
#undef PAIR
    by_shape[rows][cols > PANEL ? 1 : 0](g, row0, col0, cols);
}

/* The widest tiles in use: 2 AVX-512 VNNI, 1 AVX2, 0 portable; capped by
 * fxrt_qgemm_limit_isa (runtime/fxrt_isa.h). */
static int isa_cap = 2;

void fxrt_qgemm_limit_isa(int level) { isa_cap = level; }

static int cpu_has_vnni(void)
{
    return isa_cap >= 2 && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni");
}

static int cpu_has_avx2(void) { return isa_cap >= 1 && __builtin_cpu_supports("avx2"); }
#else
void fxrt_qgemm_limit_isa(int level) { (void)level; }
#endif

/* Everything of g but A. */
static void qgemm_init(QGemm *g, const FxrtQGemm *q, const void *packed, void *y, int64_t ldy)
{
    g->q = q;
    g->a = NULL;
    g->lda = 0;
    g->a_rows = NULL;
    g->k_offsets = NULL;
    g->flip = q->a_type == FXRT_DTYPE_INT8 ? 0x80 : 0;
    g->w = (const int8_t *)packed;
    g->col_bias = packed_columns(packed, q->n, q->k);
    g->col_mult = g->col_bias + round_up(q->n, PANEL);
    g->col_shift = g->col_mult + round_up(q->n, PANEL);
    g->panel_pair_max = g->col_shift + round_up(q->n, PANEL);
    g->k_groups = round_up(q->k, KGROUP) / KGROUP;
    g->y = (uint8_t *)y;
    g->ldy = ldy;
}

/* Every tile of the m x n product: the row tiles outermost while B fits in
 * L2, else the column blocks. */
static void qgemm_walk(const QGemm *g, int64_t m, TileFn tile, int64_t mr, int64_t nr)
{
    int64_t n = g->q->n;
    if (fxrt_qgemm_packed_bytes(n, g->q->k) <= B_IN_CACHE_BYTES) {
        for (int64_t i = 0; i < m; i += mr)
            for (int64_t j = 0; j < n; j += nr)
                tile(g, i, (int)(m - i < mr ? m - i : mr), j, (int)(n - j < nr ? n - j : nr));
    } else {
        for (int64_t j = 0; j < n; j += nr)
            for (int64_t i = 0; i < m; i += mr)
                tile(g, i, (int)(m - i < mr ? m - i : mr), j, (int)(n - j < nr ? n - j : nr));
    }
}

#ifdef FXRT_QGEMM_X86
int fxrt_qgemm_gather_in_use(void) { return cpu_has_vnni() || cpu_has_avx2(); }

void fxrt_qgemm_gather(const FxrtQGemm *q, int64_t m, const uint8_t *const *a_rows,
                       const int32_t *k_offsets, const void *packed, void *y, int64_t ldy)
{
    QGemm g;
    qgemm_init(&g, q, packed, y, ldy);
    g.a_rows = a_rows;
    g.k_offsets = k_offsets;
    if (cpu_has_vnni())
        qgemm_walk(&g, m, tile_vnni, MR_VNNI, NR_VNNI);
    else if (pairs_fit(&g))
        qgemm_walk(&g, m, tile_pairs, MR_PAIRS, PANEL);
    else
        qgemm_walk(&g, m, tile_avx2, MR_AVX2, PANEL);
}
#endif

void fxrt_qgemm(const FxrtQGemm *q, int64_t m, const void *a, int64_t lda, const void *packed,
                void *y, int64_t ldy)
{
    QGemm g;
    qgemm_init(&g, q, packed, y, ldy);
    g.a = (const uint8_t *)a;
    g.lda = lda;
    TileFn tile = TILE_PLAIN;
    int64_t mr = MR_PORTABLE, nr = PANEL;
#ifdef FXRT_QGEMM_X86
    if (cpu_has_vnni()) {
        tile = tile_vnni;
        mr = MR_VNNI;
        nr = NR_VNNI;
    } else if (cpu_has_avx2() && pairs_fit(&g)) {
        tile = tile_pairs;
        mr = MR_PAIRS;
        nr = PANEL;
    } else if (cpu_has_avx2()) {
        tile = tile_avx2;
        mr = MR_AVX2;
        nr = PANEL;
    }
#endif
    qgemm_walk(&g, m, tile, mr, nr);
}
