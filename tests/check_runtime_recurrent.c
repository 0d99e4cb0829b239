/*
 * check_runtime_recurrent.c - fxrt_recurrent_f32 (RNN, LSTM, GRU) against
 * a naive double-precision reference written here from the ONNX equations:
 * one element at a time, no GEMM, every index computed from the tensors'
 * shapes.  Covers the three cells in every direction and layout, with and
 * without bias, initial states, peepholes and unequal sequence lengths,
 * clip, input_forget, linear_before_reset and every activation function;
 * then the contracts: outputs passed as NULL are not written, a
 * sequence_lens entry out of range returns -1, and Y_h may be the buffer
 * initial_h came in (a streaming caller's state updated in place).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/fxrt.h"

static uint32_t rng_state = 12345u;

static float frand(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1u << 23) - 1.0f;
}

static float *random_floats(int64_t n, float scale)
{
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = scale * frand();
    return v;
}

static double ref_activation(const FxrtRecurrentActivation *a, double x)
{
    switch (a->kind) {
    case FXRT_RACT_RELU: return x > 0 ? x : 0;
    case FXRT_RACT_TANH: return tanh(x);
    case FXRT_RACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case FXRT_RACT_AFFINE: return a->alpha * x + a->beta;
    case FXRT_RACT_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
    case FXRT_RACT_THRESHOLDED_RELU: return x > a->alpha ? x : 0;
    case FXRT_RACT_SCALED_TANH: return a->alpha * tanh(a->beta * x);
    case FXRT_RACT_HARD_SIGMOID: return fmin(fmax(a->alpha * x + a->beta, 0), 1);
    case FXRT_RACT_ELU: return x >= 0 ? x : a->alpha * (exp(x) - 1);
    case FXRT_RACT_SOFTSIGN: return x / (1 + fabs(x));
    case FXRT_RACT_SOFTPLUS: return log(1 + exp(x));
    }
    return NAN;
}

/* The layer's operands and dimensions, as the reference reads them. */
typedef struct Layer {
    FxrtRecurrent p;
    const float *x, *w, *r, *b, *init_h, *init_c, *peep;
    const int32_t *lens;
} Layer;

static int64_t gates_of(int cell) { return cell == FXRT_CELL_LSTM ? 4 : cell == FXRT_CELL_GRU ? 3 : 1; }

static double xval(const Layer *L, int64_t t, int64_t b, int64_t i)
{
    const FxrtRecurrent *p = &L->p;
    int64_t idx = p->batch_first ? (b * p->seq_length + t) * p->input_size + i
                                 : (t * p->batch + b) * p->input_size + i;
    return L->x[idx];
}

static int64_t state_index(const FxrtRecurrent *p, int64_t d, int64_t b, int64_t j)
{
    return p->batch_first ? (b * p->directions + d) * p->hidden_size + j
                          : (d * p->batch + b) * p->hidden_size + j;
}

static double clipped(const FxrtRecurrent *p, double v)
{
    return p->clip > 0 ? fmin(fmax(v, -p->clip), p->clip) : v;
}

/* Gate g's pre-activation row j: x_t W_g^T (+ Wb_g) + h R_g^T (+ Rb_g when with_rb). */
static double wx(const Layer *L, int64_t d, int64_t g, int64_t j, int64_t t, int64_t b)
{
    const FxrtRecurrent *p = &L->p;
    int64_t G = gates_of(p->cell), H = p->hidden_size, I = p->input_size;
    double s = L->b ? L->b[d * 2 * G * H + g * H + j] : 0;
    for (int64_t i = 0; i < I; i++)
        s += xval(L, t, b, i) * L->w[(d * G * H + g * H + j) * I + i];
    return s;
}

static double rh(const Layer *L, int64_t d, int64_t g, int64_t j, const double *h)
{
    const FxrtRecurrent *p = &L->p;
    int64_t G = gates_of(p->cell), H = p->hidden_size;
    double s = L->b ? L->b[d * 2 * G * H + G * H + g * H + j] : 0;
    for (int64_t k = 0; k < H; k++)
        s += h[k] * L->r[(d * G * H + g * H + j) * H + k];
    return s;
}

/* The reference: Y [S, D, B, H] or [B, S, D, H], Y_h, Y_c in double. */
static void reference(const Layer *L, double *y, double *yh, double *yc)
{
    const FxrtRecurrent *p = &L->p;
    int64_t S = p->seq_length, B = p->batch, H = p->hidden_size, D = p->directions;
    int nact = p->cell == FXRT_CELL_LSTM ? 3 : p->cell == FXRT_CELL_GRU ? 2 : 1;
    memset(y, 0, (size_t)(S * D * B * H) * sizeof *y);
    double *h = malloc((size_t)H * sizeof *h), *c = malloc((size_t)H * sizeof *c);
    double *hn = malloc((size_t)H * sizeof *hn), *rr = malloc((size_t)H * sizeof *rr);
    for (int64_t d = 0; d < D; d++) {
        const FxrtRecurrentActivation *f = &p->act[d * nact], *g = f + 1, *ha = f + 2;
        int rev = D == 2 ? d == 1 : p->reverse;
        for (int64_t b = 0; b < B; b++) {
            int64_t len = L->lens ? L->lens[b] : S;
            for (int64_t j = 0; j < H; j++) {
                h[j] = L->init_h ? L->init_h[state_index(p, d, b, j)] : 0;
                c[j] = L->init_c ? L->init_c[state_index(p, d, b, j)] : 0;
            }
            for (int64_t s = 0; s < len; s++) {
                int64_t t = rev ? len - 1 - s : s;
                for (int64_t j = 0; j < H; j++) {
                    if (p->cell == FXRT_CELL_RNN) {
                        hn[j] = ref_activation(f, clipped(p, wx(L, d, 0, j, t, b) + rh(L, d, 0, j, h)));
                    } else if (p->cell == FXRT_CELL_LSTM) {
                        double pi = 0, po = 0, pf = 0;
                        if (L->peep) {
                            pi = L->peep[d * 3 * H + j];
                            po = L->peep[d * 3 * H + H + j];
                            pf = L->peep[d * 3 * H + 2 * H + j];
                        }
                        double i = ref_activation(f, clipped(p, wx(L, d, 0, j, t, b) + rh(L, d, 0, j, h) + pi * c[j]));
                        double fg = p->input_forget
                                        ? 1 - i
                                        : ref_activation(f, clipped(p, wx(L, d, 2, j, t, b) + rh(L, d, 2, j, h) + pf * c[j]));
                        double cc = ref_activation(g, clipped(p, wx(L, d, 3, j, t, b) + rh(L, d, 3, j, h)));
                        double cn = fg * c[j] + i * cc;
                        double o = ref_activation(f, clipped(p, wx(L, d, 1, j, t, b) + rh(L, d, 1, j, h) + po * cn));
                        rr[j] = cn; /* the new cell state, stored after the row loop */
                        hn[j] = o * ref_activation(ha, cn);
                    } else {
                        double z = ref_activation(f, clipped(p, wx(L, d, 0, j, t, b) + rh(L, d, 0, j, h)));
                        double r = ref_activation(f, clipped(p, wx(L, d, 1, j, t, b) + rh(L, d, 1, j, h)));
                        double cand;
                        if (p->linear_before_reset) {
                            cand = wx(L, d, 2, j, t, b) + r * rh(L, d, 2, j, h);
                        } else {
                            /* (r . h) R_h^T needs every r first: computed below */
                            cand = NAN;
                        }
                        hn[j] = cand;
                        rr[j] = r;
                        c[j] = z; /* GRU has no cell state: z kept here for the update */
                    }
                }
                if (p->cell == FXRT_CELL_GRU) {
                    double *rhv = malloc((size_t)H * sizeof *rhv);
                    for (int64_t k = 0; k < H; k++)
                        rhv[k] = rr[k] * h[k];
                    for (int64_t j = 0; j < H; j++) {
                        double cand = p->linear_before_reset ? hn[j] : wx(L, d, 2, j, t, b) + rh(L, d, 2, j, rhv);
                        cand = ref_activation(g, clipped(p, cand));
                        hn[j] = (1 - c[j]) * cand + c[j] * h[j];
                    }
                    free(rhv);
                } else if (p->cell == FXRT_CELL_LSTM) {
                    memcpy(c, rr, (size_t)H * sizeof *c);
                }
                memcpy(h, hn, (size_t)H * sizeof *h);
                for (int64_t j = 0; j < H; j++) {
                    int64_t yi = p->batch_first ? ((b * S + t) * D + d) * H + j : ((t * D + d) * B + b) * H + j;
                    y[yi] = h[j];
                }
            }
            for (int64_t j = 0; j < H; j++) {
                yh[state_index(p, d, b, j)] = h[j];
                yc[state_index(p, d, b, j)] = p->cell == FXRT_CELL_LSTM ? c[j] : 0;
            }
        }
    }
    free(h);
    free(c);
    free(hn);
    free(rr);
}

static double max_error(const float *got, const double *want, int64_t n)
{
    double e = 0;
    for (int64_t i = 0; i < n; i++)
        e = fmax(e, fabs((double)got[i] - want[i]));
    return e;
}

typedef struct Options {
    int cell, directions, reverse, layout, bias, states, peepholes, lens;
    float clip;
    int input_forget, lbr;
    FxrtRecurrentActivation act[3];
} Options;

/* Runs one configuration through the kernel and the reference; returns the
 * largest error over Y, Y_h and (LSTM) Y_c. */
static double run_case(const Options *o, int64_t S, int64_t B, int64_t I, int64_t H)
{
    Layer L = {0};
    FxrtRecurrent *p = &L.p;
    p->cell = o->cell;
    p->directions = o->directions;
    p->reverse = o->reverse;
    p->batch_first = o->layout;
    p->seq_length = S;
    p->batch = B;
    p->input_size = I;
    p->hidden_size = H;
    p->clip = o->clip;
    p->input_forget = o->input_forget;
    p->linear_before_reset = o->lbr;
    int nact = o->cell == FXRT_CELL_LSTM ? 3 : o->cell == FXRT_CELL_GRU ? 2 : 1;
    for (int d = 0; d < o->directions; d++)
        memcpy(&p->act[d * nact], o->act, (size_t)nact * sizeof o->act[0]);
    int64_t G = gates_of(o->cell), D = o->directions;
    float *x = random_floats(S * B * I, 1.0f), *w = random_floats(D * G * H * I, 0.6f);
    float *r = random_floats(D * G * H * H, 0.6f), *b = random_floats(D * 2 * G * H, 0.5f);
    float *ih = random_floats(D * B * H, 1.0f), *ic = random_floats(D * B * H, 1.0f);
    float *pp = random_floats(D * 3 * H, 0.5f);
    int32_t *lens = malloc((size_t)B * sizeof *lens);
    for (int64_t k = 0; k < B; k++)
        lens[k] = (int32_t)(S - (k * 2) % S); /* S, S-2, ...: unequal, at least 1 */
    L.x = x;
    L.w = w;
    L.r = r;
    L.b = o->bias ? b : NULL;
    L.init_h = o->states ? ih : NULL;
    L.init_c = o->states && o->cell == FXRT_CELL_LSTM ? ic : NULL;
    L.peep = o->peepholes && o->cell == FXRT_CELL_LSTM ? pp : NULL;
    L.lens = o->lens ? lens : NULL;
    int64_t ny = S * D * B * H, ns = D * B * H;
    float *y = random_floats(ny, 9.0f), *yh = random_floats(ns, 9.0f), *yc = random_floats(ns, 9.0f);
    double *ry = malloc((size_t)ny * sizeof *ry), *ryh = malloc((size_t)ns * sizeof *ryh);
    double *ryc = malloc((size_t)ns * sizeof *ryc);
    float *scratch = malloc((size_t)fxrt_recurrent_scratch_floats(p) * sizeof *scratch);
    int rc = fxrt_recurrent_f32(p, x, w, r, L.b, L.lens, L.init_h, L.init_c, L.peep, y, yh,
                                o->cell == FXRT_CELL_LSTM ? yc : NULL, scratch);
    ck_assert_int_eq(rc, 0);
    reference(&L, ry, ryh, ryc);
    double e = fmax(max_error(y, ry, ny), max_error(yh, ryh, ns));
    if (o->cell == FXRT_CELL_LSTM)
        e = fmax(e, max_error(yc, ryc, ns));
    free(x), free(w), free(r), free(b), free(ih), free(ic), free(pp), free(lens);
    free(y), free(yh), free(yc), free(ry), free(ryh), free(ryc), free(scratch);
    return e;
}

static const FxrtRecurrentActivation default_acts[3][3] = {
    {{FXRT_RACT_TANH, 0, 0}},
    {{FXRT_RACT_SIGMOID, 0, 0}, {FXRT_RACT_TANH, 0, 0}, {FXRT_RACT_TANH, 0, 0}},
    {{FXRT_RACT_SIGMOID, 0, 0}, {FXRT_RACT_TANH, 0, 0}},
};

START_TEST(test_every_direction_layout_and_option)
{
    int cases = 0;
    for (int cell = 0; cell < 3; cell++)
        for (int dir = 0; dir < 3; dir++) /* forward, reverse, bidirectional */
            for (int layout = 0; layout < 2; layout++)
                for (int variant = 0; variant < 4; variant++) {
                    Options o = {.cell = cell, .directions = dir == 2 ? 2 : 1,
                                 .reverse = dir == 1, .layout = layout,
                                 .bias = variant != 1, .states = variant >= 1,
                                 .peepholes = variant >= 2, .lens = variant & 1,
                                 .clip = variant == 3 ? 0.9f : 0.0f,
                                 .input_forget = variant == 3, .lbr = variant >= 2};
                    memcpy(o.act, default_acts[cell], sizeof o.act);
                    double e = run_case(&o, 5, 3, 4, 6);
                    ck_assert_msg(e < 2e-5, "cell %d direction %d layout %d variant %d: max error %g",
                                  cell, dir, layout, variant, e);
                    cases++;
                }
    ck_assert_int_eq(cases, 72);
}
END_TEST

START_TEST(test_every_activation)
{
    const FxrtRecurrentActivation all[] = {
        {FXRT_RACT_RELU, 0, 0},           {FXRT_RACT_TANH, 0, 0},
        {FXRT_RACT_SIGMOID, 0, 0},        {FXRT_RACT_AFFINE, 0.5f, 0.2f},
        {FXRT_RACT_LEAKY_RELU, 0.1f, 0},  {FXRT_RACT_THRESHOLDED_RELU, 0.3f, 0},
        {FXRT_RACT_SCALED_TANH, 0.7f, 1.3f}, {FXRT_RACT_HARD_SIGMOID, 0.2f, 0.5f},
        {FXRT_RACT_ELU, 0.9f, 0},         {FXRT_RACT_SOFTSIGN, 0, 0},
        {FXRT_RACT_SOFTPLUS, 0, 0},
    };
    int n = (int)(sizeof all / sizeof all[0]);
    for (int k = 0; k < n; k++)
        for (int cell = 0; cell < 3; cell++) {
            Options o = {.cell = cell, .directions = 2, .bias = 1, .states = 1, .lens = 1};
            /* activation k in each of the cell's positions in turn */
            for (int slot = 0; slot < 3; slot++) {
                memcpy(o.act, default_acts[cell], sizeof o.act);
                o.act[slot] = all[k];
                double e = run_case(&o, 4, 2, 3, 5);
                ck_assert_msg(e < 2e-5, "activation %d in slot %d of cell %d: max error %g", k,
                              slot, cell, e);
            }
        }
}
END_TEST

START_TEST(test_null_outputs_untouched_and_bad_lengths)
{
    FxrtRecurrent p = {.cell = FXRT_CELL_LSTM, .directions = 1, .seq_length = 3, .batch = 2,
                       .input_size = 2, .hidden_size = 3,
                       .act = {{FXRT_RACT_SIGMOID, 0, 0}, {FXRT_RACT_TANH, 0, 0}, {FXRT_RACT_TANH, 0, 0}}};
    float *x = random_floats(12, 1), *w = random_floats(24, 1), *r = random_floats(36, 1);
    float *scratch = malloc((size_t)fxrt_recurrent_scratch_floats(&p) * sizeof *scratch);
    float yh[6], yc[6];
    for (int i = 0; i < 6; i++)
        yc[i] = 42.0f;
    ck_assert_int_eq(fxrt_recurrent_f32(&p, x, w, r, NULL, NULL, NULL, NULL, NULL, NULL, yh, NULL,
                                        scratch), 0);
    for (int i = 0; i < 6; i++)
        ck_assert(fabsf(yh[i]) < 1.0f);
    const int32_t too_long[2] = {3, 4}, negative[2] = {-1, 2};
    ck_assert_int_eq(fxrt_recurrent_f32(&p, x, w, r, NULL, too_long, NULL, NULL, NULL, NULL, yh,
                                        yc, scratch), -1);
    ck_assert_int_eq(fxrt_recurrent_f32(&p, x, w, r, NULL, negative, NULL, NULL, NULL, NULL, yh,
                                        yc, scratch), -1);
    for (int i = 0; i < 6; i++)
        ck_assert(yc[i] == 42.0f);
    free(x), free(w), free(r), free(scratch);
}
END_TEST

/* A streaming caller may pass one buffer as initial_h and Y_h (and as
 * initial_c and Y_c): the kernel reads the state before it writes it. */
START_TEST(test_state_in_place)
{
    for (int dirs = 1; dirs <= 2; dirs++)
        for (int layout = 0; layout < 2; layout++) {
            FxrtRecurrent p = {.cell = FXRT_CELL_LSTM, .directions = dirs, .batch_first = layout,
                               .seq_length = 4, .batch = 2, .input_size = 3, .hidden_size = 4,
                               .act = {{FXRT_RACT_SIGMOID, 0, 0}, {FXRT_RACT_TANH, 0, 0},
                                       {FXRT_RACT_TANH, 0, 0}, {FXRT_RACT_SIGMOID, 0, 0},
                                       {FXRT_RACT_TANH, 0, 0}, {FXRT_RACT_TANH, 0, 0}}};
            int64_t ns = dirs * 2 * 4;
            float *x = random_floats(24, 1), *w = random_floats(dirs * 48, 0.6f);
            float *r = random_floats(dirs * 64, 0.6f), *h = random_floats(ns, 1);
            float *c = random_floats(ns, 1);
            float yh[16], yc[16];
            float *scratch = malloc((size_t)fxrt_recurrent_scratch_floats(&p) * sizeof *scratch);
            for (int chunk = 0; chunk < 3; chunk++) {
                ck_assert_int_eq(fxrt_recurrent_f32(&p, x, w, r, NULL, NULL, h, c, NULL, NULL, yh,
                                                    yc, scratch), 0);
                ck_assert_int_eq(fxrt_recurrent_f32(&p, x, w, r, NULL, NULL, h, c, NULL, NULL, h,
                                                    c, scratch), 0);
                for (int64_t i = 0; i < ns; i++) {
                    ck_assert_msg(h[i] == yh[i], "h[%lld] in place %g, separate %g", (long long)i,
                                  h[i], yh[i]);
                    ck_assert(c[i] == yc[i]);
                }
            }
            free(x), free(w), free(r), free(h), free(c), free(scratch);
        }
}
END_TEST

static Suite *recurrent_suite(void)
{
    Suite *s = suite_create("runtime_recurrent");
    TCase *k = tcase_create("recurrent");
    tcase_set_timeout(k, 60);
    tcase_add_test(k, test_every_direction_layout_and_option);
    tcase_add_test(k, test_every_activation);
    tcase_add_test(k, test_null_outputs_untouched_and_bad_lengths);
    tcase_add_test(k, test_state_in_place);
    suite_add_tcase(s, k);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(recurrent_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
