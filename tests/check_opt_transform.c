/*
 * check_opt_transform.c - the Transformer (opt/transformer.c) and the
 * decomposition rules (opt/decompose.c).
 *
 * Transformer: with no hooks the copy prints as the source does (the seed
 * model and an inline graph with a multi-output op and a module body);
 * FX's example hook that swaps Sigmoid for Neg, checked against -x computed
 * here; a hook making two nodes for one; a multi-output hook read through
 * getitem; failing hooks (NULL with a message, nothing leaked under ASan).
 * Decomposition: every rule on an inline graph, default and non-default
 * attributes, the interpreter before and after allclose at 1e-5 on random
 * inputs, the decomposed graph against a reviewed golden file under
 * tests/golden/opt/transform/; `only`, custom rules and their rollback.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "opt_check_util.h"

static void lint(const Graph *g)
{
    FxStatus st = graph_lint(g, true, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
}

/* Runs g on `in` (one input) and returns its single output. */
static Tensor *run1(const Graph *g, Tensor *in)
{
    Tensor *out = NULL;
    FxStatus st = interp_run(g, (const Tensor *const *)&in, 1, &out, 1, NULL, NULL, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
    return out;
}

static Tensor *random_input(const Graph *g)
{
    uint64_t seed = 0x5eedu;
    Tensor *t = tensor_new_random(&graph_placeholder(g, 0)->out_types[0], &seed, &tu_diag);
    ck_assert_ptr_nonnull(t);
    return t;
}

/* The interpreter on a and b (one input each, the same random data): every
 * output allclose. */
static void assert_same_numbers(const Graph *a, const Graph *b, int num_outputs)
{
    Tensor *in = random_input(a);
    Tensor *oa[4] = {0}, *ob[4] = {0};
    ck_assert_int_le(num_outputs, 4);
    ck_assert_int_eq(interp_run(a, (const Tensor *const *)&in, 1, oa, num_outputs, NULL, NULL,
                                &tu_diag), FX_OK);
    ck_assert_int_eq(interp_run(b, (const Tensor *const *)&in, 1, ob, num_outputs, NULL, NULL,
                                &tu_diag), FX_OK);
    for (int k = 0; k < num_outputs; k++) {
        CompareResult c = tensor_compare(ob[k], oa[k], 1e-5, 1e-5);
        ck_assert_msg(c.ok, "output %d differs: max abs %g", k, c.max_abs);
        tensor_free(oa[k]);
        tensor_free(ob[k]);
    }
    tensor_free(in);
}

static Graph *transform(Transformer *t, const Graph *src)
{
    Graph *out = transformer_run(t, src, &tu_diag);
    if (!out)
        diag_print(&tu_diag, stderr);
    ck_assert_ptr_nonnull(out);
    lint(out);
    return out;
}

/* --- no hooks: a faithful copy ------------------------------------------------ */

/* The copy prints as the source, shares no node with it, leaves it as it
 * was and computes the same. */
static void assert_faithful_copy(Graph *src, int num_outputs)
{
    char *before = tu_print(src);
    Transformer t = {0};
    Graph *out = transform(&t, src);
    ck_assert_ptr_eq(t.dst, out);
    char *copy = tu_print(out), *after = tu_print(src);
    ck_assert_str_eq(copy, before);
    ck_assert_str_eq(after, before);
    ck_assert_int_eq(out->num_nodes, src->num_nodes);
    for (const Node *n = out->root.next; n != &out->root; n = n->next)
        ck_assert_ptr_eq(n->graph, out);
    assert_same_numbers(src, out, num_outputs);
    free(before);
    free(copy);
    free(after);
    graph_free(out);
}

START_TEST(test_copy_seed)
{
    Graph *g = tu_load_model("examples/seed.onnx");
    assert_faithful_copy(g, 1);
    graph_free(g);
}
END_TEST

/* Split into two getitems, a view, a constant and a fused module with its
 * own body: every kind of node the walk copies. */
static Graph *mixed_graph(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 4, 6, 0, 0);
    int64_t wd[1] = {6};
    Node *w = tu_weights(g, "w", 1, wd, 0.25f);
    Node *split = tu_op3(g, "Split", x, NULL, NULL);
    ck_assert(node_set_num_outputs(split, 2));
    tu_reinfer(split);
    Node *part[2];
    for (int k = 0; k < 2; k++) {
        ck_assert_ptr_nonnull(part[k] = graph_create_op(g, NULL, &fx_op_getitem, "getitem",
                                                        &split, 1));
        ck_assert(node_set_num_outputs(part[k], 1));
        part[k]->index = k;
        tu_reinfer(part[k]);
    }
    Node *sum = tu_op3(g, "Add", part[0], part[1], NULL);
    Node *scaled =
        tu_op3(g, "Mul", tu_op3(g, "Tanh", tu_op3(g, "Add", sum, w, NULL), NULL, NULL), w, NULL);
    Node *flat = tu_op3(g, "Flatten", scaled, NULL, NULL);
    Node *results[2] = {flat, part[1]};
    tu_finish(g, results, 2);
    PassResult r = {0};
    ck_assert_int_eq(pass_elementwise_fusion(g, &r, &tu_diag), FX_OK);
    ck_assert_int_eq(r.changes, 1);
    ck_assert_int_eq(graph_propagate_shapes(g, NULL, 0, &tu_diag), FX_OK);
    lint(g);
    return g;
}

START_TEST(test_copy_inline)
{
    Graph *g = mixed_graph();
    ck_assert_int_eq(tu_count_op(g, "FusedElementwise"), 1);
    ck_assert_int_eq(tu_count_op(g, "getitem"), 2);
    ck_assert_int_eq(tu_count_op(g, "Flatten"), 1);
    assert_faithful_copy(g, 2);
    graph_free(g);
}
END_TEST

/* --- hooks that rewrite -------------------------------------------------------- */

/* FX's example: every Sigmoid becomes a Neg; everything else is copied. */
static Node *sigmoid_to_neg(Transformer *t, const Node *src, Node *const *args, int num_args)
{
    if (src->op == &fx_op_Sigmoid)
        return ip_create_op(&t->ip, &fx_op_Neg, src->name, args, num_args, t->diag);
    return transformer_copy(t, src, args, num_args);
}

START_TEST(test_sigmoid_to_neg)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 3, 5, 0, 0);
    Node *y = tu_op3(g, "Sigmoid", x, NULL, NULL);
    tu_finish(g, &y, 1);

    Transformer t = {.call_function = sigmoid_to_neg};
    Graph *out = transform(&t, g);
    ck_assert_int_eq(tu_count_op(out, "Sigmoid"), 0);
    ck_assert_int_eq(tu_count_op(out, "Neg"), 1);
    ck_assert_int_eq(tu_count_op(g, "Sigmoid"), 1);
    tu_assert_golden(out, "transform", "sigmoid_to_neg");

    Tensor *in = random_input(g);
    Tensor *got = run1(out, in), *sig = run1(g, in);
    Tensor *want = tensor_clone(in, &tu_diag);
    ck_assert_ptr_nonnull(want);
    for (int64_t i = 0; i < tensor_numel(want); i++)
        ((float *)want->data)[i] = -((float *)in->data)[i];
    CompareResult c = tensor_compare(got, want, 1e-6, 1e-6);
    ck_assert_msg(c.ok, "not -x: max abs %g", c.max_abs);
    ck_assert_msg(!tensor_compare(got, sig, 1e-3, 1e-3).ok, "still computes sigmoid");
    tensor_free(in);
    tensor_free(got);
    tensor_free(sig);
    tensor_free(want);
    graph_free(out);
    graph_free(g);
}
END_TEST

/* One node becomes two: a + b as a - (-b). */
static Node *add_as_sub(Transformer *t, const Node *src, Node *const *args, int num_args)
{
    if (src->op != &fx_op_Add)
        return transformer_copy(t, src, args, num_args);
    Node *neg = ip_create_op(&t->ip, &fx_op_Neg, "neg", &args[1], 1, t->diag);
    if (!neg)
        return NULL;
    Node *sub_args[2] = {args[0], neg};
    return ip_create_op(&t->ip, &fx_op_Sub, src->name, sub_args, 2, t->diag);
}

START_TEST(test_one_node_to_two)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 2, 4, 0, 0);
    int64_t wd[2] = {2, 4};
    Node *w = tu_weights(g, "w", 2, wd, 0.5f);
    Node *y = tu_op3(g, "Relu", tu_op3(g, "Add", x, w, NULL), NULL, NULL);
    tu_finish(g, &y, 1);

    Transformer t = {.call_function = add_as_sub};
    Graph *out = transform(&t, g);
    ck_assert_int_eq(tu_count_op(out, "Add"), 0);
    ck_assert_int_eq(tu_count_op(out, "Sub"), 1);
    ck_assert_int_eq(tu_count_op(out, "Neg"), 1);
    tu_assert_golden(out, "transform", "add_as_sub");
    assert_same_numbers(g, out, 1);
    graph_free(out);
    graph_free(g);
}
END_TEST

/* A multi-output node replaced by another with as many outputs: the
 * copied getitem nodes read the replacement.  Split(x) becomes Split(-x). */
static Node *split_negated(Transformer *t, const Node *src, Node *const *args, int num_args)
{
    if (src->op != &fx_op_Split)
        return transformer_copy(t, src, args, num_args);
    Node *neg = ip_create_op(&t->ip, &fx_op_Neg, "neg", args, 1, t->diag);
    if (!neg)
        return NULL;
    Node *split = ip_create_op(&t->ip, &fx_op_Split, src->name, &neg, 1, t->diag);
    if (!split)
        return NULL;
    if (!node_set_num_outputs(split, src->num_outputs)) {
        diag_node_error(t->diag, FX_ERR_NOMEM, split, "out of memory");
        return NULL;
    }
    return node_infer_shapes(split, t->diag) == FX_OK ? split : NULL;
}

static Graph *split_graph(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 1, 6, 0, 0, 0);
    Node *split = tu_op3(g, "Split", x, NULL, NULL);
    ck_assert(node_set_num_outputs(split, 2));
    tu_reinfer(split);
    Node *part[2];
    for (int k = 0; k < 2; k++) {
        ck_assert_ptr_nonnull(part[k] = graph_create_op(g, NULL, &fx_op_getitem, "getitem",
                                                        &split, 1));
        ck_assert(node_set_num_outputs(part[k], 1));
        part[k]->index = k;
        tu_reinfer(part[k]);
    }
    Node *y = tu_op3(g, "Sub", part[0], part[1], NULL);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_multi_output_hook)
{
    Graph *g = split_graph();
    Transformer t = {.call_function = split_negated};
    Graph *out = transform(&t, g);
    tu_assert_golden(out, "transform", "split_negated");
    Tensor *in = random_input(g);
    Tensor *got = run1(out, in), *orig = run1(g, in);
    /* (-a) - (-b) = -(a - b) */
    for (int64_t i = 0; i < tensor_numel(orig); i++)
        ((float *)orig->data)[i] = -((float *)orig->data)[i];
    CompareResult c = tensor_compare(got, orig, 1e-6, 1e-6);
    ck_assert_msg(c.ok, "max abs %g", c.max_abs);
    tensor_free(in);
    tensor_free(got);
    tensor_free(orig);
    graph_free(out);
    graph_free(g);
}
END_TEST

/* --- hooks that fail ------------------------------------------------------------ */

/* Makes a node for Relu's input first, so that the partial graph has
 * something to free, then refuses. */
static Node *refuse_relu(Transformer *t, const Node *src, Node *const *args, int num_args)
{
    if (src->op != &fx_op_Relu)
        return transformer_copy(t, src, args, num_args);
    if (!ip_create_op(&t->ip, &fx_op_Neg, "neg", args, 1, t->diag))
        return NULL;
    diag_node_error(t->diag, FX_ERR_UNSUPPORTED, src, "no Relu wanted here");
    return NULL;
}

static Node *silent_null(Transformer *t, const Node *src, Node *const *args, int num_args)
{
    (void)t;
    (void)src;
    (void)args;
    (void)num_args;
    return NULL;
}

/* Returns the source node itself: a node of another graph. */
static Node *source_node(Transformer *t, const Node *src, Node *const *args, int num_args)
{
    (void)t;
    (void)args;
    (void)num_args;
    return (Node *)src;
}

/* A node made without inferring its types. */
static Node *untyped(Transformer *t, const Node *src, Node *const *args, int num_args)
{
    if (src->op != &fx_op_Relu)
        return transformer_copy(t, src, args, num_args);
    return graph_create_op(t->dst, NULL, &fx_op_Neg, "neg", args, num_args);
}

/* Split replaced by a single-output node: its getitems could not read it. */
static Node *split_to_neg(Transformer *t, const Node *src, Node *const *args, int num_args)
{
    if (src->op != &fx_op_Split)
        return transformer_copy(t, src, args, num_args);
    return ip_create_op(&t->ip, &fx_op_Neg, "neg", args, num_args, t->diag);
}

static Graph *relu_graph(void)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 2, 3, 0, 0);
    Node *y = tu_op3(g, "Sigmoid", tu_op3(g, "Relu", tu_op3(g, "Tanh", x, NULL, NULL), NULL, NULL),
                     NULL, NULL);
    tu_finish(g, &y, 1);
    return g;
}

/* The run fails with status `want` and a message containing `text`. */
static void assert_fails(const Graph *g, Transformer *t, FxStatus want, const char *text)
{
    char *before = tu_print(g);
    diag_clear(&tu_diag);
    ck_assert_ptr_null(transformer_run(t, g, &tu_diag));
    ck_assert_ptr_null(t->dst);
    ck_assert_uint_ge(tu_diag.count, 1);
    ck_assert_int_eq(tu_diag.entries[0].status, want);
    ck_assert_msg(strstr(tu_diag.entries[0].message, text) != NULL, "message '%s' lacks '%s'",
                  tu_diag.entries[0].message, text);
    char *after = tu_print(g);
    ck_assert_str_eq(after, before);
    free(before);
    free(after);
}

START_TEST(test_failing_hooks)
{
    Graph *g = relu_graph();
    Transformer refuse = {.call_function = refuse_relu};
    assert_fails(g, &refuse, FX_ERR_UNSUPPORTED, "no Relu wanted here");
    ck_assert_str_eq(tu_diag.entries[0].node, "Relu (Relu)");

    Transformer silent = {.call_function = silent_null};
    assert_fails(g, &silent, FX_ERR_INVALID, "call_function hook returned no node");

    Transformer foreign = {.placeholder = source_node};
    assert_fails(g, &foreign, FX_ERR_INVALID, "node of another graph");

    Transformer raw = {.call_function = untyped};
    assert_fails(g, &raw, FX_ERR_INVALID, "returned 'neg' without shapes");
    graph_free(g);

    g = split_graph();
    Transformer single = {.call_function = split_to_neg};
    assert_fails(g, &single, FX_ERR_INVALID, "has 2 outputs read through getitem");
    graph_free(g);
}
END_TEST

/* transformer_copy refuses an argument list of the wrong length. */
static Node *copy_too_few(Transformer *t, const Node *src, Node *const *args, int num_args)
{
    return transformer_copy(t, src, args, num_args - 1);
}

START_TEST(test_copy_wrong_arity)
{
    Graph *g = relu_graph();
    Transformer t = {.call_function = copy_too_few};
    assert_fails(g, &t, FX_ERR_INVALID, "0 arguments given, the node has 1");
    graph_free(g);
}
END_TEST

/* --- decomposition rules -------------------------------------------------------- */

static FxStatus decompose_pass(Graph *g, PassResult *r, Diag *d)
{
    return graph_decompose(g, NULL, NULL, 0, &r->changes, d);
}

/* A constant the decomposition must have made, with its value: the printed
 * graph does not show values, so non-default attributes are checked here. */
typedef struct Expect {
    const char *name;
    double value;
} Expect;

/* Decomposes the one decomposable node of g: the interpreter agrees at
 * 1e-5, no node of that op is left, the constants in `expect` (terminated
 * by {NULL}; may be NULL) hold their values, the graph is golden. */
static void check_rule(Graph *g, const char *golden, const Expect *expect)
{
    const Node *out = graph_output_node(g);
    ck_assert_ptr_nonnull(out);
    const char *op_name = out->args[0]->op->name;
    ck_assert_int_eq(tu_count_op(g, op_name), 1);
    ck_assert_int_eq(tu_run_pass(g, decompose_pass, 1e-5, 1e-5), 1);
    ck_assert_int_eq(tu_count_op(g, op_name), 0);
    for (const Expect *e = expect; e && e->name; e++) {
        const Node *c = graph_find(g, e->name);
        ck_assert_msg(c && c->opcode == FX_OPCODE_GET_ATTR, "no constant %s", e->name);
        ck_assert_int_eq(tensor_numel(c->value), 1);
        ck_assert_double_eq_tol(tensor_get_float(c->value, 0), e->value, 1e-7);
    }
    tu_assert_golden(g, "transform", golden);
    graph_free(g);
}

/* x (float32[2, 3, 4]) times 4, so that activations see [-4, 4): both
 * clipping ends of the hard ones, the exponential tails of the others. */
static Node *wide_input(Graph *g)
{
    Node *x = tu_input_f32(g, "x", 3, 2, 3, 4, 0);
    return tu_op3(g, "Mul", x, tu_scalar(g, "four", 4.0f), NULL);
}

/* One unary op on the wide input; attributes set before its types. */
static Graph *unary_graph(const char *op_name, const char *attr, float value, const char *attr2,
                          float value2)
{
    Graph *g = graph_new();
    Node *y = tu_op3(g, op_name, wide_input(g), NULL, NULL);
    if (attr)
        ck_assert_ptr_nonnull(node_set_attr_float(y, attr, value));
    if (attr2)
        ck_assert_ptr_nonnull(node_set_attr_float(y, attr2, value2));
    tu_reinfer(y);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_rule_relu) { check_rule(unary_graph("Relu", NULL, 0, NULL, 0), "relu", NULL); }
END_TEST

START_TEST(test_rule_hard_sigmoid)
{
    static const Expect params[] = {{"HardSigmoid_alpha", 0.3f}, {"HardSigmoid_beta", 0.25f},
                                    {NULL, 0}};
    check_rule(unary_graph("HardSigmoid", NULL, 0, NULL, 0), "hard_sigmoid", NULL);
    check_rule(unary_graph("HardSigmoid", "alpha", 0.3f, "beta", 0.25f),
               "hard_sigmoid_alpha_beta", params);
}
END_TEST

START_TEST(test_rule_hard_swish)
{
    static const Expect params[] = {{"HardSwish_alpha", 1.0 / 6.0}, {"HardSwish_beta", 0.5},
                                    {NULL, 0}};
    check_rule(unary_graph("HardSwish", NULL, 0, NULL, 0), "hard_swish", params);
}
END_TEST

START_TEST(test_rule_sigmoid)
{
    check_rule(unary_graph("Sigmoid", NULL, 0, NULL, 0), "sigmoid", NULL);
}
END_TEST

START_TEST(test_rule_elu_selu)
{
    static const Expect elu[] = {{"Elu_alpha", 0.5}, {NULL, 0}};
    static const Expect selu[] = {{"Selu_alpha", 2.0}, {"Selu_gamma", 0.5}, {NULL, 0}};
    check_rule(unary_graph("Elu", NULL, 0, NULL, 0), "elu", NULL);
    check_rule(unary_graph("Elu", "alpha", 0.5f, NULL, 0), "elu_alpha", elu);
    check_rule(unary_graph("Selu", NULL, 0, NULL, 0), "selu", NULL);
    check_rule(unary_graph("Selu", "alpha", 2.0f, "gamma", 0.5f), "selu_alpha_gamma", selu);
}
END_TEST

/* Softmax or LogSoftmax along `axis` (INT64_MIN: the default), coerce_2d
 * marking the pre-13 meaning. */
static Graph *softmax_graph(const char *op_name, int64_t axis, bool coerce_2d)
{
    Graph *g = graph_new();
    Node *y = tu_op3(g, op_name, wide_input(g), NULL, NULL);
    if (axis != INT64_MIN)
        ck_assert_ptr_nonnull(node_set_attr_int(y, "axis", axis));
    if (coerce_2d)
        ck_assert_ptr_nonnull(node_set_attr_int(y, "coerce_2d", 1));
    tu_reinfer(y);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_rule_softmax)
{
    check_rule(softmax_graph("Softmax", INT64_MIN, false), "softmax", NULL);
    check_rule(softmax_graph("Softmax", 1, false), "softmax_axis1", NULL);
    check_rule(softmax_graph("Softmax", -3, false), "softmax_axis_minus3", NULL);
    check_rule(softmax_graph("Softmax", 1, true), "softmax_coerce_2d", NULL);
}
END_TEST

START_TEST(test_rule_log_softmax)
{
    check_rule(softmax_graph("LogSoftmax", INT64_MIN, false), "log_softmax", NULL);
    check_rule(softmax_graph("LogSoftmax", 0, false), "log_softmax_axis0", NULL);
}
END_TEST

/* LayerNormalization of float32[2, 3, 4] from `axis` (INT64_MIN: default),
 * with scale and (when with_bias) bias shaped like the normalized dims. */
static Graph *layer_norm_graph(int64_t axis, bool with_bias, float epsilon)
{
    Graph *g = graph_new();
    Node *x = wide_input(g);
    int first = axis == INT64_MIN ? 2 : (int)(axis < 0 ? axis + 3 : axis);
    int64_t dims[3] = {2, 3, 4};
    Node *scale = tu_weights(g, "scale", 3 - first, dims + first, 0.3f);
    Node *bias = with_bias ? tu_weights(g, "bias", 3 - first, dims + first, -0.2f) : NULL;
    /* Made by hand: tu_op would infer with the default axis first. */
    Node *args[3] = {x, scale, bias};
    Node *y = graph_create_op(g, NULL, &fx_op_LayerNormalization, "layer_norm", args,
                              with_bias ? 3 : 2);
    ck_assert_ptr_nonnull(y);
    if (axis != INT64_MIN)
        ck_assert_ptr_nonnull(node_set_attr_int(y, "axis", axis));
    ck_assert_ptr_nonnull(node_set_attr_float(y, "epsilon", epsilon));
    ck_assert_int_eq(op_apply_attr_specs(y->op, y, &tu_diag), FX_OK);
    ck_assert(node_set_num_outputs(y, 1));
    tu_reinfer(y);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_rule_layer_norm)
{
    static const Expect eps[] = {{"layer_norm_epsilon", 1e-2f}, {NULL, 0}};
    check_rule(layer_norm_graph(INT64_MIN, true, 1e-5f), "layer_norm", NULL);
    check_rule(layer_norm_graph(1, true, 1e-2f), "layer_norm_axis1", eps);
    check_rule(layer_norm_graph(-2, false, 1e-5f), "layer_norm_axis_minus2_no_bias", NULL);
}
END_TEST

/* Constants take the input's element type: Relu on int32 (x - 1, so that
 * both signs occur) and on float64. */
START_TEST(test_rule_other_dtypes)
{
    Graph *g = graph_new();
    int64_t dims[2] = {3, 4};
    Node *x = tu_input(g, "x", FXRT_DTYPE_INT32, 2, dims);
    TensorType st = {.dtype = FXRT_DTYPE_INT32, .rank = 0};
    Tensor *one = tensor_new(&st, &tu_diag);
    ck_assert_ptr_nonnull(one);
    *(int32_t *)one->data = 1;
    Node *y = tu_op3(g, "Relu", tu_op3(g, "Sub", x, tu_constant(g, "one", one), NULL), NULL, NULL);
    tu_finish(g, &y, 1);
    check_rule(g, "relu_int32", NULL);

    g = graph_new();
    x = tu_input(g, "x", FXRT_DTYPE_FLOAT64, 2, dims);
    y = tu_op3(g, "Relu", x, NULL, NULL);
    tu_finish(g, &y, 1);
    check_rule(g, "relu_float64", NULL);
}
END_TEST

/* A LayerNormalization whose Mean and InvStdDev are read (three outputs,
 * through getitem) is left alone: the rules give one value. */
START_TEST(test_multi_output_node_skipped)
{
    Graph *g = graph_new();
    Node *x = tu_input_f32(g, "x", 2, 3, 4, 0, 0);
    int64_t sd[1] = {4};
    Node *y = tu_op3(g, "LayerNormalization", x, tu_weights(g, "scale", 1, sd, 0.5f), NULL);
    ck_assert(node_set_num_outputs(y, 3));
    tu_reinfer(y);
    Node *part[3];
    for (int k = 0; k < 3; k++) {
        ck_assert_ptr_nonnull(part[k] = graph_create_op(g, NULL, &fx_op_getitem, "getitem",
                                                        &y, 1));
        ck_assert(node_set_num_outputs(part[k], 1));
        part[k]->index = k;
        tu_reinfer(part[k]);
    }
    tu_finish(g, part, 3);
    int count = -1;
    ck_assert_int_eq(graph_decompose(g, NULL, NULL, 0, &count, &tu_diag), FX_OK);
    ck_assert_int_eq(count, 0);
    ck_assert_int_eq(tu_count_op(g, "LayerNormalization"), 1);
    graph_free(g);
}
END_TEST

/* Every built-in rule is exercised above; a rule added without a test
 * fails here. */
START_TEST(test_rule_table)
{
    static const char *const tested[] = {"Relu", "HardSigmoid", "HardSwish", "Sigmoid",
                                          "Elu", "Selu", "Softmax", "LogSoftmax",
                                          "LayerNormalization"};
    int count = 0;
    for (const DecompositionRule *r = decomposition_rules(); r->op; r++, count++) {
        bool found = false;
        for (size_t i = 0; i < sizeof tested / sizeof *tested; i++)
            found |= strcmp(tested[i], r->op->name) == 0;
        ck_assert_msg(found, "rule for %s has no test", r->op->name);
        ck_assert_ptr_nonnull(r->build);
    }
    ck_assert_int_eq(count, (int)(sizeof tested / sizeof *tested));
}
END_TEST

/* --- graph_decompose: selection, custom rules, rollback ---------------------------- */

static Graph *relu_sigmoid_graph(void)
{
    Graph *g = graph_new();
    Node *relu = tu_op3(g, "Relu", tu_input_f32(g, "x", 2, 3, 4, 0, 0), NULL, NULL);
    Node *y = tu_op3(g, "Add", tu_op3(g, "Sigmoid", relu, NULL, NULL), relu, NULL);
    tu_finish(g, &y, 1);
    return g;
}

START_TEST(test_only)
{
    Graph *g = relu_sigmoid_graph(), *ref = relu_sigmoid_graph();
    const OpDef *only[1] = {&fx_op_Relu};
    int count = -1;
    ck_assert_int_eq(graph_decompose(g, NULL, only, 1, &count, &tu_diag), FX_OK);
    ck_assert_int_eq(count, 1);
    ck_assert_int_eq(tu_count_op(g, "Relu"), 0);
    ck_assert_int_eq(tu_count_op(g, "Sigmoid"), 1);
    ck_assert_int_eq(tu_count_op(g, "Greater"), 1);
    lint(g);
    tu_assert_golden(g, "transform", "only_relu");
    assert_same_numbers(ref, g, 1);

    /* An op outside the list, or with no rule: nothing to do. */
    const OpDef *none[1] = {&fx_op_Tanh};
    ck_assert_int_eq(graph_decompose(g, NULL, none, 1, &count, &tu_diag), FX_OK);
    ck_assert_int_eq(count, 0);
    ck_assert_int_eq(tu_count_op(g, "Sigmoid"), 1);

    ck_assert_int_eq(graph_decompose(g, NULL, NULL, 0, &count, &tu_diag), FX_OK);
    ck_assert_int_eq(count, 1);
    ck_assert_int_eq(tu_count_op(g, "Sigmoid"), 0);
    lint(g);
    assert_same_numbers(ref, g, 1);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* A custom rule: Sigmoid(x) as (tanh(x / 2) + 1) / 2. */
static Node *sigmoid_by_tanh(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    (void)n;
    TensorType st = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 0};
    Tensor *half = tensor_new(&st, d), *one = tensor_new(&st, d);
    if (!half || !one) {
        tensor_free(half);
        tensor_free(one);
        return NULL;
    }
    *(float *)half->data = 0.5f;
    *(float *)one->data = 1.0f;
    Node *h = graph_create_constant(ip->graph, NULL, "half", half, d);
    Node *o = graph_create_constant(ip->graph, NULL, "one", one, d);
    if (!h || !o)
        return NULL;
    Node *a[2] = {args[0], h};
    Node *scaled = ip_create_op(ip, &fx_op_Mul, "mul", a, 2, d);
    Node *t = scaled ? ip_create_op(ip, &fx_op_Tanh, "tanh", &scaled, 1, d) : NULL;
    if (!t)
        return NULL;
    Node *b[2] = {t, o};
    Node *c[2] = {ip_create_op(ip, &fx_op_Add, "add", b, 2, d), h};
    return c[0] ? ip_create_op(ip, &fx_op_Mul, "mul", c, 2, d) : NULL;
}

START_TEST(test_custom_rules)
{
    Graph *g = relu_sigmoid_graph(), *ref = relu_sigmoid_graph();
    const DecompositionRule rules[] = {{&fx_op_Sigmoid, sigmoid_by_tanh}, {NULL, NULL}};
    int count = -1;
    ck_assert_int_eq(graph_decompose(g, rules, NULL, 0, &count, &tu_diag), FX_OK);
    ck_assert_int_eq(count, 1);
    ck_assert_int_eq(tu_count_op(g, "Relu"), 1);
    ck_assert_int_eq(tu_count_op(g, "Tanh"), 1);
    lint(g);
    assert_same_numbers(ref, g, 1);
    graph_free(g);
    graph_free(ref);
}
END_TEST

/* Rules that make nodes and then fail, or give the wrong type: the graph
 * is left as it was, with the rule's message. */
static Node *fails_midway(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    if (!ip_create_op(ip, &fx_op_Neg, "neg", args, 1, d))
        return NULL;
    diag_node_error(d, FX_ERR_UNSUPPORTED, n, "cannot do this one");
    return NULL;
}

static Node *gives_bool(InsertPoint *ip, const Node *n, Node *const *args, Diag *d)
{
    (void)n;
    Node *a[2] = {args[0], args[0]};
    return ip_create_op(ip, &fx_op_Greater, "greater", a, 2, d);
}

static void assert_rule_refused(DecomposeFn build, FxStatus want, const char *text)
{
    Graph *g = relu_sigmoid_graph();
    char *before = tu_print(g);
    const DecompositionRule rules[] = {{&fx_op_Sigmoid, build}, {NULL, NULL}};
    int count = -1;
    diag_clear(&tu_diag);
    ck_assert_int_eq(graph_decompose(g, rules, NULL, 0, &count, &tu_diag), want);
    ck_assert_int_eq(count, 0);
    ck_assert_uint_ge(tu_diag.count, 1);
    ck_assert_msg(strstr(tu_diag.entries[0].message, text) != NULL, "message '%s' lacks '%s'",
                  tu_diag.entries[0].message, text);
    char *after = tu_print(g);
    ck_assert_str_eq(after, before);
    lint(g);
    free(before);
    free(after);
    graph_free(g);
}

START_TEST(test_rule_failure_rolls_back)
{
    assert_rule_refused(fails_midway, FX_ERR_UNSUPPORTED, "cannot do this one");
    assert_rule_refused(gives_bool, FX_ERR_SHAPE,
                        "decomposition gives bool[3, 4], the node float32[3, 4]");
}
END_TEST

/* The rules also serve a Transformer: decompose while copying. */
static Node *decompose_hook(Transformer *t, const Node *src, Node *const *args, int num_args)
{
    for (const DecompositionRule *r = decomposition_rules(); r->op; r++)
        if (r->op == src->op)
            return r->build(&t->ip, src, args, t->diag);
    return transformer_copy(t, src, args, num_args);
}

START_TEST(test_rules_in_transformer)
{
    Graph *g = layer_norm_graph(1, true, 1e-5f);
    Transformer t = {.call_function = decompose_hook};
    Graph *out = transform(&t, g);
    ck_assert_int_eq(tu_count_op(out, "LayerNormalization"), 0);
    ck_assert_int_eq(tu_count_op(out, "ReduceMean"), 2);
    ck_assert_int_eq(tu_count_op(g, "LayerNormalization"), 1);
    assert_same_numbers(g, out, 1);
    graph_free(out);
    graph_free(g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_transform");
    TCase *t = tcase_create("transformer");
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_add_test(t, test_copy_seed);
    tcase_add_test(t, test_copy_inline);
    tcase_add_test(t, test_sigmoid_to_neg);
    tcase_add_test(t, test_one_node_to_two);
    tcase_add_test(t, test_multi_output_hook);
    tcase_add_test(t, test_failing_hooks);
    tcase_add_test(t, test_copy_wrong_arity);
    suite_add_tcase(s, t);

    TCase *d = tcase_create("decompose");
    tcase_add_checked_fixture(d, tu_setup, tu_teardown);
    tcase_add_test(d, test_rule_relu);
    tcase_add_test(d, test_rule_hard_sigmoid);
    tcase_add_test(d, test_rule_hard_swish);
    tcase_add_test(d, test_rule_sigmoid);
    tcase_add_test(d, test_rule_elu_selu);
    tcase_add_test(d, test_rule_softmax);
    tcase_add_test(d, test_rule_log_softmax);
    tcase_add_test(d, test_rule_layer_norm);
    tcase_add_test(d, test_rule_other_dtypes);
    tcase_add_test(d, test_multi_output_node_skipped);
    tcase_add_test(d, test_rule_table);
    tcase_add_test(d, test_only);
    tcase_add_test(d, test_custom_rules);
    tcase_add_test(d, test_rule_failure_rolls_back);
    tcase_add_test(d, test_rules_in_transformer);
    suite_add_tcase(s, d);
    return s;
}

int main(void) { return tu_main(suite()); }
