/*
 * check_opt_gemmpack.c - the gemm-pack pass: which float products it moves
 * onto GemmPacked (B packed at compile time) and which it leaves alone,
 * that the epilogue (bias, activation, residual) and alpha survive the move,
 * and that the packed graph gives the unpacked graph's numbers in the
 * interpreter and compiled for both targets.  K = 45 and N = 37 or 19 are
 * not multiples of any panel width, so every tail of the packed tile runs.
 */
#include <string.h>

#include "opt_check_util.h"

enum { ROWS = 6, K = 45, N = 37 };

/* A Gemm with its attributes set before its types are inferred. */
static Node *gemm(Graph *g, Node *a, Node *b, Node *c, int trans_a, int trans_b, float alpha,
                  float beta)
{
    Node *args[3] = {a, b, c};
    Node *y = graph_create_op(g, NULL, op_lookup("Gemm"), "Gemm", args, c ? 3 : 2);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(op_apply_attr_specs(y->op, y, &tu_diag), FX_OK);
    ck_assert(node_set_num_outputs(y, 1));
    ck_assert_ptr_nonnull(node_set_attr_int(y, "transA", trans_a));
    ck_assert_ptr_nonnull(node_set_attr_int(y, "transB", trans_b));
    ck_assert_ptr_nonnull(node_set_attr_float(y, "alpha", alpha));
    ck_assert_ptr_nonnull(node_set_attr_float(y, "beta", beta));
    tu_reinfer(y);
    return y;
}

/* Four products the pass packs:
 *   relu(Gemm(a, W1^T) + c1)        -> FusedGemm with bias and relu
 *   Gemm(a, W2; alpha 0.5)          -> plain Gemm, no C
 *   MatMul(t, W3) + b3 + t          -> FusedGemm, rank-3 A, bias, residual
 *   Gemm(a, W4, C4 [ROWS, N])       -> plain Gemm, a full C */
static Graph *build_packable(void)
{
    Graph *g = graph_new();
    Node *a = tu_input_f32(g, "a", 2, ROWS, K, 0, 0);
    Node *t = tu_input_f32(g, "t", 3, 2, 5, K, 0);
    Node *y1 = gemm(g, a, tu_weights_f32(g, "w1", 2, N, K, 0, 0, 0.05f),
                    tu_weights_f32(g, "c1", 1, N, 0, 0, 0, 0.1f), 0, 1, 1.0f, 1.0f);
    y1 = tu_op3(g, "Relu", y1, NULL, NULL);
    Node *y2 = gemm(g, a, tu_weights_f32(g, "w2", 2, K, N, 0, 0, 0.05f), NULL, 0, 0, 0.5f, 1.0f);
    Node *y3 = tu_op3(g, "MatMul", t, tu_weights_f32(g, "w3", 2, K, K, 0, 0, 0.05f), NULL);
    y3 = tu_op3(g, "Add", y3, tu_weights_f32(g, "b3", 1, K, 0, 0, 0, 0.1f), NULL);
    y3 = tu_op3(g, "Add", y3, t, NULL);
    Node *y4 = gemm(g, a, tu_weights_f32(g, "w4", 2, K, 19, 0, 0, 0.05f),
                    tu_weights_f32(g, "c4", 2, ROWS, 19, 0, 0, 0.1f), 0, 0, 1.0f, 1.0f);
    Node *outs[4] = {y1, y2, y3, y4};
    tu_finish(g, outs, 4);
    return g;
}

START_TEST(test_products_packed)
{
    Graph *g = build_packable(), *ref = build_packable();
    ck_assert_int_eq(tu_run_pass(g, pass_epilogue_fusion, 1e-5, 1e-6), 2);
    ck_assert_int_eq(tu_count_op(g, "FusedGemm"), 2);
    ck_assert_int_eq(tu_run_pass(g, pass_gemm_pack, 1e-5, 1e-5), 4);
    ck_assert_int_eq(tu_count_op(g, "GemmPacked"), 4);
    ck_assert_int_eq(tu_count_calls(g), 4);
    tu_assert_golden(g, "gemmpack", "packable");

    /* the epilogue and alpha moved with the product: one relu with its
     * bias, one residual, one alpha 0.5 with no C */
    int relu = 0, residual = 0, scaled = 0;
    graph_for_each(g, n) if (n->op && strcmp(n->op->name, "GemmPacked") == 0)
    {
        if (strcmp(node_attr_string(n, "activation", "none"), "relu") == 0)
            relu += n->num_args == 3;
        residual += n->num_args == 4;
        scaled += node_attr_float(n, "alpha", 1.0f) == 0.5f && n->num_args == 2;
    }
    ck_assert_int_eq(relu, 1);
    ck_assert_int_eq(residual, 1);
    ck_assert_int_eq(scaled, 1);
    /* B is erased once packed: the only weights left are biases and C */
    graph_for_each(g, n) if (n->opcode == FX_OPCODE_GET_ATTR)
        ck_assert_msg(n->name[0] != 'w', "%s is still in the graph", n->name);

    tu_assert_compiled_matches(g, ref, "gemm_pack", 1e-4, 1e-5);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* What the packed GEMM cannot take, or gains nothing from, stays: one row
 * (the GEMV streams B once), beta != 1 (GemmPacked adds C unscaled), transA,
 * and a B that is not a constant. */
static Graph *build_left_alone(void)
{
    Graph *g = graph_new();
    Node *row = tu_input_f32(g, "row", 2, 1, K, 0, 0);
    Node *a = tu_input_f32(g, "a", 2, ROWS, K, 0, 0);
    Node *at = tu_input_f32(g, "at", 2, K, ROWS, 0, 0);
    Node *b = tu_input_f32(g, "b", 2, K, N, 0, 0);
    Node *outs[4] = {
        gemm(g, row, tu_weights_f32(g, "w1", 2, K, N, 0, 0, 0.05f), NULL, 0, 0, 1.0f, 1.0f),
        gemm(g, a, tu_weights_f32(g, "w2", 2, K, N, 0, 0, 0.05f),
             tu_weights_f32(g, "c2", 1, N, 0, 0, 0, 0.1f), 0, 0, 1.0f, 0.5f),
        gemm(g, at, tu_weights_f32(g, "w3", 2, K, N, 0, 0, 0.05f), NULL, 1, 0, 1.0f, 1.0f),
        tu_op3(g, "MatMul", a, b, NULL),
    };
    tu_finish(g, outs, 4);
    return g;
}

START_TEST(test_left_alone)
{
    Graph *g = build_left_alone();
    ck_assert_int_eq(tu_run_pass(g, pass_gemm_pack, 0.0, 0.0), 0);
    ck_assert_int_eq(tu_count_op(g, "GemmPacked"), 0);
    ck_assert_int_eq(tu_count_op(g, "Gemm"), 3);
    ck_assert_int_eq(tu_count_op(g, "MatMul"), 1);
    graph_free(g);
}
END_TEST

/* -O2 packs on the host only: the portable pipeline keeps the FusedGemm
 * (flash a microcontroller keeps, no faster tile to feed). */
START_TEST(test_host_only)
{
    for (int portable = 0; portable < 2; portable++) {
        Graph *g = build_packable();
        PassOptions po = {.portable = portable != 0};
        FxStatus st = opt_run_level(g, 2, &po, &tu_diag);
        if (st != FX_OK)
            diag_print(&tu_diag, stderr);
        ck_assert_int_eq(st, FX_OK);
        ck_assert_int_eq(tu_count_op(g, "GemmPacked"), (portable ? 0 : 4));
        ck_assert_int_eq(tu_count_op(g, "FusedGemm") + tu_count_op(g, "Gemm"), (portable ? 4 : 0));
        graph_free(g);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_gemmpack");
    TCase *t = tcase_create("gemm_pack");
    tcase_set_timeout(t, 300);
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_add_test(t, test_products_packed);
    tcase_add_test(t, test_left_alone);
    tcase_add_test(t, test_host_only);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
