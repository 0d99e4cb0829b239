/*
 * fxrt_recurrent.h - the recurrent layers of ONNX: RNN, LSTM and GRU, one
 * kernel for the three cells (fxrt_nn_recurrent.c).  See fxrt.h for the
 * rules that hold for all of the runtime.
 *
 * Tensors are ONNX's, float32, contiguous, with D = 1 or 2 directions, G
 * gates (RNN 1, LSTM 4 in the order i, o, f, c, GRU 3 in the order z, r, h),
 * S steps, B sequences, I inputs and H hidden units:
 *
 *   X [S, B, I] (batch_first: [B, S, I]), W [D, G*H, I], R [D, G*H, H],
 *   B [D, 2*G*H] (W's biases, then R's), sequence_lens [B] int32,
 *   initial_h and initial_c [D, B, H] (batch_first: [B, D, H]), P [D, 3*H]
 *   (LSTM peepholes, i, o, f), Y [S, D, B, H] (batch_first: [B, S, D, H]),
 *   Y_h and Y_c as initial_h.
 *
 * Any optional operand may be NULL: B (no bias), sequence_lens (all S),
 * initial_h and initial_c (zeros), P (no peepholes), and any of Y, Y_h,
 * Y_c (not written).  Steps past a sequence's length are zero in Y; its Y_h
 * and Y_c are the state after its last step.
 */
#ifndef FXRT_RECURRENT_H
#define FXRT_RECURRENT_H

#include "fxrt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum FxrtRecurrentCell {
    FXRT_CELL_RNN,
    FXRT_CELL_LSTM,
    FXRT_CELL_GRU,
} FxrtRecurrentCell;

/* The activation functions the ONNX recurrent ops may name. */
typedef enum FxrtRecurrentActivationKind {
    FXRT_RACT_RELU,
    FXRT_RACT_TANH,
    FXRT_RACT_SIGMOID,
    FXRT_RACT_AFFINE,           /* alpha * x + beta */
    FXRT_RACT_LEAKY_RELU,       /* x >= 0 ? x : alpha * x */
    FXRT_RACT_THRESHOLDED_RELU, /* x > alpha ? x : 0 */
    FXRT_RACT_SCALED_TANH,      /* alpha * tanh(beta * x) */
    FXRT_RACT_HARD_SIGMOID,     /* min(max(alpha * x + beta, 0), 1) */
    FXRT_RACT_ELU,              /* x >= 0 ? x : alpha * (exp(x) - 1) */
    FXRT_RACT_SOFTSIGN,         /* x / (1 + |x|) */
    FXRT_RACT_SOFTPLUS,         /* log(1 + exp(x)) */
} FxrtRecurrentActivationKind;

typedef struct FxrtRecurrentActivation {
    int32_t kind; /* FxrtRecurrentActivationKind */
    float alpha, beta;
} FxrtRecurrentActivation;

/* The most activations a layer names: 3 per direction (LSTM's f, g, h). */
#define FXRT_RECURRENT_MAX_ACTIVATIONS 6

typedef struct FxrtRecurrent {
    int32_t cell;       /* FxrtRecurrentCell */
    int32_t directions; /* 1 or 2 (bidirectional: forward, then reverse) */
    int32_t reverse;    /* one direction, run from the last step back */
    int32_t batch_first; /* ONNX layout 1 */
    int64_t seq_length, batch, input_size, hidden_size;
    /* > 0: gate inputs are clamped to [-clip, clip] before activation */
    float clip;
    int32_t input_forget;        /* LSTM: f = 1 - i */
    int32_t linear_before_reset; /* GRU: r applied after R's product */
    /* per direction, the cell's functions in order: RNN f; LSTM f, g, h;
     * GRU f, g (direction d's first at d * the cell's count) */
    FxrtRecurrentActivation act[FXRT_RECURRENT_MAX_ACTIVATIONS];
} FxrtRecurrent;

/* Floats of scratch fxrt_recurrent_f32 needs: the input projections of
 * every step for one direction, the state and one step's gates. */
int64_t fxrt_recurrent_scratch_floats(const FxrtRecurrent *p);

/* Runs the layer (operands as above).  Returns 0, or -1 when a
 * sequence_lens entry is outside [0, S] (nothing meaningful written). */
int fxrt_recurrent_f32(const FxrtRecurrent *p, const float *x, const float *w, const float *r,
                       const float *b, const int32_t *sequence_lens, const float *initial_h,
                       const float *initial_c, const float *peepholes, float *y, float *y_h,
                       float *y_c, float *scratch);

#ifdef __cplusplus
}
#endif

#endif
