/*
 * nn_pool.c - the pools: MaxPool, AveragePool, LpPool and the global pools
 * GlobalAveragePool, GlobalMaxPool, GlobalLpPool.
 *
 * The windowed pools take their geometry from nn_pool_params (nn_conv.c,
 * shared with the convolutions and the NCHWc pools): kernel, strides,
 * dilations, pads, auto_pad and ceil_mode become the runtime's
 * FxrtPoolParams, which the emitters write as a static constant before one
 * kernel call.  The global pools reduce each (n, c) plane to one value.
 *
 * Refused: more than 3 spatial axes, float16 (FX_ERR_UNSUPPORTED), windows
 * larger than the padded input (FX_ERR_SHAPE).  float64 inputs are computed
 * in float32 by the interpreter (MaxPool has a float64 kernel); the code
 * generator takes float32 only.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* --- windowed pools ------------------------------------------------------- */

static FxStatus maxpool_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    if (x->dtype != FXRT_DTYPE_FLOAT32 && x->dtype != FXRT_DTYPE_FLOAT64 &&
        x->dtype != FXRT_DTYPE_UINT8 && x->dtype != FXRT_DTYPE_INT8)
        return diag_node_error(c->diag,
                               x->dtype == FXRT_DTYPE_FLOAT16 ? FX_ERR_UNSUPPORTED : FX_ERR_INVALID,
                               c->node, "X has element type %s; MaxPool takes float, double, "
                               "int8 or uint8", dtype_name(x->dtype));
    int64_t order = node_attr_int(c->node, "storage_order", 0);
    if (order != 0 && order != 1)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "storage_order %lld is not 0 or 1",
                               (long long)order);
    FxrtPoolParams p;
    FxStatus st = nn_pool_params(c->node, c->diag, x, &p, &c->out[0]);
    if (st != FX_OK)
        return st;
    if (c->num_outputs > 1) {
        c->out[1] = c->out[0];
        c->out[1].dtype = FXRT_DTYPE_INT64;
    }
    return FX_OK;
}

static FxStatus maxpool_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    FxrtPoolParams p;
    TensorType out;
    FxStatus st = nn_pool_params(c->node, c->diag, &x->type, &p, &out);
    if (st != FX_OK)
        return st;
    int64_t *idx = c->num_outputs > 1 ? c->out[1]->data : NULL;
    void *y = c->out[0]->data;
    switch (x->type.dtype) {
    case FXRT_DTYPE_FLOAT32: fxrt_maxpool_f32(&p, x->data, y, idx); break;
    case FXRT_DTYPE_FLOAT64: fxrt_maxpool_f64(&p, x->data, y, idx); break;
    case FXRT_DTYPE_UINT8: fxrt_maxpool_u8(&p, x->data, y, idx); break;
    case FXRT_DTYPE_INT8: fxrt_maxpool_i8(&p, x->data, y, idx); break;
    default:
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "unexpected element type");
    }
    return FX_OK;
}

static FxStatus maxpool_emit(EmitCtx *c)
{
    const TensorType *x = node_input_type(c->node, 0);
    FxrtPoolParams p;
    TensorType out;
    FxStatus st = nn_pool_params(c->node, c->diag, x, &p, &out);
    if (st != FX_OK)
        return st;
    const char *kernel;
    switch (x->dtype) {
    case FXRT_DTYPE_FLOAT32: kernel = "fxrt_maxpool_f32"; break;
    case FXRT_DTYPE_FLOAT64: kernel = "fxrt_maxpool_f64"; break;
    case FXRT_DTYPE_UINT8: kernel = "fxrt_maxpool_u8"; break;
    case FXRT_DTYPE_INT8: kernel = "fxrt_maxpool_i8"; break;
    default:
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "unexpected element type");
    }
    const char *idx = c->num_outputs > 1 && c->out[1] ? c->out[1] : "NULL";
    nn_pool_emit_params(c, &p);
    emit_line(c, "%s(&p, %s, %s, %s);", kernel, c->in[0], c->out[0], idx);
    return FX_OK;
}

const AttrSpec nn_maxpool_attrs[] = {
    {"auto_pad", FX_ATTR_STRING, "NOTSET", false},
    {"ceil_mode", FX_ATTR_INT, "0", false},
    {"dilations", FX_ATTR_INTS, NULL, false},
    {"kernel_shape", FX_ATTR_INTS, NULL, true},
    {"pads", FX_ATTR_INTS, NULL, false},
    {"storage_order", FX_ATTR_INT, "0", false},
    {"strides", FX_ATTR_INTS, NULL, false},
    {NULL},
};

const OpDef fx_op_MaxPool = {
    .name = "MaxPool",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 2,
    .attrs = nn_maxpool_attrs,
    .canonicalize = nn_pool_canonicalize,
    .infer = maxpool_infer,
    .eval = maxpool_eval,
    .emit = maxpool_emit,
};

static FxStatus float_pool_infer(InferCtx *c)
{
    FxStatus st = nn_check_float(c->node, c->diag, c->in[0], "X");
    if (st != FX_OK)
        return st;
    if (c->node->op == &fx_op_LpPool && node_attr_int(c->node, "p", 2) < 1)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "p must be >= 1");
    FxrtPoolParams p;
    return nn_pool_params(c->node, c->diag, c->in[0], &p, &c->out[0]);
}

static FxStatus float_pool_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    Tensor *y = c->out[0];
    FxrtPoolParams p;
    TensorType out;
    FxStatus st = nn_pool_params(c->node, c->diag, &x->type, &p, &out);
    if (st != FX_OK)
        return st;
    float *owned;
    const float *fx = nn_f32_input(x, &owned);
    float *fy = nn_f32_output(y);
    if (!fx || !fy) {
        free(owned);
        nn_f32_output_finish(y, fy);
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    }
    if (c->node->op == &fx_op_LpPool)
        fxrt_lppool_f32(&p, fx, fy);
    else
        fxrt_avgpool_f32(&p, fx, fy);
    nn_f32_output_finish(y, fy);
    free(owned);
    return FX_OK;
}

static FxStatus float_pool_emit(EmitCtx *c)
{
    const TensorType *x = node_input_type(c->node, 0);
    FxrtPoolParams p;
    TensorType out;
    FxStatus st = nn_emit_check_f32(c, x->dtype);
    if (st == FX_OK)
        st = nn_pool_params(c->node, c->diag, x, &p, &out);
    if (st != FX_OK)
        return st;
    nn_pool_emit_params(c, &p);
    emit_line(c, "%s(&p, %s, %s);",
            c->node->op == &fx_op_LpPool ? "fxrt_lppool_f32" : "fxrt_avgpool_f32", c->in[0],
            c->out[0]);
    return FX_OK;
}

const AttrSpec nn_avgpool_attrs[] = {
    {"auto_pad", FX_ATTR_STRING, "NOTSET", false},
    {"ceil_mode", FX_ATTR_INT, "0", false},
    {"count_include_pad", FX_ATTR_INT, "0", false},
    {"dilations", FX_ATTR_INTS, NULL, false}, /* opset 19 */
    {"kernel_shape", FX_ATTR_INTS, NULL, true},
    {"pads", FX_ATTR_INTS, NULL, false},
    {"strides", FX_ATTR_INTS, NULL, false},
    {NULL},
};

const OpDef fx_op_AveragePool = {
    .name = "AveragePool",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = nn_avgpool_attrs,
    .canonicalize = nn_pool_canonicalize,
    .infer = float_pool_infer,
    .eval = float_pool_eval,
    .emit = float_pool_emit,
};

static const AttrSpec lppool_attrs[] = {
    {"auto_pad", FX_ATTR_STRING, "NOTSET", false},
    {"ceil_mode", FX_ATTR_INT, "0", false},   /* opset 18 */
    {"dilations", FX_ATTR_INTS, NULL, false}, /* opset 18 */
    {"kernel_shape", FX_ATTR_INTS, NULL, true},
    {"p", FX_ATTR_INT, "2", false},
    {"pads", FX_ATTR_INTS, NULL, false},
    {"strides", FX_ATTR_INTS, NULL, false},
    {NULL},
};

const OpDef fx_op_LpPool = {
    .name = "LpPool",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = lppool_attrs,
    .canonicalize = nn_pool_canonicalize,
    .infer = float_pool_infer,
    .eval = float_pool_eval,
    .emit = float_pool_emit,
};

/* --- global pools ------------------------------------------------------------ */

static FxStatus global_pool_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    FxStatus st = nn_check_float(c->node, c->diag, x, "X");
    if (st != FX_OK)
        return st;
    if (x->rank < 2)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "X must be [N, C, ...], rank %d",
                               x->rank);
    if (c->node->op == &fx_op_GlobalLpPool && node_attr_int(c->node, "p", 2) < 1)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "p must be >= 1");
    c->out[0] = *x;
    for (int i = 2; i < x->rank; i++)
        c->out[0].dims[i] = 1;
    return FX_OK;
}

static FxStatus global_pool_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    Tensor *y = c->out[0];
    int64_t planes = x->type.dims[0] * x->type.dims[1];
    int64_t size = planes > 0 ? tensor_numel(x) / planes : 0;
    float *owned;
    const float *fx = nn_f32_input(x, &owned);
    float *fy = nn_f32_output(y);
    if (!fx || !fy) {
        free(owned);
        nn_f32_output_finish(y, fy);
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    }
    if (c->node->op == &fx_op_GlobalAveragePool)
        fxrt_global_avgpool_f32(planes, size, fx, fy);
    else if (c->node->op == &fx_op_GlobalMaxPool)
        fxrt_global_maxpool_f32(planes, size, fx, fy);
    else
        fxrt_global_lppool_f32(planes, size, (float)node_attr_int(c->node, "p", 2), fx, fy);
    nn_f32_output_finish(y, fy);
    free(owned);
    return FX_OK;
}

static FxStatus global_pool_emit(EmitCtx *c)
{
    const TensorType *x = node_input_type(c->node, 0);
    FxStatus st = nn_emit_check_f32(c, x->dtype);
    if (st != FX_OK)
        return st;
    int64_t planes = x->dims[0] * x->dims[1];
    long long size = planes > 0 ? (long long)(type_numel(x) / planes) : 0;
    if (c->node->op == &fx_op_GlobalLpPool) {
        char f[48];
        emit_line(c, "fxrt_global_lppool_f32(/*planes=*/%lld, /*size=*/%lld, /*p=*/%s, %s, %s);",
                  (long long)planes, size,
                  c_float_literal((float)node_attr_int(c->node, "p", 2), f, sizeof f), c->in[0],
                  c->out[0]);
    } else {
        emit_line(c, "%s(/*planes=*/%lld, /*size=*/%lld, %s, %s);",
                  c->node->op == &fx_op_GlobalAveragePool ? "fxrt_global_avgpool_f32"
                                                          : "fxrt_global_maxpool_f32",
                  (long long)planes, size, c->in[0], c->out[0]);
    }
    return FX_OK;
}

static const AttrSpec no_attrs[] = {{NULL}};
static const AttrSpec global_lppool_attrs[] = {
    {"p", FX_ATTR_INT, "2", false},
    {NULL},
};

const OpDef fx_op_GlobalAveragePool = {
    .name = "GlobalAveragePool",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = no_attrs,
    .infer = global_pool_infer,
    .eval = global_pool_eval,
    .emit = global_pool_emit,
};

const OpDef fx_op_GlobalMaxPool = {
    .name = "GlobalMaxPool",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = no_attrs,
    .infer = global_pool_infer,
    .eval = global_pool_eval,
    .emit = global_pool_emit,
};

const OpDef fx_op_GlobalLpPool = {
    .name = "GlobalLpPool",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .attrs = global_lppool_attrs,
    .infer = global_pool_infer,
    .eval = global_pool_eval,
    .emit = global_pool_emit,
};
