/*
** compare.c — the numeric suite: PyTorch's compare_weights, compare_model_outputs (OutputLogger)
** and compare_model_stub (Shadow) on bpcc's own models. Weights: each reference module's weight
** quantized and dequantized with its qparams against the float model's weight of the same module.
** Outputs: both models run on the same batches through the interpreter, with loggers as execution
** hooks; each node's value as its consumers see it (after its quantize/dequantize) against the float
** model's node of the same name. Shadow: the quantized model run again with every logged node's
** value replaced by the float one, so each op is measured on exact inputs.
*/
#include "../exec/exec.h"

#include <math.h>

/* {==================== error accumulators ==================== */

struct acc {
    double xx, yy, xy, ee, max_e;
    uint64_t n;
};

static BPCC_HOT void acc_add(struct acc *a, const float *x, const float *y, uint64_t n)
{
    double xx = 0, yy = 0, xy = 0, ee = 0, m = a->max_e;
    for (uint64_t i = 0; i < n; i++) {
        double u = x[i], v = y[i], e = u - v;
        xx += u * u;
        yy += v * v;
        xy += u * v;
        ee += e * e;
        e = fabs(e);
        m = e > m || isnan(e) ? e : m;
    }
    a->xx += xx;
    a->yy += yy;
    a->xy += xy;
    a->ee += ee;
    a->max_e = m;
    a->n += n;
}

/* 20 log10(||x|| / ||x - y||) = 10 log10(xx / ee) */
static double sqnr_of(const struct acc *a)
{
    if (a->ee == 0) return a->xx == 0 ? NAN : INFINITY;
    return 10.0 * log10(a->xx / a->ee);
}

static void acc_result(const struct acc *a, double *sqnr, double *l2, double *cosine, double *max_e)
{
    *sqnr = sqnr_of(a);
    *l2 = a->xx > 0 ? sqrt(a->ee / a->xx) : a->ee > 0 ? INFINITY : 0;
    double den = sqrt(a->xx) * sqrt(a->yy);
    *cosine = a->xy / (den > 1e-8 ? den : 1e-8); /* torch.nn.functional.cosine_similarity's eps */
    *max_e = a->max_e;
}

/* }================================================ */

/* the report as allocated: the public part, then the row names it made ("lstm.weight_ih_l0") */
struct report_own {
    struct bpcc_compare_report pub;
    uint32_t cap_rows;
    struct bpcc_arena names;
};

void bpcc_compare_report_free(struct bpcc_compare_report *r)
{
    if (!r) return;
    struct report_own *o = (struct report_own *)r;
    bpcc_arena_release(&o->names);
    bpcc_xfree(r->rows);
    bpcc_xfree(o);
}

static struct bpcc_compare_report *report_new(enum bpcc_compare_kind kind, uint32_t cap)
{
    struct report_own *o = bpcc_malloc(sizeof *o);
    if (!o) return NULL;
    memset(o, 0, sizeof *o);
    bpcc_arena_init(&o->names);
    struct bpcc_compare_report *r = &o->pub;
    r->kind = kind;
    o->cap_rows = cap ? cap : 1;
    r->rows = bpcc_malloc(o->cap_rows * sizeof *r->rows);
    if (!r->rows) {
        bpcc_xfree(o);
        return NULL;
    }
    memset(r->rows, 0, o->cap_rows * sizeof *r->rows);
    return r;
}

/* a zeroed row at the end, NULL when out of memory */
static struct bpcc_compare_row *row_add(struct bpcc_compare_report *r)
{
    struct report_own *o = (struct report_own *)r;
    if (r->n_rows == o->cap_rows) {
        struct bpcc_compare_row *rows = bpcc_realloc(r->rows, 2 * (size_t)o->cap_rows * sizeof *rows);
        if (!rows) return NULL;
        r->rows = rows;
        o->cap_rows *= 2;
    }
    struct bpcc_compare_row *row = &r->rows[r->n_rows++];
    memset(row, 0, sizeof *row);
    return row;
}

/* "module.weight": a name the report owns */
static const char *owned_name(struct bpcc_compare_report *r, const char *module, const char *weight)
{
    size_t n = strlen(module) + strlen(weight) + 2;
    char *s = bpcc_arena_alloc(&((struct report_own *)r)->names, n, 1);
    if (s) snprintf(s, n, "%s%s%s", module, *module ? "." : "", weight);
    return s;
}

/* {==================== compare weights ==================== */

/* one row: weight `wn` of module m quantized and dequantized with q against the float model's */
static enum bpcc_status weight_row(struct bpcc_compare_report *r, const struct bpcc_graph *fg, const struct bpcc_graph *qg,
                                   const struct bpcc_module *m, const char *wn, const struct bpcc_qparams *q,
                                   struct bpcc_diag *d)
{
    const struct bpcc_tensor *w = bpcc_mtensor(m, wn);
    const struct bpcc_module *fm = bpcc_graph_find_module(fg, m->name);
    const struct bpcc_tensor *fw = fm ? bpcc_mtensor(fm, wn) : NULL;
    bool same_shape = w && fw && w->ndim == fw->ndim && !memcmp(w->dims, fw->dims, w->ndim * sizeof *w->dims);
    if (!same_shape) {
        r->n_unmatched++;
        return BPCC_OK;
    }
    uint64_t numel = bpcc_tensor_numel(w);
    float *fq = bpcc_malloc((numel ? numel : 1) * sizeof *fq);
    if (!fq) return bpcc_diag_nomem(d);
    if (!bpcc_fake_quantize_weight(w, q, fq)) {
        bpcc_xfree(fq);
        return bpcc_diag_error(d, BPCC_ERR_GRAPH, qg->source_file, m->src_line, m->src_col,
                               "module '%s': the qparams of its %s do not fit it", m->name, wn);
    }
    bool own = strcmp(wn, "weight") != 0; /* a recurrent module's weights: a row each, named module.weight */
    const char *name = own ? owned_name(r, m->name, wn) : m->name, *fname = own ? owned_name(r, fm->name, wn) : fm->name;
    struct bpcc_compare_row *row = name && fname ? row_add(r) : NULL;
    if (!row) {
        bpcc_xfree(fq);
        return bpcc_diag_nomem(d);
    }
    row->name = name;
    row->float_name = fname;
    row->what = m->type;
    struct acc all = {0};
    acc_add(&all, fw->data, fq, numel);
    acc_result(&all, &row->sqnr_db, &row->l2_error, &row->cosine, &row->max_abs_error);
    row->numel = numel;
    /* per output channel: along the qparams' axis, else 0 */
    int64_t axis = q->kind == BPCC_QPARAMS_PER_CHANNEL ? q->axis : 0;
    if (axis < 0) axis += w->ndim;
    uint64_t C = w->ndim ? (uint64_t)w->dims[axis] : 1, inner = 1, outer = 1;
    for (uint32_t k = (uint32_t)axis + 1; k < w->ndim; k++) inner *= (uint64_t)w->dims[k];
    for (uint32_t k = 0; k < (uint32_t)axis; k++) outer *= (uint64_t)w->dims[k];
    row->n_channels = (uint32_t)C;
    row->min_channel_sqnr_db = INFINITY;
    const float *x = fw->data;
    for (uint64_t c = 0; c < C; c++) { /* channels of zeros (no signal, no error) do not count */
        struct acc a = {0};
        for (uint64_t o = 0; o < outer; o++) acc_add(&a, x + (o * C + c) * inner, fq + (o * C + c) * inner, inner);
        double db = sqnr_of(&a);
        if (!isnan(db) && db < row->min_channel_sqnr_db) {
            row->min_channel_sqnr_db = db;
            row->worst_channel = (uint32_t)c;
        }
    }
    bpcc_xfree(fq);
    return BPCC_OK;
}

enum bpcc_status bpcc_compare_weights(const struct bpcc_graph *fg, const struct bpcc_graph *qg,
                                      struct bpcc_compare_report **out, struct bpcc_diag *d)
{
    *out = NULL;
    struct bpcc_compare_report *r = report_new(BPCC_COMPARE_WEIGHTS, qg->n_modules);
    if (!r) return bpcc_diag_nomem(d);
    enum bpcc_status s = BPCC_OK;
    for (uint32_t i = 0; i < qg->n_modules && !s; i++) {
        const struct bpcc_module *m = qg->modules[i];
        struct bpcc_qparams q;
        if (m->dead) continue;
        if (bpcc_module_weight_qparams(m, &q)) {
            if (q.kind != BPCC_QPARAMS_FLOAT16) s = weight_row(r, fg, qg, m, "weight", &q, d);
            continue;
        }
        /* a reference LSTM or cell of dynamic quantization: each weight with its own qparams */
        const char *wn;
        for (uint32_t k = 0; !s && bpcc_module_next_weight_qparams(m, &k, &wn, &q);)
            if (q.kind != BPCC_QPARAMS_FLOAT16) s = weight_row(r, fg, qg, m, wn, &q, d);
    }
    if (s) {
        bpcc_compare_report_free(r);
        return s;
    }
    r->n_batches = 0;
    *out = r;
    return BPCC_OK;
}

/* }================================================ */

/* {==================== compare outputs / shadow ==================== */

struct logged {
    const struct bpcc_node *qnode;  /* the node in the quantized model */
    struct bpcc_qparams out_q;      /* its output quantize's qparams (kind NONE when it has none) */
    struct acc prop, shadow;
    struct xtensor *fvalue;                /* the float value of the current batch */
    bool mismatch;                         /* shapes differ (not compared) */
};

struct cmp {
    struct logged *rows;
    uint32_t n;
    uint32_t *frow, *qmeasure, *qshadow; /* node id -> row + 1 (0: none) */
    bool shadow_run;
};

/* the dequantize of the node's quantize -> dequantize pair, if its value is quantized for its
** consumers, or the quantize node where its value leaves the model quantized (an output kept
** quantized); *qp (kind NONE otherwise) the quantize's qparams */
static const struct bpcc_node *output_dequantize(const struct bpcc_graph *g, const struct bpcc_node *n,
                                                 struct bpcc_qparams *qp)
{
    for (uint32_t i = 0; i < n->n_users; i++) {
        const struct bpcc_node *q = n->users[i].node;
        if (!bpcc_node_qparams(g, q, qp) || (qp->kind != BPCC_QPARAMS_PER_TENSOR && qp->kind != BPCC_QPARAMS_PER_CHANNEL))
            continue;
        if (q->args.n < 1 || q->args.u.seq.items[0].kind != BPCC_VAL_NODE || q->args.u.seq.items[0].u.node != n) continue;
        for (uint32_t k = 0; k < q->n_users; k++)
            if (bpcc_node_is_dequantize(q->users[k].node)) return q->users[k].node;
        for (uint32_t k = 0; k < q->n_users; k++)
            if (q->users[k].node->kind == BPCC_NODE_OUTPUT) return q;
    }
    memset(qp, 0, sizeof *qp);
    return NULL;
}

static bool comparable(const struct bpcc_node *n)
{
    return n->kind != BPCC_NODE_OUTPUT && n->kind != BPCC_NODE_GET_ATTR;
}

/* Whether float node f and quantized node q of the same name compute the same op: the same kind
** and target, or modules of one type, a reference quantized module standing for its float one
** (ConvReLU2d keeps its type when its conv becomes a reference one). A float model fused for
** another backend than the quantized one's has nodes that do not: conv2 a folded conv there, the
** conv+bn+add+relu of onednn's ConvAddReLU2d here. */
static bool same_op(const struct bpcc_node *f, const struct bpcc_node *q)
{
    if (f->kind != q->kind) return false;
    if (f->kind == BPCC_NODE_PLACEHOLDER) return true;
    if (f->kind != BPCC_NODE_CALL_MODULE) return !strcmp(f->target, q->target);
    const struct bpcc_module *fm = bpcc_node_module(f), *qm = bpcc_node_module(q);
    if (!fm || !qm || !strcmp(fm->type, qm->type)) return true;
    static const char ref[] = "torch.ao.nn.quantized.reference.", fl[] = "torch.nn.";
    return !strncmp(qm->type, ref, sizeof ref - 1) && !strncmp(fm->type, fl, sizeof fl - 1) &&
           !strcmp(qm->type + sizeof ref - 1, fm->type + sizeof fl - 1);
}

static enum bpcc_status float_hook(void *ud, const struct bpcc_node *n, struct xval *v, struct bpcc_diag *d)
{
    struct cmp *c = ud;
    uint32_t r = c->frow[n->id];
    if (!r || v->k != XV_TENSOR || v->u.t->qdtype != BPCC_DTYPE_NONE) return BPCC_OK;
    struct logged *l = &c->rows[r - 1];
    struct xval copy;
    if (bpcc_xval_copy(v, &copy)) return bpcc_diag_nomem(d);
    bpcc_xtensor_free(l->fvalue);
    l->fvalue = copy.u.t;
    return BPCC_OK;
}

static bool same_shape(const struct xtensor *a, const struct xtensor *b)
{
    return a->ndim == b->ndim && !memcmp(a->dims, b->dims, a->ndim * sizeof *a->dims);
}

static enum bpcc_status quant_hook(void *ud, const struct bpcc_node *n, struct xval *v, struct bpcc_diag *d)
{
    struct cmp *c = ud;
    uint32_t r = c->shadow_run ? c->qshadow[n->id] : c->qmeasure[n->id];
    if (!r) return BPCC_OK;
    struct logged *l = &c->rows[r - 1];
    if (!l->fvalue || v->k != XV_TENSOR) return BPCC_OK;
    const struct xtensor *y = v->u.t;
    if (!same_shape(y, l->fvalue)) {
        l->mismatch = true;
        return BPCC_OK;
    }
    if (!c->shadow_run) { /* a quantize node's value where it leaves the model quantized: its values */
        struct xtensor *dq;
        const float *values = bpcc_xtensor_values(y, &dq);
        if (!values) return bpcc_diag_nomem(d);
        acc_add(&l->prop, l->fvalue->data, values, y->numel);
        bpcc_xtensor_free(dq);
        return BPCC_OK;
    }
    if (y->qdtype != BPCC_DTYPE_NONE) return BPCC_OK;
    /* shadow: the op's output on float inputs, through its own quantize/dequantize ... */
    float *fq = NULL;
    if (l->out_q.kind != BPCC_QPARAMS_NONE) {
        fq = bpcc_malloc((y->numel ? y->numel : 1) * sizeof *fq);
        if (!fq) return bpcc_diag_nomem(d);
        if (!bpcc_fake_quantize(y->data, y->ndim, y->dims, &l->out_q, fq)) {
            bpcc_xfree(fq);
            fq = NULL;
        }
    }
    acc_add(&l->shadow, l->fvalue->data, fq ? fq : y->data, y->numel);
    bpcc_xfree(fq);
    /* ... and downstream ops see the float value */
    memcpy(v->u.t->data, l->fvalue->data, y->numel * sizeof(float));
    return BPCC_OK;
}

static void free_cmp(struct cmp *c)
{
    for (uint32_t i = 0; c->rows && i < c->n; i++) bpcc_xtensor_free(c->rows[i].fvalue);
    bpcc_xfree(c->rows);
    bpcc_xfree(c->frow);
    bpcc_xfree(c->qmeasure);
    bpcc_xfree(c->qshadow);
}

static enum bpcc_status run_batch(struct bpcc_exec *e, const struct bpcc_graph *g, const char *path, struct bpcc_diag *d)
{
    struct xbatch b;
    enum bpcc_status s = bpcc_batch_open(g, path, true, &b, d);
    if (s) return s;
    s = bpcc_exec_run(e, b.inputs, b.n, NULL, d);
    bpcc_batch_release(&b);
    return s;
}

enum bpcc_status bpcc_compare_outputs(const struct bpcc_graph *fg, const struct bpcc_graph *qg, const char *const *batches,
                                      uint32_t n_batches, int threads, bool shadow, struct bpcc_compare_report **out,
                                      struct bpcc_diag *d)
{
    *out = NULL;
    if (!n_batches) return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "no data to compare on");
    struct cmp c = {0};
    c.rows = bpcc_malloc((qg->n_nodes ? qg->n_nodes : 1) * sizeof *c.rows);
    c.frow = bpcc_malloc((fg->next_id + 1) * sizeof *c.frow);
    c.qmeasure = bpcc_malloc((qg->next_id + 1) * sizeof *c.qmeasure);
    c.qshadow = bpcc_malloc((qg->next_id + 1) * sizeof *c.qshadow);
    if (!c.rows || !c.frow || !c.qmeasure || !c.qshadow) {
        free_cmp(&c);
        return bpcc_diag_nomem(d);
    }
    memset(c.frow, 0, (fg->next_id + 1) * sizeof *c.frow);
    memset(c.qmeasure, 0, (qg->next_id + 1) * sizeof *c.qmeasure);
    memset(c.qshadow, 0, (qg->next_id + 1) * sizeof *c.qshadow);
    uint32_t n_other_op = 0;
    for (const struct bpcc_node *n = qg->first; n; n = n->next) {
        if (!comparable(n)) continue;
        const struct bpcc_node *f = bpcc_graph_find_node(fg, n->name);
        if (!f || !comparable(f) || c.frow[f->id]) continue;
        if (!same_op(f, n)) {
            n_other_op++;
            continue;
        }
        struct logged *l = &c.rows[c.n];
        memset(l, 0, sizeof *l);
        l->qnode = n;
        const struct bpcc_node *dq = output_dequantize(qg, n, &l->out_q);
        c.n++;
        c.frow[f->id] = c.n;
        c.qmeasure[(dq ? dq : n)->id] = c.n;
        c.qshadow[n->id] = c.n;
    }
    struct bpcc_exec *ef = NULL, *eq = NULL;
    enum bpcc_status s = bpcc_exec_new(fg, threads, &ef, d);
    if (!s) s = bpcc_exec_new(qg, threads, &eq, d);
    if (!s) {
        bpcc_exec_set_hook(ef, float_hook, &c);
        bpcc_exec_set_hook(eq, quant_hook, &c);
    }
    for (uint32_t b = 0; !s && b < n_batches; b++) {
        s = run_batch(ef, fg, batches[b], d);
        c.shadow_run = false;
        if (!s) s = run_batch(eq, qg, batches[b], d);
        c.shadow_run = true;
        if (!s && shadow) s = run_batch(eq, qg, batches[b], d);
        for (uint32_t i = 0; i < c.n; i++) {
            bpcc_xtensor_free(c.rows[i].fvalue);
            c.rows[i].fvalue = NULL;
        }
    }
    bpcc_exec_free(ef);
    bpcc_exec_free(eq);
    struct bpcc_compare_report *r = NULL;
    if (!s && !(r = report_new(shadow ? BPCC_COMPARE_SHADOW : BPCC_COMPARE_OUTPUTS, c.n))) s = bpcc_diag_nomem(d);
    for (uint32_t i = 0; !s && i < c.n; i++) {
        struct logged *l = &c.rows[i];
        if (l->mismatch || !l->prop.n) continue; /* not a float tensor in both, or shapes differ */
        struct bpcc_compare_row *row = &r->rows[r->n_rows++];
        row->name = row->float_name = l->qnode->name;
        const struct bpcc_module *m = l->qnode->kind == BPCC_NODE_CALL_MODULE ? bpcc_node_module(l->qnode) : NULL;
        row->what = m ? m->type : l->qnode->kind == BPCC_NODE_PLACEHOLDER ? "placeholder" : l->qnode->target;
        row->numel = l->prop.n;
        acc_result(&l->prop, &row->sqnr_db, &row->l2_error, &row->cosine, &row->max_abs_error);
        if (shadow) acc_result(&l->shadow, &row->shadow_sqnr_db, &row->shadow_l2_error, &row->shadow_cosine,
                               &row->shadow_max_abs_error);
    }
    free_cmp(&c);
    if (s) {
        bpcc_compare_report_free(r);
        return s;
    }
    r->n_batches = n_batches;
    r->n_unmatched = n_other_op;
    *out = r;
    return BPCC_OK;
}

/* }================================================ */
