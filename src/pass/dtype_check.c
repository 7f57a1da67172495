/*
** dtype_check.c — does the backend support a node's qconfig? PyTorch 1.13's checks of a matched
** pattern against its dtype_configs (prepare.py: get_target_activation_dtype_for_node,
** is_input_arg_dtype_supported_by_backend, is_output_dtype_supported_by_backend; fx/utils.py:
** _qconfig_satisfies_dtype_config_constraints). Each failure is explained in one sentence, the
** words `bpcc explain` prints.
*/
#include "dtype_check.h"

#include <stdio.h>

void bpcc_target_dtypes_from_qconfig(const struct qconfig *qc, struct target_dtypes *t)
{
    if (!qc) {
        *t = (struct target_dtypes){BPCC_DTYPE_F32, BPCC_DTYPE_F32, BPCC_DTYPE_NONE, BPCC_DTYPE_NONE, false};
        return;
    }
    enum bpcc_dtype act = qc->activation.dtype, w = qc->weight.dtype;
    /* only PlaceholderObserver has compute_dtype; set means dynamic quantization in 1.13 */
    bool dynamic = qc->activation.cls == OC_PLACEHOLDER && qc->activation.compute_dtype != BPCC_DTYPE_NONE;
    t->input = act;
    t->input_dynamic = dynamic;
    t->output = dynamic ? BPCC_DTYPE_F32 : act;
    t->weight = w;
    t->bias = act == BPCC_DTYPE_F16 && w == BPCC_DTYPE_F16 && !dynamic ? BPCC_DTYPE_F16 : BPCC_DTYPE_F32;
}

/* Which observers have quant_min/quant_max and eps attributes (1.13 classes). */
static bool has_qrange(enum obs_class c)
{
    return c == OC_MINMAX || c == OC_MOVING_AVERAGE_MINMAX || c == OC_PER_CHANNEL_MINMAX ||
           c == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX || c == OC_HISTOGRAM || c == OC_FIXED_QPARAMS;
}

static bool has_eps(enum obs_class c) { return has_qrange(c) && c != OC_FIXED_QPARAMS; }

bool bpcc_observer_satisfies(const struct observer_spec *o, const struct dtype_constraint *c, const char *what,
                             char *why, size_t n)
{
    /* no constraint dtype, or another dtype than the observer's: nothing to check */
    if (c->dtype == BPCC_DTYPE_NONE || o->dtype != c->dtype) return true;
    const char *cls = bpcc_obs_class_name(o->cls), *dt = bpcc_dtype_name(c->dtype);
    if (c->has_qmin && c->has_qmax) { /* the range is checked only when both bounds are given */
        if (!has_qrange(o->cls)) {
            snprintf(why, n, "qconfig %s %s has no quant_min/quant_max, but the backend bounds the range of %s "
                     "to [%.17g, %.17g]", what, cls, dt, c->qmin, c->qmax);
            return false;
        }
        if ((double)o->quant_min < c->qmin || (double)o->quant_max > c->qmax) {
            bool low = (double)o->quant_min < c->qmin;
            snprintf(why, n, "qconfig %s %s %s %lld %s backend %s %.17g for dtype %s", what, cls,
                     low ? "quant_min" : "quant_max", (long long)(low ? o->quant_min : o->quant_max),
                     low ? "is below" : "exceeds", low ? "quant_min_lower_bound" : "quant_max_upper_bound",
                     low ? c->qmin : c->qmax, dt);
            return false;
        }
    }
    /* scale_exact_match / zero_point_exact_match (PyTorch 2.x; 1.13 has no such constraint): the
    ** observer must be a FixedQParamsObserver with exactly these qparams */
    if (c->has_scale && c->has_zp) {
        if (o->cls != OC_FIXED_QPARAMS) {
            snprintf(why, n, "the backend fixes the qparams of %s to scale %.17g, zero_point %lld, but the qconfig "
                     "%s is %s, not a FixedQParamsObserver", dt, c->scale, (long long)c->zp, what, cls);
            return false;
        }
        if (o->scale != c->scale || o->zero_point != c->zp) {
            snprintf(why, n, "qconfig %s FixedQParamsObserver has scale %.17g, zero_point %lld; the backend fixes "
                     "them to %.17g, %lld for dtype %s", what, o->scale, (long long)o->zero_point, c->scale,
                     (long long)c->zp, dt);
            return false;
        }
    }
    if (c->has_smin) {
        if (!has_eps(o->cls)) {
            snprintf(why, n, "qconfig %s %s has no eps, but the backend requires scale >= %.17g for dtype %s", what,
                     cls, c->smin, dt);
            return false;
        }
        if (o->eps < (float)c->smin) { /* PyTorch compares the float32 eps tensor */
            snprintf(why, n, "qconfig %s %s eps %.9g is below backend scale_min_lower_bound %.17g for dtype %s", what,
                     cls, (double)o->eps, c->smin, dt);
            return false;
        }
    }
    return true;
}

static const char *dn(enum bpcc_dtype t) { return t == BPCC_DTYPE_NONE ? "none" : bpcc_dtype_name(t); }

bool bpcc_dtype_config_accepts(const struct qconfig *qc, const struct target_dtypes *t, const struct dtype_config *dc,
                               unsigned arg_kinds, char *why, size_t n)
{
    if (arg_kinds & BPCC_ARG_ACTIVATION && dc->input.dtype != BPCC_DTYPE_NONE) {
        if (dc->input.dtype != t->input) {
            snprintf(why, n, "input activation dtype %s, backend wants %s", dn(t->input), dn(dc->input.dtype));
            return false;
        }
        if (dc->is_dynamic != t->input_dynamic) {
            snprintf(why, n, "the qconfig quantizes %s, the backend's dtype config is %s",
                     t->input_dynamic ? "dynamically" : "statically", dc->is_dynamic ? "dynamic" : "static");
            return false;
        }
        if (qc && !bpcc_observer_satisfies(&qc->activation, &dc->input, "activation", why, n)) return false;
    }
    if (arg_kinds & BPCC_ARG_WEIGHT && dc->weight.dtype != BPCC_DTYPE_NONE) {
        if (dc->weight.dtype != t->weight) {
            snprintf(why, n, "weight dtype %s, backend wants %s", dn(t->weight), dn(dc->weight.dtype));
            return false;
        }
        if (qc && !bpcc_observer_satisfies(&qc->weight, &dc->weight, "weight", why, n)) return false;
    }
    if (arg_kinds & BPCC_ARG_BIAS && dc->bias != BPCC_DTYPE_NONE && dc->bias != t->bias) {
        snprintf(why, n, "bias dtype %s, backend wants %s", dn(t->bias), dn(dc->bias));
        return false;
    }
    if (dc->output.dtype != BPCC_DTYPE_NONE) {
        if (dc->output.dtype != t->output) {
            snprintf(why, n, "output activation dtype %s, backend wants %s", dn(t->output), dn(dc->output.dtype));
            return false;
        }
        if (qc && !bpcc_observer_satisfies(&qc->activation, &dc->output, "activation", why, n)) return false;
    }
    return true;
}
