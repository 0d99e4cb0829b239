/*
 * check_harness.c - unit tests of the generated projects' harness: fxio (the
 * standalone .npy/.pb reader and .npy writer that main.c uses), checked
 * against fxcc's own tensor readers and writers (frontend/frontend.h) and
 * against the ONNX backend test data; and, when FXCC_CHECK_CODEGEN is
 * defined (fxcc_core then holds codegen/main_c.c and the embedded sources),
 * the emitted main.c, built with the system C compiler in the strict mode
 * the contract promises and run on a hand-written model.
 *
 * Every malformed input must be refused with a message and no crash; run
 * under ASan/UBSan (FXCC_SANITIZE) to make "no crash" mean no memory error.
 */
#include <check.h>
#include <dirent.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/harness/fxio.h"
#include "frontend/frontend.h"
#ifdef FXCC_CHECK_CODEGEN
#include "codegen/main_c.h"
#endif

#define NODE_TESTS "/usr/share/libonnx-testdata/data/node"

static const int all_dtypes[] = {
    FXIO_DTYPE_FLOAT32, FXIO_DTYPE_FLOAT64, FXIO_DTYPE_INT8,   FXIO_DTYPE_INT16,
    FXIO_DTYPE_INT32,   FXIO_DTYPE_INT64,   FXIO_DTYPE_UINT8,  FXIO_DTYPE_UINT16,
    FXIO_DTYPE_UINT32,  FXIO_DTYPE_UINT64,  FXIO_DTYPE_BOOL,
};
#define NUM_DTYPES ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

/* ------------------------------------------------------------------------- */
/* Helpers                                                                     */
/* ------------------------------------------------------------------------- */

static char tmp_dir[256];

static void tmp_setup(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/fxcc_check_harness.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
}

static void tmp_teardown(void)
{
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s", tmp_dir, name);
    return p;
}

/* Deterministic test data: every byte pattern for the integer types, valid
 * 0/1 for bool, plain numbers for the float types (NaN bytes would compare
 * equal too, but numbers make failures readable). */
static void fill(int dtype, void *data, size_t count)
{
    unsigned char *b = data;
    for (size_t i = 0; i < count; i++) {
        switch (dtype) {
        case FXIO_DTYPE_FLOAT32: ((float *)data)[i] = (float)i * 0.5f - 3.25f; break;
        case FXIO_DTYPE_FLOAT64: ((double *)data)[i] = (double)i * -1.125 + 1e100; break;
        case FXIO_DTYPE_BOOL: b[i] = (unsigned char)(i % 3 == 1); break;
        default: {
            size_t e = fxio_dtype_size(dtype);
            for (size_t j = 0; j < e; j++)
                b[i * e + j] = (unsigned char)(i * 37 + j * 101 + 0x80);
        }
        }
    }
}

static Tensor *make_tensor(int dtype, int rank, const int64_t *dims)
{
    TensorType t = {.dtype = (DType)dtype, .rank = rank};
    for (int i = 0; i < rank; i++)
        t.dims[i] = dims[i];
    Tensor *x = tensor_new(&t, NULL);
    ck_assert_ptr_nonnull(x);
    fill(dtype, x->data, (size_t)tensor_numel(x));
    return x;
}

static void write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static unsigned char *read_bytes(const char *path, size_t *len)
{
    uint8_t *data;
    Diag d;
    diag_init(&d);
    ck_assert_int_eq(file_read_all(path, &data, len, &d), FX_OK);
    diag_free(&d);
    return data;
}

/* fxio on a buffer; asserts failure and that the message contains text. */
static void assert_refused(const unsigned char *buf, size_t len, const char *name, int dtype,
                           int rank, const int64_t *dims, const char *text)
{
    char err[512];
    unsigned char dst[4096];
    int rc = fxio_read_tensor_buffer(buf, len, name, dtype, rank, dims, dst, err, sizeof err);
    ck_assert_msg(rc != 0, "%s: accepted, expected an error with '%s'", name, text);
    ck_assert_msg(strstr(err, text) != NULL, "%s: error '%s' does not mention '%s'", name, err,
                  text);
}

/* ------------------------------------------------------------------------- */
/* .npy                                                                        */
/* ------------------------------------------------------------------------- */

static const int64_t shape_234[3] = {2, 3, 4};
static const int64_t shape_03[2] = {0, 3};
static const int64_t shape_5[1] = {5};

typedef struct Shape {
    int rank;
    const int64_t *dims;
    size_t numel;
} Shape;

static const Shape shapes[] = {{3, shape_234, 24}, {0, NULL, 1}, {2, shape_03, 0}, {1, shape_5, 5}};

/* fxio writes, fxio and fxcc read back; fxcc writes, fxio reads. */
START_TEST(test_npy_roundtrip)
{
    int dtype = all_dtypes[_i % NUM_DTYPES];
    const Shape *s = &shapes[_i / NUM_DTYPES];
    size_t bytes = s->numel * fxio_dtype_size(dtype);
    unsigned char *src = calloc(1, bytes + 1), *back = calloc(1, bytes + 1);
    char err[512];
    const char *path = tmp_path("t.npy"), *path2 = tmp_path("u.npy");
    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(back);
    fill(dtype, src, s->numel);

    ck_assert_msg(fxio_write_npy(path, dtype, s->rank, s->dims, src, err, sizeof err) == 0, "%s",
                  err);
    ck_assert_msg(fxio_read_tensor(path, dtype, s->rank, s->dims, back, err, sizeof err) == 0,
                  "%s", err);
    ck_assert(memcmp(src, back, bytes) == 0);

    /* NumPy's layout: the data starts 64-aligned after a newline. */
    size_t len;
    unsigned char *file = read_bytes(path, &len);
    size_t hlen = (size_t)file[8] | (size_t)file[9] << 8;
    ck_assert_uint_eq((10 + hlen) % 64, 0);
    ck_assert_int_eq(file[10 + hlen - 1], '\n');
    ck_assert_uint_eq(len, 10 + hlen + bytes);
    free(file);

    Diag d;
    diag_init(&d);
    Tensor *t = NULL;
    ck_assert_msg(tensor_file_read(path, &t, &d) == FX_OK, "fxcc refused fxio's .npy: %s",
                  d.count ? d.entries[0].message : "");
    ck_assert_int_eq((int)t->type.dtype, dtype);
    ck_assert_int_eq(t->type.rank, s->rank);
    for (int i = 0; i < s->rank; i++)
        ck_assert_int_eq(t->type.dims[i], s->dims[i]);
    ck_assert(memcmp(t->data, src, bytes) == 0);

    ck_assert_int_eq(tensor_file_write(path2, t, &d), FX_OK);
    memset(back, 0xee, bytes);
    ck_assert_msg(fxio_read_tensor(path2, dtype, s->rank, s->dims, back, err, sizeof err) == 0,
                  "fxio refused fxcc's .npy: %s", err);
    ck_assert(memcmp(src, back, bytes) == 0);
    tensor_free(t);
    diag_free(&d);
    free(src);
    free(back);
}
END_TEST

START_TEST(test_npy_rejects_mismatch)
{
    float data[24] = {0};
    char err[512];
    const char *path = tmp_path("m.npy");
    ck_assert_int_eq(fxio_write_npy(path, FXIO_DTYPE_FLOAT32, 3, shape_234, data, err, sizeof err), 0);
    size_t len;
    unsigned char *file = read_bytes(path, &len);
    const int64_t other[3] = {2, 4, 3}, two[2] = {6, 4};

    assert_refused(file, len, "m.npy", FXIO_DTYPE_FLOAT64, 3, shape_234, "dtype is float32");
    assert_refused(file, len, "m.npy", FXIO_DTYPE_INT32, 3, shape_234, "expected int32");
    assert_refused(file, len, "m.npy", FXIO_DTYPE_FLOAT32, 3, other, "shape is [2, 3, 4]");
    assert_refused(file, len, "m.npy", FXIO_DTYPE_FLOAT32, 2, two, "expected [6, 4]");
    assert_refused(file, len, "m.npy", FXIO_DTYPE_FLOAT32, 0, NULL, "expected []");
    /* The file on disk, through the path API, too. */
    ck_assert(fxio_read_tensor(path, FXIO_DTYPE_UINT8, 3, shape_234, data, err, sizeof err) != 0);
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_ptr_nonnull(strstr(err, "dtype"));
    free(file);
}
END_TEST

/* Builds a v1 .npy with the given header dict (padded) and data bytes. */
static size_t npy_build(unsigned char *out, size_t cap, int version, const char *dict,
                        const void *data, size_t n)
{
    size_t pre = version == 1 ? 10 : 12, dl = strlen(dict);
    size_t hlen = (pre + dl + 1 + 63) / 64 * 64 - pre;
    ck_assert_uint_le(pre + hlen + n, cap);
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)version;
    out[7] = 0;
    if (version == 1) {
        out[8] = (unsigned char)hlen;
        out[9] = (unsigned char)(hlen >> 8);
    } else {
        out[8] = (unsigned char)hlen;
        out[9] = (unsigned char)(hlen >> 8);
        out[10] = out[11] = 0;
    }
    memset(out + pre, ' ', hlen);
    memcpy(out + pre, dict, dl);
    out[pre + hlen - 1] = '\n';
    if (n)
        memcpy(out + pre + hlen, data, n);
    return pre + hlen + n;
}

START_TEST(test_npy_header_forms)
{
    unsigned char buf[1024];
    float data[6] = {1, 2, 3, 4, 5, 6}, dst[6];
    const int64_t d23[2] = {2, 3}, d16[2] = {1, 6}, d6[1] = {6};
    char err[512];
    size_t n;

    /* Accepted: v2 and v3, double quotes, no trailing comma, extra spaces,
     * a Fortran-order file whose layout is the C layout. */
    n = npy_build(buf, sizeof buf, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                  data, sizeof data);
    ck_assert_msg(fxio_read_tensor_buffer(buf, n, "v2", 1, 2, d23, dst, err, sizeof err) == 0,
                  "%s", err);
    ck_assert(memcmp(dst, data, sizeof data) == 0);
    n = npy_build(buf, sizeof buf, 3, "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(6,)}",
                  data, sizeof data);
    ck_assert_msg(fxio_read_tensor_buffer(buf, n, "v3", 1, 1, d6, dst, err, sizeof err) == 0,
                  "%s", err);
    n = npy_build(buf, sizeof buf, 1,
                  "{ 'shape' : ( 1 , 6 ) , 'fortran_order' : True , 'descr' : '<f4' }", data,
                  sizeof data);
    ck_assert_msg(fxio_read_tensor_buffer(buf, n, "f16", 1, 2, d16, dst, err, sizeof err) == 0,
                  "%s", err);

    /* Refused. */
    n = npy_build(buf, sizeof buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }",
                  data, sizeof data);
    assert_refused(buf, n, "be", 1, 1, d6, "big-endian");
    n = npy_build(buf, sizeof buf, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                  data, sizeof data);
    assert_refused(buf, n, "fortran", 1, 2, d23, "Fortran");
    n = npy_build(buf, sizeof buf, 1, "{'descr': '|f4', 'fortran_order': False, 'shape': (6,), }",
                  data, sizeof data);
    assert_refused(buf, n, "bar", 1, 1, d6, "descr");
    n = npy_build(buf, sizeof buf, 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (6,), }",
                  data, 12);
    assert_refused(buf, n, "f2", 1, 1, d6, "descr");
    n = npy_build(buf, sizeof buf, 1, "{'descr': '|O', 'fortran_order': False, 'shape': (6,), }",
                  data, sizeof data);
    assert_refused(buf, n, "obj", 1, 1, d6, "descr");
    n = npy_build(buf, sizeof buf, 1,
                  "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", data,
                  sizeof data);
    assert_refused(buf, n, "key", 1, 1, d6, "malformed .npy header");
    n = npy_build(buf, sizeof buf, 1, "{'descr': '<f4', 'shape': (6,), }", data, sizeof data);
    assert_refused(buf, n, "missing", 1, 1, d6, "malformed .npy header");
    n = npy_build(buf, sizeof buf, 1,
                  "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
                  data, sizeof data);
    assert_refused(buf, n, "dup", 1, 1, d6, "malformed .npy header");
    n = npy_build(buf, sizeof buf, 1,
                  "{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}", data,
                  sizeof data);
    assert_refused(buf, n, "neg", 1, 1, d6, "malformed .npy header");
    n = npy_build(buf, sizeof buf, 1,
                  "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
                  data, sizeof data);
    assert_refused(buf, n, "huge", 1, 1, d6, "malformed .npy header");
    n = npy_build(buf, sizeof buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x",
                  data, sizeof data);
    assert_refused(buf, n, "junk", 1, 1, d6, "malformed .npy header");
    n = npy_build(buf, sizeof buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
                  data, sizeof data);
    buf[6] = 4;
    assert_refused(buf, n, "v4", 1, 1, d6, "version 4.0");
    n = npy_build(buf, sizeof buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
                  data, sizeof data - 4);
    assert_refused(buf, n, "trunc", 1, 1, d6, "truncated .npy data");
    unsigned char more[32] = {0};
    memcpy(more, data, sizeof data);
    n = npy_build(buf, sizeof buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
                  more, sizeof data + 4);
    assert_refused(buf, n, "long", 1, 1, d6, "trailing bytes");
    unsigned char b2[6] = {0, 1, 2, 1, 0, 1};
    n = npy_build(buf, sizeof buf, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (6,)}",
                  b2, 6);
    assert_refused(buf, n, "bool", FXIO_DTYPE_BOOL, 1, d6, "not 0 or 1");
    memcpy(buf, "xNUMPY", 6);
    assert_refused(buf, n, "bad.npy", FXIO_DTYPE_BOOL, 1, d6, "bad magic");
}
END_TEST

/* ------------------------------------------------------------------------- */
/* .pb                                                                         */
/* ------------------------------------------------------------------------- */

/* The ONNX backend test input the brief names, against fxcc's reader. */
static int compare_with_fxcc(const char *path, bool must_support)
{
    Diag d;
    diag_init(&d);
    Tensor *t = NULL;
    if (tensor_file_read(path, &t, &d) != FX_OK) {
        ck_assert_msg(!must_support, "fxcc refused %s", path);
        diag_free(&d);
        return 0;
    }
    diag_free(&d);
    int dtype = (int)t->type.dtype;
    if (fxio_dtype_size(dtype) == 0) {
        tensor_free(t);
        return 0;
    }
    size_t bytes = tensor_nbytes(t);
    unsigned char *dst = malloc(bytes + 1);
    char err[512];
    ck_assert_ptr_nonnull(dst);
    memset(dst, 0xa5, bytes);
    ck_assert_msg(fxio_read_tensor(path, dtype, t->type.rank, t->type.dims, dst, err, sizeof err) ==
                      0,
                  "fxio refused what fxcc reads: %s", err);
    ck_assert_msg(memcmp(dst, t->data, bytes) == 0, "%s: fxio and fxcc disagree", path);
    /* The same file with any other type or shape is refused. */
    int other = dtype == FXIO_DTYPE_FLOAT32 ? FXIO_DTYPE_FLOAT64 : FXIO_DTYPE_FLOAT32;
    ck_assert(fxio_read_tensor(path, other, t->type.rank, t->type.dims, dst, err, sizeof err) != 0);
    ck_assert_ptr_nonnull(strstr(err, "dtype"));
    if (t->type.rank > 0) {
        int64_t dims[FX_MAX_RANK];
        memcpy(dims, t->type.dims, sizeof dims);
        dims[0] += 1;
        ck_assert(fxio_read_tensor(path, dtype, t->type.rank, dims, dst, err, sizeof err) != 0);
        ck_assert_ptr_nonnull(strstr(err, "shape"));
    }
    free(dst);
    tensor_free(t);
    return 1;
}

START_TEST(test_pb_onnx_abs)
{
    const char *path = NODE_TESTS "/test_abs/test_data_set_0/input_0.pb";
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "check_harness: %s missing, skipped\n", path);
        return;
    }
    ck_assert_int_eq(compare_with_fxcc(path, true), 1);
    const int64_t dims[3] = {3, 4, 5};
    float x[60];
    char err[512];
    ck_assert_msg(fxio_read_tensor(path, FXIO_DTYPE_FLOAT32, 3, dims, x, err, sizeof err) == 0,
                  "%s", err);
    /* Shape mismatch names both shapes. */
    const int64_t wrong[3] = {3, 5, 4};
    ck_assert(fxio_read_tensor(path, FXIO_DTYPE_FLOAT32, 3, wrong, x, err, sizeof err) != 0);
    ck_assert_msg(strstr(err, "[3, 4, 5]") && strstr(err, "[3, 5, 4]"), "%s", err);
}
END_TEST

/* Every tensor of every backend node test that both readers can hold. */
START_TEST(test_pb_onnx_all_node_tests)
{
    DIR *dir = opendir(NODE_TESTS);
    if (!dir) {
        fprintf(stderr, "check_harness: %s missing, skipped\n", NODE_TESTS);
        return;
    }
    int compared = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strncmp(e->d_name, "test_", 5) != 0)
            continue;
        for (int io = 0; io < 2; io++)
            for (int k = 0; k < 8; k++) {
                char path[1024];
                snprintf(path, sizeof path, "%s/%s/test_data_set_0/%s_%d.pb", NODE_TESTS,
                         e->d_name, io ? "output" : "input", k);
                if (access(path, R_OK) != 0)
                    break;
                compared += compare_with_fxcc(path, false);
            }
    }
    closedir(dir);
    ck_assert_int_gt(compared, 1000);
}
END_TEST

/* fxcc's .pb writer (raw_data) for every type. */
START_TEST(test_pb_fxcc_writer)
{
    int dtype = all_dtypes[_i % NUM_DTYPES];
    const Shape *s = &shapes[_i / NUM_DTYPES];
    Tensor *t = make_tensor(dtype, s->rank, s->dims);
    const char *path = tmp_path("w.pb");
    Diag d;
    diag_init(&d);
    ck_assert_int_eq(tensor_file_write(path, t, &d), FX_OK);
    diag_free(&d);
    ck_assert_int_eq(compare_with_fxcc(path, true), 1);
    tensor_free(t);
}
END_TEST

/* A protobuf writer for hand-made TensorProtos. */
typedef struct Pb {
    unsigned char b[4096];
    size_t n;
} Pb;

static void pb_varint(Pb *p, uint64_t v)
{
    do {
        ck_assert_uint_lt(p->n, sizeof p->b);
        p->b[p->n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

static void pb_tag(Pb *p, int field, int wire)
{
    pb_varint(p, (uint64_t)field << 3 | (uint64_t)wire);
}

static void pb_uint(Pb *p, int field, uint64_t v)
{
    pb_tag(p, field, 0);
    pb_varint(p, v);
}

static void pb_bytes(Pb *p, int field, const void *data, size_t n)
{
    pb_tag(p, field, 2);
    pb_varint(p, n);
    ck_assert_uint_le(p->n + n, sizeof p->b);
    memcpy(p->b + p->n, data, n);
    p->n += n;
}

/* A packed varint field. */
static void pb_packed(Pb *p, int field, const int64_t *v, size_t count)
{
    Pb inner = {.n = 0};
    for (size_t i = 0; i < count; i++)
        pb_varint(&inner, (uint64_t)v[i]);
    pb_bytes(p, field, inner.b, inner.n);
}

static void pb_fixed(Pb *p, int field, const void *v, int size)
{
    pb_tag(p, field, size == 4 ? 5 : 1);
    memcpy(p->b + p->n, v, (size_t)size); /* the test host is little-endian */
    p->n += (size_t)size;
}

START_TEST(test_pb_typed_fields)
{
    char err[512];
    const int64_t d23[2] = {2, 3}, d4[1] = {4};

    /* float_data packed, dims unpacked, unknown fields before and after. */
    {
        Pb p = {.n = 0};
        float v[6] = {1.5f, -2, 3, 4, 5, 6.25f}, got[6];
        pb_bytes(&p, 8, "x", 1);
        pb_uint(&p, 1, 2);
        pb_uint(&p, 1, 3);
        pb_bytes(&p, 4, v, sizeof v);
        pb_bytes(&p, 12, "doc", 3);
        pb_uint(&p, 2, FXIO_DTYPE_FLOAT32);
        pb_uint(&p, 99, 7);
        ck_assert_msg(fxio_read_tensor_buffer(p.b, p.n, "f.pb", 1, 2, d23, got, err, sizeof err) ==
                          0,
                      "%s", err);
        ck_assert(memcmp(got, v, sizeof v) == 0);
    }
    /* float_data unpacked, split over packed and unpacked occurrences. */
    {
        Pb p = {.n = 0};
        float v[4] = {1, 2, 3, 4}, got[4];
        const int64_t dims[1] = {4};
        pb_packed(&p, 1, dims, 1);
        pb_uint(&p, 2, FXIO_DTYPE_FLOAT32);
        pb_fixed(&p, 4, &v[0], 4);
        pb_bytes(&p, 4, &v[1], 8);
        pb_fixed(&p, 4, &v[3], 4);
        ck_assert_msg(fxio_read_tensor_buffer(p.b, p.n, "f2.pb", 1, 1, d4, got, err, sizeof err) ==
                          0,
                      "%s", err);
        ck_assert(memcmp(got, v, sizeof v) == 0);
    }
    /* int32_data holding int8, int16, uint8, uint16, int32 and bool, with
     * negatives as 10-byte varints. */
    {
        static const struct {
            int dtype;
            int64_t v[4];
        } cases[] = {
            {FXIO_DTYPE_INT8, {-128, -1, 0, 127}},      {FXIO_DTYPE_INT16, {-32768, -2, 5, 32767}},
            {FXIO_DTYPE_UINT8, {0, 1, 200, 255}},       {FXIO_DTYPE_UINT16, {0, 9, 40000, 65535}},
            {FXIO_DTYPE_INT32, {INT32_MIN, -3, 4, INT32_MAX}}, {FXIO_DTYPE_BOOL, {0, 1, 1, 0}},
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            Pb p = {.n = 0};
            unsigned char got[16];
            pb_uint(&p, 1, 4);
            pb_uint(&p, 2, (uint64_t)cases[c].dtype);
            pb_packed(&p, 5, cases[c].v, 4);
            ck_assert_msg(fxio_read_tensor_buffer(p.b, p.n, "i.pb", cases[c].dtype, 1, d4, got, err,
                                                  sizeof err) == 0,
                          "%s", err);
            for (int i = 0; i < 4; i++) {
                int64_t x;
                switch (cases[c].dtype) {
                case FXIO_DTYPE_INT8: x = ((int8_t *)got)[i]; break;
                case FXIO_DTYPE_INT16: x = ((int16_t *)got)[i]; break;
                case FXIO_DTYPE_UINT16: x = ((uint16_t *)got)[i]; break;
                case FXIO_DTYPE_INT32: x = ((int32_t *)got)[i]; break;
                default: x = got[i]; break;
                }
                ck_assert_int_eq(x, cases[c].v[i]);
            }
            /* One value outside the type is refused. */
            if (cases[c].dtype != FXIO_DTYPE_INT32) {
                int64_t bad[4] = {0, 0, 0, cases[c].dtype == FXIO_DTYPE_BOOL ? 2 : 70000};
                Pb q = {.n = 0};
                pb_uint(&q, 1, 4);
                pb_uint(&q, 2, (uint64_t)cases[c].dtype);
                pb_packed(&q, 5, bad, 4);
                assert_refused(q.b, q.n, "range.pb", cases[c].dtype, 1, d4, "outside");
            }
        }
    }
    /* int64_data unpacked; uint64_data for uint32 and uint64; double_data. */
    {
        Pb p = {.n = 0};
        int64_t got[4], v[4] = {INT64_MIN, -1, 0, INT64_MAX};
        pb_uint(&p, 1, 4);
        pb_uint(&p, 2, FXIO_DTYPE_INT64);
        for (int i = 0; i < 4; i++)
            pb_uint(&p, 7, (uint64_t)v[i]);
        ck_assert_msg(fxio_read_tensor_buffer(p.b, p.n, "l.pb", FXIO_DTYPE_INT64, 1, d4, got, err,
                                              sizeof err) == 0,
                      "%s", err);
        ck_assert(memcmp(got, v, sizeof v) == 0);
    }
    {
        Pb p = {.n = 0};
        uint32_t got[4];
        int64_t v[4] = {0, 1, 4000000000LL, 0xffffffffLL};
        pb_uint(&p, 1, 4);
        pb_uint(&p, 2, FXIO_DTYPE_UINT32);
        pb_packed(&p, 11, v, 4);
        ck_assert_msg(fxio_read_tensor_buffer(p.b, p.n, "u.pb", FXIO_DTYPE_UINT32, 1, d4, got, err,
                                              sizeof err) == 0,
                      "%s", err);
        for (int i = 0; i < 4; i++)
            ck_assert_uint_eq(got[i], (uint64_t)v[i]);
        Pb q = {.n = 0};
        int64_t big[4] = {0, 0, 0, 0x100000000LL};
        pb_uint(&q, 1, 4);
        pb_uint(&q, 2, FXIO_DTYPE_UINT32);
        pb_packed(&q, 11, big, 4);
        assert_refused(q.b, q.n, "u.pb", FXIO_DTYPE_UINT32, 1, d4, "outside uint32");
        uint64_t g64[4];
        Pb r = {.n = 0};
        int64_t v64[4] = {0, -1 /* 2^64-1 */, 5, INT64_MAX};
        pb_uint(&r, 1, 4);
        pb_uint(&r, 2, FXIO_DTYPE_UINT64);
        pb_packed(&r, 11, v64, 4);
        ck_assert_msg(fxio_read_tensor_buffer(r.b, r.n, "u64.pb", FXIO_DTYPE_UINT64, 1, d4, g64,
                                              err, sizeof err) == 0,
                      "%s", err);
        ck_assert(g64[1] == UINT64_MAX && g64[3] == (uint64_t)INT64_MAX);
    }
    {
        Pb p = {.n = 0};
        double v[4] = {1e300, -0.5, 0, 3}, got[4];
        pb_uint(&p, 1, 4);
        pb_uint(&p, 2, FXIO_DTYPE_FLOAT64);
        pb_fixed(&p, 10, &v[0], 8);
        pb_bytes(&p, 10, &v[1], 24);
        ck_assert_msg(fxio_read_tensor_buffer(p.b, p.n, "d.pb", FXIO_DTYPE_FLOAT64, 1, d4, got,
                                              err, sizeof err) == 0,
                      "%s", err);
        ck_assert(memcmp(got, v, sizeof v) == 0);
    }
    /* A scalar: no dims at all. */
    {
        Pb p = {.n = 0};
        float v = 7, got = 0;
        pb_uint(&p, 2, FXIO_DTYPE_FLOAT32);
        pb_bytes(&p, 9, &v, 4);
        ck_assert_msg(fxio_read_tensor_buffer(p.b, p.n, "s.pb", 1, 0, NULL, &got, err,
                                              sizeof err) == 0,
                      "%s", err);
        ck_assert(got == 7);
    }
}
END_TEST

START_TEST(test_pb_rejects)
{
    const int64_t d4[1] = {4}, d22[2] = {2, 2};
    float v[4] = {1, 2, 3, 4};
    int64_t iv[4] = {1, 2, 3, 4};
    Pb p;

#define PB_BEGIN(type) (p.n = 0, pb_uint(&p, 1, 4), pb_uint(&p, 2, (type)))
    PB_BEGIN(FXIO_DTYPE_FLOAT32);
    pb_bytes(&p, 9, v, sizeof v);
    assert_refused(p.b, p.n, "t.pb", FXIO_DTYPE_INT32, 1, d4, "dtype is float32, expected int32");
    assert_refused(p.b, p.n, "t.pb", FXIO_DTYPE_FLOAT32, 2, d22, "shape is [4], expected [2, 2]");
    assert_refused(p.b, p.n, "t.pb", FXIO_DTYPE_FLOAT32, 0, NULL, "expected []");

    PB_BEGIN(10); /* float16 */
    pb_bytes(&p, 9, v, 8);
    assert_refused(p.b, p.n, "h.pb", FXIO_DTYPE_FLOAT32, 1, d4, "float16");
    assert_refused(p.b, p.n, "h.pb", 10, 1, d4, "not supported");

    PB_BEGIN(FXIO_DTYPE_FLOAT32);
    pb_bytes(&p, 9, v, sizeof v - 1);
    assert_refused(p.b, p.n, "r.pb", 1, 1, d4, "raw_data has 15 bytes, expected 16");

    PB_BEGIN(FXIO_DTYPE_FLOAT32);
    pb_bytes(&p, 9, v, sizeof v);
    pb_bytes(&p, 4, v, sizeof v);
    assert_refused(p.b, p.n, "both.pb", 1, 1, d4, "both raw_data and float_data");

    PB_BEGIN(FXIO_DTYPE_INT64);
    pb_bytes(&p, 4, v, sizeof v);
    assert_refused(p.b, p.n, "wrong.pb", FXIO_DTYPE_INT64, 1, d4, "float_data in a int64 tensor");

    PB_BEGIN(FXIO_DTYPE_INT64);
    pb_packed(&p, 7, iv, 3);
    assert_refused(p.b, p.n, "count.pb", FXIO_DTYPE_INT64, 1, d4, "has 3 values, expected 4");

    PB_BEGIN(FXIO_DTYPE_INT64);
    pb_packed(&p, 7, iv, 4);
    pb_uint(&p, 7, 5);
    assert_refused(p.b, p.n, "count.pb", FXIO_DTYPE_INT64, 1, d4, "has 5 values, expected 4");

    PB_BEGIN(FXIO_DTYPE_FLOAT32);
    assert_refused(p.b, p.n, "none.pb", 1, 1, d4, "has 0 values, expected 4");

    PB_BEGIN(FXIO_DTYPE_FLOAT32);
    pb_uint(&p, 14, 1);
    assert_refused(p.b, p.n, "ext.pb", 1, 1, d4, "external data");
    PB_BEGIN(FXIO_DTYPE_FLOAT32);
    pb_bytes(&p, 13, "\x0a\x01x", 3);
    assert_refused(p.b, p.n, "ext2.pb", 1, 1, d4, "external data");
    PB_BEGIN(FXIO_DTYPE_FLOAT32);
    pb_bytes(&p, 3, "\x08\x00", 2);
    assert_refused(p.b, p.n, "seg.pb", 1, 1, d4, "segment");

    p.n = 0;
    pb_uint(&p, 1, 4);
    pb_bytes(&p, 9, v, sizeof v);
    assert_refused(p.b, p.n, "notype.pb", 1, 1, d4, "no TensorProto data_type");

    p.n = 0;
    pb_uint(&p, 1, (uint64_t)-4);
    pb_uint(&p, 2, 1);
    assert_refused(p.b, p.n, "neg.pb", 1, 1, d4, "negative dimension");

    /* Overlong varint, group wire type, field 0, bad packed lengths. */
    unsigned char overlong[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    assert_refused(overlong, sizeof overlong, "ol.pb", 1, 1, d4, "malformed varint");
    unsigned char group[] = {0x0b, 0x0c};
    assert_refused(group, sizeof group, "g.pb", 1, 1, d4, "wire type 3");
    unsigned char zero[] = {0x00, 0x01};
    assert_refused(zero, sizeof zero, "z.pb", 1, 1, d4, "bad field number");
    PB_BEGIN(FXIO_DTYPE_FLOAT32);
    pb_bytes(&p, 4, v, 15);
    assert_refused(p.b, p.n, "pk.pb", 1, 1, d4, "malformed float_data");
    PB_BEGIN(FXIO_DTYPE_INT64);
    pb_bytes(&p, 7, "\x01\x02\x83", 3);
    assert_refused(p.b, p.n, "pk2.pb", FXIO_DTYPE_INT64, 1, d4, "malformed packed int64_data");

    /* Too many dims. */
    p.n = 0;
    for (int i = 0; i < FXIO_MAX_RANK + 1; i++)
        pb_uint(&p, 1, 1);
    pb_uint(&p, 2, 1);
    assert_refused(p.b, p.n, "rank.pb", 1, 1, d4, "more than 32 dims");

    /* An empty file and a .npy-named file that is not one. */
    assert_refused((const unsigned char *)"", 0, "empty.pb", 1, 1, d4, "no TensorProto");
    PB_BEGIN(FXIO_DTYPE_FLOAT32);
    pb_bytes(&p, 9, v, sizeof v);
    assert_refused(p.b, p.n, "x.npy", 1, 1, d4, "not a .npy file");
#undef PB_BEGIN
}
END_TEST

/* ------------------------------------------------------------------------- */
/* Truncation and corruption                                                  */
/* ------------------------------------------------------------------------- */

/* Every strict prefix of a .npy is refused; a .pb prefix may be a valid
 * message (protobuf has no end marker), but then it must decode to the
 * same tensor or be refused. */
START_TEST(test_truncated_files)
{
    int dtype = all_dtypes[_i];
    const int64_t dims[2] = {3, 5};
    Tensor *t = make_tensor(dtype, 2, dims);
    size_t bytes = tensor_nbytes(t);
    unsigned char *dst = malloc(bytes + 1);
    char err[256];
    ck_assert_ptr_nonnull(dst);
    for (int fmt = 0; fmt < 2; fmt++) {
        const char *path = tmp_path(fmt ? "t.pb" : "t.npy");
        Diag d;
        diag_init(&d);
        ck_assert_int_eq(tensor_file_write(path, t, &d), FX_OK);
        diag_free(&d);
        size_t len;
        unsigned char *file = read_bytes(path, &len);
        ck_assert_int_eq(fxio_read_tensor_buffer(file, len, path, dtype, 2, dims, dst, err,
                                                 sizeof err),
                         0);
        for (size_t n = 0; n < len; n++) {
            /* A fresh allocation of exactly n bytes, so ASan sees overreads. */
            unsigned char *cut = malloc(n ? n : 1);
            ck_assert_ptr_nonnull(cut);
            memcpy(cut, file, n);
            int rc = fxio_read_tensor_buffer(cut, n, path, dtype, 2, dims, dst, err, sizeof err);
            if (fmt == 0)
                ck_assert_msg(rc != 0, ".npy cut to %zu of %zu bytes was accepted", n, len);
            else if (rc == 0)
                ck_assert_msg(memcmp(dst, t->data, bytes) == 0, ".pb cut to %zu decoded wrong", n);
            else
                ck_assert_msg(err[0] != '\0', "refused without a message");
            free(cut);
        }
        /* Through the file API: a truncated file on disk. */
        write_bytes(path, file, len - 1);
        ck_assert(fxio_read_tensor(path, dtype, 2, dims, dst, err, sizeof err) != 0);
        ck_assert_ptr_nonnull(strstr(err, "truncated"));
        free(file);
    }
    free(dst);
    tensor_free(t);
}
END_TEST

/* Random byte flips: the reader may accept or refuse, never misbehave. */
START_TEST(test_corrupt_files_no_crash)
{
    const int64_t dims[2] = {4, 6};
    Tensor *t = make_tensor(FXIO_DTYPE_INT64, 2, dims);
    unsigned char dst[4 * 6 * 8];
    char err[128];
    uint32_t seed = 12345;
    for (int fmt = 0; fmt < 2; fmt++) {
        const char *path = tmp_path(fmt ? "c.pb" : "c.npy");
        Diag d;
        diag_init(&d);
        ck_assert_int_eq(tensor_file_write(path, t, &d), FX_OK);
        diag_free(&d);
        size_t len;
        unsigned char *file = read_bytes(path, &len);
        unsigned char *copy = malloc(len);
        ck_assert_ptr_nonnull(copy);
        for (int iter = 0; iter < 3000; iter++) {
            memcpy(copy, file, len);
            int flips = 1 + iter % 4;
            for (int k = 0; k < flips; k++) {
                seed = seed * 1103515245u + 12345u;
                size_t at = (seed >> 8) % len;
                seed = seed * 1103515245u + 12345u;
                copy[at] = (unsigned char)(seed >> 16);
            }
            (void)fxio_read_tensor_buffer(copy, len, path, FXIO_DTYPE_INT64, 2, dims, dst, err,
                                          sizeof err);
        }
        free(copy);
        free(file);
    }
    tensor_free(t);
}
END_TEST

START_TEST(test_api_edges)
{
    const int64_t d4[1] = {4}, neg[1] = {-1};
    float v[4] = {0};
    char err[512], tiny[8];

    ck_assert(fxio_read_tensor(tmp_path("missing.npy"), 1, 1, d4, v, err, sizeof err) != 0);
    ck_assert_ptr_nonnull(strstr(err, "cannot open"));
    /* err may be NULL or tiny; the message is truncated, never overflowed. */
    ck_assert(fxio_read_tensor(tmp_path("missing.npy"), 1, 1, d4, v, NULL, 0) != 0);
    ck_assert(fxio_read_tensor(tmp_path("missing.npy"), 1, 1, d4, v, tiny, sizeof tiny) != 0);
    ck_assert_uint_eq(strlen(tiny), sizeof tiny - 1);
    /* Bad requests. */
    ck_assert(fxio_read_tensor(tmp_path("x.npy"), 10, 1, d4, v, err, sizeof err) != 0);
    ck_assert_ptr_nonnull(strstr(err, "float16"));
    ck_assert(fxio_read_tensor(tmp_path("x.npy"), 1, 1, neg, v, err, sizeof err) != 0);
    ck_assert(fxio_read_tensor(tmp_path("x.npy"), 1, 1, NULL, v, err, sizeof err) != 0);
    ck_assert(fxio_read_tensor(tmp_path("x.npy"), 1, FXIO_MAX_RANK + 1, d4, v, err, sizeof err) !=
              0);
    ck_assert(fxio_write_npy(tmp_path("x.npy"), 1, 1, neg, v, err, sizeof err) != 0);
    ck_assert(fxio_write_npy(tmp_path("x.npy"), 1, 1, d4, NULL, err, sizeof err) != 0);
    ck_assert(fxio_write_npy(tmp_path("nodir/x.npy"), 1, 1, d4, v, err, sizeof err) != 0);
    ck_assert_ptr_nonnull(strstr(err, "cannot create"));
    /* Overflowing expected sizes. */
    const int64_t huge[3] = {INT64_MAX, INT64_MAX, 2};
    ck_assert(fxio_read_tensor(tmp_path("x.npy"), 1, 3, huge, v, err, sizeof err) != 0);
    ck_assert_ptr_nonnull(strstr(err, "too large"));
    /* A file far larger than the expected tensor is refused without being
     * read whole. */
    const char *big = tmp_path("big.pb");
    FILE *f = fopen(big, "wb");
    ck_assert_ptr_nonnull(f);
    static unsigned char block[1 << 16];
    for (int i = 0; i < 300; i++)
        ck_assert_uint_eq(fwrite(block, 1, sizeof block, f), sizeof block);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert(fxio_read_tensor(big, 1, 1, d4, v, err, sizeof err) != 0);
    ck_assert_ptr_nonnull(strstr(err, "larger than"));
    /* Rank 32 round trip (the most dims a file may have). */
    int64_t d32[FXIO_MAX_RANK];
    for (int i = 0; i < FXIO_MAX_RANK; i++)
        d32[i] = i == 5 ? 2 : 1;
    ck_assert_msg(fxio_write_npy(tmp_path("r32.npy"), 1, FXIO_MAX_RANK, d32, v, err, sizeof err) ==
                      0,
                  "%s", err);
    ck_assert_msg(fxio_read_tensor(tmp_path("r32.npy"), 1, FXIO_MAX_RANK, d32, v, err,
                                   sizeof err) == 0,
                  "%s", err);
    ck_assert_str_eq(fxio_dtype_name(FXIO_DTYPE_UINT16), "uint16");
    ck_assert_uint_eq(fxio_dtype_size(FXIO_DTYPE_BOOL), 1);
    ck_assert_uint_eq(fxio_dtype_size(8), 0);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* The emitted main.c                                                         */
/* ------------------------------------------------------------------------- */

#ifdef FXCC_CHECK_CODEGEN
#ifndef FXCC_SOURCE_DIR
#error "FXCC_SOURCE_DIR must point at the repository"
#endif

static void write_text(const char *path, const char *text)
{
    write_bytes(path, text, strlen(text));
}

/* A hand-written "generated" model: z = 2x + y (broadcast), s = sum(y). */
static const char tiny_h[] =
    "#ifndef TINY_H\n#define TINY_H\n#include <stddef.h>\n#include <stdint.h>\n"
    "#define tiny_ARENA_BYTES 0\n#define tiny_NUM_INPUTS 2\n#define tiny_NUM_OUTPUTS 2\n"
    "extern const size_t tiny_input_sizes[], tiny_output_sizes[];\n"
    "extern const int tiny_input_dtypes[], tiny_output_dtypes[];\n"
    "extern const int tiny_input_ranks[], tiny_output_ranks[];\n"
    "extern const int64_t *const tiny_input_shapes[], *const tiny_output_shapes[];\n"
    "extern const char *const tiny_input_names[], *const tiny_output_names[];\n"
    "#define tiny_NUM_NODES 2\nextern void (*tiny_node_hook)(int node);\n"
    "int tiny_run(const void *const *inputs, void *const *outputs, void *arena);\n#endif\n";
static const char tiny_c[] =
    "#include \"tiny.h\"\n"
    "static const int64_t s0[2] = {2, 3}, s1[1] = {3};\n"
    "const size_t tiny_input_sizes[] = {6, 3}, tiny_output_sizes[] = {6, 1};\n"
    "const int tiny_input_dtypes[] = {1, 7}, tiny_output_dtypes[] = {1, 7};\n"
    "const int tiny_input_ranks[] = {2, 1}, tiny_output_ranks[] = {2, 0};\n"
    "const int64_t *const tiny_input_shapes[] = {s0, s1}, *const tiny_output_shapes[] = {s0, "
    "NULL};\n"
    "const char *const tiny_input_names[] = {\"x\", \"y\"}, *const tiny_output_names[] = {\"z\", "
    "\"s\"};\n"
    "void (*tiny_node_hook)(int node);\n"
    "const char *const tiny_node_names[] = {\"sum\", \"scale\", \"\"};\n"
    "const char *const tiny_node_ops[] = {\"ReduceSum\", \"Mul\", \"\"};\n"
    "const double tiny_node_flops[] = {0, 12, 0}, tiny_node_bytes[] = {32, 72, 0};\n"
    "int tiny_run(const void *const *inputs, void *const *outputs, void *arena)\n{\n"
    "    const float *x = (const float *)inputs[0];\n"
    "    const int64_t *y = (const int64_t *)inputs[1];\n"
    "    float *z = (float *)outputs[0];\n    int64_t *s = (int64_t *)outputs[1];\n    int i;\n"
    "    volatile long spin;\n"
    "    if ((size_t)arena % 64 != 0)\n        return 7;\n"
    "    if (tiny_node_hook) tiny_node_hook(0);\n"
    "    *s = 0;\n    for (i = 0; i < 3; i++)\n        *s += y[i];\n"
    "    if (tiny_node_hook) tiny_node_hook(1);\n"
    "    /* the slow step, so that the profile must rank it first */\n"
    "    for (spin = 0; spin < 2000000; spin++)\n        ;\n"
    "    for (i = 0; i < 6; i++)\n        z[i] = x[i] * 2 + (float)y[i % 3];\n"
    "    if (tiny_node_hook) tiny_node_hook(tiny_NUM_NODES);\n    return 0;\n}\n";

START_TEST(test_emitted_main)
{
    FILE *f = fopen(tmp_path("main.c"), "w");
    ck_assert_ptr_nonnull(f);
    cg_write_main(f, "tiny");
    ck_assert_int_eq(fclose(f), 0);
    FILE *fc = fopen(tmp_path("fxio.c"), "w"), *fh = fopen(tmp_path("fxio.h"), "w");
    ck_assert(fc && fh);
    cg_write_fxio(fc, fh);
    ck_assert_int_eq(fclose(fc), 0);
    ck_assert_int_eq(fclose(fh), 0);
    write_text(tmp_path("tiny.h"), tiny_h);
    write_text(tmp_path("tiny.c"), tiny_c);

    /* The embedded copies are the sources, byte for byte. */
    size_t a_len, b_len;
    unsigned char *a = read_bytes(tmp_path("fxio.c"), &a_len);
    unsigned char *b = read_bytes(FXCC_SOURCE_DIR "/codegen/harness/fxio.c", &b_len);
    ck_assert(a_len == b_len && memcmp(a, b, a_len) == 0);
    free(a);
    free(b);
    size_t m_len;
    unsigned char *m = read_bytes(tmp_path("main.c"), &m_len);
    char *text = calloc(1, m_len + 1);
    memcpy(text, m, m_len);
    ck_assert_ptr_null(strstr(text, "@NAME@"));
    ck_assert_ptr_nonnull(strstr(text, "tiny_run(inputs, outputs, arena)"));
    free(text);
    free(m);

    if (system("cc --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "check_harness: no cc, emitted main.c not compiled\n");
        return;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cc -std=c99 -Wall -Wextra -Werror -pedantic -o tiny main.c tiny.c fxio.c",
             tmp_dir);
    ck_assert_msg(system(cmd) == 0, "emitted main.c does not compile: %s", cmd);

    const int64_t d23[2] = {2, 3}, d3[1] = {3};
    float x[6] = {0, 1, 2, 3, 4, 5}, z[6];
    int64_t y[3] = {1, 2, 3}, s;
    char err[512];
    ck_assert_int_eq(fxio_write_npy(tmp_path("x.npy"), 1, 2, d23, x, err, sizeof err), 0);
    ck_assert_int_eq(fxio_write_npy(tmp_path("y.npy"), 7, 1, d3, y, err, sizeof err), 0);
    ck_assert_int_eq(mkdir(tmp_path("out"), 0777), 0);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && ./tiny --repeat 3 -o out x.npy y.npy 2>stderr.txt && "
             "grep -q '^ms_per_run=[0-9.]*$' stderr.txt",
             tmp_dir);
    ck_assert_msg(system(cmd) == 0, "emitted main failed: %s", cmd);
    ck_assert_int_eq(fxio_read_tensor(tmp_path("out/output_0.npy"), 1, 2, d23, z, err, sizeof err),
                     0);
    for (int i = 0; i < 6; i++)
        ck_assert(z[i] == x[i] * 2 + (float)y[i % 3]);
    ck_assert_int_eq(fxio_read_tensor(tmp_path("out/output_1.npy"), 7, 0, NULL, &s, err,
                                      sizeof err),
                     0);
    ck_assert_int_eq(s, 6);

    /* --profile: one row per step, the slow one ("scale") first with most
     * of the time, the shares summing to 100%. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && ./tiny --repeat 3 --profile -o out x.npy y.npy >profile.txt 2>/dev/null",
             tmp_dir);
    ck_assert_msg(system(cmd) == 0, "emitted main --profile failed: %s", cmd);
    FILE *pf = fopen(tmp_path("profile.txt"), "r");
    ck_assert_ptr_nonnull(pf);
    char line[512], name[64], op[64];
    int runs = 0, steps = 0;
    ck_assert(fgets(line, sizeof line, pf));
    ck_assert_int_eq(sscanf(line, "profile of tiny: %d runs", &runs), 1);
    ck_assert_int_eq(runs, 3);
    ck_assert(fgets(line, sizeof line, pf)); /* column heads */
    double us, share, cumulative = 0, first_share = 0;
    while (fgets(line, sizeof line, pf)) {
        char flops[32];
        double gbs;
        ck_assert_int_eq(sscanf(line, "%lf %lf%% %*f%% %31s %lf %63s (%63[^)])", &us, &share,
                                flops, &gbs, name, op),
                         6);
        if (steps++ == 0) {
            ck_assert_str_eq(name, "scale");
            ck_assert_str_eq(op, "Mul");
            first_share = share;
        }
        cumulative += share;
    }
    fclose(pf);
    ck_assert_int_eq(steps, 2);
    ck_assert_msg(first_share > 90.0, "the spinning step has %.1f%% of the time", first_share);
    ck_assert_double_eq_tol(cumulative, 100.0, 0.2);

    /* Errors: wrong count, wrong dtype, no -o; each "main: error:" and exit 1. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && ./tiny -o out x.npy 2>e1.txt; test $? -eq 1 && grep -q '^main: error: ' "
             "e1.txt && ./tiny -o out y.npy x.npy 2>e2.txt; test $? -eq 1 && grep -q 'dtype' e2.txt "
             "&& ./tiny x.npy y.npy 2>e3.txt; test $? -eq 1 && grep -q 'main: error: ' e3.txt",
             tmp_dir);
    ck_assert_msg(system(cmd) == 0, "emitted main error handling: %s", cmd);
}
END_TEST
#endif

/* ------------------------------------------------------------------------- */

static Suite *harness_suite(void)
{
    Suite *s = suite_create("harness");
    TCase *tc = tcase_create("fxio");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 120);
    int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    tcase_add_loop_test(tc, test_npy_roundtrip, 0, NUM_DTYPES * nshapes);
    tcase_add_test(tc, test_npy_rejects_mismatch);
    tcase_add_test(tc, test_npy_header_forms);
    tcase_add_test(tc, test_pb_onnx_abs);
    tcase_add_test(tc, test_pb_onnx_all_node_tests);
    tcase_add_loop_test(tc, test_pb_fxcc_writer, 0, NUM_DTYPES * nshapes);
    tcase_add_test(tc, test_pb_typed_fields);
    tcase_add_test(tc, test_pb_rejects);
    tcase_add_loop_test(tc, test_truncated_files, 0, NUM_DTYPES);
    tcase_add_test(tc, test_corrupt_files_no_crash);
    tcase_add_test(tc, test_api_edges);
#ifdef FXCC_CHECK_CODEGEN
    tcase_add_test(tc, test_emitted_main);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(harness_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
