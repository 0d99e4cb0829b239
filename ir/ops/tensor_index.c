/*
 * tensor_index.c - ops driven by index tensors: Gather, GatherElements,
 * GatherND, ScatterElements (and its deprecated opset 9-10 name Scatter),
 * ScatterND and OneHot.
 *
 * Data may be of any dtype the runtime holds; indices are int32 or int64
 * (OneHot takes any numeric indices, as ONNX allows).  Shapes follow from
 * the index tensor's shape, never from its values, so indices need not be
 * constants; OneHot's depth does set a dimension and must be a compile-time
 * constant (FX_ERR_UNSUPPORTED otherwise).  Index values are checked by the
 * runtime kernels at run time: an out-of-range index is FX_ERR_RUNTIME, never
 * a stray read.  Scatter reductions none/add/mul (opset 16) and max/min
 * (opset 18) are implemented.
 */
#include <string.h>

#include "ops.h"

/* --- helpers shared by the ops of this file -------------------------------- */

static FxStatus check_dtype(InferCtx *c, const TensorType *t, const char *what)
{
    if (!dtype_is_supported(t->dtype))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "%s has element type %s, which is not supported", what,
                               dtype_name(t->dtype));
    return FX_OK;
}

static FxStatus check_indices(InferCtx *c, const TensorType *t)
{
    if (t->dtype != FXRT_DTYPE_INT64 && t->dtype != FXRT_DTYPE_INT32)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "indices must be int32 or int64, not %s", dtype_name(t->dtype));
    return FX_OK;
}

static int64_t dims_product(const int64_t *dims, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++)
        p *= dims[d];
    return p;
}

/* Reports the first index the kernel refused.  Index i is checked against
 * dims[first + i % period] (period 1 for Gather-style ops, the tuple length
 * for the ND ops). */
static FxStatus index_error(EvalCtx *c, const Tensor *idx, const int64_t *dims, int first,
                            int64_t period)
{
    int64_t n = tensor_numel(idx);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = tensor_get_int(idx, i), dim = dims[first + i % period];
        if (v < -dim || v >= dim)
            return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                                   "index %lld (element %lld of the indices) is out of range "
                                   "for a dimension of size %lld", (long long)v, (long long)i,
                                   (long long)dim);
    }
    return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "an index is out of range");
}

static FxStatus rank_limit(InferCtx *c, int rank)
{
    if (rank > FX_MAX_RANK)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "output rank %d is beyond the supported %d", rank, FX_MAX_RANK);
    return FX_OK;
}

/* --- code generation helpers ----------------------------------------------- */

/* Zero-element outputs need no code (the code generator declares only the
 * buffers a block names). */
static bool emit_if_empty(EmitCtx *c)
{
    if (type_numel(&c->node->out_types[0]) > 0)
        return false;
    emit_line(c, "/* empty output: nothing to compute */");
    return true;
}

static const char *reduce_name(FxrtScatterReduce r)
{
    switch (r) {
    case FXRT_SCATTER_ADD: return "FXRT_SCATTER_ADD";
    case FXRT_SCATTER_MUL: return "FXRT_SCATTER_MUL";
    case FXRT_SCATTER_MAX: return "FXRT_SCATTER_MAX";
    case FXRT_SCATTER_MIN: return "FXRT_SCATTER_MIN";
    case FXRT_SCATTER_NONE:
    default: return "FXRT_SCATTER_NONE";
    }
}

/* --- Gather ----------------------------------------------------------------- */

static FxStatus gather_infer(InferCtx *c)
{
    const TensorType *x = c->in[0], *idx = c->in[1];
    int axis;
    FxStatus st = check_dtype(c, x, "input 'data'");
    if (st == FX_OK)
        st = check_indices(c, idx);
    if (st != FX_OK)
        return st;
    if (x->rank == 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "cannot gather from a scalar");
    if ((st = infer_axis(c, node_attr_int(c->node, "axis", 0), x->rank, &axis)) != FX_OK ||
        (st = rank_limit(c, x->rank + idx->rank - 1)) != FX_OK)
        return st;
    TensorType out = {.dtype = x->dtype};
    for (int d = 0; d < axis; d++)
        out.dims[out.rank++] = x->dims[d];
    for (int d = 0; d < idx->rank; d++)
        out.dims[out.rank++] = idx->dims[d];
    for (int d = axis + 1; d < x->rank; d++)
        out.dims[out.rank++] = x->dims[d];
    c->out[0] = out;
    return FX_OK;
}

static FxStatus gather_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0], *idx = c->in[1];
    const TensorType *t = &x->type;
    int axis = (int)node_attr_int(c->node, "axis", 0);
    if (axis < 0)
        axis += t->rank;
    if (fxrt_gather(fxrt_dtype_size(t->dtype), dims_product(t->dims, 0, axis), t->dims[axis],
                    dims_product(t->dims, axis + 1, t->rank), x->data, idx->type.dtype,
                    idx->data, tensor_numel(idx), c->out[0]->data) != FXRT_INDEX_OK)
        return index_error(c, idx, t->dims, axis, 1);
    return FX_OK;
}

/* Index kernels check every index; a bad one fails the generated run. */
static FxStatus gather_emit(EmitCtx *c)
{
    const TensorType *t = node_input_type(c->node, 0), *idx = node_input_type(c->node, 1);
    int axis = (int)node_attr_int(c->node, "axis", 0);
    if (axis < 0)
        axis += t->rank;
    if (emit_if_empty(c))
        return FX_OK;
    emit_line(c,
              "if (fxrt_gather(sizeof(%s), /*outer=*/%lld, /*axis_dim=*/%lld, /*inner=*/%lld, %s, "
              "%s, %s, /*num_indices=*/%lld, %s) != 0)",
              c_type_name(t->dtype), (long long)dims_product(t->dims, 0, axis),
              (long long)t->dims[axis], (long long)dims_product(t->dims, axis + 1, t->rank),
              c->in[0], c_dtype_enum(idx->dtype), c->in[1], (long long)type_numel(idx), c->out[0]);
    emit_line(c, "    return 1;");
    return FX_OK;
}

static const AttrSpec axis0_attrs[] = {
    {"axis", FX_ATTR_INT, "0", false},
    {NULL},
};

const OpDef fx_op_Gather = {
    .name = "Gather",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .attrs = axis0_attrs,
    .infer = gather_infer,
    .eval = gather_eval,
    .emit = gather_emit,
};

/* --- GatherElements --------------------------------------------------------- */

/* indices (and updates) have data's rank and fit inside it except along the
 * axis, so every position they name exists once the index is checked. */
static FxStatus check_elements_shape(InferCtx *c, const TensorType *x, const TensorType *idx,
                                     int *axis)
{
    FxStatus st;
    if (x->rank == 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "data must not be a scalar");
    if (idx->rank != x->rank)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "indices have rank %d, data rank %d", idx->rank, x->rank);
    if ((st = infer_axis(c, node_attr_int(c->node, "axis", 0), x->rank, axis)) != FX_OK)
        return st;
    for (int d = 0; d < x->rank; d++)
        if (d != *axis && idx->dims[d] > x->dims[d])
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "indices dimension %d (%lld) exceeds the data's (%lld)", d,
                                   (long long)idx->dims[d], (long long)x->dims[d]);
    return FX_OK;
}

static FxStatus gather_elements_infer(InferCtx *c)
{
    const TensorType *x = c->in[0], *idx = c->in[1];
    int axis;
    FxStatus st = check_dtype(c, x, "input 'data'");
    if (st == FX_OK)
        st = check_indices(c, idx);
    if (st == FX_OK)
        st = check_elements_shape(c, x, idx, &axis);
    if (st != FX_OK)
        return st;
    c->out[0] = *idx;
    c->out[0].dtype = x->dtype;
    return FX_OK;
}

static FxStatus gather_elements_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0], *idx = c->in[1];
    int axis = (int)node_attr_int(c->node, "axis", 0);
    if (axis < 0)
        axis += x->type.rank;
    if (fxrt_gather_elements(fxrt_dtype_size(x->type.dtype), x->type.rank, x->type.dims,
                             idx->type.dims, axis, x->data, idx->type.dtype, idx->data,
                             c->out[0]->data) != FXRT_INDEX_OK)
        return index_error(c, idx, x->type.dims, axis, 1);
    return FX_OK;
}

static FxStatus gather_elements_emit(EmitCtx *c)
{
    const TensorType *x = node_input_type(c->node, 0), *idx = node_input_type(c->node, 1);
    int axis = (int)node_attr_int(c->node, "axis", 0);
    if (axis < 0)
        axis += x->rank;
    if (emit_if_empty(c))
        return FX_OK;
    emit_int64_array(c, "data_dims", x->dims, x->rank);
    emit_int64_array(c, "index_dims", idx->dims, idx->rank);
    emit_line(c,
              "if (fxrt_gather_elements(sizeof(%s), /*rank=*/%d, data_dims, index_dims, "
              "/*axis=*/%d, %s, %s, %s, "
              "%s) != 0)",
              c_type_name(x->dtype), x->rank, axis, c->in[0], c_dtype_enum(idx->dtype), c->in[1],
              c->out[0]);
    emit_line(c, "    return 1;");
    return FX_OK;
}

const OpDef fx_op_GatherElements = {
    .name = "GatherElements",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .attrs = axis0_attrs,
    .infer = gather_elements_infer,
    .eval = gather_elements_eval,
    .emit = gather_elements_emit,
};

/* --- GatherND --------------------------------------------------------------- */

static FxStatus gather_nd_infer(InferCtx *c)
{
    const TensorType *x = c->in[0], *idx = c->in[1];
    int64_t b = node_attr_int(c->node, "batch_dims", 0);
    FxStatus st = check_dtype(c, x, "input 'data'");
    if (st == FX_OK)
        st = check_indices(c, idx);
    if (st != FX_OK)
        return st;
    int r = x->rank, q = idx->rank;
    if (r < 1 || q < 1)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "data and indices must have rank >= 1");
    if (b < 0 || b >= (r < q ? r : q))
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "batch_dims %lld is out of range", (long long)b);
    int64_t k = idx->dims[q - 1];
    if (k < 1 || k > r - b)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "index tuples of length %lld do not fit data of rank %d with "
                               "%lld batch dims", (long long)k, r, (long long)b);
    for (int d = 0; d < b; d++)
        if (idx->dims[d] != x->dims[d])
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "batch dimension %d differs: %lld vs %lld", d,
                                   (long long)idx->dims[d], (long long)x->dims[d]);
    if ((st = rank_limit(c, q - 1 + r - (int)b - (int)k)) != FX_OK)
        return st;
    TensorType out = {.dtype = x->dtype};
    for (int d = 0; d < q - 1; d++)
        out.dims[out.rank++] = idx->dims[d];
    for (int d = (int)(b + k); d < r; d++)
        out.dims[out.rank++] = x->dims[d];
    c->out[0] = out;
    return FX_OK;
}

static FxStatus gather_nd_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0], *idx = c->in[1];
    int b = (int)node_attr_int(c->node, "batch_dims", 0), q = idx->type.rank;
    int64_t k = idx->type.dims[q - 1];
    if (fxrt_gather_nd(fxrt_dtype_size(x->type.dtype), x->type.rank, x->type.dims, b, k,
                       dims_product(idx->type.dims, b, q - 1), x->data, idx->type.dtype,
                       idx->data, c->out[0]->data) != FXRT_INDEX_OK)
        return index_error(c, idx, x->type.dims, b, k);
    return FX_OK;
}

static FxStatus gather_nd_emit(EmitCtx *c)
{
    const TensorType *x = node_input_type(c->node, 0), *idx = node_input_type(c->node, 1);
    int b = (int)node_attr_int(c->node, "batch_dims", 0), q = idx->rank;
    if (emit_if_empty(c))
        return FX_OK;
    emit_int64_array(c, "data_dims", x->dims, x->rank);
    emit_line(c,
              "if (fxrt_gather_nd(sizeof(%s), /*data_rank=*/%d, data_dims, /*batch_dims=*/%d, "
              "/*k=*/%lld, /*tuples=*/%lld, %s, %s, %s, %s) "
              "!= 0)",
              c_type_name(x->dtype), x->rank, b, (long long)idx->dims[q - 1],
              (long long)dims_product(idx->dims, b, q - 1), c->in[0], c_dtype_enum(idx->dtype),
              c->in[1], c->out[0]);
    emit_line(c, "    return 1;");
    return FX_OK;
}

static const AttrSpec gather_nd_attrs[] = {
    {"batch_dims", FX_ATTR_INT, "0", false},
    {NULL},
};

const OpDef fx_op_GatherND = {
    .name = "GatherND",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .attrs = gather_nd_attrs,
    .infer = gather_nd_infer,
    .eval = gather_nd_eval,
    .emit = gather_nd_emit,
};

/* --- ScatterElements / Scatter ---------------------------------------------- */

static bool scatter_reduction(const Node *n, FxrtScatterReduce *r)
{
    static const struct {
        const char *name;
        FxrtScatterReduce r;
    } modes[] = {{"none", FXRT_SCATTER_NONE}, {"add", FXRT_SCATTER_ADD},
                 {"mul", FXRT_SCATTER_MUL},   {"max", FXRT_SCATTER_MAX},
                 {"min", FXRT_SCATTER_MIN}};
    const char *s = node_attr_string(n, "reduction", "none");
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(s, modes[i].name) == 0) {
            *r = modes[i].r;
            return true;
        }
    return false;
}

static FxStatus check_reduction(InferCtx *c, FxrtScatterReduce *r)
{
    if (!scatter_reduction(c->node, r))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "reduction '%s' is not supported",
                               node_attr_string(c->node, "reduction", ""));
    return FX_OK;
}

static FxStatus check_updates(InferCtx *c, const TensorType *x, const TensorType *upd)
{
    if (upd->dtype != x->dtype)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "updates are %s, data is %s", dtype_name(upd->dtype),
                               dtype_name(x->dtype));
    return FX_OK;
}

static FxStatus scatter_elements_infer(InferCtx *c)
{
    const TensorType *x = c->in[0], *idx = c->in[1], *upd = c->in[2];
    FxrtScatterReduce r;
    int axis;
    FxStatus st = check_dtype(c, x, "input 'data'");
    if (st == FX_OK)
        st = check_indices(c, idx);
    if (st == FX_OK)
        st = check_updates(c, x, upd);
    if (st == FX_OK)
        st = check_reduction(c, &r);
    if (st == FX_OK)
        st = check_elements_shape(c, x, idx, &axis);
    if (st != FX_OK)
        return st;
    TensorType iu = *upd;
    iu.dtype = idx->dtype;
    if (!type_equal(&iu, idx))
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "updates and indices must have the same shape");
    c->out[0] = *x;
    return FX_OK;
}

static FxStatus scatter_elements_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0], *idx = c->in[1], *upd = c->in[2];
    FxrtScatterReduce r = FXRT_SCATTER_NONE;
    int axis = (int)node_attr_int(c->node, "axis", 0);
    if (axis < 0)
        axis += x->type.rank;
    scatter_reduction(c->node, &r);
    if (fxrt_scatter_elements(x->type.dtype, x->type.rank, x->type.dims, idx->type.dims, axis, r,
                              x->data, idx->type.dtype, idx->data, upd->data,
                              c->out[0]->data) != FXRT_INDEX_OK)
        return index_error(c, idx, x->type.dims, axis, 1);
    return FX_OK;
}

static FxStatus scatter_elements_emit(EmitCtx *c)
{
    const TensorType *x = node_input_type(c->node, 0), *idx = node_input_type(c->node, 1);
    FxrtScatterReduce r = FXRT_SCATTER_NONE;
    int axis = (int)node_attr_int(c->node, "axis", 0);
    if (axis < 0)
        axis += x->rank;
    scatter_reduction(c->node, &r);
    if (emit_if_empty(c))
        return FX_OK;
    emit_int64_array(c, "data_dims", x->dims, x->rank);
    emit_int64_array(c, "index_dims", idx->dims, idx->rank);
    emit_line(c,
              "if (fxrt_scatter_elements(%s, /*rank=*/%d, data_dims, index_dims, /*axis=*/%d, %s, "
              "%s, %s, %s, %s, "
              "%s) != 0)",
              c_dtype_enum(x->dtype), x->rank, axis, reduce_name(r), c->in[0],
              c_dtype_enum(idx->dtype), c->in[1], c->in[2], c->out[0]);
    emit_line(c, "    return 1;");
    return FX_OK;
}

static const AttrSpec scatter_elements_attrs[] = {
    {"axis", FX_ATTR_INT, "0", false},
    {"reduction", FX_ATTR_STRING, "none", false},
    {NULL},
};

const OpDef fx_op_ScatterElements = {
    .name = "ScatterElements",
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = scatter_elements_attrs,
    .infer = scatter_elements_infer,
    .eval = scatter_elements_eval,
    .emit = scatter_elements_emit,
};

/* Scatter (opsets 9-10) is ScatterElements without reduction; it keeps its
 * own entry because an op kind cannot change at import. */
const OpDef fx_op_Scatter = {
    .name = "Scatter",
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = axis0_attrs,
    .infer = scatter_elements_infer,
    .eval = scatter_elements_eval,
    .emit = scatter_elements_emit,
};

/* --- ScatterND -------------------------------------------------------------- */

static FxStatus scatter_nd_infer(InferCtx *c)
{
    const TensorType *x = c->in[0], *idx = c->in[1], *upd = c->in[2];
    FxrtScatterReduce r;
    FxStatus st = check_dtype(c, x, "input 'data'");
    if (st == FX_OK)
        st = check_indices(c, idx);
    if (st == FX_OK)
        st = check_updates(c, x, upd);
    if (st == FX_OK)
        st = check_reduction(c, &r);
    if (st != FX_OK)
        return st;
    int rank = x->rank, q = idx->rank;
    if (rank < 1 || q < 1)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "data and indices must have rank >= 1");
    int64_t k = idx->dims[q - 1];
    if (k < 1 || k > rank)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "index tuples of length %lld do not fit data of rank %d",
                               (long long)k, rank);
    /* updates = indices.shape[:-1] + data.shape[k:] */
    bool ok = upd->rank == q - 1 + rank - (int)k;
    for (int d = 0; ok && d < q - 1; d++)
        ok = upd->dims[d] == idx->dims[d];
    for (int d = (int)k; ok && d < rank; d++)
        ok = upd->dims[q - 1 + d - k] == x->dims[d];
    if (!ok)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "updates must have shape indices.shape[:-1] + data.shape[k:]");
    c->out[0] = *x;
    return FX_OK;
}

static FxStatus scatter_nd_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0], *idx = c->in[1], *upd = c->in[2];
    FxrtScatterReduce r = FXRT_SCATTER_NONE;
    int q = idx->type.rank;
    scatter_reduction(c->node, &r);
    if (fxrt_scatter_nd(x->type.dtype, x->type.rank, x->type.dims, idx->type.dims[q - 1],
                        dims_product(idx->type.dims, 0, q - 1), r, x->data, idx->type.dtype,
                        idx->data, upd->data, c->out[0]->data) != FXRT_INDEX_OK)
        return index_error(c, idx, x->type.dims, 0, idx->type.dims[q - 1]);
    return FX_OK;
}

static FxStatus scatter_nd_emit(EmitCtx *c)
{
    const TensorType *x = node_input_type(c->node, 0), *idx = node_input_type(c->node, 1);
    FxrtScatterReduce r = FXRT_SCATTER_NONE;
    int q = idx->rank;
    scatter_reduction(c->node, &r);
    if (emit_if_empty(c))
        return FX_OK;
    emit_int64_array(c, "data_dims", x->dims, x->rank);
    emit_line(c,
              "if (fxrt_scatter_nd(%s, /*data_rank=*/%d, data_dims, /*k=*/%lld, /*tuples=*/%lld, "
              "%s, %s, %s, %s, %s, %s) != 0)",
              c_dtype_enum(x->dtype), x->rank, (long long)idx->dims[q - 1],
              (long long)dims_product(idx->dims, 0, q - 1), reduce_name(r), c->in[0],
              c_dtype_enum(idx->dtype), c->in[1], c->in[2], c->out[0]);
    emit_line(c, "    return 1;");
    return FX_OK;
}

static const AttrSpec scatter_nd_attrs[] = {
    {"reduction", FX_ATTR_STRING, "none", false},
    {NULL},
};

const OpDef fx_op_ScatterND = {
    .name = "ScatterND",
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = scatter_nd_attrs,
    .infer = scatter_nd_infer,
    .eval = scatter_nd_eval,
    .emit = scatter_nd_emit,
};

/* --- OneHot ----------------------------------------------------------------- */

static FxStatus onehot_infer(InferCtx *c)
{
    const TensorType *idx = c->in[0], *depth = c->in[1], *values = c->in[2];
    const Tensor *dv = c->in_value[1];
    int axis;
    FxStatus st = check_dtype(c, idx, "input 'indices'");
    if (st == FX_OK)
        st = check_dtype(c, values, "input 'values'");
    if (st == FX_OK)
        st = check_dtype(c, depth, "input 'depth'");
    if (st != FX_OK)
        return st;
    if (idx->dtype == FXRT_DTYPE_BOOL || depth->dtype == FXRT_DTYPE_BOOL)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "indices and depth must be numbers");
    if (type_numel(depth) != 1 || depth->rank > 1)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "depth must be one value");
    if (values->rank != 1 || values->dims[0] != 2)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "values must be [off_value, on_value]");
    if (!dv)
        return infer_not_constant(c, 1, "depth", NULL);
    double df = tensor_get_float(dv, 0);
    if (!(df >= 1.0 && df <= (double)((int64_t)1 << 40)))
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "depth %g is invalid", df);
    int rank = idx->rank + 1;
    if ((st = rank_limit(c, rank)) != FX_OK)
        return st;
    if ((st = infer_axis(c, node_attr_int(c->node, "axis", -1), rank, &axis)) != FX_OK)
        return st;
    TensorType out = {.dtype = values->dtype, .rank = rank};
    for (int d = 0, k = 0; d < rank; d++)
        out.dims[d] = d == axis ? (int64_t)df : idx->dims[k++];
    c->out[0] = out;
    return FX_OK;
}

static FxStatus onehot_eval(EvalCtx *c)
{
    const Tensor *idx = c->in[0], *values = c->in[2];
    const TensorType *o = &c->out[0]->type;
    int axis = (int)node_attr_int(c->node, "axis", -1);
    if (axis < 0)
        axis += o->rank;
    size_t es = fxrt_dtype_size(o->dtype);
    fxrt_onehot(es, idx->type.dtype, idx->data, dims_product(idx->type.dims, 0, axis),
                o->dims[axis], dims_product(idx->type.dims, axis, idx->type.rank), values->data,
                (const char *)values->data + es, c->out[0]->data);
    return FX_OK;
}

/* values holds [off, on]; depth is baked in (it sets the output shape). */
static FxStatus onehot_emit(EmitCtx *c)
{
    const TensorType *idx = node_input_type(c->node, 0), *o = &c->node->out_types[0];
    int axis = (int)node_attr_int(c->node, "axis", -1);
    if (axis < 0)
        axis += o->rank;
    if (emit_if_empty(c))
        return FX_OK;
    emit_line(c,
              "fxrt_onehot(sizeof(%s), %s, %s, /*outer=*/%lld, /*depth=*/%lld, /*inner=*/%lld, %s, "
              "(%s) + 1, %s);",
              c_type_name(o->dtype), c_dtype_enum(idx->dtype), c->in[0],
              (long long)dims_product(idx->dims, 0, axis), (long long)o->dims[axis],
              (long long)dims_product(idx->dims, axis, idx->rank), c->in[2], c->in[2], c->out[0]);
    return FX_OK;
}

static const AttrSpec onehot_attrs[] = {
    {"axis", FX_ATTR_INT, "-1", false},
    {NULL},
};

const OpDef fx_op_OneHot = {
    .name = "OneHot",
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = onehot_attrs,
    .infer = onehot_infer,
    .eval = onehot_eval,
    .emit = onehot_emit,
};
