/*
 * ir.h - fxcc's graph IR, modelled on PyTorch FX.
 *
 * A Graph is a doubly linked list of Nodes with a sentinel; list order is
 * execution order and always a topological order.  Every Node has one of FX's
 * six opcodes (DESIGN.md at the top of the tree says what each means over
 * ONNX), a unique C-identifier name, its arguments (other nodes, NULL for an omitted
 * optional input), its users (an ordered set kept in step with the args) and
 * its attributes, which play the role of FX's kwargs and are canonical: every
 * ONNX default is filled in at import.
 *
 * Shared types come first; then one section per source file of ir/.
 */
#ifndef FXCC_IR_H
#define FXCC_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../runtime/fxrt.h"

#define FX_MAX_RANK FXRT_MAX_RANK

/* Largest tensor fxcc will allocate, in bytes.  Anything a file claims beyond
 * this is refused before allocation (2 GiB: the machine has 24 GiB and several
 * tensors are alive at once). */
#define FX_MAX_TENSOR_BYTES ((uint64_t)1 << 31)

typedef FxrtDType DType;

/* ------------------------------------------------------------------------- */
/* Status and diagnostics (diag.c)                                            */
/* ------------------------------------------------------------------------- */

typedef enum FxStatus {
    FX_OK = 0,
    FX_ERR_IO,          /* a file could not be opened, read or written */
    FX_ERR_FORMAT,      /* a file is malformed */
    FX_ERR_UNSUPPORTED, /* valid input that fxcc does not handle */
    FX_ERR_SHAPE,       /* shapes or dtypes do not fit together */
    FX_ERR_INVALID,     /* bad argument, attribute or command line */
    FX_ERR_NOMEM,       /* allocation failed or a size is beyond the limits */
    FX_ERR_RUNTIME      /* a kernel refused its data (e.g. index out of range) */
} FxStatus;

typedef struct DiagEntry {
    FxStatus status;
    char *file;    /* may be NULL */
    char *node;    /* "name (OpType)" or NULL */
    long long offset; /* byte offset in file, -1 if unknown */
    char *message;
} DiagEntry;

/* A caller-owned list of errors.  Functions that fail append one or more
 * entries and return the status of the first. */
typedef struct Diag {
    DiagEntry *entries;
    size_t count, cap;
    const char *file; /* file name attached to entries that name none */
} Diag;

void diag_init(Diag *d);
void diag_free(Diag *d);
void diag_clear(Diag *d);
FxStatus diag_error(Diag *d, FxStatus st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
FxStatus diag_error_at(Diag *d, FxStatus st, const char *file, long long offset,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A failed system call on a file: "MESSAGE: REASON", where an errno of ENOMEM
 * (libc ran out of memory inside fopen, opendir...) is FX_ERR_NOMEM and reads
 * "out of memory", anything else FX_ERR_IO with strerror's text. */
FxStatus diag_errno(Diag *d, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct Node;
FxStatus diag_node_error(Diag *d, FxStatus st, const struct Node *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prints every entry as "fxcc: error: FILE: node NAME (Op): message". */
void diag_print(const Diag *d, FILE *out);
const char *fx_status_name(FxStatus st);

/* ------------------------------------------------------------------------- */
/* Heap allocation (alloc.c)                                                  */
/* ------------------------------------------------------------------------- */

/* The only allocator of frontend/, ir/, opt/, codegen/ and tools/ (the
 * runtime never allocates).  Each returns NULL on failure, never aborts;
 * array sizes are count * size with the product checked for overflow.  A
 * zero size still returns a unique pointer, so NULL always means failure. */
void *fx_malloc(size_t size);
void *fx_alloc_array(size_t count, size_t size);           /* zeroed */
void *fx_realloc_array(void *ptr, size_t count, size_t size); /* ptr kept on failure */
char *fx_strdup(const char *s);
char *fx_strndup(const char *s, size_t n);
void fx_free(void *ptr);
/* Allocations made so far in a FXCC_FAULT_INJECTION build (which fails the
 * allocation numbered $FXCC_FAIL_ALLOC_AT); -1 in a normal build. */
long long fx_alloc_count(void);

/* ------------------------------------------------------------------------- */
/* Tensors and checked sizes (tensor.c)                                       */
/* ------------------------------------------------------------------------- */

/* Static type of a value: element type and a fully known shape.  Shape
 * propagation fills one of these for every node output. */
typedef struct TensorType {
    DType dtype;
    int rank;
    int64_t dims[FX_MAX_RANK];
} TensorType;

/* A tensor with owned data (malloc'd; tensor_free releases it). */
typedef struct Tensor {
    TensorType type;
    void *data;
} Tensor;

const char *dtype_name(DType t);            /* "float32", "int64", ... */
bool dtype_is_supported(DType t);            /* the types kernels handle */

/* Overflow-checked arithmetic for sizes read from files. */
bool size_mul_ok(uint64_t a, uint64_t b, uint64_t *out);
bool size_add_ok(uint64_t a, uint64_t b, uint64_t *out);

int64_t type_numel(const TensorType *t);     /* product of dims (1 for rank 0) */
size_t type_nbytes(const TensorType *t);
bool type_equal(const TensorType *a, const TensorType *b);
/* Checks dims >= 0, rank <= FX_MAX_RANK and bytes <= FX_MAX_TENSOR_BYTES. */
FxStatus type_check_size(const TensorType *t, uint64_t *nbytes, Diag *d, const char *what);
/* "float32[1, 3, 224, 224]" into buf. */
char *type_format(const TensorType *t, char *buf, size_t cap);

/* Allocates zeroed data for t (checked); on failure returns NULL and fills d. */
Tensor *tensor_new(const TensorType *t, Diag *d);
Tensor *tensor_clone(const Tensor *src, Diag *d);
/* A 1-D int64 tensor holding v[0..count). */
Tensor *tensor_new_ints(const int64_t *v, int64_t count, Diag *d);
void tensor_free(Tensor *t);
/* Random data of type t from the fixed xorshift stream *state: uniform
 * [-1, 1) floats, small non-negative integers (0..2; bool 0..1, valid indices
 * for most ops), the same on every machine. */
Tensor *tensor_new_random(const TensorType *t, uint64_t *state, Diag *d);
int64_t tensor_numel(const Tensor *t);
size_t tensor_nbytes(const Tensor *t);
/* Reads element i of an integer tensor (int8..int64, uint*, bool) as int64. */
int64_t tensor_get_int(const Tensor *t, int64_t i);
double tensor_get_float(const Tensor *t, int64_t i);

/* allclose in the ONNX backend's sense: |a-b| <= atol + rtol*|b|, NaNs equal,
 * infinities equal when of the same sign.  Integer and bool tensors compare
 * exactly.  On mismatch fills *max_abs, *max_rel and *worst_index. */
typedef struct CompareResult {
    bool ok;
    double max_abs, max_rel;
    int64_t worst_index;
    int64_t mismatches;
} CompareResult;
CompareResult tensor_compare(const Tensor *actual, const Tensor *expected, double rtol,
                             double atol);
/* atol scaled to the reference's magnitude, atol * max(1, max |expected|):
 * a sum of K terms of size M carries rounding of about K * M * eps whichever
 * order it is taken in, so comparing two valid float orders (the interpreter
 * against folded or compiled code) needs an absolute tolerance that grows
 * with the values.  Non-finite and integer elements are ignored. */
double tensor_scaled_atol(const Tensor *expected, double atol);

/* ------------------------------------------------------------------------- */
/* Arena (arena.c)                                                            */
/* ------------------------------------------------------------------------- */

typedef struct ArenaBlock ArenaBlock;
typedef struct Arena {
    ArenaBlock *head;
} Arena;

void arena_init(Arena *a);
void arena_free(Arena *a);
/* Zeroed, 16-byte aligned; NULL on failure. */
void *arena_alloc(Arena *a, size_t n);
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);

/* ------------------------------------------------------------------------- */
/* Graph and Node (graph.c)                                                   */
/* ------------------------------------------------------------------------- */

typedef enum FxOpcode {
    FX_OPCODE_PLACEHOLDER,
    FX_OPCODE_GET_ATTR,
    FX_OPCODE_CALL_FUNCTION,
    FX_OPCODE_CALL_METHOD,
    FX_OPCODE_CALL_MODULE,
    FX_OPCODE_OUTPUT,
    FX_OPCODE_SENTINEL /* the list head; never a real node */
} FxOpcode;

const char *fx_opcode_name(FxOpcode op); /* "placeholder", ... */

typedef enum AttrKind {
    FX_ATTR_FLOAT,
    FX_ATTR_INT,
    FX_ATTR_STRING,
    FX_ATTR_TENSOR,
    FX_ATTR_FLOATS,
    FX_ATTR_INTS,
    FX_ATTR_STRINGS
} AttrKind;

/* One attribute (FX kwarg).  Storage is owned by the graph's arena, except
 * the tensor of FX_ATTR_TENSOR which the graph frees. */
typedef struct Attr {
    const char *name;
    AttrKind kind;
    float f;
    int64_t i;
    const char *s;
    Tensor *t;
    int64_t count;     /* for FLOATS / INTS / STRINGS */
    float *floats;
    int64_t *ints;
    const char **strings;
} Attr;

typedef struct Graph Graph;
typedef struct OpDef OpDef;
typedef struct LeafLibraries LeafLibraries;

typedef struct Node {
    struct Node *prev, *next; /* execution order */
    Graph *graph;
    FxOpcode opcode;
    const char *name;   /* unique, a valid C identifier */
    const char *target; /* op type, method name, constant name or input name */
    const OpDef *op;    /* call_function / call_method: the op-table entry */

    struct Node **args; /* NULL entries: omitted optional inputs ("None") */
    int num_args;
    struct Node **users; /* ordered set, in order of first use */
    int num_users;

    Attr *attrs; /* in the order of the op's AttrSpec list */
    int num_attrs;

    /* Metadata filled by shape propagation: one type per output.  Ops with
     * several outputs are read through "getitem" nodes. */
    int num_outputs;
    TensorType *out_types;
    bool shapes_known;
    /* Compile-time value of each output when shape propagation could compute
     * it from constants (Shape chains...), else NULL entries. Owned. */
    Tensor **const_values;

    /* placeholder: declared shape with symbolic dims (dim_params[i] != NULL) */
    const char *dim_params[FX_MAX_RANK];
    /* get_attr: the constant (owned by the node); placeholder: default value
     * of an IR-3 input that also has an initializer. */
    Tensor *value;
    /* getitem: which output of args[0] */
    int index;
    /* call_module: the module's own sub-graph when its kind has one (a fused
     * elementwise loop nest); its placeholders are the node's args in order.
     * Owned by the node.  Control flow (If, Loop, Scan; ir/ops/control_flow.c):
     * the then_branch or loop body, whose placeholders after the op's own
     * body inputs are the node's arguments of the same position (values it
     * reads from outside). */
    struct Graph *body;
    struct Graph *else_body; /* If: the else_branch, placeholders as body's */
    /* ONNX names of this node's outputs (graph inputs: the input's name). */
    const char **onnx_outputs;
    const char *onnx_name; /* the ONNX node name, may be "" */

    int id;     /* creation number; stable tie-breaker, never reused */
    void *pass_data; /* scratch for the pass or walk currently running */
} Node;

struct Graph {
    Node root; /* sentinel: root.next is the first node */
    Arena arena;
    int opset;         /* default-domain opset the model imports */
    int ir_version;
    const char *source; /* file the graph was read from, for messages */
    int next_id;
    int num_nodes;
    /* name set: open addressing over arena strings; used only for lookups,
     * never iterated, so hash order never reaches output. */
    const char **name_slots;
    size_t name_cap, name_count;
    /* Where the interpreter finds the functions of leaf ops (ops/leaf.c);
     * owned by whoever loaded them, NULL when none were given. */
    const LeafLibraries *leaf_libraries;
};

Graph *graph_new(void);
/* An empty graph of the same model as src: opset, IR version, source file
 * and leaf libraries (copies, transforms, fused bodies). */
Graph *graph_new_like(const Graph *src);
void graph_free(Graph *g);

/* Iteration in execution order.  Safe against erasing the current node. */
#define graph_for_each(g, n) \
    for (Node *n = (g)->root.next, *n##_next_ = n->next; n != &(g)->root; \
         n = n##_next_, n##_next_ = n->next)

Node *graph_first(const Graph *g);      /* NULL if empty */
Node *graph_output_node(const Graph *g); /* NULL if none */
Node *graph_find(const Graph *g, const char *name);
int graph_num_placeholders(const Graph *g);
Node *graph_placeholder(const Graph *g, int k); /* k-th placeholder, or NULL */

/* Makes a unique C identifier from a hint: invalid characters become '_',
 * a leading digit gets a "v" prefix, C keywords get a "_" suffix, clashes
 * get "_1", "_2", ...  The result is registered in g and lives in g's arena. */
const char *graph_unique_name(Graph *g, const char *hint);

/* Creates a node at the insertion point (before `before`; NULL = at the end,
 * i.e. before the sentinel).  args are copied; users are updated. */
Node *graph_create_node(Graph *g, Node *before, FxOpcode opcode, const char *name_hint,
                        const char *target, Node *const *args, int num_args);
/* Creates a call_function/call_method node for an op-table entry. */
Node *graph_create_op(Graph *g, Node *before, const OpDef *op, const char *name_hint,
                      Node *const *args, int num_args);
/* Creates a call_module node of module kind `op` (FX_OPF_MODULE); its
 * target is "fused." followed by the node's name. */
Node *graph_create_module(Graph *g, Node *before, const OpDef *op, const char *name_hint,
                          Node *const *args, int num_args);
/* A get_attr node owning `value`, the one way to make a constant node.  Placed
 * before `before` (NULL = after the last placeholder/get_attr at the top, where
 * constants are defined before any user).  Takes ownership of value in every
 * case: on failure (NULL, d filled) it has been freed. */
Node *graph_create_constant(Graph *g, Node *before, const char *name_hint, Tensor *value,
                            Diag *d);

/* Turns placeholder `ph` into a get_attr holding `value` (owned from then on),
 * the analogue of FX's concrete_args: shapes that depend on this input's data
 * become static.  The value must fit the declared type. */
FxStatus graph_freeze_input(Graph *g, Node *ph, Tensor *value, Diag *d);

/* Adds a constant input: argument `slot` of n becomes a new get_attr node
 * (at the top of the graph, named NAME_role) holding value, padding with
 * omitted (NULL) arguments up to slot; slot = n->num_args appends.  The
 * argument it replaces is left to the caller (dead-code elimination).  Takes
 * ownership of value, which may be NULL: the tensor constructor that failed
 * has filled d, and this returns FX_ERR_NOMEM.  The one way for canonicalize
 * and the passes to wire a constant into a node. */
FxStatus node_set_const_input(Node *n, int slot, const char *role, Tensor *value, Diag *d);

/* The three edits that grow a users or args list can run out of memory:
 * node_set_arg returns false and changes nothing; node_append_arg returns
 * the new index or -1; node_replace_all_uses_with returns the number of
 * rewritten uses or -1, after which some uses may have moved and the graph
 * is only good for graph_free (the caller reports FX_ERR_NOMEM). */
void node_clear_arg(Node *n, int i); /* sets argument i to None; never fails */
__attribute__((warn_unused_result)) bool node_set_arg(Node *n, int i, Node *value);
__attribute__((warn_unused_result)) int node_append_arg(Node *n, Node *value);
/* Replaces every use of `old` by `repl`, except inside `repl` itself (FX would
 * make a cycle there).  Returns the number of rewritten uses, -1 when memory ran out. */
__attribute__((warn_unused_result)) int node_replace_all_uses_with(Node *old, Node *repl);
/* n computes a value: call_function, call_method or call_module. */
bool node_is_call(const Node *n);
/* n (may be NULL) is a call_function of op. */
bool node_is_op(const Node *n, const OpDef *op);
/* Refuses (returns false) while the node has users. */
bool graph_erase_node(Graph *g, Node *n);
/* Unlinks n and relinks it before `before`. */
void graph_move_before(Graph *g, Node *n, Node *before);

/* Attributes */
Attr *node_attr(const Node *n, const char *name); /* NULL if absent */
int64_t node_attr_int(const Node *n, const char *name, int64_t dflt);
float node_attr_float(const Node *n, const char *name, float dflt);
const char *node_attr_string(const Node *n, const char *name, const char *dflt);
/* INTS attribute: returns the count (-1 if absent) and sets *vals. */
int64_t node_attr_ints(const Node *n, const char *name, const int64_t **vals);
int64_t node_attr_floats(const Node *n, const char *name, const float **vals);
/* Adds or overwrites. Values are copied into the arena. */
Attr *node_set_attr_int(Node *n, const char *name, int64_t v);
Attr *node_set_attr_float(Node *n, const char *name, float v);
Attr *node_set_attr_string(Node *n, const char *name, const char *s);
Attr *node_set_attr_ints(Node *n, const char *name, const int64_t *v, int64_t count);
Attr *node_set_attr_floats(Node *n, const char *name, const float *v, int64_t count);
Attr *node_set_attr_strings(Node *n, const char *name, const char *const *v, int64_t count);
/* Takes ownership of t. */
Attr *node_set_attr_tensor(Node *n, const char *name, Tensor *t);
void node_remove_attr(Node *n, const char *name);

/* Type of input i as seen by node n (follows getitem indices: a single-output
 * arg gives out_types[0]).  NULL for an omitted input. */
const TensorType *node_input_type(const Node *n, int i);
/* Output metadata storage, (re)allocated for k outputs. */
bool node_set_num_outputs(Node *n, int k);

/* ------------------------------------------------------------------------- */
/* The op table (ops.c, ops.def, ops/ *.c)                                    */
/* ------------------------------------------------------------------------- */

/* Declarative attribute: `dflt` is the ONNX default written as text ("1",
 * "0.0001", "NOTSET", "[]" for an empty list, "[1, 1]"); NULL means the
 * attribute may be absent and has no default (the op's canonicalize decides). */
typedef struct AttrSpec {
    const char *name;
    AttrKind kind;
    const char *dflt;
    bool required;
} AttrSpec;

typedef struct InferCtx {
    Node *node;
    int num_inputs;
    const TensorType *const *in; /* NULL entries: omitted inputs */
    const Tensor *const *in_value; /* compile-time constants, else NULL */
    int num_outputs;
    TensorType *out; /* to fill, num_outputs entries */
    Diag *diag;
} InferCtx;

typedef struct EvalCtx {
    const Node *node;
    int num_inputs;
    const Tensor *const *in; /* NULL entries: omitted inputs */
    int num_outputs;
    Tensor *const *out; /* allocated by the caller to the inferred types */
    Diag *diag;
} EvalCtx;

/* The emit context an op's emitter writes through; defined by the op
 * library (ir/ops/ops.h), which owns everything about writing C. */
typedef struct EmitCtx EmitCtx;

enum {
    FX_OPF_ELEMENTWISE = 1u << 0, /* output[i] depends on input[i] (with broadcasting) */
    FX_OPF_COMMUTATIVE = 1u << 1, /* binary op whose operands may swap */
    FX_OPF_VIEW = 1u << 2,        /* same bytes, another shape: call_method */
    FX_OPF_INTERNAL = 1u << 3,    /* not an ONNX op (getitem): never looked up by name */
    /* The outputs depend only on the input types (Shape, Size): shape
     * propagation evaluates them with input tensors whose data is NULL. */
    FX_OPF_TYPE_ONLY = 1u << 4,
    /* A module kind (fused kernel, leaf): its nodes are call_module nodes
     * whose target is "fused.NAME"; it is never imported from ONNX. */
    FX_OPF_MODULE = 1u << 5,
    /* Never constant-fold or CSE a node of this op, even when its inputs are
     * constants: its kernel is outside fxcc (a leaf op's user function) and
     * may not be available, or not pure, at compile time. */
    FX_OPF_OPAQUE = 1u << 6
};

/* One op kind, defined once.  `name` is the ONNX op type and the FX target of
 * call_function nodes; view ops (FX_OPF_VIEW) become call_method nodes whose
 * target is `method`. */
struct OpDef {
    const char *name;
    const char *method; /* call_method target, NULL for call_function */
    int min_inputs, max_inputs;   /* max_inputs -1: variadic */
    int min_outputs, max_outputs;
    unsigned flags;
    const AttrSpec *attrs; /* terminated by {NULL} */
    /* Called at import after attribute defaults are filled: turns older
     * opset forms into the one canonical form (attributes that later opsets
     * made inputs become constant inputs, ...).  May be NULL. */
    FxStatus (*canonicalize)(Node *n, int opset, Diag *d);
    FxStatus (*infer)(InferCtx *c);
    FxStatus (*eval)(EvalCtx *c);
    /* Bytes of scratch the emitted code of node n needs (NULL: none). */
    size_t (*scratch_bytes)(const Node *n);
    /* The same for the runtime's small kernels (--target cortex-m builds
     * it with FXRT_SMALL_KERNELS), when those need less.  NULL: as
     * scratch_bytes. */
    size_t (*small_scratch_bytes)(const Node *n);
    /* True when node n's emitted code can write output 0 over input 0 (one
     * buffer for both, when the memory plan chooses it: EmitCtx.inplace)
     * given exactly *scratch_bytes of scratch instead.  NULL:
     * never, except for FX_OPF_ELEMENTWISE ops, which need no hook. */
    bool (*inplace)(const Node *n, size_t *scratch_bytes);
    /* The input of node n that its emitted code can take as output 0's
     * starting values, adding to them (a convolution's residual), when the
     * memory plan gives both one buffer because that input is read for the
     * last time here; -1 or NULL: none. */
    int (*accumulates_into)(const Node *n);
    /* Writes node n's C statements (NULL: not supported by the code
     * generator yet, which refuses the model naming the op). */
    FxStatus (*emit)(EmitCtx *c);
};

typedef enum OpKind {
#define FX_OP(sym) FX_OP_##sym,
#include "ops.def"
#undef FX_OP
    FX_OP_COUNT_
} OpKind;

#define FX_OP(sym) extern const OpDef fx_op_##sym;
#include "ops.def"
#undef FX_OP

/* The ONNX op of that type; NULL if unsupported (internal and module kinds
 * are not ONNX ops). */
const OpDef *op_lookup(const char *onnx_type);
/* Any op kind by name, module kinds and internal ops included (the text
 * parser and pass tables). */
const OpDef *op_lookup_any(const char *name);
const OpDef *op_by_kind(OpKind k);
OpKind op_kind(const OpDef *op);
int op_count(void);
/* Fills defaults of op->attrs into n, rejects unknown or mistyped attributes
 * and missing required ones. */
FxStatus op_apply_attr_specs(const OpDef *op, Node *n, Diag *d);

/* Helpers for op definitions (ops.c) */
/* Numpy-style broadcast of a and b into out (dtype left to the caller). */
FxStatus infer_broadcast(InferCtx *c, const TensorType *a, const TensorType *b,
                         TensorType *out);
/* Normalizes axis into [0, rank), or fails with a node error. */
FxStatus infer_axis(InferCtx *c, int64_t axis, int rank, int *out);
/* Reads an integer constant input as a list; fails naming the node when the
 * input is not a compile-time constant (data-dependent shape). */
FxStatus infer_const_ints(InferCtx *c, int input, int64_t *vals, int64_t max, int64_t *count);
/* The error for input `input` (named `role`, or by its index when role is
 * NULL) of the node being inferred, which must be a compile-time constant
 * because `depends` (NULL: the output shape depends on its data).  Every such
 * error goes through here or ends with const_input_hint, so that all name
 * the same ways out. */
FxStatus infer_not_constant(InferCtx *c, int input, const char *role, const char *depends);
/* The ways out of a "must be a compile-time constant" error, to append to
 * its message: --const gives an input's value, --shape the input dims a
 * value is computed from; and when g has inputs whose initializer was kept
 * as an overridable default (--keep-input-defaults), the flag to drop. */
const char *const_input_hint(const Graph *g);

/* ------------------------------------------------------------------------- */
/* Leaf ops (ops/leaf.c)                                                      */
/* ------------------------------------------------------------------------- */

/* A Leaf node (call_function, target Leaf) stands for an op fxcc does not
 * implement, like FX's wrap: the generated code calls the user's C function
 * fxcc_leaf_OP, and the interpreter finds that function in a shared library.
 * Attributes: leaf_op and leaf_domain (the ONNX op), leaf_outputs (count),
 * leaf_types (one type per output, "float32[1, 8]", "" when unknown), then
 * the node's ONNX attributes as they were. */
enum { FX_LEAF_MAX_VALUES = 8 }; /* inputs and outputs together */

/* Parses "float32[1, 8]", "float32[1x8]" or "float32[]" (a scalar). */
FxStatus leaf_type_parse(const char *text, TensorType *t, Diag *d);
/* The shared libraries whose fxcc_leaf_OP functions the interpreter runs,
 * searched in the order loaded.  Owned by the caller that loads them (a
 * zeroed struct is an empty table), attached to graphs through
 * Graph.leaf_libraries, and closed by that caller once no graph runs. */
enum { FX_LEAF_MAX_LIBRARIES = 16 };
struct LeafLibraries {
    int count;
    struct {
        void *handle;
        char *path;
    } items[FX_LEAF_MAX_LIBRARIES];
};
/* dlopens a library into l.  A path without '/' names a file in the current
 * folder. */
FxStatus leaf_libraries_load(LeafLibraries *l, const char *path, Diag *d);
/* Closes every library of l; l is empty again. */
void leaf_libraries_close(LeafLibraries *l);
/* "fxcc_leaf_OP" (OP made a C identifier) into buf. */
const char *leaf_function_name(const Node *n, char *buf, size_t cap);
/* The C prototype of n's function, without the ';' (malloc'd, NULL on
 * out of memory); n's shapes must be known. */
char *leaf_prototype(const Node *n);

/* ------------------------------------------------------------------------- */
/* Printers (print.c)                                                         */
/* ------------------------------------------------------------------------- */

/* FX text form: "%name : [num_users=N] opcode[target=T](args = (...), kwargs = {...})"
 * with the output type appended as a comment when known, then "return ...". */
void graph_print(const Graph *g, FILE *out);
void node_format(const Node *n, char *buf, size_t cap); /* one FX line */
void graph_print_tabular(const Graph *g, FILE *out);
void graph_print_dot(const Graph *g, FILE *out);

/* ------------------------------------------------------------------------- */
/* Lint (lint.c)                                                              */
/* ------------------------------------------------------------------------- */

/* Checks: topological order, args/users symmetry, unique valid names,
 * placeholders first, exactly one output and it is last, call_method only for
 * view ops, known targets, getitem only on multi-output nodes, and (when
 * require_shapes) shapes present on every value.  Reports every problem. */
FxStatus graph_lint(const Graph *g, bool require_shapes, Diag *d);

/* ------------------------------------------------------------------------- */
/* Shape propagation (shape_prop.c)                                           */
/* ------------------------------------------------------------------------- */

typedef struct ShapeBinding {
    const char *input; /* graph input (ONNX name or node name) */
    TensorType type;   /* dims only; dtype ignored */
} ShapeBinding;

/* Parses "NAME=1x3x224x224" (a scalar is "NAME="). */
FxStatus shape_binding_parse(const char *text, ShapeBinding *out, Diag *d);

/* Fills out_types on every node.  Placeholders take their declared shape,
 * with symbolic dims bound by `bindings`; an unbound symbolic dim is an
 * error naming the input.  Nodes whose inputs are all compile-time constants
 * are evaluated, so Shape/Gather/Concat/Reshape chains resolve. */
FxStatus graph_propagate_shapes(Graph *g, const ShapeBinding *bindings, int num_bindings,
                                Diag *d);
/* Infers the output types of one call_function/call_method/call_module node
 * from its arguments' types (which must be known), folding it when all its
 * inputs are constants; passes call it on every node they create. */
FxStatus node_infer_shapes(Node *n, Diag *d);
/* The compile-time value of argument `a` as read by a node (a get_attr's
 * tensor, or a value shape propagation folded), or NULL. */
const Tensor *node_const_value(const Node *a);
/* An optional scalar argument's constant integer value (0 when a is NULL,
 * as for an absent zero point); false when it is not a constant scalar. */
bool node_const_scalar_int(const Node *a, int32_t *v);
/* True when an optional argument is absent or a constant of zeros (zero
 * points that leave the integer arithmetic unshifted). */
bool node_const_zeros(const Node *a);

/* ------------------------------------------------------------------------- */
/* Interpreter (interp.c)                                                     */
/* ------------------------------------------------------------------------- */

/* Runs a node's reference kernel on given inputs, allocating its outputs. */
FxStatus node_eval(const Node *n, const Tensor *const *inputs, Tensor **outputs, Diag *d);

typedef void (*InterpObserver)(void *user, const Node *n, Tensor *const *outputs);

/* Runs g (shapes propagated) on inputs given in placeholder order.  Fills
 * outputs[k] with new tensors, one per returned value.  Values are freed
 * after their last use.  observer, if not NULL, sees every node's outputs. */
FxStatus interp_run(const Graph *g, const Tensor *const *inputs, int num_inputs,
                    Tensor **outputs, int num_outputs, InterpObserver observer, void *user,
                    Diag *d);
int graph_num_outputs(const Graph *g);

/* ------------------------------------------------------------------------- */
/* Summary (summary.c)                                                        */
/* ------------------------------------------------------------------------- */

typedef struct GraphSummary {
    int64_t parameters;    /* elements in get_attr constants */
    int64_t parameter_bytes;
    int64_t macs;          /* multiply-accumulates of Conv/Gemm/MatMul/... */
    int op_counts[FX_OP_COUNT_];
} GraphSummary;

int64_t node_macs(const Node *n);
void graph_summarize(const Graph *g, GraphSummary *s);
void graph_print_summary(const Graph *g, FILE *out);

#endif
