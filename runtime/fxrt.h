/*
 * fxrt.h - the fxcc runtime: the kernels that the interpreter and the
 * generated code both call.
 *
 * Rules for everything behind this header: no allocation (callers pass every
 * buffer, including scratch space whose size a *_scratch_bytes function
 * reports), no printing, no global state, and no knowledge of the compiler's
 * IR.  Every public symbol starts with fxrt_ so that it cannot clash inside a
 * firmware image; generated code renames them NAME_fxrt_ (fxrt_names.h) so
 * that two models' copies do not clash with each other.  Shapes are passed as int64_t arrays in row-major order.
 *
 * The element-type enum uses ONNX's TensorProto.DataType numbering so that
 * the frontend can store the number it reads without a translation table.
 */
#ifndef FXRT_H
#define FXRT_H

#include <stddef.h>
#include <stdint.h>

#include "fxrt_config.h"
#include "fxrt_names.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FXRT_MAX_RANK 8

typedef enum FxrtDType {
    FXRT_DTYPE_UNDEFINED = 0,
    FXRT_DTYPE_FLOAT32 = 1,
    FXRT_DTYPE_UINT8 = 2,
    FXRT_DTYPE_INT8 = 3,
    FXRT_DTYPE_UINT16 = 4,
    FXRT_DTYPE_INT16 = 5,
    FXRT_DTYPE_INT32 = 6,
    FXRT_DTYPE_INT64 = 7,
    FXRT_DTYPE_STRING = 8,
    FXRT_DTYPE_BOOL = 9,
    FXRT_DTYPE_FLOAT16 = 10,
    FXRT_DTYPE_FLOAT64 = 11,
    FXRT_DTYPE_UINT32 = 12,
    FXRT_DTYPE_UINT64 = 13
} FxrtDType;

/* Size in bytes of one element, 0 for types the runtime cannot hold. */
size_t fxrt_dtype_size(FxrtDType t);
int fxrt_dtype_is_float(FxrtDType t);

/* Element access for the type-generic kernels: every supported type is read
 * as double (float kernels) or int64 (integer kernels) and written back. */
double fxrt_load_f64(FxrtDType t, const void *base, size_t i);
int64_t fxrt_load_i64(FxrtDType t, const void *base, size_t i);
void fxrt_store_f64(FxrtDType t, void *base, size_t i, double v);
void fxrt_store_i64(FxrtDType t, void *base, size_t i, int64_t v);

#ifdef __cplusplus
}
#endif

/* Kernel families, one header and one or more sources each. */
#include "fxrt_elementwise.h"
#include "fxrt_nn.h"
#include "fxrt_tensor.h"
#include "fxrt_reduce.h"
#include "fxrt_recurrent.h"

#endif
