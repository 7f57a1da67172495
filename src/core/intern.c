/*
** intern.c — string interning: one copy of each distinct string per arena, so that equal
** strings are equal pointers. The table is a uthash keyed by the arena copy.
*/
#include "core.h"

#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) bpcc_malloc(sz)
#define uthash_free(ptr, sz) bpcc_xfree(ptr)
#define uthash_nonfatal_oom(e) (intern_oom = 1)
static int intern_oom;
#include <uthash.h>

struct intern_entry {
    const char *str;
    UT_hash_handle hh;
};

void bpcc_intern_init(struct bpcc_intern *in, struct bpcc_arena *a)
{
    memset(in, 0, sizeof *in);
    in->arena = a;
}

static unsigned recent_slot(const char *s)
{
    uintptr_t p = (uintptr_t)s;
    return (unsigned)((p >> 3) ^ (p >> 9)) & (BPCC_INTERN_RECENT - 1);
}

void bpcc_intern_release(struct bpcc_intern *in)
{
    HASH_CLEAR(hh, in->table);
    in->table = NULL;
    memset(in->recent, 0, sizeof in->recent);
}

const char *bpcc_intern_n(struct bpcc_intern *in, const char *s, size_t n)
{
    unsigned slot = recent_slot(s);
    const struct bpcc_intern_recent *r = &in->recent[slot];
    if (r->arg == s && r->len == n && !memcmp(r->str, s, n)) return r->str;
    struct intern_entry *e = NULL;
    HASH_FIND(hh, in->table, s, n, e);
    if (e) {
        in->recent[slot] = (struct bpcc_intern_recent){s, e->str, n};
        return e->str;
    }
    e = BPCC_ARENA_NEW(in->arena, struct intern_entry);
    if (!e) return NULL;
    char *copy = bpcc_arena_strndup(in->arena, s, n);
    if (!copy) return NULL;
    e->str = copy;
    intern_oom = 0;
    HASH_ADD_KEYPTR(hh, in->table, copy, n, e);
    if (intern_oom) return NULL; /* rolled back by uthash; the arena copy is simply unused */
    in->recent[slot] = (struct bpcc_intern_recent){s, copy, n};
    return copy;
}

const char *bpcc_intern_lookup(const struct bpcc_intern *in, const char *s)
{
    struct intern_entry *e = NULL;
    HASH_FIND(hh, in->table, s, strlen(s), e);
    return e ? e->str : NULL;
}
