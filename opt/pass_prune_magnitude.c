/*
 * pass_prune_magnitude.c - unstructured pruning: the weights of smallest
 * magnitude of every Conv, Gemm and MatMul with constant float32 weights
 * become zero, a fraction `sparsity` of each layer's weights (per layer) or
 * of all of them against one threshold (global, so layers with many small
 * weights lose more).  Biases are left alone.
 *
 * The weights stay dense: zeros alone make the model no smaller and no
 * faster in fxcc's kernels.  What it gives is the accuracy a sparse model
 * would have, and an ONNX model (`fxcc prune -o`) to fine-tune with the
 * mask.  Ties at the threshold are broken by position, so exactly the
 * requested count is zeroed.  A shared weight is copied before it is
 * zeroed (node_set_const_input), so another reader keeps its values.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opt.h"

static bool prunable(const Node *n)
{
    if (!node_is_call(n) || n->num_args < 2 || !n->args[1])
        return false;
    if (n->op != &fx_op_Conv && n->op != &fx_op_Gemm && n->op != &fx_op_MatMul)
        return false;
    const Tensor *w = fold_const_f32(n->args[1]);
    return w && tensor_numel(w) > 0;
}

typedef struct Weight {
    float mag;
    int layer;
    int64_t index;
} Weight;

static int by_magnitude(const void *a, const void *b)
{
    const Weight *x = a, *y = b;
    if (x->mag != y->mag)
        return x->mag < y->mag ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Marks in zero[] the `count` smallest of w[0..n). */
static FxStatus smallest(Weight *w, int64_t n, int64_t count, bool **zero, Diag *d)
{
    (void)d;
    qsort(w, (size_t)n, sizeof *w, by_magnitude);
    for (int64_t k = 0; k < count; k++)
        zero[w[k].layer][w[k].index] = true;
    return FX_OK;
}

FxStatus pass_prune_magnitude(Graph *g, double sparsity, bool global, PruneMagnitudeResult *r,
                              Diag *d)
{
    memset(r, 0, sizeof *r);
    if (!(sparsity >= 0 && sparsity < 1))
        return diag_error(d, FX_ERR_INVALID,
                          "magnitude pruning takes a sparsity in [0, 1), not %g", sparsity);
    int layers = 0;
    int64_t total = 0;
    for (Node *n = g->root.next; n != &g->root; n = n->next)
        if (prunable(n)) {
            layers++;
            total += tensor_numel(fold_const_f32(n->args[1]));
        }
    Node **nodes = fx_alloc_array((size_t)layers + 1, sizeof *nodes);
    bool **zero = fx_alloc_array((size_t)layers + 1, sizeof *zero);
    Weight *all = fx_alloc_array((size_t)total + 1, sizeof *all);
    FxStatus st = nodes && zero && all ? FX_OK : diag_error(d, FX_ERR_NOMEM, "out of memory");
    int k = 0;
    int64_t at = 0;
    for (Node *n = g->root.next; st == FX_OK && n != &g->root; n = n->next) {
        if (!prunable(n))
            continue;
        const Tensor *w = fold_const_f32(n->args[1]);
        int64_t count = tensor_numel(w);
        nodes[k] = n;
        if (!(zero[k] = fx_alloc_array((size_t)count, sizeof **zero))) {
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
            break;
        }
        const float *x = w->data;
        for (int64_t i = 0; i < count; i++) {
            all[at + i] = (Weight){fabsf(x[i]), k, i};
            r->zeros_before += x[i] == 0.0f;
        }
        if (!global)
            st = smallest(all + at, count, (int64_t)floor(sparsity * (double)count + 1e-9), zero, d);
        at += count;
        k++;
    }
    if (st == FX_OK && global)
        st = smallest(all, total, (int64_t)floor(sparsity * (double)total + 1e-9), zero, d);
    for (int l = 0; st == FX_OK && l < layers; l++) {
        Tensor *w = tensor_clone(fold_const_f32(nodes[l]->args[1]), d);
        if (!w) {
            st = FX_ERR_NOMEM;
            break;
        }
        float *x = w->data;
        for (int64_t i = 0; i < tensor_numel(w); i++) {
            if (zero[l][i])
                x[i] = 0.0f;
            r->zeros_after += x[i] == 0.0f;
        }
        st = node_set_const_input(nodes[l], 1, "sparse_weight", w, d);
    }
    if (st == FX_OK) {
        r->layers = layers;
        r->weights = total;
        graph_eliminate_dead_code(g);
    }
    for (int l = 0; zero && l < layers; l++)
        free(zero[l]);
    free(zero);
    free(nodes);
    free(all);
    return st;
}
