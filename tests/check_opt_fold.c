/*
 * check_opt_fold.c - the clean-up passes: const-fold, layout-cleanup, cse and
 * dce.  Each rewrite, and each case a pass must leave alone, is a small graph
 * run through tu_run_pass (the interpreter's outputs before and after the
 * pass allclose, shapes propagated, lint clean) whose printed result is
 * compared with a reviewed golden file under tests/golden/opt/fold/.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "opt_check_util.h"

/* --- building graphs -------------------------------------------------------- */

/* A 0-D int64 constant. */
static Node *int_scalar(Graph *g, const char *name, int64_t v)
{
    TensorType t = {.dtype = FXRT_DTYPE_INT64, .rank = 0};
    Tensor *x = tensor_new(&t, &tu_diag);
    ck_assert_ptr_nonnull(x);
    *(int64_t *)x->data = v;
    return graph_create_constant(g, NULL, name, x, &tu_diag);
}

static Node *with_int(Node *n, const char *attr, int64_t v)
{
    ck_assert_ptr_nonnull(node_set_attr_int(n, attr, v));
    tu_reinfer(n);
    return n;
}

static Node *with_ints(Node *n, const char *attr, const int64_t *v, int64_t count)
{
    ck_assert_ptr_nonnull(node_set_attr_ints(n, attr, v, count));
    tu_reinfer(n);
    return n;
}

static Node *with_float(Node *n, const char *attr, float v)
{
    ck_assert_ptr_nonnull(node_set_attr_float(n, attr, v));
    tu_reinfer(n);
    return n;
}

static Node *transpose(Graph *g, Node *x, const int64_t *perm, int rank)
{
    Node *t = tu_op3(g, "Transpose", x, NULL, NULL);
    return perm ? with_ints(t, "perm", perm, rank) : t;
}

/* An op with a required int attribute (Cast's `to`, Concat's `axis`),
 * which must be set before the op's attributes can be checked. */
static Node *op_with(Graph *g, const char *name, Node *const *args, int num_args,
                     const char *attr, int64_t v)
{
    const OpDef *def = op_lookup(name);
    ck_assert_ptr_nonnull(def);
    Node *n = graph_create_op(g, NULL, def, name, args, num_args);
    ck_assert_ptr_nonnull(n);
    ck_assert_ptr_nonnull(node_set_attr_int(n, attr, v));
    ck_assert_int_eq(op_apply_attr_specs(def, n, &tu_diag), FX_OK);
    ck_assert(node_set_num_outputs(n, 1));
    tu_reinfer(n);
    return n;
}

static Node *cast(Graph *g, Node *x, DType to) { return op_with(g, "Cast", &x, 1, "to", to); }

static Node *concat(Graph *g, Node *a, Node *b)
{
    Node *args[2] = {a, b};
    return op_with(g, "Concat", args, 2, "axis", 0);
}

/* A node with k outputs (Split) and getitem `index` of it. */
static Node *outputs(Node *n, int k)
{
    ck_assert(node_set_num_outputs(n, k));
    tu_reinfer(n);
    return n;
}

static Node *getitem(Graph *g, Node *src, int index)
{
    Node *n = tu_op3(g, "getitem", src, NULL, NULL);
    n->index = index;
    tu_reinfer(n);
    return n;
}

static void golden(const Graph *g, const char *name) { tu_assert_golden(g, "fold", name); }

static int run(Graph *g, PassFn pass) { return tu_run_pass(g, pass, 1e-6, 1e-7); }

/* --- const-fold ------------------------------------------------------------ */

/* x.reshape(x.shape[0], -1), as torch.onnx writes it: Shape -> Gather ->
 * Unsqueeze -> Concat folds to one int64 constant named after the Concat;
 * the Reshape (its data is an input) stays and the index constants go. */
START_TEST(test_fold_shape_chain)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 3, 2, 3, 4, 0);
    int64_t zero = 0, minus_one = -1;
    Node *s = tu_op3(g, "Shape", x, NULL, NULL);
    Node *d0 = tu_op3(g, "Gather", s, int_scalar(g, "i0", 0), NULL);
    Node *u = tu_op3(g, "Unsqueeze", d0, tu_ints(g, "axes", &zero, 1), NULL);
    Node *shape = concat(g, u, tu_ints(g, "rest", &minus_one, 1));
    Node *y = tu_op3(g, "Reshape", x, shape, NULL);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_const_fold), 4);
    ck_assert_int_eq(tu_count_calls(g), 1);
    golden(g, "fold_shape_chain");
    graph_free(g);
}
END_TEST

/* ConstantOfShape, Range, Cast of a constant, a Reshape of a constant and a
 * Transpose of a weight bigger than shape propagation folds (300x256 > 64 K
 * elements, so this value comes from the pass's own evaluation). */
START_TEST(test_fold_constant_makers)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 4, 300, 0, 0);
    int64_t shape[2] = {4, 300};
    Node *fill = tu_op3(g, "ConstantOfShape", tu_ints(g, "fill_shape", shape, 2), NULL, NULL);
    Node *a = tu_op3(g, "Add", x, fill, NULL);
    Node *start = tu_scalar(g, "start", 0.0f);
    Node *limit = tu_scalar(g, "limit", 300.0f);
    Node *range = tu_op3(g, "Range", start, limit, tu_scalar(g, "delta", 1.0f));
    Node *b = tu_op3(g, "Mul", a, range, NULL);
    Node *count = cast(g, int_scalar(g, "count", 3), FXRT_DTYPE_FLOAT32);
    Node *c = tu_op3(g, "Div", b, count, NULL);
    int64_t flat[2] = {1, 300};
    Node *row = tu_weights_f32(g, "row", 1, 300, 0, 0, 0, 0.125f);
    row = tu_op3(g, "Reshape", row, tu_ints(g, "flat", flat, 2), NULL);
    Node *e = tu_op3(g, "Add", c, row, NULL);
    Node *wt = transpose(g, tu_weights_f32(g, "w", 2, 256, 300, 0, 0, 0.125f), NULL, 2);
    Node *y = tu_op3(g, "MatMul", e, wt, NULL);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_const_fold), 5);
    ck_assert_int_eq(tu_count_calls(g), 5); /* Add, Mul, Div, Add, MatMul */
    ck_assert_int_eq(tu_count_op(g, "Transpose"), 0);
    golden(g, "fold_constant_makers");
    graph_free(g);
}
END_TEST

/* Split of a weight: each getitem becomes the constant of its part, the
 * Split goes; an unused part is not kept. */
START_TEST(test_fold_multi_output)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 2, 2, 0, 0);
    Node *split =
        outputs(tu_op3(g, "Split", tu_weights_f32(g, "w", 2, 6, 6, 0, 0, 0.125f), NULL, NULL), 3);
    Node *top = getitem(g, split, 0), *bottom = getitem(g, split, 2);
    Node *y = tu_op3(g, "Add", tu_op3(g, "MatMul", x, top, NULL), bottom, NULL);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_const_fold), 1);
    ck_assert_int_eq(tu_count_op(g, "Split"), 0);
    ck_assert_int_eq(tu_count_op(g, "getitem"), 0);
    golden(g, "fold_multi_output");
    graph_free(g);
}
END_TEST

/* Refused: an input that is not constant, and a result over the 64 MiB limit
 * (ConstantOfShape of 17 Mi floats); the graph is unchanged. */
START_TEST(test_fold_refuses)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 17, 1 << 20, 0, 0);
    int64_t shape[2] = {17, 1 << 20};
    Node *big = tu_op3(g, "ConstantOfShape", tu_ints(g, "big_shape", shape, 2), NULL, NULL);
    Node *y = tu_op3(g, "Add", tu_op3(g, "Relu", x, NULL, NULL), big, NULL);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_const_fold), 0);
    ck_assert_int_eq(tu_count_calls(g), 3);
    golden(g, "fold_refuses");
    graph_free(g);
}
END_TEST

/* --- layout-cleanup --------------------------------------------------------- */

/* Identity, a one-output Dropout and a two-output Dropout whose mask is
 * unread all go; a Dropout whose mask is returned stays. */
START_TEST(test_layout_identity_dropout)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 3, 4, 0, 0);
    Node *a = tu_op3(g, "Relu", tu_op3(g, "Identity", x, NULL, NULL), NULL, NULL);
    Node *b = tu_op3(g, "Neg", tu_op3(g, "Dropout", a, NULL, NULL), NULL, NULL);
    Node *d2 = outputs(tu_op3(g, "Dropout", b, NULL, NULL), 2);
    Node *c = tu_op3(g, "Exp", getitem(g, d2, 0), NULL, NULL);
    getitem(g, d2, 1); /* read by nobody */
    Node *d3 = outputs(tu_op3(g, "Dropout", c, NULL, NULL), 2);
    Node *results[2] = {getitem(g, d3, 0), getitem(g, d3, 1)};
    tu_finish(g, results, 2);
    ck_assert_int_eq(run(g, pass_layout_cleanup), 3);
    ck_assert_int_eq(tu_count_op(g, "Identity"), 0);
    ck_assert_int_eq(tu_count_op(g, "Dropout"), 1);
    golden(g, "layout_identity_dropout");
    graph_free(g);
}
END_TEST

/* A transpose and its inverse vanish; two that do not cancel become one
 * with the composed permutation (a chain of three too); the default
 * permutation (reversed axes) counts as written out. */
START_TEST(test_layout_transposes)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 3, 2, 3, 4, 0);
    int64_t swap12[3] = {0, 2, 1}, swap01[3] = {1, 0, 2};
    Node *back = transpose(g, transpose(g, x, swap12, 3), swap12, 3);
    Node *a = tu_op3(g, "Relu", back, NULL, NULL);
    Node *composed = transpose(g, transpose(g, a, swap12, 3), swap01, 3);
    Node *b = tu_op3(g, "Neg", composed, NULL, NULL);
    Node *three = transpose(g, transpose(g, transpose(g, b, NULL, 3), swap01, 3), swap12, 3);
    int64_t ident[3] = {0, 1, 2};
    Node *y = tu_op3(g, "Exp", transpose(g, three, ident, 3), NULL, NULL);
    tu_finish(g, &y, 1);
    ck_assert_int_gt(run(g, pass_layout_cleanup), 0);
    ck_assert_int_eq(tu_count_op(g, "Transpose"), 2);
    golden(g, "layout_transposes");
    graph_free(g);
}
END_TEST

/* Unsqueeze -> Flatten becomes one Reshape, Reshape -> Reshape one Reshape
 * (the second, rewritten in place); Reshape -> Reshape back to the input's
 * shape and a Squeeze that removes nothing go; a lone Flatten that changes
 * the shape stays. */
START_TEST(test_layout_reshape_chains)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 3, 2, 3, 4, 0);
    int64_t zero = 0, s6x4[2] = {6, 4}, s2x3x4[3] = {2, 3, 4};
    Node *u = tu_op3(g, "Unsqueeze", x, tu_ints(g, "axes", &zero, 1), NULL);
    Node *f = with_int(tu_op3(g, "Flatten", u, NULL, NULL), "axis", 2);
    Node *a = tu_op3(g, "Relu", f, NULL, NULL); /* [2, 12] */
    Node *r1 = tu_op3(g, "Reshape", a, tu_ints(g, "s6x4", s6x4, 2), NULL);
    Node *r2 = tu_op3(g, "Reshape", r1, tu_ints(g, "s2x3x4", s2x3x4, 3), NULL);
    Node *b = tu_op3(g, "Neg", r2, NULL, NULL); /* [2, 3, 4] */
    Node *r3 = tu_op3(g, "Reshape", b, tu_ints(g, "s6x4_again", s6x4, 2), NULL);
    Node *r4 = tu_op3(g, "Reshape", r3, tu_ints(g, "s2x3x4_again", s2x3x4, 3), NULL);
    Node *sq = tu_op3(g, "Squeeze", r4, NULL, NULL);
    Node *y = tu_op3(g, "Flatten", tu_op3(g, "Exp", sq, NULL, NULL), NULL, NULL);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_layout_cleanup), 4);
    ck_assert_int_eq(tu_count_op(g, "Unsqueeze"), 0);
    ck_assert_int_eq(tu_count_op(g, "Squeeze"), 0);
    ck_assert_int_eq(tu_count_op(g, "Reshape"), 2);
    ck_assert_int_eq(tu_count_op(g, "Flatten"), 1);
    golden(g, "layout_reshape_chains");
    graph_free(g);
}
END_TEST

/* MatMul(Transpose(a), b), MatMul(a, Transpose(b)) and both: Gemm with
 * transA / transB.  Left alone: a transposed constant (const-fold's job)
 * and a batched MatMul. */
START_TEST(test_layout_matmul_transpose)
{
    Graph *g = graph_new();
    Node *a = tu_input_f32(g, "a", 2, 5, 3, 0, 0);
    Node *b = tu_input_f32(g, "b", 2, 5, 4, 0, 0);
    Node *x = tu_input_f32(g, "x", 3, 2, 5, 3, 0);
    /* one node made per statement: argument order of evaluation is unspecified */
    Node *a_t = transpose(g, a, NULL, 2);
    Node *ta = tu_op3(g, "MatMul", a_t, tu_op3(g, "Relu", b, NULL, NULL), NULL);
    Node *neg = tu_op3(g, "Neg", ta, NULL, NULL);
    Node *tb = tu_op3(g, "MatMul", neg, transpose(g, b, NULL, 2), NULL);
    Node *tb_t = transpose(g, tb, NULL, 2);
    Node *both = tu_op3(g, "MatMul", tb_t, transpose(g, a, NULL, 2), NULL);
    Node *w = tu_op3(g, "MatMul", both,
                     transpose(g, tu_weights_f32(g, "w", 2, 6, 5, 0, 0, 0.125f), NULL, 2), NULL);
    int64_t swap12[3] = {0, 2, 1};
    Node *batched = tu_op3(g, "MatMul", transpose(g, x, swap12, 3), w, NULL);
    tu_finish(g, &batched, 1);
    ck_assert_int_eq(run(g, pass_layout_cleanup), 3);
    ck_assert_int_eq(tu_count_op(g, "Gemm"), 3);
    ck_assert_int_eq(tu_count_op(g, "MatMul"), 2);
    golden(g, "layout_matmul_transpose");
    graph_free(g);
}
END_TEST

/* Attention's layout (batch 2, 5 positions, 2 heads of 3): the Transposes
 * of the head split, K^T and the head merge go into two TransposedMatMuls
 * (K^T as a transposed B, the merge as the output's permutation).  Also
 * rewritten: both operands transposed in their last two axes (op(A) and
 * op(B) transposed), and a batch dim of 1 broadcast against 2.  Left alone:
 * a permutation that moves the stored last axis into the batch, an output
 * Transpose that moves the columns, a transposed constant, and operands of
 * two ranks. */
static void build_batched_matmuls(Graph *g)
{
    Node *x = tu_input_f32(g, "x", 3, 2, 5, 6, 0);
    Node *u = tu_input_f32(g, "u", 3, 2, 4, 3, 0), *w = tu_input_f32(g, "w", 3, 2, 5, 4, 0);
    Node *s = tu_input_f32(g, "s", 3, 1, 4, 3, 0), *z = tu_input_f32(g, "z", 3, 3, 5, 2, 0);
    Node *c = tu_input_f32(g, "c", 3, 2, 3, 4, 0), *r = tu_input_f32(g, "r", 2, 4, 2, 0, 0);
    int64_t heads[4] = {2, 5, 2, 3}, merged[3] = {2, 5, 6};
    int64_t split[4] = {0, 2, 1, 3}, k_t[4] = {0, 2, 3, 1};
    Node *heads_shape = tu_ints(g, "heads_shape", heads, 4);
    Node *q_in = tu_op3(g, "Relu", x, NULL, NULL);
    Node *q = transpose(g, tu_op3(g, "Reshape", q_in, heads_shape, NULL), split, 4);
    Node *k_in = tu_op3(g, "Neg", x, NULL, NULL);
    Node *k = transpose(g, tu_op3(g, "Reshape", k_in, heads_shape, NULL), k_t, 4);
    Node *scores = tu_op3(g, "MatMul", q, k, NULL);
    Node *p = tu_op3(g, "Softmax", scores, NULL, NULL);
    Node *v_in = tu_op3(g, "Sigmoid", x, NULL, NULL);
    Node *v = transpose(g, tu_op3(g, "Reshape", v_in, heads_shape, NULL), split, 4);
    Node *context = transpose(g, tu_op3(g, "MatMul", p, v, NULL), split, 4);
    Node *attn = tu_op3(g, "Reshape", context, tu_ints(g, "merged_shape", merged, 3), NULL);

    int64_t swap12[3] = {0, 2, 1}, last_first[3] = {2, 0, 1};
    Node *both_t = tu_op3(g, "MatMul", transpose(g, u, swap12, 3), transpose(g, w, swap12, 3),
                          NULL); /* [2, 3, 5] */
    Node *broadcast = tu_op3(g, "MatMul", transpose(g, s, swap12, 3), u, NULL); /* [2, 3, 3] */

    Node *moved_last = tu_op3(g, "MatMul", transpose(g, z, last_first, 3), w, NULL);
    Node *cols_moved = transpose(g, tu_op3(g, "MatMul", u, c, NULL), swap12, 3);
    Node *of_constant =
        tu_op3(g, "MatMul", u,
               transpose(g, tu_weights_f32(g, "k", 3, 2, 2, 3, 0, 0.125f), swap12, 3), NULL);
    Node *ranks = tu_op3(g, "MatMul", transpose(g, u, swap12, 3), r, NULL);
    Node *results[7] = {attn, both_t, broadcast, moved_last, cols_moved, of_constant, ranks};
    tu_finish(g, results, 7);
}

/* The pass on build_batched_matmuls's graph, then its compiled code for
 * both targets (the strided GEMM calls) against the interpreter on the
 * graph as built. */
START_TEST(test_layout_batched_matmul_transpose)
{
    Graph *g = graph_new(), *ref = graph_new();
    build_batched_matmuls(g);
    build_batched_matmuls(ref);
    ck_assert_int_eq(run(g, pass_layout_cleanup), 4);
    ck_assert_int_eq(tu_count_op(g, "TransposedMatMul"), 4);
    ck_assert_int_eq(tu_count_op(g, "MatMul"), 4);
    /* those of moved_last, cols_moved, of_constant and ranks */
    ck_assert_int_eq(tu_count_op(g, "Transpose"), 4);
    golden(g, "layout_batched_matmul_transpose");

    int ni = graph_num_placeholders(g);
    Tensor *in[8] = {0};
    uint64_t seed = 0x5eedu;
    for (int i = 0; i < ni; i++)
        ck_assert_ptr_nonnull(in[i] = tensor_new_random(&graph_placeholder(g, i)->out_types[0],
                                                      &seed, &tu_diag));
    static const FxTarget targets[2] = {FX_TARGET_HOST, FX_TARGET_PORTABLE};
    for (int t = 0; t < 2; t++) {
        char dir[256];
        snprintf(dir, sizeof dir, "/tmp/fxcc_fold_batched_%d_%ld", t, (long)getpid());
        CgVerifyOptions vo = {.cg = {.name = "model", .target = targets[t]},
                              .build = {.target = targets[t]},
                              .rtol = 1e-5, .atol = 1e-6, .keep_dir = dir};
        FILE *report = fopen("/dev/null", "w");
        FxStatus st = cg_verify(g, ref, in, ni, &vo, report, &tu_diag);
        fclose(report);
        if (st != FX_OK)
            diag_print(&tu_diag, stderr);
        ck_assert_msg(st == FX_OK, "compiled code differs or does not build (see %s)", dir);
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
    }
    for (int i = 0; i < ni; i++)
        tensor_free(in[i]);
    graph_free(ref);
    graph_free(g);
}
END_TEST

/* The TransposedMatMul checks its permutations: one that moves a matrix's
 * stored last axis out of the product's matrix axes is refused. */
START_TEST(test_transposed_matmul_refuses_bad_perm)
{
    Graph *g = graph_new();
    Node *a = tu_input_f32(g, "a", 4, 1, 2, 3, 4), *b = tu_input_f32(g, "b", 4, 1, 2, 4, 5);
    Node *mm = tu_op3(g, "TransposedMatMul", a, b, NULL);
    ck_assert_int_eq(mm->out_types[0].dims[3], 5);
    int64_t bad[4] = {0, 3, 1, 2};
    ck_assert_ptr_nonnull(node_set_attr_ints(mm, "perm_a", bad, 4));
    ck_assert_int_ne(node_infer_shapes(mm, &tu_diag), FX_OK);
    graph_free(g);
}
END_TEST

/* --- cse --------------------------------------------------------------------- */

/* Repeated computations merge, chains of them too, and a commutative op
 * with its operands swapped; a non-commutative one and one with another
 * attribute value do not.  The earlier node's name stays. */
START_TEST(test_cse_computations)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 3, 4, 0, 0);
    Node *z = tu_input_f32(g, "z", 2, 3, 4, 0, 0);
    Node *e1 = tu_op3(g, "Exp", tu_op3(g, "Relu", x, NULL, NULL), NULL, NULL);
    Node *e2 = tu_op3(g, "Exp", tu_op3(g, "Relu", x, NULL, NULL), NULL, NULL);
    Node *add1 = tu_op3(g, "Add", e1, z, NULL), *add2 = tu_op3(g, "Add", z, e2, NULL);
    Node *sub1 = tu_op3(g, "Sub", e1, z, NULL), *sub2 = tu_op3(g, "Sub", z, e2, NULL);
    Node *l1 = tu_op3(g, "LeakyRelu", add1, NULL, NULL);
    Node *l2 = with_float(tu_op3(g, "LeakyRelu", add2, NULL, NULL), "alpha", 0.5f);
    Node *l3 = tu_op3(g, "LeakyRelu", add2, NULL, NULL);
    Node *results[5] = {l1, l2, l3, sub1, sub2};
    tu_finish(g, results, 5);
    ck_assert_int_eq(run(g, pass_cse), 4); /* Relu, Exp, Add, LeakyRelu */
    ck_assert_int_eq(tu_count_op(g, "LeakyRelu"), 2);
    ck_assert_int_eq(tu_count_op(g, "Sub"), 2);
    golden(g, "cse_computations");
    graph_free(g);
}
END_TEST

/* Constants with equal type and bytes merge (and then the Muls reading
 * them); equal bytes under another shape, and -0.0 against 0.0, do not. */
START_TEST(test_cse_constants)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 2, 3, 0, 0);
    Node *m1 = tu_op3(g, "Mul", x, tu_weights_f32(g, "w", 2, 2, 3, 0, 0, 0.125f), NULL);
    Node *m2 = tu_op3(g, "Mul", x, tu_weights_f32(g, "w_copy", 2, 2, 3, 0, 0, 0.125f), NULL);
    Node *row = tu_weights_f32(g, "w_flat", 2, 1, 6, 0, 0, 0.125f); /* same bytes, [1, 6] */
    int64_t s2x3[2] = {2, 3};
    Node *m3 =
        tu_op3(g, "Mul", x, tu_op3(g, "Reshape", row, tu_ints(g, "s2x3", s2x3, 2), NULL), NULL);
    Node *a1 = tu_op3(g, "Add", m1, tu_scalar(g, "zero", 0.0f), NULL);
    Node *a2 = tu_op3(g, "Add", m2, tu_scalar(g, "minus_zero", -0.0f), NULL);
    Node *outs[3] = {a1, a2, m3};
    tu_finish(g, outs, 3);
    ck_assert_int_eq(run(g, pass_cse), 2); /* w_copy, then its Mul */
    ck_assert_int_eq(tu_count_op(g, "Mul"), 2);
    golden(g, "cse_constants");
    graph_free(g);
}
END_TEST

/* Two Splits of one value merge, then their getitems of the same index. */
START_TEST(test_cse_getitems)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 4, 3, 0, 0);
    Node *s1 = outputs(tu_op3(g, "Split", x, NULL, NULL), 2);
    Node *s2 = outputs(tu_op3(g, "Split", x, NULL, NULL), 2);
    Node *first = getitem(g, s1, 0);
    Node *a = tu_op3(g, "Add", first, getitem(g, s2, 1), NULL);
    Node *y = tu_op3(g, "Mul", a, getitem(g, s2, 0), NULL);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_cse), 2);
    ck_assert_int_eq(tu_count_op(g, "Split"), 1);
    ck_assert_int_eq(tu_count_op(g, "getitem"), 2);
    golden(g, "cse_getitems");
    graph_free(g);
}
END_TEST

/* --- dce --------------------------------------------------------------------- */

/* A dead chain and an unused constant go, an unread getitem goes while its
 * Split (still read) stays; an unread graph input stays. */
START_TEST(test_dce)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 4, 3, 0, 0);
    tu_input_f32(g, "unused", 1, 2, 0, 0, 0);
    tu_op3(g, "Exp", tu_op3(g, "Relu", x, NULL, NULL), NULL, NULL);
    tu_scalar(g, "dead_constant", 1.0f);
    Node *s = outputs(tu_op3(g, "Split", x, NULL, NULL), 2);
    getitem(g, s, 1);
    Node *y = tu_op3(g, "Neg", getitem(g, s, 0), NULL, NULL);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_dce), 4);
    ck_assert_int_eq(graph_num_placeholders(g), 2);
    golden(g, "dce");
    graph_free(g);
}
END_TEST

/* --- the passes together ----------------------------------------------------- */

/* An attention-style head split as exported (Shape chains for both the
 * query and the key) through -O1 with the pass manager's own check: one
 * shape constant, one Reshape per head, the key's transposes composed and
 * then read in place, with the query's, by one TransposedMatMul. */
START_TEST(test_level1_pipeline)
{
    Graph *g = graph_new();
    Node *q = tu_input_f32(g, "q", 2, 8, 16, 0, 0);
    Node *k = tu_input_f32(g, "k", 2, 8, 16, 0, 0);
    Node *heads[2];
    for (int h = 0; h < 2; h++) {
        Node *v = h ? k : q;
        int64_t zero = 0, split[2] = {4, 4};
        Node *s = tu_op3(g, "Shape", v, NULL, NULL);
        Node *len = tu_op3(g, "Gather", s, int_scalar(g, "i0", 0), NULL);
        len = tu_op3(g, "Unsqueeze", len, tu_ints(g, "axes", &zero, 1), NULL);
        Node *shape = concat(g, len, tu_ints(g, "split", split, 2));
        int64_t perm[3] = {1, 0, 2};
        heads[h] = transpose(
            g, tu_op3(g, "Reshape", tu_op3(g, "Identity", v, NULL, NULL), shape, NULL), perm, 3);
    }
    int64_t last2[3] = {0, 2, 1};
    Node *kt = transpose(g, heads[1], last2, 3);
    Node *y = tu_op3(g, "MatMul", heads[0], kt, NULL);
    tu_finish(g, &y, 1);
    PassOptions o = {.check = true};
    FxStatus st = opt_run_level(g, 1, &o, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
    ck_assert_int_eq(tu_count_op(g, "Shape"), 0);
    ck_assert_int_eq(tu_count_op(g, "Reshape"), 2);
    ck_assert_int_eq(tu_count_op(g, "Transpose"), 0);
    ck_assert_int_eq(tu_count_op(g, "TransposedMatMul"), 1);
    golden(g, "level1_pipeline");
    graph_free(g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_fold");
    TCase *t = tcase_create("fold");
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_fold_shape_chain);
    tcase_add_test(t, test_fold_constant_makers);
    tcase_add_test(t, test_fold_multi_output);
    tcase_add_test(t, test_fold_refuses);
    tcase_add_test(t, test_layout_identity_dropout);
    tcase_add_test(t, test_layout_transposes);
    tcase_add_test(t, test_layout_reshape_chains);
    tcase_add_test(t, test_layout_matmul_transpose);
    tcase_add_test(t, test_layout_batched_matmul_transpose);
    tcase_add_test(t, test_transposed_matmul_refuses_bad_perm);
    tcase_add_test(t, test_cse_computations);
    tcase_add_test(t, test_cse_constants);
    tcase_add_test(t, test_cse_getitems);
    tcase_add_test(t, test_dce);
    tcase_add_test(t, test_level1_pipeline);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
