/*
 * fxrt_nn_recurrent.c - RNN, LSTM and GRU (fxrt_recurrent.h), the kernel
 * of the ops in ir/ops/nn_recurrent.c, for the interpreter and generated
 * code alike.
 *
 * Per direction, the input projection of every step is one GEMM,
 * X [S*B, I] x W^T into scratch (the rows of X in its stored order, so
 * batch_first costs nothing), with the biases that do not depend on the
 * state added once; then one walk over the steps, each one product of the
 * state, H [B, H] x R^T, followed by the cell's elementwise update of every
 * sequence still running.  GRU without linear_before_reset needs r before
 * its candidate's product, (r . H) x Rh^T, so it takes two products a step.
 * The products are fxrt_gemm_f32 (OpenBLAS on the host, the portable loop
 * elsewhere); with B = 1, a streaming model's case, each is a GEMV.
 *
 * Sequences shorter than S (sequence_lens) stop early: in reverse their
 * first step is their own last one, so each sequence reads its projection
 * row for its own time index and the step's product is computed for all B
 * rows (the finished ones' results are ignored).  Their steps past the
 * length are zeroed in Y first.
 *
 * The state lives in scratch, read from initial_h/initial_c and copied to
 * Y_h/Y_c at the end, B x H floats each: the inputs and outputs keep the
 * caller's buffers (a streaming caller passes last call's Y_h as this
 * call's initial_h), whatever layout they have.  Sigmoid and tanh come from
 * fxrt_math.h's polynomial sigmoid, the rarer functions from libm.
 */
#include <math.h>
#include <string.h>

#include "fxrt.h"
#include "fxrt_math.h"

static int64_t cell_gates(const FxrtRecurrent *p)
{
    return p->cell == FXRT_CELL_LSTM ? 4 : p->cell == FXRT_CELL_GRU ? 3 : 1;
}

static int cell_activations(const FxrtRecurrent *p)
{
    return p->cell == FXRT_CELL_LSTM ? 3 : p->cell == FXRT_CELL_GRU ? 2 : 1;
}

/* Scratch regions start on 16-float (64-byte) boundaries. */
static int64_t round16(int64_t n)
{
    return (n + 15) / 16 * 16;
}

int64_t fxrt_recurrent_scratch_floats(const FxrtRecurrent *p)
{
    int64_t gh = cell_gates(p) * p->hidden_size, bh = p->batch * p->hidden_size;
    /* projections, gates, h, c, GRU's r . H or Rh product */
    return round16(p->seq_length * p->batch * gh) + round16(p->batch * gh) + 3 * round16(bh);
}

/* tanh through fxrt_math.h's sigmoid, tanh(v) = 2 sigmoid(2v) - 1: within
 * 3e-7 of libm's (absolute), and inlined where tanhf is a call per element,
 * the most frequent function of the three cells. */
FXRT_NO_TRAPPING_MATH static inline float tanh_fast(float v)
{
    return 2.0f * fxrt_sigmoid(2.0f * v) - 1.0f;
}

FXRT_NO_TRAPPING_MATH static float activate(const FxrtRecurrentActivation *a, float v)
{
    switch (a->kind) {
    case FXRT_RACT_RELU:
        return v > 0.0f ? v : 0.0f;
    case FXRT_RACT_TANH:
        return tanh_fast(v);
    case FXRT_RACT_SIGMOID:
        return fxrt_sigmoid(v);
    case FXRT_RACT_AFFINE:
        return a->alpha * v + a->beta;
    case FXRT_RACT_LEAKY_RELU:
        return v >= 0.0f ? v : a->alpha * v;
    case FXRT_RACT_THRESHOLDED_RELU:
        return v > a->alpha ? v : 0.0f;
    case FXRT_RACT_SCALED_TANH:
        return a->alpha * tanh_fast(a->beta * v);
    case FXRT_RACT_HARD_SIGMOID: {
        float s = a->alpha * v + a->beta;
        return s < 0.0f ? 0.0f : s > 1.0f ? 1.0f : s;
    }
    case FXRT_RACT_ELU:
        return v >= 0.0f ? v : a->alpha * (expf(v) - 1.0f);
    case FXRT_RACT_SOFTSIGN:
        return v / (1.0f + fabsf(v));
    case FXRT_RACT_SOFTPLUS:
        return v > 0.0f ? v + log1pf(expf(-v)) : log1pf(expf(v));
    default:
        return v;
    }
}

static float clip_gate(float clip, float v)
{
    if (clip > 0.0f)
        v = v < -clip ? -clip : v > clip ? clip : v;
    return v;
}

/* Offset of (step t, direction d, sequence b) in Y, in floats. */
static int64_t y_offset(const FxrtRecurrent *p, int64_t t, int64_t d, int64_t b)
{
    int64_t rows = p->batch_first ? (b * p->seq_length + t) * p->directions + d
                                  : (t * p->directions + d) * p->batch + b;
    return rows * p->hidden_size;
}

/* Offset of (direction d, sequence b) in initial_h, Y_h and their c forms. */
static int64_t state_offset(const FxrtRecurrent *p, int64_t d, int64_t b)
{
    return (p->batch_first ? b * p->directions + d : d * p->batch + b) * p->hidden_size;
}

/* Projection row of (step t, sequence b): X's row order. */
static int64_t x_row(const FxrtRecurrent *p, int64_t t, int64_t b)
{
    return p->batch_first ? b * p->seq_length + t : t * p->batch + b;
}

typedef struct Direction {
    const float *w, *r, *wb, *rb, *peep;
    const FxrtRecurrentActivation *act;
    int reverse;
    int64_t d;
} Direction;

/* One step's update of sequence b, whose projection row is xw, gates g
 * (the state's product), state h and c (rows of the scratch state). */
FXRT_NO_TRAPPING_MATH static void lstm_row(const FxrtRecurrent *p, const Direction *dir,
                                           const float *xw, const float *g, float *h, float *c)
{
    int64_t hs = p->hidden_size;
    const float *pi = dir->peep, *po = pi ? pi + hs : NULL, *pf = pi ? pi + 2 * hs : NULL;
    for (int64_t j = 0; j < hs; j++) {
        float c_prev = c[j];
        float vi = xw[j] + g[j] + (pi ? pi[j] * c_prev : 0.0f);
        float i = activate(&dir->act[0], clip_gate(p->clip, vi));
        float f;
        if (p->input_forget) {
            f = 1.0f - i;
        } else {
            float vf = xw[2 * hs + j] + g[2 * hs + j] + (pf ? pf[j] * c_prev : 0.0f);
            f = activate(&dir->act[0], clip_gate(p->clip, vf));
        }
        float cand = activate(&dir->act[1], clip_gate(p->clip, xw[3 * hs + j] + g[3 * hs + j]));
        float c_new = f * c_prev + i * cand;
        float vo = xw[hs + j] + g[hs + j] + (po ? po[j] * c_new : 0.0f);
        float o = activate(&dir->act[0], clip_gate(p->clip, vo));
        c[j] = c_new;
        h[j] = o * activate(&dir->act[2], c_new);
    }
}

static void run_direction(const FxrtRecurrent *p, const Direction *dir, const float *x,
                          const int32_t *lens, const float *initial_h, const float *initial_c,
                          float *y, float *y_h, float *y_c, float *scratch)
{
    const int64_t S = p->seq_length, B = p->batch, I = p->input_size, H = p->hidden_size;
    const int64_t G = cell_gates(p), GH = G * H;
    const int gru = p->cell == FXRT_CELL_GRU, lbr = gru && p->linear_before_reset;
    float *xw = scratch, *gates = xw + round16(S * B * GH), *hs = gates + round16(B * GH);
    float *cs = hs + round16(B * H), *tmp = cs + round16(B * H);

    fxrt_gemm_f32(0, 1, S * B, GH, I, 1.0f, x, I, dir->w, I, 0.0f, xw, GH);
    if (dir->wb) {
        /* GRU with linear_before_reset adds Rbh inside r's product */
        int64_t rb_end = lbr ? 2 * H : GH;
        for (int64_t row = 0; row < S * B; row++) {
            float *v = xw + row * GH;
            for (int64_t j = 0; j < GH; j++)
                v[j] += dir->wb[j] + (j < rb_end ? dir->rb[j] : 0.0f);
        }
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t so = state_offset(p, dir->d, b);
        if (initial_h)
            memcpy(hs + b * H, initial_h + so, (size_t)H * sizeof *hs);
        else
            memset(hs + b * H, 0, (size_t)H * sizeof *hs);
        if (initial_c)
            memcpy(cs + b * H, initial_c + so, (size_t)H * sizeof *cs);
        else
            memset(cs + b * H, 0, (size_t)H * sizeof *cs);
    }

    int64_t steps = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t len = lens ? lens[b] : S;
        steps = len > steps ? len : steps;
    }
    for (int64_t s = 0; s < steps; s++) {
        /* the state's product: all gates, or GRU's z and r */
        int64_t n = gru && !lbr ? 2 * H : GH;
        fxrt_gemm_f32(0, 1, B, n, H, 1.0f, hs, H, dir->r, H, 0.0f, gates, GH);
        if (lbr)
            for (int64_t b = 0; b < B; b++)
                for (int64_t j = 0; j < H; j++)
                    gates[b * GH + 2 * H + j] += dir->rb ? dir->rb[2 * H + j] : 0.0f;
        if (gru && !lbr) {
            /* z and r, then (r . H) x Rh^T into the candidate's gates */
            for (int64_t b = 0; b < B; b++) {
                int64_t len = lens ? lens[b] : S;
                float *g = gates + b * GH, *h = hs + b * H, *rh = tmp + b * H;
                if (s >= len) {
                    memset(rh, 0, (size_t)H * sizeof *rh);
                    continue;
                }
                int64_t t = dir->reverse ? len - 1 - s : s;
                const float *v = xw + x_row(p, t, b) * GH;
                for (int64_t j = 0; j < H; j++) {
                    g[j] = activate(&dir->act[0], clip_gate(p->clip, v[j] + g[j]));
                    float rg = activate(&dir->act[0], clip_gate(p->clip, v[H + j] + g[H + j]));
                    rh[j] = rg * h[j];
                }
            }
            fxrt_gemm_f32(0, 1, B, H, H, 1.0f, tmp, H, dir->r + 2 * H * H, H, 0.0f, gates + 2 * H,
                          GH);
        }
        for (int64_t b = 0; b < B; b++) {
            int64_t len = lens ? lens[b] : S;
            if (s >= len)
                continue;
            int64_t t = dir->reverse ? len - 1 - s : s;
            const float *v = xw + x_row(p, t, b) * GH;
            float *g = gates + b * GH, *h = hs + b * H;
            if (p->cell == FXRT_CELL_RNN) {
                for (int64_t j = 0; j < H; j++)
                    h[j] = activate(&dir->act[0], clip_gate(p->clip, v[j] + g[j]));
            } else if (p->cell == FXRT_CELL_LSTM) {
                lstm_row(p, dir, v, g, h, cs + b * H);
            } else {
                for (int64_t j = 0; j < H; j++) {
                    float z, cand;
                    if (lbr) {
                        z = activate(&dir->act[0], clip_gate(p->clip, v[j] + g[j]));
                        float rg = activate(&dir->act[0], clip_gate(p->clip, v[H + j] + g[H + j]));
                        cand = v[2 * H + j] + rg * g[2 * H + j];
                    } else {
                        z = g[j];
                        cand = v[2 * H + j] + g[2 * H + j];
                    }
                    cand = activate(&dir->act[1], clip_gate(p->clip, cand));
                    h[j] = (1.0f - z) * cand + z * h[j];
                }
            }
            if (y)
                memcpy(y + y_offset(p, t, dir->d, b), h, (size_t)H * sizeof *h);
        }
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t so = state_offset(p, dir->d, b);
        if (y_h)
            memcpy(y_h + so, hs + b * H, (size_t)H * sizeof *hs);
        if (y_c)
            memcpy(y_c + so, cs + b * H, (size_t)H * sizeof *cs);
    }
}

int fxrt_recurrent_f32(const FxrtRecurrent *p, const float *x, const float *w, const float *r,
                       const float *b, const int32_t *sequence_lens, const float *initial_h,
                       const float *initial_c, const float *peepholes, float *y, float *y_h,
                       float *y_c, float *scratch)
{
    const int64_t S = p->seq_length, B = p->batch, I = p->input_size, H = p->hidden_size;
    const int64_t GH = cell_gates(p) * H;
    if (sequence_lens) {
        for (int64_t s = 0; s < B; s++)
            if (sequence_lens[s] < 0 || sequence_lens[s] > S)
                return -1;
        /* steps past a sequence's end are zero in Y */
        for (int64_t bi = 0; y && bi < B; bi++)
            for (int64_t t = sequence_lens[bi]; t < S; t++)
                for (int64_t d = 0; d < p->directions; d++)
                    memset(y + y_offset(p, t, d, bi), 0, (size_t)H * sizeof *y);
    }
    for (int64_t d = 0; d < p->directions; d++) {
        Direction dir = {
            .w = w + d * GH * I,
            .r = r + d * GH * H,
            .wb = b ? b + d * 2 * GH : NULL,
            .rb = b ? b + d * 2 * GH + GH : NULL,
            .peep = peepholes ? peepholes + d * 3 * H : NULL,
            .act = p->act + d * cell_activations(p),
            .reverse = p->directions == 2 ? d == 1 : p->reverse != 0,
            .d = d,
        };
        run_direction(p, &dir, x, sequence_lens, initial_h, initial_c, y, y_h, y_c, scratch);
    }
    return 0;
}
