/*
 * pipeline.c - the one sequence from a model file to an optimized graph:
 * leaf libraries, load, --const freezes, control flow the bindings decide
 * (Ifs folded, loops unrolled) and the refusals left, shape propagation (with
 * the caller's freezing policy when shapes need more constants), lint, a copy
 * for the caller's reference run, then the passes.
 */
#include <string.h>

#include "pipeline.h"

/* Leaf ops fxcc does not implement are worth a note: the model compiles,
 * but calls a function the user must supply. */
static void note_leaves(const Graph *g, FILE *notes)
{
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        if (n->op != &fx_op_Leaf)
            continue;
        const char *type = node_attr_string(n, "leaf_op", ""),
                   *domain = node_attr_string(n, "leaf_domain", "");
        bool default_domain = !*domain || strcmp(domain, "ai.onnx") == 0;
        if (default_domain && op_lookup(type))
            continue;
        char fn[160];
        fprintf(notes,
                "fxcc: note: node %s: op '%s'%s%s%s is not implemented by fxcc; it becomes a leaf "
                "op calling %s (--leaf-lib to run it, --leaf-source to build it)\n",
                n->name, type, default_domain ? "" : " of domain '", default_domain ? "" : domain,
                default_domain ? "" : "'", leaf_function_name(n, fn, sizeof fn));
    }
}

/* "NAME=FILE": input NAME (its ONNX or its node name) becomes a constant
 * with FILE's value. */
static FxStatus freeze_from_file(Graph *g, const char *arg, Diag *d)
{
    const char *eq = strchr(arg, '=');
    if (!eq)
        return diag_error(d, FX_ERR_INVALID, "--const takes NAME=FILE, not '%s'", arg);
    size_t len = (size_t)(eq - arg);
    Node *ph = NULL;
    for (int k = 0; !ph && k < graph_num_placeholders(g); k++) {
        Node *p = graph_placeholder(g, k);
        if ((strlen(p->target) == len && strncmp(p->target, arg, len) == 0) ||
            (strlen(p->name) == len && strncmp(p->name, arg, len) == 0))
            ph = p;
    }
    if (!ph)
        return diag_error(d, FX_ERR_INVALID, "--const names '%.*s', which is not a graph input",
                          (int)len, arg);
    Tensor *value = NULL;
    FxStatus st = tensor_file_read(eq + 1, &value, d);
    if (st != FX_OK)
        return st;
    return graph_freeze_input(g, ph, value, d);
}

static bool has_control_flow(const Graph *g)
{
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        if (n->op == &fx_op_If || n->op == &fx_op_Loop || n->op == &fx_op_Scan)
            return true;
    return false;
}

/* Shapes, with the control flow the bindings decide taken out first: shape
 * propagation (its errors dropped) computes what it can, Ifs with a known
 * condition fold and loops unroll (fold_if.c, unroll_loops.c), until nothing
 * changes; then every op still refused is listed at once, before any other
 * work, and shapes are propagated for real. */
static FxStatus shape_graph(const PipelineOptions *o, Graph *g, Diag *d)
{
    for (int changed = 1; changed > 0 && has_control_flow(g);) {
        Diag quiet;
        diag_init(&quiet);
        (void)graph_propagate_shapes(g, o->bindings, o->num_bindings, &quiet);
        diag_free(&quiet);
        int unrolled = 0;
        if ((changed = fold_constant_ifs(g, d)) < 0 || (unrolled = unroll_loops(g, d)) < 0)
            return d && d->count ? d->entries[d->count - 1].status : FX_ERR_INVALID;
        changed += unrolled;
    }
    FxStatus st = refuse_unsupported(g, d);
    return st != FX_OK ? st : graph_propagate_shapes(g, o->bindings, o->num_bindings, d);
}

/* Symbolic dims of input k that no --shape names take the dims of the value
 * given for it (`fxcc run x.npy`), so a model exported with "any" dims runs
 * on what it is fed. */
static FxStatus bind_from_values(const PipelineOptions *o, Graph *g, Diag *d)
{
    for (int k = 0; k < o->num_input_values && k < graph_num_placeholders(g); k++) {
        Node *ph = graph_placeholder(g, k);
        TensorType *t = &ph->out_types[0];
        const TensorType *v = &o->input_values[k]->type;
        bool named = false;
        for (int b = 0; b < o->num_bindings && !named; b++) {
            size_t len = (size_t)(strrchr(o->bindings[b].input, '=') - o->bindings[b].input);
            named = (strlen(ph->target) == len && !strncmp(ph->target, o->bindings[b].input, len)) ||
                    (strlen(ph->name) == len && !strncmp(ph->name, o->bindings[b].input, len));
        }
        bool symbolic = false;
        for (int i = 0; i < t->rank; i++)
            symbolic |= t->dims[i] < 0;
        if (named || !symbolic)
            continue;
        if (v->rank != t->rank)
            return diag_node_error(d, FX_ERR_SHAPE, ph,
                                   "input '%s' has rank %d but the value given for it has rank "
                                   "%d", ph->target, t->rank, v->rank);
        for (int i = 0; i < t->rank; i++)
            if (t->dims[i] < 0)
                t->dims[i] = v->dims[i];
    }
    return FX_OK;
}

/* Shape propagation, asking the policy for more constants while a shape
 * depends on an input's data.  The failed tries' errors are dropped; a final
 * failure is reported by running the last try again into d. */
static FxStatus propagate(const PipelineOptions *o, Graph *g, Diag *d)
{
    if (!o->freeze_more)
        return shape_graph(o, g, d);
    Diag tries;
    diag_init(&tries);
    FxStatus st;
    while ((st = shape_graph(o, g, &tries)) == FX_ERR_UNSUPPORTED &&
           o->freeze_more(g, &tries, o->freeze_user, d))
        diag_clear(&tries);
    diag_free(&tries);
    return st == FX_OK ? FX_OK : shape_graph(o, g, d);
}

static FxStatus load_and_shape(const PipelineOptions *o, Graph **g, PipelineStage *stage,
                               Diag *d)
{
    *stage = PIPELINE_LOAD;
    FxStatus st = FX_OK;
    for (int k = 0; k < o->num_leaf_libs && st == FX_OK; k++)
        st = o->leaf_libraries
                 ? leaf_libraries_load(o->leaf_libraries, o->leaf_libs[k], d)
                 : diag_error(d, FX_ERR_INVALID, "leaf libraries given without a table to load "
                                                 "them into");
    if (st == FX_OK && (st = onnx_load(o->model, &o->load, g, d)) == FX_OK)
        (*g)->leaf_libraries = o->leaf_libraries;
    for (int k = 0; k < o->num_const_inputs && st == FX_OK; k++)
        st = freeze_from_file(*g, o->const_inputs[k], d);
    if (st == FX_OK && o->freeze_chosen)
        st = o->freeze_chosen(*g, o->freeze_user, d);
    if (st == FX_OK)
        st = bind_from_values(o, *g, d);
    if (st != FX_OK)
        return st;
    *stage = PIPELINE_SHAPES;
    if ((st = propagate(o, *g, d)) == FX_OK)
        st = graph_lint(*g, true, d);
    /* after If folding: a leaf in a branch not taken is gone */
    if (st == FX_OK && o->notes)
        note_leaves(*g, o->notes);
    return st;
}

/* -O1, quantization, then the passes of the chosen level again: the graph is
 * now a QDQ model like one ONNX Runtime's quantizer writes, so qdq-fold (first
 * in the table) turns it into integer kernels before anything folds the
 * weights' DequantizeLinear back to float. */
static FxStatus quantize_and_optimize(const PipelineOptions *o, Graph **g, Graph **reference,
                                      const PassOptions *po, Diag *d)
{
    if (o->passes)
        return diag_error(d, FX_ERR_INVALID, "--quantize runs the -O1 passes, quantization and "
                                             "then the passes of -O; it does not take --passes");
    FxStatus st = opt_run_level(*g, 1, po, d);
    if (st == FX_OK)
        st = quantize_graph(g, o->quantize, o->quantize_report, d);
    if (st == FX_OK && o->want_reference && !(*reference = graph_clone(*g, d)))
        st = FX_ERR_NOMEM;
    if (st != FX_OK)
        return st;
    return opt_run_level(*g, o->opt_level, po, d);
}

FxStatus pipeline_load(const PipelineOptions *o, PipelineResult *r, Diag *d)
{
    memset(r, 0, sizeof *r);
    Graph *g = NULL;
    FxStatus st = load_and_shape(o, &g, &r->failed, d);
    PassOptions po = {.bindings = o->bindings, .num_bindings = o->num_bindings,
                      .check = o->check_passes, .print_after = o->print_after,
                      .dot_after = o->dot_after, .portable = o->portable};
    if (st == FX_OK && o->prune) {
        r->failed = PIPELINE_PASSES;
        st = prune_graph(&g, o->prune, o->prune_report, d);
    }
    if (st == FX_OK && o->quantize) {
        r->failed = PIPELINE_PASSES;
        st = quantize_and_optimize(o, &g, &r->reference, &po, d);
    } else if (st == FX_OK) {
        if (o->want_reference && !(r->reference = graph_clone(g, d)))
            st = FX_ERR_NOMEM;
        r->failed = PIPELINE_PASSES;
        if (st == FX_OK)
            st = o->passes ? opt_run_list(g, o->passes, &po, d)
                           : opt_run_level(g, o->opt_level, &po, d);
    }
    if (st == FX_OK && o->for_codegen && lower_runtime_ifs(g, d) < 0)
        st = d && d->count ? d->entries[d->count - 1].status : FX_ERR_INVALID;
    if (st == FX_OK && o->for_codegen)
        st = graph_lint(g, true, d);
    if (st != FX_OK) {
        graph_free(g);
        graph_free(r->reference);
        r->reference = NULL;
        return st;
    }
    /* Quantized weights are int8 whatever pruning did: no storage figure. */
    if (o->prune && o->prune_report && !o->quantize &&
        !prune_report_note_storage(o->prune_report, g)) {
        graph_free(g);
        graph_free(r->reference);
        r->reference = NULL;
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    }
    r->failed = PIPELINE_DONE;
    r->graph = g;
    return FX_OK;
}
