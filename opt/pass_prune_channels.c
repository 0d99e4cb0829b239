/*
 * pass_prune_channels.c - structured pruning: removes the output channels
 * of Conv, Gemm and MatMul layers with the least L1 norm, and the matching
 * inputs of every layer that reads them, so the pruned model is really
 * smaller and does fewer multiply-accumulates.
 *
 * It runs on the imported graph (plain ONNX ops, shapes known), before the
 * other passes, because there the channel axis is still visible through
 * BatchNormalization, activations, pools, residual Adds and Concat.
 *
 * Every prunable layer output opens a "space" of C channels.  A forward
 * walk gives each value the layout of its channel axis: the axis and the
 * spaces laid along it, each with `inner`, the contiguous elements one
 * channel spans (1, or H*W after a Flatten before a Gemm).  Ops that keep
 * channels where they are (activations, BatchNormalization, pools,
 * depthwise convolutions) pass the layout on; Concat along the channel
 * axis concatenates layouts; an elementwise op over two channel-carrying
 * operands (a residual Add) unites their spaces, so the two producers lose
 * the same channels and the sum stays consistent.  A space that reaches a
 * graph output, a non-constant operand, a grouped convolution or any op
 * this pass does not understand is kept whole, with every space united
 * with it.
 *
 * Each group of united spaces keeps ceil((1 - fraction) * C) channels
 * (at least one), those of the largest L1 norm summed over the group's
 * producers, in their original order.  Then the producers' weights and
 * biases are cut along their output axis, and along the input axis every
 * reader's weights (expanded by `inner` after a Flatten), BatchNorm
 * parameters, per-channel constants of elementwise ops, a depthwise
 * convolution's weights and its `group`, and a flattening Reshape's shape.
 * New constants replace the old ones (an initializer may be shared); the
 * old ones are left to dead-code elimination.  Graph inputs and outputs
 * keep their shapes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opt.h"

/* --- spaces and layouts ------------------------------------------------------- */

typedef struct Space {
    int parent;     /* union-find */
    int64_t size;   /* channels */
    bool whole;     /* kept whole (on the root) */
    const char *why; /* the first reason it was kept whole (static text) */
    const Node *why_node;
} Space;

typedef struct Segment {
    int space;
    int64_t inner; /* contiguous elements per channel along the axis */
} Segment;

typedef struct Layout {
    int axis;
    int num_segments;
    Segment *segments;
} Layout;

typedef enum EditKind {
    EDIT_PRODUCER,  /* weight of a layer making a space: score and cut */
    EDIT_SLICE,     /* a constant input cut along `axis` by `layout` */
    EDIT_GROUP,     /* a depthwise Conv's group = the layout's new channel count */
    EDIT_RESHAPE    /* a flattening Reshape's shape from its output layout */
} EditKind;

typedef struct Edit {
    EditKind kind;
    Node *node;
    int slot, axis;
    const Layout *layout;
} Edit;

typedef struct Pruner {
    Graph *g;
    Diag *d;
    Space *spaces;
    int num_spaces, cap_spaces;
    Layout **by_id; /* [g->next_id]: the layout of each value, NULL: none */
    int num_ids;
    Layout **owned; /* every layout made, to free */
    int num_owned, cap_owned;
    Edit *edits;
    int num_edits, cap_edits;
} Pruner;

static int space_find(Pruner *p, int s)
{
    while (p->spaces[s].parent != s) {
        p->spaces[s].parent = p->spaces[p->spaces[s].parent].parent;
        s = p->spaces[s].parent;
    }
    return s;
}

static void space_keep_whole(Pruner *p, int s, const Node *n, const char *why)
{
    Space *r = &p->spaces[space_find(p, s)];
    if (!r->whole) {
        r->whole = true;
        r->why = why;
        r->why_node = n;
    }
}

static void space_union(Pruner *p, int a, int b, const Node *n)
{
    a = space_find(p, a);
    b = space_find(p, b);
    if (a == b)
        return;
    Space *sa = &p->spaces[a], *sb = &p->spaces[b];
    bool whole = sa->whole || sb->whole;
    const char *why = sa->whole ? sa->why : sb->why;
    const Node *why_node = sa->whole ? sa->why_node : sb->why_node;
    sb->parent = a;
    if (whole) {
        sa->whole = true;
        sa->why = why;
        sa->why_node = why_node;
    }
    if (sa->size != sb->size)
        space_keep_whole(p, a, n, "operands of different channel counts");
}

static FxStatus nomem(Pruner *p)
{
    return diag_error(p->d, FX_ERR_NOMEM, "out of memory");
}

static int space_new(Pruner *p, int64_t size)
{
    if (p->num_spaces == p->cap_spaces) {
        int cap = p->cap_spaces ? 2 * p->cap_spaces : 16;
        Space *s = fx_realloc_array(p->spaces, (size_t)cap, sizeof *s);
        if (!s)
            return -1;
        p->spaces = s;
        p->cap_spaces = cap;
    }
    int k = p->num_spaces++;
    p->spaces[k] = (Space){.parent = k, .size = size};
    return k;
}

static Layout *layout_new(Pruner *p, int axis, int num_segments)
{
    if (p->num_owned == p->cap_owned) {
        int cap = p->cap_owned ? 2 * p->cap_owned : 16;
        Layout **o = fx_realloc_array(p->owned, (size_t)cap, sizeof *o);
        if (!o)
            return NULL;
        p->owned = o;
        p->cap_owned = cap;
    }
    Layout *l = fx_alloc_array(1, sizeof *l);
    Segment *s = fx_alloc_array((size_t)num_segments + 1, sizeof *s);
    if (!l || !s) {
        free(l);
        free(s);
        return NULL;
    }
    l->axis = axis;
    l->num_segments = num_segments;
    l->segments = s;
    p->owned[p->num_owned++] = l;
    return l;
}

static Layout *layout_copy(Pruner *p, const Layout *src, int axis)
{
    Layout *l = layout_new(p, axis, src->num_segments);
    if (l)
        memcpy(l->segments, src->segments, (size_t)src->num_segments * sizeof *l->segments);
    return l;
}

static FxStatus add_edit(Pruner *p, EditKind kind, Node *n, int slot, int axis, const Layout *l)
{
    if (p->num_edits == p->cap_edits) {
        int cap = p->cap_edits ? 2 * p->cap_edits : 32;
        Edit *e = fx_realloc_array(p->edits, (size_t)cap, sizeof *e);
        if (!e)
            return nomem(p);
        p->edits = e;
        p->cap_edits = cap;
    }
    p->edits[p->num_edits++] = (Edit){kind, n, slot, axis, l};
    return FX_OK;
}

static const Layout *layout_of(const Pruner *p, const Node *v)
{
    return v && v->id < p->num_ids ? p->by_id[v->id] : NULL;
}

static void keep_layout_whole(Pruner *p, const Layout *l, const Node *n, const char *why)
{
    for (int k = 0; l && k < l->num_segments; k++)
        space_keep_whole(p, l->segments[k].space, n, why);
}

/* Every channel-carrying argument of n kept whole. */
static void keep_args_whole(Pruner *p, const Node *n, const char *why)
{
    for (int i = 0; i < n->num_args; i++)
        keep_layout_whole(p, layout_of(p, n->args[i]), n, why);
}

static int64_t layout_channels(const Pruner *p, const Layout *l)
{
    int64_t c = 0;
    for (int k = 0; k < l->num_segments; k++)
        c += p->spaces[l->segments[k].space].size * l->segments[k].inner;
    return c;
}

/* Same axis, same spaces' sizes and inner counts, segment by segment. */
static bool layouts_match(const Pruner *p, const Layout *a, int axis_a, const Layout *b,
                          int axis_b)
{
    if (axis_a != axis_b || a->num_segments != b->num_segments)
        return false;
    for (int k = 0; k < a->num_segments; k++)
        if (a->segments[k].inner != b->segments[k].inner ||
            p->spaces[a->segments[k].space].size != p->spaces[b->segments[k].space].size)
            return false;
    return true;
}

static const Tensor *const_f32(const Node *v)
{
    return v ? fold_const_f32(v) : NULL;
}

/* --- the walk ------------------------------------------------------------------- */

static bool is_passthrough(const Node *n)
{
    static const OpDef *const ops[] = {
        &fx_op_Relu, &fx_op_LeakyRelu, &fx_op_Sigmoid, &fx_op_Tanh, &fx_op_HardSigmoid,
        &fx_op_HardSwish, &fx_op_Elu, &fx_op_Selu, &fx_op_Celu, &fx_op_Softplus, &fx_op_Abs,
        &fx_op_Neg, &fx_op_ThresholdedRelu, &fx_op_Identity, &fx_op_Dropout};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        if (n->op == ops[k])
            return n->num_outputs == 1;
    return false;
}

static bool is_pool(const Node *n)
{
    return (n->op == &fx_op_MaxPool || n->op == &fx_op_AveragePool || n->op == &fx_op_LpPool ||
            n->op == &fx_op_GlobalAveragePool || n->op == &fx_op_GlobalMaxPool ||
            n->op == &fx_op_GlobalLpPool) &&
           n->num_outputs == 1;
}

static bool is_binary_elementwise(const Node *n)
{
    return n->op == &fx_op_Add || n->op == &fx_op_Sub || n->op == &fx_op_Mul ||
           n->op == &fx_op_Div || n->op == &fx_op_Max || n->op == &fx_op_Min;
}

/* The output of layer n as a new space of `size` channels at `axis`,
 * produced by its weight `slot` cut along `w_axis` (and its bias). */
static FxStatus open_space(Pruner *p, Node *n, int64_t size, int axis, int slot, int w_axis,
                           int bias_slot)
{
    int s = space_new(p, size);
    Layout *l = s < 0 ? NULL : layout_new(p, axis, 1);
    if (!l)
        return nomem(p);
    l->segments[0] = (Segment){s, 1};
    p->by_id[n->id] = l;
    FxStatus st = add_edit(p, EDIT_PRODUCER, n, slot, w_axis, l);
    if (st == FX_OK && bias_slot < n->num_args && n->args[bias_slot]) {
        const Tensor *b = const_f32(n->args[bias_slot]);
        if (b && b->type.rank >= 1 && b->type.dims[b->type.rank - 1] == size)
            st = add_edit(p, EDIT_SLICE, n, bias_slot, b->type.rank - 1, l);
        else if (!b || (b->type.rank >= 1 && b->type.dims[b->type.rank - 1] != 1))
            space_keep_whole(p, s, n, "a bias that is not a per-channel constant");
    }
    return st;
}

static FxStatus visit_conv(Pruner *p, Node *n)
{
    const Layout *in = layout_of(p, n->args[0]);
    const Tensor *w = n->num_args > 1 ? const_f32(n->args[1]) : NULL;
    const TensorType *x = node_input_type(n, 0);
    int64_t group = node_attr_int(n, "group", 1);
    if (!w || w->type.rank < 3 || !x || x->rank != w->type.rank) {
        keep_args_whole(p, n, "a Conv without constant float weights");
        return FX_OK;
    }
    int64_t m = w->type.dims[0], c = x->dims[1];
    if (in && in->axis != 1) {
        keep_layout_whole(p, in, n, "a Conv reading channels on another axis");
        in = NULL;
    }
    if (group == 1) {
        FxStatus st = in ? add_edit(p, EDIT_SLICE, n, 1, 1, in) : FX_OK;
        return st == FX_OK ? open_space(p, n, m, 1, 1, 0, 2) : st;
    }
    if (group == c && m == c && w->type.dims[1] == 1 && in) {
        /* depthwise: channel k in, channel k out */
        Layout *out = layout_copy(p, in, 1);
        if (!out)
            return nomem(p);
        p->by_id[n->id] = out;
        FxStatus st = add_edit(p, EDIT_SLICE, n, 1, 0, in);
        if (st == FX_OK)
            st = add_edit(p, EDIT_GROUP, n, 0, 0, in);
        if (st == FX_OK && n->num_args > 2 && n->args[2]) {
            if (const_f32(n->args[2]))
                st = add_edit(p, EDIT_SLICE, n, 2, 0, in);
            else
                keep_layout_whole(p, in, n, "a depthwise Conv with a non-constant bias");
        }
        return st;
    }
    keep_layout_whole(p, in, n, "a grouped Conv");
    return FX_OK;
}

/* Gemm (transA = 0) and MatMul with constant 2-D weights. */
static FxStatus visit_dense(Pruner *p, Node *n)
{
    const Layout *in = layout_of(p, n->args[0]);
    const Tensor *w = n->num_args > 1 ? const_f32(n->args[1]) : NULL;
    const TensorType *x = node_input_type(n, 0);
    bool gemm = n->op == &fx_op_Gemm;
    bool trans_b = gemm && node_attr_int(n, "transB", 0);
    if (!w || w->type.rank != 2 || !x || x->rank < 1 ||
        (gemm && (node_attr_int(n, "transA", 0) || x->rank != 2))) {
        keep_args_whole(p, n, "a Gemm/MatMul without constant 2-D weights");
        return FX_OK;
    }
    if (in && in->axis != x->rank - 1) {
        keep_layout_whole(p, in, n, "a Gemm/MatMul reading channels on another axis");
        in = NULL;
    }
    FxStatus st = in ? add_edit(p, EDIT_SLICE, n, 1, trans_b ? 1 : 0, in) : FX_OK;
    int64_t out = w->type.dims[trans_b ? 0 : 1];
    if (st == FX_OK)
        st = open_space(p, n, out, n->out_types[0].rank - 1, 1, trans_b ? 0 : 1,
                        gemm ? 2 : n->num_args);
    return st;
}

static FxStatus visit_batchnorm(Pruner *p, Node *n)
{
    const Layout *in = layout_of(p, n->args[0]);
    if (!in)
        return FX_OK;
    bool ok = in->axis == 1 && n->num_args == 5 && n->num_outputs == 1;
    for (int i = 1; ok && i < 5; i++) {
        const Tensor *t = const_f32(n->args[i]);
        ok = t && t->type.rank == 1;
    }
    if (!ok) {
        keep_layout_whole(p, in, n, "a BatchNormalization without per-channel constants");
        return FX_OK;
    }
    Layout *out = layout_copy(p, in, 1);
    if (!out)
        return nomem(p);
    p->by_id[n->id] = out;
    FxStatus st = FX_OK;
    for (int i = 1; i < 5 && st == FX_OK; i++)
        st = add_edit(p, EDIT_SLICE, n, i, 0, in);
    return st;
}

/* Add, Sub, Mul, Div, Max, Min: channel-carrying operands are united;
 * constants are cut where they vary along the channel axis. */
static FxStatus visit_binary(Pruner *p, Node *n)
{
    int rank = n->out_types[0].rank;
    const Layout *first = NULL;
    int axis = -1;
    bool ok = true;
    for (int i = 0; i < n->num_args; i++) {
        const Layout *l = layout_of(p, n->args[i]);
        const TensorType *t = node_input_type(n, i);
        if (!l || !t)
            continue;
        int a = l->axis + (rank - t->rank);
        if (!first) {
            first = l;
            axis = a;
        } else if (layouts_match(p, first, axis, l, a)) {
            for (int k = 0; k < l->num_segments; k++)
                space_union(p, first->segments[k].space, l->segments[k].space, n);
        } else {
            ok = false;
        }
    }
    if (!first)
        return FX_OK;
    int64_t channels = layout_channels(p, first);
    FxStatus st = FX_OK;
    for (int i = 0; ok && i < n->num_args && st == FX_OK; i++) {
        if (layout_of(p, n->args[i]))
            continue;
        const Tensor *c = const_f32(n->args[i]);
        const TensorType *t = node_input_type(n, i);
        if (!c || !t) {
            ok = false; /* a non-constant operand cannot lose channels */
            break;
        }
        int a = axis - (rank - t->rank);
        if (a < 0 || t->dims[a] == 1)
            continue;
        if (t->dims[a] == channels)
            st = add_edit(p, EDIT_SLICE, n, i, a, first);
        else
            ok = false;
    }
    if (st != FX_OK)
        return st;
    if (!ok) {
        keep_args_whole(p, n, "an elementwise op whose operands do not line up");
        return FX_OK;
    }
    Layout *out = layout_copy(p, first, axis);
    if (!out)
        return nomem(p);
    p->by_id[n->id] = out;
    return FX_OK;
}

static FxStatus visit_concat(Pruner *p, Node *n)
{
    int rank = n->out_types[0].rank;
    int64_t axis = node_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += rank;
    int carrying = 0, segments = 0;
    bool along = true;
    for (int i = 0; i < n->num_args; i++) {
        const Layout *l = layout_of(p, n->args[i]);
        if (l) {
            carrying++;
            segments += l->num_segments;
            along = along && l->axis == axis;
        }
    }
    if (!carrying)
        return FX_OK;
    if (!along || carrying != n->num_args) {
        /* along another axis the inputs would have to be united like an
         * Add's; a constant or input slice along the channels stays. */
        keep_args_whole(p, n, "a Concat of values that are not all prunable channels");
        return FX_OK;
    }
    Layout *out = layout_new(p, (int)axis, segments);
    if (!out)
        return nomem(p);
    int k = 0;
    for (int i = 0; i < n->num_args; i++) {
        const Layout *l = layout_of(p, n->args[i]);
        for (int j = 0; j < l->num_segments; j++)
            out->segments[k++] = l->segments[j];
    }
    p->by_id[n->id] = out;
    return FX_OK;
}

/* Flatten at the channel axis, or a Reshape to [dims before it, rest]: the
 * channels go on at axis 1 with every element after them inside. */
static FxStatus visit_flatten(Pruner *p, Node *n)
{
    const Layout *in = layout_of(p, n->args[0]);
    const TensorType *x = node_input_type(n, 0);
    if (!in || !x)
        return FX_OK;
    const TensorType *y = &n->out_types[0];
    int64_t before = 1, after = 1;
    for (int i = 0; i < in->axis; i++)
        before *= x->dims[i];
    for (int i = in->axis + 1; i < x->rank; i++)
        after *= x->dims[i];
    bool ok = y->rank == 2 && y->dims[0] == before;
    if (n->op == &fx_op_Flatten)
        ok = ok && node_attr_int(n, "axis", 1) == in->axis;
    else
        ok = ok && n->num_args == 2 && node_const_value(n->args[1]);
    if (!ok) {
        keep_layout_whole(p, in, n, "a reshape that moves the channel axis");
        return FX_OK;
    }
    Layout *out = layout_copy(p, in, 1);
    if (!out)
        return nomem(p);
    for (int k = 0; k < out->num_segments; k++)
        out->segments[k].inner *= after;
    p->by_id[n->id] = out;
    return n->op == &fx_op_Reshape ? add_edit(p, EDIT_RESHAPE, n, 1, 0, out) : FX_OK;
}

static FxStatus visit(Pruner *p, Node *n)
{
    if (n->opcode == FX_OPCODE_OUTPUT) {
        keep_args_whole(p, n, "a graph output");
        return FX_OK;
    }
    if (!node_is_call(n) || !n->op || n->num_args < 1 || !n->args[0] || !n->shapes_known)
        return FX_OK;
    if (n->op == &fx_op_Conv)
        return visit_conv(p, n);
    if (n->op == &fx_op_Gemm || n->op == &fx_op_MatMul)
        return visit_dense(p, n);
    bool any = false;
    for (int i = 0; i < n->num_args; i++)
        any = any || layout_of(p, n->args[i]);
    if (!any)
        return FX_OK;
    if (n->op == &fx_op_BatchNormalization)
        return visit_batchnorm(p, n);
    if (is_binary_elementwise(n))
        return visit_binary(p, n);
    if (n->op == &fx_op_Concat)
        return visit_concat(p, n);
    if (n->op == &fx_op_Flatten || n->op == &fx_op_Reshape)
        return visit_flatten(p, n);
    const Layout *in = layout_of(p, n->args[0]);
    bool only_first = true;
    for (int i = 1; i < n->num_args; i++)
        only_first = only_first && !layout_of(p, n->args[i]);
    bool clip = n->op == &fx_op_Clip && n->num_outputs == 1;
    if (only_first && (is_passthrough(n) || clip || (is_pool(n) && in && in->axis == 1))) {
        /* Clip's bounds are scalars; the others have one operand */
        Layout *out = layout_copy(p, in, in->axis);
        if (!out)
            return nomem(p);
        p->by_id[n->id] = out;
        return FX_OK;
    }
    keep_args_whole(p, n, "an op channel pruning does not look through");
    return FX_OK;
}

/* --- choosing and cutting ------------------------------------------------------ */

/* out[k] += sum |w| over the elements whose index along `axis` is k. */
static void add_l1(const Tensor *w, int axis, double *out)
{
    int64_t outer = 1, inner = 1, n = w->type.dims[axis];
    for (int i = 0; i < axis; i++)
        outer *= w->type.dims[i];
    for (int i = axis + 1; i < w->type.rank; i++)
        inner *= w->type.dims[i];
    const float *x = w->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < n; k++)
            for (int64_t i = 0; i < inner; i++)
                out[k] += fabs(x[(o * n + k) * inner + i]);
}

typedef struct Ranked {
    double score;
    int64_t index;
} Ranked;

static int by_score_desc(const void *a, const void *b)
{
    const Ranked *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static int by_index(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The channels each root space keeps: kept[root] (sorted), num_kept[root];
 * a space kept whole keeps all. */
static FxStatus choose(Pruner *p, double fraction, int64_t **kept, int64_t *num_kept)
{
    double **score = fx_alloc_array((size_t)p->num_spaces + 1, sizeof *score);
    if (!score)
        return nomem(p);
    FxStatus st = FX_OK;
    for (int s = 0; s < p->num_spaces && st == FX_OK; s++)
        if (space_find(p, s) == s &&
            !(score[s] = fx_alloc_array((size_t)p->spaces[s].size + 1, sizeof **score)))
            st = nomem(p);
    for (int e = 0; e < p->num_edits && st == FX_OK; e++) {
        const Edit *ed = &p->edits[e];
        if (ed->kind != EDIT_PRODUCER)
            continue;
        int root = space_find(p, ed->layout->segments[0].space);
        add_l1(const_f32(ed->node->args[ed->slot]), ed->axis, score[root]);
    }
    for (int s = 0; s < p->num_spaces && st == FX_OK; s++) {
        if (space_find(p, s) != s)
            continue;
        int64_t c = p->spaces[s].size;
        int64_t keep = p->spaces[s].whole ? c : c - (int64_t)floor(fraction * (double)c + 1e-9);
        if (keep < 1)
            keep = 1;
        Ranked *r = fx_alloc_array((size_t)c + 1, sizeof *r);
        kept[s] = fx_alloc_array((size_t)keep + 1, sizeof **kept);
        if (!r || !kept[s]) {
            free(r);
            st = nomem(p);
            break;
        }
        for (int64_t k = 0; k < c; k++)
            r[k] = (Ranked){score[s][k], k};
        qsort(r, (size_t)c, sizeof *r, by_score_desc);
        for (int64_t k = 0; k < keep; k++)
            kept[s][k] = r[k].index;
        qsort(kept[s], (size_t)keep, sizeof **kept, by_index);
        num_kept[s] = keep;
        free(r);
    }
    for (int s = 0; s < p->num_spaces; s++)
        free(score[s]);
    free(score);
    return st;
}

/* The indices along a value's axis that survive: per segment, per kept
 * channel, its `inner` elements.  *count = -1 when nothing is cut. */
static int64_t *kept_positions(Pruner *p, const Layout *l, int64_t *const *kept,
                               const int64_t *num_kept, int64_t *count)
{
    int64_t total = 0, full = 0;
    for (int k = 0; k < l->num_segments; k++) {
        int root = space_find(p, l->segments[k].space);
        total += num_kept[root] * l->segments[k].inner;
        full += p->spaces[root].size * l->segments[k].inner;
    }
    *count = total == full ? -1 : total;
    if (total == full)
        return NULL;
    int64_t *idx = fx_alloc_array((size_t)total + 1, sizeof *idx);
    if (!idx)
        return NULL;
    int64_t at = 0, base = 0;
    for (int k = 0; k < l->num_segments; k++) {
        int root = space_find(p, l->segments[k].space);
        int64_t inner = l->segments[k].inner;
        for (int64_t j = 0; j < num_kept[root]; j++)
            for (int64_t i = 0; i < inner; i++)
                idx[at++] = base + kept[root][j] * inner + i;
        base += p->spaces[root].size * inner;
    }
    return idx;
}

/* t's slices along `axis` at idx[0..count), in that order. */
static Tensor *take(const Tensor *t, int axis, const int64_t *idx, int64_t count, Diag *d)
{
    TensorType type = t->type;
    int64_t n = type.dims[axis], outer = 1, inner = 1;
    for (int i = 0; i < axis; i++)
        outer *= type.dims[i];
    for (int i = axis + 1; i < type.rank; i++)
        inner *= type.dims[i];
    type.dims[axis] = count;
    Tensor *out = tensor_new(&type, d);
    if (!out)
        return NULL;
    size_t elem = type_numel(&t->type) ? tensor_nbytes(t) / (size_t)type_numel(&t->type) : 1;
    size_t run = (size_t)inner * elem;
    const char *src = t->data;
    char *dst = out->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < count; k++)
            memcpy(dst + ((size_t)(o * count + k)) * run, src + ((size_t)(o * n + idx[k])) * run,
                   run);
    return out;
}

static FxStatus apply_edit(Pruner *p, const Edit *e, int64_t *const *kept,
                           const int64_t *num_kept, PruneChannelsResult *res)
{
    int64_t count;
    int64_t *idx = kept_positions(p, e->layout, kept, num_kept, &count);
    if (count < 0)
        return FX_OK;
    if (!idx)
        return nomem(p);
    FxStatus st = FX_OK;
    Node *n = e->node;
    if (e->kind == EDIT_GROUP) {
        if (!node_set_attr_int(n, "group", count))
            st = nomem(p);
    } else if (e->kind == EDIT_RESHAPE) {
        const Tensor *shape = node_const_value(n->args[e->slot]);
        int64_t dims[2] = {tensor_get_int(shape, 0), count};
        st = node_set_const_input(n, e->slot, "shape", tensor_new_ints(dims, 2, p->d), p->d);
    } else {
        const Tensor *t = node_const_value(n->args[e->slot]);
        const char *role = e->kind == EDIT_PRODUCER ? "weight" : "pruned";
        st = node_set_const_input(n, e->slot, role, take(t, e->axis, idx, count, p->d), p->d);
        res->edits++;
    }
    free(idx);
    return st;
}

/* One report row per group of united spaces. */
static FxStatus report_groups(Pruner *p, const int64_t *num_kept, PruneChannelsResult *res)
{
    res->groups = fx_alloc_array((size_t)p->num_spaces + 1, sizeof *res->groups);
    if (!res->groups)
        return nomem(p);
    for (int s = 0; s < p->num_spaces; s++) {
        if (space_find(p, s) != s)
            continue;
        PruneGroup *gr = &res->groups[res->num_groups++];
        gr->channels = p->spaces[s].size;
        gr->kept = num_kept[s];
        gr->why_whole = p->spaces[s].whole ? p->spaces[s].why : NULL;
        /* the producers, comma-separated */
        size_t len = 1;
        for (int e = 0; e < p->num_edits; e++)
            if (p->edits[e].kind == EDIT_PRODUCER &&
                space_find(p, p->edits[e].layout->segments[0].space) == s)
                len += strlen(p->edits[e].node->name) + 2;
        char *names = fx_malloc(len);
        if (!names)
            return nomem(p);
        names[0] = '\0';
        for (int e = 0; e < p->num_edits; e++)
            if (p->edits[e].kind == EDIT_PRODUCER &&
                space_find(p, p->edits[e].layout->segments[0].space) == s) {
                if (names[0])
                    strcat(names, ", ");
                strcat(names, p->edits[e].node->name);
            }
        gr->layers = names;
        if (p->spaces[s].whole && p->spaces[s].why_node) {
            gr->why_node = fx_strdup(p->spaces[s].why_node->name);
            if (!gr->why_node)
                return nomem(p);
        }
        res->channels_before += gr->channels;
        res->channels_after += gr->kept;
    }
    return FX_OK;
}

void prune_channels_result_free(PruneChannelsResult *r)
{
    for (int k = 0; k < r->num_groups; k++) {
        free((char *)r->groups[k].layers);
        free((char *)r->groups[k].why_node);
    }
    free(r->groups);
    memset(r, 0, sizeof *r);
}

FxStatus pass_prune_channels(Graph *g, double fraction, PruneChannelsResult *res, Diag *d)
{
    memset(res, 0, sizeof *res);
    if (!(fraction >= 0 && fraction < 1))
        return diag_error(d, FX_ERR_INVALID,
                          "channel pruning takes a fraction in [0, 1), not %g", fraction);
    Pruner p = {.g = g, .d = d, .num_ids = g->next_id};
    p.by_id = fx_alloc_array((size_t)p.num_ids + 1, sizeof *p.by_id);
    FxStatus st = p.by_id ? FX_OK : nomem(&p);
    for (Node *n = g->root.next; st == FX_OK && n != &g->root; n = n->next)
        st = visit(&p, n);
    int64_t **kept = NULL, *num_kept = NULL;
    if (st == FX_OK) {
        kept = fx_alloc_array((size_t)p.num_spaces + 1, sizeof *kept);
        num_kept = fx_alloc_array((size_t)p.num_spaces + 1, sizeof *num_kept);
        st = kept && num_kept ? choose(&p, fraction, kept, num_kept) : nomem(&p);
    }
    /* Edits replace constants only; the layouts hold space ids, not nodes,
     * so the order of the edits does not matter. */
    for (int e = 0; st == FX_OK && e < p.num_edits; e++)
        st = apply_edit(&p, &p.edits[e], kept, num_kept, res);
    if (st == FX_OK)
        st = report_groups(&p, num_kept, res);
    if (st == FX_OK) {
        graph_eliminate_dead_code(g);
        /* re-infer in order: every node after a cut constant changes shape */
        for (Node *n = g->root.next; st == FX_OK && n != &g->root; n = n->next)
            if (node_is_call(n))
                st = node_infer_shapes(n, d);
    }
    for (int s = 0; kept && s < p.num_spaces; s++)
        free(kept[s]);
    free(kept);
    free(num_kept);
    for (int k = 0; k < p.num_owned; k++) {
        free(p.owned[k]->segments);
        free(p.owned[k]);
    }
    free(p.owned);
    free(p.edits);
    free(p.spaces);
    free(p.by_id);
    if (st != FX_OK)
        prune_channels_result_free(res);
    return st;
}
