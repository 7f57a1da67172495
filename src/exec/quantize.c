/*
** quantize.c — torch.quantize_per_tensor / quantize_per_channel / quantize_per_tensor_dynamic and
** dequantize: quantized tensors as ATen makes them (the integer values held in float32, with their
** scales and zero points).
*/
#include "exec.h"

#include <math.h>

bool bpcc_xqrange(enum bpcc_dtype t, int64_t *lo, int64_t *hi)
{
    switch (t) {
    case BPCC_DTYPE_QUINT8: *lo = 0, *hi = 255; return true;
    case BPCC_DTYPE_QINT8: *lo = -128, *hi = 127; return true;
    case BPCC_DTYPE_QINT32: *lo = INT32_MIN, *hi = INT32_MAX; return true;
    default: return false;
    }
}

/* ATen's quantize_val: zero_point + nearbyint(x * (1 / scale)), clamped to the dtype */
static float quant1(float x, float inv, int64_t zp, int64_t lo, int64_t hi)
{
    float r = nearbyintf(x * inv);
    double q = (double)zp + (double)r;
    return (float)(q < (double)lo ? (double)lo : q > (double)hi ? (double)hi : q);
}

/* x quantized per tensor with scale and zero point zp into [lo, hi], the result in out */
static enum bpcc_status put_per_tensor(const struct xargs *a, const struct xtensor *x, enum bpcc_dtype dt, float scale,
                                       int64_t zp, int64_t lo, int64_t hi, struct xval *out)
{
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    y->qscale = bpcc_malloc(sizeof *y->qscale);
    y->qzp = bpcc_malloc(sizeof *y->qzp);
    if (!y->qscale || !y->qzp) {
        bpcc_xtensor_free(y);
        return bpcc_diag_nomem(a->d);
    }
    y->qdtype = dt;
    y->qscale[0] = scale;
    y->qzp[0] = zp;
    float inv = 1.0f / scale;
    for (uint64_t i = 0; i < x->numel; i++) y->data[i] = quant1(x->data[i], inv, zp, lo, hi);
    return bpcc_xput(a, y, out);
}

static enum bpcc_status k_quantize_per_tensor(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    double scale, zpd;
    enum bpcc_dtype dt;
    int64_t lo, hi;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (!bpcc_xscalar(bpcc_xarg(a, 1, "scale"), &scale) || !bpcc_xscalar(bpcc_xarg(a, 2, "zero_point"), &zpd))
        return bpcc_xerr(a, "scale and zero_point must be numbers or one-element tensors");
    if (!bpcc_xarg_dtype(a, 3, "dtype", &dt)) return BPCC_ERR_GRAPH;
    if (!bpcc_xqrange(dt, &lo, &hi)) return bpcc_xerr(a, "cannot quantize to %s", bpcc_dtype_name(dt));
    if (x->qdtype != BPCC_DTYPE_NONE) return bpcc_xerr(a, "the input is quantized already");
    return put_per_tensor(a, x, dt, (float)scale, (int64_t)zpd, lo, hi, out);
}

/* x rounded to the nearest float16 (ties to even) and back, as x.to(torch.float16).float():
** 11 significant bits, steps of 2^-24 below the normal range, infinity from 65520 on */
float bpcc_round_to_half(float x)
{
    if (!isfinite(x) || x == 0.0f) return x;
    int e;
    (void)frexpf(x, &e); /* |x| in [2^(e-1), 2^e) */
    int q = e - 11 > -24 ? e - 11 : -24;
    float r = ldexpf(nearbyintf(ldexpf(x, -q)), q);
    return fabsf(r) > 65504.0f ? copysignf(INFINITY, x) : r;
}

/* ATen's ChooseQuantizationParams (preserve_sparsity and power-of-two scales off, as
** quantize_per_tensor_dynamic calls it): the range widened to hold 0, the scale in double, at
** least 6.1e-5 (the range stretched to keep the zero point), the zero point from whichever end
** adds the smaller error, nudged into [qmin, qmax]. The scale the tensor keeps is its float32 value. */
void bpcc_choose_qparams(float lo, float hi, int64_t qmin, int64_t qmax, bool reduce_range, float *scale, int64_t *zp)
{
    const float small = 6.1e-5f;
    if (reduce_range) qmin /= 2, qmax /= 2;
    lo = lo < 0.0f ? lo : 0.0f;
    hi = hi > 0.0f ? hi : 0.0f;
    double s = ((double)hi - lo) / (double)(qmax - qmin);
    if ((float)s == 0.0f || isinf(1.0f / (float)s)) s = 0.1;
    if (s < small) {
        float was = (float)s;
        s = small;
        if (lo == 0.0f) hi = small * (float)(qmax - qmin);
        else if (hi == 0.0f) lo = -small * (float)(qmax - qmin);
        else lo *= small / was, hi *= small / was;
    }
    double from_min = (double)qmin - lo / s, from_max = (double)qmax - hi / s;
    double err_min = fabs((double)qmin) - fabs(lo / s), err_max = fabs((double)qmax) - fabs(hi / s);
    double z = err_min < err_max ? from_min : from_max;
    *zp = z < (double)qmin ? qmin : z > (double)qmax ? qmax : (int64_t)nearbyint(z);
    *scale = (float)s;
}

/* torch.quantize_per_tensor_dynamic(input, dtype, reduce_range): quint8/qint8 with the qparams
** of the tensor's own range; float16 rounds the values (a float16 tensor, which dequantize turns
** back into float32). reduce_range is taken as the fbgemm, x86 and onednn engines take it (QNNPACK
** ignores it). */
static enum bpcc_status k_quantize_per_tensor_dynamic(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    enum bpcc_dtype dt;
    bool rr;
    int64_t lo = 0, hi = 255;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_dtype(a, 1, "dtype", &dt) ||
        !bpcc_xarg_bool(a, 2, "reduce_range", false, &rr))
        return BPCC_ERR_GRAPH;
    if (x->qdtype != BPCC_DTYPE_NONE) return bpcc_xerr(a, "the input is quantized already");
    if (dt != BPCC_DTYPE_QUINT8 && dt != BPCC_DTYPE_QINT8 && dt != BPCC_DTYPE_F16)
        return bpcc_xerr(a, "quantize_per_tensor_dynamic takes quint8, qint8 or float16, not %s", bpcc_dtype_name(dt));
    if (dt == BPCC_DTYPE_F16) {
        struct xtensor *y = bpcc_xlike(x);
        if (!y) return bpcc_diag_nomem(a->d);
        for (uint64_t i = 0; i < x->numel; i++) y->data[i] = bpcc_round_to_half(x->data[i]);
        return bpcc_xput(a, y, out);
    }
    if (!x->numel) return bpcc_xerr(a, "quantize_per_tensor_dynamic of an empty tensor (PyTorch fails: min of no values)");
    float mn, mx;
    if (bpcc_obs_minmax(x->data, x->numel, &mn, &mx) || !isfinite(mn) || !isfinite(mx))
        return bpcc_xerr(a, "quantize_per_tensor_dynamic of a tensor with NaN or infinite values");
    (void)bpcc_xqrange(dt, &lo, &hi);
    float scale;
    int64_t zp;
    bpcc_choose_qparams(mn, mx, lo, hi, rr, &scale, &zp);
    return put_per_tensor(a, x, dt, scale, zp, lo, hi, out);
}

static enum bpcc_status k_quantize_per_channel(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *sc, *zp;
    int64_t axis, lo, hi;
    enum bpcc_dtype dt;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "scales", &sc) ||
        !bpcc_xarg_tensor(a, 2, "zero_points", &zp) || !bpcc_xarg_int(a, 3, "axis", 0, &axis) ||
        !bpcc_xarg_dtype(a, 4, "dtype", &dt) || !bpcc_xdim(a, &axis, x->ndim))
        return BPCC_ERR_GRAPH;
    if (!bpcc_xqrange(dt, &lo, &hi)) return bpcc_xerr(a, "cannot quantize to %s", bpcc_dtype_name(dt));
    int64_t C = x->dims[axis];
    if ((int64_t)sc->numel != C || (int64_t)zp->numel != C) return bpcc_xerr(a, "scales and zero_points need %lld values", (long long)C);
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    y->qscale = bpcc_malloc((size_t)C * sizeof *y->qscale);
    y->qzp = bpcc_malloc((size_t)C * sizeof *y->qzp);
    if (!y->qscale || !y->qzp) {
        bpcc_xtensor_free(y);
        return bpcc_diag_nomem(a->d);
    }
    y->qdtype = dt;
    y->qaxis = axis;
    for (int64_t c = 0; c < C; c++) {
        y->qscale[c] = sc->data[c];
        y->qzp[c] = (int64_t)zp->data[c];
    }
    int64_t inner = 1;
    for (uint32_t i = (uint32_t)axis + 1; i < x->ndim; i++) inner *= x->dims[i];
    for (uint64_t i = 0; i < x->numel; i++) {
        int64_t c = (int64_t)(i / (uint64_t)inner) % C;
        y->data[i] = quant1(x->data[i], 1.0f / y->qscale[c], y->qzp[c], lo, hi);
    }
    return bpcc_xput(a, y, out);
}

/* (q - zero_point) * scale in float32; a float tensor's copy (PyTorch's Tensor.dequantize is the
** identity there). NULL when out of memory. */
struct xtensor *bpcc_xtensor_dequantized(const struct xtensor *x)
{
    struct xtensor *y = bpcc_xtensor_new(x->ndim, x->dims);
    if (!y) return NULL;
    if (x->qdtype == BPCC_DTYPE_NONE) {
        memcpy(y->data, x->data, x->numel * sizeof(float));
        y->boolean = x->boolean;
        return y;
    }
    int64_t inner = 1, C = x->qaxis < 0 ? 1 : x->dims[x->qaxis];
    for (uint32_t i = x->qaxis < 0 ? x->ndim : (uint32_t)x->qaxis + 1; i < x->ndim; i++) inner *= x->dims[i];
    for (uint64_t i = 0; i < x->numel; i++) {
        int64_t c = x->qaxis < 0 ? 0 : (int64_t)(i / (uint64_t)inner) % C;
        y->data[i] = (x->data[i] - (float)x->qzp[c]) * x->qscale[c];
    }
    return y;
}

const float *bpcc_xtensor_values(const struct xtensor *x, struct xtensor **owned)
{
    *owned = x->qdtype != BPCC_DTYPE_NONE ? bpcc_xtensor_dequantized(x) : NULL;
    return x->qdtype == BPCC_DTYPE_NONE ? x->data : *owned ? (*owned)->data : NULL;
}

static enum bpcc_status k_dequantize(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    struct xtensor *y = bpcc_xtensor_dequantized(x);
    return y ? bpcc_xput(a, y, out) : bpcc_diag_nomem(a->d);
}

const struct xop bpcc_quantize_ops[] = {
    {'f', "torch.quantize_per_tensor", k_quantize_per_tensor},
    {'f', "torch.quantize_per_channel", k_quantize_per_channel},
    {'f', "torch.quantize_per_tensor_dynamic", k_quantize_per_tensor_dynamic}, {'f', "torch.dequantize", k_dequantize},
    {'t', "dequantize", k_dequantize}, {0}
};
