/*
** elementwise.c — the interpreter's elementwise kernels (float32, as PyTorch's eager CPU kernels
** compute them): activations and math functions, arithmetic and comparisons with broadcasting,
** selection (where, masked_fill), casts and filled tensors, dropout in eval mode.
*/
#include "exec.h"

#include <float.h>
#include <math.h>

/* {==================== unary ==================== */

enum unop { U_RELU, U_RELU6, U_HARDTANH, U_LEAKY, U_ELU, U_HARDSWISH, U_HARDSIGMOID, U_SIGMOID, U_TANH, U_SILU,
            U_GELU, U_GELU_TANH, U_IDENTITY, U_NEG, U_EXP, U_SQRT, U_RSQRT, U_RECIPROCAL, U_ABS, U_LOG, U_SOFTPLUS,
            U_MISH, U_ERF, U_FLOOR, U_CEIL, U_ROUND, U_TRUNC, U_SIGN, U_SIN, U_COS, U_LOG1P, U_EXPM1, U_SQUARE, U_SELU,
            U_CELU, U_SOFTSIGN, U_HARDSHRINK, U_SOFTSHRINK, U_TANHSHRINK, U_LOGSIGMOID, U_LOG2, U_LOG10, U_EXP2,
            U_TAN, U_ATAN, U_ASIN, U_ACOS, U_SINH, U_COSH, U_ASINH, U_ACOSH, U_ATANH, U_FRAC, U_ERFC, U_LGAMMA, U_SINC,
            U_LOGIT, U_THRESHOLD, U_NOT, U_ISNAN, U_ISINF, U_ISFINITE, U_ISPOSINF, U_ISNEGINF, U_SIGNBIT, U_ERFINV };

/* erfinv in double: Giles's single-precision approximation ("Approximating the erfinv function",
** 2010) refined by two Newton steps on erf(x) - y; y outside [-1, 1] (or NaN) gives NaN, +-1 +-inf */
static double erfinv_of(double y)
{
    if (!(y >= -1.0 && y <= 1.0)) return NAN;
    if (fabs(y) == 1.0) return copysign(INFINITY, y);
    double w = -log((1.0 - y) * (1.0 + y)), p;
    if (w < 5.0) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w, p = -3.5233877e-06 + p * w, p = -4.39150654e-06 + p * w, p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w, p = -0.00417768164 + p * w, p = 0.246640727 + p * w, p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w, p = 0.00134934322 + p * w, p = -0.00367342844 + p * w, p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w, p = 0.00943887047 + p * w, p = 1.00167406 + p * w, p = 2.83297682 + p * w;
    }
    double x = p * y;
    for (int k = 0; k < 2; k++) x -= (erf(x) - y) / (1.1283791670955126 * exp(-x * x));
    return x;
}

static float apply(enum unop op, float x, float p0, float p1)
{
    switch (op) {
    case U_RELU: return x > 0.0f ? x : (isnan(x) ? x : 0.0f);
    case U_RELU6: return isnan(x) ? x : x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x;
    case U_HARDTANH: return isnan(x) ? x : x < p0 ? p0 : x > p1 ? p1 : x;
    case U_LEAKY: return x > 0.0f ? x : x * p0;
    case U_ELU: return x > 0.0f ? x : p0 * (expf(x) - 1.0f);
    case U_HARDSWISH: {
        float r = x + 3.0f;
        r = r < 0.0f ? 0.0f : r > 6.0f ? 6.0f : r;
        return x * r / 6.0f;
    }
    case U_HARDSIGMOID: {
        float r = x + 3.0f;
        r = r < 0.0f ? 0.0f : r > 6.0f ? 6.0f : r;
        return r / 6.0f;
    }
    case U_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case U_TANH: return tanhf(x);
    case U_SILU: return x / (1.0f + expf(-x));
    case U_GELU: return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
    case U_GELU_TANH: {
        const float k = 0.7978845608028654f; /* sqrt(2/pi) */
        return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
    }
    case U_IDENTITY: return x;
    case U_NEG: return -x;
    case U_EXP: return expf(x);
    case U_SQRT: return sqrtf(x);
    case U_RSQRT: return 1.0f / sqrtf(x); /* PyTorch's: two roundings, not an approximation */
    case U_RECIPROCAL: return 1.0f / x;
    case U_ABS: return fabsf(x);
    case U_LOG: return logf(x);
    case U_SOFTPLUS: return x * p0 > p1 ? x : log1pf(expf(x * p0)) / p0; /* p0 beta, p1 threshold */
    case U_MISH: return x * tanhf(log1pf(expf(x)));
    case U_ERF: return erff(x);
    case U_FLOOR: return floorf(x);
    case U_CEIL: return ceilf(x);
    case U_ROUND: return nearbyintf(x); /* half to even, as std::nearbyint */
    case U_TRUNC: return truncf(x);
    case U_SIGN: return (float)((0.0f < x) - (x < 0.0f)); /* 0 for NaN, as PyTorch */
    case U_SIN: return sinf(x);
    case U_COS: return cosf(x);
    case U_LOG1P: return log1pf(x);
    case U_EXPM1: return expm1f(x);
    case U_SQUARE: return x * x;
    case U_SELU: { /* ATen's elu with alpha and scale: the negative coefficient a float product */
        const float alpha = 1.6732632423543772848170429916717f, scale = 1.0507009873554804934193349852946f;
        return x <= 0.0f ? (expf(x) - 1.0f) * (alpha * scale) : x * scale;
    }
    case U_CELU: return x <= 0.0f ? (expf(x * (1.0f / p0)) - 1.0f) * p0 : x; /* p0 alpha; input scale 1 / alpha */
    case U_SOFTSIGN: return x / (1.0f + fabsf(x));
    case U_HARDSHRINK: return x >= -p0 && x <= p0 ? 0.0f : x;
    case U_SOFTSHRINK: return x > p0 ? x - p0 : x < -p0 ? x + p0 : 0.0f;
    case U_TANHSHRINK: return x - tanhf(x);
    case U_LOGSIGMOID: return fminf(x, 0.0f) - log1pf(expf(-fabsf(x)));
    case U_LOG2: return log2f(x);
    case U_LOG10: return log10f(x);
    case U_EXP2: return exp2f(x);
    case U_TAN: return tanf(x);
    case U_ATAN: return atanf(x);
    case U_ASIN: return asinf(x);
    case U_ACOS: return acosf(x);
    case U_SINH: return sinhf(x);
    case U_COSH: return coshf(x);
    case U_ASINH: return asinhf(x);
    case U_ACOSH: return acoshf(x);
    case U_ATANH: return atanhf(x);
    case U_FRAC: return x - truncf(x); /* ATen's: NaN and infinities give NaN */
    case U_ERFC: return erfcf(x);
    case U_LGAMMA: return lgammaf(x);
    case U_ERFINV: return (float)erfinv_of(x);
    case U_SINC: { /* sin(pi x) / (pi x), 1 at 0 */
        if (x == 0.0f) return 1.0f;
        float px = (float)M_PI * x;
        return sinf(px) / px;
    }
    case U_LOGIT: { /* p0 < 0: no eps; else x clamped to [eps, 1 - eps] first */
        float z = p0 < 0 ? x : x < p0 ? p0 : x > 1.0f - p0 ? 1.0f - p0 : x;
        return logf(z / (1.0f - z));
    }
    case U_THRESHOLD: return x > p0 ? x : p1;
    case U_NOT: return x == 0.0f ? 1.0f : 0.0f;
    case U_ISNAN: return isnan(x) ? 1.0f : 0.0f; /* the macros give any nonzero (glibc's isinf -1 for -inf) */
    case U_ISINF: return isinf(x) ? 1.0f : 0.0f;
    case U_ISFINITE: return isfinite(x) ? 1.0f : 0.0f;
    case U_ISPOSINF: return x == INFINITY;
    case U_ISNEGINF: return x == -INFINITY;
    case U_SIGNBIT: return signbit(x) ? 1.0f : 0.0f;
    }
    return x;
}

/* the clamping ops as branch-free loops the compiler vectorizes (NaN passes through, as in torch) */
BPCC_HOT static void clamp_loop(const float *restrict x, float *restrict y, uint64_t n, float lo, float hi)
{
    for (uint64_t i = 0; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        y[i] = v > hi ? hi : v;
    }
}

/* the same in place (restrict would not allow x == y) */
BPCC_HOT static void clamp_in_place(float *v, uint64_t n, float lo, float hi)
{
    for (uint64_t i = 0; i < n; i++) {
        float e = v[i];
        e = e < lo ? lo : e;
        v[i] = e > hi ? hi : e;
    }
}

BPCC_HOT static void hardswish_loop(const float *restrict x, float *restrict y, uint64_t n, bool sigmoid)
{
    for (uint64_t i = 0; i < n; i++) {
        float v = x[i], r = v + 3.0f;
        r = r < 0.0f ? 0.0f : r;
        r = r > 6.0f ? 6.0f : r;
        y[i] = sigmoid ? r / 6.0f : v * r / 6.0f;
    }
}

/* the ops over exp, tanh or erf, a block at a time: the block's arguments to the function, the
** vectorized function (vmath.c), then the op's arithmetic around it (the formulas of apply) */
BPCC_HOT static void transcendental(enum unop op, const float *restrict x, float *restrict y, uint64_t n, float p0)
{
    enum { BLOCK = 512 };
    float t[BLOCK];
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    for (uint64_t at = 0; at < n; at += BLOCK) {
        uint64_t m = n - at < BLOCK ? n - at : BLOCK;
        const float *xs = x + at;
        float *ys = y + at;
        switch (op) {
        case U_SIGMOID:
        case U_SILU:
            for (uint64_t i = 0; i < m; i++) t[i] = -xs[i];
            bpcc_vexpf(t, t, m);
            if (op == U_SIGMOID)
                for (uint64_t i = 0; i < m; i++) ys[i] = 1.0f / (1.0f + t[i]);
            else
                for (uint64_t i = 0; i < m; i++) ys[i] = xs[i] / (1.0f + t[i]);
            break;
        case U_ELU:
            bpcc_vexpf(xs, t, m);
            for (uint64_t i = 0; i < m; i++) ys[i] = xs[i] > 0.0f ? xs[i] : p0 * (t[i] - 1.0f);
            break;
        case U_EXP: bpcc_vexpf(xs, ys, m); break;
        case U_TANH: bpcc_vtanhf(xs, ys, m); break;
        case U_GELU:
            for (uint64_t i = 0; i < m; i++) t[i] = xs[i] * (float)M_SQRT1_2;
            bpcc_verff(t, t, m);
            for (uint64_t i = 0; i < m; i++) ys[i] = 0.5f * xs[i] * (1.0f + t[i]);
            break;
        case U_GELU_TANH:
            for (uint64_t i = 0; i < m; i++) t[i] = k * (xs[i] + 0.044715f * xs[i] * xs[i] * xs[i]);
            bpcc_vtanhf(t, t, m);
            for (uint64_t i = 0; i < m; i++) ys[i] = 0.5f * xs[i] * (1.0f + t[i]);
            break;
        default:
            for (uint64_t i = 0; i < m; i++) ys[i] = apply(op, xs[i], p0, 0.0f);
        }
    }
}

static enum bpcc_status unary(const struct xargs *a, enum unop op, float p0, float p1, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    bool clamp = op == U_RELU || op == U_RELU6 || op == U_HARDTANH;
    if (clamp && a->consume && a->pos[0].k == XV_TENSOR && a->pos[0].u.t == x && x->qdtype == BPCC_DTYPE_NONE) {
        /* the caller's intermediate, clamped where it is */
        struct xtensor *t = a->pos[0].u.t;
        clamp_in_place(t->data, t->numel, op == U_HARDTANH ? p0 : 0.0f, op == U_RELU ? INFINITY : op == U_RELU6 ? 6.0f : p1);
        *out = (struct xval){.k = XV_TENSOR, .u.t = t};
        return BPCC_OK;
    }
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    switch (op) {
    case U_RELU: clamp_loop(x->data, y->data, x->numel, 0.0f, INFINITY); break;
    case U_RELU6: clamp_loop(x->data, y->data, x->numel, 0.0f, 6.0f); break;
    case U_HARDTANH: clamp_loop(x->data, y->data, x->numel, p0, p1); break;
    case U_HARDSWISH: hardswish_loop(x->data, y->data, x->numel, false); break;
    case U_HARDSIGMOID: hardswish_loop(x->data, y->data, x->numel, true); break;
    case U_IDENTITY: memcpy(y->data, x->data, x->numel * sizeof(float)); break;
    case U_SIGMOID:
    case U_SILU:
    case U_ELU:
    case U_EXP:
    case U_TANH:
    case U_GELU:
    case U_GELU_TANH: transcendental(op, x->data, y->data, x->numel, p0); break;
    default:
        for (uint64_t i = 0; i < x->numel; i++) y->data[i] = apply(op, x->data[i], p0, p1);
    }
    return bpcc_xput(a, y, out);
}

/* the first positional argument of a module call is its input; modules keep parameters as attributes */
#define UNARY(name, op)                                                                            \
    static enum bpcc_status name(const struct xargs *a, struct xval *out) { return unary(a, op, 0, 0, out); }
UNARY(k_relu, U_RELU)
UNARY(k_relu6, U_RELU6)
UNARY(k_hardswish, U_HARDSWISH)
UNARY(k_hardsigmoid, U_HARDSIGMOID)
UNARY(k_sigmoid, U_SIGMOID)
UNARY(k_tanh, U_TANH)
UNARY(k_silu, U_SILU)
UNARY(k_identity, U_IDENTITY)
UNARY(k_neg, U_NEG)
UNARY(k_exp, U_EXP)
UNARY(k_sqrt, U_SQRT)
UNARY(k_rsqrt, U_RSQRT)
UNARY(k_reciprocal, U_RECIPROCAL)
UNARY(k_abs, U_ABS)
UNARY(k_log, U_LOG)
UNARY(k_mish, U_MISH)
UNARY(k_erf, U_ERF)
UNARY(k_floor, U_FLOOR)
UNARY(k_ceil, U_CEIL)
UNARY(k_trunc, U_TRUNC)
UNARY(k_sign, U_SIGN)
UNARY(k_sin, U_SIN)
UNARY(k_cos, U_COS)
UNARY(k_log1p, U_LOG1P)
UNARY(k_expm1, U_EXPM1)
UNARY(k_square, U_SQUARE)
UNARY(k_selu, U_SELU)
UNARY(k_softsign, U_SOFTSIGN)
UNARY(k_tanhshrink, U_TANHSHRINK)
UNARY(k_logsigmoid, U_LOGSIGMOID)
UNARY(k_log2, U_LOG2)
UNARY(k_log10, U_LOG10)
UNARY(k_exp2, U_EXP2)
UNARY(k_tan, U_TAN)
UNARY(k_atan, U_ATAN)
UNARY(k_asin, U_ASIN)
UNARY(k_acos, U_ACOS)
UNARY(k_sinh, U_SINH)
UNARY(k_cosh, U_COSH)
UNARY(k_asinh, U_ASINH)
UNARY(k_acosh, U_ACOSH)
UNARY(k_atanh, U_ATANH)
UNARY(k_frac, U_FRAC)
UNARY(k_erfc, U_ERFC)
UNARY(k_erfinv, U_ERFINV)
UNARY(k_lgamma, U_LGAMMA)
UNARY(k_sinc, U_SINC)

/* logit(input, eps=None) */
static enum bpcc_status k_logit(const struct xargs *a, struct xval *out)
{
    double eps;
    if (!bpcc_xarg_float(a, 1, "eps", -1.0, &eps)) return BPCC_ERR_GRAPH;
    return unary(a, U_LOGIT, (float)eps, 0, out);
}

/* threshold(input, threshold, value) and nn.Threshold: x where x > threshold, else value */
static enum bpcc_status k_threshold(const struct xargs *a, struct xval *out)
{
    double t, v;
    if (a->module) {
        t = bpcc_mattr_float(a->module, "threshold", NAN);
        v = bpcc_mattr_float(a->module, "value", NAN);
    } else if (!bpcc_xarg_float(a, 1, "threshold", NAN, &t) || !bpcc_xarg_float(a, 2, "value", NAN, &v)) {
        return BPCC_ERR_GRAPH;
    }
    if (t != t || v != v) return bpcc_xerr(a, "threshold needs its threshold and value");
    return unary(a, U_THRESHOLD, (float)t, (float)v, out);
}

/* isnan / isinf / isfinite / isposinf / isneginf: bool tensors */
static enum bpcc_status predicate(const struct xargs *a, enum unop op, struct xval *out)
{
    enum bpcc_status st = unary(a, op, 0, 0, out);
    if (st == BPCC_OK) out->u.t->boolean = true;
    return st;
}
static enum bpcc_status k_isnan(const struct xargs *a, struct xval *out) { return predicate(a, U_ISNAN, out); }
static enum bpcc_status k_isinf(const struct xargs *a, struct xval *out) { return predicate(a, U_ISINF, out); }
static enum bpcc_status k_isfinite(const struct xargs *a, struct xval *out) { return predicate(a, U_ISFINITE, out); }
static enum bpcc_status k_isposinf(const struct xargs *a, struct xval *out) { return predicate(a, U_ISPOSINF, out); }
static enum bpcc_status k_isneginf(const struct xargs *a, struct xval *out) { return predicate(a, U_ISNEGINF, out); }
static enum bpcc_status k_signbit(const struct xargs *a, struct xval *out) { return predicate(a, U_SIGNBIT, out); }

/* nan_to_num(input, nan=0.0, posinf=None, neginf=None): the infinities to float32's largest and lowest
** values unless given */
static enum bpcc_status k_nan_to_num(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    double nan, pinf, ninf;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_float(a, 1, "nan", 0.0, &nan) ||
        !bpcc_xarg_float(a, 2, "posinf", FLT_MAX, &pinf) || !bpcc_xarg_float(a, 3, "neginf", -FLT_MAX, &ninf))
        return BPCC_ERR_GRAPH;
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    for (uint64_t i = 0; i < x->numel; i++) {
        float v = x->data[i];
        y->data[i] = isnan(v) ? (float)nan : v == INFINITY ? (float)pinf : v == -INFINITY ? (float)ninf : v;
    }
    return bpcc_xput(a, y, out);
}

/* round(input, decimals=0): to the nearest integer, halves to even */
static enum bpcc_status k_round(const struct xargs *a, struct xval *out)
{
    int64_t decimals;
    if (!bpcc_xarg_int(a, UINT32_MAX, "decimals", 0, &decimals)) return BPCC_ERR_GRAPH;
    if (decimals) return bpcc_xerr(a, "round with decimals=%lld is not supported", (long long)decimals);
    return unary(a, U_ROUND, 0, 0, out);
}

/* celu(input, alpha=1.0) */
static enum bpcc_status k_celu(const struct xargs *a, struct xval *out)
{
    double al = 1.0;
    if (a->module) al = bpcc_mattr_float(a->module, "alpha", 1.0);
    else if (!bpcc_xarg_float(a, 1, "alpha", 1.0, &al)) return BPCC_ERR_GRAPH;
    if (al == 0) return bpcc_xerr(a, "celu's alpha must not be 0");
    return unary(a, U_CELU, (float)al, 0, out);
}

/* hardshrink / softshrink(input, lambd=0.5) */
static enum bpcc_status shrink(const struct xargs *a, enum unop op, struct xval *out)
{
    double l = 0.5;
    if (a->module) l = bpcc_mattr_float(a->module, "lambd", 0.5);
    else if (!bpcc_xarg_float(a, 1, "lambd", 0.5, &l)) return BPCC_ERR_GRAPH;
    return unary(a, op, (float)l, 0, out);
}
static enum bpcc_status k_hardshrink(const struct xargs *a, struct xval *out) { return shrink(a, U_HARDSHRINK, out); }
static enum bpcc_status k_softshrink(const struct xargs *a, struct xval *out) { return shrink(a, U_SOFTSHRINK, out); }

/* softplus(input, beta=1, threshold=20): x where x * beta > threshold, else log1p(exp(x * beta)) / beta */
static enum bpcc_status k_softplus(const struct xargs *a, struct xval *out)
{
    double beta = 1, threshold = 20;
    if (a->module) {
        beta = bpcc_mattr_float(a->module, "beta", 1);
        threshold = bpcc_mattr_float(a->module, "threshold", 20);
    } else if (!bpcc_xarg_float(a, 1, "beta", 1, &beta) || !bpcc_xarg_float(a, 2, "threshold", 20, &threshold)) {
        return BPCC_ERR_GRAPH;
    }
    return unary(a, U_SOFTPLUS, (float)beta, (float)threshold, out);
}

/* pow(input, exponent) for a number exponent, with ATen's exact forms of the common ones */
static enum bpcc_status k_hardtanh(const struct xargs *a, struct xval *out)
{
    double lo, hi;
    if (a->module) {
        lo = bpcc_mattr_float(a->module, "min_val", -1.0);
        hi = bpcc_mattr_float(a->module, "max_val", 1.0);
    } else if (!bpcc_xarg_float(a, 1, "min_val", -1.0, &lo) || !bpcc_xarg_float(a, 2, "max_val", 1.0, &hi)) {
        return BPCC_ERR_GRAPH;
    }
    return unary(a, U_HARDTANH, (float)lo, (float)hi, out);
}

static enum bpcc_status clamp_between(const struct xargs *a, uint32_t lo_at, const char *lo, uint32_t hi_at,
                                      const char *hi, struct xval *out);

static enum bpcc_status k_clamp(const struct xargs *a, struct xval *out)
{
    const struct xval *vl = bpcc_xarg(a, 1, "min"), *vh = bpcc_xarg(a, 2, "max");
    if ((vl && vl->k == XV_TENSOR) || (vh && vh->k == XV_TENSOR)) return clamp_between(a, 1, "min", 2, "max", out);
    double lo, hi;
    if (!bpcc_xarg_float(a, 1, "min", -INFINITY, &lo) || !bpcc_xarg_float(a, 2, "max", INFINITY, &hi))
        return BPCC_ERR_GRAPH;
    return unary(a, U_HARDTANH, (float)lo, (float)hi, out);
}

/* clamp_min(input, min) / clamp_max(input, max) */
static enum bpcc_status k_clamp_min(const struct xargs *a, struct xval *out)
{
    const struct xval *vl = bpcc_xarg(a, 1, "min");
    if (vl && vl->k == XV_TENSOR) return clamp_between(a, 1, "min", UINT32_MAX, NULL, out);
    double lo;
    if (!bpcc_xarg_float(a, 1, "min", -INFINITY, &lo)) return BPCC_ERR_GRAPH;
    return unary(a, U_HARDTANH, (float)lo, INFINITY, out);
}

static enum bpcc_status k_clamp_max(const struct xargs *a, struct xval *out)
{
    const struct xval *vh = bpcc_xarg(a, 1, "max");
    if (vh && vh->k == XV_TENSOR) return clamp_between(a, UINT32_MAX, NULL, 1, "max", out);
    double hi;
    if (!bpcc_xarg_float(a, 1, "max", INFINITY, &hi)) return BPCC_ERR_GRAPH;
    return unary(a, U_HARDTANH, -INFINITY, (float)hi, out);
}

static enum bpcc_status k_leaky_relu(const struct xargs *a, struct xval *out)
{
    double s = 0.01;
    if (a->module) s = bpcc_mattr_float(a->module, "negative_slope", 0.01);
    else if (!bpcc_xarg_float(a, 1, "negative_slope", 0.01, &s)) return BPCC_ERR_GRAPH;
    return unary(a, U_LEAKY, (float)s, 0, out);
}

static enum bpcc_status k_elu(const struct xargs *a, struct xval *out)
{
    double al = 1.0;
    if (a->module) al = bpcc_mattr_float(a->module, "alpha", 1.0);
    else if (!bpcc_xarg_float(a, 1, "alpha", 1.0, &al)) return BPCC_ERR_GRAPH;
    return unary(a, U_ELU, (float)al, 0, out);
}

static enum bpcc_status k_gelu(const struct xargs *a, struct xval *out)
{
    const char *approx = "none";
    if (a->module) {
        const struct bpcc_value *v = bpcc_module_attr(a->module, "approximate");
        if (v && v->kind == BPCC_VAL_STR) approx = v->u.s;
    } else {
        const struct xval *v = bpcc_xarg(a, 99, "approximate");
        if (v && v->k == XV_STR) approx = v->u.s;
    }
    return unary(a, !strcmp(approx, "tanh") ? U_GELU_TANH : U_GELU, 0, 0, out);
}

/* }================================================ */

/* {==================== binary with broadcasting ==================== */

/* B_MAX / B_MIN: torch.maximum / minimum (NaN from either side); the comparisons and logical ops
** give 0 or 1 (a bool tensor) */
enum binop { B_ADD, B_SUB, B_MUL, B_DIV, B_MAX, B_MIN, B_POW, B_ATAN2, B_HYPOT, B_FMOD, B_REM, B_FLOORDIV, B_LOGADDEXP,
             B_XLOGY, B_HEAVISIDE, B_GT, B_LT, B_GE, B_LE, B_EQ, B_NE, B_AND, B_OR, B_XOR };

static bool bin_is_bool(enum binop op) { return op >= B_GT; }

static float bin(enum binop op, float x, float y)
{
    switch (op) {
    case B_ADD: return x + y;
    case B_SUB: return x - y;
    case B_MUL: return x * y;
    case B_DIV: return x / y;
    case B_MAX: return x != x || x > y ? x : y;
    case B_MIN: return x != x || x < y ? x : y;
    case B_POW: return powf(x, y);
    case B_ATAN2: return atan2f(x, y);
    case B_HYPOT: return hypotf(x, y);
    case B_FMOD: return fmodf(x, y);
    case B_REM: { /* ATen's: the remainder with the divisor's sign */
        float m = fmodf(x, y);
        return m != 0.0f && (y < 0.0f) != (m < 0.0f) ? m + y : m;
    }
    case B_FLOORDIV: { /* c10's div_floor for floats (torch.floor_divide rounds down since 1.13) */
        if (y == 0.0f) return x / y;
        float m = fmodf(x, y), d = (x - m) / y;
        if (m != 0.0f && (y < 0.0f) != (m < 0.0f)) d -= 1.0f;
        if (d == 0.0f) return copysignf(0.0f, x / y);
        float f = floorf(d);
        return d - f > 0.5f ? f + 1.0f : f;
    }
    case B_LOGADDEXP: { /* ATen's: equal infinities as they are, else the larger plus log1p(exp(-|x - y|)) */
        if (isinf(x) && x == y) return x;
        float m = x > y ? x : y;
        return m + log1pf(expf(-fabsf(x - y)));
    }
    case B_XLOGY: return isnan(y) ? y : x == 0.0f ? 0.0f : x * logf(y);
    case B_HEAVISIDE: return x == 0.0f ? y : (float)(x > 0.0f);
    case B_GT: return x > y;
    case B_LT: return x < y;
    case B_GE: return x >= y;
    case B_LE: return x <= y;
    case B_EQ: return x == y;
    case B_NE: return x != y;
    case B_AND: return x != 0.0f && y != 0.0f;
    case B_OR: return x != 0.0f || y != 0.0f;
    case B_XOR: return (x != 0.0f) != (y != 0.0f);
    }
    return x;
}

/* y[i] = x op (z * al) over a block of n elements, each operand stepping by 1 (a contiguous run)
** or 0 (one value broadcast); the same arithmetic as element by element, in loops the compiler
** vectorizes */
#define BLOCK_LOOP(EXPR)                                                                            \
    do {                                                                                            \
        if (mx && mz)                                                                               \
            for (int64_t i = 0; i < n; i++) {                                                       \
                float p = x[i], q = z[i];                                                           \
                if (scaled) q *= al;                                                                \
                y[i] = EXPR;                                                                        \
            }                                                                                       \
        else if (mx)                                                                                \
            for (int64_t i = 0; i < n; i++) {                                                       \
                float p = x[i], q = z[0];                                                           \
                if (scaled) q *= al;                                                                \
                y[i] = EXPR;                                                                        \
            }                                                                                       \
        else /* x one value, z contiguous (a block never has both one value) */                     \
            for (int64_t i = 0; i < n; i++) {                                                       \
                float p = x[0], q = z[i];                                                           \
                if (scaled) q *= al;                                                                \
                y[i] = EXPR;                                                                        \
            }                                                                                       \
    } while (0)

BPCC_HOT static void bin_block(enum binop op, const float *restrict x, bool mx, const float *restrict z, bool mz,
                               float al, int64_t n, float *restrict y)
{
    bool scaled = al != 1.0f;
    switch (op) {
    case B_ADD: BLOCK_LOOP(p + q); break;
    case B_SUB: BLOCK_LOOP(p - q); break;
    case B_MUL: BLOCK_LOOP(p * q); break;
    case B_DIV: BLOCK_LOOP(p / q); break;
    default: BLOCK_LOOP(bin(op, p, q)); break;
    }
}
#undef BLOCK_LOOP

/* x[i] = x[i] op (z[i] * al), the arithmetic of bin_block, with the result over x. x and z are
** two tensors' buffers, so restrict holds; one loop per op, in a function of its own, so that each
** is vectorized (inlined into binary, the loop with the op chosen inside stayed scalar) */
#define IN_PLACE_LOOP(EXPR)                                                                         \
    do {                                                                                            \
        for (uint64_t i = 0; i < n; i++) {                                                          \
            float p = x[i], q = scaled ? z[i] * al : z[i];                                          \
            x[i] = EXPR;                                                                            \
        }                                                                                           \
    } while (0)

BPCC_HOT __attribute__((noinline)) static void bin_in_place(enum binop op, float *restrict x, const float *restrict z,
                                                            float al, uint64_t n)
{
    bool scaled = al != 1.0f;
    switch (op) {
    case B_ADD: IN_PLACE_LOOP(p + q); break;
    case B_SUB: IN_PLACE_LOOP(p - q); break;
    case B_MUL: IN_PLACE_LOOP(p * q); break;
    case B_DIV: IN_PLACE_LOOP(p / q); break;
    default: IN_PLACE_LOOP(bin(op, p, q)); break;
    }
}
#undef IN_PLACE_LOOP

/* x op y where either may be a tensor or a number (alpha scales y for add/sub) */
BPCC_HOT static enum bpcc_status binary(const struct xargs *a, enum binop op, bool swap, struct xval *out)
{
    const struct xval *xa = bpcc_xarg(a, 0, "input"), *xb = bpcc_xarg(a, 1, "other");
    if (!xa || !xb) return bpcc_xerr(a, "needs two operands");
    if (swap) {
        const struct xval *t = xa;
        xa = xb;
        xb = t;
    }
    double alpha = 1.0;
    if ((op == B_ADD || op == B_SUB) && !bpcc_xarg_float(a, 99, "alpha", 1.0, &alpha)) return BPCC_ERR_GRAPH;
    bool ta = xa->k == XV_TENSOR, tb = xb->k == XV_TENSOR;
    if (!ta && !tb) {
        double p, q;
        if ((xa->k != XV_INT && xa->k != XV_FLOAT) || (xb->k != XV_INT && xb->k != XV_FLOAT))
            return bpcc_xerr(a, "operands must be tensors or numbers");
        if (xa->k == XV_INT && xb->k == XV_INT && (op <= B_MUL || op == B_MAX || op == B_MIN)) {
            int64_t p = xa->u.i, q = xb->u.i;
            int64_t r = op == B_ADD ? p + (int64_t)alpha * q : op == B_SUB ? p - (int64_t)alpha * q : op == B_MUL ? p * q
                      : op == B_MAX ? (p > q ? p : q) : (p < q ? p : q);
            *out = (struct xval){.k = XV_INT, .u.i = r};
            return BPCC_OK;
        }
        p = xa->k == XV_INT ? (double)xa->u.i : xa->u.f;
        q = xb->k == XV_INT ? (double)xb->u.i : xb->u.f;
        if (bin_is_bool(op)) {
            bool r = op == B_GT ? p > q : op == B_LT ? p < q : op == B_GE ? p >= q : op == B_LE ? p <= q
                   : op == B_EQ ? p == q : op == B_NE ? p != q : op == B_AND ? p != 0 && q != 0
                   : op == B_OR ? p != 0 || q != 0 : (p != 0) != (q != 0);
            *out = (struct xval){.k = XV_BOOL, .u.b = r};
            return BPCC_OK;
        }
        double r = op == B_ADD ? p + alpha * q : op == B_SUB ? p - alpha * q : op == B_MUL ? p * q : op == B_DIV ? p / q
                 : op == B_MAX ? (p != p || p > q ? p : q) : op == B_POW ? pow(p, q) : op == B_MIN ? (p != p || p < q ? p : q)
                 : bin(op, (float)p, (float)q);
        *out = (struct xval){.k = XV_FLOAT, .u.f = r};
        return BPCC_OK;
    }
    float fa = 0, fb = 0;
    if (!ta) {
        if (xa->k != XV_INT && xa->k != XV_FLOAT && xa->k != XV_BOOL) return bpcc_xerr(a, "operand must be a number");
        fa = xa->k == XV_INT ? (float)xa->u.i : xa->k == XV_BOOL ? (float)xa->u.b : (float)xa->u.f;
    }
    if (!tb) {
        if (xb->k != XV_INT && xb->k != XV_FLOAT && xb->k != XV_BOOL) return bpcc_xerr(a, "operand must be a number");
        fb = xb->k == XV_INT ? (float)xb->u.i : xb->k == XV_BOOL ? (float)xb->u.b : (float)xb->u.f;
    }
    float al = (float)alpha;
    if (ta != tb) {
        const struct xtensor *t = ta ? xa->u.t : xb->u.t;
        struct xtensor *y = bpcc_xlike(t);
        if (!y) return bpcc_diag_nomem(a->d);
        for (uint64_t i = 0; i < t->numel; i++) {
            float p = ta ? t->data[i] : fa, q = tb ? t->data[i] : fb;
            if (al != 1.0f) q *= al;
            y->data[i] = bin(op, p, q);
        }
        return bpcc_xput(a, bpcc_xmark(y, bin_is_bool(op)), out);
    }
    const struct xtensor *x = xa->u.t, *z = xb->u.t;
    if (a->consume && xa == &a->pos[0] && x != z && x->qdtype == BPCC_DTYPE_NONE && z->qdtype == BPCC_DTYPE_NONE &&
        x->ndim == z->ndim && !memcmp(x->dims, z->dims, x->ndim * sizeof *x->dims)) {
        /* the first operand dies here (a residual add): the result goes where it is */
        struct xtensor *t = a->pos[0].u.t;
        bin_in_place(op, t->data, z->data, al, t->numel);
        t->boolean = bin_is_bool(op);
        *out = (struct xval){.k = XV_TENSOR, .u.t = t};
        return BPCC_OK;
    }
    uint32_t nd = x->ndim > z->ndim ? x->ndim : z->ndim;
    int64_t dims[BPCC_MAX_DIMS], sx[BPCC_MAX_DIMS], sz[BPCC_MAX_DIMS];
    int64_t stx = 1, stz = 1;
    for (int i = (int)nd - 1; i >= 0; i--) {
        int ix = i - (int)(nd - x->ndim), iz = i - (int)(nd - z->ndim);
        int64_t dx = ix >= 0 ? x->dims[ix] : 1, dz = iz >= 0 ? z->dims[iz] : 1;
        if (dx != dz && dx != 1 && dz != 1)
            return bpcc_xerr(a, "shapes cannot be broadcast (dimension %d: %lld vs %lld)", i, (long long)dx, (long long)dz);
        dims[i] = dx > dz ? dx : dz;
        if (dx == 0 || dz == 0) dims[i] = 0;
        sx[i] = dx == 1 ? 0 : stx;
        sz[i] = dz == 1 ? 0 : stz;
        stx *= dx;
        stz *= dz;
    }
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    /* the innermost dimensions make one block when each operand walks them contiguously or not at
    ** all (a same-shape add, a per-channel scale over H x W, ...); the outer ones are counted */
    int mx = -1, mz = -1; /* over the block: 1 contiguous, 0 one value, -1 not yet known */
    int64_t inner = 1;
    int kb = (int)nd;     /* the block is dims[kb .. nd) */
    for (; kb > 0; kb--) {
        int k = kb - 1;
        if (dims[k] == 1) continue;
        int bx = sx[k] == inner ? 1 : sx[k] == 0 ? 0 : -2, bz = sz[k] == inner ? 1 : sz[k] == 0 ? 0 : -2;
        if (bx == -2 || bz == -2 || (mx >= 0 && bx != mx) || (mz >= 0 && bz != mz) || (bx == 0 && bz == 0)) break;
        mx = bx;
        mz = bz;
        inner *= dims[k];
    }
    if (y->numel == 0) return bpcc_xput(a, bpcc_xmark(y, bin_is_bool(op)), out);
    int64_t idx[BPCC_MAX_DIMS] = {0};
    int64_t ox = 0, oz = 0;
    for (uint64_t base = 0; base < y->numel; base += (uint64_t)inner) {
        bin_block(op, x->data + ox, mx != 0, z->data + oz, mz != 0, al, inner, y->data + base);
        for (int k = kb - 1; k >= 0; k--) {
            idx[k]++;
            ox += sx[k];
            oz += sz[k];
            if (idx[k] < dims[k]) break;
            ox -= sx[k] * dims[k];
            oz -= sz[k] * dims[k];
            idx[k] = 0;
        }
    }
    return bpcc_xput(a, bpcc_xmark(y, bin_is_bool(op)), out);
}

static enum bpcc_status k_add(const struct xargs *a, struct xval *out) { return binary(a, B_ADD, false, out); }
static enum bpcc_status k_sub(const struct xargs *a, struct xval *out) { return binary(a, B_SUB, false, out); }
static enum bpcc_status k_mul(const struct xargs *a, struct xval *out) { return binary(a, B_MUL, false, out); }
/* div(input, other, rounding_mode=None): true division, or rounded down ("floor", c10's div_floor)
** or toward zero ("trunc": trunc(x / y)) */
static enum bpcc_status k_div(const struct xargs *a, struct xval *out)
{
    const struct xval *mv = bpcc_xarg(a, UINT32_MAX, "rounding_mode");
    if (!mv || mv->k == XV_NONE) return binary(a, B_DIV, false, out);
    if (mv->k != XV_STR || (strcmp(mv->u.s, "floor") && strcmp(mv->u.s, "trunc")))
        return bpcc_xerr(a, "rounding_mode must be None, \"trunc\" or \"floor\"");
    if (mv->u.s[0] == 'f') return binary(a, B_FLOORDIV, false, out);
    enum bpcc_status st = binary(a, B_DIV, false, out);
    if (st == BPCC_OK && out->k == XV_TENSOR)
        for (uint64_t i = 0; i < out->u.t->numel; i++) out->u.t->data[i] = truncf(out->u.t->data[i]);
    else if (st == BPCC_OK && out->k == XV_FLOAT)
        out->u.f = trunc(out->u.f);
    return st;
}
static enum bpcc_status k_rsub(const struct xargs *a, struct xval *out) { return binary(a, B_SUB, true, out); }
#define BINARY(name, op)                                                                           \
    static enum bpcc_status name(const struct xargs *a, struct xval *out) { return binary(a, op, false, out); }
BINARY(k_atan2, B_ATAN2)
BINARY(k_hypot, B_HYPOT)
BINARY(k_fmod, B_FMOD)

/* remainder / % : the divisor's sign; ints give an int, as Python's % */
static enum bpcc_status k_remainder(const struct xargs *a, struct xval *out)
{
    const struct xval *x = bpcc_xarg(a, 0, "input"), *y = bpcc_xarg(a, 1, "other");
    if (x && y && x->k == XV_INT && y->k == XV_INT) {
        if (!y->u.i) return bpcc_xerr(a, "integer modulo by zero");
        int64_t m = y->u.i == -1 ? 0 : x->u.i % y->u.i;
        *out = (struct xval){.k = XV_INT, .u.i = m && (m < 0) != (y->u.i < 0) ? m + y->u.i : m};
        return BPCC_OK;
    }
    return binary(a, B_REM, false, out);
}
BINARY(k_floor_divide, B_FLOORDIV)
BINARY(k_logaddexp, B_LOGADDEXP)
BINARY(k_xlogy, B_XLOGY)

/* heaviside(input, values) */
static enum bpcc_status k_heaviside(const struct xargs *a, struct xval *out)
{
    const struct xtensor *v;
    if (!bpcc_xarg_tensor(a, 1, "values", &v)) return BPCC_ERR_GRAPH; /* a tensor in PyTorch too */
    return binary(a, B_HEAVISIDE, false, out);
}

/* pow(input, exponent): a tensor to the power of a number as ATen's pow_tensor_scalar computes it
** (squares, cubes, square roots and reciprocals exactly); a number to the power of a tensor (2 ** x)
** and tensor to tensor, broadcast, by powf (PyTorch's vectorized pow may differ in the last ulp) */
static enum bpcc_status k_pow(const struct xargs *a, struct xval *out)
{
    const struct xval *b = bpcc_xarg(a, 0, "input"), *e = bpcc_xarg(a, 1, "exponent");
    if (!b || !e) return bpcc_xerr(a, "pow needs a base and an exponent");
    if (b->k != XV_TENSOR || (e->k != XV_INT && e->k != XV_FLOAT)) {
        if (a->n < 2) return bpcc_xerr(a, "pow with a tensor exponent takes both operands by position");
        return binary(a, B_POW, false, out);
    }
    double p = e->k == XV_INT ? (double)e->u.i : e->u.f;
    const struct xtensor *x = b->u.t;
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    const float *v = x->data;
    float *q = y->data, fp = (float)p;
    for (uint64_t i = 0; i < x->numel; i++)
        q[i] = p == 2 ? v[i] * v[i] : p == 3 ? v[i] * v[i] * v[i] : p == 0.5 ? sqrtf(v[i]) : p == -0.5 ? 1.0f / sqrtf(v[i])
             : p == -1 ? 1.0f / v[i] : p == -2 ? 1.0f / (v[i] * v[i]) : p == 1 ? v[i] : p == 0 ? 1.0f : powf(v[i], fp);
    return bpcc_xput(a, y, out);
}
static enum bpcc_status k_floordiv(const struct xargs *a, struct xval *out)
{
    const struct xval *x = bpcc_xarg(a, 0, NULL), *y = bpcc_xarg(a, 1, NULL);
    if (x && y && x->k == XV_INT && y->k == XV_INT && y->u.i) {
        int64_t q = x->u.i / y->u.i;
        if ((x->u.i % y->u.i) && ((x->u.i < 0) != (y->u.i < 0))) q--;
        *out = (struct xval){.k = XV_INT, .u.i = q};
        return BPCC_OK;
    }
    if (x && y && (x->k == XV_TENSOR || y->k == XV_TENSOR)) return binary(a, B_FLOORDIV, false, out); /* tensor // n */
    return bpcc_xerr(a, "floordiv is supported on ints and tensors only");
}

/* }================================================ */

/* {==================== the identity in eval mode ==================== */

/* Dropout modules and F.dropout(input, p=0.5, training=True): the identity in eval mode or at p = 0;
** in training mode they are random, and F.dropout trains unless told otherwise */
static enum bpcc_status k_dropout(const struct xargs *a, struct xval *out)
{
    double p = 0.5;
    bool training = false;
    if (a->module) {
        p = bpcc_mattr_float(a->module, "p", 0.5);
        training = bpcc_mattr_bool(a->module, "training", false);
    } else if (!bpcc_xarg_float(a, 1, "p", 0.5, &p) || !bpcc_xarg_bool(a, 2, "training", true, &training)) {
        return BPCC_ERR_GRAPH;
    }
    if (training && p > 0) return bpcc_xerr(a, "dropout in training mode is random; export the model in eval mode");
    return k_identity(a, out);
}

/* alpha_dropout / feature_alpha_dropout (input, p=0.5, training=False): the identity unless training */
static enum bpcc_status k_alpha_dropout(const struct xargs *a, struct xval *out)
{
    bool training;
    double p;
    if (!bpcc_xarg_float(a, 1, "p", 0.5, &p) || !bpcc_xarg_bool(a, 2, "training", false, &training)) return BPCC_ERR_GRAPH;
    if (training && p > 0) return bpcc_xerr(a, "alpha dropout in training mode drops at random; export with training=False");
    return k_identity(a, out);
}

/* fill_(value) / zero_(): the input's shape filled (in place: interp.c writes it into the input) */
static enum bpcc_status fill(const struct xargs *a, bool zero, struct xval *out)
{
    const struct xtensor *x;
    double v = 0;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (!zero && !bpcc_xscalar(bpcc_xarg(a, 1, "value"), &v)) return bpcc_xerr(a, "fill_'s value must be a number");
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    for (uint64_t i = 0; i < y->numel; i++) y->data[i] = (float)v;
    return bpcc_xput(a, y, out);
}
static enum bpcc_status k_fill_(const struct xargs *a, struct xval *out) { return fill(a, false, out); }
static enum bpcc_status k_zero_(const struct xargs *a, struct xval *out) { return fill(a, true, out); }

/* torchvision.ops.stochastic_depth(input, p, mode, training): the identity in eval */
static enum bpcc_status k_stochastic_depth(const struct xargs *a, struct xval *out)
{
    bool training;
    double p;
    if (!bpcc_xarg_bool(a, 3, "training", true, &training) || !bpcc_xarg_float(a, 1, "p", 0, &p)) return BPCC_ERR_GRAPH;
    if (training && p > 0) return bpcc_xerr(a, "stochastic depth in training mode is random; export the model in eval mode");
    return k_identity(a, out);
}

/* }================================================ */

/* {==================== selection, fills and casts ==================== */

/* a tensor argument or a number as a tensor view: dims, data and a one-element buffer for numbers */
struct operand {
    uint32_t ndim;
    const int64_t *dims;
    const float *data;
    float one;
};

static bool operand_of(const struct xargs *a, uint32_t i, const char *name, struct operand *o)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    if (v && v->k == XV_TENSOR) {
        *o = (struct operand){v->u.t->ndim, v->u.t->dims, v->u.t->data, 0};
        return true;
    }
    double d;
    if (v && v->k == XV_BOOL) d = v->u.b;
    else if (!bpcc_xscalar(v, &d)) {
        bpcc_xerr(a, "argument %s must be a tensor or a number", name);
        return false;
    }
    *o = (struct operand){0, NULL, NULL, (float)d};
    return true;
}

/* the ops over three operands: where's c ? x : y; addcmul's input + value * t1 * t2 and addcdiv's
** input + value * t1 / t2, in ATen's order; lerp's, in ATen's two forms by the weight's size;
** clamp's between tensor bounds (std::min(std::max(x, lo), hi), NaN inputs kept) */
enum op3 { T_WHERE, T_ADDCMUL, T_ADDCDIV, T_LERP, T_CLAMP, T_ISCLOSE, T_ISCLOSE_NAN };

static float apply3(enum op3 op, float p, float q, float r, float v)
{
    switch (op) {
    case T_WHERE: return p != 0.0f ? q : r;
    case T_ADDCMUL: return p + v * q * r;
    case T_ADDCDIV: return p + v * q / r;
    case T_LERP: return fabsf(r) < 0.5f ? p + r * (q - p) : q - (q - p) * (1.0f - r);
    case T_CLAMP: {
        float m = p < q ? q : p;
        return isnan(p) ? p : r < m ? r : m;
    }
    case T_ISCLOSE:
    case T_ISCLOSE_NAN: { /* isclose(p, q) with rtol r and atol v, in float as ATen computes it */
        if (p == q) return 1.0f;
        if (isnan(p) && isnan(q)) return op == T_ISCLOSE_NAN;
        float allowed = v + fabsf(r * q), actual = fabsf(p - q);
        return isfinite(actual) && actual <= allowed;
    }
    }
    return p;
}

/* op over the three operands broadcast together (v: addcmul's / addcdiv's value) */
static enum bpcc_status map3(const struct xargs *a, enum op3 op, float v, struct operand *c, struct operand *x,
                             struct operand *y, struct xval *out)
{
    struct operand *o[3] = {c, x, y};
    uint32_t nd = 0;
    for (int k = 0; k < 3; k++) {
        if (!o[k]->data) o[k]->data = &o[k]->one;
        nd = o[k]->ndim > nd ? o[k]->ndim : nd;
    }
    int64_t dims[BPCC_MAX_DIMS], st[3][BPCC_MAX_DIMS], run[3] = {1, 1, 1};
    for (int i = (int)nd - 1; i >= 0; i--) {
        dims[i] = 1;
        for (int k = 0; k < 3; k++) {
            int j = i - (int)(nd - o[k]->ndim);
            int64_t d = j >= 0 ? o[k]->dims[j] : 1;
            if (d != 1 && dims[i] != 1 && d != dims[i])
                return bpcc_xerr(a, "shapes cannot be broadcast (dimension %d: %lld vs %lld)", i, (long long)dims[i], (long long)d);
            if (d != 1) dims[i] = d;
        }
        for (int k = 0; k < 3; k++) {
            int j = i - (int)(nd - o[k]->ndim);
            int64_t d = j >= 0 ? o[k]->dims[j] : 1;
            st[k][i] = d == 1 ? 0 : run[k];
            run[k] *= d;
        }
    }
    struct xtensor *t = bpcc_xtensor_new(nd, dims);
    if (!t) return bpcc_diag_nomem(a->d);
    int64_t idx[BPCC_MAX_DIMS] = {0}, off[3] = {0, 0, 0};
    for (uint64_t i = 0; i < t->numel; i++) {
        t->data[i] = apply3(op, c->data[off[0]], x->data[off[1]], y->data[off[2]], v);
        for (int k = (int)nd - 1; k >= 0; k--) {
            for (int q = 0; q < 3; q++) off[q] += st[q][k];
            if (++idx[k] < dims[k]) break;
            for (int q = 0; q < 3; q++) off[q] -= st[q][k] * dims[k];
            idx[k] = 0;
        }
    }
    return bpcc_xput(a, t, out);
}

/* where(condition, input, other) */
static enum bpcc_status k_where(const struct xargs *a, struct xval *out)
{
    struct operand c, x, y;
    if (a->n + a->n_kw == 1) { /* where(condition): nonzero(condition, as_tuple=True) */
        const struct xtensor *t;
        return bpcc_xarg_tensor(a, 0, "condition", &t) ? bpcc_xnonzero(a, t, true, out) : BPCC_ERR_GRAPH;
    }
    if (a->n + a->n_kw < 3) return bpcc_xerr(a, "where takes a condition, or a condition, an input and an other");
    if (!operand_of(a, 0, "condition", &c) || !operand_of(a, 1, "input", &x) || !operand_of(a, 2, "other", &y))
        return BPCC_ERR_GRAPH;
    return map3(a, T_WHERE, 0, &c, &x, &y, out);
}

/* addcmul / addcdiv (input, tensor1, tensor2, value=1) */
static enum bpcc_status addc(const struct xargs *a, enum op3 op, struct xval *out)
{
    struct operand in, t1, t2;
    double v;
    if (!operand_of(a, 0, "input", &in) || !operand_of(a, 1, "tensor1", &t1) || !operand_of(a, 2, "tensor2", &t2) ||
        !bpcc_xarg_float(a, 3, "value", 1.0, &v))
        return BPCC_ERR_GRAPH;
    return map3(a, op, (float)v, &in, &t1, &t2, out);
}
static enum bpcc_status k_addcmul(const struct xargs *a, struct xval *out) { return addc(a, T_ADDCMUL, out); }
static enum bpcc_status k_addcdiv(const struct xargs *a, struct xval *out) { return addc(a, T_ADDCDIV, out); }

/* clamp(input, min=None, max=None), clamp_min(input, min), clamp_max(input, max) with a tensor bound
** (the other a tensor, a number or absent): the bounds' positions and names */
static enum bpcc_status clamp_between(const struct xargs *a, uint32_t lo_at, const char *lo_name, uint32_t hi_at,
                                      const char *hi_name, struct xval *out)
{
    struct operand in, lo = {0, NULL, NULL, -INFINITY}, hi = {0, NULL, NULL, INFINITY};
    if (!operand_of(a, 0, "input", &in) ||
        (!bpcc_xarg_absent(a, lo_at, lo_name) && !operand_of(a, lo_at, lo_name, &lo)) ||
        (!bpcc_xarg_absent(a, hi_at, hi_name) && !operand_of(a, hi_at, hi_name, &hi)))
        return BPCC_ERR_GRAPH;
    return map3(a, T_CLAMP, 0, &in, &lo, &hi, out);
}

/* isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False): a bool tensor */
static enum bpcc_status k_isclose(const struct xargs *a, struct xval *out)
{
    struct operand x, y;
    double rtol, atol;
    bool equal_nan;
    if (!operand_of(a, 0, "input", &x) || !operand_of(a, 1, "other", &y) || !bpcc_xarg_float(a, 2, "rtol", 1e-5, &rtol) ||
        !bpcc_xarg_float(a, 3, "atol", 1e-8, &atol) || !bpcc_xarg_bool(a, 4, "equal_nan", false, &equal_nan))
        return BPCC_ERR_GRAPH;
    if (rtol < 0 || atol < 0) return bpcc_xerr(a, "rtol and atol must be non-negative (%g, %g)", rtol, atol);
    struct operand r = {0, NULL, NULL, (float)rtol};
    enum bpcc_status s = map3(a, equal_nan ? T_ISCLOSE_NAN : T_ISCLOSE, (float)atol, &x, &y, &r, out);
    if (!s) out->u.t->boolean = true;
    return s;
}

/* cross(input, other, dim=None) and linalg.cross(input, other, dim=-1): the cross product of the
** 3-vectors along dim (cross without dim: the first dimension of size 3); equal shapes */
static enum bpcc_status cross(const struct xargs *a, bool linalg, struct xval *out)
{
    const struct xtensor *x, *y;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "other", &y)) return BPCC_ERR_GRAPH;
    if (x->ndim != y->ndim || memcmp(x->dims, y->dims, x->ndim * sizeof *x->dims))
        return bpcc_xerr(a, "cross takes two tensors of one shape here");
    int64_t dim = -1;
    if (!linalg && bpcc_xarg_absent(a, 2, "dim")) {
        for (dim = 0; dim < (int64_t)x->ndim && x->dims[dim] != 3; dim++) {}
        if (dim == (int64_t)x->ndim) return bpcc_xerr(a, "no dimension of size 3 in the input");
    } else if (!bpcc_xarg_int(a, 2, "dim", -1, &dim) || !bpcc_xdim(a, &dim, x->ndim)) {
        return BPCC_ERR_GRAPH;
    }
    if (!x->ndim || x->dims[dim] != 3)
        return bpcc_xerr(a, "dimension %lld has size %lld, not 3", (long long)dim, (long long)(x->ndim ? x->dims[dim] : 0));
    struct xtensor *z = bpcc_xlike(x);
    if (!z) return bpcc_diag_nomem(a->d);
    uint64_t outer, inner;
    int64_t n;
    bpcc_xaround(x, dim, &outer, &n, &inner);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t i = 0; i < inner; i++) {
            const float *p = x->data + o * 3 * inner + i, *q = y->data + o * 3 * inner + i;
            float *r = z->data + o * 3 * inner + i;
            for (int c = 0; c < 3; c++) {
                int c1 = (c + 1) % 3, c2 = (c + 2) % 3;
                /* as ATen's kernel rounds it (its build contracts the first product into the subtraction) */
                r[c * inner] = fmaf(p[c1 * inner], q[c2 * inner], -(p[c2 * inner] * q[c1 * inner]));
            }
        }
    return bpcc_xput(a, z, out);
}
static enum bpcc_status k_cross(const struct xargs *a, struct xval *out) { return cross(a, false, out); }
static enum bpcc_status k_linalg_cross(const struct xargs *a, struct xval *out) { return cross(a, true, out); }

/* lerp(input, end, weight): weight a number or a tensor */
static enum bpcc_status k_lerp(const struct xargs *a, struct xval *out)
{
    struct operand in, end, w;
    if (!operand_of(a, 0, "input", &in) || !operand_of(a, 1, "end", &end) || !operand_of(a, 2, "weight", &w))
        return BPCC_ERR_GRAPH;
    return map3(a, T_LERP, 0, &in, &end, &w, out);
}

/* masked_fill(input, mask, value): value where mask, the input elsewhere, in the input's shape */
static enum bpcc_status k_masked_fill(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    struct operand c, v, in;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !operand_of(a, 1, "mask", &c) || !operand_of(a, 2, "value", &v) ||
        !operand_of(a, 0, "input", &in))
        return BPCC_ERR_GRAPH;
    if (v.ndim) return bpcc_xerr(a, "masked_fill's value must be a number or a 0-dimensional tensor");
    if (c.ndim > x->ndim) return bpcc_xerr(a, "the mask has more dimensions than the input");
    enum bpcc_status st = map3(a, T_WHERE, 0, &c, &v, &in, out);
    if (st == BPCC_OK && (out->u.t->ndim != x->ndim || memcmp(out->u.t->dims, x->dims, x->ndim * sizeof *x->dims))) {
        bpcc_xval_release(out);
        return bpcc_xerr(a, "the mask does not broadcast to the input's shape");
    }
    return st;
}

/* ~x (operator.invert) on a bool tensor, logical_not(x) on any */
static enum bpcc_status k_invert(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (!x->boolean) return bpcc_xerr(a, "~ is supported on bool tensors only (the interpreter has no integer tensors)");
    enum bpcc_status st = unary(a, U_NOT, 0, 0, out);
    if (st == BPCC_OK) out->u.t->boolean = true;
    return st;
}

static enum bpcc_status k_logical_not(const struct xargs *a, struct xval *out)
{
    enum bpcc_status st = unary(a, U_NOT, 0, 0, out);
    if (st == BPCC_OK) out->u.t->boolean = true;
    return st;
}

/* triu / tril (input, diagonal=0): each matrix of the last two dimensions with the elements below
** (triu) or above (tril) diagonal `diagonal` zeroed */
static enum bpcc_status triangle(const struct xargs *a, bool upper, struct xval *out)
{
    const struct xtensor *x;
    int64_t k;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "diagonal", 0, &k)) return BPCC_ERR_GRAPH;
    if (x->ndim < 2) return bpcc_xerr(a, "%s needs a tensor of 2 or more dimensions", upper ? "triu" : "tril");
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t R = x->dims[x->ndim - 2], C = x->dims[x->ndim - 1];
    for (uint64_t m = 0, mats = x->numel / bpcc_nz((uint64_t)(R * C)); m < mats; m++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) {
                uint64_t i = (m * (uint64_t)R + (uint64_t)r) * (uint64_t)C + (uint64_t)c;
                y->data[i] = (upper ? c - r >= k : c - r <= k) ? x->data[i] : 0.0f;
            }
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}

static enum bpcc_status k_triu(const struct xargs *a, struct xval *out) { return triangle(a, true, out); }
static enum bpcc_status k_tril(const struct xargs *a, struct xval *out) { return triangle(a, false, out); }

static enum bpcc_status k_maximum(const struct xargs *a, struct xval *out) { return binary(a, B_MAX, false, out); }
static enum bpcc_status k_minimum(const struct xargs *a, struct xval *out) { return binary(a, B_MIN, false, out); }
#define COMPARE(name, op)                                                                          \
    static enum bpcc_status name(const struct xargs *a, struct xval *out) { return binary(a, op, false, out); }
COMPARE(k_gt, B_GT)
COMPARE(k_lt, B_LT)
COMPARE(k_ge, B_GE)
COMPARE(k_le, B_LE)
COMPARE(k_eq, B_EQ)
COMPARE(k_ne, B_NE)
COMPARE(k_and, B_AND)
COMPARE(k_or, B_OR)
COMPARE(k_xor, B_XOR)
#undef COMPARE

/* a float32 or bool dtype argument at i (absent: keep); false with an error for other dtypes */
static bool float_or_bool(const struct xargs *a, uint32_t i, const char *name, bool *boolean)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    if (!v || v->k == XV_NONE) return true;
    enum bpcc_dtype t;
    if (!bpcc_xarg_dtype(a, i, name, &t)) return false;
    if (t != BPCC_DTYPE_F32 && t != BPCC_DTYPE_BOOL) {
        bpcc_xerr(a, "dtype %s is not supported by the interpreter (float32 and bool)", bpcc_dtype_name(t));
        return false;
    }
    *boolean = t == BPCC_DTYPE_BOOL;
    return true;
}

/* zeros_like / ones_like (input, dtype=None), full_like (input, fill_value, dtype=None), and the
** methods new_zeros / new_ones (input, *size), new_full (input, size, fill_value). (torch.zeros and
** its kin take no traced sizes in PyTorch 1.13: FX makes them constants.) */
static enum bpcc_status filled(const struct xargs *a, bool like_input, float value, bool full, struct xval *out)
{
    const struct xtensor *x = NULL;
    int64_t dims[BPCC_MAX_DIMS];
    uint32_t nd = 0;
    double fill = value;
    bool boolean = false;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (like_input) {
        nd = x->ndim;
        memcpy(dims, x->dims, nd * sizeof *dims);
        boolean = x->boolean;
        if (full && !bpcc_xarg_float(a, 1, "fill_value", 0, &fill)) return BPCC_ERR_GRAPH;
        if (!float_or_bool(a, full ? 2 : 1, "dtype", &boolean)) return BPCC_ERR_GRAPH;
    } else {
        if (full ? !bpcc_xarg_ints(a, 1, "size", 0, NULL, dims, &nd) || !bpcc_xarg_float(a, 2, "fill_value", 0, &fill)
                 : !bpcc_xarg_sizes(a, 1, "size", dims, &nd))
            return BPCC_ERR_GRAPH;
        boolean = x->boolean;
        if (!float_or_bool(a, UINT32_MAX, "dtype", &boolean)) return BPCC_ERR_GRAPH;
    }
    for (uint32_t i = 0; i < nd; i++)
        if (dims[i] < 0) return bpcc_xerr(a, "negative size %lld", (long long)dims[i]);
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    for (uint64_t i = 0; i < y->numel; i++) y->data[i] = boolean ? (float)(fill != 0) : (float)fill;
    return bpcc_xput(a, bpcc_xmark(y, boolean), out);
}

static enum bpcc_status k_zeros_like(const struct xargs *a, struct xval *out) { return filled(a, true, 0, false, out); }
static enum bpcc_status k_ones_like(const struct xargs *a, struct xval *out) { return filled(a, true, 1, false, out); }
static enum bpcc_status k_full_like(const struct xargs *a, struct xval *out) { return filled(a, true, 0, true, out); }
static enum bpcc_status k_new_zeros(const struct xargs *a, struct xval *out) { return filled(a, false, 0, false, out); }
static enum bpcc_status k_new_ones(const struct xargs *a, struct xval *out) { return filled(a, false, 1, false, out); }
static enum bpcc_status k_new_full(const struct xargs *a, struct xval *out) { return filled(a, false, 0, true, out); }

/* casts: float() / to(float32 | a float tensor | a device) keep the values; bool() and to(bool)
** mark nonzero; long() / int() truncate toward zero (held as floats, exact below 2^24); type_as
** takes other's kind. Other dtypes are refused: the interpreter computes in float32 */
enum cast { C_FLOAT, C_BOOL, C_INT, C_TO, C_TYPE_AS };

static enum bpcc_status cast(const struct xargs *a, enum cast how, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (how == C_TO) {
        /* to(dtype), to(device, dtype), to(other), to(dtype=...): the dtype wherever it is */
        const struct bpcc_value *iv = NULL;
        for (uint32_t i = 1; i < a->node->args.n && !iv; i++)
            if (a->node->args.u.seq.items[i].kind == BPCC_VAL_DTYPE) iv = &a->node->args.u.seq.items[i];
        const struct bpcc_value *kw = bpcc_node_kwargs(a->node);
        for (uint32_t k = 0; k < kw->n && !iv; k++)
            if (!strcmp(kw->u.seq.keys[k], "dtype")) iv = &kw->u.seq.items[k];
        const struct xval *o = bpcc_xarg(a, 1, "other");
        if (iv && iv->kind == BPCC_VAL_DTYPE) {
            if (iv->u.dtype == BPCC_DTYPE_I64 || iv->u.dtype == BPCC_DTYPE_I32) how = C_INT;
            else if (iv->u.dtype == BPCC_DTYPE_BOOL) how = C_BOOL;
            else if (iv->u.dtype != BPCC_DTYPE_F32)
                return bpcc_xerr(a, "to(%s) is not supported by the interpreter (float32, bool, int64, int32)",
                                 bpcc_dtype_name(iv->u.dtype));
        } else if (o && o->k == XV_TENSOR) {
            how = o->u.t->boolean ? C_BOOL : C_FLOAT;
        } else {
            how = x->boolean ? C_BOOL : C_FLOAT; /* a device: the values as they are */
        }
    } else if (how == C_TYPE_AS) {
        const struct xtensor *o;
        if (!bpcc_xarg_tensor(a, 1, "other", &o)) return BPCC_ERR_GRAPH;
        how = o->boolean ? C_BOOL : C_FLOAT;
    }
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    for (uint64_t i = 0; i < x->numel; i++)
        y->data[i] = how == C_BOOL ? (float)(x->data[i] != 0.0f) : how == C_INT ? truncf(x->data[i]) : x->data[i];
    return bpcc_xput(a, bpcc_xmark(y, how == C_BOOL), out);
}

static enum bpcc_status k_float(const struct xargs *a, struct xval *out) { return cast(a, C_FLOAT, out); }
static enum bpcc_status k_bool(const struct xargs *a, struct xval *out) { return cast(a, C_BOOL, out); }
static enum bpcc_status k_long(const struct xargs *a, struct xval *out) { return cast(a, C_INT, out); }
static enum bpcc_status k_to(const struct xargs *a, struct xval *out) { return cast(a, C_TO, out); }
static enum bpcc_status k_type_as(const struct xargs *a, struct xval *out) { return cast(a, C_TYPE_AS, out); }

/* }================================================ */

const struct xop bpcc_elementwise_ops[] = {
    {'m', "torch.nn.ReLU", k_relu}, {'m', "torch.nn.ReLU6", k_relu6}, {'m', "torch.nn.Hardtanh", k_hardtanh},
    {'m', "torch.nn.LeakyReLU", k_leaky_relu}, {'m', "torch.nn.ELU", k_elu}, {'m', "torch.nn.Hardswish", k_hardswish},
    {'m', "torch.nn.Hardsigmoid", k_hardsigmoid}, {'m', "torch.nn.Sigmoid", k_sigmoid}, {'m', "torch.nn.Tanh", k_tanh},
    {'m', "torch.nn.SiLU", k_silu}, {'m', "torch.nn.GELU", k_gelu}, {'m', "torch.nn.Dropout", k_dropout},
    {'m', "torch.nn.Dropout1d", k_dropout}, {'m', "torch.nn.Dropout2d", k_dropout},
    {'m', "torch.nn.Dropout3d", k_dropout}, {'m', "torch.nn.AlphaDropout", k_dropout},
    {'m', "torch.nn.Identity", k_identity}, {'f', "torch.nn.functional.relu", k_relu}, {'f', "torch.relu", k_relu},
    {'f', "torch.nn.functional.relu6", k_relu6}, {'f', "torch.nn.functional.hardtanh", k_hardtanh},
    {'f', "torch.nn.functional.leaky_relu", k_leaky_relu}, {'f', "torch.nn.functional.elu", k_elu},
    {'f', "torch.nn.functional.hardswish", k_hardswish}, {'f', "torch.nn.functional.hardsigmoid", k_hardsigmoid},
    {'f', "torch.sigmoid", k_sigmoid}, {'f', "torch.nn.functional.sigmoid", k_sigmoid}, {'f', "torch.tanh", k_tanh},
    {'f', "torch.nn.functional.tanh", k_tanh}, {'f', "torch.nn.functional.silu", k_silu},
    {'f', "torch.nn.functional.gelu", k_gelu}, {'f', "torch.nn.functional.dropout", k_dropout},
    {'f', "torch.clamp", k_clamp}, {'f', "torch.exp", k_exp}, {'f', "torch.sqrt", k_sqrt}, {'f', "operator.neg", k_neg},
    {'f', "torch.neg", k_neg}, {'t', "neg", k_neg}, {'f', "torch.rsqrt", k_rsqrt}, {'t', "rsqrt", k_rsqrt},
    {'f', "torch.reciprocal", k_reciprocal}, {'t', "reciprocal", k_reciprocal}, {'f', "operator.add", k_add},
    {'f', "torch.add", k_add}, {'f', "operator.sub", k_sub}, {'f', "torch.sub", k_sub}, {'f', "operator.mul", k_mul},
    {'f', "torch.mul", k_mul}, {'f', "operator.truediv", k_div}, {'f', "torch.div", k_div},
    {'f', "operator.floordiv", k_floordiv}, {'f', "torchvision.ops.stochastic_depth", k_stochastic_depth},
    {'m', "torchvision.ops.StochasticDepth", k_dropout}, {'t', "relu", k_relu}, {'t', "relu_", k_relu},
    {'t', "sigmoid", k_sigmoid}, {'t', "tanh", k_tanh}, {'t', "hardsigmoid", k_hardsigmoid}, {'t', "clamp", k_clamp},
    {'t', "add", k_add}, {'t', "add_", k_add}, {'t', "sub", k_sub}, {'t', "mul", k_mul}, {'t', "mul_", k_mul},
    {'t', "div", k_div}, {'t', "__rsub__", k_rsub}, {'t', "exp", k_exp}, {'t', "sqrt", k_sqrt},
    {'f', "torch.abs", k_abs}, {'f', "abs", k_abs}, {'t', "abs", k_abs}, {'f', "torch.log", k_log}, {'t', "log", k_log},
    {'m', "torch.nn.Softplus", k_softplus}, {'f', "torch.nn.functional.softplus", k_softplus},
    {'m', "torch.nn.Mish", k_mish}, {'f', "torch.nn.functional.mish", k_mish}, {'f', "operator.pow", k_pow},
    {'f', "torch.pow", k_pow}, {'t', "pow", k_pow}, {'f', "torch.special.expit", k_sigmoid}, {'f', "torch.erf", k_erf},
    {'t', "erf", k_erf}, {'f', "torch.special.erf", k_erf}, {'f', "torch.floor", k_floor}, {'t', "floor", k_floor},
    {'f', "math.floor", k_floor}, {'f', "torch.ceil", k_ceil}, {'t', "ceil", k_ceil}, {'f', "torch.round", k_round},
    {'t', "round", k_round}, {'f', "torch.trunc", k_trunc}, {'t', "trunc", k_trunc}, {'f', "torch.sign", k_sign},
    {'t', "sign", k_sign}, {'f', "torch.sin", k_sin}, {'t', "sin", k_sin}, {'f', "torch.cos", k_cos},
    {'t', "cos", k_cos}, {'f', "torch.log1p", k_log1p}, {'t', "log1p", k_log1p}, {'f', "torch.expm1", k_expm1},
    {'t', "expm1", k_expm1}, {'f', "torch.log2", k_log2}, {'t', "log2", k_log2}, {'f', "torch.log10", k_log10},
    {'t', "log10", k_log10}, {'f', "torch.exp2", k_exp2}, {'t', "exp2", k_exp2}, {'f', "torch.square", k_square},
    {'t', "square", k_square}, {'m', "torch.nn.SELU", k_selu}, {'f', "torch.nn.functional.selu", k_selu},
    {'f', "torch.selu", k_selu}, {'m', "torch.nn.CELU", k_celu}, {'f', "torch.nn.functional.celu", k_celu},
    {'f', "torch.celu", k_celu}, {'m', "torch.nn.Softsign", k_softsign},
    {'f', "torch.nn.functional.softsign", k_softsign}, {'m', "torch.nn.Hardshrink", k_hardshrink},
    {'f', "torch.nn.functional.hardshrink", k_hardshrink}, {'t', "hardshrink", k_hardshrink},
    {'m', "torch.nn.Softshrink", k_softshrink}, {'f', "torch.nn.functional.softshrink", k_softshrink},
    {'m', "torch.nn.Tanhshrink", k_tanhshrink}, {'f', "torch.nn.functional.tanhshrink", k_tanhshrink},
    {'m', "torch.nn.LogSigmoid", k_logsigmoid}, {'f', "torch.nn.functional.logsigmoid", k_logsigmoid},
    {'f', "torch.clamp_min", k_clamp_min}, {'t', "clamp_min", k_clamp_min}, {'f', "torch.clamp_max", k_clamp_max},
    {'t', "clamp_max", k_clamp_max}, {'f', "torch.clip", k_clamp}, {'t', "clip", k_clamp}, {'t', "clamp_", k_clamp},
    {'f', "torch.maximum", k_maximum}, {'t', "maximum", k_maximum}, {'f', "torch.minimum", k_minimum},
    {'t', "minimum", k_minimum}, {'f', "operator.gt", k_gt}, {'f', "torch.gt", k_gt}, {'t', "gt", k_gt},
    {'f', "operator.lt", k_lt}, {'f', "torch.lt", k_lt}, {'t', "lt", k_lt}, {'f', "operator.ge", k_ge},
    {'f', "torch.ge", k_ge}, {'t', "ge", k_ge}, {'f', "operator.le", k_le}, {'f', "torch.le", k_le}, {'t', "le", k_le},
    {'f', "operator.eq", k_eq}, {'f', "torch.eq", k_eq}, {'t', "eq", k_eq}, {'f', "operator.ne", k_ne},
    {'f', "torch.ne", k_ne}, {'t', "ne", k_ne}, {'f', "operator.and_", k_and}, {'f', "torch.logical_and", k_and},
    {'t', "logical_and", k_and}, {'f', "operator.or_", k_or}, {'f', "torch.logical_or", k_or},
    {'t', "logical_or", k_or}, {'f', "operator.xor", k_xor}, {'f', "torch.logical_xor", k_xor},
    {'t', "logical_xor", k_xor}, {'t', "__xor__", k_xor}, {'t', "__and__", k_and}, {'t', "__or__", k_or},
    {'t', "__invert__", k_invert}, {'t', "bitwise_not", k_invert}, {'f', "operator.invert", k_invert},
    {'f', "torch.logical_not", k_logical_not}, {'t', "logical_not", k_logical_not}, {'f', "torch.where", k_where},
    {'t', "where", k_where}, {'f', "torch.masked_fill", k_masked_fill}, {'t', "masked_fill", k_masked_fill},
    {'t', "masked_fill_", k_masked_fill}, {'f', "torch.zeros_like", k_zeros_like},
    {'f', "torch.ones_like", k_ones_like}, {'f', "torch.full_like", k_full_like}, {'t', "new_zeros", k_new_zeros},
    {'t', "new_ones", k_new_ones}, {'t', "new_full", k_new_full}, {'t', "float", k_float}, {'t', "bool", k_bool},
    {'t', "long", k_long}, {'t', "int", k_long}, {'t', "to", k_to}, {'t', "type_as", k_type_as},
    {'f', "torch.triu", k_triu}, {'t', "triu", k_triu}, {'f', "torch.tril", k_tril}, {'t', "tril", k_tril},
    {'f', "torch.tan", k_tan}, {'t', "tan", k_tan}, {'f', "torch.atan", k_atan}, {'t', "atan", k_atan},
    {'f', "torch.arctan", k_atan}, {'f', "torch.asin", k_asin}, {'t', "asin", k_asin}, {'f', "torch.arcsin", k_asin},
    {'f', "torch.acos", k_acos}, {'t', "acos", k_acos}, {'f', "torch.arccos", k_acos}, {'f', "torch.sinh", k_sinh},
    {'t', "sinh", k_sinh}, {'f', "torch.cosh", k_cosh}, {'t', "cosh", k_cosh}, {'f', "torch.asinh", k_asinh},
    {'t', "asinh", k_asinh}, {'f', "torch.arcsinh", k_asinh}, {'f', "torch.acosh", k_acosh}, {'t', "acosh", k_acosh},
    {'f', "torch.arccosh", k_acosh}, {'f', "torch.atanh", k_atanh}, {'t', "atanh", k_atanh},
    {'f', "torch.arctanh", k_atanh}, {'f', "torch.frac", k_frac}, {'t', "frac", k_frac}, {'f', "torch.sgn", k_sign},
    {'t', "sgn", k_sign}, {'f', "torch.isnan", k_isnan}, {'t', "isnan", k_isnan}, {'f', "torch.isinf", k_isinf},
    {'t', "isinf", k_isinf}, {'f', "torch.isfinite", k_isfinite}, {'t', "isfinite", k_isfinite},
    {'f', "torch.isposinf", k_isposinf}, {'t', "isposinf", k_isposinf}, {'f', "torch.isneginf", k_isneginf},
    {'t', "isneginf", k_isneginf}, {'f', "torch.nan_to_num", k_nan_to_num}, {'t', "nan_to_num", k_nan_to_num},
    {'f', "torch.atan2", k_atan2}, {'t', "atan2", k_atan2}, {'f', "torch.arctan2", k_atan2}, {'f', "torch.hypot", k_hypot},
    {'t', "hypot", k_hypot}, {'f', "torch.fmod", k_fmod}, {'t', "fmod", k_fmod}, {'f', "torch.remainder", k_remainder},
    {'t', "remainder", k_remainder}, {'f', "operator.mod", k_remainder}, {'f', "torch.floor_divide", k_floor_divide},
    {'t', "floor_divide", k_floor_divide}, {'f', "torch.logaddexp", k_logaddexp}, {'t', "logaddexp", k_logaddexp},
    {'f', "torch.xlogy", k_xlogy}, {'t', "xlogy", k_xlogy}, {'f', "torch.special.xlogy", k_xlogy},
    {'f', "torch.heaviside", k_heaviside}, {'t', "heaviside", k_heaviside}, {'f', "torch.addcmul", k_addcmul},
    {'t', "addcmul", k_addcmul}, {'f', "torch.addcdiv", k_addcdiv}, {'t', "addcdiv", k_addcdiv},
    {'f', "torch.lerp", k_lerp}, {'t', "lerp", k_lerp}, {'f', "torch.relu_", k_relu},
    {'f', "torch.nn.functional.relu_", k_relu}, {'t', "sub_", k_sub}, {'t', "div_", k_div}, {'t', "sigmoid_", k_sigmoid},
    {'f', "torch.sigmoid_", k_sigmoid}, {'t', "tanh_", k_tanh}, {'f', "torch.tanh_", k_tanh}, {'t', "exp_", k_exp},
    {'t', "abs_", k_abs}, {'t', "neg_", k_neg}, {'t', "sqrt_", k_sqrt}, {'t', "pow_", k_pow},
    {'t', "clamp_min_", k_clamp_min}, {'t', "clamp_max_", k_clamp_max}, {'t', "floor_", k_floor},
    {'t', "round_", k_round}, {'t', "reciprocal_", k_reciprocal}, {'t', "addcmul_", k_addcmul},
    {'t', "addcdiv_", k_addcdiv}, {'t', "lerp_", k_lerp}, {'t', "nan_to_num_", k_nan_to_num},
    {'f', "torch.erfc", k_erfc}, {'t', "erfc", k_erfc}, {'f', "torch.special.erfc", k_erfc}, {'f', "torch.erfinv", k_erfinv},
    {'t', "erfinv", k_erfinv}, {'f', "torch.special.erfinv", k_erfinv}, {'f', "torch.isclose", k_isclose},
    {'t', "isclose", k_isclose}, {'f', "torch.cross", k_cross}, {'t', "cross", k_cross}, {'f', "torch.linalg.cross", k_linalg_cross}, {'f', "torch.lgamma", k_lgamma},
    {'t', "lgamma", k_lgamma}, {'f', "torch.special.gammaln", k_lgamma}, {'f', "torch.sinc", k_sinc}, {'t', "sinc", k_sinc},
    {'f', "torch.special.sinc", k_sinc}, {'f', "torch.logit", k_logit}, {'t', "logit", k_logit},
    {'f', "torch.special.logit", k_logit}, {'f', "torch.signbit", k_signbit}, {'t', "signbit", k_signbit},
    {'f', "torch.nn.functional.threshold", k_threshold}, {'f', "torch.threshold", k_threshold},
    {'m', "torch.nn.Threshold", k_threshold}, {'f', "torch.nn.functional.alpha_dropout", k_alpha_dropout},
    {'f', "torch.nn.functional.feature_alpha_dropout", k_alpha_dropout}, {'t', "fill_", k_fill_},
    {'t', "zero_", k_zero_}, {'f', "torch.true_divide", k_div}, {'t', "true_divide", k_div}, {'f', "torch.divide", k_div},
    {'t', "divide", k_div}, {'f', "torch.rsub", k_rsub}, {'f', "torch.nn.functional.hardtanh_", k_hardtanh},
    {'f', "torch.special.expm1", k_expm1}, {'f', "torch.special.exp2", k_exp2}, {'f', "torch.special.log1p", k_log1p},
    {0}
};
