/*
 * graph_parse.c - reads FX's text form, as graph_print writes it, back into a
 * Graph, so that tests and rewrite patterns can be written inline.
 *
 * One node per line:
 *
 *     graph():                                         (optional header)
 *     %x : [num_users=1] placeholder[target=x]  # float32[3, 4]
 *     %y : placeholder[target=y] : float32[3, 4]
 *     %w : get_attr[target=fc.weight]
 *     %add : call_function[target=Add](args = (%x, %w), kwargs = {})
 *     %clip : call_function[target=Clip](args = (%add, None, None))
 *     %flat : call_method[target=flatten](args = (%clip,), kwargs = {axis: 1})
 *     %part : call_function[target=getitem](args = (%split, 0), kwargs = {})
 *     return (%clip,)
 *
 * The `[num_users=N]` annotation is optional but checked when present.  A
 * placeholder's type is written `: TYPE` after it or, as the printer does, in
 * its `# TYPE` comment; comments on other nodes are ignored (their types are
 * inferred).  A multi-output node gets as many outputs as its `# (T1, T2)`
 * comment lists, else enough for its getitem users.
 *
 * A get_attr takes its value from the caller's constants, looked up by
 * target.  Without one it is a wildcard constant (value NULL, no shape),
 * which only patterns for replace_pattern use: such a graph is never linted
 * or run.  kwargs are checked against the op's AttrSpec list (ints where
 * floats are expected are promoted, an empty list takes the spec's kind) and
 * the op's defaults are filled in as at import, so printing is canonical.
 * When every placeholder is typed and every constant has a value, shapes are
 * propagated, and a graph whose shapes do not fit is refused.
 *
 * Refused: call_module nodes (the text names neither the module kind nor all
 * of its body's constants) and tensor-valued attributes.  Every error names
 * line:column; no input crashes the parser (tests/fuzz/fuzz_graph_parse.c).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opt.h"

/* What the text said about a node that can only be checked at the end. */
typedef struct NodeNote {
    Node *node;
    int users;   /* [num_users=N], -1 if absent */
    int outputs; /* entries of a "# (T1, T2)" comment, 0 if none */
    int line, col;
} NodeNote;

typedef struct Parser {
    const char *text;
    size_t pos, line_start;
    int line;
    Graph *g;
    Diag *d;
    const NamedTensor *constants;
    int num_constants;
    NodeNote *notes;
    int num_notes, cap_notes;
    bool seen_call; /* a non-placeholder node has been read */
} Parser;

/* --- errors and characters ------------------------------------------------ */

static int column_at(const Parser *p, size_t pos) { return (int)(pos - p->line_start) + 1; }

static FxStatus fail_at(Parser *p, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static FxStatus fail_at(Parser *p, size_t pos, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return diag_error_at(p->d, FX_ERR_INVALID, NULL, (long long)pos, "%d:%d: %s", p->line,
                         column_at(p, pos), msg);
}

static FxStatus nomem(Parser *p)
{
    return diag_error(p->d, FX_ERR_NOMEM, "out of memory parsing a graph");
}

static char peek(const Parser *p) { return p->text[p->pos]; }

/* The character at the cursor, for messages. */
static const char *found(const Parser *p, char *buf, size_t cap)
{
    unsigned char c = (unsigned char)peek(p);
    if (c == '\0')
        return "the end of the text";
    if (c == '\n')
        return "the end of the line";
    if (c < 0x20 || c >= 0x7f)
        snprintf(buf, cap, "byte 0x%02x", c);
    else
        snprintf(buf, cap, "'%c'", c);
    return buf;
}

static void skip_blanks(Parser *p)
{
    while (peek(p) == ' ' || peek(p) == '\t' || peek(p) == '\r')
        p->pos++;
}

/* Skips blanks, then consumes `c` or fails. */
static FxStatus expect(Parser *p, char c, const char *what)
{
    skip_blanks(p);
    if (peek(p) == c) {
        p->pos++;
        return FX_OK;
    }
    char buf[16];
    return fail_at(p, p->pos, "expected '%c' %s, found %s", c, what, found(p, buf, sizeof buf));
}

static bool accept(Parser *p, char c)
{
    skip_blanks(p);
    if (peek(p) != c)
        return false;
    p->pos++;
    return true;
}

static bool is_ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

/* An identifier into buf; fails when there is none or it is too long. */
static FxStatus identifier(Parser *p, char *buf, size_t cap, const char *what)
{
    skip_blanks(p);
    size_t start = p->pos;
    if (!is_ident_start(peek(p))) {
        char f[16];
        return fail_at(p, start, "expected %s, found %s", what, found(p, f, sizeof f));
    }
    while (is_ident_char(peek(p)))
        p->pos++;
    size_t len = p->pos - start;
    if (len >= cap)
        return fail_at(p, start, "%s is longer than %zu characters", what, cap - 1);
    memcpy(buf, p->text + start, len);
    buf[len] = '\0';
    return FX_OK;
}

/* Consumes the keyword `word` if the text has it as a whole identifier. */
static bool accept_word(Parser *p, const char *word)
{
    skip_blanks(p);
    size_t len = strlen(word);
    if (strncmp(p->text + p->pos, word, len) != 0 || is_ident_char(p->text[p->pos + len]))
        return false;
    p->pos += len;
    return true;
}

/* --- numbers -------------------------------------------------------------- */

typedef struct Number {
    bool is_float;
    int64_t i;
    double f;
} Number;

static bool starts_number(const Parser *p)
{
    const char *s = p->text + p->pos;
    if (*s == '-')
        s++;
    return (*s >= '0' && *s <= '9') || strncmp(s, "inf", 3) == 0 || strncmp(s, "nan", 3) == 0;
}

/* -?digits[.digits][e[+-]digits], inf, -inf, nan.  The token is delimited
 * here and only then converted, so strtod never sees more (no hex floats,
 * no "infinity"). */
static FxStatus number(Parser *p, Number *out)
{
    skip_blanks(p);
    size_t start = p->pos;
    const char *s = p->text;
    size_t i = start;
    if (s[i] == '-')
        i++;
    bool is_float = false;
    if (strncmp(s + i, "inf", 3) == 0 || strncmp(s + i, "nan", 3) == 0) {
        i += 3;
        is_float = true;
    } else {
        size_t digits = i;
        while (s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == digits)
            return fail_at(p, start, "expected a number");
        if (s[i] == '.') {
            is_float = true;
            for (i++; s[i] >= '0' && s[i] <= '9';)
                i++;
        }
        if (s[i] == 'e' || s[i] == 'E') {
            size_t e = i + 1;
            if (s[e] == '+' || s[e] == '-')
                e++;
            if (s[e] < '0' || s[e] > '9')
                return fail_at(p, start, "malformed exponent in a number");
            while (s[e] >= '0' && s[e] <= '9')
                e++;
            i = e;
            is_float = true;
        }
    }
    if (is_ident_char(s[i]) || s[i] == '.')
        return fail_at(p, start, "malformed number");
    char tok[64];
    if (i - start >= sizeof tok)
        return fail_at(p, start, "number is longer than %zu characters", sizeof tok - 1);
    memcpy(tok, s + start, i - start);
    tok[i - start] = '\0';
    p->pos = i;
    out->is_float = is_float;
    errno = 0;
    if (is_float) {
        out->f = strtod(tok, NULL);
        if (errno == ERANGE && isinf(out->f))
            return fail_at(p, start, "number %s is out of range", tok);
        out->i = 0;
    } else {
        out->i = strtoll(tok, NULL, 10);
        if (errno == ERANGE)
            return fail_at(p, start, "integer %s is out of range", tok);
        out->f = (double)out->i;
    }
    return FX_OK;
}

static FxStatus small_int(Parser *p, int lo, int hi, const char *what, int *out)
{
    skip_blanks(p);
    size_t at = p->pos;
    Number v;
    FxStatus st = starts_number(p) ? number(p, &v) : fail_at(p, at, "expected %s", what);
    if (st != FX_OK)
        return st;
    if (v.is_float || v.i < lo || v.i > hi)
        return fail_at(p, at, "%s must be an integer in [%d, %d]", what, lo, hi);
    *out = (int)v.i;
    return FX_OK;
}

/* --- types ---------------------------------------------------------------- */

static bool dtype_from_name(const char *name, DType *out)
{
    for (int t = 1; t <= FXRT_DTYPE_UINT64; t++)
        if (strcmp(dtype_name((DType)t), name) == 0) {
            *out = (DType)t;
            return true;
        }
    return false;
}

/* "float32[1, 4]" (or "float32[]" for a scalar). */
static FxStatus tensor_type(Parser *p, TensorType *t)
{
    char name[32];
    skip_blanks(p);
    size_t at = p->pos;
    FxStatus st = identifier(p, name, sizeof name, "an element type");
    if (st != FX_OK)
        return st;
    memset(t, 0, sizeof *t);
    if (!dtype_from_name(name, &t->dtype) || !dtype_is_supported(t->dtype))
        return fail_at(p, at, "'%s' is not a supported element type", name);
    if ((st = expect(p, '[', "after the element type")) != FX_OK)
        return st;
    if (!accept(p, ']')) {
        do {
            if (t->rank == FX_MAX_RANK)
                return fail_at(p, p->pos, "more than %d dimensions", FX_MAX_RANK);
            skip_blanks(p);
            size_t dim_at = p->pos;
            Number v;
            if ((st = number(p, &v)) != FX_OK)
                return st;
            if (v.is_float || v.i < 0)
                return fail_at(p, dim_at, "a dimension must be a non-negative integer");
            t->dims[t->rank++] = v.i;
        } while (accept(p, ','));
        if ((st = expect(p, ']', "after the dimensions")) != FX_OK)
            return st;
    }
    Diag local;
    diag_init(&local);
    st = type_check_size(t, NULL, &local, "type");
    if (st != FX_OK)
        fail_at(p, at, "%s", local.count ? local.entries[0].message : "type is too large");
    diag_free(&local);
    return st == FX_OK ? FX_OK : FX_ERR_INVALID;
}

/* "# float32[3, 4]" or "# (float32[3], int64[3])": a type list if the
 * comment is one (*count of them, types[0] the first), else *count = 0. */
static void type_comment(Parser *p, TensorType *first, int *count)
{
    *count = 0;
    Diag quiet;
    diag_init(&quiet);
    Parser probe = *p;
    probe.d = &quiet;
    bool tuple = accept(&probe, '(');
    int k = 0;
    TensorType t;
    while (tensor_type(&probe, &t) == FX_OK) {
        if (k++ == 0)
            *first = t;
        if (!tuple || !accept(&probe, ','))
            break;
    }
    skip_blanks(&probe);
    bool closed = !tuple || accept(&probe, ')');
    skip_blanks(&probe);
    if (k > 0 && closed && (peek(&probe) == '\n' || peek(&probe) == '\0'))
        *count = k;
    diag_free(&quiet);
}

/* Skips an optional "# ..." comment and requires the end of the line; a
 * type comment is decoded into *first / *count when they are not NULL. */
static FxStatus end_of_line(Parser *p, TensorType *first, int *count)
{
    skip_blanks(p);
    if (peek(p) == '#') {
        p->pos++;
        if (count)
            type_comment(p, first, count);
        while (peek(p) != '\n' && peek(p) != '\0')
            p->pos++;
    }
    if (peek(p) != '\n' && peek(p) != '\0') {
        char f[16];
        return fail_at(p, p->pos, "expected the end of the line, found %s", found(p, f, sizeof f));
    }
    return FX_OK;
}

/* --- node references ------------------------------------------------------ */

/* "%name" of a node defined on an earlier line. */
static FxStatus node_ref(Parser *p, Node **out)
{
    skip_blanks(p);
    size_t at = p->pos;
    if (peek(p) != '%') {
        char f[16];
        return fail_at(p, at, "expected '%%name' or None, found %s", found(p, f, sizeof f));
    }
    p->pos++;
    char name[128];
    FxStatus st = identifier(p, name, sizeof name, "a node name after '%'");
    if (st != FX_OK)
        return st;
    Node *n = graph_find(p->g, name);
    if (!n || n->opcode == FX_OPCODE_OUTPUT)
        return fail_at(p, at, "'%%%s' is not defined on an earlier line", name);
    *out = n;
    return FX_OK;
}

/* A growable list of argument nodes (NULL: None). */
typedef struct ArgList {
    Node **v;
    int count, cap;
} ArgList;

static bool args_push(ArgList *a, Node *n)
{
    if (a->count == a->cap) {
        int cap = a->cap ? a->cap * 2 : 8;
        Node **v = fx_realloc_array(a->v, (size_t)cap, sizeof *v);
        if (!v)
            return false;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->count++] = n;
    return true;
}

/* "(%a, None, %b)" with an optional trailing comma.  getitem's index, an
 * integer after the node, goes to *index (allowed only when index != NULL). */
static FxStatus arg_tuple(Parser *p, ArgList *args, int *index)
{
    FxStatus st = expect(p, '(', "to open the arguments");
    if (st != FX_OK || accept(p, ')'))
        return st;
    for (;;) {
        skip_blanks(p);
        size_t at = p->pos;
        Node *n = NULL;
        if (index && args->count == 1 && starts_number(p)) {
            if ((st = small_int(p, 0, 1 << 20, "the getitem index", index)) != FX_OK)
                return st;
            return expect(p, ')', "after the getitem index");
        }
        if (!accept_word(p, "None") && (st = node_ref(p, &n)) != FX_OK)
            return st;
        if (args->count >= (1 << 16))
            return fail_at(p, at, "too many arguments");
        if (!args_push(args, n))
            return nomem(p);
        if (accept(p, ')'))
            return FX_OK;
        if ((st = expect(p, ',', "or ')' after an argument")) != FX_OK)
            return st;
        if (accept(p, ')'))
            return FX_OK;
    }
}

/* --- attributes ----------------------------------------------------------- */

/* One literal of a kwarg value: a number or a quoted string (the printer
 * writes strings as '...', without escapes). */
typedef struct Literal {
    bool is_string;
    Number num;
    const char *s; /* in the graph's arena */
} Literal;

static FxStatus literal(Parser *p, Literal *out)
{
    skip_blanks(p);
    size_t at = p->pos;
    memset(out, 0, sizeof *out);
    if (peek(p) == '\'') {
        size_t start = ++p->pos;
        while (peek(p) != '\'' && peek(p) != '\n' && peek(p) != '\0')
            p->pos++;
        if (peek(p) != '\'')
            return fail_at(p, at, "unterminated string");
        out->is_string = true;
        out->s = arena_strndup(&p->g->arena, p->text + start, p->pos - start);
        p->pos++;
        return out->s ? FX_OK : nomem(p);
    }
    if (strncmp(p->text + p->pos, "tensor(", 7) == 0)
        return fail_at(p, at, "tensor attributes cannot be written in the text form");
    if (!starts_number(p)) {
        char f[16];
        return fail_at(p, at, "expected a number, a string or a list, found %s",
                       found(p, f, sizeof f));
    }
    return number(p, &out->num);
}

static const char *kind_name(AttrKind k)
{
    switch (k) {
    case FX_ATTR_FLOAT: return "a float";
    case FX_ATTR_INT: return "an int";
    case FX_ATTR_STRING: return "a string";
    case FX_ATTR_TENSOR: return "a tensor";
    case FX_ATTR_FLOATS: return "a list of floats";
    case FX_ATTR_INTS: return "a list of ints";
    case FX_ATTR_STRINGS: return "a list of strings";
    }
    return "?";
}

/* Whether literal v can stand for an element of kind k (FLOAT, INT or
 * STRING). */
static bool literal_fits(const Literal *v, AttrKind k)
{
    if (k == FX_ATTR_STRING)
        return v->is_string;
    if (v->is_string)
        return false;
    return k == FX_ATTR_FLOAT || !v->num.is_float;
}

/* Below FLT_MAX plus half an ulp a double rounds to a finite float. */
static bool float_fits(double v) { return !isfinite(v) || fabs(v) < 3.4028235677973366e38; }

/* "name: value" for node n, typed by the op's spec. */
static FxStatus kwarg(Parser *p, Node *n)
{
    char name[64];
    skip_blanks(p);
    size_t at = p->pos;
    FxStatus st = identifier(p, name, sizeof name, "an attribute name");
    if (st != FX_OK)
        return st;
    const AttrSpec *spec = n->op->attrs;
    while (spec && spec->name && strcmp(spec->name, name) != 0)
        spec++;
    if (!spec || !spec->name)
        return fail_at(p, at, "%s has no attribute '%s'", n->op->name, name);
    if (node_attr(n, name))
        return fail_at(p, at, "attribute '%s' is given twice", name);
    if ((st = expect(p, ':', "after the attribute name")) != FX_OK)
        return st;
    skip_blanks(p);
    size_t value_at = p->pos;
    bool is_list = spec->kind == FX_ATTR_INTS || spec->kind == FX_ATTR_FLOATS ||
                   spec->kind == FX_ATTR_STRINGS;
    AttrKind elem = spec->kind == FX_ATTR_INTS     ? FX_ATTR_INT
                  : spec->kind == FX_ATTR_FLOATS   ? FX_ATTR_FLOAT
                  : spec->kind == FX_ATTR_STRINGS  ? FX_ATTR_STRING
                                                   : spec->kind;
    if (spec->kind == FX_ATTR_TENSOR)
        return fail_at(p, value_at, "tensor attributes cannot be written in the text form");
    if (!is_list) {
        Literal v;
        if (peek(p) == '[')
            return fail_at(p, value_at, "attribute '%s' is %s, not a list", name,
                           kind_name(spec->kind));
        if ((st = literal(p, &v)) != FX_OK)
            return st;
        if (!literal_fits(&v, elem))
            return fail_at(p, value_at, "attribute '%s' is %s", name, kind_name(spec->kind));
        if (elem == FX_ATTR_FLOAT && !float_fits(v.num.f))
            return fail_at(p, value_at, "attribute '%s' is out of float range", name);
        Attr *a = elem == FX_ATTR_STRING ? node_set_attr_string(n, name, v.s)
                : elem == FX_ATTR_INT    ? node_set_attr_int(n, name, v.num.i)
                                         : node_set_attr_float(n, name, (float)v.num.f);
        return a ? FX_OK : nomem(p);
    }
    if (peek(p) != '[')
        return fail_at(p, value_at, "attribute '%s' is %s", name, kind_name(spec->kind));
    p->pos++;
    int64_t *ints = NULL;
    float *floats = NULL;
    const char **strings = NULL;
    int64_t count = 0, cap = 0;
    if (!accept(p, ']')) {
        do {
            skip_blanks(p);
            size_t elem_at = p->pos;
            Literal v;
            if ((st = literal(p, &v)) != FX_OK)
                break;
            if (!literal_fits(&v, elem) || (elem == FX_ATTR_FLOAT && !float_fits(v.num.f))) {
                st = fail_at(p, elem_at, "attribute '%s' is %s", name, kind_name(spec->kind));
                break;
            }
            if (count == cap) {
                cap = cap ? cap * 2 : 8;
                int64_t *ni = fx_realloc_array(ints, (size_t)cap, sizeof *ni);
                ints = ni ? ni : ints;
                float *nf = fx_realloc_array(floats, (size_t)cap, sizeof *nf);
                floats = nf ? nf : floats;
                const char **ns = fx_realloc_array(strings, (size_t)cap, sizeof *ns);
                strings = ns ? ns : strings;
                if (!ni || !nf || !ns) {
                    st = nomem(p);
                    break;
                }
            }
            ints[count] = v.num.i;
            floats[count] = (float)v.num.f;
            strings[count] = v.s;
            count++;
        } while (accept(p, ','));
        if (st == FX_OK)
            st = expect(p, ']', "or ',' in the list");
    }
    if (st == FX_OK) {
        Attr *a = spec->kind == FX_ATTR_INTS   ? node_set_attr_ints(n, name, ints, count)
                : spec->kind == FX_ATTR_FLOATS ? node_set_attr_floats(n, name, floats, count)
                                               : node_set_attr_strings(n, name, strings, count);
        if (!a)
            st = nomem(p);
    }
    free(ints);
    free(floats);
    free(strings);
    return st;
}

/* "{name: value, ...}" */
static FxStatus kwarg_dict(Parser *p, Node *n)
{
    FxStatus st = expect(p, '{', "to open the kwargs");
    if (st != FX_OK || accept(p, '}'))
        return st;
    do {
        if (accept(p, '}'))
            return FX_OK; /* trailing comma */
        if ((st = kwarg(p, n)) != FX_OK)
            return st;
    } while (accept(p, ','));
    return expect(p, '}', "or ',' after an attribute");
}

/* --- lines ---------------------------------------------------------------- */

static const OpDef *op_for_target(FxOpcode opcode, const char *target)
{
    for (int k = 0; k < op_count(); k++) {
        const OpDef *op = op_by_kind((OpKind)k);
        if (op->flags & FX_OPF_MODULE)
            continue;
        bool view = (op->flags & FX_OPF_VIEW) != 0;
        if (opcode == FX_OPCODE_CALL_METHOD && view && op->method &&
            strcmp(op->method, target) == 0)
            return op;
        if (opcode == FX_OPCODE_CALL_FUNCTION && !view && strcmp(op->name, target) == 0)
            return op;
    }
    return NULL;
}

static const NamedTensor *constant_named(const Parser *p, const char *target)
{
    for (int i = 0; i < p->num_constants; i++)
        if (p->constants[i].name && strcmp(p->constants[i].name, target) == 0)
            return &p->constants[i];
    return NULL;
}

static FxStatus note_push(Parser *p, const NodeNote *note)
{
    if (p->num_notes == p->cap_notes) {
        int cap = p->cap_notes ? p->cap_notes * 2 : 16;
        NodeNote *v = fx_realloc_array(p->notes, (size_t)cap, sizeof *v);
        if (!v)
            return nomem(p);
        p->notes = v;
        p->cap_notes = cap;
    }
    p->notes[p->num_notes++] = *note;
    return FX_OK;
}

/* The call part of a line: "(args = (...), kwargs = {...})" for node n. */
static FxStatus call_site(Parser *p, Node *n, size_t target_at)
{
    ArgList args = {0};
    int index = -1;
    FxStatus st = expect(p, '(', "to open the call");
    if (st == FX_OK && !accept_word(p, "args")) {
        char f[16];
        st = fail_at(p, p->pos, "expected 'args', found %s", found(p, f, sizeof f));
    }
    if (st == FX_OK)
        st = expect(p, '=', "after 'args'");
    if (st == FX_OK)
        st = arg_tuple(p, &args, n->op == &fx_op_getitem ? &index : NULL);
    for (int i = 0; st == FX_OK && i < args.count; i++)
        if (node_append_arg(n, args.v[i]) < 0)
            st = diag_error(p->d, FX_ERR_NOMEM, "out of memory");
    free(args.v);
    if (st != FX_OK)
        return st;
    const OpDef *op = n->op;
    if (op == &fx_op_getitem && (index < 0 || n->num_args != 1 || !n->args[0]))
        return fail_at(p, target_at, "getitem takes a node and an index: (%%node, 0)");
    n->index = index < 0 ? 0 : index;
    if (op->max_inputs < 0 && n->num_args < op->min_inputs)
        return fail_at(p, target_at, "%s takes at least %d arguments, not %d", op->name,
                       op->min_inputs, n->num_args);
    if (op->max_inputs >= 0 && (n->num_args < op->min_inputs || n->num_args > op->max_inputs))
        return fail_at(p, target_at, "%s takes %d to %d arguments, not %d", op->name,
                       op->min_inputs, op->max_inputs, n->num_args);
    for (int i = 0; i < op->min_inputs; i++)
        if (!n->args[i])
            return fail_at(p, target_at, "argument %d of %s is required, not None", i, op->name);
    if (accept(p, ',')) {
        if (!accept_word(p, "kwargs")) {
            char f[16];
            return fail_at(p, p->pos, "expected 'kwargs', found %s", found(p, f, sizeof f));
        }
        if ((st = expect(p, '=', "after 'kwargs'")) != FX_OK ||
            (st = kwarg_dict(p, n)) != FX_OK)
            return st;
    }
    if ((st = expect(p, ')', "to close the call")) != FX_OK)
        return st;
    for (const AttrSpec *s = op->attrs; s && s->name; s++)
        if (s->required && !node_attr(n, s->name))
            return fail_at(p, target_at, "%s needs attribute '%s'", op->name, s->name);
    if ((st = op_apply_attr_specs(op, n, p->d)) != FX_OK)
        return fail_at(p, target_at, "attributes of %s are not valid", op->name);
    return FX_OK;
}

/* "%name : [num_users=N] opcode[target=T]..." */
static FxStatus node_line(Parser *p)
{
    size_t at = p->pos++; /* the '%' */
    char name[128], opcode_name[32];
    FxStatus st = identifier(p, name, sizeof name, "a node name after '%'");
    if (st != FX_OK)
        return st;
    if (graph_find(p->g, name))
        return fail_at(p, at, "'%%%s' is defined twice", name);
    if ((st = expect(p, ':', "after the node name")) != FX_OK)
        return st;
    NodeNote note = {.users = -1, .line = p->line, .col = column_at(p, at)};
    if (accept(p, '[')) {
        if (!accept_word(p, "num_users")) {
            char f[16];
            return fail_at(p, p->pos, "expected 'num_users', found %s", found(p, f, sizeof f));
        }
        if ((st = expect(p, '=', "after 'num_users'")) != FX_OK ||
            (st = small_int(p, 0, 1 << 30, "num_users", &note.users)) != FX_OK ||
            (st = expect(p, ']', "after num_users")) != FX_OK)
            return st;
    }
    skip_blanks(p);
    size_t opcode_at = p->pos;
    if ((st = identifier(p, opcode_name, sizeof opcode_name, "an opcode")) != FX_OK)
        return st;
    FxOpcode opcode = FX_OPCODE_SENTINEL;
    for (int k = FX_OPCODE_PLACEHOLDER; k < FX_OPCODE_OUTPUT; k++)
        if (strcmp(opcode_name, fx_opcode_name((FxOpcode)k)) == 0)
            opcode = (FxOpcode)k;
    if (opcode == FX_OPCODE_SENTINEL)
        return fail_at(p, opcode_at, "'%s' is not an opcode", opcode_name);
    if (opcode == FX_OPCODE_CALL_MODULE)
        return fail_at(p, opcode_at, "call_module nodes cannot be parsed (the text names "
                                     "neither the module kind nor its body's constants)");
    if (opcode == FX_OPCODE_PLACEHOLDER && p->seen_call)
        return fail_at(p, at, "placeholders must come before every other node");
    if ((st = expect(p, '[', "after the opcode")) != FX_OK)
        return st;
    if (!accept_word(p, "target")) {
        char f[16];
        return fail_at(p, p->pos, "expected 'target', found %s", found(p, f, sizeof f));
    }
    if ((st = expect(p, '=', "after 'target'")) != FX_OK)
        return st;
    size_t target_at = p->pos;
    while (peek(p) != ']' && peek(p) != '\n' && peek(p) != '\0')
        p->pos++;
    if (peek(p) != ']')
        return fail_at(p, target_at, "unterminated target: expected ']'");
    if (p->pos == target_at)
        return fail_at(p, target_at, "empty target");
    char *target = arena_strndup(&p->g->arena, p->text + target_at, p->pos - target_at);
    if (!target)
        return nomem(p);
    p->pos++;

    const OpDef *op = NULL;
    if (opcode == FX_OPCODE_CALL_FUNCTION || opcode == FX_OPCODE_CALL_METHOD) {
        if (!(op = op_for_target(opcode, target)))
            return fail_at(p, target_at, "'%s' is not a %s target", target, opcode_name);
    }
    Node *n = graph_create_node(p->g, NULL, opcode, name, target, NULL, 0);
    if (!n)
        return nomem(p);
    note.node = n;
    if (strcmp(n->name, name) != 0)
        return fail_at(p, at, "'%s' cannot be a node name (it would become '%s')", name, n->name);
    n->op = op;
    if (!node_set_num_outputs(n, 1))
        return nomem(p);
    p->seen_call |= opcode != FX_OPCODE_PLACEHOLDER;

    TensorType comment_type;
    int comment_types = 0;
    if (opcode == FX_OPCODE_PLACEHOLDER) {
        if (accept(p, ':')) {
            if ((st = tensor_type(p, &n->out_types[0])) != FX_OK)
                return st;
            n->shapes_known = true;
        }
        if ((st = end_of_line(p, &comment_type, &comment_types)) != FX_OK)
            return st;
        if (!n->shapes_known && comment_types == 1) {
            n->out_types[0] = comment_type;
            n->shapes_known = true;
        }
        return note_push(p, &note);
    }
    if (opcode == FX_OPCODE_GET_ATTR) {
        const NamedTensor *c = constant_named(p, target);
        if (c && c->value) {
            if (!(n->value = tensor_clone(c->value, p->d)))
                return FX_ERR_NOMEM;
            n->out_types[0] = n->value->type;
            n->shapes_known = true;
        }
        if ((st = end_of_line(p, NULL, NULL)) != FX_OK)
            return st;
        return note_push(p, &note);
    }
    if ((st = call_site(p, n, target_at)) != FX_OK)
        return st;
    if ((st = end_of_line(p, &comment_type, &comment_types)) != FX_OK)
        return st;
    note.outputs = comment_types;
    return note_push(p, &note);
}

/* "return (%a, %b)" or "return %a" */
static FxStatus return_line(Parser *p)
{
    ArgList args = {0};
    FxStatus st = FX_OK;
    skip_blanks(p);
    if (peek(p) == '(') {
        st = arg_tuple(p, &args, NULL);
    } else {
        Node *n = NULL;
        if ((st = node_ref(p, &n)) == FX_OK && !args_push(&args, n))
            st = nomem(p);
    }
    for (int i = 0; st == FX_OK && i < args.count; i++)
        if (!args.v[i])
            st = fail_at(p, p->pos, "a graph cannot return None");
    if (st == FX_OK && !graph_create_node(p->g, NULL, FX_OPCODE_OUTPUT, "output", "output",
                                          args.v, args.count))
        st = nomem(p);
    free(args.v);
    return st == FX_OK ? end_of_line(p, NULL, NULL) : st;
}

/* --- the whole text ------------------------------------------------------- */

/* Output counts of multi-output nodes, then the [num_users=N] checks. */
static FxStatus finish_nodes(Parser *p)
{
    for (int i = 0; i < p->num_notes; i++) {
        NodeNote *note = &p->notes[i];
        Node *n = note->node;
        if (!n->op)
            continue;
        int outputs = note->outputs > 0 ? note->outputs : 1;
        if (outputs < n->op->min_outputs)
            outputs = n->op->min_outputs;
        for (int u = 0; u < n->num_users; u++)
            if (n->users[u]->op == &fx_op_getitem && n->users[u]->index >= outputs)
                outputs = n->users[u]->index + 1;
        if (n->op->max_outputs >= 0 && outputs > n->op->max_outputs) {
            return diag_error(p->d, FX_ERR_INVALID, "%d:%d: %s gives at most %d outputs, not %d",
                              note->line, note->col, n->op->name, n->op->max_outputs, outputs);
        }
        if (outputs != n->num_outputs && !node_set_num_outputs(n, outputs))
            return nomem(p);
    }
    for (int i = 0; i < p->num_notes; i++) {
        const NodeNote *note = &p->notes[i];
        if (note->users >= 0 && note->users != note->node->num_users)
            return diag_error(p->d, FX_ERR_INVALID, "%d:%d: '%%%s' says num_users=%d but has %d",
                              note->line, note->col, note->node->name, note->users,
                              note->node->num_users);
    }
    return FX_OK;
}

static bool runnable(const Graph *g)
{
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        if ((n->opcode == FX_OPCODE_PLACEHOLDER && !n->shapes_known) ||
            (n->opcode == FX_OPCODE_GET_ATTR && !n->value))
            return false;
    return true;
}

static FxStatus parse_lines(Parser *p)
{
    bool header_allowed = true, returned = false;
    FxStatus st = FX_OK;
    while (st == FX_OK && peek(p) != '\0') {
        skip_blanks(p);
        char c = peek(p);
        if (c == '\n' || c == '#' || c == '\0') {
            st = end_of_line(p, NULL, NULL);
        } else if (returned) {
            st = fail_at(p, p->pos, "text after the return line (module bodies are not "
                                    "supported)");
        } else if (c == '%') {
            st = node_line(p);
            header_allowed = false;
        } else if (accept_word(p, "return")) {
            st = return_line(p);
            returned = true;
            header_allowed = false;
        } else if (header_allowed && accept_word(p, "graph")) {
            if ((st = expect(p, '(', "after 'graph'")) == FX_OK &&
                (st = expect(p, ')', "after 'graph('")) == FX_OK &&
                (st = expect(p, ':', "after 'graph()'")) == FX_OK)
                st = end_of_line(p, NULL, NULL);
            header_allowed = false;
        } else {
            char f[16];
            st = fail_at(p, p->pos, "expected '%%name : ...', 'return' or 'graph():', found %s",
                         found(p, f, sizeof f));
        }
        if (st == FX_OK && peek(p) == '\n') {
            p->pos++;
            p->line++;
            p->line_start = p->pos;
        }
    }
    if (st == FX_OK && !returned)
        st = fail_at(p, p->pos, "the graph has no return line");
    return st;
}

Graph *graph_parse(const char *text, const NamedTensor *constants, int num_constants, Diag *d)
{
    Parser p = {.text = text ? text : "", .line = 1, .d = d, .constants = constants,
                .num_constants = constants ? num_constants : 0};
    if (!(p.g = graph_new())) {
        diag_error(d, FX_ERR_NOMEM, "out of memory parsing a graph");
        return NULL;
    }
    FxStatus st = parse_lines(&p);
    if (st == FX_OK)
        st = finish_nodes(&p);
    if (st == FX_OK && runnable(p.g) && (st = graph_propagate_shapes(p.g, NULL, 0, d)) != FX_OK)
        diag_error(d, st, "the graph's shapes do not fit together");
    free(p.notes);
    if (st != FX_OK) {
        graph_free(p.g);
        return NULL;
    }
    return p.g;
}
