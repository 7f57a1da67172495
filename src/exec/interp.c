/*
** interp.c — the reference interpreter: runs a graph node by node on float32 tensors, freeing
** each value after its last user ran; observers observe what passes through them.
*/
#include "exec.h"

#include <math.h>
#include <stdlib.h>

#include <stdarg.h>
#include <stdio.h>

/* {==================== values ==================== */

uint64_t bpcc_exec_max_elements = (uint64_t)1 << 30; /* 4 GiB of float32 per tensor */

struct xtensor *bpcc_xtensor_new(uint32_t ndim, const int64_t *dims)
{
    if (ndim > BPCC_MAX_DIMS) return NULL;
    struct xtensor *t = bpcc_malloc(sizeof *t);
    if (!t) return NULL;
    t->ndim = ndim;
    t->numel = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        if (dims[i] < 0 || (dims[i] && t->numel > UINT64_MAX / 8 / (uint64_t)dims[i])) {
            bpcc_xfree(t);
            return NULL;
        }
        t->dims[i] = dims[i];
        t->numel *= (uint64_t)dims[i];
    }
    if (t->numel > bpcc_exec_max_elements) { /* refuse rather than thrash */
        bpcc_xfree(t);
        return NULL;
    }
    t->data = bpcc_malloc((t->numel ? t->numel : 1) * sizeof(float));
    if (!t->data) {
        bpcc_xfree(t);
        return NULL;
    }
    t->qdtype = BPCC_DTYPE_NONE;
    t->qaxis = -1;
    t->qscale = NULL;
    t->qzp = NULL;
    t->boolean = false;
    return t;
}

void bpcc_xtensor_from_integers(struct xtensor *t, enum bpcc_dtype dt, const void *p)
{
    const unsigned char *b = p; /* a file's data need not be aligned for its type: read bytes */
    for (uint64_t i = 0; i < t->numel; i++) {
        int64_t i64;
        int32_t i32;
        int16_t i16;
        switch (dt) {
        case BPCC_DTYPE_I64: memcpy(&i64, b + 8 * i, 8); t->data[i] = (float)i64; break;
        case BPCC_DTYPE_I32: memcpy(&i32, b + 4 * i, 4); t->data[i] = (float)i32; break;
        case BPCC_DTYPE_I16: memcpy(&i16, b + 2 * i, 2); t->data[i] = (float)i16; break;
        case BPCC_DTYPE_I8: t->data[i] = (float)(int8_t)b[i]; break;
        case BPCC_DTYPE_BOOL: t->data[i] = (float)(b[i] != 0); break;
        default: t->data[i] = (float)b[i]; break; /* U8 */
        }
    }
    t->boolean = dt == BPCC_DTYPE_BOOL;
}

void bpcc_xtensor_free(struct xtensor *t)
{
    if (!t) return;
    bpcc_xfree(t->qscale);
    bpcc_xfree(t->qzp);
    bpcc_xfree(t->data);
    bpcc_xfree(t);
}

void bpcc_xval_release(struct xval *v)
{
    if (v->k == XV_TENSOR) bpcc_xtensor_free(v->u.t);
    else if (v->k == XV_SEQ || v->k == XV_SLICE || v->k == XV_DICT) {
        for (uint32_t i = 0; i < v->u.seq.n; i++) bpcc_xval_release(&v->u.seq.items[i]);
        bpcc_xfree(v->u.seq.items);
    }
    v->k = XV_NONE;
}

enum bpcc_status bpcc_xval_copy(const struct xval *src, struct xval *dst)
{
    *dst = *src;
    dst->borrowed = false;
    if (src->k == XV_TENSOR) {
        dst->u.t = bpcc_xtensor_new(src->u.t->ndim, src->u.t->dims);
        if (!dst->u.t) {
            dst->k = XV_NONE;
            return BPCC_ERR_NOMEM;
        }
        memcpy(dst->u.t->data, src->u.t->data, src->u.t->numel * sizeof(float));
        dst->u.t->boolean = src->u.t->boolean;
        const struct xtensor *st = src->u.t;
        if (st->qdtype != BPCC_DTYPE_NONE) {
            uint32_t nq = st->qaxis < 0 ? 1 : (uint32_t)st->dims[st->qaxis];
            struct xtensor *dt = dst->u.t;
            dt->qdtype = st->qdtype;
            dt->qaxis = st->qaxis;
            dt->qscale = bpcc_malloc(nq * sizeof *dt->qscale);
            dt->qzp = bpcc_malloc(nq * sizeof *dt->qzp);
            if (!dt->qscale || !dt->qzp) {
                bpcc_xval_release(dst);
                return BPCC_ERR_NOMEM;
            }
            memcpy(dt->qscale, st->qscale, nq * sizeof *dt->qscale);
            memcpy(dt->qzp, st->qzp, nq * sizeof *dt->qzp);
        }
    } else if (src->k == XV_SEQ || src->k == XV_SLICE || src->k == XV_DICT) {
        uint32_t n = src->u.seq.n;
        dst->u.seq.items = bpcc_malloc((n ? n : 1) * sizeof *dst->u.seq.items);
        if (!dst->u.seq.items) {
            dst->k = XV_NONE;
            return BPCC_ERR_NOMEM;
        }
        for (uint32_t i = 0; i < n; i++) {
            if (bpcc_xval_copy(&src->u.seq.items[i], &dst->u.seq.items[i])) {
                dst->u.seq.n = i;
                bpcc_xval_release(dst);
                return BPCC_ERR_NOMEM;
            }
        }
    }
    return BPCC_OK;
}

/* }================================================ */

/* {==================== argument helpers ==================== */

enum bpcc_status bpcc_xerr(const struct xargs *a, const char *fmt, ...)
{
    char msg[BPCC_DIAG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const struct bpcc_node *n = a->node;
    const char *op = n->kind == BPCC_NODE_CALL_MODULE && a->module ? a->module->type : n->target;
    return bpcc_diag_error(a->d, BPCC_ERR_GRAPH, n->graph->source_file, n->src_line, n->src_col, "node '%s' (%s): %s",
                           n->name, op, msg);
}

const struct xval *bpcc_xarg(const struct xargs *a, uint32_t i, const char *name)
{
    if (i < a->n) return &a->pos[i];
    for (uint32_t k = 0; name && k < a->n_kw; k++)
        if (!strcmp(a->kw_names[k], name)) return &a->kw[k];
    return NULL;
}

bool bpcc_xarg_tensor(const struct xargs *a, uint32_t i, const char *name, const struct xtensor **out)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    if (!v || v->k != XV_TENSOR) {
        bpcc_xerr(a, "argument %u%s%s must be a tensor", i, name ? " / " : "", name ? name : "");
        return false;
    }
    *out = v->u.t;
    return true;
}

bool bpcc_xarg_int(const struct xargs *a, uint32_t i, const char *name, int64_t dflt, int64_t *out)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    if (!v || v->k == XV_NONE) {
        *out = dflt;
        return true;
    }
    if (v->k == XV_INT) *out = v->u.i;
    else if (v->k == XV_BOOL) *out = v->u.b;
    else if (v->k == XV_SEQ && v->u.seq.n == 1 && v->u.seq.items[0].k == XV_INT) *out = v->u.seq.items[0].u.i;
    else {
        bpcc_xerr(a, "argument %s must be an int", name ? name : "?");
        return false;
    }
    return true;
}

bool bpcc_xarg_float(const struct xargs *a, uint32_t i, const char *name, double dflt, double *out)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    if (!v || v->k == XV_NONE) *out = dflt;
    else if (v->k == XV_FLOAT) *out = v->u.f;
    else if (v->k == XV_INT) *out = (double)v->u.i;
    else if (v->k == XV_BOOL) *out = v->u.b;
    else {
        bpcc_xerr(a, "argument %s must be a number", name ? name : "?");
        return false;
    }
    return true;
}

bool bpcc_xarg_bool(const struct xargs *a, uint32_t i, const char *name, bool dflt, bool *out)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    if (!v || v->k == XV_NONE) *out = dflt;
    else if (v->k == XV_BOOL) *out = v->u.b;
    else if (v->k == XV_INT) *out = v->u.i != 0;
    else {
        bpcc_xerr(a, "argument %s must be a bool", name ? name : "?");
        return false;
    }
    return true;
}

static bool ints_of(const struct xval *v, uint32_t n_want, int64_t *out, uint32_t *n_out)
{
    if (v->k == XV_INT) {
        for (uint32_t i = 0; i < (n_want ? n_want : 1); i++) out[i] = v->u.i;
        *n_out = n_want ? n_want : 1;
        return true;
    }
    /* out holds n_want ints (BPCC_MAX_DIMS when n_want is 0): nothing is written past them */
    if (v->k != XV_SEQ || v->u.seq.n > BPCC_MAX_DIMS || (n_want && v->u.seq.n != n_want && v->u.seq.n != 1)) return false;
    for (uint32_t i = 0; i < v->u.seq.n; i++) {
        if (v->u.seq.items[i].k != XV_INT) return false;
        out[i] = v->u.seq.items[i].u.i;
    }
    *n_out = v->u.seq.n;
    if (n_want && *n_out == 1 && n_want > 1) {
        for (uint32_t i = 1; i < n_want; i++) out[i] = out[0];
        *n_out = n_want;
    }
    return !n_want || *n_out == n_want;
}

bool bpcc_xarg_required(const struct xargs *a, uint32_t i, const char *name)
{
    if (!bpcc_xarg_absent(a, i, name)) return true;
    bpcc_xerr(a, "argument %s is missing", name ? name : "?");
    return false;
}

bool bpcc_xarg_ints(const struct xargs *a, uint32_t i, const char *name, uint32_t n_want, const int64_t *dflt,
                    int64_t *out, uint32_t *n_out)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    uint32_t dummy;
    if (!n_out) n_out = &dummy;
    if (!v || v->k == XV_NONE) {
        if (!dflt) return bpcc_xarg_required(a, i, name);
        for (uint32_t k = 0; k < n_want; k++) out[k] = dflt[k];
        *n_out = n_want;
        return true;
    }
    if (!ints_of(v, n_want, out, n_out)) {
        bpcc_xerr(a, "argument %s must be %s%u int%s", name ? name : "?", n_want ? "" : "up to ",
                  n_want ? n_want : BPCC_MAX_DIMS, n_want == 1 ? "" : "s");
        return false;
    }
    return true;
}

/* sizes from argument i on: one list or tuple (or the keyword `name`), or the rest of the
** positional arguments as ints (x.repeat(2, 1), x.repeat((2, 1))) */
bool bpcc_xarg_sizes(const struct xargs *a, uint32_t i, const char *name, int64_t *out, uint32_t *n)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    if (v && (v->k == XV_SEQ || i >= a->n)) return bpcc_xarg_ints(a, i, name, 0, NULL, out, n);
    *n = 0;
    for (uint32_t k = i; k < a->n; k++) {
        if (*n == BPCC_MAX_DIMS) {
            bpcc_xerr(a, "more than %d sizes", BPCC_MAX_DIMS);
            return false;
        }
        if (!bpcc_xarg_int(a, k, NULL, 0, &out[(*n)++])) return false;
    }
    return true;
}

bool bpcc_xarg_dtype(const struct xargs *a, uint32_t i, const char *name, enum bpcc_dtype *out)
{
    /* dtypes reach kernels as XV_OTHER from the IR's DTYPE values: read them from the node */
    const struct bpcc_value *iv = i < a->node->args.n ? &a->node->args.u.seq.items[i] : NULL;
    const struct bpcc_value *kw = bpcc_node_kwargs(a->node);
    for (uint32_t k = 0; !iv && k < kw->n; k++)
        if (!strcmp(kw->u.seq.keys[k], name)) iv = &kw->u.seq.items[k];
    if (!iv || iv->kind != BPCC_VAL_DTYPE) {
        bpcc_xerr(a, "argument %s must be a dtype", name);
        return false;
    }
    *out = iv->u.dtype;
    return true;
}

bool bpcc_xscalar(const struct xval *v, double *out)
{
    if (!v) return false;
    if (v->k == XV_FLOAT) *out = v->u.f;
    else if (v->k == XV_INT) *out = (double)v->u.i;
    else if (v->k == XV_TENSOR && v->u.t->numel == 1) *out = v->u.t->data[0];
    else return false;
    return true;
}

bool bpcc_xdim(const struct xargs *a, int64_t *d, uint32_t ndim)
{
    int64_t w = bpcc_wrap_dim(*d, ndim ? ndim : 1);
    if (w < 0 || w >= (int64_t)(ndim ? ndim : 1)) {
        bpcc_xerr(a, "dimension %lld is out of range for a %u-dimensional tensor", (long long)*d, ndim);
        return false;
    }
    *d = w;
    return true;
}

static bool value_ints(const struct bpcc_value *v, uint32_t n_want, int64_t *out)
{
    if (v->kind == BPCC_VAL_INT) {
        for (uint32_t i = 0; i < n_want; i++) out[i] = v->u.i;
        return true;
    }
    if ((v->kind != BPCC_VAL_TUPLE && v->kind != BPCC_VAL_LIST) || v->n != n_want) {
        if ((v->kind == BPCC_VAL_TUPLE || v->kind == BPCC_VAL_LIST) && v->n == 1 && v->u.seq.items[0].kind == BPCC_VAL_INT) {
            for (uint32_t i = 0; i < n_want; i++) out[i] = v->u.seq.items[0].u.i;
            return true;
        }
        return false;
    }
    for (uint32_t i = 0; i < n_want; i++) {
        if (v->u.seq.items[i].kind != BPCC_VAL_INT) return false;
        out[i] = v->u.seq.items[i].u.i;
    }
    return true;
}

bool bpcc_mattr_ints(const struct xargs *a, const char *key, uint32_t n_want, const int64_t *dflt, int64_t *out)
{
    const struct bpcc_value *v = a->module ? bpcc_module_attr(a->module, key) : NULL;
    if (!v || v->kind == BPCC_VAL_NONE) {
        if (!dflt) {
            bpcc_xerr(a, "module '%s' has no attribute '%s'", a->module ? a->module->name : "?", key);
            return false;
        }
        for (uint32_t i = 0; i < n_want; i++) out[i] = dflt[i];
        return true;
    }
    if (!value_ints(v, n_want, out)) {
        bpcc_xerr(a, "module attribute '%s' must be %u int%s", key, n_want, n_want == 1 ? "" : "s");
        return false;
    }
    return true;
}

double bpcc_mattr_float(const struct bpcc_module *m, const char *key, double dflt)
{
    const struct bpcc_value *v = bpcc_module_attr(m, key);
    if (v && v->kind == BPCC_VAL_FLOAT) return v->u.f;
    if (v && v->kind == BPCC_VAL_INT) return (double)v->u.i;
    return dflt;
}

int64_t bpcc_mattr_int(const struct bpcc_module *m, const char *key, int64_t dflt)
{
    const struct bpcc_value *v = bpcc_module_attr(m, key);
    if (v && v->kind == BPCC_VAL_INT) return v->u.i;
    if (v && v->kind == BPCC_VAL_FLOAT) /* a whole number in range, else no count at all */
        return v->u.f == v->u.f && fabs(v->u.f) < 0x1p62 && v->u.f == (double)(int64_t)v->u.f ? (int64_t)v->u.f : INT64_MIN;
    return dflt;
}

bool bpcc_mattr_bool(const struct bpcc_module *m, const char *key, bool dflt)
{
    const struct bpcc_value *v = bpcc_module_attr(m, key);
    return v && v->kind == BPCC_VAL_BOOL ? v->u.b : dflt;
}

const struct bpcc_tensor *bpcc_mtensor(const struct bpcc_module *m, const char *name)
{
    const struct bpcc_tensor *t = bpcc_module_tensor(m, name);
    return t && t->dtype == BPCC_DTYPE_F32 && t->data ? t : NULL;
}

const float *bpcc_mtensor_n(const struct xargs *a, const struct bpcc_module *m, const char *name, int64_t n)
{
    const struct bpcc_tensor *t = m ? bpcc_mtensor(m, name) : NULL;
    const char *owner = (m ? m : a->module)->type;
    if (!t) {
        bpcc_xerr(a, "%s has no float32 tensor '%s'", owner, name);
        return NULL;
    }
    uint64_t numel = 1;
    for (uint32_t i = 0; i < t->ndim; i++) numel *= (uint64_t)t->dims[i];
    if (numel != (uint64_t)n) {
        bpcc_xerr(a, "%s's '%s' has %llu elements, not %lld", owner, name, (unsigned long long)numel, (long long)n);
        return NULL;
    }
    return t->data;
}

/* }================================================ */

/* {==================== the run ==================== */

struct obs_entry {
    const struct bpcc_module *m;
    struct obs_state st;
};

/* data a kernel derived from a module's own weights (they do not change during runs) */
struct xcache {
    const struct bpcc_module *m;
    const float *w;
    float *data;
};

struct xctx {
    int threads;
    struct obs_entry *obs;
    uint32_t n_obs;
    struct xcache *cache; /* per node id, made at the first use */
    uint32_t n_cache;
};

struct bpcc_exec {
    const struct bpcc_graph *g;
    struct xctx ctx;
    uint32_t n_ids;
    uint32_t *uses;      /* per node id: how many argument slots refer to it */
    struct xval *slot;   /* per node id: its value while it has users left */
    uint32_t *alias;     /* per node id: the node whose tensor it changed in place (write_back), or UINT32_MAX */
    bpcc_exec_hook hook; /* after each node (the numeric suite's loggers) */
    void *hook_ud;
};

void bpcc_exec_set_hook(struct bpcc_exec *e, bpcc_exec_hook hook, void *ud)
{
    e->hook = hook;
    e->hook_ud = ud;
}

int bpcc_exec_threads(const struct xctx *c) { return c->threads; }

/* the node's cache entry where a kernel may keep derived data (a module's own weights only), the
** cache made at the first use; NULL where it may not (or on OOM) */
static struct xcache *cache_entry(const struct xargs *a)
{
    struct xctx *c = a->ctx;
    if (!a->module || a->weight_override || a->node->id >= c->n_cache) return NULL;
    if (!c->cache) {
        if (!(c->cache = bpcc_malloc((size_t)c->n_cache * sizeof *c->cache))) return NULL;
        memset(c->cache, 0, (size_t)c->n_cache * sizeof *c->cache);
    }
    return &c->cache[a->node->id];
}

float *bpcc_exec_derived(const struct xargs *a, const float *w, bool *ran_before)
{
    struct xcache *e = cache_entry(a);
    *ran_before = false;
    if (!e) return NULL;
    if (e->m == a->module && e->w == w) {
        *ran_before = true;
        return e->data;
    }
    bpcc_xfree(e->data);
    *e = (struct xcache){a->module, w, NULL};
    return NULL;
}

bool bpcc_exec_keep_derived(const struct xargs *a, const float *w, float *data)
{
    struct xcache *e = cache_entry(a);
    if (!e || e->m != a->module || e->w != w || e->data) return false;
    e->data = data;
    return true;
}

/* observers ordered by module address, for the lookup of each observer call */
static int cmp_obs(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct obs_entry *)a)->m, y = (uintptr_t)((const struct obs_entry *)b)->m;
    return x < y ? -1 : x > y;
}

struct obs_state *bpcc_exec_observer(struct xctx *c, const struct bpcc_module *m)
{
    uint32_t lo = 0, hi = c->n_obs;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)c->obs[mid].m < (uintptr_t)m) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->n_obs && c->obs[lo].m == m ? &c->obs[lo].st : NULL;
}

static void count_use(struct bpcc_value *ref, void *ud)
{
    struct bpcc_exec *e = ud;
    if (ref->u.node->id < e->n_ids) e->uses[ref->u.node->id]++;
}

enum bpcc_status bpcc_exec_new(const struct bpcc_graph *g, int threads, struct bpcc_exec **out, struct bpcc_diag *d)
{
    *out = NULL;
    enum bpcc_status s = bpcc_blas_load(d);
    if (s) return s;
    struct bpcc_exec *e = bpcc_malloc(sizeof *e);
    if (!e) return bpcc_diag_nomem(d);
    memset(e, 0, sizeof *e);
    e->g = g;
    e->ctx.threads = threads > 0 ? threads : 1;
    e->n_ids = g->next_id;
    e->ctx.n_cache = e->n_ids;
    e->uses = bpcc_malloc((e->n_ids + 1) * sizeof *e->uses);
    e->slot = bpcc_malloc((e->n_ids + 1) * sizeof *e->slot);
    e->alias = bpcc_malloc((e->n_ids + 1) * sizeof *e->alias);
    if (e->slot) memset(e->slot, 0, (e->n_ids + 1) * sizeof *e->slot);
    if (!e->uses || !e->slot || !e->alias) {
        bpcc_exec_free(e);
        return bpcc_diag_nomem(d);
    }
    /* one state per observer module (a shared observer is one state) */
    uint32_t n_obs = 0;
    for (uint32_t i = 0; i < g->n_modules; i++)
        if (!g->modules[i]->dead && bpcc_obs_module_class(g->modules[i]) >= 0) n_obs++;
    e->ctx.obs = bpcc_malloc((n_obs ? n_obs : 1) * sizeof *e->ctx.obs);
    if (!e->ctx.obs) {
        bpcc_exec_free(e);
        return bpcc_diag_nomem(d);
    }
    struct obs_spec_memo memo = {0};
    for (uint32_t i = 0; i < g->n_modules; i++) {
        const struct bpcc_module *m = g->modules[i];
        struct observer_spec spec;
        if (m->dead || !bpcc_obs_spec_of_module_memo(m, &memo, &spec)) continue;
        struct obs_entry *oe = &e->ctx.obs[e->ctx.n_obs];
        oe->m = m;
        if (bpcc_obs_init(&oe->st, &spec)) {
            bpcc_exec_free(e);
            return bpcc_diag_nomem(d);
        }
        e->ctx.n_obs++;
        /* statistics the model holds already (calibrated before, by bpcc or PyTorch) are where the
        ** observer goes on from, as PyTorch's observers go on from their buffers */
        const struct bpcc_module *src = bpcc_obs_fake_quant_observer(m);
        char why[160];
        bool found;
        enum bpcc_status sl = bpcc_obs_load(&oe->st, src ? src : m, &found, why, sizeof why);
        if (sl) {
            bpcc_exec_free(e);
            return sl == BPCC_ERR_NOMEM ? bpcc_diag_nomem(d)
                                        : bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, m->src_line, m->src_col,
                                                          "observer '%s': %s", (src ? src : m)->name, why);
        }
    }
    qsort(e->ctx.obs, e->ctx.n_obs, sizeof *e->ctx.obs, cmp_obs);
    *out = e;
    return BPCC_OK;
}

void bpcc_exec_free(struct bpcc_exec *e)
{
    if (!e) return;
    if (e->slot)
        for (uint32_t i = 0; i <= e->n_ids; i++) bpcc_xval_release(&e->slot[i]);
    for (uint32_t i = 0; i < e->ctx.n_obs; i++) bpcc_obs_release(&e->ctx.obs[i].st);
    bpcc_xfree(e->ctx.obs);
    if (e->ctx.cache)
        for (uint32_t i = 0; i < e->ctx.n_cache; i++) bpcc_xfree(e->ctx.cache[i].data);
    bpcc_xfree(e->ctx.cache);
    bpcc_xfree(e->uses);
    bpcc_xfree(e->alias);
    bpcc_xfree(e->slot);
    bpcc_xfree(e);
}

uint32_t bpcc_exec_n_observers(const struct bpcc_exec *e) { return e->ctx.n_obs; }

const struct bpcc_module *bpcc_exec_observer_at(const struct bpcc_exec *e, uint32_t i, const struct obs_state **state)
{
    *state = &e->ctx.obs[i].st;
    return e->ctx.obs[i].m;
}

/* the float32, integer or bool tensor that get_attr `target` reads, as a new runtime tensor in *out;
** BPCC_ERR_GRAPH when there is none (NULL data: weights not read), BPCC_ERR_NOMEM */
static enum bpcc_status attr_tensor(const struct bpcc_graph *g, const char *target, struct xval *out)
{
    const struct bpcc_tensor *bt = bpcc_graph_attr_tensor(g, target);
    enum bpcc_dtype dt = bt ? bt->dtype : BPCC_DTYPE_NONE;
    if (!bt || !bt->data || (dt != BPCC_DTYPE_F32 && !bpcc_dtype_is_integral(dt))) return BPCC_ERR_GRAPH;
    struct xtensor *x = bpcc_xtensor_new(bt->ndim, bt->dims);
    if (!x) return BPCC_ERR_NOMEM;
    if (dt == BPCC_DTYPE_F32) memcpy(x->data, bt->data, x->numel * sizeof(float));
    else bpcc_xtensor_from_integers(x, dt, bt->data);
    *out = (struct xval){.k = XV_TENSOR, .u.t = x};
    return BPCC_OK;
}

/* an IR value as a runtime value that borrows node values (sequences are allocated: free with
** free_arg) */
static enum bpcc_status arg_value(struct bpcc_exec *e, const struct bpcc_value *v, struct xval *out)
{
    memset(out, 0, sizeof *out);
    switch (v->kind) {
    case BPCC_VAL_NONE: out->k = XV_NONE; return BPCC_OK;
    case BPCC_VAL_BOOL: out->k = XV_BOOL; out->u.b = v->u.b; return BPCC_OK;
    case BPCC_VAL_INT: out->k = XV_INT; out->u.i = v->u.i; return BPCC_OK;
    case BPCC_VAL_FLOAT: out->k = XV_FLOAT; out->u.f = v->u.f; return BPCC_OK;
    case BPCC_VAL_STR:
    case BPCC_VAL_SYMBOL: out->k = XV_STR; out->u.s = v->u.s; return BPCC_OK;
    case BPCC_VAL_ELLIPSIS: out->k = XV_ELLIPSIS; return BPCC_OK;
    case BPCC_VAL_NODE:
        *out = e->slot[v->u.node->id];
        out->borrowed = true;
        return BPCC_OK;
    case BPCC_VAL_ATTR: { /* an implicit get_attr node (bpcc_graph_set_implicit_qparams): its tensor, owned */
        enum bpcc_status s = attr_tensor(e->g, v->u.attr.target, out);
        if (s == BPCC_ERR_GRAPH) out->k = XV_OTHER; /* none: the kernel says what it wanted */
        return s == BPCC_ERR_NOMEM ? s : BPCC_OK;
    }
    case BPCC_VAL_LIST:
    case BPCC_VAL_TUPLE:
    case BPCC_VAL_SLICE: {
        out->k = v->kind == BPCC_VAL_SLICE ? XV_SLICE : XV_SEQ;
        out->u.seq.n = v->n;
        out->u.seq.items = bpcc_malloc((v->n ? v->n : 1) * sizeof *out->u.seq.items);
        if (!out->u.seq.items) {
            out->k = XV_NONE;
            return BPCC_ERR_NOMEM;
        }
        for (uint32_t i = 0; i < v->n; i++)
            if (arg_value(e, &v->u.seq.items[i], &out->u.seq.items[i])) {
                out->u.seq.n = i;
                return BPCC_ERR_NOMEM;
            }
        return BPCC_OK;
    }
    case BPCC_VAL_DICT: {
        out->k = XV_DICT;
        out->u.seq.items = bpcc_malloc((v->n ? 2 * (size_t)v->n : 1) * sizeof *out->u.seq.items);
        if (!out->u.seq.items) {
            out->k = XV_NONE;
            return BPCC_ERR_NOMEM;
        }
        for (uint32_t i = 0; i < v->n; i++, out->u.seq.n += 2) {
            out->u.seq.items[2 * i] = (struct xval){.k = XV_STR, .u.s = v->u.seq.keys[i]};
            if (arg_value(e, &v->u.seq.items[i], &out->u.seq.items[2 * i + 1])) {
                out->u.seq.n++;
                return BPCC_ERR_NOMEM;
            }
        }
        return BPCC_OK;
    }
    default: out->k = XV_OTHER; return BPCC_OK;
    }
}

/* free what arg_value allocated (the sequences, an implicit get_attr node's tensor; borrowed
** tensors stay) */
static void free_arg(struct xval *v)
{
    if (v->borrowed) return;
    if (v->k == XV_SEQ || v->k == XV_SLICE || v->k == XV_DICT) {
        for (uint32_t i = 0; i < v->u.seq.n; i++) free_arg(&v->u.seq.items[i]);
        bpcc_xfree(v->u.seq.items);
    } else if (v->k == XV_TENSOR) {
        bpcc_xval_release(v);
    }
    v->k = XV_NONE;
}

/* Whether v (an argument) references a node value that is a sequence: then the argument's
** sequence items borrow it, which arg_value handles by copying the struct (shallow). */

/* Module c and its next siblings in order, each on the result of the one before. `in` is the
** caller's value (borrowed; then there is at least one module to run), or with `owned` an
** intermediate that dies with the next call, so that call may consume it (an activation clamps
** the conv's output in place). */
static enum bpcc_status run_children(const struct xargs *a, const struct bpcc_module *c, const struct xval *in,
                                     bool owned, struct xval *out)
{
    struct xval cur = owned ? *in : (struct xval){0};
    const struct xval *arg = owned ? &cur : in;
    for (; c; c = c->next_sibling) {
        struct xval next;
        struct xargs sub = *a;
        sub.consume = arg == &cur;
        enum bpcc_status s = bpcc_exec_module(&sub, c, arg, &next);
        bool taken = !s && sub.consume && cur.k == XV_TENSOR && next.k == XV_TENSOR && next.u.t == cur.u.t;
        if (sub.consume && !taken) bpcc_xval_release(&cur);
        if (s) return s;
        cur = next;
        arg = &cur;
    }
    BPCC_ASSERT(arg == &cur);
    *out = cur;
    return BPCC_OK;
}

static bool is_fused(const struct bpcc_module *m)
{
    return m->first_child && !strncmp(m->type, "torch.ao.nn.intrinsic.", 22);
}

enum bpcc_status bpcc_exec_module(const struct xargs *a, const struct bpcc_module *m, const struct xval *in,
                                  struct xval *out)
{
    xkernel k = bpcc_exec_kernel(BPCC_NODE_CALL_MODULE, m->type);
    struct xargs sub = *a;
    sub.module = m;
    sub.n = 1;
    sub.pos = in;
    if (k) return k(&sub, out);
    /* a fused module (torch.ao.nn.intrinsic.*) runs its children in order (the first reads the
    ** input as it is) */
    if (is_fused(m)) return run_children(a, m->first_child, in, false, out);
    return bpcc_xerr(a, "the interpreter cannot run module type %s", m->type);
}

/* The op of a fused conv+add module (torch.ao.nn.intrinsic.ConvAdd2d, ConvAddReLU2d: the onednn
** config's fusions), kept in its `add` attribute, or NULL for another module */
static const char *fused_add_op(const struct bpcc_module *m)
{
    if (!is_fused(m)) return NULL;
    const struct bpcc_value *v = bpcc_module_attr(m, "add");
    return v && (v->kind == BPCC_VAL_SYMBOL || v->kind == BPCC_VAL_STR) ? v->u.s : NULL;
}

/* A fused conv+add module's forward(x1, x2): its other children (a ReLU) on add(first child(x1), x2),
** as PyTorch's ConvAdd2d and ConvAddReLU2d compute it. */
static enum bpcc_status exec_fused_add(const struct xargs *a, const struct bpcc_module *m, const char *op,
                                       struct xval *out)
{
    xkernel add = bpcc_exec_kernel(BPCC_NODE_CALL_FUNCTION, op);
    if (!add) return bpcc_xerr(a, "the interpreter cannot run %s, the add of module type %s", op, m->type);
    struct xargs sub = *a;
    sub.consume = false;
    struct xval y;
    enum bpcc_status s = bpcc_exec_module(&sub, m->first_child, &a->pos[0], &y);
    if (s) return s;
    struct xval two[2] = {y, a->pos[1]}, z;
    struct xargs sa = *a;
    sa.module = NULL;
    sa.n = 2;
    sa.pos = two;
    sa.consume = y.k == XV_TENSOR; /* the conv's output dies here: the sum may take its tensor */
    s = add(&sa, &z);
    if (!(!s && sa.consume && z.k == XV_TENSOR && z.u.t == y.u.t)) bpcc_xval_release(&y);
    if (s) return s;
    return run_children(a, m->first_child->next_sibling, &z, true, out);
}

static bool value_quantized(const struct xval *v)
{
    if (v->k == XV_TENSOR) return v->u.t->qdtype != BPCC_DTYPE_NONE;
    if (v->k == XV_SEQ || v->k == XV_DICT)
        for (uint32_t i = 0; i < v->u.seq.n; i++)
            if (value_quantized(&v->u.seq.items[i])) return true;
    return false;
}

static bool has_quantized(const struct xval *pos, uint32_t np, const struct xval *kw, uint32_t nk)
{
    for (uint32_t i = 0; i < np; i++)
        if (value_quantized(&pos[i])) return true;
    for (uint32_t i = 0; i < nk; i++)
        if (value_quantized(&kw[i])) return true;
    return false;
}

/* The node v's value is, in PyTorch, a view of its first argument's tensor (which it returns): the
** view ops, and indexing by ints, slices, None and ... alone. NULL when it is not, or v is no node. */
static const struct bpcc_node *view_source(const struct bpcc_node *v)
{
    static const char *const views[] = {"view", "view_as", "reshape", "reshape_as", "flatten", "transpose",
                                        "permute", "t", "narrow", "select", "squeeze", "unsqueeze", "expand",
                                        "expand_as", "diagonal", "unflatten", "movedim", "moveaxis", "swapaxes",
                                        "swapdims", "detach", "unfold", "as_strided"};
    if (!v || (v->kind != BPCC_NODE_CALL_METHOD && v->kind != BPCC_NODE_CALL_FUNCTION) || !v->args.n ||
        v->args.u.seq.items[0].kind != BPCC_VAL_NODE)
        return NULL;
    const char *op = v->target;
    if (v->kind == BPCC_NODE_CALL_FUNCTION) {
        if (!strcmp(op, "operator.getitem") && v->args.n == 2) { /* basic indexing only: the rest copies */
            const struct bpcc_value *ix = &v->args.u.seq.items[1];
            uint32_t n = ix->kind == BPCC_VAL_TUPLE ? ix->n : 1;
            for (uint32_t i = 0; i < n; i++) {
                const struct bpcc_value *k = ix->kind == BPCC_VAL_TUPLE ? &ix->u.seq.items[i] : ix;
                if (k->kind != BPCC_VAL_INT && k->kind != BPCC_VAL_SLICE && k->kind != BPCC_VAL_NONE &&
                    k->kind != BPCC_VAL_ELLIPSIS)
                    return NULL;
            }
            return v->args.u.seq.items[0].u.node;
        }
        if (strncmp(op, "torch.", 6)) return NULL;
        op += 6;
    }
    for (size_t i = 0; i < sizeof views / sizeof *views; i++)
        if (!strcmp(op, views[i])) return v->args.u.seq.items[0].u.node;
    return NULL;
}

/* An op that changes its first argument (node src) in place, which lives on (a later node reads it):
** the result is written into that argument's tensor, and into those of the nodes it was itself
** changed in place from (y = x.sigmoid_(); y.sub_(1) changes x too), as the later readers see them in
** PyTorch. The kernels compute out of place; an in-place result must keep the argument's shape, as
** PyTorch requires. */
static enum bpcc_status write_back(struct bpcc_exec *e, const struct xargs *a, uint32_t src, const struct xtensor *res)
{
    /* what the interpreter cannot follow: a parameter or buffer changed in place (PyTorch keeps the
    ** change for the next batch), or a view whose tensor is read later (PyTorch changes both; the
    ** interpreter's views are copies) */
    const struct bpcc_node *arg0 = a->node->args.u.seq.items[0].u.node;
    if (arg0->kind == BPCC_NODE_GET_ATTR)
        return bpcc_xerr(a, "changes %s in place, which PyTorch keeps for the next batch and the interpreter does not",
                         arg0->target);
    /* up the chain of views (y.view(-1)[1:3] is a view of y too) */
    for (const struct bpcc_node *base = view_source(arg0); base; base = view_source(base)) {
        if (base->kind == BPCC_NODE_GET_ATTR)
            return bpcc_xerr(a, "changes '%s', a view of %s, in place, which PyTorch keeps for the next batch and the "
                                "interpreter does not",
                             arg0->name, base->target);
        if (base->id < e->n_ids && e->uses[base->id])
            return bpcc_xerr(a, "changes '%s', a view of '%s', in place, and '%s' is read later: PyTorch changes both, the "
                                "interpreter's views are copies",
                             arg0->name, base->name, base->name);
    }
    /* the argument's tensor, unless the kernel took it (its last use) and changed it itself */
    const struct xtensor *arg = e->slot[src].k == XV_TENSOR ? e->slot[src].u.t : NULL;
    if (arg && (arg->ndim != res->ndim || memcmp(arg->dims, res->dims, arg->ndim * sizeof *arg->dims)))
        return bpcc_xerr(a, "the in-place result's shape differs from its input's, which PyTorch refuses");
    if ((arg && arg->qdtype != BPCC_DTYPE_NONE) || res->qdtype != BPCC_DTYPE_NONE)
        return bpcc_xerr(a, "an in-place op on a quantized tensor");
    e->alias[a->node->id] = src;
    for (uint32_t k = src, steps = 0; k < e->n_ids && steps < e->n_ids; k = e->alias[k], steps++) {
        struct xtensor *t = e->slot[k].k == XV_TENSOR ? e->slot[k].u.t : NULL;
        if (!t || t == res || t->numel != res->numel || t->qdtype != BPCC_DTYPE_NONE) continue; /* gone, or not this data */
        memcpy(t->data, res->data, res->numel * sizeof *res->data);
        t->boolean = res->boolean;
    }
    return BPCC_OK;
}

static enum bpcc_status run_node(struct bpcc_exec *e, const struct bpcc_node *n, struct bpcc_diag *d)
{
    struct xval *pos = NULL, *kw = NULL;
    enum bpcc_status s = BPCC_OK;
    const struct bpcc_value *kwv = bpcc_node_kwargs(n);
    uint32_t np = n->args.n, nk = kwv->n;
    pos = bpcc_malloc((np ? np : 1) * sizeof *pos);
    kw = bpcc_malloc((nk ? nk : 1) * sizeof *kw);
    if (!pos || !kw) s = bpcc_diag_nomem(d);
    uint32_t done_p = 0, done_k = 0;
    for (; !s && done_p < np; done_p++)
        if (arg_value(e, &n->args.u.seq.items[done_p], &pos[done_p])) s = bpcc_diag_nomem(d);
    for (; !s && done_k < nk; done_k++)
        if (arg_value(e, &kwv->u.seq.items[done_k], &kw[done_k])) s = bpcc_diag_nomem(d);
    struct xargs a = {.node = n, .n = np, .pos = pos, .n_kw = nk, .kw_names = kwv->u.seq.keys, .kw = kw,
                      .d = d, .ctx = &e->ctx};
    /* the first argument dies with this call when this is its last use: the kernel may take its
    ** tensor (changed in place) as the result, which then leaves the argument's slot */
    const struct bpcc_value *a0 = np ? &n->args.u.seq.items[0] : NULL;
    uint32_t src0 = a0 && a0->kind == BPCC_VAL_NODE ? a0->u.node->id : UINT32_MAX;
    a.consume = !s && src0 < e->n_ids && e->uses[src0] == 1 && e->slot[src0].k == XV_TENSOR && !e->slot[src0].borrowed;
    struct xval out = {0};
    if (!s) {
        if (n->kind == BPCC_NODE_CALL_MODULE) {
            const struct bpcc_module *m = bpcc_node_module(n);
            a.module = m;
            bool observer = m && bpcc_obs_module_class(m) >= 0;
            if (!m) s = bpcc_xerr(&a, "no module '%s'", n->target);
            else if (observer && bpcc_obs_is_fake_quant_type(m->type))
                /* training's fake quantize (observe, then quantize and dequantize with the new
                ** qparams) is PyTorch's to run; convert turns it into quantize/dequantize */
                s = bpcc_xerr(&a, "'%s' is a fake quantize (%s) of a QAT model, which the interpreter does not run: "
                                  "convert the model first (bpcc convert)", m->name, m->type);
            else if (observer) {
                /* an observer: observe, pass the value through */
                const struct xval *x = np ? &pos[0] : NULL;
                const struct bpcc_value *a0 = np ? &n->args.u.seq.items[0] : NULL; /* the observed node */
                if (!x) s = bpcc_xerr(&a, "an observer takes one argument");
                else {
                    struct obs_state *st = bpcc_exec_observer(&e->ctx, m);
                    if (x->k == XV_TENSOR && st) {
                        char why[200];
                        s = bpcc_obs_observe(st, x->u.t->data, x->u.t->ndim, x->u.t->dims, why, sizeof why);
                        if (s == BPCC_ERR_NOMEM) s = bpcc_diag_nomem(d);
                        else if (s) {
                            s = bpcc_xerr(&a, "observer: %s", why);
                            if (a0->kind == BPCC_VAL_NODE)
                                bpcc_diag_note(d, a0->u.node->src_line, a0->u.node->src_col,
                                               "the observed value is the output of '%s' (%s)", a0->u.node->name,
                                               a0->u.node->target);
                        }
                    }
                    /* pass the value through: moved when this is its last use, else copied */
                    uint32_t src = a0->kind == BPCC_VAL_NODE ? a0->u.node->id : UINT32_MAX;
                    if (!s && src < e->n_ids && e->uses[src] == 1 && e->slot[src].k == XV_TENSOR) {
                        out = e->slot[src];
                        out.borrowed = false;
                        e->slot[src] = (struct xval){0};
                    } else if (!s && bpcc_xval_copy(x, &out)) {
                        s = bpcc_diag_nomem(d);
                    }
                }
            } else {
                xkernel k = bpcc_exec_kernel(BPCC_NODE_CALL_MODULE, m->type);
                const char *add_op = k || np != 2 || nk ? NULL : fused_add_op(m);
                if (has_quantized(pos, np, kw, nk))
                    s = bpcc_xerr(&a, "a quantized tensor reaches this module; the reference model dequantizes before it");
                else if (k) s = k(&a, &out);
                else if (np == 1 && !nk) s = bpcc_exec_module(&a, m, &pos[0], &out);
                else if (add_op) s = exec_fused_add(&a, m, add_op, &out);
                else s = bpcc_xerr(&a, "the interpreter cannot run module type %s", m->type);
            }
        } else {
            xkernel k = bpcc_exec_kernel(n->kind, n->target);
            if (!k) s = bpcc_xerr(&a, "the interpreter cannot run %s %s", bpcc_node_kind_name(n->kind), n->target);
            else if (!bpcc_exec_kernel_takes_quantized(k) && has_quantized(pos, np, kw, nk))
                s = bpcc_xerr(&a, "a quantized tensor reaches this op; the reference model dequantizes before float ops");
            else s = k(&a, &out);
        }
    }
    if (!s && a.consume && out.k == XV_TENSOR && out.u.t == e->slot[src0].u.t) e->slot[src0] = (struct xval){0};
    if (!s && src0 < e->n_ids && out.k == XV_TENSOR && bpcc_node_in_place(n)) s = write_back(e, &a, src0, out.u.t);
    for (uint32_t i = 0; i < done_p; i++) free_arg(&pos[i]);
    for (uint32_t i = 0; i < done_k; i++) free_arg(&kw[i]);
    bpcc_xfree(pos);
    bpcc_xfree(kw);
    if (s) {
        bpcc_xval_release(&out);
        return s;
    }
    e->slot[n->id] = out;
    return BPCC_OK;
}

static void drop_use(struct bpcc_value *ref, void *ud)
{
    struct bpcc_exec *e = ud;
    uint32_t id = ref->u.node->id;
    if (id < e->n_ids && e->uses[id] && --e->uses[id] == 0) bpcc_xval_release(&e->slot[id]);
}

static enum bpcc_status get_attr_value(struct bpcc_exec *e, const struct bpcc_node *n, struct bpcc_diag *d)
{
    enum bpcc_status s = attr_tensor(e->g, n->target, &e->slot[n->id]);
    if (s == BPCC_ERR_NOMEM) return bpcc_diag_nomem(d);
    if (s)
        return bpcc_diag_error(d, BPCC_ERR_GRAPH, e->g->source_file, n->src_line, n->src_col,
                               "node '%s': get_attr %s is not a float32, integer or bool tensor with data", n->name,
                               n->target);
    return BPCC_OK;
}

enum bpcc_status bpcc_exec_run(struct bpcc_exec *e, const struct xval *inputs, uint32_t n_inputs, struct xval *out,
                               struct bpcc_diag *d)
{
    const struct bpcc_graph *g = e->g;
    memset(e->uses, 0, (e->n_ids + 1) * sizeof *e->uses);
    memset(e->alias, 0xff, (e->n_ids + 1) * sizeof *e->alias);
    for (const struct bpcc_node *n = g->first; n; n = n->next) {
        bpcc_value_visit_nodes((struct bpcc_value *)&n->args, count_use, e);
        if (n->kwargs) bpcc_value_visit_nodes(n->kwargs, count_use, e);
    }
    uint32_t k = 0;
    enum bpcc_status s = BPCC_OK;
    for (const struct bpcc_node *n = g->first; n && !s; n = n->next) {
        if (n->id >= e->n_ids) {
            s = bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "the graph changed after the interpreter was set up");
            break;
        }
        switch ((enum bpcc_node_kind)n->kind) {
        case BPCC_NODE_PLACEHOLDER:
            if (k >= n_inputs) {
                s = bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, n->src_line, n->src_col, "no data for input '%s'",
                                    n->name);
                break;
            }
            if (bpcc_xval_copy(&inputs[k++], &e->slot[n->id])) s = bpcc_diag_nomem(d);
            break;
        case BPCC_NODE_GET_ATTR: s = get_attr_value(e, n, d); break;
        case BPCC_NODE_OUTPUT: {
            if (out) {
                struct xval v;
                s = arg_value(e, n->args.n ? &n->args.u.seq.items[0] : &(struct bpcc_value){0}, &v);
                if (s) s = bpcc_diag_nomem(d);
                else {
                    s = bpcc_xval_copy(&v, out);
                    if (s) s = bpcc_diag_nomem(d);
                }
                free_arg(&v);
            }
            break;
        }
        default: s = run_node(e, n, d);
        }
        if (!s && e->hook && n->kind != BPCC_NODE_OUTPUT) s = e->hook(e->hook_ud, n, &e->slot[n->id], d);
        if (s) break;
        if (!e->uses[n->id]) bpcc_xval_release(&e->slot[n->id]);
        bpcc_value_visit_nodes((struct bpcc_value *)&n->args, drop_use, e);
        if (n->kwargs) bpcc_value_visit_nodes(n->kwargs, drop_use, e);
    }
    for (uint32_t i = 0; i <= e->n_ids; i++) bpcc_xval_release(&e->slot[i]);
    return s;
}

/* }================================================ */
