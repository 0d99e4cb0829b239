/*
 * check_opt_leaf.c - leaf ops (ir/ops/leaf.c): ONNX ops fxcc does not
 * implement, run by the user's fxcc_leaf_OP functions.  The models come from
 * scripts/make_leaf_models.py (the .onnx files of tests/leaf/, with numpy's
 * inputs and expected outputs as .npy), the functions from
 * tests/leaf/leaf_ops.c, built
 * as the MODULE library FXCC_LEAF_LIB for the interpreter and copied with
 * --leaf-source into the compiled models.  Checked: the interpreter through
 * the library against numpy, the compiled code against the interpreter, the
 * imported graph and the header's prototypes against reviewed golden files
 * (tests/golden/opt/leaf/), that nothing folds a leaf, and every error a
 * user meets: no library, no symbol, no output type, the leaf refusing its
 * data, clashing prototypes, bad --leaf-source names.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "opt/pipeline.h"
#include "opt_check_util.h"

#ifndef FXCC_LEAF_LIB
#error "FXCC_LEAF_LIB must name the leaf_test_ops library"
#endif

#define LEAF_DIR FXCC_SOURCE_DIR "/tests/leaf/"

/* The suite's leaf libraries: a test loads them and attaches them to its
 * graphs; teardown closes them. */
static LeafLibraries libraries;

static void setup(void) { tu_setup(); }

static void teardown(void)
{
    leaf_libraries_close(&libraries);
    tu_teardown();
}

/* Whether some diagnostic contains every one of the given fragments. */
static bool diag_has(const char *a, const char *b)
{
    for (size_t i = 0; i < tu_diag.count; i++) {
        const DiagEntry *e = &tu_diag.entries[i];
        char line[2048];
        snprintf(line, sizeof line, "%s: %s: %s", e->file ? e->file : "", e->node ? e->node : "",
                 e->message);
        if (strstr(line, a) && (!b || strstr(line, b)))
            return true;
    }
    return false;
}

static void print_diag_unless(bool ok)
{
    if (!ok)
        diag_print(&tu_diag, stderr);
}

/* Loads tests/leaf/NAME.onnx with unknown ops as leaves (as the CLI does)
 * and propagates shapes; expects `want`. */
static Graph *load_with(const char *name, OnnxLoadOptions lo, FxStatus want)
{
    char path[4096];
    snprintf(path, sizeof path, LEAF_DIR "%s.onnx", name);
    lo.unknown_ops_as_leaves = true;
    Graph *g = NULL;
    FxStatus st = onnx_load(path, &lo, &g, &tu_diag);
    if (st == FX_OK)
        st = graph_propagate_shapes(g, NULL, 0, &tu_diag);
    print_diag_unless(st == want);
    ck_assert_int_eq(st, want);
    if (st != FX_OK) {
        graph_free(g);
        return NULL;
    }
    ck_assert_int_eq(graph_lint(g, true, &tu_diag), FX_OK);
    return g;
}

static Graph *load(const char *name)
{
    OnnxLoadOptions lo = {0};
    return load_with(name, lo, FX_OK);
}

static Tensor *read_npy(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, LEAF_DIR "%s.npy", name);
    Tensor *t = NULL;
    ck_assert_int_eq(tensor_file_read(path, &t, &tu_diag), FX_OK);
    return t;
}

/* The test library, for g's interpreter runs. */
static void load_library(Graph *g)
{
    FxStatus st = leaf_libraries_load(&libraries, FXCC_LEAF_LIB, &tu_diag);
    print_diag_unless(st == FX_OK);
    ck_assert_int_eq(st, FX_OK);
    g->leaf_libraries = &libraries;
}

/* Runs g on one input; returns the status, outputs in out[]. */
static FxStatus run(const Graph *g, const Tensor *in, Tensor **out, int num_out)
{
    return interp_run(g, &in, 1, out, num_out, NULL, NULL, &tu_diag);
}

static void assert_close(const Tensor *got, const Tensor *want, const char *what)
{
    CompareResult c = tensor_compare(got, want, 1e-6, 1e-6);
    ck_assert_msg(c.ok, "%s: max abs error %g at %lld", what, c.max_abs, (long long)c.worst_index);
}

/* Compiles g (portable target) with tests/leaf/leaf_ops.c, builds and runs
 * it on `in` and compares it with the interpreter on `reference`; returns
 * cg_verify's status.  The build folder is `dir`. */
static FxStatus compile_and_verify(Graph *g, Graph *reference, Tensor *in, const char *dir)
{
    static const char *const sources[] = {LEAF_DIR "leaf_ops.c"};
    CgVerifyOptions vo = {.cg = {.name = "model", .target = FX_TARGET_PORTABLE,
                                 .leaf_sources = sources, .num_leaf_sources = 1},
                          .build = {.target = FX_TARGET_PORTABLE},
                          .rtol = 1e-6, .atol = 1e-6, .keep_dir = dir};
    FILE *report = fopen("/dev/null", "w");
    FxStatus st = cg_verify(g, reference, &in, 1, &vo, report, &tu_diag);
    fclose(report);
    return st;
}

static void remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (!getenv("FXCC_LEAF_KEEP")) /* keep the generated C to read it */
        ck_assert_int_eq(system(cmd), 0);
}

/* The leaf part of DIR/model/model.h against tests/golden/opt/leaf/NAME.txt
 * (rewritten first with FXCC_UPDATE_GOLDEN). */
static void assert_header_golden(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model/model.h", dir);
    char *h = tu_slurp(path);
    char *begin = strstr(h, "/* Leaf ops");
    ck_assert_msg(begin != NULL, "no leaf prototypes in %s", path);
    char *end = strstr(begin, "int model_run(");
    ck_assert_ptr_nonnull(end);
    *end = '\0';
    snprintf(path, sizeof path, "%s/tests/golden/opt/leaf/%s.txt", FXCC_SOURCE_DIR, name);
    if (getenv("FXCC_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "wb");
        ck_assert_msg(f != NULL, "cannot write %s", path);
        fputs(begin, f);
        fclose(f);
    }
    char *want = tu_slurp(path);
    ck_assert_msg(strcmp(begin, want) == 0, "%s differs from the golden file:\n%s", name, begin);
    free(want);
    free(h);
}

static char *temp_dir(const char *name)
{
    static char dir[256];
    snprintf(dir, sizeof dir, "/tmp/fxcc_leaf_%s_%ld", name, (long)getpid());
    return dir;
}

/* Without the option an unknown op is still an error, as before leaves. */
START_TEST(test_library_default_refuses_unknown_ops)
{
    Graph *g = NULL;
    OnnxLoadOptions lo = {0};
    ck_assert_int_eq(onnx_load(LEAF_DIR "cummax.onnx", &lo, &g, &tu_diag), FX_ERR_UNSUPPORTED);
    ck_assert_ptr_null(g);
    ck_assert(diag_has("cummax", "domain 'com.example' is not supported"));
}
END_TEST

/* value_info types the leaf; its ONNX attributes are kept; the interpreter
 * calls the library's function and agrees with numpy. */
START_TEST(test_cummax_interpreter)
{
    Graph *g = load("cummax");
    tu_assert_golden(g, "leaf", "cummax");
    load_library(g);
    Tensor *in = read_npy("cummax_input"), *want = read_npy("cummax_expected"), *got = NULL;
    ck_assert_int_eq(run(g, in, &got, 1), FX_OK);
    assert_close(got, want, "cummax");
    tensor_free(got);
    tensor_free(in);
    tensor_free(want);
    graph_free(g);
}
END_TEST

/* Two inputs (one a weight), two outputs of two element types typed by the
 * graph outputs: interpreter against numpy, then the compiled code (with the
 * leaf source in its build) against the interpreter; the header's prototype
 * against its golden file. */
START_TEST(test_rowmax_interpreter_and_compiled)
{
    Graph *g = load("rowmax");
    load_library(g);
    Tensor *in = read_npy("rowmax_input"), *got[2] = {0};
    Tensor *want[2] = {read_npy("rowmax_expected_0"), read_npy("rowmax_expected_1")};
    ck_assert_int_eq(interp_run(g, (const Tensor *const *)&in, 1, got, 2, NULL, NULL, &tu_diag),
                     FX_OK);
    assert_close(got[0], want[0], "rowmax values");
    ck_assert_int_eq(got[1]->type.dtype, FXRT_DTYPE_INT64);
    assert_close(got[1], want[1], "rowmax indices"); /* integers compare exactly */
    const char *dir = temp_dir("rowmax");
    FxStatus st = compile_and_verify(g, NULL, in, dir);
    print_diag_unless(st == FX_OK);
    ck_assert_msg(st == FX_OK, "compiled rowmax differs or does not build (see %s)", dir);
    assert_header_golden(dir, "rowmax_header");
    remove_dir(dir);
    for (int k = 0; k < 2; k++) {
        tensor_free(got[k]);
        tensor_free(want[k]);
    }
    tensor_free(in);
    graph_free(g);
}
END_TEST

/* The -O2 passes leave the leaf alone; compiled -O2 code against the -O0
 * interpreter, and the generated folder's build files name the source.  The
 * pipeline loads the library into the caller's table and hands back the
 * -O0 copy, which runs the leaf from the same table. */
START_TEST(test_cummax_compiled_after_passes)
{
    const char *libs[] = {FXCC_LEAF_LIB};
    PipelineOptions po = {.model = LEAF_DIR "cummax.onnx",
                          .load = {.unknown_ops_as_leaves = true},
                          .leaf_libs = libs, .num_leaf_libs = 1, .leaf_libraries = &libraries,
                          .opt_level = 2, .want_reference = true};
    PipelineResult r;
    FxStatus st = pipeline_load(&po, &r, &tu_diag);
    print_diag_unless(st == FX_OK);
    ck_assert_int_eq(st, FX_OK);
    Graph *g = r.graph, *reference = r.reference;
    ck_assert_int_eq(tu_count_op(g, "Leaf"), 1);
    ck_assert_int_eq(tu_count_op(reference, "Leaf"), 1);
    ck_assert_ptr_eq(reference->leaf_libraries, &libraries);
    Tensor *in = read_npy("cummax_input");
    const char *dir = temp_dir("cummax");
    st = compile_and_verify(g, reference, in, dir);
    print_diag_unless(st == FX_OK);
    ck_assert_msg(st == FX_OK, "compiled cummax differs or does not build (see %s)", dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/model/CMakeLists.txt", dir);
    char *cmake = tu_slurp(path);
    ck_assert_ptr_nonnull(strstr(cmake, "target_sources(model PRIVATE leaf_ops.c)"));
    free(cmake);
    snprintf(path, sizeof path, "%s/model/model.mk", dir);
    char *mk = tu_slurp(path);
    ck_assert_ptr_nonnull(strstr(mk, "model_SRCS += $(model_DIR)/leaf_ops.c"));
    free(mk);
    remove_dir(dir);
    tensor_free(in);
    graph_free(g);
    graph_free(reference);
}
END_TEST

static Node *cummax_leaf(Graph *g, Node *x)
{
    Node *leaf = graph_create_op(g, NULL, &fx_op_Leaf, "cummax", &x, 1);
    const char *types[] = {"float32[2, 5]"};
    ck_assert_ptr_nonnull(node_set_attr_string(leaf, "leaf_op", "CumMaxRows"));
    ck_assert_ptr_nonnull(node_set_attr_string(leaf, "leaf_domain", "com.example"));
    ck_assert_ptr_nonnull(node_set_attr_int(leaf, "leaf_outputs", 1));
    ck_assert_ptr_nonnull(node_set_attr_strings(leaf, "leaf_types", types, 1));
    return leaf;
}

/* Two identical leaves reading one constant: shape propagation and the -O2
 * passes must neither evaluate them (no library is loaded, so evaluating
 * would fail) nor merge them (the function need not be pure), and their
 * values stay unknown at compile time. */
START_TEST(test_opaque_leaf_is_not_folded)
{
    Graph *g = graph_new();
    int64_t dims[2] = {2, 5};
    Node *w = tu_weights(g, "w", 2, dims, 0.5f);
    Node *leaves[2] = {cummax_leaf(g, w), cummax_leaf(g, w)};
    tu_finish(g, leaves, 2);
    ck_assert_ptr_null(node_const_value(leaves[0]));
    PassOptions po = {0};
    FxStatus st = opt_run_level(g, 2, &po, &tu_diag);
    print_diag_unless(st == FX_OK);
    ck_assert_int_eq(st, FX_OK);
    ck_assert_int_eq(tu_count_op(g, "Leaf"), 2);
    /* They run once a library is there: each row's running maximum. */
    load_library(g);
    Tensor *got[2] = {0};
    ck_assert_int_eq(interp_run(g, NULL, 0, got, 2, NULL, NULL, &tu_diag), FX_OK);
    const float *x = w->value->data;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++) {
            float m = x[i * 5];
            for (int k = 1; k <= j; k++)
                m = x[i * 5 + k] > m ? x[i * 5 + k] : m;
            for (int l = 0; l < 2; l++)
                ck_assert_float_eq_tol(((const float *)got[l]->data)[i * 5 + j], m, 1e-7f);
        }
    tensor_free(got[0]);
    tensor_free(got[1]);
    graph_free(g);
}
END_TEST

START_TEST(test_missing_library)
{
    Graph *g = load("cummax");
    Tensor *in = read_npy("cummax_input"), *got = NULL;
    ck_assert_int_eq(run(g, in, &got, 1), FX_ERR_UNSUPPORTED);
    ck_assert_ptr_null(got);
    ck_assert(diag_has("cummax (Leaf)", "fxcc_leaf_CumMaxRows with --leaf-lib"));
    ck_assert_int_eq(leaf_libraries_load(&libraries, LEAF_DIR "no_such_library.so", &tu_diag),
                     FX_ERR_IO);
    ck_assert(diag_has("cannot load leaf library", "no_such_library.so"));
    tensor_free(in);
    graph_free(g);
}
END_TEST

/* --leaf names ops fxcc implements: "DOMAIN.OP" or "OP"; a library without
 * the function is an error naming it. */
START_TEST(test_named_leaves_and_missing_symbol)
{
    const char *other_domain[] = {"com.other.Softsign"};
    OnnxLoadOptions lo = {.leaf_ops = other_domain, .num_leaf_ops = 1};
    Graph *g = load_with("softsign", lo, FX_OK);
    ck_assert_int_eq(tu_count_op(g, "Leaf"), 0);
    graph_free(g);

    const char *softsign[] = {"ai.onnx.Softsign"};
    lo.leaf_ops = softsign;
    g = load_with("softsign", lo, FX_OK);
    ck_assert_int_eq(tu_count_op(g, "Leaf"), 1);
    ck_assert_int_eq(tu_count_op(g, "Softsign"), 0);
    load_library(g);
    Tensor *in = read_npy("softsign_input"), *want = read_npy("softsign_expected"), *got = NULL;
    ck_assert_int_eq(run(g, in, &got, 1), FX_OK);
    assert_close(got, want, "leaf Softsign");
    tensor_free(got);
    graph_free(g);

    const char *both[] = {"Softsign", "Relu"};
    lo.leaf_ops = both;
    lo.num_leaf_ops = 2;
    g = load_with("softsign", lo, FX_OK);
    ck_assert_int_eq(tu_count_op(g, "Leaf"), 2);
    g->leaf_libraries = &libraries; /* loaded above, still open */
    got = NULL;
    ck_assert_int_eq(run(g, in, &got, 1), FX_ERR_UNSUPPORTED);
    ck_assert(diag_has("no leaf library defines fxcc_leaf_Relu", "leaf_test_ops"));
    tensor_free(in);
    tensor_free(want);
    graph_free(g);
}
END_TEST

/* Nothing types y: an error naming the node and the flag; --leaf-type fixes
 * it; --leaf-type must name a leaf output and hold a type. */
START_TEST(test_output_types)
{
    OnnxLoadOptions lo = {0};
    ck_assert_ptr_null(load_with("untyped", lo, FX_ERR_UNSUPPORTED));
    ck_assert(diag_has("sqrt_checked (Leaf)", "--leaf-type y=TYPE"));
    diag_clear(&tu_diag);

    const char *not_leaf[] = {"z=float32[4]"};
    lo.leaf_types = not_leaf;
    lo.num_leaf_types = 1;
    ck_assert_ptr_null(load_with("untyped", lo, FX_ERR_INVALID));
    ck_assert(diag_has("--leaf-type names 'z', which is not an output of a leaf op", NULL));
    diag_clear(&tu_diag);

    const char *bad[] = {"y=float32[4"};
    lo.leaf_types = bad;
    ck_assert_ptr_null(load_with("untyped", lo, FX_ERR_INVALID));
    ck_assert(diag_has("leaf type 'float32[4'", NULL));
    diag_clear(&tu_diag);

    const char *typed[] = {"y=float32[4]"};
    lo.leaf_types = typed;
    Graph *g = load_with("untyped", lo, FX_OK);
    load_library(g);
    Tensor *in = read_npy("untyped_input"), *want = read_npy("untyped_expected"), *got = NULL;
    ck_assert_int_eq(run(g, in, &got, 1), FX_OK);
    assert_close(got, want, "untyped");
    tensor_free(got);
    tensor_free(in);
    tensor_free(want);
    graph_free(g);
}
END_TEST

/* SqrtChecked returns 5 on negative input: the interpreter reports it naming
 * the node; the compiled NAME_run returns it (the harness's main fails). */
START_TEST(test_leaf_refuses_its_data)
{
    const char *typed[] = {"y=float32[4]"};
    OnnxLoadOptions lo = {.leaf_types = typed, .num_leaf_types = 1};
    Graph *g = load_with("untyped", lo, FX_OK);
    load_library(g);
    Tensor *in = read_npy("untyped_negative"), *got = NULL;
    ck_assert_int_eq(run(g, in, &got, 1), FX_ERR_RUNTIME);
    ck_assert(diag_has("sqrt_checked (Leaf)", "fxcc_leaf_SqrtChecked returned 5"));
    diag_clear(&tu_diag);
    const char *dir = temp_dir("refuse");
    ck_assert_int_eq(compile_and_verify(g, NULL, in, dir), FX_ERR_RUNTIME);
    ck_assert(diag_has("model_run failed with status 5", NULL));
    remove_dir(dir);
    tensor_free(in);
    graph_free(g);
}
END_TEST

/* One op type read with two element types needs two prototypes: refused. */
START_TEST(test_prototype_clash)
{
    Graph *g = graph_new();
    int64_t dims[1] = {3};
    Node *x = tu_input(g, "x", FXRT_DTYPE_FLOAT32, 1, dims);
    Node *k = tu_input(g, "k", FXRT_DTYPE_INT64, 1, dims);
    Node *leaves[2];
    Node *args[2] = {x, k};
    const char *types[] = {"float32[3]"};
    for (int i = 0; i < 2; i++) {
        leaves[i] = graph_create_op(g, NULL, &fx_op_Leaf, "twice", &args[i], 1);
        ck_assert_ptr_nonnull(node_set_attr_string(leaves[i], "leaf_op", "Twice"));
        ck_assert_ptr_nonnull(node_set_attr_strings(leaves[i], "leaf_types", types, 1));
    }
    tu_finish(g, leaves, 2);
    CgOptions co = {.name = "model", .target = FX_TARGET_PORTABLE};
    const char *dir = temp_dir("clash");
    ck_assert_int_eq(cg_compile(g, &co, dir, NULL, &tu_diag), FX_ERR_UNSUPPORTED);
    ck_assert(diag_has("twice_1 (Leaf)", "other element types or ranks than at node twice"));
    ck_assert_int_ne(access(dir, F_OK), 0); /* nothing written */
    graph_free(g);
}
END_TEST

START_TEST(test_leaf_source_names)
{
    Graph *g = load("cummax");
    const char *dir = temp_dir("names");
    const char *cases[][2] = {{LEAF_DIR "cummax.onnx", "not a .c file"},
                              {"/somewhere/model.c", "fxcc writes a file of that name"},
                              {"/somewhere/main.c", "fxcc writes a file of that name"},
                              {LEAF_DIR "no_such_file.c", "no_such_file.c"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CgOptions co = {.name = "model", .target = FX_TARGET_PORTABLE,
                        .leaf_sources = &cases[i][0], .num_leaf_sources = 1};
        ck_assert_int_ne(cg_compile(g, &co, dir, NULL, &tu_diag), FX_OK);
        ck_assert_msg(diag_has(cases[i][1], NULL), "no error '%s'", cases[i][1]);
        ck_assert_int_ne(access(dir, F_OK), 0);
        diag_clear(&tu_diag);
    }
    graph_free(g);
}
END_TEST

static Suite *leaf_suite(void)
{
    Suite *s = suite_create("leaf");
    TCase *tc = tcase_create("leaf");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_library_default_refuses_unknown_ops);
    tcase_add_test(tc, test_cummax_interpreter);
    tcase_add_test(tc, test_rowmax_interpreter_and_compiled);
    tcase_add_test(tc, test_cummax_compiled_after_passes);
    tcase_add_test(tc, test_opaque_leaf_is_not_folded);
    tcase_add_test(tc, test_missing_library);
    tcase_add_test(tc, test_named_leaves_and_missing_symbol);
    tcase_add_test(tc, test_output_types);
    tcase_add_test(tc, test_leaf_refuses_its_data);
    tcase_add_test(tc, test_prototype_clash);
    tcase_add_test(tc, test_leaf_source_names);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_main(leaf_suite()); }
