/*
 * check_opt_linfold.c - the bn-fold and linear-fold passes: every fold on a
 * small graph, and every case that must stay as it is (the intermediate read
 * twice, a padded Conv after a shift, a constant that is not one, integers,
 * a constant varying along the wrong axis).  Each case runs the pass through
 * tu_run_pass (the interpreter's outputs before and after allclose, shapes,
 * lint), counts the ops left and compares the printed graph with its golden
 * file under tests/golden/opt/linfold/.  The seed model goes through the
 * frontend and both passes and is checked against ONNX Runtime's output.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "opt_check_util.h"

#define F32 FXRT_DTYPE_FLOAT32

static const double RTOL = 1e-5, ATOL = 1e-5;

/* A float32 constant with values[i] = base + step * i. */
static Node *ramp(Graph *g, const char *name, int rank, const int64_t *dims, float base,
                  float step)
{
    TensorType t = {.dtype = F32, .rank = rank};
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    Tensor *v = tensor_new(&t, &tu_diag);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < tensor_numel(v); i++)
        ((float *)v->data)[i] = base + step * (float)i;
    return tu_constant(g, name, v);
}

static Node *vec(Graph *g, const char *name, int64_t n, float base, float step)
{
    return ramp(g, name, 1, &n, base, step);
}

static Node *input(Graph *g, const char *name, int rank, const int64_t *dims)
{
    return tu_input(g, name, F32, rank, dims);
}

/* An attribute of a node under construction: ints when count > 0, one int
 * when count == 0, a float when count < 0. */
typedef struct TestAttr {
    const char *name;
    int count;
    int64_t v[6];
    float f;
} TestAttr;

/* Like tu_op, but with attributes set before the types are inferred (a Gemm
 * with transB=1 has no valid type under the defaults). */
static Node *op_with(Graph *g, const char *op_name, Node *const *args, int num_args,
                     const TestAttr *attrs, int num_attrs)
{
    const OpDef *op = op_lookup_any(op_name);
    ck_assert_ptr_nonnull(op);
    Node *n = graph_create_op(g, NULL, op, op_name, args, num_args);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(op_apply_attr_specs(op, n, &tu_diag), FX_OK);
    for (int i = 0; i < num_attrs; i++) {
        const TestAttr *a = &attrs[i];
        if (a->count > 0)
            ck_assert_ptr_nonnull(node_set_attr_ints(n, a->name, a->v, a->count));
        else if (a->count == 0)
            ck_assert_ptr_nonnull(node_set_attr_int(n, a->name, a->v[0]));
        else
            ck_assert_ptr_nonnull(node_set_attr_float(n, a->name, a->f));
    }
    ck_assert(node_set_num_outputs(n, 1));
    tu_reinfer(n);
    return n;
}

static Node *op2(Graph *g, const char *name, Node *a, Node *b)
{
    Node *args[2] = {a, b};
    return tu_op(g, name, args, b ? 2 : 1);
}

static Node *op3(Graph *g, const char *name, Node *a, Node *b, Node *c)
{
    Node *args[3] = {a, b, c};
    return tu_op(g, name, args, 3);
}

/* A BatchNormalization of x over `channels` with distinct, positive
 * variances and nonzero shifts. */
static Node *batchnorm(Graph *g, Node *x, int64_t channels)
{
    Node *args[5] = {x, vec(g, "bn_scale", channels, 0.5f, 0.25f),
                     vec(g, "bn_bias", channels, -0.3f, 0.2f),
                     vec(g, "bn_mean", channels, 0.1f, -0.15f),
                     vec(g, "bn_var", channels, 0.4f, 0.3f)};
    return tu_op(g, "BatchNormalization", args, 5);
}

static Node *conv(Graph *g, Node *x, Node *w, Node *b, int64_t pad, int64_t group)
{
    Node *args[3] = {x, w, b};
    TestAttr attrs[2] = {{.name = "pads", .count = 4, .v = {pad, pad, pad, pad}},
                         {.name = "group", .count = 0, .v = {group}}};
    return op_with(g, "Conv", args, b ? 3 : 2, attrs, 2);
}

static Node *gemm(Graph *g, Node *x, Node *w, Node *c, int64_t trans_a, int64_t trans_b)
{
    Node *args[3] = {x, w, c};
    TestAttr attrs[2] = {{.name = "transA", .count = 0, .v = {trans_a}},
                         {.name = "transB", .count = 0, .v = {trans_b}}};
    return op_with(g, "Gemm", args, c ? 3 : 2, attrs, 2);
}

/* The pass on g (checked by tu_run_pass), then the golden text; returns the
 * change count. */
static int run(Graph *g, PassFn pass, const char *golden)
{
    int changes = tu_run_pass(g, pass, RTOL, ATOL);
    tu_assert_golden(g, "linfold", golden);
    return changes;
}

/* --- bn-fold --------------------------------------------------------------------- */

START_TEST(test_bn_after_conv)
{
    Graph *g = graph_new();
    int64_t xd[4] = {2, 3, 5, 5}, wd[4] = {4, 3, 3, 3};
    Node *x = input(g, "x", 4, xd);
    Node *c = conv(g, x, tu_weights(g, "w", 4, wd, 0.1f), vec(g, "b", 4, 0.2f, -0.1f), 1, 1);
    Node *y = batchnorm(g, c, 4);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_bn_fold, "bn_after_conv"), 1);
    ck_assert_int_eq(tu_count_op(g, "BatchNormalization"), 0);
    ck_assert_int_eq(tu_count_calls(g), 1);
    graph_free(g);
}
END_TEST

/* Depthwise, without a bias: the BN creates it. */
START_TEST(test_bn_after_depthwise_conv_without_bias)
{
    Graph *g = graph_new();
    int64_t xd[4] = {1, 4, 6, 6}, wd[4] = {4, 1, 3, 3};
    Node *x = input(g, "x", 4, xd);
    Node *c = conv(g, x, tu_weights(g, "w", 4, wd, 0.2f), NULL, 1, 4);
    Node *y = batchnorm(g, c, 4);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_bn_fold, "bn_after_depthwise"), 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    ck_assert_int_eq(tu_count_op(g, "Conv"), 1);
    graph_free(g);
}
END_TEST

/* Two groups: output channel j of group k is W[k * cin/g + c, j]. */
START_TEST(test_bn_after_conv_transpose)
{
    Graph *g = graph_new();
    int64_t xd[4] = {1, 4, 3, 3}, wd[4] = {4, 3, 2, 2};
    Node *x = input(g, "x", 4, xd);
    Node *args[2] = {x, tu_weights(g, "w", 4, wd, 0.1f)};
    TestAttr attrs[2] = {{.name = "group", .count = 0, .v = {2}},
                         {.name = "strides", .count = 2, .v = {2, 2}}};
    Node *c = op_with(g, "ConvTranspose", args, 2, attrs, 2);
    Node *y = batchnorm(g, c, 6);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_bn_fold, "bn_after_conv_transpose"), 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    graph_free(g);
}
END_TEST

/* transB = 1: the scale runs along W's rows. */
START_TEST(test_bn_after_gemm)
{
    Graph *g = graph_new();
    int64_t xd[2] = {3, 4}, wd[2] = {5, 4};
    Node *x = input(g, "x", 2, xd);
    Node *l = gemm(g, x, tu_weights(g, "w", 2, wd, 0.1f), vec(g, "c", 5, 0.0f, 0.1f), 0, 1);
    Node *y = batchnorm(g, l, 5);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_bn_fold, "bn_after_gemm"), 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    ck_assert_int_eq(tu_count_op(g, "Gemm"), 1);
    graph_free(g);
}
END_TEST

/* A 2-D MatMul has no bias: it becomes a Gemm. */
START_TEST(test_bn_after_matmul)
{
    Graph *g = graph_new();
    int64_t xd[2] = {3, 4}, wd[2] = {4, 5};
    Node *x = input(g, "x", 2, xd);
    Node *l = op2(g, "MatMul", x, tu_weights(g, "w", 2, wd, 0.1f));
    Node *y = batchnorm(g, l, 5);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_bn_fold, "bn_after_matmul"), 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    ck_assert_int_eq(tu_count_op(g, "Gemm"), 1);
    graph_free(g);
}
END_TEST

/* BN after a Relu has no layer to go into; the Conv after it pads (so the
 * shift may not go there): the BN stays. */
START_TEST(test_bn_before_padded_conv_stays)
{
    Graph *g = graph_new();
    int64_t xd[4] = {1, 3, 5, 5}, wd[4] = {2, 3, 3, 3};
    Node *x = input(g, "x", 4, xd);
    Node *b = batchnorm(g, op2(g, "Relu", x, NULL), 3);
    Node *y = conv(g, b, tu_weights(g, "w", 4, wd, 0.1f), NULL, 1, 1);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_bn_fold, "bn_before_padded_conv"), 0);
    ck_assert_int_eq(tu_count_op(g, "BatchNormalization"), 1);
    graph_free(g);
}
END_TEST

/* The same without padding: W scaled along the input channels, W.shift
 * added to the bias. */
START_TEST(test_bn_before_unpadded_conv)
{
    Graph *g = graph_new();
    int64_t xd[4] = {1, 3, 5, 5}, wd[4] = {2, 3, 3, 3};
    Node *x = input(g, "x", 4, xd);
    Node *b = batchnorm(g, op2(g, "Relu", x, NULL), 3);
    Node *y = conv(g, b, tu_weights(g, "w", 4, wd, 0.1f), vec(g, "cb", 2, 1.0f, 1.0f), 0, 1);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_bn_fold, "bn_before_conv"), 1);
    ck_assert_int_eq(tu_count_op(g, "BatchNormalization"), 0);
    ck_assert_int_eq(tu_count_calls(g), 2); /* Relu, Conv */
    graph_free(g);
}
END_TEST

/* The conv's output is also returned: folding would change that output. */
START_TEST(test_bn_other_user_stays)
{
    Graph *g = graph_new();
    int64_t xd[4] = {1, 3, 4, 4}, wd[4] = {2, 3, 1, 1};
    Node *x = input(g, "x", 4, xd);
    Node *c = conv(g, x, tu_weights(g, "w", 4, wd, 0.1f), NULL, 0, 1);
    Node *outs[2] = {batchnorm(g, c, 2), c};
    tu_finish(g, outs, 2);
    ck_assert_int_eq(run(g, pass_bn_fold, "bn_other_user"), 0);
    ck_assert_int_eq(tu_count_op(g, "BatchNormalization"), 1);
    graph_free(g);
}
END_TEST

/* A scale that is a graph input is not a constant. */
START_TEST(test_bn_nonconstant_scale_stays)
{
    Graph *g = graph_new();
    int64_t xd[2] = {3, 4}, wd[2] = {4, 2}, sd[1] = {2};
    Node *x = input(g, "x", 2, xd);
    Node *scale = input(g, "scale", 1, sd);
    Node *l = op2(g, "MatMul", x, tu_weights(g, "w", 2, wd, 0.1f));
    Node *args[5] = {l, scale, vec(g, "bn_bias", 2, 0.1f, 0.1f), vec(g, "bn_mean", 2, 0.0f, 0.1f),
                     vec(g, "bn_var", 2, 1.0f, 0.5f)};
    Node *y = tu_op(g, "BatchNormalization", args, 5);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_bn_fold, "bn_nonconstant_scale"), 0);
    ck_assert_int_eq(tu_count_op(g, "BatchNormalization"), 1);
    graph_free(g);
}
END_TEST

/* BN -> BN -> Conv without padding: the second BN folds first, which makes
 * the first one the Conv's input; the walk repeats until both are in. */
START_TEST(test_bn_chain_before_conv)
{
    Graph *g = graph_new();
    int64_t xd[4] = {1, 2, 4, 4}, wd[4] = {3, 2, 2, 2};
    Node *x = input(g, "x", 4, xd);
    Node *b = batchnorm(g, batchnorm(g, x, 2), 2);
    Node *y = conv(g, b, tu_weights(g, "w", 4, wd, 0.1f), NULL, 0, 1);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_bn_fold, "bn_chain_before_conv"), 2);
    ck_assert_int_eq(tu_count_calls(g), 1);
    graph_free(g);
}
END_TEST

/* --- linear-fold: affine ops after a layer ------------------------------------ */

/* (gemm * s + t) - u / 2 with alpha and beta: all into W and C. */
START_TEST(test_gemm_then_affine_chain)
{
    Graph *g = graph_new();
    int64_t xd[2] = {3, 4}, wd[2] = {4, 5};
    Node *x = input(g, "x", 2, xd);
    Node *args[3] = {x, tu_weights(g, "w", 2, wd, 0.1f), vec(g, "c", 5, 0.5f, -0.2f)};
    TestAttr attrs[2] = {{.name = "alpha", .count = -1, .f = 0.5f},
                         {.name = "beta", .count = -1, .f = 2.0f}};
    Node *l = op_with(g, "Gemm", args, 3, attrs, 2);
    Node *m = op2(g, "Mul", vec(g, "s", 5, -1.0f, 0.5f), l);
    Node *a = op2(g, "Add", m, tu_scalar(g, "t", 0.25f));
    Node *y = op2(g, "Div", a, tu_scalar(g, "two", 2.0f));
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_linear_fold, "gemm_then_affine"), 3);
    ck_assert_int_eq(tu_count_calls(g), 1);
    graph_free(g);
}
END_TEST

/* A full [M, N] constant added after a Gemm goes into C. */
START_TEST(test_gemm_then_full_add)
{
    Graph *g = graph_new();
    int64_t xd[2] = {3, 4}, wd[2] = {5, 4}, cd[2] = {3, 5};
    Node *x = input(g, "x", 2, xd);
    Node *l = gemm(g, x, tu_weights(g, "w", 2, wd, 0.1f), NULL, 0, 1);
    Node *y = op2(g, "Sub", ramp(g, "k", 2, cd, -1.0f, 0.125f), l); /* k - gemm */
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_linear_fold, "gemm_then_full_sub"), 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    graph_free(g);
}
END_TEST

/* MatMul + [N] bias becomes one Gemm. */
START_TEST(test_matmul_then_add)
{
    Graph *g = graph_new();
    int64_t xd[2] = {2, 3}, wd[2] = {3, 4};
    Node *x = input(g, "x", 2, xd);
    Node *l = op2(g, "MatMul", x, tu_weights(g, "w", 2, wd, 0.1f));
    Node *y = op2(g, "Add", l, vec(g, "bias", 4, 0.1f, 0.3f));
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_linear_fold, "matmul_then_add"), 1);
    ck_assert_int_eq(tu_count_op(g, "Gemm"), 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    graph_free(g);
}
END_TEST

/* A batched MatMul takes the Mul into W but has no room for the Add. */
START_TEST(test_batched_matmul_mul_folds_add_stays)
{
    Graph *g = graph_new();
    int64_t xd[3] = {2, 3, 4}, wd[2] = {4, 5};
    Node *x = input(g, "x", 3, xd);
    Node *l = op2(g, "MatMul", x, tu_weights(g, "w", 2, wd, 0.1f));
    Node *m = op2(g, "Mul", l, vec(g, "s", 5, 2.0f, -0.5f));
    Node *y = op2(g, "Add", m, vec(g, "t", 5, 0.1f, 0.1f));
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_linear_fold, "batched_matmul"), 1);
    ck_assert_int_eq(tu_count_op(g, "MatMul"), 1);
    ck_assert_int_eq(tu_count_op(g, "Mul"), 0);
    ck_assert_int_eq(tu_count_op(g, "Add"), 1);
    graph_free(g);
}
END_TEST

/* (conv - [1, C, 1, 1]) / 4 into a padded Conv's weights and bias. */
START_TEST(test_conv_then_sub_div)
{
    Graph *g = graph_new();
    int64_t xd[4] = {1, 2, 5, 5}, wd[4] = {3, 2, 3, 3}, sd[4] = {1, 3, 1, 1};
    Node *x = input(g, "x", 4, xd);
    Node *c = conv(g, x, tu_weights(g, "w", 4, wd, 0.1f), NULL, 1, 1);
    Node *s = op2(g, "Sub", c, ramp(g, "k", 4, sd, 0.5f, -0.5f));
    Node *y = op2(g, "Div", s, tu_scalar(g, "four", 4.0f));
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_linear_fold, "conv_then_sub_div"), 2);
    ck_assert_int_eq(tu_count_calls(g), 1);
    graph_free(g);
}
END_TEST

/* A constant along the spatial axes is not per channel; neither is a
 * Gemm scale per row. */
START_TEST(test_wrong_axis_stays)
{
    Graph *g = graph_new();
    int64_t xd[4] = {1, 2, 3, 3}, wd[4] = {2, 2, 1, 1}, kd[4] = {1, 1, 3, 3};
    int64_t gd[2] = {3, 4}, gw[2] = {4, 2}, rd[2] = {3, 1};
    Node *x = input(g, "x", 4, xd);
    Node *v = input(g, "v", 2, gd);
    Node *c = conv(g, x, tu_weights(g, "w", 4, wd, 0.1f), NULL, 0, 1);
    Node *y1 = op2(g, "Mul", c, ramp(g, "k", 4, kd, 1.0f, 0.25f));
    Node *l = gemm(g, v, tu_weights(g, "gw", 2, gw, 0.1f), NULL, 0, 0);
    Node *y2 = op2(g, "Mul", l, ramp(g, "rows", 2, rd, 1.0f, 1.0f));
    Node *outs[2] = {y1, y2};
    tu_finish(g, outs, 2);
    ck_assert_int_eq(run(g, pass_linear_fold, "wrong_axis"), 0);
    ck_assert_int_eq(tu_count_op(g, "Mul"), 2);
    graph_free(g);
}
END_TEST

/* The Gemm's output is also returned; the Add's other operand is an input. */
START_TEST(test_affine_other_user_or_nonconstant_stays)
{
    Graph *g = graph_new();
    int64_t xd[2] = {3, 4}, wd[2] = {4, 5}, td[1] = {5};
    Node *x = input(g, "x", 2, xd);
    Node *t = input(g, "t", 1, td);
    Node *l = gemm(g, x, tu_weights(g, "w", 2, wd, 0.1f), NULL, 0, 0);
    Node *a = op2(g, "Add", l, vec(g, "bias", 5, 1.0f, 1.0f));
    Node *l2 = gemm(g, x, tu_weights(g, "w2", 2, wd, -0.1f), NULL, 0, 0);
    Node *b = op2(g, "Add", l2, t);
    Node *outs[3] = {a, l, b};
    tu_finish(g, outs, 3);
    ck_assert_int_eq(run(g, pass_linear_fold, "other_user_nonconstant"), 0);
    ck_assert_int_eq(tu_count_op(g, "Add"), 2);
    graph_free(g);
}
END_TEST

/* An int32 constant with values[i] = base + step * i. */
static Node *int_ramp(Graph *g, const char *name, int rank, const int64_t *dims, int32_t base,
                      int32_t step)
{
    TensorType t = {.dtype = FXRT_DTYPE_INT32, .rank = rank};
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    Tensor *v = tensor_new(&t, &tu_diag);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < tensor_numel(v); i++)
        ((int32_t *)v->data)[i] = base + step * (int32_t)i;
    return tu_constant(g, name, v);
}

/* int32 MatMul * 3 + b: only float32 folds. */
START_TEST(test_integer_stays)
{
    Graph *g = graph_new();
    int64_t xd[2] = {2, 3}, wd[2] = {3, 2}, bd[1] = {2}, one[1] = {1};
    Node *x = tu_input(g, "x", FXRT_DTYPE_INT32, 2, xd);
    Node *l = op2(g, "MatMul", x, int_ramp(g, "w", 2, wd, -2, 1));
    Node *m = op2(g, "Mul", l, int_ramp(g, "three", 1, one, 3, 0));
    Node *y = op2(g, "Add", m, int_ramp(g, "b", 1, bd, 5, -12));
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_linear_fold, "integer"), 0);
    ck_assert_int_eq(tu_count_calls(g), 3);
    graph_free(g);
}
END_TEST

/* Two Gemms share W; folding a Mul into one must not change the other's. */
START_TEST(test_shared_weights_copied)
{
    Graph *g = graph_new();
    int64_t xd[2] = {3, 4}, wd[2] = {4, 5};
    Node *x = input(g, "x", 2, xd);
    Node *w = tu_weights(g, "w", 2, wd, 0.1f);
    Node *y1 = op2(g, "Mul", gemm(g, x, w, NULL, 0, 0), tu_scalar(g, "three", 3.0f));
    Node *y2 = gemm(g, x, w, NULL, 0, 0);
    Node *outs[2] = {y1, y2};
    tu_finish(g, outs, 2);
    ck_assert_int_eq(run(g, pass_linear_fold, "shared_weights"), 1);
    ck_assert_int_eq(tu_count_op(g, "Mul"), 0);
    ck_assert_int_eq(w->num_users, 1);
    graph_free(g);
}
END_TEST

/* --- linear-fold: affine ops before a layer ----------------------------------- */

/* Gemm(c - x * s) with transA = 1: s per input row of A, c a full [K, M]. */
START_TEST(test_gemm_before_trans_a)
{
    Graph *g = graph_new();
    int64_t xd[2] = {4, 3}, sd[2] = {4, 1}, wd[2] = {4, 5};
    Node *x = input(g, "x", 2, xd);
    Node *m = op2(g, "Mul", x, ramp(g, "s", 2, sd, 0.5f, 0.5f));
    Node *a = op2(g, "Sub", ramp(g, "c", 2, xd, -0.6f, 0.1f), m);
    Node *y = gemm(g, a, tu_weights(g, "w", 2, wd, 0.1f), vec(g, "bias", 5, 0.0f, 1.0f), 1, 0);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_linear_fold, "gemm_before_trans_a"), 2);
    ck_assert_int_eq(tu_count_calls(g), 1);
    graph_free(g);
}
END_TEST

/* MatMul(x + c) with c per K: a 2-D MatMul becomes a Gemm with bias c.W. */
START_TEST(test_matmul_before_add)
{
    Graph *g = graph_new();
    int64_t xd[2] = {2, 3}, wd[2] = {3, 4};
    Node *x = input(g, "x", 2, xd);
    Node *a = op2(g, "Add", x, vec(g, "c", 3, 1.0f, -0.75f));
    Node *y = op2(g, "MatMul", a, tu_weights(g, "w", 2, wd, 0.1f));
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_linear_fold, "matmul_before_add"), 1);
    ck_assert_int_eq(tu_count_op(g, "Gemm"), 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    graph_free(g);
}
END_TEST

/* A per-channel Mul goes into a padded Conv (0 * s = 0); an Add only into
 * one that does not pad. */
START_TEST(test_conv_before)
{
    Graph *g = graph_new();
    int64_t xd[4] = {1, 2, 5, 5}, wd[4] = {3, 2, 3, 3}, sd[3] = {2, 1, 1};
    Node *x = input(g, "x", 4, xd);
    Node *m = op2(g, "Mul", x, ramp(g, "s", 3, sd, 2.0f, -1.5f));
    Node *c1 = conv(g, m, tu_weights(g, "w1", 4, wd, 0.1f), NULL, 1, 1);
    Node *a1 = op2(g, "Add", x, ramp(g, "t1", 3, sd, 0.5f, 0.5f));
    Node *c2 = conv(g, a1, tu_weights(g, "w2", 4, wd, 0.1f), NULL, 1, 1); /* stays */
    Node *a2 = op2(g, "Add", x, ramp(g, "t2", 3, sd, -0.5f, 1.0f));
    Node *c3 = conv(g, a2, tu_weights(g, "w3", 4, wd, 0.1f), vec(g, "b3", 3, 1.0f, 0.0f), 0, 1);
    Node *outs[3] = {c1, c2, c3};
    tu_finish(g, outs, 3);
    ck_assert_int_eq(run(g, pass_linear_fold, "conv_before"), 2);
    ck_assert_int_eq(tu_count_op(g, "Mul"), 0);
    ck_assert_int_eq(tu_count_op(g, "Add"), 1);
    graph_free(g);
}
END_TEST

/* --- linear-fold: clamps ------------------------------------------------------ */

START_TEST(test_clamp_chains)
{
    Graph *g = graph_new();
    int64_t xd[2] = {4, 6};
    Node *x = input(g, "x", 2, xd);
    Node *m = op2(g, "Mul", x, tu_scalar(g, "ten", 10.0f)); /* values beyond 6 and -6 */
    /* relu6 = Clip(Relu(m), 0, 6) */
    Node *y1 = op3(g, "Clip", op2(g, "Relu", m, NULL), tu_scalar(g, "zero", 0.0f),
                   tu_scalar(g, "six", 6.0f));
    /* Clip(Clip(m, -1, 2), 0.5, 3) = Clip(m, 0.5, 2) */
    Node *c = op3(g, "Clip", m, tu_scalar(g, "lo1", -1.0f), tu_scalar(g, "hi1", 2.0f));
    Node *y2 = op3(g, "Clip", c, tu_scalar(g, "lo2", 0.5f), tu_scalar(g, "hi2", 3.0f));
    /* Relu(Clip(m, -3, None)) = Relu(m) */
    Node *y3 = op2(g, "Relu", op3(g, "Clip", m, tu_scalar(g, "lo3", -3.0f), NULL), NULL);
    /* Relu(Relu(m)) */
    Node *y4 = op2(g, "Relu", op2(g, "Relu", m, NULL), NULL);
    /* Clip(m, 0, +inf) alone */
    Node *y5 = op3(g, "Clip", m, tu_scalar(g, "zero5", 0.0f), tu_scalar(g, "inf", INFINITY));
    /* Clip(Clip(m, 2, 3), -1, 1) = 1 everywhere: the bounds cross */
    Node *c6 = op3(g, "Clip", m, tu_scalar(g, "lo6", 2.0f), tu_scalar(g, "hi6", 3.0f));
    Node *y6 = op3(g, "Clip", c6, tu_scalar(g, "lo7", -1.0f), tu_scalar(g, "hi7", 1.0f));
    Node *outs[6] = {y1, y2, y3, y4, y5, y6};
    tu_finish(g, outs, 6);
    ck_assert_int_eq(run(g, pass_linear_fold, "clamp_chains"), 6);
    ck_assert_int_eq(tu_count_op(g, "Relu"), 3);
    ck_assert_int_eq(tu_count_op(g, "Clip"), 3);
    graph_free(g);
}
END_TEST

/* Clip(m, 0, None) becomes a Relu; a Relu also read elsewhere, and a Clip
 * bound that is a graph input, stay. */
START_TEST(test_clamp_negative_cases)
{
    Graph *g = graph_new();
    int64_t xd[2] = {4, 6};
    Node *x = input(g, "x", 2, xd);
    Node *hi = tu_input(g, "hi", F32, 0, NULL);
    Node *y1 = op3(g, "Clip", x, tu_scalar(g, "zero", 0.0f), NULL);
    Node *r = op2(g, "Relu", x, NULL);
    Node *y2 = op3(g, "Clip", r, tu_scalar(g, "lo", 0.0f), tu_scalar(g, "six", 6.0f));
    Node *y3 = op2(g, "Relu", op3(g, "Clip", x, NULL, hi), NULL);
    Node *outs[4] = {y1, y2, r, y3};
    tu_finish(g, outs, 4);
    ck_assert_int_eq(run(g, pass_linear_fold, "clamp_negative"), 1);
    ck_assert_int_eq(tu_count_op(g, "Relu"), 3);
    ck_assert_int_eq(tu_count_op(g, "Clip"), 2);
    graph_free(g);
}
END_TEST

/* --- linear-fold: linear pairs ------------------------------------------------ */

/* [2, 8] -> 16 -> 4: 8*4 < 8*16 + 16*4, one Gemm; its second half keeps a
 * full [M, N] bias. */
START_TEST(test_pair_merges)
{
    Graph *g = graph_new();
    int64_t xd[2] = {2, 8}, w1d[2] = {16, 8}, w2d[2] = {16, 4}, cd[2] = {2, 4};
    Node *x = input(g, "x", 2, xd);
    Node *l1 = gemm(g, x, tu_weights(g, "w1", 2, w1d, 0.1f), vec(g, "b1", 16, -0.5f, 0.0625f),
                    0, 1);
    Node *y = gemm(g, l1, tu_weights(g, "w2", 2, w2d, 0.1f), ramp(g, "b2", 2, cd, 1.0f, 0.5f),
                   0, 0);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_linear_fold, "pair_merges"), 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    graph_free(g);
}
END_TEST

/* transA = 1 on the first Gemm stays on the merged one. */
START_TEST(test_pair_trans_a)
{
    Graph *g = graph_new();
    int64_t xd[2] = {6, 2}, w1d[2] = {6, 10}, w2d[2] = {10, 3};
    Node *x = input(g, "x", 2, xd);
    Node *l1 = gemm(g, x, tu_weights(g, "w1", 2, w1d, 0.1f), vec(g, "b1", 10, 0.5f, -0.1f), 1, 0);
    Node *y = op2(g, "MatMul", l1, tu_weights(g, "w2", 2, w2d, 0.1f));
    tu_finish(g, &y, 1);
    ck_assert_int_eq(run(g, pass_linear_fold, "pair_trans_a"), 1);
    ck_assert_int_eq(tu_count_op(g, "Gemm"), 1);
    ck_assert_int_eq(tu_count_calls(g), 1);
    graph_free(g);
}
END_TEST

/* Batched MatMul pair [2, 3, 6] -> 12 -> 2 merges; [2, 4] -> 2 -> 8 does
 * not pay (4*8 > 4*2 + 2*8). */
START_TEST(test_pair_matmul_and_not_worth_it)
{
    Graph *g = graph_new();
    int64_t xd[3] = {2, 3, 6}, w1d[2] = {6, 12}, w2d[2] = {12, 2};
    int64_t vd[2] = {2, 4}, v1d[2] = {4, 2}, v2d[2] = {2, 8};
    Node *x = input(g, "x", 3, xd);
    Node *v = input(g, "v", 2, vd);
    Node *l1 = op2(g, "MatMul", x, tu_weights(g, "w1", 2, w1d, 0.1f));
    Node *y1 = op2(g, "MatMul", l1, tu_weights(g, "w2", 2, w2d, 0.1f));
    Node *m1 = op2(g, "MatMul", v, tu_weights(g, "v1", 2, v1d, 0.1f));
    Node *y2 = op2(g, "MatMul", m1, tu_weights(g, "v2", 2, v2d, 0.1f));
    Node *outs[2] = {y1, y2};
    tu_finish(g, outs, 2);
    ck_assert_int_eq(run(g, pass_linear_fold, "pair_matmul"), 1);
    ck_assert_int_eq(tu_count_op(g, "MatMul"), 3);
    graph_free(g);
}
END_TEST

/* --- the seed model ------------------------------------------------------------- */

/* Gemm(x + param, W, b) folds to Gemm(x, W, b + param.W^T) (C [3, 5]); the
 * Clip stays; the output still matches ONNX Runtime's. */
START_TEST(test_seed)
{
    Graph *g = tu_load_model("examples/seed.onnx");
    ck_assert_int_eq(tu_run_pass(g, pass_bn_fold, RTOL, ATOL), 0);
    ck_assert_int_eq(tu_run_pass(g, pass_linear_fold, RTOL, ATOL), 1);
    tu_assert_golden(g, "linfold", "seed");
    ck_assert_int_eq(tu_count_calls(g), 2);
    ck_assert_int_eq(tu_count_op(g, "Gemm"), 1);
    ck_assert_int_eq(tu_count_op(g, "Clip"), 1);
    ck_assert_int_eq(tu_count_op(g, "Add"), 0);
    const TensorType *c = node_input_type(graph_find(g, "linear"), 2);
    ck_assert_int_eq(c->rank, 2);
    ck_assert_int_eq(c->dims[0], 3);
    ck_assert_int_eq(c->dims[1], 5);

    Tensor *x = NULL, *want = NULL, *got = NULL;
    ck_assert_int_eq(tensor_file_read(FXCC_SOURCE_DIR "/examples/seed_input.npy", &x, &tu_diag),
                     FX_OK);
    ck_assert_int_eq(
        tensor_file_read(FXCC_SOURCE_DIR "/examples/seed_expected.npy", &want, &tu_diag), FX_OK);
    const Tensor *in[1] = {x};
    ck_assert_int_eq(interp_run(g, in, 1, &got, 1, NULL, NULL, &tu_diag), FX_OK);
    CompareResult cmp = tensor_compare(got, want, 1e-5, 1e-6);
    ck_assert_msg(cmp.ok, "folded seed differs from ONNX Runtime: max abs %g", cmp.max_abs);
    tensor_free(x);
    tensor_free(want);
    tensor_free(got);
    graph_free(g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_linfold");
    TCase *bn = tcase_create("bn_fold");
    tcase_add_checked_fixture(bn, tu_setup, tu_teardown);
    tcase_add_test(bn, test_bn_after_conv);
    tcase_add_test(bn, test_bn_after_depthwise_conv_without_bias);
    tcase_add_test(bn, test_bn_after_conv_transpose);
    tcase_add_test(bn, test_bn_after_gemm);
    tcase_add_test(bn, test_bn_after_matmul);
    tcase_add_test(bn, test_bn_before_padded_conv_stays);
    tcase_add_test(bn, test_bn_before_unpadded_conv);
    tcase_add_test(bn, test_bn_other_user_stays);
    tcase_add_test(bn, test_bn_nonconstant_scale_stays);
    tcase_add_test(bn, test_bn_chain_before_conv);
    suite_add_tcase(s, bn);

    TCase *lf = tcase_create("linear_fold");
    tcase_add_checked_fixture(lf, tu_setup, tu_teardown);
    tcase_add_test(lf, test_gemm_then_affine_chain);
    tcase_add_test(lf, test_gemm_then_full_add);
    tcase_add_test(lf, test_matmul_then_add);
    tcase_add_test(lf, test_batched_matmul_mul_folds_add_stays);
    tcase_add_test(lf, test_conv_then_sub_div);
    tcase_add_test(lf, test_wrong_axis_stays);
    tcase_add_test(lf, test_affine_other_user_or_nonconstant_stays);
    tcase_add_test(lf, test_integer_stays);
    tcase_add_test(lf, test_shared_weights_copied);
    tcase_add_test(lf, test_gemm_before_trans_a);
    tcase_add_test(lf, test_matmul_before_add);
    tcase_add_test(lf, test_conv_before);
    tcase_add_test(lf, test_clamp_chains);
    tcase_add_test(lf, test_clamp_negative_cases);
    tcase_add_test(lf, test_pair_merges);
    tcase_add_test(lf, test_pair_trans_a);
    tcase_add_test(lf, test_pair_matmul_and_not_worth_it);
    tcase_add_test(lf, test_seed);
    suite_add_tcase(s, lf);
    return s;
}

int main(void) { return tu_main(suite()); }
