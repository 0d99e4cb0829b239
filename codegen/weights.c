/*
 * weights.c - writes the weights above CG_LARGE_WEIGHT_BYTES, which emit_c.c
 * lists but never holds as text: NAME_weights.bin (raw little-endian bytes,
 * each weight at a 64-byte aligned offset) with NAME_weights.S to embed it,
 * or NAME_weights.c with exact hexadecimal float literals.  Both stream
 * straight from the tensors to the file through one 64 KiB buffer, so a
 * model's weights cost no more memory than the model already holds.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

CgWeights cg_weights_mode(CgWeights requested, size_t large_weight_bytes)
{
    /* Both targets' toolchains take GNU-style .S with .incbin: gcc and clang
     * on the host, arm-none-eabi-gcc and clang for Cortex-M.  Others (IAR,
     * Keil armcc) need --weights c. */
    if (requested != CG_WEIGHTS_AUTO)
        return requested;
    return large_weight_bytes > CG_INCBIN_AUTO_BYTES ? CG_WEIGHTS_INCBIN : CG_WEIGHTS_C;
}

bool cg_valid_section(const char *s)
{
    if (!s || !*s || strlen(s) >= 128)
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '.' || *s == '_' || *s == '$'))
            return false;
    return true;
}

/* A buffered writer for the large weight files: one fwrite per 64 KiB. */
typedef struct Out {
    FILE *f;
    char buf[1 << 16];
    size_t len;
    bool failed;
} Out;

static void out_write(Out *o, const void *data, size_t n)
{
    if (o->len + n > sizeof o->buf) {
        if (o->len && fwrite(o->buf, 1, o->len, o->f) != o->len)
            o->failed = true;
        o->len = 0;
    }
    if (n > sizeof o->buf) {
        if (fwrite(data, 1, n, o->f) != n)
            o->failed = true;
        return;
    }
    memcpy(o->buf + o->len, data, n);
    o->len += n;
}

static void out_string(Out *o, const char *s)
{
    out_write(o, s, strlen(s));
}

static FxStatus out_open(Out *o, const char *dir, const char *name, char *path, size_t cap,
                         Diag *d)
{
    snprintf(path, cap, "%s/%s", dir, name);
    o->len = 0;
    o->failed = false;
    o->f = fopen(path, "wb");
    return o->f ? FX_OK : diag_errno(d, errno, "cannot write %s", path);
}

static FxStatus out_close(Out *o, const char *path, Diag *d)
{
    if (o->len && fwrite(o->buf, 1, o->len, o->f) != o->len)
        o->failed = true;
    if (fclose(o->f) != 0)
        o->failed = true;
    return o->failed ? diag_error(d, FX_ERR_IO, "cannot write %s", path) : FX_OK;
}

/* The exact float as a C99 hexadecimal literal ("0x1.8p+1f"): no rounding
 * to think about, and a few integer operations instead of printf. */
static size_t hex_float_literal(float f, char *buf)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bool negative = bits >> 31;
    int exponent = (int)((bits >> 23) & 0xff);
    uint32_t fraction = (bits & 0x7fffff) << 1; /* 24 bits: six hex digits */
    const char *special = exponent == 0xff ? (fraction ? "NAN" : negative ? "-INFINITY" : "INFINITY")
                          : exponent == 0 && fraction == 0 ? (negative ? "-0.0f" : "0.0f")
                                                           : NULL;
    if (special) {
        strcpy(buf, special);
        return strlen(special);
    }
    char *p = buf;
    if (negative)
        *p++ = '-';
    *p++ = '0';
    *p++ = 'x';
    *p++ = exponent ? '1' : '0'; /* subnormals: 0x0.xxxp-126 */
    if (fraction) {
        *p++ = '.';
        for (int shift = 20; shift >= 0 && ((fraction << (20 - shift)) & 0xffffff); shift -= 4)
            *p++ = "0123456789abcdef"[(fraction >> shift) & 0xf];
    }
    int e = exponent ? exponent - 127 : -126;
    *p++ = 'p';
    *p++ = e < 0 ? '-' : '+';
    unsigned magnitude = (unsigned)(e < 0 ? -e : e);
    if (magnitude >= 100)
        *p++ = (char)('0' + magnitude / 100);
    if (magnitude >= 10)
        *p++ = (char)('0' + magnitude / 10 % 10);
    *p++ = (char)('0' + magnitude % 10);
    *p++ = 'f';
    *p = '\0';
    return (size_t)(p - buf);
}

static void out_element(Out *o, const Tensor *x, int64_t i)
{
    char lit[64];
    switch (x->type.dtype) {
    case FXRT_DTYPE_FLOAT32:
        out_write(o, lit, hex_float_literal(((const float *)x->data)[i], lit));
        return;
    case FXRT_DTYPE_FLOAT64: {
        double f = ((const double *)x->data)[i];
        if (f != f)
            snprintf(lit, sizeof lit, "NAN");
        else if (f > 1.7976931348623157e308 || f < -1.7976931348623157e308)
            snprintf(lit, sizeof lit, f > 0 ? "INFINITY" : "-INFINITY");
        else
            snprintf(lit, sizeof lit, "%a", f); /* C99 hex float: exact */
        break;
    }
    case FXRT_DTYPE_UINT64:
        snprintf(lit, sizeof lit, "%lluu", (unsigned long long)((const uint64_t *)x->data)[i]);
        break;
    default: {
        int64_t iv = tensor_get_int(x, i);
        if (iv == INT64_MIN)
            snprintf(lit, sizeof lit, "INT64_MIN");
        else
            snprintf(lit, sizeof lit, "%lld", (long long)iv);
    }
    }
    out_string(o, lit);
}

static void out_printf(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(Out *o, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        o->failed = true;
    else
        out_write(o, line, (size_t)n);
}

static Out *out_new(Diag *d)
{
    Out *o = fx_alloc_array(1, sizeof *o);
    if (!o)
        diag_error(d, FX_ERR_NOMEM, "out of memory");
    return o;
}

FxStatus cg_write_weights_c(const CgWeightFiles *w, const char *dir, Diag *d)
{
    const char *N = w->name;
    char name[300], path[4400];
    snprintf(name, sizeof name, "%s_weights.c", N);
    Out *o = out_new(d);
    if (!o)
        return FX_ERR_NOMEM;
    FxStatus st = out_open(o, dir, name, path, sizeof path, d);
    if (st != FX_OK) {
        free(o);
        return st;
    }
    out_printf(o, "/* %s_weights.c - generated by fxcc from %s: the weights of %s.c above\n"
                  " * %d bytes, as exact hexadecimal float literals.  Do not edit. */\n"
                  "#include <math.h>\n#include <stdint.h>\n\n",
               N, w->model, N, (int)CG_LARGE_WEIGHT_BYTES);
    char macros[2048];
    cg_write_weight_macros(macros, sizeof macros, N, w->place_c ? w->section : NULL);
    out_string(o, macros);
    for (int k = 0; k < w->count; k++) {
        const Tensor *x = w->weights[k].tensor;
        char shape[256];
        int64_t n = tensor_numel(x);
        out_printf(o, "/* %s, %zu bytes */\nconst %s %s[%lld] %s_WEIGHT_ALIGN%s%s%s",
                   type_format(&x->type, shape, sizeof shape), tensor_nbytes(x),
                   c_type_name(x->type.dtype), w->weights[k].symbol, (long long)n, N,
                   w->place_c ? " " : "", w->place_c ? N : "",
                   w->place_c ? "_WEIGHT_SECTION = {" : " = {");
        for (int64_t i = 0; i < n; i++) {
            out_string(o, i % 5 ? " " : "\n    "); /* lines under 100 columns */
            out_element(o, x, i);
            out_string(o, ",");
        }
        out_string(o, "\n};\n\n");
    }
    st = out_close(o, path, d);
    free(o);
    return st;
}

void cg_write_weight_macros(char *buf, size_t cap, const char *name, const char *section)
{
    int n = snprintf(buf, cap,
                     "/* The weights' arrays of 64 bytes or more start a cache line on x86-64,\n"
                     " * where the AVX-512 kernels load 64 bytes of packed weights at a time (a\n"
                     " * load across two lines costs two).  Elsewhere they keep their type's\n"
                     " * alignment: no flash spent on padding. */\n"
                     "#if defined(__GNUC__) && defined(__x86_64__)\n"
                     "#define %s_WEIGHT_ALIGN __attribute__((aligned(64)))\n"
                     "#else\n#define %s_WEIGHT_ALIGN\n#endif\n\n",
                     name, name);
    if (!section || n < 0 || (size_t)n >= cap)
        return;
    snprintf(buf + n, cap - (size_t)n,
             "/* --weights-section: the weights' arrays in section %s (GCC and Clang;\n"
             " * other compilers leave them where const data goes). */\n"
             "#if defined(__GNUC__)\n#define %s_WEIGHT_SECTION __attribute__((section(\"%s\")))\n"
             "#else\n#define %s_WEIGHT_SECTION\n#endif\n\n",
             section, name, section, name);
}

/* Element bytes of x in little-endian order, whatever the host's order. */
static void out_little_endian(Out *o, const Tensor *x)
{
    const uint16_t probe = 1;
    size_t bytes = tensor_nbytes(x);
    int64_t n = tensor_numel(x);
    size_t elem = n ? bytes / (size_t)n : 0;
    const unsigned char *p = x->data;
    if (*(const unsigned char *)&probe == 1 || elem <= 1) {
        out_write(o, p, bytes);
        return;
    }
    for (size_t i = 0; i < bytes; i += elem)
        for (size_t b = elem; b-- > 0;)
            out_write(o, p + i + b, 1);
}

/* Where weight k's bytes end in the blob, padding to the next included. */
static size_t blob_end(const CgWeightFiles *w, int k)
{
    return k + 1 < w->count ? w->weights[k + 1].offset : w->blob_bytes;
}

static FxStatus write_blob(const CgWeightFiles *w, const char *dir, Out *o, Diag *d)
{
    char name[300], path[4400];
    snprintf(name, sizeof name, "%s_weights.bin", w->name);
    FxStatus st = out_open(o, dir, name, path, sizeof path, d);
    if (st != FX_OK)
        return st;
    static const char zeros[64];
    for (int k = 0; k < w->count; k++) {
        const Tensor *x = w->weights[k].tensor;
        out_little_endian(o, x);
        out_write(o, zeros, blob_end(w, k) - w->weights[k].offset - tensor_nbytes(x));
    }
    return out_close(o, path, d);
}

/* NAME_weights.S uses only directives GNU as, Clang and arm-none-eabi-as read
 * alike: %-style types (ARM takes '@' for a comment) and C comments (it goes
 * through the C preprocessor).  One .incbin per weight, each over its bytes
 * and the padding after them, so that every label sits at its offset. */
static FxStatus write_assembly(const CgWeightFiles *w, const char *dir, Out *o, Diag *d)
{
    const char *N = w->name;
    char name[300], path[4400];
    snprintf(name, sizeof name, "%s_weights.S", N);
    FxStatus st = out_open(o, dir, name, path, sizeof path, d);
    if (st != FX_OK)
        return st;
    out_printf(o, "/*\n * %s_weights.S - generated by fxcc from %s.  Do not edit.\n *\n"
                  " * Embeds %s_weights.bin (%zu bytes: the weights of %s.c above %d bytes)\n"
                  " * in section %s, one symbol per weight.  Assemble with -I of\n"
                  " * this folder so that .incbin finds the blob.\n */\n",
               N, w->model, N, w->blob_bytes, N, (int)CG_LARGE_WEIGHT_BYTES, w->section);
    out_printf(o, "    .section %s, \"a\", %%progbits\n    .balign 64\n"
                  "    .globl %s_weights\n    .type %s_weights, %%object\n%s_weights:\n",
               w->section, N, N, N);
    for (int k = 0; k < w->count; k++) {
        const char *sym = w->weights[k].symbol;
        size_t start = w->weights[k].offset;
        out_printf(o, "    .globl %s\n    .type %s, %%object\n    .size %s, %zu\n%s:\n"
                      "    .incbin \"%s_weights.bin\", %zu, %zu\n",
                   sym, sym, sym, tensor_nbytes(w->weights[k].tensor), sym, N, start,
                   blob_end(w, k) - start);
    }
    out_printf(o, "    .size %s_weights, %zu\n", N, w->blob_bytes);
    out_printf(o, "#if defined(__linux__) && defined(__ELF__)\n"
                  "    .section .note.GNU-stack, \"\", %%progbits /* no executable stack */\n"
                  "#endif\n");
    return out_close(o, path, d);
}

FxStatus cg_write_weights_incbin(const CgWeightFiles *w, const char *dir, Diag *d)
{
    Out *o = out_new(d);
    if (!o)
        return FX_ERR_NOMEM;
    FxStatus st = write_blob(w, dir, o, d);
    if (st == FX_OK)
        st = write_assembly(w, dir, o, d);
    free(o);
    return st;
}
