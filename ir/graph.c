/*
 * graph.c - Graph and Node: creation, naming, argument/user bookkeeping,
 * attributes, erasing.
 *
 * The invariants every function here keeps (and lint checks): nodes form a
 * doubly linked list with a sentinel in execution order; `users` of a node is
 * the ordered set of nodes that have it among their args, so `x + x` gives x
 * one user; names are unique C identifiers.  Nodes, names and attributes live
 * in the graph's arena; args/users arrays and tensors are heap-allocated and
 * released by graph_free (or when a node is erased).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

const char *fx_opcode_name(FxOpcode op)
{
    switch (op) {
    case FX_OPCODE_PLACEHOLDER: return "placeholder";
    case FX_OPCODE_GET_ATTR: return "get_attr";
    case FX_OPCODE_CALL_FUNCTION: return "call_function";
    case FX_OPCODE_CALL_METHOD: return "call_method";
    case FX_OPCODE_CALL_MODULE: return "call_module";
    case FX_OPCODE_OUTPUT: return "output";
    case FX_OPCODE_SENTINEL: return "root";
    }
    return "?";
}

Graph *graph_new(void)
{
    Graph *g = fx_alloc_array(1, sizeof *g);
    if (!g)
        return NULL;
    arena_init(&g->arena);
    g->root.prev = g->root.next = &g->root;
    g->root.opcode = FX_OPCODE_SENTINEL;
    g->root.graph = g;
    g->root.name = "";
    return g;
}

Graph *graph_new_like(const Graph *src)
{
    Graph *g = graph_new();
    if (!g)
        return NULL;
    g->opset = src->opset;
    g->ir_version = src->ir_version;
    /* a copy: the new graph may outlive src (a pruned or quantized clone
     * replaces the graph it was made from) and messages name the file */
    if (src->source && !(g->source = arena_strdup(&g->arena, src->source))) {
        graph_free(g);
        return NULL;
    }
    g->leaf_libraries = src->leaf_libraries;
    return g;
}

static void node_release(Node *n)
{
    free(n->args);
    free(n->users);
    n->args = n->users = NULL;
    n->num_args = n->num_users = 0;
    if (n->const_values) {
        for (int k = 0; k < n->num_outputs; k++)
            tensor_free(n->const_values[k]);
        free(n->const_values);
        n->const_values = NULL;
    }
    free(n->out_types);
    n->out_types = NULL;
    tensor_free(n->value);
    n->value = NULL;
    graph_free(n->body);
    n->body = NULL;
    graph_free(n->else_body);
    n->else_body = NULL;
    for (int i = 0; i < n->num_attrs; i++) {
        tensor_free(n->attrs[i].t);
        n->attrs[i].t = NULL;
    }
}

void graph_free(Graph *g)
{
    if (!g)
        return;
    Node *n = g->root.next;
    while (n != &g->root) {
        Node *next = n->next;
        node_release(n);
        n = next;
    }
    free(g->name_slots);
    arena_free(&g->arena);
    free(g);
}

Node *graph_first(const Graph *g) { return g->root.next == &g->root ? NULL : g->root.next; }

Node *graph_output_node(const Graph *g)
{
    for (Node *n = g->root.prev; n != &g->root; n = n->prev)
        if (n->opcode == FX_OPCODE_OUTPUT)
            return n;
    return NULL;
}

/* --- names --------------------------------------------------------------- */

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static const char **name_slot(const Graph *g, const char *name)
{
    if (!g->name_cap)
        return NULL;
    size_t mask = g->name_cap - 1;
    for (size_t i = (size_t)name_hash(name) & mask;; i = (i + 1) & mask) {
        if (!g->name_slots[i] || strcmp(g->name_slots[i], name) == 0)
            return &g->name_slots[i];
    }
}

static bool name_taken(const Graph *g, const char *name)
{
    const char **slot = name_slot(g, name);
    return slot && *slot;
}

static bool name_register(Graph *g, const char *name)
{
    if ((g->name_count + 1) * 2 > g->name_cap) {
        size_t cap = g->name_cap ? g->name_cap * 2 : 64;
        const char **old = g->name_slots;
        size_t old_cap = g->name_cap;
        g->name_slots = fx_alloc_array(cap, sizeof *g->name_slots);
        if (!g->name_slots) {
            g->name_slots = old;
            return false;
        }
        g->name_cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i])
                *name_slot(g, old[i]) = old[i];
        free(old);
    }
    *name_slot(g, name) = name;
    g->name_count++;
    return true;
}

Node *graph_find(const Graph *g, const char *name)
{
    for (Node *n = g->root.next; n != &g->root; n = n->next)
        if (strcmp(n->name, name) == 0)
            return n;
    return NULL;
}

static bool is_c_keyword(const char *s)
{
    static const char *const keywords[] = {
        "auto", "break", "case", "char", "const", "continue", "default", "do", "double",
        "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
        "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
        "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool", "true",
        "false", "NULL", "_Bool", "_Complex", "_Imaginary"};
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
        if (strcmp(s, keywords[i]) == 0)
            return true;
    return false;
}

const char *graph_unique_name(Graph *g, const char *hint)
{
    char base[128];
    size_t len = 0;
    bool last_us = true; /* collapse runs of '_' and drop leading ones */
    for (const char *p = hint ? hint : ""; *p && len + 1 < sizeof base - 16; p++) {
        unsigned char c = (unsigned char)*p;
        if (isalnum(c)) {
            base[len++] = (char)c;
            last_us = false;
        } else if (!last_us) {
            base[len++] = '_';
            last_us = true;
        }
    }
    while (len > 0 && base[len - 1] == '_')
        len--;
    base[len] = '\0';
    if (len == 0)
        snprintf(base, sizeof base, "v");
    else if (isdigit((unsigned char)base[0])) {
        memmove(base + 1, base, len + 1);
        base[0] = 'v';
    }
    if (is_c_keyword(base))
        strcat(base, "_");

    char cand[160];
    snprintf(cand, sizeof cand, "%s", base);
    for (int k = 1; name_taken(g, cand); k++)
        snprintf(cand, sizeof cand, "%s_%d", base, k);
    char *name = arena_strdup(&g->arena, cand);
    if (!name || !name_register(g, name))
        return NULL;
    return name;
}

/* --- users bookkeeping ---------------------------------------------------- */

static bool users_contains(const Node *n, const Node *u)
{
    for (int i = 0; i < n->num_users; i++)
        if (n->users[i] == u)
            return true;
    return false;
}

/* False when memory runs out; n is unchanged then. */
static bool users_add(Node *n, Node *u)
{
    if (users_contains(n, u))
        return true;
    Node **users = fx_realloc_array(n->users, (size_t)n->num_users + 1, sizeof *users);
    if (!users)
        return false;
    users[n->num_users++] = u;
    n->users = users;
    return true;
}

static bool uses(const Node *u, const Node *n)
{
    for (int i = 0; i < u->num_args; i++)
        if (u->args[i] == n)
            return true;
    return false;
}

static void users_remove(Node *n, Node *u)
{
    if (uses(u, n))
        return; /* still an argument in another slot */
    for (int i = 0; i < n->num_users; i++)
        if (n->users[i] == u) {
            memmove(&n->users[i], &n->users[i + 1],
                    (size_t)(n->num_users - i - 1) * sizeof *n->users);
            n->num_users--;
            return;
        }
}

void node_clear_arg(Node *n, int i)
{
    Node *old = n->args[i];
    n->args[i] = NULL;
    if (old)
        users_remove(old, n);
}

bool node_set_arg(Node *n, int i, Node *value)
{
    /* The only step that can fail goes first, so a failure changes nothing. */
    if (value && !users_add(value, n))
        return false;
    Node *old = n->args[i];
    n->args[i] = value;
    if (old && old != value)
        users_remove(old, n);
    return true;
}

int node_append_arg(Node *n, Node *value)
{
    Node **args = fx_realloc_array(n->args, (size_t)n->num_args + 1, sizeof *args);
    if (!args)
        return -1;
    n->args = args;
    n->args[n->num_args] = NULL;
    if (!node_set_arg(n, n->num_args, value))
        return -1;
    return n->num_args++;
}

/* --- creation ------------------------------------------------------------- */

static void link_before(Node *n, Node *before)
{
    n->next = before;
    n->prev = before->prev;
    before->prev->next = n;
    before->prev = n;
}

static void unlink_node(Node *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = NULL;
}

Node *graph_create_node(Graph *g, Node *before, FxOpcode opcode, const char *name_hint,
                        const char *target, Node *const *args, int num_args)
{
    Node *n = arena_alloc(&g->arena, sizeof *n);
    if (!n)
        return NULL;
    n->graph = g;
    n->opcode = opcode;
    n->name = graph_unique_name(g, name_hint);
    n->target = arena_strdup(&g->arena, target ? target : "");
    n->onnx_name = "";
    n->id = g->next_id++;
    if (!n->name || !n->target)
        return NULL;
    if (num_args > 0) {
        n->args = fx_alloc_array((size_t)num_args, sizeof *n->args);
        if (!n->args)
            return NULL;
        n->num_args = num_args;
        for (int i = 0; i < num_args; i++)
            if (!node_set_arg(n, i, args[i])) {
                /* n is not linked: undo the users it was entered in */
                for (int k = 0; k < i; k++)
                    node_clear_arg(n, k);
                free(n->args);
                return NULL;
            }
    }
    link_before(n, before ? before : &g->root);
    g->num_nodes++;
    return n;
}

Node *graph_create_op(Graph *g, Node *before, const OpDef *op, const char *name_hint,
                      Node *const *args, int num_args)
{
    bool view = (op->flags & FX_OPF_VIEW) != 0;
    Node *n = graph_create_node(g, before, view ? FX_OPCODE_CALL_METHOD : FX_OPCODE_CALL_FUNCTION,
                                name_hint, view ? op->method : op->name, args, num_args);
    if (n)
        n->op = op;
    return n;
}

Node *graph_create_module(Graph *g, Node *before, const OpDef *op, const char *name_hint,
                          Node *const *args, int num_args)
{
    Node *n = graph_create_node(g, before, FX_OPCODE_CALL_MODULE, name_hint, NULL, args, num_args);
    if (!n)
        return NULL;
    size_t len = strlen(n->name) + sizeof "fused.";
    char *target = arena_alloc(&g->arena, len);
    if (!target)
        return NULL;
    snprintf(target, len, "fused.%s", n->name);
    n->target = target;
    n->op = op;
    return n;
}

Node *graph_create_constant(Graph *g, Node *before, const char *name_hint, Tensor *value,
                            Diag *d)
{
    if (!before) {
        before = g->root.next;
        while (before != &g->root && (before->opcode == FX_OPCODE_PLACEHOLDER ||
                                      before->opcode == FX_OPCODE_GET_ATTR))
            before = before->next;
    }
    Node *n = graph_create_node(g, before, FX_OPCODE_GET_ATTR, name_hint, NULL, NULL, 0);
    if (!n) {
        tensor_free(value);
        diag_error(d, FX_ERR_NOMEM, "out of memory creating constant '%s'", name_hint);
        return NULL;
    }
    n->target = n->name;
    n->value = value; /* owned from here on, freed with the node */
    if (!node_set_num_outputs(n, 1)) {
        graph_erase_node(g, n);
        diag_error(d, FX_ERR_NOMEM, "out of memory creating constant '%s'", name_hint);
        return NULL;
    }
    n->out_types[0] = value->type;
    n->shapes_known = true;
    return n;
}

FxStatus graph_freeze_input(Graph *g, Node *ph, Tensor *value, Diag *d)
{
    if (ph->opcode != FX_OPCODE_PLACEHOLDER || ph->num_outputs != 1) {
        tensor_free(value);
        return diag_node_error(d, FX_ERR_INVALID, ph, "only a graph input can be frozen");
    }
    const TensorType *declared = &ph->out_types[0];
    bool fits = declared->dtype == value->type.dtype && declared->rank == value->type.rank;
    for (int i = 0; fits && i < declared->rank; i++)
        fits = declared->dims[i] < 0 || declared->dims[i] == value->type.dims[i];
    if (!fits) {
        char want[256], got[256];
        diag_node_error(d, FX_ERR_SHAPE, ph, "input '%s' is declared %s; the value given is %s",
                        ph->target, type_format(declared, want, sizeof want),
                        type_format(&value->type, got, sizeof got));
        tensor_free(value);
        return FX_ERR_SHAPE;
    }
    tensor_free(ph->value);
    ph->value = value;
    ph->opcode = FX_OPCODE_GET_ATTR;
    ph->out_types[0] = value->type;
    ph->shapes_known = true;
    for (int i = 0; i < FX_MAX_RANK; i++)
        ph->dim_params[i] = NULL;
    /* placeholders stay first: the new constant goes after the last of them */
    unlink_node(ph);
    Node *before = g->root.next;
    while (before != &g->root && before->opcode == FX_OPCODE_PLACEHOLDER)
        before = before->next;
    link_before(ph, before);
    return FX_OK;
}

bool node_set_num_outputs(Node *n, int k)
{
    if (n->const_values) {
        for (int i = 0; i < n->num_outputs; i++)
            tensor_free(n->const_values[i]);
        free(n->const_values);
        n->const_values = NULL;
    }
    free(n->out_types);
    n->out_types = NULL;
    n->num_outputs = 0;
    if (k <= 0)
        return true;
    n->out_types = fx_alloc_array((size_t)k, sizeof *n->out_types);
    n->const_values = fx_alloc_array((size_t)k, sizeof *n->const_values);
    if (!n->out_types || !n->const_values) {
        free(n->out_types);
        free(n->const_values);
        n->out_types = NULL;
        n->const_values = NULL;
        return false;
    }
    n->num_outputs = k;
    return true;
}

const TensorType *node_input_type(const Node *n, int i)
{
    const Node *a = n->args[i];
    if (!a || a->num_outputs < 1)
        return NULL;
    return &a->out_types[0];
}

FxStatus node_set_const_input(Node *n, int slot, const char *role, Tensor *value, Diag *d)
{
    if (!value)
        return FX_ERR_NOMEM;
    char hint[256];
    snprintf(hint, sizeof hint, "%s_%s", n->name, role);
    Node *c = graph_create_constant(n->graph, NULL, hint, value, d);
    if (!c)
        return FX_ERR_NOMEM;
    while (n->num_args <= slot)
        if (node_append_arg(n, NULL) < 0)
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    if (!node_set_arg(n, slot, c))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    return FX_OK;
}

/* --- editing -------------------------------------------------------------- */

int node_replace_all_uses_with(Node *old, Node *repl)
{
    int rewritten = 0;
    /* Rewriting every slot of a user removes it from old->users, so the
     * user at index k is a new one each time, except repl, which is kept. */
    int k = 0;
    while (k < old->num_users) {
        Node *user = old->users[k];
        if (user == repl) {
            k++;
            continue;
        }
        for (int i = 0; i < user->num_args; i++)
            if (user->args[i] == old) {
                if (!node_set_arg(user, i, repl))
                    return -1;
                rewritten++;
            }
    }
    return rewritten;
}

bool node_is_call(const Node *n)
{
    return n->opcode == FX_OPCODE_CALL_FUNCTION || n->opcode == FX_OPCODE_CALL_METHOD ||
           n->opcode == FX_OPCODE_CALL_MODULE;
}

bool node_is_op(const Node *n, const OpDef *op)
{
    return n && n->opcode == FX_OPCODE_CALL_FUNCTION && n->op == op;
}

bool graph_erase_node(Graph *g, Node *n)
{
    if (n->num_users > 0)
        return false;
    for (int i = 0; i < n->num_args; i++)
        node_clear_arg(n, i);
    unlink_node(n);
    node_release(n);
    g->num_nodes--;
    return true;
}

void graph_move_before(Graph *g, Node *n, Node *before)
{
    unlink_node(n);
    link_before(n, before ? before : &g->root);
}

int graph_num_placeholders(const Graph *g)
{
    int k = 0;
    for (Node *n = g->root.next; n != &g->root; n = n->next)
        k += n->opcode == FX_OPCODE_PLACEHOLDER;
    return k;
}

Node *graph_placeholder(const Graph *g, int k)
{
    for (Node *n = g->root.next; n != &g->root; n = n->next)
        if (n->opcode == FX_OPCODE_PLACEHOLDER && k-- == 0)
            return n;
    return NULL;
}

int graph_num_outputs(const Graph *g)
{
    Node *out = graph_output_node(g);
    return out ? out->num_args : 0;
}

/* --- attributes ----------------------------------------------------------- */

Attr *node_attr(const Node *n, const char *name)
{
    for (int i = 0; i < n->num_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

int64_t node_attr_int(const Node *n, const char *name, int64_t dflt)
{
    const Attr *a = node_attr(n, name);
    return a && a->kind == FX_ATTR_INT ? a->i : dflt;
}

float node_attr_float(const Node *n, const char *name, float dflt)
{
    const Attr *a = node_attr(n, name);
    if (!a)
        return dflt;
    if (a->kind == FX_ATTR_FLOAT)
        return a->f;
    if (a->kind == FX_ATTR_INT)
        return (float)a->i;
    return dflt;
}

const char *node_attr_string(const Node *n, const char *name, const char *dflt)
{
    const Attr *a = node_attr(n, name);
    return a && a->kind == FX_ATTR_STRING ? a->s : dflt;
}

int64_t node_attr_ints(const Node *n, const char *name, const int64_t **vals)
{
    const Attr *a = node_attr(n, name);
    if (!a || a->kind != FX_ATTR_INTS) {
        *vals = NULL;
        return -1;
    }
    *vals = a->ints;
    return a->count;
}

int64_t node_attr_floats(const Node *n, const char *name, const float **vals)
{
    const Attr *a = node_attr(n, name);
    if (!a || a->kind != FX_ATTR_FLOATS) {
        *vals = NULL;
        return -1;
    }
    *vals = a->floats;
    return a->count;
}

/* Returns a cleared slot for `name`, appended if new.  The attrs array lives in
 * the arena, so growing copies it; the old copy is simply abandoned. */
static Attr *attr_slot(Node *n, const char *name)
{
    Attr *a = node_attr(n, name);
    if (a) {
        tensor_free(a->t);
        const char *kept = a->name;
        memset(a, 0, sizeof *a);
        a->name = kept;
        return a;
    }
    Attr *attrs = arena_alloc(&n->graph->arena, (size_t)(n->num_attrs + 1) * sizeof *attrs);
    const char *copy = arena_strdup(&n->graph->arena, name);
    if (!attrs || !copy)
        return NULL;
    if (n->num_attrs)
        memcpy(attrs, n->attrs, (size_t)n->num_attrs * sizeof *attrs);
    n->attrs = attrs;
    a = &attrs[n->num_attrs++];
    a->name = copy;
    return a;
}

Attr *node_set_attr_int(Node *n, const char *name, int64_t v)
{
    Attr *a = attr_slot(n, name);
    if (a) {
        a->kind = FX_ATTR_INT;
        a->i = v;
    }
    return a;
}

Attr *node_set_attr_float(Node *n, const char *name, float v)
{
    Attr *a = attr_slot(n, name);
    if (a) {
        a->kind = FX_ATTR_FLOAT;
        a->f = v;
    }
    return a;
}

Attr *node_set_attr_string(Node *n, const char *name, const char *s)
{
    const char *copy = arena_strdup(&n->graph->arena, s);
    Attr *a = copy ? attr_slot(n, name) : NULL;
    if (a) {
        a->kind = FX_ATTR_STRING;
        a->s = copy;
    }
    return a;
}

/* A list attribute: count elements of `size` bytes copied into the arena
 * (never a zero-byte allocation); *data gets the copy. */
static Attr *set_list_attr(Node *n, const char *name, AttrKind kind, const void *v,
                           int64_t count, size_t size, void **data)
{
    void *copy = arena_alloc(&n->graph->arena, (size_t)(count ? count : 1) * size);
    Attr *a = copy ? attr_slot(n, name) : NULL;
    if (!a)
        return NULL;
    if (count)
        memcpy(copy, v, (size_t)count * size);
    a->kind = kind;
    a->count = count;
    *data = copy;
    return a;
}

Attr *node_set_attr_ints(Node *n, const char *name, const int64_t *v, int64_t count)
{
    void *copy = NULL;
    Attr *a = set_list_attr(n, name, FX_ATTR_INTS, v, count, sizeof *v, &copy);
    if (a)
        a->ints = copy;
    return a;
}

Attr *node_set_attr_floats(Node *n, const char *name, const float *v, int64_t count)
{
    void *copy = NULL;
    Attr *a = set_list_attr(n, name, FX_ATTR_FLOATS, v, count, sizeof *v, &copy);
    if (a)
        a->floats = copy;
    return a;
}

Attr *node_set_attr_strings(Node *n, const char *name, const char *const *v, int64_t count)
{
    const char **copy = arena_alloc(&n->graph->arena, (size_t)(count ? count : 1) * sizeof *copy);
    if (!copy)
        return NULL;
    for (int64_t i = 0; i < count; i++)
        if (!(copy[i] = arena_strdup(&n->graph->arena, v[i])))
            return NULL;
    Attr *a = attr_slot(n, name);
    if (!a)
        return NULL;
    a->kind = FX_ATTR_STRINGS;
    a->strings = copy;
    a->count = count;
    return a;
}

Attr *node_set_attr_tensor(Node *n, const char *name, Tensor *t)
{
    Attr *a = attr_slot(n, name);
    if (!a) {
        tensor_free(t);
        return NULL;
    }
    a->kind = FX_ATTR_TENSOR;
    a->t = t;
    return a;
}

void node_remove_attr(Node *n, const char *name)
{
    for (int i = 0; i < n->num_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) {
            tensor_free(n->attrs[i].t);
            memmove(&n->attrs[i], &n->attrs[i + 1],
                    (size_t)(n->num_attrs - i - 1) * sizeof *n->attrs);
            n->num_attrs--;
            return;
        }
}
