/*
 * alloc.c - the one way fxcc's compiler allocates from the heap.  Every
 * array allocation checks count * size for overflow, so a size read from a
 * file can never wrap into a small buffer; every failure is returned to the
 * caller, which reports FX_ERR_NOMEM ("out of memory") instead of aborting.
 *
 * Built with FXCC_FAULT_INJECTION, the helpers count allocations and make
 * the Nth one fail, N read once from the environment variable
 * FXCC_FAIL_ALLOC_AT (the value "count" fails none and prints the total at
 * exit); the alloc_failure test walks N over every allocation a
 * compilation makes to prove each failure path reports out of memory, leaks
 * nothing and leaves no partial output.  Release builds carry no counter.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#ifdef FXCC_FAULT_INJECTION
#include <stdio.h>

static long long fail_at = -1; /* -1: not read yet; 0: never fail */
static long long allocations;

/* The test needs to know how many allocations a run makes to walk N over
 * all of them: FXCC_FAIL_ALLOC_AT=count prints it at exit. */
static void report_count(void)
{
    fprintf(stderr, "fxcc: %lld allocations\n", allocations);
}

/* True when this allocation is the one the environment asks to fail. */
static bool injected_failure(void)
{
    if (fail_at < 0) {
        const char *env = getenv("FXCC_FAIL_ALLOC_AT");
        fail_at = env ? strtoll(env, NULL, 10) : 0;
        if (fail_at < 0)
            fail_at = 0;
        if (env && strcmp(env, "count") == 0)
            atexit(report_count);
    }
    return ++allocations == fail_at;
}

long long fx_alloc_count(void) { return allocations; }
#else
static bool injected_failure(void) { return false; }
long long fx_alloc_count(void) { return -1; }
#endif

void *fx_malloc(size_t size)
{
    if (injected_failure())
        return NULL;
    return malloc(size ? size : 1);
}

void *fx_alloc_array(size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size)
        return NULL;
    if (injected_failure())
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *fx_realloc_array(void *ptr, size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size)
        return NULL;
    if (injected_failure())
        return NULL;
    size_t bytes = count * size;
    return realloc(ptr, bytes ? bytes : 1);
}

char *fx_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *copy = fx_malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, len);
    copy[len] = '\0';
    return copy;
}

char *fx_strdup(const char *s) { return fx_strndup(s, SIZE_MAX); }

void fx_free(void *ptr) { free(ptr); }
