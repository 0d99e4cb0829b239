/*
 * quant.c - the quantized ops of ONNX Runtime's `com.microsoft` domain that
 * its static quantizer writes in QOperator format: QGemm, QLinearAdd,
 * QLinearMul, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat,
 * QLinearSoftmax, QLinearSigmoid and QLinearLeakyRelu (semantics from ORT's
 * ContribOperators.md and its CPU kernels).  The frontend maps exactly these
 * op types of that domain here; the default domain's QLinearConv and
 * QLinearMatMul live in nn_conv.c and nn_gemm.c.
 *
 * Every op takes 8-bit data (uint8 or int8, one type for all its data
 * inputs and its output) with per-tensor float32 scales and zero points of
 * the data's type (an omitted zero point is 0); QGemm's B also per column.
 * The interpreter and the generated code call the same runtime kernels
 * (runtime/fxrt_nn_qlinear.c, fxrt_nn_quant.c), so both give the same
 * bytes.  QGemm, QLinearAdd/Mul, QLinearGlobalAveragePool and QLinearConcat
 * have integer kernels; the pool, Softmax, Sigmoid and LeakyRelu run as
 * ORT's own kernels do in effect: dequantize into float scratch, the float
 * kernel, quantize.
 *
 * Refused: QGemm without y_scale (a float output), a QGemm bias C that is
 * not one int32 per column, channels_last layouts, per-axis scales outside
 * QGemm's B (FX_ERR_UNSUPPORTED); mismatched element types (FX_ERR_INVALID).
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* --- shared checks and readers --------------------------------------------- */

static const TensorType *input_type(const InferCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static const Tensor *input_value(const EvalCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static FxStatus check_q8(InferCtx *c, const TensorType *t, const char *what, DType want)
{
    if (!t)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "%s is required", what);
    if (t->dtype != FXRT_DTYPE_UINT8 && t->dtype != FXRT_DTYPE_INT8)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "%s must be uint8 or int8, not %s",
                               what, dtype_name(t->dtype));
    if (want != FXRT_DTYPE_UNDEFINED && t->dtype != want)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "%s is %s; it must be %s like the "
                               "op's other 8-bit values", what, dtype_name(t->dtype),
                               dtype_name(want));
    return FX_OK;
}

/* A scale (required) or zero point (optional, of type zp_type): one value,
 * or `per` values when per > 0. */
static FxStatus check_qparam(InferCtx *c, int i, const char *what, bool is_scale, DType zp_type,
                             int64_t per)
{
    const TensorType *t = input_type(c, i);
    if (!t) {
        if (is_scale)
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "%s is required", what);
        return FX_OK;
    }
    DType want = is_scale ? FXRT_DTYPE_FLOAT32 : zp_type;
    if (t->dtype != want)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "%s must be %s, not %s", what,
                               dtype_name(want), dtype_name(t->dtype));
    int64_t n = type_numel(t);
    if (n != 1 && !(per > 0 && n == per))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "%s has %lld values; only one%s is supported", what, (long long)n,
                               per > 0 ? " or one per column" : " (a per-tensor parameter)");
    return FX_OK;
}

static float scale_of(const Tensor *t) { return *(const float *)t->data; }

static int32_t zero_point_of(const Tensor *t) { return t ? (int32_t)tensor_get_int(t, 0) : 0; }

static const void *data_or_null(const Tensor *t) { return t ? t->data : NULL; }

/* The channels_last attribute of the pools: only 0 (NCHW). */
static FxStatus check_nchw(InferCtx *c)
{
    if (node_attr_int(c->node, "channels_last", 0) != 0)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "channels_last = 1 is not supported (NCHW only)");
    return FX_OK;
}

/* x_nhwc (set by opt/pass_qconv_nhwc.c, not ONNX Runtime's channels_last,
 * which is NHWC on both sides): X is [N, H, W, C], Y still [N, C, 1, 1]
 * (the same bytes as [N, 1, 1, C]).  Only for windows that are the whole
 * image. */
static const AttrSpec global_pool_attrs[] = {
    {"channels_last", FX_ATTR_INT, "0", false},
    {"x_nhwc", FX_ATTR_INT, NULL, false}, /* absent: 0 */
    {NULL},
};

static bool reads_nhwc(const Node *n) { return node_attr_int(n, "x_nhwc", 0) != 0; }

/* X's type as NCHW: its own, or [N, C, H, W] for an x_nhwc pool's [N, H, W,
 * C] (rank 4, checked by check_nhwc_rank). */
static TensorType nchw_view(const Node *n, const TensorType *x)
{
    TensorType v = *x;
    if (reads_nhwc(n) && x->rank == 4) {
        v.dims[1] = x->dims[3];
        v.dims[2] = x->dims[1];
        v.dims[3] = x->dims[2];
    }
    return v;
}

/* --- QLinearAdd, QLinearMul -------------------------------------------------- */

enum { QB_A, QB_A_SCALE, QB_A_ZP, QB_B, QB_B_SCALE, QB_B_ZP, QB_C_SCALE, QB_C_ZP };

static FxStatus qlinear_binary_infer(InferCtx *c)
{
    const TensorType *a = c->in[QB_A];
    FxStatus st;
    if ((st = check_q8(c, a, "A", FXRT_DTYPE_UNDEFINED)) != FX_OK ||
        (st = check_q8(c, input_type(c, QB_B), "B", a->dtype)) != FX_OK ||
        (st = check_qparam(c, QB_A_SCALE, "A_scale", true, a->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, QB_A_ZP, "A_zero_point", false, a->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, QB_B_SCALE, "B_scale", true, a->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, QB_B_ZP, "B_zero_point", false, a->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, QB_C_SCALE, "C_scale", true, a->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, QB_C_ZP, "C_zero_point", false, a->dtype, 0)) != FX_OK)
        return st;
    if ((st = infer_broadcast(c, a, c->in[QB_B], &c->out[0])) != FX_OK)
        return st;
    c->out[0].dtype = a->dtype;
    return FX_OK;
}

/* The broadcast strides of A and B over Y's dims. */
static void qlinear_binary_strides(const Node *n, const TensorType *a, const TensorType *b,
                                   int64_t *sa, int64_t *sb)
{
    const TensorType *y = &n->out_types[0];
    fxrt_broadcast_strides(y->rank, y->dims, a->rank, a->dims, sa);
    fxrt_broadcast_strides(y->rank, y->dims, b->rank, b->dims, sb);
}

static FxrtQLinearOp qlinear_binary_op(const Node *n)
{
    return n->op == &fx_op_QLinearMul ? FXRT_QLINEAR_MUL : FXRT_QLINEAR_ADD;
}

static FxStatus qlinear_binary_eval(EvalCtx *c)
{
    const Tensor *a = c->in[QB_A], *b = c->in[QB_B];
    Tensor *y = c->out[0];
    int64_t sa[FX_MAX_RANK], sb[FX_MAX_RANK];
    qlinear_binary_strides(c->node, &a->type, &b->type, sa, sb);
    fxrt_qlinear_binary(qlinear_binary_op(c->node), a->type.dtype, y->type.rank, y->type.dims,
                        a->data, sa, scale_of(c->in[QB_A_SCALE]),
                        zero_point_of(input_value(c, QB_A_ZP)), b->data, sb,
                        scale_of(c->in[QB_B_SCALE]), zero_point_of(input_value(c, QB_B_ZP)),
                        scale_of(c->in[QB_C_SCALE]), zero_point_of(input_value(c, QB_C_ZP)),
                        y->data);
    return FX_OK;
}

static FxStatus qlinear_binary_emit(EmitCtx *c)
{
    const Node *n = c->node;
    const TensorType *a = node_input_type(n, QB_A), *b = node_input_type(n, QB_B);
    const TensorType *y = &n->out_types[0];
    int64_t sa[FX_MAX_RANK], sb[FX_MAX_RANK];
    qlinear_binary_strides(n, a, b, sa, sb);
    char azp[64], bzp[64], czp[64];
    emit_int64_array(c, "dims", y->dims, y->rank);
    emit_int64_array(c, "sa", sa, y->rank);
    emit_int64_array(c, "sb", sb, y->rank);
    emit_line(c, "fxrt_qlinear_binary(%s, %s, /*rank=*/%d, dims, %s, sa, %s[0], %s, %s, sb, "
                 "%s[0], %s, %s[0], %s, %s);",
              qlinear_binary_op(n) == FXRT_QLINEAR_MUL ? "FXRT_QLINEAR_MUL" : "FXRT_QLINEAR_ADD",
              c_dtype_enum(a->dtype), y->rank, c->in[QB_A], c->in[QB_A_SCALE],
              nn_zero_point_expr(c, QB_A_ZP, azp, sizeof azp), c->in[QB_B], c->in[QB_B_SCALE],
              nn_zero_point_expr(c, QB_B_ZP, bzp, sizeof bzp), c->in[QB_C_SCALE],
              nn_zero_point_expr(c, QB_C_ZP, czp, sizeof czp), c->out[0]);
    return FX_OK;
}

static const AttrSpec no_attrs[] = {{NULL}};

const OpDef fx_op_QLinearAdd = {
    .name = "QLinearAdd",
    .min_inputs = 7, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
    .attrs = no_attrs,
    .infer = qlinear_binary_infer,
    .eval = qlinear_binary_eval,
    .emit = qlinear_binary_emit,
};

const OpDef fx_op_QLinearMul = {
    .name = "QLinearMul",
    .min_inputs = 7, .max_inputs = 8, .min_outputs = 1, .max_outputs = 1,
    .attrs = no_attrs,
    .infer = qlinear_binary_infer,
    .eval = qlinear_binary_eval,
    .emit = qlinear_binary_emit,
};

/* --- the single-input ops: X, X_scale, X_zero_point, Y_scale, Y_zero_point -- */

enum { QU_X, QU_X_SCALE, QU_X_ZP, QU_Y_SCALE, QU_Y_ZP };

static FxStatus check_nhwc_rank(InferCtx *c)
{
    if (reads_nhwc(c->node) && c->in[QU_X]->rank != 4)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "x_nhwc needs a rank-4 X, not rank %d", c->in[QU_X]->rank);
    return FX_OK;
}

static FxStatus qlinear_unary_check(InferCtx *c)
{
    const TensorType *x = c->in[QU_X];
    FxStatus st;
    if ((st = check_q8(c, x, "X", FXRT_DTYPE_UNDEFINED)) != FX_OK ||
        (st = check_qparam(c, QU_X_SCALE, "X_scale", true, x->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, QU_X_ZP, "X_zero_point", false, x->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, QU_Y_SCALE, "Y_scale", true, x->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, QU_Y_ZP, "Y_zero_point", false, x->dtype, 0)) != FX_OK)
        return st;
    return FX_OK;
}

/* planes (N x C) and size (the spatial product) of a global pool's X. */
static void global_pool_geometry(const TensorType *x, int64_t *planes, int64_t *size)
{
    *planes = x->dims[0] * x->dims[1];
    *size = layout_dims_product(x->dims, 2, x->rank);
}

static FxStatus qlinear_global_avgpool_infer(InferCtx *c)
{
    FxStatus st;
    if ((st = qlinear_unary_check(c)) != FX_OK || (st = check_nchw(c)) != FX_OK ||
        (st = check_nhwc_rank(c)) != FX_OK)
        return st;
    const TensorType x = nchw_view(c->node, c->in[QU_X]);
    if (x.rank < 3)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "X has rank %d; N, C and at least one spatial axis are needed",
                               x.rank);
    c->out[0] = x;
    for (int d = 2; d < x.rank; d++)
        c->out[0].dims[d] = 1;
    if (type_numel(&x) > 0 && layout_dims_product(x.dims, 2, x.rank) == 0)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "X has no spatial elements");
    return FX_OK;
}

static FxStatus qlinear_global_avgpool_eval(EvalCtx *c)
{
    const Tensor *x = c->in[QU_X];
    const TensorType v = nchw_view(c->node, &x->type);
    int64_t planes, size;
    global_pool_geometry(&v, &planes, &size);
    float xs = scale_of(c->in[QU_X_SCALE]), ys = scale_of(c->in[QU_Y_SCALE]);
    int32_t xzp = zero_point_of(input_value(c, QU_X_ZP));
    int32_t yzp = zero_point_of(input_value(c, QU_Y_ZP));
    if (planes > 0 && reads_nhwc(c->node))
        fxrt_qlinear_global_avgpool_nhwc(v.dtype, v.dims[0], size, v.dims[1], x->data, xs, xzp,
                                         ys, yzp, c->out[0]->data);
    else if (planes > 0)
        fxrt_qlinear_global_avgpool(v.dtype, planes, size, x->data, xs, xzp, ys, yzp,
                                    c->out[0]->data);
    return FX_OK;
}

static FxStatus qlinear_global_avgpool_emit(EmitCtx *c)
{
    const TensorType x = nchw_view(c->node, node_input_type(c->node, QU_X));
    int64_t planes, size;
    global_pool_geometry(&x, &planes, &size);
    if (planes == 0)
        return FX_OK;
    char xzp[64], yzp[64];
    nn_zero_point_expr(c, QU_X_ZP, xzp, sizeof xzp);
    nn_zero_point_expr(c, QU_Y_ZP, yzp, sizeof yzp);
    if (reads_nhwc(c->node))
        emit_line(c, "fxrt_qlinear_global_avgpool_nhwc(%s, /*batch=*/%lld, /*size=*/%lld, "
                     "/*channels=*/%lld, %s, %s[0], %s, %s[0], %s, %s);",
                  c_dtype_enum(x.dtype), (long long)x.dims[0], (long long)size,
                  (long long)x.dims[1], c->in[QU_X], c->in[QU_X_SCALE], xzp, c->in[QU_Y_SCALE],
                  yzp, c->out[0]);
    else
        emit_line(c, "fxrt_qlinear_global_avgpool(%s, /*planes=*/%lld, /*size=*/%lld, %s, %s[0], "
                     "%s, %s[0], %s, %s);",
                  c_dtype_enum(x.dtype), (long long)planes, (long long)size, c->in[QU_X],
                  c->in[QU_X_SCALE], xzp, c->in[QU_Y_SCALE], yzp, c->out[0]);
    return FX_OK;
}

const OpDef fx_op_QLinearGlobalAveragePool = {
    .name = "QLinearGlobalAveragePool",
    .min_inputs = 5, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .attrs = global_pool_attrs,
    .infer = qlinear_global_avgpool_infer,
    .eval = qlinear_global_avgpool_eval,
    .emit = qlinear_global_avgpool_emit,
};

/* --- the float-path ops: AveragePool, Softmax, Sigmoid, LeakyRelu ------------
 *
 * Y = quantize(f(dequantize(X))) with f the float kernel; the interpreter
 * and the generated code both go through float buffers of X's and Y's
 * element counts (the generated code in scratch), but for AveragePool,
 * whose kernel (fxrt_qlinear_avgpool) dequantizes each tap as it sums, in
 * the same float operations, and needs no buffer: a global pool at the
 * end of a small model would otherwise take four times its input in RAM. */

typedef struct FloatPath {
    FxrtPoolParams pool;          /* QLinearAveragePool */
    int64_t outer, len, inner;    /* QLinearSoftmax */
    float alpha;                  /* QLinearLeakyRelu */
} FloatPath;

/* The softmax geometry: before opset 13, the input is a 2-D matrix split at
 * axis (ONNX's old Softmax); from 13 on, the one axis. */
static FxStatus softmax_geometry(const Node *n, Diag *d, const TensorType *x, FloatPath *fp)
{
    int64_t axis = node_attr_int(n, "axis", -1), opset = node_attr_int(n, "opset", 13);
    if (axis < -x->rank || axis >= (x->rank > 0 ? x->rank : 1))
        return diag_node_error(d, FX_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                               (long long)axis, x->rank);
    int ax = (int)(axis < 0 ? axis + x->rank : axis);
    fp->outer = layout_dims_product(x->dims, 0, ax);
    if (opset < 13) {
        fp->len = layout_dims_product(x->dims, ax, x->rank);
        fp->inner = 1;
    } else {
        fp->len = x->rank > 0 ? x->dims[ax] : 1;
        fp->inner = layout_dims_product(x->dims, ax + 1, x->rank);
    }
    return FX_OK;
}

static FxStatus float_path_plan(const Node *n, Diag *d, const TensorType *x, FloatPath *fp,
                                TensorType *out)
{
    memset(fp, 0, sizeof *fp);
    *out = *x;
    if (n->op == &fx_op_QLinearAveragePool) {
        const TensorType v = nchw_view(n, x);
        FxStatus st = nn_pool_params(n, d, &v, &fp->pool, out);
        out->dtype = x->dtype;
        if (st == FX_OK && reads_nhwc(n) && !fxrt_pool_window_is_plane(&fp->pool))
            return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                                   "x_nhwc needs one unpadded window over the whole image");
        return st;
    }
    if (n->op == &fx_op_QLinearSoftmax)
        return softmax_geometry(n, d, x, fp);
    fp->alpha = node_attr_float(n, "alpha", 0.01f);
    return FX_OK;
}

static FxStatus float_path_infer(InferCtx *c)
{
    FxStatus st;
    if ((st = qlinear_unary_check(c)) != FX_OK)
        return st;
    if (c->node->op == &fx_op_QLinearAveragePool &&
        ((st = check_nchw(c)) != FX_OK || (st = check_nhwc_rank(c)) != FX_OK))
        return st;
    FloatPath fp;
    return float_path_plan(c->node, c->diag, c->in[QU_X], &fp, &c->out[0]);
}

static void float_path_run(const Node *n, const FloatPath *fp, const float *x, float *y,
                           int64_t count)
{
    if (n->op == &fx_op_QLinearAveragePool)
        fxrt_avgpool_f32(&fp->pool, x, y);
    else if (n->op == &fx_op_QLinearSoftmax)
        fxrt_softmax_f32(fp->outer, fp->len, fp->inner, x, y);
    else if (n->op == &fx_op_QLinearSigmoid)
        fxrt_unary_f32(FXRT_UNARY_SIGMOID, x, y, (size_t)count, NULL);
    else
        fxrt_unary_f32(FXRT_UNARY_LEAKY_RELU, x, y, (size_t)count, &fp->alpha);
}

static FxStatus float_path_eval(EvalCtx *c)
{
    const Tensor *x = c->in[QU_X];
    Tensor *y = c->out[0];
    FloatPath fp;
    TensorType out;
    FxStatus st = float_path_plan(c->node, c->diag, &x->type, &fp, &out);
    if (st != FX_OK)
        return st;
    int64_t nx = tensor_numel(x), ny = tensor_numel(y);
    if (c->node->op == &fx_op_QLinearAveragePool) {
        float xs = scale_of(c->in[QU_X_SCALE]), ys = scale_of(c->in[QU_Y_SCALE]);
        int32_t xzp = zero_point_of(input_value(c, QU_X_ZP));
        int32_t yzp = zero_point_of(input_value(c, QU_Y_ZP));
        if (reads_nhwc(c->node))
            fxrt_qlinear_avgpool_whole_nhwc(x->type.dtype, x->type.dims[0],
                                            x->type.dims[1] * x->type.dims[2], x->type.dims[3],
                                            x->data, xs, xzp, ys, yzp, y->data);
        else
            fxrt_qlinear_avgpool(&fp.pool, x->type.dtype, x->data, xs, xzp, ys, yzp, y->data);
        return FX_OK;
    }
    float *fx = fx_alloc_array((size_t)(nx > 0 ? nx : 1), sizeof *fx);
    float *fy = fx_alloc_array((size_t)(ny > 0 ? ny : 1), sizeof *fy);
    if (!fx || !fy) {
        free(fx);
        free(fy);
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    }
    (void)fxrt_dequantize_linear(x->type.dtype, x->data, 1, 1, (size_t)nx,
                                 c->in[QU_X_SCALE]->data, data_or_null(input_value(c, QU_X_ZP)),
                                 fx);
    float_path_run(c->node, &fp, fx, fy, nx);
    (void)fxrt_quantize_linear(FXRT_DTYPE_FLOAT32, fy, 1, 1, (size_t)ny,
                               c->in[QU_Y_SCALE]->data, y->type.dtype,
                               data_or_null(input_value(c, QU_Y_ZP)), y->data);
    free(fx);
    free(fy);
    return FX_OK;
}

/* Scratch: X as float, then Y as float (AveragePool: none). */
static size_t float_path_scratch(const Node *n)
{
    if (n->op == &fx_op_QLinearAveragePool)
        return 0;
    return nn_align64((size_t)type_numel(node_input_type(n, QU_X)) * sizeof(float)) +
           nn_align64((size_t)type_numel(&n->out_types[0]) * sizeof(float));
}

static FxStatus float_path_emit(EmitCtx *c)
{
    const Node *n = c->node;
    const TensorType *x = node_input_type(n, QU_X), *y = &n->out_types[0];
    FloatPath fp;
    TensorType out;
    FxStatus st = float_path_plan(n, c->diag, x, &fp, &out);
    if (st != FX_OK)
        return st;
    int64_t nx = type_numel(x), ny = type_numel(y);
    if (nx == 0 || ny == 0)
        return FX_OK;
    const char *xzp = nn_emit_input(c, QU_X_ZP), *yzp = nn_emit_input(c, QU_Y_ZP);
    if (n->op == &fx_op_QLinearAveragePool) {
        char xz[200], yz[200];
        snprintf(xz, sizeof xz, "(int32_t)%s[0]", xzp ? xzp : "");
        snprintf(yz, sizeof yz, "(int32_t)%s[0]", yzp ? yzp : "");
        if (reads_nhwc(n)) {
            emit_line(c, "fxrt_qlinear_avgpool_whole_nhwc(%s, /*batch=*/%lld, /*size=*/%lld, "
                         "/*channels=*/%lld, %s, %s[0], %s, %s[0], %s, %s);",
                      c_dtype_enum(x->dtype), (long long)x->dims[0],
                      (long long)(x->dims[1] * x->dims[2]), (long long)x->dims[3], c->in[QU_X],
                      c->in[QU_X_SCALE], xzp ? xz : "0", c->in[QU_Y_SCALE], yzp ? yz : "0",
                      c->out[0]);
            return FX_OK;
        }
        nn_pool_emit_params(c, &fp.pool);
        emit_line(c, "fxrt_qlinear_avgpool(&p, %s, %s, %s[0], %s, %s[0], %s, %s);",
                  c_dtype_enum(x->dtype), c->in[QU_X], c->in[QU_X_SCALE], xzp ? xz : "0",
                  c->in[QU_Y_SCALE], yzp ? yz : "0", c->out[0]);
        return FX_OK;
    }
    emit_line(c, "float *const fx = (float *)(%s);", c->scratch);
    emit_line(c, "float *const fy = (float *)((unsigned char *)(%s) + %zu);", c->scratch,
              nn_align64((size_t)nx * sizeof(float)));
    emit_line(c, "(void)fxrt_dequantize_linear(%s, %s, 1, 1, %lld, %s, %s, fx);",
              c_dtype_enum(x->dtype), c->in[QU_X], (long long)nx, c->in[QU_X_SCALE],
              xzp ? xzp : "NULL");
    if (n->op == &fx_op_QLinearAveragePool) {
        nn_pool_emit_params(c, &fp.pool);
        emit_line(c, "fxrt_avgpool_f32(&p, fx, fy);");
    } else if (n->op == &fx_op_QLinearSoftmax) {
        emit_line(c, "fxrt_softmax_f32(/*outer=*/%lld, /*len=*/%lld, /*inner=*/%lld, fx, fy);",
                  (long long)fp.outer, (long long)fp.len, (long long)fp.inner);
    } else if (n->op == &fx_op_QLinearSigmoid) {
        emit_line(c, "fxrt_unary_f32(FXRT_UNARY_SIGMOID, fx, fy, %lld, NULL);", (long long)nx);
    } else {
        char alpha[48];
        emit_line(c, "static const float alpha = %s;",
                  c_float_literal(fp.alpha, alpha, sizeof alpha));
        emit_line(c, "fxrt_unary_f32(FXRT_UNARY_LEAKY_RELU, fx, fy, %lld, &alpha);",
                  (long long)nx);
    }
    emit_line(c, "(void)fxrt_quantize_linear(FXRT_DTYPE_FLOAT32, fy, 1, 1, %lld, %s, %s, %s, %s);",
              (long long)ny, c->in[QU_Y_SCALE], c_dtype_enum(y->dtype), yzp ? yzp : "NULL",
              c->out[0]);
    return FX_OK;
}

static const AttrSpec qlinear_avgpool_attrs[] = {
    {"auto_pad", FX_ATTR_STRING, "NOTSET", false},
    {"ceil_mode", FX_ATTR_INT, "0", false},
    {"channels_last", FX_ATTR_INT, "0", false},
    {"count_include_pad", FX_ATTR_INT, "0", false},
    {"dilations", FX_ATTR_INTS, NULL, false},
    {"kernel_shape", FX_ATTR_INTS, NULL, true},
    {"pads", FX_ATTR_INTS, NULL, false},
    {"strides", FX_ATTR_INTS, NULL, false},
    {"x_nhwc", FX_ATTR_INT, NULL, false}, /* as global_pool_attrs' */
    {NULL},
};

const OpDef fx_op_QLinearAveragePool = {
    .name = "QLinearAveragePool",
    .min_inputs = 4, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .attrs = qlinear_avgpool_attrs,
    .canonicalize = nn_pool_canonicalize,
    .infer = float_path_infer,
    .eval = float_path_eval,
    .scratch_bytes = float_path_scratch,
    .emit = float_path_emit,
};

static const AttrSpec qlinear_softmax_attrs[] = {
    {"axis", FX_ATTR_INT, "-1", false},
    {"opset", FX_ATTR_INT, NULL, true},
    {NULL},
};

const OpDef fx_op_QLinearSoftmax = {
    .name = "QLinearSoftmax",
    .min_inputs = 4, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .attrs = qlinear_softmax_attrs,
    .infer = float_path_infer,
    .eval = float_path_eval,
    .scratch_bytes = float_path_scratch,
    .emit = float_path_emit,
};

const OpDef fx_op_QLinearSigmoid = {
    .name = "QLinearSigmoid",
    .min_inputs = 4, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .attrs = no_attrs,
    .infer = float_path_infer,
    .eval = float_path_eval,
    .scratch_bytes = float_path_scratch,
    .emit = float_path_emit,
};

static const AttrSpec qlinear_leaky_relu_attrs[] = {
    {"alpha", FX_ATTR_FLOAT, "0.01", false},
    {NULL},
};

const OpDef fx_op_QLinearLeakyRelu = {
    .name = "QLinearLeakyRelu",
    .min_inputs = 4, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .attrs = qlinear_leaky_relu_attrs,
    .infer = float_path_infer,
    .eval = float_path_eval,
    .scratch_bytes = float_path_scratch,
    .emit = float_path_emit,
};

/* --- QLinearConcat: Y_scale, Y_zero_point, then (X, X_scale, X_zp) triples -- */

static int concat_axis(const Node *n, int rank)
{
    int64_t axis = node_attr_int(n, "axis", 0);
    return (int)(axis < 0 ? axis + rank : axis);
}

static FxStatus qlinear_concat_infer(InferCtx *c)
{
    if (c->num_inputs < 5 || (c->num_inputs - 2) % 3 != 0)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "QLinearConcat takes Y_scale, "
                               "Y_zero_point and then (X, X_scale, X_zero_point) triples; it "
                               "has %d inputs", c->num_inputs);
    const TensorType *x0 = c->in[2];
    FxStatus st;
    if ((st = check_q8(c, x0, "the first X", FXRT_DTYPE_UNDEFINED)) != FX_OK ||
        (st = check_qparam(c, 0, "Y_scale", true, x0->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, 1, "Y_zero_point", false, x0->dtype, 0)) != FX_OK)
        return st;
    int ax;
    if ((st = infer_axis(c, node_attr_int(c->node, "axis", 0), x0->rank, &ax)) != FX_OK)
        return st;
    c->out[0] = *x0;
    c->out[0].dims[ax] = 0;
    for (int i = 2; i < c->num_inputs; i += 3) {
        const TensorType *x = c->in[i];
        if ((st = check_q8(c, x, "X", x0->dtype)) != FX_OK ||
            (st = check_qparam(c, i + 1, "X_scale", true, x0->dtype, 0)) != FX_OK ||
            (st = check_qparam(c, i + 2, "X_zero_point", false, x0->dtype, 0)) != FX_OK)
            return st;
        bool same = x->rank == x0->rank;
        for (int d = 0; same && d < x->rank; d++)
            same = d == ax || x->dims[d] == x0->dims[d];
        if (!same)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "input %d's shape differs from the first X's off axis %d", i,
                                   ax);
        c->out[0].dims[ax] += x->dims[ax];
    }
    return FX_OK;
}

static FxStatus qlinear_concat_eval(EvalCtx *c)
{
    const TensorType *y = &c->out[0]->type;
    int ax = concat_axis(c->node, y->rank);
    int64_t outer = layout_dims_product(y->dims, 0, ax);
    int64_t row = layout_dims_product(y->dims, ax, y->rank), offset = 0;
    for (int i = 2; i < c->num_inputs; i += 3) {
        const Tensor *x = c->in[i];
        int64_t part = layout_dims_product(x->type.dims, ax, x->type.rank);
        fxrt_qlinear_concat_part(x->type.dtype, outer, part, row, x->data,
                                 scale_of(c->in[i + 1]), zero_point_of(input_value(c, i + 2)),
                                 scale_of(c->in[0]), zero_point_of(input_value(c, 1)),
                                 (unsigned char *)c->out[0]->data + offset);
        offset += part;
    }
    return FX_OK;
}

static FxStatus qlinear_concat_emit(EmitCtx *c)
{
    const Node *n = c->node;
    const TensorType *y = &n->out_types[0];
    if (type_numel(y) == 0)
        return FX_OK;
    int ax = concat_axis(n, y->rank);
    int64_t outer = layout_dims_product(y->dims, 0, ax);
    int64_t row = layout_dims_product(y->dims, ax, y->rank), offset = 0;
    char xzp[64], yzp[64];
    nn_zero_point_expr(c, 1, yzp, sizeof yzp);
    for (int i = 2; i < c->num_inputs; i += 3) {
        const TensorType *x = node_input_type(n, i);
        int64_t part = layout_dims_product(x->dims, ax, x->rank);
        if (part > 0)
            emit_line(c, "fxrt_qlinear_concat_part(%s, /*outer=*/%lld, /*part=*/%lld, "
                         "/*row=*/%lld, %s, %s[0], %s, %s[0], %s, %s + %lld);",
                      c_dtype_enum(x->dtype), (long long)outer, (long long)part, (long long)row,
                      c->in[i], c->in[i + 1], nn_zero_point_expr(c, i + 2, xzp, sizeof xzp),
                      c->in[0], yzp, c->out[0], (long long)offset);
        offset += part;
    }
    return FX_OK;
}

static const AttrSpec qlinear_concat_attrs[] = {
    {"axis", FX_ATTR_INT, NULL, true},
    {NULL},
};

const OpDef fx_op_QLinearConcat = {
    .name = "QLinearConcat",
    .min_inputs = 5, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
    .attrs = qlinear_concat_attrs,
    .infer = qlinear_concat_infer,
    .eval = qlinear_concat_eval,
    .emit = qlinear_concat_emit,
};

/* --- QGemm -------------------------------------------------------------------
 *
 * Y = quantize(alpha x (A - a_zp)(B - b_zp) x a_scale x b_scale + C x a_scale
 * x b_scale) with A, B optionally transposed and C int32 (scale a_scale x
 * b_scale, zero point 0): the int32 product, then fxrt_requantize with the
 * per-column multiplier a_scale x b_scale[j] x alpha / y_scale (ORT's
 * order, in float). */

enum { QG_A, QG_A_SCALE, QG_A_ZP, QG_B, QG_B_SCALE, QG_B_ZP, QG_C, QG_Y_SCALE, QG_Y_ZP };

typedef struct QGemmShape {
    int64_t m, n, k;
    int64_t a_row, a_col, b_row, b_col; /* element strides of A[i][p] and B[p][j] */
} QGemmShape;

static FxStatus qgemm_shape(const Node *node, Diag *d, const TensorType *a, const TensorType *b,
                            QGemmShape *s)
{
    if (a->rank != 2 || b->rank != 2)
        return diag_node_error(d, FX_ERR_SHAPE, node, "A and B must be matrices (rank %d, %d)",
                               a->rank, b->rank);
    bool ta = node_attr_int(node, "transA", 0) != 0, tb = node_attr_int(node, "transB", 0) != 0;
    s->m = a->dims[ta ? 1 : 0];
    s->k = a->dims[ta ? 0 : 1];
    s->n = b->dims[tb ? 0 : 1];
    int64_t kb = b->dims[tb ? 1 : 0];
    if (kb != s->k)
        return diag_node_error(d, FX_ERR_SHAPE, node, "A has %lld columns, B %lld rows "
                               "(after transA, transB)", (long long)s->k, (long long)kb);
    s->a_row = ta ? 1 : s->k;
    s->a_col = ta ? s->m : 1;
    s->b_row = tb ? 1 : s->n;
    s->b_col = tb ? s->k : 1;
    return FX_OK;
}

static FxStatus qgemm_infer(InferCtx *c)
{
    const TensorType *a = c->in[QG_A], *b = input_type(c, QG_B);
    FxStatus st;
    if ((st = check_q8(c, a, "A", FXRT_DTYPE_UNDEFINED)) != FX_OK ||
        (st = check_q8(c, b, "B", FXRT_DTYPE_UNDEFINED)) != FX_OK)
        return st;
    QGemmShape s;
    if ((st = qgemm_shape(c->node, c->diag, a, b, &s)) != FX_OK)
        return st;
    if (!input_type(c, QG_Y_SCALE))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "QGemm without y_scale (a float output) is not supported");
    const TensorType *bias = input_type(c, QG_C), *yzp = input_type(c, QG_Y_ZP);
    DType yt = yzp ? yzp->dtype : FXRT_DTYPE_UINT8;
    if ((st = check_qparam(c, QG_A_SCALE, "a_scale", true, a->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, QG_A_ZP, "a_zero_point", false, a->dtype, 0)) != FX_OK ||
        (st = check_qparam(c, QG_B_SCALE, "b_scale", true, b->dtype, s.n)) != FX_OK ||
        (st = check_qparam(c, QG_B_ZP, "b_zero_point", false, b->dtype, s.n)) != FX_OK ||
        (st = check_qparam(c, QG_Y_SCALE, "y_scale", true, yt, 0)) != FX_OK ||
        (yzp && (st = check_q8(c, yzp, "y_zero_point", FXRT_DTYPE_UNDEFINED)) != FX_OK))
        return st;
    if (bias && (bias->dtype != FXRT_DTYPE_INT32 || type_numel(bias) != s.n ||
                 bias->dims[bias->rank - 1] != s.n))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "C must be int32 with one value per column (%lld); it is %s "
                               "with %lld values", (long long)s.n, dtype_name(bias->dtype),
                               (long long)type_numel(bias));
    TensorType *y = &c->out[0];
    memset(y, 0, sizeof *y);
    y->dtype = yt;
    y->rank = 2;
    y->dims[0] = s.m;
    y->dims[1] = s.n;
    return FX_OK;
}

static FxStatus qgemm_eval(EvalCtx *c)
{
    const Tensor *a = c->in[QG_A], *b = c->in[QG_B];
    QGemmShape s;
    FxStatus st = qgemm_shape(c->node, c->diag, &a->type, &b->type, &s);
    if (st != FX_OK || s.m == 0 || s.n == 0)
        return st;
    int64_t nb = input_value(c, QG_B_ZP) ? tensor_numel(c->in[QG_B_ZP]) : 1;
    int64_t ns = tensor_numel(c->in[QG_B_SCALE]);
    int32_t *acc = fx_alloc_array((size_t)(s.m * s.n), sizeof *acc);
    int32_t *bzp = fx_alloc_array((size_t)nb, sizeof *bzp);
    float *scale = fx_alloc_array((size_t)ns, sizeof *scale);
    if (!acc || !bzp || !scale) {
        free(acc);
        free(bzp);
        free(scale);
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    }
    for (int64_t j = 0; j < nb; j++)
        bzp[j] = input_value(c, QG_B_ZP) ? (int32_t)tensor_get_int(c->in[QG_B_ZP], j) : 0;
    float as = scale_of(c->in[QG_A_SCALE]), ys = scale_of(c->in[QG_Y_SCALE]);
    float alpha = node_attr_float(c->node, "alpha", 1.0f);
    const float *bs = c->in[QG_B_SCALE]->data;
    for (int64_t j = 0; j < ns; j++)
        scale[j] = as * bs[j] * alpha / ys;
    fxrt_gemm_integer_strided(s.m, s.n, s.k, a->type.dtype, a->data, s.a_row, s.a_col,
                              zero_point_of(input_value(c, QG_A_ZP)), b->type.dtype, b->data,
                              s.b_row, s.b_col, bzp, nb, acc);
    fxrt_requantize(s.m, s.n, 1, acc, data_or_null(input_value(c, QG_C)), scale, ns,
                    zero_point_of(input_value(c, QG_Y_ZP)), c->out[0]->type.dtype,
                    c->out[0]->data);
    free(acc);
    free(bzp);
    free(scale);
    return FX_OK;
}

/* Scratch: the int32 accumulator, B's zero points as int32, the
 * multipliers. */
static void qgemm_layout(const Node *n, size_t *zp_off, size_t *scale_off, size_t *total)
{
    *zp_off = nn_align64((size_t)type_numel(&n->out_types[0]) * sizeof(int32_t));
    *scale_off = *zp_off + nn_zero_point_bytes(n, QG_B_ZP);
    *total = *scale_off +
             nn_align64((size_t)type_numel(node_input_type(n, QG_B_SCALE)) * sizeof(float));
}

static size_t qgemm_scratch(const Node *n)
{
    size_t zp, sc, total;
    qgemm_layout(n, &zp, &sc, &total);
    return total;
}

static FxStatus qgemm_emit(EmitCtx *c)
{
    const Node *node = c->node;
    const TensorType *a = node_input_type(node, QG_A), *b = node_input_type(node, QG_B);
    QGemmShape s;
    FxStatus st = qgemm_shape(node, c->diag, a, b, &s);
    if (st != FX_OK || s.m == 0 || s.n == 0)
        return st;
    size_t zp_off, scale_off, total;
    qgemm_layout(node, &zp_off, &scale_off, &total);
    int64_t ns = type_numel(node_input_type(node, QG_B_SCALE));
    char dst[256], azp[64], yzp[64], alpha[48];
    emit_line(c, "unsigned char *const s = (unsigned char *)(%s);", c->scratch);
    emit_line(c, "int32_t *const acc = (int32_t *)s;");
    emit_line(c, "float *const scale = (float *)(s + %zu);", scale_off);
    snprintf(dst, sizeof dst, "s + %zu", zp_off);
    int64_t nb = nn_emit_zero_points(c, QG_B_ZP, "bzp", dst, INT64_MAX);
    emit_line(c, "const float alpha = %s;",
              c_float_literal(node_attr_float(node, "alpha", 1.0f), alpha, sizeof alpha));
    emit_line(c, "int64_t j;");
    /* the interpreter's float order, so both give the same multipliers */
    emit_line(c, "for (j = 0; j < %lld; j++)", (long long)ns);
    emit_line(c, "    scale[j] = %s[0] * %s[j] * alpha / %s[0];", c->in[QG_A_SCALE],
              c->in[QG_B_SCALE], c->in[QG_Y_SCALE]);
    emit_line(c, "fxrt_gemm_integer_strided(/*m=*/%lld, /*n=*/%lld, /*k=*/%lld, %s, %s, %lld, "
                 "%lld, /*a_zp=*/%s, %s, %s, %lld, %lld, bzp, /*b_zp_count=*/%lld, acc);",
              (long long)s.m, (long long)s.n, (long long)s.k, c_dtype_enum(a->dtype), c->in[QG_A],
              (long long)s.a_row, (long long)s.a_col,
              nn_zero_point_expr(c, QG_A_ZP, azp, sizeof azp), c_dtype_enum(b->dtype),
              c->in[QG_B], (long long)s.b_row, (long long)s.b_col, (long long)nb);
    const char *bias = nn_emit_input(c, QG_C);
    emit_line(c, "fxrt_requantize(/*outer=*/%lld, /*channels=*/%lld, /*inner=*/1, acc, %s, "
                 "scale, /*scale_count=*/%lld, /*y_zp=*/%s, %s, %s);",
              (long long)s.m, (long long)s.n, bias ? bias : "NULL", (long long)ns,
              nn_zero_point_expr(c, QG_Y_ZP, yzp, sizeof yzp),
              c_dtype_enum(node->out_types[0].dtype), c->out[0]);
    return FX_OK;
}

static const AttrSpec qgemm_attrs[] = {
    {"alpha", FX_ATTR_FLOAT, "1.0", false},
    {"transA", FX_ATTR_INT, "0", false},
    {"transB", FX_ATTR_INT, "0", false},
    {NULL},
};

const OpDef fx_op_QGemm = {
    .name = "QGemm",
    .min_inputs = 6, .max_inputs = 9, .min_outputs = 1, .max_outputs = 1,
    .attrs = qgemm_attrs,
    .infer = qgemm_infer,
    .eval = qgemm_eval,
    .scratch_bytes = qgemm_scratch,
    .emit = qgemm_emit,
};
