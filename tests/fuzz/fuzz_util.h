/* fuzz_util.h — shared by the fuzz targets that execute graphs: data for a parsed graph's
** declared tensors (parsed graphs have none bound) and inputs from the placeholders' traced shapes. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include "bpcc.h"
#include "exec/exec.h"

#include <stdio.h>
#include <string.h>

/* small declared tensors get data (float ones a ramp), so that the layers run */
static void fuzz_bind_tensors(struct bpcc_graph *g)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    for (uint32_t i = 0; i < bpcc_graph_n_modules(g); i++) {
        struct bpcc_module *m = bpcc_graph_module(g, i);
        for (uint32_t k = 0; k < bpcc_module_n_tensors(m); k++) {
            const char *name;
            enum bpcc_tensor_role role;
            struct bpcc_tensor *t = bpcc_module_tensor_at(m, k, &name, &role);
            if (bpcc_tensor_data(t)) continue;
            uint64_t numel = 1;
            for (uint32_t j = 0; j < bpcc_tensor_ndim(t); j++) {
                uint64_t dj = (uint64_t)bpcc_tensor_dims(t)[j];
                numel = dj && numel > (1u << 18) / dj ? (1u << 18) + 1 : numel * dj;
            }
            if (numel > (1u << 18)) continue;
            struct bpcc_tensor *nt;
            if (bpcc_tensor_new(g, bpcc_tensor_dtype(t), bpcc_tensor_ndim(t), bpcc_tensor_dims(t), &nt, &d)) continue;
            if (bpcc_tensor_dtype(nt) == BPCC_DTYPE_F32)
                for (uint64_t j = 0; j < bpcc_tensor_numel(nt); j++) ((float *)bpcc_tensor_data(nt))[j] = (float)(j % 5) / 4.0f + 0.25f;
            char key[256];
            snprintf(key, sizeof key, "%s", name);
            bpcc_module_set_tensor(m, key, role, nt, &d);
        }
    }
}

/* one input per placeholder (at most 8) of its traced shape, each dimension clamped to [0, 64] */
static uint32_t fuzz_inputs(const struct bpcc_graph *g, struct xval *in)
{
    uint32_t n = 0;
    for (const struct bpcc_node *p = bpcc_graph_first(g); p && n < 8; p = bpcc_node_next(p)) {
        if (bpcc_node_kind(p) != BPCC_NODE_PLACEHOLDER) continue;
        const struct bpcc_value *m = bpcc_node_meta(p);
        int64_t dims[BPCC_MAX_DIMS] = {4};
        uint32_t nd = 1;
        if (m->kind == BPCC_VAL_TTYPE && m->n <= BPCC_MAX_DIMS) {
            nd = m->n;
            for (uint32_t i = 0; i < nd; i++) dims[i] = m->u.ttype.dims[i] < 0 ? 0 : m->u.ttype.dims[i] > 64 ? 64 : m->u.ttype.dims[i];
        }
        struct xtensor *t = bpcc_xtensor_new(nd, dims);
        if (!t) break;
        for (uint64_t i = 0; i < t->numel; i++) t->data[i] = (float)((int)(i * 7 % 13) - 6) / 4.0f;
        in[n++] = (struct xval){.k = XV_TENSOR, .u.t = t};
    }
    return n;
}

/* two runs of g on fuzz_inputs; the interpreter kept in *keep (for its observers) when not NULL */
static enum bpcc_status fuzz_run_twice(const struct bpcc_graph *g, struct bpcc_exec **keep, struct bpcc_diag *d)
{
    struct xval in[8];
    uint32_t n = fuzz_inputs(g, in);
    struct bpcc_exec *e;
    enum bpcc_status s = bpcc_exec_new(g, 1, &e, d);
    /* twice: some kernels change path from a module's second run on (Winograd's kept weights) */
    for (int run = 0; run < 2 && !s; run++) {
        struct xval out = {0};
        s = bpcc_exec_run(e, in, n, &out, d);
        bpcc_xval_release(&out);
    }
    for (uint32_t i = 0; i < n; i++) bpcc_xval_release(&in[i]);
    if (!s && keep) *keep = e;
    else bpcc_exec_free(e);
    return s;
}

#endif
