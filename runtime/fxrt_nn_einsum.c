/*
 * fxrt_nn_einsum.c - the general Einsum contraction: a loop nest over the
 * equation's letters, output letters outside (the output is written once,
 * in order) and summed letters inside.  It covers diagonals (a letter
 * repeated in one operand has the sum of its strides), reductions,
 * transposes, broadcasting (stride 0) and any number of operands up to
 * FXRT_EINSUM_MAX_OPERANDS.  It does no blocking; the compiler routes the
 * batched-matrix-product forms that matter for speed to GEMM instead.
 */
#include "fxrt.h"

/* One step of an odometer over letters [first, last): advances idx and
 * moves each operand offset by that letter's stride. */
static void odometer_step(const FxrtEinsumParams *p, int first, int last, int64_t *idx,
                          int64_t *off)
{
    for (int l = last - 1; l >= first; l--) {
        for (int k = 0; k < p->num_operands; k++)
            off[k] += p->strides[k][l];
        if (++idx[l] < p->sizes[l])
            return;
        for (int k = 0; k < p->num_operands; k++)
            off[k] -= p->strides[k][l] * p->sizes[l];
        idx[l] = 0;
    }
}

static int64_t letters_numel(const FxrtEinsumParams *p, int first, int last)
{
    int64_t n = 1;
    for (int l = first; l < last; l++)
        n *= p->sizes[l];
    return n;
}

void fxrt_einsum_f32(const FxrtEinsumParams *p, const float *const *ops, float *out)
{
    int no = p->num_out, nl = p->num_letters;
    int64_t out_total = letters_numel(p, 0, no), sum_total = letters_numel(p, no, nl);
    int64_t idx[FXRT_EINSUM_MAX_LETTERS] = {0};
    int64_t base[FXRT_EINSUM_MAX_OPERANDS] = {0};
    for (int64_t q = 0; q < out_total; q++) {
        int64_t off[FXRT_EINSUM_MAX_OPERANDS];
        for (int k = 0; k < p->num_operands; k++)
            off[k] = base[k];
        double acc = 0.0;
        for (int64_t s = 0; s < sum_total; s++) {
            double prod = 1.0;
            for (int k = 0; k < p->num_operands; k++)
                prod *= (double)ops[k][off[k]];
            acc += prod;
            odometer_step(p, no, nl, idx, off);
        }
        out[q] = (float)acc;
        odometer_step(p, 0, no, idx, base);
    }
}

void fxrt_einsum_generic(FxrtDType t, const FxrtEinsumParams *p, const void *const *ops,
                         void *out)
{
    int no = p->num_out, nl = p->num_letters;
    int is_float = fxrt_dtype_is_float(t);
    int64_t out_total = letters_numel(p, 0, no), sum_total = letters_numel(p, no, nl);
    int64_t idx[FXRT_EINSUM_MAX_LETTERS] = {0};
    int64_t base[FXRT_EINSUM_MAX_OPERANDS] = {0};
    for (int64_t q = 0; q < out_total; q++) {
        int64_t off[FXRT_EINSUM_MAX_OPERANDS];
        for (int k = 0; k < p->num_operands; k++)
            off[k] = base[k];
        double facc = 0.0;
        uint64_t iacc = 0; /* integers wrap, computed unsigned */
        for (int64_t s = 0; s < sum_total; s++) {
            if (is_float) {
                double prod = 1.0;
                for (int k = 0; k < p->num_operands; k++)
                    prod *= fxrt_load_f64(t, ops[k], (size_t)off[k]);
                facc += prod;
            } else {
                uint64_t prod = 1;
                for (int k = 0; k < p->num_operands; k++)
                    prod *= (uint64_t)fxrt_load_i64(t, ops[k], (size_t)off[k]);
                iacc += prod;
            }
            odometer_step(p, no, nl, idx, off);
        }
        if (is_float)
            fxrt_store_f64(t, out, (size_t)q, facc);
        else
            fxrt_store_i64(t, out, (size_t)q, (int64_t)iacc);
        odometer_step(p, 0, no, idx, base);
    }
}
