/*
 * check_opt_qdq.c - the qdq-fold pass on small QDQ graphs written inline,
 * as ONNX Runtime's quantizer writes them: per-tensor uint8 activations,
 * per-channel int8 weights, int32 biases behind a DequantizeLinear (or a
 * float bias), and the ops between quantizations.  Checked: the printed
 * graph after the pass against a golden file (tests/golden/opt/qdq/), that
 * no float Conv/Gemm/MatMul/Add is left, the interpreter's outputs before
 * and after within one quantization step of the graph's output (the
 * integer ops round once where the float graph rounded its float result),
 * and the compiled code for both targets equal to the interpreter on the
 * folded graph (integer kernels: rtol and atol 0); then the cases the pass
 * must leave alone.
 */
#include "opt_check_util.h"

/* op_name of args with an int attribute (`axis`) set before its types are
 * inferred. */
static Node *op_with_int(Graph *g, const char *op_name, Node *const *args, int num_args,
                         const char *attr, int64_t v)
{
    Node *n = graph_create_op(g, &g->root, op_lookup_any(op_name), op_name, args, num_args);
    ck_assert_ptr_nonnull(n);
    ck_assert(node_set_attr_int(n, attr, v) && node_set_num_outputs(n, 1));
    ck_assert_int_eq(op_apply_attr_specs(n->op, n, &tu_diag), FX_OK);
    ck_assert_int_eq(node_infer_shapes(n, &tu_diag), FX_OK);
    return n;
}

/* A pool with a 2x2 window, stride 2. */
static Node *pool2x2(Graph *g, const char *op_name, Node *x)
{
    static const int64_t k2[2] = {2, 2};
    Node *n = graph_create_op(g, &g->root, op_lookup_any(op_name), op_name, &x, 1);
    ck_assert_ptr_nonnull(n);
    ck_assert(node_set_attr_ints(n, "kernel_shape", k2, 2) &&
              node_set_attr_ints(n, "strides", k2, 2) && node_set_num_outputs(n, 1));
    ck_assert_int_eq(op_apply_attr_specs(n->op, n, &tu_diag), FX_OK);
    ck_assert_int_eq(node_infer_shapes(n, &tu_diag), FX_OK);
    return n;
}

static Node *scalar_of(Graph *g, const char *name, DType t, double v)
{
    TensorType tt = {.dtype = t, .rank = 0};
    Tensor *x = tensor_new(&tt, &tu_diag);
    ck_assert_ptr_nonnull(x);
    if (t == FXRT_DTYPE_FLOAT32)
        *(float *)x->data = (float)v;
    else
        fxrt_store_i64(t, x->data, 0, (int64_t)v);
    return tu_constant(g, name, x);
}

/* Q then DQ of v with (scale, uint8 zero point): the edge between two
 * quantized ops. */
static Node *qdq(Graph *g, Node *v, const char *name, double scale, int zp)
{
    char s[64], z[64];
    snprintf(s, sizeof s, "%s_scale", name);
    snprintf(z, sizeof z, "%s_zp", name);
    Node *sc = scalar_of(g, s, FXRT_DTYPE_FLOAT32, scale);
    Node *zn = scalar_of(g, z, FXRT_DTYPE_UINT8, zp);
    Node *q = tu_op3(g, "QuantizeLinear", v, sc, zn);
    return tu_op3(g, "DequantizeLinear", q, sc, zn);
}

/* DQ of constant int8 weights of dims, per channel along axis (scale
 * 0.01 + 0.002 c), zero point 0. */
static Node *dq_weights(Graph *g, const char *name, int rank, const int64_t *dims, int axis)
{
    TensorType wt = {.dtype = FXRT_DTYPE_INT8, .rank = rank};
    for (int d = 0; d < rank; d++)
        wt.dims[d] = dims[d];
    Tensor *w = tensor_new(&wt, &tu_diag);
    ck_assert_ptr_nonnull(w);
    for (int64_t i = 0; i < tensor_numel(w); i++)
        ((int8_t *)w->data)[i] = (int8_t)((i * 37 + 11) % 255 - 127);
    int64_t ch = dims[axis];
    TensorType st = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1, .dims = {ch}};
    TensorType zt = {.dtype = FXRT_DTYPE_INT8, .rank = 1, .dims = {ch}};
    Tensor *s = tensor_new(&st, &tu_diag), *z = tensor_new(&zt, &tu_diag);
    ck_assert(s && z);
    for (int64_t c = 0; c < ch; c++)
        ((float *)s->data)[c] = 0.01f + 0.002f * (float)c;
    char n1[64], n2[64];
    snprintf(n1, sizeof n1, "%s_scale", name);
    snprintf(n2, sizeof n2, "%s_zp", name);
    Node *args[3] = {tu_constant(g, name, w), tu_constant(g, n1, s), tu_constant(g, n2, z)};
    return op_with_int(g, "DequantizeLinear", args, 3, "axis", axis);
}

/* The int32 bias of `ch` channels behind a DQ with scale x_scale x
 * w_scale[c], as the quantizer writes it. */
static Node *dq_bias(Graph *g, const char *name, int64_t ch, float x_scale)
{
    TensorType bt = {.dtype = FXRT_DTYPE_INT32, .rank = 1, .dims = {ch}};
    TensorType st = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1, .dims = {ch}};
    Tensor *b = tensor_new(&bt, &tu_diag), *s = tensor_new(&st, &tu_diag);
    ck_assert(b && s);
    for (int64_t c = 0; c < ch; c++) {
        ((int32_t *)b->data)[c] = (int32_t)(c * 4001 - 6000);
        ((float *)s->data)[c] = x_scale * (0.01f + 0.002f * (float)c);
    }
    char n1[64];
    snprintf(n1, sizeof n1, "%s_scale", name);
    Node *args[2] = {tu_constant(g, name, b), tu_constant(g, n1, s)};
    return op_with_int(g, "DequantizeLinear", args, 2, "axis", 0);
}

/* x [1, 2, 8, 8] -> Q/DQ -> Conv 3x3 (4 channels, int32 bias) -> Q/DQ ->
 * MaxPool 2x2 -> Q/DQ (same parameters) -> Add with the conv's other
 * branch pooled -> Q/DQ -> GlobalAveragePool -> Q/DQ -> Flatten -> Q/DQ ->
 * Gemm (transB, float bias) -> Q/DQ. */
static Graph *build_convnet(void)
{
    Graph *g = graph_new();
    const int64_t xd[4] = {1, 2, 8, 8}, wd[4] = {4, 2, 3, 3}, fd[2] = {5, 4};
    Node *x = qdq(g, tu_input(g, "x", FXRT_DTYPE_FLOAT32, 4, xd), "x", 0.02, 128);
    Node *conv = tu_conv(g, x, dq_weights(g, "w", 4, wd, 0), dq_bias(g, "b", 4, 0.02f), 1, 1, 1);
    Node *c = qdq(g, conv, "conv", 0.05, 120);
    Node *p = qdq(g, pool2x2(g, "MaxPool", c), "pool", 0.05, 120);
    Node *avg = pool2x2(g, "AveragePool", c);
    Node *s = qdq(g, tu_op3(g, "Add", p, qdq(g, avg, "avg", 0.04, 110), NULL), "add", 0.08, 100);
    Node *gap = qdq(g, tu_op3(g, "GlobalAveragePool", s, NULL, NULL), "gap", 0.03, 90);
    Node *flat = tu_op3(g, "Flatten", gap, NULL, NULL);
    Node *f = qdq(g, flat, "gap", 0.03, 90);
    Node *fc_args[3] = {f, dq_weights(g, "fc_w", 2, fd, 0),
                        tu_weights_f32(g, "fc_b", 1, 5, 0, 0, 0, 0.2f)};
    Node *fc = op_with_int(g, "Gemm", fc_args, 3, "transB", 1);
    Node *y = qdq(g, fc, "y", 0.1, 128);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_convnet_folds)
{
    Graph *g = build_convnet();
    /* one output step (0.1) plus float slack */
    int changes = tu_run_pass(g, pass_qdq_fold, 0.0, 0.1001);
    ck_assert_int_eq(changes, 7);
    ck_assert_int_eq(tu_count_op(g, "QLinearConv"), 1);
    ck_assert_int_eq(tu_count_op(g, "QGemm"), 1);
    ck_assert_int_eq(tu_count_op(g, "QLinearAdd"), 1);
    ck_assert_int_eq(tu_count_op(g, "QLinearAveragePool"), 1);
    ck_assert_int_eq(tu_count_op(g, "QLinearGlobalAveragePool"), 1);
    ck_assert_int_eq(tu_count_op(g, "Conv") + tu_count_op(g, "Gemm") + tu_count_op(g, "Add"), 0);
    /* the input's Q and the output's DQ stay */
    ck_assert_int_eq(tu_count_op(g, "QuantizeLinear"), 1);
    ck_assert_int_eq(tu_count_op(g, "DequantizeLinear"), 1);
    tu_assert_golden(g, "qdq", "convnet");
    tu_assert_compiled_matches(g, NULL, "qdq_convnet", 0.0, 0.0);
    graph_free(g);
}
END_TEST

/* Concat of two quantized branches, Mul, Softmax. */
START_TEST(test_concat_mul_softmax)
{
    Graph *g = graph_new();
    const int64_t d[2] = {2, 6};
    Node *in_a = tu_input(g, "a", FXRT_DTYPE_FLOAT32, 2, d);
    Node *in_b = tu_input(g, "b", FXRT_DTYPE_FLOAT32, 2, d);
    Node *a = qdq(g, in_a, "a", 0.03, 128), *b = qdq(g, in_b, "b", 0.05, 100);
    Node *cat_args[2] = {a, b};
    Node *cat = op_with_int(g, "Concat", cat_args, 2, "axis", 1);
    Node *c = qdq(g, cat, "cat", 0.05, 110);
    Node *m = qdq(g, tu_op3(g, "Mul", c, c, NULL), "mul", 0.1, 0);
    Node *y = qdq(g, tu_op3(g, "Softmax", m, NULL, NULL), "softmax", 1.0 / 256, 0);
    tu_finish(g, &y, 1);
    ck_assert_int_eq(tu_run_pass(g, pass_qdq_fold, 0.0, 1.0 / 256 + 1e-6), 3);
    ck_assert_int_eq(tu_count_op(g, "QLinearConcat"), 1);
    ck_assert_int_eq(tu_count_op(g, "QLinearMul"), 1);
    ck_assert_int_eq(tu_count_op(g, "QLinearSoftmax"), 1);
    tu_assert_golden(g, "qdq", "concat_mul_softmax");
    tu_assert_compiled_matches(g, NULL, "qdq_concat", 0.0, 0.0);
    graph_free(g);
}
END_TEST

/* Left alone: a Conv whose float output has a second reader, a weight that
 * is a graph input, a MaxPool whose Q changes the parameters. */
START_TEST(test_not_folded)
{
    Graph *g = graph_new();
    const int64_t xd[4] = {1, 2, 6, 6}, wd[4] = {4, 2, 3, 3};
    Node *in_x = tu_input(g, "x", FXRT_DTYPE_FLOAT32, 4, xd);
    Node *in_w = tu_input(g, "w_in", FXRT_DTYPE_FLOAT32, 4, wd);
    Node *x = qdq(g, in_x, "x", 0.02, 128);
    Node *conv = tu_conv(g, x, dq_weights(g, "w", 4, wd, 0), NULL, 1, 1, 1);
    Node *c = qdq(g, conv, "conv", 0.05, 120);
    Node *win = qdq(g, in_w, "w_in", 0.01, 128);
    Node *conv2 = qdq(g, tu_conv(g, x, win, NULL, 1, 1, 1), "conv2", 0.05, 120);
    Node *p = qdq(g, pool2x2(g, "MaxPool", c), "pool", 0.06, 120);
    Node *outs[4] = {conv, conv2, p, c};
    tu_finish(g, outs, 4);
    ck_assert_int_eq(tu_run_pass(g, pass_qdq_fold, 0.0, 0.0), 0);
    ck_assert_int_eq(tu_count_op(g, "Conv"), 2);
    graph_free(g);
}
END_TEST

static Suite *qdq_suite(void)
{
    Suite *s = suite_create("opt_qdq");
    TCase *tc = tcase_create("qdq_fold");
    tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_convnet_folds);
    tcase_add_test(tc, test_concat_mul_softmax);
    tcase_add_test(tc, test_not_folded);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(qdq_suite()); }
