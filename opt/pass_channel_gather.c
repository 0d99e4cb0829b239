/*
 * pass_channel_gather.c - channel shuffles as views: every chain of
 * channel data movement that a real op reads becomes one ChannelGather
 * (ir/ops/channel_gather.c), a single copy from the values the chain
 * started from.
 *
 * ShuffleNet-v2 moves channels four or five times per unit after the
 * layout pass: FromNCHWc of the branch's last convolution, Concat with the
 * untouched half, the channel shuffle (Reshape [N, G, C/G, H, W],
 * Transpose [0, 2, 1, 3, 4], Reshape back), the next unit's two Slices and
 * a ToNCHWc in front of its first convolution.  None of them computes; each
 * output channel is some channel of a convolution's output.  So the pass
 * follows the chain back from a movement node that something other than
 * movement reads (or the graph returns) to the values that are not
 * movement, composes one channel map on the way, and gives those readers a
 * ChannelGather of exactly the channels they read, in the layout (plain or
 * NCHWc) the last node of the chain wrote.  The movement nodes no one reads
 * any more are left to dead-code elimination; a movement node that other
 * movement reads keeps being composed through, never copied.
 *
 * Movement here is, on float32 [N, C, H, W] (blocked: [N, CB, H, W, 8]):
 * Slice along axis 1 with constant starts and ends and step 1, Concat along
 * axis 1, the channel shuffle above for any group count (its first Reshape
 * and its Transpose read only by the next step), FromNCHWc and ToNCHWc.  A
 * chain is rewritten when it holds two or more such nodes and the gather
 * writes no more bytes than the chain's nodes did, a batch-1 Concat counted
 * as free (the planner has its inputs written in place: codegen/plan.c,
 * place_concats), so that a Concat of one Slice and a computed value keeps
 * its in-place form.  A map that turns out to be a whole value unchanged
 * (ToNCHWc of FromNCHWc, a Slice of all of a Concat's first input) is that
 * value: its readers read it directly.  Anything else (other dtypes, other
 * axes, steps, values only known at run time) ends a chain as its source.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/ops/ops.h"
#include "opt.h"

#define BLOCK FXRT_NCHWC_BLOCK

/* Guards against pathological graphs: the recursion depth of one chain and
 * the inputs of one gather. */
enum { MAX_DEPTH = 256, MAX_SOURCES = 64 };

typedef enum Movement {
    NOT_MOVEMENT,
    SLICE,
    CONCAT,
    BLOCKED_CONCAT,
    SHUFFLE,
    FROM_NCHWC,
    TO_NCHWC
} Movement;

/* The kinds whose output is NCHWc. */
static bool writes_blocked(Movement m) { return m == TO_NCHWC || m == BLOCKED_CONCAT; }

static bool is_f32_rank(const TensorType *t, int rank)
{
    return t && t->dtype == FXRT_DTYPE_FLOAT32 && t->rank == rank;
}

static bool is_view(const Node *n)
{
    return n && n->opcode == FX_OPCODE_CALL_METHOD && n->op && (n->op->flags & FX_OPF_VIEW) &&
           n->num_args >= 1 && n->args[0];
}

/* The first channel a Slice keeps, or -1 when it is not a constant,
 * step-1 slice of axis 1 alone. */
static int64_t slice_start(const Node *n)
{
    const TensorType *x = node_input_type(n, 0), *y = &n->out_types[0];
    if (!is_f32_rank(x, 4) || n->num_args < 3)
        return -1;
    for (int d = 0; d < 4; d++)
        if (d != 1 && x->dims[d] != y->dims[d])
            return -1;
    const Tensor *starts = node_const_value(n->args[1]);
    const Tensor *axes = n->num_args > 3 && n->args[3] ? node_const_value(n->args[3]) : NULL;
    const Tensor *steps = n->num_args > 4 && n->args[4] ? node_const_value(n->args[4]) : NULL;
    if (!starts || !node_const_value(n->args[2]) || (n->num_args > 3 && n->args[3] && !axes) ||
        (n->num_args > 4 && n->args[4] && !steps))
        return -1;
    int64_t start = 0;
    for (int64_t i = 0; i < tensor_numel(starts); i++) {
        int64_t axis = axes ? tensor_get_int(axes, i) : i;
        if (steps && tensor_get_int(steps, i) != 1)
            return -1;
        if (axis == 1 || axis == -3) {
            int64_t dim = x->dims[1];
            start = tensor_get_int(starts, i);
            start = start < 0 ? start + dim : start;
            start = start < 0 ? 0 : start > dim ? dim : start;
        }
    }
    return start;
}

/* The Reshape -> Transpose [0, 2, 1, 3, 4] -> Reshape that n ends, with
 * its group count; the first two read only by the next step. */
static bool shuffle_groups(const Node *n, int64_t *groups)
{
    if (!is_view(n))
        return false;
    const Node *t = n->args[0];
    const int64_t *perm;
    static const int64_t swap12[5] = {0, 2, 1, 3, 4};
    if (!node_is_op(t, &fx_op_Transpose) || t->num_users != 1 || !t->args[0] ||
        node_attr_ints(t, "perm", &perm) != 5 || memcmp(perm, swap12, sizeof swap12) != 0 ||
        !is_view(t->args[0]) || t->args[0]->num_users != 1)
        return false;
    const Node *r = t->args[0];
    const TensorType *x = node_input_type(r, 0), *split = &r->out_types[0];
    const TensorType *y = &n->out_types[0];
    if (!is_f32_rank(x, 4) || !is_f32_rank(split, 5) || !type_equal(x, y))
        return false;
    const int64_t *xd = x->dims, *sd = split->dims;
    *groups = sd[1];
    return sd[0] == xd[0] && sd[1] * sd[2] == xd[1] && sd[3] == xd[2] && sd[4] == xd[3];
}

/* What kind of channel movement n is (NOT_MOVEMENT when none this pass
 * can compose). */
static Movement movement_of(const Node *n)
{
    if (!node_is_call(n) || n->num_outputs != 1 || !n->shapes_known || n->num_args < 1 ||
        !n->args[0])
        return NOT_MOVEMENT;
    const TensorType *y = &n->out_types[0];
    int64_t groups;
    if (node_is_op(n, &fx_op_ToNCHWc))
        return is_f32_rank(node_input_type(n, 0), 4) ? TO_NCHWC : NOT_MOVEMENT;
    if (node_is_op(n, &fx_op_FromNCHWc))
        return is_f32_rank(y, 4) ? FROM_NCHWC : NOT_MOVEMENT;
    if (node_is_op(n, &fx_op_Concat) && is_f32_rank(y, 5)) {
        /* The layout pass's blocked Concat: every input but the last fills
         * its blocks, so the real channels are side by side. */
        int64_t axis = node_attr_int(n, "axis", 0);
        for (int i = 0; i < n->num_args; i++)
            if (!n->args[i] || !is_f32_rank(node_input_type(n, i), 5) ||
                node_input_type(n, i)->dims[4] != BLOCK)
                return NOT_MOVEMENT;
        return axis == 1 || axis == -4 ? BLOCKED_CONCAT : NOT_MOVEMENT;
    }
    if (!is_f32_rank(y, 4) || y->dims[1] == 0)
        return NOT_MOVEMENT;
    if (node_is_op(n, &fx_op_Slice))
        return slice_start(n) >= 0 ? SLICE : NOT_MOVEMENT;
    if (node_is_op(n, &fx_op_Concat)) {
        int64_t axis = node_attr_int(n, "axis", 0);
        for (int i = 0; i < n->num_args; i++)
            if (!n->args[i] || !is_f32_rank(node_input_type(n, i), 4))
                return NOT_MOVEMENT;
        return axis == 1 || axis == -3 ? CONCAT : NOT_MOVEMENT;
    }
    return shuffle_groups(n, &groups) ? SHUFFLE : NOT_MOVEMENT;
}

/* Whether user u of v only moves v's channels on: a movement node reading
 * v as data, or the first Reshape of a channel shuffle of v. */
static bool moves_on(const Node *u, const Node *v)
{
    Movement m = movement_of(u);
    if (m != NOT_MOVEMENT && m != SHUFFLE)
        return m == CONCAT || m == BLOCKED_CONCAT || u->args[0] == v;
    if (!is_view(u) || u->args[0] != v || u->num_users != 1 || u->users[0]->num_users != 1)
        return false;
    return movement_of(u->users[0]->users[0]) == SHUFFLE;
}

/* --- composing a chain ---------------------------------------------------- */

typedef struct Source {
    Node *node;
    int64_t channels;
    bool blocked;
} Source;

/* One chain being composed: its distinct sources, the movement nodes it
 * went through (each counted once: pass_data holds the chain's stamp) and
 * the bytes they wrote. */
typedef struct Chain {
    Source sources[MAX_SOURCES];
    int num_sources;
    int movements;
    int64_t bytes_written;
    intptr_t stamp;
    bool failed; /* out of memory */
} Chain;

static int64_t f32_bytes(const TensorType *t) { return type_numel(t) * (int64_t)sizeof(float); }

/* The index of source (node, channels, blocked) in c, added if new; -1
 * when it cannot be one (too many, or the node read with two channel
 * counts). */
static int source_index(Chain *c, Node *node, int64_t channels, bool blocked)
{
    for (int k = 0; k < c->num_sources; k++)
        if (c->sources[k].node == node)
            return c->sources[k].channels == channels && c->sources[k].blocked == blocked ? k : -1;
    if (c->num_sources == MAX_SOURCES || channels > INT32_MAX)
        return -1;
    c->sources[c->num_sources] = (Source){node, channels, blocked};
    return c->num_sources++;
}

/* Counts movement node n into c's totals once. */
static void count_movement(Chain *c, Node *n, Movement m)
{
    if (n->pass_data == (void *)c->stamp)
        return;
    n->pass_data = (void *)c->stamp;
    c->movements++;
    bool concat_in_place = m == CONCAT && n->out_types[0].dims[0] == 1;
    if (!concat_in_place)
        c->bytes_written += f32_bytes(&n->out_types[0]);
}

/* The real channel count of a value v read as the channel data of a
 * movement node: a plain value's dims[1], ToNCHWc's input's. */
static int64_t plain_channels(const Node *v) { return v->out_types[0].dims[1]; }

static bool compose(Chain *c, Node *v, int64_t channels, bool blocked, int depth,
                    int64_t *from_input, int64_t *from_channel);

/* Composes the map of v, which has `count` channels, into freshly
 * allocated arrays (NULL when it failed; c->failed on out of memory). */
static bool compose_alloc(Chain *c, Node *v, int64_t count, bool blocked, int depth,
                          int64_t **from_input, int64_t **from_channel)
{
    *from_input = fx_alloc_array((size_t)count, sizeof **from_input);
    *from_channel = fx_alloc_array((size_t)count, sizeof **from_channel);
    if (!*from_input || !*from_channel) {
        c->failed = true;
        return false;
    }
    return compose(c, v, count, blocked, depth, *from_input, *from_channel);
}

/* Channel k of a shuffle's output, of `channels` in `groups` groups, is
 * channel shuffled_from(k) of its input. */
static int64_t shuffled_from(int64_t k, int64_t channels, int64_t groups)
{
    return k % groups * (channels / groups) + k / groups;
}

/* Fills from_input/from_channel with where each of v's `channels` channels
 * comes from (v is plain unless blocked, with that many real channels);
 * false when the chain cannot be composed. */
static bool compose(Chain *c, Node *v, int64_t channels, bool blocked, int depth,
                    int64_t *from_input, int64_t *from_channel)
{
    Movement m = depth < MAX_DEPTH ? movement_of(v) : NOT_MOVEMENT;
    if (writes_blocked(m) != blocked)
        m = NOT_MOVEMENT;
    if (m == NOT_MOVEMENT) {
        int k = source_index(c, v, channels, blocked);
        for (int64_t i = 0; i < channels; i++) {
            from_input[i] = k;
            from_channel[i] = i;
        }
        return k >= 0;
    }
    count_movement(c, v, m);
    Node *x = v->args[0];
    int64_t *in_input = NULL, *in_channel = NULL, groups = 1;
    bool ok = true;
    switch (m) {
    case TO_NCHWC:
        return compose(c, x, channels, false, depth + 1, from_input, from_channel);
    case FROM_NCHWC:
        /* A blocked Concat holds as many real channels as its reader says;
         * ToNCHWc as many as its input, of which FromNCHWc may drop some. */
        if (movement_of(x) != TO_NCHWC)
            return compose(c, x, channels, true, depth + 1, from_input, from_channel);
        ok = plain_channels(x->args[0]) >= channels &&
             compose_alloc(c, x, plain_channels(x->args[0]), true, depth + 1, &in_input,
                           &in_channel);
        for (int64_t i = 0; ok && i < channels; i++) {
            from_input[i] = in_input[i];
            from_channel[i] = in_channel[i];
        }
        break;
    case CONCAT:
        for (int i = 0, at = 0; ok && i < v->num_args; i++) {
            int64_t part = plain_channels(v->args[i]);
            ok = compose(c, v->args[i], part, false, depth + 1, from_input + at,
                         from_channel + at);
            at += part;
        }
        break;
    case BLOCKED_CONCAT:
        for (int i = 0, at = 0; ok && i < v->num_args; i++) {
            int64_t blocks = node_input_type(v, i)->dims[1];
            int64_t part = i + 1 < v->num_args ? blocks * BLOCK : channels - at;
            ok = part >= 1 && fxrt_nchwc_blocks(part) == blocks &&
                 compose(c, v->args[i], part, true, depth + 1, from_input + at,
                         from_channel + at);
            at += part;
        }
        break;
    case SLICE: {
        int64_t start = slice_start(v);
        ok = compose_alloc(c, x, plain_channels(x), false, depth + 1, &in_input, &in_channel);
        for (int64_t i = 0; ok && i < channels; i++) {
            from_input[i] = in_input[start + i];
            from_channel[i] = in_channel[start + i];
        }
        break;
    }
    case SHUFFLE: {
        Node *input = x->args[0]->args[0];
        shuffle_groups(v, &groups);
        ok = compose_alloc(c, input, channels, false, depth + 1, &in_input, &in_channel);
        for (int64_t i = 0; ok && i < channels; i++) {
            int64_t j = shuffled_from(i, channels, groups);
            from_input[i] = in_input[j];
            from_channel[i] = in_channel[j];
        }
        break;
    }
    case NOT_MOVEMENT:
        break;
    }
    free(in_input);
    free(in_channel);
    return ok;
}

/* --- rewriting --------------------------------------------------------------- */

/* Whether the map is all of source 0 in order, in the layout the reader
 * wants. */
static bool is_whole_source(const Chain *c, const int64_t *from_input,
                            const int64_t *from_channel, int64_t channels, bool blocked)
{
    if (c->num_sources != 1 || c->sources[0].channels != channels ||
        c->sources[0].blocked != blocked)
        return false;
    for (int64_t i = 0; i < channels; i++)
        if (from_input[i] != 0 || from_channel[i] != i)
            return false;
    return true;
}

static Node *make_gather(Graph *g, Node *m, const Chain *c, const int64_t *from_input,
                         const int64_t *from_channel, int64_t channels, bool blocked, Diag *d)
{
    Node *args[MAX_SOURCES];
    int64_t input_channels[MAX_SOURCES];
    for (int k = 0; k < c->num_sources; k++) {
        args[k] = c->sources[k].node;
        input_channels[k] = c->sources[k].channels;
    }
    char hint[200];
    snprintf(hint, sizeof hint, "%s_gather", m->name);
    Node *gather = graph_create_op(g, m->next, &fx_op_ChannelGather, hint, args, c->num_sources);
    if (!gather)
        return diag_node_error(d, FX_ERR_NOMEM, m, "out of memory"), NULL;
    bool set = node_set_attr_ints(gather, "from_input", from_input, channels) &&
               node_set_attr_ints(gather, "from_channel", from_channel, channels) &&
               node_set_attr_ints(gather, "input_channels", input_channels, c->num_sources) &&
               node_set_attr_int(gather, "blocked", blocked);
    return node_finish_created(gather, set, m, d) == FX_OK ? gather : NULL;
}

/* Gives m's readers that are not movement `repl` instead; *changed when
 * there were any. */
static FxStatus redirect_readers(Node *m, Node *repl, Diag *d)
{
    Node **readers = fx_alloc_array((size_t)m->num_users, sizeof *readers);
    if (!readers)
        return diag_node_error(d, FX_ERR_NOMEM, m, "out of memory");
    int count = 0;
    for (int k = 0; k < m->num_users; k++)
        if (!moves_on(m->users[k], m))
            readers[count++] = m->users[k];
    FxStatus st = FX_OK;
    for (int k = 0; k < count && st == FX_OK; k++)
        if (node_replace_input_with(readers[k], m, repl) < 0)
            st = diag_node_error(d, FX_ERR_NOMEM, m, "out of memory");
    free(readers);
    return st;
}

static bool has_reader(const Node *m, bool *graph_output)
{
    bool any = false;
    *graph_output = false;
    for (int k = 0; k < m->num_users; k++) {
        const Node *u = m->users[k];
        if (!moves_on(u, m)) {
            any = true;
            *graph_output |= u->opcode == FX_OPCODE_OUTPUT;
        }
    }
    return any;
}

/* Rewrites the chain that movement node m ends, when that pays. */
static FxStatus rewrite_chain(Graph *g, Node *m, intptr_t stamp, bool *changed, Diag *d)
{
    bool graph_output;
    /* A blocked Concat's real channels are known only to its readers: it is
     * composed through, never rewritten. */
    if (movement_of(m) == BLOCKED_CONCAT || !has_reader(m, &graph_output))
        return FX_OK;
    bool blocked = movement_of(m) == TO_NCHWC;
    int64_t channels = blocked ? plain_channels(m->args[0]) : m->out_types[0].dims[1];
    Chain c = {.stamp = stamp};
    int64_t *from_input = NULL, *from_channel = NULL;
    bool composed = compose_alloc(&c, m, channels, blocked, 0, &from_input, &from_channel);
    FxStatus st = FX_OK;
    if (c.failed)
        st = diag_node_error(d, FX_ERR_NOMEM, m, "out of memory");
    else if (composed && is_whole_source(&c, from_input, from_channel, channels, blocked) &&
             !graph_output)
        st = redirect_readers(m, c.sources[0].node, d);
    else if (composed && c.movements >= 2 && f32_bytes(&m->out_types[0]) <= c.bytes_written) {
        Node *gather = make_gather(g, m, &c, from_input, from_channel, channels, blocked, d);
        st = gather ? redirect_readers(m, gather, d) : FX_ERR_NOMEM;
    } else
        composed = false;
    *changed = st == FX_OK && composed;
    free(from_input);
    free(from_channel);
    return st;
}

FxStatus pass_channel_gather(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    graph_for_each(g, n) n->pass_data = NULL;
    FxStatus st = FX_OK;
    intptr_t stamp = 0;
    graph_for_each(g, n)
    {
        bool changed = false;
        if (st != FX_OK)
            break;
        if (movement_of(n) == NOT_MOVEMENT)
            continue;
        st = rewrite_chain(g, n, ++stamp, &changed, d);
        r->changes += changed;
    }
    return pass_finish(g, r, st);
}
