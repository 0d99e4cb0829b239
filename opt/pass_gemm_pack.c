/*
 * pass_gemm_pack.c - moves the float matrix products whose weights are
 * known at compile time onto the GEMM that reads them packed
 * (runtime/fxrt_nn_gemm_packed.c), so that no call packs B again:
 *
 *     y = FusedGemm(a, B, c?, r?; alpha, transB, epilogue)
 *  -> y = GemmPacked(a, packed, c?, r?; n, alpha, epilogue)
 *
 * and likewise a plain Gemm (beta 1, or no C) and a MatMul, with no
 * epilogue beyond Gemm's C.  packed is fxrt_gemm_pack_b_f32 of B in its
 * stored layout (transB read there), a new constant; B itself is erased
 * once nothing else reads it.
 *
 * Only when: float32, B a constant matrix, no transA, A of rank >= 2 with
 * at least two rows in all (a single row stays on the GEMV, which streams B
 * once and is faster than any packing).  Host only (PassDef.host_only):
 * the panels pad B's columns to a multiple of 16, flash a microcontroller
 * would rather keep, and its portable tile gains nothing from them.
 */
#include <stdio.h>
#include <string.h>

#include "opt.h"

/* B's constant float matrix when n is a product this pass packs. */
static const Tensor *packable_weights(const Node *n)
{
    bool fused = n->opcode == FX_OPCODE_CALL_MODULE && n->op == &fx_op_FusedGemm;
    bool gemm = node_is_op(n, &fx_op_Gemm);
    if ((!fused && !gemm && !node_is_op(n, &fx_op_MatMul)) || n->num_outputs != 1 ||
        n->num_args < 2 || !n->args[0] || !n->args[1] || !n->shapes_known)
        return NULL;
    if ((fused || gemm) && node_attr_int(n, "transA", 0) != 0)
        return NULL;
    if (gemm && n->num_args > 2 && n->args[2] && node_attr_float(n, "beta", 1.0f) != 1.0f)
        return NULL;
    const TensorType *a = node_input_type(n, 0);
    const Tensor *b = node_const_value(n->args[1]);
    if (!b || b->type.dtype != FXRT_DTYPE_FLOAT32 || b->type.rank != 2 ||
        a->dtype != FXRT_DTYPE_FLOAT32 || a->rank < 2 || n->out_types[0].dtype != FXRT_DTYPE_FLOAT32)
        return NULL;
    int64_t k = a->dims[a->rank - 1], rows = k > 0 ? type_numel(a) / k : 0;
    return rows >= 2 ? b : NULL;
}

/* The GemmPacked node standing for n into *out. */
static FxStatus packed_product(Graph *g, Node *n, const Tensor *b, Node **out, Diag *d)
{
    *out = NULL;
    int trans_b = node_attr_int(n, "transB", 0) != 0;
    int64_t k = b->type.dims[trans_b ? 1 : 0], cols = b->type.dims[trans_b ? 0 : 1];
    TensorType pt = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1,
                     .dims = {fxrt_gemm_packed_floats(cols, k)}};
    Tensor *packed = tensor_new(&pt, d);
    if (!packed)
        return FX_ERR_NOMEM;
    fxrt_gemm_pack_b_f32(trans_b, cols, k, b->data, b->type.dims[1], packed->data);
    char hint[200];
    snprintf(hint, sizeof hint, "%s_packed", n->name);
    Node *w = graph_create_constant(g, NULL, hint, packed, d);
    if (!w)
        return FX_ERR_NOMEM;
    Node *args[4] = {n->args[0], w, n->num_args > 2 ? n->args[2] : NULL,
                     n->num_args > 3 ? n->args[3] : NULL};
    int num_args = n->num_args < 4 ? n->num_args : 4;
    Node *q = graph_create_op(g, n, &fx_op_GemmPacked, n->name, args, num_args);
    if (!q)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    bool ok = node_set_attr_int(q, "n", cols);
    /* alpha and the epilogue's attributes as they are; Gemm's beta is 1 */
    static const char *const kept[] = {"alpha", "activation", "act_alpha", "act_beta",
                                       "residual_after"};
    for (int i = 0; ok && i < n->num_attrs; i++)
        for (size_t j = 0; j < sizeof kept / sizeof kept[0]; j++)
            if (strcmp(n->attrs[i].name, kept[j]) == 0)
                ok = node_copy_attr(q, &n->attrs[i], d);
    FxStatus st = node_finish_created(q, ok, n, d);
    if (st == FX_OK)
        *out = q;
    return st;
}

FxStatus pass_gemm_pack(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, n)
    {
        const Tensor *b = packable_weights(n);
        if (!b)
            continue;
        Node *q = NULL;
        if ((st = packed_product(g, n, b, &q, d)) != FX_OK)
            break;
        if ((st = pass_replace_node(n, q, r, d)) != FX_OK)
            break;
    }
    return pass_finish(g, r, st);
}
