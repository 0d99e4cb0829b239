/*
 * print.c - the three views of a graph: FX's text form, FX's tabular form
 * (print_tabular) and Graphviz DOT.  All output is deterministic: nodes in
 * list order, attributes in op-spec order, floats in a fixed format.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* A bounded string builder: output is truncated, never overflowed. */
typedef struct Buf {
    char *p;
    size_t cap, len;
} Buf;

static void bprintf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(Buf *b, const char *fmt, ...)
{
    if (b->len + 1 >= b->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len = b->len + (size_t)n < b->cap ? b->len + (size_t)n : b->cap - 1;
}

/* Python-like float repr: 1.0, 0.5, 1e-05, inf. */
static void print_float(Buf *b, double v)
{
    if (isnan(v))
        bprintf(b, "nan");
    else if (isinf(v))
        bprintf(b, v > 0 ? "inf" : "-inf");
    else if (v == floor(v) && fabs(v) < 1e16)
        bprintf(b, "%.1f", v);
    else
        bprintf(b, "%.8g", v);
}

static void print_attr_value(Buf *b, const Attr *a)
{
    switch (a->kind) {
    case FX_ATTR_INT: bprintf(b, "%lld", (long long)a->i); break;
    case FX_ATTR_FLOAT: print_float(b, a->f); break;
    case FX_ATTR_STRING: bprintf(b, "'%s'", a->s); break;
    case FX_ATTR_TENSOR: {
        char t[128];
        bprintf(b, "tensor(%s)", type_format(&a->t->type, t, sizeof t));
        break;
    }
    case FX_ATTR_INTS:
    case FX_ATTR_FLOATS:
    case FX_ATTR_STRINGS:
        bprintf(b, "[");
        for (int64_t i = 0; i < a->count; i++) {
            if (i)
                bprintf(b, ", ");
            if (a->kind == FX_ATTR_INTS)
                bprintf(b, "%lld", (long long)a->ints[i]);
            else if (a->kind == FX_ATTR_FLOATS)
                print_float(b, a->floats[i]);
            else
                bprintf(b, "'%s'", a->strings[i]);
        }
        bprintf(b, "]");
        break;
    }
}

/* sigil: "%" in the text form, "" in the table, as FX prints them. */
static void format_args(Buf *b, const Node *n, const char *sigil)
{
    bprintf(b, "(");
    for (int i = 0; i < n->num_args; i++) {
        if (i)
            bprintf(b, ", ");
        if (n->args[i])
            bprintf(b, "%s%s", sigil, n->args[i]->name);
        else
            bprintf(b, "None");
    }
    if (n->op == &fx_op_getitem)
        bprintf(b, ", %d", n->index);
    else if (n->num_args == 1)
        bprintf(b, ",");
    bprintf(b, ")");
}

static void format_kwargs(Buf *b, const Node *n)
{
    bprintf(b, "{");
    for (int i = 0; i < n->num_attrs; i++) {
        bprintf(b, "%s%s: ", i ? ", " : "", n->attrs[i].name);
        print_attr_value(b, &n->attrs[i]);
    }
    bprintf(b, "}");
}

static void format_types(Buf *b, const Node *n)
{
    if (!n->shapes_known || n->opcode == FX_OPCODE_OUTPUT)
        return;
    char t[256];
    bprintf(b, "  # ");
    if (n->num_outputs == 1) {
        bprintf(b, "%s", type_format(&n->out_types[0], t, sizeof t));
        return;
    }
    bprintf(b, "(");
    for (int k = 0; k < n->num_outputs; k++)
        bprintf(b, "%s%s", k ? ", " : "", type_format(&n->out_types[k], t, sizeof t));
    bprintf(b, ")");
}

void node_format(const Node *n, char *buf, size_t cap)
{
    Buf b = {buf, cap, 0};
    buf[0] = '\0';
    if (n->opcode == FX_OPCODE_OUTPUT) {
        bprintf(&b, "return (");
        for (int i = 0; i < n->num_args; i++)
            bprintf(&b, "%s%%%s", i ? ", " : "", n->args[i] ? n->args[i]->name : "None");
        bprintf(&b, n->num_args == 1 ? ",)" : ")");
        return;
    }
    bprintf(&b, "%%%s : [num_users=%d] %s[target=%s]", n->name, n->num_users,
            fx_opcode_name(n->opcode), n->target);
    if (n->opcode != FX_OPCODE_PLACEHOLDER && n->opcode != FX_OPCODE_GET_ATTR) {
        bprintf(&b, "(args = ");
        format_args(&b, n, "%");
        bprintf(&b, ", kwargs = ");
        format_kwargs(&b, n);
        bprintf(&b, ")");
    }
    format_types(&b, n);
}

void graph_print(const Graph *g, FILE *out)
{
    char line[4096];
    fprintf(out, "graph():\n");
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        node_format(n, line, sizeof line);
        fprintf(out, "    %s\n", line);
    }
    /* Module bodies after the graph, as FX prints a GraphModule's
     * submodules: one block per call_module that has one. */
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        if (n->opcode == FX_OPCODE_CALL_MODULE && n->body) {
            fprintf(out, "\n%s = ", n->target);
            graph_print(n->body, out);
        } else if (n->body) { /* control flow: the bodies under the node's name */
            fprintf(out, "\n%s.%s = ", n->name, n->else_body ? "then_branch" : "body");
            graph_print(n->body, out);
            if (n->else_body) {
                fprintf(out, "\n%s.else_branch = ", n->name);
                graph_print(n->else_body, out);
            }
        }
    }
}

/* --- tabular -------------------------------------------------------------- */

enum { TAB_COLS = 5, TAB_CELL = 1024 };

static void tab_row(const Node *n, char cells[TAB_COLS][TAB_CELL])
{
    Buf b;
    snprintf(cells[0], TAB_CELL, "%s", fx_opcode_name(n->opcode));
    snprintf(cells[1], TAB_CELL, "%s", n->name);
    snprintf(cells[2], TAB_CELL, "%s", n->opcode == FX_OPCODE_OUTPUT ? "output" : n->target);
    b = (Buf){cells[3], TAB_CELL, 0};
    cells[3][0] = '\0';
    if (n->opcode == FX_OPCODE_OUTPUT) {
        bprintf(&b, "(");
        for (int i = 0; i < n->num_args; i++)
            bprintf(&b, "%s%s", i ? ", " : "", n->args[i] ? n->args[i]->name : "None");
        bprintf(&b, n->num_args == 1 ? ",)" : ")");
    } else if (n->opcode == FX_OPCODE_PLACEHOLDER || n->opcode == FX_OPCODE_GET_ATTR) {
        bprintf(&b, "()");
    } else {
        format_args(&b, n, "");
    }
    b = (Buf){cells[4], TAB_CELL, 0};
    cells[4][0] = '\0';
    format_kwargs(&b, n);
}

/* The last column is not padded, so lines carry no trailing blanks. */
static void tab_cell(FILE *out, const char *text, int c, const size_t *width)
{
    if (c < TAB_COLS - 1)
        fprintf(out, "%-*s  ", (int)width[c], text);
    else
        fprintf(out, "%s\n", text);
}

void graph_print_tabular(const Graph *g, FILE *out)
{
    static const char *const headers[TAB_COLS] = {"opcode", "name", "target", "args", "kwargs"};
    size_t width[TAB_COLS];
    char(*cells)[TAB_CELL] = fx_malloc(sizeof(char[TAB_COLS][TAB_CELL]));
    if (!cells)
        return;
    for (int c = 0; c < TAB_COLS; c++)
        width[c] = strlen(headers[c]);
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        tab_row(n, cells);
        for (int c = 0; c < TAB_COLS; c++)
            if (strlen(cells[c]) > width[c])
                width[c] = strlen(cells[c]);
    }
    for (int c = 0; c < TAB_COLS; c++)
        tab_cell(out, headers[c], c, width);
    for (int c = 0; c < TAB_COLS; c++) {
        for (size_t i = 0; i < width[c]; i++)
            fputc('-', out);
        fputs(c < TAB_COLS - 1 ? "  " : "\n", out);
    }
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        tab_row(n, cells);
        for (int c = 0; c < TAB_COLS; c++)
            tab_cell(out, cells[c], c, width);
    }
    free(cells);
}

/* --- DOT ------------------------------------------------------------------ */

static void dot_escape(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (strchr("\"\\{}|<>", *s))
            fputc('\\', out);
        fputc(*s, out);
    }
}

void graph_print_dot(const Graph *g, FILE *out)
{
    fprintf(out, "digraph fxcc {\n  rankdir=TB;\n  node [shape=record, fontname=\"monospace\"];\n");
    for (const Node *n = g->root.next; n != &g->root; n = n->next) {
        const char *fill = n->opcode == FX_OPCODE_PLACEHOLDER ? "lightblue"
                         : n->opcode == FX_OPCODE_GET_ATTR    ? "lightyellow"
                         : n->opcode == FX_OPCODE_OUTPUT      ? "lightgrey"
                         : n->opcode == FX_OPCODE_CALL_METHOD ? "honeydew"
                                                              : "white";
        fprintf(out, "  \"%s\" [style=filled, fillcolor=%s, label=\"{", n->name, fill);
        dot_escape(out, n->name);
        fputs("|", out);
        dot_escape(out, fx_opcode_name(n->opcode));
        fputs("[", out);
        dot_escape(out, n->opcode == FX_OPCODE_OUTPUT ? "output" : n->target);
        fputs("]", out);
        if (n->shapes_known && n->opcode != FX_OPCODE_OUTPUT)
            for (int k = 0; k < n->num_outputs; k++) {
                char t[256];
                fputs("|", out);
                dot_escape(out, type_format(&n->out_types[k], t, sizeof t));
            }
        fputs("}\"];\n", out);
    }
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        for (int i = 0; i < n->num_args; i++)
            if (n->args[i])
                fprintf(out, "  \"%s\" -> \"%s\";\n", n->args[i]->name, n->name);
    fprintf(out, "}\n");
}
