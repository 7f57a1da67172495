/*
** calibrate.c — feed data: check every batch file against the graph inputs before anything runs,
** run the prepared model on each batch with the interpreter, and store each observer's
** statistics (min_val, max_val) and qparams (scale, zero_point) on its module. Also `bpcc run`:
** one batch, the outputs written to a safetensors file.
*/
#include "../exec/exec.h"

#include <math.h>
#include <stdio.h>

/* the statistics and qparams of one observer, as module tensors */
static enum bpcc_status store_observer(struct bpcc_graph *g, struct bpcc_module *m, const struct obs_state *o,
                                       struct bpcc_diag *d)
{
    enum bpcc_status s = BPCC_OK;
    if (o->min && o->max) {
        struct bpcc_tensor *tmin, *tmax;
        int64_t dims[1] = {o->n};
        uint32_t nd = o->per_channel ? 1 : 0;
        s = bpcc_tensor_new(g, BPCC_DTYPE_F32, nd, dims, &tmin, d);
        if (!s) s = bpcc_tensor_new(g, BPCC_DTYPE_F32, nd, dims, &tmax, d);
        if (s) return s;
        memcpy(tmin->data, o->min, o->n * sizeof(float));
        memcpy(tmax->data, o->max, o->n * sizeof(float));
        s = bpcc_module_set_tensor(m, "min_val", BPCC_TENSOR_BUFFER, tmin, d);
        if (!s) s = bpcc_module_set_tensor(m, "max_val", BPCC_TENSOR_BUFFER, tmax, d);
        if (s) return s;
    }
    if (o->hist) {
        struct bpcc_tensor *th;
        int64_t dims[1] = {o->bins};
        s = bpcc_tensor_new(g, BPCC_DTYPE_F32, 1, dims, &th, d);
        if (s) return s;
        memcpy(th->data, o->hist, o->bins * sizeof(float));
        s = bpcc_module_set_tensor(m, "histogram", BPCC_TENSOR_BUFFER, th, d);
        if (s) return s;
    }
    float *sc;
    double *zp;
    uint32_t n;
    if (bpcc_obs_qparams(o, &sc, &zp, &n)) return bpcc_diag_nomem(d);
    if (n) {
        int64_t dims[1] = {n};
        bool fq = o->spec.qscheme == QS_PER_CHANNEL_AFFINE_FLOAT_QPARAMS;
        struct bpcc_tensor *ts, *tz;
        s = bpcc_tensor_new(g, BPCC_DTYPE_F32, 1, dims, &ts, d);
        if (!s) s = bpcc_tensor_new(g, fq ? BPCC_DTYPE_F32 : BPCC_DTYPE_I64, 1, dims, &tz, d);
        if (!s) {
            memcpy(ts->data, sc, n * sizeof(float));
            for (uint32_t i = 0; i < n; i++) {
                if (fq) ((float *)tz->data)[i] = (float)zp[i];
                else ((int64_t *)tz->data)[i] = (int64_t)zp[i];
            }
            s = bpcc_module_set_tensor(m, "scale", BPCC_TENSOR_CONSTANT, ts, d);
            if (!s) s = bpcc_module_set_tensor(m, "zero_point", BPCC_TENSOR_CONSTANT, tz, d);
        }
    }
    bpcc_xfree(sc);
    bpcc_xfree(zp);
    return s;
}

enum bpcc_status bpcc_calibrate(struct bpcc_graph *g, const char *const *batches, uint32_t n_batches,
                                const struct bpcc_calibrate_options *o, struct bpcc_diag *d)
{
    if (!n_batches) return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "no calibration data");
    /* all batches are checked before anything runs */
    enum bpcc_status s = BPCC_OK;
    for (uint32_t i = 0; i < n_batches; i++) {
        struct xbatch b;
        enum bpcc_status si = bpcc_batch_open(g, batches[i], false, &b, d);
        if (si) s = si;
        else bpcc_batch_release(&b);
    }
    if (s) return s;
    struct bpcc_exec *e;
    s = bpcc_exec_new(g, o ? o->threads : 1, &e, d);
    if (s) return s;
    for (uint32_t i = 0; i < n_batches && !s; i++) {
        struct xbatch b;
        s = bpcc_batch_open(g, batches[i], true, &b, d);
        if (!s) s = bpcc_exec_run(e, b.inputs, b.n, NULL, d);
        bpcc_batch_release(&b);
        if (!s && o && o->progress) o->progress(i + 1, n_batches, o->progress_ud);
    }
    struct bpcc_graph *snap = NULL; /* storing the qparams leaves g as it was when it fails */
    if (!s) s = bpcc_graph_snapshot(g, &snap, d);
    if (!s) s = bpcc_graph_end_pass(g, snap, bpcc_calibrate_store(g, e, d));
    bpcc_exec_free(e);
    return s;
}

enum bpcc_status bpcc_calibrate_store(struct bpcc_graph *g, const struct bpcc_exec *e, struct bpcc_diag *d)
{
    enum bpcc_status s = BPCC_OK;
    for (uint32_t i = 0; !s && i < bpcc_exec_n_observers(e); i++) {
        const struct obs_state *st;
        const struct bpcc_module *m = bpcc_exec_observer_at(e, i, &st);
        s = store_observer(g, (struct bpcc_module *)m, st, d);
    }
    return s;
}

/* the output value's tensors under "output" / "output.<i>" / "output.<key>" (nested:
** "output.<i>.<j>"), as the bridge names them */
static enum bpcc_status collect(struct bpcc_graph *scratch, const struct xval *v, const char *prefix, char ***keys,
                                struct bpcc_tensor ***ts, uint32_t *n, uint32_t *cap, struct bpcc_diag *d)
{
    if (v->k == XV_SEQ || v->k == XV_DICT) {
        bool dict = v->k == XV_DICT;
        for (uint32_t i = dict; i < v->u.seq.n; i += 1 + dict) {
            char p[1024];
            int len = dict ? snprintf(p, sizeof p, "%s.%s", prefix, v->u.seq.items[i - 1].u.s)
                           : snprintf(p, sizeof p, "%s.%u", prefix, i);
            if (len < 0 || (size_t)len >= sizeof p)
                return bpcc_diag_error(d, BPCC_ERR_LIMIT, NULL, 0, 0, "an output name is longer than %zu bytes", sizeof p - 1);
            enum bpcc_status s = collect(scratch, &v->u.seq.items[i], p, keys, ts, n, cap, d);
            if (s) return s;
        }
        return BPCC_OK;
    }
    if (v->k != XV_TENSOR) return BPCC_OK;
    if (*n == *cap) {
        uint32_t c = *cap ? *cap * 2 : 8;
        char **k2 = bpcc_realloc(*keys, c * sizeof *k2);
        if (!k2) return bpcc_diag_nomem(d);
        *keys = k2;
        struct bpcc_tensor **t2 = bpcc_realloc(*ts, c * sizeof *t2);
        if (!t2) return bpcc_diag_nomem(d);
        *ts = t2;
        *cap = c;
    }
    struct bpcc_tensor *t;
    enum bpcc_status s = bpcc_tensor_new(scratch, BPCC_DTYPE_F32, v->u.t->ndim, v->u.t->dims, &t, d);
    if (s) return s;
    memcpy(t->data, v->u.t->data, v->u.t->numel * sizeof(float));
    (*keys)[*n] = bpcc_strdup(prefix);
    if (!(*keys)[*n]) return bpcc_diag_nomem(d);
    (*ts)[(*n)++] = t;
    return BPCC_OK;
}

enum bpcc_status bpcc_run(const struct bpcc_graph *g, const char *batch, const char *out_path, int threads,
                          struct bpcc_diag *d)
{
    struct xbatch b;
    enum bpcc_status s = bpcc_batch_open(g, batch, true, &b, d);
    if (s) return s;
    struct bpcc_exec *e;
    s = bpcc_exec_new(g, threads, &e, d);
    struct xval out = {0};
    if (!s) s = bpcc_exec_run(e, b.inputs, b.n, &out, d);
    bpcc_exec_free(e);
    bpcc_batch_release(&b);
    if (s) return s;
    struct bpcc_graph *scratch;
    s = bpcc_graph_new(&scratch, d);
    char **keys = NULL;
    struct bpcc_tensor **ts = NULL;
    uint32_t n = 0, cap = 0;
    if (!s) s = collect(scratch, &out, "output", &keys, &ts, &n, &cap, d);
    if (!s && !n) {
        const struct bpcc_node *o = bpcc_graph_output(g);
        s = bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, o ? o->src_line : 0, o ? o->src_col : 0,
                            "the model's output holds no tensor: nothing to write");
    }
    bpcc_xval_release(&out);
    if (!s) {
        struct bpcc_atomic_file af;
        s = bpcc_atomic_open(&af, out_path, d);
        if (!s) {
            s = bpcc_safetensors_write(af.fp, out_path, (const char *const *)keys, (const struct bpcc_tensor *const *)ts, n, d);
            if (s) bpcc_atomic_abort(&af);
            else s = bpcc_atomic_commit(&af, d);
        }
    }
    for (uint32_t i = 0; i < n; i++) bpcc_xfree(keys[i]);
    bpcc_xfree(keys);
    bpcc_xfree(ts);
    if (scratch) bpcc_graph_free(scratch);
    return s;
}

/* the output tensors of a value, flattened in order */
static void sq_accumulate(const struct xval *f, const struct xval *q, double *sig, double *noise, bool *shape_ok)
{
    if ((f->k == XV_SEQ || f->k == XV_DICT) && q->k == f->k && f->u.seq.n == q->u.seq.n) {
        for (uint32_t i = 0; i < f->u.seq.n; i++) sq_accumulate(&f->u.seq.items[i], &q->u.seq.items[i], sig, noise, shape_ok);
        return;
    }
    if (f->k != XV_TENSOR || q->k != XV_TENSOR) return;
    if (f->u.t->numel != q->u.t->numel) {
        *shape_ok = false;
        return;
    }
    for (uint64_t i = 0; i < f->u.t->numel; i++) {
        double a = f->u.t->data[i], e = a - q->u.t->data[i];
        *sig += a * a;
        *noise += e * e;
    }
}

enum bpcc_status bpcc_sqnr(const struct bpcc_graph *reference, const struct bpcc_graph *g, const char *const *batches,
                           uint32_t n_batches, int threads, double *db_out, struct bpcc_diag *d)
{
    *db_out = 0;
    struct bpcc_exec *ef = NULL, *eq = NULL;
    enum bpcc_status s = bpcc_exec_new(reference, threads, &ef, d);
    if (!s) s = bpcc_exec_new(g, threads, &eq, d);
    double sig = 0, noise = 0;
    bool shape_ok = true;
    for (uint32_t i = 0; !s && i < n_batches; i++) {
        struct xbatch bf, bq;
        s = bpcc_batch_open(reference, batches[i], true, &bf, d);
        if (s) break;
        s = bpcc_batch_open(g, batches[i], true, &bq, d);
        if (s) {
            bpcc_batch_release(&bf);
            break;
        }
        struct xval of = {0}, oq = {0};
        s = bpcc_exec_run(ef, bf.inputs, bf.n, &of, d);
        if (!s) s = bpcc_exec_run(eq, bq.inputs, bq.n, &oq, d);
        if (!s) sq_accumulate(&of, &oq, &sig, &noise, &shape_ok);
        bpcc_xval_release(&of);
        bpcc_xval_release(&oq);
        bpcc_batch_release(&bf);
        bpcc_batch_release(&bq);
    }
    bpcc_exec_free(ef);
    bpcc_exec_free(eq);
    if (s) return s;
    if (!shape_ok) return bpcc_diag_error(d, BPCC_ERR_GRAPH, NULL, 0, 0, "the two models' outputs have different shapes");
    *db_out = noise > 0 ? 10.0 * log10(sig / noise) : INFINITY;
    return BPCC_OK;
}
