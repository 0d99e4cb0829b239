/*
 * decompose.c - decomposition rules: ops rebuilt from simpler ops with the
 * same meaning, and the rewrite that applies them in place.
 *
 * Each rule builds, at an insertion point, primitive nodes computing what
 * the node computes, from arguments it is given (the node's own, or their
 * images in another graph, so a Transformer hook can call a rule too).  The
 * builders chain through small helpers that pass a NULL on, so a rule reads
 * as its formula and the first failure (its message in d) ends it.  Every
 * node is made with ip_create_op, so its shapes are inferred as it is made,
 * and constants are scalars of the input's element type.
 *
 * graph_decompose walks the graph once, in order: a matching node gets its
 * replacement built just before it, its uses moved to the replacement, and
 * is erased.  The replacements come before the walk's cursor, so the walk
 * never decomposes what a rule just made.  A node with several outputs
 * (LayerNormalization with Mean and InvStdDev) is left alone: the rules
 * give one value.  When a rule fails, or gives a type other than the node's,
 * what it made is erased and the graph is as it was before that node.
 *
 * The rules follow the ONNX definitions.  Relu is FX's example,
 * (x > 0) * x, which gives NaN at x = -inf where Relu gives 0.  Gelu is not
 * in fxcc's op table (it is opset 20), so it has no rule yet.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "opt.h"

/* --- building blocks ------------------------------------------------------- */

/* "<node>_<what>": the new nodes read as parts of the one they replace. */
static void part_name(const Node *n, const char *what, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s_", n->name);
    size_t at = strlen(buf);
    for (size_t i = 0; what[i] && at + 1 < cap; i++)
        buf[at++] = (char)tolower((unsigned char)what[i]);
    buf[at] = '\0';
}

/* An op node at ip; NULL when any required argument is (an earlier step
 * failed and filled d). */
static Node *make(InsertPoint *ip, const Node *n, const OpDef *op, Node *a, Node *b, Node *c,
                  Diag *d)
{
    Node *args[3] = {a, b, c};
    int count = c ? 3 : b ? 2 : 1;
    for (int i = 0; i < count; i++)
        if (!args[i])
            return NULL;
    char name[256];
    part_name(n, op->name, name, sizeof name);
    return ip_create_op(ip, op, name, args, count, d);
}

static Node *unary(InsertPoint *ip, const Node *n, const OpDef *op, Node *a, Diag *d)
{
    return make(ip, n, op, a, NULL, NULL, d);
}

static Node *binary(InsertPoint *ip, const Node *n, const OpDef *op, Node *a, Node *b, Diag *d)
{
    return a && b ? make(ip, n, op, a, b, NULL, d) : NULL;
}

/* The element type of a value, or UNDEFINED when it has no shape yet. */
static DType dtype_of(const Node *a)
{
    return a && a->shapes_known && a->num_outputs == 1 ? a->out_types[0].dtype
                                                       : FXRT_DTYPE_UNDEFINED;
}

/* A scalar constant of like's element type (float or signed integer). */
static Node *scalar(InsertPoint *ip, const Node *n, const char *what, const Node *like, double v,
                    Diag *d)
{
    if (!like)
        return NULL;
    TensorType t = {.dtype = dtype_of(like), .rank = 0};
    switch (t.dtype) {
    case FXRT_DTYPE_FLOAT32: case FXRT_DTYPE_FLOAT64: case FXRT_DTYPE_INT8:
    case FXRT_DTYPE_INT16: case FXRT_DTYPE_INT32: case FXRT_DTYPE_INT64:
        break;
    default:
        diag_node_error(d, FX_ERR_UNSUPPORTED, n, "no decomposition on %s values",
                        dtype_name(t.dtype));
        return NULL;
    }
    Tensor *c = tensor_new(&t, d);
    if (!c)
        return NULL;
    switch (t.dtype) {
    case FXRT_DTYPE_FLOAT32: *(float *)c->data = (float)v; break;
    case FXRT_DTYPE_FLOAT64: *(double *)c->data = v; break;
    case FXRT_DTYPE_INT8: *(int8_t *)c->data = (int8_t)v; break;
    case FXRT_DTYPE_INT16: *(int16_t *)c->data = (int16_t)v; break;
    case FXRT_DTYPE_INT32: *(int32_t *)c->data = (int32_t)v; break;
    default: *(int64_t *)c->data = (int64_t)v; break;
    }
    char name[256];
    part_name(n, what, name, sizeof name);
    return create_constant(ip->graph, name, c, d);
}

/* The constant axes input of a reduction over axes first..rank-1 of x
 * (just `first` when only_first), first normalized from a possibly negative
 * attribute. */
static Node *axes_from(InsertPoint *ip, const Node *n, const Node *x, int64_t first,
                       bool only_first, Diag *d)
{
    if (!x)
        return NULL;
    int rank = x->out_types[0].rank;
    if (first < 0)
        first += rank;
    if (first < 0 || first >= rank) {
        diag_node_error(d, FX_ERR_INVALID, n, "axis %lld is out of range for rank %d",
                        (long long)node_attr_int(n, "axis", 0), rank);
        return NULL;
    }
    int64_t axes[FX_MAX_RANK];
    int count = 0;
    for (int64_t a = first; a < (only_first ? first + 1 : rank); a++)
        axes[count++] = a;
    Tensor *t = tensor_new_ints(axes, count, d);
    if (!t)
        return NULL;
    char name[256];
    part_name(n, "axes", name, sizeof name);
    return create_constant(ip->graph, name, t, d);
}

/* --- the rules ------------------------------------------------------------- */

/* (x > 0) * x */
static Node *build_relu(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    Node *x = args[0];
    Node *positive = binary(ip, n, &fx_op_Greater, x, scalar(ip, n, "zero", x, 0, d), d);
    return binary(ip, n, &fx_op_Mul, binary(ip, n, &fx_op_CastLike, positive, x, d), x, d);
}

/* clip(alpha * x + beta, 0, 1) */
static Node *hard_sigmoid(InsertPoint *ip, const Node *n, Node *x, double alpha, double beta,
                          Diag *d)
{
    Node *scaled = binary(ip, n, &fx_op_Mul, x, scalar(ip, n, "alpha", x, alpha, d), d);
    Node *shifted = binary(ip, n, &fx_op_Add, scaled, scalar(ip, n, "beta", x, beta, d), d);
    Node *lo = scalar(ip, n, "zero", x, 0, d), *hi = scalar(ip, n, "one", x, 1, d);
    return shifted && lo && hi ? make(ip, n, &fx_op_Clip, shifted, lo, hi, d) : NULL;
}

static Node *build_hard_sigmoid(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    return hard_sigmoid(ip, n, args[0], node_attr_float(n, "alpha", 0.2f),
                        node_attr_float(n, "beta", 0.5f), d);
}

/* x * hard_sigmoid(x; 1/6, 1/2) */
static Node *build_hard_swish(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    return binary(ip, n, &fx_op_Mul, args[0], hard_sigmoid(ip, n, args[0], 1.0 / 6.0, 0.5, d), d);
}

/* 1 / (1 + exp(-x)) */
static Node *build_sigmoid(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    Node *x = args[0];
    Node *e = unary(ip, n, &fx_op_Exp, unary(ip, n, &fx_op_Neg, x, d), d);
    Node *denominator = binary(ip, n, &fx_op_Add, e, scalar(ip, n, "one", x, 1, d), d);
    return unary(ip, n, &fx_op_Reciprocal, denominator, d);
}

/* alpha * (exp(x) - 1) where x < 0, else x */
static Node *negative_exp(InsertPoint *ip, const Node *n, Node *x, double alpha, Diag *d)
{
    Node *em1 = binary(ip, n, &fx_op_Sub, unary(ip, n, &fx_op_Exp, x, d),
                       scalar(ip, n, "one", x, 1, d), d);
    return binary(ip, n, &fx_op_Mul, em1, scalar(ip, n, "alpha", x, alpha, d), d);
}

static Node *build_elu(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    Node *x = args[0];
    Node *negative = binary(ip, n, &fx_op_Less, x, scalar(ip, n, "zero", x, 0, d), d);
    Node *below = negative_exp(ip, n, x, node_attr_float(n, "alpha", 1.0f), d);
    return negative && below ? make(ip, n, &fx_op_Where, negative, below, x, d) : NULL;
}

/* gamma * (x where x > 0, else alpha * (exp(x) - 1)) */
static Node *build_selu(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    Node *x = args[0];
    Node *positive = binary(ip, n, &fx_op_Greater, x, scalar(ip, n, "zero", x, 0, d), d);
    Node *below = negative_exp(ip, n, x, node_attr_float(n, "alpha", 1.67326319217681884765625f),
                               d);
    Node *y = positive && below ? make(ip, n, &fx_op_Where, positive, x, below, d) : NULL;
    return binary(ip, n, &fx_op_Mul, y,
                  scalar(ip, n, "gamma", x, node_attr_float(n, "gamma", 1.05070102214813232421875f),
                         d),
                  d);
}

/* Softmax and LogSoftmax normalize along `axis`, or (the pre-13 form,
 * coerce_2d) over all axes from it on. */
static Node *softmax_axes(InsertPoint *ip, const Node *n, const Node *x, Diag *d)
{
    return axes_from(ip, n, x, node_attr_int(n, "axis", -1),
                     node_attr_int(n, "coerce_2d", 0) == 0, d);
}

/* e = exp(x - max(x)); e / sum(e) */
static Node *build_softmax(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    Node *x = args[0], *axes = softmax_axes(ip, n, x, d);
    Node *shifted = binary(ip, n, &fx_op_Sub, x, binary(ip, n, &fx_op_ReduceMax, x, axes, d), d);
    Node *e = unary(ip, n, &fx_op_Exp, shifted, d);
    return binary(ip, n, &fx_op_Div, e, binary(ip, n, &fx_op_ReduceSum, e, axes, d), d);
}

/* s = x - max(x); s - log(sum(exp(s))) */
static Node *build_log_softmax(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    Node *x = args[0], *axes = softmax_axes(ip, n, x, d);
    Node *shifted = binary(ip, n, &fx_op_Sub, x, binary(ip, n, &fx_op_ReduceMax, x, axes, d), d);
    Node *sum = binary(ip, n, &fx_op_ReduceSum, unary(ip, n, &fx_op_Exp, shifted, d), axes, d);
    return binary(ip, n, &fx_op_Sub, shifted, unary(ip, n, &fx_op_Log, sum, d), d);
}

/* d = x - mean(x); d / sqrt(mean(d * d) + epsilon) * scale + bias, the
 * means over the axes from `axis` on. */
static Node *build_layer_norm(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    Node *x = args[0], *scale = args[1], *bias = n->num_args > 2 ? args[2] : NULL;
    Node *axes = axes_from(ip, n, x, node_attr_int(n, "axis", -1), false, d);
    Node *centered =
        binary(ip, n, &fx_op_Sub, x, binary(ip, n, &fx_op_ReduceMean, x, axes, d), d);
    Node *variance = binary(ip, n, &fx_op_ReduceMean,
                            binary(ip, n, &fx_op_Mul, centered, centered, d), axes, d);
    Node *eps = scalar(ip, n, "epsilon", x, node_attr_float(n, "epsilon", 1e-5f), d);
    Node *std = unary(ip, n, &fx_op_Sqrt, binary(ip, n, &fx_op_Add, variance, eps, d), d);
    Node *y = binary(ip, n, &fx_op_Mul, binary(ip, n, &fx_op_Div, centered, std, d), scale, d);
    return bias ? binary(ip, n, &fx_op_Add, y, bias, d) : y;
}

static const DecompositionRule builtin_rules[] = {
    {&fx_op_Relu, build_relu},
    {&fx_op_HardSigmoid, build_hard_sigmoid},
    {&fx_op_HardSwish, build_hard_swish},
    {&fx_op_Sigmoid, build_sigmoid},
    {&fx_op_Elu, build_elu},
    {&fx_op_Selu, build_selu},
    {&fx_op_Softmax, build_softmax},
    {&fx_op_LogSoftmax, build_log_softmax},
    {&fx_op_LayerNormalization, build_layer_norm},
    {NULL, NULL},
};

const DecompositionRule *decomposition_rules(void) { return builtin_rules; }

/* --- the rewrite ----------------------------------------------------------- */

static const DecompositionRule *rule_for(const DecompositionRule *rules, const Node *n)
{
    for (const DecompositionRule *r = rules; r->op; r++)
        if (r->op == n->op)
            return r;
    return NULL;
}

static bool selected(const Node *n, const OpDef *const *only, int num_only)
{
    if (!only)
        return true;
    for (int i = 0; i < num_only; i++)
        if (only[i] == n->op)
            return true;
    return false;
}

/* Erases the nodes made since id `first_id`.  They are used only by each
 * other, and users come after their arguments, so one backward walk does. */
static void erase_since(Graph *g, int first_id)
{
    for (Node *n = g->root.prev, *prev; n != &g->root; n = prev) {
        prev = n->prev;
        if (n->id >= first_id && n->num_users == 0)
            graph_erase_node(g, n);
    }
}

/* Builds n's replacement and checks it gives what n gave. */
static FxStatus decompose_node(Graph *g, Node *n, const DecompositionRule *rule, Diag *d)
{
    int first_id = g->next_id;
    size_t errors = d->count;
    InsertPoint ip = insert_before(n);
    Node *r = rule->build(&ip, n, n->args, d);
    FxStatus st = FX_OK;
    if (!r) {
        st = d->count > errors ? d->entries[errors].status
                               : diag_node_error(d, FX_ERR_INVALID, n,
                                                 "the %s decomposition built nothing", n->op->name);
    } else if (n->shapes_known &&
               (r->num_outputs != 1 || !type_equal(&r->out_types[0], &n->out_types[0]))) {
        char want[128], got[128];
        st = diag_node_error(d, FX_ERR_SHAPE, n, "the %s decomposition gives %s, the node %s",
                             n->op->name, type_format(&r->out_types[0], got, sizeof got),
                             type_format(&n->out_types[0], want, sizeof want));
    }
    if (st != FX_OK) {
        erase_since(g, first_id);
        return st;
    }
    if (node_replace_all_uses_with(n, r) < 0)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    graph_erase_node(g, n);
    return FX_OK;
}

FxStatus graph_decompose(Graph *g, const DecompositionRule *rules, const OpDef *const *only,
                         int num_only, int *count, Diag *d)
{
    if (!rules)
        rules = builtin_rules;
    int done = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, n) {
        bool computes = n->opcode == FX_OPCODE_CALL_FUNCTION ||
                        n->opcode == FX_OPCODE_CALL_METHOD || n->opcode == FX_OPCODE_CALL_MODULE;
        if (!computes || n->num_outputs != 1 || !selected(n, only, num_only))
            continue;
        const DecompositionRule *rule = rule_for(rules, n);
        if (!rule)
            continue;
        if ((st = decompose_node(g, n, rule, d)) != FX_OK)
            break;
        done++;
    }
    if (count)
        *count = done;
    return st;
}
