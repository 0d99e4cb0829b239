/*
 * runtime_files.c - which runtime sources a generated model needs.
 *
 * A generated folder carries only the runtime's .c files that its NAME.c
 * reaches: the files defining the fxrt_ functions NAME.c names, then the
 * files defining the fxrt_ functions those files name, to a fixed point.
 * The headers all go (they declare, and their static inline helpers, which
 * NAME.c may call too, call each other, never a .c file).  The sources read are the runtime embedded in
 * fxcc, so the answer is the one for the files written.
 *
 * A definition is an external function of a .c file: a line at column 0 that
 * is not static, a typedef or a declaration, naming fxrt_NAME( ; or a static
 * inline function of a header (a line with "inline" naming fxrt_NAME( ).  Families defined through a macro (fxrt_reduce_##S) are
 * recorded as the prefix before the ##, and a name that no definition
 * matches exactly takes the file of the longest such prefix it starts with.
 * A name of NAME.c that still matches no definition (a runtime function this
 * scan cannot place) makes the whole runtime needed: a folder is never left
 * without a file it links against.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/embedded.h"

typedef struct Definition {
    const char *name; /* into the embedded text: not NUL-terminated */
    size_t len;
    bool prefix;      /* a macro family: name## */
    int file;         /* embedded index */
} Definition;

typedef struct Index {
    Definition *defs;
    int count, cap;
} Index;

static bool is_ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

static bool is_runtime_file(int i, const char *suffix)
{
    const char *f = fxcc_embedded_names[i];
    size_t n = strlen(f);
    return strncmp(f, "fxrt", 4) == 0 && n > 2 && strcmp(f + n - 2, suffix) == 0;
}

static bool is_runtime_source(int i) { return is_runtime_file(i, ".c"); }

static bool index_add(Index *ix, const char *name, size_t len, bool prefix, int file)
{
    if (ix->count == ix->cap) {
        int cap = ix->cap ? 2 * ix->cap : 256;
        Definition *d = fx_realloc_array(ix->defs, (size_t)cap, sizeof *d);
        if (!d)
            return false;
        ix->defs = d;
        ix->cap = cap;
    }
    ix->defs[ix->count++] = (Definition){name, len, prefix, file};
    return true;
}

static bool starts_with_word(const char *line, const char *eol, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(eol - line) > n && strncmp(line, word, n) == 0 && !is_ident(line[n]);
}

static bool line_has(const char *line, const char *eol, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = line; p + n <= eol; p++)
        if (!memcmp(p, word, n))
            return true;
    return false;
}

/* The definitions of one runtime source or header. */
static bool index_file(Index *ix, int file)
{
    bool header = !is_runtime_source(file);
    const char *text = (const char *)fxcc_embedded_data[file];
    const char *end = text + fxcc_embedded_sizes[file];
    for (const char *line = text; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            eol = end;
        const char *last = eol;
        while (last > line && isspace((unsigned char)last[-1]))
            last--;
        bool defines;
        if (header) {
            defines = isalpha((unsigned char)line[0]) && line_has(line, eol, "inline");
        } else {
            defines = isalpha((unsigned char)line[0]) && !starts_with_word(line, eol, "static") &&
                      !starts_with_word(line, eol, "typedef") &&
                      !starts_with_word(line, eol, "extern") && last > line && last[-1] != ';';
        }
        for (const char *p = line; p + 5 < eol; p++) {
            if (strncmp(p, "fxrt_", 5) != 0 || (p > line && is_ident(p[-1])))
                continue;
            const char *q = p;
            while (q < eol && is_ident(*q))
                q++;
            bool pasted = q + 1 < eol && q[0] == '#' && q[1] == '#';
            /* a macro family's definition: "    void fxrt_reduce_##S(" */
            if (pasted && memchr(q, '(', (size_t)(eol - q)) && !index_add(ix, p, (size_t)(q - p), true, file))
                return false;
            if (!pasted && defines && q < eol && *q == '(') {
                if (!index_add(ix, p, (size_t)(q - p), false, file))
                    return false;
                break; /* the first name on the line is the function's */
            }
            p = q;
        }
        line = eol + 1;
    }
    return true;
}

/* The file defining name[0, len), or -1. */
static int index_find(const Index *ix, const char *name, size_t len)
{
    int best = -1;
    size_t best_len = 0;
    for (int k = 0; k < ix->count; k++) {
        const Definition *d = &ix->defs[k];
        if (!d->prefix && d->len == len && !memcmp(d->name, name, len))
            return d->file;
        if (d->prefix && d->len < len && d->len > best_len && !memcmp(d->name, name, d->len)) {
            best = d->file;
            best_len = d->len;
        }
    }
    return best;
}

/* Marks the files the fxrt_ names of text[0, len) need, and theirs; false
 * when a name called in text (followed by '(') matches no definition. */
static bool mark_names(const Index *ix, const char *text, size_t len, bool *needed,
                       bool check_calls)
{
    const char *end = text + len;
    bool placed = true;
    for (const char *p = text; p + 5 < end; p++) {
        /* comments name functions too ("as fxrt_binary does"): skip them */
        if (p[0] == '/' && p[1] == '*') {
            const char *close = p + 2;
            while (close + 1 < end && !(close[0] == '*' && close[1] == '/'))
                close++;
            p = close + 1;
            continue;
        }
        if (p[0] == '/' && p[1] == '/') {
            while (p + 1 < end && p[1] != '\n')
                p++;
            continue;
        }
        if (strncmp(p, "fxrt_", 5) != 0 || (p > text && is_ident(p[-1])))
            continue;
        const char *q = p;
        while (q < end && is_ident(*q))
            q++;
        int file = index_find(ix, p, (size_t)(q - p));
        /* a header's inline function: nothing to add (the headers declare
         * every function, so their text is no list of what is called) */
        if (file >= 0 && !is_runtime_source(file)) {
            p = q - 1;
            continue;
        }
        if (file >= 0 && !needed[file]) {
            needed[file] = true;
            mark_names(ix, (const char *)fxcc_embedded_data[file], fxcc_embedded_sizes[file],
                       needed, false);
        } else if (file < 0 && check_calls && q < end && *q == '(') {
            placed = false;
        }
        p = q - 1;
    }
    return placed;
}

FxStatus cg_runtime_files_needed(const char *model_c, size_t len, bool *needed, Diag *d)
{
    Index ix = {0};
    bool ok = true;
    /* .c files first: an exact name is found in the first file defining it */
    for (int i = 0; ok && i < fxcc_embedded_count; i++)
        if (is_runtime_source(i))
            ok = index_file(&ix, i);
    for (int i = 0; ok && i < fxcc_embedded_count; i++)
        if (is_runtime_file(i, ".h"))
            ok = index_file(&ix, i);
    if (!ok) {
        free(ix.defs);
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < fxcc_embedded_count; i++)
        needed[i] = false;
    if (!mark_names(&ix, model_c, len, needed, true))
        for (int i = 0; i < fxcc_embedded_count; i++)
            needed[i] = is_runtime_source(i);
    free(ix.defs);
    return FX_OK;
}
