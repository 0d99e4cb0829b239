/*
 * pass_linear_fold.c - folds affine constant ops and linear neighbours into
 * linear layers, and merges chains of clamps.
 *
 * Three rewrites, each anchored at the last node of its pattern so that a
 * walk in graph order only ever erases the node it stands on or earlier
 * ones:
 *
 *  - Add/Sub/Mul/Div by a constant is an affine map (x - c = x + (-c),
 *    c - x = -x + c, x / c = x * (1/c); c / x is not affine).  Right after a
 *    Gemm, MatMul or Conv that only it reads, the map goes into the layer's
 *    weights and bias; right before one, as its input, into the weights
 *    along the input axis with W.shift added to the bias (see fold_util.c
 *    for where each layer takes which constant shape).
 *  - Relu and Clip compose into one clamp: Clip(Clip(x, a1, b1), a2, b2) is
 *    Clip(x, max(a1, a2), min(max(b1, a2), b2)) for the kernel's
 *    min(max(x, lo), hi), Relu is Clip(x, 0, +inf), and a clamp to
 *    [0, +inf) is written as a Relu.
 *  - Gemm/MatMul into Gemm/MatMul with constant weights and nothing in
 *    between: x.W1.W2 + b1.W2 + b2 as one layer, when K*N2 multiply-adds per
 *    row are fewer than K*N1 + N1*N2.
 *
 * Each needs float32 values of known shape, the intermediate value read by
 * the pattern alone, and real (finite) constants; the constant must not
 * broadcast the value to a larger shape.  Folds can enable one another (a
 * Mul before an Add before a Gemm), so the walk repeats until nothing
 * changes; every rewrite erases a node or turns a Clip into a Relu.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opt.h"

static bool all_finite(const Tensor *t)
{
    const float *v = t->data;
    for (int64_t i = 0; i < tensor_numel(t); i++)
        if (!isfinite(v[i]))
            return false;
    return true;
}

/* --- affine ops --------------------------------------------------------------- */

/* n = Add/Sub/Mul/Div of a value *x and a constant, as an affine map of *x;
 * *ok = false when it is not one. */
static FxStatus elementwise_affine(const Node *n, Node **x, FoldAffine *a, bool *ok, Diag *d)
{
    *ok = false;
    const OpDef *op = n->op;
    if (n->opcode != FX_OPCODE_CALL_FUNCTION || n->num_args != 2 || !n->args[0] ||
        !n->args[1] || !fold_is_f32(n) ||
        (op != &fx_op_Add && op != &fx_op_Sub && op != &fx_op_Mul && op != &fx_op_Div))
        return FX_OK;
    const Tensor *c0 = fold_const_f32(n->args[0]), *c1 = fold_const_f32(n->args[1]);
    if (!c0 == !c1) /* both constant: const-fold's; neither: not affine */
        return FX_OK;
    int xi = c0 ? 1 : 0;
    const Tensor *c = c0 ? c0 : c1;
    *x = n->args[xi];
    if (!fold_is_f32(*x) || !type_equal(&n->out_types[0], &(*x)->out_types[0]) ||
        !all_finite(c) || (op == &fx_op_Div && xi == 1))
        return FX_OK;
    Tensor *k = tensor_clone(c, d);
    if (!k)
        return FX_ERR_NOMEM;
    float *v = k->data;
    int64_t count = tensor_numel(k);
    if (op == &fx_op_Div) {
        for (int64_t i = 0; i < count; i++)
            if (v[i] == 0.0f) {
                tensor_free(k);
                return FX_OK;
            }
        for (int64_t i = 0; i < count; i++)
            v[i] = 1.0f / v[i];
    }
    if (op == &fx_op_Sub && xi == 0)
        for (int64_t i = 0; i < count; i++)
            v[i] = -v[i];
    if (op == &fx_op_Mul || op == &fx_op_Div) {
        a->scale = k;
    } else {
        a->shift = k;
        if (op == &fx_op_Sub && xi == 1) { /* c - x */
            if (!(a->scale = fold_tensor_f32(0, NULL, d)))
                return FX_ERR_NOMEM;
            *(float *)a->scale->data = -1.0f;
        }
    }
    *ok = true;
    return FX_OK;
}

/* n, an affine op, folded into the layer it reads. */
static FxStatus fold_after(Node *n, bool *done, Diag *d)
{
    FoldAffine a = {0};
    Node *x = NULL;
    bool ok;
    FxStatus st = elementwise_affine(n, &x, &a, &ok, d);
    if (st == FX_OK && ok)
        st = fold_affine_after(x, n, &a, done, d);
    fold_affine_free(&a);
    return st;
}

/* The affine op that layer n reads as its input folded into n. */
static FxStatus fold_before(Node *n, bool *done, Diag *d)
{
    if ((n->op != &fx_op_Gemm && n->op != &fx_op_MatMul && n->op != &fx_op_Conv) ||
        n->num_args < 1 || !n->args[0])
        return FX_OK;
    FoldAffine a = {0};
    Node *x = NULL;
    bool ok;
    FxStatus st = elementwise_affine(n->args[0], &x, &a, &ok, d);
    if (st == FX_OK && ok)
        st = fold_affine_before(n, n->args[0], x, &a, done, d);
    fold_affine_free(&a);
    return st;
}

/* --- clamps ------------------------------------------------------------------- */

/* n's bounds when it is a float32 Relu, or a Clip with constant scalar
 * bounds (omitted: infinite). */
static bool clamp_bounds(const Node *n, float *lo, float *hi)
{
    if (n->opcode != FX_OPCODE_CALL_FUNCTION || !fold_is_f32(n) || !n->args[0])
        return false;
    *lo = -INFINITY;
    *hi = INFINITY;
    if (n->op == &fx_op_Relu) {
        *lo = 0.0f;
        return true;
    }
    if (n->op != &fx_op_Clip)
        return false;
    for (int i = 1; i < 3 && i < n->num_args; i++) {
        if (!n->args[i])
            continue;
        const Tensor *v = fold_const_f32(n->args[i]);
        if (!v || tensor_numel(v) != 1 || isnan(*(const float *)v->data))
            return false;
        *(i == 1 ? lo : hi) = *(const float *)v->data;
    }
    return true;
}

/* Clip slot `slot` of n set to bound v, or omitted when v is infinite. */
static FxStatus set_bound(Node *n, int slot, float v, Diag *d)
{
    const Tensor *now = slot < n->num_args ? fold_const_f32(n->args[slot]) : NULL;
    if (now && tensor_numel(now) == 1 && *(const float *)now->data == v)
        return FX_OK;
    if (isinf(v)) {
        if (slot < n->num_args && n->args[slot]) {
            Node *old = n->args[slot];
            node_clear_arg(n, slot);
            fold_erase_dead(n->graph, old);
        }
        return FX_OK;
    }
    Tensor *t = fold_tensor_f32(0, NULL, d);
    if (!t)
        return FX_ERR_NOMEM;
    *(float *)t->data = v;
    return fold_set_const_arg(n, slot, slot == 1 ? "clip_min" : "clip_max", t, d);
}

/* n becomes the clamp [lo, hi] of x: in place when its op fits, else a new
 * Relu or Clip takes its uses.  `retired` is the clamp merged into it. */
static FxStatus clamp_rewrite(Node *n, Node *x, float lo, float hi, Node *retired, Diag *d)
{
    Graph *g = n->graph;
    bool relu = lo == 0.0f && hi == INFINITY;
    Node *target = n;
    FxStatus st = FX_OK;
    if (relu == (n->op == &fx_op_Relu)) {
        if (!node_set_arg(n, 0, x))
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        if (!relu && (st = set_bound(n, 1, lo, d)) == FX_OK)
            st = set_bound(n, 2, hi, d);
        if (st == FX_OK)
            st = node_infer_shapes(n, d);
    } else {
        Node *args[3] = {x, NULL, NULL};
        InsertPoint ip = insert_before(n);
        target = ip_create_op(&ip, relu ? &fx_op_Relu : &fx_op_Clip, relu ? "relu" : "clip",
                              args, relu ? 1 : 3, d);
        if (!target)
            return FX_ERR_INVALID;
        if (!relu && (st = set_bound(target, 1, lo, d)) == FX_OK)
            st = set_bound(target, 2, hi, d);
        if (st == FX_OK)
            st = node_infer_shapes(target, d);
        if (st == FX_OK && node_replace_all_uses_with(n, target) < 0)
            st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    }
    if (st != FX_OK)
        return st;
    fold_erase_dead(g, n);
    fold_erase_dead(g, retired);
    return FX_OK;
}

static FxStatus fold_clamps(Node *n, bool *done, Diag *d)
{
    float lo, hi, inner_lo, inner_hi;
    if (!clamp_bounds(n, &lo, &hi))
        return FX_OK;
    Node *inner = n->args[0];
    if (inner->num_users == 1 && clamp_bounds(inner, &inner_lo, &inner_hi)) {
        float merged_lo = fmaxf(inner_lo, lo), merged_hi = fminf(fmaxf(inner_hi, lo), hi);
        *done = true;
        return clamp_rewrite(n, inner->args[0], merged_lo, merged_hi, inner, d);
    }
    if (n->op == &fx_op_Clip && lo == 0.0f && hi == INFINITY) {
        *done = true;
        return clamp_rewrite(n, inner, lo, hi, NULL, d);
    }
    return FX_OK;
}

/* --- linear pairs ------------------------------------------------------------- */

/* n = L2(L1(x)), both Gemm/MatMul with constant 2-D weights, as one layer
 * when that is cheaper. */
static FxStatus merge_pair(Node *n, bool *done, Diag *d)
{
    if ((n->op != &fx_op_Gemm && n->op != &fx_op_MatMul) || !n->args[0] ||
        (n->args[0]->op != &fx_op_Gemm && n->args[0]->op != &fx_op_MatMul) ||
        n->args[0]->opcode != FX_OPCODE_CALL_FUNCTION || n->args[0]->num_users != 1)
        return FX_OK;
    FoldDense first = {0}, second = {0};
    bool ok1 = false, ok2 = false;
    FxStatus st = fold_dense_read(n->args[0], &first, &ok1, d);
    if (st == FX_OK && ok1)
        st = fold_dense_read(n, &second, &ok2, d);
    int64_t k = first.k, n1 = first.n, n2 = second.n;
    int64_t rows = first.bias_rows > second.bias_rows ? first.bias_rows : second.bias_rows;
    bool fits = st == FX_OK && ok1 && ok2 && !second.trans_a && second.k == n1 &&
                (rows == 0 || first.two_d) &&
                (double)k * n2 < (double)k * n1 + (double)n1 * n2;
    float *w = NULL, *bias = NULL;
    if (fits) {
        w = fx_alloc_array((size_t)(k * n2 > 0 ? k * n2 : 1), sizeof *w);
        bias = fx_alloc_array((size_t)(rows * n2 > 0 ? rows * n2 : 1), sizeof *bias);
        if (!w || !bias)
            st = diag_error(d, FX_ERR_NOMEM, "out of memory merging linear layers");
    }
    if (fits && st == FX_OK) {
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < n2; j++) {
                double sum = 0.0;
                for (int64_t h = 0; h < n1; h++)
                    sum += (double)first.w[i * n1 + h] * second.w[h * n2 + j];
                w[i * n2 + j] = (float)sum;
            }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < n2; j++) {
                double sum = 0.0;
                if (first.bias_rows > 0) {
                    const float *b1 = first.bias + (first.bias_rows == 1 ? 0 : r) * n1;
                    for (int64_t h = 0; h < n1; h++)
                        sum += (double)b1[h] * second.w[h * n2 + j];
                }
                if (second.bias_rows > 0)
                    sum += second.bias[(second.bias_rows == 1 ? 0 : r) * n2 + j];
                bias[r * n2 + j] = (float)sum;
            }
        free(first.w);
        free(first.bias);
        first.w = w;
        first.bias = rows > 0 ? bias : (free(bias), NULL);
        first.bias_rows = rows;
        first.n = n2;
        w = bias = NULL;
        st = fold_dense_commit(&first, NULL, n, NULL, d);
        *done = st == FX_OK;
    }
    free(w);
    free(bias);
    fold_dense_free(&first);
    fold_dense_free(&second);
    return st;
}

/* --- the pass ------------------------------------------------------------------ */

FxStatus pass_linear_fold(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    for (int before = -1; before != r->changes;) {
        before = r->changes;
        graph_for_each(g, n)
        {
            if (n->opcode != FX_OPCODE_CALL_FUNCTION)
                continue;
            bool done = false;
            FxStatus st = fold_clamps(n, &done, d);
            if (st == FX_OK && !done)
                st = fold_after(n, &done, d);
            if (st == FX_OK && !done)
                st = fold_before(n, &done, d);
            if (st == FX_OK && !done)
                st = merge_pair(n, &done, d);
            if (st != FX_OK)
                return st;
            r->changes += done;
        }
    }
    return FX_OK;
}
