/*
 * fxrt_tensor_index.c - kernels driven by index data: Gather,
 * GatherElements, GatherND, ScatterElements, ScatterND and OneHot.
 *
 * Indices come from tensors at run time, so every one is wrapped (negative
 * counts from the end) and range-checked before it is used; a bad index makes
 * the kernel return FXRT_INDEX_ERROR instead of touching memory outside the
 * data.  Gathers only move bytes; scatter reductions compute, with a float32
 * fast path and the type-generic load/store helpers of fxrt.h otherwise.
 */
#include "fxrt_tensor.h"

#include <string.h>

/* Reads indices[i], wraps it into [0, dim) and checks it.  Returns 0 when
 * the index is out of range. */
static inline int load_index(FxrtDType t, const void *indices, int64_t i, int64_t dim,
                             int64_t *out)
{
    int64_t v;
    if (t == FXRT_DTYPE_INT64) {
        memcpy(&v, (const char *)indices + (size_t)i * 8, 8);
    } else {
        int32_t v32;
        memcpy(&v32, (const char *)indices + (size_t)i * 4, 4);
        v = v32;
    }
    if (v < 0)
        v += dim;
    if (v < 0 || v >= dim)
        return 0;
    *out = v;
    return 1;
}

static void row_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

static int64_t product(int n, const int64_t *dims)
{
    int64_t p = 1;
    for (int d = 0; d < n; d++)
        p *= dims[d];
    return p;
}

int fxrt_gather(size_t es, int64_t outer, int64_t axis_dim, int64_t inner, const void *data,
                FxrtDType index_type, const void *indices, int64_t num_indices, void *out)
{
    const char *src = data;
    char *dst = out;
    size_t slab = (size_t)inner * es;
    if (outer == 0 || slab == 0)
        return FXRT_INDEX_OK;
    for (int64_t o = 0; o < outer; o++) {
        const char *base = src + (size_t)(o * axis_dim) * slab;
        for (int64_t j = 0; j < num_indices; j++) {
            int64_t v;
            if (!load_index(index_type, indices, j, axis_dim, &v))
                return FXRT_INDEX_ERROR;
            memcpy(dst, base + (size_t)v * slab, slab);
            dst += slab;
        }
    }
    return FXRT_INDEX_OK;
}

int fxrt_gather_elements(size_t es, int rank, const int64_t *data_dims,
                         const int64_t *index_dims, int axis, const void *data,
                         FxrtDType index_type, const void *indices, void *out)
{
    int64_t dstr[FXRT_MAX_RANK], idx[FXRT_MAX_RANK] = {0};
    int64_t total = product(rank, index_dims), base = 0;
    const char *src = data;
    char *dst = out;
    row_strides(rank, data_dims, dstr);
    for (int64_t e = 0; e < total; e++) {
        int64_t v;
        if (!load_index(index_type, indices, e, data_dims[axis], &v))
            return FXRT_INDEX_ERROR;
        memcpy(dst + (size_t)e * es, src + (size_t)(base + v * dstr[axis]) * es, es);
        /* base = sum over the non-axis coordinates of coordinate * stride */
        for (int d = rank - 1; d >= 0; d--) {
            idx[d]++;
            if (d != axis)
                base += dstr[d];
            if (idx[d] < index_dims[d])
                break;
            if (d != axis)
                base -= dstr[d] * index_dims[d];
            idx[d] = 0;
        }
    }
    return FXRT_INDEX_OK;
}

int fxrt_gather_nd(size_t es, int data_rank, const int64_t *data_dims, int batch_dims,
                   int64_t k, int64_t tuples, const void *data, FxrtDType index_type,
                   const void *indices, void *out)
{
    int64_t dstr[FXRT_MAX_RANK];
    int64_t batches = product(batch_dims, data_dims);
    int64_t batch_size = product(data_rank - batch_dims, data_dims + batch_dims);
    size_t slab = (size_t)product(data_rank - batch_dims - (int)k,
                                  data_dims + batch_dims + k) * es;
    const char *src = data;
    char *dst = out;
    row_strides(data_rank, data_dims, dstr);
    if (slab == 0)
        return FXRT_INDEX_OK;
    for (int64_t b = 0; b < batches; b++) {
        for (int64_t t = 0; t < tuples; t++) {
            int64_t off = b * batch_size, tuple = (b * tuples + t) * k;
            for (int64_t j = 0; j < k; j++) {
                int64_t v;
                if (!load_index(index_type, indices, tuple + j, data_dims[batch_dims + j], &v))
                    return FXRT_INDEX_ERROR;
                off += v * dstr[batch_dims + j];
            }
            memcpy(dst, src + (size_t)off * es, slab);
            dst += slab;
        }
    }
    return FXRT_INDEX_OK;
}

/* *dst = *dst (op) *src for one element of type t. */
static void combine(FxrtDType t, size_t es, char *dst, const char *src, FxrtScatterReduce r)
{
    if (r == FXRT_SCATTER_NONE) {
        memcpy(dst, src, es);
        return;
    }
    if (t == FXRT_DTYPE_FLOAT32) {
        float a, b;
        memcpy(&a, dst, 4);
        memcpy(&b, src, 4);
        switch (r) {
        case FXRT_SCATTER_ADD: a += b; break;
        case FXRT_SCATTER_MUL: a *= b; break;
        case FXRT_SCATTER_MAX: a = b > a ? b : a; break;
        case FXRT_SCATTER_MIN: a = b < a ? b : a; break;
        default: break;
        }
        memcpy(dst, &a, 4);
    } else if (fxrt_dtype_is_float(t)) {
        double a = fxrt_load_f64(t, dst, 0), b = fxrt_load_f64(t, src, 0);
        switch (r) {
        case FXRT_SCATTER_ADD: a += b; break;
        case FXRT_SCATTER_MUL: a *= b; break;
        case FXRT_SCATTER_MAX: a = b > a ? b : a; break;
        case FXRT_SCATTER_MIN: a = b < a ? b : a; break;
        default: break;
        }
        fxrt_store_f64(t, dst, 0, a);
    } else {
        /* unsigned arithmetic wraps where signed would overflow */
        int64_t a = fxrt_load_i64(t, dst, 0), b = fxrt_load_i64(t, src, 0);
        switch (r) {
        case FXRT_SCATTER_ADD: a = (int64_t)((uint64_t)a + (uint64_t)b); break;
        case FXRT_SCATTER_MUL: a = (int64_t)((uint64_t)a * (uint64_t)b); break;
        case FXRT_SCATTER_MAX: a = b > a ? b : a; break;
        case FXRT_SCATTER_MIN: a = b < a ? b : a; break;
        default: break;
        }
        fxrt_store_i64(t, dst, 0, a);
    }
}

int fxrt_scatter_elements(FxrtDType t, int rank, const int64_t *data_dims,
                          const int64_t *index_dims, int axis, FxrtScatterReduce reduce,
                          const void *data, FxrtDType index_type, const void *indices,
                          const void *updates, void *out)
{
    size_t es = fxrt_dtype_size(t);
    int64_t dstr[FXRT_MAX_RANK], idx[FXRT_MAX_RANK] = {0};
    int64_t total = product(rank, index_dims), base = 0;
    const char *upd = updates;
    char *dst = out;
    if (out != data)
        memcpy(out, data, (size_t)product(rank, data_dims) * es);
    row_strides(rank, data_dims, dstr);
    for (int64_t e = 0; e < total; e++) {
        int64_t v;
        if (!load_index(index_type, indices, e, data_dims[axis], &v))
            return FXRT_INDEX_ERROR;
        combine(t, es, dst + (size_t)(base + v * dstr[axis]) * es, upd + (size_t)e * es,
                reduce);
        for (int d = rank - 1; d >= 0; d--) {
            idx[d]++;
            if (d != axis)
                base += dstr[d];
            if (idx[d] < index_dims[d])
                break;
            if (d != axis)
                base -= dstr[d] * index_dims[d];
            idx[d] = 0;
        }
    }
    return FXRT_INDEX_OK;
}

int fxrt_scatter_nd(FxrtDType t, int data_rank, const int64_t *data_dims, int64_t k,
                    int64_t tuples, FxrtScatterReduce reduce, const void *data,
                    FxrtDType index_type, const void *indices, const void *updates,
                    void *out)
{
    size_t es = fxrt_dtype_size(t);
    int64_t dstr[FXRT_MAX_RANK];
    int64_t slab = product(data_rank - (int)k, data_dims + k);
    const char *upd = updates;
    char *dst = out;
    if (out != data)
        memcpy(out, data, (size_t)product(data_rank, data_dims) * es);
    row_strides(data_rank, data_dims, dstr);
    if (slab == 0)
        return FXRT_INDEX_OK;
    for (int64_t u = 0; u < tuples; u++) {
        int64_t off = 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t v;
            if (!load_index(index_type, indices, u * k + j, data_dims[j], &v))
                return FXRT_INDEX_ERROR;
            off += v * dstr[j];
        }
        char *d = dst + (size_t)off * es;
        const char *s = upd + (size_t)(u * slab) * es;
        if (reduce == FXRT_SCATTER_NONE) {
            memcpy(d, s, (size_t)slab * es);
        } else {
            for (int64_t e = 0; e < slab; e++)
                combine(t, es, d + (size_t)e * es, s + (size_t)e * es, reduce);
        }
    }
    return FXRT_INDEX_OK;
}

void fxrt_onehot(size_t es, FxrtDType index_type, const void *indices, int64_t outer,
                 int64_t depth, int64_t inner, const void *off_value, const void *on_value,
                 void *out)
{
    char *dst = out;
    fxrt_fill(es, outer * depth * inner, off_value, out);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t e = o * inner + i, v;
            if (fxrt_dtype_is_float(index_type)) {
                double f = fxrt_load_f64(index_type, indices, (size_t)e);
                /* NaN and out-of-range floats fail this test: all-off column */
                if (!(f > (double)-depth - 1.0 && f < (double)depth + 1.0))
                    continue;
                v = (int64_t)f; /* truncation, as a cast to int64 would */
            } else {
                v = fxrt_load_i64(index_type, indices, (size_t)e);
            }
            if (v < -depth || v >= depth)
                continue;
            if (v < 0)
                v += depth;
            memcpy(dst + (size_t)((o * depth + v) * inner + i) * es, on_value, es);
        }
    }
}
