/*
** ymem.h — memory for yajl, the streaming JSON parser and generator behind safetensors headers
** (a header is the whole index of a model's weights: a DOM of it cost ~17k instructions per
** tensor, the event parser a tenth of that).
**
** yajl does not check its allocations, so it never sees a NULL: an allocation that fails jumps
** to `oom` (set with setjmp by the caller around its yajl calls), and the caller then drops the
** handle unused and calls bpcc_ymem_release, which frees every block yajl still held.
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

BPCC_INTERNAL void bpcc_ymem_init(struct bpcc_ymem *m);
/* free every block still allocated (after a jump to oom, or instead of yajl's own free) */
BPCC_INTERNAL void bpcc_ymem_release(struct bpcc_ymem *m);

#endif
