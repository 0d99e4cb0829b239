/*
 * pass_quantize.c - post-training static int8 quantization: rewrites a
 * calibrated float graph into QDQ form, QuantizeLinear -> DequantizeLinear
 * pairs with constant parameters around the ops that have integer kernels,
 * laid out as ONNX Runtime's QDQ quantizer lays them out, so that a
 * QDQ-folding pass can turn each DQ -> op -> Q into an integer kernel while
 * the graph as it stands runs in float with quantization's exact effect.
 *
 * - Conv, Gemm and MatMul with constant weights: the weights become int8
 *   symmetric per output channel (scale max|w_c| / 127, zero point 0,
 *   values in [-127, 127]; with weight_bits 7 max|w_c| / 64 and [-64, 64],
 *   which lets the AVX2 kernels use vpmaddubsw without saturating, at about
 *   6 dB more weight noise) read through a DequantizeLinear along the output
 *   channel's axis (Conv 0, Gemm 0 with transB else 1, MatMul 1; weights of
 *   rank above 2 per tensor); a 1-D bias becomes int32 of scale
 *   x_scale * w_scale_c, zero point 0 (a Gemm's only when alpha and beta
 *   are 1).  A constant operand of Add or Mul is quantized per tensor like
 *   an activation.
 * - Every float activation read or written by Conv, Gemm, MatMul, Add, Mul,
 *   MaxPool, AveragePool, GlobalAveragePool or Concat (graph inputs and
 *   outputs included) gets one Q -> DQ pair, per tensor, in the activation
 *   type (uint8 or int8), from its calibrated range widened to contain 0;
 *   every reader of the value then reads the DQ.
 * - A Relu, or a Clip from 0, that is the only reader of a quantized
 *   layer's output is removed, the layer's output taking its range: the
 *   quantizer's saturation at the zero point is then the clamp.
 * - Views and MaxPool keep their input's scale and zero point, so they stay
 *   exact on integers.
 *
 * Rounding is QuantizeLinear's: round half to even, then saturate.  Layers
 * named in keep_float, and ops whose weights are not constant or whose
 * values calibration never saw, stay float; their neighbours still quantize
 * the values they share with them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opt.h"

#define F32 FXRT_DTYPE_FLOAT32

void quant_affine_params(float lo, float hi, DType dtype, float *scale, int32_t *zero_point)
{
    int32_t qmin = dtype == FXRT_DTYPE_INT8 ? -128 : 0, qmax = qmin + 255;
    lo = fminf(lo, 0);
    hi = fmaxf(hi, 0);
    float s = (hi - lo) / (float)(qmax - qmin);
    if (!(s > 0) || !isfinite(s)) {
        *scale = 1;
        *zero_point = 0;
        return;
    }
    float z = rintf((float)qmin - lo / s);
    *scale = s;
    *zero_point = z < (float)qmin ? qmin : z > (float)qmax ? qmax : (int32_t)z;
}

int32_t quant_round(float x, float scale, int32_t zero_point, int32_t qmin, int32_t qmax)
{
    double q = (double)rintf(x / scale) + zero_point;
    return q < qmin ? qmin : q > qmax ? qmax : (int32_t)q;
}

void quantize_result_free(QuantizeResult *r)
{
    free(r->values);
    memset(r, 0, sizeof *r);
}

/* --- what gets quantized ------------------------------------------------------ */

typedef enum LayerKind { LAYER_NONE, LAYER_LINEAR, LAYER_BINARY, LAYER_POOL, LAYER_CONCAT } LayerKind;

static LayerKind layer_kind(const Node *n)
{
    if (n->opcode != FX_OPCODE_CALL_FUNCTION || n->num_outputs != 1 ||
        n->out_types[0].dtype != F32)
        return LAYER_NONE;
    if (n->op == &fx_op_Conv || n->op == &fx_op_Gemm || n->op == &fx_op_MatMul)
        return LAYER_LINEAR;
    if (n->op == &fx_op_Add || n->op == &fx_op_Mul)
        return LAYER_BINARY;
    if (n->op == &fx_op_MaxPool || n->op == &fx_op_AveragePool ||
        n->op == &fx_op_GlobalAveragePool)
        return LAYER_POOL;
    if (n->op == &fx_op_Concat)
        return LAYER_CONCAT;
    return LAYER_NONE;
}

static bool is_const_f32(const Node *a)
{
    return a && a->opcode == FX_OPCODE_GET_ATTR && a->value && a->value->type.dtype == F32;
}

/* The pass's state: per node id, the range to quantize with and the chosen
 * parameters. */
typedef struct Quantizer {
    Graph *g;
    const QuantizeOptions *o;
    QuantizeResult *res;
    Diag *d;
    int count;      /* ids below this have a slot */
    bool *seen;     /* a calibrated range exists */
    float *lo, *hi;
    bool *wanted;   /* the value gets a Q -> DQ pair */
    bool *layer;    /* node is a layer being quantized */
    const char **reported_as; /* the float graph's node whose value this one carries */
    float *scale;   /* chosen per value */
    int32_t *zp;
    bool *has_params;
} Quantizer;

static bool kept_float(const Quantizer *q, const Node *n)
{
    for (int k = 0; k < q->o->num_keep_float; k++)
        if (strcmp(q->o->keep_float[k], n->name) == 0)
            return true;
    return false;
}

static bool has_range(const Quantizer *q, const Node *v)
{
    return v && v->id < q->count && q->seen[v->id];
}

/* The activations a layer quantizes: its float inputs that are not
 * weights. */
static bool is_activation_input(const Node *n, int i)
{
    const Node *a = n->args[i];
    if (!a || a->num_outputs != 1 || a->out_types[0].dtype != F32)
        return false;
    if (n->op == &fx_op_Conv)
        return i == 0;
    if (n->op == &fx_op_Gemm || n->op == &fx_op_MatMul)
        return i < 2 && !(i == 1 && is_const_f32(a));
    if (n->op == &fx_op_Add || n->op == &fx_op_Mul)
        return !is_const_f32(a);
    return n->op == &fx_op_Concat ? !is_const_f32(a) : i == 0;
}

/* Whether layer n can be quantized: its weights constant, every activation
 * it reads and writes calibrated. */
static bool quantizable(const Quantizer *q, const Node *n)
{
    LayerKind kind = layer_kind(n);
    if (kind == LAYER_NONE || kept_float(q, n) || !has_range(q, n))
        return false;
    if (n->op == &fx_op_Conv && !is_const_f32(n->args[1]))
        return false;
    if (n->op == &fx_op_Gemm && n->num_args > 2 && n->args[2] && !is_const_f32(n->args[2]))
        return false;
    for (int i = 0; i < n->num_args; i++)
        if (is_activation_input(n, i) && !has_range(q, n->args[i]))
            return false;
    return true;
}

/* A Relu, or a Clip whose min is the constant 0, reading only `layer`. */
static Node *removable_activation(const Node *layer)
{
    Node *r = node_fusable_user(layer);
    if (!r || r->opcode != FX_OPCODE_CALL_FUNCTION)
        return NULL;
    if (r->op == &fx_op_Relu)
        return r;
    if (r->op != &fx_op_Clip || r->num_args < 2 || !r->args[1])
        return NULL;
    const Tensor *lo = node_const_value(r->args[1]);
    if (!lo || tensor_numel(lo) != 1 || tensor_get_float(lo, 0) != 0)
        return NULL;
    if (r->num_args > 2 && r->args[2] && !node_const_value(r->args[2]))
        return NULL;
    return r;
}

/* --- building nodes ---------------------------------------------------------- */

static Node *scalar_constant(Quantizer *q, const char *hint, DType dtype, double v)
{
    TensorType t = {.dtype = dtype, .rank = 0};
    Tensor *c = tensor_new(&t, q->d);
    if (!c)
        return NULL;
    switch (dtype) {
    case FXRT_DTYPE_UINT8: *(uint8_t *)c->data = (uint8_t)v; break;
    case FXRT_DTYPE_INT8: *(int8_t *)c->data = (int8_t)v; break;
    default: *(float *)c->data = (float)v; break;
    }
    return graph_create_constant(q->g, NULL, hint, c, q->d);
}

/* QuantizeLinear or DequantizeLinear of x with (scale, zp) along `axis`
 * (ignored for scalar parameters), before `before`. */
static Node *quant_node(Quantizer *q, const OpDef *op, Node *before, const char *hint, Node *x,
                        Node *scale, Node *zp, int64_t axis)
{
    Node *args[3] = {x, scale, zp};
    Node *n = graph_create_op(q->g, before, op, hint, args, zp ? 3 : 2);
    if (!n) {
        diag_error(q->d, FX_ERR_NOMEM, "out of memory creating a %s node", op->name);
        return NULL;
    }
    FxStatus st = op_apply_attr_specs(op, n, q->d);
    if (st == FX_OK && !node_set_attr_int(n, "axis", axis))
        st = diag_error(q->d, FX_ERR_NOMEM, "out of memory");
    if (st == FX_OK && !node_set_num_outputs(n, 1))
        st = diag_error(q->d, FX_ERR_NOMEM, "out of memory");
    if (st == FX_OK)
        st = node_infer_shapes(n, q->d);
    if (st != FX_OK) {
        graph_erase_node(q->g, n);
        return NULL;
    }
    return n;
}

static char *hint(Quantizer *q, const char *base, const char *suffix)
{
    size_t len = strlen(base) + strlen(suffix) + 1;
    char *s = arena_alloc(&q->g->arena, len);
    if (s)
        snprintf(s, len, "%s%s", base, suffix);
    else
        diag_error(q->d, FX_ERR_NOMEM, "out of memory");
    return s;
}

static FxStatus record_value(Quantizer *q, const Node *v, const Node *dq)
{
    QuantizeResult *r = q->res;
    QuantizedValue *grown = fx_realloc_array(r->values, (size_t)r->num_values + 1, sizeof *grown);
    if (!grown)
        return diag_error(q->d, FX_ERR_NOMEM, "out of memory");
    r->values = grown;
    r->values[r->num_values++] = (QuantizedValue){
        .node = v->name, .layer = q->reported_as[v->id] ? q->reported_as[v->id] : v->name,
        .dq = dq->name, .is_layer = q->layer[v->id]};
    return FX_OK;
}

/* v -> Q -> DQ, every other reader of v reading the DQ. */
static FxStatus insert_qdq(Quantizer *q, Node *v)
{
    Node *before = v->next;
    if (v->opcode == FX_OPCODE_PLACEHOLDER || v->opcode == FX_OPCODE_GET_ATTR)
        for (before = v->next; before != &q->g->root; before = before->next) {
            bool reads = false;
            for (int u = 0; u < v->num_users && !reads; u++)
                reads = v->users[u] == before;
            if (reads)
                break;
        }
    DType at = q->o->activation_type;
    const char *hs = hint(q, v->name, "_scale"), *hz = hint(q, v->name, "_zero_point"),
               *hq = hint(q, v->name, "_quantized"), *hd = hint(q, v->name, "_dequantized");
    if (!hs || !hz || !hq || !hd)
        return FX_ERR_NOMEM;
    Node *s = scalar_constant(q, hs, F32, q->scale[v->id]);
    Node *z = s ? scalar_constant(q, hz, at, q->zp[v->id]) : NULL;
    Node *qn = z ? quant_node(q, &fx_op_QuantizeLinear, before, hq, v, s, z, 1) : NULL;
    Node *dq = qn ? quant_node(q, &fx_op_DequantizeLinear, before, hd, qn, s, z, 1) : NULL;
    if (!dq)
        return FX_ERR_NOMEM;
    /* Snapshot the readers: rewiring shrinks v's user list. */
    int count = v->num_users;
    Node **readers = fx_alloc_array((size_t)count + 1, sizeof *readers);
    if (!readers)
        return diag_error(q->d, FX_ERR_NOMEM, "out of memory");
    memcpy(readers, v->users, (size_t)count * sizeof *readers);
    FxStatus st = FX_OK;
    for (int u = 0; u < count && st == FX_OK; u++)
        if (readers[u] != qn && node_replace_input_with(readers[u], v, dq) < 0)
            st = diag_error(q->d, FX_ERR_NOMEM, "out of memory");
    free(readers);
    return st == FX_OK ? record_value(q, v, dq) : st;
}

/* A constant tensor of `dtype` shaped like `like`, filled by the caller. */
static Tensor *tensor_like(Quantizer *q, const TensorType *like, DType dtype)
{
    TensorType t = *like;
    t.dtype = dtype;
    return tensor_new(&t, q->d);
}

static Node *vector_constant(Quantizer *q, const char *hint_text, DType dtype, int64_t count,
                             const void *values)
{
    TensorType t = {.dtype = dtype, .rank = 1, .dims = {count}};
    Tensor *c = tensor_new(&t, q->d);
    if (!c)
        return NULL;
    if (values)
        memcpy(c->data, values, tensor_nbytes(c));
    return graph_create_constant(q->g, NULL, hint_text, c, q->d);
}

/* Replaces argument `slot` of n (a constant float tensor w) by DQ(int8
 * weights): symmetric, per channel along `axis` (-1: per tensor).  The
 * chosen scales go to *scales_out (caller frees) for the bias. */
static FxStatus quantize_weight(Quantizer *q, Node *n, int slot, int axis, float **scales_out,
                                int64_t *channels_out)
{
    const Tensor *w = n->args[slot]->value;
    const TensorType *t = &w->type;
    int64_t channels = axis >= 0 ? t->dims[axis] : 1, inner = 1, outer = 1;
    for (int k = 0; axis >= 0 && k < t->rank; k++) {
        if (k < axis)
            outer *= t->dims[k];
        else if (k > axis)
            inner *= t->dims[k];
    }
    if (axis < 0)
        inner = tensor_numel(w);
    float *scales = fx_alloc_array((size_t)channels + 1, sizeof *scales);
    Tensor *wq = tensor_like(q, t, FXRT_DTYPE_INT8);
    if (!scales || !wq) {
        free(scales);
        tensor_free(wq);
        return diag_error(q->d, FX_ERR_NOMEM, "out of memory");
    }
    const float *x = w->data;
    int8_t *y = wq->data;
    for (int64_t c = 0; c < channels; c++) {
        float amax = 0;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++)
                amax = fmaxf(amax, fabsf(x[(o * channels + c) * inner + i]));
        int32_t wmax = q->o->weight_bits == 7 ? 64 : 127;
        scales[c] = amax > 0 ? amax / (float)wmax : 1.0f;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                int64_t at = (o * channels + c) * inner + i;
                y[at] = (int8_t)quant_round(x[at], scales[c], 0, -wmax, wmax);
            }
    }
    const char *base = n->name;
    const char *hw = hint(q, base, "_weight_int8"), *hs = hint(q, base, "_weight_scale"),
               *hz = hint(q, base, "_weight_zero_point"), *hd = hint(q, base, "_weight_dequantized");
    int8_t *zeros = fx_alloc_array((size_t)channels + 1, 1);
    Node *wn = hw && hs && hz && hd && zeros ? graph_create_constant(q->g, NULL, hw, wq, q->d)
                                             : (tensor_free(wq), NULL);
    Node *sn = wn ? (axis >= 0 ? vector_constant(q, hs, F32, channels, scales)
                               : scalar_constant(q, hs, F32, scales[0]))
                  : NULL;
    Node *zn = sn ? (axis >= 0 ? vector_constant(q, hz, FXRT_DTYPE_INT8, channels, zeros)
                               : scalar_constant(q, hz, FXRT_DTYPE_INT8, 0))
                  : NULL;
    Node *dq = zn ? quant_node(q, &fx_op_DequantizeLinear, n, hd, wn, sn, zn, axis >= 0 ? axis : 1)
                  : NULL;
    free(zeros);
    if (!dq || !node_set_arg(n, slot, dq)) {
        free(scales);
        return dq ? diag_error(q->d, FX_ERR_NOMEM, "out of memory") : FX_ERR_NOMEM;
    }
    q->res->float_weight_bytes += tensor_nbytes(w);
    q->res->int8_weight_bytes += (uint64_t)tensor_numel(w) + (uint64_t)channels * 5;
    *scales_out = scales;
    *channels_out = channels;
    return FX_OK;
}

/* The constant 1-D bias in argument `slot` as int32 of scale
 * x_scale * w_scale[c] through a DequantizeLinear along axis 0. */
static FxStatus quantize_bias(Quantizer *q, Node *n, int slot, float x_scale, const float *w_scales,
                              int64_t channels)
{
    const Tensor *b = n->args[slot]->value;
    float *scales = fx_alloc_array((size_t)channels + 1, sizeof *scales);
    Tensor *bq = tensor_like(q, &b->type, FXRT_DTYPE_INT32);
    if (!scales || !bq) {
        free(scales);
        tensor_free(bq);
        return diag_error(q->d, FX_ERR_NOMEM, "out of memory");
    }
    for (int64_t c = 0; c < channels; c++) {
        scales[c] = x_scale * w_scales[channels == 1 ? 0 : c];
        ((int32_t *)bq->data)[c] =
            quant_round(((const float *)b->data)[c], scales[c], 0, INT32_MIN, INT32_MAX);
    }
    const char *hb = hint(q, n->name, "_bias_int32"), *hs = hint(q, n->name, "_bias_scale"),
               *hd = hint(q, n->name, "_bias_dequantized");
    Node *bn = hb && hs && hd ? graph_create_constant(q->g, NULL, hb, bq, q->d)
                              : (tensor_free(bq), NULL);
    Node *sn = bn ? vector_constant(q, hs, F32, channels, scales) : NULL;
    Node *dq = sn ? quant_node(q, &fx_op_DequantizeLinear, n, hd, bn, sn, NULL, 0) : NULL;
    free(scales);
    if (!dq)
        return FX_ERR_NOMEM;
    if (!node_set_arg(n, slot, dq))
        return diag_error(q->d, FX_ERR_NOMEM, "out of memory");
    q->res->float_weight_bytes += tensor_nbytes(b);
    q->res->int8_weight_bytes += (uint64_t)channels * 8;
    return FX_OK;
}

/* A constant operand of Add/Mul, quantized per tensor like an activation. */
static FxStatus quantize_operand(Quantizer *q, Node *n, int slot)
{
    const Tensor *c = n->args[slot]->value;
    const float *x = c->data;
    float lo = 0, hi = 0, scale;
    int32_t zp;
    for (int64_t i = 0; i < tensor_numel(c); i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    DType at = q->o->activation_type;
    int32_t qmin = at == FXRT_DTYPE_INT8 ? -128 : 0;
    quant_affine_params(lo, hi, at, &scale, &zp);
    Tensor *cq = tensor_like(q, &c->type, at);
    if (!cq)
        return FX_ERR_NOMEM;
    for (int64_t i = 0; i < tensor_numel(c); i++) {
        int32_t v = quant_round(x[i], scale, zp, qmin, qmin + 255);
        if (at == FXRT_DTYPE_INT8)
            ((int8_t *)cq->data)[i] = (int8_t)v;
        else
            ((uint8_t *)cq->data)[i] = (uint8_t)v;
    }
    const char *base = n->args[slot]->name;
    const char *hc = hint(q, base, "_quantized"), *hs = hint(q, base, "_scale"),
               *hz = hint(q, base, "_zero_point"), *hd = hint(q, base, "_dequantized");
    Node *cn = hc && hs && hz && hd ? graph_create_constant(q->g, NULL, hc, cq, q->d)
                                    : (tensor_free(cq), NULL);
    Node *sn = cn ? scalar_constant(q, hs, F32, scale) : NULL;
    Node *zn = sn ? scalar_constant(q, hz, at, zp) : NULL;
    Node *dq = zn ? quant_node(q, &fx_op_DequantizeLinear, n, hd, cn, sn, zn, 1) : NULL;
    if (!dq)
        return FX_ERR_NOMEM;
    if (!node_set_arg(n, slot, dq))
        return diag_error(q->d, FX_ERR_NOMEM, "out of memory");
    q->res->float_weight_bytes += tensor_nbytes(c);
    q->res->int8_weight_bytes += (uint64_t)tensor_numel(c) + 5;
    return FX_OK;
}

/* Weights, bias and constant operands of a quantized layer n. */
static FxStatus quantize_constants(Quantizer *q, Node *n)
{
    FxStatus st = FX_OK;
    if (n->op == &fx_op_Add || n->op == &fx_op_Mul) {
        for (int i = 0; i < 2 && st == FX_OK; i++)
            if (is_const_f32(n->args[i]))
                st = quantize_operand(q, n, i);
        return st;
    }
    if (layer_kind(n) != LAYER_LINEAR || !is_const_f32(n->args[1]))
        return FX_OK;
    const TensorType *wt = &n->args[1]->value->type;
    int axis;
    if (n->op == &fx_op_Conv)
        axis = 0;
    else if (n->op == &fx_op_Gemm)
        axis = node_attr_int(n, "transB", 0) ? 0 : 1;
    else
        axis = wt->rank == 2 ? 1 : -1;
    float *w_scales = NULL;
    int64_t channels = 0;
    if ((st = quantize_weight(q, n, 1, axis, &w_scales, &channels)) != FX_OK)
        return st;
    Node *bias = n->num_args > 2 ? n->args[2] : NULL;
    Node *x = n->args[0];
    bool bias_ok = bias && is_const_f32(bias) && bias->value->type.rank == 1 &&
                   bias->value->type.dims[0] == channels && channels > 1 &&
                   x->id < q->count && q->has_params[x->id];
    if (bias_ok && n->op == &fx_op_Gemm)
        bias_ok = node_attr_float(n, "alpha", 1) == 1 && node_attr_float(n, "beta", 1) == 1;
    /* x may already read its DQ: the parameters are the quantized value's. */
    if (bias_ok)
        st = quantize_bias(q, n, 2, q->scale[x->id], w_scales, channels);
    free(w_scales);
    return st;
}

/* --- the pass ---------------------------------------------------------------- */

static void quantizer_free(Quantizer *q)
{
    free(q->seen);
    free(q->lo);
    free(q->hi);
    free(q->wanted);
    free(q->layer);
    free(q->reported_as);
    free(q->scale);
    free(q->zp);
    free(q->has_params);
}

/* Pass-through nodes (views, MaxPool) take their input's parameters. */
static bool passes_params(const Node *n)
{
    return n->opcode == FX_OPCODE_CALL_METHOD || n->op == &fx_op_MaxPool;
}

static FxStatus choose_values(Quantizer *q)
{
    Graph *g = q->g;
    /* Relu/Clip after a layer: removed, its range the layer's.  Found in
     * one walk and removed after it, since the walk must not erase ahead. */
    Node **pairs = fx_alloc_array((size_t)2 * g->num_nodes + 2, sizeof *pairs);
    if (!pairs)
        return diag_error(q->d, FX_ERR_NOMEM, "out of memory");
    int num_pairs = 0;
    graph_for_each(g, n) {
        if (!quantizable(q, n))
            continue;
        q->layer[n->id] = true;
        Node *r = removable_activation(n);
        if (r && has_range(q, r)) {
            pairs[2 * num_pairs] = n;
            pairs[2 * num_pairs++ + 1] = r;
        }
    }
    for (int k = 0; k < num_pairs; k++) {
        Node *n = pairs[2 * k], *r = pairs[2 * k + 1];
        q->lo[n->id] = q->lo[r->id];
        q->hi[n->id] = q->hi[r->id];
        q->reported_as[n->id] = r->name;
        if (node_replace_all_uses_with(r, n) < 0) {
            free(pairs);
            return diag_error(q->d, FX_ERR_NOMEM, "out of memory");
        }
        graph_erase_node(g, r);
    }
    free(pairs);
    graph_for_each(g, n) {
        if (!q->layer[n->id])
            continue;
        q->wanted[n->id] = true;
        for (int i = 0; i < n->num_args; i++)
            if (is_activation_input(n, i))
                q->wanted[n->args[i]->id] = true;
    }
    /* Parameters in graph order, so a pass-through node sees its input's. */
    graph_for_each(g, n) {
        if (n->id >= q->count || !q->seen[n->id])
            continue;
        Node *src = passes_params(n) && n->num_args > 0 ? n->args[0] : NULL;
        if (src && src->id < q->count && q->has_params[src->id]) {
            q->scale[n->id] = q->scale[src->id];
            q->zp[n->id] = q->zp[src->id];
        } else {
            quant_affine_params(q->lo[n->id], q->hi[n->id], q->o->activation_type,
                                &q->scale[n->id], &q->zp[n->id]);
        }
        q->has_params[n->id] = true;
    }
    return FX_OK;
}

FxStatus pass_quantize(Graph *g, const QuantizeOptions *o, QuantizeResult *res, Diag *d)
{
    memset(res, 0, sizeof *res);
    if (o->activation_type != FXRT_DTYPE_UINT8 && o->activation_type != FXRT_DTYPE_INT8)
        return diag_error(d, FX_ERR_INVALID, "activations quantize to uint8 or int8, not %s",
                          dtype_name(o->activation_type));
    int count = o->ranges->count;
    Quantizer q = {.g = g, .o = o, .res = res, .d = d, .count = count};
    q.seen = fx_alloc_array((size_t)count + 1, sizeof *q.seen);
    q.lo = fx_alloc_array((size_t)count + 1, sizeof *q.lo);
    q.hi = fx_alloc_array((size_t)count + 1, sizeof *q.hi);
    q.wanted = fx_alloc_array((size_t)count + 1, sizeof *q.wanted);
    q.layer = fx_alloc_array((size_t)count + 1, sizeof *q.layer);
    q.reported_as = fx_alloc_array((size_t)count + 1, sizeof *q.reported_as);
    q.scale = fx_alloc_array((size_t)count + 1, sizeof *q.scale);
    q.zp = fx_alloc_array((size_t)count + 1, sizeof *q.zp);
    q.has_params = fx_alloc_array((size_t)count + 1, sizeof *q.has_params);
    FxStatus st = q.seen && q.lo && q.hi && q.wanted && q.layer && q.reported_as && q.scale &&
                          q.zp && q.has_params
                      ? FX_OK
                      : diag_error(d, FX_ERR_NOMEM, "out of memory");
    if (st == FX_OK) {
        memcpy(q.seen, o->ranges->seen, (size_t)count * sizeof *q.seen);
        memcpy(q.lo, o->ranges->lo, (size_t)count * sizeof *q.lo);
        memcpy(q.hi, o->ranges->hi, (size_t)count * sizeof *q.hi);
        st = choose_values(&q);
    }
    /* Constants first (a bias needs its input's scale), then the pairs;
     * the nodes the walk creates have ids past `count` and are skipped. */
    graph_for_each(g, n) {
        if (st != FX_OK)
            break;
        if (n->id < count && q.layer[n->id]) {
            st = quantize_constants(&q, n);
            res->layers++;
        }
    }
    graph_for_each(g, n) {
        if (st != FX_OK)
            break;
        if (n->id < count && q.wanted[n->id] && q.has_params[n->id])
            st = insert_qdq(&q, n);
    }
    if (st == FX_OK)
        graph_eliminate_dead_code(g);
    quantizer_free(&q);
    if (st != FX_OK)
        quantize_result_free(res);
    return st;
}
