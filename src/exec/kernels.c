/*
** kernels.c — the kernel index: every kernel file's table of ops (exec.h lists them), indexed by
** the op's hash and kind when the library is loaded, so that threads only ever read it. The
** interpreter asks once per node per run; scanning the tables took ~100 string compares a node (a
** third of calibration's instructions on graphs of small tensors).
*/
#include "exec.h"

static const struct xop *const tables[] = {bpcc_elementwise_ops, bpcc_shape_ops,     bpcc_reduce_ops,
                                           bpcc_quantize_ops,    bpcc_einsum_ops,    bpcc_nn_ops,
                                           bpcc_resize_ops,      bpcc_attention_ops, bpcc_recurrent_ops,
                                           bpcc_swin_ops,        bpcc_mvit_ops,      bpcc_distance_ops};

/* open addressing, a slot holding the op's entry (NULL = empty); at most half full, which
** check_exec's test of the tables holds */
#define KINDEX_SLOTS 2048u
static const struct xop *kindex[KINDEX_SLOTS];

/* the kernels that take quantized tensors: dequantize's, and size's and getattr's (a quantized
** tensor's shape) */
static xkernel quantized[3];

static uint32_t khash(char kind, const char *op) { return bpcc_str_hash(op, strlen(op)) * 31u + (uint32_t)kind; }

__attribute__((constructor)) static void kindex_init(void)
{
    uint32_t n = 0;
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
        for (const struct xop *e = tables[t]; e->op && n < KINDEX_SLOTS - 1; e++, n++) {
            uint32_t h = khash(e->kind, e->op) & (KINDEX_SLOTS - 1);
            while (kindex[h]) h = (h + 1) & (KINDEX_SLOTS - 1);
            kindex[h] = e;
        }
    quantized[0] = bpcc_exec_kernel(BPCC_NODE_CALL_METHOD, "dequantize");
    quantized[1] = bpcc_exec_kernel(BPCC_NODE_CALL_METHOD, "size");
    quantized[2] = bpcc_exec_kernel(BPCC_NODE_CALL_FUNCTION, "getattr");
}

xkernel bpcc_exec_kernel(enum bpcc_node_kind kind, const char *op)
{
    char k = kind == BPCC_NODE_CALL_MODULE ? 'm' : kind == BPCC_NODE_CALL_FUNCTION ? 'f' : 't';
    for (uint32_t h = khash(k, op) & (KINDEX_SLOTS - 1); kindex[h]; h = (h + 1) & (KINDEX_SLOTS - 1))
        if (kindex[h]->kind == k && !strcmp(kindex[h]->op, op)) return kindex[h]->fn;
    return NULL;
}

bool bpcc_exec_kernel_takes_quantized(xkernel k) { return k && (k == quantized[0] || k == quantized[1] || k == quantized[2]); }
