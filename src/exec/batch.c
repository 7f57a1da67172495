/*
** batch.c — input batches: a safetensors file with one tensor per graph input, named after it,
** checked against the shapes the model was traced with, and loaded as interpreter values (float32;
** integers and bools as floats, exact below 2^24, bools marked).
*/
#include "exec.h"

#include <stdio.h>

void bpcc_batch_release(struct xbatch *b)
{
    for (uint32_t i = 0; b->inputs && i < b->n; i++) bpcc_xval_release(&b->inputs[i]);
    bpcc_xfree(b->inputs);
    bpcc_safetensors_close(b->st);
    memset(b, 0, sizeof *b);
}

/* Open a batch and check it: one float32, integer or bool tensor per graph input, named after it, of the kind (float,
** or integers and bools) and the shape the model was traced with (when it records them; the batch dimension may
** differ). */
enum bpcc_status bpcc_batch_open(const struct bpcc_graph *g, const char *path, bool load, struct xbatch *b,
                                struct bpcc_diag *d)
{
    memset(b, 0, sizeof *b);
    enum bpcc_status s = bpcc_safetensors_open(path, &b->st, d);
    if (s) return s;
    /* one walk over the nodes (a big graph's list is a cache miss per node): the inputs array
    ** grows as placeholders are found */
    uint32_t k = 0, cap = 0;
    for (const struct bpcc_node *p = g->first; p && !s; p = p->next) {
        if (p->kind != BPCC_NODE_PLACEHOLDER) continue;
        uint32_t i = bpcc_safetensors_find(b->st, p->target);
        if (i == UINT32_MAX) {
            s = bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "no tensor '%s' for the model input '%s' (%s:%u)", p->target,
                                p->name, g->source_file ? g->source_file : "model", p->src_line);
            break;
        }
        const char *name;
        enum bpcc_dtype dt;
        uint32_t nd;
        const int64_t *dims;
        const void *data;
        size_t nbytes;
        s = bpcc_safetensors_get(b->st, i, &name, &dt, &nd, &dims, &data, &nbytes);
        if (s) break;
        if (dt != BPCC_DTYPE_F32 && !bpcc_dtype_is_integral(dt)) {
            s = bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "tensor '%s' is %s; the model input '%s' takes float32 (or "
                                "integers or bools: token ids, masks)", name, bpcc_dtype_name(dt), p->name);
            break;
        }
        const struct bpcc_value *m = bpcc_node_meta(p);
        /* the kind the model was traced with: float values for a float input (an image's bytes
        ** would calibrate on 0..255 where the model takes normalized values, and PyTorch's
        ** convolutions refuse them), integers or bools for token ids and masks */
        if (m->kind == BPCC_VAL_TTYPE && bpcc_dtype_is_integral(m->u.ttype.dtype) != bpcc_dtype_is_integral(dt) &&
            (m->u.ttype.dtype == BPCC_DTYPE_F32 || bpcc_dtype_is_integral(m->u.ttype.dtype))) {
            s = bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "tensor '%s' is %s; the model input '%s' was traced as %s: "
                                "give it %s", name, bpcc_dtype_name(dt), p->name, bpcc_dtype_name(m->u.ttype.dtype),
                                bpcc_dtype_is_integral(dt) ? "float32 values, as the model takes them (normalized, not raw bytes)"
                                                           : "integers or bools");
            break;
        }
        if (m->kind == BPCC_VAL_TTYPE) {
            bool ok = m->n == nd;
            for (uint32_t j = 1; ok && j < nd; j++) ok = m->u.ttype.dims[j] == dims[j];
            if (!ok) {
                char want[128] = "", got[128] = "";
                for (uint32_t j = 0; j < m->n; j++)
                    snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", j ? ", " : "", (long long)m->u.ttype.dims[j]);
                for (uint32_t j = 0; j < nd; j++)
                    snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", j ? ", " : "", (long long)dims[j]);
                s = bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "tensor '%s' has shape [%s]; the model input '%s' was traced "
                                    "as [%s] (only the batch dimension may differ)", name, got, p->name, want);
                break;
            }
        }
        if (load) {
            if (k == cap) {
                uint32_t ncap = cap ? 2 * cap : 4;
                struct xval *in = bpcc_realloc(b->inputs, ncap * sizeof *in);
                if (!in) {
                    s = bpcc_diag_nomem(d);
                    break;
                }
                b->inputs = in;
                cap = ncap;
            }
            struct xtensor *t = bpcc_xtensor_new(nd, dims);
            if (!t) {
                s = bpcc_diag_nomem(d);
                break;
            }
            if (dt == BPCC_DTYPE_F32) memcpy(t->data, data, t->numel * sizeof(float));
            else bpcc_xtensor_from_integers(t, dt, data);
            b->inputs[k] = (struct xval){.k = XV_TENSOR, .u.t = t};
        }
        k++;
    }
    b->n = k;
    if (s) bpcc_batch_release(b);
    return s;
}

