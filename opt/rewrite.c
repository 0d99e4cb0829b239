/*
 * rewrite.c - FX's replace_pattern: find every occurrence of a pattern graph
 * and replace it by a copy of a replacement graph.
 *
 * Matching starts at the node bound to the pattern's first returned value
 * (the anchor) and walks arguments backwards.  Pattern placeholders match any
 * value; two placeholders may bind the same value, one placeholder used twice
 * must bind the same value both times.  A pattern get_attr matches a get_attr
 * with an equal value (type and bytes), or any get_attr when it is a wildcard
 * (no value).  A call node matches a call node of the same op, the same
 * canonical attributes, the same getitem index and the same argument
 * structure (None where the pattern has None).  With o->commutative, a
 * binary op flagged FX_OPF_COMMUTATIVE may also match with its operands
 * swapped; the search backtracks, so the choice made at one commutative node
 * can be revised when a later argument fails.  The pattern returns call
 * nodes only, and the others than the first must be reached from the anchor
 * (multi-output patterns).
 *
 * Placeholder and constant bindings are the match's inputs; the graph nodes
 * bound to the pattern's call nodes are its interior.  All matches are found
 * first, on the unchanged graph, taken in graph order of their anchors:
 *   - a match whose interior is used outside it (except through the returned
 *     values) is skipped, since the interior disappears;
 *   - a match whose interior shares a node with an earlier kept match is
 *     skipped (no overlap);
 *   - the filter, if any, sees the candidate last; a refused match does not
 *     block later ones that overlap it.
 * Then each kept match is replaced in order: the replacement is copied
 * (graph_copy, constants at the top, shapes inferred where its inputs have
 * them) before the earliest node among the anchor and the outside users of
 * the returned values, a point where every input is defined (a match without
 * one is skipped); a replacement value whose type differs from the one it
 * replaces (both known) skips the match too, since a rule such as
 * Mul(x, 1) -> x only holds where the constant does not broadcast x; uses of
 * the returned values are rewired; the matched nodes
 * left without users are erased, placeholder bindings never.  A match that
 * reads a value an earlier replacement replaced reads the replacement's value.
 *
 * Matched graph nodes recorded in MatchList are mostly erased by then: only
 * their name, opcode, op and id stay readable (until graph_free).
 */
#include <stdlib.h>
#include <string.h>

#include "opt.h"

static bool is_call(const Node *n)
{
    return n->opcode == FX_OPCODE_CALL_FUNCTION || n->opcode == FX_OPCODE_CALL_METHOD ||
           n->opcode == FX_OPCODE_CALL_MODULE;
}

static bool is_leaf(const Node *n)
{
    return n->opcode == FX_OPCODE_PLACEHOLDER || n->opcode == FX_OPCODE_GET_ATTR;
}

/* --- equality of attributes and constants ---------------------------------- */

static bool floats_equal(float a, float b) { return a == b || (a != a && b != b); }

static bool tensors_equal(const Tensor *a, const Tensor *b)
{
    if (!a || !b)
        return a == b;
    if (!type_equal(&a->type, &b->type))
        return false;
    size_t bytes = tensor_nbytes(a);
    return bytes == 0 || memcmp(a->data, b->data, bytes) == 0;
}

static bool attr_equal(const Attr *a, const Attr *b)
{
    if (strcmp(a->name, b->name) != 0 || a->kind != b->kind)
        return false;
    switch (a->kind) {
    case FX_ATTR_FLOAT: return floats_equal(a->f, b->f);
    case FX_ATTR_INT: return a->i == b->i;
    case FX_ATTR_STRING: return strcmp(a->s, b->s) == 0;
    case FX_ATTR_TENSOR: return tensors_equal(a->t, b->t);
    case FX_ATTR_FLOATS:
    case FX_ATTR_INTS:
    case FX_ATTR_STRINGS:
        if (a->count != b->count)
            return false;
        for (int64_t i = 0; i < a->count; i++) {
            bool same = a->kind == FX_ATTR_FLOATS ? floats_equal(a->floats[i], b->floats[i])
                      : a->kind == FX_ATTR_INTS   ? a->ints[i] == b->ints[i]
                                                  : strcmp(a->strings[i], b->strings[i]) == 0;
            if (!same)
                return false;
        }
        return true;
    }
    return false;
}

/* Everything about a pattern node and a graph node but their arguments. */
static bool node_matches_locally(const Node *pn, const Node *gn)
{
    if (pn->opcode == FX_OPCODE_PLACEHOLDER)
        return gn->opcode != FX_OPCODE_OUTPUT;
    if (pn->opcode == FX_OPCODE_GET_ATTR)
        return gn->opcode == FX_OPCODE_GET_ATTR &&
               (!pn->value || tensors_equal(pn->value, gn->value));
    if (gn->opcode != pn->opcode || gn->op != pn->op || gn->num_args != pn->num_args ||
        gn->num_attrs != pn->num_attrs)
        return false;
    if (pn->op == &fx_op_getitem && pn->index != gn->index)
        return false;
    for (int i = 0; i < pn->num_attrs; i++)
        if (!attr_equal(&pn->attrs[i], &gn->attrs[i]))
            return false;
    return true;
}

/* --- the backtracking matcher ----------------------------------------------- */

typedef struct Pair {
    const Node *pn;
    Node *gn;
} Pair;

typedef struct Matcher {
    const Graph *pattern;
    bool commutative;
    Node **map;       /* pattern id -> graph node */
    const Node **rev; /* graph id -> the first pattern node bound to it */
    int graph_cap;
    Pair *pending; /* pairs still to check, a stack */
    int top, pending_cap;
    int *trail; /* pattern ids bound so far, in order, to undo */
    int trail_len;
    long steps; /* solve calls for the current anchor, against MATCH_STEPS */
} Matcher;

/* Commutative choices can make the search exponential in the pattern's size
 * (symmetric trees of Adds); beyond this many steps at one anchor the
 * rewrite fails rather than hang. */
enum { MATCH_STEPS = 1 << 20 };

static void undo_to(Matcher *m, int trail_len)
{
    while (m->trail_len > trail_len) {
        int id = m->trail[--m->trail_len];
        Node *gn = m->map[id];
        if (gn->id < m->graph_cap && m->rev[gn->id] && m->rev[gn->id]->id == id)
            m->rev[gn->id] = NULL;
        m->map[id] = NULL;
    }
}

/* Pushes the argument pairs of pn/gn, arguments swapped if asked, so that
 * the first argument is checked first. */
static bool push_args(Matcher *m, const Node *pn, Node *gn, bool swapped)
{
    for (int i = pn->num_args - 1; i >= 0; i--) {
        int gi = swapped ? 1 - i : i;
        const Node *pa = pn->args[i];
        Node *ga = gn->args[gi];
        if (!pa || !ga) {
            if (pa != ga)
                return false;
            continue;
        }
        m->pending[m->top++] = (Pair){pa, ga};
    }
    return true;
}

/* Checks every pending pair; on failure the pending stack and the bindings
 * are as they were on entry. */
static bool solve(Matcher *m)
{
    if (m->top == 0)
        return true;
    if (++m->steps > MATCH_STEPS)
        return false;
    Pair p = m->pending[--m->top];
    int top = m->top, trail = m->trail_len;
    Node *bound = m->map[p.pn->id];
    bool ok = false;
    if (bound) {
        ok = bound == p.gn && solve(m);
    } else {
        /* Leaves may share a graph node (Add(a, b) matches Add(x, x)); a node
         * bound to a call node is interior and bound to nothing else. */
        const Node *q = p.gn->id < m->graph_cap ? m->rev[p.gn->id] : NULL;
        bool shareable = !q || (is_leaf(q) && is_leaf(p.pn));
        if (shareable && node_matches_locally(p.pn, p.gn)) {
            m->map[p.pn->id] = p.gn;
            m->trail[m->trail_len++] = p.pn->id;
            if (!q && p.gn->id < m->graph_cap)
                m->rev[p.gn->id] = p.pn;
            int orders = m->commutative && p.pn->op && (p.pn->op->flags & FX_OPF_COMMUTATIVE) &&
                                 p.pn->num_args == 2
                             ? 2
                             : 1;
            for (int k = 0; k < orders && !ok; k++) {
                m->top = top;
                ok = push_args(m, p.pn, p.gn, k == 1) && solve(m);
            }
            if (!ok)
                undo_to(m, trail);
        }
    }
    if (!ok) {
        m->top = top;
        m->pending[m->top++] = p;
    }
    return ok;
}

/* --- one match --------------------------------------------------------------- */

static void match_clear(Match *x)
{
    free(x->nodes);
    free(x->placeholders);
    free(x->replacements);
    memset(x, 0, sizeof *x);
}

void match_list_free(MatchList *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->count; i++)
        match_clear(&l->items[i]);
    free(l->items);
    l->items = NULL;
    l->count = 0;
}

static bool in_match(const Match *x, const Graph *pattern, const Node *gn, bool interior_only)
{
    for (const Node *pn = pattern->root.next; pn != &pattern->root; pn = pn->next)
        if (x->nodes[pn->id] == gn && (!interior_only || is_call(pn)))
            return true;
    return false;
}

static bool returned_by_pattern(const Node *pattern_out, const Node *pn)
{
    for (int k = 0; k < pattern_out->num_args; k++)
        if (pattern_out->args[k] == pn)
            return true;
    return false;
}

/* No interior value but the returned ones is read outside the match. */
static bool self_contained(const Match *x, const Graph *pattern, const Node *pattern_out)
{
    for (const Node *pn = pattern->root.next; pn != &pattern->root; pn = pn->next) {
        if (!is_call(pn) || returned_by_pattern(pattern_out, pn))
            continue;
        const Node *gn = x->nodes[pn->id];
        for (int u = 0; u < gn->num_users; u++)
            if (!in_match(x, pattern, gn->users[u], true))
                return false;
    }
    return true;
}

/* taken: by graph id, the interior nodes of the matches kept so far. */
static bool overlaps(const Match *x, const bool *taken, const Graph *pattern)
{
    for (const Node *pn = pattern->root.next; pn != &pattern->root; pn = pn->next)
        if (is_call(pn) && taken[x->nodes[pn->id]->id])
            return true;
    return false;
}

static void take(const Match *x, bool *taken, const Graph *pattern)
{
    for (const Node *pn = pattern->root.next; pn != &pattern->root; pn = pn->next)
        if (is_call(pn))
            taken[x->nodes[pn->id]->id] = true;
}

/* The match rooted at gn, if any, into *x (arrays allocated). */
static FxStatus try_match(Matcher *m, const Node *pattern_out, Node *gn, Match *x, bool *found,
                          Diag *d)
{
    *found = false;
    m->top = 0;
    m->trail_len = 0;
    m->steps = 0;
    m->pending[m->top++] = (Pair){pattern_out->args[0], gn};
    if (!solve(m))
        return m->steps > MATCH_STEPS
                   ? diag_node_error(d, FX_ERR_UNSUPPORTED, gn,
                                     "matching the pattern here takes more than %d steps",
                                     MATCH_STEPS)
                   : FX_OK;
    int np = m->pattern->next_id, nph = graph_num_placeholders(m->pattern);
    x->anchor = gn;
    x->num_nodes = np;
    x->num_placeholders = nph;
    x->nodes = fx_alloc_array((size_t)np + 1, sizeof *x->nodes);
    x->placeholders = fx_alloc_array((size_t)nph + 1, sizeof *x->placeholders);
    if (!x->nodes || !x->placeholders) {
        undo_to(m, 0);
        match_clear(x);
        return diag_error(d, FX_ERR_NOMEM, "out of memory matching a pattern");
    }
    memcpy(x->nodes, m->map, (size_t)np * sizeof *x->nodes);
    for (int k = 0; k < nph; k++)
        x->placeholders[k] = m->map[graph_placeholder(m->pattern, k)->id];
    undo_to(m, 0);
    *found = true;
    return FX_OK;
}

/* --- checks on the pattern and the replacement ------------------------------- */

static FxStatus check_graphs(const Graph *pattern, const Graph *replacement, Diag *d)
{
    const Node *pout = graph_output_node(pattern), *rout = graph_output_node(replacement);
    if (!pout || pout->num_args == 0)
        return diag_error(d, FX_ERR_INVALID, "the pattern returns nothing");
    if (!rout || rout->num_args != pout->num_args)
        return diag_error(d, FX_ERR_INVALID,
                          "the replacement returns %d values, the pattern %d",
                          rout ? rout->num_args : 0, pout->num_args);
    if (graph_num_placeholders(pattern) != graph_num_placeholders(replacement))
        return diag_error(d, FX_ERR_INVALID,
                          "the replacement has %d placeholders, the pattern %d",
                          graph_num_placeholders(replacement), graph_num_placeholders(pattern));
    for (int k = 0; k < pout->num_args; k++)
        if (!pout->args[k] || !is_call(pout->args[k]))
            return diag_error(d, FX_ERR_INVALID,
                              "the pattern's returned values must be call nodes");
    for (const Node *n = pattern->root.next; n != &pattern->root; n = n->next)
        if (n->opcode == FX_OPCODE_CALL_MODULE)
            return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "call_module in a pattern");
    for (int k = 0; k < rout->num_args; k++)
        if (!rout->args[k])
            return diag_error(d, FX_ERR_INVALID, "the replacement returns None");
    for (const Node *n = replacement->root.next; n != &replacement->root; n = n->next)
        if (n->opcode == FX_OPCODE_GET_ATTR && !n->value)
            return diag_node_error(d, FX_ERR_INVALID, n,
                                   "a replacement constant needs a value (it has none)");
    return FX_OK;
}

/* Every pattern node must be reached from the anchor, or no match could bind
 * it; the walk marks nodes in `seen` (by id). */
static void reach(const Node *n, bool *seen)
{
    if (seen[n->id])
        return;
    seen[n->id] = true;
    for (int i = 0; i < n->num_args; i++)
        if (n->args[i])
            reach(n->args[i], seen);
}

static FxStatus check_reachable(const Graph *pattern, Diag *d)
{
    const Node *pout = graph_output_node(pattern);
    bool *seen = fx_alloc_array((size_t)pattern->next_id + 1, sizeof *seen);
    if (!seen)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    reach(pout->args[0], seen);
    FxStatus st = FX_OK;
    for (const Node *n = pattern->root.next; n != &pattern->root && st == FX_OK; n = n->next)
        if (n->opcode != FX_OPCODE_OUTPUT && !seen[n->id])
            st = diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                                 "pattern node is not an argument (transitively) of the "
                                 "pattern's first returned value");
    free(seen);
    return st;
}

/* --- replacing ------------------------------------------------------------------ */

/* Follows replaced values: a value an earlier replacement replaced is read
 * from its replacement. */
static Node *resolve(Node *n, Node *const *forward, int cap)
{
    for (int hops = 0; n && n->id < cap && forward[n->id] && hops <= cap; hops++)
        n = forward[n->id];
    return n;
}

/* Positions in list order, by id, of the graph's current nodes. */
static int *positions(const Graph *g)
{
    int *pos = fx_alloc_array((size_t)g->next_id + 1, sizeof *pos);
    if (!pos)
        return NULL;
    int k = 1;
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        pos[n->id] = k++;
    return pos;
}

/* Applies one kept match; *applied is false when no insertion point exists. */
static FxStatus apply_match(Graph *g, const Graph *pattern, const Graph *replacement, Match *x,
                            Node **forward, int cap, bool *applied, Diag *d)
{
    *applied = false;
    const Node *pout = graph_output_node(pattern);
    int nph = x->num_placeholders;
    for (int k = 0; k < nph; k++)
        x->placeholders[k] = resolve(x->placeholders[k], forward, cap);
    int *pos = positions(g);
    if (!pos)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    /* The earliest reader of the match's results; every input must come
     * before it. */
    Node *before = x->anchor;
    for (int k = 0; k < pout->num_args; k++) {
        Node *r = x->nodes[pout->args[k]->id];
        for (int u = 0; u < r->num_users; u++)
            if (!in_match(x, pattern, r->users[u], true) && pos[r->users[u]->id] < pos[before->id])
                before = r->users[u];
    }
    bool legal = true;
    for (int k = 0; k < nph; k++)
        legal &= pos[x->placeholders[k]->id] < pos[before->id];
    free(pos);
    if (!legal)
        return FX_OK;

    ValueMap vm = {0};
    if (!value_map_init(&vm, replacement))
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    for (int k = 0; k < nph; k++)
        value_map_set(&vm, graph_placeholder(replacement, k), x->placeholders[k]);
    /* node by node, since graph_copy would append before the output node */
    InsertPoint ip = insert_before(before);
    FxStatus st = FX_OK;
    const Node *rout = NULL;
    for (const Node *n = replacement->root.next; n != &replacement->root && st == FX_OK;
         n = n->next) {
        if (n->opcode == FX_OPCODE_OUTPUT)
            rout = n;
        else if (!(n->opcode == FX_OPCODE_PLACEHOLDER && value_map_get(&vm, n)) &&
                 !node_copy(&ip, n, &vm, d))
            st = FX_ERR_INVALID;
    }
    /* A replacement may only hold for some shapes (Mul(x, 1) -> x, unless
     * the 1 broadcasts x): a value of another type skips the match. */
    bool same_types = true;
    for (int k = 0; st == FX_OK && k < rout->num_args; k++) {
        const Node *old = x->nodes[pout->args[k]->id], *repl = value_map_get(&vm, rout->args[k]);
        if (old->shapes_known && repl->shapes_known && old->num_outputs == 1 &&
            repl->num_outputs == 1 && !type_equal(&old->out_types[0], &repl->out_types[0]))
            same_types = false;
    }
    if (st != FX_OK || !same_types) {
        /* nothing reads the copies yet: take them out again, last first */
        for (const Node *n = replacement->root.prev; n != &replacement->root; n = n->prev) {
            Node *copy = n->opcode == FX_OPCODE_PLACEHOLDER ? NULL : value_map_get(&vm, n);
            if (copy)
                graph_erase_node(g, copy);
        }
        value_map_free(&vm);
        return st;
    }
    x->num_replacements = rout->num_args;
    x->replacements = fx_alloc_array((size_t)rout->num_args + 1, sizeof *x->replacements);
    if (!x->replacements)
        st = diag_error(d, FX_ERR_NOMEM, "out of memory");
    for (int k = 0; st == FX_OK && k < rout->num_args; k++) {
        Node *old = x->nodes[pout->args[k]->id], *repl = value_map_get(&vm, rout->args[k]);
        x->replacements[k] = repl;
        if (node_replace_all_uses_with(old, repl) < 0)
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
        if (old->id < cap)
            forward[old->id] = repl;
    }
    value_map_free(&vm);
    if (st != FX_OK)
        return st;
    /* Pattern order is a topological order: erase from the last node back,
     * so a node's users are gone before it is looked at. */
    for (const Node *pn = pattern->root.prev; pn != &pattern->root; pn = pn->prev) {
        Node *gn = pn->opcode == FX_OPCODE_OUTPUT ? NULL : x->nodes[pn->id];
        if (gn && (is_call(pn) || pn->opcode == FX_OPCODE_GET_ATTR) && gn->num_users == 0 &&
            gn->prev)
            graph_erase_node(g, gn);
    }
    *applied = true;
    return FX_OK;
}

static FxStatus list_push(MatchList *l, int *cap, Match *x, Diag *d)
{
    if (l->count == *cap) {
        int c = *cap ? *cap * 2 : 8;
        Match *v = fx_realloc_array(l->items, (size_t)c, sizeof *v);
        if (!v)
            return diag_error(d, FX_ERR_NOMEM, "out of memory");
        l->items = v;
        *cap = c;
    }
    l->items[l->count++] = *x;
    memset(x, 0, sizeof *x);
    return FX_OK;
}

static FxStatus find_matches(Graph *g, const Graph *pattern, const RewriteOptions *o,
                             MatchList *kept, Diag *d)
{
    const Node *pout = graph_output_node(pattern);
    int pending_cap = 1;
    for (const Node *n = pattern->root.next; n != &pattern->root; n = n->next)
        pending_cap += n->num_args;
    Matcher m = {.pattern = pattern, .commutative = o && o->commutative,
                 .graph_cap = g->next_id, .pending_cap = pending_cap};
    m.map = fx_alloc_array((size_t)pattern->next_id + 1, sizeof *m.map);
    m.trail = fx_alloc_array((size_t)pattern->next_id + 1, sizeof *m.trail);
    m.rev = fx_alloc_array((size_t)g->next_id + 1, sizeof *m.rev);
    m.pending = fx_alloc_array((size_t)pending_cap, sizeof *m.pending);
    bool *taken = fx_alloc_array((size_t)g->next_id + 1, sizeof *taken);
    FxStatus st = FX_OK;
    if (!m.map || !m.trail || !m.rev || !m.pending || !taken)
        st = diag_error(d, FX_ERR_NOMEM, "out of memory");
    int cap = 0;
    for (Node *gn = g->root.next; gn != &g->root && st == FX_OK; gn = gn->next) {
        if (!is_call(gn))
            continue;
        Match x = {0};
        bool found = false;
        if ((st = try_match(&m, pout, gn, &x, &found, d)) != FX_OK || !found)
            continue;
        if (self_contained(&x, pattern, pout) && !overlaps(&x, taken, pattern) &&
            (!o || !o->filter || o->filter(&x, g, pattern, o->user))) {
            take(&x, taken, pattern);
            st = list_push(kept, &cap, &x, d);
        }
        match_clear(&x);
    }
    free(m.map);
    free(m.trail);
    free(m.rev);
    free(m.pending);
    free(taken);
    return st;
}

FxStatus replace_pattern(Graph *g, const Graph *pattern, const Graph *replacement,
                         const RewriteOptions *o, MatchList *matches, Diag *d)
{
    if (matches)
        memset(matches, 0, sizeof *matches);
    FxStatus st = check_graphs(pattern, replacement, d);
    if (st == FX_OK)
        st = check_reachable(pattern, d);
    MatchList kept = {0};
    if (st == FX_OK)
        st = find_matches(g, pattern, o, &kept, d);
    int cap = g->next_id;
    Node **forward = st == FX_OK ? fx_alloc_array((size_t)cap + 1, sizeof *forward) : NULL;
    if (st == FX_OK && !forward)
        st = diag_error(d, FX_ERR_NOMEM, "out of memory");
    int applied_count = 0;
    for (int i = 0; i < kept.count && st == FX_OK; i++) {
        bool applied = false;
        Match *x = &kept.items[i];
        st = apply_match(g, pattern, replacement, x, forward, cap, &applied, d);
        if (applied) {
            Match moved = *x;
            memset(x, 0, sizeof *x);
            kept.items[applied_count++] = moved;
        } else {
            match_clear(x);
        }
    }
    for (int i = applied_count; i < kept.count; i++)
        match_clear(&kept.items[i]);
    kept.count = applied_count;
    free(forward);
    if (st == FX_OK && matches)
        *matches = kept;
    else
        match_list_free(&kept);
    return st;
}
