/*
 * onnx_save.c - Graph to ONNX: writes a graph whose nodes are all plain
 * ONNX ops (the imported form, -O0, or after pruning or quantization) as a
 * ModelProto, so that it can be run or fine-tuned elsewhere.
 *
 * Constants become initializers (raw little-endian data), placeholders the
 * graph inputs with their shapes (symbolic dims kept by name), the output
 * node the graph outputs under their ONNX names, with their shapes.  Every
 * other value is named after its node (names are unique); a graph output
 * takes over its producer's value name, or, when that is an input, a
 * constant or another output's value, gets an Identity.  The opset is the
 * graph's; ops that canonicalization rewrote into a form newer than that
 * opset (Clip before 11, Softmax before 13, Reduce* before 13/18 with an
 * axes input) are refused, as are fxcc's internal ops, fused call_module
 * nodes and leaf ops: the error names the node.
 *
 * Every protobuf struct lives in one arena freed when the file is written;
 * tensor data is referenced, not copied.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

typedef struct Saver {
    const Graph *g;
    Arena arena;
    Diag *d;
    const char **value_name; /* [g->next_id]: the ONNX name of each node's output 0 */
    bool uses_microsoft;
} Saver;

static void *salloc(Saver *s, size_t n)
{
    return arena_alloc(&s->arena, n ? n : 1);
}

static bool is_microsoft(const Node *n)
{
    static const char *const ops[] = {"QGemm", "QLinearAdd", "QLinearMul",
                                      "QLinearGlobalAveragePool", "QLinearAveragePool",
                                      "QLinearConcat", "QLinearSoftmax", "QLinearSigmoid",
                                      "QLinearLeakyRelu"};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++)
        if (strcmp(n->op->name, ops[k]) == 0)
            return true;
    return false;
}

/* The reason node n cannot be written at opset `opset`, or NULL. */
static const char *refusal(const Node *n, int opset)
{
    if (n->opcode == FX_OPCODE_CALL_MODULE)
        return "it is a fused fxcc kernel (write the graph before the passes, -O0)";
    if (!n->op)
        return "it has no op";
    if (n->op == &fx_op_Leaf)
        return "it is a leaf op, whose ONNX form is not kept";
    if (n->body)
        return "its control-flow bodies are not written (fold the If or unroll the loop: --const, "
               "--shape)";
    if (strcmp(n->op->name, "getitem") == 0)
        return NULL;
    if ((n->op->flags & (FX_OPF_INTERNAL | FX_OPF_MODULE)) || op_lookup(n->op->name) != n->op)
        return "it is an fxcc-internal op (write the graph before the passes, -O0)";
    if (node_attr(n, "coerce_2d"))
        return "its opset-1..12 semantics were rewritten at import; save an opset-13+ model";
    if (n->op == &fx_op_Clip && opset < 11 && n->num_args > 1)
        return "Clip before opset 11 takes its bounds as attributes; save an opset-11+ model";
    bool reduce = strncmp(n->op->name, "Reduce", 6) == 0;
    int since = n->op == &fx_op_ReduceSum ? 13 : 18;
    if (reduce && opset < since && n->num_args > 1)
        return "its axes became an input at import; save a model of a newer opset";
    return NULL;
}

static Onnx__TensorProto *tensor_proto(Saver *s, const Tensor *t, const char *name)
{
    static const Onnx__TensorProto init = ONNX__TENSOR_PROTO__INIT;
    Onnx__TensorProto *tp = salloc(s, sizeof *tp);
    int64_t *dims = salloc(s, (size_t)(t->type.rank + 1) * sizeof *dims);
    if (!tp || !dims)
        return NULL;
    *tp = init;
    for (int i = 0; i < t->type.rank; i++)
        dims[i] = t->type.dims[i];
    tp->n_dims = (size_t)t->type.rank;
    tp->dims = dims;
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t->type.dtype; /* FxrtDType numbers are ONNX's */
    tp->name = (char *)name;
    tp->has_raw_data = 1;
    tp->raw_data.len = tensor_nbytes(t);
    tp->raw_data.data = t->data;
    return tp;
}

/* A graph input or output: name, element type and shape. */
static Onnx__ValueInfoProto *value_info(Saver *s, const char *name, const TensorType *t,
                                        const char *const *dim_params)
{
    static const Onnx__ValueInfoProto vi_init = ONNX__VALUE_INFO_PROTO__INIT;
    static const Onnx__TypeProto tp_init = ONNX__TYPE_PROTO__INIT;
    static const Onnx__TypeProto__Tensor tt_init = ONNX__TYPE_PROTO__TENSOR__INIT;
    static const Onnx__TensorShapeProto sh_init = ONNX__TENSOR_SHAPE_PROTO__INIT;
    static const Onnx__TensorShapeProto__Dimension dim_init =
        ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    Onnx__ValueInfoProto *vi = salloc(s, sizeof *vi);
    Onnx__TypeProto *tp = salloc(s, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = salloc(s, sizeof *tt);
    Onnx__TensorShapeProto *sh = salloc(s, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dims = salloc(s, (size_t)(t->rank + 1) * sizeof *dims);
    if (!vi || !tp || !tt || !sh || !dims)
        return NULL;
    *vi = vi_init;
    *tp = tp_init;
    *tt = tt_init;
    *sh = sh_init;
    for (int i = 0; i < t->rank; i++) {
        Onnx__TensorShapeProto__Dimension *dim = salloc(s, sizeof *dim);
        if (!dim)
            return NULL;
        *dim = dim_init;
        if (dim_params && dim_params[i]) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = (char *)dim_params[i];
        } else {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = t->dims[i];
        }
        dims[i] = dim;
    }
    sh->n_dim = (size_t)t->rank;
    sh->dim = dims;
    tt->has_elem_type = 1;
    tt->elem_type = (int32_t)t->dtype;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = (char *)name;
    vi->type = tp;
    return vi;
}

static Onnx__AttributeProto *attribute(Saver *s, const Attr *a)
{
    static const Onnx__AttributeProto init = ONNX__ATTRIBUTE_PROTO__INIT;
    Onnx__AttributeProto *ap = salloc(s, sizeof *ap);
    if (!ap)
        return NULL;
    *ap = init;
    ap->name = (char *)a->name;
    ap->has_type = 1;
    switch (a->kind) {
    case FX_ATTR_FLOAT:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        ap->has_f = 1;
        ap->f = a->f;
        break;
    case FX_ATTR_INT:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        ap->has_i = 1;
        ap->i = a->i;
        break;
    case FX_ATTR_STRING:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        ap->has_s = 1;
        ap->s.len = strlen(a->s);
        ap->s.data = (uint8_t *)a->s;
        break;
    case FX_ATTR_TENSOR:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
        if (!(ap->t = tensor_proto(s, a->t, NULL)))
            return NULL;
        break;
    case FX_ATTR_FLOATS:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        ap->n_floats = (size_t)a->count;
        ap->floats = a->floats;
        break;
    case FX_ATTR_INTS:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        ap->n_ints = (size_t)a->count;
        ap->ints = a->ints;
        break;
    case FX_ATTR_STRINGS:
        ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
        ap->n_strings = (size_t)a->count;
        if (!(ap->strings = salloc(s, (size_t)(a->count + 1) * sizeof *ap->strings)))
            return NULL;
        for (int64_t k = 0; k < a->count; k++) {
            ap->strings[k].len = strlen(a->strings[k]);
            ap->strings[k].data = (uint8_t *)a->strings[k];
        }
        break;
    }
    return ap;
}

/* a holds what ONNX assumes when the attribute is absent: its spec's
 * default, or dilations of all ones (filled at import; AveragePool only
 * has the attribute from opset 19, so it is left out rather than written). */
static bool attr_is_default(const Node *n, const Attr *a)
{
    if (strcmp(a->name, "dilations") == 0 && a->kind == FX_ATTR_INTS) {
        for (int64_t k = 0; k < a->count; k++)
            if (a->ints[k] != 1)
                return false;
        return true;
    }
    const AttrSpec *spec = n->op->attrs;
    while (spec && spec->name && strcmp(spec->name, a->name) != 0)
        spec++;
    if (!spec || !spec->name || !spec->dflt || spec->kind != a->kind)
        return false;
    const char *t = spec->dflt;
    char *end;
    switch (a->kind) {
    case FX_ATTR_INT:
        return strtoll(t, &end, 10) == a->i && !*end;
    case FX_ATTR_FLOAT:
        return (float)strtod(t, &end) == a->f && !*end;
    case FX_ATTR_STRING:
        return strcmp(t, a->s) == 0;
    case FX_ATTR_INTS: {
        int64_t k = 0;
        for (const char *p = t; *p; p++) {
            if (*p == '[' || *p == ']' || *p == ',' || *p == ' ')
                continue;
            long long v = strtoll(p, &end, 10);
            if (end == p || k >= a->count || a->ints[k++] != v)
                return false;
            p = end - 1;
        }
        return k == a->count;
    }
    default:
        return false;
    }
}

/* The name of output k of node n (getitem reads them). */
static const char *output_name(Saver *s, const Node *n, int k)
{
    if (n->num_outputs <= 1)
        return s->value_name[n->id];
    char buf[512];
    snprintf(buf, sizeof buf, "%s__%d", s->value_name[n->id], k);
    return arena_strdup(&s->arena, buf);
}

/* The name of the value an argument reads. */
static const char *arg_name(Saver *s, const Node *a)
{
    if (!a)
        return "";
    if (a->op && strcmp(a->op->name, "getitem") == 0)
        return output_name(s, a->args[0], a->index);
    return s->value_name[a->id];
}

static Onnx__NodeProto *node_proto(Saver *s, const Node *n, const char *const *outputs,
                                   int num_outputs)
{
    static const Onnx__NodeProto init = ONNX__NODE_PROTO__INIT;
    Onnx__NodeProto *np = salloc(s, sizeof *np);
    char **in = salloc(s, (size_t)(n->num_args + 1) * sizeof *in);
    Onnx__AttributeProto **attrs = salloc(s, (size_t)(n->num_attrs + 1) * sizeof *attrs);
    if (!np || !in || !attrs)
        return NULL;
    *np = init;
    int num_in = n->num_args;
    while (num_in > 0 && !n->args[num_in - 1])
        num_in--; /* trailing omitted inputs are left out */
    for (int i = 0; i < num_in; i++)
        if (!(in[i] = (char *)arg_name(s, n->args[i])))
            return NULL;
    int num_attrs = 0;
    for (int k = 0; k < n->num_attrs; k++)
        if (!attr_is_default(n, &n->attrs[k]) &&
            !(attrs[num_attrs++] = attribute(s, &n->attrs[k])))
            return NULL;
    np->n_input = (size_t)num_in;
    np->input = in;
    np->n_output = (size_t)num_outputs;
    np->output = (char **)outputs;
    np->name = (char *)n->name;
    np->op_type = (char *)n->op->name;
    if (is_microsoft(n)) {
        np->domain = "com.microsoft";
        s->uses_microsoft = true;
    }
    np->n_attribute = (size_t)num_attrs;
    np->attribute = attrs;
    return np;
}

static FxStatus nomem(Saver *s)
{
    return diag_error(s->d, FX_ERR_NOMEM, "out of memory");
}

/* Builds the ModelProto in s's arena. */
static FxStatus build(Saver *s, Onnx__ModelProto *model)
{
    const Graph *g = s->g;
    const Node *out = graph_output_node(g);
    if (!out)
        return diag_error(s->d, FX_ERR_INVALID, "the graph has no output node");
    int count = 0, inputs = 0, inits = 0;
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        if (node_is_call(n)) {
            const char *why = refusal(n, g->opset);
            if (why)
                return diag_node_error(s->d, FX_ERR_UNSUPPORTED, n,
                                       "cannot be written as ONNX: %s", why);
            count++;
        }
        inputs += n->opcode == FX_OPCODE_PLACEHOLDER;
        inits += n->opcode == FX_OPCODE_GET_ATTR;
        if (n->opcode != FX_OPCODE_OUTPUT && (!n->shapes_known || n->num_outputs < 1) &&
            !(n->op && strcmp(n->op->name, "getitem") == 0))
            return diag_node_error(s->d, FX_ERR_INVALID, n, "has no known type to write");
    }
    s->value_name = salloc(s, (size_t)(g->next_id + 1) * sizeof *s->value_name);
    if (!s->value_name)
        return nomem(s);
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        s->value_name[n->id] = n->opcode == FX_OPCODE_PLACEHOLDER ? n->target : n->name;
    /* A graph output renames its producer's value when it may; otherwise an
     * Identity copies it (an input, a constant, a value returned twice). */
    bool *renamed = salloc(s, (size_t)(g->next_id + 1) * sizeof *renamed);
    bool *identity = salloc(s, (size_t)(out->num_args + 1) * sizeof *identity);
    if (!renamed || !identity)
        return nomem(s);
    int identities = 0;
    for (int k = 0; k < out->num_args; k++) {
        const Node *v = out->args[k];
        const char *name = out->onnx_outputs ? out->onnx_outputs[k] : v->name;
        bool plain = v && node_is_call(v) && !(v->op && strcmp(v->op->name, "getitem") == 0) &&
                     v->num_outputs == 1;
        if (plain && !renamed[v->id]) {
            renamed[v->id] = true;
            s->value_name[v->id] = name;
        } else {
            identity[k] = true;
            identities++;
        }
    }
    static const Onnx__GraphProto graph_init = ONNX__GRAPH_PROTO__INIT;
    static const Onnx__OperatorSetIdProto opset_init = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    Onnx__GraphProto *gp = salloc(s, sizeof *gp);
    Onnx__NodeProto **nodes = salloc(s, (size_t)(count + identities + 1) * sizeof *nodes);
    Onnx__TensorProto **init = salloc(s, (size_t)(inits + 1) * sizeof *init);
    Onnx__ValueInfoProto **in = salloc(s, (size_t)(inputs + 1) * sizeof *in);
    Onnx__ValueInfoProto **outs = salloc(s, (size_t)(out->num_args + 1) * sizeof *outs);
    Onnx__OperatorSetIdProto **opsets = salloc(s, 2 * sizeof *opsets);
    Onnx__OperatorSetIdProto *os = salloc(s, 2 * sizeof *os);
    if (!gp || !nodes || !init || !in || !outs || !opsets || !os)
        return nomem(s);
    *gp = graph_init;
    int nn = 0, ni = 0, np = 0;
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        if (n->opcode == FX_OPCODE_PLACEHOLDER) {
            if (!(in[np++] = value_info(s, n->target, &n->out_types[0], n->dim_params)))
                return nomem(s);
        } else if (n->opcode == FX_OPCODE_GET_ATTR) {
            if (!n->value)
                return diag_node_error(s->d, FX_ERR_INVALID, n, "constant without a value");
            if (!(init[ni++] = tensor_proto(s, n->value, s->value_name[n->id])))
                return nomem(s);
        } else if (node_is_call(n) && strcmp(n->op->name, "getitem") != 0) {
            const char **names = salloc(s, (size_t)(n->num_outputs + 1) * sizeof *names);
            if (!names)
                return nomem(s);
            for (int k = 0; k < n->num_outputs; k++)
                if (!(names[k] = output_name(s, n, k)))
                    return nomem(s);
            if (!(nodes[nn++] = node_proto(s, n, names, n->num_outputs)))
                return nomem(s);
        }
    }
    for (int k = 0; k < out->num_args; k++) {
        const Node *v = out->args[k];
        const char *name = out->onnx_outputs ? out->onnx_outputs[k] : v->name;
        const TensorType *t = node_input_type(out, k);
        if (!t || !(outs[k] = value_info(s, name, t, NULL)))
            return t ? nomem(s) : diag_error(s->d, FX_ERR_INVALID, "output %d has no type", k);
        if (!identity[k])
            continue;
        static const Onnx__NodeProto node_init = ONNX__NODE_PROTO__INIT;
        Onnx__NodeProto *idn = salloc(s, sizeof *idn);
        char **io = salloc(s, 2 * sizeof *io);
        char buf[512];
        snprintf(buf, sizeof buf, "%s_identity", name);
        if (!idn || !io)
            return nomem(s);
        *idn = node_init;
        io[0] = (char *)arg_name(s, v);
        io[1] = (char *)name;
        idn->n_input = idn->n_output = 1;
        idn->input = io;
        idn->output = io + 1;
        idn->op_type = "Identity";
        if (!(idn->name = arena_strdup(&s->arena, buf)))
            return nomem(s);
        nodes[nn++] = idn;
    }
    gp->name = "fxcc";
    gp->n_node = (size_t)nn;
    gp->node = nodes;
    gp->n_initializer = (size_t)ni;
    gp->initializer = init;
    gp->n_input = (size_t)np;
    gp->input = in;
    gp->n_output = (size_t)out->num_args;
    gp->output = outs;
    os[0] = opset_init;
    os[0].domain = "";
    os[0].has_version = 1;
    os[0].version = g->opset;
    opsets[0] = &os[0];
    if (s->uses_microsoft) {
        os[1] = opset_init;
        os[1].domain = "com.microsoft";
        os[1].has_version = 1;
        os[1].version = 1;
        opsets[1] = &os[1];
    }
    model->has_ir_version = 1;
    /* IR 8 reads every opset fxcc writes; older IRs' rule that initializers
     * are inputs too does not apply from IR 4 */
    model->ir_version = g->ir_version > 8 ? g->ir_version : 8;
    model->n_opset_import = s->uses_microsoft ? 2 : 1;
    model->opset_import = opsets;
    model->producer_name = "fxcc";
    model->graph = gp;
    return FX_OK;
}

FxStatus onnx_save_buffer(const Graph *g, uint8_t **data, size_t *len, Diag *d)
{
    *data = NULL;
    *len = 0;
    Saver s = {.g = g, .d = d};
    arena_init(&s.arena);
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    FxStatus st = build(&s, &model);
    if (st == FX_OK) {
        size_t size = onnx__model_proto__get_packed_size(&model);
        uint8_t *buf = fx_malloc(size ? size : 1);
        if (!buf) {
            st = diag_error(d, FX_ERR_NOMEM, "out of memory serializing a %zu-byte model", size);
        } else if (onnx__model_proto__pack(&model, buf) != size) {
            free(buf);
            st = diag_error(d, FX_ERR_INVALID, "internal error: the model packed to another size");
        } else {
            *data = buf;
            *len = size;
        }
    }
    arena_free(&s.arena);
    return st;
}

FxStatus onnx_save(const Graph *g, const char *path, Diag *d)
{
    uint8_t *data;
    size_t len;
    FxStatus st = onnx_save_buffer(g, &data, &len, d);
    if (st == FX_OK)
        st = file_write_all(path, data, len, d);
    free(data);
    return st;
}
