/*
 * nn_qconv.c - QConvPacked, the qconv-pack pass's form (opt/pass_qconv_pack.c)
 * of a QLinearConv or ConvInteger whose weights are a constant int8 tensor
 * with zero point 0:
 *
 *   QConvPacked(X [N, C, H, W] or [N, C, W], packed) -> Y [N, M, OH, OW] (or [N, M, OW])
 *
 * computed by fxrt_qconv (runtime/fxrt_nn_qconv.c) with the blob that
 * fxrt_qconv_pack made at compile time (input 1, uint8,
 * fxrt_qconv_packed_bytes bytes: the weights, bias, X's zero point and the
 * requantization pairs are in it).  The geometry is resolved by the pass
 * into 2-D form (a 1-D convolution has height 1): `kernel_shape`,
 * `strides`, `dilations`, `pad_begin` and `out_size`, two values each, plus
 * `in_channels`, `out_channels` and `group` (1 or depthwise).  The
 * quantization is `x_zero_point`, `y_type` (UINT8, INT8 or INT32),
 * `y_zero_point` and the clamp `y_min`, `y_max`.  `x_nhwc` and `y_nhwc`
 * (default 0) make X and Y NHWC, [N, H, W, C] and [N, OH, OW, M] (2-D
 * only; depthwise both or neither), which the qconv-nhwc pass sets between
 * consecutive 8-bit layers.
 *
 * Refused (FX_ERR_SHAPE / FX_ERR_INVALID): an X that does not match
 * in_channels, a geometry fxrt_qconv_applies refuses, a blob of the wrong
 * size.  eval runs the kernel the generated code calls; the interpreter's
 * reference is the graph before the pass.
 */
#include <stdlib.h>

#include "ops.h"

static const AttrSpec qconv_packed_attrs[] = {
    {"in_channels", FX_ATTR_INT, NULL, true},
    {"out_channels", FX_ATTR_INT, NULL, true},
    {"group", FX_ATTR_INT, NULL, true},
    {"kernel_shape", FX_ATTR_INTS, NULL, true},
    {"strides", FX_ATTR_INTS, NULL, true},
    {"dilations", FX_ATTR_INTS, NULL, true},
    {"pad_begin", FX_ATTR_INTS, NULL, true},
    {"out_size", FX_ATTR_INTS, NULL, true},
    {"x_zero_point", FX_ATTR_INT, NULL, true},
    {"y_type", FX_ATTR_INT, NULL, true},
    {"y_zero_point", FX_ATTR_INT, NULL, true},
    {"y_min", FX_ATTR_INT, NULL, true},
    {"y_max", FX_ATTR_INT, NULL, true},
    {"x_nhwc", FX_ATTR_INT, "0", false},
    {"y_nhwc", FX_ATTR_INT, "0", false},
    {NULL},
};

/* Two values of INTS attribute `name`, each in [lo, 2^31). */
static FxStatus read_pair(const Node *n, Diag *d, const char *name, int64_t lo, int64_t *v)
{
    const int64_t *vals;
    if (node_attr_ints(n, name, &vals) != 2)
        return diag_node_error(d, FX_ERR_INVALID, n, "%s needs 2 values", name);
    for (int i = 0; i < 2; i++) {
        if (vals[i] < lo || vals[i] > INT32_MAX)
            return diag_node_error(d, FX_ERR_INVALID, n, "%s[%d] = %lld is out of range", name,
                                   i, (long long)vals[i]);
        v[i] = vals[i];
    }
    return FX_OK;
}

/* The runtime parameters of n for X of type x and the blob of type w. */
static FxStatus qconv_packed_plan(const Node *n, Diag *d, const TensorType *x,
                                  const TensorType *w, FxrtConvParams *p, FxrtQConv *q)
{
    if ((x->dtype != FXRT_DTYPE_UINT8 && x->dtype != FXRT_DTYPE_INT8) ||
        (x->rank != 3 && x->rank != 4))
        return diag_node_error(d, FX_ERR_SHAPE, n, "QConvPacked takes a uint8 or int8 X of rank "
                               "3 or 4, not %s of rank %d", dtype_name(x->dtype), x->rank);
    int64_t kernel[2] = {0}, stride[2] = {0}, dilation[2] = {0}, pad[2] = {0}, out[2] = {0};
    FxStatus st;
    if ((st = read_pair(n, d, "kernel_shape", 1, kernel)) != FX_OK ||
        (st = read_pair(n, d, "strides", 1, stride)) != FX_OK ||
        (st = read_pair(n, d, "dilations", 1, dilation)) != FX_OK ||
        (st = read_pair(n, d, "pad_begin", 0, pad)) != FX_OK ||
        (st = read_pair(n, d, "out_size", 1, out)) != FX_OK)
        return st;
    int x_nhwc = node_attr_int(n, "x_nhwc", 0) != 0, y_nhwc = node_attr_int(n, "y_nhwc", 0) != 0;
    if ((x_nhwc || y_nhwc) && x->rank != 4)
        return diag_node_error(d, FX_ERR_SHAPE, n, "QConvPacked: NHWC needs a 2-D convolution");
    /* X's dims as NCHW */
    int64_t xd[4] = {x->dims[0], x->dims[1], x->rank == 4 ? x->dims[2] : 1,
                     x->dims[x->rank - 1]};
    if (x_nhwc) {
        xd[1] = x->dims[3];
        xd[2] = x->dims[1];
        xd[3] = x->dims[2];
    }
    *p = (FxrtConvParams){.batch = x->dims[0], .in_channels = node_attr_int(n, "in_channels", 0),
                          .out_channels = node_attr_int(n, "out_channels", 0),
                          .groups = node_attr_int(n, "group", 0)};
    p->in_size[0] = p->out_size[0] = p->kernel[0] = p->stride[0] = p->dilation[0] = 1;
    p->in_size[1] = xd[2];
    p->in_size[2] = xd[3];
    for (int i = 0; i < 2; i++) {
        p->kernel[1 + i] = kernel[i];
        p->stride[1 + i] = stride[i];
        p->dilation[1 + i] = dilation[i];
        p->pad_begin[1 + i] = pad[i];
        p->out_size[1 + i] = out[i];
    }
    if (xd[1] != p->in_channels || !fxrt_qconv_applies(p) ||
        (x->rank == 3 && (kernel[0] != 1 || out[0] != 1 || pad[0] != 0)))
        return diag_node_error(d, FX_ERR_SHAPE, n, "QConvPacked: X [%lld, %lld, ...] does not "
                               "fit a group-1 or depthwise convolution of %lld to %lld channels",
                               (long long)xd[0], (long long)xd[1],
                               (long long)p->in_channels, (long long)p->out_channels);
    int64_t y_type = node_attr_int(n, "y_type", 0);
    if (y_type != FXRT_DTYPE_UINT8 && y_type != FXRT_DTYPE_INT8 && y_type != FXRT_DTYPE_INT32)
        return diag_node_error(d, FX_ERR_INVALID, n, "QConvPacked: y_type %lld is not uint8, "
                               "int8 or int32", (long long)y_type);
    if ((x_nhwc || y_nhwc) &&
        (!fxrt_qconv_nhwc_applies(p) || (fxrt_qconv_is_depthwise(p) && x_nhwc != y_nhwc)))
        return diag_node_error(d, FX_ERR_INVALID, n, "QConvPacked: this convolution cannot "
                               "take these NHWC layouts");
    if (w->dtype != FXRT_DTYPE_UINT8 || type_numel(w) != fxrt_qconv_packed_bytes(p))
        return diag_node_error(d, FX_ERR_SHAPE, n, "QConvPacked: the packed W does not hold the "
                               "weights of this convolution");
    *q = (FxrtQConv){.x_type = x->dtype, .x_zp = (int32_t)node_attr_int(n, "x_zero_point", 0),
                     .y_type = (int32_t)y_type,
                     .y_zp = (int32_t)node_attr_int(n, "y_zero_point", 0),
                     .y_min = (int32_t)node_attr_int(n, "y_min", INT32_MIN),
                     .y_max = (int32_t)node_attr_int(n, "y_max", INT32_MAX),
                     .x_nhwc = x_nhwc, .y_nhwc = y_nhwc};
    return FX_OK;
}

static FxStatus qconv_packed_infer(InferCtx *c)
{
    FxrtConvParams p;
    FxrtQConv q;
    FxStatus st = qconv_packed_plan(c->node, c->diag, c->in[0], c->in[1], &p, &q);
    if (st != FX_OK)
        return st;
    TensorType *y = &c->out[0];
    *y = *c->in[0];
    y->dtype = (DType)q.y_type;
    if (q.y_nhwc) {
        y->dims[1] = p.out_size[1];
        y->dims[2] = p.out_size[2];
        y->dims[3] = p.out_channels;
        return FX_OK;
    }
    y->dims[1] = p.out_channels;
    if (y->rank == 4)
        y->dims[2] = p.out_size[1];
    y->dims[y->rank - 1] = p.out_size[2];
    return FX_OK;
}

static FxStatus qconv_packed_eval(EvalCtx *c)
{
    FxrtConvParams p;
    FxrtQConv q;
    FxStatus st = qconv_packed_plan(c->node, c->diag, &c->in[0]->type, &c->in[1]->type, &p, &q);
    if (st != FX_OK)
        return st;
    void *scratch = fx_malloc((size_t)fxrt_qconv_scratch_bytes(&p, &q));
    if (!scratch)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    fxrt_qconv(&p, &q, c->in[0]->data, c->in[1]->data, c->out[0]->data, scratch);
    free(scratch);
    return FX_OK;
}

/* n's kernel parameters, planned without reporting (the planner's hooks
 * ask of nodes the checks have already accepted); false if they fail. */
static bool qconv_packed_quiet_plan(const Node *n, FxrtConvParams *p, FxrtQConv *q)
{
    Diag d;
    diag_init(&d);
    FxStatus st = qconv_packed_plan(n, &d, node_input_type(n, 0), node_input_type(n, 1), p, q);
    diag_free(&d);
    return st == FX_OK;
}

static size_t qconv_packed_scratch(const Node *n)
{
    FxrtConvParams p;
    FxrtQConv q;
    return qconv_packed_quiet_plan(n, &p, &q) ? (size_t)fxrt_qconv_scratch_bytes(&p, &q) : 0;
}

static size_t qconv_packed_small_scratch(const Node *n)
{
    FxrtConvParams p;
    FxrtQConv q;
    return qconv_packed_quiet_plan(n, &p, &q) ? (size_t)fxrt_qconv_small_scratch_bytes(&p, &q)
                                              : 0;
}

/* Off the host, depthwise and pointwise layers write over their input
 * (fxrt_qconv_inplace), so that a chain of them needs one activation
 * buffer. */
static bool qconv_packed_inplace(const Node *n, size_t *scratch_bytes)
{
    FxrtConvParams p;
    FxrtQConv q;
    if (!qconv_packed_quiet_plan(n, &p, &q) || !fxrt_qconv_inplace_applies(&p, &q))
        return false;
    *scratch_bytes = (size_t)fxrt_qconv_small_scratch_bytes(&p, &q);
    return true;
}

static FxStatus qconv_packed_emit(EmitCtx *c)
{
    FxrtConvParams p;
    FxrtQConv q;
    FxStatus st = qconv_packed_plan(c->node, c->diag, node_input_type(c->node, 0),
                                    node_input_type(c->node, 1), &p, &q);
    if (st != FX_OK)
        return st;
    nn_conv_emit_params(c, &p);
    emit_line(c, "static const FxrtQConv q = {%s, /*x_zp=*/%d, %s, /*y_zp=*/%d, /*y_min=*/%d, "
                 "/*y_max=*/%d, /*x_nhwc=*/%d, /*y_nhwc=*/%d};",
              c_dtype_enum((DType)q.x_type), (int)q.x_zp, c_dtype_enum((DType)q.y_type),
              (int)q.y_zp, (int)q.y_min, (int)q.y_max, (int)q.x_nhwc, (int)q.y_nhwc);
    if (c->inplace)
        emit_line(c, "fxrt_qconv_inplace(&p, &q, %s, %s, %s);", c->out[0], c->in[1], c->scratch);
    else
        emit_line(c, "fxrt_qconv(&p, &q, %s, %s, %s, %s);", c->in[0], c->in[1], c->out[0],
                  c->scratch);
    return FX_OK;
}

const OpDef fx_op_QConvPacked = {
    .name = "QConvPacked",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = qconv_packed_attrs,
    .infer = qconv_packed_infer,
    .eval = qconv_packed_eval,
    .scratch_bytes = qconv_packed_scratch,
    .small_scratch_bytes = qconv_packed_small_scratch,
    .inplace = qconv_packed_inplace,
    .emit = qconv_packed_emit,
};
