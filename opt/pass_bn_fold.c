/*
 * pass_bn_fold.c - folds an inference BatchNormalization into the linear
 * layer next to it.
 *
 * In inference mode BatchNormalization is the per-channel affine map
 * y = s * x + t with s = scale / sqrt(var + eps) and t = B - mean * s, all
 * constants.  Right after a Conv, ConvTranspose, Gemm or 2-D MatMul whose
 * weights are constants and whose output only the BN reads, the map goes
 * into that layer's weights and bias (fold_affine_after: W scaled along the
 * output channels, bias' = (bias - mean) * s + B, a MatMul becoming a
 * Gemm).  Otherwise, right before a Conv that reads it alone, it goes into
 * that Conv's weights along the input channels, with W.t added to the bias,
 * which is exact only when the Conv pads nothing (a padded tap reads 0, not
 * t) unless t is all zeros (fold_affine_before).
 *
 * Refused, and left for the kernel: training mode, statistics that are
 * read, per-activation (not per-channel) parameters, parameters that are not
 * float32 constants, and a BN with no foldable neighbour.  Channel axis 1
 * must be the layer's channel axis, so a MatMul folds only when its output
 * is 2-D.
 */
#include <math.h>
#include <stdlib.h>

#include "opt.h"

/* The BN as an affine map over its input, scale and shift shaped
 * [1, C, 1, ...] so that they broadcast along axis 1 only; *ok = false when
 * n is not a foldable BN. */
static FxStatus bn_affine(const Node *n, FoldAffine *a, bool *ok, Diag *d)
{
    *ok = false;
    if (n->opcode != FX_OPCODE_CALL_FUNCTION || n->op != &fx_op_BatchNormalization ||
        n->num_args < 5 || !fold_is_f32(n) || !fold_is_f32(n->args[0]) ||
        node_attr_int(n, "training_mode", 0) != 0)
        return FX_OK;
    const TensorType *x = &n->args[0]->out_types[0];
    if (x->rank < 2)
        return FX_OK;
    int64_t channels = x->dims[1];
    const float *p[4];
    for (int i = 0; i < 4; i++) {
        const Tensor *v = fold_const_f32(n->args[1 + i]);
        if (!v || v->type.rank != 1 || v->type.dims[0] != channels)
            return FX_OK;
        p[i] = v->data;
    }
    const float *gamma = p[0], *beta = p[1], *mean = p[2], *var = p[3];
    double eps = node_attr_float(n, "epsilon", 1e-5f);
    int64_t dims[FX_MAX_RANK];
    for (int i = 0; i < x->rank; i++)
        dims[i] = i == 1 ? channels : 1;
    a->scale = fold_tensor_f32(x->rank, dims, d);
    a->shift = a->scale ? fold_tensor_f32(x->rank, dims, d) : NULL;
    if (!a->shift) {
        fold_affine_free(a);
        return FX_ERR_NOMEM;
    }
    float *s = a->scale->data, *t = a->shift->data;
    for (int64_t c = 0; c < channels; c++) {
        s[c] = (float)(gamma[c] / sqrt((double)var[c] + eps));
        t[c] = (float)(beta[c] - (double)mean[c] * s[c]);
    }
    *ok = true;
    return FX_OK;
}

/* The BN that n reads as its input 0 folded into n; or n itself, a BN,
 * folded into the layer it reads. */
static FxStatus fold_at(Node *n, bool *folded, Diag *d)
{
    *folded = false;
    bool ok;
    FoldAffine a = {0};
    FxStatus st;
    if (n->op == &fx_op_BatchNormalization) {
        if ((st = bn_affine(n, &a, &ok, d)) == FX_OK && ok)
            st = fold_affine_after(n->args[0], n, &a, folded, d);
    } else if (n->op == &fx_op_Conv && n->num_args > 0 && n->args[0]) {
        Node *bn = n->args[0];
        if ((st = bn_affine(bn, &a, &ok, d)) == FX_OK && ok)
            st = fold_affine_before(n, bn, bn->args[0], &a, folded, d);
    } else {
        st = FX_OK;
    }
    fold_affine_free(&a);
    return st;
}

FxStatus pass_bn_fold(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    /* A fold can make another possible (a BN before a BN before a Conv);
     * each fold erases a BN. */
    return graph_rewrite_until_fixed(g, fold_at, &r->changes, d);
}
