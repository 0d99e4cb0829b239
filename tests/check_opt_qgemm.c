/*
 * check_opt_qgemm.c - the qgemm-pack pass: which quantized products it
 * moves onto the packed 8-bit GEMM (QGemmPacked) and which it leaves to the
 * reference loops, and that the result is the same bytes: the
 * interpreter's outputs before and after the pass, and the compiled code
 * for both targets against the interpreter on the unpacked graph, must be
 * equal (rtol and atol 0).
 */
#include "opt_check_util.h"

/* A constant of type dtype and the given dims, element i = value(i). */
static Node *const_of(Graph *g, const char *name, DType dtype, int rank, const int64_t *dims,
                      int64_t (*value)(int64_t))
{
    TensorType t = {.dtype = dtype, .rank = rank};
    for (int d = 0; d < rank; d++)
        t.dims[d] = dims[d];
    Tensor *v = tensor_new(&t, &tu_diag);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < tensor_numel(v); i++) {
        if (dtype == FXRT_DTYPE_FLOAT32)
            ((float *)v->data)[i] = (float)value(i) * 1e-4f;
        else
            fxrt_store_i64(dtype, v->data, (size_t)i, value(i));
    }
    return tu_constant(g, name, v);
}

static int64_t weight_value(int64_t i) { return (i * 37 + 11) % 256 - 128; } /* -128..127 */
static int64_t zero(int64_t i) { return 0 * i; }
static int64_t one(int64_t i) { return 1 + 0 * i; }
static int64_t zp_u8(int64_t i) { return 131 + 0 * i; }
static int64_t zp_i8(int64_t i) { return -3 + 0 * i; }
/* Scales 1e-4 x value: a_scale 0.02, y_scale 0.3, b_scale 0.003-0.006. */
static int64_t a_scale(int64_t i) { return 200 + 0 * i; }
static int64_t y_scale(int64_t i) { return 3000 + 0 * i; }
static int64_t b_scale(int64_t i) { return 30 + i % 31; }
static int64_t big_scale(int64_t i) { return 200000 + 0 * i; } /* 20: 0.02 x 20 / 0.3 >= 1 */

typedef struct QCase {
    DType a_type, b_type, y_type;
    int per_column;          /* b_scale and b_zero_point per column */
    int64_t (*b_zp)(int64_t);
    int64_t (*b_scale)(int64_t);
    int b_is_input;          /* B a graph input, not a constant */
    int rank;                /* of A: 1, 2 or 3 */
} QCase;

enum { K = 45, N = 37 };

/* y = QLinearMatMul(a [2, 5, K] (or [5, K], [K]), B [K, N], ...). */
static Graph *build_qlinear(const QCase *c)
{
    Graph *g = graph_new();
    const int64_t a_dims[3] = {2, 5, K};
    Node *a = tu_input(g, "a", c->a_type, c->rank, a_dims + 3 - c->rank);
    const int64_t b_dims[2] = {K, N}, cols[1] = {N};
    Node *b = c->b_is_input ? tu_input(g, "b", c->b_type, 2, b_dims)
                            : const_of(g, "b", c->b_type, 2, b_dims, weight_value);
    Node *args[8] = {
        a,
        const_of(g, "a_scale", FXRT_DTYPE_FLOAT32, 0, NULL, a_scale),
        const_of(g, "a_zp", c->a_type, 0, NULL, c->a_type == FXRT_DTYPE_UINT8 ? zp_u8 : zp_i8),
        b,
        const_of(g, "b_scale", FXRT_DTYPE_FLOAT32, c->per_column, cols, c->b_scale),
        const_of(g, "b_zp", c->b_type, c->per_column, cols, c->b_zp),
        const_of(g, "y_scale", FXRT_DTYPE_FLOAT32, 0, NULL, y_scale),
        const_of(g, "y_zp", c->y_type, 0, NULL, one),
    };
    Node *y = tu_op(g, "QLinearMatMul", args, 8);
    tu_finish(g, &y, 1);
    return g;
}

/* acc = MatMulInteger(a [5, K], B [K, N], a_zp, b_zp). */
static Graph *build_matmul_integer(const QCase *c)
{
    Graph *g = graph_new();
    const int64_t a_dims[2] = {5, K}, b_dims[2] = {K, N}, cols[1] = {N};
    Node *args[4] = {
        tu_input(g, "a", c->a_type, 2, a_dims),
        const_of(g, "b", c->b_type, 2, b_dims, weight_value),
        const_of(g, "a_zp", c->a_type, 0, NULL, c->a_type == FXRT_DTYPE_UINT8 ? zp_u8 : zp_i8),
        const_of(g, "b_zp", c->b_type, c->per_column, cols, c->b_zp),
    };
    Node *y = tu_op(g, "MatMulInteger", args, 4);
    tu_finish(g, &y, 1);
    return g;
}

/* Runs the pass on build(c)'s graph; when it packs and `compile` is set,
 * the compiled code must give the unpacked interpreter's bytes (compiling
 * every case would take minutes). */
static void run_case(Graph *(*build)(const QCase *), const QCase *c, const char *name,
                     int expect_packed, int compile)
{
    Graph *g = build(c), *ref = build(c);
    ck_assert_int_eq(tu_run_pass(g, pass_qgemm_pack, 0.0, 0.0), expect_packed);
    ck_assert_int_eq(tu_count_op(g, "QGemmPacked"), expect_packed);
    if (expect_packed && compile)
        tu_assert_compiled_matches(g, ref, name, 0.0, 0.0);
    graph_free(g);
    graph_free(ref);
}

START_TEST(test_qlinear_packed)
{
    const DType q8[2] = {FXRT_DTYPE_UINT8, FXRT_DTYPE_INT8};
    for (int ia = 0; ia < 2; ia++)
        for (int iy = 0; iy < 2; iy++)
            for (int per_column = 0; per_column < 2; per_column++) {
                QCase c = {q8[ia], FXRT_DTYPE_INT8, q8[iy], per_column, zero, b_scale, 0,
                           1 + (ia + iy + per_column) % 3};
                run_case(build_qlinear, &c, "qlinear_matmul", 1, ia == iy && per_column == ia);
            }
}
END_TEST

START_TEST(test_matmul_integer_packed)
{
    QCase c = {FXRT_DTYPE_UINT8, FXRT_DTYPE_INT8, FXRT_DTYPE_INT32, 1, zero, b_scale, 0, 2};
    run_case(build_matmul_integer, &c, "matmul_integer", 1, 1);
    c.a_type = FXRT_DTYPE_INT8;
    c.per_column = 0;
    run_case(build_matmul_integer, &c, "matmul_integer_i8", 1, 0);
}
END_TEST

/* What the kernel cannot take stays as it is. */
START_TEST(test_left_alone)
{
    QCase uint8_b = {FXRT_DTYPE_UINT8, FXRT_DTYPE_UINT8, FXRT_DTYPE_UINT8, 0, zero, b_scale, 0, 2};
    run_case(build_qlinear, &uint8_b, "uint8_b", 0, 0);
    run_case(build_matmul_integer, &uint8_b, "uint8_b", 0, 0);
    QCase b_zp = {FXRT_DTYPE_UINT8, FXRT_DTYPE_INT8, FXRT_DTYPE_UINT8, 1, one, b_scale, 0, 2};
    run_case(build_qlinear, &b_zp, "b_zero_point", 0, 0);
    b_zp.y_type = FXRT_DTYPE_INT32;
    run_case(build_matmul_integer, &b_zp, "b_zero_point", 0, 0);
    QCase input = {FXRT_DTYPE_UINT8, FXRT_DTYPE_INT8, FXRT_DTYPE_UINT8, 0, zero, b_scale, 1, 2};
    run_case(build_qlinear, &input, "b_input", 0, 0);
    QCase scale = {FXRT_DTYPE_UINT8, FXRT_DTYPE_INT8, FXRT_DTYPE_UINT8, 0, zero, big_scale, 0, 2};
    run_case(build_qlinear, &scale, "scale_above_1", 0, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_qgemm");
    TCase *t = tcase_create("qgemm_pack");
    tcase_set_timeout(t, 600);
    tcase_add_checked_fixture(t, tu_setup, tu_teardown);
    tcase_add_test(t, test_qlinear_packed);
    tcase_add_test(t, test_matmul_integer_packed);
    tcase_add_test(t, test_left_alone);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_main(suite()); }
