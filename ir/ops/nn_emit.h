/*
 * nn_emit.h - emitter helpers shared by the nn op files (nn_gemm.c,
 * nn_conv.c): input access, integer lists, and the zero-point tables of the
 * quantized ops (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv).
 */
#ifndef FXCC_NN_EMIT_H
#define FXCC_NN_EMIT_H

#include "../ir.h"

/* C expression / compile-time value of input i, NULL if omitted. */
const char *nn_emit_input(const EmitCtx *c, int i);
const Tensor *nn_emit_value(const EmitCtx *c, int i);
/* "{v0, v1, ...}" of the first count values into buf. */
char *nn_format_ints(const int64_t *v, int count, char *buf, size_t cap);
size_t nn_align64(size_t n);
/* Declares `int32_t NAME[...]` holding zero-point input i (at most max
 * values) as int32: a static table when it is a constant, otherwise
 * converted at run time into `dst` (a scratch expression); absent: one 0.
 * Returns the count. */
int64_t nn_emit_zero_points(EmitCtx *c, int i, const char *name, const char *dst, int64_t max);
/* A scalar zero point as a C expression: a literal for a constant, else a load. */
char *nn_zero_point_expr(const EmitCtx *c, int i, char *buf, size_t cap);
/* Scratch bytes nn_emit_zero_points needs for input i of n. */
size_t nn_zero_point_bytes(const Node *n, int i);

#endif
