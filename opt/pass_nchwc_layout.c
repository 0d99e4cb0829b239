/*
 * pass_nchwc_layout.c - moves the activations between 2-D convolutions into
 * the channel-blocked layout NCHWc (runtime/fxrt_nn.h), so that they run
 * the NCHWc kernels: a vector of eight output channels per pixel instead of
 * a GEMM over an unfolded input, and depthwise convolutions eight channels
 * per instruction whatever the image's width.
 *
 * Every float32 2-D Conv or FusedConv with constant weights and bias whose
 * group is 1 or its channel count (depthwise) becomes a ConvNCHWc
 * (ir/ops/nchwc.c):
 *
 *     y = FusedConv(x, w, b, r)
 *  -> y = FromNCHWc(ConvNCHWc(ToNCHWc(x), pack(w), pad(b), ToNCHWc(r)))
 *
 * with the packed weights and the padded bias made here, once.  A layer
 * with fewer than eight input channels and group 1 (an image's first
 * convolution) reads its X in plain NCHW, which saves padding its input to
 * eight lanes.  The layers are visited in graph order and a ToNCHWc of a
 * value that is already FromNCHWc(v) is v itself: FromNCHWc drops only
 * padding lanes, and no kernel lets a padding lane reach a real channel
 * (packed weights and padded biases are zero there), so between two
 * convolutions no reorder is left.  MaxPool, AveragePool and
 * GlobalAveragePool of a value that is already blocked pool the blocks
 * (MaxPoolNCHWc...), so a pool between two convolutions does not leave the
 * layout either.  The FromNCHWc nodes nobody reads are dead; what remains
 * are the reorders at the edges of each region: from the model's input,
 * and before Gemm, Softmax, other ops or the output.
 */
#include <stdio.h>
#include <string.h>

#include "../ir/ops/ops.h"
#include "opt.h"

#define BLOCK FXRT_NCHWC_BLOCK

static bool is_call(const Node *n, const OpDef *op)
{
    return n && n->opcode == FX_OPCODE_CALL_FUNCTION && n->op == op;
}

/* True when n is a convolution this pass rewrites; fills p. */
static bool convertible(const Node *n, FxrtConvParams *p)
{
    bool conv = is_call(n, &fx_op_Conv) ||
                (n->opcode == FX_OPCODE_CALL_MODULE && n->op == &fx_op_FusedConv);
    if (!conv || !fold_is_f32(n) || n->num_args < 2 || !n->args[0] ||
        node_input_type(n, 0)->rank != 4 || !node_const_value(n->args[1]))
        return false;
    if (n->num_args > 2 && n->args[2] && !node_const_value(n->args[2]))
        return false;
    Diag quiet;
    diag_init(&quiet);
    int64_t floats;
    FxStatus st = nn_conv_node_params(n, &quiet, p, &floats);
    diag_free(&quiet);
    return st == FX_OK &&
           (p->groups == 1 || (p->groups == p->in_channels && p->groups == p->out_channels));
}

/* A node of op `op` before `before`, to be completed by finish_op once
 * its attributes are set; NULL (d filled) on failure. */
static Node *create_op(Graph *g, Node *before, const OpDef *op, const char *hint,
                       Node *const *args, int num_args, Diag *d)
{
    Node *n = op->flags & FX_OPF_MODULE ? graph_create_module(g, before, op, hint, args, num_args)
                                        : graph_create_op(g, before, op, hint, args, num_args);
    if (!n)
        diag_error(d, FX_ERR_NOMEM, "out of memory creating %s", op->name);
    return n;
}

/* Erases n, which nothing reads yet. */
static void discard(Graph *g, Node *n)
{
    for (int i = 0; i < n->num_args; i++)
        node_clear_arg(n, i);
    graph_erase_node(g, n);
}

/* Completes n (attributes set) and infers its types, or erases it. */
static FxStatus finish_op(Graph *g, Node *n, Diag *d)
{
    FxStatus st = op_apply_attr_specs(n->op, n, d);
    if (st == FX_OK && !node_set_num_outputs(n, 1))
        st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    if (st == FX_OK)
        st = node_infer_shapes(n, d);
    if (st != FX_OK)
        discard(g, n);
    return st;
}

/* v in NCHWc, read by `reader`: FromNCHWc(b) gives b, an existing ToNCHWc
 * of v is shared, else a ToNCHWc is made before reader. */
static Node *blocked(Graph *g, Node *v, Node *reader, Diag *d)
{
    if (is_call(v, &fx_op_FromNCHWc))
        return v->args[0];
    for (int i = 0; i < v->num_users; i++)
        if (is_call(v->users[i], &fx_op_ToNCHWc))
            return v->users[i];
    char hint[200];
    snprintf(hint, sizeof hint, "%s_nchwc", v->name);
    Node *b = create_op(g, reader, &fx_op_ToNCHWc, hint, &v, 1, d);
    return b && finish_op(g, b, d) == FX_OK ? b : NULL;
}

/* The packed weights [OCB][ICB][KH][KW][8][8], [OCB][KH][KW][C][8] (plain
 * X) or [CB][KH][KW][8] (depthwise) as a new constant. */
static Node *packed_weights(Graph *g, const Node *conv, const FxrtConvParams *p, int x_blocked,
                            Diag *d)
{
    int64_t ocb = fxrt_nchwc_blocks(p->out_channels), kh = p->kernel[1], kw = p->kernel[2];
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32};
    int64_t dims[6], rank = 0;
    dims[rank++] = ocb;
    if (p->groups == 1 && x_blocked)
        dims[rank++] = fxrt_nchwc_blocks(p->in_channels);
    dims[rank++] = kh;
    dims[rank++] = kw;
    if (p->groups == 1)
        dims[rank++] = x_blocked ? BLOCK : p->in_channels;
    dims[rank++] = BLOCK;
    t.rank = (int)rank;
    memcpy(t.dims, dims, (size_t)rank * sizeof dims[0]);
    Tensor *w = tensor_new(&t, d);
    if (!w)
        return NULL;
    fxrt_conv_nchwc_pack_f32(p, x_blocked, node_const_value(conv->args[1])->data, w->data);
    char hint[200];
    snprintf(hint, sizeof hint, "%s_packed", conv->args[1]->name);
    return create_constant(g, hint, w, d);
}

/* The bias padded with zeros to whole blocks, or NULL (d untouched) when
 * conv has none. */
static Node *padded_bias(Graph *g, const Node *conv, const FxrtConvParams *p, Diag *d,
                         FxStatus *st)
{
    const Tensor *b = conv->num_args > 2 && conv->args[2] ? node_const_value(conv->args[2]) : NULL;
    if (!b)
        return NULL;
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1,
                    .dims = {fxrt_nchwc_blocks(p->out_channels) * BLOCK}};
    Tensor *padded = tensor_new(&t, d);
    if (!padded) {
        *st = FX_ERR_NOMEM;
        return NULL;
    }
    memset(padded->data, 0, tensor_nbytes(padded));
    memcpy(padded->data, b->data, (size_t)p->out_channels * sizeof(float));
    char hint[200];
    snprintf(hint, sizeof hint, "%s_padded", conv->args[2]->name);
    Node *c = create_constant(g, hint, padded, d);
    if (!c)
        *st = FX_ERR_NOMEM;
    return c;
}

/* Copies src's attributes named in `names` (NULL: all of them). */
static bool copy_attrs(Node *dst, const Node *src, const char *const *names, Diag *d)
{
    for (int i = 0; i < src->num_attrs; i++) {
        bool wanted = !names;
        for (int k = 0; names && names[k] && !wanted; k++)
            wanted = strcmp(names[k], src->attrs[i].name) == 0;
        if (wanted && !node_copy_attr(dst, &src->attrs[i], d))
            return false;
    }
    return true;
}

static const char *const epilogue_attrs[] = {"activation", "act_alpha", "act_beta",
                                             "residual_after", NULL};

/* Conv's attributes in p's terms; the end padding is the least that gives
 * p's output size. */
static bool set_geometry(Node *f, const FxrtConvParams *p)
{
    int64_t kernel[2], stride[2], dilation[2], pads[4];
    for (int i = 0; i < 2; i++) {
        int64_t span = (p->kernel[1 + i] - 1) * p->dilation[1 + i] + 1;
        int64_t end = (p->out_size[1 + i] - 1) * p->stride[1 + i] + span - p->in_size[1 + i] -
                      p->pad_begin[1 + i];
        kernel[i] = p->kernel[1 + i];
        stride[i] = p->stride[1 + i];
        dilation[i] = p->dilation[1 + i];
        pads[i] = p->pad_begin[1 + i];
        pads[2 + i] = end > 0 ? end : 0;
    }
    return node_set_attr_ints(f, "kernel_shape", kernel, 2) &&
           node_set_attr_ints(f, "strides", stride, 2) &&
           node_set_attr_ints(f, "dilations", dilation, 2) &&
           node_set_attr_ints(f, "pads", pads, 4) &&
           node_set_attr_int(f, "group", p->groups) &&
           node_set_attr_int(f, "in_channels", p->in_channels) &&
           node_set_attr_int(f, "out_channels", p->out_channels);
}

/* Makes `old`'s readers read FromNCHWc(blocked_value), `channels` wide. */
static FxStatus replace_by_blocked(Graph *g, Node *old, Node *blocked_value, int64_t channels,
                                   Diag *d)
{
    char hint[200];
    snprintf(hint, sizeof hint, "%s_nchw", old->name);
    Node *y = create_op(g, old, &fx_op_FromNCHWc, hint, &blocked_value, 1, d);
    if (!y)
        return FX_ERR_NOMEM;
    if (!node_set_attr_int(y, "channels", channels)) {
        discard(g, y);
        return diag_node_error(d, FX_ERR_NOMEM, old, "out of memory");
    }
    FxStatus st = finish_op(g, y, d);
    if (st == FX_OK && node_replace_all_uses_with(old, y) < 0)
        st = diag_node_error(d, FX_ERR_NOMEM, old, "out of memory");
    return st;
}

static FxStatus convert_conv(Graph *g, Node *conv, const FxrtConvParams *p, Diag *d)
{
    int x_blocked = p->groups > 1 || p->in_channels >= BLOCK ||
                    is_call(conv->args[0], &fx_op_FromNCHWc);
    FxStatus st = FX_OK;
    Node *x = x_blocked ? blocked(g, conv->args[0], conv, d) : conv->args[0];
    Node *w = x ? packed_weights(g, conv, p, x_blocked, d) : NULL;
    Node *b = w ? padded_bias(g, conv, p, d, &st) : NULL;
    Node *r = NULL;
    if (w && st == FX_OK && conv->num_args > 3 && conv->args[3] &&
        !(r = blocked(g, conv->args[3], conv, d)))
        st = FX_ERR_NOMEM;
    if (!x || !w || st != FX_OK)
        return st != FX_OK ? st : FX_ERR_NOMEM;
    Node *args[4] = {x, w, b, r};
    char hint[200];
    snprintf(hint, sizeof hint, "%s_blocked", conv->name);
    Node *f = create_op(g, conv, &fx_op_ConvNCHWc, hint, args, r ? 4 : b ? 3 : 2, d);
    if (!f)
        return FX_ERR_NOMEM;
    if (!set_geometry(f, p) || !copy_attrs(f, conv, epilogue_attrs, d)) {
        discard(g, f);
        return diag_node_error(d, FX_ERR_NOMEM, conv, "out of memory");
    }
    if ((st = finish_op(g, f, d)) != FX_OK)
        return st;
    return replace_by_blocked(g, conv, f, p->out_channels, d);
}

/* The NCHWc kind of pool n, when n pools a value that is already blocked. */
static const OpDef *blocked_pool(const Node *n)
{
    if (n->opcode != FX_OPCODE_CALL_FUNCTION || n->num_outputs != 1 || !fold_is_f32(n) ||
        !is_call(n->args[0], &fx_op_FromNCHWc))
        return NULL;
    if (n->op == &fx_op_MaxPool)
        return &fx_op_MaxPoolNCHWc;
    if (n->op == &fx_op_AveragePool)
        return &fx_op_AveragePoolNCHWc;
    if (n->op == &fx_op_GlobalAveragePool)
        return &fx_op_GlobalAveragePoolNCHWc;
    return NULL;
}

static FxStatus convert_pool(Graph *g, Node *pool, const OpDef *op, Diag *d)
{
    Node *x = pool->args[0]->args[0];
    char hint[200];
    snprintf(hint, sizeof hint, "%s_blocked", pool->name);
    Node *f = create_op(g, pool, op, hint, &x, 1, d);
    if (!f)
        return FX_ERR_NOMEM;
    if (!copy_attrs(f, pool, NULL, d)) {
        discard(g, f);
        return diag_node_error(d, FX_ERR_NOMEM, pool, "out of memory");
    }
    FxStatus st = finish_op(g, f, d);
    if (st != FX_OK)
        return st;
    return replace_by_blocked(g, pool, f, node_input_type(pool, 0)->dims[1], d);
}

FxStatus pass_nchwc_layout(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, n)
    {
        if (st != FX_OK)
            break;
        FxrtConvParams p;
        const OpDef *pool;
        if (convertible(n, &p))
            st = convert_conv(g, n, &p, d);
        else if ((pool = blocked_pool(n)))
            st = convert_pool(g, n, pool, d);
        else
            continue;
        if (st == FX_OK)
            r->changes++;
    }
    if (st == FX_OK && r->changes > 0)
        graph_eliminate_dead_code(g);
    return st;
}
