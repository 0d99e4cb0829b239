/*
 * channel_gather.c - ChannelGather, the one copy that stands for a chain of
 * channel data movement (opt/pass_channel_gather.c): channel Slices,
 * Concats, channel shuffles and the NCHWc reorders, composed.
 *
 *   ChannelGather(X0, X1, ...; from_input, from_channel, input_channels, blocked)
 *     -> [N, C, H, W], or NCHWc [N, ceil(C/8), H, W, 8] when blocked
 *
 * Every input is float32 [N, C_i, H, W] or NCHWc [N, ceil(C_i/8), H, W, 8],
 * C_i = input_channels[i] (the real count, which a blocked shape rounds
 * up, as FromNCHWc's `channels`).  Output channel c is channel
 * from_channel[c] of input from_input[c]; C is the length of both lists.
 * A blocked output has zeros in its padding lanes (as ToNCHWc writes), and
 * no padding lane of an input is ever read: infer refuses an index past an
 * input's real channels.  Eval and the generated code call
 * fxrt_channel_gather_f32.
 */
#include <stdlib.h>

#include "ops.h"

#define BLOCK FXRT_NCHWC_BLOCK

/* The attribute lists, as infer checked them. */
typedef struct GatherMap {
    const int64_t *from_input, *from_channel, *input_channels;
    int64_t channels;
} GatherMap;

static void gather_map(const Node *n, GatherMap *m)
{
    m->channels = node_attr_ints(n, "from_input", &m->from_input);
    node_attr_ints(n, "from_channel", &m->from_channel);
    node_attr_ints(n, "input_channels", &m->input_channels);
}

/* Input i holds `channels` real channels of an [N, H, W] image shared with
 * `first` (input 0's type). */
static FxStatus check_input(const Node *n, Diag *d, int i, const TensorType *t,
                            const TensorType *first, int64_t channels)
{
    char buf[128];
    if (!t)
        return diag_node_error(d, FX_ERR_INVALID, n, "input %d is missing", i);
    bool blocked = t->rank == 5;
    if (t->dtype != FXRT_DTYPE_FLOAT32 || (t->rank != 4 && !(blocked && t->dims[4] == BLOCK)))
        return diag_node_error(d, FX_ERR_SHAPE, n,
                               "input %d is %s; ChannelGather takes float32 [N, C, H, W] or "
                               "[N, CB, H, W, 8]", i, type_format(t, buf, sizeof buf));
    if (channels < 1 || channels > INT32_MAX ||
        t->dims[1] != (blocked ? fxrt_nchwc_blocks(channels) : channels))
        return diag_node_error(d, FX_ERR_SHAPE, n, "input %d (%s) does not hold %lld channels", i,
                               type_format(t, buf, sizeof buf), (long long)channels);
    int64_t first_h = first->dims[2], first_w = first->dims[3];
    if (t->dims[0] != first->dims[0] || t->dims[2] != first_h || t->dims[3] != first_w)
        return diag_node_error(d, FX_ERR_SHAPE, n,
                               "input %d (%s) is not an image of input 0's batch and size", i,
                               type_format(t, buf, sizeof buf));
    return FX_OK;
}

static FxStatus channel_gather_infer(InferCtx *c)
{
    const Node *n = c->node;
    GatherMap m;
    gather_map(n, &m);
    if (node_attr_ints(n, "input_channels", &m.input_channels) != c->num_inputs)
        return diag_node_error(c->diag, FX_ERR_INVALID, n,
                               "input_channels must give one count per input (%d)",
                               c->num_inputs);
    if (m.channels < 1 || node_attr_ints(n, "from_channel", &m.from_channel) != m.channels)
        return diag_node_error(c->diag, FX_ERR_INVALID, n,
                               "from_input and from_channel must give one entry per output "
                               "channel");
    FxStatus st;
    for (int i = 0; i < c->num_inputs; i++)
        if ((st = check_input(n, c->diag, i, c->in[i], c->in[0], m.input_channels[i])) != FX_OK)
            return st;
    for (int64_t k = 0; k < m.channels; k++) {
        int64_t i = m.from_input[k];
        if (i < 0 || i >= c->num_inputs || m.from_channel[k] < 0 ||
            m.from_channel[k] >= m.input_channels[i])
            return diag_node_error(c->diag, FX_ERR_INVALID, n,
                                   "output channel %lld reads channel %lld of input %lld, which "
                                   "does not exist", (long long)k, (long long)m.from_channel[k],
                                   (long long)i);
    }
    const int64_t *d = c->in[0]->dims;
    TensorType out = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 4,
                      .dims = {d[0], m.channels, d[2], d[3]}};
    if (node_attr_int(n, "blocked", 0)) {
        out.rank = 5;
        out.dims[1] = fxrt_nchwc_blocks(m.channels);
        out.dims[4] = BLOCK;
    }
    c->out[0] = out;
    return FX_OK;
}

static FxStatus channel_gather_eval(EvalCtx *c)
{
    GatherMap m;
    gather_map(c->node, &m);
    FxrtGatherSource *sources = fx_alloc_array((size_t)c->num_inputs, sizeof *sources);
    int32_t *from_input = fx_alloc_array((size_t)m.channels, sizeof *from_input);
    int32_t *from_channel = fx_alloc_array((size_t)m.channels, sizeof *from_channel);
    FxStatus st = FX_OK;
    if (!sources || !from_input || !from_channel) {
        st = diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
        goto done;
    }
    for (int i = 0; i < c->num_inputs; i++)
        sources[i] = (FxrtGatherSource){.x = c->in[i]->data,
                                        .channels = m.input_channels[i],
                                        .blocked = c->in[i]->type.rank == 5};
    for (int64_t k = 0; k < m.channels; k++) {
        from_input[k] = (int32_t)m.from_input[k];
        from_channel[k] = (int32_t)m.from_channel[k];
    }
    const int64_t *d = c->out[0]->type.dims;
    fxrt_channel_gather_f32(d[0], d[2] * d[3], sources, m.channels, from_input, from_channel,
                            c->out[0]->type.rank == 5, c->out[0]->data);
done:
    free(sources);
    free(from_input);
    free(from_channel);
    return st;
}

static FxStatus channel_gather_emit(EmitCtx *c)
{
    GatherMap m;
    gather_map(c->node, &m);
    const TensorType *y = &c->node->out_types[0];
    emit_line(c, "const FxrtGatherSource sources[%d] = {", c->num_inputs);
    for (int i = 0; i < c->num_inputs; i++)
        emit_line(c, "    {%s, /*channels=*/%lld, /*blocked=*/%d},", c->in[i],
                  (long long)m.input_channels[i], node_input_type(c->node, i)->rank == 5);
    emit_line(c, "};");
    emit_int32_array(c, "from_input", m.from_input, m.channels);
    emit_int32_array(c, "from_channel", m.from_channel, m.channels);
    emit_line(c,
              "fxrt_channel_gather_f32(/*batch=*/%lld, /*spatial=*/%lld, sources, "
              "/*channels=*/%lld, from_input, from_channel, /*y_blocked=*/%d, %s);",
              (long long)y->dims[0], (long long)(y->dims[2] * y->dims[3]), (long long)m.channels,
              y->rank == 5, c->out[0]);
    return FX_OK;
}

static const AttrSpec channel_gather_attrs[] = {
    {"from_input", FX_ATTR_INTS, NULL, true},
    {"from_channel", FX_ATTR_INTS, NULL, true},
    {"input_channels", FX_ATTR_INTS, NULL, true},
    {"blocked", FX_ATTR_INT, "0", false},
    {NULL},
};

const OpDef fx_op_ChannelGather = {
    .name = "ChannelGather",
    .min_inputs = 1, .max_inputs = -1, .min_outputs = 1, .max_outputs = 1,
    .flags = FX_OPF_INTERNAL,
    .attrs = channel_gather_attrs,
    .infer = channel_gather_infer,
    .eval = channel_gather_eval,
    .emit = channel_gather_emit,
};
