/*
 * codegen.h - from a shape-propagated Graph to standalone C.
 *
 * plan.c decides where every value lives: a caller's input or output
 * buffer, a const weight array, or an offset in one arena whose size is a
 * compile-time constant; views and getitem alias their source, and
 * elementwise ops may write over an input that dies there.  emit_c.c writes
 * the header, the source with one block per node, the small weights, the
 * build files and the runtime copy; weights.c the large weights' files.
 */
#ifndef FXCC_CODEGEN_H
#define FXCC_CODEGEN_H

#include "../ir/ops/ops.h"

/* ------------------------------------------------------------------------- */
/* Memory plan (plan.c)                                                       */
/* ------------------------------------------------------------------------- */

typedef enum CgKind {
    CG_INPUT,   /* inputs[io] of the entry point */
    CG_OUTPUT,  /* outputs[io] of the entry point */
    CG_WEIGHT,  /* a const array: get_attr or a compile-time constant */
    CG_ARENA,   /* arena + offset */
    CG_ALIAS,   /* the same bytes as `alias` (view, getitem, in-place) */
    CG_SCRATCH  /* a node's scratch space in the arena */
} CgKind;

typedef struct CgValue {
    const Node *node;  /* producer (for scratch: the node that uses it) */
    int index;         /* output index of node */
    CgKind kind;
    int io;            /* CG_INPUT / CG_OUTPUT: position */
    struct CgValue *alias;
    bool inplace;      /* CG_ALIAS made by in-place reuse (not a view) */
    bool slice;        /* CG_ALIAS: bytes [slice_offset, +bytes) of `alias`, a Concat's
                        * output, where the Concat's input is written in place */
    size_t slice_offset;
    bool assembled;    /* a Concat whose inputs all sit in their slices: no code */
    size_t bytes;      /* size of the value */
    size_t offset;     /* CG_ARENA / CG_SCRATCH */
    int first, last;   /* steps (node positions) where it is alive */
    char cname[160];   /* C variable ("t_conv1") or weight symbol */
} CgValue;

typedef struct CgCopy {
    int output;         /* outputs[output] = ... */
    const CgValue *src; /* value copied at the end of the run */
} CgCopy;

typedef struct CgPlan {
    CgValue *values;
    int num_values;
    CgValue **node_values;  /* by node position: first of its outputs */
    CgValue **by_id;        /* by Node.id: first of its outputs */
    int num_ids;
    CgValue **node_scratch; /* by node position, or NULL */
    const Node **order;
    int num_steps;
    /* By step, filled by cg_compile: the functions its block calls, each
     * name followed by a space ("fxrt_qconv memcpy "), or NULL (no code);
     * for the firmware report's code and stack figures. */
    char **step_calls;
    CgCopy *copies;
    int num_copies;
    size_t arena_bytes;  /* what the plan needs */
    size_t lower_bound;  /* largest total of arena values alive at one step */
    size_t naive_bytes;  /* every intermediate in its own buffer */
    int inplace_count, alias_count;
    int assembled_count; /* Concats with no code */
} CgPlan;

/* Plans g (shapes propagated).  Fails for nodes the code generator cannot
 * handle (call_module, ops without an emitter), naming all of them. */
FxStatus cg_plan(const Graph *g, CgPlan *p, Diag *d);
/* The same for a target: off the host, ops with an `inplace` hook may also
 * write over their first input (cg_plan is the host's plan). */
FxStatus cg_plan_target(const Graph *g, FxTarget target, CgPlan *p, Diag *d);
void cg_plan_free(CgPlan *p);
/* The value that finally holds v's bytes (follows aliases). */
const CgValue *cg_root(const CgValue *v);
/* Where v's bytes start in its root's (0 but for Concat slices). */
size_t cg_root_offset(const CgValue *v);
/* The plan's value for argument i of n (NULL for an omitted input). */
const CgValue *cg_arg_value(const CgPlan *p, const Node *n, int i);
/* Asserts the invariants: no two arena values alive at one step overlap,
 * everything lies inside arena_bytes, offsets are 64-byte aligned, a slice
 * lies inside the value it is a slice of. */
FxStatus cg_plan_check(const CgPlan *p, Diag *d);
/* The planner's report and the per-node table (bytes, MACs). */
void cg_plan_report(const CgPlan *p, FILE *out);

/* What a firmware image holds for the model beyond its code: the const
 * arrays (flash) and the arena (RAM), scratch included. */
typedef struct CgLayerWeights {
    const Node *node;   /* the step that first reads the weights */
    const char *cname;  /* its value's name, as in cg_plan_report's table */
    size_t bytes;
} CgLayerWeights;

typedef struct CgMemory {
    size_t weight_bytes;
    size_t arena_bytes;
    size_t scratch_bytes;  /* the largest scratch, a part of the arena */
    /* Weights by the step that first reads them, largest first; a weight
     * shared by several steps counts once.  NULL if out of memory. */
    CgLayerWeights *layers;
    int num_layers;
} CgMemory;

FxStatus cg_plan_memory(const CgPlan *p, CgMemory *m, Diag *d);
void cg_memory_free(CgMemory *m);
/* The weights by layer and the totals, after cg_plan_report for a firmware
 * target. */
void cg_memory_report(const CgMemory *m, FILE *out);

/* ------------------------------------------------------------------------- */
/* The firmware report: code, stack, RAM (report.c, runtime_costs.c)          */
/* ------------------------------------------------------------------------- */

/* One function of the runtime or of the C library on a Cortex-M4F, as
 * scripts/runtime_costs.py measured it (codegen/runtime_costs.c). */
typedef struct CgCostFunction {
    const char *name;   /* "fxrt_qconv"; a static one "fxrt_nn_qconv.c:qconv_depthwise" */
    int code_bytes;     /* flash (a library function: with its dependencies) */
    int ram_bytes;      /* data + bss it brings (newlib's errno struct) */
    int stack_bytes;    /* its own frame */
    int first_callee, num_callees; /* into CgCostTable.callees */
} CgCostFunction;

typedef struct CgCostTable {
    const CgCostFunction *functions; /* sorted by name (strcmp) */
    int num_functions;
    const char *const *callees;
    const CgCostFunction *library;   /* sorted by name: functions and "member:" archive members */
    int num_library;
    const char *const *library_callees;
} CgCostTable;

/* The small kernels (--target cortex-m) and the portable ones. */
extern const CgCostTable cg_costs_small, cg_costs_portable;

typedef struct CgFirmwareLayer {
    const Node *node;
    const char *cname;   /* as in cg_plan_report's table */
    size_t weight_bytes; /* the weights it reads first */
    size_t code_bytes;   /* the functions it calls and theirs (shared ones in each layer) */
    size_t scratch_bytes;
    size_t stack_bytes;  /* its deepest chain of frames below NAME_run */
} CgFirmwareLayer;

/* What the model adds to a firmware image, estimated from the plan and the
 * cost table: flash = code + weights; RAM = arena + the library's data +
 * the caller's output buffers; the stack on top. */
typedef struct CgFirmware {
    size_t code_bytes;        /* every function reached, once, and run_code_bytes */
    size_t run_code_bytes;    /* NAME_run and NAME.c's tables (an estimate per step) */
    size_t weight_bytes;
    size_t arena_bytes, scratch_bytes; /* the scratch: the largest, inside the arena */
    size_t library_ram_bytes;
    size_t outputs_bytes;
    size_t stack_bytes;       /* NAME_run's frame and the deepest layer */
    size_t flash_bytes, ram_bytes;
    CgFirmwareLayer *layers;  /* the steps with code, in order */
    int num_layers;
} CgFirmware;

/* Fills f for plan p of g as cg_compile wrote it (p->step_calls set). */
FxStatus cg_firmware_report(const Graph *g, const CgPlan *p, FxTarget target, CgFirmware *f,
                            Diag *d);
void cg_firmware_free(CgFirmware *f);
/* The table --report prints after the weights. */
void cg_firmware_print(const CgFirmware *f, FILE *out);
/* The same figures as JSON into path (written whole or not at all). */
FxStatus cg_firmware_write_json(const CgFirmware *f, const char *model, const char *name,
                                FxTarget target, const char *path, Diag *d);

/* ------------------------------------------------------------------------- */
/* C emission (emit_c.c)                                                      */
/* ------------------------------------------------------------------------- */

/* How weights larger than CG_LARGE_WEIGHT_BYTES are written. */
typedef enum CgWeights {
    CG_WEIGHTS_AUTO,   /* incbin when they total more than CG_INCBIN_AUTO_BYTES, else c */
    CG_WEIGHTS_C,      /* C arrays in NAME_weights.c (toolchains without GNU-style .S) */
    CG_WEIGHTS_INCBIN  /* raw bytes in NAME_weights.bin, embedded by NAME_weights.S */
} CgWeights;

/* A weight above this size is "large": never a C array in NAME.c.  4 KiB:
 * below it a weight is a bias, a norm's scale or a shape, a few lines of
 * literals worth reading next to the code; above it are the filters. */
enum { CG_LARGE_WEIGHT_BYTES = 4 * 1024 };
/* CG_WEIGHTS_AUTO chooses incbin above this total of large weights: below
 * it, C literals cost the compiler well under a second. */
enum { CG_INCBIN_AUTO_BYTES = 256 * 1024 };

typedef struct CgOptions {
    const char *name;   /* C prefix: NAME.h, NAME_run, ... */
    FxTarget target;
    bool emit_main;     /* also main.c + fxio.[ch] and a `main` executable */
    const char *source; /* model file; only its base name goes into comments */
    CgWeights weights;
    /* Section of the incbin blob (NULL: .rodata.NAME_weights); when given,
     * also of the weights written as C arrays (GCC and Clang attributes). */
    const char *weights_section;
    /* --arena-section: NAME.h's NAME_ARENA_PLACEMENT puts the caller's
     * arena in this section (NULL: the macro is empty). */
    const char *arena_section;
    /* --cpu: a core of cg_cpu_flags's list, whose arm-none-eabi-gcc flags
     * NAME.mk and CMakeLists.txt record (NULL: none recorded). */
    const char *cpu;
    /* C files defining the leaf ops' fxcc_leaf_OP functions (ir/ops/leaf.c):
     * copied into DIR and built with NAME by CMakeLists.txt, NAME.mk and
     * `fxcc verify`.  Their names must end in .c and not clash with a
     * generated file. */
    const char *const *leaf_sources;
    int num_leaf_sources;
    /* --budget: the compile fails, writing nothing, when the weights exceed
     * flash_budget or the arena ram_budget bytes; 0 is no limit. */
    size_t flash_budget, ram_budget;
    /* --runtime shared (host only): no fxrt/ in DIR; NAME.c builds against
     * the installed runtime, fxcc::runtime in CMake, fxcc-runtime in
     * pkg-config. */
    bool runtime_shared;
    /* --runtime full: every runtime source, not only those NAME.c reaches
     * (a build that links several models against one runtime copy). */
    bool runtime_full;
} CgOptions;

/* Fails, naming the largest layers, when the plan's weights or arena exceed
 * o's budgets (cg_compile calls it before writing anything). */
FxStatus cg_check_budget(const CgPlan *p, const CgOptions *o, Diag *d);

/* needed[i] (one per fxcc_embedded file) is set for the runtime .c files that
 * the generated NAME.c text model_c reaches, directly or through other
 * runtime files (runtime_files.c); all of them when it names a function the
 * scan cannot place. */
FxStatus cg_runtime_files_needed(const char *model_c, size_t len, bool *needed, Diag *d);

/* Writes DIR/NAME.h, DIR/NAME.c, the large weights (DIR/NAME_weights.c, or
 * DIR/NAME_weights.bin and DIR/NAME_weights.S), DIR/CMakeLists.txt, DIR/NAME.mk, DIR/fxrt/ (not with
 * runtime_shared) and the leaf sources.
 * NAME.h declares the fxcc_leaf_OP function of every leaf op; two leaf nodes
 * of one op type whose value types differ are refused (one prototype each).  Files are written
 * to a temporary folder first: on failure DIR is left as it was. */
FxStatus cg_compile(const Graph *g, const CgOptions *o, const char *dir, CgPlan *plan_out,
                    Diag *d);
/* The mode CG_WEIGHTS_AUTO stands for, given the total bytes of the large
 * weights; any other mode is returned as it is. */
CgWeights cg_weights_mode(CgWeights requested, size_t large_weight_bytes);
/* True if s can name an assembler section: [A-Za-z0-9._$]+, under 128 chars. */
bool cg_valid_section(const char *s);
/* True if name is a valid C identifier for a prefix. */
bool cg_valid_name(const char *name);
/* The arm-none-eabi-gcc flags for a --cpu (cortex-m0plus, cortex-m4,
 * cortex-m7, cortex-m33, cortex-m55), or NULL for another name. */
const char *cg_cpu_flags(const char *cpu);

/* ------------------------------------------------------------------------- */
/* The large weights' files (weights.c)                                       */
/* ------------------------------------------------------------------------- */

typedef struct CgLargeWeight {
    const Tensor *tensor;
    char symbol[200];  /* its C name, NAME_w_... */
    size_t offset;     /* in NAME_weights.bin: a multiple of 64, ascending */
} CgLargeWeight;

typedef struct CgWeightFiles {
    const char *name;    /* the C prefix */
    const char *model;   /* the model's base name, for comments */
    const char *section; /* of the blob */
    bool place_c;        /* also put the C arrays in `section` (--weights-section) */
    const CgLargeWeight *weights;
    int count;
    size_t blob_bytes;   /* the last weight's end, rounded up to 64 */
} CgWeightFiles;

/* The macros of NAME.c's and NAME_weights.c's weight arrays: NAME_WEIGHT_ALIGN
 * (64 bytes on x86-64 with GCC or Clang, empty elsewhere) and, when section
 * is not NULL, NAME_WEIGHT_SECTION, which places them in section (GCC,
 * Clang; empty for other compilers). */
void cg_write_weight_macros(char *buf, size_t cap, const char *name, const char *section);
/* DIR/NAME_weights.c: const arrays of exact literals (hex floats). */
FxStatus cg_write_weights_c(const CgWeightFiles *w, const char *dir, Diag *d);
/* DIR/NAME_weights.bin and DIR/NAME_weights.S, one global symbol per weight. */
FxStatus cg_write_weights_incbin(const CgWeightFiles *w, const char *dir, Diag *d);

/* ------------------------------------------------------------------------- */
/* Building and running generated code (build.c)                              */
/* ------------------------------------------------------------------------- */

typedef struct CgBuildOptions {
    const char *cc;     /* compiler command, words split on spaces (NULL: "cc") */
    const char *cflags; /* NULL: "-std=c99 -O2 -Wall -Wextra -Werror -pedantic" */
    FxTarget target;    /* host adds FXRT_USE_CBLAS and OpenBLAS */
} CgBuildOptions;

/* Compiles the .c and .S files of DIR and DIR/fxrt (a `--emit-main` output)
 * into DIR/main, with -I DIR so that NAME_weights.S finds its blob; the
 * compiler's output goes to DIR/build.log.  With FXCC_RUNTIME_CACHE set in
 * the environment, the runtime's objects are built once into that folder
 * (one subfolder per runtime sources, compiler, flags and target) and
 * linked from there. */
FxStatus cg_build_main(const char *dir, const CgBuildOptions *b, Diag *d);
/* Runs DIR/main -o OUT_DIR INPUT...; its stderr goes to DIR/run.stderr. */
FxStatus cg_run_main(const char *dir, const char *const *inputs, int num_inputs,
                     const char *out_dir, Diag *d);
/* The same with --repeat N: the model runs once, writes its outputs, then
 * runs N more times; *ms_per_run gets the median the harness prints. */
FxStatus cg_run_main_timed(const char *dir, const char *const *inputs, int num_inputs,
                           const char *out_dir, long repeat, double *ms_per_run, Diag *d);
/* fork/exec argv; stdout+stderr appended to log_path, or stderr alone to
 * stderr_path (either may be NULL).  Returns the exit status, 128+signal, or -1. */
int cg_spawn(char *const *argv, const char *log_path, const char *stderr_path);

/* ------------------------------------------------------------------------- */
/* fxcc verify (verify.c)                                                     */
/* ------------------------------------------------------------------------- */

typedef struct CgVerifyOptions {
    CgOptions cg;
    CgBuildOptions build;
    double rtol, atol;
    bool per_node;        /* compare every intermediate, name the first that diverges */
    const char *keep_dir; /* build there and keep it (NULL: a temporary folder) */
} CgVerifyOptions;

/* Compiles g, builds and runs it on inputs, runs the interpreter on
 * `reference` (the same model before the optimization passes; NULL: g itself)
 * on the same inputs and compares; prints one line per output to report.
 * Fails with FX_ERR_RUNTIME past the tolerance.  With per_node, both graphs
 * gain outputs: every value they both compute (same node name and type). */
FxStatus cg_verify(Graph *g, Graph *reference, Tensor **inputs, int num_inputs,
                   const CgVerifyOptions *vo, FILE *report, Diag *d);
/* Appends every computed single-output value of g to g's outputs; with a
 * mirror graph, only those the mirror computes too (by node name and type),
 * appending the mirror's nodes to its outputs in the same order.  Returns
 * the number added, -1 when memory ran out. */
int cg_expose_values(Graph *g, Graph *mirror);

#endif
