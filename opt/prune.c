/*
 * prune.c - the pruning flow that `--prune` runs on the imported graph,
 * before any other pass: channel pruning (pass_prune_channels.c) and/or
 * magnitude pruning (pass_prune_magnitude.c) on a copy, then what it cost:
 * parameters and multiply-accumulates before and after (summary.c), and,
 * on the samples given with --calibrate, the outputs of the pruned graph
 * against the unpruned one in the interpreter (max abs error, SQNR), top-1
 * agreement and, with --labels, both accuracies.
 *
 * The reference is the float graph as imported, so the figures say what
 * pruning alone did; quantizing afterwards has its own report.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opt.h"

/* "0.5": a number in [0, 1), the whole text. */
static bool parse_fraction(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= 0 && v < 1))
        return false;
    *out = v;
    return true;
}

FxStatus prune_spec_parse(const char *spec, PruneConfig *c, Diag *d)
{
    static const char usage[] = "expected channels:FRACTION or magnitude:SPARSITY[:global], "
                                "each a number in [0, 1)";
    if (strncmp(spec, "channels:", 9) == 0) {
        if (!parse_fraction(spec + 9, &c->channels))
            return diag_error(d, FX_ERR_INVALID, "--prune '%s': %s", spec, usage);
        return FX_OK;
    }
    if (strncmp(spec, "magnitude:", 10) == 0) {
        char number[64];
        const char *value = spec + 10, *colon = strchr(value, ':');
        size_t len = colon ? (size_t)(colon - value) : strlen(value);
        bool global = colon && strcmp(colon, ":global") == 0;
        if (len >= sizeof number || (colon && !global))
            return diag_error(d, FX_ERR_INVALID, "--prune '%s': %s", spec, usage);
        memcpy(number, value, len);
        number[len] = '\0';
        if (!parse_fraction(number, &c->sparsity))
            return diag_error(d, FX_ERR_INVALID, "--prune '%s': %s", spec, usage);
        c->sparsity_global = global;
        return FX_OK;
    }
    return diag_error(d, FX_ERR_INVALID, "--prune '%s': %s", spec, usage);
}

void prune_report_free(PruneReport *r)
{
    prune_channels_result_free(&r->channels);
    free(r->output_max_abs);
    free(r->output_sqnr_db);
    free(r->sparse_layer_names);
    memset(r, 0, sizeof *r);
}

static int64_t argmax(const Tensor *t)
{
    int64_t best = 0;
    for (int64_t i = 1; i < tensor_numel(t); i++)
        if (tensor_get_float(t, i) > tensor_get_float(t, best))
            best = i;
    return best;
}

/* Both graphs on every sample: output errors, top-1 agreement, accuracy. */
static FxStatus measure(const Graph *ref, const Graph *pruned, const CalibData *c,
                        const Tensor *labels, PruneReport *rep, Diag *d)
{
    int num_outputs = graph_num_outputs(ref);
    Tensor **ro = fx_alloc_array((size_t)num_outputs + 1, sizeof *ro);
    Tensor **po = fx_alloc_array((size_t)num_outputs + 1, sizeof *po);
    double *signal = fx_alloc_array((size_t)num_outputs + 1, sizeof *signal);
    double *noise = fx_alloc_array((size_t)num_outputs + 1, sizeof *noise);
    rep->output_max_abs = fx_alloc_array((size_t)num_outputs + 1, sizeof *rep->output_max_abs);
    rep->output_sqnr_db = fx_alloc_array((size_t)num_outputs + 1, sizeof *rep->output_sqnr_db);
    FxStatus st = ro && po && signal && noise && rep->output_max_abs && rep->output_sqnr_db
                      ? FX_OK
                      : diag_error(d, FX_ERR_NOMEM, "out of memory");
    rep->num_outputs = num_outputs;
    int64_t agree = 0, right_before = 0, right_after = 0;
    for (int s = 0; s < c->num_samples && st == FX_OK; s++) {
        const Tensor *const *in = (const Tensor *const *)c->samples[s];
        st = interp_run(ref, in, c->num_inputs, ro, num_outputs, NULL, NULL, d);
        if (st == FX_OK)
            st = interp_run(pruned, in, c->num_inputs, po, num_outputs, NULL, NULL, d);
        if (st == FX_OK) {
            for (int k = 0; k < num_outputs; k++) {
                if (ro[k]->type.dtype != FXRT_DTYPE_FLOAT32 || !type_equal(&ro[k]->type, &po[k]->type))
                    continue;
                const float *x = ro[k]->data, *y = po[k]->data;
                for (int64_t i = 0; i < tensor_numel(ro[k]); i++) {
                    double e = (double)y[i] - x[i];
                    signal[k] += (double)x[i] * x[i];
                    noise[k] += e * e;
                    rep->output_max_abs[k] = fmax(rep->output_max_abs[k], fabs(e));
                }
            }
            int64_t rt = argmax(ro[0]), pt = argmax(po[0]);
            agree += rt == pt;
            if (labels) {
                int64_t want = tensor_get_int(labels, s);
                right_before += rt == want;
                right_after += pt == want;
            }
        }
        for (int k = 0; k < num_outputs; k++) {
            tensor_free(ro[k]);
            tensor_free(po[k]);
            ro[k] = po[k] = NULL;
        }
    }
    if (st == FX_OK) {
        for (int k = 0; k < num_outputs; k++)
            rep->output_sqnr_db[k] = noise[k] <= 0    ? INFINITY
                                     : signal[k] <= 0 ? -INFINITY
                                                      : 10 * log10(signal[k] / noise[k]);
        rep->num_samples = c->num_samples;
        rep->top1_agreement = (double)agree / c->num_samples;
        rep->have_labels = labels != NULL;
        rep->accuracy_before = (double)right_before / c->num_samples;
        rep->accuracy_after = (double)right_after / c->num_samples;
    }
    free(ro);
    free(po);
    free(signal);
    free(noise);
    return st;
}

FxStatus prune_graph(Graph **g, const PruneConfig *cfg, PruneReport *report, Diag *d)
{
    PruneReport local = {0};
    PruneReport *rep = report ? report : &local;
    prune_report_free(rep);
    CalibData c = {0};
    Tensor *labels = NULL;
    Graph *pruned = NULL;
    FxStatus st = FX_OK;
    if (cfg->num_calib_paths > 0) {
        st = calib_data_read(*g, cfg->calib_paths, cfg->num_calib_paths, &c, d);
        if (st == FX_OK)
            st = calib_labels_read(cfg->labels, c.num_samples, &labels, d);
    } else if (cfg->labels) {
        st = diag_error(d, FX_ERR_INVALID, "--labels needs the samples they label (--calibrate)");
    }
    if (st == FX_OK && !(pruned = graph_clone(*g, d)))
        st = FX_ERR_NOMEM;
    if (st == FX_OK && !isnan(cfg->channels)) {
        rep->did_channels = true;
        st = pass_prune_channels(pruned, cfg->channels, &rep->channels, d);
    }
    if (st == FX_OK && !isnan(cfg->sparsity)) {
        rep->did_magnitude = true;
        st = pass_prune_magnitude(pruned, cfg->sparsity, cfg->sparsity_global, &rep->magnitude,
                                  d);
    }
    if (st == FX_OK)
        st = graph_lint(pruned, true, d);
    if (st == FX_OK) {
        graph_summarize(*g, &rep->before);
        graph_summarize(pruned, &rep->after);
        if (c.num_samples > 0)
            st = measure(*g, pruned, &c, labels, rep, d);
    }
    if (st == FX_OK) {
        graph_free(*g);
        *g = pruned;
    } else {
        graph_free(pruned);
        prune_report_free(rep);
    }
    prune_report_free(&local);
    tensor_free(labels);
    calib_data_free(&c);
    return st;
}

/* Weights of sparse node n as dense floats (rows x inputs per row). */
static int64_t sparse_dense_weights(const Node *n)
{
    int64_t rows = type_numel(node_input_type(n, 1)) - 1;
    const TensorType *x = node_input_type(n, 0);
    if (n->op == &fx_op_SparseGemm)
        return rows * x->dims[x->rank - 1];
    const int64_t *kernel;
    if (node_attr_ints(n, "kernel_shape", &kernel) != 2 || x->rank != 4)
        return 0;
    return rows * x->dims[1] * kernel[0] * kernel[1];
}

bool prune_report_note_storage(PruneReport *r, const Graph *g)
{
    if (!r->did_magnitude)
        return true;
    int64_t dense = 4 * r->magnitude.weights, stored = dense;
    size_t len = 0, cap = 0;
    char *names = NULL;
    int layers = 0;
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        if (n->op != &fx_op_SparseConv && n->op != &fx_op_SparseGemm)
            continue;
        stored -= 4 * sparse_dense_weights(n);
        for (int i = 1; i <= 3; i++)
            stored += type_numel(node_input_type(n, i)) *
                      (int64_t)fxrt_dtype_size(node_input_type(n, i)->dtype);
        size_t need = len + strlen(n->name) + 3;
        if (need > cap) {
            cap = need * 2;
            char *grown = fx_realloc_array(names, cap, 1);
            if (!grown) {
                free(names);
                return false;
            }
            names = grown;
        }
        len += (size_t)sprintf(names + len, "%s%s", layers ? ", " : "", n->name);
        layers++;
    }
    free(r->sparse_layer_names);
    r->sparse_layer_names = names;
    r->sparse_layers = layers;
    r->weight_bytes_dense = dense;
    r->weight_bytes_stored = stored;
    r->storage_known = true;
    return true;
}

static void print_db(FILE *out, double db)
{
    if (isinf(db))
        fprintf(out, "%s", db > 0 ? "exact" : "-inf");
    else
        fprintf(out, "%.2f", db);
}

static double ratio(int64_t after, int64_t before)
{
    return before ? (double)after / (double)before : 1.0;
}

void prune_report_print(const PruneReport *r, FILE *out)
{
    fprintf(out, "\npruning against the unpruned model\n");
    if (r->did_channels) {
        const PruneChannelsResult *c = &r->channels;
        fprintf(out, "channel groups (output channels of the layers listed, pruned together):\n");
        fprintf(out, "%9s %9s  %s\n", "channels", "kept", "layers");
        for (int k = 0; k < c->num_groups; k++) {
            const PruneGroup *gr = &c->groups[k];
            fprintf(out, "%9lld %9lld  %s", (long long)gr->channels, (long long)gr->kept,
                    gr->layers);
            if (gr->why_whole)
                fprintf(out, "  (kept whole: %s%s%s)", gr->why_whole,
                        gr->why_node ? " at " : "", gr->why_node ? gr->why_node : "");
            fprintf(out, "\n");
        }
        fprintf(out, "channels: %lld -> %lld\n", (long long)c->channels_before,
                (long long)c->channels_after);
    }
    if (r->did_magnitude) {
        const PruneMagnitudeResult *m = &r->magnitude;
        fprintf(out, "magnitude: %d layers, %lld weights, zeros %lld -> %lld (sparsity %.4f%s)\n",
                m->layers, (long long)m->weights, (long long)m->zeros_before,
                (long long)m->zeros_after,
                m->weights ? (double)m->zeros_after / (double)m->weights : 0.0,
                r->storage_known ? "" : "; stored dense");
        if (r->storage_known) {
            fprintf(out, "weights of the pruned layers: %lld bytes dense -> %lld bytes as stored "
                         "(%.3fx); %d layer%s sparse%s%s\n",
                    (long long)r->weight_bytes_dense, (long long)r->weight_bytes_stored,
                    ratio(r->weight_bytes_stored, r->weight_bytes_dense), r->sparse_layers,
                    r->sparse_layers == 1 ? "" : "s", r->sparse_layers ? ": " : "",
                    r->sparse_layers ? r->sparse_layer_names : "");
        }
    }
    fprintf(out, "parameters: %lld -> %lld (%.3fx)\n", (long long)r->before.parameters,
            (long long)r->after.parameters, ratio(r->after.parameters, r->before.parameters));
    fprintf(out, "MACs: %lld -> %lld (%.3fx)\n", (long long)r->before.macs,
            (long long)r->after.macs, ratio(r->after.macs, r->before.macs));
    if (!r->num_samples) {
        fprintf(out, "accuracy: not measured (no --calibrate samples)\n");
        return;
    }
    fprintf(out, "on %d sample%s:\n", r->num_samples, r->num_samples == 1 ? "" : "s");
    for (int k = 0; k < r->num_outputs; k++) {
        fprintf(out, "output %d: SQNR ", k);
        print_db(out, r->output_sqnr_db[k]);
        fprintf(out, " dB, max abs error %.6g\n", r->output_max_abs[k]);
    }
    fprintf(out, "top-1 agreement unpruned vs pruned: %.4f", r->top1_agreement);
    if (r->have_labels)
        fprintf(out, "; accuracy unpruned %.4f, pruned %.4f", r->accuracy_before,
                r->accuracy_after);
    fprintf(out, "\n");
}
