/*
** registry.c — the compiled backend config: entries in PyTorch's registry order (a later entry
** for the same pattern replaces the earlier one's value and keeps its position), the matching
** order of _sorted_patterns_dict, and an index from anchor op to candidate patterns.
*/
#include "config.h"

#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) bpcc_malloc(sz)
#define uthash_free(ptr, sz) bpcc_xfree(ptr)
#define uthash_nonfatal_oom(e) (reg_oom = 1)
static int reg_oom;
#include <uthash.h>

struct index_entry {
    const char *op;   /* interned anchor op */
    uint32_t *items;  /* entry indices, matching order */
    uint32_t n, cap;
    UT_hash_handle hh;
};

static void text_rec(const struct pattern *p, struct bpcc_buf *b)
{
    if (!p->n_args) {
        bpcc_buf_adds(b, p->op);
        return;
    }
    bpcc_buf_addc(b, '[');
    bpcc_buf_adds(b, p->op);
    for (uint32_t i = 0; i < p->n_args; i++) {
        bpcc_buf_adds(b, ", ");
        text_rec(p->args[i], b);
    }
    bpcc_buf_addc(b, ']');
}

void bpcc_pattern_text(const struct pattern_entry *e, struct bpcc_buf *b)
{
    const struct pattern *p = e->pattern;
    if (e->simple && p->n_args) {
        /* forward order: walk the chain from the anchor down, print reversed */
        const char *ops[3];
        uint32_t n = 0;
        for (const struct pattern *q = p; q && n < 3; q = q->n_args ? q->args[0] : NULL) ops[n++] = q->op;
        bpcc_buf_addc(b, '[');
        for (uint32_t i = n; i-- > 0;) {
            bpcc_buf_adds(b, ops[i]);
            if (i) bpcc_buf_adds(b, ", ");
        }
        bpcc_buf_addc(b, ']');
        return;
    }
    text_rec(p, b);
}

enum bpcc_status bpcc_registry_add(struct bpcc_config *c, struct pattern_entry *e, bool override,
                                   struct bpcc_diag *d)
{
    (void)d;
    for (uint32_t i = 0; override && i < c->n_entries; i++)
        if (bpcc_pattern_equal(c->entries[i]->pattern, e->pattern)) {
            c->entries[i] = e; /* value replaced, position kept */
            return BPCC_OK;
        }
    if (c->n_entries == c->cap_entries) {
        uint32_t cap = c->cap_entries ? c->cap_entries * 2 : 64;
        struct pattern_entry **p = BPCC_ARENA_NEWN(&c->arena, struct pattern_entry *, cap);
        if (!p) return BPCC_ERR_NOMEM;
        if (c->n_entries) memcpy(p, c->entries, c->n_entries * sizeof *p);
        c->entries = p;
        c->cap_entries = cap;
    }
    c->entries[c->n_entries++] = e;
    return BPCC_OK;
}

/* _sorted_patterns_dict's key: tuple patterns first, more leaves first; single ops last. */
static int order_key(const struct pattern_entry *e)
{
    return e->pattern->n_args ? -(int)e->n_leaves : 1;
}

enum bpcc_status bpcc_registry_finish(struct bpcc_config *c, struct bpcc_diag *d)
{
    uint32_t n = c->n_entries;
    c->sorted = BPCC_ARENA_NEWN(&c->arena, uint32_t, n ? n : 1);
    if (!c->sorted) return bpcc_diag_nomem(d);
    /* stable counting by key, as Python's sorted() keeps ties in insertion order */
    uint32_t k = 0;
    int max_leaves = 0;
    for (uint32_t i = 0; i < n; i++)
        if ((int)c->entries[i]->n_leaves > max_leaves) max_leaves = (int)c->entries[i]->n_leaves;
    for (int key = -max_leaves; key <= 1; key++)
        for (uint32_t i = 0; i < n; i++)
            if (order_key(c->entries[i]) == key) c->sorted[k++] = i;
    BPCC_ASSERT(k == n);
    /* index by anchor op */
    for (uint32_t j = 0; j < n; j++) {
        uint32_t i = c->sorted[j];
        const char *op = c->entries[i]->pattern->op;
        if (!strcmp(op, "MatchAllNode")) {
            uint32_t *w = BPCC_ARENA_NEWN(&c->arena, uint32_t, c->n_wildcard + 1);
            if (!w) return bpcc_diag_nomem(d);
            if (c->n_wildcard) memcpy(w, c->wildcard, c->n_wildcard * sizeof *w);
            w[c->n_wildcard++] = i;
            c->wildcard = w;
            continue;
        }
        struct index_entry *ie = NULL;
        HASH_FIND_PTR(c->by_anchor, &op, ie);
        if (!ie) {
            ie = BPCC_ARENA_NEW(&c->arena, struct index_entry);
            if (!ie) return bpcc_diag_nomem(d);
            ie->op = op;
            reg_oom = 0;
            HASH_ADD_PTR(c->by_anchor, op, ie);
            if (reg_oom) return bpcc_diag_nomem(d);
        }
        if (ie->n == ie->cap) {
            uint32_t cap = ie->cap ? ie->cap * 2 : 4;
            uint32_t *items = BPCC_ARENA_NEWN(&c->arena, uint32_t, cap);
            if (!items) return bpcc_diag_nomem(d);
            if (ie->n) memcpy(items, ie->items, ie->n * sizeof *items);
            ie->items = items;
            ie->cap = cap;
        }
        ie->items[ie->n++] = i;
    }
    return BPCC_OK;
}

/* Candidate entries for an anchor op (interned in the config, or any string): indices in
** matching order. Wildcard-anchored entries are returned separately. */
const uint32_t *bpcc_registry_candidates(const struct bpcc_config *c, const char *op,
                                         uint32_t *n_out)
{
    const char *interned = bpcc_intern_lookup(&c->intern, op);
    struct index_entry *ie = NULL;
    if (interned) HASH_FIND_PTR(c->by_anchor, &interned, ie);
    *n_out = ie ? ie->n : 0;
    return ie ? ie->items : NULL;
}

void bpcc_config_free(struct bpcc_config *c)
{
    if (!c) return;
    HASH_CLEAR(hh, c->by_anchor);
    bpcc_intern_release(&c->intern);
    bpcc_arena_release(&c->arena);
    bpcc_xfree(c);
}

const char *bpcc_config_name(const struct bpcc_config *c) { return c->name ? c->name : ""; }
uint32_t bpcc_config_n_patterns(const struct bpcc_config *c) { return c->n_entries; }

const char *const *bpcc_config_builtin_names(uint32_t *n_out)
{
    static const char *names[32];
    static uint32_t n;
    if (!n) {
        const struct builtin_config *b = bpcc_builtin_configs(&n);
        for (uint32_t i = 0; i < n && i < 32; i++) names[i] = b[i].name;
    }
    *n_out = n;
    return names;
}
