/*
 * frontend.h - ONNX models and tensor files in and out.
 *
 * The frontend is the only part of fxcc that sees protobuf.  It turns a
 * ModelProto into a Graph (ir.h) and reads or writes tensors as .npy or ONNX
 * TensorProto .pb files.  Every size it reads from a file is checked against
 * the bytes actually present and against overflow before anything is
 * allocated; malformed input yields a Diag entry naming the file, never a
 * crash.
 */
#ifndef FXCC_FRONTEND_H
#define FXCC_FRONTEND_H

#include "../ir/ir.h"

/* Oldest default-domain opset accepted.  Ops whose pre-7 form differs from
 * the later one differ in attributes (consumed_inputs, broadcast, is_test,
 * Cast's string `to`), which the attribute check refuses by name; the others
 * (Elu, Not, GlobalAveragePool...) mean the same at every opset. */
#define FX_MIN_OPSET 1
/* Newest default-domain opset accepted: the newest fxcc has been checked
 * against (onnx 1.23), not the compiled schema's.  Most op versions after 18
 * only add element types, which the type checks refuse by name; a new
 * attribute or input is refused by name unless the op's canonicalize takes
 * it; an op whose meaning changed refuses its newer forms in canonicalize. */
#define FX_MAX_OPSET 28
/* Newest IR version read (onnx 1.23).  Newer IR versions add fields, which
 * protobuf-c skips, and element types, which are refused by name. */
#define FX_MAX_IR_VERSION 14

typedef struct OnnxLoadOptions {
    /* IR-3 models list initializers as graph inputs too.  By default such an
     * input is a get_attr constant holding its initializer, as it is in a
     * model from a newer exporter (and as other compilers read it); with
     * keep_input_defaults it stays a placeholder whose default value is the
     * initializer, an input the caller can override. */
    bool keep_input_defaults;
    /* Leaf ops (ir/ops/leaf.c).  With unknown_ops_as_leaves, an op fxcc does
     * not implement (another domain's, or an unknown default-domain op type)
     * becomes a Leaf node instead of an error; control flow, sequences and
     * data-dependent ops stay errors.  leaf_ops names ops that become leaves
     * in any case: "OP" (any domain) or "DOMAIN.OP". */
    bool unknown_ops_as_leaves;
    const char *const *leaf_ops;
    int num_leaf_ops;
    /* "VALUE=TYPE" (y=float32[1, 8]): the type of a leaf's output value,
     * taken before the model's value_info and then its graph outputs.  Each
     * must name a leaf output. */
    const char *const *leaf_types;
    int num_leaf_types;
} OnnxLoadOptions;

/* ------------------------------------------------------------------------- */
/* onnx_load.c                                                                */
/* ------------------------------------------------------------------------- */

/* Loads a model.  External data files are resolved next to the model and may
 * not leave the model's folder.  Every unsupported op is reported (all of
 * them, with node names) before FX_ERR_UNSUPPORTED is returned. */
FxStatus onnx_load(const char *path, const OnnxLoadOptions *opt, Graph **out, Diag *d);
/* The same from memory; base_dir (may be NULL: external data refused) is
 * where external data files are looked up. */
FxStatus onnx_load_buffer(const uint8_t *data, size_t len, const char *name,
                          const char *base_dir, const OnnxLoadOptions *opt, Graph **out,
                          Diag *d);

/* ------------------------------------------------------------------------- */
/* onnx_save.c                                                                */
/* ------------------------------------------------------------------------- */

/* Writes g, whose nodes must all be plain ONNX ops (the imported form, e.g.
 * after pruning), as an ONNX model at the graph's opset: constants as
 * initializers, inputs and outputs with their shapes and ONNX names.  A
 * fused, internal or leaf node is refused naming it; the file is written
 * only on success (file_write_all). */
FxStatus onnx_save(const Graph *g, const char *path, Diag *d);
FxStatus onnx_save_buffer(const Graph *g, uint8_t **data, size_t *len, Diag *d);

/* ------------------------------------------------------------------------- */
/* tensor_file.c: dispatch on the file's extension                            */
/* ------------------------------------------------------------------------- */

/* ".npy" or ".pb"; anything else is refused with a message. */
FxStatus tensor_file_read(const char *path, Tensor **out, Diag *d);
FxStatus tensor_file_write(const char *path, const Tensor *t, Diag *d);
/* Reads a whole file into memory (size-checked); caller frees *data. */
FxStatus file_read_all(const char *path, uint8_t **data, size_t *len, Diag *d);
/* Writes atomically: to "path.tmp.PID", then rename. */
FxStatus file_write_all(const char *path, const void *data, size_t len, Diag *d);

/* ------------------------------------------------------------------------- */
/* npy.c: NumPy .npy, versions 1.0-3.0, little-endian, C order                */
/* ------------------------------------------------------------------------- */

/* float32, float64, int64, int32, int16, int8, uint8, uint16, uint32,
 * uint64, bool. */
FxStatus npy_read_buffer(const uint8_t *data, size_t len, const char *name, Tensor **out,
                         Diag *d);
/* Serializes t into a malloc'd buffer. */
FxStatus npy_write_buffer(const Tensor *t, uint8_t **data, size_t *len, Diag *d);

/* ------------------------------------------------------------------------- */
/* tensor_pb.c: a serialized onnx.TensorProto                                 */
/* ------------------------------------------------------------------------- */

FxStatus tensor_pb_read_buffer(const uint8_t *data, size_t len, const char *name,
                               Tensor **out, Diag *d);
FxStatus tensor_pb_write_buffer(const Tensor *t, const char *tensor_name, uint8_t **data,
                                size_t *len, Diag *d);

#endif
