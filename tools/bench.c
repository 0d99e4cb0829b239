/*
 * bench.c - `fxcc bench MODEL [INPUT...]`: how fast is the generated C next
 * to fxcc's interpreter, ONNX Runtime and PyTorch, on the same inputs and
 * one thread, and do they all give the same answer?
 *
 * The steps, in order:
 *   1. load the model (the usual flags; -O2 unless told otherwise) and its
 *      unoptimized form; read the inputs, which must have the exact type of
 *      the model's inputs, or make them from a fixed seed; write them as
 *      .npy into the work folder (a temporary one, or --keep DIR);
 *   2. compile to DIR/c with a main, build it (-O3, as the generated
 *      CMakeLists.txt's Release build), run it with --repeat N: its outputs
 *      and the median it prints;
 *   3. run bench_reference.py (embedded in this binary, written into DIR)
 *      with --python, $FXCC_PYTHON or python3: ONNX Runtime and PyTorch
 *      timed there, reported in DIR/ref/result.txt (key=value lines, parsed
 *      strictly here) and their outputs as .npy;
 *   4. run the interpreter on the unoptimized graph in this process: its
 *      outputs and the median of N runs;
 *   5. check every backend's outputs against the reference, ONNX Runtime's
 *      when it ran, else the interpreter's: max |y - ref| must stay within
 *      rtol * max |ref| (per output).  A backend that disagrees is WRONG, its
 *      time is not shown and the command exits 1;
 *   6. print the header and the table (ms, ratio to the C, GFLOP/s from the
 *      unoptimized graph's MACs, max abs difference) and write --json FILE.
 *
 * A missing Python, onnxruntime or torch is a row saying why, not a failure:
 * they are points of comparison.  The C and the interpreter failing are
 * fxcc's failures: exit 1.  One thread everywhere: OPENBLAS_NUM_THREADS=1 and
 * OMP_NUM_THREADS=1 for the children, openblas_set_num_threads(1) for the
 * interpreter in this process; OPENBLAS_CORETYPE is only reported.
 *
 * N is --repeat (default 20), raised for a backend whose runs are short
 * until one round of N runs lasts --min-round-ms (default 200; at most 5000
 * runs), so that a microsecond model is not timed over one millisecond.
 *
 * Steps 2-4 are timed in --rounds R alternating rounds (default 3): the C,
 * then Python, then the interpreter, R times; the build, the outputs and the
 * choice of N come from the first round.  Each backend keeps its best
 * round's median, so a slow spell of a shared machine lands on one round of
 * one backend, not on the ratio; every round's median goes to the JSON.
 */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "tools/cli.h"

/* codegen/embed.cmake's lookup for the files CMakeLists.txt embeds into fxcc
 * under this prefix (tools/bench_reference.py). */
const unsigned char *fxcc_tools_embedded_find(const char *name, size_t *size);

enum { MAX_AUTO_REPEAT = 5000, REASON_CAP = 512, MAX_ROUNDS = 100 };

typedef enum BenchBackend { BB_C, BB_INTERP, BB_ORT, BB_TORCH, BB_COUNT } BenchBackend;

static const char *const backend_keys[BB_COUNT] = {"c", "interp", "ort", "torch"};
static const char *const backend_labels[BB_COUNT] = {"generated C", "interpreter",
                                                     "onnxruntime", "torch"};

typedef enum RowStatus {
    ROW_OK,
    ROW_WRONG,       /* ran, outputs disagree with the reference */
    ROW_FAILED,      /* could not run */
    ROW_UNAVAILABLE, /* not installed, or the model is beyond it */
    ROW_SKIPPED      /* --skip */
} RowStatus;

static const char *const status_names[] = {"ok", "wrong", "failed", "not available", "skipped"};

typedef struct BenchRow {
    RowStatus status;
    char reason[REASON_CAP]; /* why not ok */
    double ms;               /* the best round's median of `repeat` runs */
    long repeat;
    double round_ms[MAX_ROUNDS]; /* each round's median */
    int num_rounds;
    Tensor **outputs;        /* [num_outputs] when it ran */
    double max_abs;          /* over all outputs, against the reference */
    double max_rel;          /* max over outputs of max_abs / max |reference| */
} BenchRow;

typedef struct BenchOptions {
    const char *model;
    const char *const *input_paths;
    int num_paths;
    long repeat;
    double min_round_ms;
    long warmup;
    int rounds;
    bool skip[BB_COUNT];
    const char *python;
    const char *keep_dir;
    const char *json;
    double rtol;
    int opt_level;
    const char *const *leaf_sources; /* --leaf-source: built with the C */
    int num_leaf_sources;
    const CommonArgs *common;
} BenchOptions;

typedef struct Bench {
    const BenchOptions *o;
    Graph *g, *reference;
    Tensor **inputs;
    int num_inputs, num_outputs;
    char dir[4096];
    BenchRow rows[BB_COUNT];
    int reference_row; /* BB_ORT or BB_INTERP, -1 when neither ran */
    double ort_raw_ms, ort_binding_ms;
    bool ort_subtracted;
    char c_dir[4200];        /* the built C, from round 0 */
    char **c_inputs;         /* its input files */
    char ort_version[64], torch_version[64];
    int64_t macs;
    bool protocol_error; /* result.txt was malformed: a bug, exit 1 */
} Bench;

static const char bench_help[] =
    "usage: fxcc bench MODEL.onnx [INPUT...] [--repeat N] [--rounds R] [--min-round-ms MS]\n"
    "                  [--json FILE] [--skip c,interp,ort,torch] [--python PATH] [--rtol R]\n"
    "                  [--keep DIR]\n"
    "\n"
    "Compiles MODEL.onnx (at -O2 unless told otherwise) and builds it, then times on the\n"
    "same inputs and one thread: the generated C, fxcc's interpreter (on the unoptimized\n"
    "model), ONNX Runtime and PyTorch eager (the ONNX graph replayed op by op) when their\n"
    "Python packages import.  The inputs are .npy or .pb files in graph-input order, of\n"
    "exactly the model's input types, or random from a fixed seed.  ONNX Runtime is timed\n"
    "from Python, minus the median of an Identity model on the same inputs (the binding's\n"
    "cost per call).  Every backend's outputs are checked against ONNX Runtime's (the\n"
    "interpreter's when it is not available) before a table is printed: ms (the best\n"
    "round's median), ratio to the generated C (above 1: the C is faster), GFLOP/s (2 x\n"
    "the unoptimized graph's MACs per run), max abs difference, how much slower the\n"
    "slowest round was.  A backend past the tolerance is WRONG, its time is not shown\n"
    "and the exit status is 1.\n"
    "\n"
    "  --repeat N          timed runs per backend, at least (default 20)\n"
    "  --rounds R          time the backends in R alternating rounds, each keeping its\n"
    "                      best round's median (default 3)\n"
    "  --min-round-ms MS   raise N for a fast backend until N runs last MS (default 200;\n"
    "                      0: exactly N; at most 5000 runs)\n"
    "  --warmup N          untimed runs before ONNX Runtime and PyTorch are timed (3)\n"
    "  --skip LIST         leave out backends: c, interp, ort, torch (comma-separated)\n"
    "  --python PATH       the Python for ONNX Runtime and PyTorch (default $FXCC_PYTHON,\n"
    "                      else python3); without it those rows say \"not available\"\n"
    "  --rtol R            outputs agree when max |y - ref| <= R * max |ref|, per output\n"
    "                      (default 1e-3; integer outputs must be equal)\n"
    "  --json FILE         also write the results as JSON (written whole or not at all)\n"
    "  --keep DIR          work in DIR (inputs, generated C, outputs) and keep it\n"
    "  --leaf-source FILE.c\n"
    "                      build FILE.c, which defines fxcc_leaf_OP functions, with the C\n"
    "                      (with --leaf-lib for the interpreter; repeatable)\n"
    "  -O0, -O1, -O2       optimization level of the generated C (default -O2)\n"
    "  --shape, --const, --keep-input-defaults\n"
    "                      as for `fxcc inspect`\n"
    "\n"
    "OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1 are set; OPENBLAS_CORETYPE is reported,\n"
    "never changed.  $CC (default cc) builds the C.\n";

/* --- small helpers -------------------------------------------------------- */

static void row_set(BenchRow *r, RowStatus st, const char *fmt, const char *arg)
{
    r->status = st;
    snprintf(r->reason, sizeof r->reason, fmt, arg ? arg : "");
}

/* The first message of d (what a failed step said), for a row's reason. */
static void row_fail(BenchRow *r, const Diag *d)
{
    r->status = ROW_FAILED;
    const DiagEntry *e = d->count ? &d->entries[0] : NULL;
    snprintf(r->reason, sizeof r->reason, "%s%s%s", e && e->file ? e->file : "",
             e && e->file ? ": " : "", e && e->message ? e->message : "failed");
}

static long auto_repeat(const BenchOptions *o, double est_ms)
{
    if (o->min_round_ms <= 0)
        return o->repeat;
    double want = o->min_round_ms / (est_ms > 1e-4 ? est_ms : 1e-4) + 1;
    long n = want > MAX_AUTO_REPEAT ? MAX_AUTO_REPEAT : (long)want;
    return n > o->repeat ? n : o->repeat;
}

static void free_outputs(Tensor **t, int n)
{
    for (int k = 0; t && k < n; k++)
        tensor_free(t[k]);
    free(t);
}

/* Reads PREFIX0.npy ... into a new array of n tensors. */
static FxStatus read_outputs(const char *dir, const char *prefix, int n, Tensor ***out, Diag *d)
{
    Tensor **t = fx_alloc_array((size_t)n + 1, sizeof *t);
    if (!t)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    for (int k = 0; k < n; k++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s%d.npy", dir, prefix, k);
        if (tensor_file_read(path, &t[k], d) != FX_OK) {
            free_outputs(t, n);
            return FX_ERR_IO;
        }
    }
    *out = t;
    return FX_OK;
}

static FxStatus make_dir(char *buf, size_t cap, const char *keep, Diag *d)
{
    if (keep) {
        snprintf(buf, cap, "%s", keep);
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return diag_error(d, FX_ERR_IO, "cannot create %s: %s", buf, strerror(errno));
        return FX_OK;
    }
    const char *base = getenv("TMPDIR");
    snprintf(buf, cap, "%s/fxcc-bench-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(buf))
        return diag_error(d, FX_ERR_IO, "cannot create a temporary folder: %s", strerror(errno));
    return FX_OK;
}

static void remove_tree(const char *dir)
{
    char *argv[] = {"rm", "-rf", (char *)dir, NULL};
    cg_spawn(argv, NULL, NULL);
}

/* The ONNX name of placeholder k (what ONNX Runtime feeds by). */
static const char *input_name(const Graph *g, int k)
{
    const Node *p = graph_placeholder(g, k);
    return p->onnx_outputs && p->onnx_outputs[0] ? p->onnx_outputs[0] : p->target;
}

/* --- 1. inputs ------------------------------------------------------------ */

static FxStatus bench_inputs(Bench *b, Diag *d)
{
    const BenchOptions *o = b->o;
    b->num_inputs = graph_num_placeholders(b->g);
    if (o->num_paths && o->num_paths != b->num_inputs)
        return diag_error(d, FX_ERR_INVALID, "%s takes %d input%s, %d given", o->model,
                          b->num_inputs, b->num_inputs == 1 ? "" : "s", o->num_paths);
    b->inputs = fx_alloc_array((size_t)b->num_inputs + 1, sizeof *b->inputs);
    if (!b->inputs)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    uint64_t seed = 0x9E3779B97F4A7C15ull; /* fxcc verify's */
    for (int k = 0; k < b->num_inputs; k++) {
        const TensorType *want = &graph_placeholder(b->g, k)->out_types[0];
        if (!o->num_paths) {
            if (!(b->inputs[k] = tensor_new_random(want, &seed, d)))
                return FX_ERR_NOMEM;
            continue;
        }
        if (tensor_file_read(o->input_paths[k], &b->inputs[k], d) != FX_OK)
            return FX_ERR_IO;
        if (!type_equal(&b->inputs[k]->type, want)) {
            char got[160], exp[160];
            return diag_error_at(d, FX_ERR_SHAPE, o->input_paths[k], -1,
                                 "holds %s, but input %d ('%s') of %s is %s",
                                 type_format(&b->inputs[k]->type, got, sizeof got), k,
                                 input_name(b->g, k), o->model, type_format(want, exp, sizeof exp));
        }
    }
    return FX_OK;
}

static FxStatus write_inputs(const Bench *b, Diag *d)
{
    for (int k = 0; k < b->num_inputs; k++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/input_%d.npy", b->dir, k);
        if (tensor_file_write(path, b->inputs[k], d) != FX_OK)
            return FX_ERR_IO;
    }
    return FX_OK;
}

/* --- 2. the generated C --------------------------------------------------- */

/* Records one round's median; the row keeps the best. */
static void row_take_round(BenchRow *r, double ms)
{
    if (r->num_rounds == 0 || ms < r->ms)
        r->ms = ms;
    if (r->num_rounds < MAX_ROUNDS)
        r->round_ms[r->num_rounds++] = ms;
}

/* Round 0's work for the C: compile, build, the input paths, and N from a
 * first short run. */
static FxStatus c_build(Bench *b, const char *out, Diag *d)
{
    snprintf(b->c_dir, sizeof b->c_dir, "%s/c", b->dir);
    if (!(b->c_inputs = fx_alloc_array((size_t)b->num_inputs + 1, sizeof *b->c_inputs)))
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    for (int k = 0; k < b->num_inputs; k++) {
        if (!(b->c_inputs[k] = fx_malloc(4400)))
            return diag_error(d, FX_ERR_NOMEM, "out of memory");
        snprintf(b->c_inputs[k], 4400, "%s/input_%d.npy", b->dir, k);
    }
    CgOptions co = {.name = "model", .target = FX_TARGET_HOST, .emit_main = true,
                    .source = b->o->model, .leaf_sources = b->o->leaf_sources,
                    .num_leaf_sources = b->o->num_leaf_sources};
    /* -O3 -DNDEBUG: what the generated CMakeLists.txt's Release build uses. */
    CgBuildOptions bo = {.cc = getenv("CC"), .cflags = "-std=c99 -O3 -DNDEBUG",
                         .target = FX_TARGET_HOST};
    FxStatus st = cg_compile(b->g, &co, b->c_dir, NULL, d);
    if (st == FX_OK)
        st = cg_build_main(b->c_dir, &bo, d);
    if (st == FX_OK && mkdir(out, 0777) != 0 && errno != EEXIST)
        st = diag_error(d, FX_ERR_IO, "cannot create %s: %s", out, strerror(errno));
    BenchRow *r = &b->rows[BB_C];
    r->repeat = b->o->repeat;
    double ms = 0;
    if (st == FX_OK && b->o->min_round_ms > 0) {
        st = cg_run_main_timed(b->c_dir, (const char *const *)b->c_inputs, b->num_inputs, out, 3,
                               &ms, d);
        r->repeat = auto_repeat(b->o, ms);
    }
    return st;
}

static void bench_c(Bench *b, int round)
{
    BenchRow *r = &b->rows[BB_C];
    if (round > 0 && r->status != ROW_OK)
        return;
    char out[4200];
    snprintf(out, sizeof out, "%s/c_out", b->dir);
    Diag d;
    diag_init(&d);
    FxStatus st = round == 0 ? c_build(b, out, &d) : FX_OK;
    double ms = 0;
    if (st == FX_OK)
        st = cg_run_main_timed(b->c_dir, (const char *const *)b->c_inputs, b->num_inputs, out,
                               r->repeat, &ms, &d);
    if (st == FX_OK && round == 0)
        st = read_outputs(out, "output_", b->num_outputs, &r->outputs, &d);
    if (st == FX_OK) {
        r->status = ROW_OK;
        row_take_round(r, ms);
    } else {
        row_fail(r, &d);
    }
    diag_free(&d);
}

/* --- 3. ONNX Runtime and PyTorch, through Python --------------------------- */

typedef enum RefKind { RK_STATUS, RK_TEXT, RK_MS, RK_COUNT } RefKind;

typedef struct RefField {
    const char *key;
    RefKind kind;
    int backend; /* BB_ORT or BB_TORCH */
} RefField;

/* Every key bench_reference.py may write; any other is an error. */
static const RefField ref_fields[] = {
    {"ort_status", RK_STATUS, BB_ORT},     {"ort_reason", RK_TEXT, BB_ORT},
    {"ort_ms", RK_MS, BB_ORT},             {"ort_raw_ms", RK_MS, BB_ORT},
    {"ort_binding_ms", RK_MS, BB_ORT},     {"ort_repeat", RK_COUNT, BB_ORT},
    {"ort_outputs", RK_COUNT, BB_ORT},     {"ort_version", RK_TEXT, BB_ORT},
    {"torch_status", RK_STATUS, BB_TORCH}, {"torch_reason", RK_TEXT, BB_TORCH},
    {"torch_ms", RK_MS, BB_TORCH},         {"torch_repeat", RK_COUNT, BB_TORCH},
    {"torch_outputs", RK_COUNT, BB_TORCH}, {"torch_version", RK_TEXT, BB_TORCH},
};
enum { NUM_REF_FIELDS = sizeof ref_fields / sizeof ref_fields[0] };

typedef struct RefValue {
    bool set;
    double num;     /* RK_MS, RK_COUNT */
    RowStatus status;
    char text[REASON_CAP];
} RefValue;

/* Parses result.txt: "key=value\n" lines, every key known and given once,
 * numbers whole and finite.  On error names the line. */
static FxStatus parse_result(const char *path, RefValue *v, Diag *d)
{
    uint8_t *data;
    size_t len;
    if (file_read_all(path, &data, &len, d) != FX_OK)
        return FX_ERR_IO;
    FxStatus st = FX_OK;
    if (len > 64 * 1024 || memchr(data, '\0', len))
        st = diag_error_at(d, FX_ERR_FORMAT, path, -1, "not a result file of bench_reference.py");
    char *text = (char *)data;
    int line_no = 0;
    for (size_t pos = 0; st == FX_OK && pos < len; line_no++) {
        char *line = text + pos;
        char *nl = memchr(line, '\n', len - pos);
        if (!nl) {
            st = diag_error_at(d, FX_ERR_FORMAT, path, -1, "line %d does not end", line_no + 1);
            break;
        }
        *nl = '\0';
        pos = (size_t)(nl - text) + 1;
        char *eq = strchr(line, '=');
        const RefField *f = NULL;
        for (int i = 0; eq && i < NUM_REF_FIELDS; i++)
            if ((size_t)(eq - line) == strlen(ref_fields[i].key) &&
                strncmp(line, ref_fields[i].key, (size_t)(eq - line)) == 0)
                f = &ref_fields[i];
        if (!f) {
            st = diag_error_at(d, FX_ERR_FORMAT, path, -1, "line %d: no known key=value",
                               line_no + 1);
            break;
        }
        RefValue *rv = &v[f - ref_fields];
        const char *val = eq + 1;
        if (rv->set) {
            st = diag_error_at(d, FX_ERR_FORMAT, path, -1, "line %d: %s given twice", line_no + 1,
                               f->key);
            break;
        }
        rv->set = true;
        if (f->kind == RK_STATUS) {
            if (strcmp(val, "ok") == 0)
                rv->status = ROW_OK;
            else if (strcmp(val, "unavailable") == 0)
                rv->status = ROW_UNAVAILABLE;
            else if (strcmp(val, "failed") == 0)
                rv->status = ROW_FAILED;
            else
                st = diag_error_at(d, FX_ERR_FORMAT, path, -1, "line %d: unknown status '%s'",
                                   line_no + 1, val);
        } else if (f->kind == RK_TEXT) {
            snprintf(rv->text, sizeof rv->text, "%s", val);
        } else {
            char *end;
            errno = 0;
            rv->num = strtod(val, &end);
            bool ok = end != val && *end == '\0' && errno == 0 && isfinite(rv->num);
            if (f->kind == RK_MS)
                ok = ok && fabs(rv->num) < 1e9;
            else
                ok = ok && rv->num >= 0 && rv->num <= 1e9 && rv->num == floor(rv->num);
            if (!ok)
                st = diag_error_at(d, FX_ERR_FORMAT, path, -1, "line %d: bad number '%s' for %s",
                                   line_no + 1, val, f->key);
        }
    }
    free(data);
    return st;
}

static const RefValue *ref_get(const RefValue *v, const char *key)
{
    for (int i = 0; i < NUM_REF_FIELDS; i++)
        if (strcmp(ref_fields[i].key, key) == 0)
            return v[i].set ? &v[i] : NULL;
    return NULL;
}

/* Fills the ORT and torch rows from the parsed result. */
static FxStatus take_result(Bench *b, const RefValue *v, const char *refdir, const char *path,
                            Diag *d)
{
    for (int be = BB_ORT; be <= BB_TORCH; be++) {
        BenchRow *r = &b->rows[be];
        if (r->status == ROW_SKIPPED)
            continue;
        char key[64];
        const char *k = backend_keys[be];
        snprintf(key, sizeof key, "%s_status", k);
        const RefValue *s = ref_get(v, key);
        if (!s)
            return diag_error_at(d, FX_ERR_FORMAT, path, -1, "no %s", key);
        snprintf(key, sizeof key, "%s_version", k);
        const RefValue *ver = ref_get(v, key);
        if (ver)
            snprintf(be == BB_ORT ? b->ort_version : b->torch_version, sizeof b->ort_version,
                     "%.60s", ver->text);
        if (s->status != ROW_OK) {
            snprintf(key, sizeof key, "%s_reason", k);
            const RefValue *why = ref_get(v, key);
            row_set(r, s->status, "%s", why ? why->text : "no reason given");
            continue;
        }
        const char *need[] = {"ms", "repeat", "outputs", "raw_ms", "binding_ms"};
        const RefValue *got[5];
        for (int i = 0; i < (be == BB_ORT ? 5 : 3); i++) {
            snprintf(key, sizeof key, "%s_%s", k, need[i]);
            if (!(got[i] = ref_get(v, key)))
                return diag_error_at(d, FX_ERR_FORMAT, path, -1, "%s is ok but has no %s", k, key);
        }
        if (got[1]->num < 1)
            return diag_error_at(d, FX_ERR_FORMAT, path, -1, "%s_repeat is 0", k);
        r->repeat = (long)got[1]->num;
        r->ms = got[0]->num;
        if (be == BB_ORT) {
            b->ort_raw_ms = got[3]->num;
            b->ort_binding_ms = got[4]->num;
            b->ort_subtracted = r->ms > 0;
            if (!b->ort_subtracted) /* the binding's cost was the whole run */
                r->ms = b->ort_raw_ms;
        }
        if (r->ms <= 0)
            return diag_error_at(d, FX_ERR_FORMAT, path, -1, "%s_ms is not positive", k);
        if ((int)got[2]->num != b->num_outputs) {
            char msg[64];
            snprintf(msg, sizeof msg, "%d", (int)got[2]->num);
            row_set(r, ROW_WRONG, "it gives %s outputs", msg);
            r->max_abs = NAN;
            continue;
        }
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s_output_", k);
        Diag rd;
        diag_init(&rd);
        if (read_outputs(refdir, prefix, b->num_outputs, &r->outputs, &rd) == FX_OK)
            r->status = ROW_OK;
        else
            row_fail(r, &rd);
        diag_free(&rd);
    }
    return FX_OK;
}

/* Appends s to a; false when the array is full. */
static bool arg_add(char **a, int *n, int cap, char *s)
{
    if (!s || *n + 1 >= cap)
        return false;
    a[(*n)++] = s;
    a[*n] = NULL;
    return true;
}

static char *arg_printf(const char *fmt, const char *x, const char *y)
{
    size_t len = strlen(fmt) + strlen(x) + strlen(y) + 1;
    char *s = fx_malloc(len);
    if (s)
        snprintf(s, len, fmt, x, y);
    return s;
}

/* The last non-empty line of a log, for a reason. */
static void log_tail(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[256]; /* a longer line is read in pieces: the last piece is kept */
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0])
            snprintf(buf, cap, "%s", line);
    }
    fclose(f);
}

static void run_python(Bench *b)
{
    const BenchOptions *o = b->o;
    BenchRow *ort = &b->rows[BB_ORT], *torch = &b->rows[BB_TORCH];
    if (ort->status == ROW_SKIPPED && torch->status == ROW_SKIPPED)
        return;
    const char *python = o->python ? o->python : getenv("FXCC_PYTHON");
    if (!python || !*python)
        python = "python3";
    char script[4200], refdir[4200], log[4200], result[4300], repeat[32], round_ms[32],
        warmup[32];
    snprintf(script, sizeof script, "%s/bench_reference.py", b->dir);
    snprintf(refdir, sizeof refdir, "%s/ref", b->dir);
    snprintf(log, sizeof log, "%s/reference.log", b->dir);
    snprintf(result, sizeof result, "%s/result.txt", refdir);
    snprintf(repeat, sizeof repeat, "%ld", o->repeat);
    snprintf(round_ms, sizeof round_ms, "%g", o->min_round_ms);
    snprintf(warmup, sizeof warmup, "%ld", o->warmup);
    const char *skip = ort->status == ROW_SKIPPED     ? "ort"
                       : torch->status == ROW_SKIPPED ? "torch"
                                                      : "";
    Diag d;
    diag_init(&d);
    size_t size = 0;
    const unsigned char *text = fxcc_tools_embedded_find("bench_reference.py", &size);
    int cap = 24 + 2 * (b->num_inputs + o->common->num_consts);
    char **argv = fx_alloc_array((size_t)cap + 1, sizeof *argv);
    char **owned = fx_alloc_array((size_t)cap + 1, sizeof *owned);
    int n = 0, num_owned = 0;
    bool ok = text && argv && owned;
    if (!text)
        diag_error(&d, FX_ERR_INVALID, "bench_reference.py was not embedded in this fxcc build");
    else if (!ok)
        diag_error(&d, FX_ERR_NOMEM, "out of memory");
    ok = ok && file_write_all(script, text, size, &d) == FX_OK;
    const char *fixed[] = {python,          script,   "--model",  o->model,  "--out",
                           refdir,          "--repeat", repeat,   "--min-round-ms", round_ms,
                           "--warmup",      warmup,   "--skip",   skip};
    for (size_t i = 0; ok && i < sizeof fixed / sizeof fixed[0]; i++)
        ok = arg_add(argv, &n, cap, (char *)fixed[i]);
    for (int k = 0; ok && k < b->num_inputs; k++) {
        char file[4300];
        snprintf(file, sizeof file, "%s/input_%d.npy", b->dir, k);
        char *s = arg_printf("%s=%s", input_name(b->g, k), file);
        ok = s && arg_add(argv, &n, cap, "--input") && arg_add(argv, &n, cap, s);
        if (s)
            owned[num_owned++] = s;
    }
    for (int k = 0; ok && k < o->common->num_consts; k++)
        ok = arg_add(argv, &n, cap, "--const") &&
             arg_add(argv, &n, cap, (char *)o->common->const_args[k]);
    if (!ok && d.count == 0)
        diag_error(&d, FX_ERR_NOMEM, "out of memory");
    if (ok) {
        unlink(result);
        int rc = cg_spawn(argv, log, NULL);
        struct stat sb;
        if (rc != 0 || stat(result, &sb) != 0) {
            char tail[300], why[REASON_CAP];
            log_tail(log, tail, sizeof tail);
            if (rc == 127)
                snprintf(why, sizeof why, "cannot run %.400s", python);
            else
                snprintf(why, sizeof why, "%.100s failed (exit %d)%s%s", python, rc,
                         tail[0] ? ": " : "", tail);
            for (int be = BB_ORT; be <= BB_TORCH; be++)
                if (b->rows[be].status != ROW_SKIPPED)
                    row_set(&b->rows[be], ROW_UNAVAILABLE, "%s", why);
        } else {
            RefValue v[NUM_REF_FIELDS];
            memset(v, 0, sizeof v);
            if (parse_result(result, v, &d) != FX_OK || take_result(b, v, refdir, result, &d) != FX_OK)
                ok = false;
        }
    }
    if (!ok) {
        /* nothing Python said can be trusted: a bug on one side or the other */
        b->protocol_error = true;
        for (int be = BB_ORT; be <= BB_TORCH; be++)
            if (b->rows[be].status != ROW_SKIPPED) {
                free_outputs(b->rows[be].outputs, b->num_outputs);
                b->rows[be].outputs = NULL;
                row_fail(&b->rows[be], &d);
            }
    }
    for (int k = 0; k < num_owned; k++)
        free(owned[k]);
    free(owned);
    free(argv);
    diag_free(&d);
}

/* One round of ONNX Runtime and PyTorch.  After the first, a backend ok in
 * both keeps its first outputs and its best round (with ORT's raw and binding
 * times of that round); one that fails in a later round fails. */
static void bench_python(Bench *b, int round)
{
    enum { NUM_PY = BB_TORCH - BB_ORT + 1 };
    BenchRow before[NUM_PY];
    double raw = b->ort_raw_ms, binding = b->ort_binding_ms;
    bool subtracted = b->ort_subtracted, any_ok = false;
    for (int be = BB_ORT; be <= BB_TORCH; be++) {
        BenchRow *r = &b->rows[be];
        before[be - BB_ORT] = *r;
        any_ok = any_ok || r->status == ROW_OK;
        if (round > 0 && r->status != ROW_SKIPPED) {
            r->outputs = NULL;
            row_set(r, ROW_FAILED, "%s", "not run");
        }
    }
    if (round > 0 && !any_ok) {
        for (int be = BB_ORT; be <= BB_TORCH; be++)
            b->rows[be] = before[be - BB_ORT];
        return;
    }
    run_python(b);
    for (int be = BB_ORT; be <= BB_TORCH; be++) {
        BenchRow *r = &b->rows[be], *old = &before[be - BB_ORT];
        if (r->status == ROW_SKIPPED)
            continue;
        if (round == 0) {
            if (r->status == ROW_OK)
                row_take_round(r, r->ms);
            continue;
        }
        if (r->status != ROW_OK || old->status != ROW_OK) {
            free_outputs(old->outputs, b->num_outputs);
            continue;
        }
        double ms = r->ms;
        free_outputs(r->outputs, b->num_outputs);
        *r = *old;
        bool best = ms < r->ms;
        row_take_round(r, ms);
        if (be == BB_ORT && !best) {
            b->ort_raw_ms = raw;
            b->ort_binding_ms = binding;
            b->ort_subtracted = subtracted;
        }
    }
}

/* --- 4. the interpreter --------------------------------------------------- */

static void bench_interp(Bench *b, bool timed, int round)
{
    BenchRow *r = &b->rows[BB_INTERP];
    Diag d;
    diag_init(&d);
    if (round > 0) {
        double ms = 0;
        if (r->status != ROW_OK)
            return;
        if (cli_time_runs(b->reference, b->inputs, b->num_inputs, b->num_outputs, r->repeat, &ms,
                          &d) == FX_OK)
            row_take_round(r, ms);
        else
            row_fail(r, &d);
        diag_free(&d);
        return;
    }
    Tensor **outs = fx_alloc_array((size_t)b->num_outputs + 1, sizeof *outs);
    FxStatus st = outs ? FX_OK : diag_error(&d, FX_ERR_NOMEM, "out of memory");
    double t0 = cli_now_ms(), ms = 0;
    if (st == FX_OK)
        st = interp_run(b->reference, (const Tensor *const *)b->inputs, b->num_inputs, outs,
                        b->num_outputs, NULL, NULL, &d);
    double est = cli_now_ms() - t0;
    /* the first run is cold (page faults, caches): estimate from three more */
    if (st == FX_OK && timed && b->o->min_round_ms > 0)
        st = cli_time_runs(b->reference, b->inputs, b->num_inputs, b->num_outputs, 3, &est, &d);
    long repeat = auto_repeat(b->o, est);
    if (st == FX_OK && timed)
        st = cli_time_runs(b->reference, b->inputs, b->num_inputs, b->num_outputs, repeat, &ms,
                           &d);
    if (st == FX_OK) {
        r->outputs = outs;
        outs = NULL;
        if (timed) {
            r->status = ROW_OK;
            r->repeat = repeat;
            row_take_round(r, ms);
        }
    } else {
        row_fail(r, &d);
    }
    free_outputs(outs, b->num_outputs);
    diag_free(&d);
}

/* --- 5. the check --------------------------------------------------------- */

static double max_magnitude(const Tensor *t)
{
    double m = 0;
    if (!fxrt_dtype_is_float((FxrtDType)t->type.dtype))
        return 1;
    for (int64_t i = 0, n = tensor_numel(t); i < n; i++) {
        double v = fabs(tensor_get_float(t, i));
        if (isfinite(v) && v > m)
            m = v;
    }
    return m;
}

static void bench_check(Bench *b, FILE *out)
{
    const BenchRow *ref = b->reference_row >= 0 ? &b->rows[b->reference_row] : NULL;
    for (int be = 0; be < BB_COUNT; be++) {
        BenchRow *r = &b->rows[be];
        if (r->status != ROW_OK || be == b->reference_row)
            continue;
        if (!ref) {
            row_set(r, ROW_FAILED, "%s", "no reference to check the outputs against");
            continue;
        }
        for (int k = 0; k < b->num_outputs && r->status == ROW_OK; k++) {
            const Tensor *y = r->outputs[k], *want = ref->outputs[k];
            double scale = max_magnitude(want);
            CompareResult c = tensor_compare(y, want, 0.0, b->o->rtol * scale);
            char got_t[160], want_t[160], msg[REASON_CAP];
            if (c.mismatches < 0) {
                snprintf(msg, sizeof msg, "output %d is %s, %s's %s", k,
                         type_format(&y->type, got_t, sizeof got_t), backend_labels[b->reference_row],
                         type_format(&want->type, want_t, sizeof want_t));
                row_set(r, ROW_WRONG, "%s", msg);
                r->max_abs = NAN;
                break;
            }
            double rel = scale > 0 ? c.max_abs / scale : (c.max_abs > 0 ? INFINITY : 0);
            if (c.max_abs > r->max_abs || !(c.max_abs == c.max_abs))
                r->max_abs = c.max_abs;
            if (rel > r->max_rel)
                r->max_rel = rel;
            if (!c.ok) {
                snprintf(msg, sizeof msg,
                         "output %d differs from %s's by up to %.3g (%.3g of max |reference| %.3g; "
                         "limit %g)",
                         k, backend_labels[b->reference_row], c.max_abs, rel, scale, b->o->rtol);
                row_set(r, ROW_WRONG, "%s", msg);
            }
        }
    }
    int checked = 0;
    for (int be = 0; be < BB_COUNT; be++)
        if ((b->rows[be].status == ROW_OK || b->rows[be].status == ROW_WRONG) &&
            be != b->reference_row)
            checked++;
    if (ref)
        fprintf(out, "check: %d backend%s against %s, max |y - ref| <= %g x max |ref| per output\n",
                checked, checked == 1 ? "" : "s", backend_labels[b->reference_row], b->o->rtol);
    for (int be = 0; be < BB_COUNT; be++)
        if (b->rows[be].status == ROW_WRONG)
            fprintf(out, "WRONG: %s: %s\n", backend_labels[be], b->rows[be].reason);
}

/* --- 6. the report -------------------------------------------------------- */

static void cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    static const char *const keys[] = {"model name", "Hardware", "Model"};
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        for (int i = 0; i < 3 && !found; i++) {
            size_t n = strlen(keys[i]);
            char *colon = strchr(line, ':');
            if (strncmp(line, keys[i], n) == 0 && colon) {
                char *v = colon + 1;
                while (*v == ' ' || *v == '\t')
                    v++;
                v[strcspn(v, "\n")] = '\0';
                snprintf(buf, cap, "%s", v);
                found = true;
            }
        }
    }
    fclose(f);
}

static double row_ratio(const Bench *b, int be)
{
    const BenchRow *c = &b->rows[BB_C], *r = &b->rows[be];
    return c->status == ROW_OK && r->status == ROW_OK && c->ms > 0 ? r->ms / c->ms : NAN;
}

static double row_gflops(const Bench *b, int be)
{
    const BenchRow *r = &b->rows[be];
    return r->status == ROW_OK && b->macs > 0 && r->ms > 0 ? 2.0 * (double)b->macs / (r->ms * 1e6)
                                                          : NAN;
}

static void print_header(const Bench *b, const char *cpu, FILE *out)
{
    const BenchOptions *o = b->o;
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    if (o->common->passes)
        fprintf(out, "model: %s (generated C with --passes %s)\n", o->model, o->common->passes);
    else
        fprintf(out, "model: %s (generated C at -O%d)\n", o->model, o->opt_level);
    for (int k = 0; k < b->num_inputs; k++) {
        char t[160];
        fprintf(out, "input %d: %s %s (%s)\n", k, input_name(b->g, k),
                type_format(&b->inputs[k]->type, t, sizeof t),
                o->num_paths ? o->input_paths[k] : "random, fixed seed");
    }
    fprintf(out, "cpu: %s; OPENBLAS_CORETYPE=%s; threads=1\n", cpu, coretype ? coretype : "(unset)");
    if (o->min_round_ms > 0)
        fprintf(out, "runs: the median of at least %ld per backend, more for a fast one until "
                     "they last %g ms (at most %d)", o->repeat, o->min_round_ms, MAX_AUTO_REPEAT);
    else
        fprintf(out, "runs: median of %ld per backend", o->repeat);
    if (o->rounds > 1)
        fprintf(out, "; %d alternating rounds, the best round's median kept", o->rounds);
    fputc('\n', out);
    if (b->rows[BB_ORT].status == ROW_OK || b->rows[BB_ORT].status == ROW_WRONG) {
        if (b->ort_subtracted)
            fprintf(out, "onnxruntime %s: timed from Python, %.4f ms minus %.4f ms, the median of an "
                         "Identity model on the same inputs (the binding's cost per call)\n",
                    b->ort_version, b->ort_raw_ms, b->ort_binding_ms);
        else
            fprintf(out, "onnxruntime %s: timed from Python, %.4f ms; the Identity model's %.4f ms "
                         "was not subtracted (not less than the run itself)\n",
                    b->ort_version, b->ort_raw_ms, b->ort_binding_ms);
    }
    fprintf(out, "MACs per run: %lld (GFLOP/s = 2 x MACs / time)\n", (long long)b->macs);
}

/* How much slower than the best the slowest round was, as a fraction. */
static double round_spread(const BenchRow *r)
{
    double worst = r->ms;
    for (int k = 0; k < r->num_rounds; k++)
        worst = r->round_ms[k] > worst ? r->round_ms[k] : worst;
    return r->ms > 0 ? worst / r->ms - 1 : 0;
}

static void print_table(const Bench *b, FILE *out)
{
    fprintf(out, "\n%-12s %11s %8s %9s %13s %9s %8s  %s\n", "backend", "ms", "vs C", "GFLOP/s",
            "max abs diff", "runs", "slowest", "status");
    for (int be = 0; be < BB_COUNT; be++) {
        const BenchRow *r = &b->rows[be];
        char ms[32] = "-", ratio[32] = "-", gf[32] = "-", diff[32] = "-", runs[32] = "-",
             spread[32] = "-";
        if (r->status == ROW_OK) {
            snprintf(ms, sizeof ms, "%.4f", r->ms);
            if (r->num_rounds > 1) {
                snprintf(runs, sizeof runs, "%ldx%d", r->repeat, r->num_rounds);
                snprintf(spread, sizeof spread, "+%.0f%%", 100 * round_spread(r));
            } else {
                snprintf(runs, sizeof runs, "%ld", r->repeat);
            }
            double x = row_ratio(b, be), g = row_gflops(b, be);
            if (x == x)
                snprintf(ratio, sizeof ratio, "%.2fx", x);
            if (g == g)
                snprintf(gf, sizeof gf, "%.2f", g);
            if (be == b->reference_row)
                snprintf(diff, sizeof diff, "(reference)");
            else
                snprintf(diff, sizeof diff, "%.3g", r->max_abs);
        } else if (r->status == ROW_WRONG) {
            snprintf(ms, sizeof ms, "WRONG");
            if (r->max_abs > 0)
                snprintf(diff, sizeof diff, "%.3g", r->max_abs);
        }
        fprintf(out, "%-12s %11s %8s %9s %13s %9s %8s  %s%s%s\n", backend_labels[be], ms, ratio,
                gf, diff, runs, spread, status_names[r->status], r->status == ROW_OK ? "" : ": ",
                r->status == ROW_OK ? "" : r->reason);
    }
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* A number, or null when it is NaN (not measured). */
static void json_number(FILE *f, double v)
{
    if (v == v && isfinite(v))
        fprintf(f, "%.17g", v);
    else
        fputs("null", f);
}

static FxStatus write_json(const Bench *b, const char *cpu, const char *path, Diag *d)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return diag_error(d, FX_ERR_NOMEM, "out of memory writing %s", path);
    const BenchOptions *o = b->o;
    char date[64] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm))
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S%z", &tm);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    fputs("{\n  \"model\": ", f);
    json_string(f, o->model);
    if (o->common->passes) {
        fputs(",\n  \"opt_level\": null,\n  \"passes\": ", f);
        json_string(f, o->common->passes);
    } else {
        fprintf(f, ",\n  \"opt_level\": %d,\n  \"passes\": null", o->opt_level);
    }
    fputs(",\n  \"inputs\": [", f);
    for (int k = 0; k < b->num_inputs; k++) {
        char t[160];
        fputs(k ? ", {\"name\": " : "{\"name\": ", f);
        json_string(f, input_name(b->g, k));
        fputs(", \"type\": ", f);
        json_string(f, type_format(&b->inputs[k]->type, t, sizeof t));
        fputs(", \"file\": ", f);
        if (o->num_paths)
            json_string(f, o->input_paths[k]);
        else
            fputs("null", f);
        fputc('}', f);
    }
    fprintf(f, "],\n  \"macs\": %lld,\n  \"threads\": 1,\n  \"cpu\": ", (long long)b->macs);
    json_string(f, cpu);
    fputs(",\n  \"openblas_coretype\": ", f);
    if (coretype)
        json_string(f, coretype);
    else
        fputs("null", f);
    fputs(",\n  \"date\": ", f);
    json_string(f, date);
    fprintf(f, ",\n  \"repeat\": %ld,\n  \"rounds\": %d,\n  \"min_round_ms\": ", o->repeat,
            o->rounds);
    json_number(f, o->min_round_ms);
    fputs(",\n  \"rtol\": ", f);
    json_number(f, o->rtol);
    fputs(",\n  \"reference\": ", f);
    if (b->reference_row >= 0)
        json_string(f, backend_keys[b->reference_row]);
    else
        fputs("null", f);
    bool ort_ran = b->rows[BB_ORT].status == ROW_OK || b->rows[BB_ORT].status == ROW_WRONG;
    fputs(",\n  \"ort_raw_ms\": ", f);
    json_number(f, ort_ran ? b->ort_raw_ms : NAN);
    fputs(",\n  \"ort_binding_ms\": ", f);
    json_number(f, ort_ran ? b->ort_binding_ms : NAN);
    fprintf(f, ",\n  \"ort_binding_subtracted\": %s", ort_ran && b->ort_subtracted ? "true" : "false");
    fputs(",\n  \"backends\": [\n", f);
    for (int be = 0; be < BB_COUNT; be++) {
        const BenchRow *r = &b->rows[be];
        bool ok = r->status == ROW_OK;
        fputs("    {\"name\": ", f);
        json_string(f, backend_keys[be]);
        fputs(", \"status\": ", f);
        json_string(f, status_names[r->status]);
        fputs(", \"reason\": ", f);
        if (ok)
            fputs("null", f);
        else
            json_string(f, r->reason);
        fputs(", \"ms\": ", f);
        json_number(f, ok ? r->ms : NAN);
        fputs(", \"repeat\": ", f);
        json_number(f, ok ? (double)r->repeat : NAN);
        fputs(", \"round_ms\": [", f);
        for (int k = 0; ok && k < r->num_rounds; k++) {
            fputs(k ? ", " : "", f);
            json_number(f, r->round_ms[k]);
        }
        fputc(']', f);
        fputs(", \"ratio\": ", f);
        json_number(f, row_ratio(b, be));
        fputs(", \"gflops\": ", f);
        json_number(f, row_gflops(b, be));
        bool compared = (ok || r->status == ROW_WRONG) && b->reference_row >= 0;
        fputs(", \"max_abs\": ", f);
        json_number(f, compared ? r->max_abs : NAN);
        fputs(", \"max_rel\": ", f);
        json_number(f, compared ? r->max_rel : NAN);
        fprintf(f, "}%s\n", be + 1 < BB_COUNT ? "," : "");
    }
    fputs("  ]\n}\n", f);
    bool cut = ferror(f) != 0;
    cut = fclose(f) != 0 || cut;
    FxStatus st = cut ? diag_error(d, FX_ERR_NOMEM, "out of memory writing %s", path)
                      : file_write_all(path, text, len, d);
    free(text);
    return st;
}

/* --- the command ---------------------------------------------------------- */

static int parse_skip(const char *list, bool *skip)
{
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        int found = -1;
        for (int be = 0; be < BB_COUNT; be++)
            if (n == strlen(backend_keys[be]) && strncmp(p, backend_keys[be], n) == 0)
                found = be;
        if (found < 0)
            return cli_usage_error("bench", "--skip takes c, interp, ort and torch, not '%s'", list);
        skip[found] = true;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* A number from text within [lo, hi]; false if not all of it is one. */
static bool parse_number(const char *text, double lo, double hi, double *out)
{
    char *end;
    if (!text)
        return false;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

static int run_bench(const BenchOptions *o, Diag *d)
{
    Bench b = {.o = o, .reference_row = -1};
    int rc = 1;
    bool made_dir = false, ran = false;
    if (cli_load_model(o->model, o->common, &b.g, &b.reference, d) != FX_OK)
        goto done;
    b.num_outputs = graph_num_outputs(b.g);
    if (graph_num_outputs(b.reference) != b.num_outputs) {
        diag_error(d, FX_ERR_INVALID, "%s: the passes changed the number of outputs", o->model);
        goto done;
    }
    GraphSummary s;
    graph_summarize(b.reference, &s);
    b.macs = s.macs;
    if (bench_inputs(&b, d) != FX_OK || make_dir(b.dir, sizeof b.dir, o->keep_dir, d) != FX_OK)
        goto done;
    made_dir = true;
    if (write_inputs(&b, d) != FX_OK)
        goto done;
    ran = true;
    /* One thread: the children read the environment at start-up; this
     * process's OpenBLAS has read it already. */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    openblas_set_num_threads(1);
    for (int be = 0; be < BB_COUNT; be++)
        row_set(&b.rows[be], o->skip[be] ? ROW_SKIPPED : ROW_FAILED, "%s",
                o->skip[be] ? "--skip" : "not run");
    for (int round = 0; round < o->rounds; round++) {
        if (!o->skip[BB_C])
            bench_c(&b, round);
        bench_python(&b, round);
        if (!o->skip[BB_INTERP])
            bench_interp(&b, true, round);
    }
    /* The interpreter runs even when skipped if it must be the reference. */
    if (o->skip[BB_INTERP] && b.rows[BB_ORT].status != ROW_OK)
        bench_interp(&b, false, 0);
    if (b.rows[BB_ORT].status == ROW_OK)
        b.reference_row = BB_ORT;
    else if (b.rows[BB_INTERP].outputs)
        b.reference_row = BB_INTERP;
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    print_header(&b, cpu, stdout);
    bench_check(&b, stdout);
    if (b.reference_row == BB_INTERP && o->skip[BB_INTERP])
        row_set(&b.rows[BB_INTERP], ROW_SKIPPED, "%s", "--skip (run once for the reference outputs)");
    print_table(&b, stdout);
    bool bad = b.protocol_error;
    for (int be = 0; be < BB_COUNT; be++) {
        RowStatus st = b.rows[be].status;
        if (st == ROW_WRONG || (st == ROW_FAILED && (be == BB_C || be == BB_INTERP)))
            bad = true;
    }
    if (o->json && write_json(&b, cpu, o->json, d) != FX_OK)
        goto done;
    if (bad) {
        for (int be = 0; be < BB_COUNT; be++) {
            const BenchRow *r = &b.rows[be];
            if (r->status == ROW_WRONG)
                diag_error(d, FX_ERR_RUNTIME, "%s: %s's outputs differ from the reference", o->model,
                           backend_labels[be]);
            else if (r->status == ROW_FAILED && (be == BB_C || be == BB_INTERP || b.protocol_error))
                diag_error(d, FX_ERR_RUNTIME, "%s: %s failed: %s", o->model, backend_labels[be],
                           r->reason);
        }
        goto done;
    }
    rc = 0;
done:
    if (made_dir && !o->keep_dir) {
        if (rc == 0 || !ran)
            remove_tree(b.dir);
        else
            fprintf(stderr, "fxcc: note: work folder kept for inspection: %s\n", b.dir);
    }
    for (int be = 0; be < BB_COUNT; be++)
        free_outputs(b.rows[be].outputs, b.num_outputs);
    for (int k = 0; b.c_inputs && k < b.num_inputs; k++)
        free(b.c_inputs[k]);
    free(b.c_inputs);
    for (int k = 0; b.inputs && k < b.num_inputs; k++)
        tensor_free(b.inputs[k]);
    free(b.inputs);
    graph_free(b.g);
    graph_free(b.reference);
    return rc;
}

int cmd_bench(int argc, char **argv, LeafLibraries *leaf_libraries)
{
    CommonArgs c = {.opt_level = 2, .leaf_libraries = leaf_libraries, .for_codegen = true};
    BenchOptions o = {.repeat = 20, .min_round_ms = 200, .warmup = 3, .rounds = 3, .rtol = 1e-3,
                      .common = &c};
    const char **paths = fx_alloc_array((size_t)argc, sizeof *paths);
    const char *leaf_sources[MAX_BINDINGS];
    o.leaf_sources = leaf_sources;
    Diag d;
    diag_init(&d);
    int rc = EXIT_USAGE;
    if (!paths) {
        fprintf(stderr, "fxcc: error: out of memory\n");
        return 1;
    }
    for (int i = 2; i < argc; i++) {
        int r = cli_parse_common("bench", argc, argv, &i, &c, &d);
        if (r < 0)
            goto out;
        if (r)
            continue;
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        double v;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(bench_help, stdout);
            fputs(cli_opt_help, stdout);
            fputs(cli_leaf_help, stdout);
            rc = 0;
            goto out;
        } else if (strcmp(a, "--repeat") == 0 || strcmp(a, "--warmup") == 0) {
            bool repeat = a[2] == 'r';
            if (!parse_number(next, repeat ? 1 : 0, 1000000, &v) || v != floor(v)) {
                cli_usage_error("bench", repeat ? "--repeat needs a count from 1 to 1000000, not '%s'"
                                                : "--warmup needs a count from 0 to 1000000, not '%s'",
                                next ? next : "");
                goto out;
            }
            *(repeat ? &o.repeat : &o.warmup) = (long)v;
            i++;
        } else if (strcmp(a, "--rounds") == 0) {
            if (!parse_number(next, 1, MAX_ROUNDS, &v) || v != floor(v)) {
                cli_usage_error("bench", "--rounds needs a count from 1 to 100, not '%s'",
                                next ? next : "");
                goto out;
            }
            o.rounds = (int)v;
            i++;
        } else if (strcmp(a, "--min-round-ms") == 0) {
            if (!parse_number(next, 0, 1e6, &o.min_round_ms)) {
                cli_usage_error("bench", "--min-round-ms needs milliseconds from 0 to 1e6, not '%s'",
                                next ? next : "");
                goto out;
            }
            i++;
        } else if (strcmp(a, "--rtol") == 0) {
            if (!parse_number(next, 0, 1e6, &o.rtol)) {
                cli_usage_error("bench", "bad tolerance '%s'", next ? next : "");
                goto out;
            }
            i++;
        } else if (strcmp(a, "--skip") == 0 && next) {
            if (parse_skip(argv[++i], o.skip))
                goto out;
        } else if (strcmp(a, "--python") == 0 && next) {
            o.python = argv[++i];
        } else if (strcmp(a, "--keep") == 0 && next) {
            o.keep_dir = argv[++i];
        } else if (strcmp(a, "--json") == 0 && next) {
            o.json = argv[++i];
        } else if (strcmp(a, "--leaf-source") == 0 && next && o.num_leaf_sources < MAX_BINDINGS) {
            leaf_sources[o.num_leaf_sources++] = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            cli_usage_error("bench", "unknown or incomplete option '%s'", a);
            goto out;
        } else if (!o.model) {
            o.model = a;
        } else {
            paths[o.num_paths++] = a;
        }
    }
    if (!o.model) {
        cli_usage_error("bench", "%s", "no model given");
        goto out;
    }
    o.input_paths = paths;
    o.opt_level = c.opt_level;
    rc = run_bench(&o, &d);
    if (rc)
        cli_fail(&d);
out:
    free(paths);
    diag_free(&d);
    return rc;
}
