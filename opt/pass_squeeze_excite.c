/*
 * pass_squeeze_excite.c - squeeze-and-excite blocks of the NCHWc layout
 * become one SqueezeExciteNCHWc (ir/ops/nchwc.c, fxrt_nn_squeeze_excite.c):
 *
 *     g = GlobalAveragePoolNCHWc(x)
 *     h = ConvNCHWc(g, w1, b1)     1x1 on the 1x1 image, any activation
 *     s = ConvNCHWc(h, w2, b2)     1x1, a sigmoid-like activation
 *     y = Mul(x, s)                (or Mul(s, x))
 *  -> y = SqueezeExciteNCHWc(x, W1, W2, B1, B2)
 *
 * as EfficientNet, MobileNet-v3 and RegNet write it.  Four calls, each a
 * pass over its tensor (and two convolution calls for 1x1 images, whose
 * fixed cost is most of their time), become one.  The layout pass packed
 * the fully connected weights for the convolution kernel; they are unpacked
 * here into the K-major matrices the kernel reads.  g, h and s must have no
 * other reader, and the convolutions no residual.
 *
 * When the one reader of y is a pointwise convolution of fewer output
 * channels than y has pixels (EfficientNet's projections up to 14x14), the
 * gate goes onto that convolution's weights instead
 * (SqueezeExciteWeightsNCHWc; fold_into_pointwise).
 */
#include <stdio.h>
#include <string.h>

#include "../ir/ops/ops.h"
#include "opt.h"

#define BLOCK FXRT_NCHWC_BLOCK

/* n is a residual-free 1x1 ConvNCHWc on a 1x1 blocked image with constant
 * weights and bias, read only by its one reader; fills p. */
static bool fully_connected(const Node *n, FxrtConvParams *p)
{
    int x_blocked;
    if (n->opcode != FX_OPCODE_CALL_MODULE || n->op != &fx_op_ConvNCHWc || n->num_users != 1 ||
        n->num_args > 3 || !node_const_value(n->args[1]) ||
        (n->num_args > 2 && n->args[2] && !node_const_value(n->args[2])))
        return false;
    Diag quiet;
    diag_init(&quiet);
    FxStatus st = nchwc_conv_node_params(n, &quiet, p, &x_blocked);
    diag_free(&quiet);
    return st == FX_OK && x_blocked && p->groups == 1 && p->kernel[1] == 1 &&
           p->kernel[2] == 1 && p->in_size[1] == 1 && p->in_size[2] == 1 &&
           p->out_size[1] == 1 && p->out_size[2] == 1;
}

static bool is_gate(const Node *s)
{
    const char *act = node_attr_string(s, "activation", "none");
    return strcmp(act, "sigmoid") == 0 || strcmp(act, "hardsigmoid") == 0;
}

typedef struct Block {
    Node *x, *hidden, *gate;
    FxrtConvParams hidden_p, gate_p;
} Block;

/* Whether m is the channel scale of a squeeze-and-excite block; fills b. */
static bool match(Node *m, Block *b)
{
    if (!node_is_op(m, &fx_op_Mul) || m->num_args != 2 || m->num_outputs != 1 ||
        !m->shapes_known || m->out_types[0].rank != 5)
        return false;
    for (int i = 0; i < 2; i++) {
        Node *s = m->args[i], *x = m->args[1 - i];
        if (!s || !fully_connected(s, &b->gate_p) || !is_gate(s))
            continue;
        Node *h = s->args[0];
        if (!fully_connected(h, &b->hidden_p))
            continue;
        Node *g = h->args[0];
        if (node_is_op(g, &fx_op_GlobalAveragePoolNCHWc) && g->num_users == 1 &&
            g->args[0] == x && type_equal(node_input_type(m, 1 - i), &m->out_types[0]) &&
            b->hidden_p.in_channels == b->gate_p.out_channels &&
            b->hidden_p.out_channels == b->gate_p.in_channels) {
            b->x = x;
            b->hidden = h;
            b->gate = s;
            return true;
        }
    }
    return false;
}

/* conv's packed weights as a new K-major constant of `rows` x `cols` floats:
 * element (r, c) is the weight of input channel r in output channel c, zero
 * past the real channels. */
static Node *k_major(Graph *g, const Node *conv, const FxrtConvParams *p, int64_t rows,
                     int64_t cols, Diag *d)
{
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 2, .dims = {rows, cols}};
    Tensor *w = tensor_new(&t, d);
    if (!w)
        return NULL;
    const float *packed = node_const_value(conv->args[1])->data;
    float *out = w->data;
    for (int64_t ic = 0; ic < rows; ic++)
        for (int64_t oc = 0; oc < cols; oc++)
            out[ic * cols + oc] = ic < p->in_channels && oc < p->out_channels
                                          ? packed[fxrt_conv_nchwc_packed_index(p, 1, oc, ic, 0)]
                                          : 0.0f;
    char hint[200];
    snprintf(hint, sizeof hint, "%s_k_major", conv->args[1]->name);
    return graph_create_constant(g, NULL, hint, w, d);
}

/* The first `count` floats of conv's (padded) bias, or NULL (d untouched)
 * when it has none. */
static Node *leading_bias(Graph *g, const Node *conv, int64_t count, Diag *d, bool *failed)
{
    const Tensor *b = conv->num_args > 2 && conv->args[2] ? node_const_value(conv->args[2]) : NULL;
    if (!b)
        return NULL;
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1, .dims = {count}};
    Tensor *v = tensor_new(&t, d);
    Node *n = NULL;
    if (v) {
        memcpy(v->data, b->data, (size_t)count * sizeof(float));
        char hint[200];
        snprintf(hint, sizeof hint, "%s_bias", conv->name);
        n = graph_create_constant(g, NULL, hint, v, d);
    }
    *failed = !n;
    return n;
}

/* se's lone reader when it should take the gate on its weights, else NULL:
 * a pointwise ConvNCHWc (1x1, stride 1, no padding, groups 1) with
 * constant weights on one image of more pixels than it has output
 * channels, so that gating its weights costs less than gating se's input. */
static Node *gated_pointwise(const Node *se)
{
    Node *conv = se->num_users == 1 ? se->users[0] : NULL;
    FxrtConvParams p;
    int x_blocked;
    if (!conv || conv->opcode != FX_OPCODE_CALL_MODULE || conv->op != &fx_op_ConvNCHWc ||
        conv->args[0] != se || !node_const_value(conv->args[1]))
        return NULL;
    for (int i = 2; i < conv->num_args; i++)
        if (conv->args[i] == se)
            return NULL;
    Diag quiet;
    diag_init(&quiet);
    FxStatus st = nchwc_conv_node_params(conv, &quiet, &p, &x_blocked);
    diag_free(&quiet);
    bool gate_weights = st == FX_OK && x_blocked && p.batch == 1 && p.groups == 1 &&
                        p.kernel[1] == 1 && p.kernel[2] == 1 && p.stride[1] == 1 &&
                        p.stride[2] == 1 && p.in_size[1] == p.out_size[1] &&
                        p.in_size[2] == p.out_size[2] &&
                        fxrt_nchwc_blocks(p.out_channels) * BLOCK < p.in_size[1] * p.in_size[2];
    return gate_weights ? conv : NULL;
}

/* se's gate moved onto the weights of the pointwise convolution reading it,
 * where gated_pointwise says so:
 *     y = SqueezeExciteNCHWc(x, W1, W2, B1, B2);  z = ConvNCHWc(y, W, ...)
 *  -> v = SqueezeExciteWeightsNCHWc(x, W, W1, W2, B1, B2);  z = ConvNCHWc(x, v, ...)
 * The pass over x's pixels becomes out channels x in channels products,
 * and y's buffer (x's size) gives way to one the weights' size. */
static FxStatus fold_into_pointwise(Graph *g, Node *se, Diag *d)
{
    Node *conv = gated_pointwise(se);
    if (!conv)
        return FX_OK;
    Node *args[6] = {se->args[0], conv->args[1]};
    for (int i = 1; i < se->num_args; i++)
        args[1 + i] = se->args[i];
    char hint[200];
    snprintf(hint, sizeof hint, "%s_gated_weights", conv->name);
    Node *v = graph_create_op(g, se, &fx_op_SqueezeExciteWeightsNCHWc, hint, args,
                              se->num_args + 1);
    if (!v)
        return diag_node_error(d, FX_ERR_NOMEM, se, "out of memory");
    for (int i = 0; i < se->num_attrs; i++)
        if (!node_copy_attr(v, &se->attrs[i], d)) {
            graph_erase_node(g, v);
            return FX_ERR_NOMEM;
        }
    FxStatus st = node_finish_created(v, true, NULL, d);
    if (st != FX_OK)
        return st;
    if (!node_set_arg(conv, 0, se->args[0]) || !node_set_arg(conv, 1, v))
        return diag_node_error(d, FX_ERR_NOMEM, conv, "out of memory");
    graph_erase_node(g, se);
    return FX_OK;
}

static FxStatus fuse(Graph *g, Node *m, const Block *b, Diag *d)
{
    int64_t channels = b->hidden_p.in_channels, squeezed = b->hidden_p.out_channels;
    int64_t padded = fxrt_nchwc_blocks(channels) * BLOCK;
    bool failed = false;
    Node *w1 = k_major(g, b->hidden, &b->hidden_p, channels, squeezed, d);
    Node *w2 = w1 ? k_major(g, b->gate, &b->gate_p, squeezed, padded, d) : NULL;
    Node *b1 = w2 ? leading_bias(g, b->hidden, squeezed, d, &failed) : NULL;
    Node *b2 = b->gate->num_args > 2 ? b->gate->args[2] : NULL;
    if (!w2 || failed)
        return FX_ERR_NOMEM;
    Node *args[5] = {b->x, w1, w2, b1, b2};
    char hint[200];
    snprintf(hint, sizeof hint, "%s_squeeze_excite", m->name);
    Node *se = graph_create_op(g, m, &fx_op_SqueezeExciteNCHWc, hint, args, b2 ? 5 : b1 ? 4 : 3);
    if (!se)
        return diag_node_error(d, FX_ERR_NOMEM, m, "out of memory");
    if (!node_set_attr_int(se, "channels", channels) ||
        !node_set_attr_int(se, "squeezed", squeezed) ||
        !node_set_attr_string(se, "activation",
                              node_attr_string(b->hidden, "activation", "none")) ||
        !node_set_attr_float(se, "act_alpha", node_attr_float(b->hidden, "act_alpha", 0.0f)) ||
        !node_set_attr_float(se, "act_beta", node_attr_float(b->hidden, "act_beta", 0.0f)) ||
        !node_set_attr_string(se, "gate", node_attr_string(b->gate, "activation", "none")) ||
        !node_set_attr_float(se, "gate_alpha", node_attr_float(b->gate, "act_alpha", 0.0f)) ||
        !node_set_attr_float(se, "gate_beta", node_attr_float(b->gate, "act_beta", 0.0f))) {
        graph_erase_node(g, se);
        return diag_node_error(d, FX_ERR_NOMEM, m, "out of memory");
    }
    FxStatus st = node_finish_created(se, true, NULL, d);
    if (st == FX_OK && node_replace_all_uses_with(m, se) < 0)
        st = diag_node_error(d, FX_ERR_NOMEM, m, "out of memory");
    return st == FX_OK ? fold_into_pointwise(g, se, d) : st;
}

FxStatus pass_squeeze_excite(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, n)
    {
        Block b;
        if (st != FX_OK)
            break;
        if (!match(n, &b))
            continue;
        if ((st = fuse(g, n, &b, d)) == FX_OK)
            r->changes++;
    }
    return pass_finish(g, r, st);
}
