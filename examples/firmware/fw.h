/* What the parts of the firmware example share: the startup code and the
 * harness (fw_start.c, fw_main.c), the model's glue (fw_model.c, or
 * fw_stub.c for the build without the model) and the embedded inputs
 * (fw_inputs.S, written by the Makefile). */
#ifndef FW_H
#define FW_H

/* Written over the whole stack at reset; a word that still holds it after the
 * run was never used. */
#define FW_STACK_PATTERN 0x5AC3E1F7

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>

/* The inputs compiled into the image, in the model's input order: raw
 * little-endian bytes in the model's element types. */
extern const uint32_t fw_num_inputs;
extern const void *const fw_inputs[];
extern const uint32_t fw_input_bytes[];

/* Semihosting output (fw_start.c). */
void fw_puts(const char *s);
void fw_put_u32(uint32_t v);
void fw_put_hex(uint64_t v, int digits);

/* One output of the model, as the harness prints it. */
typedef struct {
    const char *name;
    int dtype;          /* ONNX TensorProto numbering: 1 float32, 3 int8, ... */
    size_t elem_bytes;
    size_t count;
    const void *data;
} FwOutput;

/* The model's glue.  fw_model_run returns NULL on success, else why it
 * failed. */
const char *fw_model_name(void);
const char *fw_model_run(uint32_t num_inputs, const void *const *inputs,
                         const uint32_t *input_bytes);
int fw_model_num_outputs(void);
FwOutput fw_model_output(int k);

#ifdef FW_TWO_MODELS
/* A second model in the same image (make MODEL_DIR2=...): fw_model.c built
 * again with FW_SECOND, its inputs from INPUTS2. */
extern const uint32_t fw2_num_inputs;
extern const void *const fw2_inputs[];
extern const uint32_t fw2_input_bytes[];
const char *fw_model2_name(void);
const char *fw_model2_run(uint32_t num_inputs, const void *const *inputs,
                          const uint32_t *input_bytes);
int fw_model2_num_outputs(void);
FwOutput fw_model2_output(int k);
#endif
#endif

#endif
