/*
 * fxrt_nn_attention.c - scaled dot-product attention in one pass over the
 * queries: Y = softmax(scale * Q K^T + mask) V per batch (and head), the
 * kernel of the internal Attention op that the attention-fusion pass makes
 * of MatMul -> Softmax -> MatMul (ir/ops/nn_attention.c).
 *
 * Why fused: the unfused chain writes the Lq x Lk scores to memory, reads
 * them back for the softmax, writes the probabilities and reads them again
 * for the second product, and each of the three steps walks the batch
 * once more.  Here a block of ATT_ROWS query rows computes its scores into
 * scratch (ATT_ROWS x Lk floats, in L1 for the usual sequence lengths),
 * normalizes them while they are there and multiplies them into V at once.
 *
 * K is first copied transposed into scratch as D rows of Lk floats padded to
 * a whole number of 8-lane vectors (zeros beyond Lk), so that a score tile
 * is an outer-product GEMM tile over contiguous rows whichever layout K
 * came in; the copy is skipped when consecutive batches share K.  Padding
 * scores are set to -inf, so their exponentials are 0 and the sum and the
 * second product may run over them or not.
 *
 * The softmax subtracts the row's maximum before exp (no overflow however
 * large the scores) and divides by the sum only once, at the end of the
 * second product.  A row whose scores are all -inf gives NaN, as Softmax
 * does.  exp is fxrt_math.h's polynomial (portable) or its AVX2 form
 * (fxrt_math_x86.h), a few ulp apart.
 *
 * Tiles: AVX2/FMA (4 rows x 16 score columns, 4 rows x 16 output columns
 * per step, chosen by CPUID at each call and capped by
 * fxrt_attention_limit_isa in fxrt_isa.h) and portable C99 loops that the
 * compiler vectorizes.  No AVX-512 form: the AVX2 tiles already keep the
 * scores in L1, and an AVX-512 one could not be run by the tests on the
 * machines at hand.
 */
#include <math.h>
#include <string.h>

#include "fxrt.h"
#include "fxrt_isa.h"
#include "fxrt_math.h"

#if defined(FXRT_USE_CBLAS) && defined(__x86_64__) && defined(__GNUC__)
#define FXRT_ATTENTION_X86 1
#include "fxrt_math_x86.h"
#endif

enum { ATT_ROWS = 4, ATT_LANES = 8 };

static int64_t padded_keys(int64_t lk) { return (lk + ATT_LANES - 1) / ATT_LANES * ATT_LANES; }

int64_t fxrt_attention_scratch_floats(const FxrtAttention *p)
{
    int64_t lkp = padded_keys(p->lk);
    return lkp * p->d + lkp * ATT_ROWS;
}

/* kt[c * lkp + j] = K(j, c), zeros for lk <= j < lkp. */
static void transpose_keys(const FxrtAttention *p, const float *k, float *kt)
{
    int64_t lkp = padded_keys(p->lk);
    for (int64_t c = 0; c < p->d; c++) {
        float *row = kt + c * lkp;
        if (p->k_transposed) {
            memcpy(row, k + c * p->ldk, (size_t)p->lk * sizeof *row);
        } else {
            for (int64_t j = 0; j < p->lk; j++)
                row[j] = k[j * p->ldk + c];
        }
        for (int64_t j = p->lk; j < lkp; j++)
            row[j] = 0.0f;
    }
}

/* The views of one block of query rows: row r of Q, of the mask (NULL:
 * none) and of Y. */
typedef struct RowBlock {
    int rows;
    const float *q[ATT_ROWS];
    const float *mask[ATT_ROWS];
    float *y[ATT_ROWS];
} RowBlock;

/* Adds the mask and sets the padding scores to -inf: what exp must see.
 * Inlined into each level's block, so that the AVX2 one makes no call. */
static inline void finish_scores(const FxrtAttention *p, const RowBlock *b, float *scores)
{
    int64_t lkp = padded_keys(p->lk);
    for (int r = 0; r < b->rows; r++) {
        float *s = scores + r * lkp;
        const float *m = b->mask[r];
        if (m && p->mask_col_stride == 1)
            for (int64_t j = 0; j < p->lk; j++)
                s[j] += m[j];
        else if (m)
            for (int64_t j = 0; j < p->lk; j++)
                s[j] += m[j * p->mask_col_stride];
        for (int64_t j = p->lk; j < lkp; j++)
            s[j] = -INFINITY;
    }
}

/* --- portable ---------------------------------------------------------------- */

static void scores_portable(const FxrtAttention *p, const RowBlock *b, const float *kt,
                            float *scores)
{
    int64_t lkp = padded_keys(p->lk);
    for (int r = 0; r < b->rows; r++) {
        float *s = scores + r * lkp;
        for (int64_t j = 0; j < lkp; j++)
            s[j] = 0.0f;
        for (int64_t c = 0; c < p->d; c++) {
            float qc = b->q[r][c];
            const float *ktc = kt + c * lkp;
            for (int64_t j = 0; j < lkp; j++)
                s[j] += qc * ktc[j];
        }
        for (int64_t j = 0; j < lkp; j++)
            s[j] *= p->scale;
    }
}

static float row_max(const float *s, int64_t len)
{
    float m = -INFINITY;
    for (int64_t j = 0; j < len; j++)
        m = s[j] > m ? s[j] : m;
    return m;
}

/* exp(s - max) in place over the padded row; returns the sum. */
FXRT_NO_TRAPPING_MATH static float exp_row_portable(float *s, int64_t lkp, float max)
{
    float lanes[ATT_LANES] = {0};
    for (int64_t j = 0; j < lkp; j += ATT_LANES)
        for (int l = 0; l < ATT_LANES; l++) {
            s[j + l] = fxrt_exp_nonpositive(s[j + l] - max);
            lanes[l] += s[j + l];
        }
    return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) +
           ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}

/* Y row r = (sum_j e_j V_j) / sum e, columns [c0, dv). */
static void output_portable(const FxrtAttention *p, const RowBlock *b, const float *v,
                            const float *probs, const float *inv_sum, int64_t c0)
{
    int64_t lkp = padded_keys(p->lk);
    for (int r = 0; r < b->rows; r++) {
        float *y = b->y[r];
        for (int64_t c = c0; c < p->dv; c++)
            y[c] = 0.0f;
        for (int64_t j = 0; j < p->lk; j++) {
            float e = probs[r * lkp + j];
            const float *vj = v + j * p->ldv;
            for (int64_t c = c0; c < p->dv; c++)
                y[c] += e * vj[c];
        }
        for (int64_t c = c0; c < p->dv; c++)
            y[c] *= inv_sum[r];
    }
}

static void block_portable(const FxrtAttention *p, const RowBlock *b, const float *kt,
                           const float *v, float *scores)
{
    int64_t lkp = padded_keys(p->lk);
    float inv_sum[ATT_ROWS];
    scores_portable(p, b, kt, scores);
    finish_scores(p, b, scores);
    for (int r = 0; r < b->rows; r++) {
        float *s = scores + r * lkp;
        inv_sum[r] = 1.0f / exp_row_portable(s, lkp, row_max(s, p->lk));
    }
    output_portable(p, b, v, scores, inv_sum, 0);
}

/* --- AVX2 ---------------------------------------------------------------------- */

#ifdef FXRT_ATTENTION_X86
/* Scores [j, j + 8 * (1 + wide)) of the block's four rows (a missing row of
 * a short block reads the last real row again; its scores are never used).
 * The rows are written out one by one: accumulators kept in an array
 * indexed by a loop were spilled to the stack. */
FXRT_AVX2_FN void scores_tile_avx2(const FxrtAttention *p, const float *const *q,
                                   const float *kt, int64_t lkp, int64_t j, int wide,
                                   float *scores)
{
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00;
    __m256 a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    const float *q0 = q[0], *q1 = q[1], *q2 = q[2], *q3 = q[3];
    const float *ktc = kt + j;
    if (wide) {
        for (int64_t c = 0; c < p->d; c++, ktc += lkp) {
            __m256 k0 = _mm256_loadu_ps(ktc), k1 = _mm256_loadu_ps(ktc + ATT_LANES);
            __m256 b = _mm256_broadcast_ss(q0 + c);
            a00 = _mm256_fmadd_ps(b, k0, a00);
            a01 = _mm256_fmadd_ps(b, k1, a01);
            b = _mm256_broadcast_ss(q1 + c);
            a10 = _mm256_fmadd_ps(b, k0, a10);
            a11 = _mm256_fmadd_ps(b, k1, a11);
            b = _mm256_broadcast_ss(q2 + c);
            a20 = _mm256_fmadd_ps(b, k0, a20);
            a21 = _mm256_fmadd_ps(b, k1, a21);
            b = _mm256_broadcast_ss(q3 + c);
            a30 = _mm256_fmadd_ps(b, k0, a30);
            a31 = _mm256_fmadd_ps(b, k1, a31);
        }
    } else {
        for (int64_t c = 0; c < p->d; c++, ktc += lkp) {
            __m256 k0 = _mm256_loadu_ps(ktc);
            a00 = _mm256_fmadd_ps(_mm256_broadcast_ss(q0 + c), k0, a00);
            a10 = _mm256_fmadd_ps(_mm256_broadcast_ss(q1 + c), k0, a10);
            a20 = _mm256_fmadd_ps(_mm256_broadcast_ss(q2 + c), k0, a20);
            a30 = _mm256_fmadd_ps(_mm256_broadcast_ss(q3 + c), k0, a30);
        }
    }
    __m256 scale = _mm256_set1_ps(p->scale);
    float *s = scores + j;
    _mm256_storeu_ps(s, _mm256_mul_ps(scale, a00));
    _mm256_storeu_ps(s + lkp, _mm256_mul_ps(scale, a10));
    _mm256_storeu_ps(s + 2 * lkp, _mm256_mul_ps(scale, a20));
    _mm256_storeu_ps(s + 3 * lkp, _mm256_mul_ps(scale, a30));
    if (wide) {
        s += ATT_LANES;
        _mm256_storeu_ps(s, _mm256_mul_ps(scale, a01));
        _mm256_storeu_ps(s + lkp, _mm256_mul_ps(scale, a11));
        _mm256_storeu_ps(s + 2 * lkp, _mm256_mul_ps(scale, a21));
        _mm256_storeu_ps(s + 3 * lkp, _mm256_mul_ps(scale, a31));
    }
}

/* transpose_keys for K stored [Lk, D], 8 x 8 blocks through registers
 * (the scalar copy's strided loads cost a tenth of the kernel at Lk = D =
 * 32); the edges as in transpose_keys. */
__attribute__((target("avx2,fma"))) static void transpose_keys_avx2(const FxrtAttention *p,
                                                                     const float *k, float *kt)
{
    int64_t lkp = padded_keys(p->lk), j8 = p->lk / 8 * 8, c8 = p->d / 8 * 8;
    for (int64_t j = 0; j < j8; j += 8)
        for (int64_t c = 0; c < c8; c += 8) {
            const float *src = k + j * p->ldk + c;
            __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + p->ldk);
            __m256 r2 = _mm256_loadu_ps(src + 2 * p->ldk), r3 = _mm256_loadu_ps(src + 3 * p->ldk);
            __m256 r4 = _mm256_loadu_ps(src + 4 * p->ldk), r5 = _mm256_loadu_ps(src + 5 * p->ldk);
            __m256 r6 = _mm256_loadu_ps(src + 6 * p->ldk), r7 = _mm256_loadu_ps(src + 7 * p->ldk);
            __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
            __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
            __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
            __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
            __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            float *dst = kt + c * lkp + j;
            _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(dst + lkp, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(dst + 2 * lkp, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(dst + 3 * lkp, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(dst + 4 * lkp, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(dst + 5 * lkp, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(dst + 6 * lkp, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(dst + 7 * lkp, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
    for (int64_t c = 0; c < p->d; c++) {
        float *row = kt + c * lkp;
        for (int64_t j = c < c8 ? j8 : 0; j < p->lk; j++)
            row[j] = k[j * p->ldk + c];
        for (int64_t j = p->lk; j < lkp; j++)
            row[j] = 0.0f;
    }
}

FXRT_AVX2_FN float exp_row_avx2(float *s, int64_t lkp, float max)
{
    __m256 m = _mm256_set1_ps(max), sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < lkp; j += ATT_LANES) {
        __m256 e = fxrt_exp_nonpositive_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
        _mm256_storeu_ps(s + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

FXRT_AVX2_FN float row_max_avx2(const float *s, int64_t lkp)
{
    /* the padding lanes hold -inf, which never wins */
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < lkp; j += ATT_LANES)
        m = _mm256_max_ps(m, _mm256_loadu_ps(s + j));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* Output columns [c, c + 8 * (1 + wide)) of the block's rows, from the
 * four rows of probabilities (the unused ones zero). */
FXRT_AVX2_FN void output_tile_avx2(const FxrtAttention *p, const RowBlock *b, const float *v,
                                   const float *probs, int64_t lkp, const float *inv_sum,
                                   int64_t c, int wide)
{
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00;
    __m256 a20 = a00, a21 = a00, a30 = a00, a31 = a00;
    const float *vj = v + c;
    if (wide) {
        for (int64_t j = 0; j < p->lk; j++, vj += p->ldv) {
            __m256 v0 = _mm256_loadu_ps(vj), v1 = _mm256_loadu_ps(vj + ATT_LANES);
            __m256 e = _mm256_broadcast_ss(probs + j);
            a00 = _mm256_fmadd_ps(e, v0, a00);
            a01 = _mm256_fmadd_ps(e, v1, a01);
            e = _mm256_broadcast_ss(probs + lkp + j);
            a10 = _mm256_fmadd_ps(e, v0, a10);
            a11 = _mm256_fmadd_ps(e, v1, a11);
            e = _mm256_broadcast_ss(probs + 2 * lkp + j);
            a20 = _mm256_fmadd_ps(e, v0, a20);
            a21 = _mm256_fmadd_ps(e, v1, a21);
            e = _mm256_broadcast_ss(probs + 3 * lkp + j);
            a30 = _mm256_fmadd_ps(e, v0, a30);
            a31 = _mm256_fmadd_ps(e, v1, a31);
        }
    } else {
        for (int64_t j = 0; j < p->lk; j++, vj += p->ldv) {
            __m256 v0 = _mm256_loadu_ps(vj);
            a00 = _mm256_fmadd_ps(_mm256_broadcast_ss(probs + j), v0, a00);
            a10 = _mm256_fmadd_ps(_mm256_broadcast_ss(probs + lkp + j), v0, a10);
            a20 = _mm256_fmadd_ps(_mm256_broadcast_ss(probs + 2 * lkp + j), v0, a20);
            a30 = _mm256_fmadd_ps(_mm256_broadcast_ss(probs + 3 * lkp + j), v0, a30);
        }
    }
    const __m256 acc[ATT_ROWS][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}};
    for (int r = 0; r < b->rows; r++) {
        __m256 inv = _mm256_set1_ps(inv_sum[r]);
        _mm256_storeu_ps(b->y[r] + c, _mm256_mul_ps(acc[r][0], inv));
        if (wide)
            _mm256_storeu_ps(b->y[r] + c + ATT_LANES, _mm256_mul_ps(acc[r][1], inv));
    }
}

__attribute__((target("avx2,fma"))) static void block_avx2(const FxrtAttention *p,
                                                            const RowBlock *b, const float *kt,
                                                            const float *v, float *scores)
{
    int64_t lkp = padded_keys(p->lk);
    const float *q[ATT_ROWS];
    for (int r = 0; r < ATT_ROWS; r++)
        q[r] = b->q[r < b->rows ? r : b->rows - 1];
    /* the tile writes all ATT_ROWS rows of scores: scratch has room for them */
    int64_t j = 0;
    for (; j + 2 * ATT_LANES <= lkp; j += 2 * ATT_LANES)
        scores_tile_avx2(p, q, kt, lkp, j, 1, scores);
    if (j < lkp)
        scores_tile_avx2(p, q, kt, lkp, j, 0, scores);
    finish_scores(p, b, scores);
    float inv_sum[ATT_ROWS];
    for (int r = 0; r < b->rows; r++) {
        float *s = scores + r * lkp;
        inv_sum[r] = 1.0f / exp_row_avx2(s, lkp, row_max_avx2(s, lkp));
    }
    for (int r = b->rows; r < ATT_ROWS; r++) {
        /* the unused rows' probabilities must be finite numbers for the tile */
        memset(scores + r * lkp, 0, (size_t)lkp * sizeof *scores);
        inv_sum[r] = 0.0f;
    }
    int64_t c = 0;
    for (; c + 2 * ATT_LANES <= p->dv; c += 2 * ATT_LANES)
        output_tile_avx2(p, b, v, scores, lkp, inv_sum, c, 1);
    if (c + ATT_LANES <= p->dv) {
        output_tile_avx2(p, b, v, scores, lkp, inv_sum, c, 0);
        c += ATT_LANES;
    }
    if (c < p->dv)
        output_portable(p, b, v, scores, inv_sum, c);
}

/* The widest tiles in use: 1 AVX2, 0 portable; capped by
 * fxrt_attention_limit_isa (runtime/fxrt_isa.h). */
static int isa_cap = 1;

void fxrt_attention_limit_isa(int level) { isa_cap = level; }
#else
void fxrt_attention_limit_isa(int level) { (void)level; }
#endif

static int64_t batch_offset(const FxrtAttention *p, const int64_t *strides, int64_t e)
{
    int64_t offset = 0;
    for (int r = p->batch_rank - 1; r >= 0; r--) {
        offset += e % p->batch_dims[r] * strides[r];
        e /= p->batch_dims[r];
    }
    return offset;
}

static void fill_zeros(const FxrtAttention *p, float *y, int64_t count)
{
    for (int64_t e = 0; e < count; e++)
        for (int64_t i = 0; i < p->lq; i++)
            memset(y + batch_offset(p, p->y_strides, e) + i * p->ldy, 0,
                   (size_t)p->dv * sizeof *y);
}

void fxrt_attention_f32(const FxrtAttention *p, const float *q, const float *k, const float *v,
                        const float *mask, float *y, float *scratch)
{
    if (p->lq <= 0 || p->dv <= 0)
        return;
    int64_t count = 1;
    for (int r = 0; r < p->batch_rank; r++)
        count *= p->batch_dims[r];
    if (p->lk <= 0) {
        /* no keys: the second product is an empty sum */
        fill_zeros(p, y, count);
        return;
    }
    int64_t lkp = padded_keys(p->lk);
    float *kt = scratch, *scores = scratch + lkp * p->d;
    void (*block)(const FxrtAttention *, const RowBlock *, const float *, const float *,
                  float *) = block_portable;
    void (*transpose)(const FxrtAttention *, const float *, float *) = transpose_keys;
#ifdef FXRT_ATTENTION_X86
    if (isa_cap >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        block = block_avx2;
        if (!p->k_transposed)
            transpose = transpose_keys_avx2;
    }
#endif
    int64_t last_k = -1;
    for (int64_t e = 0; e < count; e++) {
        int64_t oq = batch_offset(p, p->q_strides, e), ok = batch_offset(p, p->k_strides, e);
        int64_t ov = batch_offset(p, p->v_strides, e), om = batch_offset(p, p->mask_strides, e);
        int64_t oy = batch_offset(p, p->y_strides, e);
        if (ok != last_k) {
            transpose(p, k + ok, kt);
            last_k = ok;
        }
        for (int64_t i0 = 0; i0 < p->lq; i0 += ATT_ROWS) {
            RowBlock b = {.rows = (int)(p->lq - i0 < ATT_ROWS ? p->lq - i0 : ATT_ROWS)};
            for (int r = 0; r < b.rows; r++) {
                b.q[r] = q + oq + (i0 + r) * p->ldq;
                b.mask[r] = mask ? mask + om + (i0 + r) * p->mask_row_stride : NULL;
                b.y[r] = y + oy + (i0 + r) * p->ldy;
            }
            block(p, &b, kt, v + ov, scores);
        }
    }
}
