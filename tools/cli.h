/*
 * cli.h - what the files of the fxcc command share (tools/ only): the flags
 * every model-reading command takes, the model loader with those flags, the
 * error printers and the interpreter's timer.  fxcc.c defines these and
 * dispatches the subcommands; bench.c is `fxcc bench`.
 */
#ifndef FXCC_TOOLS_CLI_H
#define FXCC_TOOLS_CLI_H

#include <stdio.h>

#include "opt/pipeline.h"

enum { EXIT_USAGE = 2, MAX_BINDINGS = 64 };

typedef struct CommonArgs {
    ShapeBinding bindings[MAX_BINDINGS];
    int num_bindings;
    const char *const_args[MAX_BINDINGS]; /* "NAME=FILE" */
    int num_consts;
    bool keep_defaults; /* --keep-input-defaults */
    /* Optimization: a level (each command has its default) or a pass list. */
    int opt_level;
    const char *passes;
    const char *print_after, *dot_after;
    bool check_passes;
    bool portable; /* --target portable: the levels leave out the host-only passes */
    bool for_codegen; /* compile, verify: the graph goes to the code generator */
    /* run: the values it feeds, which bind the inputs' symbolic dims */
    const Tensor *const *input_values;
    int num_input_values;
    /* Leaf ops: --leaf OP, --leaf-type VALUE=TYPE, --leaf-lib LIB.so */
    const char *leaf_ops[MAX_BINDINGS], *leaf_types[MAX_BINDINGS], *leaf_libs[MAX_BINDINGS];
    int num_leaf_ops, num_leaf_types, num_leaf_libs;
    LeafLibraries *leaf_libraries; /* main's */
    /* --quantize int8 with --calibrate PATH... and its options */
    bool quantize;
    const char *calib_paths[MAX_BINDINGS];
    QuantizeConfig quant;
    QuantizeReport *quant_report; /* the command's, when it prints the report */
    /* an option only quantization takes (--calibrate-method, ...) was given */
    bool quant_only_flag;
    /* --prune channels:F / magnitude:S[:global], measured on --calibrate's
     * samples with --labels */
    bool prune;
    PruneConfig prune_cfg;
    PruneReport *prune_report; /* the command's, when it prints the report */
} CommonArgs;

/* ------------------------------------------------------------------------- */
/* fxcc.c                                                                     */
/* ------------------------------------------------------------------------- */

/* The help paragraphs on -O/--passes and on leaf ops, shared by the commands. */
extern const char cli_opt_help[], cli_leaf_help[], cli_quantize_help[], cli_prune_help[];

/* Prints "fxcc: error: " fmt (with arg) and the --help hint; returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, const char *arg);
/* Prints d's entries (or "failed" when it has none); returns 1. */
int cli_fail(Diag *d);
/* Parses the flags every model-reading command shares: returns 1 if argv[*i]
 * was one of them (consuming its value), 0 if not, -1 after printing a usage
 * error. */
int cli_parse_common(const char *cmd, int argc, char **argv, int *i, CommonArgs *c, Diag *d);
/* opt/pipeline.c's pipeline_load with the command's flags; *reference (may
 * be NULL) gets the graph before the passes. */
FxStatus cli_load_model(const char *path, const CommonArgs *c, Graph **g, Graph **reference,
                        Diag *d);
/* CLOCK_MONOTONIC in milliseconds. */
double cli_now_ms(void);
/* Runs the interpreter `repeat` times on inputs and stores the median time
 * of one run (the middle two averaged for an even count, as the generated
 * main does) in *median_ms. */
FxStatus cli_time_runs(const Graph *g, Tensor **inputs, int num_inputs, int num_outputs,
                       long repeat, double *median_ms, Diag *d);

/* ------------------------------------------------------------------------- */
/* bench.c                                                                    */
/* ------------------------------------------------------------------------- */

/* fxcc bench MODEL [INPUT...]: argv[0] is "fxcc", argv[1] "bench". */
int cmd_bench(int argc, char **argv, LeafLibraries *leaf_libraries);

#endif
