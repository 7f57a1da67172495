/*
** observer.c — PyTorch 1.13's observers (torch/ao/quantization/observer.py) at calibration time:
** MinMaxObserver and MovingAverageMinMaxObserver per tensor, PerChannelMinMaxObserver and
** MovingAveragePerChannelMinMaxObserver per channel, FixedQParamsObserver; _calculate_qparams in
** float32 with torch.round's round-half-to-even.
*/
#include "observer.h"

#include "../exec/exec.h"

#include <math.h>
#include <stdio.h>

bool bpcc_obs_has_stats(enum obs_class c)
{
    return c == OC_MINMAX || c == OC_MOVING_AVERAGE_MINMAX || c == OC_PER_CHANNEL_MINMAX ||
           c == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX || c == OC_HISTOGRAM;
}

enum bpcc_status bpcc_obs_init(struct obs_state *o, const struct observer_spec *spec)
{
    memset(o, 0, sizeof *o);
    o->spec = *spec;
    o->per_channel = spec->cls == OC_PER_CHANNEL_MINMAX || spec->cls == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX;
    if (!o->per_channel && bpcc_obs_has_stats(spec->cls)) {
        o->min = bpcc_malloc(sizeof *o->min);
        o->max = bpcc_malloc(sizeof *o->max);
        if (!o->min || !o->max) {
            bpcc_obs_release(o);
            return BPCC_ERR_NOMEM;
        }
        o->n = 1;
        o->min[0] = INFINITY;
        o->max[0] = -INFINITY;
    }
    return BPCC_OK;
}

void bpcc_obs_release(struct obs_state *o)
{
    bpcc_xfree(o->min);
    bpcc_xfree(o->max);
    o->min = o->max = NULL;
    o->n = 0;
}

static bool moving(const struct obs_state *o)
{
    return o->spec.cls == OC_MOVING_AVERAGE_MINMAX || o->spec.cls == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX;
}

BPCC_HOT enum bpcc_status bpcc_obs_observe(struct obs_state *o, const float *x, uint32_t ndim, const int64_t *dims, char *why,
                                  size_t n_why)
{
    if (!bpcc_obs_has_stats(o->spec.cls) || o->spec.cls == OC_HISTOGRAM) return BPCC_OK; /* histogram: later */
    uint64_t numel = 1;
    for (uint32_t i = 0; i < ndim; i++) numel *= (uint64_t)dims[i];
    if (!numel) return BPCC_OK; /* forward() returns early on an empty tensor */
    /* one branch-free pass: min, max, and whether any element is NaN */
    bool nan = false;
    {
        float lo0 = x[0], hi0 = x[0];
        int bad = 0;
        for (uint64_t i = 0; i < numel; i++) {
            float v = x[i];
            bad |= v != v;
            lo0 = v < lo0 ? v : lo0;
            hi0 = v > hi0 ? v : hi0;
        }
        nan = bad != 0;
        if (!o->per_channel && !nan) {
            o->lo_scratch = lo0;
            o->hi_scratch = hi0;
        }
    }
    if (nan) {
        uint64_t i = 0;
        while (i < numel && !isnan(x[i])) i++;
        snprintf(why, n_why, "the observed tensor holds NaN (element %llu)", (unsigned long long)i);
        return BPCC_ERR_GRAPH;
    }
    float c = (float)o->spec.averaging_constant;
    if (!o->per_channel) {
        float lo = o->lo_scratch, hi = o->hi_scratch;
        if (moving(o) && !(o->min[0] == INFINITY && o->max[0] == -INFINITY)) {
            o->min[0] = o->min[0] + c * (lo - o->min[0]);
            o->max[0] = o->max[0] + c * (hi - o->max[0]);
        } else if (moving(o)) {
            o->min[0] = lo;
            o->max[0] = hi;
        } else {
            o->min[0] = lo < o->min[0] ? lo : o->min[0];
            o->max[0] = hi > o->max[0] ? hi : o->max[0];
        }
        o->batches++;
        return BPCC_OK;
    }
    /* per channel: the channel axis first, the rest flattened */
    int64_t axis = o->spec.ch_axis;
    if (axis < 0) axis += ndim;
    if (axis < 0 || axis >= (int64_t)ndim) {
        snprintf(why, n_why, "ch_axis %lld is out of range for a %u-dimensional tensor", (long long)o->spec.ch_axis, ndim);
        return BPCC_ERR_GRAPH;
    }
    uint64_t C = (uint64_t)dims[axis], inner = 1, outer = 1;
    for (uint32_t i = (uint32_t)axis + 1; i < ndim; i++) inner *= (uint64_t)dims[i];
    for (uint32_t i = 0; i < (uint32_t)axis; i++) outer *= (uint64_t)dims[i];
    if (o->n && o->n != C) {
        snprintf(why, n_why, "the observed tensor has %llu channels on axis %lld, earlier batches had %u",
                 (unsigned long long)C, (long long)axis, o->n);
        return BPCC_ERR_GRAPH;
    }
    float *lo = bpcc_malloc(C * sizeof *lo), *hi = bpcc_malloc(C * sizeof *hi);
    if (!lo || !hi) {
        bpcc_xfree(lo);
        bpcc_xfree(hi);
        return BPCC_ERR_NOMEM;
    }
    for (uint64_t ch = 0; ch < C; ch++) {
        float a = x[ch * inner], b = a;
        for (uint64_t p = 0; p < outer; p++) {
            const float *row = x + (p * C + ch) * inner;
            for (uint64_t i = 0; i < inner; i++) {
                float v = row[i];
                a = v < a ? v : a;
                b = v > b ? v : b;
            }
        }
        lo[ch] = a;
        hi[ch] = b;
    }
    if (!o->n) {
        o->min = lo;
        o->max = hi;
        o->n = (uint32_t)C;
    } else {
        for (uint64_t ch = 0; ch < C; ch++) {
            if (moving(o)) {
                o->min[ch] = o->min[ch] + c * (lo[ch] - o->min[ch]);
                o->max[ch] = o->max[ch] + c * (hi[ch] - o->max[ch]);
            } else {
                o->min[ch] = lo[ch] < o->min[ch] ? lo[ch] : o->min[ch];
                o->max[ch] = hi[ch] > o->max[ch] ? hi[ch] : o->max[ch];
            }
        }
        bpcc_xfree(lo);
        bpcc_xfree(hi);
    }
    o->batches++;
    return BPCC_OK;
}

/* _calculate_qparams for one (min, max) pair, float32 throughout */
static void qparams_one(const struct observer_spec *s, float min_val, float max_val, float *scale_out, double *zp_out)
{
    int64_t qmin = s->quant_min, qmax = s->quant_max;
    float eps = s->eps;
    float min_neg = min_val < 0.0f ? min_val : 0.0f;
    float max_pos = max_val > 0.0f ? max_val : 0.0f;
    float scale;
    double zp = 0;
    if (s->qscheme == QS_PER_TENSOR_SYMMETRIC || s->qscheme == QS_PER_CHANNEL_SYMMETRIC) {
        max_pos = -min_neg > max_pos ? -min_neg : max_pos;
        scale = max_pos / (float)((double)(qmax - qmin) / 2.0);
        scale = scale > eps ? scale : eps;
        if (s->dtype == BPCC_DTYPE_QUINT8) {
            int64_t sum = qmin + qmax, mid = sum / 2;
            if (sum % 2 && sum < 0) mid--; /* Python's // floors */
            zp = s->has_customized_qrange ? (double)mid : 128;
        }
    } else if (s->qscheme == QS_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) {
        scale = (max_val - min_val) / (float)(qmax - qmin);
        if (!(scale > eps)) scale = 1.0f;
        zp = (double)(-1.0f * min_val / scale);
    } else {
        scale = (max_pos - min_neg) / (float)(qmax - qmin);
        scale = scale > eps ? scale : eps;
        float r = nearbyintf(min_neg / scale);
        double z = (double)qmin - (double)r;
        zp = z < (double)qmin ? (double)qmin : z > (double)qmax ? (double)qmax : z;
    }
    *scale_out = scale;
    *zp_out = zp;
}

enum bpcc_status bpcc_obs_qparams(const struct obs_state *o, float **scale, double **zero_point, uint32_t *n)
{
    *scale = NULL;
    *zero_point = NULL;
    *n = 0;
    const struct observer_spec *s = &o->spec;
    if (s->cls == OC_PLACEHOLDER || s->cls == OC_NOOP || s->cls == OC_REUSE_INPUT) return BPCC_OK;
    uint32_t k = s->cls == OC_FIXED_QPARAMS || !o->n ? 1 : o->n;
    float *sc = bpcc_malloc(k * sizeof *sc);
    double *zp = bpcc_malloc(k * sizeof *zp);
    if (!sc || !zp) {
        bpcc_xfree(sc);
        bpcc_xfree(zp);
        return BPCC_ERR_NOMEM;
    }
    if (s->cls == OC_FIXED_QPARAMS) {
        sc[0] = (float)s->scale;
        zp[0] = (double)s->zero_point;
    } else if (!o->n || (o->n == 1 && !o->per_channel && o->min[0] == INFINITY && o->max[0] == -INFINITY)) {
        sc[0] = 1.0f; /* check_min_max_valid: never observed -> PyTorch's defaults */
        zp[0] = 0;
    } else {
        for (uint32_t i = 0; i < k; i++) qparams_one(s, o->min[i], o->max[i], &sc[i], &zp[i]);
    }
    *scale = sc;
    *zero_point = zp;
    *n = k;
    return BPCC_OK;
}

/* {==================== observer modules ==================== */

static const struct bpcc_value *attr_of(const struct bpcc_module *m, const char *k, enum bpcc_value_kind kind)
{
    const struct bpcc_value *v = bpcc_module_attr(m, k);
    return v && v->kind == kind ? v : NULL;
}

int bpcc_obs_module_class(const struct bpcc_module *m)
{
    static const char prefix[] = "torch.ao.quantization.";
    if (strncmp(m->type, prefix, sizeof prefix - 1)) return -1;
    for (int c = 0; c < OC_COUNT; c++)
        if (!strcmp(m->type + sizeof prefix - 1, bpcc_obs_class_name((enum obs_class)c))) return c;
    return -1;
}

bool bpcc_obs_spec_of_module(const struct bpcc_module *m, struct observer_spec *o)
{
    int cls = bpcc_obs_module_class(m);
    if (cls < 0) return false;
    memset(o, 0, sizeof *o);
    o->cls = (enum obs_class)cls;
    const struct bpcc_value *v;
    o->dtype = (v = attr_of(m, "dtype", BPCC_VAL_DTYPE)) ? v->u.dtype : BPCC_DTYPE_QUINT8;
    o->qscheme = QS_PER_TENSOR_AFFINE;
    if ((v = attr_of(m, "qscheme", BPCC_VAL_SYMBOL))) {
        const char *q = !strncmp(v->u.s, "torch.", 6) ? v->u.s + 6 : v->u.s;
        for (int i = 0; i < QS_COUNT; i++)
            if (!strcmp(q, bpcc_qscheme_name((enum qscheme)i))) o->qscheme = (enum qscheme)i;
    }
    o->quant_min = (v = attr_of(m, "quant_min", BPCC_VAL_INT)) ? v->u.i : 0;
    o->quant_max = (v = attr_of(m, "quant_max", BPCC_VAL_INT)) ? v->u.i : 255;
    o->has_customized_qrange = (v = attr_of(m, "has_customized_qrange", BPCC_VAL_BOOL)) ? v->u.b : false;
    o->reduce_range = (v = attr_of(m, "reduce_range", BPCC_VAL_BOOL)) ? v->u.b : false;
    o->eps = (v = attr_of(m, "eps", BPCC_VAL_FLOAT)) ? (float)v->u.f : 1.1920928955078125e-07f;
    o->averaging_constant = (v = attr_of(m, "averaging_constant", BPCC_VAL_FLOAT)) ? v->u.f : 0.01;
    o->ch_axis = (v = attr_of(m, "ch_axis", BPCC_VAL_INT)) ? v->u.i : 0;
    o->bins = (v = attr_of(m, "bins", BPCC_VAL_INT)) ? v->u.i : 2048;
    o->upsample_rate = (v = attr_of(m, "upsample_rate", BPCC_VAL_INT)) ? v->u.i : 128;
    o->scale = (v = attr_of(m, "scale", BPCC_VAL_FLOAT)) ? v->u.f : 1.0;
    o->zero_point = (v = attr_of(m, "zero_point", BPCC_VAL_INT)) ? v->u.i : 0;
    o->compute_dtype = (v = attr_of(m, "compute_dtype", BPCC_VAL_DTYPE)) ? v->u.dtype : BPCC_DTYPE_NONE;
    o->custom_op_name = "";
    return true;
}

/* }================================================ */
