/*
 * reduce_scan.c - TopK and CumSum: selection and running sums along one
 * axis.
 *
 * TopK's canonical form (opset 10+) takes K as an input; the opset-1 `k`
 * attribute becomes a constant input in canonicalize.  K decides the output
 * shape, so it must be a compile-time constant; infer refuses it otherwise.
 * The outputs are always sorted (best first, lower index first among equal
 * values), which is also a valid answer for sorted=0.  CumSum's axis input
 * must be a compile-time constant too: generated code fixes its loops at
 * compile time.  Both accept float32, float64 and every integer type; float16
 * and bool are refused.
 *
 * Kernels: runtime/fxrt_reduce_scan.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static FxStatus check_numeric(Diag *d, const Node *n, const TensorType *t)
{
    switch (t->dtype) {
    case FXRT_DTYPE_FLOAT32:
    case FXRT_DTYPE_FLOAT64:
    case FXRT_DTYPE_INT8:
    case FXRT_DTYPE_UINT8:
    case FXRT_DTYPE_INT16:
    case FXRT_DTYPE_UINT16:
    case FXRT_DTYPE_INT32:
    case FXRT_DTYPE_UINT32:
    case FXRT_DTYPE_INT64:
    case FXRT_DTYPE_UINT64: return FX_OK;
    default:
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "element type %s is not supported",
                               dtype_name(t->dtype));
    }
}

/* [outer, n, inner] around axis. */
static void axis_view(const TensorType *t, int axis, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = *inner = 1;
    for (int k = 0; k < axis; k++)
        *outer *= t->dims[k];
    for (int k = axis + 1; k < t->rank; k++)
        *inner *= t->dims[k];
    *n = t->dims[axis];
}

/* A single integer from a scalar or one-element 1-D tensor. */
static bool single_int(const Tensor *t, int64_t *v)
{
    if (!t || fxrt_dtype_is_float(t->type.dtype) || t->type.rank > 1 || tensor_numel(t) != 1)
        return false;
    *v = tensor_get_int(t, 0);
    return true;
}

/* --- TopK ----------------------------------------------------------------------- */

/* Opsets 1-9: k was an attribute; 10 made it input 1. */
static FxStatus topk_canonicalize(Node *n, int opset, Diag *d)
{
    Attr *a = node_attr(n, "k");
    if (!a) {
        if (opset < 10)
            return diag_node_error(d, FX_ERR_INVALID, n, "required attribute 'k' is missing");
        return FX_OK;
    }
    if (opset >= 10)
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "attribute 'k' was replaced by an input in opset 10");
    if (n->num_args != 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "has %d inputs, expected 1", n->num_args);
    TensorType t = {.dtype = FXRT_DTYPE_INT64, .rank = 1, .dims = {1}};
    Tensor *v = tensor_new(&t, d);
    if (!v)
        return FX_ERR_NOMEM;
    ((int64_t *)v->data)[0] = a->i;
    FxStatus st = node_set_const_input(n, 1, "k", v, d);
    if (st != FX_OK)
        return st;
    node_remove_attr(n, "k");
    return FX_OK;
}

static FxStatus topk_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    FxStatus st = check_numeric(c->diag, c->node, x);
    int axis;
    if (st != FX_OK)
        return st;
    if (c->num_inputs < 2 || !c->in[1])
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "input K is missing");
    if (c->num_outputs != 2)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "has %d outputs, expected 2",
                               c->num_outputs);
    if (x->rank == 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "input is a scalar");
    if ((st = infer_axis(c, node_attr_int(c->node, "axis", -1), x->rank, &axis)) != FX_OK)
        return st;
    const TensorType *kt = c->in[1];
    if (kt->dtype != FXRT_DTYPE_INT64 || kt->rank > 1 || type_numel(kt) != 1)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "K must be an int64 tensor holding one value");
    int64_t k, count;
    if ((st = infer_const_ints(c, 1, &k, 1, &count)) != FX_OK)
        return st;
    if (k < 0 || k > x->dims[axis])
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "K = %lld is out of range for an axis of %lld elements",
                               (long long)k, (long long)x->dims[axis]);
    c->out[0] = *x;
    c->out[0].dims[axis] = k;
    c->out[1] = c->out[0];
    c->out[1].dtype = FXRT_DTYPE_INT64;
    return FX_OK;
}

static FxStatus topk_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    int rank = x->type.rank;
    int64_t axis = node_attr_int(c->node, "axis", -1), k;
    if (axis < 0)
        axis += rank;
    if (c->num_outputs != 2 || axis < 0 || axis >= rank || !single_int(c->in[1], &k) ||
        k < 0 || k > x->type.dims[axis])
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "bad K or axis for the input");
    int64_t outer, n, inner;
    axis_view(&x->type, (int)axis, &outer, &n, &inner);
    Tensor *vals = c->out[0], *idx = c->out[1];
    if (tensor_numel(vals) != outer * k * inner || tensor_numel(idx) != outer * k * inner ||
        vals->type.dtype != x->type.dtype || idx->type.dtype != FXRT_DTYPE_INT64)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                               "outputs disagree with the input shape and K");
    void *scratch = fx_malloc(fxrt_topk_scratch_bytes(k));
    if (!scratch)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    int largest = node_attr_int(c->node, "largest", 1) != 0;
    int ok = fxrt_topk(x->type.dtype, x->data, vals->data, idx->data, outer, n, inner, k, largest,
                       scratch);
    free(scratch);
    if (!ok)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "element type %s is not supported", dtype_name(x->type.dtype));
    return FX_OK;
}

/* K and the axis are fixed by the output type, which shape propagation
 * derived from the constant K. */
static bool topk_view(const Node *n, int64_t *outer, int64_t *len, int64_t *inner, int64_t *k)
{
    const TensorType *x = node_input_type(n, 0);
    if (!x || n->num_outputs != 2 || x->rank == 0)
        return false;
    int rank = x->rank;
    int64_t axis = node_attr_int(n, "axis", -1);
    if (axis < 0)
        axis += rank;
    if (axis < 0 || axis >= rank || n->out_types[0].rank != rank)
        return false;
    axis_view(x, (int)axis, outer, len, inner);
    *k = n->out_types[0].dims[axis];
    return *k >= 0 && *k <= *len;
}

static size_t topk_scratch_bytes(const Node *n)
{
    int64_t outer, len, inner, k;
    if (!topk_view(n, &outer, &len, &inner, &k))
        return 0;
    return fxrt_topk_scratch_bytes(k);
}

static FxStatus topk_emit(EmitCtx *c)
{
    int64_t outer, n, inner, k;
    if (!topk_view(c->node, &outer, &n, &inner, &k) || c->num_outputs != 2 || !c->scratch)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "bad K or axis for the input");
    DType t = node_input_type(c->node, 0)->dtype;
    int largest = node_attr_int(c->node, "largest", 1) != 0;
    if (t == FXRT_DTYPE_FLOAT32)
        emit_line(c,
                  "fxrt_topk_f32(%s, %s, %s, /*outer=*/%lld, /*n=*/%lld, /*inner=*/%lld, "
                  "/*k=*/%lld, /*largest=*/%d, %s);",
                  c->in[0], c->out[0], c->out[1], (long long)outer, (long long)n, (long long)inner,
                  (long long)k, largest, c->scratch);
    else
        emit_line(c,
                  "fxrt_topk(%s, %s, %s, %s, /*outer=*/%lld, /*n=*/%lld, /*inner=*/%lld, "
                  "/*k=*/%lld, /*largest=*/%d, %s);",
                  c_dtype_enum(t), c->in[0], c->out[0], c->out[1], (long long)outer, (long long)n,
                  (long long)inner, (long long)k, largest, c->scratch);
    return FX_OK;
}

static const AttrSpec topk_attrs[] = {
    {"axis", FX_ATTR_INT, "-1", false},
    {"k", FX_ATTR_INT, NULL, false}, /* opsets 1-9; becomes input 1 */
    {"largest", FX_ATTR_INT, "1", false},
    {"sorted", FX_ATTR_INT, "1", false},
    {NULL},
};

const OpDef fx_op_TopK = {
    .name = "TopK",
    .min_inputs = 1, .max_inputs = 2, .min_outputs = 2, .max_outputs = 2,
    .attrs = topk_attrs,
    .canonicalize = topk_canonicalize,
    .infer = topk_infer,
    .eval = topk_eval,
    .scratch_bytes = topk_scratch_bytes,
    .emit = topk_emit,
};

/* --- CumSum --------------------------------------------------------------------- */

static FxStatus cumsum_infer(InferCtx *c)
{
    const TensorType *x = c->in[0], *at = c->in[1];
    FxStatus st = check_numeric(c->diag, c->node, x);
    if (st != FX_OK)
        return st;
    if ((at->dtype != FXRT_DTYPE_INT32 && at->dtype != FXRT_DTYPE_INT64) || at->rank > 1 ||
        type_numel(at) != 1)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "axis must be an int32 or int64 scalar");
    if (x->rank == 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "input is a scalar");
    int64_t a, count;
    int axis;
    if ((st = infer_const_ints(c, 1, &a, 1, &count)) != FX_OK ||
        (st = infer_axis(c, a, x->rank, &axis)) != FX_OK)
        return st;
    c->out[0] = *x;
    return FX_OK;
}

static FxStatus cumsum_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    Tensor *y = c->out[0];
    int rank = x->type.rank;
    int64_t axis;
    if (!single_int(c->in[1], &axis) || axis < -rank || axis >= rank)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "axis is out of range");
    if (axis < 0)
        axis += rank;
    if (!type_equal(&x->type, &y->type))
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                               "output disagrees with the input");
    int64_t outer, n, inner;
    axis_view(&x->type, (int)axis, &outer, &n, &inner);
    int exclusive = node_attr_int(c->node, "exclusive", 0) != 0;
    int reverse = node_attr_int(c->node, "reverse", 0) != 0;
    if (!fxrt_cumsum(x->type.dtype, x->data, y->data, outer, n, inner, exclusive, reverse))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "element type %s is not supported", dtype_name(x->type.dtype));
    return FX_OK;
}

/* The axis input is a compile-time constant (infer insists). */
static FxStatus cumsum_emit(EmitCtx *c)
{
    const TensorType *x = node_input_type(c->node, 0);
    int rank = x->rank;
    int64_t axis;
    if (!single_int(c->in_value[1], &axis) || axis < -rank || axis >= rank)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "axis must be a compile-time constant in range%s",
                               const_input_hint(c->node->graph));
    if (axis < 0)
        axis += rank;
    int64_t outer, n, inner;
    axis_view(x, (int)axis, &outer, &n, &inner);
    int exclusive = node_attr_int(c->node, "exclusive", 0) != 0;
    int reverse = node_attr_int(c->node, "reverse", 0) != 0;
    if (x->dtype == FXRT_DTYPE_FLOAT32)
        emit_line(c,
                  "fxrt_cumsum_f32(%s, %s, /*outer=*/%lld, /*n=*/%lld, /*inner=*/%lld, "
                  "/*exclusive=*/%d, /*reverse=*/%d);",
                  c->in[0], c->out[0], (long long)outer, (long long)n, (long long)inner, exclusive,
                  reverse);
    else
        emit_line(c,
                  "fxrt_cumsum(%s, %s, %s, /*outer=*/%lld, /*n=*/%lld, /*inner=*/%lld, "
                  "/*exclusive=*/%d, /*reverse=*/%d);",
                  c_dtype_enum(x->dtype), c->in[0], c->out[0], (long long)outer, (long long)n,
                  (long long)inner, exclusive, reverse);
    return FX_OK;
}

static const AttrSpec cumsum_attrs[] = {
    {"exclusive", FX_ATTR_INT, "0", false},
    {"reverse", FX_ATTR_INT, "0", false},
    {NULL},
};

const OpDef fx_op_CumSum = {
    .name = "CumSum",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .attrs = cumsum_attrs,
    .infer = cumsum_infer,
    .eval = cumsum_eval,
    .emit = cumsum_emit,
};
