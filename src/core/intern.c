/*
** intern.c — string interning: one copy of each distinct string per arena, so that equal
** strings are equal pointers. The copies are indexed by a strmap.
*/
#include "core.h"

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
    bpcc_strmap_release(&in->table);
    memset(in->recent, 0, sizeof in->recent);
}

const char *bpcc_intern_nh(struct bpcc_intern *in, const char *s, size_t n, uint32_t h)
{
    unsigned slot = recent_slot(s);
    const struct bpcc_intern_recent *r = &in->recent[slot];
    if (r->arg == s && r->len == n && !memcmp(r->str, s, n)) return r->str;
    const struct bpcc_strmap_slot *e = bpcc_strmap_get(&in->table, s, n, h);
    if (e) {
        in->recent[slot] = (struct bpcc_intern_recent){s, e->key, n};
        return e->key;
    }
    char *copy = bpcc_arena_strndup(in->arena, s, n);
    if (!copy || bpcc_strmap_put(&in->table, copy, n, h, NULL)) return NULL; /* the copy is simply unused */
    in->recent[slot] = (struct bpcc_intern_recent){s, copy, n};
    return copy;
}

const char *bpcc_intern_n(struct bpcc_intern *in, const char *s, size_t n)
{
    unsigned slot = recent_slot(s);
    const struct bpcc_intern_recent *r = &in->recent[slot];
    if (r->arg == s && r->len == n && !memcmp(r->str, s, n)) return r->str;
    return bpcc_intern_nh(in, s, n, bpcc_str_hash(s, n));
}

const char *bpcc_intern_lookup(const struct bpcc_intern *in, const char *s)
{
    size_t n = strlen(s);
    const struct bpcc_strmap_slot *e = bpcc_strmap_get(&in->table, s, n, bpcc_str_hash(s, n));
    return e ? e->key : NULL;
}
