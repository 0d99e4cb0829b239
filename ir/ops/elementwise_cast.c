/*
 * elementwise_cast.c - element type conversions: Cast, CastLike, and the
 * linear quantizers QuantizeLinear / DequantizeLinear (uint8/int8, per
 * tensor or per axis).  The conversions themselves are the runtime's
 * (fxrt_cast, fxrt_quantize_linear, fxrt_dequantize_linear in
 * runtime/fxrt_elementwise_cast.c); this file checks types and shapes.
 *
 * Refusals: casts from or to string, float16, bfloat16, float8, 4- and 2-bit
 * types, and quantization to anything but uint8/int8, are
 * FX_ERR_UNSUPPORTED; an unknown `to`, a non-float32 scale, a zero point
 * whose type or shape does not match, a per-axis scale whose length is not
 * the axis' size are FX_ERR_INVALID / FX_ERR_SHAPE.
 * Opsets: Cast-6/9/13 differ only in type lists.  QuantizeLinear-10 and
 * DequantizeLinear-10 had no axis attribute and per-tensor scales only;
 * the canonical form is opset 13's, whose axis default (1) is filled in at
 * import and changes nothing for a scalar scale, so no rewrite is needed.
 * Quantize/Dequantize are not flagged elementwise: a per-axis scale does not
 * broadcast NumPy-style (it aligns with `axis`, not with the last axis).
 *
 * The emitters write the same runtime call as eval, with the (outer,
 * channels, inner) split computed by the shared quant_split.
 */
#include <string.h>

#include "ops.h"

/* Types the kernels compute on (the runtime's fxrt_cast set). */
static bool cast_type_ok(DType t)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: case FXRT_DTYPE_FLOAT64: case FXRT_DTYPE_UINT8:
    case FXRT_DTYPE_INT8: case FXRT_DTYPE_UINT16: case FXRT_DTYPE_INT16:
    case FXRT_DTYPE_INT32: case FXRT_DTYPE_INT64: case FXRT_DTYPE_UINT32:
    case FXRT_DTYPE_UINT64: case FXRT_DTYPE_BOOL:
        return true;
    default:
        return false;
    }
}

/* ONNX TensorProto.DataType values that exist (through opset 28) but fxcc
 * does not compute on, by name. */
static const char *const unsupported_type_names[] = {
    [8] = "string", [10] = "float16", [14] = "complex64", [15] = "complex128",
    [16] = "bfloat16", [17] = "float8e4m3fn", [18] = "float8e4m3fnuz", [19] = "float8e5m2",
    [20] = "float8e5m2fnuz", [21] = "uint4", [22] = "int4", [23] = "float4e2m1",
    [24] = "float8e8m0", [25] = "uint2", [26] = "int2"};

static bool type_known_unsupported(int64_t t)
{
    return t >= 0 && t < (int64_t)(sizeof unsupported_type_names / sizeof *unsupported_type_names) &&
           unsupported_type_names[t];
}

static const char *type_text(int64_t t)
{
    if (type_known_unsupported(t))
        return unsupported_type_names[t];
    return cast_type_ok((DType)t) ? dtype_name((DType)t) : "unknown";
}

static FxStatus check_cast_type(InferCtx *c, int64_t t, const char *what)
{
    if (t >= 0 && t <= 64 && cast_type_ok((DType)t))
        return FX_OK;
    if (type_known_unsupported(t))
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "%s has element type %s, which fxcc does not support", what,
                               type_text(t));
    return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "%s has unknown element type %lld",
                           what, (long long)t);
}

static const TensorType *input_type(const InferCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static FxStatus runtime_status(EvalCtx *c, int rc)
{
    if (rc == FXRT_EW_OK)
        return FX_OK;
    return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                           "the runtime has no kernel for element type %s",
                           dtype_name(c->in[0]->type.dtype));
}

/* --- Cast, CastLike -------------------------------------------------------- */

static FxStatus cast_infer(InferCtx *c)
{
    if (!c->in[0])
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "input 0 is missing");
    FxStatus st = check_cast_type(c, c->in[0]->dtype, "the input");
    if (st != FX_OK)
        return st;
    int64_t to;
    if (c->node->op == &fx_op_CastLike) {
        const TensorType *like = input_type(c, 1);
        if (!like)
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "input 1 is missing");
        to = like->dtype;
        st = check_cast_type(c, to, "target_type");
    } else {
        to = node_attr_int(c->node, "to", 0);
        st = check_cast_type(c, to, "'to'");
    }
    if (st != FX_OK)
        return st;
    c->out[0] = *c->in[0];
    c->out[0].dtype = (DType)to;
    return FX_OK;
}

static FxStatus cast_emit(EmitCtx *c)
{
    const Node *n = c->node;
    emit_line(c, "if (fxrt_cast(%s, %s, %s, %s, %lld) != 0) return 1;",
            c_dtype_enum(node_input_type(n, 0)->dtype), c->in[0],
            c_dtype_enum(n->out_types[0].dtype), c->out[0],
            (long long)type_numel(&n->out_types[0]));
    return FX_OK;
}

static FxStatus cast_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    Tensor *y = c->out[0];
    return runtime_status(c, fxrt_cast(x->type.dtype, x->data, y->type.dtype, y->data,
                                       (size_t)tensor_numel(x)));
}

/* --- QuantizeLinear, DequantizeLinear ------------------------------------- */

/* How data of type x splits into (outer, channels, inner) for a scale of
 * type s: one channel for a single-element scale, else the 1-D scale runs
 * along `axis`.  Checks the zero point z (may be NULL) against s and, when
 * zdtype is not UNDEFINED, its type. */
static FxStatus quant_layout(InferCtx *c, const TensorType *x, const TensorType *s,
                             const TensorType *z, DType zdtype)
{
    if (s->dtype != FXRT_DTYPE_FLOAT32) {
        FxStatus st = check_cast_type(c, s->dtype, "the scale");
        if (st != FX_OK)
            return st;
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "the scale must be float32, not %s", dtype_name(s->dtype));
    }
    int64_t ns = type_numel(s);
    if (ns != 1) {
        int axis;
        FxStatus st = infer_axis(c, node_attr_int(c->node, "axis", 1), x->rank, &axis);
        if (st != FX_OK)
            return st;
        if (s->rank != 1 || x->rank == 0 || s->dims[0] != x->dims[axis]) {
            char sx[128], ss[128];
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "scale %s is neither a single element nor one per element "
                                   "of axis %d of %s",
                                   type_format(s, ss, sizeof ss), axis,
                                   type_format(x, sx, sizeof sx));
        }
    } else if (s->rank > 1) {
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "the scale must be a scalar or 1-D, not rank %d", s->rank);
    }
    if (!z)
        return FX_OK;
    if (zdtype != FXRT_DTYPE_UNDEFINED && z->dtype != zdtype)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "the zero point is %s, the data %s", dtype_name(z->dtype),
                               dtype_name(zdtype));
    if (type_numel(z) != ns || z->rank > 1)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "the zero point has %lld elements, the scale %lld",
                               (long long)type_numel(z), (long long)ns);
    return FX_OK;
}

static FxStatus quantize_infer(InferCtx *c)
{
    const TensorType *x = input_type(c, 0), *s = input_type(c, 1), *z = input_type(c, 2);
    if (!x || !s)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "input %d is missing",
                               x ? 1 : 0);
    if (x->dtype != FXRT_DTYPE_FLOAT32 && x->dtype != FXRT_DTYPE_INT32) {
        FxStatus st = check_cast_type(c, x->dtype, "the input");
        return st != FX_OK ? st
                           : diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                                             "the input must be float32 or int32, not %s",
                                             dtype_name(x->dtype));
    }
    /* opset 21: without a zero point, output_dtype (0: uint8) is the type */
    int64_t wanted = node_attr_int(c->node, "output_dtype", 0);
    if (z && wanted && wanted != z->dtype)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "output_dtype %s disagrees with the zero point's %s",
                               type_text(wanted), dtype_name(z->dtype));
    DType yt = z ? z->dtype : wanted ? (DType)wanted : FXRT_DTYPE_UINT8;
    if (yt != FXRT_DTYPE_UINT8 && yt != FXRT_DTYPE_INT8)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "quantizing to %s is not supported (uint8 and int8 are)",
                               type_text(yt));
    FxStatus st = quant_layout(c, x, s, z, FXRT_DTYPE_UNDEFINED);
    if (st != FX_OK)
        return st;
    c->out[0] = *x;
    c->out[0].dtype = yt;
    return FX_OK;
}

static FxStatus dequantize_infer(InferCtx *c)
{
    const TensorType *x = input_type(c, 0), *s = input_type(c, 1), *z = input_type(c, 2);
    if (!x || !s)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "input %d is missing",
                               x ? 1 : 0);
    if (x->dtype != FXRT_DTYPE_UINT8 && x->dtype != FXRT_DTYPE_INT8 &&
        x->dtype != FXRT_DTYPE_INT32) {
        FxStatus st = check_cast_type(c, x->dtype, "the input");
        return st != FX_OK ? st
                           : diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                                             "dequantizing %s is not supported (uint8, int8 "
                                             "and int32 are)",
                                             dtype_name(x->dtype));
    }
    FxStatus st = quant_layout(c, x, s, z, x->dtype);
    if (st != FX_OK)
        return st;
    c->out[0] = *x;
    c->out[0].dtype = FXRT_DTYPE_FLOAT32;
    return FX_OK;
}

/* Opset 21 added blocked scales (block_size), 23 DequantizeLinear's
 * output_dtype and QuantizeLinear's precision: only their defaults, the
 * opset-13 behaviour, are implemented (a float32 result, computed in
 * float32).  QuantizeLinear's output_dtype is read by infer. */
static FxStatus quant_canonicalize(Node *n, int opset, Diag *d)
{
    (void)opset;
    if (node_attr_int(n, "block_size", 0) != 0)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "blocked quantization (block_size "
                               "%lld) is not supported", (long long)node_attr_int(n, "block_size", 0));
    if (node_attr_int(n, "precision", 0) != 0)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "precision %s is not supported",
                               type_text(node_attr_int(n, "precision", 0)));
    int64_t out = node_attr_int(n, "output_dtype", 0);
    if (n->op == &fx_op_DequantizeLinear && out != 0 && out != FXRT_DTYPE_FLOAT32)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "dequantizing to %s is not supported "
                               "(float32 is)", type_text(out));
    return FX_OK;
}

/* (outer, channels, inner) of data x for the scale s; infer has checked
 * them. */
static void quant_split(const Node *n, const TensorType *x, const TensorType *s,
                        size_t *outer, size_t *channels, size_t *inner)
{
    *outer = 1;
    *channels = 1;
    *inner = (size_t)type_numel(x);
    if (type_numel(s) == 1)
        return;
    int rank = x->rank;
    int64_t axis = node_attr_int(n, "axis", 1);
    if (axis < 0)
        axis += rank;
    *channels = (size_t)x->dims[axis];
    *inner = 1;
    for (int d = 0; d < rank; d++) {
        if (d < axis)
            *outer *= (size_t)x->dims[d];
        else if (d > axis)
            *inner *= (size_t)x->dims[d];
    }
}

static FxStatus quantize_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0], *s = c->in[1];
    const Tensor *z = c->num_inputs > 2 ? c->in[2] : NULL;
    Tensor *y = c->out[0];
    size_t outer, channels, inner;
    quant_split(c->node, &x->type, &s->type, &outer, &channels, &inner);
    return runtime_status(c, fxrt_quantize_linear(x->type.dtype, x->data, outer, channels, inner,
                                                  s->data, y->type.dtype, z ? z->data : NULL,
                                                  y->data));
}

static FxStatus dequantize_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0], *s = c->in[1];
    const Tensor *z = c->num_inputs > 2 ? c->in[2] : NULL;
    size_t outer, channels, inner;
    quant_split(c->node, &x->type, &s->type, &outer, &channels, &inner);
    return runtime_status(c, fxrt_dequantize_linear(x->type.dtype, x->data, outer, channels,
                                                    inner, s->data, z ? z->data : NULL,
                                                    c->out[0]->data));
}

static FxStatus quant_emit(EmitCtx *c)
{
    const Node *n = c->node;
    const TensorType *x = node_input_type(n, 0), *s = node_input_type(n, 1);
    size_t outer, channels, inner;
    quant_split(n, x, s, &outer, &channels, &inner);
    const char *zp = c->num_inputs > 2 && c->in[2] ? c->in[2] : "NULL";
    if (n->op == &fx_op_QuantizeLinear)
        emit_line(c,
                  "if (fxrt_quantize_linear(%s, %s, /*outer=*/%zu, /*channels=*/%zu, "
                  "/*inner=*/%zu, %s, %s, %s, %s) != 0) return 1;",
                  c_dtype_enum(x->dtype), c->in[0], outer, channels, inner, c->in[1],
                  c_dtype_enum(n->out_types[0].dtype), zp, c->out[0]);
    else
        emit_line(c,
                  "if (fxrt_dequantize_linear(%s, %s, /*outer=*/%zu, /*channels=*/%zu, "
                  "/*inner=*/%zu, %s, %s, %s) != 0) return 1;",
                  c_dtype_enum(x->dtype), c->in[0], outer, channels, inner, c->in[1], zp,
                  c->out[0]);
    return FX_OK;
}

/* --- op definitions --------------------------------------------------------- */

/* saturate (opset 19) and round_mode (24) only change casts to float8 and
 * float4 types, which fxcc refuses; any value is accepted for the others. */
static const AttrSpec cast_attrs[] = {
    {"to", FX_ATTR_INT, NULL, true},
    {"saturate", FX_ATTR_INT, NULL, false},
    {"round_mode", FX_ATTR_STRING, NULL, false},
    {NULL},
};
static const AttrSpec castlike_attrs[] = {
    {"saturate", FX_ATTR_INT, NULL, false},
    {"round_mode", FX_ATTR_STRING, NULL, false},
    {NULL},
};
static const AttrSpec quantize_attrs[] = {
    {"axis", FX_ATTR_INT, "1", false},
    {"saturate", FX_ATTR_INT, NULL, false}, /* opset 19, float8 outputs only */
    {"block_size", FX_ATTR_INT, NULL, false},
    {"output_dtype", FX_ATTR_INT, NULL, false},
    {"precision", FX_ATTR_INT, NULL, false},
    {NULL},
};
static const AttrSpec dequantize_attrs[] = {
    {"axis", FX_ATTR_INT, "1", false},
    {"block_size", FX_ATTR_INT, NULL, false},
    {"output_dtype", FX_ATTR_INT, NULL, false},
    {NULL},
};

const OpDef fx_op_Cast = {
    .name = "Cast",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_ELEMENTWISE,
    .attrs = cast_attrs,
    .infer = cast_infer,
    .eval = cast_eval,
    .emit = cast_emit,
};

const OpDef fx_op_CastLike = {
    .name = "CastLike",
    .min_inputs = 2, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_ELEMENTWISE,
    .attrs = castlike_attrs,
    .infer = cast_infer,
    .eval = cast_eval,
    .emit = cast_emit,
};

const OpDef fx_op_QuantizeLinear = {
    .name = "QuantizeLinear",
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = quantize_attrs,
    .canonicalize = quant_canonicalize,
    .infer = quantize_infer,
    .eval = quantize_eval,
    .emit = quant_emit,
};

const OpDef fx_op_DequantizeLinear = {
    .name = "DequantizeLinear",
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = dequantize_attrs,
    .canonicalize = quant_canonicalize,
    .infer = dequantize_infer,
    .eval = dequantize_eval,
    .emit = quant_emit,
};
