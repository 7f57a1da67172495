/*
** intern.c — string interning: one copy of each distinct string per arena, so that equal
** strings are equal pointers. The copies are indexed by a strmap, whose values are the owner's:
** a graph keeps each node's name there, so that naming a node looks up one table, not two.
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

/* the answer remembered for argument s, or NULL */
static const char *recent(const struct bpcc_intern *in, const char *s, size_t n)
{
    const struct bpcc_intern_recent *r = &in->recent[recent_slot(s)];
    return r->arg == s && r->len == n && !memcmp(r->str, s, n) ? r->str : NULL;
}

void **bpcc_intern_slot(struct bpcc_intern *in, const char *s, size_t n, uint32_t h, const char **str,
                        bool *added_out)
{
    bool added;
    struct bpcc_strmap_slot *e = bpcc_strmap_get_or_add(&in->table, s, n, h, &added);
    if (!e) return NULL;
    if (added_out) *added_out = added;
    if (added) {
        char *copy = bpcc_arena_strndup(in->arena, s, n);
        if (!copy) {
            bpcc_strmap_remove(&in->table, e);
            return NULL;
        }
        e->key = copy;
    }
    *str = e->key;
    return &e->value;
}

/* the table's copy of s, made when absent; remembered for argument s */
static const char *intern_table(struct bpcc_intern *in, const char *s, size_t n, uint32_t h)
{
    const char *str;
    if (!bpcc_intern_slot(in, s, n, h, &str, NULL)) return NULL;
    in->recent[recent_slot(s)] = (struct bpcc_intern_recent){s, str, n};
    return str;
}

const char *bpcc_intern_nh(struct bpcc_intern *in, const char *s, size_t n, uint32_t h)
{
    const char *r = recent(in, s, n);
    return r ? r : intern_table(in, s, n, h);
}

const char *bpcc_intern_n(struct bpcc_intern *in, const char *s, size_t n)
{
    const char *r = recent(in, s, n); /* before hashing: most calls end here */
    return r ? r : intern_table(in, s, n, bpcc_str_hash(s, n));
}

const char *bpcc_intern_find(const struct bpcc_intern *in, const char *s, size_t n, uint32_t h)
{
    const struct bpcc_strmap_slot *e = bpcc_strmap_get(&in->table, s, n, h);
    return e ? e->key : NULL;
}

const char *bpcc_intern_lookup(const struct bpcc_intern *in, const char *s)
{
    size_t n = strlen(s);
    return bpcc_intern_find(in, s, n, bpcc_str_hash(s, n));
}

void **bpcc_intern_value(const struct bpcc_intern *in, const char *s, size_t n, uint32_t h)
{
    struct bpcc_strmap_slot *e = bpcc_strmap_get(&in->table, s, n, h);
    return e ? &e->value : NULL;
}
