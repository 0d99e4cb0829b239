/*
 * alloc_shim.c - an LD_PRELOAD library that fails the Nth heap allocation of
 * a process, libc's own included (fopen's buffer, opendir's DIR, strdup).
 *
 * The project's fault injection (FXCC_FAIL_ALLOC_AT, ir/alloc.c) counts only
 * the allocations fxcc makes through its allocator; an out-of-memory inside
 * libc reaches fxcc as a failed call (fopen, opendir) whose handling that
 * counter never exercises.  This shim counts every malloc, calloc, realloc
 * and aligned allocation from the start of main to the process's exit, so
 * alloc_failure_libc.sh can fail each of them in turn.  Allocations before
 * main (the dynamic loader, OpenBLAS's start-up) are not counted: no program
 * can report those.
 *
 *   FXCC_SHIM_FAIL_AT=N      the Nth allocation after main starts returns NULL
 *                            with errno ENOMEM (one failure, later ones succeed)
 *   FXCC_SHIM_FAIL_AT=count  none fails; "alloc_shim: N allocations" is
 *                            written to stderr at exit
 *
 * The real allocators are glibc's __libc_* entry points, so the shim needs no
 * dlsym (which itself allocates) on the allocation path.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static bool armed;       /* main has started */
static long long fail_at; /* 0: none */
static long long allocations;

static bool fail_this_one(void)
{
    if (!armed)
        return false;
    allocations++;
    if (allocations == fail_at) {
        errno = ENOMEM;
        return true;
    }
    return false;
}

void *malloc(size_t size)
{
    return fail_this_one() ? NULL : __libc_malloc(size);
}

void *calloc(size_t count, size_t size)
{
    return fail_this_one() ? NULL : __libc_calloc(count, size);
}

void *realloc(void *ptr, size_t size)
{
    return fail_this_one() ? NULL : __libc_realloc(ptr, size);
}

void *aligned_alloc(size_t alignment, size_t size)
{
    return fail_this_one() ? NULL : __libc_memalign(alignment, size);
}

void *memalign(size_t alignment, size_t size)
{
    return fail_this_one() ? NULL : __libc_memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size)
{
    if (fail_this_one())
        return ENOMEM;
    void *p = __libc_memalign(alignment, size);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

/* Written with write(2): stdio at exit may itself allocate. */
static void report_count(void)
{
    char line[64];
    int n = snprintf(line, sizeof line, "alloc_shim: %lld allocations\n", allocations);
    if (n > 0 && write(2, line, (size_t)n) < 0)
        _exit(3);
}

typedef int (*MainFn)(int, char **, char **);
typedef int (*StartMainFn)(MainFn, int, char **, void (*)(void), void (*)(void),
                           void (*)(void), void *);
static MainFn real_main;

static int armed_main(int argc, char **argv, char **envp)
{
    const char *env = getenv("FXCC_SHIM_FAIL_AT");
    if (env && !strcmp(env, "count")) {
        atexit(report_count);
    } else if (env) {
        fail_at = atoll(env);
    }
    armed = true;
    return real_main(argc, argv, envp);
}

/* glibc calls main through __libc_start_main: wrapping it arms the counter
 * exactly when main starts. */
int __libc_start_main(MainFn main_fn, int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end);
int __libc_start_main(MainFn main_fn, int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
    StartMainFn real = (StartMainFn)dlsym(RTLD_NEXT, "__libc_start_main");
    if (!real)
        _exit(125);
    real_main = main_fn;
    return real(armed_main, argc, argv, init, fini, rtld_fini, stack_end);
}
