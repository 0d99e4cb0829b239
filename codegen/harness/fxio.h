/*
 * fxio.h - tensor files for the main.c that fxcc emits: read .npy or ONNX
 * TensorProto .pb inputs, write .npy outputs.
 *
 * Standalone C99 (hosted: stdio and stdlib only) so that it can be copied
 * next to generated code; it knows nothing of fxcc.  Element types use the
 * ONNX TensorProto numbering (the same numbers as FXRT_DTYPE_*).  A file is
 * accepted only when its element type and shape equal what the caller asks
 * for exactly; every size read from a file is checked against the bytes
 * present, and any failure is reported as text in err, never as a crash.
 */
#ifndef FXIO_H
#define FXIO_H

#include <stddef.h>
#include <stdint.h>

/* ONNX TensorProto.DataType values this file handles. */
#define FXIO_DTYPE_FLOAT32 1
#define FXIO_DTYPE_UINT8 2
#define FXIO_DTYPE_INT8 3
#define FXIO_DTYPE_UINT16 4
#define FXIO_DTYPE_INT16 5
#define FXIO_DTYPE_INT32 6
#define FXIO_DTYPE_INT64 7
#define FXIO_DTYPE_BOOL 9
#define FXIO_DTYPE_FLOAT64 11
#define FXIO_DTYPE_UINT32 12
#define FXIO_DTYPE_UINT64 13

/* Highest rank accepted in a file or from the caller. */
#define FXIO_MAX_RANK 32

/* Bytes of one element (bool is one byte), 0 for a type not handled. */
size_t fxio_dtype_size(int dtype);
/* "float32", "int64", ...; "unsupported" for a type not handled. */
const char *fxio_dtype_name(int dtype);

/* Reads the tensor in path into dst, which holds prod(dims) elements of
 * dtype (dims may be NULL when rank is 0).  The format is chosen by content:
 * a file starting with the .npy magic is a .npy (versions 1-3, little-endian,
 * C order), anything else a serialized onnx.TensorProto (raw_data or the
 * typed field for dtype; external data refused).  Returns 0 on success; on
 * failure returns -1, writes a message naming path into err (errcap bytes,
 * err may be NULL) and leaves dst in an unspecified state. */
int fxio_read_tensor(const char *path, int dtype, int rank, const int64_t *dims, void *dst,
                     char *err, size_t errcap);

/* The same from memory; name is used in messages only. */
int fxio_read_tensor_buffer(const unsigned char *buf, size_t len, const char *name, int dtype,
                            int rank, const int64_t *dims, void *dst, char *err, size_t errcap);

/* Writes data (prod(dims) elements of dtype, C order) as a version 1.0 .npy.
 * Returns 0 on success, -1 with a message in err. */
int fxio_write_npy(const char *path, int dtype, int rank, const int64_t *dims, const void *data,
                   char *err, size_t errcap);

#endif
