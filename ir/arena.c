/*
 * arena.c - bump allocation for everything a Graph owns (nodes, names,
 * attributes), released all at once by arena_free.  Blocks grow geometrically;
 * an allocation larger than a block gets a block of its own.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

struct ArenaBlock {
    ArenaBlock *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

enum { ARENA_MIN_BLOCK = 16 * 1024 };

void arena_init(Arena *a) { a->head = NULL; }

void arena_free(Arena *a)
{
    ArenaBlock *b = a->head;
    while (b) {
        ArenaBlock *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}

void *arena_alloc(Arena *a, size_t n)
{
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n)
        return NULL;
    ArenaBlock *b = a->head;
    if (!b || b->cap - b->used < need) {
        size_t cap = b ? b->cap * 2 : ARENA_MIN_BLOCK;
        if (cap < need)
            cap = need;
        if (cap > SIZE_MAX - sizeof(ArenaBlock))
            return NULL;
        ArenaBlock *nb = fx_malloc(sizeof(ArenaBlock) + cap);
        if (!nb)
            return NULL;
        nb->used = 0;
        nb->cap = cap;
        nb->next = a->head;
        a->head = nb;
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += need;
    memset(p, 0, n);
    return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }
