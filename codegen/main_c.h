/*
 * main_c.h - the optional harness of a generated project (--emit-main): a
 * main.c that runs the model on tensor files, and the fxio reader/writer it
 * uses.
 */
#ifndef FXCC_MAIN_C_H
#define FXCC_MAIN_C_H

#include <stdio.h>

struct Node;

/* Writes main.c for the model whose symbols start with name (a C identifier
 * the caller has checked).  The caller checks ferror(out). */
void cg_write_main(FILE *out, const char *name);

/* Writes NAME_profile.c: the node names, ops, FLOPs and bytes of the
 * num_steps timed steps of NAME_run, in order (a NULL step: the copies into
 * the outputs, copy_bytes in all), for main --profile. */
void cg_write_profile_tables(FILE *out, const char *name, const struct Node *const *steps,
                             int num_steps, double copy_bytes);

/* Writes fxio.c and fxio.h (embedded in the fxcc binary).  If they were not
 * embedded (a broken build) each file gets an #error line instead, so the
 * generated project fails loudly. */
void cg_write_fxio(FILE *out_c, FILE *out_h);

#endif
