/*
** batch.c — input batches: a safetensors file with one tensor per graph input, named after it,
** checked against the shapes the model was traced with, and loaded as interpreter values (float32;
** integers and bools as floats, exact below 2^24, bools marked; a quantized tensor, its integer
** values with its qparams beside them, quantized for a model that dequantizes the input itself and
** dequantized for any other).
*/
#include "exec.h"

#include <float.h>
#include <stdio.h>

void bpcc_batch_release(struct xbatch *b)
{
    for (uint32_t i = 0; b->inputs && i < b->n; i++) bpcc_xval_release(&b->inputs[i]);
    bpcc_xfree(b->inputs);
    bpcc_safetensors_close(b->st);
    memset(b, 0, sizeof *b);
}

/* A quantized batch tensor (docs/FORMAT.md): its integer values (uint8 for quint8, int8 for qint8,
** int32 for qint32) with `<name>.scale` (float32), `<name>.zero_point` (int64) and, per channel,
** `<name>.axis` (an int64 scalar) beside them; one scale and zero point, or one per channel. */
struct batch_qparams {
    enum bpcc_dtype qdtype; /* NONE: not quantized */
    int64_t axis;           /* -1 per tensor */
    float *scale;           /* malloc'd, owned until given to a tensor */
    int64_t *zero_point;
};

static void qparams_release(struct batch_qparams *q)
{
    bpcc_xfree(q->scale);
    bpcc_xfree(q->zero_point);
    q->scale = NULL;
    q->zero_point = NULL;
    q->qdtype = BPCC_DTYPE_NONE;
}

/* the tensor `name` (key + suffix) of the batch, UINT32_MAX when absent or when the key is too long */
static uint32_t find_beside(const struct bpcc_safetensors *st, const char *name, const char *suffix)
{
    char key[1024];
    int n = snprintf(key, sizeof key, "%s%s", name, suffix);
    return n > 0 && (size_t)n < sizeof key ? bpcc_safetensors_find(st, key) : UINT32_MAX;
}

/* The qparams stored beside tensor `name` (dtype dt, nd dims), checked, into *q (qdtype NONE when it
** has none) */
static enum bpcc_status batch_qparams(const struct bpcc_safetensors *st, const char *path, const char *name,
                                      enum bpcc_dtype dt, uint32_t nd, const int64_t *dims, struct batch_qparams *q,
                                      struct bpcc_diag *d)
{
    memset(q, 0, sizeof *q);
    q->qdtype = BPCC_DTYPE_NONE;
    q->axis = -1;
    uint32_t is = find_beside(st, name, ".scale"), iz = find_beside(st, name, ".zero_point"),
             ia = find_beside(st, name, ".axis");
    if (is == UINT32_MAX && iz == UINT32_MAX && ia == UINT32_MAX) return BPCC_OK;
    if (is == UINT32_MAX || iz == UINT32_MAX)
        return bpcc_diag_error(d, BPCC_ERR_FORMAT, path, 0, 0, "tensor '%s' has '%s.%s' beside it but no '%s.%s': a "
                               "quantized tensor has both", name, name, is == UINT32_MAX ? "zero_point" : "scale", name,
                               is == UINT32_MAX ? "scale" : "zero_point");
    static const enum bpcc_dtype qtypes[] = {BPCC_DTYPE_QUINT8, BPCC_DTYPE_QINT8, BPCC_DTYPE_QINT32};
    enum bpcc_dtype qdtype = BPCC_DTYPE_NONE;
    for (uint32_t i = 0; i < 3; i++)
        if (bpcc_dtype_carrier(qtypes[i]) == dt) qdtype = qtypes[i];
    int64_t lo, hi;
    if (!bpcc_xqrange(qdtype, &lo, &hi))
        return bpcc_diag_error(d, BPCC_ERR_FORMAT, path, 0, 0, "tensor '%s' is %s with qparams beside it: a quantized "
                               "tensor holds its integer values as uint8 (quint8), int8 (qint8) or int32 (qint32)", name,
                               bpcc_dtype_name(dt));
    const char *what;
    enum bpcc_dtype sdt, zdt, adt = BPCC_DTYPE_I64;
    uint32_t snd, znd, and_ = 0;
    const int64_t *sdims, *zdims, *adims;
    const void *sdata, *zdata, *adata = NULL;
    size_t snb, znb, anb;
    enum bpcc_status s = bpcc_safetensors_get(st, is, &what, &sdt, &snd, &sdims, &sdata, &snb);
    if (!s) s = bpcc_safetensors_get(st, iz, &what, &zdt, &znd, &zdims, &zdata, &znb);
    if (!s && ia != UINT32_MAX) s = bpcc_safetensors_get(st, ia, &what, &adt, &and_, &adims, &adata, &anb);
    if (s) return s;
    if (adata) {
        if (adt != BPCC_DTYPE_I64 || and_ != 0)
            return bpcc_diag_error(d, BPCC_ERR_FORMAT, path, 0, 0, "'%s.axis' must be an int64 scalar", name);
        memcpy(&q->axis, adata, sizeof q->axis);
        if (q->axis < 0 || q->axis >= (int64_t)nd)
            return bpcc_diag_error(d, BPCC_ERR_FORMAT, path, 0, 0, "'%s.axis' is %lld; tensor '%s' has %u dimensions",
                                   name, (long long)q->axis, name, nd);
    }
    uint64_t n = q->axis < 0 ? 1 : (uint64_t)dims[q->axis];
    if (sdt != BPCC_DTYPE_F32 || snd > 1 || snb != n * sizeof(float) || zdt != BPCC_DTYPE_I64 || znd > 1 ||
        znb != n * sizeof(int64_t))
        return bpcc_diag_error(d, BPCC_ERR_FORMAT, path, 0, 0, "'%s.scale' and '%s.zero_point' must be %llu float32 and "
                               "%llu int64 value%s (%s)", name, name, (unsigned long long)n, (unsigned long long)n,
                               n == 1 ? "" : "s", q->axis < 0 ? "per tensor, without '.axis'" : "one per channel along '.axis'");
    q->scale = bpcc_malloc((n ? n : 1) * sizeof *q->scale); /* a channel dimension may be empty */
    q->zero_point = bpcc_malloc((n ? n : 1) * sizeof *q->zero_point);
    if (!q->scale || !q->zero_point) {
        qparams_release(q);
        return bpcc_diag_nomem(d);
    }
    memcpy(q->scale, sdata, n * sizeof *q->scale);
    memcpy(q->zero_point, zdata, n * sizeof *q->zero_point);
    q->qdtype = qdtype;
    for (uint64_t c = 0; c < n; c++)
        if (!(q->scale[c] > 0 && q->scale[c] <= FLT_MAX) || q->zero_point[c] < lo || q->zero_point[c] > hi) {
            s = bpcc_diag_error(d, BPCC_ERR_FORMAT, path, 0, 0, "tensor '%s': scale %g and zero point %lld%s: scales must "
                                "be positive and finite, zero points within %s's range", name, (double)q->scale[c],
                                (long long)q->zero_point[c], n > 1 ? " of a channel" : "", bpcc_dtype_name(q->qdtype));
            qparams_release(q);
            return s;
        }
    return BPCC_OK;
}

/* whether the model takes input p quantized: all its users dequantize it (a model converted with
** the input quantized) */
static bool takes_quantized(const struct bpcc_node *p)
{
    for (uint32_t i = 0; i < p->n_users; i++)
        if (!bpcc_node_is_dequantize(p->users[i].node)) return false;
    return p->n_users > 0;
}

/* Input k (b->inputs grown as needed, its capacity *cap) from the batch tensor of placeholder p: a
** quantized one (q) stays quantized where the model dequantizes the input itself, and is given
** dequantized to a model that takes floats there (calibration, a float model compared); q's arrays
** go to the tensor (NULL in q then) */
static enum bpcc_status load_input(struct xbatch *b, uint32_t *k, uint32_t *cap, const struct bpcc_node *p,
                                   enum bpcc_dtype dt, uint32_t nd, const int64_t *dims, const void *data,
                                   struct batch_qparams *q, struct bpcc_diag *d)
{
    if (*k == *cap) {
        uint32_t ncap = *cap ? 2 * *cap : 4;
        struct xval *in = bpcc_realloc(b->inputs, ncap * sizeof *in);
        if (!in) return bpcc_diag_nomem(d);
        b->inputs = in;
        *cap = ncap;
    }
    struct xtensor *t = bpcc_xtensor_new(nd, dims);
    if (!t) return bpcc_diag_nomem(d);
    if (dt == BPCC_DTYPE_F32) memcpy(t->data, data, t->numel * sizeof(float));
    else bpcc_xtensor_from_integers(t, dt, data);
    if (q->qdtype != BPCC_DTYPE_NONE) {
        t->qdtype = q->qdtype;
        t->qaxis = q->axis;
        t->qscale = q->scale;
        t->qzp = q->zero_point;
        q->scale = NULL;
        q->zero_point = NULL;
        if (!takes_quantized(p)) {
            struct xtensor *f = bpcc_xtensor_dequantized(t);
            bpcc_xtensor_free(t);
            if (!(t = f)) return bpcc_diag_nomem(d);
        }
    }
    b->inputs[(*k)++] = (struct xval){.k = XV_TENSOR, .u.t = t};
    return BPCC_OK;
}

/* a note naming the tensors the file holds (the first few): a batch whose input has another name
** (`input` for `x`) shows at once what to rename */
static void note_tensors(const struct bpcc_safetensors *st, struct bpcc_diag *d)
{
    uint32_t n = bpcc_safetensors_count(st);
    char list[400];
    size_t len = 0;
    uint32_t shown = 0;
    for (uint32_t i = 0; i < n && len < sizeof list - 1; i++) {
        const char *name;
        if (bpcc_safetensors_get(st, i, &name, NULL, NULL, NULL, NULL, NULL)) break;
        size_t want = strlen(name) + 4;
        if (shown == 5 || len + want >= sizeof list - 1) break;
        len += (size_t)snprintf(list + len, sizeof list - len, "%s'%s'", shown ? ", " : "", name);
        shown++;
    }
    if (!n) bpcc_diag_note(d, 0, 0, "the file holds no tensor");
    else if (shown < n) bpcc_diag_note(d, 0, 0, "the file holds %s and %u more", list, n - shown);
    else bpcc_diag_note(d, 0, 0, "the file holds %s", list);
}

/* Open a batch and check it: one float32, integer or bool tensor per graph input, or a quantized one, named after
** it, of the kind (float or quantized, or integers and bools) and the shape the model was traced with (when it
** records them; the batch dimension may differ). */
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
            note_tensors(b->st, d);
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
        struct batch_qparams q;
        if ((s = batch_qparams(b->st, path, name, dt, nd, dims, &q, d))) break;
        /* the kind the model was traced with: float values for a float input (an image's bytes
        ** would calibrate on 0..255 where the model takes normalized values, and PyTorch's
        ** convolutions refuse them; quantized ones stand for float values), integers or bools for
        ** token ids and masks */
        bool is_float = q.qdtype != BPCC_DTYPE_NONE || !bpcc_dtype_is_integral(dt);
        if (m->kind == BPCC_VAL_TTYPE && bpcc_dtype_is_integral(m->u.ttype.dtype) == is_float &&
            (m->u.ttype.dtype == BPCC_DTYPE_F32 || bpcc_dtype_is_integral(m->u.ttype.dtype))) {
            s = bpcc_diag_error(d, BPCC_ERR_IO, path, 0, 0, "tensor '%s' is %s%s; the model input '%s' was traced as %s: "
                                "give it %s", name, q.qdtype != BPCC_DTYPE_NONE ? "quantized " : "",
                                bpcc_dtype_name(q.qdtype != BPCC_DTYPE_NONE ? q.qdtype : dt), p->name,
                                bpcc_dtype_name(m->u.ttype.dtype),
                                is_float ? "integers or bools"
                                         : "float32 values, as the model takes them (normalized, not raw bytes)");
            qparams_release(&q);
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
            }
        }
        if (!s && load) s = load_input(b, &k, &cap, p, dt, nd, dims, data, &q, d);
        qparams_release(&q);
        if (!s) k += !load;
    }
    b->n = k;
    if (s) bpcc_batch_release(b);
    return s;
}

