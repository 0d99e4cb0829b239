/*
 * nchwc.c - the channel-blocked layout NCHWc (runtime/fxrt_nn.h) in the IR:
 * the reorders ToNCHWc and FromNCHWc, and the ConvNCHWc module kind, which
 * the layout pass (opt/pass_nchwc_layout.c) puts in place of 2-D
 * convolutions.
 *
 *   ToNCHWc(X [N, C, H, W])                 -> [N, ceil(C/8), H, W, 8]
 *   FromNCHWc(X [N, CB, H, W, 8]; channels) -> [N, channels, H, W]
 *   NCHWcToNHWC(X [N, CB, H, W, 8]; channels) -> [N, H, W, channels]
 *   NHWCToNCHWc(X [N, H, W, C])             -> [N, ceil(C/8), H, W, 8]
 *   LayerNormNCHWc(X [N, CB, H, W, 8], Scale [channels], B? [channels];
 *                  channels, epsilon)     -> [N, H, W, channels]
 *   ConvNCHWc(X, W, B?, R?)                 -> [N, ceil(out_channels/8), OH, OW, 8]
 *   ConvNCHWcWinograd(X, W, B?, R?)         -> the same
 *   MaxPoolNCHWc(X), AveragePoolNCHWc(X)    -> [N, CB, OH, OW, 8]
 *   GlobalAveragePoolNCHWc(X)               -> [N, CB, 1, 1, 8]
 *   SqueezeExciteNCHWc(X, W1, W2, B1?, B2?) -> X's shape
 *   SqueezeExciteWeightsNCHWc(X, W, W1, W2, B1?, B2?) -> W's shape
 *
 * ConvNCHWc is FusedConv on blocked tensors: X is NCHWc (rank 5), or plain
 * NCHW (rank 4) for a first layer with few channels; W is packed
 * (fxrt_conv_nchwc_pack_f32, its shape the packed layout's); B holds
 * ceil(out_channels/8) * 8 values; R is NCHWc of Y's shape.  Its attributes
 * are Conv's with the padding resolved (`pads` holds the 4 explicit values,
 * no auto_pad) plus the real channel counts, which the blocked shapes round
 * up, plus FusedConv's epilogue.  group is 1 or the channel count
 * (depthwise).  1x1 layers without padding with large inputs take scratch
 * for slabs of the pixels they read (fxrt_conv_nchwc_scratch_floats; none
 * on the small kernels).
 *
 * ConvNCHWcWinograd, which the winograd pass (opt/pass_winograd.c) makes of
 * 3x3 stride-1 ConvNCHWc layers, is the same convolution by F(4x4, 3x3): X
 * blocked, group 1, W packed by fxrt_conv_nchwc_winograd_pack_f32, and
 * scratch for a band of transformed tiles.
 *
 * SqueezeExciteNCHWc (opt/pass_squeeze_excite.c) is X times a per-channel
 * gate computed from X's channel means by two fully connected layers:
 * gate(hidden(mean W1 + B1) W2 + B2), W1 [channels, squeezed] and W2
 * [squeezed, CB * 8] K-major (fxrt_squeeze_excite_nchwc_f32), the hidden
 * activation in the epilogue attributes, the gate's in `gate`,
 * `gate_alpha`, `gate_beta`.  SqueezeExciteWeightsNCHWc computes the same
 * gate for one image and applies it to W, the packed weights of the 1x1
 * convolution that reads the gated X, instead of to X.
 *
 * The pool kinds have the attributes of MaxPool (one output, no indices)
 * and AveragePool and their shape rules, applied to the planes of blocks.
 *
 * eval runs the kernels the generated code calls; the interpreter's
 * reference for a blocked graph is the graph before the layout pass.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

#define BLOCK FXRT_NCHWC_BLOCK

static FxStatus check_f32_rank(const Node *n, Diag *d, const TensorType *t, const char *what,
                               int rank)
{
    char buf[128];
    if (t->dtype != FXRT_DTYPE_FLOAT32 || t->rank != rank)
        return diag_node_error(d, FX_ERR_SHAPE, n, "%s is %s; %s takes a float32 tensor of rank %d",
                               what, type_format(t, buf, sizeof buf), n->op->name, rank);
    return FX_OK;
}

static TensorType blocked_type(int64_t batch, int64_t channels, int64_t h, int64_t w)
{
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 5};
    t.dims[0] = batch;
    t.dims[1] = fxrt_nchwc_blocks(channels);
    t.dims[2] = h;
    t.dims[3] = w;
    t.dims[4] = BLOCK;
    return t;
}

/* --- the reorders: ToNCHWc, FromNCHWc, NCHWcToNHWC, NHWCToNCHWc ------------- */

/* The channels attribute of a blocked X, checked against its blocks. */
static FxStatus blocked_channels(const Node *n, Diag *d, const TensorType *x, int64_t *channels)
{
    FxStatus st = check_f32_rank(n, d, x, "X", 5);
    if (st != FX_OK)
        return st;
    *channels = node_attr_int(n, "channels", 0);
    if (*channels < 1 || fxrt_nchwc_blocks(*channels) != x->dims[1] || x->dims[4] != BLOCK)
        return diag_node_error(d, FX_ERR_SHAPE, n, "%lld channels do not fill [%lld blocks of %lld]",
                               (long long)*channels, (long long)x->dims[1], (long long)x->dims[4]);
    return FX_OK;
}

/* The four reorders run one kernel each over (batch, channels, spatial),
 * read off the side that is not blocked: NCHW or NHWC.  Those into NCHWc
 * take a plain rank-4 X; those out of it a blocked X and the real channel
 * count (attribute `channels`), which the blocks round up. */
typedef void (*ReorderKernel)(int64_t batch, int64_t channels, int64_t spatial, const float *x,
                              float *y);

static const struct {
    const OpDef *op;
    const char *name;
    ReorderKernel kernel;
    bool to_blocked, channels_last;
} reorders[] = {
    {&fx_op_ToNCHWc, "fxrt_to_nchwc_f32", fxrt_to_nchwc_f32, true, false},
    {&fx_op_FromNCHWc, "fxrt_from_nchwc_f32", fxrt_from_nchwc_f32, false, false},
    {&fx_op_NCHWcToNHWC, "fxrt_nchwc_to_nhwc_f32", fxrt_nchwc_to_nhwc_f32, false, true},
    {&fx_op_NHWCToNCHWc, "fxrt_nhwc_to_nchwc_f32", fxrt_nhwc_to_nchwc_f32, true, true},
};

static int reorder_index(const OpDef *op)
{
    int k = 0;
    while (reorders[k].op != op)
        k++;
    return k;
}

static FxStatus reorder_infer(InferCtx *c)
{
    int k = reorder_index(c->node->op);
    const TensorType *x = c->in[0];
    const int64_t *d = x->dims;
    bool last = reorders[k].channels_last;
    FxStatus st;
    if (reorders[k].to_blocked) {
        if ((st = check_f32_rank(c->node, c->diag, x, "X", 4)) == FX_OK)
            c->out[0] = last ? blocked_type(d[0], d[3], d[1], d[2])
                             : blocked_type(d[0], d[1], d[2], d[3]);
        return st;
    }
    int64_t channels;
    if ((st = blocked_channels(c->node, c->diag, x, &channels)) != FX_OK)
        return st;
    c->out[0] = (TensorType){.dtype = FXRT_DTYPE_FLOAT32, .rank = 4, .dims = {d[0], channels, d[2], d[3]}};
    if (last) {
        c->out[0].dims[1] = d[2];
        c->out[0].dims[2] = d[3];
        c->out[0].dims[3] = channels;
    }
    return FX_OK;
}

/* n's entry in reorders, and its batch, channels and spatial size. */
static int reorder_geometry(const Node *n, int64_t *batch, int64_t *channels, int64_t *spatial)
{
    int k = reorder_index(n->op);
    const TensorType *plain = reorders[k].to_blocked ? node_input_type(n, 0) : &n->out_types[0];
    const int64_t *d = plain->dims;
    *batch = d[0];
    *channels = reorders[k].channels_last ? d[3] : d[1];
    *spatial = reorders[k].channels_last ? d[1] * d[2] : d[2] * d[3];
    return k;
}

static FxStatus reorder_eval(EvalCtx *c)
{
    int64_t batch, channels, spatial;
    int k = reorder_geometry(c->node, &batch, &channels, &spatial);
    reorders[k].kernel(batch, channels, spatial, c->in[0]->data, c->out[0]->data);
    return FX_OK;
}

static FxStatus reorder_emit(EmitCtx *c)
{
    int64_t batch, channels, spatial;
    int k = reorder_geometry(c->node, &batch, &channels, &spatial);
    emit_line(c, "%s(/*batch=*/%lld, /*channels=*/%lld, /*spatial=*/%lld, %s, %s);",
              reorders[k].name, (long long)batch, (long long)channels, (long long)spatial,
              c->in[0], c->out[0]);
    return FX_OK;
}

static const AttrSpec no_attrs[] = {{NULL}};

static const AttrSpec from_nchwc_attrs[] = {
    {"channels", FX_ATTR_INT, NULL, true},
    {NULL},
};

#define REORDER_OP(NAME, ATTRS)                                                        \
    const OpDef fx_op_##NAME = {                                                       \
        .name = #NAME,                                                                 \
        .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,         \
        .flags = FX_OPF_INTERNAL,                                                      \
        .attrs = ATTRS,                                                                \
        .infer = reorder_infer,                                                        \
        .eval = reorder_eval,                                                          \
        .emit = reorder_emit,                                                          \
    }

REORDER_OP(ToNCHWc, no_attrs);
REORDER_OP(FromNCHWc, from_nchwc_attrs);
REORDER_OP(NCHWcToNHWC, from_nchwc_attrs);
REORDER_OP(NHWCToNCHWc, no_attrs);

/* --- LayerNormNCHWc ---------------------------------------------------------- */

static FxStatus layernorm_nchwc_infer(InferCtx *c)
{
    const TensorType *x = c->in[0];
    int64_t channels;
    FxStatus st = blocked_channels(c->node, c->diag, x, &channels);
    for (int i = 1; i < c->num_inputs && st == FX_OK; i++) {
        const TensorType *t = c->in[i];
        if (t && (t->dtype != FXRT_DTYPE_FLOAT32 || type_numel(t) != channels))
            st = diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                 "%s must hold %lld float32 values, one per channel",
                                 i == 1 ? "Scale" : "B", (long long)channels);
    }
    if (st == FX_OK)
        c->out[0] = (TensorType){.dtype = FXRT_DTYPE_FLOAT32, .rank = 4,
                                 .dims = {x->dims[0], x->dims[2], x->dims[3], channels}};
    return st;
}

static FxStatus layernorm_nchwc_eval(EvalCtx *c)
{
    const int64_t *d = c->out[0]->type.dims;
    fxrt_layernorm_nchwc_f32(d[0], d[3], d[1] * d[2], c->in[0]->data, c->in[1]->data,
                             c->num_inputs > 2 && c->in[2] ? c->in[2]->data : NULL,
                             node_attr_float(c->node, "epsilon", 1e-5f), c->out[0]->data);
    return FX_OK;
}

static FxStatus layernorm_nchwc_emit(EmitCtx *c)
{
    const int64_t *d = c->node->out_types[0].dims;
    char eps[48];
    emit_line(c,
              "fxrt_layernorm_nchwc_f32(/*batch=*/%lld, /*channels=*/%lld, /*spatial=*/%lld, %s, "
              "%s, %s, /*eps=*/%s, %s);",
              (long long)d[0], (long long)d[3], (long long)(d[1] * d[2]), c->in[0], c->in[1],
              c->num_inputs > 2 && c->in[2] ? c->in[2] : "NULL",
              c_float_literal(node_attr_float(c->node, "epsilon", 1e-5f), eps, sizeof eps),
              c->out[0]);
    return FX_OK;
}

static const AttrSpec layernorm_nchwc_attrs[] = {
    {"channels", FX_ATTR_INT, NULL, true},
    {"epsilon", FX_ATTR_FLOAT, "1e-05", false},
    {NULL},
};

const OpDef fx_op_LayerNormNCHWc = {
    .name = "LayerNormNCHWc",
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = layernorm_nchwc_attrs,
    .infer = layernorm_nchwc_infer,
    .eval = layernorm_nchwc_eval,
    .emit = layernorm_nchwc_emit,
};

/* --- ConvNCHWc --------------------------------------------------------------- */

/* count ints of attribute name into v, each >= lo. */
static FxStatus read_ints(const Node *n, Diag *d, const char *name, int count, int64_t lo,
                          int64_t *v)
{
    const int64_t *vals;
    if (node_attr_ints(n, name, &vals) != count)
        return diag_node_error(d, FX_ERR_INVALID, n, "%s needs %d values", name, count);
    for (int i = 0; i < count; i++) {
        if (vals[i] < lo || vals[i] > ((int64_t)1 << 32))
            return diag_node_error(d, FX_ERR_INVALID, n, "%s[%d] = %lld is out of range", name,
                                   i, (long long)vals[i]);
        v[i] = vals[i];
    }
    return FX_OK;
}

/* The runtime parameters of n for input X of type x; *x_blocked tells
 * whether X is NCHWc. */
static FxStatus conv_nchwc_params(const Node *n, Diag *d, const TensorType *x,
                                  FxrtConvParams *p, int *x_blocked)
{
    if (x->dtype != FXRT_DTYPE_FLOAT32 || (x->rank != 4 && x->rank != 5))
        return check_f32_rank(n, d, x, "X", 5);
    int64_t kernel[2], stride[2], dilation[2], pads[4];
    FxStatus st;
    if ((st = read_ints(n, d, "kernel_shape", 2, 1, kernel)) != FX_OK ||
        (st = read_ints(n, d, "strides", 2, 1, stride)) != FX_OK ||
        (st = read_ints(n, d, "dilations", 2, 1, dilation)) != FX_OK ||
        (st = read_ints(n, d, "pads", 4, 0, pads)) != FX_OK)
        return st;
    memset(p, 0, sizeof *p);
    p->batch = x->dims[0];
    p->in_channels = node_attr_int(n, "in_channels", 0);
    p->out_channels = node_attr_int(n, "out_channels", 0);
    p->groups = node_attr_int(n, "group", 1);
    *x_blocked = x->rank == 5;
    int64_t want = *x_blocked ? fxrt_nchwc_blocks(p->in_channels) : p->in_channels;
    if (p->in_channels < 1 || p->out_channels < 1 || x->dims[1] != want ||
        (*x_blocked && x->dims[4] != BLOCK))
        return diag_node_error(d, FX_ERR_SHAPE, n,
                               "X does not hold %lld input channels (%s layout)",
                               (long long)p->in_channels, *x_blocked ? "NCHWc" : "NCHW");
    bool depthwise = p->groups == p->in_channels && p->groups == p->out_channels;
    if (p->groups != 1 && !(depthwise && *x_blocked))
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                               "group %lld: only 1 or depthwise on NCHWc input",
                               (long long)p->groups);
    p->in_size[0] = p->out_size[0] = p->kernel[0] = p->stride[0] = p->dilation[0] = 1;
    for (int i = 0; i < 2; i++) {
        int64_t in = x->dims[2 + i], span = (kernel[i] - 1) * dilation[i] + 1;
        int64_t padded = in + pads[i] + pads[2 + i];
        if (padded < span)
            return diag_node_error(d, FX_ERR_SHAPE, n,
                                   "spatial axis %d: a window of %lld does not fit %lld", i,
                                   (long long)span, (long long)padded);
        p->in_size[1 + i] = in;
        p->out_size[1 + i] = (padded - span) / stride[i] + 1;
        p->kernel[1 + i] = kernel[i];
        p->stride[1 + i] = stride[i];
        p->dilation[1 + i] = dilation[i];
        p->pad_begin[1 + i] = pads[i];
    }
    return FX_OK;
}

FxStatus nchwc_conv_node_params(const Node *n, Diag *d, FxrtConvParams *p, int *x_blocked)
{
    return conv_nchwc_params(n, d, node_input_type(n, 0), p, x_blocked);
}

static FxStatus check_numel(const Node *n, Diag *d, const TensorType *t, int64_t want,
                            const char *what)
{
    if (t->dtype == FXRT_DTYPE_FLOAT32 && type_numel(t) == want)
        return FX_OK;
    char buf[128];
    return diag_node_error(d, FX_ERR_SHAPE, n, "%s is %s; expected %lld float32 values", what,
                           type_format(t, buf, sizeof buf), (long long)want);
}

/* The parameters of a ConvNCHWcWinograd node: ConvNCHWc's, which must be a
 * convolution fxrt_conv_nchwc_winograd_f32 does. */
static FxStatus winograd_params(const Node *n, Diag *d, const TensorType *x, FxrtConvParams *p)
{
    int blocked;
    FxStatus st = conv_nchwc_params(n, d, x, p, &blocked);
    if (st == FX_OK && (!blocked || !fxrt_conv_nchwc_winograd_applies(p)))
        st = diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                             "Winograd F(4x4, 3x3) takes a 3x3 stride-1 undilated convolution of "
                             "group 1 on NCHWc input");
    return st;
}

static FxStatus conv_nchwc_infer_kind(InferCtx *c, bool winograd)
{
    FxrtConvParams p;
    FxrtEpilogue e;
    int blocked = 1;
    FxStatus st;
    if ((st = winograd ? winograd_params(c->node, c->diag, c->in[0], &p)
                       : conv_nchwc_params(c->node, c->diag, c->in[0], &p, &blocked)) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &e)) != FX_OK ||
        (st = check_numel(c->node, c->diag, c->in[1],
                          winograd ? fxrt_conv_nchwc_winograd_packed_floats(&p)
                                   : fxrt_conv_nchwc_packed_floats(&p, blocked),
                          "the packed W")) != FX_OK)
        return st;
    TensorType y = blocked_type(p.batch, p.out_channels, p.out_size[1], p.out_size[2]);
    if (c->num_inputs > 2 && c->in[2] &&
        (st = check_numel(c->node, c->diag, c->in[2], y.dims[1] * BLOCK, "B")) != FX_OK)
        return st;
    if (c->num_inputs > 3 && c->in[3] && !type_equal(c->in[3], &y)) {
        char a[128], b[128];
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "the residual is %s but the output is %s",
                               type_format(c->in[3], a, sizeof a), type_format(&y, b, sizeof b));
    }
    c->out[0] = y;
    return FX_OK;
}

static FxStatus conv_nchwc_eval(EvalCtx *c)
{
    FxrtConvParams p;
    FxrtEpilogue ep;
    int blocked;
    FxStatus st;
    if ((st = conv_nchwc_params(c->node, c->diag, &c->in[0]->type, &p, &blocked)) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &ep)) != FX_OK)
        return st;
    if (tensor_numel(c->out[0]) == 0)
        return FX_OK;
    float *scratch = NULL;
    int64_t scratch_floats = fxrt_conv_nchwc_scratch_floats(&p, blocked);
    if (scratch_floats && !(scratch = fx_alloc_array((size_t)scratch_floats, sizeof *scratch)))
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    ep.bias = c->num_inputs > 2 && c->in[2] ? c->in[2]->data : NULL;
    ep.residual = c->num_inputs > 3 && c->in[3] ? c->in[3]->data : NULL;
    fxrt_conv_nchwc_f32(&p, blocked, c->in[0]->data, c->in[1]->data, &ep, c->out[0]->data,
                        scratch);
    free(scratch);
    return FX_OK;
}

static FxStatus conv_nchwc_emit(EmitCtx *c)
{
    FxrtConvParams p;
    FxrtEpilogue shape;
    int blocked;
    FxStatus st;
    if ((st = conv_nchwc_params(c->node, c->diag, node_input_type(c->node, 0), &p, &blocked)) !=
            FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &shape)) != FX_OK)
        return st;
    if (type_numel(&c->node->out_types[0]) == 0)
        return FX_OK;
    const char *ep = nn_emit_epilogue(c, &shape, nn_emit_input(c, 2), nn_emit_input(c, 3));
    nn_conv_emit_params(c, &p);
    if (c->inplace)
        emit_line(c, "fxrt_conv_nchwc_inplace_f32(&p, %s, %s, %s, (float *)(%s));", c->out[0],
                  c->in[1], ep, c->scratch);
    else if (c->scratch)
        emit_line(c, "fxrt_conv_nchwc_f32(&p, /*x_blocked=*/%d, %s, %s, %s, %s, (float *)(%s));",
                  blocked, c->in[0], c->in[1], ep, c->out[0], c->scratch);
    else
        emit_line(c, "fxrt_conv_nchwc_f32(&p, /*x_blocked=*/%d, %s, %s, %s, %s, NULL);", blocked,
                  c->in[0], c->in[1], ep, c->out[0]);
    return FX_OK;
}

/* Strided 1x1 layers copy the pixels they read into scratch
 * (fxrt_conv_nchwc_scratch_floats). */
static size_t conv_nchwc_scratch(const Node *n)
{
    Diag quiet;
    diag_init(&quiet);
    FxrtConvParams p;
    int blocked;
    FxStatus st = conv_nchwc_params(n, &quiet, node_input_type(n, 0), &p, &blocked);
    diag_free(&quiet);
    return st == FX_OK ? (size_t)fxrt_conv_nchwc_scratch_floats(&p, blocked) * sizeof(float) : 0;
}

/* The small kernels read the strided pixels where they are. */
static size_t conv_nchwc_small_scratch(const Node *n)
{
    (void)n;
    return 0;
}

/* Depthwise and pointwise layers can write over their input with a plane or
 * a row of scratch (fxrt_conv_nchwc_inplace_f32). */
static bool conv_nchwc_inplace(const Node *n, size_t *scratch_bytes)
{
    Diag quiet;
    diag_init(&quiet);
    FxrtConvParams p;
    int blocked;
    FxStatus st = conv_nchwc_params(n, &quiet, node_input_type(n, 0), &p, &blocked);
    diag_free(&quiet);
    if (st != FX_OK || !fxrt_conv_nchwc_inplace_applies(&p, blocked))
        return false;
    *scratch_bytes = (size_t)fxrt_conv_nchwc_inplace_scratch_floats(&p) * sizeof(float);
    return true;
}

static FxStatus conv_nchwc_infer(InferCtx *c) { return conv_nchwc_infer_kind(c, false); }
static FxStatus winograd_infer(InferCtx *c) { return conv_nchwc_infer_kind(c, true); }

static FxStatus winograd_eval(EvalCtx *c)
{
    FxrtConvParams p;
    FxrtEpilogue ep;
    FxStatus st;
    if ((st = winograd_params(c->node, c->diag, &c->in[0]->type, &p)) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &ep)) != FX_OK)
        return st;
    if (tensor_numel(c->out[0]) == 0)
        return FX_OK;
    float *scratch = fx_alloc_array((size_t)fxrt_conv_nchwc_winograd_scratch_floats(&p),
                                    sizeof *scratch);
    if (!scratch)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    ep.bias = c->num_inputs > 2 && c->in[2] ? c->in[2]->data : NULL;
    ep.residual = c->num_inputs > 3 && c->in[3] ? c->in[3]->data : NULL;
    fxrt_conv_nchwc_winograd_f32(&p, c->in[0]->data, c->in[1]->data, &ep, c->out[0]->data,
                                 scratch);
    free(scratch);
    return FX_OK;
}

static FxStatus winograd_emit(EmitCtx *c)
{
    FxrtConvParams p;
    FxrtEpilogue shape;
    FxStatus st;
    if ((st = winograd_params(c->node, c->diag, node_input_type(c->node, 0), &p)) != FX_OK ||
        (st = fused_nn_node_epilogue(c->node, c->diag, &shape)) != FX_OK)
        return st;
    if (type_numel(&c->node->out_types[0]) == 0)
        return FX_OK;
    const char *ep = nn_emit_epilogue(c, &shape, nn_emit_input(c, 2), nn_emit_input(c, 3));
    nn_conv_emit_params(c, &p);
    emit_line(c, "fxrt_conv_nchwc_winograd_f32(&p, %s, %s, %s, %s, (float *)(%s));", c->in[0],
              c->in[1], ep, c->out[0], c->scratch);
    return FX_OK;
}

static size_t winograd_scratch(const Node *n)
{
    Diag quiet;
    diag_init(&quiet);
    FxrtConvParams p;
    FxStatus st = winograd_params(n, &quiet, node_input_type(n, 0), &p);
    diag_free(&quiet);
    return st == FX_OK ? (size_t)fxrt_conv_nchwc_winograd_scratch_floats(&p) * sizeof(float) : 0;
}

static const AttrSpec conv_nchwc_attrs[] = {
    {"dilations", FX_ATTR_INTS, NULL, true},
    {"group", FX_ATTR_INT, "1", false},
    {"in_channels", FX_ATTR_INT, NULL, true},
    {"kernel_shape", FX_ATTR_INTS, NULL, true},
    {"out_channels", FX_ATTR_INT, NULL, true},
    {"pads", FX_ATTR_INTS, NULL, true},
    {"strides", FX_ATTR_INTS, NULL, true},
    FUSED_NN_EPILOGUE_ATTRS,
    {NULL},
};

/* A group-1 layer adds its residual R (input 3) before the activation by
 * starting its sums from Y when R and Y are one buffer
 * (fxrt_conv_nchwc_f32); R added after the activation, or a depthwise
 * layer, must read R where it is. */
static int conv_nchwc_accumulates_into(const Node *n)
{
    if (n->num_args < 4 || !n->args[3] || node_attr_int(n, "residual_after", 0) != 0 ||
        node_attr_int(n, "group", 1) != 1)
        return -1;
    return 3;
}

const OpDef fx_op_ConvNCHWc = {
    .name = "ConvNCHWc",
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_MODULE,
    .attrs = conv_nchwc_attrs,
    .infer = conv_nchwc_infer,
    .eval = conv_nchwc_eval,
    .emit = conv_nchwc_emit,
    .scratch_bytes = conv_nchwc_scratch,
    .small_scratch_bytes = conv_nchwc_small_scratch,
    .inplace = conv_nchwc_inplace,
    .accumulates_into = conv_nchwc_accumulates_into,
};

const OpDef fx_op_ConvNCHWcWinograd = {
    .name = "ConvNCHWcWinograd",
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_MODULE,
    .attrs = conv_nchwc_attrs,
    .infer = winograd_infer,
    .eval = winograd_eval,
    .emit = winograd_emit,
    .scratch_bytes = winograd_scratch,
};

/* --- pools ------------------------------------------------------------------- */

/* X [N, CB, H, W, 8] as the [N, CB, H, W] planes the pool rules expect. */
static FxStatus pool_planes(const Node *n, Diag *d, const TensorType *x, TensorType *planes)
{
    FxStatus st = check_f32_rank(n, d, x, "X", 5);
    if (st != FX_OK)
        return st;
    *planes = *x;
    planes->rank = 4;
    return FX_OK;
}

static FxStatus pool_nchwc_params(const Node *n, Diag *d, const TensorType *x, FxrtPoolParams *p,
                                  TensorType *out)
{
    TensorType planes;
    FxStatus st = pool_planes(n, d, x, &planes);
    if (st != FX_OK || (st = nn_pool_params(n, d, &planes, p, out)) != FX_OK)
        return st;
    out->rank = 5;
    out->dims[4] = BLOCK;
    return FX_OK;
}

static FxStatus pool_nchwc_infer(InferCtx *c)
{
    FxrtPoolParams p;
    return pool_nchwc_params(c->node, c->diag, c->in[0], &p, &c->out[0]);
}

static const char *pool_kernel(const Node *n)
{
    return n->op == &fx_op_MaxPoolNCHWc ? "fxrt_maxpool_nchwc_f32" : "fxrt_avgpool_nchwc_f32";
}

/* An average pool whose one window is the whole unpadded image (the
 * DS-CNN's classifier head) is a global average pool: its kernel is a sum
 * per plane, a fraction of the general pool's code. */
static bool pool_is_global(const Node *n, const FxrtPoolParams *p)
{
    if (n->op != &fx_op_AveragePoolNCHWc)
        return false;
    for (int i = 0; i < FXRT_CONV_MAX_SPATIAL; i++)
        if (p->kernel[i] != p->in_size[i] || p->out_size[i] != 1 || p->pad_begin[i] ||
            p->pad_end[i] || p->dilation[i] != 1)
            return false;
    return true;
}

static int64_t pool_window(const FxrtPoolParams *p)
{
    int64_t size = 1;
    for (int i = 0; i < FXRT_CONV_MAX_SPATIAL; i++)
        size *= p->kernel[i];
    return size;
}

static FxStatus pool_nchwc_eval(EvalCtx *c)
{
    FxrtPoolParams p;
    TensorType out;
    FxStatus st = pool_nchwc_params(c->node, c->diag, &c->in[0]->type, &p, &out);
    if (st != FX_OK)
        return st;
    if (pool_is_global(c->node, &p))
        fxrt_global_avgpool_nchwc_f32(p.planes, pool_window(&p), c->in[0]->data, c->out[0]->data);
    else if (c->node->op == &fx_op_MaxPoolNCHWc)
        fxrt_maxpool_nchwc_f32(&p, c->in[0]->data, c->out[0]->data);
    else
        fxrt_avgpool_nchwc_f32(&p, c->in[0]->data, c->out[0]->data);
    return FX_OK;
}

static FxStatus pool_nchwc_emit(EmitCtx *c)
{
    FxrtPoolParams p;
    TensorType out;
    FxStatus st = pool_nchwc_params(c->node, c->diag, node_input_type(c->node, 0), &p, &out);
    if (st != FX_OK)
        return st;
    if (pool_is_global(c->node, &p)) {
        emit_line(c, "fxrt_global_avgpool_nchwc_f32(/*planes=*/%lld, /*size=*/%lld, %s, %s);",
                  (long long)p.planes, (long long)pool_window(&p), c->in[0], c->out[0]);
        return FX_OK;
    }
    nn_pool_emit_params(c, &p);
    emit_line(c, "%s(&p, %s, %s);", pool_kernel(c->node), c->in[0], c->out[0]);
    return FX_OK;
}

const OpDef fx_op_MaxPoolNCHWc = {
    .name = "MaxPoolNCHWc",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = nn_maxpool_attrs,
    .infer = pool_nchwc_infer,
    .eval = pool_nchwc_eval,
    .emit = pool_nchwc_emit,
};

const OpDef fx_op_AveragePoolNCHWc = {
    .name = "AveragePoolNCHWc",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = nn_avgpool_attrs,
    .infer = pool_nchwc_infer,
    .eval = pool_nchwc_eval,
    .emit = pool_nchwc_emit,
};

static FxStatus global_avgpool_nchwc_infer(InferCtx *c)
{
    FxStatus st = check_f32_rank(c->node, c->diag, c->in[0], "X", 5);
    if (st != FX_OK)
        return st;
    c->out[0] = *c->in[0];
    c->out[0].dims[2] = c->out[0].dims[3] = 1;
    return FX_OK;
}

static FxStatus global_avgpool_nchwc_eval(EvalCtx *c)
{
    const int64_t *d = c->in[0]->type.dims;
    fxrt_global_avgpool_nchwc_f32(d[0] * d[1], d[2] * d[3], c->in[0]->data, c->out[0]->data);
    return FX_OK;
}

static FxStatus global_avgpool_nchwc_emit(EmitCtx *c)
{
    const int64_t *d = node_input_type(c->node, 0)->dims;
    emit_line(c, "fxrt_global_avgpool_nchwc_f32(/*planes=*/%lld, /*size=*/%lld, %s, %s);",
              (long long)(d[0] * d[1]), (long long)(d[2] * d[3]), c->in[0], c->out[0]);
    return FX_OK;
}

const OpDef fx_op_GlobalAveragePoolNCHWc = {
    .name = "GlobalAveragePoolNCHWc",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = no_attrs,
    .infer = global_avgpool_nchwc_infer,
    .eval = global_avgpool_nchwc_eval,
    .emit = global_avgpool_nchwc_emit,
};

/* --- SqueezeExciteNCHWc ------------------------------------------------------- */

/* The two epilogues: the hidden layer's from the fused attributes
 * (`activation`, `act_alpha`, `act_beta`), the gate's from `gate`,
 * `gate_alpha`, `gate_beta`; biases per column. */
static FxStatus squeeze_excite_epilogues(const Node *n, Diag *d, FxrtEpilogue *hidden,
                                         FxrtEpilogue *gate)
{
    FxStatus st = fused_nn_node_epilogue(n, d, hidden);
    if (st != FX_OK)
        return st;
    const char *name = node_attr_string(n, "gate", "sigmoid");
    memset(gate, 0, sizeof *gate);
    int k = 0;
    while (fused_nn_activation_name((FxrtActivation)k) &&
           strcmp(fused_nn_activation_name((FxrtActivation)k), name) != 0)
        k++;
    if (!fused_nn_activation_name((FxrtActivation)k))
        return diag_node_error(d, FX_ERR_INVALID, n, "unknown gate activation '%s'", name);
    gate->activation = k;
    gate->alpha = node_attr_float(n, "gate_alpha", 0.0f);
    gate->beta = node_attr_float(n, "gate_beta", 0.0f);
    hidden->bias_col_stride = gate->bias_col_stride = 1;
    return FX_OK;
}

/* The operands of the gate from input `first` on: W1 [channels][squeezed],
 * W2 [squeezed][padded], B1 [squeezed], B2 [padded]. */
static FxStatus squeeze_excite_check(InferCtx *c, int first, int64_t *channels)
{
    const TensorType *x = c->in[0];
    int64_t squeezed = node_attr_int(c->node, "squeezed", 0);
    FxStatus st = blocked_channels(c->node, c->diag, x, channels);
    if (st != FX_OK)
        return st;
    int64_t padded = x->dims[1] * BLOCK;
    const int64_t want[4][2] = {{*channels, squeezed}, {squeezed, padded}, {squeezed, 1}, {padded, 1}};
    static const char *const what[4] = {"W1", "W2", "B1", "B2"};
    for (int i = 0; i < 4; i++) {
        const TensorType *t = first + i < c->num_inputs ? c->in[first + i] : NULL;
        if (t && (squeezed < 1 || t->dtype != FXRT_DTYPE_FLOAT32 ||
                  type_numel(t) != want[i][0] * want[i][1]))
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "%s must hold %lld x %lld float32 values", what[i],
                                   (long long)want[i][0], (long long)want[i][1]);
    }
    FxrtEpilogue hidden, gate;
    return squeeze_excite_epilogues(c->node, c->diag, &hidden, &gate);
}

static FxStatus squeeze_excite_infer(InferCtx *c)
{
    int64_t channels;
    FxStatus st = squeeze_excite_check(c, 1, &channels);
    if (st == FX_OK)
        c->out[0] = *c->in[0];
    return st;
}

static size_t squeeze_excite_scratch(const Node *n)
{
    return (size_t)fxrt_squeeze_excite_nchwc_scratch_floats(
                   node_attr_int(n, "channels", 0), node_attr_int(n, "squeezed", 0)) *
           sizeof(float);
}

static const float *optional_data(const EvalCtx *c, int i)
{
    return i < c->num_inputs && c->in[i] ? c->in[i]->data : NULL;
}

/* The epilogues of the gate whose operands start at input `first`, biases
 * bound, and its scratch. */
static FxStatus squeeze_excite_eval_setup(EvalCtx *c, int first, FxrtEpilogue *hidden,
                                          FxrtEpilogue *gate, float **scratch)
{
    FxStatus st = squeeze_excite_epilogues(c->node, c->diag, hidden, gate);
    if (st != FX_OK)
        return st;
    hidden->bias = optional_data(c, first + 2);
    gate->bias = optional_data(c, first + 3);
    *scratch = fx_alloc_array(squeeze_excite_scratch(c->node) / sizeof(float), sizeof(float));
    return *scratch ? FX_OK : diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
}

static FxStatus squeeze_excite_eval(EvalCtx *c)
{
    const int64_t *d = c->in[0]->type.dims;
    FxrtEpilogue hidden, gate;
    float *scratch;
    FxStatus st = squeeze_excite_eval_setup(c, 1, &hidden, &gate, &scratch);
    if (st != FX_OK)
        return st;
    fxrt_squeeze_excite_nchwc_f32(d[0], node_attr_int(c->node, "channels", 0),
                                  node_attr_int(c->node, "squeezed", 0), d[2] * d[3],
                                  c->in[0]->data, c->in[1]->data, &hidden, c->in[2]->data, &gate,
                                  c->out[0]->data, scratch);
    free(scratch);
    return FX_OK;
}

/* Emits the two epilogues of the gate whose operands start at input
 * `first`; *hidden_ep and *gate_ep name them ("NULL" for none). */
static FxStatus squeeze_excite_emit_epilogues(EmitCtx *c, int first, const char **hidden_ep,
                                              const char **gate_ep)
{
    FxrtEpilogue hidden, gate;
    FxStatus st = squeeze_excite_epilogues(c->node, c->diag, &hidden, &gate);
    if (st != FX_OK)
        return st;
    const char *b1 = c->num_inputs > first + 2 && c->node->args[first + 2] ? c->in[first + 2] : NULL;
    const char *b2 = c->num_inputs > first + 3 && c->node->args[first + 3] ? c->in[first + 3] : NULL;
    *hidden_ep = nn_emit_named_epilogue(c, "hidden_ep", &hidden, b1, NULL) ? "&hidden_ep" : "NULL";
    *gate_ep = nn_emit_named_epilogue(c, "gate_ep", &gate, b2, NULL) ? "&gate_ep" : "NULL";
    return FX_OK;
}

static FxStatus squeeze_excite_emit(EmitCtx *c)
{
    const int64_t *d = node_input_type(c->node, 0)->dims;
    const char *hidden_ep, *gate_ep;
    FxStatus st = squeeze_excite_emit_epilogues(c, 1, &hidden_ep, &gate_ep);
    if (st != FX_OK)
        return st;
    emit_line(c,
              "fxrt_squeeze_excite_nchwc_f32(/*batch=*/%lld, /*channels=*/%lld, "
              "/*squeezed=*/%lld, /*spatial=*/%lld, %s, %s, %s, %s, %s, %s, %s);",
              (long long)d[0], (long long)node_attr_int(c->node, "channels", 0),
              (long long)node_attr_int(c->node, "squeezed", 0), (long long)(d[2] * d[3]),
              c->in[0], c->in[1], hidden_ep, c->in[2], gate_ep, c->out[0], c->scratch);
    return FX_OK;
}

/* --- SqueezeExciteWeightsNCHWc ------------------------------------------------ */

/* The pairs of output blocks of W, the packed weights of a 1x1 convolution
 * on X's blocks ([pairs][CB * 8][2 x 8]). */
static FxStatus squeeze_excite_weight_pairs(const Node *n, Diag *d, const TensorType *x,
                                            const TensorType *w, int64_t *pairs)
{
    int64_t row = x->dims[1] * FXRT_NCHWC_BLOCK * FXRT_NCHWC_PAIR, count = type_numel(w);
    if (x->dims[0] != 1)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                               "the gate of a batch of %lld images cannot be one set of weights",
                               (long long)x->dims[0]);
    if (w->dtype != FXRT_DTYPE_FLOAT32 || count < row || count % row != 0)
        return diag_node_error(d, FX_ERR_SHAPE, n,
                               "W must be packed 1x1 convolution weights on %lld input blocks",
                               (long long)x->dims[1]);
    *pairs = count / row;
    return FX_OK;
}

static FxStatus squeeze_excite_weights_infer(InferCtx *c)
{
    int64_t channels, pairs;
    FxStatus st = squeeze_excite_check(c, 2, &channels);
    if (st == FX_OK &&
        (st = squeeze_excite_weight_pairs(c->node, c->diag, c->in[0], c->in[1], &pairs)) == FX_OK)
        c->out[0] = *c->in[1];
    return st;
}

static FxStatus squeeze_excite_weights_eval(EvalCtx *c)
{
    const int64_t *d = c->in[0]->type.dims;
    FxrtEpilogue hidden, gate;
    float *scratch;
    int64_t pairs = 0;
    FxStatus st = squeeze_excite_weight_pairs(c->node, c->diag, &c->in[0]->type,
                                              &c->in[1]->type, &pairs);
    if (st != FX_OK || (st = squeeze_excite_eval_setup(c, 2, &hidden, &gate, &scratch)) != FX_OK)
        return st;
    fxrt_squeeze_excite_weights_nchwc_f32(node_attr_int(c->node, "channels", 0),
                                          node_attr_int(c->node, "squeezed", 0), d[2] * d[3],
                                          c->in[0]->data, c->in[2]->data, &hidden,
                                          c->in[3]->data, &gate, pairs, c->in[1]->data,
                                          c->out[0]->data, scratch);
    free(scratch);
    return FX_OK;
}

static FxStatus squeeze_excite_weights_emit(EmitCtx *c)
{
    const int64_t *d = node_input_type(c->node, 0)->dims;
    const char *hidden_ep, *gate_ep;
    int64_t pairs = 0;
    FxStatus st = squeeze_excite_weight_pairs(c->node, c->diag, node_input_type(c->node, 0),
                                              node_input_type(c->node, 1), &pairs);
    if (st != FX_OK || (st = squeeze_excite_emit_epilogues(c, 2, &hidden_ep, &gate_ep)) != FX_OK)
        return st;
    emit_line(c,
              "fxrt_squeeze_excite_weights_nchwc_f32(/*channels=*/%lld, /*squeezed=*/%lld, "
              "/*spatial=*/%lld, %s, %s, %s, %s, %s, /*pairs=*/%lld, %s, %s, %s);",
              (long long)node_attr_int(c->node, "channels", 0),
              (long long)node_attr_int(c->node, "squeezed", 0), (long long)(d[2] * d[3]),
              c->in[0], c->in[2], hidden_ep, c->in[3], gate_ep, (long long)pairs, c->in[1],
              c->out[0], c->scratch);
    return FX_OK;
}

static const AttrSpec squeeze_excite_attrs[] = {
    {"channels", FX_ATTR_INT, NULL, true},
    {"squeezed", FX_ATTR_INT, NULL, true},
    {"activation", FX_ATTR_STRING, "none", false},
    {"act_alpha", FX_ATTR_FLOAT, "0.0", false},
    {"act_beta", FX_ATTR_FLOAT, "0.0", false},
    {"gate", FX_ATTR_STRING, "sigmoid", false},
    {"gate_alpha", FX_ATTR_FLOAT, "0.0", false},
    {"gate_beta", FX_ATTR_FLOAT, "0.0", false},
    {NULL},
};

const OpDef fx_op_SqueezeExciteNCHWc = {
    .name = "SqueezeExciteNCHWc",
    .min_inputs = 3, .max_inputs = 5, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = squeeze_excite_attrs,
    .infer = squeeze_excite_infer,
    .eval = squeeze_excite_eval,
    .scratch_bytes = squeeze_excite_scratch,
    .emit = squeeze_excite_emit,
};

const OpDef fx_op_SqueezeExciteWeightsNCHWc = {
    .name = "SqueezeExciteWeightsNCHWc",
    .min_inputs = 4, .max_inputs = 6, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = squeeze_excite_attrs,
    .infer = squeeze_excite_weights_infer,
    .eval = squeeze_excite_weights_eval,
    .scratch_bytes = squeeze_excite_scratch,
    .emit = squeeze_excite_weights_emit,
};
