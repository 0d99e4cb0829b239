/*
 * fxrt_config.h - what this copy of the runtime is built with.
 *
 * The values here are the defaults: the fast kernels and every activation,
 * as the host and --target portable use them.  `fxcc compile --target
 * cortex-m` writes its own fxrt_config.h into the generated fxrt/ folder,
 * with the small kernels and only the activations that model's epilogues
 * use, so that the flash holds no code the model cannot reach.  A build
 * may also set either macro with -D.
 */
#ifndef FXRT_CONFIG_H
#define FXRT_CONFIG_H

/* 1: the convolutions' small kernels (fxrt_nn_nchwc_conv.c), a loop over
 * output pixels with int indices, a few hundred bytes of code, instead of
 * the register-tiled kernels that run fastest where code size is free. */
#ifndef FXRT_SMALL_KERNELS
#define FXRT_SMALL_KERNELS 0
#endif

/* A bit per FxrtActivation (1 << FXRT_ACT_RELU, ...) that the epilogues can
 * apply; an epilogue asking for another one leaves its values without the
 * activation.  Default: all of them. */
#ifndef FXRT_ACTIVATIONS
#define FXRT_ACTIVATIONS 0xFFFFFFFFu
#endif

#define FXRT_ACTIVATION_BUILT(act) ((FXRT_ACTIVATIONS >> (act)) & 1u)

#endif
