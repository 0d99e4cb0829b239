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
 * With --expected FILE, the run fails when a test listed there does not pass
 * (a regression); --write-expected FILE records the passing tests.
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
#include "opt/opt.h"

#define DEFAULT_DATA_DIR "/usr/share/libonnx-testdata/data/node"

enum { MAX_FROZEN = 64 }; /* inputs considered for freezing */

typedef enum { RESULT_PASS, RESULT_FAIL, RESULT_UNSUPPORTED } Result;
static const char *const result_names[] = {"PASS", "FAIL", "UNSUPPORTED"};

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
    bool verbose;
    int opt_level; /* --opt N: the passes of -ON run on every test graph first */
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

/* Many backend tests feed shape-like data (Reshape's shape, Slice's starts,
 * Resize's scales, Range's bounds) as graph inputs.  fxcc compiles static
 * shapes, so such an input must be a constant, as FX's concrete_args makes a
 * traced argument one.  After shape propagation refused the graph, the
 * failing node is the first without shapes; of the small placeholders it
 * depends on that hold the same value in every data set, the smallest is
 * frozen to that value and propagation is retried, until it succeeds or
 * nothing more can be frozen.
 * The outputs are still checked against the reference.  Returns the status
 * of the last propagation. */
enum { FREEZE_MAX_ELEMS = 2 * FX_MAX_RANK };

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

static FxStatus propagate_freezing_inputs(Graph *g, const char *dir, char **sets, int num_sets,
                                          bool *frozen, Diag *d)
{
    FxStatus st = graph_propagate_shapes(g, NULL, 0, d);
    if (st != FX_ERR_UNSUPPORTED || num_sets == 0)
        return st;
    Tensor ***per_set = calloc((size_t)num_sets, sizeof *per_set);
    int *counts = calloc((size_t)num_sets, sizeof *counts);
    Node **placeholders = NULL;
    if (!per_set || !counts)
        goto done;
    for (int s = 0; s < num_sets; s++) {
        char set_dir[8300];
        FxStatus rst;
        snprintf(set_dir, sizeof set_dir, "%s/%s", dir, sets[s]);
        counts[s] = read_numbered(set_dir, "input", &per_set[s], d, &rst);
        if (rst != FX_OK || counts[s] != counts[0])
            goto done;
    }
    int num_inputs = counts[0] < MAX_FROZEN ? counts[0] : MAX_FROZEN;
    placeholders = calloc((size_t)num_inputs + 1, sizeof *placeholders);
    if (!placeholders)
        goto done;
    for (int k = 0; k < num_inputs; k++)
        placeholders[k] = graph_placeholder(g, k);
    while (st == FX_ERR_UNSUPPORTED) {
        Node *failed = NULL;
        graph_for_each(g, n) if (!failed && !n->shapes_known) failed = n;
        /* One input per round, the smallest first: shape-like inputs are
         * tiny, data is not, so the data input stays a real input. */
        int pick = -1;
        for (int k = 0; failed && k < num_inputs; k++) {
            const Tensor *v = per_set[0][k];
            if (frozen[k] || !placeholders[k] || !depends_on(failed, placeholders[k]) ||
                tensor_numel(v) > FREEZE_MAX_ELEMS)
                continue;
            bool same = true;
            for (int s = 1; s < num_sets && same; s++)
                same = same_tensor(v, per_set[s][k]);
            if (same && (pick < 0 || tensor_numel(v) < tensor_numel(per_set[0][pick])))
                pick = k;
        }
        if (pick < 0)
            break;
        Tensor *copy = tensor_clone(per_set[0][pick], d);
        if (!copy || graph_freeze_input(g, placeholders[pick], copy, d) != FX_OK)
            break;
        frozen[pick] = true;
        diag_clear(d);
        st = graph_propagate_shapes(g, NULL, 0, d);
    }
done:
    free(placeholders);
    for (int s = 0; per_set && s < num_sets; s++)
        free_tensors(per_set[s], counts[s]);
    free(per_set);
    free(counts);
    return st;
}

/* Compiled mode, step 1: the test's graph (inputs frozen as for the
 * interpreter) into WORK/NAME/ with --emit-main. */
static Result compile_test(const Options *o, const Graph *g, const char *name, char *why,
                           size_t why_cap, Diag *d)
{
    char out[4300];
    snprintf(out, sizeof out, "%s/%s", o->work, name);
    CgOptions co = {.name = "model", .target = o->target, .emit_main = true, .source = name};
    char stale[4400];
    snprintf(stale, sizeof stale, "%s/main", out);
    unlink(stale); /* make would keep a main built from an earlier compile */
    FxStatus st = cg_compile(g, &co, out, NULL, d);
    if (st == FX_OK)
        return RESULT_PASS;
    why[0] = '\0';
    (void)why_cap;
    return st == FX_ERR_UNSUPPORTED ? RESULT_UNSUPPORTED : RESULT_FAIL;
}

static Result run_test(const Options *o, const char *name, bool *frozen_out, char *why,
                       size_t why_cap)
{
    char dir[4096], model[4200];
    snprintf(dir, sizeof dir, "%s/%s", o->data_dir, name);
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    Diag d;
    diag_init(&d);
    Graph *g = NULL;
    Result r = RESULT_FAIL;
    OnnxLoadOptions lo = {0};
    char **sets;
    int num_sets = list_dir(dir, "test_data_set_", &sets);
    bool frozen[MAX_FROZEN] = {false};
    FxStatus st = onnx_load(model, &lo, &g, &d);
    if (st == FX_OK)
        st = propagate_freezing_inputs(g, dir, sets, num_sets, frozen, &d);
    if (st == FX_OK)
        st = graph_lint(g, true, &d);
    if (st == FX_OK && o->opt_level > 0 && opt_run_level(g, o->opt_level, NULL, &d) != FX_OK) {
        r = RESULT_FAIL; /* a graph the interpreter runs must survive the passes */
    } else if (st != FX_OK) {
        r = st == FX_ERR_UNSUPPORTED ? RESULT_UNSUPPORTED : RESULT_FAIL;
    } else {
        double rtol, atol;
        tolerance_for(name, &rtol, &atol);
        r = num_sets ? RESULT_PASS : RESULT_FAIL;
        if (!num_sets)
            snprintf(why, why_cap, "no test data sets");
        for (int s = 0; s < num_sets && r == RESULT_PASS; s++) {
            char set_dir[8300];
            snprintf(set_dir, sizeof set_dir, "%s/%s", dir, sets[s]);
            r = run_data_set(g, set_dir, frozen, rtol, atol, why, why_cap, &d);
        }
        if (r == RESULT_PASS && o->compiled)
            r = compile_test(o, g, name, why, why_cap, &d);
    }
    memcpy(frozen_out, frozen, sizeof frozen);
    free_list(sets, num_sets);
    if (d.count && !why[0]) {
        const DiagEntry *e = &d.entries[0];
        snprintf(why, why_cap, "%s%s%s", e->node ? e->node : "", e->node ? ": " : "",
                 e->message ? e->message : "");
    }
    diag_free(&d);
    graph_free(g);
    return r;
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
 * test's main against it, so the whole suite is a single batched build. */
static bool build_compiled(const Options *o, char **tests, const Result *results,
                           const bool *ran, int num_tests)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/Makefile", o->work);
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    const char *first = NULL;
    for (int t = 0; t < num_tests && !first; t++)
        if (ran[t] && results[t] == RESULT_PASS)
            first = tests[t];
    if (!first) {
        fclose(f);
        return true;
    }
    bool host = o->target == FX_TARGET_HOST;
    fprintf(f, "# generated by fxcc_conformance --compiled\n");
    fprintf(f, "CC = %s\nCFLAGS = %s -Irt%s\nLIBS = %s -lm\n", o->cc ? o->cc : "cc",
            o->cflags ? o->cflags : "-std=c99 -O1 -Wall -Wextra -Werror -pedantic",
            host ? " -DFXRT_USE_CBLAS " FXCC_OPENBLAS_CFLAGS : "", host ? FXCC_OPENBLAS_LIBS : "");
    fprintf(f, "RT_SRCS = $(wildcard %s/fxrt/*.c)\n", first);
    fprintf(f, "RT_OBJS = $(patsubst %s/fxrt/%%.c,rt/%%.o,$(RT_SRCS))\n", first);
    fprintf(f, "MAINS =");
    for (int t = 0; t < num_tests; t++)
        if (ran[t] && results[t] == RESULT_PASS)
            fprintf(f, " %s/main", tests[t]);
    fprintf(f, "\nall: $(MAINS)\n");
    /* the headers are copied once, before any object: parallel copies race */
    fprintf(f, "rt/.headers:\n\t@mkdir -p rt && cp %s/fxrt/*.h rt/ && touch $@\n", first);
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
static Result run_compiled(const Options *o, const char *name, const bool *frozen, char *why,
                           size_t why_cap)
{
    char dir[4300], exe_dir[4300], log[4400];
    snprintf(dir, sizeof dir, "%s/%s", o->data_dir, name);
    snprintf(exe_dir, sizeof exe_dir, "%s/%s", o->work, name);
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
            if (!frozen[k])
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

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fxcc_conformance [--data DIR] [--expected FILE] [--write-expected FILE]\n"
            "                        [--compiled host|portable] [--work DIR] [--cflags FLAGS]\n"
            "                        [--cc CC] [--jobs N] [--opt 0|1|2] [--verbose] [PATTERN...]\n"
            "Runs the ONNX backend node tests (default %s) through the interpreter.\n"
            "--opt N first runs the optimization passes of -ON on every test graph.\n"
            "PATTERNs are shell globs on test names, e.g. 'test_conv_*'.\n"
            "--compiled also compiles each passing test with fxcc compile --emit-main, builds\n"
            "them all in one batch (make -jN in WORK) and checks the compiled outputs.\n",
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
    Result *results = calloc((size_t)num_tests, sizeof *results);
    bool *ran = calloc((size_t)num_tests, sizeof *ran);
    bool(*frozen)[MAX_FROZEN] = calloc((size_t)num_tests, sizeof *frozen);
    char(*whys)[1024] = calloc((size_t)num_tests, sizeof *whys);
    int totals[3] = {0, 0, 0};
    for (int t = 0; t < num_tests; t++) {
        if (!selected(&o, tests[t]))
            continue;
        results[t] = run_test(&o, tests[t], frozen[t], whys[t], sizeof whys[t]);
        ran[t] = true;
    }
    if (o.compiled) {
        build_compiled(&o, tests, results, ran, num_tests);
        for (int t = 0; t < num_tests; t++)
            if (ran[t] && results[t] == RESULT_PASS)
                results[t] = run_compiled(&o, tests[t], frozen[t], whys[t], sizeof whys[t]);
    }
    for (int t = 0; t < num_tests; t++) {
        if (!ran[t])
            continue;
        totals[results[t]]++;
        if (o.verbose || o.num_patterns || results[t] == RESULT_FAIL)
            printf("%-11s %s%s%s\n", result_names[results[t]], tests[t], whys[t][0] ? "  " : "",
                   whys[t]);
    }
    int regressions = 0;
    for (int e = 0; e < num_expected; e++) {
        int t = 0;
        while (t < num_tests && strcmp(tests[t], expected[e]) != 0)
            t++;
        if (t == num_tests || !ran[t])
            continue;
        if (results[t] != RESULT_PASS) {
            printf("REGRESSION  %s (expected to pass, got %s)\n", tests[t],
                   result_names[results[t]]);
            regressions++;
        }
    }
    if (o.write_expected) {
        FILE *f = fopen(o.write_expected, "w");
        if (f) {
            fprintf(f, "# ONNX backend node tests that pass in the interpreter.\n"
                       "# Regenerate: fxcc_conformance --write-expected FILE\n");
            for (int t = 0; t < num_tests; t++)
                if (ran[t] && results[t] == RESULT_PASS)
                    fprintf(f, "%s\n", tests[t]);
            fclose(f);
        }
    }
    if (o.compiled)
        printf("compiled for the %s target in %s\n",
               o.target == FX_TARGET_HOST ? "host" : "portable", o.work);
    printf("conformance totals: passed %d / failed %d / unsupported %d (of %d tests)\n",
           totals[RESULT_PASS], totals[RESULT_FAIL], totals[RESULT_UNSUPPORTED],
           totals[0] + totals[1] + totals[2]);
    if (regressions)
        printf("%d regression(s) against %s\n", regressions, o.expected);
    free_list(tests, num_tests);
    free_list(expected, num_expected);
    free(results);
    free(ran);
    free(frozen);
    free(whys);
    free(o.patterns);
    return regressions ? 1 : 0;
}
