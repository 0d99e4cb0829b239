/*
 * fxio.c - reads .npy and ONNX TensorProto .pb tensor files into a caller's
 * buffer and writes .npy files, for the main.c that fxcc emits.
 *
 * The caller knows the exact element type and shape a model input has, so
 * reading is a check as much as a parse: a file is accepted only when its
 * type and shape equal the expected ones, and its data is copied straight
 * into the caller's buffer.  The whole file is read into memory first, with a
 * size cap derived from the expected tensor so that a huge file costs
 * nothing.
 *
 * .npy: versions 1.0-3.0; the header dict must hold exactly 'descr',
 * 'fortran_order' and 'shape'.  Refused: big-endian data, Fortran order
 * (unless it is the same layout as C order), object or structured types,
 * truncated data and trailing bytes.
 *
 * .pb: a minimal protobuf wire reader for onnx.TensorProto: dims (1, packed
 * or not), data_type (2), raw_data (9) and the typed fields float_data (4),
 * int32_data (5, also int8/uint8/int16/uint16/bool), int64_data (7),
 * double_data (10) and uint64_data (11, also uint32).  Unknown fields are
 * skipped as protobuf says.  Refused: segments, external data, strings, data
 * in more than one place or in the wrong typed field, element counts that do
 * not match the dims, typed values outside the element type (300 in a uint8
 * tensor), truncated or overlong varints.
 *
 * Multi-byte data is little-endian in both formats; it is converted to the
 * host's order, so this also works on a big-endian host.
 */
#include "fxio.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Element types                                                              */
/* ------------------------------------------------------------------------- */

typedef struct FxioType {
    int dtype;
    size_t size;
    const char *name;
    const char *npy; /* .npy descr without its byte-order character */
} FxioType;

static const FxioType fxio_types[] = {
    {FXIO_DTYPE_FLOAT32, 4, "float32", "f4"}, {FXIO_DTYPE_FLOAT64, 8, "float64", "f8"},
    {FXIO_DTYPE_INT8, 1, "int8", "i1"},       {FXIO_DTYPE_INT16, 2, "int16", "i2"},
    {FXIO_DTYPE_INT32, 4, "int32", "i4"},     {FXIO_DTYPE_INT64, 8, "int64", "i8"},
    {FXIO_DTYPE_UINT8, 1, "uint8", "u1"},     {FXIO_DTYPE_UINT16, 2, "uint16", "u2"},
    {FXIO_DTYPE_UINT32, 4, "uint32", "u4"},   {FXIO_DTYPE_UINT64, 8, "uint64", "u8"},
    {FXIO_DTYPE_BOOL, 1, "bool", "b1"},
};

#define FXIO_NUM_TYPES (sizeof fxio_types / sizeof fxio_types[0])

static const FxioType *fxio_type(int dtype)
{
    size_t i;
    for (i = 0; i < FXIO_NUM_TYPES; i++)
        if (fxio_types[i].dtype == dtype)
            return &fxio_types[i];
    return NULL;
}

size_t fxio_dtype_size(int dtype)
{
    const FxioType *t = fxio_type(dtype);
    return t ? t->size : 0;
}

const char *fxio_dtype_name(int dtype)
{
    const FxioType *t = fxio_type(dtype);
    return t ? t->name : "unsupported";
}

/* Names of ONNX types that may appear in a .pb but are not handled, so that
 * the message says "float16" rather than "type 10". */
static const char *fxio_onnx_type_name(int dtype)
{
    switch (dtype) {
    case 0: return "undefined";
    case 8: return "string";
    case 10: return "float16";
    case 14: return "complex64";
    case 15: return "complex128";
    case 16: return "bfloat16";
    default: return fxio_dtype_name(dtype);
    }
}

/* ------------------------------------------------------------------------- */
/* Errors, shapes, byte order                                                 */
/* ------------------------------------------------------------------------- */

static void fxio_fail(char *err, size_t cap, const char *name, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (!err || cap == 0)
        return;
    n = snprintf(err, cap, "%s: ", name ? name : "(tensor)");
    if (n < 0 || (size_t)n >= cap)
        return;
    va_start(ap, fmt);
    vsnprintf(err + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
}

/* "[3, 4]" into buf (truncated to cap). */
static const char *fxio_shape_text(char *buf, size_t cap, int rank, const int64_t *dims)
{
    size_t used = 0;
    int i, n;
    n = snprintf(buf, cap, "[");
    if (n < 0)
        return buf;
    used = (size_t)n;
    for (i = 0; i < rank && used < cap; i++) {
        n = snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)dims[i]);
        if (n < 0)
            return buf;
        used += (size_t)n;
    }
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
    return buf;
}

static int fxio_host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Copies count elements of size bytes from little-endian src to host-order
 * dst (or back: the conversion is its own inverse). */
static void fxio_copy_le(void *dst, const void *src, size_t count, size_t size)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    size_t i, j;
    if (size == 1 || fxio_host_is_little_endian()) {
        if (count)
            memcpy(d, s, count * size);
        return;
    }
    for (i = 0; i < count; i++)
        for (j = 0; j < size; j++)
            d[i * size + j] = s[i * size + size - 1 - j];
}

/* Checks the caller's type and shape; sets the element count and bytes. */
static int fxio_check_request(const char *name, int dtype, int rank, const int64_t *dims,
                              size_t *numel, size_t *nbytes, char *err, size_t cap)
{
    const FxioType *t = fxio_type(dtype);
    size_t n = 1;
    int i;
    if (!t) {
        fxio_fail(err, cap, name, "element type %d (%s) is not supported", dtype,
                  fxio_onnx_type_name(dtype));
        return -1;
    }
    if (rank < 0 || rank > FXIO_MAX_RANK || (rank > 0 && !dims)) {
        fxio_fail(err, cap, name, "bad expected rank %d", rank);
        return -1;
    }
    for (i = 0; i < rank; i++) {
        if (dims[i] < 0 || (uint64_t)dims[i] > (uint64_t)((size_t)-1)) {
            fxio_fail(err, cap, name, "bad expected dimension %lld", (long long)dims[i]);
            return -1;
        }
        if (dims[i] != 0 && n > ((size_t)-1) / (size_t)dims[i]) {
            fxio_fail(err, cap, name, "expected tensor is too large");
            return -1;
        }
        n *= (size_t)dims[i];
    }
    if (n > ((size_t)-1) / t->size) {
        fxio_fail(err, cap, name, "expected tensor is too large");
        return -1;
    }
    *numel = n;
    *nbytes = n * t->size;
    return 0;
}

static int fxio_shape_mismatch(const char *name, const char *what, int frank,
                               const int64_t *fdims, int rank, const int64_t *dims, char *err,
                               size_t cap)
{
    char a[256], b[256];
    int i;
    if (frank == rank) {
        for (i = 0; i < rank; i++)
            if (fdims[i] != dims[i])
                break;
        if (i == rank)
            return 0;
    }
    fxio_fail(err, cap, name, "%s shape is %s, expected %s", what,
              fxio_shape_text(a, sizeof a, frank, fdims), fxio_shape_text(b, sizeof b, rank, dims));
    return -1;
}

/* bool data must be 0 or 1: anything else is not a value a model can see. */
static int fxio_check_bool(const char *name, const unsigned char *p, size_t n, char *err,
                           size_t cap)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (p[i] > 1) {
            fxio_fail(err, cap, name, "bool element %lu is %u, not 0 or 1", (unsigned long)i,
                      (unsigned)p[i]);
            return -1;
        }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* .npy                                                                        */
/* ------------------------------------------------------------------------- */

typedef struct NpyHeader {
    const char *s;
    size_t len, pos;
    char descr[16];
    int fortran;
    int rank;
    int64_t dims[FXIO_MAX_RANK];
} NpyHeader;

static void npy_skip_space(NpyHeader *h)
{
    while (h->pos < h->len &&
           (h->s[h->pos] == ' ' || h->s[h->pos] == '\t' || h->s[h->pos] == '\n' ||
            h->s[h->pos] == '\r'))
        h->pos++;
}

static int npy_accept(NpyHeader *h, char c)
{
    npy_skip_space(h);
    if (h->pos < h->len && h->s[h->pos] == c) {
        h->pos++;
        return 1;
    }
    return 0;
}

/* A quoted Python string without escapes into out (cap bytes). */
static int npy_string(NpyHeader *h, char *out, size_t cap)
{
    char q;
    size_t n = 0;
    npy_skip_space(h);
    if (h->pos >= h->len || (h->s[h->pos] != '\'' && h->s[h->pos] != '"'))
        return -1;
    q = h->s[h->pos++];
    while (h->pos < h->len && h->s[h->pos] != q) {
        if (h->s[h->pos] == '\\' || n + 1 >= cap)
            return -1;
        out[n++] = h->s[h->pos++];
    }
    if (h->pos >= h->len)
        return -1;
    h->pos++;
    out[n] = '\0';
    return 0;
}

static int npy_word(NpyHeader *h, const char *w)
{
    size_t n = strlen(w);
    npy_skip_space(h);
    if (h->len - h->pos >= n && memcmp(h->s + h->pos, w, n) == 0) {
        h->pos += n;
        return 1;
    }
    return 0;
}

/* (3, 4) / (3,) / () */
static int npy_shape(NpyHeader *h)
{
    h->rank = 0;
    if (!npy_accept(h, '('))
        return -1;
    if (npy_accept(h, ')'))
        return 0;
    for (;;) {
        int64_t v = 0;
        int digits = 0;
        npy_skip_space(h);
        while (h->pos < h->len && h->s[h->pos] >= '0' && h->s[h->pos] <= '9') {
            int d = h->s[h->pos++] - '0';
            if (v > (INT64_MAX - d) / 10)
                return -1;
            v = v * 10 + d;
            digits++;
        }
        if (!digits || h->rank >= FXIO_MAX_RANK)
            return -1;
        if (h->pos < h->len && h->s[h->pos] == 'L') /* written by Python 2 */
            h->pos++;
        h->dims[h->rank++] = v;
        if (npy_accept(h, ')'))
            return 0;
        if (!npy_accept(h, ','))
            return -1;
        if (npy_accept(h, ')'))
            return 0;
    }
}

static int npy_parse_header(NpyHeader *h)
{
    int seen_descr = 0, seen_fortran = 0, seen_shape = 0;
    char key[32];
    if (!npy_accept(h, '{'))
        return -1;
    while (!npy_accept(h, '}')) {
        if (npy_string(h, key, sizeof key) != 0 || !npy_accept(h, ':'))
            return -1;
        if (strcmp(key, "descr") == 0 && !seen_descr) {
            if (npy_string(h, h->descr, sizeof h->descr) != 0)
                return -1;
            seen_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !seen_fortran) {
            if (npy_word(h, "True"))
                h->fortran = 1;
            else if (npy_word(h, "False"))
                h->fortran = 0;
            else
                return -1;
            seen_fortran = 1;
        } else if (strcmp(key, "shape") == 0 && !seen_shape) {
            if (npy_shape(h) != 0)
                return -1;
            seen_shape = 1;
        } else {
            return -1;
        }
        if (!npy_accept(h, ',')) {
            if (!npy_accept(h, '}'))
                return -1;
            break;
        }
    }
    npy_skip_space(h);
    if (h->pos != h->len || !seen_descr || !seen_fortran || !seen_shape)
        return -1;
    return 0;
}

/* The type a descr names, for messages and for the match. */
static const FxioType *npy_descr_type(const char *descr, int *big_endian)
{
    size_t i;
    *big_endian = descr[0] == '>';
    if (descr[0] != '<' && descr[0] != '|' && descr[0] != '>' && descr[0] != '=')
        return NULL;
    for (i = 0; i < FXIO_NUM_TYPES; i++)
        if (strcmp(descr + 1, fxio_types[i].npy) == 0) {
            /* '|' (no byte order) is only meaningful for one-byte types. */
            if (descr[0] == '|' && fxio_types[i].size != 1)
                return NULL;
            if (fxio_types[i].size == 1)
                *big_endian = 0;
            return &fxio_types[i];
        }
    return NULL;
}

static int npy_read(const unsigned char *b, size_t len, const char *name, int dtype, int rank,
                    const int64_t *dims, void *dst, size_t numel, size_t nbytes, char *err,
                    size_t cap)
{
    const FxioType *want = fxio_type(dtype), *got;
    NpyHeader h;
    size_t start, hlen, avail;
    int big, i, nontrivial = 0;

    if (len < 10) {
        fxio_fail(err, cap, name, "truncated .npy header (%lu bytes)", (unsigned long)len);
        return -1;
    }
    if (b[6] == 1) {
        start = 10;
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
    } else if (b[6] == 2 || b[6] == 3) {
        if (len < 12) {
            fxio_fail(err, cap, name, "truncated .npy header (%lu bytes)", (unsigned long)len);
            return -1;
        }
        start = 12;
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 |
               (size_t)((uint32_t)b[11] << 24);
    } else {
        fxio_fail(err, cap, name, ".npy version %u.%u is not supported", (unsigned)b[6],
                  (unsigned)b[7]);
        return -1;
    }
    if (hlen > len - start) {
        fxio_fail(err, cap, name, "truncated .npy header: %lu header bytes announced, %lu present",
                  (unsigned long)hlen, (unsigned long)(len - start));
        return -1;
    }
    memset(&h, 0, sizeof h);
    h.s = (const char *)b + start;
    h.len = hlen;
    if (npy_parse_header(&h) != 0) {
        fxio_fail(err, cap, name, "malformed .npy header near byte %lu",
                  (unsigned long)(start + h.pos));
        return -1;
    }
    got = npy_descr_type(h.descr, &big);
    if (!got) {
        fxio_fail(err, cap, name, ".npy descr '%s' is not a supported element type", h.descr);
        return -1;
    }
    if (big) {
        fxio_fail(err, cap, name, "big-endian .npy data ('%s') is not supported", h.descr);
        return -1;
    }
    if (got != want) {
        fxio_fail(err, cap, name, "dtype is %s ('%s'), expected %s", got->name, h.descr,
                  want->name);
        return -1;
    }
    if (fxio_shape_mismatch(name, ".npy", h.rank, h.dims, rank, dims, err, cap) != 0)
        return -1;
    for (i = 0; i < h.rank; i++)
        nontrivial += h.dims[i] > 1;
    if (h.fortran && nontrivial > 1) {
        fxio_fail(err, cap, name, "Fortran-order .npy data is not supported");
        return -1;
    }
    avail = len - start - hlen;
    if (avail != nbytes) {
        fxio_fail(err, cap, name, "%s .npy data: %lu bytes, expected %lu",
                  avail < nbytes ? "truncated" : "trailing bytes after", (unsigned long)avail,
                  (unsigned long)nbytes);
        return -1;
    }
    if (dtype == FXIO_DTYPE_BOOL &&
        fxio_check_bool(name, b + start + hlen, numel, err, cap) != 0)
        return -1;
    fxio_copy_le(dst, b + start + hlen, numel, want->size);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* onnx.TensorProto (.pb)                                                     */
/* ------------------------------------------------------------------------- */

enum {
    PB_DIMS = 1,
    PB_DATA_TYPE = 2,
    PB_SEGMENT = 3,
    PB_FLOAT_DATA = 4,
    PB_INT32_DATA = 5,
    PB_STRING_DATA = 6,
    PB_INT64_DATA = 7,
    PB_RAW_DATA = 9,
    PB_DOUBLE_DATA = 10,
    PB_UINT64_DATA = 11,
    PB_EXTERNAL_DATA = 13,
    PB_DATA_LOCATION = 14,
    PB_MAX_FIELD = 15
};

static const char *pb_field_name(int f)
{
    switch (f) {
    case PB_FLOAT_DATA: return "float_data";
    case PB_INT32_DATA: return "int32_data";
    case PB_STRING_DATA: return "string_data";
    case PB_INT64_DATA: return "int64_data";
    case PB_DOUBLE_DATA: return "double_data";
    case PB_UINT64_DATA: return "uint64_data";
    default: return "field";
    }
}

/* The typed field that holds values of dtype. */
static int pb_typed_field(int dtype)
{
    switch (dtype) {
    case FXIO_DTYPE_FLOAT32: return PB_FLOAT_DATA;
    case FXIO_DTYPE_FLOAT64: return PB_DOUBLE_DATA;
    case FXIO_DTYPE_INT64: return PB_INT64_DATA;
    case FXIO_DTYPE_UINT32:
    case FXIO_DTYPE_UINT64: return PB_UINT64_DATA;
    default: return PB_INT32_DATA;
    }
}

/* A base-128 varint; refuses truncated and overlong (more than 64 bits). */
static int pb_varint(const unsigned char *b, size_t len, size_t *pos, uint64_t *v)
{
    uint64_t r = 0;
    int shift;
    for (shift = 0; shift < 64; shift += 7) {
        unsigned c;
        if (*pos >= len)
            return -1;
        c = b[(*pos)++];
        if (shift == 63 && (c & 0x7e))
            return -1;
        r |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* Two's complement reinterpretation without implementation-defined casts. */
static int64_t pb_as_int64(uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX)
        return (int64_t)v;
    return -(int64_t)(~v) - 1;
}

typedef struct PbField {
    int field, wire;
    uint64_t value;           /* wire 0: the varint; 1 and 5: the fixed bytes */
    const unsigned char *ptr; /* wire 2: the payload */
    size_t len;
} PbField;

/* The next field at *pos, or -1 with a message. */
static int pb_next(const unsigned char *b, size_t len, size_t *pos, PbField *f,
                   const char *name, char *err, size_t cap)
{
    uint64_t tag, n;
    size_t at = *pos;
    if (pb_varint(b, len, pos, &tag) != 0) {
        fxio_fail(err, cap, name, "truncated or malformed field tag at byte %lu",
                  (unsigned long)at);
        return -1;
    }
    if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) {
        fxio_fail(err, cap, name, "bad field number at byte %lu", (unsigned long)at);
        return -1;
    }
    f->field = (tag >> 3) < PB_MAX_FIELD ? (int)(tag >> 3) : PB_MAX_FIELD;
    f->wire = (int)(tag & 7);
    f->ptr = NULL;
    f->len = 0;
    f->value = 0;
    switch (f->wire) {
    case 0:
        if (pb_varint(b, len, pos, &f->value) != 0) {
            fxio_fail(err, cap, name, "truncated or malformed varint at byte %lu",
                      (unsigned long)*pos);
            return -1;
        }
        return 0;
    case 1:
    case 5:
        n = f->wire == 1 ? 8 : 4;
        if (len - *pos < n) {
            fxio_fail(err, cap, name, "truncated fixed-size field at byte %lu",
                      (unsigned long)*pos);
            return -1;
        }
        f->ptr = b + *pos;
        f->len = (size_t)n;
        *pos += (size_t)n;
        return 0;
    case 2:
        if (pb_varint(b, len, pos, &n) != 0) {
            fxio_fail(err, cap, name, "truncated or malformed length at byte %lu",
                      (unsigned long)*pos);
            return -1;
        }
        if (n > (uint64_t)(len - *pos)) {
            fxio_fail(err, cap, name,
                      "truncated: field %d announces %llu bytes at byte %lu, %lu present",
                      f->field, (unsigned long long)n, (unsigned long)*pos,
                      (unsigned long)(len - *pos));
            return -1;
        }
        f->ptr = b + *pos;
        f->len = (size_t)n;
        *pos += (size_t)n;
        return 0;
    default:
        fxio_fail(err, cap, name, "unsupported protobuf wire type %d at byte %lu", f->wire,
                  (unsigned long)at);
        return -1;
    }
}

/* Counts the values of a repeated numeric field occurrence (packed or not)
 * and checks that its encoding is well formed. */
static int pb_count_values(const PbField *f, int fixed, size_t *count, const char *name,
                           char *err, size_t cap)
{
    size_t p = 0, n = 0;
    uint64_t v;
    if (fixed) {
        if (f->wire == (fixed == 4 ? 5 : 1)) {
            *count += 1;
            return 0;
        }
        if (f->wire != 2 || f->len % (size_t)fixed != 0) {
            fxio_fail(err, cap, name, "malformed %s", pb_field_name(f->field));
            return -1;
        }
        *count += f->len / (size_t)fixed;
        return 0;
    }
    if (f->wire == 0) {
        *count += 1;
        return 0;
    }
    if (f->wire != 2) {
        fxio_fail(err, cap, name, "malformed %s", pb_field_name(f->field));
        return -1;
    }
    while (p < f->len) {
        if (pb_varint(f->ptr, f->len, &p, &v) != 0) {
            fxio_fail(err, cap, name, "malformed packed %s", pb_field_name(f->field));
            return -1;
        }
        n++;
    }
    *count += n;
    return 0;
}

/* Stores one typed value as element k of dst, checking its range. */
static int pb_store(int dtype, int field, uint64_t raw, void *dst, size_t k, const char *name,
                    char *err, size_t cap)
{
    unsigned char *d = (unsigned char *)dst;
    int64_t s;
    int32_t i32;
    switch (field) {
    case PB_FLOAT_DATA: {
        uint32_t u = (uint32_t)raw;
        float x;
        memcpy(&x, &u, 4);
        memcpy(d + k * 4, &x, 4);
        return 0;
    }
    case PB_DOUBLE_DATA: {
        double x;
        memcpy(&x, &raw, 8);
        memcpy(d + k * 8, &x, 8);
        return 0;
    }
    case PB_INT64_DATA:
        s = pb_as_int64(raw);
        memcpy(d + k * 8, &s, 8);
        return 0;
    case PB_UINT64_DATA:
        if (dtype == FXIO_DTYPE_UINT64) {
            memcpy(d + k * 8, &raw, 8);
            return 0;
        }
        if (raw > 0xffffffffu)
            break;
        {
            uint32_t u = (uint32_t)raw;
            memcpy(d + k * 4, &u, 4);
        }
        return 0;
    default: /* int32_data: protobuf keeps the low 32 bits of an int32 varint */
        s = pb_as_int64(raw & 0xffffffffu);
        i32 = (int32_t)(s > INT32_MAX ? s - 4294967296LL : s);
        switch (dtype) {
        case FXIO_DTYPE_INT32:
            memcpy(d + k * 4, &i32, 4);
            return 0;
        case FXIO_DTYPE_INT16:
            if (i32 < -32768 || i32 > 32767)
                break;
            {
                int16_t x = (int16_t)i32;
                memcpy(d + k * 2, &x, 2);
            }
            return 0;
        case FXIO_DTYPE_UINT16:
            if (i32 < 0 || i32 > 65535)
                break;
            {
                uint16_t x = (uint16_t)i32;
                memcpy(d + k * 2, &x, 2);
            }
            return 0;
        case FXIO_DTYPE_INT8:
            if (i32 < -128 || i32 > 127)
                break;
            {
                int8_t x = (int8_t)i32;
                memcpy(d + k, &x, 1);
            }
            return 0;
        case FXIO_DTYPE_UINT8:
        case FXIO_DTYPE_BOOL:
            if (i32 < 0 || i32 > (dtype == FXIO_DTYPE_BOOL ? 1 : 255))
                break;
            d[k] = (unsigned char)i32;
            return 0;
        default:
            break;
        }
        s = i32;
        fxio_fail(err, cap, name, "element %lu of %s is %lld, outside %s", (unsigned long)k,
                  pb_field_name(field), (long long)s, fxio_dtype_name(dtype));
        return -1;
    }
    fxio_fail(err, cap, name, "element %lu of %s is %llu, outside %s", (unsigned long)k,
              pb_field_name(field), (unsigned long long)raw, fxio_dtype_name(dtype));
    return -1;
}

static uint64_t pb_fixed(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    size_t i;
    for (i = n; i > 0; i--)
        v = v << 8 | p[i - 1];
    return v;
}

/* Decodes every value of field occurrence f into dst from element *k on. */
static int pb_decode_values(const PbField *f, int dtype, void *dst, size_t *k, size_t numel,
                            const char *name, char *err, size_t cap)
{
    int fixed = f->field == PB_FLOAT_DATA ? 4 : f->field == PB_DOUBLE_DATA ? 8 : 0;
    size_t p = 0;
    uint64_t v;
    if (f->wire != 2) { /* one unpacked value */
        v = fixed ? pb_fixed(f->ptr, f->len) : f->value;
        if (*k >= numel) /* counted before: cannot happen */
            goto malformed;
        return pb_store(dtype, f->field, v, dst, (*k)++, name, err, cap);
    }
    while (p < f->len) {
        if (fixed) {
            v = pb_fixed(f->ptr + p, (size_t)fixed);
            p += (size_t)fixed;
        } else if (pb_varint(f->ptr, f->len, &p, &v) != 0) {
            goto malformed;
        }
        if (*k >= numel)
            goto malformed;
        if (pb_store(dtype, f->field, v, dst, (*k)++, name, err, cap) != 0)
            return -1;
    }
    return 0;
malformed:
    fxio_fail(err, cap, name, "malformed %s", pb_field_name(f->field));
    return -1;
}

static int pb_read(const unsigned char *b, size_t len, const char *name, int dtype, int rank,
                   const int64_t *dims, void *dst, size_t numel, size_t nbytes, char *err,
                   size_t cap)
{
    size_t counts[PB_MAX_FIELD + 1];
    int64_t fdims[FXIO_MAX_RANK];
    int frank = 0, have_type = 0, typed = pb_typed_field(dtype), f;
    int64_t data_type = 0;
    const unsigned char *raw = NULL;
    size_t raw_len = 0, pos = 0, k = 0;
    int have_raw = 0;
    PbField fl;

    memset(counts, 0, sizeof counts);
    /* Pass 1: metadata, and where the data is. */
    while (pos < len) {
        if (pb_next(b, len, &pos, &fl, name, err, cap) != 0)
            return -1;
        switch (fl.field) {
        case PB_DIMS: {
            size_t p = 0;
            uint64_t v;
            if (fl.wire != 0 && fl.wire != 2) {
                fxio_fail(err, cap, name, "malformed dims");
                return -1;
            }
            for (;;) {
                if (fl.wire == 0) {
                    v = fl.value;
                } else {
                    if (p >= fl.len)
                        break;
                    if (pb_varint(fl.ptr, fl.len, &p, &v) != 0) {
                        fxio_fail(err, cap, name, "malformed packed dims");
                        return -1;
                    }
                }
                if (frank >= FXIO_MAX_RANK) {
                    fxio_fail(err, cap, name, "more than %d dims", FXIO_MAX_RANK);
                    return -1;
                }
                if (pb_as_int64(v) < 0) {
                    fxio_fail(err, cap, name, "negative dimension %lld",
                              (long long)pb_as_int64(v));
                    return -1;
                }
                fdims[frank++] = pb_as_int64(v);
                if (fl.wire == 0)
                    break;
            }
            break;
        }
        case PB_DATA_TYPE:
            if (fl.wire != 0) {
                fxio_fail(err, cap, name, "malformed data_type");
                return -1;
            }
            data_type = pb_as_int64(fl.value);
            have_type = 1;
            break;
        case PB_SEGMENT:
            fxio_fail(err, cap, name, "segmented tensors are not supported");
            return -1;
        case PB_FLOAT_DATA:
            if (pb_count_values(&fl, 4, &counts[fl.field], name, err, cap) != 0)
                return -1;
            break;
        case PB_DOUBLE_DATA:
            if (pb_count_values(&fl, 8, &counts[fl.field], name, err, cap) != 0)
                return -1;
            break;
        case PB_INT32_DATA:
        case PB_INT64_DATA:
        case PB_UINT64_DATA:
            if (pb_count_values(&fl, 0, &counts[fl.field], name, err, cap) != 0)
                return -1;
            break;
        case PB_STRING_DATA:
            counts[fl.field]++;
            break;
        case PB_RAW_DATA:
            if (fl.wire != 2) {
                fxio_fail(err, cap, name, "malformed raw_data");
                return -1;
            }
            raw = fl.ptr; /* protobuf: the last occurrence wins */
            raw_len = fl.len;
            have_raw = 1;
            break;
        case PB_EXTERNAL_DATA:
            fxio_fail(err, cap, name, "external data is not supported");
            return -1;
        case PB_DATA_LOCATION:
            if (fl.wire == 0 && fl.value != 0) {
                fxio_fail(err, cap, name, "external data is not supported");
                return -1;
            }
            break;
        default:
            break; /* name, doc_string, metadata: not needed */
        }
    }

    if (!have_type) {
        fxio_fail(err, cap, name, "not a tensor file: no .npy magic and no TensorProto data_type");
        return -1;
    }
    if (data_type != dtype) {
        fxio_fail(err, cap, name, "dtype is %s, expected %s",
                  data_type >= 0 && data_type <= 64 ? fxio_onnx_type_name((int)data_type)
                                                    : "invalid",
                  fxio_dtype_name(dtype));
        return -1;
    }
    if (fxio_shape_mismatch(name, "tensor", frank, fdims, rank, dims, err, cap) != 0)
        return -1;
    for (f = 0; f <= PB_MAX_FIELD; f++)
        if (counts[f] && f != typed) {
            fxio_fail(err, cap, name, "%s in a %s tensor", pb_field_name(f),
                      fxio_dtype_name(dtype));
            return -1;
        }
    if (have_raw && counts[typed]) {
        fxio_fail(err, cap, name, "data in both raw_data and %s", pb_field_name(typed));
        return -1;
    }
    if (have_raw) {
        if (raw_len != nbytes) {
            fxio_fail(err, cap, name, "raw_data has %lu bytes, expected %lu",
                      (unsigned long)raw_len, (unsigned long)nbytes);
            return -1;
        }
        if (dtype == FXIO_DTYPE_BOOL && fxio_check_bool(name, raw, numel, err, cap) != 0)
            return -1;
        fxio_copy_le(dst, raw, numel, fxio_dtype_size(dtype));
        return 0;
    }
    if (counts[typed] != numel) {
        fxio_fail(err, cap, name, "%s has %lu values, expected %lu", pb_field_name(typed),
                  (unsigned long)counts[typed], (unsigned long)numel);
        return -1;
    }
    /* Pass 2: the typed values, now that their count is known to fit. */
    pos = 0;
    while (pos < len) {
        if (pb_next(b, len, &pos, &fl, name, err, cap) != 0)
            return -1;
        if (fl.field == typed &&
            pb_decode_values(&fl, dtype, dst, &k, numel, name, err, cap) != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Entry points                                                               */
/* ------------------------------------------------------------------------- */

static const unsigned char fxio_npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

static int fxio_has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int fxio_read_tensor_buffer(const unsigned char *buf, size_t len, const char *name, int dtype,
                            int rank, const int64_t *dims, void *dst, char *err, size_t errcap)
{
    size_t numel, nbytes;
    if (!name)
        name = "(tensor)";
    if (err && errcap)
        err[0] = '\0';
    if (fxio_check_request(name, dtype, rank, dims, &numel, &nbytes, err, errcap) != 0)
        return -1;
    if (!buf && len) {
        fxio_fail(err, errcap, name, "no data");
        return -1;
    }
    if (nbytes && !dst) {
        fxio_fail(err, errcap, name, "no destination buffer");
        return -1;
    }
    if (len >= sizeof fxio_npy_magic && memcmp(buf, fxio_npy_magic, sizeof fxio_npy_magic) == 0)
        return npy_read(buf, len, name, dtype, rank, dims, dst, numel, nbytes, err, errcap);
    if (fxio_has_suffix(name, ".npy")) {
        fxio_fail(err, errcap, name, "not a .npy file (bad magic)");
        return -1;
    }
    return pb_read(buf, len, name, dtype, rank, dims, dst, numel, nbytes, err, errcap);
}

/* a + b, saturating: only used for a size cap. */
static size_t fxio_sat_add(size_t a, size_t b)
{
    return a > ((size_t)-1) - b ? (size_t)-1 : a + b;
}

static size_t fxio_sat_mul(size_t a, size_t b)
{
    return b && a > ((size_t)-1) / b ? (size_t)-1 : a * b;
}

int fxio_read_tensor(const char *path, int dtype, int rank, const int64_t *dims, void *dst,
                     char *err, size_t errcap)
{
    size_t numel, nbytes, limit, len = 0, cap = 0;
    unsigned char *buf = NULL;
    FILE *f;
    int rc;

    if (err && errcap)
        err[0] = '\0';
    if (!path) {
        fxio_fail(err, errcap, "(null)", "no file name");
        return -1;
    }
    if (fxio_check_request(path, dtype, rank, dims, &numel, &nbytes, err, errcap) != 0)
        return -1;
    /* The largest honest file: the data in its most verbose protobuf form
     * (an unpacked 10-byte varint plus tag per element) and a generous
     * allowance for names, doc strings and headers. */
    limit = fxio_sat_add(fxio_sat_add(nbytes, fxio_sat_mul(numel, 12)), (size_t)1 << 24);

    f = fopen(path, "rb");
    if (!f) {
        fxio_fail(err, errcap, path, "cannot open: %s", strerror(errno));
        return -1;
    }
    for (;;) {
        size_t got;
        if (len == cap) {
            size_t ncap = cap ? fxio_sat_mul(cap, 2) : 65536;
            unsigned char *nb;
            if (cap > limit) {
                fclose(f);
                free(buf);
                fxio_fail(err, errcap, path, "file is larger than %lu bytes, too large for %s%s",
                          (unsigned long)limit, fxio_dtype_name(dtype), rank ? "[...]" : "");
                return -1;
            }
            nb = (unsigned char *)realloc(buf, ncap);
            if (!nb) {
                fclose(f);
                free(buf);
                fxio_fail(err, errcap, path, "out of memory");
                return -1;
            }
            buf = nb;
            cap = ncap;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        fclose(f);
        free(buf);
        fxio_fail(err, errcap, path, "read error");
        return -1;
    }
    fclose(f);
    if (len > limit) {
        free(buf);
        fxio_fail(err, errcap, path, "file is larger than %lu bytes, too large for %s%s",
                  (unsigned long)limit, fxio_dtype_name(dtype), rank ? "[...]" : "");
        return -1;
    }
    rc = fxio_read_tensor_buffer(buf, len, path, dtype, rank, dims, dst, err, errcap);
    free(buf);
    return rc;
}

int fxio_write_npy(const char *path, int dtype, int rank, const int64_t *dims, const void *data,
                   char *err, size_t errcap)
{
    char header[1024];
    unsigned char pre[10];
    size_t numel, nbytes, esize, used, total;
    const FxioType *t;
    FILE *f;
    int i, n, ok;

    if (err && errcap)
        err[0] = '\0';
    if (!path) {
        fxio_fail(err, errcap, "(null)", "no file name");
        return -1;
    }
    if (fxio_check_request(path, dtype, rank, dims, &numel, &nbytes, err, errcap) != 0)
        return -1;
    if (nbytes && !data) {
        fxio_fail(err, errcap, path, "no data");
        return -1;
    }
    t = fxio_type(dtype);
    esize = t->size;

    n = snprintf(header, sizeof header, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                 esize == 1 ? '|' : '<', t->npy);
    used = (size_t)n;
    for (i = 0; i < rank; i++) {
        n = snprintf(header + used, sizeof header - used, "%s%lld%s", i ? ", " : "",
                     (long long)dims[i], rank == 1 ? "," : "");
        used += (size_t)n;
    }
    n = snprintf(header + used, sizeof header - used, "), }");
    used += (size_t)n;
    /* Pad with spaces and a final newline so the data starts 64-aligned,
     * as NumPy does. */
    total = (10 + used + 1 + 63) / 64 * 64;
    if (total - 10 > sizeof header - 1 || total - 10 > 65535) {
        fxio_fail(err, errcap, path, "shape too long for a .npy header");
        return -1;
    }
    while (10 + used + 1 < total)
        header[used++] = ' ';
    header[used++] = '\n';

    memcpy(pre, fxio_npy_magic, 6);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (unsigned char)(used & 0xff);
    pre[9] = (unsigned char)(used >> 8);

    f = fopen(path, "wb");
    if (!f) {
        fxio_fail(err, errcap, path, "cannot create: %s", strerror(errno));
        return -1;
    }
    ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre && fwrite(header, 1, used, f) == used;
    if (ok && nbytes) {
        if (esize == 1 || fxio_host_is_little_endian()) {
            ok = fwrite(data, 1, nbytes, f) == nbytes;
        } else {
            /* Big-endian host: swap through a small staging buffer. */
            unsigned char stage[4096];
            const unsigned char *src = (const unsigned char *)data;
            size_t per = sizeof stage / esize, done = 0;
            while (ok && done < numel) {
                size_t m = numel - done < per ? numel - done : per;
                fxio_copy_le(stage, src + done * esize, m, esize);
                ok = fwrite(stage, esize, m, f) == m;
                done += m;
            }
        }
    }
    if (fclose(f) != 0)
        ok = 0;
    if (!ok) {
        fxio_fail(err, errcap, path, "write error: %s", strerror(errno));
        remove(path);
        return -1;
    }
    return 0;
}
