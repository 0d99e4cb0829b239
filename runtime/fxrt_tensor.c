/*
 * fxrt_tensor.c - data-movement kernels that need no index data: fills,
 * the strided copy engine (transpose, slice, depth/space rearrangements),
 * concat/split, expand/tile, pad, trilu, eye-like and range.
 *
 * Everything moves whole elements of a given byte size, so one kernel serves
 * every dtype; copies of 1, 2, 4 and 8 bytes go through fixed-size memcpy,
 * which compilers turn into single loads and stores (and which, unlike
 * casting to uint32_t *, does not break strict aliasing for float data).
 *
 * The strided engine first drops size-1 axes and merges axes that are
 * neighbours in both input and output, so most real transposes shrink to a
 * 2-D or batched 2-D problem, which it runs in cache-sized tiles.  Kernels
 * trust their shape arguments (the compiler checked them) and return early
 * on empty tensors, never forming a pointer past a buffer.
 */
#include "fxrt_tensor.h"

#include <string.h>

/* Copies one element of es bytes. */
static inline void copy_elem(size_t es, char *dst, const char *src)
{
    switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, es); break;
    }
}

void fxrt_fill(size_t es, int64_t n, const void *value, void *out)
{
    char *o = out;
    if (n <= 0)
        return;
    if (es == 4) {
        float v;
        memcpy(&v, value, 4);
        for (int64_t i = 0; i < n; i++)
            memcpy(o + (size_t)i * 4, &v, 4);
        return;
    }
    /* Doubling copies: log2(n) memcpy calls for any element size. */
    size_t total = (size_t)n * es, done = es;
    memcpy(o, value, es);
    while (done < total) {
        size_t c = done < total - done ? done : total - done;
        memcpy(o + done, o, c);
        done += c;
    }
}

/* ------------------------------------------------------------------------- */
/* Strided copy engine                                                        */
/* ------------------------------------------------------------------------- */

/* A simplified copy problem: out contiguous over dims, input strides in
 * elements, output strides (derived) in elements. */
typedef struct StridedJob {
    size_t es;
    int rank;
    int64_t dims[FXRT_MAX_RANK];
    int64_t istr[FXRT_MAX_RANK];
    int64_t ostr[FXRT_MAX_RANK];
} StridedJob;

enum { TILE = 32 };

/* One 2-D tile pass: out[i*oa + j] = in[i + j*sl] for i < na, j < nl.  The
 * input is contiguous along i, the output along j; tiles keep both in cache. */
#define TRANSPOSE_2D(T)                                                             \
    do {                                                                            \
        for (int64_t i0 = 0; i0 < na; i0 += TILE) {                                 \
            int64_t i1 = i0 + TILE < na ? i0 + TILE : na;                           \
            for (int64_t j0 = 0; j0 < nl; j0 += TILE) {                             \
                int64_t j1 = j0 + TILE < nl ? j0 + TILE : nl;                       \
                for (int64_t i = i0; i < i1; i++)                                   \
                    for (int64_t j = j0; j < j1; j++)                               \
                        memcpy(out + (size_t)(i * oa + j) * sizeof(T),              \
                               in + (ptrdiff_t)(i + j * sl) * (ptrdiff_t)sizeof(T),   \
                               sizeof(T));                                          \
            }                                                                       \
        }                                                                           \
    } while (0)

static void transpose_2d(size_t es, int64_t na, int64_t nl, int64_t oa, int64_t sl,
                         const char *in, char *out)
{
    switch (es) {
    case 1: TRANSPOSE_2D(uint8_t); break;
    case 2: TRANSPOSE_2D(uint16_t); break;
    case 4: TRANSPOSE_2D(uint32_t); break;
    case 8: TRANSPOSE_2D(uint64_t); break;
    default:
        for (int64_t i0 = 0; i0 < na; i0 += TILE) {
            int64_t i1 = i0 + TILE < na ? i0 + TILE : na;
            for (int64_t j0 = 0; j0 < nl; j0 += TILE) {
                int64_t j1 = j0 + TILE < nl ? j0 + TILE : nl;
                for (int64_t i = i0; i < i1; i++)
                    for (int64_t j = j0; j < j1; j++)
                        memcpy(out + (size_t)(i * oa + j) * es, in + (i + j * sl) * (ptrdiff_t)es,
                               es);
            }
        }
        break;
    }
}

/* out[j] = in[j * stride] for j < n (stride in elements, may be negative). */
static void row_strided(size_t es, int64_t n, const char *in, int64_t stride, char *out)
{
    ptrdiff_t step = (ptrdiff_t)stride * (ptrdiff_t)es;
    switch (es) {
    case 4:
        for (int64_t j = 0; j < n; j++)
            memcpy(out + (size_t)j * 4, in + (ptrdiff_t)j * step, 4);
        break;
    case 8:
        for (int64_t j = 0; j < n; j++)
            memcpy(out + (size_t)j * 8, in + (ptrdiff_t)j * step, 8);
        break;
    default:
        for (int64_t j = 0; j < n; j++)
            copy_elem(es, out + (size_t)j * es, in + (ptrdiff_t)j * step);
        break;
    }
}

void fxrt_copy_strided(size_t es, int rank, const int64_t *dims, const void *in_,
                       const int64_t *in_strides, void *out_)
{
    const char *in = in_;
    char *out = out_;
    StridedJob j;
    int64_t numel = 1;

    for (int d = 0; d < rank; d++)
        numel *= dims[d];
    if (numel == 0)
        return;

    /* Drop size-1 axes; merge an axis into the previous one when the input
     * walks them as one (the previous stride spans this whole axis). */
    j.es = es;
    j.rank = 0;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 1)
            continue;
        if (j.rank > 0 && j.istr[j.rank - 1] == in_strides[d] * dims[d]) {
            j.dims[j.rank - 1] *= dims[d];
            j.istr[j.rank - 1] = in_strides[d];
        } else {
            j.dims[j.rank] = dims[d];
            j.istr[j.rank] = in_strides[d];
            j.rank++;
        }
    }
    if (j.rank == 0) {
        copy_elem(es, out, in);
        return;
    }
    int r = j.rank;
    j.ostr[r - 1] = 1;
    for (int d = r - 2; d >= 0; d--)
        j.ostr[d] = j.ostr[d + 1] * j.dims[d + 1];

    /* Pick the inner kernel: contiguous runs, a 2-D tile transpose between
     * the axis the input walks contiguously and the last output axis, or a
     * strided row. */
    int last = r - 1, tile_axis = -1;
    if (j.istr[last] != 1) {
        for (int d = 0; d < last; d++)
            if (j.istr[d] == 1 && j.dims[d] >= 4 && j.dims[last] >= 4)
                tile_axis = d;
    }

    /* Odometer over the outer axes (all but `last` and `tile_axis`). */
    int64_t idx[FXRT_MAX_RANK] = {0};
    ptrdiff_t ioff = 0, ooff = 0;
    for (;;) {
        const char *ip = in + ioff * (ptrdiff_t)es;
        char *op = out + ooff * (ptrdiff_t)es;
        if (j.istr[last] == 1)
            memcpy(op, ip, (size_t)j.dims[last] * es);
        else if (tile_axis >= 0)
            transpose_2d(es, j.dims[tile_axis], j.dims[last], j.ostr[tile_axis], j.istr[last],
                         ip, op);
        else
            row_strided(es, j.dims[last], ip, j.istr[last], op);

        int d = last - 1;
        for (; d >= 0; d--) {
            if (d == tile_axis)
                continue;
            idx[d]++;
            ioff += j.istr[d];
            ooff += j.ostr[d];
            if (idx[d] < j.dims[d])
                break;
            ioff -= j.istr[d] * j.dims[d];
            ooff -= j.ostr[d] * j.dims[d];
            idx[d] = 0;
        }
        if (d < 0)
            break;
    }
}

static void contiguous_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

void fxrt_transpose(size_t es, int rank, const int64_t *in_dims, const int64_t *perm,
                    const void *in, void *out)
{
    int64_t istr[FXRT_MAX_RANK], odims[FXRT_MAX_RANK], ostr_in[FXRT_MAX_RANK];
    contiguous_strides(rank, in_dims, istr);
    for (int d = 0; d < rank; d++) {
        odims[d] = in_dims[perm[d]];
        ostr_in[d] = istr[perm[d]];
    }
    fxrt_copy_strided(es, rank, odims, in, ostr_in, out);
}

void fxrt_transpose_f32(int rank, const int64_t *in_dims, const int64_t *perm,
                        const float *in, float *out)
{
    fxrt_transpose(sizeof(float), rank, in_dims, perm, in, out);
}

void fxrt_slice(size_t es, int rank, const int64_t *in_dims, const int64_t *starts,
                const int64_t *steps, const int64_t *out_dims, const void *in, void *out)
{
    int64_t istr[FXRT_MAX_RANK], sstr[FXRT_MAX_RANK];
    int64_t numel = 1, base = 0;
    for (int d = 0; d < rank; d++)
        numel *= out_dims[d];
    if (numel == 0)
        return; /* starts may sit at the end of an axis: form no pointer */
    contiguous_strides(rank, in_dims, istr);
    for (int d = 0; d < rank; d++) {
        base += starts[d] * istr[d];
        sstr[d] = istr[d] * steps[d];
    }
    fxrt_copy_strided(es, rank, out_dims, (const char *)in + base * (ptrdiff_t)es, sstr, out);
}

/* ------------------------------------------------------------------------- */
/* Concat and split                                                           */
/* ------------------------------------------------------------------------- */

void fxrt_concat(size_t es, int64_t outer, int64_t inner, int num_inputs,
                 const int64_t *axis_dims, const void *const *ins, void *out)
{
    char *o = out;
    for (int64_t i = 0; i < outer; i++) {
        for (int k = 0; k < num_inputs; k++) {
            size_t len = (size_t)(axis_dims[k] * inner) * es;
            if (len == 0)
                continue;
            memcpy(o, (const char *)ins[k] + (size_t)i * len, len);
            o += len;
        }
    }
}

void fxrt_split(size_t es, int64_t outer, int64_t inner, int num_outputs,
                const int64_t *axis_dims, const void *in, void *const *outs)
{
    const char *p = in;
    for (int64_t i = 0; i < outer; i++) {
        for (int k = 0; k < num_outputs; k++) {
            size_t len = (size_t)(axis_dims[k] * inner) * es;
            if (len == 0)
                continue;
            memcpy((char *)outs[k] + (size_t)i * len, p, len);
            p += len;
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Expand and tile: a periodic broadcast                                      */
/* ------------------------------------------------------------------------- */

/* Output index i along axis d reads input index i % in_dims[d]; this covers
 * both Expand (in dim 1) and Tile (out dim a multiple of the in dim).  The
 * first in_dims[d] blocks are built from the input, the rest are copies of
 * what is already written, doubling each time. */
static void bcast_rec(size_t es, int d, int rank, const int64_t *in_dims,
                      const int64_t *out_dims, const size_t *iblock, const size_t *oblock,
                      const char *in, char *out)
{
    int64_t ni = in_dims[d], no = out_dims[d];
    if (d == rank - 1) {
        if (ni == 1 && no > 1)
            fxrt_fill(es, no, in, out);
        else
            memcpy(out, in, (size_t)ni * es);
    } else {
        for (int64_t i = 0; i < ni; i++)
            bcast_rec(es, d + 1, rank, in_dims, out_dims, iblock, oblock,
                      in + (size_t)i * iblock[d], out + (size_t)i * oblock[d]);
        if (ni == no)
            return;
    }
    size_t total = (size_t)no * oblock[d], done = (size_t)ni * oblock[d];
    while (done < total) {
        size_t c = done < total - done ? done : total - done;
        memcpy(out + done, out, c);
        done += c;
    }
}

static void bcast_copy(size_t es, int rank, const int64_t *in_dims, const int64_t *out_dims,
                       const void *in, void *out)
{
    size_t iblock[FXRT_MAX_RANK], oblock[FXRT_MAX_RANK];
    int64_t numel = 1;
    for (int d = 0; d < rank; d++)
        numel *= out_dims[d];
    if (numel == 0)
        return;
    if (rank == 0) {
        copy_elem(es, out, in);
        return;
    }
    size_t ib = es, ob = es;
    for (int d = rank - 1; d >= 0; d--) {
        iblock[d] = ib;
        oblock[d] = ob;
        ib *= (size_t)in_dims[d];
        ob *= (size_t)out_dims[d];
    }
    bcast_rec(es, 0, rank, in_dims, out_dims, iblock, oblock, in, out);
}

void fxrt_expand(size_t es, int rank, const int64_t *in_dims, const int64_t *out_dims,
                 const void *in, void *out)
{
    bcast_copy(es, rank, in_dims, out_dims, in, out);
}

void fxrt_tile(size_t es, int rank, const int64_t *in_dims, const int64_t *out_dims,
               const void *in, void *out)
{
    bcast_copy(es, rank, in_dims, out_dims, in, out);
}

/* ------------------------------------------------------------------------- */
/* Pad                                                                        */
/* ------------------------------------------------------------------------- */

/* Source index for a position s (may be outside [0, n)), or -1 for "use the
 * constant". */
static int64_t pad_source(int64_t s, int64_t n, FxrtPadMode mode)
{
    if (s >= 0 && s < n)
        return s;
    if (n <= 0)
        return -1;
    switch (mode) {
    case FXRT_PAD_EDGE:
        return s < 0 ? 0 : n - 1;
    case FXRT_PAD_REFLECT: {
        if (n == 1)
            return 0;
        int64_t p = 2 * (n - 1), m = s % p;
        if (m < 0)
            m += p;
        return m < n ? m : p - m;
    }
    case FXRT_PAD_WRAP: {
        int64_t m = s % n;
        return m < 0 ? m + n : m;
    }
    case FXRT_PAD_CONSTANT:
    default:
        return -1;
    }
}

void fxrt_pad(size_t es, int rank, const int64_t *in_dims, const int64_t *pads,
              FxrtPadMode mode, const void *value, const void *in_, void *out_)
{
    const char *in = in_;
    char *out = out_;
    int64_t odims[FXRT_MAX_RANK], istr[FXRT_MAX_RANK];
    int64_t numel = 1;

    for (int d = 0; d < rank; d++) {
        odims[d] = in_dims[d] + pads[d] + pads[rank + d];
        numel *= odims[d];
    }
    if (numel == 0)
        return;
    if (rank == 0) {
        copy_elem(es, out, in);
        return;
    }
    contiguous_strides(rank, in_dims, istr);

    int last = rank - 1;
    int64_t n = in_dims[last], no = odims[last], pb = pads[last];
    /* The part [mid0, mid1) of an output row that maps straight onto the
     * input row; both ends are clamped to the row, because a begin pad can
     * exceed the row that a negative end pad cropped. */
    int64_t mid0 = pb < 0 ? 0 : pb > no ? no : pb;
    int64_t mid1 = pb + n < no ? pb + n : no;
    if (mid1 < mid0)
        mid1 = mid0;

    int64_t idx[FXRT_MAX_RANK] = {0};
    for (char *row = out;; row += (size_t)no * es) {
        /* Input row for this output row, or none (constant). */
        ptrdiff_t ioff = 0;
        int constant_row = 0;
        for (int d = 0; d < last; d++) {
            int64_t s = pad_source(idx[d] - pads[d], in_dims[d], mode);
            if (s < 0) {
                constant_row = 1;
                break;
            }
            ioff += s * istr[d];
        }
        if (constant_row || n == 0) {
            fxrt_fill(es, no, value, row);
        } else {
            const char *irow = in + ioff * (ptrdiff_t)es;
            for (int64_t o = 0; o < mid0; o++) {
                int64_t s = pad_source(o - pb, n, mode);
                copy_elem(es, row + (size_t)o * es, s < 0 ? value : irow + (size_t)s * es);
            }
            if (mid1 > mid0)
                memcpy(row + (size_t)mid0 * es, irow + (size_t)(mid0 - pb) * es,
                       (size_t)(mid1 - mid0) * es);
            for (int64_t o = mid1; o < no; o++) {
                int64_t s = pad_source(o - pb, n, mode);
                copy_elem(es, row + (size_t)o * es, s < 0 ? value : irow + (size_t)s * es);
            }
        }
        int d = last - 1;
        for (; d >= 0; d--) {
            if (++idx[d] < odims[d])
                break;
            idx[d] = 0;
        }
        if (d < 0)
            break;
    }
}

/* ------------------------------------------------------------------------- */
/* Depth <-> space: a 6-D transpose                                           */
/* ------------------------------------------------------------------------- */

void fxrt_depth_to_space(size_t es, int64_t n, int64_t c, int64_t h, int64_t w,
                         int64_t b, int crd, const void *in, void *out)
{
    int64_t cb = c / (b * b);
    if (crd) {
        const int64_t dims[6] = {n, cb, b, b, h, w}, perm[6] = {0, 1, 4, 2, 5, 3};
        fxrt_transpose(es, 6, dims, perm, in, out);
    } else {
        const int64_t dims[6] = {n, b, b, cb, h, w}, perm[6] = {0, 3, 4, 1, 5, 2};
        fxrt_transpose(es, 6, dims, perm, in, out);
    }
}

void fxrt_space_to_depth(size_t es, int64_t n, int64_t c, int64_t h, int64_t w, int64_t b,
                         const void *in, void *out)
{
    const int64_t dims[6] = {n, c, h / b, b, w / b, b}, perm[6] = {0, 3, 5, 1, 2, 4};
    fxrt_transpose(es, 6, dims, perm, in, out);
}

/* ------------------------------------------------------------------------- */
/* Trilu, EyeLike, Range                                                      */
/* ------------------------------------------------------------------------- */

/* Keeps i + k within reach of the matrix so that it cannot overflow. */
static int64_t clamp_diag(int64_t k, int64_t rows, int64_t cols)
{
    if (k < -rows - 1)
        return -rows - 1;
    if (k > cols + 1)
        return cols + 1;
    return k;
}

void fxrt_trilu(size_t es, int64_t batch, int64_t rows, int64_t cols, int64_t k, int upper,
                const void *in_, void *out_)
{
    const char *in = in_;
    char *out = out_;
    size_t rowb = (size_t)cols * es;
    k = clamp_diag(k, rows, cols);
    for (int64_t m = 0; m < batch * rows; m++) {
        int64_t i = m % rows;
        /* kept columns: [lo, hi) */
        int64_t lo = upper ? i + k : 0, hi = upper ? cols : i + k + 1;
        if (lo < 0)
            lo = 0;
        if (hi > cols)
            hi = cols;
        char *o = out + (size_t)m * rowb;
        const char *p = in + (size_t)m * rowb;
        if (hi <= lo) {
            memset(o, 0, rowb);
            continue;
        }
        memset(o, 0, (size_t)lo * es);
        memcpy(o + (size_t)lo * es, p + (size_t)lo * es, (size_t)(hi - lo) * es);
        memset(o + (size_t)hi * es, 0, (size_t)(cols - hi) * es);
    }
}

void fxrt_eye_like(size_t es, int64_t rows, int64_t cols, int64_t k, const void *one,
                   void *out)
{
    char *o = out;
    memset(o, 0, (size_t)(rows * cols) * es);
    k = clamp_diag(k, rows, cols);
    for (int64_t i = 0; i < rows; i++) {
        int64_t j = i + k;
        if (j >= 0 && j < cols)
            copy_elem(es, o + (size_t)(i * cols + j) * es, one);
    }
}

#define RANGE_LOOP(T, ACC)                                                   \
    do {                                                                     \
        T s_, d_;                                                            \
        memcpy(&s_, start, sizeof(T));                                       \
        memcpy(&d_, delta, sizeof(T));                                       \
        for (int64_t i = 0; i < n; i++) {                                    \
            T v_ = (T)((ACC)s_ + (ACC)i * (ACC)d_);                          \
            memcpy((char *)out + (size_t)i * sizeof(T), &v_, sizeof(T));     \
        }                                                                    \
    } while (0)

int fxrt_range(FxrtDType t, const void *start, const void *delta, int64_t n, void *out)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: RANGE_LOOP(float, double); break;
    case FXRT_DTYPE_FLOAT64: RANGE_LOOP(double, double); break;
    /* Integer ranges use unsigned arithmetic: it wraps instead of
     * overflowing, and a valid range never wraps anyway. */
    case FXRT_DTYPE_INT8: RANGE_LOOP(int8_t, uint64_t); break;
    case FXRT_DTYPE_INT16: RANGE_LOOP(int16_t, uint64_t); break;
    case FXRT_DTYPE_INT32: RANGE_LOOP(int32_t, uint64_t); break;
    case FXRT_DTYPE_INT64: RANGE_LOOP(int64_t, uint64_t); break;
    case FXRT_DTYPE_UINT8: RANGE_LOOP(uint8_t, uint64_t); break;
    case FXRT_DTYPE_UINT16: RANGE_LOOP(uint16_t, uint64_t); break;
    case FXRT_DTYPE_UINT32: RANGE_LOOP(uint32_t, uint64_t); break;
    case FXRT_DTYPE_UINT64: RANGE_LOOP(uint64_t, uint64_t); break;
    default: return FXRT_INDEX_ERROR;
    }
    return FXRT_INDEX_OK;
}
