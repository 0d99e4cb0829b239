/*
 * unroll_loops.c - Loops with a compile-time trip count and Scans of static
 * length become that many copies of their body.
 *
 * Each copy reads the iteration number (Loop) or its slice (a Gather at a
 * constant index, Scan) as a constant, so what the body computes from them
 * (a Slice starting at the iteration number, as ONNX's own Loop tests do)
 * gets static shapes, and the result is straight-line code every pass and
 * the code generator handle.  Loop-carried values and states thread from copy
 * to copy; scan outputs are the copies' values unsqueezed and concatenated
 * along their axis (in reverse for a reversed direction).  A Loop is left
 * for the interpreter when its condition can end it early (the body returns
 * something other than its condition input or a constant true), when its
 * first condition is not a constant, or when the copies would pass
 * UNROLL_MAX_NODES; so is a Scan not typed.  An opset-8 Scan (a batch of
 * sequences) unrolls once per batch entry.
 * The pipeline runs this between tries of shape propagation, with If
 * folding (fold_if.c), before anything is refused.
 */
#include <stdlib.h>
#include <string.h>

#include "opt.h"

/* Body node copies one unrolled loop may add: beyond, code size outweighs
 * what a static iteration number buys. */
enum { UNROLL_MAX_NODES = 8192 };
/* Operands of a Scan it unrolls (states, scan inputs, captures; outputs). */
enum { SCAN_MAX_OPERANDS = 64 };

static int64_t body_size(const Graph *body)
{
    int64_t k = 0;
    for (const Node *n = body->root.next; n != &body->root; n = n->next)
        k += node_is_call(n) || n->opcode == FX_OPCODE_GET_ATTR;
    return k ? k : 1;
}

/* The body returns its condition input unchanged (through Identity) or a
 * constant true: the loop runs its whole trip count. */
static bool never_exits_early(const Graph *body)
{
    const Node *out = graph_output_node(body);
    const Node *c = out && out->num_args > 0 ? out->args[0] : NULL;
    while (c && c->op == &fx_op_Identity && c->num_args == 1)
        c = c->args[0];
    if (c && c == graph_placeholder(body, 1))
        return true;
    const Tensor *v = c && c->opcode == FX_OPCODE_GET_ATTR ? c->value : NULL;
    return v && tensor_numel(v) == 1 && tensor_get_int(v, 0) != 0;
}

static Node *scalar_constant(Graph *g, const char *hint, DType dtype, int64_t v, Diag *d)
{
    TensorType t = {.dtype = dtype};
    Tensor *x = tensor_new(&t, d);
    if (!x)
        return NULL;
    fxrt_store_i64(dtype, x->data, 0, v);
    return graph_create_constant(g, NULL, hint, x, d);
}

/* An untyped node of op at ip (shape propagation types it next), with the
 * axis attribute when axis >= 0. */
static Node *make_op(InsertPoint *ip, const OpDef *op, const char *hint, Node *const *args,
                     int num_args, int64_t axis, Diag *d)
{
    Node *n = graph_create_op(ip->graph, ip->before, op, hint, args, num_args);
    if (!n || !node_set_num_outputs(n, 1)) {
        diag_error(d, FX_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (axis >= 0 && !node_set_attr_int(n, "axis", axis)) {
        diag_error(d, FX_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return op_apply_attr_specs(op, n, d) == FX_OK ? n : NULL;
}

/* items[0..count) stacked along a new axis `axis`. */
static Node *stack(InsertPoint *ip, Node *const *items, int64_t count, int64_t axis,
                   const char *hint, Diag *d)
{
    Tensor *axes_value = tensor_new_ints(&axis, 1, d);
    Node *axes = axes_value ? graph_create_constant(ip->graph, NULL, "axes", axes_value, d) : NULL;
    Node **parts = fx_alloc_array((size_t)count, sizeof *parts);
    Node *result = NULL;
    bool ok = axes && parts;
    for (int64_t i = 0; i < count && ok; i++) {
        Node *args[2] = {items[i], axes};
        ok = (parts[i] = make_op(ip, &fx_op_Unsqueeze, hint, args, 2, -1, d)) != NULL;
    }
    if (ok)
        result = make_op(ip, &fx_op_Concat, hint, parts, (int)count, axis, d);
    else if (!parts)
        diag_error(d, FX_ERR_NOMEM, "out of memory");
    free(parts);
    return result;
}

/* Per-iteration working arrays of one unrolling. */
typedef struct Unroll {
    Node **inputs;  /* the body's placeholders' values */
    Node **results; /* its outputs' copies */
    Node **items;   /* scan output k, position t: items[k * trips + t] */
    Node **final;   /* the node's outputs */
} Unroll;

static bool unroll_alloc(Unroll *u, int num_inputs, int num_results, int64_t scans,
                         int64_t trips, int num_outputs)
{
    u->inputs = fx_alloc_array((size_t)num_inputs + 1, sizeof *u->inputs);
    u->results = fx_alloc_array((size_t)num_results + 1, sizeof *u->results);
    u->items = fx_alloc_array((size_t)(scans * trips) + 1, sizeof *u->items);
    u->final = fx_alloc_array((size_t)num_outputs + 1, sizeof *u->final);
    return u->inputs && u->results && u->items && u->final;
}

static void unroll_free(Unroll *u)
{
    free(u->inputs);
    free(u->results);
    free(u->items);
    free(u->final);
}

/* Loop(M, cond, carried..., captures...); returns 1 when unrolled, 0 when
 * left, -1 on error. */
static int unroll_loop(Node *n, Diag *d)
{
    const Tensor *m = n->num_args >= 2 ? node_const_value(n->args[0]) : NULL;
    const Tensor *first = n->args[1] ? node_const_value(n->args[1]) : NULL;
    const Graph *body = n->body;
    int carried = n->num_args - 2 - (int)node_attr_int(n, "captures", 0);
    int scans = n->num_outputs - carried;
    if (!m || tensor_numel(m) != 1 || (n->args[1] && !first) || !body || carried < 0 ||
        scans < 0 || !never_exits_early(body))
        return 0;
    int64_t trips = first && tensor_get_int(first, 0) == 0 ? 0 : tensor_get_int(m, 0);
    if (trips < 0)
        trips = 0;
    if ((scans > 0 && trips == 0) || trips > UNROLL_MAX_NODES / body_size(body))
        return 0;
    Unroll u;
    int num_results = 1 + carried + scans;
    if (!unroll_alloc(&u, n->num_args, num_results, scans, trips, n->num_outputs)) {
        unroll_free(&u);
        diag_error(d, FX_ERR_NOMEM, "out of memory");
        return -1;
    }
    InsertPoint ip = insert_before(n);
    Graph *g = n->graph;
    FxStatus st = FX_OK;
    for (int j = 0; j < carried; j++)
        u.final[j] = n->args[2 + j];
    for (int64_t i = 0; i < trips && st == FX_OK; i++) {
        u.inputs[0] = scalar_constant(g, "iteration", FXRT_DTYPE_INT64, i, d);
        u.inputs[1] = scalar_constant(g, "running", FXRT_DTYPE_BOOL, 1, d);
        for (int j = 0; j < carried; j++)
            u.inputs[2 + j] = u.final[j];
        for (int k = 2 + carried; k < n->num_args; k++)
            u.inputs[k] = n->args[k];
        st = u.inputs[0] && u.inputs[1] ? graph_inline_body(&ip, body, u.inputs, u.results, d)
                                        : FX_ERR_NOMEM;
        for (int j = 0; j < carried && st == FX_OK; j++)
            u.final[j] = u.results[1 + j];
        for (int k = 0; k < scans && st == FX_OK; k++)
            u.items[k * trips + i] = u.results[1 + carried + k];
    }
    for (int k = 0; k < scans && st == FX_OK; k++)
        if (!(u.final[carried + k] = stack(&ip, u.items + k * trips, trips, 0, n->name, d)))
            st = FX_ERR_INVALID;
    if (st == FX_OK)
        st = node_replace_outputs(n, u.final, d);
    unroll_free(&u);
    return st == FX_OK ? 1 : -1;
}

static int64_t attr_at(const Node *n, const char *name, int k)
{
    const int64_t *v;
    int64_t count = node_attr_ints(n, name, &v);
    return k < count ? v[k] : 0;
}

/* One Scan's operands: args[first + k] is the body's input k (states, scan
 * inputs, then captures). */
typedef struct ScanShape {
    int first, states, inputs, outputs, num_body_inputs;
    int64_t trips;
} ScanShape;

static Node *gather_at(InsertPoint *ip, Node *x, int64_t at, int64_t axis, Diag *d)
{
    Node *index = scalar_constant(ip->graph, "step", FXRT_DTYPE_INT64, at, d);
    Node *args[2] = {x, index};
    return index ? make_op(ip, &fx_op_Gather, x->name, args, 2, axis, d) : NULL;
}

/* The copies of n's body over one sequence: states and scan inputs from
 * in[] (ranks: the unbatched ones, in_rank[]), captures from n's arguments;
 * the scan outputs (ranks out_rank[]) and final states into final[]. */
static FxStatus scan_copies(InsertPoint *ip, const Node *n, const ScanShape *f, Node *const *in,
                            const int *in_rank, const int *out_rank, Node **final, Diag *d)
{
    Unroll u;
    if (!unroll_alloc(&u, f->num_body_inputs, f->states + f->outputs, f->outputs, f->trips,
                      f->states + f->outputs)) {
        unroll_free(&u);
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    }
    FxStatus st = FX_OK;
    for (int j = 0; j < f->states; j++)
        u.final[j] = in[j];
    for (int64_t t = 0; t < f->trips && st == FX_OK; t++) {
        for (int j = 0; j < f->states; j++)
            u.inputs[j] = u.final[j];
        for (int s = 0; s < f->inputs && st == FX_OK; s++) {
            int64_t axis = attr_at(n, "scan_input_axes", s);
            axis = axis < 0 ? axis + in_rank[f->states + s] : axis;
            int64_t at = attr_at(n, "scan_input_directions", s) ? f->trips - 1 - t : t;
            if (!(u.inputs[f->states + s] = gather_at(ip, in[f->states + s], at, axis, d)))
                st = FX_ERR_INVALID;
        }
        for (int k = f->states + f->inputs; k < f->num_body_inputs; k++)
            u.inputs[k] = n->args[f->first + k];
        if (st == FX_OK)
            st = graph_inline_body(ip, n->body, u.inputs, u.results, d);
        for (int j = 0; j < f->states && st == FX_OK; j++)
            u.final[j] = u.results[j];
        for (int k = 0; k < f->outputs && st == FX_OK; k++) {
            int64_t at = attr_at(n, "scan_output_directions", k) ? f->trips - 1 - t : t;
            u.items[k * f->trips + at] = u.results[f->states + k];
        }
    }
    for (int k = 0; k < f->outputs && st == FX_OK; k++) {
        int64_t axis = attr_at(n, "scan_output_axes", k);
        axis = axis < 0 ? axis + out_rank[k] : axis;
        if (!(u.final[f->states + k] =
                  stack(ip, u.items + k * f->trips, f->trips, axis, n->name, d)))
            st = FX_ERR_INVALID;
    }
    for (int k = 0; k < f->states + f->outputs && st == FX_OK; k++)
        final[k] = u.final[k];
    unroll_free(&u);
    return st;
}

/* Scan(states..., scan inputs..., captures...), typed; the batched (opset
 * 8) form runs the copies once per batch entry, on Gathers of its inputs,
 * and stacks the entries' results. */
static int unroll_scan(Node *n, Diag *d)
{
    bool batched = node_attr_int(n, "batched", 0) != 0;
    ScanShape f = {.first = batched, .inputs = (int)node_attr_int(n, "num_scan_inputs", 0)};
    f.states = n->num_args - f.first - f.inputs - (int)node_attr_int(n, "captures", 0);
    f.outputs = n->num_outputs - f.states;
    f.num_body_inputs = n->num_args - f.first;
    if (!n->body || !n->shapes_known || f.inputs < 1 || f.states < 0 || f.outputs < 0 ||
        f.num_body_inputs > SCAN_MAX_OPERANDS || n->num_outputs > SCAN_MAX_OPERANDS)
        return 0;
    const TensorType *x0 = &n->args[f.first + f.states]->out_types[0];
    int64_t batch = batched ? x0->dims[0] : 1;
    int rank0 = x0->rank - batched;
    int64_t axis0 = attr_at(n, "scan_input_axes", 0);
    f.trips = x0->dims[batched + (axis0 < 0 ? axis0 + rank0 : axis0)];
    if (f.trips <= 0 || batch <= 0 ||
        f.trips * batch > UNROLL_MAX_NODES / (body_size(n->body) + f.inputs))
        return 0;
    int in_rank[SCAN_MAX_OPERANDS], out_rank[SCAN_MAX_OPERANDS];
    for (int k = 0; k < f.states + f.inputs; k++)
        in_rank[k] = n->args[f.first + k]->out_types[0].rank - batched;
    for (int k = 0; k < f.outputs; k++)
        out_rank[k] = n->out_types[f.states + k].rank - batched;
    Node **in = fx_alloc_array((size_t)f.num_body_inputs + 1, sizeof *in);
    Node **entry = fx_alloc_array((size_t)n->num_outputs + 1, sizeof *entry);
    Node **per_batch = fx_alloc_array((size_t)(n->num_outputs * batch) + 1, sizeof *per_batch);
    Node **final = fx_alloc_array((size_t)n->num_outputs + 1, sizeof *final);
    FxStatus st = in && entry && per_batch && final
                      ? FX_OK
                      : diag_error(d, FX_ERR_NOMEM, "out of memory");
    InsertPoint ip = insert_before(n);
    for (int64_t b = 0; b < batch && st == FX_OK; b++) {
        for (int k = 0; k < f.states + f.inputs && st == FX_OK; k++) {
            Node *x = n->args[f.first + k];
            if (batched && !(x = gather_at(&ip, x, b, 0, d)))
                st = FX_ERR_INVALID;
            in[k] = x;
        }
        if (st == FX_OK)
            st = scan_copies(&ip, n, &f, in, in_rank, out_rank, batched ? entry : final, d);
        for (int k = 0; batched && k < n->num_outputs && st == FX_OK; k++)
            per_batch[k * batch + b] = entry[k];
    }
    for (int k = 0; batched && k < n->num_outputs && st == FX_OK; k++)
        if (!(final[k] = stack(&ip, per_batch + k * batch, batch, 0, n->name, d)))
            st = FX_ERR_INVALID;
    if (st == FX_OK)
        st = node_replace_outputs(n, final, d);
    free(in);
    free(entry);
    free(per_batch);
    free(final);
    return st == FX_OK ? 1 : -1;
}

int unroll_loops(Graph *g, Diag *d)
{
    /* Unrolling erases the node and its getitems (and what only they read),
     * so the walk starts over after each one. */
    int unrolled = 0;
    for (Node *n = g->root.next; n != &g->root;) {
        int r = n->opcode != FX_OPCODE_CALL_FUNCTION ? 0
                : n->op == &fx_op_Loop               ? unroll_loop(n, d)
                : n->op == &fx_op_Scan               ? unroll_scan(n, d)
                                                     : 0;
        if (r < 0)
            return -1;
        unrolled += r;
        n = r ? g->root.next : n->next;
    }
    return unrolled;
}
