/*
 * pass_nchwc_layout.c - moves the activations between 2-D convolutions into
 * the channel-blocked layout NCHWc (runtime/fxrt_nn.h), so that they run
 * the NCHWc kernels: a vector of eight output channels per pixel instead of
 * a GEMM over an unfolded input, and depthwise convolutions eight channels
 * per instruction whatever the image's width.
 *
 * Every float32 2-D Conv or FusedConv with constant weights and bias whose
 * group is 1 or its channel count (depthwise) becomes a ConvNCHWc
 * (ir/ops/nchwc.c):
 *
 *     y = FusedConv(x, w, b, r)
 *  -> y = FromNCHWc(ConvNCHWc(ToNCHWc(x), pack(w), pad(b), ToNCHWc(r)))
 *
 * with the packed weights and the padded bias made here, once.  A layer
 * with fewer than eight input channels and group 1 (an image's first
 * convolution) reads its X in plain NCHW, which saves padding its input to
 * eight lanes.  The layers are visited in graph order and a ToNCHWc of a
 * value that is already FromNCHWc(v) is v itself: FromNCHWc drops only
 * padding lanes, and no kernel lets a padding lane reach a real channel
 * (packed weights and padded biases are zero there), so between two
 * convolutions no reorder is left.  MaxPool, AveragePool and
 * GlobalAveragePool of a value that is already blocked pool the blocks
 * (MaxPoolNCHWc...), so a pool between two convolutions does not leave the
 * layout either.  The FromNCHWc nodes nobody reads are dead; what remains
 * are the reorders at the edges of each region: from the model's input,
 * and before Gemm, Softmax, other ops or the output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/ops/ops.h"
#include "opt.h"

#define BLOCK FXRT_NCHWC_BLOCK

/* True when n is a convolution this pass rewrites; fills p. */
static bool convertible(const Node *n, FxrtConvParams *p)
{
    bool conv = node_is_op(n, &fx_op_Conv) ||
                (n->opcode == FX_OPCODE_CALL_MODULE && n->op == &fx_op_FusedConv);
    if (!conv || !fold_is_f32(n) || n->num_args < 2 || !n->args[0] ||
        node_input_type(n, 0)->rank != 4 || !node_const_value(n->args[1]))
        return false;
    if (n->num_args > 2 && n->args[2] && !node_const_value(n->args[2]))
        return false;
    Diag quiet;
    diag_init(&quiet);
    int64_t floats;
    FxStatus st = nn_conv_node_params(n, &quiet, p, &floats);
    diag_free(&quiet);
    return st == FX_OK &&
           (p->groups == 1 || (p->groups == p->in_channels && p->groups == p->out_channels));
}

/* A node of op `op` before `before`, to be completed by
 * node_finish_created once its attributes are set; NULL (d filled) on
 * failure. */
static Node *create_op(Graph *g, Node *before, const OpDef *op, const char *hint,
                       Node *const *args, int num_args, Diag *d)
{
    Node *n = op->flags & FX_OPF_MODULE ? graph_create_module(g, before, op, hint, args, num_args)
                                        : graph_create_op(g, before, op, hint, args, num_args);
    if (!n)
        diag_error(d, FX_ERR_NOMEM, "out of memory creating %s", op->name);
    return n;
}

/* v in NCHWc, read by `reader`: FromNCHWc(b) gives b, an existing ToNCHWc
 * of v is shared, else a ToNCHWc is made before reader. */
static Node *blocked(Graph *g, Node *v, Node *reader, Diag *d)
{
    if (node_is_op(v, &fx_op_FromNCHWc))
        return v->args[0];
    for (int i = 0; i < v->num_users; i++)
        if (node_is_op(v->users[i], &fx_op_ToNCHWc))
            return v->users[i];
    char hint[200];
    snprintf(hint, sizeof hint, "%s_nchwc", v->name);
    Node *b = create_op(g, reader, &fx_op_ToNCHWc, hint, &v, 1, d);
    return b && node_finish_created(b, true, NULL, d) == FX_OK ? b : NULL;
}

/* The packed weights (fxrt_nn.h) [OCB / 2][ICB][KH][KW][8][16],
 * [OCB / 2][KH][KW][C][16] (plain X) or [CB][KH][KW][8] (depthwise) as a
 * new constant. */
static Node *packed_weights(Graph *g, const Node *conv, const FxrtConvParams *p, int x_blocked,
                            Diag *d)
{
    int64_t ocb = fxrt_nchwc_blocks(p->out_channels), kh = p->kernel[1], kw = p->kernel[2];
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32};
    int64_t dims[6], rank = 0;
    dims[rank++] = p->groups == 1 ? (ocb + 1) / 2 : ocb;
    if (p->groups == 1 && x_blocked)
        dims[rank++] = fxrt_nchwc_blocks(p->in_channels);
    dims[rank++] = kh;
    dims[rank++] = kw;
    if (p->groups == 1)
        dims[rank++] = x_blocked ? BLOCK : p->in_channels;
    dims[rank++] = p->groups == 1 ? FXRT_NCHWC_PAIR : BLOCK;
    t.rank = (int)rank;
    memcpy(t.dims, dims, (size_t)rank * sizeof dims[0]);
    Tensor *w = tensor_new(&t, d);
    if (!w)
        return NULL;
    fxrt_conv_nchwc_pack_f32(p, x_blocked, node_const_value(conv->args[1])->data, w->data);
    char hint[200];
    snprintf(hint, sizeof hint, "%s_packed", conv->args[1]->name);
    return graph_create_constant(g, NULL, hint, w, d);
}

/* The bias padded with zeros to whole blocks, or NULL (d untouched) when
 * conv has none. */
static Node *padded_bias(Graph *g, const Node *conv, const FxrtConvParams *p, Diag *d,
                         FxStatus *st)
{
    const Tensor *b = conv->num_args > 2 && conv->args[2] ? node_const_value(conv->args[2]) : NULL;
    if (!b)
        return NULL;
    TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1,
                    .dims = {fxrt_nchwc_blocks(p->out_channels) * BLOCK}};
    Tensor *padded = tensor_new(&t, d);
    if (!padded) {
        *st = FX_ERR_NOMEM;
        return NULL;
    }
    memset(padded->data, 0, tensor_nbytes(padded));
    memcpy(padded->data, b->data, (size_t)p->out_channels * sizeof(float));
    char hint[200];
    snprintf(hint, sizeof hint, "%s_padded", conv->args[2]->name);
    Node *c = graph_create_constant(g, NULL, hint, padded, d);
    if (!c)
        *st = FX_ERR_NOMEM;
    return c;
}

/* Copies src's attributes named in `names` (NULL: all of them). */
static bool copy_attrs(Node *dst, const Node *src, const char *const *names, Diag *d)
{
    for (int i = 0; i < src->num_attrs; i++) {
        bool wanted = !names;
        for (int k = 0; names && names[k] && !wanted; k++)
            wanted = strcmp(names[k], src->attrs[i].name) == 0;
        if (wanted && !node_copy_attr(dst, &src->attrs[i], d))
            return false;
    }
    return true;
}

static const char *const epilogue_attrs[] = {"activation", "act_alpha", "act_beta",
                                             "residual_after", NULL};

/* Conv's attributes in p's terms; the end padding is the least that gives
 * p's output size. */
static bool set_geometry(Node *f, const FxrtConvParams *p)
{
    int64_t kernel[2], stride[2], dilation[2], pads[4];
    for (int i = 0; i < 2; i++) {
        int64_t span = (p->kernel[1 + i] - 1) * p->dilation[1 + i] + 1;
        int64_t end = (p->out_size[1 + i] - 1) * p->stride[1 + i] + span - p->in_size[1 + i] -
                      p->pad_begin[1 + i];
        kernel[i] = p->kernel[1 + i];
        stride[i] = p->stride[1 + i];
        dilation[i] = p->dilation[1 + i];
        pads[i] = p->pad_begin[1 + i];
        pads[2 + i] = end > 0 ? end : 0;
    }
    return node_set_attr_ints(f, "kernel_shape", kernel, 2) &&
           node_set_attr_ints(f, "strides", stride, 2) &&
           node_set_attr_ints(f, "dilations", dilation, 2) &&
           node_set_attr_ints(f, "pads", pads, 4) &&
           node_set_attr_int(f, "group", p->groups) &&
           node_set_attr_int(f, "in_channels", p->in_channels) &&
           node_set_attr_int(f, "out_channels", p->out_channels);
}

/* Makes `old`'s readers read FromNCHWc(blocked_value), `channels` wide. */
static FxStatus replace_by_blocked(Graph *g, Node *old, Node *blocked_value, int64_t channels,
                                   Diag *d)
{
    char hint[200];
    snprintf(hint, sizeof hint, "%s_nchw", old->name);
    Node *y = create_op(g, old, &fx_op_FromNCHWc, hint, &blocked_value, 1, d);
    if (!y)
        return FX_ERR_NOMEM;
    if (!node_set_attr_int(y, "channels", channels)) {
        graph_erase_node(g, y);
        return diag_node_error(d, FX_ERR_NOMEM, old, "out of memory");
    }
    FxStatus st = node_finish_created(y, true, NULL, d);
    if (st == FX_OK && node_replace_all_uses_with(old, y) < 0)
        st = diag_node_error(d, FX_ERR_NOMEM, old, "out of memory");
    return st;
}

static FxStatus convert_conv(Graph *g, Node *conv, const FxrtConvParams *p, Diag *d)
{
    int x_blocked = p->groups > 1 || p->in_channels >= BLOCK ||
                    node_is_op(conv->args[0], &fx_op_FromNCHWc);
    FxStatus st = FX_OK;
    Node *x = x_blocked ? blocked(g, conv->args[0], conv, d) : conv->args[0];
    Node *w = x ? packed_weights(g, conv, p, x_blocked, d) : NULL;
    Node *b = w ? padded_bias(g, conv, p, d, &st) : NULL;
    Node *r = NULL;
    if (w && st == FX_OK && conv->num_args > 3 && conv->args[3] &&
        !(r = blocked(g, conv->args[3], conv, d)))
        st = FX_ERR_NOMEM;
    if (!x || !w || st != FX_OK)
        return st != FX_OK ? st : FX_ERR_NOMEM;
    Node *args[4] = {x, w, b, r};
    char hint[200];
    snprintf(hint, sizeof hint, "%s_blocked", conv->name);
    Node *f = create_op(g, conv, &fx_op_ConvNCHWc, hint, args, r ? 4 : b ? 3 : 2, d);
    if (!f)
        return FX_ERR_NOMEM;
    if (!set_geometry(f, p) || !copy_attrs(f, conv, epilogue_attrs, d)) {
        graph_erase_node(g, f);
        return diag_node_error(d, FX_ERR_NOMEM, conv, "out of memory");
    }
    if ((st = node_finish_created(f, true, NULL, d)) != FX_OK)
        return st;
    return replace_by_blocked(g, conv, f, p->out_channels, d);
}

/* The NCHWc kind of pool n, when n pools a value that is already blocked. */
static const OpDef *blocked_pool(const Node *n)
{
    if (n->opcode != FX_OPCODE_CALL_FUNCTION || n->num_outputs != 1 || !fold_is_f32(n) ||
        !node_is_op(n->args[0], &fx_op_FromNCHWc))
        return NULL;
    if (n->op == &fx_op_MaxPool)
        return &fx_op_MaxPoolNCHWc;
    if (n->op == &fx_op_AveragePool)
        return &fx_op_AveragePoolNCHWc;
    if (n->op == &fx_op_GlobalAveragePool)
        return &fx_op_GlobalAveragePoolNCHWc;
    return NULL;
}

static FxStatus convert_pool(Graph *g, Node *pool, const OpDef *op, Diag *d)
{
    Node *x = pool->args[0]->args[0];
    char hint[200];
    snprintf(hint, sizeof hint, "%s_blocked", pool->name);
    Node *f = create_op(g, pool, op, hint, &x, 1, d);
    if (!f)
        return FX_ERR_NOMEM;
    if (!copy_attrs(f, pool, NULL, d)) {
        graph_erase_node(g, f);
        return diag_node_error(d, FX_ERR_NOMEM, pool, "out of memory");
    }
    FxStatus st = node_finish_created(f, true, NULL, d);
    if (st != FX_OK)
        return st;
    return replace_by_blocked(g, pool, f, node_input_type(pool, 0)->dims[1], d);
}

/* --- the ops that run unchanged on blocked values --------------------------
 *
 * A Concat along the channels and the elementwise ops read a blocked
 * [N, CB, H, W, 8] value as they read [N, C, H, W]: Concat of blocks is a
 * concatenation along CB when every input but the last fills its blocks,
 * and a per-channel operand [N, C, 1, 1] is [N, CB, 1, 1, 8] blocked, which
 * broadcasts the same way.  So these nodes keep their op and only change
 * their operands, and the region of blocked values goes on through them
 * (GoogLeNet's and DenseNet's concatenations, squeeze-and-excite's channel
 * scale, residual Adds that no epilogue took). */

/* Whether the op keeps padding lanes finite: f of finite values is finite.
 * A Div is safe only by a constant without zeros, Log, Sqrt, Reciprocal and
 * the like are not (a padding lane of 0 would give -inf or NaN, and the
 * next convolution multiplies it by a zero weight). */
static bool padding_safe(const Node *n)
{
    switch (op_kind(n->op)) {
    case FX_OP_Add:
    case FX_OP_Sub:
    case FX_OP_Mul:
    case FX_OP_Max:
    case FX_OP_Min:
    case FX_OP_Neg:
    case FX_OP_Abs:
    case FX_OP_Relu:
    case FX_OP_LeakyRelu:
    case FX_OP_Sigmoid:
    case FX_OP_Tanh:
    case FX_OP_HardSigmoid:
    case FX_OP_HardSwish:
    case FX_OP_Clip:
        return n->num_args <= 3;
    case FX_OP_Div: {
        const Tensor *t = n->num_args == 2 && n->args[1] ? node_const_value(n->args[1]) : NULL;
        if (!t || t->type.dtype != FXRT_DTYPE_FLOAT32)
            return false;
        for (int64_t i = 0; i < tensor_numel(t); i++)
            if (((const float *)t->data)[i] == 0.0f)
                return false;
        return true;
    }
    default:
        return false;
    }
}

/* An elementwise node the blocked layout can run: a padding-safe
 * call_function, or a FusedElementwise whose body holds only such ops. */
static bool blockable_elementwise(const Node *n)
{
    if (n->opcode == FX_OPCODE_CALL_FUNCTION)
        return padding_safe(n);
    if (n->opcode != FX_OPCODE_CALL_MODULE || n->op != &fx_op_FusedElementwise || !n->body)
        return false;
    for (const Node *b = n->body->root.next; b != &n->body->root; b = b->next)
        if (b->opcode == FX_OPCODE_CALL_FUNCTION && !padding_safe(b))
            return false;
    return true;
}

/* Whether t is a per-channel constant of out: [C, 1, 1] or [1, C, 1, 1],
 * C the channels of out (axis 1), every other dim 1. */
static bool per_channel(const Tensor *t, const TensorType *out)
{
    if (t->type.dtype != FXRT_DTYPE_FLOAT32 || t->type.rank > 4 || t->type.rank < 3)
        return false;
    for (int i = 0; i < t->type.rank; i++)
        if (t->type.dims[i] != (i == t->type.rank - 3 ? out->dims[1] : 1))
            return false;
    return true;
}

/* Per-channel constant t as a new blocked constant [1, CB, 1, 1, 8], zero in
 * the padding lanes. */
static Node *blocked_channel_constant(Graph *g, const Tensor *t, int64_t channels,
                                      const char *name, Diag *d)
{
    TensorType bt = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 5,
                     .dims = {1, fxrt_nchwc_blocks(channels), 1, 1, BLOCK}};
    Tensor *b = tensor_new(&bt, d);
    if (!b)
        return NULL;
    memset(b->data, 0, tensor_nbytes(b));
    memcpy(b->data, t->data, (size_t)channels * sizeof(float));
    char hint[200];
    snprintf(hint, sizeof hint, "%s_blocked", name);
    return graph_create_constant(g, NULL, hint, b, d);
}

/* Whether operand i of n (a Concat along axis 1, or a blockable elementwise
 * node with 4-D output out) can be read blocked: a blocked value, a scalar
 * constant, a per-channel constant (elementwise only) or a 4-D runtime
 * value to reorder; *anchor is set when it is a blocked value that fills
 * out's spatial dims. */
static bool operand_blockable(const Node *n, int i, bool concat, bool *anchor)
{
    const TensorType *out = &n->out_types[0];
    const Node *a = n->args[i];
    const TensorType *t = a ? node_input_type(n, i) : NULL;
    if (!t || t->dtype != FXRT_DTYPE_FLOAT32)
        return false;
    bool full = t->rank == 4 && t->dims[0] == out->dims[0] && t->dims[2] == out->dims[2] &&
                t->dims[3] == out->dims[3];
    const Tensor *k = node_const_value(a);
    if (concat)
        /* every input but the last fills its blocks */
        return full && !k && (i + 1 == n->num_args || t->dims[1] % BLOCK == 0) &&
               ((*anchor |= node_is_op(a, &fx_op_FromNCHWc)), true);
    if (k)
        return tensor_numel(k) == 1 || per_channel(k, out);
    if (t->rank != 4 || t->dims[1] != out->dims[1])
        return false;
    if (node_is_op(a, &fx_op_FromNCHWc)) {
        *anchor |= full;
        return true;
    }
    return full;
}

/* The blocked operands of n into args, or false (nothing made) when n
 * cannot run blocked: some operand must be a blocked value already. */
static bool blocked_operands(Graph *g, Node *n, bool concat, Node **args, Diag *d, FxStatus *st)
{
    bool anchored = false;
    for (int i = 0; i < n->num_args; i++)
        if (!operand_blockable(n, i, concat, &anchored))
            return false;
    if (!anchored)
        return false;
    for (int i = 0; i < n->num_args && *st == FX_OK; i++) {
        Node *a = n->args[i];
        const Tensor *k = node_const_value(a);
        if (node_is_op(a, &fx_op_FromNCHWc))
            args[i] = a->args[0];
        else if (k && tensor_numel(k) == 1)
            args[i] = a;
        else if (k)
            args[i] = blocked_channel_constant(g, k, n->out_types[0].dims[1], a->name, d);
        else
            args[i] = blocked(g, a, n, d);
        if (!args[i])
            *st = FX_ERR_NOMEM;
    }
    return *st == FX_OK;
}

static bool concat_along_channels(const Node *n)
{
    if (!node_is_op(n, &fx_op_Concat) || n->num_outputs != 1 || !fold_is_f32(n) ||
        n->out_types[0].rank != 4)
        return false;
    int64_t axis = node_attr_int(n, "axis", 0);
    return axis == 1 || axis == -3;
}

/* Makes n read blocked operands and produce a blocked value, which its old
 * readers see through a FromNCHWc; false (the graph unchanged but for
 * unused new constants and reorders, which dead-code elimination removes)
 * when n cannot. */
static FxStatus convert_in_place(Graph *g, Node *n, bool concat, bool *converted, Diag *d)
{
    *converted = false;
    if (n->num_outputs != 1 || !n->shapes_known || n->out_types[0].rank != 4 ||
        n->out_types[0].dtype != FXRT_DTYPE_FLOAT32 || n->num_args < 1)
        return FX_OK;
    FxStatus st = FX_OK;
    Node **args = fx_alloc_array((size_t)n->num_args, sizeof *args);
    Node **readers = fx_alloc_array((size_t)n->num_users + 1, sizeof *readers);
    if (!args || !readers) {
        free(args);
        free(readers);
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    }
    int num_readers = n->num_users;
    memcpy(readers, n->users, (size_t)num_readers * sizeof *readers);
    int64_t channels = n->out_types[0].dims[1];
    if (blocked_operands(g, n, concat, args, d, &st)) {
        for (int i = 0; i < n->num_args && st == FX_OK; i++)
            if (args[i] != n->args[i] && !node_set_arg(n, i, args[i]))
                st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        /* A fused body's types follow its arguments': inference retypes the
         * placeholders that are not known and propagates the rest. */
        for (Node *b = n->body ? n->body->root.next : NULL; b && b != &n->body->root; b = b->next)
            if (b->opcode != FX_OPCODE_GET_ATTR)
                b->shapes_known = false;
        if (st == FX_OK)
            st = node_infer_shapes(n, d);
        char hint[200];
        snprintf(hint, sizeof hint, "%s_nchw", n->name);
        Node *y = st == FX_OK ? create_op(g, n->next, &fx_op_FromNCHWc, hint, &n, 1, d) : NULL;
        if (st == FX_OK && !y)
            st = FX_ERR_NOMEM;
        if (st == FX_OK && !node_set_attr_int(y, "channels", channels))
            st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        if (st == FX_OK)
            st = node_finish_created(y, true, NULL, d);
        for (int r = 0; r < num_readers && st == FX_OK; r++)
            for (int i = 0; i < readers[r]->num_args && st == FX_OK; i++)
                if (readers[r]->args[i] == n && !node_set_arg(readers[r], i, y))
                    st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        *converted = st == FX_OK;
    }
    free(args);
    free(readers);
    return st;
}

/* --- channels-last blocks ---------------------------------------------------
 *
 * ConvNeXt-style blocks run their LayerNorm and Linear layers channels-last
 * between two Transposes:
 *
 *     t = Transpose(FromNCHWc(b), [0, 2, 3, 1]); u = LayerNorm(t) ...
 *     v = Transpose(w, [0, 3, 1, 2]); y = Add(v, residual)
 *
 * The first Transpose of a blocked value becomes one reorder,
 * NCHWcToNHWC(b), and a LayerNorm over its channels reads b itself
 * (LayerNormNCHWc), so the block's entry is one pass over the image instead
 * of three.  The Transpose back to channels-first becomes
 * FromNCHWc(NHWCToNCHWc(w)) when one of its readers runs blocked, so the
 * residual Add and the next convolution stay in NCHWc. */

/* Infers f's shapes and makes old's readers read f. */
static FxStatus finish_replacement(Node *old, Node *f, Diag *d)
{
    FxStatus st = node_finish_created(f, true, NULL, d);
    if (st == FX_OK && node_replace_all_uses_with(old, f) < 0)
        st = diag_node_error(d, FX_ERR_NOMEM, old, "out of memory");
    return st;
}

static bool transpose_with_perm(const Node *n, const int64_t want[4])
{
    const int64_t *perm;
    if (!node_is_op(n, &fx_op_Transpose) || n->num_outputs != 1 || !fold_is_f32(n) ||
        node_attr_ints(n, "perm", &perm) != 4)
        return false;
    for (int i = 0; i < 4; i++)
        if (perm[i] != want[i])
            return false;
    return true;
}

static const int64_t to_channels_last[4] = {0, 2, 3, 1}, to_channels_first[4] = {0, 3, 1, 2};

static FxStatus convert_to_channels_last(Graph *g, Node *t, Diag *d)
{
    Node *b = t->args[0]->args[0];
    char hint[200];
    snprintf(hint, sizeof hint, "%s_blocked", t->name);
    Node *f = create_op(g, t, &fx_op_NCHWcToNHWC, hint, &b, 1, d);
    if (!f)
        return FX_ERR_NOMEM;
    if (!copy_attrs(f, t->args[0], NULL, d)) {
        graph_erase_node(g, f);
        return diag_node_error(d, FX_ERR_NOMEM, t, "out of memory");
    }
    return finish_replacement(t, f, d);
}

/* A LayerNormalization over the channels of a channels-last view of a
 * blocked value, with per-channel Scale and B, and no statistics read. */
static bool layernorm_of_blocked(const Node *n)
{
    if (!node_is_op(n, &fx_op_LayerNormalization) || !fold_is_f32(n) ||
        !node_is_op(n->args[0], &fx_op_NCHWcToNHWC))
        return false;
    int64_t axis = node_attr_int(n, "axis", -1), channels = n->out_types[0].dims[3];
    if ((axis != -1 && axis != 3) || n->num_outputs != 1)
        return false;
    for (int i = 1; i < n->num_args; i++) {
        const TensorType *t = n->args[i] ? node_input_type(n, i) : NULL;
        if (t && (t->dtype != FXRT_DTYPE_FLOAT32 || type_numel(t) != channels))
            return false;
    }
    return true;
}

static FxStatus convert_layernorm(Graph *g, Node *ln, Diag *d)
{
    Node *args[3] = {ln->args[0]->args[0], ln->args[1], ln->num_args > 2 ? ln->args[2] : NULL};
    char hint[200];
    snprintf(hint, sizeof hint, "%s_blocked", ln->name);
    Node *f = create_op(g, ln, &fx_op_LayerNormNCHWc, hint, args, args[2] ? 3 : 2, d);
    if (!f)
        return FX_ERR_NOMEM;
    if (!copy_attrs(f, ln->args[0], NULL, d) ||
        !node_set_attr_float(f, "epsilon", node_attr_float(ln, "epsilon", 1e-5f))) {
        graph_erase_node(g, f);
        return diag_node_error(d, FX_ERR_NOMEM, ln, "out of memory");
    }
    return finish_replacement(ln, f, d);
}

/* Whether n would read a blocked value of its argument: a convolution this
 * pass rewrites, a pool, a Concat or an elementwise node that runs blocked. */
static bool reads_blocked(const Node *n)
{
    FxrtConvParams p;
    if (convertible(n, &p) || concat_along_channels(n) || blockable_elementwise(n))
        return true;
    return n->opcode == FX_OPCODE_CALL_FUNCTION && fold_is_f32(n) &&
           (n->op == &fx_op_MaxPool || n->op == &fx_op_AveragePool ||
            n->op == &fx_op_GlobalAveragePool);
}

static bool channels_first_for_blocked_reader(const Node *n)
{
    if (!transpose_with_perm(n, to_channels_first))
        return false;
    for (int i = 0; i < n->num_users; i++)
        if (reads_blocked(n->users[i]))
            return true;
    return false;
}

static FxStatus convert_to_channels_first(Graph *g, Node *t, Diag *d)
{
    char hint[200];
    snprintf(hint, sizeof hint, "%s_nchwc", t->name);
    Node *x = t->args[0];
    Node *b = create_op(g, t, &fx_op_NHWCToNCHWc, hint, &x, 1, d);
    if (!b)
        return FX_ERR_NOMEM;
    FxStatus st = node_finish_created(b, true, NULL, d);
    if (st != FX_OK)
        return st;
    return replace_by_blocked(g, t, b, t->out_types[0].dims[1], d);
}

FxStatus pass_nchwc_layout(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, n)
    {
        if (st != FX_OK)
            break;
        FxrtConvParams p;
        const OpDef *pool;
        bool concat = concat_along_channels(n), converted = true;
        if (convertible(n, &p))
            st = convert_conv(g, n, &p, d);
        else if ((pool = blocked_pool(n)))
            st = convert_pool(g, n, pool, d);
        else if (concat || blockable_elementwise(n))
            st = convert_in_place(g, n, concat, &converted, d);
        else if (transpose_with_perm(n, to_channels_last) &&
                 node_is_op(n->args[0], &fx_op_FromNCHWc))
            st = convert_to_channels_last(g, n, d);
        else if (layernorm_of_blocked(n))
            st = convert_layernorm(g, n, d);
        else if (channels_first_for_blocked_reader(n))
            st = convert_to_channels_first(g, n, d);
        else
            continue;
        if (st == FX_OK && converted)
            r->changes++;
    }
    return pass_finish(g, r, st);
}
