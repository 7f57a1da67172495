/*
** ymem.h — memory for yajl, the streaming JSON parser and generator behind safetensors headers
** (a header is the whole index of a model's weights: a DOM of it cost ~17k instructions per
** tensor, the event parser a tenth of that).
**
** yajl does not check its allocations, so it never sees a NULL: bpcc_ymem_run calls a function
** that uses yajl with this allocator, and an allocation that fails jumps back out of it (the
** yajl handle is then dropped unused); every block yajl still holds is freed either way.
*/
#ifndef BPCC_YMEM_H
#define BPCC_YMEM_H

#include "../core/core.h"

#include <setjmp.h>
#include <yajl/yajl_common.h>

struct ymem_block;

struct bpcc_ymem {
    yajl_alloc_funcs funcs; /* hand &funcs to yajl_alloc / yajl_gen_alloc */
    struct ymem_block *live;
    jmp_buf oom;
};

/* fn(m, ctx), with m's allocator set up for it; fn's status, or BPCC_ERR_NOMEM (reported to d)
** when one of yajl's allocations failed. m belongs to the caller (it must outlive the jump). */
BPCC_INTERNAL enum bpcc_status bpcc_ymem_run(struct bpcc_ymem *m, enum bpcc_status (*fn)(struct bpcc_ymem *m, void *ctx),
                                             void *ctx, struct bpcc_diag *d);

#endif
