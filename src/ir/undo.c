/*
** undo.c — the undo log that lets a failed pass give its graph back as it was. While a pass runs
** (bpcc_graph_begin_pass .. bpcc_graph_end_pass), every change to an object that existed before
** the pass first records the bytes it overwrites; a failure plays the records back, newest first,
** so each place ends with the value it had before its first change. Objects the pass made itself
** need no records: once the old objects are back, nothing reaches the new ones (nodes are told
** apart by id, see bpcc_undo_node). A name's node and module are recorded by the name, not
** by address, because the intern table moves when it grows. What the pass allocated stays allocated
** until the graph is freed, as with any arena memory.
**
** A snapshot of the whole structure cost a copy of every node and module per pass, a quarter of
** the passes' time at 1M nodes; the log costs a few records per object the pass changes.
**
** Records lie one after another in a chain of chunks, newest chunk first: the old bytes (padded to
** 8), then a trailer word, so each chunk is read backwards from its end. The trailer packs the
** address (48 bits, where user space lives on x86-64 and AArch64), the size (13 bits) and the kind
** (3 bits): a record of a pointer or a count is 16 bytes. A record that does not fit (a long users
** array, an address above 2^48) puts its address and size in two words of their own before a
** trailer of kind UNDO_LONG. Chunks, not
** one buffer grown by realloc: a realloc copies, and the copies it leaves behind stay resident in
** the heap (at 1M nodes that was more than the log itself). A record that finds no memory is
** not made, and neither is the change it was for: the log stays complete. The mutator fails with
** BPCC_ERR_NOMEM if it can (the pass then fails), or, if it cannot fail (moving or unlinking),
** returns; either way the log is marked `failed`, later mutators change nothing, and
** bpcc_graph_end_pass turns the pass into an out-of-memory failure and plays the log back.
*/
#include "ir.h"

enum undo_kind {
    UNDO_BYTES,      /* old bytes of `addr` */
    UNDO_NAME,       /* addr: an interned name whose slot had no node */
    UNDO_MODULE,     /* addr: an interned module name; the slot's module before (NULL: none) */
    UNDO_BASE,       /* addr: a numbering base that was new */
    UNDO_LONG,       /* the record's addr, then its size | kind << 32, in the two words before */
};

/* The addresses recorded last, direct-mapped: a place recorded once in a pass needs no second
** record, since the first holds the bytes it had before the pass and a playback puts the oldest
** back last. A pass changes a few places over and over (the last node's link, a numbering base's
** counter, the root module's tensor count): at 100k nodes this took out a third to a half of them. */
#define UNDO_SEEN 4096
struct undo_seen {
    void *addr;
    size_t size;
};

#define TRAILER_ADDR_BITS 48
#define TRAILER_SIZE_MAX ((1u << 13) - 1)

#define PAD8(n) (((n) + 7) & ~(size_t)7)

struct undo_chunk {
    struct undo_chunk *prev;
    size_t used, cap;
    _Alignas(8) unsigned char data[];
};

static bool grow_by_record; /* tests: every record is an allocation that can fail */

void bpcc_undo_grow_by_record(bool on) { grow_by_record = on; }

/* a new chunk with room for `need` bytes: double the last one, from 64 KiB up to 64 MiB */
static bool grow(struct bpcc_undo *u, size_t need)
{
    size_t cap = u->head ? 2 * u->head->cap : (size_t)64 << 10;
    if (cap > ((size_t)64 << 20)) cap = (size_t)64 << 20;
    if (cap < need || grow_by_record) cap = need;
    struct undo_chunk *c = bpcc_malloc(sizeof *c + cap);
    if (!c) return false;
    *c = (struct undo_chunk){u->head, 0, cap};
    u->head = c;
    return true;
}

static bool record(struct bpcc_graph *g, enum undo_kind kind, void *addr, const void *old, size_t size)
{
    struct bpcc_undo *u = &g->undo;
    if (!u->on) return true;
    struct undo_seen *seen = NULL;
    if (kind == UNDO_BYTES) {
        uintptr_t h = (uintptr_t)addr;
        seen = &u->seen[((h >> 3) ^ (h >> 15)) & (UNDO_SEEN - 1)];
        if (seen->addr == addr && seen->size >= size && !u->failed) return true;
    }
    uintptr_t a = (uintptr_t)addr;
    bool packed = a >> TRAILER_ADDR_BITS == 0 && size <= TRAILER_SIZE_MAX;
    size_t need = PAD8(size) + (packed ? 8 : 24);
    if (u->failed || ((!u->head || u->head->used + need > u->head->cap) && !grow(u, need))) {
        u->failed = true;
        return false;
    }
    struct undo_chunk *c = u->head;
    if (size) memcpy(c->data + c->used, old, size);
    c->used += PAD8(size);
    uint64_t w[3] = {a, size | (uint64_t)kind << 32, (uint64_t)UNDO_LONG << 61};
    if (packed) w[2] = a | (uint64_t)size << TRAILER_ADDR_BITS | (uint64_t)kind << 61;
    memcpy(c->data + c->used, packed ? &w[2] : w, need - PAD8(size));
    c->used += need - PAD8(size);
    if (seen) *seen = (struct undo_seen){addr, size};
    return true;
}

bool bpcc_undo_bytes(struct bpcc_graph *g, void *addr, size_t size)
{
    return record(g, UNDO_BYTES, addr, addr, size);
}

bool bpcc_undo_name(struct bpcc_graph *g, const char *interned)
{
    return record(g, UNDO_NAME, (void *)interned, NULL, 0);
}

bool bpcc_undo_module_entry(struct bpcc_graph *g, const char *key, struct bpcc_module *old)
{
    return record(g, UNDO_MODULE, (void *)key, &old, sizeof old);
}

bool bpcc_undo_base(struct bpcc_graph *g, const char *base)
{
    return record(g, UNDO_BASE, (void *)base, NULL, 0);
}

void bpcc_graph_set_rollback(struct bpcc_graph *g, bool on) { g->no_rollback = !on; }

enum bpcc_status bpcc_graph_begin_pass(struct bpcc_graph *g, struct bpcc_diag *d)
{
    struct bpcc_undo *u = &g->undo;
    BPCC_ASSERT(!u->on);
    if (g->no_rollback) return BPCC_OK;
    struct bpcc_module **mods = NULL;
    if (g->n_modules && !(mods = bpcc_malloc(g->n_modules * sizeof *mods))) return bpcc_diag_nomem(d);
    if (g->n_modules) memcpy(mods, g->modules, g->n_modules * sizeof *mods);
    struct undo_seen *seen = bpcc_malloc(UNDO_SEEN * sizeof *seen);
    if (!seen) {
        bpcc_xfree(mods);
        return bpcc_diag_nomem(d);
    }
    memset(seen, 0, UNDO_SEEN * sizeof *seen);
    u->seen = seen;
    u->modules = mods;
    u->n_modules = g->n_modules;
    u->first = g->first;
    u->last = g->last;
    u->n_nodes = g->n_nodes;
    u->next_id = g->next_id;
    u->failed = false;
    u->on = true;
    return BPCC_OK;
}

bool bpcc_undo_module_made(struct bpcc_graph *g, struct bpcc_module *m)
{
    struct bpcc_undo *u = &g->undo;
    if (!u->on) return true;
    if (u->n_fresh == u->cap_fresh) {
        uint32_t cap = u->cap_fresh ? 2 * u->cap_fresh : 256;
        struct bpcc_module **p = u->failed ? NULL : bpcc_realloc(u->fresh, cap * sizeof *p);
        if (!p) {
            u->failed = true;
            return false;
        }
        u->fresh = p;
        u->cap_fresh = cap;
    }
    u->fresh[u->n_fresh++] = m;
    m->fresh = true;
    return true;
}

static void drop(struct bpcc_undo *u)
{
    for (uint32_t i = 0; i < u->n_fresh; i++) u->fresh[i]->fresh = false;
    bpcc_xfree(u->fresh);
    bpcc_xfree(u->seen);
    while (u->head) {
        struct undo_chunk *c = u->head;
        u->head = c->prev;
        bpcc_xfree(c);
    }
    bpcc_xfree(u->modules);
    *u = (struct bpcc_undo){0};
}

/* the slot of a numbering base recorded by its interned pointer (the key is there: the table only
** loses keys to the playback itself, which puts back what was there first) */
static struct bpcc_strmap_slot *entry(struct bpcc_strmap *m, const char *key)
{
    size_t len = strlen(key);
    return bpcc_strmap_get(m, key, len, bpcc_str_hash(key, len));
}

static void play_back(struct bpcc_graph *g)
{
    struct bpcc_undo *u = &g->undo;
    for (struct undo_chunk *c = u->head; c; c = c->prev) while (c->used) {
        struct {
            void *addr;
            size_t size;
            enum undo_kind kind;
        } t;
        uint64_t w;
        c->used -= 8;
        memcpy(&w, c->data + c->used, 8);
        if ((enum undo_kind)(w >> 61) == UNDO_LONG) {
            uint64_t l[2];
            c->used -= 16;
            memcpy(l, c->data + c->used, 16);
            t.addr = (void *)(uintptr_t)l[0];
            t.size = (uint32_t)l[1];
            t.kind = (enum undo_kind)(l[1] >> 32);
        } else {
            t.addr = (void *)(uintptr_t)(w & (((uint64_t)1 << TRAILER_ADDR_BITS) - 1));
            t.size = (size_t)(w >> TRAILER_ADDR_BITS) & TRAILER_SIZE_MAX;
            t.kind = (enum undo_kind)(w >> 61);
        }
        c->used -= PAD8(t.size);
        const unsigned char *old = c->data + c->used;
        switch (t.kind) {
        case UNDO_BYTES:
            memcpy(t.addr, old, t.size);
            break;
        case UNDO_NAME:
        case UNDO_MODULE: { /* the name's slot was made room in before it changed: no allocation */
            size_t len = strlen(t.addr);
            void **v = bpcc_intern_value(&g->intern, t.addr, len, bpcc_str_hash(t.addr, len));
            BPCC_ASSERT(v);
            if (t.kind == UNDO_NAME) {
                bpcc_name_put_node(v, NULL);
            } else {
                struct bpcc_module *was;
                memcpy(&was, old, sizeof was);
                bpcc_name_put_module(v, was);
            }
            break;
        }
        case UNDO_BASE: { /* recorded before it is put: absent when the put failed */
            struct bpcc_strmap_slot *e = entry(&g->bases, t.addr);
            if (e) bpcc_strmap_remove(&g->bases, e);
            break;
        }
        case UNDO_LONG:
            BPCC_ASSERT(!"undo: a long record's kind is never LONG");
            break;
        }
    }
    g->first = u->first;
    g->last = u->last;
    g->n_nodes = u->n_nodes;
    g->next_id = u->next_id;
    BPCC_ASSERT(g->cap_modules >= u->n_modules); /* the table only grows */
    if (u->n_modules) memcpy(g->modules, u->modules, u->n_modules * sizeof *g->modules);
    g->n_modules = u->n_modules;
    bpcc_graph_forget_modules(g);
    /* the tensor indexes are not recorded: each is built again from its tensors as they were */
    for (uint32_t i = 0; i < g->n_modules; i++) bpcc_module_reindex_tensors(g->modules[i]);
}

enum bpcc_status bpcc_graph_end_pass(struct bpcc_graph *g, enum bpcc_status s, struct bpcc_diag *d)
{
    struct bpcc_undo *u = &g->undo;
    if (!u->on) { /* rollback off: after a failure g is only fit for bpcc_graph_free */
        if (!s) {
            bpcc_graph_resolve_modules(g);
            bpcc_graph_recycle_erased(g);
        }
        return s;
    }
    if (u->failed && s != BPCC_ERR_NOMEM) s = bpcc_diag_nomem(d); /* a change was left out */
    if (s) play_back(g);
    drop(u);
    bpcc_graph_resolve_modules(g); /* modules replaced during the pass, or put back */
    return s;
}

void bpcc_graph_release_undo(struct bpcc_graph *g) { drop(&g->undo); }
