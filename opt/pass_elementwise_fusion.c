/*
 * pass_elementwise_fusion.c - fuses maximal trees of float32 elementwise
 * ops into one FusedElementwise call_module (ir/ops/fused_elementwise.c),
 * which the code generator emits as one loop nest without intermediate
 * buffers.
 *
 * Reductions first: each Softmax, LogSoftmax, LayerNormalization and
 * ReduceSum/Mean/Max/Min over the innermost axes takes the elementwise ops
 * that only it reads (its prologue) and the chain of elementwise ops that
 * consume its result (its epilogue) into a FusedReduction call_module
 * (ir/ops/fused_reduction.c), one loop over the rows with a few passes per
 * row; see fuse_reductions.  A group its emitter cannot write (an operand
 * that repeats along the row, say) is left alone, and so is a lone
 * reduction, which keeps its runtime kernel.  The elementwise grouping
 * below then runs on what is left.
 *
 * Groups are grown from their result, walking the graph backwards: a node
 * that is fusable and not yet in a group starts one; an argument joins when
 * it is fusable and every one of its users is already in the group, until
 * nothing more joins.  So every interior value is used only inside its
 * group and the group has one result (which may have many users).  Groups
 * of a single op are left alone.  The fused node goes where the result was:
 * its inputs are all defined before the result, and its users come after.
 *
 * The body's placeholders are the group's external inputs in order of first
 * use (graph order, argument order); float32 scalar constants are copied
 * into the body as get_attr nodes instead, so the loop reads them as
 * literals.  An input that does not broadcast to the result's shape (it
 * cannot happen with broadcasting ops, but the loop relies on it) makes the
 * group stay unfused.
 */
#include <stdlib.h>
#include <string.h>

#include "../ir/ops/ops.h"
#include "opt.h"

typedef struct Group {
    int *group_of;  /* by node id: group number + 1, 0 = none */
    int num_ids;    /* its length: nodes made during the pass (fused
                     * calls) have larger ids and belong to no group */
    Node **members; /* graph order once sorted */
    int count, cap;
    Node **inputs;  /* external values, first use order */
    int num_inputs;
} Group;

/* A constant the body holds itself instead of taking it as an argument: a
 * float32 scalar (the loop reads it as a literal) or the int64 axes of a
 * Reduce. */
static bool copied_into_body(const Node *a)
{
    const Tensor *v = node_const_value(a);
    return a->opcode == FX_OPCODE_GET_ATTR && v &&
           ((v->type.dtype == FXRT_DTYPE_FLOAT32 && tensor_numel(v) == 1) ||
            (v->type.dtype == FXRT_DTYPE_INT64 && tensor_numel(v) <= FX_MAX_RANK));
}

static bool broadcasts_to(const TensorType *t, const TensorType *out)
{
    if (t->rank > out->rank)
        return false;
    for (int i = 0; i < t->rank; i++) {
        int64_t d = t->dims[t->rank - 1 - i], o = out->dims[out->rank - 1 - i];
        if (d != o && d != 1)
            return false;
    }
    return true;
}

static bool in_group(const Group *gr, const Node *n, int tag)
{
    return n->id >= 0 && n->id < gr->num_ids && gr->group_of[n->id] == tag;
}

static bool push_member(Group *gr, Node *n, int tag)
{
    if (gr->count == gr->cap) {
        int cap = gr->cap ? gr->cap * 2 : 16;
        Node **m = fx_realloc_array(gr->members, (size_t)cap, sizeof *m);
        if (!m)
            return false;
        gr->members = m;
        gr->cap = cap;
    }
    gr->members[gr->count++] = n;
    gr->group_of[n->id] = tag;
    return true;
}

/* Grows the group of `root` (already pushed) to its fixpoint. */
static bool grow(Group *gr, int tag)
{
    for (bool added = true; added;) {
        added = false;
        for (int m = 0; m < gr->count; m++) {
            Node *n = gr->members[m];
            for (int i = 0; i < n->num_args; i++) {
                Node *a = n->args[i];
                if (!a || a->id >= gr->num_ids || gr->group_of[a->id] != 0 ||
                    !fused_elementwise_supports(a))
                    continue;
                bool inside = true;
                for (int u = 0; u < a->num_users && inside; u++)
                    inside = in_group(gr, a->users[u], tag);
                if (!inside)
                    continue;
                if (!push_member(gr, a, tag))
                    return false;
                added = true;
            }
        }
    }
    return true;
}

static int by_position(const void *x, const void *y)
{
    const Node *a = *(Node *const *)x, *b = *(Node *const *)y;
    return a->pass_data < b->pass_data ? -1 : a->pass_data > b->pass_data;
}

/* The group's external inputs, deduplicated, in order of first use. */
static bool collect_inputs(Group *gr, int tag)
{
    free(gr->inputs);
    gr->num_inputs = 0;
    int total = 0;
    for (int m = 0; m < gr->count; m++)
        total += gr->members[m]->num_args;
    gr->inputs = fx_alloc_array((size_t)total + 1, sizeof *gr->inputs);
    if (!gr->inputs)
        return false;
    for (int m = 0; m < gr->count; m++) {
        Node *n = gr->members[m];
        for (int i = 0; i < n->num_args; i++) {
            Node *a = n->args[i];
            if (!a || in_group(gr, a, tag))
                continue;
            bool seen = false;
            for (int k = 0; k < gr->num_inputs && !seen; k++)
                seen = gr->inputs[k] == a;
            if (!seen)
                gr->inputs[gr->num_inputs++] = a;
        }
    }
    return true;
}

/* Builds the body and the call_module of module kind `kind` in place of the
 * group's result.  A FusedReduction body its emitter cannot write leaves
 * the graph as it was (*fused false). */
static FxStatus fuse_group(Graph *g, Group *gr, Node *root, const OpDef *kind, bool *fused,
                           Diag *d)
{
    *fused = false;
    Graph *body = graph_new_like(g);
    ValueMap map = {0};
    Node **args = fx_alloc_array((size_t)gr->num_inputs + 1, sizeof *args);
    int num_args = 0;
    FxStatus st = FX_OK;
    if (!body || !args || !value_map_init(&map, g)) {
        st = diag_error(d, FX_ERR_NOMEM, "out of memory fusing %s", root->name);
        goto fail;
    }
    /* Placeholders go before the first constant: lint wants them first. */
    Node *first_constant = NULL;
    for (int k = 0; k < gr->num_inputs; k++) {
        Node *a = gr->inputs[k];
        Node *b;
        if (copied_into_body(a)) {
            Tensor *v = tensor_clone(node_const_value(a), d);
            b = v ? graph_create_constant(body, NULL, a->name, v, d) : NULL;
            if (!b) {
                st = FX_ERR_NOMEM;
                goto fail;
            }
            if (!first_constant)
                first_constant = b;
        } else {
            b = graph_create_node(body, first_constant, FX_OPCODE_PLACEHOLDER, a->name, a->name,
                                  NULL, 0);
            if (b && node_set_num_outputs(b, 1)) {
                b->out_types[0] = a->out_types[0];
                b->shapes_known = true;
            }
            args[num_args++] = a;
        }
        if (!b || !b->shapes_known) {
            st = diag_error(d, FX_ERR_NOMEM, "out of memory fusing %s", root->name);
            goto fail;
        }
        value_map_set(&map, a, b);
    }
    InsertPoint ip = {.graph = body, .before = &body->root};
    for (int m = 0; m < gr->count; m++)
        if (!node_copy(&ip, gr->members[m], &map, d)) {
            st = FX_ERR_INVALID;
            goto fail;
        }
    Node *result = value_map_get(&map, root);
    if (!graph_create_node(body, NULL, FX_OPCODE_OUTPUT, "output", "output", &result, 1)) {
        st = diag_error(d, FX_ERR_NOMEM, "out of memory fusing %s", root->name);
        goto fail;
    }
    if ((st = graph_propagate_shapes(body, NULL, 0, d)) != FX_OK)
        goto fail;
    if (kind == &fx_op_FusedReduction && !fused_reduction_body_ok(body))
        goto fail;

    char hint[200];
    snprintf(hint, sizeof hint, "fused_%s", root->name);
    Node *f = graph_create_module(g, root, kind, hint, args, num_args);
    if (!f) {
        st = diag_error(d, FX_ERR_NOMEM, "out of memory fusing %s", root->name);
        goto fail;
    }
    f->body = body;
    body = NULL;
    if ((st = op_apply_attr_specs(f->op, f, d)) != FX_OK || !node_set_num_outputs(f, 1) ||
        (st = node_infer_shapes(f, d)) != FX_OK) {
        if (st == FX_OK)
            st = diag_node_error(d, FX_ERR_NOMEM, f, "out of memory");
        graph_erase_node(g, f);
        goto fail;
    }
    if (node_replace_all_uses_with(root, f) < 0) {
        st = diag_node_error(d, FX_ERR_NOMEM, f, "out of memory");
        goto fail;
    }
    *fused = true;
fail:
    graph_free(body);
    value_map_free(&map);
    free(args);
    return st;
}

/* --- reductions ---------------------------------------------------------------- */

/* True if a may join the group under `tag`: fusable, in no group yet, and
 * every user of it carries `tag` or is `also`. */
static bool joins(const Group *gr, int ids, const Node *a, int tag, const Node *also)
{
    if (!a || a->id >= ids || gr->group_of[a->id] != 0 || !fused_elementwise_supports(a))
        return false;
    for (int u = 0; u < a->num_users; u++) {
        const Node *user = a->users[u];
        if (user != also && !(user->id < ids && gr->group_of[user->id] == tag))
            return false;
    }
    return true;
}

/* Adds the arguments of the members tagged `tag` that may join under it,
 * until nothing more joins. */
static bool grow_tagged(Group *gr, int ids, int tag, const Node *also)
{
    for (bool added = true; added;) {
        added = false;
        for (int m = 0; m < gr->count; m++) {
            Node *n = gr->members[m];
            if (gr->group_of[n->id] != tag)
                continue;
            for (int i = 0; i < n->num_args; i++)
                if (joins(gr, ids, n->args[i], tag, also)) {
                    if (!push_member(gr, n->args[i], tag))
                        return false;
                    added = true;
                }
        }
    }
    return true;
}

/* Fuses each reduction FusedReduction supports with its elementwise
 * neighbours: the epilogue is the chain of single users from it, of the
 * reduction's shape or, when it kept its dims, of its input's (the result
 * broadcast back over the row; the last is the group's result), plus
 * elementwise values read only by that chain; the prologue is the data
 * input and what it is computed from, read only by the reduction and the
 * prologue itself (a value also read elsewhere stays outside).  Groups are
 * rewritten as they are found; they never share a node, and the nodes they
 * leave dead are erased by the caller. */
static FxStatus fuse_reductions(Graph *g, int *changes, Diag *d)
{
    Group gr = {0};
    int ids = g->next_id, tag = 0;
    gr.group_of = fx_alloc_array((size_t)ids + 1, sizeof *gr.group_of);
    gr.num_ids = ids;
    if (!gr.group_of)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    intptr_t pos = 0;
    graph_for_each(g, n) n->pass_data = (void *)++pos;

    FxStatus st = FX_OK;
    graph_for_each(g, red) {
        int first_axis;
        if (red->id >= ids || gr.group_of[red->id] != 0 ||
            !fused_reduction_supports(red, &first_axis))
            continue;
        int t_red = ++tag, t_epi = ++tag, t_pro = ++tag;
        gr.count = 0;
        Node *root = red;
        bool ok = push_member(&gr, red, t_red);
        /* A result with kept dims may be broadcast back over the row. */
        const TensorType *x = node_input_type(red, 0), *y = &red->out_types[0];
        for (Node *u; ok && (u = node_fusable_user(root));) {
            if (u->id >= ids || gr.group_of[u->id] != 0 || !fused_elementwise_supports(u) ||
                !(type_equal(&u->out_types[0], y) ||
                  (y->rank == x->rank && type_equal(&u->out_types[0], x))))
                break;
            ok = push_member(&gr, u, t_epi);
            root = u;
        }
        ok = ok && grow_tagged(&gr, ids, t_epi, NULL);
        if (ok && joins(&gr, ids, red->args[0], t_pro, red))
            ok = push_member(&gr, red->args[0], t_pro) && grow_tagged(&gr, ids, t_pro, red);
        if (!ok) {
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
            break;
        }
        if (gr.count < 2)
            continue; /* a lone reduction keeps its runtime kernel */
        qsort(gr.members, (size_t)gr.count, sizeof *gr.members, by_position);
        for (int m = 0; m < gr.count; m++)
            gr.group_of[gr.members[m]->id] = t_red;
        if (!collect_inputs(&gr, t_red)) {
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
            break;
        }
        bool fused;
        st = fuse_group(g, &gr, root, &fx_op_FusedReduction, &fused, d);
        *changes += fused;
        if (st != FX_OK)
            break;
    }
    free(gr.members);
    free(gr.inputs);
    free(gr.group_of);
    graph_for_each(g, n) n->pass_data = NULL;
    return st;
}

FxStatus pass_elementwise_fusion(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = fuse_reductions(g, &r->changes, d);
    if (st != FX_OK)
        return st;
    if (r->changes > 0)
        graph_eliminate_dead_code(g);
    Group gr = {0};
    int ids = g->next_id;
    gr.group_of = fx_alloc_array((size_t)ids + 1, sizeof *gr.group_of);
    gr.num_ids = ids;
    if (!gr.group_of)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    /* positions for sorting members into graph order */
    intptr_t pos = 0;
    graph_for_each(g, n) n->pass_data = (void *)++pos;

    int tag = 0;
    Node **roots = NULL;
    int num_roots = 0;
    /* First decide every group (the graph is unchanged meanwhile), then
     * rewrite; ids of nodes created by the rewrite are beyond `ids`. */
    Node ***groups = NULL;
    int *group_sizes = NULL;
    for (Node *n = g->root.prev; n != &g->root && st == FX_OK; n = n->prev) {
        if (n->id >= ids || gr.group_of[n->id] != 0 || !fused_elementwise_supports(n))
            continue;
        tag++;
        gr.count = 0;
        if (!push_member(&gr, n, tag) || !grow(&gr, tag)) {
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
            break;
        }
        if (gr.count < 2) {
            gr.group_of[n->id] = -1; /* alone: left as is */
            continue;
        }
        qsort(gr.members, (size_t)gr.count, sizeof *gr.members, by_position);
        Node **copy = fx_alloc_array((size_t)gr.count, sizeof *copy);
        Node **nr = fx_realloc_array(roots, (size_t)(num_roots + 1), sizeof *nr);
        if (nr)
            roots = nr;
        Node ***ng = fx_realloc_array(groups, (size_t)(num_roots + 1), sizeof *ng);
        if (ng)
            groups = ng;
        int *ns = fx_realloc_array(group_sizes, (size_t)(num_roots + 1), sizeof *ns);
        if (ns)
            group_sizes = ns;
        if (!copy || !nr || !ng || !ns) {
            free(copy);
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(copy, gr.members, (size_t)gr.count * sizeof *copy);
        roots[num_roots] = n;
        groups[num_roots] = copy;
        group_sizes[num_roots] = gr.count;
        num_roots++;
        /* member tags stay, so later roots do not take these nodes */
        for (int m = 0; m < gr.count; m++)
            gr.group_of[copy[m]->id] = tag;
    }
    /* Rewrite in graph order (roots were found last-first). */
    Node **work = gr.members;
    for (int k = num_roots - 1; k >= 0 && st == FX_OK; k--) {
        Node *root = roots[k];
        gr.members = groups[k];
        gr.count = group_sizes[k];
        int gtag = gr.group_of[root->id];
        if (!collect_inputs(&gr, gtag)) {
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
            break;
        }
        bool ok = true;
        for (int i = 0; i < gr.num_inputs && ok; i++)
            ok = gr.inputs[i]->shapes_known && gr.inputs[i]->num_outputs == 1 &&
                 broadcasts_to(&gr.inputs[i]->out_types[0], &root->out_types[0]);
        if (!ok)
            continue;
        bool fused;
        st = fuse_group(g, &gr, root, &fx_op_FusedElementwise, &fused, d);
        r->changes += fused;
    }
    for (int k = 0; k < num_roots; k++)
        free(groups[k]);
    free(work);
    free(groups);
    free(group_sizes);
    free(roots);
    free(gr.inputs);
    free(gr.group_of);
    graph_for_each(g, n) n->pass_data = NULL;
    return pass_finish(g, r, st);
}
