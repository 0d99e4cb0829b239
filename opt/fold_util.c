/*
 * fold_util.c - what bn-fold and linear-fold share: an affine map
 * y = scale * x + shift (per channel) absorbed into the linear layer next to
 * it, and the constant-tensor plumbing that needs.
 *
 * A linear layer is read into a plain form whose constants are copies:
 * a Conv or ConvTranspose as W and a per-output-channel bias, a Gemm or a
 * MatMul with 2-D weights as y = x'.w + bias with w [K, N] (alpha, beta and
 * transB folded in).  The map is applied to the copies and the layer written
 * back in place with new constants, so weights another node shares are never
 * changed under it; the old constants are erased when nothing reads them
 * any more.
 *
 * After the layer, a map commutes with everything: each output channel is
 * a sum scaled by s plus a shift.  Before it, the scale goes into W along the
 * input axis and the shift becomes bias + W.shift; that holds for a Conv
 * only where every tap reads real data, so a Conv that pads takes a scale
 * (0 * s is still 0) but no shift, and a ConvTranspose (whose border outputs
 * sum fewer inputs) takes neither.  A MatMul has no bias: it takes a shift
 * only as a 2-D product, by becoming a Gemm.  Sums run in double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opt.h"

const Tensor *fold_const_f32(const Node *a)
{
    const Tensor *v = node_const_value(a);
    return v && v->type.dtype == FXRT_DTYPE_FLOAT32 ? v : NULL;
}

bool fold_is_f32(const Node *n)
{
    return n && n->num_outputs == 1 && n->shapes_known && n->out_types &&
           n->out_types[0].dtype == FXRT_DTYPE_FLOAT32;
}

Tensor *fold_tensor_f32(int rank, const int64_t *dims, Diag *d)
{
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = rank};
    if (rank > 0)
        memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    return tensor_new(&t, d);
}

Tensor *fold_broadcast_to(const Tensor *t, const TensorType *type, Diag *d)
{
    int rank = type->rank, off = rank - t->type.rank;
    if (off < 0) {
        diag_error(d, FX_ERR_SHAPE, "a folded constant has a higher rank than its value");
        return NULL;
    }
    /* Source stride of each output axis, 0 along broadcast axes. */
    int64_t stride[FX_MAX_RANK] = {0}, acc = 1;
    for (int i = t->type.rank - 1; i >= 0; i--) {
        int64_t dim = t->type.dims[i];
        if (dim != 1 && dim != type->dims[off + i]) {
            diag_error(d, FX_ERR_SHAPE, "a folded constant does not broadcast to its value");
            return NULL;
        }
        stride[off + i] = dim == 1 ? 0 : acc;
        acc *= dim;
    }
    Tensor *r = fold_tensor_f32(rank, type->dims, d);
    if (!r)
        return NULL;
    const float *src = t->data;
    float *dst = r->data;
    int64_t idx[FX_MAX_RANK] = {0}, total = tensor_numel(r), at = 0;
    for (int64_t e = 0; e < total; e++) {
        dst[e] = src[at];
        for (int i = rank - 1; i >= 0; i--) {
            at += stride[i];
            if (++idx[i] < type->dims[i])
                break;
            at -= stride[i] * idx[i];
            idx[i] = 0;
        }
    }
    return r;
}

bool fold_channel_vector(const Tensor *t, const TensorType *type, int axis, float *out)
{
    int off = type->rank - t->type.rank;
    if (off < 0 || axis < 0 || axis >= type->rank)
        return false;
    bool varies = false;
    for (int i = 0; i < t->type.rank; i++) {
        int64_t dim = t->type.dims[i];
        if (dim == 1)
            continue;
        if (off + i != axis || dim != type->dims[axis])
            return false;
        varies = true;
    }
    /* Every other axis has extent 1, so channel c sits at flat index c. */
    const float *v = t->data;
    for (int64_t c = 0; c < type->dims[axis]; c++)
        out[c] = v[varies ? c : 0];
    return true;
}

/* a already holds exactly value: a fold that left the weights alone need not
 * copy them. */
static bool holds(const Node *a, const Tensor *value)
{
    const Tensor *now = a ? fold_const_f32(a) : NULL;
    return now && type_equal(&now->type, &value->type) &&
           memcmp(now->data, value->data, tensor_nbytes(value)) == 0;
}

/* Argument `slot` of n becomes a constant holding value (owned from here)
 * unless it holds that already; the argument it replaces goes when dead. */
static FxStatus set_const_arg(Node *n, int slot, const char *role, Tensor *value, Diag *d)
{
    Node *old = slot < n->num_args ? n->args[slot] : NULL;
    if (holds(old, value)) {
        tensor_free(value);
        return FX_OK;
    }
    FxStatus st = node_set_const_input(n, slot, role, value, d);
    if (st == FX_OK)
        node_eliminate_if_dead(old);
    return st;
}

void fold_affine_free(FoldAffine *a)
{
    tensor_free(a->scale);
    tensor_free(a->shift);
    a->scale = a->shift = NULL;
}

/* Ends a rewrite whose value `target` now stands for `result`: result's
 * users read target, and when they differ, result and everything it alone
 * read (the old layer, the op before it) are dead; else only `retired`,
 * which the rewritten layer stopped reading.  One root, so nothing is erased
 * twice. */
static FxStatus commit_replacement(Node *target, Node *result, Node *retired, Diag *d)
{
    if (result != target && node_replace_all_uses_with(result, target) < 0)
        return diag_node_error(d, FX_ERR_NOMEM, target, "out of memory");
    node_eliminate_if_dead(result != target ? result : retired);
    return FX_OK;
}

static FxStatus nomem(Diag *d)
{
    return diag_error(d, FX_ERR_NOMEM, "out of memory folding constants");
}

/* n floats set to v; NULL after filling d. */
static float *floats_filled(int64_t n, float v, Diag *d)
{
    float *p = fx_alloc_array((size_t)(n > 0 ? n : 1), sizeof *p);
    if (!p) {
        nomem(d);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        p[i] = v;
    return p;
}

static bool any_nonzero(const float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (v[i] != 0.0f)
            return true;
    return false;
}

/* The two ends of an affine map that a layer's channel axis reads: scale
 * and shift per index of `axis` of `type`, or false when either varies
 * along another axis. */
static FxStatus channel_maps(const FoldAffine *a, const TensorType *type, int axis, float **s,
                             float **t, bool *ok, Diag *d)
{
    *s = floats_filled(type->dims[axis], 1.0f, d);
    *t = floats_filled(type->dims[axis], 0.0f, d);
    if (!*s || !*t)
        return FX_ERR_NOMEM;
    *ok = (!a->scale || fold_channel_vector(a->scale, type, axis, *s)) &&
          (!a->shift || fold_channel_vector(a->shift, type, axis, *t));
    return FX_OK;
}

/* --- Conv and ConvTranspose ------------------------------------------------ */

typedef struct ConvLayer {
    Node *layer;
    bool transpose;
    int64_t group, cin, cout;
    int64_t d0, d1, ksize; /* W is [d0, d1, kernel...], ksize elements per (d0, d1) */
    Tensor *w;             /* copy of W */
    float *bias;           /* [cout] */
    bool had_bias;
} ConvLayer;

static void conv_free(ConvLayer *cv)
{
    tensor_free(cv->w);
    free(cv->bias);
    memset(cv, 0, sizeof *cv);
}

static FxStatus conv_read(Node *layer, ConvLayer *cv, bool *ok, Diag *d)
{
    memset(cv, 0, sizeof *cv);
    *ok = false;
    bool transpose = layer->op == &fx_op_ConvTranspose;
    if ((layer->op != &fx_op_Conv && !transpose) || layer->num_args < 2 || !fold_is_f32(layer) ||
        !fold_is_f32(layer->args[0]))
        return FX_OK;
    const Tensor *w = fold_const_f32(layer->args[1]);
    const TensorType *x = &layer->args[0]->out_types[0], *y = &layer->out_types[0];
    if (!w || w->type.rank < 3 || x->rank != w->type.rank || y->rank != x->rank)
        return FX_OK;
    int64_t group = node_attr_int(layer, "group", 1);
    int64_t d0 = w->type.dims[0], d1 = w->type.dims[1];
    int64_t cin = x->dims[1], cout = y->dims[1];
    if (group < 1 || cin % group || cout % group)
        return FX_OK;
    if (transpose ? (d0 != cin || d1 * group != cout) : (d0 != cout || d1 * group != cin))
        return FX_OK;
    const Tensor *b = NULL;
    if (layer->num_args > 2 && layer->args[2]) {
        b = fold_const_f32(layer->args[2]);
        if (!b || b->type.rank != 1 || b->type.dims[0] != cout)
            return FX_OK;
    }
    *cv = (ConvLayer){.layer = layer, .transpose = transpose, .group = group, .cin = cin,
                      .cout = cout, .d0 = d0, .d1 = d1};
    cv->ksize = tensor_numel(w) / (d0 * d1 > 0 ? d0 * d1 : 1);
    cv->w = tensor_clone(w, d);
    cv->bias = floats_filled(cout, 0.0f, d);
    if (!cv->w || !cv->bias) {
        conv_free(cv);
        return FX_ERR_NOMEM;
    }
    if (b)
        memcpy(cv->bias, b->data, (size_t)cout * sizeof *cv->bias);
    cv->had_bias = b != NULL;
    *ok = true;
    return FX_OK;
}

/* The output and input channel that W[i0, i1, ...] connects. */
static int64_t conv_out_channel(const ConvLayer *cv, int64_t i0, int64_t i1)
{
    return cv->transpose ? (i0 / (cv->cin / cv->group)) * (cv->cout / cv->group) + i1 : i0;
}

static int64_t conv_in_channel(const ConvLayer *cv, int64_t i0, int64_t i1)
{
    return cv->transpose ? i0 : (i0 / (cv->cout / cv->group)) * (cv->cin / cv->group) + i1;
}

static bool conv_pads(const Node *layer)
{
    const char *auto_pad = node_attr_string(layer, "auto_pad", "NOTSET");
    if (strcmp(auto_pad, "NOTSET") != 0 && strcmp(auto_pad, "VALID") != 0)
        return true;
    const int64_t *pads = NULL;
    int64_t count = node_attr_ints(layer, "pads", &pads);
    for (int64_t i = 0; i < count; i++)
        if (pads[i] != 0)
            return true;
    return false;
}

static FxStatus conv_commit(ConvLayer *cv, Node *x, Node *result, Node *retired, Diag *d)
{
    Node *layer = cv->layer;
    if (x && !node_set_arg(layer, 0, x))
        return diag_node_error(d, FX_ERR_NOMEM, layer, "out of memory");
    Tensor *w = cv->w;
    cv->w = NULL;
    FxStatus st = set_const_arg(layer, 1, "weight", w, d);
    /* A scale alone leaves a missing bias at zero: no need to add one. */
    bool bias = cv->had_bias || any_nonzero(cv->bias, cv->cout);
    Tensor *b = st == FX_OK && bias ? fold_tensor_f32(1, &cv->cout, d) : NULL;
    if (st == FX_OK && bias && !b)
        st = FX_ERR_NOMEM;
    if (st == FX_OK && bias) {
        memcpy(b->data, cv->bias, (size_t)cv->cout * sizeof *cv->bias);
        st = set_const_arg(layer, 2, "bias", b, d);
    }
    if (st == FX_OK)
        st = node_infer_shapes(layer, d);
    return st == FX_OK ? commit_replacement(layer, result, retired, d) : st;
}

static FxStatus conv_after(ConvLayer *cv, Node *result, const FoldAffine *a, bool *folded,
                           Diag *d)
{
    float *s = NULL, *t = NULL;
    bool ok = false;
    FxStatus st = channel_maps(a, &cv->layer->out_types[0], 1, &s, &t, &ok, d);
    if (st == FX_OK && ok) {
        float *w = cv->w->data;
        for (int64_t i0 = 0; i0 < cv->d0; i0++)
            for (int64_t i1 = 0; i1 < cv->d1; i1++) {
                float k = s[conv_out_channel(cv, i0, i1)];
                float *p = w + (i0 * cv->d1 + i1) * cv->ksize;
                for (int64_t e = 0; e < cv->ksize; e++)
                    p[e] *= k;
            }
        for (int64_t c = 0; c < cv->cout; c++)
            cv->bias[c] = cv->bias[c] * s[c] + t[c];
        st = conv_commit(cv, NULL, result, NULL, d);
        *folded = st == FX_OK;
    }
    free(s);
    free(t);
    return st;
}

static FxStatus conv_before(ConvLayer *cv, Node *pre, Node *x, const FoldAffine *a,
                            bool *folded, Diag *d)
{
    if (cv->transpose)
        return FX_OK;
    float *s = NULL, *t = NULL;
    bool ok = false;
    FxStatus st = channel_maps(a, &x->out_types[0], 1, &s, &t, &ok, d);
    if (st == FX_OK && ok && !(any_nonzero(t, cv->cin) && conv_pads(cv->layer))) {
        float *w = cv->w->data;
        for (int64_t i0 = 0; i0 < cv->d0; i0++)
            for (int64_t i1 = 0; i1 < cv->d1; i1++) {
                int64_t ic = conv_in_channel(cv, i0, i1);
                float *p = w + (i0 * cv->d1 + i1) * cv->ksize;
                double sum = 0.0;
                for (int64_t e = 0; e < cv->ksize; e++) {
                    sum += (double)p[e] * t[ic];
                    p[e] *= s[ic];
                }
                cv->bias[i0] += (float)sum;
            }
        st = conv_commit(cv, x, cv->layer, pre, d);
        *folded = st == FX_OK;
    }
    free(s);
    free(t);
    return st;
}

/* --- Gemm and MatMul --------------------------------------------------------- */

void fold_dense_free(FoldDense *dn)
{
    free(dn->w);
    free(dn->bias);
    memset(dn, 0, sizeof *dn);
}

FxStatus fold_dense_read(Node *layer, FoldDense *dn, bool *ok, Diag *d)
{
    memset(dn, 0, sizeof *dn);
    *ok = false;
    bool gemm = layer->op == &fx_op_Gemm;
    if ((!gemm && layer->op != &fx_op_MatMul) || layer->num_args < 2 || !fold_is_f32(layer) ||
        !fold_is_f32(layer->args[0]))
        return FX_OK;
    const TensorType *x = &layer->args[0]->out_types[0], *y = &layer->out_types[0];
    const Tensor *b = fold_const_f32(layer->args[1]);
    if (!b || b->type.rank != 2 || x->rank < 1)
        return FX_OK;
    const Tensor *c = gemm && layer->num_args > 2 ? fold_const_f32(layer->args[2]) : NULL;
    if (gemm && layer->num_args > 2 && layer->args[2] && !c)
        return FX_OK;
    float alpha = 1.0f, beta = 1.0f;
    dn->layer = layer;
    dn->gemm = gemm;
    dn->two_d = x->rank == 2;
    if (gemm) {
        if (!dn->two_d || y->rank != 2)
            return FX_OK;
        dn->trans_a = node_attr_int(layer, "transA", 0) != 0;
        dn->trans_b = node_attr_int(layer, "transB", 0) != 0;
        alpha = node_attr_float(layer, "alpha", 1.0f);
        beta = node_attr_float(layer, "beta", 1.0f);
        dn->m = y->dims[0];
        dn->n = y->dims[1];
        dn->k = x->dims[dn->trans_a ? 0 : 1];
    } else {
        dn->k = b->type.dims[0];
        dn->n = b->type.dims[1];
        dn->m = dn->two_d ? x->dims[0] : 0;
    }
    int64_t bk = b->type.dims[dn->trans_b ? 1 : 0], bn = b->type.dims[dn->trans_b ? 0 : 1];
    if (bk != dn->k || bn != dn->n || y->dims[y->rank - 1] != dn->n)
        return FX_OK;
    if (!(dn->w = floats_filled(dn->k * dn->n, 0.0f, d)))
        return FX_ERR_NOMEM;
    const float *bv = b->data;
    for (int64_t kk = 0; kk < dn->k; kk++)
        for (int64_t j = 0; j < dn->n; j++)
            dn->w[kk * dn->n + j] =
                alpha * bv[dn->trans_b ? j * dn->k + kk : kk * dn->n + j];
    if (c && beta != 0.0f) {
        dn->bias_rows = c->type.rank == 2 && c->type.dims[0] != 1 ? dn->m : 1;
        TensorType rows = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 2,
                           .dims = {dn->bias_rows, dn->n}};
        Tensor *full = fold_broadcast_to(c, &rows, d);
        if (!full) {
            fold_dense_free(dn);
            return FX_ERR_SHAPE;
        }
        dn->bias = full->data;
        full->data = NULL;
        tensor_free(full);
        for (int64_t i = 0; i < dn->bias_rows * dn->n; i++)
            dn->bias[i] *= beta;
    }
    *ok = true;
    return FX_OK;
}

/* bias += add ([rows, n], rows 1 or m), widening the bias as needed. */
static FxStatus dense_add_bias(FoldDense *dn, const float *add, int64_t rows, Diag *d)
{
    int64_t want = rows > dn->bias_rows ? rows : dn->bias_rows, n = dn->n;
    if (want != dn->bias_rows) {
        float *b = floats_filled(want * n, 0.0f, d);
        if (!b)
            return FX_ERR_NOMEM;
        for (int64_t r = 0; dn->bias_rows > 0 && r < want; r++)
            memcpy(b + r * n, dn->bias + (dn->bias_rows == 1 ? 0 : r) * n, (size_t)n * sizeof *b);
        free(dn->bias);
        dn->bias = b;
        dn->bias_rows = want;
    }
    for (int64_t r = 0; r < want; r++)
        for (int64_t j = 0; j < n; j++)
            dn->bias[r * n + j] += add[(rows == 1 ? 0 : r) * n + j];
    return FX_OK;
}

FxStatus fold_dense_commit(FoldDense *dn, Node *x, Node *result, Node *retired, Diag *d)
{
    Node *layer = dn->layer, *target = layer;
    bool transposed = dn->gemm && dn->trans_b;
    int64_t wd[2] = {transposed ? dn->n : dn->k, transposed ? dn->k : dn->n};
    Tensor *w = fold_tensor_f32(2, wd, d), *c = NULL;
    if (!w)
        return FX_ERR_NOMEM;
    float *wv = w->data;
    for (int64_t kk = 0; kk < dn->k; kk++)
        for (int64_t j = 0; j < dn->n; j++)
            wv[transposed ? j * dn->k + kk : kk * dn->n + j] = dn->w[kk * dn->n + j];
    if (dn->bias_rows > 0) {
        int64_t cd[2] = {dn->m, dn->n};
        c = dn->bias_rows == 1 ? fold_tensor_f32(1, &dn->n, d) : fold_tensor_f32(2, cd, d);
        if (!c) {
            tensor_free(w);
            return FX_ERR_NOMEM;
        }
        memcpy(c->data, dn->bias, (size_t)(dn->bias_rows * dn->n) * sizeof(float));
    }
    FxStatus st = FX_OK;
    if (dn->gemm || !c) {
        if (x && !node_set_arg(layer, 0, x)) {
            tensor_free(w);
            tensor_free(c);
            return nomem(d);
        }
        st = set_const_arg(layer, 1, "weight", w, d);
        if (st == FX_OK && c) {
            st = set_const_arg(layer, 2, "bias", c, d);
            c = NULL;
        } else if (st == FX_OK && layer->num_args > 2 && layer->args[2]) {
            Node *old = layer->args[2];
            node_clear_arg(layer, 2);
            node_eliminate_if_dead(old);
        }
        if (st == FX_OK && dn->gemm &&
            (!node_set_attr_float(layer, "alpha", 1.0f) ||
             !node_set_attr_float(layer, "beta", 1.0f)))
            st = nomem(d);
        tensor_free(c);
        if (st == FX_OK)
            st = node_infer_shapes(layer, d);
    } else {
        /* A MatMul that gained a bias: the same product as a Gemm, which the
         * 2-D operand allows (transA, transB 0). */
        Node *args[3] = {x ? x : layer->args[0], layer->args[1], NULL};
        InsertPoint ip = insert_before(layer);
        target = ip_create_op(&ip, &fx_op_Gemm, layer->name, args, 2, d);
        if (!target) {
            tensor_free(w);
            tensor_free(c);
            return FX_ERR_INVALID;
        }
        st = set_const_arg(target, 1, "weight", w, d);
        if (st != FX_OK)
            tensor_free(c);
        if (st != FX_OK || (st = set_const_arg(target, 2, "bias", c, d)) != FX_OK ||
            (st = node_infer_shapes(target, d)) != FX_OK) {
            node_eliminate_if_dead(target);
            return st;
        }
    }
    return st == FX_OK ? commit_replacement(target, result, retired, d) : st;
}

static FxStatus dense_after(FoldDense *dn, Node *result, const FoldAffine *a, bool *folded,
                            Diag *d)
{
    const TensorType *y = &dn->layer->out_types[0];
    int axis = y->rank - 1;
    int64_t n = dn->n;
    float *s = floats_filled(n, 1.0f, d), *t = floats_filled(n, 0.0f, d), *full_shift = NULL;
    Tensor *full = NULL;
    FxStatus st = s && t ? FX_OK : FX_ERR_NOMEM;
    bool ok = st == FX_OK && (!a->scale || fold_channel_vector(a->scale, y, axis, s));
    int64_t rows = 1;
    if (ok && a->shift) {
        ok = dn->two_d; /* only a Gemm has room for a bias */
        if (ok && !fold_channel_vector(a->shift, y, axis, t)) {
            if (!(full = fold_broadcast_to(a->shift, y, d)))
                st = FX_ERR_SHAPE;
            full_shift = full ? full->data : NULL;
            rows = dn->m;
        }
    }
    if (st == FX_OK && ok) {
        for (int64_t kk = 0; kk < dn->k; kk++)
            for (int64_t j = 0; j < n; j++)
                dn->w[kk * n + j] *= s[j];
        for (int64_t r = 0; r < dn->bias_rows; r++)
            for (int64_t j = 0; j < n; j++)
                dn->bias[r * n + j] *= s[j];
        if (a->shift)
            st = dense_add_bias(dn, full_shift ? full_shift : t, rows, d);
        if (st == FX_OK)
            st = fold_dense_commit(dn, NULL, result, NULL, d);
        *folded = st == FX_OK;
    }
    tensor_free(full);
    free(s);
    free(t);
    return st;
}

static FxStatus dense_before(FoldDense *dn, Node *pre, Node *x, const FoldAffine *a,
                             bool *folded, Diag *d)
{
    const TensorType *xt = &x->out_types[0];
    int axis = dn->gemm ? (dn->trans_a ? 0 : 1) : xt->rank - 1;
    int64_t k = dn->k, n = dn->n;
    float *s = floats_filled(k, 1.0f, d), *cm = NULL, *add = NULL;
    Tensor *full = NULL;
    FxStatus st = s ? FX_OK : FX_ERR_NOMEM;
    bool ok = st == FX_OK && (!a->scale || fold_channel_vector(a->scale, xt, axis, s));
    int64_t rows = 1;
    if (ok && a->shift) {
        ok = dn->two_d;
        if (ok && !(cm = floats_filled(k, 0.0f, d)))
            st = FX_ERR_NOMEM;
        if (ok && st == FX_OK && !fold_channel_vector(a->shift, xt, axis, cm)) {
            /* A shift that varies along the rows too: the bias gets m rows of
             * shift_row . w. */
            rows = dn->m;
            free(cm);
            cm = floats_filled(rows * k, 0.0f, d);
            full = cm ? fold_broadcast_to(a->shift, xt, d) : NULL;
            if (!full)
                st = cm ? FX_ERR_SHAPE : FX_ERR_NOMEM;
            for (int64_t r = 0; full && r < rows; r++)
                for (int64_t kk = 0; kk < k; kk++)
                    cm[r * k + kk] =
                        ((const float *)full->data)[dn->trans_a ? kk * rows + r : r * k + kk];
        }
        if (ok && st == FX_OK && !(add = floats_filled(rows * n, 0.0f, d)))
            st = FX_ERR_NOMEM;
        for (int64_t r = 0; ok && st == FX_OK && r < rows; r++)
            for (int64_t j = 0; j < n; j++) {
                double sum = 0.0;
                for (int64_t kk = 0; kk < k; kk++)
                    sum += (double)cm[r * k + kk] * dn->w[kk * n + j];
                add[r * n + j] = (float)sum;
            }
    }
    if (st == FX_OK && ok) {
        for (int64_t kk = 0; kk < k; kk++)
            for (int64_t j = 0; j < n; j++)
                dn->w[kk * n + j] *= s[kk];
        if (add)
            st = dense_add_bias(dn, add, rows, d);
        if (st == FX_OK)
            st = fold_dense_commit(dn, x, dn->layer, pre, d);
        *folded = st == FX_OK;
    }
    tensor_free(full);
    free(s);
    free(cm);
    free(add);
    return st;
}

/* --- the entry points --------------------------------------------------------- */

FxStatus fold_affine_after(Node *layer, Node *result, const FoldAffine *a, bool *folded,
                           Diag *d)
{
    *folded = false;
    if (node_fusable_user(layer) != result || !fold_is_f32(result) ||
        !fold_is_f32(layer) || !type_equal(&result->out_types[0], &layer->out_types[0]))
        return FX_OK;
    bool ok;
    ConvLayer cv;
    FxStatus st = conv_read(layer, &cv, &ok, d);
    if (st == FX_OK && ok) {
        st = conv_after(&cv, result, a, folded, d);
        conv_free(&cv);
        return st;
    }
    FoldDense dn = {0};
    if (st == FX_OK)
        st = fold_dense_read(layer, &dn, &ok, d);
    if (st == FX_OK && ok)
        st = dense_after(&dn, result, a, folded, d);
    fold_dense_free(&dn);
    return st;
}

FxStatus fold_affine_before(Node *layer, Node *pre, Node *x, const FoldAffine *a, bool *folded,
                            Diag *d)
{
    *folded = false;
    if (layer->num_args < 1 || layer->args[0] != pre || node_fusable_user(pre) != layer ||
        !fold_is_f32(pre) || !fold_is_f32(x) ||
        !type_equal(&pre->out_types[0], &x->out_types[0]))
        return FX_OK;
    for (int i = 1; i < layer->num_args; i++)
        if (layer->args[i] == pre)
            return FX_OK;
    bool ok;
    ConvLayer cv;
    FxStatus st = conv_read(layer, &cv, &ok, d);
    if (st == FX_OK && ok) {
        st = conv_before(&cv, pre, x, a, folded, d);
        conv_free(&cv);
        return st;
    }
    FoldDense dn = {0};
    if (st == FX_OK)
        st = fold_dense_read(layer, &dn, &ok, d);
    if (st == FX_OK && ok)
        st = dense_before(&dn, pre, x, a, folded, d);
    fold_dense_free(&dn);
    return st;
}

/* The BN as an affine map over its input, scale and shift shaped
 * [1, C, 1, ...] so that they broadcast along axis 1 only; *ok = false when
 * n is not a foldable BN. */
FxStatus fold_bn_affine(const Node *n, FoldAffine *a, bool *ok, Diag *d)
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
