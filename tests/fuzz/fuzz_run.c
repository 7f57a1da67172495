/* libFuzzer target: the reference interpreter on any graph that parses (tensors unbound, so
** weights are missing: kernels must refuse them), with inputs made from the placeholders' traced
** shapes; and the same graph prepared for fbgemm and run through its observers. Nothing may crash. */
#include "bpcc.h"
#include "exec/exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run(struct bpcc_graph *g)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct xval in[8];
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
    struct bpcc_exec *e;
    if (bpcc_exec_new(g, 1, &e, &d) == BPCC_OK) {
        struct xval out = {0};
        if (bpcc_exec_run(e, in, n, &out, &d) == BPCC_OK) bpcc_xval_release(&out);
        bpcc_exec_free(e);
    }
    for (uint32_t i = 0; i < n; i++) bpcc_xval_release(&in[i]);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static struct bpcc_config *c;
    static struct bpcc_qconfig_mapping *q;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    bpcc_exec_max_elements = (uint64_t)1 << 22;
    if (!c && (bpcc_config_load("fbgemm", NULL, &c, &d) || bpcc_qconfig_load("fbgemm", NULL, &q, &d))) abort();
    struct bpcc_graph *g;
    if (bpcc_graph_parse((const char *)data, size, "fuzz.bpcc", &g, &d) != BPCC_OK) return 0;
    /* give small declared tensors data, so that the layers run */
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
    run(g);
    if (bpcc_fuse(g, c, NULL, NULL, &d) == BPCC_OK && bpcc_prepare(g, c, q, NULL, NULL, &d) == BPCC_OK) run(g);
    bpcc_graph_free(g);
    return 0;
}
