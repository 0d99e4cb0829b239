/*
 * fxrt_isa.h - internal to the runtime and its tests: caps the instruction
 * set the NCHWc convolution tiles, the int8 GEMM and the epilogue loops use,
 * so that one host can check the AVX-512, AVX2 and portable forms against
 * each other.  Not part of fxrt.h:
 * generated code never calls it, and by default every kernel takes the
 * widest tiles the CPU has (chosen by CPUID at each call).
 */
#ifndef FXRT_ISA_H
#define FXRT_ISA_H

/* 1: the int8 kernels' Armv7E-M DSP forms (SMLAD on SXTB16/UXTB16 pairs:
 * fxrt_nn_qgemm.c's tile, fxrt_nn_qconv.c's 3-wide depthwise rows), which
 * a compiler targeting a core with the DSP extension (Cortex-M4, M7, M33,
 * M55) turns on by itself.  FXRT_EMULATE_ARM_DSP builds them on any host
 * against the plain-C arm_acle.h of tests/acle/, so that the host's test
 * suites check the same source bit-exact. */
#if (defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP) || defined(FXRT_EMULATE_ARM_DSP)
#define FXRT_ARM_DSP 1
#else
#define FXRT_ARM_DSP 0
#endif

#if FXRT_ARM_DSP
#include <arm_acle.h>
/* SXTB16 and UXTB16 of the operand rotated right by 8 bits (bytes 1 and 3
 * into the halfwords): one instruction with the rotate in its operand;
 * GCC 12 would not fold a separate rotate into it. */
#if defined(__ARM_FEATURE_DSP) && defined(__GNUC__)
static inline int16x2_t fxrt_sxtb16_ror8(uint32_t v)
{
    int16x2_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
    return r;
}
static inline uint16x2_t fxrt_uxtb16_ror8(uint32_t v)
{
    uint16x2_t r;
    __asm__("uxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
    return r;
}
#else
static inline int16x2_t fxrt_sxtb16_ror8(uint32_t v) { return __sxtb16(v >> 8 | v << 24); }
static inline uint16x2_t fxrt_uxtb16_ror8(uint32_t v) { return __uxtb16(v >> 8 | v << 24); }
#endif
#endif

/* 2: AVX-512 where the CPU has it (the default), 1: AVX2 at most, 0: the
 * portable C tiles.  A no-op in builds without the x86 tiles. */
void fxrt_nchwc_conv_limit_isa(int level);
/* The level those tiles use on this CPU under that cap; the Winograd
 * transforms (fxrt_nn_nchwc_winograd.c) and the blocked depthwise kernel
 * (fxrt_nn_nchwc_depthwise.c) follow it, AVX2 at levels 1 and 2. */
int fxrt_nchwc_conv_isa(void);
/* The same for the 8-bit GEMM tiles (fxrt_nn_qgemm.c): 2 AVX-512 VNNI,
 * 1 AVX2, 0 portable C. */
void fxrt_qgemm_limit_isa(int level);
/* The same for the epilogue's GELU and sigmoid-family loops
 * (fxrt_nn_epilogue.c): 2 AVX-512, 1 AVX2, 0 portable C. */
void fxrt_epilogue_limit_isa(int level);
/* The same for the 8-bit convolutions (fxrt_nn_qconv.c): its depthwise
 * kernel (2 AVX-512, 1 AVX2, 0 portable C) and, through
 * fxrt_qgemm_limit_isa, the GEMM tiles of its group-1 path. */
void fxrt_qconv_limit_isa(int level);
/* The same for the float GEMM on packed weights (fxrt_nn_gemm_packed.c):
 * 2 AVX-512, 1 AVX2/FMA, 0 portable. */
void fxrt_gemm_packed_limit_isa(int level);

/* The same for QuantizeLinear and DequantizeLinear of 8-bit data
 * (fxrt_elementwise_cast.c): 2 AVX-512, 1 AVX2, 0 portable C. */
void fxrt_quantize_limit_isa(int level);
/* The same for QLinearAdd and QLinearMul (fxrt_nn_qlinear.c), and through
 * fxrt_qlinear_avgpool_limit_isa for QLinearAveragePool's whole-plane
 * windows (fxrt_nn_pool.c). */
void fxrt_qlinear_limit_isa(int level);
void fxrt_qlinear_avgpool_limit_isa(int level);

/* The same for the sparse convolution and matrix product
 * (fxrt_nn_sparse.c): 2 AVX-512, 1 AVX2/FMA, 0 portable C. */
void fxrt_sparse_limit_isa(int level);

/* The same for the fused attention (fxrt_nn_attention.c): 1 AVX2/FMA,
 * 0 portable C (it has no AVX-512 form). */
void fxrt_attention_limit_isa(int level);

/* The same for the blocked MaxPool and AveragePool (fxrt_nn_pool.c):
 * 1 AVX2, 0 SSE2 (x86-64's baseline; they have no AVX-512 form). */
void fxrt_pool_nchwc_limit_isa(int level);

/* The same for LayerNormNCHWc (fxrt_nn_norm.c): 1 AVX2/FMA, 0 portable C
 * (it has no AVX-512 form). */
void fxrt_layernorm_nchwc_limit_isa(int level);

#endif
