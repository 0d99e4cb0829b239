/*
 * fold_if.c - Ifs whose condition is known once the inputs are bound
 * (initializers, --const, --shape, shape arithmetic such as Shape -> Gather
 * -> Equal) are replaced by their taken branch, and what is still refused
 * afterwards is listed at once.
 *
 * Exporters write `if sr == 16000:` or rank checks as ONNX Ifs; with the
 * condition a constant, the taken branch's nodes are copied in place of the
 * If (its placeholders reading the If's arguments) and the untaken branch is
 * dropped with whatever it holds, ops fxcc lacks included: the loader keeps
 * those as Unsupported nodes, and only the ones left standing are refused.
 * The pipeline alternates this with shape propagation, which computes the
 * conditions, until nothing more folds (a folded branch may hold Ifs of its
 * own).  Also the body-inlining helpers the loop unroller shares.
 */
#include <stdlib.h>
#include <string.h>

#include "opt.h"

FxStatus graph_inline_body(InsertPoint *ip, const Graph *body, Node *const *inputs,
                           Node **results, Diag *d)
{
    ValueMap m;
    if (!value_map_init(&m, body))
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    FxStatus st = FX_OK;
    int k = 0;
    for (const Node *b = body->root.next; b != &body->root && st == FX_OK; b = b->next) {
        if (b->opcode == FX_OPCODE_PLACEHOLDER)
            value_map_set(&m, b, inputs[k++]);
        else if (b->opcode == FX_OPCODE_OUTPUT)
            for (int i = 0; i < b->num_args; i++)
                results[i] = value_map_get(&m, b->args[i]);
        else if (!node_copy(ip, b, &m, d))
            st = FX_ERR_INVALID;
    }
    value_map_free(&m);
    return st;
}

FxStatus node_replace_outputs(Node *n, Node *const *results, Diag *d)
{
    if (n->num_outputs == 1) {
        if (node_replace_all_uses_with(n, results[0]) < 0)
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    } else {
        while (n->num_users > 0) {
            Node *gi = n->users[0];
            if (gi->op != &fx_op_getitem || gi->index < 0 || gi->index >= n->num_outputs)
                return diag_node_error(d, FX_ERR_INVALID, n, "reader '%s' is not a getitem",
                                       gi->name);
            if (node_replace_all_uses_with(gi, results[gi->index]) < 0)
                return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
            bool last = n->num_users == 1;
            node_eliminate_if_dead(gi); /* the last one takes n with it */
            if (last)
                return FX_OK;
        }
    }
    node_eliminate_if_dead(n);
    return FX_OK;
}

static FxStatus fold_if(Node *n, bool taken, Diag *d)
{
    const Graph *branch = taken ? n->body : n->else_body;
    if (!branch)
        return diag_node_error(d, FX_ERR_INVALID, n, "has no %s",
                               taken ? "then_branch" : "else_branch");
    const Node *out = graph_output_node(branch);
    if (!out || out->num_args != n->num_outputs ||
        graph_num_placeholders(branch) != n->num_args - 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "its branch does not fit its arguments "
                                                     "and outputs");
    Node **results = fx_alloc_array((size_t)n->num_outputs, sizeof *results);
    if (!results)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    InsertPoint ip = insert_before(n);
    FxStatus st = graph_inline_body(&ip, branch, n->args + 1, results, d);
    if (st == FX_OK)
        st = node_replace_outputs(n, results, d);
    free(results);
    return st;
}

int fold_constant_ifs(Graph *g, Diag *d)
{
    /* Folding erases the If and its getitems (and what only they read), so
     * the walk starts over after each one; a folded branch's own Ifs wait
     * for the next round of shape propagation to be typed. */
    int folded = 0;
    for (Node *n = g->root.next; n != &g->root;) {
        const Tensor *cond = n->op == &fx_op_If && n->opcode == FX_OPCODE_CALL_FUNCTION &&
                                     n->num_args > 0
                                 ? node_const_value(n->args[0])
                                 : NULL;
        if (!cond || tensor_numel(cond) != 1) {
            n = n->next;
            continue;
        }
        if (fold_if(n, tensor_get_int(cond, 0) != 0, d) != FX_OK)
            return -1;
        folded++;
        n = g->root.next;
    }
    return folded;
}

/* --- refusals -------------------------------------------------------------- */

static const char *label_of(const Node *n)
{
    return n->onnx_name && *n->onnx_name ? n->onnx_name : n->name;
}

static int refuse_in(const Graph *g, const char *prefix, Diag *d)
{
    int refused = 0;
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        if (n->op == &fx_op_Unsupported) {
            char path[1200];
            snprintf(path, sizeof path, "%s%s (%s)", prefix, label_of(n),
                     node_attr_string(n, "onnx_op", "?"));
            size_t before = d ? d->count : 0;
            diag_error_at(d, FX_ERR_UNSUPPORTED, g->source, -1, "%s%s",
                       node_attr_string(n, "reason", "not supported"),
                       *prefix ? "; it is inside a control-flow body: give the inputs an If's "
                                 "condition depends on with --const NAME=FILE or --shape "
                                 "NAME=DIMS, and fxcc folds the If and drops the branch "
                                 "not taken"
                               : "");
            if (d && d->count > before) {
                free(d->entries[d->count - 1].node);
                d->entries[d->count - 1].node = fx_strdup(path);
            }
            refused++;
            continue;
        }
        if (n->opcode == FX_OPCODE_CALL_MODULE || !n->body)
            continue;
        const Graph *bodies[2] = {n->body, n->else_body};
        const char *roles[2] = {n->else_body ? "then_branch" : "body", "else_branch"};
        for (int b = 0; b < 2; b++) {
            if (!bodies[b])
                continue;
            char inner[1200];
            snprintf(inner, sizeof inner, "%s%s/%s/", prefix, label_of(n), roles[b]);
            refused += refuse_in(bodies[b], inner, d);
        }
    }
    return refused;
}

FxStatus refuse_unsupported(const Graph *g, Diag *d)
{
    return refuse_in(g, "", d) ? FX_ERR_UNSUPPORTED : FX_OK;
}
