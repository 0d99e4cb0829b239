/*
 * fxrt_reduce_scan.c - TopK and CumSum, both along one axis of an
 * [outer, n, inner] view.
 *
 * TopK keeps, per (outer, inner) line, a binary heap of the k best positions
 * seen so far with the worst of them at the root: each new element either
 * loses to the root or replaces it, O(n log k).  Draining the heap then
 * writes the selection from the back, so the output is sorted best first.
 * The order is total (value, then lower index first; NaN above every
 * number), which makes the result deterministic whether or not the model
 * asked for sorted output.  CumSum runs row by row so the inner loop is
 * sequential in memory; integer sums are done on uint64 so that overflow
 * wraps instead of being undefined.
 *
 * The FxrtDType entry points return 0 for types they do not handle.
 */
#include <math.h>

#include "fxrt.h"

#define FXRT_ISNAN_FLOAT(v) isnan(v)
#define FXRT_ISNAN_INT(v) ((void)(v), 0)

size_t fxrt_topk_scratch_bytes(int64_t k)
{
    return (size_t)(k > 0 ? k : 1) * sizeof(int64_t);
}

/* T: element type, S: name suffix, ISNAN: NaN test for T. */
#define FXRT_TOPK_DEFINE(T, S, ISNAN)                                                       \
    /* Does position a (value va) come before b in the output? */                           \
    static int topk_before_##S(T va, int64_t a, T vb, int64_t b, int largest)               \
    {                                                                                       \
        int an = ISNAN(va), bn = ISNAN(vb), gt, eq;                                         \
        if (an || bn) {                                                                     \
            gt = an && !bn;                                                                 \
            eq = an && bn;                                                                  \
        } else {                                                                            \
            gt = va > vb;                                                                   \
            eq = va == vb;                                                                  \
        }                                                                                   \
        if (eq)                                                                             \
            return a < b;                                                                   \
        return largest ? gt : !gt;                                                          \
    }                                                                                       \
                                                                                            \
    /* Restores the heap (worst at the root) below slot `at`. */                            \
    static void topk_sift_down_##S(const T *p, int64_t inner, int64_t *h, int64_t size,     \
                                   int64_t at, int largest)                                 \
    {                                                                                       \
        for (;;) {                                                                          \
            int64_t c = 2 * at + 1, worst = at;                                             \
            for (int64_t e = c; e < c + 2 && e < size; e++)                                 \
                if (topk_before_##S(p[h[worst] * inner], h[worst], p[h[e] * inner], h[e],   \
                                    largest))                                               \
                    worst = e;                                                              \
            if (worst == at)                                                                \
                return;                                                                     \
            int64_t tmp = h[at];                                                            \
            h[at] = h[worst];                                                               \
            h[worst] = tmp;                                                                 \
            at = worst;                                                                     \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static void topk_##S(const T *x, T *values, int64_t *indices, int64_t outer, int64_t n, \
                         int64_t inner, int64_t k, int largest, int64_t *h)                 \
    {                                                                                       \
        if (k <= 0)                                                                         \
            return;                                                                         \
        for (int64_t o = 0; o < outer; o++)                                                 \
            for (int64_t i = 0; i < inner; i++) {                                           \
                const T *p = x + o * n * inner + i;                                         \
                int64_t size = 0;                                                           \
                for (int64_t r = 0; r < n; r++) {                                           \
                    if (size < k) { /* push, sift up */                                     \
                        int64_t at = size++;                                                \
                        h[at] = r;                                                          \
                        while (at > 0) {                                                    \
                            int64_t up = (at - 1) / 2;                                      \
                            if (!topk_before_##S(p[h[up] * inner], h[up], p[r * inner], r,  \
                                                 largest))                                  \
                                break;                                                      \
                            h[at] = h[up];                                                  \
                            h[up] = r;                                                      \
                            at = up;                                                        \
                        }                                                                   \
                    } else if (topk_before_##S(p[r * inner], r, p[h[0] * inner], h[0],      \
                                               largest)) {                                  \
                        h[0] = r;                                                           \
                        topk_sift_down_##S(p, inner, h, size, 0, largest);                  \
                    }                                                                       \
                }                                                                           \
                T *vo = values + o * k * inner + i;                                         \
                int64_t *io = indices + o * k * inner + i;                                  \
                while (size > 0) { /* the root is the worst: fill from the back */          \
                    int64_t r = h[0];                                                       \
                    size--;                                                                 \
                    vo[size * inner] = p[r * inner];                                        \
                    io[size * inner] = r;                                                   \
                    h[0] = h[size];                                                         \
                    topk_sift_down_##S(p, inner, h, size, 0, largest);                      \
                }                                                                           \
            }                                                                               \
    }

FXRT_TOPK_DEFINE(float, f32, FXRT_ISNAN_FLOAT)
FXRT_TOPK_DEFINE(double, f64, FXRT_ISNAN_FLOAT)
FXRT_TOPK_DEFINE(int8_t, i8, FXRT_ISNAN_INT)
FXRT_TOPK_DEFINE(uint8_t, u8, FXRT_ISNAN_INT)
FXRT_TOPK_DEFINE(int16_t, i16, FXRT_ISNAN_INT)
FXRT_TOPK_DEFINE(uint16_t, u16, FXRT_ISNAN_INT)
FXRT_TOPK_DEFINE(int32_t, i32, FXRT_ISNAN_INT)
FXRT_TOPK_DEFINE(uint32_t, u32, FXRT_ISNAN_INT)
FXRT_TOPK_DEFINE(int64_t, i64, FXRT_ISNAN_INT)
FXRT_TOPK_DEFINE(uint64_t, u64, FXRT_ISNAN_INT)

void fxrt_topk_f32(const float *x, float *values, int64_t *indices, int64_t outer, int64_t n,
                   int64_t inner, int64_t k, int largest, void *scratch)
{
    topk_f32(x, values, indices, outer, n, inner, k, largest, scratch);
}

int fxrt_topk(FxrtDType t, const void *x, void *values, int64_t *indices, int64_t outer,
              int64_t n, int64_t inner, int64_t k, int largest, void *scratch)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: topk_f32(x, values, indices, outer, n, inner, k, largest, scratch); break;
    case FXRT_DTYPE_FLOAT64: topk_f64(x, values, indices, outer, n, inner, k, largest, scratch); break;
    case FXRT_DTYPE_INT8: topk_i8(x, values, indices, outer, n, inner, k, largest, scratch); break;
    case FXRT_DTYPE_UINT8: topk_u8(x, values, indices, outer, n, inner, k, largest, scratch); break;
    case FXRT_DTYPE_INT16: topk_i16(x, values, indices, outer, n, inner, k, largest, scratch); break;
    case FXRT_DTYPE_UINT16: topk_u16(x, values, indices, outer, n, inner, k, largest, scratch); break;
    case FXRT_DTYPE_INT32: topk_i32(x, values, indices, outer, n, inner, k, largest, scratch); break;
    case FXRT_DTYPE_UINT32: topk_u32(x, values, indices, outer, n, inner, k, largest, scratch); break;
    case FXRT_DTYPE_INT64: topk_i64(x, values, indices, outer, n, inner, k, largest, scratch); break;
    case FXRT_DTYPE_UINT64: topk_u64(x, values, indices, outer, n, inner, k, largest, scratch); break;
    default: return 0;
    }
    return 1;
}

/* T: element type, S: suffix, A: accumulator type (uint64_t for integers). */
#define FXRT_CUMSUM_DEFINE(T, S, A)                                                         \
    static void cumsum_##S(const T *x, T *y, int64_t outer, int64_t n, int64_t inner,       \
                           int exclusive, int reverse)                                      \
    {                                                                                       \
        for (int64_t o = 0; o < outer; o++) {                                               \
            const T *xb = x + o * n * inner;                                                \
            T *yb = y + o * n * inner;                                                      \
            for (int64_t s = 0; s < n; s++) {                                               \
                int64_t r = reverse ? n - 1 - s : s, prev = reverse ? r + 1 : r - 1;        \
                T *yr = yb + r * inner;                                                     \
                if (s == 0) {                                                               \
                    for (int64_t i = 0; i < inner; i++)                                     \
                        yr[i] = exclusive ? (T)0 : xb[r * inner + i];                       \
                    continue;                                                               \
                }                                                                           \
                const T *yp = yb + prev * inner, *xs = xb + (exclusive ? prev : r) * inner; \
                for (int64_t i = 0; i < inner; i++)                                         \
                    yr[i] = (T)((A)yp[i] + (A)xs[i]);                                       \
            }                                                                               \
        }                                                                                   \
    }

FXRT_CUMSUM_DEFINE(float, f32, float)
FXRT_CUMSUM_DEFINE(double, f64, double)
FXRT_CUMSUM_DEFINE(int8_t, i8, uint64_t)
FXRT_CUMSUM_DEFINE(uint8_t, u8, uint64_t)
FXRT_CUMSUM_DEFINE(int16_t, i16, uint64_t)
FXRT_CUMSUM_DEFINE(uint16_t, u16, uint64_t)
FXRT_CUMSUM_DEFINE(int32_t, i32, uint64_t)
FXRT_CUMSUM_DEFINE(uint32_t, u32, uint64_t)
FXRT_CUMSUM_DEFINE(int64_t, i64, uint64_t)
FXRT_CUMSUM_DEFINE(uint64_t, u64, uint64_t)

void fxrt_cumsum_f32(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
                     int exclusive, int reverse)
{
    cumsum_f32(x, y, outer, n, inner, exclusive, reverse);
}

int fxrt_cumsum(FxrtDType t, const void *x, void *y, int64_t outer, int64_t n, int64_t inner,
                int exclusive, int reverse)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: cumsum_f32(x, y, outer, n, inner, exclusive, reverse); break;
    case FXRT_DTYPE_FLOAT64: cumsum_f64(x, y, outer, n, inner, exclusive, reverse); break;
    case FXRT_DTYPE_INT8: cumsum_i8(x, y, outer, n, inner, exclusive, reverse); break;
    case FXRT_DTYPE_UINT8: cumsum_u8(x, y, outer, n, inner, exclusive, reverse); break;
    case FXRT_DTYPE_INT16: cumsum_i16(x, y, outer, n, inner, exclusive, reverse); break;
    case FXRT_DTYPE_UINT16: cumsum_u16(x, y, outer, n, inner, exclusive, reverse); break;
    case FXRT_DTYPE_INT32: cumsum_i32(x, y, outer, n, inner, exclusive, reverse); break;
    case FXRT_DTYPE_UINT32: cumsum_u32(x, y, outer, n, inner, exclusive, reverse); break;
    case FXRT_DTYPE_INT64: cumsum_i64(x, y, outer, n, inner, exclusive, reverse); break;
    case FXRT_DTYPE_UINT64: cumsum_u64(x, y, outer, n, inner, exclusive, reverse); break;
    default: return 0;
    }
    return 1;
}
