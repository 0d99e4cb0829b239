/*
 * passes.c - the pass table and the pass manager.
 *
 * After every pass the manager re-propagates shapes and lints the graph, so a
 * pass that breaks an invariant is named at once rather than by a later
 * stage.  With PassOptions.check it also runs the interpreter on fixed random
 * inputs before the first pass and after each one and compares: the
 * analogue of running an FX GraphModule before and after a transform.
 */
#include <stdlib.h>
#include <string.h>

#include "opt.h"

FxStatus pass_replace_node(Node *n, Node *replacement, PassResult *r, Diag *d)
{
    if (node_replace_all_uses_with(n, replacement) < 0)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    r->changes++;
    return FX_OK;
}

FxStatus pass_finish(Graph *g, const PassResult *r, FxStatus st)
{
    if (st == FX_OK && r->changes > 0)
        graph_eliminate_dead_code(g);
    return st;
}

/* In the order -O2 runs them: folding first (it exposes constants to the
 * fusion patterns), then clean-up, then fusion, whose call_module nodes the
 * earlier passes do not look into. */
static const PassDef pass_defs[] = {
    {"qdq-fold", 1, pass_qdq_fold,
     "DequantizeLinear -> op -> QuantizeLinear into the integer op (QLinearConv, QGemm, ...)",
     false},
    {"const-fold", 1, pass_const_fold,
     "nodes whose inputs are all constants become get_attr constants", false},
    {"layout-cleanup", 1, pass_layout_cleanup,
     "cancel Transpose/Reshape/Squeeze/Identity/Dropout chains, absorb transposes into GEMM", false},
    {"bn-fold", 1, pass_bn_fold,
     "fold inference BatchNormalization into the neighbouring Conv/Gemm/MatMul", false},
    {"linear-fold", 1, pass_linear_fold,
     "fold constant Add/Sub/Mul/Div into linear layers, merge clamp chains and linear pairs", false},
    {"cse", 1, pass_cse, "merge identical nodes and identical constants", false},
    {"dce", 1, pass_dce, "erase nodes whose values nobody reads", false},
    {"attention-fusion", 2, pass_attention_fusion,
     "MatMul -> [scale, mask] Softmax -> MatMul into one Attention whose scores stay in cache",
     false},
    {"bn-to-conv", 2, pass_bn_to_conv,
     "a BatchNormalization left unfolded becomes a depthwise 1x1 Conv, to take an epilogue", false},
    {"qgemm-pack", 2, pass_qgemm_pack,
     "QLinearMatMul/MatMulInteger with constant int8 weights onto the packed 8-bit GEMM", false},
    {"qconv-pack", 2, pass_qconv_pack,
     "QLinearConv/ConvInteger with constant int8 weights onto the packed 8-bit convolution", false},
    {"qconv-nhwc", 2, pass_qconv_nhwc,
     "the 8-bit activations between packed convolutions (and QLinearAdd/Mul) in NHWC "
     "(host only)", true},
    {"epilogue-fusion", 2, pass_epilogue_fusion,
     "Conv/Gemm/MatMul + bias + activation + residual Add into one kernel", false},
    {"sparse-weights", 2, pass_sparse_weights,
     "pruned Conv/Gemm/MatMul weights as compressed rows on the sparse kernels, where smaller "
     "(and, on the host, faster)", false},
    {"gemm-pack", 2, pass_gemm_pack,
     "float Gemm/MatMul/FusedGemm with constant weights onto the GEMM on packed weights "
     "(host only)", true},
    {"elementwise-fusion", 2, pass_elementwise_fusion,
     "chains and trees of elementwise ops, with a row reduction (Softmax, LayerNorm, "
     "Reduce*), into one loop nest", false},
    {"nchwc-layout", 2, pass_nchwc_layout,
     "2-D convolutions and the activations between them in the channel-blocked layout NCHWc", false},
    {"squeeze-excite", 2, pass_squeeze_excite,
     "squeeze-and-excite (global pool, two 1x1 convolutions, channel scale) on NCHWc into one "
     "kernel, or a gate on the weights of the pointwise convolution reading it", false},
    {"channel-gather", 2, pass_channel_gather,
     "chains of channel Slice/Concat/shuffle/NCHWc reorders into one ChannelGather per reader "
     "(channel shuffles as views)", false},
    {"winograd", 2, pass_winograd,
     "3x3 stride-1 NCHWc convolutions of 16+ channels by Winograd F(4x4, 3x3) (host only)", true},
};

enum { NUM_PASSES = (int)(sizeof pass_defs / sizeof pass_defs[0]) };

/* Passes whose rule differs for --target portable (and cortex-m): what
 * those targets run instead of PassDef.run. */
static const struct {
    const char *name;
    PassFn run;
} portable_variants[] = {
    {"sparse-weights", pass_sparse_weights_portable},
};

static PassFn pass_fn(const PassDef *p, const PassOptions *o)
{
    for (size_t k = 0; o->portable && k < sizeof portable_variants / sizeof *portable_variants; k++)
        if (strcmp(portable_variants[k].name, p->name) == 0)
            return portable_variants[k].run;
    return p->run;
}

const PassDef *pass_table(int *count)
{
    *count = NUM_PASSES;
    return pass_defs;
}

const PassDef *pass_lookup(const char *name)
{
    for (int k = 0; k < NUM_PASSES; k++)
        if (strcmp(pass_defs[k].name, name) == 0)
            return &pass_defs[k];
    return NULL;
}

/* --- checking -------------------------------------------------------------- */

/* Fixed random inputs and the outputs the graph gives on them before any
 * pass ran. */
typedef struct Reference {
    Tensor **inputs;
    int num_inputs;
    Tensor **outputs;
    int num_outputs;
} Reference;

static void reference_free(Reference *r)
{
    for (int k = 0; k < r->num_inputs; k++)
        tensor_free(r->inputs[k]);
    for (int k = 0; k < r->num_outputs; k++)
        tensor_free(r->outputs[k]);
    free(r->inputs);
    free(r->outputs);
    memset(r, 0, sizeof *r);
}

static FxStatus run_graph(const Graph *g, const Reference *r, Tensor **outputs, Diag *d)
{
    return interp_run(g, (const Tensor *const *)r->inputs, r->num_inputs, outputs,
                      r->num_outputs, NULL, NULL, d);
}

static FxStatus reference_make(const Graph *g, Reference *r, Diag *d)
{
    r->num_inputs = graph_num_placeholders(g);
    r->num_outputs = graph_num_outputs(g);
    r->inputs = fx_alloc_array((size_t)r->num_inputs + 1, sizeof *r->inputs);
    r->outputs = fx_alloc_array((size_t)r->num_outputs + 1, sizeof *r->outputs);
    if (!r->inputs || !r->outputs)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    for (int k = 0; k < r->num_inputs; k++)
        if (!(r->inputs[k] = tensor_new_random(&graph_placeholder(g, k)->out_types[0], &seed, d)))
            return FX_ERR_NOMEM;
    return run_graph(g, r, r->outputs, d);
}

/* The tolerance allows for reassociation (and grows with the outputs'
 * magnitude, see tensor_scaled_atol): folding and fusion change the
 * order of float operations, not their meaning. */
static FxStatus reference_check(const Graph *g, const Reference *r, const char *pass, Diag *d)
{
    if (graph_num_outputs(g) != r->num_outputs)
        return diag_error(d, FX_ERR_INVALID, "pass %s changed the number of outputs from %d to %d",
                          pass, r->num_outputs, graph_num_outputs(g));
    Tensor **got = fx_alloc_array((size_t)r->num_outputs + 1, sizeof *got);
    if (!got)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    FxStatus st = run_graph(g, r, got, d);
    for (int k = 0; k < r->num_outputs && st == FX_OK; k++) {
        if (!type_equal(&got[k]->type, &r->outputs[k]->type)) {
            char a[128], b[128];
            st = diag_error(d, FX_ERR_INVALID, "pass %s changed output %d from %s to %s", pass, k,
                            type_format(&r->outputs[k]->type, a, sizeof a),
                            type_format(&got[k]->type, b, sizeof b));
            break;
        }
        CompareResult c = tensor_compare(got[k], r->outputs[k], 1e-4,
                                         tensor_scaled_atol(r->outputs[k], 1e-5));
        if (!c.ok)
            st = diag_error(d, FX_ERR_INVALID,
                            "pass %s changed the value of output %d: max abs error %g, max rel "
                            "error %g (at element %lld)",
                            pass, k, c.max_abs, c.max_rel, (long long)c.worst_index);
    }
    for (int k = 0; k < r->num_outputs; k++)
        tensor_free(got[k]);
    free(got);
    return st;
}

/* --- running ---------------------------------------------------------------- */

static bool wants(const char *which, const char *pass)
{
    return which && (strcmp(which, "all") == 0 || strcmp(which, pass) == 0);
}

static FxStatus run_one(Graph *g, const PassDef *p, const PassOptions *o, const Reference *ref,
                        Diag *d)
{
    PassResult r = {0};
    FxStatus st = pass_fn(p, o)(g, &r, d);
    if (st == FX_OK)
        st = graph_propagate_shapes(g, o->bindings, o->num_bindings, d);
    if (st == FX_OK)
        st = graph_lint(g, true, d);
    if (st != FX_OK) {
        /* Name the pass in front of whatever it or the checks said. */
        diag_error(d, st, "in pass %s", p->name);
        return st;
    }
    if (ref && r.changes > 0 && (st = reference_check(g, ref, p->name, d)) != FX_OK)
        return st;
    FILE *out = o->print_to ? o->print_to : stdout;
    if (wants(o->print_after, p->name)) {
        fprintf(out, "# after %s (%d change%s)\n", p->name, r.changes, r.changes == 1 ? "" : "s");
        graph_print(g, out);
    }
    if (wants(o->dot_after, p->name)) {
        fprintf(out, "// after %s\n", p->name);
        graph_print_dot(g, out);
    }
    return FX_OK;
}

static FxStatus run_passes(Graph *g, const PassDef *const *passes, int count,
                           const PassOptions *o, Diag *d)
{
    static const PassOptions none = {0};
    if (!o)
        o = &none;
    Reference ref = {0};
    FxStatus st = o->check ? reference_make(g, &ref, d) : FX_OK;
    for (int k = 0; k < count && st == FX_OK; k++)
        st = run_one(g, passes[k], o, o->check ? &ref : NULL, d);
    reference_free(&ref);
    return st;
}

FxStatus opt_run_level(Graph *g, int level, const PassOptions *o, Diag *d)
{
    if (level < 0 || level > 2)
        return diag_error(d, FX_ERR_INVALID, "optimization level %d is not 0, 1 or 2", level);
    const PassDef *chosen[NUM_PASSES];
    int count = 0;
    for (int k = 0; k < NUM_PASSES; k++)
        if (pass_defs[k].level <= level && !(o && o->portable && pass_defs[k].host_only))
            chosen[count++] = &pass_defs[k];
    return run_passes(g, chosen, count, o, d);
}

FxStatus opt_run_list(Graph *g, const char *list, const PassOptions *o, Diag *d)
{
    enum { MAX_LISTED = 64 };
    const PassDef *chosen[MAX_LISTED];
    int count = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        char name[64];
        if (len == 0 || len >= sizeof name)
            return diag_error(d, FX_ERR_INVALID, "--passes: bad pass name in '%s'", list);
        memcpy(name, p, len);
        name[len] = '\0';
        const PassDef *def = pass_lookup(name);
        if (!def)
            return diag_error(d, FX_ERR_INVALID,
                              "--passes: no pass named '%s' ('fxcc passes' lists them)", name);
        if (count == MAX_LISTED)
            return diag_error(d, FX_ERR_INVALID, "--passes: more than %d passes", MAX_LISTED);
        chosen[count++] = def;
        p += len;
        if (*p == ',')
            p++;
    }
    return run_passes(g, chosen, count, o, d);
}
