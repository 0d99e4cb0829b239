/*
 * conformance.c - runs the ONNX backend node tests through fxcc.
 *
 * Each test folder holds model.onnx and test_data_set_N/{input,output}_K.pb.
 * A test PASSes when every output of every data set matches the reference
 * within the ONNX backend's tolerances (rtol 1e-3, atol 1e-7 unless the table
 * below loosens it for a named test), is UNSUPPORTED when fxcc refuses the
 * model with FX_ERR_UNSUPPORTED (an op, a dtype, a data-dependent shape), and
 * FAILs otherwise: wrong numbers, or any other error.
 *
 * Only the inputs that shape inference needs as constants are frozen (a
 * Reshape's shape, a Slice's starts...); every data input stays a runtime
 * input, so compiled code computes what it is tested on.  The
 * frozen-weights tier (--weights-tier) runs the tests whose weights,
 * biases or normalization statistics are graph inputs a second time with
 * those frozen, as a real model's initializers are, so that the passes
 * needing constant weights (the NCHWc layout at -O2) are tested too; its
 * compiled tests go into the same batched build.
 *
 * Every reason a test did not pass is counted and printed, most frequent
 * first, with the place it names taken out (node and tensor names), so that
 * a suite's remaining work reads as one list.
 *
 * With --compiled-elsewhere DIR, the compiled run leaves out the tests
 * whose model is byte for byte DIR's test of the same name (the current
 * onnx suite shares 480 of them with Debian's, which compiles them).
 *
 * With --expected FILE, the run fails when a test listed there does not pass
 * in a tier it runs in (a regression); --write-expected FILE records the
 * tests that pass with runtime inputs.
 */
#include <dirent.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "opt/pipeline.h"

#define DEFAULT_DATA_DIR "/usr/share/libonnx-testdata/data/node"

enum { MAX_FROZEN = 64 }; /* inputs considered for freezing */

typedef enum { RESULT_PASS, RESULT_FAIL, RESULT_UNSUPPORTED } Result;
static const char *const result_names[] = {"PASS", "FAIL", "UNSUPPORTED"};

/* Every test runs with its data inputs as runtime inputs; with
 * --weights-tier, a test whose weights, biases or normalization statistics
 * are graph inputs runs a second time with those frozen, as a real model's
 * initializers are, so that the passes needing constant weights run. */
typedef enum { TIER_RUNTIME, TIER_WEIGHTS, NUM_TIERS } Tier;
static const char *const tier_names[] = {"runtime inputs", "frozen weights"};
static const char *const tier_suffixes[] = {"", ".weights"}; /* of the work folder */

typedef struct TierRun {
    bool ran;
    Result result;
    bool frozen[MAX_FROZEN]; /* input k was made a constant */
    int num_inputs;
    int conv_nodes, nchwc_nodes; /* Conv before the passes, ConvNCHWc after */
    char work_name[600];
    char why[1024];
} TierRun;

/* Tests whose reference data need a looser tolerance than the default, and why. */
static const struct {
    const char *test;
    double rtol, atol;
} tolerance_overrides[] = {
    {NULL, 0, 0},
};

typedef struct Options {
    const char *data_dir;
    bool compiled;     /* --compiled TARGET: also through fxcc compile --emit-main */
    FxTarget target;
    const char *work;  /* where compiled tests are built */
    const char *cflags;
    const char *cc;
    int jobs;
    const char *expected;
    const char *write_expected;
    const char *compiled_elsewhere; /* --compiled-elsewhere DIR */
    bool verbose;
    int opt_level; /* --opt N: the passes of -ON run on every test graph first */
    bool weights_tier; /* --weights-tier: also the frozen-weights tier */
    char **patterns;
    int num_patterns;
} Options;

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entries of dir whose names start with prefix; caller frees. */
static int list_dir(const char *dir, const char *prefix, char ***out)
{
    DIR *dp = opendir(dir);
    *out = NULL;
    if (!dp)
        return 0;
    int count = 0, cap = 0;
    char **names = NULL;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        if (count == cap) {
            cap = cap ? cap * 2 : 64;
            char **grown = realloc(names, (size_t)cap * sizeof *names);
            if (!grown)
                break;
            names = grown;
        }
        names[count++] = strdup(e->d_name);
    }
    closedir(dp);
    if (count)
        qsort(names, (size_t)count, sizeof *names, compare_strings);
    *out = names;
    return count;
}

static void free_list(char **names, int count)
{
    for (int i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

/* input_0.pb, input_1.pb, ... in numeric order (input_10 after input_9). */
static int read_numbered(const char *dir, const char *prefix, Tensor ***out, Diag *d,
                         FxStatus *st)
{
    int count = 0;
    Tensor **tensors = NULL;
    *st = FX_OK;
    for (;; count++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s_%d.pb", dir, prefix, count) >= (int)sizeof path) {
            *st = diag_error(d, FX_ERR_IO, "%s: path too long", dir);
            break;
        }
        struct stat sb;
        if (stat(path, &sb) != 0)
            break;
        Tensor **grown = realloc(tensors, (size_t)(count + 1) * sizeof *tensors);
        if (!grown) {
            *st = FX_ERR_NOMEM;
            break;
        }
        tensors = grown;
        tensors[count] = NULL;
        if ((*st = tensor_file_read(path, &tensors[count], d)) != FX_OK)
            break;
    }
    *out = tensors;
    return count;
}

static void free_tensors(Tensor **t, int count)
{
    for (int i = 0; i < count; i++)
        tensor_free(t[i]);
    free(t);
}

static void tolerance_for(const char *test, double *rtol, double *atol)
{
    *rtol = 1e-3;
    *atol = 1e-7;
    for (size_t i = 0; tolerance_overrides[i].test; i++)
        if (strcmp(tolerance_overrides[i].test, test) == 0) {
            *rtol = tolerance_overrides[i].rtol;
            *atol = tolerance_overrides[i].atol;
        }
}

/* frozen[k]: input k was made a constant, so it is not passed at run time. */
static Result run_data_set(const Graph *g, const char *set_dir, const bool *frozen,
                           double rtol, double atol, char *why, size_t why_cap, Diag *d)
{
    Tensor **inputs = NULL, **expected = NULL, **actual = NULL;
    FxStatus st;
    int num_in = read_numbered(set_dir, "input", &inputs, d, &st);
    Result r = RESULT_FAIL;
    if (st != FX_OK) {
        free_tensors(inputs, num_in);
        return st == FX_ERR_UNSUPPORTED ? RESULT_UNSUPPORTED : RESULT_FAIL;
    }
    int live = 0;
    for (int k = 0; k < num_in; k++) {
        if (k < MAX_FROZEN && frozen[k])
            tensor_free(inputs[k]);
        else
            inputs[live++] = inputs[k];
    }
    num_in = live;
    int num_out = read_numbered(set_dir, "output", &expected, d, &st);
    if (st != FX_OK) {
        r = st == FX_ERR_UNSUPPORTED ? RESULT_UNSUPPORTED : RESULT_FAIL;
        goto done;
    }
    if (num_out != graph_num_outputs(g)) {
        snprintf(why, why_cap, "%d reference outputs, graph has %d", num_out,
                 graph_num_outputs(g));
        goto done;
    }
    actual = calloc((size_t)num_out + 1, sizeof *actual);
    if (!actual)
        goto done;
    st = interp_run(g, (const Tensor *const *)inputs, num_in, actual, num_out, NULL, NULL, d);
    if (st != FX_OK) {
        r = st == FX_ERR_UNSUPPORTED ? RESULT_UNSUPPORTED : RESULT_FAIL;
        goto done;
    }
    r = RESULT_PASS;
    for (int k = 0; k < num_out; k++) {
        CompareResult c = tensor_compare(actual[k], expected[k], rtol, atol);
        if (c.ok)
            continue;
        r = RESULT_FAIL;
        char ta[256], te[256];
        if (c.mismatches < 0)
            snprintf(why, why_cap, "output %d: got %s, expected %s", k,
                     type_format(&actual[k]->type, ta, sizeof ta),
                     type_format(&expected[k]->type, te, sizeof te));
        else
            snprintf(why, why_cap,
                     "output %d: %lld mismatches, max abs %.3g, max rel %.3g, first bad "
                     "index %lld (got %.7g, expected %.7g)",
                     k, (long long)c.mismatches, c.max_abs, c.max_rel, (long long)c.worst_index,
                     tensor_get_float(actual[k], c.worst_index),
                     tensor_get_float(expected[k], c.worst_index));
        break;
    }
done:
    if (actual)
        free_tensors(actual, num_out);
    free_tensors(inputs, num_in);
    free_tensors(expected, num_out);
    return r;
}

static bool same_tensor(const Tensor *a, const Tensor *b)
{
    return type_equal(&a->type, &b->type) &&
           memcmp(a->data, b->data, tensor_nbytes(a)) == 0;
}

/* The inputs of every data set of one test, read once for the freezing
 * decisions.  An input can be frozen only if it holds the same value in
 * every set, since the compiled graph then holds that one value. */
typedef struct TestInputs {
    Tensor ***per_set;
    int *counts;
    int num_sets;
    int num_inputs; /* of the first set, at most MAX_FROZEN */
} TestInputs;

static void test_inputs_free(TestInputs *in)
{
    for (int s = 0; s < in->num_sets; s++)
        free_tensors(in->per_set[s], in->counts[s]);
    free(in->per_set);
    free(in->counts);
    memset(in, 0, sizeof *in);
}

static FxStatus test_inputs_read(const char *dir, char **sets, int num_sets, TestInputs *in,
                                 Diag *d)
{
    memset(in, 0, sizeof *in);
    in->per_set = calloc((size_t)num_sets + 1, sizeof *in->per_set);
    in->counts = calloc((size_t)num_sets + 1, sizeof *in->counts);
    if (!in->per_set || !in->counts)
        return FX_ERR_NOMEM;
    FxStatus st = FX_OK;
    for (int s = 0; s < num_sets && st == FX_OK; s++) {
        char set_dir[8300];
        snprintf(set_dir, sizeof set_dir, "%s/%s", dir, sets[s]);
        in->counts[s] = read_numbered(set_dir, "input", &in->per_set[s], d, &st);
        in->num_sets++;
    }
    if (in->num_sets)
        in->num_inputs = in->counts[0] < MAX_FROZEN ? in->counts[0] : MAX_FROZEN;
    return st;
}

static bool freezable(const TestInputs *in, int k)
{
    if (k >= in->num_inputs)
        return false;
    for (int s = 1; s < in->num_sets; s++)
        if (k >= in->counts[s] || !same_tensor(in->per_set[0][k], in->per_set[s][k]))
            return false;
    return true;
}

/* What the pipeline's freezing hooks of one test in one tier share.
 * inputs[k] is the node of graph input k (a get_attr once frozen). */
typedef struct Freezer {
    const char *model;
    const TestInputs *in;
    Tier tier;
    bool *frozen; /* [MAX_FROZEN]: input k was made a constant */
    Node *inputs[MAX_FROZEN];
    int num_inputs;
    int weights_marked; /* frozen-weights tier: inputs that feed a weight */
    int conv_nodes;     /* Conv nodes as loaded, before the passes */
} Freezer;

static FxStatus freeze(Graph *g, Freezer *f, int k, Diag *d)
{
    Tensor *copy = tensor_clone(f->in->per_set[0][k], d);
    FxStatus st = copy ? graph_freeze_input(g, f->inputs[k], copy, d) : FX_ERR_NOMEM;
    if (st == FX_OK)
        f->frozen[k] = true;
    return st;
}

static int mark_weight_inputs(const Freezer *f, Graph *g, bool *marks);
static int count_ops(Graph *g, const char *op);

/* The pipeline's FreezeChosen hook: notes the graph inputs and, in the
 * frozen-weights tier, freezes the ones that feed a weight input (stopping
 * the pipeline when there is none: the tier has nothing to add). */
static FxStatus freeze_chosen(Graph *g, void *user, Diag *d)
{
    Freezer *f = user;
    int n = graph_num_placeholders(g);
    f->num_inputs = n < f->in->num_inputs ? n : f->in->num_inputs;
    for (int k = 0; k < f->num_inputs; k++)
        f->inputs[k] = graph_placeholder(g, k);
    f->conv_nodes = count_ops(g, "Conv");
    if (f->tier != TIER_WEIGHTS)
        return FX_OK;
    bool marks[MAX_FROZEN] = {false};
    f->weights_marked = mark_weight_inputs(f, g, marks);
    if (!f->weights_marked)
        return FX_ERR_UNSUPPORTED;
    FxStatus st = FX_OK;
    for (int k = 0; k < f->num_inputs && st == FX_OK; k++)
        if (marks[k])
            st = freeze(g, f, k, d);
    return st;
}

/* Whether `n` reads `input`, directly or through other nodes.  Walks the
 * list backwards from n, marking the nodes n depends on. */
static bool depends_on(Node *n, const Node *input)
{
    graph_for_each(n->graph, m) m->pass_data = NULL;
    n->pass_data = n;
    bool found = false;
    for (Node *m = n; m != &n->graph->root; m = m->prev) {
        if (!m->pass_data)
            continue;
        found |= m == input;
        for (int a = 0; a < m->num_args; a++)
            if (m->args[a])
                m->args[a]->pass_data = m;
    }
    graph_for_each(n->graph, m) m->pass_data = NULL;
    return found;
}

static const char constant_needed[] = "must be a compile-time constant";

/* The graph input that a "must be a compile-time constant" error names as
 * its source ("input 'shape' ('shape') must be ..."), or -1. */
static int input_named_by_error(const Freezer *f, const Diag *why)
{
    for (size_t e = 0; e < why->count; e++) {
        const char *m = why->entries[e].message;
        if (!m || !strstr(m, constant_needed))
            continue;
        for (int k = 0; k < f->num_inputs; k++) {
            char quoted[300];
            snprintf(quoted, sizeof quoted, "('%s')", f->inputs[k]->name);
            if (f->inputs[k]->opcode == FX_OPCODE_PLACEHOLDER && strstr(m, quoted))
                return k;
        }
    }
    return -1;
}

static bool error_needs_constant(const Diag *why)
{
    for (size_t e = 0; e < why->count; e++)
        if (why->entries[e].message && strstr(why->entries[e].message, constant_needed))
            return true;
    return false;
}

/* Whether freezing the inputs `trying`, on top of those frozen already, gets
 * the node named `failed` through shape propagation.  Tried on a fresh load
 * of the model, so the pipeline's graph stays as it is (a clone would need
 * the shapes this search is after). */
static bool freezing_unblocks(const Freezer *f, const bool *trying, const char *failed)
{
    Diag quiet;
    diag_init(&quiet);
    Graph *trial = NULL;
    OnnxLoadOptions lo = {0};
    FxStatus st = onnx_load(f->model, &lo, &trial, &quiet);
    for (int i = 0; i < f->num_inputs && st == FX_OK; i++) {
        if (!trying[i] && !f->frozen[i])
            continue;
        Node *input = graph_find(trial, f->inputs[i]->name);
        Tensor *copy = input ? tensor_clone(f->in->per_set[0][i], &quiet) : NULL;
        st = copy ? graph_freeze_input(trial, input, copy, &quiet) : FX_ERR_INVALID;
    }
    bool unblocked = false;
    if (st == FX_OK) {
        st = graph_propagate_shapes(trial, NULL, 0, &quiet);
        Node *again = graph_find(trial, failed);
        unblocked = st == FX_OK || (again && again->shapes_known);
    }
    graph_free(trial);
    diag_free(&quiet);
    return unblocked;
}

/* When the refused input is computed from graph inputs rather than being
 * one, the inputs to freeze (into `chosen`) are those whose values get the
 * refusing node through propagation: each input the node depends on is
 * tried, the smallest first, then all of them together (a Loop's trip count
 * computed from Range's start, limit and delta needs the three). */
static bool inputs_that_unblock(const Graph *g, const Freezer *f, bool *chosen)
{
    Node *failed = NULL;
    for (Node *n = g->root.next; !failed && n != &g->root; n = n->next)
        if (!n->shapes_known)
            failed = n;
    if (!failed)
        return false;
    bool tried[MAX_FROZEN] = {false};
    for (;;) {
        int pick = -1;
        for (int k = 0; k < f->num_inputs; k++)
            if (!f->frozen[k] && !tried[k] && freezable(f->in, k) &&
                depends_on(failed, f->inputs[k]) &&
                (pick < 0 || tensor_numel(f->in->per_set[0][k]) <
                                 tensor_numel(f->in->per_set[0][pick])))
                pick = k;
        if (pick < 0)
            break;
        tried[pick] = true;
        memset(chosen, 0, MAX_FROZEN * sizeof *chosen);
        chosen[pick] = true;
        if (freezing_unblocks(f, chosen, failed->name))
            return true;
    }
    int count = 0;
    for (int k = 0; k < MAX_FROZEN; k++)
        count += chosen[k] = tried[k];
    return count > 1 && freezing_unblocks(f, chosen, failed->name);
}

/* The pipeline's FreezePolicy.  Many backend tests feed shape-like data
 * (Reshape's shape, Slice's starts, Resize's scales, Range's bounds) as graph
 * inputs.  fxcc compiles static shapes, so such an input must be a constant,
 * as FX's concrete_args makes a traced argument one.  The graph starts with
 * every input a runtime input; while shape propagation refuses it because an
 * input must be a compile-time constant, the input the error names (or, when
 * the refused value is computed, the one whose value unblocks the node) is
 * frozen to its value and propagation retried.  Data inputs thus stay
 * runtime inputs, and the outputs are still checked against the reference. */
static bool freeze_needed(Graph *g, const Diag *why, void *user, Diag *d)
{
    Freezer *f = user;
    if (!error_needs_constant(why))
        return false;
    int k = input_named_by_error(f, why);
    if (k >= 0 && !f->frozen[k] && freezable(f->in, k))
        return freeze(g, f, k, d) == FX_OK;
    bool chosen[MAX_FROZEN] = {false};
    if (!inputs_that_unblock(g, f, chosen))
        return false;
    for (k = 0; k < f->num_inputs; k++)
        if (chosen[k] && freeze(g, f, k, d) != FX_OK)
            return false;
    return true;
}

/* The inputs that real models hold as initializers, by op type and input
 * index: weights, biases and normalization statistics.  The frozen-weights
 * tier makes them constants so that the passes that need constant weights
 * (NCHWc layout, weight packing, BatchNorm folding) run on the node tests. */
static const struct {
    const char *op;
    int inputs[4];
} weight_inputs[] = {
    {"Conv", {1, 2, -1}},
    {"ConvTranspose", {1, 2, -1}},
    {"Gemm", {1, 2, -1}},
    {"MatMul", {1, -1}},
    {"BatchNormalization", {1, 2, 3, 4}},
    {"InstanceNormalization", {1, 2, -1}},
    {"LayerNormalization", {1, 2, -1}},
    {"GroupNormalization", {1, 2, -1}},
    {"PRelu", {1, -1}},
    {"RNN", {1, 2, 3, -1}},
    {"LSTM", {1, 2, 3, 7}},
    {"GRU", {1, 2, 3, -1}},
};

/* Marks the graph inputs that feed a weight input; returns how many. */
static int mark_weight_inputs(const Freezer *f, Graph *g, bool *marks)
{
    int marked = 0;
    graph_for_each(g, n) {
        if (n->opcode != FX_OPCODE_CALL_FUNCTION || !n->op)
            continue;
        for (size_t w = 0; w < sizeof weight_inputs / sizeof *weight_inputs; w++) {
            if (strcmp(weight_inputs[w].op, n->op->name) != 0)
                continue;
            for (int i = 0; i < 4 && weight_inputs[w].inputs[i] >= 0; i++) {
                int slot = weight_inputs[w].inputs[i];
                for (int k = 0; slot < n->num_args && k < f->num_inputs; k++)
                    if (n->args[slot] == f->inputs[k] && !marks[k] && freezable(f->in, k)) {
                        marks[k] = true;
                        marked++;
                    }
            }
        }
    }
    return marked;
}

static int count_ops(Graph *g, const char *op)
{
    int count = 0;
    graph_for_each(g, n) count += n->op && strcmp(n->op->name, op) == 0;
    return count;
}

/* Compiled mode, step 1: the test's graph (inputs frozen as for the
 * interpreter) into WORK/NAME/ with --emit-main. */
static Result compile_test(const Options *o, const Graph *g, const char *name, Diag *d)
{
    char out[4300];
    snprintf(out, sizeof out, "%s/%s", o->work, name);
    /* Every runtime source: the batched build links all tests against the
     * first one's copy (write_makefile). */
    CgOptions co = {.name = "model", .target = o->target, .emit_main = true, .source = name,
                    .runtime_full = true};
    char stale[4400];
    snprintf(stale, sizeof stale, "%s/main", out);
    unlink(stale); /* make would keep a main built from an earlier compile */
    FxStatus st = cg_compile(g, &co, out, NULL, d);
    if (st == FX_OK)
        return RESULT_PASS;
    return st == FX_ERR_UNSUPPORTED ? RESULT_UNSUPPORTED : RESULT_FAIL;
}

/* One test in one tier.  Returns false when the tier has nothing to add for
 * this test (the frozen-weights tier of a test without weight inputs). */
static bool run_test(const Options *o, const char *name, Tier tier, TierRun *run)
{
    char dir[4096], model[4200];
    snprintf(dir, sizeof dir, "%s/%s", o->data_dir, name);
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    snprintf(run->work_name, sizeof run->work_name, "%s%s", name, tier_suffixes[tier]);
    Diag d;
    diag_init(&d);
    TestInputs in;
    bool applies = true;
    run->result = RESULT_FAIL;
    char **sets;
    int num_sets = list_dir(dir, "test_data_set_", &sets);
    FxStatus st = test_inputs_read(dir, sets, num_sets, &in, &d);
    Freezer freezer = {.model = model, .in = &in, .tier = tier, .frozen = run->frozen};
    PipelineOptions po = {.model = model, .freeze_chosen = freeze_chosen,
                          .freeze_more = freeze_needed, .freeze_user = &freezer,
                          .opt_level = o->opt_level,
                          .portable = o->compiled && o->target == FX_TARGET_PORTABLE,
                          .for_codegen = o->compiled};
    PipelineResult pr = {0};
    if (st == FX_OK)
        st = pipeline_load(&po, &pr, &d);
    Graph *g = pr.graph;
    run->num_inputs = freezer.num_inputs;
    run->conv_nodes = freezer.conv_nodes;
    /* the runtime tier reports a model or data set that does not load */
    applies = tier != TIER_WEIGHTS || freezer.weights_marked > 0;
    if (!applies)
        goto done;
    if (st != FX_OK && pr.failed == PIPELINE_PASSES) {
        run->result = RESULT_FAIL; /* a graph the interpreter runs must survive the passes */
    } else if (st != FX_OK) {
        run->result = st == FX_ERR_UNSUPPORTED ? RESULT_UNSUPPORTED : RESULT_FAIL;
    } else {
        run->nchwc_nodes = count_ops(g, "ConvNCHWc");
        double rtol, atol;
        tolerance_for(name, &rtol, &atol);
        run->result = num_sets ? RESULT_PASS : RESULT_FAIL;
        if (!num_sets)
            snprintf(run->why, sizeof run->why, "no test data sets");
        for (int s = 0; s < num_sets && run->result == RESULT_PASS; s++) {
            char set_dir[8300];
            snprintf(set_dir, sizeof set_dir, "%s/%s", dir, sets[s]);
            run->result = run_data_set(g, set_dir, run->frozen, rtol, atol, run->why,
                                       sizeof run->why, &d);
        }
        if (run->result == RESULT_PASS && o->compiled)
            run->result = compile_test(o, g, run->work_name, &d);
    }
    if (d.count && !run->why[0]) {
        const DiagEntry *e = &d.entries[0];
        snprintf(run->why, sizeof run->why, "%s%s%s", e->node ? e->node : "",
                 e->node ? ": " : "", e->message ? e->message : "");
    }
done:
    test_inputs_free(&in);
    free_list(sets, num_sets);
    diag_free(&d);
    graph_free(g);
    return applies;
}

static bool selected(const Options *o, const char *name)
{
    if (o->num_patterns == 0)
        return true;
    for (int i = 0; i < o->num_patterns; i++)
        if (fnmatch(o->patterns[i], name, 0) == 0)
            return true;
    return false;
}

/* Whether path's bytes equal other's (both readable). */
static bool same_file(const char *path, const char *other)
{
    FILE *a = fopen(path, "rb"), *b = fopen(other, "rb");
    bool same = a && b;
    while (same) {
        char x[4096], y[4096];
        size_t nx = fread(x, 1, sizeof x, a), ny = fread(y, 1, sizeof y, b);
        same = nx == ny && memcmp(x, y, nx) == 0;
        if (nx < sizeof x)
            break;
    }
    if (a)
        fclose(a);
    if (b)
        fclose(b);
    return same;
}

/* With --compiled-elsewhere DIR, a test whose model.onnx is byte for byte
 * DIR's test of the same name is compiled by that suite's run: the compiled
 * tiers leave it out, so two suites that share tests build them once. */
static bool compiled_elsewhere(const Options *o, const char *name)
{
    if (!o->compiled || !o->compiled_elsewhere)
        return false;
    char mine[4300], theirs[4300];
    snprintf(mine, sizeof mine, "%s/%s/model.onnx", o->data_dir, name);
    snprintf(theirs, sizeof theirs, "%s/%s/model.onnx", o->compiled_elsewhere, name);
    return same_file(mine, theirs);
}

static char **read_lines(const char *path, int *count)
{
    FILE *f = fopen(path, "r");
    *count = 0;
    if (!f)
        return NULL;
    char line[512];
    char **lines = NULL;
    int cap = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#')
            continue;
        if (*count == cap) {
            cap = cap ? cap * 2 : 256;
            char **grown = realloc(lines, (size_t)cap * sizeof *lines);
            if (!grown)
                break;
            lines = grown;
        }
        lines[(*count)++] = strdup(line);
    }
    fclose(f);
    return lines;
}

/* Compiled mode, step 2: one make run builds the runtime once and every
 * test's main against it, so the whole suite, every tier, is a single
 * batched build. */
static bool build_compiled(const Options *o, TierRun (*runs)[NUM_TIERS], int num_tests)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/Makefile", o->work);
    const char *first = NULL;
    for (int t = 0; t < num_tests && !first; t++)
        if (runs[t][TIER_RUNTIME].ran && runs[t][TIER_RUNTIME].result == RESULT_PASS)
            first = runs[t][TIER_RUNTIME].work_name;
    if (!first)
        return true;
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    bool host = o->target == FX_TARGET_HOST;
    fprintf(f, "# generated by fxcc_conformance --compiled\n");
    fprintf(f, "CC = %s\nCFLAGS = %s -Irt%s\nLIBS = %s -lm\n", o->cc ? o->cc : "cc",
            o->cflags ? o->cflags : "-std=c99 -O1 -Wall -Wextra -Werror -pedantic",
            host ? " -DFXRT_USE_CBLAS " FXCC_OPENBLAS_CFLAGS : "", host ? FXCC_OPENBLAS_LIBS : "");
    fprintf(f, "RT_SRCS = $(wildcard %s/fxrt/*.c)\n", first);
    fprintf(f, "RT_OBJS = $(patsubst %s/fxrt/%%.c,rt/%%.o,$(RT_SRCS))\n", first);
    fprintf(f, "MAINS =");
    for (int t = 0; t < num_tests; t++)
        for (int tier = 0; tier < NUM_TIERS; tier++)
            if (runs[t][tier].ran && runs[t][tier].result == RESULT_PASS)
                fprintf(f, " %s/main", runs[t][tier].work_name);
    fprintf(f, "\nall: $(MAINS)\n");
    /* the headers are copied once, before any object: parallel copies race;
     * again when the generated ones are newer (a work folder kept from an
     * earlier run must not hold stale headers) */
    fprintf(f, "rt/.headers: $(wildcard %s/fxrt/*.h)\n\t@mkdir -p rt && cp %s/fxrt/*.h rt/ && "
               "touch $@\n", first, first);
    fprintf(f, "rt/%%.o: %s/fxrt/%%.c rt/.headers\n\t$(CC) $(CFLAGS) -c $< -o $@\n", first);
    fprintf(f, "rt/libfxrt.a: $(RT_OBJS)\n\tar rcs $@ $^\n");
    fprintf(f, "rt/fxio.o: %s/fxio.c\n\t@mkdir -p rt && $(CC) $(CFLAGS) -c $< -o $@\n", first);
    fprintf(f, "%%/main: rt/libfxrt.a rt/fxio.o\n\t@$(CC) $(CFLAGS) -I$* -I%s $*/model*.c "
               "$*/main.c rt/fxio.o rt/libfxrt.a $(LIBS) -o $@ > $*/build.log 2>&1 "
               "|| (rm -f $@; false)\n", first);
    fclose(f);
    char jobs[32];
    snprintf(jobs, sizeof jobs, "-j%d", o->jobs > 0 ? o->jobs : 2);
    char *argv[] = {"make", "-s", "-k", jobs, "-C", (char *)o->work, NULL};
    snprintf(path, sizeof path, "%s/make.log", o->work);
    unlink(path);
    cg_spawn(argv, path, NULL);
    return true;
}

/* Compiled mode, step 3: each data set through the built main. */
static Result run_compiled(const Options *o, const char *name, const TierRun *run, char *why,
                           size_t why_cap)
{
    char dir[4300], exe_dir[4300], log[4400];
    snprintf(dir, sizeof dir, "%s/%s", o->data_dir, name);
    snprintf(exe_dir, sizeof exe_dir, "%s/%s", o->work, run->work_name);
    snprintf(log, sizeof log, "%s/main", exe_dir);
    if (access(log, X_OK) != 0) {
        snprintf(log, sizeof log, "%s/build.log", exe_dir);
        FILE *f = fopen(log, "r");
        char line[400] = "";
        if (f) {
            while (fgets(line, sizeof line, f) && !strstr(line, "error"))
                ;
            fclose(f);
        }
        line[strcspn(line, "\n")] = '\0';
        snprintf(why, why_cap, "compiled code did not build: %s", line);
        return RESULT_FAIL;
    }
    char **sets;
    int num_sets = list_dir(dir, "test_data_set_", &sets);
    double rtol, atol;
    tolerance_for(name, &rtol, &atol);
    Result r = RESULT_PASS;
    Diag d;
    diag_init(&d);
    for (int s = 0; s < num_sets && r == RESULT_PASS; s++) {
        char set_dir[8300], out_dir[8400];
        snprintf(set_dir, sizeof set_dir, "%s/%s", dir, sets[s]);
        snprintf(out_dir, sizeof out_dir, "%s/out_%d", exe_dir, s);
        mkdir(out_dir, 0777);
        char *inputs[MAX_FROZEN];
        int n = 0;
        for (int k = 0; k < MAX_FROZEN; k++) {
            char p[8400];
            snprintf(p, sizeof p, "%s/input_%d.pb", set_dir, k);
            if (access(p, R_OK) != 0)
                break;
            if (!run->frozen[k])
                inputs[n++] = strdup(p);
        }
        FxStatus st = cg_run_main(exe_dir, (const char *const *)inputs, n, out_dir, &d);
        for (int k = 0; k < n; k++)
            free(inputs[k]);
        if (st != FX_OK) {
            snprintf(why, why_cap, "compiled run failed: %s",
                     d.count > 1 ? d.entries[1].message : "");
            r = RESULT_FAIL;
            break;
        }
        Tensor **expected = NULL;
        int num_out = read_numbered(set_dir, "output", &expected, &d, &st);
        for (int k = 0; k < num_out && r == RESULT_PASS; k++) {
            char p[9000];
            snprintf(p, sizeof p, "%s/output_%d.npy", out_dir, k);
            Tensor *got = NULL;
            if (tensor_file_read(p, &got, &d) != FX_OK) {
                snprintf(why, why_cap, "compiled run wrote no %.900s", p);
                r = RESULT_FAIL;
                break;
            }
            CompareResult c = tensor_compare(got, expected[k], rtol, atol);
            if (!c.ok) {
                snprintf(why, why_cap, "compiled output %d: %lld mismatches, max abs %.3g", k,
                         (long long)c.mismatches, c.max_abs);
                r = RESULT_FAIL;
            }
            tensor_free(got);
        }
        free_tensors(expected, num_out);
    }
    free_list(sets, num_sets);
    diag_free(&d);
    return r;
}

/* Prints every failure (every result with --verbose or patterns), the
 * totals of each tier and the regressions against the expected list, whose
 * tests must pass in every tier they run in; returns the regressions. */
static int report(const Options *o, char **tests, int num_tests, TierRun (*runs)[NUM_TIERS],
                  int num_tiers, char **expected, int num_expected)
{
    for (int t = 0; t < num_tests; t++)
        for (int tier = 0; tier < num_tiers; tier++) {
            const TierRun *run = &runs[t][tier];
            if (!run->ran || !(o->verbose || o->num_patterns || run->result == RESULT_FAIL))
                continue;
            printf("%-11s %s%s%s", result_names[run->result], run->work_name,
                   run->why[0] ? "  " : "", run->why);
            const char *sep = "  [frozen inputs:";
            for (int k = 0; k < run->num_inputs; k++)
                if (run->frozen[k]) {
                    printf("%s %d", sep, k);
                    sep = "";
                }
            printf("%s\n", sep[0] ? "" : "]");
        }
    int regressions = 0;
    for (int e = 0; e < num_expected; e++) {
        int t = 0;
        while (t < num_tests && strcmp(tests[t], expected[e]) != 0)
            t++;
        for (int tier = 0; t < num_tests && tier < num_tiers; tier++) {
            const TierRun *run = &runs[t][tier];
            if (run->ran && run->result != RESULT_PASS) {
                printf("REGRESSION  %s (expected to pass, got %s)\n", run->work_name,
                       result_names[run->result]);
                regressions++;
            }
        }
    }
    if (o->compiled)
        printf("compiled for the %s target in %s\n",
               o->target == FX_TARGET_HOST ? "host" : "portable", o->work);
    for (int tier = 0; tier < num_tiers; tier++) {
        int totals[3] = {0, 0, 0}, some_frozen = 0, all_frozen = 0;
        for (int t = 0; t < num_tests; t++) {
            const TierRun *run = &runs[t][tier];
            if (!run->ran)
                continue;
            totals[run->result]++;
            int frozen = 0;
            for (int k = 0; k < run->num_inputs; k++)
                frozen += run->frozen[k];
            if (run->result == RESULT_PASS && frozen) {
                some_frozen++;
                all_frozen += frozen == run->num_inputs;
            }
        }
        printf("conformance totals (%s): passed %d / failed %d / unsupported %d (of %d tests); "
               "%d passing tests have a frozen input, %d all inputs frozen\n",
               tier_names[tier], totals[RESULT_PASS], totals[RESULT_FAIL],
               totals[RESULT_UNSUPPORTED], totals[0] + totals[1] + totals[2], some_frozen,
               all_frozen);
    }
    if (regressions)
        printf("%d regression(s) against %s\n", regressions, o->expected);
    return regressions;
}

/* A refusal or failure without what names its place: a node's "NAME (OP): "
 * becomes "OP: ", a tensor's "tensor 'NAME': " becomes "tensor: ", so that
 * the tests refused for one reason count together. */
static void reason_key(const char *why, char *key, size_t cap)
{
    const char *open = strstr(why, " ("), *close = strstr(why, "): ");
    if (open && close && open < close && !memchr(why, ' ', (size_t)(open - why)))
        snprintf(key, cap, "%.*s:%s", (int)(close - open - 2), open + 2, close + 2);
    else if (strncmp(why, "tensor '", 8) == 0 && (close = strstr(why, "': ")))
        snprintf(key, cap, "tensor:%s", close + 2);
    else
        snprintf(key, cap, "%s", why[0] ? why : "(no reason given)");
}

typedef struct ReasonCount {
    char key[300];
    int count;
    Result result;
} ReasonCount;

static int by_key(const void *a, const void *b)
{
    const ReasonCount *x = a, *y = b;
    return x->result != y->result ? (int)x->result - (int)y->result : strcmp(x->key, y->key);
}

static int by_count(const void *a, const void *b)
{
    const ReasonCount *x = a, *y = b;
    return x->count != y->count ? y->count - x->count : by_key(a, b);
}

/* Every reason a test of the runtime-inputs tier did not pass, with how many
 * tests it stopped, most frequent first: the list of what is left to do. */
static void print_reasons(TierRun (*runs)[NUM_TIERS], int num_tests)
{
    ReasonCount *reasons = num_tests > 0 ? calloc((size_t)num_tests, sizeof *reasons) : NULL;
    if (!reasons)
        return;
    int n = 0;
    for (int t = 0; t < num_tests; t++) {
        const TierRun *run = &runs[t][TIER_RUNTIME];
        if (!run->ran || run->result == RESULT_PASS)
            continue;
        reason_key(run->why, reasons[n].key, sizeof reasons[n].key);
        reasons[n].result = run->result;
        reasons[n++].count = 1;
    }
    qsort(reasons, (size_t)n, sizeof *reasons, by_key);
    int distinct = 0;
    for (int r = 0; r < n; r++) {
        if (distinct && by_key(&reasons[distinct - 1], &reasons[r]) == 0)
            reasons[distinct - 1].count++;
        else
            reasons[distinct++] = reasons[r];
    }
    qsort(reasons, (size_t)distinct, sizeof *reasons, by_count);
    if (distinct)
        printf("reasons the tests with runtime inputs did not pass (tests, result, reason):\n");
    for (int r = 0; r < distinct; r++)
        printf("%6d  %-11s %s\n", reasons[r].count, result_names[reasons[r].result],
               reasons[r].key);
    free(reasons);
}

/* The frozen-weights tier exists to reach the NCHWc kernels: prints how
 * many of its convolution tests did, and returns 1 if none did. */
static int nchwc_missed(TierRun (*runs)[NUM_TIERS], int num_tests)
{
    int conv_tests = 0, reached = 0, nodes = 0;
    for (int t = 0; t < num_tests; t++) {
        const TierRun *run = &runs[t][TIER_WEIGHTS];
        if (!run->ran || !run->conv_nodes)
            continue;
        conv_tests++;
        reached += run->nchwc_nodes > 0;
        nodes += run->nchwc_nodes;
    }
    printf("frozen weights: %d of %d convolution tests reached ConvNCHWc (%d nodes)\n", reached,
           conv_tests, nodes);
    if (conv_tests && !reached) {
        printf("FAIL: no convolution test reached ConvNCHWc; the nchwc-layout pass is not "
               "tested\n");
        return 1;
    }
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fxcc_conformance [--data DIR] [--expected FILE] [--write-expected FILE]\n"
            "                        [--compiled host|portable] [--work DIR] [--cflags FLAGS]\n"
            "                        [--cc CC] [--jobs N] [--opt 0|1|2] [--weights-tier]\n"
            "                        [--compiled-elsewhere DIR]\n"
            "                        [--verbose] [PATTERN...]\n"
            "Runs the ONNX backend node tests (default %s) through the interpreter.\n"
            "--opt N first runs the optimization passes of -ON on every test graph.\n"
            "PATTERNs are shell globs on test names, e.g. 'test_conv_*'.\n"
            "--compiled also compiles each passing test with fxcc compile --emit-main, builds\n"
            "them all in one batch (make -jN in WORK) and checks the compiled outputs.\n"
            "Only the inputs shape inference needs as constants are frozen; the others are\n"
            "runtime inputs.  --weights-tier also runs every test whose weights, biases or\n"
            "normalization statistics are graph inputs with those frozen, as initializers\n"
            "are in real models (tier 'frozen weights', work folder NAME.weights); with\n"
            "--opt 2 it fails if no convolution test reaches ConvNCHWc.\n"
            "--compiled-elsewhere DIR leaves out of the compiled run every test whose\n"
            "model.onnx is the same file as DIR's test of that name.\n",
            DEFAULT_DATA_DIR);
}

int main(int argc, char **argv)
{
    Options o = {.data_dir = DEFAULT_DATA_DIR};
    o.patterns = calloc((size_t)argc, sizeof *o.patterns);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--data") == 0 && i + 1 < argc)
            o.data_dir = argv[++i];
        else if (strcmp(argv[i], "--expected") == 0 && i + 1 < argc)
            o.expected = argv[++i];
        else if (strcmp(argv[i], "--write-expected") == 0 && i + 1 < argc)
            o.write_expected = argv[++i];
        else if (strcmp(argv[i], "--compiled-elsewhere") == 0 && i + 1 < argc)
            o.compiled_elsewhere = argv[++i];
        else if (strcmp(argv[i], "--compiled") == 0 && i + 1 < argc) {
            o.compiled = true;
            const char *t = argv[++i];
            if (strcmp(t, "host") == 0)
                o.target = FX_TARGET_HOST;
            else if (strcmp(t, "portable") == 0)
                o.target = FX_TARGET_PORTABLE;
            else {
                usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--work") == 0 && i + 1 < argc)
            o.work = argv[++i];
        else if (strcmp(argv[i], "--cflags") == 0 && i + 1 < argc)
            o.cflags = argv[++i];
        else if (strcmp(argv[i], "--cc") == 0 && i + 1 < argc)
            o.cc = argv[++i];
        else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
            o.jobs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--opt") == 0 && i + 1 < argc)
            o.opt_level = atoi(argv[++i]);
        else if (strcmp(argv[i], "--weights-tier") == 0)
            o.weights_tier = true;
        else if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0)
            o.verbose = true;
        else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-') {
            usage(stderr);
            return 2;
        } else
            o.patterns[o.num_patterns++] = argv[i];
    }
    char **tests;
    int num_tests = list_dir(o.data_dir, "test_", &tests);
    if (!num_tests) {
        fprintf(stderr, "fxcc_conformance: no tests found in %s\n", o.data_dir);
        return 2;
    }
    int num_expected = 0;
    char **expected = o.expected ? read_lines(o.expected, &num_expected) : NULL;
    if (o.expected && !expected) {
        fprintf(stderr, "fxcc_conformance: cannot read %s\n", o.expected);
        return 2;
    }
    char work_buf[64];
    if (o.compiled && !o.work) {
        snprintf(work_buf, sizeof work_buf, "/tmp/fxcc-conformance-XXXXXX");
        o.work = mkdtemp(work_buf);
    }
    if (o.compiled && (!o.work || (mkdir(o.work, 0777) != 0 && errno != EEXIST))) {
        fprintf(stderr, "fxcc_conformance: cannot create the work folder\n");
        return 2;
    }
    TierRun(*runs)[NUM_TIERS] = calloc((size_t)num_tests, sizeof *runs);
    if (!runs) {
        fprintf(stderr, "fxcc_conformance: out of memory\n");
        return 2;
    }
    int num_tiers = o.weights_tier ? NUM_TIERS : 1;
    int left_out = 0;
    for (int t = 0; t < num_tests; t++) {
        bool elsewhere = selected(&o, tests[t]) && compiled_elsewhere(&o, tests[t]);
        left_out += elsewhere;
        for (int tier = 0; tier < num_tiers && selected(&o, tests[t]) && !elsewhere; tier++)
            runs[t][tier].ran = run_test(&o, tests[t], (Tier)tier, &runs[t][tier]);
    }
    if (left_out)
        printf("%d tests left out: their models are those of %s, compiled there\n", left_out,
               o.compiled_elsewhere);
    if (o.compiled) {
        build_compiled(&o, runs, num_tests);
        for (int t = 0; t < num_tests; t++)
            for (int tier = 0; tier < num_tiers; tier++) {
                TierRun *run = &runs[t][tier];
                if (run->ran && run->result == RESULT_PASS)
                    run->result = run_compiled(&o, tests[t], run, run->why, sizeof run->why);
            }
    }
    print_reasons(runs, num_tests);
    int regressions = report(&o, tests, num_tests, runs, num_tiers, expected, num_expected);
    if (o.write_expected) {
        FILE *f = fopen(o.write_expected, "w");
        if (f) {
            fprintf(f, "# ONNX backend node tests that pass in the interpreter with their data\n"
                       "# inputs as runtime inputs.\n"
                       "# Regenerate: fxcc_conformance --write-expected FILE\n");
            for (int t = 0; t < num_tests; t++)
                if (runs[t][TIER_RUNTIME].ran && runs[t][TIER_RUNTIME].result == RESULT_PASS)
                    fprintf(f, "%s\n", tests[t]);
            fclose(f);
        }
    }
    int missed_nchwc = o.weights_tier && o.opt_level >= 2 ? nchwc_missed(runs, num_tests) : 0;
    free_list(tests, num_tests);
    free_list(expected, num_expected);
    free(runs);
    free(o.patterns);
    return regressions || missed_nchwc ? 1 : 0;
}
