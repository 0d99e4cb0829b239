/*
 * resize.c - Resize (opsets 10, 11, 13, 18, 19) and Upsample (opsets 7, 9).
 *
 * Canonical form is Resize with inputs (X, roi, scales, sizes), any of the
 * last three omitted, and every attribute filled.  canonicalize rewrites the
 * older forms into it:
 *   - Resize-10 (X, scales) gets an omitted roi and the asymmetric
 *     coordinate mode; its nearest rounding (floor when enlarging, ceil when
 *     shrinking, the behaviour ONNX Runtime keeps for opset 10) becomes
 *     nearest_mode floor or ceil, which needs the scales to be constant and
 *     all on one side of 1.
 *   - Upsample-7 (scales attribute) and Upsample-9 (scales input) become a
 *     Resize node with asymmetric coordinates and nearest_mode floor, so
 *     every later stage sees one op and one kernel.
 * Modes: nearest (every nearest_mode), linear (any rank; a fast bilinear
 * kernel when only the last two axes change) and cubic (cubic_coeff_a,
 * exclude_outside); every coordinate_transformation_mode including
 * tf_crop_and_resize with its extrapolation_value.  The opset-18 attributes
 * axes and keep_aspect_ratio_policy are supported; antialias is refused.
 *
 * The output shape depends on scales or sizes, so exactly one of them must
 * be given and be a compile-time constant (roi too, for tf_crop_and_resize);
 * infer refuses otherwise with FX_ERR_UNSUPPORTED.  Scales must be finite
 * and positive.  Nearest handles every element type (it only moves
 * elements); linear and cubic handle float32, float64 and integers (rounded
 * half to even and saturated, as the ONNX reference does).
 *
 * Eval rebuilds the per-axis sampling tables (fxrt_resize_axis_plan) and
 * calls runtime/fxrt_resize.c; codegen can build the same tables at compile
 * time.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* Largest output extent accepted before the size checks of shape propagation
 * (which also bound the total): keeps floor(in * scale) in int64 range. */
#define RESIZE_MAX_DIM ((double)(1ll << 40))

/* Everything the kernels need, worked out from attributes and inputs. */
typedef struct ResizeSetup {
    FxrtResizeConfig cfg;
    int rank;
    int64_t in[FX_MAX_RANK], out[FX_MAX_RANK];
    double scale[FX_MAX_RANK], roi_start[FX_MAX_RANK], roi_end[FX_MAX_RANK];
    double extrapolation;
} ResizeSetup;

/* --- attributes ------------------------------------------------------------- */

static FxStatus parse_mode(Diag *d, const Node *n, FxrtResizeMode *out)
{
    const char *s = node_attr_string(n, "mode", "nearest");
    if (strcmp(s, "nearest") == 0)
        *out = FXRT_RESIZE_NEAREST;
    else if (strcmp(s, "linear") == 0 || strcmp(s, "bilinear") == 0)
        *out = FXRT_RESIZE_LINEAR;
    else if (strcmp(s, "cubic") == 0)
        *out = FXRT_RESIZE_CUBIC;
    else
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "mode '%s' is not supported", s);
    return FX_OK;
}

static FxStatus parse_coord(Diag *d, const Node *n, FxrtResizeCoord *out)
{
    static const struct {
        const char *name;
        FxrtResizeCoord value;
    } modes[] = {
        {"half_pixel", FXRT_RESIZE_HALF_PIXEL},
        {"pytorch_half_pixel", FXRT_RESIZE_PYTORCH_HALF_PIXEL},
        {"align_corners", FXRT_RESIZE_ALIGN_CORNERS},
        {"asymmetric", FXRT_RESIZE_ASYMMETRIC},
        {"tf_half_pixel_for_nn", FXRT_RESIZE_TF_HALF_PIXEL_FOR_NN},
        {"tf_crop_and_resize", FXRT_RESIZE_TF_CROP_AND_RESIZE},
        {"half_pixel_symmetric", FXRT_RESIZE_HALF_PIXEL_SYMMETRIC},
    };
    const char *s = node_attr_string(n, "coordinate_transformation_mode", "half_pixel");
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(s, modes[i].name) == 0) {
            *out = modes[i].value;
            return FX_OK;
        }
    return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                           "coordinate_transformation_mode '%s' is not supported", s);
}

static FxStatus parse_nearest(Diag *d, const Node *n, FxrtResizeNearest *out)
{
    const char *s = node_attr_string(n, "nearest_mode", "round_prefer_floor");
    if (strcmp(s, "round_prefer_floor") == 0)
        *out = FXRT_RESIZE_ROUND_PREFER_FLOOR;
    else if (strcmp(s, "round_prefer_ceil") == 0)
        *out = FXRT_RESIZE_ROUND_PREFER_CEIL;
    else if (strcmp(s, "floor") == 0)
        *out = FXRT_RESIZE_FLOOR;
    else if (strcmp(s, "ceil") == 0)
        *out = FXRT_RESIZE_CEIL;
    else
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "nearest_mode '%s' is not supported", s);
    return FX_OK;
}

/* The input axes that scales/sizes/roi describe (opset 18 `axes`), in order. */
static FxStatus resize_axes(Diag *d, const Node *n, int rank, int *axes, int *naxes)
{
    const int64_t *vals;
    int64_t count = node_attr_ints(n, "axes", &vals);
    if (count < 0) {
        for (int i = 0; i < rank; i++)
            axes[i] = i;
        *naxes = rank;
        return FX_OK;
    }
    if (count > rank)
        return diag_node_error(d, FX_ERR_INVALID, n, "axes has %lld entries for rank %d",
                               (long long)count, rank);
    uint32_t seen = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t a = vals[i] < 0 ? vals[i] + rank : vals[i];
        if (a < 0 || a >= rank || (seen & (1u << a)))
            return diag_node_error(d, FX_ERR_INVALID, n, "axes[%lld] = %lld is invalid",
                                   (long long)i, (long long)vals[i]);
        seen |= 1u << a;
        axes[i] = (int)a;
    }
    *naxes = (int)count;
    return FX_OK;
}

/* A tensor given with at least one element, else NULL (ONNX marks "not
 * given" with an empty name or, in opset 11, an empty tensor). */
static const Tensor *non_empty(const Tensor *t)
{
    return t && tensor_numel(t) > 0 ? t : NULL;
}

/* Works out config, output sizes, scales and roi.  scales/sizes/roi are the
 * constant inputs (NULL when not given); `upsample` selects Upsample's fixed
 * coordinate rules. */
static FxStatus resize_setup(Diag *d, const Node *n, const TensorType *x, const Tensor *roi,
                             const Tensor *scales, const Tensor *sizes, bool upsample,
                             ResizeSetup *s)
{
    memset(s, 0, sizeof *s);
    int rank = x->rank, axes[FX_MAX_RANK], naxes = 0;
    FxStatus st = parse_mode(d, n, &s->cfg.mode);
    if (st != FX_OK)
        return st;
    if (upsample) {
        s->cfg.coord = FXRT_RESIZE_ASYMMETRIC;
        s->cfg.nearest = FXRT_RESIZE_FLOOR;
        if (s->cfg.mode == FXRT_RESIZE_CUBIC)
            return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "Upsample has no cubic mode");
    } else if ((st = parse_coord(d, n, &s->cfg.coord)) != FX_OK ||
               (st = parse_nearest(d, n, &s->cfg.nearest)) != FX_OK) {
        return st;
    }
    s->cfg.cubic_a = node_attr_float(n, "cubic_coeff_a", -0.75f);
    s->cfg.exclude_outside = node_attr_int(n, "exclude_outside", 0) != 0;
    s->extrapolation = node_attr_float(n, "extrapolation_value", 0.0f);
    if (node_attr_int(n, "antialias", 0) != 0)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "antialias is not supported");
    if (rank == 0)
        return diag_node_error(d, FX_ERR_SHAPE, n, "cannot resize a scalar");
    if ((st = resize_axes(d, n, rank, axes, &naxes)) != FX_OK)
        return st;
    s->rank = rank;
    for (int i = 0; i < rank; i++) {
        s->in[i] = s->out[i] = x->dims[i];
        s->scale[i] = 1.0;
        s->roi_start[i] = 0.0;
        s->roi_end[i] = 1.0;
    }
    if (!scales == !sizes)
        return diag_node_error(d, FX_ERR_INVALID, n,
                               scales ? "scales and sizes are both given; give one"
                                      : "neither scales nor sizes is given");
    const Tensor *given = scales ? scales : sizes;
    if (tensor_numel(given) != naxes || given->type.rank != 1)
        return diag_node_error(d, FX_ERR_SHAPE, n, "%s has %lld values for %d axes",
                               scales ? "scales" : "sizes", (long long)tensor_numel(given),
                               naxes);
    if (scales) {
        if (!fxrt_dtype_is_float(scales->type.dtype) || scales->type.dtype == FXRT_DTYPE_FLOAT16)
            return diag_node_error(d, FX_ERR_INVALID, n, "scales must be float32");
        for (int i = 0; i < naxes; i++) {
            int a = axes[i];
            double sc = tensor_get_float(scales, i);
            if (!(sc > 0) || !isfinite(sc))
                return diag_node_error(d, FX_ERR_INVALID, n, "scale %g of axis %d is not a "
                                       "positive number", sc, a);
            double o = floor((double)s->in[a] * sc);
            if (o > RESIZE_MAX_DIM)
                return diag_node_error(d, FX_ERR_SHAPE, n, "scale %g makes axis %d too large",
                                       sc, a);
            s->scale[a] = sc;
            s->out[a] = (int64_t)o;
        }
    } else {
        if (sizes->type.dtype != FXRT_DTYPE_INT64)
            return diag_node_error(d, FX_ERR_INVALID, n, "sizes must be int64");
        const char *policy = node_attr_string(n, "keep_aspect_ratio_policy", "stretch");
        bool stretch = strcmp(policy, "stretch") == 0;
        bool not_larger = strcmp(policy, "not_larger") == 0;
        if (!stretch && !not_larger && strcmp(policy, "not_smaller") != 0)
            return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                                   "keep_aspect_ratio_policy '%s' is not supported", policy);
        double common = not_larger ? INFINITY : 0.0;
        for (int i = 0; i < naxes; i++) {
            int a = axes[i];
            int64_t v = tensor_get_int(sizes, i);
            if (v < 0 || (double)v > RESIZE_MAX_DIM)
                return diag_node_error(d, FX_ERR_SHAPE, n, "size %lld of axis %d is invalid",
                                       (long long)v, a);
            if (s->in[a] == 0 && v != 0)
                return diag_node_error(d, FX_ERR_SHAPE, n,
                                       "axis %d is empty and cannot be resized to %lld", a,
                                       (long long)v);
            s->out[a] = v;
            s->scale[a] = s->in[a] ? (double)v / (double)s->in[a] : 1.0;
            if (not_larger && s->scale[a] < common)
                common = s->scale[a];
            if (!stretch && !not_larger && s->scale[a] > common)
                common = s->scale[a];
        }
        if (!stretch)
            for (int i = 0; i < naxes; i++) {
                int a = axes[i];
                s->scale[a] = common;
                s->out[a] = (int64_t)floor(common * (double)s->in[a] + 0.5);
            }
    }
    for (int a = 0; a < rank; a++)
        if (s->out[a] > 0 && s->in[a] == 0)
            return diag_node_error(d, FX_ERR_SHAPE, n, "axis %d is empty", a);
    if (s->cfg.coord == FXRT_RESIZE_TF_CROP_AND_RESIZE) {
        if (!roi)
            return diag_node_error(d, FX_ERR_INVALID, n,
                                   "tf_crop_and_resize needs the roi input");
        if (tensor_numel(roi) != 2 * naxes || !fxrt_dtype_is_float(roi->type.dtype) ||
            roi->type.dtype == FXRT_DTYPE_FLOAT16)
            return diag_node_error(d, FX_ERR_SHAPE, n,
                                   "roi must hold %d float values (starts, then ends)",
                                   2 * naxes);
        for (int i = 0; i < naxes; i++) {
            s->roi_start[axes[i]] = tensor_get_float(roi, i);
            s->roi_end[axes[i]] = tensor_get_float(roi, naxes + i);
            if (!isfinite(s->roi_start[axes[i]]) || !isfinite(s->roi_end[axes[i]]))
                return diag_node_error(d, FX_ERR_INVALID, n, "roi is not finite");
        }
    }
    return FX_OK;
}

static FxStatus check_dtype(Diag *d, const Node *n, const TensorType *x, FxrtResizeMode mode)
{
    bool ok;
    switch (x->dtype) {
    case FXRT_DTYPE_FLOAT32:
    case FXRT_DTYPE_FLOAT64:
    case FXRT_DTYPE_INT8:
    case FXRT_DTYPE_UINT8:
    case FXRT_DTYPE_INT16:
    case FXRT_DTYPE_UINT16:
    case FXRT_DTYPE_INT32:
    case FXRT_DTYPE_UINT32:
    case FXRT_DTYPE_INT64:
    case FXRT_DTYPE_UINT64: ok = true; break;
    case FXRT_DTYPE_BOOL: ok = mode == FXRT_RESIZE_NEAREST; break;
    default: ok = false; break;
    }
    if (!ok)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "element type %s is not supported%s",
                               dtype_name(x->dtype),
                               mode == FXRT_RESIZE_NEAREST ? "" : " by this mode");
    return FX_OK;
}

/* --- shape function and kernel shared by Resize and Upsample -------------------- */

/* Input i as a constant when it is given (non-empty); *missing is set when
 * it is given but not known at compile time. */
static const Tensor *const_input(const InferCtx *c, int i, bool *given)
{
    const TensorType *t = i < c->num_inputs ? c->in[i] : NULL;
    *given = t && type_numel(t) > 0;
    return *given ? c->in_value[i] : NULL;
}

static FxStatus resize_infer_common(InferCtx *c, int roi_i, int scales_i, int sizes_i,
                                    bool upsample)
{
    const TensorType *x = c->in[0];
    bool roi_given = false, scales_given = false, sizes_given = false;
    const Tensor *roi = roi_i >= 0 ? const_input(c, roi_i, &roi_given) : NULL;
    const Tensor *scales = scales_i >= 0 ? const_input(c, scales_i, &scales_given) : NULL;
    const Tensor *sizes = sizes_i >= 0 ? const_input(c, sizes_i, &sizes_given) : NULL;
    static const char *const roles[] = {"X", "roi", "scales", "sizes"};
    int need[3] = {scales_given && !scales ? scales_i : -1, sizes_given && !sizes ? sizes_i : -1,
                   -1};
    if (roi_given && !roi &&
        strcmp(node_attr_string(c->node, "coordinate_transformation_mode", ""),
               "tf_crop_and_resize") == 0)
        need[2] = roi_i;
    for (int k = 0; k < 3; k++)
        if (need[k] >= 0)
            return infer_not_constant(c, need[k], upsample ? "scales" : roles[need[k]],
                                      "the output depends on its values");
    ResizeSetup s;
    FxStatus st = resize_setup(c->diag, c->node, x, roi, scales, sizes, upsample, &s);
    if (st != FX_OK || (st = check_dtype(c->diag, c->node, x, s.cfg.mode)) != FX_OK)
        return st;
    c->out[0] = *x;
    for (int a = 0; a < s.rank; a++)
        c->out[0].dims[a] = s.out[a];
    return FX_OK;
}

/* The per-axis sampling tables of a setup; eval, emit and scratch_bytes all
 * build them the same way (fxrt_resize_axis_plan), so the interpreter and the
 * generated code sample identically. */
typedef struct ResizeTables {
    FxrtResizeAxis axes[FX_MAX_RANK];
    void *blocks[3 * FX_MAX_RANK];
    int nblocks;
} ResizeTables;

static void resize_tables_free(ResizeTables *tb)
{
    for (int i = 0; i < tb->nblocks; i++)
        free(tb->blocks[i]);
    tb->nblocks = 0;
}

static FxStatus resize_tables_build(Diag *d, const Node *n, const ResizeSetup *s,
                                    ResizeTables *tb)
{
    int taps = fxrt_resize_taps(s->cfg.mode);
    memset(tb, 0, sizeof *tb);
    for (int a = 0; a < s->rank; a++) {
        int64_t out = s->out[a];
        size_t entries = (size_t)(out > 0 ? out : 1) * (size_t)taps;
        int64_t *idx = fx_alloc_array(entries, sizeof *idx);
        double *w = fx_alloc_array(entries, sizeof *w);
        uint8_t *outside = fx_malloc((size_t)(out > 0 ? out : 1));
        tb->blocks[tb->nblocks++] = idx;
        tb->blocks[tb->nblocks++] = w;
        tb->blocks[tb->nblocks++] = outside;
        if (!idx || !w || !outside) {
            resize_tables_free(tb);
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
        }
        int any_outside;
        int identity = fxrt_resize_axis_plan(&s->cfg, s->in[a], out, s->scale[a],
                                             s->roi_start[a], s->roi_end[a], idx, w, outside,
                                             &any_outside);
        tb->axes[a] = (FxrtResizeAxis){
            .in = s->in[a], .out = out, .taps = identity ? 0 : taps, .idx = idx,
            .w = s->cfg.mode == FXRT_RESIZE_NEAREST ? NULL : w,
            .outside = any_outside ? outside : NULL};
    }
    return FX_OK;
}

/* Nearest (and bool, which only nearest accepts) is a typed gather. */
static bool resize_is_gather(const ResizeSetup *s, DType t)
{
    return s->cfg.mode == FXRT_RESIZE_NEAREST || t == FXRT_DTYPE_BOOL;
}

static FxStatus resize_eval_common(EvalCtx *c, int roi_i, int scales_i, int sizes_i,
                                   bool upsample)
{
    const Tensor *x = c->in[0];
    Tensor *y = c->out[0];
    const Tensor *roi = roi_i >= 0 && roi_i < c->num_inputs ? non_empty(c->in[roi_i]) : NULL;
    const Tensor *scales =
        scales_i >= 0 && scales_i < c->num_inputs ? non_empty(c->in[scales_i]) : NULL;
    const Tensor *sizes = sizes_i >= 0 && sizes_i < c->num_inputs ? non_empty(c->in[sizes_i])
                                                                  : NULL;
    ResizeSetup s;
    FxStatus st = resize_setup(c->diag, c->node, &x->type, roi, scales, sizes, upsample, &s);
    if (st != FX_OK)
        return st;
    if (y->type.dtype != x->type.dtype || y->type.rank != s.rank)
        return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node, "output disagrees with input");
    for (int a = 0; a < s.rank; a++)
        if (y->type.dims[a] != s.out[a])
            return diag_node_error(c->diag, FX_ERR_RUNTIME, c->node,
                                   "output disagrees with scales/sizes");
    if (tensor_numel(y) == 0)
        return FX_OK;

    ResizeTables tb;
    if ((st = resize_tables_build(c->diag, c->node, &s, &tb)) != FX_OK)
        return st;
    DType t = x->type.dtype;
    if (resize_is_gather(&s, t)) {
        unsigned char e[8] = {0};
        fxrt_store_f64(t, e, 0, s.extrapolation);
        fxrt_resize_nearest(fxrt_dtype_size(t), x->data, y->data, s.rank, tb.axes, e);
    } else {
        size_t bytes = fxrt_resize_scratch_bytes(t, s.rank, tb.axes);
        void *scratch = NULL;
        if (bytes > FX_MAX_TENSOR_BYTES)
            st = diag_node_error(c->diag, FX_ERR_NOMEM, c->node,
                                 "intermediate buffers are too large (%zu bytes)", bytes);
        else if (bytes && !(scratch = fx_malloc(bytes)))
            st = diag_node_error(c->diag, FX_ERR_NOMEM, c->node, "out of memory");
        else if (!fxrt_resize(t, x->data, y->data, s.rank, tb.axes, s.extrapolation, scratch))
            st = diag_node_error(c->diag, FX_ERR_UNSUPPORTED, c->node,
                                 "element type %s is not supported", dtype_name(t));
        free(scratch);
    }
    resize_tables_free(&tb);
    return st;
}

/* --- code generation ------------------------------------------------------------ */

/* A non-empty constant argument i of n, found the way shape propagation
 * finds it (get_attr value or folded constant), or NULL: scratch_bytes only
 * sees the node. */
static const Tensor *node_const_arg(const Node *n, int i)
{
    const Node *a = i >= 0 && i < n->num_args ? n->args[i] : NULL;
    const Tensor *t = NULL;
    if (!a)
        return NULL;
    if (a->opcode == FX_OPCODE_GET_ATTR)
        t = a->value;
    else if (a->opcode != FX_OPCODE_PLACEHOLDER && a->const_values && a->num_outputs == 1)
        t = a->const_values[0];
    return non_empty(t);
}

static const Tensor *emit_const_arg(const EmitCtx *c, int i)
{
    return i >= 0 && i < c->num_inputs ? non_empty(c->in_value[i]) : NULL;
}

/* Scratch of the separable passes: the same size fxrt_resize_scratch_bytes
 * reports to eval. */
static size_t resize_scratch_common(const Node *n, int roi_i, int scales_i, int sizes_i,
                                    bool upsample)
{
    const TensorType *x = node_input_type(n, 0);
    ResizeSetup s;
    ResizeTables tb;
    if (!x || resize_setup(NULL, n, x, node_const_arg(n, roi_i), node_const_arg(n, scales_i),
                           node_const_arg(n, sizes_i), upsample, &s) != FX_OK)
        return 0;
    if (resize_is_gather(&s, x->dtype) || type_numel(&n->out_types[0]) == 0 ||
        resize_tables_build(NULL, n, &s, &tb) != FX_OK)
        return 0;
    size_t bytes = fxrt_resize_scratch_bytes(x->dtype, s.rank, tb.axes);
    resize_tables_free(&tb);
    return bytes;
}

/* A double as a C literal that reads back exactly. */
static void double_literal(double v, char *buf, size_t cap)
{
    if (isnan(v))
        snprintf(buf, cap, "NAN");
    else if (isinf(v))
        snprintf(buf, cap, v > 0 ? "INFINITY" : "-INFINITY");
    else {
        snprintf(buf, cap, "%.17g", v);
        if (!strpbrk(buf, ".en"))
            strncat(buf, ".0", cap - strlen(buf) - 1);
    }
}

/* Writes `static const double NAME[count] = {...};`, 4 values a line (the
 * int64 tables use emit_int64_array). */
static void emit_double_array(EmitCtx *c, const char *name, const double *v, int64_t count)
{
    char buf[4 * 32 + 8];
    if (count <= 4) {
        size_t len = 0;
        buf[0] = '\0';
        for (int64_t j = 0; j < count; j++) {
            char lit[32];
            double_literal(v[j], lit, sizeof lit);
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", j ? ", " : "", lit);
        }
        emit_line(c, "static const double %s[%lld] = {%s};", name, (long long)count, buf);
        return;
    }
    emit_line(c, "static const double %s[%lld] = {", name, (long long)count);
    for (int64_t i = 0; i < count; i += 4) {
        size_t len = 0;
        for (int64_t j = i; j < count && j < i + 4; j++) {
            char lit[32];
            double_literal(v[j], lit, sizeof lit);
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s,", j > i ? " " : "", lit);
        }
        emit_line(c, "    %s", buf);
    }
    emit_line(c, "};");
}

/* Writes `static const uint8_t NAME[count] = {...};` of 0/1 flags. */
static void emit_u8_array(EmitCtx *c, const char *name, const uint8_t *v, int64_t count)
{
    char buf[16 * 3 + 8];
    bool one_line = count <= 16;
    if (!one_line)
        emit_line(c, "static const uint8_t %s[%lld] = {", name, (long long)count);
    for (int64_t i = 0; i < count; i += 16) {
        size_t len = 0;
        buf[0] = '\0';
        for (int64_t j = i; j < count && j < i + 16; j++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d%s", j > i ? " " : "",
                                    v[j] != 0, one_line && j == count - 1 ? "" : ",");
        if (one_line)
            emit_line(c, "static const uint8_t %s[%lld] = {%s};", name, (long long)count, buf);
        else
            emit_line(c, "    %s", buf);
    }
    if (!one_line)
        emit_line(c, "};");
}

/* The extrapolation value converted to type t exactly as eval converts it
 * (fxrt_store_f64), as a C literal of that type. */
static void extrapolation_literal(DType t, double v, char *buf, size_t cap)
{
    unsigned char e[8] = {0};
    fxrt_store_f64(t, e, 0, v);
    switch (t) {
    case FXRT_DTYPE_FLOAT32: {
        float f;
        memcpy(&f, e, sizeof f);
        c_float_literal(f, buf, cap);
        return;
    }
    case FXRT_DTYPE_FLOAT64: {
        double dv;
        memcpy(&dv, e, sizeof dv);
        double_literal(dv, buf, cap);
        return;
    }
    case FXRT_DTYPE_UINT64: {
        uint64_t u;
        memcpy(&u, e, sizeof u);
        snprintf(buf, cap, "%lluu", (unsigned long long)u);
        return;
    }
    case FXRT_DTYPE_INT64: {
        int64_t i;
        memcpy(&i, e, sizeof i);
        if (i == INT64_MIN)
            snprintf(buf, cap, "INT64_MIN");
        else
            snprintf(buf, cap, "%lld", (long long)i);
        return;
    }
    default:
        snprintf(buf, cap, "%lld", (long long)fxrt_load_i64(t, e, 0));
        return;
    }
}

/* Emits the sampling tables as const arrays (idxA, wA, outA for axis A) and
 * `static const FxrtResizeAxis axes[rank]`, then one kernel call. */
static FxStatus resize_emit_common(EmitCtx *c, int roi_i, int scales_i, int sizes_i,
                                   bool upsample)
{
    const Node *n = c->node;
    const TensorType *x = node_input_type(n, 0);
    ResizeSetup s;
    FxStatus st = resize_setup(c->diag, n, x, emit_const_arg(c, roi_i),
                               emit_const_arg(c, scales_i), emit_const_arg(c, sizes_i), upsample,
                               &s);
    if (st != FX_OK)
        return st;
    if (type_numel(&n->out_types[0]) == 0) {
        emit_line(c, "/* empty output: nothing to compute */");
        return FX_OK;
    }
    ResizeTables tb;
    if ((st = resize_tables_build(c->diag, n, &s, &tb)) != FX_OK)
        return st;
    DType t = x->dtype;
    int taps = fxrt_resize_taps(s.cfg.mode);
    for (int a = 0; a < s.rank; a++) {
        const FxrtResizeAxis *ax = &tb.axes[a];
        char name[32];
        if (ax->taps == 0)
            continue;
        snprintf(name, sizeof name, "idx%d", a);
        emit_int64_array(c, name, ax->idx, ax->out * taps);
        if (ax->w) {
            snprintf(name, sizeof name, "w%d", a);
            emit_double_array(c, name, ax->w, ax->out * taps);
        }
        if (ax->outside) {
            snprintf(name, sizeof name, "out%d", a);
            emit_u8_array(c, name, ax->outside, ax->out);
        }
    }
    emit_line(c, "static const FxrtResizeAxis axes[%d] = {", s.rank);
    for (int a = 0; a < s.rank; a++) {
        const FxrtResizeAxis *ax = &tb.axes[a];
        if (ax->taps == 0) {
            emit_line(c, "    {.in = %lld, .out = %lld, .taps = 0},", (long long)ax->in,
                    (long long)ax->out);
            continue;
        }
        char w[16] = "NULL", o[16] = "NULL";
        if (ax->w)
            snprintf(w, sizeof w, "w%d", a);
        if (ax->outside)
            snprintf(o, sizeof o, "out%d", a);
        emit_line(c, "    {.in = %lld, .out = %lld, .taps = %d, .idx = idx%d, .w = %s, .outside = %s},",
                (long long)ax->in, (long long)ax->out, ax->taps, a, w, o);
    }
    emit_line(c, "};");
    char e[64];
    extrapolation_literal(t, s.extrapolation, e, sizeof e);
    if (resize_is_gather(&s, t)) {
        emit_line(c, "static const %s e = %s;", c_type_name(t), e);
        emit_line(c, "fxrt_resize_nearest(sizeof e, %s, %s, %d, axes, &e);", c->in[0], c->out[0],
                s.rank);
    } else {
        size_t bytes = fxrt_resize_scratch_bytes(t, s.rank, tb.axes);
        const char *scratch = c->scratch ? c->scratch : "NULL";
        if (bytes > 0 && !c->scratch)
            st = diag_node_error(c->diag, FX_ERR_INVALID, n, "no scratch buffer was given");
        else if (t == FXRT_DTYPE_FLOAT32)
            emit_line(c, "fxrt_resize_f32(%s, %s, /*rank=*/%d, axes, /*extrapolation=*/%s, %s);",
                      c->in[0], c->out[0], s.rank, e, scratch);
        else if (t == FXRT_DTYPE_FLOAT64)
            emit_line(c, "fxrt_resize_f64(%s, %s, /*rank=*/%d, axes, /*extrapolation=*/%s, %s);",
                      c->in[0], c->out[0], s.rank, e, scratch);
        else {
            char ed[64];
            double_literal(s.extrapolation, ed, sizeof ed);
            emit_line(c, "fxrt_resize(%s, %s, %s, /*rank=*/%d, axes, /*extrapolation=*/%s, %s);",
                      c_dtype_enum(t), c->in[0], c->out[0], s.rank, ed, scratch);
        }
    }
    resize_tables_free(&tb);
    return st;
}

/* --- Resize ------------------------------------------------------------------- */

/* The constant value of argument i at import time, or NULL. */
static const Tensor *import_const(const Node *n, int i)
{
    const Node *a = i < n->num_args ? n->args[i] : NULL;
    return a && a->opcode == FX_OPCODE_GET_ATTR ? a->value : NULL;
}

/* Moves the scales argument from position 1 (Resize-10, Upsample-9) to 2,
 * leaving roi omitted. */
static bool move_scales_to_input2(Node *n)
{
    Node *scales = n->args[1];
    if (node_append_arg(n, scales) < 0)
        return false;
    node_clear_arg(n, 1);
    return true;
}

static FxStatus resize_canonicalize(Node *n, int opset, Diag *d)
{
    if (opset >= 11)
        return FX_OK;
    /* Resize-10: (X, scales), asymmetric coordinates */
    if (n->num_args != 2 || !n->args[1])
        return diag_node_error(d, FX_ERR_INVALID, n, "Resize-10 takes inputs (X, scales)");
    const char *mode = node_attr_string(n, "mode", "nearest");
    if (strcmp(mode, "nearest") == 0) {
        const Tensor *scales = import_const(n, 1);
        if (!scales)
            return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                                   "Resize-10 nearest needs constant scales (its rounding "
                                   "depends on them)");
        bool up = false, down = false;
        for (int64_t i = 0; i < tensor_numel(scales); i++) {
            double v = tensor_get_float(scales, i);
            up |= v > 1.0;
            down |= v < 1.0;
        }
        if (up && down)
            return diag_node_error(d, FX_ERR_UNSUPPORTED, n,
                                   "Resize-10 nearest that enlarges some axes and shrinks "
                                   "others is not supported");
        if (!node_set_attr_string(n, "nearest_mode", down ? "ceil" : "floor"))
            return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    }
    if (!node_set_attr_string(n, "coordinate_transformation_mode", "asymmetric"))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    if (!move_scales_to_input2(n))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    return FX_OK;
}

static FxStatus resize_infer(InferCtx *c)
{
    return resize_infer_common(c, 1, 2, 3, false);
}

static FxStatus resize_eval(EvalCtx *c)
{
    return resize_eval_common(c, 1, 2, 3, false);
}

static size_t resize_scratch_bytes(const Node *n)
{
    return resize_scratch_common(n, 1, 2, 3, false);
}

static FxStatus resize_emit(EmitCtx *c)
{
    return resize_emit_common(c, 1, 2, 3, false);
}

static const AttrSpec resize_attrs[] = {
    {"antialias", FX_ATTR_INT, "0", false},                /* opset 18 */
    {"axes", FX_ATTR_INTS, NULL, false},                   /* opset 18 */
    {"coordinate_transformation_mode", FX_ATTR_STRING, "half_pixel", false}, /* 11 */
    {"cubic_coeff_a", FX_ATTR_FLOAT, "-0.75", false},      /* 11 */
    {"exclude_outside", FX_ATTR_INT, "0", false},          /* 11 */
    {"extrapolation_value", FX_ATTR_FLOAT, "0", false},    /* 11 */
    {"keep_aspect_ratio_policy", FX_ATTR_STRING, "stretch", false}, /* opset 18 */
    {"mode", FX_ATTR_STRING, "nearest", false},
    {"nearest_mode", FX_ATTR_STRING, "round_prefer_floor", false}, /* 11 */
    {NULL},
};

const OpDef fx_op_Resize = {
    .name = "Resize",
    .min_inputs = 1, .max_inputs = 4, .min_outputs = 1, .max_outputs = 1,
    .attrs = resize_attrs,
    .canonicalize = resize_canonicalize,
    .infer = resize_infer,
    .eval = resize_eval,
    .scratch_bytes = resize_scratch_bytes,
    .emit = resize_emit,
};

/* --- Upsample ----------------------------------------------------------------- */

/* Upsample-7 (scales attribute) and -9 (scales input) become Resize. */
static FxStatus upsample_canonicalize(Node *n, int opset, Diag *d)
{
    (void)opset;
    const float *attr_scales;
    int64_t count = node_attr_floats(n, "scales", &attr_scales);
    if (count >= 0) {
        if (n->num_args != 1)
            return diag_node_error(d, FX_ERR_INVALID, n,
                                   "scales is given both as attribute and input");
        TensorType t = {.dtype = FXRT_DTYPE_FLOAT32, .rank = 1, .dims = {count}};
        Tensor *v = tensor_new(&t, d);
        if (!v)
            return FX_ERR_NOMEM;
        if (count)
            memcpy(v->data, attr_scales, (size_t)count * sizeof *attr_scales);
        FxStatus st = node_set_const_input(n, 1, "scales", v, d);
        if (st != FX_OK)
            return st;
        node_remove_attr(n, "scales");
    }
    if (n->num_args != 2 || !n->args[1])
        return diag_node_error(d, FX_ERR_INVALID, n, "Upsample needs scales");
    const Tensor *scales = import_const(n, 1);
    for (int64_t i = 0; scales && i < tensor_numel(scales); i++)
        if (tensor_get_float(scales, i) < 1.0)
            return diag_node_error(d, FX_ERR_INVALID, n, "Upsample scales must be >= 1 (got %g)",
                                   tensor_get_float(scales, i));
    const char *mode = node_attr_string(n, "mode", "nearest");
    const char *resize_mode = strcmp(mode, "nearest") == 0 ? "nearest"
                              : strcmp(mode, "linear") == 0 || strcmp(mode, "bilinear") == 0
                                  ? "linear"
                                  : NULL;
    if (!resize_mode)
        return diag_node_error(d, FX_ERR_UNSUPPORTED, n, "mode '%s' is not supported", mode);
    if (!move_scales_to_input2(n) || !node_set_attr_string(n, "mode", resize_mode) ||
        !node_set_attr_string(n, "coordinate_transformation_mode", "asymmetric") ||
        !node_set_attr_string(n, "nearest_mode", "floor"))
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    n->op = &fx_op_Resize;
    n->target = fx_op_Resize.name;
    return op_apply_attr_specs(&fx_op_Resize, n, d);
}

/* Only reached by an Upsample node that bypassed canonicalize (built by
 * hand): the same computation with inputs (X, scales). */
static FxStatus upsample_infer(InferCtx *c)
{
    if (c->num_inputs < 2 || !c->in[1])
        return diag_node_error(c->diag, FX_ERR_INVALID, c->node, "Upsample needs scales");
    return resize_infer_common(c, -1, 1, -1, true);
}

static FxStatus upsample_eval(EvalCtx *c)
{
    return resize_eval_common(c, -1, 1, -1, true);
}

static size_t upsample_scratch_bytes(const Node *n)
{
    return resize_scratch_common(n, -1, 1, -1, true);
}

static FxStatus upsample_emit(EmitCtx *c)
{
    return resize_emit_common(c, -1, 1, -1, true);
}

static const AttrSpec upsample_attrs[] = {
    {"mode", FX_ATTR_STRING, "nearest", false},
    {"scales", FX_ATTR_FLOATS, NULL, false}, /* opset 7; becomes an input */
    {NULL},
};

const OpDef fx_op_Upsample = {
    .name = "Upsample",
    .min_inputs = 1, .max_inputs = 2, .min_outputs = 1, .max_outputs = 1,
    .attrs = upsample_attrs,
    .canonicalize = upsample_canonicalize,
    .infer = upsample_infer,
    .eval = upsample_eval,
    .scratch_bytes = upsample_scratch_bytes,
    .emit = upsample_emit,
};
