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
 * Every op also has an emitter for `fxcc compile`: it writes one call of the
 * same runtime kernel that eval uses, with the parameters eval computes
 * (the *_params functions below serve both) baked in as static const
 * arrays: compacted dims, broadcast strides, float attributes.
 *
 * Refusals: float16/bfloat16/string inputs (FX_ERR_UNSUPPORTED); element
 * types ONNX does not allow for the op, mismatched operand types, shapes
 * that do not broadcast, Mod with fmod=0 on floats before opset 28, a BitShift direction
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

#include "ops.h"

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

/* --- shared by eval and emit ------------------------------------------------ */

/* The broadcast walk of an elementwise node with nops operands: the
 * output's dims with size-1 axes dropped and neighbouring axes merged where
 * every operand's strides chain (the compaction the runtime kernels do
 * anyway, done here once so that emitted code carries the short form), and
 * one stride row per operand.  A walk has rank >= 1. */
static int walk_compute(const TensorType *out, int nops, const TensorType *const *ins,
                        int64_t *dims, int64_t (*st)[FX_MAX_RANK])
{
    int64_t full[FX_MAX_RANK];
    int r = 0;
    for (int d = 0; d < out->rank; d++) {
        if (out->dims[d] == 1)
            continue;
        bool chain = r > 0;
        for (int k = 0; k < nops; k++) {
            fxrt_broadcast_strides(out->rank, out->dims, ins[k]->rank, ins[k]->dims, full);
            if (chain && st[k][r - 1] != full[d] * out->dims[d])
                chain = false;
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

/* Writes `static const int64_t dims[] = ...;` and one stride array per
 * operand, named names[k]. */
static void emit_walk(EmitCtx *c, int rank, const int64_t *dims, int nops,
                      const int64_t (*st)[FX_MAX_RANK], const char *const *names)
{
    emit_int64_array(c, "dims", dims, rank);
    for (int k = 0; k < nops; k++)
        emit_int64_array(c, names[k], st[k], rank);
}

static const char *const unary_names[FXRT_UNARY_COUNT_] = {
    [FXRT_UNARY_NEG] = "FXRT_UNARY_NEG",
    [FXRT_UNARY_ABS] = "FXRT_UNARY_ABS",
    [FXRT_UNARY_SIGN] = "FXRT_UNARY_SIGN",
    [FXRT_UNARY_RELU] = "FXRT_UNARY_RELU",
    [FXRT_UNARY_SQRT] = "FXRT_UNARY_SQRT",
    [FXRT_UNARY_EXP] = "FXRT_UNARY_EXP",
    [FXRT_UNARY_LOG] = "FXRT_UNARY_LOG",
    [FXRT_UNARY_RECIPROCAL] = "FXRT_UNARY_RECIPROCAL",
    [FXRT_UNARY_ERF] = "FXRT_UNARY_ERF",
    [FXRT_UNARY_TANH] = "FXRT_UNARY_TANH",
    [FXRT_UNARY_SIGMOID] = "FXRT_UNARY_SIGMOID",
    [FXRT_UNARY_LEAKY_RELU] = "FXRT_UNARY_LEAKY_RELU",
    [FXRT_UNARY_ELU] = "FXRT_UNARY_ELU",
    [FXRT_UNARY_SELU] = "FXRT_UNARY_SELU",
    [FXRT_UNARY_CELU] = "FXRT_UNARY_CELU",
    [FXRT_UNARY_HARD_SIGMOID] = "FXRT_UNARY_HARD_SIGMOID",
    [FXRT_UNARY_HARD_SWISH] = "FXRT_UNARY_HARD_SWISH",
    [FXRT_UNARY_SOFTPLUS] = "FXRT_UNARY_SOFTPLUS",
    [FXRT_UNARY_SOFTSIGN] = "FXRT_UNARY_SOFTSIGN",
    [FXRT_UNARY_THRESHOLDED_RELU] = "FXRT_UNARY_THRESHOLDED_RELU",
    [FXRT_UNARY_SHRINK] = "FXRT_UNARY_SHRINK",
    [FXRT_UNARY_FLOOR] = "FXRT_UNARY_FLOOR",
    [FXRT_UNARY_CEIL] = "FXRT_UNARY_CEIL",
    [FXRT_UNARY_ROUND] = "FXRT_UNARY_ROUND",
    [FXRT_UNARY_SIN] = "FXRT_UNARY_SIN",
    [FXRT_UNARY_COS] = "FXRT_UNARY_COS",
    [FXRT_UNARY_TAN] = "FXRT_UNARY_TAN",
    [FXRT_UNARY_ASIN] = "FXRT_UNARY_ASIN",
    [FXRT_UNARY_ACOS] = "FXRT_UNARY_ACOS",
    [FXRT_UNARY_ATAN] = "FXRT_UNARY_ATAN",
    [FXRT_UNARY_SINH] = "FXRT_UNARY_SINH",
    [FXRT_UNARY_COSH] = "FXRT_UNARY_COSH",
    [FXRT_UNARY_ASINH] = "FXRT_UNARY_ASINH",
    [FXRT_UNARY_ACOSH] = "FXRT_UNARY_ACOSH",
    [FXRT_UNARY_ATANH] = "FXRT_UNARY_ATANH",
    [FXRT_UNARY_GELU] = "FXRT_UNARY_GELU",
    [FXRT_UNARY_GELU_TANH] = "FXRT_UNARY_GELU_TANH",
    [FXRT_UNARY_MISH] = "FXRT_UNARY_MISH",
};

static const char *const binary_names[FXRT_BINARY_COUNT_] = {
    [FXRT_BINARY_ADD] = "FXRT_BINARY_ADD",
    [FXRT_BINARY_SUB] = "FXRT_BINARY_SUB",
    [FXRT_BINARY_MUL] = "FXRT_BINARY_MUL",
    [FXRT_BINARY_DIV] = "FXRT_BINARY_DIV",
    [FXRT_BINARY_POW] = "FXRT_BINARY_POW",
    [FXRT_BINARY_MIN] = "FXRT_BINARY_MIN",
    [FXRT_BINARY_MAX] = "FXRT_BINARY_MAX",
    [FXRT_BINARY_MOD] = "FXRT_BINARY_MOD",
    [FXRT_BINARY_FMOD] = "FXRT_BINARY_FMOD",
    [FXRT_BINARY_PRELU] = "FXRT_BINARY_PRELU",
    [FXRT_BINARY_SHL] = "FXRT_BINARY_SHL",
    [FXRT_BINARY_SHR] = "FXRT_BINARY_SHR",
    [FXRT_BINARY_EQUAL] = "FXRT_BINARY_EQUAL",
    [FXRT_BINARY_LESS] = "FXRT_BINARY_LESS",
    [FXRT_BINARY_LESS_EQUAL] = "FXRT_BINARY_LESS_EQUAL",
    [FXRT_BINARY_GREATER] = "FXRT_BINARY_GREATER",
    [FXRT_BINARY_GREATER_EQUAL] = "FXRT_BINARY_GREATER_EQUAL",
    [FXRT_BINARY_AND] = "FXRT_BINARY_AND",
    [FXRT_BINARY_OR] = "FXRT_BINARY_OR",
    [FXRT_BINARY_XOR] = "FXRT_BINARY_XOR",
};

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
    [FX_OP_Gelu] = UN(TC_FLOAT, GELU),
    [FX_OP_Mish] = UN(TC_FLOAT, MISH),
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

/* The runtime op a unary node runs: Gelu picks its form from `approximate`
 * (canonicalize has refused values other than "none" and "tanh"). */
static FxrtUnaryOp unary_op_of(const Node *n)
{
    if (n->op == &fx_op_Gelu && strcmp(node_attr_string(n, "approximate", "none"), "tanh") == 0)
        return FXRT_UNARY_GELU_TANH;
    return (FxrtUnaryOp)info_of(n)->rt_op;
}

static FxStatus gelu_canonicalize(Node *n, int opset, Diag *d)
{
    (void)opset;
    const char *form = node_attr_string(n, "approximate", "none");
    if (strcmp(form, "none") != 0 && strcmp(form, "tanh") != 0)
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "approximate must be \"none\" or \"tanh\", not \"%s\"", form);
    return FX_OK;
}

static FxStatus unary_infer(InferCtx *c)
{
    FxStatus st = check_input(c, 0, info_of(c->node)->types);
    if (st != FX_OK)
        return st;
    c->out[0] = *c->in[0];
    return FX_OK;
}

/* The op's float attributes as the kernel's params[] (unused entries 0);
 * returns how many the op reads. */
static int unary_params(const Node *n, float params[2])
{
    const EwInfo *e = info_of(n);
    params[0] = e->p0 ? node_attr_float(n, e->p0, 0.0f) : 0.0f;
    params[1] = e->p1 ? node_attr_float(n, e->p1, 0.0f) : 0.0f;
    return fxrt_unary_num_params(unary_op_of(n));
}

static FxStatus unary_eval(EvalCtx *c)
{
    FxrtUnaryOp op = unary_op_of(c->node);
    float p[2];
    unary_params(c->node, p);
    const Tensor *x = c->in[0];
    size_t n = (size_t)tensor_numel(x);
    if (x->type.dtype == FXRT_DTYPE_FLOAT32) {
        fxrt_unary_f32(op, x->data, c->out[0]->data, n, p);
        return FX_OK;
    }
    double pd[2] = {p[0], p[1]};
    return runtime_status(c, fxrt_unary(op, x->type.dtype, x->data,
                                        c->out[0]->data, n, pd));
}

static FxStatus unary_emit(EmitCtx *c)
{
    const Node *n = c->node;
    const char *opname = unary_names[unary_op_of(n)];
    DType dt = node_input_type(n, 0)->dtype;
    long long count = (long long)type_numel(&n->out_types[0]);
    float p[2];
    int np = unary_params(n, p);
    char l0[48], l1[48];
    c_float_literal(p[0], l0, sizeof l0);
    c_float_literal(p[1], l1, sizeof l1);
    if (dt == FXRT_DTYPE_FLOAT32) {
        if (np > 0)
            emit_float_array(c, "p", p, 2);
        emit_line(c, "fxrt_unary_f32(%s, %s, %s, %lld, %s);", opname, c->in[0], c->out[0], count,
                np > 0 ? "p" : "NULL");
        return FX_OK;
    }
    /* float literals: params[] holds the float attribute widened, as in eval */
    if (np > 0)
        emit_line(c, "static const double p[2] = {%s, %s};", l0, l1);
    emit_line(c, "if (fxrt_unary(%s, %s, %s, %s, %lld, %s) != 0) return 1;", opname,
            c_dtype_enum(dt), c->in[0], c->out[0], count, np > 0 ? "p" : "NULL");
    return FX_OK;
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

static FxStatus predicate_emit(EmitCtx *c)
{
    const Node *n = c->node;
    DType dt = node_input_type(n, 0)->dtype;
    long long count = (long long)type_numel(&n->out_types[0]);
    const char *x = c->in[0], *y = c->out[0];
    if (n->op == &fx_op_Not) {
        emit_line(c, "fxrt_not_bool(%s, %s, %lld);", x, y, count);
    } else if (n->op == &fx_op_IsNaN) {
        if (dt == FXRT_DTYPE_FLOAT32)
            emit_line(c, "fxrt_isnan_f32(%s, %s, %lld);", x, y, count);
        else
            emit_line(c, "if (fxrt_isnan(%s, %s, %s, %lld) != 0) return 1;", c_dtype_enum(dt), x,
                    y, count);
    } else {
        int neg = node_attr_int(n, "detect_negative", 1) != 0;
        int pos = node_attr_int(n, "detect_positive", 1) != 0;
        if (dt == FXRT_DTYPE_FLOAT32)
            emit_line(c,
                      "fxrt_isinf_f32(%s, %s, /*n=*/%lld, /*detect_negative=*/%d, "
                      "/*detect_positive=*/%d);",
                      x, y, count, neg, pos);
        else
            emit_line(c,
                      "if (fxrt_isinf(%s, %s, %s, /*n=*/%lld, /*detect_negative=*/%d, "
                      "/*detect_positive=*/%d) != 0) return 1;",
                      c_dtype_enum(dt), x, y, count, neg, pos);
    }
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
    if (n->op == &fx_op_BitShift && n->graph && n->graph->opset >= 28 &&
        type_class(c->in[0]->dtype) == TC_SINT)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "BitShift on signed integers (opset 28) is not supported");
    if ((st = check_input(c, 0, e->types)) != FX_OK ||
        (st = check_input(c, 1, e->types)) != FX_OK)
        return st;
    /* Pow alone lets the exponent have its own type. */
    if (n->op != &fx_op_Pow && (st = check_same_dtype(c, 0, 1)) != FX_OK)
        return st;
    /* opset 28 defines fmod=0 on floats as Python's %, the runtime's MOD */
    if (n->op == &fx_op_Mod && type_class(c->in[0]->dtype) == TC_FLOAT &&
        node_attr_int(n, "fmod", 0) == 0 && n->graph && n->graph->opset < 28)
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

/* Which kernel a binary node calls: mixed-type Pow, the float32 fast paths,
 * or the type-generic entry point. */
typedef enum BinaryKernel { BK_POW_MIXED, BK_F32, BK_COMPARE_F32, BK_GENERIC } BinaryKernel;

typedef struct BinaryParams {
    FxrtBinaryOp op;
    BinaryKernel kernel;
    int rank;
    int64_t dims[FX_MAX_RANK];
    int64_t st[2][FX_MAX_RANK]; /* a, b */
} BinaryParams;

static void binary_params(const Node *n, const TensorType *y, const TensorType *a,
                          const TensorType *b, BinaryParams *p)
{
    const TensorType *ins[2] = {a, b};
    p->op = binary_op_of(n);
    p->rank = walk_compute(y, 2, ins, p->dims, p->st);
    bool f32 = a->dtype == FXRT_DTYPE_FLOAT32;
    if (n->op == &fx_op_Pow && a->dtype != b->dtype)
        p->kernel = BK_POW_MIXED;
    else if (f32 && !fxrt_binary_is_predicate(p->op))
        p->kernel = BK_F32;
    else if (f32 && p->op <= FXRT_BINARY_GREATER_EQUAL)
        p->kernel = BK_COMPARE_F32;
    else
        p->kernel = BK_GENERIC;
}

static FxStatus binary_eval(EvalCtx *c)
{
    const Tensor *a = c->in[0], *b = c->in[1];
    Tensor *y = c->out[0];
    BinaryParams p;
    binary_params(c->node, &y->type, &a->type, &b->type, &p);
    switch (p.kernel) {
    case BK_POW_MIXED:
        return runtime_status(c, fxrt_pow(p.rank, p.dims, a->type.dtype, a->data, p.st[0],
                                          b->type.dtype, b->data, p.st[1], y->data));
    case BK_F32:
        fxrt_binary_f32(p.op, p.rank, p.dims, a->data, p.st[0], b->data, p.st[1], y->data);
        return FX_OK;
    case BK_COMPARE_F32:
        fxrt_compare_f32(p.op, p.rank, p.dims, a->data, p.st[0], b->data, p.st[1], y->data);
        return FX_OK;
    case BK_GENERIC:
        break;
    }
    return runtime_status(c, fxrt_binary(p.op, a->type.dtype, p.rank, p.dims, a->data, p.st[0],
                                         b->data, p.st[1], y->data));
}

static FxStatus binary_emit(EmitCtx *c)
{
    const Node *n = c->node;
    const TensorType *a = node_input_type(n, 0), *b = node_input_type(n, 1);
    BinaryParams p;
    binary_params(n, &n->out_types[0], a, b, &p);
    static const char *const names[2] = {"sa", "sb"};
    emit_walk(c, p.rank, p.dims, 2, (const int64_t(*)[FX_MAX_RANK])p.st, names);
    const char *opname = binary_names[p.op];
    const char *x0 = c->in[0], *x1 = c->in[1], *y = c->out[0];
    switch (p.kernel) {
    case BK_POW_MIXED:
        emit_line(c, "if (fxrt_pow(/*rank=*/%d, dims, %s, %s, sa, %s, %s, sb, %s) != 0) return 1;",
                  p.rank, c_dtype_enum(a->dtype), x0, c_dtype_enum(b->dtype), x1, y);
        break;
    case BK_F32:
        emit_line(c, "fxrt_binary_f32(%s, /*rank=*/%d, dims, %s, sa, %s, sb, %s);", opname, p.rank,
                  x0, x1, y);
        break;
    case BK_COMPARE_F32:
        emit_line(c, "fxrt_compare_f32(%s, /*rank=*/%d, dims, %s, sa, %s, sb, %s);", opname, p.rank,
                  x0, x1, y);
        break;
    case BK_GENERIC:
        emit_line(c,
                  "if (fxrt_binary(%s, %s, /*rank=*/%d, dims, %s, sa, %s, sb, %s) != 0) return 1;",
                  opname, c_dtype_enum(a->dtype), p.rank, x0, x1, y);
        break;
    }
    return FX_OK;
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

/* The walk over all inputs of a Sum/Mean/Min/Max node; st has one row per
 * input (count rows, allocated by the caller). */
static int variadic_params(const TensorType *y, int count, const TensorType *const *ins,
                           int64_t *dims, int64_t (*st)[FX_MAX_RANK])
{
    return walk_compute(y, count, ins, dims, st);
}

static FxStatus variadic_eval(EvalCtx *c)
{
    const EwInfo *e = info_of(c->node);
    int count = c->num_inputs;
    Tensor *y = c->out[0];
    const TensorType **ins = fx_alloc_array((size_t)count + 1, sizeof *ins);
    const void **xs = fx_alloc_array((size_t)count, sizeof *xs);
    const int64_t **sp = fx_alloc_array((size_t)count, sizeof *sp);
    int64_t(*st)[FX_MAX_RANK] = fx_alloc_array((size_t)count, sizeof *st);
    FxStatus status = FX_OK;
    if (!ins || !xs || !sp || !st) {
        status = diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    } else {
        int64_t dims[FX_MAX_RANK];
        for (int i = 0; i < count; i++) {
            ins[i] = &c->in[i]->type;
            xs[i] = c->in[i]->data;
            sp[i] = st[i];
        }
        int rank = variadic_params(&y->type, count, ins, dims, st);
        status = runtime_status(c, fxrt_variadic((FxrtBinaryOp)e->rt_op,
                                                 c->node->op == &fx_op_Mean, y->type.dtype, rank,
                                                 dims, count, xs, sp, y->data));
    }
    free(ins);
    free(xs);
    free(sp);
    free(st);
    return status;
}

static FxStatus variadic_emit(EmitCtx *c)
{
    const Node *n = c->node;
    const EwInfo *e = info_of(n);
    int count = c->num_inputs;
    const TensorType **ins = fx_alloc_array((size_t)count + 1, sizeof *ins);
    int64_t(*st)[FX_MAX_RANK] = fx_alloc_array((size_t)count, sizeof *st);
    if (!ins || !st) {
        free(ins);
        free(st);
        return diag_node_error(c->diag, FX_ERR_NOMEM, n, "out of memory");
    }
    for (int i = 0; i < count; i++)
        ins[i] = node_input_type(n, i);
    int64_t dims[FX_MAX_RANK];
    int rank = variadic_params(&n->out_types[0], count, ins, dims, st);
    emit_int64_array(c, "dims", dims, rank);
    for (int i = 0; i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "s%d", i);
        emit_int64_array(c, name, st[i], rank);
    }
    /* The operand lists: on one line when short, else one entry a line. */
    size_t need = 0;
    for (int i = 0; i < count; i++)
        need += strlen(c->in[i]) + 2;
    if (count <= 8 && need <= 60) {
        char sl[8 * 8], xl[128];
        size_t ls = 0, lx = 0;
        for (int i = 0; i < count; i++) {
            ls += (size_t)snprintf(sl + ls, sizeof sl - ls, "%ss%d", i ? ", " : "", i);
            lx += (size_t)snprintf(xl + lx, sizeof xl - lx, "%s%s", i ? ", " : "", c->in[i]);
        }
        emit_line(c, "static const int64_t *const st[%d] = {%s};", count, sl);
        emit_line(c, "const void *const x[%d] = {%s};", count, xl);
    } else {
        emit_line(c, "static const int64_t *const st[%d] = {", count);
        for (int i = 0; i < count; i++)
            emit_line(c, "    s%d%s", i, i + 1 < count ? "," : "");
        emit_line(c, "};");
        emit_line(c, "const void *const x[%d] = {", count);
        for (int i = 0; i < count; i++)
            emit_line(c, "    %s%s", c->in[i], i + 1 < count ? "," : "");
        emit_line(c, "};");
    }
    emit_line(c,
              "if (fxrt_variadic(%s, /*mean=*/%d, %s, /*rank=*/%d, dims, /*count=*/%d, x, st, %s) "
              "!= 0) return 1;",
              binary_names[e->rt_op], n->op == &fx_op_Mean, c_dtype_enum(n->out_types[0].dtype),
              rank, count, c->out[0]);
    free(ins);
    free(st);
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
    const TensorType *ins[3] = {&cond->type, &x->type, &y->type};
    int64_t dims[FX_MAX_RANK], st[3][FX_MAX_RANK];
    int rank = walk_compute(&out->type, 3, ins, dims, st);
    fxrt_where(fxrt_dtype_size(out->type.dtype), rank, dims, cond->data, st[0], x->data, st[1],
               y->data, st[2], out->data);
    return FX_OK;
}

static FxStatus where_emit(EmitCtx *c)
{
    const Node *n = c->node;
    const TensorType *ins[3] = {node_input_type(n, 0), node_input_type(n, 1),
                                node_input_type(n, 2)};
    int64_t dims[FX_MAX_RANK], st[3][FX_MAX_RANK];
    int rank = walk_compute(&n->out_types[0], 3, ins, dims, st);
    static const char *const names[3] = {"sc", "sx", "sy"};
    emit_walk(c, rank, dims, 3, (const int64_t(*)[FX_MAX_RANK])st, names);
    emit_line(c, "fxrt_where(/*elem_size=*/%zu, /*rank=*/%d, dims, %s, sc, %s, sx, %s, sy, %s);",
              fxrt_dtype_size(n->out_types[0].dtype), rank, c->in[0], c->in[1], c->in[2],
              c->out[0]);
    return FX_OK;
}

/* --- Clip ------------------------------------------------------------------ */

/* Clip-6 (opsets 7..10) had float attributes min/max; Clip-11 made them
 * optional inputs.  The constants get the input's element type when it is
 * already known at import (a graph input or a constant), else float32:
 * Clip-6 took floats only, and infer accepts a float32 bound for a float64
 * input for exactly this case. */
static FxStatus clip_canonicalize(Node *n, int opset, Diag *d)
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
            /* an omitted min before a max; no trailing "None" */
            if (k == 0 && node_append_arg(n, NULL) < 0)
                return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
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
        FxStatus st = node_set_const_input(n, n->num_args, names[k], v, d);
        if (st != FX_OK)
            return st;
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

/* Clip's bounds in generated code.  float32 with both bounds becomes
 * fxrt_clip_f32 (a ReLU6 reads as 0.0f, 6.0f); otherwise the
 * bound inputs are passed as pointers to one element, through a widened
 * local for the legacy float32 bound of a float64 input. */
static FxStatus clip_emit(EmitCtx *c)
{
    const Node *n = c->node;
    DType dt = node_input_type(n, 0)->dtype;
    long long count = (long long)type_numel(&n->out_types[0]);
    static const char *const local[2] = {"lo", "hi"};
    const char *ptr[2] = {"NULL", "NULL"};
    char lit[2][512];
    /* fxrt_clip_f32 only with both bounds (a missing one would be INFINITY,
     * which needs <math.h> in the generated file): a literal for a finite
     * constant, else the bound's one element. */
    bool literal = dt == FXRT_DTYPE_FLOAT32;
    for (int k = 0; k < 2; k++) {
        int i = k + 1;
        if (i >= c->num_inputs || !c->in[i]) {
            literal = false;
            continue;
        }
        ptr[k] = c->in[i];
        if (c->in_value && c->in_value[i] && isfinite(*(const float *)c->in_value[i]->data))
            c_float_literal(*(const float *)c->in_value[i]->data, lit[k], sizeof lit[k]);
        else
            snprintf(lit[k], sizeof lit[k], "(%s)[0]", c->in[i]);
    }
    if (literal) {
        emit_line(c, "fxrt_clip_f32(%s, %s, /*n=*/%lld, /*lo=*/%s, /*hi=*/%s);", c->in[0],
                  c->out[0], count, lit[0], lit[1]);
        return FX_OK;
    }
    char addr[2][8];
    for (int k = 0; k < 2; k++) {
        int i = k + 1;
        if (i >= c->num_inputs || !c->in[i] || node_input_type(n, i)->dtype == dt)
            continue;
        emit_line(c, "const double %s = (double)(%s)[0];", local[k], c->in[i]);
        snprintf(addr[k], sizeof addr[k], "&%s", local[k]);
        ptr[k] = addr[k];
    }
    emit_line(c, "if (fxrt_clip(%s, %s, %s, %lld, %s, %s) != 0) return 1;", c_dtype_enum(dt),
            c->in[0], c->out[0], count, ptr[0], ptr[1]);
    return FX_OK;
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

#define EW_DEF(Name, nin_min, nin_max, extra_flags, attr_list, canon, inf, ev, em)       \
    const OpDef fx_op_##Name = {                                                         \
        .name = #Name,                                                                   \
        .min_inputs = nin_min, .max_inputs = nin_max,                                    \
        .min_outputs = 1, .max_outputs = 1,                                              \
        .flags = FX_OPF_ELEMENTWISE | (extra_flags),                                     \
        .attrs = attr_list,                                                              \
        .canonicalize = canon,                                                           \
        .infer = inf,                                                                    \
        .eval = ev,                                                                      \
        .emit = em,                                                                      \
    }

#define UNARY_DEF(Name, attr_list) \
    EW_DEF(Name, 1, 1, 0, attr_list, NULL, unary_infer, unary_eval, unary_emit)
#define BINARY_DEF(Name, flags, attr_list)                                               \
    EW_DEF(Name, 2, 2, flags, attr_list, NULL, binary_infer, binary_eval, binary_emit)
#define VARIADIC_DEF(Name) \
    EW_DEF(Name, 1, -1, FX_OPF_COMMUTATIVE, no_attrs, NULL, variadic_infer, variadic_eval, \
           variadic_emit)

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
static const AttrSpec gelu_attrs[] = {{"approximate", FX_ATTR_STRING, "none", false}, {NULL}};
EW_DEF(Gelu, 1, 1, 0, gelu_attrs, gelu_canonicalize, unary_infer, unary_eval, unary_emit);
UNARY_DEF(Mish, no_attrs);
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
EW_DEF(IsNaN, 1, 1, 0, no_attrs, NULL, predicate_infer, predicate_eval, predicate_emit);
EW_DEF(IsInf, 1, 1, 0, isinf_attrs, NULL, predicate_infer, predicate_eval, predicate_emit);
EW_DEF(Not, 1, 1, 0, no_attrs, NULL, predicate_infer, predicate_eval, predicate_emit);
EW_DEF(Clip, 1, 3, 0, clip_attrs, clip_canonicalize, clip_infer, clip_eval, clip_emit);

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
EW_DEF(Where, 3, 3, 0, no_attrs, NULL, where_infer, where_eval, where_emit);
