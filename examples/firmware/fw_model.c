/* The model's glue: the only file of the example that knows the model.  The
 * Makefile passes its name (FW_MODEL) and header (FW_MODEL_HEADER); the
 * arena and the outputs are static, sized by the header's constants.  With
 * FW_SECOND it is the second model's glue (fw_model2_*), built from the
 * same file. */
#include FW_MODEL_HEADER

#include "fw.h"

#define FW_CAT_(a, b) a##b
#define FW_CAT(a, b) FW_CAT_(a, b)
#define MODEL(suffix) FW_CAT(FW_MODEL, suffix)

#define FW_STR_(a) #a
#define FW_STR(a) FW_STR_(a)

#ifdef FW_SECOND
#define GLUE(f) fw_model2_##f
#else
#define GLUE(f) fw_model_##f
#endif

/* A model with no intermediate values has a zero-byte arena, which C cannot
 * declare.  NAME_ARENA_PLACEMENT: the section fxcc compile --arena-section
 * named, if any. */
static unsigned char arena[MODEL(_ARENA_BYTES) > 0 ? MODEL(_ARENA_BYTES) : 1]
    __attribute__((aligned(64))) MODEL(_ARENA_PLACEMENT);

/* Each output starts at a multiple of 8 bytes, so any element type is
 * aligned; hence the 8 bytes of slack per output. */
static unsigned char output_pool[MODEL(_OUTPUTS_BYTES) + 8 * MODEL(_NUM_OUTPUTS)]
    __attribute__((aligned(8)));
static void *outputs[MODEL(_NUM_OUTPUTS) > 0 ? MODEL(_NUM_OUTPUTS) : 1];

static size_t dtype_bytes(int dtype)
{
    switch (dtype) {
    case 2: case 3: case 9: return 1;        /* uint8, int8, bool */
    case 4: case 5: case 10: case 16: return 2; /* uint16, int16, float16, bfloat16 */
    case 1: case 6: case 12: return 4;       /* float32, int32, uint32 */
    case 7: case 11: case 13: return 8;      /* int64, float64, uint64 */
    default: return 0;
    }
}

const char *GLUE(name)(void)
{
    return FW_STR(FW_MODEL);
}

const char *GLUE(run)(uint32_t num_inputs, const void *const *inputs,
                      const uint32_t *input_bytes)
{
    if (num_inputs != MODEL(_NUM_INPUTS)) {
        fw_put_u32(num_inputs);
        fw_puts(" inputs embedded, the model takes ");
        fw_put_u32(MODEL(_NUM_INPUTS));
        fw_puts("\n");
        return "the image embeds another number of inputs than the model takes (INPUTS=)";
    }
    for (int k = 0; k < MODEL(_NUM_INPUTS); k++) {
        size_t want = MODEL(_input_sizes)[k] * dtype_bytes(MODEL(_input_dtypes)[k]);
        if (input_bytes[k] != want) {
            fw_puts("input ");
            fw_put_u32((uint32_t)k);
            fw_puts(" '");
            fw_puts(MODEL(_input_names)[k]);
            fw_puts("': ");
            fw_put_u32(input_bytes[k]);
            fw_puts(" bytes embedded, the model takes ");
            fw_put_u32((uint32_t)want);
            fw_puts("\n");
            return "an embedded input's byte count is not its tensor's (INPUTS= order or "
                   "element type?)";
        }
    }
    size_t offset = 0;
    for (int k = 0; k < MODEL(_NUM_OUTPUTS); k++) {
        size_t elem = dtype_bytes(MODEL(_output_dtypes)[k]);
        if (elem == 0)
            return "an output's element type is not one the harness prints";
        outputs[k] = output_pool + offset;
        offset += (MODEL(_output_sizes)[k] * elem + 7) / 8 * 8;
    }
    return MODEL(_run)(inputs, outputs, arena) == 0 ? NULL : "the model's run returned non-zero";
}

int GLUE(num_outputs)(void)
{
    return MODEL(_NUM_OUTPUTS);
}

FwOutput GLUE(output)(int k)
{
    FwOutput out;
    out.name = MODEL(_output_names)[k];
    out.dtype = MODEL(_output_dtypes)[k];
    out.elem_bytes = dtype_bytes(out.dtype);
    out.count = MODEL(_output_sizes)[k];
    out.data = outputs[k];
    return out;
}
