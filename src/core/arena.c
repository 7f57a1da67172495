/*
** arena.c — bump allocation in growing chunks. Everything allocated from an arena is released
** at once by bpcc_arena_release; nothing is freed individually. Addresses are stable.
*/
#include "core.h"

struct arena_chunk {
    struct arena_chunk *next;
    size_t cap;
    unsigned char *data; /* 64-byte aligned, cap bytes, inside this allocation */
};

#define ARENA_MIN_CHUNK (64 * 1024 - sizeof(struct arena_chunk) - 64)

/* One allocation holds the chunk header and its data, aligned up to 64 bytes. */
static struct arena_chunk *chunk_at(void *block, size_t cap)
{
    struct arena_chunk *c = block;
    uintptr_t p = (uintptr_t)(c + 1);
    c->data = (unsigned char *)((p + 63) & ~(uintptr_t)63);
    c->cap = cap;
    c->next = NULL;
    return c;
}

static struct arena_chunk *chunk_new(size_t cap)
{
    if (cap > SIZE_MAX - sizeof(struct arena_chunk) - 64) return NULL;
    void *block = bpcc_malloc(sizeof(struct arena_chunk) + cap + 64);
    return block ? chunk_at(block, cap) : NULL;
}

static void free_chunks(struct arena_chunk *c)
{
    while (c) {
        struct arena_chunk *next = c->next;
        bpcc_xfree(c);
        c = next;
    }
}

void bpcc_arena_init(struct bpcc_arena *a) { memset(a, 0, sizeof *a); }

void bpcc_arena_release(struct bpcc_arena *a)
{
    free_chunks(a->head);
    free_chunks(a->spare);
    memset(a, 0, sizeof *a);
}

void bpcc_arena_donate(struct bpcc_arena *a, void *block, size_t size)
{
    if (!block) return;
    if (size < sizeof(struct arena_chunk) + 64 + ARENA_MIN_CHUNK) { /* less than a first chunk */
        bpcc_xfree(block);
        return;
    }
    struct arena_chunk *c = chunk_at(block, size - sizeof(struct arena_chunk) - 64);
    c->next = a->spare;
    a->spare = c;
    a->total += size;
}

/* the first spare chunk that holds `size` bytes, taken off the spare list; NULL when none does */
static struct arena_chunk *take_spare(struct bpcc_arena *a, size_t size)
{
    for (struct arena_chunk **link = &a->spare; *link; link = &(*link)->next)
        if ((*link)->cap >= size) {
            struct arena_chunk *c = *link;
            *link = c->next;
            c->next = NULL;
            return c;
        }
    return NULL;
}

static void *arena_alloc(struct bpcc_arena *a, size_t size, size_t align, bool zero)
{
    BPCC_ASSERT(align && align <= 64 && (align & (align - 1)) == 0);
    if (a->head) {
        size_t off = (a->used + align - 1) & ~(align - 1);
        if (off <= a->cap && size <= a->cap - off) {
            a->used = off + size;
            void *p = a->head->data + off;
            if (zero) memset(p, 0, size);
            return p;
        }
    }
    /* A large request gets a chunk of its own behind the head, so the head's free space
    ** stays usable; otherwise a new head chunk, double the previous one (the chunk count
    ** stays logarithmic), capped at 64 MiB. */
    size_t cap = a->head ? a->head->cap * 2 : ARENA_MIN_CHUNK;
    if (cap > ((size_t)64 << 20)) cap = (size_t)64 << 20;
    bool dedicated = a->head && size > cap / 4;
    if (dedicated || size > cap) cap = size;
    /* a donated block, when one is big enough, before new memory (its size counts as obtained) */
    struct arena_chunk *c = dedicated ? NULL : take_spare(a, size);
    if (c) cap = c->cap;
    else if (!(c = chunk_new(cap))) return NULL;
    else a->total += sizeof *c + cap + 64;
    if (dedicated) {
        c->next = a->head->next;
        a->head->next = c;
    } else {
        c->next = a->head;
        a->head = c;
        a->cap = cap;
        a->used = size;
    }
    if (zero) memset(c->data, 0, size);
    return c->data;
}

void *bpcc_arena_alloc(struct bpcc_arena *a, size_t size, size_t align) { return arena_alloc(a, size, align, true); }

void *bpcc_arena_alloc_uninit(struct bpcc_arena *a, size_t size, size_t align)
{
    return arena_alloc(a, size, align, false);
}

void bpcc_arena_adopt(struct bpcc_arena *dst, struct bpcc_arena *src)
{
    struct arena_chunk **link = &dst->spare; /* src's spares behind dst's */
    while (*link) link = &(*link)->next;
    *link = src->spare;
    dst->total += src->total;
    if (src->head && !dst->head) {
        dst->head = src->head;
        dst->used = src->used;
        dst->cap = src->cap;
    } else if (src->head) {
        /* behind dst's head, so that dst keeps allocating where it did */
        struct arena_chunk *last = src->head;
        while (last->next) last = last->next;
        last->next = dst->head->next;
        dst->head->next = src->head;
    }
    memset(src, 0, sizeof *src);
}

char *bpcc_arena_strndup(struct bpcc_arena *a, const char *s, size_t n)
{
    char *r = bpcc_arena_alloc(a, n + 1, 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = 0;
    }
    return r;
}
