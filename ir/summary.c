/*
 * summary.c - what `fxcc inspect` reports under the graph: nodes per op,
 * parameter count and bytes, and multiply-accumulates of the linear layers
 * (the figure that predicts run time for CNNs and transformers).
 */
#include <string.h>

#include "ir.h"

static int64_t prod(const int64_t *v, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= v[i];
    return p;
}

int64_t node_macs(const Node *n)
{
    if (!n->op || !n->shapes_known || n->num_args < 2 || !n->args[0] || !n->args[1])
        return 0;
    const TensorType *y = &n->out_types[0];
    const TensorType *a = node_input_type(n, 0), *w = node_input_type(n, 1);
    const char *op = n->op->name;
    if (strcmp(op, "Conv") == 0 || strcmp(op, "ConvInteger") == 0 ||
        strcmp(op, "FusedConv") == 0) {
        /* every output element sums C_in/groups * kernel products */
        return type_numel(y) * prod(w->dims, 1, w->rank);
    }
    if (strcmp(op, "ConvTranspose") == 0) {
        /* every input element scatters into C_out/groups * kernel outputs */
        return type_numel(a) * prod(w->dims, 1, w->rank);
    }
    if (strcmp(op, "ConvNCHWc") == 0 || strcmp(op, "ConvNCHWcWinograd") == 0) {
        /* the blocked shapes are padded to whole blocks: count real channels;
         * Winograd's are the direct convolution's, so that GFLOP/s compare
         * times */
        const int64_t *k;
        if (node_attr_ints(n, "kernel_shape", &k) != 2)
            return 0;
        int64_t out = node_attr_int(n, "out_channels", 0), group = node_attr_int(n, "group", 1);
        int64_t in = node_attr_int(n, "in_channels", 0) / (group > 0 ? group : 1);
        return y->dims[0] * out * y->dims[2] * y->dims[3] * in * k[0] * k[1];
    }
    if (strcmp(op, "SparseConv") == 0 || strcmp(op, "SparseGemm") == 0) {
        /* the dense layer's, as for Winograd: GFLOP/s then compare times */
        const int64_t *k;
        if (strcmp(op, "SparseGemm") == 0)
            return a->rank >= 1 ? type_numel(y) * a->dims[a->rank - 1] : 0;
        if (node_attr_ints(n, "kernel_shape", &k) != 2 || a->rank != 4)
            return 0;
        return type_numel(y) * a->dims[1] * k[0] * k[1];
    }
    if (strcmp(op, "Gemm") == 0 || (strcmp(op, "FusedGemm") == 0 && a->rank == 2)) {
        int64_t k = node_attr_int(n, "transA", 0) ? a->dims[0] : a->dims[1];
        return type_numel(y) * k;
    }
    if (strcmp(op, "Attention") == 0) {
        /* the two products: Lq x Lk scores of D terms, Lq x Dv outputs of Lk */
        const TensorType *v = node_input_type(n, 2);
        const int64_t *perm_v;
        int r = a->rank;
        if (r < 2 || !v || v->rank != r)
            return 0;
        /* Lk: V's rows, read through perm_v */
        int64_t axis = node_attr_ints(n, "perm_v", &perm_v) == r ? perm_v[r - 2] : r - 2;
        int64_t lk = axis >= 0 && axis < r ? v->dims[axis] : 0;
        int64_t dv = y->dims[r - 1];
        return dv > 0 ? type_numel(y) / dv * lk * (a->dims[r - 1] + dv) : 0;
    }
    if (strcmp(op, "TransposedMatMul") == 0) {
        /* A is read through perm_a: its last axis there is the reduction */
        const int64_t *perm;
        int64_t rank = node_attr_ints(n, "perm_a", &perm);
        int64_t axis = rank == a->rank && rank > 0 ? perm[rank - 1] : a->rank - 1;
        return axis >= 0 && axis < a->rank ? type_numel(y) * a->dims[axis] : 0;
    }
    if (strcmp(op, "MatMul") == 0 || strcmp(op, "MatMulInteger") == 0 ||
        strcmp(op, "FusedGemm") == 0 || strcmp(op, "GemmPacked") == 0) {
        int64_t k = a->rank >= 1 ? a->dims[a->rank - 1] : 1;
        return type_numel(y) * k;
    }
    return 0;
}

void graph_summarize(const Graph *g, GraphSummary *s)
{
    memset(s, 0, sizeof *s);
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        if (n->opcode == FX_OPCODE_GET_ATTR && n->value) {
            s->parameters += tensor_numel(n->value);
            s->parameter_bytes += (int64_t)tensor_nbytes(n->value);
        }
        /* getitem is plumbing; every other op, internal or not, is work */
        if (n->op && n->op != &fx_op_getitem)
            s->op_counts[op_kind(n->op)]++;
        s->macs += node_macs(n);
    }
}

void graph_print_summary(const Graph *g, FILE *out)
{
    GraphSummary s;
    graph_summarize(g, &s);
    int ops = 0;
    for (int k = 0; k < FX_OP_COUNT_; k++)
        ops += s.op_counts[k];
    fprintf(out, "\nsummary: %d nodes, %d ops, opset %d\n", g->num_nodes, ops, g->opset);
    /* op table order: fixed, so the report is deterministic */
    for (int k = 0; k < FX_OP_COUNT_; k++)
        if (s.op_counts[k])
            fprintf(out, "  %-24s %d\n", op_by_kind((OpKind)k)->name, s.op_counts[k]);
    fprintf(out, "parameters: %lld (%lld bytes)\n", (long long)s.parameters,
            (long long)s.parameter_bytes);
    fprintf(out, "MACs: %lld\n", (long long)s.macs);
}
