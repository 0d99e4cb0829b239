/*
 * tensor_file.c - files: whole-file reads and atomic writes, tensor files
 * chosen by extension (.npy or .pb), and the external-data reader that model
 * initializers use.
 *
 * file_read_all reads regular files only and refuses anything above 4 GiB
 * before allocating.  file_write_all writes "PATH.tmp.PID" and renames it over
 * PATH, so a reader never sees half a file; the temporary is removed on any
 * failure.  External data is the one place where a model names other files,
 * so it is confined: the location must be relative, may not contain a ".."
 * component, and after symlinks are resolved (realpath) must still lie inside
 * the model's folder; the byte range it names must lie inside that file.
 */
#define _XOPEN_SOURCE 700

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_internal.h"

/* Files above this are refused: no model or tensor fxcc handles is larger, and
 * FX_MAX_TENSOR_BYTES caps each tensor at 2 GiB anyway. */
#define FILE_MAX_BYTES ((uint64_t)4 << 30)

/* read() in chunks that every platform accepts. */
enum { IO_CHUNK = 1 << 30 };

static FxStatus read_exact(int fd, const char *path, uint64_t offset, void *dst, uint64_t n,
                           Diag *d)
{
    uint8_t *p = dst;
    uint64_t got = 0;
    while (got < n) {
        size_t want = n - got > IO_CHUNK ? IO_CHUNK : (size_t)(n - got);
        ssize_t r = pread(fd, p + got, want, (off_t)(offset + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return diag_error_at(d, FX_ERR_IO, path, (long long)(offset + got), "read failed: %s",
                                 strerror(errno));
        if (r == 0)
            return diag_error_at(d, FX_ERR_IO, path, (long long)(offset + got),
                                 "file ended early (changed while reading?)");
        got += (uint64_t)r;
    }
    return FX_OK;
}

/* Opens a regular file for reading and reports its size. */
static FxStatus open_regular(const char *path, int extra_flags, int *fd_out, uint64_t *size,
                             Diag *d)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | extra_flags);
    if (fd < 0)
        return diag_error_at(d, FX_ERR_IO, path, -1, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return diag_error_at(d, FX_ERR_IO, path, -1, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return diag_error_at(d, FX_ERR_IO, path, -1, "not a regular file");
    }
    *fd_out = fd;
    *size = (uint64_t)sb.st_size;
    return FX_OK;
}

FxStatus file_read_all(const char *path, uint8_t **data, size_t *len, Diag *d)
{
    *data = NULL;
    *len = 0;
    int fd = -1;
    uint64_t size = 0;
    FxStatus st = open_regular(path, 0, &fd, &size, d);
    if (st != FX_OK)
        return st;
    if (size > FILE_MAX_BYTES || size > SIZE_MAX - 1) {
        close(fd);
        return diag_error_at(d, FX_ERR_NOMEM, path, -1,
                             "file is %llu bytes; files above 4 GiB are refused",
                             (unsigned long long)size);
    }
    uint8_t *buf = fx_malloc(size ? (size_t)size : 1);
    if (!buf) {
        close(fd);
        return diag_error_at(d, FX_ERR_NOMEM, path, -1, "out of memory reading %llu bytes",
                             (unsigned long long)size);
    }
    st = read_exact(fd, path, 0, buf, size, d);
    close(fd);
    if (st != FX_OK) {
        free(buf);
        return st;
    }
    *data = buf;
    *len = (size_t)size;
    return FX_OK;
}

FxStatus file_write_all(const char *path, const void *data, size_t len, Diag *d)
{
    size_t plen = strlen(path);
    char *tmp = fx_malloc(plen + 32);
    if (!tmp)
        return diag_error_at(d, FX_ERR_NOMEM, path, -1, "out of memory");
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        FxStatus st = diag_error_at(d, FX_ERR_IO, path, -1, "cannot create '%s': %s", tmp,
                                    strerror(errno));
        free(tmp);
        return st;
    }
    const uint8_t *p = data;
    size_t done = 0;
    FxStatus st = FX_OK;
    while (done < len) {
        size_t want = len - done > IO_CHUNK ? IO_CHUNK : len - done;
        ssize_t w = write(fd, p + done, want);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            st = diag_error_at(d, FX_ERR_IO, path, -1, "write failed: %s",
                               w < 0 ? strerror(errno) : "no progress");
            break;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0 && st == FX_OK)
        st = diag_error_at(d, FX_ERR_IO, path, -1, "write failed: %s", strerror(errno));
    if (st == FX_OK && rename(tmp, path) != 0)
        st = diag_error_at(d, FX_ERR_IO, path, -1, "cannot rename '%s' into place: %s", tmp,
                           strerror(errno));
    if (st != FX_OK)
        unlink(tmp);
    free(tmp);
    return st;
}

/* --- tensor files by extension -------------------------------------------- */

typedef enum TensorFileKind { TFK_UNKNOWN, TFK_NPY, TFK_PB } TensorFileKind;

static TensorFileKind tensor_file_kind(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash + 1 : path, '.');
    if (!dot)
        return TFK_UNKNOWN;
    if (strcasecmp(dot, ".npy") == 0)
        return TFK_NPY;
    if (strcasecmp(dot, ".pb") == 0)
        return TFK_PB;
    return TFK_UNKNOWN;
}

FxStatus tensor_file_read(const char *path, Tensor **out, Diag *d)
{
    *out = NULL;
    TensorFileKind kind = tensor_file_kind(path);
    if (kind == TFK_UNKNOWN)
        return diag_error_at(d, FX_ERR_INVALID, path, -1,
                             "unknown tensor file type: expected a .npy or .pb file");
    uint8_t *data;
    size_t len;
    FxStatus st = file_read_all(path, &data, &len, d);
    if (st != FX_OK)
        return st;
    if (kind == TFK_NPY)
        st = npy_read_buffer(data, len, path, out, d);
    else
        st = tensor_pb_read_buffer(data, len, path, out, d);
    free(data);
    return st;
}

FxStatus tensor_file_write(const char *path, const Tensor *t, Diag *d)
{
    TensorFileKind kind = tensor_file_kind(path);
    if (kind == TFK_UNKNOWN)
        return diag_error_at(d, FX_ERR_INVALID, path, -1,
                             "unknown tensor file type: expected a .npy or .pb file");
    uint8_t *data;
    size_t len;
    FxStatus st;
    if (kind == TFK_NPY) {
        st = npy_write_buffer(t, &data, &len, d);
    } else {
        /* the TensorProto is named after the file: "output_0.pb" -> "output_0" */
        const char *slash = strrchr(path, '/');
        const char *base = slash ? slash + 1 : path;
        size_t stem = (size_t)(strrchr(base, '.') - base);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(stem < 255 ? stem : 255), base);
        st = tensor_pb_write_buffer(t, name, &data, &len, d);
    }
    if (st != FX_OK)
        return st;
    st = file_write_all(path, data, len, d);
    free(data);
    return st;
}

/* --- paths and external data ---------------------------------------------- */

char *path_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    char *s = fx_malloc(n ? n + 1 : 2);
    if (!s)
        return NULL;
    if (n)
        memcpy(s, path, n);
    else
        s[n++] = '.';
    s[n] = '\0';
    return s;
}

/* True when `location` has a ".." component. */
static bool has_dotdot(const char *location)
{
    for (const char *p = location; *p;) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return true;
        p += n;
        if (*p == '/')
            p++;
    }
    return false;
}

FxStatus external_tensor_read(const char *base_dir, const char *location, uint64_t offset,
                              bool to_end, const TensorType *type, uint64_t nbytes,
                              const char *what, Tensor **out, Diag *d)
{
    *out = NULL;
    if (location[0] == '/')
        return diag_error(d, FX_ERR_FORMAT,
                          "%s: external data location '%s' is an absolute path; it must be "
                          "relative to the model's folder", what, location);
    if (has_dotdot(location))
        return diag_error(d, FX_ERR_FORMAT,
                          "%s: external data location '%s' contains '..'; it must stay inside "
                          "the model's folder", what, location);
    size_t blen = strlen(base_dir), llen = strlen(location);
    char *joined = fx_malloc(blen + llen + 2);
    if (!joined)
        return diag_error(d, FX_ERR_NOMEM, "out of memory");
    snprintf(joined, blen + llen + 2, "%s/%s", base_dir, location);
    char *base_real = realpath(base_dir, NULL);
    char *file_real = base_real ? realpath(joined, NULL) : NULL;
    FxStatus st = FX_OK;
    if (!base_real)
        st = diag_error(d, FX_ERR_IO, "%s: cannot resolve the model folder '%s': %s", what,
                        base_dir, strerror(errno));
    else if (!file_real)
        st = diag_error(d, FX_ERR_IO, "%s: cannot open external data file '%s': %s", what,
                        joined, strerror(errno));
    else {
        size_t rlen = strlen(base_real);
        bool inside = strcmp(base_real, "/") == 0 ||
                      (strncmp(file_real, base_real, rlen) == 0 && file_real[rlen] == '/');
        if (!inside)
            st = diag_error(d, FX_ERR_FORMAT,
                            "%s: external data file '%s' resolves to '%s', outside the model's "
                            "folder", what, location, file_real);
    }
    int fd = -1;
    uint64_t size = 0;
    if (st == FX_OK)
        st = open_regular(file_real, O_NOFOLLOW, &fd, &size, d);
    if (st == FX_OK) {
        uint64_t end;
        bool fits = size_add_ok(offset, nbytes, &end) && end <= size;
        if (!fits || (to_end && end != size))
            st = diag_error(d, FX_ERR_FORMAT,
                            "%s: external data '%s' is %llu bytes; offset %llu + %llu bytes %s",
                            what, location, (unsigned long long)size,
                            (unsigned long long)offset, (unsigned long long)nbytes,
                            fits ? "does not reach its end (no length given)" : "lies beyond it");
    }
    Tensor *t = NULL;
    if (st == FX_OK && !(t = tensor_new(type, d)))
        st = FX_ERR_NOMEM;
    if (st == FX_OK)
        st = read_exact(fd, file_real, offset, t->data, nbytes, d);
    if (st == FX_OK && type->dtype == FXRT_DTYPE_BOOL)
        for (uint64_t i = 0; i < nbytes; i++)
            ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
    if (fd >= 0)
        close(fd);
    free(joined);
    free(base_real);
    free(file_real);
    if (st != FX_OK) {
        tensor_free(t);
        return st;
    }
    *out = t;
    return FX_OK;
}
