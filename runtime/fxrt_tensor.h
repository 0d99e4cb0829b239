/*
 * fxrt_tensor.h - data-movement kernels: transpose, slice, concat, split,
 * expand, tile, pad, depth/space rearrangements, gathers and scatters,
 * triangular masks, one-hot, fills and ranges.  See fxrt.h for the rules.
 *
 * Almost every kernel here moves bytes without looking at them, so it takes
 * the element size instead of a dtype and works on every type the runtime
 * holds; the few that compute (scatter reductions, one-hot, range) take a
 * FxrtDType.  Shapes are int64 arrays, ranks are at most FXRT_MAX_RANK, and
 * the caller has checked that every shape fits together (the compiler's
 * shape inference does that).  Kernels that read indices from data check
 * each one and return FXRT_INDEX_ERROR instead of reading out of bounds;
 * they return FXRT_INDEX_OK (0) otherwise.  Output buffers never alias
 * inputs unless a kernel says so.
 */
#ifndef FXRT_TENSOR_H
#define FXRT_TENSOR_H

#include "fxrt.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { FXRT_INDEX_OK = 0, FXRT_INDEX_ERROR = -1 };

/* out[i] = *value for i < n. */
void fxrt_fill(size_t elem_size, int64_t n, const void *value, void *out);

/* The general copy engine behind transpose and slice: out is contiguous with
 * shape dims[rank]; element (i0, ..., ik) is read from
 * in + sum(i_d * in_strides[d]) elements.  Strides may be negative or zero. */
void fxrt_copy_strided(size_t elem_size, int rank, const int64_t *dims, const void *in,
                       const int64_t *in_strides, void *out);

/* out = in.transpose(perm): out_dims[i] = in_dims[perm[i]].  Size-1 axes are
 * dropped and axes that stay neighbours are merged first, so NCHW<->NHWC and
 * the like run as cache-blocked 2-D transposes. */
void fxrt_transpose(size_t elem_size, int rank, const int64_t *in_dims, const int64_t *perm,
                    const void *in, void *out);
void fxrt_transpose_f32(int rank, const int64_t *in_dims, const int64_t *perm,
                        const float *in, float *out);

/* out[o] = in[starts + o * steps] per axis, out of shape out_dims.  starts
 * and steps are per axis of the full rank, already clamped (ONNX Slice
 * semantics are resolved by the caller); steps may be negative. */
void fxrt_slice(size_t elem_size, int rank, const int64_t *in_dims, const int64_t *starts,
                const int64_t *steps, const int64_t *out_dims, const void *in, void *out);

/* Concatenation along an axis, with the shape folded to (outer, axis, inner):
 * input k has shape (outer, axis_dims[k], inner). */
void fxrt_concat(size_t elem_size, int64_t outer, int64_t inner, int num_inputs,
                 const int64_t *axis_dims, const void *const *ins, void *out);
/* The inverse: output k gets shape (outer, axis_dims[k], inner); the input's
 * axis is the sum of axis_dims. */
void fxrt_split(size_t elem_size, int64_t outer, int64_t inner, int num_outputs,
                const int64_t *axis_dims, const void *in, void *const *outs);

/* Broadcast copy (ONNX Expand): in_dims has the output's rank (left-padded
 * with 1s) and each in_dims[d] is 1 or out_dims[d]. */
void fxrt_expand(size_t elem_size, int rank, const int64_t *in_dims, const int64_t *out_dims,
                 const void *in, void *out);
/* ONNX Tile: out_dims[d] = in_dims[d] * repeats[d]. */
void fxrt_tile(size_t elem_size, int rank, const int64_t *in_dims, const int64_t *out_dims,
               const void *in, void *out);

typedef enum FxrtPadMode {
    FXRT_PAD_CONSTANT,
    FXRT_PAD_REFLECT, /* mirror without repeating the edge: numpy "reflect" */
    FXRT_PAD_EDGE,    /* repeat the edge element */
    FXRT_PAD_WRAP     /* periodic */
} FxrtPadMode;

/* ONNX Pad.  pads holds 2*rank values, all begins then all ends; negative
 * values crop.  out_dims[d] = in_dims[d] + pads[d] + pads[rank + d] >= 0.
 * value (one element) is used by FXRT_PAD_CONSTANT only.  The other modes
 * need in_dims[d] > 0 on every axis whose output is not empty. */
void fxrt_pad(size_t elem_size, int rank, const int64_t *in_dims, const int64_t *pads,
              FxrtPadMode mode, const void *value, const void *in, void *out);

/* NCHW DepthToSpace, mode DCR (crd == 0) or CRD (crd != 0):
 * (n, c, h, w) -> (n, c / (b*b), h*b, w*b). */
void fxrt_depth_to_space(size_t elem_size, int64_t n, int64_t c, int64_t h, int64_t w,
                         int64_t blocksize, int crd, const void *in, void *out);
/* NCHW SpaceToDepth: (n, c, h, w) -> (n, c*b*b, h/b, w/b). */
void fxrt_space_to_depth(size_t elem_size, int64_t n, int64_t c, int64_t h, int64_t w,
                         int64_t blocksize, const void *in, void *out);

/* ONNX Trilu over `batch` matrices of rows x cols: keeps the elements with
 * col - row >= k (upper) or col - row <= k (lower), zeroes the others. */
void fxrt_trilu(size_t elem_size, int64_t batch, int64_t rows, int64_t cols, int64_t k,
                int upper, const void *in, void *out);

/* ONNX EyeLike: a rows x cols matrix of zeros with *one on diagonal k. */
void fxrt_eye_like(size_t elem_size, int64_t rows, int64_t cols, int64_t k, const void *one,
                   void *out);

/* ONNX Range: out[i] = start + i * delta for i < n, in dtype t (float32,
 * float64, int8..int64, uint8..uint64); start and delta point to one
 * element of type t.  Returns FXRT_INDEX_ERROR for other types. */
int fxrt_range(FxrtDType t, const void *start, const void *delta, int64_t n, void *out);

/* ------------------------------------------------------------------------- */
/* Index-driven kernels (fxrt_tensor_index.c).  index_type is                  */
/* FXRT_DTYPE_INT32 or FXRT_DTYPE_INT64; negative indices count from the end.  */
/* ------------------------------------------------------------------------- */

/* ONNX Gather with data folded to (outer, axis_dim, inner): out has shape
 * (outer, num_indices, inner). */
int fxrt_gather(size_t elem_size, int64_t outer, int64_t axis_dim, int64_t inner,
                const void *data, FxrtDType index_type, const void *indices,
                int64_t num_indices, void *out);

/* ONNX GatherElements: data and indices have the same rank; out has the
 * indices' shape; index_dims[d] <= data_dims[d] for d != axis. */
int fxrt_gather_elements(size_t elem_size, int rank, const int64_t *data_dims,
                         const int64_t *index_dims, int axis, const void *data,
                         FxrtDType index_type, const void *indices, void *out);

/* ONNX GatherND.  data has shape data_dims[data_rank]; the first batch_dims
 * axes are batch axes; each batch holds `tuples` index tuples of length k
 * (contiguous in indices), each selecting a slab of
 * prod(data_dims[batch_dims + k:]) elements. */
int fxrt_gather_nd(size_t elem_size, int data_rank, const int64_t *data_dims, int batch_dims,
                   int64_t k, int64_t tuples, const void *data, FxrtDType index_type,
                   const void *indices, void *out);

typedef enum FxrtScatterReduce {
    FXRT_SCATTER_NONE,
    FXRT_SCATTER_ADD,
    FXRT_SCATTER_MUL,
    FXRT_SCATTER_MAX,
    FXRT_SCATTER_MIN
} FxrtScatterReduce;

/* ONNX ScatterElements: out = data, then out[idx along axis] (op)= updates.
 * indices and updates share index_dims, of data's rank.  out may equal
 * data (in place).  On FXRT_INDEX_ERROR out is partly written. */
int fxrt_scatter_elements(FxrtDType t, int rank, const int64_t *data_dims,
                          const int64_t *index_dims, int axis, FxrtScatterReduce reduce,
                          const void *data, FxrtDType index_type, const void *indices,
                          const void *updates, void *out);

/* ONNX ScatterND: out = data, then each of the `tuples` index tuples of
 * length k selects a slab of prod(data_dims[k:]) elements that gets the next
 * slab of updates.  out may equal data. */
int fxrt_scatter_nd(FxrtDType t, int data_rank, const int64_t *data_dims, int64_t k,
                    int64_t tuples, FxrtScatterReduce reduce, const void *data,
                    FxrtDType index_type, const void *indices, const void *updates,
                    void *out);

/* ONNX OneHot with indices folded to (outer, inner) and the new axis of size
 * depth between them: out has shape (outer, depth, inner).  Indices may be of
 * any integer or float type (floats are truncated); an index outside
 * [-depth, depth) gives an all-off column.  off/on point to one element. */
void fxrt_onehot(size_t elem_size, FxrtDType index_type, const void *indices, int64_t outer,
                 int64_t depth, int64_t inner, const void *off_value, const void *on_value,
                 void *out);

#ifdef __cplusplus
}
#endif

#endif
