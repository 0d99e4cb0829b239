/*
 * pass_sparse_weights.c - stores the weights that (magnitude) pruning made
 * mostly zero as compressed rows and runs their layers on the sparse
 * kernels (runtime/fxrt_nn_sparse.c):
 *
 *     y = FusedConv(x, W, b?, r?)  ->  y = SparseConv(x, row_start, columns, values, b?, r?)
 *     y = FusedGemm(a, B, c?, r?)  ->  y = SparseGemm(a, row_start, columns, values, c?, r?)
 *
 * and likewise a plain Conv, Gemm or MatMul.  W's zeros are dropped; a kept
 * weight costs 6 bytes (float value, uint16 index) and a row 4 (its start),
 * against 4 per weight dense.
 *
 * Which layers: float32, constant weights; convolutions 2-D, group 1,
 * dilation 1, at most 65536 inputs per output channel; products without
 * transA, beta 1 (alpha is folded into the values), C one value or one
 * per column.  Then the rule:
 *
 *   - always: the compressed rows are smaller than W dense;
 *   - on the host (pass_sparse_weights): also expected faster than the
 *     dense kernel the layer would run at -O2.  bench/sparse_kernels.c
 *     measured (bench/RESULTS.md, "Sparse weights", 2026-12-06, Xeon with
 *     AVX-512, one thread, densities 0.05 .. 0.6) the highest density at
 *     which the sparse kernel still beats NCHWc/Winograd: 1x1 layers of
 *     64-512 channels 0.10-0.30 (median 0.20; the DS-CNN's small 64-64
 *     layer 0.05); 3x3 layers 0.05-0.15 from 14x14 outputs, 0 to 0.15 on
 *     ResNet-8's 8x8-32x32 ones (median 0.05); the GEMV at one row 0.15 for
 *     2 MB of weights, 0.5 from 4 MB, never below 1 MB (OpenBLAS's dense
 *     GEMV is in cache).  The thresholds below take the median or lower,
 *     since a sparse layer also leaves the NCHWc region (a reorder on each
 *     side), and keep kxk layers below 14x14 outputs dense (a 90%-pruned
 *     ResNet-8 ran 10% slower with its 8x8 layer sparse); a product of
 *     several rows stays dense (gemm-pack's GEMM);
 *   - on portable and cortex-m (pass_sparse_weights_portable, which
 *     passes.c runs there instead): whenever smaller, as flash is what
 *     counts there; in QEMU's Cortex-M4 the DS-CNN pruned by 80% also ran
 *     2.8x fewer instructions sparse than dense.
 *
 * The pass runs at -O2 on any model, not only under --prune: weights that
 * are not sparse never pass the size test (it needs a third of them zero),
 * and a model pruned elsewhere (`fxcc prune -o`, then compiled) gains the
 * same.  It runs after epilogue-fusion (so the epilogue comes along) and
 * before gemm-pack and nchwc-layout, which would claim the layer.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../ir/ops/ops.h"
#include "opt.h"

/* Host rule (see the header comment for the measurements). */
static const double HOST_MAX_DENSITY_CONV_1X1 = 0.15;
static const double HOST_MAX_DENSITY_CONV_KXK = 0.05;
/* Below 14x14 outputs the tiles are too few to pay for the phase split and
 * the NCHWc reorders: kxk never, 1x1 only at 0.05 (the DS-CNN's 25x5 layer;
 * ResNet-8's 64-64 3x3 at 8x8 lost at 0.05, and a whole ResNet-8 at 90%
 * global sparsity ran 10% slower with it sparse). */
static const int64_t HOST_MIN_CONV_PIXELS = 14 * 14;
static const double HOST_MAX_DENSITY_SMALL_CONV_1X1 = 0.05;
static const double HOST_MAX_DENSITY_GEMV = 0.15, HOST_MAX_DENSITY_LARGE_GEMV = 0.4;
static const int64_t HOST_MIN_GEMV_BYTES = 1 << 20, HOST_LARGE_GEMV_BYTES = 4 << 20;

enum { MAX_INDEX = 65536 };

typedef enum LayerKind { LAYER_NONE, LAYER_CONV, LAYER_GEMM } LayerKind;

/* A layer the pass may convert, with its weights as rows x cols: rows are
 * output channels (columns of B), element (r, k) of the rows at
 * w[r * row_stride + k * col_stride]. */
typedef struct Candidate {
    LayerKind kind;
    const float *w;
    int64_t rows, cols, row_stride, col_stride;
    int64_t nonzeros;
    int64_t kernel_elements;   /* a convolution's kh * kw */
    int64_t product_rows;      /* a product's rows of A */
    float scale;               /* a product's alpha, folded into the values */
    FxrtConvParams conv;
} Candidate;

static bool is_fused(const Node *n, const OpDef *op)
{
    return n->opcode == FX_OPCODE_CALL_MODULE && n->op == op;
}

static bool weight_kept(float w) { return fpclassify(w) != FP_ZERO; }

static LayerKind conv_candidate(const Node *n, const Tensor *w, Candidate *c)
{
    if (w->type.rank != 4 || node_input_type(n, 0)->rank != 4)
        return LAYER_NONE;
    Diag quiet;
    diag_init(&quiet);
    int64_t floats;
    FxStatus st = nn_conv_node_params(n, &quiet, &c->conv, &floats);
    diag_free(&quiet);
    const FxrtConvParams *p = &c->conv;
    if (st != FX_OK || p->groups != 1 || p->dilation[1] != 1 || p->dilation[2] != 1 ||
        p->batch < 1)
        return LAYER_NONE;
    c->rows = w->type.dims[0];
    c->kernel_elements = w->type.dims[2] * w->type.dims[3];
    c->cols = w->type.dims[1] * c->kernel_elements;
    c->row_stride = c->cols;
    c->col_stride = 1;
    /* The kernel's int32 offsets into the padded, phase-split image. */
    int64_t padded = (p->in_size[1] + 2 * p->kernel[1] + p->stride[1]) *
                     (p->in_size[2] + 2 * p->kernel[2] + p->stride[2]);
    if (p->in_channels * padded >= INT32_MAX)
        return LAYER_NONE;
    return LAYER_CONV;
}

static LayerKind gemm_candidate(const Node *n, const Tensor *b, Candidate *c)
{
    bool matmul = node_is_op(n, &fx_op_MatMul);
    bool gemm = node_is_op(n, &fx_op_Gemm) || is_fused(n, &fx_op_FusedGemm);
    const TensorType *a = node_input_type(n, 0);
    if (b->type.rank != 2 || a->rank < 2 || a->dtype != FXRT_DTYPE_FLOAT32)
        return LAYER_NONE;
    if (gemm && node_attr_int(n, "transA", 0) != 0)
        return LAYER_NONE;
    c->scale = gemm ? node_attr_float(n, "alpha", 1.0f) : 1.0f;
    if (node_is_op(n, &fx_op_Gemm) && n->num_args > 2 && n->args[2] &&
        node_attr_float(n, "beta", 1.0f) != 1.0f)
        return LAYER_NONE;
    int trans_b = !matmul && node_attr_int(n, "transB", 0) != 0;
    int64_t k = b->type.dims[trans_b ? 1 : 0], cols_of_b = b->type.dims[trans_b ? 0 : 1];
    if (k != a->dims[a->rank - 1])
        return LAYER_NONE;
    if (n->num_args > 2 && n->args[2]) {
        const TensorType *bias = node_input_type(n, 2);
        int64_t count = type_numel(bias);
        bool per_column = count == cols_of_b && bias->rank >= 1 &&
                          bias->dims[bias->rank - 1] == cols_of_b;
        if (bias->dtype != FXRT_DTYPE_FLOAT32 || (count != 1 && !per_column))
            return LAYER_NONE;
    }
    c->rows = cols_of_b;
    c->cols = k;
    c->row_stride = trans_b ? k : 1;
    c->col_stride = trans_b ? 1 : cols_of_b;
    c->product_rows = type_numel(a) / (k > 0 ? k : 1);
    return LAYER_GEMM;
}

/* Fills c when n is a layer the pass may convert (the rule aside). */
static bool candidate(const Node *n, Candidate *c)
{
    memset(c, 0, sizeof *c);
    c->scale = 1.0f;
    bool conv = node_is_op(n, &fx_op_Conv) || is_fused(n, &fx_op_FusedConv);
    bool product = node_is_op(n, &fx_op_Gemm) || node_is_op(n, &fx_op_MatMul) ||
                   is_fused(n, &fx_op_FusedGemm);
    if ((!conv && !product) || n->num_outputs != 1 || !n->shapes_known || n->num_args < 2 ||
        !n->args[0] || !n->args[1] || n->out_types[0].dtype != FXRT_DTYPE_FLOAT32 ||
        node_input_type(n, 0)->dtype != FXRT_DTYPE_FLOAT32)
        return false;
    const Tensor *w = node_const_value(n->args[1]);
    if (!w || w->type.dtype != FXRT_DTYPE_FLOAT32 || tensor_numel(w) == 0)
        return false;
    c->kind = conv ? conv_candidate(n, w, c) : gemm_candidate(n, w, c);
    if (c->kind == LAYER_NONE || c->rows < 1 || c->cols < 1 || c->cols > MAX_INDEX)
        return false;
    c->w = w->data;
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t k = 0; k < c->cols; k++)
            c->nonzeros += weight_kept(c->w[r * c->row_stride + k * c->col_stride]);
    return true;
}

static int64_t dense_bytes(const Candidate *c) { return 4 * c->rows * c->cols; }

static int64_t sparse_bytes(const Candidate *c)
{
    return 4 * (c->rows + 1) + 6 * (c->nonzeros > 0 ? c->nonzeros : 1);
}

static bool smaller(const Candidate *c) { return sparse_bytes(c) < dense_bytes(c); }

static bool faster_on_host(const Candidate *c)
{
    double density = (double)c->nonzeros / (double)(c->rows * c->cols);
    if (c->kind == LAYER_CONV) {
        bool small = c->conv.out_size[1] * c->conv.out_size[2] < HOST_MIN_CONV_PIXELS;
        if (c->kernel_elements > 1)
            return !small && density <= HOST_MAX_DENSITY_CONV_KXK;
        return density <= (small ? HOST_MAX_DENSITY_SMALL_CONV_1X1 : HOST_MAX_DENSITY_CONV_1X1);
    }
    double most = dense_bytes(c) >= HOST_LARGE_GEMV_BYTES ? HOST_MAX_DENSITY_LARGE_GEMV
                                                           : HOST_MAX_DENSITY_GEMV;
    return c->product_rows == 1 && dense_bytes(c) >= HOST_MIN_GEMV_BYTES && density <= most;
}

/* The three constants of c's compressed rows, named after n. */
static FxStatus make_rows(Graph *g, const Node *n, const Candidate *c, Node **start_node,
                          Node **columns_node, Node **values_node, Diag *d)
{
    int64_t stored = c->nonzeros > 0 ? c->nonzeros : 1;
    TensorType st = {.dtype = FXRT_DTYPE_INT32, .rank = 1, .dims = {c->rows + 1}};
    TensorType ct = {.dtype = FXRT_DTYPE_UINT16, .rank = 1, .dims = {stored}};
    TensorType vt = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1, .dims = {stored}};
    Tensor *start = tensor_new(&st, d), *columns = tensor_new(&ct, d), *values = tensor_new(&vt, d);
    if (!start || !columns || !values) {
        tensor_free(start);
        tensor_free(columns);
        tensor_free(values);
        return FX_ERR_NOMEM;
    }
    int32_t *s = start->data;
    uint16_t *col = columns->data;
    float *val = values->data;
    col[0] = 0;
    val[0] = 0.0f; /* the unused entry of an all-zero weight */
    int32_t at = 0;
    for (int64_t r = 0; r < c->rows; r++) {
        s[r] = at;
        for (int64_t k = 0; k < c->cols; k++) {
            float w = c->w[r * c->row_stride + k * c->col_stride];
            if (weight_kept(w)) {
                col[at] = (uint16_t)k;
                val[at++] = w * c->scale;
            }
        }
    }
    s[c->rows] = at;
    char hint[200];
    snprintf(hint, sizeof hint, "%s_row_start", n->name);
    if (!(*start_node = graph_create_constant(g, NULL, hint, start, d))) {
        tensor_free(columns);
        tensor_free(values);
        return FX_ERR_NOMEM;
    }
    snprintf(hint, sizeof hint, "%s_columns", n->name);
    if (!(*columns_node = graph_create_constant(g, NULL, hint, columns, d))) {
        tensor_free(values);
        return FX_ERR_NOMEM;
    }
    snprintf(hint, sizeof hint, "%s_values", n->name);
    if (!(*values_node = graph_create_constant(g, NULL, hint, values, d)))
        return FX_ERR_NOMEM;
    return FX_OK;
}

/* The SparseConv or SparseGemm node standing for n into *out. */
static FxStatus sparse_layer(Graph *g, Node *n, const Candidate *c, Node **out, Diag *d)
{
    *out = NULL;
    Node *start, *columns, *values;
    FxStatus st = make_rows(g, n, c, &start, &columns, &values, d);
    if (st != FX_OK)
        return st;
    Node *args[6] = {n->args[0], start, columns, values, n->num_args > 2 ? n->args[2] : NULL,
                     n->num_args > 3 ? n->args[3] : NULL};
    int num_args = n->num_args > 3 ? 6 : n->num_args > 2 ? 5 : 4;
    const OpDef *op = c->kind == LAYER_CONV ? &fx_op_SparseConv : &fx_op_SparseGemm;
    Node *q = graph_create_op(g, n, op, n->name, args, num_args);
    if (!q)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    bool ok = true;
    if (c->kind == LAYER_CONV) {
        const FxrtConvParams *p = &c->conv;
        int64_t kernel[2] = {p->kernel[1], p->kernel[2]}, strides[2] = {p->stride[1], p->stride[2]};
        /* The end padding is the least that gives the output size. */
        int64_t pads[4] = {p->pad_begin[1], p->pad_begin[2], 0, 0};
        for (int i = 0; i < 2; i++) {
            int64_t end = (p->out_size[i + 1] - 1) * p->stride[i + 1] + p->kernel[i + 1] -
                          p->in_size[i + 1] - p->pad_begin[i + 1];
            pads[i + 2] = end > 0 ? end : 0;
        }
        ok = node_set_attr_ints(q, "kernel_shape", kernel, 2) &&
             node_set_attr_ints(q, "strides", strides, 2) && node_set_attr_ints(q, "pads", pads, 4);
    }
    static const char *const kept[] = {"activation", "act_alpha", "act_beta", "residual_after"};
    for (int i = 0; ok && i < n->num_attrs; i++)
        for (size_t j = 0; j < sizeof kept / sizeof kept[0]; j++)
            if (strcmp(n->attrs[i].name, kept[j]) == 0)
                ok = node_copy_attr(q, &n->attrs[i], d);
    st = node_finish_created(q, ok, n, d);
    if (st == FX_OK)
        *out = q;
    return st;
}

static FxStatus run(Graph *g, PassResult *r, bool host, Diag *d)
{
    r->changes = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, n)
    {
        Candidate c;
        if (!candidate(n, &c) || !smaller(&c) || (host && !faster_on_host(&c)))
            continue;
        Node *q = NULL;
        if ((st = sparse_layer(g, n, &c, &q, d)) != FX_OK)
            break;
        if ((st = pass_replace_node(n, q, r, d)) != FX_OK)
            break;
    }
    return pass_finish(g, r, st);
}

FxStatus pass_sparse_weights(Graph *g, PassResult *r, Diag *d) { return run(g, r, true, d); }

FxStatus pass_sparse_weights_portable(Graph *g, PassResult *r, Diag *d)
{
    return run(g, r, false, d);
}
