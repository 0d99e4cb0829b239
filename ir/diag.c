/*
 * diag.c - the caller-owned error list.  Every failure caused by input (a
 * file, an attribute, a command-line flag) is appended here with as much
 * context as is known, so the CLI can print all of them at once.  If memory
 * runs out while recording, the entry is dropped but the status still
 * propagates: a diagnostic never turns into a crash.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

void diag_init(Diag *d) { memset(d, 0, sizeof *d); }

void diag_clear(Diag *d)
{
    for (size_t i = 0; i < d->count; i++) {
        free(d->entries[i].file);
        free(d->entries[i].node);
        free(d->entries[i].message);
    }
    d->count = 0;
}

void diag_free(Diag *d)
{
    diag_clear(d);
    free(d->entries);
    d->entries = NULL;
    d->cap = 0;
}

static char *dup_or_null(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *p = fx_malloc(n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p;
}

static FxStatus diag_vadd(Diag *d, FxStatus st, const char *file, const char *node,
                          long long offset, const char *fmt, va_list ap)
{
    if (!d)
        return st;
    if (d->count == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        DiagEntry *e = fx_realloc_array(d->entries, cap, sizeof *e);
        if (!e)
            return st;
        d->entries = e;
        d->cap = cap;
    }
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    DiagEntry *e = &d->entries[d->count++];
    e->status = st;
    e->file = dup_or_null(file ? file : d->file);
    e->node = dup_or_null(node);
    e->offset = offset;
    e->message = dup_or_null(msg);
    return st;
}

FxStatus diag_error(Diag *d, FxStatus st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(d, st, NULL, NULL, -1, fmt, ap);
    va_end(ap);
    return st;
}

FxStatus diag_errno(Diag *d, int errnum, const char *fmt, ...)
{
    char what[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (errnum == ENOMEM)
        return diag_error(d, FX_ERR_NOMEM, "%s: out of memory", what);
    return diag_error(d, FX_ERR_IO, "%s: %s", what, strerror(errnum));
}

FxStatus diag_error_at(Diag *d, FxStatus st, const char *file, long long offset,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(d, st, file, NULL, offset, fmt, ap);
    va_end(ap);
    return st;
}

FxStatus diag_node_error(Diag *d, FxStatus st, const Node *n, const char *fmt, ...)
{
    char where[512];
    const char *file = NULL;
    if (n) {
        const char *kind = n->op ? n->op->name : fx_opcode_name(n->opcode);
        if (n->onnx_name && n->onnx_name[0] && strcmp(n->onnx_name, n->name) != 0)
            snprintf(where, sizeof where, "%s (%s, ONNX node '%s')", n->name, kind, n->onnx_name);
        else
            snprintf(where, sizeof where, "%s (%s)", n->name, kind);
        if (n->graph)
            file = n->graph->source;
    }
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(d, st, file, n ? where : NULL, -1, fmt, ap);
    va_end(ap);
    return st;
}

void diag_print(const Diag *d, FILE *out)
{
    for (size_t i = 0; i < d->count; i++) {
        const DiagEntry *e = &d->entries[i];
        fputs("fxcc: error: ", out);
        if (e->file) {
            fputs(e->file, out);
            if (e->offset >= 0)
                fprintf(out, ":%lld", e->offset);
            fputs(": ", out);
        }
        if (e->node)
            fprintf(out, "node %s: ", e->node);
        fprintf(out, "%s\n", e->message ? e->message : "(out of memory while reporting)");
    }
}

const char *fx_status_name(FxStatus st)
{
    switch (st) {
    case FX_OK: return "ok";
    case FX_ERR_IO: return "i/o error";
    case FX_ERR_FORMAT: return "malformed input";
    case FX_ERR_UNSUPPORTED: return "unsupported";
    case FX_ERR_SHAPE: return "shape error";
    case FX_ERR_INVALID: return "invalid argument";
    case FX_ERR_NOMEM: return "out of memory";
    case FX_ERR_RUNTIME: return "runtime error";
    }
    return "unknown";
}
