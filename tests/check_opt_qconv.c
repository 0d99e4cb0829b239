/*
 * check_opt_qconv.c - the qconv-pack pass: which quantized convolutions it
 * moves onto the packed 8-bit convolution (QConvPacked) and which it leaves
 * to the reference loops, and that the result is the same bytes: the
 * interpreter's outputs before and after the pass, and the compiled code
 * for both targets against the interpreter on the unpacked graph, must be
 * equal (rtol and atol 0).  The packed graphs of a small network and of
 * the clamps folded into the kernel are golden files
 * (tests/golden/opt/qconv).  The qconv-nhwc pass after it: which packed
 * convolutions and QLinearAdds pass NHWC activations on, where the region
 * ends (a graph output, a depthwise layer feeding one), and the same bytes
 * compiled for both targets.
 */
#include "opt_check_util.h"

/* A constant of type dtype and the given dims, element i = value(i);
 * float32 values are value(i) x 1e-4. */
static Node *const_of(Graph *g, const char *name, DType dtype, int rank, const int64_t *dims,
                      int64_t (*value)(int64_t))
{
    TensorType t = {.dtype = dtype, .rank = rank};
    for (int d = 0; d < rank; d++)
        t.dims[d] = dims[d];
    Tensor *v = tensor_new(&t, &tu_diag);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < tensor_numel(v); i++) {
        if (dtype == FXRT_DTYPE_FLOAT32)
            ((float *)v->data)[i] = (float)value(i) * 1e-4f;
        else
            fxrt_store_i64(dtype, v->data, (size_t)i, value(i));
    }
    return tu_constant(g, name, v);
}

static int64_t weight_value(int64_t i) { return (i * 37 + 11) % 256 - 128; } /* -128..127 */
static int64_t weight_u8(int64_t i) { return (i * 37 + 11) % 256; }
static int64_t bias_value(int64_t i) { return (i * 7919) % 4001 - 2000; }
static int64_t zero(int64_t i) { return 0 * i; }
static int64_t one(int64_t i) { return 1 + 0 * i; }
static int64_t zp_u8(int64_t i) { return 131 + 0 * i; }
static int64_t zp_i8(int64_t i) { return -3 + 0 * i; }
/* Scales 1e-4 x value: x_scale 0.02, w_scale 0.003-0.006, y_scale 0.05. */
static int64_t x_scale(int64_t i) { return 200 + 0 * i; }
static int64_t w_scale(int64_t i) { return 30 + i % 31; }
static int64_t y_scale(int64_t i) { return 500 + 0 * i; }
static int64_t big_scale(int64_t i) { return 30000 + 0 * i; } /* 0.02 x 3 / 0.05 >= 1 */

/* One quantized convolution's options. */
typedef struct QConv {
    int64_t out_channels, kernel, pad, stride, group;
    DType y_type;
    int per_channel, bias;
    DType w_type;
    int64_t (*w_zp)(int64_t);
    int64_t (*w_scale)(int64_t);
    int w_is_input; /* W a graph input, not a constant */
} QConv;


/* A node of op_name with c's geometry, inferred once it is set. */
static Node *conv_node(Graph *g, const char *op_name, Node *const *args, int num_args, int spatial,
                       const QConv *c)
{
    Node *n = graph_create_op(g, NULL, op_lookup(op_name), op_name, args, num_args);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(op_apply_attr_specs(n->op, n, &tu_diag), FX_OK);
    ck_assert(node_set_num_outputs(n, 1));
    int64_t pads[4] = {c->pad, c->pad, c->pad, c->pad}, strides[2] = {c->stride, c->stride};
    ck_assert_ptr_nonnull(node_set_attr_ints(n, "pads", pads, 2 * spatial));
    ck_assert_ptr_nonnull(node_set_attr_ints(n, "strides", strides, spatial));
    ck_assert_ptr_nonnull(node_set_attr_int(n, "group", c->group));
    tu_reinfer(n);
    return n;
}

/* W [out_channels, C / group, kernel...] for x of rank 3 or 4. */
static Node *weights(Graph *g, const char *name, const Node *x, const QConv *c)
{
    const TensorType *xt = &x->out_types[0];
    int64_t dims[4] = {c->out_channels, xt->dims[1] / c->group, c->kernel, c->kernel};
    return const_of(g, name, c->w_type, xt->rank, dims,
                    c->w_type == FXRT_DTYPE_INT8 ? weight_value : weight_u8);
}

/* QLinearConv of x by w (NULL: a constant made here) with c's options. */
static Node *qlinear_conv_of(Graph *g, const char *name, Node *x, Node *w, const QConv *c)
{
    char buf[64];
    DType x_type = x->out_types[0].dtype;
    const int64_t cols[1] = {c->out_channels};
    int rank = c->per_channel ? 1 : 0;
#define NAMED(suffix) (snprintf(buf, sizeof buf, "%s_" suffix, name), buf)
    Node *args[9];
    args[0] = x;
    args[1] = const_of(g, NAMED("x_scale"), FXRT_DTYPE_FLOAT32, 0, NULL, x_scale);
    args[2] = const_of(g, NAMED("x_zp"), x_type, 0, NULL,
                       x_type == FXRT_DTYPE_UINT8 ? zp_u8 : zp_i8);
    args[3] = w ? w : weights(g, NAMED("w"), x, c);
    args[4] = const_of(g, NAMED("w_scale"), FXRT_DTYPE_FLOAT32, rank, cols, c->w_scale);
    args[5] = const_of(g, NAMED("w_zp"), c->w_type, rank, cols, c->w_zp);
    args[6] = const_of(g, NAMED("y_scale"), FXRT_DTYPE_FLOAT32, 0, NULL, y_scale);
    args[7] = const_of(g, NAMED("y_zp"), c->y_type, 0, NULL,
                       c->y_type == FXRT_DTYPE_UINT8 ? zp_u8 : zp_i8);
    args[8] = c->bias ? const_of(g, NAMED("b"), FXRT_DTYPE_INT32, 1, cols, bias_value) : NULL;
#undef NAMED
    return conv_node(g, "QLinearConv", args, c->bias ? 9 : 8, x->out_types[0].rank - 2, c);
}

static Node *qlinear_conv(Graph *g, const char *name, Node *x, const QConv *c)
{
    return qlinear_conv_of(g, name, x, NULL, c);
}

static Node *conv_integer(Graph *g, const char *name, Node *x, const QConv *c)
{
    char buf[64];
    DType x_type = x->out_types[0].dtype;
    Node *args[4];
    args[0] = x;
    snprintf(buf, sizeof buf, "%s_w", name);
    args[1] = weights(g, buf, x, c);
    snprintf(buf, sizeof buf, "%s_x_zp", name);
    args[2] = const_of(g, buf, x_type, 0, NULL,
                       x_type == FXRT_DTYPE_UINT8 ? zp_u8 : zp_i8);
    snprintf(buf, sizeof buf, "%s_w_zp", name);
    args[3] = const_of(g, buf, c->w_type, 0, NULL, c->w_zp);
    return conv_node(g, "ConvInteger", args, 4, x->out_types[0].rank - 2, c);
}

/* A small network: 3x3 (RGB, bias, per-channel scales) -> depthwise 3x3
 * stride 2 -> 1x1 to int8 (per-tensor) -> depthwise 5x5 -> 1x1 stride 2;
 * and ConvInteger 3x3 and depthwise on the input. */
static Graph *build_network(DType x_type)
{
    Graph *g = graph_new();
    const int64_t dims[4] = {1, 3, 13, 11};
    Node *x = tu_input(g, "x", x_type, 4, dims);
    QConv stem = {8, 3, 1, 1, 1, FXRT_DTYPE_UINT8, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *y = qlinear_conv(g, "stem", x, &stem);
    QConv dw = {8, 3, 1, 2, 8, FXRT_DTYPE_UINT8, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    y = qlinear_conv(g, "dw", y, &dw);
    QConv pw = {19, 1, 0, 1, 1, FXRT_DTYPE_INT8, 0, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    y = qlinear_conv(g, "pw", y, &pw);
    QConv dw5 = {19, 5, 2, 1, 19, FXRT_DTYPE_INT8, 0, 0, FXRT_DTYPE_INT8, zero, w_scale, 0};
    y = qlinear_conv(g, "dw5", y, &dw5);
    QConv down = {6, 1, 0, 2, 1, FXRT_DTYPE_UINT8, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    y = qlinear_conv(g, "down", y, &down);
    QConv acc = {5, 3, 1, 1, 1, FXRT_DTYPE_INT32, 0, 0, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *z = conv_integer(g, "acc", x, &acc);
    QConv acc_dw = {3, 3, 0, 2, 3, FXRT_DTYPE_INT32, 0, 0, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *u = conv_integer(g, "acc_dw", x, &acc_dw);
    Node *results[3] = {y, z, u};
    tu_finish(g, results, 3);
    return g;
}

START_TEST(test_network_uint8)
{
    Graph *g = build_network(FXRT_DTYPE_UINT8), *ref = build_network(FXRT_DTYPE_UINT8);
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_pack, 0.0, 0.0), 7);
    ck_assert_int_eq(tu_count_op(g, "QConvPacked"), 7);
    ck_assert_int_eq(tu_count_op(g, "QLinearConv") + tu_count_op(g, "ConvInteger"), 0);
    tu_assert_golden(g, "qconv", "network");
    tu_assert_compiled_matches(g, ref, "qconv_network", 0.0, 0.0);
    graph_free(g);
    graph_free(ref);
}
END_TEST

START_TEST(test_network_int8)
{
    Graph *g = build_network(FXRT_DTYPE_INT8), *ref = build_network(FXRT_DTYPE_INT8);
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_pack, 0.0, 0.0), 7);
    tu_assert_compiled_matches(g, ref, "qconv_network_i8", 0.0, 0.0);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* 1-D convolutions (rank-3 X), group 1 and depthwise, strided. */
static Graph *build_1d(void)
{
    Graph *g = graph_new();
    const int64_t dims[3] = {2, 4, 23};
    Node *x = tu_input(g, "x", FXRT_DTYPE_UINT8, 3, dims);
    QConv c1 = {7, 5, 2, 2, 1, FXRT_DTYPE_UINT8, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *y = qlinear_conv(g, "c1", x, &c1);
    QConv c2 = {7, 3, 1, 1, 7, FXRT_DTYPE_INT8, 0, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    y = qlinear_conv(g, "c2", y, &c2);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_1d)
{
    Graph *g = build_1d(), *ref = build_1d();
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_pack, 0.0, 0.0), 2);
    tu_assert_compiled_matches(g, ref, "qconv_1d", 0.0, 0.0);
    graph_free(g);
    graph_free(ref);
}
END_TEST

static int64_t clip_lo_i8(int64_t i) { return -100 + 0 * i; }
static int64_t clip_hi_i8(int64_t i) { return 40 + 0 * i; }
static int64_t clip_lo_u8(int64_t i) { return 120 + 0 * i; }
static int64_t clip_hi_u8(int64_t i) { return 140 + 0 * i; }

/* Integer clamps after the convolutions: int8 -> Relu -> Clip(-100, 40)
 * folds twice; uint8 -> Clip(120, 140) once; a Relu on an int8 output
 * that is also a graph output stays. */
static Graph *build_clamps(void)
{
    Graph *g = graph_new();
    const int64_t dims[4] = {1, 5, 8, 9};
    Node *x = tu_input(g, "x", FXRT_DTYPE_UINT8, 4, dims);
    QConv to_i8 = {12, 3, 1, 1, 1, FXRT_DTYPE_INT8, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *y = qlinear_conv(g, "a", x, &to_i8);
    y = tu_op3(g, "Relu", y, NULL, NULL);
    y = tu_op3(g, "Clip", y, const_of(g, "lo", FXRT_DTYPE_INT8, 0, NULL, clip_lo_i8),
               const_of(g, "hi", FXRT_DTYPE_INT8, 0, NULL, clip_hi_i8));
    QConv dw = {5, 3, 1, 2, 5, FXRT_DTYPE_UINT8, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *z = qlinear_conv(g, "b", x, &dw);
    z = tu_op3(g, "Clip", z, const_of(g, "lo_u8", FXRT_DTYPE_UINT8, 0, NULL, clip_lo_u8),
               const_of(g, "hi_u8", FXRT_DTYPE_UINT8, 0, NULL, clip_hi_u8));
    Node *kept = qlinear_conv(g, "c", x, &to_i8);
    Node *relu = tu_op3(g, "Relu", kept, NULL, NULL);
    Node *results[4] = {y, z, kept, relu};
    tu_finish(g, results, 4);
    return g;
}

START_TEST(test_clamps)
{
    Graph *g = build_clamps(), *ref = build_clamps();
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_pack, 0.0, 0.0), 3 + 3);
    ck_assert_int_eq(tu_count_op(g, "Clip"), 0);
    ck_assert_int_eq(tu_count_op(g, "Relu"), 1);
    tu_assert_golden(g, "qconv", "clamps");
    tu_assert_compiled_matches(g, ref, "qconv_clamps", 0.0, 0.0);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* One QLinearConv of c on x [1, 4, 9, 9] uint8. */
static Graph *build_one(const QConv *c)
{
    Graph *g = graph_new();
    const int64_t dims[4] = {1, 4, 9, 9};
    Node *x = tu_input(g, "x", FXRT_DTYPE_UINT8, 4, dims);
    Node *w = NULL;
    if (c->w_is_input) {
        const int64_t w_dims[4] = {c->out_channels, 4 / c->group, c->kernel, c->kernel};
        w = tu_input(g, "w", c->w_type, 4, w_dims);
    }
    Node *y = qlinear_conv_of(g, "conv", x, w, c);
    tu_finish(g, &y, 1);
    return g;
}

static void assert_left_alone(const QConv *c)
{
    Graph *g = build_one(c);
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_pack, 0.0, 0.0), 0);
    ck_assert_int_eq(tu_count_op(g, "QLinearConv"), 1);
    graph_free(g);
}

/* What the kernel cannot take stays as it is. */
START_TEST(test_left_alone)
{
    QConv base = {8, 3, 1, 1, 1, FXRT_DTYPE_UINT8, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Graph *g = build_one(&base);
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_pack, 0.0, 0.0), 1);
    graph_free(g);
    QConv c = base;
    c.w_type = FXRT_DTYPE_UINT8; /* uint8 weights */
    assert_left_alone(&c);
    c = base;
    c.w_zp = one; /* asymmetric weights */
    assert_left_alone(&c);
    c = base;
    c.w_is_input = 1;
    assert_left_alone(&c);
    c = base;
    c.w_scale = big_scale; /* no fixed-point pair */
    assert_left_alone(&c);
    c = base;
    c.group = 2; /* grouped */
    assert_left_alone(&c);
    c = base;
    c.group = 4; /* depthwise with channel multiplier 2 */
    assert_left_alone(&c);
}
END_TEST

/* --- qconv-nhwc ------------------------------------------------------------ */

static Node *qlinear_add(Graph *g, Node *a, Node *b, DType t)
{
    int64_t (*zp)(int64_t) = t == FXRT_DTYPE_UINT8 ? zp_u8 : zp_i8;
    Node *args[8] = {a, const_of(g, "add_a_scale", FXRT_DTYPE_FLOAT32, 0, NULL, y_scale),
                     const_of(g, "add_a_zp", t, 0, NULL, zp),
                     b, const_of(g, "add_b_scale", FXRT_DTYPE_FLOAT32, 0, NULL, y_scale),
                     const_of(g, "add_b_zp", t, 0, NULL, zp),
                     const_of(g, "add_y_scale", FXRT_DTYPE_FLOAT32, 0, NULL, big_scale),
                     const_of(g, "add_y_zp", t, 0, NULL, zp)};
    return tu_op(g, "QLinearAdd", args, 8);
}

/* stem 3x3 -> dw 3x3 -> pw 1x1 -> output A, dw -> down 1x1 stride 2 ->
 * output B: the region is stem's output to pw's and down's inputs.  With
 * `collapse`, a depthwise 5x5 on stem feeds output C: it keeps NCHW, so
 * stem must write NCHW, and so must dw (a depthwise layer keeps its
 * layout): nothing is left in NHWC. */
static Graph *build_nhwc_network(DType t, int collapse)
{
    Graph *g = graph_new();
    const int64_t dims[4] = {1, 3, 13, 11};
    Node *x = tu_input(g, "x", t, 4, dims);
    QConv stem = {8, 3, 1, 1, 1, t, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *s = qlinear_conv(g, "stem", x, &stem);
    QConv dw = {8, 3, 1, 1, 8, t, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *y = qlinear_conv(g, "dw", s, &dw);
    QConv pw = {8, 1, 0, 1, 1, t, 0, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *a = qlinear_conv(g, "pw", y, &pw);
    QConv down = {6, 1, 0, 2, 1, t, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *b = qlinear_conv(g, "down", y, &down);
    QConv dw5 = {8, 5, 2, 1, 8, t, 0, 0, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *results[3] = {a, b, collapse ? qlinear_conv(g, "dw5", s, &dw5) : NULL};
    tu_finish(g, results, collapse ? 3 : 2);
    return g;
}

/* Attribute attr of the k-th QConvPacked in execution order (the order the
 * builders create the convolutions in). */
static int64_t attr_of(const Graph *g, int k, const char *attr)
{
    graph_for_each(g, n) if (node_is_op(n, &fx_op_QConvPacked) && k-- == 0) return node_attr_int(
        n, attr, -1);
    ck_abort_msg("fewer QConvPacked nodes than expected");
    return -1;
}

static void check_nhwc_network(DType t, int collapse)
{
    Graph *g = build_nhwc_network(t, collapse), *ref = build_nhwc_network(t, collapse);
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_pack, 0.0, 0.0), collapse ? 5 : 4);
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_nhwc, 0.0, 0.0), collapse ? 0 : 4);
    int in_region = !collapse;
    ck_assert_int_eq(attr_of(g, 0, "x_nhwc"), 0);
    ck_assert_int_eq(attr_of(g, 0, "y_nhwc"), in_region);
    ck_assert_int_eq(attr_of(g, 1, "x_nhwc"), in_region);
    ck_assert_int_eq(attr_of(g, 1, "y_nhwc"), in_region);
    for (int k = 2; k < 4; k++) { /* pw and down: NHWC in, NCHW out (graph outputs) */
        ck_assert_int_eq(attr_of(g, k, "x_nhwc"), in_region);
        ck_assert_int_eq(attr_of(g, k, "y_nhwc"), 0);
    }
    tu_assert_compiled_matches(g, ref, collapse ? "qconv_nhwc_collapse" : "qconv_nhwc", 0.0,
                               0.0);
    graph_free(g);
    graph_free(ref);
}

/* The same without the NCHW branch: everything but the edges NHWC. */
static Graph *build_nhwc_chain(DType t)
{
    Graph *g = graph_new();
    const int64_t dims[4] = {1, 5, 12, 9};
    Node *x = tu_input(g, "x", t, 4, dims);
    QConv stem = {16, 3, 1, 1, 1, t, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *s = qlinear_conv(g, "stem", x, &stem);
    QConv dw = {16, 3, 1, 2, 16, t, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *y = qlinear_conv(g, "dw", s, &dw);
    QConv pw = {16, 1, 0, 1, 1, t, 0, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *p = qlinear_conv(g, "pw", y, &pw);
    y = qlinear_add(g, y, p, t);
    QConv down = {7, 3, 1, 1, 1, t, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    y = qlinear_conv(g, "down", y, &down);
    tu_finish(g, &y, 1);
    return g;
}

static void check_nhwc_chain(DType t)
{
    Graph *g = build_nhwc_chain(t), *ref = build_nhwc_chain(t);
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_pack, 0.0, 0.0), 4);
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_nhwc, 0.0, 0.0), 4);
    ck_assert_int_eq(attr_of(g, 0, "x_nhwc"), 0);
    ck_assert_int_eq(attr_of(g, 0, "y_nhwc"), 1);
    ck_assert_int_eq(attr_of(g, 1, "x_nhwc"), 1);
    ck_assert_int_eq(attr_of(g, 1, "y_nhwc"), 1);
    ck_assert_int_eq(attr_of(g, 2, "y_nhwc"), 1);
    ck_assert_int_eq(attr_of(g, 3, "x_nhwc"), 1);
    ck_assert_int_eq(attr_of(g, 3, "y_nhwc"), 0); /* the graph's output */
    tu_assert_compiled_matches(g, ref, t == FXRT_DTYPE_UINT8 ? "qconv_chain" : "qconv_chain_i8",
                               0.0, 0.0);
    graph_free(g);
    graph_free(ref);
}

enum { POOL_GLOBAL, POOL_WHOLE_WINDOW, POOL_SMALL_WINDOW };

/* stem 3x3 -> pw 1x1 -> a pool of `kind`: QLinearGlobalAveragePool,
 * QLinearAveragePool over the whole 12x9 image, or over 3x3 windows. */
static Graph *build_nhwc_pool(DType t, int kind)
{
    Graph *g = graph_new();
    const int64_t dims[4] = {1, 5, 12, 9};
    Node *x = tu_input(g, "x", t, 4, dims);
    QConv stem = {16, 3, 1, 1, 1, t, 1, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *s = qlinear_conv(g, "stem", x, &stem);
    QConv pw = {24, 1, 0, 1, 1, t, 0, 1, FXRT_DTYPE_INT8, zero, w_scale, 0};
    Node *y = qlinear_conv(g, "pw", s, &pw);
    int64_t (*zp)(int64_t) = t == FXRT_DTYPE_UINT8 ? zp_u8 : zp_i8;
    Node *args[5] = {y, const_of(g, "pool_x_scale", FXRT_DTYPE_FLOAT32, 0, NULL, y_scale),
                     const_of(g, "pool_x_zp", t, 0, NULL, zp),
                     const_of(g, "pool_y_scale", FXRT_DTYPE_FLOAT32, 0, NULL, x_scale),
                     const_of(g, "pool_y_zp", t, 0, NULL, zp)};
    const char *op = kind == POOL_GLOBAL ? "QLinearGlobalAveragePool" : "QLinearAveragePool";
    Node *n = graph_create_op(g, NULL, op_lookup(op), op, args, 5);
    ck_assert_ptr_nonnull(n);
    if (kind != POOL_GLOBAL) {
        const int64_t whole[2] = {12, 9}, small[2] = {3, 3};
        ck_assert_ptr_nonnull(
            node_set_attr_ints(n, "kernel_shape", kind == POOL_WHOLE_WINDOW ? whole : small, 2));
    }
    ck_assert_int_eq(op_apply_attr_specs(n->op, n, &tu_diag), FX_OK);
    ck_assert(node_set_num_outputs(n, 1));
    tu_reinfer(n);
    tu_finish(g, &n, 1);
    return g;
}

/* The pools over the whole image read the pw layer's NHWC output
 * (x_nhwc), the same bytes; a pool of smaller windows reads NCHW. */
static void check_nhwc_pool(DType t, int kind)
{
    Graph *g = build_nhwc_pool(t, kind), *ref = build_nhwc_pool(t, kind);
    int whole = kind != POOL_SMALL_WINDOW;
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_pack, 0.0, 0.0), 2);
    ck_assert_int_eq(tu_run_pass(g, pass_qconv_nhwc, 0.0, 0.0), (whole ? 3 : 2));
    ck_assert_int_eq(attr_of(g, 0, "y_nhwc"), 1);
    ck_assert_int_eq(attr_of(g, 1, "x_nhwc"), 1);
    ck_assert_int_eq(attr_of(g, 1, "y_nhwc"), whole);
    graph_for_each(g, n) if (node_is_op(n, &fx_op_QLinearGlobalAveragePool) ||
                             node_is_op(n, &fx_op_QLinearAveragePool))
    {
        ck_assert_int_eq(node_attr_int(n, "x_nhwc", 0), whole);
        ck_assert_int_eq(n->out_types[0].dims[1], 24); /* [N, C, ...] either way */
    }
    char name[64];
    snprintf(name, sizeof name, "qconv_nhwc_pool_%d_%s", kind,
             t == FXRT_DTYPE_UINT8 ? "u8" : "i8");
    tu_assert_compiled_matches(g, ref, name, 0.0, 0.0);
    graph_free(g);
    graph_free(ref);
}

START_TEST(test_nhwc_pools)
{
    for (int kind = POOL_GLOBAL; kind <= POOL_SMALL_WINDOW; kind++) {
        check_nhwc_pool(FXRT_DTYPE_UINT8, kind);
        check_nhwc_pool(FXRT_DTYPE_INT8, kind);
    }
}
END_TEST

START_TEST(test_nhwc_network)
{
    check_nhwc_network(FXRT_DTYPE_UINT8, 0);
    check_nhwc_network(FXRT_DTYPE_INT8, 0);
    check_nhwc_network(FXRT_DTYPE_UINT8, 1);
}
END_TEST

START_TEST(test_nhwc_chain)
{
    check_nhwc_chain(FXRT_DTYPE_UINT8);
    check_nhwc_chain(FXRT_DTYPE_INT8);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_qconv");
    TCase *t = tcase_create("qconv_pack");
    tcase_set_timeout(t, 600);
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_add_test(t, test_network_uint8);
    tcase_add_test(t, test_network_int8);
    tcase_add_test(t, test_1d);
    tcase_add_test(t, test_clamps);
    tcase_add_test(t, test_left_alone);
    tcase_add_test(t, test_nhwc_network);
    tcase_add_test(t, test_nhwc_chain);
    tcase_add_test(t, test_nhwc_pools);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
