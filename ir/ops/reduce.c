/*
 * reduce.c - the reductions ReduceSum, ReduceMean, ReduceMax, ReduceMin,
 * ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and
 * ReduceSumSquare, and the index reductions ArgMax and ArgMin.
 *
 * Canonical form is the newest opset's: the reduced axes are an optional
 * int64 input (ReduceSum since opset 13, the others since 18), not the older
 * `axes` attribute, which canonicalize turns into a constant input.  No axes
 * (or an empty list) means every axis, unless noop_with_empty_axes is set,
 * which makes the op an identity.  The output shape depends on the axes, so a
 * non-empty axes input must be a compile-time constant; infer refuses it
 * otherwise (FX_ERR_UNSUPPORTED).  Axes out of range or repeated are refused.
 *
 * Element types: float32 (the fast kernels), float64 and every integer type
 * (int8..uint64).  float16 and bool are refused in infer.  ArgMax/ArgMin need
 * a non-empty axis; they return int64 indices.
 *
 * The arithmetic lives in runtime/fxrt_reduce.c; eval only works out the
 * view (merged axes, see FxrtReduceView) and checks it against the output it
 * was given.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* --- helpers ------------------------------------------------------------------ */

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


/* Bit a of *mask set: input axis a is reduced.  axes may be NULL (input
 * omitted).  *identity is set when noop_with_empty_axes applies. */
static FxStatus reduce_axes_mask(Diag *d, const Node *n, int rank, const Tensor *axes,
                                 int64_t axes_count, uint32_t *mask, bool *identity)
{
    *identity = false;
    *mask = 0;
    if (axes_count == 0) {
        if (node_attr_int(n, "noop_with_empty_axes", 0))
            *identity = true;
        else
            *mask = rank >= 32 ? ~0u : (1u << rank) - 1u;
        return FX_OK;
    }
    for (int64_t i = 0; i < axes_count; i++) {
        int64_t a = tensor_get_int(axes, i);
        if (a < -rank || a >= rank)
            return diag_node_error(d, FX_ERR_SHAPE, n, "axis %lld is out of range for rank %d",
                                   (long long)a, rank);
        if (a < 0)
            a += rank;
        if (*mask & (1u << a))
            return diag_node_error(d, FX_ERR_INVALID, n, "axis %lld is listed twice",
                                   (long long)a);
        *mask |= 1u << a;
    }
    return FX_OK;
}

/* Output type of a reduction of x over mask. */
static void reduce_out_type(const TensorType *x, uint32_t mask, bool keepdims, TensorType *out)
{
    memset(out, 0, sizeof *out);
    out->dtype = x->dtype;
    for (int a = 0; a < x->rank; a++) {
        if (!(mask & (1u << a)))
            out->dims[out->rank++] = x->dims[a];
        else if (keepdims)
            out->dims[out->rank++] = 1;
    }
}

/* --- Reduce* ------------------------------------------------------------------ */

static FxrtReduceOp reduce_op_of(const OpDef *op)
{
    if (op == &fx_op_ReduceMean) return FXRT_REDUCE_MEAN;
    if (op == &fx_op_ReduceMax) return FXRT_REDUCE_MAX;
    if (op == &fx_op_ReduceMin) return FXRT_REDUCE_MIN;
    if (op == &fx_op_ReduceProd) return FXRT_REDUCE_PROD;
    if (op == &fx_op_ReduceL1) return FXRT_REDUCE_L1;
    if (op == &fx_op_ReduceL2) return FXRT_REDUCE_L2;
    if (op == &fx_op_ReduceLogSum) return FXRT_REDUCE_LOG_SUM;
    if (op == &fx_op_ReduceLogSumExp) return FXRT_REDUCE_LOG_SUM_EXP;
    if (op == &fx_op_ReduceSumSquare) return FXRT_REDUCE_SUM_SQUARE;
    return FXRT_REDUCE_SUM;
}

/* Before opset 18 (13 for ReduceSum) axes was an attribute. */
static FxStatus reduce_canonicalize(Node *n, int opset, Diag *d)
{
    int since = n->op == &fx_op_ReduceSum ? 13 : 18;
    const int64_t *vals;
    int64_t count = node_attr_ints(n, "axes", &vals);
    if (count < 0)
        return FX_OK;
    if (opset >= since)
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "attribute 'axes' was replaced by an input in opset %d", since);
    if (n->num_args != 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "has %d inputs, expected 1", n->num_args);
    FxStatus st = FX_OK;
    if (count > 0) /* an empty list meant "all axes", as no input does */
        st = node_set_const_input(n, n->num_args, "axes", tensor_new_ints(vals, count, d), d);
    if (st == FX_OK)
        node_remove_attr(n, "axes");
    return st;
}

static FxStatus reduce_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    const TensorType *axes_t = c->num_inputs > 1 ? c->in[1] : NULL;
    const Tensor *axes = c->num_inputs > 1 ? c->in_value[1] : NULL;
    FxStatus st = check_numeric(c->diag, c->node, x);
    if (st != FX_OK)
        return st;
    int64_t count = 0;
    if (axes_t) {
        if (axes_t->dtype != FXRT_DTYPE_INT64 || axes_t->rank != 1)
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                                   "axes must be a 1-D int64 tensor");
        count = axes_t->dims[0];
        /* an empty list is known from the type alone */
        if (count > 0 && !axes)
            return infer_not_constant(c, 1, "axes", "the output shape depends on its data");
    }
    uint32_t mask;
    bool identity;
    if ((st = reduce_axes_mask(c->diag, c->node, x->rank, axes, count, &mask, &identity)) !=
        FX_OK)
        return st;
    reduce_out_type(x, mask, node_attr_int(c->node, "keepdims", 1) != 0, &c->out[0]);
    return FX_OK;
}

/* The work of one reduction, shared by eval and emit so that the interpreter
 * and the generated code run the same kernel on the same view.  axes is the
 * constant axes input (NULL when omitted), count its length. */
static FxStatus reduce_plan(Diag *d, const Node *n, const TensorType *x, const Tensor *axes,
                            int64_t count, FxrtReduceView *v, bool *identity)
{
    uint32_t mask;
    FxStatus st = reduce_axes_mask(d, n, x->rank, axes, count, &mask, identity);
    if (st == FX_OK)
        fxrt_reduce_view_init(v, x->rank, x->dims, mask);
    return st;
}

static int64_t reduce_view_outputs(const FxrtReduceView *v)
{
    int64_t outputs = 1;
    for (int k = 0; k < v->rank; k++)
        if (!(v->reduced & (1u << k)))
            outputs *= v->dims[k];
    return outputs;
}

static FxStatus reduce_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    const Tensor *axes = c->num_inputs > 1 ? c->in[1] : NULL;
    Tensor *y = c->out[0];
    FxrtReduceView v;
    bool identity;
    FxStatus st = reduce_plan(c->diag, c->node, &x->type, axes, axes ? tensor_numel(axes) : 0,
                              &v, &identity);
    if (st != FX_OK)
        return st;
    if (identity) {
        if (tensor_nbytes(y) != tensor_nbytes(x))
            return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                                   "output disagrees with the input shape");
        memcpy(y->data, x->data, tensor_nbytes(x));
        return FX_OK;
    }
    if (reduce_view_outputs(&v) != tensor_numel(y) || y->type.dtype != x->type.dtype)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                               "output disagrees with the input shape and axes");
    FxrtReduceOp op = reduce_op_of(c->node->op);
    if (x->type.dtype == FXRT_DTYPE_FLOAT32)
        fxrt_reduce_nd_f32(op, x->data, y->data, &v);
    else if (!fxrt_reduce_nd(op, x->type.dtype, x->data, y->data, &v))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "element type %s is not supported", dtype_name(x->type.dtype));
    return FX_OK;
}

static const char *reduce_op_enum(FxrtReduceOp op)
{
    switch (op) {
    case FXRT_REDUCE_SUM: return "FXRT_REDUCE_SUM";
    case FXRT_REDUCE_MEAN: return "FXRT_REDUCE_MEAN";
    case FXRT_REDUCE_MAX: return "FXRT_REDUCE_MAX";
    case FXRT_REDUCE_MIN: return "FXRT_REDUCE_MIN";
    case FXRT_REDUCE_PROD: return "FXRT_REDUCE_PROD";
    case FXRT_REDUCE_L1: return "FXRT_REDUCE_L1";
    case FXRT_REDUCE_L2: return "FXRT_REDUCE_L2";
    case FXRT_REDUCE_LOG_SUM: return "FXRT_REDUCE_LOG_SUM";
    case FXRT_REDUCE_LOG_SUM_EXP: return "FXRT_REDUCE_LOG_SUM_EXP";
    case FXRT_REDUCE_SUM_SQUARE: return "FXRT_REDUCE_SUM_SQUARE";
    }
    return "FXRT_REDUCE_SUM";
}

/* Writes `static const FxrtReduceView v = {...};`. */
static void emit_reduce_view(EmitCtx *c, const FxrtReduceView *v)
{
    char dims[FXRT_MAX_RANK * 24 + 8];
    size_t len = 0;
    for (int k = 0; k < v->rank; k++)
        len += (size_t)snprintf(dims + len, sizeof dims - len, "%s%lld", k ? ", " : "",
                                (long long)v->dims[k]);
    if (v->rank == 0)
        snprintf(dims, sizeof dims, "0");
    emit_line(c, "static const FxrtReduceView v = {");
    emit_line(c, "    .rank = %d, .dims = {%s}, .reduced = 0x%xu, .contiguous = %d,", v->rank, dims,
            (unsigned)v->reduced, v->contiguous);
    emit_line(c, "    .outer = %lld, .n = %lld, .inner = %lld, .count = %lld};",
            (long long)v->outer, (long long)v->n, (long long)v->inner, (long long)v->count);
}

/* The view is fixed at compile time: a contiguous float reduction becomes
 * one fxrt_reduce_f32/f64 call with literal extents, anything else passes a
 * static const FxrtReduceView. */
static FxStatus reduce_emit(EmitCtx *c)
{
    const Node *n = c->node;
    const TensorType *x = node_input_type(n, 0);
    const TensorType *axes_t = c->num_inputs > 1 ? node_input_type(n, 1) : NULL;
    const Tensor *axes = c->num_inputs > 1 ? c->in_value[1] : NULL;
    int64_t count = axes_t && axes_t->rank == 1 ? axes_t->dims[0] : 0;
    if (count > 0 && !axes)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                               "axes input must be a compile-time constant%s",
                               const_input_hint(n->graph));
    FxrtReduceView v;
    bool identity;
    FxStatus st = reduce_plan(c->diag, n, x, axes, count, &v, &identity);
    if (st != FX_OK)
        return st;
    if (identity) {
        emit_line(c, "memcpy(%s, %s, %lld);", c->out[0], c->in[0],
                (long long)type_nbytes(x));
        return FX_OK;
    }
    const char *op = reduce_op_enum(reduce_op_of(n->op));
    if (x->dtype == FXRT_DTYPE_FLOAT32 || x->dtype == FXRT_DTYPE_FLOAT64) {
        const char *sfx = x->dtype == FXRT_DTYPE_FLOAT32 ? "f32" : "f64";
        if (v.contiguous) {
            emit_line(c, "fxrt_reduce_%s(%s, %s, %s, /*outer=*/%lld, /*n=*/%lld, /*inner=*/%lld);",
                      sfx, op, c->in[0], c->out[0], (long long)v.outer, (long long)v.n,
                      (long long)v.inner);
            return FX_OK;
        }
        emit_reduce_view(c, &v);
        emit_line(c, "fxrt_reduce_nd_%s(%s, %s, %s, &v);", sfx, op, c->in[0], c->out[0]);
        return FX_OK;
    }
    emit_reduce_view(c, &v);
    emit_line(c, "fxrt_reduce_nd(%s, %s, %s, %s, &v);", op, c_dtype_enum(x->dtype), c->in[0],
            c->out[0]);
    return FX_OK;
}

static const AttrSpec reduce_attrs[] = {
    {"axes", FX_ATTR_INTS, NULL, false}, /* before opset 18 (ReduceSum: 13); becomes input 1 */
    {"keepdims", FX_ATTR_INT, "1", false},
    {"noop_with_empty_axes", FX_ATTR_INT, "0", false},
    {NULL},
};

#define REDUCE_OPDEF(Name)                                                                  \
    const OpDef fx_op_##Name = {                                                            \
        .name = #Name,                                                                      \
        .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,               \
        .attrs = reduce_attrs,                                                              \
        .canonicalize = reduce_canonicalize,                                                \
        .infer = reduce_infer,                                                              \
        .eval = reduce_eval,                                                                \
        .emit = reduce_emit,                                                                \
    };

REDUCE_OPDEF(ReduceSum)
REDUCE_OPDEF(ReduceMean)
REDUCE_OPDEF(ReduceMax)
REDUCE_OPDEF(ReduceMin)
REDUCE_OPDEF(ReduceProd)
REDUCE_OPDEF(ReduceL1)
REDUCE_OPDEF(ReduceL2)
REDUCE_OPDEF(ReduceLogSum)
REDUCE_OPDEF(ReduceLogSumExp)
REDUCE_OPDEF(ReduceSumSquare)

/* --- ArgMax / ArgMin ------------------------------------------------------------ */

static FxStatus arg_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    FxStatus st = check_numeric(c->diag, c->node, x);
    int axis;
    if (st != FX_OK)
        return st;
    if (x->rank == 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "input is a scalar");
    if ((st = infer_axis(c, node_attr_int(c->node, "axis", 0), x->rank, &axis)) != FX_OK)
        return st;
    if (x->dims[axis] == 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "axis %d is empty: there is no index to return", axis);
    reduce_out_type(x, 1u << axis, node_attr_int(c->node, "keepdims", 1) != 0, &c->out[0]);
    c->out[0].dtype = FXRT_DTYPE_INT64;
    return FX_OK;
}

/* [outer, n, inner] around the axis; false when the axis is bad. */
static bool arg_view(const Node *n, const TensorType *x, int64_t *outer, int64_t *len,
                     int64_t *inner)
{
    int rank = x->rank;
    int64_t axis = node_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += rank;
    if (axis < 0 || axis >= rank || x->dims[axis] == 0)
        return false;
    *outer = *inner = 1;
    *len = x->dims[axis];
    for (int k = 0; k < axis; k++)
        *outer *= x->dims[k];
    for (int k = (int)axis + 1; k < rank; k++)
        *inner *= x->dims[k];
    return true;
}

static FxStatus arg_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    Tensor *y = c->out[0];
    int64_t outer, n, inner;
    if (!arg_view(c->node, &x->type, &outer, &n, &inner))
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "bad axis for the input");
    if (y->type.dtype != FXRT_DTYPE_INT64 || tensor_numel(y) != outer * inner)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                               "output disagrees with the input shape");
    int is_min = c->node->op == &fx_op_ArgMin;
    int last = node_attr_int(c->node, "select_last_index", 0) != 0;
    if (!fxrt_arg_reduce(x->type.dtype, is_min, x->data, y->data, outer, n, inner, last))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "element type %s is not supported", dtype_name(x->type.dtype));
    return FX_OK;
}

static FxStatus arg_emit(EmitCtx *c)
{
    const TensorType *x = node_input_type(c->node, 0);
    int64_t outer, n, inner;
    if (!arg_view(c->node, x, &outer, &n, &inner))
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "bad axis for the input");
    int is_min = c->node->op == &fx_op_ArgMin;
    int last = node_attr_int(c->node, "select_last_index", 0) != 0;
    if (x->dtype == FXRT_DTYPE_FLOAT32)
        emit_line(c,
                  "fxrt_%s_f32(%s, %s, /*outer=*/%lld, /*n=*/%lld, /*inner=*/%lld, "
                  "/*select_last=*/%d);",
                  is_min ? "argmin" : "argmax", c->in[0], c->out[0], (long long)outer, (long long)n,
                  (long long)inner, last);
    else
        emit_line(c,
                  "fxrt_arg_reduce(%s, /*is_min=*/%d, %s, %s, /*outer=*/%lld, /*n=*/%lld, "
                  "/*inner=*/%lld, /*select_last=*/%d);",
                  c_dtype_enum(x->dtype), is_min, c->in[0], c->out[0], (long long)outer,
                  (long long)n, (long long)inner, last);
    return FX_OK;
}

static const AttrSpec arg_attrs[] = {
    {"axis", FX_ATTR_INT, "0", false},
    {"keepdims", FX_ATTR_INT, "1", false},
    {"select_last_index", FX_ATTR_INT, "0", false},
    {NULL},
};

const OpDef fx_op_ArgMax = {
    .name = "ArgMax",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = arg_attrs,
    .infer = arg_infer,
    .eval = arg_eval,
    .emit = arg_emit,
};

const OpDef fx_op_ArgMin = {
    .name = "ArgMin",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = arg_attrs,
    .infer = arg_infer,
    .eval = arg_eval,
    .emit = arg_emit,
};
