/*
 * leaf.c - Leaf: an op fxcc does not implement, run by a function the user
 * supplies (FX's `wrap`, or a leaf module that symbolic tracing does not
 * enter).  A model with one exotic op still compiles: the frontend turns
 * that op into a Leaf node, shape propagation takes its output types from
 * the node's leaf_types attribute (filled from --leaf-type, the model's
 * value_info or the graph outputs), the generated code calls
 *
 *     int fxcc_leaf_OP(const T0 *x0, const int64_t *x0_shape, int x0_rank, ...,
 *                      U0 *y0, const int64_t *y0_shape, int y0_rank, ...);
 *
 * (every input, then every output; the node's ONNX attributes are not
 * passed, so one function serves every node of the op type), and the
 * interpreter calls the same function from a shared library loaded with
 * leaf_library_load.  A non-zero return is the op refusing its data: the
 * interpreter reports it naming the node, NAME_run returns it.
 *
 * A Leaf is opaque (FX_OPF_OPAQUE): nothing evaluates it at compile time,
 * since the library may not be there and the function need not be pure.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* --- output types ----------------------------------------------------------- */

FxStatus leaf_type_parse(const char *text, TensorType *t, Diag *d)
{
    memset(t, 0, sizeof *t);
    const char *open = strchr(text, '[');
    size_t len = open ? (size_t)(open - text) : 0;
    for (int k = 1; k <= FXRT_DTYPE_UINT64 && open; k++)
        if (dtype_is_supported((DType)k) && strlen(dtype_name((DType)k)) == len &&
            strncmp(dtype_name((DType)k), text, len) == 0)
            t->dtype = (DType)k;
    if (!open || t->dtype == FXRT_DTYPE_UNDEFINED)
        return diag_error(d, FX_ERR_INVALID,
                          "leaf type '%s': expected ELEMENT[DIMS] with a supported element type, "
                          "e.g. float32[1, 8] or int64[] (a scalar)", text);
    const char *p = open + 1;
    for (;;) {
        while (*p == ' ')
            p++;
        if (*p == ']' && t->rank == 0)
            break;
        if (t->rank == FX_MAX_RANK)
            return diag_error(d, FX_ERR_INVALID, "leaf type '%s': more than %d dimensions", text,
                              FX_MAX_RANK);
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v > (1ll << 40))
            return diag_error(d, FX_ERR_INVALID, "leaf type '%s': bad dimension at '%s'", text, p);
        t->dims[t->rank++] = v;
        p = end;
        while (*p == ' ')
            p++;
        if (*p == ']')
            break;
        if (!*p)
            return diag_error(d, FX_ERR_INVALID, "leaf type '%s': missing ']'", text);
        if (*p != ',' && *p != 'x')
            return diag_error(d, FX_ERR_INVALID, "leaf type '%s': unexpected '%c'", text, *p);
        p++;
    }
    if (p[1] != '\0')
        return diag_error(d, FX_ERR_INVALID, "leaf type '%s': text after ']'", text);
    return type_check_size(t, NULL, d, text);
}

static const char *leaf_op_type(const Node *n) { return node_attr_string(n, "leaf_op", "?"); }

static FxStatus leaf_infer(InferCtx *c)
{
    const Node *n = c->node;
    if (c->num_inputs + c->num_outputs > FX_LEAF_MAX_VALUES)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                               "leaf op '%s' has %d inputs and %d outputs; leaf ops take at most "
                               "%d values together", leaf_op_type(n), c->num_inputs,
                               c->num_outputs, FX_LEAF_MAX_VALUES);
    for (int i = 0; i < c->num_inputs; i++)
        if (!c->in[i])
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                                   "input %d of leaf op '%s' is omitted; leaf ops take no "
                                   "omitted inputs", i, leaf_op_type(n));
    const Attr *types = node_attr(n, "leaf_types");
    for (int k = 0; k < c->num_outputs; k++) {
        const char *text = types && types->kind == FX_ATTR_STRINGS && k < types->count
                               ? types->strings[k] : "";
        const char *value = n->onnx_outputs && n->onnx_outputs[k] ? n->onnx_outputs[k] : n->name;
        if (!*text)
            return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                                   "output %d ('%s') of leaf op '%s' has no known type: fxcc "
                                   "cannot infer what an op it does not implement returns; give "
                                   "it with --leaf-type %s=TYPE (e.g. float32[1, 8]) or in the "
                                   "model's value_info", k, value, leaf_op_type(n), value);
        if (leaf_type_parse(text, &c->out[k], c->diag) != FX_OK)
            return diag_node_error(c->diag, FX_ERR_INVALID, n,
                                   "output %d ('%s') has the malformed leaf type '%s'", k, value,
                                   text);
    }
    return FX_OK;
}

/* --- the interpreter's libraries -------------------------------------------- */

enum { LEAF_MAX_LIBRARIES = 16 };

static struct {
    void *handle;
    char *path;
} leaf_libraries[LEAF_MAX_LIBRARIES];
static int leaf_num_libraries;

FxStatus leaf_library_load(const char *path, Diag *d)
{
    if (leaf_num_libraries == LEAF_MAX_LIBRARIES)
        return diag_error(d, FX_ERR_INVALID, "more than %d leaf libraries", LEAF_MAX_LIBRARIES);
    /* dlopen would search the library path for a bare name; the flag names a file. */
    size_t len = strlen(path) + 3;
    char *file = fx_malloc(len);
    if (!file)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    snprintf(file, len, "%s%s", strchr(path, '/') ? "" : "./", path);
    dlerror();
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        FxStatus st = diag_error(d, FX_ERR_IO, "cannot load leaf library %s: %s", path,
                                 why ? why : "unknown error");
        free(file);
        return st;
    }
    leaf_libraries[leaf_num_libraries].handle = h;
    leaf_libraries[leaf_num_libraries++].path = file;
    return FX_OK;
}

void leaf_libraries_close(void)
{
    for (int i = 0; i < leaf_num_libraries; i++) {
        dlclose(leaf_libraries[i].handle);
        free(leaf_libraries[i].path);
    }
    leaf_num_libraries = 0;
}

const char *leaf_function_name(const Node *n, char *buf, size_t cap)
{
    int len = snprintf(buf, cap, "fxcc_leaf_%s", leaf_op_type(n));
    for (int i = (int)sizeof "fxcc_leaf_" - 1; i < len && (size_t)i < cap; i++)
        if (!isalnum((unsigned char)buf[i]) && buf[i] != '_')
            buf[i] = '_';
    return buf;
}

/* Every parameter as a void pointer: all object pointers are passed alike on
 * the ABIs fxcc runs on, so one type per arity calls any fxcc_leaf_OP. */
#define LEAF_VALUE void *, const int64_t *, int
typedef int (*LeafFn1)(LEAF_VALUE);
typedef int (*LeafFn2)(LEAF_VALUE, LEAF_VALUE);
typedef int (*LeafFn3)(LEAF_VALUE, LEAF_VALUE, LEAF_VALUE);
typedef int (*LeafFn4)(LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE);
typedef int (*LeafFn5)(LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE);
typedef int (*LeafFn6)(LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE);
typedef int (*LeafFn7)(LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE,
                       LEAF_VALUE);
typedef int (*LeafFn8)(LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE, LEAF_VALUE,
                       LEAF_VALUE, LEAF_VALUE);
_Static_assert(FX_LEAF_MAX_VALUES == 8, "one function type per arity up to the maximum");

static int leaf_call(void *sym, int count, void *const *p, const int64_t *const *s, const int *r)
{
#define V(i) p[i], s[i], r[i]
#define CALL(k, ...)                                                                             \
    case k: {                                                                                    \
        LeafFn##k fn;                                                                            \
        memcpy(&fn, &sym, sizeof fn); /* POSIX: dlsym's result may be a function */             \
        return fn(__VA_ARGS__);                                                                  \
    }
    switch (count) {
        CALL(1, V(0))
        CALL(2, V(0), V(1))
        CALL(3, V(0), V(1), V(2))
        CALL(4, V(0), V(1), V(2), V(3))
        CALL(5, V(0), V(1), V(2), V(3), V(4))
        CALL(6, V(0), V(1), V(2), V(3), V(4), V(5))
        CALL(7, V(0), V(1), V(2), V(3), V(4), V(5), V(6))
        CALL(8, V(0), V(1), V(2), V(3), V(4), V(5), V(6), V(7))
    }
#undef CALL
#undef V
    return -1; /* unreachable: leaf_infer bounds the count */
}

static FxStatus leaf_eval(EvalCtx *c)
{
    const Node *n = c->node;
    char fname[160];
    leaf_function_name(n, fname, sizeof fname);
    if (leaf_num_libraries == 0)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                               "leaf op '%s' is not implemented by fxcc: to run it, give a shared "
                               "library defining %s with --leaf-lib LIB.so", leaf_op_type(n),
                               fname);
    void *sym = NULL;
    for (int i = 0; i < leaf_num_libraries && !sym; i++)
        sym = dlsym(leaf_libraries[i].handle, fname);
    if (!sym) {
        char libs[1024] = "";
        size_t used = 0;
        for (int i = 0; i < leaf_num_libraries && used < sizeof libs; i++)
            used += (size_t)snprintf(libs + used, sizeof libs - used, "%s%s", i ? ", " : "",
                                     leaf_libraries[i].path);
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n,
                               "no leaf library defines %s for leaf op '%s' (searched %s)", fname,
                               leaf_op_type(n), libs);
    }
    int count = c->num_inputs + c->num_outputs;
    if (count < 1 || count > FX_LEAF_MAX_VALUES)
        return diag_node_error(c->diag, FX_ERR_INVALID, n, "leaf op with %d values", count);
    void *p[FX_LEAF_MAX_VALUES];
    const int64_t *s[FX_LEAF_MAX_VALUES];
    int r[FX_LEAF_MAX_VALUES];
    for (int k = 0; k < count; k++) {
        /* Inputs are passed as const T * in the prototype; the cast only
         * drops the qualifier for the common function type. */
        const Tensor *t = k < c->num_inputs ? c->in[k] : c->out[k - c->num_inputs];
        p[k] = t->data;
        s[k] = t->type.dims;
        r[k] = t->type.rank;
    }
    int status = leaf_call(sym, count, p, s, r);
    if (status != 0)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, n, "%s returned %d", fname, status);
    return FX_OK;
}

/* --- code generation ---------------------------------------------------------- */

char *leaf_prototype(const Node *n)
{
    char fname[160], *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    leaf_function_name(n, fname, sizeof fname);
    int indent = fprintf(f, "int %s(", fname);
    int count = n->num_args + n->num_outputs;
    for (int k = 0; k < count; k++) {
        bool input = k < n->num_args;
        const TensorType *t = input ? node_input_type(n, k) : &n->out_types[k - n->num_args];
        char v = input ? 'x' : 'y';
        int i = input ? k : k - n->num_args;
        fprintf(f, "%*s%s%s *%c%d, const int64_t *%c%d_shape, int %c%d_rank%s", k ? indent : 0, "",
                input ? "const " : "", c_type_name(t->dtype), v, i, v, i, v, i,
                k + 1 < count ? ",\n" : ")");
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static FxStatus leaf_emit(EmitCtx *c)
{
    const Node *n = c->node;
    char fname[160], name[32];
    leaf_function_name(n, fname, sizeof fname);
    int count = c->num_inputs + c->num_outputs;
    char call[4096];
    size_t used = (size_t)snprintf(call, sizeof call, "const int status = %s(", fname);
    for (int k = 0; k < count && used < sizeof call; k++) {
        bool input = k < c->num_inputs;
        const TensorType *t = input ? node_input_type(n, k) : &n->out_types[k - c->num_inputs];
        int i = input ? k : k - c->num_inputs;
        snprintf(name, sizeof name, "%c%d_shape", input ? 'x' : 'y', i);
        emit_int64_array(c, name, t->dims, t->rank);
        used += (size_t)snprintf(call + used, sizeof call - used, "%s%s, %s, %d",
                                 k ? ", " : "", input ? c->in[k] : c->out[i], name, t->rank);
    }
    if (used + 2 >= sizeof call)
        return diag_node_error(c->diag, FX_ERR_UNSUPPORTED, n, "leaf call too long");
    emit_line(c, "%s);", call);
    emit_line(c, "if (status != 0)");
    emit_line(c, "    return status; /* %s refused its data */", fname);
    return FX_OK;
}

static const AttrSpec leaf_attrs[] = {{NULL}};

const OpDef fx_op_Leaf = {
    .name = "Leaf",
    .min_inputs = 0, .max_inputs = -1, .min_outputs = 1, .max_outputs = FX_LEAF_MAX_VALUES,
    .flags = FX_OPF_INTERNAL | FX_OPF_OPAQUE,
    .attrs = leaf_attrs,
    .infer = leaf_infer,
    .eval = leaf_eval,
    .emit = leaf_emit,
};
