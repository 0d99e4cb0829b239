/* The glue without a model: the same harness, startup and inputs, so that
 * the difference in size between the two images is what the model adds. */
#include "fw.h"

const char *fw_model_name(void)
{
    return "none (stub)";
}

const char *fw_model_run(uint32_t num_inputs, const void *const *inputs,
                         const uint32_t *input_bytes)
{
    (void)num_inputs;
    (void)inputs;
    (void)input_bytes;
    return NULL;
}

int fw_model_num_outputs(void)
{
    return 0;
}

FwOutput fw_model_output(int k)
{
    FwOutput none = {"", 0, 0, 0, NULL};
    (void)k;
    return none;
}
