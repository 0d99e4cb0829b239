/*
 * check_opt_concat.c - Concat in place (codegen/plan.c, place_concats): on
 * small GoogLeNet- and DenseNet-like graphs, plain and after the NCHWc
 * layout pass, which Concats have their inputs written into their slices
 * (the plan's slices and assembled Concats), which must keep the copy (batch
 * 2, an input that is a graph output), and that the generated C for the host
 * and the portable target agrees with the interpreter running the graph
 * before any pass (rtol 1e-4, atol 1e-5, as `fxcc verify`), including a
 * Concat input read again after the Concat and a broadcast elementwise op on
 * a slice that must not be done in place over the whole buffer.
 */
#include <check.h>

#include "codegen/codegen.h"
#include "opt_check_util.h"

typedef Graph *(*Builder)(void);

static const double RTOL = 1e-4, ATOL = 1e-5;

/* A Conv (bias, Relu) of x to `out` channels, kernel k, padded to keep H, W. */
static Node *conv_relu(Graph *g, Node *x, int64_t out, int64_t k, const char *name)
{
    char w[64], b[64];
    snprintf(w, sizeof w, "%s_w", name);
    snprintf(b, sizeof b, "%s_b", name);
    int64_t in = x->out_types[0].dims[1];
    Node *c = tu_conv(g, x, tu_weights_f32(g, w, 4, out, in, k, k, 0.05f),
                      tu_weights_f32(g, b, 1, out, 0, 0, 0, 0.1f), k / 2, 1, 1);
    return tu_op3(g, "Relu", c, NULL, NULL);
}

static Node *concat(Graph *g, Node *const *args, int count)
{
    Node *c = graph_create_op(g, NULL, op_lookup("Concat"), "Concat", args, count);
    ck_assert_ptr_nonnull(c);
    ck_assert(node_set_num_outputs(c, 1));
    ck_assert_ptr_nonnull(node_set_attr_int(c, "axis", 1));
    ck_assert_int_eq(op_apply_attr_specs(c->op, c, &tu_diag), FX_OK);
    tu_reinfer(c);
    return c;
}

/* The plan of g; counts its Concats written in place and its slices. */
static void plan_counts(const Graph *g, int *assembled, int *slices)
{
    CgPlan p;
    ck_assert_int_eq(cg_plan(g, &p, &tu_diag), FX_OK);
    ck_assert_int_eq(cg_plan_check(&p, &tu_diag), FX_OK);
    *assembled = p.assembled_count;
    *slices = 0;
    for (int i = 0; i < p.num_values; i++)
        *slices += p.values[i].kind == CG_ALIAS && p.values[i].slice;
    cg_plan_free(&p);
}

/* Plans and compiles build()'s graph, plain (no pass) and blocked (epilogue
 * fusion and the NCHWc layout), and checks the counts of each. */
static void run_case(Builder build, const char *name, int plain_assembled, int plain_slices,
                     int blocked_assembled, int blocked_slices)
{
    Graph *g = build(), *ref = build();
    int assembled, slices;
    plan_counts(g, &assembled, &slices);
    ck_assert_int_eq(assembled, plain_assembled);
    ck_assert_int_eq(slices, plain_slices);
    tu_assert_compiled_matches(g, ref, name, RTOL, ATOL);
    graph_free(g);

    g = build();
    tu_run_pass(g, pass_epilogue_fusion, 1e-5, 1e-6);
    tu_run_pass(g, pass_nchwc_layout, 1e-5, 1e-5);
    plan_counts(g, &assembled, &slices);
    ck_assert_int_eq(assembled, blocked_assembled);
    ck_assert_int_eq(slices, blocked_slices);
    tu_assert_compiled_matches(g, ref, name, RTOL, ATOL);
    graph_free(g);
    graph_free(ref);
}

/* An Inception module: four branches into one Concat, read by a Conv. */
static Graph *build_inception(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 16, 9, 7);
    Node *branches[4] = {conv_relu(g, x, 16, 1, "b1"), conv_relu(g, conv_relu(g, x, 8, 1, "b2a"), 8, 3, "b2"),
                         conv_relu(g, x, 24, 3, "b3"), conv_relu(g, x, 8, 1, "b4")};
    Node *y = conv_relu(g, concat(g, branches, 4), 16, 1, "after");
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_inception)
{
    run_case(build_inception, "concat_inception", 1, 4, 1, 4);
}
END_TEST

/* A dense block of three layers: each Concat is a prefix of the next, all
 * slices of the last one's buffer. */
static Graph *build_dense_block(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 8, 8, 8);
    Node *features[4] = {conv_relu(g, x, 16, 3, "stem")};
    char name[32];
    for (int k = 1; k < 4; k++) {
        Node *in = k == 1 ? features[0] : concat(g, features, k);
        snprintf(name, sizeof name, "layer%d", k);
        features[k] = conv_relu(g, conv_relu(g, in, 16, 1, name), 8, 3, name);
    }
    Node *y = conv_relu(g, concat(g, features, 4), 8, 1, "transition");
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_dense_block_chain)
{
    /* the last Concat places stem, layer1..3; the two before span them */
    run_case(build_dense_block, "concat_dense_block", 3, 6, 3, 6);
}
END_TEST

/* An input of the Concat read again after it, by a Conv and by a
 * broadcast Add whose output has the Concat's type: the Add must not be
 * done in place over the Concat's buffer, which holds its input. */
static Graph *build_read_after(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 8, 6, 6);
    Node *a = conv_relu(g, x, 8, 3, "a");
    Node *b = conv_relu(g, x, 1, 1, "b");
    Node *pair[2] = {a, b};
    Node *c = concat(g, pair, 2);                        /* [1, 9, 6, 6] */
    Node *neg = tu_op3(g, "Neg", c, NULL, NULL);         /* c's last reader but b */
    Node *sum = tu_op3(g, "Add", b, neg, NULL);          /* b broadcast: [1, 9, 6, 6] */
    Node *results[2] = {tu_op3(g, "Relu", sum, NULL, NULL), conv_relu(g, a, 8, 1, "again")};
    tu_finish(g, results, 2);
    return g;
}

START_TEST(test_input_read_after_concat)
{
    /* b's 1 channel does not fill a block: the Concat stays plain, and
     * in place there too */
    run_case(build_read_after, "concat_read_after", 1, 2, 1, 2);
}
END_TEST

/* 12 + 8 channels: blocked, the first input would not fill its blocks, so
 * the Concat stays in [N, C, H, W], where batch 1 still makes it contiguous;
 * with batch 2 it is not, and copies. */
static Graph *build_odd_channels(int64_t batch)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, batch, 8, 5, 5);
    Node *pair[2] = {conv_relu(g, x, 12, 3, "a"), conv_relu(g, x, 8, 1, "b")};
    Node *y = conv_relu(g, concat(g, pair, 2), 8, 1, "after");
    tu_finish(g, &y, 1);
    return g;
}

static Graph *build_odd_channels_batch1(void) { return build_odd_channels(1); }
static Graph *build_odd_channels_batch2(void) { return build_odd_channels(2); }

START_TEST(test_odd_channels)
{
    run_case(build_odd_channels_batch1, "concat_odd_channels", 1, 2, 1, 2);
    run_case(build_odd_channels_batch2, "concat_batch2", 0, 0, 0, 0);
}
END_TEST

/* A Concat input that is also a graph output lives in the caller's
 * buffer: the Concat copies. */
static Graph *build_output_input(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 8, 6, 5);
    Node *a = conv_relu(g, x, 8, 3, "a");
    Node *pair[2] = {a, conv_relu(g, x, 16, 1, "b")};
    Node *results[2] = {conv_relu(g, concat(g, pair, 2), 8, 1, "after"), a};
    tu_finish(g, results, 2);
    return g;
}

START_TEST(test_output_is_concat_input)
{
    /* blocked, the output is a's reorder back to [N, C, H, W], so the
     * blocked a is an arena value and goes in place */
    run_case(build_output_input, "concat_output_input", 0, 0, 1, 2);
}
END_TEST

/* The Concat is the graph's output: its inputs are written into the
 * caller's buffer. */
static Graph *build_concat_output(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 8, 6, 5);
    Node *pair[2] = {conv_relu(g, x, 8, 3, "a"), conv_relu(g, x, 16, 1, "b")};
    Node *c = concat(g, pair, 2);
    tu_finish(g, &c, 1);
    return g;
}

START_TEST(test_concat_is_output)
{
    /* blocked, the output is the reorder back to [N, C, H, W]: the blocked
     * Concat is an arena value */
    run_case(build_concat_output, "concat_is_output", 1, 2, 1, 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("opt_concat");
    TCase *t = tcase_create("concat_in_place");
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_set_timeout(t, 600);
    tcase_add_test(t, test_inception);
    tcase_add_test(t, test_dense_block_chain);
    tcase_add_test(t, test_input_read_after_concat);
    tcase_add_test(t, test_odd_channels);
    tcase_add_test(t, test_output_is_concat_input);
    tcase_add_test(t, test_concat_is_output);
    suite_add_tcase(s, t);
    return tu_main(s);
}
