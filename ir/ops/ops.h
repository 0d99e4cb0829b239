/*
 * ops.h - the op library's own header: what the op definitions in ir/ops/
 * share among themselves and with the passes (opt/) and the code generator
 * (codegen/) that use them.
 *
 * The graph core (ir/ir.h) knows an op only through its OpDef; everything
 * about writing C lives here.  An emitter gets an EmitCtx describing one
 * node (its buffers as C expressions, its compile-time inputs, the target)
 * and appends the statements of the node's block to the context's own text
 * buffer with emit_line; the code generator reads that buffer once the
 * emitter returns, so nothing here calls back into codegen/.
 *
 * Shared types come first; then one section per source file of ir/ops/
 * whose functions other files use (the rest keep their helpers static).
 */
#ifndef FXCC_OPS_H
#define FXCC_OPS_H

#include "../ir.h"

/* ------------------------------------------------------------------------- */
/* The target and the emit context                                            */
/* ------------------------------------------------------------------------- */

/* Which runtime the generated code links: host (GEMM through OpenBLAS) or
 * portable (pure C99, for microcontrollers). */
/* host: OpenBLAS and the x86 kernels; portable: C99, no OpenBLAS; cortex-m:
 * portable with the runtime's small kernels and only the activations the
 * model uses (fxrt_config.h), for the least flash. */
typedef enum FxTarget { FX_TARGET_HOST, FX_TARGET_PORTABLE, FX_TARGET_CORTEX_M } FxTarget;

/* A growable text buffer.  A failed allocation sets `failed` and drops
 * everything appended afterwards, so writers need not check each call; the
 * owner checks once at the end. */
typedef struct EmitText {
    char *data; /* NUL-terminated once anything was appended, else NULL */
    size_t len, cap;
    bool failed;
} EmitText;

/* What an op's emitter sees.  Buffers are C expressions of typed pointers
 * (e.g. `t_conv1`, `(const float *)inputs[0]`, `NAME_w_fc1_weight`), already
 * declared by the code generator; the emitter writes the statements of the
 * node's block with emit_line, calling fxrt_ kernels.  An output may be the
 * same buffer as an input of the same type when the op is elementwise (the
 * planner's in-place reuse), so elementwise kernels must tolerate y == x. */
struct EmitCtx {
    const Node *node;
    int num_inputs;
    const char *const *in;         /* NULL entries: omitted inputs */
    const Tensor *const *in_value; /* compile-time values (weights, folded shapes) or NULL */
    int num_outputs;
    const char *const *out;
    const char *scratch; /* `void *` to op->scratch_bytes(node) bytes, 64-aligned, or NULL */
    /* out[0] is in[0]'s buffer (op->inplace said it can be); scratch then has
     * the bytes op->inplace asked for. */
    bool inplace;
    FxTarget target;
    Diag *diag;
    EmitText text; /* the node's block, filled by emit_line; the caller frees it */
};

/* ------------------------------------------------------------------------- */
/* Text and C literals (emit.c)                                               */
/* ------------------------------------------------------------------------- */

void emit_text_printf(EmitText *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void emit_text_vprintf(EmitText *t, const char *fmt, va_list ap);
void emit_text_append(EmitText *t, const char *s, size_t n);
void emit_text_free(EmitText *t);

/* One line of C in the node's block: the block's indentation, the text,
 * a newline, appended to c->text. */
void emit_line(EmitCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "float", "int64_t", "uint8_t" (bool), ... */
const char *c_type_name(DType t);
/* "FXRT_DTYPE_FLOAT32", ... */
const char *c_dtype_enum(DType t);
/* Writes `static const int64_t NAME[] = {v0, v1, ...};` (a zero-length list
 * becomes {0} so that the array is valid C). */
void emit_int64_array(EmitCtx *c, const char *name, const int64_t *v, int64_t count);
/* The same as int32_t, for values the caller checked fit (indices). */
void emit_int32_array(EmitCtx *c, const char *name, const int64_t *v, int64_t count);
void emit_float_array(EmitCtx *c, const char *name, const float *v, int64_t count);
/* A float as a C99 literal that round-trips exactly ("1.5f", "-INFINITY", "NAN"). */
char *c_float_literal(float v, char *buf, size_t cap);

/* ------------------------------------------------------------------------- */
/* Emitter helpers of the nn op files (nn_emit.c)                             */
/* ------------------------------------------------------------------------- */

/* C expression / compile-time value of input i, NULL if omitted. */
const char *nn_emit_input(const EmitCtx *c, int i);
const Tensor *nn_emit_value(const EmitCtx *c, int i);
/* "{v0, v1, ...}" of the first count values into buf. */
char *nn_format_ints(const int64_t *v, int count, char *buf, size_t cap);
size_t nn_align64(size_t n);
/* Declares `int32_t NAME[...]` holding zero-point input i (at most max
 * values) as int32 for the quantized ops (MatMulInteger, QLinearMatMul,
 * ConvInteger, QLinearConv): a static table when it is a constant, otherwise
 * converted at run time into `dst` (a scratch expression); absent: one 0.
 * Returns the count. */
int64_t nn_emit_zero_points(EmitCtx *c, int i, const char *name, const char *dst, int64_t max);
/* A scalar zero point as a C expression: a literal for a constant, else a load. */
char *nn_zero_point_expr(const EmitCtx *c, int i, char *buf, size_t cap);
/* Scratch bytes nn_emit_zero_points needs for input i of n. */
size_t nn_zero_point_bytes(const Node *n, int i);

/* ------------------------------------------------------------------------- */
/* Convolutions and the window geometry (nn_conv.c)                           */
/* ------------------------------------------------------------------------- */

/* Float inputs and outputs of the float kernels, shared with nn_pool.c:
 * refuses a non-float tensor naming `what`; float32 data of t (its own, or
 * a converted copy in *owned for the caller to free); where a kernel writes
 * (the output, or a float32 temporary that nn_f32_output_finish converts
 * into t and frees). */
FxStatus nn_check_float(const Node *n, Diag *d, const TensorType *t, const char *what);
const float *nn_f32_input(const Tensor *t, float **owned);
float *nn_f32_output(Tensor *t);
void nn_f32_output_finish(Tensor *t, float *buf);
/* The generated code runs the float kernels on float32 only. */
FxStatus nn_emit_check_f32(EmitCtx *c, DType t);

/* Conv's rules, which FusedConv (same attributes, same first three inputs)
 * and the NCHWc layout pass reuse. */
FxStatus nn_conv_infer(InferCtx *c);
FxStatus nn_conv_node_params(const Node *n, Diag *d, FxrtConvParams *p, int64_t *scratch_floats);
/* The runtime parameters of a ConvNCHWc (or ConvNCHWcWinograd) node n
 * (ir/ops/nchwc.c); *x_blocked tells whether its X is NCHWc. */
FxStatus nchwc_conv_node_params(const Node *n, Diag *d, FxrtConvParams *p, int *x_blocked);
size_t nn_conv_scratch(const Node *n);
/* Writes the static FxrtConvParams and the call of the algorithm p needs,
 * with epilogue expression ep ("&ep" or "NULL"). */
void nn_conv_emit_call(EmitCtx *c, const FxrtConvParams *p, const char *ep);
/* Writes `static const FxrtConvParams p = {...};`. */
void nn_conv_emit_params(EmitCtx *c, const FxrtConvParams *p);
/* The runtime parameters of a QLinearConv or ConvInteger node (W input 3
 * or 1), for the qconv-pack pass. */
FxStatus nn_qconv_node_params(const Node *n, Diag *d, FxrtConvParams *p);

/* The pools' window geometry, which the pool ops (nn_pool.c) and the NCHWc
 * pool kinds (nchwc.c) use: the attributes of MaxPool and AveragePool
 * (defined in nn_pool.c), the pools' canonicalize (window defaults for
 * kernel_shape's rank), and the check of X [N, C, in...] against a pool's
 * attributes that fills p and the output shape. */
extern const AttrSpec nn_maxpool_attrs[];
extern const AttrSpec nn_avgpool_attrs[];
FxStatus nn_pool_canonicalize(Node *n, int opset, Diag *d);
FxStatus nn_pool_params(const Node *n, Diag *d, const TensorType *x, FxrtPoolParams *p,
                        TensorType *out);
/* Writes `static const FxrtPoolParams p = {...};`. */
void nn_pool_emit_params(EmitCtx *c, const FxrtPoolParams *p);

/* ------------------------------------------------------------------------- */
/* Helpers of the layout ops (tensor_layout.c, used by tensor_slice.c)        */
/* ------------------------------------------------------------------------- */

/* Type / value of input i in infer, eval and emit; NULL when omitted. */
const TensorType *layout_input_type(const InferCtx *c, int i);
const Tensor *layout_eval_input(const EvalCtx *c, int i);
const TensorType *layout_emit_in_type(const EmitCtx *c, int i);
/* Refuses (FX_ERR_UNSUPPORTED) a dtype the byte-moving kernels do not hold. */
FxStatus layout_check_dtype(InferCtx *c, const TensorType *t, const char *what);
/* Zero-element outputs need no code (the code generator declares only the
 * buffers a block names).  Returns true when it wrote the whole block. */
bool layout_emit_if_empty(EmitCtx *c);
/* Writes `<decl>[n] = {e0, e1, ...};`, four expressions a line. */
void layout_emit_pointer_list(EmitCtx *c, const char *decl, const char *const *exprs, int n);
/* Product of dims[from..to). */
int64_t layout_dims_product(const int64_t *dims, int from, int to);
/* a * b into *out, or a node error when the dimension overflows. */
FxStatus layout_mul_dim(InferCtx *c, int64_t a, int64_t b, int64_t *out);

/* ------------------------------------------------------------------------- */
/* FusedConv and FusedGemm (fused_nn.c)                                       */
/* ------------------------------------------------------------------------- */

/* A fused node carries its product's attributes (Conv's, or Gemm's alpha /
 * transA / transB) plus the epilogue's: `activation` (one of the names of
 * fused_nn_activation_name), `act_alpha`, `act_beta` (Clip's min and max,
 * LeakyRelu's alpha, HardSigmoid's alpha and beta, GELU's scale: 0.5 for
 * GELU itself) and `residual_after` (0: act(y + bias + R), as ResNet's
 * add-then-relu; 1: act(y + bias) + R).  The epilogue fusion pass
 * (opt/pass_epilogue_fusion.c) builds them. */

/* The AttrSpec entries of the epilogue, shared by every fused kind. */
#define FUSED_NN_EPILOGUE_ATTRS                     \
    {"activation", FX_ATTR_STRING, "none", false}, \
    {"act_alpha", FX_ATTR_FLOAT, "0.0", false},    \
    {"act_beta", FX_ATTR_FLOAT, "0.0", false},     \
    {"residual_after", FX_ATTR_INT, "0", false}
/* The epilogue attributes of n into e (pointers and strides left zero). */
FxStatus fused_nn_node_epilogue(const Node *n, Diag *d, FxrtEpilogue *e);
/* A fused kernel's operand checks: t (NULL: absent) is float32; a
 * residual r (NULL: none) has the output's type y. */
FxStatus fused_nn_check_f32(const Node *n, Diag *d, const TensorType *t, const char *what);
FxStatus fused_nn_check_residual(const Node *n, Diag *d, const TensorType *r,
                                 const TensorType *y);
/* "none", "relu", "clip", "leaky_relu", "sigmoid", "hardswish",
 * "hardsigmoid", "tanh", "gelu", "silu" by FxrtActivation; NULL past the
 * end. */
const char *fused_nn_activation_name(FxrtActivation a);
/* Writes `const FxrtEpilogue ep = {...};` with the numeric fields of shape
 * and the C expressions bias and residual (NULL: none), and returns "&ep";
 * returns "NULL" (and writes nothing) when the epilogue would be empty. */
const char *nn_emit_epilogue(EmitCtx *c, const FxrtEpilogue *shape, const char *bias,
                             const char *residual);
/* The same with the variable called `name` (for a kernel of two
 * epilogues); false when it wrote nothing. */
bool nn_emit_named_epilogue(EmitCtx *c, const char *name, const FxrtEpilogue *shape,
                            const char *bias, const char *residual);

/* ------------------------------------------------------------------------- */
/* FusedElementwise (fused_elementwise.c)                                     */
/* ------------------------------------------------------------------------- */

/* True if n (a call_function node whose shapes are known) can live in a
 * FusedElementwise body: a float32 elementwise op with a scalar C form. */
bool fused_elementwise_supports(const Node *n);

/* Writes n's value as a C expression of its operand expressions x[] (simple
 * identifiers or literals, so they may appear more than once; NULL for an
 * omitted input).  Returns false when the op has no scalar form. */
bool fused_scalar_expr(const Node *n, const char *const *x, char *buf, size_t cap);

/* The value a fused body returns (its output's one argument), or NULL. */
const Node *fused_body_result(const Graph *body);
/* infer and eval of a module kind whose node runs its body: the body's
 * placeholders must match the arguments; eval interprets the body. */
FxStatus fused_body_infer(InferCtx *c);
FxStatus fused_body_eval(EvalCtx *c);

/* The loop nest over `out`: its dims with size-1 axes dropped and
 * neighbouring axes merged where every operand's strides chain, into dims,
 * and one stride row per operand into st (0 on broadcast axes).  Returns
 * the loop rank, >= 1 (a scalar is one loop of 1). */
int fused_loop_walk(const TensorType *out, int nops, const TensorType *const *ins,
                    int64_t *dims, int64_t (*st)[FX_MAX_RANK]);
/* The offset expression of an operand with strides st over the loop dims
 * (loop indices i0, i1, ...); `counter` when the operand is dense, i.e.
 * the running position in the loop nest. */
void fused_offset_expr(int rank, const int64_t *dims, const int64_t *st, const char *counter,
                       char *buf, size_t cap);
/* The body as a C comment of FX lines, to open an emitted loop nest. */
void fused_emit_body_comment(EmitCtx *c, const Graph *body);

/* ------------------------------------------------------------------------- */
/* FusedReduction (fused_reduction.c)                                         */
/* ------------------------------------------------------------------------- */

/* True if n (shapes known) can be the reduction of a FusedReduction body:
 * float32 Softmax or LogSoftmax, LayerNormalization with one output and
 * Scale/B of one value or one per element of the row, or ReduceSum,
 * ReduceMean, ReduceMax, ReduceMin over constant axes, the reduced axes
 * being the innermost ones (axes first_axis..rank-1, at least one element
 * per row and at least one row).  Sets *first_axis. */
bool fused_reduction_supports(const Node *n, int *first_axis);
/* True if the emitter can write body (shapes propagated) as a
 * FusedReduction loop: one supported reduction, its prologue used only by
 * itself, every operand full or constant along the row (see
 * fused_reduction.c). */
bool fused_reduction_body_ok(const Graph *body);

#endif
