/*
 * check_opt_attention.c - the attention-fusion pass and the Attention op:
 * the exporters' forms of scaled dot-product attention become one Attention
 * node (scale from the scalar factors, K read through its Transpose or as
 * stored, the mask, the head merge's permutation), the interpreter's
 * outputs stay allclose to the unfused graph's, the compiled code (host and
 * portable) agrees with the unfused graph; and graphs that are not that
 * attention, or whose pieces someone else reads, are left alone.  Also the
 * op's own shape errors, which name the node.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opt_check_util.h"

static Node *with_ints(Node *n, const char *attr, const int64_t *v, int64_t count)
{
    ck_assert_ptr_nonnull(node_set_attr_ints(n, attr, v, count));
    tu_reinfer(n);
    return n;
}

static Node *with_int(Node *n, const char *attr, int64_t v)
{
    ck_assert_ptr_nonnull(node_set_attr_int(n, attr, v));
    tu_reinfer(n);
    return n;
}

static Node *transpose(Graph *g, Node *x, const int64_t *perm, int rank)
{
    return with_ints(tu_op3(g, "Transpose", x, NULL, NULL), "perm", perm, rank);
}

static const int64_t swap_last[4] = {0, 1, 3, 2}, head_merge[4] = {0, 2, 1, 3};

/* The fused graph against the unfused one, interpreted and compiled. */
static int fuse_and_check(Graph *g, Graph *ref, const char *name)
{
    int changes = tu_run_pass(g, pass_attention_fusion, 1e-4, 1e-5);
    tu_assert_compiled_matches(g, ref, name, 1e-4, 1e-5);
    return changes;
}

static const Node *only_attention(const Graph *g)
{
    ck_assert_int_eq(tu_count_op(g, "Attention"), 1);
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        if (node_is_op(n, &fx_op_Attention))
            return n;
    return NULL;
}

/* torch's nn.MultiheadAttention export: Q and K^T each scaled by
 * d^-1/4, K^T a Transpose of the last two axes, 2 heads of 4, 5 positions. */
static void build_torch_form(Graph *g)
{
    Node *q = tu_input_f32(g, "q", 4, 1, 2, 5, 4), *k = tu_input_f32(g, "k", 4, 1, 2, 5, 4);
    Node *v = tu_input_f32(g, "v", 4, 1, 2, 5, 4);
    Node *s = tu_scalar(g, "s", 1.0f / sqrtf(2.0f));
    Node *qs = tu_op3(g, "Mul", q, s, NULL);
    Node *kts = tu_op3(g, "Mul", transpose(g, k, swap_last, 4), s, NULL);
    Node *p = tu_op3(g, "Softmax", tu_op3(g, "MatMul", qs, kts, NULL), NULL, NULL);
    Node *y = tu_op3(g, "MatMul", p, v, NULL);
    tu_finish(g, &y, 1);
}

START_TEST(test_torch_form)
{
    Graph *g = graph_new(), *ref = graph_new();
    build_torch_form(g);
    build_torch_form(ref);
    ck_assert_int_eq(fuse_and_check(g, ref, "attention_torch"), 1);
    const Node *a = only_attention(g);
    ck_assert_float_eq_tol(node_attr_float(a, "scale", 0.0f), 0.5f, 1e-7f);
    ck_assert_int_eq(node_attr_int(a, "k_transposed", -1), 0);
    ck_assert_str_eq(a->args[1]->name, "k"); /* the Transpose is gone */
    ck_assert_int_eq(tu_count_op(g, "Softmax") + tu_count_op(g, "MatMul") +
                             tu_count_op(g, "Mul") + tu_count_op(g, "Transpose"),
                     0);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* The scores divided by sqrt(d) with an additive mask input broadcast over
 * the heads, K given already transposed ([.., D, Lk]), Lq 5 != Lk 7, D 4,
 * Dv 3, and the mask's Add written mask-first. */
static void build_div_mask_form(Graph *g)
{
    Node *q = tu_input_f32(g, "q", 4, 2, 2, 5, 4), *kt = tu_input_f32(g, "kt", 4, 2, 2, 4, 7);
    Node *v = tu_input_f32(g, "v", 4, 2, 2, 7, 3), *mask = tu_input_f32(g, "mask", 3, 1, 5, 7, 0);
    Node *scores = tu_op3(g, "Div", tu_op3(g, "MatMul", q, kt, NULL), tu_scalar(g, "d", 2.0f),
                          NULL);
    Node *p = tu_op3(g, "Softmax", tu_op3(g, "Add", mask, scores, NULL), NULL, NULL);
    Node *y = tu_op3(g, "MatMul", p, v, NULL);
    tu_finish(g, &y, 1);
}

START_TEST(test_div_mask_form)
{
    Graph *g = graph_new(), *ref = graph_new();
    build_div_mask_form(g);
    build_div_mask_form(ref);
    ck_assert_int_eq(fuse_and_check(g, ref, "attention_div_mask"), 1);
    const Node *a = only_attention(g);
    ck_assert_float_eq_tol(node_attr_float(a, "scale", 0.0f), 0.5f, 1e-7f);
    ck_assert_int_eq(node_attr_int(a, "k_transposed", -1), 1);
    ck_assert_int_eq(a->num_args, 4);
    ck_assert_str_eq(a->args[3]->name, "mask");
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* After layout-cleanup: K^T as the first TransposedMatMul's perm_b, the
 * head merge as the second's perm_y, which the Attention takes over; a
 * constant mask shared by every batch and head. */
static void build_layout_form(Graph *g)
{
    Node *q = tu_input_f32(g, "q", 4, 2, 3, 6, 8), *k = tu_input_f32(g, "k", 4, 2, 3, 6, 8);
    Node *v = tu_input_f32(g, "v", 4, 2, 3, 6, 5);
    Node *scores = tu_op3(g, "MatMul", q, transpose(g, k, swap_last, 4), NULL);
    Node *scaled = tu_op3(g, "Mul", tu_scalar(g, "scale", 0.25f), scores, NULL);
    Node *masked = tu_op3(g, "Add", scaled, tu_weights_f32(g, "bias", 2, 6, 6, 0, 0, 0.5f), NULL);
    Node *p = tu_op3(g, "Softmax", masked, NULL, NULL);
    Node *y = transpose(g, tu_op3(g, "MatMul", p, v, NULL), head_merge, 4);
    tu_finish(g, &y, 1);
}

START_TEST(test_after_layout_cleanup)
{
    Graph *g = graph_new(), *ref = graph_new();
    build_layout_form(g);
    build_layout_form(ref);
    ck_assert_int_eq(tu_run_pass(g, pass_layout_cleanup, 1e-5, 1e-6), 2);
    ck_assert_int_eq(tu_count_op(g, "TransposedMatMul"), 2);
    ck_assert_int_eq(fuse_and_check(g, ref, "attention_layout"), 1);
    const Node *a = only_attention(g);
    const int64_t *perm;
    ck_assert_int_eq(node_attr_ints(a, "perm_y", &perm), 4);
    ck_assert_int_eq(perm[1], 2);
    ck_assert_int_eq(node_attr_int(a, "k_transposed", -1), 0);
    ck_assert_int_eq(tu_count_op(g, "TransposedMatMul") + tu_count_op(g, "Transpose"), 0);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* The layout of exporters that split heads with Reshape + Transpose
 * (bench/make_models.py's transformer): after layout-cleanup both products
 * read Q, K and V through the head split's permutations and write the head
 * merge's; the Attention takes all four (batch 2, 5 positions, 2 heads of
 * 3), so no copy is left. */
static void build_head_split_form(Graph *g)
{
    Node *x = tu_input_f32(g, "x", 3, 2, 5, 6, 0);
    int64_t heads[4] = {2, 5, 2, 3}, merged[3] = {2, 5, 6};
    Node *heads_shape = tu_ints(g, "heads_shape", heads, 4);
    Node *q = transpose(g, tu_op3(g, "Reshape", tu_op3(g, "Relu", x, NULL, NULL), heads_shape, NULL),
                        head_merge, 4);
    Node *k = transpose(g, tu_op3(g, "Reshape", tu_op3(g, "Neg", x, NULL, NULL), heads_shape, NULL),
                        head_merge, 4);
    Node *v = transpose(g, tu_op3(g, "Reshape", tu_op3(g, "Sigmoid", x, NULL, NULL), heads_shape,
                                  NULL),
                        head_merge, 4);
    Node *scores = tu_op3(g, "MatMul", q, transpose(g, k, swap_last, 4), NULL);
    Node *scaled = tu_op3(g, "Mul", scores, tu_scalar(g, "scale", 0.5f), NULL);
    Node *p = tu_op3(g, "Softmax", scaled, NULL, NULL);
    Node *context = transpose(g, tu_op3(g, "MatMul", p, v, NULL), head_merge, 4);
    Node *y = tu_op3(g, "Reshape", context, tu_ints(g, "merged_shape", merged, 3), NULL);
    tu_finish(g, &y, 1);
}

START_TEST(test_head_split_form)
{
    Graph *g = graph_new(), *ref = graph_new();
    build_head_split_form(g);
    build_head_split_form(ref);
    ck_assert_int_ge(tu_run_pass(g, pass_layout_cleanup, 1e-5, 1e-6), 2);
    ck_assert_int_eq(tu_count_op(g, "TransposedMatMul"), 2);
    ck_assert_int_eq(fuse_and_check(g, ref, "attention_head_split"), 1);
    const Node *a = only_attention(g);
    const int64_t *perm;
    ck_assert_int_eq(node_attr_ints(a, "perm_q", &perm), 4);
    ck_assert_int_eq(perm[1], 2);
    ck_assert_int_eq(node_attr_ints(a, "perm_k", &perm), 4);
    ck_assert_int_eq(perm[1], 2);
    ck_assert_int_eq(node_attr_ints(a, "perm_v", &perm), 4);
    ck_assert_int_eq(node_attr_ints(a, "perm_y", &perm), 4);
    ck_assert_int_eq(node_attr_int(a, "k_transposed", -1), 0);
    ck_assert_int_eq(tu_count_op(g, "TransposedMatMul") + tu_count_op(g, "Transpose"), 0);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* Not attention, or not only attention's: every one stays as it was.
 *  - a Softmax over the queries (axis 2);
 *  - scores that are also a graph output;
 *  - probabilities that a second node reads;
 *  - a mask that widens the scores' batch ([2, 1, 5, 5] against [1, 2, ...]);
 *  - a scale that is not a scalar (per head) on the scores. */
static void build_left_alone(Graph *g)
{
    Node *q = tu_input_f32(g, "q", 4, 1, 2, 5, 4), *k = tu_input_f32(g, "k", 4, 1, 2, 5, 4);
    Node *v = tu_input_f32(g, "v", 4, 1, 2, 5, 4), *wide = tu_input_f32(g, "wide", 4, 2, 1, 5, 5);
    Node *results[6];
    int count = 0;

    Node *scores_axis = tu_op3(g, "MatMul", q, transpose(g, k, swap_last, 4), NULL);
    Node *p_axis = with_int(tu_op3(g, "Softmax", scores_axis, NULL, NULL), "axis", 2);
    results[count++] = tu_op3(g, "MatMul", p_axis, v, NULL);

    Node *seen = tu_op3(g, "MatMul", q, transpose(g, k, swap_last, 4), NULL);
    results[count++] = tu_op3(g, "MatMul", tu_op3(g, "Softmax", seen, NULL, NULL), v, NULL);
    results[count++] = seen;

    Node *scores_shared = tu_op3(g, "MatMul", q, transpose(g, k, swap_last, 4), NULL);
    Node *p_shared = tu_op3(g, "Softmax", scores_shared, NULL, NULL);
    Node *negated = tu_op3(g, "Neg", v, NULL, NULL);
    results[count++] = tu_op3(g, "Add", tu_op3(g, "MatMul", p_shared, v, NULL),
                              tu_op3(g, "MatMul", p_shared, negated, NULL), NULL);

    Node *scores_wide = tu_op3(g, "MatMul", q, transpose(g, k, swap_last, 4), NULL);
    Node *widened = tu_op3(g, "Add", scores_wide, wide, NULL);
    results[count++] = tu_op3(g, "MatMul", tu_op3(g, "Softmax", widened, NULL, NULL), v, NULL);

    Node *per_head = tu_weights_f32(g, "per_head", 4, 1, 2, 1, 1, 0.25f);
    Node *scores_scaled = tu_op3(g, "MatMul", q, transpose(g, k, swap_last, 4), NULL);
    Node *scaled = tu_op3(g, "Mul", scores_scaled, per_head, NULL);
    results[count++] = tu_op3(g, "MatMul", tu_op3(g, "Softmax", scaled, NULL, NULL), v, NULL);
    tu_finish(g, results, count);
}

START_TEST(test_left_alone)
{
    Graph *g = graph_new();
    build_left_alone(g);
    int softmax = tu_count_op(g, "Softmax"), calls = tu_count_calls(g);
    ck_assert_int_eq(tu_run_pass(g, pass_attention_fusion, 1e-5, 1e-6), 0);
    ck_assert_int_eq(tu_count_op(g, "Attention"), 0);
    ck_assert_int_eq(tu_count_op(g, "Softmax"), softmax);
    ck_assert_int_eq(tu_count_calls(g), calls);
    graph_free(g);
}
END_TEST

/* Q scaled by a per-head (non-scalar) factor: the Mul stays as Q's
 * producer and the rest still fuses. */
static void build_tensor_scale(Graph *g)
{
    Node *q = tu_input_f32(g, "q", 4, 1, 2, 3, 4), *k = tu_input_f32(g, "k", 4, 1, 2, 6, 4);
    Node *v = tu_input_f32(g, "v", 4, 1, 2, 6, 9);
    Node *qs = tu_op3(g, "Mul", q, tu_weights_f32(g, "per_head", 4, 1, 2, 1, 1, 0.25f), NULL);
    Node *p = tu_op3(g, "Softmax", tu_op3(g, "MatMul", qs, transpose(g, k, swap_last, 4), NULL),
                     NULL, NULL);
    Node *y = tu_op3(g, "MatMul", p, v, NULL);
    tu_finish(g, &y, 1);
}

START_TEST(test_tensor_scale_stays)
{
    Graph *g = graph_new(), *ref = graph_new();
    build_tensor_scale(g);
    build_tensor_scale(ref);
    ck_assert_int_eq(fuse_and_check(g, ref, "attention_tensor_scale"), 1);
    const Node *a = only_attention(g);
    ck_assert_ptr_eq(a->args[0]->op, &fx_op_Mul);
    ck_assert_float_eq_tol(node_attr_float(a, "scale", 0.0f), 1.0f, 1e-7f);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* The op's shape errors name the node instead of crashing. */
START_TEST(test_shape_errors)
{
    Graph *g = graph_new();
    Node *q = tu_input_f32(g, "q", 3, 2, 5, 4, 0), *k = tu_input_f32(g, "k", 3, 2, 6, 3, 0);
    Node *v = tu_input_f32(g, "v", 3, 2, 6, 2, 0), *v3 = tu_input_f32(g, "v3", 2, 6, 2, 0, 0);
    Node *mask = tu_input_f32(g, "mask", 2, 5, 7, 0, 0);
    struct {
        Node *args[4];
        int count;
        const char *says;
    } cases[] = {
        {{q, k, v, NULL}, 3, "do not fit"},        /* D 4 against 3 */
        {{q, q, v3, NULL}, 3, "one rank"},         /* V of rank 2 */
        {{q, q, q, mask}, 4, "does not broadcast"} /* mask of 7 keys, not 5 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Node *a = graph_create_op(g, NULL, &fx_op_Attention, "bad", cases[i].args,
                                  cases[i].count);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(node_set_attr_float(a, "scale", 1.0f));
        diag_clear(&tu_diag);
        ck_assert_int_ne(node_finish_created(a, true, a, &tu_diag), FX_OK);
        ck_assert_int_ge((int)tu_diag.count, 1);
        const DiagEntry *e = &tu_diag.entries[tu_diag.count - 1];
        ck_assert_msg(e->node && strstr(e->node, "bad") && strstr(e->message, cases[i].says),
                      "case %zu: %s: %s", i, e->node ? e->node : "(no node)", e->message);
    }
    diag_clear(&tu_diag);
    graph_free(g);
}
END_TEST

static Suite *attention_suite(void)
{
    Suite *s = suite_create("opt_attention");
    TCase *t = tcase_create("attention");
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_torch_form);
    tcase_add_test(t, test_div_mask_form);
    tcase_add_test(t, test_after_layout_cleanup);
    tcase_add_test(t, test_head_split_form);
    tcase_add_test(t, test_left_alone);
    tcase_add_test(t, test_tensor_scale_stays);
    tcase_add_test(t, test_shape_errors);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(attention_suite()); }
