/*
 * opt_check_util.c - shared helpers of the check_opt_*.c suites.
 */
#include "opt_check_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opt/pipeline.h"

#ifndef FXCC_SOURCE_DIR
#error "FXCC_SOURCE_DIR must point at the repository"
#endif

Diag tu_diag;

void tu_setup(void) { diag_init(&tu_diag); }
void tu_teardown(void) { diag_free(&tu_diag); }

static Node *typed(Node *n, const TensorType *t)
{
    ck_assert_ptr_nonnull(n);
    ck_assert(node_set_num_outputs(n, 1));
    n->out_types[0] = *t;
    n->shapes_known = true;
    return n;
}

Node *tu_input(Graph *g, const char *name, DType dtype, int rank, const int64_t *dims)
{
    TensorType t = {.dtype = dtype, .rank = rank};
    if (rank > 0)
        memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    return typed(graph_create_node(g, NULL, FX_OPCODE_PLACEHOLDER, name, name, NULL, 0), &t);
}

Node *tu_constant(Graph *g, const char *name, Tensor *value)
{
    TensorType t = value->type;
    return typed(graph_create_constant(g, NULL, name, value, &tu_diag), &t);
}

Node *tu_scalar(Graph *g, const char *name, float value)
{
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 0};
    Tensor *x = tensor_new(&t, &tu_diag);
    ck_assert_ptr_nonnull(x);
    *(float *)x->data = value;
    return tu_constant(g, name, x);
}

Node *tu_weights(Graph *g, const char *name, int rank, const int64_t *dims, float scale)
{
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = rank};
    if (rank > 0)
        memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    Tensor *x = tensor_new(&t, &tu_diag);
    ck_assert_ptr_nonnull(x);
    for (int64_t i = 0; i < tensor_numel(x); i++)
        ((float *)x->data)[i] = scale * (float)((i * 7) % 11 - 5);
    return tu_constant(g, name, x);
}

Node *tu_input_f32(Graph *g, const char *name, int rank, int64_t d0, int64_t d1, int64_t d2,
                   int64_t d3)
{
    int64_t dims[4] = {d0, d1, d2, d3};
    return tu_input(g, name, FXRT_DTYPE_FLOAT32, rank, dims);
}

Node *tu_weights_f32(Graph *g, const char *name, int rank, int64_t d0, int64_t d1, int64_t d2,
                     int64_t d3, float scale)
{
    int64_t dims[4] = {d0, d1, d2, d3};
    return tu_weights(g, name, rank, dims, scale);
}

Node *tu_ints(Graph *g, const char *name, const int64_t *v, int64_t count)
{
    Tensor *t = tensor_new_ints(v, count, &tu_diag);
    ck_assert_ptr_nonnull(t);
    return tu_constant(g, name, t);
}

Graph *tu_load_model(const char *relative_path)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", FXCC_SOURCE_DIR, relative_path);
    PipelineOptions po = {.model = path};
    PipelineResult r;
    FxStatus st = pipeline_load(&po, &r, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
    return r.graph;
}

char *tu_print(const Graph *g)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(mem);
    graph_print(g, mem);
    fclose(mem);
    return text;
}

Node *tu_op(Graph *g, const char *op_name, Node *const *args, int num_args)
{
    const OpDef *op = op_lookup_any(op_name);
    ck_assert_msg(op != NULL, "no op or module kind named %s", op_name);
    InsertPoint ip = {.graph = g, .before = &g->root};
    Node *n = ip_create_op(&ip, op, op_name, args, num_args, &tu_diag);
    if (!n)
        diag_print(&tu_diag, stderr);
    ck_assert_ptr_nonnull(n);
    return n;
}

Node *tu_op3(Graph *g, const char *op_name, Node *a, Node *b, Node *c)
{
    Node *args[3] = {a, b, c};
    return tu_op(g, op_name, args, c ? 3 : (b ? 2 : 1));
}

Node *tu_conv(Graph *g, Node *x, Node *w, Node *b, int64_t pad, int64_t stride, int64_t group)
{
    Node *args[3] = {x, w, b};
    Node *n = graph_create_op(g, NULL, op_lookup("Conv"), "Conv", args, b ? 3 : 2);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(op_apply_attr_specs(n->op, n, &tu_diag), FX_OK);
    ck_assert(node_set_num_outputs(n, 1));
    int64_t pads[4] = {pad, pad, pad, pad}, strides[2] = {stride, stride};
    ck_assert_ptr_nonnull(node_set_attr_ints(n, "pads", pads, 4));
    ck_assert_ptr_nonnull(node_set_attr_ints(n, "strides", strides, 2));
    ck_assert_ptr_nonnull(node_set_attr_int(n, "group", group));
    tu_reinfer(n);
    return n;
}

void tu_reinfer(Node *n)
{
    FxStatus st = node_infer_shapes(n, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
}

void tu_finish(Graph *g, Node *const *results, int count)
{
    ck_assert_ptr_nonnull(
        graph_create_node(g, NULL, FX_OPCODE_OUTPUT, "output", "output", results, count));
    FxStatus st = graph_propagate_shapes(g, NULL, 0, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
}

int tu_count_op(const Graph *g, const char *op_name)
{
    int k = 0;
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        k += node_is_call(n) && n->op && strcmp(n->op->name, op_name) == 0;
    return k;
}

int tu_count_calls(const Graph *g)
{
    int k = 0;
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        k += node_is_call(n);
    return k;
}

char *tu_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    ck_assert_int_ge(len, 0);
    ck_assert_int_eq(fseek(f, 0, SEEK_SET), 0);
    char *s = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(fread(s, 1, (size_t)len, f), (size_t)len);
    s[len] = '\0';
    fclose(f);
    return s;
}

void tu_assert_golden(const Graph *g, const char *dir, const char *name)
{
    char *text = tu_print(g);
    size_t len = strlen(text);
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/opt/%s/%s.txt", FXCC_SOURCE_DIR, dir, name);
    if (getenv("FXCC_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "wb");
        ck_assert_msg(f != NULL, "cannot write %s (does the folder exist?)", path);
        fwrite(text, 1, len, f);
        fclose(f);
    }
    char *want = tu_slurp(path);
    ck_assert_msg(strcmp(text, want) == 0, "%s/%s differs from the golden file:\n%s", dir, name,
                  text);
    free(want);
    free(text);
}

static void lint_all(const Graph *g)
{
    FxStatus st = graph_lint(g, true, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        if (n->body)
            lint_all(n->body);
}

enum { MAX_VALUES = 16 };

int tu_run_pass(Graph *g, PassFn pass, double rtol, double atol)
{
    int ni = graph_num_placeholders(g), no = graph_num_outputs(g);
    ck_assert_int_le(ni, MAX_VALUES);
    ck_assert_int_le(no, MAX_VALUES);
    Tensor *in[MAX_VALUES] = {0}, *before[MAX_VALUES] = {0}, *after[MAX_VALUES] = {0};
    uint64_t seed = 0x5eedu;
    for (int i = 0; i < ni; i++)
        ck_assert_ptr_nonnull(in[i] = tensor_new_random(&graph_placeholder(g, i)->out_types[0],
                                                      &seed, &tu_diag));
    FxStatus st = interp_run(g, (const Tensor *const *)in, ni, before, no, NULL, NULL, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);

    PassResult r = {0};
    st = pass(g, &r, &tu_diag);
    if (st == FX_OK)
        st = graph_propagate_shapes(g, NULL, 0, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
    lint_all(g);

    st = interp_run(g, (const Tensor *const *)in, ni, after, no, NULL, NULL, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
    for (int k = 0; k < no; k++) {
        CompareResult c = tensor_compare(after[k], before[k], rtol, atol);
        ck_assert_msg(c.ok, "output %d changed: max abs %g, max rel %g", k, c.max_abs, c.max_rel);
        tensor_free(before[k]);
        tensor_free(after[k]);
    }
    for (int i = 0; i < ni; i++)
        tensor_free(in[i]);
    return r.changes;
}

void tu_assert_compiled_matches(Graph *g, Graph *ref, const char *name, double rtol,
                                double atol)
{
    int ni = graph_num_placeholders(g);
    ck_assert_int_le(ni, 8);
    Tensor *in[8] = {0};
    uint64_t seed = 0xe91u;
    for (int i = 0; i < ni; i++)
        ck_assert_ptr_nonnull(in[i] = tensor_new_random(&graph_placeholder(g, i)->out_types[0],
                                                      &seed, &tu_diag));
    static const FxTarget targets[2] = {FX_TARGET_HOST, FX_TARGET_PORTABLE};
    for (int t = 0; t < 2; t++) {
        CgVerifyOptions vo = {.cg = {.name = "model", .target = targets[t]},
                              .build = {.target = targets[t]},
                              .rtol = rtol, .atol = atol};
        FILE *report = fopen("/dev/null", "w");
        FxStatus st = cg_verify(g, ref, in, ni, &vo, report, &tu_diag);
        fclose(report);
        if (st != FX_OK)
            diag_print(&tu_diag, stderr);
        ck_assert_msg(st == FX_OK, "%s: compiled code (%s) differs from the reference graph",
                      name, t == 0 ? "host" : "portable");
    }
    for (int i = 0; i < ni; i++)
        tensor_free(in[i]);
}

int tu_main(Suite *s)
{
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
