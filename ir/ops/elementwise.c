/*
 * elementwise.c - the elementwise op family: unary math and activations,
 * binary arithmetic, comparisons and logic with NumPy broadcasting, the
 * variadic Sum/Mean/Min/Max, Where and Clip.  (Cast, CastLike and the
 * linear (de)quantizers live in elementwise_cast.c.)
 *
 * Most ops differ only in which runtime op they call and which element
 * types they accept, so one table (ew_info, indexed by OpKind) holds that,
 * and a handful of shared infer/eval functions serve every row.  The
 * numerics are the runtime's (runtime/fxrt_elementwise*.c); this file only
 * checks types and shapes, reads attributes and computes strides.
 *
 * Refusals: float16/bfloat16/string inputs (FX_ERR_UNSUPPORTED); element
 * types ONNX does not allow for the op, mismatched operand types, shapes
 * that do not broadcast, Mod with fmod=0 on floats, a BitShift direction
 * other than LEFT/RIGHT, PRelu slopes that do not broadcast to X, Clip
 * bounds that are not single elements (FX_ERR_INVALID / FX_ERR_SHAPE);
 * integer division or remainder by zero at eval time (FX_ERR_RUNTIME).
 * Opsets: the canonical form is opset 17's.  Clip before opset 11 took
 * min/max attributes; canonicalize turns them into constant inputs.  The
 * other ops only widened their type lists over opsets 7..17, so accepting
 * the newest list serves every opset.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../ir.h"

/* --- element type classes -------------------------------------------------- */

enum {
    TC_FLOAT = 1u << 0, /* float32, float64 */
    TC_SINT = 1u << 1,  /* int8..int64 */
    TC_UINT = 1u << 2,  /* uint8..uint64 */
    TC_BOOL = 1u << 3,
    TC_INT = TC_SINT | TC_UINT,
    TC_NUM = TC_FLOAT | TC_INT,
    TC_ANY = TC_NUM | TC_BOOL
};

/* The class bit of t; 0 for types fxcc does not compute on. */
static unsigned type_class(DType t)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: case FXRT_DTYPE_FLOAT64:
        return TC_FLOAT;
    case FXRT_DTYPE_INT8: case FXRT_DTYPE_INT16: case FXRT_DTYPE_INT32: case FXRT_DTYPE_INT64:
        return TC_SINT;
    case FXRT_DTYPE_UINT8: case FXRT_DTYPE_UINT16: case FXRT_DTYPE_UINT32:
    case FXRT_DTYPE_UINT64:
        return TC_UINT;
    case FXRT_DTYPE_BOOL:
        return TC_BOOL;
    default:
        return 0;
    }
}

static const char *class_text(unsigned types)
{
    switch (types) {
    case TC_FLOAT: return "float32 or float64";
    case TC_FLOAT | TC_SINT: return "a float or signed integer type";
    case TC_UINT: return "an unsigned integer type";
    case TC_BOOL: return "bool";
    case TC_NUM: return "a numeric type";
    default: return "a numeric or bool type";
    }
}

static const TensorType *input_type(const InferCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

static const Tensor *input_tensor(const EvalCtx *c, int i)
{
    return i < c->num_inputs ? c->in[i] : NULL;
}

/* Input i must be present and of one of the classes in `types`. */
static FxStatus check_input(InferCtx *c, int i, unsigned types)
{
    const TensorType *t = input_type(c, i);
    if (!t)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "input %d is missing", i);
    unsigned cls = type_class(t->dtype);
    if (!cls)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "input %d has element type %s, which fxcc does not support", i,
                               dtype_name(t->dtype));
    if (!(cls & types))
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "input %d has element type %s; %s takes %s", i,
                               dtype_name(t->dtype), c->node->op->name, class_text(types));
    return FX_OK;
}

static FxStatus check_same_dtype(InferCtx *c, int i, int j)
{
    const TensorType *a = input_type(c, i), *b = input_type(c, j);
    if (a->dtype != b->dtype)
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "inputs %d and %d have different element types (%s, %s)", i, j,
                               dtype_name(a->dtype), dtype_name(b->dtype));
    return FX_OK;
}

/* Maps a runtime status to a node error. */
static FxStatus runtime_status(EvalCtx *c, int rc)
{
    if (rc == FXRT_EW_OK)
        return FX_OK;
    if (rc == FXRT_EW_ERR_DIV_ZERO)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "integer division by zero");
    return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                           "the runtime has no kernel for element type %s",
                           dtype_name(c->in[0]->type.dtype));
}

/* --- the table ------------------------------------------------------------- */

typedef enum EwKind {
    EW_NONE = 0, /* not served by the shared functions */
    EW_UNARY,    /* fxrt_unary */
    EW_BINARY,   /* fxrt_binary with broadcasting */
    EW_VARIADIC  /* fxrt_binary folded over 1..N inputs */
} EwKind;

typedef struct EwInfo {
    EwKind kind;
    unsigned types;      /* accepted element types of the inputs */
    int rt_op;           /* FxrtUnaryOp or FxrtBinaryOp */
    const char *p0, *p1; /* float attributes passed as params[0], params[1] */
} EwInfo;

#define UN(types, uop) {EW_UNARY, types, FXRT_UNARY_##uop, NULL, NULL}
#define UN1(types, uop, a) {EW_UNARY, types, FXRT_UNARY_##uop, a, NULL}
#define UN2(types, uop, a, b) {EW_UNARY, types, FXRT_UNARY_##uop, a, b}
#define BIN(types, bop) {EW_BINARY, types, FXRT_BINARY_##bop, NULL, NULL}
#define VAR(types, bop) {EW_VARIADIC, types, FXRT_BINARY_##bop, NULL, NULL}

static const EwInfo ew_info[FX_OP_COUNT_] = {
    [FX_OP_Neg] = UN(TC_FLOAT | TC_SINT, NEG),
    [FX_OP_Abs] = UN(TC_NUM, ABS),
    [FX_OP_Sign] = UN(TC_NUM, SIGN),
    [FX_OP_Relu] = UN(TC_FLOAT | TC_SINT, RELU),
    [FX_OP_Sqrt] = UN(TC_FLOAT, SQRT),
    [FX_OP_Exp] = UN(TC_FLOAT, EXP),
    [FX_OP_Log] = UN(TC_FLOAT, LOG),
    [FX_OP_Reciprocal] = UN(TC_FLOAT, RECIPROCAL),
    [FX_OP_Erf] = UN(TC_FLOAT, ERF),
    [FX_OP_Tanh] = UN(TC_FLOAT, TANH),
    [FX_OP_Sigmoid] = UN(TC_FLOAT, SIGMOID),
    [FX_OP_LeakyRelu] = UN1(TC_FLOAT, LEAKY_RELU, "alpha"),
    [FX_OP_Elu] = UN1(TC_FLOAT, ELU, "alpha"),
    [FX_OP_Selu] = UN2(TC_FLOAT, SELU, "alpha", "gamma"),
    [FX_OP_Celu] = UN1(TC_FLOAT, CELU, "alpha"),
    [FX_OP_HardSigmoid] = UN2(TC_FLOAT, HARD_SIGMOID, "alpha", "beta"),
    [FX_OP_HardSwish] = UN(TC_FLOAT, HARD_SWISH),
    [FX_OP_Softplus] = UN(TC_FLOAT, SOFTPLUS),
    [FX_OP_Softsign] = UN(TC_FLOAT, SOFTSIGN),
    [FX_OP_ThresholdedRelu] = UN1(TC_FLOAT, THRESHOLDED_RELU, "alpha"),
    [FX_OP_Shrink] = UN2(TC_NUM, SHRINK, "bias", "lambd"),
    [FX_OP_Floor] = UN(TC_FLOAT, FLOOR),
    [FX_OP_Ceil] = UN(TC_FLOAT, CEIL),
    [FX_OP_Round] = UN(TC_FLOAT, ROUND),
    [FX_OP_Sin] = UN(TC_FLOAT, SIN),
    [FX_OP_Cos] = UN(TC_FLOAT, COS),
    [FX_OP_Tan] = UN(TC_FLOAT, TAN),
    [FX_OP_Asin] = UN(TC_FLOAT, ASIN),
    [FX_OP_Acos] = UN(TC_FLOAT, ACOS),
    [FX_OP_Atan] = UN(TC_FLOAT, ATAN),
    [FX_OP_Sinh] = UN(TC_FLOAT, SINH),
    [FX_OP_Cosh] = UN(TC_FLOAT, COSH),
    [FX_OP_Asinh] = UN(TC_FLOAT, ASINH),
    [FX_OP_Acosh] = UN(TC_FLOAT, ACOSH),
    [FX_OP_Atanh] = UN(TC_FLOAT, ATANH),

    [FX_OP_Add] = BIN(TC_NUM, ADD),
    [FX_OP_Sub] = BIN(TC_NUM, SUB),
    [FX_OP_Mul] = BIN(TC_NUM, MUL),
    [FX_OP_Div] = BIN(TC_NUM, DIV),
    [FX_OP_Pow] = BIN(TC_NUM, POW),
    [FX_OP_Mod] = BIN(TC_NUM, MOD),
    [FX_OP_BitShift] = BIN(TC_UINT, SHL),
    [FX_OP_PRelu] = BIN(TC_NUM, PRELU),
    [FX_OP_Equal] = BIN(TC_ANY, EQUAL),
    [FX_OP_Less] = BIN(TC_NUM, LESS),
    [FX_OP_LessOrEqual] = BIN(TC_NUM, LESS_EQUAL),
    [FX_OP_Greater] = BIN(TC_NUM, GREATER),
    [FX_OP_GreaterOrEqual] = BIN(TC_NUM, GREATER_EQUAL),
    [FX_OP_And] = BIN(TC_BOOL, AND),
    [FX_OP_Or] = BIN(TC_BOOL, OR),
    [FX_OP_Xor] = BIN(TC_BOOL, XOR),

    [FX_OP_Min] = VAR(TC_NUM, MIN),
    [FX_OP_Max] = VAR(TC_NUM, MAX),
    [FX_OP_Sum] = VAR(TC_FLOAT, ADD),
    [FX_OP_Mean] = VAR(TC_FLOAT, ADD),
};

static const EwInfo *info_of(const Node *n) { return &ew_info[op_kind(n->op)]; }

/* The runtime op a binary node runs: Mod and BitShift pick theirs from an
 * attribute. */
static FxrtBinaryOp binary_op_of(const Node *n)
{
    const EwInfo *e = info_of(n);
    if (n->op == &fx_op_Mod)
        return node_attr_int(n, "fmod", 0) ? FXRT_BINARY_FMOD : FXRT_BINARY_MOD;
    if (n->op == &fx_op_BitShift)
        return strcmp(node_attr_string(n, "direction", ""), "LEFT") == 0 ? FXRT_BINARY_SHL
                                                                        : FXRT_BINARY_SHR;
    return (FxrtBinaryOp)e->rt_op;
}

/* --- unary ----------------------------------------------------------------- */

static FxStatus unary_infer(InferCtx *c)
{
    FxStatus st = check_input(c, 0, info_of(c->node)->types);
    if (st != FX_OK)
        return st;
    c->out[0] = *c->in[0];
    return FX_OK;
}

static FxStatus unary_eval(EvalCtx *c)
{
    const EwInfo *e = info_of(c->node);
    double params[2] = {0.0, 0.0};
    if (e->p0)
        params[0] = node_attr_float(c->node, e->p0, 0.0f);
    if (e->p1)
        params[1] = node_attr_float(c->node, e->p1, 0.0f);
    const Tensor *x = c->in[0];
    size_t n = (size_t)tensor_numel(x);
    if (x->type.dtype == FXRT_DTYPE_FLOAT32) {
        float p[2] = {(float)params[0], (float)params[1]};
        fxrt_unary_f32((FxrtUnaryOp)e->rt_op, x->data, c->out[0]->data, n, p);
        return FX_OK;
    }
    return runtime_status(c, fxrt_unary((FxrtUnaryOp)e->rt_op, x->type.dtype, x->data,
                                        c->out[0]->data, n, params));
}

/* IsNaN, IsInf and Not: bool results. */
static FxStatus predicate_infer(InferCtx *c)
{
    FxStatus st = check_input(c, 0, c->node->op == &fx_op_Not ? TC_BOOL : TC_FLOAT);
    if (st != FX_OK)
        return st;
    c->out[0] = *c->in[0];
    c->out[0].dtype = FXRT_DTYPE_BOOL;
    return FX_OK;
}

static FxStatus predicate_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    size_t n = (size_t)tensor_numel(x);
    uint8_t *y = c->out[0]->data;
    if (c->node->op == &fx_op_Not) {
        fxrt_not_bool(x->data, y, n);
        return FX_OK;
    }
    if (c->node->op == &fx_op_IsNaN)
        return runtime_status(c, fxrt_isnan(x->type.dtype, x->data, y, n));
    return runtime_status(
        c, fxrt_isinf(x->type.dtype, x->data, y, n,
                      node_attr_int(c->node, "detect_negative", 1) != 0,
                      node_attr_int(c->node, "detect_positive", 1) != 0));
}

/* --- binary ---------------------------------------------------------------- */

static FxStatus binary_infer(InferCtx *c)
{
    const Node *n = c->node;
    const EwInfo *e = info_of(n);
    FxStatus st;
    if ((st = check_input(c, 0, e->types)) != FX_OK ||
        (st = check_input(c, 1, e->types)) != FX_OK)
        return st;
    /* Pow alone lets the exponent have its own type. */
    if (n->op != &fx_op_Pow && (st = check_same_dtype(c, 0, 1)) != FX_OK)
        return st;
    if (n->op == &fx_op_Mod && type_class(c->in[0]->dtype) == TC_FLOAT &&
        node_attr_int(n, "fmod", 0) == 0)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "Mod on %s needs fmod=1 (fmod=0 is for integers)",
                               dtype_name(c->in[0]->dtype));
    if (n->op == &fx_op_Mod && node_attr_int(n, "fmod", 0) != 0 &&
        node_attr_int(n, "fmod", 0) != 1)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "fmod must be 0 or 1, not %lld",
                               (long long)node_attr_int(n, "fmod", 0));
    if (n->op == &fx_op_BitShift) {
        const char *dir = node_attr_string(n, "direction", "");
        if (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0)
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                                   "direction must be \"LEFT\" or \"RIGHT\", not \"%s\"", dir);
    }
    TensorType out = *c->in[0];
    if ((st = infer_broadcast(c, c->in[0], c->in[1], &out)) != FX_OK)
        return st;
    if (n->op == &fx_op_PRelu && !type_equal(&out, c->in[0])) {
        char sx[128], ss[128];
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "slope %s does not broadcast to X %s (PRelu broadcasts one way)",
                               type_format(c->in[1], ss, sizeof ss),
                               type_format(c->in[0], sx, sizeof sx));
    }
    out.dtype = fxrt_binary_is_predicate((FxrtBinaryOp)e->rt_op) ? FXRT_DTYPE_BOOL
                                                                 : c->in[0]->dtype;
    c->out[0] = out;
    return FX_OK;
}

static FxStatus binary_eval(EvalCtx *c)
{
    const Tensor *a = c->in[0], *b = c->in[1];
    Tensor *y = c->out[0];
    const TensorType *yt = &y->type;
    int64_t sa[FX_MAX_RANK], sb[FX_MAX_RANK];
    fxrt_broadcast_strides(yt->rank, yt->dims, a->type.rank, a->type.dims, sa);
    fxrt_broadcast_strides(yt->rank, yt->dims, b->type.rank, b->type.dims, sb);
    FxrtBinaryOp op = binary_op_of(c->node);
    if (c->node->op == &fx_op_Pow)
        return runtime_status(c, fxrt_pow(yt->rank, yt->dims, a->type.dtype, a->data, sa,
                                          b->type.dtype, b->data, sb, y->data));
    if (a->type.dtype == FXRT_DTYPE_FLOAT32 && !fxrt_binary_is_predicate(op)) {
        fxrt_binary_f32(op, yt->rank, yt->dims, a->data, sa, b->data, sb, y->data);
        return FX_OK;
    }
    return runtime_status(c, fxrt_binary(op, a->type.dtype, yt->rank, yt->dims, a->data, sa,
                                         b->data, sb, y->data));
}

/* --- variadic -------------------------------------------------------------- */

static FxStatus variadic_infer(InferCtx *c)
{
    const EwInfo *e = info_of(c->node);
    FxStatus st;
    if (c->num_inputs < 1)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "needs at least one input");
    TensorType out = {0};
    for (int i = 0; i < c->num_inputs; i++) {
        if ((st = check_input(c, i, e->types)) != FX_OK)
            return st;
        if (i == 0) {
            out = *c->in[0];
            continue;
        }
        if ((st = check_same_dtype(c, 0, i)) != FX_OK ||
            (st = infer_broadcast(c, &out, c->in[i], &out)) != FX_OK)
            return st;
    }
    c->out[0] = out;
    return FX_OK;
}

/* y = in0 op in1, then y = y op in_k: every step reads y in place with the
 * output's contiguous strides, which the runtime allows. */
static FxStatus variadic_eval(EvalCtx *c)
{
    const EwInfo *e = info_of(c->node);
    FxrtBinaryOp op = (FxrtBinaryOp)e->rt_op;
    Tensor *y = c->out[0];
    const TensorType *yt = &y->type;
    DType dt = yt->dtype;
    int64_t sa[FX_MAX_RANK], sb[FX_MAX_RANK];
    const Tensor *first = c->in[0];
    if (c->num_inputs == 1) {
        memcpy(y->data, first->data, tensor_nbytes(y));
    } else {
        for (int i = 1; i < c->num_inputs; i++) {
            const Tensor *a = i == 1 ? first : y, *b = c->in[i];
            fxrt_broadcast_strides(yt->rank, yt->dims, a->type.rank, a->type.dims, sa);
            fxrt_broadcast_strides(yt->rank, yt->dims, b->type.rank, b->type.dims, sb);
            FxStatus st = runtime_status(c, fxrt_binary(op, dt, yt->rank, yt->dims, a->data, sa,
                                                        b->data, sb, y->data));
            if (st != FX_OK)
                return st;
        }
    }
    if (c->node->op == &fx_op_Mean && c->num_inputs > 1) {
        /* Mean = Sum / N, divided like the reference rather than scaled by 1/N. */
        int64_t s[FX_MAX_RANK], zero[FX_MAX_RANK] = {0};
        fxrt_broadcast_strides(yt->rank, yt->dims, yt->rank, yt->dims, s);
        double nd = (double)c->num_inputs;
        float nf = (float)c->num_inputs;
        const void *divisor = dt == FXRT_DTYPE_FLOAT32 ? (const void *)&nf : (const void *)&nd;
        return runtime_status(c, fxrt_binary(FXRT_BINARY_DIV, dt, yt->rank, yt->dims, y->data,
                                             s, divisor, zero, y->data));
    }
    return FX_OK;
}

/* --- Where ----------------------------------------------------------------- */

static FxStatus where_infer(InferCtx *c)
{
    FxStatus st;
    if ((st = check_input(c, 0, TC_BOOL)) != FX_OK || (st = check_input(c, 1, TC_ANY)) != FX_OK ||
        (st = check_input(c, 2, TC_ANY)) != FX_OK || (st = check_same_dtype(c, 1, 2)) != FX_OK)
        return st;
    TensorType out = *c->in[1];
    if ((st = infer_broadcast(c, c->in[0], c->in[1], &out)) != FX_OK ||
        (st = infer_broadcast(c, &out, c->in[2], &out)) != FX_OK)
        return st;
    out.dtype = c->in[1]->dtype;
    c->out[0] = out;
    return FX_OK;
}

static FxStatus where_eval(EvalCtx *c)
{
    const Tensor *cond = c->in[0], *x = c->in[1], *y = c->in[2];
    Tensor *out = c->out[0];
    const TensorType *ot = &out->type;
    int64_t sc[FX_MAX_RANK], sx[FX_MAX_RANK], sy[FX_MAX_RANK];
    fxrt_broadcast_strides(ot->rank, ot->dims, cond->type.rank, cond->type.dims, sc);
    fxrt_broadcast_strides(ot->rank, ot->dims, x->type.rank, x->type.dims, sx);
    fxrt_broadcast_strides(ot->rank, ot->dims, y->type.rank, y->type.dims, sy);
    fxrt_where(fxrt_dtype_size(ot->dtype), ot->rank, ot->dims, cond->data, sc, x->data, sx,
               y->data, sy, out->data);
    return FX_OK;
}

/* --- Clip ------------------------------------------------------------------ */

/* Clip-6 (opsets 7..10) had float attributes min/max; Clip-11 made them
 * optional inputs.  The constants get the input's element type when it is
 * already known at import (a graph input or a constant), else float32:
 * Clip-6 took floats only, and infer accepts a float32 bound for a float64
 * input for exactly this case. */
static FxStatus clip_canonicalize(Graph *g, Node *n, int opset, Diag *d)
{
    const Attr *amin = node_attr(n, "min"), *amax = node_attr(n, "max");
    if (!amin && !amax)
        return FX_OK;
    if (opset >= 11)
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "Clip-11 and later take min/max as inputs, not attributes");
    if (n->num_args != 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "Clip-6 takes exactly one input");
    /* Placeholders and constants carry their element type from import on;
     * other nodes' types are still zero here (not float64). */
    DType dt = FXRT_DTYPE_FLOAT32;
    if (n->args[0] && n->args[0]->num_outputs == 1 &&
        n->args[0]->out_types[0].dtype == FXRT_DTYPE_FLOAT64)
        dt = FXRT_DTYPE_FLOAT64;
    const Attr *bounds[2] = {amin, amax};
    const char *names[2] = {"min", "max"};
    for (int k = 0; k < 2; k++) {
        if (!bounds[k]) {
            if (k == 0) /* an omitted min before a max; no trailing "None" */
                node_append_arg(n, NULL);
            continue;
        }
        TensorType t = {.dtype = dt, .rank = 0};
        Tensor *v = tensor_new(&t, d);
        if (!v)
            return FX_ERR_NOMEM;
        if (dt == FXRT_DTYPE_FLOAT64)
            *(double *)v->data = bounds[k]->f;
        else
            *(float *)v->data = bounds[k]->f;
        char hint[64];
        snprintf(hint, sizeof hint, "%s_%s", n->name, names[k]);
        Node *cn = graph_create_constant(g, n, hint, v);
        if (!cn)
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        node_append_arg(n, cn);
    }
    node_remove_attr(n, "min");
    node_remove_attr(n, "max");
    return FX_OK;
}

static FxStatus clip_infer(InferCtx *c)
{
    FxStatus st = check_input(c, 0, TC_NUM);
    if (st != FX_OK)
        return st;
    DType dt = c->in[0]->dtype;
    for (int i = 1; i <= 2; i++) {
        const TensorType *b = input_type(c, i);
        if (!b)
            continue;
        bool legacy = dt == FXRT_DTYPE_FLOAT64 && b->dtype == FXRT_DTYPE_FLOAT32;
        if (b->dtype != dt && !legacy)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "bound %s has element type %s, the input %s",
                                   i == 1 ? "min" : "max", dtype_name(b->dtype),
                                   dtype_name(dt));
        if (type_numel(b) != 1)
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                                   "bound %s must be a single element, not %lld elements",
                                   i == 1 ? "min" : "max", (long long)type_numel(b));
    }
    c->out[0] = *c->in[0];
    return FX_OK;
}

static FxStatus clip_eval(EvalCtx *c)
{
    const Tensor *x = c->in[0];
    DType dt = x->type.dtype;
    size_t es = fxrt_dtype_size(dt);
    /* Bounds are copied into x's type (a float32 bound of a float64 input is
     * widened), so the kernel sees one element type. */
    unsigned char buf[2][8];
    const void *bound[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        const Tensor *b = input_tensor(c, k + 1);
        if (!b)
            continue;
        if (b->type.dtype == dt) {
            memcpy(buf[k], b->data, es);
        } else {
            double v = *(const float *)b->data;
            memcpy(buf[k], &v, sizeof v);
        }
        bound[k] = buf[k];
    }
    return runtime_status(c, fxrt_clip(dt, x->data, c->out[0]->data, (size_t)tensor_numel(x),
                                       bound[0], bound[1]));
}

/* --- attribute specs -------------------------------------------------------- */

static const AttrSpec no_attrs[] = {{NULL}};
static const AttrSpec alpha_001[] = {{"alpha", FX_ATTR_FLOAT, "0.01", false}, {NULL}};
static const AttrSpec alpha_1[] = {{"alpha", FX_ATTR_FLOAT, "1.0", false}, {NULL}};
static const AttrSpec selu_attrs[] = {
    {"alpha", FX_ATTR_FLOAT, "1.67326319217681884765625", false},
    {"gamma", FX_ATTR_FLOAT, "1.05070102214813232421875", false},
    {NULL}};
static const AttrSpec hard_sigmoid_attrs[] = {
    {"alpha", FX_ATTR_FLOAT, "0.2", false}, {"beta", FX_ATTR_FLOAT, "0.5", false}, {NULL}};
static const AttrSpec shrink_attrs[] = {
    {"bias", FX_ATTR_FLOAT, "0.0", false}, {"lambd", FX_ATTR_FLOAT, "0.5", false}, {NULL}};
static const AttrSpec isinf_attrs[] = {{"detect_negative", FX_ATTR_INT, "1", false},
                                       {"detect_positive", FX_ATTR_INT, "1", false},
                                       {NULL}};
/* Clip-6 attributes, removed by canonicalize; no defaults (absent = no bound). */
static const AttrSpec clip_attrs[] = {
    {"min", FX_ATTR_FLOAT, NULL, false}, {"max", FX_ATTR_FLOAT, NULL, false}, {NULL}};
static const AttrSpec mod_attrs[] = {{"fmod", FX_ATTR_INT, "0", false}, {NULL}};
static const AttrSpec bitshift_attrs[] = {{"direction", FX_ATTR_STRING, NULL, true}, {NULL}};

/* --- op definitions --------------------------------------------------------- */

#define EW_DEF(Name, nin_min, nin_max, extra_flags, attr_list, canon, inf, ev)           \
    const OpDef fx_op_##Name = {                                                         \
        .name = #Name,                                                                   \
        .min_inputs = nin_min, .max_inputs = nin_max,                                    \
        .min_outputs = 1, .max_outputs = 1,                                              \
        .flags = FX_OPF_ELEMENTWISE | (extra_flags),                                     \
        .attrs = attr_list,                                                              \
        .canonicalize = canon,                                                           \
        .infer = inf,                                                                    \
        .eval = ev,                                                                      \
    }

#define UNARY_DEF(Name, attr_list) EW_DEF(Name, 1, 1, 0, attr_list, NULL, unary_infer, unary_eval)
#define BINARY_DEF(Name, flags, attr_list)                                               \
    EW_DEF(Name, 2, 2, flags, attr_list, NULL, binary_infer, binary_eval)
#define VARIADIC_DEF(Name) \
    EW_DEF(Name, 1, -1, FX_OPF_COMMUTATIVE, no_attrs, NULL, variadic_infer, variadic_eval)

UNARY_DEF(Neg, no_attrs);
UNARY_DEF(Abs, no_attrs);
UNARY_DEF(Sign, no_attrs);
UNARY_DEF(Relu, no_attrs);
UNARY_DEF(Sqrt, no_attrs);
UNARY_DEF(Exp, no_attrs);
UNARY_DEF(Log, no_attrs);
UNARY_DEF(Reciprocal, no_attrs);
UNARY_DEF(Erf, no_attrs);
UNARY_DEF(Tanh, no_attrs);
UNARY_DEF(Sigmoid, no_attrs);
UNARY_DEF(LeakyRelu, alpha_001);
UNARY_DEF(Elu, alpha_1);
UNARY_DEF(Selu, selu_attrs);
UNARY_DEF(Celu, alpha_1);
UNARY_DEF(HardSigmoid, hard_sigmoid_attrs);
UNARY_DEF(HardSwish, no_attrs);
UNARY_DEF(Softplus, no_attrs);
UNARY_DEF(Softsign, no_attrs);
UNARY_DEF(ThresholdedRelu, alpha_1);
UNARY_DEF(Shrink, shrink_attrs);
UNARY_DEF(Floor, no_attrs);
UNARY_DEF(Ceil, no_attrs);
UNARY_DEF(Round, no_attrs);
UNARY_DEF(Sin, no_attrs);
UNARY_DEF(Cos, no_attrs);
UNARY_DEF(Tan, no_attrs);
UNARY_DEF(Asin, no_attrs);
UNARY_DEF(Acos, no_attrs);
UNARY_DEF(Atan, no_attrs);
UNARY_DEF(Sinh, no_attrs);
UNARY_DEF(Cosh, no_attrs);
UNARY_DEF(Asinh, no_attrs);
UNARY_DEF(Acosh, no_attrs);
UNARY_DEF(Atanh, no_attrs);
EW_DEF(IsNaN, 1, 1, 0, no_attrs, NULL, predicate_infer, predicate_eval);
EW_DEF(IsInf, 1, 1, 0, isinf_attrs, NULL, predicate_infer, predicate_eval);
EW_DEF(Not, 1, 1, 0, no_attrs, NULL, predicate_infer, predicate_eval);
EW_DEF(Clip, 1, 3, 0, clip_attrs, clip_canonicalize, clip_infer, clip_eval);

BINARY_DEF(Add, FX_OPF_COMMUTATIVE, no_attrs);
BINARY_DEF(Sub, 0, no_attrs);
BINARY_DEF(Mul, FX_OPF_COMMUTATIVE, no_attrs);
BINARY_DEF(Div, 0, no_attrs);
BINARY_DEF(Pow, 0, no_attrs);
BINARY_DEF(Mod, 0, mod_attrs);
BINARY_DEF(BitShift, 0, bitshift_attrs);
BINARY_DEF(PRelu, 0, no_attrs);
BINARY_DEF(Equal, FX_OPF_COMMUTATIVE, no_attrs);
BINARY_DEF(Less, 0, no_attrs);
BINARY_DEF(LessOrEqual, 0, no_attrs);
BINARY_DEF(Greater, 0, no_attrs);
BINARY_DEF(GreaterOrEqual, 0, no_attrs);
BINARY_DEF(And, FX_OPF_COMMUTATIVE, no_attrs);
BINARY_DEF(Or, FX_OPF_COMMUTATIVE, no_attrs);
BINARY_DEF(Xor, FX_OPF_COMMUTATIVE, no_attrs);
VARIADIC_DEF(Min);
VARIADIC_DEF(Max);
VARIADIC_DEF(Sum);
VARIADIC_DEF(Mean);
EW_DEF(Where, 3, 3, 0, no_attrs, NULL, where_infer, where_eval);
