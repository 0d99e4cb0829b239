/*
 * fuzz_tensor_file.c - libFuzzer entry point for the tensor file readers.
 *
 * The first byte picks the reader (even: .npy, odd: TensorProto .pb); the
 * rest is the file.  A tensor that reads back is written again in both
 * formats and re-read, and the copies must match the original exactly, so
 * the writers are fuzzed through the readers.  Any crash, sanitizer report,
 * leak or mismatch is a bug (mismatches abort so libFuzzer keeps the input).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_same(const Tensor *a, const Tensor *b)
{
    if (!type_equal(&a->type, &b->type) || memcmp(a->data, b->data, tensor_nbytes(a)) != 0)
        abort();
}

static void roundtrip(const Tensor *t, Diag *d)
{
    uint8_t *buf;
    size_t len;
    Tensor *back;
    if (npy_write_buffer(t, &buf, &len, d) != FX_OK)
        abort();
    if (npy_read_buffer(buf, len, "roundtrip.npy", &back, d) != FX_OK)
        abort();
    check_same(t, back);
    tensor_free(back);
    free(buf);
    if (tensor_pb_write_buffer(t, "x", &buf, &len, d) != FX_OK)
        abort();
    if (tensor_pb_read_buffer(buf, len, "roundtrip.pb", &back, d) != FX_OK)
        abort();
    check_same(t, back);
    tensor_free(back);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    Diag d;
    diag_init(&d);
    Tensor *t = NULL;
    FxStatus st = (data[0] & 1) ? tensor_pb_read_buffer(data + 1, size - 1, "fuzz.pb", &t, &d)
                                : npy_read_buffer(data + 1, size - 1, "fuzz.npy", &t, &d);
    if (st == FX_OK) {
        roundtrip(t, &d);
        tensor_free(t);
    }
    diag_free(&d);
    return 0;
}
