/*
 * onnx_internal.h - what the frontend's source files share and nothing else
 * sees: the protobuf-c plumbing (a budgeted allocator and a wire-format
 * pre-check that bounds nesting before protobuf-c's recursive unpacker runs),
 * the TensorProto decoder used by both the model loader and the .pb tensor
 * reader, and small path helpers.
 *
 * One section per source file, as in ir.h.
 */
#ifndef FXCC_ONNX_INTERNAL_H
#define FXCC_ONNX_INTERNAL_H

#include "frontend.h"
#include "onnx.pb-c.h"

/* ------------------------------------------------------------------------- */
/* onnx_wire.c: protobuf plumbing                                             */
/* ------------------------------------------------------------------------- */

/* A ProtobufCAllocator that refuses to hand out more than `budget` bytes in
 * total.  protobuf-c turns every empty sub-message into a struct of up to a
 * few hundred bytes, so a small file could otherwise claim gigabytes; the
 * budget makes such a file fail as "too large" instead of exhausting memory. */
typedef struct OnnxAllocator {
    ProtobufCAllocator base; /* pass &a.base to protobuf-c */
    size_t budget;
    size_t used;
    bool exhausted; /* an allocation was refused for the budget */
    bool out_of_memory; /* an allocation within the budget failed */
} OnnxAllocator;

/* The budget is derived from the input length (a generous multiple of it). */
void onnx_allocator_init(OnnxAllocator *a, size_t input_len);

/* Walks the serialized message iteratively: every tag, varint and length must
 * be well formed and inside its enclosing message, groups are refused, and
 * message nesting is limited (protobuf-c's unpacker recurses once per level
 * and has no limit of its own).  On failure reports FX_ERR_FORMAT with the
 * byte offset into `file`. */
FxStatus onnx_wire_check(const uint8_t *data, size_t len,
                         const ProtobufCMessageDescriptor *desc, const char *file, Diag *d);

/* Runs onnx_wire_check and then protobuf-c's unpacker under an
 * OnnxAllocator.  On success *msg must be released with onnx_message_free. */
FxStatus onnx_message_unpack(const uint8_t *data, size_t len,
                             const ProtobufCMessageDescriptor *desc, const char *file,
                             const char *what, OnnxAllocator *alloc, ProtobufCMessage **msg,
                             Diag *d);
void onnx_message_free(ProtobufCMessage *msg, OnnxAllocator *alloc);

/* ------------------------------------------------------------------------- */
/* tensor_pb.c: TensorProto -> Tensor                                         */
/* ------------------------------------------------------------------------- */

/* Name of an ONNX TensorProto.DataType number, including the ones fxcc does
 * not hold (bfloat16, complex64, float8...). */
const char *onnx_dtype_name(int32_t onnx_type);

/* Decodes a TensorProto into a new Tensor.  `what` names the tensor in
 * messages ("initializer 'fc.weight'").  Data may come from raw_data, the
 * typed fields (float_data, int32_data, int64_data, double_data,
 * uint64_data) or, when base_dir is not NULL, an external file below
 * base_dir.  Every dim and count is checked, and the bytes present must match
 * the product of the dims, before anything is allocated. */
FxStatus onnx_tensor_decode(const Onnx__TensorProto *tp, const char *what, const char *base_dir,
                            Tensor **out, Diag *d);

/* ------------------------------------------------------------------------- */
/* tensor_file.c: paths                                                       */
/* ------------------------------------------------------------------------- */

/* The folder part of path ("." when it has none), malloc'd; NULL on OOM. */
char *path_dirname(const char *path);

/* Reads an external-data tensor: `location` is resolved relative to
 * base_dir and must stay inside it (absolute paths, ".." components and
 * symlinks leading outside are refused); the region [offset, offset + nbytes)
 * must lie inside the file; without an explicit length (to_end) the region
 * runs to the end of the file, as in onnx's own loader, and must be exactly
 * nbytes long.  Allocates *out only after those checks. */
FxStatus external_tensor_read(const char *base_dir, const char *location, uint64_t offset,
                              bool to_end, const TensorType *type, uint64_t nbytes,
                              const char *what, Tensor **out, Diag *d);

#endif
