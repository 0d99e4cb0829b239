/*
 * tensor_pb.c - onnx.TensorProto in and out: the decoder shared by model
 * initializers, Constant nodes, tensor attributes and standalone .pb tensor
 * files (the ONNX backend tests' input_0.pb / output_0.pb), and the writer.
 *
 * A TensorProto carries its data in exactly one place: raw_data (little-endian
 * bytes), one of the typed repeated fields (float_data; int32_data, which also
 * holds int8/uint8/int16/uint16/bool/float16; int64_data; double_data;
 * uint64_data for uint32/uint64), or an external file.  The decoder refuses
 * anything else: element types fxcc cannot hold (strings, bfloat16, complex,
 * float8), segments, a rank above FX_MAX_RANK, negative dims, more than one
 * data source, and any element count or byte count that does not match the
 * product of the dims.  All of that is checked before the tensor is
 * allocated, so a file claiming 10^12 elements costs nothing.  Typed values
 * that do not fit their element type (300 in an int8 tensor) are refused too.
 * Writing always uses raw_data.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

const char *onnx_dtype_name(int32_t onnx_type)
{
    switch (onnx_type) {
    case 14: return "complex64";
    case 15: return "complex128";
    case 16: return "bfloat16";
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 21: return "uint4";
    case 22: return "int4";
    case 23: return "float4e2m1";
    case 24: return "float8e8m0";
    case 25: return "uint2";
    case 26: return "int2";
    default:
        if (onnx_type >= 1 && onnx_type <= 13)
            return dtype_name((DType)onnx_type);
        return "undefined";
    }
}

/* --- data sources --------------------------------------------------------- */

/* Which typed field holds values of an element type, and how many of them the
 * proto carries. */
typedef enum TypedField {
    TF_FLOAT,
    TF_INT32,
    TF_INT64,
    TF_DOUBLE,
    TF_UINT64
} TypedField;

static TypedField typed_field_of(DType t)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32: return TF_FLOAT;
    case FXRT_DTYPE_INT64: return TF_INT64;
    case FXRT_DTYPE_FLOAT64: return TF_DOUBLE;
    case FXRT_DTYPE_UINT32:
    case FXRT_DTYPE_UINT64: return TF_UINT64;
    default: return TF_INT32; /* int32, int16, int8, uint16, uint8, bool, float16 */
    }
}

static size_t typed_count(const Onnx__TensorProto *tp, TypedField f)
{
    switch (f) {
    case TF_FLOAT: return tp->n_float_data;
    case TF_INT32: return tp->n_int32_data;
    case TF_INT64: return tp->n_int64_data;
    case TF_DOUBLE: return tp->n_double_data;
    case TF_UINT64: return tp->n_uint64_data;
    }
    return 0;
}

static const char *typed_field_name(TypedField f)
{
    switch (f) {
    case TF_FLOAT: return "float_data";
    case TF_INT32: return "int32_data";
    case TF_INT64: return "int64_data";
    case TF_DOUBLE: return "double_data";
    case TF_UINT64: return "uint64_data";
    }
    return "?";
}

/* Copies the typed values into dst (numel elements of t), checking that each
 * fits the element type. */
static FxStatus typed_copy(const Onnx__TensorProto *tp, DType t, void *dst, size_t numel,
                           const char *what, Diag *d)
{
    switch (t) {
    case FXRT_DTYPE_FLOAT32:
        memcpy(dst, tp->float_data, numel * sizeof(float));
        return FX_OK;
    case FXRT_DTYPE_FLOAT64:
        memcpy(dst, tp->double_data, numel * sizeof(double));
        return FX_OK;
    case FXRT_DTYPE_INT64:
        memcpy(dst, tp->int64_data, numel * sizeof(int64_t));
        return FX_OK;
    case FXRT_DTYPE_INT32:
        memcpy(dst, tp->int32_data, numel * sizeof(int32_t));
        return FX_OK;
    case FXRT_DTYPE_UINT64:
        memcpy(dst, tp->uint64_data, numel * sizeof(uint64_t));
        return FX_OK;
    case FXRT_DTYPE_UINT32:
        for (size_t i = 0; i < numel; i++) {
            if (tp->uint64_data[i] > UINT32_MAX)
                return diag_error(d, FX_ERR_FORMAT,
                                  "%s: uint64_data[%zu] = %llu does not fit uint32", what, i,
                                  (unsigned long long)tp->uint64_data[i]);
            ((uint32_t *)dst)[i] = (uint32_t)tp->uint64_data[i];
        }
        return FX_OK;
    default:
        break;
    }
    /* the small types packed into int32_data */
    int32_t lo, hi;
    switch (t) {
    case FXRT_DTYPE_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
    case FXRT_DTYPE_UINT8: lo = 0, hi = UINT8_MAX; break;
    case FXRT_DTYPE_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
    case FXRT_DTYPE_UINT16:
    case FXRT_DTYPE_FLOAT16: lo = 0, hi = UINT16_MAX; break; /* float16: the bit pattern */
    case FXRT_DTYPE_BOOL: lo = INT32_MIN, hi = INT32_MAX; break; /* nonzero is true */
    default:
        return diag_error(d, FX_ERR_UNSUPPORTED, "%s: element type %s has no typed field", what,
                          dtype_name(t));
    }
    for (size_t i = 0; i < numel; i++) {
        int32_t v = tp->int32_data[i];
        if (v < lo || v > hi)
            return diag_error(d, FX_ERR_FORMAT, "%s: int32_data[%zu] = %d does not fit %s", what,
                              i, (int)v, dtype_name(t));
        switch (t) {
        case FXRT_DTYPE_INT8: ((int8_t *)dst)[i] = (int8_t)v; break;
        case FXRT_DTYPE_UINT8: ((uint8_t *)dst)[i] = (uint8_t)v; break;
        case FXRT_DTYPE_INT16: ((int16_t *)dst)[i] = (int16_t)v; break;
        case FXRT_DTYPE_BOOL: ((uint8_t *)dst)[i] = v != 0; break;
        default: ((uint16_t *)dst)[i] = (uint16_t)v; break;
        }
    }
    return FX_OK;
}

/* Parses a decimal external-data number ("offset", "length"): digits only. */
static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        if (!size_mul_ok(v, 10, &v) || !size_add_ok(v, (uint64_t)(*s - '0'), &v))
            return false;
    }
    *out = v;
    return true;
}

static FxStatus decode_external(const Onnx__TensorProto *tp, const TensorType *type,
                                uint64_t nbytes, const char *what, const char *base_dir,
                                Tensor **out, Diag *d)
{
    const char *location = NULL;
    uint64_t offset = 0, length = 0;
    bool has_length = false;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        const char *key = e->key ? e->key : "";
        const char *val = e->value ? e->value : "";
        if (strcmp(key, "location") == 0) {
            location = val;
        } else if (strcmp(key, "offset") == 0) {
            if (!parse_u64(val, &offset))
                return diag_error(d, FX_ERR_FORMAT, "%s: external data offset '%s' is not a "
                                  "non-negative integer", what, val);
        } else if (strcmp(key, "length") == 0) {
            if (!parse_u64(val, &length))
                return diag_error(d, FX_ERR_FORMAT, "%s: external data length '%s' is not a "
                                  "non-negative integer", what, val);
            has_length = true;
        } /* "checksum" and future keys carry nothing fxcc needs */
    }
    if (!location || !*location)
        return diag_error(d, FX_ERR_FORMAT, "%s: external data without a location", what);
    if (has_length && length != nbytes)
        return diag_error(d, FX_ERR_FORMAT,
                          "%s: external data length %llu does not match the %llu bytes its "
                          "dims need", what, (unsigned long long)length,
                          (unsigned long long)nbytes);
    if (!base_dir)
        return diag_error(d, FX_ERR_UNSUPPORTED,
                          "%s: external data ('%s') cannot be used here: there is no model "
                          "folder to resolve it against", what, location);
    return external_tensor_read(base_dir, location, offset, !has_length, type, nbytes, what,
                                out, d);
}

FxStatus onnx_tensor_decode(const Onnx__TensorProto *tp, const char *what, const char *base_dir,
                            Tensor **out, Diag *d)
{
    *out = NULL;
    if (!tp->has_data_type || tp->data_type == 0)
        return diag_error(d, FX_ERR_FORMAT, "%s: no element type", what);
    if (tp->data_type < 0 || tp->data_type > 13 || !dtype_is_supported((DType)tp->data_type))
        return diag_error(d, FX_ERR_UNSUPPORTED, "%s: element type %s (%d) is not supported",
                          what, onnx_dtype_name(tp->data_type), (int)tp->data_type);
    if (tp->n_dims > FX_MAX_RANK)
        return diag_error(d, FX_ERR_UNSUPPORTED, "%s: rank %zu is beyond the supported %d", what,
                          tp->n_dims, FX_MAX_RANK);
    TensorType type = {.dtype = (DType)tp->data_type, .rank = (int)tp->n_dims};
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            return diag_error(d, FX_ERR_FORMAT, "%s: dimension %zu is negative (%lld)", what, i,
                              (long long)tp->dims[i]);
        type.dims[i] = tp->dims[i];
    }
    uint64_t nbytes;
    FxStatus st = type_check_size(&type, &nbytes, d, what);
    if (st != FX_OK)
        return st;
    size_t numel = (size_t)(nbytes / fxrt_dtype_size(type.dtype));
    if (tp->segment)
        return diag_error(d, FX_ERR_UNSUPPORTED, "%s: segmented tensors are not supported", what);

    /* exactly one data source */
    bool external = tp->has_data_location &&
                    tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (tp->has_data_location && !external &&
        tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT)
        return diag_error(d, FX_ERR_FORMAT, "%s: unknown data_location %d", what,
                          (int)tp->data_location);
    TypedField tf = typed_field_of(type.dtype);
    int sources = external + (tp->has_raw_data != 0);
    const TypedField all[] = {TF_FLOAT, TF_INT32, TF_INT64, TF_DOUBLE, TF_UINT64};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        if (typed_count(tp, all[k]) == 0)
            continue;
        if (all[k] != tf)
            return diag_error(d, FX_ERR_FORMAT, "%s: %s given for a %s tensor", what,
                              typed_field_name(all[k]), dtype_name(type.dtype));
        sources++;
    }
    if (tp->n_string_data)
        return diag_error(d, FX_ERR_FORMAT, "%s: string_data given for a %s tensor", what,
                          dtype_name(type.dtype));
    if (sources > 1)
        return diag_error(d, FX_ERR_FORMAT, "%s: data given in more than one place (raw_data, "
                          "typed fields, external)", what);
    if (sources == 0 && numel > 0)
        return diag_error(d, FX_ERR_FORMAT, "%s: no data for %zu elements", what, numel);

    if (external)
        return decode_external(tp, &type, nbytes, what, base_dir, out, d);
    if (tp->has_raw_data) {
        if (tp->raw_data.len != nbytes)
            return diag_error(d, FX_ERR_FORMAT,
                              "%s: raw_data has %zu bytes but its dims need %llu", what,
                              tp->raw_data.len, (unsigned long long)nbytes);
    } else if (sources == 1 && typed_count(tp, tf) != numel) {
        return diag_error(d, FX_ERR_FORMAT, "%s: %s has %zu values but its dims need %zu", what,
                          typed_field_name(tf), typed_count(tp, tf), numel);
    }

    Tensor *t = tensor_new(&type, d);
    if (!t)
        return FX_ERR_NOMEM;
    if (tp->has_raw_data) {
        if (nbytes)
            memcpy(t->data, tp->raw_data.data, (size_t)nbytes);
        if (type.dtype == FXRT_DTYPE_BOOL)
            for (size_t i = 0; i < numel; i++)
                ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
    } else if (sources == 1 && numel > 0) {
        st = typed_copy(tp, type.dtype, t->data, numel, what, d);
        if (st != FX_OK) {
            tensor_free(t);
            return st;
        }
    }
    *out = t;
    return FX_OK;
}

/* --- .pb tensor files ----------------------------------------------------- */

FxStatus tensor_pb_read_buffer(const uint8_t *data, size_t len, const char *name,
                               Tensor **out, Diag *d)
{
    *out = NULL;
    const char *saved = d ? d->file : NULL;
    if (d)
        d->file = name;
    OnnxAllocator alloc;
    ProtobufCMessage *msg;
    FxStatus st = onnx_message_unpack(data, len, &onnx__tensor_proto__descriptor, name,
                                      "ONNX TensorProto", &alloc, &msg, d);
    if (st == FX_OK) {
        const Onnx__TensorProto *tp = (const Onnx__TensorProto *)msg;
        char what[300];
        if (tp->name && tp->name[0])
            snprintf(what, sizeof what, "tensor '%.200s'", tp->name);
        else
            snprintf(what, sizeof what, "tensor");
        st = onnx_tensor_decode(tp, what, NULL, out, d);
        onnx_message_free(msg, &alloc);
    }
    if (d)
        d->file = saved;
    return st;
}

FxStatus tensor_pb_write_buffer(const Tensor *t, const char *tensor_name, uint8_t **data,
                                size_t *len, Diag *d)
{
    *data = NULL;
    *len = 0;
    uint64_t nbytes;
    FxStatus st = type_check_size(&t->type, &nbytes, d, "tensor");
    if (st != FX_OK)
        return st;
    if (!dtype_is_supported(t->type.dtype))
        return diag_error(d, FX_ERR_UNSUPPORTED, "cannot write a %s tensor",
                          dtype_name(t->type.dtype));
    int64_t dims[FX_MAX_RANK];
    for (int i = 0; i < t->type.rank; i++)
        dims[i] = t->type.dims[i];
    size_t name_len = tensor_name ? strlen(tensor_name) : 0;
    char *name = fx_malloc(name_len + 1);
    if (!name)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    if (name_len)
        memcpy(name, tensor_name, name_len);
    name[name_len] = '\0';

    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    tp.n_dims = (size_t)t->type.rank;
    tp.dims = dims;
    tp.has_data_type = 1;
    tp.data_type = (int32_t)t->type.dtype;
    tp.name = name_len ? name : NULL;
    tp.has_raw_data = 1;
    tp.raw_data.len = (size_t)nbytes;
    tp.raw_data.data = t->data;
    size_t size = onnx__tensor_proto__get_packed_size(&tp);
    uint8_t *buf = fx_malloc(size ? size : 1);
    if (!buf) {
        free(name);
        return diag_error(d, FX_ERR_NOMEM, "out of memory serializing a %zu-byte tensor", size);
    }
    size_t written = onnx__tensor_proto__pack(&tp, buf);
    free(name);
    if (written != size) {
        free(buf);
        return diag_error(d, FX_ERR_INVALID, "internal error: TensorProto packed to %zu bytes, "
                          "expected %zu", written, size);
    }
    *data = buf;
    *len = size;
    return FX_OK;
}
