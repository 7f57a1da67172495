/*
** reduce.c — reductions: sum / mean / amax / amin / var / std over dimensions, max / min and their
** indices, cumsum, prod and norms, softmax and its kin (log_softmax, softmin, Softmax2d),
** normalize, GLU. Sums follow PyTorch's order where it is fixed (cumsum in double).
*/
#include "exec.h"

#include <math.h>

enum rop { RO_SUM, RO_MEAN, RO_AMAX, RO_AMIN, RO_VAR, RO_STD, RO_LSE, RO_COUNT, RO_NANSUM, RO_NANMEAN };

/* acc[o] op= x[i] over x in order, o the output element of i (ostride 0 on reduced dimensions);
** RO_VAR / RO_STD add the squared distance from mean[o], RO_LSE exp(x[i] - mean[o]) (mean: the
** maxima), RO_COUNT whether x[i] is nonzero; RO_NANSUM and RO_NANMEAN skip NaNs, RO_NANMEAN
** counting the others in mean[o] */
static void reduce_pass(const struct xtensor *x, const int64_t *ostride, enum rop op, double *mean, double *acc)
{
    int64_t idx[BPCC_MAX_DIMS] = {0}, o = 0;
    for (uint64_t i = 0; i < x->numel; i++) {
        double v = x->data[i];
        switch (op) {
        case RO_SUM:
        case RO_MEAN: acc[o] += v; break;
        case RO_AMAX: acc[o] = v > acc[o] || isnan(v) ? v : acc[o]; break;
        case RO_AMIN: acc[o] = v < acc[o] || isnan(v) ? v : acc[o]; break;
        case RO_VAR:
        case RO_STD: acc[o] += (v - mean[o]) * (v - mean[o]); break;
        case RO_LSE: acc[o] += exp(v - mean[o]); break;
        case RO_COUNT: acc[o] += v != 0.0; break;
        case RO_NANSUM: acc[o] += isnan(v) ? 0.0 : v; break;
        case RO_NANMEAN:
            if (!isnan(v)) {
                acc[o] += v;
                mean[o] += 1.0;
            }
            break;
        }
        for (int k = (int)x->ndim - 1; k >= 0; k--) {
            idx[k]++;
            o += ostride[k];
            if (idx[k] < x->dims[k]) break;
            o -= ostride[k] * x->dims[k];
            idx[k] = 0;
        }
    }
}

/* sum / mean (input, dim=None, keepdim=False), amax / amin (input, dim=(), keepdim=False), var / std
** (input, dim=None, unbiased=True, keepdim=False; or correction=): over the listed dimensions, all
** when none. Sums and means over one run of dimensions in float in PyTorch's order (bit-equal);
** the others in double per output element (another summation order than PyTorch's vectorized float
** sums, within ~1e-7 relative) */
static enum bpcc_status reduce_to(const struct xargs *a, enum rop op, bool with_mean, struct xval *out);
static enum bpcc_status values_indices(const struct xargs *a, struct xtensor *v, struct xtensor *ix, struct xval *out);

static enum bpcc_status reduce(const struct xargs *a, enum rop op, struct xval *out) { return reduce_to(a, op, false, out); }

/* with_mean (var_mean / std_mean): the pair (var or std, mean) */
static enum bpcc_status reduce_to(const struct xargs *a, enum rop op, bool with_mean, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    bool red[BPCC_MAX_DIMS] = {0}, spread = op == RO_VAR || op == RO_STD;
    const struct xval *dv = bpcc_xarg(a, 1, "dim");
    if (spread && dv && dv->k == XV_BOOL) dv = NULL; /* var(input, unbiased): the overload without dims */
    bool keep, unbiased = true;
    int64_t correction = 0; /* var / std only */
    if (!bpcc_xarg_bool(a, spread ? 3 : 2, "keepdim", false, &keep) ||
        (spread && (!bpcc_xarg_bool(a, dv ? 2 : 1, "unbiased", true, &unbiased) ||
                    !bpcc_xarg_int(a, UINT32_MAX, "correction", unbiased ? 1 : 0, &correction))))
        return BPCC_ERR_GRAPH;
    if (!dv || dv->k == XV_NONE || (dv->k == XV_SEQ && !dv->u.seq.n)) {
        for (uint32_t i = 0; i < x->ndim; i++) red[i] = true;
    } else {
        int64_t ds[BPCC_MAX_DIMS];
        uint32_t n;
        if (!bpcc_xarg_ints(a, 1, "dim", 0, NULL, ds, &n)) return BPCC_ERR_GRAPH;
        for (uint32_t i = 0; i < n; i++) {
            if (!bpcc_xdim(a, &ds[i], x->ndim)) return BPCC_ERR_GRAPH;
            if (red[ds[i]]) return bpcc_xerr(a, "dim %lld appears more than once in the list of dims", (long long)ds[i]);
            red[ds[i]] = true;
        }
    }
    int64_t dims[BPCC_MAX_DIMS];
    uint32_t nd = 0;
    for (uint32_t i = 0; i < x->ndim; i++)
        if (!red[i]) dims[nd++] = x->dims[i];
        else if (keep) dims[nd++] = 1;
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t n_out = y->numel ? y->numel : 1, count = x->numel / n_out;
    if ((op == RO_AMAX || op == RO_AMIN) && !count && y->numel) {
        bpcc_xtensor_free(y);
        return bpcc_xerr(a, "amax / amin of an empty dimension has no identity");
    }
    /* a sum or mean whose reduced dimensions are one run (dimensions of size 1 aside) reads, for
    ** each index of the kept dimensions before the run, a row-major [count, cols] block whose
    ** columns are the outputs (cols is 1 when the run is innermost): summed in PyTorch's order
    ** (fsum.c), for its bits; other layouts in double */
    bool one_run = op == RO_SUM || op == RO_MEAN;
    int phase = 0; /* 0: kept dimensions before the run, 1: in the run, 2: after it */
    uint64_t cols = 1;
    for (uint32_t i = 0; one_run && i < x->ndim; i++) {
        if (x->dims[i] == 1) continue;
        if (red[i]) {
            if (phase == 2) one_run = false;
            phase = 1;
        } else if (phase >= 1) {
            phase = 2;
            cols *= (uint64_t)x->dims[i];
        }
    }
    if (one_run) {
        uint64_t blocks = cols ? y->numel / cols : 0;
        for (uint64_t b = 0; b < blocks; b++) {
            float *o = y->data + b * cols;
            if (cols == 1) o[0] = bpcc_fsum(x->data + b * count, count);
            else bpcc_fsum_columns(x->data + b * count * cols, count, cols, o);
            if (op == RO_MEAN)
                for (uint64_t k = 0; k < cols; k++) o[k] /= (float)count;
        }
        return bpcc_xput(a, y, out);
    }
    bool need_mean = spread || op == RO_LSE || op == RO_NANMEAN; /* the means, logsumexp's maxima, nanmean's counts */
    double *acc = bpcc_malloc(n_out * sizeof *acc), *mean = need_mean ? bpcc_malloc(n_out * sizeof *mean) : NULL;
    if (!acc || (need_mean && !mean)) {
        bpcc_xfree(acc);
        bpcc_xfree(mean);
        bpcc_xtensor_free(y);
        return bpcc_diag_nomem(a->d);
    }
    for (uint64_t i = 0; i < n_out; i++) acc[i] = op == RO_AMAX ? -INFINITY : op == RO_AMIN ? INFINITY : 0.0;
    int64_t ostride[BPCC_MAX_DIMS], st = 1;
    for (int i = (int)x->ndim - 1; i >= 0; i--) {
        ostride[i] = red[i] ? 0 : st;
        if (!red[i]) st *= x->dims[i];
    }
    if (spread) { /* two passes: the mean, then the squared distances from it */
        memset(mean, 0, n_out * sizeof *mean);
        reduce_pass(x, ostride, RO_SUM, NULL, mean);
        for (uint64_t i = 0; i < n_out; i++) mean[i] /= (double)count;
    }
    if (op == RO_NANMEAN) memset(mean, 0, n_out * sizeof *mean);
    if (op == RO_LSE) { /* ATen's: the maxima, infinite ones taken as 0, out of the exponents and back after the log */
        for (uint64_t i = 0; i < n_out; i++) mean[i] = -INFINITY;
        reduce_pass(x, ostride, RO_AMAX, NULL, mean);
        for (uint64_t i = 0; i < n_out; i++) mean[i] = isinf(mean[i]) ? 0.0 : mean[i];
    }
    reduce_pass(x, ostride, op, mean, acc);
    double dof = (double)count - (double)correction;
    for (uint64_t i = 0; i < y->numel; i++) {
        double v = acc[i];
        if (op == RO_MEAN) v /= (double)count;
        else if (spread) v = dof > 0 ? v / dof : NAN;
        else if (op == RO_LSE) v = log(v) + mean[i];
        else if (op == RO_NANMEAN) v /= mean[i]; /* no value but NaNs: 0 / 0, NaN as in PyTorch */
        y->data[i] = (float)(op == RO_STD ? sqrt(v) : v);
    }
    bpcc_xfree(acc);
    struct xtensor *m = with_mean ? bpcc_xlike(y) : NULL;
    if (m)
        for (uint64_t i = 0; i < y->numel; i++) m->data[i] = (float)mean[i];
    bpcc_xfree(mean);
    if (!with_mean) return bpcc_xput(a, y, out);
    if (!m) {
        bpcc_xtensor_free(y);
        return bpcc_diag_nomem(a->d);
    }
    return values_indices(a, y, m, out);
}

static enum bpcc_status k_mean(const struct xargs *a, struct xval *out) { return reduce(a, RO_MEAN, out); }
static enum bpcc_status k_sum(const struct xargs *a, struct xval *out) { return reduce(a, RO_SUM, out); }
static enum bpcc_status k_amax(const struct xargs *a, struct xval *out) { return reduce(a, RO_AMAX, out); }
static enum bpcc_status k_amin(const struct xargs *a, struct xval *out) { return reduce(a, RO_AMIN, out); }
static enum bpcc_status k_var(const struct xargs *a, struct xval *out) { return reduce(a, RO_VAR, out); }
static enum bpcc_status k_std(const struct xargs *a, struct xval *out) { return reduce(a, RO_STD, out); }
static enum bpcc_status k_var_mean(const struct xargs *a, struct xval *out) { return reduce_to(a, RO_VAR, true, out); }
static enum bpcc_status k_std_mean(const struct xargs *a, struct xval *out) { return reduce_to(a, RO_STD, true, out); }
/* logsumexp(input, dim, keepdim=False): in double per output element */
static enum bpcc_status k_logsumexp(const struct xargs *a, struct xval *out) { return reduce(a, RO_LSE, out); }
/* count_nonzero(input, dim=None): the counts, as floats */
static enum bpcc_status k_count_nonzero(const struct xargs *a, struct xval *out) { return reduce(a, RO_COUNT, out); }
/* nansum / nanmean (input, dim=None, keepdim=False): NaNs taken as absent */
static enum bpcc_status k_nansum(const struct xargs *a, struct xval *out) { return reduce(a, RO_NANSUM, out); }
static enum bpcc_status k_nanmean(const struct xargs *a, struct xval *out) { return reduce(a, RO_NANMEAN, out); }

/* aminmax(input, *, dim=None, keepdim=False) -> (min, max), as amin and amax; without dim over all */
static enum bpcc_status k_aminmax(const struct xargs *a, struct xval *out)
{
    if (a->n > 1) return bpcc_xerr(a, "aminmax takes dim and keepdim by keyword only");
    struct xval lo, hi;
    enum bpcc_status s = reduce(a, RO_AMIN, &lo);
    if (s) return s;
    if ((s = reduce(a, RO_AMAX, &hi))) {
        bpcc_xval_release(&lo);
        return s;
    }
    return values_indices(a, lo.u.t, hi.u.t, out);
}

static enum bpcc_status softmax(const struct xargs *a, bool log, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    int64_t dim;
    if (a->module) {
        const struct bpcc_value *v = bpcc_module_attr(a->module, "dim");
        if (!v || v->kind != BPCC_VAL_INT) return bpcc_xerr(a, "%s needs its dim", log ? "LogSoftmax" : "Softmax");
        dim = v->u.i;
    } else if (!bpcc_xarg_int(a, 1, "dim", -1, &dim)) {
        return BPCC_ERR_GRAPH;
    }
    if (!bpcc_xdim(a, &dim, x->ndim)) return BPCC_ERR_GRAPH;
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t inner = 1, n = x->ndim ? x->dims[dim] : 1;
    for (uint32_t i = (uint32_t)dim + 1; i < x->ndim; i++) inner *= x->dims[i];
    uint64_t outer = x->numel / bpcc_nz((uint64_t)(n * inner));
    for (uint64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const float *p = x->data + o * n * inner + in;
            float *q = y->data + o * n * inner + in;
            float mx = -INFINITY;
            for (int64_t k = 0; k < n; k++) mx = p[k * inner] > mx ? p[k * inner] : mx;
            float s = 0;
            for (int64_t k = 0; k < n; k++) s += (q[k * inner] = expf(p[k * inner] - mx));
            if (log) {
                float ls = logf(s);
                for (int64_t k = 0; k < n; k++) q[k * inner] = (p[k * inner] - mx) - ls;
            } else {
                for (int64_t k = 0; k < n; k++) q[k * inner] /= s;
            }
        }
    return bpcc_xput(a, y, out);
}

static enum bpcc_status k_softmax(const struct xargs *a, struct xval *out) { return softmax(a, false, out); }
static enum bpcc_status k_log_softmax(const struct xargs *a, struct xval *out) { return softmax(a, true, out); }

/* x's dims without dim (or with it as 1: keepdim) */
static uint32_t dims_without(const struct xtensor *x, int64_t dim, bool keep, int64_t *dims)
{
    uint32_t nd = 0;
    for (uint32_t i = 0; i < x->ndim; i++)
        if ((int64_t)i != dim) dims[nd++] = x->dims[i];
        else if (keep) dims[nd++] = 1;
    return nd;
}

/* the pair torch.return_types gives (values, indices), which getattr reads by name; owns v and ix */
static enum bpcc_status values_indices(const struct xargs *a, struct xtensor *v, struct xtensor *ix, struct xval *out)
{
    struct xval *items = bpcc_malloc(2 * sizeof *items);
    if (!items) {
        bpcc_xtensor_free(v);
        bpcc_xtensor_free(ix);
        return bpcc_diag_nomem(a->d);
    }
    items[0] = (struct xval){.k = XV_TENSOR, .u.t = v};
    items[1] = (struct xval){.k = XV_TENSOR, .u.t = ix};
    *out = (struct xval){.k = XV_SEQ, .u.seq = {2, items}};
    return BPCC_OK;
}

/* max / min (input), (input, dim, keepdim=False) -> (values, indices), (input, other) = maximum /
** minimum; argmax / argmin (input, dim=None, keepdim=False). NaN wins, ties keep the first; indices
** are held as floats (exact below 2^24) */
static enum bpcc_status extreme(const struct xargs *a, bool want_max, bool arg, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    const struct xval *dv = bpcc_xarg(a, 1, "dim");
    if (!arg && dv && dv->k == XV_TENSOR) /* elementwise.c's maximum / minimum */
        return bpcc_exec_kernel(BPCC_NODE_CALL_FUNCTION, want_max ? "torch.maximum" : "torch.minimum")(a, out);
    bool keep, all = !dv || dv->k == XV_NONE;
    int64_t dim = 0;
    if (!bpcc_xarg_bool(a, 2, "keepdim", false, &keep) || (!all && !bpcc_xarg_int(a, 1, "dim", 0, &dim)) ||
        (!all && !bpcc_xdim(a, &dim, x->ndim)))
        return BPCC_ERR_GRAPH;
    if (!x->numel) return bpcc_xerr(a, "%s of an empty tensor", arg ? "argmax / argmin" : "max / min");
    uint64_t outer, inner;
    int64_t n, dims[BPCC_MAX_DIMS];
    uint32_t nd;
    if (all) { /* over the flattened tensor (keepdim: every dimension 1) */
        outer = inner = 1;
        n = (int64_t)x->numel;
        nd = keep ? x->ndim : 0;
        for (uint32_t i = 0; i < nd; i++) dims[i] = 1;
    } else {
        bpcc_xaround(x, dim, &outer, &n, &inner);
        nd = dims_without(x, dim, keep, dims);
    }
    struct xtensor *v = bpcc_xtensor_new(nd, dims), *ix = bpcc_xtensor_new(nd, dims);
    if (!v || !ix) {
        bpcc_xtensor_free(v);
        bpcc_xtensor_free(ix);
        return bpcc_diag_nomem(a->d);
    }
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            const float *p = x->data + o * (uint64_t)n * inner + in;
            float best = p[0];
            int64_t at = 0;
            for (int64_t k = 1; k < n && best == best; k++) {
                float e = p[(uint64_t)k * inner];
                if (e != e || (want_max ? e > best : e < best)) best = e, at = k;
            }
            v->data[o * inner + in] = best;
            ix->data[o * inner + in] = (float)at;
        }
    v->boolean = x->boolean;
    if (arg || all) {
        bpcc_xtensor_free(arg ? v : ix);
        return bpcc_xput(a, arg ? ix : v, out);
    }
    return values_indices(a, v, ix, out);
}

static enum bpcc_status k_max(const struct xargs *a, struct xval *out) { return extreme(a, true, false, out); }
static enum bpcc_status k_min(const struct xargs *a, struct xval *out) { return extreme(a, false, false, out); }
static enum bpcc_status k_argmax(const struct xargs *a, struct xval *out) { return extreme(a, true, true, out); }
static enum bpcc_status k_argmin(const struct xargs *a, struct xval *out) { return extreme(a, false, true, out); }

/* cumsum / cumprod / logcumsumexp (input, dim): running sums, products or log-sum-exps along dim,
** accumulated in double and rounded at each element; sums and products as PyTorch's CPU kernel
** does (bit-equal), each log-sum-exp step log(e^s + e^x) about the larger of the two */
enum cumulation { C_SUM, C_PROD, C_LSE };

static double cumulated(enum cumulation how, double s, double v)
{
    if (how == C_SUM) return s + v;
    if (how == C_PROD) return s * v;
    double hi = v > s ? v : s, lo = v > s ? s : v;
    if (isnan(v) || isnan(s)) return NAN;
    if (hi == -INFINITY || (isinf(hi) && hi == lo)) return hi; /* no inf - inf */
    return hi + log1p(exp(lo - hi));
}

static enum bpcc_status cumulate(const struct xargs *a, enum cumulation how, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_required(a, 1, "dim") || !bpcc_xarg_int(a, 1, "dim", 0, &dim) ||
        !bpcc_xdim(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t outer, inner;
    int64_t n;
    bpcc_xaround(x, dim, &outer, &n, &inner);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            double s = how == C_PROD ? 1 : how == C_SUM ? 0 : -INFINITY;
            for (int64_t k = 0; k < n; k++) {
                uint64_t i = (o * (uint64_t)n + (uint64_t)k) * inner + in;
                s = cumulated(how, s, x->data[i]);
                y->data[i] = (float)s;
            }
        }
    return bpcc_xput(a, y, out);
}

static enum bpcc_status k_cumsum(const struct xargs *a, struct xval *out) { return cumulate(a, C_SUM, out); }
static enum bpcc_status k_cumprod(const struct xargs *a, struct xval *out) { return cumulate(a, C_PROD, out); }
static enum bpcc_status k_logcumsumexp(const struct xargs *a, struct xval *out) { return cumulate(a, C_LSE, out); }

/* trapezoid / trapz (y, x=None, *, dx=1, dim=-1): the trapezoidal rule along dim, with sample
** spacing dx or at the points x (1-d, or y's shape) */
static enum bpcc_status k_trapezoid(const struct xargs *a, struct xval *out)
{
    const struct xtensor *y, *x = NULL;
    int64_t dim;
    double dx;
    if (!bpcc_xarg_tensor(a, 0, "y", &y) || !bpcc_xarg_int(a, UINT32_MAX, "dim", -1, &dim) ||
        !bpcc_xarg_float(a, UINT32_MAX, "dx", 1.0, &dx))
        return BPCC_ERR_GRAPH;
    const struct xval *xv = bpcc_xarg(a, 1, "x");
    if (xv && xv->k == XV_TENSOR) x = xv->u.t;
    else if (xv && !bpcc_xscalar(xv, &dx)) return bpcc_xerr(a, "trapezoid's second argument must be the points x or dx");
    if (!y->ndim) return bpcc_xerr(a, "trapezoid of a 0-d tensor");
    if (!bpcc_xdim(a, &dim, y->ndim)) return BPCC_ERR_GRAPH;
    uint64_t outer, inner;
    int64_t n;
    bpcc_xaround(y, dim, &outer, &n, &inner);
    bool same = x && x->ndim == y->ndim && !memcmp(x->dims, y->dims, y->ndim * sizeof *y->dims);
    if (x && !same && !(x->ndim == 1 && x->dims[0] == n))
        return bpcc_xerr(a, "the points x must be 1-d of %lld or of y's shape", (long long)n);
    int64_t dims[BPCC_MAX_DIMS];
    uint32_t nd = dims_without(y, dim, false, dims);
    struct xtensor *r = bpcc_xtensor_new(nd, dims);
    if (!r) return bpcc_diag_nomem(a->d);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            double s = 0;
            for (int64_t k = 1; k < n; k++) {
                uint64_t i = (o * (uint64_t)n + (uint64_t)k) * inner + in, p = i - inner;
                double h = !x ? dx : same ? (double)x->data[i] - x->data[p] : (double)x->data[k] - x->data[k - 1];
                s += h * ((double)y->data[i] + y->data[p]) / 2;
            }
            r->data[o * inner + in] = (float)s;
        }
    return bpcc_xput(a, r, out);
}

/* any / all (input) -> a 0-d bool, (input, dim, keepdim=False): whether any / every element is
** nonzero (NaN is) */
static enum bpcc_status truth(const struct xargs *a, bool every, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    const struct xval *dv = bpcc_xarg(a, 1, "dim");
    bool keep, whole = !dv || dv->k == XV_NONE;
    int64_t dim = 0, dims[BPCC_MAX_DIMS];
    if (!bpcc_xarg_bool(a, 2, "keepdim", false, &keep) || (!whole && !bpcc_xarg_int(a, 1, "dim", 0, &dim)) ||
        (!whole && !bpcc_xdim(a, &dim, x->ndim)))
        return BPCC_ERR_GRAPH;
    uint64_t outer = 1, inner = 1;
    int64_t n = (int64_t)x->numel;
    uint32_t nd = 0;
    if (!whole) {
        bpcc_xaround(x, dim, &outer, &n, &inner);
        nd = dims_without(x, dim, keep, dims);
    }
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            bool r = every;
            for (int64_t k = 0; k < n && r == every; k++) r = x->data[(o * (uint64_t)n + (uint64_t)k) * inner + in] != 0.0f;
            y->data[o * inner + in] = r;
        }
    return bpcc_xput(a, bpcc_xmark(y, true), out);
}

static enum bpcc_status k_any(const struct xargs *a, struct xval *out) { return truth(a, false, out); }
static enum bpcc_status k_all(const struct xargs *a, struct xval *out) { return truth(a, true, out); }

/* {==================== ordering ==================== */

/* one element of a line being sorted: its value and its position along the dimension */
struct keyed {
    float v;
    int64_t at;
};

/* ascending with NaN above everything (PyTorch's KeyValueCompAsc), ties by position: a stable sort */
static int cmp_up(const void *p, const void *q)
{
    const struct keyed *a = p, *b = q;
    bool na = a->v != a->v, nb = b->v != b->v;
    if (na != nb) return na ? 1 : -1;
    if (!na && a->v != b->v) return a->v < b->v ? -1 : 1;
    return a->at < b->at ? -1 : a->at > b->at;
}

/* descending with NaN first (KeyValueCompDesc), ties by position */
static int cmp_down(const void *p, const void *q)
{
    const struct keyed *a = p, *b = q;
    bool na = a->v != a->v, nb = b->v != b->v;
    if (na != nb) return na ? -1 : 1;
    if (!na && a->v != b->v) return a->v > b->v ? -1 : 1;
    return a->at < b->at ? -1 : a->at > b->at;
}

/* the line (o, in) of x along a dimension of n (inner elements apart), with its positions, sorted by cmp */
static void sort_line(const struct xtensor *x, uint64_t o, uint64_t in, int64_t n, uint64_t inner, struct keyed *line,
                      int (*cmp)(const void *, const void *))
{
    for (int64_t j = 0; j < n; j++) line[j] = (struct keyed){x->data[(o * (uint64_t)n + (uint64_t)j) * inner + in], j};
    qsort(line, (size_t)n, sizeof *line, cmp);
}

/* sort (input, dim=-1, descending=False, stable=False) -> (values, indices), argsort (input,
** dim=-1, descending=False) -> indices, topk (input, k, dim=-1, largest=True, sorted=True) ->
** (values, indices): each line along dim ordered stably (PyTorch's CPU sort is stable either way;
** topk's order among equal values is unspecified in PyTorch, here by position; its k come out
** sorted, which sorted=False allows); indices held as floats (exact below 2^24) */
enum order { O_SORT, O_ARGSORT, O_TOPK };

static enum bpcc_status order(const struct xargs *a, enum order how, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim, k = 0;
    bool down;
    uint32_t di = how == O_TOPK ? 2 : 1; /* the position of dim; stable and sorted change nothing here */
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || (how == O_TOPK && !bpcc_xarg_int(a, 1, "k", 0, &k)) ||
        !bpcc_xarg_int(a, di, "dim", -1, &dim) || !bpcc_xdim(a, &dim, x->ndim) ||
        !bpcc_xarg_bool(a, di + 1, how == O_TOPK ? "largest" : "descending", how == O_TOPK, &down))
        return BPCC_ERR_GRAPH;
    uint64_t outer, inner;
    int64_t n;
    bpcc_xaround(x, dim, &outer, &n, &inner);
    if (how != O_TOPK) k = n;
    else if (k < 0 || k > n) return bpcc_xerr(a, "k (%lld) is out of range for a dimension of %lld", (long long)k, (long long)n);
    int64_t dims[BPCC_MAX_DIMS];
    memcpy(dims, x->dims, x->ndim * sizeof *dims);
    if (x->ndim) dims[dim] = k;
    struct xtensor *v = how == O_ARGSORT ? NULL : bpcc_xtensor_new(x->ndim, dims), *ix = bpcc_xtensor_new(x->ndim, dims);
    struct keyed *line = bpcc_malloc((size_t)bpcc_nz((uint64_t)n) * sizeof *line);
    if ((how != O_ARGSORT && !v) || !ix || !line) {
        bpcc_xtensor_free(v);
        bpcc_xtensor_free(ix);
        bpcc_xfree(line);
        return bpcc_diag_nomem(a->d);
    }
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            sort_line(x, o, in, n, inner, line, down ? cmp_down : cmp_up);
            for (int64_t j = 0; j < k; j++) {
                uint64_t i = (o * (uint64_t)k + (uint64_t)j) * inner + in;
                if (v) v->data[i] = line[j].v;
                ix->data[i] = (float)line[j].at;
            }
        }
    bpcc_xfree(line);
    if (how == O_ARGSORT) return bpcc_xput(a, ix, out);
    v->boolean = x->boolean;
    return values_indices(a, v, ix, out);
}

/* kthvalue (input, k, dim=-1, keepdim=False) -> (values, indices): the k-th smallest of each line
** (NaN above everything); median (input) -> the lower median of all elements, (input, dim=-1,
** keepdim=False) -> (values, indices) of each line's: NaN where a line has one (its first) */
static enum bpcc_status kth(const struct xargs *a, bool median, struct xval *out)
{
    const struct xtensor *x;
    int64_t k = 0, dim = -1;
    bool keep = false, all = median && bpcc_xarg_absent(a, 1, "dim");
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || (!median && !bpcc_xarg_int(a, 1, "k", 0, &k)) ||
        (!all && (!bpcc_xarg_int(a, median ? 1 : 2, "dim", -1, &dim) || !bpcc_xdim(a, &dim, x->ndim) ||
                  !bpcc_xarg_bool(a, median ? 2 : 3, "keepdim", false, &keep))))
        return BPCC_ERR_GRAPH;
    uint64_t outer = 1, inner = 1;
    int64_t n = (int64_t)x->numel, dims[BPCC_MAX_DIMS];
    uint32_t nd = 0;
    if (!all) {
        bpcc_xaround(x, dim, &outer, &n, &inner);
        nd = dims_without(x, dim, keep, dims);
    }
    if (median) k = (n + 1) / 2;
    if (k < 1 || k > n) return bpcc_xerr(a, "k (%lld) is out of range for a dimension of %lld", (long long)k, (long long)n);
    struct xtensor *v = bpcc_xtensor_new(nd, dims), *ix = all ? NULL : bpcc_xtensor_new(nd, dims);
    struct keyed *line = bpcc_malloc((size_t)n * sizeof *line);
    if (!v || (!all && !ix) || !line) {
        bpcc_xtensor_free(v);
        bpcc_xtensor_free(ix);
        bpcc_xfree(line);
        return bpcc_diag_nomem(a->d);
    }
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            sort_line(x, o, in, n, inner, line, cmp_up);
            struct keyed r = line[k - 1];
            if (median && line[n - 1].v != line[n - 1].v) /* a NaN: the line's first */
                for (int64_t j = 0; j < n; j++)
                    if (line[j].v != line[j].v && (r.v == r.v || line[j].at < r.at)) r = line[j];
            v->data[o * inner + in] = r.v;
            if (ix) ix->data[o * inner + in] = (float)r.at;
        }
    bpcc_xfree(line);
    v->boolean = x->boolean;
    return all ? bpcc_xput(a, v, out) : values_indices(a, v, ix, out);
}

static enum bpcc_status k_kthvalue(const struct xargs *a, struct xval *out) { return kth(a, false, out); }
static enum bpcc_status k_median(const struct xargs *a, struct xval *out) { return kth(a, true, out); }

/* cummax / cummin (input, dim) -> (values, indices): the running extreme, a later equal one taking
** its place, a NaN staying once met (ATen's) */
static enum bpcc_status cumulative_extreme(const struct xargs *a, bool want_max, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &dim) || !bpcc_xdim(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    struct xtensor *v = bpcc_xlike(x), *ix = bpcc_xlike(x);
    if (!v || !ix) {
        bpcc_xtensor_free(v);
        bpcc_xtensor_free(ix);
        return bpcc_diag_nomem(a->d);
    }
    uint64_t outer, inner;
    int64_t n;
    bpcc_xaround(x, dim, &outer, &n, &inner);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            float best = 0;
            int64_t at = 0;
            for (int64_t k = 0; k < n; k++) {
                uint64_t i = (o * (uint64_t)n + (uint64_t)k) * inner + in;
                float e = x->data[i];
                if (!k || e != e || (best == best && (want_max ? e >= best : e <= best))) best = e, at = k;
                v->data[i] = best;
                ix->data[i] = (float)at;
            }
        }
    v->boolean = x->boolean;
    return values_indices(a, v, ix, out);
}

static enum bpcc_status k_cummax(const struct xargs *a, struct xval *out) { return cumulative_extreme(a, true, out); }
static enum bpcc_status k_cummin(const struct xargs *a, struct xval *out) { return cumulative_extreme(a, false, out); }

static enum bpcc_status k_sort(const struct xargs *a, struct xval *out) { return order(a, O_SORT, out); }
static enum bpcc_status k_argsort(const struct xargs *a, struct xval *out) { return order(a, O_ARGSORT, out); }
static enum bpcc_status k_topk(const struct xargs *a, struct xval *out) { return order(a, O_TOPK, out); }

/* }================================================ */

/* prod (input, dim=None, keepdim=False) and the vector norms norm (input, p='fro', dim=None,
** keepdim=False), linalg.vector_norm (x, ord=2, ...) and linalg.norm (x, ord=None, ...) for 2 /
** 'fro', 1, inf and -inf (`pname` the order's name, NULL for prod): per output element in double.
** linalg.norm's matrix norms other than Frobenius are refused */
static enum bpcc_status along(const struct xargs *a, const char *pname, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    double p = 2;
    bool prod = !pname;
    uint32_t di = prod ? 1 : 2;
    if (!prod) {
        const struct xval *pv = bpcc_xarg(a, 1, pname);
        if (pv && pv->k == XV_STR && strcmp(pv->u.s, "fro")) return bpcc_xerr(a, "norm of kind '%s' is not supported", pv->u.s);
        if (pv && pv->k != XV_STR && pv->k != XV_NONE && !bpcc_xarg_float(a, 1, pname, 2, &p)) return BPCC_ERR_GRAPH;
        if (p != 2 && p != 1 && !isinf(p)) return bpcc_xerr(a, "norm with order %g is not supported (2, 1, inf)", p);
        const struct xval *dv = bpcc_xarg(a, 2, "dim");
        bool matrix = dv && dv->k == XV_SEQ ? dv->u.seq.n == 2 : (!dv || dv->k == XV_NONE) && x->ndim == 2;
        if (!strcmp(pname, "ord") && !strcmp(a->node->target, "torch.linalg.norm") && matrix && pv && pv->k != XV_NONE &&
            pv->k != XV_STR)
            return bpcc_xerr(a, "matrix norms other than Frobenius are not supported");
    }
    const struct xval *dv = bpcc_xarg(a, di, "dim");
    bool keep, red[BPCC_MAX_DIMS] = {0};
    if (!bpcc_xarg_bool(a, di + 1, "keepdim", false, &keep)) return BPCC_ERR_GRAPH;
    if (!dv || dv->k == XV_NONE || (dv->k == XV_SEQ && !dv->u.seq.n)) {
        for (uint32_t i = 0; i < x->ndim; i++) red[i] = true;
    } else {
        int64_t ds[BPCC_MAX_DIMS];
        uint32_t n;
        if (!bpcc_xarg_ints(a, di, "dim", 0, NULL, ds, &n)) return BPCC_ERR_GRAPH;
        for (uint32_t i = 0; i < n; i++) {
            if (!bpcc_xdim(a, &ds[i], x->ndim)) return BPCC_ERR_GRAPH;
            red[ds[i]] = true;
        }
    }
    int64_t dims[BPCC_MAX_DIMS], ostride[BPCC_MAX_DIMS], st = 1;
    uint32_t nd = 0;
    for (uint32_t i = 0; i < x->ndim; i++)
        if (!red[i]) dims[nd++] = x->dims[i];
        else if (keep) dims[nd++] = 1;
    for (int i = (int)x->ndim - 1; i >= 0; i--) {
        ostride[i] = red[i] ? 0 : st;
        if (!red[i]) st *= x->dims[i];
    }
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    double *acc = y ? bpcc_malloc((y->numel ? y->numel : 1) * sizeof *acc) : NULL;
    if (!acc) {
        bpcc_xtensor_free(y);
        return bpcc_diag_nomem(a->d);
    }
    double init = prod ? 1 : p == -INFINITY ? INFINITY : 0;
    for (uint64_t i = 0; i < y->numel; i++) acc[i] = init;
    int64_t idx[BPCC_MAX_DIMS] = {0}, o = 0;
    for (uint64_t i = 0; i < x->numel; i++) {
        double v = x->data[i], m = fabs(v);
        if (prod) acc[o] *= v;
        else if (p == 2) acc[o] += v * v;
        else if (p == 1) acc[o] += m;
        else if (p > 0) acc[o] = m > acc[o] || m != m ? m : acc[o];
        else acc[o] = m < acc[o] || m != m ? m : acc[o];
        for (int k = (int)x->ndim - 1; k >= 0; k--) {
            o += ostride[k];
            if (++idx[k] < x->dims[k]) break;
            o -= ostride[k] * x->dims[k];
            idx[k] = 0;
        }
    }
    for (uint64_t i = 0; i < y->numel; i++) y->data[i] = (float)(!prod && p == 2 ? sqrt(acc[i]) : acc[i]);
    bpcc_xfree(acc);
    return bpcc_xput(a, y, out);
}

static enum bpcc_status k_prod(const struct xargs *a, struct xval *out) { return along(a, NULL, out); }
static enum bpcc_status k_norm(const struct xargs *a, struct xval *out) { return along(a, "p", out); }
static enum bpcc_status k_linalg_norm(const struct xargs *a, struct xval *out) { return along(a, "ord", out); }

/* normalize(input, p=2.0, dim=1, eps=1e-12): input / max(norm over dim, eps) */
static enum bpcc_status k_normalize(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    double p, eps;
    int64_t dim;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_float(a, 1, "p", 2, &p) || !bpcc_xarg_int(a, 2, "dim", 1, &dim) ||
        !bpcc_xarg_float(a, 3, "eps", 1e-12, &eps) || !bpcc_xdim(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    if (p != 2 && p != 1) return bpcc_xerr(a, "normalize with p = %g is not supported (2, 1)", p);
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t outer, inner;
    int64_t n;
    bpcc_xaround(x, dim, &outer, &n, &inner);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            const float *q = x->data + o * (uint64_t)n * inner + in;
            double s = 0;
            for (int64_t k = 0; k < n; k++) s += p == 2 ? (double)q[k * inner] * q[k * inner] : fabs(q[k * inner]);
            float d = (float)(p == 2 ? sqrt(s) : s);
            d = d < (float)eps ? (float)eps : d;
            for (int64_t k = 0; k < n; k++) y->data[(o * (uint64_t)n + (uint64_t)k) * inner + in] = q[k * inner] / d;
        }
    return bpcc_xput(a, y, out);
}

/* glu(input, dim=-1): the first half times the sigmoid of the second */
static enum bpcc_status k_glu(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim = -1;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (a->module) {
        const struct bpcc_value *v = bpcc_module_attr(a->module, "dim");
        if (v && v->kind == BPCC_VAL_INT) dim = v->u.i;
    } else if (!bpcc_xarg_int(a, 1, "dim", -1, &dim)) {
        return BPCC_ERR_GRAPH;
    }
    if (!bpcc_xdim(a, &dim, x->ndim)) return BPCC_ERR_GRAPH;
    if (!x->ndim || x->dims[dim] % 2) return bpcc_xerr(a, "glu halves a dimension of even size");
    int64_t dims[BPCC_MAX_DIMS];
    memcpy(dims, x->dims, x->ndim * sizeof *dims);
    dims[dim] /= 2;
    struct xtensor *y = bpcc_xtensor_new(x->ndim, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t outer, inner;
    int64_t n;
    bpcc_xaround(y, dim, &outer, &n, &inner);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t i = 0; i < (uint64_t)n * inner; i++) {
            float p = x->data[o * 2 * (uint64_t)n * inner + i], q = x->data[(o * 2 + 1) * (uint64_t)n * inner + i];
            y->data[o * (uint64_t)n * inner + i] = p * (1.0f / (1.0f + expf(-q)));
        }
    return bpcc_xput(a, y, out);
}

/* softmin(input, dim) = softmax(-input, dim); Softmax2d: softmax over the channels (dim -3) */
static enum bpcc_status k_softmin(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    struct xval neg = {.k = XV_TENSOR, .u.t = bpcc_xlike(x)};
    if (!neg.u.t) return bpcc_diag_nomem(a->d);
    for (uint64_t i = 0; i < x->numel; i++) neg.u.t->data[i] = -x->data[i];
    struct xval pos[2] = {neg, {0}};
    struct xargs sub = *a;
    pos[1] = a->n > 1 ? a->pos[1] : (struct xval){.k = XV_NONE};
    sub.pos = pos;
    sub.n = a->n > 1 ? 2 : 1;
    sub.consume = false;
    enum bpcc_status st = softmax(&sub, false, out);
    bpcc_xval_release(&neg);
    return st;
}

static enum bpcc_status k_softmax2d(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (x->ndim != 3 && x->ndim != 4) return bpcc_xerr(a, "Softmax2d takes a 3-d or 4-d input");
    struct xval pos[2] = {a->pos[0], {.k = XV_INT, .u.i = -3}};
    struct xargs sub = *a;
    sub.module = NULL;
    sub.pos = pos;
    sub.n = 2;
    sub.n_kw = 0;
    return softmax(&sub, false, out);
}

const struct xop bpcc_reduce_ops[] = {
    {'m', "torch.nn.Softmax", k_softmax}, {'f', "torch.nn.functional.softmax", k_softmax},
    {'f', "torch.softmax", k_softmax}, {'f', "torch.mean", k_mean}, {'f', "torch.sum", k_sum},
    {'t', "softmax", k_softmax}, {'t', "mean", k_mean}, {'t', "sum", k_sum}, {'f', "torch.amax", k_amax},
    {'t', "amax", k_amax}, {'f', "torch.amin", k_amin}, {'t', "amin", k_amin}, {'f', "torch.var", k_var},
    {'t', "var", k_var}, {'f', "torch.std", k_std}, {'t', "std", k_std}, {'m', "torch.nn.LogSoftmax", k_log_softmax},
    {'f', "torch.nn.functional.log_softmax", k_log_softmax}, {'f', "torch.log_softmax", k_log_softmax},
    {'t', "log_softmax", k_log_softmax}, {'m', "torch.nn.GLU", k_glu}, {'f', "torch.nn.functional.glu", k_glu},
    {'m', "torch.nn.Softmin", k_softmin}, {'f', "torch.nn.functional.softmin", k_softmin},
    {'m', "torch.nn.Softmax2d", k_softmax2d}, {'f', "torch.max", k_max}, {'t', "max", k_max}, {'f', "torch.min", k_min},
    {'t', "min", k_min}, {'f', "torch.argmax", k_argmax}, {'t', "argmax", k_argmax}, {'f', "torch.argmin", k_argmin},
    {'t', "argmin", k_argmin}, {'f', "torch.cumsum", k_cumsum}, {'t', "cumsum", k_cumsum}, {'f', "torch.prod", k_prod},
    {'t', "prod", k_prod}, {'f', "torch.norm", k_norm}, {'t', "norm", k_norm},
    {'f', "torch.linalg.norm", k_linalg_norm}, {'f', "torch.linalg.vector_norm", k_linalg_norm},
    {'f', "torch.nn.functional.normalize", k_normalize},
    {'f', "torch.cumprod", k_cumprod}, {'t', "cumprod", k_cumprod}, {'f', "torch.any", k_any}, {'t', "any", k_any},
    {'f', "torch.all", k_all}, {'t', "all", k_all}, {'f', "torch.sort", k_sort}, {'t', "sort", k_sort},
    {'f', "torch.argsort", k_argsort}, {'t', "argsort", k_argsort}, {'f', "torch.topk", k_topk}, {'t', "topk", k_topk},
    {'f', "torch.var_mean", k_var_mean}, {'f', "torch.std_mean", k_std_mean}, {'f', "torch.logsumexp", k_logsumexp},
    {'t', "logsumexp", k_logsumexp}, {'f', "torch.special.logsumexp", k_logsumexp},
    {'f', "torch.count_nonzero", k_count_nonzero}, {'t', "count_nonzero", k_count_nonzero},
    {'f', "torch.nansum", k_nansum}, {'t', "nansum", k_nansum}, {'f', "torch.nanmean", k_nanmean}, {'t', "nanmean", k_nanmean},
    {'f', "torch.aminmax", k_aminmax}, {'t', "aminmax", k_aminmax}, {'f', "torch.logcumsumexp", k_logcumsumexp},
    {'t', "logcumsumexp", k_logcumsumexp}, {'f', "torch.trapezoid", k_trapezoid}, {'f', "torch.trapz", k_trapezoid},
    {'f', "torch.kthvalue", k_kthvalue}, {'t', "kthvalue", k_kthvalue}, {'f', "torch.median", k_median},
    {'t', "median", k_median}, {'f', "torch.cummax", k_cummax}, {'t', "cummax", k_cummax}, {'f', "torch.cummin", k_cummin},
    {'t', "cummin", k_cummin}, {0}
};
