/*
 * nn_einsum.c - ONNX Einsum.
 *
 * The equation is parsed into labels: letters (A-Z before a-z, numpy's
 * implicit-output order) and, for "...", one label per broadcast axis,
 * right-aligned across operands.  Without "->" the output is the ellipsis
 * axes followed by the letters used exactly once, sorted.  Every form then
 * becomes an FxrtEinsumParams: output labels first, summed labels after,
 * per-operand strides (summed for a repeated label: a diagonal; 0 where an
 * operand broadcasts a size-1 axis).
 *
 * float32 with two operands, no diagonals, no broadcasting and no label
 * that only one operand has and the output lacks - the batched matrix
 * products of attention ("bhqd,bhkd->bhqk", "bij,bjk->bik", "ij,jk->ik",
 * "i,i->") - runs as GEMMs: the labels split into batch, M, N and K groups,
 * an operand already laid out as [batch, M, K] / [batch, K, M] (or the B
 * equivalents) is used in place with the right transpose flag, others are
 * packed first, and an output in another order is permuted at the end.
 * Everything else runs through fxrt_einsum_f32 / fxrt_einsum_generic.
 * The emitter makes the same choice at compile time; its packing copies are
 * one-operand contractions (fxrt_einsum_f32) into scratch.
 *
 * Refused with FX_ERR_UNSUPPORTED: more than FXRT_EINSUM_MAX_OPERANDS
 * operands or FXRT_EINSUM_MAX_LETTERS distinct labels, float16.  Malformed
 * equations, ranks that do not match their terms and sizes that disagree
 * are FX_ERR_INVALID / FX_ERR_SHAPE.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

enum {
    LABEL_LETTERS = 52, /* A-Z = 0..25, a-z = 26..51 */
    LABEL_COUNT = LABEL_LETTERS + FX_MAX_RANK,
    MAX_OPS = FXRT_EINSUM_MAX_OPERANDS
};

/* A parsed equation bound to operand shapes. */
typedef struct Einsum {
    int num_ops;
    int rank[MAX_OPS];
    int labels[MAX_OPS][FX_MAX_RANK]; /* label of each axis */
    int out_rank;
    int out_labels[FX_MAX_RANK];
    int64_t size[LABEL_COUNT]; /* per label; -1 unused */
    FxrtEinsumParams p;
    int pos[LABEL_COUNT]; /* label -> index in p (-1 unused) */
    TensorType out;
} Einsum;

static int letter_label(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return 26 + ch - 'a';
    return -1;
}

static char label_char(int l)
{
    return l < 26 ? (char)('A' + l) : l < LABEL_LETTERS ? (char)('a' + l - 26) : '.';
}

/* Parses one term ("b...ij") into letters with the ellipsis position. */
static FxStatus parse_term(const Node *n, Diag *d, const char *s, size_t len, int *letters,
                           int *count, int *ellipsis_at)
{
    *count = 0;
    *ellipsis_at = -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ')
            continue;
        if (s[i] == '.') {
            if (i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.' || *ellipsis_at >= 0)
                return diag_node_error(d, FX_ERR_INVALID, n,
                                       "equation: a lone '.' or a second '...' in a term");
            *ellipsis_at = *count;
            i += 2;
            continue;
        }
        int l = letter_label(s[i]);
        if (l < 0)
            return diag_node_error(d, FX_ERR_INVALID, n, "equation: unexpected character '%c'",
                                   s[i]);
        if (*count == FX_MAX_RANK)
            return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                                   "equation: a term has more than %d axes", FX_MAX_RANK);
        letters[(*count)++] = l;
    }
    return FX_OK;
}

/* Binds the equation to the operand types in e (num_ops, rank set by the
 * caller from the inputs' types). */
static FxStatus einsum_parse(const Node *n, Diag *d, const TensorType *const *in, int num_ops,
                             Einsum *e)
{
    const char *eq = node_attr_string(n, "equation", "");
    memset(e, 0, sizeof *e);
    if (num_ops > MAX_OPS)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                               "Einsum with %d operands is not supported (at most %d)", num_ops,
                               MAX_OPS);
    e->num_ops = num_ops;
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
    int ell_rank = 0, ell_of[MAX_OPS];
    const char *term = eq;
    int letters[FX_MAX_RANK], count, at;
    FxStatus st;
    for (int k = 0; k < num_ops; k++) {
        const char *end = memchr(term, ',', lhs_len - (size_t)(term - eq));
        size_t len = end ? (size_t)(end - term) : lhs_len - (size_t)(term - eq);
        if (k < num_ops - 1 && !end)
            return diag_node_error(d, FX_ERR_INVALID, n,
                                   "equation '%s' has fewer terms than the %d inputs", eq,
                                   num_ops);
        if (k == num_ops - 1 && end)
            return diag_node_error(d, FX_ERR_INVALID, n,
                                   "equation '%s' has more terms than the %d inputs", eq, num_ops);
        if ((st = parse_term(n, d, term, len, letters, &count, &at)) != FX_OK)
            return st;
        int rank = in[k]->rank;
        int ell = rank - count;
        if ((at < 0 && ell != 0) || ell < 0)
            return diag_node_error(d, FX_ERR_SHAPE, n,
                                   "term %d of '%s' has %d labels but input %d has rank %d", k, eq,
                                   count, k, rank);
        ell_of[k] = at >= 0 ? ell : 0;
        if (ell_of[k] > ell_rank)
            ell_rank = ell_of[k];
        /* expand: letters before "...", broadcast labels, letters after */
        int r = 0;
        for (int i = 0; i < count; i++) {
            if (i == at)
                for (int j = 0; j < ell; j++)
                    e->labels[k][r++] = -1 - j; /* fixed below, once ell_rank is known */
            e->labels[k][r++] = letters[i];
        }
        if (at == count)
            for (int j = 0; j < ell; j++)
                e->labels[k][r++] = -1 - j;
        e->rank[k] = rank;
        term = end ? end + 1 : term + len;
    }
    /* ellipsis axes are right-aligned: axis j of e_k gets label E - e_k + j */
    for (int k = 0; k < num_ops; k++)
        for (int i = 0; i < e->rank[k]; i++)
            if (e->labels[k][i] < 0)
                e->labels[k][i] = LABEL_LETTERS + ell_rank - ell_of[k] + (-1 - e->labels[k][i]);

    /* sizes: equal, or 1 broadcasting */
    int uses[LABEL_COUNT] = {0};
    for (int l = 0; l < LABEL_COUNT; l++)
        e->size[l] = -1;
    for (int k = 0; k < num_ops; k++)
        for (int i = 0; i < e->rank[k]; i++) {
            int l = e->labels[k][i];
            int64_t dim = in[k]->dims[i];
            uses[l]++;
            if (e->size[l] < 0 || e->size[l] == 1)
                e->size[l] = dim;
            else if (dim != e->size[l] && dim != 1)
                return diag_node_error(d, FX_ERR_SHAPE, n,
                                       "label '%c' has sizes %lld and %lld", label_char(l),
                                       (long long)e->size[l], (long long)dim);
        }

    /* output labels */
    if (arrow) {
        const char *rhs = arrow + 2;
        if ((st = parse_term(n, d, rhs, strlen(rhs), letters, &count, &at)) != FX_OK)
            return st;
        if (count + (at >= 0 ? ell_rank : 0) > FX_MAX_RANK)
            return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "the output has too many axes");
        for (int i = 0; i <= count; i++) {
            if (i == at)
                for (int j = 0; j < ell_rank; j++)
                    e->out_labels[e->out_rank++] = LABEL_LETTERS + j;
            if (i == count)
                break;
            int l = letters[i];
            if (!uses[l])
                return diag_node_error(d, FX_ERR_INVALID, n,
                                       "output label '%c' appears in no input", label_char(l));
            for (int j = 0; j < e->out_rank; j++)
                if (e->out_labels[j] == l)
                    return diag_node_error(d, FX_ERR_INVALID, n,
                                           "output label '%c' appears twice", label_char(l));
            e->out_labels[e->out_rank++] = l;
        }
    } else {
        for (int j = 0; j < ell_rank; j++)
            e->out_labels[e->out_rank++] = LABEL_LETTERS + j;
        for (int l = 0; l < LABEL_LETTERS; l++)
            if (uses[l] == 1) {
                if (e->out_rank == FX_MAX_RANK)
                    return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                                           "the output has too many axes");
                e->out_labels[e->out_rank++] = l;
            }
    }

    /* parameters: output labels, then the summed ones in label order */
    FxrtEinsumParams *p = &e->p;
    p->num_operands = num_ops;
    for (int l = 0; l < LABEL_COUNT; l++)
        e->pos[l] = -1;
    for (int i = 0; i < e->out_rank; i++) {
        e->pos[e->out_labels[i]] = p->num_letters;
        p->sizes[p->num_letters++] = e->size[e->out_labels[i]];
    }
    p->num_out = p->num_letters;
    for (int l = 0; l < LABEL_COUNT; l++) {
        if (!uses[l] || e->pos[l] >= 0)
            continue;
        if (p->num_letters == FXRT_EINSUM_MAX_LETTERS)
            return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                                   "Einsum with more than %d distinct labels is not supported",
                                   FXRT_EINSUM_MAX_LETTERS);
        e->pos[l] = p->num_letters;
        p->sizes[p->num_letters++] = e->size[l];
    }
    if (p->num_out > FXRT_EINSUM_MAX_LETTERS)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "too many output labels");
    /* The loop nest runs over every combination of labels: refuse forms
     * whose iteration count overflows or could not finish anyway. */
    uint64_t work = 1;
    for (int i = 0; i < p->num_letters; i++)
        if (!size_mul_ok(work, (uint64_t)p->sizes[i], &work) || work > ((uint64_t)1 << 40))
            return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                                   "the contraction '%s' iterates over more than 2^40 label "
                                   "combinations", eq);
    for (int k = 0; k < num_ops; k++) {
        int64_t stride = 1;
        for (int i = e->rank[k] - 1; i >= 0; i--) {
            int l = e->labels[k][i];
            if (!(in[k]->dims[i] == 1 && e->size[l] != 1))
                p->strides[k][e->pos[l]] += stride;
            stride *= in[k]->dims[i];
        }
    }
    e->out = (TensorType){.dtype = in[0]->dtype, .rank = e->out_rank};
    for (int i = 0; i < e->out_rank; i++)
        e->out.dims[i] = e->size[e->out_labels[i]];
    return FX_OK;
}

static FxStatus einsum_infer(InferCtx *c)
{
    const TensorType *t0 = c->in[0];
    for (int k = 0; k < c->num_inputs; k++) {
        const TensorType *t = c->in[k];
        if (!t)
            return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "input %d is missing", k);
        if (t->dtype != t0->dtype)
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node, "input %d is %s, input 0 %s",
                                   k, dtype_name(t->dtype), dtype_name(t0->dtype));
        if (t->dtype == FXRT_DTYPE_FLOAT16 || !dtype_is_supported(t->dtype))
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                                   "element type %s is not supported", dtype_name(t->dtype));
    }
    Einsum *e = fx_malloc(sizeof *e);
    if (!e)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    FxStatus st = einsum_parse(c->node, c->diag, c->in, c->num_inputs, e);
    if (st == FX_OK)
        c->out[0] = e->out;
    free(e);
    return st;
}

/* --- the GEMM path ------------------------------------------------------------ */

enum { G_BATCH, G_M, G_N, G_K, G_COUNT };

typedef struct GemmPlan {
    int group[G_COUNT][FX_MAX_RANK]; /* labels of each group, in order */
    int count[G_COUNT];
    int64_t size[G_COUNT];
} GemmPlan;

/* Sorts labels into batch/M/N/K, or returns false when the form is not a
 * plain batched product. */
static bool einsum_gemm_plan(const Einsum *e, GemmPlan *g)
{
    if (e->num_ops != 2)
        return false;
    int in_op[2][LABEL_COUNT] = {{0}};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < e->rank[k]; i++) {
            int l = e->labels[k][i];
            if (in_op[k][l]++)
                return false; /* a diagonal */
        }
    memset(g, 0, sizeof *g);
    for (int i = 0; i < G_COUNT; i++)
        g->size[i] = 1;
    /* broadcasting (a size-1 axis against a larger label) is not a GEMM */
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < e->rank[k]; i++)
            if (e->p.strides[k][e->pos[e->labels[k][i]]] == 0 && e->size[e->labels[k][i]] != 1)
                return false;
    bool in_out[LABEL_COUNT] = {false};
    for (int i = 0; i < e->out_rank; i++) {
        int l = e->out_labels[i];
        in_out[l] = true;
        int grp = in_op[0][l] && in_op[1][l] ? G_BATCH : in_op[0][l] ? G_M : G_N;
        g->group[grp][g->count[grp]++] = l;
        g->size[grp] *= e->size[l];
    }
    for (int i = 0; i < e->rank[0]; i++) {
        int l = e->labels[0][i];
        if (in_out[l])
            continue;
        if (!in_op[1][l])
            return false; /* summed over A alone */
        g->group[G_K][g->count[G_K]++] = l;
        g->size[G_K] *= e->size[l];
    }
    for (int i = 0; i < e->rank[1]; i++)
        if (!in_out[e->labels[1][i]] && !in_op[0][e->labels[1][i]])
            return false; /* summed over B alone */
    return true;
}

/* Does operand k's axis order equal the concatenation of groups g0, g1, g2? */
static bool layout_is(const Einsum *e, int k, const GemmPlan *g, int g0, int g1, int g2)
{
    int order[3] = {g0, g1, g2}, r = 0;
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < g->count[order[j]]; i++) {
            if (r >= e->rank[k] || e->labels[k][r] != g->group[order[j]][i])
                return false;
            r++;
        }
    return r == e->rank[k];
}

/* dst (contiguous, axes `labels`) = src read through strides `strides`
 * indexed by label position. */
static void gather_f32(const Einsum *e, const int64_t *strides, const int *labels, int rank,
                       const float *src, float *dst)
{
    int64_t idx[3 * FX_MAX_RANK] = {0}, off = 0, total = 1;
    for (int i = 0; i < rank; i++)
        total *= e->size[labels[i]];
    for (int64_t q = 0; q < total; q++) {
        dst[q] = src[off];
        for (int i = rank - 1; i >= 0; i--) {
            int l = labels[i];
            int64_t s = strides[e->pos[l]];
            off += s;
            if (++idx[i] < e->size[l])
                break;
            off -= s * e->size[l];
            idx[i] = 0;
        }
    }
}

/* Labels of groups g0, g1, g2 concatenated. */
static int concat_groups(const GemmPlan *g, int g0, int g1, int g2, int *out)
{
    int order[3] = {g0, g1, g2}, r = 0;
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < g->count[order[j]]; i++)
            out[r++] = g->group[order[j]][i];
    return r;
}

static FxStatus einsum_gemm_eval(EvalCtx *c, const Einsum *e, const GemmPlan *g)
{
    const float *a = c->in[0]->data, *b = c->in[1]->data;
    float *y = c->out[0]->data;
    int64_t bs = g->size[G_BATCH], m = g->size[G_M], n = g->size[G_N], k = g->size[G_K];
    int ta = 0, tb = 0;
    float *pa = NULL, *pb = NULL, *py = NULL;
    int order[3 * FX_MAX_RANK];
    FxStatus st = FX_OK;
    if (!layout_is(e, 0, g, G_BATCH, G_M, G_K)) {
        ta = layout_is(e, 0, g, G_BATCH, G_K, G_M);
        if (!ta) {
            int r = concat_groups(g, G_BATCH, G_M, G_K, order);
            if ((pa = fx_alloc_array((size_t)(bs * m * k + 1), sizeof *pa)))
                gather_f32(e, e->p.strides[0], order, r, a, pa);
            a = pa;
        }
    }
    if (!layout_is(e, 1, g, G_BATCH, G_K, G_N)) {
        tb = layout_is(e, 1, g, G_BATCH, G_N, G_K);
        if (!tb) {
            int r = concat_groups(g, G_BATCH, G_K, G_N, order);
            if ((pb = fx_alloc_array((size_t)(bs * k * n + 1), sizeof *pb)))
                gather_f32(e, e->p.strides[1], order, r, b, pb);
            b = pb;
        }
    }
    int direct_order[3 * FX_MAX_RANK];
    int nd = concat_groups(g, G_BATCH, G_M, G_N, direct_order);
    bool out_direct = nd == e->out_rank &&
                      memcmp(direct_order, e->out_labels, (size_t)nd * sizeof(int)) == 0;
    if (!out_direct && !(py = fx_alloc_array((size_t)(bs * m * n + 1), sizeof *py)))
        st = FX_ERR_NOMEM;
    if (!a || !b)
        st = FX_ERR_NOMEM;
    if (st == FX_OK) {
        float *dst = out_direct ? y : py;
        for (int64_t i = 0; i < bs; i++)
            fxrt_gemm_f32(ta, tb, m, n, k, 1.0f, a + i * m * k, ta ? m : k, b + i * k * n,
                          tb ? k : n, 0.0f, dst + i * m * n, n);
        if (!out_direct) {
            /* y (axes out_labels) reads py (axes direct_order, row-major) */
            int64_t strides[FXRT_EINSUM_MAX_LETTERS] = {0}, s = 1;
            for (int i = nd - 1; i >= 0; i--) {
                strides[e->pos[direct_order[i]]] = s;
                s *= e->size[direct_order[i]];
            }
            gather_f32(e, strides, e->out_labels, e->out_rank, py, y);
        }
    }
    free(pa);
    free(pb);
    free(py);
    if (st != FX_OK)
        return diag_node_error(c->diag, st, c->node, "out of memory");
    return FX_OK;
}

static FxStatus einsum_eval(EvalCtx *c)
{
    const TensorType *types[MAX_OPS];
    if (c->num_inputs > MAX_OPS)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node, "too many operands");
    for (int k = 0; k < c->num_inputs; k++)
        types[k] = &c->in[k]->type;
    Einsum *e = fx_malloc(sizeof *e);
    if (!e)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    FxStatus st = einsum_parse(c->node, c->diag, types, c->num_inputs, e);
    GemmPlan g;
    DType t = c->in[0]->type.dtype;
    if (st == FX_OK && tensor_numel(c->out[0]) > 0) {
        const void *ops[MAX_OPS];
        for (int k = 0; k < c->num_inputs; k++)
            ops[k] = c->in[k]->data;
        if (t == FXRT_DTYPE_FLOAT32 && einsum_gemm_plan(e, &g))
            st = einsum_gemm_eval(c, e, &g);
        else if (t == FXRT_DTYPE_FLOAT32)
            fxrt_einsum_f32(&e->p, (const float *const *)ops, c->out[0]->data);
        else
            fxrt_einsum_generic(t, &e->p, ops, c->out[0]->data);
    }
    free(e);
    return st;
}


/* --- code generation ----------------------------------------------------------- */

/* What the GEMM path of a float32 Einsum needs, decided once for the
 * emitter and its scratch size exactly as einsum_gemm_eval decides: which
 * operands are packed first, the transpose flags, whether the product lands
 * in the output directly, and the scratch offsets of the packed copies. */
typedef struct EinsumGemmLayout {
    int ta, tb;
    bool pack_a, pack_b, out_direct;
    size_t off_a, off_b, off_y, total;
} EinsumGemmLayout;

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static void einsum_gemm_layout(const Einsum *e, const GemmPlan *g, EinsumGemmLayout *l)
{
    int64_t bs = g->size[G_BATCH], m = g->size[G_M], n = g->size[G_N], k = g->size[G_K];
    memset(l, 0, sizeof *l);
    if (!layout_is(e, 0, g, G_BATCH, G_M, G_K)) {
        l->ta = layout_is(e, 0, g, G_BATCH, G_K, G_M);
        l->pack_a = !l->ta;
    }
    if (!layout_is(e, 1, g, G_BATCH, G_K, G_N)) {
        l->tb = layout_is(e, 1, g, G_BATCH, G_N, G_K);
        l->pack_b = !l->tb;
    }
    int order[3 * FX_MAX_RANK];
    int nd = concat_groups(g, G_BATCH, G_M, G_N, order);
    l->out_direct = nd == e->out_rank && memcmp(order, e->out_labels, (size_t)nd * sizeof(int)) == 0;
    size_t off = 0;
    l->off_a = off;
    if (l->pack_a)
        off += align64((size_t)(bs * m * k) * sizeof(float));
    l->off_b = off;
    if (l->pack_b)
        off += align64((size_t)(bs * k * n) * sizeof(float));
    l->off_y = off;
    if (!l->out_direct)
        off += align64((size_t)(bs * m * n) * sizeof(float));
    l->total = off;
}

/* Parses node n's equation against its input types into *e (malloc'd). */
static Einsum *einsum_parse_node(const Node *n, Diag *d, FxStatus *st)
{
    const TensorType *types[MAX_OPS];
    if (n->num_args > MAX_OPS) {
        *st = diag_node_error(d, FX_ERR_UNSUPPORTED, n, "too many operands");
        return NULL;
    }
    for (int k = 0; k < n->num_args; k++)
        types[k] = node_input_type(n, k);
    Einsum *e = fx_malloc(sizeof *e);
    if (!e) {
        *st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        return NULL;
    }
    *st = einsum_parse(n, d, types, n->num_args, e);
    if (*st != FX_OK) {
        free(e);
        return NULL;
    }
    return e;
}

static bool einsum_uses_gemm(const Node *n, const Einsum *e, GemmPlan *g)
{
    return n->out_types[0].dtype == FXRT_DTYPE_FLOAT32 && type_numel(&n->out_types[0]) > 0 &&
           einsum_gemm_plan(e, g);
}

static size_t einsum_scratch(const Node *n)
{
    Diag d;
    diag_init(&d);
    FxStatus st;
    Einsum *e = einsum_parse_node(n, &d, &st);
    diag_free(&d);
    size_t bytes = 0;
    GemmPlan g;
    EinsumGemmLayout l;
    if (e && einsum_uses_gemm(n, e, &g)) {
        einsum_gemm_layout(e, &g, &l);
        bytes = l.total;
    }
    free(e);
    return bytes;
}

static void emit_einsum_params(EmitCtx *c, const char *name, const FxrtEinsumParams *p)
{
    char buf[FXRT_EINSUM_MAX_LETTERS * 24 + 8];
    emit_line(c, "static const FxrtEinsumParams %s = {", name);
    emit_line(c, "    .num_operands = %d, .num_out = %d, .num_letters = %d,", (int)p->num_operands,
            (int)p->num_out, (int)p->num_letters);
    for (int k = -1; k < p->num_operands; k++) {
        const int64_t *v = k < 0 ? p->sizes : p->strides[k];
        size_t len = 0;
        for (int i = 0; i < p->num_letters; i++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld", i ? ", " : "",
                                    (long long)v[i]);
        if (k < 0)
            emit_line(c, "    .sizes = {%s},", p->num_letters ? buf : "0");
        else
            emit_line(c, "    %s{%s}%s", k == 0 ? ".strides = {" : "            ",
                    p->num_letters ? buf : "0", k == p->num_operands - 1 ? "}};" : ",");
    }
}

/* A permuting copy as a one-operand contraction: dst (contiguous, axes
 * `labels`) reads src through `strides` (indexed by label position), the
 * same walk as gather_f32. */
static void emit_einsum_gather(EmitCtx *c, const char *name, const Einsum *e,
                               const int64_t *strides, const int *labels, int rank,
                               const char *src, const char *dst)
{
    FxrtEinsumParams g;
    memset(&g, 0, sizeof g);
    g.num_operands = 1;
    g.num_out = g.num_letters = rank;
    for (int i = 0; i < rank; i++) {
        g.sizes[i] = e->size[labels[i]];
        g.strides[0][i] = strides[e->pos[labels[i]]];
    }
    emit_einsum_params(c, name, &g);
    emit_line(c, "{");
    emit_line(c, "    const float *const src[1] = {%s};", src);
    emit_line(c, "    fxrt_einsum_f32(&%s, src, %s);", name, dst);
    emit_line(c, "}");
}

static void einsum_emit_gemm(EmitCtx *c, const Einsum *e, const GemmPlan *g)
{
    EinsumGemmLayout l;
    einsum_gemm_layout(e, g, &l);
    long long bs = (long long)g->size[G_BATCH], m = (long long)g->size[G_M];
    long long n = (long long)g->size[G_N], k = (long long)g->size[G_K];
    const char *a = c->in[0], *b = c->in[1], *y = c->out[0];
    int order[3 * FX_MAX_RANK];
    if (l.total > 0)
        emit_line(c, "unsigned char *const s = (unsigned char *)(%s);", c->scratch);
    if (l.pack_a) {
        emit_line(c, "float *const pa = (float *)(s + %zu);", l.off_a);
        int r = concat_groups(g, G_BATCH, G_M, G_K, order);
        emit_einsum_gather(c, "ga", e, e->p.strides[0], order, r, a, "pa");
        a = "pa";
    }
    if (l.pack_b) {
        emit_line(c, "float *const pb = (float *)(s + %zu);", l.off_b);
        int r = concat_groups(g, G_BATCH, G_K, G_N, order);
        emit_einsum_gather(c, "gb", e, e->p.strides[1], order, r, b, "pb");
        b = "pb";
    }
    const char *dst = y;
    if (!l.out_direct) {
        emit_line(c, "float *const py = (float *)(s + %zu);", l.off_y);
        dst = "py";
    }
    long long lda = l.ta ? m : k, ldb = l.tb ? k : n;
    if (bs == 1) {
        emit_line(
                c,
                "fxrt_gemm_f32(/*trans_a=*/%d, /*trans_b=*/%d, /*m=*/%lld, /*n=*/%lld, /*k=*/%lld, "
                "/*alpha=*/1.0f, %s, /*lda=*/%lld, %s, /*ldb=*/%lld, /*beta=*/0.0f, %s, "
                "/*ldc=*/%lld);",
                l.ta, l.tb, m, n, k, a, lda, b, ldb, dst, n);
    } else {
        emit_line(c, "int64_t i;");
        emit_line(c, "for (i = 0; i < %lld; i++)", bs);
        emit_line(c,
                  "    fxrt_gemm_f32(/*trans_a=*/%d, /*trans_b=*/%d, /*m=*/%lld, /*n=*/%lld, "
                  "/*k=*/%lld,",
                  l.ta, l.tb, m, n, k);
        emit_line(c,
                  "                  /*alpha=*/1.0f, (%s) + i * %lld, /*lda=*/%lld, "
                  "(%s) + i * %lld, /*ldb=*/%lld,",
                  a, m * k, lda, b, k * n, ldb);
        emit_line(c, "                  /*beta=*/0.0f, (%s) + i * %lld, /*ldc=*/%lld);", dst, m * n,
                  n);
    }
    if (!l.out_direct) {
        /* the product's axes are in batch, M, N order; permute into the output's */
        int direct[3 * FX_MAX_RANK];
        int nd = concat_groups(g, G_BATCH, G_M, G_N, direct);
        int64_t strides[FXRT_EINSUM_MAX_LETTERS] = {0}, st = 1;
        for (int i = nd - 1; i >= 0; i--) {
            strides[e->pos[direct[i]]] = st;
            st *= e->size[direct[i]];
        }
        emit_einsum_gather(c, "gy", e, strides, e->out_labels, e->out_rank, "py", y);
    }
}

static FxStatus einsum_emit(EmitCtx *c)
{
    const Node *n = c->node;
    FxStatus st;
    Einsum *e = einsum_parse_node(n, c->diag, &st);
    if (!e)
        return st;
    GemmPlan g;
    DType t = n->out_types[0].dtype;
    if (type_numel(&n->out_types[0]) == 0) {
        /* nothing to compute */
    } else if (einsum_uses_gemm(n, e, &g)) {
        einsum_emit_gemm(c, e, &g);
    } else {
        char list[MAX_OPS * 64 + 16];
        size_t len = 0;
        for (int k = 0; k < e->num_ops; k++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", k ? ", " : "",
                                    c->in[k]);
        emit_einsum_params(c, "p", &e->p);
        if (t == FXRT_DTYPE_FLOAT32) {
            emit_line(c, "const float *const ops[%d] = {%s};", e->num_ops, list);
            emit_line(c, "fxrt_einsum_f32(&p, ops, %s);", c->out[0]);
        } else {
            emit_line(c, "const void *const ops[%d] = {%s};", e->num_ops, list);
            emit_line(c, "fxrt_einsum_generic(%s, &p, ops, %s);", c_dtype_enum(t), c->out[0]);
        }
    }
    free(e);
    return FX_OK;
}

static const AttrSpec einsum_attrs[] = {
    {"equation", FX_ATTR_STRING, NULL, true},
    {NULL},
};

const OpDef fx_op_Einsum = {
    .name = "Einsum",
    .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
    .attrs = einsum_attrs,
    .infer = einsum_infer,
    .eval = einsum_eval,
    .scratch_bytes = einsum_scratch,
    .emit = einsum_emit,
};
