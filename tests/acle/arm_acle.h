/*
 * arm_acle.h (tests only) - plain-C equivalents of the few ACLE DSP
 * intrinsics the runtime's Armv7E-M kernels use (FXRT_ARM_DSP,
 * runtime/fxrt_isa.h), so that the host's *_cortex_m_dsp test suites build
 * and check the same kernel source bit-exact on x86.  Each follows the Arm
 * Architecture Reference Manual's pseudocode for its instruction: halfword
 * lanes, products of sign-extended halfwords, sums modulo 2^32 (SMLAD's Q
 * flag is not modelled: the kernels never read it).
 */
#ifndef FXCC_TESTS_ARM_ACLE_H
#define FXCC_TESTS_ARM_ACLE_H

#include <stdint.h>

typedef int32_t int16x2_t;
typedef uint32_t uint16x2_t;

/* Bytes 0 and 2, sign-extended into the low and high halfwords. */
static inline int16x2_t __sxtb16(uint32_t x)
{
    uint32_t lo = (uint32_t)(int32_t)(int8_t)(x & 0xFF) & 0xFFFFu;
    uint32_t hi = (uint32_t)(int32_t)(int8_t)(x >> 16 & 0xFF) & 0xFFFFu;
    return (int16x2_t)(lo | hi << 16);
}

/* Bytes 0 and 2, zero-extended into the low and high halfwords. */
static inline uint16x2_t __uxtb16(uint32_t x) { return x & 0x00FF00FFu; }

static inline int32_t acle_low(uint32_t x) { return (int16_t)(x & 0xFFFF); }
static inline int32_t acle_high(uint32_t x) { return (int16_t)(x >> 16); }

/* acc + x.lo * y.lo + x.hi * y.hi, modulo 2^32. */
static inline int32_t __smlad(int16x2_t x, int16x2_t y, int32_t acc)
{
    uint32_t sum = (uint32_t)acc + (uint32_t)(acle_low((uint32_t)x) * acle_low((uint32_t)y)) +
                   (uint32_t)(acle_high((uint32_t)x) * acle_high((uint32_t)y));
    return (int32_t)sum;
}

/* acc + x.lo * y.lo (SMLABB) and acc + x.hi * y.lo (SMLATB), modulo 2^32. */
static inline int32_t __smlabb(int32_t x, int32_t y, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(acle_low((uint32_t)x) * acle_low((uint32_t)y)));
}

static inline int32_t __smlatb(int32_t x, int32_t y, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(acle_high((uint32_t)x) * acle_low((uint32_t)y)));
}

#endif
