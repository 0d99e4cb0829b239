/*
 * pass_qgemm_pack.c - moves the quantized matrix products whose weights are
 * known at compile time onto the packed 8-bit GEMM (runtime/fxrt_nn_qgemm.c):
 *
 *     y = QLinearMatMul(a, a_scale, a_zp, B, b_scale, 0, y_scale, y_zp)
 *  -> y = QGemmPacked(a, packed; n, y_type, y_zero_point, y_min, y_max)
 *
 *     y = MatMulInteger(a, B, a_zp, 0)  ->  y = QGemmPacked(a, packed; y_type = int32)
 *
 * where packed is fxrt_qgemm_pack_b of B with a_zp and the per-column
 * scale a_scale * b_scale / y_scale formed in float in ONNX's order, the
 * one the reference kernels use, so the result is the same bytes (see
 * fxrt_quant_rescale for the one-off ties beyond 2^29).
 *
 * Only when the kernel's conditions hold: B a constant int8 matrix (2-D,
 * shared by every batch) with zero point 0 per tensor or per column, every
 * other quantization parameter constant, each scale with a fixed-point
 * pair (in [2^-32, 1)).  Anything else keeps the reference loops.
 */
#include <stdio.h>
#include <stdlib.h>

#include "opt.h"

/* B if it is a constant int8 matrix, else NULL. */
static const Tensor *int8_matrix(const Node *b)
{
    const Tensor *t = b ? node_const_value(b) : NULL;
    return t && t->type.dtype == FXRT_DTYPE_INT8 && t->type.rank == 2 ? t : NULL;
}

/* What the packed product of one node needs. */
typedef struct Packing {
    const Tensor *b;
    int32_t a_zp;
    float *scale; /* NULL for an int32 output */
    int64_t scale_count;
    DType y_type;
    int32_t y_zp, y_min, y_max;
} Packing;

/* Fills p for a QLinearMatMul that can be packed; false otherwise.  The
 * scales go to scale_buf (n floats). */
static bool qlinear_matmul_packing(const Node *n, Packing *p, float *scale_buf, int64_t cap)
{
    enum { A, A_SCALE, A_ZP, B, B_SCALE, B_ZP, Y_SCALE, Y_ZP };
    if (n->num_args != 8 || !(p->b = int8_matrix(n->args[B])) || !node_const_zeros(n->args[B_ZP]) ||
        !node_const_scalar_int(n->args[A_ZP], &p->a_zp) || !n->args[Y_ZP] ||
        !node_const_scalar_int(n->args[Y_ZP], &p->y_zp))
        return false;
    const Tensor *as = node_const_value(n->args[A_SCALE]), *bs = node_const_value(n->args[B_SCALE]);
    const Tensor *ys = node_const_value(n->args[Y_SCALE]);
    if (!as || !bs || !ys || tensor_numel(as) != 1 || tensor_numel(ys) != 1 ||
        tensor_numel(bs) > cap)
        return false;
    float a_scale = *(const float *)as->data, y_scale = *(const float *)ys->data;
    const float *b_scale = bs->data;
    p->scale_count = tensor_numel(bs);
    /* float arithmetic in ONNX's order, as the interpreter does */
    for (int64_t j = 0; j < p->scale_count; j++)
        scale_buf[j] = a_scale * b_scale[j] / y_scale;
    p->scale = scale_buf;
    p->y_type = n->out_types[0].dtype;
    p->y_min = p->y_type == FXRT_DTYPE_UINT8 ? 0 : -128;
    p->y_max = p->y_min + 255;
    return true;
}

/* Fills p for a MatMulInteger that can be packed; false otherwise. */
static bool matmul_integer_packing(const Node *n, Packing *p)
{
    if (!(p->b = int8_matrix(n->args[1])) ||
        !node_const_zeros(n->num_args > 3 ? n->args[3] : NULL) ||
        !node_const_scalar_int(n->num_args > 2 ? n->args[2] : NULL, &p->a_zp))
        return false;
    p->scale = NULL;
    p->scale_count = 0;
    p->y_type = FXRT_DTYPE_INT32;
    p->y_zp = 0;
    p->y_min = INT32_MIN;
    p->y_max = INT32_MAX;
    return true;
}

/* The QGemmPacked node for n into *out, or NULL when a scale has no
 * fixed-point pair. */
static FxStatus packed_product(Graph *g, Node *n, const Packing *p, Node **out, Diag *d)
{
    *out = NULL;
    int64_t k = p->b->type.dims[0], cols = p->b->type.dims[1];
    TensorType pt = {.dtype = FXRT_DTYPE_UINT8, .rank = 1,
                     .dims = {fxrt_qgemm_packed_bytes(cols, k)}};
    Tensor *packed = tensor_new(&pt, d);
    if (!packed)
        return FX_ERR_NOMEM;
    DType a_type = node_input_type(n, 0)->dtype;
    if (fxrt_qgemm_pack_b(cols, k, p->b->data, NULL, p->scale, p->scale_count, a_type, p->a_zp,
                          packed->data) != 0) {
        tensor_free(packed);
        return FX_OK;
    }
    char hint[200];
    snprintf(hint, sizeof hint, "%s_packed", n->name);
    Node *w = graph_create_constant(g, NULL, hint, packed, d);
    if (!w)
        return FX_ERR_NOMEM;
    Node *args[2] = {n->args[0], w};
    snprintf(hint, sizeof hint, "%s_qgemm", n->name);
    Node *q = graph_create_op(g, n, &fx_op_QGemmPacked, hint, args, 2);
    if (!q || !node_set_attr_int(q, "n", cols) || !node_set_attr_int(q, "y_type", p->y_type) ||
        !node_set_attr_int(q, "y_zero_point", p->y_zp) ||
        !node_set_attr_int(q, "y_min", p->y_min) || !node_set_attr_int(q, "y_max", p->y_max) ||
        !node_set_num_outputs(q, 1)) {
        if (q)
            graph_erase_node(g, q);
        return diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
    }
    FxStatus st = op_apply_attr_specs(q->op, q, d);
    if (st == FX_OK)
        st = node_infer_shapes(q, d);
    if (st != FX_OK)
        graph_erase_node(g, q);
    else
        *out = q;
    return st;
}

FxStatus pass_qgemm_pack(Graph *g, PassResult *r, Diag *d)
{
    r->changes = 0;
    FxStatus st = FX_OK;
    graph_for_each(g, n)
    {
        bool qlinear = node_is_op(n, &fx_op_QLinearMatMul);
        if ((!qlinear && !node_is_op(n, &fx_op_MatMulInteger)) || n->num_outputs != 1 ||
            !n->args[0])
            continue;
        Packing p;
        float *scale = NULL;
        bool ok;
        if (qlinear) {
            const Tensor *b = int8_matrix(n->args[3]);
            int64_t cap = b ? b->type.dims[1] : 1;
            scale = fx_alloc_array((size_t)(cap > 0 ? cap : 1), sizeof *scale);
            if (!scale) {
                st = diag_node_error(d, FX_ERR_NOMEM, n, "out of memory");
                break;
            }
            ok = qlinear_matmul_packing(n, &p, scale, cap);
        } else {
            ok = matmul_integer_packing(n, &p);
        }
        Node *q = NULL;
        if (ok)
            st = packed_product(g, n, &p, &q, d);
        free(scale);
        if (st != FX_OK)
            break;
        if (!q)
            continue;
        if ((st = pass_replace_node(n, q, r, d)) != FX_OK)
            break;
    }
    return pass_finish(g, r, st);
}
