/*
 * pass_winograd.c - runs the 3x3 stride-1 NCHWc convolutions of 16 or
 * more channels by Winograd's F(4x4, 3x3) (runtime/fxrt_nn_nchwc_winograd.c):
 * a quarter of the direct kernel's multiply-adds, for about 1e-5 of the
 * outputs' magnitude in float error instead of 1e-6.
 *
 * A ConvNCHWc (blocked X, group 1, 3x3, stride and dilation 1) becomes a
 * ConvNCHWcWinograd with the same arguments and attributes, its weights
 * transformed here, once, into 36 pointwise sets (W_winograd).  It is
 * the faster kernel on every 3x3 layer of the bench models with 16 or more
 * channels on each side and an output of 7x7 or more (bench/nchwc_kernels.c,
 * 2026-12-07: 1.05x to 2.5x the direct kernel's AVX-512 tiles, 1.2x to
 * 3.2x its AVX2 ones; the least on narrow layers, whose transforms cost
 * about as much as their products, and at 7x7, where the 4x4 tiles compute
 * 64 outputs for 49).  Below that it is not measured, and a smaller image
 * is mostly padding.  Past 12 MiB of transformed weights (512 x 512
 * channels) each band of tiles would stream them from memory, four times
 * the direct kernel's weights.
 *
 * A host-only pass (PassDef.host_only): firmware keeps the direct kernel,
 * whose weights are a quarter of the size and whose error is the smaller.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../ir/ops/ops.h"
#include "opt.h"

#define BLOCK FXRT_NCHWC_BLOCK

enum { MIN_CHANNELS = 16, MIN_OUTPUT = 7 };
static const int64_t MAX_TRANSFORMED_BYTES = (int64_t)12 << 20;

/* The ConvNCHWc parameters of n when it should run by Winograd. */
static bool profitable(const Node *n, FxrtConvParams *p)
{
    if (n->opcode != FX_OPCODE_CALL_MODULE || n->op != &fx_op_ConvNCHWc || n->num_args < 2 ||
        !node_const_value(n->args[1]))
        return false;
    Diag quiet;
    diag_init(&quiet);
    int x_blocked;
    FxStatus st = nchwc_conv_node_params(n, &quiet, p, &x_blocked);
    diag_free(&quiet);
    if (st != FX_OK || !x_blocked || !fxrt_conv_nchwc_winograd_applies(p) ||
        fxrt_conv_nchwc_winograd_packed_floats(p) * (int64_t)sizeof(float) > MAX_TRANSFORMED_BYTES)
        return false;
    int64_t narrower = p->in_channels < p->out_channels ? p->in_channels : p->out_channels;
    int64_t smaller_side = p->out_size[1] < p->out_size[2] ? p->out_size[1] : p->out_size[2];
    return narrower >= MIN_CHANNELS && smaller_side >= MIN_OUTPUT;
}

/* The Winograd weights of n, made from its direct packing (fxrt_nn.h), as
 * a new constant. */
static Node *winograd_weights(Graph *g, const Node *n, const FxrtConvParams *p, Diag *d)
{
    const float *packed = node_const_value(n->args[1])->data;
    int64_t in_c = p->in_channels, out_c = p->out_channels, icb = fxrt_nchwc_blocks(in_c);
    int64_t pairs = (fxrt_nchwc_blocks(out_c) + 1) / 2;
    float *w = fx_alloc_array((size_t)(out_c * in_c * 9), sizeof *w);
    if (!w) {
        diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        return NULL;
    }
    /* 36 points of the pointwise layout [OCB / 2][ICB][8 in][16 out]. */
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 5,
                    .dims = {36, pairs, icb, BLOCK, FXRT_NCHWC_PAIR}};
    Tensor *transformed = tensor_new(&t, d);
    if (!transformed) {
        free(w);
        return NULL;
    }
    for (int64_t oc = 0; oc < out_c; oc++)
        for (int64_t ic = 0; ic < in_c; ic++)
            for (int64_t k = 0; k < 9; k++)
                w[(oc * in_c + ic) * 9 + k] = packed[fxrt_conv_nchwc_packed_index(p, 1, oc, ic, k)];
    fxrt_conv_nchwc_winograd_pack_f32(p, w, transformed->data);
    free(w);
    char hint[200];
    snprintf(hint, sizeof hint, "%s_winograd", n->args[1]->name);
    return graph_create_constant(g, NULL, hint, transformed, d);
}

FxStatus pass_winograd(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    graph_for_each(g, n)
    {
        FxrtConvParams p;
        if (!profitable(n, &p))
            continue;
        Node *w = winograd_weights(g, n, &p, d);
        if (!w)
            return FX_ERR_NOMEM;
        /* Same arguments, attributes and users: only the kind and W change. */
        n->op = &fx_op_ConvNCHWcWinograd;
        if (!node_set_arg(n, 1, w))
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        FxStatus st = node_infer_shapes(n, d);
        if (st != FX_OK)
            return st;
        r->changes++;
    }
    if (r->changes > 0)
        graph_eliminate_dead_code(g);
    return FX_OK;
}
