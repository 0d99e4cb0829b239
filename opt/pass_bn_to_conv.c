/*
 * pass_bn_to_conv.c - turns an inference BatchNormalization that bn-fold
 * could not fold (no linear layer next to it takes it: DenseNet's and
 * pre-activation ResNets' BN -> ReLU -> Conv) into the depthwise 1x1
 * convolution it is:
 *
 *     y = BatchNormalization(x, scale, B, mean, var)     x: [N, C, H, W]
 *  -> y = Conv(x, s [C, 1, 1, 1], t [C]; group = C)
 *
 * with s = scale / sqrt(var + eps) and t = B - mean * s.  As a Conv it
 * takes the ReLU after it as its epilogue (epilogue-fusion runs next), and
 * the NCHWc layout pass runs it with the depthwise kernel on the blocked
 * activations instead of leaving a reorder on each side of it.  The same
 * arithmetic per element, s * x + t, in the kernel's order.
 *
 * Only 2-D images (rank 4 input): the layout pass blocks nothing else.
 */
#include <stdio.h>

#include "opt.h"

/* The Conv in place of bn (affine map a, its tensors taken over) into
 * *out. */
static FxStatus depthwise_conv(Graph *g, Node *bn, FoldAffine *a, Node **out, Diag *d)
{
    int64_t channels = node_input_type(bn, 0)->dims[1];
    TensorType wt = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 4, .dims = {channels, 1, 1, 1}};
    TensorType bt = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1, .dims = {channels}};
    a->scale->type = wt; /* the same C values, reshaped */
    a->shift->type = bt;
    char hint[200];
    snprintf(hint, sizeof hint, "%s_scale", bn->name);
    Node *w = graph_create_constant(g, NULL, hint, a->scale, d);
    a->scale = NULL; /* taken over, or freed on failure */
    snprintf(hint, sizeof hint, "%s_shift", bn->name);
    Node *b = w ? graph_create_constant(g, NULL, hint, a->shift, d) : NULL;
    if (w)
        a->shift = NULL;
    if (!w || !b)
        return FX_ERR_NOMEM;
    Node *args[3] = {bn->args[0], w, b};
    snprintf(hint, sizeof hint, "%s_conv", bn->name);
    Node *conv = graph_create_op(g, bn, &fx_op_Conv, hint, args, 3);
    if (!conv)
        return diag_node_error(d, FX_ERR_NOMEM, bn, "out of memory");
    const int64_t ones[2] = {1, 1}, zeros[4] = {0, 0, 0, 0};
    bool ok = node_set_attr_int(conv, "group", channels) &&
              node_set_attr_ints(conv, "kernel_shape", ones, 2) &&
              node_set_attr_ints(conv, "strides", ones, 2) &&
              node_set_attr_ints(conv, "dilations", ones, 2) &&
              node_set_attr_ints(conv, "pads", zeros, 4);
    FxStatus st = node_finish_created(conv, ok, bn, d);
    if (st == FX_OK)
        *out = conv;
    return st;
}

FxStatus pass_bn_to_conv(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, n)
    {
        if (n->op != &fx_op_BatchNormalization || n->num_outputs != 1 || !n->args[0] ||
            node_input_type(n, 0)->rank != 4)
            continue;
        bool ok;
        FoldAffine a = {0};
        if ((st = fold_bn_affine(n, &a, &ok, d)) != FX_OK)
            break;
        if (!ok)
            continue;
        Node *conv = NULL;
        st = depthwise_conv(g, n, &a, &conv, d);
        fold_affine_free(&a);
        if (st != FX_OK)
            break;
        if ((st = pass_replace_node(n, conv, r, d)) != FX_OK)
            break;
    }
    return pass_finish(g, r, st);
}
