/* classify: runs the digits model of fxcc_add_model on one image, given as
 * 64 raw little-endian float32 values in a file (numpy: a.tofile(f)), and
 * prints the ten class scores, one per line, then the argmax. */
#include <stdio.h>

#include "digits.h"

/* The header asks for 64-byte alignment (the host kernels' vector loads). */
static unsigned char arena[digits_ARENA_BYTES > 0 ? digits_ARENA_BYTES : 1]
    __attribute__((aligned(64)));

int main(int argc, char **argv)
{
    static float image[digits_INPUT0_SIZE], scores[digits_OUTPUT0_SIZE];
    FILE *f = argc == 2 ? fopen(argv[1], "rb") : NULL;
    if (!f) {
        fprintf(stderr, "usage: classify IMAGE.bin (%d float32 values)\n", digits_INPUT0_SIZE);
        return 2;
    }
    size_t got = fread(image, sizeof image[0], digits_INPUT0_SIZE, f);
    fclose(f);
    if (got != digits_INPUT0_SIZE) {
        fprintf(stderr, "classify: %s holds %zu values, not %d\n", argv[1], got,
                digits_INPUT0_SIZE);
        return 1;
    }
    const void *inputs[] = {image};
    void *outputs[] = {scores};
    if (digits_run(inputs, outputs, arena) != 0) {
        fprintf(stderr, "classify: digits_run failed\n");
        return 1;
    }
    int best = 0;
    for (int k = 0; k < digits_OUTPUT0_SIZE; k++) {
        printf("%.9g\n", scores[k]);
        if (scores[k] > scores[best])
            best = k;
    }
    printf("class %d\n", best);
    return 0;
}
