/*
 * check_opt_ewfuse.c - the elementwise fusion pass and the FusedElementwise
 * module kind: which groups fuse (printed graphs against golden files under
 * tests/golden/opt/ewfuse/), that the interpreter's outputs stay allclose,
 * and that the compiled fused loop agrees with the interpreter and needs no
 * intermediate buffers.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "opt_check_util.h"

static Node *input(Graph *g, const char *name, DType dt, int rank, int64_t d0, int64_t d1)
{
    int64_t dims[2] = {d0, d1};
    return tu_input(g, name, dt, rank, dims);
}

static int count_fused(const Graph *g) { return tu_count_op(g, "FusedElementwise"); }

static void assert_golden(const Graph *g, const char *name) { tu_assert_golden(g, "ewfuse", name); }

typedef struct Outcome {
    int fused;          /* FusedElementwise nodes after the pass */
    size_t arena_bytes; /* of the compiled fused graph */
    int loops;          /* `for (` in its C source */
} Outcome;

/* Random inputs, interpreter before and after the pass (allclose), golden
 * text, then the compiled code against the interpreter. */
static Outcome run_case(Graph *g, const char *name)
{
    int ni = graph_num_placeholders(g), no = graph_num_outputs(g);
    Tensor *in[8] = {0}, *before[4] = {0}, *after[4] = {0};
    uint64_t seed = 0x5eedu;
    for (int i = 0; i < ni; i++)
        ck_assert_ptr_nonnull(in[i] = tensor_new_random(&graph_placeholder(g, i)->out_types[0],
                                                      &seed, &tu_diag));
    ck_assert_int_eq(interp_run(g, (const Tensor *const *)in, ni, before, no, NULL, NULL, &tu_diag),
                     FX_OK);
    PassResult r;
    FxStatus st = pass_elementwise_fusion(g, &r, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
    ck_assert_int_eq(graph_propagate_shapes(g, NULL, 0, &tu_diag), FX_OK);
    ck_assert_int_eq(graph_lint(g, true, &tu_diag), FX_OK);
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        if (n->body)
            ck_assert_int_eq(graph_lint(n->body, true, &tu_diag), FX_OK);
    ck_assert_int_eq(interp_run(g, (const Tensor *const *)in, ni, after, no, NULL, NULL, &tu_diag),
                     FX_OK);
    for (int k = 0; k < no; k++) {
        CompareResult c = tensor_compare(after[k], before[k], 1e-6, 1e-7);
        ck_assert_msg(c.ok, "%s output %d: max abs %g", name, k, c.max_abs);
        tensor_free(before[k]);
        tensor_free(after[k]);
    }
    assert_golden(g, name);

    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/fxcc_ewfuse_%s_%ld", name, (long)getpid());
    CgVerifyOptions vo = {.cg = {.name = "model", .target = FX_TARGET_PORTABLE},
                          .build = {.target = FX_TARGET_PORTABLE},
                          .rtol = 1e-6, .atol = 1e-6, .keep_dir = dir};
    FILE *report = fopen("/dev/null", "w");
    st = cg_verify(g, NULL, in, ni, &vo, report, &tu_diag);
    fclose(report);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_msg(st == FX_OK, "%s: compiled code differs or does not build (see %s)", name, dir);

    Outcome o = {.fused = count_fused(g)};
    char path[512];
    snprintf(path, sizeof path, "%s/model/model.h", dir);
    char *h = tu_slurp(path);
    const char *def = strstr(h, "#define model_ARENA_BYTES ");
    ck_assert_ptr_nonnull(def);
    o.arena_bytes = (size_t)strtoull(def + strlen("#define model_ARENA_BYTES "), NULL, 10);
    free(h);
    snprintf(path, sizeof path, "%s/model/model.c", dir);
    char *c = tu_slurp(path);
    for (const char *p = strstr(c, "for ("); p; p = strstr(p + 1, "for ("))
        o.loops++;
    free(c);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (!getenv("FXCC_EWFUSE_KEEP")) /* keep the generated C to read it */
        ck_assert_int_eq(system(cmd), 0);
    for (int i = 0; i < ni; i++)
        tensor_free(in[i]);
    return o;
}


/* relu(x * 2 + 1): one node, one loop, nothing in the arena. */
START_TEST(test_chain)
{
    Graph *g = graph_new();
    Node *x = input(g, "x", FXRT_DTYPE_FLOAT32, 2, 3, 8);
    Node *m = tu_op3(g, "Mul", x, tu_scalar(g, "two", 2.0f), NULL);
    Node *a = tu_op3(g, "Add", m, tu_scalar(g, "one", 1.0f), NULL);
    Node *y = tu_op3(g, "Relu", a, NULL, NULL);
    tu_finish(g, &y, 1);
    Outcome o = run_case(g, "chain");
    ck_assert_int_eq(o.fused, 1);
    ck_assert_uint_eq(o.arena_bytes, 0);
    ck_assert_int_eq(o.loops, 1); /* [3, 8] is dense: one merged axis */
    graph_free(g);
}
END_TEST

/* a*b + c*d, a [4,1] against b [1,5]; c [5] broadcast, d [4,5]. */
START_TEST(test_tree_broadcast)
{
    Graph *g = graph_new();
    Node *a = input(g, "a", FXRT_DTYPE_FLOAT32, 2, 4, 1);
    Node *b = input(g, "b", FXRT_DTYPE_FLOAT32, 2, 1, 5);
    Node *c = input(g, "c", FXRT_DTYPE_FLOAT32, 1, 5, 0);
    Node *dd = input(g, "d", FXRT_DTYPE_FLOAT32, 2, 4, 5);
    Node *ab = tu_op3(g, "Mul", a, b, NULL);
    Node *cd = tu_op3(g, "Mul", c, dd, NULL);
    Node *y = tu_op3(g, "Add", ab, cd, NULL);
    tu_finish(g, &y, 1);
    Outcome o = run_case(g, "tree_broadcast");
    ck_assert_int_eq(o.fused, 1);
    ck_assert_uint_eq(o.arena_bytes, 0);
    graph_free(g);
}
END_TEST

/* t = sigmoid(x) also returned: t is the result of one group, the rest
 * (t * x, leaky(t*x) - x) another. */
START_TEST(test_outside_user_splits)
{
    Graph *g = graph_new();
    Node *x = input(g, "x", FXRT_DTYPE_FLOAT32, 2, 2, 6);
    Node *e = tu_op3(g, "Neg", x, NULL, NULL);
    Node *t = tu_op3(g, "Sigmoid", e, NULL, NULL);
    Node *m = tu_op3(g, "Mul", t, x, NULL);
    Node *l = tu_op3(g, "LeakyRelu", m, NULL, NULL);
    Node *y = tu_op3(g, "Sub", l, x, NULL);
    Node *outs[2] = {y, t};
    tu_finish(g, outs, 2);
    Outcome o = run_case(g, "outside_user");
    ck_assert_int_eq(o.fused, 2);
    graph_free(g);
}
END_TEST

/* e = exp(x) read twice inside the group: (e * 2) * (e + 1) is one group,
 * found only once both users of e have joined. */
START_TEST(test_diamond)
{
    Graph *g = graph_new();
    Node *x = input(g, "x", FXRT_DTYPE_FLOAT32, 0, 0, 0);
    Node *e = tu_op3(g, "Exp", x, NULL, NULL);
    Node *a = tu_op3(g, "Mul", e, tu_scalar(g, "two", 2.0f), NULL);
    Node *b = tu_op3(g, "Add", e, tu_scalar(g, "one", 1.0f), NULL);
    Node *y = tu_op3(g, "Mul", a, b, NULL);
    tu_finish(g, &y, 1);
    Outcome o = run_case(g, "diamond");
    ck_assert_int_eq(o.fused, 1);
    ck_assert_uint_eq(o.arena_bytes, 0);
    graph_free(g);
}
END_TEST

/* int64 arithmetic is not fused. */
START_TEST(test_integer_not_fused)
{
    Graph *g = graph_new();
    Node *a = input(g, "a", FXRT_DTYPE_INT64, 1, 6, 0);
    Node *b = input(g, "b", FXRT_DTYPE_INT64, 1, 6, 0);
    Node *s = tu_op3(g, "Add", a, b, NULL);
    Node *y = tu_op3(g, "Mul", s, b, NULL);
    tu_finish(g, &y, 1);
    PassResult r;
    ck_assert_int_eq(pass_elementwise_fusion(g, &r, &tu_diag), FX_OK);
    ck_assert_int_eq(r.changes, 0);
    ck_assert_int_eq(count_fused(g), 0);
    assert_golden(g, "integer");
    graph_free(g);
}
END_TEST

/* MatMul -> Add bias -> Relu -> MatMul -> Tanh*0.5: the bias+relu pair
 * fuses (the big bias stays an argument), MatMul stays, a lone Tanh*0.5
 * chain fuses too. */
START_TEST(test_mixed_with_matmul)
{
    Graph *g = graph_new();
    Node *x = input(g, "x", FXRT_DTYPE_FLOAT32, 2, 3, 4);
    int64_t w1d[2] = {4, 6}, bd[1] = {6}, w2d[2] = {6, 5};
    Node *w1 = tu_weights(g, "w1", 2, w1d, 0.1f);
    Node *bias = tu_weights(g, "bias", 1, bd, 0.05f);
    Node *w2 = tu_weights(g, "w2", 2, w2d, 0.1f);
    Node *h = tu_op3(g, "MatMul", x, w1, NULL);
    Node *hb = tu_op3(g, "Add", h, bias, NULL);
    Node *hr = tu_op3(g, "Relu", hb, NULL, NULL);
    Node *z = tu_op3(g, "MatMul", hr, w2, NULL);
    Node *zt = tu_op3(g, "Tanh", z, NULL, NULL);
    Node *y = tu_op3(g, "Mul", zt, tu_scalar(g, "half", 0.5f), NULL);
    tu_finish(g, &y, 1);
    Outcome o = run_case(g, "mixed_matmul");
    ck_assert_int_eq(o.fused, 2);
    int matmuls = 0;
    graph_for_each(g, n) matmuls += n->op == &fx_op_MatMul;
    ck_assert_int_eq(matmuls, 2);
    graph_free(g);
}
END_TEST

/* Many scalar forms in one chain, against the runtime's kernels. */
START_TEST(test_activations)
{
    Graph *g = graph_new();
    Node *x = input(g, "x", FXRT_DTYPE_FLOAT32, 2, 5, 7);
    Node *b = input(g, "bias", FXRT_DTYPE_FLOAT32, 1, 7, 0);
    Node *v = tu_op3(g, "Add", x, b, NULL);
    const char *unary[] = {"Sigmoid", "HardSwish", "Elu", "Selu", "Celu", "Softplus", "Softsign",
                           "Tanh", "Erf", "Abs", "Neg", "Exp", "HardSigmoid", "LeakyRelu",
                           "Floor", "Sin", "Cos", "Atan", "Sign"};
    for (size_t i = 0; i < sizeof unary / sizeof *unary; i++) {
        v = tu_op3(g, unary[i], v, NULL, NULL);
        if (i == 5)
            v = tu_op3(g, "Max", v, x, NULL);
        if (i == 9)
            v = tu_op3(g, "Clip", v, tu_scalar(g, "lo", -0.25f), tu_scalar(g, "hi", 0.75f));
        if (i == 11)
            v = tu_op3(g, "Pow", v, tu_scalar(g, "p", 1.5f), NULL);
    }
    Node *y = tu_op3(g, "Div", v, tu_op3(g, "Add", tu_op3(g, "Abs", x, NULL, NULL),
                                 tu_scalar(g, "eps", 1.0f), NULL), NULL);
    tu_finish(g, &y, 1);
    Outcome o = run_case(g, "activations");
    ck_assert_int_eq(o.fused, 1);
    ck_assert_uint_eq(o.arena_bytes, 0);
    graph_free(g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_ewfuse");
    TCase *t = tcase_create("ewfuse");
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_chain);
    tcase_add_test(t, test_tree_broadcast);
    tcase_add_test(t, test_outside_user_splits);
    tcase_add_test(t, test_diamond);
    tcase_add_test(t, test_integer_not_fused);
    tcase_add_test(t, test_mixed_with_matmul);
    tcase_add_test(t, test_activations);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
