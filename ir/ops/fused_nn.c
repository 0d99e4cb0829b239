/*
 * fused_nn.c - the FusedConv and FusedGemm module kinds: a convolution or
 * a matrix product whose bias, activation and residual Add run as the
 * kernel's epilogue (runtime/fxrt_nn_epilogue.c), on each output tile while
 * it is still in cache.  The epilogue fusion pass
 * (opt/pass_epilogue_fusion.c) builds them.
 *
 *   FusedConv(X, W, B?, R?)  = act(conv(X, W) + B + R)   (residual_after 0)
 *                            = act(conv(X, W) + B) + R   (residual_after 1)
 *   FusedGemm(A, B, C?, R?)  likewise with alpha * op(A) op(B) + C
 *   GemmPacked(A, P, C?, R?) the same with B packed at compile time (gemm-pack)
 *
 * FusedConv has Conv's attributes and shape rules (nn_conv.c); B is per
 * output channel.  FusedGemm covers Gemm (A and B matrices, transA, transB,
 * alpha; C broadcast to [M, N] unscaled: the pass fuses only beta == 1) and
 * MatMul with A of rank >= 2 and a matrix B: the leading dims of A flatten
 * into M, a GEMM over all rows at once (the transformer's linear layers);
 * then C is a scalar, one value per column, or A's leading dims times N.
 * R has the output's shape.  float32 only: the pass fuses nothing else.
 *
 * eval runs the same runtime kernel the generated code calls, so the
 * interpreter's reference for the fused graph is the unfused graph it came
 * from, which the tests compare against.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static const char *const activation_names[] = {
    "none", "relu", "clip", "leaky_relu", "sigmoid", "hardswish", "hardsigmoid", "tanh", "gelu",
    "silu",
};

enum { NUM_ACTIVATIONS = (int)(sizeof activation_names / sizeof activation_names[0]) };

const char *fused_nn_activation_name(FxrtActivation a)
{
    return (int)a >= 0 && (int)a < NUM_ACTIVATIONS ? activation_names[a] : NULL;
}

static const char *const activation_enums[] = {
    "FXRT_ACT_NONE",       "FXRT_ACT_RELU",         "FXRT_ACT_CLIP",
    "FXRT_ACT_LEAKY_RELU", "FXRT_ACT_SIGMOID",      "FXRT_ACT_HARD_SWISH",
    "FXRT_ACT_HARD_SIGMOID", "FXRT_ACT_TANH",       "FXRT_ACT_GELU",
    "FXRT_ACT_SILU",
};

FxStatus fused_nn_node_epilogue(const Node *n, Diag *d, FxrtEpilogue *e)
{
    memset(e, 0, sizeof *e);
    const char *name = node_attr_string(n, "activation", "none");
    int k = 0;
    while (k < NUM_ACTIVATIONS && strcmp(activation_names[k], name) != 0)
        k++;
    if (k == NUM_ACTIVATIONS)
        return diag_node_error(d, FX_ERR_INVALID, n, "unknown activation '%s'", name);
    e->activation = k;
    e->alpha = node_attr_float(n, "act_alpha", 0.0f);
    e->beta = node_attr_float(n, "act_beta", 0.0f);
    e->residual_after = node_attr_int(n, "residual_after", 0) != 0;
    return FX_OK;
}

const char *nn_emit_epilogue(EmitCtx *c, const FxrtEpilogue *shape, const char *bias,
                             const char *residual)
{
    return nn_emit_named_epilogue(c, "ep", shape, bias, residual) ? "&ep" : "NULL";
}

bool nn_emit_named_epilogue(EmitCtx *c, const char *name, const FxrtEpilogue *shape,
                            const char *bias, const char *residual)
{
    if (!bias && !residual && shape->activation == FXRT_ACT_NONE)
        return false;
    char a[48], b[48];
    emit_line(c, "const FxrtEpilogue %s = {", name);
    if (bias)
        emit_line(c, "    .bias = %s, .bias_row_stride = %lld, .bias_col_stride = %lld,", bias,
                (long long)shape->bias_row_stride, (long long)shape->bias_col_stride);
    if (residual)
        emit_line(c, "    .residual = %s, .residual_ld = %lld, .residual_after = %d,", residual,
                (long long)shape->residual_ld, (int)shape->residual_after);
    emit_line(c, "    .activation = %s, .alpha = %s, .beta = %s};",
            activation_enums[shape->activation], c_float_literal(shape->alpha, a, sizeof a),
            c_float_literal(shape->beta, b, sizeof b));
    return true;
}

FxStatus fused_nn_check_f32(const Node *n, Diag *d, const TensorType *t, const char *what)
{
    if (!t || t->dtype == FXRT_DTYPE_FLOAT32)
        return FX_OK;
    return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "%s is %s; %s takes float32 only", what,
                           dtype_name(t->dtype), n->op->name);
}

FxStatus fused_nn_check_residual(const Node *n, Diag *d, const TensorType *r,
                                 const TensorType *y)
{
    if (!r || type_equal(r, y))
        return FX_OK;
    char a[128], b[128];
    return diag_node_error(d, FX_ERR_SHAPE, n, "the residual is %s but the output is %s",
                           type_format(r, a, sizeof a), type_format(y, b, sizeof b));
}

static const TensorType *infer_input(const InferCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static const Tensor *eval_input(const EvalCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static const float *f32_data(const Tensor *t) { return t ? t->data : NULL; }

/* --- FusedConv -------------------------------------------------------------- */

static FxStatus fused_conv_infer(InferCtx *c)
{
    FxStatus st;
    FxrtEpilogue e;
    if ((st = fused_nn_check_f32(c->node, c->diag, c->in[0], "X")) != FX_OK ||
        (st = nn_conv_infer(c)) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &e)) != FX_OK)
        return st;
    return fused_nn_check_residual(c->node, c->diag, infer_input(c, 3), &c->out[0]);
}

static FxStatus fused_conv_eval(EvalCtx *c)
{
    FxrtConvParams p;
    FxrtEpilogue ep;
    int64_t floats = 0;
    FxStatus st;
    if ((st = nn_conv_node_params(c->node, c->diag, &p, &floats)) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &ep)) != FX_OK ||
        tensor_numel(c->out[0]) == 0)
        return st;
    float *scratch = fx_alloc_array((size_t)(floats > 0 ? floats : 1), sizeof *scratch);
    if (!scratch)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    ep.bias = f32_data(eval_input(c, 2));
    ep.residual = f32_data(eval_input(c, 3));
    fxrt_conv_f32(&p, c->in[0]->data, c->in[1]->data, &ep, c->out[0]->data, scratch);
    free(scratch);
    return FX_OK;
}

static FxStatus fused_conv_emit(EmitCtx *c)
{
    FxrtConvParams p;
    FxrtEpilogue shape;
    int64_t floats = 0;
    FxStatus st;
    if ((st = nn_conv_node_params(c->node, c->diag, &p, &floats)) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &shape)) != FX_OK)
        return st;
    if (type_numel(&c->node->out_types[0]) == 0)
        return FX_OK;
    nn_conv_emit_call(c, &p, nn_emit_epilogue(c, &shape, nn_emit_input(c, 2), nn_emit_input(c, 3)));
    return FX_OK;
}

static const AttrSpec fused_conv_attrs[] = {
    {"auto_pad", FX_ATTR_STRING, "NOTSET", false},
    {"dilations", FX_ATTR_INTS, NULL, false},
    {"group", FX_ATTR_INT, "1", false},
    {"kernel_shape", FX_ATTR_INTS, NULL, false},
    {"pads", FX_ATTR_INTS, NULL, false},
    {"strides", FX_ATTR_INTS, NULL, false},
    FUSED_NN_EPILOGUE_ATTRS,
    {NULL},
};

const OpDef fx_op_FusedConv = {
    .name = "FusedConv",
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_MODULE,
    .attrs = fused_conv_attrs,
    .infer = fused_conv_infer,
    .eval = fused_conv_eval,
    .scratch_bytes = nn_conv_scratch,
    .emit = fused_conv_emit,
};

/* --- FusedGemm -------------------------------------------------------------- */

typedef struct FusedGemmShape {
    int trans_a, trans_b;
    int64_t m, n, k, lda, ldb;
    int64_t bias_row_stride, bias_col_stride;
    TensorType out;
} FusedGemmShape;

/* A [.., M, K] (or a K x M matrix with transA), B [K, N] ([N, K] with
 * transB), C and R as the header comment says. */
static FxStatus fused_gemm_shape(const Node *n, Diag *d, const TensorType *a,
                                 const TensorType *b, const TensorType *bias,
                                 const TensorType *res, FusedGemmShape *s)
{
    FxStatus st;
    if ((st = fused_nn_check_f32(n, d, a, "A")) != FX_OK || (st = fused_nn_check_f32(n, d, b, "B")) != FX_OK ||
        (st = fused_nn_check_f32(n, d, bias, "C")) != FX_OK || (st = fused_nn_check_f32(n, d, res, "R")) != FX_OK)
        return st;
    memset(s, 0, sizeof *s);
    s->trans_a = node_attr_int(n, "transA", 0) != 0;
    s->trans_b = node_attr_int(n, "transB", 0) != 0;
    if (a->rank < 2 || b->rank != 2 || (s->trans_a && a->rank != 2))
        return diag_node_error(d, FX_ERR_SHAPE, n,
                               "A must have rank >= 2 (2 with transA) and B be a matrix, got "
                               "ranks %d and %d", a->rank, b->rank);
    int64_t rows = 1;
    for (int i = 0; i < a->rank - 1; i++)
        rows *= a->dims[i];
    s->m = s->trans_a ? a->dims[1] : rows;
    s->k = s->trans_a ? a->dims[0] : a->dims[a->rank - 1];
    int64_t kb = b->dims[s->trans_b ? 1 : 0];
    s->n = b->dims[s->trans_b ? 0 : 1];
    if (kb != s->k)
        return diag_node_error(d, FX_ERR_SHAPE, n, "inner dimensions differ: %lld and %lld",
                               (long long)s->k, (long long)kb);
    s->lda = s->trans_a ? s->m : s->k;
    s->ldb = s->trans_b ? s->k : s->n;
    s->out = (TensorType){.dtype = FXRT_DTYPE_FLOAT32, .rank = a->rank};
    if (s->trans_a) {
        s->out.dims[0] = s->m;
    } else {
        for (int i = 0; i < a->rank - 1; i++)
            s->out.dims[i] = a->dims[i];
    }
    s->out.dims[a->rank - 1] = s->n;
    if (bias) {
        /* One value, one per column, or one per element of the output. */
        int64_t cols = bias->rank > 0 ? bias->dims[bias->rank - 1] : 1, lead = 1;
        for (int i = 0; i < bias->rank - 1; i++)
            lead *= bias->dims[i];
        bool full = bias->rank == s->out.rank && lead == s->m;
        for (int i = 0; full && i < bias->rank - 1; i++)
            full = bias->dims[i] == s->out.dims[i];
        if ((lead != 1 && !full) || (cols != 1 && cols != s->n) || bias->rank > s->out.rank) {
            char bt[128], ot[128];
            return diag_node_error(d, FX_ERR_SHAPE, n, "C %s does not broadcast to %s",
                                   type_format(bias, bt, sizeof bt),
                                   type_format(&s->out, ot, sizeof ot));
        }
        s->bias_col_stride = cols == 1 ? 0 : 1;
        s->bias_row_stride = lead == 1 ? 0 : cols;
    }
    return fused_nn_check_residual(n, d, res, &s->out);
}

/* The shape rules of FusedGemm (fused_gemm_shape) or GemmPacked
 * (gemm_packed_shape) on A, B, C? and R?. */
typedef FxStatus (*GemmShapeFn)(const Node *n, Diag *d, const TensorType *a, const TensorType *b,
                                const TensorType *bias, const TensorType *res, FusedGemmShape *s);

/* n's shape and its epilogue, with the bias's strides and the residual's
 * row length filled in (the data pointers are the caller's). */
static FxStatus gemm_node_plan(const Node *n, Diag *d, GemmShapeFn shape, FusedGemmShape *s,
                               FxrtEpilogue *ep)
{
    FxStatus st = shape(n, d, node_input_type(n, 0), node_input_type(n, 1),
                        n->num_args > 2 ? node_input_type(n, 2) : NULL,
                        n->num_args > 3 ? node_input_type(n, 3) : NULL, s);
    if (st != FX_OK || (st = fused_nn_node_epilogue(n, d, ep)) != FX_OK)
        return st;
    ep->bias_row_stride = s->bias_row_stride;
    ep->bias_col_stride = s->bias_col_stride;
    ep->residual_ld = s->n;
    return FX_OK;
}

static FxStatus gemm_infer(InferCtx *c, GemmShapeFn shape)
{
    FusedGemmShape s;
    FxrtEpilogue e;
    FxStatus st = shape(c->node, c->diag, c->in[0], c->in[1], infer_input(c, 2),
                        infer_input(c, 3), &s);
    if (st != FX_OK || (st = fused_nn_node_epilogue(c->node, c->diag, &e)) != FX_OK)
        return st;
    c->out[0] = s.out;
    return FX_OK;
}

/* The epilogue's data for eval: the bias and the residual read from their
 * inputs. */
static void gemm_eval_epilogue(EvalCtx *c, FxrtEpilogue *ep)
{
    ep->bias = f32_data(eval_input(c, 2));
    ep->residual = f32_data(eval_input(c, 3));
}

static FxStatus fused_gemm_infer(InferCtx *c) { return gemm_infer(c, fused_gemm_shape); }

static FxStatus fused_gemm_eval(EvalCtx *c)
{
    FusedGemmShape s;
    FxrtEpilogue ep;
    FxStatus st = gemm_node_plan(c->node, c->diag, fused_gemm_shape, &s, &ep);
    if (st != FX_OK)
        return st;
    gemm_eval_epilogue(c, &ep);
    float alpha = node_attr_float(c->node, "alpha", 1.0f);
    fxrt_gemm_ep_f32(s.trans_a, s.trans_b, s.m, s.n, s.k, alpha, c->in[0]->data, s.lda,
                     c->in[1]->data, s.ldb, 0.0f, c->out[0]->data, s.n, &ep);
    return FX_OK;
}

/* Emits the epilogue's block and returns its name (or "NULL"); *alpha gets
 * the node's alpha as a C literal. */
static const char *gemm_emit_epilogue(EmitCtx *c, const FxrtEpilogue *shape, char *alpha,
                                      size_t cap)
{
    c_float_literal(node_attr_float(c->node, "alpha", 1.0f), alpha, cap);
    return nn_emit_epilogue(c, shape, nn_emit_input(c, 2), nn_emit_input(c, 3));
}

static FxStatus fused_gemm_emit(EmitCtx *c)
{
    FusedGemmShape s;
    FxrtEpilogue shape;
    FxStatus st = gemm_node_plan(c->node, c->diag, fused_gemm_shape, &s, &shape);
    if (st != FX_OK || s.m == 0 || s.n == 0)
        return st;
    char alpha[48];
    const char *ep = gemm_emit_epilogue(c, &shape, alpha, sizeof alpha);
    emit_line(c,
              "fxrt_gemm_ep_f32(/*trans_a=*/%d, /*trans_b=*/%d, /*m=*/%lld, /*n=*/%lld, "
              "/*k=*/%lld, /*alpha=*/%s, %s, /*lda=*/%lld, %s, /*ldb=*/%lld, /*beta=*/0.0f, %s, "
              "/*ldc=*/%lld, %s);",
              s.trans_a, s.trans_b, (long long)s.m, (long long)s.n, (long long)s.k, alpha, c->in[0],
              (long long)s.lda, c->in[1], (long long)s.ldb, c->out[0], (long long)s.n, ep);
    return FX_OK;
}

static const AttrSpec fused_gemm_attrs[] = {
    {"alpha", FX_ATTR_FLOAT, "1.0", false},
    {"transA", FX_ATTR_INT, "0", false},
    {"transB", FX_ATTR_INT, "0", false},
    FUSED_NN_EPILOGUE_ATTRS,
    {NULL},
};

const OpDef fx_op_FusedGemm = {
    .name = "FusedGemm",
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_MODULE,
    .attrs = fused_gemm_attrs,
    .infer = fused_gemm_infer,
    .eval = fused_gemm_eval,
    .emit = fused_gemm_emit,
};

/* --- GemmPacked ------------------------------------------------------------- */

/* The gemm-pack pass's form of a FusedGemm, Gemm or MatMul whose B is a
 * constant matrix: GemmPacked(A, packed, C?, R?) = FusedGemm(A, B, C?, R?)
 * without transA, where packed (float32, 1-D) is fxrt_gemm_pack_b_f32 of B
 * made at compile time, run by fxrt_gemm_packed_f32.  Attributes: n (B's
 * columns), alpha and the epilogue's; A [.., K] has every leading axis
 * folded into the rows, C and R follow FusedGemm's rules. */

static FxStatus gemm_packed_shape(const Node *n, Diag *d, const TensorType *a,
                                  const TensorType *w, const TensorType *bias,
                                  const TensorType *res, FusedGemmShape *s)
{
    int64_t cols = node_attr_int(n, "n", 0);
    if (a->rank < 2 || cols < 1)
        return diag_node_error(d, FX_ERR_SHAPE, n, "GemmPacked needs A of rank >= 2 and n >= 1, "
                               "got rank %d and n %lld", a->rank, (long long)cols);
    int64_t k = a->dims[a->rank - 1];
    if (w->dtype != FXRT_DTYPE_FLOAT32 || w->rank != 1 ||
        w->dims[0] != fxrt_gemm_packed_floats(cols, k))
        return diag_node_error(d, FX_ERR_SHAPE, n, "GemmPacked: the packed B does not hold "
                               "%lld x %lld weights", (long long)k, (long long)cols);
    TensorType b = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 2, .dims = {k, cols}};
    return fused_gemm_shape(n, d, a, &b, bias, res, s);
}

static FxStatus gemm_packed_infer(InferCtx *c) { return gemm_infer(c, gemm_packed_shape); }

static FxStatus gemm_packed_eval(EvalCtx *c)
{
    FusedGemmShape s;
    FxrtEpilogue ep;
    FxStatus st = gemm_node_plan(c->node, c->diag, gemm_packed_shape, &s, &ep);
    if (st != FX_OK)
        return st;
    gemm_eval_epilogue(c, &ep);
    fxrt_gemm_packed_f32(s.m, s.n, s.k, node_attr_float(c->node, "alpha", 1.0f), c->in[0]->data,
                         s.k, c->in[1]->data, c->out[0]->data, s.n, &ep);
    return FX_OK;
}

static FxStatus gemm_packed_emit(EmitCtx *c)
{
    FusedGemmShape s;
    FxrtEpilogue shape;
    FxStatus st = gemm_node_plan(c->node, c->diag, gemm_packed_shape, &s, &shape);
    if (st != FX_OK || s.m == 0)
        return st;
    char alpha[48];
    const char *ep = gemm_emit_epilogue(c, &shape, alpha, sizeof alpha);
    emit_line(c,
              "fxrt_gemm_packed_f32(/*m=*/%lld, /*n=*/%lld, /*k=*/%lld, /*alpha=*/%s, %s, "
              "/*lda=*/%lld, %s, %s, /*ldc=*/%lld, %s);",
              (long long)s.m, (long long)s.n, (long long)s.k, alpha, c->in[0], (long long)s.k,
              c->in[1], c->out[0], (long long)s.n, ep);
    return FX_OK;
}

static const AttrSpec gemm_packed_attrs[] = {
    {"n", FX_ATTR_INT, NULL, true},
    {"alpha", FX_ATTR_FLOAT, "1.0", false},
    FUSED_NN_EPILOGUE_ATTRS,
    {NULL},
};

const OpDef fx_op_GemmPacked = {
    .name = "GemmPacked",
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = gemm_packed_attrs,
    .infer = gemm_packed_infer,
    .eval = gemm_packed_eval,
    .emit = gemm_packed_emit,
};
