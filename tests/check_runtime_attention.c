/*
 * check_runtime_attention.c - fxrt_attention_f32 against a naive
 * double-precision softmax(scale Q K^T + mask) V: query and key counts that
 * differ and are no multiple of the tiles (4 rows, 8 or 16 columns), head
 * sizes no multiple of 8, K stored either way, masks broadcast along every
 * axis (with -inf entries), batch dims broadcast, a strided output (the
 * head merge), scores in the thousands (the max must be subtracted), and
 * the edge cases: no keys, a row masked out entirely.  Each case runs on
 * the AVX2 tiles and on the portable loops (fxrt_attention_limit_isa).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"
#include "runtime/fxrt_isa.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static float uniform(float lo, float hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 40) & 0xFFFFFF) / (float)0x1000000;
}

static float *random_floats(int64_t n, float lo, float hi)
{
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = uniform(lo, hi);
    return v;
}

static int64_t batch_count(const FxrtAttention *p)
{
    int64_t count = 1;
    for (int r = 0; r < p->batch_rank; r++)
        count *= p->batch_dims[r];
    return count;
}

static int64_t offset_of(const FxrtAttention *p, const int64_t *strides, int64_t e)
{
    int64_t off = 0;
    for (int r = p->batch_rank - 1; r >= 0; r--) {
        off += e % p->batch_dims[r] * strides[r];
        e /= p->batch_dims[r];
    }
    return off;
}

/* The definition, in doubles, one element at a time. */
static void reference(const FxrtAttention *p, const float *q, const float *k, const float *v,
                      const float *mask, double *y_ref)
{
    double *s = malloc((size_t)(p->lk > 0 ? p->lk : 1) * sizeof *s);
    ck_assert_ptr_nonnull(s);
    for (int64_t e = 0; e < batch_count(p); e++) {
        const float *qe = q + offset_of(p, p->q_strides, e);
        const float *ke = k + offset_of(p, p->k_strides, e);
        const float *ve = v + offset_of(p, p->v_strides, e);
        const float *me = mask ? mask + offset_of(p, p->mask_strides, e) : NULL;
        for (int64_t i = 0; i < p->lq; i++) {
            double max = -INFINITY;
            for (int64_t j = 0; j < p->lk; j++) {
                double dot = 0.0;
                for (int64_t c = 0; c < p->d; c++) {
                    double kv = p->k_transposed ? ke[c * p->ldk + j] : ke[j * p->ldk + c];
                    dot += (double)qe[i * p->ldq + c] * kv;
                }
                s[j] = (double)p->scale * dot;
                if (me)
                    s[j] += me[i * p->mask_row_stride + j * p->mask_col_stride];
                max = s[j] > max ? s[j] : max;
            }
            double sum = 0.0;
            for (int64_t j = 0; j < p->lk; j++)
                sum += s[j] = exp(s[j] - max);
            for (int64_t c = 0; c < p->dv; c++) {
                double acc = 0.0;
                for (int64_t j = 0; j < p->lk; j++)
                    acc += s[j] * ve[j * p->ldv + c];
                y_ref[(e * p->lq + i) * p->dv + c] = p->lk > 0 ? acc / sum : 0.0;
            }
        }
    }
    free(s);
}

/* Runs the kernel on random data of p's geometry (operand sizes given in
 * floats) and compares every output with the reference; values of Q and K
 * in [-qk, qk]. */
static void check_case(const FxrtAttention *p, int64_t q_floats, int64_t k_floats,
                       int64_t v_floats, int64_t mask_floats, int64_t y_floats, float qk)
{
    float *q = random_floats(q_floats, -qk, qk), *k = random_floats(k_floats, -qk, qk);
    if (qk > 2.0f) {
        /* large scores from integers and a power-of-two scale are exact in
         * float: only the softmax's own rounding is left to compare */
        for (int64_t i = 0; i < q_floats; i++)
            q[i] = roundf(q[i]);
        for (int64_t i = 0; i < k_floats; i++)
            k[i] = roundf(k[i]);
    }
    float *v = random_floats(v_floats, -2.0f, 2.0f);
    float *mask = mask_floats > 0 ? random_floats(mask_floats, -3.0f, 1.0f) : NULL;
    /* a few keys masked out entirely, as a causal or padding mask does,
     * never a whole row (that is NaN, checked on its own) */
    for (int64_t i = 0; mask && i < mask_floats; i += 5)
        if (p->mask_col_stride != 0 && i % p->lk != 0)
            mask[i] = -INFINITY;
    float *y = malloc((size_t)y_floats * sizeof *y);
    float *scratch = malloc((size_t)fxrt_attention_scratch_floats(p) * sizeof *scratch);
    int64_t n = batch_count(p) * p->lq * p->dv;
    double *want = malloc((size_t)(n > 0 ? n : 1) * sizeof *want);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_nonnull(scratch);
    ck_assert_ptr_nonnull(want);
    for (int64_t i = 0; i < y_floats; i++)
        y[i] = NAN; /* what the kernel does not write stays NaN, and fails */
    fxrt_attention_f32(p, q, k, v, mask, y, scratch);
    reference(p, q, k, v, mask, want);
    for (int64_t e = 0; e < batch_count(p); e++)
        for (int64_t i = 0; i < p->lq; i++)
            for (int64_t c = 0; c < p->dv; c++) {
                double w = want[(e * p->lq + i) * p->dv + c];
                float got = y[offset_of(p, p->y_strides, e) + i * p->ldy + c];
                /* outputs are convex combinations of V's entries (|v| <= 2) */
                ck_assert_msg(fabs((double)got - w) <= 2e-5 + 1e-4 * fabs(w),
                              "batch %lld row %lld column %lld: %.9g, want %.9g", (long long)e,
                              (long long)i, (long long)c, (double)got, w);
            }
    free(q);
    free(k);
    free(v);
    free(mask);
    free(y);
    free(scratch);
    free(want);
}

/* [batch, heads, L, D] contiguous operands, row-major output. */
static FxrtAttention contiguous(int64_t batch, int64_t heads, int64_t lq, int64_t lk, int64_t d,
                                int64_t dv, float scale)
{
    FxrtAttention p = {.batch_rank = 2, .batch_dims = {batch, heads},
                       .q_strides = {heads * lq * d, lq * d},
                       .k_strides = {heads * lk * d, lk * d},
                       .v_strides = {heads * lk * dv, lk * dv},
                       .y_strides = {heads * lq * dv, lq * dv},
                       .lq = lq, .lk = lk, .d = d, .dv = dv,
                       .ldq = d, .ldk = d, .ldv = dv, .ldy = dv, .scale = scale};
    return p;
}

static void check_contiguous(int64_t batch, int64_t heads, int64_t lq, int64_t lk, int64_t d,
                             int64_t dv, float qk)
{
    FxrtAttention p = contiguous(batch, heads, lq, lk, d, dv, 1.0f / sqrtf((float)d));
    int64_t bh = batch * heads;
    check_case(&p, bh * lq * d, bh * lk * d, bh * lk * dv, 0, bh * lq * dv, qk);
}

START_TEST(test_shapes)
{
    check_contiguous(1, 4, 32, 32, 32, 32, 1.0f); /* the encoder's heads */
    check_contiguous(2, 3, 5, 7, 13, 11, 1.0f);   /* Lq != Lk, D and Dv odd */
    check_contiguous(1, 2, 1, 1, 1, 1, 1.0f);
    check_contiguous(1, 1, 9, 33, 20, 24, 1.0f);  /* one 16-wide and one 8-wide tile */
    check_contiguous(1, 1, 70, 3, 64, 17, 1.0f);  /* fewer keys than a vector */
    check_contiguous(1, 2, 6, 130, 8, 40, 1.0f);
}
END_TEST

/* Scores of thousands (and of 1e5): exp without the max subtracted
 * overflows to inf. */
START_TEST(test_large_scores)
{
    check_contiguous(1, 2, 7, 19, 16, 9, 30.0f);
    FxrtAttention p = contiguous(1, 1, 5, 12, 8, 8, 1024.0f);
    check_case(&p, 5 * 8, 12 * 8, 12 * 8, 0, 5 * 8, 4.0f);
}
END_TEST

/* An additive mask: a full [Lq, Lk] one shared by the batch, one row
 * broadcast over the queries ([1, Lk], key padding), one per batch element
 * and query, constant along the keys. */
START_TEST(test_masks)
{
    int64_t lq = 6, lk = 11, d = 12, dv = 10, heads = 3;
    FxrtAttention p = contiguous(1, heads, lq, lk, d, dv, 0.3f);
    p.mask_row_stride = lk;
    p.mask_col_stride = 1;
    check_case(&p, heads * lq * d, heads * lk * d, heads * lk * dv, lq * lk, heads * lq * dv, 1.0f);
    p.mask_row_stride = 0;
    check_case(&p, heads * lq * d, heads * lk * d, heads * lk * dv, lk, heads * lq * dv, 1.0f);
    p.mask_strides[1] = lq;
    p.mask_row_stride = 1;
    p.mask_col_stride = 0;
    check_case(&p, heads * lq * d, heads * lk * d, heads * lk * dv, heads * lq, heads * lq * dv,
               1.0f);
}
END_TEST

/* K stored as [D, Lk] (k_transposed, with a row stride above Lk: a slice),
 * K and V shared by the heads (stride 0), and the output written with the
 * head merge's strides: [Lq, heads, Dv] rows of heads * Dv. */
START_TEST(test_layouts)
{
    int64_t heads = 3, lq = 9, lk = 10, d = 7, dv = 5, ldk = 13;
    FxrtAttention p = {.batch_rank = 1, .batch_dims = {heads}, .q_strides = {lq * d},
                       .k_strides = {0}, .v_strides = {0}, .y_strides = {dv},
                       .lq = lq, .lk = lk, .d = d, .dv = dv, .k_transposed = 1,
                       .ldq = d, .ldk = ldk, .ldv = dv, .ldy = heads * dv, .scale = 0.5f};
    check_case(&p, heads * lq * d, d * ldk, lk * dv, 0, lq * heads * dv, 1.5f);
}
END_TEST

START_TEST(test_no_keys_gives_zeros)
{
    FxrtAttention p = contiguous(1, 2, 3, 0, 4, 5, 1.0f);
    float q[24], k[1] = {0}, v[1] = {0}, y[30], scratch[64];
    for (int i = 0; i < 24; i++)
        q[i] = 1.0f;
    for (int i = 0; i < 30; i++)
        y[i] = NAN;
    ck_assert_int_le(fxrt_attention_scratch_floats(&p), 64);
    fxrt_attention_f32(&p, q, k, v, NULL, y, scratch);
    for (int i = 0; i < 30; i++)
        ck_assert_float_eq(y[i], 0.0f);
}
END_TEST

/* A query whose every key is masked out has no distribution: NaN, as
 * Softmax gives; the other rows are unaffected. */
START_TEST(test_row_masked_out_is_nan)
{
    FxrtAttention p = contiguous(1, 1, 2, 3, 2, 2, 1.0f);
    p.mask_row_stride = 3;
    p.mask_col_stride = 1;
    const float q[4] = {1, 2, 3, 4}, k[6] = {1, 0, 0, 1, 1, 1}, v[6] = {1, 2, 3, 4, 5, 6};
    const float mask[6] = {-INFINITY, -INFINITY, -INFINITY, 0, 0, 0};
    float y[4], scratch[64];
    ck_assert_int_le(fxrt_attention_scratch_floats(&p), 64);
    fxrt_attention_f32(&p, q, k, v, mask, y, scratch);
    ck_assert_msg(isnan(y[0]) && isnan(y[1]), "row 0 is %g %g, not NaN", y[0], y[1]);
    ck_assert_msg(isfinite(y[2]) && isfinite(y[3]), "row 1 is %g %g", y[2], y[3]);
}
END_TEST

static void use_avx2(void) { fxrt_attention_limit_isa(1); }
static void use_portable(void) { fxrt_attention_limit_isa(0); }

static Suite *attention_suite(void)
{
    Suite *s = suite_create("runtime_attention");
    const char *names[] = {"avx2", "portable"};
    void (*caps[])(void) = {use_avx2, use_portable};
    for (int i = 0; i < 2; i++) {
        TCase *tc = tcase_create(names[i]);
        tcase_set_timeout(tc, 300);
        tcase_add_checked_fixture(tc, caps[i], use_avx2);
        tcase_add_test(tc, test_shapes);
        tcase_add_test(tc, test_large_scores);
        tcase_add_test(tc, test_masks);
        tcase_add_test(tc, test_layouts);
        tcase_add_test(tc, test_no_keys_gives_zeros);
        tcase_add_test(tc, test_row_masked_out_is_nan);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(attention_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
