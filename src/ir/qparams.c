/*
** qparams.c — the quantization parameters a model carries, read off the IR: a quantize node's
** scale / zero point (root buffers through get_attr, or literals), a calibrated observer's
** scale / zero_point tensors, a reference quantized module's weight_* buffers. One reader for
** `bpcc show`, the numeric suite and the interpreter's reference modules.
*/
#include "ir.h"

#include <stdio.h>
#include <string.h>

static double num(const struct bpcc_tensor *t, uint64_t i)
{
    switch (t->dtype) {
    case BPCC_DTYPE_F32: return ((const float *)t->data)[i];
    case BPCC_DTYPE_F64: return ((const double *)t->data)[i];
    case BPCC_DTYPE_I64: return (double)((const int64_t *)t->data)[i];
    case BPCC_DTYPE_I32: return ((const int32_t *)t->data)[i];
    default: return 0;
    }
}

static bool numeric(const struct bpcc_tensor *t)
{
    return t && t->data && (t->dtype == BPCC_DTYPE_F32 || t->dtype == BPCC_DTYPE_F64 || t->dtype == BPCC_DTYPE_I64 ||
                            t->dtype == BPCC_DTYPE_I32);
}

double bpcc_qparams_scale(const struct bpcc_qparams *q, uint64_t i)
{
    if (i >= q->n) return 0;
    return q->scale ? num(q->scale, q->scale->ndim ? i : 0) : q->scale_value;
}

double bpcc_qparams_zero_point(const struct bpcc_qparams *q, uint64_t i)
{
    if (i >= q->n) return 0;
    return q->zero_point ? num(q->zero_point, q->zero_point->ndim ? i : 0) : (double)q->zero_point_value;
}

/* the number of values of a 0-d or 1-d numeric tensor, 0 when it is neither */
static uint64_t count(const struct bpcc_tensor *t)
{
    if (!numeric(t) || t->ndim > 1) return 0;
    return t->ndim ? (uint64_t)t->dims[0] : 1;
}

/* scale and zero point from two tensors: per channel when they are 1-d */
static bool from_tensors(const struct bpcc_tensor *s, const struct bpcc_tensor *z, bool per_channel, int64_t axis,
                         struct bpcc_qparams *q)
{
    uint64_t ns = count(s), nz = count(z);
    if (!ns || ns != nz) return false;
    q->scale = s;
    q->zero_point = z;
    q->n = ns;
    q->kind = per_channel ? BPCC_QPARAMS_PER_CHANNEL : BPCC_QPARAMS_PER_TENSOR;
    q->axis = per_channel ? axis : -1;
    if (!per_channel && ns != 1) return false;
    return true;
}

/* a tensor-valued argument: a get_attr node naming a tensor of a module, or one left implicit */
static const struct bpcc_tensor *arg_tensor(const struct bpcc_graph *g, const struct bpcc_value *v)
{
    const char *target = v->kind == BPCC_VAL_ATTR ? v->u.attr.target
                         : v->kind == BPCC_VAL_NODE && v->u.node->kind == BPCC_NODE_GET_ATTR ? v->u.node->target
                                                                                               : NULL;
    return target ? bpcc_graph_attr_tensor(g, target) : NULL;
}

static const struct bpcc_value *arg(const struct bpcc_node *n, uint32_t i, const char *kw)
{
    if (i < n->args.n) return &n->args.u.seq.items[i];
    return n->kwargs ? bpcc_value_get(n->kwargs, kw) : NULL;
}

/* q cleared (kind NONE, no axis): the answer when there are no qparams */
static bool none(struct bpcc_qparams *q)
{
    memset(q, 0, sizeof *q);
    q->axis = -1;
    return false;
}

static bool is_qdtype(enum bpcc_dtype t)
{
    return t == BPCC_DTYPE_QUINT8 || t == BPCC_DTYPE_QINT8 || t == BPCC_DTYPE_QINT32 || t == BPCC_DTYPE_QUINT4X2;
}

static bool quantize_node(const struct bpcc_graph *g, const struct bpcc_node *n, struct bpcc_qparams *q)
{
    const char *t = n->target;
    if (n->kind == BPCC_NODE_CALL_METHOD && !strcmp(t, "to")) {
        const struct bpcc_value *dt = arg(n, 1, "dtype");
        if (!dt || dt->kind != BPCC_VAL_DTYPE || dt->u.dtype != BPCC_DTYPE_F16) return false;
        q->kind = BPCC_QPARAMS_FLOAT16;
        q->dtype = BPCC_DTYPE_F16;
        return true;
    }
    if (n->kind != BPCC_NODE_CALL_FUNCTION) return false;
    if (!strcmp(t, "torch.quantize_per_tensor_dynamic")) {
        const struct bpcc_value *dt = arg(n, 1, "dtype");
        if (!dt || dt->kind != BPCC_VAL_DTYPE) return false;
        q->kind = BPCC_QPARAMS_DYNAMIC;
        q->dtype = dt->u.dtype;
        return true;
    }
    bool pc = !strcmp(t, "torch.quantize_per_channel");
    if (!pc && strcmp(t, "torch.quantize_per_tensor")) return false;
    const struct bpcc_value *s = arg(n, 1, "scale"), *z = arg(n, 2, pc ? "zero_points" : "zero_point");
    const struct bpcc_value *ax = pc ? arg(n, 3, "axis") : NULL, *dt = arg(n, pc ? 4 : 3, "dtype");
    if (!s || !z || !dt || dt->kind != BPCC_VAL_DTYPE || (pc && (!ax || ax->kind != BPCC_VAL_INT))) return false;
    q->dtype = dt->u.dtype;
    if (!pc && (s->kind == BPCC_VAL_FLOAT || s->kind == BPCC_VAL_INT) && z->kind == BPCC_VAL_INT) {
        q->kind = BPCC_QPARAMS_PER_TENSOR;
        q->n = 1;
        q->scale_value = s->kind == BPCC_VAL_FLOAT ? s->u.f : (double)s->u.i;
        q->zero_point_value = z->u.i;
        return true;
    }
    return from_tensors(arg_tensor(g, s), arg_tensor(g, z), pc, pc ? ax->u.i : -1, q);
}

bool bpcc_node_is_dequantize(const struct bpcc_node *n)
{
    return (n->kind == BPCC_NODE_CALL_METHOD && !strcmp(n->target, "dequantize")) ||
           (n->kind == BPCC_NODE_CALL_FUNCTION && !strcmp(n->target, "torch.dequantize"));
}

bool bpcc_node_qparams(const struct bpcc_graph *g, const struct bpcc_node *n, struct bpcc_qparams *q)
{
    none(q);
    if (n->kind != BPCC_NODE_CALL_MODULE) return quantize_node(g, n, q) || none(q);
    /* a calibrated observer: torch.ao.quantization.<...Observer> with scale and zero_point */
    const struct bpcc_module *m = bpcc_graph_find_module(g, n->target);
    if (!m || strncmp(m->type, "torch.ao.quantization.", 22)) return false;
    const struct bpcc_value *dt = bpcc_module_attr(m, "dtype"), *qs = bpcc_module_attr(m, "qscheme");
    const struct bpcc_value *ax = bpcc_module_attr(m, "ch_axis");
    if (!dt || dt->kind != BPCC_VAL_DTYPE || !is_qdtype(dt->u.dtype)) return false;
    bool pc = qs && qs->kind == BPCC_VAL_SYMBOL && strstr(qs->u.s, "per_channel");
    q->dtype = dt->u.dtype;
    return from_tensors(bpcc_module_tensor(m, "scale"), bpcc_module_tensor(m, "zero_point"), pc,
                        ax && ax->kind == BPCC_VAL_INT ? ax->u.i : 0, q) ||
           none(q);
}

/* what a reference module keeps for one weight, by the attribute and buffer names k: its
** qscheme, dtype, scale, zero point and axis */
static bool weight_qparams(const struct bpcc_module *m, const char *const k[5], struct bpcc_qparams *q)
{
    none(q);
    const struct bpcc_value *qs = bpcc_module_attr(m, k[0]), *dt = bpcc_module_attr(m, k[1]);
    if (!dt || dt->kind != BPCC_VAL_DTYPE) return false;
    q->dtype = dt->u.dtype;
    if (dt->u.dtype == BPCC_DTYPE_F32) return none(q); /* a float weight: not quantized */
    if (dt->u.dtype == BPCC_DTYPE_F16) {
        q->kind = BPCC_QPARAMS_FLOAT16;
        return true;
    }
    if (qs && qs->kind == BPCC_VAL_NONE) return none(q); /* no qscheme: the weight is used as it is */
    bool pc = qs && qs->kind == BPCC_VAL_SYMBOL && strstr(qs->u.s, "per_channel");
    const struct bpcc_tensor *ax = bpcc_module_tensor(m, k[4]);
    int64_t axis = count(ax) == 1 ? (int64_t)num(ax, 0) : 0;
    return from_tensors(bpcc_module_tensor(m, k[2]), bpcc_module_tensor(m, k[3]), pc, axis, q) || none(q);
}

/* <wn>_qscheme, <wn>_dtype, <wn>_scale, <wn>_zero_point, <wn>_axis (an RNN's weight_ih_l0 ...) */
bool bpcc_module_weight_qparams_of(const struct bpcc_module *m, const char *wn, struct bpcc_qparams *q)
{
    char k[5][160];
    static const char *const sfx[5] = {"qscheme", "dtype", "scale", "zero_point", "axis"};
    for (int i = 0; i < 5; i++)
        if ((size_t)snprintf(k[i], sizeof k[i], "%s_%s", wn, sfx[i]) >= sizeof k[i]) return none(q);
    return weight_qparams(m, (const char *const[5]){k[0], k[1], k[2], k[3], k[4]}, q);
}

bool bpcc_module_next_weight_qparams(const struct bpcc_module *m, uint32_t *i, const char **name, struct bpcc_qparams *q)
{
    while (*i < m->n_tensors) {
        const struct module_tensor *t = &m->tensors[(*i)++];
        if (t->role == BPCC_TENSOR_PARAM && !strncmp(t->name, "weight_", 7) && bpcc_module_weight_qparams_of(m, t->name, q)) {
            *name = t->name;
            return true;
        }
    }
    return false;
}

/* the common case, every reference module's forward in the interpreter: names without formatting */
bool bpcc_module_weight_qparams(const struct bpcc_module *m, struct bpcc_qparams *q)
{
    static const char *const k[5] = {"weight_qscheme", "weight_dtype", "weight_scale", "weight_zero_point", "weight_axis"};
    return weight_qparams(m, k, q);
}

const struct bpcc_module *bpcc_node_weight_module(const struct bpcc_graph *g, const struct bpcc_node *n)
{
    if (n->kind != BPCC_NODE_CALL_MODULE) return NULL;
    const struct bpcc_module *m = bpcc_graph_find_module(g, n->target);
    if (!m) return NULL;
    struct bpcc_qparams q;
    if (bpcc_module_weight_qparams(m, &q)) return m;
    /* a fused container: the reference module is its first child */
    if (m->first_child && bpcc_module_weight_qparams(m->first_child, &q)) return m->first_child;
    return NULL;
}

const char *bpcc_qparams_kind_name(enum bpcc_qparams_kind k)
{
    switch (k) {
    case BPCC_QPARAMS_PER_TENSOR: return "per_tensor";
    case BPCC_QPARAMS_PER_CHANNEL: return "per_channel";
    case BPCC_QPARAMS_DYNAMIC: return "dynamic";
    case BPCC_QPARAMS_FLOAT16: return "float16";
    default: return "none";
    }
}

void bpcc_qparams_format(const struct bpcc_qparams *q, char *buf, size_t size)
{
    if (!size) return;
    buf[0] = 0;
    if (q->kind == BPCC_QPARAMS_FLOAT16) {
        snprintf(buf, size, "float16");
    } else if (q->kind == BPCC_QPARAMS_DYNAMIC) {
        snprintf(buf, size, "dynamic %s", bpcc_dtype_name(q->dtype));
    } else if (q->kind == BPCC_QPARAMS_PER_TENSOR) {
        snprintf(buf, size, "%s scale=%.6g zp=%.6g", bpcc_dtype_name(q->dtype), bpcc_qparams_scale(q, 0),
                 bpcc_qparams_zero_point(q, 0));
    } else if (q->kind == BPCC_QPARAMS_PER_CHANNEL) {
        double smin = 0, smax = 0, zmin = 0, zmax = 0;
        for (uint64_t i = 0; i < q->n; i++) {
            double s = bpcc_qparams_scale(q, i), z = bpcc_qparams_zero_point(q, i);
            if (!i || s < smin) smin = s;
            if (!i || s > smax) smax = s;
            if (!i || z < zmin) zmin = z;
            if (!i || z > zmax) zmax = z;
        }
        if (zmin == zmax)
            snprintf(buf, size, "%s axis=%lld x%llu scale=%.4g..%.4g zp=%.6g", bpcc_dtype_name(q->dtype),
                     (long long)q->axis, (unsigned long long)q->n, smin, smax, zmin);
        else
            snprintf(buf, size, "%s axis=%lld x%llu scale=%.4g..%.4g zp=%.6g..%.6g", bpcc_dtype_name(q->dtype),
                     (long long)q->axis, (unsigned long long)q->n, smin, smax, zmin, zmax);
    }
}
