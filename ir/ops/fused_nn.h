/*
 * fused_nn.h - what the FusedConv / FusedGemm module kinds (fused_nn.c)
 * share with the Conv and Gemm definitions (nn_conv.c, nn_gemm.c) and with
 * the epilogue fusion pass (opt/pass_epilogue_fusion.c).
 *
 * A fused node carries its product's attributes (Conv's, or Gemm's alpha /
 * transA / transB) plus the epilogue's: `activation` (one of the names of
 * fused_nn_activation_name), `act_alpha`, `act_beta` (Clip's min and max,
 * LeakyRelu's alpha, HardSigmoid's alpha and beta, GELU's scale: 0.5 for
 * GELU itself) and `residual_after`
 * (0: act(y + bias + R), as ResNet's add-then-relu; 1: act(y + bias) + R).
 */
#ifndef FXCC_FUSED_NN_H
#define FXCC_FUSED_NN_H

#include "../ir.h"

/* nn_conv.c: Conv's rules, which FusedConv (same attributes, same first
 * three inputs) reuses. */
FxStatus nn_conv_infer(InferCtx *c);
FxStatus nn_conv_node_params(const Node *n, Diag *d, FxrtConvParams *p, int64_t *scratch_floats);
size_t nn_conv_scratch(const Node *n);
/* Writes the static FxrtConvParams and the call of the algorithm p needs,
 * with epilogue expression ep ("&ep" or "NULL"). */
void nn_conv_emit_call(EmitCtx *c, const FxrtConvParams *p, const char *ep);
/* Writes `static const FxrtConvParams p = {...};`. */
void nn_conv_emit_params(EmitCtx *c, const FxrtConvParams *p);

/* Pools, which the NCHWc pool kinds (nchwc.c) reuse: the attributes of
 * MaxPool and AveragePool, and the check of X [N, C, in...] against a
 * pool's attributes that fills p and the output shape. */
extern const AttrSpec nn_maxpool_attrs[];
extern const AttrSpec nn_avgpool_attrs[];
FxStatus nn_pool_params(const Node *n, Diag *d, const TensorType *x, FxrtPoolParams *p,
                        TensorType *out);
/* Writes `static const FxrtPoolParams p = {...};`. */
void nn_pool_emit_params(EmitCtx *c, const FxrtPoolParams *p);

/* fused_nn.c */
/* The AttrSpec entries of the epilogue, shared by every fused kind. */
#define FUSED_NN_EPILOGUE_ATTRS                     \
    {"activation", FX_ATTR_STRING, "none", false}, \
    {"act_alpha", FX_ATTR_FLOAT, "0.0", false},    \
    {"act_beta", FX_ATTR_FLOAT, "0.0", false},     \
    {"residual_after", FX_ATTR_INT, "0", false}
/* The epilogue attributes of n into e (pointers and strides left zero). */
FxStatus fused_nn_node_epilogue(const Node *n, Diag *d, FxrtEpilogue *e);
/* "none", "relu", "clip", "leaky_relu", "sigmoid", "hardswish",
 * "hardsigmoid", "tanh", "gelu" by FxrtActivation; NULL past the end. */
const char *fused_nn_activation_name(FxrtActivation a);
/* Writes `const FxrtEpilogue ep = {...};` with the numeric fields of shape
 * and the C expressions bias and residual (NULL: none), and returns "&ep";
 * returns "NULL" (and writes nothing) when the epilogue would be empty. */
const char *nn_emit_epilogue(EmitCtx *c, const FxrtEpilogue *shape, const char *bias,
                             const char *residual);

#endif
