/*
 * embedded.h - source files built into the fxcc binary (runtime/fxrt*.{h,c},
 * codegen/harness/fxio.{h,c}) so that `fxcc compile` can write them into a
 * generated project without the source tree.
 *
 * The definitions are generated at build time by codegen/embed.cmake
 * (fxcc_embed_files(... fxcc_embedded ...)).  Entries are sorted by base name;
 * each data block is followed by a NUL byte that sizes[] does not count, so
 * text files can also be used as C strings.
 */
#ifndef FXCC_EMBEDDED_H
#define FXCC_EMBEDDED_H

#include <stddef.h>

extern const char *const fxcc_embedded_names[];          /* "fxrt.h", ...; NULL after the last */
extern const unsigned char *const fxcc_embedded_data[];  /* [count] */
extern const size_t fxcc_embedded_sizes[];               /* [count], bytes */
extern const int fxcc_embedded_count;

/* The file with base name name, or NULL; *size (if size) gets its bytes. */
const unsigned char *fxcc_embedded_find(const char *name, size_t *size);

#endif
