/*
 * internal.c - ops that are not ONNX ops.
 *
 * getitem: FX's operator.getitem on a multi-output node.  ONNX nodes with
 * several outputs (Split, TopK, MaxPool with Indices...) are followed by one
 * getitem node per used output, so every other node reads exactly one value
 * per argument.  Codegen aliases it; the interpreter copies.
 */
#include <string.h>

#include "ops.h"

static FxStatus getitem_infer(InferCtx *c)
{
    const Node *src = c->node->args[0];
    int k = c->node->index;
    if (!src || k < 0 || k >= src->num_outputs)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "getitem index %d out of range",
                               k);
    c->out[0] = src->out_types[k];
    return FX_OK;
}

/* The interpreter resolves getitem itself (it has the whole tuple); this
 * kernel is the single-value fallback used when the tuple is passed as its
 * k-th element. */
static FxStatus getitem_eval(EvalCtx *c)
{
    memcpy(c->out[0]->data, c->in[0]->data, tensor_nbytes(c->out[0]));
    return FX_OK;
}

static const AttrSpec getitem_attrs[] = {{NULL}};

const OpDef fx_op_getitem = {
    .name = "getitem",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = getitem_attrs,
    .infer = getitem_infer,
    .eval = getitem_eval,
};
