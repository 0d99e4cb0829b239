/*
 * npy.c - NumPy .npy files, format versions 1.0, 2.0 and 3.0.
 *
 * A .npy file is a magic string, a version, a header length, a header that
 * is a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and ended by a newline, and then the raw array bytes.
 * The reader parses exactly that dict (the three keys, each once, in any
 * order; strings in single or double quotes; True/False; a tuple of
 * non-negative decimal integers) and refuses everything else: other keys,
 * big-endian or float16 data, Fortran order, a rank above FX_MAX_RANK, a shape
 * whose byte size overflows or exceeds FX_MAX_TENSOR_BYTES, and a data part
 * whose length is not exactly what the shape needs.  Sizes are checked before
 * the tensor is allocated.  The writer produces version 1.0 files with the
 * header padded to a multiple of 64 bytes, as numpy does.
 */
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

/* numpy itself refuses headers above 10000 bytes by default; a little more
 * room costs nothing. */
enum { NPY_MAX_HEADER = 1 << 16 };

static const struct {
    const char *descr;
    DType dtype;
} npy_types[] = {
    {"<f4", FXRT_DTYPE_FLOAT32}, {"<f8", FXRT_DTYPE_FLOAT64}, {"<i8", FXRT_DTYPE_INT64},
    {"<i4", FXRT_DTYPE_INT32},   {"<i2", FXRT_DTYPE_INT16},   {"|i1", FXRT_DTYPE_INT8},
    {"|u1", FXRT_DTYPE_UINT8},   {"<u2", FXRT_DTYPE_UINT16},  {"<u4", FXRT_DTYPE_UINT32},
    {"<u8", FXRT_DTYPE_UINT64},  {"|b1", FXRT_DTYPE_BOOL},
};

/* --- header parsing ------------------------------------------------------- */

typedef struct NpyParser {
    const char *start, *p, *end; /* the header text */
    size_t base;         /* file offset of the header, for messages */
    const char *file;
    Diag *d;
} NpyParser;

static FxStatus npy_fail(NpyParser *ps, const char *msg)
{
    return diag_error_at(ps->d, FX_ERR_FORMAT, ps->file,
                         (long long)(ps->base + (size_t)(ps->p - ps->start)),
                         "bad .npy header: %s", msg);
}

static void npy_skip_ws(NpyParser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static bool npy_accept(NpyParser *ps, char c)
{
    npy_skip_ws(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes, into buf. */
static FxStatus npy_string(NpyParser *ps, char *buf, size_t cap)
{
    npy_skip_ws(ps);
    if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"'))
        return npy_fail(ps, "expected a quoted string");
    char q = *ps->p++;
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != q) {
        if (*ps->p == '\\' || (unsigned char)*ps->p < 0x20 || n + 1 >= cap)
            return npy_fail(ps, "unexpected string contents");
        buf[n++] = *ps->p++;
    }
    if (ps->p >= ps->end)
        return npy_fail(ps, "unterminated string");
    ps->p++;
    buf[n] = '\0';
    return FX_OK;
}

static bool npy_word(NpyParser *ps, const char *w)
{
    npy_skip_ws(ps);
    size_t n = strlen(w);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, w, n) == 0) {
        ps->p += n;
        return true;
    }
    return false;
}

static FxStatus npy_shape(NpyParser *ps, TensorType *t)
{
    if (!npy_accept(ps, '('))
        return npy_fail(ps, "shape must be a tuple");
    t->rank = 0;
    bool comma_after_last = false;
    for (;;) {
        if (npy_accept(ps, ')'))
            break;
        if (t->rank > 0 && !comma_after_last)
            return npy_fail(ps, "expected ',' or ')' in shape");
        npy_skip_ws(ps);
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
            return npy_fail(ps, "shape entries must be non-negative integers");
        uint64_t v = 0;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
            if (!size_mul_ok(v, 10, &v) || !size_add_ok(v, (uint64_t)(*ps->p - '0'), &v) ||
                v > (uint64_t)INT64_MAX)
                return npy_fail(ps, "shape entry overflows");
            ps->p++;
        }
        if (t->rank == FX_MAX_RANK)
            return diag_error_at(ps->d, FX_ERR_UNSUPPORTED, ps->file, -1,
                                 ".npy shape has more than %d dimensions", FX_MAX_RANK);
        t->dims[t->rank++] = (int64_t)v;
        comma_after_last = npy_accept(ps, ',');
    }
    /* "(3)" is not a tuple in Python: numpy always writes "(3,)" */
    if (t->rank == 1 && !comma_after_last)
        return npy_fail(ps, "a 1-element shape needs a trailing comma: (n,)");
    return FX_OK;
}

static FxStatus npy_parse_header(NpyParser *ps, TensorType *t)
{
    bool have_descr = false, have_order = false, have_shape = false;
    char key[32], descr[32];
    FxStatus st;
    if (!npy_accept(ps, '{'))
        return npy_fail(ps, "expected '{'");
    for (;;) {
        if (npy_accept(ps, '}'))
            break;
        if ((st = npy_string(ps, key, sizeof key)) != FX_OK)
            return st;
        if (!npy_accept(ps, ':'))
            return npy_fail(ps, "expected ':'");
        if (strcmp(key, "descr") == 0 && !have_descr) {
            if ((st = npy_string(ps, descr, sizeof descr)) != FX_OK)
                return st;
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if (npy_word(ps, "True"))
                return diag_error_at(ps->d, FX_ERR_UNSUPPORTED, ps->file, -1,
                                     ".npy data in Fortran order is not supported; save it with "
                                     "numpy.ascontiguousarray");
            if (!npy_word(ps, "False"))
                return npy_fail(ps, "fortran_order must be True or False");
            have_order = true;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if ((st = npy_shape(ps, t)) != FX_OK)
                return st;
            have_shape = true;
        } else {
            return npy_fail(ps, "unknown or repeated key");
        }
        if (!npy_accept(ps, ',')) {
            if (!npy_accept(ps, '}'))
                return npy_fail(ps, "expected ',' or '}'");
            break;
        }
    }
    npy_skip_ws(ps);
    if (ps->p != ps->end)
        return npy_fail(ps, "unexpected text after the dict");
    if (!have_descr || !have_order || !have_shape)
        return npy_fail(ps, "the dict needs 'descr', 'fortran_order' and 'shape'");
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (strcmp(descr, npy_types[i].descr) == 0) {
            t->dtype = npy_types[i].dtype;
            return FX_OK;
        }
    if (descr[0] == '>')
        return diag_error_at(ps->d, FX_ERR_UNSUPPORTED, ps->file, -1,
                             ".npy data type '%s' is big-endian; only little-endian is supported",
                             descr);
    return diag_error_at(ps->d, FX_ERR_UNSUPPORTED, ps->file, -1,
                         ".npy data type '%s' is not supported (float32/64, int8-64, uint8-64 "
                         "and bool are)", descr);
}

FxStatus npy_read_buffer(const uint8_t *data, size_t len, const char *name, Tensor **out,
                         Diag *d)
{
    *out = NULL;
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (len < 10 || memcmp(data, magic, 6) != 0)
        return diag_error_at(d, FX_ERR_FORMAT, name, 0, "not a .npy file (bad magic)");
    unsigned major = data[6], minor = data[7];
    if (major < 1 || major > 3 || minor != 0)
        return diag_error_at(d, FX_ERR_UNSUPPORTED, name, 6,
                             ".npy format version %u.%u is not supported (1.0-3.0 are)", major,
                             minor);
    size_t prefix = major == 1 ? 10 : 12;
    if (len < prefix)
        return diag_error_at(d, FX_ERR_FORMAT, name, 8, ".npy file truncated in its header");
    size_t hlen = major == 1 ? (size_t)data[8] | (size_t)data[9] << 8
                             : (size_t)data[8] | (size_t)data[9] << 8 | (size_t)data[10] << 16 |
                                   (size_t)data[11] << 24;
    if (hlen > NPY_MAX_HEADER)
        return diag_error_at(d, FX_ERR_FORMAT, name, 8, ".npy header length %zu is too large",
                             hlen);
    if (hlen > len - prefix)
        return diag_error_at(d, FX_ERR_FORMAT, name, 8,
                             ".npy header claims %zu bytes but the file has %zu after the prefix",
                             hlen, len - prefix);
    const char *saved = d ? d->file : NULL;
    if (d)
        d->file = name;
    NpyParser ps = {.start = (const char *)data + prefix,
                    .p = (const char *)data + prefix,
                    .end = (const char *)data + prefix + hlen,
                    .base = prefix,
                    .file = name,
                    .d = d};
    TensorType t = {0};
    uint64_t nbytes = 0;
    FxStatus st = npy_parse_header(&ps, &t);
    if (st == FX_OK)
        st = type_check_size(&t, &nbytes, d, ".npy shape");
    size_t have = len - prefix - hlen;
    if (st == FX_OK && have != nbytes)
        st = diag_error_at(d, FX_ERR_FORMAT, name, (long long)(prefix + hlen),
                           ".npy data has %zu bytes but shape and type need %llu", have,
                           (unsigned long long)nbytes);
    Tensor *x = NULL;
    if (st == FX_OK && !(x = tensor_new(&t, d)))
        st = FX_ERR_NOMEM;
    if (st == FX_OK) {
        if (nbytes)
            memcpy(x->data, data + prefix + hlen, (size_t)nbytes);
        if (t.dtype == FXRT_DTYPE_BOOL)
            for (uint64_t i = 0; i < nbytes; i++)
                ((uint8_t *)x->data)[i] = ((uint8_t *)x->data)[i] != 0;
        *out = x;
    }
    if (d)
        d->file = saved;
    return st;
}

/* --- writing -------------------------------------------------------------- */

FxStatus npy_write_buffer(const Tensor *t, uint8_t **data, size_t *len, Diag *d)
{
    *data = NULL;
    *len = 0;
    const char *descr = NULL;
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].dtype == t->type.dtype)
            descr = npy_types[i].descr;
    if (!descr)
        return diag_error(d, FX_ERR_UNSUPPORTED, "cannot write a %s tensor as .npy",
                          dtype_name(t->type.dtype));
    uint64_t nbytes;
    FxStatus st = type_check_size(&t->type, &nbytes, d, "tensor");
    if (st != FX_OK)
        return st;

    char header[512];
    size_t n = (size_t)snprintf(header, sizeof header,
                                "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < t->type.rank; i++)
        n += (size_t)snprintf(header + n, sizeof header - n, "%s%lld", i ? ", " : "",
                              (long long)t->type.dims[i]);
    n += (size_t)snprintf(header + n, sizeof header - n, "%s), }",
                          t->type.rank == 1 ? "," : "");
    /* pad with spaces and a final newline to a multiple of 64 bytes */
    size_t total = 10 + n + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t hlen = padded - 10;
    uint64_t size;
    if (!size_add_ok(padded, nbytes, &size) || size > SIZE_MAX)
        return diag_error(d, FX_ERR_NOMEM, "tensor too large for .npy");
    uint8_t *buf = fx_malloc((size_t)size);
    if (!buf)
        return diag_error(d, FX_ERR_NOMEM, "out of memory serializing a .npy file");
    static const uint8_t magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    memcpy(buf, magic, 8);
    buf[8] = (uint8_t)(hlen & 0xff);
    buf[9] = (uint8_t)(hlen >> 8);
    memcpy(buf + 10, header, n);
    memset(buf + 10 + n, ' ', hlen - n - 1);
    buf[padded - 1] = '\n';
    if (nbytes)
        memcpy(buf + padded, t->data, (size_t)nbytes);
    *data = buf;
    *len = (size_t)size;
    return FX_OK;
}
