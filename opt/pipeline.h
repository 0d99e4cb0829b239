/*
 * pipeline.h - from a model file to the graph the code generator takes: load,
 * freeze inputs, propagate shapes, lint, run the passes.  The command line,
 * the conformance runner and `fxcc verify` all call pipeline_load, so the
 * order of these steps and what each is given is written down once.
 */
#ifndef FXCC_OPT_PIPELINE_H
#define FXCC_OPT_PIPELINE_H

#include "../frontend/frontend.h"
#include "opt.h"

/* Called once the model is loaded and the --const inputs are frozen, before
 * shapes are propagated: freezes the inputs the caller has chosen (the
 * conformance runner's frozen-weights tier).  A status other than FX_OK stops
 * the pipeline. */
typedef FxStatus (*FreezeChosen)(Graph *g, void *user, Diag *d);
/* Decides which more inputs to freeze when shape propagation cannot finish
 * (FX_ERR_UNSUPPORTED: a shape depends on an input's data, as `why`, the
 * propagation's errors, says): freezes one or more with graph_freeze_input
 * and returns true to have shapes propagated again, or returns false to give
 * up (the propagation's error stands). */
typedef bool (*FreezePolicy)(Graph *g, const Diag *why, void *user, Diag *d);

typedef struct PipelineOptions {
    const char *model; /* the .onnx file */
    OnnxLoadOptions load;
    /* "NAME=FILE" (.npy or .pb): input NAME becomes a constant holding FILE,
     * like FX's concrete_args. */
    const char *const *const_inputs;
    int num_const_inputs;
    FreezeChosen freeze_chosen; /* may be NULL */
    FreezePolicy freeze_more;   /* may be NULL */
    void *freeze_user;          /* passed to both */
    const ShapeBinding *bindings; /* symbolic dims, as graph_propagate_shapes takes them */
    int num_bindings;
    /* The values `run` will feed, in graph-input order (after the --const
     * ones are taken out): the symbolic dims no binding names take their
     * dims.  May be NULL. */
    const Tensor *const *input_values;
    int num_input_values;
    /* Shared libraries loaded into `leaf_libraries` (the caller's, closed by
     * it after the graph is freed), which the graph's interpreter runs use. */
    const char *const *leaf_libs;
    int num_leaf_libs;
    LeafLibraries *leaf_libraries; /* NULL: none */
    FILE *notes; /* where "op X becomes a leaf op" notes go (NULL: nowhere) */
    /* The passes: a comma-separated list when `passes` is set, else level
     * opt_level (0: none). */
    int opt_level;
    const char *passes;
    const char *print_after, *dot_after; /* see PassOptions */
    bool check_passes;
    bool portable; /* the code is for --target portable (see PassOptions) */
    /* --quantize: after the -O1 passes (whatever opt_level says), the graph is
     * calibrated and rewritten into QDQ form (quantize_graph), then only the
     * passes of level 2 run (the -O1 ones would fold the DequantizeLinear of
     * constant weights back into float), when opt_level is 2.  The reference
     * is then the QDQ graph.  `passes` must be NULL. */
    const QuantizeConfig *quantize;
    QuantizeReport *quantize_report; /* may be NULL */
    /* --prune: right after shapes, before anything else (the passes, or
     * quantization), the imported graph is pruned (prune_graph); the
     * reference is then the pruned graph. */
    const PruneConfig *prune;
    PruneReport *prune_report; /* may be NULL */
    /* The graph is for the code generator: after the passes, Ifs decided at
     * run time are laid out flat (lower_runtime_ifs), which it can emit. */
    bool for_codegen;
    /* Also hand back a copy of the graph as it was before the passes (what
     * `verify` runs as its reference). */
    bool want_reference;
} PipelineOptions;

typedef enum PipelineStage {
    PIPELINE_DONE,
    PIPELINE_LOAD,   /* reading the model, leaf libraries and --const values */
    PIPELINE_SHAPES, /* freezing, shape propagation and lint */
    PIPELINE_PASSES
} PipelineStage;

typedef struct PipelineResult {
    Graph *graph;       /* caller frees */
    Graph *reference;   /* with want_reference; caller frees */
    PipelineStage failed; /* the stage that failed, PIPELINE_DONE on success */
} PipelineResult;

/* Runs the steps in order; on failure no graph is returned (r->graph and
 * r->reference NULL) and r->failed names the step. */
FxStatus pipeline_load(const PipelineOptions *o, PipelineResult *r, Diag *d);

#endif
