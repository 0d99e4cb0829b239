/*
 * shape_prop.c - static shapes and dtypes for every node.
 *
 * Walks the graph once in order.  Placeholders take their declared type with
 * symbolic dimensions bound by --shape; every op's shape function sees its
 * inputs' types and, where known, their compile-time values.  A node whose
 * inputs are all known constants is evaluated on the spot (when small), which
 * is how the Shape -> Gather -> Concat -> Reshape chains PyTorch exports for
 * transformers resolve to static shapes; opaque ops (FX_OPF_OPAQUE: leaf
 * ops, whose kernel is the user's) are never evaluated.  Anything whose shape
 * would depend on run-time data is refused by the op's shape function, naming
 * the node.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* Constants larger than this are not folded during shape propagation: shape
 * computations are tiny, and folding big weights is the constant-folding
 * pass's job, not the shape engine's. */
enum { SHAPE_PROP_MAX_FOLD_ELEMS = 1 << 16 };

FxStatus shape_binding_parse(const char *text, ShapeBinding *out, Diag *d)
{
    memset(out, 0, sizeof *out);
    const char *eq = strrchr(text, '=');
    if (!eq || eq == text)
        return diag_error(d, FX_ERR_INVALID, "--shape '%s': expected NAME=DIMS, e.g. x=1x3x224x224",
                          text);
    out->input = text; /* the name is the text before '='; compared by length below */
    const char *p = eq + 1;
    int rank = 0;
    while (*p) {
        if (rank == FX_MAX_RANK)
            return diag_error(d, FX_ERR_INVALID, "--shape '%s': more than %d dimensions", text,
                              FX_MAX_RANK);
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v > (1ll << 40))
            return diag_error(d, FX_ERR_INVALID, "--shape '%s': bad dimension at '%s'", text, p);
        out->type.dims[rank++] = v;
        p = end;
        if (*p == 'x' || *p == 'X' || *p == ',')
            p++;
        else if (*p)
            return diag_error(d, FX_ERR_INVALID, "--shape '%s': unexpected '%c'", text, *p);
    }
    out->type.rank = rank;
    return FX_OK;
}

static bool binding_matches(const ShapeBinding *b, const Node *ph)
{
    size_t len = (size_t)(strrchr(b->input, '=') - b->input);
    const char *names[2] = {ph->target, ph->name};
    for (int i = 0; i < 2; i++)
        if (names[i] && strlen(names[i]) == len && strncmp(names[i], b->input, len) == 0)
            return true;
    return false;
}

static FxStatus placeholder_type(Node *n, const ShapeBinding *bindings, int num_bindings,
                                 Diag *d)
{
    if (n->num_outputs != 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "graph input has no declared type");
    TensorType *t = &n->out_types[0];
    for (int b = 0; b < num_bindings; b++) {
        if (!binding_matches(&bindings[b], n))
            continue;
        const TensorType *bt = &bindings[b].type;
        if (bt->rank != t->rank)
            return diag_node_error(d, FX_ERR_SHAPE, n,
                                   "--shape gives %d dimensions but the input has rank %d",
                                   bt->rank, t->rank);
        for (int i = 0; i < t->rank; i++) {
            if (t->dims[i] >= 0 && t->dims[i] != bt->dims[i])
                return diag_node_error(d, FX_ERR_SHAPE, n,
                                       "--shape sets dimension %d to %lld but the model fixes it "
                                       "to %lld", i, (long long)bt->dims[i], (long long)t->dims[i]);
            t->dims[i] = bt->dims[i];
        }
    }
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) {
            const char *sym = n->dim_params[i] ? n->dim_params[i] : "?";
            return diag_node_error(d, FX_ERR_SHAPE, n,
                                   "input '%s' has symbolic dimension %d ('%s'); bind it with "
                                   "--shape %s=DIMS (e.g. 1x3x224x224)",
                                   n->target, i, sym, n->target);
        }
    uint64_t bytes;
    if (type_check_size(t, &bytes, d, n->target) != FX_OK)
        return FX_ERR_SHAPE;
    if (!dtype_is_supported(t->dtype))
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "input element type %s is not supported",
                               dtype_name(t->dtype));
    return FX_OK;
}

const Tensor *node_const_value(const Node *a)
{
    if (!a)
        return NULL;
    if (a->opcode == FX_OPCODE_GET_ATTR)
        return a->value;
    /* a placeholder has one only in a control-flow body, which reads a
     * constant of the enclosing graph */
    if (!a->const_values || a->num_outputs != 1)
        return NULL;
    return a->const_values[0];
}

bool node_const_scalar_int(const Node *a, int32_t *v)
{
    if (!a) {
        *v = 0;
        return true;
    }
    const Tensor *t = node_const_value(a);
    if (!t || tensor_numel(t) != 1)
        return false;
    *v = (int32_t)tensor_get_int(t, 0);
    return true;
}

bool node_const_zeros(const Node *a)
{
    if (!a)
        return true;
    const Tensor *t = node_const_value(a);
    if (!t)
        return false;
    for (int64_t i = 0; i < tensor_numel(t); i++)
        if (tensor_get_int(t, i) != 0)
            return false;
    return true;
}

static FxStatus fold_if_constant(Node *n, const TensorType *const *in, const Tensor *const *vals,
                                 Diag *d)
{
    bool type_only = (n->op->flags & FX_OPF_TYPE_ONLY) != 0;
    int64_t elems = 0;
    for (int k = 0; k < n->num_outputs; k++)
        elems += type_numel(&n->out_types[k]);
    if (elems > SHAPE_PROP_MAX_FOLD_ELEMS)
        return FX_OK;
    Tensor *type_shells = NULL;
    const Tensor **inputs = fx_alloc_array((size_t)n->num_args + 1, sizeof *inputs);
    if (!inputs)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    if (type_only) {
        type_shells = fx_alloc_array((size_t)n->num_args + 1, sizeof *type_shells);
        if (!type_shells) {
            free(inputs);
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        }
    }
    for (int i = 0; i < n->num_args; i++) {
        if (!n->args[i])
            continue;
        if (vals[i]) {
            inputs[i] = vals[i];
        } else if (type_only) {
            type_shells[i].type = *in[i];
            inputs[i] = &type_shells[i];
        } else {
            free(inputs);
            return FX_OK; /* not a constant */
        }
    }
    Tensor **outs = fx_alloc_array((size_t)n->num_outputs, sizeof *outs);
    FxStatus st = FX_ERR_NOMEM;
    if (outs)
        st = node_eval(n, inputs, outs, d);
    if (st == FX_OK)
        for (int k = 0; k < n->num_outputs; k++)
            n->const_values[k] = outs[k];
    free(outs);
    free(inputs);
    free(type_shells);
    return st;
}

FxStatus node_infer_shapes(Node *n, Diag *d)
{
    const OpDef *op = n->op;
    if (!op)
        return diag_node_error(d, FX_ERR_INVALID, n, "node has no op definition");
    if (n->num_args < op->min_inputs || (op->max_inputs >= 0 && n->num_args > op->max_inputs))
        return diag_node_error(d, FX_ERR_INVALID, n, "has %d inputs; %s takes %d to %d",
                               n->num_args, op->name, op->min_inputs, op->max_inputs);
    for (int i = 0; i < op->min_inputs; i++)
        if (!n->args[i])
            return diag_node_error(d, FX_ERR_INVALID, n, "required input %d is missing", i);
    if (n->num_outputs == 0 && !node_set_num_outputs(n, 1))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    if (n->num_outputs < op->min_outputs || n->num_outputs > op->max_outputs)
        return diag_node_error(d, FX_ERR_INVALID, n, "has %d outputs; %s gives %d to %d",
                               n->num_outputs, op->name, op->min_outputs, op->max_outputs);

    int na = n->num_args;
    const TensorType **in = fx_alloc_array((size_t)na + 1, sizeof *in);
    const Tensor **vals = fx_alloc_array((size_t)na + 1, sizeof *vals);
    if (!in || !vals) {
        free(in);
        free(vals);
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    }
    FxStatus st = FX_OK;
    for (int i = 0; i < na && st == FX_OK; i++) {
        const Node *a = n->args[i];
        if (!a)
            continue;
        if (a->num_outputs != 1 && op != &fx_op_getitem)
            st = diag_node_error(d, FX_ERR_INVALID, n,
                                 "argument %d ('%s') has %d outputs; read it through getitem", i,
                                 a->name, a->num_outputs);
        else if (!a->shapes_known)
            st = diag_node_error(d, FX_ERR_INVALID, n, "argument %d ('%s') has no shape", i,
                                 a->name);
        else {
            in[i] = &a->out_types[0];
            vals[i] = node_const_value(a);
        }
    }
    if (st == FX_OK) {
        for (int k = 0; k < n->num_outputs; k++) {
            tensor_free(n->const_values[k]);
            n->const_values[k] = NULL;
            memset(&n->out_types[k], 0, sizeof n->out_types[k]);
        }
        InferCtx c = {.node = n, .num_inputs = na, .in = in, .in_value = vals,
                      .num_outputs = n->num_outputs, .out = n->out_types, .diag = d};
        st = op->infer(&c);
    }
    for (int k = 0; k < n->num_outputs && st == FX_OK; k++) {
        const TensorType *t = &n->out_types[k];
        if (!dtype_is_supported(t->dtype))
            st = diag_node_error(d, FX_ERR_UNSUPPORTED, n, "output %d has element type %s", k,
                                 dtype_name(t->dtype));
        else if (type_check_size(t, NULL, d, n->name) != FX_OK)
            st = FX_ERR_SHAPE;
    }
    if (st == FX_OK) {
        n->shapes_known = true;
        if (op == &fx_op_getitem) {
            const Node *src = n->args[0];
            if (src->const_values && src->const_values[n->index])
                n->const_values[0] = tensor_clone(src->const_values[n->index], d);
        } else if (!(op->flags & FX_OPF_OPAQUE)) {
            st = fold_if_constant(n, in, vals, d);
        }
    }
    free(in);
    free(vals);
    return st;
}

FxStatus graph_propagate_shapes(Graph *g, const ShapeBinding *bindings, int num_bindings,
                                Diag *d)
{
    for (int b = 0; b < num_bindings; b++) {
        bool found = false;
        for (Node *n = g->root.next; n != &g->root && !found; n = n->next)
            found = n->opcode == FX_OPCODE_PLACEHOLDER && binding_matches(&bindings[b], n);
        if (!found) {
            size_t len = (size_t)(strrchr(bindings[b].input, '=') - bindings[b].input);
            return diag_error(d, FX_ERR_INVALID, "--shape names '%.*s', which is not a graph input",
                              (int)len, bindings[b].input);
        }
    }
    for (Node *n = g->root.next; n != &g->root; n = n->next) {
        FxStatus st = FX_OK;
        switch (n->opcode) {
        case FX_OPCODE_PLACEHOLDER:
            st = placeholder_type(n, bindings, num_bindings, d);
            n->shapes_known = st == FX_OK;
            break;
        case FX_OPCODE_GET_ATTR:
            if (!n->value)
                return diag_node_error(d, FX_ERR_INVALID, n, "constant has no value");
            if (n->num_outputs != 1 && !node_set_num_outputs(n, 1))
                return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
            n->out_types[0] = n->value->type;
            n->shapes_known = true;
            break;
        case FX_OPCODE_CALL_FUNCTION:
        case FX_OPCODE_CALL_METHOD:
        case FX_OPCODE_CALL_MODULE:
            st = node_infer_shapes(n, d);
            break;
        case FX_OPCODE_OUTPUT:
            for (int i = 0; i < n->num_args; i++)
                if (!n->args[i] || !n->args[i]->shapes_known || n->args[i]->num_outputs != 1)
                    return diag_node_error(d, FX_ERR_INVALID, n, "output %d has no value", i);
            n->shapes_known = true;
            break;
        case FX_OPCODE_SENTINEL:
            break;
        }
        if (st != FX_OK)
            return st;
    }
    return FX_OK;
}
