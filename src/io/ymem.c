/*
** ymem.c — yajl's allocator: bpcc's allocation hook, every live block on a list so that a failed
** allocation can jump out of yajl and the caller still frees everything (see ymem.h).
*/
#include "ymem.h"

#include <stddef.h>

struct ymem_block {
    struct ymem_block *prev, *next;
    max_align_t align[]; /* the caller's bytes */
};

static void ymem_link(struct bpcc_ymem *m, struct ymem_block *b)
{
    b->prev = NULL;
    b->next = m->live;
    if (m->live) m->live->prev = b;
    m->live = b;
}

static void ymem_unlink(struct bpcc_ymem *m, struct ymem_block *b)
{
    if (b->prev) b->prev->next = b->next;
    else m->live = b->next;
    if (b->next) b->next->prev = b->prev;
}

static struct ymem_block *block_of(void *p) { return (struct ymem_block *)((char *)p - offsetof(struct ymem_block, align)); }

static void *y_malloc(void *ctx, size_t n)
{
    struct bpcc_ymem *m = ctx;
    struct ymem_block *b = n <= SIZE_MAX - sizeof *b ? bpcc_malloc(sizeof *b + n) : NULL;
    if (!b) longjmp(m->oom, 1);
    ymem_link(m, b);
    return b->align;
}

static void y_free(void *ctx, void *p)
{
    if (!p) return;
    struct ymem_block *b = block_of(p);
    ymem_unlink(ctx, b);
    bpcc_xfree(b);
}

static void *y_realloc(void *ctx, void *p, size_t n)
{
    struct bpcc_ymem *m = ctx;
    if (!p) return y_malloc(ctx, n);
    struct ymem_block *b = block_of(p);
    ymem_unlink(m, b);
    struct ymem_block *nb = n <= SIZE_MAX - sizeof *b ? bpcc_realloc(b, sizeof *b + n) : NULL;
    ymem_link(m, nb ? nb : b); /* a failed realloc leaves the old block, still yajl's */
    if (!nb) longjmp(m->oom, 1);
    return nb->align;
}

static void release(struct bpcc_ymem *m)
{
    while (m->live) {
        struct ymem_block *b = m->live;
        m->live = b->next;
        bpcc_xfree(b);
    }
}

enum bpcc_status bpcc_ymem_run(struct bpcc_ymem *m, enum bpcc_status (*fn)(struct bpcc_ymem *m, void *ctx), void *ctx,
                               struct bpcc_diag *d)
{
    m->funcs = (yajl_alloc_funcs){y_malloc, y_realloc, y_free, m};
    m->live = NULL;
    if (setjmp(m->oom)) {
        release(m);
        return bpcc_diag_nomem(d);
    }
    enum bpcc_status s = fn(m, ctx);
    release(m);
    return s;
}
