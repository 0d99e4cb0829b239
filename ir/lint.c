/*
 * lint.c - the graph's invariants, checked after import and after every
 * pass.  Stricter than FX's lint (see FX.md at the top of the tree):
 * placeholders first, exactly one output and it is last, users and args
 * agree both ways, call_method only for view ops, getitem only on
 * multi-output nodes.  Every problem found is reported, not just the first.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static bool valid_identifier(const char *s)
{
    if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return false;
    return true;
}

static bool contains(Node *const *list, int count, const Node *x)
{
    for (int i = 0; i < count; i++)
        if (list[i] == x)
            return true;
    return false;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

FxStatus graph_lint(const Graph *g, bool require_shapes, Diag *d)
{
    FxStatus st = FX_OK;
#define LINT_FAIL(node, ...) (st = diag_node_error(d, FX_ERR_INVALID, node, "lint: " __VA_ARGS__))
    int count = 0;
    for (Node *n = g->root.next; n != &g->root; n = n->next) {
        if (n->next->prev != n || n->prev->next != n) {
            diag_error(d, FX_ERR_INVALID, "lint: node list is corrupt at '%s'", n->name);
            return FX_ERR_INVALID;
        }
        n->pass_data = (void *)(intptr_t)(++count);
    }
    if (count != g->num_nodes)
        st = diag_error(d, FX_ERR_INVALID, "lint: graph counts %d nodes but the list has %d",
                        g->num_nodes, count);

    const char **names = fx_alloc_array((size_t)(count ? count : 1), sizeof *names);
    if (!names)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    int outputs = 0, k = 0;
    bool seen_non_placeholder = false;
    for (Node *n = g->root.next; n != &g->root; n = n->next) {
        names[k++] = n->name;
        intptr_t pos = (intptr_t)n->pass_data;
        if (!valid_identifier(n->name))
            LINT_FAIL(n, "name '%s' is not a C identifier", n->name);
        if (n->graph != g)
            LINT_FAIL(n, "node belongs to another graph");
        if (n->opcode == FX_OPCODE_PLACEHOLDER) {
            if (seen_non_placeholder)
                LINT_FAIL(n, "placeholder after a non-placeholder node");
        } else {
            seen_non_placeholder = true;
        }
        if (n->opcode == FX_OPCODE_OUTPUT) {
            outputs++;
            if (n->next != &g->root)
                LINT_FAIL(n, "output node is not the last node");
        }
        if (node_is_call(n) && !n->op)
            LINT_FAIL(n, "target '%s' is not a known op", n->target);
        if (n->op && (n->op->flags & FX_OPF_MODULE)) {
            if (n->opcode != FX_OPCODE_CALL_MODULE)
                LINT_FAIL(n, "module kind '%s' must be a call_module", n->op->name);
            else if (strncmp(n->target, "fused.", 6) != 0)
                LINT_FAIL(n, "call_module target '%s' is not a fused.NAME", n->target);
        } else if (n->op && n->opcode == FX_OPCODE_CALL_MODULE) {
            LINT_FAIL(n, "call_module of '%s', which is not a module kind", n->op->name);
        } else if (n->op) {
            bool view = (n->op->flags & FX_OPF_VIEW) != 0;
            if (n->opcode == FX_OPCODE_CALL_METHOD && !view)
                LINT_FAIL(n, "call_method of '%s', which is not a view op", n->op->name);
            if (n->opcode == FX_OPCODE_CALL_FUNCTION && view)
                LINT_FAIL(n, "view op '%s' must be a call_method", n->op->name);
            const char *expect = view ? n->op->method : n->op->name;
            if (strcmp(n->target, expect) != 0)
                LINT_FAIL(n, "target '%s' does not match its op '%s'", n->target, expect);
        }
        if (n->opcode == FX_OPCODE_GET_ATTR && !n->value)
            LINT_FAIL(n, "get_attr without a value");
        for (int i = 0; i < n->num_args; i++) {
            Node *a = n->args[i];
            if (!a)
                continue;
            intptr_t apos = (intptr_t)a->pass_data;
            if (a->graph != g || apos <= 0)
                LINT_FAIL(n, "argument %d is not a node of this graph", i);
            else if (apos >= pos)
                LINT_FAIL(n, "argument %d ('%s') is used before it is defined", i, a->name);
            if (!contains(a->users, a->num_users, n))
                LINT_FAIL(n, "argument '%s' does not list this node as a user", a->name);
            if (a->num_outputs > 1 && n->op != &fx_op_getitem)
                LINT_FAIL(n, "reads multi-output node '%s' directly instead of via getitem",
                          a->name);
            if (a->opcode == FX_OPCODE_OUTPUT)
                LINT_FAIL(n, "reads the output node");
        }
        for (int u = 0; u < n->num_users; u++) {
            if (!contains(n->users[u]->args, n->users[u]->num_args, n))
                LINT_FAIL(n, "user '%s' does not read this node", n->users[u]->name);
            if (contains(n->users, u, n->users[u]))
                LINT_FAIL(n, "user '%s' is listed twice", n->users[u]->name);
        }
        if (n->op == &fx_op_getitem) {
            const Node *src = n->num_args == 1 ? n->args[0] : NULL;
            if (!src || n->index < 0 || (src->shapes_known && n->index >= src->num_outputs))
                LINT_FAIL(n, "getitem index %d is out of range", n->index);
        }
        if (require_shapes && n->opcode != FX_OPCODE_OUTPUT && !n->shapes_known)
            LINT_FAIL(n, "has no shape");
    }
    if (outputs != 1)
        st = diag_error(d, FX_ERR_INVALID, "lint: graph has %d output nodes, expected exactly 1",
                        outputs);
    qsort(names, (size_t)k, sizeof *names, compare_names);
    for (int i = 1; i < k; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            st = diag_error(d, FX_ERR_INVALID, "lint: name '%s' is used by two nodes", names[i]);
    free(names);
    for (Node *n = g->root.next; n != &g->root; n = n->next)
        n->pass_data = NULL;
    /* Control-flow bodies are graphs of their own, held to the same rules,
     * and read outer values only through their placeholders.  Their shapes
     * are the node's to infer: a branch an If with a known condition never
     * takes stays untyped. */
    for (Node *n = g->root.next; n != &g->root; n = n->next) {
        if (n->opcode == FX_OPCODE_CALL_MODULE)
            continue;
        Graph *bodies[2] = {n->body, n->else_body};
        for (int b = 0; b < 2; b++) {
            if (!bodies[b])
                continue;
            if (graph_num_placeholders(bodies[b]) <
                n->num_args - (n->op == &fx_op_If) - node_attr_int(n, "batched", 0))
                LINT_FAIL(n, "body has fewer placeholders than the node has arguments");
            if (graph_lint(bodies[b], false, d) != FX_OK)
                st = FX_ERR_INVALID;
        }
    }
    return st;
#undef LINT_FAIL
}
