/*
 * nn_attention.c - Attention, the internal op that the attention-fusion
 * pass makes of MatMul -> Softmax -> MatMul (opt/pass_attention_fusion.c):
 *
 *   Attention(Q, K, V[, mask]) = softmax(scale * Q K^T + mask, last axis) V
 *
 * Q is [..., Lq, D]; K is [..., Lk, D], or [..., D, Lk] (K^T as stored)
 * when k_transposed is 1; V is [..., Lk, Dv]; the optional additive mask
 * broadcasts (numpy rules, right-aligned) to [..., Lq, Lk].  Q, K and V have
 * one rank r >= 2, float32; their batch dims broadcast as MatMul's do (each
 * 1 or the common size).  The logical result [..., Lq, Dv] is stored
 * permuted by perm_y, and Q, K and V may be read through perm_q, perm_k and
 * perm_v, as TransposedMatMul's operands and result (absent: the identity;
 * each must keep the last axis last: Q's D, K's D or, when k_transposed,
 * Lk, V's and Y's Dv), so that the head split and merge around attention
 * cost no copy; the shapes above are those seen through the permutations.
 *
 * One runtime call, fxrt_attention_f32 (runtime/fxrt_nn_attention.c), in the
 * interpreter and in generated code; its scratch (K transposed and one
 * block of scores) is planned by the arena through scratch_bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static void contiguous_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

/* Attribute `name` as a permutation of r axes (absent: identity) that
 * keeps the last axis last: the kernel reads every operand's rows, and
 * writes the output's, as contiguous runs. */
static FxStatus read_perm(const Node *n, Diag *d, const char *name, int r, int64_t *perm)
{
    const int64_t *p;
    int64_t count = node_attr_ints(n, name, &p);
    if (count <= 0) {
        for (int i = 0; i < r; i++)
            perm[i] = i;
        return FX_OK;
    }
    uint32_t seen = 0;
    for (int i = 0; i < r && count == r; i++)
        if (p[i] >= 0 && p[i] < r)
            seen |= 1u << p[i];
    if (count != r || seen != (1u << r) - 1u)
        return diag_node_error(d, FX_ERR_INVALID, n, "%s is not a permutation of %d axes", name,
                               r);
    if (p[r - 1] != r - 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "%s must keep the last axis last", name);
    memcpy(perm, p, (size_t)r * sizeof *p);
    return FX_OK;
}

static FxStatus check_f32(const Node *n, Diag *d, const TensorType *t, const char *what)
{
    if (t->dtype != FXRT_DTYPE_FLOAT32)
        return diag_node_error(d, FX_ERR_INVALID, n, "Attention takes float32; %s is %s", what,
                               dtype_name(t->dtype));
    return FX_OK;
}

/* The output type and the kernel parameters of node n for its operand types
 * (mask NULL: absent); called by infer, eval, emit and scratch_bytes. */
static FxStatus attention_plan(const Node *n, Diag *d, const TensorType *q, const TensorType *k,
                               const TensorType *v, const TensorType *mask, TensorType *out,
                               FxrtAttention *p)
{
    FxStatus st;
    if ((st = check_f32(n, d, q, "Q")) != FX_OK || (st = check_f32(n, d, k, "K")) != FX_OK ||
        (st = check_f32(n, d, v, "V")) != FX_OK ||
        (mask && (st = check_f32(n, d, mask, "the mask")) != FX_OK))
        return st;
    int r = q->rank;
    if (r < 2 || k->rank != r || v->rank != r)
        return diag_node_error(d, FX_ERR_SHAPE, n,
                               "Q, K and V must have one rank >= 2, got %d, %d and %d", q->rank,
                               k->rank, v->rank);
    /* Q, K and V as the kernel reads them: the stored tensors through
     * perm_q, perm_k and perm_v, with the stored strides */
    const TensorType *stored[3] = {q, k, v};
    static const char *const perm_names[3] = {"perm_q", "perm_k", "perm_v"};
    TensorType logical[3];
    int64_t lstrides[3][FX_MAX_RANK];
    for (int w = 0; w < 3; w++) {
        int64_t perm[FX_MAX_RANK], s[FX_MAX_RANK];
        if ((st = read_perm(n, d, perm_names[w], r, perm)) != FX_OK)
            return st;
        contiguous_strides(r, stored[w]->dims, s);
        logical[w] = *stored[w];
        for (int i = 0; i < r; i++) {
            logical[w].dims[i] = stored[w]->dims[perm[i]];
            lstrides[w][i] = s[perm[i]];
        }
    }
    q = &logical[0];
    k = &logical[1];
    v = &logical[2];
    memset(p, 0, sizeof *p);
    p->k_transposed = node_attr_int(n, "k_transposed", 0) != 0;
    p->scale = node_attr_float(n, "scale", 1.0f);
    p->lq = q->dims[r - 2];
    p->d = q->dims[r - 1];
    p->lk = k->dims[p->k_transposed ? r - 1 : r - 2];
    int64_t kd = k->dims[p->k_transposed ? r - 2 : r - 1];
    char sq[128], sk[128], sv[128];
    if (kd != p->d || v->dims[r - 2] != p->lk)
        return diag_node_error(d, FX_ERR_SHAPE, n,
                               "Q %s, K %s%s and V %s do not fit (Q [..., Lq, D], K [..., %s], "
                               "V [..., Lk, Dv])",
                               type_format(q, sq, sizeof sq), type_format(k, sk, sizeof sk),
                               p->k_transposed ? " (transposed)" : "",
                               type_format(v, sv, sizeof sv), p->k_transposed ? "D, Lk" : "Lk, D");
    p->dv = v->dims[r - 1];
    int64_t perm[FX_MAX_RANK];
    if ((st = read_perm(n, d, "perm_y", r, perm)) != FX_OK)
        return st;

    /* the logical result, then its stored (permuted) dims and strides */
    int64_t ly[FX_MAX_RANK], sy[FX_MAX_RANK], y_axis[FX_MAX_RANK];
    for (int i = 0; i < r - 2; i++) {
        int64_t b = 1;
        const int64_t dims[3] = {q->dims[i], k->dims[i], v->dims[i]};
        for (int w = 0; w < 3; w++) {
            if (dims[w] != 1 && b != 1 && dims[w] != b)
                return diag_node_error(d, FX_ERR_SHAPE, n,
                                       "batch axis %d of Q, K and V (%lld, %lld, %lld) does not "
                                       "broadcast",
                                       i, (long long)dims[0], (long long)dims[1],
                                       (long long)dims[2]);
            if (dims[w] != 1)
                b = dims[w];
        }
        ly[i] = b;
    }
    ly[r - 2] = p->lq;
    ly[r - 1] = p->dv;
    *out = (TensorType){.dtype = FXRT_DTYPE_FLOAT32, .rank = r};
    for (int i = 0; i < r; i++) {
        out->dims[i] = ly[perm[i]];
        y_axis[perm[i]] = i;
    }
    contiguous_strides(r, out->dims, sy);

    /* the mask, right-aligned against [..., Lq, Lk] */
    int64_t md[FX_MAX_RANK], ms[FX_MAX_RANK];
    if (mask) {
        if (mask->rank > r)
            return diag_node_error(d, FX_ERR_SHAPE, n, "the mask has rank %d, above Q's %d",
                                   mask->rank, r);
        for (int i = 0; i < r; i++)
            md[i] = 1;
        memcpy(md + (r - mask->rank), mask->dims, (size_t)mask->rank * sizeof *md);
        contiguous_strides(r, md, ms);
        for (int i = 0; i < r; i++) {
            int64_t want = i == r - 1 ? p->lk : i == r - 2 ? p->lq : ly[i];
            if (md[i] != 1 && md[i] != want) {
                char sm[128];
                return diag_node_error(d, FX_ERR_SHAPE, n,
                                       "the mask %s does not broadcast to the scores (axis %d is "
                                       "%lld, not 1 or %lld)",
                                       type_format(mask, sm, sizeof sm), i, (long long)md[i],
                                       (long long)want);
            }
        }
        p->mask_row_stride = md[r - 2] == 1 ? 0 : ms[r - 2];
        p->mask_col_stride = md[r - 1] == 1 ? 0 : ms[r - 1];
    }

    const int64_t *sqs = lstrides[0], *sks = lstrides[1], *svs = lstrides[2];
    p->ldq = sqs[r - 2];
    p->ldk = sks[r - 2];
    p->ldv = svs[r - 2];
    p->ldy = sy[y_axis[r - 2]];
    for (int i = 0; i < r - 2; i++) {
        if (ly[i] == 1)
            continue;
        int b = p->batch_rank++;
        p->batch_dims[b] = ly[i];
        p->q_strides[b] = q->dims[i] == 1 ? 0 : sqs[i];
        p->k_strides[b] = k->dims[i] == 1 ? 0 : sks[i];
        p->v_strides[b] = v->dims[i] == 1 ? 0 : svs[i];
        p->mask_strides[b] = mask && md[i] != 1 ? ms[i] : 0;
        p->y_strides[b] = sy[y_axis[i]];
    }
    uint64_t scratch_floats = (uint64_t)fxrt_attention_scratch_floats(p), bytes;
    if (!size_mul_ok(scratch_floats, sizeof(float), &bytes) || bytes > FX_MAX_TENSOR_BYTES)
        return diag_node_error(d, FX_ERR_NOMEM, n,
                               "the attention's scratch (%llu floats) is beyond the limits",
                               (unsigned long long)scratch_floats);
    return FX_OK;
}

static const TensorType *mask_type(const Node *n)
{
    return n->num_args > 3 && n->args[3] ? node_input_type(n, 3) : NULL;
}

static FxStatus attention_infer(InferCtx *c)
{
    FxrtAttention p;
    const TensorType *mask = c->num_inputs > 3 ? c->in[3] : NULL;
    return attention_plan(c->node, c->diag, c->in[0], c->in[1], c->in[2], mask, &c->out[0], &p);
}

static FxStatus attention_eval(EvalCtx *c)
{
    const Tensor *mask = c->num_inputs > 3 ? c->in[3] : NULL;
    TensorType out;
    FxrtAttention p;
    FxStatus st = attention_plan(c->node, c->diag, &c->in[0]->type, &c->in[1]->type,
                                 &c->in[2]->type, mask ? &mask->type : NULL, &out, &p);
    if (st != FX_OK || tensor_numel(c->out[0]) == 0)
        return st;
    float *scratch = fx_alloc_array((size_t)fxrt_attention_scratch_floats(&p), sizeof *scratch);
    if (!scratch)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    fxrt_attention_f32(&p, c->in[0]->data, c->in[1]->data, c->in[2]->data,
                       mask ? mask->data : NULL, c->out[0]->data, scratch);
    free(scratch);
    return FX_OK;
}

static FxStatus attention_emit(EmitCtx *c)
{
    const Node *n = c->node;
    TensorType out;
    FxrtAttention p;
    FxStatus st = attention_plan(n, c->diag, node_input_type(n, 0), node_input_type(n, 1),
                                 node_input_type(n, 2), mask_type(n), &out, &p);
    if (st != FX_OK || type_numel(&out) == 0)
        return st;
    char dims[256], sq[256], sk[256], sv[256], sm[256], sy[256], scale[48];
    emit_line(c, "static const FxrtAttention p = {");
    if (p.batch_rank > 0) {
        emit_line(c, "    .batch_rank = %d, .batch_dims = %s,", (int)p.batch_rank,
                  nn_format_ints(p.batch_dims, p.batch_rank, dims, sizeof dims));
        emit_line(c, "    .q_strides = %s, .k_strides = %s, .v_strides = %s,",
                  nn_format_ints(p.q_strides, p.batch_rank, sq, sizeof sq),
                  nn_format_ints(p.k_strides, p.batch_rank, sk, sizeof sk),
                  nn_format_ints(p.v_strides, p.batch_rank, sv, sizeof sv));
        emit_line(c, "    .mask_strides = %s, .y_strides = %s,",
                  nn_format_ints(p.mask_strides, p.batch_rank, sm, sizeof sm),
                  nn_format_ints(p.y_strides, p.batch_rank, sy, sizeof sy));
    }
    emit_line(c, "    .lq = %lld, .lk = %lld, .d = %lld, .dv = %lld, .k_transposed = %d,",
              (long long)p.lq, (long long)p.lk, (long long)p.d, (long long)p.dv,
              (int)p.k_transposed);
    emit_line(c, "    .ldq = %lld, .ldk = %lld, .ldv = %lld, .ldy = %lld,", (long long)p.ldq,
              (long long)p.ldk, (long long)p.ldv, (long long)p.ldy);
    emit_line(c, "    .mask_row_stride = %lld, .mask_col_stride = %lld, .scale = %s};",
              (long long)p.mask_row_stride, (long long)p.mask_col_stride,
              c_float_literal(p.scale, scale, sizeof scale));
    const char *mask = nn_emit_input(c, 3);
    emit_line(c, "fxrt_attention_f32(&p, %s, %s, %s,", c->in[0], c->in[1], c->in[2]);
    emit_line(c, "                   /*mask=*/%s, %s, (float *)(%s));", mask ? mask : "NULL",
              c->out[0], c->scratch);
    return FX_OK;
}

static size_t attention_scratch(const Node *n)
{
    Diag quiet;
    diag_init(&quiet);
    TensorType out;
    FxrtAttention p;
    FxStatus st = attention_plan(n, &quiet, node_input_type(n, 0), node_input_type(n, 1),
                                 node_input_type(n, 2), mask_type(n), &out, &p);
    diag_free(&quiet);
    return st == FX_OK ? (size_t)fxrt_attention_scratch_floats(&p) * sizeof(float) : 0;
}

static const AttrSpec attention_attrs[] = {
    {"scale", FX_ATTR_FLOAT, NULL, true},
    {"k_transposed", FX_ATTR_INT, "0", false},
    {"perm_q", FX_ATTR_INTS, NULL, false},
    {"perm_k", FX_ATTR_INTS, NULL, false},
    {"perm_v", FX_ATTR_INTS, NULL, false},
    {"perm_y", FX_ATTR_INTS, NULL, false},
    {NULL},
};

const OpDef fx_op_Attention = {
    .name = "Attention",
    .min_inputs = 3, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = attention_attrs,
    .infer = attention_infer,
    .eval = attention_eval,
    .scratch_bytes = attention_scratch,
    .emit = attention_emit,
};
