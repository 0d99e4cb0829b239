/*
 * fxrt_nn.h - neural-network kernels: GEMM and batched matrix products,
 * convolutions (plain, transposed, integer), pools, normalizations, the
 * softmax family, quantized matrix products and Einsum's contraction loop.
 * See fxrt.h for the rules that hold for all of the runtime.
 *
 * Layouts are ONNX's: activations NC[D]HW, row-major, contiguous.  Shapes
 * travel in small parameter structs whose fields are plain integers, so the
 * generated code can hold them as `static const` initializers computed by
 * the compiler.  Every kernel trusts its parameters (the compiler's shape
 * inference has checked them); none allocates: a kernel that needs working
 * memory takes a scratch pointer whose size a *_scratch_* function reports.
 *
 * float32 is the fast path.  The *_f64 and *_generic variants exist so that
 * the reference interpreter can run every type ONNX allows; they are simple
 * loops, not tuned.
 */
#ifndef FXRT_NN_H
#define FXRT_NN_H

#include "fxrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* fxrt_nn_epilogue.c: what a GEMM or convolution does to its output tile     */
/* ------------------------------------------------------------------------- */

/* The activations an epilogue can apply, with the formulas of the runtime's
 * elementwise kernels.  GELU is the exact form scaled by alpha,
 * alpha x (1 + erf(x / sqrt 2)): 0.5 is GELU itself; other scales come from
 * a constant factor that a fold moved into or out of the chain. */
typedef enum FxrtActivation {
    FXRT_ACT_NONE,
    FXRT_ACT_RELU,
    FXRT_ACT_CLIP,         /* min(max(x, alpha), beta) */
    FXRT_ACT_LEAKY_RELU,   /* x < 0 ? alpha x : x */
    FXRT_ACT_SIGMOID,
    FXRT_ACT_HARD_SWISH,   /* x * hard_sigmoid(x) with 1/6, 0.5 */
    FXRT_ACT_HARD_SIGMOID, /* clamp(alpha x + beta, 0, 1) */
    FXRT_ACT_TANH,
    FXRT_ACT_GELU,
    FXRT_ACT_SILU          /* x * sigmoid(x) */
} FxrtActivation;

/* Applied to every output element while its tile is still in cache:
 *
 *     y = act(acc + bias + residual)      (residual_after == 0)
 *     y = act(acc + bias) + residual      (residual_after == 1)
 *
 * For a GEMM, element (i, j) of C reads bias[i * bias_row_stride +
 * j * bias_col_stride] (strides 0 broadcast: 0/1 is a per-column bias, 1/0
 * per row) and residual[i * residual_ld + j].  For a convolution bias is
 * per output channel and residual has Y's shape; the kernel sets the strides
 * itself.  NULL pointers mean no bias / no residual; a NULL epilogue or a
 * zeroed one does nothing. */
typedef struct FxrtEpilogue {
    const float *bias;
    int64_t bias_row_stride, bias_col_stride;
    const float *residual;
    int64_t residual_ld;
    int32_t activation; /* FxrtActivation */
    int32_t residual_after;
    /* clip's min and max, leaky_relu's alpha, hard_sigmoid's, gelu's scale */
    float alpha, beta;
} FxrtEpilogue;

/* True when ep changes anything. */
int fxrt_epilogue_active(const FxrtEpilogue *ep);
/* Applies ep to the rows x cols block of C at (row0, col0) of ep's matrix,
 * c pointing at that block's first element (row stride ldc). */
void fxrt_epilogue_apply_f32(const FxrtEpilogue *ep, int64_t row0, int64_t col0, int64_t rows,
                             int64_t cols, float *c, int64_t ldc);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_gemm.c: matrix products                                            */
/* ------------------------------------------------------------------------- */

/* C = alpha * op(A) * op(B) + beta * C, row-major, BLAS semantics: op(A) is
 * M x K (A is K x M when trans_a), op(B) is K x N (N x K when trans_b), C is
 * M x N with row stride ldc.  When beta == 0, C is not read (it may hold
 * garbage or NaN).  With FXRT_USE_CBLAS this is cblas_sgemm (OpenBLAS);
 * otherwise a portable cache-blocked loop that accumulates in float. */
void fxrt_gemm_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                   float *c, int64_t ldc);
/* The same followed by epilogue ep (NULL: none) on each tile of C as it is
 * finished: at the store of the portable microkernel, and after each
 * cblas_sgemm call on a block of rows small enough to stay in L2.
 * fxrt_gemm_f32 is this with ep == NULL. */
void fxrt_gemm_ep_f32(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc, const FxrtEpilogue *ep);
/* C (m x n, row stride ldc) = A (m x k, row-major) x B where row p of B is
 * the n floats at b + b_rows[p]: rows may overlap, so a stride-1
 * convolution multiplies straight out of its (padded) input, each kernel tap
 * one row offset (fxrt_nn_conv.c).  The portable microkernel (AVX2 on host),
 * no epilogue. */
void fxrt_gemm_rows_f32(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                        const int64_t *b_rows, float *c, int64_t ldc);
/* The same in double (portable loop, double accumulation). */
void fxrt_gemm_f64(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                   const double *a, int64_t lda, const double *b, int64_t ldb, double beta,
                   double *c, int64_t ldc);
/* Any other numeric type t (integers accumulate in int64 and wrap like
 * ONNX; alpha and beta are applied in double and the result is converted
 * back, saturating).  Float types are routed to the kernels above. */
void fxrt_gemm_generic(FxrtDType t, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                       double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                       double beta, void *c, int64_t ldc);

/* Broadcasts a bias of shape bias_rows x bias_cols (each 1 or m / n,
 * row-major) into C (m x n, row stride ldc): Gemm's C input before the
 * product is accumulated with beta. */
void fxrt_bias_fill_f32(int64_t m, int64_t n, const float *bias, int64_t bias_rows,
                        int64_t bias_cols, float *c, int64_t ldc);

/* Numpy-style batched matrix product (ONNX MatMul).  The batch dims are the
 * broadcast of both operands' leading dims; a_strides / b_strides give, per
 * batch dim, the element stride of that operand (0 where it broadcasts).
 * Each matrix is contiguous: A is m x k, B is k x n, Y is batch x m x n. */
typedef struct FxrtMatMulParams {
    int32_t batch_rank;
    int64_t batch_dims[FXRT_MAX_RANK];
    int64_t a_strides[FXRT_MAX_RANK];
    int64_t b_strides[FXRT_MAX_RANK];
    int64_t m, n, k;
} FxrtMatMulParams;

/* Fills p from the operand shapes with ONNX MatMul rules (a 1-D A is a row,
 * a 1-D B a column).  When B is shared by every batch and A is not
 * broadcast, the batch is folded into M so that one GEMM does all the work.
 * Returns 0, or -1 when the shapes do not fit (inner dims or batch dims). */
int fxrt_matmul_params_init(FxrtMatMulParams *p, int a_rank, const int64_t *a_dims, int b_rank,
                            const int64_t *b_dims);
/* The batch walk, for callers that run their own per-matrix kernel: the
 * number of products and the element offsets of product `index` into A and
 * B (Y's offset is index * m * n). */
int64_t fxrt_matmul_batch_count(const FxrtMatMulParams *p);
void fxrt_matmul_batch_offsets(const FxrtMatMulParams *p, int64_t index, int64_t *a_off,
                               int64_t *b_off);
void fxrt_matmul_f32(const FxrtMatMulParams *p, const float *a, const float *b, float *y);
/* A batch of products whose operands and result are strided views, so
 * that transposes around a MatMul need no copies (ir/ops/nn_gemm.c's
 * TransposedMatMul): product e (batch dims walked row-major) is
 * Y_e = op(A_e) op(B_e), each matrix in BLAS layout at its own offset:
 * A_e at a + sum_r i_r * a_strides[r] (op(A) m x k, lda, trans_a), B_e
 * likewise (op(B) k x n), Y_e at y + sum_r i_r * y_strides[r] (m x n, row
 * stride ldc).  A zero stride broadcasts that operand. */
typedef struct FxrtStridedMatMul {
    int32_t batch_rank;
    int64_t batch_dims[FXRT_MAX_RANK];
    int64_t a_strides[FXRT_MAX_RANK];
    int64_t b_strides[FXRT_MAX_RANK];
    int64_t y_strides[FXRT_MAX_RANK];
    int64_t m, n, k;
    int32_t trans_a, trans_b;
    int64_t lda, ldb, ldc;
} FxrtStridedMatMul;
void fxrt_matmul_strided_f32(const FxrtStridedMatMul *p, const float *a, const float *b,
                             float *y);
/* Type-generic matmul (float64 and the integer types). */
void fxrt_matmul_generic(FxrtDType t, const FxrtMatMulParams *p, const void *a, const void *b,
                         void *y);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_conv.c: convolutions                                               */
/* ------------------------------------------------------------------------- */

#define FXRT_CONV_MAX_SPATIAL 3

/* Shapes of a convolution.  Spatial arrays are right-aligned: a 2-D conv
 * uses entries 1 and 2 (H, W) and a 1-D conv entry 2 only; unused leading
 * entries hold size 1, kernel 1, stride 1, dilation 1 and pad 0.  For a
 * convolution, in_size is X's spatial shape and out_size Y's; for a
 * transposed convolution the same (in_size is X, out_size is Y).  pad_begin
 * is the padding before the first element; padding at the end follows from
 * out_size.  col_tile bounds the im2col scratch: the general path unfolds
 * at most col_tile output positions at a time (0 = all of them).
 *
 * Conv:          X [batch, in_channels, in...], W [out_channels,
 *                in_channels/groups, kernel...], B [out_channels] or NULL,
 *                Y [batch, out_channels, out...].
 * ConvTranspose: W is [in_channels, out_channels/groups, kernel...]. */
typedef struct FxrtConvParams {
    int64_t batch, in_channels, out_channels, groups;
    int64_t in_size[FXRT_CONV_MAX_SPATIAL];
    int64_t out_size[FXRT_CONV_MAX_SPATIAL];
    int64_t kernel[FXRT_CONV_MAX_SPATIAL];
    int64_t stride[FXRT_CONV_MAX_SPATIAL];
    int64_t dilation[FXRT_CONV_MAX_SPATIAL];
    int64_t pad_begin[FXRT_CONV_MAX_SPATIAL];
    int64_t col_tile;
} FxrtConvParams;

/* The kernel taps k in [*lo, *hi) of a window that lie inside an input of
 * length `in`, for output position o: tap k reads o * stride - pad +
 * k * dilation.  Shared by the convolution and pool loops, which ask once
 * per output row or border pixel: inline, and without a division at
 * dilation 1 (a 64-bit division and the call were 5% of a small model's
 * run).  A small build divides ints: no 64-bit division routine linked. */
#if FXRT_SMALL_KERNELS
typedef int FxrtWindowIndex;
#else
typedef int64_t FxrtWindowIndex;
#endif
static inline FxrtWindowIndex fxrt_window_ceil_div(FxrtWindowIndex a, FxrtWindowIndex d)
{
    return d == 1 ? a : (a + d - 1) / d;
}
static inline void fxrt_window_range(int64_t o, int64_t stride, int64_t pad, int64_t dilation,
                                     int64_t in, int64_t kernel, int64_t *lo, int64_t *hi)
{
    FxrtWindowIndex start = (FxrtWindowIndex)(o * stride - pad); /* input position of tap 0 */
    FxrtWindowIndex dil = (FxrtWindowIndex)dilation, extent = (FxrtWindowIndex)in;
    int64_t l = start < 0 ? fxrt_window_ceil_div(-start, dil) : 0;
    int64_t h = extent - start > 0 ? fxrt_window_ceil_div(extent - start, dil) : 0;
    if (h > kernel)
        h = kernel;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

/* The input positions that `out` consecutive outputs' windows span, from
 * the first one's tap 0 to the last one's last tap: the length of a padded
 * copy that holds everything they read. */
static inline int64_t fxrt_window_extent(int64_t out, int64_t stride, int64_t kernel,
                                         int64_t dilation)
{
    return (out - 1) * stride + (kernel - 1) * dilation + 1;
}

/* [*lo, *hi): the outputs of a dimension of length `out` whose every tap
 * lies inside the input (an empty range when none do): o * stride - pad
 * >= 0 and o * stride - pad + (kernel - 1) * dilation <= in - 1.  Padding
 * needs no test on them. */
static inline void fxrt_window_inner(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                     int64_t dilation, int64_t pad, int64_t *lo, int64_t *hi)
{
    FxrtWindowIndex s = (FxrtWindowIndex)stride;
    /* the largest o * stride allowed */
    FxrtWindowIndex last = (FxrtWindowIndex)(in - 1 - (kernel - 1) * dilation + pad);
    int64_t l = fxrt_window_ceil_div((FxrtWindowIndex)pad, s);
    int64_t h = last < 0 ? 0 : last / s + 1;
    if (l > out)
        l = out;
    if (h > out)
        h = out;
    if (h < l)
        h = l;
    *lo = l;
    *hi = h;
}

/* Which algorithm fxrt_conv_f32 uses for p. */
typedef enum FxrtConvAlgo {
    FXRT_CONV_ALGO_GEMM_1X1,  /* 1x1 kernel, stride 1, no padding: W x X directly */
    FXRT_CONV_ALGO_DEPTHWISE, /* groups == in_channels: a direct loop */
    FXRT_CONV_ALGO_IM2COL     /* everything else: unfold, then GEMM */
} FxrtConvAlgo;
FxrtConvAlgo fxrt_conv_algo(const FxrtConvParams *p);

/* Floats of scratch fxrt_conv_f32 needs (0 for the 1x1 and depthwise paths).
 * The im2col path unfolds at most col_tile output positions at a time, and
 * fewer when that many would not keep the column buffer and the output tile
 * in L2. */
int64_t fxrt_conv_scratch_floats(const FxrtConvParams *p);
/* Y = epilogue(conv(X, W)), dispatching on fxrt_conv_algo; ep (NULL: none)
 * holds the bias per output channel and a residual of Y's shape, and is
 * applied to each output tile (GEMM paths) or output row (depthwise). */
void fxrt_conv_f32(const FxrtConvParams *p, const float *x, const float *w,
                   const FxrtEpilogue *ep, float *y, float *scratch);
/* The individual paths, for generated code that knows which one applies. */
void fxrt_conv_1x1_f32(const FxrtConvParams *p, const float *x, const float *w,
                       const FxrtEpilogue *ep, float *y);
void fxrt_conv_depthwise_f32(const FxrtConvParams *p, const float *x, const float *w,
                             const FxrtEpilogue *ep, float *y);
void fxrt_conv_im2col_f32(const FxrtConvParams *p, const float *x, const float *w,
                          const FxrtEpilogue *ep, float *y, float *scratch);

/* Transposed convolution: a GEMM per group (W^T x X) into column form, then
 * a scatter-add (col2im) into Y.  Scratch: (out_channels/groups) * kernel
 * elements * input positions floats. */
int64_t fxrt_conv_transpose_scratch_floats(const FxrtConvParams *p);
void fxrt_conv_transpose_f32(const FxrtConvParams *p, const float *x, const float *w,
                             const float *bias, float *y, float *scratch);

/* ConvInteger: Y (int32) = conv(X - x_zp, W - w_zp), where padding reads as
 * x_zp (contributing 0).  x_type and w_type are FXRT_DTYPE_UINT8 or INT8;
 * w_zp holds 1 (per tensor) or out_channels (per channel) values.  Sums
 * wrap modulo 2^32 like a 32-bit accumulator.  A direct loop, no scratch. */
void fxrt_conv_integer(const FxrtConvParams *p, FxrtDType x_type, const void *x, int32_t x_zp,
                       FxrtDType w_type, const void *w, const int32_t *w_zp,
                       int64_t w_zp_count, int32_t *y);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_nchwc*.c: 2-D convolutions in the channel-blocked layout           */
/* ------------------------------------------------------------------------- */

/* The layout that the -O2 layout pass (opt/pass_nchwc_layout.c) gives the
 * activations between 2-D convolutions, NCHWc: NCHW with the channels cut
 * into blocks of FXRT_NCHWC_BLOCK, the block innermost, shape [N, CB, H, W,
 * 8] with CB = ceil(C / 8).  Channel c of pixel (h, w) of image n is float
 * ((n * CB + c / 8) * H * W + h * W + w) * 8 + c % 8.  One vector holds one
 * pixel of a block, so a convolution broadcasts an input value into eight
 * output channels at once and a depthwise convolution works on eight
 * channels per instruction however narrow the image is.
 *
 * Lanes past C (when C % 8 != 0) are padding.  fxrt_to_nchwc_f32 writes
 * zeros there and every kernel writes every lane of its output, so padding
 * lanes always hold finite values; packed weights and padded biases are
 * zero there, so padding never reaches a real channel. */
#define FXRT_NCHWC_BLOCK 8
/* Two output blocks, the unit of the packed weights of a group-1 convolution. */
#define FXRT_NCHWC_PAIR (2 * FXRT_NCHWC_BLOCK)

/* ceil(channels / FXRT_NCHWC_BLOCK). */
int64_t fxrt_nchwc_blocks(int64_t channels);
/* NCHW [batch, channels, spatial] <-> NCHWc [batch, CB, spatial, 8]. */
void fxrt_to_nchwc_f32(int64_t batch, int64_t channels, int64_t spatial, const float *x,
                       float *y);
void fxrt_from_nchwc_f32(int64_t batch, int64_t channels, int64_t spatial, const float *x,
                         float *y);
/* NCHWc [batch, CB, spatial, 8] <-> NHWC [batch, spatial, channels], the
 * layout of a channels-last block (ConvNeXt's LayerNorm and Linear layers):
 * one pass each, where FromNCHWc and a Transpose would take two. */
void fxrt_nchwc_to_nhwc_f32(int64_t batch, int64_t channels, int64_t spatial, const float *x,
                            float *y);
void fxrt_nhwc_to_nchwc_f32(int64_t batch, int64_t channels, int64_t spatial, const float *x,
                            float *y);

/* One input of fxrt_channel_gather_f32: `channels` real channels, plain
 * [batch, channels, spatial] or, when blocked, NCHWc [batch,
 * ceil(channels / 8), spatial, 8]. */
typedef struct FxrtGatherSource {
    const float *x;
    int64_t channels;
    int blocked;
} FxrtGatherSource;

/* Channel c < channels of Y is channel from_channel[c] of source
 * from_source[c], in every image and pixel: any composition of channel
 * slices, concatenations, shuffles and reorders in one pass.  Y is plain
 * [batch, channels, spatial] or, when y_blocked, NCHWc with zeros in its
 * padding lanes; a blocked source's padding lanes are never read.  Y must
 * not overlap a source. */
void fxrt_channel_gather_f32(int64_t batch, int64_t spatial, const FxrtGatherSource *sources,
                             int64_t channels, const int32_t *from_source,
                             const int32_t *from_channel, int y_blocked, float *y);

/* A 2-D convolution (FxrtConvParams entries 1 and 2; entry 0 is size 1)
 * with Y in NCHWc, and groups either 1 or in_channels == out_channels
 * (depthwise).  in_channels and out_channels are the real counts.  X is
 * NCHWc when x_blocked, else plain NCHW (a first layer with few channels,
 * groups 1 only).  W is packed by fxrt_conv_nchwc_pack_f32 (the compiler
 * does that once, at compile time):
 *
 *   groups 1, X blocked:  [OCB / 2][ICB][KH][KW][8 input lanes][2 x 8 output lanes]
 *   groups 1, X plain:    [OCB / 2][KH][KW][in_channels][2 x 8 output lanes]
 *   depthwise:            [CB][KH][KW][8 lanes]
 *
 * For groups 1 the output blocks go in pairs (OCB rounded up to even, the
 * missing block's weights zero), the pair's 16 weights of one input lane
 * and tap contiguous: one AVX-512 load, where separate blocks cost two
 * loads and an insert per pair (8-20% of the tiles' speed on the layers of
 * bench/nchwc_kernels.c).  fxrt_conv_nchwc_packed_index gives the position
 * of weight (oc, ic, tap), ic counted within the group.
 *
 * ep (NULL: none): bias holds OCB * 8 floats (padding lanes zero), the
 * residual is NCHWc of Y's shape; its strides are ignored (the kernel sets
 * them).  The residual may be Y itself (one buffer) when it is added before
 * the activation (residual_after 0): the sums then start from it.
 *
 * scratch holds fxrt_conv_nchwc_scratch_floats(p, x_blocked) floats, which
 * is nonzero only for a 1x1 convolution without padding whose input is over
 * 128 KiB, strided, or at stride 1 of 256 channels or more, over 1 MiB and
 * no smaller than its weights (X blocked, groups 1, not on the small
 * kernels): a slab of output rows' worth of the input pixels it reads (at
 * most its whole image; every stride-th pixel when strided), which then
 * runs as a stride-1 pointwise convolution.  scratch may be NULL; such a
 * layer then takes the general path, slower but the same up to rounding. */
int64_t fxrt_conv_nchwc_scratch_floats(const FxrtConvParams *p, int x_blocked);
int64_t fxrt_conv_nchwc_packed_floats(const FxrtConvParams *p, int x_blocked);
int64_t fxrt_conv_nchwc_packed_index(const FxrtConvParams *p, int x_blocked, int64_t oc,
                                     int64_t ic, int64_t tap);
void fxrt_conv_nchwc_pack_f32(const FxrtConvParams *p, int x_blocked, const float *w,
                              float *packed);
/* Dispatches to the depthwise kernel when groups > 1. */
void fxrt_conv_nchwc_f32(const FxrtConvParams *p, int x_blocked, const float *x,
                         const float *packed_w, const FxrtEpilogue *ep, float *y,
                         float *scratch);
void fxrt_conv_nchwc_depthwise_f32(const FxrtConvParams *p, const float *x,
                                   const float *packed_w, const FxrtEpilogue *ep, float *y);

/* The same convolution with Y written over X, for a memory plan that gives
 * them one buffer: where it applies (X blocked; depthwise with an output
 * plane no larger than the input's, or pointwise: 1x1, stride 1, no padding,
 * as many output channels as input ones), with scratch of
 * fxrt_conv_nchwc_inplace_scratch_floats(p) floats (one input plane for
 * depthwise, one image row of every input block for pointwise).  The
 * residual must not be X. */
int fxrt_conv_nchwc_inplace_applies(const FxrtConvParams *p, int x_blocked);
int64_t fxrt_conv_nchwc_inplace_scratch_floats(const FxrtConvParams *p);
void fxrt_conv_nchwc_inplace_f32(const FxrtConvParams *p, float *xy, const float *packed_w,
                                 const FxrtEpilogue *ep, float *scratch);
void fxrt_conv_nchwc_depthwise_inplace_f32(const FxrtConvParams *p, float *xy,
                                           const float *packed_w, const FxrtEpilogue *ep,
                                           float *scratch);

/* The small build's group-1 kernel for a microcontroller's scalar FPU
 * (fxrt_nn_conv_mcu.c), which the functions above run with
 * FXRT_SMALL_KERNELS; Y's output blocks are y_ob floats apart (0: a
 * plane). */
void fxrt_conv_nchwc_mcu_f32(const FxrtConvParams *p, int x_blocked, const float *x,
                             const float *packed_w, const FxrtEpilogue *ep, float *y,
                             int64_t y_ob);

/* Squeeze-and-excite on NCHWc x [batch, CB, spatial, 8]
 * (fxrt_nn_squeeze_excite.c): y = x * gate, per channel, where
 *
 *     pooled = the mean of each channel over `spatial`
 *     hidden = hidden_ep(pooled W1)    W1 [channels][squeezed]
 *     gate   = gate_ep(hidden W2)      W2 [squeezed][CB * 8], padding columns zero
 *
 * the epilogues (NULL: none) applied to a 1 x squeezed and a 1 x CB * 8
 * row (their biases per column: bias_col_stride 1, row stride 0).  y must
 * not overlap x.  scratch: fxrt_squeeze_excite_nchwc_scratch_floats
 * floats. */
int64_t fxrt_squeeze_excite_nchwc_scratch_floats(int64_t channels, int64_t squeezed);
void fxrt_squeeze_excite_nchwc_f32(int64_t batch, int64_t channels, int64_t squeezed,
                                   int64_t spatial, const float *x, const float *w1,
                                   const FxrtEpilogue *hidden_ep, const float *w2,
                                   const FxrtEpilogue *gate_ep, float *y, float *scratch);
/* The same gate, of one image x (batch 1), applied instead to the packed
 * weights of the 1x1 convolution that reads x * gate (X blocked, groups 1:
 * fxrt_conv_nchwc_pack_f32's [pairs][CB * 8 input lanes][2 x 8 outputs]):
 * gated_w = conv_w with each input channel's weights times its gate, so
 * that conv(x, gated_w) = conv(x * gate, conv_w).  Same scratch. */
void fxrt_squeeze_excite_weights_nchwc_f32(int64_t channels, int64_t squeezed, int64_t spatial,
                                           const float *x, const float *w1,
                                           const FxrtEpilogue *hidden_ep, const float *w2,
                                           const FxrtEpilogue *gate_ep, int64_t pairs,
                                           const float *conv_w, float *gated_w, float *scratch);

/* The same convolution by Winograd's F(4x4, 3x3) (fxrt_nn_nchwc_winograd.c)
 * where it applies: groups 1, a 3x3 kernel, stride and dilation 1, any
 * padding, X blocked.  About 1e-5 of the outputs' magnitude from the direct
 * kernel (rather than 1e-6) for a quarter of its multiply-adds.  W is packed
 * by fxrt_conv_nchwc_winograd_pack_f32 (36 transformed 1x1 weight sets, in
 * fxrt_conv_nchwc_pack_f32's 1x1 layout); ep as for fxrt_conv_nchwc_f32;
 * scratch holds fxrt_conv_nchwc_winograd_scratch_floats(p) floats. */
int fxrt_conv_nchwc_winograd_applies(const FxrtConvParams *p);
int64_t fxrt_conv_nchwc_winograd_packed_floats(const FxrtConvParams *p);
void fxrt_conv_nchwc_winograd_pack_f32(const FxrtConvParams *p, const float *w, float *packed);
int64_t fxrt_conv_nchwc_winograd_scratch_floats(const FxrtConvParams *p);
void fxrt_conv_nchwc_winograd_f32(const FxrtConvParams *p, const float *x, const float *packed_w,
                                  const FxrtEpilogue *ep, float *y, float *scratch);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_quant.c: integer matrix products and requantization                */
/* ------------------------------------------------------------------------- */

/* Y (int32, m x n) = (A - a_zp) x (B - b_zp) for A m x k and B k x n of type
 * UINT8 or INT8.  a_zp holds 1 or m values (per row), b_zp 1 or n (per
 * column).  Sums wrap modulo 2^32. */
void fxrt_gemm_integer(int64_t m, int64_t n, int64_t k, FxrtDType a_type, const void *a,
                       const int32_t *a_zp, int64_t a_zp_count, FxrtDType b_type,
                       const void *b, const int32_t *b_zp, int64_t b_zp_count, int32_t *y);

/* Batched MatMulInteger over FxrtMatMulParams: per-tensor a_zp, b_zp with
 * 1 or n values (per column of B). */
void fxrt_matmul_integer(const FxrtMatMulParams *p, FxrtDType a_type, const void *a,
                         int32_t a_zp, FxrtDType b_type, const void *b, const int32_t *b_zp,
                         int64_t b_zp_count, int32_t *y);

/* y = saturate(rint((acc + bias[c]) * scale[c]) + y_zp) for acc of shape
 * outer x channels x inner; bias (int32) is NULL or per channel, scale has
 * 1 or `channels` values, y_type is UINT8 or INT8.  The product is formed in
 * double from the float scale, as the ONNX reference does, and ties round
 * to even. */
void fxrt_requantize(int64_t outer, int64_t channels, int64_t inner, const int32_t *acc,
                     const int32_t *bias, const float *scale, int64_t scale_count, int32_t y_zp,
                     FxrtDType y_type, void *y);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_qlinear.c: ONNX Runtime's com.microsoft QLinear ops                */
/* ------------------------------------------------------------------------- */

/* Every kernel here takes 8-bit data of one type t (UINT8 or INT8) for its
 * inputs and output, per-tensor scales and zero points, and rounds as ORT's
 * C paths do: dequantize in float, divide by the output scale in float,
 * round half to even, add the zero point, saturate. */
typedef enum FxrtQLinearOp { FXRT_QLINEAR_ADD, FXRT_QLINEAR_MUL } FxrtQLinearOp;

/* QLinearAdd / QLinearMul: y = q(deq(a) op deq(b)) over the output dims
 * (contiguous), each input read through its strides per output axis (0
 * where broadcast; fxrt_broadcast_strides). */
void fxrt_qlinear_binary(FxrtQLinearOp op, FxrtDType t, int rank, const int64_t *dims,
                         const void *a, const int64_t *a_strides, float a_scale, int32_t a_zp,
                         const void *b, const int64_t *b_strides, float b_scale, int32_t b_zp,
                         float y_scale, int32_t y_zp, void *y);
/* QLinearGlobalAveragePool over planes x size (NCHW): the integer sum less
 * size x x_zp, times x_scale / (y_scale x size) in float. */
void fxrt_qlinear_global_avgpool(FxrtDType t, int64_t planes, int64_t size, const void *x,
                                 float x_scale, int32_t x_zp, float y_scale, int32_t y_zp,
                                 void *y);
/* The same on NHWC input, batch x size x channels (channels innermost):
 * y[n][c] is the byte fxrt_qlinear_global_avgpool gives plane c of image n
 * of the NCHW transpose. */
void fxrt_qlinear_global_avgpool_nhwc(FxrtDType t, int64_t batch, int64_t size,
                                      int64_t channels, const void *x, float x_scale,
                                      int32_t x_zp, float y_scale, int32_t y_zp, void *y);
/* One input of QLinearConcat: x (outer x part) into the columns of y
 * (outer x row) that y points at, requantized from x's scale and zero
 * point to y's (copied when they are equal). */
void fxrt_qlinear_concat_part(FxrtDType t, int64_t outer, int64_t part, int64_t row,
                              const void *x, float x_scale, int32_t x_zp, float y_scale,
                              int32_t y_zp, void *y);
/* Y (int32, m x n) = (A - a_zp) x (B - b_zp) with A[i][p] at a[i * a_row +
 * p * a_col] and B[p][j] at b[p * b_row + j * b_col] (QGemm's transA and
 * transB as strides); b_zp holds 1 or n values.  Sums wrap modulo 2^32. */
void fxrt_gemm_integer_strided(int64_t m, int64_t n, int64_t k, FxrtDType a_type, const void *a,
                               int64_t a_row, int64_t a_col, int32_t a_zp, FxrtDType b_type,
                               const void *b, int64_t b_row, int64_t b_col, const int32_t *b_zp,
                               int64_t b_zp_count, int32_t *y);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_gemm_packed.c: the float GEMM against weights packed at compile time */
/* ------------------------------------------------------------------------- */

/* Floats of B (k x n) packed by fxrt_gemm_pack_b_f32: panels of 16 columns,
 * each k rows of 16 floats, zeros past n. */
int64_t fxrt_gemm_packed_floats(int64_t n, int64_t k);
/* Packs B (k x n, or n x k with trans_b; row stride ldb) into packed,
 * fxrt_gemm_packed_floats(n, k) floats.  The compiler does this once. */
void fxrt_gemm_pack_b_f32(int trans_b, int64_t n, int64_t k, const float *b, int64_t ldb,
                          float *packed);
/* C (m x n, row stride ldc) = epilogue ep (NULL: none) of alpha * A B, A
 * row-major m x k (row stride lda), B as packed.  C is only written. */
void fxrt_gemm_packed_f32(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                          int64_t lda, const float *packed, float *c, int64_t ldc,
                          const FxrtEpilogue *ep);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_sparse.c: float layers whose pruned weights are stored compressed  */
/* ------------------------------------------------------------------------- */

/* The compressed rows the sparse-weights pass writes (one row per output
 * channel of a convolution, per output column of a matrix product): row r's
 * nonzero weights are values[row_start[r] .. row_start[r + 1]), each with
 * its input index in columns[] (a convolution's ic * kh * kw + tap,
 * tap = kh_index * kernel_w + kw_index; a product's row of B).  Indices fit
 * 16 bits, so a weight costs 6 bytes instead of 4 dense plus 4 bytes a row. */

/* A 2-D convolution of group 1 and dilation 1 (the ones the pass converts). */
typedef struct FxrtSparseConvParams {
    int64_t batch, in_channels, out_channels;
    int64_t in_h, in_w, out_h, out_w;
    int64_t kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left;
} FxrtSparseConvParams;

/* Bytes of scratch fxrt_sparse_conv_f32 needs for p with `nonzeros` weights:
 * an int32 input offset per weight and, unless the layer has stride 1 and no
 * padding, the image padded and split into stride phases (64-byte aligned
 * parts): all of it, or with FXRT_SMALL_KERNELS bands of output rows whose
 * part takes about 8 KiB (the figure fxrt_sparse_conv_small_scratch_bytes
 * gives wherever the runtime was built). */
int64_t fxrt_sparse_conv_scratch_bytes(const FxrtSparseConvParams *p, int64_t nonzeros);
int64_t fxrt_sparse_conv_small_scratch_bytes(const FxrtSparseConvParams *p, int64_t nonzeros);
/* Y [batch, out_channels, out_h, out_w] = epilogue(conv(X, W)) with W in
 * compressed rows; ep (NULL: none) as for fxrt_conv_f32: bias per output
 * channel, residual of Y's shape.  Zero weights are skipped, so an inf or NaN
 * they would have met in X does not reach Y. */
void fxrt_sparse_conv_f32(const FxrtSparseConvParams *p, const float *x, const int32_t *row_start,
                          const uint16_t *columns, const float *values, const FxrtEpilogue *ep,
                          float *y, void *scratch);
/* Y written over X (one buffer) for a 1x1 stride-1 unpadded layer with as
 * many output as input channels (the planner's in-place hook off the host);
 * scratch: fxrt_sparse_conv_inplace_scratch_bytes (the offsets and 16 pixels
 * of every output channel). */
int fxrt_sparse_conv_inplace_applies(const FxrtSparseConvParams *p);
int64_t fxrt_sparse_conv_inplace_scratch_bytes(const FxrtSparseConvParams *p, int64_t nonzeros);
void fxrt_sparse_conv_inplace_f32(const FxrtSparseConvParams *p, float *xy,
                                  const int32_t *row_start, const uint16_t *columns,
                                  const float *values, const FxrtEpilogue *ep, void *scratch);
/* C (m x n, row stride ldc) = epilogue(A B), A m x k row-major (row stride
 * lda), B's n columns in compressed rows (column j of B is row j); ep's bias
 * and residual as for fxrt_gemm_ep_f32.  No scratch. */
void fxrt_sparse_gemm_f32(int64_t m, int64_t n, const float *a, int64_t lda,
                          const int32_t *row_start, const uint16_t *columns, const float *values,
                          float *c, int64_t ldc, const FxrtEpilogue *ep);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_qgemm.c: the packed 8-bit GEMM, requantized in fixed point         */
/* ------------------------------------------------------------------------- */

/* real_scale ~= multiplier / 2^shift with multiplier in [2^30, 2^31) and
 * shift in [30, 62], for real_scale in [2^-32, 1); returns 0, or -1 for a
 * scale outside that range (or NaN), which keeps fxrt_requantize's double
 * path.  A float scale has 24 significant bits, so for it the pair is
 * exact. */
int fxrt_quant_multiplier(double real_scale, int32_t *multiplier, int *shift);
/* v * multiplier / 2^shift rounded half to even, exactly (int64).  With an
 * exact pair this is fxrt_requantize's rint(v * scale) whenever the double
 * product is exact (|v| < 2^29); beyond that the double rounding of the
 * product can move a value within about 1e-16 relative of a .5 tie to the
 * other side, so the two differ there by one. */
int64_t fxrt_quant_rescale(int32_t v, int32_t multiplier, int shift);
/* fxrt_quant_rescale in 32-bit words, the same value for every v and every
 * pair fxrt_quant_multiplier makes (shift 30 to 62), for 32-bit cores: one
 * 32 x 32 -> 64 multiply (SMULL on Arm), the half added to the two words
 * with a carry and the high word shifted, no 64-bit shift, division or
 * libgcc helper.  A tie (the bits shifted out exactly the half) is rare, so
 * it costs a compare and a branch not taken.  The per-channel constants are
 * made once (fxrt_rescale32_make) and applied per value
 * (fxrt_rescale32_apply: about 6 instructions on a Cortex-M4).  Signed >>
 * is arithmetic (GCC, Clang; implementation-defined in C99). */
typedef struct FxrtRescale32 {
    int32_t multiplier;
    int32_t shift;             /* 30 to 62 */
    uint32_t half_lo, half_hi; /* 2^(shift - 1) in two words */
    uint32_t tie_mask_hi;      /* the high word's bits shifted out (shift >= 32) */
} FxrtRescale32;

static inline FxrtRescale32 fxrt_rescale32_make(int32_t multiplier, int shift)
{
    FxrtRescale32 r;
    r.multiplier = multiplier;
    r.shift = shift;
    r.half_lo = shift <= 32 ? 1u << (shift - 1) : 0u;
    r.half_hi = shift <= 32 ? 0u : 1u << (shift - 33);
    r.tie_mask_hi = shift <= 32 ? 0u : (1u << (shift - 32)) - 1u;
    return r;
}

static inline int32_t fxrt_rescale32_apply(int32_t v, const FxrtRescale32 *r)
{
    int64_t product = (int64_t)v * r->multiplier;
    uint32_t lo = (uint32_t)product, hi = (uint32_t)((uint64_t)product >> 32);
    uint32_t sum_lo = lo + r->half_lo, sum_hi = hi + r->half_hi + (sum_lo < lo);
    /* the usual case first: no tie possible (low word not 0), quotient in
     * the high word */
    if (sum_lo != 0 && r->shift >= 32)
        return (int32_t)sum_hi >> (r->shift - 32);
    int32_t q;
    if (r->shift >= 32) {
        q = (int32_t)sum_hi >> (r->shift - 32);
        if ((sum_hi & r->tie_mask_hi) == 0) /* a tie: to even */
            q &= ~1;
    } else { /* shift 30 or 31 (scales from 0.5 to 1): the quotient spans both words */
        q = (int32_t)(sum_hi << (32 - r->shift) | sum_lo >> r->shift);
        if ((sum_lo & ((1u << r->shift) - 1u)) == 0)
            q &= ~1;
    }
    return q;
}

static inline int32_t fxrt_quant_rescale32(int32_t v, int32_t multiplier, int shift)
{
    FxrtRescale32 r = fxrt_rescale32_make(multiplier, shift);
    return fxrt_rescale32_apply(v, &r);
}

/* Y = requantize((A - a_zp) x B + bias) for A m x k (UINT8 or INT8, row
 * stride lda) and B k x n INT8 with zero point 0 (symmetric weights, per
 * tensor or per column), packed by fxrt_qgemm_pack_b:
 *
 *   y[i][j] = clamp(rescale(acc[i][j] + bias[j], multiplier[j], shift[j])
 *                   + y_zp, y_min, y_max)
 *
 * with rescale = fxrt_quant_rescale and the pair from fxrt_quant_multiplier
 * of scale[j] (a_scale x w_scale[j] / y_scale); y_min, y_max are the output
 * type's range or tighter (a fused Relu or Clip, in quantized units).
 * y_type INT32 stores acc + bias instead, no rescale (MatMulInteger,
 * ConvInteger).  Accumulators are int32 seeded with the bias: acc + bias
 * wraps modulo 2^32 where fxrt_requantize would add in int64, which no
 * layer of realistic size reaches.
 *
 * Packed B, fxrt_qgemm_packed_bytes(n, k) bytes (the compiler packs it once,
 * at compile time; any alignment): n padded to a multiple of 16 and k to a
 * multiple of 4 with zeros, then [n/16][k/4][16 columns][4 k values] int8,
 * one 64-byte vpdpbusd operand per group of four k values; then n/16 * 16
 * int32 each of seed (bias[j] - (a_zp + 128 if A is INT8) x colsum_j(B),
 * the zero point's correction folded in), multiplier and shift, then n/16
 * int32: per panel the largest |b[k][j]| + |b[k+1][j]| over even k (at
 * most 128, as with 7-bit weights, lets AVX2 use vpmaddubsw).  An INT8 A
 * is read as a + 128 so that one unsigned x signed product serves both
 * activation types; the packing therefore depends on a_type and a_zp.
 *
 * The tiles are AVX-512 VNNI (6 x 32), AVX2 (6 x 16 by vpmaddubsw when the
 * weight pairs allow, else 5 x 16 with int16 products) or
 * portable C (4 x 16), the widest the CPU has chosen by CPUID at each call
 * (host builds only; portable builds are C99).  No scratch. */
typedef struct FxrtQGemm {
    int64_t n, k;
    int32_t a_type; /* FxrtDType UINT8 or INT8, as given to fxrt_qgemm_pack_b */
    int32_t y_type; /* FxrtDType UINT8, INT8 or INT32 */
    int32_t y_zp;
    int32_t y_min, y_max; /* inclusive, quantized; ignored for INT32 */
} FxrtQGemm;

int64_t fxrt_qgemm_packed_bytes(int64_t n, int64_t k);
/* b is k x n row-major; bias (NULL: none) has n values; scale has 1 or n
 * values, or is NULL when the product will only be called with y_type
 * INT32.  Returns 0, or -1 when a scale has no fixed-point pair (outside
 * [2^-32, 1)): then the blob must not be used. */
int fxrt_qgemm_pack_b(int64_t n, int64_t k, const int8_t *b, const int32_t *bias,
                      const float *scale, int64_t scale_count, FxrtDType a_type, int32_t a_zp,
                      void *packed);
/* y (row stride ldy, in elements of y_type) for m rows of a. */
void fxrt_qgemm(const FxrtQGemm *q, int64_t m, const void *a, int64_t lda, const void *packed,
                void *y, int64_t ldy);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_qconv.c: 8-bit 2-D convolutions on packed weights                  */
/* ------------------------------------------------------------------------- */

/* QLinearConv and ConvInteger with int8 weights of zero point 0 (symmetric,
 * per tensor or per output channel), X NCHW of type x_type (UINT8 or INT8)
 * with any zero point, which is also what the padding reads:
 *
 *   y = clamp(rescale(conv(X - x_zp, W) + bias, multiplier[m], shift[m])
 *             + y_zp, y_min, y_max)
 *
 * per output channel m, as fxrt_qgemm computes it (fxrt_quant_rescale of
 * the pair for scale[m] = x_scale x w_scale[m] / y_scale); y_min, y_max are
 * the output type's range or tighter (a fused Relu or Clip, in quantized
 * units).  y_type INT32 stores the int32 sum instead (ConvInteger; no bias
 * or scale).  Sums wrap modulo 2^32; the result is fxrt_conv_integer +
 * fxrt_requantize's, byte for byte, while |acc + bias| < 2^29.
 *
 * Applies (fxrt_qconv_applies) to 1-D and 2-D convolutions of any kernel,
 * stride, dilation and padding with groups 1 or depthwise (groups = in =
 * out channels).  Group 1 runs fxrt_qgemm over im2col rows built a band of
 * output rows at a time in scratch (NHWC inside the band; none for 1x1
 * stride 1 unpadded); depthwise a direct kernel per channel (AVX-512, AVX2
 * or portable C, chosen by CPUID at each call).
 *
 * x_nhwc / y_nhwc say that X / Y are NHWC ([N, H, W, C], 2-D only) rather
 * than NCHW, so that consecutive 8-bit layers pass their activations on
 * without transposing them at every boundary: group 1 then reads the NHWC
 * rows as they are (a 1x1 stride-1 unpadded layer takes X itself as the
 * GEMM's A) and writes the GEMM's pixel-major rows straight into Y;
 * depthwise needs both sides the same and, NHWC, walks the output pixels
 * with the channels in the vector lanes (no phase planes). */
typedef struct FxrtQConv {
    int32_t x_type; /* FxrtDType UINT8 or INT8 */
    int32_t x_zp;
    int32_t y_type; /* FxrtDType UINT8, INT8 or INT32 */
    int32_t y_zp;
    int32_t y_min, y_max; /* inclusive, quantized; ignored for INT32 */
    int32_t x_nhwc, y_nhwc; /* 0: NCHW (the default), 1: NHWC */
} FxrtQConv;

int fxrt_qconv_applies(const FxrtConvParams *p);
int fxrt_qconv_is_depthwise(const FxrtConvParams *p);
/* Whether NHWC activations (x_nhwc, y_nhwc) are allowed: group 1 always,
 * depthwise up to 64 taps (the kernel keeps their addresses on the stack). */
int fxrt_qconv_nhwc_applies(const FxrtConvParams *p);
/* The packed weights (any alignment): group 1, fxrt_qgemm_pack_b's blob
 * for the (kernel_h, kernel_w, C) x out_channels matrix; depthwise, per
 * channel the int32 seed (bias - x_zp x sum(w)), multiplier and shift, then
 * W's int8 taps as given. */
int64_t fxrt_qconv_packed_bytes(const FxrtConvParams *p);
int64_t fxrt_qconv_pack_scratch_bytes(const FxrtConvParams *p);
/* w is W [out_channels][in_channels / groups][kernel_h][kernel_w]; bias
 * (NULL: none) has out_channels values; scale 1 or out_channels, NULL for
 * INT32 output.  The packing depends on q's x_type and x_zp.  Scratch:
 * fxrt_qconv_pack_scratch_bytes(p).  Returns 0, or -1 when a scale has no
 * fixed-point pair (outside [2^-32, 1)): then the blob must not be used. */
int fxrt_qconv_pack(const FxrtConvParams *p, const FxrtQConv *q, const int8_t *w,
                    const int32_t *bias, const float *scale, int64_t scale_count, void *packed,
                    void *scratch);
/* Scratch of fxrt_qconv, any alignment: one band (group 1: its im2col
 * rows, or the pointers and offsets the VNNI tiles read the band through)
 * or one channel's padded planes (depthwise NCHW; NHWC: one row of C zero
 * points and the kernels' weight tables), never the whole image. */
int64_t fxrt_qconv_scratch_bytes(const FxrtConvParams *p, const FxrtQConv *q);
void fxrt_qconv(const FxrtConvParams *p, const FxrtQConv *q, const void *x, const void *packed,
                void *y, void *scratch);
/* The small path, for firmware (fxrt_qconv is this when built with
 * FXRT_SMALL_KERNELS): group 1 gathers the im2col rows of 4 output pixels
 * from NCHW into scratch, no band; the same bytes as fxrt_qconv.  Scratch:
 * fxrt_qconv_small_scratch_bytes (a few hundred bytes). */
int64_t fxrt_qconv_small_scratch_bytes(const FxrtConvParams *p, const FxrtQConv *q);
void fxrt_qconv_small(const FxrtConvParams *p, const FxrtQConv *q, const void *x,
                      const void *packed, void *y, void *scratch);
/* Y written over X (one buffer, X's shape and Y's the same number of
 * bytes) for 8-bit outputs of depthwise layers and of 1x1 stride-1
 * unpadded layers with no more outputs than inputs; scratch:
 * fxrt_qconv_small_scratch_bytes. */
int fxrt_qconv_inplace_applies(const FxrtConvParams *p, const FxrtQConv *q);
void fxrt_qconv_inplace(const FxrtConvParams *p, const FxrtQConv *q, void *xy,
                        const void *packed, void *scratch);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_pool.c: pools                                                      */
/* ------------------------------------------------------------------------- */

/* Shapes of a pool over `planes` = N * C independent planes.  Spatial arrays
 * are right-aligned as in FxrtConvParams.  pad_end is the padding after the
 * last element (it matters for AveragePool's divisor with
 * count_include_pad).  storage_order is MaxPool's: 0 row-major indices,
 * 1 column-major.  p is LpPool's norm. */
typedef struct FxrtPoolParams {
    int64_t planes;
    int64_t in_size[FXRT_CONV_MAX_SPATIAL];
    int64_t out_size[FXRT_CONV_MAX_SPATIAL];
    int64_t kernel[FXRT_CONV_MAX_SPATIAL];
    int64_t stride[FXRT_CONV_MAX_SPATIAL];
    int64_t dilation[FXRT_CONV_MAX_SPATIAL];
    int64_t pad_begin[FXRT_CONV_MAX_SPATIAL];
    int64_t pad_end[FXRT_CONV_MAX_SPATIAL];
    int32_t count_include_pad;
    int32_t storage_order;
    float p;
} FxrtPoolParams;

/* Whether the one window of every plane is the whole plane, with no padding
 * or dilation inside it (a global pool written as AveragePool, as DS-CNN
 * ends): its taps are the plane's elements in order.  Padding after the
 * plane can leave one output and adds no tap to it. */
static inline int fxrt_pool_window_is_plane(const FxrtPoolParams *p)
{
    for (int i = 0; i < FXRT_CONV_MAX_SPATIAL; i++)
        if (p->out_size[i] != 1 || p->kernel[i] != p->in_size[i] || p->pad_begin[i] != 0 ||
            p->dilation[i] != 1)
            return 0;
    return 1;
}

/* Max over each window, ignoring padding.  indices (may be NULL) receives,
 * per output, the flat index of the max in X (plane * in_numel + position,
 * the position row- or column-major per storage_order; first max wins).
 * A window that covers only padding yields the lowest value and index -1. */
void fxrt_maxpool_f32(const FxrtPoolParams *p, const float *x, float *y, int64_t *indices);
void fxrt_maxpool_u8(const FxrtPoolParams *p, const uint8_t *x, uint8_t *y, int64_t *indices);
void fxrt_maxpool_i8(const FxrtPoolParams *p, const int8_t *x, int8_t *y, int64_t *indices);
void fxrt_maxpool_f64(const FxrtPoolParams *p, const double *x, double *y, int64_t *indices);
/* Mean over each window; the divisor counts the taps inside the input, or
 * with count_include_pad those inside the padded input. */
void fxrt_avgpool_f32(const FxrtPoolParams *p, const float *x, float *y);
/* QLinearAveragePool (x and y 8-bit of type t, one scale and zero point
 * each) with no scratch; the same bytes as dequantizing, fxrt_avgpool_f32
 * and quantizing. */
void fxrt_qlinear_avgpool(const FxrtPoolParams *p, FxrtDType t, const void *x, float x_scale,
                          int32_t x_zp, float y_scale, int32_t y_zp, void *y);
/* fxrt_qlinear_avgpool with one window that is the whole image (no
 * padding), on NHWC input, batch x size x channels: y[n][c] is the byte it
 * gives plane c of image n of the NCHW transpose. */
void fxrt_qlinear_avgpool_whole_nhwc(FxrtDType t, int64_t batch, int64_t size, int64_t channels,
                                     const void *x, float x_scale, int32_t x_zp, float y_scale,
                                     int32_t y_zp, void *y);
/* (sum |x|^p)^(1/p) over each window (padding counts as 0). */
void fxrt_lppool_f32(const FxrtPoolParams *p, const float *x, float *y);

/* Global pools over planes x size: y[plane] = reduction of x[plane][0..size). */
void fxrt_global_avgpool_f32(int64_t planes, int64_t size, const float *x, float *y);
void fxrt_global_maxpool_f32(int64_t planes, int64_t size, const float *x, float *y);
void fxrt_global_lppool_f32(int64_t planes, int64_t size, float p, const float *x, float *y);

/* The same pools on NCHWc tensors (see fxrt_nn_nchwc*.c below): `planes`
 * counts N * ceil(C / 8) planes of 8-lane pixels.  No indices. */
void fxrt_maxpool_nchwc_f32(const FxrtPoolParams *p, const float *x, float *y);
void fxrt_avgpool_nchwc_f32(const FxrtPoolParams *p, const float *x, float *y);
void fxrt_global_avgpool_nchwc_f32(int64_t planes, int64_t size, const float *x, float *y);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_norm.c: normalizations                                             */
/* ------------------------------------------------------------------------- */

/* Inference BatchNormalization over x of shape n x c x inner:
 * y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c]. */
void fxrt_batchnorm_f32(int64_t n, int64_t c, int64_t inner, const float *x, const float *scale,
                        const float *bias, const float *mean, const float *var, float eps,
                        float *y);
/* InstanceNormalization: mean and variance per (n, c) over inner. */
void fxrt_instancenorm_f32(int64_t n, int64_t c, int64_t inner, const float *x,
                           const float *scale, const float *bias, float eps, float *y);
/* GroupNormalization: x of shape n x c x inner in `groups` groups of
 * c / groups channels, mean and variance per (n, group) over its channels'
 * inner elements; channel ch is then scaled by scale[ch / per_scale] and
 * shifted by bias[ch / per_scale] (per_scale: 1 for opset 21's per-channel
 * scale, c / groups for opset 18's per-group one). */
void fxrt_groupnorm_f32(int64_t n, int64_t c, int64_t groups, int64_t inner, const float *x,
                        const float *scale, const float *bias, int64_t per_scale, float eps,
                        float *y);
/* LayerNormalization over rows x cols (cols = the normalized dims):
 * y = (x - mean) / sqrt(var + eps) * scale + bias, scale and bias (NULL:
 * none) of length cols.  mean and inv_std (each NULL or `rows` floats)
 * receive the statistics. */
void fxrt_layernorm_f32(int64_t rows, int64_t cols, const float *x, const float *scale,
                        const float *bias, float eps, float *y, float *mean, float *inv_std);
/* LayerNormalization over the channels of each pixel of NCHWc x [batch,
 * CB, spatial, 8] (fxrt_nn_nchwc*.c), written channels-last: y [batch,
 * spatial, channels].  scale has `channels` floats, bias too or NULL.  It
 * stands for FromNCHWc, a Transpose to NHWC and the LayerNorm (ConvNeXt). */
void fxrt_layernorm_nchwc_f32(int64_t batch, int64_t channels, int64_t spatial, const float *x,
                              const float *scale, const float *bias, float eps, float *y);
/* LRN across channels of n x c x inner:
 * y = x / (bias + alpha / size * sum of x^2 over the window)^beta, the window
 * running from c - floor((size-1)/2) to c + ceil((size-1)/2). */
void fxrt_lrn_f32(int64_t n, int64_t c, int64_t inner, int64_t size, float alpha, float beta,
                  float bias, const float *x, float *y);
/* MeanVarianceNormalization: y = (x - mean) / (sqrt(var) + 1e-9) with the
 * statistics taken over the axes set in axes_mask (bit d = axis d).
 * scratch: fxrt_mvn_scratch_floats(...) floats (mean and deviation per
 * kept index). */
int64_t fxrt_mvn_scratch_floats(int rank, const int64_t *dims, uint32_t axes_mask);
void fxrt_mvn_f32(int rank, const int64_t *dims, uint32_t axes_mask, const float *x, float *y,
                  float *scratch);
/* LpNormalization along the middle axis of outer x len x inner, p 1 or 2:
 * y = x / ||x||_p (a zero norm gives NaN or inf, as in the ONNX reference). */
void fxrt_lpnorm_f32(int64_t outer, int64_t len, int64_t inner, int p, const float *x,
                     float *y);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_softmax.c: softmax family along the middle axis of outer x len x inner */
/* ------------------------------------------------------------------------- */

/* Max-subtracted, so exp never overflows; float sums.  ONNX opsets before 13 flatten to 2-D at
 * the axis: call these with inner = 1 and len = the product of the trailing
 * dims. */
void fxrt_softmax_f32(int64_t outer, int64_t len, int64_t inner, const float *x, float *y);
/* y[l * stride] = exp(x[l * stride] - shift) for l < len, where no
 * x - shift is above 0 (shift is the row's maximum); returns their sum.
 * Softmax's exponentials and sum, in the interpreter and in fused loops. */
float fxrt_softmax_exp_f32(const float *x, float *y, int64_t len, int64_t stride, float shift);
void fxrt_logsoftmax_f32(int64_t outer, int64_t len, int64_t inner, const float *x, float *y);
/* 1 at the first maximum, 0 elsewhere. */
void fxrt_hardmax_f32(int64_t outer, int64_t len, int64_t inner, const float *x, float *y);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_attention.c: softmax(scale * Q K^T + mask) V, scores kept in cache */
/* ------------------------------------------------------------------------- */

/* One attention per batch element e (batch dims walked row-major, each
 * operand at its own offset sum_r i_r * X_strides[r], 0 where it
 * broadcasts): Q is lq x d (row stride ldq), K lk x d (row stride ldk) or,
 * when k_transposed, d x lk (row stride ldk), V lk x dv (row stride ldv), Y
 * lq x dv (row stride ldy); rows are contiguous.  The optional additive
 * mask's element (i, j) is at mask_row_stride * i + mask_col_stride * j
 * (strides 0 where it broadcasts). */
typedef struct FxrtAttention {
    int32_t batch_rank;
    int64_t batch_dims[FXRT_MAX_RANK];
    int64_t q_strides[FXRT_MAX_RANK];
    int64_t k_strides[FXRT_MAX_RANK];
    int64_t v_strides[FXRT_MAX_RANK];
    int64_t mask_strides[FXRT_MAX_RANK];
    int64_t y_strides[FXRT_MAX_RANK];
    int64_t lq, lk, d, dv;
    int32_t k_transposed;
    int64_t ldq, ldk, ldv, ldy;
    int64_t mask_row_stride, mask_col_stride;
    float scale;
} FxrtAttention;
/* Scratch of fxrt_attention_f32: K transposed and padded, and the scores
 * of one block of query rows. */
int64_t fxrt_attention_scratch_floats(const FxrtAttention *p);
/* mask may be NULL; scratch holds fxrt_attention_scratch_floats(p) floats.
 * Y must not overlap the inputs. */
void fxrt_attention_f32(const FxrtAttention *p, const float *q, const float *k, const float *v,
                        const float *mask, float *y, float *scratch);

/* ------------------------------------------------------------------------- */
/* fxrt_nn_einsum.c: Einsum's general contraction                             */
/* ------------------------------------------------------------------------- */

#define FXRT_EINSUM_MAX_OPERANDS 4
#define FXRT_EINSUM_MAX_LETTERS 24

/* A contraction over letters: the first num_out letters are the output's
 * axes in order (the output is contiguous), the remaining ones are summed.
 * strides[k][l] is operand k's element stride for letter l (0 when the
 * operand lacks the letter or broadcasts it; a letter repeated in one
 * operand, a diagonal, has the sum of its strides). */
typedef struct FxrtEinsumParams {
    int32_t num_operands;
    int32_t num_out;
    int32_t num_letters;
    int64_t sizes[FXRT_EINSUM_MAX_LETTERS];
    int64_t strides[FXRT_EINSUM_MAX_OPERANDS][FXRT_EINSUM_MAX_LETTERS];
} FxrtEinsumParams;

/* out[o] = sum over summed letters of prod_k op_k[...]: a plain loop nest,
 * float accumulation in double.  The compiler sends batched matrix products
 * to GEMM instead; this is the fallback for diagonals, reductions and the
 * rest. */
void fxrt_einsum_f32(const FxrtEinsumParams *p, const float *const *ops, float *out);
/* Any numeric type: floats accumulate in double, integers in int64. */
void fxrt_einsum_generic(FxrtDType t, const FxrtEinsumParams *p, const void *const *ops,
                         void *out);

#ifdef __cplusplus
}
#endif

#endif
