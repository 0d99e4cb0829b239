/*
 * check_opt_redfuse.c - the reduction half of the elementwise fusion pass
 * and the FusedReduction module kind: which groups fuse (printed graphs
 * against golden files under tests/golden/opt/redfuse/), that the
 * interpreter's outputs stay allclose, and that the compiled row loops, for
 * the host and the portable target, agree with the interpreter running the
 * graph as it was before the pass (the runtime's Softmax, LayerNorm and
 * Reduce kernels) and keep no intermediate in the arena.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "opt_check_util.h"

/* Reduce op `name` of x over axes, keepdims as given. */
static Node *reduce(Graph *g, const char *name, Node *x, const int64_t *axes, int64_t count,
                    int keepdims)
{
    Node *n = tu_op3(g, name, x, tu_ints(g, "axes", axes, count), NULL);
    ck_assert_ptr_nonnull(node_set_attr_int(n, "keepdims", keepdims));
    tu_reinfer(n);
    return n;
}

/* LayerNormalization along `axis` (set before its types are inferred: a
 * scale that fits only that axis would be refused at the default -1). */
static Node *layernorm(Graph *g, Node *x, Node *scale, Node *bias, int64_t axis)
{
    Node *args[3] = {x, scale, bias};
    Node *n = graph_create_op(g, NULL, &fx_op_LayerNormalization, "LayerNormalization", args,
                              bias ? 3 : 2);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(op_apply_attr_specs(n->op, n, &tu_diag), FX_OK);
    ck_assert_ptr_nonnull(node_set_attr_int(n, "axis", axis));
    ck_assert(node_set_num_outputs(n, 1));
    tu_reinfer(n);
    return n;
}

static Node *with_axis(Node *n, int64_t axis)
{
    ck_assert_ptr_nonnull(node_set_attr_int(n, "axis", axis));
    tu_reinfer(n);
    return n;
}

typedef void (*BuildFn)(Graph *g);

typedef struct Outcome {
    int reductions;  /* FusedReduction nodes after the pass */
    int elementwise; /* FusedElementwise nodes after the pass */
    int calls;       /* call nodes after the pass */
    size_t arena_bytes[2]; /* of the compiled graph, host and portable */
} Outcome;

static size_t arena_of(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/model/model.h", dir);
    char *h = tu_slurp(path);
    const char *def = strstr(h, "#define model_ARENA_BYTES ");
    ck_assert_ptr_nonnull(def);
    size_t bytes = (size_t)strtoull(def + strlen("#define model_ARENA_BYTES "), NULL, 10);
    free(h);
    return bytes;
}

/* The pass through tu_run_pass (interpreter before/after, lint), the golden
 * text, then the compiled code of both targets against the interpreter on
 * the graph as built (before the pass). */
static Outcome run_case(BuildFn build, const char *name)
{
    Graph *g = graph_new(), *ref = graph_new();
    build(g);
    build(ref);
    tu_run_pass(g, pass_elementwise_fusion, 1e-5, 1e-6);
    tu_assert_golden(g, "redfuse", name);

    int ni = graph_num_placeholders(g);
    Tensor *in[8] = {0};
    uint64_t seed = 0x7eedu;
    for (int i = 0; i < ni; i++)
        ck_assert_ptr_nonnull(in[i] = tensor_new_random(&graph_placeholder(g, i)->out_types[0],
                                                      &seed, &tu_diag));
    Outcome o = {.reductions = tu_count_op(g, "FusedReduction"),
                 .elementwise = tu_count_op(g, "FusedElementwise"),
                 .calls = tu_count_calls(g)};
    static const FxTarget targets[2] = {FX_TARGET_HOST, FX_TARGET_PORTABLE};
    for (int t = 0; t < 2; t++) {
        char dir[256];
        snprintf(dir, sizeof dir, "/tmp/fxcc_redfuse_%s_%d_%ld", name, t, (long)getpid());
        CgVerifyOptions vo = {.cg = {.name = "model", .target = targets[t]},
                              .build = {.target = targets[t]},
                              .rtol = 1e-5, .atol = 1e-5, .keep_dir = dir};
        FILE *report = fopen("/dev/null", "w");
        FxStatus st = cg_verify(g, ref, in, ni, &vo, report, &tu_diag);
        fclose(report);
        if (st != FX_OK)
            diag_print(&tu_diag, stderr);
        ck_assert_msg(st == FX_OK, "%s: compiled code differs or does not build (see %s)", name,
                      dir);
        o.arena_bytes[t] = arena_of(dir);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (!getenv("FXCC_REDFUSE_KEEP")) /* keep the generated C to read it */
            ck_assert_int_eq(system(cmd), 0);
    }
    for (int i = 0; i < ni; i++)
        tensor_free(in[i]);
    graph_free(ref);
    graph_free(g);
    return o;
}

/* Attention: softmax(scores * scale + mask), the mask [2, 1, 1, 16]
 * broadcast over heads and query rows. */
static void build_softmax(Graph *g)
{
    Node *x = tu_input_f32(g, "scores", 4, 2, 3, 4, 16);
    Node *m = tu_input_f32(g, "mask", 4, 2, 1, 1, 16);
    Node *a = tu_op3(g, "Add", tu_op3(g, "Mul", x, tu_scalar(g, "scale", 0.25f), NULL), m, NULL);
    Node *y = tu_op3(g, "Softmax", a, NULL, NULL);
    tu_finish(g, &y, 1);
}

START_TEST(test_softmax)
{
    Outcome o = run_case(build_softmax, "softmax");
    ck_assert_int_eq(o.reductions, 1);
    ck_assert_int_eq(o.calls, 1);
    ck_assert_uint_eq(o.arena_bytes[0], 0);
    ck_assert_uint_eq(o.arena_bytes[1], 0);
}
END_TEST

/* log_softmax(relu(x) + per-row r) * 2 - c: a per-row operand (constant
 * along the row) in the prologue, a full-row one in the epilogue. */
static void build_log_softmax(Graph *g)
{
    Node *x = tu_input_f32(g, "x", 2, 5, 12, 0, 0);
    Node *r = tu_input_f32(g, "r", 2, 5, 1, 0, 0);
    Node *c = tu_input_f32(g, "c", 1, 12, 0, 0, 0);
    Node *a = tu_op3(g, "Add", tu_op3(g, "Relu", x, NULL, NULL), r, NULL);
    Node *l = tu_op3(g, "LogSoftmax", a, NULL, NULL);
    Node *y = tu_op3(g, "Sub", tu_op3(g, "Mul", l, tu_scalar(g, "two", 2.0f), NULL), c, NULL);
    tu_finish(g, &y, 1);
}

START_TEST(test_log_softmax)
{
    Outcome o = run_case(build_log_softmax, "log_softmax");
    ck_assert_int_eq(o.reductions, 1);
    ck_assert_int_eq(o.calls, 1);
    ck_assert_uint_eq(o.arena_bytes[0], 0);
    ck_assert_uint_eq(o.arena_bytes[1], 0);
}
END_TEST

/* Post-norm residual: layernorm(x + residual, g, b) * g2 + 0.5. */
static void build_layernorm(Graph *g)
{
    Node *x = tu_input_f32(g, "x", 3, 2, 7, 32, 0);
    Node *res = tu_input_f32(g, "residual", 3, 2, 7, 32, 0);
    int64_t d[1] = {32};
    Node *sc = tu_weights(g, "ln_weight", 1, d, 0.3f);
    Node *bi = tu_weights(g, "ln_bias", 1, d, 0.1f);
    Node *g2 = tu_weights(g, "gain", 1, d, 0.2f);
    Node *ln = layernorm(g, tu_op3(g, "Add", x, res, NULL), sc, bi, -1);
    Node *y = tu_op3(g, "Add", tu_op3(g, "Mul", ln, g2, NULL), tu_scalar(g, "half", 0.5f), NULL);
    tu_finish(g, &y, 1);
}

START_TEST(test_layernorm)
{
    Outcome o = run_case(build_layernorm, "layernorm");
    ck_assert_int_eq(o.reductions, 1);
    ck_assert_int_eq(o.calls, 1);
    ck_assert_uint_eq(o.arena_bytes[0], 0);
    ck_assert_uint_eq(o.arena_bytes[1], 0);
}
END_TEST

/* LayerNorm over the last two axes (axis 1 of [3, 4, 8]: rows of 32) with
 * a [4, 8] scale and no bias, on exp(x) - 1: data far from a zero mean. */
static void build_layernorm_two_axes(Graph *g)
{
    Node *x = tu_input_f32(g, "x", 3, 3, 4, 8, 0);
    int64_t d[2] = {4, 8};
    Node *sc = tu_weights(g, "ln_weight", 2, d, 0.25f);
    Node *e = tu_op3(g, "Sub", tu_op3(g, "Exp", x, NULL, NULL), tu_scalar(g, "one", 1.0f), NULL);
    Node *y = layernorm(g, e, sc, NULL, 1);
    tu_finish(g, &y, 1);
}

START_TEST(test_layernorm_two_axes)
{
    Outcome o = run_case(build_layernorm_two_axes, "layernorm_two_axes");
    ck_assert_int_eq(o.reductions, 1);
    ck_assert_int_eq(o.calls, 1);
    ck_assert_uint_eq(o.arena_bytes[0], 0);
}
END_TEST

/* RMSNorm: x / sqrt(mean(x * x) + eps) * g, one FusedReduction: the
 * mean, + eps and sqrt once per row, then the division broadcasts that
 * value back over the row in a last pass, with * g. */
static void build_rms(Graph *g)
{
    Node *x = tu_input_f32(g, "x", 3, 2, 6, 24, 0);
    int64_t d[1] = {24}, axes[1] = {-1};
    Node *w = tu_weights(g, "rms_weight", 1, d, 0.2f);
    Node *ms = reduce(g, "ReduceMean", tu_op3(g, "Mul", x, x, NULL), axes, 1, 1);
    Node *rms =
        tu_op3(g, "Sqrt", tu_op3(g, "Add", ms, tu_scalar(g, "eps", 1e-6f), NULL), NULL, NULL);
    Node *y = tu_op3(g, "Mul", tu_op3(g, "Div", x, rms, NULL), w, NULL);
    tu_finish(g, &y, 1);
}

START_TEST(test_rms)
{
    Outcome o = run_case(build_rms, "rms");
    ck_assert_int_eq(o.reductions, 1);
    ck_assert_int_eq(o.calls, 1);
    ck_assert_uint_eq(o.arena_bytes[0], 0);
    ck_assert_uint_eq(o.arena_bytes[1], 0);
}
END_TEST

/* log(sum(exp(x - 1))) over the last two axes without keepdims, and
 * max(|x|) * 2 over the last one with keepdims: two groups. */
static void build_sum_max(Graph *g)
{
    Node *x = tu_input_f32(g, "x", 3, 3, 4, 5, 0);
    int64_t last2[2] = {1, 2}, last[1] = {2};
    Node *e = tu_op3(g, "Exp", tu_op3(g, "Sub", x, tu_scalar(g, "one", 1.0f), NULL), NULL, NULL);
    Node *lse = tu_op3(g, "Log", reduce(g, "ReduceSum", e, last2, 2, 0), NULL, NULL);
    Node *mx = reduce(g, "ReduceMax", tu_op3(g, "Abs", x, NULL, NULL), last, 1, 1);
    Node *mx2 = tu_op3(g, "Mul", mx, tu_scalar(g, "two", 2.0f), NULL);
    Node *outs[2] = {lse, mx2};
    tu_finish(g, outs, 2);
}

START_TEST(test_sum_max)
{
    Outcome o = run_case(build_sum_max, "sum_max");
    ck_assert_int_eq(o.reductions, 2);
    ck_assert_int_eq(o.calls, 2);
    ck_assert_uint_eq(o.arena_bytes[0], 0);
    ck_assert_uint_eq(o.arena_bytes[1], 0);
}
END_TEST

/* Values independent of the reduction join its epilogue when only it reads
 * them: softmax(x) * sigmoid(w) (a per-element side value), and
 * v - mean(v) * |s| (a per-row side value, then the per-row result
 * broadcast back over the row). */
static void build_side_values(Graph *g)
{
    Node *x = tu_input_f32(g, "x", 2, 4, 8, 0, 0);
    Node *w = tu_input_f32(g, "w", 1, 8, 0, 0, 0);
    Node *v = tu_input_f32(g, "v", 2, 3, 10, 0, 0);
    Node *s = tu_input_f32(g, "s", 2, 3, 1, 0, 0);
    int64_t last[1] = {-1};
    Node *sm = tu_op3(g, "Mul", tu_op3(g, "Softmax", x, NULL, NULL),
                      tu_op3(g, "Sigmoid", w, NULL, NULL), NULL);
    Node *mean = reduce(g, "ReduceMean", v, last, 1, 1);
    Node *centered =
        tu_op3(g, "Sub", v, tu_op3(g, "Mul", mean, tu_op3(g, "Abs", s, NULL, NULL), NULL), NULL);
    Node *outs[2] = {sm, centered};
    tu_finish(g, outs, 2);
}

START_TEST(test_side_values)
{
    Outcome o = run_case(build_side_values, "side_values");
    ck_assert_int_eq(o.reductions, 2);
    ck_assert_int_eq(o.calls, 2);
    ck_assert_uint_eq(o.arena_bytes[0], 0);
    ck_assert_uint_eq(o.arena_bytes[1], 0);
}
END_TEST

/* Left alone: a mean over axis 0 (not innermost), a softmax along a middle
 * axis, a layernorm whose prologue input broadcasts along the row (its
 * [8] operand repeats over the reduced axis 1), and a softmax whose
 * prologue value is also returned (its Mul+Add become a FusedElementwise,
 * the Softmax stays). */
static void build_not_fused(Graph *g)
{
    Node *x = tu_input_f32(g, "x", 2, 6, 8, 0, 0);
    Node *z = tu_input_f32(g, "z", 3, 2, 5, 3, 0);
    Node *w = tu_input_f32(g, "w", 3, 3, 4, 8, 0);
    Node *b = tu_input_f32(g, "b", 1, 8, 0, 0, 0);
    int64_t first[1] = {0}, d[2] = {4, 8};
    Node *mean0 = reduce(g, "ReduceMean", tu_op3(g, "Mul", x, x, NULL), first, 1, 1);
    Node *mid = with_axis(tu_op3(g, "Softmax", tu_op3(g, "Neg", z, NULL, NULL), NULL, NULL), 1);
    Node *ln = layernorm(g, tu_op3(g, "Add", w, b, NULL), tu_weights(g, "ln_weight", 2, d, 0.25f),
                         NULL, 1);
    Node *t = tu_op3(g, "Add", tu_op3(g, "Mul", x, tu_scalar(g, "scale", 0.5f), NULL), x, NULL);
    Node *sm = tu_op3(g, "Softmax", t, NULL, NULL);
    Node *outs[5] = {mean0, mid, ln, sm, t};
    tu_finish(g, outs, 5);
}

START_TEST(test_not_fused)
{
    Outcome o = run_case(build_not_fused, "not_fused");
    ck_assert_int_eq(o.reductions, 0);
    ck_assert_int_eq(o.elementwise, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_redfuse");
    TCase *t = tcase_create("redfuse");
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_set_timeout(t, 240);
    tcase_add_test(t, test_softmax);
    tcase_add_test(t, test_log_softmax);
    tcase_add_test(t, test_layernorm);
    tcase_add_test(t, test_layernorm_two_axes);
    tcase_add_test(t, test_rms);
    tcase_add_test(t, test_sum_max);
    tcase_add_test(t, test_side_values);
    tcase_add_test(t, test_not_fused);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
