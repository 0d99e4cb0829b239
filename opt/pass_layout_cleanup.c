/*
 * pass_layout_cleanup.c - removes layout changes that do nothing or that
 * the next node can do for free.
 *
 * One walk in graph order, so a chain is handled link by link as its nodes
 * come: each rewrite leaves a node reading the start of the chain, which the
 * next link then sees.
 *
 *   - Identity, and inference Dropout whose mask nobody reads, are bypassed.
 *   - Transpose(Transpose(x)) becomes one Transpose of x with the composed
 *     permutation; a Transpose whose permutation is the identity is bypassed.
 *   - A Reshape, Flatten, Squeeze or Unsqueeze of another of these becomes one
 *     Reshape of the first one's input to the final (static) shape, and any of
 *     them whose output type is its input's is bypassed.
 *   - MatMul of two matrices where an operand is a rank-2 Transpose becomes a
 *     Gemm reading the Transpose's input with transA / transB set.  Transposes
 *     of constants are left alone: constant folding turns them into the
 *     transposed weights, which needs no flag at all.
 *   - A batched float32 MatMul (operands of one rank >= 3) whose operands are
 *     Transposes, or whose only reader is one, becomes a TransposedMatMul
 *     (ir/ops/nn_gemm.c): a strided batched GEMM over the Transposes' inputs
 *     that writes the final layout, as long as each permutation keeps the
 *     stored last axis a matrix axis (a BLAS operand, plain or transposed)
 *     and the output's columns last.  Attention's head split, K^T and head
 *     merge then cost no copy.
 *
 * Bypassed and superseded nodes are erased at the end with the dead code
 * they leave.  The views that remain are call_method nodes the memory planner
 * aliases, so they cost nothing at run time.
 */
#include <stdio.h>
#include <string.h>

#include "opt.h"

static bool is_shape_view(const Node *n)
{
    const OpDef *op = n ? n->op : NULL;
    return op == &fx_op_Reshape || op == &fx_op_Flatten || op == &fx_op_Squeeze ||
           op == &fx_op_Unsqueeze;
}

static bool has_single_output(const Node *n) { return n && n->num_outputs == 1 && n->shapes_known; }

/* n's readers read `input` instead; counts a change when there were any. */
static FxStatus bypass(Node *n, Node *input, int *changes, Diag *d)
{
    int rewritten = node_replace_all_uses_with(n, input);
    if (rewritten < 0)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    *changes += rewritten > 0;
    return FX_OK;
}

/* Makes n a node of `op` with op's default attributes, keeping its name,
 * place, arguments and users; the caller sets what differs and re-infers. */
static FxStatus retarget(Node *n, const OpDef *op, Diag *d)
{
    for (int i = 0; i < n->num_attrs; i++)
        tensor_free(n->attrs[i].t);
    n->attrs = NULL;
    n->num_attrs = 0;
    n->op = op;
    bool view = (op->flags & FX_OPF_VIEW) != 0;
    n->opcode = view ? FX_OPCODE_CALL_METHOD : FX_OPCODE_CALL_FUNCTION;
    n->target = view ? op->method : op->name;
    return op_apply_attr_specs(op, n, d);
}

/* Inference Dropout: the value is its input; the mask is all ones, so only a
 * Dropout whose mask nobody reads goes. */
static FxStatus remove_dropout(Node *n, int *changes, Diag *d)
{
    if (n->num_outputs == 1)
        return bypass(n, n->args[0], changes, d);
    for (int u = 0; u < n->num_users; u++) {
        const Node *item = n->users[u];
        if (item->op != &fx_op_getitem || (item->index != 0 && item->num_users > 0))
            return FX_OK;
    }
    int bypassed = 0;
    for (int u = 0; u < n->num_users; u++) {
        FxStatus st = n->users[u]->index == 0 ? bypass(n->users[u], n->args[0], &bypassed, d)
                                              : FX_OK;
        if (st != FX_OK)
            return st;
    }
    *changes += bypassed > 0;
    return FX_OK;
}

/* Transpose's permutation with the default (reversed axes) made explicit. */
static void transpose_perm(const Node *n, int64_t *perm)
{
    const int64_t *p;
    int rank = n->out_types[0].rank;
    if (node_attr_ints(n, "perm", &p) == rank)
        memcpy(perm, p, (size_t)rank * sizeof *perm);
    else
        for (int i = 0; i < rank; i++)
            perm[i] = rank - 1 - i;
}

static bool is_identity_perm(const int64_t *perm, int rank)
{
    for (int i = 0; i < rank; i++)
        if (perm[i] != i)
            return false;
    return true;
}

static FxStatus clean_transpose(Node *n, int *changes, Diag *d)
{
    int rank = n->out_types[0].rank;
    int64_t perm[FX_MAX_RANK];
    transpose_perm(n, perm);
    Node *inner = n->args[0];
    if (inner->op == &fx_op_Transpose && has_single_output(inner)) {
        /* out[i] = mid[perm[i]] = x[inner_perm[perm[i]]] */
        int64_t inner_perm[FX_MAX_RANK], composed[FX_MAX_RANK];
        transpose_perm(inner, inner_perm);
        for (int i = 0; i < rank; i++)
            composed[i] = inner_perm[perm[i]];
        if (!node_set_arg(n, 0, inner->args[0]) || !node_set_attr_ints(n, "perm", composed, rank))
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        FxStatus st = node_infer_shapes(n, d);
        if (st != FX_OK)
            return st;
        memcpy(perm, composed, sizeof perm);
        (*changes)++;
    }
    if (is_identity_perm(perm, rank))
        return bypass(n, n->args[0], changes, d);
    return FX_OK;
}

static FxStatus clean_shape_view(Node *n, int *changes, Diag *d)
{
    Node *inner = n->args[0];
    const TensorType *out = &n->out_types[0];
    if (type_equal(out, &inner->out_types[0]))
        return bypass(n, inner, changes, d);
    if (!is_shape_view(inner) || !has_single_output(inner))
        return FX_OK;
    Node *x = inner->args[0];
    if (type_equal(out, &x->out_types[0]))
        return bypass(n, x, changes, d);
    /* a 0 in a Reshape's shape copies the input's dimension (without
     * allowzero): empty tensors keep their chain */
    for (int i = 0; i < out->rank; i++)
        if (out->dims[i] == 0)
            return FX_OK;
    FxStatus st = n->op == &fx_op_Reshape ? FX_OK : retarget(n, &fx_op_Reshape, d);
    if (st != FX_OK)
        return st;
    if (!node_set_arg(n, 0, x))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    /* a Reshape's old shape input is left to the dead-code elimination */
    st = node_set_const_input(n, 1, "shape", tensor_new_ints(out->dims, out->rank, d), d);
    if (st != FX_OK || (st = node_infer_shapes(n, d)) != FX_OK)
        return st;
    (*changes)++;
    return FX_OK;
}

/* A rank-2 Transpose of a computed value: what Gemm's trans flags do. */
static Node *transposed_matrix(const Node *a)
{
    if (a->op != &fx_op_Transpose || !has_single_output(a) || a->out_types[0].rank != 2)
        return NULL;
    int64_t perm[FX_MAX_RANK];
    transpose_perm(a, perm);
    Node *x = a->args[0];
    if (perm[0] != 1 || node_const_value(x))
        return NULL;
    return x;
}

/* The Transpose of a computed value that a TransposedMatMul operand can
 * read in place (its stored last axis stays a matrix axis), or NULL. */
static Node *batched_operand(Node *a, int64_t *perm)
{
    if (a->op != &fx_op_Transpose || !has_single_output(a) || node_const_value(a->args[0]))
        return NULL;
    int rank = a->out_types[0].rank;
    transpose_perm(a, perm);
    return perm[rank - 1] == rank - 1 || perm[rank - 2] == rank - 1 ? a->args[0] : NULL;
}

/* A float32 MatMul of two operands of one rank >= 3 with a Transpose as an
 * operand or as its only reader becomes a TransposedMatMul reading and
 * writing the transposed tensors in place; the Transposes it leaves without
 * readers go with the dead code. */
static FxStatus absorb_batched_transposes(Node *n, int *changes, Diag *d)
{
    const TensorType *a = node_input_type(n, 0), *b = node_input_type(n, 1);
    int rank = a->rank;
    if (a->dtype != FXRT_DTYPE_FLOAT32 || b->dtype != FXRT_DTYPE_FLOAT32 || b->rank != rank)
        return FX_OK;
    int64_t perm_a[FX_MAX_RANK], perm_b[FX_MAX_RANK], perm_y[FX_MAX_RANK];
    Node *src_a = batched_operand(n->args[0], perm_a);
    Node *src_b = batched_operand(n->args[1], perm_b);
    Node *out_t = node_fusable_user(n);
    if (out_t && (out_t->op != &fx_op_Transpose || !has_single_output(out_t)))
        out_t = NULL;
    if (out_t) {
        transpose_perm(out_t, perm_y);
        if (perm_y[rank - 1] != rank - 1)
            out_t = NULL;
    }
    if (!src_a && !src_b && !out_t)
        return FX_OK;
    FxStatus st = retarget(n, &fx_op_TransposedMatMul, d);
    if (st != FX_OK)
        return st;
    if ((src_a && !node_set_attr_ints(n, "perm_a", perm_a, rank)) ||
        (src_b && !node_set_attr_ints(n, "perm_b", perm_b, rank)) ||
        (out_t && !node_set_attr_ints(n, "perm_y", perm_y, rank)))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    if ((src_a && !node_set_arg(n, 0, src_a)) || (src_b && !node_set_arg(n, 1, src_b)))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    if ((st = node_infer_shapes(n, d)) != FX_OK)
        return st;
    int bypassed = 0;
    if (out_t && (st = bypass(out_t, n, &bypassed, d)) != FX_OK)
        return st;
    (*changes)++;
    return FX_OK;
}

static FxStatus absorb_transposes(Node *n, int *changes, Diag *d)
{
    const TensorType *a = node_input_type(n, 0), *b = node_input_type(n, 1);
    if (a && b && a->rank >= 3)
        return absorb_batched_transposes(n, changes, d);
    if (!a || !b || a->rank != 2 || b->rank != 2)
        return FX_OK;
    Node *ta = transposed_matrix(n->args[0]), *tb = transposed_matrix(n->args[1]);
    if (!ta && !tb)
        return FX_OK;
    FxStatus st = retarget(n, &fx_op_Gemm, d);
    if (st != FX_OK)
        return st;
    if (!node_set_attr_int(n, "transA", ta != NULL) || !node_set_attr_int(n, "transB", tb != NULL))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    if ((ta && !node_set_arg(n, 0, ta)) || (tb && !node_set_arg(n, 1, tb)))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    if ((st = node_infer_shapes(n, d)) != FX_OK)
        return st;
    (*changes)++;
    return FX_OK;
}

FxStatus pass_layout_cleanup(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, n)
    {
        if (st != FX_OK)
            break;
        if (n->opcode == FX_OPCODE_GET_ATTR || n->opcode == FX_OPCODE_PLACEHOLDER ||
            n->opcode == FX_OPCODE_OUTPUT || !n->shapes_known || n->num_users == 0)
            continue;
        if (n->op == &fx_op_Identity)
            st = bypass(n, n->args[0], &r->changes, d);
        else if (n->op == &fx_op_Dropout)
            st = remove_dropout(n, &r->changes, d);
        else if (n->op == &fx_op_Transpose && has_single_output(n->args[0]))
            st = clean_transpose(n, &r->changes, d);
        else if (is_shape_view(n) && has_single_output(n->args[0]))
            st = clean_shape_view(n, &r->changes, d);
        else if (n->op == &fx_op_MatMul)
            st = absorb_transposes(n, &r->changes, d);
    }
    return pass_finish(g, r, st);
}
