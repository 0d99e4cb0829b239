/*
 * tensor.c - tensor types, owned tensors and the checked size arithmetic
 * that every size read from a file goes through before it is allocated.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

const char *dtype_name(DType t)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: return "float32";
    case FXRT_DTYPE_UINT8: return "uint8";
    case FXRT_DTYPE_INT8: return "int8";
    case FXRT_DTYPE_UINT16: return "uint16";
    case FXRT_DTYPE_INT16: return "int16";
    case FXRT_DTYPE_INT32: return "int32";
    case FXRT_DTYPE_INT64: return "int64";
    case FXRT_DTYPE_STRING: return "string";
    case FXRT_DTYPE_BOOL: return "bool";
    case FXRT_DTYPE_FLOAT16: return "float16";
    case FXRT_DTYPE_FLOAT64: return "float64";
    case FXRT_DTYPE_UINT32: return "uint32";
    case FXRT_DTYPE_UINT64: return "uint64";
    default: return "undefined";
    }
}

bool dtype_is_supported(DType t)
{
    return t != FXRT_DTYPE_STRING && t != FXRT_DTYPE_FLOAT16 && fxrt_dtype_size(t) != 0;
}

bool size_mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    *out = a * b;
    return true;
}

bool size_add_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a)
        return false;
    *out = a + b;
    return true;
}

int64_t type_numel(const TensorType *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

size_t type_nbytes(const TensorType *t)
{
    return (size_t)type_numel(t) * fxrt_dtype_size(t->dtype);
}

bool type_equal(const TensorType *a, const TensorType *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

FxStatus type_check_size(const TensorType *t, uint64_t *nbytes, Diag *d, const char *what)
{
    if (t->rank < 0 || t->rank > FX_MAX_RANK)
        return diag_error(d, FX_ERR_UNSUPPORTED, "%s: rank %d is beyond the supported %d", what,
                          t->rank, FX_MAX_RANK);
    size_t esize = fxrt_dtype_size(t->dtype);
    if (esize == 0)
        return diag_error(d, FX_ERR_UNSUPPORTED, "%s: element type %s (%d) is not supported",
                          what, dtype_name(t->dtype), (int)t->dtype);
    uint64_t n = esize;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0)
            return diag_error(d, FX_ERR_SHAPE, "%s: dimension %d is negative (%lld)", what, i,
                              (long long)t->dims[i]);
        if (!size_mul_ok(n, (uint64_t)t->dims[i], &n))
            return diag_error(d, FX_ERR_NOMEM, "%s: size overflows", what);
    }
    if (n > FX_MAX_TENSOR_BYTES)
        return diag_error(d, FX_ERR_NOMEM, "%s: %llu bytes is beyond the limit of %llu", what,
                          (unsigned long long)n, (unsigned long long)FX_MAX_TENSOR_BYTES);
    if (nbytes)
        *nbytes = n;
    return FX_OK;
}

char *type_format(const TensorType *t, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "%s[", dtype_name(t->dtype));
    for (int i = 0; i < t->rank && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "",
                                 (long long)t->dims[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
    return buf;
}

Tensor *tensor_new(const TensorType *t, Diag *d)
{
    uint64_t nbytes;
    if (type_check_size(t, &nbytes, d, "tensor") != FX_OK)
        return NULL;
    Tensor *x = fx_alloc_array(1, sizeof *x);
    /* one byte minimum so that empty tensors still own a valid pointer */
    void *data = fx_alloc_array(nbytes ? (size_t)nbytes : 1, 1);
    if (!x || !data) {
        free(x);
        free(data);
        diag_error(d, FX_ERR_NOMEM, "out of memory allocating %llu bytes",
                   (unsigned long long)nbytes);
        return NULL;
    }
    x->type = *t;
    x->data = data;
    return x;
}

Tensor *tensor_clone(const Tensor *src, Diag *d)
{
    Tensor *x = tensor_new(&src->type, d);
    if (x)
        memcpy(x->data, src->data, tensor_nbytes(src));
    return x;
}

Tensor *tensor_new_ints(const int64_t *v, int64_t count, Diag *d)
{
    TensorType t = {.dtype = FXRT_DTYPE_INT64, .rank = 1, .dims = {count}};
    Tensor *x = tensor_new(&t, d);
    if (x && count > 0)
        memcpy(x->data, v, (size_t)count * sizeof *v);
    return x;
}

void tensor_free(Tensor *t)
{
    if (!t)
        return;
    free(t->data);
    free(t);
}

int64_t tensor_numel(const Tensor *t) { return type_numel(&t->type); }
size_t tensor_nbytes(const Tensor *t) { return type_nbytes(&t->type); }

int64_t tensor_get_int(const Tensor *t, int64_t i)
{
    return fxrt_load_i64(t->type.dtype, t->data, (size_t)i);
}

double tensor_get_float(const Tensor *t, int64_t i)
{
    return fxrt_load_f64(t->type.dtype, t->data, (size_t)i);
}

double tensor_scaled_atol(const Tensor *expected, double atol)
{
    double largest = 1.0;
    if (fxrt_dtype_is_float(expected->type.dtype))
        for (int64_t i = 0, n = tensor_numel(expected); i < n; i++) {
            double v = fabs(tensor_get_float(expected, i));
            if (isfinite(v) && v > largest)
                largest = v;
        }
    return atol * largest;
}

CompareResult tensor_compare(const Tensor *actual, const Tensor *expected, double rtol,
                             double atol)
{
    CompareResult r = {.ok = true, .worst_index = -1};
    if (!type_equal(&actual->type, &expected->type)) {
        r.ok = false;
        r.mismatches = -1; /* type or shape differs */
        return r;
    }
    int64_t n = tensor_numel(actual);
    DType dt = actual->type.dtype;
    bool is_float = fxrt_dtype_is_float(dt);
    double worst_excess = -1;
    for (int64_t i = 0; i < n; i++) {
        if (!is_float) {
            int64_t a = tensor_get_int(actual, i), b = tensor_get_int(expected, i);
            if (a != b) {
                double diff = fabs((double)a - (double)b);
                if (diff > r.max_abs) {
                    r.max_abs = diff;
                    r.worst_index = i;
                }
                r.mismatches++;
                r.ok = false;
            }
            continue;
        }
        double a = tensor_get_float(actual, i), b = tensor_get_float(expected, i);
        if (isnan(a) || isnan(b)) {
            if (!(isnan(a) && isnan(b))) {
                r.ok = false;
                r.mismatches++;
                if (r.worst_index < 0)
                    r.worst_index = i;
                r.max_abs = INFINITY;
            }
            continue;
        }
        if (isinf(a) || isinf(b)) {
            if (a != b) {
                r.ok = false;
                r.mismatches++;
                r.max_abs = INFINITY;
                r.worst_index = i;
            }
            continue;
        }
        double diff = fabs(a - b);
        double rel = b != 0 ? diff / fabs(b) : (diff > 0 ? INFINITY : 0);
        if (diff > r.max_abs)
            r.max_abs = diff;
        if (rel > r.max_rel)
            r.max_rel = rel;
        double excess = diff - (atol + rtol * fabs(b));
        if (excess > 0) {
            r.ok = false;
            r.mismatches++;
            if (excess > worst_excess) {
                worst_excess = excess;
                r.worst_index = i;
            }
        }
    }
    return r;
}

/* xorshift64*: a fixed, portable stream so that random inputs are the same
 * on every machine. */
static uint64_t next_random(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

Tensor *tensor_new_random(const TensorType *t, uint64_t *state, Diag *d)
{
    Tensor *x = tensor_new(t, d);
    if (!x)
        return NULL;
    int64_t n = tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = next_random(state);
        double u = (double)(r >> 11) / 9007199254740992.0; /* [0, 1) */
        if (fxrt_dtype_is_float(t->dtype))
            fxrt_store_f64(t->dtype, x->data, (size_t)i, 2.0 * u - 1.0);
        else /* small non-negative integers: valid indices for most ops */
            fxrt_store_i64(t->dtype, x->data, (size_t)i, (int64_t)((r >> 40) % (t->dtype == FXRT_DTYPE_BOOL ? 2 : 3)));
    }
    return x;
}
