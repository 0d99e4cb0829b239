/*
 * toolkit.c - node editing with FX's semantics: an advancing insertion
 * cursor, creation with shapes inferred, input replacement, dead-code
 * elimination, and copying nodes and graphs through a value map.
 */
#include <stdlib.h>
#include <string.h>

#include "opt.h"

InsertPoint insert_before(Node *n) { return (InsertPoint){.graph = n->graph, .before = n}; }

InsertPoint insert_after(Node *n) { return (InsertPoint){.graph = n->graph, .before = n->next}; }

Node *ip_create_op(InsertPoint *ip, const OpDef *op, const char *name_hint, Node *const *args,
                   int num_args, Diag *d)
{
    Graph *g = ip->graph;
    Node *n = (op->flags & FX_OPF_MODULE)
                  ? graph_create_module(g, ip->before, op, name_hint, args, num_args)
                  : graph_create_op(g, ip->before, op, name_hint, args, num_args);
    if (!n) {
        diag_error(d, FX_ERR_NOMEM, "out of memory creating a %s node", op->name);
        return NULL;
    }
    FxStatus st = op_apply_attr_specs(op, n, d);
    if (st == FX_OK && !node_set_num_outputs(n, op->min_outputs > 0 ? op->min_outputs : 1))
        st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    if (st == FX_OK)
        st = node_infer_shapes(n, d);
    if (st != FX_OK) {
        graph_erase_node(g, n);
        return NULL;
    }
    return n;
}

FxStatus node_finish_created(Node *n, bool attrs_set, const Node *origin, Diag *d)
{
    FxStatus st = FX_OK;
    if (!attrs_set || !node_set_num_outputs(n, 1))
        st = diag_node_error(d, FX_ERR_NOMEM, origin ? origin : n, "out of memory");
    if (st == FX_OK)
        st = op_apply_attr_specs(n->op, n, d);
    if (st == FX_OK)
        st = node_infer_shapes(n, d);
    if (st != FX_OK)
        graph_erase_node(n->graph, n);
    return st;
}

Node *node_fusable_user(const Node *v)
{
    if (v->num_users != 1 || v->users[0]->opcode == FX_OPCODE_OUTPUT)
        return NULL;
    return v->users[0];
}

int node_replace_input_with(Node *n, Node *old, Node *repl)
{
    int count = 0;
    for (int i = 0; i < n->num_args; i++)
        if (n->args[i] == old) {
            if (!node_set_arg(n, i, repl))
                return -1;
            count++;
        }
    return count;
}

bool node_is_dead(const Node *n)
{
    return n->num_users == 0 && n->opcode != FX_OPCODE_PLACEHOLDER &&
           n->opcode != FX_OPCODE_OUTPUT && !(n->op && (n->op->flags & FX_OPF_OPAQUE));
}

int node_eliminate_if_dead(Node *n)
{
    if (!n || !node_is_dead(n))
        return 0;
    int erased = 1;
    for (int i = 0; i < n->num_args; i++) {
        Node *a = n->args[i];
        node_clear_arg(n, i);
        erased += node_eliminate_if_dead(a);
    }
    graph_erase_node(n->graph, n);
    return erased;
}

int graph_eliminate_dead_code(Graph *g)
{
    int erased = 0;
    /* A control-flow body's values are read by its output or not at all;
     * its placeholders stay, matching the node's arguments. */
    for (Node *n = g->root.next; n != &g->root; n = n->next)
        if (n->opcode != FX_OPCODE_CALL_MODULE && n->body)
            erased += graph_eliminate_dead_code(n->body) +
                      (n->else_body ? graph_eliminate_dead_code(n->else_body) : 0);
    /* Users come after their arguments, so one backward walk sees a node only
     * once all its users have been decided. */
    for (Node *n = g->root.prev, *prev; n != &g->root; n = prev) {
        prev = n->prev;
        if (node_is_dead(n) && graph_erase_node(g, n))
            erased++;
    }
    return erased;
}

FxStatus graph_rewrite_until_fixed(Graph *g, NodeRewriteFn rewrite, int *changes, Diag *d)
{
    for (int before = -1; before != *changes;) {
        before = *changes;
        graph_for_each(g, n)
        {
            if (n->opcode != FX_OPCODE_CALL_FUNCTION)
                continue;
            bool done = false;
            FxStatus st = rewrite(n, &done, d);
            if (st != FX_OK)
                return st;
            *changes += done;
        }
    }
    return FX_OK;
}

/* --- value maps ------------------------------------------------------------ */

bool value_map_init(ValueMap *m, const Graph *src)
{
    m->cap = src->next_id;
    m->to = fx_alloc_array((size_t)m->cap + 1, sizeof *m->to);
    return m->to != NULL;
}

void value_map_free(ValueMap *m)
{
    free(m->to);
    m->to = NULL;
    m->cap = 0;
}

void value_map_set(ValueMap *m, const Node *src, Node *dst)
{
    if (src->id >= 0 && src->id < m->cap)
        m->to[src->id] = dst;
}

Node *value_map_get(const ValueMap *m, const Node *src)
{
    return src->id >= 0 && src->id < m->cap ? m->to[src->id] : NULL;
}

/* --- copying ---------------------------------------------------------------- */

bool node_copy_attr(Node *dst, const Attr *a, Diag *d)
{
    Attr *r = NULL;
    switch (a->kind) {
    case FX_ATTR_FLOAT: r = node_set_attr_float(dst, a->name, a->f); break;
    case FX_ATTR_INT: r = node_set_attr_int(dst, a->name, a->i); break;
    case FX_ATTR_STRING: r = node_set_attr_string(dst, a->name, a->s); break;
    case FX_ATTR_FLOATS: r = node_set_attr_floats(dst, a->name, a->floats, a->count); break;
    case FX_ATTR_INTS: r = node_set_attr_ints(dst, a->name, a->ints, a->count); break;
    case FX_ATTR_STRINGS: r = node_set_attr_strings(dst, a->name, a->strings, a->count); break;
    case FX_ATTR_TENSOR: {
        Tensor *t = a->t ? tensor_clone(a->t, d) : NULL;
        if (a->t && !t)
            return false;
        r = node_set_attr_tensor(dst, a->name, t);
        break;
    }
    }
    return r != NULL;
}

/* Everything but the links and the arguments. */
static FxStatus copy_metadata(Node *dst, const Node *src, Diag *d)
{
    Graph *g = dst->graph;
    for (int i = 0; i < src->num_attrs; i++)
        if (!node_copy_attr(dst, &src->attrs[i], d))
            return diag_node_error(d, FX_ERR_NOMEM, dst, "out of memory copying attributes");
    if (src->num_outputs > 0) {
        if (!node_set_num_outputs(dst, src->num_outputs))
            return diag_node_error(d, FX_ERR_NOMEM, dst, "out of memory");
        for (int k = 0; k < src->num_outputs; k++) {
            dst->out_types[k] = src->out_types[k];
            if (src->const_values && src->const_values[k] &&
                !(dst->const_values[k] = tensor_clone(src->const_values[k], d)))
                return FX_ERR_NOMEM;
        }
    }
    dst->shapes_known = src->shapes_known;
    for (int i = 0; i < FX_MAX_RANK; i++)
        if (src->dim_params[i] && !(dst->dim_params[i] = arena_strdup(&g->arena, src->dim_params[i])))
            return diag_node_error(d, FX_ERR_NOMEM, dst, "out of memory");
    if (src->value && !dst->value && !(dst->value = tensor_clone(src->value, d)))
        return FX_ERR_NOMEM;
    dst->index = src->index;
    if (src->onnx_outputs && src->num_outputs > 0) {
        const char **names = arena_alloc(&g->arena, (size_t)src->num_outputs * sizeof *names);
        if (!names)
            return diag_node_error(d, FX_ERR_NOMEM, dst, "out of memory");
        for (int k = 0; k < src->num_outputs; k++)
            names[k] = src->onnx_outputs[k] ? arena_strdup(&g->arena, src->onnx_outputs[k]) : NULL;
        dst->onnx_outputs = names;
    }
    dst->onnx_name = arena_strdup(&g->arena, src->onnx_name ? src->onnx_name : "");
    if ((src->body && !(dst->body = graph_clone(src->body, d))) ||
        (src->else_body && !(dst->else_body = graph_clone(src->else_body, d))))
        return FX_ERR_NOMEM;
    return FX_OK;
}

static bool all_args_typed(const Node *n)
{
    for (int i = 0; i < n->num_args; i++)
        if (n->args[i] && !n->args[i]->shapes_known)
            return false;
    return true;
}

Node *node_copy(InsertPoint *ip, const Node *src, ValueMap *m, Diag *d)
{
    Graph *g = ip->graph;
    Node **args = fx_alloc_array((size_t)src->num_args + 1, sizeof *args);
    if (!args) {
        diag_error(d, FX_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < src->num_args; i++) {
        if (!src->args[i])
            continue;
        if (!(args[i] = value_map_get(m, src->args[i]))) {
            diag_node_error(d, FX_ERR_INVALID, src, "argument '%s' has no mapped value",
                            src->args[i]->name);
            free(args);
            return NULL;
        }
    }
    Node *n = NULL;
    switch (src->opcode) {
    case FX_OPCODE_PLACEHOLDER: {
        Node *first = g->root.next;
        while (first != &g->root && first->opcode == FX_OPCODE_PLACEHOLDER)
            first = first->next;
        n = graph_create_node(g, first, FX_OPCODE_PLACEHOLDER, src->name, src->target, NULL, 0);
        break;
    }
    case FX_OPCODE_GET_ATTR: {
        Tensor *v = tensor_clone(src->value, d);
        n = v ? graph_create_constant(g, NULL, src->name, v, d) : NULL;
        break;
    }
    case FX_OPCODE_CALL_MODULE:
        n = graph_create_module(g, ip->before, src->op, src->name, args, src->num_args);
        break;
    default:
        n = graph_create_node(g, ip->before, src->opcode, src->name, src->target, args,
                              src->num_args);
        if (n)
            n->op = src->op;
        break;
    }
    free(args);
    if (!n) {
        diag_node_error(d, FX_ERR_NOMEM, src, "out of memory copying the node");
        return NULL;
    }
    if (copy_metadata(n, src, d) != FX_OK) {
        graph_erase_node(g, n);
        return NULL;
    }
    /* an untyped source (a body node its If never typed) stays untyped */
    if (node_is_call(n) && src->shapes_known && all_args_typed(n) &&
        node_infer_shapes(n, d) != FX_OK) {
        graph_erase_node(g, n);
        return NULL;
    }
    value_map_set(m, src, n);
    return n;
}

FxStatus graph_copy(Graph *dst, const Graph *src, ValueMap *m, Node ***results,
                    int *num_results, Diag *d)
{
    Node *dst_out = graph_output_node(dst);
    InsertPoint ip = {.graph = dst, .before = dst_out ? dst_out : &dst->root};
    const Node *src_out = NULL;
    for (const Node *n = src->root.next; n != &src->root; n = n->next) {
        if (n->opcode == FX_OPCODE_OUTPUT) {
            src_out = n;
            continue;
        }
        if (n->opcode == FX_OPCODE_PLACEHOLDER && value_map_get(m, n))
            continue;
        if (!node_copy(&ip, n, m, d))
            return FX_ERR_INVALID;
    }
    if (results) {
        int count = src_out ? src_out->num_args : 0;
        Node **r = fx_alloc_array((size_t)count + 1, sizeof *r);
        if (!r)
            return diag_error(d, FX_ERR_NOMEM, "out of memory");
        for (int k = 0; k < count; k++)
            r[k] = value_map_get(m, src_out->args[k]);
        *results = r;
        *num_results = count;
    }
    return FX_OK;
}

Graph *graph_clone(const Graph *src, Diag *d)
{
    Graph *g = graph_new_like(src);
    ValueMap m = {0};
    Node **results = NULL;
    int count = 0;
    if (!g || !value_map_init(&m, src)) {
        graph_free(g);
        diag_error(d, FX_ERR_NOMEM, "out of memory copying a graph");
        return NULL;
    }
    FxStatus st = graph_copy(g, src, &m, &results, &count, d);
    Node *out = NULL;
    if (st == FX_OK) {
        out = graph_create_node(g, NULL, FX_OPCODE_OUTPUT, "output", "output", results, count);
        if (!out)
            st = diag_error(d, FX_ERR_NOMEM, "out of memory copying a graph");
    }
    const Node *src_out = graph_output_node(src);
    if (st == FX_OK && src_out)
        st = copy_metadata(out, src_out, d);
    /* A constant's target is its qualified name (linear.weight), which a
     * copy into an empty graph cannot clash with: keep it. */
    for (const Node *n = src->root.next; st == FX_OK && n != &src->root; n = n->next) {
        Node *copy = n->opcode == FX_OPCODE_GET_ATTR ? value_map_get(&m, n) : NULL;
        if (copy && strcmp(copy->target, n->target) != 0 &&
            !(copy->target = arena_strdup(&g->arena, n->target)))
            st = diag_error(d, FX_ERR_NOMEM, "out of memory copying a graph");
    }
    free(results);
    value_map_free(&m);
    if (st != FX_OK) {
        graph_free(g);
        return NULL;
    }
    return g;
}
