/*
 * pass_qconv_pack.c - moves the quantized convolutions whose weights are
 * known at compile time onto the packed 8-bit convolution
 * (runtime/fxrt_nn_qconv.c):
 *
 *     y = QLinearConv(x, x_scale, x_zp, W, w_scale, 0, y_scale, y_zp, B)
 *  -> y = QConvPacked(x, packed; geometry, x_zero_point, y_type, y_zero_point,
 *                     y_min, y_max)
 *
 *     y = ConvInteger(x, W, x_zp, 0)  ->  y = QConvPacked(x, packed; y_type = int32)
 *
 * where packed is fxrt_qconv_pack of W, B and x_zp with the per-channel
 * scale x_scale * w_scale / y_scale formed in float in ONNX's order, the
 * one the reference kernels use, so the result is the same bytes (see
 * fxrt_quant_rescale for the one-off ties beyond 2^29).  The geometry
 * (auto_pad included) is resolved into QConvPacked's 2-D attributes.
 *
 * A Relu, or a Clip with constant bounds, that alone reads an 8-bit
 * QConvPacked's output is an integer clamp of the same bytes, so it
 * becomes the kernel's tighter y_min / y_max and disappears (repeatedly:
 * a chain of them narrows the range each time).
 *
 * Only when the kernel's conditions hold: W a constant int8 tensor with
 * zero point 0 per tensor or per channel, every quantization parameter and
 * B constant, each scale with a fixed-point pair (in [2^-32, 1)), a 1-D or
 * 2-D convolution of group 1 or depthwise (fxrt_qconv_applies).  Anything
 * else (uint8 weights, grouped or 3-D convolutions, parameters computed at
 * run time) keeps the reference loops.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../ir/ops/ops.h"
#include "opt.h"

/* a's constant float32 value with 1 or `count` values, else NULL. */
static const float *const_floats(const Node *a, int64_t count, int64_t *n)
{
    const Tensor *t = a ? node_const_value(a) : NULL;
    if (!t || t->type.dtype != FXRT_DTYPE_FLOAT32)
        return NULL;
    *n = tensor_numel(t);
    return *n == 1 || *n == count ? t->data : NULL;
}

static Node *arg(const Node *n, int i) { return i < n->num_args ? n->args[i] : NULL; }

/* What the packed convolution of one node needs. */
typedef struct Packing {
    FxrtConvParams p;
    FxrtQConv q;
    const Tensor *w;
    const int32_t *bias;
    float *scale; /* NULL for an int32 output */
    int64_t scale_count;
} Packing;

/* The geometry and W of n when the kernel can run it; false otherwise. */
static bool conv_packing(const Node *n, int wi, Packing *k)
{
    Diag quiet;
    diag_init(&quiet);
    FxStatus st = nn_qconv_node_params(n, &quiet, &k->p);
    diag_free(&quiet);
    const Node *w = arg(n, wi);
    k->w = w ? node_const_value(w) : NULL;
    return st == FX_OK && fxrt_qconv_applies(&k->p) && k->w &&
           k->w->type.dtype == FXRT_DTYPE_INT8 && n->args[0] &&
           (node_input_type(n, 0)->dtype == FXRT_DTYPE_UINT8 ||
            node_input_type(n, 0)->dtype == FXRT_DTYPE_INT8);
}

/* Fills k for a QLinearConv that can be packed; false otherwise.  The
 * scales go to scale_buf (out_channels floats). */
static bool qlinear_conv_packing(const Node *n, Packing *k, float *scale_buf)
{
    enum { X, X_SCALE, X_ZP, W, W_SCALE, W_ZP, Y_SCALE, Y_ZP, B };
    int64_t m = k->p.out_channels, nx = 0, nw = 0, ny = 0;
    const float *xs = const_floats(arg(n, X_SCALE), 1, &nx);
    const float *ws = const_floats(arg(n, W_SCALE), m, &nw);
    const float *ys = const_floats(arg(n, Y_SCALE), 1, &ny);
    if (!xs || !ws || !ys || !node_const_zeros(arg(n, W_ZP)) ||
        !node_const_scalar_int(arg(n, X_ZP), &k->q.x_zp) || !arg(n, Y_ZP) ||
        !node_const_scalar_int(arg(n, Y_ZP), &k->q.y_zp))
        return false;
    k->bias = NULL;
    if (arg(n, B)) {
        const Tensor *b = node_const_value(arg(n, B));
        if (!b || b->type.dtype != FXRT_DTYPE_INT32 || tensor_numel(b) != m)
            return false;
        k->bias = b->data;
    }
    /* float arithmetic in ONNX's order, as the interpreter does */
    for (int64_t j = 0; j < nw; j++)
        scale_buf[j] = xs[0] * ws[j] / ys[0];
    k->scale = scale_buf;
    k->scale_count = nw;
    k->q.y_type = n->out_types[0].dtype;
    k->q.y_min = k->q.y_type == FXRT_DTYPE_UINT8 ? 0 : -128;
    k->q.y_max = k->q.y_min + 255;
    return true;
}

/* Fills k for a ConvInteger that can be packed; false otherwise. */
static bool conv_integer_packing(const Node *n, Packing *k)
{
    if (!node_const_zeros(arg(n, 3)) || !node_const_scalar_int(arg(n, 2), &k->q.x_zp))
        return false;
    k->bias = NULL;
    k->scale = NULL;
    k->scale_count = 0;
    k->q.y_type = FXRT_DTYPE_INT32;
    k->q.y_zp = 0;
    k->q.y_min = INT32_MIN;
    k->q.y_max = INT32_MAX;
    return true;
}

/* Sets the attributes of QConvPacked node c for k; false when out of memory. */
static bool set_attrs(Node *c, const Packing *k)
{
    const FxrtConvParams *p = &k->p;
    const int64_t kernel[2] = {p->kernel[1], p->kernel[2]};
    const int64_t stride[2] = {p->stride[1], p->stride[2]};
    const int64_t dilation[2] = {p->dilation[1], p->dilation[2]};
    const int64_t pad[2] = {p->pad_begin[1], p->pad_begin[2]};
    const int64_t out[2] = {p->out_size[1], p->out_size[2]};
    return node_set_attr_int(c, "in_channels", p->in_channels) &&
           node_set_attr_int(c, "out_channels", p->out_channels) &&
           node_set_attr_int(c, "group", p->groups) &&
           node_set_attr_ints(c, "kernel_shape", kernel, 2) &&
           node_set_attr_ints(c, "strides", stride, 2) &&
           node_set_attr_ints(c, "dilations", dilation, 2) &&
           node_set_attr_ints(c, "pad_begin", pad, 2) &&
           node_set_attr_ints(c, "out_size", out, 2) &&
           node_set_attr_int(c, "x_zero_point", k->q.x_zp) &&
           node_set_attr_int(c, "y_type", k->q.y_type) &&
           node_set_attr_int(c, "y_zero_point", k->q.y_zp) &&
           node_set_attr_int(c, "y_min", k->q.y_min) &&
           node_set_attr_int(c, "y_max", k->q.y_max) && node_set_num_outputs(c, 1);
}

/* The QConvPacked node for n into *out, or NULL when a scale has no
 * fixed-point pair. */
static FxStatus packed_conv(Graph *g, Node *n, Packing *k, Node **out, Diag *d)
{
    *out = NULL;
    k->q.x_type = node_input_type(n, 0)->dtype;
    TensorType pt = {.dtype = FXRT_DTYPE_UINT8, .rank = 1,
                     .dims = {fxrt_qconv_packed_bytes(&k->p)}};
    Tensor *packed = tensor_new(&pt, d);
    if (!packed)
        return FX_ERR_NOMEM;
    int64_t scratch_bytes = fxrt_qconv_pack_scratch_bytes(&k->p);
    void *scratch = fx_malloc((size_t)(scratch_bytes > 0 ? scratch_bytes : 1));
    if (!scratch) {
        tensor_free(packed);
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    }
    int rc = fxrt_qconv_pack(&k->p, &k->q, k->w->data, k->bias, k->scale, k->scale_count,
                             packed->data, scratch);
    free(scratch);
    if (rc != 0) {
        tensor_free(packed);
        return FX_OK;
    }
    char hint[200];
    snprintf(hint, sizeof hint, "%s_packed", n->name);
    Node *w = graph_create_constant(g, NULL, hint, packed, d);
    if (!w)
        return FX_ERR_NOMEM;
    Node *args[2] = {n->args[0], w};
    snprintf(hint, sizeof hint, "%s_qconv", n->name);
    Node *c = graph_create_op(g, n, &fx_op_QConvPacked, hint, args, 2);
    if (!c || !set_attrs(c, k)) {
        if (c)
            graph_erase_node(g, c);
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    }
    FxStatus st = op_apply_attr_specs(c->op, c, d);
    if (st == FX_OK)
        st = node_infer_shapes(c, d);
    if (st != FX_OK)
        graph_erase_node(g, c);
    else
        *out = c;
    return st;
}

/* clamp(v, min, max) as Clip computes it: max(v, min) first, so that
 * min > max gives max. */
static int64_t clip_value(int64_t v, int64_t min, int64_t max)
{
    v = v > min ? v : min;
    return v < max ? v : max;
}

/* The clamp [*lo, *hi] followed by Relu or Clip u, as one clamp: clamps
 * are monotone, so the composition clamps to the second clamp of the
 * first's bounds.  False when u is neither or a bound is not constant. */
static bool compose_clamp(const Node *u, int32_t *lo, int32_t *hi)
{
    int64_t min = INT64_MIN, max = INT64_MAX;
    if (node_is_op(u, &fx_op_Relu)) {
        min = 0;
    } else if (node_is_op(u, &fx_op_Clip)) {
        for (int i = 1; i <= 2; i++) {
            const Node *a = arg(u, i);
            if (!a)
                continue;
            const Tensor *t = node_const_value(a);
            if (!t || tensor_numel(t) != 1)
                return false;
            *(i == 1 ? &min : &max) = tensor_get_int(t, 0);
        }
    } else {
        return false;
    }
    *lo = (int32_t)clip_value(*lo, min, max);
    *hi = (int32_t)clip_value(*hi, min, max);
    return true;
}

/* Folds the Relu/Clip users of QConvPacked node c into its clamp; returns
 * how many, -1 when out of memory. */
static int fold_clamps(Graph *g, Node *c, Diag *d)
{
    int folded = 0;
    for (;;) {
        Node *u = node_fusable_user(c);
        int32_t lo = (int32_t)node_attr_int(c, "y_min", 0);
        int32_t hi = (int32_t)node_attr_int(c, "y_max", 0);
        if (c->out_types[0].dtype == FXRT_DTYPE_INT32 || !u || u->args[0] != c ||
            !compose_clamp(u, &lo, &hi))
            return folded;
        if (!node_set_attr_int(c, "y_min", lo) || !node_set_attr_int(c, "y_max", hi) ||
            node_replace_all_uses_with(u, c) < 0) {
            diag_node_error(d, FX_ERR_NOMEM, u, "out of memory");
            return -1;
        }
        graph_erase_node(g, u);
        folded++;
    }
}

FxStatus pass_qconv_pack(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, n)
    {
        bool qlinear = node_is_op(n, &fx_op_QLinearConv);
        if ((!qlinear && !node_is_op(n, &fx_op_ConvInteger)) || n->num_outputs != 1)
            continue;
        Packing k = {0};
        if (!conv_packing(n, qlinear ? 3 : 1, &k))
            continue;
        float *scale = NULL;
        bool ok;
        if (qlinear) {
            scale = fx_alloc_array((size_t)k.p.out_channels, sizeof *scale);
            if (!scale) {
                st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
                break;
            }
            ok = qlinear_conv_packing(n, &k, scale);
        } else {
            ok = conv_integer_packing(n, &k);
        }
        Node *c = NULL;
        if (ok)
            st = packed_conv(g, n, &k, &c, d);
        free(scale);
        if (st != FX_OK)
            break;
        if (!c)
            continue;
        if ((st = pass_replace_node(n, c, r, d)) != FX_OK)
            break;
    }
    /* A plain walk: fold_clamps erases nodes after n, which
     * graph_for_each may already have stepped to. */
    for (Node *n = g->root.next; st == FX_OK && n != &g->root; n = n->next) {
        if (!node_is_op(n, &fx_op_QConvPacked))
            continue;
        int folded = fold_clamps(g, n, d);
        if (folded < 0)
            st = FX_ERR_NOMEM;
        else
            r->changes += folded;
    }
    return pass_finish(g, r, st);
}
