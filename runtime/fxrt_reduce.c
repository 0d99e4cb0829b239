/*
 * fxrt_reduce.c - ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
 * ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare, and
 * ArgMax / ArgMin.
 *
 * A reduction is "fold every element of a strided sub-space into an
 * accumulator, then finish" (divide for Mean, sqrt for L2, log for LogSum).
 * The contiguous case [outer, n, inner] has two loops: inner == 1 folds each
 * row of n elements; inner > 1 folds whole rows of `inner` elements into the
 * output, which is sequential in memory and vectorizes.  Arbitrary axes walk
 * the kept axes in output order and, per output, the reduced axes with an
 * odometer.  LogSumExp takes two passes per output (max of the finite
 * elements, then sum of exp(x - max)) so that it never overflows.
 *
 * float32 and float64 share one set of loops written as a macro over the
 * element type.  Integers go through uint64 accumulators (wrapping, so that
 * overflow is defined) and double for the ops that need real arithmetic.
 * Nothing here refuses: shapes and types were checked by the caller, and an
 * unsupported type makes the FxrtDType entry points return 0.
 */
#include <math.h>
#include <string.h>

#include "fxrt.h"

/* What one element contributes to the accumulator. */
enum {
    ACC_SUM,        /* a += v */
    ACC_ABS,        /* a += |v| */
    ACC_SQUARE,     /* a += v*v */
    ACC_PROD,       /* a *= v */
    ACC_MAX,        /* a = max(a, v), NaN sticks */
    ACC_MIN,        /* a = min(a, v), NaN sticks */
    ACC_MAX_FINITE, /* first pass of LogSumExp: max over finite v */
    ACC_EXP_SUM     /* second pass of LogSumExp: a += exp(v - m) */
};

static int reduce_acc_kind(FxrtReduceOp op)
{
    switch (op) {
    case FXRT_REDUCE_SUM:
    case FXRT_REDUCE_MEAN:
    case FXRT_REDUCE_LOG_SUM: return ACC_SUM;
    case FXRT_REDUCE_MAX: return ACC_MAX;
    case FXRT_REDUCE_MIN: return ACC_MIN;
    case FXRT_REDUCE_PROD: return ACC_PROD;
    case FXRT_REDUCE_L1: return ACC_ABS;
    case FXRT_REDUCE_L2:
    case FXRT_REDUCE_SUM_SQUARE: return ACC_SQUARE;
    case FXRT_REDUCE_LOG_SUM_EXP: return ACC_EXP_SUM;
    }
    return ACC_SUM;
}

/* Advances a multi-index over dims[0..n) (last fastest), keeping *off equal
 * to sum(idx[k] * strides[k]).  Returns 0 after the last position. */
static int odometer_next(int n, const int64_t *dims, const int64_t *strides, int64_t *idx,
                         int64_t *off)
{
    for (int k = n - 1; k >= 0; k--) {
        if (++idx[k] < dims[k]) {
            *off += strides[k];
            return 1;
        }
        *off -= (dims[k] - 1) * strides[k];
        idx[k] = 0;
    }
    return 0;
}

void fxrt_reduce_view_init(FxrtReduceView *v, int rank, const int64_t *dims, uint32_t axes_mask)
{
    memset(v, 0, sizeof *v);
    int m = 0;
    for (int a = 0; a < rank && a < FXRT_MAX_RANK; a++) {
        uint32_t red = (axes_mask >> a) & 1u;
        if (dims[a] == 1)
            continue; /* reducing or keeping a 1 is the same */
        if (m > 0 && red == ((v->reduced >> (m - 1)) & 1u)) {
            v->dims[m - 1] *= dims[a];
        } else {
            v->dims[m] = dims[a];
            v->reduced |= red << m;
            m++;
        }
    }
    v->rank = m;
    int runs = 0, run_at = -1;
    v->count = 1;
    for (int k = 0; k < m; k++)
        if ((v->reduced >> k) & 1u) {
            runs++;
            run_at = k;
            v->count *= v->dims[k];
        }
    v->contiguous = runs <= 1;
    v->outer = 1;
    v->n = 1;
    v->inner = 1;
    if (v->contiguous) {
        for (int k = 0; k < m; k++) {
            if (run_at < 0 || k < run_at)
                v->outer *= v->dims[k];
            else if (k == run_at)
                v->n = v->dims[k];
            else
                v->inner *= v->dims[k];
        }
    }
}

/* Splits a view into its kept axes (with input strides) and its reduced
 * axes; returns the number of outputs. */
static int64_t view_split(const FxrtReduceView *v, int *nk, int64_t *kd, int64_t *ks, int *nr,
                          int64_t *rd, int64_t *rs)
{
    int64_t strides[FXRT_MAX_RANK], s = 1, outputs = 1;
    for (int k = v->rank - 1; k >= 0; k--) {
        strides[k] = s;
        s *= v->dims[k];
    }
    *nk = *nr = 0;
    for (int k = 0; k < v->rank; k++) {
        if ((v->reduced >> k) & 1u) {
            rd[*nr] = v->dims[k];
            rs[(*nr)++] = strides[k];
        } else {
            kd[*nk] = v->dims[k];
            ks[(*nk)++] = strides[k];
            outputs *= v->dims[k];
        }
    }
    return outputs;
}

/* ------------------------------------------------------------------------- */
/* float32 / float64                                                          */
/* ------------------------------------------------------------------------- */

/* T: element type; S: name suffix; F: suffix of the <math.h> functions. */
#define FXRT_REDUCE_FLOAT_DEFINE(T, S, F)                                                   \
    static T reduce_init_##S(int kind)                                                      \
    {                                                                                       \
        switch (kind) {                                                                     \
        case ACC_PROD: return (T)1;                                                         \
        case ACC_MAX:                                                                       \
        case ACC_MAX_FINITE: return (T)-INFINITY;                                           \
        case ACC_MIN: return (T)INFINITY;                                                   \
        default: return (T)0;                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* max (or min) of a and x[0..len): four branch-free chains; NaN is tracked     \
     * apart, since a NaN never wins a comparison but must win the reduction. */         \
    static T reduce_extreme_##S(int is_min, T a, const T *x, int64_t len)                   \
    {                                                                                       \
        T m[4] = {a, a, a, a};                                                              \
        int nan = 0;                                                                        \
        int64_t i = 0;                                                                      \
        if (is_min) {                                                                       \
            for (; i + 4 <= len; i += 4)                                                    \
                for (int k = 0; k < 4; k++) {                                               \
                    T v = x[i + k];                                                         \
                    m[k] = v < m[k] ? v : m[k];                                             \
                    nan |= v != v;                                                          \
                }                                                                           \
        } else {                                                                            \
            for (; i + 4 <= len; i += 4)                                                    \
                for (int k = 0; k < 4; k++) {                                               \
                    T v = x[i + k];                                                         \
                    m[k] = v > m[k] ? v : m[k];                                             \
                    nan |= v != v;                                                          \
                }                                                                           \
        }                                                                                   \
        for (; i < len; i++) {                                                              \
            T v = x[i];                                                                     \
            m[0] = (is_min ? v < m[0] : v > m[0]) ? v : m[0];                               \
            nan |= v != v;                                                                  \
        }                                                                                   \
        if (nan)                                                                            \
            return (T)NAN;                                                                  \
        for (int k = 1; k < 4; k++)                                                         \
            m[0] = (is_min ? m[k] < m[0] : m[k] > m[0]) ? m[k] : m[0];                      \
        return m[0];                                                                        \
    }                                                                                       \
                                                                                            \
    /* Folds len elements st apart into a. */                                               \
    static T reduce_fold_##S(int kind, T a, const T *x, int64_t len, int64_t st, T m)       \
    {                                                                                       \
        switch (kind) {                                                                     \
        case ACC_SUM:                                                                       \
            if (st == 1) { /* four chains: shorter dependency, better rounding */           \
                T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                           \
                int64_t i = 0;                                                              \
                for (; i + 4 <= len; i += 4) {                                              \
                    s0 += x[i];                                                             \
                    s1 += x[i + 1];                                                         \
                    s2 += x[i + 2];                                                         \
                    s3 += x[i + 3];                                                         \
                }                                                                           \
                for (; i < len; i++)                                                        \
                    s0 += x[i];                                                             \
                return a + ((s0 + s1) + (s2 + s3));                                         \
            }                                                                               \
            for (int64_t i = 0; i < len; i++)                                               \
                a += x[i * st];                                                             \
            break;                                                                          \
        case ACC_ABS:                                                                       \
            for (int64_t i = 0; i < len; i++)                                               \
                a += fabs##F(x[i * st]);                                                    \
            break;                                                                          \
        case ACC_SQUARE:                                                                    \
            for (int64_t i = 0; i < len; i++) {                                             \
                T v = x[i * st];                                                            \
                a += v * v;                                                                 \
            }                                                                               \
            break;                                                                          \
        case ACC_PROD:                                                                      \
            for (int64_t i = 0; i < len; i++)                                               \
                a *= x[i * st];                                                             \
            break;                                                                          \
        case ACC_MAX:                                                                       \
        case ACC_MIN:                                                                       \
            if (st == 1 && !isnan(a))                                                       \
                return reduce_extreme_##S(kind == ACC_MIN, a, x, len);                      \
            for (int64_t i = 0; i < len; i++) {                                             \
                T v = x[i * st];                                                            \
                if ((kind == ACC_MAX ? v > a : v < a) || isnan(v))                          \
                    a = v;                                                                  \
            }                                                                               \
            break;                                                                          \
        case ACC_MAX_FINITE:                                                                \
            for (int64_t i = 0; i < len; i++) {                                             \
                T v = x[i * st];                                                            \
                if (isfinite(v) && v > a)                                                   \
                    a = v;                                                                  \
            }                                                                               \
            break;                                                                          \
        case ACC_EXP_SUM:                                                                   \
            for (int64_t i = 0; i < len; i++)                                               \
                a += exp##F(x[i * st] - m);                                                 \
            break;                                                                          \
        }                                                                                   \
        return a;                                                                           \
    }                                                                                       \
                                                                                            \
    /* acc[0..inner) op= f(row r) for each of the n rows of x. */                           \
    static void reduce_fold_rows_##S(int kind, T *acc, const T *x, int64_t n, int64_t inner) \
    {                                                                                       \
        for (int64_t r = 0; r < n; r++) {                                                   \
            const T *row = x + r * inner;                                                   \
            switch (kind) {                                                                 \
            case ACC_SUM:                                                                   \
                for (int64_t i = 0; i < inner; i++)                                         \
                    acc[i] += row[i];                                                       \
                break;                                                                      \
            case ACC_ABS:                                                                   \
                for (int64_t i = 0; i < inner; i++)                                         \
                    acc[i] += fabs##F(row[i]);                                              \
                break;                                                                      \
            case ACC_SQUARE:                                                                \
                for (int64_t i = 0; i < inner; i++)                                         \
                    acc[i] += row[i] * row[i];                                              \
                break;                                                                      \
            case ACC_PROD:                                                                  \
                for (int64_t i = 0; i < inner; i++)                                         \
                    acc[i] *= row[i];                                                       \
                break;                                                                      \
            case ACC_MAX:                                                                   \
                for (int64_t i = 0; i < inner; i++)                                         \
                    if (row[i] > acc[i] || isnan(row[i]))                                   \
                        acc[i] = row[i];                                                    \
                break;                                                                      \
            case ACC_MIN:                                                                   \
                for (int64_t i = 0; i < inner; i++)                                         \
                    if (row[i] < acc[i] || isnan(row[i]))                                   \
                        acc[i] = row[i];                                                    \
                break;                                                                      \
            default: break; /* LogSumExp never comes here */                                \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    static T reduce_finish_##S(FxrtReduceOp op, T a, int64_t count, T m)                    \
    {                                                                                       \
        switch (op) {                                                                       \
        case FXRT_REDUCE_MEAN: return count ? a / (T)count : (T)NAN;                        \
        case FXRT_REDUCE_L2: return sqrt##F(a);                                             \
        case FXRT_REDUCE_LOG_SUM: return log##F(a);                                         \
        case FXRT_REDUCE_LOG_SUM_EXP: return m + log##F(a);                                 \
        default: return a;                                                                  \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    /* Folds the sub-space rd/rs (nr axes, last innermost) starting at x. */                \
    static T reduce_fold_space_##S(int kind, T a, const T *x, int nr, const int64_t *rd,    \
                                   const int64_t *rs, T m)                                  \
    {                                                                                       \
        if (nr == 0)                                                                        \
            return reduce_fold_##S(kind, a, x, 1, 1, m);                                    \
        int64_t idx[FXRT_MAX_RANK] = {0}, off = 0;                                          \
        do                                                                                  \
            a = reduce_fold_##S(kind, a, x + off, rd[nr - 1], rs[nr - 1], m);               \
        while (odometer_next(nr - 1, rd, rs, idx, &off));                                   \
        return a;                                                                           \
    }                                                                                       \
                                                                                            \
    /* One output: the reduction of `count` elements in the sub-space. */                   \
    static T reduce_one_##S(FxrtReduceOp op, const T *x, int nr, const int64_t *rd,         \
                            const int64_t *rs, int64_t count)                               \
    {                                                                                       \
        int kind = reduce_acc_kind(op);                                                     \
        T m = 0;                                                                            \
        if (count == 0)                                                                     \
            return reduce_finish_##S(op, reduce_init_##S(kind), 0, m);                      \
        if (op == FXRT_REDUCE_LOG_SUM_EXP) {                                                \
            m = reduce_fold_space_##S(ACC_MAX_FINITE, (T)-INFINITY, x, nr, rd, rs, 0);      \
            if (!isfinite(m))                                                               \
                m = 0; /* no finite element: the sum decides (0 -> -inf, inf, NaN) */       \
        }                                                                                   \
        T a = reduce_fold_space_##S(kind, reduce_init_##S(kind), x, nr, rd, rs, m);         \
        return reduce_finish_##S(op, a, count, m);                                          \
    }                                                                                       \
                                                                                            \
    void fxrt_reduce_##S(FxrtReduceOp op, const T *x, T *y, int64_t outer, int64_t n,       \
                         int64_t inner)                                                     \
    {                                                                                       \
        if (inner == 1 || n == 0 || op == FXRT_REDUCE_LOG_SUM_EXP) {                        \
            int64_t rd[1] = {n}, rs[1] = {inner};                                           \
            for (int64_t o = 0; o < outer; o++)                                             \
                for (int64_t i = 0; i < inner; i++)                                         \
                    y[o * inner + i] = reduce_one_##S(op, x + o * n * inner + i, 1, rd, rs, n); \
            return;                                                                         \
        }                                                                                   \
        int kind = reduce_acc_kind(op);                                                     \
        T init = reduce_init_##S(kind);                                                     \
        for (int64_t o = 0; o < outer; o++) {                                               \
            T *acc = y + o * inner;                                                         \
            for (int64_t i = 0; i < inner; i++)                                             \
                acc[i] = init;                                                              \
            reduce_fold_rows_##S(kind, acc, x + o * n * inner, n, inner);                   \
            if (op == FXRT_REDUCE_MEAN || op == FXRT_REDUCE_L2 || op == FXRT_REDUCE_LOG_SUM) \
                for (int64_t i = 0; i < inner; i++)                                         \
                    acc[i] = reduce_finish_##S(op, acc[i], n, 0);                           \
        }                                                                                   \
    }                                                                                       \
                                                                                            \
    void fxrt_reduce_nd_##S(FxrtReduceOp op, const T *x, T *y, const FxrtReduceView *v)     \
    {                                                                                       \
        if (v->contiguous) {                                                                \
            fxrt_reduce_##S(op, x, y, v->outer, v->n, v->inner);                            \
            return;                                                                         \
        }                                                                                   \
        int nk, nr;                                                                         \
        int64_t kd[FXRT_MAX_RANK], ks[FXRT_MAX_RANK], rd[FXRT_MAX_RANK], rs[FXRT_MAX_RANK]; \
        int64_t outputs = view_split(v, &nk, kd, ks, &nr, rd, rs);                          \
        int64_t idx[FXRT_MAX_RANK] = {0}, off = 0, j = 0;                                   \
        if (outputs == 0)                                                                   \
            return;                                                                         \
        do                                                                                  \
            y[j++] = reduce_one_##S(op, x + off, nr, rd, rs, v->count);                     \
        while (odometer_next(nk, kd, ks, idx, &off));                                       \
    }

FXRT_REDUCE_FLOAT_DEFINE(float, f32, f)
FXRT_REDUCE_FLOAT_DEFINE(double, f64, )

/* ------------------------------------------------------------------------- */
/* Integers                                                                   */
/* ------------------------------------------------------------------------- */

static int dtype_is_signed_int(FxrtDType t)
{
    return t == FXRT_DTYPE_INT8 || t == FXRT_DTYPE_INT16 || t == FXRT_DTYPE_INT32 ||
           t == FXRT_DTYPE_INT64;
}

static int dtype_is_int(FxrtDType t)
{
    return dtype_is_signed_int(t) || t == FXRT_DTYPE_UINT8 || t == FXRT_DTYPE_UINT16 ||
           t == FXRT_DTYPE_UINT32 || t == FXRT_DTYPE_UINT64;
}

/* Element e of an integer tensor as uint64 bits (signed values sign-extended). */
static uint64_t int_load(FxrtDType t, const void *x, int64_t e)
{
    return (uint64_t)fxrt_load_i64(t, x, (size_t)e);
}

/* a < b in the type's own order. */
static int int_less(int is_signed, uint64_t a, uint64_t b)
{
    return is_signed ? (int64_t)a < (int64_t)b : a < b;
}

static double int_to_double(int is_signed, uint64_t a)
{
    return is_signed ? (double)(int64_t)a : (double)a;
}

/* The smallest (want_max == 0) or largest value of integer type t, as bits. */
static uint64_t int_limit(FxrtDType t, int want_max)
{
    unsigned bits = 8u * (unsigned)fxrt_dtype_size(t);
    uint64_t all = bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
    if (!dtype_is_signed_int(t))
        return want_max ? all : 0;
    uint64_t top = (uint64_t)1 << (bits - 1); /* magnitude of the signed minimum */
    return want_max ? top - 1 : (uint64_t)0 - top;
}

static void int_reduce_one(FxrtReduceOp op, FxrtDType t, const void *x, int64_t base, int nr,
                           const int64_t *rd, const int64_t *rs, int64_t count, void *y,
                           int64_t j)
{
    int sg = dtype_is_signed_int(t);
    int64_t idx[FXRT_MAX_RANK] = {0}, off = 0;
    if (count == 0) {
        switch (op) {
        case FXRT_REDUCE_MAX: fxrt_store_i64(t, y, (size_t)j, (int64_t)int_limit(t, 0)); return;
        case FXRT_REDUCE_MIN: fxrt_store_i64(t, y, (size_t)j, (int64_t)int_limit(t, 1)); return;
        case FXRT_REDUCE_PROD: fxrt_store_i64(t, y, (size_t)j, 1); return;
        case FXRT_REDUCE_LOG_SUM:
        case FXRT_REDUCE_LOG_SUM_EXP: fxrt_store_f64(t, y, (size_t)j, -INFINITY); return;
        default: fxrt_store_i64(t, y, (size_t)j, 0); return;
        }
    }
    if (op == FXRT_REDUCE_LOG_SUM_EXP) {
        double m = -INFINITY, s = 0;
        do {
            double v = int_to_double(sg, int_load(t, x, base + off));
            if (v > m)
                m = v;
        } while (odometer_next(nr, rd, rs, idx, &off));
        memset(idx, 0, sizeof idx);
        off = 0;
        do
            s += exp(int_to_double(sg, int_load(t, x, base + off)) - m);
        while (odometer_next(nr, rd, rs, idx, &off));
        fxrt_store_f64(t, y, (size_t)j, m + log(s));
        return;
    }
    int kind = reduce_acc_kind(op);
    uint64_t a = kind == ACC_PROD ? 1 : 0;
    int first = 1;
    do {
        uint64_t v = int_load(t, x, base + off);
        switch (kind) {
        case ACC_SUM: a += v; break;
        case ACC_ABS: a += sg && (int64_t)v < 0 ? (uint64_t)0 - v : v; break;
        case ACC_SQUARE: a += v * v; break;
        case ACC_PROD: a *= v; break;
        case ACC_MAX:
            if (first || int_less(sg, a, v))
                a = v;
            break;
        case ACC_MIN:
            if (first || int_less(sg, v, a))
                a = v;
            break;
        default: break;
        }
        first = 0;
    } while (odometer_next(nr, rd, rs, idx, &off));
    switch (op) {
    case FXRT_REDUCE_MEAN:
        fxrt_store_f64(t, y, (size_t)j, int_to_double(sg, a) / (double)count);
        break;
    case FXRT_REDUCE_L2: fxrt_store_f64(t, y, (size_t)j, sqrt((double)a)); break;
    case FXRT_REDUCE_LOG_SUM: fxrt_store_f64(t, y, (size_t)j, log(int_to_double(sg, a))); break;
    default: fxrt_store_i64(t, y, (size_t)j, (int64_t)a); break;
    }
}

int fxrt_reduce_nd(FxrtReduceOp op, FxrtDType t, const void *x, void *y, const FxrtReduceView *v)
{
    if (t == FXRT_DTYPE_FLOAT32) {
        fxrt_reduce_nd_f32(op, x, y, v);
        return 1;
    }
    if (t == FXRT_DTYPE_FLOAT64) {
        fxrt_reduce_nd_f64(op, x, y, v);
        return 1;
    }
    if (!dtype_is_int(t))
        return 0;
    int nk, nr;
    int64_t kd[FXRT_MAX_RANK], ks[FXRT_MAX_RANK], rd[FXRT_MAX_RANK], rs[FXRT_MAX_RANK];
    int64_t outputs = view_split(v, &nk, kd, ks, &nr, rd, rs);
    int64_t idx[FXRT_MAX_RANK] = {0}, off = 0, j = 0;
    if (outputs == 0)
        return 1;
    do {
        int_reduce_one(op, t, x, off, nr, rd, rs, v->count, y, j);
        j++;
    } while (odometer_next(nk, kd, ks, idx, &off));
    return 1;
}

/* ------------------------------------------------------------------------- */
/* ArgMax / ArgMin                                                            */
/* ------------------------------------------------------------------------- */

#define FXRT_ISNAN_FLOAT(v) isnan(v)
#define FXRT_ISNAN_INT(v) ((void)(v), 0)

/* Walks the n rows of each outer block in memory order, keeping the best
 * index per inner position in y (best value re-read through it). */
#define FXRT_ARG_DEFINE(T, S, ISNAN)                                                        \
    static void arg_reduce_##S(const T *x, int64_t *y, int64_t outer, int64_t n,            \
                               int64_t inner, int is_min, int last)                         \
    {                                                                                       \
        for (int64_t o = 0; o < outer; o++) {                                               \
            const T *blk = x + o * n * inner;                                               \
            int64_t *yo = y + o * inner;                                                    \
            for (int64_t i = 0; i < inner; i++)                                             \
                yo[i] = 0;                                                                  \
            for (int64_t r = 1; r < n; r++) {                                               \
                const T *row = blk + r * inner;                                             \
                for (int64_t i = 0; i < inner; i++) {                                       \
                    T v = row[i], b = blk[yo[i] * inner + i];                               \
                    int take;                                                               \
                    if (ISNAN(b))                                                           \
                        take = last && ISNAN(v);                                            \
                    else if (ISNAN(v))                                                      \
                        take = 1;                                                           \
                    else if (is_min)                                                        \
                        take = v < b || (last && v == b);                                   \
                    else                                                                    \
                        take = v > b || (last && v == b);                                   \
                    if (take)                                                               \
                        yo[i] = r;                                                          \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    }

FXRT_ARG_DEFINE(float, f32, FXRT_ISNAN_FLOAT)
FXRT_ARG_DEFINE(double, f64, FXRT_ISNAN_FLOAT)
FXRT_ARG_DEFINE(int8_t, i8, FXRT_ISNAN_INT)
FXRT_ARG_DEFINE(uint8_t, u8, FXRT_ISNAN_INT)
FXRT_ARG_DEFINE(int16_t, i16, FXRT_ISNAN_INT)
FXRT_ARG_DEFINE(uint16_t, u16, FXRT_ISNAN_INT)
FXRT_ARG_DEFINE(int32_t, i32, FXRT_ISNAN_INT)
FXRT_ARG_DEFINE(uint32_t, u32, FXRT_ISNAN_INT)
FXRT_ARG_DEFINE(int64_t, i64, FXRT_ISNAN_INT)
FXRT_ARG_DEFINE(uint64_t, u64, FXRT_ISNAN_INT)

void fxrt_argmax_f32(const float *x, int64_t *y, int64_t outer, int64_t n, int64_t inner,
                     int select_last)
{
    arg_reduce_f32(x, y, outer, n, inner, 0, select_last);
}

void fxrt_argmin_f32(const float *x, int64_t *y, int64_t outer, int64_t n, int64_t inner,
                     int select_last)
{
    arg_reduce_f32(x, y, outer, n, inner, 1, select_last);
}

int fxrt_arg_reduce(FxrtDType t, int is_min, const void *x, int64_t *y, int64_t outer,
                    int64_t n, int64_t inner, int select_last)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: arg_reduce_f32(x, y, outer, n, inner, is_min, select_last); break;
    case FXRT_DTYPE_FLOAT64: arg_reduce_f64(x, y, outer, n, inner, is_min, select_last); break;
    case FXRT_DTYPE_INT8: arg_reduce_i8(x, y, outer, n, inner, is_min, select_last); break;
    case FXRT_DTYPE_UINT8: arg_reduce_u8(x, y, outer, n, inner, is_min, select_last); break;
    case FXRT_DTYPE_INT16: arg_reduce_i16(x, y, outer, n, inner, is_min, select_last); break;
    case FXRT_DTYPE_UINT16: arg_reduce_u16(x, y, outer, n, inner, is_min, select_last); break;
    case FXRT_DTYPE_INT32: arg_reduce_i32(x, y, outer, n, inner, is_min, select_last); break;
    case FXRT_DTYPE_UINT32: arg_reduce_u32(x, y, outer, n, inner, is_min, select_last); break;
    case FXRT_DTYPE_INT64: arg_reduce_i64(x, y, outer, n, inner, is_min, select_last); break;
    case FXRT_DTYPE_UINT64: arg_reduce_u64(x, y, outer, n, inner, is_min, select_last); break;
    default: return 0;
    }
    return 1;
}
