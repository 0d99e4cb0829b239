/*
 * fused_reduction.c - the FusedReduction module kind: one reduction over
 * the innermost axes of a float32 tensor (Softmax, LogSoftmax,
 * LayerNormalization, ReduceSum, ReduceMean, ReduceMax, ReduceMin) together
 * with the elementwise ops that feed it and those that consume its result,
 * run as one loop over the rows.
 *
 * A node of this kind is a call_module whose Node.body is: one placeholder
 * per argument, get_attr nodes for scalar constants and the Reduce axes,
 * the elementwise ops computing the reduction's data input (the prologue:
 * every node the data input depends on, used by nothing else), the
 * reduction, and elementwise ops that read the reduction's result or values
 * independent of it (the epilogue), ending in an output of the reduction's
 * shape or, for a Reduce with kept dims, of its input's (the per-row result
 * broadcast back over the row, as in RMSNorm's x / sqrt(mean(x * x) + eps):
 * the broadcast tail).  The elementwise fusion pass
 * (opt/pass_elementwise_fusion.c) builds them; fused_reduction_body_ok is
 * the one test of what the emitter can write, and the pass leaves a group
 * alone when it says no.
 *
 * Rows: the reduced axes are first_axis..rank-1 and contiguous, so a row is
 * `cols` consecutive elements and the outer axes are walked like a
 * FusedElementwise loop nest (merged where every operand's strides chain).
 * An operand (seen against the reduction's output in the epilogue, against
 * its input elsewhere) must be, along the row, either full (read at j) or
 * constant (all its row axes 1, read at 0); along the outer axes it may
 * broadcast freely.  LayerNormalization's Scale and B hold one value or one
 * per row element.
 *
 * Per row, for the row-shaped kinds (Softmax, LogSoftmax, LayerNorm), the
 * first pass computes the prologue and stores it in the output row, which
 * the later passes read back (the row is in cache, and an output never
 * shares memory with an input of a module); the last pass applies the
 * epilogue and overwrites the row.  A Reduce takes one pass, then its
 * epilogue once per row, then with a broadcast tail one pass writing the
 * row.  The reductions proper follow the runtime kernels' arithmetic step
 * by step (runtime/fxrt_nn_softmax.c, whose exp-and-sum Softmax calls,
 * fxrt_nn_norm.c's row_stats, fxrt_reduce.c's four-chain sum), so that
 * the compiled loop and the interpreter (which runs the body with those
 * kernels) agree to the last bit or nearly so.  Nothing is allocated: no arena, no scratch.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

typedef enum Kind {
    KIND_NONE,
    KIND_SOFTMAX,
    KIND_LOG_SOFTMAX,
    KIND_LAYER_NORM,
    KIND_SUM,
    KIND_MEAN,
    KIND_MAX,
    KIND_MIN
} Kind;

static Kind kind_of(const Node *n)
{
    if (n->opcode != FX_OPCODE_CALL_FUNCTION || !n->op)
        return KIND_NONE;
    switch (op_kind(n->op)) {
    case FX_OP_Softmax: return KIND_SOFTMAX;
    case FX_OP_LogSoftmax: return KIND_LOG_SOFTMAX;
    case FX_OP_LayerNormalization: return KIND_LAYER_NORM;
    case FX_OP_ReduceSum: return KIND_SUM;
    case FX_OP_ReduceMean: return KIND_MEAN;
    case FX_OP_ReduceMax: return KIND_MAX;
    case FX_OP_ReduceMin: return KIND_MIN;
    default: return KIND_NONE;
    }
}

static bool row_shaped(Kind k)
{
    return k == KIND_SOFTMAX || k == KIND_LOG_SOFTMAX || k == KIND_LAYER_NORM;
}

static bool is_f32(const TensorType *t) { return t && t->dtype == FXRT_DTYPE_FLOAT32; }

/* The first reduced axis of a Reduce node, or -1 when the reduced axes are
 * not the innermost ones (size-1 axes may be on either side). */
static int reduce_first_axis(const Node *n, const TensorType *x)
{
    const Node *axes = n->num_args > 1 ? n->args[1] : NULL;
    int64_t count = axes ? type_numel(&axes->out_types[0]) : 0;
    if (count == 0)
        return node_attr_int(n, "noop_with_empty_axes", 0) ? -1 : 0;
    const Tensor *v = node_const_value(axes);
    if (!v)
        return -1;
    uint32_t mask = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t a = tensor_get_int(v, i);
        if (a < 0)
            a += x->rank;
        if (a < 0 || a >= x->rank)
            return -1;
        mask |= 1u << a;
    }
    int first = 0;
    while (!(mask >> first & 1u))
        first++;
    for (int d = first; d < x->rank; d++)
        if (!(mask >> d & 1u) && x->dims[d] != 1)
            return -1;
    return first;
}

/* LayerNormalization's Scale or B: one value, or one per row element. */
static bool param_ok(const TensorType *t, int64_t cols)
{
    return !t || (is_f32(t) && (type_numel(t) == cols || type_numel(t) == 1));
}

bool fused_reduction_supports(const Node *n, int *first_axis)
{
    Kind k = kind_of(n);
    if (k == KIND_NONE || !n->shapes_known || n->num_outputs != 1 || !is_f32(&n->out_types[0]))
        return false;
    const TensorType *x = node_input_type(n, 0);
    if (!is_f32(x) || x->rank == 0 || type_numel(x) == 0)
        return false;
    int first = row_shaped(k) ? (int)node_attr_int(n, "axis", -1) : reduce_first_axis(n, x);
    if (row_shaped(k) && first < 0)
        first += x->rank;
    if (first < 0 || first >= x->rank)
        return false;
    if (k == KIND_SOFTMAX || k == KIND_LOG_SOFTMAX) {
        /* without coerce_2d only `axis` is reduced: the axes after it must be 1 */
        for (int d = first + 1; d < x->rank && !node_attr_int(n, "coerce_2d", 0); d++)
            if (x->dims[d] != 1)
                return false;
    } else if (k == KIND_LAYER_NORM) {
        int64_t cols = 1;
        for (int d = first; d < x->rank; d++)
            cols *= x->dims[d];
        if (!param_ok(node_input_type(n, 1), cols) ||
            !param_ok(n->num_args > 2 ? node_input_type(n, 2) : NULL, cols))
            return false;
    }
    *first_axis = first;
    return true;
}

/* --- the plan: what each body node and placeholder is to the row loop ------ */

/* Where a body value is computed: the prologue in the first pass over the
 * row; the epilogue per element in the last pass (row-shaped kinds) or once
 * per row (Reduce); for a Reduce whose result is broadcast back over the
 * row (x / sqrt(mean(x * x))), the broadcast tail per element in a last
 * pass. */
enum { PHASE_PROLOGUE, PHASE_EPILOGUE, PHASE_BROADCAST, PHASE_COUNT_ };

/* A placeholder read in one phase, at base + j * along_row. */
typedef struct Operand {
    int arg;                /* placeholder index = node argument */
    const Node *ph;
    int phase;
    int64_t along_row;      /* 1: full row, 0: one value per row */
    int64_t row_elems;      /* elements per step of the outer index: cols or 1 */
    TensorType outer;       /* its outer axes, right-aligned against the rows' */
} Operand;

typedef struct Plan {
    const Node *red;
    Kind kind;
    int first_axis;
    int64_t cols;
    bool broadcast;  /* a Reduce whose result is of the input's shape */
    TensorType rows; /* the outer axes of the input */
    int *phase;      /* by body node id, call_function nodes */
    unsigned *reads; /* by body node id, placeholders: bit k = read in phase k */
    Operand *ops;
    int nops;
} Plan;

static void plan_free(Plan *p)
{
    free(p->phase);
    free(p->reads);
    free(p->ops);
}

/* Classifies t (an operand seen against dom, whose first first_axis axes are
 * the rows' and whose other axes are 1 or the row) into o. */
static bool operand_layout(const TensorType *t, const TensorType *dom, int first_axis,
                           int64_t cols, Operand *o)
{
    if (t->rank > dom->rank)
        return false;
    int lead = dom->rank - t->rank; /* dom axes t lacks (broadcast) */
    int n_outer = first_axis - lead > 0 ? first_axis - lead : 0;
    if (n_outer > t->rank)
        n_outer = t->rank;
    bool ones = true, full = lead <= first_axis;
    int64_t dom_row = 1;
    for (int i = n_outer; i < t->rank; i++) {
        ones = ones && t->dims[i] == 1;
        full = full && t->dims[i] == dom->dims[lead + i];
    }
    for (int d = first_axis; d < dom->rank; d++)
        dom_row *= dom->dims[d];
    if (ones) {
        o->along_row = 0;
        o->row_elems = 1;
    } else if (full && dom_row == cols) {
        o->along_row = 1;
        o->row_elems = cols;
    } else {
        return false;
    }
    o->outer.dtype = t->dtype;
    o->outer.rank = n_outer;
    for (int i = 0; i < n_outer; i++)
        o->outer.dims[i] = t->dims[i];
    return true;
}

static FxStatus plan_refuse(Diag *d, const Node *n, const char *why)
{
    return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "FusedReduction body: %s", why);
}

static FxStatus plan_build(const Node *n, const Graph *body, Plan *p, Diag *d)
{
    memset(p, 0, sizeof *p);
    for (const Node *b = body->root.next; b != &body->root; b = b->next) {
        if (kind_of(b) == KIND_NONE)
            continue;
        if (p->red)
            return plan_refuse(d, n, "more than one reduction");
        p->red = b;
    }
    const Node *red = p->red, *result = fused_body_result(body);
    if (!red || !result || !fused_reduction_supports(red, &p->first_axis) ||
        !red->args[0])
        return plan_refuse(d, n, "no reduction over the innermost axes");
    p->kind = kind_of(red);
    const TensorType *x = node_input_type(red, 0), *y = &red->out_types[0];
    /* Broadcasting a Reduce's result over the row needs it per row: kept
     * dims (without them, [rows] would align with the row's last axis). */
    p->broadcast = !row_shaped(p->kind) && result->shapes_known &&
                   type_equal(&result->out_types[0], x) && y->rank == x->rank;
    if (!result->shapes_known || (!type_equal(&result->out_types[0], y) && !p->broadcast))
        return plan_refuse(d, n, "the result is not of the reduction's shape");
    p->cols = 1;
    for (int a = p->first_axis; a < x->rank; a++)
        p->cols *= x->dims[a];
    p->rows.dtype = x->dtype;
    p->rows.rank = p->first_axis;
    memcpy(p->rows.dims, x->dims, (size_t)p->first_axis * sizeof *x->dims);

    int ids = body->next_id, nph = graph_num_placeholders(body);
    p->phase = fx_alloc_array((size_t)ids + 1, sizeof *p->phase);
    p->reads = fx_alloc_array((size_t)ids + 1, sizeof *p->reads);
    p->ops = fx_alloc_array(PHASE_COUNT_ * (size_t)nph + 1, sizeof *p->ops);
    bool *pro = fx_alloc_array((size_t)ids + 1, sizeof *pro), *after = fx_alloc_array((size_t)ids + 1, 1);
    FxStatus st = FX_OK;
    if (!p->phase || !p->reads || !p->ops || !pro || !after) {
        st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        goto done;
    }
    /* The prologue: the data input and what it depends on, walking back. */
    pro[red->args[0]->id] = true;
    for (const Node *b = red->prev; b != &body->root; b = b->prev)
        if (pro[b->id] && b->opcode == FX_OPCODE_CALL_FUNCTION)
            for (int i = 0; i < b->num_args; i++)
                if (b->args[i])
                    pro[b->args[i]->id] = true;
    /* What depends on the reduction. */
    after[red->id] = true;
    for (const Node *b = red->next; b != &body->root; b = b->next)
        for (int i = 0; i < b->num_args && !after[b->id]; i++)
            after[b->id] = b->args[i] && after[b->args[i]->id];
    /* Phases, walking back so that users are decided first: with a
     * broadcast tail, the per-row values are those of the reduction's shape
     * that depend on it and the values only they read. */
    for (const Node *b = body->root.prev; b != &body->root; b = b->prev) {
        if (b == red) {
            for (int i = 1; i < b->num_args; i++)
                if (b->args[i] && b->args[i]->opcode != (p->kind == KIND_LAYER_NORM
                                                             ? FX_OPCODE_PLACEHOLDER
                                                             : FX_OPCODE_GET_ATTR)) {
                    st = plan_refuse(d, n, "a parameter of the reduction is not an argument");
                    goto done;
                }
            continue;
        }
        if (b->opcode != FX_OPCODE_CALL_FUNCTION)
            continue;
        if (!fused_elementwise_supports(b)) {
            st = plan_refuse(d, n, "an op without a scalar form");
            goto done;
        }
        int ph = PHASE_EPILOGUE;
        if (pro[b->id]) {
            ph = PHASE_PROLOGUE;
            for (int u = 0; u < b->num_users; u++)
                if (b->users[u] != red && !pro[b->users[u]->id]) {
                    st = plan_refuse(d, n, "a prologue value is read after the reduction");
                    goto done;
                }
        } else if (p->broadcast) {
            bool per_row = after[b->id] && type_equal(&b->out_types[0], y);
            for (int u = 0; u < b->num_users && !after[b->id]; u++)
                per_row = per_row || (b->users[u]->opcode == FX_OPCODE_CALL_FUNCTION &&
                                      p->phase[b->users[u]->id] == PHASE_EPILOGUE);
            ph = per_row ? PHASE_EPILOGUE : PHASE_BROADCAST;
        }
        p->phase[b->id] = ph;
        for (int i = 0; i < b->num_args; i++)
            if (b->args[i] && b->args[i]->opcode == FX_OPCODE_PLACEHOLDER)
                p->reads[b->args[i]->id] |= 1u << ph;
    }
    if (red->args[0]->opcode == FX_OPCODE_PLACEHOLDER)
        p->reads[red->args[0]->id] |= 1u << PHASE_PROLOGUE;
    for (int k = 0; k < nph; k++) {
        const Node *ph = graph_placeholder(body, k);
        /* per row and per element in one scope: two loads of one name */
        if ((p->reads[ph->id] >> PHASE_EPILOGUE & 1u) &&
            (p->reads[ph->id] >> PHASE_BROADCAST & 1u)) {
            st = plan_refuse(d, n, "an argument is read per row and per element");
            goto done;
        }
        for (int phase = 0; phase < PHASE_COUNT_; phase++) {
            if (!(p->reads[ph->id] >> phase & 1u))
                continue;
            Operand *o = &p->ops[p->nops++];
            o->arg = k;
            o->ph = ph;
            o->phase = phase;
            if (!is_f32(&ph->out_types[0]) ||
                !operand_layout(&ph->out_types[0], phase == PHASE_EPILOGUE ? y : x,
                                p->first_axis, p->cols, o)) {
                st = plan_refuse(d, n, "an operand broadcasts along the row");
                goto done;
            }
        }
    }
done:
    free(pro);
    free(after);
    return st;
}

bool fused_reduction_body_ok(const Graph *body)
{
    Diag d;
    diag_init(&d);
    Plan p;
    const Node *out = graph_output_node(body);
    bool ok = out && plan_build(out, body, &p, &d) == FX_OK;
    plan_free(&p);
    diag_free(&d);
    return ok;
}

/* --- emit ---------------------------------------------------------------------- */

static const char *phase_prefix(int phase)
{
    return phase == PHASE_PROLOGUE ? "p_" : phase == PHASE_EPILOGUE ? "e_" : "f_";
}

/* Loads of the phase's operands and its body nodes, one `const float v_NAME`
 * each, at indentation ind inside the row (j: the column, when along it). */
static FxStatus emit_phase(EmitCtx *c, const Plan *p, const Graph *body, int phase, int ind)
{
    for (int k = 0; k < p->nops; k++) {
        const Operand *o = &p->ops[k];
        if (o->phase == phase)
            emit_line(c, "%*sconst float v_%s = %s%s[%s];", ind, "", o->ph->name,
                    phase_prefix(phase), o->ph->name, o->along_row ? "j" : "0");
    }
    for (const Node *b = body->root.next; b != &body->root; b = b->next) {
        if (b->opcode != FX_OPCODE_CALL_FUNCTION || b == p->red || p->phase[b->id] != phase)
            continue;
        char names[3][200];
        const char *x[3] = {NULL, NULL, NULL};
        for (int i = 0; i < b->num_args && i < 3; i++)
            if (b->args[i]) {
                snprintf(names[i], sizeof names[i], "v_%s", b->args[i]->name);
                x[i] = names[i];
            }
        char expr[1024];
        if (b->num_args > 3 || !fused_scalar_expr(b, x, expr, sizeof expr))
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                                   "%s has no scalar form for a fused loop", b->op->name);
        emit_line(c, "%*sconst float v_%s = %s;", ind, "", b->name, expr);
    }
    return FX_OK;
}

/* One pass over the row computing the prologue; `then` (a printf format
 * of the data input's v_ name) is the statement that uses it. */
static FxStatus emit_prologue_pass(EmitCtx *c, const Plan *p, const Graph *body, int ind,
                                   const char *then_fmt)
{
    emit_line(c, "%*sfor (int64_t j = 0; j < %lld; j++) {", ind, "", (long long)p->cols);
    FxStatus st = emit_phase(c, p, body, PHASE_PROLOGUE, ind + 4);
    if (st != FX_OK)
        return st;
    const char *v = p->red->args[0]->name;
    char stmt[600];
    snprintf(stmt, sizeof stmt, then_fmt, v, v, v, v);
    emit_line(c, "%*s%s", ind + 4, "", stmt);
    emit_line(c, "%*s}", ind, "");
    return FX_OK;
}

/* The last pass of a row-shaped kind: the reduction's value v_RED =
 * `value`, then the epilogue, stored over the row. */
static FxStatus emit_epilogue_pass(EmitCtx *c, const Plan *p, const Graph *body, int ind,
                                   const char *value)
{
    emit_line(c, "%*sfor (int64_t j = 0; j < %lld; j++) {", ind, "", (long long)p->cols);
    emit_line(c, "%*sconst float v_%s = %s;", ind + 4, "", p->red->name, value);
    FxStatus st = emit_phase(c, p, body, PHASE_EPILOGUE, ind + 4);
    if (st != FX_OK)
        return st;
    emit_line(c, "%*sy[j] = v_%s;", ind + 4, "", fused_body_result(body)->name);
    emit_line(c, "%*s}", ind, "");
    return FX_OK;
}

/* LayerNormalization's Scale (i 1) or B (i 2) at column j, "" when absent. */
static void param_term(const Node *red, int i, int64_t cols, const char *op, char *buf,
                       size_t cap)
{
    const TensorType *t = i < red->num_args ? node_input_type(red, i) : NULL;
    if (!t)
        snprintf(buf, cap, "%s", "");
    else
        snprintf(buf, cap, " %s s_%s[%s]", op, red->args[i]->name,
                 type_numel(t) == cols ? "j" : "0");
}

/* The passes over one row, at indentation ind. */
static FxStatus emit_row(EmitCtx *c, const Plan *p, const Graph *body, int ind)
{
    const char *red = p->red->name;
    char cols_f[48], lit[48], value[600];
    snprintf(cols_f, sizeof cols_f, "(float)%lld", (long long)p->cols);
    FxStatus st = FX_OK;
    switch (p->kind) {
    case KIND_SOFTMAX:
        emit_line(c, "%*sfloat mx = -INFINITY;", ind, "");
        if ((st = emit_prologue_pass(c, p, body, ind,
                                     "y[j] = v_%s; mx = v_%s > mx ? v_%s : mx;")) != FX_OK)
            return st;
        emit_line(
                c,
                "%*sconst float sum = fxrt_softmax_exp_f32(y, y, /*len=*/%lld, /*stride=*/1, mx);",
                ind, "", (long long)p->cols);
        emit_line(c, "%*sconst float inv = 1.0f / sum;", ind, "");
        return emit_epilogue_pass(c, p, body, ind, "y[j] * inv");
    case KIND_LOG_SOFTMAX:
        emit_line(c, "%*sfloat mx = -INFINITY;", ind, "");
        if ((st = emit_prologue_pass(c, p, body, ind,
                                     "y[j] = v_%s; mx = v_%s > mx ? v_%s : mx;")) != FX_OK)
            return st;
        emit_line(c, "%*sfloat sum = 0.0f;", ind, "");
        emit_line(c, "%*sfor (int64_t j = 0; j < %lld; j++)", ind, "", (long long)p->cols);
        emit_line(c, "%*ssum += expf(y[j] - mx);", ind + 4, "");
        emit_line(c, "%*sconst float shift = mx + logf(sum);", ind, "");
        return emit_epilogue_pass(c, p, body, ind, "y[j] - shift");
    case KIND_LAYER_NORM: {
        if ((st = emit_prologue_pass(c, p, body, ind, "y[j] = v_%s;")) != FX_OK)
            return st;
        /* row_stats: the mean relative to the first element, then the
         * mean squared deviation */
        emit_line(c, "%*sconst float pivot = y[0];", ind, "");
        emit_line(c, "%*sfloat sum = 0.0f;", ind, "");
        emit_line(c, "%*sfor (int64_t j = 0; j < %lld; j++)", ind, "", (long long)p->cols);
        emit_line(c, "%*ssum += y[j] - pivot;", ind + 4, "");
        emit_line(c, "%*sconst float mean = pivot + sum / %s;", ind, "", cols_f);
        emit_line(c, "%*sfloat sq = 0.0f;", ind, "");
        emit_line(c, "%*sfor (int64_t j = 0; j < %lld; j++) {", ind, "", (long long)p->cols);
        emit_line(c, "%*sconst float dv = y[j] - mean;", ind + 4, "");
        emit_line(c, "%*ssq += dv * dv;", ind + 4, "");
        emit_line(c, "%*s}", ind, "");
        emit_line(c, "%*sconst float inv = 1.0f / sqrtf(sq / %s + %s);", ind, "", cols_f,
                c_float_literal(node_attr_float(p->red, "epsilon", 1e-5f), lit, sizeof lit));
        char scale[240], bias[240];
        param_term(p->red, 1, p->cols, "*", scale, sizeof scale);
        param_term(p->red, 2, p->cols, "+", bias, sizeof bias);
        snprintf(value, sizeof value, "(y[j] - mean) * inv%s%s", scale, bias);
        return emit_epilogue_pass(c, p, body, ind, value);
    }
    case KIND_SUM:
    case KIND_MEAN: {
        /* fxrt_reduce's contiguous sum: four chains, the tail on the first */
        int64_t whole = p->cols / 4 * 4;
        emit_line(c, "%*sfloat acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};", ind, "");
        char then[200];
        if (whole == p->cols)
            snprintf(then, sizeof then, "acc[j & 3] += v_%%s;");
        else
            snprintf(then, sizeof then, "acc[j < %lld ? (j & 3) : 0] += v_%%s;", (long long)whole);
        if ((st = emit_prologue_pass(c, p, body, ind, then)) != FX_OK)
            return st;
        if (p->kind == KIND_MEAN)
            snprintf(value, sizeof value, "((acc[0] + acc[1]) + (acc[2] + acc[3])) / %s", cols_f);
        else
            snprintf(value, sizeof value, "(acc[0] + acc[1]) + (acc[2] + acc[3])");
        break;
    }
    case KIND_MAX:
    case KIND_MIN: {
        bool max = p->kind == KIND_MAX;
        emit_line(c, "%*sfloat m = %sINFINITY;", ind, "", max ? "-" : "");
        emit_line(c, "%*sint has_nan = 0;", ind, "");
        if ((st = emit_prologue_pass(c, p, body, ind,
                                     max ? "m = v_%s > m ? v_%s : m; has_nan |= v_%s != v_%s;"
                                         : "m = v_%s < m ? v_%s : m; has_nan |= v_%s != v_%s;")) !=
            FX_OK)
            return st;
        snprintf(value, sizeof value, "has_nan ? NAN : m");
        break;
    }
    case KIND_NONE: return plan_refuse(c->diag, c->node, "no reduction");
    }
    /* A Reduce: one value per row, then the epilogue on it, then the tail
     * that broadcasts it back over the row. */
    emit_line(c, "%*sconst float v_%s = %s;", ind, "", red, value);
    if ((st = emit_phase(c, p, body, PHASE_EPILOGUE, ind)) != FX_OK)
        return st;
    const char *res = fused_body_result(body)->name;
    if (!p->broadcast) {
        emit_line(c, "%*sy[0] = v_%s;", ind, "", res);
        return FX_OK;
    }
    emit_line(c, "%*sfor (int64_t j = 0; j < %lld; j++) {", ind, "", (long long)p->cols);
    if ((st = emit_phase(c, p, body, PHASE_BROADCAST, ind + 4)) != FX_OK)
        return st;
    emit_line(c, "%*sy[j] = v_%s;", ind + 4, "", res);
    emit_line(c, "%*s}", ind, "");
    return FX_OK;
}

static FxStatus fused_reduction_emit(EmitCtx *c)
{
    const Node *n = c->node;
    const Graph *body = n->body;
    Plan p;
    FxStatus st = body ? plan_build(n, body, &p, c->diag)
                       : diag_node_error(c->diag, FX_ERR_INVALID, n, "no body");
    const TensorType **ins = NULL;
    int64_t(*strides)[FX_MAX_RANK] = NULL;
    if (st != FX_OK)
        goto done;
    for (int k = 0; k < n->num_args; k++)
        if (!c->in[k]) {
            st = diag_node_error(c->diag, FX_ERR_INVALID, n, "argument %d is missing", k);
            goto done;
        }
    ins = fx_alloc_array((size_t)p.nops + 1, sizeof *ins);
    strides = fx_alloc_array((size_t)p.nops + 1, sizeof *strides);
    if (!ins || !strides) {
        st = diag_node_error(c->diag, FX_ERR_NOMEM, n, "out of memory");
        goto done;
    }
    for (int k = 0; k < p.nops; k++)
        ins[k] = &p.ops[k].outer;
    int64_t dims[FX_MAX_RANK];
    int rank = fused_loop_walk(&p.rows, p.nops, ins, dims, strides);

    fused_emit_body_comment(c, body);
    for (const Node *b = body->root.next; b != &body->root; b = b->next) {
        char lit[48];
        if (b->opcode == FX_OPCODE_GET_ATTR && b->value &&
            b->value->type.dtype == FXRT_DTYPE_FLOAT32 && tensor_numel(b->value) == 1)
            emit_line(c, "const float v_%s = %s;", b->name,
                    c_float_literal(*(const float *)b->value->data, lit, sizeof lit));
    }
    for (int i = 1; p.kind == KIND_LAYER_NORM && i < p.red->num_args; i++)
        if (p.red->args[i]) {
            const Node *ph = p.red->args[i];
            int k = 0;
            while (graph_placeholder(body, k) != ph)
                k++;
            emit_line(c, "const float *const s_%s = %s;", ph->name, c->in[k]);
        }
    emit_line(c, "int64_t r = 0;");
    for (int d = 0; d < rank; d++)
        emit_line(c, "%*sfor (int64_t i%d = 0; i%d < %lld; i%d++) {", 4 * d, "", d, d,
                (long long)dims[d], d);
    int ind = 4 * rank;
    for (int k = 0; k < p.nops; k++) {
        const Operand *o = &p.ops[k];
        char off[256];
        fused_offset_expr(rank, dims, strides[k], "r", off, sizeof off);
        if (strcmp(off, "0") == 0)
            emit_line(c, "%*sconst float *const %s%s = %s;", ind, "", phase_prefix(o->phase),
                    o->ph->name, c->in[o->arg]);
        else if (o->row_elems == 1)
            emit_line(c, "%*sconst float *const %s%s = (%s) + (%s);", ind, "",
                    phase_prefix(o->phase), o->ph->name, c->in[o->arg], off);
        else
            emit_line(c, "%*sconst float *const %s%s = (%s) + (%s) * %lld;", ind, "",
                    phase_prefix(o->phase), o->ph->name, c->in[o->arg], off,
                    (long long)o->row_elems);
    }
    if (row_shaped(p.kind) || p.broadcast)
        emit_line(c, "%*sfloat *const y = (%s) + r * %lld;", ind, "", c->out[0], (long long)p.cols);
    else
        emit_line(c, "%*sfloat *const y = (%s) + r;", ind, "", c->out[0]);
    if ((st = emit_row(c, &p, body, ind)) != FX_OK)
        goto done;
    emit_line(c, "%*sr++;", ind, "");
    for (int d = rank - 1; d >= 0; d--)
        emit_line(c, "%*s}", 4 * d, "");
done:
    free(ins);
    free(strides);
    if (body)
        plan_free(&p);
    return st;
}

static const AttrSpec fused_reduction_attrs[] = {{NULL}};

const OpDef fx_op_FusedReduction = {
    .name = "FusedReduction",
    .min_inputs = 1, .max_inputs = -1,
    .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_MODULE,
    .attrs = fused_reduction_attrs,
    .infer = fused_body_infer,
    .eval = fused_body_eval,
    .emit = fused_reduction_emit,
};
