/*
 * check_opt_nchwc.c - the NCHWc layout pass: which convolutions it moves
 * into the blocked layout and where reorders remain (printed graphs against
 * golden files under tests/golden/opt/nchwc/), that the interpreter's
 * outputs stay allclose to the graph before the pass, and that the
 * generated C for the host and the portable target agrees with the
 * interpreter running the graph before any pass.
 */
#include <check.h>
#include <stdio.h>

#include "opt_check_util.h"

typedef Graph *(*Builder)(void);

/* bn-to-conv, epilogue and elementwise fusion, then the layout pass (expect_changes
 * nodes converted); golden file; then the compiled graph against the
 * unoptimized one.  Returns the optimized graph. */
static Graph *run_case_within(Builder build, const char *name, int expect_changes, double rtol)
{
    Graph *g = build(), *ref = build();
    tu_run_pass(g, pass_bn_to_conv, rtol, 1e-6);
    tu_run_pass(g, pass_epilogue_fusion, rtol, 1e-6);
    tu_run_pass(g, pass_elementwise_fusion, rtol, 1e-6);
    ck_assert_int_eq(tu_run_pass(g, pass_nchwc_layout, rtol, 1e-5), expect_changes);
    tu_assert_golden(g, "nchwc", name);
    tu_assert_compiled_matches(g, ref, name, 1e-4, 1e-5);
    graph_free(ref);
    return g;
}

static Graph *run_case(Builder build, const char *name, int expect_changes)
{
    return run_case_within(build, name, expect_changes, 1e-5);
}

/* An image's first layers: a plain-NCHW first convolution (3 channels),
 * a strided one, a depthwise one and a pointwise one.  Nothing but the
 * final reorder is left between them. */
static Graph *build_chain(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 3, 10, 9);
    Node *c1 = tu_conv(g, x, tu_weights_f32(g, "w1", 4, 8, 3, 3, 3, 0.1f),
                       tu_weights_f32(g, "b1", 1, 8, 0, 0, 0, 0.1f), 1, 1, 1);
    Node *r1 = tu_op3(g, "Relu", c1, NULL, NULL);
    Node *c2 = tu_conv(g, r1, tu_weights_f32(g, "w2", 4, 16, 8, 3, 3, 0.05f), NULL, 1, 2, 1);
    Node *lo = tu_scalar(g, "lo", 0.0f), *hi = tu_scalar(g, "hi", 6.0f);
    Node *r2 = tu_op3(g, "Clip", c2, lo, hi);
    Node *c3 = tu_conv(g, r2, tu_weights_f32(g, "w3", 4, 16, 1, 3, 3, 0.2f),
                       tu_weights_f32(g, "b3", 1, 16, 0, 0, 0, 0.1f), 1, 1, 16);
    Node *r3 = tu_op3(g, "Relu", c3, NULL, NULL);
    Node *c4 = tu_conv(g, r3, tu_weights_f32(g, "w4", 4, 5, 16, 1, 1, 0.1f), NULL, 0, 1, 1);
    tu_finish(g, &c4, 1);
    return g;
}

START_TEST(test_chain)
{
    Graph *g = run_case(build_chain, "chain", 4);
    ck_assert_int_eq(tu_count_op(g, "ConvNCHWc"), 4);
    ck_assert_int_eq(tu_count_op(g, "ToNCHWc"), 0);
    ck_assert_int_eq(tu_count_op(g, "FromNCHWc"), 1);
    graph_free(g);
}
END_TEST

/* A residual block on a batch of two, whose first activation is also read
 * by a Sigmoid that is a graph output: the Sigmoid runs on the blocks too
 * and gets its own FromNCHWc, and the input gets one ToNCHWc. */
static Graph *build_residual(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 2, 16, 6, 5);
    Node *a = tu_op3(g, "Relu",
                     tu_conv(g, x, tu_weights_f32(g, "wa", 4, 16, 16, 3, 3, 0.03f),
                             tu_weights_f32(g, "ba", 1, 16, 0, 0, 0, 0.1f), 1, 1, 1),
                     NULL, NULL);
    Node *b = tu_conv(g, a, tu_weights_f32(g, "wb", 4, 16, 16, 3, 3, 0.03f), NULL, 1, 1, 1);
    Node *y = tu_op3(g, "Relu", tu_op3(g, "Add", b, a, NULL), NULL, NULL);
    Node *results[2] = {y, tu_op3(g, "Sigmoid", a, NULL, NULL)};
    tu_finish(g, results, 2);
    return g;
}

START_TEST(test_residual)
{
    Graph *g = run_case(build_residual, "residual", 3);
    ck_assert_int_eq(tu_count_op(g, "ToNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "FromNCHWc"), 2);
    graph_free(g);
}
END_TEST

/* Two bottleneck blocks on a batch of two: the first adds its input before
 * the relu, so its last convolution writes over the residual, which dies
 * there (the plan's accumulates_into); the second adds after the relu
 * (residual_after), so its last convolution must read the residual where
 * it is. */
static Graph *build_bottlenecks(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 2, 24, 6, 5);
    Node *a1 = tu_op3(g, "Relu",
                      tu_conv(g, x, tu_weights_f32(g, "w1", 4, 8, 24, 1, 1, 0.1f),
                              tu_weights_f32(g, "b1", 1, 8, 0, 0, 0, 0.1f), 0, 1, 1),
                      NULL, NULL);
    Node *a2 = tu_op3(g, "Relu", tu_conv(g, a1, tu_weights_f32(g, "w2", 4, 8, 8, 3, 3, 0.1f),
                                         NULL, 1, 1, 1),
                      NULL, NULL);
    Node *a3 = tu_conv(g, a2, tu_weights_f32(g, "w3", 4, 24, 8, 1, 1, 0.1f),
                       tu_weights_f32(g, "b3", 1, 24, 0, 0, 0, 0.1f), 0, 1, 1);
    Node *y1 = tu_op3(g, "Relu", tu_op3(g, "Add", a3, x, NULL), NULL, NULL);
    Node *b1 = tu_op3(g, "Relu", tu_conv(g, y1, tu_weights_f32(g, "w4", 4, 8, 24, 1, 1, 0.1f),
                                         NULL, 0, 1, 1),
                      NULL, NULL);
    Node *b2 = tu_op3(g, "Relu", tu_conv(g, b1, tu_weights_f32(g, "w5", 4, 24, 8, 1, 1, 0.1f),
                                         tu_weights_f32(g, "b5", 1, 24, 0, 0, 0, 0.1f), 0, 1, 1),
                      NULL, NULL);
    Node *y2 = tu_op3(g, "Add", b2, y1, NULL);
    tu_finish(g, &y2, 1);
    return g;
}

START_TEST(test_residual_over_output)
{
    Graph *g = run_case(build_bottlenecks, "bottlenecks", 5);
    CgPlan p;
    Diag d;
    diag_init(&d);
    ck_assert_int_eq(cg_plan(g, &p, &d), FX_OK);
    ck_assert_int_eq(cg_plan_check(&p, &d), FX_OK);
    int over = 0, apart = 0;
    for (Node *n = g->root.next; n != &g->root; n = n->next) {
        if (!n->op || strcmp(n->op->name, "ConvNCHWc") != 0 || n->num_args < 4 || !n->args[3])
            continue;
        const CgValue *y = cg_root(p.by_id[n->id]), *r = cg_root(cg_arg_value(&p, n, 3));
        if (node_attr_int(n, "residual_after", 0)) {
            ck_assert_ptr_ne(y, r);
            apart++;
        } else {
            ck_assert_ptr_eq(y, r);
            over++;
        }
    }
    ck_assert_int_eq(over, 1);
    ck_assert_int_eq(apart, 1);
    cg_plan_free(&p);
    diag_free(&d);
    graph_free(g);
}
END_TEST

/* Channel counts that leave padding lanes (5, 13, 7), a sigmoid that makes
 * them nonzero (0.5) and a 5x5 depthwise kernel: padding must never reach a
 * real channel. */
static Graph *build_odd_channels(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 5, 7, 7);
    Node *d = tu_conv(g, x, tu_weights_f32(g, "wd", 4, 5, 1, 5, 5, 0.1f), NULL, 2, 1, 5);
    Node *c = tu_conv(g, d, tu_weights_f32(g, "wc", 4, 13, 5, 3, 3, 0.1f),
                      tu_weights_f32(g, "bc", 1, 13, 0, 0, 0, 0.1f), 0, 2, 1);
    Node *s = tu_op3(g, "Sigmoid", c, NULL, NULL);
    Node *p = tu_conv(g, s, tu_weights_f32(g, "wp", 4, 7, 13, 1, 1, 0.2f), NULL, 0, 1, 1);
    tu_finish(g, &p, 1);
    return g;
}

START_TEST(test_odd_channels)
{
    Graph *g = run_case(build_odd_channels, "odd_channels", 3);
    ck_assert_int_eq(tu_count_op(g, "ToNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "FromNCHWc"), 1);
    graph_free(g);
}
END_TEST

/* Inception's and squeeze-and-excite's patterns stay blocked: a Concat of
 * 16 + 5 channels (only the last input may leave padding lanes), a pool of
 * it, a per-channel scale computed from its global average (GAP, 1x1 conv,
 * Relu, 1x1 conv, Sigmoid, Mul), a constant per-channel Mul and a scalar
 * Add.  A Concat whose first input has 5 channels cannot concatenate
 * blocks: it reads plain NCHW, and so does what follows it. */
static Node *pool(Graph *g, const char *op, Node *x, int64_t k, int64_t stride, int64_t pad,
                  int64_t ceil_mode);

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

static Graph *build_concat_scale(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 8, 6, 6);
    Node *a = tu_op3(g, "Relu", tu_conv(g, x, tu_weights_f32(g, "wa", 4, 16, 8, 3, 3, 0.05f),
                                        NULL, 1, 1, 1), NULL, NULL);
    Node *b = tu_conv(g, x, tu_weights_f32(g, "wb", 4, 5, 8, 1, 1, 0.1f),
                      tu_weights_f32(g, "bb", 1, 5, 0, 0, 0, 0.1f), 0, 1, 1);
    Node *cat = concat2(g, a, b);
    Node *mp = pool(g, "MaxPool", cat, 3, 1, 1, 0);
    Node *gap = tu_op3(g, "GlobalAveragePool", mp, NULL, NULL);
    Node *sq = tu_op3(g, "Relu", tu_conv(g, gap, tu_weights_f32(g, "wsq", 4, 4, 21, 1, 1, 0.1f),
                                         NULL, 0, 1, 1), NULL, NULL);
    Node *ex = tu_op3(g, "Sigmoid", tu_conv(g, sq, tu_weights_f32(g, "wex", 4, 21, 4, 1, 1, 0.2f),
                                            NULL, 0, 1, 1), NULL, NULL);
    Node *scaled = tu_op3(g, "Mul", mp, ex, NULL);
    Node *per_channel = tu_op3(g, "Mul", scaled, tu_weights_f32(g, "k", 3, 21, 1, 1, 0, 0.3f),
                               NULL);
    Node *shifted = tu_op3(g, "Add", per_channel, tu_scalar(g, "half", 0.5f), NULL);
    Node *y = tu_conv(g, shifted, tu_weights_f32(g, "wy", 4, 8, 21, 1, 1, 0.1f), NULL, 0, 1, 1);
    Node *odd = concat2(g, b, y);
    Node *r = tu_op3(g, "Relu", odd, NULL, NULL);
    tu_finish(g, &r, 1);
    return g;
}

START_TEST(test_concat_scale)
{
    /* 5 convolutions, Concat, MaxPool, GAP and the FusedElementwise of
     * the two Muls and the Add */
    Graph *g = run_case(build_concat_scale, "concat_scale", 9);
    ck_assert_int_eq(tu_count_op(g, "FusedElementwise"), 1);
    ck_assert_int_eq(tu_count_op(g, "ConvNCHWc"), 5);
    ck_assert_int_eq(tu_count_op(g, "MaxPoolNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "ToNCHWc"), 1);
    /* b and y for the odd Concat */
    ck_assert_int_eq(tu_count_op(g, "FromNCHWc"), 2);
    graph_free(g);
}
END_TEST

/* DenseNet's pre-activation: BatchNormalization -> Relu -> padded 3x3
 * Conv, which bn-fold cannot fold (a padded tap would read the shift).  It
 * becomes a depthwise 1x1 ConvNCHWc with the Relu as its epilogue. */
static Node *positive_weights(Graph *g, const char *name, int64_t n)
{
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1, .dims = {n}};
    Tensor *v = tensor_new(&t, &tu_diag);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < n; i++)
        ((float *)v->data)[i] = 0.5f + 0.1f * (float)(i % 5);
    return tu_constant(g, name, v);
}

static Graph *build_bn_relu(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 16, 5, 5);
    Node *c = tu_conv(g, x, tu_weights_f32(g, "wc", 4, 16, 16, 1, 1, 0.1f), NULL, 0, 1, 1);
    Node *args[5] = {c, positive_weights(g, "gamma", 16),
                     tu_weights_f32(g, "beta", 1, 16, 0, 0, 0, 0.1f),
                     tu_weights_f32(g, "mean", 1, 16, 0, 0, 0, 0.05f),
                     positive_weights(g, "var", 16)};
    Node *bn = tu_op(g, "BatchNormalization", args, 5);
    Node *r = tu_op3(g, "Relu", bn, NULL, NULL);
    Node *y = tu_conv(g, r, tu_weights_f32(g, "wy", 4, 8, 16, 3, 3, 0.05f), NULL, 1, 1, 1);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_bn_relu)
{
    Graph *g = run_case(build_bn_relu, "bn_relu", 3);
    ck_assert_int_eq(tu_count_op(g, "BatchNormalization"), 0);
    ck_assert_int_eq(tu_count_op(g, "Relu"), 0);
    ck_assert_int_eq(tu_count_op(g, "ConvNCHWc"), 3);
    ck_assert_int_eq(tu_count_op(g, "ToNCHWc") + tu_count_op(g, "FromNCHWc"), 2);
    graph_free(g);
}
END_TEST

/* A windowed pool: k x k, stride, `pad` on every side, ceil_mode. */
static Node *pool(Graph *g, const char *op, Node *x, int64_t k, int64_t stride, int64_t pad,
                  int64_t ceil_mode)
{
    Node *n = graph_create_op(g, NULL, op_lookup(op), op, &x, 1);
    ck_assert_ptr_nonnull(n);
    int64_t kernel[2] = {k, k}, strides[2] = {stride, stride}, pads[4] = {pad, pad, pad, pad};
    ck_assert_ptr_nonnull(node_set_attr_ints(n, "kernel_shape", kernel, 2));
    ck_assert_ptr_nonnull(node_set_attr_ints(n, "strides", strides, 2));
    ck_assert_ptr_nonnull(node_set_attr_ints(n, "pads", pads, 4));
    ck_assert_ptr_nonnull(node_set_attr_int(n, "ceil_mode", ceil_mode));
    ck_assert_int_eq(op_apply_attr_specs(n->op, n, &tu_diag), FX_OK);
    ck_assert(node_set_num_outputs(n, 1));
    tu_reinfer(n);
    return n;
}

/* Pools between convolutions keep the layout: a padded ceil-mode MaxPool,
 * an AveragePool whose border windows count fewer taps, and the global
 * average before the classifier, where the only reorder is. */
static Graph *build_pools(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 3, 12, 11);
    Node *c1 = tu_op3(g, "Relu",
                      tu_conv(g, x, tu_weights_f32(g, "w1", 4, 8, 3, 3, 3, 0.1f),
                              tu_weights_f32(g, "b1", 1, 8, 0, 0, 0, 0.1f), 1, 1, 1),
                      NULL, NULL);
    Node *p1 = pool(g, "MaxPool", c1, 3, 2, 1, 1);
    Node *c2 = tu_conv(g, p1, tu_weights_f32(g, "w2", 4, 12, 8, 3, 3, 0.05f), NULL, 1, 1, 1);
    Node *p2 = pool(g, "AveragePool", c2, 3, 1, 1, 0);
    Node *c3 = tu_conv(g, p2, tu_weights_f32(g, "w3", 4, 10, 12, 1, 1, 0.1f), NULL, 0, 1, 1);
    Node *gap = tu_op3(g, "GlobalAveragePool", c3, NULL, NULL);
    tu_finish(g, &gap, 1);
    return g;
}

START_TEST(test_pools)
{
    Graph *g = run_case(build_pools, "pools", 6);
    ck_assert_int_eq(tu_count_op(g, "MaxPoolNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "AveragePoolNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "GlobalAveragePoolNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "ToNCHWc") + tu_count_op(g, "FromNCHWc"), 1);
    graph_free(g);
}
END_TEST

/* Grouped (not depthwise) convolutions and weights that are not constants
 * have no NCHWc kernel: the pass leaves them alone. */
static Graph *build_left_alone(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 8, 5, 5), *w = tu_input_f32(g, "w", 4, 4, 8, 1, 1);
    Node *grouped = tu_conv(g, x, tu_weights_f32(g, "wg", 4, 8, 4, 3, 3, 0.1f), NULL, 1, 1, 2);
    Node *dynamic = tu_conv(g, grouped, w, NULL, 0, 1, 1);
    tu_finish(g, &dynamic, 1);
    return g;
}

START_TEST(test_left_alone)
{
    Graph *g = build_left_alone();
    ck_assert_int_eq(tu_run_pass(g, pass_nchwc_layout, 1e-6, 1e-6), 0);
    ck_assert_int_eq(tu_count_op(g, "Conv"), 2);
    graph_free(g);
}
END_TEST

/* The winograd pass after the layout pass: of four 3x3 layers, the two
 * stride-1 ones of 64 channels in and out (one with a residual) run by
 * Winograd; the strided one and the one of 8 outputs stay direct. */
static Node *transpose(Graph *g, Node *x, const int64_t perm[4])
{
    Node *n = tu_op3(g, "Transpose", x, NULL, NULL);
    ck_assert_ptr_nonnull(node_set_attr_ints(n, "perm", perm, 4));
    tu_reinfer(n);
    return n;
}

/* A ConvNeXt block on 13 channels (padding lanes, made 0.5 by a Sigmoid
 * that LayerNormNCHWc must leave out of its statistics): depthwise 3x3,
 * Transpose to channels-last, LayerNorm, two MatMuls, Transpose back, layer
 * scale and residual Add, then a 1x1 convolution.  The block's entry
 * becomes one LayerNormNCHWc, its exit one NHWCToNCHWc, and the residual
 * Add runs blocked.  The LayerNorm is also read channels-first by a graph
 * output, a Transpose that no blocked reader wants: it stays. */
static Graph *build_channels_last_block(void)
{
    static const int64_t last[4] = {0, 2, 3, 1}, first[4] = {0, 3, 1, 2};
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 13, 6, 5);
    Node *dw = tu_op3(g, "Sigmoid",
                      tu_conv(g, x, tu_weights_f32(g, "wd", 4, 13, 1, 3, 3, 1.0f),
                              tu_weights_f32(g, "bd", 1, 13, 0, 0, 0, 0.1f), 1, 1, 13),
                      NULL, NULL);
    Node *ln = tu_op3(g, "LayerNormalization", transpose(g, dw, last),
                      tu_weights_f32(g, "gamma", 1, 13, 0, 0, 0, 1.0f),
                      tu_weights_f32(g, "beta", 1, 13, 0, 0, 0, 0.2f));
    Node *h = tu_op3(g, "Relu", tu_op3(g, "MatMul", ln, tu_weights_f32(g, "w1", 2, 13, 20, 0, 0, 0.3f), NULL),
                     NULL, NULL);
    Node *o = tu_op3(g, "MatMul", h, tu_weights_f32(g, "w2", 2, 20, 13, 0, 0, 0.3f), NULL);
    Node *scaled = tu_op3(g, "Mul", transpose(g, o, first),
                          tu_weights_f32(g, "layer_scale", 3, 13, 1, 1, 0, 0.5f), NULL);
    Node *y = tu_op3(g, "Add", scaled, x, NULL);
    Node *results[2] = {tu_conv(g, y, tu_weights_f32(g, "wp", 4, 7, 13, 1, 1, 0.2f), NULL, 0, 1, 1),
                        transpose(g, ln, first)};
    tu_finish(g, results, 2);
    return g;
}

START_TEST(test_channels_last_block)
{
    /* The LayerNorm divides by the spread of 13 sigmoids, which magnifies
     * the convolution's rounding (each pass changes its order of additions)
     * about tenfold. */
    Graph *g = run_case_within(build_channels_last_block, "channels_last_block", 6, 1e-4);
    ck_assert_int_eq(tu_count_op(g, "LayerNormNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "NHWCToNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "LayerNormalization"), 0);
    ck_assert_int_eq(tu_count_op(g, "Transpose"), 1);
    graph_free(g);
}
END_TEST

/* Squeeze-and-excite on 13 channels (MobileNet-v3's form: Relu, then a
 * HardSigmoid gate), three blocks: after the layout pass, the pool, two 1x1
 * convolutions and Mul of the first become one SqueezeExciteNCHWc (a 3x3
 * convolution reads it); the second's gate goes onto the weights of the 1x1
 * convolution that reads it, 16 padded output channels for 42 pixels
 * (SqueezeExciteWeightsNCHWc); the third, whose pooled value is also a
 * graph output, is left alone. */
static Node *squeeze_excite(Graph *g, Node *x, const char *prefix, Node **pooled)
{
    char n1[32], n2[32], n3[32];
    snprintf(n1, sizeof n1, "%s_w1", prefix);
    snprintf(n2, sizeof n2, "%s_w2", prefix);
    snprintf(n3, sizeof n3, "%s_b2", prefix);
    Node *gap = tu_op3(g, "GlobalAveragePool", x, NULL, NULL);
    Node *h = tu_op3(g, "Relu", tu_conv(g, gap, tu_weights_f32(g, n1, 4, 3, 13, 1, 1, 0.3f), NULL, 0, 1, 1),
                     NULL, NULL);
    Node *s = tu_op3(g, "HardSigmoid",
                     tu_conv(g, h, tu_weights_f32(g, n2, 4, 13, 3, 1, 1, 0.5f),
                             tu_weights_f32(g, n3, 1, 13, 0, 0, 0, 0.5f), 0, 1, 1),
                     NULL, NULL);
    if (pooled)
        *pooled = gap;
    return tu_op3(g, "Mul", x, s, NULL);
}

static Graph *build_squeeze_excite(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 5, 7, 6);
    Node *a = tu_op3(g, "Relu", tu_conv(g, x, tu_weights_f32(g, "wa", 4, 13, 5, 3, 3, 0.2f),
                                        tu_weights_f32(g, "ba", 1, 13, 0, 0, 0, 0.1f), 1, 1, 1),
                     NULL, NULL);
    Node *pooled;
    Node *b = tu_conv(g, squeeze_excite(g, a, "se1", NULL),
                      tu_weights_f32(g, "wb", 4, 13, 13, 3, 3, 0.1f), NULL, 1, 1, 1);
    Node *c = tu_conv(g, squeeze_excite(g, b, "se2", NULL),
                      tu_weights_f32(g, "wc", 4, 13, 13, 1, 1, 0.2f),
                      tu_weights_f32(g, "bc", 1, 13, 0, 0, 0, 0.1f), 0, 1, 1);
    Node *d = tu_conv(g, squeeze_excite(g, c, "se3", &pooled),
                      tu_weights_f32(g, "wd", 4, 6, 13, 1, 1, 0.2f), NULL, 0, 1, 1);
    Node *results[2] = {d, pooled};
    tu_finish(g, results, 2);
    return g;
}

START_TEST(test_squeeze_excite)
{
    Graph *g = build_squeeze_excite(), *ref = build_squeeze_excite();
    tu_run_pass(g, pass_epilogue_fusion, 1e-5, 1e-6);
    tu_run_pass(g, pass_elementwise_fusion, 1e-5, 1e-6);
    tu_run_pass(g, pass_nchwc_layout, 1e-5, 1e-5);
    ck_assert_int_eq(tu_run_pass(g, pass_squeeze_excite, 1e-5, 1e-5), 2);
    ck_assert_int_eq(tu_count_op(g, "SqueezeExciteNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "SqueezeExciteWeightsNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "GlobalAveragePoolNCHWc"), 1);
    ck_assert_int_eq(tu_count_op(g, "ConvNCHWc"), 6);
    tu_assert_golden(g, "nchwc", "squeeze_excite");
    tu_assert_compiled_matches(g, ref, "squeeze_excite", 1e-4, 1e-5);
    graph_free(g);
    graph_free(ref);
}
END_TEST

static Graph *build_winograd(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 64, 14, 13);
    Node *a = tu_op3(g, "Relu",
                     tu_conv(g, x, tu_weights_f32(g, "wa", 4, 64, 64, 3, 3, 0.004f),
                             tu_weights_f32(g, "ba", 1, 64, 0, 0, 0, 0.1f), 1, 1, 1),
                     NULL, NULL);
    Node *b = tu_conv(g, a, tu_weights_f32(g, "wb", 4, 64, 64, 3, 3, 0.004f), NULL, 1, 1, 1);
    Node *sum = tu_op3(g, "Relu", tu_op3(g, "Add", b, x, NULL), NULL, NULL);
    Node *strided = tu_conv(g, sum, tu_weights_f32(g, "wc", 4, 64, 64, 3, 3, 0.004f), NULL, 1, 2, 1);
    Node *thin = tu_conv(g, strided, tu_weights_f32(g, "wd", 4, 8, 64, 3, 3, 0.004f), NULL, 1, 1,
                         1);
    tu_finish(g, &thin, 1);
    return g;
}

/* The bounds of the winograd pass: 16 channels on the narrower side and a
 * 7x7 output run by Winograd; 8 channels, or a 4x4 output, stay direct. */
static Graph *build_winograd_bounds(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 4, 1, 128, 14, 14);
    Node *narrow = tu_conv(g, x, tu_weights_f32(g, "wa", 4, 16, 128, 3, 3, 0.004f),
                           tu_weights_f32(g, "ba", 1, 16, 0, 0, 0, 0.1f), 1, 1, 1);
    Node *thin = tu_conv(g, narrow, tu_weights_f32(g, "wb", 4, 8, 16, 3, 3, 0.02f), NULL, 1, 1, 1);
    Node *wide = tu_conv(g, thin, tu_weights_f32(g, "wc", 4, 128, 8, 1, 1, 0.02f), NULL, 0, 2, 1);
    Node *seven = tu_conv(g, wide, tu_weights_f32(g, "wd", 4, 16, 128, 3, 3, 0.004f), NULL, 1, 1,
                          1);
    Node *small = tu_conv(g, seven, tu_weights_f32(g, "we", 4, 32, 16, 1, 1, 0.02f), NULL, 0, 2, 1);
    Node *four = tu_conv(g, small, tu_weights_f32(g, "wf", 4, 32, 32, 3, 3, 0.004f), NULL, 1, 1,
                         1);
    tu_finish(g, &four, 1);
    return g;
}

START_TEST(test_winograd_bounds)
{
    Graph *g = build_winograd_bounds(), *ref = build_winograd_bounds();
    ck_assert_int_eq(tu_run_pass(g, pass_nchwc_layout, 1e-5, 1e-5), 6);
    ck_assert_int_eq(tu_run_pass(g, pass_winograd, 1e-4, 1e-5), 2);
    ck_assert_int_eq(tu_count_op(g, "ConvNCHWcWinograd"), 2);
    ck_assert_int_eq(tu_count_op(g, "ConvNCHWc"), 4);
    tu_assert_compiled_matches(g, ref, "winograd_bounds", 1e-3, 1e-4);
    graph_free(g);
    graph_free(ref);
}
END_TEST

START_TEST(test_winograd)
{
    Graph *g = build_winograd(), *ref = build_winograd();
    tu_run_pass(g, pass_epilogue_fusion, 1e-5, 1e-6);
    ck_assert_int_eq(tu_run_pass(g, pass_nchwc_layout, 1e-5, 1e-5), 4);
    /* F(4x4, 3x3)'s float error is about 1e-5 of the outputs' magnitude
     * (3e-7 here): ten times the direct path's tolerances. */
    ck_assert_int_eq(tu_run_pass(g, pass_winograd, 1e-4, 1e-5), 2);
    ck_assert_int_eq(tu_count_op(g, "ConvNCHWcWinograd"), 2);
    ck_assert_int_eq(tu_count_op(g, "ConvNCHWc"), 2);
    tu_assert_golden(g, "nchwc", "winograd");
    tu_assert_compiled_matches(g, ref, "winograd", 1e-3, 1e-4);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* -O2 runs the winograd pass for the host and leaves it out for firmware. */
START_TEST(test_winograd_host_only)
{
    for (int portable = 0; portable <= 1; portable++) {
        Graph *g = build_winograd();
        Diag d;
        diag_init(&d);
        PassOptions o = {.portable = portable};
        ck_assert_int_eq(opt_run_level(g, 2, &o, &d), FX_OK);
        ck_assert_int_eq(tu_count_op(g, "ConvNCHWcWinograd"), portable ? 0 : 2);
        ck_assert_int_eq(tu_count_op(g, "ConvNCHWc"), portable ? 4 : 2);
        diag_free(&d);
        graph_free(g);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_nchwc");
    TCase *t = tcase_create("nchwc");
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_chain);
    tcase_add_test(t, test_residual);
    tcase_add_test(t, test_residual_over_output);
    tcase_add_test(t, test_odd_channels);
    tcase_add_test(t, test_pools);
    tcase_add_test(t, test_concat_scale);
    tcase_add_test(t, test_bn_relu);
    tcase_add_test(t, test_left_alone);
    tcase_add_test(t, test_channels_last_block);
    tcase_add_test(t, test_squeeze_excite);
    tcase_add_test(t, test_winograd);
    tcase_add_test(t, test_winograd_bounds);
    tcase_add_test(t, test_winograd_host_only);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
