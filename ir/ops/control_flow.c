/*
 * control_flow.c - If, Loop and Scan, whose bodies are nested graphs, and
 * Unsupported, the stand-in for an op fxcc refuses inside a body.
 *
 * A body's placeholders are its ONNX inputs (If: none; Loop: the iteration
 * number, the condition, the loop-carried values; Scan: the states and one
 * slice of each scan input) followed by the values it reads from the
 * enclosing graph, which the loader made explicit arguments of the node in
 * the same order (FX.md: a body reads nothing from outside).  Shape
 * inference types those placeholders from the node's arguments, passes on
 * the compile-time values of captured constants (so a Reshape in a branch
 * reading an outer shape stays static) and propagates the body.
 *
 * If: a condition with a compile-time value types the taken branch only
 * (opt/fold_if.c then inlines it); otherwise both branches must give the
 * same static types.  Loop: the trip count must be a compile-time constant;
 * inside the body the condition placeholder is true (the body only runs
 * while it is), so a condition passed through unchanged is a constant true
 * and the iteration count is exact; scan outputs need that exact count.
 * Scan: the trip count is the scan inputs' length along their axes; opset 8's
 * form (a leading batch axis on every input and output, no sequence_lens)
 * runs the opset-9 scan once per batch entry.
 *
 * The interpreter runs the bodies with interp_run.  Loops and Scans the
 * pipeline did not unroll (opt/unroll_loops.c) have no emitter: `compile`
 * refuses them naming the op.  An If decided at run time reaches the code
 * generator laid out flat (opt/lower_if.c): BranchBegin(cond) ... BranchEnd
 * around each branch's nodes, a C goto past them when the branch is not
 * taken, and a Where choosing each output.  Both branches are planned in the
 * arena like any other values; only the taken one runs.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* --- shared --------------------------------------------------------------- */

/* Types body placeholder ph as t, with compile-time value v (NULL: none). */
static FxStatus bind_body_input(InferCtx *c, Node *ph, const TensorType *t, const Tensor *v)
{
    if (!ph)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "its body has fewer inputs than the node has arguments");
    if (ph->num_outputs != 1 && !node_set_num_outputs(ph, 1))
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    ph->out_types[0] = *t;
    for (int i = 0; i < FX_MAX_RANK; i++)
        ph->dim_params[i] = NULL;
    tensor_free(ph->const_values[0]);
    ph->const_values[0] = v ? tensor_clone(v, c->diag) : NULL;
    return v && !ph->const_values[0] ? FX_ERR_NOMEM : FX_OK;
}

/* Placeholders first..count of body take arguments arg0.. of the node. */
static FxStatus bind_captures(InferCtx *c, Graph *body, int first, int arg0)
{
    int count = graph_num_placeholders(body);
    if (count - first != c->num_inputs - arg0)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "its body has %d inputs for %d arguments", count - first,
                               c->num_inputs - arg0);
    FxStatus st = FX_OK;
    for (int k = first; k < count && st == FX_OK; k++) {
        int a = arg0 + k - first;
        if (!c->in[a])
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                                   "argument %d, read by its body, is missing", a);
        st = bind_body_input(c, graph_placeholder(body, k), c->in[a], c->in_value[a]);
    }
    return st;
}

static FxStatus infer_body(InferCtx *c, Graph *body, const char *role, int want_outputs)
{
    if (!body)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "has no %s", role);
    FxStatus st = graph_propagate_shapes(body, NULL, 0, c->diag);
    if (st != FX_OK)
        return diag_node_error(c->diag, st, c->node, "its %s cannot be typed (see above)", role);
    const Node *out = graph_output_node(body);
    if (!out || out->num_args != want_outputs)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "its %s returns %d values; %d expected", role,
                               out ? out->num_args : 0, want_outputs);
    return FX_OK;
}

static const TensorType *body_output_type(const Graph *body, int k)
{
    return &graph_output_node(body)->args[k]->out_types[0];
}

static bool is_scalar_of(const TensorType *t, DType dtype)
{
    return t->dtype == dtype && type_numel(t) == 1;
}

/* Runs body on `inputs`, leaving its results in outs (caller frees). */
static FxStatus run_body(EvalCtx *c, const Graph *body, const Tensor *const *inputs,
                         int num_inputs, Tensor **outs, int num_outs)
{
    FxStatus st = interp_run(body, inputs, num_inputs, outs, num_outs, NULL, NULL, c->diag);
    if (st != FX_OK)
        diag_node_error(c->diag, st, c->node, "its body failed (see above)");
    return st;
}

static void free_all(Tensor **t, int count)
{
    for (int k = 0; k < count; k++) {
        tensor_free(t[k]);
        t[k] = NULL;
    }
}

/* Copies slice `index` of `axis` of `full` to or from the contiguous `slice`. */
static void copy_slice(const Tensor *full, int axis, int64_t index, void *slice, bool into_slice)
{
    size_t elem = fxrt_dtype_size(full->type.dtype);
    int64_t outer = 1, inner = 1, len = full->type.dims[axis];
    for (int i = 0; i < axis; i++)
        outer *= full->type.dims[i];
    for (int i = axis + 1; i < full->type.rank; i++)
        inner *= full->type.dims[i];
    size_t run = (size_t)inner * elem;
    for (int64_t o = 0; o < outer; o++) {
        char *f = (char *)full->data + ((size_t)(o * len + index) * run);
        char *s = (char *)slice + (size_t)o * run;
        if (into_slice)
            memcpy(s, f, run);
        else
            memcpy(f, s, run);
    }
}

/* t with axis removed (into_slice) or a dim of length len inserted there. */
static bool type_along(const TensorType *t, int axis, int64_t len, bool remove, TensorType *out)
{
    *out = *t;
    if (remove) {
        for (int i = axis; i + 1 < t->rank; i++)
            out->dims[i] = t->dims[i + 1];
        out->rank--;
        return true;
    }
    if (t->rank >= FX_MAX_RANK)
        return false;
    for (int i = t->rank; i > axis; i--)
        out->dims[i] = t->dims[i - 1];
    out->dims[axis] = len;
    out->rank++;
    return true;
}

/* --- If ------------------------------------------------------------------- */

static FxStatus if_infer(InferCtx *c)
{
    Node *n = c->node;
    if (!is_scalar_of(c->in[0], FXRT_DTYPE_BOOL))
        return diag_node_error(c->diag, FX_ERR_SHAPE, n,
                               "its condition must be one bool, not %s",
                               type_format(c->in[0], (char[160]){0}, 160));
    const Tensor *cond = c->in_value[0];
    Graph *bodies[2] = {n->body, n->else_body};
    const char *roles[2] = {"then_branch", "else_branch"};
    for (int b = 0; b < 2; b++) {
        if (cond && (tensor_get_int(cond, 0) != 0) != (b == 0))
            continue; /* the branch not taken: fold_if drops it untyped */
        FxStatus st = bodies[b] ? bind_captures(c, bodies[b], 0, 1) : FX_OK;
        if (st == FX_OK)
            st = infer_body(c, bodies[b], roles[b], c->num_outputs);
        if (st != FX_OK)
            return st;
    }
    int taken = cond && tensor_get_int(cond, 0) == 0 ? 1 : 0;
    for (int k = 0; k < c->num_outputs; k++) {
        c->out[k] = *body_output_type(bodies[taken], k);
        if (cond)
            continue;
        const TensorType *other = body_output_type(bodies[1], k);
        if (!type_equal(&c->out[k], other)) {
            char a[160], b[160];
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                                   "output %d is %s in then_branch but %s in else_branch; an If "
                                   "decided at run time needs one static type from both "
                                   "branches (fold it by giving its condition's inputs with "
                                   "--const or --shape)",
                                   k, type_format(&c->out[k], a, sizeof a),
                                   type_format(other, b, sizeof b));
        }
    }
    return FX_OK;
}

static FxStatus if_eval(EvalCtx *c)
{
    const Graph *body = tensor_get_int(c->in[0], 0) ? c->node->body : c->node->else_body;
    Tensor **outs = fx_alloc_array((size_t)c->num_outputs, sizeof *outs);
    if (!outs)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    FxStatus st = run_body(c, body, c->in + 1, c->num_inputs - 1, outs, c->num_outputs);
    for (int k = 0; k < c->num_outputs && st == FX_OK; k++)
        memcpy(c->out[k]->data, outs[k]->data, tensor_nbytes(c->out[k]));
    free_all(outs, st == FX_OK ? c->num_outputs : 0);
    free(outs);
    return st;
}

/* then_branch and else_branch become Node.body and Node.else_body at import;
 * captures is the count of trailing arguments the bodies read (all of them,
 * after the condition). */
static const AttrSpec if_attrs[] = {{"captures", FX_ATTR_INT, "0", false}, {NULL}};

const OpDef fx_op_If = {
    .name = "If",
    .min_inputs = 1, .max_inputs = 1 << 20, .min_outputs = 1, .max_outputs = 1 << 20,
    .attrs = if_attrs,
    .infer = if_infer,
    .eval = if_eval,
};

/* --- Loop ----------------------------------------------------------------- */

/* Loop(M, cond, carried..., captures...): body(i, cond, carried...,
 * captures...) -> (cond, carried..., scan outputs...). */
typedef struct LoopForm {
    int carried, scans;
    int64_t trips;
    bool early_exit; /* the body's condition may end the loop early */
} LoopForm;

static int loop_carried(const Node *n, int num_args)
{
    return num_args - 2 - (int)node_attr_int(n, "captures", 0);
}

static FxStatus loop_infer(InferCtx *c)
{
    Node *n = c->node;
    LoopForm f = {.carried = loop_carried(n, c->num_inputs)};
    f.scans = c->num_outputs - f.carried;
    if (f.carried < 0 || f.scans < 0)
        return diag_node_error(c->diag, FX_ERR_INVALID, n,
                               "has %d loop-carried inputs for %d outputs", f.carried,
                               c->num_outputs);
    if (!c->in[0])
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                               "a Loop without a trip count runs until its condition is false, "
                               "a number of iterations fxcc cannot know at compile time");
    if (!is_scalar_of(c->in[0], FXRT_DTYPE_INT64))
        return diag_node_error(c->diag, FX_ERR_SHAPE, n, "its trip count must be one int64");
    if (!c->in_value[0])
        return infer_not_constant(c, 0, "M", "a Loop's trip count must be known at compile time");
    if (c->in[1] && !is_scalar_of(c->in[1], FXRT_DTYPE_BOOL))
        return diag_node_error(c->diag, FX_ERR_SHAPE, n, "its condition must be one bool");
    if (f.scans > 0 && c->in[1] && !c->in_value[1])
        return infer_not_constant(c, 1, "cond", "the length of the Loop's scan outputs depends "
                                                "on whether it runs at all");
    f.trips = tensor_get_int(c->in_value[0], 0);
    if (f.trips < 0)
        f.trips = 0;
    Graph *body = n->body;
    if (!body)
        return diag_node_error(c->diag, FX_ERR_INVALID, n, "has no body");
    TensorType iter = {.dtype = FXRT_DTYPE_INT64}, flag = {.dtype = FXRT_DTYPE_BOOL};
    Tensor *always = tensor_new(&flag, c->diag);
    if (!always)
        return FX_ERR_NOMEM;
    *(uint8_t *)always->data = 1;
    FxStatus st = bind_body_input(c, graph_placeholder(body, 0), &iter, NULL);
    if (st == FX_OK)
        st = bind_body_input(c, graph_placeholder(body, 1), &flag, always);
    tensor_free(always);
    for (int j = 0; j < f.carried && st == FX_OK; j++)
        st = bind_body_input(c, graph_placeholder(body, 2 + j), c->in[2 + j], NULL);
    if (st == FX_OK && graph_num_placeholders(body) != c->num_inputs)
        st = diag_node_error(c->diag, FX_ERR_INVALID, n, "its body has %d inputs for %d arguments",
                             graph_num_placeholders(body), c->num_inputs);
    for (int k = 2 + f.carried; k < c->num_inputs && st == FX_OK; k++)
        st = bind_body_input(c, graph_placeholder(body, k), c->in[k], c->in_value[k]);
    if (st == FX_OK)
        st = infer_body(c, body, "body", 1 + f.carried + f.scans);
    if (st != FX_OK)
        return st;
    const Node *cond_out = graph_output_node(body)->args[0];
    if (!is_scalar_of(&cond_out->out_types[0], FXRT_DTYPE_BOOL))
        return diag_node_error(c->diag, FX_ERR_SHAPE, n, "its body's condition must be one bool");
    const Tensor *cv = node_const_value(cond_out);
    f.early_exit = !cv || tensor_get_int(cv, 0) == 0;
    for (int j = 0; j < f.carried; j++) {
        const TensorType *t = body_output_type(body, 1 + j);
        if (!type_equal(t, c->in[2 + j])) {
            char a[160], b[160];
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                                   "loop-carried value %d enters as %s but the body makes it %s; "
                                   "fxcc needs it one static type", j,
                                   type_format(c->in[2 + j], a, sizeof a),
                                   type_format(t, b, sizeof b));
        }
        c->out[j] = *t;
    }
    if (f.scans > 0 && f.early_exit)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                               "its body's condition can end the loop early, so the length of "
                               "its scan outputs depends on the data (fxcc needs static shapes)");
    if (f.scans > 0 && c->in_value[1] && tensor_get_int(c->in_value[1], 0) == 0)
        f.trips = 0;
    for (int k = 0; k < f.scans; k++)
        if (!type_along(body_output_type(body, 1 + f.carried + k), 0, f.trips, false,
                        &c->out[f.carried + k]))
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                                   "scan output %d would have more than %d dimensions", k,
                                   FX_MAX_RANK);
    return FX_OK;
}

static FxStatus loop_eval(EvalCtx *c)
{
    const Node *n = c->node;
    int carried = loop_carried(n, c->num_inputs), scans = c->num_outputs - carried;
    int num_body_out = 1 + carried + scans;
    int64_t trips = tensor_get_int(c->in[0], 0);
    bool cond = !c->in[1] || tensor_get_int(c->in[1], 0) != 0;
    TensorType iter_type = {.dtype = FXRT_DTYPE_INT64}, flag_type = {.dtype = FXRT_DTYPE_BOOL};
    Tensor *iter = tensor_new(&iter_type, c->diag), *flag = tensor_new(&flag_type, c->diag);
    const Tensor **in = fx_alloc_array((size_t)c->num_inputs, sizeof *in);
    Tensor **outs = fx_alloc_array((size_t)num_body_out, sizeof *outs);
    FxStatus st = iter && flag && in && outs ? FX_OK : FX_ERR_NOMEM;
    for (int j = 0; j < carried && st == FX_OK; j++)
        memcpy(c->out[j]->data, c->in[2 + j]->data, tensor_nbytes(c->out[j]));
    for (int64_t i = 0; i < trips && cond && st == FX_OK; i++) {
        *(int64_t *)iter->data = i;
        *(uint8_t *)flag->data = 1;
        in[0] = iter;
        in[1] = flag;
        for (int j = 0; j < carried; j++)
            in[2 + j] = c->out[j];
        for (int k = 2 + carried; k < c->num_inputs; k++)
            in[k] = c->in[k];
        if ((st = run_body(c, n->body, in, c->num_inputs, outs, num_body_out)) != FX_OK)
            break;
        cond = tensor_get_int(outs[0], 0) != 0;
        for (int j = 0; j < carried; j++)
            memcpy(c->out[j]->data, outs[1 + j]->data, tensor_nbytes(c->out[j]));
        for (int k = 0; k < scans; k++)
            copy_slice(c->out[carried + k], 0, i, outs[1 + carried + k]->data, false);
        free_all(outs, num_body_out);
    }
    tensor_free(iter);
    tensor_free(flag);
    free(in);
    free(outs);
    return st == FX_ERR_NOMEM ? diag_node_error(c->diag, st, n, "out of memory") : st;
}

static const AttrSpec loop_attrs[] = {{"captures", FX_ATTR_INT, "0", false}, {NULL}};

const OpDef fx_op_Loop = {
    .name = "Loop",
    .min_inputs = 0, .max_inputs = 1 << 20, .min_outputs = 1, .max_outputs = 1 << 20,
    .attrs = loop_attrs,
    .infer = loop_infer,
    .eval = loop_eval,
};

/* --- Scan ----------------------------------------------------------------- */

/* Scan(states..., scan inputs..., captures...) (opset 8: a sequence_lens
 * slot first, which must be empty, and a batch axis on everything):
 * body(states..., slices..., captures...) -> (states..., scan slices...). */
typedef struct ScanForm {
    int first;   /* argument of the first state: 1 in the batched form */
    int states, inputs, outputs;
    bool batched;
    int64_t batch, trips;
} ScanForm;

static FxStatus scan_form(const Node *n, int num_args, int num_outputs, ScanForm *f, Diag *d)
{
    memset(f, 0, sizeof *f);
    f->batched = node_attr_int(n, "batched", 0) != 0;
    f->first = f->batched;
    f->inputs = (int)node_attr_int(n, "num_scan_inputs", 0);
    f->states = num_args - f->first - f->inputs - (int)node_attr_int(n, "captures", 0);
    f->outputs = num_outputs - f->states;
    if (f->inputs < 1 || f->states < 0 || f->outputs < 0)
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "num_scan_inputs %d does not fit its %d arguments and %d outputs",
                               f->inputs, num_args, num_outputs);
    if (f->batched && n->args[0])
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                               "sequence_lens (opset-8 Scan) is not supported; leave it empty");
    return FX_OK;
}

/* Axis of scan input (out = false) or output k, normalized against rank; the
 * batched form scans axis 0 of each batch entry. */
static bool scan_axis(const Node *n, bool output, int k, int rank, int *axis)
{
    const int64_t *v;
    int64_t count = node_attr_ints(n, output ? "scan_output_axes" : "scan_input_axes", &v);
    int64_t a = k < count ? v[k] : 0;
    if (a < 0)
        a += rank;
    *axis = (int)a;
    return a >= 0 && a < rank;
}

static bool scan_reversed(const Node *n, bool output, int k)
{
    const int64_t *v;
    int64_t count =
        node_attr_ints(n, output ? "scan_output_directions" : "scan_input_directions", &v);
    return k < count && v[k] != 0;
}

/* A type without its batch axis, for the batched form. */
static TensorType unbatched(const TensorType *t, bool batched)
{
    TensorType u = *t;
    if (batched)
        type_along(t, 0, 0, true, &u);
    return u;
}

static FxStatus scan_infer(InferCtx *c)
{
    Node *n = c->node;
    ScanForm f;
    FxStatus st = scan_form(n, c->num_inputs, c->num_outputs, &f, c->diag);
    if (st != FX_OK)
        return st;
    Graph *body = n->body;
    if (!body)
        return diag_node_error(c->diag, FX_ERR_INVALID, n, "has no body");
    f.trips = -1;
    for (int s = 0; s < f.inputs; s++) {
        const TensorType *t = c->in[f.first + f.states + s];
        if (!t)
            return diag_node_error(c->diag, FX_ERR_INVALID, n, "scan input %d is missing", s);
        if (f.batched && (t->rank < 2 || (s > 0 && t->dims[0] != f.batch)))
            return diag_node_error(c->diag, FX_ERR_SHAPE, n,
                                   "scan input %d needs a batch axis and a sequence axis", s);
        f.batch = f.batched ? t->dims[0] : 1;
        TensorType u = unbatched(t, f.batched), slice;
        int axis;
        if (!scan_axis(n, false, s, u.rank, &axis))
            return diag_node_error(c->diag, FX_ERR_INVALID, n,
                                   "scan_input_axes[%d] is out of range for rank %d", s, u.rank);
        if (f.trips >= 0 && u.dims[axis] != f.trips)
            return diag_node_error(c->diag, FX_ERR_SHAPE, n,
                                   "scan input %d has length %lld, input 0 has %lld", s,
                                   (long long)u.dims[axis], (long long)f.trips);
        f.trips = u.dims[axis];
        type_along(&u, axis, 0, true, &slice);
        if ((st = bind_body_input(c, graph_placeholder(body, f.states + s), &slice, NULL)) != FX_OK)
            return st;
    }
    for (int j = 0; j < f.states && st == FX_OK; j++) {
        if (!c->in[f.first + j])
            return diag_node_error(c->diag, FX_ERR_INVALID, n, "state %d is missing", j);
        TensorType u = unbatched(c->in[f.first + j], f.batched);
        st = bind_body_input(c, graph_placeholder(body, j), &u, NULL);
    }
    if (st == FX_OK)
        st = bind_captures(c, body, f.states + f.inputs, f.first + f.states + f.inputs);
    if (st == FX_OK)
        st = infer_body(c, body, "body", f.states + f.outputs);
    if (st != FX_OK)
        return st;
    for (int j = 0; j < f.states; j++) {
        TensorType u = unbatched(c->in[f.first + j], f.batched);
        if (!type_equal(body_output_type(body, j), &u)) {
            char a[160], b[160];
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                                   "state %d enters as %s but the body makes it %s; fxcc needs "
                                   "it one static type", j, type_format(&u, a, sizeof a),
                                   type_format(body_output_type(body, j), b, sizeof b));
        }
        c->out[j] = *c->in[f.first + j];
    }
    for (int k = 0; k < f.outputs; k++) {
        const TensorType *t = body_output_type(body, f.states + k);
        int axis;
        TensorType stacked;
        if (!scan_axis(n, true, k, t->rank + 1, &axis))
            return diag_node_error(c->diag, FX_ERR_INVALID, n,
                                   "scan_output_axes[%d] is out of range for rank %d", k,
                                   t->rank + 1);
        if (!type_along(t, axis, f.trips, false, &stacked) ||
            (f.batched && !type_along(&stacked, 0, f.batch, false, &c->out[f.states + k])))
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                                   "scan output %d would have more than %d dimensions", k,
                                   FX_MAX_RANK);
        if (!f.batched)
            c->out[f.states + k] = stacked;
    }
    return FX_OK;
}

/* Batch entry b of t as a tensor that borrows t's data (the whole of t when
 * the form is not batched). */
static Tensor batch_entry(const Tensor *t, bool batched, int64_t b)
{
    Tensor e = {.type = unbatched(&t->type, batched), .data = t->data};
    if (batched)
        e.data = (char *)t->data + (size_t)b * type_nbytes(&e.type);
    return e;
}

static FxStatus scan_eval(EvalCtx *c)
{
    const Node *n = c->node;
    ScanForm f;
    FxStatus st = scan_form(n, c->num_inputs, c->num_outputs, &f, c->diag);
    if (st != FX_OK)
        return st;
    int num_body_in = c->num_inputs - f.first, num_body_out = f.states + f.outputs;
    const Graph *body = n->body;
    const Tensor **in = fx_alloc_array((size_t)num_body_in, sizeof *in);
    Tensor **outs = fx_alloc_array((size_t)num_body_out, sizeof *outs);
    Tensor **slices = fx_alloc_array((size_t)f.inputs, sizeof *slices);
    Tensor *entries = fx_alloc_array((size_t)(num_body_in + c->num_outputs), sizeof *entries);
    if (!in || !outs || !slices || !entries)
        st = diag_node_error(c->diag, FX_ERR_NOMEM, n, "out of memory");
    f.batch = f.batched ? c->in[f.first + f.states]->type.dims[0] : 1;
    for (int s = 0; s < f.inputs && st == FX_OK; s++) {
        const Node *ph = graph_placeholder(body, f.states + s);
        if (!(slices[s] = tensor_new(&ph->out_types[0], c->diag)))
            st = FX_ERR_NOMEM;
    }
    for (int64_t b = 0; b < f.batch && st == FX_OK; b++) {
        Tensor *arg = entries, *res = entries + num_body_in;
        for (int k = 0; k < num_body_in; k++)
            arg[k] = batch_entry(c->in[f.first + k], f.batched && k < f.states + f.inputs, b);
        for (int k = 0; k < c->num_outputs; k++)
            res[k] = batch_entry(c->out[k], f.batched, b);
        for (int j = 0; j < f.states; j++)
            memcpy(res[j].data, arg[j].data, type_nbytes(&res[j].type));
        int64_t trips = 0;
        if (f.inputs > 0) {
            int axis;
            scan_axis(n, false, 0, arg[f.states].type.rank, &axis);
            trips = arg[f.states].type.dims[axis];
        }
        for (int64_t t = 0; t < trips && st == FX_OK; t++) {
            for (int j = 0; j < f.states; j++)
                in[j] = &res[j];
            for (int s = 0; s < f.inputs; s++) {
                int axis;
                scan_axis(n, false, s, arg[f.states + s].type.rank, &axis);
                copy_slice(&arg[f.states + s], axis, scan_reversed(n, false, s) ? trips - 1 - t : t,
                           slices[s]->data, true);
                in[f.states + s] = slices[s];
            }
            for (int k = f.states + f.inputs; k < num_body_in; k++)
                in[k] = &arg[k];
            if ((st = run_body(c, body, in, num_body_in, outs, num_body_out)) != FX_OK)
                break;
            for (int j = 0; j < f.states; j++)
                memcpy(res[j].data, outs[j]->data, type_nbytes(&res[j].type));
            for (int k = 0; k < f.outputs; k++) {
                int axis;
                scan_axis(n, true, k, res[f.states + k].type.rank, &axis);
                copy_slice(&res[f.states + k], axis, scan_reversed(n, true, k) ? trips - 1 - t : t,
                           outs[f.states + k]->data, false);
            }
            free_all(outs, num_body_out);
        }
    }
    for (int s = 0; slices && s < f.inputs; s++)
        tensor_free(slices[s]);
    free(slices);
    free(entries);
    free(in);
    free(outs);
    return st;
}

/* Opset 8 scans a batch of sequences ("directions" for its inputs): marked
 * batched, its directions moved to scan_input_directions. */
static FxStatus scan_canonicalize(Node *n, int opset, Diag *d)
{
    if (opset >= 9)
        return FX_OK;
    const int64_t *dirs;
    int64_t count = node_attr_ints(n, "directions", &dirs);
    if ((count > 0 && !node_set_attr_ints(n, "scan_input_directions", dirs, count)) ||
        !node_set_attr_int(n, "batched", 1))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    node_remove_attr(n, "directions");
    return FX_OK;
}

static const AttrSpec scan_attrs[] = {
    {"num_scan_inputs", FX_ATTR_INT, NULL, true},
    {"scan_input_axes", FX_ATTR_INTS, "[]", false},
    {"scan_input_directions", FX_ATTR_INTS, "[]", false},
    {"scan_output_axes", FX_ATTR_INTS, "[]", false},
    {"scan_output_directions", FX_ATTR_INTS, "[]", false},
    {"directions", FX_ATTR_INTS, NULL, false},
    {"batched", FX_ATTR_INT, "0", false},
    {"captures", FX_ATTR_INT, "0", false},
    {NULL}};

const OpDef fx_op_Scan = {
    .name = "Scan",
    .min_inputs = 0, .max_inputs = 1 << 20, .min_outputs = 1, .max_outputs = 1 << 20,
    .attrs = scan_attrs,
    .canonicalize = scan_canonicalize,
    .infer = scan_infer,
    .eval = scan_eval,
};

/* --- Unsupported ------------------------------------------------------------ */

/* Stands in a control-flow body for a node fxcc refuses (onnx_op, reason):
 * typing it is the refusal, so it only survives when its If is not folded
 * away, and opt/fold_if.c lists every one left before any other work. */
static FxStatus unsupported_infer(InferCtx *c)
{
    return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node, "%s",
                           node_attr_string(c->node, "reason", "not supported"));
}

static const AttrSpec unsupported_attrs[] = {
    {"onnx_op", FX_ATTR_STRING, "", false}, {"reason", FX_ATTR_STRING, "", false}, {NULL}};

const OpDef fx_op_Unsupported = {
    .name = "Unsupported",
    .min_inputs = 0, .max_inputs = 1 << 20, .min_outputs = 1, .max_outputs = 1 << 20,
    .flags = FX_OPF_INTERNAL | FX_OPF_OPAQUE,
    .attrs = unsupported_attrs,
    .infer = unsupported_infer,
};

/* --- BranchBegin, BranchEnd ------------------------------------------------ */

/* BranchBegin(cond) -> cond (negate: !cond); BranchEnd(begin) -> the same
 * flag.  The interpreter runs both branches (their ops are pure), so these
 * only pass the flag on; the emitted code skips a branch not taken. */
static FxStatus branch_infer(InferCtx *c)
{
    if (!is_scalar_of(c->in[0], FXRT_DTYPE_BOOL))
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "needs one bool");
    c->out[0] = *c->in[0];
    return FX_OK;
}

static FxStatus branch_begin_eval(EvalCtx *c)
{
    bool taken = tensor_get_int(c->in[0], 0) != 0;
    if (node_attr_int(c->node, "negate", 0))
        taken = !taken;
    *(uint8_t *)c->out[0]->data = taken;
    return FX_OK;
}

static FxStatus branch_end_eval(EvalCtx *c)
{
    memcpy(c->out[0]->data, c->in[0]->data, tensor_nbytes(c->out[0]));
    return FX_OK;
}

/* The label after the branch, named after its BranchBegin (a unique C
 * identifier), so that the goto finds it: labels have function scope. */
static FxStatus branch_begin_emit(EmitCtx *c)
{
    bool negate = node_attr_int(c->node, "negate", 0) != 0;
    emit_line(c, "%s[0] = %s%s[0];", c->out[0], negate ? "!" : "", c->in[0]);
    emit_line(c, "if (!%s[0])", c->out[0]);
    emit_line(c, "    goto skip_%s; /* the branch is not taken */", c->node->name);
    return FX_OK;
}

static FxStatus branch_end_emit(EmitCtx *c)
{
    emit_line(c, "skip_%s:", c->node->args[0]->name);
    emit_line(c, "%s[0] = %s[0];", c->out[0], c->in[0]);
    return FX_OK;
}

static const AttrSpec branch_begin_attrs[] = {{"negate", FX_ATTR_INT, "0", false}, {NULL}};
static const AttrSpec branch_end_attrs[] = {{NULL}};

const OpDef fx_op_BranchBegin = {
    .name = "BranchBegin",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL | FX_OPF_OPAQUE,
    .attrs = branch_begin_attrs,
    .infer = branch_infer,
    .eval = branch_begin_eval,
    .emit = branch_begin_emit,
};

const OpDef fx_op_BranchEnd = {
    .name = "BranchEnd",
    .min_inputs = 1, .max_inputs = 1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL | FX_OPF_OPAQUE,
    .attrs = branch_end_attrs,
    .infer = branch_infer,
    .eval = branch_end_eval,
    .emit = branch_end_emit,
};
