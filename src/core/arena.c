/*
** arena.c — bump allocation in growing chunks. Everything allocated from an arena is released
** at once by bpcc_arena_release; nothing is freed individually, but a small block that nothing
** will use again can be given back to the arena, whose next small allocation of its size takes it
** (a pass that replaces objects makes their successors in their memory). Addresses are stable.
*/
#include "core.h"

struct arena_chunk {
    struct arena_chunk *next;
    size_t cap;
    unsigned char *data; /* 64-byte aligned, cap bytes, inside this allocation */
};

#define ARENA_MIN_CHUNK (64 * 1024 - sizeof(struct arena_chunk) - 64)

/* A big chunk's data starts on a huge-page boundary, so that all of it can be backed by huge
** pages (alloc.c advises the block so). The slack before it is address space only: nothing
** touches it, so it is never given memory. */
static size_t chunk_align(size_t cap) { return cap >= BPCC_HUGE_ADVICE_MIN ? BPCC_HUGE_PAGE : 64; }

/* One allocation holds the chunk header and its data, aligned up to 64 bytes (2 MiB for a big
** chunk). */
static struct arena_chunk *chunk_new(size_t cap)
{
    size_t align = chunk_align(cap);
    if (cap > SIZE_MAX - sizeof(struct arena_chunk) - align) return NULL;
    struct arena_chunk *c = bpcc_malloc(sizeof *c + cap + align);
    if (!c) return NULL;
    uintptr_t p = (uintptr_t)(c + 1);
    c->data = (unsigned char *)((p + align - 1) & ~(uintptr_t)(align - 1));
    c->cap = cap;
    c->next = NULL;
    return c;
}

void bpcc_arena_init(struct bpcc_arena *a) { memset(a, 0, sizeof *a); }

void bpcc_arena_release(struct bpcc_arena *a)
{
    struct arena_chunk *c = a->head;
    while (c) {
        struct arena_chunk *next = c->next;
        bpcc_xfree(c);
        c = next;
    }
    memset(a, 0, sizeof *a);
}

void bpcc_arena_give(struct bpcc_arena *a, void *p, size_t size)
{
    if (((uintptr_t)p & 7) || size < 8) return;
    size_t k = size / 8 < BPCC_ARENA_BINS ? size / 8 : BPCC_ARENA_BINS;
    memcpy(p, &a->bins[k - 1], sizeof(void *)); /* the bin's list runs through its blocks */
    a->bins[k - 1] = p;
    a->bin_mask |= 1u << (k - 1);
}

/* a block of bin k, taken off it */
static void *bin_pop(struct bpcc_arena *a, unsigned k)
{
    void *p = a->bins[k];
    memcpy(&a->bins[k], p, sizeof p);
    if (!a->bins[k]) a->bin_mask &= ~(1u << k);
    return p;
}

static void *arena_alloc(struct bpcc_arena *a, size_t size, size_t align, bool zero)
{
    BPCC_ASSERT(align && align <= 64 && (align & (align - 1)) == 0);
    if (align <= 8 && size - 1 < 8 * BPCC_ARENA_BINS) {
        /* a block given back of the size rounded up, else the first of a larger one, the rest of
        ** which goes back to its bin (a replaced module's 136 bytes become a node's arguments and
        ** a tensor header) */
        unsigned c = (unsigned)((size - 1) / 8);
        uint32_t m = a->bin_mask >> c;
        if (m) {
            unsigned k = c + (unsigned)__builtin_ctz(m);
            unsigned char *p = bin_pop(a, k);
            if (k > c) bpcc_arena_give(a, p + 8 * (c + 1), 8 * (size_t)(k - c));
            if (zero) memset(p, 0, size);
            return p;
        }
    }
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
    struct arena_chunk *c = chunk_new(cap);
    if (!c) return NULL;
    if (dedicated) {
        c->next = a->head->next;
        a->head->next = c;
    } else {
        c->next = a->head;
        a->head = c;
        a->cap = cap;
        a->used = size;
    }
    a->total += sizeof *c + cap + chunk_align(cap);
    if (zero) memset(c->data, 0, size);
    return c->data;
}

void *bpcc_arena_alloc(struct bpcc_arena *a, size_t size, size_t align) { return arena_alloc(a, size, align, true); }

void *bpcc_arena_alloc_uninit(struct bpcc_arena *a, size_t size, size_t align)
{
    return arena_alloc(a, size, align, false);
}

struct bpcc_arena_mark bpcc_arena_mark(const struct bpcc_arena *a) { return (struct bpcc_arena_mark){a->head, a->used}; }

bool bpcc_arena_rewind(struct bpcc_arena *a, struct bpcc_arena_mark m)
{
    if (a->head != m.head || a->used < m.used) return false;
    a->used = m.used;
    memset(a->bins, 0, sizeof a->bins); /* a block given back may lie past the mark */
    a->bin_mask = 0;
    return true;
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
