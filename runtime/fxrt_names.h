/*
 * fxrt_names.h - the link names of the runtime's functions.
 *
 * Here, in the runtime's own build, every function keeps its name.  `fxcc
 * compile --name NAME` writes its own fxrt_names.h into the generated fxrt/
 * folder, defining each extern fxrt_ function as NAME_fxrt_..., so that the
 * runtime copies of two models (built, perhaps, with different kernels and
 * activations: fxrt_config.h) link into one firmware image side by side.
 */
#ifndef FXRT_NAMES_H
#define FXRT_NAMES_H
#endif
