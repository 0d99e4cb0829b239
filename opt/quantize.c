/*
 * quantize.c - the post-training quantization flow that `--quantize int8`
 * runs between the -O1 and the -O2 passes: read the calibration samples,
 * calibrate (calibrate.c), rewrite into QDQ form (pass_quantize.c), then
 * measure what it cost: the interpreter runs the float graph and the
 * quantized one on every sample, and the report gives each layer's SQNR
 * (the quantized value against the float one, errors accumulated from the
 * layers before), the outputs' max error and SQNR, top-1 agreement and
 * accuracy with labels, and the weights' bytes.
 *
 * SQNR = 10 log10(sum x^2 / sum (x - x_q)^2) over all samples' elements.
 * With keep_float_below, the layers whose SQNR fell below it are left float
 * and the float graph is quantized again, once (a layer's SQNR includes its
 * inputs' errors, so iterating would make every later layer float too).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/frontend.h"
#include "opt.h"

void quantize_report_free(QuantizeReport *r)
{
    for (int k = 0; k < r->num_layers; k++) {
        free((char *)r->layers[k].layer);
        free((char *)r->layers[k].node);
    }
    free(r->layers);
    free(r->output_sqnr_db);
    free(r->output_max_abs);
    memset(r, 0, sizeof *r);
}

static double sqnr_db(double signal, double noise)
{
    if (noise <= 0)
        return INFINITY;
    if (signal <= 0)
        return -INFINITY;
    return 10 * log10(signal / noise);
}

/* Ranges of `from` carried over to `to` by node name (to is a clone). */
static FxStatus remap_ranges(const Graph *from, const CalibRanges *r, const Graph *to,
                             CalibRanges *out, Diag *d)
{
    out->count = to->next_id;
    out->seen = fx_alloc_array((size_t)out->count + 1, sizeof *out->seen);
    out->lo = fx_alloc_array((size_t)out->count + 1, sizeof *out->lo);
    out->hi = fx_alloc_array((size_t)out->count + 1, sizeof *out->hi);
    if (!out->seen || !out->lo || !out->hi) {
        calib_ranges_free(out);
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    }
    for (const Node *n = to->root.next; n != &to->root; n = n->next) {
        const Node *src = graph_find(from, n->name);
        if (!src || src->id >= r->count || !r->seen[src->id])
            continue;
        out->seen[n->id] = true;
        out->lo[n->id] = r->lo[src->id];
        out->hi[n->id] = r->hi[src->id];
    }
    return FX_OK;
}

/* --- measuring ---------------------------------------------------------------- */

/* One row being measured: float node `float_id` of the float graph against
 * node `quant_id` of the quantized one. */
typedef struct Probe {
    int float_id, quant_id;
    Tensor *reference; /* the float value on the current sample */
    double signal, noise;
} Probe;

typedef struct Measure {
    Probe *probes;
    int num_probes;
    int *by_float_id, *by_quant_id; /* probe index + 1, 0: none */
} Measure;

static void keep_reference(void *user, const Node *n, Tensor *const *outputs)
{
    Measure *m = user;
    int k = m->by_float_id[n->id] - 1;
    if (k < 0 || !outputs[0] || m->probes[k].reference)
        return;
    m->probes[k].reference = tensor_clone(outputs[0], NULL);
}

static void compare_probe(void *user, const Node *n, Tensor *const *outputs)
{
    Measure *m = user;
    int k = m->by_quant_id[n->id] - 1;
    if (k < 0 || !outputs[0])
        return;
    Probe *p = &m->probes[k];
    if (!p->reference || !type_equal(&p->reference->type, &outputs[0]->type) ||
        outputs[0]->type.dtype != FXRT_DTYPE_FLOAT32)
        return;
    const float *x = p->reference->data, *y = outputs[0]->data;
    for (int64_t i = 0; i < tensor_numel(outputs[0]); i++) {
        double e = (double)y[i] - x[i];
        p->signal += (double)x[i] * x[i];
        p->noise += e * e;
    }
}

static int64_t argmax(const Tensor *t)
{
    int64_t best = 0;
    for (int64_t i = 1; i < tensor_numel(t); i++)
        if (tensor_get_float(t, i) > tensor_get_float(t, best))
            best = i;
    return best;
}

/* Runs both graphs on every sample: probes, outputs, top-1. */
static FxStatus measure_run(const Graph *fg, const Graph *qg, const CalibData *c, Measure *m,
                            const Tensor *labels, QuantizeReport *rep, Diag *d)
{
    int num_outputs = graph_num_outputs(fg);
    Tensor **fo = fx_alloc_array((size_t)num_outputs + 1, sizeof *fo);
    Tensor **qo = fx_alloc_array((size_t)num_outputs + 1, sizeof *qo);
    double *signal = fx_alloc_array((size_t)num_outputs + 1, sizeof *signal);
    double *noise = fx_alloc_array((size_t)num_outputs + 1, sizeof *noise);
    rep->num_outputs = num_outputs;
    rep->output_sqnr_db = fx_alloc_array((size_t)num_outputs + 1, sizeof *rep->output_sqnr_db);
    rep->output_max_abs = fx_alloc_array((size_t)num_outputs + 1, sizeof *rep->output_max_abs);
    FxStatus st = fo && qo && signal && noise && rep->output_sqnr_db && rep->output_max_abs
                      ? FX_OK
                      : diag_error(d, FX_ERR_NOMEM, "out of memory");
    int64_t agree = 0, float_right = 0, int8_right = 0;
    for (int s = 0; s < c->num_samples && st == FX_OK; s++) {
        const Tensor *const *in = (const Tensor *const *)c->samples[s];
        st = interp_run(fg, in, c->num_inputs, fo, num_outputs, keep_reference, m, d);
        if (st == FX_OK)
            st = interp_run(qg, in, c->num_inputs, qo, num_outputs, compare_probe, m, d);
        for (int k = 0; k < m->num_probes; k++) {
            tensor_free(m->probes[k].reference);
            m->probes[k].reference = NULL;
        }
        if (st != FX_OK)
            break;
        for (int k = 0; k < num_outputs; k++) {
            if (fo[k]->type.dtype == FXRT_DTYPE_FLOAT32 && type_equal(&fo[k]->type, &qo[k]->type))
                for (int64_t i = 0; i < tensor_numel(fo[k]); i++) {
                    double x = ((const float *)fo[k]->data)[i],
                           e = ((const float *)qo[k]->data)[i] - x;
                    signal[k] += x * x;
                    noise[k] += e * e;
                    rep->output_max_abs[k] = fmax(rep->output_max_abs[k], fabs(e));
                }
        }
        int64_t ft = argmax(fo[0]), qt = argmax(qo[0]);
        agree += ft == qt;
        if (labels) {
            int64_t want = tensor_get_int(labels, s);
            float_right += ft == want;
            int8_right += qt == want;
        }
        for (int k = 0; k < num_outputs; k++) {
            tensor_free(fo[k]);
            tensor_free(qo[k]);
            fo[k] = qo[k] = NULL;
        }
    }
    if (st == FX_OK) {
        for (int k = 0; k < num_outputs; k++)
            rep->output_sqnr_db[k] = sqnr_db(signal[k], noise[k]);
        rep->top1_agreement = (double)agree / c->num_samples;
        rep->have_labels = labels != NULL;
        rep->float_accuracy = (double)float_right / c->num_samples;
        rep->int8_accuracy = (double)int8_right / c->num_samples;
    }
    free(fo);
    free(qo);
    free(signal);
    free(noise);
    return st;
}

/* The report of quantized graph qg (made from float graph fg by res, with
 * the layers `kept` left float) on the samples. */
static FxStatus measure(const Graph *fg, const Graph *qg, const QuantizeResult *res,
                        const char *const *kept, int num_kept, const CalibData *c,
                        const Tensor *labels, QuantizeReport *rep, Diag *d)
{
    Measure m = {0};
    m.probes = fx_alloc_array((size_t)res->num_values + num_kept + 1, sizeof *m.probes);
    m.by_float_id = fx_alloc_array((size_t)fg->next_id + 1, sizeof *m.by_float_id);
    m.by_quant_id = fx_alloc_array((size_t)qg->next_id + 1, sizeof *m.by_quant_id);
    rep->layers = fx_alloc_array((size_t)res->num_values + num_kept + 1, sizeof *rep->layers);
    FxStatus st = m.probes && m.by_float_id && m.by_quant_id && rep->layers
                      ? FX_OK
                      : diag_error(d, FX_ERR_NOMEM, "out of memory");
    /* Rows in the float graph's order: the quantized layers' DQs and the
     * kept layers themselves. */
    for (const Node *f = fg->root.next; st == FX_OK && f != &fg->root; f = f->next) {
        const Node *qn = NULL, *layer = NULL;
        bool kept_here = false;
        for (int k = 0; k < res->num_values && !qn; k++)
            if (res->values[k].is_layer && strcmp(res->values[k].layer, f->name) == 0) {
                qn = graph_find(qg, res->values[k].dq);
                layer = graph_find(qg, res->values[k].node);
            }
        for (int k = 0; k < num_kept && !qn; k++)
            if (strcmp(kept[k], f->name) == 0) {
                qn = layer = graph_find(qg, f->name);
                kept_here = true;
            }
        if (!qn || m.by_float_id[f->id] || m.by_quant_id[qn->id])
            continue;
        LayerError *row = &rep->layers[rep->num_layers];
        row->layer = fx_strdup(f->name);
        row->node = fx_strdup(layer ? layer->name : f->name);
        if (!row->layer || !row->node) {
            rep->num_layers++; /* freed with the report */
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
            break;
        }
        row->op = layer && layer->op ? layer->op->name : f->op ? f->op->name : "?";
        row->kept_float = kept_here;
        rep->num_layers++;
        m.probes[m.num_probes] = (Probe){.float_id = f->id, .quant_id = qn->id};
        m.by_float_id[f->id] = m.by_quant_id[qn->id] = ++m.num_probes;
    }
    rep->num_samples = c->num_samples;
    if (st == FX_OK)
        st = measure_run(fg, qg, c, &m, labels, rep, d);
    for (int k = 0; st == FX_OK && k < m.num_probes; k++)
        rep->layers[k].sqnr_db = sqnr_db(m.probes[k].signal, m.probes[k].noise);
    free(m.probes);
    free(m.by_float_id);
    free(m.by_quant_id);
    return st;
}

/* --- the flow ------------------------------------------------------------------ */

FxStatus calib_labels_read(const char *path, int num_samples, Tensor **out, Diag *d)
{
    *out = NULL;
    if (!path)
        return FX_OK;
    FxStatus st = tensor_file_read(path, out, d);
    if (st != FX_OK)
        return st;
    DType t = (*out)->type.dtype;
    bool integer = t == FXRT_DTYPE_INT64 || t == FXRT_DTYPE_INT32 || t == FXRT_DTYPE_INT16 ||
                   t == FXRT_DTYPE_INT8 || t == FXRT_DTYPE_UINT8;
    if (integer && tensor_numel(*out) == num_samples)
        return FX_OK;
    st = diag_error(d, FX_ERR_INVALID,
                    "%s: labels must be %d integers, one per calibration sample, not %s[%lld]", path,
                    num_samples, dtype_name(t), (long long)tensor_numel(*out));
    tensor_free(*out);
    *out = NULL;
    return st;
}

/* Weights (float32 constants) that layers named in `kept` read. */
static uint64_t kept_weight_bytes(const Graph *g, const char *const *kept, int num_kept)
{
    uint64_t bytes = 0;
    for (int k = 0; k < num_kept; k++) {
        const Node *n = graph_find(g, kept[k]);
        for (int i = 0; n && i < n->num_args; i++)
            if (n->args[i] && n->args[i]->opcode == FX_OPCODE_GET_ATTR && n->args[i]->value &&
                n->args[i]->value->type.dtype == FXRT_DTYPE_FLOAT32)
                bytes += tensor_nbytes(n->args[i]->value);
    }
    return bytes;
}

/* Quantizes a clone of float graph fg (ranges rf by fg's ids) with `kept`
 * float and measures it; *out gets the quantized graph. */
static FxStatus quantize_once(const Graph *fg, const CalibRanges *rf, const QuantizeConfig *cfg,
                              const char *const *kept, int num_kept, const CalibData *c,
                              const Tensor *labels, QuantizeReport *rep, Graph **out, Diag *d)
{
    *out = NULL;
    Graph *qg = graph_clone(fg, d);
    if (!qg)
        return FX_ERR_NOMEM;
    CalibRanges rq = {0};
    QuantizeResult res = {0};
    FxStatus st = remap_ranges(fg, rf, qg, &rq, d);
    QuantizeOptions qo = {.ranges = &rq, .activation_type = cfg->activation_type,
                          .weight_bits = cfg->weight_bits ? cfg->weight_bits : 8,
                          .keep_float = kept, .num_keep_float = num_kept};
    if (st == FX_OK)
        st = pass_quantize(qg, &qo, &res, d);
    if (st == FX_OK)
        st = graph_propagate_shapes(qg, NULL, 0, d);
    if (st == FX_OK)
        st = graph_lint(qg, true, d);
    if (st == FX_OK && rep) {
        quantize_report_free(rep);
        st = measure(fg, qg, &res, kept, num_kept, c, labels, rep, d);
        rep->float_weight_bytes = res.float_weight_bytes;
        rep->int8_weight_bytes = res.int8_weight_bytes;
        rep->kept_float_weight_bytes = kept_weight_bytes(fg, kept, num_kept);
        rep->num_kept_float = num_kept;
    }
    calib_ranges_free(&rq);
    quantize_result_free(&res);
    if (st != FX_OK) {
        graph_free(qg);
        return st;
    }
    *out = qg;
    return FX_OK;
}

FxStatus quantize_graph(Graph **g, const QuantizeConfig *cfg, QuantizeReport *report, Diag *d)
{
    CalibData c = {0};
    CalibRanges ranges = {0};
    Tensor *labels = NULL;
    QuantizeReport local = {0};
    QuantizeReport *rep = report ? report : &local;
    Graph *qg = NULL, *requantized = NULL;
    const char **kept = NULL;
    int num_kept = 0;
    bool keep = !isnan(cfg->keep_float_below);
    FxStatus st = calib_data_read(*g, cfg->calib_paths, cfg->num_calib_paths, &c, d);
    if (st == FX_OK)
        st = calib_labels_read(cfg->labels, c.num_samples, &labels, d);
    if (st == FX_OK)
        st = calib_run(*g, &c, &cfg->calib, &ranges, d);
    if (st == FX_OK)
        st = quantize_once(*g, &ranges, cfg, NULL, 0, &c, labels,
                           report || keep ? rep : NULL, &qg, d);
    if (st == FX_OK && keep) {
        kept = fx_alloc_array((size_t)rep->num_layers + 1, sizeof *kept);
        if (!kept)
            st = diag_error(d, FX_ERR_NOMEM, "out of memory");
        /* Copies: the report is rewritten by the second round.  A row of a
         * Relu merged into its layer names the layer (row->node). */
        for (int k = 0; st == FX_OK && k < rep->num_layers; k++)
            if (rep->layers[k].sqnr_db < cfg->keep_float_below &&
                !(kept[num_kept++] = fx_strdup(rep->layers[k].node)))
                st = diag_error(d, FX_ERR_NOMEM, "out of memory");
        if (st == FX_OK && num_kept > 0 &&
            (st = quantize_once(*g, &ranges, cfg, kept, num_kept, &c, labels, rep, &requantized,
                                d)) == FX_OK) {
            graph_free(qg);
            qg = requantized;
        }
    }
    if (st == FX_OK) {
        graph_free(*g);
        *g = qg;
    } else {
        graph_free(qg);
    }
    for (int k = 0; kept && k < num_kept; k++)
        free((char *)kept[k]);
    free(kept);
    quantize_report_free(&local);
    tensor_free(labels);
    calib_ranges_free(&ranges);
    calib_data_free(&c);
    return st;
}

/* --- printing ------------------------------------------------------------------ */

static void print_db(FILE *out, double db)
{
    if (isinf(db))
        fprintf(out, "%9s", db > 0 ? "exact" : "-inf");
    else
        fprintf(out, "%9.2f", db);
}

void quantize_report_print(const QuantizeReport *r, FILE *out)
{
    fprintf(out, "\nquantization (int8, QDQ) against the float model, %d calibration sample%s\n",
            r->num_samples, r->num_samples == 1 ? "" : "s");
    fprintf(out, "%9s  %-18s %s\n", "SQNR dB", "op", "layer (output value)");
    for (int k = 0; k < r->num_layers; k++) {
        const LayerError *l = &r->layers[k];
        print_db(out, l->sqnr_db);
        fprintf(out, "  %-18s %s%s\n", l->op, l->layer, l->kept_float ? "  (kept float)" : "");
    }
    for (int k = 0; k < r->num_outputs; k++) {
        fprintf(out, "output %d: SQNR ", k);
        print_db(out, r->output_sqnr_db[k]);
        fprintf(out, " dB, max abs error %.6g\n", r->output_max_abs[k]);
    }
    fprintf(out, "top-1 agreement float vs int8: %.4f", r->top1_agreement);
    if (r->have_labels)
        fprintf(out, "; accuracy float %.4f, int8 %.4f", r->float_accuracy, r->int8_accuracy);
    fprintf(out, "\n");
    double ratio = r->float_weight_bytes
                       ? (double)r->int8_weight_bytes / (double)r->float_weight_bytes
                       : 0;
    fprintf(out,
            "weights of the quantized layers: float %llu bytes, int8 %llu bytes (%.3fx; int8 "
            "weights, int32 biases, scales and zero points)\n",
            (unsigned long long)r->float_weight_bytes, (unsigned long long)r->int8_weight_bytes,
            ratio);
    if (r->num_kept_float)
        fprintf(out, "kept float: %d layer%s, %llu bytes of float weights\n", r->num_kept_float,
                r->num_kept_float == 1 ? "" : "s",
                (unsigned long long)r->kept_float_weight_bytes);
}
