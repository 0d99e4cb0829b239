/*
 * emit.c - the text the op emitters write and the small helpers they share:
 * the growable buffer behind EmitCtx.text, emit_line (one indented line of a
 * node's block), C type names, float and integer literals and constant
 * arrays.  Nothing here knows about the arena or the file layout; that is
 * codegen/'s business, which reads the buffer after the emitter returns.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* The indentation of a statement inside a node's block of NAME_run. */
static const char block_indent[] = "        ";

/* Room for n more bytes and the NUL; false (and t->failed) if there is none. */
static bool reserve(EmitText *t, size_t n)
{
    if (t->failed)
        return false;
    size_t need = t->len + n + 1;
    if (need <= t->cap)
        return true;
    size_t cap = t->cap ? t->cap : 1024;
    while (cap < need)
        cap *= 2;
    char *grown = fx_realloc_array(t->data, cap, 1);
    if (!grown) {
        t->failed = true;
        return false;
    }
    t->data = grown;
    t->cap = cap;
    return true;
}

void emit_text_append(EmitText *t, const char *s, size_t n)
{
    if (!reserve(t, n))
        return;
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = '\0';
}

void emit_text_vprintf(EmitText *t, const char *fmt, va_list ap)
{
    if (t->failed)
        return;
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) {
        t->failed = true;
        return;
    }
    if (!reserve(t, (size_t)n))
        return;
    vsnprintf(t->data + t->len, t->cap - t->len, fmt, ap);
    t->len += (size_t)n;
}

void emit_text_printf(EmitText *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit_text_vprintf(t, fmt, ap);
    va_end(ap);
}

void emit_text_free(EmitText *t)
{
    fx_free(t->data);
    *t = (EmitText){0};
}

void emit_line(EmitCtx *c, const char *fmt, ...)
{
    va_list ap;
    emit_text_printf(&c->text, "%s", block_indent);
    va_start(ap, fmt);
    emit_text_vprintf(&c->text, fmt, ap);
    va_end(ap);
    emit_text_printf(&c->text, "\n");
}

const char *c_type_name(DType t)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: return "float";
    case FXRT_DTYPE_FLOAT64: return "double";
    case FXRT_DTYPE_INT8: return "int8_t";
    case FXRT_DTYPE_UINT8: return "uint8_t";
    case FXRT_DTYPE_INT16: return "int16_t";
    case FXRT_DTYPE_UINT16: return "uint16_t";
    case FXRT_DTYPE_INT32: return "int32_t";
    case FXRT_DTYPE_UINT32: return "uint32_t";
    case FXRT_DTYPE_INT64: return "int64_t";
    case FXRT_DTYPE_UINT64: return "uint64_t";
    case FXRT_DTYPE_BOOL: return "uint8_t";
    default: return "void";
    }
}

const char *c_dtype_enum(DType t)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: return "FXRT_DTYPE_FLOAT32";
    case FXRT_DTYPE_FLOAT64: return "FXRT_DTYPE_FLOAT64";
    case FXRT_DTYPE_INT8: return "FXRT_DTYPE_INT8";
    case FXRT_DTYPE_UINT8: return "FXRT_DTYPE_UINT8";
    case FXRT_DTYPE_INT16: return "FXRT_DTYPE_INT16";
    case FXRT_DTYPE_UINT16: return "FXRT_DTYPE_UINT16";
    case FXRT_DTYPE_INT32: return "FXRT_DTYPE_INT32";
    case FXRT_DTYPE_UINT32: return "FXRT_DTYPE_UINT32";
    case FXRT_DTYPE_INT64: return "FXRT_DTYPE_INT64";
    case FXRT_DTYPE_UINT64: return "FXRT_DTYPE_UINT64";
    case FXRT_DTYPE_BOOL: return "FXRT_DTYPE_BOOL";
    default: return "FXRT_DTYPE_UNDEFINED";
    }
}

char *c_float_literal(float v, char *buf, size_t cap)
{
    if (isnan(v))
        snprintf(buf, cap, "NAN");
    else if (isinf(v))
        snprintf(buf, cap, v > 0 ? "INFINITY" : "-INFINITY");
    else if (v == 0)
        snprintf(buf, cap, signbit(v) ? "-0.0f" : "0.0f");
    else {
        /* %.9g round-trips every float; force a '.' or exponent so the f suffix is valid */
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%.9g", (double)v);
        if (!strpbrk(tmp, ".e"))
            strcat(tmp, ".0");
        snprintf(buf, cap, "%sf", tmp);
    }
    return buf;
}

/* INT64_MIN has no literal in C: -9223372036854775808 is minus an
 * out-of-range constant. */
static void int64_literal(int64_t v, char *buf, size_t cap)
{
    if (v == INT64_MIN)
        snprintf(buf, cap, "INT64_MIN");
    else
        snprintf(buf, cap, "%lld", (long long)v);
}

/* Writes a constant array in lines of at most 8 values. */
static void emit_array(EmitCtx *c, const char *ctype, const char *name, int64_t count,
                       const int64_t *iv, const float *fv)
{
    if (count == 0) {
        emit_line(c, "static const %s %s[1] = {0};", ctype, name);
        return;
    }
    if (count <= 8) {
        char buf[8 * 40 + 64];
        size_t len = 0;
        for (int64_t i = 0; i < count; i++) {
            char lit[48];
            if (iv)
                int64_literal(iv[i], lit, sizeof lit);
            else
                c_float_literal(fv[i], lit, sizeof lit);
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? ", " : "", lit);
        }
        emit_line(c, "static const %s %s[%lld] = {%s};", ctype, name, (long long)count, buf);
        return;
    }
    emit_line(c, "static const %s %s[%lld] = {", ctype, name, (long long)count);
    for (int64_t i = 0; i < count; i += 8) {
        char buf[8 * 40 + 8];
        size_t len = 0;
        for (int64_t j = i; j < count && j < i + 8; j++) {
            char lit[48];
            if (iv)
                int64_literal(iv[j], lit, sizeof lit);
            else
                c_float_literal(fv[j], lit, sizeof lit);
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s,", lit);
        }
        emit_line(c, "    %s", buf);
    }
    emit_line(c, "};");
}

void emit_int64_array(EmitCtx *c, const char *name, const int64_t *v, int64_t count)
{
    emit_array(c, "int64_t", name, count, v, NULL);
}

void emit_int32_array(EmitCtx *c, const char *name, const int64_t *v, int64_t count)
{
    emit_array(c, "int32_t", name, count, v, NULL);
}

void emit_float_array(EmitCtx *c, const char *name, const float *v, int64_t count)
{
    emit_array(c, "float", name, count, NULL, v);
}
