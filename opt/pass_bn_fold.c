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

/* The BN that n reads as its input 0 folded into n; or n itself, a BN,
 * folded into the layer it reads. */
static FxStatus fold_at(Node *n, bool *folded, Diag *d)
{
    *folded = false;
    bool ok;
    FoldAffine a = {0};
    FxStatus st;
    if (n->op == &fx_op_BatchNormalization) {
        if ((st = fold_bn_affine(n, &a, &ok, d)) == FX_OK && ok)
            st = fold_affine_after(n->args[0], n, &a, folded, d);
    } else if (n->op == &fx_op_Conv && n->num_args > 0 && n->args[0]) {
        Node *bn = n->args[0];
        if ((st = fold_bn_affine(bn, &a, &ok, d)) == FX_OK && ok)
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
