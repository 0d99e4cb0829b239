/*
 * check_opt_prune.c - channel and magnitude pruning on small graphs built
 * inline: the channel counts every weight, BatchNorm parameter, depthwise
 * group and Gemm input ends with through a residual Add (both producers in
 * one group), a Concat (each input's channels cut at its offset), a
 * depthwise Conv and a Flatten before a Gemm (H*W features per channel);
 * the pruned graph's outputs against the unpruned graph with the removed
 * channels' weights set to zero (equal when nothing downstream adds a
 * constant to them); fraction 0 leaving the outputs as they were; graph
 * outputs and ops the pass does not understand keeping their channels;
 * magnitude pruning's zero counts, per layer and global; and the ONNX
 * writer's refusal of a fused node.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "opt_check_util.h"

/* Scales output channel c (axis 0) of constant w by scale[c]. */
static void scale_channels(Node *w, const float *scale)
{
    Tensor *t = w->value;
    int64_t per = tensor_numel(t) / t->type.dims[0];
    for (int64_t c = 0; c < t->type.dims[0]; c++)
        for (int64_t i = 0; i < per; i++)
            ((float *)t->data)[c * per + i] *= scale[c];
}

static const TensorType *weight_type(const Node *layer, int slot)
{
    return &layer->args[slot]->out_types[0];
}

/* Gemm(a, w^T) (+ c): w is [N, K]. */
static Node *gemm_t(Graph *g, Node *a, Node *w, Node *c)
{
    Node *args[3] = {a, w, c};
    Node *y = graph_create_op(g, NULL, op_lookup("Gemm"), "Gemm", args, c ? 3 : 2);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(op_apply_attr_specs(y->op, y, &tu_diag), FX_OK);
    ck_assert(node_set_num_outputs(y, 1));
    ck_assert_ptr_nonnull(node_set_attr_int(y, "transB", 1));
    tu_reinfer(y);
    return y;
}

static Node *find(const Graph *g, const char *name)
{
    Node *n = graph_find(g, name);
    ck_assert_msg(n != NULL, "no node %s", name);
    return n;
}

/* stem Conv 4->8 -> BN -> Relu -> Conv 8->8, + shortcut Conv 4->8 (1x1),
 * Relu, GlobalAveragePool, Flatten, Gemm 8->5 (transB). */
static Graph *build_residual(void)
{
    Graph *g = graph_new();
    g->opset = 17;
    Node *x = tu_input_f32(g, "x", 4, 1, 4, 6, 6);
    Node *a = tu_conv(g, x, tu_weights_f32(g, "wa", 4, 8, 4, 3, 3, 0.1f),
                      tu_weights_f32(g, "ba", 1, 8, 0, 0, 0, 0.1f), 1, 1, 1);
    Node *bn_args[5] = {a, tu_weights_f32(g, "gamma", 1, 8, 0, 0, 0, 0.1f),
                        tu_weights_f32(g, "beta", 1, 8, 0, 0, 0, 0.1f),
                        tu_weights_f32(g, "mean", 1, 8, 0, 0, 0, 0.1f),
                        tu_weights_f32(g, "var", 1, 8, 0, 0, 0, 0.0f)};
    /* variance 1 + something non-negative */
    for (int i = 0; i < 8; i++)
        ((float *)bn_args[4]->value->data)[i] = 1.0f + 0.1f * (float)i;
    Node *bn = tu_op(g, "BatchNormalization", bn_args, 5);
    Node *r = tu_op3(g, "Relu", bn, NULL, NULL);
    Node *b = tu_conv(g, r, tu_weights_f32(g, "wb", 4, 8, 8, 3, 3, 0.1f), NULL, 1, 1, 1);
    Node *s = tu_conv(g, x, tu_weights_f32(g, "ws", 4, 8, 4, 1, 1, 0.1f), NULL, 0, 1, 1);
    Node *sum = tu_op3(g, "Relu", tu_op3(g, "Add", b, s, NULL), NULL, NULL);
    Node *flat = tu_op3(g, "Flatten", tu_op3(g, "GlobalAveragePool", sum, NULL, NULL), NULL,
                        NULL);
    Node *fc = gemm_t(g, flat, tu_weights_f32(g, "wf", 2, 5, 8, 0, 0, 0.1f),
                      tu_weights_f32(g, "bf", 1, 5, 0, 0, 0, 0.1f));
    tu_finish(g, &fc, 1);
    return g;
}

START_TEST(test_residual_bn_group)
{
    Graph *g = build_residual();
    PruneChannelsResult r;
    ck_assert_int_eq(pass_prune_channels(g, 0.5, &r, &tu_diag), FX_OK);
    ck_assert_int_eq(graph_lint(g, true, &tu_diag), FX_OK);
    /* groups: the stem (8 -> 4), conv b with the shortcut (8 -> 4), the
     * Gemm (a graph output: whole) */
    ck_assert_int_eq(r.num_groups, 3);
    ck_assert_int_eq(r.channels_before, 21);
    ck_assert_int_eq(r.channels_after, 13);
    ck_assert_ptr_nonnull(strstr(r.groups[1].layers, ", "));
    ck_assert_ptr_nonnull(r.groups[2].why_whole);
    Node *a = find(g, "Conv"), *b = find(g, "Conv_1"), *s = find(g, "Conv_2");
    Node *bn = find(g, "BatchNormalization"), *fc = find(g, "Gemm");
    ck_assert_int_eq(weight_type(a, 1)->dims[0], 4);
    ck_assert_int_eq(weight_type(a, 1)->dims[1], 4); /* the graph input keeps its 4 */
    ck_assert_int_eq(weight_type(a, 2)->dims[0], 4);
    for (int i = 1; i < 5; i++)
        ck_assert_int_eq(weight_type(bn, i)->dims[0], 4);
    ck_assert_int_eq(weight_type(b, 1)->dims[0], 4);
    ck_assert_int_eq(weight_type(b, 1)->dims[1], 4);
    ck_assert_int_eq(weight_type(s, 1)->dims[0], 4);
    ck_assert_int_eq(weight_type(fc, 1)->dims[0], 5);
    ck_assert_int_eq(weight_type(fc, 1)->dims[1], 4);
    ck_assert_int_eq(fc->out_types[0].dims[1], 5);
    prune_channels_result_free(&r);
    graph_free(g);
}
END_TEST

/* Relu(Conv p 2->4) and Conv q 2->6, concatenated (10), a depthwise Conv
 * (group 10), Flatten (10 x 16 features), Gemm 160->3 (transB).  No biases
 * and no BatchNorm, so a removed channel is a zero channel. */
static Graph *build_concat(const float *scale_p, const float *scale_q)
{
    Graph *g = graph_new();
    g->opset = 17;
    Node *x = tu_input_f32(g, "x", 4, 1, 2, 4, 4);
    Node *wp = tu_weights_f32(g, "wp", 4, 4, 2, 3, 3, 0.1f);
    Node *wq = tu_weights_f32(g, "wq", 4, 6, 2, 1, 1, 0.1f);
    scale_channels(wp, scale_p);
    scale_channels(wq, scale_q);
    Node *p = tu_op3(g, "Relu", tu_conv(g, x, wp, NULL, 1, 1, 1), NULL, NULL);
    Node *q = tu_conv(g, x, wq, NULL, 0, 1, 1);
    Node *parts[2] = {p, q};
    Node *cat = graph_create_op(g, NULL, op_lookup("Concat"), "Concat", parts, 2);
    ck_assert_ptr_nonnull(cat);
    ck_assert_ptr_nonnull(node_set_attr_int(cat, "axis", 1));
    ck_assert_int_eq(op_apply_attr_specs(cat->op, cat, &tu_diag), FX_OK);
    ck_assert(node_set_num_outputs(cat, 1));
    tu_reinfer(cat);
    Node *dw = tu_conv(g, cat, tu_weights_f32(g, "wd", 4, 10, 1, 3, 3, 0.1f), NULL, 1, 1, 10);
    Node *flat = tu_op3(g, "Flatten", dw, NULL, NULL);
    Node *fc = gemm_t(g, flat, tu_weights_f32(g, "wf", 2, 3, 160, 0, 0, 0.01f), NULL);
    tu_finish(g, &fc, 1);
    return g;
}

static Tensor *run_one(const Graph *g, const Tensor *x)
{
    Tensor *y = NULL;
    ck_assert_int_eq(interp_run(g, &x, 1, &y, 1, NULL, NULL, &tu_diag), FX_OK);
    return y;
}

START_TEST(test_concat_depthwise_flatten)
{
    /* the small channels: p loses 1 and 3, q loses 0, 3 and 5 */
    const float sp[4] = {1, 0.01f, 1, 0.02f}, sq[6] = {0.01f, 1, 1, 0.02f, 1, 0.03f};
    Graph *g = build_concat(sp, sq);
    PruneChannelsResult r;
    ck_assert_int_eq(pass_prune_channels(g, 0.5, &r, &tu_diag), FX_OK);
    ck_assert_int_eq(graph_lint(g, true, &tu_diag), FX_OK);
    Node *p = find(g, "Conv"), *q = find(g, "Conv_1"), *dw = find(g, "Conv_2");
    Node *cat = find(g, "Concat"), *fc = find(g, "Gemm");
    ck_assert_int_eq(weight_type(p, 1)->dims[0], 2);
    ck_assert_int_eq(weight_type(q, 1)->dims[0], 3);
    ck_assert_int_eq(cat->out_types[0].dims[1], 5);
    ck_assert_int_eq(weight_type(dw, 1)->dims[0], 5);
    ck_assert_int_eq(node_attr_int(dw, "group", 0), 5);
    ck_assert_int_eq(weight_type(fc, 1)->dims[1], 5 * 16);
    /* the same graph with the removed channels zeroed gives the same output */
    const float zp[4] = {1, 0, 1, 0}, zq[6] = {0, 1, 1, 0, 1, 0};
    float mp[4], mq[6];
    for (int i = 0; i < 4; i++)
        mp[i] = sp[i] * zp[i];
    for (int i = 0; i < 6; i++)
        mq[i] = sq[i] * zq[i];
    Graph *ref = build_concat(mp, mq);
    uint64_t seed = 7;
    Tensor *x = tensor_new_random(&graph_placeholder(g, 0)->out_types[0], &seed, &tu_diag);
    Tensor *y = run_one(g, x), *want = run_one(ref, x);
    CompareResult c = tensor_compare(y, want, 1e-5, 1e-6);
    ck_assert_msg(c.ok, "max abs %g", c.max_abs);
    tensor_free(x);
    tensor_free(y);
    tensor_free(want);
    prune_channels_result_free(&r);
    graph_free(ref);
    graph_free(g);
}
END_TEST

START_TEST(test_fraction_zero_unchanged)
{
    Graph *g = build_residual(), *ref = build_residual();
    PruneChannelsResult r;
    ck_assert_int_eq(pass_prune_channels(g, 0.0, &r, &tu_diag), FX_OK);
    ck_assert_int_eq(r.channels_after, r.channels_before);
    ck_assert_int_eq(r.edits, 0);
    GraphSummary a, b;
    graph_summarize(g, &a);
    graph_summarize(ref, &b);
    ck_assert_int_eq(a.parameters, b.parameters);
    uint64_t seed = 3;
    Tensor *x = tensor_new_random(&graph_placeholder(g, 0)->out_types[0], &seed, &tu_diag);
    Tensor *y = run_one(g, x), *want = run_one(ref, x);
    CompareResult c = tensor_compare(y, want, 1e-6, 1e-7);
    ck_assert(c.ok);
    tensor_free(x);
    tensor_free(y);
    tensor_free(want);
    prune_channels_result_free(&r);
    graph_free(ref);
    graph_free(g);
}
END_TEST

START_TEST(test_outputs_and_unknown_ops_kept)
{
    /* Conv a feeds the output directly; Conv b goes through Softmax over
     * channels (not looked through); Conv c -> Relu -> Conv d is prunable */
    Graph *g = graph_new();
    g->opset = 17;
    Node *x = tu_input_f32(g, "x", 4, 1, 3, 5, 5);
    Node *a = tu_conv(g, x, tu_weights_f32(g, "wa", 4, 6, 3, 1, 1, 0.1f), NULL, 0, 1, 1);
    Node *b = tu_conv(g, x, tu_weights_f32(g, "wb", 4, 6, 3, 1, 1, 0.1f), NULL, 0, 1, 1);
    Node *sm = tu_op3(g, "Softmax", b, NULL, NULL);
    ck_assert_ptr_nonnull(node_set_attr_int(sm, "axis", 1));
    tu_reinfer(sm);
    Node *c = tu_conv(g, x, tu_weights_f32(g, "wc", 4, 6, 3, 1, 1, 0.1f), NULL, 0, 1, 1);
    Node *d = tu_conv(g, tu_op3(g, "Relu", c, NULL, NULL),
                      tu_weights_f32(g, "wd", 4, 2, 6, 1, 1, 0.1f), NULL, 0, 1, 1);
    Node *outs[3] = {a, sm, d};
    tu_finish(g, outs, 3);
    PruneChannelsResult r;
    ck_assert_int_eq(pass_prune_channels(g, 0.5, &r, &tu_diag), FX_OK);
    ck_assert_int_eq(r.num_groups, 4);
    ck_assert_int_eq(weight_type(a, 1)->dims[0], 6);
    ck_assert_int_eq(weight_type(b, 1)->dims[0], 6);
    ck_assert_int_eq(weight_type(c, 1)->dims[0], 3);
    ck_assert_int_eq(weight_type(d, 1)->dims[1], 3);
    ck_assert_int_eq(weight_type(d, 1)->dims[0], 2);
    ck_assert_int_eq(graph_lint(g, true, &tu_diag), FX_OK);
    prune_channels_result_free(&r);
    /* a fraction outside [0, 1) is refused */
    ck_assert_int_eq(pass_prune_channels(g, 1.0, &r, &tu_diag), FX_ERR_INVALID);
    diag_clear(&tu_diag);
    graph_free(g);
}
END_TEST

START_TEST(test_keep_at_least_one)
{
    Graph *g = build_residual();
    PruneChannelsResult r;
    ck_assert_int_eq(pass_prune_channels(g, 0.99, &r, &tu_diag), FX_OK);
    ck_assert_int_eq(weight_type(find(g, "Conv"), 1)->dims[0], 1);
    ck_assert_int_eq(weight_type(find(g, "Gemm"), 1)->dims[1], 1);
    prune_channels_result_free(&r);
    graph_free(g);
}
END_TEST

static int64_t zeros(const Node *layer)
{
    const Tensor *w = node_const_value(layer->args[1]);
    int64_t z = 0;
    for (int64_t i = 0; i < tensor_numel(w); i++)
        z += ((const float *)w->data)[i] == 0.0f;
    return z;
}

START_TEST(test_magnitude)
{
    Graph *g = build_residual();
    PruneMagnitudeResult m;
    /* tu_weights has zeros already: (i * 7) % 11 == 5 */
    int64_t before = zeros(find(g, "Conv"));
    ck_assert_int_eq(pass_prune_magnitude(g, 0.5, false, &m, &tu_diag), FX_OK);
    ck_assert_int_eq(m.layers, 4);
    ck_assert_int_eq(m.weights, 288 + 576 + 32 + 40);
    /* per layer: exactly floor(0.5 * n) of each layer's weights are the
     * smallest, and zeros among them stay zeros */
    ck_assert_int_eq(zeros(find(g, "Conv")), 144 > before ? 144 : before);
    ck_assert_int_eq(zeros(find(g, "Conv_1")), 288);
    ck_assert_int_eq(zeros(find(g, "Gemm")), 20);
    ck_assert_int_eq(m.zeros_after, 144 + 288 + 16 + 20);
    graph_free(g);

    g = build_residual();
    ck_assert_int_eq(pass_prune_magnitude(g, 0.25, true, &m, &tu_diag), FX_OK);
    ck_assert_int_eq(m.zeros_after, (int64_t)floor(0.25 * m.weights));
    ck_assert_int_eq(pass_prune_magnitude(g, -0.1, true, &m, &tu_diag), FX_ERR_INVALID);
    diag_clear(&tu_diag);
    graph_free(g);
}
END_TEST

START_TEST(test_spec_parse)
{
    PruneConfig c = {.channels = NAN, .sparsity = NAN};
    ck_assert_int_eq(prune_spec_parse("channels:0.5", &c, &tu_diag), FX_OK);
    ck_assert_double_eq_tol(c.channels, 0.5, 1e-12);
    ck_assert_int_eq(prune_spec_parse("magnitude:0.9:global", &c, &tu_diag), FX_OK);
    ck_assert_double_eq_tol(c.sparsity, 0.9, 1e-12);
    ck_assert(c.sparsity_global);
    const char *bad[] = {"channels:1", "channels:", "channels:0.5x", "magnitude:0.5:local",
                         "weights:0.5", "channels:-0.1", "magnitude:nan"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ck_assert_int_eq(prune_spec_parse(bad[k], &c, &tu_diag), FX_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(tu_diag.entries[tu_diag.count - 1].message, bad[k]));
    }
    diag_clear(&tu_diag);
}
END_TEST

START_TEST(test_save_refuses_fused)
{
    Graph *g = build_residual();
    PassResult pr;
    uint8_t *data = NULL;
    size_t len = 0;
    /* the plain graph writes and loads back with the same outputs */
    ck_assert_int_eq(onnx_save_buffer(g, &data, &len, &tu_diag), FX_OK);
    Graph *back = NULL;
    OnnxLoadOptions lo = {0};
    ck_assert_int_eq(onnx_load_buffer(data, len, "saved.onnx", NULL, &lo, &back, &tu_diag), FX_OK);
    ck_assert_int_eq(graph_propagate_shapes(back, NULL, 0, &tu_diag), FX_OK);
    uint64_t seed = 5;
    Tensor *x = tensor_new_random(&graph_placeholder(g, 0)->out_types[0], &seed, &tu_diag);
    Tensor *y = run_one(back, x), *want = run_one(g, x);
    ck_assert(tensor_compare(y, want, 1e-6, 1e-7).ok);
    tensor_free(x);
    tensor_free(y);
    tensor_free(want);
    free(data);
    graph_free(back);
    /* after epilogue fusion it holds a fused kernel: refused, naming it */
    ck_assert_int_eq(pass_epilogue_fusion(g, &pr, &tu_diag), FX_OK);
    ck_assert_int_gt(pr.changes, 0);
    ck_assert_int_eq(onnx_save_buffer(g, &data, &len, &tu_diag), FX_ERR_UNSUPPORTED);
    ck_assert_ptr_null(data);
    ck_assert_ptr_nonnull(strstr(tu_diag.entries[0].message, "cannot be written as ONNX"));
    diag_clear(&tu_diag);
    graph_free(g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_prune");
    TCase *t = tcase_create("prune");
    tcase_set_timeout(t, 120);
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_add_test(t, test_residual_bn_group);
    tcase_add_test(t, test_concat_depthwise_flatten);
    tcase_add_test(t, test_fraction_zero_unchanged);
    tcase_add_test(t, test_outputs_and_unknown_ops_kept);
    tcase_add_test(t, test_keep_at_least_one);
    tcase_add_test(t, test_magnitude);
    tcase_add_test(t, test_spec_parse);
    tcase_add_test(t, test_save_refuses_fused);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
