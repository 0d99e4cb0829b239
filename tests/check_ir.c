/*
 * check_ir.c - unit tests of the graph IR: names, users, editing, lint (each
 * invariant it claims to check is broken once and must be caught), and the
 * printers on the seed model against reviewed golden files.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

#ifndef FXCC_SOURCE_DIR
#error "FXCC_SOURCE_DIR must point at the repository"
#endif

static const OpDef *op(const char *name)
{
    const OpDef *o = op_lookup(name);
    ck_assert_msg(o != NULL, "op %s is not in the table", name);
    return o;
}

static Tensor *scalar_f32(float v)
{
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 0};
    Tensor *x = tensor_new(&t, NULL);
    ck_assert_ptr_nonnull(x);
    *(float *)x->data = v;
    return x;
}

/* x -> relu -> add(relu, c) -> output, all float32[2, 3]. */
typedef struct Small {
    Graph *g;
    Node *x, *c, *relu, *add, *out;
} Small;

static Small small_graph(void)
{
    Small s;
    s.g = graph_new();
    ck_assert_ptr_nonnull(s.g);
    s.x = graph_create_node(s.g, NULL, FX_OPCODE_PLACEHOLDER, "x", "x", NULL, 0);
    ck_assert(node_set_num_outputs(s.x, 1));
    s.x->out_types[0] = (TensorType){.dtype = FXRT_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}};
    s.c = graph_create_constant(s.g, NULL, "c", scalar_f32(1.5f));
    s.relu = graph_create_op(s.g, NULL, op("Relu"), "relu", &s.x, 1);
    Node *args[2] = {s.relu, s.c};
    s.add = graph_create_op(s.g, NULL, op("Add"), "add", args, 2);
    s.out = graph_create_node(s.g, NULL, FX_OPCODE_OUTPUT, "output", "output", &s.add, 1);
    return s;
}

static bool diag_mentions(const Diag *d, const char *text)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->entries[i].message && strstr(d->entries[i].message, text))
            return true;
    return false;
}

/* Runs lint on g and asserts that it fails with a message containing text. */
static void assert_lint_catches(Graph *g, bool require_shapes, const char *text)
{
    Diag d;
    diag_init(&d);
    FxStatus st = graph_lint(g, require_shapes, &d);
    ck_assert_msg(st != FX_OK, "lint accepted a graph that should fail with '%s'", text);
    ck_assert_msg(diag_mentions(&d, text), "lint failed, but not with '%s' (first: %s)", text,
                  d.count ? d.entries[0].message : "none");
    diag_free(&d);
}

START_TEST(test_names_sanitized_and_unique)
{
    Graph *g = graph_new();
    ck_assert_str_eq(graph_unique_name(g, "conv1"), "conv1");
    ck_assert_str_eq(graph_unique_name(g, "conv1"), "conv1_1");
    ck_assert_str_eq(graph_unique_name(g, "conv1"), "conv1_2");
    ck_assert_str_eq(graph_unique_name(g, "/layer1/Conv_output_0"), "layer1_Conv_output_0");
    ck_assert_str_eq(graph_unique_name(g, "1x"), "v1x");
    ck_assert_str_eq(graph_unique_name(g, "int"), "int_");
    ck_assert_str_eq(graph_unique_name(g, "fc.weight"), "fc_weight");
    ck_assert_str_eq(graph_unique_name(g, ""), "v");
    ck_assert_str_eq(graph_unique_name(g, "..."), "v_1");
    graph_free(g);
}
END_TEST

START_TEST(test_names_stable_after_erase)
{
    Small s = small_graph();
    /* Erasing a node does not give its name back: names stay stable for the
     * lifetime of the graph, as a later node named the same would otherwise
     * silently take over references in printed output. */
    Node *dead = graph_create_op(s.g, s.out, op("Neg"), "relu", &s.x, 1);
    ck_assert_str_eq(dead->name, "relu_1");
    ck_assert(graph_erase_node(s.g, dead));
    Node *again = graph_create_op(s.g, s.out, op("Neg"), "relu", &s.x, 1);
    ck_assert_str_eq(again->name, "relu_2");
    graph_free(s.g);
}
END_TEST

START_TEST(test_users_are_a_set)
{
    Small s = small_graph();
    Node *args[2] = {s.x, s.x};
    Node *sq = graph_create_op(s.g, s.out, op("Mul"), "sq", args, 2);
    ck_assert_int_eq(s.x->num_users, 2); /* relu and sq, sq once */
    ck_assert_ptr_eq(s.x->users[0], s.relu);
    ck_assert_ptr_eq(s.x->users[1], sq);
    ck_assert(node_set_arg(sq, 0, s.relu));
    ck_assert_int_eq(s.x->num_users, 2); /* still read by sq's second slot */
    ck_assert(node_set_arg(sq, 1, s.relu));
    ck_assert_int_eq(s.x->num_users, 1);
    ck_assert_int_eq(s.relu->num_users, 2);
    graph_free(s.g);
}
END_TEST

START_TEST(test_erase_refused_with_users)
{
    Small s = small_graph();
    ck_assert(!graph_erase_node(s.g, s.relu));
    ck_assert_int_eq(s.g->num_nodes, 5);
    graph_free(s.g);
}
END_TEST

START_TEST(test_replace_all_uses_skips_replacement)
{
    Small s = small_graph();
    /* neg reads relu and replaces it: FX would rewire neg to itself. */
    Node *neg = graph_create_op(s.g, s.add, op("Neg"), "neg", &s.relu, 1);
    int n = node_replace_all_uses_with(s.relu, neg);
    ck_assert_int_eq(n, 1); /* only add's use */
    ck_assert_ptr_eq(s.add->args[0], neg);
    ck_assert_ptr_eq(neg->args[0], s.relu);
    ck_assert_int_eq(s.relu->num_users, 1);
    Diag d;
    diag_init(&d);
    ck_assert_int_eq(graph_lint(s.g, false, &d), FX_OK);
    diag_free(&d);
    graph_free(s.g);
}
END_TEST

START_TEST(test_lint_accepts_valid)
{
    Small s = small_graph();
    Diag d;
    diag_init(&d);
    ck_assert_int_eq(graph_lint(s.g, false, &d), FX_OK);
    ck_assert_int_eq(graph_propagate_shapes(s.g, NULL, 0, &d), FX_OK);
    ck_assert_int_eq(graph_lint(s.g, true, &d), FX_OK);
    ck_assert_uint_eq(d.count, 0);
    diag_free(&d);
    graph_free(s.g);
}
END_TEST

START_TEST(test_lint_use_before_def)
{
    Small s = small_graph();
    graph_move_before(s.g, s.add, s.relu);
    assert_lint_catches(s.g, false, "used before it is defined");
    graph_free(s.g);
}
END_TEST

START_TEST(test_lint_users_asymmetric)
{
    Small s = small_graph();
    s.relu->num_users = 0; /* add still reads relu */
    assert_lint_catches(s.g, false, "does not list this node as a user");
    s.relu->num_users = 1;
    Node *stray = s.x->users[0];
    s.x->users[0] = s.add; /* add does not read x */
    assert_lint_catches(s.g, false, "does not read this node");
    s.x->users[0] = stray;
    graph_free(s.g);
}
END_TEST

START_TEST(test_lint_duplicate_names)
{
    Small s = small_graph();
    s.add->name = s.relu->name;
    assert_lint_catches(s.g, false, "is used by two nodes");
    graph_free(s.g);
}
END_TEST

START_TEST(test_lint_invalid_name)
{
    Small s = small_graph();
    s.add->name = "a-b";
    assert_lint_catches(s.g, false, "is not a C identifier");
    graph_free(s.g);
}
END_TEST

START_TEST(test_lint_missing_shapes)
{
    Small s = small_graph();
    assert_lint_catches(s.g, true, "has no shape");
    graph_free(s.g);
}
END_TEST

START_TEST(test_lint_output_rules)
{
    Small s = small_graph();
    graph_move_before(s.g, s.out, s.add);
    assert_lint_catches(s.g, false, "output node is not the last node");
    graph_move_before(s.g, s.out, NULL);
    s.out->opcode = FX_OPCODE_CALL_FUNCTION;
    s.out->op = op("Identity");
    assert_lint_catches(s.g, false, "expected exactly 1");
    s.out->opcode = FX_OPCODE_OUTPUT;
    s.out->op = NULL;
    graph_free(s.g);
}
END_TEST

START_TEST(test_lint_placeholder_order)
{
    Small s = small_graph();
    Node *late = graph_create_node(s.g, s.out, FX_OPCODE_PLACEHOLDER, "y", "y", NULL, 0);
    ck_assert_ptr_nonnull(late);
    assert_lint_catches(s.g, false, "placeholder after a non-placeholder");
    graph_free(s.g);
}
END_TEST

START_TEST(test_lint_call_method_only_for_views)
{
    Small s = small_graph();
    s.relu->opcode = FX_OPCODE_CALL_METHOD;
    assert_lint_catches(s.g, false, "which is not a view op");
    s.relu->opcode = FX_OPCODE_CALL_FUNCTION;
    s.relu->target = "Sigmoid";
    assert_lint_catches(s.g, false, "does not match its op");
    graph_free(s.g);
}
END_TEST

START_TEST(test_lint_unknown_target)
{
    Small s = small_graph();
    s.relu->op = NULL;
    assert_lint_catches(s.g, false, "is not a known op");
    graph_free(s.g);
}
END_TEST

START_TEST(test_shape_binding_parse)
{
    ShapeBinding b;
    Diag d;
    diag_init(&d);
    ck_assert_int_eq(shape_binding_parse("input=1x3x224x224", &b, &d), FX_OK);
    ck_assert_int_eq(b.type.rank, 4);
    ck_assert_int_eq(b.type.dims[1], 3);
    ck_assert_int_eq(b.type.dims[3], 224);
    ck_assert_int_ne(shape_binding_parse("input=1xax3", &b, &d), FX_OK);
    ck_assert_int_ne(shape_binding_parse("=3", &b, &d), FX_OK);
    ck_assert_int_ne(shape_binding_parse("noequals", &b, &d), FX_OK);
    ck_assert_int_ne(shape_binding_parse("x=1x1x1x1x1x1x1x1x1", &b, &d), FX_OK);
    diag_free(&d);
}
END_TEST

/* x: float32[N, 3] with N symbolic -> Relu -> output */
static Graph *symbolic_graph(void)
{
    Graph *g = graph_new();
    Node *x = graph_create_node(g, NULL, FX_OPCODE_PLACEHOLDER, "x", "x", NULL, 0);
    ck_assert(node_set_num_outputs(x, 1));
    x->out_types[0] = (TensorType){.dtype = FXRT_DTYPE_FLOAT32, .rank = 2, .dims = {-1, 3}};
    x->dim_params[0] = "N";
    Node *r = graph_create_op(g, NULL, op("Relu"), "relu", &x, 1);
    graph_create_node(g, NULL, FX_OPCODE_OUTPUT, "output", "output", &r, 1);
    return g;
}

START_TEST(test_symbolic_dim_bound_by_shape)
{
    Graph *g = symbolic_graph();
    Diag d;
    diag_init(&d);
    ShapeBinding b;
    ck_assert_int_eq(shape_binding_parse("x=8x3", &b, &d), FX_OK);
    ck_assert_int_eq(graph_propagate_shapes(g, &b, 1, &d), FX_OK);
    const Node *relu = graph_find(g, "relu");
    ck_assert_int_eq(relu->out_types[0].dims[0], 8);
    ck_assert_int_eq(relu->out_types[0].dims[1], 3);
    diag_free(&d);
    graph_free(g);
}
END_TEST

START_TEST(test_symbolic_dim_unbound_or_contradicted)
{
    Graph *g = symbolic_graph();
    Diag d;
    diag_init(&d);
    ck_assert_int_eq(graph_propagate_shapes(g, NULL, 0, &d), FX_ERR_SHAPE);
    ck_assert(diag_mentions(&d, "symbolic dimension 0 ('N')"));
    graph_free(g);
    g = symbolic_graph();
    ShapeBinding b;
    ck_assert_int_eq(shape_binding_parse("x=8x4", &b, &d), FX_OK);
    ck_assert_int_eq(graph_propagate_shapes(g, &b, 1, &d), FX_ERR_SHAPE);
    ck_assert(diag_mentions(&d, "the model fixes it to 3"));
    diag_free(&d);
    graph_free(g);
}
END_TEST

/* --- the seed model: printers and numbers ------------------------------- */

static Graph *load_seed(void)
{
    Diag d;
    diag_init(&d);
    Graph *g = NULL;
    OnnxLoadOptions lo = {0};
    FxStatus st = onnx_load(FXCC_SOURCE_DIR "/examples/seed.onnx", &lo, &g, &d);
    if (st == FX_OK)
        st = graph_propagate_shapes(g, NULL, 0, &d);
    if (st != FX_OK)
        diag_print(&d, stderr);
    ck_assert_int_eq(st, FX_OK);
    ck_assert_int_eq(graph_lint(g, true, &d), FX_OK);
    diag_free(&d);
    return g;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

typedef void (*Printer)(const Graph *, FILE *);

static void assert_golden(Printer print, const char *golden_name)
{
    Graph *g = load_seed();
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    print(g, mem);
    fclose(mem);
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/%s", FXCC_SOURCE_DIR, golden_name);
    if (getenv("FXCC_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "wb");
        fwrite(text, 1, len, f);
        fclose(f);
    }
    char *want = slurp(path);
    ck_assert_msg(strcmp(text, want) == 0, "%s differs from the golden file:\n%s", golden_name,
                  text);
    free(want);
    free(text);
    graph_free(g);
}

START_TEST(test_seed_text_golden) { assert_golden(graph_print, "seed.txt"); }
END_TEST
START_TEST(test_seed_tabular_golden) { assert_golden(graph_print_tabular, "seed_tabular.txt"); }
END_TEST
START_TEST(test_seed_dot_golden) { assert_golden(graph_print_dot, "seed.dot"); }
END_TEST

START_TEST(test_seed_opcodes)
{
    Graph *g = load_seed();
    bool seen[FX_OPCODE_SENTINEL] = {false};
    graph_for_each(g, n) seen[n->opcode] = true;
    ck_assert(seen[FX_OPCODE_PLACEHOLDER]);
    ck_assert(seen[FX_OPCODE_GET_ATTR]);
    ck_assert(seen[FX_OPCODE_CALL_FUNCTION]);
    ck_assert(seen[FX_OPCODE_OUTPUT]);
    graph_free(g);
}
END_TEST

START_TEST(test_seed_matches_onnxruntime)
{
    Graph *g = load_seed();
    Diag d;
    diag_init(&d);
    Tensor *x = NULL, *want = NULL, *got = NULL;
    ck_assert_int_eq(tensor_file_read(FXCC_SOURCE_DIR "/examples/seed_input.npy", &x, &d), FX_OK);
    ck_assert_int_eq(tensor_file_read(FXCC_SOURCE_DIR "/examples/seed_expected.npy", &want, &d),
                     FX_OK);
    const Tensor *in[1] = {x};
    ck_assert_int_eq(interp_run(g, in, 1, &got, 1, NULL, NULL, &d), FX_OK);
    CompareResult c = tensor_compare(got, want, 1e-5, 1e-6);
    ck_assert_msg(c.ok, "seed output differs from ONNX Runtime: max abs %g", c.max_abs);
    tensor_free(x);
    tensor_free(want);
    tensor_free(got);
    diag_free(&d);
    graph_free(g);
}
END_TEST

START_TEST(test_interp_rejects_wrong_input_shape)
{
    Graph *g = load_seed();
    Diag d;
    diag_init(&d);
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 2, .dims = {4, 3}};
    Tensor *x = tensor_new(&t, &d), *got = NULL;
    const Tensor *in[1] = {x};
    ck_assert_int_eq(interp_run(g, in, 1, &got, 1, NULL, NULL, &d), FX_ERR_SHAPE);
    ck_assert(diag_mentions(&d, "expects float32[3, 4], got float32[4, 3]"));
    ck_assert_ptr_null(got);
    tensor_free(x);
    diag_free(&d);
    graph_free(g);
}
END_TEST

/* The tolerance for comparing two float orders grows with the reference's
 * magnitude (never below atol) and ignores non-finite elements. */
START_TEST(test_scaled_atol)
{
    Diag d;
    diag_init(&d);
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1, .dims = {4}};
    Tensor *x = tensor_new(&t, &d);
    ck_assert_ptr_nonnull(x);
    float *v = x->data;
    v[0] = 0.5f, v[1] = -20.0f, v[2] = INFINITY, v[3] = 3.0f;
    ck_assert_double_eq_tol(tensor_scaled_atol(x, 1e-5), 20e-5, 1e-12);
    v[1] = 0.25f, v[3] = -0.75f;
    ck_assert_double_eq_tol(tensor_scaled_atol(x, 1e-5), 1e-5, 1e-12);
    tensor_free(x);
    diag_free(&d);
}
END_TEST

static Suite *ir_suite(void)
{
    Suite *s = suite_create("ir");
    TCase *names = tcase_create("names");
    tcase_add_test(names, test_names_sanitized_and_unique);
    tcase_add_test(names, test_names_stable_after_erase);
    suite_add_tcase(s, names);
    TCase *edit = tcase_create("edit");
    tcase_add_test(edit, test_users_are_a_set);
    tcase_add_test(edit, test_erase_refused_with_users);
    tcase_add_test(edit, test_replace_all_uses_skips_replacement);
    tcase_add_test(edit, test_scaled_atol);
    suite_add_tcase(s, edit);
    TCase *lint = tcase_create("lint");
    tcase_add_test(lint, test_lint_accepts_valid);
    tcase_add_test(lint, test_lint_use_before_def);
    tcase_add_test(lint, test_lint_users_asymmetric);
    tcase_add_test(lint, test_lint_duplicate_names);
    tcase_add_test(lint, test_lint_invalid_name);
    tcase_add_test(lint, test_lint_missing_shapes);
    tcase_add_test(lint, test_lint_output_rules);
    tcase_add_test(lint, test_lint_placeholder_order);
    tcase_add_test(lint, test_lint_call_method_only_for_views);
    tcase_add_test(lint, test_lint_unknown_target);
    suite_add_tcase(s, lint);
    TCase *shape = tcase_create("shape");
    tcase_add_test(shape, test_shape_binding_parse);
    tcase_add_test(shape, test_symbolic_dim_bound_by_shape);
    tcase_add_test(shape, test_symbolic_dim_unbound_or_contradicted);
    suite_add_tcase(s, shape);
    TCase *seed = tcase_create("seed");
    tcase_add_test(seed, test_seed_text_golden);
    tcase_add_test(seed, test_seed_tabular_golden);
    tcase_add_test(seed, test_seed_dot_golden);
    tcase_add_test(seed, test_seed_opcodes);
    tcase_add_test(seed, test_seed_matches_onnxruntime);
    tcase_add_test(seed, test_interp_rejects_wrong_input_shape);
    suite_add_tcase(s, seed);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ir_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
