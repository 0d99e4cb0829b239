/*
 * ops.c - the op table built from ops.def, lookup by ONNX op type, the
 * declarative attribute specs (defaults filled at import so that attributes
 * are canonical), and helpers shared by the shape functions of all ops.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static const OpDef *const op_table[] = {
#define FX_OP(sym) &fx_op_##sym,
#include "ops.def"
#undef FX_OP
};

_Static_assert(sizeof op_table / sizeof op_table[0] == FX_OP_COUNT_,
               "op table and OpKind enum are made from the same ops.def");

int op_count(void) { return FX_OP_COUNT_; }

const OpDef *op_by_kind(OpKind k) { return (int)k < FX_OP_COUNT_ ? op_table[k] : NULL; }

OpKind op_kind(const OpDef *op)
{
    for (int k = 0; k < FX_OP_COUNT_; k++)
        if (op_table[k] == op)
            return (OpKind)k;
    return FX_OP_COUNT_;
}

const OpDef *op_lookup(const char *onnx_type)
{
    for (int k = 0; k < FX_OP_COUNT_; k++)
        if (!(op_table[k]->flags & (FX_OPF_INTERNAL | FX_OPF_MODULE)) &&
            strcmp(op_table[k]->name, onnx_type) == 0)
            return op_table[k];
    return NULL;
}

const OpDef *op_lookup_any(const char *name)
{
    for (int k = 0; k < FX_OP_COUNT_; k++)
        if (strcmp(op_table[k]->name, name) == 0)
            return op_table[k];
    return NULL;
}

/* --- attribute specs ------------------------------------------------------ */

static const char *attr_kind_name(AttrKind k)
{
    switch (k) {
    case FX_ATTR_FLOAT: return "float";
    case FX_ATTR_INT: return "int";
    case FX_ATTR_STRING: return "string";
    case FX_ATTR_TENSOR: return "tensor";
    case FX_ATTR_FLOATS: return "floats";
    case FX_ATTR_INTS: return "ints";
    case FX_ATTR_STRINGS: return "strings";
    }
    return "?";
}

/* Parses "[1, 2, 3]" (or "[]") into vals; returns the count or -1. */
static int parse_list(const char *text, double *vals, int max)
{
    const char *p = text;
    while (*p == ' ')
        p++;
    if (*p++ != '[')
        return -1;
    int n = 0;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ']')
            return n;
        if (n == max)
            return -1;
        char *end;
        errno = 0;
        vals[n++] = strtod(p, &end);
        if (end == p || errno)
            return -1;
        p = end;
    }
}

static FxStatus attr_set_default(const AttrSpec *s, Node *n, Diag *d)
{
    double vals[16];
    int64_t ints[16];
    float floats[16];
    Attr *a = NULL;
    switch (s->kind) {
    case FX_ATTR_INT:
        a = node_set_attr_int(n, s->name, strtoll(s->dflt, NULL, 10));
        break;
    case FX_ATTR_FLOAT:
        a = node_set_attr_float(n, s->name, strtof(s->dflt, NULL));
        break;
    case FX_ATTR_STRING:
        a = node_set_attr_string(n, s->name, s->dflt);
        break;
    case FX_ATTR_INTS:
    case FX_ATTR_FLOATS: {
        int count = parse_list(s->dflt, vals, 16);
        if (count < 0) {
            fprintf(stderr, "%s:%d: bad default '%s' for %s.%s\n", __FILE__, __LINE__, s->dflt,
                    n->op->name, s->name);
            abort(); /* a typo in the op table, not bad input */
        }
        for (int i = 0; i < count; i++) {
            ints[i] = (int64_t)vals[i];
            floats[i] = (float)vals[i];
        }
        a = s->kind == FX_ATTR_INTS ? node_set_attr_ints(n, s->name, ints, count)
                                    : node_set_attr_floats(n, s->name, floats, count);
        break;
    }
    case FX_ATTR_STRINGS:
        a = node_set_attr_strings(n, s->name, NULL, 0);
        break;
    case FX_ATTR_TENSOR:
        return FX_OK; /* tensor attributes have no textual default */
    }
    if (!a)
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory setting attribute %s", s->name);
    return FX_OK;
}

FxStatus op_apply_attr_specs(const OpDef *op, Node *n, Diag *d)
{
    FxStatus st = FX_OK;
    /* Unknown or mistyped attributes first: they usually mean a newer opset
     * or a different op than the one fxcc implements. */
    for (int i = 0; i < n->num_attrs; i++) {
        const Attr *a = &n->attrs[i];
        const AttrSpec *s = op->attrs;
        while (s && s->name && strcmp(s->name, a->name) != 0)
            s++;
        if (!s || !s->name) {
            st = diag_node_error(d, FX_ERR_UNSUPPORTED, n, "unknown attribute '%s'", a->name);
            continue;
        }
        bool ok = a->kind == s->kind ||
                  (s->kind == FX_ATTR_FLOAT && a->kind == FX_ATTR_INT) ||
                  (s->kind == FX_ATTR_FLOATS && a->kind == FX_ATTR_INTS);
        if (!ok)
            st = diag_node_error(d, FX_ERR_INVALID, n, "attribute '%s' is %s, expected %s",
                                 a->name, attr_kind_name(a->kind), attr_kind_name(s->kind));
    }
    if (st != FX_OK)
        return st;
    /* Promote ints given where floats are expected, then fill defaults, then
     * reorder to the spec order so that printing is canonical. */
    for (const AttrSpec *s = op->attrs; s && s->name; s++) {
        Attr *a = node_attr(n, s->name);
        if (a && s->kind == FX_ATTR_FLOAT && a->kind == FX_ATTR_INT) {
            a->kind = FX_ATTR_FLOAT;
            a->f = (float)a->i;
        } else if (a && s->kind == FX_ATTR_FLOATS && a->kind == FX_ATTR_INTS) {
            float *f = arena_alloc(&n->graph->arena, (size_t)(a->count ? a->count : 1) * sizeof *f);
            if (!f)
                return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
            for (int64_t i = 0; i < a->count; i++)
                f[i] = (float)a->ints[i];
            a->kind = FX_ATTR_FLOATS;
            a->floats = f;
        }
        if (!a && s->required)
            st = diag_node_error(d, FX_ERR_INVALID, n, "required attribute '%s' is missing",
                                 s->name);
        else if (!a && s->dflt && (st = attr_set_default(s, n, d)) != FX_OK)
            return st;
    }
    if (st != FX_OK)
        return st;
    if (n->num_attrs > 1) {
        Attr *sorted = arena_alloc(&n->graph->arena, (size_t)n->num_attrs * sizeof *sorted);
        if (!sorted)
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        int k = 0;
        for (const AttrSpec *s = op->attrs; s && s->name; s++) {
            Attr *a = node_attr(n, s->name);
            if (a)
                sorted[k++] = *a;
        }
        memcpy(n->attrs, sorted, (size_t)k * sizeof *sorted);
    }
    return FX_OK;
}

/* --- shape helpers -------------------------------------------------------- */

FxStatus infer_broadcast(InferCtx *c, const TensorType *a, const TensorType *b,
                         TensorType *out)
{
    int rank = a->rank > b->rank ? a->rank : b->rank;
    TensorType r = *out;
    r.rank = rank;
    for (int i = 0; i < rank; i++) {
        int ia = i - (rank - a->rank), ib = i - (rank - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char sa[128], sb[128];
            return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                                   "shapes %s and %s do not broadcast (dimension %d: %lld vs %lld)",
                                   type_format(a, sa, sizeof sa), type_format(b, sb, sizeof sb),
                                   i, (long long)da, (long long)db);
        }
        r.dims[i] = da == 1 ? db : da;
    }
    *out = r;
    return FX_OK;
}

FxStatus infer_axis(InferCtx *c, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= (rank > 0 ? rank : 1))
        return diag_node_error(c->diag, FX_ERR_SHAPE, c->node,
                               "axis %lld is out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return FX_OK;
}

const char *const_input_hint(const Graph *g)
{
    static const char hint[] =
        "; give its value with --const NAME=FILE, or the input dims it is computed from with "
        "--shape NAME=DIMS";
    static const char hint_kept[] =
        "; give its value with --const NAME=FILE, or the input dims it is computed from with "
        "--shape NAME=DIMS (--keep-input-defaults kept the inputs that have initializers as "
        "runtime inputs; without it they are constants)";
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        if (n->opcode == FX_OPCODE_PLACEHOLDER && n->value)
            return hint_kept;
    return hint;
}

FxStatus infer_not_constant(InferCtx *c, int input, const char *role, const char *depends)
{
    const Node *src = input < c->num_inputs ? c->node->args[input] : NULL;
    char what[160];
    if (role)
        snprintf(what, sizeof what, "'%s'", role);
    else
        snprintf(what, sizeof what, "%d", input);
    return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                           "input %s ('%s') must be a compile-time constant: %s%s", what,
                           src ? src->name : "?",
                           depends ? depends
                                   : "the output shape depends on its data (data-dependent "
                                     "shapes are not supported)",
                           const_input_hint(c->node->graph));
}

FxStatus infer_const_ints(InferCtx *c, int input, int64_t *vals, int64_t max, int64_t *count)
{
    const Tensor *t = input < c->num_inputs ? c->in_value[input] : NULL;
    if (!t)
        return infer_not_constant(c, input, NULL, NULL);
    if (fxrt_dtype_is_float(t->type.dtype) || t->type.dtype == FXRT_DTYPE_BOOL)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "input %d must be an integer tensor, not %s", input,
                               dtype_name(t->type.dtype));
    int64_t n = tensor_numel(t);
    if (n > max)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                               "input %d has %lld values, more than the %lld supported", input,
                               (long long)n, (long long)max);
    for (int64_t i = 0; i < n; i++)
        vals[i] = tensor_get_int(t, i);
    *count = n;
    return FX_OK;
}
