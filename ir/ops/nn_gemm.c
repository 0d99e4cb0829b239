/*
 * nn_gemm.c - the matrix-product ops: Gemm, MatMul, MatMulInteger and
 * QLinearMatMul, and TransposedMatMul, the strided MatMul that the
 * layout-cleanup pass makes of a MatMul between Transposes.
 *
 * Gemm is alpha * op(A) op(B) + beta * C with C broadcast to [M, N]; MatMul
 * is numpy's batched, broadcasting product with 1-D operands promoted to a
 * row (A) or a column (B) and the promoted axis dropped again.  Both run on
 * fxrt_gemm_f32 for float32 and on the generic kernels for float64 and the
 * integer types ONNX allows.  The quantized products accumulate in int32
 * (fxrt_matmul_integer); QLinearMatMul then requantizes with the per-column
 * multiplier a_scale * b_scale / y_scale formed in float as ONNX does.
 *
 * Refused: float16/bfloat16 (FX_ERR_UNSUPPORTED), per-row zero points or
 * scales of A (ONNX Runtime refuses them too; only scalars), zero points
 * and scales of any other shape than a scalar or one value per column of B.
 *
 * Emitted code: a MatMul whose batch folds away is one fxrt_gemm_f32 call;
 * the quantized products convert non-constant zero points to int32 in
 * scratch (fxrt_cast) and form the multipliers at run time in float, in the
 * interpreter's order, so both give the same bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* --- helpers ---------------------------------------------------------------- */

static const TensorType *input_type(const InferCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static const Tensor *input_value(const EvalCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

/* float32/float64 and the integer types of Gemm and MatMul (T in opset 13). */
static FxStatus check_product_dtype(const Node *n, Diag *d, const TensorType *t,
                                    const char *what)
{
    switch (t->dtype) {
    case FXRT_DTYPE_FLOAT32:
    case FXRT_DTYPE_FLOAT64:
    case FXRT_DTYPE_INT32:
    case FXRT_DTYPE_INT64:
    case FXRT_DTYPE_UINT32:
    case FXRT_DTYPE_UINT64:
        return FX_OK;
    case FXRT_DTYPE_FLOAT16:
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "%s is float16, which is not supported",
                               what);
    default:
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "%s has element type %s; %s takes float or 32/64-bit integers",
                               what, dtype_name(t->dtype), n->op->name);
    }
}

static FxStatus check_same_dtype(const Node *n, Diag *d, const TensorType *a,
                                 const TensorType *b, const char *what)
{
    if (a->dtype != b->dtype)
        return diag_node_error(d, FX_ERR_SHAPE, n, "%s is %s but A is %s", what,
                               dtype_name(b->dtype), dtype_name(a->dtype));
    return FX_OK;
}

static FxStatus check_q8(InferCtx *c, const TensorType *t, const char *what)
{
    if (t->dtype != FXRT_DTYPE_UINT8 && t->dtype != FXRT_DTYPE_INT8)
        return diag_node_error(c->diag,
                               t->dtype == FXRT_DTYPE_FLOAT16 ? FX_ERR_UNSUPPORTED : FX_ERR_INVALID,
                               c->node, "%s must be uint8 or int8, not %s", what,
                               dtype_name(t->dtype));
    return FX_OK;
}

/* --- emitter helpers ---------------------------------------------------------- */

/* The parameter struct as a designated initializer; only the batch_rank
 * used entries are written, the rest is zero as in fxrt_matmul_params_init. */
static void emit_matmul_params(EmitCtx *c, const FxrtMatMulParams *p)
{
    char d[256], sa[256], sb[256];
    if (p->batch_rank > 0) {
        emit_line(c, "static const FxrtMatMulParams p = {");
        emit_line(c, "    .batch_rank = %d, .batch_dims = %s,", (int)p->batch_rank,
                nn_format_ints(p->batch_dims, p->batch_rank, d, sizeof d));
        emit_line(c, "    .a_strides = %s, .b_strides = %s,",
                nn_format_ints(p->a_strides, p->batch_rank, sa, sizeof sa),
                nn_format_ints(p->b_strides, p->batch_rank, sb, sizeof sb));
        emit_line(c, "    .m = %lld, .n = %lld, .k = %lld};", (long long)p->m, (long long)p->n,
                (long long)p->k);
    } else {
        emit_line(c, "static const FxrtMatMulParams p = {.m = %lld, .n = %lld, .k = %lld};",
                (long long)p->m, (long long)p->n, (long long)p->k);
    }
}

/* Scratch offsets are rounded to 64 bytes so that every part is aligned. */

/* --- Gemm ------------------------------------------------------------------- */

typedef struct GemmShape {
    int trans_a, trans_b;
    int64_t m, n, k;
    int64_t c_rows, c_cols; /* C's broadcast shape, each 1 or m / n */
} GemmShape;

/* Checks A, B and C (NULL: absent); called by infer and again by eval. */
static FxStatus gemm_shape(const Node *node, Diag *d, const TensorType *a, const TensorType *b,
                           const TensorType *bias, GemmShape *s)
{
    *s = (GemmShape){.c_rows = 1, .c_cols = 1}; /* defined whatever fails below */
    FxStatus st;
    if ((st = check_product_dtype(node, d, a, "A")) != FX_OK ||
        (st = check_same_dtype(node, d, a, b, "B")) != FX_OK)
        return st;
    if (a->rank != 2 || b->rank != 2)
        return diag_node_error(d, FX_ERR_SHAPE, node,
                               "A and B must be matrices, got ranks %d and %d", a->rank, b->rank);
    s->trans_a = node_attr_int(node, "transA", 0) != 0;
    s->trans_b = node_attr_int(node, "transB", 0) != 0;
    s->m = a->dims[s->trans_a ? 1 : 0];
    s->k = a->dims[s->trans_a ? 0 : 1];
    int64_t kb = b->dims[s->trans_b ? 1 : 0];
    s->n = b->dims[s->trans_b ? 0 : 1];
    if (kb != s->k)
        return diag_node_error(d, FX_ERR_SHAPE, node,
                               "inner dimensions differ: op(A) is %lldx%lld, op(B) is %lldx%lld",
                               (long long)s->m, (long long)s->k, (long long)kb, (long long)s->n);
    s->c_rows = s->c_cols = 1;
    if (bias) {
        if ((st = check_same_dtype(node, d, a, bias, "C")) != FX_OK)
            return st;
        if (bias->rank > 2)
            return diag_node_error(d, FX_ERR_SHAPE, node,
                                   "C has rank %d; it must broadcast to [%lld, %lld]", bias->rank,
                                   (long long)s->m, (long long)s->n);
        s->c_rows = bias->rank == 2 ? bias->dims[0] : 1;
        s->c_cols = bias->rank >= 1 ? bias->dims[bias->rank - 1] : 1;
        if ((s->c_rows != 1 && s->c_rows != s->m) || (s->c_cols != 1 && s->c_cols != s->n)) {
            char buf[128];
            return diag_node_error(d, FX_ERR_SHAPE, node,
                                   "C %s does not broadcast to [%lld, %lld]",
                                   type_format(bias, buf, sizeof buf), (long long)s->m,
                                   (long long)s->n);
        }
    }
    return FX_OK;
}

static FxStatus gemm_infer(InferCtx *c)
{
    GemmShape s;
    FxStatus st = gemm_shape(c->node, c->diag, c->in[0], c->in[1], input_type(c, 2), &s);
    if (st != FX_OK)
        return st;
    c->out[0] = (TensorType){.dtype = c->in[0]->dtype, .rank = 2, .dims = {s.m, s.n}};
    return FX_OK;
}

static FxStatus gemm_eval(EvalCtx *c)
{
    const Tensor *a = c->in[0], *b = c->in[1], *bias = input_value(c, 2);
    GemmShape s;
    FxStatus st = gemm_shape(c->node, c->diag, &a->type, &b->type, bias ? &bias->type : NULL, &s);
    if (st != FX_OK)
        return st;
    double alpha = node_attr_float(c->node, "alpha", 1.0f);
    double beta = node_attr_float(c->node, "beta", 1.0f);
    if (!bias)
        beta = 0.0;
    DType t = a->type.dtype;
    Tensor *y = c->out[0];
    int64_t lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
    if (s.m == 0 || s.n == 0)
        return FX_OK;
    if (beta != 0.0) {
        if (t == FXRT_DTYPE_FLOAT32) {
            fxrt_bias_fill_f32(s.m, s.n, bias->data, s.c_rows, s.c_cols, y->data, s.n);
        } else {
            size_t es = fxrt_dtype_size(t);
            for (int64_t i = 0; i < s.m; i++)
                for (int64_t j = 0; j < s.n; j++) {
                    int64_t src = (s.c_rows == 1 ? 0 : i) * s.c_cols + (s.c_cols == 1 ? 0 : j);
                    memcpy((char *)y->data + (size_t)(i * s.n + j) * es,
                           (const char *)bias->data + (size_t)src * es, es);
                }
        }
    }
    if (t == FXRT_DTYPE_FLOAT32)
        fxrt_gemm_f32(s.trans_a, s.trans_b, s.m, s.n, s.k, (float)alpha, a->data, lda, b->data,
                      ldb, (float)beta, y->data, s.n);
    else
        fxrt_gemm_generic(t, s.trans_a, s.trans_b, s.m, s.n, s.k, alpha, a->data, lda, b->data,
                          ldb, beta, y->data, s.n);
    return FX_OK;
}

static FxStatus gemm_emit(EmitCtx *c)
{
    const Node *node = c->node;
    const char *bias = nn_emit_input(c, 2);
    GemmShape s;
    FxStatus st = gemm_shape(node, c->diag, node_input_type(node, 0), node_input_type(node, 1),
                             bias ? node_input_type(node, 2) : NULL, &s);
    if (st != FX_OK)
        return st;
    float alpha = node_attr_float(node, "alpha", 1.0f);
    float beta = bias ? node_attr_float(node, "beta", 1.0f) : 0.0f;
    if (s.m == 0 || s.n == 0)
        return FX_OK;
    DType t = node->out_types[0].dtype;
    long long m = (long long)s.m, n = (long long)s.n, k = (long long)s.k;
    long long lda = s.trans_a ? m : k, ldb = s.trans_b ? k : n;
    char la[48], lb[48];
    c_float_literal(alpha, la, sizeof la);
    c_float_literal(beta, lb, sizeof lb);
    if (t == FXRT_DTYPE_FLOAT32 && beta == 1.0f) {
        /* C is the epilogue's bias, added to each tile as it is stored. */
        const FxrtEpilogue shape = {.bias_row_stride = s.c_rows == 1 ? 0 : s.c_cols,
                                    .bias_col_stride = s.c_cols == 1 ? 0 : 1};
        emit_line(
                c,
                "fxrt_gemm_ep_f32(/*trans_a=*/%d, /*trans_b=*/%d, /*m=*/%lld, /*n=*/%lld, "
                "/*k=*/%lld, /*alpha=*/%s, %s, /*lda=*/%lld, %s, /*ldb=*/%lld, /*beta=*/0.0f, %s, "
                "/*ldc=*/%lld, %s);",
                s.trans_a, s.trans_b, m, n, k, la, c->in[0], lda, c->in[1], ldb, c->out[0], n,
                nn_emit_epilogue(c, &shape, bias, NULL));
        return FX_OK;
    }
    if (beta != 0.0f) {
        if (t == FXRT_DTYPE_FLOAT32) {
            emit_line(c,
                      "fxrt_bias_fill_f32(/*m=*/%lld, /*n=*/%lld, %s, /*bias_rows=*/%lld, "
                      "/*bias_cols=*/%lld, %s, /*ldc=*/%lld);",
                      m, n, bias, (long long)s.c_rows, (long long)s.c_cols, c->out[0], n);
        } else {
            emit_line(c, "static const int64_t cd[2] = {%lld, %lld};", (long long)s.c_rows,
                    (long long)s.c_cols);
            emit_line(c, "static const int64_t yd[2] = {%lld, %lld};", m, n);
            emit_line(c, "fxrt_expand(sizeof(%s), 2, cd, yd, %s, %s);", c_type_name(t), bias,
                    c->out[0]);
        }
    }
    if (t == FXRT_DTYPE_FLOAT32)
        emit_line(
                c,
                "fxrt_gemm_f32(/*trans_a=*/%d, /*trans_b=*/%d, /*m=*/%lld, /*n=*/%lld, /*k=*/%lld, "
                "/*alpha=*/%s, %s, /*lda=*/%lld, %s, /*ldb=*/%lld, /*beta=*/%s, %s, /*ldc=*/%lld);",
                s.trans_a, s.trans_b, m, n, k, la, c->in[0], lda, c->in[1], ldb, lb, c->out[0], n);
    else
        emit_line(c,
                  "fxrt_gemm_generic(%s, /*trans_a=*/%d, /*trans_b=*/%d, /*m=*/%lld, /*n=*/%lld, "
                  "/*k=*/%lld, /*alpha=*/%s, %s, /*lda=*/%lld, %s, /*ldb=*/%lld, /*beta=*/%s, "
                  "%s, /*ldc=*/%lld);",
                  c_dtype_enum(t), s.trans_a, s.trans_b, m, n, k, la, c->in[0], lda, c->in[1], ldb,
                  lb, c->out[0], n);
    return FX_OK;
}

static const AttrSpec gemm_attrs[] = {
    {"alpha", FX_ATTR_FLOAT, "1.0", false},
    {"beta", FX_ATTR_FLOAT, "1.0", false},
    {"transA", FX_ATTR_INT, "0", false},
    {"transB", FX_ATTR_INT, "0", false},
    {NULL},
};

const OpDef fx_op_Gemm = {
    .name = "Gemm",
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = gemm_attrs,
    .infer = gemm_infer,
    .eval = gemm_eval,
    .emit = gemm_emit,
};

/* --- MatMul and the shape rules shared by the quantized products ----------- */

/* Output type of numpy matmul(a, b) (dtype left to the caller) and the
 * kernel parameters. */
static FxStatus matmul_shape(InferCtx *c, const TensorType *a, const TensorType *b,
                             TensorType *out, FxrtMatMulParams *p)
{
    if (a->rank < 1 || b->rank < 1)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "MatMul operands must have rank >= 1, got %d and %d", a->rank,
                               b->rank);
    if (fxrt_matmul_params_init(p, a->rank, a->dims, b->rank, b->dims) != 0) {
        char sa[128], sb[128];
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "cannot multiply %s by %s (inner or batch dimensions differ)",
                               type_format(a, sa, sizeof sa), type_format(b, sb, sizeof sb));
    }
    TensorType ba = {.rank = a->rank > 2 ? a->rank - 2 : 0};
    TensorType bb = {.rank = b->rank > 2 ? b->rank - 2 : 0};
    memcpy(ba.dims, a->dims, (size_t)ba.rank * sizeof ba.dims[0]);
    memcpy(bb.dims, b->dims, (size_t)bb.rank * sizeof bb.dims[0]);
    TensorType r = {0};
    FxStatus st = infer_broadcast(c, &ba, &bb, &r);
    if (st != FX_OK)
        return st;
    if (a->rank >= 2)
        r.dims[r.rank++] = a->dims[a->rank - 2];
    if (b->rank >= 2)
        r.dims[r.rank++] = b->dims[b->rank - 1];
    *out = r;
    return FX_OK;
}

static FxStatus matmul_infer(InferCtx *c)
{
    const TensorType *a = c->in[0], *b = c->in[1];
    FxStatus st;
    if ((st = check_product_dtype(c->node, c->diag, a, "A")) != FX_OK ||
        (st = check_same_dtype(c->node, c->diag, a, b, "B")) != FX_OK)
        return st;
    FxrtMatMulParams p;
    if ((st = matmul_shape(c, a, b, &c->out[0], &p)) != FX_OK)
        return st;
    c->out[0].dtype = a->dtype;
    return FX_OK;
}

static FxStatus matmul_eval(EvalCtx *c)
{
    const Tensor *a = c->in[0], *b = c->in[1];
    FxrtMatMulParams p;
    if (fxrt_matmul_params_init(&p, a->type.rank, a->type.dims, b->type.rank, b->type.dims))
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "operand shapes changed");
    if (tensor_numel(c->out[0]) == 0)
        return FX_OK;
    if (a->type.dtype == FXRT_DTYPE_FLOAT32)
        fxrt_matmul_f32(&p, a->data, b->data, c->out[0]->data);
    else
        fxrt_matmul_generic(a->type.dtype, &p, a->data, b->data, c->out[0]->data);
    return FX_OK;
}

/* One GEMM when the batch folds away (the usual [.., M, K] x [K, N] of a
 * linear layer), else the batch walk with its static parameters. */
static FxStatus matmul_emit(EmitCtx *c)
{
    const TensorType *a = node_input_type(c->node, 0), *b = node_input_type(c->node, 1);
    FxrtMatMulParams p;
    if (fxrt_matmul_params_init(&p, a->rank, a->dims, b->rank, b->dims))
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "operand shapes changed");
    if (type_numel(&c->node->out_types[0]) == 0)
        return FX_OK;
    DType t = a->dtype;
    if (t == FXRT_DTYPE_FLOAT32 && fxrt_matmul_batch_count(&p) == 1) {
        emit_line(c,
                  "fxrt_gemm_f32(/*trans_a=*/0, /*trans_b=*/0, /*m=*/%lld, /*n=*/%lld, /*k=*/%lld, "
                  "/*alpha=*/1.0f, %s, /*lda=*/%lld, %s, /*ldb=*/%lld, /*beta=*/0.0f, %s, "
                  "/*ldc=*/%lld);",
                  (long long)p.m, (long long)p.n, (long long)p.k, c->in[0], (long long)p.k,
                  c->in[1], (long long)p.n, c->out[0], (long long)p.n);
        return FX_OK;
    }
    emit_matmul_params(c, &p);
    if (t == FXRT_DTYPE_FLOAT32)
        emit_line(c, "fxrt_matmul_f32(&p, %s, %s, %s);", c->in[0], c->in[1], c->out[0]);
    else
        emit_line(c, "fxrt_matmul_generic(%s, &p, %s, %s, %s);", c_dtype_enum(t), c->in[0],
                c->in[1], c->out[0]);
    return FX_OK;
}

static const AttrSpec no_attrs[] = {{NULL}};

const OpDef fx_op_MatMul = {
    .name = "MatMul",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .attrs = no_attrs,
    .infer = matmul_infer,
    .eval = matmul_eval,
    .emit = matmul_emit,
};

/* --- TransposedMatMul -------------------------------------------------------- */

/* TransposedMatMul(A, B) = Transpose(MatMul(Transpose(A, perm_a),
 * Transpose(B, perm_b)), perm_y): the layout-cleanup pass's form of a
 * batched MatMul between Transposes (attention's head split, K^T and head
 * merge), which reads and writes the transposed tensors in place through a
 * strided batched GEMM instead of copying them.  An absent perm is the
 * identity.  A and B have one rank r >= 2, float32; the batch dims of the
 * permuted operands broadcast as in MatMul.  Each permuted operand keeps its
 * stored last axis among its two matrix axes (so that op(A) and op(B) are
 * BLAS matrices, plain or transposed), and perm_y keeps the columns last. */

typedef struct TransposedShape {
    int rank;
    int64_t perm[3][FX_MAX_RANK]; /* A, B, Y */
} TransposedShape;

static FxStatus transposed_perms(const Node *n, Diag *d, int rank, TransposedShape *s)
{
    static const char *const names[3] = {"perm_a", "perm_b", "perm_y"};
    s->rank = rank;
    for (int w = 0; w < 3; w++) {
        const int64_t *p;
        int64_t count = node_attr_ints(n, names[w], &p);
        if (count <= 0) {
            for (int i = 0; i < rank; i++)
                s->perm[w][i] = i;
            continue;
        }
        uint32_t seen = 0;
        for (int i = 0; i < rank && count == rank; i++)
            if (p[i] >= 0 && p[i] < rank)
                seen |= 1u << p[i];
        if (count != rank || seen != (1u << rank) - 1u)
            return diag_node_error(d, FX_ERR_INVALID, n, "%s is not a permutation of %d axes",
                                   names[w], rank);
        memcpy(s->perm[w], p, (size_t)rank * sizeof *p);
    }
    return FX_OK;
}

/* Row-major element strides of a tensor of the given dims. */
static void contiguous_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

/* op(X) of one permuted operand: logical axes rows (r - 2) and cols
 * (r - 1) read stored axes perm[r - 2] and perm[r - 1]; one of them must be
 * the stored last axis.  0 when neither is. */
static int operand_matrix(const int64_t *perm, const int64_t *strides, int rank, int32_t *trans,
                          int64_t *ld)
{
    if (perm[rank - 1] == rank - 1) {
        *trans = 0;
        *ld = strides[perm[rank - 2]];
        return 1;
    }
    if (perm[rank - 2] == rank - 1) {
        *trans = 1;
        *ld = strides[perm[rank - 1]];
        return 1;
    }
    return 0;
}

/* The output type and the kernel parameters of n for operands a and b. */
static FxStatus transposed_matmul_plan(const Node *n, Diag *d, const TensorType *a,
                                       const TensorType *b, TensorType *out,
                                       FxrtStridedMatMul *p)
{
    if (a->dtype != FXRT_DTYPE_FLOAT32 || b->dtype != FXRT_DTYPE_FLOAT32)
        return diag_node_error(d, FX_ERR_INVALID, n, "TransposedMatMul takes float32, not %s",
                               dtype_name(a->dtype != FXRT_DTYPE_FLOAT32 ? a->dtype : b->dtype));
    int r = a->rank;
    if (r < 2 || b->rank != r)
        return diag_node_error(d, FX_ERR_SHAPE, n,
                               "TransposedMatMul operands must have one rank >= 2, got %d and %d",
                               a->rank, b->rank);
    TransposedShape s;
    FxStatus st = transposed_perms(n, d, r, &s);
    if (st != FX_OK)
        return st;
    int64_t sa[FX_MAX_RANK], sb[FX_MAX_RANK], la[FX_MAX_RANK], lb[FX_MAX_RANK];
    contiguous_strides(r, a->dims, sa);
    contiguous_strides(r, b->dims, sb);
    for (int i = 0; i < r; i++) {
        la[i] = a->dims[s.perm[0][i]];
        lb[i] = b->dims[s.perm[1][i]];
    }
    memset(p, 0, sizeof *p);
    if (!operand_matrix(s.perm[0], sa, r, &p->trans_a, &p->lda) ||
        !operand_matrix(s.perm[1], sb, r, &p->trans_b, &p->ldb) || s.perm[2][r - 1] != r - 1)
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "a permutation moves a matrix's stored last axis out of the "
                               "product's two matrix axes");
    p->m = la[r - 2];
    p->k = la[r - 1];
    p->n = lb[r - 1];
    if (lb[r - 2] != p->k)
        return diag_node_error(d, FX_ERR_SHAPE, n, "inner dimensions differ: %lld and %lld",
                               (long long)p->k, (long long)lb[r - 2]);
    /* Y's logical dims, then its stored (permuted) dims and their strides */
    int64_t ly[FX_MAX_RANK], sy[FX_MAX_RANK], y_axis[FX_MAX_RANK];
    for (int i = 0; i < r - 2; i++) {
        if (la[i] != lb[i] && la[i] != 1 && lb[i] != 1)
            return diag_node_error(d, FX_ERR_SHAPE, n, "batch dims %lld and %lld do not broadcast",
                                   (long long)la[i], (long long)lb[i]);
        ly[i] = la[i] == 1 ? lb[i] : la[i];
    }
    ly[r - 2] = p->m;
    ly[r - 1] = p->n;
    *out = (TensorType){.dtype = FXRT_DTYPE_FLOAT32, .rank = r};
    for (int i = 0; i < r; i++) {
        out->dims[i] = ly[s.perm[2][i]];
        y_axis[s.perm[2][i]] = i;
    }
    contiguous_strides(r, out->dims, sy);
    p->ldc = sy[y_axis[r - 2]];
    for (int i = 0; i < r - 2; i++) {
        if (ly[i] == 1)
            continue;
        int k = p->batch_rank++;
        p->batch_dims[k] = ly[i];
        p->a_strides[k] = la[i] == 1 ? 0 : sa[s.perm[0][i]];
        p->b_strides[k] = lb[i] == 1 ? 0 : sb[s.perm[1][i]];
        p->y_strides[k] = sy[y_axis[i]];
    }
    return FX_OK;
}

static FxStatus transposed_matmul_infer(InferCtx *c)
{
    FxrtStridedMatMul p;
    return transposed_matmul_plan(c->node, c->diag, c->in[0], c->in[1], &c->out[0], &p);
}

static FxStatus transposed_matmul_eval(EvalCtx *c)
{
    TensorType out;
    FxrtStridedMatMul p;
    FxStatus st = transposed_matmul_plan(c->node, c->diag, &c->in[0]->type, &c->in[1]->type,
                                         &out, &p);
    if (st == FX_OK && tensor_numel(c->out[0]) > 0)
        fxrt_matmul_strided_f32(&p, c->in[0]->data, c->in[1]->data, c->out[0]->data);
    return st;
}

static FxStatus transposed_matmul_emit(EmitCtx *c)
{
    TensorType out;
    FxrtStridedMatMul p;
    FxStatus st = transposed_matmul_plan(c->node, c->diag, node_input_type(c->node, 0),
                                         node_input_type(c->node, 1), &out, &p);
    if (st != FX_OK || type_numel(&out) == 0)
        return st;
    char d[256], sa[256], sb[256], sy[256];
    emit_line(c, "static const FxrtStridedMatMul p = {");
    if (p.batch_rank > 0) {
        emit_line(c, "    .batch_rank = %d, .batch_dims = %s,", (int)p.batch_rank,
                nn_format_ints(p.batch_dims, p.batch_rank, d, sizeof d));
        emit_line(c, "    .a_strides = %s, .b_strides = %s, .y_strides = %s,",
                nn_format_ints(p.a_strides, p.batch_rank, sa, sizeof sa),
                nn_format_ints(p.b_strides, p.batch_rank, sb, sizeof sb),
                nn_format_ints(p.y_strides, p.batch_rank, sy, sizeof sy));
    }
    emit_line(c, "    .m = %lld, .n = %lld, .k = %lld, .trans_a = %d, .trans_b = %d,",
            (long long)p.m, (long long)p.n, (long long)p.k, (int)p.trans_a, (int)p.trans_b);
    emit_line(c, "    .lda = %lld, .ldb = %lld, .ldc = %lld};", (long long)p.lda, (long long)p.ldb,
            (long long)p.ldc);
    emit_line(c, "fxrt_matmul_strided_f32(&p, %s, %s, %s);", c->in[0], c->in[1], c->out[0]);
    return FX_OK;
}

static const AttrSpec transposed_matmul_attrs[] = {
    {"perm_a", FX_ATTR_INTS, NULL, false},
    {"perm_b", FX_ATTR_INTS, NULL, false},
    {"perm_y", FX_ATTR_INTS, NULL, false},
    {NULL},
};

const OpDef fx_op_TransposedMatMul = {
    .name = "TransposedMatMul",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = transposed_matmul_attrs,
    .infer = transposed_matmul_infer,
    .eval = transposed_matmul_eval,
    .emit = transposed_matmul_emit,
};

/* --- quantization parameters ---------------------------------------------- */

/* A scalar (any rank, one element) or, when per_col > 0, per_col values
 * along the last axis (all other dims 1). */
static FxStatus check_qparam(InferCtx *c, int input, const char *what, DType want,
                             int64_t per_col)
{
    const TensorType *t = input_type(c, input);
    if (!t)
        return FX_OK;
    if (t->dtype != want)
        return diag_node_error(c->diag,
                               t->dtype == FXRT_DTYPE_FLOAT16 ? FX_ERR_UNSUPPORTED : FX_ERR_INVALID,
                               c->node, "%s must be %s, not %s", what, dtype_name(want),
                               dtype_name(t->dtype));
    int64_t n = type_numel(t);
    if (n == 1)
        return FX_OK;
    bool last_axis = per_col > 0 && t->rank >= 1 && t->dims[t->rank - 1] == per_col &&
                     n == per_col;
    if (!last_axis)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "%s has %lld values; only a scalar%s is supported", what,
                               (long long)n, per_col > 0 ? " or one value per column" : "");
    return FX_OK;
}

/* Zero points as int32 (NULL tensor: 0); returns the count. */
static int64_t read_zero_points(const Tensor *t, int32_t *vals, int64_t max)
{
    if (!t) {
        vals[0] = 0;
        return 1;
    }
    int64_t n = tensor_numel(t);
    if (n > max)
        n = max;
    for (int64_t i = 0; i < n; i++)
        vals[i] = (int32_t)tensor_get_int(t, i);
    return n;
}

/* --- MatMulInteger ---------------------------------------------------------- */

static FxStatus matmul_integer_infer(InferCtx *c)
{
    const TensorType *a = c->in[0], *b = c->in[1];
    FxStatus st;
    if ((st = check_q8(c, a, "A")) != FX_OK || (st = check_q8(c, b, "B")) != FX_OK)
        return st;
    FxrtMatMulParams p;
    if ((st = matmul_shape(c, a, b, &c->out[0], &p)) != FX_OK)
        return st;
    int64_t n = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if ((st = check_qparam(c, 2, "a_zero_point", a->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, 3, "b_zero_point", b->dtype, n)) != FX_OK)
        return st;
    c->out[0].dtype = FXRT_DTYPE_INT32;
    return FX_OK;
}

static FxStatus matmul_integer_eval(EvalCtx *c)
{
    const Tensor *a = c->in[0], *b = c->in[1];
    FxrtMatMulParams p;
    if (fxrt_matmul_params_init(&p, a->type.rank, a->type.dims, b->type.rank, b->type.dims))
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "operand shapes changed");
    int32_t azp = 0;
    read_zero_points(input_value(c, 2), &azp, 1);
    int32_t *bzp = fx_alloc_array((size_t)(p.n > 0 ? p.n : 1), sizeof *bzp);
    if (!bzp)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    int64_t nb = read_zero_points(input_value(c, 3), bzp, p.n > 0 ? p.n : 1);
    fxrt_matmul_integer(&p, a->type.dtype, a->data, azp, b->type.dtype, b->data, bzp, nb,
                        c->out[0]->data);
    free(bzp);
    return FX_OK;
}

static size_t matmul_integer_scratch(const Node *n) { return nn_zero_point_bytes(n, 3); }

static FxStatus matmul_integer_emit(EmitCtx *c)
{
    const TensorType *a = node_input_type(c->node, 0), *b = node_input_type(c->node, 1);
    FxrtMatMulParams p;
    if (fxrt_matmul_params_init(&p, a->rank, a->dims, b->rank, b->dims))
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "operand shapes changed");
    emit_matmul_params(c, &p);
    int64_t nb = nn_emit_zero_points(c, 3, "bzp", c->scratch, INT64_MAX);
    char azp[64];
    emit_line(c,
              "fxrt_matmul_integer(&p, %s, %s, /*a_zp=*/%s, %s, %s, bzp, /*b_zp_count=*/%lld, %s);",
              c_dtype_enum(a->dtype), c->in[0], nn_zero_point_expr(c, 2, azp, sizeof azp),
              c_dtype_enum(b->dtype), c->in[1], (long long)nb, c->out[0]);
    return FX_OK;
}

const OpDef fx_op_MatMulInteger = {
    .name = "MatMulInteger",
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .attrs = no_attrs,
    .infer = matmul_integer_infer,
    .eval = matmul_integer_eval,
    .scratch_bytes = matmul_integer_scratch,
    .emit = matmul_integer_emit,
};

/* --- QLinearMatMul ---------------------------------------------------------- */

enum { QMM_A, QMM_A_SCALE, QMM_A_ZP, QMM_B, QMM_B_SCALE, QMM_B_ZP, QMM_Y_SCALE, QMM_Y_ZP };

static FxStatus qlinear_matmul_infer(InferCtx *c)
{
    const TensorType *a = c->in[QMM_A], *b = c->in[QMM_B], *yzp = c->in[QMM_Y_ZP];
    FxStatus st;
    if ((st = check_q8(c, a, "a")) != FX_OK || (st = check_q8(c, b, "b")) != FX_OK ||
        (st = check_q8(c, yzp, "y_zero_point")) != FX_OK)
        return st;
    FxrtMatMulParams p;
    if ((st = matmul_shape(c, a, b, &c->out[0], &p)) != FX_OK)
        return st;
    int64_t n = b->rank == 1 ? 1 : b->dims[b->rank - 1];
    if ((st = check_qparam(c, QMM_A_SCALE, "a_scale", FXRT_DTYPE_FLOAT32, 0)) != FX_OK ||
        (st = check_qparam(c, QMM_A_ZP, "a_zero_point", a->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, QMM_B_SCALE, "b_scale", FXRT_DTYPE_FLOAT32, n)) != FX_OK ||
        (st = check_qparam(c, QMM_B_ZP, "b_zero_point", b->dtype, n)) != FX_OK ||
        (st = check_qparam(c, QMM_Y_SCALE, "y_scale", FXRT_DTYPE_FLOAT32, 0)) != FX_OK ||
        (st = check_qparam(c, QMM_Y_ZP, "y_zero_point", yzp->dtype, 0)) != FX_OK)
        return st;
    c->out[0].dtype = yzp->dtype;
    return FX_OK;
}

static FxStatus qlinear_matmul_eval(EvalCtx *c)
{
    const Tensor *a = c->in[QMM_A], *b = c->in[QMM_B];
    FxrtMatMulParams p;
    if (fxrt_matmul_params_init(&p, a->type.rank, a->type.dims, b->type.rank, b->type.dims))
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "operand shapes changed");
    Tensor *y = c->out[0];
    int64_t total = tensor_numel(y), n = p.n > 0 ? p.n : 1;
    int32_t *acc = fx_alloc_array((size_t)(total > 0 ? total : 1), sizeof *acc);
    int32_t *bzp = fx_alloc_array((size_t)n, sizeof *bzp);
    float *scale = fx_alloc_array((size_t)n, sizeof *scale);
    if (!acc || !bzp || !scale) {
        free(acc);
        free(bzp);
        free(scale);
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    }
    int32_t azp = 0, yzp = 0;
    read_zero_points(c->in[QMM_A_ZP], &azp, 1);
    read_zero_points(c->in[QMM_Y_ZP], &yzp, 1);
    int64_t nb = read_zero_points(c->in[QMM_B_ZP], bzp, n);
    const float *bs = c->in[QMM_B_SCALE]->data;
    int64_t ns = tensor_numel(c->in[QMM_B_SCALE]);
    float as = *(const float *)c->in[QMM_A_SCALE]->data;
    float ys = *(const float *)c->in[QMM_Y_SCALE]->data;
    /* float arithmetic in ONNX's order: (a_scale * b_scale) / y_scale */
    for (int64_t j = 0; j < ns; j++)
        scale[j] = as * bs[j] / ys;
    fxrt_matmul_integer(&p, a->type.dtype, a->data, azp, b->type.dtype, b->data, bzp, nb, acc);
    fxrt_requantize(total / n, n, 1, acc, NULL, scale, ns, yzp, y->type.dtype, y->data);
    free(acc);
    free(bzp);
    free(scale);
    return FX_OK;
}

/* Scratch: the int32 accumulator, then B's zero points as int32, then the
 * per-column multipliers. */
static void qlinear_matmul_layout(const Node *n, size_t *zp_off, size_t *scale_off,
                                  size_t *total)
{
    *zp_off = nn_align64((size_t)type_numel(&n->out_types[0]) * sizeof(int32_t));
    *scale_off = *zp_off + nn_zero_point_bytes(n, QMM_B_ZP);
    *total = *scale_off + nn_align64((size_t)type_numel(node_input_type(n, QMM_B_SCALE)) *
                                  sizeof(float));
}

static size_t qlinear_matmul_scratch(const Node *n)
{
    size_t zp, sc, total;
    qlinear_matmul_layout(n, &zp, &sc, &total);
    return total;
}

static FxStatus qlinear_matmul_emit(EmitCtx *c)
{
    const Node *node = c->node;
    const TensorType *a = node_input_type(node, QMM_A), *b = node_input_type(node, QMM_B);
    FxrtMatMulParams p;
    if (fxrt_matmul_params_init(&p, a->rank, a->dims, b->rank, b->dims))
        return diag_node_error(c->diag, FX_ERR_SHAPE, node, "operand shapes changed");
    size_t zp_off, scale_off, total_bytes;
    qlinear_matmul_layout(node, &zp_off, &scale_off, &total_bytes);
    int64_t total = type_numel(&node->out_types[0]), n = p.n > 0 ? p.n : 1;
    int64_t ns = type_numel(node_input_type(node, QMM_B_SCALE));
    char dst[256], azp[64], yzp[64];
    emit_matmul_params(c, &p);
    emit_line(c, "unsigned char *const s = (unsigned char *)(%s);", c->scratch);
    emit_line(c, "int32_t *const acc = (int32_t *)s;");
    emit_line(c, "float *const scale = (float *)(s + %zu);", scale_off);
    snprintf(dst, sizeof dst, "s + %zu", zp_off);
    int64_t nb = nn_emit_zero_points(c, QMM_B_ZP, "bzp", dst, INT64_MAX);
    emit_line(c, "int64_t j;");
    /* float arithmetic in ONNX's order, as the interpreter does */
    emit_line(c, "for (j = 0; j < %lld; j++)", (long long)ns);
    emit_line(c, "    scale[j] = %s[0] * %s[j] / %s[0];", c->in[QMM_A_SCALE], c->in[QMM_B_SCALE],
            c->in[QMM_Y_SCALE]);
    emit_line(
            c,
            "fxrt_matmul_integer(&p, %s, %s, /*a_zp=*/%s, %s, %s, bzp, /*b_zp_count=*/%lld, acc);",
            c_dtype_enum(a->dtype), c->in[QMM_A], nn_zero_point_expr(c, QMM_A_ZP, azp, sizeof azp),
            c_dtype_enum(b->dtype), c->in[QMM_B], (long long)nb);
    emit_line(c,
              "fxrt_requantize(/*outer=*/%lld, /*channels=*/%lld, /*inner=*/1, acc, NULL, scale, "
              "/*scale_count=*/%lld, /*y_zp=*/%s, %s, %s);",
              (long long)(total / n), (long long)n, (long long)ns,
              nn_zero_point_expr(c, QMM_Y_ZP, yzp, sizeof yzp),
              c_dtype_enum(node->out_types[0].dtype), c->out[0]);
    return FX_OK;
}

const OpDef fx_op_QLinearMatMul = {
    .name = "QLinearMatMul",
    .min_inputs = 8, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
    .attrs = no_attrs,
    .infer = qlinear_matmul_infer,
    .eval = qlinear_matmul_eval,
    .scratch_bytes = qlinear_matmul_scratch,
    .emit = qlinear_matmul_emit,
};

/* --- QGemmPacked ------------------------------------------------------------ */

/* The qgemm-pack pass's form of a QLinearMatMul or MatMulInteger whose B is
 * a constant int8 matrix with zero point 0: Y [..., n] = fxrt_qgemm of A
 * [..., k] (uint8 or int8, every leading axis folded into the rows) with
 * the blob that fxrt_qgemm_pack_b made at compile time (input 1, uint8,
 * fxrt_qgemm_packed_bytes(n, k) bytes; A's zero point, the bias and the
 * scales are in it).  Attributes: n, y_type (UINT8, INT8 or INT32),
 * y_zero_point, and the clamp bounds y_min, y_max. */

static const AttrSpec qgemm_packed_attrs[] = {
    {"n", FX_ATTR_INT, NULL, true},
    {"y_type", FX_ATTR_INT, NULL, true},
    {"y_zero_point", FX_ATTR_INT, NULL, true},
    {"y_min", FX_ATTR_INT, NULL, true},
    {"y_max", FX_ATTR_INT, NULL, true},
    {NULL},
};

/* The kernel's parameters for n and A's type; rows receives m. */
static FxStatus qgemm_packed_plan(const Node *n, Diag *d, const TensorType *a,
                                  const TensorType *w, FxrtQGemm *q, int64_t *rows)
{
    int64_t cols = node_attr_int(n, "n", 0), y_type = node_attr_int(n, "y_type", 0);
    if (a->rank < 1 || (a->dtype != FXRT_DTYPE_UINT8 && a->dtype != FXRT_DTYPE_INT8))
        return diag_node_error(d, FX_ERR_INVALID, n, "QGemmPacked takes a uint8 or int8 A of "
                               "rank >= 1, not %s of rank %d", dtype_name(a->dtype), a->rank);
    if (y_type != FXRT_DTYPE_UINT8 && y_type != FXRT_DTYPE_INT8 && y_type != FXRT_DTYPE_INT32)
        return diag_node_error(d, FX_ERR_INVALID, n, "QGemmPacked: y_type %lld is not uint8, "
                               "int8 or int32", (long long)y_type);
    int64_t k = a->dims[a->rank - 1];
    if (cols < 1 || w->dtype != FXRT_DTYPE_UINT8 ||
        type_numel(w) != fxrt_qgemm_packed_bytes(cols, k))
        return diag_node_error(d, FX_ERR_SHAPE, n, "QGemmPacked: the packed B does not hold "
                               "%lld x %lld weights", (long long)k, (long long)cols);
    *q = (FxrtQGemm){.n = cols, .k = k, .a_type = a->dtype, .y_type = (int32_t)y_type,
                     .y_zp = (int32_t)node_attr_int(n, "y_zero_point", 0),
                     .y_min = (int32_t)node_attr_int(n, "y_min", INT32_MIN),
                     .y_max = (int32_t)node_attr_int(n, "y_max", INT32_MAX)};
    *rows = k > 0 ? type_numel(a) / k : 0;
    return FX_OK;
}

static FxStatus qgemm_packed_infer(InferCtx *c)
{
    FxrtQGemm q = {0};
    int64_t m = 0;
    FxStatus st = qgemm_packed_plan(c->node, c->diag, c->in[0], c->in[1], &q, &m);
    if (st != FX_OK)
        return st;
    c->out[0] = *c->in[0];
    c->out[0].dtype = (DType)q.y_type;
    c->out[0].dims[c->out[0].rank - 1] = q.n;
    return FX_OK;
}

static FxStatus qgemm_packed_eval(EvalCtx *c)
{
    FxrtQGemm q = {0};
    int64_t m = 0;
    FxStatus st = qgemm_packed_plan(c->node, c->diag, &c->in[0]->type, &c->in[1]->type, &q, &m);
    if (st == FX_OK && m > 0)
        fxrt_qgemm(&q, m, c->in[0]->data, q.k, c->in[1]->data, c->out[0]->data, q.n);
    return st;
}

static FxStatus qgemm_packed_emit(EmitCtx *c)
{
    FxrtQGemm q = {0};
    int64_t m = 0;
    FxStatus st = qgemm_packed_plan(c->node, c->diag, node_input_type(c->node, 0),
                                    node_input_type(c->node, 1), &q, &m);
    if (st != FX_OK || m == 0)
        return st;
    emit_line(c, "static const FxrtQGemm q = {/*n=*/%lld, /*k=*/%lld, %s, %s, /*y_zp=*/%d, "
                 "/*y_min=*/%d, /*y_max=*/%d};",
              (long long)q.n, (long long)q.k, c_dtype_enum((DType)q.a_type),
              c_dtype_enum((DType)q.y_type), (int)q.y_zp, (int)q.y_min, (int)q.y_max);
    emit_line(c, "fxrt_qgemm(&q, /*m=*/%lld, %s, /*lda=*/%lld, %s, %s, /*ldy=*/%lld);",
              (long long)m, c->in[0], (long long)q.k, c->in[1], c->out[0], (long long)q.n);
    return FX_OK;
}

const OpDef fx_op_QGemmPacked = {
    .name = "QGemmPacked",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = qgemm_packed_attrs,
    .infer = qgemm_packed_infer,
    .eval = qgemm_packed_eval,
    .emit = qgemm_packed_emit,
};
