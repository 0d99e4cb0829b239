/*
 * fused_elementwise.h - what the elementwise fusion pass asks of the
 * FusedElementwise module kind (fused_elementwise.c).
 */
#ifndef FXCC_FUSED_ELEMENTWISE_H
#define FXCC_FUSED_ELEMENTWISE_H

#include "../ir.h"

/* True if n (a call_function node whose shapes are known) can live in a
 * FusedElementwise body: a float32 elementwise op with a scalar C form. */
bool fused_elementwise_supports(const Node *n);

#endif
