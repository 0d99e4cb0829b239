/*
 * transformer.c - FX's Transformer: a new graph built from an old one, node
 * by node, with hooks deciding what each source node becomes.
 *
 * The walk is the interpreter's (interp_run): list order, which is
 * execution order and a topological order, so every argument of a node has
 * been transformed before the node's hook runs.  The hooks see the
 * transformed arguments and return the node that stands for the source
 * node; that may be a node they created (any number of them, appended at
 * t->ip), a copy (transformer_copy, what a NULL hook does), or an existing
 * node of the new graph (an argument, to drop an identity).  The output node
 * is always copied, so the new graph returns what the hooks made of the old
 * one's results.
 *
 * Shapes are inferred on each node as it is made (node_copy and ip_create_op
 * do it), not by propagating over the finished graph, which would need the
 * source's shape bindings again.  The source is only read.
 *
 * Refused: a hook that returns nothing (its message is kept, or one naming
 * the node is added), a node of another graph, a node without shapes for a
 * source node that had them, and for a node with several outputs a
 * replacement with another number of outputs, since the source's getitem
 * nodes are copied and read the replacement by index.  On failure the
 * partial graph is freed.
 */
#include <stdlib.h>

#include "opt.h"

Node *transformer_copy(Transformer *t, const Node *src, Node *const *args, int num_args)
{
    if (num_args != src->num_args) {
        diag_node_error(t->diag, FX_ERR_INVALID, src, "%d arguments given, the node has %d",
                        num_args, src->num_args);
        return NULL;
    }
    /* node_copy reads arguments through the value map: point src's arguments
     * at the given nodes for the copy, then restore them (in reverse, so an
     * argument used twice gets its first saved value back). */
    Node **saved = fx_alloc_array((size_t)num_args + 1, sizeof *saved);
    if (!saved) {
        diag_node_error(t->diag, FX_ERR_NOMEM, src, "out of memory");
        return NULL;
    }
    for (int i = 0; i < num_args; i++)
        if (src->args[i]) {
            saved[i] = value_map_get(&t->values, src->args[i]);
            value_map_set(&t->values, src->args[i], args[i]);
        }
    Node *n = node_copy(&t->ip, src, &t->values, t->diag);
    /* node_copy names a copied constant's target after the node, so that
     * constants from several graphs cannot clash; dst mirrors src, where
     * the targets are already unique, so the source's (an initializer's
     * ONNX name) stays. */
    if (n && n->opcode == FX_OPCODE_GET_ATTR &&
        !(n->target = arena_strdup(&t->dst->arena, src->target))) {
        diag_node_error(t->diag, FX_ERR_NOMEM, src, "out of memory");
        n = NULL;
    }
    for (int i = num_args - 1; i >= 0; i--)
        if (src->args[i])
            value_map_set(&t->values, src->args[i], saved[i]);
    free(saved);
    return n;
}

static TransformHook hook_for(const Transformer *t, FxOpcode opcode)
{
    switch (opcode) {
    case FX_OPCODE_PLACEHOLDER: return t->placeholder;
    case FX_OPCODE_GET_ATTR: return t->get_attr;
    case FX_OPCODE_CALL_FUNCTION: return t->call_function;
    case FX_OPCODE_CALL_METHOD: return t->call_method;
    case FX_OPCODE_CALL_MODULE: return t->call_module;
    default: return NULL;
    }
}

/* Runs the hook of one source node (or copies it) and checks what it gave. */
static FxStatus transform_node(Transformer *t, const Node *src, Node **args, Diag *d)
{
    for (int i = 0; i < src->num_args; i++) {
        args[i] = src->args[i] ? value_map_get(&t->values, src->args[i]) : NULL;
        if (src->args[i] && !args[i])
            return diag_node_error(d, FX_ERR_INVALID, src, "argument '%s' comes after the node",
                                   src->args[i]->name);
    }
    t->ip = (InsertPoint){.graph = t->dst, .before = &t->dst->root};
    size_t errors = d->count;
    TransformHook hook = hook_for(t, src->opcode);
    Node *r = hook ? hook(t, src, args, src->num_args)
                   : transformer_copy(t, src, args, src->num_args);
    if (!r) {
        if (d->count > errors)
            return d->entries[errors].status;
        return diag_node_error(d, FX_ERR_INVALID, src, "the %s hook returned no node",
                               fx_opcode_name(src->opcode));
    }
    if (r->graph != t->dst)
        return diag_node_error(d, FX_ERR_INVALID, src,
                               "the %s hook returned a node of another graph",
                               fx_opcode_name(src->opcode));
    if (src->num_outputs > 1 && r->num_outputs != src->num_outputs)
        return diag_node_error(d, FX_ERR_INVALID, src,
                               "has %d outputs read through getitem, but the %s hook returned "
                               "'%s' with %d",
                               src->num_outputs, fx_opcode_name(src->opcode), r->name,
                               r->num_outputs);
    /* What follows is copied with its shapes inferred from r's. */
    if (src->shapes_known && !r->shapes_known)
        return diag_node_error(d, FX_ERR_INVALID, src,
                               "the %s hook returned '%s' without shapes (make nodes with "
                               "ip_create_op or transformer_copy)",
                               fx_opcode_name(src->opcode), r->name);
    value_map_set(&t->values, src, r);
    return FX_OK;
}

Graph *transformer_run(Transformer *t, const Graph *src, Diag *d)
{
    Graph *dst = graph_new();
    int max_args = 0;
    for (const Node *n = src->root.next; n != &src->root; n = n->next)
        if (n->num_args > max_args)
            max_args = n->num_args;
    Node **args = fx_alloc_array((size_t)max_args + 1, sizeof *args);
    if (!dst || !args || !value_map_init(&t->values, src)) {
        graph_free(dst);
        free(args);
        diag_error(d, FX_ERR_NOMEM, "out of memory starting a transform");
        return NULL;
    }
    dst->opset = src->opset;
    dst->ir_version = src->ir_version;
    dst->source = src->source;
    t->dst = dst;
    t->diag = d;

    FxStatus st = FX_OK;
    for (const Node *n = src->root.next; n != &src->root && st == FX_OK; n = n->next) {
        if (n->opcode == FX_OPCODE_OUTPUT) {
            t->ip = (InsertPoint){.graph = dst, .before = &dst->root};
            if (!node_copy(&t->ip, n, &t->values, d))
                st = FX_ERR_INVALID;
        } else {
            st = transform_node(t, n, args, d);
        }
    }
    free(args);
    value_map_free(&t->values);
    if (st != FX_OK) {
        graph_free(dst);
        t->dst = NULL;
        t->ip = (InsertPoint){0};
        return NULL;
    }
    t->ip = (InsertPoint){.graph = dst, .before = &dst->root};
    return dst;
}
