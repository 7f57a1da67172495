/*
** quantize.c — torch.quantize_per_tensor / quantize_per_channel and dequantize: quantized tensors
** as ATen makes them (the integer values held in float32, with their scales and zero points).
*/
#include "exec.h"

#include <math.h>

static bool qrange_of(enum bpcc_dtype t, int64_t *lo, int64_t *hi)
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
    if (!qrange_of(dt, &lo, &hi)) return bpcc_xerr(a, "cannot quantize to %s", bpcc_dtype_name(dt));
    if (x->qdtype != BPCC_DTYPE_NONE) return bpcc_xerr(a, "the input is quantized already");
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    y->qscale = bpcc_malloc(sizeof *y->qscale);
    y->qzp = bpcc_malloc(sizeof *y->qzp);
    if (!y->qscale || !y->qzp) {
        bpcc_xtensor_free(y);
        return bpcc_diag_nomem(a->d);
    }
    y->qdtype = dt;
    y->qscale[0] = (float)scale;
    y->qzp[0] = (int64_t)zpd;
    float inv = 1.0f / (float)scale;
    for (uint64_t i = 0; i < x->numel; i++) y->data[i] = quant1(x->data[i], inv, y->qzp[0], lo, hi);
    return bpcc_xput(a, y, out);
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
    if (!qrange_of(dt, &lo, &hi)) return bpcc_xerr(a, "cannot quantize to %s", bpcc_dtype_name(dt));
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

/* (q - zero_point) * scale in float32 */
static enum bpcc_status k_dequantize(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    struct xtensor *y = bpcc_xtensor_new(x->ndim, x->dims);
    if (!y) return bpcc_diag_nomem(a->d);
    if (x->qdtype == BPCC_DTYPE_NONE) { /* dequantizing a float tensor is the identity */
        memcpy(y->data, x->data, x->numel * sizeof(float));
        return bpcc_xput(a, y, out);
    }
    int64_t inner = 1, C = x->qaxis < 0 ? 1 : x->dims[x->qaxis];
    for (uint32_t i = x->qaxis < 0 ? x->ndim : (uint32_t)x->qaxis + 1; i < x->ndim; i++) inner *= x->dims[i];
    for (uint64_t i = 0; i < x->numel; i++) {
        int64_t c = x->qaxis < 0 ? 0 : (int64_t)(i / (uint64_t)inner) % C;
        y->data[i] = (x->data[i] - (float)x->qzp[c]) * x->qscale[c];
    }
    return bpcc_xput(a, y, out);
}

const struct xop bpcc_quantize_ops[] = {
    {'f', "torch.quantize_per_tensor", k_quantize_per_tensor},
    {'f', "torch.quantize_per_channel", k_quantize_per_channel}, {'f', "torch.dequantize", k_dequantize},
    {'t', "dequantize", k_dequantize}, {0}
};
