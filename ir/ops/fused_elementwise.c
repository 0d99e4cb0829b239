/*
 * fused_elementwise.c - the FusedElementwise module kind: a tree of float32
 * elementwise ops (with NumPy broadcasting) run as one loop nest.
 *
 * A node of this kind is a call_module whose Node.body is the fused
 * sub-graph: one placeholder per argument of the node (in order, typed),
 * get_attr nodes for scalar constants, elementwise call_function nodes, and
 * an output returning one value.  The elementwise fusion pass
 * (opt/pass_elementwise_fusion.c) builds them.
 *
 * infer checks the body's placeholders against the argument types and
 * returns the body's output type; eval runs the body in the interpreter
 * (the reference); emit writes one loop nest over the output: each input is
 * read at its broadcast offset (stride 0 on broadcast axes, axes merged
 * where every operand's strides chain, as elementwise.c's walk does), then
 * each body node becomes one `const float v_NAME = EXPR;` in body order and
 * the last is stored.  The scalar expressions use the same formulas as the
 * runtime's float32 kernels (runtime/fxrt_elementwise*.c), so compiled and
 * interpreted results agree to rounding.
 *
 * Ops without a scalar form below (integer ops, comparisons, Where, Cast,
 * variadic Sum/Mean/Min/Max with more than two inputs...) are not fused:
 * fused_elementwise_supports says no and the pass leaves them alone.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* --- scalar forms ----------------------------------------------------------- */

bool fused_scalar_expr(const Node *n, const char *const *x, char *buf, size_t cap)
{
    char p0[48], p1[48];
    const char *a = n->num_args > 0 ? x[0] : NULL;
    const char *b = n->num_args > 1 ? x[1] : NULL;
    OpKind k = op_kind(n->op);
#define F(attr, dflt, lit) c_float_literal(node_attr_float(n, attr, dflt), lit, sizeof lit)
    switch (k) {
    case FX_OP_Neg: snprintf(buf, cap, "-%s", a); return true;
    case FX_OP_Abs: snprintf(buf, cap, "fabsf(%s)", a); return true;
    case FX_OP_Sign:
        snprintf(buf, cap, "%s > 0.0f ? 1.0f : (%s < 0.0f ? -1.0f : %s)", a, a, a);
        return true;
    case FX_OP_Relu: snprintf(buf, cap, "%s < 0.0f ? 0.0f : %s", a, a); return true;
    case FX_OP_Sqrt: snprintf(buf, cap, "sqrtf(%s)", a); return true;
    case FX_OP_Exp: snprintf(buf, cap, "expf(%s)", a); return true;
    case FX_OP_Log: snprintf(buf, cap, "logf(%s)", a); return true;
    case FX_OP_Reciprocal: snprintf(buf, cap, "1.0f / %s", a); return true;
    case FX_OP_Erf: snprintf(buf, cap, "erff(%s)", a); return true;
    case FX_OP_Tanh: snprintf(buf, cap, "tanhf(%s)", a); return true;
    case FX_OP_Sigmoid:
        /* the runtime's overflow-free polynomial (runtime/fxrt_math.h) */
        snprintf(buf, cap, "fxrt_sigmoid(%s)", a);
        return true;
    case FX_OP_LeakyRelu:
        snprintf(buf, cap, "%s < 0.0f ? %s * %s : %s", a, F("alpha", 0.01f, p0), a, a);
        return true;
    case FX_OP_Elu:
        snprintf(buf, cap, "%s < 0.0f ? %s * expm1f(%s) : %s", a, F("alpha", 1.0f, p0), a, a);
        return true;
    case FX_OP_Selu:
        F("alpha", 0.0f, p0);
        F("gamma", 0.0f, p1);
        snprintf(buf, cap, "%s > 0.0f ? %s * %s : %s * %s * expm1f(%s)", a, p1, a, p1, p0, a);
        return true;
    case FX_OP_Celu:
        F("alpha", 1.0f, p0);
        snprintf(buf, cap, "%s > 0.0f ? %s : %s * expm1f(%s / %s)", a, a, p0, a, p0);
        return true;
    case FX_OP_HardSigmoid:
        F("alpha", 0.2f, p0);
        F("beta", 0.5f, p1);
        snprintf(buf, cap, "%s * %s + %s < 0.0f ? 0.0f : (%s * %s + %s > 1.0f ? 1.0f : %s * %s + %s)",
                 p0, a, p1, p0, a, p1, p0, a, p1);
        return true;
    case FX_OP_HardSwish:
        c_float_literal(1.0f / 6.0f, p0, sizeof p0);
        snprintf(buf, cap,
                 "%s * (%s * %s + 0.5f < 0.0f ? 0.0f : (%s * %s + 0.5f > 1.0f ? 1.0f : %s * %s + 0.5f))",
                 a, p0, a, p0, a, p0, a);
        return true;
    case FX_OP_Softplus:
        snprintf(buf, cap, "(%s > 0.0f ? %s : 0.0f) + log1pf(expf(-fabsf(%s)))", a, a, a);
        return true;
    case FX_OP_Gelu:
        if (strcmp(node_attr_string(n, "approximate", "none"), "tanh") == 0)
            snprintf(buf, cap, "0.5f * %s * (1.0f + tanhf(0.79788456f * (%s + 0.044715f * %s * %s "
                     "* %s)))", a, a, a, a, a);
        else
            snprintf(buf, cap, "0.5f * %s * (1.0f + erff(%s * 0.70710678f))", a, a);
        return true;
    case FX_OP_Mish:
        snprintf(buf, cap, "%s * tanhf((%s > 0.0f ? %s : 0.0f) + log1pf(expf(-fabsf(%s))))", a, a,
                 a, a);
        return true;
    case FX_OP_Softsign: snprintf(buf, cap, "%s / (1.0f + fabsf(%s))", a, a); return true;
    case FX_OP_ThresholdedRelu:
        snprintf(buf, cap, "%s > %s ? %s : 0.0f", a, F("alpha", 1.0f, p0), a);
        return true;
    case FX_OP_Shrink:
        F("bias", 0.0f, p0);
        F("lambd", 0.5f, p1);
        snprintf(buf, cap, "%s < -%s ? %s + %s : (%s > %s ? %s - %s : 0.0f)", a, p1, a, p0, a, p1,
                 a, p0);
        return true;
    case FX_OP_Floor: snprintf(buf, cap, "floorf(%s)", a); return true;
    case FX_OP_Ceil: snprintf(buf, cap, "ceilf(%s)", a); return true;
    case FX_OP_Round: snprintf(buf, cap, "fxrt_round_half_even_f32(%s)", a); return true;
    case FX_OP_Sin: snprintf(buf, cap, "sinf(%s)", a); return true;
    case FX_OP_Cos: snprintf(buf, cap, "cosf(%s)", a); return true;
    case FX_OP_Tan: snprintf(buf, cap, "tanf(%s)", a); return true;
    case FX_OP_Atan: snprintf(buf, cap, "atanf(%s)", a); return true;
    case FX_OP_Sinh: snprintf(buf, cap, "sinhf(%s)", a); return true;
    case FX_OP_Cosh: snprintf(buf, cap, "coshf(%s)", a); return true;
    case FX_OP_Add: snprintf(buf, cap, "%s + %s", a, b); return true;
    case FX_OP_Sub: snprintf(buf, cap, "%s - %s", a, b); return true;
    case FX_OP_Mul: snprintf(buf, cap, "%s * %s", a, b); return true;
    case FX_OP_Div: snprintf(buf, cap, "%s / %s", a, b); return true;
    case FX_OP_Pow: snprintf(buf, cap, "powf(%s, %s)", a, b); return true;
    case FX_OP_PRelu: snprintf(buf, cap, "%s < 0.0f ? %s * %s : %s", a, a, b, a); return true;
    case FX_OP_Min: /* NaN from either side, as the runtime */
        if (n->num_args != 2)
            return false;
        snprintf(buf, cap, "(%s < %s || %s != %s) ? %s : %s", a, b, a, a, a, b);
        return true;
    case FX_OP_Max:
        if (n->num_args != 2)
            return false;
        snprintf(buf, cap, "(%s > %s || %s != %s) ? %s : %s", a, b, a, a, a, b);
        return true;
    case FX_OP_Clip: {
        /* fxrt_clip_f32: v < lo ? lo : v, then > hi ? hi */
        const char *lo = n->num_args > 1 ? x[1] : NULL, *hi = n->num_args > 2 ? x[2] : NULL;
        if (lo && hi)
            snprintf(buf, cap, "(%s < %s ? %s : %s) > %s ? %s : (%s < %s ? %s : %s)", a, lo, lo, a,
                     hi, hi, a, lo, lo, a);
        else if (lo)
            snprintf(buf, cap, "%s < %s ? %s : %s", a, lo, lo, a);
        else if (hi)
            snprintf(buf, cap, "%s > %s ? %s : %s", a, hi, hi, a);
        else
            snprintf(buf, cap, "%s", a);
        return true;
    }
    default:
        return false;
    }
#undef F
}

bool fused_elementwise_supports(const Node *n)
{
    if (n->opcode != FX_OPCODE_CALL_FUNCTION || !n->op || !(n->op->flags & FX_OPF_ELEMENTWISE) ||
        !n->shapes_known || n->num_outputs != 1 ||
        n->out_types[0].dtype != FXRT_DTYPE_FLOAT32)
        return false;
    for (int i = 0; i < n->num_args; i++) {
        const TensorType *t = node_input_type(n, i);
        if (t && t->dtype != FXRT_DTYPE_FLOAT32)
            return false;
    }
    const char *x[3] = {"a", "b", "c"};
    char buf[512];
    return n->num_args <= 3 && fused_scalar_expr(n, x, buf, sizeof buf);
}

/* --- infer / eval ------------------------------------------------------------ */

const Node *fused_body_result(const Graph *body)
{
    const Node *out = body ? graph_output_node(body) : NULL;
    return out && out->num_args == 1 && out->args[0] ? out->args[0] : NULL;
}

FxStatus fused_body_infer(InferCtx *c)
{
    Graph *body = c->node->body;
    if (!fused_body_result(body))
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "a %s node needs a body returning one value", c->node->op->name);
    if (graph_num_placeholders(body) != c->num_inputs)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "the body has %d placeholders for %d arguments",
                               graph_num_placeholders(body), c->num_inputs);
    for (int i = 0; i < c->num_inputs; i++) {
        Node *ph = graph_placeholder(body, i);
        if (!c->in[i])
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "argument %d is missing", i);
        if (ph->shapes_known && !type_equal(&ph->out_types[0], c->in[i])) {
            char want[128], got[128];
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "argument %d is %s, the body's placeholder %s", i,
                                   type_format(c->in[i], got, sizeof got),
                                   type_format(&ph->out_types[0], want, sizeof want));
        }
        if (!ph->shapes_known) {
            if (!node_set_num_outputs(ph, 1))
                return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
            ph->out_types[0] = *c->in[i];
            ph->shapes_known = true;
        }
    }
    const Node *r = fused_body_result(body);
    if (!r->shapes_known) {
        FxStatus st = graph_propagate_shapes(body, NULL, 0, c->diag);
        if (st != FX_OK)
            return st;
    }
    c->out[0] = r->out_types[0];
    return FX_OK;
}

FxStatus fused_body_eval(EvalCtx *c)
{
    Tensor *result = NULL;
    FxStatus st = interp_run(c->node->body, c->in, c->num_inputs, &result, 1, NULL, NULL, c->diag);
    if (st != FX_OK)
        return st;
    if (!type_equal(&result->type, &c->out[0]->type))
        st = diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "the body's result has another type");
    else
        memcpy(c->out[0]->data, result->data, tensor_nbytes(result));
    tensor_free(result);
    return st;
}

/* --- emit ---------------------------------------------------------------------- */

int fused_loop_walk(const TensorType *out, int nops, const TensorType *const *ins,
                     int64_t *dims, int64_t (*st)[FX_MAX_RANK])
{
    int r = 0;
    int64_t full[FX_MAX_RANK];
    for (int d = 0; d < out->rank; d++) {
        if (out->dims[d] == 1)
            continue;
        bool chain = r > 0;
        for (int k = 0; k < nops && chain; k++) {
            fxrt_broadcast_strides(out->rank, out->dims, ins[k]->rank, ins[k]->dims, full);
            chain = st[k][r - 1] == full[d] * out->dims[d];
        }
        int at = chain ? r - 1 : r;
        for (int k = 0; k < nops; k++) {
            fxrt_broadcast_strides(out->rank, out->dims, ins[k]->rank, ins[k]->dims, full);
            st[k][at] = full[d];
        }
        dims[at] = chain ? dims[at] * out->dims[d] : out->dims[d];
        if (!chain)
            r++;
    }
    if (r == 0) {
        dims[0] = 1;
        for (int k = 0; k < nops; k++)
            st[k][0] = 0;
        r = 1;
    }
    return r;
}

void fused_offset_expr(int rank, const int64_t *dims, const int64_t *st, const char *counter,
                       char *buf, size_t cap)
{
    bool dense = true;
    int64_t expect = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (dims[d] != 1 && st[d] != expect)
            dense = false;
        expect *= dims[d];
    }
    if (dense) {
        snprintf(buf, cap, "%s", counter);
        return;
    }
    size_t len = 0;
    buf[0] = '\0';
    for (int d = 0; d < rank; d++) {
        if (st[d] == 0)
            continue;
        if (st[d] == 1)
            len += (size_t)snprintf(buf + len, cap > len ? cap - len : 0, "%si%d", len ? " + " : "", d);
        else
            len += (size_t)snprintf(buf + len, cap > len ? cap - len : 0, "%si%d * %lld",
                                    len ? " + " : "", d, (long long)st[d]);
    }
    if (len == 0)
        snprintf(buf, cap, "0");
}

/* The body, as FX lines, so that the loop reads as what it computes. */
void fused_emit_body_comment(EmitCtx *c, const Graph *body)
{
    char line[1024];
    emit_line(c, "/* fused body:");
    for (const Node *b = body->root.next; b != &body->root; b = b->next) {
        node_format(b, line, sizeof line);
        for (char *p = strstr(line, "*/"); p; p = strstr(p, "*/"))
            p[0] = ' ';
        emit_line(c, " *   %s", line);
    }
    emit_line(c, " */");
}

static FxStatus fused_emit(EmitCtx *c)
{
    const Node *n = c->node;
    const Graph *body = n->body;
    const TensorType *out = &n->out_types[0];
    int nops = n->num_args;
    const TensorType **ins = fx_alloc_array((size_t)nops + 1, sizeof *ins);
    int64_t(*st)[FX_MAX_RANK] = fx_alloc_array((size_t)nops + 1, sizeof *st);
    FxStatus status = FX_OK;
    if (!ins || !st) {
        status = diag_node_error(c->diag, FX_ERR_NOMEM, n, "out of memory");
        goto done;
    }
    for (int k = 0; k < nops; k++) {
        ins[k] = node_input_type(n, k);
        if (!ins[k] || !c->in[k] || ins[k]->dtype != FXRT_DTYPE_FLOAT32) {
            status = diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                                     "fused argument %d is not a float32 tensor", k);
            goto done;
        }
    }
    int64_t dims[FX_MAX_RANK];
    int rank = fused_loop_walk(out, nops, ins, dims, st);

    fused_emit_body_comment(c, body);
    emit_line(c, "int64_t o = 0;");
    for (int d = 0; d < rank; d++)
        emit_line(c, "%*sfor (int64_t i%d = 0; i%d < %lld; i%d++) {", 4 * d, "", d, d,
                (long long)dims[d], d);
    int ind = 4 * rank;
    /* Loads of the placeholders, then one local per computed node. */
    int k = 0;
    const Node *last = fused_body_result(body);
    for (const Node *b = body->root.next; b != &body->root; b = b->next) {
        if (b->opcode == FX_OPCODE_PLACEHOLDER) {
            char off[256];
            fused_offset_expr(rank, dims, st[k], "o", off, sizeof off);
            emit_line(c, "%*sconst float v_%s = %s[%s];", ind, "", b->name, c->in[k], off);
            k++;
        } else if (b->opcode == FX_OPCODE_GET_ATTR) {
            char lit[48];
            if (!b->value || b->value->type.dtype != FXRT_DTYPE_FLOAT32 ||
                tensor_numel(b->value) != 1) {
                status = diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                                         "fused constant %s is not a float32 scalar", b->name);
                goto done;
            }
            emit_line(c, "%*sconst float v_%s = %s;", ind, "", b->name,
                    c_float_literal(*(const float *)b->value->data, lit, sizeof lit));
        } else if (b->opcode == FX_OPCODE_CALL_FUNCTION) {
            char names[3][200];
            const char *x[3] = {NULL, NULL, NULL};
            for (int i = 0; i < b->num_args && i < 3; i++)
                if (b->args[i]) {
                    snprintf(names[i], sizeof names[i], "v_%s", b->args[i]->name);
                    x[i] = names[i];
                }
            char expr[1024];
            if (b->num_args > 3 || !fused_scalar_expr(b, x, expr, sizeof expr)) {
                status = diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                                         "%s has no scalar form for a fused loop", b->op->name);
                goto done;
            }
            emit_line(c, "%*sconst float v_%s = %s;", ind, "", b->name, expr);
        }
    }
    emit_line(c, "%*s%s[o++] = v_%s;", ind, "", c->out[0], last->name);
    for (int d = rank - 1; d >= 0; d--)
        emit_line(c, "%*s}", 4 * d, "");
done:
    free(ins);
    free(st);
    return status;
}

static const AttrSpec fused_attrs[] = {{NULL}};

const OpDef fx_op_FusedElementwise = {
    .name = "FusedElementwise",
    .min_inputs = 1, .max_inputs = -1,
    .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_MODULE,
    .attrs = fused_attrs,
    .infer = fused_body_infer,
    .eval = fused_body_eval,
    .emit = fused_emit,
};
