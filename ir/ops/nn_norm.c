/*
 * nn_norm.c - normalizations and the softmax family: BatchNormalization
 * (inference), InstanceNormalization, GroupNormalization, LayerNormalization, LRN,
 * MeanVarianceNormalization, LpNormalization, Softmax, LogSoftmax, Hardmax.
 *
 * Each op folds its tensor into the (outer, len, inner) or (n, c, inner)
 * view its runtime kernel takes.  float64 is computed in float32 (the
 * tolerance of every consumer fxcc has is far looser than float's).
 *
 * Canonical forms:
 *  - BatchNormalization drops opset 7-8's `spatial`: the per-activation form
 *    (spatial = 0) is recognized by the shape of scale/B/mean/var, which is
 *    then [C, D1, ...] instead of [C].  training_mode = 1 is refused at
 *    import, and so is reading any output beyond Y (the running or saved
 *    statistics exist only in training).
 *  - Softmax, LogSoftmax and Hardmax before opset 13 flatten the input to
 *    2-D at `axis` (default 1) and normalize whole rows; opset 13 normalizes
 *    along one axis (default -1).  Canonicalize writes the axis explicitly
 *    and marks the old meaning with the internal attribute coerce_2d = 1;
 *    absent (or 0) means opset-13 semantics.  The shape function drops the
 *    mark when the two meanings coincide (axis is the last axis).
 *
 *  - GroupNormalization keeps the opset it was read at: before 21 scale and
 *    bias hold one value per group, from 21 one per channel (the kernel
 *    takes either through its per_scale).
 *
 * Refused: float16, LayerNormalization and GroupNormalization stash_type
 * other than 1 (float),
 * LpNormalization p other than 1 or 2; by the code generator, float64.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* --- helpers ---------------------------------------------------------------- */

static const TensorType *input_type(const InferCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static const Tensor *input_value(const EvalCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static FxStatus check_float(const Node *n, Diag *d, const TensorType *t, const char *what)
{
    if (t->dtype == FXRT_DTYPE_FLOAT32 || t->dtype == FXRT_DTYPE_FLOAT64)
        return FX_OK;
    return diag_node_error(d, t->dtype == FXRT_DTYPE_FLOAT16 ? FX_ERR_UNSUPPORTED : FX_ERR_INVALID,
                           n, "%s has element type %s; %s takes float32 or float64", what,
                           dtype_name(t->dtype), n->op->name);
}

static int64_t dims_numel(const int64_t *dims, int from, int to)
{
    int64_t n = 1;
    for (int i = from; i < to; i++)
        n *= dims[i];
    return n;
}

/* Float inputs and outputs as float32 buffers; F32Bufs frees the copies. */
enum { MAX_BUFS = 8 };
typedef struct F32Bufs {
    float *owned[MAX_BUFS];
    int count;
    bool nomem;
} F32Bufs;

static const float *bufs_in(F32Bufs *b, const Tensor *t)
{
    if (!t)
        return NULL;
    if (t->type.dtype == FXRT_DTYPE_FLOAT32)
        return t->data;
    int64_t n = tensor_numel(t);
    float *buf = b->count < MAX_BUFS ? fx_alloc_array((size_t)(n > 0 ? n : 1), sizeof *buf) : NULL;
    if (!buf) {
        b->nomem = true;
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        buf[i] = (float)fxrt_load_f64(t->type.dtype, t->data, (size_t)i);
    b->owned[b->count++] = buf;
    return buf;
}

static float *bufs_out(F32Bufs *b, Tensor *t)
{
    if (t->type.dtype == FXRT_DTYPE_FLOAT32)
        return t->data;
    return (float *)bufs_in(b, t); /* a float copy, converted back by bufs_finish */
}

/* Converts float copies of outputs back into them and frees every copy. */
static FxStatus bufs_finish(F32Bufs *b, EvalCtx *c, Tensor *const *outs, float *const *bufs,
                            int n)
{
    for (int k = 0; k < n && !b->nomem; k++)
        if (outs[k] && bufs[k] && outs[k]->type.dtype != FXRT_DTYPE_FLOAT32)
            for (int64_t i = 0, e = tensor_numel(outs[k]); i < e; i++)
                fxrt_store_f64(outs[k]->type.dtype, outs[k]->data, (size_t)i, bufs[k][i]);
    for (int i = 0; i < b->count; i++)
        free(b->owned[i]);
    b->count = 0;
    if (b->nomem)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    return FX_OK;
}


/* --- emitter helpers ---------------------------------------------------------- */

/* The generated code runs these kernels on float32 only (float64 would
 * need the conversion buffers the interpreter mallocs). */
static FxStatus emit_check_f32(EmitCtx *c)
{
    for (int i = 0; i < c->num_inputs; i++) {
        const TensorType *t = c->in[i] ? node_input_type(c->node, i) : NULL;
        if (t && t->dtype != FXRT_DTYPE_FLOAT32)
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                                   "the code generator supports %s on float32 only, not %s",
                                   c->node->op->name, dtype_name(t->dtype));
    }
    return FX_OK;
}

/* Output k's buffer, or NULL when the node has no such output in use. */
static const char *emit_output(const EmitCtx *c, int k)
{
    return k < c->num_outputs && c->out[k] ? c->out[k] : "NULL";
}

static const char *float_lit(float v, char *buf, size_t cap) { return c_float_literal(v, buf, cap); }

/* --- BatchNormalization ------------------------------------------------------ */

static FxStatus batchnorm_canonicalize(Node *n, int opset, Diag *d)
{
    (void)opset;
    if (node_attr_int(n, "training_mode", 0) != 0)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                               "training_mode = 1 is not supported (inference only)");
    node_remove_attr(n, "spatial");
    return FX_OK;
}

/* Checks X and the four parameter tensors; *per_activation tells the
 * spatial = 0 form. */
static FxStatus batchnorm_check(const Node *n, Diag *d, const TensorType *const *in,
                                bool *per_activation)
{
    const TensorType *x = in[0];
    FxStatus st = check_float(n, d, x, "X");
    if (st != FX_OK)
        return st;
    if (x->rank < 2)
        return diag_node_error(d, FX_ERR_SHAPE, n, "X must be [N, C, ...], got rank %d", x->rank);
    static const char *const names[] = {"X", "scale", "B", "input_mean", "input_var"};
    *per_activation = in[1]->rank > 1;
    for (int i = 1; i < 5; i++) {
        const TensorType *t = in[i];
        if ((st = check_float(n, d, t, names[i])) != FX_OK)
            return st;
        bool channel = t->rank == 1 && t->dims[0] == x->dims[1];
        bool activation = t->rank == x->rank - 1 &&
                          memcmp(t->dims, x->dims + 1, (size_t)t->rank * sizeof t->dims[0]) == 0;
        if (!(*per_activation ? activation : channel)) {
            char buf[128];
            return diag_node_error(d, FX_ERR_SHAPE, n,
                                   "%s is %s; it must be [C] (or X's shape without N when "
                                   "scale is)", names[i], type_format(t, buf, sizeof buf));
        }
    }
    return FX_OK;
}

static FxStatus batchnorm_infer(InferCtx *c)
{
    bool per_activation;
    FxStatus st = batchnorm_check(c->node, c->diag, c->in, &per_activation);
    if (st != FX_OK)
        return st;
    c->out[0] = *c->in[0];
    /* Outputs 1..4 are training statistics: refuse the node if any is read. */
    for (int u = 0; u < c->node->num_users; u++) {
        const Node *user = c->node->users[u];
        if (user->op == &fx_op_getitem && user->index >= 1 && user->num_users > 0)
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                                   "output %d (a training statistic) is used; only inference "
                                   "mode is supported", user->index);
    }
    for (int k = 1; k < c->num_outputs; k++)
        c->out[k] = *c->in[3];
    return FX_OK;
}

static FxStatus batchnorm_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    Tensor *y = c->out[0];
    bool per_activation = c->in[1]->type.rank > 1;
    F32Bufs b = {0};
    const float *fx = bufs_in(&b, x), *scale = bufs_in(&b, c->in[1]);
    const float *bias = bufs_in(&b, c->in[2]), *mean = bufs_in(&b, c->in[3]);
    const float *var = bufs_in(&b, c->in[4]);
    float *fy = bufs_out(&b, y);
    if (!b.nomem) {
        int64_t n = x->type.dims[0];
        int64_t ch = x->type.dims[1];
        int64_t inner = dims_numel(x->type.dims, 2, x->type.rank);
        if (per_activation) {
            ch *= inner;
            inner = 1;
        }
        fxrt_batchnorm_f32(n, ch, inner, fx, scale, bias, mean, var,
                           node_attr_float(c->node, "epsilon", 1e-5f), fy);
    }
    /* Outputs beyond Y are never read (infer refuses that): leave them 0. */
    return bufs_finish(&b, c, c->out, &fy, 1);
}


static FxStatus batchnorm_emit(EmitCtx *c)
{
    FxStatus st = emit_check_f32(c);
    if (st != FX_OK)
        return st;
    const TensorType *x = node_input_type(c->node, 0);
    int64_t n = x->dims[0], ch = x->dims[1], inner = dims_numel(x->dims, 2, x->rank);
    if (node_input_type(c->node, 1)->rank > 1) { /* per activation */
        ch *= inner;
        inner = 1;
    }
    char eps[48];
    emit_line(c,
              "fxrt_batchnorm_f32(/*n=*/%lld, /*c=*/%lld, /*inner=*/%lld, %s, %s, %s, %s, %s, "
              "/*eps=*/%s, %s);",
              (long long)n, (long long)ch, (long long)inner, c->in[0], c->in[1], c->in[2], c->in[3],
              c->in[4], float_lit(node_attr_float(c->node, "epsilon", 1e-5f), eps, sizeof eps),
              c->out[0]);
    return FX_OK;
}

static const AttrSpec batchnorm_attrs[] = {
    {"epsilon", FX_ATTR_FLOAT, "1e-05", false},
    {"momentum", FX_ATTR_FLOAT, "0.9", false},
    {"spatial", FX_ATTR_INT, NULL, false}, /* opsets 7-8, removed by canonicalize */
    {"training_mode", FX_ATTR_INT, "0", false},
    {NULL},
};

const OpDef fx_op_BatchNormalization = {
    .name = "BatchNormalization",
    .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 5,
    .attrs = batchnorm_attrs,
    .canonicalize = batchnorm_canonicalize,
    .infer = batchnorm_infer,
    .eval = batchnorm_eval,
    .emit = batchnorm_emit,
};

/* --- InstanceNormalization ----------------------------------------------------- */

static FxStatus instancenorm_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    FxStatus st = check_float(c->node, c->diag, x, "input");
    if (st != FX_OK)
        return st;
    if (x->rank < 2)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "input must be [N, C, ...]");
    for (int i = 1; i < 3; i++) {
        const TensorType *t = c->in[i];
        if ((st = check_float(c->node, c->diag, t, i == 1 ? "scale" : "B")) != FX_OK)
            return st;
        if (t->rank != 1 || t->dims[0] != x->dims[1])
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "%s must be [%lld]",
                                   i == 1 ? "scale" : "B", (long long)x->dims[1]);
    }
    c->out[0] = *x;
    return FX_OK;
}

static FxStatus instancenorm_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    F32Bufs b = {0};
    const float *fx = bufs_in(&b, x), *scale = bufs_in(&b, c->in[1]);
    const float *bias = bufs_in(&b, c->in[2]);
    float *fy = bufs_out(&b, c->out[0]);
    if (!b.nomem)
        fxrt_instancenorm_f32(x->type.dims[0], x->type.dims[1],
                              dims_numel(x->type.dims, 2, x->type.rank), fx, scale, bias,
                              node_attr_float(c->node, "epsilon", 1e-5f), fy);
    return bufs_finish(&b, c, c->out, &fy, 1);
}


static FxStatus instancenorm_emit(EmitCtx *c)
{
    FxStatus st = emit_check_f32(c);
    if (st != FX_OK)
        return st;
    const TensorType *x = node_input_type(c->node, 0);
    char eps[48];
    emit_line(c,
              "fxrt_instancenorm_f32(/*n=*/%lld, /*c=*/%lld, /*inner=*/%lld, %s, %s, %s, "
              "/*eps=*/%s, %s);",
              (long long)x->dims[0], (long long)x->dims[1],
              (long long)dims_numel(x->dims, 2, x->rank), c->in[0], c->in[1], c->in[2],
              float_lit(node_attr_float(c->node, "epsilon", 1e-5f), eps, sizeof eps), c->out[0]);
    return FX_OK;
}

static const AttrSpec instancenorm_attrs[] = {
    {"epsilon", FX_ATTR_FLOAT, "1e-05", false},
    {NULL},
};

const OpDef fx_op_InstanceNormalization = {
    .name = "InstanceNormalization",
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = instancenorm_attrs,
    .infer = instancenorm_infer,
    .eval = instancenorm_eval,
    .emit = instancenorm_emit,
};

/* --- GroupNormalization ------------------------------------------------------- */

static FxStatus groupnorm_canonicalize(Node *n, int opset, Diag *d)
{
    (void)opset;
    if (node_attr_int(n, "stash_type", 1) != 1)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "stash_type %lld is not supported "
                               "(1, float32, is)", (long long)node_attr_int(n, "stash_type", 1));
    return FX_OK;
}

/* Channels per scale and bias entry: opset 18-20 scale a group, 21 a channel. */
static int64_t groupnorm_per_scale(const Node *n, int64_t channels)
{
    int64_t groups = node_attr_int(n, "num_groups", 1);
    return n->graph && n->graph->opset < 21 ? channels / groups : 1;
}

static FxStatus groupnorm_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    FxStatus st = check_float(c->node, c->diag, x, "input");
    if (st != FX_OK)
        return st;
    if (x->rank < 2)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "input must be [N, C, ...]");
    int64_t groups = node_attr_int(c->node, "num_groups", 0), channels = x->dims[1];
    if (groups <= 0 || channels % groups != 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "num_groups %lld does not divide the %lld channels",
                               (long long)groups, (long long)channels);
    int64_t entries = channels / groupnorm_per_scale(c->node, channels);
    for (int i = 1; i < 3; i++) {
        const TensorType *t = c->in[i];
        if ((st = check_float(c->node, c->diag, t, i == 1 ? "scale" : "bias")) != FX_OK)
            return st;
        if (t->rank != 1 || t->dims[0] != entries)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "%s must be [%lld] (one per "
                                   "%s at opset %d)", i == 1 ? "scale" : "bias",
                                   (long long)entries, entries == channels ? "channel" : "group",
                                   c->node->graph ? c->node->graph->opset : 0);
    }
    c->out[0] = *x;
    return FX_OK;
}

static FxStatus groupnorm_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    const int64_t *dims = x->type.dims;
    F32Bufs b = {0};
    const float *fx = bufs_in(&b, x), *scale = bufs_in(&b, c->in[1]);
    const float *bias = bufs_in(&b, c->in[2]);
    float *fy = bufs_out(&b, c->out[0]);
    if (!b.nomem)
        fxrt_groupnorm_f32(dims[0], dims[1], node_attr_int(c->node, "num_groups", 1),
                           dims_numel(dims, 2, x->type.rank), fx, scale, bias,
                           groupnorm_per_scale(c->node, dims[1]),
                           node_attr_float(c->node, "epsilon", 1e-5f), fy);
    return bufs_finish(&b, c, c->out, &fy, 1);
}

static FxStatus groupnorm_emit(EmitCtx *c)
{
    FxStatus st = emit_check_f32(c);
    if (st != FX_OK)
        return st;
    const TensorType *x = node_input_type(c->node, 0);
    char eps[48];
    emit_line(c,
              "fxrt_groupnorm_f32(/*n=*/%lld, /*c=*/%lld, /*groups=*/%lld, /*inner=*/%lld, %s, "
              "%s, %s, /*per_scale=*/%lld, /*eps=*/%s, %s);",
              (long long)x->dims[0], (long long)x->dims[1],
              (long long)node_attr_int(c->node, "num_groups", 1),
              (long long)dims_numel(x->dims, 2, x->rank), c->in[0], c->in[1], c->in[2],
              (long long)groupnorm_per_scale(c->node, x->dims[1]),
              float_lit(node_attr_float(c->node, "epsilon", 1e-5f), eps, sizeof eps), c->out[0]);
    return FX_OK;
}

static const AttrSpec groupnorm_attrs[] = {
    {"epsilon", FX_ATTR_FLOAT, "1e-05", false},
    {"num_groups", FX_ATTR_INT, NULL, true},
    {"stash_type", FX_ATTR_INT, "1", false}, /* opset 21 */
    {NULL},
};

const OpDef fx_op_GroupNormalization = {
    .name = "GroupNormalization",
    .min_inputs = 3, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = groupnorm_attrs,
    .canonicalize = groupnorm_canonicalize,
    .infer = groupnorm_infer,
    .eval = groupnorm_eval,
    .emit = groupnorm_emit,
};

/* --- LayerNormalization -------------------------------------------------------- */

/* Scale or B must broadcast (numpy, right-aligned) to X's dims[axis:]. */
static FxStatus layernorm_check_param(InferCtx *c, const TensorType *x, int axis,
                                      const TensorType *t, const char *what)
{
    if (!t)
        return FX_OK;
    FxStatus st = check_float(c->node, c->diag, t, what);
    if (st != FX_OK)
        return st;
    int nr = x->rank - axis;
    bool ok = t->rank <= nr;
    for (int i = 0; ok && i < t->rank; i++) {
        int64_t want = x->dims[x->rank - t->rank + i];
        ok = t->dims[i] == want || t->dims[i] == 1;
    }
    if (!ok) {
        char buf[128];
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "%s %s does not broadcast to the normalized dims (axis %d)", what,
                               type_format(t, buf, sizeof buf), axis);
    }
    return FX_OK;
}

static FxStatus layernorm_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    FxStatus st = check_float(c->node, c->diag, x, "X");
    if (st != FX_OK)
        return st;
    int axis;
    if ((st = infer_axis(c, node_attr_int(c->node, "axis", -1), x->rank, &axis)) != FX_OK)
        return st;
    if (node_attr_int(c->node, "stash_type", 1) != 1)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "stash_type %lld is not supported (only 1, float)",
                               (long long)node_attr_int(c->node, "stash_type", 1));
    if ((st = layernorm_check_param(c, x, axis, c->in[1], "Scale")) != FX_OK ||
        (st = layernorm_check_param(c, x, axis, input_type(c, 2), "B")) != FX_OK)
        return st;
    c->out[0] = *x;
    for (int k = 1; k < c->num_outputs; k++) {
        c->out[k] = *x;
        c->out[k].dtype = FXRT_DTYPE_FLOAT32;
        for (int i = axis; i < x->rank; i++)
            c->out[k].dims[i] = 1;
    }
    return FX_OK;
}

/* Scale or B expanded to `cols` floats (the normalized dims, row-major). */
static float *layernorm_expand(const float *src, const TensorType *t, const TensorType *x,
                               int64_t cols)
{
    float *out = fx_alloc_array((size_t)(cols > 0 ? cols : 1), sizeof *out);
    if (!out)
        return NULL;
    int64_t idx[FX_MAX_RANK] = {0};
    int nr = t->rank; /* t is aligned with the last nr dims of X */
    for (int64_t j = 0; j < cols; j++) {
        int64_t rem = j, off = 0, stride = 1;
        for (int i = nr - 1; i >= 0; i--) {
            int64_t dim = x->dims[x->rank - nr + i];
            idx[i] = rem % dim;
            rem /= dim;
        }
        for (int i = nr - 1; i >= 0; i--) {
            if (t->dims[i] != 1)
                off += idx[i] * stride;
            stride *= t->dims[i];
        }
        out[j] = src[off];
    }
    return out;
}

static FxStatus layernorm_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0], *sc = c->in[1], *bi = input_value(c, 2);
    int axis = (int)node_attr_int(c->node, "axis", -1);
    if (axis < 0)
        axis += x->type.rank;
    int64_t rows = dims_numel(x->type.dims, 0, axis);
    int64_t cols = dims_numel(x->type.dims, axis, x->type.rank);
    F32Bufs b = {0};
    const float *fx = bufs_in(&b, x), *fs = bufs_in(&b, sc), *fb = bufs_in(&b, bi);
    float *fy = bufs_out(&b, c->out[0]);
    float *es = NULL, *eb = NULL;
    if (!b.nomem && tensor_numel(sc) != cols && !(fs = es = layernorm_expand(fs, &sc->type,
                                                                            &x->type, cols)))
        b.nomem = true;
    if (!b.nomem && bi && tensor_numel(bi) != cols &&
        !(fb = eb = layernorm_expand(fb, &bi->type, &x->type, cols)))
        b.nomem = true;
    if (!b.nomem)
        fxrt_layernorm_f32(rows, cols, fx, fs, fb, node_attr_float(c->node, "epsilon", 1e-5f),
                           fy, c->num_outputs > 1 ? c->out[1]->data : NULL,
                           c->num_outputs > 2 ? c->out[2]->data : NULL);
    free(es);
    free(eb);
    return bufs_finish(&b, c, c->out, &fy, 1);
}


/* rows x cols of the normalization and whether Scale (input 1) / B (input
 * 2) must be broadcast to cols floats first. */
static void layernorm_geometry(const Node *n, int64_t *rows, int64_t *cols, int *axis_out,
                               bool expand[3])
{
    const TensorType *x = node_input_type(n, 0);
    int axis = (int)node_attr_int(n, "axis", -1);
    if (axis < 0)
        axis += x->rank;
    *axis_out = axis;
    *rows = dims_numel(x->dims, 0, axis);
    *cols = dims_numel(x->dims, axis, x->rank);
    expand[0] = false;
    for (int i = 1; i < 3; i++) {
        const TensorType *t = i < n->num_args ? node_input_type(n, i) : NULL;
        expand[i] = t && type_numel(t) != *cols;
    }
}

static size_t layernorm_scratch(const Node *n)
{
    int64_t rows, cols;
    int axis;
    bool expand[3];
    layernorm_geometry(n, &rows, &cols, &axis, expand);
    size_t one = ((size_t)cols * sizeof(float) + 63) & ~(size_t)63;
    return (expand[1] ? one : 0) + (expand[2] ? one : 0);
}

static FxStatus layernorm_emit(EmitCtx *c)
{
    FxStatus st = emit_check_f32(c);
    if (st != FX_OK)
        return st;
    const Node *n = c->node;
    const TensorType *x = node_input_type(n, 0);
    int64_t rows, cols;
    int axis;
    bool expand[3];
    layernorm_geometry(n, &rows, &cols, &axis, expand);
    const char *param[3] = {NULL, c->in[1], c->num_inputs > 2 ? c->in[2] : NULL};
    size_t off = 0, one = ((size_t)cols * sizeof(float) + 63) & ~(size_t)63;
    int nr = x->rank - axis;
    if (expand[1] || expand[2]) {
        /* Scale or B broadcasts to the normalized dims: expand it once per run. */
        int64_t od[FX_MAX_RANK];
        for (int i = 0; i < nr; i++)
            od[i] = x->dims[axis + i];
        emit_int64_array(c, "nd", od, nr);
        emit_line(c, "unsigned char *const s = (unsigned char *)(%s);", c->scratch);
    }
    static const char *const names[3] = {NULL, "sc", "bi"};
    for (int i = 1; i < 3; i++) {
        if (!expand[i])
            continue;
        const TensorType *t = node_input_type(n, i);
        int64_t id[FX_MAX_RANK];
        for (int j = 0; j < nr; j++)
            id[j] = j < nr - t->rank ? 1 : t->dims[j - (nr - t->rank)];
        char dn[8];
        snprintf(dn, sizeof dn, "%sd", names[i]);
        emit_int64_array(c, dn, id, nr);
        emit_line(c, "float *const %s = (float *)(s + %zu);", names[i], off);
        emit_line(c, "fxrt_expand(sizeof(float), %d, %s, nd, %s, %s);", nr, dn, param[i], names[i]);
        param[i] = names[i];
        off += one;
    }
    char eps[48];
    emit_line(
            c,
            "fxrt_layernorm_f32(/*rows=*/%lld, /*cols=*/%lld, %s, %s, %s, /*eps=*/%s, %s, %s, %s);",
            (long long)rows, (long long)cols, c->in[0], param[1], param[2] ? param[2] : "NULL",
            float_lit(node_attr_float(n, "epsilon", 1e-5f), eps, sizeof eps), c->out[0],
            emit_output(c, 1), emit_output(c, 2));
    return FX_OK;
}

static const AttrSpec layernorm_attrs[] = {
    {"axis", FX_ATTR_INT, "-1", false},
    {"epsilon", FX_ATTR_FLOAT, "1e-05", false},
    {"stash_type", FX_ATTR_INT, "1", false},
    {NULL},
};

const OpDef fx_op_LayerNormalization = {
    .name = "LayerNormalization",
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 3,
    .attrs = layernorm_attrs,
    .infer = layernorm_infer,
    .eval = layernorm_eval,
    .scratch_bytes = layernorm_scratch,
    .emit = layernorm_emit,
};

/* --- LRN ------------------------------------------------------------------------ */

static FxStatus lrn_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    FxStatus st = check_float(c->node, c->diag, x, "X");
    if (st != FX_OK)
        return st;
    if (x->rank < 2)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "X must be [N, C, ...]");
    if (node_attr_int(c->node, "size", 0) < 1)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "size must be >= 1");
    c->out[0] = *x;
    return FX_OK;
}

static FxStatus lrn_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    const Node *n = c->node;
    F32Bufs b = {0};
    const float *fx = bufs_in(&b, x);
    float *fy = bufs_out(&b, c->out[0]);
    if (!b.nomem)
        fxrt_lrn_f32(x->type.dims[0], x->type.dims[1], dims_numel(x->type.dims, 2, x->type.rank),
                     node_attr_int(n, "size", 1), node_attr_float(n, "alpha", 1e-4f),
                     node_attr_float(n, "beta", 0.75f), node_attr_float(n, "bias", 1.0f), fx, fy);
    return bufs_finish(&b, c, c->out, &fy, 1);
}


static FxStatus lrn_emit(EmitCtx *c)
{
    FxStatus st = emit_check_f32(c);
    if (st != FX_OK)
        return st;
    const Node *n = c->node;
    const TensorType *x = node_input_type(n, 0);
    char a[48], b[48], bias[48];
    emit_line(c,
              "fxrt_lrn_f32(/*n=*/%lld, /*c=*/%lld, /*inner=*/%lld, /*size=*/%lld, /*alpha=*/%s, "
              "/*beta=*/%s, /*bias=*/%s, %s, %s);",
              (long long)x->dims[0], (long long)x->dims[1],
              (long long)dims_numel(x->dims, 2, x->rank), (long long)node_attr_int(n, "size", 1),
              float_lit(node_attr_float(n, "alpha", 1e-4f), a, sizeof a),
              float_lit(node_attr_float(n, "beta", 0.75f), b, sizeof b),
              float_lit(node_attr_float(n, "bias", 1.0f), bias, sizeof bias), c->in[0], c->out[0]);
    return FX_OK;
}

static const AttrSpec lrn_attrs[] = {
    {"alpha", FX_ATTR_FLOAT, "0.0001", false},
    {"beta", FX_ATTR_FLOAT, "0.75", false},
    {"bias", FX_ATTR_FLOAT, "1.0", false},
    {"size", FX_ATTR_INT, NULL, true},
    {NULL},
};

const OpDef fx_op_LRN = {
    .name = "LRN",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = lrn_attrs,
    .infer = lrn_infer,
    .eval = lrn_eval,
    .emit = lrn_emit,
};

/* --- MeanVarianceNormalization ------------------------------------------------ */

static FxStatus mvn_mask(const Node *n, Diag *d, int rank, uint32_t *mask)
{
    const int64_t *axes;
    int64_t count = node_attr_ints(n, "axes", &axes);
    *mask = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (a < 0 || a >= rank)
            return diag_node_error(d, FX_ERR_SHAPE, n, "axis %lld is out of range for rank %d",
                                   (long long)axes[i], rank);
        if (*mask >> a & 1u)
            return diag_node_error(d, FX_ERR_INVALID, n, "axis %lld is listed twice",
                                   (long long)axes[i]);
        *mask |= 1u << a;
    }
    return FX_OK;
}

static FxStatus mvn_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    uint32_t mask;
    FxStatus st = check_float(c->node, c->diag, x, "X");
    if (st == FX_OK)
        st = mvn_mask(c->node, c->diag, x->rank, &mask);
    if (st == FX_OK)
        c->out[0] = *x;
    return st;
}

static FxStatus mvn_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    uint32_t mask;
    FxStatus st = mvn_mask(c->node, c->diag, x->type.rank, &mask);
    if (st != FX_OK)
        return st;
    F32Bufs b = {0};
    const float *fx = bufs_in(&b, x);
    float *fy = bufs_out(&b, c->out[0]);
    int64_t ns = fxrt_mvn_scratch_floats(x->type.rank, x->type.dims, mask);
    float *scratch = fx_alloc_array((size_t)(ns > 0 ? ns : 1), sizeof *scratch);
    if (!scratch)
        b.nomem = true;
    if (!b.nomem)
        fxrt_mvn_f32(x->type.rank, x->type.dims, mask, fx, fy, scratch);
    free(scratch);
    return bufs_finish(&b, c, c->out, &fy, 1);
}


static size_t mvn_scratch(const Node *n)
{
    const TensorType *x = node_input_type(n, 0);
    uint32_t mask;
    Diag d;
    diag_init(&d);
    FxStatus st = mvn_mask(n, &d, x->rank, &mask);
    diag_free(&d);
    if (st != FX_OK)
        return 0;
    return (size_t)fxrt_mvn_scratch_floats(x->rank, x->dims, mask) * sizeof(float);
}

static FxStatus mvn_emit(EmitCtx *c)
{
    FxStatus st = emit_check_f32(c);
    if (st != FX_OK)
        return st;
    const TensorType *x = node_input_type(c->node, 0);
    uint32_t mask;
    if ((st = mvn_mask(c->node, c->diag, x->rank, &mask)) != FX_OK)
        return st;
    emit_int64_array(c, "dims", x->dims, x->rank);
    emit_line(c, "fxrt_mvn_f32(/*rank=*/%d, dims, /*axes_mask=*/0x%xu, %s, %s, (float *)(%s));",
              x->rank, (unsigned)mask, c->in[0], c->out[0], c->scratch ? c->scratch : "NULL");
    return FX_OK;
}

static const AttrSpec mvn_attrs[] = {
    {"axes", FX_ATTR_INTS, "[0, 2, 3]", false},
    {NULL},
};

const OpDef fx_op_MeanVarianceNormalization = {
    .name = "MeanVarianceNormalization",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = mvn_attrs,
    .infer = mvn_infer,
    .eval = mvn_eval,
    .scratch_bytes = mvn_scratch,
    .emit = mvn_emit,
};

/* --- LpNormalization ------------------------------------------------------------ */

static FxStatus lpnorm_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    FxStatus st = check_float(c->node, c->diag, x, "input");
    if (st != FX_OK)
        return st;
    int axis;
    if ((st = infer_axis(c, node_attr_int(c->node, "axis", -1), x->rank, &axis)) != FX_OK)
        return st;
    int64_t p = node_attr_int(c->node, "p", 2);
    if (p != 1 && p != 2)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "p must be 1 or 2, not %lld",
                               (long long)p);
    c->out[0] = *x;
    return FX_OK;
}

static FxStatus lpnorm_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    int rank = x->type.rank;
    int axis = (int)node_attr_int(c->node, "axis", -1);
    if (axis < 0)
        axis += rank;
    F32Bufs b = {0};
    const float *fx = bufs_in(&b, x);
    float *fy = bufs_out(&b, c->out[0]);
    if (!b.nomem && rank > 0)
        fxrt_lpnorm_f32(dims_numel(x->type.dims, 0, axis), x->type.dims[axis],
                        dims_numel(x->type.dims, axis + 1, rank),
                        (int)node_attr_int(c->node, "p", 2), fx, fy);
    return bufs_finish(&b, c, c->out, &fy, 1);
}


static FxStatus lpnorm_emit(EmitCtx *c)
{
    FxStatus st = emit_check_f32(c);
    if (st != FX_OK)
        return st;
    const TensorType *x = node_input_type(c->node, 0);
    int rank = x->rank;
    int axis = (int)node_attr_int(c->node, "axis", -1);
    if (axis < 0)
        axis += rank;
    if (rank == 0)
        return FX_OK;
    emit_line(c, "fxrt_lpnorm_f32(/*outer=*/%lld, /*len=*/%lld, /*inner=*/%lld, /*p=*/%d, %s, %s);",
              (long long)dims_numel(x->dims, 0, axis), (long long)x->dims[axis],
              (long long)dims_numel(x->dims, axis + 1, rank), (int)node_attr_int(c->node, "p", 2),
              c->in[0], c->out[0]);
    return FX_OK;
}

static const AttrSpec lpnorm_attrs[] = {
    {"axis", FX_ATTR_INT, "-1", false},
    {"p", FX_ATTR_INT, "2", false},
    {NULL},
};

const OpDef fx_op_LpNormalization = {
    .name = "LpNormalization",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = lpnorm_attrs,
    .infer = lpnorm_infer,
    .eval = lpnorm_eval,
    .emit = lpnorm_emit,
};

/* --- Softmax, LogSoftmax, Hardmax ---------------------------------------------- */

static FxStatus softmax_canonicalize(Node *n, int opset, Diag *d)
{
    /* Only this function sets the mark; an ONNX file cannot. */
    if (node_attr(n, "coerce_2d"))
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "unknown attribute 'coerce_2d'");
    if (opset >= 13) {
        if (!node_attr(n, "axis") && !node_set_attr_int(n, "axis", -1))
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        return FX_OK;
    }
    if ((!node_attr(n, "axis") && !node_set_attr_int(n, "axis", 1)) ||
        !node_set_attr_int(n, "coerce_2d", 1))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    return op_apply_attr_specs(n->op, n, d); /* back into spec order */
}

static FxStatus softmax_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    FxStatus st = check_float(c->node, c->diag, x, "input");
    if (st != FX_OK)
        return st;
    int axis;
    if ((st = infer_axis(c, node_attr_int(c->node, "axis", -1), x->rank, &axis)) != FX_OK)
        return st;
    /* Flattening at the last axis is normalizing along it: one meaning. */
    if (node_attr_int(c->node, "coerce_2d", 0) && axis == x->rank - 1)
        node_remove_attr(c->node, "coerce_2d");
    c->out[0] = *x;
    return FX_OK;
}

/* The (outer, len, inner) view of x, shared by eval and emit. */
static void softmax_geometry(const Node *n, const TensorType *x, int64_t *outer, int64_t *len,
                             int64_t *inner)
{
    int rank = x->rank;
    int axis = (int)node_attr_int(n, "axis", -1);
    if (axis < 0)
        axis += rank;
    if (rank == 0) {
        *outer = *len = *inner = 1;
    } else if (node_attr_int(n, "coerce_2d", 0)) {
        *outer = dims_numel(x->dims, 0, axis);
        *len = dims_numel(x->dims, axis, rank);
        *inner = 1;
    } else {
        *outer = dims_numel(x->dims, 0, axis);
        *len = x->dims[axis];
        *inner = dims_numel(x->dims, axis + 1, rank);
    }
}

static FxStatus softmax_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    int64_t outer, len, inner;
    softmax_geometry(c->node, &x->type, &outer, &len, &inner);
    F32Bufs b = {0};
    const float *fx = bufs_in(&b, x);
    float *fy = bufs_out(&b, c->out[0]);
    if (!b.nomem) {
        if (c->node->op == &fx_op_Softmax)
            fxrt_softmax_f32(outer, len, inner, fx, fy);
        else if (c->node->op == &fx_op_LogSoftmax)
            fxrt_logsoftmax_f32(outer, len, inner, fx, fy);
        else
            fxrt_hardmax_f32(outer, len, inner, fx, fy);
    }
    return bufs_finish(&b, c, c->out, &fy, 1);
}


static FxStatus softmax_emit(EmitCtx *c)
{
    FxStatus st = emit_check_f32(c);
    if (st != FX_OK)
        return st;
    int64_t outer, len, inner;
    softmax_geometry(c->node, node_input_type(c->node, 0), &outer, &len, &inner);
    const char *kernel = c->node->op == &fx_op_Softmax      ? "fxrt_softmax_f32"
                         : c->node->op == &fx_op_LogSoftmax ? "fxrt_logsoftmax_f32"
                                                            : "fxrt_hardmax_f32";
    emit_line(c, "%s(/*outer=*/%lld, /*len=*/%lld, /*inner=*/%lld, %s, %s);", kernel,
              (long long)outer, (long long)len, (long long)inner, c->in[0], c->out[0]);
    return FX_OK;
}

static const AttrSpec softmax_attrs[] = {
    /* default -1 from opset 13, 1 before: canonicalize fills it */
    {"axis", FX_ATTR_INT, NULL, false},
    /* internal, not ONNX: 1 = the pre-13 flatten-to-2-D meaning */
    {"coerce_2d", FX_ATTR_INT, NULL, false},
    {NULL},
};

const OpDef fx_op_Softmax = {
    .name = "Softmax",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = softmax_attrs,
    .canonicalize = softmax_canonicalize,
    .infer = softmax_infer,
    .eval = softmax_eval,
    .emit = softmax_emit,
};

const OpDef fx_op_LogSoftmax = {
    .name = "LogSoftmax",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = softmax_attrs,
    .canonicalize = softmax_canonicalize,
    .infer = softmax_infer,
    .eval = softmax_eval,
    .emit = softmax_emit,
};

const OpDef fx_op_Hardmax = {
    .name = "Hardmax",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = softmax_attrs,
    .canonicalize = softmax_canonicalize,
    .infer = softmax_infer,
    .eval = softmax_eval,
    .emit = softmax_emit,
};
