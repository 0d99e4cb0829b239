/*
 * opt.h - fxcc's graph transformation toolkit and its passes, after FX.
 *
 * The toolkit (toolkit.c, rewrite.c, graph_parse.c, transformer.c,
 * decompose.c) edits a Graph with FX's semantics and the deviations that
 * FX.md (top of the tree) lists: an insertion cursor that moves forward, shapes
 * re-inferred on every node a helper creates, replace_all_uses_with that
 * never makes a cycle.  Every pass lives in its own pass_*.c file with one
 * entry point, and passes.c lists them with their names and -O levels.
 */
#ifndef FXCC_OPT_H
#define FXCC_OPT_H

#include "../ir/ir.h"

/* ------------------------------------------------------------------------- */
/* Node editing (toolkit.c)                                                   */
/* ------------------------------------------------------------------------- */

/* Where new nodes go: before `before` (the graph's sentinel = at the end).
 * Unlike FX's inserting_after, the cursor stays after each node it inserted,
 * so nodes created in a row come out in that order. */
typedef struct InsertPoint {
    Graph *graph;
    Node *before;
} InsertPoint;

InsertPoint insert_before(Node *n);
InsertPoint insert_after(Node *n);

/* Create a node at ip and infer its output types.  `op` decides the opcode:
 * a view op gives call_method, a module kind call_module, anything else
 * call_function.  On failure they return NULL with d filled and leave the
 * graph as it was. */
Node *ip_create_op(InsertPoint *ip, const OpDef *op, const char *name_hint, Node *const *args,
                   int num_args, Diag *d);
/* The node v may fuse into (ggml's "can these nodes fuse"), or NULL: v has
 * exactly one user and is not a graph output, i.e. the output node does not
 * read it, so no one else sees the value once it lives inside the user.
 * Every pass that merges a value into its reader asks this. */
Node *node_fusable_user(const Node *v);
/* Completes a single-output node a pass made with graph_create_op and gave
 * its own attributes (attrs_set: whether setting them succeeded): the op's
 * defaults for the rest, one output, types inferred.  On failure the node
 * is erased and the status says why ("out of memory" naming `origin`, the
 * node it stands for, when attrs_set is false). */
FxStatus node_finish_created(Node *n, bool attrs_set, const Node *origin, Diag *d);
/* Replaces uses of `old` by `repl` in n's arguments only; returns how many,
 * -1 when memory ran out. */
__attribute__((warn_unused_result)) int node_replace_input_with(Node *n, Node *old, Node *repl);
/* Dead: nobody reads n's value and erasing it changes nothing the model
 * does.  Placeholders (the generated signature is the model's), the output
 * and opaque nodes (a leaf's user function may have effects, FX's impure
 * nodes) are never dead. */
bool node_is_dead(const Node *n);
/* FX's eliminate_dead_code, the way to erase dead nodes: every dead node of
 * g, until none is left.  Returns the number erased.  Passes call it once
 * they are done, or, in the middle of a walk, node_eliminate_if_dead. */
int graph_eliminate_dead_code(Graph *g);
/* The same from one root: n (NULL or not dead: nothing) and the arguments
 * that erasing it leaves dead, recursively.  They all come before n, so a
 * pass walking forward past n may call it.  Returns the number erased. */
int node_eliminate_if_dead(Node *n);

/* Tries a local rewrite at node n: *done when it changed the graph.  It may
 * erase n and nodes before n, never nodes after it. */
typedef FxStatus (*NodeRewriteFn)(Node *n, bool *done, Diag *d);
/* Calls rewrite on every call_function node in order, walking again while
 * a walk changed something (one rewrite can enable another); adds the
 * rewrites made to *changes. */
FxStatus graph_rewrite_until_fixed(Graph *g, NodeRewriteFn rewrite, int *changes, Diag *d);

/* A value map from the nodes of one graph to those of another (FX's
 * val_map), pre-fillable by the caller.  Keyed by node id. */
typedef struct ValueMap {
    int cap;
    Node **to; /* indexed by source node id */
} ValueMap;

bool value_map_init(ValueMap *m, const Graph *src);
void value_map_free(ValueMap *m);
void value_map_set(ValueMap *m, const Node *src, Node *dst);
Node *value_map_get(const ValueMap *m, const Node *src);

/* Sets attribute a (a tensor is cloned) on dst; false when out of memory. */
bool node_copy_attr(Node *dst, const Attr *a, Diag *d);

/* Copies node `src` (another graph's, or this one's) to ip, its arguments
 * mapped through m (an unmapped argument is an error), with attributes,
 * metadata, constant values and module bodies; records src -> copy in m. */
Node *node_copy(InsertPoint *ip, const Node *src, ValueMap *m, Diag *d);
/* Copies every node of src except its output into dst, before dst's output
 * node if it has one.  Placeholders already mapped in m are not copied (their
 * uses read the mapped node).  *results gets the copies of the values src
 * returns (caller frees), *num_results their count. */
FxStatus graph_copy(Graph *dst, const Graph *src, ValueMap *m, Node ***results,
                    int *num_results, Diag *d);

/* Copies the nodes of control-flow body `body` to ip, its placeholders
 * reading inputs[k] in order; results[k] gets the copy of the value it
 * returns as output k.  Copies of nodes the body never typed stay untyped
 * (shape propagation types them, or refuses them, in their new place). */
FxStatus graph_inline_body(InsertPoint *ip, const Graph *body, Node *const *inputs,
                           Node **results, Diag *d);
/* Makes the readers of control-flow node n's outputs read results[k] instead
 * (through n's getitems when it has several) and erases n. */
FxStatus node_replace_outputs(Node *n, Node *const *results, Diag *d);

/* A whole copy of src, output node included, through graph_copy: the same
 * node names, types, constants and module bodies (a call_module's body, or
 * verify's unoptimized reference).  NULL with d filled on failure. */
Graph *graph_clone(const Graph *src, Diag *d);

/* ------------------------------------------------------------------------- */
/* Text form (graph_parse.c)                                                  */
/* ------------------------------------------------------------------------- */

/* Parses a small graph written in the printer's syntax, so that tests and
 * patterns can be written inline:
 *
 *     %x : placeholder[target=x]
 *     %p : get_attr[target=p]
 *     %add : call_function[target=Add](args = (%x, %p))
 *     %clip : call_function[target=Clip](args = (%add, None, None))
 *     return (%clip,)
 *
 * Optional `: float32[1, 4]` after a placeholder gives its type (needed to
 * run the graph), as does the printer's `# float32[1, 4]` comment; a get_attr
 * gets its value from `constants` by target, or is a wildcard constant when
 * constants has none of that name (patterns): value NULL and no shape, so a
 * graph holding one is a pattern, never linted or run.  kwargs = {...} sets
 * attributes (ints, floats, strings, lists); defaults of the op are filled as
 * at import.  `[num_users=N]` is optional and checked.  When every
 * placeholder is typed and every constant has a value, shapes are
 * propagated, so printing the result of parsing printer output gives the
 * same text.  call_module lines and tensor attributes are refused.  Returns
 * NULL with d filled (FX_ERR_INVALID, "LINE:COL: ...") on bad text. */
typedef struct NamedTensor {
    const char *name;
    const Tensor *value; /* copied */
} NamedTensor;

Graph *graph_parse(const char *text, const NamedTensor *constants, int num_constants, Diag *d);

/* ------------------------------------------------------------------------- */
/* Subgraph rewriting (rewrite.c)                                             */
/* ------------------------------------------------------------------------- */

/* One match: pattern node id -> matched graph node, for every pattern node
 * except the output.  After replace_pattern the matched call nodes are
 * erased: only their name, opcode, op and id stay readable (graph_free
 * releases them). */
typedef struct Match {
    Node *anchor;        /* the graph node matched by the pattern's (single) output value */
    Node **nodes;        /* indexed by pattern node id; NULL for unmapped ids */
    int num_nodes;       /* = the pattern's next_id */
    Node **placeholders; /* graph nodes bound to the pattern's placeholders, in order */
    int num_placeholders;
    Node **replacements; /* the nodes that replaced the match's returned values */
    int num_replacements;
} Match;

typedef struct MatchList {
    Match *items;
    int count;
} MatchList;

void match_list_free(MatchList *l);

/* Keeps a candidate match when it returns true (FX's match_filters).  It
 * sees candidates that passed every other test, replacements still NULL; a
 * refused candidate does not block a later one that overlaps it. */
typedef bool (*MatchFilter)(const Match *m, const Graph *g, const Graph *pattern, void *user);

typedef struct RewriteOptions {
    MatchFilter filter; /* may be NULL */
    void *user;
    /* Let a commutative op (FX_OPF_COMMUTATIVE) match with its operands
     * swapped. */
    bool commutative;
} RewriteOptions;

/* FX's replace_pattern: every non-overlapping occurrence of `pattern` in g,
 * taken in graph order, whose interior values are not used outside it, is
 * replaced by a copy of `replacement` (same number of placeholders and
 * returned values).  Pattern placeholders match any value; pattern get_attrs
 * match constants (equal values when the pattern's has one, any constant
 * otherwise); call nodes match by op, attributes and argument structure.
 * The copy goes where all its inputs are defined, its shapes are inferred,
 * and the dead matched nodes are erased.  `matches` (may be NULL) receives
 * the matches replaced.  Two pattern placeholders may bind the same value;
 * the pattern's other returned values must lie inside what its first one
 * reaches (multi-output patterns).  On failure the graph is consistent but
 * may hold the replacements made before. */
FxStatus replace_pattern(Graph *g, const Graph *pattern, const Graph *replacement,
                         const RewriteOptions *o, MatchList *matches, Diag *d);

/* ------------------------------------------------------------------------- */
/* Transformer (transformer.c)                                                */
/* ------------------------------------------------------------------------- */

/* FX's Transformer: walks src in the interpreter's order and builds a new
 * graph; each hook gets the source node and its already-transformed
 * arguments and returns the node that stands for it in the new graph.  A NULL
 * hook copies the node as is.  A hook that fails returns NULL with d filled.
 * A hook may create several nodes (through t->ip) and return the last; for a
 * node with several outputs it must return a node with as many, which the
 * source's getitem nodes then read. */
typedef struct Transformer Transformer;
typedef Node *(*TransformHook)(Transformer *t, const Node *src, Node *const *args, int num_args);

struct Transformer {
    TransformHook placeholder, get_attr, call_function, call_method, call_module;
    Graph *dst;    /* the graph being built */
    InsertPoint ip; /* where hooks create nodes (the end of dst) */
    void *user;
    Diag *diag;
    /* Source node -> its node in dst for every node walked so far (FX's
     * env); valid while transformer_run runs. */
    ValueMap values;
};

/* Returns the new graph (shapes propagated) or NULL with d filled. */
Graph *transformer_run(Transformer *t, const Graph *src, Diag *d);
/* What a NULL hook does: copies src at t->ip with `args` (src's arguments,
 * transformed) in place of its own.  Hooks call it for the nodes they leave
 * alone, as FX's hooks call super(). */
Node *transformer_copy(Transformer *t, const Node *src, Node *const *args, int num_args);

/* ------------------------------------------------------------------------- */
/* Decomposition (decompose.c)                                                */
/* ------------------------------------------------------------------------- */

/* Builds, at ip, primitive nodes computing the same value as n from args
 * (n's arguments, possibly already mapped); returns the node holding the
 * result. */
typedef Node *(*DecomposeFn)(InsertPoint *ip, const Node *n, Node *const *args, Diag *d);

typedef struct DecompositionRule {
    const OpDef *op;
    DecomposeFn build;
} DecompositionRule;

/* The built-in table (Relu, HardSwish, HardSigmoid, Gelu, LayerNormalization,
 * Softmax, ...), terminated by {NULL, NULL}. */
const DecompositionRule *decomposition_rules(void);
/* Rewrites every node whose op has a rule in `rules` (NULL: the built-in
 * table) and whose kind is in `only` (NULL: all).  Returns the number of nodes
 * decomposed in *count. */
FxStatus graph_decompose(Graph *g, const DecompositionRule *rules, const OpDef *const *only,
                         int num_only, int *count, Diag *d);

/* ------------------------------------------------------------------------- */
/* Folding helpers (fold_util.c)                                              */
/* ------------------------------------------------------------------------- */

/* What bn-fold and linear-fold share: reading constants, broadcasting them,
 * and absorbing a per-channel affine map into a linear layer's weights.
 * Every helper refuses (returns false / *folded = false, graph untouched)
 * unless the values involved are float32 with known shapes and the weights
 * are constants. */

/* a's compile-time float32 value (a get_attr or a value shape propagation
 * folded), or NULL. */
const Tensor *fold_const_f32(const Node *a);
/* n has one output, of known shape and type float32. */
bool fold_is_f32(const Node *n);
/* A new float32 tensor of that shape, zeroed (d filled on failure). */
Tensor *fold_tensor_f32(int rank, const int64_t *dims, Diag *d);
/* t (which broadcasts to `type`) expanded to type's full shape. */
Tensor *fold_broadcast_to(const Tensor *t, const TensorType *type, Diag *d);
/* When t, broadcast to `type`, varies only along `axis`, writes its value
 * per index of that axis into out[type->dims[axis]] and returns true. */
bool fold_channel_vector(const Tensor *t, const TensorType *type, int axis, float *out);

/* y = scale * x + shift, elementwise.  Each tensor (NULL: 1, resp. 0) is
 * float32 and broadcasts to the value the map applies to without growing it;
 * a per-channel map on NCHW data is [1, C, 1, 1]. */
typedef struct FoldAffine {
    Tensor *scale;
    Tensor *shift;
} FoldAffine;

void fold_affine_free(FoldAffine *a);
/* An inference BatchNormalization n (float32, constant per-channel
 * parameters, not training mode) as the affine map y = scale * x + shift,
 * both shaped [1, C, 1, ...] to broadcast along axis 1 only; *ok = false
 * (a untouched) when n is not one. */
FxStatus fold_bn_affine(const Node *n, FoldAffine *a, bool *ok, Diag *d);
/* `result` computes a(layer's output) and is the only reader of it: the
 * layer (Conv, ConvTranspose, Gemm, MatMul with 2-D constant weights) takes
 * the map into its weights and bias (a MatMul becomes a Gemm when it needs
 * a bias), and result's users read the layer instead.  The map must be per
 * output channel (a Gemm's shift may also be a full [M, N]). */
FxStatus fold_affine_after(Node *layer, Node *result, const FoldAffine *a, bool *folded,
                           Diag *d);
/* layer's input 0 is `pre` = a(x), read by nobody else: the layer reads x
 * with weights scaled along the input axis and bias + W.shift.  The map must
 * be per input channel (for a 2-D Gemm/MatMul, a shift may be full); a Conv
 * takes a nonzero shift only when it pads nothing. */
FxStatus fold_affine_before(Node *layer, Node *pre, Node *x, const FoldAffine *a, bool *folded,
                            Diag *d);

/* A Gemm, or a MatMul with 2-D weights, read as y = x'.w + bias with the
 * constants copied out (alpha and beta folded in). */
typedef struct FoldDense {
    Node *layer;
    bool gemm;
    bool trans_a, trans_b; /* the layer's (a MatMul's: false) */
    bool two_d;            /* x is 2-D: the layer can be a Gemm */
    int64_t m, k, n;       /* m: output rows when two_d */
    float *w;              /* [k, n] */
    int64_t bias_rows;     /* 0 (none), 1 ([n]) or m ([m, n]) */
    float *bias;           /* [bias_rows, n] */
} FoldDense;

/* *ok = false (nothing allocated) when layer is not such a layer. */
FxStatus fold_dense_read(Node *layer, FoldDense *dn, bool *ok, Diag *d);
void fold_dense_free(FoldDense *dn);
/* Writes dn back as the layer reading x (in place, or a new Gemm when a
 * MatMul gained a bias) and makes result's users read it; erases what
 * became dead.  `retired` (may be NULL) is a node the rewrite replaced. */
FxStatus fold_dense_commit(FoldDense *dn, Node *x, Node *result, Node *retired, Diag *d);

/* ------------------------------------------------------------------------- */
/* Passes (passes.c, pass_*.c)                                                */
/* ------------------------------------------------------------------------- */

/* What a pass reports; `changes` counts the rewrites it made (0: the graph
 * is untouched). */
typedef struct PassResult {
    int changes;
} PassResult;

typedef FxStatus (*PassFn)(Graph *g, PassResult *r, Diag *d);

/* For passes that rewrite nodes one at a time: every use of n becomes
 * `replacement`, counted in r (n is left for pass_finish to erase). */
FxStatus pass_replace_node(Node *n, Node *replacement, PassResult *r, Diag *d);
/* A node-by-node pass's end: when it succeeded (st) and changed something,
 * the nodes it replaced, and what only they read, are erased.  Returns st. */
FxStatus pass_finish(Graph *g, const PassResult *r, FxStatus st);

typedef struct PassDef {
    const char *name;    /* as on the command line: "const-fold" */
    int level;           /* the lowest -O level that runs it */
    PassFn run;
    const char *summary; /* one line for `fxcc passes` */
    /* Left out of the levels for --target portable: a host kernel that
     * trades size or precision for speed. */
    bool host_only;
} PassDef;

/* Each pass's entry point, one per pass_*.c file.  A pass may leave the
 * shapes of untouched nodes alone; the pass manager re-propagates shapes and
 * lints after every pass. */
FxStatus pass_qdq_fold(Graph *g, PassResult *r, Diag *d);
FxStatus pass_const_fold(Graph *g, PassResult *r, Diag *d);
FxStatus pass_layout_cleanup(Graph *g, PassResult *r, Diag *d);
FxStatus pass_attention_fusion(Graph *g, PassResult *r, Diag *d);
FxStatus pass_bn_fold(Graph *g, PassResult *r, Diag *d);
FxStatus pass_bn_to_conv(Graph *g, PassResult *r, Diag *d);
FxStatus pass_qgemm_pack(Graph *g, PassResult *r, Diag *d);
FxStatus pass_qconv_pack(Graph *g, PassResult *r, Diag *d);
FxStatus pass_qconv_nhwc(Graph *g, PassResult *r, Diag *d);
FxStatus pass_linear_fold(Graph *g, PassResult *r, Diag *d);
FxStatus pass_cse(Graph *g, PassResult *r, Diag *d);
FxStatus pass_dce(Graph *g, PassResult *r, Diag *d);
FxStatus pass_epilogue_fusion(Graph *g, PassResult *r, Diag *d);
FxStatus pass_gemm_pack(Graph *g, PassResult *r, Diag *d);
FxStatus pass_elementwise_fusion(Graph *g, PassResult *r, Diag *d);
FxStatus pass_nchwc_layout(Graph *g, PassResult *r, Diag *d);
FxStatus pass_squeeze_excite(Graph *g, PassResult *r, Diag *d);
FxStatus pass_channel_gather(Graph *g, PassResult *r, Diag *d);
FxStatus pass_winograd(Graph *g, PassResult *r, Diag *d);
/* pass_sparse_weights.c: the host rule (smaller and faster) and the
 * portable one (smaller). */
FxStatus pass_sparse_weights(Graph *g, PassResult *r, Diag *d);
FxStatus pass_sparse_weights_portable(Graph *g, PassResult *r, Diag *d);

/* All passes in the order -O2 runs them. */
const PassDef *pass_table(int *count);
const PassDef *pass_lookup(const char *name); /* NULL if unknown */

typedef struct PassOptions {
    const ShapeBinding *bindings; /* as given to graph_propagate_shapes */
    int num_bindings;
    /* Run the interpreter on fixed random inputs before the passes and after
     * each one, and fail naming the pass whose outputs are not allclose. */
    bool check;
    const char *print_after; /* pass name, "all", or NULL */
    const char *dot_after;
    FILE *print_to; /* where print_after/dot_after write (NULL: stdout) */
    bool portable; /* for --target portable: the levels skip host_only passes */
} PassOptions;

/* Runs the passes of level `level` (0, 1, 2), in table order, but for
 * o->portable the host_only ones. */
FxStatus opt_run_level(Graph *g, int level, const PassOptions *o, Diag *d);
/* Runs a comma-separated list ("const-fold,dce"), in the order given. */
FxStatus opt_run_list(Graph *g, const char *list, const PassOptions *o, Diag *d);

/* ------------------------------------------------------------------------- */
/* Control flow (fold_if.c, unroll_loops.c, lower_if.c)                      */
/* ------------------------------------------------------------------------- */

/* Not table passes: the pipeline runs them between tries of shape
 * propagation, before anything refuses the model, so that what the bindings
 * decide (--const, --shape) is gone before it could be refused. */
/* Replaces each If of g whose condition has a compile-time value by the nodes
 * of its taken branch; returns the number folded, -1 with d filled. */
int fold_constant_ifs(Graph *g, Diag *d);
/* Unrolls each Loop of g with a compile-time trip count that its condition
 * cannot end early, and each Scan of static length, when the copies stay
 * small (the iteration number then is a constant in each copy); returns the
 * number unrolled, -1 with d filled. */
int unroll_loops(Graph *g, Diag *d);
/* Lays each If of g out flat for the code generator: both branches'
 * nodes, each between BranchBegin and BranchEnd (the emitted code skips the
 * branch not taken), and a Where per output; returns the number lowered,
 * -1 with d filled (lower_if.c). */
int lower_runtime_ifs(Graph *g, Diag *d);
/* Refuses, all at once, every node still standing for an op fxcc does not
 * have (Unsupported), each named by its path through the control-flow
 * bodies ("If_0/then_branch/LSTM_3 (LSTM)") with the flags that help. */
FxStatus refuse_unsupported(const Graph *g, Diag *d);

/* ------------------------------------------------------------------------- */
/* Post-training int8 quantization (calibrate.c, pass_quantize.c,            */
/* quantize.c)                                                                */
/* ------------------------------------------------------------------------- */

/* How an activation's range is chosen from what calibration saw. */
typedef enum CalibMethod {
    CALIB_MINMAX,     /* the smallest and largest value seen */
    CALIB_PERCENTILE, /* the (100-p)th and p-th percentiles of the values */
    CALIB_ENTROPY     /* the |x| threshold minimizing KL(P || Q), TensorRT's method */
} CalibMethod;

typedef struct CalibOptions {
    CalibMethod method;
    double percentile; /* for CALIB_PERCENTILE, in (50, 100] */
} CalibOptions;

/* "minmax", "percentile:99.99" or "entropy" into o. */
FxStatus calib_method_parse(const char *text, CalibOptions *o, Diag *d);

/* One value's observer: min and max, then (for percentile and entropy, in a
 * second walk over the same data once min and max are known) a histogram of
 * CALIB_BINS bins over [min, max] (percentile) or of |x| over [0, max|x|]
 * (entropy). */
enum { CALIB_BINS = 2048, CALIB_ENTROPY_LEVELS = 128 };
typedef struct Observer {
    double lo, hi;   /* min and max seen; lo > hi until a value is seen */
    double *hist;    /* CALIB_BINS counts, NULL until the histogram walk */
    double hist_lo, hist_hi;
} Observer;

void observer_init(Observer *ob);
void observer_free(Observer *ob);
void observer_add_minmax(Observer *ob, const float *x, int64_t n);
/* Starts the histogram over the range observer_add_minmax found. */
FxStatus observer_start_histogram(Observer *ob, const CalibOptions *o, Diag *d);
void observer_add_histogram(Observer *ob, const CalibOptions *o, const float *x, int64_t n);
/* The range o's method chooses (min/max when nothing was seen: 0, 0). */
void observer_range(const Observer *ob, const CalibOptions *o, float *lo, float *hi);

/* Calibration data: samples[s][k] is input k of sample s, typed like the
 * graph's placeholder k. */
typedef struct CalibData {
    Tensor ***samples;
    int num_samples, num_inputs;
} CalibData;

void calib_data_free(CalibData *c);
/* Reads the samples for g's inputs from `paths`, each a file or a folder:
 * - a single-input model takes .npy/.pb files (a folder: its *.npy and *.pb
 *   in name order), each either one sample (the input's shape) or a stack of
 *   samples along a new leading axis, or along axis 0 when the input's
 *   batch is 1 ([N, 64] for an input [1, 64]);
 * - any model takes a folder of sample folders DIR/NAME/ (in name order),
 *   each holding input_0.npy, input_1.npy... (or .pb), one per input.
 * Errors name the file and the input it does not fit. */
FxStatus calib_data_read(const Graph *g, const char *const *paths, int num_paths, CalibData *c,
                         Diag *d);

/* The range calibration chose for every float32 value of g, indexed by node
 * id (valid only for the graph it was run on). */
typedef struct CalibRanges {
    int count;  /* g->next_id when made */
    bool *seen; /* [count] */
    float *lo, *hi;
} CalibRanges;

void calib_ranges_free(CalibRanges *r);
/* Runs the interpreter on every sample with an observer on every float32
 * value (graph inputs included) and stores the chosen ranges. */
FxStatus calib_run(const Graph *g, const CalibData *c, const CalibOptions *o, CalibRanges *r,
                   Diag *d);

/* scale and zero point of an activation range as ONNX Runtime's quantizer
 * computes them: the range widened to contain 0, scale = (hi - lo) /
 * (qmax - qmin) (1 when that is 0), zero point = round_half_even(qmin -
 * lo / scale) clamped to [qmin, qmax].  dtype is UINT8 or INT8. */
void quant_affine_params(float lo, float hi, DType dtype, float *scale, int32_t *zero_point);
/* ONNX QuantizeLinear of one value: saturate(round_half_even(x / scale) +
 * zero_point) to [qmin, qmax]. */
int32_t quant_round(float x, float scale, int32_t zero_point, int32_t qmin, int32_t qmax);

/* What pass_quantize does, and what it reports back. */
typedef struct QuantizeOptions {
    const CalibRanges *ranges;
    DType activation_type; /* UINT8 (default) or INT8 */
    int weight_bits;       /* 8 (default, [-127, 127]) or 7 ([-64, 64]) */
    /* Node names of layers to leave float (--keep-float-below). */
    const char *const *keep_float;
    int num_keep_float;
} QuantizeOptions;

/* One quantized value: the float graph's node `layer` (by name) is now
 * carried as DequantizeLinear `dq` of the quantized graph. */
typedef struct QuantizedValue {
    const char *node;       /* the value quantized (a layer, an input...) */
    const char *layer;      /* the float graph's node with the same value (node,
                             * or the Relu removed after it) */
    const char *dq;         /* in the quantized graph's arena */
    bool is_layer;          /* the output of a quantized layer, not an input or pool */
} QuantizedValue;

typedef struct QuantizeResult {
    QuantizedValue *values; /* heap, in graph order */
    int num_values;
    int layers;                 /* layers quantized */
    uint64_t float_weight_bytes; /* float32 weights and biases of the quantized layers */
    uint64_t int8_weight_bytes;  /* their int8 weights, int32 biases, scales, zero points */
} QuantizeResult;

void quantize_result_free(QuantizeResult *r);
/* Rewrites the float graph g (calibrated as it is: r->ranges are indexed by
 * its node ids) into QDQ form, as ONNX Runtime's QDQ quantizer lays it out:
 * around Conv, Gemm, MatMul (weights int8 symmetric per output channel,
 * zero point 0, biases int32 of scale x_scale * w_scale), Add, Mul,
 * MaxPool, AveragePool, GlobalAveragePool and Concat every float input and
 * output is QuantizeLinear -> DequantizeLinear with constant parameters
 * (activation_type, per tensor); a Relu, or a Clip from 0, that alone reads
 * a quantized layer is removed and the layer's output takes its range.
 * Views and MaxPool keep their input's parameters. */
FxStatus pass_quantize(Graph *g, const QuantizeOptions *o, QuantizeResult *res, Diag *d);

/* The whole flow for the CLI and the pipeline (quantize.c). */
typedef struct QuantizeConfig {
    const char *const *calib_paths;
    int num_calib_paths;
    CalibOptions calib;
    DType activation_type;
    int weight_bits; /* 8, or 7 for CPUs without VNNI (QuantizeOptions); 0: 8 */
    const char *labels; /* a .npy of integer labels, one per sample; may be NULL */
    double keep_float_below; /* dB; NAN: off */
} QuantizeConfig;

typedef struct LayerError {
    const char *layer; /* heap: the float graph's value (a Relu merged into its layer) */
    const char *node;  /* heap: the layer node, as --keep-float-below names it */
    const char *op;    /* static (the op's name) */
    double sqnr_db;    /* INFINITY when exact */
    bool kept_float;
} LayerError;

typedef struct QuantizeReport {
    int num_samples;
    LayerError *layers;
    int num_layers;
    int num_outputs;
    double *output_sqnr_db, *output_max_abs; /* [num_outputs] */
    bool have_labels;
    double top1_agreement, float_accuracy, int8_accuracy;
    int num_kept_float;
    uint64_t float_weight_bytes, int8_weight_bytes;
    uint64_t kept_float_weight_bytes; /* the float bytes of the layers kept float */
} QuantizeReport;

void quantize_report_free(QuantizeReport *r);
/* Calibrates *g (after the -O1 passes) on cfg's samples, replaces it by its
 * QDQ form and measures that against the float graph on the same samples
 * (report may be NULL); with keep_float_below, the layers whose SQNR fell
 * below it are left float and the float graph quantized again.  On failure
 * *g is left as it was. */
FxStatus quantize_graph(Graph **g, const QuantizeConfig *cfg, QuantizeReport *report, Diag *d);
/* The report as a table: one row per layer, then outputs, top-1, weights. */
void quantize_report_print(const QuantizeReport *r, FILE *out);

/* ------------------------------------------------------------------------- */
/* Pruning (pass_prune_channels.c, pass_prune_magnitude.c, prune.c)           */
/* ------------------------------------------------------------------------- */

/* One group of channels pruned together: the output channels of `layers`
 * (comma-separated node names), united by residual Adds and the like. */
typedef struct PruneGroup {
    const char *layers;    /* heap */
    int64_t channels, kept;
    const char *why_whole; /* static; NULL when the group could be pruned */
    const char *why_node;  /* heap: the node that kept it whole, or NULL */
} PruneGroup;

typedef struct PruneChannelsResult {
    PruneGroup *groups; /* heap, in graph order of their first producer */
    int num_groups;
    int64_t channels_before, channels_after; /* summed over the groups */
    int edits; /* constants cut */
} PruneChannelsResult;

void prune_channels_result_free(PruneChannelsResult *r);
/* Structured pruning of the imported graph g (plain ONNX ops, shapes known):
 * every group of output channels of Conv/Gemm/MatMul layers that can lose
 * channels keeps ceil((1 - fraction) * C) of them, at least one, those of
 * the largest L1 norm over the group's weights; readers lose the matching
 * inputs through BatchNormalization, activations, pools, depthwise Convs,
 * residual Adds, Concat and Flatten.  Graph outputs, inputs and the
 * channels reaching ops it does not understand stay whole.  Shapes are
 * re-inferred.  fraction in [0, 1). */
FxStatus pass_prune_channels(Graph *g, double fraction, PruneChannelsResult *r, Diag *d);

typedef struct PruneMagnitudeResult {
    int layers;           /* Conv/Gemm/MatMul with constant float weights */
    int64_t weights;      /* their weights */
    int64_t zeros_before, zeros_after;
} PruneMagnitudeResult;

/* Unstructured pruning: the smallest |w| of those layers' weights become 0,
 * a fraction `sparsity` in [0, 1) of each layer, or of all of them when
 * global.  The weights stay dense. */
FxStatus pass_prune_magnitude(Graph *g, double sparsity, bool global, PruneMagnitudeResult *r,
                              Diag *d);

/* --prune channels:FRACTION, --prune magnitude:SPARSITY[:global]; NAN: off. */
typedef struct PruneConfig {
    double channels;
    double sparsity;
    bool sparsity_global;
    /* samples and labels to measure the pruned model on (as --calibrate and
     * --labels take them for quantization); may be none */
    const char *const *calib_paths;
    int num_calib_paths;
    const char *labels;
} PruneConfig;

/* Parses one --prune SPEC into c (the other kind is left as it was); a bad
 * spec is FX_ERR_INVALID naming it. */
FxStatus prune_spec_parse(const char *spec, PruneConfig *c, Diag *d);

typedef struct PruneReport {
    bool did_channels, did_magnitude;
    PruneChannelsResult channels;
    PruneMagnitudeResult magnitude;
    GraphSummary before, after;
    int num_samples; /* 0: no data given */
    int num_outputs;
    double *output_max_abs, *output_sqnr_db; /* [num_outputs], pruned vs unpruned */
    double top1_agreement;
    bool have_labels;
    double accuracy_before, accuracy_after;
    /* Filled after the passes by prune_report_note_storage (magnitude
     * pruning of a float model only): the pruned layers' weight bytes dense
     * and as the code stores them (compressed rows for the layers the
     * sparse-weights pass converted, 4 bytes a weight for the others, whose
     * packed forms pad a little), those layers and their names ("a, b",
     * heap). */
    bool storage_known;
    int64_t weight_bytes_dense, weight_bytes_stored;
    int sparse_layers;
    char *sparse_layer_names;
} PruneReport;

void prune_report_free(PruneReport *r);
/* Notes in r how the optimized graph g stores the weights magnitude pruning
 * zeroed (SparseConv/SparseGemm nodes).  False when out of memory. */
bool prune_report_note_storage(PruneReport *r, const Graph *g);
/* Prunes *g (the imported graph) as cfg says and measures the result
 * against the unpruned graph on cfg's samples (report may be NULL).  On
 * failure *g is left as it was. */
FxStatus prune_graph(Graph **g, const PruneConfig *cfg, PruneReport *report, Diag *d);
void prune_report_print(const PruneReport *r, FILE *out);
/* A .npy of integer labels, one per sample (quantize.c). */
FxStatus calib_labels_read(const char *path, int num_samples, Tensor **out, Diag *d);

#endif
