/*
** qconfig.c — qconfig mappings in YAML (PyTorch's QConfigMapping: global, object_type,
** module_name_regex, module_name, module_name_object_type_order; `null` keeps float) with
** observer specs checked as PyTorch 1.13's observer constructors check them, the effective
** quantization range computed as calculate_qmin_qmax does, the built-in mappings, and JSON.
*/
#include "qconfig.h"

#include "../config/yschema.h"
#include "../io/json.h"


static const char *const class_names[OC_COUNT + 1] = {
    "MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver", "HistogramObserver", "PlaceholderObserver",
    "FixedQParamsObserver", "NoopObserver", "ReuseInputObserver", NULL};

static const char *const qscheme_names[QS_COUNT + 1] = {
    "per_tensor_affine", "per_tensor_symmetric", "per_channel_affine", "per_channel_symmetric",
    "per_channel_affine_float_qparams", NULL};

/* constructor keyword arguments per class (PyTorch 1.13's signatures) */
static const char *const keys_minmax[] = {"observer", "dtype", "qscheme", "reduce_range", "quant_min", "quant_max", "eps", NULL};
static const char *const keys_ma_minmax[] = {"observer", "averaging_constant", "dtype", "qscheme", "reduce_range", "quant_min", "quant_max", "eps", NULL};
static const char *const keys_pc_minmax[] = {"observer", "ch_axis", "dtype", "qscheme", "reduce_range", "quant_min", "quant_max", "eps", NULL};
static const char *const keys_ma_pc_minmax[] = {"observer", "averaging_constant", "ch_axis", "dtype", "qscheme", "reduce_range", "quant_min", "quant_max", "eps", NULL};
static const char *const keys_histogram[] = {"observer", "bins", "upsample_rate", "dtype", "qscheme", "reduce_range", "quant_min", "quant_max", "eps", NULL};
static const char *const keys_placeholder[] = {"observer", "dtype", "custom_op_name", "compute_dtype", "is_dynamic", NULL};
static const char *const keys_fixed[] = {"observer", "scale", "zero_point", "dtype", "qscheme", "quant_min", "quant_max", NULL};
static const char *const keys_noop[] = {"observer", "dtype", "custom_op_name", NULL};
static const char *const keys_reuse[] = {"observer", NULL};
static const char *const *const class_keys[OC_COUNT] = {keys_minmax, keys_ma_minmax, keys_pc_minmax,
                                                        keys_ma_pc_minmax, keys_histogram, keys_placeholder,
                                                        keys_fixed, keys_noop, keys_reuse};

static const char *const fq_names[FQ_COUNT + 1] = {"", "FakeQuantize", "FusedMovingAvgObsFakeQuantize",
                                                   "FixedQParamsFakeQuantize", NULL};

const char *bpcc_obs_class_name(enum obs_class c) { return (unsigned)c < OC_COUNT ? class_names[c] : "?"; }
const char *bpcc_fq_name(enum fq_kind k) { return k > FQ_NONE && k < FQ_COUNT ? fq_names[k] : NULL; }
const char *bpcc_qscheme_name(enum qscheme q) { return (unsigned)q < QS_COUNT ? qscheme_names[q] : "?"; }

struct qloader {
    struct yschema ys;
    struct bpcc_qconfig_mapping *m;
    const char *where;     /* the enclosing rule, for the note */
    uint32_t where_line, where_col;
};

static void note_rule(void *ud)
{
    struct qloader *Q = ud;
    if (Q->where) bpcc_diag_note(Q->ys.d, Q->where_line, Q->where_col, "in %s", Q->where);
}

static bool is_per_tensor(enum qscheme q) { return q == QS_PER_TENSOR_AFFINE || q == QS_PER_TENSOR_SYMMETRIC; }

/* calculate_qmin_qmax (torch/ao/quantization/utils.py) */
static bool qrange(struct qloader *Q, const struct ynode *at, struct observer_spec *o)
{
    if (o->has_customized_qrange) {
        if (!(o->quant_min <= 0 && 0 <= o->quant_max))
            return ys_err(&Q->ys, at, "the quantization range [%lld, %lld] must include 0 (as PyTorch requires)",
                          (long long)o->quant_min, (long long)o->quant_max);
        if (o->quant_min >= o->quant_max)
            return ys_err(&Q->ys, at, "quant_min %lld must be below quant_max %lld",
                          (long long)o->quant_min, (long long)o->quant_max);
        int64_t len = o->quant_max - o->quant_min + 1;
        if ((o->dtype == BPCC_DTYPE_QINT8 || o->dtype == BPCC_DTYPE_QUINT8) && len > 256)
            return ys_err(&Q->ys, at, "quantization range of %lld values is too wide for %s (at most 256)",
                          (long long)len, bpcc_dtype_name(o->dtype));
        if (o->dtype == BPCC_DTYPE_QINT32 && len > ((int64_t)1 << 32))
            return ys_err(&Q->ys, at, "quantization range is too wide for qint32");
        if (o->reduce_range) {
            /* Python's floor division */
            o->quant_min = o->quant_min >= 0 ? o->quant_min / 2 : -((-o->quant_min + 1) / 2);
            o->quant_max = o->quant_max >= 0 ? o->quant_max / 2 : -((-o->quant_max + 1) / 2);
        }
        return true;
    }
    switch (o->dtype) {
    case BPCC_DTYPE_QINT8: o->quant_min = o->reduce_range ? -64 : -128; o->quant_max = o->reduce_range ? 63 : 127; break;
    case BPCC_DTYPE_QUINT8: o->quant_min = 0; o->quant_max = o->reduce_range ? 127 : 255; break;
    case BPCC_DTYPE_QINT32: o->quant_min = INT32_MIN; o->quant_max = INT32_MAX; break;
    default: o->quant_min = 0; o->quant_max = 15; break;
    }
    return true;
}

/* `fake_quantize: <class>` of an observer spec (FQ_NONE without the key); false on an unknown one */
static bool fake_quantize_kind(struct qloader *Q, const struct ynode *n, enum fq_kind *out)
{
    *out = FQ_NONE;
    const struct ynode *v = n->kind == YNODE_MAP ? bpcc_ynode_get(n, "fake_quantize") : NULL;
    if (!v) return true;
    if (!ys_want_kind(&Q->ys, v, YNODE_SCALAR, "a fake quantize class")) return false;
    const char *name = v->str;
    if (!strncmp(name, "torch.ao.quantization.", 22)) name += 22;
    if (!strncmp(name, "fake_quantize.", 14)) name += 14;
    for (int k = FQ_NONE + 1; k < FQ_COUNT; k++)
        if (!strcmp(name, fq_names[k])) {
            *out = (enum fq_kind)k;
            return true;
        }
    char list[256];
    return ys_err(&Q->ys, v, "unknown fake quantize '%s' (valid: %s)", v->str, ys_one_of(fq_names + 1, list, sizeof list));
}

static bool observer(struct qloader *Q, const struct ynode *n, const char *what, struct observer_spec *o)
{
    memset(o, 0, sizeof *o);
    o->line = n->line;
    o->col = n->col;
    enum fq_kind fq;
    if (!fake_quantize_kind(Q, n, &fq)) return false;
    const struct ynode *cls_node = n;
    const char *cname = NULL;
    if (n->kind == YNODE_MAP) {
        cls_node = bpcc_ynode_get(n, "observer");
        /* a fake quantize's default observer (FakeQuantize's and the fused one's) */
        if (!cls_node && (fq == FQ_FAKE_QUANTIZE || fq == FQ_FUSED_MOVING_AVG)) cname = "MovingAverageMinMaxObserver";
        else if (!cls_node) return ys_err(&Q->ys, n, "%s needs an 'observer' (e.g. MinMaxObserver)", what);
    }
    if (!cname && !ys_want_kind(&Q->ys, cls_node, YNODE_SCALAR, "an observer class")) return false;
    if (!cname) cname = cls_node->str;
    if (!strncmp(cname, "torch.ao.quantization.", 22)) cname += 22;
    if (!strncmp(cname, "observer.", 9)) cname += 9;
    int cls = -1;
    for (int i = 0; i < OC_COUNT; i++)
        if (!strcmp(cname, class_names[i])) cls = i;
    if (cls < 0) {
        char list[512];
        return ys_err(&Q->ys, cls_node, "unknown observer '%s' (valid: %s)", cls_node->str,
                      ys_one_of(class_names, list, sizeof list));
    }
    o->cls = (enum obs_class)cls;
    o->fake_quantize = fq;
    if (n->kind == YNODE_MAP) {
        char where[96];
        snprintf(where, sizeof where, "%s%s%s arguments", fq ? fq_names[fq] : "", fq ? " of " : "", class_names[cls]);
        /* the observer's keywords, and with a fake quantize its class (its quant_min and quant_max
        ** are the observer's: FakeQuantize passes them on) */
        const char *keys[16];
        size_t nk = 0;
        for (const char *const *k = class_keys[cls]; *k && nk < BPCC_ARRAY_LEN(keys) - 2; k++) keys[nk++] = *k;
        if (fq) keys[nk++] = "fake_quantize";
        keys[nk] = NULL;
        ys_check_keys(&Q->ys, n, keys, where);
    }
    /* what the fake quantizes' constructors accept */
    if (fq == FQ_FUSED_MOVING_AVG && cls != OC_MOVING_AVERAGE_MINMAX && cls != OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX)
        return ys_err(&Q->ys, cls_node ? cls_node : n, "FusedMovingAvgObsFakeQuantize takes a MovingAverageMinMaxObserver or "
                      "a MovingAveragePerChannelMinMaxObserver, not %s", class_names[cls]);
    if (fq == FQ_FIXED_QPARAMS && cls != OC_FIXED_QPARAMS)
        return ys_err(&Q->ys, cls_node ? cls_node : n, "FixedQParamsFakeQuantize takes a FixedQParamsObserver, not %s",
                      class_names[cls]);
    if (fq == FQ_FAKE_QUANTIZE && (cls == OC_PLACEHOLDER || cls == OC_NOOP || cls == OC_REUSE_INPUT || cls == OC_FIXED_QPARAMS))
        return ys_err(&Q->ys, cls_node ? cls_node : n, "FakeQuantize takes an observer with statistics (MinMax, "
                      "MovingAverage, PerChannel or Histogram), not %s", class_names[cls]);
    /* defaults of the constructor */
    o->dtype = o->cls == OC_PLACEHOLDER ? BPCC_DTYPE_F32 : o->cls == OC_NOOP ? BPCC_DTYPE_F16 : BPCC_DTYPE_QUINT8;
    o->qscheme = (o->cls == OC_PER_CHANNEL_MINMAX || o->cls == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX)
                     ? QS_PER_CHANNEL_AFFINE : QS_PER_TENSOR_AFFINE;
    o->eps = 1.1920928955078125e-07f;
    o->averaging_constant = 0.01;
    o->bins = 2048;
    o->upsample_rate = 128;
    o->custom_op_name = "";
    bool ok = true;
    const struct ynode *v, *qmin = NULL, *qmax = NULL;
    if (n->kind == YNODE_MAP) {
        if ((v = bpcc_ynode_get(n, "dtype"))) ok &= ys_dtype(&Q->ys, v, "dtype", &o->dtype);
        if ((v = bpcc_ynode_get(n, "qscheme"))) {
            const char *q = v->kind == YNODE_SCALAR ? v->str : "";
            if (!strncmp(q, "torch.", 6)) q += 6;
            int k = -1;
            for (int i = 0; i < QS_COUNT; i++)
                if (!strcmp(q, qscheme_names[i])) k = i;
            if (k < 0) {
                char list[256];
                ok = ys_err(&Q->ys, v, "unknown qscheme '%s' (valid: %s)", v->kind == YNODE_SCALAR ? v->str : "?",
                            ys_one_of(qscheme_names, list, sizeof list));
            } else {
                o->qscheme = (enum qscheme)k;
            }
        }
        if ((v = bpcc_ynode_get(n, "reduce_range"))) ok &= ys_bool(&Q->ys, v, "reduce_range", &o->reduce_range);
        if ((qmin = bpcc_ynode_get(n, "quant_min")) && !ys_is_null(qmin)) ok &= ys_int(&Q->ys, qmin, "quant_min", &o->quant_min);
        else qmin = NULL;
        if ((qmax = bpcc_ynode_get(n, "quant_max")) && !ys_is_null(qmax)) ok &= ys_int(&Q->ys, qmax, "quant_max", &o->quant_max);
        else qmax = NULL;
        if ((v = bpcc_ynode_get(n, "eps"))) {
            double e;
            if ((ok &= ys_number(&Q->ys, v, "eps", &e))) {
                if (!(e > 0)) ok = ys_err(&Q->ys, v, "eps must be positive");
                o->eps = (float)e;
            }
        }
        if ((v = bpcc_ynode_get(n, "averaging_constant"))) {
            ok &= ys_number(&Q->ys, v, "averaging_constant", &o->averaging_constant);
            if (ok && !(o->averaging_constant > 0 && o->averaging_constant <= 1))
                ok = ys_err(&Q->ys, v, "averaging_constant must be in (0, 1]");
        }
        if ((v = bpcc_ynode_get(n, "ch_axis"))) ok &= ys_int(&Q->ys, v, "ch_axis", &o->ch_axis);
        if ((v = bpcc_ynode_get(n, "bins"))) {
            ok &= ys_int(&Q->ys, v, "bins", &o->bins);
            if (ok && (o->bins < 1 || o->bins > (1 << 20))) ok = ys_err(&Q->ys, v, "bins must be in [1, 1048576]");
        }
        if ((v = bpcc_ynode_get(n, "upsample_rate"))) {
            ok &= ys_int(&Q->ys, v, "upsample_rate", &o->upsample_rate);
            if (ok && (o->upsample_rate < 1 || o->upsample_rate > 4096)) ok = ys_err(&Q->ys, v, "upsample_rate must be in [1, 4096]");
        }
        if ((v = bpcc_ynode_get(n, "compute_dtype")) && !ys_is_null(v)) ok &= ys_dtype(&Q->ys, v, "compute_dtype", &o->compute_dtype);
        if ((v = bpcc_ynode_get(n, "is_dynamic"))) {
            bool dyn;
            if ((ok &= ys_bool(&Q->ys, v, "is_dynamic", &dyn)) && dyn) o->compute_dtype = o->dtype; /* 2.x spelling */
        }
        if ((v = bpcc_ynode_get(n, "custom_op_name"))) ok &= ys_string(&Q->ys, v, "custom_op_name", &o->custom_op_name);
        if (o->cls == OC_FIXED_QPARAMS) {
            const struct ynode *s = bpcc_ynode_get(n, "scale"), *z = bpcc_ynode_get(n, "zero_point");
            if (!s || !z) return ys_err(&Q->ys, n, "FixedQParamsObserver needs 'scale' and 'zero_point'");
            ok &= ys_number(&Q->ys, s, "scale", &o->scale) && ys_int(&Q->ys, z, "zero_point", &o->zero_point);
            if (ok && !(o->scale > 0)) ok = ys_err(&Q->ys, s, "scale must be positive");
        }
    } else if (o->cls == OC_FIXED_QPARAMS) {
        return ys_err(&Q->ys, n, "FixedQParamsObserver needs 'scale' and 'zero_point'");
    }
    if (!ok) return false;
    /* the constructors' checks */
    switch (o->cls) {
    case OC_PLACEHOLDER:
    case OC_NOOP:
    case OC_REUSE_INPUT:
        return true;
    case OC_FIXED_QPARAMS:
        if (!qmin) o->quant_min = 0;
        if (!qmax) o->quant_max = 255;
        o->has_customized_qrange = true;
        if (o->zero_point < o->quant_min || o->zero_point > o->quant_max)
            return ys_err(&Q->ys, n, "zero_point %lld is outside [quant_min, quant_max]", (long long)o->zero_point);
        return true;
    case OC_MINMAX:
    case OC_MOVING_AVERAGE_MINMAX:
    case OC_HISTOGRAM:
        if (!is_per_tensor(o->qscheme))
            return ys_err(&Q->ys, bpcc_ynode_get(n, "qscheme"), "%s supports only per_tensor_affine and "
                          "per_tensor_symmetric, not %s", class_names[o->cls], qscheme_names[o->qscheme]);
        break;
    default:
        if (is_per_tensor(o->qscheme))
            return ys_err(&Q->ys, bpcc_ynode_get(n, "qscheme"), "%s supports only per-channel qschemes, not %s",
                          class_names[o->cls], qscheme_names[o->qscheme]);
    }
    if (o->dtype != BPCC_DTYPE_QINT8 && o->dtype != BPCC_DTYPE_QUINT8 && o->dtype != BPCC_DTYPE_QUINT4X2 &&
        o->dtype != BPCC_DTYPE_QINT32)
        return ys_err(&Q->ys, bpcc_ynode_get(n, "dtype"), "%s observes quint8, qint8, quint4x2 or qint32, not %s",
                      class_names[o->cls], bpcc_dtype_name(o->dtype));
    if ((o->qscheme == QS_PER_TENSOR_SYMMETRIC || o->qscheme == QS_PER_CHANNEL_SYMMETRIC) && o->reduce_range &&
        o->dtype == BPCC_DTYPE_QUINT8 && o->cls != OC_HISTOGRAM)
        return ys_err(&Q->ys, bpcc_ynode_get(n, "reduce_range"),
                      "cannot reduce range for symmetric quantization for quint8 (as PyTorch)");
    if ((qmin == NULL) != (qmax == NULL))
        ys_warn(&Q->ys, qmin ? qmin : qmax, "quant_min and quant_max are used only together; this one is ignored "
                "(as in PyTorch)");
    o->has_customized_qrange = qmin && qmax;
    return qrange(Q, qmin ? qmin : n, o);
}

static const struct qconfig *qconfig_value(struct qloader *Q, const struct ynode *n, bool *ok_out)
{
    *ok_out = true;
    if (ys_is_null(n)) return NULL;
    *ok_out = false;
    if (!ys_want_kind(&Q->ys, n, YNODE_MAP, "a qconfig")) return NULL;
    static const char *const keys[] = {"activation", "weight", NULL};
    ys_check_keys(&Q->ys, n, keys, "a qconfig");
    struct qconfig *qc = BPCC_ARENA_NEW(&Q->m->arena, struct qconfig);
    if (!qc) {
        ys_oom(&Q->ys);
        return NULL;
    }
    qc->line = n->line;
    qc->col = n->col;
    const struct ynode *a = bpcc_ynode_get(n, "activation"), *w = bpcc_ynode_get(n, "weight");
    if (!a || !w) {
        ys_err(&Q->ys, n, "a qconfig needs both 'activation' and 'weight' (or is null)");
        return NULL;
    }
    bool ok = observer(Q, a, "activation", &qc->activation);
    ok &= observer(Q, w, "weight", &qc->weight);
    *ok_out = ok;
    return ok ? qc : NULL;
}

static const char *const rule_keys[QR_COUNT] = {"object_type", "module_name_regex", "module_name",
                                                "module_name_object_type_order"};

static void read_rules(struct qloader *Q, const struct ynode *list, enum qc_rule_kind kind)
{
    if (!ys_want_kind(&Q->ys, list, YNODE_SEQ, rule_keys[kind])) return;
    struct qc_rule *rules = list->n ? BPCC_ARENA_NEWN(&Q->m->arena, struct qc_rule, list->n) : NULL;
    if (list->n && !rules) {
        ys_oom(&Q->ys);
        return;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < list->n; i++) {
        const struct ynode *e = list->items[i];
        char where[96];
        snprintf(where, sizeof where, "%s entry #%u", rule_keys[kind], i + 1);
        Q->where = where;
        Q->where_line = e->line;
        Q->where_col = e->col;
        if (!ys_want_kind(&Q->ys, e, YNODE_MAP, "a mapping rule")) continue;
        static const char *const k_type[] = {"type", "qconfig", NULL};
        static const char *const k_regex[] = {"regex", "qconfig", NULL};
        static const char *const k_name[] = {"name", "qconfig", NULL};
        static const char *const k_order[] = {"name", "type", "index", "qconfig", NULL};
        const char *const *allowed[] = {k_type, k_regex, k_name, k_order};
        ys_check_keys(&Q->ys, e, allowed[kind], rule_keys[kind]);
        struct qc_rule *r = &rules[n];
        memset(r, 0, sizeof *r);
        r->line = e->line;
        r->col = e->col;
        bool ok = true;
        const char *keyname = kind == QR_OBJECT_TYPE ? "type" : kind == QR_MODULE_NAME_REGEX ? "regex" : "name";
        const struct ynode *k = bpcc_ynode_get(e, keyname), *qn = bpcc_ynode_get(e, "qconfig");
        if (!k) ok = ys_err(&Q->ys, e, "the rule needs '%s'", keyname);
        if (!qn) ok = ys_err(&Q->ys, e, "the rule needs 'qconfig' (a qconfig, or null to keep float)");
        if (!ok) continue;
        if (kind == QR_MODULE_NAME || kind == QR_MODULE_NAME_OBJECT_TYPE_ORDER) {
            if (!ys_want_kind(&Q->ys, k, YNODE_SCALAR, "a module name")) continue;
            r->key = bpcc_intern_n(&Q->m->intern, k->str, strlen(k->str)); /* "" is the root */
        } else if (!ys_string(&Q->ys, k, keyname, &r->key)) {
            continue;
        }
        if (kind == QR_OBJECT_TYPE || kind == QR_MODULE_NAME_OBJECT_TYPE_ORDER) {
            const struct ynode *t = kind == QR_OBJECT_TYPE ? k : bpcc_ynode_get(e, "type");
            if (!t) {
                ys_err(&Q->ys, e, "the rule needs 'type'");
                continue;
            }
            if (t->kind != YNODE_SCALAR || !bpcc_vocab_is_name(t->str)) {
                ys_err(&Q->ys, t, "'%s' is not an op name (a torch module, function or Tensor method: a dotted "
                       "Python name)", t->kind == YNODE_SCALAR ? t->str : "(not a scalar)");
                continue;
            }
            char kk;
            const char *canon = bpcc_vocab_canonical(t->str, &kk);
            if (!canon) {
                const char *sug = bpcc_vocab_suggest(t->str);
                if (sug) ys_warn(&Q->ys, t, "unknown op '%s' (did you mean '%s'?)", t->str, sug);
                else ys_warn(&Q->ys, t, "unknown op '%s': not a torch module, function or Tensor method", t->str);
                canon = t->str;
            }
            const char *ic = bpcc_intern_n(&Q->m->intern, canon, strlen(canon));
            if (!ic) {
                ys_oom(&Q->ys);
                continue;
            }
            if (kind == QR_OBJECT_TYPE) r->key = ic;
            else r->type = ic;
        }
        if (kind == QR_MODULE_NAME_OBJECT_TYPE_ORDER) {
            const struct ynode *ix = bpcc_ynode_get(e, "index");
            if (!ix) {
                ys_err(&Q->ys, e, "the rule needs 'index'");
                continue;
            }
            if (!ys_int(&Q->ys, ix, "index", &r->index)) continue;
            if (r->index < 0) {
                ys_err(&Q->ys, ix, "index must not be negative");
                continue;
            }
        }
        if (kind == QR_MODULE_NAME_REGEX) {
            /* Python's re.match: anchored at the start; bpcc uses POSIX extended syntax */
            size_t len = strlen(r->key);
            char *anchored = bpcc_malloc(len + 5);
            if (!anchored) {
                ys_oom(&Q->ys);
                continue;
            }
            snprintf(anchored, len + 5, "^(%s)", r->key);
            regex_t *re = bpcc_malloc(sizeof *re);
            int rc = re ? regcomp(re, anchored, REG_EXTENDED | REG_NOSUB) : 0;
            bpcc_xfree(anchored);
            if (!re) {
                ys_oom(&Q->ys);
                continue;
            }
            if (rc != 0) {
                char msg[128];
                regerror(rc, re, msg, sizeof msg);
                bpcc_xfree(re);
                ys_err(&Q->ys, k, "invalid regex '%s': %s (POSIX extended syntax)", r->key, msg);
                continue;
            }
            r->re = re; /* kept for the assignment; freed with the mapping */
        }
        bool qok;
        r->qc = qconfig_value(Q, qn, &qok);
        if (qok) n++;
        else if (r->re) { /* the slot is reused by the next rule */
            regfree(r->re);
            bpcc_xfree(r->re);
            r->re = NULL;
        }
    }
    Q->where = NULL;
    Q->m->rules[kind] = rules;
    Q->m->n_rules[kind] = n;
}

static enum bpcc_status load_text(struct bpcc_qconfig_mapping *m, const char *text, size_t len,
                                  const char *file, bool strict, struct bpcc_diag *d)
{
    const char *ifile = bpcc_intern_n(&m->intern, file, strlen(file));
    if (!ifile) return bpcc_diag_nomem(d);
    m->file = ifile;
    struct qloader Q = {.ys = {.file = ifile, .d = d, .intern = &m->intern, .strict = strict}, .m = m};
    Q.ys.note = note_rule;
    Q.ys.note_ud = &Q;
    struct ynode *root;
    enum bpcc_status s = bpcc_yaml_parse(text, len, ifile, &m->arena, &root, d);
    if (s) return s;
    if (!root) return bpcc_diag_error(d, BPCC_ERR_CONFIG, ifile, 1, 1, "empty qconfig mapping");
    if (root->kind != YNODE_MAP)
        return bpcc_diag_error(d, BPCC_ERR_CONFIG, ifile, root->line, root->col,
                               "a qconfig mapping is a mapping (global, object_type, ...), not %s",
                               ys_kind_word(root));
    static const char *const top[] = {"name", "global", "object_type", "module_name_regex", "module_name",
                                      "module_name_object_type_order", NULL};
    ys_check_keys(&Q.ys, root, top, "the qconfig mapping");
    const struct ynode *v;
    if ((v = bpcc_ynode_get(root, "name"))) ys_string(&Q.ys, v, "name", &m->name);
    if ((v = bpcc_ynode_get(root, "global"))) {
        Q.where = "global";
        Q.where_line = v->line;
        Q.where_col = v->col;
        bool ok;
        m->global = qconfig_value(&Q, v, &ok);
        m->has_global = ok;
        Q.where = NULL;
    }
    for (int k = 0; k < QR_COUNT; k++)
        if ((v = bpcc_ynode_get(root, rule_keys[k])) && !ys_is_null(v)) read_rules(&Q, v, (enum qc_rule_kind)k);
    if (Q.ys.oom) return BPCC_ERR_NOMEM;
    return Q.ys.errors ? BPCC_ERR_CONFIG : BPCC_OK;
}

static enum bpcc_status new_mapping(struct bpcc_qconfig_mapping **out, struct bpcc_diag *d)
{
    struct bpcc_qconfig_mapping *m = bpcc_malloc(sizeof *m);
    if (!m) return bpcc_diag_nomem(d);
    memset(m, 0, sizeof *m);
    bpcc_arena_init(&m->arena);
    bpcc_intern_init(&m->intern, &m->arena);
    *out = m;
    return BPCC_OK;
}

const char *bpcc_qconfig_file(const struct bpcc_qconfig_mapping *m) { return m->file; }

void bpcc_qconfig_free(struct bpcc_qconfig_mapping *m)
{
    if (!m) return;
    for (uint32_t i = 0; i < m->n_rules[QR_MODULE_NAME_REGEX]; i++) {
        regex_t *re = m->rules[QR_MODULE_NAME_REGEX][i].re;
        if (re) regfree(re);
        bpcc_xfree(re);
    }
    bpcc_intern_release(&m->intern);
    bpcc_arena_release(&m->arena);
    bpcc_xfree(m);
}

enum bpcc_status bpcc_qconfig_load_text(const char *text, size_t len, const char *filename,
                                        const struct bpcc_config_options *o,
                                        struct bpcc_qconfig_mapping **out, struct bpcc_diag *d)
{
    *out = NULL;
    struct bpcc_qconfig_mapping *m = NULL;
    enum bpcc_status s = new_mapping(&m, d);
    if (s) return s;
    s = load_text(m, text, len, filename ? filename : "<text>", o && o->strict, d);
    if (s) {
        bpcc_qconfig_free(m);
        return s;
    }
    *out = m;
    return BPCC_OK;
}

enum bpcc_status bpcc_qconfig_load(const char *name_or_path, const struct bpcc_config_options *o,
                                   struct bpcc_qconfig_mapping **out, struct bpcc_diag *d)
{
    *out = NULL;
    uint32_t n;
    const struct builtin_qconfig *b = bpcc_builtin_qconfigs(&n);
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(b[i].name, name_or_path))
            return bpcc_qconfig_load_text(b[i].text, b[i].len, b[i].file, o, out, d);
    char *text;
    size_t len;
    enum bpcc_status s = bpcc_file_read(name_or_path, &text, &len, d);
    if (s) {
        if (!strchr(name_or_path, '/') && !strstr(name_or_path, ".yaml") && d && d->n_entries) {
            char list[128] = "";
            size_t used = 0;
            for (uint32_t i = 0; i < n && used < sizeof list; i++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", b[i].name);
            bpcc_diag_note(d, 0, 0, "'%s' is not a built-in qconfig mapping either (%s)", name_or_path, list);
        }
        return s;
    }
    s = bpcc_qconfig_load_text(text, len, name_or_path, o, out, d);
    bpcc_xfree(text);
    return s;
}

const char *const *bpcc_qconfig_builtin_names(uint32_t *n_out)
{
    static const char *names[16];
    static uint32_t n;
    if (!n) {
        const struct builtin_qconfig *b = bpcc_builtin_qconfigs(&n);
        for (uint32_t i = 0; i < n && i < 16; i++) names[i] = b[i].name;
    }
    *n_out = n;
    return names;
}

const char *bpcc_qc_rule_kind_name(enum qc_rule_kind k) { return (unsigned)k < QR_COUNT ? rule_keys[k] : "?"; }

static bool str_eq(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

static bool observer_equal(const struct observer_spec *a, const struct observer_spec *b)
{
    return a->cls == b->cls && a->dtype == b->dtype && a->qscheme == b->qscheme &&
           a->reduce_range == b->reduce_range && a->quant_min == b->quant_min && a->quant_max == b->quant_max &&
           a->eps == b->eps && a->averaging_constant == b->averaging_constant && a->ch_axis == b->ch_axis &&
           a->bins == b->bins && a->upsample_rate == b->upsample_rate && a->scale == b->scale &&
           a->zero_point == b->zero_point && a->compute_dtype == b->compute_dtype &&
           a->fake_quantize == b->fake_quantize && str_eq(a->custom_op_name, b->custom_op_name);
}

const struct observer_spec *bpcc_qconfig_mapping_fake_quantize(const struct bpcc_qconfig_mapping *m)
{
    if (m->global && m->global->activation.fake_quantize) return &m->global->activation;
    for (int k = 0; k < QR_COUNT; k++)
        for (uint32_t i = 0; i < m->n_rules[k]; i++)
            if (m->rules[k][i].qc && m->rules[k][i].qc->activation.fake_quantize) return &m->rules[k][i].qc->activation;
    return NULL;
}

bool bpcc_qconfig_equal(const struct qconfig *a, const struct qconfig *b)
{
    if (a == b) return true;
    if (!a || !b) return false;
    return observer_equal(&a->activation, &b->activation) && observer_equal(&a->weight, &b->weight);
}

/* {==================== JSON ==================== */


json_t *bpcc_observer_json(const struct observer_spec *o)
{
    json_t *j = json_object();
    bool ok = j && (!o->fake_quantize || bpcc_json_put(j, "fake_quantize", json_string(fq_names[o->fake_quantize]))) &&
              bpcc_json_put(j, "observer", json_string(class_names[o->cls])) &&
              bpcc_json_put(j, "dtype", json_string(bpcc_dtype_name(o->dtype)));
    switch (o->cls) {
    case OC_PLACEHOLDER:
        ok = ok && bpcc_json_put(j, "compute_dtype", o->compute_dtype ? json_string(bpcc_dtype_name(o->compute_dtype)) : json_null()) &&
             bpcc_json_put(j, "custom_op_name", json_string(o->custom_op_name));
        break;
    case OC_NOOP:
        ok = ok && bpcc_json_put(j, "custom_op_name", json_string(o->custom_op_name));
        break;
    case OC_REUSE_INPUT:
        break;
    case OC_FIXED_QPARAMS:
        ok = ok && bpcc_json_put(j, "qscheme", json_string(qscheme_names[o->qscheme])) &&
             bpcc_json_put(j, "quant_min", json_integer(o->quant_min)) && bpcc_json_put(j, "quant_max", json_integer(o->quant_max)) &&
             bpcc_json_put(j, "scale", json_real(o->scale)) && bpcc_json_put(j, "zero_point", json_integer(o->zero_point));
        break;
    default:
        ok = ok && bpcc_json_put(j, "qscheme", json_string(qscheme_names[o->qscheme])) &&
             bpcc_json_put(j, "reduce_range", json_boolean(o->reduce_range)) &&
             bpcc_json_put(j, "quant_min", json_integer(o->quant_min)) && bpcc_json_put(j, "quant_max", json_integer(o->quant_max)) &&
             bpcc_json_put(j, "eps", json_real(o->eps));
        if (ok && (o->cls == OC_MOVING_AVERAGE_MINMAX || o->cls == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX))
            ok = bpcc_json_put(j, "averaging_constant", json_real(o->averaging_constant));
        if (ok && (o->cls == OC_PER_CHANNEL_MINMAX || o->cls == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX))
            ok = bpcc_json_put(j, "ch_axis", json_integer(o->ch_axis));
        if (ok && o->cls == OC_HISTOGRAM)
            ok = bpcc_json_put(j, "bins", json_integer(o->bins)) && bpcc_json_put(j, "upsample_rate", json_integer(o->upsample_rate));
    }
    if (!ok) {
        json_decref(j);
        return NULL;
    }
    return j;
}

json_t *bpcc_qconfig_json(const struct qconfig *qc)
{
    if (!qc) return json_null();
    json_t *j = json_object();
    if (j && bpcc_json_put(j, "activation", bpcc_observer_json(&qc->activation)) && bpcc_json_put(j, "weight", bpcc_observer_json(&qc->weight)))
        return j;
    json_decref(j);
    return NULL;
}

enum bpcc_status bpcc_qconfig_dump_json(const struct bpcc_qconfig_mapping *m, int indent, char **out,
                                        struct bpcc_diag *d)
{
    *out = NULL;
    bpcc_json_init();
    uint64_t failures = bpcc_alloc_failures();
    json_t *root = json_object();
    bool ok = root && bpcc_json_put(root, "name", m->name ? json_string(m->name) : json_null());
    if (ok && m->has_global) ok = bpcc_json_put(root, "global", bpcc_qconfig_json(m->global));
    for (int k = 0; ok && k < QR_COUNT; k++) {
        json_t *a = json_array();
        ok = bpcc_json_put(root, rule_keys[k], a);
        for (uint32_t i = 0; ok && i < m->n_rules[k]; i++) {
            const struct qc_rule *r = &m->rules[k][i];
            json_t *e = json_object();
            ok = e && json_array_append_new(a, e) == 0;
            if (!ok) break;
            if (k == QR_OBJECT_TYPE) ok = bpcc_json_put(e, "type", json_string(r->key));
            else if (k == QR_MODULE_NAME_REGEX) ok = bpcc_json_put(e, "regex", json_string(r->key));
            else ok = bpcc_json_put(e, "name", json_string(r->key));
            if (ok && k == QR_MODULE_NAME_OBJECT_TYPE_ORDER)
                ok = bpcc_json_put(e, "type", json_string(r->type)) && bpcc_json_put(e, "index", json_integer(r->index));
            ok = ok && bpcc_json_put(e, "qconfig", bpcc_qconfig_json(r->qc));
        }
    }
    return bpcc_json_finish(root, ok, indent, failures, out, d);
}

/* }================================================ */

/* {==================== observer specs from model attributes ==================== */

/* One attribute value as the YAML scalar the spec reader takes (NULL: not a scalar). */
static struct ynode *value_scalar(struct bpcc_arena *a, const struct bpcc_value *v, uint32_t line, uint32_t col)
{
    char buf[64];
    const char *s = buf;
    bool plain = true;
    switch (v->kind) {
    case BPCC_VAL_NONE: s = "null"; break;
    case BPCC_VAL_BOOL: s = v->u.b ? "true" : "false"; break;
    case BPCC_VAL_INT: snprintf(buf, sizeof buf, "%lld", (long long)v->u.i); break;
    case BPCC_VAL_FLOAT: bpcc_format_double(v->u.f, buf); break;
    case BPCC_VAL_DTYPE: s = bpcc_dtype_name(v->u.dtype); break;
    case BPCC_VAL_STR: s = v->u.s; plain = false; break;
    case BPCC_VAL_SYMBOL: s = v->u.s; break;
    default: return NULL;
    }
    struct ynode *y = BPCC_ARENA_NEW(a, struct ynode);
    if (!y) return NULL;
    *y = (struct ynode){.kind = YNODE_SCALAR, .line = line, .col = col, .plain = plain};
    y->str = bpcc_arena_strndup(a, s, strlen(s));
    return y->str ? y : NULL;
}

enum bpcc_status bpcc_observer_spec_from_value(const struct bpcc_value *v, const char *file, uint32_t line,
                                               uint32_t col, struct bpcc_intern *intern, struct observer_spec *out,
                                               struct bpcc_diag *d)
{
    struct bpcc_arena a;
    bpcc_arena_init(&a);
    struct qloader Q = {.ys = {.file = file, .d = d, .intern = intern}};
    Q.ys.note = note_rule;
    Q.ys.note_ud = &Q;
    Q.where = "the stub's 'observer' attribute";
    Q.where_line = line;
    Q.where_col = col;
    enum bpcc_status s = BPCC_OK;
    struct ynode *root = NULL;
    if (v->kind == BPCC_VAL_DICT) {
        root = BPCC_ARENA_NEW(&a, struct ynode);
        if (root) {
            *root = (struct ynode){.kind = YNODE_MAP, .line = line, .col = col, .n = v->n};
            root->items = BPCC_ARENA_NEWN(&a, struct ynode *, 2 * (v->n ? v->n : 1));
        }
        if (!root || !root->items) s = bpcc_diag_nomem(d);
        for (uint32_t i = 0; !s && i < v->n; i++) {
            struct ynode *k = BPCC_ARENA_NEW(&a, struct ynode);
            if (!k) {
                s = bpcc_diag_nomem(d);
                break;
            }
            *k = (struct ynode){.kind = YNODE_SCALAR, .line = line, .col = col, .plain = true, .str = v->u.seq.keys[i]};
            root->items[2 * i] = k;
            root->items[2 * i + 1] = value_scalar(&a, &v->u.seq.items[i], line, col);
            if (!root->items[2 * i + 1]) {
                const struct bpcc_value *x = &v->u.seq.items[i];
                bool scalar = x->kind <= BPCC_VAL_FLOAT || x->kind == BPCC_VAL_DTYPE || x->kind == BPCC_VAL_STR ||
                              x->kind == BPCC_VAL_SYMBOL;
                s = scalar ? bpcc_diag_nomem(d)
                           : bpcc_diag_error(d, BPCC_ERR_CONFIG, file, line, col,
                                             "the stub's observer argument '%s' must be a scalar, not a %s",
                                             v->u.seq.keys[i], bpcc_value_kind_name(x->kind));
            }
        }
    } else if (v->kind == BPCC_VAL_STR || v->kind == BPCC_VAL_SYMBOL) {
        root = value_scalar(&a, v, line, col);
        if (!root) s = bpcc_diag_nomem(d);
    } else {
        s = bpcc_diag_error(d, BPCC_ERR_CONFIG, file, line, col,
                            "a stub's 'observer' attribute is an observer spec ({observer: \"MinMaxObserver\", dtype: "
                            "torch.quint8, ...}), not a %s", bpcc_value_kind_name(v->kind));
    }
    if (!s && !observer(&Q, root, "the stub's observer", out)) s = Q.ys.oom ? bpcc_diag_nomem(d) : BPCC_ERR_CONFIG;
    if (!s && Q.ys.oom) s = bpcc_diag_nomem(d);
    bpcc_arena_release(&a);
    return s;
}

/* }================================================ */
