/*
 * check_opt_epilogue.c - the epilogue fusion pass and the FusedConv /
 * FusedGemm module kinds: which chains fuse (printed graphs against golden
 * files under tests/golden/opt/epilogue/), that the interpreter's outputs
 * stay allclose to the unfused graph's, and that the generated C of the
 * fused graph, for the host and the portable target, agrees with the
 * interpreter running the unfused graph.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "opt_check_util.h"

typedef Graph *(*Builder)(void);

/* A node whose types the caller infers (tu_reinfer) once it has set the
 * attributes the shapes depend on. */
static Node *op_uninferred(Graph *g, const char *name, Node *a, Node *b, Node *c)
{
    Node *args[3] = {a, b, c};
    Node *n = graph_create_op(g, NULL, op_lookup(name), name, args, c ? 3 : 2);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(op_apply_attr_specs(n->op, n, &tu_diag), FX_OK);
    ck_assert(node_set_num_outputs(n, 1));
    return n;
}

/* Fuses build()'s graph, checks it against the interpreter's unfused
 * outputs and the golden file, then compiles it for both targets and
 * compares the compiled outputs with the interpreter running a fresh,
 * unfused copy.  Returns the fused graph. */
static Graph *run_case(Builder build, const char *name, int expect_changes)
{
    Graph *g = build(), *ref = build();
    ck_assert_int_eq(tu_run_pass(g, pass_epilogue_fusion, 1e-5, 1e-6), expect_changes);
    tu_assert_golden(g, "epilogue", name);

    tu_assert_compiled_matches(g, ref, name, 1e-4, 1e-5);
    graph_free(ref);
    return g;
}

static void assert_attr(const Graph *g, const char *op_name, const char *activation,
                        int residual_after)
{
    graph_for_each(g, n) if (n->op && strcmp(n->op->name, op_name) == 0)
    {
        ck_assert_str_eq(node_attr_string(n, "activation", "?"), activation);
        ck_assert_int_eq(node_attr_int(n, "residual_after", -1), residual_after);
        return;
    }
    ck_abort_msg("no %s node", op_name);
}

/* relu(conv(x, w) + b[4, 1, 1]): the bias Add becomes the fused node's B. */
static Graph *build_conv_bias_relu(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 3, 9, 9);
    Node *c = tu_conv(g, x, tu_weights_f32(g, "w", 4, 4, 3, 3, 3, 0.05f), NULL, 1, 1, 1);
    Node *a = tu_op3(g, "Add", c, tu_weights_f32(g, "b", 3, 4, 1, 1, 0, 0.1f), NULL);
    Node *y = tu_op3(g, "Relu", a, NULL, NULL);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_conv_bias_relu)
{
    Graph *g = run_case(build_conv_bias_relu, "conv_bias_relu", 1);
    ck_assert_int_eq(tu_count_op(g, "FusedConv"), 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    assert_attr(g, "FusedConv", "relu", 0);
    graph_free(g);
}
END_TEST

/* ResNet's block end: relu(conv(x, w, b) + x), the residual before the
 * activation; the Conv keeps its own bias. */
static Graph *build_conv_residual_relu(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 4, 7, 7);
    Node *c = tu_conv(g, x, tu_weights_f32(g, "w", 4, 4, 4, 3, 3, 0.04f),
                   tu_weights_f32(g, "b", 1, 4, 0, 0, 0, 0.1f), 1, 1, 1);
    Node *a = tu_op3(g, "Add", c, x, NULL);
    Node *y = tu_op3(g, "Relu", a, NULL, NULL);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_conv_residual_relu)
{
    Graph *g = run_case(build_conv_residual_relu, "conv_residual_relu", 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    assert_attr(g, "FusedConv", "relu", 0);
    graph_free(g);
}
END_TEST

/* relu(conv(x)) + r, the residual after the activation, operands of the
 * Add swapped; a strided im2col conv. */
static Graph *build_conv_relu_residual(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 2, 10, 10);
    Node *r = tu_input_f32(g, "r", 4, 1, 3, 5, 5);
    Node *c = tu_conv(g, x, tu_weights_f32(g, "w", 4, 3, 2, 3, 3, 0.05f), NULL, 1, 2, 1);
    Node *a = tu_op3(g, "Relu", c, NULL, NULL);
    Node *y = tu_op3(g, "Add", r, a, NULL);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_conv_relu_residual)
{
    Graph *g = run_case(build_conv_relu_residual, "conv_relu_residual", 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    assert_attr(g, "FusedConv", "relu", 1);
    graph_free(g);
}
END_TEST

/* Gemm(a, w^T, c) -> Clip(0, 6) with several rows (the microkernel and,
 * on host, the row blocks), and transA. */
static Graph *build_gemm_clip(void)
{
    Graph *g = graph_new();
    int64_t ad[2] = {7, 5};
    Node *a = tu_input(g, "a", FXRT_DTYPE_FLOAT32, 2, ad);
    Node *gm = op_uninferred(g, "Gemm", a, tu_weights_f32(g, "w", 2, 9, 7, 0, 0, 0.3f),
                             tu_weights_f32(g, "c", 1, 9, 0, 0, 0, 0.5f));
    node_set_attr_int(gm, "transA", 1);
    node_set_attr_int(gm, "transB", 1);
    node_set_attr_float(gm, "alpha", 0.5f);
    tu_reinfer(gm);
    Node *y = tu_op3(g, "Clip", gm, tu_scalar(g, "lo", 0.0f), tu_scalar(g, "hi", 6.0f));
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_gemm_clip)
{
    Graph *g = run_case(build_gemm_clip, "gemm_clip", 1);
    ck_assert_int_eq(tu_count_op(g, "FusedGemm"), 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    assert_attr(g, "FusedGemm", "clip", 0);
    graph_free(g);
}
END_TEST

/* The transformer's FFN: x [1, 6, 8] -> MatMul(W1) + b1 -> exact GELU (the
 * Erf form) -> MatMul(W2) + b2 -> + x.  Two FusedGemm nodes: bias + gelu,
 * then bias + residual. */
static Graph *build_ffn(void)
{
    Graph *g = graph_new();
    int64_t xd[3] = {1, 6, 8};
    Node *x = tu_input(g, "x", FXRT_DTYPE_FLOAT32, 3, xd);
    Node *h = tu_op3(g, "MatMul", x, tu_weights_f32(g, "w1", 2, 8, 16, 0, 0, 0.1f), NULL);
    h = tu_op3(g, "Add", h, tu_weights_f32(g, "b1", 1, 16, 0, 0, 0, 0.05f), NULL);
    Node *e = tu_op3(g, "Div", h, tu_scalar(g, "sqrt2", sqrtf(2.0f)), NULL);
    e = tu_op3(g, "Erf", e, NULL, NULL);
    e = tu_op3(g, "Add", e, tu_scalar(g, "one", 1.0f), NULL);
    Node *gl = tu_op3(g, "Mul", tu_op3(g, "Mul", h, e, NULL), tu_scalar(g, "half", 0.5f), NULL);
    Node *f = tu_op3(g, "MatMul", gl, tu_weights_f32(g, "w2", 2, 16, 8, 0, 0, 0.1f), NULL);
    f = tu_op3(g, "Add", f, tu_weights_f32(g, "b2", 1, 8, 0, 0, 0, 0.05f), NULL);
    Node *y = tu_op3(g, "Add", x, f, NULL);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_transformer_ffn)
{
    Graph *g = run_case(build_ffn, "ffn", 2);
    ck_assert_int_eq(tu_count_op(g, "FusedGemm"), 2);
    ck_assert_int_eq(tu_count_calls(g), 2);
    graph_free(g);
}
END_TEST

/* The Gelu op (opset 20): x [1, 6, 8] -> MatMul(W1) + b1 -> Gelu, exact,
 * becomes one FusedGemm with the GELU epilogue; the same product with the
 * tanh form keeps its Gelu (the epilogue computes the exact form only). */
static Graph *build_gelu_op(void)
{
    Graph *g = graph_new();
    int64_t xd[3] = {1, 6, 8};
    Node *x = tu_input(g, "x", FXRT_DTYPE_FLOAT32, 3, xd);
    Node *outs[2];
    for (int i = 0; i < 2; i++) {
        char name[8];
        snprintf(name, sizeof name, "w%d", i);
        Node *h = tu_op3(g, "MatMul", x, tu_weights_f32(g, name, 2, 8, 16, 0, 0, 0.3f), NULL);
        snprintf(name, sizeof name, "b%d", i);
        h = tu_op3(g, "Add", h, tu_weights_f32(g, name, 1, 16, 0, 0, 0, 0.2f), NULL);
        outs[i] = tu_op3(g, "Gelu", h, NULL, NULL);
        if (i == 1)
            node_set_attr_string(outs[i], "approximate", "tanh");
    }
    tu_finish(g, outs, 2);
    return g;
}

START_TEST(test_gelu_op)
{
    Graph *g = run_case(build_gelu_op, "gelu_op", 2);
    ck_assert_int_eq(tu_count_op(g, "FusedGemm"), 2);
    ck_assert_int_eq(tu_count_op(g, "Gelu"), 1);
    graph_for_each(g, n) if (n->op && strcmp(n->op->name, "FusedGemm") == 0 &&
                             n->num_users == 1 && n->users[0]->opcode == FX_OPCODE_OUTPUT)
        ck_assert_str_eq(node_attr_string(n, "activation", "?"), "gelu");
    graph_free(g);
}
END_TEST

/* Every activation after a bias, one branch each, over the three conv
 * algorithms (implicit GEMM, depthwise, 1x1), a Gemm, and a MatMul with an
 * unscaled GELU and no bias. */
static Graph *build_activations(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 4, 6, 6);
    int64_t ad[2] = {3, 6};
    Node *a = tu_input(g, "a", FXRT_DTYPE_FLOAT32, 2, ad);
    const char *acts[] = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSwish", "HardSigmoid",
                          "Tanh"};
    Node *outs[10];
    int k = 0;
    for (int i = 0; i < 7; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%d", i);
        Node *c;
        if (i % 3 == 0)
            c = tu_conv(g, x, tu_weights_f32(g, name, 4, 4, 4, 3, 3, 0.05f), NULL, 1, 1, 1);
        else if (i % 3 == 1)
            c = tu_conv(g, x, tu_weights_f32(g, name, 4, 4, 1, 3, 3, 0.1f), NULL, 1, 1, 4);
        else
            c = tu_conv(g, x, tu_weights_f32(g, name, 4, 4, 4, 1, 1, 0.1f), NULL, 0, 1, 1);
        snprintf(name, sizeof name, "b%d", i);
        Node *biased = tu_op3(g, "Add", tu_weights_f32(g, name, 3, 4, 1, 1, 0, 0.1f), c, NULL);
        Node *y;
        if (i == 1) {
            y = tu_op3(g, "Clip", biased, tu_scalar(g, "lo", -0.2f), NULL);
        } else {
            y = tu_op3(g, acts[i], biased, NULL, NULL);
            if (i == 2)
                node_set_attr_float(y, "alpha", 0.3f);
            if (i == 5) {
                node_set_attr_float(y, "alpha", 0.4f);
                node_set_attr_float(y, "beta", 0.6f);
            }
        }
        outs[k++] = y;
    }
    Node *gm = tu_op3(g, "Gemm", a, tu_weights_f32(g, "wg", 2, 6, 5, 0, 0, 0.2f), NULL);
    outs[k++] = tu_op3(g, "Sigmoid",
                       tu_op3(g, "Add", gm, tu_weights_f32(g, "bg", 2, 1, 5, 0, 0, 0.1f), NULL),
                       NULL, NULL);
    /* GELU whose final 0.5 a fold has moved into the next layer. */
    Node *mm = tu_op3(g, "MatMul", a, tu_weights_f32(g, "wm", 2, 6, 7, 0, 0, 0.2f), NULL);
    Node *e = tu_op3(g, "Erf", tu_op3(g, "Div", mm, tu_scalar(g, "sqrt2", sqrtf(2.0f)), NULL),
                     NULL, NULL);
    outs[k++] = tu_op3(g, "Mul", tu_op3(g, "Add", tu_scalar(g, "one", 1.0f), e, NULL), mm, NULL);
    tu_finish(g, outs, k);
    return g;
}

START_TEST(test_activations)
{
    Graph *g = run_case(build_activations, "activations", 9);
    ck_assert_int_eq(tu_count_op(g, "FusedConv"), 7);
    ck_assert_int_eq(tu_count_op(g, "FusedGemm"), 2);
    ck_assert_int_eq(tu_count_calls(g), 9);
    graph_free(g);
}
END_TEST

/* The Conv's value is also returned: nothing fuses.  In a second chain the
 * Relu's value is read twice: conv + bias + relu fuses, the Adds after it
 * stay. */
static Graph *build_used_twice(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 2, 5, 5);
    Node *c1 = tu_conv(g, x, tu_weights_f32(g, "w1", 4, 2, 2, 3, 3, 0.1f), NULL, 1, 1, 1);
    Node *a1 = tu_op3(g, "Add", c1, tu_weights_f32(g, "b1", 3, 2, 1, 1, 0, 0.1f), NULL);
    Node *c2 = tu_conv(g, x, tu_weights_f32(g, "w2", 4, 2, 2, 3, 3, 0.1f), NULL, 1, 1, 1);
    Node *a2 = tu_op3(g, "Add", c2, tu_weights_f32(g, "b2", 3, 2, 1, 1, 0, 0.1f), NULL);
    Node *r2 = tu_op3(g, "Relu", a2, NULL, NULL);
    Node *y2 = tu_op3(g, "Add", r2, x, NULL);
    Node *z2 = tu_op3(g, "Add", r2, y2, NULL);
    Node *outs[3] = {a1, c1, z2};
    tu_finish(g, outs, 3);
    return g;
}

START_TEST(test_used_twice)
{
    Graph *g = run_case(build_used_twice, "used_twice", 1);
    ck_assert_int_eq(tu_count_op(g, "Conv"), 1);
    ck_assert_int_eq(tu_count_op(g, "FusedConv"), 1);
    ck_assert_int_eq(tu_count_op(g, "Add"), 3);
    graph_free(g);
}
END_TEST

/* Adds that are neither a bias nor a residual: a non-constant [4, 1, 1]
 * (it broadcasts, so it is not of the output's type) and a constant that
 * varies along the width. */
START_TEST(test_not_a_bias)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 3, 4, 4);
    int64_t sd[3] = {4, 1, 1};
    Node *s = tu_input(g, "s", FXRT_DTYPE_FLOAT32, 3, sd);
    Node *c1 = tu_conv(g, x, tu_weights_f32(g, "w1", 4, 4, 3, 3, 3, 0.1f), NULL, 1, 1, 1);
    Node *y1 = tu_op3(g, "Add", c1, s, NULL);
    Node *c2 = tu_conv(g, x, tu_weights_f32(g, "w2", 4, 4, 3, 3, 3, 0.1f), NULL, 1, 1, 1);
    Node *y2 = tu_op3(g, "Add", c2, tu_weights_f32(g, "row", 1, 4, 0, 0, 0, 0.1f), NULL);
    Node *outs[2] = {y1, y2};
    tu_finish(g, outs, 2);
    ck_assert_int_eq(tu_run_pass(g, pass_epilogue_fusion, 1e-6, 1e-7), 0);
    ck_assert_int_eq(tu_count_op(g, "Conv"), 2);
    ck_assert_int_eq(tu_count_op(g, "Add"), 2);
    tu_assert_golden(g, "epilogue", "not_a_bias");
    graph_free(g);
}
END_TEST

/* A MatMul by a non-constant B and an int64 MatMul are not anchors. */
START_TEST(test_matmul_not_anchor)
{
    Graph *g = graph_new();
    int64_t ad[2] = {3, 4}, bd[2] = {4, 5};
    Node *a = tu_input(g, "a", FXRT_DTYPE_FLOAT32, 2, ad);
    Node *b = tu_input(g, "b", FXRT_DTYPE_FLOAT32, 2, bd);
    Node *y = tu_op3(g, "Relu", tu_op3(g, "MatMul", a, b, NULL), NULL, NULL);
    Node *ia = tu_input(g, "ia", FXRT_DTYPE_INT64, 2, ad);
    Node *ib = tu_input(g, "ib", FXRT_DTYPE_INT64, 2, bd);
    Node *z = tu_op3(g, "Relu", tu_op3(g, "MatMul", ia, ib, NULL), NULL, NULL);
    Node *outs[2] = {y, z};
    tu_finish(g, outs, 2);
    PassResult r;
    ck_assert_int_eq(pass_epilogue_fusion(g, &r, &tu_diag), FX_OK);
    ck_assert_int_eq(r.changes, 0);
    ck_assert_int_eq(tu_count_op(g, "MatMul"), 2);
    graph_free(g);
}
END_TEST

/* FusedConv refuses a residual of another shape and an unknown
 * activation, naming the node. */
START_TEST(test_fused_conv_refuses)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 2, 4, 4);
    Node *r = tu_input_f32(g, "r", 4, 1, 2, 3, 3);
    Node *w = tu_weights_f32(g, "w", 4, 2, 2, 3, 3, 0.1f);
    Node *args[4] = {x, w, NULL, r};
    Node *f = graph_create_module(g, NULL, &fx_op_FusedConv, "f", args, 4);
    ck_assert_int_eq(op_apply_attr_specs(f->op, f, &tu_diag), FX_OK);
    int64_t pads[4] = {1, 1, 1, 1};
    node_set_attr_ints(f, "pads", pads, 4);
    ck_assert(node_set_num_outputs(f, 1));
    ck_assert_int_eq(node_infer_shapes(f, &tu_diag), FX_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tu_diag.entries[tu_diag.count - 1].message, "residual"));
    node_clear_arg(f, 3);
    node_set_attr_string(f, "activation", "swish");
    ck_assert_int_eq(node_infer_shapes(f, &tu_diag), FX_ERR_INVALID);
    node_set_attr_string(f, "activation", "relu");
    ck_assert_int_eq(node_infer_shapes(f, &tu_diag), FX_OK);
    graph_free(g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_epilogue");
    TCase *t = tcase_create("epilogue");
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_conv_bias_relu);
    tcase_add_test(t, test_conv_residual_relu);
    tcase_add_test(t, test_conv_relu_residual);
    tcase_add_test(t, test_gemm_clip);
    tcase_add_test(t, test_transformer_ffn);
    tcase_add_test(t, test_gelu_op);
    tcase_add_test(t, test_activations);
    tcase_add_test(t, test_used_twice);
    tcase_add_test(t, test_not_a_bias);
    tcase_add_test(t, test_matmul_not_anchor);
    tcase_add_test(t, test_fused_conv_refuses);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
