/*
 * fxcc.c - the command line.  Each subcommand parses its flags, calls the
 * library and prints; no logic that a library function should hold lives
 * here.  Errors go to stderr as "fxcc: error: ..." with exit status 1 (2 for
 * a bad command line), and a command that writes files writes none of them
 * unless everything before succeeded.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <time.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "opt/pipeline.h"
#include "tools/cli.h"

const char cli_opt_help[] =
    "\n"
    "optimization (see 'fxcc passes'):\n"
    "  -O0, -O1, -O2       no passes; folding and clean-up; everything (fusion too)\n"
    "  --passes A,B,...    run exactly these passes, in this order, instead of a level\n"
    "  --print-after PASS  print the graph after PASS (or after every pass: all)\n"
    "  --dot-after PASS    print the graph as DOT after PASS (or all)\n"
    "  --check-passes      run the interpreter on fixed random inputs before the passes\n"
    "                      and after each one, and fail naming the pass that changed\n"
    "                      the outputs beyond rtol 1e-4, atol 1e-5 (scaled by the\n"
    "                      largest output magnitude above 1)\n";

const char cli_prune_help[] =
    "\n"
    "pruning (on the imported model, before the passes; see 'fxcc prune --help'):\n"
    "  --prune channels:FRACTION\n"
    "                      remove FRACTION of the output channels of every Conv/Gemm/\n"
    "                      MatMul group that can lose them (least L1 norm), and the\n"
    "                      matching inputs of their readers\n"
    "  --prune magnitude:SPARSITY[:global]\n"
    "                      zero the SPARSITY fraction of smallest weights of each layer\n"
    "                      (or of all layers against one threshold); -O2 stores them\n"
    "                      sparse where smaller (and, on the host, faster)\n"
    "  --calibrate PATH, --labels FILE\n"
    "                      samples (and labels) on which the report compares the pruned\n"
    "                      model with the unpruned one\n";

const char cli_leaf_help[] =
    "\n"
    "leaf ops (an op fxcc does not implement becomes a call of fxcc_leaf_OP):\n"
    "  --leaf OP           make op OP (any domain) or DOMAIN.OP a leaf op even if fxcc\n"
    "                      implements it (repeatable)\n"
    "  --leaf-type VALUE=TYPE\n"
    "                      the type of a leaf's output VALUE, e.g. y=float32[1,8], when the\n"
    "                      model's value_info and outputs do not give it (repeatable)\n"
    "  --leaf-lib LIB.so   the interpreter runs leaf ops with LIB's fxcc_leaf_OP functions\n"
    "                      (repeatable; needed by run, verify and --check-passes)\n"
    "  --leaf-source FILE.c\n"
    "                      compile, verify: copy FILE.c, which defines fxcc_leaf_OP\n"
    "                      functions, beside the generated code and build it with the\n"
    "                      model (repeatable)\n";

const char cli_quantize_help[] =
    "\n"
    "post-training int8 quantization (QDQ form, run after the -O1 passes):\n"
    "  --quantize int8     calibrate on --calibrate's samples and rewrite Conv, Gemm,\n"
    "                      MatMul, Add, Mul, pools and Concat into QuantizeLinear/\n"
    "                      DequantizeLinear form: weights int8 per output channel,\n"
    "                      activations per tensor, biases int32\n"
    "  --calibrate PATH    calibration samples (repeatable): .npy/.pb files, each one\n"
    "                      sample or a stack of them along axis 0, or a folder of them\n"
    "                      (single-input models); or a folder of sample folders\n"
    "                      DIR/NAME/input_K.npy, one file per input K\n"
    "  --calibrate-method minmax|percentile:P|entropy\n"
    "                      the activation range: min and max (default), the (100-P)th\n"
    "                      and Pth percentiles, or the KL-divergence threshold\n"
    "  --activation-type uint8|int8\n"
    "                      the activations' type (default uint8)\n"
    "  --weight-bits 8|7   the weights' range: [-127, 127] (default) or [-64, 64],\n"
    "                      faster on x86 CPUs without VNNI (AVX2 only), a little\n"
    "                      less accurate\n"
    "  --labels FILE       compile --report: .npy of integer labels, one per sample,\n"
    "                      for top-1 accuracy float vs int8 (or unpruned vs pruned)\n"
    "  --keep-float-below DB\n"
    "                      leave float the layers whose SQNR against the float model\n"
    "                      is below DB dB\n";

int cli_usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "fxcc: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'fxcc %s --help'.\n", cmd);
    return EXIT_USAGE;
}

int cli_fail(Diag *d)
{
    if (d->count == 0)
        fprintf(stderr, "fxcc: error: failed\n");
    diag_print(d, stderr);
    return 1;
}

/* The quantization flags: 1 if argv[*i] was one, 0 if not, -1 on a bad
 * value. */
static int parse_quantize_flag(const char *cmd, int argc, char **argv, int *i, CommonArgs *c,
                               Diag *d)
{
    const char *a = argv[*i];
    bool known = strcmp(a, "--quantize") == 0 || strcmp(a, "--calibrate") == 0 ||
                 strcmp(a, "--calibrate-method") == 0 || strcmp(a, "--activation-type") == 0 ||
                 strcmp(a, "--weight-bits") == 0 || strcmp(a, "--labels") == 0 ||
                 strcmp(a, "--keep-float-below") == 0;
    if (!known)
        return 0;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "%s needs a value", a);
        return -1;
    }
    const char *v = argv[++*i];
    if (!c->quant.activation_type) {
        c->quant.activation_type = FXRT_DTYPE_UINT8;
        c->quant.keep_float_below = NAN;
    }
    if (strcmp(a, "--calibrate-method") == 0 || strcmp(a, "--activation-type") == 0 ||
        strcmp(a, "--weight-bits") == 0 || strcmp(a, "--keep-float-below") == 0)
        c->quant_only_flag = true;
    if (strcmp(a, "--quantize") == 0) {
        if (strcmp(v, "int8") != 0) {
            cli_usage_error(cmd, "--quantize takes int8, not '%s'", v);
            return -1;
        }
        c->quantize = true;
    } else if (strcmp(a, "--calibrate") == 0) {
        if (c->quant.num_calib_paths == MAX_BINDINGS) {
            cli_usage_error(cmd, "too many %s options", a);
            return -1;
        }
        c->calib_paths[c->quant.num_calib_paths++] = v;
        c->quant.calib_paths = c->calib_paths;
    } else if (strcmp(a, "--calibrate-method") == 0) {
        if (calib_method_parse(v, &c->quant.calib, d) != FX_OK) {
            diag_print(d, stderr);
            return -1;
        }
    } else if (strcmp(a, "--activation-type") == 0) {
        if (strcmp(v, "uint8") != 0 && strcmp(v, "int8") != 0) {
            cli_usage_error(cmd, "--activation-type is uint8 or int8, not '%s'", v);
            return -1;
        }
        c->quant.activation_type = v[0] == 'u' ? FXRT_DTYPE_UINT8 : FXRT_DTYPE_INT8;
    } else if (strcmp(a, "--weight-bits") == 0) {
        if (strcmp(v, "8") != 0 && strcmp(v, "7") != 0) {
            cli_usage_error(cmd, "--weight-bits is 8 or 7, not '%s'", v);
            return -1;
        }
        c->quant.weight_bits = v[0] - '0';
    } else if (strcmp(a, "--labels") == 0) {
        c->quant.labels = v;
    } else {
        char *end;
        double db = strtod(v, &end);
        if (end == v || *end || !isfinite(db)) {
            cli_usage_error(cmd, "--keep-float-below needs a number of dB, not '%s'", v);
            return -1;
        }
        c->quant.keep_float_below = db;
    }
    return 1;
}

/* Parses the flags every model-reading command shares; returns 1 if argv[*i]
 * was one of them, 0 if not, -1 on a bad value. */
int cli_parse_common(const char *cmd, int argc, char **argv, int *i, CommonArgs *c, Diag *d)
{
    const char *a = argv[*i];
    if (strcmp(a, "--shape") == 0 || strncmp(a, "--shape=", 8) == 0) {
        const char *v = a[7] == '=' ? a + 8 : (*i + 1 < argc ? argv[++*i] : NULL);
        if (!v) {
            cli_usage_error(cmd, "%s needs NAME=DIMS", "--shape");
            return -1;
        }
        if (c->num_bindings == MAX_BINDINGS) {
            cli_usage_error(cmd, "too many %s options", "--shape");
            return -1;
        }
        if (shape_binding_parse(v, &c->bindings[c->num_bindings], d) != FX_OK) {
            diag_print(d, stderr);
            return -1;
        }
        c->num_bindings++;
        return 1;
    }
    if (strcmp(a, "--const") == 0) {
        const char *v = *i + 1 < argc ? argv[++*i] : NULL;
        if (!v || !strchr(v, '=') || v[0] == '=') {
            cli_usage_error(cmd, "%s needs NAME=FILE", "--const");
            return -1;
        }
        if (c->num_consts == MAX_BINDINGS) {
            cli_usage_error(cmd, "too many %s options", "--const");
            return -1;
        }
        c->const_args[c->num_consts++] = v;
        return 1;
    }
    if (strcmp(a, "--keep-input-defaults") == 0) {
        c->keep_defaults = true;
        return 1;
    }
    if (strncmp(a, "-O", 2) == 0) {
        const char *v = a[2] ? a + 2 : (*i + 1 < argc ? argv[++*i] : "");
        if (strlen(v) != 1 || v[0] < '0' || v[0] > '2') {
            cli_usage_error(cmd, "the optimization level is -O0, -O1 or -O2, not '%s'", a);
            return -1;
        }
        c->opt_level = v[0] - '0';
        return 1;
    }
    const char **slot = strcmp(a, "--passes") == 0        ? &c->passes
                        : strcmp(a, "--print-after") == 0 ? &c->print_after
                        : strcmp(a, "--dot-after") == 0   ? &c->dot_after
                                                          : NULL;
    if (slot) {
        if (*i + 1 >= argc) {
            cli_usage_error(cmd, "%s needs a pass name", a);
            return -1;
        }
        const char *v = argv[++*i];
        if (slot != &c->passes && strcmp(v, "all") != 0 && !pass_lookup(v)) {
            cli_usage_error(cmd, "no pass named '%s' ('fxcc passes' lists them)", v);
            return -1;
        }
        *slot = v;
        return 1;
    }
    if (strcmp(a, "--check-passes") == 0) {
        c->check_passes = true;
        return 1;
    }
    if (strcmp(a, "--prune") == 0) {
        if (*i + 1 >= argc) {
            cli_usage_error(cmd, "%s needs channels:FRACTION or magnitude:SPARSITY", a);
            return -1;
        }
        if (!c->prune) {
            c->prune_cfg.channels = NAN;
            c->prune_cfg.sparsity = NAN;
            c->prune = true;
        }
        if (prune_spec_parse(argv[++*i], &c->prune_cfg, d) != FX_OK) {
            diag_print(d, stderr);
            return -1;
        }
        return 1;
    }
    int q = parse_quantize_flag(cmd, argc, argv, i, c, d);
    if (q)
        return q;
    const char **list = strcmp(a, "--leaf") == 0        ? c->leaf_ops
                        : strcmp(a, "--leaf-type") == 0 ? c->leaf_types
                        : strcmp(a, "--leaf-lib") == 0  ? c->leaf_libs
                                                        : NULL;
    if (list) {
        int *count = list == c->leaf_ops     ? &c->num_leaf_ops
                     : list == c->leaf_types ? &c->num_leaf_types
                                             : &c->num_leaf_libs;
        if (*i + 1 >= argc) {
            cli_usage_error(cmd, "%s needs a value", a);
            return -1;
        }
        if (*count == MAX_BINDINGS) {
            cli_usage_error(cmd, "too many %s options", a);
            return -1;
        }
        list[(*count)++] = argv[++*i];
        return 1;
    }
    return 0;
}

/* The pipeline (opt/pipeline.c) with this command's flags; the leaf
 * libraries go into the table main owns.  *reference (may be NULL) gets the
 * graph before the passes. */
FxStatus cli_load_model(const char *path, const CommonArgs *c, Graph **g, Graph **reference,
                           Diag *d)
{
    if (c->quantize && c->quant.num_calib_paths == 0)
        return diag_error(d, FX_ERR_INVALID, "--quantize needs calibration data (--calibrate PATH)");
    if (!c->quantize && c->quant_only_flag)
        return diag_error(d, FX_ERR_INVALID, "--calibrate-method, --activation-type, "
                                             "--weight-bits and --keep-float-below need "
                                             "--quantize int8");
    if (!c->quantize && !c->prune && c->quant.activation_type)
        return diag_error(d, FX_ERR_INVALID, "--calibrate and --labels need --quantize int8 "
                                             "or --prune");
    PruneConfig prune = c->prune_cfg;
    prune.calib_paths = c->quant.calib_paths;
    prune.num_calib_paths = c->quant.num_calib_paths;
    prune.labels = c->quant.labels;
    PipelineOptions po = {
        .model = path,
        .load = {.keep_input_defaults = c->keep_defaults,
                 .unknown_ops_as_leaves = true,
                 .leaf_ops = c->leaf_ops, .num_leaf_ops = c->num_leaf_ops,
                 .leaf_types = c->leaf_types, .num_leaf_types = c->num_leaf_types},
        .const_inputs = c->const_args, .num_const_inputs = c->num_consts,
        .bindings = c->bindings, .num_bindings = c->num_bindings,
        .leaf_libs = c->leaf_libs, .num_leaf_libs = c->num_leaf_libs,
        .leaf_libraries = c->leaf_libraries,
        .notes = stderr,
        .opt_level = c->opt_level, .passes = c->passes,
        .print_after = c->print_after, .dot_after = c->dot_after,
        .check_passes = c->check_passes, .portable = c->portable,
        .for_codegen = c->for_codegen,
        .input_values = c->input_values, .num_input_values = c->num_input_values,
        .want_reference = reference != NULL,
        .quantize = c->quantize ? &c->quant : NULL, .quantize_report = c->quant_report,
        .prune = c->prune ? &prune : NULL, .prune_report = c->prune_report};
    PipelineResult r;
    FxStatus st = pipeline_load(&po, &r, d);
    *g = r.graph;
    if (reference)
        *reference = r.reference;
    return st;
}

/* --- inspect -------------------------------------------------------------- */

static const char inspect_help[] =
    "usage: fxcc inspect MODEL.onnx [--tabular] [--dot FILE] [--shape NAME=DIMS]...\n"
    "\n"
    "Loads MODEL.onnx, propagates shapes and prints the graph in FX's text form\n"
    "(or as a table with --tabular), followed by a summary: nodes per op,\n"
    "parameters and multiply-accumulates.  With -O1 or -O2 the graph is printed\n"
    "after that level's passes (default -O0: as imported).\n"
    "\n"
    "  --tabular           print the graph like FX's print_tabular\n"
    "  --dot FILE          also write the graph as Graphviz DOT to FILE\n"
    "  --shape NAME=DIMS   bind the symbolic dimensions of input NAME,\n"
    "                      e.g. --shape input=1x3x224x224 (repeatable)\n"
    "  --const NAME=FILE   input NAME becomes a constant holding FILE (.npy or\n"
    "                      .pb), like FX's concrete_args: shapes computed from it\n"
    "                      become static (repeatable)\n"
    "  --keep-input-defaults\n"
    "                      inputs that also have an initializer (models from older\n"
    "                      exporters, IR 3) stay inputs, the initializer their default;\n"
    "                      without it they are constants like any initializer\n";

static int cmd_inspect(int argc, char **argv, LeafLibraries *leaf_libraries)
{
    CommonArgs c = {.leaf_libraries = leaf_libraries};
    const char *model = NULL, *dot = NULL;
    bool tabular = false;
    Diag d;
    diag_init(&d);
    int rc = 0;
    for (int i = 2; i < argc; i++) {
        int r = cli_parse_common("inspect", argc, argv, &i, &c, &d);
        if (r < 0) {
            diag_free(&d);
            return EXIT_USAGE;
        }
        if (r)
            continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(inspect_help, stdout);
            fputs(cli_opt_help, stdout);
            fputs(cli_quantize_help, stdout);
            fputs(cli_leaf_help, stdout);
            return 0;
        } else if (strcmp(argv[i], "--tabular") == 0) {
            tabular = true;
        } else if (strcmp(argv[i], "--dot") == 0) {
            if (i + 1 >= argc)
                return cli_usage_error("inspect", "%s needs a file name", "--dot");
            dot = argv[++i];
        } else if (argv[i][0] == '-') {
            return cli_usage_error("inspect", "unknown option '%s'", argv[i]);
        } else if (!model) {
            model = argv[i];
        } else {
            return cli_usage_error("inspect", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!model)
        return cli_usage_error("inspect", "%s", "no model given");
    Graph *g = NULL;
    if (cli_load_model(model, &c, &g, NULL, &d) != FX_OK) {
        rc = cli_fail(&d);
        diag_free(&d);
        return rc;
    }
    if (dot) {
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        bool cut = !mem; /* a stream that could not grow: the DOT text is cut short */
        if (mem) {
            graph_print_dot(g, mem);
            cut = ferror(mem) != 0;
            cut = fclose(mem) != 0 || cut;
        }
        if (cut)
            diag_error(&d, FX_ERR_NOMEM, "out of memory printing %s", dot);
        else
            file_write_all(dot, text, len, &d);
        free(text);
        if (d.count) {
            rc = cli_fail(&d);
            graph_free(g);
            diag_free(&d);
            return rc;
        }
    }
    if (tabular)
        graph_print_tabular(g, stdout);
    else
        graph_print(g, stdout);
    graph_print_summary(g, stdout);
    graph_free(g);
    diag_free(&d);
    return 0;
}

/* --- run ------------------------------------------------------------------ */

static const char run_help[] =
    "usage: fxcc run MODEL.onnx INPUT... -o DIR [--shape NAME=DIMS]...\n"
    "\n"
    "Runs MODEL.onnx in the reference interpreter (fxcc's eager mode; -O0 unless\n"
    "told otherwise) on the inputs, given as .npy or ONNX TensorProto .pb files in\n"
    "graph-input order, and writes DIR/output_0.npy, DIR/output_1.npy, ...  Nothing\n"
    "is written to DIR unless the whole run succeeded.\n"
    "\n"
    "  -o DIR              output folder (created if missing)\n"
    "  --repeat N          then run N more times and print ms_per_run=X (the median)\n"
    "                      on stderr\n"
    "  --shape NAME=DIMS   bind symbolic dimensions of input NAME (repeatable); an\n"
    "                      input without one takes them from the INPUT given for it\n"
    "  --const NAME=FILE   input NAME becomes a constant holding FILE; it is then\n"
    "                      not given among the INPUTs (repeatable)\n"
    "  --keep-input-defaults\n"
    "                      inputs that also have an initializer (IR 3) stay inputs to\n"
    "                      give among the INPUTs; without it they are constants\n";

static FxStatus ensure_dir(const char *dir, Diag *d)
{
    struct stat sb;
    if (stat(dir, &sb) == 0)
        return S_ISDIR(sb.st_mode) ? FX_OK
                                   : diag_error(d, FX_ERR_IO, "%s exists and is not a folder", dir);
    if (mkdir(dir, 0777) != 0)
        return diag_error(d, FX_ERR_IO, "cannot create folder %s: %s", dir, strerror(errno));
    return FX_OK;
}

double cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

FxStatus cli_time_runs(const Graph *g, Tensor **inputs, int num_inputs, int num_outputs,
                       long repeat, double *median_ms, Diag *d)
{
    double *ms = fx_alloc_array((size_t)repeat, sizeof *ms);
    Tensor **outs = fx_alloc_array((size_t)num_outputs + 1, sizeof *outs);
    FxStatus st = ms && outs ? FX_OK : diag_error(d, FX_ERR_NOMEM, "out of memory");
    for (long r = 0; r < repeat && st == FX_OK; r++) {
        double t0 = cli_now_ms();
        st = interp_run(g, (const Tensor *const *)inputs, num_inputs, outs, num_outputs, NULL,
                        NULL, d);
        ms[r] = cli_now_ms() - t0;
        for (int k = 0; k < num_outputs; k++)
            tensor_free(outs[k]);
    }
    if (st == FX_OK) {
        qsort(ms, (size_t)repeat, sizeof *ms, compare_doubles);
        *median_ms = repeat % 2 ? ms[repeat / 2] : (ms[repeat / 2 - 1] + ms[repeat / 2]) / 2;
    }
    free(ms);
    free(outs);
    return st;
}

static int cmd_run(int argc, char **argv, LeafLibraries *leaf_libraries)
{
    CommonArgs c = {.leaf_libraries = leaf_libraries};
    const char *model = NULL, *out_dir = NULL;
    const char **input_paths = fx_alloc_array((size_t)argc, sizeof *input_paths);
    int num_inputs = 0;
    long repeat = 0;
    Diag d;
    diag_init(&d);
    if (!input_paths)
        return 1;
    for (int i = 2; i < argc; i++) {
        int r = cli_parse_common("run", argc, argv, &i, &c, &d);
        if (r < 0) {
            free(input_paths);
            diag_free(&d);
            return EXIT_USAGE;
        }
        if (r)
            continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(run_help, stdout);
            fputs(cli_opt_help, stdout);
            fputs(cli_quantize_help, stdout);
            fputs(cli_leaf_help, stdout);
            free(input_paths);
            return 0;
        } else if (strcmp(argv[i], "-o") == 0) {
            if (i + 1 >= argc) {
                free(input_paths);
                return cli_usage_error("run", "%s needs a folder", "-o");
            }
            out_dir = argv[++i];
        } else if (strcmp(argv[i], "--repeat") == 0) {
            char *end = NULL;
            repeat = i + 1 < argc ? strtol(argv[++i], &end, 10) : -1;
            if (!end || *end || repeat < 1 || repeat > 1000000) {
                free(input_paths);
                return cli_usage_error("run", "--repeat needs a count from 1 to 1000000, not '%s'",
                                   argv[i]);
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            free(input_paths);
            return cli_usage_error("run", "unknown option '%s'", argv[i]);
        } else if (!model) {
            model = argv[i];
        } else {
            input_paths[num_inputs++] = argv[i];
        }
    }
    if (!model || !out_dir) {
        free(input_paths);
        return cli_usage_error("run", "%s", model ? "no output folder given (-o DIR)" : "no model given");
    }
    int rc = 1;
    Graph *g = NULL;
    Tensor **inputs = fx_alloc_array((size_t)num_inputs + 1, sizeof *inputs);
    Tensor **outputs = NULL;
    uint8_t **blobs = NULL;
    size_t *blob_lens = NULL;
    int num_outputs = 0;
    if (!inputs)
        goto done;
    /* read first: their shapes bind the model's symbolic dims */
    for (int k = 0; k < num_inputs; k++)
        if (tensor_file_read(input_paths[k], &inputs[k], &d) != FX_OK)
            goto done;
    c.input_values = (const Tensor *const *)inputs;
    c.num_input_values = num_inputs;
    if (cli_load_model(model, &c, &g, NULL, &d) != FX_OK)
        goto done;
    int want = graph_num_placeholders(g);
    if (num_inputs > want) {
        diag_error(&d, FX_ERR_INVALID, "%s takes %d inputs, %d given", model, want, num_inputs);
        goto done;
    }
    num_outputs = graph_num_outputs(g);
    outputs = fx_alloc_array((size_t)num_outputs + 1, sizeof *outputs);
    blobs = fx_alloc_array((size_t)num_outputs + 1, sizeof *blobs);
    blob_lens = fx_alloc_array((size_t)num_outputs + 1, sizeof *blob_lens);
    if (!outputs || !blobs || !blob_lens) {
        diag_error(&d, FX_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (interp_run(g, (const Tensor *const *)inputs, num_inputs, outputs, num_outputs, NULL,
                   NULL, &d) != FX_OK)
        goto done;
    if (repeat > 0) {
        /* the figure bench/bench.py compares with the generated code's */
        double median;
        if (cli_time_runs(g, inputs, num_inputs, num_outputs, repeat, &median, &d) != FX_OK)
            goto done;
        fprintf(stderr, "ms_per_run=%.4f\n", median);
    }
    /* Serialize everything before touching DIR, so a failure leaves it as it was. */
    for (int k = 0; k < num_outputs; k++)
        if (npy_write_buffer(outputs[k], &blobs[k], &blob_lens[k], &d) != FX_OK)
            goto done;
    if (ensure_dir(out_dir, &d) != FX_OK)
        goto done;
    for (int k = 0; k < num_outputs; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/output_%d.npy", out_dir, k);
        if (file_write_all(path, blobs[k], blob_lens[k], &d) != FX_OK)
            goto done;
    }
    rc = 0;
done:
    if (rc)
        cli_fail(&d);
    for (int k = 0; k < num_inputs; k++)
        tensor_free(inputs ? inputs[k] : NULL);
    for (int k = 0; k < num_outputs; k++) {
        tensor_free(outputs ? outputs[k] : NULL);
        free(blobs ? blobs[k] : NULL);
    }
    free(inputs);
    free(outputs);
    free(blobs);
    free(blob_lens);
    free(input_paths);
    graph_free(g);
    diag_free(&d);
    return rc;
}

/* --- compile ------------------------------------------------------------- */

static const char compile_help[] =
    "usage: fxcc compile MODEL.onnx -o DIR [--name NAME] [--target host|portable|cortex-m]\n"
    "                    [--weights c|incbin] [--weights-section SECTION] [--arena-section SECTION]\n"
    "                    [--shape NAME=DIMS]... [--const NAME=FILE]... [--emit-main] [--report]\n"
    "                    [--report-json FILE] [--budget flash=SIZE,ram=SIZE] [--cpu CORE]\n"
    "                    [--runtime copy|full|shared] [--quiet]\n"
    "\n"
    "Writes standalone C for MODEL.onnx into DIR: NAME.h (arena size, input and output\n"
    "shapes and types, the entry point NAME_run), NAME.c (one block per node, and the\n"
    "weights up to 4 KiB), the larger weights (NAME_weights.bin and NAME_weights.S, or\n"
    "NAME_weights.c), CMakeLists.txt, NAME.mk (a Makefile fragment) and fxrt/, the\n"
    "runtime's headers and the sources the model calls.  Nothing in DIR changes unless everything succeeded (a new DIR\n"
    "appears whole or not at all; its parent folders are created), and no file\n"
    "depends on the folder the model or DIR are in.\n"
    "\n"
    "  --name NAME         C prefix of every generated symbol (default: the model's file name)\n"
    "  --target host       GEMM through OpenBLAS (default)\n"
    "  --target portable   pure C99, no OpenBLAS: builds for a microcontroller\n"
    "  --target cortex-m   portable with the runtime's small kernels and only the\n"
    "                      activations the model uses (fxrt/fxrt_config.h): less flash\n"
    "  --weights incbin    weights above 4 KiB as raw bytes in NAME_weights.bin, embedded by\n"
    "                      NAME_weights.S with .incbin (GNU as, Clang, arm-none-eabi-gcc);\n"
    "                      the default when they total more than 256 KiB\n"
    "  --weights c         weights above 4 KiB as C arrays in NAME_weights.c, for toolchains\n"
    "                      without GNU-style assembly; the default for smaller models\n"
    "  --weights-section SECTION\n"
    "                      the blob's section (default .rodata.NAME_weights), and the C\n"
    "                      arrays' too (an attribute, GCC and Clang)\n"
    "  --arena-section SECTION\n"
    "                      NAME.h's NAME_ARENA_PLACEMENT puts the arena the caller declares\n"
    "                      in SECTION (GCC and Clang; the linker script must map it)\n"
    "  --cpu CORE          cortex-m0plus, cortex-m4, cortex-m7, cortex-m33 or cortex-m55:\n"
    "                      NAME.mk (NAME_ARCH_FLAGS) and CMakeLists.txt record its\n"
    "                      arm-none-eabi-gcc flags; the int8 GEMM uses SMLAD on cores\n"
    "                      with the DSP extension (all but cortex-m0plus)\n"
    "  --runtime copy      fxrt/ holds the runtime's headers and the sources NAME.c\n"
    "                      reaches (the default)\n"
    "  --runtime full      fxrt/ holds every runtime source\n"
    "  --runtime shared    no fxrt/: NAME.c builds against the installed runtime\n"
    "                      (find_package(fxcc) gives fxcc::runtime; pkg-config\n"
    "                      fxcc-runtime); --target host only\n"
    "  --quiet             print nothing on success\n"
    "  --emit-main         also main.c and fxio.[ch]: a `main` that reads .npy/.pb inputs,\n"
    "                      writes DIR/output_K.npy and times runs with --repeat N\n"
    "  --report            print the memory plan and a per-node table (bytes, MACs); with\n"
    "                      --target portable also the weights by layer, their total\n"
    "                      (flash) and the arena with its largest scratch (RAM), and\n"
    "                      the firmware estimate per layer and in total: code (the\n"
    "                      runtime's functions it reaches, measured on a Cortex-M4F),\n"
    "                      weights, arena, scratch, library data, output buffers, stack\n"
    "  --report-json FILE  the firmware estimate as JSON (--target portable or cortex-m)\n"
    "  --budget flash=SIZE,ram=SIZE\n"
    "                      fail, writing nothing, when the weights exceed flash or the\n"
    "                      arena exceeds ram (either may be left out; SIZE in bytes, or\n"
    "                      with K or M for 1024 or 1048576); code, stack and the caller's\n"
    "                      buffers are not counted\n"
    "  -O0, -O1, -O2       optimization level (default -O2; see below)\n"
    "  --shape, --const, --keep-input-defaults\n"
    "                      as for `fxcc inspect`\n";

static void default_name(const char *model, char *buf, size_t cap)
{
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;
    size_t n = 0;
    for (const char *p = base; *p && *p != '.' && n + 1 < cap && n < 60; p++)
        buf[n++] = (isalnum((unsigned char)*p) || *p == '_') ? *p : '_';
    buf[n] = '\0';
    if (n == 0 || isdigit((unsigned char)buf[0]))
        snprintf(buf, cap, "model");
}

static int parse_target(const char *cmd, const char *v, FxTarget *t)
{
    if (v && strcmp(v, "host") == 0)
        *t = FX_TARGET_HOST;
    else if (v && strcmp(v, "portable") == 0)
        *t = FX_TARGET_PORTABLE;
    else if (v && strcmp(v, "cortex-m") == 0)
        *t = FX_TARGET_CORTEX_M;
    else
        return cli_usage_error(cmd, "--target is host, portable or cortex-m, not '%s'",
                               v ? v : "");
    return 0;
}

/* "flash=96K,ram=40K": either key may be left out, each at most once. */
static int parse_budget(const char *cmd, const char *v, CgOptions *co)
{
    if (!v || !*v)
        return cli_usage_error(cmd, "--budget needs flash=SIZE,ram=SIZE, not '%s'", v ? v : "");
    const char *p = v;
    while (*p) {
        size_t *slot = strncmp(p, "flash=", 6) == 0 ? &co->flash_budget
                       : strncmp(p, "ram=", 4) == 0 ? &co->ram_budget
                                                    : NULL;
        if (!slot)
            return cli_usage_error(cmd, "--budget '%s': expected flash=SIZE and/or ram=SIZE, "
                                   "comma-separated", v);
        const char *digits = strchr(p, '=') + 1;
        char *end;
        errno = 0;
        unsigned long long n = isdigit((unsigned char)*digits) ? strtoull(digits, &end, 10) : 0;
        if (!isdigit((unsigned char)*digits) || errno)
            return cli_usage_error(cmd, "--budget '%s': a SIZE is bytes, or with K or M", v);
        unsigned long long scale = *end == 'K' ? 1024ull : *end == 'M' ? 1024ull * 1024 : 1;
        if (scale != 1)
            end++;
        if ((*end && (*end != ',' || !end[1])) || n == 0 || n > SIZE_MAX / scale || *slot)
            return cli_usage_error(cmd, "--budget '%s': each SIZE is positive and given once "
                                   "(bytes, or with K or M)", v);
        *slot = (size_t)(n * scale);
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int parse_weights(const char *cmd, const char *v, CgWeights *w)
{
    if (v && strcmp(v, "c") == 0)
        *w = CG_WEIGHTS_C;
    else if (v && strcmp(v, "incbin") == 0)
        *w = CG_WEIGHTS_INCBIN;
    else
        return cli_usage_error(cmd, "--weights is c or incbin, not '%s'", v ? v : "");
    return 0;
}

static int cmd_compile(int argc, char **argv, LeafLibraries *leaf_libraries)
{
    CommonArgs c = {.opt_level = 2, .leaf_libraries = leaf_libraries};
    const char *model = NULL, *out_dir = NULL, *name = NULL;
    CgOptions co = {.target = FX_TARGET_HOST};
    const char *leaf_sources[MAX_BINDINGS];
    co.leaf_sources = leaf_sources;
    bool report = false, quiet = false;
    const char *report_json = NULL;
    Diag d;
    diag_init(&d);
    for (int i = 2; i < argc; i++) {
        int r = cli_parse_common("compile", argc, argv, &i, &c, &d);
        if (r < 0) {
            diag_free(&d);
            return EXIT_USAGE;
        }
        if (r)
            continue;
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(compile_help, stdout);
            fputs(cli_opt_help, stdout);
            fputs(cli_quantize_help, stdout);
            fputs(cli_prune_help, stdout);
            fputs(cli_leaf_help, stdout);
            return 0;
        } else if (strcmp(a, "-o") == 0 && next) {
            out_dir = argv[++i];
        } else if (strcmp(a, "--name") == 0 && next) {
            name = argv[++i];
        } else if (strcmp(a, "--target") == 0) {
            if (parse_target("compile", next, &co.target))
                return EXIT_USAGE;
            i++;
        } else if (strcmp(a, "--weights") == 0) {
            if (parse_weights("compile", next, &co.weights))
                return EXIT_USAGE;
            i++;
        } else if (strcmp(a, "--weights-section") == 0 && next) {
            co.weights_section = argv[++i];
        } else if (strcmp(a, "--arena-section") == 0 && next) {
            co.arena_section = argv[++i];
        } else if (strcmp(a, "--cpu") == 0 && next) {
            co.cpu = argv[++i];
            if (!cg_cpu_flags(co.cpu))
                return cli_usage_error("compile", "--cpu is cortex-m0plus, cortex-m4, cortex-m7, "
                                                  "cortex-m33 or cortex-m55, not '%s'", co.cpu);
        } else if (strcmp(a, "--emit-main") == 0) {
            co.emit_main = true;
        } else if (strcmp(a, "--runtime") == 0) {
            if (!next || (strcmp(next, "copy") != 0 && strcmp(next, "shared") != 0 &&
                          strcmp(next, "full") != 0))
                return cli_usage_error("compile", "--runtime is copy, full or shared, not '%s'",
                                       next ? next : "");
            co.runtime_shared = strcmp(next, "shared") == 0;
            co.runtime_full = strcmp(argv[++i], "full") == 0;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = true;
        } else if (strcmp(a, "--report") == 0) {
            report = true;
        } else if (strcmp(a, "--report-json") == 0 && next) {
            report_json = argv[++i];
        } else if (strcmp(a, "--budget") == 0) {
            if (parse_budget("compile", next, &co))
                return EXIT_USAGE;
            i++;
        } else if (strcmp(a, "--leaf-source") == 0 && next && co.num_leaf_sources < MAX_BINDINGS) {
            leaf_sources[co.num_leaf_sources++] = argv[++i];
        } else if (a[0] == '-') {
            return cli_usage_error("compile", "unknown or incomplete option '%s'", a);
        } else if (!model) {
            model = a;
        } else {
            return cli_usage_error("compile", "unexpected argument '%s'", a);
        }
    }
    if (!model || !out_dir)
        return cli_usage_error("compile", "%s", model ? "no output folder given (-o DIR)" : "no model given");
    if (co.runtime_shared && co.target != FX_TARGET_HOST)
        return cli_usage_error("compile", "--runtime shared needs --target host%s", "");
    if (co.cpu && co.target == FX_TARGET_HOST)
        return cli_usage_error("compile", "--cpu %s needs --target portable or cortex-m", co.cpu);
    if (report_json && co.target == FX_TARGET_HOST)
        return cli_usage_error("compile", "--report-json %s needs --target portable or cortex-m "
                                          "(its code and stack figures are a Cortex-M's)",
                               report_json);
    char name_buf[64];
    if (!name) {
        default_name(model, name_buf, sizeof name_buf);
        name = name_buf;
    }
    co.name = name;
    co.source = model;
    c.portable = co.target != FX_TARGET_HOST;
    c.for_codegen = true;
    Graph *g = NULL;
    int rc = 1;
    CgPlan plan;
    QuantizeReport quant_report = {0};
    PruneReport prune_report = {0};
    if (report && c.quantize)
        c.quant_report = &quant_report;
    if (report && c.prune)
        c.prune_report = &prune_report;
    if (cli_load_model(model, &c, &g, NULL, &d) == FX_OK && cg_compile(g, &co, out_dir, &plan, &d) == FX_OK) {
        CgMemory memory;
        rc = 0;
        if (report) {
            cg_plan_report(&plan, stdout);
            if (c.prune)
                prune_report_print(&prune_report, stdout);
            if (c.quantize)
                quantize_report_print(&quant_report, stdout);
            if (co.target != FX_TARGET_HOST) {
                if (cg_plan_memory(&plan, &memory, &d) == FX_OK) {
                    cg_memory_report(&memory, stdout);
                    cg_memory_free(&memory);
                } else {
                    cli_fail(&d);
                    rc = 1;
                }
            }
        }
        if (rc == 0 && co.target != FX_TARGET_HOST && (report || report_json)) {
            CgFirmware fw;
            if (cg_firmware_report(g, &plan, co.target, &fw, &d) == FX_OK) {
                if (report)
                    cg_firmware_print(&fw, stdout);
                if (report_json &&
                    cg_firmware_write_json(&fw, model, name, co.target, report_json, &d) != FX_OK) {
                    cli_fail(&d);
                    rc = 1;
                }
                cg_firmware_free(&fw);
            } else {
                cli_fail(&d);
                rc = 1;
            }
        }
        if (!report && !quiet) {
            printf("fxcc: wrote %s/%s.h and %s/%s.c (arena %zu bytes)\n", out_dir, name, out_dir,
                   name, plan.arena_bytes);
        }
        cg_plan_free(&plan);
    } else {
        cli_fail(&d);
    }
    quantize_report_free(&quant_report);
    prune_report_free(&prune_report);
    graph_free(g);
    diag_free(&d);
    return rc;
}

/* --- prune --------------------------------------------------------------- */

static const char prune_help[] =
    "usage: fxcc prune MODEL.onnx --prune SPEC [--prune SPEC] [-o PRUNED.onnx]\n"
    "                  [--calibrate PATH]... [--labels FILE]\n"
    "\n"
    "Prunes MODEL.onnx as imported (no other pass runs), prints parameters and MACs\n"
    "before and after and, on the --calibrate samples, the pruned model's outputs\n"
    "against the unpruned one's (SQNR, max abs error, top-1 agreement; accuracy of\n"
    "both with --labels), and with -o writes the pruned model as ONNX, to fine-tune\n"
    "elsewhere.  Nothing is written unless everything succeeded.\n"
    "\n"
    "  --prune channels:FRACTION\n"
    "                      structured: each group of output channels of Conv/Gemm/MatMul\n"
    "                      layers pruned together (through BatchNormalization, activations,\n"
    "                      pools, depthwise Convs, residual Adds, Concat, Flatten) keeps\n"
    "                      ceil((1 - FRACTION) * C) channels, those of largest L1 norm;\n"
    "                      channels reaching a graph output or an op it does not look\n"
    "                      through are kept\n"
    "  --prune magnitude:SPARSITY[:global]\n"
    "                      unstructured: the smallest |w| of each layer (or of all, with\n"
    "                      :global) become 0; -o writes them dense, compiling at -O2\n"
    "                      stores them sparse where smaller (and, on the host, faster)\n"
    "  -o PRUNED.onnx      write the pruned model\n"
    "  --calibrate PATH    samples, as for --quantize (repeatable)\n"
    "  --labels FILE       .npy of integer labels, one per sample\n"
    "  --shape, --const, --keep-input-defaults\n"
    "                      as for `fxcc inspect`\n";

static int cmd_prune(int argc, char **argv, LeafLibraries *leaf_libraries)
{
    CommonArgs c = {.leaf_libraries = leaf_libraries};
    const char *model = NULL, *out = NULL;
    Diag d;
    diag_init(&d);
    for (int i = 2; i < argc; i++) {
        int r = cli_parse_common("prune", argc, argv, &i, &c, &d);
        if (r < 0) {
            diag_free(&d);
            return EXIT_USAGE;
        }
        if (r)
            continue;
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(prune_help, stdout);
            return 0;
        } else if (strcmp(a, "-o") == 0) {
            if (i + 1 >= argc)
                return cli_usage_error("prune", "%s needs a file name", "-o");
            out = argv[++i];
        } else if (a[0] == '-') {
            return cli_usage_error("prune", "unknown option '%s'", a);
        } else if (!model) {
            model = a;
        } else {
            return cli_usage_error("prune", "unexpected argument '%s'", a);
        }
    }
    if (!model)
        return cli_usage_error("prune", "%s", "no model given");
    if (!c.prune)
        return cli_usage_error("prune", "%s", "no --prune channels:FRACTION or "
                                              "magnitude:SPARSITY given");
    PruneReport report = {0};
    c.prune_report = &report;
    Graph *g = NULL;
    int rc = 1;
    if (cli_load_model(model, &c, &g, NULL, &d) == FX_OK && (!out || onnx_save(g, out, &d) == FX_OK)) {
        prune_report_print(&report, stdout);
        if (out)
            printf("fxcc: wrote %s\n", out);
        rc = 0;
    } else {
        cli_fail(&d);
    }
    prune_report_free(&report);
    graph_free(g);
    diag_free(&d);
    return rc;
}

/* --- verify -------------------------------------------------------------- */

static const char verify_help[] =
    "usage: fxcc verify MODEL.onnx [INPUT...] [--per-node] [--target host|portable|cortex-m]\n"
    "                   [--weights c|incbin] [--rtol R] [--atol A] [--keep DIR]\n"
    "                   [--shape NAME=DIMS]...\n"
    "\n"
    "Compiles MODEL.onnx (at -O2 unless told otherwise) into a temporary folder, builds\n"
    "it with the system C compiler ($CC, default cc), runs it on the inputs (random, from\n"
    "a fixed seed, when none are given), runs the interpreter on the unoptimized model\n"
    "on the same inputs and compares every output: prints the max abs and max rel\n"
    "error, exits 1 past the tolerance.\n"
    "\n"
    "  --per-node          compare every intermediate value too, and name the first node\n"
    "                      whose compiled value diverges\n"
    "  --rtol R, --atol A  tolerance (default 1e-4 and 1e-5; atol is multiplied by\n"
    "                      the largest |value| of each reference output above 1)\n"
    "  --weights c|incbin  how the large weights are written, as for `fxcc compile`\n"
    "  --keep DIR          build in DIR and keep it\n"
    "  --shape, --const, --keep-input-defaults\n"
    "                      as for `fxcc inspect`\n";

static int cmd_verify(int argc, char **argv, LeafLibraries *leaf_libraries)
{
    CommonArgs c = {.opt_level = 2, .leaf_libraries = leaf_libraries};
    const char *model = NULL;
    CgVerifyOptions vo = {.cg = {.target = FX_TARGET_HOST, .name = "model"},
                          .rtol = 1e-4, .atol = 1e-5};
    const char *leaf_sources[MAX_BINDINGS];
    vo.cg.leaf_sources = leaf_sources;
    const char **input_paths = fx_alloc_array((size_t)argc, sizeof *input_paths);
    int num_paths = 0;
    Diag d;
    diag_init(&d);
    if (!input_paths)
        return 1;
    int rc = EXIT_USAGE;
    for (int i = 2; i < argc; i++) {
        int r = cli_parse_common("verify", argc, argv, &i, &c, &d);
        if (r < 0)
            goto out;
        if (r)
            continue;
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(verify_help, stdout);
            fputs(cli_opt_help, stdout);
            fputs(cli_quantize_help, stdout);
            fputs(cli_leaf_help, stdout);
            rc = 0;
            goto out;
        } else if (strcmp(a, "--per-node") == 0) {
            vo.per_node = true;
        } else if (strcmp(a, "--target") == 0) {
            if (parse_target("verify", next, &vo.cg.target))
                goto out;
            i++;
        } else if (strcmp(a, "--weights") == 0) {
            if (parse_weights("verify", next, &vo.cg.weights))
                goto out;
            i++;
        } else if ((strcmp(a, "--rtol") == 0 || strcmp(a, "--atol") == 0) && next) {
            char *end;
            double v = strtod(next, &end);
            if (*end || !(v >= 0)) {
                cli_usage_error("verify", "bad tolerance '%s'", next);
                goto out;
            }
            *(a[2] == 'r' ? &vo.rtol : &vo.atol) = v;
            i++;
        } else if (strcmp(a, "--keep") == 0 && next) {
            vo.keep_dir = argv[++i];
        } else if (strcmp(a, "--leaf-source") == 0 && next &&
                   vo.cg.num_leaf_sources < MAX_BINDINGS) {
            leaf_sources[vo.cg.num_leaf_sources++] = argv[++i];
        } else if (a[0] == '-') {
            cli_usage_error("verify", "unknown or incomplete option '%s'", a);
            goto out;
        } else if (!model) {
            model = a;
        } else {
            input_paths[num_paths++] = a;
        }
    }
    if (!model) {
        cli_usage_error("verify", "%s", "no model given");
        goto out;
    }
    rc = 1;
    vo.cg.source = model;
    vo.build.target = vo.cg.target;
    vo.build.cc = getenv("CC");
    c.portable = vo.cg.target != FX_TARGET_HOST;
    c.for_codegen = true;
    Graph *g = NULL, *reference = NULL;
    Tensor **inputs = NULL;
    int num_inputs = 0;
    if (cli_load_model(model, &c, &g, &reference, &d) != FX_OK)
        goto fail_out;
    num_inputs = graph_num_placeholders(g);
    if (num_paths && num_paths != num_inputs) {
        diag_error(&d, FX_ERR_INVALID, "%s takes %d inputs, %d given", model, num_inputs, num_paths);
        goto fail_out;
    }
    inputs = fx_alloc_array((size_t)num_inputs + 1, sizeof *inputs);
    if (!inputs)
        goto fail_out;
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (int k = 0; k < num_inputs; k++) {
        if (num_paths ? tensor_file_read(input_paths[k], &inputs[k], &d) != FX_OK
                      : !(inputs[k] = tensor_new_random(&graph_placeholder(g, k)->out_types[0],
                                                      &seed, &d)))
            goto fail_out;
    }
    if (!num_paths)
        printf("random inputs (fixed seed)\n");
    if (cg_verify(g, reference, inputs, num_inputs, &vo, stdout, &d) == FX_OK) {
        printf("verify: ok (rtol %g, atol %g)\n", vo.rtol, vo.atol);
        rc = 0;
    }
fail_out:
    if (rc)
        cli_fail(&d);
    for (int k = 0; inputs && k < num_inputs; k++)
        tensor_free(inputs[k]);
    free(inputs);
    graph_free(g);
    graph_free(reference);
out:
    free(input_paths);
    diag_free(&d);
    return rc;
}

/* --- passes -------------------------------------------------------------- */

static int cmd_passes(int argc, char **argv)
{
    (void)argv;
    if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
        puts("usage: fxcc passes\n\nLists the optimization passes in the order -O2 runs them, "
             "with the\nlowest -O level that runs each.");
        return 0;
    }
    if (argc > 2)
        return cli_usage_error("passes", "unexpected argument '%s'", argv[2]);
    int count;
    const PassDef *passes = pass_table(&count);
    printf("%-20s %-5s %s\n", "pass", "level", "what it does");
    for (int k = 0; k < count; k++)
        printf("%-20s -O%-3d %s\n", passes[k].name, passes[k].level, passes[k].summary);
    return 0;
}

/* --- main ----------------------------------------------------------------- */

static const char main_help[] =
    "usage: fxcc COMMAND [ARGS]\n"
    "\n"
    "fxcc compiles ONNX models to standalone C through an FX-style graph IR.\n"
    "\n"
    "commands:\n"
    "  inspect   print a model's graph with shapes, and a summary\n"
    "  run       run a model in the reference interpreter\n"
    "  compile   write standalone C for a model\n"
    "  verify    compile, build and run a model and compare it with the interpreter\n"
    "  bench     time the generated C, the interpreter, ONNX Runtime and PyTorch on a model\n"
    "  passes    list the optimization passes and their -O levels\n"
    "  prune     prune a model's channels or weights, report, write it as ONNX\n"
    "  help      'fxcc help COMMAND' describes a command, as 'fxcc COMMAND --help'\n"
    "\n"
    "  --version print fxcc's version and the ONNX it reads\n"
    "\n"
    "exit status: 0 success; 1 an error (a message \"fxcc: error: ...\" on stderr; no\n"
    "output file is left behind); 2 a bad command line.  fxcc verify and bench\n"
    "also exit 1 when the outputs disagree.\n";

static int print_version(void)
{
    printf("fxcc %s\n"
           "reads ONNX IR 3 to %d, default-domain opsets %d to %d\n"
           "targets: host (OpenBLAS), portable (C99), cortex-m\n",
           FXCC_VERSION, FX_MAX_IR_VERSION, FX_MIN_OPSET, FX_MAX_OPSET);
    return 0;
}

static int run_command(int argc, char **argv, LeafLibraries *leaf_libraries)
{
    if (argc < 2) {
        fputs(main_help, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0)
        return print_version();
    if (strcmp(cmd, "help") == 0 && argc == 3) {
        /* fxcc help COMMAND is fxcc COMMAND --help */
        char *help_argv[] = {argv[0], argv[2], "--help", NULL};
        if (strcmp(argv[2], "help") == 0) {
            fputs(main_help, stdout);
            return 0;
        }
        return run_command(3, help_argv, leaf_libraries);
    }
    if (strcmp(cmd, "inspect") == 0)
        return cmd_inspect(argc, argv, leaf_libraries);
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc, argv, leaf_libraries);
    if (strcmp(cmd, "compile") == 0)
        return cmd_compile(argc, argv, leaf_libraries);
    if (strcmp(cmd, "verify") == 0)
        return cmd_verify(argc, argv, leaf_libraries);
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(argc, argv, leaf_libraries);
    if (strcmp(cmd, "passes") == 0)
        return cmd_passes(argc, argv);
    if (strcmp(cmd, "prune") == 0)
        return cmd_prune(argc, argv, leaf_libraries);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(main_help, stdout);
        return 0;
    }
    fprintf(stderr, "fxcc: error: unknown command '%s'\n", cmd);
    fputs(main_help, stderr);
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    /* Graphs run leaf functions from here until the command returns. */
    LeafLibraries leaf_libraries = {0};
    int rc = run_command(argc, argv, &leaf_libraries);
    leaf_libraries_close(&leaf_libraries);
    return rc;
}
