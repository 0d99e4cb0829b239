/*
 * pass_qconv_nhwc.c - passes the activations between consecutive 8-bit
 * convolutions in NHWC, so that each QConvPacked stops transposing its
 * input from NCHW and its output back (runtime/fxrt_nn_qconv.c: x_nhwc,
 * y_nhwc):
 *
 *     a = QConvPacked(x, pa)              a = QConvPacked(x, pa; y_nhwc=1)    [N, H, W, C]
 *     b = QConvPacked(a, pb)        ->    b = QConvPacked(a, pb; x_nhwc=1, y_nhwc=1)
 *     c = QLinearAdd(b, .., a, ..)        c = QLinearAdd(b, .., a, ..)        [N, H, W, C]
 *     d = QConvPacked(c, pd)              d = QConvPacked(c, pd; x_nhwc=1)    [N, M, OH, OW]
 *
 * The region is what a fixed point leaves of an optimistic start in which
 * every 2-D 8-bit QConvPacked and every QLinearAdd/QLinearMul of same-shape
 * rank-4 operands writes NHWC.  A node loses NHWC (for good; the walk only
 * ever removes, so it ends) when one of its readers cannot read NHWC, and
 * an elementwise node or a depthwise convolution (which keeps its layout
 * across, fxrt_qconv_nhwc_applies) also when one of its inputs is not
 * NHWC.  A group-1 convolution reads either layout, so it is where the
 * region starts and ends: the one transpose at each edge is the one the
 * kernel does today.  So does a global average pool (QLinearGlobalAveragePool,
 * or QLinearAveragePool with one window over the whole image, as DS-CNN
 * ends): given x_nhwc, it sums channels along the pixels, with the same
 * bytes as on NCHW and no transpose before it (runtime/fxrt_nn_pool.c).
 * Anything else (the graph's outputs, other pools, QGemm, reshapes) reads
 * NCHW.
 *
 * Only the layout flags and the shapes of values inside the region change;
 * the bytes of every value outside it are the same as before.
 */
#include <string.h>

#include "../ir/ops/ops.h"
#include "opt.h"

/* pass_data of a candidate: its output layout for now; of a pool that can
 * read NHWC, MARK_POOL. */
static char MARK_NCHW, MARK_NHWC, MARK_POOL;

static bool is_q8(DType t) { return t == FXRT_DTYPE_UINT8 || t == FXRT_DTYPE_INT8; }

static bool is_depthwise(const Node *n)
{
    int64_t group = node_attr_int(n, "group", 1);
    return group > 1 && group == node_attr_int(n, "in_channels", 0) &&
           group == node_attr_int(n, "out_channels", 0);
}

/* A 2-D QConvPacked with 8-bit output whose kernel takes NHWC. */
static bool conv_candidate(const Node *n)
{
    if (!node_is_op(n, &fx_op_QConvPacked) || !n->shapes_known || n->num_args < 1 ||
        !n->args[0] || n->args[0]->out_types[0].rank != 4 || !is_q8(n->out_types[0].dtype))
        return false;
    const int64_t *k;
    if (node_attr_ints(n, "kernel_shape", &k) != 2)
        return false;
    return !is_depthwise(n) || k[0] * k[1] <= 64; /* fxrt_qconv_nhwc_applies */
}

/* QLinearAdd/QLinearMul of two rank-4 operands of the output's shape:
 * elementwise, so indifferent to the layout when both share it. */
static bool binary_candidate(const Node *n)
{
    if ((!node_is_op(n, &fx_op_QLinearAdd) && !node_is_op(n, &fx_op_QLinearMul)) ||
        !n->shapes_known || n->num_args < 8 || !n->args[0] || !n->args[3])
        return false;
    const TensorType *y = &n->out_types[0];
    if (y->rank != 4)
        return false;
    for (int i = 0; i < 2; i++) {
        const TensorType *t = &n->args[3 * i]->out_types[0];
        if (t->rank != 4)
            return false;
        for (int d = 0; d < 4; d++)
            if (t->dims[d] != y->dims[d])
                return false;
    }
    return true;
}

static bool nhwc(const Node *n) { return n && n->pass_data == &MARK_NHWC; }

/* A pool over the whole image of a rank-4 8-bit X, which can read X in
 * NHWC (x_nhwc, ir/ops/quant.c). */
static bool whole_image_pool(const Node *n)
{
    bool global = node_is_op(n, &fx_op_QLinearGlobalAveragePool);
    if ((!global && !node_is_op(n, &fx_op_QLinearAveragePool)) || !n->shapes_known ||
        n->num_args < 1 || !n->args[0] || node_attr_int(n, "channels_last", 0) != 0)
        return false;
    const TensorType *x = &n->args[0]->out_types[0], *y = &n->out_types[0];
    if (x->rank != 4 || !is_q8(x->dtype) || y->rank != 4 || y->dims[2] != 1 || y->dims[3] != 1)
        return false;
    if (global)
        return true;
    const int64_t *k, *v;
    if (node_attr_ints(n, "kernel_shape", &k) != 2 || k[0] != x->dims[2] || k[1] != x->dims[3])
        return false;
    int count = node_attr_ints(n, "pads", &v);
    for (int i = 0; i < count; i++)
        if (v[i] != 0)
            return false;
    count = node_attr_ints(n, "dilations", &v);
    for (int i = 0; i < count; i++)
        if (v[i] != 1)
            return false;
    const char *auto_pad = node_attr_string(n, "auto_pad", "NOTSET");
    return strcmp(auto_pad, "NOTSET") == 0 || strcmp(auto_pad, "VALID") == 0;
}

/* Whether user u can read v (an NHWC candidate's output) in NHWC. */
static bool reads_nhwc(const Node *u, const Node *v)
{
    if (u->pass_data == &MARK_POOL)
        return u->args[0] == v;
    if (u->pass_data == NULL)
        return false;
    if (node_is_op(u, &fx_op_QConvPacked)) /* group 1: either; depthwise: as it writes */
        return u->args[0] == v && (!is_depthwise(u) || nhwc(u));
    return nhwc(u); /* elementwise: only if it stays NHWC */
}

/* Whether candidate n keeps NHWC output with the current marks. */
static bool keeps_nhwc(const Node *n)
{
    bool conv = node_is_op(n, &fx_op_QConvPacked);
    if (conv && is_depthwise(n) && !nhwc(n->args[0]))
        return false;
    if (!conv && (!nhwc(n->args[0]) || !nhwc(n->args[3])))
        return false;
    for (int i = 0; i < n->num_users; i++)
        if (!reads_nhwc(n->users[i], n))
            return false;
    return true;
}

FxStatus pass_qconv_nhwc(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    graph_for_each(g, n) n->pass_data = conv_candidate(n) || binary_candidate(n) ? &MARK_NHWC
                                        : whole_image_pool(n)                    ? &MARK_POOL
                                                                                 : NULL;
    for (bool changed = true; changed;) {
        changed = false;
        graph_for_each(g, n) if (nhwc(n) && !keeps_nhwc(n))
        {
            n->pass_data = &MARK_NCHW;
            changed = true;
        }
    }
    FxStatus st = FX_OK;
    graph_for_each(g, n)
    {
        if (st == FX_OK && node_is_op(n, &fx_op_QConvPacked) && n->pass_data) {
            int x_nhwc = nhwc(n->args[0]), y_nhwc = nhwc(n);
            if (x_nhwc || y_nhwc) {
                if (!node_set_attr_int(n, "x_nhwc", x_nhwc) ||
                    !node_set_attr_int(n, "y_nhwc", y_nhwc))
                    st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
                r->changes++;
            }
        }
        if (st == FX_OK && n->pass_data == &MARK_POOL && nhwc(n->args[0])) {
            if (!node_set_attr_int(n, "x_nhwc", 1))
                st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
            r->changes++;
        }
        /* in execution order, so every input is re-typed before its reader */
        if (st == FX_OK && n->pass_data && (nhwc(n) || nhwc(n->args[0])))
            st = node_infer_shapes(n, d);
    }
    graph_for_each(g, n) n->pass_data = NULL;
    return st;
}
