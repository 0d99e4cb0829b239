/*
 * sparse_nn.c - the sparse-weights pass's forms (opt/pass_sparse_weights.c)
 * of a float convolution or matrix product whose constant weights pruning
 * made mostly zero: the weights as compressed rows, three constants
 * (runtime/fxrt_nn_sparse.c has the format), run by the sparse kernels.
 *
 *   SparseConv(X, row_start, columns, values, B?, R?)
 *       = FusedConv(X, W, B?, R?) with group 1, dilation 1, 2-D; attributes
 *         kernel_shape [kh, kw], strides [sh, sw], pads [top, left, bottom,
 *         right] and the epilogue's; row r of W (output channel r) is
 *         values[row_start[r] .. row_start[r + 1]) at input indices
 *         ic * kh * kw + i * kw + j.
 *   SparseGemm(A, row_start, columns, values, C?, R?)
 *       = FusedGemm(A, B, C?, R?) without transA, alpha 1: A [.., K] with its
 *         leading axes folded into the rows, row j the nonzeros of B's column
 *         j at their row indices; C one value or one per column, R Y's shape.
 *
 * row_start is int32 [rows + 1], columns uint16 [stored], values float32
 * [stored] (stored >= 1: an all-zero weight keeps one unused entry, so no
 * array is empty in C).  The rows are checked whenever their values are
 * known (shape inference on constants, and every eval), so a malformed
 * graph is an error, never a read out of bounds.
 *
 * eval runs the kernels the generated code calls.
 */
#include <stdint.h>
#include <stdlib.h>

#include "ops.h"

static const Tensor *input_at(const Tensor *const *in, int num, int i)
{
    return i < num ? in[i] : NULL;
}

/* The compressed rows' types: rows + 1 int32 starts, as many uint16 indices
 * as float values. */
static FxStatus rows_check_types(const Node *n, Diag *d, const TensorType *start,
                                 const TensorType *columns, const TensorType *values,
                                 int64_t *rows)
{
    if (start->dtype != FXRT_DTYPE_INT32 || start->rank != 1 || start->dims[0] < 2 ||
        columns->dtype != FXRT_DTYPE_UINT16 || columns->rank != 1 ||
        values->dtype != FXRT_DTYPE_FLOAT32 || values->rank != 1 ||
        columns->dims[0] != values->dims[0] || values->dims[0] < 1)
        return diag_node_error(d, FX_ERR_SHAPE, n,
                               "%s takes compressed rows: int32 row starts [rows + 1], uint16 "
                               "indices and float32 values of one length >= 1",
                               n->op->name);
    *rows = start->dims[0] - 1;
    return FX_OK;
}

/* The rows' data: starts from 0, never decreasing, within the values; every
 * index below `cols`. */
static FxStatus rows_check_values(const Node *n, Diag *d, const Tensor *start,
                                  const Tensor *columns, int64_t cols)
{
    const int32_t *s = start->data;
    const uint16_t *c = columns->data;
    int64_t rows = tensor_numel(start) - 1, stored = tensor_numel(columns);
    if (s[0] != 0 || s[rows] > stored)
        return diag_node_error(d, FX_ERR_INVALID, n, "%s: the row starts run from %d to %d, "
                               "not from 0 to at most %lld", n->op->name, (int)s[0], (int)s[rows],
                               (long long)stored);
    for (int64_t r = 0; r < rows; r++)
        if (s[r + 1] < s[r])
            return diag_node_error(d, FX_ERR_INVALID, n, "%s: row %lld starts after row %lld",
                                   n->op->name, (long long)r, (long long)r + 1);
    for (int64_t k = 0; k < s[rows]; k++)
        if (c[k] >= cols)
            return diag_node_error(d, FX_ERR_INVALID, n,
                                   "%s: stored weight %lld has input index %u, past %lld",
                                   n->op->name, (long long)k, (unsigned)c[k], (long long)cols);
    return FX_OK;
}

/* --- SparseConv --------------------------------------------------------------- */

/* The kernel's parameters from X's type and the attributes, and the input
 * indices a row may hold (in_channels * kh * kw). */
static FxStatus conv_params(const Node *n, Diag *d, const TensorType *x, int64_t out_channels,
                            FxrtSparseConvParams *p, int64_t *cols)
{
    const int64_t *kernel, *strides, *pads;
    if (x->rank != 4 || node_attr_ints(n, "kernel_shape", &kernel) != 2 ||
        node_attr_ints(n, "strides", &strides) != 2 || node_attr_ints(n, "pads", &pads) != 4)
        return diag_node_error(d, FX_ERR_SHAPE, n, "SparseConv takes X [N, C, H, W] and "
                               "kernel_shape, strides of 2 values, pads of 4");
    *p = (FxrtSparseConvParams){.batch = x->dims[0], .in_channels = x->dims[1],
                                .out_channels = out_channels, .in_h = x->dims[2],
                                .in_w = x->dims[3], .kernel_h = kernel[0], .kernel_w = kernel[1],
                                .stride_h = strides[0], .stride_w = strides[1],
                                .pad_top = pads[0], .pad_left = pads[1]};
    for (int i = 0; i < 2; i++)
        if (kernel[i] < 1 || strides[i] < 1 || pads[i] < 0 || pads[i + 2] < 0)
            return diag_node_error(d, FX_ERR_SHAPE, n, "SparseConv: bad kernel %lld, stride "
                                   "%lld or pads %lld, %lld", (long long)kernel[i],
                                   (long long)strides[i], (long long)pads[i],
                                   (long long)pads[i + 2]);
    int64_t padded_h = p->in_h + pads[0] + pads[2], padded_w = p->in_w + pads[1] + pads[3];
    if (padded_h < kernel[0] || padded_w < kernel[1])
        return diag_node_error(d, FX_ERR_SHAPE, n, "SparseConv: the kernel is larger than the "
                               "padded input");
    /* The kernel's input offsets are int32 within the phase-split image. */
    if (p->in_channels * (padded_h + strides[0]) * (padded_w + strides[1]) >= INT32_MAX)
        return diag_node_error(d, FX_ERR_SHAPE, n, "SparseConv: the input is too large for "
                               "32-bit offsets");
    p->out_h = (padded_h - kernel[0]) / strides[0] + 1;
    p->out_w = (padded_w - kernel[1]) / strides[1] + 1;
    *cols = p->in_channels * kernel[0] * kernel[1];
    if (*cols > 65536)
        return diag_node_error(d, FX_ERR_SHAPE, n, "SparseConv: %lld inputs per output channel "
                               "do not fit 16-bit indices", (long long)*cols);
    return FX_OK;
}

static FxStatus sparse_conv_plan(const Node *n, Diag *d, const TensorType *const *in, int num,
                                 FxrtSparseConvParams *p, TensorType *out)
{
    FxStatus st;
    int64_t rows = 0, cols = 0; /* GCC 12 cannot see through the || chain */
    if ((st = fused_nn_check_f32(n, d, in[0], "X")) != FX_OK ||
        (st = rows_check_types(n, d, in[1], in[2], in[3], &rows)) != FX_OK ||
        (st = conv_params(n, d, in[0], rows, p, &cols)) != FX_OK)
        return st;
    *out = (TensorType){.dtype = FXRT_DTYPE_FLOAT32, .rank = 4,
                        .dims = {p->batch, rows, p->out_h, p->out_w}};
    const TensorType *bias = num > 4 ? in[4] : NULL;
    if (bias && (bias->dtype != FXRT_DTYPE_FLOAT32 || type_numel(bias) != rows))
        return diag_node_error(d, FX_ERR_SHAPE, n, "SparseConv: B must hold %lld floats",
                               (long long)rows);
    return fused_nn_check_residual(n, d, num > 5 ? in[5] : NULL, out);
}

static FxStatus sparse_conv_infer(InferCtx *c)
{
    FxrtSparseConvParams p;
    FxrtEpilogue e;
    FxStatus st;
    if ((st = sparse_conv_plan(c->node, c->diag, c->in, c->num_inputs, &p, &c->out[0])) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &e)) != FX_OK)
        return st;
    if (c->in_value && c->in_value[1] && c->in_value[2])
        return rows_check_values(c->node, c->diag, c->in_value[1], c->in_value[2],
                                 p.in_channels * p.kernel_h * p.kernel_w);
    return FX_OK;
}

static FxStatus sparse_conv_eval(EvalCtx *c)
{
    const TensorType *types[6] = {0};
    for (int i = 0; i < c->num_inputs && i < 6; i++)
        types[i] = c->in[i] ? &c->in[i]->type : NULL;
    FxrtSparseConvParams p;
    TensorType out;
    FxrtEpilogue ep;
    FxStatus st;
    if ((st = sparse_conv_plan(c->node, c->diag, types, c->num_inputs, &p, &out)) != FX_OK ||
        (st = rows_check_values(c->node, c->diag, c->in[1], c->in[2],
                                p.in_channels * p.kernel_h * p.kernel_w)) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &ep)) != FX_OK)
        return st;
    if (tensor_numel(c->out[0]) == 0)
        return FX_OK;
    int64_t bytes = fxrt_sparse_conv_scratch_bytes(&p, tensor_numel(c->in[3]));
    void *scratch = fx_malloc((size_t)bytes);
    if (!scratch)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    const Tensor *bias = input_at(c->in, c->num_inputs, 4);
    const Tensor *residual = input_at(c->in, c->num_inputs, 5);
    ep.bias = bias ? bias->data : NULL;
    ep.residual = residual ? residual->data : NULL;
    fxrt_sparse_conv_f32(&p, c->in[0]->data, c->in[1]->data, c->in[2]->data, c->in[3]->data, &ep,
                         c->out[0]->data, scratch);
    free(scratch);
    return FX_OK;
}

/* Node n's parameters from its input types, for scratch and emit. */
static FxStatus sparse_conv_node_params(const Node *n, Diag *d, FxrtSparseConvParams *p)
{
    const TensorType *types[6] = {0};
    for (int i = 0; i < n->num_args && i < 6; i++)
        types[i] = n->args[i] ? node_input_type(n, i) : NULL;
    TensorType out;
    return sparse_conv_plan(n, d, types, n->num_args, p, &out);
}

/* n's parameters without a diagnostic (the planner's hooks). */
static bool sparse_conv_quiet_params(const Node *n, FxrtSparseConvParams *p)
{
    Diag quiet;
    diag_init(&quiet);
    FxStatus st = sparse_conv_node_params(n, &quiet, p);
    diag_free(&quiet);
    return st == FX_OK;
}

static size_t sparse_conv_scratch(const Node *n)
{
    FxrtSparseConvParams p;
    if (!sparse_conv_quiet_params(n, &p))
        return 0;
    return (size_t)fxrt_sparse_conv_scratch_bytes(&p, type_numel(node_input_type(n, 3)));
}

/* cortex-m: the small kernels split the image a band of rows at a time. */
static size_t sparse_conv_small_scratch(const Node *n)
{
    FxrtSparseConvParams p;
    if (!sparse_conv_quiet_params(n, &p))
        return 0;
    return (size_t)fxrt_sparse_conv_small_scratch_bytes(&p, type_numel(node_input_type(n, 3)));
}

/* A 1x1 stride-1 layer with as many outputs as inputs can write over its
 * input (off the host) with 16 pixels of every channel as scratch. */
static bool sparse_conv_inplace(const Node *n, size_t *scratch_bytes)
{
    FxrtSparseConvParams p;
    if (!sparse_conv_quiet_params(n, &p) || !fxrt_sparse_conv_inplace_applies(&p))
        return false;
    *scratch_bytes =
        (size_t)fxrt_sparse_conv_inplace_scratch_bytes(&p, type_numel(node_input_type(n, 3)));
    return true;
}

static FxStatus sparse_conv_emit(EmitCtx *c)
{
    FxrtSparseConvParams p;
    FxrtEpilogue shape;
    FxStatus st;
    if ((st = sparse_conv_node_params(c->node, c->diag, &p)) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &shape)) != FX_OK)
        return st;
    if (type_numel(&c->node->out_types[0]) == 0)
        return FX_OK;
    /* What the kernel uses for each image (it sets these itself). */
    shape.bias_row_stride = 1;
    shape.residual_ld = p.out_h * p.out_w;
    const char *ep = nn_emit_epilogue(c, &shape, nn_emit_input(c, 4), nn_emit_input(c, 5));
    emit_line(c, "static const FxrtSparseConvParams p = {");
    emit_line(c, "    .batch = %lld, .in_channels = %lld, .out_channels = %lld,",
              (long long)p.batch, (long long)p.in_channels, (long long)p.out_channels);
    emit_line(c, "    .in_h = %lld, .in_w = %lld, .out_h = %lld, .out_w = %lld,",
              (long long)p.in_h, (long long)p.in_w, (long long)p.out_h, (long long)p.out_w);
    emit_line(c, "    .kernel_h = %lld, .kernel_w = %lld, .stride_h = %lld, .stride_w = %lld,",
              (long long)p.kernel_h, (long long)p.kernel_w, (long long)p.stride_h,
              (long long)p.stride_w);
    emit_line(c, "    .pad_top = %lld, .pad_left = %lld};", (long long)p.pad_top,
              (long long)p.pad_left);
    if (c->inplace)
        emit_line(c, "fxrt_sparse_conv_inplace_f32(&p, %s, %s, %s, %s, %s, %s);", c->out[0],
                  c->in[1], c->in[2], c->in[3], ep, c->scratch);
    else
        emit_line(c, "fxrt_sparse_conv_f32(&p, %s, %s, %s, %s, %s, %s, %s);", c->in[0], c->in[1],
                  c->in[2], c->in[3], ep, c->out[0], c->scratch);
    return FX_OK;
}

static const AttrSpec sparse_conv_attrs[] = {
    {"kernel_shape", FX_ATTR_INTS, NULL, true},
    {"strides", FX_ATTR_INTS, NULL, true},
    {"pads", FX_ATTR_INTS, NULL, true},
    FUSED_NN_EPILOGUE_ATTRS,
    {NULL},
};

const OpDef fx_op_SparseConv = {
    .name = "SparseConv",
    .min_inputs = 4, .max_inputs = 6, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = sparse_conv_attrs,
    .infer = sparse_conv_infer,
    .eval = sparse_conv_eval,
    .scratch_bytes = sparse_conv_scratch,
    .small_scratch_bytes = sparse_conv_small_scratch,
    .inplace = sparse_conv_inplace,
    .emit = sparse_conv_emit,
};

/* --- SparseGemm --------------------------------------------------------------- */

typedef struct SparseGemmShape {
    int64_t m, n, k;
    int64_t bias_col_stride;
    TensorType out;
} SparseGemmShape;

static FxStatus sparse_gemm_plan(const Node *n, Diag *d, const TensorType *const *in, int num,
                                 SparseGemmShape *s)
{
    FxStatus st;
    const TensorType *a = in[0];
    if ((st = fused_nn_check_f32(n, d, a, "A")) != FX_OK ||
        (st = rows_check_types(n, d, in[1], in[2], in[3], &s->n)) != FX_OK)
        return st;
    if (a->rank < 2)
        return diag_node_error(d, FX_ERR_SHAPE, n, "SparseGemm takes A of rank >= 2, not %d",
                               a->rank);
    s->k = a->dims[a->rank - 1];
    s->m = 1;
    for (int i = 0; i < a->rank - 1; i++)
        s->m *= a->dims[i];
    if (s->k > 65536)
        return diag_node_error(d, FX_ERR_SHAPE, n, "SparseGemm: %lld inputs per output do not "
                               "fit 16-bit indices", (long long)s->k);
    s->out = *a;
    s->out.dims[a->rank - 1] = s->n;
    const TensorType *bias = num > 4 ? in[4] : NULL;
    s->bias_col_stride = 0;
    if (bias) {
        int64_t count = type_numel(bias);
        bool per_column = count == s->n && bias->rank >= 1 && bias->dims[bias->rank - 1] == s->n;
        if (bias->dtype != FXRT_DTYPE_FLOAT32 || (count != 1 && !per_column))
            return diag_node_error(d, FX_ERR_SHAPE, n, "SparseGemm: C must be one float or "
                                   "one per column (%lld)", (long long)s->n);
        s->bias_col_stride = count == 1 ? 0 : 1;
    }
    return fused_nn_check_residual(n, d, num > 5 ? in[5] : NULL, &s->out);
}

static FxStatus sparse_gemm_infer(InferCtx *c)
{
    SparseGemmShape s;
    FxrtEpilogue e;
    FxStatus st;
    if ((st = sparse_gemm_plan(c->node, c->diag, c->in, c->num_inputs, &s)) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &e)) != FX_OK)
        return st;
    c->out[0] = s.out;
    if (c->in_value && c->in_value[1] && c->in_value[2])
        return rows_check_values(c->node, c->diag, c->in_value[1], c->in_value[2], s.k);
    return FX_OK;
}

static FxStatus sparse_gemm_eval(EvalCtx *c)
{
    const TensorType *types[6] = {0};
    for (int i = 0; i < c->num_inputs && i < 6; i++)
        types[i] = c->in[i] ? &c->in[i]->type : NULL;
    SparseGemmShape s;
    FxrtEpilogue ep;
    FxStatus st;
    if ((st = sparse_gemm_plan(c->node, c->diag, types, c->num_inputs, &s)) != FX_OK ||
        (st = rows_check_values(c->node, c->diag, c->in[1], c->in[2], s.k)) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &ep)) != FX_OK)
        return st;
    const Tensor *bias = input_at(c->in, c->num_inputs, 4);
    const Tensor *residual = input_at(c->in, c->num_inputs, 5);
    ep.bias = bias ? bias->data : NULL;
    ep.bias_col_stride = s.bias_col_stride;
    ep.residual = residual ? residual->data : NULL;
    ep.residual_ld = s.n;
    fxrt_sparse_gemm_f32(s.m, s.n, c->in[0]->data, s.k, c->in[1]->data, c->in[2]->data,
                         c->in[3]->data, c->out[0]->data, s.n, &ep);
    return FX_OK;
}

static FxStatus sparse_gemm_emit(EmitCtx *c)
{
    const TensorType *types[6] = {0};
    const Node *n = c->node;
    for (int i = 0; i < n->num_args && i < 6; i++)
        types[i] = n->args[i] ? node_input_type(n, i) : NULL;
    SparseGemmShape s;
    FxrtEpilogue shape;
    FxStatus st;
    if ((st = sparse_gemm_plan(n, c->diag, types, n->num_args, &s)) != FX_OK ||
        (st = fused_nn_node_epilogue(n, c->diag, &shape)) != FX_OK)
        return st;
    if (s.m == 0)
        return FX_OK;
    shape.bias_col_stride = s.bias_col_stride;
    shape.residual_ld = s.n;
    const char *ep = nn_emit_epilogue(c, &shape, nn_emit_input(c, 4), nn_emit_input(c, 5));
    emit_line(c,
              "fxrt_sparse_gemm_f32(/*m=*/%lld, /*n=*/%lld, %s, /*lda=*/%lld, %s, %s, %s, %s, "
              "/*ldc=*/%lld, %s);",
              (long long)s.m, (long long)s.n, c->in[0], (long long)s.k, c->in[1], c->in[2],
              c->in[3], c->out[0], (long long)s.n, ep);
    return FX_OK;
}

static const AttrSpec sparse_gemm_attrs[] = {
    FUSED_NN_EPILOGUE_ATTRS,
    {NULL},
};

const OpDef fx_op_SparseGemm = {
    .name = "SparseGemm",
    .min_inputs = 4, .max_inputs = 6, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = sparse_gemm_attrs,
    .infer = sparse_gemm_infer,
    .eval = sparse_gemm_eval,
    .emit = sparse_gemm_emit,
};
