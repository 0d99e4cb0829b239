/*
 * check_opt_sparse.c - the sparse-weights pass: which layers it stores as
 * compressed rows by its rule (smaller always; on the host also below the
 * measured density thresholds: 0.15 for 1x1, 0.05 for kxk convolutions of
 * 14x14 outputs or more, the GEMV only from 1 MB of weights), which it leaves alone (dense weights,
 * grouped or dilated convolutions), that the epilogue comes along, that
 * it runs before nchwc-layout claims a layer at -O2, and that the
 * converted graph gives the dense graph's numbers in the interpreter
 * (tolerance 1e-5 relative) and compiled for both targets.
 */
#include <string.h>

#include "opt_check_util.h"

/* float32 weights of the given dims, (i % 13 - 6) / 16 where i % every
 * == 0, else zero: a density of about 1 / every. */
static Node *weights_every(Graph *g, const char *name, int rank, const int64_t *dims, int every)
{
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = rank};
    for (int i = 0; i < rank; i++)
        t.dims[i] = dims[i];
    Tensor *w = tensor_new(&t, &tu_diag);
    ck_assert_ptr_nonnull(w);
    float *v = w->data;
    for (int64_t i = 0; i < tensor_numel(w); i++)
        v[i] = i % every == 0 ? (float)(i % 13 - 6 + 13 * (i % 13 == 6)) / 16.0f : 0.0f;
    return tu_constant(g, name, w);
}

static Node *conv_weights(Graph *g, const char *name, int64_t out, int64_t in, int64_t k,
                          int every)
{
    const int64_t dims[4] = {out, in, k, k};
    return weights_every(g, name, 4, dims, every);
}

/* Five convolutions and a product on one input:
 *   c1: 1x1 32->32, density 1/20  -> sparse everywhere
 *   c3: 3x3 32->16, density 1/5   -> sparse on portable only (kxk host limit 0.05)
 *   c3s: 3x3 stride 2 (16x16 out), 1/25, bias + relu  -> sparse everywhere
 *   dense: 3x3 dense weights      -> never (not smaller)
 *   group: 3x3 group 2, 1/20      -> never (group 1 only)
 *   fc: Gemm 1 x 512 -> 16, 1/20  -> portable only (the GEMV's host floor is 1 MB) */
static Graph *build(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 32, 32, 32);
    Node *c1 = tu_conv(g, x, conv_weights(g, "w1", 32, 32, 1, 20), NULL, 0, 1, 1);
    Node *c3 = tu_conv(g, c1, conv_weights(g, "w3", 16, 32, 3, 5), NULL, 1, 1, 1);
    Node *c3s = tu_conv(g, c3, conv_weights(g, "w3s", 16, 16, 3, 25),
                        tu_weights_f32(g, "b3s", 1, 16, 0, 0, 0, 0.1f), 1, 2, 1);
    c3s = tu_op3(g, "Relu", c3s, NULL, NULL);
    Node *dense = tu_conv(g, x, tu_weights_f32(g, "wd", 4, 8, 32, 3, 3, 0.05f), NULL, 1, 1, 1);
    Node *group = tu_conv(g, x, conv_weights(g, "wg", 8, 16, 3, 20), NULL, 1, 1, 2);
    Node *flat = tu_op3(g, "Flatten", c3s, NULL, NULL);
    const int64_t fc_dims[2] = {16 * 16 * 16, 16};
    Node *fc = tu_op3(g, "Gemm", flat, weights_every(g, "wfc", 2, fc_dims, 20),
                      tu_weights_f32(g, "bfc", 1, 16, 0, 0, 0, 0.1f));
    Node *outs[4] = {fc, dense, group, c3};
    tu_finish(g, outs, 4);
    return g;
}

static int sparse_layers(const Graph *g)
{
    return tu_count_op(g, "SparseConv") + tu_count_op(g, "SparseGemm");
}

START_TEST(test_host_rule)
{
    Graph *g = build(), *ref = build();
    ck_assert_int_eq(tu_run_pass(g, pass_sparse_weights, 1e-5, 1e-6), 2);
    ck_assert_int_eq(tu_count_op(g, "SparseConv"), 2);
    ck_assert_int_eq(tu_count_op(g, "SparseGemm"), 0);
    ck_assert_int_eq(tu_count_op(g, "Conv"), 3);
    /* the 1x1 and the stride-2 3x3 went sparse, by name */
    int named = 0;
    graph_for_each(g, n) if (n->op == &fx_op_SparseConv)
    {
        const int64_t *kernel;
        ck_assert_int_eq(node_attr_ints(n, "kernel_shape", &kernel), 2);
        named += kernel[0] == 1 || (kernel[0] == 3 && n->num_args == 5);
    }
    ck_assert_int_eq(named, 2);
    tu_assert_compiled_matches(g, ref, "sparse_host", 1e-4, 1e-5);
    graph_free(g);
    graph_free(ref);
}
END_TEST

START_TEST(test_portable_rule)
{
    Graph *g = build(), *ref = build();
    ck_assert_int_eq(tu_run_pass(g, pass_sparse_weights_portable, 1e-5, 1e-6), 4);
    ck_assert_int_eq(tu_count_op(g, "SparseConv"), 3);
    ck_assert_int_eq(tu_count_op(g, "SparseGemm"), 1);
    ck_assert_int_eq(tu_count_op(g, "Conv"), 2); /* dense and grouped stay */
    /* The weights shrank: the dense ones are gone, the rows are smaller. */
    int64_t bytes = 0;
    graph_for_each(g, n) if (n->opcode == FX_OPCODE_GET_ATTR && n->num_users > 0)
        bytes += tensor_numel(node_const_value(n)) *
                 (int64_t)fxrt_dtype_size(node_const_value(n)->type.dtype);
    int64_t before = 0;
    graph_for_each(ref, n) if (n->opcode == FX_OPCODE_GET_ATTR)
        before += tensor_numel(node_const_value(n)) * 4;
    ck_assert_int_lt(bytes, before / 2);
    tu_assert_compiled_matches(g, ref, "sparse_portable", 1e-4, 1e-5);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* A convolution pruned to nothing: one unused stored entry, output = bias. */
START_TEST(test_all_zero)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 2, 4, 5, 7);
    const int64_t dims[4] = {6, 4, 3, 3};
    Node *y = tu_conv(g, x, weights_every(g, "w", 4, dims, 1 << 30),
                      tu_weights_f32(g, "b", 1, 6, 0, 0, 0, 0.25f), 1, 1, 1);
    /* weights_every keeps index 0 whatever `every` is: zero it too */
    Tensor *w = (Tensor *)node_const_value(y->args[1]);
    ((float *)w->data)[0] = 0.0f;
    tu_finish(g, &y, 1);
    /* portable: on the host a 5x7 output is too small for the sparse kernel */
    ck_assert_int_eq(tu_run_pass(g, pass_sparse_weights, 1e-6, 1e-7), 0);
    ck_assert_int_eq(tu_run_pass(g, pass_sparse_weights_portable, 1e-6, 1e-7), 1);
    graph_for_each(g, n) if (n->op == &fx_op_SparseConv)
        ck_assert_int_eq(type_numel(node_input_type(n, 3)), 1);
    tu_assert_compiled_matches(g, NULL, "sparse_zero", 1e-5, 1e-6);
    graph_free(g);
}
END_TEST

/* At -O2 the pass sees the fused layer (bias, relu) before nchwc-layout
 * would make it a ConvNCHWc. */
START_TEST(test_before_layout)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 16, 16, 16);
    Node *y = tu_conv(g, x, conv_weights(g, "w", 32, 16, 1, 10),
                      tu_weights_f32(g, "b", 1, 32, 0, 0, 0, 0.1f), 0, 1, 1);
    y = tu_op3(g, "Relu", y, NULL, NULL);
    y = tu_conv(g, y, conv_weights(g, "w2", 16, 32, 3, 2), NULL, 1, 1, 1); /* dense enough */
    tu_finish(g, &y, 1);
    Graph *ref = graph_clone(g, &tu_diag);
    ck_assert_ptr_nonnull(ref);
    PassOptions po = {.check = true};
    ck_assert_int_eq(opt_run_level(g, 2, &po, &tu_diag), FX_OK);
    ck_assert_int_eq(tu_count_op(g, "SparseConv"), 1);
    ck_assert_int_eq(tu_count_op(g, "Relu"), 0);
    ck_assert_int_eq(sparse_layers(g), 1);
    graph_for_each(g, n) if (n->op == &fx_op_SparseConv)
        ck_assert_str_eq(node_attr_string(n, "activation", "none"), "relu");
    tu_assert_compiled_matches(g, ref, "sparse_o2", 1e-4, 1e-5);
    graph_free(g);
    graph_free(ref);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_sparse");
    TCase *t = tcase_create("sparse_weights");
    tcase_set_timeout(t, 300);
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_add_test(t, test_host_rule);
    tcase_add_test(t, test_portable_rule);
    tcase_add_test(t, test_all_zero);
    tcase_add_test(t, test_before_layout);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
