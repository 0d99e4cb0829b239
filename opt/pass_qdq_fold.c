/*
 * pass_qdq_fold.c - folds QDQ-format quantized graphs (ONNX Runtime's
 * quantize_static with QuantFormat.QDQ, fxcc's own calibration) into the
 * integer ops, so that a fully quantized model no longer runs as float:
 *
 *     Q(Conv(DQ(x), DQ(w), DQ(b)))      -> QLinearConv(x, .., w, .., y_scale, y_zp, b32)
 *     Q(Gemm(DQ(a), DQ(B), DQ(c)))      -> QGemm(a, .., B, .., c32, y_scale, y_zp)
 *     Q(MatMul(DQ(a), DQ(B)))           -> QLinearMatMul(a, .., B, .., y_scale, y_zp)
 *     Q(Add|Mul(DQ(a), DQ(b)))          -> QLinearAdd|QLinearMul
 *     Q(Concat(DQ(x0), DQ(x1), ...))    -> QLinearConcat
 *     Q(GlobalAveragePool|AveragePool|Softmax|Sigmoid|LeakyRelu(DQ(x)))
 *                                       -> the op's QLinear form
 *     Q(MaxPool|Flatten|Reshape|Squeeze|Unsqueeze(DQ(x))), Q's parameters
 *     equal to DQ's                     -> the op on the 8-bit x
 *
 * The DQ inputs must be per-tensor (one constant scale, a constant or absent
 * zero point), except the weights of Conv (per output channel, axis 0),
 * Gemm (per column of the product) and MatMul (per column), which must be
 * constant 8-bit data.  A bias becomes int32 in the scale x_scale x
 * w_scale[c] the integer ops need: a DQ of int32 whose scale is exactly
 * that product (what the quantizer writes) gives its integers as they are;
 * otherwise the float bias is rounded to that scale.  The float op must
 * have the Q as its only user, so nothing else reads the float value.  The
 * DQ nodes left without users are erased; the others stay.
 *
 * Runs first at -O1, before const-fold turns the DQ of a constant weight
 * into float weights.  The result is no longer bit-identical to the float
 * QDQ graph: the integer ops round once where the QDQ graph rounded the
 * float product (one quantization step at most, as ONNX Runtime's own QDQ
 * fusion does).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "opt.h"

/* Arguments of the largest node made here: QLinearConcat of 20 inputs. */
enum { FX_MAX_QDQ_ARGS = 2 + 3 * 20 };

/* A DequantizeLinear input: its 8-bit (or int32) data, scale and zero
 * point nodes, the constant scale and zero point, and the axis. */
typedef struct Dq {
    Node *x, *scale, *zp;
    const Tensor *s, *z; /* z NULL when the zero point is absent */
    int64_t axis;
} Dq;

static bool is_q8(DType t) { return t == FXRT_DTYPE_UINT8 || t == FXRT_DTYPE_INT8; }

/* v is a DequantizeLinear with constant parameters; per > 0 allows one
 * scale per element along its axis (`axis`, normalized) of `per` values. */
static bool dq_of(Node *v, Dq *q, int64_t per, int axis)
{
    if (!node_is_op(v, &fx_op_DequantizeLinear) || v->num_args < 2 || !v->args[0] || !v->args[1])
        return false;
    q->x = v->args[0];
    q->scale = v->args[1];
    q->zp = v->num_args > 2 ? v->args[2] : NULL;
    q->s = node_const_value(q->scale);
    q->z = q->zp ? node_const_value(q->zp) : NULL;
    const TensorType *xt = &q->x->out_types[0];
    if (!q->s || (q->zp && !q->z) || !q->x->shapes_known)
        return false;
    int64_t n = tensor_numel(q->s);
    if (n == 1)
        return true;
    int64_t ax = node_attr_int(v, "axis", 1);
    q->axis = ax < 0 ? ax + xt->rank : ax;
    return per > 0 && n == per && q->axis == axis;
}

/* A per-tensor DQ of 8-bit data (activations). */
static bool dq_activation(Node *v, Dq *q)
{
    return dq_of(v, q, 0, 0) && is_q8(q->x->out_types[0].dtype);
}

/* A DQ of constant 8-bit weights, per tensor or `per` values along axis. */
static bool dq_weight(Node *v, Dq *q, int64_t per, int axis)
{
    return dq_of(v, q, per, axis) && is_q8(q->x->out_types[0].dtype) && node_const_value(q->x);
}

static float scale_at(const Tensor *s, int64_t i)
{
    return ((const float *)s->data)[tensor_numel(s) == 1 ? 0 : i];
}

static int32_t zp_at(const Tensor *z, int64_t i)
{
    return z ? (int32_t)tensor_get_int(z, tensor_numel(z) == 1 ? 0 : i) : 0;
}

/* The zero point argument of a new node: the DQ's, or a new zero of type t
 * when it had none (the integer ops' zero points are typed). */
static FxStatus set_zero_point(Node *n, int slot, const Dq *q, DType t, Diag *d)
{
    if (q->zp)
        return node_set_arg(n, slot, q->zp) ? FX_OK
                                            : diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    TensorType zt = {.dtype = t, .rank = 0};
    return node_set_const_input(n, slot, "zero_point", tensor_new(&zt, d), d);
}

/* The int32 bias in the scale x_scale x w_scale[c] for `count` channels,
 * from a DQ or a float constant b, into *out (NULL when b is neither or a
 * value does not fit int32). */
static FxStatus int32_bias(Node *b, const Dq *x, const Dq *w, int64_t count, Tensor **out,
                           Diag *d)
{
    *out = NULL;
    Dq bq;
    bool from_dq = dq_of(b, &bq, count, 0) && bq.x->out_types[0].dtype == FXRT_DTYPE_INT32 &&
                   node_const_value(bq.x) && (!bq.z || (tensor_numel(bq.z) == 1 &&
                                                        zp_at(bq.z, 0) == 0));
    const Tensor *bf = from_dq ? node_const_value(bq.x) : node_const_value(b);
    if (!bf || tensor_numel(bf) != count || (!from_dq && bf->type.dtype != FXRT_DTYPE_FLOAT32))
        return FX_OK;
    TensorType bt = {.dtype = FXRT_DTYPE_INT32, .rank = 1, .dims = {count}};
    Tensor *t = tensor_new(&bt, d);
    if (!t)
        return FX_ERR_NOMEM;
    int32_t *v = t->data;
    for (int64_t c = 0; c < count; c++) {
        float want = scale_at(x->s, 0) * scale_at(w->s, c);
        if (from_dq && scale_at(bq.s, c) == want) {
            v[c] = (int32_t)tensor_get_int(bf, c);
            continue;
        }
        double real = from_dq ? (double)tensor_get_int(bf, c) * scale_at(bq.s, c)
                              : ((const float *)bf->data)[c];
        double q = nearbyint(real / want);
        if (!(fabs(q) < 2147483647.0)) {
            tensor_free(t);
            return FX_OK;
        }
        v[c] = (int32_t)q;
    }
    *out = t;
    return FX_OK;
}

/* Copies every attribute of src onto dst. */
static bool copy_attrs(Node *dst, const Node *src, Diag *d)
{
    for (int i = 0; i < src->num_attrs; i++)
        if (!node_copy_attr(dst, &src->attrs[i], d))
            return false;
    return true;
}

/* Creates op before `at` with args (NULL: nargs omitted arguments, set
 * afterwards) and the hint `NAME_quant`; NULL when out of memory. */
static Node *new_node(Graph *g, Node *at, const OpDef *op, Node *const *args, int nargs,
                      Diag *d)
{
    Node *none[FX_MAX_QDQ_ARGS] = {NULL};
    char hint[200];
    snprintf(hint, sizeof hint, "%s_quant", at->name);
    Node *n = nargs <= FX_MAX_QDQ_ARGS
                      ? graph_create_op(g, at, op, hint, args ? args : none, nargs)
                      : NULL;
    if (!n || !node_set_num_outputs(n, 1)) {
        diag_node_error(d, FX_ERR_NOMEM, at, "out of memory");
        return NULL;
    }
    return n;
}

static FxStatus finish_node(Graph *g, Node *n, Diag *d)
{
    FxStatus st = op_apply_attr_specs(n->op, n, d);
    if (st == FX_OK)
        st = node_infer_shapes(n, d);
    if (st != FX_OK)
        graph_erase_node(g, n);
    return st;
}

/* The Q's output parameters. */
typedef struct QOut {
    Node *scale, *zp;
    DType type;
    float s;
    int32_t z;
} QOut;

static bool q_params(Node *q, QOut *o)
{
    if (q->num_args < 2 || !q->args[1])
        return false;
    const Tensor *s = node_const_value(q->args[1]);
    Node *zp = q->num_args > 2 ? q->args[2] : NULL;
    const Tensor *z = zp ? node_const_value(zp) : NULL;
    if (!s || tensor_numel(s) != 1 || (zp && (!z || tensor_numel(z) != 1)))
        return false;
    o->scale = q->args[1];
    o->zp = zp;
    o->type = q->out_types[0].dtype;
    o->s = scale_at(s, 0);
    o->z = zp_at(z, 0);
    return is_q8(o->type);
}

/* Sets the output scale and zero point at slots si, si + 1. */
static FxStatus set_out(Node *n, int si, const QOut *o, Diag *d)
{
    if (!node_set_arg(n, si, o->scale))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    Dq as_dq = {.zp = o->zp};
    return set_zero_point(n, si + 1, &as_dq, o->type, d);
}

/* Sets a DQ's data, scale, zero point at slots i, i + 1, i + 2. */
static FxStatus set_dq(Node *n, int i, const Dq *q, Diag *d)
{
    if (!node_set_arg(n, i, q->x) || !node_set_arg(n, i + 1, q->scale))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    return set_zero_point(n, i + 2, q, q->x->out_types[0].dtype, d);
}

/* --- the folds: each returns the new node in *out, or leaves it NULL ------- */

static FxStatus fold_conv(Graph *g, Node *op, const QOut *o, Node **out, Diag *d)
{
    Dq x, w;
    if (op->num_args < 2 || !dq_activation(op->args[0], &x))
        return FX_OK;
    const TensorType *wt = node_input_type(op, 1);
    int64_t m = wt->rank > 0 ? wt->dims[0] : 0;
    if (!dq_weight(op->args[1], &w, m, 0))
        return FX_OK;
    Tensor *bias = NULL;
    bool has_bias = op->num_args > 2 && op->args[2];
    if (has_bias && int32_bias(op->args[2], &x, &w, m, &bias, d) != FX_OK)
        return FX_ERR_NOMEM;
    if (has_bias && !bias)
        return FX_OK;
    Node *n = new_node(g, op, &fx_op_QLinearConv, NULL, has_bias ? 9 : 8, d);
    FxStatus st = n ? FX_OK : FX_ERR_NOMEM;
    if (st == FX_OK && (!copy_attrs(n, op, d)))
        st = FX_ERR_NOMEM;
    if (st == FX_OK)
        st = set_dq(n, 0, &x, d);
    if (st == FX_OK)
        st = set_dq(n, 3, &w, d);
    if (st == FX_OK)
        st = set_out(n, 6, o, d);
    if (st == FX_OK && bias) {
        st = node_set_const_input(n, 8, "bias", bias, d);
        bias = NULL;
    }
    tensor_free(bias);
    if (st == FX_OK)
        st = finish_node(g, n, d);
    *out = st == FX_OK ? n : NULL;
    return st;
}

static FxStatus fold_gemm(Graph *g, Node *op, const QOut *o, Node **out, Diag *d)
{
    Dq a, b;
    bool tb = node_attr_int(op, "transB", 0) != 0;
    const TensorType *bt = node_input_type(op, 1);
    if (op->num_args < 2 || !dq_activation(op->args[0], &a) || bt->rank != 2 ||
        node_attr_float(op, "beta", 1.0f) != 1.0f)
        return FX_OK;
    int64_t cols = bt->dims[tb ? 0 : 1];
    if (!dq_weight(op->args[1], &b, cols, tb ? 0 : 1))
        return FX_OK;
    Tensor *bias = NULL;
    bool has_bias = op->num_args > 2 && op->args[2];
    if (has_bias && int32_bias(op->args[2], &a, &b, cols, &bias, d) != FX_OK)
        return FX_ERR_NOMEM;
    if (has_bias && !bias)
        return FX_OK;
    Node *n = new_node(g, op, &fx_op_QGemm, NULL, 9, d);
    FxStatus st = n ? FX_OK : FX_ERR_NOMEM;
    if (st == FX_OK &&
        (!node_set_attr_float(n, "alpha", node_attr_float(op, "alpha", 1.0f)) ||
         !node_set_attr_int(n, "transA", node_attr_int(op, "transA", 0)) ||
         !node_set_attr_int(n, "transB", tb)))
        st = diag_node_error(d, FX_ERR_NOMEM, op, "out of memory");
    if (st == FX_OK)
        st = set_dq(n, 0, &a, d);
    if (st == FX_OK)
        st = set_dq(n, 3, &b, d);
    if (st == FX_OK && bias) {
        st = node_set_const_input(n, 6, "bias", bias, d);
        bias = NULL;
    }
    tensor_free(bias);
    if (st == FX_OK)
        st = set_out(n, 7, o, d);
    if (st == FX_OK)
        st = finish_node(g, n, d);
    *out = st == FX_OK ? n : NULL;
    return st;
}

static FxStatus fold_matmul(Graph *g, Node *op, const QOut *o, Node **out, Diag *d)
{
    Dq a, b;
    const TensorType *bt = node_input_type(op, 1);
    if (!dq_activation(op->args[0], &a) || bt->rank != 2 ||
        !dq_weight(op->args[1], &b, bt->dims[1], 1))
        return FX_OK;
    Node *n = new_node(g, op, &fx_op_QLinearMatMul, NULL, 8, d);
    FxStatus st = n ? set_dq(n, 0, &a, d) : FX_ERR_NOMEM;
    if (st == FX_OK)
        st = set_dq(n, 3, &b, d);
    if (st == FX_OK)
        st = set_out(n, 6, o, d);
    if (st == FX_OK)
        st = finish_node(g, n, d);
    *out = st == FX_OK ? n : NULL;
    return st;
}

/* Add, Mul: both operands per-tensor DQs of the output's type. */
static FxStatus fold_binary(Graph *g, Node *op, const QOut *o, const OpDef *to, Node **out,
                            Diag *d)
{
    Dq a, b;
    if (!dq_activation(op->args[0], &a) || !dq_activation(op->args[1], &b) ||
        a.x->out_types[0].dtype != o->type || b.x->out_types[0].dtype != o->type)
        return FX_OK;
    Node *n = new_node(g, op, to, NULL, 8, d);
    FxStatus st = n ? set_dq(n, 0, &a, d) : FX_ERR_NOMEM;
    if (st == FX_OK)
        st = set_dq(n, 3, &b, d);
    if (st == FX_OK)
        st = set_out(n, 6, o, d);
    if (st == FX_OK)
        st = finish_node(g, n, d);
    *out = st == FX_OK ? n : NULL;
    return st;
}

static FxStatus fold_concat(Graph *g, Node *op, const QOut *o, Node **out, Diag *d)
{
    if (op->num_args > 20)
        return FX_OK;
    for (int i = 0; i < op->num_args; i++) {
        Dq x;
        if (!dq_activation(op->args[i], &x) || x.x->out_types[0].dtype != o->type)
            return FX_OK;
    }
    Node *n = new_node(g, op, &fx_op_QLinearConcat, NULL, 2 + 3 * op->num_args, d);
    FxStatus st = n ? set_out(n, 0, o, d) : FX_ERR_NOMEM;
    for (int i = 0; st == FX_OK && i < op->num_args; i++) {
        Dq x;
        dq_activation(op->args[i], &x);
        st = set_dq(n, 2 + 3 * i, &x, d);
    }
    if (st == FX_OK && !node_set_attr_int(n, "axis", node_attr_int(op, "axis", 0)))
        st = diag_node_error(d, FX_ERR_NOMEM, op, "out of memory");
    if (st == FX_OK)
        st = finish_node(g, n, d);
    *out = st == FX_OK ? n : NULL;
    return st;
}

/* The single-input ops with a QLinear form (X, X_scale, X_zp, Y_scale, Y_zp). */
static FxStatus fold_unary(Graph *g, Node *op, const QOut *o, const OpDef *to, Node **out,
                           Diag *d)
{
    Dq x;
    if (!dq_activation(op->args[0], &x) || x.x->out_types[0].dtype != o->type)
        return FX_OK;
    Node *n = new_node(g, op, to, NULL, 5, d);
    FxStatus st = n ? set_dq(n, 0, &x, d) : FX_ERR_NOMEM;
    if (st == FX_OK)
        st = set_out(n, 3, o, d);
    if (st == FX_OK && !copy_attrs(n, op, d))
        st = FX_ERR_NOMEM;
    /* fxcc's Softmax is ONNX 13's: one axis */
    if (st == FX_OK && to == &fx_op_QLinearSoftmax && !node_set_attr_int(n, "opset", 13))
        st = diag_node_error(d, FX_ERR_NOMEM, op, "out of memory");
    if (st == FX_OK)
        st = finish_node(g, n, d);
    *out = st == FX_OK ? n : NULL;
    return st;
}

/* Ops that commute with a quantization whose parameters stay the same:
 * the op itself on the 8-bit data. */
static FxStatus fold_commuting(Graph *g, Node *op, const QOut *o, Node **out, Diag *d)
{
    Dq x;
    if (!dq_activation(op->args[0], &x) || x.x->out_types[0].dtype != o->type ||
        scale_at(x.s, 0) != o->s || zp_at(x.z, 0) != o->z)
        return FX_OK;
    Node *n = new_node(g, op, op->op, op->args, op->num_args, d);
    FxStatus st = n ? FX_OK : FX_ERR_NOMEM;
    if (st == FX_OK && (!node_set_arg(n, 0, x.x) || !copy_attrs(n, op, d)))
        st = diag_node_error(d, FX_ERR_NOMEM, op, "out of memory");
    if (st == FX_OK)
        st = finish_node(g, n, d);
    *out = st == FX_OK ? n : NULL;
    return st;
}

static FxStatus fold_one(Graph *g, Node *op, const QOut *o, Node **out, Diag *d)
{
    *out = NULL;
    const OpDef *k = op->op;
    if (k == &fx_op_Conv)
        return fold_conv(g, op, o, out, d);
    if (k == &fx_op_Gemm)
        return fold_gemm(g, op, o, out, d);
    if (k == &fx_op_MatMul)
        return fold_matmul(g, op, o, out, d);
    if (k == &fx_op_Add)
        return fold_binary(g, op, o, &fx_op_QLinearAdd, out, d);
    if (k == &fx_op_Mul)
        return fold_binary(g, op, o, &fx_op_QLinearMul, out, d);
    if (k == &fx_op_Concat)
        return fold_concat(g, op, o, out, d);
    if (k == &fx_op_GlobalAveragePool)
        return fold_unary(g, op, o, &fx_op_QLinearGlobalAveragePool, out, d);
    if (k == &fx_op_AveragePool)
        return fold_unary(g, op, o, &fx_op_QLinearAveragePool, out, d);
    if (k == &fx_op_Softmax)
        return fold_unary(g, op, o, &fx_op_QLinearSoftmax, out, d);
    if (k == &fx_op_Sigmoid)
        return fold_unary(g, op, o, &fx_op_QLinearSigmoid, out, d);
    if (k == &fx_op_LeakyRelu)
        return fold_unary(g, op, o, &fx_op_QLinearLeakyRelu, out, d);
    if ((k == &fx_op_MaxPool && op->num_outputs == 1) || k == &fx_op_Flatten ||
        k == &fx_op_Reshape || k == &fx_op_Squeeze || k == &fx_op_Unsqueeze)
        return fold_commuting(g, op, o, out, d);
    return FX_OK;
}

FxStatus pass_qdq_fold(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, q)
    {
        if (!node_is_op(q, &fx_op_QuantizeLinear) || !q->args[0])
            continue;
        Node *op = q->args[0];
        QOut o;
        if (!node_is_call(op) || !op->op || op->num_users != 1 || op->num_args < 1 ||
            !op->args[0] || !op->shapes_known || !q_params(q, &o))
            continue;
        Node *n = NULL;
        if ((st = fold_one(g, op, &o, &n, d)) != FX_OK)
            break;
        if (!n)
            continue;
        if (node_replace_all_uses_with(q, n) < 0) {
            st = diag_node_error(d, FX_ERR_NOMEM, q, "out of memory");
            break;
        }
        r->changes++;
    }
    return pass_finish(g, r, st);
}
