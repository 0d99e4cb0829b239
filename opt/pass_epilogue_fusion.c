/*
 * pass_epilogue_fusion.c - folds what follows a convolution or a matrix
 * product (a bias Add, an activation, a residual Add) into the product's
 * kernel as its epilogue: a FusedConv or FusedGemm call_module
 * (ir/ops/fused_nn.c), so that the output is written once, with everything
 * applied while each tile is in cache.
 *
 * Anchors: float32 Conv; float32 Gemm whose C, if any, is not scaled (beta
 * 1); float32 MatMul of an A of rank >= 2 by a constant matrix B.  From the
 * anchor's value the chain grows one user at a time, in this order, taking
 * each step that applies:
 *
 *   1. bias:     Add of a constant that varies only along the output
 *                channel (Conv) or the last axis (Gemm, MatMul), when the
 *                anchor has no bias of its own;
 *   2. residual: Add of another value of exactly the output's type;
 *   3. activation: Relu, Clip (constant bounds), LeakyRelu, Sigmoid,
 *                HardSwish, HardSigmoid, Tanh, SiLU written as
 *                x * Sigmoid(x), exact GELU as the Gelu op (opset 20,
 *                approximate "none") or written as
 *                x * (1 + erf(x / sqrt 2)) * 0.5 (the form exporters write
 *                before opset 20; the final scale is any scalar, or absent
 *                when linear-fold moved it into the next layer);
 *   4. residual after the activation, when step 2 took none.
 *
 * A step is taken only when the value it extends has that one user (the
 * GELU pattern: its two users are both inside the pattern) and is not a
 * graph output, so no interior value is visible outside the fused node.
 * The longest legal chain wins; an anchor with nothing to take is left
 * alone.  The fused node replaces the chain's last node, where every input
 * of the chain is defined.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/ops/ops.h"
#include "opt.h"

typedef enum AnchorKind { ANCHOR_CONV, ANCHOR_GEMM, ANCHOR_MATMUL } AnchorKind;

typedef struct Chain {
    Node *anchor;
    AnchorKind kind;
    Node *last;        /* the chain's result */
    Node *bias_add;    /* the Add whose constant became the bias, or NULL */
    Tensor *bias;      /* that constant as a 1-D tensor (owned until used) */
    Node *residual;    /* the other operand of the residual Add */
    int residual_after;
    FxrtActivation act;
    float alpha, beta;
    Node *nodes[8];    /* absorbed nodes, chain order */
    int num_nodes;
} Chain;

static bool is_f32(const Node *n)
{
    return n && n->shapes_known && n->num_outputs == 1 &&
           n->out_types[0].dtype == FXRT_DTYPE_FLOAT32;
}

/* The operand of binary node b that is not v (NULL when both are v). */
static Node *other_operand(const Node *b, const Node *v)
{
    if (b->num_args != 2 || !b->args[0] || !b->args[1])
        return NULL;
    if (b->args[0] == v && b->args[1] != v)
        return b->args[1];
    if (b->args[1] == v && b->args[0] != v)
        return b->args[0];
    return NULL;
}

static bool scalar_const(const Node *a, float *value)
{
    const Tensor *t = a ? node_const_value(a) : NULL;
    if (!t || t->type.dtype != FXRT_DTYPE_FLOAT32 || tensor_numel(t) != 1)
        return false;
    *value = *(const float *)t->data;
    return true;
}

static bool scalar_is(const Node *a, float want)
{
    float v;
    return scalar_const(a, &v) && fabsf(v - want) <= 1e-6f * fabsf(want);
}

static bool absorb(Chain *c, Node *n)
{
    if (c->num_nodes == (int)(sizeof c->nodes / sizeof c->nodes[0]))
        return false;
    c->nodes[c->num_nodes++] = n;
    c->last = n;
    return true;
}

/* Step 1: the constant operand of Add u as a bias along the output's
 * channel axis (1 for Conv) or last axis, materialized as 1-D. */
static bool take_bias(Chain *c, Node *u, Diag *d, FxStatus *st)
{
    Node *k = other_operand(u, c->last);
    const Tensor *v = k ? node_const_value(k) : NULL;
    if (!v || v->type.dtype != FXRT_DTYPE_FLOAT32 || !type_equal(&u->out_types[0],
                                                              &c->last->out_types[0]))
        return false;
    const TensorType *out = &c->last->out_types[0];
    int axis = c->kind == ANCHOR_CONV ? 1 : out->rank - 1;
    int64_t len = out->dims[axis];
    if (v->type.rank > out->rank)
        return false;
    /* Right-aligned: every dim is 1 except the one over `axis`. */
    int64_t count = 1;
    for (int i = 0; i < v->type.rank; i++) {
        int oi = out->rank - v->type.rank + i;
        int64_t dim = v->type.dims[i];
        if (dim != 1 && (oi != axis || dim != len))
            return false;
        count *= dim;
    }
    TensorType bt = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1, .dims = {len}};
    Tensor *b = tensor_new(&bt, d);
    if (!b) {
        *st = FX_ERR_NOMEM;
        return false;
    }
    const float *src = v->data;
    for (int64_t i = 0; i < len; i++)
        ((float *)b->data)[i] = src[count == 1 ? 0 : i];
    if (!absorb(c, u)) {
        tensor_free(b);
        return false;
    }
    c->bias = b;
    c->bias_add = u;
    return true;
}

/* Steps 2 and 4: Add u of another value of the output's type. */
static bool take_residual(Chain *c, Node *u, int after)
{
    Node *r = other_operand(u, c->last);
    if (!r || !r->shapes_known || r->num_outputs != 1 ||
        !type_equal(&r->out_types[0], &c->last->out_types[0]) ||
        !type_equal(&u->out_types[0], &c->last->out_types[0]) || !absorb(c, u))
        return false;
    c->residual = r;
    c->residual_after = after;
    return true;
}

/* GELU from value v: Div(v, sqrt 2) -> Erf -> Add 1 -> Mul by v, then a
 * Mul by a scalar constant (0.5 for the exact GELU) if there is one:
 * linear-fold moves that 0.5 into the next layer's weights.  Operands of
 * the Adds and Muls in either order.  Returns the number of nodes (4 or 5)
 * and the scale in *scale. */
static int match_gelu(const Node *v, Node **parts, float *scale)
{
    if (v->num_users != 2)
        return 0;
    Node *dv = NULL, *m1 = NULL;
    for (int i = 0; i < 2; i++) {
        Node *u = v->users[i];
        if (node_is_op(u, &fx_op_Div) && u->num_args == 2 && u->args[0] == v &&
            scalar_is(u->args[1], 1.41421356f))
            dv = u;
        else if (node_is_op(u, &fx_op_Mul))
            m1 = u;
    }
    if (!dv || !m1)
        return 0;
    Node *e = node_fusable_user(dv);
    if (!e || !node_is_op(e, &fx_op_Erf))
        return 0;
    Node *a = node_fusable_user(e);
    if (!a || !node_is_op(a, &fx_op_Add) || !scalar_is(other_operand(a, e), 1.0f))
        return 0;
    if (node_fusable_user(a) != m1 || other_operand(m1, a) != v)
        return 0;
    parts[0] = dv;
    parts[1] = e;
    parts[2] = a;
    parts[3] = m1;
    *scale = 1.0f;
    Node *m2 = node_fusable_user(m1);
    if (m2 && node_is_op(m2, &fx_op_Mul) && scalar_const(other_operand(m2, m1), scale)) {
        parts[4] = m2;
        return 5;
    }
    return 4;
}

/* SiLU from value v: Mul(v, Sigmoid(v)), operands in either order, v's
 * only users those two.  Returns the number of nodes (2) or 0. */
static int match_silu(const Node *v, Node **parts)
{
    if (v->num_users != 2)
        return 0;
    for (int i = 0; i < 2; i++) {
        Node *s = v->users[i], *m = v->users[1 - i];
        if (node_is_op(s, &fx_op_Sigmoid) && s->args[0] == v && node_fusable_user(s) == m &&
            node_is_op(m, &fx_op_Mul) && other_operand(m, s) == v &&
            type_equal(&m->out_types[0], &v->out_types[0])) {
            parts[0] = s;
            parts[1] = m;
            return 2;
        }
    }
    return 0;
}

/* Step 3. */
static bool take_activation(Chain *c)
{
    Node *silu[2];
    if (match_silu(c->last, silu) && c->num_nodes + 2 <= (int)(sizeof c->nodes / sizeof c->nodes[0])) {
        absorb(c, silu[0]);
        absorb(c, silu[1]);
        c->act = FXRT_ACT_SILU;
        return true;
    }
    Node *gelu[5];
    float scale;
    int parts = match_gelu(c->last, gelu, &scale);
    if (parts > 0) {
        if (c->num_nodes + parts > (int)(sizeof c->nodes / sizeof c->nodes[0]))
            return false;
        for (int i = 0; i < parts; i++)
            absorb(c, gelu[i]);
        c->act = FXRT_ACT_GELU;
        c->alpha = scale;
        return true;
    }
    Node *u = node_fusable_user(c->last);
    if (!u || u->opcode != FX_OPCODE_CALL_FUNCTION || u->args[0] != c->last ||
        !type_equal(&u->out_types[0], &c->last->out_types[0]))
        return false;
    FxrtActivation act;
    float alpha = 0.0f, beta = 0.0f;
    switch (op_kind(u->op)) {
    case FX_OP_Relu: act = FXRT_ACT_RELU; break;
    case FX_OP_Sigmoid: act = FXRT_ACT_SIGMOID; break;
    case FX_OP_Tanh: act = FXRT_ACT_TANH; break;
    case FX_OP_HardSwish: act = FXRT_ACT_HARD_SWISH; break;
    case FX_OP_Gelu:
        if (strcmp(node_attr_string(u, "approximate", "none"), "none") != 0)
            return false;
        act = FXRT_ACT_GELU;
        alpha = 0.5f; /* the epilogue's GELU is alpha x (1 + erf(x / sqrt 2)) */
        break;
    case FX_OP_LeakyRelu:
        act = FXRT_ACT_LEAKY_RELU;
        alpha = node_attr_float(u, "alpha", 0.01f);
        break;
    case FX_OP_HardSigmoid:
        act = FXRT_ACT_HARD_SIGMOID;
        alpha = node_attr_float(u, "alpha", 0.2f);
        beta = node_attr_float(u, "beta", 0.5f);
        break;
    case FX_OP_Clip:
        act = FXRT_ACT_CLIP;
        alpha = -INFINITY;
        beta = INFINITY;
        if ((u->num_args > 1 && u->args[1] && !scalar_const(u->args[1], &alpha)) ||
            (u->num_args > 2 && u->args[2] && !scalar_const(u->args[2], &beta)))
            return false;
        break;
    default: return false;
    }
    if (!absorb(c, u))
        return false;
    c->act = act;
    c->alpha = alpha;
    c->beta = beta;
    return true;
}

/* Whether n can anchor a chain, and as what. */
static bool anchor_kind(const Node *n, AnchorKind *kind)
{
    if (n->opcode != FX_OPCODE_CALL_FUNCTION ||
        (n->op != &fx_op_Conv && n->op != &fx_op_Gemm && n->op != &fx_op_MatMul) ||
        n->num_args < 2 || !is_f32(n) || !is_f32(n->args[0]) || !is_f32(n->args[1]))
        return false;
    if (n->op == &fx_op_Conv) {
        *kind = ANCHOR_CONV;
        return true;
    }
    if (n->op == &fx_op_Gemm) {
        *kind = ANCHOR_GEMM;
        return n->num_args < 3 || !n->args[2] || node_attr_float(n, "beta", 1.0f) == 1.0f;
    }
    if (n->op == &fx_op_MatMul) {
        *kind = ANCHOR_MATMUL;
        return n->args[0]->out_types[0].rank >= 2 && n->args[1]->out_types[0].rank == 2 &&
               node_const_value(n->args[1]) != NULL;
    }
    return false;
}

static bool has_own_bias(const Chain *c)
{
    return c->kind != ANCHOR_MATMUL && c->anchor->num_args > 2 && c->anchor->args[2];
}

static void chain_grow(Chain *c, Diag *d, FxStatus *st)
{
    Node *u = node_fusable_user(c->last);
    if (u && node_is_op(u, &fx_op_Add) && !has_own_bias(c) && take_bias(c, u, d, st))
        u = node_fusable_user(c->last);
    if (*st != FX_OK)
        return;
    if (u && node_is_op(u, &fx_op_Add) && take_residual(c, u, 0))
        u = node_fusable_user(c->last);
    if (!take_activation(c) || c->residual)
        return;
    u = node_fusable_user(c->last);
    if (u && node_is_op(u, &fx_op_Add))
        take_residual(c, u, 1);
}

/* Builds the fused node in place of c->last and erases the chain. */
static FxStatus chain_fuse(Graph *g, Chain *c, Diag *d)
{
    Node *a = c->anchor;
    Node *bias = has_own_bias(c) ? a->args[2] : NULL;
    if (c->bias) {
        char hint[200];
        snprintf(hint, sizeof hint, "%s_bias", a->name);
        bias = graph_create_constant(g, NULL, hint, c->bias, d);
        c->bias = NULL;
        if (!bias)
            return FX_ERR_NOMEM;
    }
    Node *args[4] = {a->args[0], a->args[1], bias, c->residual};
    int num_args = c->residual ? 4 : bias ? 3 : 2;
    const OpDef *op = c->kind == ANCHOR_CONV ? &fx_op_FusedConv : &fx_op_FusedGemm;
    char hint[200];
    snprintf(hint, sizeof hint, "%s%s%s%s", a->name, c->act != FXRT_ACT_NONE ? "_" : "",
             c->act != FXRT_ACT_NONE ? fused_nn_activation_name(c->act) : "",
             c->residual ? "_add" : (c->act == FXRT_ACT_NONE ? "_fused" : ""));
    Node *f = graph_create_module(g, c->last, op, hint, args, num_args);
    if (!f)
        return diag_error(d, FX_ERR_NOMEM, "out of memory fusing %s", a->name);
    bool ok = true;
    for (int i = 0; i < a->num_attrs && ok; i++)
        if (strcmp(a->attrs[i].name, "beta") != 0)
            ok = node_copy_attr(f, &a->attrs[i], d);
    ok = ok && node_set_attr_string(f, "activation", fused_nn_activation_name(c->act)) &&
         node_set_attr_float(f, "act_alpha", c->alpha) &&
         node_set_attr_float(f, "act_beta", c->beta) &&
         node_set_attr_int(f, "residual_after", c->residual_after);
    FxStatus st = ok ? FX_OK : diag_node_error(d, FX_ERR_NOMEM, f, "out of memory");
    if (st == FX_OK && (st = op_apply_attr_specs(op, f, d)) == FX_OK &&
        !node_set_num_outputs(f, 1))
        st = diag_node_error(d, FX_ERR_NOMEM, f, "out of memory");
    if (st == FX_OK)
        st = node_infer_shapes(f, d);
    if (st != FX_OK) {
        graph_erase_node(g, f);
        return st;
    }
    if (node_replace_all_uses_with(c->last, f) < 0)
        return diag_node_error(d, FX_ERR_NOMEM, f, "out of memory");
    node_eliminate_if_dead(c->last);
    return FX_OK;
}

FxStatus pass_epilogue_fusion(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    int count = 0;
    graph_for_each(g, n) count++;
    Node **anchors = fx_alloc_array((size_t)count + 1, sizeof *anchors);
    if (!anchors)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    int num_anchors = 0;
    AnchorKind kind;
    graph_for_each(g, n) if (anchor_kind(n, &kind)) anchors[num_anchors++] = n;
    /* Chains never overlap: a chain starts at an anchor's value and only
     * absorbs elementwise ops, which no other anchor is. */
    FxStatus st = FX_OK;
    for (int k = 0; k < num_anchors && st == FX_OK; k++) {
        Chain c = {.anchor = anchors[k], .last = anchors[k]};
        anchor_kind(c.anchor, &c.kind);
        chain_grow(&c, d, &st);
        if (st == FX_OK && c.num_nodes > 0) {
            st = chain_fuse(g, &c, d);
            if (st == FX_OK)
                r->changes++;
        }
        tensor_free(c.bias);
    }
    free(anchors);
    return pass_finish(g, r, st);
}
