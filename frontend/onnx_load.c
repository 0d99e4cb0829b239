/*
 * onnx_load.c - ONNX ModelProto -> Graph.
 *
 * The loader runs in fixed steps, and each step refuses before the next
 * builds anything:
 *   1. decode the protobuf (onnx_wire.c guards depth and memory);
 *   2. check the IR version (3 .. FX_MAX_IR_VERSION) and the default-domain
 *      opset (FX_MIN_OPSET .. FX_MAX_OPSET);
 *   3. scan every node for ops fxcc cannot run and report all of them at once
 *      (node name, op type, domain), with a reason for the usual suspects:
 *      control flow (If/Loop/Scan), ops whose output shape depends on data
 *      (NonZero, Unique...), other domains (ai.onnx.ml, custom ops; of
 *      com.microsoft only the QLinear ops of ir/ops/quant.c load).  With
 *      the leaf options, unknown ops and the ops named by the caller are
 *      marked to become Leaf nodes instead (ir/ops/leaf.c), their output
 *      types taken from the caller, the value_info or the graph outputs;
 *   4. build the graph: a placeholder per graph input that is not an
 *      initializer (declared type, symbolic dims kept as dim_params), a
 *      get_attr per initializer, then one node per ONNX node in file order.
 *      ONNX requires topological order, so an input that is not defined yet
 *      is an error naming the node, and a value defined twice is too.
 *      Constant nodes become get_attr nodes; every other node becomes the
 *      op-table entry's call_function/call_method with its attributes
 *      converted, defaults filled (op_apply_attr_specs) and old-opset forms
 *      canonicalized.  A node with several outputs is followed by one getitem
 *      node per used output;
 *   5. an output node returning the graph outputs.
 * On any failure the partial graph is freed and *out stays NULL.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

/* --- versions ------------------------------------------------------------- */

/* --- a string map for ONNX value names ------------------------------------ */

/* Open addressing over borrowed keys (the protobuf's strings, alive while
 * loading).  Only looked up, never iterated, so hash order reaches nothing. */
typedef struct StrMap {
    const char **keys;
    void **vals;
    size_t cap, count;
} StrMap;

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static size_t strmap_slot(const StrMap *m, const char *key)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)str_hash(key) & mask;
    while (m->keys[i] && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & mask;
    return i;
}

static void *strmap_get(const StrMap *m, const char *key)
{
    if (!m->cap)
        return NULL;
    size_t i = strmap_slot(m, key);
    return m->keys[i] ? m->vals[i] : NULL;
}

/* Inserts or overwrites; false on out of memory. */
static bool strmap_put(StrMap *m, const char *key, void *val)
{
    if ((m->count + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        const char **keys = fx_alloc_array(cap, sizeof *keys);
        void **vals = fx_alloc_array(cap, sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return false;
        }
        StrMap bigger = {keys, vals, cap, m->count};
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) {
                size_t j = strmap_slot(&bigger, m->keys[i]);
                keys[j] = m->keys[i];
                vals[j] = m->vals[i];
            }
        free(m->keys);
        free(m->vals);
        *m = bigger;
    }
    size_t i = strmap_slot(m, key);
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->count++;
    }
    m->vals[i] = val;
    return true;
}

static void strmap_free(StrMap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* --- loader state and messages -------------------------------------------- */

/* Names in order of first use (a body's captured outer values). */
typedef struct NameList {
    const char **names;
    size_t count, cap;
} NameList;

typedef struct Loader {
    struct Loader *parent; /* the enclosing graph's loader, for a control-flow body */
    Graph *g;
    const Onnx__GraphProto *gp;
    const char *base_dir; /* NULL: external data refused */
    const OnnxLoadOptions *opt;
    Diag *d;
    StrMap values;    /* ONNX value name -> Node* that provides it */
    StrMap inits;     /* initializer name -> Onnx__TensorProto* */
    StrMap frozen_inputs; /* IR-3 input frozen to its initializer -> its ValueInfoProto */
    StrMap producers; /* node output name -> (void *)(node index + 1) */
    bool *as_leaf;    /* by node index: becomes a Leaf node */
    /* A body's refusals, by node index (malloc'd reasons, NULL: supported):
     * they become Unsupported nodes, refused only if their If is not folded. */
    char **refused;
    NameList captures; /* a body: the outer values it reads */
    TensorType *leaf_types; /* parsed opt->leaf_types */
    bool *leaf_type_used;
} Loader;

static const char *str(const char *s) { return s ? s : ""; }

static bool is_default_domain(const char *domain)
{
    return !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
}

static char *dup_malloc(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = fx_malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/* An error about an ONNX node that has no graph node yet: the entry's node
 * field gets "name (OpType)" so it prints like diag_node_error's. */
static FxStatus proto_node_error(Diag *d, FxStatus st, const Onnx__NodeProto *np, size_t idx,
                                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static FxStatus proto_node_error(Diag *d, FxStatus st, const Onnx__NodeProto *np, size_t idx,
                                 const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t before = d ? d->count : 0;
    diag_error(d, st, "%s", msg);
    if (d && d->count > before && !d->entries[d->count - 1].node) {
        char label[400];
        const char *name = str(np->name);
        if (*name)
            snprintf(label, sizeof label, "%.200s (%.100s)", name, str(np->op_type));
        else if (*str(np->op_type))
            snprintf(label, sizeof label, "#%zu (%.100s)", idx, str(np->op_type));
        else
            snprintf(label, sizeof label, "#%zu", idx);
        d->entries[d->count - 1].node = dup_malloc(label);
    }
    return st;
}

static FxStatus nomem(Loader *L) { return diag_error(L->d, FX_ERR_NOMEM, "out of memory"); }

static const char **arena_names(Graph *g, const char *const *names, size_t k)
{
    const char **v = arena_alloc(&g->arena, (k ? k : 1) * sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < k; i++)
        if (!(v[i] = arena_strdup(&g->arena, str(names[i]))))
            return NULL;
    return v;
}

/* --- step 3: ops fxcc cannot run ------------------------------------------ */

static bool name_in(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

/* The com.microsoft ops fxcc implements (ir/ops/quant.c): the QOperator
 * ops ONNX Runtime's static quantizer writes.  Only in that domain: a
 * default-domain node of one of these types is an unknown op. */
static const char *const microsoft_quant_ops[] = {
    "QGemm", "QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool", "QLinearAveragePool",
    "QLinearConcat", "QLinearSoftmax", "QLinearSigmoid", "QLinearLeakyRelu", NULL};

static bool is_microsoft_quant_op(const Onnx__NodeProto *np)
{
    return strcmp(str(np->domain), "com.microsoft") == 0 &&
           name_in(str(np->op_type), microsoft_quant_ops);
}

static bool domain_equal(const char *a, size_t a_len, const char *b)
{
    if (a_len == 0 || (a_len == 7 && strncmp(a, "ai.onnx", 7) == 0))
        return is_default_domain(b);
    return strlen(b) == a_len && strncmp(a, b, a_len) == 0;
}

/* Whether the caller names this node's op as a leaf: "OP" in any domain, or
 * "DOMAIN.OP" (the domain is what comes before the last dot). */
static bool leaf_named(const Loader *L, const Onnx__NodeProto *np)
{
    const char *type = str(np->op_type), *domain = str(np->domain);
    for (int k = 0; L->opt && k < L->opt->num_leaf_ops; k++) {
        const char *want = L->opt->leaf_ops[k], *dot = strrchr(want, '.');
        if (!dot ? strcmp(want, type) == 0
                 : strcmp(dot + 1, type) == 0 && domain_equal(want, (size_t)(dot - want), domain))
            return true;
    }
    return false;
}

/* Why node np cannot be loaded as an op (into why; false: it can), or
 * *as_leaf when the caller's leaf options make it a Leaf node. */
static bool refusal_reason(const Loader *L, const Onnx__NodeProto *np, bool *as_leaf, char *why,
                           size_t cap)
{
    static const char *const data_dependent[] = {"NonZero", "Unique", "NonMaxSuppression",
                                                 "Compress", "StringSplit", NULL};
    static const char *const sequences[] = {
        "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
        "SequenceLength", "SequenceMap", "SplitToSequence", "ConcatFromSequence", "Optional",
        "OptionalGetElement", "OptionalHasElement", NULL};
    const char *type = str(np->op_type), *domain = str(np->domain);
    bool unknown_as_leaves = L->opt && L->opt->unknown_ops_as_leaves;
    bool microsoft_quant = is_microsoft_quant_op(np);
    *as_leaf = false;
    if (leaf_named(L, np) ||
        (unknown_as_leaves && !is_default_domain(domain) && !microsoft_quant)) {
        *as_leaf = true;
    } else if (microsoft_quant) {
        /* an op of quant.c */
    } else if (!is_default_domain(domain)) {
        snprintf(why, cap,
                 "op '%.100s' of domain '%.100s' is not supported (fxcc implements the default "
                 "ONNX domain and the com.microsoft quantized ops; --leaf %.100s.%.100s makes it "
                 "a call to your C function)",
                 type, domain, domain, type);
        return true;
    } else if (strcmp(type, "Constant") == 0) {
        for (size_t a = 0; a < np->n_attribute; a++) {
            const char *an = str(np->attribute[a]->name);
            if (strcmp(an, "sparse_value") == 0 || strcmp(an, "value_string") == 0 ||
                strcmp(an, "value_strings") == 0) {
                snprintf(why, cap,
                         "Constant with a %s is not supported (sparse and string tensors are "
                         "not)", an);
                return true;
            }
        }
    } else if (!op_lookup(type) || name_in(type, microsoft_quant_ops)) {
        if (name_in(type, data_dependent))
            snprintf(why, cap,
                     "%s is not supported: its output shape depends on the input data, and fxcc "
                     "needs static shapes (--leaf %s makes it a call to your C function)",
                     type, type);
        else if (name_in(type, sequences))
            snprintf(why, cap,
                     "%s is not supported: sequence and optional values are not supported", type);
        else if (unknown_as_leaves)
            return (*as_leaf = true), false;
        else
            snprintf(why, cap,
                     "op type '%.100s' is not supported (--leaf %.100s makes it a call to your "
                     "C function)", type, type);
        return !*as_leaf;
    }
    return false;
}

/* "name (Op)", or "#idx (Op)" for a node without a name. */
static void proto_node_label(const Onnx__NodeProto *np, size_t idx, char *buf, size_t cap)
{
    if (*str(np->name))
        snprintf(buf, cap, "%.200s (%.100s)", np->name, str(np->op_type));
    else
        snprintf(buf, cap, "#%zu (%.100s)", idx, str(np->op_type));
}

/* Lists the refusals inside the bodies of gp's nodes, each by its path
 * ("If_0/then_branch/LSTM_3 (LSTM)"): with a refusal at the top level the
 * model fails at once, and the user sees everything still to fix. */
static int list_body_refusals(const Loader *L, const Onnx__GraphProto *gp, const char *prefix,
                              int depth)
{
    int bad = 0;
    for (size_t i = 0; i < gp->n_node && depth < 16; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        for (size_t a = 0; a < np->n_attribute; a++) {
            const Onnx__AttributeProto *ap = np->attribute[a];
            if (!ap->g)
                continue;
            char path[600];
            snprintf(path, sizeof path, "%s%s/%s/", prefix,
                     *str(np->name) ? np->name : str(np->op_type), str(ap->name));
            for (size_t j = 0; j < ap->g->n_node; j++) {
                const Onnx__NodeProto *bp = ap->g->node[j];
                char why[600], label[400], full[1100];
                bool leaf;
                if (!refusal_reason(L, bp, &leaf, why, sizeof why))
                    continue;
                proto_node_label(bp, j, label, sizeof label);
                snprintf(full, sizeof full, "%s%s", path, label);
                size_t before = L->d ? L->d->count : 0;
                diag_error(L->d, FX_ERR_UNSUPPORTED, "%s", why);
                if (L->d && L->d->count > before)
                    L->d->entries[L->d->count - 1].node = dup_malloc(full);
                bad++;
            }
            bad += list_body_refusals(L, ap->g, path, depth + 1);
        }
    }
    return bad;
}

/* The top level refuses every node it cannot load, at once, with the
 * refusals inside bodies; a body only records them (L->refused). */
static FxStatus check_supported(Loader *L)
{
    const Onnx__GraphProto *gp = L->gp;
    if (!(L->as_leaf = fx_alloc_array(gp->n_node + 1, sizeof *L->as_leaf)) ||
        !(L->refused = fx_alloc_array(gp->n_node + 1, sizeof *L->refused)))
        return nomem(L);
    int bad = 0;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        char why[600];
        if (!*str(np->op_type))
            return proto_node_error(L->d, FX_ERR_FORMAT, np, i, "node has no op_type");
        bool refused = refusal_reason(L, np, &L->as_leaf[i], why, sizeof why);
        /* a leaf in a body that could not be loaded waits, like a refusal,
         * for its If to be folded away */
        size_t named = np->n_output;
        while (named > 0 && !*np->output[named - 1])
            named--;
        for (size_t j = 0; L->parent && L->as_leaf[i] && j < named; j++)
            if (!*np->output[j] && !refused) {
                snprintf(why, sizeof why,
                         "op '%.100s' is not implemented by fxcc, and as a leaf op its output "
                         "%zu would need a name (a leaf's outputs are all computed and typed)",
                         str(np->op_type), j);
                refused = true;
                L->as_leaf[i] = false;
            }
        if (!refused)
            continue;
        if (L->parent) {
            if (!(L->refused[i] = dup_malloc(why)))
                return nomem(L);
            continue;
        }
        proto_node_error(L->d, FX_ERR_UNSUPPORTED, np, i, "%s", why);
        bad++;
    }
    if (gp->n_sparse_initializer) {
        diag_error(L->d, FX_ERR_UNSUPPORTED, "the graph has %zu sparse initializers; sparse "
                   "tensors are not supported", gp->n_sparse_initializer);
        bad++;
    }
    if (bad && !L->parent)
        list_body_refusals(L, gp, "", 0);
    return bad ? FX_ERR_UNSUPPORTED : FX_OK;
}

/* --- step 4a: graph inputs ------------------------------------------------ */

/* The declared type of a graph input.  *has_shape is false when the proto
 * gives no shape (unknown rank); dim_params[i] is set for dims without a
 * value (their dims[i] is -1). */
static FxStatus input_type(Loader *L, const Onnx__ValueInfoProto *vi, TensorType *t,
                           const char *dim_params[FX_MAX_RANK], bool *has_shape,
                           bool *has_type)
{
    const char *name = str(vi->name);
    memset(t, 0, sizeof *t);
    *has_shape = *has_type = false;
    for (int i = 0; i < FX_MAX_RANK; i++)
        dim_params[i] = NULL;
    if (!vi->type || vi->type->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
        return FX_OK;
    if (vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return diag_error(L->d, FX_ERR_UNSUPPORTED,
                          "graph input '%.200s' is not a tensor (sequences, maps, optionals and "
                          "sparse tensors are not supported)", name);
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    if (!tt->has_elem_type || tt->elem_type == 0)
        return diag_error(L->d, FX_ERR_FORMAT, "graph input '%.200s' has no element type", name);
    if (tt->elem_type < 0 || tt->elem_type > 13 || !dtype_is_supported((DType)tt->elem_type))
        return diag_error(L->d, FX_ERR_UNSUPPORTED,
                          "graph input '%.200s' has element type %s, which is not supported",
                          name, onnx_dtype_name(tt->elem_type));
    t->dtype = (DType)tt->elem_type;
    *has_type = true;
    if (!tt->shape)
        return FX_OK;
    if (tt->shape->n_dim > FX_MAX_RANK)
        return diag_error(L->d, FX_ERR_UNSUPPORTED,
                          "graph input '%.200s' has rank %zu, beyond the supported %d", name,
                          tt->shape->n_dim, FX_MAX_RANK);
    t->rank = (int)tt->shape->n_dim;
    for (int i = 0; i < t->rank; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
        /* -1 (Paddle's "any", which ORT accepts) and a missing value are
         * symbolic dims named after the input, for --shape to bind */
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            dim->dim_value >= 0) {
            t->dims[i] = dim->dim_value;
        } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                   dim->dim_value != -1) {
            return diag_error(L->d, FX_ERR_FORMAT,
                              "graph input '%.200s': dimension %d is negative (%lld)", name, i,
                              (long long)dim->dim_value);
        } else {
            const char *param =
                dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                    ? str(dim->dim_param) : "";
            char own[300];
            snprintf(own, sizeof own, "%.200s_dim%d", name, i);
            t->dims[i] = -1;
            dim_params[i] = arena_strdup(&L->g->arena, *param ? param : own);
            if (!dim_params[i])
                return nomem(L);
        }
    }
    *has_shape = true;
    return FX_OK;
}

/* An IR-3 input's declaration must agree with its initializer. */
static FxStatus check_default(Loader *L, const char *name, const TensorType *decl,
                              bool has_shape, const Tensor *v)
{
    char a[160], b[160];
    bool ok = decl->dtype == v->type.dtype && (!has_shape || decl->rank == v->type.rank);
    for (int i = 0; ok && has_shape && i < decl->rank; i++)
        ok = decl->dims[i] < 0 || decl->dims[i] == v->type.dims[i];
    if (!ok)
        return diag_error(L->d, FX_ERR_FORMAT,
                          "graph input '%.200s' is declared %s but its initializer is %s", name,
                          type_format(decl, a, sizeof a), type_format(&v->type, b, sizeof b));
    return FX_OK;
}

static FxStatus add_placeholder(Loader *L, const Onnx__ValueInfoProto *vi)
{
    const char *name = str(vi->name);
    TensorType t;
    const char *dim_params[FX_MAX_RANK];
    bool has_shape, has_type;
    FxStatus st = input_type(L, vi, &t, dim_params, &has_shape, &has_type);
    if (st != FX_OK)
        return st;
    const Onnx__TensorProto *init = strmap_get(&L->inits, name);
    Tensor *dflt = NULL;
    if (init) {
        char what[300];
        snprintf(what, sizeof what, "initializer '%.200s'", name);
        if ((st = onnx_tensor_decode(init, what, L->base_dir, &dflt, L->d)) != FX_OK)
            return st;
        if (!has_type) {
            t = dflt->type;
        } else if ((st = check_default(L, name, &t, has_shape, dflt)) != FX_OK) {
            tensor_free(dflt);
            return st;
        } else if (!has_shape) {
            t = dflt->type;
        }
    } else if (!has_type) {
        return diag_error(L->d, FX_ERR_FORMAT, "graph input '%.200s' has no type", name);
    } else if (!has_shape) {
        return diag_error(L->d, FX_ERR_UNSUPPORTED,
                          "graph input '%.200s' has unknown rank; fxcc needs at least the rank "
                          "(dims may be symbolic)", name);
    }
    Node *n = graph_create_node(L->g, NULL, FX_OPCODE_PLACEHOLDER, name, name, NULL, 0);
    if (!n || !node_set_num_outputs(n, 1)) {
        tensor_free(dflt);
        return nomem(L);
    }
    n->value = dflt;
    n->out_types[0] = t;
    if (has_shape)
        memcpy(n->dim_params, dim_params, sizeof dim_params);
    if (!(n->onnx_outputs = arena_names(L->g, &name, 1)) || !strmap_put(&L->values, name, n))
        return nomem(L);
    return FX_OK;
}

/* A get_attr node owning t (freed if the node cannot be made), in file
 * order and named by its ONNX value; NULL with L->d filled on failure. */
static Node *add_constant(Loader *L, const char *onnx_name, Tensor *t)
{
    Node *n = graph_create_constant(L->g, &L->g->root, onnx_name, t, L->d);
    if (!n)
        return NULL;
    if (!(n->target = arena_strdup(&L->g->arena, onnx_name)) ||
        !(n->onnx_outputs = arena_names(L->g, &onnx_name, 1)) ||
        !strmap_put(&L->values, onnx_name, n)) {
        nomem(L);
        return NULL;
    }
    return n;
}

/* A frozen IR-3 input's declaration must agree with its initializer too:
 * frozen or not, the model means the same. */
static FxStatus check_frozen_input(Loader *L, const char *name, const Tensor *v)
{
    const Onnx__ValueInfoProto *vi = strmap_get(&L->frozen_inputs, name);
    if (!vi)
        return FX_OK;
    TensorType decl;
    const char *dim_params[FX_MAX_RANK];
    bool has_shape, has_type;
    FxStatus st = input_type(L, vi, &decl, dim_params, &has_shape, &has_type);
    if (st == FX_OK && has_type)
        st = check_default(L, name, &decl, has_shape, v);
    return st;
}

static FxStatus build_inputs(Loader *L)
{
    const Onnx__GraphProto *gp = L->gp;
    bool freeze = !(L->opt && L->opt->keep_input_defaults);
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const char *name = str(gp->initializer[i]->name);
        if (!*name)
            return diag_error(L->d, FX_ERR_FORMAT, "initializer %zu has no name", i);
        if (strmap_get(&L->inits, name))
            return diag_error(L->d, FX_ERR_FORMAT, "initializer '%.200s' is defined twice", name);
        if (!strmap_put(&L->inits, name, gp->initializer[i]))
            return nomem(L);
    }
    /* placeholders first (lint wants them at the top), then the constants */
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name = str(gp->input[i]->name);
        if (!*name)
            return diag_error(L->d, FX_ERR_FORMAT, "graph input %zu has no name", i);
        if (strmap_get(&L->values, name))
            return diag_error(L->d, FX_ERR_FORMAT, "graph input '%.200s' is listed twice", name);
        if (freeze && strmap_get(&L->inits, name)) {
            if (!strmap_put(&L->frozen_inputs, name, gp->input[i]))
                return nomem(L);
            continue;
        }
        FxStatus st = add_placeholder(L, gp->input[i]);
        if (st != FX_OK)
            return st;
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const char *name = str(gp->initializer[i]->name);
        if (strmap_get(&L->values, name))
            continue; /* an IR-3 input kept as a placeholder with this default */
        char what[300];
        snprintf(what, sizeof what, "initializer '%.200s'", name);
        Tensor *t;
        FxStatus st = onnx_tensor_decode(gp->initializer[i], what, L->base_dir, &t, L->d);
        if (st != FX_OK)
            return st;
        if ((st = check_frozen_input(L, name, t)) != FX_OK) {
            tensor_free(t);
            return st;
        }
        if (!add_constant(L, name, t))
            return FX_ERR_NOMEM;
    }
    return FX_OK;
}

/* --- step 4b: nodes ------------------------------------------------------- */

static FxStatus constant_node(Loader *L, const Onnx__NodeProto *np, size_t idx)
{
    size_t nout = np->n_output;
    while (nout > 0 && !*np->output[nout - 1])
        nout--;
    if (np->n_input != 0 || nout != 1 || np->n_attribute != 1)
        return proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                                "Constant needs no inputs, one output and exactly one value "
                                "attribute (has %zu, %zu, %zu)",
                                np->n_input, np->n_output, np->n_attribute);
    const char *out_name = np->output[0];
    const Onnx__AttributeProto *ap = np->attribute[0];
    const char *an = str(ap->name);
    Onnx__AttributeProto__AttributeType want;
    TensorType type = {0};
    size_t count = 1;
    if (strcmp(an, "value") == 0) {
        want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    } else if (strcmp(an, "value_float") == 0) {
        want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        type.dtype = FXRT_DTYPE_FLOAT32;
    } else if (strcmp(an, "value_floats") == 0) {
        want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        type.dtype = FXRT_DTYPE_FLOAT32;
        type.rank = 1;
        type.dims[0] = (int64_t)(count = ap->n_floats);
    } else if (strcmp(an, "value_int") == 0) {
        want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        type.dtype = FXRT_DTYPE_INT64;
    } else if (strcmp(an, "value_ints") == 0) {
        want = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        type.dtype = FXRT_DTYPE_INT64;
        type.rank = 1;
        type.dims[0] = (int64_t)(count = ap->n_ints);
    } else {
        return proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                                "unknown Constant attribute '%.100s'", an);
    }
    if (!ap->has_type || ap->type != want)
        return proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                                "Constant attribute '%s' has the wrong type", an);
    Tensor *t = NULL;
    FxStatus st = FX_OK;
    if (want == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR) {
        if (!ap->t)
            return proto_node_error(L->d, FX_ERR_FORMAT, np, idx, "Constant has no tensor");
        char what[300];
        snprintf(what, sizeof what, "Constant '%.200s'", out_name);
        st = onnx_tensor_decode(ap->t, what, L->base_dir, &t, L->d);
    } else if (!(t = tensor_new(&type, L->d))) {
        st = FX_ERR_NOMEM;
    } else if (want == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
        *(float *)t->data = ap->f;
    } else if (want == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
        *(int64_t *)t->data = ap->i;
    } else if (count) {
        memcpy(t->data, want == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS
                            ? (const void *)ap->floats : (const void *)ap->ints,
               count * (want == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS ? sizeof(float)
                                                                              : sizeof(int64_t)));
    }
    if (st != FX_OK)
        return st;
    Node *n = add_constant(L, out_name, t);
    if (!n)
        return FX_ERR_NOMEM;
    if (!(n->onnx_name = arena_strdup(&L->g->arena, str(np->name))))
        return nomem(L);
    return FX_OK;
}

static const char *attr_type_name(Onnx__AttributeProto__AttributeType t)
{
    switch (t) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: return "graph";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: return "graphs";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: return "sparse tensor";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS: return "sparse tensors";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: return "tensors";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: return "type proto";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS: return "type protos";
    default: return "unknown";
    }
}

/* A protobuf bytes value as a C string (malloc'd); embedded NULs refused. */
static char *bytes_to_string(const ProtobufCBinaryData *b, bool *has_nul)
{
    *has_nul = b->len && memchr(b->data, 0, b->len) != NULL;
    if (*has_nul)
        return NULL;
    char *s = fx_malloc(b->len + 1);
    if (s) {
        if (b->len)
            memcpy(s, b->data, b->len);
        s[b->len] = '\0';
    }
    return s;
}

static FxStatus convert_attr(Loader *L, Node *n, const Onnx__AttributeProto *ap)
{
    const char *name = str(ap->name);
    if (!*name)
        return diag_node_error(L->d, FX_ERR_FORMAT, n, "an attribute has no name");
    if (node_attr(n, name))
        return diag_node_error(L->d, FX_ERR_FORMAT, n, "attribute '%.100s' is given twice", name);
    if (ap->ref_attr_name && *ap->ref_attr_name)
        return diag_node_error(L->d, FX_ERR_UNSUPPORTED, n,
                               "attribute '%.100s' refers to a function attribute; model-local "
                               "functions are not supported", name);
    if (!ap->has_type || ap->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
        return diag_node_error(L->d, FX_ERR_FORMAT, n, "attribute '%.100s' has no type", name);
    Attr *a = NULL;
    bool has_nul = false;
    switch (ap->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        a = node_set_attr_float(n, name, ap->f);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        a = node_set_attr_int(n, name, ap->i);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
        char *s = bytes_to_string(&ap->s, &has_nul);
        if (s)
            a = node_set_attr_string(n, name, s);
        free(s);
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        a = node_set_attr_floats(n, name, ap->floats, (int64_t)ap->n_floats);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        a = node_set_attr_ints(n, name, ap->ints, (int64_t)ap->n_ints);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
        char **v = fx_alloc_array(ap->n_strings ? ap->n_strings : 1, sizeof *v);
        bool ok = v != NULL;
        for (size_t i = 0; ok && i < ap->n_strings; i++)
            ok = (v[i] = bytes_to_string(&ap->strings[i], &has_nul)) != NULL;
        if (ok)
            a = node_set_attr_strings(n, name, (const char *const *)v, (int64_t)ap->n_strings);
        for (size_t i = 0; v && i < ap->n_strings; i++)
            free(v[i]);
        free(v);
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!ap->t)
            return diag_node_error(L->d, FX_ERR_FORMAT, n, "tensor attribute '%.100s' is empty",
                                   name);
        char what[300];
        snprintf(what, sizeof what, "node %.100s: attribute '%.100s'", n->name, name);
        Tensor *t;
        FxStatus st = onnx_tensor_decode(ap->t, what, L->base_dir, &t, L->d);
        if (st != FX_OK)
            return st;
        a = node_set_attr_tensor(n, name, t); /* frees t on failure */
        break;
    }
    default:
        return diag_node_error(L->d, FX_ERR_UNSUPPORTED, n,
                               "attribute '%.100s' has type %s, which is not supported", name,
                               attr_type_name(ap->type));
    }
    if (has_nul)
        return diag_node_error(L->d, FX_ERR_FORMAT, n,
                               "string attribute '%.100s' contains a NUL byte", name);
    if (!a)
        return nomem(L);
    return FX_OK;
}

/* Why a node input is not available: defined later (the file is not in
 * topological order, or the graph has a cycle) or never. */
static FxStatus undefined_input(Loader *L, const Onnx__NodeProto *np, size_t idx,
                                const char *input)
{
    size_t producer = (size_t)(uintptr_t)strmap_get(&L->producers, input);
    if (producer)
        return proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                                "input '%.200s' is produced by node #%zu, which comes later: the "
                                "nodes are not in topological order (or form a cycle), as ONNX "
                                "requires", input, producer - 1);
    return proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                            "input '%.200s' is not defined by any node, initializer or graph "
                            "input", input);
}

/* --- values of enclosing graphs ------------------------------------------- */

static bool name_list_add(NameList *l, const char *name)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->names[i], name) == 0)
            return true;
    if (l->count == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        const char **v = fx_realloc_array(l->names, cap, sizeof *v);
        if (!v)
            return false;
        l->names = v;
        l->cap = cap;
    }
    l->names[l->count++] = name;
    return true;
}

/* The first node of g that is not a placeholder (the sentinel if none). */
static Node *after_placeholders(Graph *g)
{
    Node *n = g->root.next;
    while (n != &g->root && n->opcode == FX_OPCODE_PLACEHOLDER)
        n = n->next;
    return n;
}

/* A placeholder named after outer value `name`, after g's other ones. */
static Node *capture_placeholder(Graph *g, const char *name)
{
    Node *ph = graph_create_node(g, after_placeholders(g), FX_OPCODE_PLACEHOLDER, name, name,
                                 NULL, 0);
    if (!ph || !node_set_num_outputs(ph, 1) || !(ph->onnx_outputs = arena_names(g, &name, 1)))
        return NULL;
    return ph;
}

/* The node giving value `name` (*out NULL when nothing does).  In a body, a
 * value of an enclosing graph is read through a placeholder of its own,
 * made on first use and recorded in L->captures: the control-flow node
 * passes it in as an argument (FX.md: a body reads nothing from outside). */
static FxStatus lookup_value(Loader *L, const char *name, Node **out)
{
    if ((*out = strmap_get(&L->values, name)) || !L->parent)
        return FX_OK;
    Node *outer;
    FxStatus st = lookup_value(L->parent, name, &outer);
    if (st != FX_OK || !outer)
        return st;
    if (!(*out = capture_placeholder(L->g, name)) || !strmap_put(&L->values, name, *out) ||
        !name_list_add(&L->captures, name))
        return nomem(L);
    return FX_OK;
}

/* --- leaf ops ------------------------------------------------------------- */

/* A value_info's type when it is a tensor of a supported element type with
 * a fully static shape; symbolic or missing dims give nothing. */
static bool static_type(const Onnx__ValueInfoProto *vi, TensorType *t)
{
    memset(t, 0, sizeof *t);
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return false;
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
    if (!tt || !tt->has_elem_type || tt->elem_type <= 0 || tt->elem_type > 13 ||
        !dtype_is_supported((DType)tt->elem_type) || !tt->shape ||
        tt->shape->n_dim > FX_MAX_RANK)
        return false;
    t->dtype = (DType)tt->elem_type;
    t->rank = (int)tt->shape->n_dim;
    for (int i = 0; i < t->rank; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
        if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
            dim->dim_value < 0)
            return false;
        t->dims[i] = dim->dim_value;
    }
    return type_check_size(t, NULL, NULL, "") == FX_OK;
}

/* The type of leaf output `value` as text ("" when no source gives it):
 * the caller's, else the value_info's, else the graph output's. */
static void leaf_output_type(Loader *L, const char *value, char *buf, size_t cap)
{
    TensorType t;
    buf[0] = '\0';
    for (int k = 0; L->opt && k < L->opt->num_leaf_types; k++) {
        const char *arg = L->opt->leaf_types[k], *eq = strrchr(arg, '=');
        if ((size_t)(eq - arg) == strlen(value) && strncmp(arg, value, strlen(value)) == 0) {
            L->leaf_type_used[k] = true;
            type_format(&L->leaf_types[k], buf, cap);
            return;
        }
    }
    const Onnx__GraphProto *gp = L->gp;
    for (size_t i = 0; i < gp->n_value_info; i++)
        if (strcmp(str(gp->value_info[i]->name), value) == 0 && static_type(gp->value_info[i], &t)) {
            type_format(&t, buf, cap);
            return;
        }
    for (size_t i = 0; i < gp->n_output; i++)
        if (strcmp(str(gp->output[i]->name), value) == 0 && static_type(gp->output[i], &t)) {
            type_format(&t, buf, cap);
            return;
        }
}

/* leaf_op, leaf_domain, leaf_outputs and leaf_types, ahead of the node's own
 * attributes. */
static FxStatus set_leaf_attrs(Loader *L, Node *n, const Onnx__NodeProto *np, size_t idx,
                               size_t nout)
{
    char bufs[FX_LEAF_MAX_VALUES][256];
    const char *types[FX_LEAF_MAX_VALUES];
    for (size_t j = 0; j < nout; j++) {
        if (!*np->output[j])
            return proto_node_error(L->d, FX_ERR_UNSUPPORTED, np, idx,
                                    "output %zu of leaf op '%.100s' has no name; a leaf's "
                                    "outputs are all computed and typed", j, np->op_type);
        leaf_output_type(L, np->output[j], bufs[j], sizeof bufs[j]);
        types[j] = bufs[j];
    }
    if (!node_set_attr_string(n, "leaf_op", str(np->op_type)) ||
        !node_set_attr_string(n, "leaf_domain", str(np->domain)) ||
        !node_set_attr_int(n, "leaf_outputs", (int64_t)nout) ||
        !node_set_attr_strings(n, "leaf_types", types, (int64_t)nout))
        return nomem(L);
    return FX_OK;
}

/* Parses the caller's leaf types before any node is built. */
static FxStatus parse_leaf_types(Loader *L)
{
    int count = L->opt ? L->opt->num_leaf_types : 0;
    L->leaf_types = fx_alloc_array((size_t)count + 1, sizeof *L->leaf_types);
    L->leaf_type_used = fx_alloc_array((size_t)count + 1, sizeof *L->leaf_type_used);
    if (!L->leaf_types || !L->leaf_type_used)
        return nomem(L);
    for (int k = 0; k < count; k++) {
        const char *arg = L->opt->leaf_types[k], *eq = strrchr(arg, '=');
        if (!eq || eq == arg)
            return diag_error(L->d, FX_ERR_INVALID,
                              "--leaf-type '%s': expected VALUE=TYPE, e.g. y=float32[1, 8]", arg);
        if (leaf_type_parse(eq + 1, &L->leaf_types[k], L->d) != FX_OK)
            return FX_ERR_INVALID;
    }
    return FX_OK;
}

static FxStatus check_leaf_types_used(Loader *L)
{
    FxStatus st = FX_OK;
    for (int k = 0; L->opt && k < L->opt->num_leaf_types; k++)
        if (!L->leaf_type_used[k]) {
            const char *arg = L->opt->leaf_types[k];
            st = diag_error(L->d, FX_ERR_INVALID,
                            "--leaf-type names '%.*s', which is not an output of a leaf op",
                            (int)(strrchr(arg, '=') - arg), arg);
        }
    return st;
}

/* --- step 4b (continued): computing nodes ---------------------------------- */

static FxStatus build_bodies(Loader *L, Node *n, const Onnx__NodeProto *np, size_t idx);

static bool is_graph_attr(const Onnx__AttributeProto *ap)
{
    return ap->has_type && ap->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
}

static FxStatus op_node(Loader *L, const Onnx__NodeProto *np, size_t idx)
{
    bool leaf = L->as_leaf[idx];
    const char *refused = L->refused[idx];
    const OpDef *op = leaf ? &fx_op_Leaf : refused ? &fx_op_Unsupported : op_lookup(np->op_type);
    if (!op) /* check_supported ran first */
        return proto_node_error(L->d, FX_ERR_UNSUPPORTED, np, idx, "unsupported op");
    bool variadic = op->max_inputs < 0;

    /* inputs: trailing empty names are omitted optional inputs */
    size_t nin = np->n_input;
    while (nin > 0 && !*np->input[nin - 1])
        nin--;
    if (variadic && nin < (size_t)op->min_inputs)
        return proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                                "has %zu inputs; %s takes at least %d", nin, op->name,
                                op->min_inputs);
    if (nin < (size_t)op->min_inputs || (!variadic && nin > (size_t)op->max_inputs))
        return proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                                "has %zu inputs; %s takes %d to %d", nin, op->name,
                                op->min_inputs, op->max_inputs);
    if (nin > (1u << 20))
        return proto_node_error(L->d, FX_ERR_UNSUPPORTED, np, idx, "too many inputs (%zu)", nin);
    Node **args = fx_alloc_array(nin ? nin : 1, sizeof *args);
    if (!args)
        return nomem(L);
    FxStatus st = FX_OK;
    for (size_t j = 0; j < nin && st == FX_OK; j++) {
        const char *in = np->input[j];
        if (!*in) {
            if (j < (size_t)op->min_inputs || variadic)
                st = proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                                      "input %zu is required but its name is empty", j);
            continue;
        }
        if ((st = lookup_value(L, in, &args[j])) == FX_OK && !args[j])
            st = undefined_input(L, np, idx, in);
    }
    if (st != FX_OK) {
        free(args);
        return st;
    }

    /* outputs: trailing empty names are unused optional outputs, dropped
     * down to the op's minimum */
    size_t nout = np->n_output;
    while (nout > 0 && !*np->output[nout - 1])
        nout--;
    if (nout == 0 || np->n_output < (size_t)op->min_outputs ||
        (op->max_outputs >= 0 && nout > (size_t)op->max_outputs)) {
        free(args);
        return proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                                "has %zu outputs; %s gives %d to %d", np->n_output, op->name,
                                op->min_outputs, op->max_outputs);
    }
    if (nout < (size_t)op->min_outputs)
        nout = (size_t)op->min_outputs;
    if (nout > (1u << 20)) {
        free(args);
        return proto_node_error(L->d, FX_ERR_UNSUPPORTED, np, idx, "too many outputs (%zu)",
                                nout);
    }
    for (size_t j = 0; j < nout; j++)
        if (*np->output[j] && strmap_get(&L->values, np->output[j])) {
            free(args);
            return proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                                    "output '%.200s' is already defined (ONNX values are "
                                    "assigned once)", np->output[j]);
        }

    /* Name hint: the ONNX node name; else the output's name, unless there
     * are several outputs: their getitem nodes take the value names, and the
     * node itself is named after its op ("split"). */
    char op_hint[64];
    const char *kind = leaf ? np->op_type : op->name;
    size_t k = 0;
    for (; kind[k] && k + 1 < sizeof op_hint; k++)
        op_hint[k] = (char)(kind[k] >= 'A' && kind[k] <= 'Z' ? kind[k] - 'A' + 'a' : kind[k]);
    op_hint[k] = '\0';
    const char *hint = str(np->name);
    if (!*hint)
        hint = nout == 1 ? np->output[0] : op_hint;
    Node *n = graph_create_op(L->g, NULL, op, hint, args, (int)nin);
    free(args);
    if (!n || !(n->onnx_name = arena_strdup(&L->g->arena, str(np->name))) ||
        !node_set_num_outputs(n, (int)nout) ||
        !(n->onnx_outputs = arena_names(L->g, (const char *const *)np->output, nout)))
        return nomem(L);

    bool has_bodies = op == &fx_op_If || op == &fx_op_Loop || op == &fx_op_Scan;
    if (leaf)
        st = set_leaf_attrs(L, n, np, idx, nout);
    else if (refused && (!node_set_attr_string(n, "onnx_op", str(np->op_type)) ||
                         !node_set_attr_string(n, "reason", refused)))
        st = nomem(L);
    for (size_t a = 0; a < np->n_attribute && st == FX_OK && !refused; a++)
        if (!has_bodies || !is_graph_attr(np->attribute[a]))
            st = convert_attr(L, n, np->attribute[a]);
    if (st == FX_OK && !leaf) /* a leaf's attributes stay as the model wrote them */
        st = op_apply_attr_specs(op, n, L->d);
    if (st == FX_OK && op->canonicalize)
        st = op->canonicalize(n, L->g->opset, L->d);
    if (st == FX_OK && has_bodies)
        st = build_bodies(L, n, np, idx);
    if (st != FX_OK)
        return st;

    if (n->num_outputs == 1) {
        if (!strmap_put(&L->values, np->output[0], n))
            return nomem(L);
        return FX_OK;
    }
    for (int j = 0; j < n->num_outputs && (size_t)j < nout; j++) {
        const char *out = np->output[j];
        if (!*out)
            continue;
        Node *gi = graph_create_op(L->g, NULL, &fx_op_getitem, out, &n, 1);
        if (!gi || !node_set_num_outputs(gi, 1) ||
            !(gi->onnx_outputs = arena_names(L->g, &out, 1)) ||
            !strmap_put(&L->values, out, gi))
            return nomem(L);
        gi->index = j;
    }
    return FX_OK;
}

static FxStatus build_nodes(Loader *L)
{
    const Onnx__GraphProto *gp = L->gp;
    /* every node output, to tell "defined later" from "never defined" */
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        for (size_t j = 0; j < np->n_output; j++) {
            const char *out = np->output[j];
            if (!*out)
                continue;
            if (strmap_get(&L->producers, out))
                return proto_node_error(L->d, FX_ERR_FORMAT, np, i,
                                        "output '%.200s' is also produced by node #%zu (ONNX "
                                        "values are assigned once)", out,
                                        (size_t)(uintptr_t)strmap_get(&L->producers, out) - 1);
            if (!strmap_put(&L->producers, out, (void *)(uintptr_t)(i + 1)))
                return nomem(L);
        }
    }
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        FxStatus st = strcmp(np->op_type, "Constant") == 0 && !L->as_leaf[i]
                          ? constant_node(L, np, i)
                          : op_node(L, np, i);
        if (st != FX_OK)
            return st;
    }
    return FX_OK;
}

/* --- step 5: outputs ------------------------------------------------------ */

static FxStatus build_output(Loader *L)
{
    const Onnx__GraphProto *gp = L->gp;
    if (gp->n_output == 0)
        return diag_error(L->d, FX_ERR_FORMAT, "the graph has no outputs");
    if (gp->n_output > (1u << 20))
        return diag_error(L->d, FX_ERR_UNSUPPORTED, "too many graph outputs (%zu)",
                          gp->n_output);
    Node **args = fx_alloc_array(gp->n_output, sizeof *args);
    const char **names = fx_alloc_array(gp->n_output, sizeof *names);
    FxStatus st = args && names ? FX_OK : nomem(L);
    for (size_t i = 0; i < gp->n_output && st == FX_OK; i++) {
        const char *name = str(gp->output[i]->name);
        names[i] = name;
        if (!*name)
            st = diag_error(L->d, FX_ERR_FORMAT, "graph output %zu has no name", i);
        else if ((st = lookup_value(L, name, &args[i])) == FX_OK && !args[i])
            st = diag_error(L->d, FX_ERR_FORMAT,
                            "graph output '%.200s' is not produced by any node, initializer or "
                            "graph input", name);
    }
    if (st == FX_OK) {
        Node *out = graph_create_node(L->g, NULL, FX_OPCODE_OUTPUT, "output", "output", args,
                                      (int)gp->n_output);
        if (!out || !(out->onnx_outputs = arena_names(L->g, names, gp->n_output)))
            st = nomem(L);
    }
    free(args);
    free(names);
    return st;
}

/* --- control-flow bodies ------------------------------------------------- */

static void loader_free(Loader *L)
{
    strmap_free(&L->values);
    strmap_free(&L->inits);
    strmap_free(&L->frozen_inputs);
    strmap_free(&L->producers);
    for (size_t i = 0; L->refused && L->gp && i < L->gp->n_node; i++)
        free(L->refused[i]);
    free(L->refused);
    free(L->as_leaf);
    free(L->leaf_types);
    free(L->leaf_type_used);
    free(L->captures.names);
}

/* A body's own inputs: untyped placeholders (the node's arguments type
 * them), then its initializers as constants. */
static FxStatus build_body_inputs(Loader *B)
{
    const Onnx__GraphProto *gp = B->gp;
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name = str(gp->input[i]->name);
        if (!*name || strmap_get(&B->values, name))
            return diag_error(B->d, FX_ERR_FORMAT, "body input %zu ('%.200s') is unnamed or "
                              "listed twice", i, name);
        Node *ph = capture_placeholder(B->g, name);
        if (!ph || !strmap_put(&B->values, name, ph))
            return nomem(B);
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const char *name = str(gp->initializer[i]->name);
        char what[300];
        snprintf(what, sizeof what, "initializer '%.200s'", name);
        Tensor *t;
        FxStatus st = onnx_tensor_decode(gp->initializer[i], what, B->base_dir, &t, B->d);
        if (st != FX_OK)
            return st;
        if (!*name || strmap_get(&B->values, name)) {
            tensor_free(t);
            return diag_error(B->d, FX_ERR_FORMAT, "body initializer '%.200s' is unnamed or "
                              "defined twice", name);
        }
        if (!add_constant(B, name, t))
            return FX_ERR_NOMEM;
    }
    return FX_OK;
}

/* Reads body gp of node n, which gives it `formal` inputs, into *out; the
 * outer values it reads are added to caps. */
static FxStatus load_body(Loader *L, const Onnx__NodeProto *np, size_t idx,
                          const Onnx__GraphProto *gp, const char *role, int formal, Graph **out,
                          NameList *caps)
{
    *out = NULL;
    if (gp->n_input != (size_t)formal)
        return proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                                "its %s has %zu inputs; the node gives it %d", role, gp->n_input,
                                formal);
    Loader B = {.parent = L, .gp = gp, .base_dir = L->base_dir, .opt = L->opt, .d = L->d,
                .leaf_types = L->leaf_types, .leaf_type_used = L->leaf_type_used};
    FxStatus st = (B.g = graph_new_like(L->g)) ? FX_OK : nomem(L);
    if (st == FX_OK && (st = check_supported(&B)) == FX_OK &&
        (st = build_body_inputs(&B)) == FX_OK && (st = build_nodes(&B)) == FX_OK)
        st = build_output(&B);
    for (size_t k = 0; k < B.captures.count && st == FX_OK; k++)
        if (!name_list_add(caps, B.captures.names[k]))
            st = nomem(L);
    if (st == FX_OK)
        *out = B.g;
    else
        graph_free(B.g);
    B.leaf_types = NULL; /* the top level's */
    B.leaf_type_used = NULL;
    loader_free(&B);
    return st;
}

/* Puts body's placeholders for caps after its `formal` own ones, in caps'
 * order (a branch that does not read one still takes it). */
static FxStatus order_captures(Loader *L, Graph *body, int formal, const NameList *caps)
{
    Node *end = after_placeholders(body);
    for (size_t k = 0; k < caps->count; k++) {
        Node *ph = NULL;
        int pos = 0;
        for (Node *p = body->root.next; p != end && !ph; p = p->next, pos++)
            if (pos >= formal && strcmp(p->target, caps->names[k]) == 0)
                ph = p;
        if (!ph && !(ph = capture_placeholder(body, caps->names[k])))
            return nomem(L);
        graph_move_before(body, ph, end);
    }
    return FX_OK;
}

/* If's then_branch and else_branch, Loop's and Scan's body: nested graphs
 * (Node.body, Node.else_body) whose outer reads become the node's last
 * arguments ("captures" of them). */
static FxStatus build_bodies(Loader *L, Node *n, const Onnx__NodeProto *np, size_t idx)
{
    bool is_if = n->op == &fx_op_If;
    const char *roles[2] = {is_if ? "then_branch" : "body", is_if ? "else_branch" : NULL};
    const Onnx__GraphProto *gps[2] = {NULL, NULL};
    for (size_t a = 0; a < np->n_attribute; a++) {
        const Onnx__AttributeProto *ap = np->attribute[a];
        if (!is_graph_attr(ap))
            continue;
        int r = strcmp(str(ap->name), roles[0]) == 0 ? 0
                : roles[1] && strcmp(str(ap->name), roles[1]) == 0 ? 1 : -1;
        if (r < 0 || !ap->g)
            return proto_node_error(L->d, FX_ERR_FORMAT, np, idx,
                                    "graph attribute '%.100s' is not one of %s", str(ap->name),
                                    is_if ? "then_branch, else_branch" : "body");
        gps[r] = ap->g;
    }
    if (n->op == &fx_op_Loop)
        while (n->num_args < 2)
            if (node_append_arg(n, NULL) < 0)
                return nomem(L);
    int formal = is_if ? 0 : n->num_args - (int)node_attr_int(n, "batched", 0);
    NameList caps = {0};
    Graph *bodies[2] = {NULL, NULL};
    FxStatus st = FX_OK;
    for (int r = 0; r < 1 + is_if && st == FX_OK; r++)
        st = gps[r] ? load_body(L, np, idx, gps[r], roles[r], formal, &bodies[r], &caps)
                    : proto_node_error(L->d, FX_ERR_FORMAT, np, idx, "has no %s", roles[r]);
    for (int r = 0; r < 1 + is_if && st == FX_OK; r++)
        st = order_captures(L, bodies[r], formal, &caps);
    for (size_t k = 0; k < caps.count && st == FX_OK; k++) {
        Node *v;
        if ((st = lookup_value(L, caps.names[k], &v)) == FX_OK && node_append_arg(n, v) < 0)
            st = nomem(L);
    }
    if (st == FX_OK && !node_set_attr_int(n, "captures", (int64_t)caps.count))
        st = nomem(L);
    free(caps.names);
    if (st != FX_OK) {
        graph_free(bodies[0]);
        graph_free(bodies[1]);
        return st;
    }
    n->body = bodies[0];
    n->else_body = bodies[1];
    return FX_OK;
}

/* --- entry points --------------------------------------------------------- */

static FxStatus check_versions(const Onnx__ModelProto *mp, int *opset, Diag *d)
{
    if (!mp->has_ir_version)
        return diag_error(d, FX_ERR_FORMAT, "the model has no ir_version (not an ONNX model?)");
    if (mp->ir_version < 3)
        return diag_error(d, FX_ERR_UNSUPPORTED,
                          "IR version %lld is too old: fxcc reads IR 3 (ONNX 1.2) and newer",
                          (long long)mp->ir_version);
    /* Newer IR versions only add fields, which protobuf-c skips; what the
     * model means is bounded by its opset, checked below.  Current exporters
     * write IR 9-11, so refusing them would refuse most models. */
    if (mp->ir_version > FX_MAX_IR_VERSION)
        return diag_error(d, FX_ERR_UNSUPPORTED,
                          "IR version %lld is newer than the %d fxcc reads",
                          (long long)mp->ir_version, FX_MAX_IR_VERSION);
    bool found = false;
    int64_t version = 0;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *os = mp->opset_import[i];
        if (!is_default_domain(os->domain))
            continue; /* nodes of other domains are reported as unsupported */
        int64_t v = os->has_version ? os->version : 0;
        if (found && v != version)
            return diag_error(d, FX_ERR_FORMAT,
                              "the model imports the default opset twice (%lld and %lld)",
                              (long long)version, (long long)v);
        found = true;
        version = v;
    }
    if (!found) {
        /* Only acceptable without default-domain nodes; load_model checks
         * that after the unsupported-op scan, so a model of only other-domain
         * ops (ai.onnx.preview.training...) reports those ops. */
        *opset = 0;
        return FX_OK;
    }
    if (version < FX_MIN_OPSET || version > FX_MAX_OPSET)
        return diag_error(d, FX_ERR_UNSUPPORTED,
                          "opset %lld is not supported: fxcc supports opsets %d to %d",
                          (long long)version, FX_MIN_OPSET, FX_MAX_OPSET);
    *opset = (int)version;
    return FX_OK;
}

static FxStatus load_model(Loader *L, const Onnx__ModelProto *mp, const char *name)
{
    int opset = 0;
    FxStatus st = check_versions(mp, &opset, L->d);
    if (st != FX_OK)
        return st;
    if (!mp->graph)
        return diag_error(L->d, FX_ERR_FORMAT, "the model has no graph");
    L->gp = mp->graph;
    if ((st = check_supported(L)) != FX_OK)
        return st;
    if (opset == 0) {
        if (L->gp->n_node > 0)
            return diag_error(L->d, FX_ERR_FORMAT, "the model imports no default-domain opset");
        opset = FX_MAX_OPSET; /* no nodes: any opset reads the same */
    }
    if (!(L->g = graph_new()))
        return nomem(L);
    L->g->opset = opset;
    L->g->ir_version = (int)mp->ir_version;
    if (!(L->g->source = arena_strdup(&L->g->arena, name)))
        return nomem(L);
    if ((st = parse_leaf_types(L)) != FX_OK || (st = build_inputs(L)) != FX_OK ||
        (st = build_nodes(L)) != FX_OK || (st = check_leaf_types_used(L)) != FX_OK ||
        (st = build_output(L)) != FX_OK)
        return st;
    return FX_OK;
}

/* The second half of a load: the decoded message to a Graph.  Frees msg. */
static FxStatus load_message(ProtobufCMessage *msg, OnnxAllocator *alloc, const char *name,
                             const char *base_dir, const OnnxLoadOptions *opt, Graph **out,
                             Diag *d)
{
    Loader L = {.base_dir = base_dir, .opt = opt, .d = d};
    FxStatus st = load_model(&L, (const Onnx__ModelProto *)msg, name);
    if (st == FX_OK)
        *out = L.g;
    else
        graph_free(L.g);
    loader_free(&L);
    onnx_message_free(msg, alloc);
    return st;
}

FxStatus onnx_load_buffer(const uint8_t *data, size_t len, const char *name,
                          const char *base_dir, const OnnxLoadOptions *opt, Graph **out,
                          Diag *d)
{
    *out = NULL;
    if (!name)
        name = "<memory>";
    const char *saved = d ? d->file : NULL;
    if (d)
        d->file = name;
    OnnxAllocator alloc;
    ProtobufCMessage *msg;
    FxStatus st = onnx_message_unpack(data, len, &onnx__model_proto__descriptor, name,
                                      "ONNX model", &alloc, &msg, d);
    if (st == FX_OK)
        st = load_message(msg, &alloc, name, base_dir, opt, out, d);
    if (d)
        d->file = saved;
    return st;
}

/* The file's bytes are freed as soon as they are decoded: protobuf-c copies
 * every bytes field, so a model's weights would otherwise be held three
 * times at the peak (file, message, tensors) instead of twice. */
FxStatus onnx_load(const char *path, const OnnxLoadOptions *opt, Graph **out, Diag *d)
{
    *out = NULL;
    uint8_t *data;
    size_t len;
    FxStatus st = file_read_all(path, &data, &len, d);
    if (st != FX_OK)
        return st;
    char *dir = path_dirname(path);
    const char *saved = d ? d->file : NULL;
    if (d)
        d->file = path;
    OnnxAllocator alloc;
    ProtobufCMessage *msg = NULL;
    if (!dir)
        st = diag_error_at(d, FX_ERR_NOMEM, path, -1, "out of memory");
    else
        st = onnx_message_unpack(data, len, &onnx__model_proto__descriptor, path,
                                 "ONNX model", &alloc, &msg, d);
    free(data);
    if (st == FX_OK)
        st = load_message(msg, &alloc, path, dir, opt, out, d);
    if (d)
        d->file = saved;
    free(dir);
    return st;
}
