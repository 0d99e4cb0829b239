/*
 * pass_attention_fusion.c - scaled dot-product attention, as exporters
 * write it, into one Attention node (ir/ops/nn_attention.c), whose kernel
 * keeps each block of scores in cache from the first product to the second
 * instead of writing the whole Lq x Lk matrix three times.
 *
 * Matched, from each last-axis Softmax of a float32 value:
 *
 *   Softmax(S [+ mask])  ->  MatMul(., V) or TransposedMatMul(., V, perm_y)
 *   S = [Mul|Div by scalar constants](MatMul(Qs, Ks) or TransposedMatMul)
 *   Qs = [Mul|Div by scalar constants](Q)
 *   Ks = [Mul|Div by scalar constants, Transpose of the last two axes](K)
 *
 * The scalar factors on Q, K and the scores multiply into the op's scale
 * (torch scales Q and K^T by d^-1/4 each, others divide the scores by
 * sqrt(d)).  K comes as [..., Lk, D] when a Transpose of its last two axes
 * (or a TransposedMatMul's perm_b) made K^T, and is read as stored
 * (k_transposed) otherwise.  The mask is the other operand of an Add
 * between the scores and the Softmax that does not widen the scores' shape
 * (a constant or an input, anything broadcastable).  The permutations
 * through which layout-cleanup's TransposedMatMuls read the head split of
 * Q, K and V and write the head merge become the Attention's perm_q,
 * perm_k, perm_v and perm_y, as long as each keeps a stored last axis as
 * the rows' contiguous axis.  Q, K and V must have one rank (the batch dims then
 * broadcast as in MatMul) and every intermediate exactly one reader,
 * so that nothing else needs the scores or the probabilities.
 *
 * Left alone: a Softmax on another axis, a mask that widens the scores'
 * shape, a scale applied after the mask ((S + mask) * s: the op does not
 * scale its mask), products of operands of different ranks, and
 * TransposedMatMuls that permute a last axis away or read the
 * probabilities permuted (their factors
 * that are not scalar constants simply stay outside, as Q's or K's producer).
 *
 * -O2, after layout-cleanup (whose TransposedMatMul it reads) and before
 * epilogue-fusion (which would take the mask Add into the first product)
 * and elementwise-fusion (which would take the Softmax, its scale and its
 * mask into a FusedReduction).
 */
#include <stdio.h>
#include <string.h>

#include "opt.h"

typedef struct AttentionMatch {
    Node *q, *k, *v, *mask;
    int k_transposed; /* K as read is [..., D, Lk] */
    double scale;
    /* how the products read Q, K and V and write Y (count 0: as stored) */
    int64_t perm_q[FX_MAX_RANK], perm_k[FX_MAX_RANK], perm_v[FX_MAX_RANK], perm_y[FX_MAX_RANK];
    int64_t perm_q_count, perm_k_count, perm_v_count, perm_y_count;
} AttentionMatch;

/* v feeds only `reader` (and is no graph output). */
static bool only_read_by(const Node *v, const Node *reader)
{
    return v && node_fusable_user(v) == reader && v->num_outputs == 1 && v->shapes_known;
}

/* The float32 value of a one-element constant argument, or false. */
static bool scalar_constant(const Node *a, double *value)
{
    const Tensor *t = a ? node_const_value(a) : NULL;
    if (!t || t->type.dtype != FXRT_DTYPE_FLOAT32 || tensor_numel(t) != 1)
        return false;
    *value = ((const float *)t->data)[0];
    return true;
}

/* x = Mul(y, c), Mul(c, y) or Div(y, c) with c a scalar constant that
 * leaves y's type as it is: y, with the factor multiplied into *scale. */
static Node *peel_scale(Node *x, double *scale)
{
    if (!node_is_op(x, &fx_op_Mul) && !node_is_op(x, &fx_op_Div))
        return NULL;
    if (x->num_args != 2 || !x->args[0] || !x->args[1])
        return NULL;
    double c;
    int operand = -1;
    if (scalar_constant(x->args[1], &c))
        operand = 0;
    else if (node_is_op(x, &fx_op_Mul) && scalar_constant(x->args[0], &c))
        operand = 1;
    if (operand < 0 || !type_equal(node_input_type(x, operand), &x->out_types[0]))
        return NULL;
    if (node_is_op(x, &fx_op_Div)) {
        if (c == 0.0)
            return NULL;
        c = 1.0 / c;
    }
    *scale *= c;
    return x->args[operand];
}

/* Follows scalar factors, each read only by the next, down from the
 * operand x of *reader: returns the value they scale, *reader its reader
 * in the chain. */
static Node *strip_scales(Node *x, Node **reader, double *scale)
{
    while (only_read_by(x, *reader)) {
        Node *inner = peel_scale(x, scale);
        if (!inner)
            break;
        *reader = x;
        x = inner;
    }
    return x;
}

static bool swaps_last_two(const int64_t *perm, int64_t count, int rank)
{
    if (count != rank || rank < 2)
        return false;
    for (int i = 0; i < rank - 2; i++)
        if (perm[i] != i)
            return false;
    return perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
}

static bool is_identity(const int64_t *perm, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        if (perm[i] != i)
            return false;
    return true;
}

/* A TransposedMatMul permutation attribute that is absent or the identity. */
static bool plain_operand(const Node *mm, const char *attr)
{
    const int64_t *perm;
    int64_t count = node_attr_ints(mm, attr, &perm);
    return count <= 0 || is_identity(perm, count);
}

/* The K side: scalar factors and at most one Transpose of the last two
 * axes, from B of the first product down; k_transposed when none. */
static void match_keys(Node *b, Node *product, AttentionMatch *m)
{
    Node *reader = product, *x = b;
    bool swapped = false;
    for (;;) {
        x = strip_scales(x, &reader, &m->scale);
        if (swapped || !only_read_by(x, reader) || !node_is_op(x, &fx_op_Transpose))
            break;
        const int64_t *perm;
        int64_t count = node_attr_ints(x, "perm", &perm);
        if (!swaps_last_two(perm, count, x->out_types[0].rank))
            break;
        swapped = true;
        reader = x;
        x = x->args[0];
    }
    m->k = x;
    m->k_transposed = !swapped;
}

/* An operand permutation of a TransposedMatMul that keeps the stored last
 * axis last (rows read as contiguous runs), copied into perm; false when it
 * moves it. */
static bool row_perm(const Node *mm, const char *attr, int rank, int64_t *perm, int64_t *count)
{
    const int64_t *p;
    int64_t n = node_attr_ints(mm, attr, &p);
    *count = 0;
    if (n <= 0 || is_identity(p, n))
        return true;
    if (n != rank || p[rank - 1] != rank - 1)
        return false;
    memcpy(perm, p, (size_t)n * sizeof *p);
    *count = n;
    return true;
}

/* The first product S = Qs Ks^T behind the scores; false when s is not one.
 * A TransposedMatMul's perm_a becomes perm_q; its perm_b (B is K^T) becomes
 * perm_k with K read as stored when it keeps Lk last, or with the last two
 * axes swapped back when it puts D last. */
static bool match_scores(Node *s, AttentionMatch *m)
{
    int rank = s->out_types[0].rank;
    bool keys_permuted = false;
    if (node_is_op(s, &fx_op_TransposedMatMul)) {
        const int64_t *pb;
        int64_t nb = node_attr_ints(s, "perm_b", &pb);
        if (!plain_operand(s, "perm_y") ||
            !row_perm(s, "perm_a", rank, m->perm_q, &m->perm_q_count))
            return false;
        if (nb > 0 && !is_identity(pb, nb)) {
            if (nb != rank)
                return false;
            memcpy(m->perm_k, pb, (size_t)nb * sizeof *pb);
            m->perm_k_count = nb;
            if (pb[rank - 2] == rank - 1) {
                m->perm_k[rank - 2] = pb[rank - 1];
                m->perm_k[rank - 1] = pb[rank - 2];
                m->k_transposed = 0;
            } else if (pb[rank - 1] == rank - 1) {
                m->k_transposed = 1;
            } else {
                return false;
            }
            if (is_identity(m->perm_k, rank))
                m->perm_k_count = 0;
            keys_permuted = true;
        }
    } else if (!node_is_op(s, &fx_op_MatMul)) {
        return false;
    }
    if (s->num_args != 2 || !s->args[0] || !s->args[1] || s->args[0] == s->args[1])
        return false;
    Node *reader = s;
    m->q = strip_scales(s->args[0], &reader, &m->scale);
    if (keys_permuted) {
        reader = s;
        m->k = strip_scales(s->args[1], &reader, &m->scale);
    } else {
        match_keys(s->args[1], s, m);
    }
    return true;
}

static bool same_rank_f32(const Node *a, int rank)
{
    return a->shapes_known && a->out_types[0].dtype == FXRT_DTYPE_FLOAT32 &&
           a->out_types[0].rank == rank;
}

/* Everything between the Softmax sm and the second product; false when the
 * graph around sm is not attention. */
static bool match(Node *sm, AttentionMatch *m)
{
    memset(m, 0, sizeof *m);
    m->scale = 1.0;
    if (!node_is_op(sm, &fx_op_Softmax) || !sm->shapes_known || sm->num_args < 1)
        return false;
    const TensorType *t = &sm->out_types[0];
    int rank = t->rank;
    int64_t axis = node_attr_int(sm, "axis", -1);
    if (t->dtype != FXRT_DTYPE_FLOAT32 || rank < 2 || node_attr_int(sm, "coerce_2d", 0) ||
        (axis != -1 && axis != rank - 1))
        return false;

    Node *p2 = node_fusable_user(sm);
    if (!p2 || p2->num_args != 2 || p2->args[0] != sm || p2->args[1] == sm || !p2->args[1])
        return false;
    if (node_is_op(p2, &fx_op_TransposedMatMul)) {
        if (!plain_operand(p2, "perm_a") ||
            !row_perm(p2, "perm_b", rank, m->perm_v, &m->perm_v_count) ||
            !row_perm(p2, "perm_y", rank, m->perm_y, &m->perm_y_count))
            return false;
    } else if (!node_is_op(p2, &fx_op_MatMul)) {
        return false;
    }
    m->v = p2->args[1];

    Node *x = sm->args[0];
    if (!only_read_by(x, sm))
        return false;
    if (node_is_op(x, &fx_op_Add) && x->num_args == 2 && x->args[0] && x->args[1]) {
        /* the scores are the operand with the add's own type */
        for (int side = 0; side < 2 && !m->mask; side++) {
            Node *s = x->args[side], *mask = x->args[1 - side];
            if (only_read_by(s, x) && type_equal(&s->out_types[0], &x->out_types[0]) &&
                node_input_type(x, 1 - side)->rank <= rank &&
                node_input_type(x, 1 - side)->dtype == FXRT_DTYPE_FLOAT32) {
                AttentionMatch trial = *m;
                Node *reader = x, *scaled = strip_scales(s, &reader, &trial.scale);
                if (only_read_by(scaled, reader) && match_scores(scaled, &trial)) {
                    *m = trial;
                    m->mask = mask;
                }
            }
        }
        if (!m->mask)
            return false;
    } else {
        Node *reader = sm, *scaled = strip_scales(x, &reader, &m->scale);
        if (!only_read_by(scaled, reader) || !match_scores(scaled, m))
            return false;
    }
    if (m->mask == m->q || m->mask == m->k || m->mask == m->v)
        return false;
    return same_rank_f32(m->q, rank) && same_rank_f32(m->k, rank) && same_rank_f32(m->v, rank);
}

static FxStatus fuse(Graph *g, Node *sm, const AttentionMatch *m, PassResult *r, Diag *d)
{
    Node *p2 = node_fusable_user(sm);
    Node *args[4] = {m->q, m->k, m->v, m->mask};
    char hint[200];
    snprintf(hint, sizeof hint, "%s_attention", p2->name);
    Node *attn = graph_create_op(g, p2, &fx_op_Attention, hint, args, m->mask ? 4 : 3);
    if (!attn)
        return diag_node_error(d, FX_ERR_NOMEM, p2, "out of memory");
    bool ok = node_set_attr_float(attn, "scale", (float)m->scale) &&
              node_set_attr_int(attn, "k_transposed", m->k_transposed) &&
              (m->perm_q_count <= 0 ||
               node_set_attr_ints(attn, "perm_q", m->perm_q, m->perm_q_count)) &&
              (m->perm_k_count <= 0 ||
               node_set_attr_ints(attn, "perm_k", m->perm_k, m->perm_k_count)) &&
              (m->perm_v_count <= 0 ||
               node_set_attr_ints(attn, "perm_v", m->perm_v, m->perm_v_count)) &&
              (m->perm_y_count <= 0 ||
               node_set_attr_ints(attn, "perm_y", m->perm_y, m->perm_y_count));
    FxStatus st = node_finish_created(attn, ok, p2, d);
    if (st != FX_OK)
        return st;
    if (!type_equal(&attn->out_types[0], &p2->out_types[0])) {
        char a[128], b[128];
        return diag_node_error(d, FX_ERR_INVALID, p2,
                               "attention-fusion: the fused node's type %s differs from %s",
                               type_format(&attn->out_types[0], a, sizeof a),
                               type_format(&p2->out_types[0], b, sizeof b));
    }
    return pass_replace_node(p2, attn, r, d);
}

FxStatus pass_attention_fusion(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, n)
    {
        AttentionMatch m;
        if (!match(n, &m))
            continue;
        if ((st = fuse(g, n, &m, r, d)) != FX_OK)
            break;
    }
    return pass_finish(g, r, st);
}
