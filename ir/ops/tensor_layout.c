/*
 * tensor_layout.c - ops that move bytes into a new layout whatever the
 * values: Transpose, Concat, DepthToSpace, SpaceToDepth and Trilu, and the
 * helpers every layout op shares (ops.h; tensor_slice.c holds the layout
 * ops whose shape comes from a constant list input).
 *
 * All of them copy whole elements, so they accept every dtype the runtime
 * holds (float16 and strings are refused in infer) and call the byte-moving
 * kernels of runtime/fxrt_tensor.h.  Eval recomputes what it needs from its
 * inputs and checks it against the inferred output type, so a mismatch is
 * an error, never an out-of-bounds copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* --- helpers shared by the layout ops (tensor_slice.c too) ------------------ */

const TensorType *layout_input_type(const InferCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

const Tensor *layout_eval_input(const EvalCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

FxStatus layout_check_dtype(InferCtx *c, const TensorType *t, const char *what)
{
    if (!dtype_is_supported(t->dtype))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "%s has element type %s, which is not supported", what,
                               dtype_name(t->dtype));
    return FX_OK;
}

const TensorType *layout_emit_in_type(const EmitCtx *c, int i)
{
    return i < c->num_inputs && c->in[i] ? node_input_type(c->node, i) : NULL;
}

bool layout_emit_if_empty(EmitCtx *c)
{
    for (int k = 0; k < c->num_outputs; k++)
        if (type_numel(&c->node->out_types[k]) > 0)
            return false;
    emit_line(c, "/* empty output: nothing to compute */");
    return true;
}

int64_t layout_dims_product(const int64_t *dims, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++)
        p *= dims[d];
    return p;
}

FxStatus layout_mul_dim(InferCtx *c, int64_t a, int64_t b, int64_t *out)
{
    uint64_t r;
    if (a < 0 || b < 0 || !size_mul_ok((uint64_t)a, (uint64_t)b, &r) || r > INT64_MAX / 2)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "dimension %lld x %lld overflows",
                               (long long)a, (long long)b);
    *out = (int64_t)r;
    return FX_OK;
}

/* --- Transpose -------------------------------------------------------------- */

static FxStatus transpose_perm(const Node *n, int rank, int64_t *perm, Diag *d)
{
    const int64_t *p;
    int64_t count = node_attr_ints(n, "perm", &p);
    bool seen[FX_MAX_RANK] = {false};
    if (count < 0) {
        for (int i = 0; i < rank; i++)
            perm[i] = rank - 1 - i; /* default: reverse the axes */
        return FX_OK;
    }
    if (count != rank)
        return diag_node_error(d, FX_ERR_SHAPE, n, "perm has %lld entries for rank %d",
                               (long long)count, rank);
    for (int i = 0; i < rank; i++) {
        if (p[i] < 0 || p[i] >= rank || seen[p[i]])
            return diag_node_error(d, FX_ERR_INVALID, n, "perm is not a permutation of 0..%d",
                                   rank - 1);
        seen[p[i]] = true;
        perm[i] = p[i];
    }
    return FX_OK;
}

static FxStatus transpose_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    int64_t perm[FX_MAX_RANK];
    FxStatus st = layout_check_dtype(c, x, "input");
    if (st == FX_OK)
        st = transpose_perm(c->node, x->rank, perm, c->diag);
    if (st != FX_OK)
        return st;
    TensorType out = {.dtype = x->dtype, .rank = x->rank};
    for (int i = 0; i < x->rank; i++)
        out.dims[i] = x->dims[perm[i]];
    c->out[0] = out;
    return FX_OK;
}

static FxStatus transpose_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    int64_t perm[FX_MAX_RANK];
    FxStatus st = transpose_perm(c->node, x->type.rank, perm, c->diag);
    if (st != FX_OK)
        return st;
    if (tensor_numel(x) == 0)
        return FX_OK;
    if (x->type.dtype == FXRT_DTYPE_FLOAT32)
        fxrt_transpose_f32(x->type.rank, x->type.dims, perm, x->data, c->out[0]->data);
    else
        fxrt_transpose(fxrt_dtype_size(x->type.dtype), x->type.rank, x->type.dims, perm,
                       x->data, c->out[0]->data);
    return FX_OK;
}

/* Identity permutations (after size-1 axes, which move nothing) are a copy. */
static bool perm_is_identity(const TensorType *x, const int64_t *perm)
{
    int last = -1;
    for (int i = 0; i < x->rank; i++) {
        if (x->dims[perm[i]] == 1)
            continue;
        if (perm[i] < last)
            return false;
        last = (int)perm[i];
    }
    return true;
}

static FxStatus transpose_emit(EmitCtx *c)
{
    const TensorType *x = layout_emit_in_type(c, 0);
    int64_t perm[FX_MAX_RANK];
    FxStatus st = transpose_perm(c->node, x->rank, perm, c->diag);
    if (st != FX_OK || layout_emit_if_empty(c))
        return st;
    if (perm_is_identity(x, perm)) {
        emit_line(c, "memcpy(%s, %s, %lld);", c->out[0], c->in[0],
                (long long)((size_t)type_numel(x) * fxrt_dtype_size(x->dtype)));
        return FX_OK;
    }
    emit_int64_array(c, "dims", x->dims, x->rank);
    emit_int64_array(c, "perm", perm, x->rank);
    if (x->dtype == FXRT_DTYPE_FLOAT32)
        emit_line(c, "fxrt_transpose_f32(%d, dims, perm, %s, %s);", x->rank, c->in[0], c->out[0]);
    else
        emit_line(c, "fxrt_transpose(sizeof(%s), %d, dims, perm, %s, %s);", c_type_name(x->dtype),
                x->rank, c->in[0], c->out[0]);
    return FX_OK;
}

static const AttrSpec transpose_attrs[] = {
    {"perm", FX_ATTR_INTS, NULL, false}, /* absent: reverse the axes */
    {NULL},
};

const OpDef fx_op_Transpose = {
    .name = "Transpose",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = transpose_attrs,
    .infer = transpose_infer,
    .eval = transpose_eval,
    .emit = transpose_emit,
};

/* --- Concat ----------------------------------------------------------------- */

static FxStatus concat_infer(InferCtx *c)
{
    const TensorType *first = c->in[0];
    FxStatus st;
    int axis;
    if (c->num_inputs < 1 || !first)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "needs at least one input");
    if ((st = layout_check_dtype(c, first, "input 0")) != FX_OK)
        return st;
    if (first->rank == 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "cannot concatenate scalars");
    if ((st = infer_axis(c, node_attr_int(c->node, "axis", 0), first->rank, &axis)) != FX_OK)
        return st;
    TensorType out = *first;
    out.dims[axis] = 0;
    for (int i = 0; i < c->num_inputs; i++) {
        const TensorType *t = c->in[i];
        if (!t)
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "input %d is missing", i);
        if (t->dtype != first->dtype || t->rank != first->rank)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "input %d is %s of rank %d, input 0 is %s of rank %d", i,
                                   dtype_name(t->dtype), t->rank, dtype_name(first->dtype),
                                   first->rank);
        for (int d = 0; d < t->rank; d++)
            if (d != axis && t->dims[d] != first->dims[d])
                return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                       "input %d has dimension %d = %lld, input 0 has %lld", i,
                                       d, (long long)t->dims[d], (long long)first->dims[d]);
        out.dims[axis] += t->dims[axis]; /* each input exists, so no overflow */
    }
    c->out[0] = out;
    return FX_OK;
}

static FxStatus concat_eval(EvalCtx *c)
{
    const TensorType *o = &c->out[0]->type;
    int axis = (int)node_attr_int(c->node, "axis", 0);
    if (axis < 0)
        axis += o->rank;
    int64_t *axis_dims = fx_alloc_array((size_t)c->num_inputs, sizeof *axis_dims);
    const void **ins = fx_alloc_array((size_t)c->num_inputs, sizeof *ins);
    if (!axis_dims || !ins) {
        free(axis_dims);
        free(ins);
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    }
    int64_t total = 0;
    for (int i = 0; i < c->num_inputs; i++) {
        axis_dims[i] = c->in[i]->type.dims[axis];
        ins[i] = c->in[i]->data;
        total += axis_dims[i];
    }
    FxStatus st = FX_OK;
    if (total != o->dims[axis])
        st = diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                             "inputs disagree with the inferred output shape");
    else if (type_numel(o) > 0)
        fxrt_concat(fxrt_dtype_size(o->dtype), layout_dims_product(o->dims, 0, axis),
                    layout_dims_product(o->dims, axis + 1, o->rank), c->num_inputs, axis_dims, ins,
                    c->out[0]->data);
    free(axis_dims);
    free(ins);
    return st;
}

/* Writes `<decl>[n] = {e0, e1, ...};` (Concat's inputs, Split's outputs). */
void layout_emit_pointer_list(EmitCtx *c, const char *decl, const char *const *exprs, int n)
{
    if (n <= 4) {
        char buf[1024];
        size_t len = 0;
        for (int i = 0; i < n && len < sizeof buf; i++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? ", " : "", exprs[i]);
        if (len < sizeof buf) {
            emit_line(c, "%s[%d] = {%s};", decl, n, buf);
            return;
        }
    }
    emit_line(c, "%s[%d] = {", decl, n);
    for (int i = 0; i < n; i += 4) {
        char buf[1024];
        size_t len = 0;
        for (int j = i; j < n && j < i + 4 && len < sizeof buf; j++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s,", j > i ? " " : "",
                                    exprs[j]);
        if (len < sizeof buf) {
            emit_line(c, "    %s", buf);
        } else { /* very long expressions: one a line */
            for (int j = i; j < n && j < i + 4; j++)
                emit_line(c, "    %s,", exprs[j]);
        }
    }
    emit_line(c, "};");
}

static FxStatus concat_emit(EmitCtx *c)
{
    const TensorType *o = &c->node->out_types[0];
    int axis = (int)node_attr_int(c->node, "axis", 0);
    if (axis < 0)
        axis += o->rank;
    if (layout_emit_if_empty(c))
        return FX_OK;
    int k = c->num_inputs;
    int64_t *axis_dims = fx_alloc_array((size_t)k, sizeof *axis_dims);
    if (!axis_dims)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    for (int i = 0; i < k; i++)
        axis_dims[i] = layout_emit_in_type(c, i)->dims[axis];
    emit_int64_array(c, "axis_dims", axis_dims, k);
    layout_emit_pointer_list(c, "const void *const ins", c->in, k);
    emit_line(c,
              "fxrt_concat(sizeof(%s), /*outer=*/%lld, /*inner=*/%lld, /*num_inputs=*/%d, "
              "axis_dims, ins, %s);",
              c_type_name(o->dtype), (long long)layout_dims_product(o->dims, 0, axis),
              (long long)layout_dims_product(o->dims, axis + 1, o->rank), k, c->out[0]);
    free(axis_dims);
    return FX_OK;
}

static const AttrSpec concat_attrs[] = {
    {"axis", FX_ATTR_INT, NULL, true},
    {NULL},
};

const OpDef fx_op_Concat = {
    .name = "Concat",
    .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
    .attrs = concat_attrs,
    .infer = concat_infer,
    .eval = concat_eval,
    .emit = concat_emit,
};

/* --- DepthToSpace and SpaceToDepth ------------------------------------------ */

static FxStatus blocksize(InferCtx *c, int64_t limit, int64_t *b)
{
    *b = node_attr_int(c->node, "blocksize", 0);
    if (*b <= 0 || *b > limit)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "blocksize %lld does not fit the input", (long long)*b);
    return FX_OK;
}

static FxStatus depth_to_space_canonicalize(Node *n, int opset, Diag *d)
{
    (void)opset;
    const char *mode = node_attr_string(n, "mode", "DCR");
    if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "mode '%s' is not supported", mode);
    return FX_OK;
}

static FxStatus depth_to_space_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    int64_t b;
    FxStatus st = layout_check_dtype(c, x, "input");
    if (st != FX_OK)
        return st;
    if (x->rank != 4)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "input must be NCHW, not rank %d",
                               x->rank);
    if ((st = depth_to_space_canonicalize(c->node, 0, c->diag)) != FX_OK)
        return st;
    if ((st = blocksize(c, x->dims[1] > 0 ? x->dims[1] : 1, &b)) != FX_OK)
        return st;
    int64_t bb = 1;
    TensorType out = *x;
    if ((st = layout_mul_dim(c, b, b, &bb)) != FX_OK)
        return st;
    if (x->dims[1] % bb != 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "%lld channels do not divide by blocksize^2 = %lld",
                               (long long)x->dims[1], (long long)bb);
    out.dims[1] = x->dims[1] / bb;
    if ((st = layout_mul_dim(c, x->dims[2], b, &out.dims[2])) == FX_OK &&
        (st = layout_mul_dim(c, x->dims[3], b, &out.dims[3])) == FX_OK)
        c->out[0] = out;
    return st;
}

static FxStatus depth_to_space_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    const int64_t *d = x->type.dims;
    int64_t b = node_attr_int(c->node, "blocksize", 1);
    int crd = strcmp(node_attr_string(c->node, "mode", "DCR"), "CRD") == 0;
    fxrt_depth_to_space(fxrt_dtype_size(x->type.dtype), d[0], d[1], d[2], d[3], b, crd, x->data,
                        c->out[0]->data);
    return FX_OK;
}

static FxStatus depth_to_space_emit(EmitCtx *c)
{
    const TensorType *x = layout_emit_in_type(c, 0);
    const int64_t *d = x->dims;
    int crd = strcmp(node_attr_string(c->node, "mode", "DCR"), "CRD") == 0;
    if (layout_emit_if_empty(c))
        return FX_OK;
    emit_line(c,
              "fxrt_depth_to_space(sizeof(%s), /*n=*/%lld, /*c=*/%lld, /*h=*/%lld, /*w=*/%lld, "
              "/*blocksize=*/%lld, /*crd=*/%d, %s, %s);",
              c_type_name(x->dtype), (long long)d[0], (long long)d[1], (long long)d[2],
              (long long)d[3], (long long)node_attr_int(c->node, "blocksize", 1), crd, c->in[0],
              c->out[0]);
    return FX_OK;
}

static const AttrSpec depth_to_space_attrs[] = {
    {"blocksize", FX_ATTR_INT, NULL, true},
    {"mode", FX_ATTR_STRING, "DCR", false},
    {NULL},
};

const OpDef fx_op_DepthToSpace = {
    .name = "DepthToSpace",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = depth_to_space_attrs,
    .canonicalize = depth_to_space_canonicalize,
    .infer = depth_to_space_infer,
    .eval = depth_to_space_eval,
    .emit = depth_to_space_emit,
};

static FxStatus space_to_depth_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    int64_t b;
    FxStatus st = layout_check_dtype(c, x, "input");
    if (st != FX_OK)
        return st;
    if (x->rank != 4)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "input must be NCHW, not rank %d",
                               x->rank);
    int64_t limit = x->dims[2] < x->dims[3] ? x->dims[2] : x->dims[3];
    if ((st = blocksize(c, limit > 0 ? limit : 1, &b)) != FX_OK)
        return st;
    if (x->dims[2] % b != 0 || x->dims[3] % b != 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "spatial size %lldx%lld does not divide by blocksize %lld",
                               (long long)x->dims[2], (long long)x->dims[3], (long long)b);
    TensorType out = *x;
    int64_t bb = 1;
    out.dims[2] = x->dims[2] / b;
    out.dims[3] = x->dims[3] / b;
    if ((st = layout_mul_dim(c, b, b, &bb)) == FX_OK &&
        (st = layout_mul_dim(c, x->dims[1], bb, &out.dims[1])) == FX_OK)
        c->out[0] = out;
    return st;
}

static FxStatus space_to_depth_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    const int64_t *d = x->type.dims;
    int64_t b = node_attr_int(c->node, "blocksize", 1);
    fxrt_space_to_depth(fxrt_dtype_size(x->type.dtype), d[0], d[1], d[2], d[3], b, x->data,
                        c->out[0]->data);
    return FX_OK;
}

static FxStatus space_to_depth_emit(EmitCtx *c)
{
    const TensorType *x = layout_emit_in_type(c, 0);
    const int64_t *d = x->dims;
    if (layout_emit_if_empty(c))
        return FX_OK;
    emit_line(c,
              "fxrt_space_to_depth(sizeof(%s), /*n=*/%lld, /*c=*/%lld, /*h=*/%lld, /*w=*/%lld, "
              "/*blocksize=*/%lld, %s, %s);",
              c_type_name(x->dtype), (long long)d[0], (long long)d[1], (long long)d[2],
              (long long)d[3], (long long)node_attr_int(c->node, "blocksize", 1), c->in[0],
              c->out[0]);
    return FX_OK;
}

static const AttrSpec space_to_depth_attrs[] = {
    {"blocksize", FX_ATTR_INT, NULL, true},
    {NULL},
};

const OpDef fx_op_SpaceToDepth = {
    .name = "SpaceToDepth",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = space_to_depth_attrs,
    .infer = space_to_depth_infer,
    .eval = space_to_depth_eval,
    .emit = space_to_depth_emit,
};

/* --- Trilu ------------------------------------------------------------------ */

static FxStatus trilu_infer(InferCtx *c)
{
    const TensorType *x = c->in[0], *k = layout_input_type(c, 1);
    FxStatus st = layout_check_dtype(c, x, "input");
    if (st != FX_OK)
        return st;
    if (x->rank < 2)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "input must have rank >= 2, not %d", x->rank);
    if (k && (k->dtype != FXRT_DTYPE_INT64 || type_numel(k) != 1 || k->rank > 1))
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "k must be an int64 scalar");
    c->out[0] = *x;
    return FX_OK;
}

/* k only selects values, so it may be a run-time input. */
static FxStatus trilu_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0], *k = layout_eval_input(c, 1);
    const TensorType *t = &x->type;
    int64_t rows = t->dims[t->rank - 2], cols = t->dims[t->rank - 1];
    fxrt_trilu(fxrt_dtype_size(t->dtype), layout_dims_product(t->dims, 0, t->rank - 2), rows, cols,
               k ? tensor_get_int(k, 0) : 0, node_attr_int(c->node, "upper", 1) != 0, x->data,
               c->out[0]->data);
    return FX_OK;
}

/* A constant k is baked in; a run-time one is read from its buffer. */
static FxStatus trilu_emit(EmitCtx *c)
{
    const TensorType *x = layout_emit_in_type(c, 0);
    const Tensor *kv = c->num_inputs > 1 ? c->in_value[1] : NULL;
    int rank = x->rank;
    char k[64];
    if (layout_emit_if_empty(c))
        return FX_OK;
    if (kv || !layout_emit_in_type(c, 1)) {
        int64_t v = kv ? tensor_get_int(kv, 0) : 0;
        /* fxrt_trilu clamps k to the matrix, so clamping here changes nothing
         * and keeps INT64_MIN out of the literal */
        if (v < -(x->dims[rank - 2] + 1))
            v = -(x->dims[rank - 2] + 1);
        if (v > x->dims[rank - 1] + 1)
            v = x->dims[rank - 1] + 1;
        snprintf(k, sizeof k, "%lld", (long long)v);
    } else {
        snprintf(k, sizeof k, "(%s)[0]", c->in[1]);
    }
    emit_line(c,
              "fxrt_trilu(sizeof(%s), /*batch=*/%lld, /*rows=*/%lld, /*cols=*/%lld, /*k=*/%s, "
              "/*upper=*/%d, %s, %s);",
              c_type_name(x->dtype), (long long)layout_dims_product(x->dims, 0, rank - 2),
              (long long)x->dims[rank - 2], (long long)x->dims[rank - 1], k,
              node_attr_int(c->node, "upper", 1) != 0, c->in[0], c->out[0]);
    return FX_OK;
}

static const AttrSpec trilu_attrs[] = {
    {"upper", FX_ATTR_INT, "1", false},
    {NULL},
};

const OpDef fx_op_Trilu = {
    .name = "Trilu",
    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .attrs = trilu_attrs,
    .infer = trilu_infer,
    .eval = trilu_eval,
    .emit = trilu_emit,
};
