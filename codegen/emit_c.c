/*
 * emit_c.c - writes the generated C: NAME.h (the contract), NAME.c (one
 * entry point, one block per node headed by its FX line), the weights, the
 * build files and a copy of the runtime sources.
 *
 * Node blocks are produced first into memory, so that only the buffer
 * variables and weights the code really reads are declared (generated code
 * compiles with -Wall -Wextra -Werror).  Weights up to CG_LARGE_WEIGHT_BYTES
 * are C arrays in NAME.c; larger ones are declared extern here and streamed
 * by weights.c straight to their files (NAME_weights.bin + NAME_weights.S,
 * or NAME_weights.c), never held as text in memory.  Everything is written into a temporary folder and moved
 * into place only when all of it succeeded.  No generated file holds a path
 * beyond the model's base name, so the output does not depend on where the
 * model or the output folder are.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../frontend/frontend.h"
#include "codegen.h"
#include "embedded.h"
#include "main_c.h"

bool cg_valid_name(const char *name)
{
    if (!name || !(isalpha((unsigned char)name[0]) || name[0] == '_'))
        return false;
    for (const char *p = name; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_'))
            return false;
    return strlen(name) < 64;
}

/* Each core's flags: the FPU it has and the float ABI that uses it (the
 * C library linked must be built for the same ABI). */
static const char *const cpu_flags[][2] = {
    {"cortex-m0plus", "-mcpu=cortex-m0plus -mthumb -mfloat-abi=soft"},
    {"cortex-m4", "-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard"},
    {"cortex-m7", "-mcpu=cortex-m7 -mthumb -mfpu=fpv5-d16 -mfloat-abi=hard"},
    {"cortex-m33", "-mcpu=cortex-m33 -mthumb -mfpu=fpv5-sp-d16 -mfloat-abi=hard"},
    {"cortex-m55", "-mcpu=cortex-m55 -mthumb -mfloat-abi=hard"},
};

const char *cg_cpu_flags(const char *cpu)
{
    for (size_t i = 0; cpu && i < sizeof cpu_flags / sizeof cpu_flags[0]; i++)
        if (strcmp(cpu, cpu_flags[i][0]) == 0)
            return cpu_flags[i][1];
    return NULL;
}

/* --- comments ------------------------------------------------------------ */

/* Comment lines end before this column when an argument boundary allows. */
enum { COMMENT_COLUMNS = 100 };

/* Where s may wrap: after ", " between arguments (inside (..) or {..}, not
 * inside a [..] list of numbers), before the opcode and after the "(" that
 * opens a call's arguments.  Returns the offset where the piece starting at `from` ends
 * (the next piece starts there, a separating space skipped). */
static size_t comment_piece_end(const char *s, size_t from, char *stack, int *depth)
{
    for (size_t i = from; s[i]; i++) {
        char ch = s[i];
        if (ch == '(' || ch == '[' || ch == '{') {
            if (*depth < 63)
                stack[(*depth)++] = ch;
            if (ch == '(' && i > 0 && s[i - 1] == ']')
                return i + 1;
        } else if ((ch == ')' || ch == ']' || ch == '}') && *depth > 0) {
            (*depth)--;
        } else if (ch == ',' && s[i + 1] == ' ' && (*depth == 0 || stack[*depth - 1] != '[')) {
            return i + 1;
        } else if (ch == ' ' && *depth == 0 && i > from && s[i - 1] == ']') {
            return i; /* "%x : [num_users=1] | call_function[...](" */
        }
    }
    return strlen(s);
}

/* s as one comment that cannot end early, wrapped at argument boundaries so
 * that no line passes COMMENT_COLUMNS unless one argument alone is that long;
 * continuation lines are indented under the text. */
static void text_comment(EmitText *t, const char *indent, const char *s)
{
    size_t base = strlen(indent), column = base + 3, at = 0;
    char stack[64];
    int depth = 0;
    bool space = false; /* a space separates this piece from the last */
    emit_text_printf(t, "%s/* ", indent);
    while (s[at]) {
        size_t end = comment_piece_end(s, at, stack, &depth);
        size_t len = end - at + space;
        if (at > 0 && column + len > COMMENT_COLUMNS - 3) {
            emit_text_printf(t, "\n%s *     ", indent);
            column = base + 8;
            len -= space;
        } else if (space) {
            emit_text_append(t, " ", 1);
        }
        for (size_t i = at; i < end; i++) {
            if (s[i] == '*' && s[i + 1] == '/')
                emit_text_append(t, "* ", 2); /* the '/' follows as the next char */
            else
                emit_text_append(t, &s[i], 1);
        }
        column += len;
        space = s[end] == ' ';
        at = end + space;
    }
    emit_text_printf(t, " */\n");
}

static const char *file_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The model's name for comments: its base name, never the path it was
 * given by (the output must not depend on the folder it is compiled from). */
static const char *model_label(const CgOptions *o)
{
    return o->source ? file_basename(o->source) : "a model";
}

/* --- identifiers the node blocks use ------------------------------------- */

/* The set of identifiers in a text (comments aside), built in one pass so
 * that asking about each of a large model's values stays linear. */
typedef struct NameSet {
    const char **start; /* into the text; NULL: empty slot */
    size_t *len;
    size_t cap;         /* a power of two, at most half full */
} NameSet;

static size_t name_hash(const char *s, size_t n)
{
    size_t h = 1469598103u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static bool name_slot(const NameSet *set, const char *s, size_t n, size_t *slot)
{
    size_t i = name_hash(s, n) & (set->cap - 1);
    while (set->start[i]) {
        if (set->len[i] == n && memcmp(set->start[i], s, n) == 0) {
            *slot = i;
            return true;
        }
        i = (i + 1) & (set->cap - 1);
    }
    *slot = i;
    return false;
}

static bool name_set_grow(NameSet *set)
{
    NameSet bigger = {.cap = set->cap ? set->cap * 2 : 1024};
    bigger.start = fx_alloc_array(bigger.cap, sizeof *bigger.start);
    bigger.len = fx_alloc_array(bigger.cap, sizeof *bigger.len);
    if (!bigger.start || !bigger.len) {
        free(bigger.start);
        free(bigger.len);
        return false;
    }
    for (size_t i = 0; i < set->cap; i++) {
        size_t slot;
        if (set->start[i] && !name_slot(&bigger, set->start[i], set->len[i], &slot)) {
            bigger.start[slot] = set->start[i];
            bigger.len[slot] = set->len[i];
        }
    }
    free(set->start);
    free(set->len);
    *set = bigger;
    return true;
}

static void name_set_free(NameSet *set)
{
    free(set->start);
    free(set->len);
    *set = (NameSet){0};
}

/* The identifiers of t outside comments; t must outlive the set. */
static bool name_set_build(NameSet *set, const EmitText *t)
{
    size_t count = 0;
    if (!name_set_grow(set))
        return false;
    for (const char *p = t->data ? t->data : ""; *p;) {
        if (p[0] == '/' && p[1] == '*') {
            const char *end = strstr(p + 2, "*/");
            p = end ? end + 2 : p + strlen(p);
            continue;
        }
        if (!(isalpha((unsigned char)*p) || *p == '_')) {
            p++;
            continue;
        }
        const char *q = p;
        while (isalnum((unsigned char)*q) || *q == '_')
            q++;
        size_t slot;
        if (!name_slot(set, p, (size_t)(q - p), &slot)) {
            if (2 * (count + 1) > set->cap) {
                if (!name_set_grow(set))
                    return false;
                name_slot(set, p, (size_t)(q - p), &slot);
            }
            set->start[slot] = p;
            set->len[slot] = (size_t)(q - p);
            count++;
        }
        p = q;
    }
    return true;
}

static bool name_used(const NameSet *set, const char *name)
{
    size_t slot;
    return set->cap && name_slot(set, name, strlen(name), &slot);
}

/* --- the state of one compilation ---------------------------------------- */

typedef struct Gen {
    const Graph *g;
    const CgOptions *o;
    CgPlan *plan;
    Diag *d;
    EmitText body;      /* node blocks */
    NameSet used;   /* identifiers of body, once it is complete */
    /* The weights above CG_LARGE_WEIGHT_BYTES the body reads, in plan
     * order, and how they are written (C or INCBIN, never AUTO). */
    CgLargeWeight *large;
    int num_large;
    size_t large_bytes, blob_bytes;
    CgWeights mode;
    EmitText large_decls; /* their declarations, for NAME.h */
    /* The nodes that have code, in the order of their PROFILE_MARK numbers;
     * NULL for the copies into the outputs, which are timed as one more. */
    const Node **timed;
    int num_timed;
    bool timed_failed;
} Gen;

/* The next PROFILE_MARK number, given to n (NULL: the output copies). */
static int add_timed(Gen *gen, const Node *n)
{
    const Node **grown = fx_realloc_array(gen->timed, (size_t)gen->num_timed + 1, sizeof *grown);
    if (!grown) {
        gen->timed_failed = true;
        return gen->num_timed;
    }
    gen->timed = grown;
    gen->timed[gen->num_timed] = n;
    return gen->num_timed++;
}

static const Tensor *value_tensor(const CgValue *v)
{
    const Node *n = v->node;
    if (n->opcode == FX_OPCODE_GET_ATTR)
        return n->value;
    return n->const_values ? n->const_values[v->index] : NULL;
}

static const TensorType *value_type(const CgValue *v)
{
    return &v->node->out_types[v->index];
}

static void weight_symbol(const Gen *gen, const CgValue *w, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s_w_%s", gen->o->name, w->cname + 2);
}

/* The value whose variable stands for v: an alias of the same element type
 * names the same bytes as its source with the same C type, so it gets no
 * pointer of its own; a Concat's slice has its own. */
static const CgValue *value_named(const CgValue *v)
{
    while (v->kind == CG_ALIAS && !v->slice && value_type(v)->dtype == value_type(v->alias)->dtype)
        v = v->alias;
    return v;
}

/* The C expression a node uses to read value v. */
static void value_expr(const Gen *gen, const CgValue *v, char *buf, size_t cap)
{
    const CgValue *r = cg_root(v);
    if (r->kind == CG_WEIGHT)
        weight_symbol(gen, r, buf, cap);
    else
        snprintf(buf, cap, "%s", value_named(v)->cname);
}

static bool root_writable(const CgValue *v)
{
    CgKind k = cg_root(v)->kind;
    return k == CG_ARENA || k == CG_OUTPUT || k == CG_SCRATCH;
}

/* --- weights -------------------------------------------------------------- */

/* A small weight: a C array in NAME.c, its FX line above it. */
static void write_weight(EmitText *t, const Gen *gen, const CgValue *v)
{
    const Tensor *x = value_tensor(v);
    const TensorType *ty = &x->type;
    char line[4096], sym[200];
    node_format(v->node, line, sizeof line);
    text_comment(t, "", line);
    weight_symbol(gen, v, sym, sizeof sym);
    int64_t n = tensor_numel(x);
    emit_text_printf(t, "static const %s %s[%lld]", c_type_name(ty->dtype), sym, (long long)(n ? n : 1));
    if (tensor_nbytes(x) >= 64)
        emit_text_printf(t, " %s_WEIGHT_ALIGN", gen->o->name);
    if (gen->o->weights_section)
        emit_text_printf(t, " %s_WEIGHT_SECTION", gen->o->name);
    emit_text_printf(t, " = {");
    if (n == 0)
        emit_text_printf(t, "0");
    for (int64_t i = 0; i < n; i++) {
        if (i % 8 == 0)
            emit_text_printf(t, "\n    ");
        if (ty->dtype == FXRT_DTYPE_FLOAT32) {
            char lit[48];
            emit_text_printf(t, "%s,", c_float_literal(((const float *)x->data)[i], lit, sizeof lit));
        } else if (ty->dtype == FXRT_DTYPE_FLOAT64) {
            double f = ((const double *)x->data)[i];
            if (f != f)
                emit_text_printf(t, "NAN,");
            else if (f > 1.7976931348623157e308 || f < -1.7976931348623157e308)
                emit_text_printf(t, f > 0 ? "INFINITY," : "-INFINITY,");
            else
                emit_text_printf(t, "%.17g,", f);
        } else if (ty->dtype == FXRT_DTYPE_UINT64) {
            emit_text_printf(t, "%lluu,", (unsigned long long)((const uint64_t *)x->data)[i]);
        } else {
            int64_t iv = tensor_get_int(x, i);
            if (iv == INT64_MIN)
                emit_text_printf(t, "INT64_MIN,");
            else
                emit_text_printf(t, "%lld,", (long long)iv);
        }
    }
    emit_text_printf(t, "\n};\n\n");
}

/* Sorts the weights the body reads into small ones (written here into src)
 * and large ones (listed in gen, declared extern in src, written later by
 * write_large_weights), and settles the mode and the blob layout. */
static FxStatus plan_weights(Gen *gen, EmitText *src)
{
    const CgPlan *p = gen->plan;
    gen->large = fx_alloc_array((size_t)p->num_values + 1, sizeof *gen->large);
    if (!gen->large)
        return diag_error(gen->d, FX_ERR_NOMEM, "out of memory");
    for (int i = 0; i < p->num_values; i++) {
        const CgValue *v = &p->values[i];
        char sym[200];
        if (v->kind != CG_WEIGHT)
            continue;
        weight_symbol(gen, v, sym, sizeof sym);
        if (!name_used(&gen->used, sym))
            continue;
        const Tensor *x = value_tensor(v);
        if (tensor_nbytes(x) > CG_LARGE_WEIGHT_BYTES) {
            CgLargeWeight *w = &gen->large[gen->num_large++];
            w->tensor = x;
            snprintf(w->symbol, sizeof w->symbol, "%s", sym);
            w->offset = gen->blob_bytes;
            gen->blob_bytes = (gen->blob_bytes + tensor_nbytes(x) + 63) / 64 * 64;
            gen->large_bytes += tensor_nbytes(x);
        } else {
            write_weight(src, gen, v);
        }
    }
    gen->mode = cg_weights_mode(gen->o->weights, gen->large_bytes);
    const char *N = gen->o->name;
    if (gen->num_large)
        emit_text_printf(&gen->large_decls, gen->mode == CG_WEIGHTS_INCBIN
                             ? "/* The weights above %d bytes: raw little-endian bytes in %s_weights.bin,\n"
                               " * embedded by %s_weights.S, each at a 64-byte aligned offset. */\n"
                             : "/* The weights above %d bytes: in %s_weights.c. */\n",
                    (int)CG_LARGE_WEIGHT_BYTES, N, N);
    for (int k = 0; k < gen->num_large; k++) {
        const CgLargeWeight *w = &gen->large[k];
        char shape[256];
        type_format(&w->tensor->type, shape, sizeof shape);
        emit_text_printf(&gen->large_decls, "extern const %s %s[%lld]; /* %s, %zu bytes",
                    c_type_name(w->tensor->type.dtype), w->symbol,
                    (long long)tensor_numel(w->tensor), shape, tensor_nbytes(w->tensor));
        if (gen->mode == CG_WEIGHTS_INCBIN)
            emit_text_printf(&gen->large_decls, " at offset %zu", w->offset);
        emit_text_printf(&gen->large_decls, " */\n");
    }
    if (gen->num_large)
        emit_text_printf(&gen->large_decls, "\n");
    return FX_OK;
}

static FxStatus write_large_weights(const Gen *gen, const char *dir)
{
    if (!gen->num_large)
        return FX_OK;
    char section[200];
    if (gen->o->weights_section)
        snprintf(section, sizeof section, "%s", gen->o->weights_section);
    else
        snprintf(section, sizeof section, ".rodata.%s_weights", gen->o->name);
    CgWeightFiles files = {.name = gen->o->name, .model = model_label(gen->o),
                           .section = section, .place_c = gen->o->weights_section != NULL,
                           .weights = gen->large, .count = gen->num_large,
                           .blob_bytes = gen->blob_bytes};
    return gen->mode == CG_WEIGHTS_INCBIN ? cg_write_weights_incbin(&files, dir, gen->d)
                                          : cg_write_weights_c(&files, dir, gen->d);
}

/* --- the entry point ------------------------------------------------------ */

static void declare_value(EmitText *t, const Gen *gen, const CgValue *v)
{
    const TensorType *ty = value_type(v);
    const char *ct = c_type_name(ty->dtype);
    char shape[256];
    type_format(ty, shape, sizeof shape);
    switch (v->kind) {
    case CG_INPUT:
        emit_text_printf(t, "    const %s *const %s = (const %s *)inputs[%d]; /* %s, input %d */\n", ct,
                    v->cname, ct, v->io, shape, v->io);
        break;
    case CG_OUTPUT:
        emit_text_printf(t, "    %s *const %s = (%s *)outputs[%d]; /* %s, output %d */\n", ct, v->cname,
                    ct, v->io, shape, v->io);
        break;
    case CG_ARENA:
        emit_text_printf(t, "    %s *const %s = (%s *)(a + %zu); /* %s, %zu bytes */\n", ct, v->cname, ct,
                    v->offset, shape, v->bytes);
        break;
    case CG_SCRATCH:
        emit_text_printf(t, "    void *const %s = a + %zu; /* %zu bytes of scratch */\n", v->cname,
                    v->offset, v->bytes);
        break;
    case CG_ALIAS: {
        char src[200];
        if (v->slice) {
            /* From the root's base: the Concat's output is declared later. */
            const CgValue *r = cg_root(v);
            if (r->kind == CG_OUTPUT)
                emit_text_printf(t, "    %s *const %s = (%s *)((unsigned char *)outputs[%d] + %zu); "
                                    "/* %s, slice of %s */\n",
                                 ct, v->cname, ct, r->io, cg_root_offset(v), shape, v->alias->cname);
            else
                emit_text_printf(t, "    %s *const %s = (%s *)(a + %zu); /* %s, slice of %s */\n", ct,
                                 v->cname, ct, r->offset + cg_root_offset(v), shape, v->alias->cname);
            break;
        }
        value_expr(gen, v->alias, src, sizeof src);
        const char *why = v->inplace ? "in-place over" : "view of";
        if (root_writable(v))
            emit_text_printf(t, "    %s *const %s = (%s *)%s; /* %s, %s %s */\n", ct, v->cname, ct, src,
                        shape, why, v->alias->cname);
        else
            emit_text_printf(t, "    const %s *const %s = (const %s *)%s; /* %s, %s %s */\n", ct,
                        v->cname, ct, src, shape, why, v->alias->cname);
        break;
    }
    case CG_WEIGHT:
        break;
    }
}

/* The names called in a block (an identifier before '('), each once and
 * followed by a space; NULL if out of memory.  Keywords (if, for, sizeof)
 * are among them; the report looks names up in its table and skips those. */
static char *called_functions(const char *text)
{
    EmitText calls = {0};
    emit_text_append(&calls, "", 0);
    for (const char *p = text ? text : ""; *p;) {
        if (p[0] == '/' && p[1] == '*') {
            const char *end = strstr(p + 2, "*/");
            p = end ? end + 2 : p + strlen(p);
            continue;
        }
        if (!(isalpha((unsigned char)*p) || *p == '_')) {
            p++;
            continue;
        }
        const char *q = p;
        while (isalnum((unsigned char)*q) || *q == '_')
            q++;
        const char *after = q;
        while (*after == ' ')
            after++;
        if (*after == '(' && calls.data) {
            char word[128];
            int len = (int)(q - p) < 126 ? (int)(q - p) : 126;
            snprintf(word, sizeof word, "%.*s ", len, p);
            /* " name " somewhere, or "name " at the start */
            bool seen = strncmp(calls.data, word, strlen(word)) == 0;
            char spaced[130];
            snprintf(spaced, sizeof spaced, " %s", word);
            seen |= strstr(calls.data, spaced) != NULL;
            if (!seen)
                emit_text_append(&calls, word, strlen(word));
        }
        p = q;
    }
    if (calls.failed) {
        emit_text_free(&calls);
        return NULL;
    }
    return calls.data;
}

static FxStatus emit_node(Gen *gen, const Node *n, int pos)
{
    char line[4096];
    node_format(n, line, sizeof line);
    if (n->opcode == FX_OPCODE_PLACEHOLDER || n->opcode == FX_OPCODE_GET_ATTR ||
        n->opcode == FX_OPCODE_OUTPUT)
        return FX_OK;
    CgValue *v = gen->plan->node_values[pos];
    if (v->kind == CG_WEIGHT)
        return FX_OK; /* a compile-time constant: emitted with the weights */
    emit_text_printf(&gen->body, "\n");
    text_comment(&gen->body, "    ", line);
    if (v->assembled) {
        emit_text_printf(&gen->body, "    /* no code: the inputs of %%%s were written into it */\n",
                         n->name);
        return FX_OK;
    }
    if (v->kind == CG_ALIAS && !v->inplace && !v->slice) {
        char src[200];
        value_expr(gen, v->alias, src, sizeof src);
        emit_text_printf(&gen->body, "    /* no code: %%%s is a view of %s */\n", n->name, src);
        /* Dropout's mask is a real output: all true at inference. */
        for (int k = 1; k < n->num_outputs; k++) {
            char dst[200];
            value_expr(gen, &v[k], dst, sizeof dst);
            emit_text_printf(&gen->body, "    memset(%s, 1, %zu);\n", dst, v[k].bytes);
        }
        return FX_OK;
    }
    int ni = n->num_args, no = n->num_outputs;
    char(*exprs)[200] = fx_alloc_array((size_t)(ni + no) + 1, sizeof *exprs);
    const char **in = fx_alloc_array((size_t)ni + 1, sizeof *in);
    const char **out = fx_alloc_array((size_t)no + 1, sizeof *out);
    const Tensor **vals = fx_alloc_array((size_t)ni + 1, sizeof *vals);
    FxStatus st = FX_ERR_NOMEM;
    if (!exprs || !in || !out || !vals)
        goto done;
    for (int i = 0; i < ni; i++) {
        const CgValue *a = cg_arg_value(gen->plan, n, i);
        if (!a)
            continue;
        value_expr(gen, a, exprs[i], sizeof exprs[i]);
        in[i] = exprs[i];
        vals[i] = value_tensor(cg_root(a));
    }
    for (int k = 0; k < no; k++) {
        value_expr(gen, &v[k], exprs[ni + k], sizeof exprs[ni + k]);
        out[k] = exprs[ni + k];
    }
    const CgValue *scratch = gen->plan->node_scratch[pos];
    EmitCtx c = {.node = n, .num_inputs = ni, .in = in, .in_value = vals, .num_outputs = no,
                 .out = out, .scratch = scratch ? scratch->cname : NULL,
                 .inplace = v->kind == CG_ALIAS && v->inplace && ni > 0 &&
                            cg_arg_value(gen->plan, n, 0) &&
                            cg_root(cg_arg_value(gen->plan, n, 0)) == cg_root(v),
                 .target = gen->o->target,
                 .diag = gen->d};
    st = n->op->emit(&c);
    if (st == FX_OK && c.text.failed)
        st = diag_node_error(gen->d, FX_ERR_NOMEM, n, "out of memory");
    if (st == FX_OK && !(gen->plan->step_calls[pos] = called_functions(c.text.data)))
        st = diag_node_error(gen->d, FX_ERR_NOMEM, n, "out of memory");
    if (st == FX_OK)
        emit_text_printf(&gen->body, "    PROFILE_MARK(%d);\n    {\n%s    }\n", add_timed(gen, n),
                         c.text.data ? c.text.data : "");
    emit_text_free(&c.text);
done:
    if (st == FX_ERR_NOMEM && (!exprs || !in || !out || !vals))
        diag_node_error(gen->d, st, n, "out of memory");
    free(exprs);
    free(in);
    free(out);
    free(vals);
    return st;
}

static void write_shape_comment(EmitText *t, const char *what, int k, const char *onnx_name,
                                const TensorType *ty)
{
    char shape[256];
    emit_text_printf(t, " * %s %d '%s': %s\n", what, k, onnx_name, type_format(ty, shape, sizeof shape));
}

/* The header's declarations of the leaf ops' functions, one per op type. */
static FxStatus write_leaf_prototypes(EmitText *t, const Gen *gen)
{
    const char *N = gen->o->name;
    bool first = true;
    for (const Node *n = gen->g->root.next; n != &gen->g->root; n = n->next) {
        if (n->op != &fx_op_Leaf)
            continue;
        char fn[160], other_fn[160];
        leaf_function_name(n, fn, sizeof fn);
        const Node *m = gen->g->root.next;
        while (m != n && (m->op != &fx_op_Leaf ||
                          strcmp(leaf_function_name(m, other_fn, sizeof other_fn), fn) != 0))
            m = m->next;
        char *proto = leaf_prototype(n), *other = m != n ? leaf_prototype(m) : NULL;
        FxStatus st = !proto || (m != n && !other)
                          ? diag_error(gen->d, FX_ERR_NOMEM, "out of memory")
                          : m != n && strcmp(proto, other) != 0
                                ? diag_node_error(gen->d, FX_ERR_UNSUPPORTED, n,
                                                  "leaf op '%s' reads or returns other element "
                                                  "types or ranks than at node %s, but %s has "
                                                  "one prototype", node_attr_string(n, "leaf_op", ""),
                                                  m->name, fn)
                                : FX_OK;
        if (st == FX_OK && m == n) {
            if (first)
                emit_text_printf(t, "/* Leaf ops: fxcc does not implement these, so %s_run calls a\n"
                               " * function you define (fxcc compile --leaf-source FILE.c adds the\n"
                               " * file to this folder's build).  It receives every input, then\n"
                               " * every output, as a buffer of the element type shown, its shape\n"
                               " * and its rank; it fills the outputs and returns 0, or returns\n"
                               " * non-zero to refuse its data, which %s_run then returns.  The\n"
                               " * node's ONNX attributes are not passed: one function serves every\n"
                               " * node of an op type. */\n", N, N);
            first = false;
            const char *domain = node_attr_string(n, "leaf_domain", "");
            emit_text_printf(t, "/* node %s: op '%s' of domain '%s' */\n%s;\n\n", n->name,
                        node_attr_string(n, "leaf_op", ""), *domain ? domain : "ai.onnx", proto);
        }
        free(proto);
        free(other);
        if (st != FX_OK)
            return st;
    }
    return FX_OK;
}

static FxStatus write_header(EmitText *t, const Gen *gen, const Node *out)
{
    const char *N = gen->o->name;
    int ni = graph_num_placeholders(gen->g), no = out->num_args;
    emit_text_printf(t, "/*\n * %s.h - generated by fxcc from %s.  Do not edit.\n *\n", N,
                model_label(gen->o));
    emit_text_printf(t, " * Call %s_run with one buffer per input and per output, in the element type\n"
                   " * given below, and an arena of %s_ARENA_BYTES bytes aligned to 64 bytes.\n"
                   " * It returns 0 on success, non-zero if a kernel refused its data.\n *\n",
                N, N);
    for (int k = 0; k < ni; k++) {
        const Node *p = graph_placeholder(gen->g, k);
        write_shape_comment(t, "input", k, p->target, &p->out_types[0]);
    }
    for (int k = 0; k < no; k++)
        write_shape_comment(t, "output", k,
                            out->onnx_outputs && out->onnx_outputs[k] ? out->onnx_outputs[k] : "",
                            node_input_type(out, k));
    emit_text_printf(t, " */\n#ifndef %s_H\n#define %s_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n",
                N, N);
    emit_text_printf(t, "#define %s_ARENA_BYTES %zu\n#define %s_NUM_INPUTS %d\n#define %s_NUM_OUTPUTS %d\n\n",
                N, gen->plan->arena_bytes, N, ni, N, no);
    /* The arena is the caller's; the header says where it goes. */
    if (gen->o->arena_section)
        emit_text_printf(t, "/* --arena-section: declare the arena with %s_ARENA_PLACEMENT to put it in\n"
                            " * section %s (GCC and Clang; other compilers: where it would go). */\n"
                            "#if defined(__GNUC__)\n"
                            "#define %s_ARENA_PLACEMENT __attribute__((section(\"%s\")))\n"
                            "#else\n#define %s_ARENA_PLACEMENT\n#endif\n\n",
                         N, gen->o->arena_section, N, gen->o->arena_section, N);
    else
        emit_text_printf(t, "/* Where the caller's arena goes (fxcc compile --arena-section): nowhere\n"
                            " * special. */\n#define %s_ARENA_PLACEMENT\n\n", N);
    /* Firmware declares its buffers static, so the sizes must also be constants. */
    emit_text_printf(t, "/* element counts as constants, for static buffers; %s_OUTPUTS_BYTES sums\n"
                     " * every output's bytes */\n", N);
    size_t outputs_bytes = 0;
    for (int k = 0; k < ni; k++)
        emit_text_printf(t, "#define %s_INPUT%d_SIZE %lld\n", N, k,
                         (long long)type_numel(&graph_placeholder(gen->g, k)->out_types[0]));
    for (int k = 0; k < no; k++) {
        emit_text_printf(t, "#define %s_OUTPUT%d_SIZE %lld\n", N, k,
                         (long long)type_numel(node_input_type(out, k)));
        outputs_bytes += type_nbytes(node_input_type(out, k));
    }
    emit_text_printf(t, "#define %s_OUTPUTS_BYTES %zu\n\n", N, outputs_bytes);
    emit_text_printf(t, "/* element counts */\nextern const size_t %s_input_sizes[%d];\n"
                   "extern const size_t %s_output_sizes[%d];\n",
                N, ni ? ni : 1, N, no ? no : 1);
    emit_text_printf(t, "/* element types, ONNX TensorProto numbering (1 float32, 7 int64, ...) */\n"
                   "extern const int %s_input_dtypes[%d];\nextern const int %s_output_dtypes[%d];\n",
                N, ni ? ni : 1, N, no ? no : 1);
    emit_text_printf(t, "extern const int %s_input_ranks[%d];\nextern const int %s_output_ranks[%d];\n", N,
                ni ? ni : 1, N, no ? no : 1);
    emit_text_printf(t, "extern const int64_t *const %s_input_shapes[%d];\n"
                   "extern const int64_t *const %s_output_shapes[%d];\n",
                N, ni ? ni : 1, N, no ? no : 1);
    emit_text_printf(t, "extern const char *const %s_input_names[%d];\n"
                   "extern const char *const %s_output_names[%d];\n\n",
                N, ni ? ni : 1, N, no ? no : 1);
    if (gen->large_decls.data)
        emit_text_printf(t, "%s", gen->large_decls.data);
    emit_text_printf(t, "/* Profiling: when %s_node_hook is set, %s_run calls it with k before the k-th\n"
                     " * of its %s_NUM_NODES timed steps (the nodes with code, in order, then the copies\n"
                     " * into the outputs if any) and with %s_NUM_NODES at the end.  main --profile\n"
                     " * uses it; firmware can read a cycle counter in it. */\n"
                     "#define %s_NUM_NODES %d\nextern void (*%s_node_hook)(int node);\n\n",
                     N, N, N, N, N, gen->num_timed, N);
    FxStatus st = write_leaf_prototypes(t, gen);
    emit_text_printf(t, "int %s_run(const void *const *inputs, void *const *outputs, void *arena);\n\n"
                   "#endif\n", N);
    return st;
}

static void write_io_tables(EmitText *t, const Gen *gen, const Node *out)
{
    const char *N = gen->o->name;
    int ni = graph_num_placeholders(gen->g), no = out->num_args;
    for (int side = 0; side < 2; side++) {
        const char *s = side ? "output" : "input";
        int count = side ? no : ni;
        for (int k = 0; k < count; k++) {
            const TensorType *ty = side ? node_input_type(out, k)
                                        : &graph_placeholder(gen->g, k)->out_types[0];
            emit_text_printf(t, "static const int64_t %s_%s%d_shape[%d] = {", N, s, k,
                        ty->rank ? ty->rank : 1);
            for (int i = 0; i < ty->rank; i++)
                emit_text_printf(t, "%s%lld", i ? ", " : "", (long long)ty->dims[i]);
            emit_text_printf(t, "%s};\n", ty->rank ? "" : "0");
        }
        const char *fields[] = {"sizes", "dtypes", "ranks", "shapes", "names"};
        const char *types[] = {"const size_t", "const int", "const int", "const int64_t *const",
                               "const char *const"};
        for (int f = 0; f < 5; f++) {
            emit_text_printf(t, "%s %s_%s_%s[%d] = {", types[f], N, s, fields[f], count ? count : 1);
            for (int k = 0; k < count; k++) {
                const TensorType *ty = side ? node_input_type(out, k)
                                            : &graph_placeholder(gen->g, k)->out_types[0];
                const char *name = side ? (out->onnx_outputs && out->onnx_outputs[k]
                                               ? out->onnx_outputs[k] : "")
                                        : graph_placeholder(gen->g, k)->target;
                const char *sep = k ? ", " : "";
                switch (f) {
                case 0: emit_text_printf(t, "%s%lld", sep, (long long)type_numel(ty)); break;
                case 1: emit_text_printf(t, "%s%d", sep, (int)ty->dtype); break;
                case 2: emit_text_printf(t, "%s%d", sep, ty->rank); break;
                case 3: emit_text_printf(t, "%s%s_%s%d_shape", sep, N, s, k); break;
                case 4:
                    emit_text_printf(t, "%s\"", sep);
                    for (const char *p = name; *p; p++)
                        emit_text_printf(t, isalnum((unsigned char)*p) || strchr("_./:- ", *p) ? "%c"
                                                                                         : "?",
                                    *p);
                    emit_text_printf(t, "\"");
                    break;
                }
            }
            emit_text_printf(t, "%s};\n", count ? "" : "0");
        }
    }
    emit_text_printf(t, "\n");
}

/* --- shared constants ------------------------------------------------------ */

/* Emitters declare their kernels' parameters as `static const` objects
 * inside the node's block.  Nodes of the same shape (DS-CNN's four
 * depthwise layers, its four pointwise ones) then write byte-identical
 * objects, which the compiler keeps apart (each has its own address); on a
 * microcontroller every copy is flash.  So a declaration whose text occurs
 * in two or more blocks moves to file scope once, named NAME_shared_LOCAL_K,
 * and each block reads that object instead.  Only declarations that stand
 * alone move: their initializers hold numbers, designators, FXRT_ enum
 * names or shared objects moved before them, never a block's own
 * variables nor a weight (the weights a body names are the ones
 * declared). */

/* One `static const` declaration at a block's top level. */
typedef struct ConstDecl {
    size_t start, end;   /* the statement in the body: from its indent to past its newline */
    size_t name_at, name_len; /* the declared identifier */
    size_t block_end;    /* where its node's block closes */
    int group;           /* index of the first declaration with the same text */
    int count;           /* a group's first: how many share its text; once
                          * moved, the shared object's number */
    bool movable;
} ConstDecl;

static bool ident_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_';
}

/* The statement's text from the type on, without the name: two
 * declarations are the same object when these agree. */
static bool const_decl_same(const char *s, const ConstDecl *a, const ConstDecl *b)
{
    size_t a_head = a->name_at - a->start, b_head = b->name_at - b->start;
    size_t a_tail = a->end - (a->name_at + a->name_len), b_tail = b->end - (b->name_at + b->name_len);
    return a_head == b_head && a_tail == b_tail &&
           memcmp(s + a->start, s + b->start, a_head) == 0 &&
           memcmp(s + a->name_at + a->name_len, s + b->name_at + b->name_len, a_tail) == 0;
}

/* Whether every identifier of s[from, to) outside comments may be read at
 * file scope: a designator (after '.'), part of a number, an FXRT_ name or
 * a shared constant (NAME_shared_). */
static bool initializer_standalone(const char *s, size_t from, size_t to, const char *N)
{
    size_t nlen = strlen(N);
    for (size_t i = from; i < to;) {
        if (s[i] == '/' && s[i + 1] == '*') {
            const char *end = strstr(s + i + 2, "*/");
            i = end ? (size_t)(end - s) + 2 : to;
            continue;
        }
        if (isdigit((unsigned char)s[i])) { /* 0x1.8p+3f, 1e-05f, 64u */
            while (i < to && (ident_char(s[i]) || s[i] == '.' ||
                              ((s[i] == '+' || s[i] == '-') && strchr("eEpP", s[i - 1]))))
                i++;
            continue;
        }
        if (!(isalpha((unsigned char)s[i]) || s[i] == '_')) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < to && ident_char(s[j]))
            j++;
        size_t k = i;
        while (k > from && s[k - 1] == ' ')
            k--;
        bool designator = k > from && s[k - 1] == '.';
        bool fxrt = j - i > 5 && memcmp(s + i, "FXRT_", 5) == 0;
        bool shared = j - i > nlen + 8 && memcmp(s + i, N, nlen) == 0 &&
                      memcmp(s + i + nlen, "_shared_", 8) == 0;
        if (!designator && !fxrt && !shared)
            return false;
        i = j;
    }
    return true;
}

/* The declarations `        static const TYPE NAME... = ...;` of the
 * body's blocks (statements at a block's top level are indented 8 spaces;
 * the block closes at a line of 4 spaces and '}'). */
static ConstDecl *find_const_decls(const char *s, const char *N, int *count)
{
    static const char head[] = "\n        static const ";
    ConstDecl *decls = NULL;
    int n = 0;
    for (const char *p = strstr(s, head); p; p = strstr(p + 1, head)) {
        size_t start = (size_t)(p - s) + 1;
        const char *semi = strstr(s + start, ";\n");
        const char *eq = strstr(s + start, " = ");
        const char *close = strstr(s + start, "\n    }\n");
        if (!semi || !close)
            break;
        if (!eq || eq > semi)
            continue; /* no initializer: nothing to share */
        /* The name: the last identifier before " = " (or before its "[N]"). */
        const char *q = eq;
        if (q[-1] == ']')
            while (q > s + start && *q != '[')
                q--;
        const char *name_end = q;
        while (q > s + start && ident_char(q[-1]))
            q--;
        ConstDecl *grown = fx_realloc_array(decls, (size_t)n + 1, sizeof *decls);
        if (!grown) {
            free(decls);
            *count = -1;
            return NULL;
        }
        decls = grown;
        decls[n] = (ConstDecl){.start = start, .end = (size_t)(semi - s) + 2,
                               .name_at = (size_t)(q - s), .name_len = (size_t)(name_end - q),
                               .block_end = (size_t)(close - s) + 1, .group = n};
        decls[n].movable = decls[n].name_len > 0 &&
                           initializer_standalone(s, (size_t)(eq - s), decls[n].end, N);
        n++;
    }
    *count = n;
    return decls;
}

/* Moves the declarations that two or more blocks share out of gen->body
 * into *shared, renaming their uses.  One declaration per block moves in a
 * round (its renaming runs to the block's end, so a second one's offsets
 * would be stale); rounds repeat until nothing moves, which also lets an
 * object that reads shared ones (a table of pointers) move later. */
static FxStatus hoist_shared_constants(Gen *gen, EmitText *shared)
{
    const char *N = gen->o->name;
    int num_shared = 0;
    for (;;) {
        const char *s = gen->body.data ? gen->body.data : "";
        int n;
        ConstDecl *d = find_const_decls(s, N, &n);
        if (n < 0)
            return diag_error(gen->d, FX_ERR_NOMEM, "out of memory writing C");
        for (int i = 0; i < n; i++)
            for (int j = 0; j < i && d[i].movable; j++)
                if (d[j].movable && d[j].group == j && const_decl_same(s, &d[i], &d[j])) {
                    d[i].group = j;
                    break;
                }
        for (int i = 0; i < n; i++)
            d[d[i].group].count += d[i].movable;
        /* This round's: shared, and the first such in its block. */
        size_t block_end = 0;
        for (int i = 0; i < n; i++) {
            d[i].movable = d[i].movable && d[d[i].group].count >= 2 && d[i].start >= block_end;
            if (d[i].movable)
                block_end = d[i].block_end;
        }
        EmitText out = {0};
        size_t at = 0;
        bool moved = false;
        for (int i = 0; i < n; i++) {
            if (!d[i].movable)
                continue;
            moved = true;
            /* The group's first moved member writes the object; the id
             * goes into its count field, no longer needed. */
            int lead = i;
            for (int j = d[i].group; j < i; j++)
                if (d[j].movable && const_decl_same(s, &d[j], &d[i])) {
                    lead = j;
                    break;
                }
            if (lead == i)
                d[i].count = num_shared++;
            char shared_name[200];
            /* Named after the first's local name: the others may call the
             * same object otherwise. */
            snprintf(shared_name, sizeof shared_name, "%s_shared_%.*s%d", N, (int)d[lead].name_len,
                     s + d[lead].name_at, d[lead].count);
            if (lead == i) {
                /* At file scope: the block's 8 columns of indentation off
                 * every line. */
                emit_text_append(shared, s + d[i].start + 8, d[i].name_at - d[i].start - 8);
                emit_text_printf(shared, "%s", shared_name);
                for (size_t k = d[i].name_at + d[i].name_len; k < d[i].end;) {
                    const char *nl = memchr(s + k, '\n', d[i].end - k);
                    size_t line_end = nl ? (size_t)(nl - s) + 1 : d[i].end;
                    emit_text_append(shared, s + k, line_end - k);
                    for (k = line_end; k < d[i].end && k < line_end + 8 && s[k] == ' '; k++)
                        ;
                }
            }
            emit_text_append(&out, s + at, d[i].start - at);
            /* Rename in the rest of the block, outside comments and not
             * after '.' or "->" (a member of that name is another thing). */
            const char *name = s + d[i].name_at;
            size_t len = d[i].name_len, from = d[i].end;
            for (size_t k = from; k < d[i].block_end;) {
                if (s[k] == '/' && s[k + 1] == '*') {
                    const char *end = strstr(s + k + 2, "*/");
                    k = end ? (size_t)(end - s) + 2 : d[i].block_end;
                    continue;
                }
                if (!ident_char(s[k])) {
                    k++;
                    continue;
                }
                size_t e = k;
                while (ident_char(s[e]))
                    e++;
                bool member = s[k - 1] == '.' || (s[k - 1] == '>' && s[k - 2] == '-');
                if (e - k == len && memcmp(s + k, name, len) == 0 && !member) {
                    emit_text_append(&out, s + from, k - from);
                    emit_text_printf(&out, "%s", shared_name);
                    from = e;
                }
                k = e;
            }
            at = from;
        }
        emit_text_append(&out, s + at, strlen(s + at));
        free(d);
        if (out.failed || shared->failed) {
            emit_text_free(&out);
            return diag_error(gen->d, FX_ERR_NOMEM, "out of memory writing C");
        }
        if (!moved) {
            emit_text_free(&out);
            return FX_OK;
        }
        emit_text_free(&gen->body);
        gen->body = out;
    }
}

static FxStatus write_source(Gen *gen, EmitText *src)
{
    const CgPlan *p = gen->plan;
    const char *N = gen->o->name;
    Node *out = graph_output_node(gen->g);
    for (int pos = 0; pos < p->num_steps; pos++) {
        FxStatus st = emit_node(gen, p->order[pos], pos);
        if (st != FX_OK)
            return st;
    }
    if (p->num_copies)
        emit_text_printf(&gen->body, "\n    PROFILE_MARK(%d); /* the copies into the outputs */\n",
                         add_timed(gen, NULL));
    for (int c = 0; c < p->num_copies; c++) {
        char expr[200];
        value_expr(gen, p->copies[c].src, expr, sizeof expr);
        emit_text_printf(&gen->body, "\n    /* output %d is %s: copied */\n", p->copies[c].output,
                    p->copies[c].src->cname);
        emit_text_printf(&gen->body, "    memcpy(outputs[%d], %s, %zu);\n", p->copies[c].output, expr,
                    p->copies[c].src->bytes);
    }
    emit_text_printf(&gen->body, "\n    PROFILE_MARK(%s_NUM_NODES);\n", N);
    if (gen->body.failed || gen->timed_failed)
        return diag_error(gen->d, FX_ERR_NOMEM, "out of memory writing C");
    EmitText shared = {0};
    FxStatus st = hoist_shared_constants(gen, &shared);
    if (st == FX_OK && !name_set_build(&gen->used, &gen->body))
        st = diag_error(gen->d, FX_ERR_NOMEM, "out of memory writing C");
    if (st != FX_OK) {
        emit_text_free(&shared);
        return st;
    }

    emit_text_printf(src, "/*\n * %s.c - generated by fxcc from %s.  Do not edit.\n *\n"
                     " * Memory plan: arena %zu bytes (lower bound %zu, naive %zu); %d in-place,\n"
                     " * %d views aliased.  Each block below is one node; its comment is the\n"
                     " * node's line in fxcc's FX-style graph.\n */\n",
                N, model_label(gen->o), p->arena_bytes, p->lower_bound, p->naive_bytes,
                p->inplace_count, p->alias_count);
    emit_text_printf(src, "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n\n"
                     "#include \"%s.h\"\n#include \"fxrt.h\"\n#include \"fxrt_math.h\"\n\n", N);
    write_io_tables(src, gen, out);
    emit_text_printf(src, "void (*%s_node_hook)(int node);\n\n"
                     "/* Node k starts (k = %s_NUM_NODES: the run ends).  A branch on a pointer:\n"
                     " * nothing else when no caller times the nodes. */\n"
                     "#define PROFILE_MARK(k) do { if (%s_node_hook) %s_node_hook(k); } while (0)\n\n",
                     N, N, N, N);
    char macros[2048];
    cg_write_weight_macros(macros, sizeof macros, N, gen->o->weights_section);
    emit_text_printf(src, "%s", macros);
    st = plan_weights(gen, src);
    if (st == FX_OK && shared.data)
        emit_text_printf(src, "/* Kernel parameters that several nodes share (identical objects, kept\n"
                              " * once). */\n%s", shared.data);
    emit_text_free(&shared);
    if (st != FX_OK)
        return st;
    emit_text_printf(src, "\nint %s_run(const void *const *inputs, void *const *outputs, void *arena)\n{\n",
                N);
    emit_text_printf(src, "    unsigned char *const a = (unsigned char *)arena;\n");
    /* Declare what the blocks read, plus what those aliases are made from;
     * aliases come after their sources, so one backward sweep suffices. */
    bool *used = fx_alloc_array((size_t)p->num_values + 1, sizeof *used);
    if (!used)
        return diag_error(gen->d, FX_ERR_NOMEM, "out of memory");
    for (int i = p->num_values - 1; i >= 0; i--) {
        const CgValue *v = &p->values[i];
        used[i] |= v->kind != CG_WEIGHT && name_used(&gen->used, v->cname);
        if (used[i] && v->kind == CG_ALIAS && !v->slice)
            used[value_named(v->alias) - p->values] = true;
    }
    for (int i = 0; i < p->num_values; i++)
        if (used[i] && p->values[i].kind != CG_WEIGHT)
            declare_value(src, gen, &p->values[i]);
    free(used);
    emit_text_printf(src, "    (void)a;\n    (void)inputs;\n    (void)outputs;\n");
    emit_text_append(src, gen->body.data ? gen->body.data : "", gen->body.len);
    emit_text_printf(src, "    return 0;\n}\n");
    return src->failed ? diag_error(gen->d, FX_ERR_NOMEM, "out of memory writing C") : FX_OK;
}

/* --- build files ---------------------------------------------------------- */

static void write_cmake(EmitText *t, const Gen *gen)
{
    const CgOptions *o = gen->o;
    const char *N = o->name;
    bool incbin = gen->num_large && gen->mode == CG_WEIGHTS_INCBIN;
    emit_text_printf(t, "# Generated by fxcc: builds %s as a static library%s.\n", N,
                o->emit_main ? " and `main`, a command-line runner" : "");
    emit_text_printf(t, "cmake_minimum_required(VERSION 3.13)\nproject(%s C%s)\n\n", N,
                incbin ? " ASM" : "");
    emit_text_printf(t, "set(CMAKE_C_STANDARD 99)\nset(CMAKE_C_STANDARD_REQUIRED ON)\n"
                   "if(NOT CMAKE_BUILD_TYPE)\n  set(CMAKE_BUILD_TYPE Release)\nendif()\n");
    if (o->runtime_shared)
        emit_text_printf(t, "# --runtime shared: the installed runtime (cmake --install of fxcc)\n"
                            "find_package(fxcc CONFIG REQUIRED)\n"
                            "add_library(%s STATIC %s.c)\n", N, N);
    else
        emit_text_printf(t, "file(GLOB FXRT_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fxrt/*.c)\n"
                            "add_library(%s STATIC %s.c ${FXRT_SOURCES})\n", N, N);
    if (gen->num_large && !incbin)
        emit_text_printf(t, "target_sources(%s PRIVATE %s_weights.c)\n", N, N);
    if (incbin)
        emit_text_printf(t, "# the weights: %s_weights.S embeds %s_weights.bin (.incbin finds it\n"
                       "# through the include path below)\n"
                       "target_sources(%s PRIVATE %s_weights.S)\n"
                       "set_source_files_properties(%s_weights.S PROPERTIES OBJECT_DEPENDS\n"
                       "  ${CMAKE_CURRENT_SOURCE_DIR}/%s_weights.bin)\n",
                    N, N, N, N, N, N);
    for (int k = 0; k < o->num_leaf_sources; k++)
        emit_text_printf(t, "target_sources(%s PRIVATE %s) # leaf ops\n", N,
                    file_basename(o->leaf_sources[k]));
    emit_text_printf(t, "target_include_directories(%s PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}%s)\n", N,
                     o->runtime_shared ? "" : " ${CMAKE_CURRENT_SOURCE_DIR}/fxrt");
    emit_text_printf(t, "target_compile_options(%s PRIVATE -Wall -Wextra)\n", N);
    if (o->cpu)
        emit_text_printf(t, "# --cpu %s: the core's flags, used when cross-compiling (a toolchain file\n"
                            "# for arm-none-eabi-gcc); link with the same flags.\n"
                            "set(%s_ARCH_FLAGS %s)\nif(CMAKE_CROSSCOMPILING)\n"
                            "  target_compile_options(%s PUBLIC ${%s_ARCH_FLAGS})\nendif()\n",
                         o->cpu, N, cg_cpu_flags(o->cpu), N, N);
    emit_text_printf(t, "find_library(MATH_LIBRARY m)\nif(MATH_LIBRARY)\n"
                   "  target_link_libraries(%s PUBLIC ${MATH_LIBRARY})\nendif()\n", N);
    if (o->runtime_shared)
        emit_text_printf(t, "target_link_libraries(%s PUBLIC fxcc::runtime)\n", N);
    else if (o->target == FX_TARGET_HOST)
        emit_text_printf(t, "# host target: GEMM through OpenBLAS\nfind_package(PkgConfig REQUIRED)\n"
                       "pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)\n"
                       "target_compile_definitions(%s PRIVATE FXRT_USE_CBLAS)\n"
                       "target_link_libraries(%s PUBLIC PkgConfig::OPENBLAS)\n", N, N);
    if (o->emit_main)
        emit_text_printf(t, "\nadd_executable(main main.c fxio.c %s_profile.c)\n"
                         "target_link_libraries(main PRIVATE %s)\n", N, N);
}

static void write_makefile(EmitText *t, const Gen *gen)
{
    const CgOptions *o = gen->o;
    const char *N = o->name;
    bool incbin = gen->num_large && gen->mode == CG_WEIGHTS_INCBIN;
    emit_text_printf(t, "# Generated by fxcc: include from a Makefile, with %s_DIR set to this folder.\n", N);
    if (incbin)
        emit_text_printf(t, "# %s_SRCS holds %s_weights.S: assemble it with $(CC) and %s_CFLAGS\n"
                       "# (its -I$(%s_DIR) lets .incbin find %s_weights.bin).\n",
                    N, N, N, N, N);
    emit_text_printf(t, "%s_DIR ?= .\n", N);
    if (o->runtime_shared)
        emit_text_printf(t, "%s_SRCS := $(%s_DIR)/%s.c\n", N, N, N);
    else
        emit_text_printf(t, "%s_SRCS := $(%s_DIR)/%s.c $(wildcard $(%s_DIR)/fxrt/*.c)\n", N, N, N, N);
    if (gen->num_large)
        emit_text_printf(t, "%s_SRCS += $(%s_DIR)/%s_weights.%s\n", N, N, N, incbin ? "S" : "c");
    for (int k = 0; k < o->num_leaf_sources; k++)
        emit_text_printf(t, "%s_SRCS += $(%s_DIR)/%s\n", N, N, file_basename(o->leaf_sources[k]));
    if (o->runtime_shared)
        emit_text_printf(t, "# --runtime shared: the installed runtime, found by pkg-config\n"
                            "%s_CFLAGS := -std=c99 -I$(%s_DIR) $(shell pkg-config --cflags fxcc-runtime)\n"
                            "%s_LDLIBS := $(shell pkg-config --libs fxcc-runtime)\n", N, N, N);
    else if (o->target == FX_TARGET_HOST)
        emit_text_printf(t, "%s_CFLAGS := -std=c99 -I$(%s_DIR) -I$(%s_DIR)/fxrt -DFXRT_USE_CBLAS "
                       "$(shell pkg-config --cflags openblas)\n"
                       "%s_LDLIBS := $(shell pkg-config --libs openblas) -lm\n", N, N, N, N);
    else
        emit_text_printf(t, "%s_CFLAGS := -std=c99 -I$(%s_DIR) -I$(%s_DIR)/fxrt\n%s_LDLIBS := -lm\n", N,
                    N, N, N);
    if (o->cpu)
        emit_text_printf(t, "# --cpu %s: arm-none-eabi-gcc's flags for the core, for compiling and\n"
                            "# linking (they choose the float ABI the C library must match)\n"
                            "%s_ARCH_FLAGS := %s\n", o->cpu, N, cg_cpu_flags(o->cpu));
}

/* fxrt/fxrt_config.h for --target cortex-m: the small kernels, and the
 * activations of the graph's epilogues only, so that the others' code
 * (tanhf, GELU's polynomial, the sigmoids) is not linked. */
static void write_runtime_config(EmitText *t, const Gen *gen)
{
    unsigned mask = 1u << FXRT_ACT_NONE;
    for (const Node *n = gen->g->root.next; n != &gen->g->root; n = n->next) {
        FxrtEpilogue e;
        Diag quiet;
        diag_init(&quiet);
        if (node_attr_string(n, "activation", NULL) && fused_nn_node_epilogue(n, &quiet, &e) == FX_OK)
            mask |= 1u << e.activation;
        diag_free(&quiet);
    }
    emit_text_printf(t, "/* fxrt_config.h - written by fxcc compile --target cortex-m for %s:\n"
                        " * the small kernels, and only the activations its epilogues use. */\n"
                        "#ifndef FXRT_CONFIG_H\n#define FXRT_CONFIG_H\n\n"
                        "#define FXRT_SMALL_KERNELS 1\n#define FXRT_ACTIVATIONS 0x%xu\n"
                        "#define FXRT_ACTIVATION_BUILT(act) ((FXRT_ACTIVATIONS >> (act)) & 1u)\n\n"
                        "#endif\n", gen->o->name, mask);
}

/* fxrt/fxrt_names.h: every extern function the runtime's headers declare
 * (a line at file scope: a type, then fxrt_NAME and '(') renamed
 * PREFIX_fxrt_NAME, so that the runtime copies of two models link into one
 * image.  Static and inline helpers keep their names: they do not reach
 * the linker. */
static bool write_runtime_names(EmitText *t, const char *prefix)
{
    EmitText seen = {0};
    emit_text_append(&seen, " ", 1);
    emit_text_printf(t, "/* fxrt_names.h - written by fxcc compile --name %s: the runtime's\n"
                        " * functions under %s_fxrt_ link names, so that another model's runtime\n"
                        " * can be linked beside this one. */\n"
                        "#ifndef FXRT_NAMES_H\n#define FXRT_NAMES_H\n\n", prefix, prefix);
    for (int i = 0; i < fxcc_embedded_count; i++) {
        const char *file = fxcc_embedded_names[i];
        size_t flen = strlen(file);
        if (strncmp(file, "fxrt", 4) != 0 || flen < 2 || strcmp(file + flen - 2, ".h") != 0)
            continue;
        const char *text = (const char *)fxcc_embedded_data[i], *end = text + fxcc_embedded_sizes[i];
        for (const char *line = text; line < end;) {
            const char *eol = memchr(line, '\n', (size_t)(end - line));
            if (!eol)
                eol = end;
            bool declaration = isalpha((unsigned char)line[0]) &&
                               strncmp(line, "static", 6) != 0 && strncmp(line, "typedef", 7) != 0;
            for (const char *p = line; declaration && p + 5 < eol; p++) {
                if (strncmp(p, "fxrt_", 5) != 0 || (p > line && (isalnum((unsigned char)p[-1]) ||
                                                                 p[-1] == '_')))
                    continue;
                const char *q = p;
                while (q < eol && (isalnum((unsigned char)*q) || *q == '_'))
                    q++;
                if (q < eol && *q == '(' && q - p < 100) {
                    char word[104];
                    snprintf(word, sizeof word, " %.*s ", (int)(q - p), p);
                    if (seen.data && !strstr(seen.data, word)) {
                        emit_text_append(&seen, word + 1, strlen(word) - 1);
                        emit_text_printf(t, "#define %.*s %s_%.*s\n", (int)(q - p), p, prefix,
                                         (int)(q - p), p);
                    }
                }
                break;
            }
            line = eol + 1;
        }
    }
    emit_text_printf(t, "\n#endif\n");
    bool ok = !seen.failed;
    emit_text_free(&seen);
    return ok && !t->failed;
}

/* --- files ---------------------------------------------------------------- */

/* The folder a compile writes into before it is published under its real
 * name, and the files written there, by path relative to it.  Publishing and
 * cleaning up walk this list instead of reading the folder: opendir
 * allocates, and a compile that has succeeded must not then fail for want of
 * memory, or leave a half-moved folder or the staging folder behind. */
enum { STAGED_NAME_MAX = 320 };
typedef struct Staging {
    char dir[4200];
    char (*files)[STAGED_NAME_MAX];
    int count, cap;
    bool created, published_whole;
} Staging;

static void remove_tree(const char *dir)
{
    DIR *dp = opendir(dir);
    if (dp) {
        struct dirent *e;
        while ((e = readdir(dp))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            struct stat sb;
            if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
                remove_tree(path);
            else
                unlink(path);
        }
        closedir(dp);
    }
    rmdir(dir);
}

/* DIR.tmp.PID (with its fxrt/ when with_runtime), room recorded for
 * max_files files. */
static FxStatus staging_open(Staging *s, const char *dir, int max_files, bool with_runtime,
                             Diag *d)
{
    snprintf(s->dir, sizeof s->dir, "%s.tmp.%ld", dir, (long)getpid());
    s->files = fx_alloc_array((size_t)max_files, sizeof *s->files);
    if (!s->files)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    s->cap = max_files;
    remove_tree(s->dir); /* left by an earlier process with this pid */
    char rt[4300];
    snprintf(rt, sizeof rt, "%s/fxrt", s->dir);
    if (mkdir(s->dir, 0777) != 0)
        return diag_errno(d, errno, "cannot create %s", s->dir);
    s->created = true;
    if (with_runtime && mkdir(rt, 0777) != 0)
        return diag_errno(d, errno, "cannot create %s", rt);
    return FX_OK;
}

/* Records NAME (relative to the staging folder) before the file is created,
 * so that cleaning up also removes one whose writing failed half-way. */
static FxStatus staging_add(Staging *s, const char *name, Diag *d)
{
    if (s->count == s->cap || strlen(name) >= STAGED_NAME_MAX)
        return diag_error(d, FX_ERR_INVALID, "cannot stage %s: %s", name,
                          s->count == s->cap ? "too many files" : "name too long");
    snprintf(s->files[s->count++], STAGED_NAME_MAX, "%s", name);
    return FX_OK;
}

static FxStatus write_text(Staging *s, const char *name, const void *data, size_t len,
                           Diag *d)
{
    FxStatus st = staging_add(s, name, d);
    if (st != FX_OK)
        return st;
    char path[4600];
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return diag_errno(d, errno, "cannot write %s", path);
    size_t w = len ? fwrite(data, 1, len, f) : 0;
    if (fclose(f) != 0 || w != len)
        return diag_error(d, FX_ERR_IO, "cannot write %s", path);
    return FX_OK;
}

/* Publishes the staged files as dir: a new folder by renaming the staging
 * folder, at once; an existing one file by file, so that the files of an
 * earlier compile that are not rewritten, and the user's own (a build
 * folder), stay. */
static FxStatus staging_publish(Staging *s, const char *dir, Diag *d)
{
    if (rename(s->dir, dir) == 0) {
        s->published_whole = true;
        return FX_OK;
    }
    if (errno != EEXIST && errno != ENOTEMPTY)
        return diag_errno(d, errno, "cannot move %s to %s", s->dir, dir);
    char rt[4300];
    snprintf(rt, sizeof rt, "%s/fxrt", s->dir);
    struct stat sb;
    if (stat(rt, &sb) == 0) {
        snprintf(rt, sizeof rt, "%s/fxrt", dir);
        if (mkdir(rt, 0777) != 0 && errno != EEXIST)
            return diag_errno(d, errno, "cannot create %s", rt);
    }
    for (int i = 0; i < s->count; i++) {
        char from[4600], to[4600];
        snprintf(from, sizeof from, "%s/%s", s->dir, s->files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, s->files[i]);
        if (rename(from, to) != 0 && errno != ENOENT) /* ENOENT: a weight file not written */
            return diag_errno(d, errno, "cannot move %s to %s", from, to);
    }
    return FX_OK;
}

/* After a file-by-file publish: the runtime files of an earlier compile that
 * this one did not write (another model's kernels, or all of them under
 * --runtime shared), which the folder's build would otherwise still compile.
 * By name from the embedded list: no directory read. */
static void remove_stale_runtime(const Staging *s, const char *dir)
{
    for (int i = 0; i < fxcc_embedded_count; i++) {
        const char *file = fxcc_embedded_names[i];
        if (strncmp(file, "fxrt", 4) != 0)
            continue;
        char staged[300], path[4600];
        snprintf(staged, sizeof staged, "fxrt/%s", file);
        bool written = false;
        for (int k = 0; k < s->count && !written; k++)
            written = !strcmp(s->files[k], staged);
        snprintf(path, sizeof path, "%s/%s", dir, staged);
        if (!written)
            unlink(path);
    }
    char rt[4300];
    snprintf(rt, sizeof rt, "%s/fxrt", dir);
    rmdir(rt); /* only when nothing is left in it */
}

/* Removes what is left of the staging folder (nothing once published). */
static void staging_close(Staging *s)
{
    if (s->created && !s->published_whole) {
        for (int i = 0; i < s->count; i++) {
            char path[4600];
            snprintf(path, sizeof path, "%s/%s", s->dir, s->files[i]);
            unlink(path);
        }
        char rt[4300];
        snprintf(rt, sizeof rt, "%s/fxrt", s->dir);
        rmdir(rt);
        rmdir(s->dir);
    }
    free(s->files);
}

/* NAME_profile.c, for main --profile. */
static FxStatus write_profile_tables(const Gen *gen, Staging *tmp)
{
    char *data = NULL, name[300];
    size_t len = 0;
    double copy_bytes = 0;
    for (int c = 0; c < gen->plan->num_copies; c++)
        copy_bytes += (double)gen->plan->copies[c].src->bytes;
    FILE *mem = open_memstream(&data, &len);
    bool cut = !mem;
    if (mem) {
        cg_write_profile_tables(mem, gen->o->name, gen->timed, gen->num_timed, copy_bytes);
        cut = ferror(mem) != 0;
        cut = fclose(mem) != 0 || cut;
    }
    snprintf(name, sizeof name, "%s_profile.c", gen->o->name);
    FxStatus st = cut ? diag_error(gen->d, FX_ERR_NOMEM, "out of memory writing %s", name)
                      : write_text(tmp, name, data, len, gen->d);
    free(data);
    return st;
}

/* The weight files of each mode: NAME_weights.c for C arrays, NAME_weights.S
 * and .bin for INCBIN.  A compile writes those of its mode and, in a folder
 * that holds another mode's, removes them: a build that globs the folder
 * (fxcc verify's) would link both. */
static const char *const weight_file_suffixes[] = {"c", "S", "bin"};

static bool writes_weight_file(const Gen *gen, int k)
{
    bool incbin = gen->num_large && gen->mode == CG_WEIGHTS_INCBIN;
    bool c = gen->num_large && !incbin;
    return k == 0 ? c : incbin;
}

static void remove_stale_weights(const Gen *gen, const char *dir)
{
    for (int k = 0; k < 3; k++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s_weights.%s", dir, gen->o->name,
                 weight_file_suffixes[k]);
        if (!writes_weight_file(gen, k))
            unlink(path);
    }
}

/* Stages the large weights' files of the mode, then writes them. */
static FxStatus stage_large_weights(const Gen *gen, Staging *tmp)
{
    FxStatus st = FX_OK;
    for (int k = 0; k < 3 && st == FX_OK; k++) {
        char name[400];
        snprintf(name, sizeof name, "%s_weights.%s", gen->o->name, weight_file_suffixes[k]);
        if (writes_weight_file(gen, k))
            st = staging_add(tmp, name, gen->d);
    }
    return st == FX_OK ? write_large_weights(gen, tmp->dir) : st;
}

/* mkdir -p of the folder that will hold dir. */
static FxStatus make_parents(const char *dir, Diag *d)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return FX_OK;
    *slash = '\0';
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return diag_errno(d, errno, "cannot create %s", path);
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return diag_errno(d, errno, "cannot create %s", path);
    return FX_OK;
}

/* Leaf sources must be C files whose names no generated file takes. */
static FxStatus check_leaf_sources(const CgOptions *o, Diag *d)
{
    for (int k = 0; k < o->num_leaf_sources; k++) {
        const char *base = file_basename(o->leaf_sources[k]);
        size_t len = strlen(base);
        char model_c[300], weights_c[300], profile_c[300];
        snprintf(model_c, sizeof model_c, "%s.c", o->name);
        snprintf(weights_c, sizeof weights_c, "%s_weights.c", o->name);
        if (len < 3 || strcmp(base + len - 2, ".c") != 0)
            return diag_error(d, FX_ERR_INVALID, "--leaf-source %s: not a .c file",
                              o->leaf_sources[k]);
        snprintf(profile_c, sizeof profile_c, "%s_profile.c", o->name);
        if (!strcmp(base, model_c) || !strcmp(base, weights_c) || !strcmp(base, profile_c) ||
            !strcmp(base, "main.c") ||
            !strcmp(base, "fxio.c"))
            return diag_error(d, FX_ERR_INVALID,
                              "--leaf-source %s: fxcc writes a file of that name; rename it",
                              o->leaf_sources[k]);
        for (int j = 0; j < k; j++)
            if (!strcmp(base, file_basename(o->leaf_sources[j])))
                return diag_error(d, FX_ERR_INVALID, "--leaf-source %s and %s have one name",
                                  o->leaf_sources[j], o->leaf_sources[k]);
    }
    return FX_OK;
}

static FxStatus copy_leaf_sources(const CgOptions *o, Staging *tmp, Diag *d)
{
    FxStatus st = FX_OK;
    for (int k = 0; k < o->num_leaf_sources && st == FX_OK; k++) {
        uint8_t *data;
        size_t len;
        if ((st = file_read_all(o->leaf_sources[k], &data, &len, d)) != FX_OK)
            break;
        st = write_text(tmp, file_basename(o->leaf_sources[k]), data, len, d);
        free(data);
    }
    return st;
}

FxStatus cg_compile(const Graph *g, const CgOptions *o, const char *dir, CgPlan *plan_out,
                    Diag *d)
{
    if (!cg_valid_name(o->name))
        return diag_error(d, FX_ERR_INVALID, "--name '%s' is not a C identifier", o->name);
    Node *out = graph_output_node(g);
    if (!out)
        return diag_error(d, FX_ERR_INVALID, "graph has no output");
    if (check_leaf_sources(o, d) != FX_OK)
        return FX_ERR_INVALID;
    if (o->weights_section && !cg_valid_section(o->weights_section))
        return diag_error(d, FX_ERR_INVALID,
                          "--weights-section '%s' is not a section name ([A-Za-z0-9._$]+)",
                          o->weights_section);
    if (o->cpu && (o->target == FX_TARGET_HOST || !cg_cpu_flags(o->cpu)))
        return diag_error(d, FX_ERR_INVALID, "--cpu '%s': %s", o->cpu,
                          o->target == FX_TARGET_HOST
                              ? "needs --target portable or cortex-m"
                              : "not one of cortex-m0plus, cortex-m4, cortex-m7, cortex-m33, "
                                "cortex-m55");
    if (o->runtime_shared && o->target != FX_TARGET_HOST)
        return diag_error(d, FX_ERR_INVALID, "--runtime shared needs --target host: the installed "
                                             "runtime is built for the host");
    if (o->arena_section && !cg_valid_section(o->arena_section))
        return diag_error(d, FX_ERR_INVALID,
                          "--arena-section '%s' is not a section name ([A-Za-z0-9._$]+)",
                          o->arena_section);
    CgPlan plan;
    FxStatus st = cg_plan_target(g, o->target, &plan, d);
    if (st != FX_OK)
        return st;
    st = cg_check_budget(&plan, o, d);
    if (st != FX_OK) {
        cg_plan_free(&plan);
        return st;
    }
    Gen gen = {.g = g, .o = o, .plan = &plan, .d = d};
    EmitText header = {0}, src = {0}, cmake = {0}, mk = {0}, main_c = {0};
    Staging tmp = {.count = 0};
    st = write_source(&gen, &src);
    if (st == FX_OK)
        st = write_header(&header, &gen, out);
    if (st == FX_OK) {
        write_cmake(&cmake, &gen);
        write_makefile(&mk, &gen);
        if (header.failed || gen.large_decls.failed || cmake.failed || mk.failed)
            st = diag_error(d, FX_ERR_NOMEM, "out of memory writing C");
    }
    bool *needed = fx_alloc_array((size_t)fxcc_embedded_count, sizeof *needed);
    if (st == FX_OK && !needed)
        st = diag_error(d, FX_ERR_NOMEM, "out of memory");
    if (st == FX_OK)
        st = cg_runtime_files_needed(src.data, src.len, needed, d);
    if (st == FX_OK)
        st = make_parents(dir, d);
    if (st == FX_OK)
        st = staging_open(&tmp, dir, fxcc_embedded_count + o->num_leaf_sources + 16,
                          !o->runtime_shared, d);
    if (st == FX_OK) {
        char name[300];
        snprintf(name, sizeof name, "%s.h", o->name);
        st = write_text(&tmp, name, header.data, header.len, d);
        snprintf(name, sizeof name, "%s.c", o->name);
        if (st == FX_OK)
            st = write_text(&tmp, name, src.data, src.len, d);
        if (st == FX_OK)
            st = stage_large_weights(&gen, &tmp);
        if (st == FX_OK)
            st = write_text(&tmp, "CMakeLists.txt", cmake.data, cmake.len, d);
        snprintf(name, sizeof name, "%s.mk", o->name);
        if (st == FX_OK)
            st = write_text(&tmp, name, mk.data, mk.len, d);
        /* The embedded files: the runtime (fxrt*) goes to fxrt/, the
         * harness (fxio.*) beside main.c when there is one. */
        for (int i = 0; st == FX_OK && i < fxcc_embedded_count; i++) {
            const char *file = fxcc_embedded_names[i];
            bool runtime = strncmp(file, "fxrt", 4) == 0;
            size_t len = strlen(file);
            bool unreached = runtime && !o->runtime_full && !needed[i] && len > 2 &&
                             !strcmp(file + len - 2, ".c");
            if (runtime && (o->runtime_shared || unreached))
                continue;
            char staged[300];
            snprintf(staged, sizeof staged, "%s%s", runtime ? "fxrt/" : "", file);
            if (runtime && o->target == FX_TARGET_CORTEX_M && !strcmp(file, "fxrt_config.h")) {
                EmitText config = {0};
                write_runtime_config(&config, &gen);
                st = config.failed ? diag_error(d, FX_ERR_NOMEM, "out of memory")
                                   : write_text(&tmp, staged, config.data, config.len, d);
                emit_text_free(&config);
            } else if (runtime && !strcmp(file, "fxrt_names.h")) {
                EmitText names = {0};
                st = write_runtime_names(&names, o->name)
                         ? write_text(&tmp, staged, names.data, names.len, d)
                         : diag_error(d, FX_ERR_NOMEM, "out of memory");
                emit_text_free(&names);
            } else if (runtime || o->emit_main) {
                st = write_text(&tmp, staged, fxcc_embedded_data[i], fxcc_embedded_sizes[i], d);
            }
        }
        if (st == FX_OK)
            st = copy_leaf_sources(o, &tmp, d);
        if (st == FX_OK && o->emit_main) {
            /* A memory stream that cannot grow fails at fclose (or sets
             * its error flag before): either way main.c would be cut short. */
            FILE *mem = open_memstream(&main_c.data, &main_c.len);
            bool cut = !mem;
            if (mem) {
                cg_write_main(mem, o->name);
                cut = ferror(mem) != 0;
                cut = fclose(mem) != 0 || cut;
            }
            if (cut)
                st = diag_error(d, FX_ERR_NOMEM, "out of memory writing main.c");
            else
                st = write_text(&tmp, "main.c", main_c.data, main_c.len, d);
        }
        if (st == FX_OK && o->emit_main)
            st = write_profile_tables(&gen, &tmp);
        if (st == FX_OK)
            st = staging_publish(&tmp, dir, d);
        if (st == FX_OK && !tmp.published_whole) {
            remove_stale_weights(&gen, dir);
            remove_stale_runtime(&tmp, dir);
        }
    }
    staging_close(&tmp);
    free(needed);
    free(header.data);
    free(src.data);
    free(cmake.data);
    free(mk.data);
    free(main_c.data);
    free(gen.body.data);
    name_set_free(&gen.used);
    emit_text_free(&gen.large_decls);
    free(gen.large);
    free(gen.timed);
    if (st == FX_OK && plan_out)
        *plan_out = plan;
    else
        cg_plan_free(&plan);
    return st;
}
