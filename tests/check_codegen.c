/*
 * check_codegen.c - tests of the memory planner: on every ONNX backend test
 * model that loads, no two values alive at one step overlap in the arena;
 * in-place reuse and view aliasing happen where legal and not where not.
 */
#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
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

static Node *input(Graph *g, const char *name, int rank, int64_t d0, int64_t d1)
{
    Node *x = graph_create_node(g, NULL, FX_OPCODE_PLACEHOLDER, name, name, NULL, 0);
    ck_assert(node_set_num_outputs(x, 1));
    x->out_types[0] = (TensorType){.dtype = FXRT_DTYPE_FLOAT32, .rank = rank, .dims = {d0, d1}};
    return x;
}

static Node *unary(Graph *g, const char *opname, Node *x)
{
    return graph_create_op(g, NULL, op(opname), opname, &x, 1);
}

static Node *binary(Graph *g, const char *opname, Node *a, Node *b)
{
    Node *args[2] = {a, b};
    return graph_create_op(g, NULL, op(opname), opname, args, 2);
}

static void finish(Graph *g, Node *result, CgPlan *p)
{
    graph_create_node(g, NULL, FX_OPCODE_OUTPUT, "output", "output", &result, 1);
    Diag d;
    diag_init(&d);
    ck_assert_int_eq(graph_propagate_shapes(g, NULL, 0, &d), FX_OK);
    ck_assert_int_eq(cg_plan(g, p, &d), FX_OK);
    ck_assert_int_eq(cg_plan_check(p, &d), FX_OK);
    diag_free(&d);
}

static const CgValue *value(const CgPlan *p, const Node *n)
{
    for (int i = 0; i < p->num_values; i++)
        if (p->values[i].node == n && p->values[i].kind != CG_SCRATCH && p->values[i].index == 0)
            return &p->values[i];
    ck_abort_msg("no value for %s", n->name);
    return NULL;
}

START_TEST(test_inplace_when_input_dies)
{
    Graph *g = graph_new();
    Node *x = input(g, "x", 2, 4, 8);
    Node *e = unary(g, "Exp", x);
    Node *n = unary(g, "Neg", e);
    Node *s = unary(g, "Sigmoid", n);
    CgPlan p;
    finish(g, s, &p);
    const CgValue *ve = value(&p, e), *vn = value(&p, n);
    ck_assert_int_eq(ve->kind, CG_ARENA);
    ck_assert_int_eq(vn->kind, CG_ALIAS);
    ck_assert(vn->inplace);
    ck_assert_ptr_eq(cg_root(vn), ve);
    ck_assert_int_eq(value(&p, s)->kind, CG_OUTPUT); /* written into the caller's buffer */
    ck_assert_int_eq(p.inplace_count, 1);
    ck_assert_uint_eq(p.arena_bytes, 4 * 8 * sizeof(float));
    cg_plan_free(&p);
    graph_free(g);
}
END_TEST

START_TEST(test_no_inplace_while_input_alive)
{
    Graph *g = graph_new();
    Node *x = input(g, "x", 2, 4, 8);
    Node *e = unary(g, "Exp", x);
    Node *n = unary(g, "Neg", e);
    Node *sum = binary(g, "Add", n, e); /* e is read after Neg */
    CgPlan p;
    finish(g, sum, &p);
    const CgValue *ve = value(&p, e), *vn = value(&p, n);
    ck_assert_int_eq(vn->kind, CG_ARENA);
    ck_assert(ve->offset != vn->offset);
    cg_plan_free(&p);
    graph_free(g);
}
END_TEST

START_TEST(test_no_inplace_across_types_or_inputs)
{
    Graph *g = graph_new();
    Node *x = input(g, "x", 2, 4, 8);
    Node *row = input(g, "row", 2, 1, 8);
    Node *small = unary(g, "Exp", row);       /* float32[1, 8] in the arena */
    Node *wide = binary(g, "Add", small, x);  /* float32[4, 8]: cannot reuse small */
    Node *r = unary(g, "Relu", wide);
    CgPlan p;
    finish(g, r, &p);
    ck_assert_int_eq(value(&p, wide)->kind, CG_ARENA);
    ck_assert_int_eq(value(&p, small)->kind, CG_ARENA);
    /* Exp of an input is never done in the input's buffer: it is const */
    ck_assert(!value(&p, small)->inplace);
    cg_plan_free(&p);
    graph_free(g);
}
END_TEST

START_TEST(test_view_is_alias)
{
    Graph *g = graph_new();
    Node *x = input(g, "x", 2, 4, 8);
    Node *e = unary(g, "Exp", x);
    Node *flat = graph_create_op(g, NULL, op("Flatten"), "flat", &e, 1);
    node_set_attr_int(flat, "axis", 0);
    Node *s = unary(g, "Sigmoid", flat);
    Node *t = binary(g, "Add", s, flat); /* keeps the view, and so e, alive */
    CgPlan p;
    finish(g, t, &p);
    const CgValue *vf = value(&p, flat);
    ck_assert_int_eq(vf->kind, CG_ALIAS);
    ck_assert(!vf->inplace);
    ck_assert_ptr_eq(cg_root(vf), value(&p, e));
    /* the view's reader at the last step extends the base's life */
    ck_assert_int_ge(value(&p, e)->last, value(&p, s)->first + 1);
    ck_assert_int_eq(value(&p, s)->kind, CG_ARENA);
    cg_plan_free(&p);
    graph_free(g);
}
END_TEST

START_TEST(test_no_overlap_on_backend_models)
{
    const char *root = "/usr/share/libonnx-testdata/data/node";
    DIR *dp = opendir(root);
    ck_assert_ptr_nonnull(dp);
    int planned = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (strncmp(e->d_name, "test_", 5) != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s/model.onnx", root, e->d_name);
        Diag d;
        diag_init(&d);
        Graph *g = NULL;
        OnnxLoadOptions lo = {0};
        if (onnx_load(path, &lo, &g, &d) == FX_OK && graph_propagate_shapes(g, NULL, 0, &d) == FX_OK) {
            CgPlan p;
            if (cg_plan(g, &p, &d) == FX_OK) {
                ck_assert_msg(cg_plan_check(&p, &d) == FX_OK, "%s: %s", e->d_name,
                              d.count ? d.entries[0].message : "");
                ck_assert_uint_le(p.lower_bound, p.arena_bytes);
                planned++;
                cg_plan_free(&p);
            }
        }
        graph_free(g);
        diag_free(&d);
    }
    closedir(dp);
    ck_assert_int_gt(planned, 500);
}
END_TEST

static Graph *load_digits(const char *path)
{
    Diag d;
    diag_init(&d);
    Graph *g = NULL;
    OnnxLoadOptions lo = {0};
    ck_assert_int_eq(onnx_load(path, &lo, &g, &d), FX_OK);
    ck_assert_int_eq(graph_propagate_shapes(g, NULL, 0, &d), FX_OK);
    diag_free(&d);
    return g;
}

/* The same model, loaded from two folders (the source tree and a copy) and
 * compiled into two folders, gives the same bytes in every file, in both
 * weights modes: no path finds its way into the output. */
START_TEST(test_generated_code_is_deterministic)
{
    Diag d;
    diag_init(&d);
    char a[] = "/tmp/fxcc-det-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(a));
    const char *original = FXCC_SOURCE_DIR "/examples/digits/digits.onnx";
    char copy[1000], cmd[9000];
    snprintf(copy, sizeof copy, "%s/elsewhere/digits.onnx", a);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/elsewhere && cp %s %s", a, original, copy);
    ck_assert_int_eq(system(cmd), 0);
    Graph *ga = load_digits(original), *gb = load_digits(copy);
    const CgWeights modes[] = {CG_WEIGHTS_C, CG_WEIGHTS_INCBIN};
    const char *weight_files[] = {"digits_weights.c", "digits_weights.bin"};
    for (int m = 0; m < 2; m++) {
        char da[1000], db[1000];
        snprintf(da, sizeof da, "%s/a%d", a, m);
        snprintf(db, sizeof db, "%s/deeper/b%d", a, m);
        CgOptions oa = {.name = "digits", .target = FX_TARGET_PORTABLE, .weights = modes[m],
                        .emit_main = true, .source = original};
        CgOptions ob = oa;
        ob.source = copy;
        ck_assert_int_eq(cg_compile(ga, &oa, da, NULL, &d), FX_OK);
        ck_assert_int_eq(cg_compile(gb, &ob, db, NULL, &d), FX_OK);
        snprintf(cmd, sizeof cmd, "test -f %s/%s && diff -r %s %s > /dev/null", da,
                 weight_files[m], da, db);
        ck_assert_msg(system(cmd) == 0, "%s and %s differ (or lack %s)", da, db, weight_files[m]);
        snprintf(cmd, sizeof cmd, "grep -r -l -e '%s' -e '/tmp/' %s > /dev/null", FXCC_SOURCE_DIR,
                 da);
        ck_assert_msg(system(cmd) != 0, "a generated file in %s holds a path", da);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", a);
    ck_assert_int_eq(system(cmd), 0);
    graph_free(ga);
    graph_free(gb);
    diag_free(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("codegen");
    TCase *plan = tcase_create("plan");
    tcase_set_timeout(plan, 120);
    tcase_add_test(plan, test_inplace_when_input_dies);
    tcase_add_test(plan, test_no_inplace_while_input_alive);
    tcase_add_test(plan, test_no_inplace_across_types_or_inputs);
    tcase_add_test(plan, test_view_is_alias);
    tcase_add_test(plan, test_no_overlap_on_backend_models);
    tcase_add_test(plan, test_generated_code_is_deterministic);
    suite_add_tcase(s, plan);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
