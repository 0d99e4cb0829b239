/*
 * tensor_slice.c - the layout ops whose output shape comes from a constant
 * list input: Split, Slice, Expand, Tile and Pad.
 *
 * Like the ops of tensor_layout.c they copy whole elements of any dtype the
 * runtime holds through the kernels of runtime/fxrt_tensor.h.  Output shapes
 * must be static: Slice's starts/ends/axes/steps, Split's split, Expand's
 * shape, Tile's repeats and Pad's pads must be compile-time constants,
 * otherwise infer refuses the node with FX_ERR_UNSUPPORTED naming the input.
 * Older opset forms (Slice before 10, Pad before 11, Split before 13 took
 * attributes) become constant inputs in canonicalize; Split's num_outputs
 * (opset 18) and Pad's axes input (18) are read where the shapes are.  Pad
 * supports the modes constant, reflect, edge and wrap (19).  Eval checks
 * the lists it reads against the inferred output type, so a mismatch is an
 * error, never an out-of-bounds copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* --- integer lists read from inputs ------------------------------------------ */

static bool is_index_dtype(DType t)
{
    return t == FXRT_DTYPE_INT64 || t == FXRT_DTYPE_INT32;
}

/* Checks input i is a 1-D (or, with allow_scalar, 0-D) int32/int64 tensor of
 * at most max values; used by infer before reading it and by eval. */
static FxStatus check_int_list(Diag *d, const Node *n, const TensorType *t, const char *what,
                               bool allow_scalar, int64_t max)
{
    if (!is_index_dtype(t->dtype))
        return diag_node_error(d, FX_ERR_INVALID, n, "input '%s' must be int64, not %s", what,
                               dtype_name(t->dtype));
    if (t->rank != 1 && !(allow_scalar && t->rank == 0))
        return diag_node_error(d, FX_ERR_SHAPE, n, "input '%s' must be a 1-D tensor, not rank %d",
                               what, t->rank);
    if (type_numel(t) > max)
        return diag_node_error(d, FX_ERR_SHAPE, n, "input '%s' has %lld values, at most %lld "
                               "make sense here", what, (long long)type_numel(t), (long long)max);
    return FX_OK;
}

/* Reads constant input i (a shape-like list) in infer, naming it `what`. */
static FxStatus const_int_list(InferCtx *c, int i, const char *what, bool allow_scalar,
                               int64_t *vals, int64_t max, int64_t *count)
{
    const TensorType *t = layout_input_type(c, i);
    if (!t)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "input '%s' is missing", what);
    FxStatus st = check_int_list(c->diag, c->node, t, what, allow_scalar, max);
    if (st != FX_OK)
        return st;
    if (!c->in_value[i])
        return infer_not_constant(c, i, what, NULL);
    return infer_const_ints(c, i, vals, max, count);
}

/* Reads a list from tensor t (an eval input or a compile-time value). */
static FxStatus tensor_int_list(Diag *d, const Node *n, const Tensor *t, const char *what,
                                bool allow_scalar, int64_t *vals, int64_t max, int64_t *count)
{
    FxStatus st = check_int_list(d, n, &t->type, what, allow_scalar, max);
    if (st != FX_OK)
        return st;
    *count = tensor_numel(t);
    for (int64_t k = 0; k < *count; k++)
        vals[k] = tensor_get_int(t, k);
    return FX_OK;
}

/* The same list read from an eval input. */
static FxStatus eval_int_list(EvalCtx *c, int i, const char *what, bool allow_scalar,
                              int64_t *vals, int64_t max, int64_t *count)
{
    const Tensor *t = layout_eval_input(c, i);
    if (!t)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "input '%s' is missing", what);
    return tensor_int_list(c->diag, c->node, t, what, allow_scalar, vals, max, count);
}

/* The same list read from the compile-time value of input i.  Shape
 * propagation made it constant (infer refuses otherwise), so a missing value
 * means the graph changed under the code generator. */
static FxStatus emit_int_list(EmitCtx *c, int i, const char *what, int64_t *vals, int64_t max,
                              int64_t *count)
{
    const Tensor *t = i < c->num_inputs ? c->in_value[i] : NULL;
    if (!t)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "input '%s' must be a compile-time constant to compile the "
                               "node%s", what, const_input_hint(c->node->graph));
    return tensor_int_list(c->diag, c->node, t, what, false, vals, max, count);
}

/* --- canonical form ----------------------------------------------------------- */


/* Refuses an attribute that opset `since` replaced by an input. */
static FxStatus refuse_legacy_attr(const Node *n, int opset, int since, const char *name,
                                   Diag *d)
{
    if (opset >= since && node_attr(n, name))
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "attribute '%s' was replaced by an input in opset %d", name, since);
    return FX_OK;
}

/* --- code generation and eval checks ------------------------------------------ */

/* Writes `static const T NAME = <the element at elem>;` for dtype t. */
static void emit_scalar(EmitCtx *c, const char *name, DType t, const void *elem)
{
    char lit[64];
    switch (t) {
    case FXRT_DTYPE_FLOAT32: {
        float v;
        memcpy(&v, elem, sizeof v);
        c_float_literal(v, lit, sizeof lit);
        break;
    }
    case FXRT_DTYPE_FLOAT64: {
        double v;
        memcpy(&v, elem, sizeof v);
        if (v != v)
            snprintf(lit, sizeof lit, "NAN");
        else if (v > 1.7976931348623157e308 || v < -1.7976931348623157e308)
            snprintf(lit, sizeof lit, v > 0 ? "INFINITY" : "-INFINITY");
        else {
            snprintf(lit, sizeof lit, "%.17g", v);
            if (!strpbrk(lit, ".en"))
                strcat(lit, ".0");
        }
        break;
    }
    case FXRT_DTYPE_UINT64: {
        uint64_t v;
        memcpy(&v, elem, sizeof v);
        snprintf(lit, sizeof lit, "%lluu", (unsigned long long)v);
        break;
    }
    default: {
        int64_t v = fxrt_load_i64(t, elem, 0);
        if (v == INT64_MIN)
            snprintf(lit, sizeof lit, "INT64_MIN");
        else
            snprintf(lit, sizeof lit, "%lld", (long long)v);
        break;
    }
    }
    emit_line(c, "static const %s %s = %s;", c_type_name(t), name, lit);
}

static FxStatus check_out_dims(EvalCtx *c, const int64_t *dims, int rank)
{
    const TensorType *o = &c->out[0]->type;
    bool same = o->rank == rank;
    for (int d = 0; same && d < rank; d++)
        same = o->dims[d] == dims[d];
    if (!same)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                               "input values disagree with the inferred output shape");
    return FX_OK;
}

static const AttrSpec no_attrs[] = {{NULL}};

/* --- Split ------------------------------------------------------------------ */

static FxStatus split_canonicalize(Node *n, int opset, Diag *d)
{
    const int64_t *vals;
    int64_t count = node_attr_ints(n, "split", &vals);
    if (count < 0)
        return FX_OK;
    FxStatus st = refuse_legacy_attr(n, opset, 13, "split", d);
    if (st != FX_OK)
        return st;
    if (n->num_args != 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "has %d inputs, expected 1", n->num_args);
    st = node_set_const_input(n, n->num_args, "split", tensor_new_ints(vals, count, d), d);
    if (st == FX_OK)
        node_remove_attr(n, "split");
    return st;
}

static FxStatus split_infer(InferCtx *c)
{
    const TensorType *x = c->in[0], *split_t = layout_input_type(c, 1);
    int k = c->num_outputs, axis;
    FxStatus st = layout_check_dtype(c, x, "input");
    if (st != FX_OK)
        return st;
    if (x->rank == 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "cannot split a scalar");
    if ((st = infer_axis(c, node_attr_int(c->node, "axis", 0), x->rank, &axis)) != FX_OK)
        return st;
    int64_t dim = x->dims[axis];
    int64_t *split = fx_alloc_array((size_t)k, sizeof *split);
    if (!split)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    if (split_t) {
        int64_t count = 0;
        if (type_numel(split_t) != k)
            st = diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                 "split has %lld entries for %d outputs",
                                 (long long)type_numel(split_t), k);
        else
            st = const_int_list(c, 1, "split", false, split, k, &count);
        int64_t sum = 0;
        for (int i = 0; i < k && st == FX_OK; i++) {
            /* sum <= dim holds throughout, so the addition cannot overflow */
            if (split[i] < 0 || split[i] > dim - sum)
                st = diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "split[%d] = %lld is "
                                     "invalid (the parts exceed the axis of %lld)", i,
                                     (long long)split[i], (long long)dim);
            else
                sum += split[i];
        }
        if (st == FX_OK && sum != dim)
            st = diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                 "split sums to %lld, the axis has %lld", (long long)sum,
                                 (long long)dim);
    } else if (node_attr(c->node, "num_outputs")) {
        /* opset 18: parts of ceil(dim / k), the last one smaller */
        int64_t parts = node_attr_int(c->node, "num_outputs", 0), chunk = (dim + k - 1) / k;
        if (parts != k)
            st = diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                                 "num_outputs is %lld, the node has %d outputs",
                                 (long long)parts, k);
        for (int i = 0; i < k && st == FX_OK; i++) {
            int64_t left = dim - i * chunk;
            split[i] = left < 0 ? 0 : left < chunk ? left : chunk;
        }
    } else if (dim % k != 0) {
        st = diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                             "axis of size %lld does not split into %d equal parts",
                             (long long)dim, k);
    } else {
        for (int i = 0; i < k; i++)
            split[i] = dim / k;
    }
    for (int i = 0; i < k && st == FX_OK; i++) {
        c->out[i] = *x;
        c->out[i].dims[axis] = split[i];
    }
    free(split);
    return st;
}

static FxStatus split_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    int rank = x->type.rank, k = c->num_outputs;
    int axis = (int)node_attr_int(c->node, "axis", 0);
    if (axis < 0)
        axis += rank;
    int64_t *axis_dims = fx_alloc_array((size_t)k, sizeof *axis_dims);
    void **outs = fx_alloc_array((size_t)k, sizeof *outs);
    if (!axis_dims || !outs) {
        free(axis_dims);
        free(outs);
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    }
    int64_t total = 0;
    for (int i = 0; i < k; i++) {
        axis_dims[i] = c->out[i]->type.dims[axis];
        outs[i] = c->out[i]->data;
        total += axis_dims[i];
    }
    FxStatus st = FX_OK;
    if (total != x->type.dims[axis])
        st = diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                             "outputs disagree with the input shape");
    else if (tensor_numel(x) > 0)
        fxrt_split(fxrt_dtype_size(x->type.dtype), layout_dims_product(x->type.dims, 0, axis),
                   layout_dims_product(x->type.dims, axis + 1, rank), k, axis_dims, x->data, outs);
    free(axis_dims);
    free(outs);
    return st;
}

static FxStatus split_emit(EmitCtx *c)
{
    const TensorType *x = layout_emit_in_type(c, 0);
    int rank = x->rank, k = c->num_outputs;
    int axis = (int)node_attr_int(c->node, "axis", 0);
    if (axis < 0)
        axis += rank;
    if (layout_emit_if_empty(c))
        return FX_OK;
    int64_t *axis_dims = fx_alloc_array((size_t)k, sizeof *axis_dims);
    if (!axis_dims)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    for (int i = 0; i < k; i++)
        axis_dims[i] = c->node->out_types[i].dims[axis];
    emit_int64_array(c, "axis_dims", axis_dims, k);
    layout_emit_pointer_list(c, "void *const outs", c->out, k);
    emit_line(c,
              "fxrt_split(sizeof(%s), /*outer=*/%lld, /*inner=*/%lld, /*num_outputs=*/%d, "
              "axis_dims, %s, outs);",
              c_type_name(x->dtype), (long long)layout_dims_product(x->dims, 0, axis),
              (long long)layout_dims_product(x->dims, axis + 1, rank), k, c->in[0]);
    free(axis_dims);
    return FX_OK;
}

static const AttrSpec split_attrs[] = {
    {"axis", FX_ATTR_INT, "0", false},
    {"split", FX_ATTR_INTS, NULL, false}, /* opset < 13; becomes input 1 */
    {"num_outputs", FX_ATTR_INT, NULL, false}, /* opset 18, without input 1 */
    {NULL},
};

const OpDef fx_op_Split = {
    .name = "Split",
    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1 << 16,
    .attrs = split_attrs,
    .canonicalize = split_canonicalize,
    .infer = split_infer,
    .eval = split_eval,
    .emit = split_emit,
};

/* --- Slice ------------------------------------------------------------------ */

/* Opsets 1-9: starts, ends and axes attributes; 10 made them inputs 1-3 and
 * added steps. */
static FxStatus slice_canonicalize(Node *n, int opset, Diag *d)
{
    static const char *const names[3] = {"starts", "ends", "axes"};
    FxStatus st = FX_OK;
    for (int i = 0; i < 3 && st == FX_OK; i++)
        st = refuse_legacy_attr(n, opset, 10, names[i], d);
    if (st != FX_OK || opset >= 10)
        return st;
    if (n->num_args != 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "has %d inputs, expected 1", n->num_args);
    for (int i = 0; i < 3 && st == FX_OK; i++) {
        const int64_t *vals;
        int64_t count = node_attr_ints(n, names[i], &vals);
        if (count < 0) {
            if (i < 2)
                st = diag_node_error(d, FX_ERR_INVALID, n, "required attribute '%s' is missing",
                                     names[i]);
            continue;
        }
        st = node_set_const_input(n, n->num_args, names[i], tensor_new_ints(vals, count, d), d);
        if (st == FX_OK)
            node_remove_attr(n, names[i]);
    }
    return st;
}

typedef struct SliceArgs {
    int64_t starts[FX_MAX_RANK], ends[FX_MAX_RANK], axes[FX_MAX_RANK], steps[FX_MAX_RANK];
    int64_t n, naxes, nsteps; /* naxes / nsteps: -1 when the input is omitted */
} SliceArgs;

/* Resolves ONNX Slice semantics into per-axis start/step and the output
 * shape: negative starts/ends count from the end, out-of-range values clamp,
 * axes default to 0..n-1, steps to 1. */
static FxStatus slice_plan(Diag *d, const Node *n, const TensorType *x, const SliceArgs *a,
                           int64_t *start, int64_t *step, int64_t *out_dims)
{
    int rank = x->rank;
    bool seen[FX_MAX_RANK] = {false};
    if ((a->naxes >= 0 && a->naxes != a->n) || (a->nsteps >= 0 && a->nsteps != a->n))
        return diag_node_error(d, FX_ERR_SHAPE, n,
                               "starts, ends, axes and steps must have the same length");
    for (int i = 0; i < rank; i++) {
        start[i] = 0;
        step[i] = 1;
        out_dims[i] = x->dims[i];
    }
    for (int64_t i = 0; i < a->n; i++) {
        int64_t ax = a->naxes >= 0 ? a->axes[i] : i;
        if (ax < -rank || ax >= rank)
            return diag_node_error(d, FX_ERR_SHAPE, n, "axis %lld is out of range for rank %d",
                                   (long long)ax, rank);
        if (ax < 0)
            ax += rank;
        if (seen[ax])
            return diag_node_error(d, FX_ERR_INVALID, n, "axis %lld is repeated", (long long)ax);
        seen[ax] = true;
        int64_t dim = x->dims[ax], s = a->starts[i], e = a->ends[i];
        int64_t p = a->nsteps >= 0 ? a->steps[i] : 1, len;
        if (p == 0)
            return diag_node_error(d, FX_ERR_INVALID, n, "step of axis %lld is 0", (long long)ax);
        if (s < 0)
            s += dim;
        if (e < 0)
            e += dim;
        if (p > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            /* a step beyond the axis selects at most one element anyway; the
             * clamp keeps |step| representable */
            if (p > dim)
                p = dim > 0 ? dim : 1;
            len = e > s ? (e - s + p - 1) / p : 0;
        } else {
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            if (p < -dim)
                p = dim > 0 ? -dim : -1;
            len = s > e ? (s - e - p - 1) / -p : 0;
        }
        start[ax] = len > 0 ? s : 0;
        step[ax] = p;
        out_dims[ax] = len;
    }
    return FX_OK;
}

static FxStatus slice_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    SliceArgs a = {.naxes = -1, .nsteps = -1};
    int64_t ne = 0, start[FX_MAX_RANK], step[FX_MAX_RANK];
    FxStatus st = layout_check_dtype(c, x, "input 'data'");
    if (st == FX_OK)
        st = const_int_list(c, 1, "starts", false, a.starts, FX_MAX_RANK, &a.n);
    if (st == FX_OK)
        st = const_int_list(c, 2, "ends", false, a.ends, FX_MAX_RANK, &ne);
    if (st == FX_OK && ne != a.n)
        st = diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                             "starts has %lld values, ends %lld", (long long)a.n, (long long)ne);
    if (st == FX_OK && layout_input_type(c, 3))
        st = const_int_list(c, 3, "axes", false, a.axes, FX_MAX_RANK, &a.naxes);
    if (st == FX_OK && layout_input_type(c, 4))
        st = const_int_list(c, 4, "steps", false, a.steps, FX_MAX_RANK, &a.nsteps);
    if (st != FX_OK)
        return st;
    TensorType out = {.dtype = x->dtype, .rank = x->rank};
    if ((st = slice_plan(c->diag, c->node, x, &a, start, step, out.dims)) != FX_OK)
        return st;
    c->out[0] = out;
    return FX_OK;
}

static FxStatus slice_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    SliceArgs a = {.naxes = -1, .nsteps = -1};
    int64_t ne = 0, start[FX_MAX_RANK], step[FX_MAX_RANK], dims[FX_MAX_RANK];
    FxStatus st = eval_int_list(c, 1, "starts", false, a.starts, FX_MAX_RANK, &a.n);
    if (st == FX_OK)
        st = eval_int_list(c, 2, "ends", false, a.ends, FX_MAX_RANK, &ne);
    if (st == FX_OK && ne != a.n)
        st = diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "starts and ends differ in length");
    if (st == FX_OK && layout_eval_input(c, 3))
        st = eval_int_list(c, 3, "axes", false, a.axes, FX_MAX_RANK, &a.naxes);
    if (st == FX_OK && layout_eval_input(c, 4))
        st = eval_int_list(c, 4, "steps", false, a.steps, FX_MAX_RANK, &a.nsteps);
    if (st == FX_OK)
        st = slice_plan(c->diag, c->node, &x->type, &a, start, step, dims);
    if (st == FX_OK)
        st = check_out_dims(c, dims, x->type.rank);
    if (st == FX_OK)
        fxrt_slice(fxrt_dtype_size(x->type.dtype), x->type.rank, x->type.dims, start, step,
                   dims, x->data, c->out[0]->data);
    return st;
}

static FxStatus slice_emit(EmitCtx *c)
{
    const TensorType *x = layout_emit_in_type(c, 0);
    SliceArgs a = {.naxes = -1, .nsteps = -1};
    int64_t ne = 0, start[FX_MAX_RANK], step[FX_MAX_RANK], dims[FX_MAX_RANK];
    FxStatus st = emit_int_list(c, 1, "starts", a.starts, FX_MAX_RANK, &a.n);
    if (st == FX_OK)
        st = emit_int_list(c, 2, "ends", a.ends, FX_MAX_RANK, &ne);
    if (st == FX_OK && ne != a.n)
        st = diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "starts and ends differ in length");
    if (st == FX_OK && layout_emit_in_type(c, 3))
        st = emit_int_list(c, 3, "axes", a.axes, FX_MAX_RANK, &a.naxes);
    if (st == FX_OK && layout_emit_in_type(c, 4))
        st = emit_int_list(c, 4, "steps", a.steps, FX_MAX_RANK, &a.nsteps);
    if (st == FX_OK)
        st = slice_plan(c->diag, c->node, x, &a, start, step, dims);
    if (st != FX_OK || layout_emit_if_empty(c))
        return st;
    emit_int64_array(c, "in_dims", x->dims, x->rank);
    emit_int64_array(c, "starts", start, x->rank);
    emit_int64_array(c, "steps", step, x->rank);
    emit_int64_array(c, "out_dims", dims, x->rank);
    emit_line(c, "fxrt_slice(sizeof(%s), %d, in_dims, starts, steps, out_dims, %s, %s);",
            c_type_name(x->dtype), x->rank, c->in[0], c->out[0]);
    return FX_OK;
}

static const AttrSpec slice_attrs[] = {
    /* opset < 10; become inputs 1-3 */
    {"starts", FX_ATTR_INTS, NULL, false},
    {"ends", FX_ATTR_INTS, NULL, false},
    {"axes", FX_ATTR_INTS, NULL, false},
    {NULL},
};

const OpDef fx_op_Slice = {
    .name = "Slice",
    .min_inputs = 1, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .attrs = slice_attrs,
    .canonicalize = slice_canonicalize,
    .infer = slice_infer,
    .eval = slice_eval,
    .emit = slice_emit,
};

/* --- Expand ----------------------------------------------------------------- */

static FxStatus expand_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    TensorType shape = {.dtype = x->dtype};
    int64_t n = 0;
    FxStatus st = layout_check_dtype(c, x, "input");
    if (st == FX_OK)
        st = const_int_list(c, 1, "shape", false, shape.dims, FX_MAX_RANK, &n);
    if (st != FX_OK)
        return st;
    shape.rank = (int)n;
    for (int i = 0; i < shape.rank; i++)
        if (shape.dims[i] < 0)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "shape[%d] = %lld is negative",
                                   i, (long long)shape.dims[i]);
    TensorType out = {.dtype = x->dtype};
    if ((st = infer_broadcast(c, x, &shape, &out)) != FX_OK)
        return st;
    c->out[0] = out;
    return FX_OK;
}

static FxStatus expand_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    const TensorType *o = &c->out[0]->type;
    int64_t in_dims[FX_MAX_RANK];
    int pad = o->rank - x->type.rank;
    if (pad < 0)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "output rank is too small");
    for (int d = 0; d < o->rank; d++) {
        in_dims[d] = d < pad ? 1 : x->type.dims[d - pad];
        if (in_dims[d] != 1 && in_dims[d] != o->dims[d])
            return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                                   "input does not broadcast to the output");
    }
    fxrt_expand(fxrt_dtype_size(o->dtype), o->rank, in_dims, o->dims, x->data, c->out[0]->data);
    return FX_OK;
}

/* Expand and Tile: the input's dims (left-padded with 1s to the output's
 * rank) and the output's. */
static FxStatus broadcast_emit(EmitCtx *c, const char *kernel)
{
    const TensorType *x = layout_emit_in_type(c, 0), *o = &c->node->out_types[0];
    int64_t in_dims[FX_MAX_RANK];
    int pad = o->rank - x->rank;
    if (pad < 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "output rank is too small");
    if (layout_emit_if_empty(c))
        return FX_OK;
    for (int d = 0; d < o->rank; d++)
        in_dims[d] = d < pad ? 1 : x->dims[d - pad];
    emit_int64_array(c, "in_dims", in_dims, o->rank);
    emit_int64_array(c, "out_dims", o->dims, o->rank);
    emit_line(c, "%s(sizeof(%s), %d, in_dims, out_dims, %s, %s);", kernel, c_type_name(o->dtype),
            o->rank, c->in[0], c->out[0]);
    return FX_OK;
}

static FxStatus expand_emit(EmitCtx *c)
{
    return broadcast_emit(c, "fxrt_expand");
}

const OpDef fx_op_Expand = {
    .name = "Expand",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .attrs = no_attrs,
    .infer = expand_infer,
    .eval = expand_eval,
    .emit = expand_emit,
};

/* --- Tile ------------------------------------------------------------------- */

static FxStatus tile_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    int64_t rep[FX_MAX_RANK], n = 0;
    FxStatus st = layout_check_dtype(c, x, "input");
    if (st == FX_OK)
        st = const_int_list(c, 1, "repeats", false, rep, FX_MAX_RANK, &n);
    if (st != FX_OK)
        return st;
    if (n != x->rank)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "repeats has %lld values for rank %d", (long long)n, x->rank);
    TensorType out = *x;
    for (int d = 0; d < x->rank; d++) {
        if (rep[d] < 0)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "repeats[%d] = %lld is negative", d, (long long)rep[d]);
        if ((st = layout_mul_dim(c, x->dims[d], rep[d], &out.dims[d])) != FX_OK)
            return st;
    }
    c->out[0] = out;
    return FX_OK;
}

static FxStatus tile_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    const TensorType *o = &c->out[0]->type;
    if (o->rank != x->type.rank)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "output rank differs");
    for (int d = 0; d < o->rank; d++)
        if (x->type.dims[d] == 0 ? o->dims[d] != 0 : o->dims[d] % x->type.dims[d] != 0)
            return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                                   "output is not a tiling of the input");
    fxrt_tile(fxrt_dtype_size(o->dtype), o->rank, x->type.dims, o->dims, x->data,
              c->out[0]->data);
    return FX_OK;
}

static FxStatus tile_emit(EmitCtx *c)
{
    return broadcast_emit(c, "fxrt_tile");
}

const OpDef fx_op_Tile = {
    .name = "Tile",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .attrs = no_attrs,
    .infer = tile_infer,
    .eval = tile_eval,
    .emit = tile_emit,
};

/* --- Pad -------------------------------------------------------------------- */

static bool pad_mode(const Node *n, FxrtPadMode *mode)
{
    const char *m = node_attr_string(n, "mode", "constant");
    if (strcmp(m, "constant") == 0)
        *mode = FXRT_PAD_CONSTANT;
    else if (strcmp(m, "reflect") == 0)
        *mode = FXRT_PAD_REFLECT;
    else if (strcmp(m, "edge") == 0)
        *mode = FXRT_PAD_EDGE;
    else if (strcmp(m, "wrap") == 0) /* opset 19 */
        *mode = FXRT_PAD_WRAP;
    else
        return false;
    return true;
}

/* Opsets 2-10: pads and value attributes; 11 made them inputs 1 and 2. */
static FxStatus pad_canonicalize(Node *n, int opset, Diag *d)
{
    FxrtPadMode mode;
    if (!pad_mode(n, &mode))
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "pad mode '%s' is not supported",
                               node_attr_string(n, "mode", ""));
    FxStatus st = refuse_legacy_attr(n, opset, 11, "pads", d);
    if (st == FX_OK)
        st = refuse_legacy_attr(n, opset, 11, "value", d);
    if (st != FX_OK || opset >= 11)
        return st;
    const int64_t *pads;
    int64_t count = node_attr_ints(n, "pads", &pads);
    if (count < 0)
        return diag_node_error(d, FX_ERR_INVALID, n, "required attribute 'pads' is missing");
    if (n->num_args != 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "has %d inputs, expected 1", n->num_args);
    st = node_set_const_input(n, n->num_args, "pads", tensor_new_ints(pads, count, d), d);
    if (st != FX_OK)
        return st;
    node_remove_attr(n, "pads");
    /* value: these opsets pad float tensors only; 0 is what an omitted
     * constant_value means, so only other values become an input */
    float value = node_attr_float(n, "value", 0.0f);
    node_remove_attr(n, "value");
    if (value == 0.0f)
        return FX_OK;
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 0};
    Tensor *v = tensor_new(&t, d);
    if (!v)
        return FX_ERR_NOMEM;
    memcpy(v->data, &value, sizeof value);
    return node_set_const_input(n, n->num_args, "value", v, d);
}

/* Opset 18's optional input 3, axes, names the axes that pads (begins then
 * ends, one per named axis) covers; the other axes are not padded.  Spreads
 * pads over all `rank` axes in place, so the rest of Pad reads one form.
 * naxes < 0: no axes input, pads already covers every axis. */
static FxStatus pad_spread_axes(Diag *d, const Node *n, int rank, int64_t *pads,
                                int64_t *count, const int64_t *axes, int64_t naxes)
{
    if (naxes < 0)
        return FX_OK;
    if (*count != 2 * naxes)
        return diag_node_error(d, FX_ERR_SHAPE, n, "pads has %lld values for %lld axes",
                               (long long)*count, (long long)naxes);
    int64_t spread[2 * FX_MAX_RANK] = {0};
    bool seen[FX_MAX_RANK] = {false};
    for (int64_t i = 0; i < naxes; i++) {
        int64_t ax = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (ax < 0 || ax >= rank)
            return diag_node_error(d, FX_ERR_SHAPE, n, "axis %lld is out of range for rank %d",
                                   (long long)axes[i], rank);
        if (seen[ax])
            return diag_node_error(d, FX_ERR_INVALID, n, "axis %lld is repeated",
                                   (long long)axes[i]);
        seen[ax] = true;
        spread[ax] = pads[i];
        spread[rank + ax] = pads[naxes + i];
    }
    memcpy(pads, spread, 2 * (size_t)rank * sizeof *pads);
    *count = 2 * rank;
    return FX_OK;
}

/* Output dims from the pads list (begins then ends), with overflow checks. */
static FxStatus pad_out_dims(Diag *d, const Node *n, const TensorType *x, const int64_t *pads,
                             int64_t count, FxrtPadMode mode, int64_t *out)
{
    if (count != 2 * x->rank)
        return diag_node_error(d, FX_ERR_SHAPE, n, "pads has %lld values for rank %d",
                               (long long)count, x->rank);
    for (int i = 0; i < x->rank; i++) {
        int64_t b = pads[i], e = pads[x->rank + i];
        const int64_t lim = (int64_t)1 << 40;
        if (b < -lim || b > lim || e < -lim || e > lim)
            return diag_node_error(d, FX_ERR_SHAPE, n, "pads of axis %d are out of range", i);
        out[i] = x->dims[i] + b + e;
        if (out[i] < 0)
            return diag_node_error(d, FX_ERR_SHAPE, n, "pads make axis %d negative (%lld)", i,
                                   (long long)out[i]);
        if (mode != FXRT_PAD_CONSTANT && x->dims[i] == 0 && out[i] > 0)
            return diag_node_error(d, FX_ERR_SHAPE, n,
                                   "cannot pad the empty axis %d in this mode", i);
    }
    return FX_OK;
}

static FxStatus pad_infer(InferCtx *c)
{
    const TensorType *x = c->in[0], *value = layout_input_type(c, 2);
    int64_t pads[2 * FX_MAX_RANK], n = 0;
    FxrtPadMode mode;
    FxStatus st = layout_check_dtype(c, x, "input 'data'");
    if (st != FX_OK)
        return st;
    if (!pad_mode(c->node, &mode))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "pad mode '%s' is not supported",
                               node_attr_string(c->node, "mode", ""));
    if (value && (type_numel(value) != 1 || value->rank > 1 ||
                  !(value->dtype == x->dtype ||
                    (value->dtype == FXRT_DTYPE_FLOAT32 && fxrt_dtype_is_float(x->dtype)))))
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "constant_value must be one %s value", dtype_name(x->dtype));
    int64_t axes[FX_MAX_RANK], naxes = -1;
    if ((st = const_int_list(c, 1, "pads", false, pads, 2 * FX_MAX_RANK, &n)) != FX_OK)
        return st;
    if (layout_input_type(c, 3) &&
        (st = const_int_list(c, 3, "axes", false, axes, FX_MAX_RANK, &naxes)) != FX_OK)
        return st;
    if ((st = pad_spread_axes(c->diag, c->node, x->rank, pads, &n, axes, naxes)) != FX_OK)
        return st;
    TensorType out = {.dtype = x->dtype, .rank = x->rank};
    if ((st = pad_out_dims(c->diag, c->node, x, pads, n, mode, out.dims)) != FX_OK)
        return st;
    c->out[0] = out;
    return FX_OK;
}

/* The constant as one element of the data's type t (zero bytes when value is
 * omitted); a float32 value pads float64 data too. */
static void pad_fill(DType t, const Tensor *value, unsigned char *fill)
{
    if (!value || tensor_numel(value) != 1)
        return;
    if (value->type.dtype == t)
        memcpy(fill, value->data, fxrt_dtype_size(t));
    else if (fxrt_dtype_is_float(t))
        fxrt_store_f64(t, fill, 0, tensor_get_float(value, 0));
    else
        fxrt_store_i64(t, fill, 0, tensor_get_int(value, 0));
}

static FxStatus pad_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0], *value = layout_eval_input(c, 2);
    int64_t pads[2 * FX_MAX_RANK], n = 0, dims[FX_MAX_RANK];
    unsigned char fill[16] = {0}; /* one element, zero bytes by default */
    FxrtPadMode mode = FXRT_PAD_CONSTANT;
    DType t = x->type.dtype;
    pad_mode(c->node, &mode);
    int64_t axes[FX_MAX_RANK], naxes = -1;
    FxStatus st = eval_int_list(c, 1, "pads", false, pads, 2 * FX_MAX_RANK, &n);
    if (st == FX_OK && layout_eval_input(c, 3))
        st = eval_int_list(c, 3, "axes", false, axes, FX_MAX_RANK, &naxes);
    if (st == FX_OK)
        st = pad_spread_axes(c->diag, c->node, x->type.rank, pads, &n, axes, naxes);
    if (st == FX_OK)
        st = pad_out_dims(c->diag, c->node, &x->type, pads, n, mode, dims);
    if (st == FX_OK)
        st = check_out_dims(c, dims, x->type.rank);
    if (st != FX_OK)
        return st;
    pad_fill(t, value, fill);
    fxrt_pad(fxrt_dtype_size(t), x->type.rank, x->type.dims, pads, mode, fill, x->data,
             c->out[0]->data);
    return FX_OK;
}

static const char *pad_mode_name(FxrtPadMode m)
{
    switch (m) {
    case FXRT_PAD_REFLECT: return "FXRT_PAD_REFLECT";
    case FXRT_PAD_EDGE: return "FXRT_PAD_EDGE";
    case FXRT_PAD_WRAP: return "FXRT_PAD_WRAP";
    case FXRT_PAD_CONSTANT:
    default: return "FXRT_PAD_CONSTANT";
    }
}

static FxStatus pad_emit(EmitCtx *c)
{
    const TensorType *x = layout_emit_in_type(c, 0), *vt = layout_emit_in_type(c, 2);
    const Tensor *value = c->num_inputs > 2 ? c->in_value[2] : NULL;
    int64_t pads[2 * FX_MAX_RANK], n = 0, dims[FX_MAX_RANK];
    unsigned char fill[16] = {0};
    FxrtPadMode mode;
    DType t = x->dtype;
    if (!pad_mode(c->node, &mode))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "pad mode '%s' is not supported",
                               node_attr_string(c->node, "mode", ""));
    int64_t axes[FX_MAX_RANK], naxes = -1;
    FxStatus st = emit_int_list(c, 1, "pads", pads, 2 * FX_MAX_RANK, &n);
    if (st == FX_OK && layout_emit_in_type(c, 3))
        st = emit_int_list(c, 3, "axes", axes, FX_MAX_RANK, &naxes);
    if (st == FX_OK)
        st = pad_spread_axes(c->diag, c->node, x->rank, pads, &n, axes, naxes);
    if (st == FX_OK)
        st = pad_out_dims(c->diag, c->node, x, pads, n, mode, dims);
    if (st != FX_OK || layout_emit_if_empty(c))
        return st;
    const char *ctype = c_type_name(t), *vexpr = "&value";
    emit_int64_array(c, "in_dims", x->dims, x->rank);
    emit_int64_array(c, "pads", pads, 2 * x->rank);
    if (mode != FXRT_PAD_CONSTANT || !vt || value) {
        /* a constant (or unused) fill value is baked in */
        if (mode == FXRT_PAD_CONSTANT)
            pad_fill(t, value, fill);
        emit_scalar(c, "value", t, fill);
    } else if (vt->dtype == t) {
        vexpr = c->in[2];
    } else {
        emit_line(c, "const %s value = (%s)(%s)[0];", ctype, ctype, c->in[2]);
    }
    emit_line(c, "fxrt_pad(sizeof(%s), %d, in_dims, pads, %s, %s, %s, %s);", ctype, x->rank,
            pad_mode_name(mode), vexpr, c->in[0], c->out[0]);
    return FX_OK;
}

static const AttrSpec pad_attrs[] = {
    {"mode", FX_ATTR_STRING, "constant", false},
    {"pads", FX_ATTR_INTS, NULL, false},   /* opset < 11; becomes input 1 */
    {"value", FX_ATTR_FLOAT, NULL, false}, /* opset < 11; becomes input 2 */
    {NULL},
};

const OpDef fx_op_Pad = {
    .name = "Pad",
    .min_inputs = 1, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .attrs = pad_attrs,
    .canonicalize = pad_canonicalize,
    .infer = pad_infer,
    .eval = pad_eval,
    .emit = pad_emit,
};
