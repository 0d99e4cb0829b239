/*
 * fuzz_graph_build.c - a structure-aware libFuzzer target for the loader and
 * every op behind it.
 *
 * Mutating raw protobuf bytes rarely gets past the decoder, so this target
 * reads the fuzzer's bytes as choices instead: an opset, a few values (graph
 * inputs or initializers of small random shapes and dtypes), one to three
 * nodes of ops taken from the op table with inputs wired to earlier values
 * (or omitted), and attributes drawn from each op's AttrSpec list with
 * plausible, boundary and absurd values.  It serializes that as a ModelProto
 * with a tiny protobuf encoder, loads it with onnx_load_buffer, lints it,
 * propagates shapes and, when everything is small, runs the interpreter on
 * inputs filled from the remaining bytes.  A rejection anywhere is fine; a
 * crash, sanitizer report or leak is a bug in the stage that let the model
 * through (infer is the gate that must make eval safe).  FUZZ_DUMP=x.onnx
 * writes the generated model, FUZZ_VERBOSE=1 prints the diagnostics and
 * FUZZ_NO_RUN=1 stops after shape propagation.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* --- choices from the input ---------------------------------------------- */

typedef struct Src {
    const uint8_t *p;
    size_t n;
} Src;

static unsigned take(Src *s)
{
    if (!s->n)
        return 0;
    s->n--;
    return *s->p++;
}

static unsigned pick(Src *s, unsigned k) { return k ? take(s) % k : 0; }

/* --- a minimal protobuf writer -------------------------------------------- */

typedef struct Buf {
    uint8_t *d;
    size_t n, cap;
} Buf;

static void buf_put(Buf *b, const void *p, size_t len)
{
    if (b->n + len > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + len)
            cap *= 2;
        b->d = realloc(b->d, cap);
        if (!b->d)
            abort(); /* the harness, not the code under test */
        b->cap = cap;
    }
    if (len)
        memcpy(b->d + b->n, p, len);
    b->n += len;
}

static void raw_varint(Buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t k = 0;
    do {
        tmp[k] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            tmp[k] |= 0x80;
        k++;
    } while (v);
    buf_put(b, tmp, k);
}

static void pb_varint(Buf *b, unsigned field, uint64_t v)
{
    raw_varint(b, (uint64_t)field << 3);
    raw_varint(b, v);
}

static void pb_bytes(Buf *b, unsigned field, const void *p, size_t len)
{
    raw_varint(b, (uint64_t)field << 3 | 2);
    raw_varint(b, len);
    buf_put(b, p, len);
}

static void pb_str(Buf *b, unsigned field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

/* Appends sub as a length-delimited field and frees it. */
static void pb_msg(Buf *b, unsigned field, Buf *sub)
{
    pb_bytes(b, field, sub->d, sub->n);
    free(sub->d);
    memset(sub, 0, sizeof *sub);
}

static void pb_fixed32(Buf *b, unsigned field, uint32_t v)
{
    raw_varint(b, (uint64_t)field << 3 | 5);
    uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    buf_put(b, t, 4);
}

/* --- random pieces -------------------------------------------------------- */

static const int32_t dtypes[] = {1, 1, 1, 7, 7, 6, 9, 2, 11, 3, 5, 4, 12, 13, 10};
static const int64_t small_ints[] = {0, 1, -1, 2, 3, -2, 4, 1, 0, 2, 5, -3, 6, 8, 13, 100,
                                     INT64_MAX, INT64_MIN, (int64_t)1 << 31, -100};
static const float floats[] = {0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 1e-5f, 3.0f, 0.1f,
                               NAN, INFINITY, -INFINITY, 1e30f, -0.0f, 1e-40f};
static const char *const strings[] = {
    "", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "constant", "reflect", "edge",
    "linear", "nearest", "cubic", "DCR", "CRD", "half_pixel", "asymmetric",
    "align_corners", "pytorch_half_pixel", "tf_crop_and_resize", "floor", "ceil",
    "round_prefer_floor", "round_prefer_ceil", "none", "mean", "sum", "add", "mul",
    "max", "min", "Relu", "Tanh", "Sigmoid", "forward", "reverse", "bidirectional",
    "LEFT", "RIGHT", "ij,jk->ik", "...ii->...i", "tanh", "bogus"};

static int64_t rand_int(Src *s) { return small_ints[pick(s, sizeof small_ints / sizeof small_ints[0])]; }

static size_t esize(int32_t dt)
{
    switch (dt) {
    case 1: case 6: case 12: return 4;
    case 7: case 11: case 13: return 8;
    case 5: case 4: case 10: return 2;
    default: return 1;
    }
}

/* Small element values: shapes, axes and indices made of them are often
 * meaningful. */
static void fill_value(Src *s, int32_t dt, uint8_t *dst)
{
    int v = (int)pick(s, 13) - 4; /* -4 .. 8 */
    switch (dt) {
    case 1: { float f = (float)v * 0.5f; memcpy(dst, &f, 4); break; }
    case 11: { double f = v * 0.5; memcpy(dst, &f, 8); break; }
    case 7: case 13: { int64_t x = v; memcpy(dst, &x, 8); break; }
    case 6: case 12: { int32_t x = v; memcpy(dst, &x, 4); break; }
    case 5: case 4: case 10: { int16_t x = (int16_t)v; memcpy(dst, &x, 2); break; }
    case 9: *dst = (uint8_t)(v > 0); break;
    default: *dst = (uint8_t)(int8_t)v; break;
    }
}

/* A TensorProto of rank <= max_rank with dims 0..4 (mostly 1..3). */
static void rand_tensor(Src *s, Buf *t, const char *name, int max_rank)
{
    int32_t dt = dtypes[pick(s, sizeof dtypes / sizeof dtypes[0])];
    int rank = (int)pick(s, (unsigned)max_rank + 1);
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) {
        int64_t dim = (int64_t)(pick(s, 8) % 5);
        if (dim == 0 && pick(s, 4))
            dim = 1;
        pb_varint(t, 1, (uint64_t)dim);
        numel *= dim;
    }
    pb_varint(t, 2, (uint64_t)dt);
    if (name)
        pb_str(t, 8, name);
    size_t bytes = (size_t)numel * esize(dt);
    uint8_t *raw = calloc(bytes ? bytes : 1, 1);
    if (!raw)
        abort();
    for (int64_t i = 0; i < numel; i++)
        fill_value(s, dt, raw + (size_t)i * esize(dt));
    pb_bytes(t, 9, raw, bytes);
    free(raw);
}

static void rand_attr(Src *s, Buf *node, const AttrSpec *spec)
{
    Buf a = {0};
    pb_str(&a, 1, spec->name);
    switch (spec->kind) {
    case FX_ATTR_FLOAT:
        pb_varint(&a, 20, 1);
        if (pick(s, 4) == 0) { /* an int where a float is expected */
            pb_varint(&a, 20, 2);
            pb_varint(&a, 3, (uint64_t)rand_int(s));
        } else {
            float f = floats[pick(s, sizeof floats / sizeof floats[0])];
            uint32_t bits;
            memcpy(&bits, &f, 4);
            pb_fixed32(&a, 2, bits);
        }
        break;
    case FX_ATTR_INT:
        pb_varint(&a, 20, 2);
        pb_varint(&a, 3, (uint64_t)rand_int(s));
        break;
    case FX_ATTR_STRING:
        pb_varint(&a, 20, 3);
        pb_str(&a, 4, strings[pick(s, sizeof strings / sizeof strings[0])]);
        break;
    case FX_ATTR_TENSOR: {
        pb_varint(&a, 20, 4);
        Buf t = {0};
        rand_tensor(s, &t, NULL, 1);
        pb_msg(&a, 5, &t);
        break;
    }
    case FX_ATTR_FLOATS: {
        pb_varint(&a, 20, 6);
        unsigned k = pick(s, 7);
        for (unsigned i = 0; i < k; i++) {
            float f = floats[pick(s, sizeof floats / sizeof floats[0])];
            uint32_t bits;
            memcpy(&bits, &f, 4);
            pb_fixed32(&a, 7, bits);
        }
        break;
    }
    case FX_ATTR_INTS: {
        pb_varint(&a, 20, 7);
        unsigned k = pick(s, 7);
        for (unsigned i = 0; i < k; i++)
            pb_varint(&a, 8, (uint64_t)(pick(s, 3) ? (int64_t)pick(s, 6) - 2 : rand_int(s)));
        break;
    }
    case FX_ATTR_STRINGS: {
        pb_varint(&a, 20, 8);
        unsigned k = pick(s, 4);
        for (unsigned i = 0; i < k; i++)
            pb_str(&a, 9, strings[pick(s, sizeof strings / sizeof strings[0])]);
        break;
    }
    }
    pb_msg(node, 5, &a);
}

/* --- the model ------------------------------------------------------------ */

enum { MAX_VALUES = 24 };

static Buf build_model(Src *s)
{
    static const int opsets[] = {7, 9, 10, 11, 12, 13, 13, 14, 15, 16, 17, 18, 19, 21, 23, 28};
    Buf model = {0}, graph = {0}, tmp = {0};
    char names[MAX_VALUES][8];
    int nvals = 0;

    int opset = opsets[pick(s, sizeof opsets / sizeof opsets[0])];
    pb_varint(&model, 1, 8); /* ir_version */
    pb_varint(&tmp, 2, (uint64_t)opset);
    pb_msg(&model, 8, &tmp);

    int ninit = 1 + (int)pick(s, 3);
    for (int i = 0; i < ninit; i++, nvals++) {
        snprintf(names[nvals], sizeof names[nvals], "v%d", nvals);
        if (pick(s, 2)) { /* initializer */
            rand_tensor(s, &tmp, names[nvals], 4);
            pb_msg(&graph, 5, &tmp);
            continue;
        }
        Buf vi = {0}, tp = {0}, tt = {0}, shape = {0};
        pb_str(&vi, 1, names[nvals]);
        pb_varint(&tt, 1, (uint64_t)dtypes[pick(s, sizeof dtypes / sizeof dtypes[0])]);
        int rank = (int)pick(s, 5);
        for (int k = 0; k < rank; k++) {
            Buf dim = {0};
            pb_varint(&dim, 1, pick(s, 5));
            pb_msg(&shape, 1, &dim);
        }
        pb_msg(&tt, 2, &shape);
        pb_msg(&tp, 1, &tt);
        pb_msg(&vi, 2, &tp);
        pb_msg(&graph, 11, &vi);
    }

    int nnodes = 1 + (int)pick(s, 3);
    int first_out = 0, last_nout = 0;
    for (int i = 0; i < nnodes && nvals < MAX_VALUES - 4; i++) {
        const OpDef *op = op_by_kind((OpKind)pick(s, (unsigned)op_count()));
        if (!op || (op->flags & FX_OPF_INTERNAL))
            continue;
        Buf node = {0};
        int maxin = op->max_inputs < 0 ? op->min_inputs + 3 : op->max_inputs;
        int nin = op->min_inputs + (int)pick(s, (unsigned)(maxin - op->min_inputs + 1));
        for (int j = 0; j < nin; j++) {
            if (j >= op->min_inputs && pick(s, 4) == 0)
                pb_str(&node, 1, "");
            else
                pb_str(&node, 1, names[pick(s, (unsigned)nvals)]);
        }
        int maxout = op->max_outputs > 4 ? 4 : op->max_outputs;
        int nout = op->min_outputs + (int)pick(s, (unsigned)(maxout - op->min_outputs + 1));
        first_out = nvals;
        for (int j = 0; j < nout && nvals < MAX_VALUES; j++, nvals++) {
            snprintf(names[nvals], sizeof names[nvals], "v%d", nvals);
            pb_str(&node, 2, names[nvals]);
        }
        last_nout = nvals - first_out;
        pb_str(&node, 4, op->name);
        for (const AttrSpec *a = op->attrs; a && a->name; a++)
            if (pick(s, 3) == 0)
                rand_attr(s, &node, a);
        pb_msg(&graph, 1, &node);
    }
    if (last_nout == 0) {
        first_out = nvals - 1;
        last_nout = 1;
    }
    for (int j = 0; j < last_nout; j++) {
        Buf vi = {0};
        pb_str(&vi, 1, names[first_out + j]);
        pb_msg(&graph, 12, &vi);
    }
    pb_msg(&model, 7, &graph);
    return model;
}

/* Runs the interpreter when every value is small. */
static void run_small(Graph *g, Src *s)
{
    int64_t total = 0;
    graph_for_each(g, n)
        for (int k = 0; k < n->num_outputs; k++)
            total += type_numel(&n->out_types[k]);
    if (total > (1 << 20))
        return;
    int nin = graph_num_placeholders(g), nout = graph_num_outputs(g);
    Tensor **in = calloc((size_t)nin + 1, sizeof *in);
    Tensor **out = calloc((size_t)nout + 1, sizeof *out);
    if (!in || !out)
        abort();
    Diag d;
    diag_init(&d);
    bool ok = true;
    for (int i = 0; i < nin && ok; i++) {
        Node *ph = graph_placeholder(g, i);
        in[i] = tensor_new(&ph->out_types[0], &d);
        ok = in[i] != NULL;
        size_t es = fxrt_dtype_size(ph->out_types[0].dtype);
        for (int64_t e = 0; ok && e < tensor_numel(in[i]); e++)
            fill_value(s, (int32_t)ph->out_types[0].dtype, (uint8_t *)in[i]->data + e * (int64_t)es);
    }
    if (ok && interp_run(g, (const Tensor *const *)in, nin, out, nout, NULL, NULL, &d) == FX_OK)
        for (int k = 0; k < nout; k++)
            tensor_free(out[k]);
    for (int i = 0; i < nin; i++)
        tensor_free(in[i]);
    free(in);
    free(out);
    diag_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Src s = {data, size};
    Buf model = build_model(&s);
    /* FUZZ_DUMP=file.onnx saves the generated model: a crash input becomes a
     * model that `fxcc inspect` and onnx can read */
    const char *dump = getenv("FUZZ_DUMP");
    FILE *f = dump ? fopen(dump, "wb") : NULL;
    if (f) {
        fwrite(model.d, 1, model.n, f);
        fclose(f);
    }
    OnnxLoadOptions opt = {.keep_input_defaults = true};
    Diag d;
    diag_init(&d);
    Graph *g = NULL;
    if (onnx_load_buffer(model.d, model.n, "fuzz.onnx", NULL, &opt, &g, &d) == FX_OK) {
        if (graph_lint(g, false, &d) == FX_OK &&
            graph_propagate_shapes(g, NULL, 0, &d) == FX_OK && getenv("FUZZ_NO_RUN") == NULL)
            run_small(g, &s);
        graph_free(g);
    }
    if (getenv("FUZZ_VERBOSE"))
        diag_print(&d, stderr);
    diag_free(&d);
    free(model.d);
    return 0;
}
