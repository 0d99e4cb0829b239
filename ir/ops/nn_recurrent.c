/*
 * nn_recurrent.c - ONNX's recurrent layers RNN, LSTM and GRU (opsets 7, 14
 * with `layout`, 22), one op each over one kernel, fxrt_recurrent_f32
 * (runtime/fxrt_nn_recurrent.c), which the interpreter and generated code
 * both call; its scratch is planned by the arena through scratch_bytes.
 *
 * Inputs X, W, R, then the optional B, sequence_lens, initial_h and, for
 * LSTM, initial_c and P (peepholes); omitted ones are None arguments (the
 * frontend's empty names).  Outputs Y, Y_h and (LSTM) Y_c, each optional:
 * an output no getitem reads is not written by the generated code.
 *
 * `activations` is canonical after import: the cell's defaults when the
 * model gives none (RNN Tanh; LSTM Sigmoid, Tanh, Tanh; GRU Sigmoid,
 * Tanh), one direction's list repeated for bidirectional layers.
 * `activation_alpha` and `activation_beta` are consumed in the order of the
 * functions that take them, as ONNX Runtime does (missing ones: LeakyRelu
 * 0.01, HardSigmoid 0.2 and 0.5, Elu 1, others 0).  float32 only.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ_LENS, IN_INITIAL_H, IN_INITIAL_C, IN_P };

static FxrtRecurrentCell node_cell(const Node *n)
{
    return n->op == &fx_op_LSTM ? FXRT_CELL_LSTM
           : n->op == &fx_op_GRU ? FXRT_CELL_GRU
                                 : FXRT_CELL_RNN;
}

static int cell_gates(FxrtRecurrentCell cell)
{
    return cell == FXRT_CELL_LSTM ? 4 : cell == FXRT_CELL_GRU ? 3 : 1;
}

static int cell_functions(FxrtRecurrentCell cell)
{
    return cell == FXRT_CELL_LSTM ? 3 : cell == FXRT_CELL_GRU ? 2 : 1;
}

static int direction_count(const Node *n)
{
    return strcmp(node_attr_string(n, "direction", "forward"), "bidirectional") == 0 ? 2 : 1;
}

/* The ONNX activation names, by FxrtRecurrentActivationKind, with whether
 * each takes alpha and beta and their defaults (ONNX Runtime's). */
static const struct {
    const char *name, *c_name;
    bool alpha, beta;
    float alpha_default, beta_default;
} activation_table[] = {
    {"Relu", "FXRT_RACT_RELU", false, false, 0.0f, 0.0f},
    {"Tanh", "FXRT_RACT_TANH", false, false, 0.0f, 0.0f},
    {"Sigmoid", "FXRT_RACT_SIGMOID", false, false, 0.0f, 0.0f},
    {"Affine", "FXRT_RACT_AFFINE", true, true, 0.0f, 0.0f},
    {"LeakyRelu", "FXRT_RACT_LEAKY_RELU", true, false, 0.01f, 0.0f},
    {"ThresholdedRelu", "FXRT_RACT_THRESHOLDED_RELU", true, false, 0.0f, 0.0f},
    {"ScaledTanh", "FXRT_RACT_SCALED_TANH", true, true, 0.0f, 0.0f},
    {"HardSigmoid", "FXRT_RACT_HARD_SIGMOID", true, true, 0.2f, 0.5f},
    {"Elu", "FXRT_RACT_ELU", true, false, 1.0f, 0.0f},
    {"Softsign", "FXRT_RACT_SOFTSIGN", false, false, 0.0f, 0.0f},
    {"Softplus", "FXRT_RACT_SOFTPLUS", false, false, 0.0f, 0.0f},
};
enum { NUM_ACTIVATIONS = (int)(sizeof activation_table / sizeof activation_table[0]) };

/* ASCII case-insensitive equality: ONNX Runtime accepts "tanh" too. */
static bool name_equal(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (x != y)
            return false;
    }
    return *a == *b;
}

static FxStatus recurrent_canonicalize(Node *n, int opset, Diag *d)
{
    (void)opset;
    FxrtRecurrentCell cell = node_cell(n);
    const char *dir = node_attr_string(n, "direction", "forward");
    if (strcmp(dir, "forward") && strcmp(dir, "reverse") && strcmp(dir, "bidirectional"))
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "direction '%s' is not forward, reverse or bidirectional", dir);
    int per = cell_functions(cell), dirs = direction_count(n);
    Attr *a = node_attr(n, "activations");
    if (a && a->count > 0 && !(a->count == per * dirs || (dirs == 2 && a->count == per)))
        return diag_node_error(d, FX_ERR_INVALID, n,
                               "%lld activations; %s takes %d per direction (%d directions)",
                               (long long)a->count, n->op->name, per, dirs);
    if (a && a->count == per * dirs)
        return FX_OK;
    static const char *const defaults[3][3] = {
        {"Tanh"}, {"Sigmoid", "Tanh", "Tanh"}, {"Sigmoid", "Tanh"}};
    const char *names[FXRT_RECURRENT_MAX_ACTIVATIONS];
    for (int k = 0; k < per * dirs; k++)
        names[k] = a && a->count > 0 ? a->strings[k % per] : defaults[cell][k % per];
    if (!node_set_attr_strings(n, "activations", names, per * dirs))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    return FX_OK;
}

static FxStatus check_type(const Node *n, Diag *d, const TensorType *t, const char *what,
                           DType want, int rank, const int64_t *dims)
{
    char got[128];
    if (t->dtype != want)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "%s takes %s %s; it is %s",
                               n->op->name, dtype_name(want), what, dtype_name(t->dtype));
    bool ok = t->rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = t->dims[i] == dims[i];
    if (!ok) {
        char want_s[128];
        TensorType w = {.dtype = want, .rank = rank};
        memcpy(w.dims, dims, (size_t)rank * sizeof *dims);
        return diag_node_error(d, FX_ERR_SHAPE, n, "%s is %s; expected %s", what,
                               type_format(t, got, sizeof got),
                               type_format(&w, want_s, sizeof want_s));
    }
    return FX_OK;
}

/* The kernel parameters and the output types of node n for its input
 * types (in[i] NULL: omitted); called by infer, eval, emit and
 * scratch_bytes. */
static FxStatus recurrent_plan(const Node *n, Diag *d, const TensorType *const *in, int num_in,
                               int num_out, TensorType *out, FxrtRecurrent *p)
{
    const TensorType *t[8] = {0};
    for (int i = 0; i < num_in && i < 8; i++)
        t[i] = in[i];
    FxrtRecurrentCell cell = node_cell(n);
    const TensorType *x = t[IN_X], *w = t[IN_W], *r = t[IN_R];
    char sx[128], sw[128], sr[128];
    if (x->dtype != FXRT_DTYPE_FLOAT32)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "%s takes float32 only; X is %s",
                               n->op->name, dtype_name(x->dtype));
    if (x->rank != 3 || w->rank != 3 || r->rank != 3)
        return diag_node_error(d, FX_ERR_SHAPE, n,
                               "X %s, W %s and R %s must have rank 3",
                               type_format(x, sx, sizeof sx), type_format(w, sw, sizeof sw),
                               type_format(r, sr, sizeof sr));
    memset(p, 0, sizeof *p);
    p->cell = cell;
    p->directions = direction_count(n);
    p->reverse = strcmp(node_attr_string(n, "direction", "forward"), "reverse") == 0;
    int64_t layout = node_attr_int(n, "layout", 0);
    if (layout != 0 && layout != 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "layout %lld is not 0 or 1",
                               (long long)layout);
    p->batch_first = (int32_t)layout;
    p->seq_length = x->dims[layout ? 1 : 0];
    p->batch = x->dims[layout ? 0 : 1];
    p->input_size = x->dims[2];
    int gates = cell_gates(cell);
    int64_t hidden = node_attr_int(n, "hidden_size", -1);
    if (hidden < 0) {
        if (w->dims[1] % gates)
            return diag_node_error(d, FX_ERR_SHAPE, n,
                                   "W %s: its rows are not %d gates of hidden_size",
                                   type_format(w, sw, sizeof sw), gates);
        hidden = w->dims[1] / gates;
    }
    if (hidden < 1)
        return diag_node_error(d, FX_ERR_INVALID, n, "hidden_size %lld is not positive",
                               (long long)hidden);
    p->hidden_size = hidden;
    int64_t D = p->directions, S = p->seq_length, B = p->batch, H = hidden, GH = gates * H;
    const int64_t wd[3] = {D, GH, p->input_size}, rd[3] = {D, GH, H}, bd[2] = {D, 2 * GH},
                  ld[1] = {B}, sd[3] = {layout ? B : D, layout ? D : B, H}, pd[2] = {D, 3 * H};
    FxStatus st;
    if ((st = check_type(n, d, w, "W", FXRT_DTYPE_FLOAT32, 3, wd)) != FX_OK ||
        (st = check_type(n, d, r, "R", FXRT_DTYPE_FLOAT32, 3, rd)) != FX_OK ||
        (t[IN_B] && (st = check_type(n, d, t[IN_B], "B", FXRT_DTYPE_FLOAT32, 2, bd)) != FX_OK) ||
        (t[IN_SEQ_LENS] && (st = check_type(n, d, t[IN_SEQ_LENS], "sequence_lens",
                                            FXRT_DTYPE_INT32, 1, ld)) != FX_OK) ||
        (t[IN_INITIAL_H] && (st = check_type(n, d, t[IN_INITIAL_H], "initial_h",
                                             FXRT_DTYPE_FLOAT32, 3, sd)) != FX_OK) ||
        (t[IN_INITIAL_C] && (st = check_type(n, d, t[IN_INITIAL_C], "initial_c",
                                             FXRT_DTYPE_FLOAT32, 3, sd)) != FX_OK) ||
        (t[IN_P] && (st = check_type(n, d, t[IN_P], "P", FXRT_DTYPE_FLOAT32, 2, pd)) != FX_OK))
        return st;

    Attr *clip = node_attr(n, "clip");
    p->clip = clip ? clip->f : 0.0f;
    if (clip && !(clip->f > 0.0f))
        return diag_node_error(d, FX_ERR_INVALID, n, "clip %g is not positive", (double)clip->f);
    p->input_forget = node_attr_int(n, "input_forget", 0) != 0;
    p->linear_before_reset = node_attr_int(n, "linear_before_reset", 0) != 0;

    Attr *acts = node_attr(n, "activations");
    int count = cell_functions(cell) * (int)D;
    if (!acts || acts->count != count)
        return diag_node_error(d, FX_ERR_INVALID, n, "expected %d activations", count);
    const float *alphas, *betas;
    int64_t num_alpha = node_attr_floats(n, "activation_alpha", &alphas);
    int64_t num_beta = node_attr_floats(n, "activation_beta", &betas);
    int64_t next_alpha = 0, next_beta = 0;
    for (int k = 0; k < count; k++) {
        int kind = 0;
        while (kind < NUM_ACTIVATIONS && !name_equal(acts->strings[k], activation_table[kind].name))
            kind++;
        if (kind == NUM_ACTIVATIONS)
            return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                                   "activation '%s' is not one of Relu, Tanh, Sigmoid, Affine, "
                                   "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, "
                                   "Softsign, Softplus",
                                   acts->strings[k]);
        FxrtRecurrentActivation *a = &p->act[k];
        a->kind = kind;
        a->alpha = activation_table[kind].alpha_default;
        a->beta = activation_table[kind].beta_default;
        if (activation_table[kind].alpha && next_alpha < num_alpha)
            a->alpha = alphas[next_alpha++];
        if (activation_table[kind].beta && next_beta < num_beta)
            a->beta = betas[next_beta++];
    }

    int max_out = cell == FXRT_CELL_LSTM ? 3 : 2;
    if (num_out > max_out)
        return diag_node_error(d, FX_ERR_INVALID, n, "%s has at most %d outputs, not %d",
                               n->op->name, max_out, num_out);
    for (int k = 0; k < num_out; k++) {
        out[k] = (TensorType){.dtype = FXRT_DTYPE_FLOAT32, .rank = k == 0 ? 4 : 3};
        if (k == 0) {
            const int64_t y0[4] = {S, D, B, H}, y1[4] = {B, S, D, H};
            memcpy(out[k].dims, layout ? y1 : y0, sizeof y0);
        } else {
            memcpy(out[k].dims, sd, sizeof sd);
        }
    }
    uint64_t floats = (uint64_t)fxrt_recurrent_scratch_floats(p), bytes;
    uint64_t xw;
    if (!size_mul_ok((uint64_t)S * (uint64_t)B, (uint64_t)GH, &xw) ||
        !size_mul_ok(floats, sizeof(float), &bytes) || bytes > FX_MAX_TENSOR_BYTES)
        return diag_node_error(d, FX_ERR_NOMEM, n,
                               "the layer's scratch (%lld steps x %lld sequences x %lld gate "
                               "rows) is beyond the limits",
                               (long long)S, (long long)B, (long long)GH);
    return FX_OK;
}

static FxStatus recurrent_infer(InferCtx *c)
{
    FxrtRecurrent p;
    return recurrent_plan(c->node, c->diag, c->in, c->num_inputs, c->num_outputs, c->out, &p);
}

static const void *eval_data(const EvalCtx *c, int i)
{
    return i < c->num_inputs && c->in[i] ? c->in[i]->data : NULL;
}

static FxStatus recurrent_eval(EvalCtx *c)
{
    const TensorType *types[8] = {0};
    for (int i = 0; i < c->num_inputs && i < 8; i++)
        types[i] = c->in[i] ? &c->in[i]->type : NULL;
    TensorType out[3];
    FxrtRecurrent p;
    FxStatus st = recurrent_plan(c->node, c->diag, types, c->num_inputs, c->num_outputs, out, &p);
    if (st != FX_OK)
        return st;
    int64_t floats = fxrt_recurrent_scratch_floats(&p);
    float *scratch = fx_alloc_array(floats > 0 ? (size_t)floats : 1, sizeof *scratch);
    if (!scratch)
        return diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
    float *outs[3] = {NULL, NULL, NULL};
    for (int k = 0; k < c->num_outputs && k < 3; k++)
        outs[k] = c->out[k]->data;
    int rc = fxrt_recurrent_f32(&p, eval_data(c, IN_X), eval_data(c, IN_W), eval_data(c, IN_R),
                                eval_data(c, IN_B), eval_data(c, IN_SEQ_LENS),
                                eval_data(c, IN_INITIAL_H), eval_data(c, IN_INITIAL_C),
                                eval_data(c, IN_P), outs[0], outs[1], outs[2], scratch);
    free(scratch);
    if (rc != 0)
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node,
                               "a sequence_lens entry is outside [0, %lld]",
                               (long long)p.seq_length);
    return FX_OK;
}

static FxStatus node_plan(const Node *n, Diag *d, TensorType *out, FxrtRecurrent *p)
{
    const TensorType *types[8] = {0};
    for (int i = 0; i < n->num_args && i < 8; i++)
        types[i] = n->args[i] ? node_input_type(n, i) : NULL;
    return recurrent_plan(n, d, types, n->num_args, n->num_outputs, out, p);
}

/* Output k is read: the node itself when it has one output, else a
 * getitem of index k. */
static bool output_read(const Node *n, int k)
{
    if (n->num_outputs == 1)
        return k == 0;
    for (int u = 0; u < n->num_users; u++)
        if (n->users[u]->op == &fx_op_getitem && n->users[u]->index == k)
            return true;
    return false;
}

static FxStatus recurrent_emit(EmitCtx *c)
{
    const Node *n = c->node;
    TensorType out[3];
    FxrtRecurrent p;
    FxStatus st = node_plan(n, c->diag, out, &p);
    if (st != FX_OK)
        return st;
    static const char *const cells[] = {"FXRT_CELL_RNN", "FXRT_CELL_LSTM", "FXRT_CELL_GRU"};
    char clip[48];
    emit_line(c, "static const FxrtRecurrent p = {");
    emit_line(c, "    .cell = %s, .directions = %d, .reverse = %d, .batch_first = %d,",
              cells[p.cell], (int)p.directions, (int)p.reverse, (int)p.batch_first);
    emit_line(c, "    .seq_length = %lld, .batch = %lld, .input_size = %lld, .hidden_size = %lld,",
              (long long)p.seq_length, (long long)p.batch, (long long)p.input_size,
              (long long)p.hidden_size);
    emit_line(c, "    .clip = %s, .input_forget = %d, .linear_before_reset = %d,",
              c_float_literal(p.clip, clip, sizeof clip), (int)p.input_forget,
              (int)p.linear_before_reset);
    emit_line(c, "    .act = {");
    int count = cell_functions((FxrtRecurrentCell)p.cell) * (int)p.directions;
    for (int k = 0; k < count; k++) {
        char alpha[48], beta[48];
        emit_line(c, "        {%s, %s, %s},", activation_table[p.act[k].kind].c_name,
                  c_float_literal(p.act[k].alpha, alpha, sizeof alpha),
                  c_float_literal(p.act[k].beta, beta, sizeof beta));
    }
    emit_line(c, "    }};");
    const char *opt[8];
    for (int i = 0; i < 8; i++) {
        const char *e = nn_emit_input(c, i);
        opt[i] = e ? e : "NULL";
    }
    const char *outs[3] = {"NULL", "NULL", "NULL"};
    for (int k = 0; k < c->num_outputs && k < 3; k++)
        if (output_read(n, k))
            outs[k] = c->out[k];
    emit_line(c, "if (fxrt_recurrent_f32(&p, %s, %s, %s,", opt[IN_X], opt[IN_W], opt[IN_R]);
    emit_line(c, "                       /*b=*/%s, /*sequence_lens=*/%s,", opt[IN_B],
              opt[IN_SEQ_LENS]);
    emit_line(c, "                       /*initial_h=*/%s, /*initial_c=*/%s, /*p=*/%s,",
              opt[IN_INITIAL_H], opt[IN_INITIAL_C], opt[IN_P]);
    emit_line(c, "                       /*y=*/%s, /*y_h=*/%s, /*y_c=*/%s,", outs[0], outs[1],
              outs[2]);
    emit_line(c, "                       (float *)(%s)) != 0)", c->scratch);
    emit_line(c, "    return 1;");
    return FX_OK;
}

static size_t recurrent_scratch(const Node *n)
{
    Diag quiet;
    diag_init(&quiet);
    TensorType out[3];
    FxrtRecurrent p;
    FxStatus st = node_plan(n, &quiet, out, &p);
    diag_free(&quiet);
    return st == FX_OK ? (size_t)fxrt_recurrent_scratch_floats(&p) * sizeof(float) : 0;
}

#define RECURRENT_ATTRS                                 \
    {"activation_alpha", FX_ATTR_FLOATS, NULL, false}, \
    {"activation_beta", FX_ATTR_FLOATS, NULL, false},  \
    {"activations", FX_ATTR_STRINGS, NULL, false},     \
    {"clip", FX_ATTR_FLOAT, NULL, false},              \
    {"direction", FX_ATTR_STRING, "forward", false},   \
    {"hidden_size", FX_ATTR_INT, NULL, false},         \
    {"layout", FX_ATTR_INT, "0", false}

static const AttrSpec rnn_attrs[] = {RECURRENT_ATTRS, {NULL}};
static const AttrSpec lstm_attrs[] = {RECURRENT_ATTRS, {"input_forget", FX_ATTR_INT, "0", false},
                                      {NULL}};
static const AttrSpec gru_attrs[] = {
    RECURRENT_ATTRS, {"linear_before_reset", FX_ATTR_INT, "0", false}, {NULL}};

const OpDef fx_op_RNN = {
    .name = "RNN",
    .min_inputs = 3, .max_inputs = 6, .min_outputs = 1, .max_outputs = 2,
    .attrs = rnn_attrs,
    .canonicalize = recurrent_canonicalize,
    .infer = recurrent_infer,
    .eval = recurrent_eval,
    .scratch_bytes = recurrent_scratch,
    .emit = recurrent_emit,
};

const OpDef fx_op_LSTM = {
    .name = "LSTM",
    .min_inputs = 3, .max_inputs = 8, .min_outputs = 1, .max_outputs = 3,
    .attrs = lstm_attrs,
    .canonicalize = recurrent_canonicalize,
    .infer = recurrent_infer,
    .eval = recurrent_eval,
    .scratch_bytes = recurrent_scratch,
    .emit = recurrent_emit,
};

const OpDef fx_op_GRU = {
    .name = "GRU",
    .min_inputs = 3, .max_inputs = 6, .min_outputs = 1, .max_outputs = 2,
    .attrs = gru_attrs,
    .canonicalize = recurrent_canonicalize,
    .infer = recurrent_infer,
    .eval = recurrent_eval,
    .scratch_bytes = recurrent_scratch,
    .emit = recurrent_emit,
};
