/*
** calibrate.c — feed data: check every batch file against the graph inputs before anything runs,
** run the prepared model on each batch with the interpreter, and store each observer's
** statistics (min_val, max_val) and qparams (scale, zero_point) on its module. Also `bpcc run`:
** one batch, the outputs written to a safetensors file.
*/
#include "../exec/exec.h"

#include <math.h>
#include <stdio.h>

/* What one observer stores, made before anything is stored: its statistics (min_val, max_val,
** histogram) and qparams (scale, zero_point) as tensors, NULL where it has none, in the order
** they are stored. */
enum { ST_MIN, ST_MAX, ST_HIST, ST_SCALE, ST_ZP, ST_N };
static const struct {
    const char *name;
    enum bpcc_tensor_role role;
} stored[ST_N] = {{"min_val", BPCC_TENSOR_BUFFER},
                  {"max_val", BPCC_TENSOR_BUFFER},
                  {"histogram", BPCC_TENSOR_BUFFER},
                  {"scale", BPCC_TENSOR_CONSTANT},
                  {"zero_point", BPCC_TENSOR_CONSTANT}};

struct staged {
    struct bpcc_module *m;
    struct bpcc_tensor *t[ST_N];
};

static enum bpcc_status f32_copy(struct bpcc_graph *g, uint32_t ndim, int64_t n, const float *src, struct bpcc_tensor **out,
                                 struct bpcc_diag *d)
{
    enum bpcc_status s = bpcc_tensor_new_uninit(g, BPCC_DTYPE_F32, ndim, &n, out, d);
    if (!s) memcpy((*out)->data, src, (size_t)n * sizeof(float));
    return s;
}

/* the tensors of observer m, and room on m to store them */
static enum bpcc_status stage_observer(struct bpcc_graph *g, struct bpcc_module *m, const struct obs_state *o,
                                       struct staged *st, struct bpcc_diag *d)
{
    memset(st, 0, sizeof *st);
    st->m = m;
    enum bpcc_status s = BPCC_OK;
    if (o->min && o->max) {
        uint32_t nd = o->per_channel ? 1 : 0;
        s = f32_copy(g, nd, o->n, o->min, &st->t[ST_MIN], d);
        if (!s) s = f32_copy(g, nd, o->n, o->max, &st->t[ST_MAX], d);
    }
    if (!s && o->hist) s = f32_copy(g, 1, o->bins, o->hist, &st->t[ST_HIST], d);
    if (s) return s;
    float *sc;
    double *zp;
    uint32_t n;
    if (bpcc_obs_qparams(o, &sc, &zp, &n)) return bpcc_diag_nomem(d);
    if (n) {
        int64_t dims[1] = {n};
        bool fq = o->spec.qscheme == QS_PER_CHANNEL_AFFINE_FLOAT_QPARAMS;
        s = f32_copy(g, 1, n, sc, &st->t[ST_SCALE], d);
        if (!s) s = bpcc_tensor_new_uninit(g, fq ? BPCC_DTYPE_F32 : BPCC_DTYPE_I64, 1, dims, &st->t[ST_ZP], d);
        if (!s) {
            struct bpcc_tensor *tz = st->t[ST_ZP];
            for (uint32_t i = 0; i < n; i++) {
                if (fq) ((float *)tz->data)[i] = (float)zp[i];
                else ((int64_t *)tz->data)[i] = (int64_t)zp[i];
            }
        }
    }
    bpcc_xfree(sc);
    bpcc_xfree(zp);
    if (s) return s;
    uint32_t k = 0;
    for (int i = 0; i < ST_N; i++) k += st->t[i] != NULL;
    return bpcc_module_reserve_tensors(m, k) ? bpcc_diag_nomem(d) : BPCC_OK;
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
    if (!s) s = bpcc_calibrate_store(g, e, d);
    bpcc_exec_free(e);
    return s;
}

/* All or nothing without a snapshot of the graph (at a million nodes the snapshot took 1.2 s, the
** store 0.1 s): every observer's tensors are made and room to store them reserved first, and only
** then stored, which cannot fail. What a failure leaves is unreferenced arena memory. */
enum bpcc_status bpcc_calibrate_store(struct bpcc_graph *g, const struct bpcc_exec *e, struct bpcc_diag *d)
{
    uint32_t n = bpcc_exec_n_observers(e);
    const char *names[ST_N];
    for (int k = 0; k < ST_N; k++)
        if (!(names[k] = bpcc_graph_intern(g, stored[k].name))) return bpcc_diag_nomem(d);
    struct staged *st = bpcc_malloc((n ? n : 1) * sizeof *st);
    if (!st) return bpcc_diag_nomem(d);
    enum bpcc_status s = BPCC_OK;
    for (uint32_t i = 0; !s && i < n; i++) {
        const struct obs_state *o;
        const struct bpcc_module *m = bpcc_exec_observer_at(e, i, &o);
        s = stage_observer(g, (struct bpcc_module *)m, o, &st[i], d);
    }
    for (uint32_t i = 0; !s && i < n; i++)
        for (int k = 0; k < ST_N; k++)
            if (st[i].t[k]) bpcc_module_put_tensor(st[i].m, names[k], stored[k].role, st[i].t[k]);
    bpcc_xfree(st);
    return s;
}

struct entries {
    char **keys;
    struct bpcc_tensor **ts;
    uint32_t n, cap;
};

/* one tensor of the output file under key `key` (copied) */
static enum bpcc_status push(struct entries *e, const char *key, struct bpcc_tensor *t, struct bpcc_diag *d)
{
    if (e->n == e->cap) {
        uint32_t c = e->cap ? e->cap * 2 : 8;
        char **k2 = bpcc_realloc(e->keys, c * sizeof *k2);
        if (!k2) return bpcc_diag_nomem(d);
        e->keys = k2;
        struct bpcc_tensor **t2 = bpcc_realloc(e->ts, c * sizeof *t2);
        if (!t2) return bpcc_diag_nomem(d);
        e->ts = t2;
        e->cap = c;
    }
    if (!(e->keys[e->n] = bpcc_strdup(key))) return bpcc_diag_nomem(d);
    e->ts[e->n++] = t;
    return BPCC_OK;
}

/* A quantized output as batches hold quantized inputs (docs/FORMAT.md): its integer values under
** `key`, and `<key>.scale`, `<key>.zero_point` and, per channel, `<key>.axis` beside them */
static enum bpcc_status push_quantized(struct bpcc_graph *scratch, struct entries *e, const char *key,
                                       const struct xtensor *x, struct bpcc_diag *d)
{
    enum bpcc_dtype carrier = bpcc_dtype_carrier(x->qdtype);
    int64_t n = x->qaxis < 0 ? 1 : x->dims[x->qaxis];
    struct bpcc_tensor *t, *ts, *tz, *ta = NULL;
    enum bpcc_status s = bpcc_tensor_new(scratch, carrier, x->ndim, x->dims, &t, d);
    if (!s) s = bpcc_tensor_new(scratch, BPCC_DTYPE_F32, x->qaxis < 0 ? 0 : 1, &n, &ts, d);
    if (!s) s = bpcc_tensor_new(scratch, BPCC_DTYPE_I64, x->qaxis < 0 ? 0 : 1, &n, &tz, d);
    if (!s && x->qaxis >= 0) s = bpcc_tensor_new(scratch, BPCC_DTYPE_I64, 0, NULL, &ta, d);
    if (s) return s;
    for (uint64_t i = 0; i < x->numel; i++) {
        if (carrier == BPCC_DTYPE_U8) ((uint8_t *)t->data)[i] = (uint8_t)x->data[i];
        else if (carrier == BPCC_DTYPE_I8) ((int8_t *)t->data)[i] = (int8_t)x->data[i];
        else ((int32_t *)t->data)[i] = (int32_t)x->data[i];
    }
    memcpy(ts->data, x->qscale, (size_t)n * sizeof(float));
    memcpy(tz->data, x->qzp, (size_t)n * sizeof(int64_t));
    if (ta) *(int64_t *)ta->data = x->qaxis;
    static const char *const sfx[] = {"", ".scale", ".zero_point", ".axis"};
    struct bpcc_tensor *parts[] = {t, ts, tz, ta};
    for (int i = 0; i < 4 && !s && parts[i]; i++) {
        char k[1100];
        snprintf(k, sizeof k, "%s%s", key, sfx[i]);
        s = push(e, k, parts[i], d);
    }
    return s;
}

/* the output value's tensors under "output" / "output.<i>" / "output.<key>" (nested:
** "output.<i>.<j>"), as the bridge names them */
static enum bpcc_status collect(struct bpcc_graph *scratch, const struct xval *v, const char *prefix, struct entries *e,
                                struct bpcc_diag *d)
{
    if (v->k == XV_SEQ || v->k == XV_DICT) {
        bool dict = v->k == XV_DICT;
        for (uint32_t i = dict; i < v->u.seq.n; i += 1 + dict) {
            char p[1024];
            int len = dict ? snprintf(p, sizeof p, "%s.%s", prefix, v->u.seq.items[i - 1].u.s)
                           : snprintf(p, sizeof p, "%s.%u", prefix, i);
            if (len < 0 || (size_t)len >= sizeof p)
                return bpcc_diag_error(d, BPCC_ERR_LIMIT, NULL, 0, 0, "an output name is longer than %zu bytes", sizeof p - 1);
            enum bpcc_status s = collect(scratch, &v->u.seq.items[i], p, e, d);
            if (s) return s;
        }
        return BPCC_OK;
    }
    if (v->k != XV_TENSOR) return BPCC_OK;
    if (v->u.t->qdtype != BPCC_DTYPE_NONE) return push_quantized(scratch, e, prefix, v->u.t, d);
    struct bpcc_tensor *t;
    enum bpcc_status s = bpcc_tensor_new(scratch, BPCC_DTYPE_F32, v->u.t->ndim, v->u.t->dims, &t, d);
    if (s) return s;
    memcpy(t->data, v->u.t->data, v->u.t->numel * sizeof(float));
    return push(e, prefix, t, d);
}

/* The output's names are its places joined by '.', so a dict key with a dot in it can name what
** another place names ({a: (x, y), "a.0": z}; a quantized `a` beside a key "a.scale"): the file
** would hold a key twice, which no safetensors reader (bpcc's included) takes. An error at the
** output node naming the key, before anything is written. */
static enum bpcc_status unique_names(const struct bpcc_graph *g, const struct bpcc_node *o, const struct entries *e,
                                     struct bpcc_diag *d)
{
    struct bpcc_strmap seen = {0};
    enum bpcc_status s = BPCC_OK;
    for (uint32_t i = 0; i < e->n && !s; i++) {
        size_t n = strlen(e->keys[i]);
        bool added;
        if (!bpcc_strmap_get_or_add(&seen, e->keys[i], n, bpcc_str_hash(e->keys[i], n), &added)) {
            s = bpcc_diag_nomem(d);
        } else if (!added) {
            s = bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, o ? o->src_line : 0, o ? o->src_col : 0,
                                "two of the output's tensors would be written under one name, '%s'", e->keys[i]);
            bpcc_diag_note(d, 0, 0,
                           "outputs are named by their place: 'output', then '.<position>' in a tuple or list and "
                           "'.<key>' in a dict, and '.scale', '.zero_point', '.axis' beside a quantized tensor; "
                           "a dict key with a dot in it can name another place: rename it");
        }
    }
    bpcc_strmap_release(&seen);
    return s;
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
    struct entries out_e = {0};
    const struct bpcc_node *o = bpcc_graph_output(g); /* where the output's errors point */
    if (!s) s = collect(scratch, &out, "output", &out_e, d);
    if (!s && !out_e.n)
        s = bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, o ? o->src_line : 0, o ? o->src_col : 0,
                            "the model's output holds no tensor: nothing to write");
    if (!s) s = unique_names(g, o, &out_e, d);
    bpcc_xval_release(&out);
    if (!s) {
        struct bpcc_atomic_file af;
        s = bpcc_atomic_open(&af, out_path, 0, d);
        if (!s) {
            s = bpcc_safetensors_write(af.fp, out_path, (const char *const *)out_e.keys,
                                       (const struct bpcc_tensor *const *)out_e.ts, out_e.n, d);
            if (s) bpcc_atomic_abort(&af);
            else s = bpcc_atomic_commit(&af, d);
        }
    }
    for (uint32_t i = 0; i < out_e.n; i++) bpcc_xfree(out_e.keys[i]);
    bpcc_xfree(out_e.keys);
    bpcc_xfree(out_e.ts);
    if (scratch) bpcc_graph_free(scratch);
    return s;
}

/* the output tensors of a value, flattened in order; false when out of memory */
static bool sq_accumulate(const struct xval *f, const struct xval *q, double *sig, double *noise, bool *shape_ok)
{
    if ((f->k == XV_SEQ || f->k == XV_DICT) && q->k == f->k && f->u.seq.n == q->u.seq.n) {
        for (uint32_t i = 0; i < f->u.seq.n; i++)
            if (!sq_accumulate(&f->u.seq.items[i], &q->u.seq.items[i], sig, noise, shape_ok)) return false;
        return true;
    }
    if (f->k != XV_TENSOR || q->k != XV_TENSOR) return true;
    if (f->u.t->numel != q->u.t->numel) {
        *shape_ok = false;
        return true;
    }
    /* a quantized output (prepared with its output quantized) compared as its values */
    struct xtensor *dq;
    const float *qd = bpcc_xtensor_values(q->u.t, &dq);
    if (!qd) return false;
    for (uint64_t i = 0; i < f->u.t->numel; i++) {
        double a = f->u.t->data[i], e = a - qd[i];
        *sig += a * a;
        *noise += e * e;
    }
    bpcc_xtensor_free(dq);
    return true;
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
        if (!s && !sq_accumulate(&of, &oq, &sig, &noise, &shape_ok)) s = bpcc_diag_nomem(d);
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
