/*
** strmap.c — the string index under interning, node names and the module table: open
** addressing with linear probing over slots that hold the key's hash and length next to its
** pointer, so that a lookup touches one slot line and, on a hash match, the key's bytes (uthash's
** chained handles cost three or four cache misses per lookup in a million-name graph), at most
** three quarters full (a 100k-node flow: 35 % faster than with uthash, less memory). Keys are
** not copied: they live in an arena that outlives the map. Growing rehashes from the stored
** hashes without reading a key; a copy is one memcpy.
**
** A table may have any number of slots: a key's home slot is its hash scaled to the count
** (multiply and shift), and probes wrap at the end. Adding keys one by one doubles the table; a
** caller that knows how many keys will come (bpcc_strmap_reserve) gets a table sized to them, at
** most three quarters full, not the next power of two: a converted 1M-node graph's 4.1M names
** took 8.4M slots (201 MB), where 5.5M hold them.
*/
#include "core.h"

#define MIN_SLOTS 64u

uint32_t bpcc_str_hash(const char *s, size_t n)
{
    /* eight bytes a step, each mixed by a multiply; the length goes in last */
    const uint64_t k = 0x9E3779B97F4A7C15ull;
    uint64_t h = 0x243F6A8885A308D3ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    for (size_t j = 0; i + j < n; j++) w |= (uint64_t)(unsigned char)s[i + j] << (8 * j);
    h = (h ^ w ^ ((uint64_t)n << 56)) * k;
    h ^= h >> 32;
    h *= k;
    return (uint32_t)(h >> 32);
}

/* a full slot holds key s; the key itself (an interned name looked up) matches without reading
** its bytes */
static bool holds(const struct bpcc_strmap_slot *e, const char *s, size_t n, uint32_t h)
{
    return e->hash == h && (e->key == s || (e->len == n && !memcmp(e->key, s, n)));
}

/* the home slot of hash h in a table of cap slots */
static inline uint32_t home(uint32_t h, uint32_t cap) { return (uint32_t)(((uint64_t)h * cap) >> 32); }
/* the slot after i, wrapping at the end */
static inline uint32_t next(uint32_t i, uint32_t cap) { return i + 1 == cap ? 0 : i + 1; }

struct bpcc_strmap_slot *bpcc_strmap_get(const struct bpcc_strmap *m, const char *s, size_t n, uint32_t h)
{
    if (!m->slots || n > UINT32_MAX) return NULL;
    for (uint32_t i = home(h, m->cap);; i = next(i, m->cap)) {
        struct bpcc_strmap_slot *e = &m->slots[i];
        if (!e->key) return NULL;
        if (holds(e, s, n, h)) return e;
    }
}

struct bpcc_strmap_slot *bpcc_strmap_get_str(const struct bpcc_strmap *m, const char *s)
{
    size_t n = strlen(s);
    return bpcc_strmap_get(m, s, n, bpcc_str_hash(s, n));
}

static void place(struct bpcc_strmap_slot *slots, uint32_t cap, const struct bpcc_strmap_slot *e)
{
    uint32_t i = home(e->hash, cap);
    while (slots[i].key) i = next(i, cap);
    slots[i] = *e;
}

/* old slots rehashed between looks at what can go back to the kernel (1.5 MiB of them) */
#define GROW_STEP (1u << 16)

/* the slots rehashed into ncap of them. The old table's pages go back to the kernel as the rehash
** passes them, so that the two tables are not both resident: a converted 1M-node graph's table
** grows from 100 to 131 MB at convert's start, which was its peak. */
static enum bpcc_status grow(struct bpcc_strmap *m, uint32_t ncap)
{
    uint32_t cap = m->cap; /* 0 while there are no slots */
    struct bpcc_strmap_slot *slots = bpcc_malloc((size_t)ncap * sizeof *slots);
    if (!slots) return BPCC_ERR_NOMEM;
    memset(slots, 0, (size_t)ncap * sizeof *slots);
    /* whole huge pages only: a part of one given back would split it, and the rest of the table's
    ** pages would then be faulted in one by one (at 1M nodes 37k more faults, ~0.5 s) */
    const uintptr_t huge = BPCC_HUGE_PAGE;
    uintptr_t given = ((uintptr_t)m->slots + huge - 1) & ~(huge - 1); /* below it: given back */
    for (uint32_t i = 0; i < cap; i++) {
        if (m->slots[i].key) place(slots, ncap, &m->slots[i]);
        if ((i + 1) % GROW_STEP) continue;
        uintptr_t done = (uintptr_t)(m->slots + i + 1) & ~(huge - 1);
        if (done > given) {
            bpcc_pages_give_back((void *)given, done - given);
            given = done;
        }
    }
    bpcc_xfree(m->slots);
    m->slots = slots;
    m->cap = ncap;
    m->epoch++;
    return BPCC_OK;
}

#define MAX_SLOTS (1u << 31)

/* at most three quarters full with n keys: n keys fit in cap slots */
static bool fits(uint64_t n, uint64_t cap) { return 4 * n <= 3 * cap; }

enum bpcc_status bpcc_strmap_reserve(struct bpcc_strmap *m, uint32_t n)
{
    uint32_t cap = m->cap; /* 0 while there are no slots */
    if (cap && fits(n, cap)) return BPCC_OK;
    uint64_t want = ((uint64_t)n * 4 + 2) / 3; /* the fewest slots that hold n */
    want = (want + MIN_SLOTS - 1) / MIN_SLOTS * MIN_SLOTS;
    if (want > MAX_SLOTS) return BPCC_ERR_NOMEM;
    return grow(m, (uint32_t)want);
}

/* room for one more key: the table doubles when full, as adding one by one goes on */
static enum bpcc_status reserve_one(struct bpcc_strmap *m)
{
    uint32_t cap = m->cap; /* 0 while there are no slots */
    if (cap && fits((uint64_t)m->n + 1, cap)) return BPCC_OK;
    if (cap >= MAX_SLOTS) return BPCC_ERR_NOMEM;
    return grow(m, cap ? (cap > MAX_SLOTS / 2 ? MAX_SLOTS : 2 * cap) : MIN_SLOTS);
}

struct bpcc_strmap_slot *bpcc_strmap_get_or_add(struct bpcc_strmap *m, const char *s, size_t n, uint32_t h, bool *added)
{
    *added = false;
    if (n > UINT32_MAX || reserve_one(m)) return NULL;
    for (uint32_t i = home(h, m->cap);; i = next(i, m->cap)) {
        struct bpcc_strmap_slot *e = &m->slots[i];
        if (!e->key) {
            *e = (struct bpcc_strmap_slot){.key = s, .hash = h, .len = (uint32_t)n};
            m->n++;
            *added = true;
            return e;
        }
        if (holds(e, s, n, h)) return e;
    }
}

enum bpcc_status bpcc_strmap_put(struct bpcc_strmap *m, const char *key, size_t n, uint32_t h, void *value)
{
    if (n > UINT32_MAX) return BPCC_ERR_LIMIT;
    if (reserve_one(m)) return BPCC_ERR_NOMEM;
    struct bpcc_strmap_slot e = {.key = key, .value = value, .hash = h, .len = (uint32_t)n};
    place(m->slots, m->cap, &e);
    m->n++;
    return BPCC_OK;
}

void bpcc_strmap_remove(struct bpcc_strmap *m, struct bpcc_strmap_slot *e)
{
    /* backward-shift deletion: pull later members of the probe run into the hole when the hole
    ** lies between their home slot and where they sit */
    uint32_t hole = (uint32_t)(e - m->slots), cap = m->cap;
    for (uint32_t j = next(hole, cap); m->slots[j].key; j = next(j, cap)) {
        uint32_t h = home(m->slots[j].hash, cap);
        /* distances back from j, around the end */
        uint32_t from_home = j >= h ? j - h : j + cap - h, from_hole = j >= hole ? j - hole : j + cap - hole;
        if (from_home >= from_hole) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole] = (struct bpcc_strmap_slot){0};
    m->n--;
    m->epoch++;
}

enum bpcc_status bpcc_strmap_copy(struct bpcc_strmap *dst, const struct bpcc_strmap *src)
{
    *dst = (struct bpcc_strmap){0};
    if (!src->slots) return BPCC_OK;
    size_t bytes = (size_t)src->cap * sizeof *src->slots;
    if (!(dst->slots = bpcc_malloc(bytes))) return BPCC_ERR_NOMEM;
    memcpy(dst->slots, src->slots, bytes);
    dst->cap = src->cap;
    dst->n = src->n;
    return BPCC_OK;
}

void bpcc_strmap_release(struct bpcc_strmap *m)
{
    bpcc_xfree(m->slots);
    *m = (struct bpcc_strmap){0};
}
