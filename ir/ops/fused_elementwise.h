/*
 * fused_elementwise.h - what the elementwise fusion pass asks of the
 * FusedElementwise and FusedReduction module kinds (fused_elementwise.c,
 * fused_reduction.c), and the pieces of the FusedElementwise emitter that
 * the FusedReduction emitter builds on.
 */
#ifndef FXCC_FUSED_ELEMENTWISE_H
#define FXCC_FUSED_ELEMENTWISE_H

#include "../ir.h"

/* --- fused_elementwise.c --------------------------------------------------- */

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

/* --- fused_reduction.c ----------------------------------------------------- */

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
