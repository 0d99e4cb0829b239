/*
 * build.c - builds and runs a compiled model's `main` with the system C
 * compiler, for `fxcc verify` and the compiled conformance mode.  Commands are
 * run with fork/exec (no shell, so paths need no quoting); the compiler's
 * output is kept in DIR/build.log and its tail is reported on failure.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen.h"

#ifndef FXCC_OPENBLAS_CFLAGS
#define FXCC_OPENBLAS_CFLAGS ""
#endif
#ifndef FXCC_OPENBLAS_LIBS
#define FXCC_OPENBLAS_LIBS "-lopenblas"
#endif

enum { MAX_ARGS = 512 };

typedef struct Argv {
    char *v[MAX_ARGS + 1];
    int n;
    char *storage[64]; /* strings split from flag lists, freed at the end */
    int num_storage;
} Argv;

static void argv_add(Argv *a, const char *s)
{
    if (a->n < MAX_ARGS)
        a->v[a->n++] = (char *)s;
    a->v[a->n] = NULL;
}

/* Adds each space-separated word of flags. */
static void argv_add_words(Argv *a, const char *flags)
{
    if (!flags || !*flags || a->num_storage == 64)
        return;
    char *copy = fx_strdup(flags);
    if (!copy)
        return;
    a->storage[a->num_storage++] = copy;
    for (char *tok = strtok(copy, " \t"); tok; tok = strtok(NULL, " \t"))
        argv_add(a, tok);
}

static void argv_free(Argv *a)
{
    for (int i = 0; i < a->num_storage; i++)
        free(a->storage[i]);
}

int cg_spawn(char *const *argv, const char *log_path, const char *stderr_path)
{
    fflush(NULL); /* or the child would flush our buffered output again */
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (log_path) {
            FILE *f = freopen(log_path, "a", stdout);
            if (f)
                dup2(fileno(stdout), 2);
        }
        if (stderr_path) {
            FILE *f = freopen(stderr_path, "w", stderr);
            (void)f;
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0)
        return -1;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static void report_log_tail(const char *log, Diag *d)
{
    FILE *f = fopen(log, "r");
    if (!f)
        return;
    char line[512];
    int kept = 0;
    while (fgets(line, sizeof line, f) && kept < 12) {
        line[strcspn(line, "\n")] = '\0';
        if (strstr(line, "error") || strstr(line, "warning")) {
            diag_error(d, FX_ERR_RUNTIME, "  %s", line);
            kept++;
        }
    }
    fclose(f);
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool is_source(const char *name) { return has_suffix(name, ".c") || has_suffix(name, ".S"); }
static bool is_header(const char *name) { return has_suffix(name, ".h"); }

/* Sorted files of dir that `wanted` accepts, as "dir/name" (a .S embeds the
 * weights' blob, found through the -I of dir). */
static int list_files(const char *dir, bool (*wanted)(const char *), char ***out)
{
    DIR *dp = opendir(dir);
    int n = 0;
    *out = NULL;
    if (!dp)
        return 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (!wanted(e->d_name))
            continue;
        char **grown = fx_realloc_array(*out, (size_t)(n + 1), sizeof **out);
        if (!grown)
            break;
        *out = grown;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        (*out)[n] = fx_malloc(len);
        if (!(*out)[n])
            break;
        snprintf((*out)[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(dp);
    char **files = *out;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(files[j - 1], files[j]) > 0; j--) {
            char *t = files[j];
            files[j] = files[j - 1];
            files[j - 1] = t;
        }
    return n;
}

static void free_files(char **files, int n)
{
    for (int i = 0; i < n; i++)
        free(files[i]);
    free(files);
}

/* FNV-1a over n bytes, continuing from h. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211u;
    return h;
}

static uint64_t fnv1a_str(uint64_t h, const char *s) { return fnv1a(h, s, strlen(s) + 1); }

/* h continued over the file's name (not its folder) and bytes; false if it
 * cannot be read. */
static bool hash_file(uint64_t *h, const char *path)
{
    const char *slash = strrchr(path, '/');
    *h = fnv1a_str(*h, slash ? slash + 1 : path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    unsigned char buf[8192];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        *h = fnv1a(*h, buf, got);
    bool ok = !ferror(f);
    fclose(f);
    return ok;
}

/* The compiler and flags every file is built with: cc, cflags, the include
 * folders, the host's BLAS definitions. */
static void add_compile_words(Argv *a, const CgBuildOptions *b, const char *inc,
                              const char *inc_rt)
{
    argv_add_words(a, b->cc && *b->cc ? b->cc : "cc");
    argv_add_words(a, b->cflags ? b->cflags : "-std=c99 -O2 -Wall -Wextra -Werror -pedantic");
    argv_add(a, inc);
    argv_add(a, inc_rt);
    if (b->target == FX_TARGET_HOST) {
        argv_add(a, "-DFXRT_USE_CBLAS");
        argv_add_words(a, FXCC_OPENBLAS_CFLAGS);
    }
}

/* The runtime sources of DIR/fxrt as object files in the cache folder
 * $FXCC_RUNTIME_CACHE, each built once per compiler, flags, target, its own
 * name and bytes and those of every runtime header: a generated folder holds
 * only the sources its model reaches, so models share objects file by file
 * (the tests build hundreds of small models, and the runtime is most of each
 * build).  Sets *objects to one object path per source; false when there is
 * no cache or it cannot be used, and the sources are then compiled with the
 * model.  An object is complete once it has its name: it is built under a
 * temporary name and renamed, so concurrent builds of the same key agree. */
static bool cached_runtime(const char *rt, const CgBuildOptions *b, const char *inc,
                           const char *inc_rt, const char *log, char ***objects, int *count,
                           FxStatus *st, Diag *d)
{
    *objects = NULL;
    *count = 0;
    const char *cache = getenv("FXCC_RUNTIME_CACHE");
    if (!cache || !*cache)
        return false;
    char **headers;
    int nh = list_files(rt, is_header, &headers);
    uint64_t common = 1469598103934665603u;
    common = fnv1a_str(common, b->cc ? b->cc : "");
    common = fnv1a_str(common, b->cflags ? b->cflags : "");
    common = fnv1a(common, &b->target, sizeof b->target);
    bool ok = nh > 0;
    for (int i = 0; ok && i < nh; i++)
        ok = hash_file(&common, headers[i]);
    free_files(headers, nh);
    if (!ok || (mkdir(cache, 0777) != 0 && errno != EEXIST))
        return false;
    char **sources;
    int ns = list_files(rt, is_source, &sources);
    char **objs = fx_alloc_array((size_t)(ns > 0 ? ns : 1), sizeof *objs);
    int built = 0;
    for (int i = 0; objs && i < ns && *st == FX_OK; i++) {
        uint64_t h = common;
        if (!hash_file(&h, sources[i]))
            break;
        const char *name = strrchr(sources[i], '/') + 1;
        char obj[4400], tmp[4500];
        snprintf(obj, sizeof obj, "%s/fxrt-%016llx-%.*s.o", cache, (unsigned long long)h,
                 (int)(strlen(name) - 2), name);
        snprintf(tmp, sizeof tmp, "%s.tmp%ld", obj, (long)getpid());
        struct stat sb;
        if (stat(obj, &sb) != 0) {
            Argv a = {0};
            add_compile_words(&a, b, inc, inc_rt);
            argv_add(&a, "-c");
            argv_add(&a, sources[i]);
            argv_add(&a, "-o");
            argv_add(&a, tmp);
            int rc = cg_spawn(a.v, log, NULL);
            argv_free(&a);
            if (rc != 0) {
                unlink(tmp);
                *st = diag_error(d, FX_ERR_RUNTIME, "building the runtime's %s failed (exit %d); "
                                 "see %s", name, rc, log);
                report_log_tail(log, d);
                break;
            }
            /* a concurrent build of the same object may have won the rename */
            if (rename(tmp, obj) != 0)
                unlink(tmp);
        }
        if (!(objs[built] = fx_strdup(obj)))
            break;
        built++;
    }
    free_files(sources, ns);
    if (*st != FX_OK || built != ns) {
        free_files(objs, built);
        return false;
    }
    *objects = objs;
    *count = built;
    return true;
}

FxStatus cg_build_main(const char *dir, const CgBuildOptions *b, Diag *d)
{
    char log[4200], exe[4200], inc[4200], inc_rt[4200], rt[4200];
    snprintf(log, sizeof log, "%s/build.log", dir);
    snprintf(exe, sizeof exe, "%s/main", dir);
    snprintf(inc, sizeof inc, "-I%s", dir);
    snprintf(inc_rt, sizeof inc_rt, "-I%s/fxrt", dir);
    snprintf(rt, sizeof rt, "%s/fxrt", dir);
    unlink(log);
    FxStatus st = FX_OK;
    char **rt_files;
    int nr;
    bool cached = cached_runtime(rt, b, inc, inc_rt, log, &rt_files, &nr, &st, d);
    if (st != FX_OK)
        return st;
    if (!cached)
        nr = list_files(rt, is_source, &rt_files);
    char **model_files;
    int nm = list_files(dir, is_source, &model_files);
    Argv a = {0};
    add_compile_words(&a, b, inc, inc_rt);
    for (int i = 0; i < nm; i++)
        argv_add(&a, model_files[i]);
    for (int i = 0; i < nr; i++)
        argv_add(&a, rt_files[i]);
    argv_add(&a, "-o");
    argv_add(&a, exe);
    if (b->target == FX_TARGET_HOST)
        argv_add_words(&a, FXCC_OPENBLAS_LIBS);
    argv_add(&a, "-lm");
    if (a.n >= MAX_ARGS)
        st = diag_error(d, FX_ERR_INVALID, "too many source files in %s", dir);
    else {
        int rc = cg_spawn(a.v, log, NULL);
        if (rc != 0) {
            st = diag_error(d, FX_ERR_RUNTIME, "building %s failed (exit %d); see %s", exe, rc,
                            log);
            report_log_tail(log, d);
        }
    }
    free_files(model_files, nm);
    free_files(rt_files, nr);
    argv_free(&a);
    return st;
}

/* Runs DIR/main [--repeat N] -o OUT_DIR INPUT...; on failure the head of its
 * stderr goes into d. */
static FxStatus run_main(const char *dir, const char *const *inputs, int num_inputs,
                         const char *out_dir, const char *repeat, Diag *d)
{
    char exe[4200], err[4200];
    snprintf(exe, sizeof exe, "%s/main", dir);
    snprintf(err, sizeof err, "%s/run.stderr", dir);
    Argv a = {0};
    argv_add(&a, exe);
    if (repeat) {
        argv_add(&a, "--repeat");
        argv_add(&a, repeat);
    }
    argv_add(&a, "-o");
    argv_add(&a, out_dir);
    for (int i = 0; i < num_inputs; i++)
        argv_add(&a, inputs[i]);
    if (a.n >= MAX_ARGS)
        return diag_error(d, FX_ERR_INVALID, "too many inputs for %s", exe);
    int rc = cg_spawn(a.v, NULL, err);
    if (rc == 0)
        return FX_OK;
    diag_error(d, FX_ERR_RUNTIME, "the compiled model failed (exit %d)", rc);
    FILE *f = fopen(err, "r");
    if (f) {
        char line[512];
        for (int k = 0; k < 8 && fgets(line, sizeof line, f); k++) {
            line[strcspn(line, "\n")] = '\0';
            diag_error(d, FX_ERR_RUNTIME, "  %s", line);
        }
        fclose(f);
    }
    return FX_ERR_RUNTIME;
}

FxStatus cg_run_main(const char *dir, const char *const *inputs, int num_inputs,
                     const char *out_dir, Diag *d)
{
    return run_main(dir, inputs, num_inputs, out_dir, NULL, d);
}

FxStatus cg_run_main_timed(const char *dir, const char *const *inputs, int num_inputs,
                           const char *out_dir, long repeat, double *ms_per_run, Diag *d)
{
    char count[32], err[4200];
    if (repeat < 1 || repeat > 100000000L)
        return diag_error(d, FX_ERR_INVALID, "repeat count %ld is not from 1 to 100000000", repeat);
    snprintf(count, sizeof count, "%ld", repeat);
    FxStatus st = run_main(dir, inputs, num_inputs, out_dir, count, d);
    if (st != FX_OK)
        return st;
    /* The harness prints one line "ms_per_run=X" (main.c); the last such
     * line wins, anything else on stderr is ignored. */
    snprintf(err, sizeof err, "%s/run.stderr", dir);
    FILE *f = fopen(err, "r");
    if (!f)
        return diag_error(d, FX_ERR_IO, "cannot read %s: %s", err, strerror(errno));
    char line[512];
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "ms_per_run=", 11) != 0)
            continue;
        char *end;
        double v = strtod(line + 11, &end);
        if (end != line + 11 && (*end == '\n' || *end == '\0') && v >= 0 && v < 1e12) {
            *ms_per_run = v;
            found = true;
        }
    }
    fclose(f);
    return found ? FX_OK
                 : diag_error(d, FX_ERR_RUNTIME, "the compiled model printed no ms_per_run=X (see %s)",
                              err);
}
