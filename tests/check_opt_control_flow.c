/*
 * check_opt_control_flow.c - If, Loop and Scan as written (their eval
 * kernels, not the pipeline's unrolled form) against the ONNX backend
 * tests' reference outputs, and the graph-level pieces: bodies copied with
 * the graph, printed, linted, and an If with a known condition folded.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "opt/opt.h"
#include "opt_check_util.h"

#define NODE_TESTS "/usr/share/libonnx-testdata/data/node/"

static Tensor *read_pb(const char *test, const char *file)
{
    char path[512];
    snprintf(path, sizeof path, NODE_TESTS "%s/test_data_set_0/%s", test, file);
    Diag d;
    diag_init(&d);
    Tensor *t = NULL;
    ck_assert_msg(tensor_file_read(path, &t, &d) == FX_OK, "cannot read %s", path);
    diag_free(&d);
    return t;
}

/* Loads the test's model; inputs listed in `frozen` (by index) become
 * constants, the rest run; the outputs must match the reference. */
static void check_as_written(const char *test, const OpDef *op, int num_inputs,
                             const int *frozen, int num_frozen, int num_outputs)
{
    char path[512];
    snprintf(path, sizeof path, NODE_TESTS "%s/model.onnx", test);
    Diag d;
    diag_init(&d);
    Graph *g = NULL;
    ck_assert_msg(onnx_load(path, NULL, &g, &d) == FX_OK, "%s does not load", test);
    Tensor *inputs[8] = {NULL};
    const Tensor *fed[8];
    int num_fed = 0;
    Node *phs[8];
    for (int k = 0; k < num_inputs; k++)
        phs[k] = graph_placeholder(g, k);
    for (int k = 0; k < num_inputs; k++) {
        char file[64];
        snprintf(file, sizeof file, "input_%d.pb", k);
        inputs[k] = read_pb(test, file);
        bool freeze = false;
        for (int f = 0; f < num_frozen; f++)
            freeze |= frozen[f] == k;
        if (freeze) {
            ck_assert(graph_freeze_input(g, phs[k], inputs[k], &d) == FX_OK);
            inputs[k] = NULL;
        } else {
            fed[num_fed++] = inputs[k];
        }
    }
    ck_assert_msg(graph_propagate_shapes(g, NULL, 0, &d) == FX_OK, "%s: shapes", test);
    ck_assert(graph_lint(g, true, &d) == FX_OK);
    ck_assert_int_eq(tu_count_op(g, op->name), 1); /* as written, not unrolled */
    Tensor *outs[4] = {NULL};
    ck_assert_msg(interp_run(g, fed, num_fed, outs, num_outputs, NULL, NULL, &d) == FX_OK,
                  "%s: run", test);
    for (int k = 0; k < num_outputs; k++) {
        char file[64];
        snprintf(file, sizeof file, "output_%d.pb", k);
        Tensor *want = read_pb(test, file);
        CompareResult r = tensor_compare(outs[k], want, 1e-5, 1e-6);
        ck_assert_msg(r.ok, "%s output %d: max abs %g", test, k, r.max_abs);
        tensor_free(want);
        tensor_free(outs[k]);
    }
    for (int k = 0; k < num_inputs; k++)
        tensor_free(inputs[k]);
    diag_free(&d);
    graph_free(g);
}

START_TEST(test_if_as_written)
{
    check_as_written("test_if", &fx_op_If, 1, NULL, 0, 1);
}
END_TEST

START_TEST(test_loop_as_written)
{
    /* Range's function body: a Loop over a carried value with a scan output
     * (test_loop11's body slices at the iteration number, which only its
     * unrolled copies can do with static shapes) */
    const int frozen[] = {0, 1, 2};
    check_as_written("test_range_float_type_positive_delta_expanded", &fx_op_Loop, 3, frozen, 3,
                     1);
    check_as_written("test_range_int32_type_negative_delta_expanded", &fx_op_Loop, 3, frozen, 3,
                     1);
}
END_TEST

START_TEST(test_scan_as_written)
{
    check_as_written("test_scan9_sum", &fx_op_Scan, 2, NULL, 0, 2);
    check_as_written("test_scan_sum", &fx_op_Scan, 2, NULL, 0, 2); /* opset 8: batched */
}
END_TEST

/* An If with a constant condition becomes its taken branch; the copy of a
 * graph holds copies of the bodies, which print under the node's name. */
START_TEST(test_fold_and_copy)
{
    Diag d;
    diag_init(&d);
    Graph *g = NULL;
    ck_assert(onnx_load(NODE_TESTS "test_if/model.onnx", NULL, &g, &d) == FX_OK);
    Graph *copy = graph_clone(g, &d);
    ck_assert_ptr_nonnull(copy);
    Node *if_node = NULL;
    for (Node *n = copy->root.next; n != &copy->root; n = n->next)
        if (n->op == &fx_op_If)
            if_node = n;
    ck_assert_ptr_nonnull(if_node);
    ck_assert_ptr_nonnull(if_node->body);
    ck_assert_ptr_nonnull(if_node->else_body);
    ck_assert_ptr_ne(if_node->body, graph_find(g, if_node->name)->body);
    char *text = tu_print(copy);
    ck_assert_ptr_nonnull(strstr(text, ".then_branch = graph():"));
    ck_assert_ptr_nonnull(strstr(text, ".else_branch = graph():"));
    free(text);

    Tensor *no = read_pb("test_if", "input_0.pb");
    *(uint8_t *)no->data = 0;
    ck_assert(graph_freeze_input(g, graph_placeholder(g, 0), no, &d) == FX_OK);
    ck_assert(graph_propagate_shapes(g, NULL, 0, &d) == FX_OK);
    ck_assert_int_eq(fold_constant_ifs(g, &d), 1);
    ck_assert_int_eq(tu_count_op(g, "If"), 0);
    ck_assert(graph_propagate_shapes(g, NULL, 0, &d) == FX_OK);
    ck_assert(graph_lint(g, true, &d) == FX_OK);
    Tensor *out = NULL;
    ck_assert(interp_run(g, NULL, 0, &out, 1, NULL, NULL, &d) == FX_OK);
    /* test_if's else branch is [5, 4, 3, 2, 1] */
    ck_assert_int_eq(tensor_numel(out), 5);
    for (int i = 0; i < 5; i++)
        ck_assert_double_eq_tol(tensor_get_float(out, i), 5 - i, 1e-6);
    tensor_free(out);
    graph_free(copy);
    graph_free(g);
    diag_free(&d);
}
END_TEST

static Suite *control_flow_suite(void)
{
    Suite *s = suite_create("control_flow");
    TCase *tc = tcase_create("control_flow");
    tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
    tcase_add_test(tc, test_if_as_written);
    tcase_add_test(tc, test_loop_as_written);
    tcase_add_test(tc, test_scan_as_written);
    tcase_add_test(tc, test_fold_and_copy);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(control_flow_suite()); }
