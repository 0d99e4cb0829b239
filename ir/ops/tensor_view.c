/*
 * tensor_view.c - the view ops: Reshape, Flatten, Squeeze, Unsqueeze,
 * Identity and inference-mode Dropout.
 *
 * A view keeps the bytes of its input and changes only the shape, so these
 * ops are call_method nodes (FX_OPF_VIEW) that codegen aliases; their
 * reference kernels copy the bytes, and they work on every dtype.  The new
 * shape must be known when compiling: Reshape's shape and Squeeze/Unsqueeze's
 * axes must be compile-time constants, otherwise shape inference refuses the
 * node with FX_ERR_UNSUPPORTED naming the input, as FX refuses data-dependent
 * control flow.  Older opset forms (axes and ratio attributes) are rewritten
 * into constant inputs at import.  Dropout is the identity at inference; a
 * training_mode input that is true, or not a constant, is refused.
 */
#include <stdio.h>
#include <string.h>

#include "ops.h"

/* --- helpers shared by the ops of this file -------------------------------- */

static const TensorType *input_type(const InferCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static FxStatus check_dtype(InferCtx *c, const TensorType *t, const char *what)
{
    if (!dtype_is_supported(t->dtype))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "%s has element type %s, which is not supported", what,
                               dtype_name(t->dtype));
    return FX_OK;
}

/* Reads constant input i, a 1-D (or, with allow_scalar, 0-D) int32/int64
 * tensor, naming it `what` in errors. */
static FxStatus const_int_list(InferCtx *c, int i, const char *what, bool allow_scalar,
                               int64_t *vals, int64_t max, int64_t *count)
{
    const TensorType *t = input_type(c, i);
    if (!t)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "input '%s' is missing", what);
    if (t->dtype != FXRT_DTYPE_INT64 && t->dtype != FXRT_DTYPE_INT32)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "input '%s' must be int64, not %s", what, dtype_name(t->dtype));
    if (t->rank != 1 && !(allow_scalar && t->rank == 0))
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "input '%s' must be a 1-D tensor, not rank %d", what, t->rank);
    if (!c->in_value[i]) {
        const Node *src = c->node->args[i];
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "input '%s' (%s) must be a compile-time constant: the output "
                               "shape depends on its data (data-dependent shapes are not "
                               "supported)", what, src ? src->name : "?");
    }
    return infer_const_ints(c, i, vals, max, count);
}

static void copy_bytes(Tensor *dst, const Tensor *src)
{
    size_t n = tensor_nbytes(dst);
    if (n)
        memcpy(dst->data, src->data, n);
}

/* The reference kernel of every view: the same bytes under the output type. */
static FxStatus view_eval(EvalCtx *c)
{
    if (tensor_nbytes(c->out[0]) != tensor_nbytes(c->in[0]))
        return diag_node_error(c->diag, FX_ERR_RUNTIME, (const Node *)c->node,
                               "view changes the byte size");
    copy_bytes(c->out[0], c->in[0]);
    return FX_OK;
}

/* Adds a constant int64 1-D input holding vals to n (canonicalize).  The
 * graph owns the tensor once the get_attr node exists. */
static FxStatus append_const_ints(Graph *g, Node *n, const char *role, const int64_t *vals,
                                  int64_t count, Diag *d)
{
    TensorType t = {.dtype = FXRT_DTYPE_INT64, .rank = 1, .dims = {count}};
    Tensor *v = tensor_new(&t, d);
    if (!v)
        return FX_ERR_NOMEM;
    if (count)
        memcpy(v->data, vals, (size_t)count * sizeof *vals);
    char hint[256];
    snprintf(hint, sizeof hint, "%s_%s", n->name ? n->name : "node", role);
    /* graph_create_constant owns v from here on, freeing it on failure */
    Node *k = graph_create_constant(g, n, hint, v);
    if (!k || node_append_arg(n, k) < 0)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory adding input '%s'", role);
    return FX_OK;
}

/* Moves an INTS attribute that later opsets made input `index` into a
 * constant input (for opset < new_opset), or refuses it in newer models. */
static FxStatus attr_to_input(Graph *g, Node *n, int opset, int new_opset, const char *name,
                              int index, Diag *d)
{
    const int64_t *vals;
    int64_t count = node_attr_ints(n, name, &vals);
    if (count < 0)
        return FX_OK;
    if (opset >= new_opset)
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "attribute '%s' was replaced by an input in opset %d", name,
                               new_opset);
    if (n->num_args != index)
        return diag_node_error(d, FX_ERR_INVALID, n, "has %d inputs, expected %d with "
                               "attribute '%s'", n->num_args, index, name);
    FxStatus st = append_const_ints(g, n, name, vals, count, d);
    if (st == FX_OK)
        node_remove_attr(n, name);
    return st;
}

/* --- Reshape ---------------------------------------------------------------- */

static FxStatus reshape_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    int64_t shape[FX_MAX_RANK], n;
    FxStatus st = check_dtype(c, x, "input 'data'");
    if (st == FX_OK)
        st = const_int_list(c, 1, "shape", false, shape, FX_MAX_RANK, &n);
    if (st != FX_OK)
        return st;
    bool allowzero = node_attr_int(c->node, "allowzero", 0) != 0;
    TensorType out = {.dtype = x->dtype, .rank = (int)n};
    int unknown = -1;
    bool has_zero = false;
    uint64_t known = 1;
    for (int i = 0; i < (int)n; i++) {
        int64_t v = shape[i];
        if (v == 0 && !allowzero) {
            if (i >= x->rank)
                return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                       "shape[%d] = 0 copies a dimension the input (rank %d) "
                                       "does not have", i, x->rank);
            v = x->dims[i];
        } else if (v == -1) {
            if (unknown >= 0)
                return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                       "shape has more than one -1");
            unknown = i;
            continue;
        } else if (v < 0) {
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "shape[%d] = %lld is invalid",
                                   i, (long long)v);
        }
        has_zero |= shape[i] == 0;
        out.dims[i] = v;
        if (!size_mul_ok(known, (uint64_t)v, &known))
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "shape overflows");
    }
    if (allowzero && has_zero && unknown >= 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "with allowzero=1 the shape cannot hold both 0 and -1");
    uint64_t numel = (uint64_t)type_numel(x);
    if (unknown >= 0) {
        if (known == 0 || numel % known != 0)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "cannot infer the -1 in the shape: %llu elements into "
                                   "blocks of %llu", (unsigned long long)numel,
                                   (unsigned long long)known);
        out.dims[unknown] = (int64_t)(numel / known);
    } else if (known != numel) {
        char a[256];
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "cannot reshape %s (%llu elements) to %llu elements",
                               type_format(x, a, sizeof a), (unsigned long long)numel,
                               (unsigned long long)known);
    }
    c->out[0] = out;
    return FX_OK;
}

static const AttrSpec reshape_attrs[] = {
    {"allowzero", FX_ATTR_INT, "0", false},
    {NULL},
};

const OpDef fx_op_Reshape = {
    .name = "Reshape", .method = "reshape",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_VIEW,
    .attrs = reshape_attrs,
    .infer = reshape_infer,
    .eval = view_eval,
};

/* --- Flatten ---------------------------------------------------------------- */

static FxStatus flatten_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    FxStatus st = check_dtype(c, x, "input");
    if (st != FX_OK)
        return st;
    int64_t axis = node_attr_int(c->node, "axis", 1);
    /* unlike most axes, axis == rank is valid here: (numel, 1) */
    if (axis < -x->rank || axis > x->rank)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "axis %lld is out of range for rank %d", (long long)axis, x->rank);
    if (axis < 0)
        axis += x->rank;
    TensorType out = {.dtype = x->dtype, .rank = 2, .dims = {1, 1}};
    for (int i = 0; i < x->rank; i++)
        out.dims[i < axis ? 0 : 1] *= x->dims[i];
    c->out[0] = out;
    return FX_OK;
}

static const AttrSpec flatten_attrs[] = {
    {"axis", FX_ATTR_INT, "1", false},
    {NULL},
};

const OpDef fx_op_Flatten = {
    .name = "Flatten", .method = "flatten",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_VIEW,
    .attrs = flatten_attrs,
    .infer = flatten_infer,
    .eval = view_eval,
};

/* --- Squeeze ---------------------------------------------------------------- */

static FxStatus squeeze_canonicalize(Graph *g, Node *n, int opset, Diag *d)
{
    return attr_to_input(g, n, opset, 13, "axes", 1, d);
}

static FxStatus squeeze_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    int64_t axes[FX_MAX_RANK], n = 0;
    bool drop[FX_MAX_RANK] = {false};
    FxStatus st = check_dtype(c, x, "input 'data'");
    if (st == FX_OK && input_type(c, 1))
        st = const_int_list(c, 1, "axes", false, axes, FX_MAX_RANK, &n);
    if (st != FX_OK)
        return st;
    for (int64_t i = 0; i < n; i++) {
        int a;
        if ((st = infer_axis(c, axes[i], x->rank, &a)) != FX_OK)
            return st;
        if (drop[a])
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "axis %d is repeated", a);
        if (x->dims[a] != 1)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "cannot squeeze axis %d of size %lld", a,
                                   (long long)x->dims[a]);
        drop[a] = true;
    }
    /* no axes (or an empty list): every size-1 axis goes */
    TensorType out = {.dtype = x->dtype};
    for (int a = 0; a < x->rank; a++)
        if (n ? !drop[a] : x->dims[a] != 1)
            out.dims[out.rank++] = x->dims[a];
    c->out[0] = out;
    return FX_OK;
}

static const AttrSpec axes_attrs[] = {
    {"axes", FX_ATTR_INTS, NULL, false}, /* opset < 13; becomes input 1 */
    {NULL},
};

const OpDef fx_op_Squeeze = {
    .name = "Squeeze", .method = "squeeze",
    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_VIEW,
    .attrs = axes_attrs,
    .canonicalize = squeeze_canonicalize,
    .infer = squeeze_infer,
    .eval = view_eval,
};

/* --- Unsqueeze -------------------------------------------------------------- */

static FxStatus unsqueeze_canonicalize(Graph *g, Node *n, int opset, Diag *d)
{
    FxStatus st = attr_to_input(g, n, opset, 13, "axes", 1, d);
    if (st == FX_OK && n->num_args < 2)
        st = diag_node_error(d, FX_ERR_INVALID, n, "needs axes");
    return st;
}

static FxStatus unsqueeze_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    int64_t axes[FX_MAX_RANK], n = 0;
    bool added[FX_MAX_RANK] = {false};
    FxStatus st = check_dtype(c, x, "input 'data'");
    if (st == FX_OK)
        st = const_int_list(c, 1, "axes", false, axes, FX_MAX_RANK, &n);
    if (st != FX_OK)
        return st;
    int rank = x->rank + (int)n;
    if (rank > FX_MAX_RANK)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "output rank %d is beyond the supported %d", rank, FX_MAX_RANK);
    for (int64_t i = 0; i < n; i++) {
        int a;
        if ((st = infer_axis(c, axes[i], rank, &a)) != FX_OK)
            return st;
        if (added[a])
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "axis %d is repeated", a);
        added[a] = true;
    }
    TensorType out = {.dtype = x->dtype, .rank = rank};
    for (int a = 0, k = 0; a < rank; a++)
        out.dims[a] = added[a] ? 1 : x->dims[k++];
    c->out[0] = out;
    return FX_OK;
}

const OpDef fx_op_Unsqueeze = {
    .name = "Unsqueeze", .method = "unsqueeze",
    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_VIEW,
    .attrs = axes_attrs,
    .canonicalize = unsqueeze_canonicalize,
    .infer = unsqueeze_infer,
    .eval = view_eval,
};

/* --- Identity --------------------------------------------------------------- */

static FxStatus identity_infer(InferCtx *c)
{
    FxStatus st = check_dtype(c, c->in[0], "input");
    if (st == FX_OK)
        c->out[0] = *c->in[0];
    return st;
}

static const AttrSpec no_attrs[] = {{NULL}};

const OpDef fx_op_Identity = {
    .name = "Identity", .method = "identity",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_VIEW,
    .attrs = no_attrs,
    .infer = identity_infer,
    .eval = view_eval,
};

/* --- Dropout ---------------------------------------------------------------- */

/* Opsets 7-11 give the ratio as an attribute; 12 made it input 1. */
static FxStatus dropout_canonicalize(Graph *g, Node *n, int opset, Diag *d)
{
    const Attr *a = node_attr(n, "ratio");
    if (!a)
        return FX_OK;
    if (opset >= 12)
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "attribute 'ratio' was replaced by an input in opset 12");
    if (n->num_args != 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "has %d inputs, expected 1", n->num_args);
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 0};
    Tensor *v = tensor_new(&t, d);
    if (!v)
        return FX_ERR_NOMEM;
    float ratio = a->f;
    memcpy(v->data, &ratio, sizeof ratio);
    char hint[256];
    snprintf(hint, sizeof hint, "%s_ratio", n->name ? n->name : "node");
    /* graph_create_constant owns v from here on, freeing it on failure */
    Node *k = graph_create_constant(g, n, hint, v);
    if (!k || node_append_arg(n, k) < 0)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory adding input 'ratio'");
    node_remove_attr(n, "ratio");
    return FX_OK;
}

/* The mask is bool from opset 10 on; before, it had the data's type. */
static DType dropout_mask_dtype(const Node *n, DType data)
{
    return n->graph && n->graph->opset < 10 ? data : FXRT_DTYPE_BOOL;
}

static FxStatus dropout_infer(InferCtx *c)
{
    const TensorType *x = c->in[0], *ratio = input_type(c, 1), *mode = input_type(c, 2);
    FxStatus st = check_dtype(c, x, "input 'data'");
    if (st != FX_OK)
        return st;
    if (ratio && (!fxrt_dtype_is_float(ratio->dtype) || type_numel(ratio) != 1))
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "input 'ratio' must be a float scalar");
    if (mode) {
        const Tensor *v = c->in_value[2];
        if (mode->dtype != FXRT_DTYPE_BOOL || type_numel(mode) != 1)
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                                   "input 'training_mode' must be a bool scalar");
        if (!v)
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                                   "input 'training_mode' (%s) must be a compile-time constant "
                                   "false: fxcc compiles for inference",
                                   c->node->args[2] ? c->node->args[2]->name : "?");
        if (tensor_get_int(v, 0))
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                                   "training_mode is true; fxcc compiles for inference only");
    }
    c->out[0] = *x;
    if (c->num_outputs > 1) {
        c->out[1] = *x;
        c->out[1].dtype = dropout_mask_dtype(c->node, x->dtype);
    }
    return FX_OK;
}

/* Inference: the output is the input and the mask keeps everything. */
static FxStatus dropout_eval(EvalCtx *c)
{
    FxStatus st = view_eval(c);
    if (st != FX_OK || c->num_outputs < 2)
        return st;
    Tensor *mask = c->out[1];
    int64_t n = tensor_numel(mask);
    for (int64_t i = 0; i < n; i++)
        fxrt_store_i64(mask->type.dtype, mask->data, (size_t)i, 1);
    return FX_OK;
}

static const AttrSpec dropout_attrs[] = {
    {"ratio", FX_ATTR_FLOAT, NULL, false}, /* opset < 12; becomes input 1 */
    {"seed", FX_ATTR_INT, NULL, false},    /* training only */
    {NULL},
};

const OpDef fx_op_Dropout = {
    .name = "Dropout", .method = "dropout",
    .min_inputs = 1, .max_inputs = 3, .min_outputs = 1, .max_outputs = 2,
    .flags = FX_OPF_VIEW,
    .attrs = dropout_attrs,
    .canonicalize = dropout_canonicalize,
    .infer = dropout_infer,
    .eval = dropout_eval,
};
