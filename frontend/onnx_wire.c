/*
 * onnx_wire.c - the protobuf plumbing under the ONNX readers.
 *
 * protobuf-c parses a whole message in one recursive call.  Two things about
 * it matter for untrusted files: it recurses once per nesting level with no
 * limit (ONNX messages nest: Graph > Node > Attribute > Graph > ...), and it
 * allocates a full C struct per sub-message, so a tiny file of empty
 * sub-messages asks for far more memory than its own size.  This file puts a
 * guard around both.  onnx_wire_check walks the wire format iteratively with
 * an explicit stack before protobuf-c sees the bytes: every tag, varint and
 * length must be well formed and lie inside its enclosing message, groups are
 * refused, nesting is limited, and the first problem is reported with its byte
 * offset.  The OnnxAllocator gives protobuf-c a memory budget proportional to
 * the input, so an amplifying file fails as "too large" rather than taking the
 * machine down, and allocates through fx_malloc, remembering a failure so
 * that running out of memory is not reported as a malformed file.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

/* Legitimate ONNX models nest a handful of levels per subgraph; 100 allows
 * deeply nested control flow and stays far from any stack limit. */
enum { WIRE_MAX_DEPTH = 100 };

/* --- budgeted allocator --------------------------------------------------- */

/* Each block carries its size in a header so that free can give it back to
 * the budget; the header is max_align_t sized to keep malloc's alignment. */
typedef union AllocHeader {
    size_t size;
    max_align_t align;
} AllocHeader;

static void *budget_alloc(void *data, size_t size)
{
    OnnxAllocator *a = data;
    if (size > SIZE_MAX - sizeof(AllocHeader) || size > a->budget - a->used) {
        a->exhausted = true;
        return NULL;
    }
    AllocHeader *h = fx_malloc(sizeof *h + size);
    if (!h) {
        a->out_of_memory = true;
        return NULL;
    }
    h->size = size;
    a->used += size;
    return h + 1;
}

static void budget_free(void *data, void *ptr)
{
    OnnxAllocator *a = data;
    if (!ptr)
        return;
    AllocHeader *h = (AllocHeader *)ptr - 1;
    a->used -= h->size;
    free(h);
}

void onnx_allocator_init(OnnxAllocator *a, size_t input_len)
{
    /* 16x covers the densest legitimate expansion (packed 1-byte varints
     * into int64_t arrays is 8x); 64 MiB covers the per-message structs of
     * ordinary models. */
    uint64_t budget;
    if (!size_mul_ok(input_len, 16, &budget) || !size_add_ok(budget, 64u << 20, &budget) ||
        budget > SIZE_MAX)
        budget = SIZE_MAX;
    memset(a, 0, sizeof *a);
    a->base.alloc = budget_alloc;
    a->base.free = budget_free;
    a->base.allocator_data = a;
    a->budget = (size_t)budget;
}

/* --- wire-format pre-check ------------------------------------------------ */

/* Reads a varint of at most 10 bytes ending before `end`.  Returns false for
 * a truncated or over-long one. */
static bool wire_varint(const uint8_t *data, size_t end, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (*pos >= end)
            return false;
        uint8_t b = data[(*pos)++];
        if (i == 9 && b > 1)
            return false; /* more than 64 bits */
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

typedef struct WireFrame {
    size_t end;
    const ProtobufCMessageDescriptor *desc; /* NULL: an unknown field's bytes */
} WireFrame;

FxStatus onnx_wire_check(const uint8_t *data, size_t len,
                         const ProtobufCMessageDescriptor *desc, const char *file, Diag *d)
{
    WireFrame stack[WIRE_MAX_DEPTH];
    int depth = 0;
    stack[0].end = len;
    stack[0].desc = desc;
    size_t pos = 0;
    for (;;) {
        while (depth >= 0 && pos == stack[depth].end)
            depth--;
        if (depth < 0)
            return FX_OK;
        const WireFrame *f = &stack[depth];
        size_t start = pos;
        uint64_t tag, v;
        if (!wire_varint(data, f->end, &pos, &tag))
            return diag_error_at(d, FX_ERR_FORMAT, file, (long long)start,
                                 "truncated or corrupted field tag (not a protobuf file?)");
        uint64_t number = tag >> 3;
        unsigned wire_type = (unsigned)(tag & 7);
        if (number == 0 || number > 0x1fffffff)
            return diag_error_at(d, FX_ERR_FORMAT, file, (long long)start,
                                 "invalid protobuf field number %llu",
                                 (unsigned long long)number);
        switch (wire_type) {
        case 0: /* varint */
            if (!wire_varint(data, f->end, &pos, &v))
                return diag_error_at(d, FX_ERR_FORMAT, file, (long long)start,
                                     "truncated or corrupted varint in field %llu",
                                     (unsigned long long)number);
            break;
        case 1: /* 64-bit */
        case 5: /* 32-bit */ {
            size_t need = wire_type == 1 ? 8 : 4;
            if (f->end - pos < need)
                return diag_error_at(d, FX_ERR_FORMAT, file, (long long)start,
                                     "truncated fixed-size value in field %llu",
                                     (unsigned long long)number);
            pos += need;
            break;
        }
        case 2: { /* length-delimited */
            if (!wire_varint(data, f->end, &pos, &v))
                return diag_error_at(d, FX_ERR_FORMAT, file, (long long)start,
                                     "truncated or corrupted length in field %llu",
                                     (unsigned long long)number);
            if (v > f->end - pos)
                return diag_error_at(d, FX_ERR_FORMAT, file, (long long)start,
                                     "field %llu claims %llu bytes but only %llu remain "
                                     "(truncated file?)",
                                     (unsigned long long)number, (unsigned long long)v,
                                     (unsigned long long)(f->end - pos));
            const ProtobufCFieldDescriptor *fd =
                f->desc ? protobuf_c_message_descriptor_get_field(f->desc, (unsigned)number)
                        : NULL;
            if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE && v > 0) {
                if (depth + 1 >= WIRE_MAX_DEPTH)
                    return diag_error_at(d, FX_ERR_FORMAT, file, (long long)start,
                                         "messages nested more than %d deep", WIRE_MAX_DEPTH);
                depth++;
                stack[depth].end = pos + (size_t)v;
                stack[depth].desc = fd->descriptor;
            } else {
                pos += (size_t)v;
            }
            break;
        }
        case 3:
        case 4:
            return diag_error_at(d, FX_ERR_FORMAT, file, (long long)start,
                                 "protobuf group in field %llu: ONNX files have none (not an "
                                 "ONNX file?)",
                                 (unsigned long long)number);
        default:
            return diag_error_at(d, FX_ERR_FORMAT, file, (long long)start,
                                 "invalid protobuf wire type %u in field %llu (not a protobuf "
                                 "file?)", wire_type,
                                 (unsigned long long)number);
        }
    }
}

FxStatus onnx_message_unpack(const uint8_t *data, size_t len,
                             const ProtobufCMessageDescriptor *desc, const char *file,
                             const char *what, OnnxAllocator *alloc, ProtobufCMessage **msg,
                             Diag *d)
{
    *msg = NULL;
    FxStatus st = onnx_wire_check(data, len, desc, file, d);
    if (st != FX_OK)
        return st;
    onnx_allocator_init(alloc, len);
    /* protobuf-c wants a non-NULL pointer even for an empty buffer */
    static const uint8_t empty[1];
    *msg = protobuf_c_message_unpack(desc, &alloc->base, len, len ? data : empty);
    if (*msg)
        return FX_OK;
    /* protobuf-c returns NULL for both; only the allocator knows which. */
    if (alloc->out_of_memory)
        return diag_error_at(d, FX_ERR_NOMEM, file, -1, "out of memory decoding this %s", what);
    if (alloc->exhausted)
        return diag_error_at(d, FX_ERR_NOMEM, file, -1,
                             "decoding this %s needs more memory than a file of %zu bytes "
                             "may ask for",
                             what, len);
    return diag_error_at(d, FX_ERR_FORMAT, file, -1,
                         "not a valid %s: the protobuf decoder rejected it (a field has the "
                         "wrong wire type or an invalid value)",
                         what);
}

void onnx_message_free(ProtobufCMessage *msg, OnnxAllocator *alloc)
{
    if (msg)
        protobuf_c_message_free_unpacked(msg, &alloc->base);
}
