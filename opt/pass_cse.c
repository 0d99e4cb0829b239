/*
 * pass_cse.c - common subexpression elimination: identical constants and
 * identical computations are kept once.
 *
 * Constants first: get_attr nodes with the same type and the same bytes
 * (compared bitwise, so 0.0 and -0.0 stay apart and equal NaNs merge) become
 * one, which can make computations on them identical.  Then one walk in
 * graph order: a call node equal to an earlier one (same op, the same
 * argument nodes in the same order, or swapped for a commutative binary op,
 * equal attributes, the same getitem index) is replaced by the earlier one
 * and erased.  Since its users then read the earlier node, their own
 * duplicates are found when the walk reaches them, so whole repeated chains
 * merge in one pass.  The first occurrence in graph order always wins, so the
 * result does not depend on pointer or hash order.
 *
 * Never merged: call_module nodes (a fused kernel owns its parameters and
 * body), control flow (its bodies are not compared), opaque ops (FX_OPF_OPAQUE:
 * a leaf may have side effects), nodes
 * without arguments, and values that were not typed by shape propagation.
 * (The op table has no ops with random outputs; any added later must be
 * refused in mergeable().)
 */
#include <stdlib.h>
#include <string.h>

#include "opt.h"

/* --- constants ------------------------------------------------------------- */

typedef struct ConstEntry {
    uint64_t hash;
    int position;
    Node *node;
} ConstEntry;

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull; /* FNV-1a */
    return h;
}

static uint64_t hash_constant(const Tensor *t)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = hash_bytes(h, &t->type.dtype, sizeof t->type.dtype);
    h = hash_bytes(h, &t->type.rank, sizeof t->type.rank);
    h = hash_bytes(h, t->type.dims, (size_t)t->type.rank * sizeof t->type.dims[0]);
    return hash_bytes(h, t->data, tensor_nbytes(t));
}

static bool same_constant(const Tensor *a, const Tensor *b)
{
    size_t n = tensor_nbytes(a);
    return type_equal(&a->type, &b->type) && (n == 0 || memcmp(a->data, b->data, n) == 0);
}

static int by_hash_then_position(const void *x, const void *y)
{
    const ConstEntry *a = x, *b = y;
    if (a->hash != b->hash)
        return a->hash < b->hash ? -1 : 1;
    return (a->position > b->position) - (a->position < b->position);
}

static FxStatus merge_constants(Graph *g, int *changes, Diag *d)
{
    int count = 0;
    graph_for_each(g, n) count += n->opcode == FX_OPCODE_GET_ATTR && n->value;
    ConstEntry *e = fx_alloc_array((size_t)(count ? count : 1), sizeof *e);
    if (!e)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    int k = 0, position = 0;
    graph_for_each(g, n)
    {
        if (n->opcode == FX_OPCODE_GET_ATTR && n->value)
            e[k++] = (ConstEntry){hash_constant(n->value), position, n};
        position++;
    }
    qsort(e, (size_t)count, sizeof *e, by_hash_then_position);
    /* Within a run of equal hashes, in graph order, each constant merges into
     * the first earlier one it equals (and that is still there). */
    for (int start = 0; start < count;) {
        int end = start;
        while (end < count && e[end].hash == e[start].hash)
            end++;
        for (int i = start + 1; i < end; i++)
            for (int j = start; j < i; j++) {
                if (!e[j].node || !same_constant(e[j].node->value, e[i].node->value))
                    continue;
                if (node_replace_all_uses_with(e[i].node, e[j].node) < 0) {
                    FxStatus st = diag_node_error(d, FX_ERR_NOMEM, e[i].node, "out of memory");
                    free(e);
                    return st;
                }
                graph_erase_node(g, e[i].node);
                e[i].node = NULL;
                (*changes)++;
                break;
            }
        start = end;
    }
    free(e);
    return FX_OK;
}

/* --- computations ---------------------------------------------------------- */

static bool same_attr(const Attr *a, const Attr *b)
{
    if (a->kind != b->kind || strcmp(a->name, b->name) != 0)
        return false;
    switch (a->kind) {
    case FX_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0;
    case FX_ATTR_INT: return a->i == b->i;
    case FX_ATTR_STRING: return strcmp(a->s, b->s) == 0;
    case FX_ATTR_TENSOR: return a->t && b->t ? same_constant(a->t, b->t) : a->t == b->t;
    case FX_ATTR_FLOATS:
        return a->count == b->count &&
               (a->count == 0 || memcmp(a->floats, b->floats, (size_t)a->count * sizeof *a->floats) == 0);
    case FX_ATTR_INTS:
        return a->count == b->count &&
               (a->count == 0 || memcmp(a->ints, b->ints, (size_t)a->count * sizeof *a->ints) == 0);
    case FX_ATTR_STRINGS:
        if (a->count != b->count)
            return false;
        for (int64_t i = 0; i < a->count; i++)
            if (strcmp(a->strings[i], b->strings[i]) != 0)
                return false;
        return true;
    }
    return false;
}

static bool same_attrs(const Node *a, const Node *b)
{
    if (a->num_attrs != b->num_attrs)
        return false;
    for (int i = 0; i < a->num_attrs; i++) {
        const Attr *other = node_attr(b, a->attrs[i].name);
        if (!other || !same_attr(&a->attrs[i], other))
            return false;
    }
    return true;
}

static bool same_args(const Node *a, const Node *b)
{
    if (a->num_args != b->num_args)
        return false;
    bool in_order = true;
    for (int i = 0; i < a->num_args && in_order; i++)
        in_order = a->args[i] == b->args[i];
    if (in_order)
        return true;
    return (a->op->flags & FX_OPF_COMMUTATIVE) && a->num_args == 2 && a->args[0] == b->args[1] &&
           a->args[1] == b->args[0];
}

static Node *first_arg(const Node *n)
{
    for (int i = 0; i < n->num_args; i++)
        if (n->args[i])
            return n->args[i];
    return NULL;
}

static bool mergeable(const Node *n)
{
    /* two calls of an opaque user function may differ (state, I/O) */
    return (n->opcode == FX_OPCODE_CALL_FUNCTION || n->opcode == FX_OPCODE_CALL_METHOD) && n->op &&
           !(n->op->flags & FX_OPF_OPAQUE) && !n->body && n->shapes_known && first_arg(n);
}

static bool same_computation(const Node *a, const Node *b)
{
    return a->op == b->op && a->opcode == b->opcode && a->num_outputs == b->num_outputs &&
           a->index == b->index && same_args(a, b) && same_attrs(a, b);
}

static int position(const Node *n) { return (int)(intptr_t)n->pass_data; }

/* The earliest node before n computing the same: it reads n's first
 * argument too, so it is among that argument's users. */
static Node *earlier_twin(const Node *n)
{
    const Node *a = first_arg(n);
    Node *best = NULL;
    for (int u = 0; u < a->num_users; u++) {
        Node *c = a->users[u];
        if (c == n || position(c) >= position(n) || !mergeable(c) || !same_computation(c, n))
            continue;
        if (!best || position(c) < position(best))
            best = c;
    }
    return best;
}

FxStatus pass_cse(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = merge_constants(g, &r->changes, d);
    if (st != FX_OK)
        return st;
    intptr_t pos = 0;
    graph_for_each(g, n) n->pass_data = (void *)++pos;
    graph_for_each(g, n)
    {
        if (!mergeable(n))
            continue;
        Node *twin = earlier_twin(n);
        if (!twin)
            continue;
        if (node_replace_all_uses_with(n, twin) < 0) {
            graph_for_each(g, m) m->pass_data = NULL;
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        }
        graph_erase_node(g, n);
        r->changes++;
    }
    graph_for_each(g, n) n->pass_data = NULL;
    return FX_OK;
}
