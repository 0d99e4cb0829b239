/*
 * pass_const_fold.c - every call node whose inputs are all constants becomes
 * a get_attr holding the value the interpreter computes for it.
 *
 * The value comes from the op's own reference kernel (node_eval), so folding
 * can never disagree with running the graph: Shape chains, ConstantOfShape,
 * Range, transposed or cast weights and reshaped constants all fold the same
 * way.  When shape propagation already evaluated a node (it does so for small
 * values, and for Shape and Size whatever their input) that value is taken
 * as it is instead of being computed again.
 *
 * The folded node is turned into a get_attr in place and moved to the top of
 * the graph with the other constants, so the constant keeps the name of the
 * node it replaces and every user keeps reading it.  A node with several
 * outputs is read through getitem nodes: each getitem becomes the constant of
 * its output.  What nobody reads any more once nodes have folded (their
 * constant arguments, a multi-output node whose getitems all folded) is
 * erased at the end.
 *
 * Refused: nodes whose result would be larger than FOLD_MAX_BYTES, ops
 * without a reference kernel, and opaque ops (FX_OPF_OPAQUE: leaves).  (The
 * op table has no random-output ops; any added later must be refused here.)
 */
#include <stdlib.h>

#include "opt.h"

/* 64 MiB.  Folding trades work at run time for bytes in the generated
 * weights; a small input can fold into a huge constant (ConstantOfShape,
 * Expand, Tile), and past this size the binary grows more than the saved
 * work is worth. */
#define FOLD_MAX_BYTES ((size_t)64 << 20)

static bool already_folded(const Node *n)
{
    if (!n->const_values || n->num_outputs < 1)
        return false;
    for (int k = 0; k < n->num_outputs; k++)
        if (!n->const_values[k])
            return false;
    return true;
}

static bool inputs_constant(const Node *n)
{
    for (int i = 0; i < n->num_args; i++)
        if (n->args[i] && !node_const_value(n->args[i]))
            return false;
    return true;
}

static bool foldable(const Node *n)
{
    /* an unread node is dce's to erase, not worth evaluating; an opaque one
     * (a leaf) has no kernel fxcc may run at compile time */
    if (!node_is_call(n) || n->op == &fx_op_getitem || !n->op || !n->op->eval ||
        (n->op->flags & FX_OPF_OPAQUE) || !n->shapes_known || n->num_users == 0)
        return false;
    if (!already_folded(n) && !inputs_constant(n))
        return false;
    size_t bytes = 0;
    for (int k = 0; k < n->num_outputs; k++) {
        size_t b = type_nbytes(&n->out_types[k]);
        if (b > FOLD_MAX_BYTES - bytes)
            return false;
        bytes += b;
    }
    /* a multi-output node must be read only through getitem to be replaced */
    for (int u = 0; u < n->num_users && n->num_outputs > 1; u++)
        if (n->users[u]->op != &fx_op_getitem)
            return false;
    return true;
}

/* The node's output values, computed or taken from shape propagation;
 * outs[k] are owned by the caller. */
static FxStatus evaluate(Node *n, Tensor **outs, Diag *d)
{
    if (already_folded(n)) {
        for (int k = 0; k < n->num_outputs; k++) {
            outs[k] = n->const_values[k];
            n->const_values[k] = NULL;
        }
        return FX_OK;
    }
    const Tensor **in = fx_alloc_array((size_t)n->num_args + 1, sizeof *in);
    if (!in)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    for (int i = 0; i < n->num_args; i++)
        in[i] = node_const_value(n->args[i]);
    FxStatus st = node_eval(n, in, outs, d);
    free(in);
    return st;
}

/* Turns call node n into a get_attr holding value (always owned from here)
 * at the top of the graph. */
static FxStatus become_constant(Graph *g, Node *n, Tensor *value, Diag *d)
{
    if (!node_set_num_outputs(n, 1)) {
        tensor_free(value);
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    }
    for (int i = 0; i < n->num_args; i++)
        node_clear_arg(n, i);
    free(n->args);
    n->args = NULL;
    n->num_args = 0;
    for (int i = 0; i < n->num_attrs; i++)
        tensor_free(n->attrs[i].t);
    n->attrs = NULL;
    n->num_attrs = 0;
    graph_free(n->body);
    n->body = NULL;
    graph_free(n->else_body);
    n->else_body = NULL;
    n->opcode = FX_OPCODE_GET_ATTR;
    n->op = NULL;
    n->target = n->name;
    n->index = 0;
    n->value = value;
    n->out_types[0] = value->type;
    n->shapes_known = true;
    Node *top = g->root.next;
    while (top != &g->root && top != n &&
           (top->opcode == FX_OPCODE_PLACEHOLDER || top->opcode == FX_OPCODE_GET_ATTR))
        top = top->next;
    if (top != n)
        graph_move_before(g, n, top);
    return FX_OK;
}

static FxStatus fold(Graph *g, Node *n, Diag *d)
{
    int num_outputs = n->num_outputs; /* n may become a constant below */
    Tensor **outs = fx_alloc_array((size_t)num_outputs, sizeof *outs);
    if (!outs)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    FxStatus st = evaluate(n, outs, d);
    if (st == FX_OK && num_outputs == 1) {
        st = become_constant(g, n, outs[0], d);
        outs[0] = NULL;
    }
    /* become_constant detaches each getitem from n's users */
    while (st == FX_OK && num_outputs > 1 && n->num_users > 0) {
        Node *item = n->users[0];
        Tensor *v = tensor_clone(outs[item->index], d);
        st = v ? become_constant(g, item, v, d) : FX_ERR_NOMEM;
    }
    for (int k = 0; k < num_outputs; k++)
        tensor_free(outs[k]);
    free(outs);
    return st;
}

FxStatus pass_const_fold(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    /* Walk a snapshot: folding moves nodes to the top. */
    int count = 0;
    graph_for_each(g, n) count += node_is_call(n);
    Node **calls = fx_alloc_array((size_t)(count ? count : 1), sizeof *calls);
    if (!calls)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    int k = 0;
    graph_for_each(g, n) if (node_is_call(n)) calls[k++] = n;
    FxStatus st = FX_OK;
    for (k = 0; k < count && st == FX_OK; k++) {
        Node *n = calls[k];
        if (!foldable(n))
            continue;
        st = fold(g, n, d);
        if (st == FX_OK)
            r->changes++;
    }
    free(calls);
    return pass_finish(g, r, st);
}
