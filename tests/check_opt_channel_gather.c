/*
 * check_opt_channel_gather.c - the channel-gather pass: on ShuffleNet-v2
 * units of 58 + 58 channels after the layout pass, every convolution reads
 * one ChannelGather of the convolutions before it and no Slice, Concat,
 * Transpose or reorder is left between them (printed graph against
 * tests/golden/opt/channel_gather/), the interpreter's outputs stay allclose
 * to the graph before the pass, and the generated C for the host and the
 * portable target agrees with the interpreter running the graph before any
 * pass.  Chains it must leave alone, and a ChannelGather whose attributes
 * do not fit its inputs, are checked too.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "opt_check_util.h"

enum { HALF = 58, SIDE = 6 };

static Node *concat2(Graph *g, Node *a, Node *b)
{
    Node *args[2] = {a, b};
    Node *n = graph_create_op(g, NULL, op_lookup("Concat"), "Concat", args, 2);
    ck_assert_ptr_nonnull(n);
    ck_assert(node_set_num_outputs(n, 1));
    ck_assert_ptr_nonnull(node_set_attr_int(n, "axis", 1));
    ck_assert_int_eq(op_apply_attr_specs(n->op, n, &tu_diag), FX_OK);
    tu_reinfer(n);
    return n;
}

/* x[:, begin:end] along `axis`, with `step`. */
static Node *slice(Graph *g, Node *x, int64_t axis, int64_t begin, int64_t end, int64_t step)
{
    Node *args[5] = {x, tu_ints(g, "starts", &begin, 1), tu_ints(g, "ends", &end, 1),
                     tu_ints(g, "axes", &axis, 1), tu_ints(g, "steps", &step, 1)};
    return tu_op(g, "Slice", args, 5);
}

static Node *reshape(Graph *g, Node *x, const int64_t *shape, int64_t rank)
{
    return tu_op3(g, "Reshape", x, tu_ints(g, "shape", shape, rank), NULL);
}

/* torchvision's channel_shuffle with two groups. */
static Node *channel_shuffle(Graph *g, Node *x)
{
    const TensorType *t = &x->out_types[0];
    int64_t split[5] = {t->dims[0], 2, t->dims[1] / 2, t->dims[2], t->dims[3]};
    static const int64_t perm[5] = {0, 2, 1, 3, 4};
    Node *tr = tu_op3(g, "Transpose", reshape(g, x, split, 5), NULL, NULL);
    ck_assert_ptr_nonnull(node_set_attr_ints(tr, "perm", perm, 5));
    tu_reinfer(tr);
    return reshape(g, tr, t->dims, 4);
}

/* One stride-1 unit: the first half passes, the second goes through 1x1,
 * depthwise 3x3 and 1x1 convolutions; then Concat and the shuffle. */
static Node *unit(Graph *g, Node *x, int k)
{
    char w[3][16];
    for (int i = 0; i < 3; i++)
        snprintf(w[i], sizeof w[i], "w%d_%d", k, i);
    Node *passed = slice(g, x, 1, 0, HALF, 1);
    Node *b = slice(g, x, 1, HALF, 2 * HALF, 1);
    b = tu_op3(g, "Relu", tu_conv(g, b, tu_weights_f32(g, w[0], 4, HALF, HALF, 1, 1, 0.02f),
                                  tu_weights_f32(g, "b", 1, HALF, 0, 0, 0, 0.1f), 0, 1, 1),
               NULL, NULL);
    b = tu_conv(g, b, tu_weights_f32(g, w[1], 4, HALF, 1, 3, 3, 0.1f), NULL, 1, 1, HALF);
    b = tu_op3(g, "Relu", tu_conv(g, b, tu_weights_f32(g, w[2], 4, HALF, HALF, 1, 1, 0.02f),
                                  NULL, 0, 1, 1),
               NULL, NULL);
    return channel_shuffle(g, concat2(g, passed, b));
}

/* A stem convolution to 116 channels, three units and a 1x1 head; the last
 * shuffle is also a graph output (a plain gather). */
static Graph *build_units(int64_t batch)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, batch, 24, SIDE, SIDE);
    Node *y = tu_op3(g, "Relu",
                     tu_conv(g, x, tu_weights_f32(g, "ws", 4, 2 * HALF, 24, 1, 1, 0.05f),
                             tu_weights_f32(g, "bs", 1, 2 * HALF, 0, 0, 0, 0.1f), 0, 1, 1),
                     NULL, NULL);
    for (int k = 0; k < 3; k++)
        y = unit(g, y, k);
    Node *head = tu_conv(g, y, tu_weights_f32(g, "wh", 4, 10, 2 * HALF, 1, 1, 0.02f), NULL, 0,
                         1, 1);
    Node *results[2] = {head, y};
    tu_finish(g, results, 2);
    return g;
}

static Graph *build_units_batch1(void) { return build_units(1); }
static Graph *build_units_batch2(void) { return build_units(2); }

typedef Graph *(*Builder)(void);

/* The -O2 passes up to the layout pass, then this one (expect_changes
 * chains rewritten). */
static Graph *run_case(Builder build, int expect_changes)
{
    Graph *g = build();
    tu_run_pass(g, pass_epilogue_fusion, 1e-5, 1e-6);
    tu_run_pass(g, pass_elementwise_fusion, 1e-5, 1e-6);
    tu_run_pass(g, pass_nchwc_layout, 1e-5, 1e-5);
    ck_assert_int_eq(tu_run_pass(g, pass_channel_gather, 1e-5, 1e-5), expect_changes);
    return g;
}

/* Each unit's first convolution and the head read one gather each, as does
 * the second output: five.  The only reorders left are the model input's
 * and the head's, which move nothing else. */
static void assert_units_gathered(const Graph *g)
{
    ck_assert_int_eq(tu_count_op(g, "ChannelGather"), 5);
    ck_assert_int_eq(tu_count_op(g, "ConvNCHWc"), 11);
    ck_assert_int_eq(tu_count_op(g, "ToNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "FromNCHWc"), 1);
    static const char *const gone[] = {"Slice", "Concat", "Transpose", "Reshape"};
    for (size_t k = 0; k < sizeof gone / sizeof *gone; k++)
        ck_assert_msg(tu_count_op(g, gone[k]) == 0, "%s left", gone[k]);
}

START_TEST(test_units)
{
    Graph *g = run_case(build_units_batch1, 5), *ref = build_units_batch1();
    assert_units_gathered(g);
    tu_assert_golden(g, "channel_gather", "units");
    tu_assert_compiled_matches(g, ref, "channel_gather_units", 1e-4, 1e-5);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* A batch of two: no Concat is in place there, the same chains pay. */
START_TEST(test_units_batch2)
{
    Graph *g = run_case(build_units_batch2, 5), *ref = build_units_batch2();
    assert_units_gathered(g);
    tu_assert_compiled_matches(g, ref, "channel_gather_units_batch2", 1e-4, 1e-5);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* -O2 runs the pass for both targets. */
START_TEST(test_in_o2)
{
    for (int portable = 0; portable <= 1; portable++) {
        Graph *g = build_units_batch1();
        Diag d;
        diag_init(&d);
        PassOptions o = {.portable = portable};
        ck_assert_int_eq(opt_run_level(g, 2, &o, &d), FX_OK);
        assert_units_gathered(g);
        diag_free(&d);
        graph_free(g);
    }
}
END_TEST

/* Chains that stay: a Concat of a channel Slice and a computed value (in
 * place, the Slice its one copy: a gather would copy both), movement along
 * the spatial axes, a Slice with a step, and one reorder alone. */
static Graph *build_left_alone(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 16, SIDE, SIDE);
    Node *y = tu_input_f32(g, "y", 4, 1, 8, SIDE, SIDE);
    Node *in_place = concat2(g, slice(g, x, 1, 0, 8, 1), tu_op3(g, "Relu", y, NULL, NULL));
    Node *rows = slice(g, x, 2, 0, 3, 1);
    Node *spatial = concat2(g, rows, rows);
    Node *stepped = concat2(g, slice(g, x, 1, 0, 16, 2), y);
    Node *conv = tu_conv(g, x, tu_weights_f32(g, "w", 4, 13, 16, 1, 1, 0.1f), NULL, 0, 1, 1);
    Node *results[4] = {tu_op3(g, "Relu", in_place, NULL, NULL),
                        tu_op3(g, "Relu", spatial, NULL, NULL),
                        tu_op3(g, "Relu", stepped, NULL, NULL), conv};
    tu_finish(g, results, 4);
    return g;
}

START_TEST(test_left_alone)
{
    Graph *g = build_left_alone();
    tu_run_pass(g, pass_nchwc_layout, 1e-5, 1e-5);
    char *before = tu_print(g);
    ck_assert_int_eq(tu_run_pass(g, pass_channel_gather, 1e-5, 1e-5), 0);
    char *after = tu_print(g);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    graph_free(g);
}
END_TEST

/* A ChannelGather of x [1, 13, 4, 4] and blocked b [1, 2, 4, 4, 8] with
 * the given lists: its status. */
static FxStatus make_gather(const int64_t *from_input, const int64_t *from_channel,
                            int64_t channels, const int64_t *input_channels, int64_t inputs)
{
    Graph *g = graph_new();
    int64_t blocked_dims[5] = {1, 2, 4, 4, 8};
    Node *args[2] = {tu_input_f32(g, "x", 4, 1, 13, 4, 4),
                     tu_input(g, "b", FXRT_DTYPE_FLOAT32, 5, blocked_dims)};
    Node *n = graph_create_op(g, NULL, &fx_op_ChannelGather, "gather", args, 2);
    ck_assert_ptr_nonnull(n);
    bool set = node_set_attr_ints(n, "from_input", from_input, channels) &&
               node_set_attr_ints(n, "from_channel", from_channel, channels) &&
               node_set_attr_ints(n, "input_channels", input_channels, inputs) &&
               node_set_attr_int(n, "blocked", 1);
    Diag d;
    diag_init(&d);
    FxStatus st = node_finish_created(n, set, NULL, &d);
    diag_free(&d);
    graph_free(g);
    return st;
}

START_TEST(test_bad_attributes)
{
    const int64_t from_input[3] = {0, 1, 1}, counts[2] = {13, 16}, short_counts[2] = {13, 9};
    const int64_t fits[3] = {12, 0, 15}, past_padding[3] = {12, 0, 9}, past_x[3] = {13, 0, 1};
    const int64_t no_input[3] = {0, 2, 1}, negative[3] = {0, -1, 1};
    ck_assert_int_eq(make_gather(from_input, fits, 3, counts, 2), FX_OK);
    ck_assert_int_ne(make_gather(from_input, past_padding, 3, short_counts, 2), FX_OK);
    ck_assert_int_ne(make_gather(from_input, past_x, 3, counts, 2), FX_OK);
    ck_assert_int_ne(make_gather(no_input, fits, 3, counts, 2), FX_OK);
    ck_assert_int_ne(make_gather(from_input, negative, 3, counts, 2), FX_OK);
    ck_assert_int_ne(make_gather(from_input, fits, 3, counts, 1), FX_OK);
    /* 4 channels cannot fill the 2 blocks of b */
    const int64_t few[2] = {13, 4};
    ck_assert_int_ne(make_gather(from_input, fits, 3, few, 2), FX_OK);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_channel_gather");
    TCase *t = tcase_create("channel_gather");
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_units);
    tcase_add_test(t, test_units_batch2);
    tcase_add_test(t, test_in_o2);
    tcase_add_test(t, test_left_alone);
    tcase_add_test(t, test_bad_attributes);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
