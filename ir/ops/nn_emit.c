/*
 * nn_emit.c - the emitter helpers of the nn op files (ops.h), written once
 * for nn_conv.c, nn_gemm.c, fused_nn.c and nchwc.c.
 */
#include "ops.h"

const char *nn_emit_input(const EmitCtx *c, int i) { return i < c->num_inputs ? c->in[i] : NULL; }

const Tensor *nn_emit_value(const EmitCtx *c, int i)
{
    return i < c->num_inputs && c->in_value ? c->in_value[i] : NULL;
}

char *nn_format_ints(const int64_t *v, int count, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "{");
    for (int i = 0; i < count && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)v[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "}");
    return buf;
}

size_t nn_align64(size_t n) { return (n + 63) & ~(size_t)63; }

int64_t nn_emit_zero_points(EmitCtx *c, int i, const char *name, const char *dst, int64_t max)
{
    const char *expr = nn_emit_input(c, i);
    const Tensor *v = nn_emit_value(c, i);
    if (!expr) {
        emit_line(c, "static const int32_t %s[1] = {0};", name);
        return 1;
    }
    const TensorType *t = node_input_type(c->node, i);
    int64_t n = type_numel(t);
    if (n > max)
        n = max;
    if (v) {
        char buf[16 * 16 + 8];
        size_t len = 0;
        emit_line(c, "static const int32_t %s[%lld] = {", name, (long long)n);
        for (int64_t j = 0; j < n; j++) {
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%d,",
                                    (int)tensor_get_int(v, j));
            if (j % 16 == 15 || j == n - 1) {
                emit_line(c, "    %s", buf);
                len = 0;
            }
        }
        emit_line(c, "};");
        return n;
    }
    emit_line(c, "int32_t *const %s = (int32_t *)(%s);", name, dst);
    emit_line(c, "(void)fxrt_cast(%s, %s, FXRT_DTYPE_INT32, %s, %lld);", c_dtype_enum(t->dtype),
            expr, name, (long long)n);
    return n;
}

char *nn_zero_point_expr(const EmitCtx *c, int i, char *buf, size_t cap)
{
    const char *expr = nn_emit_input(c, i);
    const Tensor *v = nn_emit_value(c, i);
    if (!expr)
        snprintf(buf, cap, "0");
    else if (v)
        snprintf(buf, cap, "%d", (int)tensor_get_int(v, 0));
    else
        snprintf(buf, cap, "(int32_t)%s[0]", expr);
    return buf;
}

size_t nn_zero_point_bytes(const Node *n, int i)
{
    const TensorType *t = i < n->num_args ? node_input_type(n, i) : NULL;
    return t ? nn_align64((size_t)type_numel(t) * sizeof(int32_t)) : 0;
}
