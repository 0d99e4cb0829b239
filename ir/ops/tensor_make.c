/*
 * tensor_make.c - ops that make a tensor from a shape or a few scalars:
 * Shape, Size, ConstantOfShape, Range and EyeLike.
 *
 * Shape and Size read only their input's static type (FX_OPF_TYPE_ONLY), so
 * shape propagation evaluates them at compile time and the Shape -> Gather ->
 * Concat -> Reshape chains of exported models fold to constants.  The others
 * have an output shape set by input values: ConstantOfShape's shape and
 * Range's start/limit/delta must be compile-time constants, otherwise infer
 * refuses the node with FX_ERR_UNSUPPORTED naming the input.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

static const AttrSpec no_attrs[] = {{NULL}};

static FxStatus not_constant(InferCtx *c, int i, const char *what)
{
    return infer_not_constant(c, i, what, NULL);
}

static FxStatus check_out_dtype(InferCtx *c, DType t)
{
    if (!dtype_is_supported(t))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "output element type %s is not supported", dtype_name(t));
    return FX_OK;
}

/* --- code generation helpers ----------------------------------------------- */

/* Writes `static const T NAME = <the element at elem>;` for dtype t. */
static void emit_scalar(EmitCtx *c, const char *name, DType t, const void *elem)
{
    char lit[64];
    if (t == FXRT_DTYPE_FLOAT32) {
        float v;
        memcpy(&v, elem, sizeof v);
        c_float_literal(v, lit, sizeof lit);
    } else if (t == FXRT_DTYPE_FLOAT64) {
        double v;
        memcpy(&v, elem, sizeof v);
        if (isnan(v))
            snprintf(lit, sizeof lit, "NAN");
        else if (isinf(v))
            snprintf(lit, sizeof lit, v > 0 ? "INFINITY" : "-INFINITY");
        else {
            snprintf(lit, sizeof lit, "%.17g", v);
            if (!strpbrk(lit, ".e"))
                strcat(lit, ".0");
        }
    } else if (t == FXRT_DTYPE_UINT64) {
        uint64_t v;
        memcpy(&v, elem, sizeof v);
        snprintf(lit, sizeof lit, "%lluu", (unsigned long long)v);
    } else {
        int64_t v = fxrt_load_i64(t, elem, 0);
        if (v == INT64_MIN)
            snprintf(lit, sizeof lit, "INT64_MIN");
        else
            snprintf(lit, sizeof lit, "%lld", (long long)v);
    }
    emit_line(c, "static const %s %s = %s;", c_type_name(t), name, lit);
}

/* Writes int64 values into the output (Shape and Size, which shape
 * propagation normally folds into weights before code generation). */
static void emit_int64_values(EmitCtx *c, const int64_t *v, int64_t n)
{
    if (n == 0)
        return;
    emit_int64_array(c, "values", v, n);
    emit_line(c, "memcpy(%s, values, sizeof values);", c->out[0]);
}

/* --- Shape ------------------------------------------------------------------ */

/* [start, end) of the dims to report, clamped like a Python slice. */
static void shape_range(const Node *n, int rank, int64_t *start, int64_t *end)
{
    int64_t s = node_attr_int(n, "start", 0), e = node_attr_int(n, "end", rank);
    if (s < 0)
        s += rank;
    if (e < 0)
        e += rank;
    s = s < 0 ? 0 : s > rank ? rank : s;
    e = e < 0 ? 0 : e > rank ? rank : e;
    *start = s;
    *end = e > s ? e : s;
}

static FxStatus shape_infer(InferCtx *c)
{
    int64_t s, e;
    shape_range(c->node, c->in[0]->rank, &s, &e);
    c->out[0] = (TensorType){.dtype = FXRT_DTYPE_INT64, .rank = 1, .dims = {e - s}};
    return FX_OK;
}

/* Reads only the input's type: its data may be NULL (FX_OPF_TYPE_ONLY). */
static FxStatus shape_eval(EvalCtx *c)
{
    const TensorType *t = &c->in[0]->type;
    int64_t s, e, *out = c->out[0]->data;
    shape_range(c->node, t->rank, &s, &e);
    if (tensor_numel(c->out[0]) != e - s)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "output has the wrong size");
    for (int64_t i = s; i < e; i++)
        out[i - s] = t->dims[i];
    return FX_OK;
}

static FxStatus shape_emit(EmitCtx *c)
{
    const TensorType *t = node_input_type(c->node, 0);
    int64_t s, e;
    shape_range(c->node, t->rank, &s, &e);
    emit_int64_values(c, t->dims + s, e - s);
    return FX_OK;
}

static const AttrSpec shape_attrs[] = {
    {"start", FX_ATTR_INT, "0", false},
    {"end", FX_ATTR_INT, NULL, false}, /* absent: the rank */
    {NULL},
};

const OpDef fx_op_Shape = {
    .name = "Shape",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_TYPE_ONLY,
    .attrs = shape_attrs,
    .infer = shape_infer,
    .eval = shape_eval,
    .emit = shape_emit,
};

/* --- Size ------------------------------------------------------------------- */

static FxStatus size_infer(InferCtx *c)
{
    c->out[0] = (TensorType){.dtype = FXRT_DTYPE_INT64, .rank = 0};
    return FX_OK;
}

static FxStatus size_eval(EvalCtx *c)
{
    int64_t n = type_numel(&c->in[0]->type);
    memcpy(c->out[0]->data, &n, sizeof n);
    return FX_OK;
}

static FxStatus size_emit(EmitCtx *c)
{
    int64_t n = type_numel(node_input_type(c->node, 0));
    emit_int64_values(c, &n, 1);
    return FX_OK;
}

const OpDef fx_op_Size = {
    .name = "Size",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_TYPE_ONLY,
    .attrs = no_attrs,
    .infer = size_infer,
    .eval = size_eval,
    .emit = size_emit,
};

/* --- ConstantOfShape -------------------------------------------------------- */

/* The fill value: the one-element tensor attribute, float32 0 by default. */
static const Tensor *fill_value(const Node *n)
{
    const Attr *a = node_attr(n, "value");
    return a && a->kind == FX_ATTR_TENSOR ? a->t : NULL;
}

static FxStatus constant_of_shape_infer(InferCtx *c)
{
    const TensorType *s = c->in[0];
    const Tensor *v = fill_value(c->node);
    TensorType out = {.dtype = v ? v->type.dtype : FXRT_DTYPE_FLOAT32};
    int64_t n = 0;
    FxStatus st = check_out_dtype(c, out.dtype);
    if (st != FX_OK)
        return st;
    if (v && tensor_numel(v) != 1)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "attribute 'value' must hold one element");
    if (s->dtype != FXRT_DTYPE_INT64 || s->rank != 1)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "input 'input' must be a 1-D int64 shape");
    if (!c->in_value[0])
        return not_constant(c, 0, "input");
    if (s->dims[0] > FX_MAX_RANK)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "output rank %lld is beyond the supported %d",
                               (long long)s->dims[0], FX_MAX_RANK);
    if ((st = infer_const_ints(c, 0, out.dims, FX_MAX_RANK, &n)) != FX_OK)
        return st;
    out.rank = (int)n;
    for (int d = 0; d < out.rank; d++)
        if (out.dims[d] < 0)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "shape[%d] = %lld is negative",
                                   d, (long long)out.dims[d]);
    c->out[0] = out;
    return FX_OK;
}

static FxStatus constant_of_shape_eval(EvalCtx *c)
{
    const Tensor *v = fill_value(c->node);
    Tensor *o = c->out[0];
    if (v) {
        if (v->type.dtype != o->type.dtype || tensor_numel(v) != 1)
            return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "bad fill value");
        fxrt_fill(fxrt_dtype_size(o->type.dtype), tensor_numel(o), v->data, o->data);
    } /* else float32 zeros: the output arrives zeroed */
    return FX_OK;
}

/* The arena is not zeroed, so the default float32 zeros are written too. */
static FxStatus constant_of_shape_emit(EmitCtx *c)
{
    const Tensor *v = fill_value(c->node);
    const TensorType *o = &c->node->out_types[0];
    int64_t n = type_numel(o);
    if (n == 0)
        return FX_OK;
    if (v && (v->type.dtype != o->dtype || tensor_numel(v) != 1))
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "bad fill value");
    unsigned char zero[16] = {0};
    emit_scalar(c, "value", o->dtype, v ? v->data : zero);
    emit_line(c, "fxrt_fill(sizeof(%s), %lld, &value, %s);", c_type_name(o->dtype), (long long)n,
            c->out[0]);
    return FX_OK;
}

static const AttrSpec constant_of_shape_attrs[] = {
    {"value", FX_ATTR_TENSOR, NULL, false},
    {NULL},
};

const OpDef fx_op_ConstantOfShape = {
    .name = "ConstantOfShape",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = constant_of_shape_attrs,
    .infer = constant_of_shape_infer,
    .eval = constant_of_shape_eval,
    .emit = constant_of_shape_emit,
};

/* --- Range ------------------------------------------------------------------ */

static bool range_dtype(DType t)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32:
    case FXRT_DTYPE_FLOAT64:
    case FXRT_DTYPE_INT16:
    case FXRT_DTYPE_INT32:
    case FXRT_DTYPE_INT64:
        return true;
    default:
        return false;
    }
}

static FxStatus range_infer(InferCtx *c)
{
    static const char *const names[3] = {"start", "limit", "delta"};
    const TensorType *t0 = c->in[0];
    const int64_t max_len = (int64_t)1 << 40;
    int64_t n;
    if (!range_dtype(t0->dtype))
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "Range takes float, double, int16, int32 or int64, not %s",
                               dtype_name(t0->dtype));
    for (int i = 0; i < 3; i++) {
        const TensorType *t = c->in[i];
        if (t->dtype != t0->dtype || type_numel(t) != 1 || t->rank > 1)
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                                   "input '%s' must be one %s value", names[i],
                                   dtype_name(t0->dtype));
    }
    for (int i = 0; i < 3; i++)
        if (!c->in_value[i])
            return not_constant(c, i, names[i]);
    const Tensor *s = c->in_value[0], *l = c->in_value[1], *dl = c->in_value[2];
    if (fxrt_dtype_is_float(t0->dtype)) {
        double a = tensor_get_float(s, 0), b = tensor_get_float(l, 0);
        double d = tensor_get_float(dl, 0);
        double len = d != 0.0 ? ceil((b - a) / d) : NAN;
        if (!(len <= (double)max_len))
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "range from %g to %g by %g is invalid or too long", a, b, d);
        n = len > 0.0 ? (int64_t)len : 0;
    } else {
        int64_t a = tensor_get_int(s, 0), b = tensor_get_int(l, 0), d = tensor_get_int(dl, 0);
        if (d == 0)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "delta is 0");
        /* span and step as unsigned magnitudes: no signed overflow */
        uint64_t span = 0, step = d > 0 ? (uint64_t)d : 0 - (uint64_t)d;
        if (d > 0 && b > a)
            span = (uint64_t)b - (uint64_t)a;
        else if (d < 0 && a > b)
            span = (uint64_t)a - (uint64_t)b;
        uint64_t len = span / step + (span % step != 0);
        if (len > (uint64_t)max_len)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "range is too long");
        n = (int64_t)len;
    }
    c->out[0] = (TensorType){.dtype = t0->dtype, .rank = 1, .dims = {n}};
    return FX_OK;
}

static FxStatus range_eval(EvalCtx *c)
{
    Tensor *o = c->out[0];
    if (fxrt_range(o->type.dtype, c->in[0]->data, c->in[2]->data, tensor_numel(o), o->data) !=
        FXRT_INDEX_OK)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "unsupported element type");
    return FX_OK;
}

/* start and delta are read from their buffers (weights once folded); the
 * length is the inferred one. */
static FxStatus range_emit(EmitCtx *c)
{
    const TensorType *o = &c->node->out_types[0];
    emit_line(c, "fxrt_range(%s, %s, %s, %lld, %s);", c_dtype_enum(o->dtype), c->in[0], c->in[2],
            (long long)type_numel(o), c->out[0]);
    return FX_OK;
}

const OpDef fx_op_Range = {
    .name = "Range",
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = no_attrs,
    .infer = range_infer,
    .eval = range_eval,
    .emit = range_emit,
};

/* --- EyeLike ---------------------------------------------------------------- */

/* The dtype attribute, or the input's type; UNDEFINED for numbers that name
 * no type at all (so that no out-of-range value is cast to the enum). */
static DType eye_like_dtype(const Node *n, DType input)
{
    int64_t t = node_attr_int(n, "dtype", (int64_t)input);
    return t > 0 && t <= FXRT_DTYPE_UINT64 ? (DType)t : FXRT_DTYPE_UNDEFINED;
}

static FxStatus eye_like_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    if (x->rank != 2)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "input must be 2-D, not rank %d",
                               x->rank);
    DType t = eye_like_dtype(c->node, x->dtype);
    FxStatus st = check_out_dtype(c, t);
    if (st != FX_OK)
        return st;
    c->out[0] = *x;
    c->out[0].dtype = t;
    return FX_OK;
}

static FxStatus eye_like_eval(EvalCtx *c)
{
    Tensor *o = c->out[0];
    unsigned char one[16] = {0};
    fxrt_store_i64(o->type.dtype, one, 0, 1);
    fxrt_eye_like(fxrt_dtype_size(o->type.dtype), o->type.dims[0], o->type.dims[1],
                  node_attr_int(c->node, "k", 0), one, o->data);
    return FX_OK;
}

static FxStatus eye_like_emit(EmitCtx *c)
{
    const TensorType *o = &c->node->out_types[0];
    unsigned char one[16] = {0};
    if (type_numel(o) == 0)
        return FX_OK;
    fxrt_store_i64(o->dtype, one, 0, 1);
    emit_scalar(c, "one", o->dtype, one);
    int64_t k = node_attr_int(c->node, "k", 0);
    /* the kernel clamps k to the matrix; clamping here keeps INT64_MIN out */
    if (k < -(o->dims[0] + 1))
        k = -(o->dims[0] + 1);
    if (k > o->dims[1] + 1)
        k = o->dims[1] + 1;
    emit_line(c, "fxrt_eye_like(sizeof(%s), /*rows=*/%lld, /*cols=*/%lld, /*k=*/%lld, &one, %s);",
              c_type_name(o->dtype), (long long)o->dims[0], (long long)o->dims[1], (long long)k,
              c->out[0]);
    return FX_OK;
}

static const AttrSpec eye_like_attrs[] = {
    {"dtype", FX_ATTR_INT, NULL, false}, /* absent: the input's */
    {"k", FX_ATTR_INT, "0", false},
    {NULL},
};

const OpDef fx_op_EyeLike = {
    .name = "EyeLike",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = eye_like_attrs,
    .infer = eye_like_infer,
    .eval = eye_like_eval,
    .emit = eye_like_emit,
};
