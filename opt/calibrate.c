/*
 * calibrate.c - the calibration half of post-training quantization: reading
 * the calibration samples, running the interpreter over them with an
 * observer on every float32 value, and choosing each value's range.
 *
 * Three ways to choose a range (CalibMethod): the min and max seen; the
 * (100-p)th and p-th percentiles; and entropy, TensorRT's KL-divergence
 * calibration (also ONNX Runtime's): of the histogram of |x| the threshold
 * whose 128-level quantization loses the least information.  The last two
 * need a histogram over a range known in advance, so they walk the samples
 * twice: min and max first, then the histogram over them.  Histograms have
 * CALIB_BINS bins; a percentile is exact to a bin's width.
 *
 * Sample files follow calib_data_read's convention (opt.h); a file that fits
 * no input, an empty folder, a sample folder missing an input are errors
 * naming the file.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../frontend/frontend.h"
#include "opt.h"

FxStatus calib_method_parse(const char *text, CalibOptions *o, Diag *d)
{
    memset(o, 0, sizeof *o);
    if (strcmp(text, "minmax") == 0) {
        o->method = CALIB_MINMAX;
        return FX_OK;
    }
    if (strcmp(text, "entropy") == 0) {
        o->method = CALIB_ENTROPY;
        return FX_OK;
    }
    if (strncmp(text, "percentile:", 11) == 0) {
        char *end;
        double p = strtod(text + 11, &end);
        if (end != text + 11 && !*end && p > 50 && p <= 100) {
            o->method = CALIB_PERCENTILE;
            o->percentile = p;
            return FX_OK;
        }
    }
    return diag_error(d, FX_ERR_INVALID,
                      "calibration method '%s' is none of minmax, percentile:P (50 < P <= 100) "
                      "and entropy", text);
}

/* --- observers -------------------------------------------------------------- */

void observer_init(Observer *ob)
{
    memset(ob, 0, sizeof *ob);
    ob->lo = INFINITY;
    ob->hi = -INFINITY;
}

void observer_free(Observer *ob)
{
    free(ob->hist);
    ob->hist = NULL;
}

void observer_add_minmax(Observer *ob, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            continue;
        if (x[i] < ob->lo)
            ob->lo = x[i];
        if (x[i] > ob->hi)
            ob->hi = x[i];
    }
}

FxStatus observer_start_histogram(Observer *ob, const CalibOptions *o, Diag *d)
{
    ob->hist = fx_alloc_array(CALIB_BINS, sizeof *ob->hist);
    if (!ob->hist)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    if (ob->lo > ob->hi) {
        ob->hist_lo = ob->hist_hi = 0;
    } else if (o->method == CALIB_ENTROPY) {
        ob->hist_lo = 0;
        ob->hist_hi = fmax(fabs(ob->lo), fabs(ob->hi));
    } else {
        ob->hist_lo = ob->lo;
        ob->hist_hi = ob->hi;
    }
    return FX_OK;
}

void observer_add_histogram(Observer *ob, const CalibOptions *o, const float *x, int64_t n)
{
    double width = (ob->hist_hi - ob->hist_lo) / CALIB_BINS;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            continue;
        double v = o->method == CALIB_ENTROPY ? fabs(x[i]) : x[i];
        long b = width > 0 ? (long)((v - ob->hist_lo) / width) : 0;
        b = b < 0 ? 0 : b >= CALIB_BINS ? CALIB_BINS - 1 : b;
        ob->hist[b] += 1;
    }
}

/* The value below which `fraction` of the histogram's mass lies,
 * interpolated linearly inside its bin. */
static double histogram_quantile(const Observer *ob, double fraction)
{
    double total = 0;
    for (int b = 0; b < CALIB_BINS; b++)
        total += ob->hist[b];
    double width = (ob->hist_hi - ob->hist_lo) / CALIB_BINS, want = fraction * total, seen = 0;
    for (int b = 0; b < CALIB_BINS; b++) {
        if (ob->hist[b] > 0 && seen + ob->hist[b] >= want) {
            double part = (want - seen) / ob->hist[b];
            return ob->hist_lo + width * (b + part);
        }
        seen += ob->hist[b];
    }
    return ob->hist_hi;
}

/* KL(P || Q) where P is hist[0..i) with the mass beyond folded into bin
 * i-1, and Q is hist[0..i) merged into CALIB_ENTROPY_LEVELS levels, each
 * level's mass spread evenly over its nonempty bins: how much a quantizer
 * clipping at bin i loses. */
static double entropy_loss(const double *hist, int i, double outliers, double *q)
{
    for (int level = 0; level < CALIB_ENTROPY_LEVELS; level++) {
        int start = (int)((int64_t)level * i / CALIB_ENTROPY_LEVELS);
        int end = (int)((int64_t)(level + 1) * i / CALIB_ENTROPY_LEVELS);
        double mass = 0;
        int nonempty = 0;
        for (int b = start; b < end; b++) {
            mass += hist[b];
            nonempty += hist[b] > 0;
        }
        for (int b = start; b < end; b++)
            q[b] = hist[b] > 0 ? mass / nonempty : 0;
    }
    double p_total = outliers, q_total = 0;
    for (int b = 0; b < i; b++) {
        p_total += hist[b];
        q_total += q[b];
    }
    if (p_total <= 0 || q_total <= 0)
        return 0;
    double kl = 0;
    for (int b = 0; b < i; b++) {
        double p = (hist[b] + (b == i - 1 ? outliers : 0)) / p_total;
        if (p <= 0)
            continue;
        /* An empty Q bin under P's mass (the folded outliers) costs as if Q
         * held a tiny share there, as TensorRT's smoothing does. */
        double qq = q[b] > 0 ? q[b] / q_total : 1e-4 / q_total;
        kl += p * log(p / qq);
    }
    return kl;
}

static double entropy_threshold(const Observer *ob)
{
    double q[CALIB_BINS], hist[CALIB_BINS];
    /* The bin at 0 holds every zero a Relu made: left as it is, spreading
     * that spike over its level dominates the divergence and the threshold
     * collapses (NVIDIA's pytorch-quantization levels it the same way). */
    memcpy(hist, ob->hist, sizeof hist);
    hist[0] = hist[1];
    double outliers = 0, best_kl = INFINITY;
    int best = CALIB_BINS;
    for (int b = CALIB_ENTROPY_LEVELS; b < CALIB_BINS; b++)
        outliers += hist[b];
    for (int i = CALIB_ENTROPY_LEVELS; i <= CALIB_BINS; i++) {
        double kl = entropy_loss(hist, i, outliers, q);
        /* Ties go to the wider range, which clips nothing more. */
        if (kl <= best_kl) {
            best_kl = kl;
            best = i;
        }
        if (i < CALIB_BINS)
            outliers -= hist[i];
    }
    return ob->hist_hi * best / CALIB_BINS;
}

void observer_range(const Observer *ob, const CalibOptions *o, float *lo, float *hi)
{
    if (ob->lo > ob->hi) {
        *lo = *hi = 0;
        return;
    }
    double a = ob->lo, b = ob->hi;
    if (o->method == CALIB_PERCENTILE && ob->hist) {
        a = histogram_quantile(ob, (100 - o->percentile) / 100);
        b = histogram_quantile(ob, o->percentile / 100);
    } else if (o->method == CALIB_ENTROPY && ob->hist) {
        double t = entropy_threshold(ob);
        a = fmax(a, -t);
        b = fmin(b, t);
    }
    *lo = (float)a;
    *hi = (float)b;
}

/* --- calibration data --------------------------------------------------------- */

void calib_data_free(CalibData *c)
{
    for (int s = 0; s < c->num_samples; s++) {
        for (int k = 0; k < c->num_inputs; k++)
            tensor_free(c->samples[s][k]);
        free(c->samples[s]);
    }
    free(c->samples);
    memset(c, 0, sizeof *c);
}

static FxStatus add_sample(CalibData *c, Tensor **inputs, Diag *d)
{
    Tensor ***grown = fx_realloc_array(c->samples, (size_t)c->num_samples + 1, sizeof *grown);
    if (!grown)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    c->samples = grown;
    c->samples[c->num_samples++] = inputs;
    return FX_OK;
}

/* One sample of input `want` from t, or a stack of them: [N, dims...] or,
 * for a batch of 1, [N, dims[1:]...].  Takes t. */
static FxStatus add_file_samples(CalibData *c, const char *path, Tensor *t, const TensorType *want,
                                 Diag *d)
{
    const TensorType *have = &t->type;
    int64_t count = 0;
    if (have->dtype == want->dtype) {
        if (type_equal(have, want))
            count = -1; /* the tensor is the sample */
        else if (have->rank == want->rank + 1 &&
                 memcmp(have->dims + 1, want->dims, (size_t)want->rank * sizeof *want->dims) == 0)
            count = have->dims[0];
        else if (want->rank >= 1 && want->dims[0] == 1 && have->rank == want->rank &&
                 memcmp(have->dims + 1, want->dims + 1,
                        (size_t)(want->rank - 1) * sizeof *want->dims) == 0)
            count = have->dims[0];
    }
    if (count == 0) {
        char a[128], b[128];
        FxStatus st = diag_error(d, FX_ERR_SHAPE,
                                 "%s: calibration data %s fits neither the input %s nor a stack "
                                 "of it",
                                 path, type_format(have, a, sizeof a),
                                 type_format(want, b, sizeof b));
        tensor_free(t);
        return st;
    }
    if (count < 0) {
        Tensor **one = fx_alloc_array(1, sizeof *one);
        if (!one) {
            tensor_free(t);
            return diag_error(d, FX_ERR_NOMEM, "out of memory");
        }
        one[0] = t;
        FxStatus st = add_sample(c, one, d);
        if (st != FX_OK) {
            tensor_free(one[0]);
            free(one);
        }
        return st;
    }
    size_t bytes = type_nbytes(want);
    FxStatus st = FX_OK;
    for (int64_t s = 0; s < count && st == FX_OK; s++) {
        Tensor **one = fx_alloc_array(1, sizeof *one);
        if (!one || !(one[0] = tensor_new(want, d))) {
            free(one);
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(one[0]->data, (const char *)t->data + (size_t)s * bytes, bytes);
        if ((st = add_sample(c, one, d)) != FX_OK) {
            tensor_free(one[0]);
            free(one);
        }
    }
    tensor_free(t);
    return st;
}

static bool is_tensor_file(const char *name)
{
    size_t n = strlen(name);
    return (n > 4 && strcmp(name + n - 4, ".npy") == 0) ||
           (n > 3 && strcmp(name + n - 3, ".pb") == 0);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of folder `dir` (files or folders as `folders` says) in name
 * order, as "dir/name" strings (caller frees each and the array). */
static FxStatus list_folder(const char *dir, bool folders, char ***out, int *count, Diag *d)
{
    *out = NULL;
    *count = 0;
    DIR *h = opendir(dir);
    if (!h)
        return diag_error(d, FX_ERR_IO, "%s: cannot open the calibration folder", dir);
    FxStatus st = FX_OK;
    struct dirent *e;
    while (st == FX_OK && (e = readdir(h)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *path = fx_malloc(len);
        if (!path) {
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
            break;
        }
        snprintf(path, len, "%s/%s", dir, e->d_name);
        struct stat sb;
        bool keep = stat(path, &sb) == 0 &&
                    (folders ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode) && is_tensor_file(path));
        char **grown = keep ? fx_realloc_array(*out, (size_t)*count + 1, sizeof *grown) : NULL;
        if (keep && !grown)
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
        if (!grown) {
            free(path);
            continue;
        }
        *out = grown;
        (*out)[(*count)++] = path;
    }
    closedir(h);
    if (st == FX_OK && *count > 1)
        qsort(*out, (size_t)*count, sizeof **out, compare_names);
    return st;
}

static void free_list(char **list, int count)
{
    for (int k = 0; k < count; k++)
        free(list[k]);
    free(list);
}

/* DIR/NAME/input_K.npy (or .pb) for every input K. */
static FxStatus read_sample_folder(const Graph *g, const char *folder, CalibData *c, Diag *d)
{
    Tensor **inputs = fx_alloc_array((size_t)c->num_inputs + 1, sizeof *inputs);
    if (!inputs)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    FxStatus st = FX_OK;
    for (int k = 0; k < c->num_inputs && st == FX_OK; k++) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/input_%d.npy", folder, k);
        if (stat(path, &sb) != 0)
            snprintf(path, sizeof path, "%s/input_%d.pb", folder, k);
        if (stat(path, &sb) != 0) {
            st = diag_error(d, FX_ERR_IO, "%s: no input_%d.npy or input_%d.pb for input '%s'",
                            folder, k, k, graph_placeholder(g, k)->target);
            break;
        }
        if ((st = tensor_file_read(path, &inputs[k], d)) != FX_OK)
            break;
        const TensorType *want = &graph_placeholder(g, k)->out_types[0];
        if (!type_equal(&inputs[k]->type, want)) {
            char a[128], b[128];
            st = diag_error(d, FX_ERR_SHAPE, "%s: calibration data %s does not fit input '%s' %s",
                            path, type_format(&inputs[k]->type, a, sizeof a),
                            graph_placeholder(g, k)->target, type_format(want, b, sizeof b));
        }
    }
    if (st == FX_OK)
        st = add_sample(c, inputs, d);
    if (st != FX_OK) {
        for (int k = 0; k < c->num_inputs; k++)
            tensor_free(inputs[k]);
        free(inputs);
    }
    return st;
}

static FxStatus read_path(const Graph *g, const char *path, CalibData *c, Diag *d)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return diag_error(d, FX_ERR_IO, "%s: no such calibration file or folder", path);
    const TensorType *want = &graph_placeholder(g, 0)->out_types[0];
    if (!S_ISDIR(sb.st_mode)) {
        if (c->num_inputs != 1)
            return diag_error(d, FX_ERR_INVALID,
                              "%s: the model has %d inputs: give a folder of sample folders, "
                              "each with input_0.npy ... input_%d.npy",
                              path, c->num_inputs, c->num_inputs - 1);
        Tensor *t = NULL;
        FxStatus st = tensor_file_read(path, &t, d);
        return st == FX_OK ? add_file_samples(c, path, t, want, d) : st;
    }
    char **list;
    int count;
    FxStatus st = list_folder(path, true, &list, &count, d);
    for (int k = 0; k < count && st == FX_OK; k++)
        st = read_sample_folder(g, list[k], c, d);
    free_list(list, count);
    if (st != FX_OK || count > 0)
        return st;
    if (c->num_inputs != 1)
        return diag_error(d, FX_ERR_INVALID, "%s: no sample folders (NAME/input_K.npy) in it",
                          path);
    st = list_folder(path, false, &list, &count, d);
    if (st == FX_OK && count == 0)
        st = diag_error(d, FX_ERR_INVALID, "%s: no .npy or .pb files in it", path);
    for (int k = 0; k < count && st == FX_OK; k++) {
        Tensor *t = NULL;
        if ((st = tensor_file_read(list[k], &t, d)) == FX_OK)
            st = add_file_samples(c, list[k], t, want, d);
    }
    free_list(list, count);
    return st;
}

FxStatus calib_data_read(const Graph *g, const char *const *paths, int num_paths, CalibData *c,
                         Diag *d)
{
    memset(c, 0, sizeof *c);
    c->num_inputs = graph_num_placeholders(g);
    if (c->num_inputs == 0)
        return diag_error(d, FX_ERR_INVALID, "the model has no inputs to calibrate with");
    FxStatus st = FX_OK;
    for (int k = 0; k < num_paths && st == FX_OK; k++)
        st = read_path(g, paths[k], c, d);
    if (st == FX_OK && c->num_samples == 0)
        st = diag_error(d, FX_ERR_INVALID, "no calibration samples given");
    if (st != FX_OK)
        calib_data_free(c);
    return st;
}

/* --- the calibration run -------------------------------------------------------- */

void calib_ranges_free(CalibRanges *r)
{
    free(r->seen);
    free(r->lo);
    free(r->hi);
    memset(r, 0, sizeof *r);
}

typedef struct CalibWalk {
    Observer *obs; /* by node id */
    const CalibOptions *o;
    bool histogram;
} CalibWalk;

static void observe(void *user, const Node *n, Tensor *const *outputs)
{
    CalibWalk *w = user;
    if (n->opcode == FX_OPCODE_GET_ATTR || n->num_outputs != 1 || !outputs[0] ||
        outputs[0]->type.dtype != FXRT_DTYPE_FLOAT32)
        return;
    Observer *ob = &w->obs[n->id];
    if (w->histogram && !ob->hist)
        return;
    const float *x = outputs[0]->data;
    int64_t count = tensor_numel(outputs[0]);
    if (w->histogram)
        observer_add_histogram(ob, w->o, x, count);
    else
        observer_add_minmax(ob, x, count);
}

static FxStatus walk_samples(const Graph *g, const CalibData *c, CalibWalk *w, Diag *d)
{
    int num_outputs = graph_num_outputs(g);
    Tensor **outs = fx_alloc_array((size_t)num_outputs + 1, sizeof *outs);
    if (!outs)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    FxStatus st = FX_OK;
    for (int s = 0; s < c->num_samples && st == FX_OK; s++) {
        st = interp_run(g, (const Tensor *const *)c->samples[s], c->num_inputs, outs,
                        num_outputs, observe, w, d);
        for (int k = 0; k < num_outputs && st == FX_OK; k++)
            tensor_free(outs[k]);
    }
    free(outs);
    return st;
}

FxStatus calib_run(const Graph *g, const CalibData *c, const CalibOptions *o, CalibRanges *r,
                   Diag *d)
{
    memset(r, 0, sizeof *r);
    int count = g->next_id;
    CalibWalk w = {.obs = fx_alloc_array((size_t)count + 1, sizeof *w.obs), .o = o};
    r->count = count;
    r->seen = fx_alloc_array((size_t)count + 1, sizeof *r->seen);
    r->lo = fx_alloc_array((size_t)count + 1, sizeof *r->lo);
    r->hi = fx_alloc_array((size_t)count + 1, sizeof *r->hi);
    FxStatus st = w.obs && r->seen && r->lo && r->hi ? FX_OK
                                                     : diag_error(d, FX_ERR_NOMEM, "out of memory");
    for (int k = 0; w.obs && k < count; k++)
        observer_init(&w.obs[k]);
    if (st == FX_OK)
        st = walk_samples(g, c, &w, d);
    if (st == FX_OK && o->method != CALIB_MINMAX) {
        for (int k = 0; k < count && st == FX_OK; k++)
            if (w.obs[k].lo <= w.obs[k].hi)
                st = observer_start_histogram(&w.obs[k], o, d);
        w.histogram = true;
        if (st == FX_OK)
            st = walk_samples(g, c, &w, d);
    }
    for (int k = 0; st == FX_OK && k < count; k++) {
        r->seen[k] = w.obs[k].lo <= w.obs[k].hi;
        if (r->seen[k])
            observer_range(&w.obs[k], o, &r->lo[k], &r->hi[k]);
    }
    for (int k = 0; w.obs && k < count; k++)
        observer_free(&w.obs[k]);
    free(w.obs);
    if (st != FX_OK)
        calib_ranges_free(r);
    return st;
}
