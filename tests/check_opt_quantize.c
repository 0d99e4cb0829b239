/*
 * check_opt_quantize.c - post-training quantization: the parameter
 * arithmetic against hand computations (scale and zero point of a known
 * range, round half to even on crafted ties, saturation), the observers on
 * known distributions (min/max exact, a percentile within one histogram bin
 * and the sampling error, entropy's threshold within 2% on a uniform
 * distribution and cutting off an outlier), calibration through the
 * interpreter, and pass_quantize on a small Conv -> Relu -> pool -> Add
 * graph with hand-set ranges: its printed QDQ graph against a golden file,
 * every scale and zero point against the hand computation, the per-channel
 * weight scales max|w_c| / 127, the int32 bias, and the quantized graph's
 * outputs within a few quantization steps of the float graph's.
 */
#define _USE_MATH_DEFINES
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opt_check_util.h"

#define F32 FXRT_DTYPE_FLOAT32

START_TEST(test_affine_params_by_hand)
{
    float s;
    int32_t z;
    /* [-1, 3]: scale 4/255, zero point round(63.75) = 64; int8: -64. */
    quant_affine_params(-1, 3, FXRT_DTYPE_UINT8, &s, &z);
    ck_assert_float_eq_tol(s, 4.0f / 255, 1e-9);
    ck_assert_int_eq(z, 64);
    quant_affine_params(-1, 3, FXRT_DTYPE_INT8, &s, &z);
    ck_assert_int_eq(z, -64);
    /* A range above 0 is widened to contain it: zero point at qmin. */
    quant_affine_params(0.5f, 2, FXRT_DTYPE_UINT8, &s, &z);
    ck_assert_float_eq_tol(s, 2.0f / 255, 1e-9);
    ck_assert_int_eq(z, 0);
    /* A tie: scale exactly 1/128 and -lo / scale = 64.5 -> 64 (even),
     * where rounding half up would give 65. */
    quant_affine_params(-0.50390625f, 1.48828125f, FXRT_DTYPE_UINT8, &s, &z);
    ck_assert(s == 0.0078125f);
    ck_assert_int_eq(z, 64);
    /* An empty range: scale 1, zero point 0, as ONNX Runtime does. */
    quant_affine_params(0, 0, FXRT_DTYPE_UINT8, &s, &z);
    ck_assert(s == 1.0f);
    ck_assert_int_eq(z, 0);
}
END_TEST

START_TEST(test_round_half_even_and_saturate)
{
    ck_assert_int_eq(quant_round(2.5f, 1, 0, -127, 127), 2);
    ck_assert_int_eq(quant_round(3.5f, 1, 0, -127, 127), 4);
    ck_assert_int_eq(quant_round(-2.5f, 1, 0, -127, 127), -2);
    ck_assert_int_eq(quant_round(0.5f, 1, 10, 0, 255), 10);
    ck_assert_int_eq(quant_round(1000, 1, 0, 0, 255), 255);
    ck_assert_int_eq(quant_round(-1000, 1, 0, -127, 127), -127);
    ck_assert_int_eq(quant_round(-3, 1, 1, 0, 255), 0);
}
END_TEST

/* --- observers ---------------------------------------------------------------- */

static void range_of(const float *x, int64_t n, const char *method, float *lo, float *hi)
{
    CalibOptions o;
    ck_assert_int_eq(calib_method_parse(method, &o, &tu_diag), FX_OK);
    Observer ob;
    observer_init(&ob);
    observer_add_minmax(&ob, x, n);
    if (o.method != CALIB_MINMAX) {
        ck_assert_int_eq(observer_start_histogram(&ob, &o, &tu_diag), FX_OK);
        observer_add_histogram(&ob, &o, x, n);
    }
    observer_range(&ob, &o, lo, hi);
    observer_free(&ob);
}

/* n values uniform in [a, b) from a fixed xorshift stream. */
static float *uniform(int64_t n, float a, float b)
{
    float *x = malloc((size_t)n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    uint64_t s = 0x243F6A8885A308D3ull;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = a + (b - a) * (float)((s >> 11) * (1.0 / 9007199254740992.0));
    }
    return x;
}

START_TEST(test_observer_minmax)
{
    const float x[] = {0.5f, -2.25f, 7, NAN, 3, INFINITY};
    float lo, hi;
    range_of(x, 6, "minmax", &lo, &hi);
    ck_assert(lo == -2.25f && hi == 7.0f);
}
END_TEST

START_TEST(test_observer_percentile)
{
    /* Uniform [0, 1): the 1st and 99th percentiles are 0.01 and 0.99, to a
     * bin (1/2048) plus the sampling error of 1e5 values (~3e-4). */
    enum { N = 100000 };
    float *x = uniform(N, 0, 1);
    float lo, hi;
    range_of(x, N, "percentile:99", &lo, &hi);
    ck_assert_float_eq_tol(hi, 0.99, 2e-3);
    ck_assert_float_eq_tol(lo, 0.01, 2e-3);
    free(x);
    CalibOptions o;
    ck_assert_int_ne(calib_method_parse("percentile:40", &o, &tu_diag), FX_OK);
    ck_assert_int_ne(calib_method_parse("percentile:", &o, &tu_diag), FX_OK);
}
END_TEST

START_TEST(test_observer_entropy)
{
    /* Uniform [-1, 1): nothing is worth clipping, the threshold is the max
     * to within 2%. */
    enum { N = 200000 };
    float *x = uniform(N, -1, 1);
    float lo, hi;
    range_of(x, N, "entropy", &lo, &hi);
    ck_assert_float_eq_tol(hi, 1.0, 0.02);
    ck_assert_float_eq_tol(lo, -1.0, 0.02);
    free(x);
    /* A normal distribution (Box-Muller) with one outlier at 100: min/max
     * would spend the range on the outlier; entropy clips where the tail
     * thins out, between 3 and 8 standard deviations. */
    float *u = uniform(N, 0, 1);
    x = malloc((size_t)N * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (int i = 0; i + 1 < N; i += 2) {
        double r = sqrt(-2 * log(1 - (double)u[i])), t = 6.283185307179586 * u[i + 1];
        x[i] = (float)(r * cos(t));
        x[i + 1] = (float)(r * sin(t));
    }
    x[17] = 100;
    range_of(x, N, "entropy", &lo, &hi);
    ck_assert(hi >= 3.0f && hi <= 8.0f);
    ck_assert(lo <= -3.0f && lo >= -8.0f);
    /* Relu's output: half the values exactly 0, the rest half-normal (max
     * about 4.5).  The zeros must not pull the threshold down: it stays
     * above 3 standard deviations. */
    for (int i = 0; i < N; i++)
        x[i] = fmaxf(x[i], 0);
    x[17] = 0;
    range_of(x, N, "entropy", &lo, &hi);
    ck_assert(lo == 0.0f && hi >= 3.0f);
    free(u);
    free(x);
}
END_TEST

/* --- calibration and the pass ---------------------------------------------------- */

/* x[1,2,5,5] -> Conv(w[3,2,3,3], b[3], pad 1) -> Relu -> MaxPool 2x2 ->
 * Add of a constant. */
typedef struct SmallNet {
    Graph *g;
    Node *x, *w, *b, *conv, *relu, *pool, *add;
} SmallNet;

static SmallNet small_net(void)
{
    SmallNet s = {.g = graph_new()};
    ck_assert_ptr_nonnull(s.g);
    s.x = tu_input_f32(s.g, "x", 4, 1, 2, 5, 5);
    s.w = tu_weights_f32(s.g, "w", 4, 3, 2, 3, 3, 0.1f);
    /* Channel 0's largest |w| is 15.875 = 127 / 8: its scale is exactly
     * 1/8, and 0.3125 (2.5 steps) must round to 2 (even), -0.4375 to -4. */
    float *w = s.w->value->data;
    w[0] = 15.875f;
    w[1] = 0.3125f;
    w[2] = -0.4375f;
    TensorType bt = {.dtype = F32, .rank = 1, .dims = {3}};
    Tensor *b = tensor_new(&bt, &tu_diag);
    ck_assert_ptr_nonnull(b);
    ((float *)b->data)[0] = 0.3f;
    ((float *)b->data)[1] = -0.2f;
    ((float *)b->data)[2] = 0.05f;
    s.b = tu_constant(s.g, "b", b);
    s.conv = tu_conv(s.g, s.x, s.w, s.b, 1, 1, 1);
    s.relu = tu_op3(s.g, "Relu", s.conv, NULL, NULL);
    s.pool = graph_create_op(s.g, NULL, op_lookup("MaxPool"), "MaxPool", &s.relu, 1);
    ck_assert_ptr_nonnull(s.pool);
    ck_assert_int_eq(op_apply_attr_specs(s.pool->op, s.pool, &tu_diag), FX_OK);
    ck_assert(node_set_num_outputs(s.pool, 1));
    int64_t k[2] = {2, 2};
    ck_assert_ptr_nonnull(node_set_attr_ints(s.pool, "kernel_shape", k, 2));
    tu_reinfer(s.pool);
    s.add = tu_op3(s.g, "Add", s.pool, tu_scalar(s.g, "shift", -0.5f), NULL);
    tu_finish(s.g, &s.add, 1);
    return s;
}

static void set_range(CalibRanges *r, const Node *n, float lo, float hi)
{
    r->seen[n->id] = true;
    r->lo[n->id] = lo;
    r->hi[n->id] = hi;
}

/* Calibrated ranges for every value of small_net. */
static CalibRanges small_net_ranges(const SmallNet *s)
{
    CalibRanges r = {.count = s->g->next_id};
    r.seen = calloc((size_t)r.count, sizeof *r.seen);
    r.lo = calloc((size_t)r.count, sizeof *r.lo);
    r.hi = calloc((size_t)r.count, sizeof *r.hi);
    ck_assert(r.seen && r.lo && r.hi);
    /* x in [-1, 1]: scale 2/255 = 0.0078431377f, 1 / that is 127.49999 in
     * float (as in ONNX Runtime's float32 arithmetic): zero point 127. */
    set_range(&r, s->x, -1, 1);
    /* The Conv's outputs reach about +-20 on inputs in [-1, 1]. */
    set_range(&r, s->conv, -24, 30);
    set_range(&r, s->relu, 0, 30);
    set_range(&r, s->pool, 0, 25); /* MaxPool keeps its input's parameters instead */
    set_range(&r, s->add, -0.5f, 29.5f);
    return r;
}

/* The scalar float / integer value of constant argument i of n. */
static double const_arg(const Node *n, int i)
{
    ck_assert_ptr_nonnull(n->args[i]);
    ck_assert_ptr_nonnull(n->args[i]->value);
    return tensor_get_float(n->args[i]->value, 0);
}

static const Node *quantize_of(const Graph *g, const char *value)
{
    for (const Node *n = g->root.next; n != &g->root; n = n->next)
        if (n->op == &fx_op_QuantizeLinear && strcmp(n->args[0]->name, value) == 0)
            return n;
    ck_abort_msg("no QuantizeLinear of %s", value);
    return NULL;
}

START_TEST(test_pass_layout_and_parameters)
{
    SmallNet s = small_net();
    Graph *before = graph_clone(s.g, &tu_diag);
    ck_assert_ptr_nonnull(before);
    CalibRanges r = small_net_ranges(&s);
    const char *conv_name = s.conv->name, *pool_name = s.pool->name, *add_name = s.add->name;
    QuantizeOptions o = {.ranges = &r, .activation_type = FXRT_DTYPE_UINT8};
    QuantizeResult res;
    FxStatus st = pass_quantize(s.g, &o, &res, &tu_diag);
    if (st != FX_OK)
        diag_print(&tu_diag, stderr);
    ck_assert_int_eq(st, FX_OK);
    ck_assert_int_eq(graph_propagate_shapes(s.g, NULL, 0, &tu_diag), FX_OK);
    ck_assert_int_eq(graph_lint(s.g, true, &tu_diag), FX_OK);
    tu_assert_golden(s.g, "quantize", "conv_relu_pool_add");
    ck_assert_int_eq(tu_count_op(s.g, "Relu"), 0);
    ck_assert_int_eq(res.layers, 3);

    /* Activations: by hand from the ranges. */
    const Node *qx = quantize_of(s.g, "x");
    ck_assert_float_eq_tol(const_arg(qx, 1), 2.0 / 255, 1e-9);
    ck_assert_int_eq((int)const_arg(qx, 2), 127);
    const Node *qc = quantize_of(s.g, conv_name); /* the Relu's range [0, 30] */
    ck_assert_float_eq_tol(const_arg(qc, 1), 30.0 / 255, 1e-7);
    ck_assert_int_eq((int)const_arg(qc, 2), 0);
    const Node *qp = quantize_of(s.g, pool_name);
    ck_assert(const_arg(qp, 1) == const_arg(qc, 1));
    const Node *qa = quantize_of(s.g, add_name);
    ck_assert_float_eq_tol(const_arg(qa, 1), 30.0 / 255, 1e-7);
    ck_assert_int_eq((int)const_arg(qa, 2), 4); /* round(0.5 / (30/255)) = round(4.25) */

    /* Weights: per output channel, max |w_c| / 127, zero point 0. */
    const Node *conv = graph_find(s.g, conv_name);
    const Node *wdq = conv->args[1];
    ck_assert_ptr_eq(wdq->op, &fx_op_DequantizeLinear);
    ck_assert_int_eq(node_attr_int(wdq, "axis", -1), 0);
    const Tensor *wq = wdq->args[0]->value, *ws = wdq->args[1]->value, *wz = wdq->args[2]->value;
    const Tensor *w = graph_find(before, "w")->value; /* the pass erased s.w */
    ck_assert_int_eq(wq->type.dtype, FXRT_DTYPE_INT8);
    for (int c = 0; c < 3; c++) {
        float amax = 0;
        for (int i = 0; i < 18; i++)
            amax = fmaxf(amax, fabsf(((const float *)w->data)[c * 18 + i]));
        ck_assert_float_eq_tol(tensor_get_float(ws, c), amax / 127, 1e-9);
        ck_assert_int_eq(tensor_get_int(wz, c), 0);
        for (int i = 0; i < 18; i++) {
            double ideal = ((const float *)w->data)[c * 18 + i] / tensor_get_float(ws, c);
            ck_assert(fabs(tensor_get_int(wq, c * 18 + i) - ideal) <= 0.5 + 1e-6);
        }
    }
    ck_assert_int_eq(tensor_get_int(wq, 0), 127);
    ck_assert_int_eq(tensor_get_int(wq, 1), 2);  /* 2.5 steps, even */
    ck_assert_int_eq(tensor_get_int(wq, 2), -4); /* -3.5 steps, even */

    /* Bias: int32 of scale x_scale * w_scale_c. */
    const Node *bdq = conv->args[2];
    ck_assert_ptr_eq(bdq->op, &fx_op_DequantizeLinear);
    const Tensor *bq = bdq->args[0]->value, *bs = bdq->args[1]->value;
    ck_assert_int_eq(bq->type.dtype, FXRT_DTYPE_INT32);
    const float bias[3] = {0.3f, -0.2f, 0.05f};
    for (int c = 0; c < 3; c++) {
        double scale = (2.0f / 255) * tensor_get_float(ws, c);
        ck_assert_float_eq_tol(tensor_get_float(bs, c), scale, 1e-9);
        ck_assert(fabs(tensor_get_int(bq, c) - bias[c] / scale) <= 0.5 + 1e-3);
    }
    ck_assert_uint_eq(res.float_weight_bytes, (54 + 3 + 1) * 4);

    /* Numbers: within a few output steps (30/255) of the float graph on
     * inputs in the calibrated range. */
    uint64_t seed = 7;
    Tensor *in = tensor_new_random(&s.x->out_types[0], &seed, &tu_diag);
    ck_assert_ptr_nonnull(in);
    Tensor *want, *got;
    ck_assert_int_eq(interp_run(before, (const Tensor *const *)&in, 1, &want, 1, NULL, NULL,
                                &tu_diag), FX_OK);
    ck_assert_int_eq(interp_run(s.g, (const Tensor *const *)&in, 1, &got, 1, NULL, NULL,
                                &tu_diag), FX_OK);
    CompareResult cmp = tensor_compare(got, want, 0, 4 * 30.0 / 255);
    ck_assert_msg(cmp.ok, "max abs error %g", cmp.max_abs);
    tensor_free(in);
    tensor_free(want);
    tensor_free(got);
    quantize_result_free(&res);
    calib_ranges_free(&r);
    graph_free(before);
    graph_free(s.g);
}
END_TEST

/* weight_bits 7: per channel max |w_c| / 64 into [-64, 64], so that every
 * pair of weights fits vpmaddubsw (the AVX2 tile of fxrt_nn_qgemm.c). */
START_TEST(test_seven_bit_weights)
{
    SmallNet s = small_net();
    Graph *before = graph_clone(s.g, &tu_diag);
    ck_assert_ptr_nonnull(before);
    CalibRanges r = small_net_ranges(&s);
    const char *conv_name = s.conv->name;
    QuantizeOptions o = {.ranges = &r, .activation_type = FXRT_DTYPE_UINT8, .weight_bits = 7};
    QuantizeResult res;
    ck_assert_int_eq(pass_quantize(s.g, &o, &res, &tu_diag), FX_OK);
    const Node *wdq = graph_find(s.g, conv_name)->args[1];
    const Tensor *wq = wdq->args[0]->value, *ws = wdq->args[1]->value;
    const Tensor *w = graph_find(before, "w")->value;
    for (int c = 0; c < 3; c++) {
        float amax = 0;
        int qmax = 0;
        for (int i = 0; i < 18; i++) {
            amax = fmaxf(amax, fabsf(((const float *)w->data)[c * 18 + i]));
            int v = (int)tensor_get_int(wq, c * 18 + i);
            qmax = abs(v) > qmax ? abs(v) : qmax;
            double ideal = ((const float *)w->data)[c * 18 + i] / tensor_get_float(ws, c);
            ck_assert(fabs(v - ideal) <= 0.5 + 1e-6);
        }
        ck_assert_float_eq_tol(tensor_get_float(ws, c), amax / 64, 1e-9);
        ck_assert_int_eq(qmax, 64);
    }
    ck_assert_int_eq(tensor_get_int(wq, 1), 1); /* 0.3125 x 64 / 15.875 = 1.26 steps */
    quantize_result_free(&res);
    calib_ranges_free(&r);
    graph_free(before);
    graph_free(s.g);
}
END_TEST

START_TEST(test_keep_float_and_int8_activations)
{
    SmallNet s = small_net();
    CalibRanges r = {.count = s.g->next_id};
    r.seen = calloc((size_t)r.count, sizeof *r.seen);
    r.lo = calloc((size_t)r.count, sizeof *r.lo);
    r.hi = calloc((size_t)r.count, sizeof *r.hi);
    set_range(&r, s.x, -1, 1);
    set_range(&r, s.conv, -4, 6);
    set_range(&r, s.relu, 0, 6);
    set_range(&r, s.pool, 0, 5);
    set_range(&r, s.add, -0.5f, 4.5f);
    const char *keep[] = {s.conv->name};
    const char *relu_name = s.relu->name;
    QuantizeOptions o = {.ranges = &r, .activation_type = FXRT_DTYPE_INT8, .keep_float = keep,
                         .num_keep_float = 1};
    QuantizeResult res;
    ck_assert_int_eq(pass_quantize(s.g, &o, &res, &tu_diag), FX_OK);
    ck_assert_int_eq(graph_propagate_shapes(s.g, NULL, 0, &tu_diag), FX_OK);
    /* The Conv keeps float weights and its Relu; the Relu's output, read by
     * the pool, is quantized (int8, zero point -128 for [0, 6]). */
    ck_assert_int_eq(tu_count_op(s.g, "Relu"), 1);
    ck_assert_ptr_eq(graph_find(s.g, keep[0])->args[1], s.w);
    const Node *qr = quantize_of(s.g, relu_name);
    ck_assert_int_eq(qr->out_types[0].dtype, FXRT_DTYPE_INT8);
    ck_assert_int_eq((int)const_arg(qr, 2), -128);
    ck_assert_int_eq(res.layers, 2);
    quantize_result_free(&res);
    calib_ranges_free(&r);
    graph_free(s.g);
}
END_TEST

START_TEST(test_calibration_run)
{
    /* x -> Relu over two samples: x's range is their min/max, Relu's from 0. */
    SmallNet s = small_net();
    TensorType t = s.x->out_types[0];
    Tensor *a = tensor_new(&t, &tu_diag), *b = tensor_new(&t, &tu_diag);
    ck_assert(a && b);
    for (int64_t i = 0; i < tensor_numel(a); i++) {
        ((float *)a->data)[i] = (float)(i % 7) * 0.25f - 0.5f;  /* [-0.5, 1] */
        ((float *)b->data)[i] = (float)(i % 5) * -0.5f;         /* [-2, 0] */
    }
    Tensor *sa[1] = {a}, *sb[1] = {b};
    Tensor **samples[2] = {sa, sb};
    CalibData c = {.samples = samples, .num_samples = 2, .num_inputs = 1};
    CalibOptions o = {.method = CALIB_MINMAX};
    CalibRanges r;
    ck_assert_int_eq(calib_run(s.g, &c, &o, &r, &tu_diag), FX_OK);
    ck_assert(r.seen[s.x->id] && r.lo[s.x->id] == -2.0f && r.hi[s.x->id] == 1.0f);
    ck_assert(r.seen[s.relu->id] && r.lo[s.relu->id] == 0.0f && r.hi[s.relu->id] > 0);
    ck_assert(!r.seen[s.w->id]); /* constants are not observed */
    calib_ranges_free(&r);
    tensor_free(a);
    tensor_free(b);
    graph_free(s.g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("opt_quantize");
    TCase *p = tcase_create("parameters");
    tcase_add_checked_fixture(p, tu_setup, tu_teardown);
    tcase_add_test(p, test_affine_params_by_hand);
    tcase_add_test(p, test_round_half_even_and_saturate);
    suite_add_tcase(s, p);
    TCase *ob = tcase_create("observers");
    tcase_add_checked_fixture(ob, tu_setup, tu_teardown);
    tcase_add_test(ob, test_observer_minmax);
    tcase_add_test(ob, test_observer_percentile);
    tcase_add_test(ob, test_observer_entropy);
    tcase_add_test(ob, test_calibration_run);
    suite_add_tcase(s, ob);
    TCase *pass = tcase_create("pass");
    tcase_add_checked_fixture(pass, tu_setup, tu_teardown);
    tcase_add_test(pass, test_pass_layout_and_parameters);
    tcase_add_test(pass, test_keep_float_and_int8_activations);
    tcase_add_test(pass, test_seven_bit_weights);
    suite_add_tcase(s, pass);
    return s;
}

int main(void) { return tu_main(suite()); }
