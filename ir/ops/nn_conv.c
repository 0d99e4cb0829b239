/*
 * nn_conv.c - the convolutions: Conv, ConvTranspose, ConvInteger and
 * QLinearConv, and the window geometry they share with the pools
 * (nn_pool.c, nchwc.c).
 *
 * The windowed ops share one piece of geometry: per spatial axis a kernel,
 * a stride, a dilation and two pads, from which auto_pad (NOTSET, VALID,
 * SAME_UPPER, SAME_LOWER) and ceil_mode derive the output size.
 * window_geometry computes it once for everyone, and conv_params /
 * nn_pool_params turn it into the runtime's FxrtConvParams / FxrtPoolParams,
 * the same structs the generated code will hold as constants.
 *
 * Canonical form: the rank-dependent defaults (kernel_shape taken from W,
 * strides and dilations of 1, pads of 0 when auto_pad is NOTSET) are filled
 * at import when W is a constant, otherwise by the shape function the first
 * time it sees W's type.  auto_pad itself is kept: the pads it implies
 * depend on the input size, which is known only after shape propagation.
 *
 * Refused: more than 3 spatial axes, float16 (FX_ERR_UNSUPPORTED);
 * inconsistent channel counts, groups, attribute lengths or windows larger
 * than the padded input (FX_ERR_SHAPE / FX_ERR_INVALID).  float64 inputs of
 * the float kernels are computed in float32.
 *
 * The emitters write the same parameter structs as static constants; a
 * float32 Conv calls the path (1x1, depthwise, im2col) fxrt_conv_algo picks,
 * chosen at compile time.  The code generator refuses float64 for the float
 * kernels (the interpreter's conversion copies would need scratch).
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

#define SPMAX FXRT_CONV_MAX_SPATIAL

/* Bounds the interpreter's im2col buffer (floats); larger convolutions are
 * unfolded a tile of output positions at a time. */
enum { CONV_SCRATCH_FLOATS = 1 << 24 };

/* --- helpers ---------------------------------------------------------------- */

static const TensorType *input_type(const InferCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static const Tensor *input_value(const EvalCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

FxStatus nn_check_float(const Node *n, Diag *d, const TensorType *t, const char *what)
{
    if (t->dtype == FXRT_DTYPE_FLOAT32 || t->dtype == FXRT_DTYPE_FLOAT64)
        return FX_OK;
    return diag_node_error(d, t->dtype == FXRT_DTYPE_FLOAT16 ? FX_ERR_UNSUPPORTED : FX_ERR_INVALID,
                           n, "%s has element type %s; %s takes float32 or float64", what,
                           dtype_name(t->dtype), n->op->name);
}

static FxStatus check_q8(const Node *n, Diag *d, const TensorType *t, const char *what)
{
    if (t->dtype == FXRT_DTYPE_UINT8 || t->dtype == FXRT_DTYPE_INT8)
        return FX_OK;
    return diag_node_error(d, FX_ERR_INVALID, n, "%s must be uint8 or int8, not %s", what,
                           dtype_name(t->dtype));
}

/* float32 data of a float tensor: the tensor's own for float32, else a
 * converted copy stored in *owned (freed by the caller). */
const float *nn_f32_input(const Tensor *t, float **owned)
{
    *owned = NULL;
    if (!t || t->type.dtype == FXRT_DTYPE_FLOAT32)
        return t ? t->data : NULL;
    int64_t n = tensor_numel(t);
    float *buf = fx_alloc_array((size_t)(n > 0 ? n : 1), sizeof *buf);
    if (!buf)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        buf[i] = (float)fxrt_load_f64(t->type.dtype, t->data, (size_t)i);
    *owned = buf;
    return buf;
}

/* Where a float kernel writes: the output itself for float32, else a
 * temporary that nn_f32_output_finish converts into the output. */
float *nn_f32_output(Tensor *t)
{
    if (t->type.dtype == FXRT_DTYPE_FLOAT32)
        return t->data;
    int64_t n = tensor_numel(t);
    return fx_alloc_array((size_t)(n > 0 ? n : 1), sizeof(float));
}

void nn_f32_output_finish(Tensor *t, float *buf)
{
    if (t->type.dtype == FXRT_DTYPE_FLOAT32 || !buf)
        return;
    int64_t n = tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        fxrt_store_f64(t->type.dtype, t->data, (size_t)i, buf[i]);
    free(buf);
}

/* --- emitter helpers ---------------------------------------------------------- */

/* The generated code runs the float kernels on float32 only; float64 would
 * need conversion buffers the interpreter makes with malloc. */
FxStatus nn_emit_check_f32(EmitCtx *c, DType t)
{
    if (t == FXRT_DTYPE_FLOAT32)
        return FX_OK;
    return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                           "the code generator supports %s on float32 only, not %s",
                           c->node->op->name, dtype_name(t));
}

void nn_conv_emit_params(EmitCtx *c, const FxrtConvParams *p)
{
    char a[96], b[96], k[96];
    emit_line(c, "static const FxrtConvParams p = {");
    emit_line(c, "    .batch = %lld, .in_channels = %lld, .out_channels = %lld, .groups = %lld,",
            (long long)p->batch, (long long)p->in_channels, (long long)p->out_channels,
            (long long)p->groups);
    emit_line(c, "    .in_size = %s, .out_size = %s, .kernel = %s,",
            nn_format_ints(p->in_size, SPMAX, a, sizeof a),
            nn_format_ints(p->out_size, SPMAX, b, sizeof b), nn_format_ints(p->kernel, SPMAX, k, sizeof k));
    emit_line(c, "    .stride = %s, .dilation = %s, .pad_begin = %s, .col_tile = %lld};",
            nn_format_ints(p->stride, SPMAX, a, sizeof a),
            nn_format_ints(p->dilation, SPMAX, b, sizeof b),
            nn_format_ints(p->pad_begin, SPMAX, k, sizeof k), (long long)p->col_tile);
}

void nn_pool_emit_params(EmitCtx *c, const FxrtPoolParams *p)
{
    char a[96], b[96], k[96], f[48];
    emit_line(c, "static const FxrtPoolParams p = {");
    emit_line(c, "    .planes = %lld, .in_size = %s, .out_size = %s, .kernel = %s,",
            (long long)p->planes, nn_format_ints(p->in_size, SPMAX, a, sizeof a),
            nn_format_ints(p->out_size, SPMAX, b, sizeof b), nn_format_ints(p->kernel, SPMAX, k, sizeof k));
    emit_line(c, "    .stride = %s, .dilation = %s,", nn_format_ints(p->stride, SPMAX, a, sizeof a),
            nn_format_ints(p->dilation, SPMAX, b, sizeof b));
    emit_line(c, "    .pad_begin = %s, .pad_end = %s,", nn_format_ints(p->pad_begin, SPMAX, a, sizeof a),
            nn_format_ints(p->pad_end, SPMAX, b, sizeof b));
    emit_line(c, "    .count_include_pad = %d, .storage_order = %d, .p = %s};",
            (int)p->count_include_pad, (int)p->storage_order, c_float_literal(p->p, f, sizeof f));
}

/* --- attribute defaults (canonical form) ------------------------------------ */

static const char *const auto_pad_names[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
enum { PAD_NOTSET, PAD_SAME_UPPER, PAD_SAME_LOWER, PAD_VALID };

/* *mode is PAD_NOTSET when the attribute is refused, so it is never read
 * undefined. */
static FxStatus read_auto_pad(const Node *n, Diag *d, int *mode)
{
    *mode = PAD_NOTSET;
    const char *s = node_attr_string(n, "auto_pad", "NOTSET");
    for (int i = 0; i < 4; i++)
        if (strcmp(s, auto_pad_names[i]) == 0) {
            *mode = i;
            return FX_OK;
        }
    return diag_node_error(d, FX_ERR_INVALID, n,
                           "auto_pad '%s' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", s);
}

static bool set_ints_if_absent(Node *n, const char *name, int64_t value, int count)
{
    if (node_attr(n, name))
        return true;
    int64_t vals[2 * SPMAX];
    for (int i = 0; i < count; i++)
        vals[i] = value;
    return node_set_attr_ints(n, name, vals, count) != NULL;
}

/* Fills kernel_shape (from W's dims when w is given), strides, dilations,
 * ConvTranspose's output_padding and, without auto_pad, pads; then restores
 * the attribute spec order. */
static FxStatus window_fill_defaults(Node *n, Diag *d, int sp, const int64_t *w_dims)
{
    if (sp < 1 || sp > SPMAX)
        return FX_OK; /* the shape function reports it */
    bool ok = true;
    if (w_dims && !node_attr(n, "kernel_shape"))
        ok = node_set_attr_ints(n, "kernel_shape", w_dims, sp) != NULL;
    int mode;
    FxStatus st = read_auto_pad(n, d, &mode);
    if (st != FX_OK)
        return st;
    ok = ok && set_ints_if_absent(n, "strides", 1, sp);
    ok = ok && set_ints_if_absent(n, "dilations", 1, sp);
    if (n->op == &fx_op_ConvTranspose)
        ok = ok && set_ints_if_absent(n, "output_padding", 0, sp);
    if (mode == PAD_NOTSET)
        ok = ok && set_ints_if_absent(n, "pads", 0, 2 * sp);
    if (!ok)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    return op_apply_attr_specs(n->op, n, d);
}

/* Import-time defaults: the spatial rank and kernel come from a constant
 * weight at args[w_index], else from kernel_shape; with neither, the shape
 * function fills them once W's type is known. */
static FxStatus conv_canonicalize_at(Node *n, int w_index, Diag *d)
{
    int mode;
    FxStatus st = read_auto_pad(n, d, &mode);
    if (st != FX_OK)
        return st;
    const Node *w = w_index < n->num_args ? n->args[w_index] : NULL;
    const int64_t *ks;
    int64_t nk = node_attr_ints(n, "kernel_shape", &ks);
    if (w && w->opcode == FX_OPCODE_GET_ATTR && w->value && w->value->type.rank >= 3)
        return window_fill_defaults(n, d, w->value->type.rank - 2, w->value->type.dims + 2);
    if (nk > 0)
        return window_fill_defaults(n, d, (int)nk, NULL);
    return FX_OK;
}

static FxStatus conv_canonicalize(Node *n, int opset, Diag *d)
{
    (void)opset;
    return conv_canonicalize_at(n, 1, d);
}

static FxStatus qlinear_conv_canonicalize(Node *n, int opset, Diag *d)
{
    (void)opset;
    return conv_canonicalize_at(n, 3, d);
}

FxStatus nn_pool_canonicalize(Node *n, int opset, Diag *d)
{
    (void)opset;
    const int64_t *ks;
    int64_t nk = node_attr_ints(n, "kernel_shape", &ks);
    if (nk < 0)
        return FX_OK; /* required: the attribute specs report it */
    if (nk < 1 || nk > SPMAX)
        return diag_node_error(d, nk > SPMAX ? FX_ERR_UNSUPPORTED : FX_ERR_INVALID, n,
                               "kernel_shape has %lld values; 1 to %d spatial axes are supported",
                               (long long)nk, SPMAX);
    return window_fill_defaults(n, d, (int)nk, NULL);
}

/* --- geometry ------------------------------------------------------------- */

typedef struct Geometry {
    int sp;
    int64_t in[SPMAX], out[SPMAX], kernel[SPMAX], stride[SPMAX], dilation[SPMAX];
    int64_t pad_begin[SPMAX], pad_end[SPMAX];
} Geometry;

/* Reads an INTS attribute of exactly `count` values (absent: `dflt` each),
 * each in [min, 2^31): the bound keeps every window computation far from
 * int64 overflow. */
static FxStatus read_ints(const Node *n, Diag *d, const char *name, int count, int64_t dflt,
                          int64_t min, int64_t *out)
{
    const int64_t *v;
    int64_t k = node_attr_ints(n, name, &v);
    if (k < 0) {
        for (int i = 0; i < count; i++)
            out[i] = dflt;
        return FX_OK;
    }
    if (k != count)
        return diag_node_error(d, FX_ERR_SHAPE, n, "%s has %lld values, expected %d", name,
                               (long long)k, count);
    for (int i = 0; i < count; i++) {
        if (v[i] < min || v[i] > INT32_MAX)
            return diag_node_error(d, FX_ERR_INVALID, n, "%s[%d] = %lld is out of range [%lld, 2^31)",
                                   name, i, (long long)v[i], (long long)min);
        out[i] = v[i];
    }
    return FX_OK;
}

/* Stride, dilation, pads and output size of a convolution or pool whose
 * input has spatial shape in[sp] and kernel g->kernel (already set). */
static FxStatus window_geometry(const Node *n, Diag *d, Geometry *g, bool ceil_mode)
{
    int sp = g->sp, mode;
    FxStatus st;
    int64_t pads[2 * SPMAX];
    if ((st = read_auto_pad(n, d, &mode)) != FX_OK ||
        (st = read_ints(n, d, "strides", sp, 1, 1, g->stride)) != FX_OK ||
        (st = read_ints(n, d, "dilations", sp, 1, 1, g->dilation)) != FX_OK ||
        (st = read_ints(n, d, "pads", 2 * sp, 0, 0, pads)) != FX_OK)
        return st;
    for (int i = 0; i < sp; i++) {
        int64_t in = g->in[i], s = g->stride[i];
        int64_t eff = (g->kernel[i] - 1) * g->dilation[i] + 1;
        int64_t pb = 0, pe = 0, out;
        if (mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) {
            out = ceil_div(in, s);
            int64_t total = (out - 1) * s + eff - in;
            if (total < 0)
                total = 0;
            pb = mode == PAD_SAME_UPPER ? total / 2 : total - total / 2;
            pe = total - pb;
        } else {
            if (mode == PAD_NOTSET) {
                pb = pads[i];
                pe = pads[sp + i];
            }
            int64_t span = in + pb + pe - eff;
            if (span < 0)
                return diag_node_error(d, FX_ERR_SHAPE, n,
                                       "spatial axis %d: the window (%lld with dilation) is "
                                       "larger than the padded input (%lld)",
                                       i, (long long)eff, (long long)(in + pb + pe));
            out = (ceil_mode ? ceil_div(span, s) : span / s) + 1;
            /* A last window that would start in the end padding is dropped
             * (ONNX and PyTorch agree on this for ceil_mode). */
            if (ceil_mode && (out - 1) * s >= in + pb)
                out--;
        }
        g->pad_begin[i] = pb;
        g->pad_end[i] = pe;
        g->out[i] = out;
    }
    return FX_OK;
}

/* --- convolution parameters ------------------------------------------------ */

typedef enum ConvKind { CONV_PLAIN, CONV_TRANSPOSE } ConvKind;

/* Checks X [N, C, in...] and W and fills the runtime parameters and the
 * output shape.  Plain: W [M, C/group, k...]; transposed: W [C, M/group, k...]. */
static FxStatus conv_params(const Node *n, Diag *d, ConvKind kind, const TensorType *x,
                            const TensorType *w, FxrtConvParams *p, TensorType *out)
{
    if (x->rank < 3 || x->rank - 2 > SPMAX)
        return diag_node_error(d, x->rank < 3 ? FX_ERR_SHAPE : FX_ERR_UNSUPPORTED, n,
                               "X has rank %d; 1 to %d spatial axes are supported", x->rank,
                               SPMAX);
    if (w->rank != x->rank)
        return diag_node_error(d, FX_ERR_SHAPE, n, "W has rank %d but X has rank %d", w->rank,
                               x->rank);
    Geometry g = {.sp = x->rank - 2};
    int sp = g.sp;
    int64_t group = node_attr_int(n, "group", 1);
    int64_t c = x->dims[1];
    if (group < 1 || c % group != 0)
        return diag_node_error(d, FX_ERR_SHAPE, n, "group %lld does not divide the %lld channels",
                               (long long)group, (long long)c);
    int64_t m;
    if (kind == CONV_PLAIN) {
        m = w->dims[0];
        if (w->dims[1] * group != c || m % group != 0)
            return diag_node_error(d, FX_ERR_SHAPE, n,
                                   "W is [%lld, %lld, ...] but X has %lld channels in %lld groups",
                                   (long long)w->dims[0], (long long)w->dims[1], (long long)c,
                                   (long long)group);
    } else {
        m = w->dims[1] * group;
        if (w->dims[0] != c)
            return diag_node_error(d, FX_ERR_SHAPE, n,
                                   "W has %lld input channels but X has %lld",
                                   (long long)w->dims[0], (long long)c);
    }
    for (int i = 0; i < sp; i++) {
        g.in[i] = x->dims[2 + i];
        g.kernel[i] = w->dims[2 + i];
    }
    const int64_t *ks;
    int64_t nk = node_attr_ints(n, "kernel_shape", &ks);
    if (nk >= 0) {
        if (nk != sp)
            return diag_node_error(d, FX_ERR_SHAPE, n, "kernel_shape has %lld values, expected %d",
                                   (long long)nk, sp);
        for (int i = 0; i < sp; i++)
            if (ks[i] != g.kernel[i])
                return diag_node_error(d, FX_ERR_SHAPE, n,
                                       "kernel_shape[%d] = %lld but W's kernel is %lld", i,
                                       (long long)ks[i], (long long)g.kernel[i]);
    }
    FxStatus st;
    if (kind == CONV_PLAIN) {
        if ((st = window_geometry(n, d, &g, false)) != FX_OK)
            return st;
    } else {
        int mode;
        int64_t pads[2 * SPMAX], opad[SPMAX];
        if ((st = read_auto_pad(n, d, &mode)) != FX_OK ||
            (st = read_ints(n, d, "strides", sp, 1, 1, g.stride)) != FX_OK ||
            (st = read_ints(n, d, "dilations", sp, 1, 1, g.dilation)) != FX_OK ||
            (st = read_ints(n, d, "pads", 2 * sp, 0, 0, pads)) != FX_OK ||
            (st = read_ints(n, d, "output_padding", sp, 0, 0, opad)) != FX_OK)
            return st;
        const int64_t *os;
        int64_t nos = node_attr_ints(n, "output_shape", &os);
        if (nos > 0 && nos != sp && nos != sp + 2)
            return diag_node_error(d, FX_ERR_SHAPE, n, "output_shape has %lld values, expected %d",
                                   (long long)nos, sp);
        for (int i = 0; i < sp; i++) {
            int64_t s = g.stride[i];
            int64_t eff = (g.kernel[i] - 1) * g.dilation[i] + 1;
            if (eff > ((int64_t)1 << 48) || s * (g.in[i] - 1) > ((int64_t)1 << 48))
                return diag_node_error(d, FX_ERR_SHAPE, n,
                                       "spatial axis %d: the output would be too large", i);
            int64_t natural = s * (g.in[i] - 1) + opad[i] + eff;
            int64_t size, pb;
            if (nos > 0 || mode == PAD_SAME_UPPER || mode == PAD_SAME_LOWER) {
                size = nos > 0 ? os[nos - sp + i] : g.in[i] * s;
                /* ONNX's split of the total padding, with Python's floor
                 * division (the total is negative when output_shape asks for
                 * more than the natural size: the extra lands at the end). */
                int64_t total = natural - size;
                if (nos <= 0 && total < 0)
                    total = 0;
                pb = mode == PAD_SAME_UPPER ? floor_div(total, 2) : total - floor_div(total, 2);
            } else if (mode == PAD_VALID) {
                size = natural;
                pb = 0;
            } else {
                size = natural - pads[i] - pads[sp + i];
                pb = pads[i];
            }
            if (size < 0)
                return diag_node_error(d, FX_ERR_SHAPE, n,
                                       "spatial axis %d: the output size would be %lld", i,
                                       (long long)size);
            g.out[i] = size;
            g.pad_begin[i] = pb;
        }
    }
    memset(p, 0, sizeof *p);
    p->batch = x->dims[0];
    p->in_channels = c;
    p->out_channels = m;
    p->groups = group;
    for (int i = 0; i < SPMAX; i++) {
        p->in_size[i] = p->out_size[i] = p->kernel[i] = p->stride[i] = p->dilation[i] = 1;
        p->pad_begin[i] = 0;
    }
    int off = SPMAX - sp; /* right-aligned spatial axes */
    for (int i = 0; i < sp; i++) {
        p->in_size[off + i] = g.in[i];
        p->out_size[off + i] = g.out[i];
        p->kernel[off + i] = g.kernel[i];
        p->stride[off + i] = g.stride[i];
        p->dilation[off + i] = g.dilation[i];
        p->pad_begin[off + i] = g.pad_begin[i];
    }
    *out = (TensorType){.dtype = x->dtype, .rank = x->rank};
    out->dims[0] = x->dims[0];
    out->dims[1] = m;
    for (int i = 0; i < sp; i++)
        out->dims[2 + i] = g.out[i];
    return FX_OK;
}

/* The shape function fills the rank-dependent defaults the first time it
 * sees W (canonicalize could not when W was not a constant). */
static FxStatus conv_infer_defaults(InferCtx *c, const TensorType *w)
{
    if (w->rank < 3 || (node_attr(c->node, "kernel_shape") && node_attr(c->node, "strides")))
        return FX_OK;
    return window_fill_defaults(c->node, c->diag, w->rank - 2, w->dims + 2);
}

static int64_t conv_col_tile(FxrtConvParams *p, bool transpose)
{
    p->col_tile = 0;
    int64_t per = transpose ? p->out_channels / p->groups : p->in_channels / p->groups;
    for (int i = 0; i < SPMAX; i++)
        per *= p->kernel[i];
    if (per > 0 && per * (transpose ? p->in_size[0] * p->in_size[1] * p->in_size[2]
                                    : p->out_size[0] * p->out_size[1] * p->out_size[2]) >
                       CONV_SCRATCH_FLOATS)
        p->col_tile = CONV_SCRATCH_FLOATS / per > 0 ? CONV_SCRATCH_FLOATS / per : 1;
    return transpose ? fxrt_conv_transpose_scratch_floats(p) : fxrt_conv_scratch_floats(p);
}

/* --- Conv ----------------------------------------------------------------- */

static FxStatus conv_check_bias(const Node *n, Diag *d, const TensorType *b, DType dtype,
                                int64_t m)
{
    if (!b)
        return FX_OK;
    if (b->dtype != dtype)
        return diag_node_error(d, FX_ERR_SHAPE, n, "B is %s, expected %s", dtype_name(b->dtype),
                               dtype_name(dtype));
    if (b->rank != 1 || b->dims[0] != m)
        return diag_node_error(d, FX_ERR_SHAPE, n, "B must be 1-D with %lld values", (long long)m);
    return FX_OK;
}

static FxStatus conv_infer_kind(InferCtx *c, ConvKind kind)
{
    const TensorType *x = c->in[0], *w = c->in[1];
    FxStatus st;
    if ((st = nn_check_float(c->node, c->diag, x, "X")) != FX_OK)
        return st;
    if (w->dtype != x->dtype)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "W is %s but X is %s",
                               dtype_name(w->dtype), dtype_name(x->dtype));
    if ((st = conv_infer_defaults(c, w)) != FX_OK)
        return st;
    FxrtConvParams p;
    if ((st = conv_params(c->node, c->diag, kind, x, w, &p, &c->out[0])) != FX_OK)
        return st;
    return conv_check_bias(c->node, c->diag, input_type(c, 2), x->dtype, p.out_channels);
}

static FxStatus conv_infer(InferCtx *c) { return conv_infer_kind(c, CONV_PLAIN); }
static FxStatus conv_transpose_infer(InferCtx *c) { return conv_infer_kind(c, CONV_TRANSPOSE); }

static FxStatus conv_eval_kind(EvalCtx *c, ConvKind kind)
{
    const Tensor *x = c->in[0], *w = c->in[1], *b = input_value(c, 2);
    Tensor *y = c->out[0];
    FxrtConvParams p;
    TensorType out;
    FxStatus st = conv_params(c->node, c->diag, kind, &x->type, &w->type, &p, &out);
    if (st != FX_OK || tensor_numel(y) == 0)
        return st;
    int64_t scratch_n = conv_col_tile(&p, kind == CONV_TRANSPOSE);
    float *ox, *ow, *ob;
    const float *fx = nn_f32_input(x, &ox), *fw = nn_f32_input(w, &ow), *fb = nn_f32_input(b, &ob);
    float *fy = nn_f32_output(y);
    float *scratch = fx_alloc_array((size_t)(scratch_n > 0 ? scratch_n : 1), sizeof *scratch);
    if (fx && fw && (fb || !b) && fy && scratch) {
        const FxrtEpilogue ep = {.bias = fb};
        if (kind == CONV_PLAIN)
            fxrt_conv_f32(&p, fx, fw, &ep, fy, scratch);
        else
            fxrt_conv_transpose_f32(&p, fx, fw, fb, fy, scratch);
    } else {
        st = diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    }
    nn_f32_output_finish(y, fy);
    free(ox);
    free(ow);
    free(ob);
    free(scratch);
    return st;
}

static FxStatus conv_eval(EvalCtx *c) { return conv_eval_kind(c, CONV_PLAIN); }
static FxStatus conv_transpose_eval(EvalCtx *c) { return conv_eval_kind(c, CONV_TRANSPOSE); }

/* The parameters emit and scratch_bytes use: the same conv_params and the
 * same im2col tiling as eval. */
static FxStatus conv_node_params(const Node *n, Diag *d, ConvKind kind, int xi, int wi,
                                 FxrtConvParams *p, int64_t *scratch_floats)
{
    TensorType out;
    FxStatus st = conv_params(n, d, kind, node_input_type(n, xi), node_input_type(n, wi), p, &out);
    if (st == FX_OK && scratch_floats)
        *scratch_floats = conv_col_tile(p, kind == CONV_TRANSPOSE);
    return st;
}

static size_t conv_scratch_kind(const Node *n, ConvKind kind)
{
    Diag d;
    diag_init(&d);
    FxrtConvParams p;
    int64_t floats = 0;
    FxStatus st = conv_node_params(n, &d, kind, 0, 1, &p, &floats);
    diag_free(&d);
    return st == FX_OK && floats > 0 ? (size_t)floats * sizeof(float) : 0;
}

static size_t conv_scratch(const Node *n) { return conv_scratch_kind(n, CONV_PLAIN); }
static size_t conv_transpose_scratch(const Node *n)
{
    return conv_scratch_kind(n, CONV_TRANSPOSE);
}

FxStatus nn_conv_node_params(const Node *n, Diag *d, FxrtConvParams *p, int64_t *scratch_floats)
{
    return conv_node_params(n, d, CONV_PLAIN, 0, 1, p, scratch_floats);
}

size_t nn_conv_scratch(const Node *n) { return conv_scratch_kind(n, CONV_PLAIN); }

FxStatus nn_conv_infer(InferCtx *c) { return conv_infer_kind(c, CONV_PLAIN); }

/* The algorithm fxrt_conv_f32 would pick is chosen here, at compile time. */
void nn_conv_emit_call(EmitCtx *c, const FxrtConvParams *p, const char *ep)
{
    nn_conv_emit_params(c, p);
    switch (fxrt_conv_algo(p)) {
    case FXRT_CONV_ALGO_GEMM_1X1:
        emit_line(c, "fxrt_conv_1x1_f32(&p, %s, %s, %s, %s);", c->in[0], c->in[1], ep, c->out[0]);
        break;
    case FXRT_CONV_ALGO_DEPTHWISE:
        emit_line(c, "fxrt_conv_depthwise_f32(&p, %s, %s, %s, %s);", c->in[0], c->in[1], ep,
                c->out[0]);
        break;
    case FXRT_CONV_ALGO_IM2COL:
        emit_line(c, "fxrt_conv_im2col_f32(&p, %s, %s, %s, %s, (float *)(%s));", c->in[0], c->in[1],
                ep, c->out[0], c->scratch);
        break;
    }
}

/* float32 only; a plain Conv is a FusedConv with the bias as its only
 * epilogue. */
static FxStatus conv_emit_kind(EmitCtx *c, ConvKind kind)
{
    FxStatus st = nn_emit_check_f32(c, node_input_type(c->node, 0)->dtype);
    if (st != FX_OK)
        return st;
    FxrtConvParams p;
    int64_t floats;
    if ((st = conv_node_params(c->node, c->diag, kind, 0, 1, &p, &floats)) != FX_OK)
        return st;
    if (type_numel(&c->node->out_types[0]) == 0)
        return FX_OK;
    const char *bias = nn_emit_input(c, 2);
    if (kind == CONV_TRANSPOSE) {
        nn_conv_emit_params(c, &p);
        emit_line(c, "fxrt_conv_transpose_f32(&p, %s, %s, %s, %s, (float *)(%s));", c->in[0],
                c->in[1], bias ? bias : "NULL", c->out[0], c->scratch);
        return FX_OK;
    }
    const FxrtEpilogue shape = {.activation = FXRT_ACT_NONE};
    nn_conv_emit_call(c, &p, nn_emit_epilogue(c, &shape, bias, NULL));
    return FX_OK;
}

static FxStatus conv_emit(EmitCtx *c) { return conv_emit_kind(c, CONV_PLAIN); }
static FxStatus conv_transpose_emit(EmitCtx *c) { return conv_emit_kind(c, CONV_TRANSPOSE); }

static const AttrSpec conv_attrs[] = {
    {"auto_pad", FX_ATTR_STRING, "NOTSET", false},
    {"dilations", FX_ATTR_INTS, NULL, false},
    {"group", FX_ATTR_INT, "1", false},
    {"kernel_shape", FX_ATTR_INTS, NULL, false},
    {"pads", FX_ATTR_INTS, NULL, false},
    {"strides", FX_ATTR_INTS, NULL, false},
    {NULL},
};

const OpDef fx_op_Conv = {
    .name = "Conv",
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = conv_attrs,
    .canonicalize = conv_canonicalize,
    .infer = conv_infer,
    .eval = conv_eval,
    .scratch_bytes = conv_scratch,
    .emit = conv_emit,
};

static const AttrSpec conv_transpose_attrs[] = {
    {"auto_pad", FX_ATTR_STRING, "NOTSET", false},
    {"dilations", FX_ATTR_INTS, NULL, false},
    {"group", FX_ATTR_INT, "1", false},
    {"kernel_shape", FX_ATTR_INTS, NULL, false},
    {"output_padding", FX_ATTR_INTS, NULL, false},
    {"output_shape", FX_ATTR_INTS, NULL, false},
    {"pads", FX_ATTR_INTS, NULL, false},
    {"strides", FX_ATTR_INTS, NULL, false},
    {NULL},
};

const OpDef fx_op_ConvTranspose = {
    .name = "ConvTranspose",
    .min_inputs = 2, .max_inputs = 3, .min_outputs = 1, .max_outputs = 1,
    .attrs = conv_transpose_attrs,
    .canonicalize = conv_canonicalize,
    .infer = conv_transpose_infer,
    .eval = conv_transpose_eval,
    .scratch_bytes = conv_transpose_scratch,
    .emit = conv_transpose_emit,
};

/* --- ConvInteger and QLinearConv -------------------------------------------- */

/* A scalar of type `want`, or (per_channel > 0) 1-D with per_channel values. */
static FxStatus check_qparam(const Node *n, Diag *d, const TensorType *t, const char *what,
                             DType want, int64_t per_channel)
{
    if (!t)
        return FX_OK;
    if (t->dtype != want)
        return diag_node_error(d, t->dtype == FXRT_DTYPE_FLOAT16 ? FX_ERR_UNSUPPORTED
                                                                 : FX_ERR_INVALID,
                               n, "%s must be %s, not %s", what, dtype_name(want),
                               dtype_name(t->dtype));
    int64_t count = type_numel(t);
    if (count == 1 || (per_channel > 0 && t->rank == 1 && count == per_channel))
        return FX_OK;
    return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                           "%s has %lld values; only a scalar%s is supported", what,
                           (long long)count, per_channel > 0 ? " or one per output channel" : "");
}

static int64_t read_zero_points(const Tensor *t, int32_t *vals, int64_t max)
{
    if (!t) {
        vals[0] = 0;
        return 1;
    }
    int64_t n = tensor_numel(t);
    if (n > max)
        n = max;
    for (int64_t i = 0; i < n; i++)
        vals[i] = (int32_t)tensor_get_int(t, i);
    return n;
}

static FxStatus conv_integer_infer(InferCtx *c)
{
    const TensorType *x = c->in[0], *w = c->in[1];
    FxStatus st;
    if ((st = check_q8(c->node, c->diag, x, "x")) != FX_OK ||
        (st = check_q8(c->node, c->diag, w, "w")) != FX_OK ||
        (st = conv_infer_defaults(c, w)) != FX_OK)
        return st;
    FxrtConvParams p;
    if ((st = conv_params(c->node, c->diag, CONV_PLAIN, x, w, &p, &c->out[0])) != FX_OK)
        return st;
    if ((st = check_qparam(c->node, c->diag, input_type(c, 2), "x_zero_point", x->dtype, 0)) !=
            FX_OK ||
        (st = check_qparam(c->node, c->diag, input_type(c, 3), "w_zero_point", w->dtype,
                           p.out_channels)) != FX_OK)
        return st;
    c->out[0].dtype = FXRT_DTYPE_INT32;
    return FX_OK;
}

/* Runs the integer convolution of x (input xi) and w (input wi) with the
 * zero points at xzi / wzi into acc. */
static FxStatus conv_integer_run(EvalCtx *c, int xi, int xzi, int wi, int wzi,
                                 FxrtConvParams *p, int32_t *acc)
{
    const Tensor *x = c->in[xi], *w = c->in[wi];
    TensorType out;
    FxStatus st = conv_params(c->node, c->diag, CONV_PLAIN, &x->type, &w->type, p, &out);
    if (st != FX_OK)
        return st;
    int32_t xzp = 0;
    read_zero_points(input_value(c, xzi), &xzp, 1);
    int32_t *wzp = fx_malloc((size_t)p->out_channels * sizeof *wzp + 4);
    if (!wzp)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    int64_t nw = read_zero_points(input_value(c, wzi), wzp, p->out_channels > 0 ? p->out_channels : 1);
    fxrt_conv_integer(p, x->type.dtype, x->data, xzp, w->type.dtype, w->data, wzp, nw, acc);
    free(wzp);
    return FX_OK;
}

static FxStatus conv_integer_eval(EvalCtx *c)
{
    FxrtConvParams p;
    return conv_integer_run(c, 0, 2, 1, 3, &p, c->out[0]->data);
}

static size_t conv_integer_scratch(const Node *n) { return nn_zero_point_bytes(n, 3); }

/* Writes the integer convolution of inputs xi/wi with zero points xzi/wzi
 * into `acc`; `wzp_dst` is scratch for the converted W zero points. */
static FxStatus emit_conv_integer_call(EmitCtx *c, int xi, int xzi, int wi, int wzi,
                                       const char *wzp_dst, const char *acc, FxrtConvParams *p)
{
    FxStatus st = conv_node_params(c->node, c->diag, CONV_PLAIN, xi, wi, p, NULL);
    if (st != FX_OK)
        return st;
    nn_conv_emit_params(c, p);
    int64_t nw = nn_emit_zero_points(c, wzi, "wzp", wzp_dst,
                                  p->out_channels > 0 ? p->out_channels : 1);
    char xzp[64];
    emit_line(c,
              "fxrt_conv_integer(&p, %s, %s, /*x_zp=*/%s, %s, %s, wzp, /*w_zp_count=*/%lld, %s);",
              c_dtype_enum(node_input_type(c->node, xi)->dtype), c->in[xi],
              nn_zero_point_expr(c, xzi, xzp, sizeof xzp),
              c_dtype_enum(node_input_type(c->node, wi)->dtype), c->in[wi], (long long)nw, acc);
    return FX_OK;
}

static FxStatus conv_integer_emit(EmitCtx *c)
{
    FxrtConvParams p;
    return emit_conv_integer_call(c, 0, 2, 1, 3, c->scratch, c->out[0], &p);
}

static const AttrSpec conv_integer_attrs[] = {
    {"auto_pad", FX_ATTR_STRING, "NOTSET", false},
    {"dilations", FX_ATTR_INTS, NULL, false},
    {"group", FX_ATTR_INT, "1", false},
    {"kernel_shape", FX_ATTR_INTS, NULL, false},
    {"pads", FX_ATTR_INTS, NULL, false},
    {"strides", FX_ATTR_INTS, NULL, false},
    {NULL},
};

const OpDef fx_op_ConvInteger = {
    .name = "ConvInteger",
    .min_inputs = 2, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .attrs = conv_integer_attrs,
    .canonicalize = conv_canonicalize,
    .infer = conv_integer_infer,
    .eval = conv_integer_eval,
    .scratch_bytes = conv_integer_scratch,
    .emit = conv_integer_emit,
};

enum { QC_X, QC_X_SCALE, QC_X_ZP, QC_W, QC_W_SCALE, QC_W_ZP, QC_Y_SCALE, QC_Y_ZP, QC_B };

static FxStatus qlinear_conv_infer(InferCtx *c)
{
    const TensorType *x = c->in[QC_X], *w = c->in[QC_W], *yzp = c->in[QC_Y_ZP];
    const Node *n = c->node;
    FxStatus st;
    if ((st = check_q8(n, c->diag, x, "x")) != FX_OK ||
        (st = check_q8(n, c->diag, w, "w")) != FX_OK ||
        (st = check_q8(n, c->diag, yzp, "y_zero_point")) != FX_OK ||
        (st = conv_infer_defaults(c, w)) != FX_OK)
        return st;
    FxrtConvParams p;
    if ((st = conv_params(n, c->diag, CONV_PLAIN, x, w, &p, &c->out[0])) != FX_OK)
        return st;
    int64_t m = p.out_channels;
    const TensorType *b = input_type(c, QC_B);
    if ((st = check_qparam(n, c->diag, c->in[QC_X_SCALE], "x_scale", FXRT_DTYPE_FLOAT32, 0)) ||
        (st = check_qparam(n, c->diag, c->in[QC_X_ZP], "x_zero_point", x->dtype, 0)) ||
        (st = check_qparam(n, c->diag, c->in[QC_W_SCALE], "w_scale", FXRT_DTYPE_FLOAT32, m)) ||
        (st = check_qparam(n, c->diag, c->in[QC_W_ZP], "w_zero_point", w->dtype, m)) ||
        (st = check_qparam(n, c->diag, c->in[QC_Y_SCALE], "y_scale", FXRT_DTYPE_FLOAT32, 0)) ||
        (st = check_qparam(n, c->diag, yzp, "y_zero_point", yzp->dtype, 0)))
        return st;
    if (b && (b->dtype != FXRT_DTYPE_INT32 || b->rank != 1 || b->dims[0] != m))
        return diag_node_error(c->diag, FX_ERR_SHAPE, n, "B must be int32 with %lld values",
                               (long long)m);
    c->out[0].dtype = yzp->dtype;
    return FX_OK;
}

static FxStatus qlinear_conv_eval(EvalCtx *c)
{
    Tensor *y = c->out[0];
    int64_t total = tensor_numel(y);
    int32_t *acc = fx_alloc_array((size_t)(total > 0 ? total : 1), sizeof *acc);
    if (!acc)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    FxrtConvParams p;
    FxStatus st = conv_integer_run(c, QC_X, QC_X_ZP, QC_W, QC_W_ZP, &p, acc);
    float *scale = NULL;
    if (st == FX_OK && !(scale = fx_alloc_array((size_t)(p.out_channels + 1), sizeof *scale)))
        st = diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    if (st == FX_OK) {
        const Tensor *ws = c->in[QC_W_SCALE];
        int64_t ns = tensor_numel(ws);
        float xs = *(const float *)c->in[QC_X_SCALE]->data;
        float ys = *(const float *)c->in[QC_Y_SCALE]->data;
        for (int64_t i = 0; i < ns; i++)
            scale[i] = xs * ((const float *)ws->data)[i] / ys; /* ONNX's float order */
        int32_t yzp = 0;
        read_zero_points(c->in[QC_Y_ZP], &yzp, 1);
        const Tensor *b = input_value(c, QC_B);
        int64_t positions = p.out_size[0] * p.out_size[1] * p.out_size[2];
        fxrt_requantize(p.batch, p.out_channels, positions, acc, b ? b->data : NULL, scale, ns,
                        yzp, y->type.dtype, y->data);
    }
    free(scale);
    free(acc);
    return st;
}

/* Scratch: the int32 accumulator, W's zero points as int32, the
 * per-channel multipliers. */
static void qlinear_conv_layout(const Node *n, size_t *zp_off, size_t *scale_off, size_t *total)
{
    *zp_off = nn_align64((size_t)type_numel(&n->out_types[0]) * sizeof(int32_t));
    *scale_off = *zp_off + nn_zero_point_bytes(n, QC_W_ZP);
    *total = *scale_off + nn_align64((size_t)type_numel(node_input_type(n, QC_W_SCALE)) *
                                  sizeof(float));
}

static size_t qlinear_conv_scratch(const Node *n)
{
    size_t zp, sc, total;
    qlinear_conv_layout(n, &zp, &sc, &total);
    return total;
}

static FxStatus qlinear_conv_emit(EmitCtx *c)
{
    const Node *node = c->node;
    size_t zp_off, scale_off, total;
    qlinear_conv_layout(node, &zp_off, &scale_off, &total);
    int64_t ns = type_numel(node_input_type(node, QC_W_SCALE));
    char dst[256], yzp[64];
    emit_line(c, "unsigned char *const s = (unsigned char *)(%s);", c->scratch);
    emit_line(c, "int32_t *const acc = (int32_t *)s;");
    emit_line(c, "float *const scale = (float *)(s + %zu);", scale_off);
    emit_line(c, "int64_t j;");
    /* float arithmetic in ONNX's order, as the interpreter does */
    emit_line(c, "for (j = 0; j < %lld; j++)", (long long)ns);
    emit_line(c, "    scale[j] = %s[0] * %s[j] / %s[0];", c->in[QC_X_SCALE], c->in[QC_W_SCALE],
            c->in[QC_Y_SCALE]);
    snprintf(dst, sizeof dst, "s + %zu", zp_off);
    FxrtConvParams p;
    FxStatus st = emit_conv_integer_call(c, QC_X, QC_X_ZP, QC_W, QC_W_ZP, dst, "acc", &p);
    if (st != FX_OK)
        return st;
    const char *bias = nn_emit_input(c, QC_B) ? c->in[QC_B] : "NULL";
    emit_line(c,
              "fxrt_requantize(/*outer=*/%lld, /*channels=*/%lld, /*inner=*/%lld, acc, %s, scale, "
              "/*scale_count=*/%lld, /*y_zp=*/%s, %s, %s);",
              (long long)p.batch, (long long)p.out_channels,
              (long long)(p.out_size[0] * p.out_size[1] * p.out_size[2]), bias, (long long)ns,
              nn_zero_point_expr(c, QC_Y_ZP, yzp, sizeof yzp),
              c_dtype_enum(node->out_types[0].dtype), c->out[0]);
    return FX_OK;
}

const OpDef fx_op_QLinearConv = {
    .name = "QLinearConv",
    .min_inputs = 8, .max_inputs = 9, .min_outputs = 1, .max_outputs = 1,
    .attrs = conv_integer_attrs,
    .canonicalize = qlinear_conv_canonicalize,
    .infer = qlinear_conv_infer,
    .eval = qlinear_conv_eval,
    .scratch_bytes = qlinear_conv_scratch,
    .emit = qlinear_conv_emit,
};

FxStatus nn_qconv_node_params(const Node *n, Diag *d, FxrtConvParams *p)
{
    return conv_node_params(n, d, CONV_PLAIN, QC_X, node_is_op(n, &fx_op_QLinearConv) ? QC_W : 1,
                            p, NULL);
}

/* --- pool geometry (the pool ops are in nn_pool.c) ------------------------ */

FxStatus nn_pool_params(const Node *n, Diag *d, const TensorType *x, FxrtPoolParams *p,
                            TensorType *out)
{
    if (x->rank < 3 || x->rank - 2 > SPMAX)
        return diag_node_error(d, x->rank < 3 ? FX_ERR_SHAPE : FX_ERR_UNSUPPORTED, n,
                               "X has rank %d; 1 to %d spatial axes are supported", x->rank,
                               SPMAX);
    Geometry g = {.sp = x->rank - 2};
    FxStatus st = read_ints(n, d, "kernel_shape", g.sp, 0, 1, g.kernel);
    if (st != FX_OK)
        return st;
    if (!node_attr(n, "kernel_shape"))
        return diag_node_error(d, FX_ERR_INVALID, n, "kernel_shape is required");
    for (int i = 0; i < g.sp; i++)
        g.in[i] = x->dims[2 + i];
    if ((st = window_geometry(n, d, &g, node_attr_int(n, "ceil_mode", 0) != 0)) != FX_OK)
        return st;
    memset(p, 0, sizeof *p);
    p->planes = x->dims[0] * x->dims[1];
    for (int i = 0; i < SPMAX; i++)
        p->in_size[i] = p->out_size[i] = p->kernel[i] = p->stride[i] = p->dilation[i] = 1;
    int off = SPMAX - g.sp;
    for (int i = 0; i < g.sp; i++) {
        p->in_size[off + i] = g.in[i];
        p->out_size[off + i] = g.out[i];
        p->kernel[off + i] = g.kernel[i];
        p->stride[off + i] = g.stride[i];
        p->dilation[off + i] = g.dilation[i];
        p->pad_begin[off + i] = g.pad_begin[i];
        p->pad_end[off + i] = g.pad_end[i];
    }
    p->count_include_pad = (int32_t)node_attr_int(n, "count_include_pad", 0);
    p->storage_order = (int32_t)node_attr_int(n, "storage_order", 0);
    p->p = (float)node_attr_int(n, "p", 2);
    *out = (TensorType){.dtype = x->dtype, .rank = x->rank};
    out->dims[0] = x->dims[0];
    out->dims[1] = x->dims[1];
    for (int i = 0; i < g.sp; i++)
        out->dims[2 + i] = g.out[i];
    return FX_OK;
}
