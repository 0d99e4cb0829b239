/*
 * fuzz_onnx_load.c - libFuzzer entry point for the model loader.
 *
 * Feeds arbitrary bytes to onnx_load_buffer (no base folder, so external data
 * is refused rather than read from the fuzzing machine) and, when a graph
 * comes out, runs lint and shape propagation on it: whatever the loader
 * accepts must be safe for the next stages too.  The low bit of the input's
 * length picks the IR-3 freeze option so both input-default paths are
 * exercised.  Any crash, sanitizer report or leak is a bug.
 */
#include <stddef.h>
#include <stdint.h>

#include "frontend/frontend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    OnnxLoadOptions opt = {.keep_input_defaults = (size & 1) != 0};
    Diag d;
    diag_init(&d);
    Graph *g = NULL;
    if (onnx_load_buffer(data, size, "fuzz.onnx", NULL, &opt, &g, &d) == FX_OK) {
        diag_clear(&d);
        if (graph_lint(g, false, &d) == FX_OK)
            (void)graph_propagate_shapes(g, NULL, 0, &d);
        graph_free(g);
    }
    diag_free(&d);
    return 0;
}
