/*
 * plan.c - the static memory plan.
 *
 * Every node output becomes a CgValue.  Graph inputs and outputs live in the
 * caller's buffers, constants in const arrays, everything else in one arena.
 * Lifetimes come from the node order (a value is alive from the step that
 * makes it to the last step that reads it, through any alias).  Views and
 * getitem are aliases with no copy; an elementwise op whose input of the same
 * type dies at that node writes over it (in-place), and so, on the
 * microcontroller targets, does a depthwise or pointwise convolution, with
 * a plane or a row of scratch (the op's `inplace` hook; on the host the
 * separate buffers keep the kernels' fastest loops); a convolution whose
 * residual dies there writes its output over it, starting its sums from it
 * (the `accumulates_into` hook); a Concat whose inputs
 * are contiguous runs of its output has them written there (place_concats).
 * Arena offsets are then
 * assigned greedily, largest value first, each into the smallest gap left by
 * the values already placed whose lifetimes intersect its own (best fit).
 * The report compares the result with the lower bound (the largest total
 * alive at one step) and with the naive sum of all intermediates.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

enum { CG_ALIGN = 64 };

static size_t align_up(size_t n) { return (n + CG_ALIGN - 1) & ~(size_t)(CG_ALIGN - 1); }

const CgValue *cg_root(const CgValue *v)
{
    while (v && v->kind == CG_ALIAS)
        v = v->alias;
    return v;
}

static CgValue *root_mut(CgValue *v)
{
    while (v && v->kind == CG_ALIAS)
        v = v->alias;
    return v;
}

size_t cg_root_offset(const CgValue *v)
{
    size_t offset = 0;
    for (; v && v->kind == CG_ALIAS; v = v->alias)
        offset += v->slice ? v->slice_offset : 0;
    return offset;
}

/* Whether v names all of its root's bytes, not a slice of them. */
static bool covers_root(const CgValue *v)
{
    return cg_root_offset(v) == 0 && v->bytes == cg_root(v)->bytes;
}

static int position(const Node *n) { return (int)(intptr_t)n->pass_data - 1; }

/* The value read when a node uses `a` as an argument. */
static CgValue *value_of(const CgPlan *p, const Node *a)
{
    return a->id < p->num_ids ? p->by_id[a->id] : NULL;
}

const CgValue *cg_arg_value(const CgPlan *p, const Node *n, int i)
{
    return n->args[i] ? value_of(p, n->args[i]) : NULL;
}

static bool is_constant(const Node *n)
{
    if (n->opcode == FX_OPCODE_GET_ATTR)
        return true;
    if (!n->const_values || n->opcode == FX_OPCODE_PLACEHOLDER || n->op == &fx_op_getitem)
        return false;
    for (int k = 0; k < n->num_outputs; k++)
        if (!n->const_values[k])
            return false;
    return n->num_outputs > 0;
}

static void name_value(CgValue *v)
{
    const Node *n = v->node;
    if (v->kind == CG_SCRATCH)
        snprintf(v->cname, sizeof v->cname, "scratch_%s", n->name);
    else if (n->num_outputs > 1)
        snprintf(v->cname, sizeof v->cname, "t_%s_%d", n->name, v->index);
    else
        snprintf(v->cname, sizeof v->cname, "t_%s", n->name);
}

static FxStatus check_supported(const Graph *g, Diag *d)
{
    FxStatus st = FX_OK;
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        if (!n->op || is_constant(n) || (n->op->flags & FX_OPF_VIEW) || n->op == &fx_op_getitem)
            continue;
        if (!n->op->emit)
            st = diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                                 "the code generator has no emitter for %s yet", n->op->name);
        if (!n->shapes_known)
            st = diag_node_error(d, FX_ERR_INVALID, n, "shapes were not propagated");
    }
    return st;
}

/* Place one value: the lowest-waste gap among the already placed values
 * whose lifetimes intersect. */
typedef struct Interval {
    size_t begin, end;
} Interval;

static int compare_intervals(const void *a, const void *b)
{
    const Interval *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static size_t best_fit(CgValue *const *placed, int count, const CgValue *v, Interval *scratch)
{
    int k = 0;
    for (int i = 0; i < count; i++)
        if (placed[i]->first <= v->last && v->first <= placed[i]->last)
            scratch[k++] = (Interval){placed[i]->offset, placed[i]->offset + align_up(placed[i]->bytes)};
    qsort(scratch, (size_t)k, sizeof *scratch, compare_intervals);
    size_t need = align_up(v->bytes), cursor = 0, best = SIZE_MAX, best_waste = SIZE_MAX;
    for (int i = 0; i < k; i++) {
        if (scratch[i].begin > cursor) {
            size_t gap = scratch[i].begin - cursor;
            if (gap >= need && gap - need < best_waste) {
                best = cursor;
                best_waste = gap - need;
            }
        }
        if (scratch[i].end > cursor)
            cursor = scratch[i].end;
    }
    return best != SIZE_MAX ? best : cursor;
}

/* Largest first; ties by birth, then creation order, so plans are stable. */
static int compare_for_placement(const void *a, const void *b)
{
    const CgValue *x = *(CgValue *const *)a, *y = *(CgValue *const *)b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return x->node->id - y->node->id;
}

static bool inplace_allowed(const Node *n)
{
    return n->op && (n->op->flags & FX_OPF_ELEMENTWISE) && n->num_outputs == 1 &&
           !is_constant(n);
}

/* --- Concat in place --------------------------------------------------------
 *
 * When the dims before a Concat's axis are all 1 (a batch-1 Concat along the
 * channels, plain [1, C, H, W] or blocked [1, CB, H, W, 8]), input i is the
 * contiguous run of the output starting where inputs 0..i-1 end.  Its
 * producer can write it there: the input becomes a slice (an alias at a byte
 * offset) of the Concat's output and the Concat has no code.  Concats are
 * taken last first, so that in a chain of Concats over growing prefixes of
 * the same values (a DenseNet block: each layer concatenates all the features
 * before it) the last and largest places the values, and each earlier one,
 * whose inputs are then already side by side in it, becomes a slice of it
 * too: one buffer per block.  Anything else keeps the copy: an input that is
 * a graph input, constant, output, view or in-place value, or already placed
 * elsewhere; an input given twice; a Concat that is a view or output itself
 * in the prefix case.  The lifetime of a root covers its slices' (step 3),
 * so a slice read after the Concat keeps the whole buffer alive. */

/* The dims before the axis multiply to 1, every input is non-empty and
 * given once. */
static bool concat_contiguous(const Node *n)
{
    if (n->op != &fx_op_Concat || n->num_outputs != 1 || n->num_args < 1)
        return false;
    const TensorType *o = &n->out_types[0];
    int64_t axis = node_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += o->rank;
    if (axis < 0 || axis >= o->rank)
        return false;
    for (int d = 0; d < axis; d++)
        if (o->dims[d] != 1)
            return false;
    for (int i = 0; i < n->num_args; i++) {
        if (!n->args[i] || type_numel(&n->args[i]->out_types[0]) == 0)
            return false;
        for (int j = 0; j < i; j++)
            if (n->args[j] == n->args[i])
                return false;
    }
    return true;
}

/* Makes v the slice of `container` at byte `offset`. */
static void make_slice(CgValue *v, CgValue *container, size_t offset)
{
    v->kind = CG_ALIAS;
    v->alias = container;
    v->slice = true;
    v->slice_offset = offset;
}

/* Concat n: every input an arena value of its own goes into its slice of
 * the output (which may itself be a slice of a later Concat's). */
static bool place_inputs(CgPlan *p, const Node *n, CgValue *out)
{
    if (out->kind != CG_ARENA && out->kind != CG_OUTPUT && !(out->kind == CG_ALIAS && out->slice))
        return false;
    for (int i = 0; i < n->num_args; i++)
        if (value_of(p, n->args[i])->kind != CG_ARENA)
            return false;
    size_t offset = 0;
    for (int i = 0; i < n->num_args; i++) {
        CgValue *v = value_of(p, n->args[i]);
        make_slice(v, out, offset);
        offset += v->bytes;
    }
    return true;
}

/* Concat n: every input already lies in one root, side by side in order,
 * so the output (an arena value of its own) is the slice they span. */
static bool span_placed_inputs(CgPlan *p, const Node *n, CgValue *out)
{
    if (out->kind != CG_ARENA)
        return false;
    CgValue *root = NULL;
    size_t start = 0, next = 0;
    for (int i = 0; i < n->num_args; i++) {
        CgValue *v = value_of(p, n->args[i]);
        if (v->kind != CG_ALIAS || !v->slice || (root && root_mut(v) != root))
            return false;
        if (!root) {
            root = root_mut(v);
            start = next = cg_root_offset(v);
        }
        if (cg_root_offset(v) != next)
            return false;
        next += v->bytes;
    }
    make_slice(out, root, start);
    return true;
}

static void place_concats(CgPlan *p)
{
    for (int s = p->num_steps - 1; s >= 0; s--) {
        const Node *n = p->order[s];
        if (!n->op || is_constant(n) || !concat_contiguous(n))
            continue;
        CgValue *out = p->node_values[s];
        if (place_inputs(p, n, out) || span_placed_inputs(p, n, out)) {
            out->assembled = true;
            p->assembled_count++;
        }
    }
}

/* Makes node n's output (an arena value) an alias of its argument k when
 * that argument is an arena value of the same type read for the last time
 * here and by no other argument of n (which would read it while it is
 * overwritten); false when it is not. */
static bool take_over_argument(CgPlan *p, const Node *n, int k)
{
    int pos = position(n);
    CgValue *o = p->node_values[pos];
    CgValue *r = root_mut(value_of(p, n->args[k]));
    bool shared = false;
    for (int i = 0; i < n->num_args; i++)
        shared |= i != k && n->args[i] && root_mut(value_of(p, n->args[i])) == r;
    if (o->kind != CG_ARENA || r->kind != CG_ARENA || r->last != pos || shared ||
        !covers_root(value_of(p, n->args[k])) ||
        !type_equal(&r->node->out_types[r->index], &n->out_types[0]))
        return false;
    o->kind = CG_ALIAS;
    o->alias = r;
    o->inplace = true;
    r->last = o->last;
    p->inplace_count++;
    return true;
}

/* Kernels that add to their output's starting values (the op's
 * `accumulates_into` hook: a convolution's residual): the node's output
 * takes over that argument (take_over_argument), so that the residual is
 * read and written as one stream instead of read from one tensor and written
 * to another (ResNet's last 1x1 layer of each block), and the arena holds
 * one tensor less. */
static void plan_accumulating_kernels(const Graph *g, CgPlan *p)
{
    for (Node *n = g->root.next; n != &g->root; n = n->next) {
        int k = n->op && n->op->accumulates_into ? n->op->accumulates_into(n) : -1;
        if (k >= 0 && k < n->num_args && n->args[k] && n->num_outputs == 1 && !is_constant(n))
            take_over_argument(p, n, k);
    }
}

/* In-place kernels (the op's `inplace` hook: depthwise and pointwise
 * convolutions): the node's output takes over its first argument
 * (take_over_argument), and the node's scratch grows to what the in-place
 * kernel needs.
 * Kept apart from the elementwise case, which needs no scratch and may read
 * its buffer through several arguments. */
static void plan_inplace_kernels(const Graph *g, CgPlan *p)
{
    for (Node *n = g->root.next; n != &g->root; n = n->next) {
        size_t scratch_bytes = 0;
        int pos = position(n);
        if (!n->op || !n->op->inplace || n->num_outputs != 1 || is_constant(n) || !n->args[0] ||
            p->node_values[pos]->kind != CG_ARENA || !n->op->inplace(n, &scratch_bytes) ||
            !take_over_argument(p, n, 0))
            continue;
        CgValue *s = p->node_scratch[pos];
        if (!s) {
            /* cg_plan reserved one value per node for its scratch. */
            s = &p->values[p->num_values++];
            s->node = n;
            s->kind = CG_SCRATCH;
            s->first = s->last = pos;
            name_value(s);
            p->node_scratch[pos] = s;
        }
        /* The in-place kernel runs instead: its scratch, not the other's. */
        s->bytes = scratch_bytes;
    }
}

FxStatus cg_plan(const Graph *g, CgPlan *p, Diag *d)
{
    return cg_plan_target(g, FX_TARGET_HOST, p, d);
}

FxStatus cg_plan_target(const Graph *g, FxTarget target, CgPlan *p, Diag *d)
{
    memset(p, 0, sizeof *p);
    FxStatus st = check_supported(g, d);
    if (st != FX_OK)
        return st;
    int steps = 0, values = 0;
    for (Node *n = g->root.next; n != &g->root; n = n->next) {
        n->pass_data = (void *)(intptr_t)(++steps);
        values += n->num_outputs + 1; /* +1: room for scratch */
    }
    p->num_steps = steps;
    p->values = fx_alloc_array((size_t)values + 1, sizeof *p->values);
    p->node_values = fx_alloc_array((size_t)steps + 1, sizeof *p->node_values);
    p->num_ids = g->next_id;
    p->by_id = fx_alloc_array((size_t)g->next_id + 1, sizeof *p->by_id);
    p->node_scratch = fx_alloc_array((size_t)steps + 1, sizeof *p->node_scratch);
    p->order = fx_alloc_array((size_t)steps + 1, sizeof *p->order);
    p->step_calls = fx_alloc_array((size_t)steps + 1, sizeof *p->step_calls);
    p->copies = fx_alloc_array((size_t)graph_num_outputs(g) + 1, sizeof *p->copies);
    CgValue **placed = fx_alloc_array((size_t)values + 1, sizeof *placed);
    Interval *intervals = fx_alloc_array((size_t)values + 1, sizeof *intervals);
    if (!p->values || !p->node_values || !p->by_id || !p->node_scratch || !p->order ||
        !p->step_calls || !p->copies || !placed || !intervals) {
        free(placed);
        free(intervals);
        cg_plan_free(p);
        return diag_error(d, FX_ERR_NOMEM, "out of memory planning the arena");
    }

    /* 1. One value per node output, classified. */
    int inputs = 0;
    for (Node *n = g->root.next; n != &g->root; n = n->next) {
        int pos = position(n);
        p->order[pos] = n;
        if (n->opcode == FX_OPCODE_OUTPUT)
            continue;
        p->node_values[pos] = &p->values[p->num_values];
        p->by_id[n->id] = p->node_values[pos];
        for (int k = 0; k < n->num_outputs; k++) {
            CgValue *v = &p->values[p->num_values++];
            v->node = n;
            v->index = k;
            v->bytes = type_nbytes(&n->out_types[k]);
            v->first = v->last = pos;
            if (n->opcode == FX_OPCODE_PLACEHOLDER) {
                v->kind = CG_INPUT;
                v->io = inputs++;
            } else if (is_constant(n)) {
                v->kind = CG_WEIGHT;
            } else if (n->op == &fx_op_getitem) {
                v->kind = CG_ALIAS;
                v->alias = value_of(p, n->args[0]) + n->index;
            } else if ((n->op->flags & FX_OPF_VIEW) && k == 0 && n->args[0]) {
                v->kind = CG_ALIAS;
                v->alias = value_of(p, n->args[0]);
                p->alias_count++;
            } else {
                v->kind = CG_ARENA;
            }
            name_value(v);
        }
        if (n->op && n->op->scratch_bytes && !is_constant(n)) {
            size_t bytes = target == FX_TARGET_CORTEX_M && n->op->small_scratch_bytes
                               ? n->op->small_scratch_bytes(n)
                               : n->op->scratch_bytes(n);
            if (bytes) {
                CgValue *s = &p->values[p->num_values++];
                s->node = n;
                s->kind = CG_SCRATCH;
                s->bytes = bytes;
                s->first = s->last = pos;
                name_value(s);
                p->node_scratch[pos] = s;
            }
        }
    }

    /* 2. Own last uses, then graph outputs: a value made in the arena that is
     * returned is written straight into the caller's buffer. */
    for (Node *n = g->root.next; n != &g->root; n = n->next)
        for (int i = 0; i < n->num_args; i++)
            if (n->args[i] && n->opcode != FX_OPCODE_OUTPUT) {
                CgValue *v = value_of(p, n->args[i]);
                if (v->last < position(n))
                    v->last = position(n);
            }
    Node *out = graph_output_node(g);
    for (int k = 0; out && k < out->num_args; k++) {
        CgValue *v = value_of(p, out->args[k]);
        CgValue *r = root_mut(v);
        /* a getitem names all of one output of a multi-output node (Split,
         * an LSTM's Y_h): that node writes the caller's buffer */
        bool whole_item = v->kind == CG_ALIAS && !v->slice && v->node->op == &fx_op_getitem &&
                          v->alias == r;
        if ((v == r || whole_item) && r->kind == CG_ARENA) {
            r->kind = CG_OUTPUT;
            r->io = k;
        } else {
            p->copies[p->num_copies++] = (CgCopy){k, v};
        }
    }
    /* Copies read their value after the last step. */
    for (int c = 0; c < p->num_copies; c++)
        ((CgValue *)p->copies[c].src)->last = steps;

    place_concats(p);

    /* 3. Lifetimes of roots cover their aliases (a Concat's slices are made
     * before it). */
    for (int i = 0; i < p->num_values; i++) {
        CgValue *r = root_mut(&p->values[i]);
        if (r->last < p->values[i].last)
            r->last = p->values[i].last;
        if (r->first > p->values[i].first)
            r->first = p->values[i].first;
    }

    /* 4. In-place: an elementwise node's output takes over an arena input of
     * the same type that is read for the last time here. */
    for (Node *n = g->root.next; n != &g->root; n = n->next) {
        if (!inplace_allowed(n))
            continue;
        CgValue *o = p->node_values[position(n)];
        if (o->kind != CG_ARENA)
            continue;
        for (int i = 0; i < n->num_args; i++) {
            if (!n->args[i])
                continue;
            CgValue *r = root_mut(value_of(p, n->args[i]));
            if (r->kind != CG_ARENA || r->last != position(n) || r == o ||
                !covers_root(value_of(p, n->args[i])) ||
                !type_equal(&r->node->out_types[r->index], &n->out_types[0]))
                continue;
            o->kind = CG_ALIAS;
            o->alias = r;
            o->inplace = true;
            r->last = o->last;
            p->inplace_count++;
            break;
        }
    }
    plan_accumulating_kernels(g, p);
    if (target != FX_TARGET_HOST)
        plan_inplace_kernels(g, p);

    /* 5. Offsets. */
    int count = 0;
    for (int i = 0; i < p->num_values; i++) {
        CgValue *v = &p->values[i];
        if (v->kind == CG_ARENA || v->kind == CG_SCRATCH)
            placed[count++] = v;
        if (v->kind == CG_ARENA || v->kind == CG_SCRATCH || (v->kind == CG_ALIAS && v->inplace) ||
            (v->kind == CG_OUTPUT))
            p->naive_bytes += v->kind == CG_OUTPUT ? 0 : align_up(v->bytes);
    }
    qsort(placed, (size_t)count, sizeof *placed, compare_for_placement);
    for (int i = 0; i < count; i++) {
        placed[i]->offset = best_fit(placed, i, placed[i], intervals);
        size_t end = placed[i]->offset + align_up(placed[i]->bytes);
        if (end > p->arena_bytes)
            p->arena_bytes = end;
    }
    for (int s = 0; s <= steps; s++) {
        size_t live = 0;
        for (int i = 0; i < count; i++)
            if (placed[i]->first <= s && s <= placed[i]->last)
                live += align_up(placed[i]->bytes);
        if (live > p->lower_bound)
            p->lower_bound = live;
    }
    free(placed);
    free(intervals);
    for (Node *n = g->root.next; n != &g->root; n = n->next)
        n->pass_data = NULL;
    return FX_OK;
}

void cg_plan_free(CgPlan *p)
{
    free(p->values);
    free(p->node_values);
    free(p->by_id);
    free(p->node_scratch);
    free(p->order);
    for (int s = 0; p->step_calls && s < p->num_steps; s++)
        free(p->step_calls[s]);
    free(p->step_calls);
    free(p->copies);
    memset(p, 0, sizeof *p);
}

FxStatus cg_plan_check(const CgPlan *p, Diag *d)
{
    FxStatus st = FX_OK;
    for (int i = 0; i < p->num_values; i++) {
        const CgValue *a = &p->values[i];
        if (a->kind == CG_ALIAS && a->slice && a->slice_offset + a->bytes > a->alias->bytes)
            st = diag_error(d, FX_ERR_INVALID, "plan: %s lies outside %s", a->cname, a->alias->cname);
        if (a->kind != CG_ARENA && a->kind != CG_SCRATCH)
            continue;
        if (a->offset % CG_ALIGN)
            st = diag_error(d, FX_ERR_INVALID, "plan: %s is not 64-byte aligned", a->cname);
        if (a->offset + a->bytes > p->arena_bytes)
            st = diag_error(d, FX_ERR_INVALID, "plan: %s lies outside the arena", a->cname);
        for (int j = i + 1; j < p->num_values; j++) {
            const CgValue *b = &p->values[j];
            if (b->kind != CG_ARENA && b->kind != CG_SCRATCH)
                continue;
            bool live_together = a->first <= b->last && b->first <= a->last;
            bool overlap = a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
            if (live_together && overlap && a->bytes && b->bytes)
                st = diag_error(d, FX_ERR_INVALID,
                                "plan: %s [%zu, +%zu) steps %d-%d overlaps %s [%zu, +%zu) steps "
                                "%d-%d",
                                a->cname, a->offset, a->bytes, a->first, a->last, b->cname,
                                b->offset, b->bytes, b->first, b->last);
        }
    }
    return st;
}

static const char *kind_name(const CgValue *v)
{
    switch (v->kind) {
    case CG_INPUT: return "input";
    case CG_OUTPUT: return "output";
    case CG_WEIGHT: return "weight";
    case CG_ARENA: return "arena";
    case CG_ALIAS: return v->inplace ? "in-place" : v->slice ? "slice" : "alias";
    case CG_SCRATCH: return "scratch";
    }
    return "?";
}

void cg_plan_report(const CgPlan *p, FILE *out)
{
    fprintf(out, "memory plan: arena %zu bytes; lower bound %zu bytes (largest total alive at one "
                 "step); naive %zu bytes (every intermediate in its own buffer)\n",
            p->arena_bytes, p->lower_bound, p->naive_bytes);
    fprintf(out, "             %d in-place, %d views aliased, %d output copies, %d Concats "
                 "written in place\n",
            p->inplace_count, p->alias_count, p->num_copies, p->assembled_count);
    fprintf(out, "%-32s %-16s %-9s %12s %10s %14s\n", "node", "op", "storage", "bytes", "offset",
            "MACs");
    for (int i = 0; i < p->num_values; i++) {
        const CgValue *v = &p->values[i];
        const Node *n = v->node;
        char offset[32] = "-";
        const CgValue *r = cg_root(v);
        if (r->kind == CG_ARENA || r->kind == CG_SCRATCH)
            snprintf(offset, sizeof offset, "%zu", r->offset + cg_root_offset(v));
        fprintf(out, "%-32s %-16s %-9s %12zu %10s %14lld\n", v->cname,
                n->op ? n->op->name : fx_opcode_name(n->opcode), kind_name(v), v->bytes, offset,
                v->index == 0 && v->kind != CG_SCRATCH ? (long long)node_macs(n) : 0ll);
    }
}

static int by_bytes_descending(const void *a, const void *b)
{
    const CgLayerWeights *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

FxStatus cg_plan_memory(const CgPlan *p, CgMemory *m, Diag *d)
{
    memset(m, 0, sizeof *m);
    m->arena_bytes = p->arena_bytes;
    for (int s = 0; s < p->num_steps; s++)
        if (p->node_scratch[s] && p->node_scratch[s]->bytes > m->scratch_bytes)
            m->scratch_bytes = p->node_scratch[s]->bytes;
    bool *counted = fx_alloc_array((size_t)p->num_values + 1, sizeof *counted);
    m->layers = fx_alloc_array((size_t)p->num_steps + 1, sizeof *m->layers);
    if (!counted || !m->layers) {
        free(counted);
        cg_memory_free(m);
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    }
    for (int s = 0; s < p->num_steps; s++) {
        const Node *n = p->order[s];
        const CgValue *made = p->node_values[s];
        /* A view's constant arguments (a Reshape's shape) have no code
         * reading them, so they are not written out. */
        if (made && made->kind == CG_ALIAS && !made->inplace && !made->slice)
            continue;
        size_t bytes = 0;
        for (int i = 0; i < n->num_args; i++) {
            const CgValue *w = cg_root(cg_arg_value(p, n, i));
            if (!w || w->kind != CG_WEIGHT || counted[w - p->values])
                continue;
            counted[w - p->values] = true;
            bytes += w->bytes;
        }
        if (bytes) {
            m->layers[m->num_layers].node = n;
            m->layers[m->num_layers].cname = made ? made->cname : n->name;
            m->layers[m->num_layers++].bytes = bytes;
        }
        m->weight_bytes += bytes;
    }
    free(counted);
    qsort(m->layers, (size_t)m->num_layers, sizeof *m->layers, by_bytes_descending);
    return FX_OK;
}

void cg_memory_free(CgMemory *m)
{
    free(m->layers);
    m->layers = NULL;
    m->num_layers = 0;
}

void cg_memory_report(const CgMemory *m, FILE *out)
{
    fprintf(out, "\nweights by layer (the node that first reads them), largest first:\n");
    fprintf(out, "%-32s %-16s %12s %7s\n", "node", "op", "bytes", "share");
    for (int i = 0; i < m->num_layers; i++) {
        const Node *n = m->layers[i].node;
        fprintf(out, "%-32s %-16s %12zu %6.1f%%\n", m->layers[i].cname,
                n->op ? n->op->name : fx_opcode_name(n->opcode), m->layers[i].bytes,
                100.0 * (double)m->layers[i].bytes / (double)m->weight_bytes);
    }
    fprintf(out, "flash: %zu bytes of weights (const; code not counted)\n"
                 "RAM:   %zu bytes of arena, of which the largest scratch is %zu\n"
                 "       (the caller's inputs, outputs and stack not counted)\n",
            m->weight_bytes, m->arena_bytes, m->scratch_bytes);
}

/* Appends "NODE (OP) BYTES" for up to three of the largest entries. */
static void name_largest(char *buf, size_t size, const CgLayerWeights *items, int count)
{
    size_t len = strlen(buf);
    for (int i = 0; i < count && i < 3 && len < size; i++) {
        const Node *n = items[i].node;
        int w = snprintf(buf + len, size - len, "%s%s (%s) %zu bytes", i ? ", " : "", items[i].cname,
                         n->op ? n->op->name : fx_opcode_name(n->opcode), items[i].bytes);
        len += w > 0 ? (size_t)w : 0;
    }
}

FxStatus cg_check_budget(const CgPlan *p, const CgOptions *o, Diag *d)
{
    if (!o->flash_budget && !o->ram_budget)
        return FX_OK;
    CgMemory m;
    FxStatus st = cg_plan_memory(p, &m, d);
    if (st != FX_OK)
        return st;
    char flash[600] = "", ram[600] = "";
    if (o->flash_budget && m.weight_bytes > o->flash_budget) {
        snprintf(flash, sizeof flash, "the weights take %zu bytes of flash, the budget is %zu; "
                 "largest layers: ", m.weight_bytes, o->flash_budget);
        name_largest(flash, sizeof flash, m.layers, m.num_layers);
    }
    if (o->ram_budget && m.arena_bytes > o->ram_budget) {
        /* The arena's peak is made of its largest values: name those. */
        CgLayerWeights *big = fx_alloc_array((size_t)p->num_values + 1, sizeof *big);
        if (!big) {
            cg_memory_free(&m);
            return diag_error(d, FX_ERR_NOMEM, "out of memory");
        }
        int count = 0;
        for (int i = 0; i < p->num_values; i++)
            if (p->values[i].kind == CG_ARENA || p->values[i].kind == CG_SCRATCH) {
                big[count].node = p->values[i].node;
                big[count].cname = p->values[i].cname;
                big[count++].bytes = p->values[i].bytes;
            }
        qsort(big, (size_t)count, sizeof *big, by_bytes_descending);
        snprintf(ram, sizeof ram, "the arena takes %zu bytes of RAM, the budget is %zu; "
                 "largest values in it: ", m.arena_bytes, o->ram_budget);
        name_largest(ram, sizeof ram, big, count);
        free(big);
    }
    cg_memory_free(&m);
    if (!*flash && !*ram)
        return FX_OK;
    return diag_error(d, FX_ERR_INVALID, "%s: over --budget: %s%s%s", o->source ? o->source : o->name,
                      flash, *flash && *ram ? "; " : "", ram);
}
