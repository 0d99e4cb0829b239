/*
 * fxrt_elementwise_binary.c - binary elementwise kernels with NumPy
 * (multidirectional) broadcasting, Pow over mixed types, and Where.
 *
 * Every kernel walks the output in row-major order with one stride per
 * input and axis (0 = broadcast).  Before walking, size-1 axes are dropped
 * and neighbouring axes whose strides chain for every operand are merged
 * (iter_init), so that the common cases become a single inner loop:
 * same-shape operands collapse to one flat run, a scalar operand to a run
 * with stride 0, and a per-channel operand such as a bias of shape [C,1,1]
 * against [N,C,H,W] to runs of H*W with the channel value hoisted.  The
 * inner loops are specialised for the (1,1), (1,0) and (0,1) stride pairs.
 *
 * Integer types are computed exactly in 64 bits: signed types as int64,
 * unsigned types (and bool) as uint64, with Add/Sub/Mul/Neg done on uint64
 * so that overflow wraps instead of being undefined.  Integer division and
 * remainder by zero are reported (FXRT_EW_ERR_DIV_ZERO), INT64_MIN / -1
 * wraps.  Nothing here allocates.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "fxrt.h"

/* --- the broadcast walk ------------------------------------------------- */

#define MAX_OPS 3

typedef struct Iter {
    int rank; /* >= 1 */
    int nops;
    int64_t dims[FXRT_MAX_RANK];
    int64_t st[MAX_OPS][FXRT_MAX_RANK];
} Iter;

/* Builds the compacted walk; returns the number of output elements. */
static int64_t iter_init(Iter *it, int nops, int rank, const int64_t *dims,
                         const int64_t *const *strides)
{
    int64_t total = 1;
    int r = 0;
    it->nops = nops;
    for (int d = 0; d < rank; d++) {
        total *= dims[d];
        if (dims[d] == 1)
            continue;
        if (r > 0) {
            bool chain = true;
            for (int k = 0; k < nops; k++)
                if (it->st[k][r - 1] != strides[k][d] * dims[d])
                    chain = false;
            if (chain) {
                it->dims[r - 1] *= dims[d];
                for (int k = 0; k < nops; k++)
                    it->st[k][r - 1] = strides[k][d];
                continue;
            }
        }
        it->dims[r] = dims[d];
        for (int k = 0; k < nops; k++)
            it->st[k][r] = strides[k][d];
        r++;
    }
    if (r == 0) {
        it->dims[0] = 1;
        for (int k = 0; k < nops; k++)
            it->st[k][0] = 0;
        r = 1;
    }
    it->rank = r;
    return total;
}

/* Advances the outer (all but innermost) index; false when done. */
static bool iter_step(const Iter *it, int64_t *idx, int64_t *off)
{
    for (int d = it->rank - 2; d >= 0; d--) {
        for (int k = 0; k < it->nops; k++)
            off[k] += it->st[k][d];
        if (++idx[d] < it->dims[d])
            return true;
        for (int k = 0; k < it->nops; k++)
            off[k] -= it->st[k][d] * it->dims[d];
        idx[d] = 0;
    }
    return false;
}

/* Runs the body (the macro's trailing arguments, so that it may contain
 * commas) once per inner run with n, the per-operand element offsets
 * off[k] and strides s0..s2 (innermost axis), and yo, the output offset. */
#define ITER_RUNS(it, ...)                                                               \
    do {                                                                                 \
        int64_t idx_[FXRT_MAX_RANK] = {0}, off[MAX_OPS] = {0, 0, 0}, yo = 0;             \
        const int64_t n = (it).dims[(it).rank - 1];                                      \
        const int64_t s0 = (it).st[0][(it).rank - 1];                                    \
        const int64_t s1 = (it).nops > 1 ? (it).st[1][(it).rank - 1] : 0;                \
        const int64_t s2 = (it).nops > 2 ? (it).st[2][(it).rank - 1] : 0;                \
        (void)s1;                                                                        \
        (void)s2;                                                                        \
        do {                                                                             \
            __VA_ARGS__;                                                                 \
            yo += n;                                                                     \
        } while (iter_step(&(it), idx_, off));                                           \
    } while (0)

void fxrt_broadcast_strides(int out_rank, const int64_t *out_dims, int in_rank,
                            const int64_t *in_dims, int64_t *strides)
{
    (void)out_dims;
    int64_t s = 1;
    for (int d = out_rank - 1; d >= 0; d--) {
        int j = d - (out_rank - in_rank);
        if (j < 0) {
            strides[d] = 0;
            continue;
        }
        strides[d] = in_dims[j] == 1 ? 0 : s;
        s *= in_dims[j];
    }
}

int fxrt_binary_is_predicate(FxrtBinaryOp op)
{
    return op >= FXRT_BINARY_EQUAL && op < FXRT_BINARY_COUNT_;
}

/* --- float kernels ----------------------------------------------------- */

/* One inner run: y[i] = EXPR(A, B) for A = a[i*sa], B = b[i*sb], y of
 * element type U.  The unit-stride and hoisted-scalar cases work in blocks
 * of 8 whose loads all happen before its stores: the compiler can then
 * vectorize without run-time alias checks (GCC's -O2 cost model refuses
 * those), and y may still be a or b. */
#define LD_A1(j) a[j]
#define LD_B1(j) b[j]
#define LD_A0(j) a0_
#define LD_B0(j) b0_
#define RUN_BLOCKED(T, U, LOAD_A, LOAD_B, EXPR)                                          \
    do {                                                                                 \
        int64_t i = 0;                                                                   \
        for (; i + 8 <= n; i += 8) {                                                     \
            U r_[8];                                                                     \
            for (int k_ = 0; k_ < 8; k_++) {                                             \
                T A = LOAD_A(i + k_), B = LOAD_B(i + k_);                                \
                r_[k_] = (EXPR);                                                         \
            }                                                                            \
            for (int k_ = 0; k_ < 8; k_++)                                               \
                y[i + k_] = r_[k_];                                                      \
        }                                                                                \
        for (; i < n; i++) {                                                             \
            T A = LOAD_A(i), B = LOAD_B(i);                                              \
            y[i] = (EXPR);                                                               \
        }                                                                                \
    } while (0)

#define LOOP2(T, U, EXPR)                                                                \
    if (sa == 1 && sb == 1) {                                                            \
        RUN_BLOCKED(T, U, LD_A1, LD_B1, EXPR);                                           \
    } else if (sa == 1 && sb == 0) {                                                     \
        const T b0_ = b[0];                                                              \
        RUN_BLOCKED(T, U, LD_A1, LD_B0, EXPR);                                           \
    } else if (sa == 0 && sb == 1) {                                                     \
        const T a0_ = a[0];                                                              \
        RUN_BLOCKED(T, U, LD_A0, LD_B1, EXPR);                                           \
    } else {                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                \
            T A = a[i * sa], B = b[i * sb];                                              \
            y[i] = (EXPR);                                                               \
        }                                                                                \
    }                                                                                    \
    break

static inline float mod_f32(float a, float b)
{
    float r = fmodf(a, b);
    return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}

static inline double mod_f64(double a, double b)
{
    double r = fmod(a, b);
    return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;
}

/* Arithmetic and comparison runs for one float type.  Min/Max propagate a
 * NaN from either side, as NumPy's minimum/maximum do. */
#define DEFINE_FLOAT_RUNS(SUF, T, POW, FMOD, MOD)                                        \
    static void arith_run_##SUF(FxrtBinaryOp op, int64_t n, const T *a, int64_t sa,      \
                                const T *b, int64_t sb, T *y)                            \
    {                                                                                    \
        switch (op) {                                                                    \
        case FXRT_BINARY_ADD: LOOP2(T, T, A + B);                                        \
        case FXRT_BINARY_SUB: LOOP2(T, T, A - B);                                        \
        case FXRT_BINARY_MUL: LOOP2(T, T, A * B);                                        \
        case FXRT_BINARY_DIV: LOOP2(T, T, A / B);                                        \
        case FXRT_BINARY_POW: LOOP2(T, T, POW(A, B));                                    \
        case FXRT_BINARY_MIN: LOOP2(T, T, (A < B || A != A) ? A : B);                    \
        case FXRT_BINARY_MAX: LOOP2(T, T, (A > B || A != A) ? A : B);                    \
        case FXRT_BINARY_MOD: LOOP2(T, T, MOD(A, B));                                    \
        case FXRT_BINARY_FMOD: LOOP2(T, T, FMOD(A, B));                                  \
        case FXRT_BINARY_PRELU: LOOP2(T, T, A < 0 ? A * B : A);                          \
        default: break;                                                                  \
        }                                                                                \
    }                                                                                    \
    static void compare_run_##SUF(FxrtBinaryOp op, int64_t n, const T *a, int64_t sa,    \
                                  const T *b, int64_t sb, uint8_t *y)                    \
    {                                                                                    \
        switch (op) {                                                                    \
        case FXRT_BINARY_EQUAL: LOOP2(T, uint8_t, A == B);                               \
        case FXRT_BINARY_LESS: LOOP2(T, uint8_t, A < B);                                 \
        case FXRT_BINARY_LESS_EQUAL: LOOP2(T, uint8_t, A <= B);                          \
        case FXRT_BINARY_GREATER: LOOP2(T, uint8_t, A > B);                              \
        case FXRT_BINARY_GREATER_EQUAL: LOOP2(T, uint8_t, A >= B);                       \
        default: break;                                                                  \
        }                                                                                \
    }

DEFINE_FLOAT_RUNS(f32, float, powf, fmodf, mod_f32)
DEFINE_FLOAT_RUNS(f64, double, pow, fmod, mod_f64)

/* rows runs of n contiguous elements, the row starts sa and sb apart (one
 * of them 0: a row broadcast over the others). */
#define LOOP_ROWS(EXPR)                                                                  \
    for (int64_t r = 0; r < rows; r++, a += sa, b += sb, y += n)                         \
        for (int64_t i = 0; i < n; i++) {                                                \
            float A = a[i], B = b[i];                                                    \
            y[i] = (EXPR);                                                               \
        }                                                                                \
    break

static void arith_rows_f32(FxrtBinaryOp op, int64_t rows, int64_t n, const float *a, int64_t sa,
                           const float *b, int64_t sb, float *y)
{
    switch (op) {
    case FXRT_BINARY_ADD: LOOP_ROWS(A + B);
    case FXRT_BINARY_SUB: LOOP_ROWS(A - B);
    case FXRT_BINARY_MUL: LOOP_ROWS(A * B);
    case FXRT_BINARY_DIV: LOOP_ROWS(A / B);
    default:
        for (int64_t r = 0; r < rows; r++)
            arith_run_f32(op, n, a + r * sa, 1, b + r * sb, 1, y + r * n);
        break;
    }
}
#undef LOOP_ROWS

/* Rows shorter than this, broadcast along the axis above, are walked two
 * axes at a time. */
enum { SHORT_ROW = 32 };

void fxrt_binary_f32(FxrtBinaryOp op, int rank, const int64_t *dims, const float *a,
                     const int64_t *a_strides, const float *b, const int64_t *b_strides,
                     float *y)
{
    Iter it;
    const int64_t *st[2] = {a_strides, b_strides};
    if (fxrt_binary_is_predicate(op) || iter_init(&it, 2, rank, dims, st) == 0)
        return;
    /* A short row broadcast over many, such as a per-channel scale in the
     * blocked layout (x [N, C/8, H, W, 8] times s [N, C/8, 1, 1, 8],
     * squeeze-and-excite's), would otherwise cost a run and a walk step
     * per 8 elements. */
    int in = it.rank - 1;
    int64_t len = it.dims[in];
    if (in >= 1 && len < SHORT_ROW && it.st[0][in] == 1 && it.st[1][in] == 1 &&
        ((it.st[0][in - 1] == 0 && it.st[1][in - 1] == len) ||
         (it.st[1][in - 1] == 0 && it.st[0][in - 1] == len))) {
        Iter outer = it;
        outer.rank = in;
        int64_t idx[FXRT_MAX_RANK] = {0}, off[MAX_OPS] = {0, 0, 0}, yo = 0;
        int64_t rows = it.dims[in - 1];
        do {
            arith_rows_f32(op, rows, len, a + off[0], it.st[0][in - 1], b + off[1], it.st[1][in - 1],
                           y + yo);
            yo += rows * len;
        } while (iter_step(&outer, idx, off));
        return;
    }
    ITER_RUNS(it, arith_run_f32(op, n, a + off[0], s0, b + off[1], s1, y + yo));
}

void fxrt_compare_f32(FxrtBinaryOp op, int rank, const int64_t *dims, const float *a,
                      const int64_t *a_strides, const float *b, const int64_t *b_strides,
                      uint8_t *y)
{
    Iter it;
    const int64_t *st[2] = {a_strides, b_strides};
    if (iter_init(&it, 2, rank, dims, st) == 0)
        return;
    ITER_RUNS(it, compare_run_f32(op, n, a + off[0], s0, b + off[1], s1, y + yo));
}

/* --- integer kernels ---------------------------------------------------- */

static bool type_is_unsigned(FxrtDType t)
{
    return t == FXRT_DTYPE_UINT8 || t == FXRT_DTYPE_UINT16 || t == FXRT_DTYPE_UINT32 ||
           t == FXRT_DTYPE_UINT64 || t == FXRT_DTYPE_BOOL;
}

static bool type_is_integer(FxrtDType t)
{
    switch (t) {
    case FXRT_DTYPE_UINT8: case FXRT_DTYPE_INT8: case FXRT_DTYPE_UINT16:
    case FXRT_DTYPE_INT16: case FXRT_DTYPE_INT32: case FXRT_DTYPE_INT64:
    case FXRT_DTYPE_UINT32: case FXRT_DTYPE_UINT64:
        return true;
    default:
        return false;
    }
}

/* a ** e for integers; e is read as unsigned when e_unsigned.  Negative
 * exponents give the truncation of 1 / a^|e| (0 unless |a| == 1). */
static int64_t int_pow(int64_t a, int64_t e, bool e_unsigned)
{
    if (!e_unsigned && e < 0) {
        if (a == 1)
            return 1;
        if (a == -1)
            return (e & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, base = (uint64_t)a, ue = (uint64_t)e;
    while (ue) {
        if (ue & 1u)
            r *= base;
        base *= base;
        ue >>= 1;
    }
    return (int64_t)r;
}

/* One integer element; a and b are int64 values or uint64 bit patterns.
 * bits is the width of the element type (shifts). */
static int int_op(FxrtBinaryOp op, bool uns, int bits, int64_t a, int64_t b, int64_t *r)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case FXRT_BINARY_ADD: *r = (int64_t)(ua + ub); break;
    case FXRT_BINARY_SUB: *r = (int64_t)(ua - ub); break;
    case FXRT_BINARY_MUL: *r = (int64_t)(ua * ub); break;
    case FXRT_BINARY_DIV:
        if (b == 0)
            return FXRT_EW_ERR_DIV_ZERO;
        if (uns)
            *r = (int64_t)(ua / ub);
        else
            *r = (b == -1) ? (int64_t)(0u - ua) : a / b;
        break;
    case FXRT_BINARY_MOD:
    case FXRT_BINARY_FMOD:
        if (b == 0)
            return FXRT_EW_ERR_DIV_ZERO;
        if (uns) {
            *r = (int64_t)(ua % ub);
        } else if (b == -1) {
            *r = 0;
        } else {
            int64_t m = a % b;
            if (op == FXRT_BINARY_MOD && m != 0 && ((m < 0) != (b < 0)))
                m += b;
            *r = m;
        }
        break;
    case FXRT_BINARY_POW: *r = int_pow(a, b, uns); break;
    case FXRT_BINARY_MIN: *r = uns ? (ua < ub ? a : b) : (a < b ? a : b); break;
    case FXRT_BINARY_MAX: *r = uns ? (ua > ub ? a : b) : (a > b ? a : b); break;
    case FXRT_BINARY_PRELU: *r = (!uns && a < 0) ? (int64_t)(ua * ub) : a; break;
    case FXRT_BINARY_SHL:
    case FXRT_BINARY_SHR:
        if (!uns)
            return FXRT_EW_ERR_TYPE;
        if (ub >= (uint64_t)bits)
            *r = 0;
        else
            *r = (int64_t)(op == FXRT_BINARY_SHL ? ua << ub : ua >> ub);
        break;
    case FXRT_BINARY_EQUAL: *r = a == b; break;
    case FXRT_BINARY_LESS: *r = uns ? ua < ub : a < b; break;
    case FXRT_BINARY_LESS_EQUAL: *r = uns ? ua <= ub : a <= b; break;
    case FXRT_BINARY_GREATER: *r = uns ? ua > ub : a > b; break;
    case FXRT_BINARY_GREATER_EQUAL: *r = uns ? ua >= ub : a >= b; break;
    case FXRT_BINARY_AND: *r = (a != 0) && (b != 0); break;
    case FXRT_BINARY_OR: *r = (a != 0) || (b != 0); break;
    case FXRT_BINARY_XOR: *r = (a != 0) != (b != 0); break;
    default: return FXRT_EW_ERR_TYPE;
    }
    return FXRT_EW_OK;
}

static int binary_int(FxrtBinaryOp op, FxrtDType t, const Iter *itp, const void *a,
                      const void *b, void *y)
{
    Iter it = *itp;
    bool uns = type_is_unsigned(t);
    int bits = (int)(8 * fxrt_dtype_size(t));
    bool logic = op == FXRT_BINARY_AND || op == FXRT_BINARY_OR || op == FXRT_BINARY_XOR;
    if (logic != (t == FXRT_DTYPE_BOOL))
        return op == FXRT_BINARY_EQUAL ? binary_int(op, FXRT_DTYPE_UINT8, itp, a, b, y)
                                       : FXRT_EW_ERR_TYPE;
    FxrtDType yt = fxrt_binary_is_predicate(op) ? FXRT_DTYPE_BOOL : t;
    int status = FXRT_EW_OK;
    ITER_RUNS(it, {
        for (int64_t i = 0; i < n && status == FXRT_EW_OK; i++) {
            int64_t r = 0;
            status = int_op(op, uns, bits, fxrt_load_i64(t, a, (size_t)(off[0] + i * s0)),
                            fxrt_load_i64(t, b, (size_t)(off[1] + i * s1)), &r);
            fxrt_store_i64(yt, y, (size_t)(yo + i), r);
        }
        if (status != FXRT_EW_OK)
            break;
    });
    return status;
}

int fxrt_binary(FxrtBinaryOp op, FxrtDType t, int rank, const int64_t *dims, const void *a,
                const int64_t *a_strides, const void *b, const int64_t *b_strides, void *y)
{
    Iter it;
    const int64_t *st[2] = {a_strides, b_strides};
    if ((unsigned)op >= FXRT_BINARY_COUNT_)
        return FXRT_EW_ERR_TYPE;
    bool is_float = t == FXRT_DTYPE_FLOAT32 || t == FXRT_DTYPE_FLOAT64;
    bool pred = fxrt_binary_is_predicate(op);
    if (is_float && (op == FXRT_BINARY_SHL || op == FXRT_BINARY_SHR || op >= FXRT_BINARY_AND))
        return FXRT_EW_ERR_TYPE;
    if (!is_float && !type_is_integer(t) && t != FXRT_DTYPE_BOOL)
        return FXRT_EW_ERR_TYPE;
    if (iter_init(&it, 2, rank, dims, st) == 0)
        return FXRT_EW_OK;
    if (t == FXRT_DTYPE_FLOAT32) {
        const float *af = a, *bf = b;
        if (pred)
            ITER_RUNS(it, compare_run_f32(op, n, af + off[0], s0, bf + off[1], s1,
                                          (uint8_t *)y + yo));
        else
            ITER_RUNS(it, arith_run_f32(op, n, af + off[0], s0, bf + off[1], s1,
                                        (float *)y + yo));
        return FXRT_EW_OK;
    }
    if (t == FXRT_DTYPE_FLOAT64) {
        const double *ad = a, *bd = b;
        if (pred)
            ITER_RUNS(it, compare_run_f64(op, n, ad + off[0], s0, bd + off[1], s1,
                                          (uint8_t *)y + yo));
        else
            ITER_RUNS(it, arith_run_f64(op, n, ad + off[0], s0, bd + off[1], s1,
                                        (double *)y + yo));
        return FXRT_EW_OK;
    }
    return binary_int(op, t, &it, a, b, y);
}

/* --- Pow over mixed types ------------------------------------------------ */

int fxrt_pow(int rank, const int64_t *dims, FxrtDType ta, const void *a,
             const int64_t *a_strides, FxrtDType tb, const void *b, const int64_t *b_strides,
             void *y)
{
    bool fa = ta == FXRT_DTYPE_FLOAT32 || ta == FXRT_DTYPE_FLOAT64;
    bool fb = tb == FXRT_DTYPE_FLOAT32 || tb == FXRT_DTYPE_FLOAT64;
    if ((!fa && !type_is_integer(ta)) || (!fb && !type_is_integer(tb)))
        return FXRT_EW_ERR_TYPE;
    if (ta == tb)
        return fxrt_binary(FXRT_BINARY_POW, ta, rank, dims, a, a_strides, b, b_strides, y);
    Iter it;
    const int64_t *st[2] = {a_strides, b_strides};
    if (iter_init(&it, 2, rank, dims, st) == 0)
        return FXRT_EW_OK;
    bool b_uns = type_is_unsigned(tb);
    ITER_RUNS(it, {
        for (int64_t i = 0; i < n; i++) {
            size_t ia = (size_t)(off[0] + i * s0), ib = (size_t)(off[1] + i * s1);
            if (!fa && !fb) {
                int64_t r = int_pow(fxrt_load_i64(ta, a, ia), fxrt_load_i64(tb, b, ib), b_uns);
                fxrt_store_i64(ta, y, (size_t)(yo + i), r);
            } else {
                /* NumPy promotes a mixed pair to double and casts back. */
                double r = pow(fxrt_load_f64(ta, a, ia), fxrt_load_f64(tb, b, ib));
                fxrt_store_f64(ta, y, (size_t)(yo + i), r);
            }
        }
    });
    return FXRT_EW_OK;
}

/* --- Where ------------------------------------------------------------- */

/* memmove with a constant size compiles to one move and keeps the copy free
 * of aliasing questions whatever the element type is; memmove rather than
 * memcpy because out may be x or y (in place), where the source and
 * destination of one element are the same bytes. */
#define WHERE_RUN(K)                                                                     \
    for (int64_t i = 0; i < n; i++)                                                      \
        memmove(o + (yo + i) * (K),                                                      \
               c[off[0] + i * s0] ? xb + (off[1] + i * s1) * (K)                         \
                                  : yb + (off[2] + i * s2) * (K),                        \
               (K))

void fxrt_where(size_t elem_size, int rank, const int64_t *dims, const uint8_t *cond,
                const int64_t *cond_strides, const void *x, const int64_t *x_strides,
                const void *y, const int64_t *y_strides, void *out)
{
    Iter it;
    const int64_t *st[3] = {cond_strides, x_strides, y_strides};
    if (iter_init(&it, 3, rank, dims, st) == 0)
        return;
    const uint8_t *c = cond, *xb = x, *yb = y;
    uint8_t *o = out;
    const int64_t k = (int64_t)elem_size;
    switch (elem_size) {
    case 1: ITER_RUNS(it, WHERE_RUN(1)); break;
    case 2: ITER_RUNS(it, WHERE_RUN(2)); break;
    case 4: ITER_RUNS(it, WHERE_RUN(4)); break;
    case 8: ITER_RUNS(it, WHERE_RUN(8)); break;
    default: ITER_RUNS(it, WHERE_RUN(k)); break;
    }
}

/* --- variadic folds (Sum, Mean, Min, Max) -------------------------------- */

/* Offset in elements of output element i (row-major over dims) in an
 * operand with the given strides. */
static int64_t unravel_offset(int rank, const int64_t *dims, const int64_t *strides, int64_t i)
{
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; d--) {
        off += (i % dims[d]) * strides[d];
        i /= dims[d];
    }
    return off;
}

/* One element at a time, all operands read before the result is stored:
 * the fallback for three or more operands that are the output buffer. */
static int fold_by_element(FxrtBinaryOp op, FxrtDType t, int rank, const int64_t *dims,
                           int count, const void *const *x, const int64_t *const *strides,
                           void *y)
{
    const size_t es = fxrt_dtype_size(t);
    int64_t total = 1;
    for (int d = 0; d < rank; d++)
        total *= dims[d];
    for (int64_t i = 0; i < total; i++) {
        union {
            double d;
            int64_t i;
            unsigned char b[8];
        } acc;
        const unsigned char *x0 = x[0];
        memcpy(acc.b, x0 + unravel_offset(rank, dims, strides[0], i) * (int64_t)es, es);
        for (int k = 1; k < count; k++) {
            const unsigned char *xk = x[k];
            int rc = fxrt_binary(op, t, 0, dims, acc.b, NULL,
                                 xk + unravel_offset(rank, dims, strides[k], i) * (int64_t)es,
                                 NULL, acc.b);
            if (rc != FXRT_EW_OK)
                return rc;
        }
        memcpy((unsigned char *)y + i * (int64_t)es, acc.b, es);
    }
    return FXRT_EW_OK;
}

int fxrt_variadic(FxrtBinaryOp op, int mean, FxrtDType t, int rank, const int64_t *dims,
                  int count, const void *const *x, const int64_t *const *strides, void *y)
{
    int64_t ys[FXRT_MAX_RANK], zero[FXRT_MAX_RANK] = {0};
    int64_t s = 1;
    if (count < 1 || rank < 0 || rank > FXRT_MAX_RANK || fxrt_binary_is_predicate(op))
        return FXRT_EW_ERR_TYPE;
    for (int d = rank - 1; d >= 0; d--) {
        ys[d] = dims[d] == 1 ? 0 : s;
        s *= dims[d];
    }
    /* Operands that are the output buffer (in place) must be read before y
     * is first written: the first step reads two operands, so up to two
     * such operands go first and the fold y = y op x[k] handles the rest.
     * The ops are commutative, so the order changes only float rounding. */
    int first = -1, second = -1, aliases = 0;
    for (int k = 0; k < count; k++) {
        if (x[k] != y)
            continue;
        aliases++;
        if (first < 0)
            first = k;
        else if (second < 0)
            second = k;
    }
    int rc = FXRT_EW_OK;
    if (aliases >= 3) {
        rc = fold_by_element(op, t, rank, dims, count, x, strides, y);
    } else if (count == 1) {
        if (x[0] != y)
            memmove(y, x[0], (size_t)s * fxrt_dtype_size(t));
    } else {
        int i0 = first >= 0 ? first : 0;
        int i1 = second >= 0 ? second : (i0 == 0 ? 1 : 0);
        rc = fxrt_binary(op, t, rank, dims, x[i0], strides[i0], x[i1], strides[i1], y);
        for (int k = 0; k < count && rc == FXRT_EW_OK; k++)
            if (k != i0 && k != i1)
                rc = fxrt_binary(op, t, rank, dims, y, ys, x[k], strides[k], y);
    }
    if (rc != FXRT_EW_OK || !mean || count == 1)
        return rc;
    /* Mean = Sum / N, divided like the reference rather than scaled by 1/N. */
    if (t == FXRT_DTYPE_FLOAT32) {
        const float nf = (float)count;
        return fxrt_binary(FXRT_BINARY_DIV, t, rank, dims, y, ys, &nf, zero, y);
    }
    if (t == FXRT_DTYPE_FLOAT64) {
        const double nd = (double)count;
        return fxrt_binary(FXRT_BINARY_DIV, t, rank, dims, y, ys, &nd, zero, y);
    }
    return FXRT_EW_ERR_TYPE;
}
