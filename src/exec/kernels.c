/*
** kernels.c — the interpreter's elementwise, shape and reduction kernels (float32, as PyTorch's
** eager CPU kernels compute them), and the table from ops to kernels.
*/
#include "exec.h"

#include <cblas.h>
#include <math.h>

static uint64_t nz(uint64_t v) { return v ? v : 1; }

/* {==================== helpers ==================== */

static enum bpcc_status put_tensor(const struct xargs *a, struct xtensor *t, struct xval *out)
{
    if (!t) return bpcc_diag_nomem(a->d);
    *out = (struct xval){.k = XV_TENSOR, .u.t = t};
    return BPCC_OK;
}

static struct xtensor *like(const struct xtensor *x) { return bpcc_xtensor_new(x->ndim, x->dims); }

/* y (may be NULL) marked as holding bools (0 or 1) or not */
static struct xtensor *marked(struct xtensor *y, bool boolean)
{
    if (y) y->boolean = boolean;
    return y;
}

static int64_t wrap_dim(int64_t d, uint32_t ndim) { return d < 0 ? d + (int64_t)ndim : d; }

static bool dim_ok(const struct xargs *a, int64_t *d, uint32_t ndim)
{
    int64_t w = wrap_dim(*d, ndim ? ndim : 1);
    if (w < 0 || w >= (int64_t)(ndim ? ndim : 1)) {
        bpcc_xerr(a, "dimension %lld is out of range for a %u-dimensional tensor", (long long)*d, ndim);
        return false;
    }
    *d = w;
    return true;
}

/* }================================================ */

/* {==================== unary ==================== */

enum unop { U_RELU, U_RELU6, U_HARDTANH, U_LEAKY, U_ELU, U_HARDSWISH, U_HARDSIGMOID, U_SIGMOID, U_TANH, U_SILU,
            U_GELU, U_GELU_TANH, U_IDENTITY, U_NEG, U_EXP, U_SQRT, U_RSQRT, U_RECIPROCAL, U_ABS, U_LOG, U_SOFTPLUS,
            U_MISH, U_ERF, U_FLOOR, U_CEIL, U_ROUND, U_TRUNC, U_SIGN, U_SIN, U_COS, U_LOG1P, U_EXPM1, U_SQUARE, U_SELU,
            U_CELU, U_SOFTSIGN, U_HARDSHRINK, U_SOFTSHRINK, U_TANHSHRINK, U_LOGSIGMOID, U_LOG2, U_LOG10, U_EXP2,
            U_NOT };

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
    case U_NOT: return x == 0.0f ? 1.0f : 0.0f;
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
    struct xtensor *y = like(x);
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
    return put_tensor(a, y, out);
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
static enum bpcc_status k_pow(const struct xargs *a, struct xval *out)
{
    const struct xval *b = bpcc_xarg(a, 0, "input"), *e = bpcc_xarg(a, 1, "exponent");
    if (!b || b->k != XV_TENSOR || !e || (e->k != XV_INT && e->k != XV_FLOAT))
        return bpcc_xerr(a, "pow is supported for a tensor to the power of a number");
    double p = e->k == XV_INT ? (double)e->u.i : e->u.f;
    const struct xtensor *x = b->u.t;
    struct xtensor *y = like(x);
    if (!y) return bpcc_diag_nomem(a->d);
    const float *v = x->data;
    float *q = y->data, fp = (float)p;
    for (uint64_t i = 0; i < x->numel; i++)
        q[i] = p == 2 ? v[i] * v[i] : p == 3 ? v[i] * v[i] * v[i] : p == 0.5 ? sqrtf(v[i]) : p == -0.5 ? 1.0f / sqrtf(v[i])
             : p == -1 ? 1.0f / v[i] : p == -2 ? 1.0f / (v[i] * v[i]) : p == 1 ? v[i] : p == 0 ? 1.0f : powf(v[i], fp);
    return put_tensor(a, y, out);
}

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

static enum bpcc_status k_clamp(const struct xargs *a, struct xval *out)
{
    double lo, hi;
    if (!bpcc_xarg_float(a, 1, "min", -INFINITY, &lo) || !bpcc_xarg_float(a, 2, "max", INFINITY, &hi))
        return BPCC_ERR_GRAPH;
    return unary(a, U_HARDTANH, (float)lo, (float)hi, out);
}

/* clamp_min(input, min) / clamp_max(input, max) */
static enum bpcc_status k_clamp_min(const struct xargs *a, struct xval *out)
{
    double lo;
    if (!bpcc_xarg_float(a, 1, "min", -INFINITY, &lo)) return BPCC_ERR_GRAPH;
    return unary(a, U_HARDTANH, (float)lo, INFINITY, out);
}

static enum bpcc_status k_clamp_max(const struct xargs *a, struct xval *out)
{
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
enum binop { B_ADD, B_SUB, B_MUL, B_DIV, B_MAX, B_MIN, B_GT, B_LT, B_GE, B_LE, B_EQ, B_NE, B_AND, B_OR, B_XOR };

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
                 : op == B_MAX ? (p != p || p > q ? p : q) : (p != p || p < q ? p : q);
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
        struct xtensor *y = like(t);
        if (!y) return bpcc_diag_nomem(a->d);
        for (uint64_t i = 0; i < t->numel; i++) {
            float p = ta ? t->data[i] : fa, q = tb ? t->data[i] : fb;
            if (al != 1.0f) q *= al;
            y->data[i] = bin(op, p, q);
        }
        return put_tensor(a, marked(y, bin_is_bool(op)), out);
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
    if (y->numel == 0) return put_tensor(a, marked(y, bin_is_bool(op)), out);
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
    return put_tensor(a, marked(y, bin_is_bool(op)), out);
}

static enum bpcc_status k_add(const struct xargs *a, struct xval *out) { return binary(a, B_ADD, false, out); }
static enum bpcc_status k_sub(const struct xargs *a, struct xval *out) { return binary(a, B_SUB, false, out); }
static enum bpcc_status k_mul(const struct xargs *a, struct xval *out) { return binary(a, B_MUL, false, out); }
static enum bpcc_status k_div(const struct xargs *a, struct xval *out) { return binary(a, B_DIV, false, out); }
static enum bpcc_status k_floordiv(const struct xargs *a, struct xval *out)
{
    const struct xval *x = bpcc_xarg(a, 0, NULL), *y = bpcc_xarg(a, 1, NULL);
    if (x && y && x->k == XV_INT && y->k == XV_INT && y->u.i) {
        int64_t q = x->u.i / y->u.i;
        if ((x->u.i % y->u.i) && ((x->u.i < 0) != (y->u.i < 0))) q--;
        *out = (struct xval){.k = XV_INT, .u.i = q};
        return BPCC_OK;
    }
    return bpcc_xerr(a, "floordiv is supported on ints only");
}

/* }================================================ */

/* {==================== shapes ==================== */

static enum bpcc_status reshaped(const struct xargs *a, const struct xtensor *x, uint32_t nd, const int64_t *want,
                                 struct xval *out)
{
    int64_t dims[BPCC_MAX_DIMS];
    int infer = -1;
    uint64_t known = 1;
    for (uint32_t i = 0; i < nd; i++) {
        dims[i] = want[i];
        if (want[i] == -1) {
            if (infer >= 0) return bpcc_xerr(a, "only one dimension can be inferred");
            infer = (int)i;
        } else if (want[i] < 0) {
            return bpcc_xerr(a, "invalid shape dimension %lld", (long long)want[i]);
        } else {
            known *= (uint64_t)want[i];
        }
    }
    if (infer >= 0) {
        if (!known || x->numel % known) return bpcc_xerr(a, "shape is invalid for input of size %llu", (unsigned long long)x->numel);
        dims[infer] = (int64_t)(x->numel / known);
        known *= (uint64_t)dims[infer];
    }
    if (known != x->numel) return bpcc_xerr(a, "shape is invalid for input of size %llu", (unsigned long long)x->numel);
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    memcpy(y->data, x->data, x->numel * sizeof(float));
    return put_tensor(a, marked(y, x->boolean), out);
}

/* view / reshape: the shape as varargs or one list */
static enum bpcc_status k_view(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    int64_t want[BPCC_MAX_DIMS];
    uint32_t nd = 0;
    const struct xval *s1 = bpcc_xarg(a, 1, "shape");
    if (s1 && s1->k == XV_SEQ) {
        if (!bpcc_xarg_ints(a, 1, "shape", 0, NULL, want, &nd)) return BPCC_ERR_GRAPH;
    } else {
        if (a->n - 1 > BPCC_MAX_DIMS) return bpcc_xerr(a, "too many dimensions");
        for (uint32_t i = 1; i < a->n; i++)
            if (!bpcc_xarg_int(a, i, NULL, 0, &want[nd++])) return BPCC_ERR_GRAPH;
    }
    return reshaped(a, x, nd, want, out);
}

static enum bpcc_status k_flatten(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    int64_t s, e;
    if (a->module) {
        const struct bpcc_value *v1 = bpcc_module_attr(a->module, "start_dim"), *v2 = bpcc_module_attr(a->module, "end_dim");
        s = v1 && v1->kind == BPCC_VAL_INT ? v1->u.i : 1;
        e = v2 && v2->kind == BPCC_VAL_INT ? v2->u.i : -1;
    } else if (!bpcc_xarg_int(a, 1, "start_dim", 0, &s) || !bpcc_xarg_int(a, 2, "end_dim", -1, &e)) {
        return BPCC_ERR_GRAPH;
    }
    if (x->ndim == 0) return reshaped(a, x, 1, (int64_t[]){1}, out);
    if (!dim_ok(a, &s, x->ndim) || !dim_ok(a, &e, x->ndim)) return BPCC_ERR_GRAPH;
    if (s > e) return bpcc_xerr(a, "flatten: start_dim after end_dim");
    int64_t want[BPCC_MAX_DIMS];
    uint32_t nd = 0;
    for (int64_t i = 0; i < s; i++) want[nd++] = x->dims[i];
    int64_t m = 1;
    for (int64_t i = s; i <= e; i++) m *= x->dims[i];
    want[nd++] = m;
    for (int64_t i = e + 1; i < (int64_t)x->ndim; i++) want[nd++] = x->dims[i];
    return reshaped(a, x, nd, want, out);
}

static enum bpcc_status permuted(const struct xargs *a, const struct xtensor *x, const int64_t *perm, struct xval *out)
{
    /* perm is a permutation of [0, ndim) (the callers check it); gcc -O3 cannot see that */
    int64_t dims[BPCC_MAX_DIMS], src_stride[BPCC_MAX_DIMS] = {0}, st = 1;
    for (int i = (int)x->ndim - 1; i >= 0; i--) {
        src_stride[i] = st;
        st *= x->dims[i];
    }
    int64_t ps[BPCC_MAX_DIMS];
    for (uint32_t i = 0; i < x->ndim; i++) {
        dims[i] = x->dims[perm[i]];
        ps[i] = src_stride[perm[i]];
    }
    struct xtensor *y = bpcc_xtensor_new(x->ndim, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t idx[BPCC_MAX_DIMS] = {0}, off = 0;
    for (uint64_t i = 0; i < y->numel; i++) {
        y->data[i] = x->data[off];
        for (int k = (int)x->ndim - 1; k >= 0; k--) {
            idx[k]++;
            off += ps[k];
            if (idx[k] < dims[k]) break;
            off -= ps[k] * dims[k];
            idx[k] = 0;
        }
    }
    return put_tensor(a, marked(y, x->boolean), out);
}

static enum bpcc_status k_permute(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    int64_t perm[BPCC_MAX_DIMS];
    uint32_t n = 0;
    const struct xval *d1 = bpcc_xarg(a, 1, "dims");
    if (d1 && d1->k == XV_SEQ) {
        if (!bpcc_xarg_ints(a, 1, "dims", 0, NULL, perm, &n)) return BPCC_ERR_GRAPH;
    } else {
        for (uint32_t i = 1; i < a->n && n < BPCC_MAX_DIMS; i++)
            if (!bpcc_xarg_int(a, i, NULL, 0, &perm[n++])) return BPCC_ERR_GRAPH;
    }
    if (n != x->ndim) return bpcc_xerr(a, "permute needs %u dimensions, got %u", x->ndim, n);
    bool seen[BPCC_MAX_DIMS] = {0};
    for (uint32_t i = 0; i < n; i++) {
        if (!dim_ok(a, &perm[i], x->ndim)) return BPCC_ERR_GRAPH;
        if (seen[perm[i]]) return bpcc_xerr(a, "permute repeats dimension %lld", (long long)perm[i]);
        seen[perm[i]] = true;
    }
    return permuted(a, x, perm, out);
}

static enum bpcc_status k_transpose(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t d0, d1;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim0", 0, &d0) ||
        !bpcc_xarg_int(a, 2, "dim1", 1, &d1) || !dim_ok(a, &d0, x->ndim) || !dim_ok(a, &d1, x->ndim))
        return BPCC_ERR_GRAPH;
    int64_t perm[BPCC_MAX_DIMS];
    for (uint32_t i = 0; i < x->ndim; i++) perm[i] = i;
    perm[d0] = d1;
    perm[d1] = d0;
    return permuted(a, x, perm, out);
}

static enum bpcc_status k_unsqueeze(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t d;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &d)) return BPCC_ERR_GRAPH;
    if (x->ndim >= BPCC_MAX_DIMS) return bpcc_xerr(a, "too many dimensions");
    if (!dim_ok(a, &d, x->ndim + 1)) return BPCC_ERR_GRAPH;
    int64_t want[BPCC_MAX_DIMS];
    uint32_t nd = 0;
    for (uint32_t i = 0; i <= x->ndim; i++) {
        if ((int64_t)i == d) want[nd++] = 1;
        if (i < x->ndim) want[nd++] = x->dims[i];
    }
    return reshaped(a, x, nd, want, out);
}

static enum bpcc_status k_squeeze(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    const struct xval *dv = bpcc_xarg(a, 1, "dim");
    int64_t d = -100;
    if (dv && dv->k != XV_NONE) {
        if (!bpcc_xarg_int(a, 1, "dim", 0, &d) || !dim_ok(a, &d, x->ndim)) return BPCC_ERR_GRAPH;
    }
    int64_t want[BPCC_MAX_DIMS];
    uint32_t nd = 0;
    for (uint32_t i = 0; i < x->ndim; i++)
        if (!(x->dims[i] == 1 && (d == -100 || (int64_t)i == d))) want[nd++] = x->dims[i];
    return reshaped(a, x, nd, want, out);
}

static enum bpcc_status k_contiguous(const struct xargs *a, struct xval *out)
{
    const struct xval *x = bpcc_xarg(a, 0, "input");
    if (!x) return bpcc_xerr(a, "needs an input");
    return bpcc_xval_copy(x, out) ? bpcc_diag_nomem(a->d) : BPCC_OK;
}

static enum bpcc_status k_size(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    const struct xval *dv = bpcc_xarg(a, 1, "dim");
    if (dv && dv->k != XV_NONE) {
        int64_t d;
        if (!bpcc_xarg_int(a, 1, "dim", 0, &d) || !dim_ok(a, &d, x->ndim)) return BPCC_ERR_GRAPH;
        *out = (struct xval){.k = XV_INT, .u.i = x->dims[d]};
        return BPCC_OK;
    }
    struct xval *items = bpcc_malloc((x->ndim ? x->ndim : 1) * sizeof *items);
    if (!items) return bpcc_diag_nomem(a->d);
    for (uint32_t i = 0; i < x->ndim; i++) items[i] = (struct xval){.k = XV_INT, .u.i = x->dims[i]};
    *out = (struct xval){.k = XV_SEQ, .u.seq = {x->ndim, items}};
    return BPCC_OK;
}

static enum bpcc_status k_getattr(const struct xargs *a, struct xval *out)
{
    const struct xval *obj = bpcc_xarg(a, 0, NULL), *name = bpcc_xarg(a, 1, NULL);
    if (!obj || !name || name->k != XV_STR) return bpcc_xerr(a, "getattr needs an object and a name");
    if (obj->k == XV_TENSOR && !strcmp(name->u.s, "shape")) {
        struct xargs sub = *a;
        sub.n = 1;
        sub.n_kw = 0;
        return k_size(&sub, out);
    }
    if (obj->k == XV_SEQ && obj->u.seq.n == 2 && (!strcmp(name->u.s, "values") || !strcmp(name->u.s, "indices")))
        /* max / min along a dimension: torch.return_types (values, indices) */
        return bpcc_xval_copy(&obj->u.seq.items[name->u.s[0] == 'i'], out) ? bpcc_diag_nomem(a->d) : BPCC_OK;
    if (obj->k == XV_TENSOR && !strcmp(name->u.s, "ndim")) {
        *out = (struct xval){.k = XV_INT, .u.i = obj->u.t->ndim};
        return BPCC_OK;
    }
    return bpcc_xerr(a, "getattr %s is not supported", name->u.s);
}

/* the elements a slice (start, stop, step; Python's rules, positive steps) takes of `size`: the
** first, the step and the count; false for a step below 1 */
static bool slice_range(const struct xval *slice, int64_t size, int64_t *first, int64_t *step, int64_t *count)
{
    const struct xval *s = slice->u.seq.items;
    int64_t st = s[2].k == XV_INT ? s[2].u.i : 1;
    if (st <= 0) return false;
    int64_t b = s[0].k == XV_INT ? s[0].u.i : 0, e = s[1].k == XV_INT ? s[1].u.i : size;
    if (b < 0) b += size;
    if (e < 0) e += size;
    b = b < 0 ? 0 : b > size ? size : b;
    e = e < 0 ? 0 : e > size ? size : e;
    *first = b, *step = st, *count = e > b ? (e - b + st - 1) / st : 0;
    return true;
}

/* a sequence (a shape, a module's tuple output) by an int or a slice */
static enum bpcc_status seq_getitem(const struct xargs *a, const struct xval *obj, const struct xval *ix, struct xval *out)
{
    int64_t n = obj->u.seq.n;
    if (ix->k == XV_INT) {
        int64_t i = ix->u.i < 0 ? ix->u.i + n : ix->u.i;
        if (i < 0 || i >= n) return bpcc_xerr(a, "index %lld out of range", (long long)ix->u.i);
        return bpcc_xval_copy(&obj->u.seq.items[i], out) ? bpcc_diag_nomem(a->d) : BPCC_OK;
    }
    int64_t first, step, count;
    if (ix->k != XV_SLICE) return bpcc_xerr(a, "a sequence takes an int or a slice index");
    if (!slice_range(ix, n, &first, &step, &count)) return bpcc_xerr(a, "slice step must be positive");
    struct xval *items = bpcc_malloc((size_t)(count ? count : 1) * sizeof *items);
    if (!items) return bpcc_diag_nomem(a->d);
    *out = (struct xval){.k = XV_SEQ, .u.seq = {0, items}};
    for (int64_t i = 0; i < count; i++, out->u.seq.n++)
        if (bpcc_xval_copy(&obj->u.seq.items[first + i * step], &items[i])) {
            bpcc_xval_release(out);
            return bpcc_diag_nomem(a->d);
        }
    return BPCC_OK;
}

/* the positions an index list (a list of ints, or a 1-d tensor of integral values) picks along a
** dimension of `size`, negative ones from the end: *out (bpcc_malloc'd) and *n; false with an error */
static bool index_list(const struct xargs *a, const struct xval *v, int64_t size, int64_t **out, int64_t *n)
{
    if (v->k == XV_TENSOR && (v->u.t->boolean || v->u.t->ndim != 1))
        return bpcc_xerr(a, v->u.t->boolean ? "indexing by a bool mask is not supported (its shape depends on the data)"
                                            : "an index tensor must have 1 dimension"),
               false;
    *n = v->k == XV_TENSOR ? (int64_t)v->u.t->numel : (int64_t)v->u.seq.n;
    *out = bpcc_malloc((size_t)(*n ? *n : 1) * sizeof **out);
    if (!*out) return bpcc_diag_nomem(a->d), false;
    for (int64_t k = 0; k < *n; k++) {
        double f = v->k == XV_TENSOR ? v->u.t->data[k] : v->u.seq.items[k].k == XV_INT ? (double)v->u.seq.items[k].u.i : NAN;
        if (f != floor(f) || f < -(double)size || f >= (double)size) {
            bpcc_xfree(*out);
            *out = NULL;
            return f != floor(f) ? bpcc_xerr(a, "an index list holds integers") : bpcc_xerr(a, "index %g is out of bounds for size %lld", f, (long long)size), false;
        }
        (*out)[k] = f < 0 ? (int64_t)f + size : (int64_t)f;
    }
    return true;
}

/* x[index]: sequences by int or slice, dicts by key; tensors by ints, slices, None, Ellipsis and
** one index list (x[:, [0, 2]], x[idx] for a 1-d tensor idx): the list's dimension keeps its place,
** which is PyTorch's rule when no int index is there too (refused: PyTorch may move the dimension) */
static enum bpcc_status k_getitem(const struct xargs *a, struct xval *out)
{
    const struct xval *obj = bpcc_xarg(a, 0, NULL), *ix = bpcc_xarg(a, 1, NULL);
    if (!obj || !ix) return bpcc_xerr(a, "getitem needs an object and an index");
    if (obj->k == XV_SEQ) return seq_getitem(a, obj, ix, out);
    if (obj->k == XV_DICT) {
        for (uint32_t i = 0; ix->k == XV_STR && i < obj->u.seq.n; i += 2)
            if (!strcmp(obj->u.seq.items[i].u.s, ix->u.s))
                return bpcc_xval_copy(&obj->u.seq.items[i + 1], out) ? bpcc_diag_nomem(a->d) : BPCC_OK;
        return ix->k == XV_STR ? bpcc_xerr(a, "no key '%s' in the dict", ix->u.s) : bpcc_xerr(a, "a dict takes a string key");
    }
    if (obj->k != XV_TENSOR) return bpcc_xerr(a, "getitem on this value is not supported");
    const struct xtensor *x = obj->u.t;
    const struct xval *idx = ix;
    uint32_t n_idx = 1;
    /* a tuple holds one index per dimension; a list is itself an index list (x[[0, 2]]) */
    bool list = a->node->args.n > 1 && a->node->args.u.seq.items[1].kind == BPCC_VAL_LIST;
    if (ix->k == XV_SEQ && !list) {
        idx = ix->u.seq.items;
        n_idx = ix->u.seq.n;
    }
    /* per source dim: start, step, count, or the positions an index list picks */
    int64_t start[BPCC_MAX_DIMS], step[BPCC_MAX_DIMS], count[BPCC_MAX_DIMS], *pick = NULL;
    int64_t out_dims[BPCC_MAX_DIMS];
    uint32_t n_out = 0, d = 0, n_real = 0, pick_dim = 0;
    bool any_int = false;
    for (uint32_t k = 0; k < n_idx; k++)
        if (idx[k].k != XV_NONE && idx[k].k != XV_ELLIPSIS) n_real++;
    if (n_real > x->ndim) return bpcc_xerr(a, "too many indices for a %u-dimensional tensor", x->ndim);
    for (uint32_t k = 0; k < n_idx; k++) {
        const struct xval *v = &idx[k];
        if (v->k == XV_NONE || v->k == XV_ELLIPSIS) {
            uint32_t fill = v->k == XV_NONE ? 1 : x->ndim - n_real;
            if (n_out + fill > BPCC_MAX_DIMS) {
                bpcc_xfree(pick);
                return bpcc_xerr(a, "too many dimensions");
            }
            for (uint32_t f = 0; f < fill; f++) {
                if (v->k == XV_NONE) {
                    out_dims[n_out++] = 1;
                    continue;
                }
                start[d] = 0, step[d] = 1, count[d] = x->dims[d];
                out_dims[n_out++] = x->dims[d++];
            }
            if (v->k == XV_ELLIPSIS) n_real = x->ndim; /* only one ellipsis counts */
            continue;
        }
        if (d >= x->ndim) { /* n_real bounds d; kept for safety */
            bpcc_xfree(pick);
            return bpcc_xerr(a, "too many indices");
        }
        int64_t size = x->dims[d];
        if (v->k == XV_INT) {
            int64_t i = v->u.i < 0 ? v->u.i + size : v->u.i;
            if (i < 0 || i >= size) {
                bpcc_xfree(pick);
                return bpcc_xerr(a, "index %lld is out of bounds for size %lld", (long long)v->u.i, (long long)size);
            }
            start[d] = i, step[d] = 1, count[d] = 1;
            any_int = true;
        } else if (v->k == XV_SLICE) {
            if (!slice_range(v, size, &start[d], &step[d], &count[d])) {
                bpcc_xfree(pick);
                return bpcc_xerr(a, "slice step must be positive");
            }
            out_dims[n_out++] = count[d];
        } else if ((v->k == XV_SEQ || v->k == XV_TENSOR) && !pick) {
            if (!index_list(a, v, size, &pick, &count[d])) return BPCC_ERR_GRAPH;
            pick_dim = d;
            start[d] = count[d] ? pick[0] : 0, step[d] = 1;
            out_dims[n_out++] = count[d];
        } else {
            bpcc_xfree(pick);
            return bpcc_xerr(a, v->k == XV_SEQ || v->k == XV_TENSOR ? "more than one index list is not supported"
                                                                    : "only ints, slices, None, ... and an index list index tensors here");
        }
        d++;
    }
    if (pick && any_int) {
        bpcc_xfree(pick);
        return bpcc_xerr(a, "an index list together with int indices is not supported");
    }
    for (; d < x->ndim; d++) {
        start[d] = 0, step[d] = 1, count[d] = x->dims[d];
        if (n_out >= BPCC_MAX_DIMS) {
            bpcc_xfree(pick);
            return bpcc_xerr(a, "too many dimensions");
        }
        out_dims[n_out++] = x->dims[d];
    }
    struct xtensor *y = bpcc_xtensor_new(n_out, out_dims);
    if (!y) {
        bpcc_xfree(pick);
        return bpcc_diag_nomem(a->d);
    }
    int64_t stride[BPCC_MAX_DIMS], st = 1;
    for (int i = (int)x->ndim - 1; i >= 0; i--) {
        stride[i] = st;
        st *= x->dims[i];
    }
    int64_t cnt[BPCC_MAX_DIMS] = {0}, off = 0;
    for (uint32_t i = 0; i < x->ndim; i++) off += start[i] * stride[i];
    for (uint64_t i = 0; i < y->numel; i++) {
        y->data[i] = x->data[off];
        for (int k = (int)x->ndim - 1; k >= 0; k--) {
            bool picked = pick && (uint32_t)k == pick_dim;
            if (cnt[k] + 1 < count[k]) {
                off += (picked ? pick[cnt[k] + 1] - pick[cnt[k]] : step[k]) * stride[k];
                cnt[k]++;
                break;
            }
            off -= (picked ? pick[cnt[k]] - pick[0] : step[k] * cnt[k]) * stride[k];
            cnt[k] = 0;
        }
    }
    bpcc_xfree(pick);
    return put_tensor(a, marked(y, x->boolean), out);
}

static enum bpcc_status k_cat(const struct xargs *a, struct xval *out, bool stack)
{
    const struct xval *l = bpcc_xarg(a, 0, "tensors");
    int64_t dim;
    if (!l || l->k != XV_SEQ || !l->u.seq.n) return bpcc_xerr(a, "needs a non-empty list of tensors");
    if (!bpcc_xarg_int(a, 1, "dim", 0, &dim)) return BPCC_ERR_GRAPH;
    for (uint32_t i = 0; i < l->u.seq.n; i++)
        if (l->u.seq.items[i].k != XV_TENSOR) return bpcc_xerr(a, "element %u is not a tensor", i);
    const struct xtensor *t0 = l->u.seq.items[0].u.t;
    uint32_t nd = stack ? t0->ndim + 1 : t0->ndim;
    if (nd > BPCC_MAX_DIMS || nd == 0) return bpcc_xerr(a, "bad rank");
    if (!dim_ok(a, &dim, nd)) return BPCC_ERR_GRAPH;
    int64_t dims[BPCC_MAX_DIMS];
    for (uint32_t i = 0, j = 0; i < nd; i++) dims[i] = stack && (int64_t)i == dim ? 1 : t0->dims[j++];
    int64_t total = 0;
    for (uint32_t k = 0; k < l->u.seq.n; k++) {
        const struct xtensor *t = l->u.seq.items[k].u.t;
        if (t->ndim != t0->ndim) return bpcc_xerr(a, "tensors of different rank");
        for (uint32_t i = 0, j = 0; i < nd; i++) {
            if (stack && (int64_t)i == dim) continue;
            if ((int64_t)i != dim && t->dims[j] != dims[i]) return bpcc_xerr(a, "sizes differ in dimension %u", i);
            j++;
        }
        total += stack ? 1 : t->dims[dim];
    }
    dims[dim] = total;
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < dim; i++) outer *= dims[i];
    for (uint32_t i = (uint32_t)dim + 1; i < nd; i++) inner *= dims[i];
    int64_t pos = 0;
    y->boolean = true; /* bools when every piece is (PyTorch promotes a mix) */
    for (uint32_t k = 0; k < l->u.seq.n; k++) {
        const struct xtensor *t = l->u.seq.items[k].u.t;
        int64_t dk = stack ? 1 : t->dims[dim];
        y->boolean &= t->boolean;
        for (int64_t o = 0; o < outer; o++)
            memcpy(y->data + (o * total + pos) * inner, t->data + o * dk * inner, (size_t)(dk * inner) * sizeof(float));
        pos += dk;
    }
    return put_tensor(a, y, out);
}

/* x's elements [start, start + len) along dimension dim, as a new tensor */
static struct xtensor *narrow(const struct xtensor *x, uint32_t dim, int64_t start, int64_t len)
{
    int64_t dims[BPCC_MAX_DIMS];
    memcpy(dims, x->dims, x->ndim * sizeof *dims);
    dims[dim] = len;
    struct xtensor *y = bpcc_xtensor_new(x->ndim, dims);
    if (!y) return NULL;
    uint64_t inner = 1, outer = 1;
    for (uint32_t i = dim + 1; i < x->ndim; i++) inner *= (uint64_t)x->dims[i];
    for (uint32_t i = 0; i < dim; i++) outer *= (uint64_t)x->dims[i];
    for (uint64_t o = 0; o < outer; o++)
        memcpy(y->data + o * (uint64_t)len * inner, x->data + (o * (uint64_t)x->dims[dim] + (uint64_t)start) * inner,
               (uint64_t)len * inner * sizeof(float));
    y->boolean = x->boolean;
    return y;
}

/* chunk(input, chunks, dim=0), split(tensor, split_size_or_sections, dim=0) and unbind(input,
** dim=0): a tuple of pieces along dim. chunk: pieces of ceil(size / chunks), the last shorter,
** possibly fewer than asked; split: pieces of the given size (the last shorter) or of the listed
** sizes, which must sum to size; unbind: every index, dim removed */
enum piecing { P_CHUNK, P_SPLIT, P_UNBIND };

static enum bpcc_status pieces(const struct xargs *a, enum piecing how, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim;
    if (!bpcc_xarg_tensor(a, 0, how == P_SPLIT ? "tensor" : "input", &x) ||
        !bpcc_xarg_int(a, how == P_UNBIND ? 1 : 2, "dim", 0, &dim) || !dim_ok(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    if (how == P_UNBIND && !x->ndim) return bpcc_xerr(a, "unbind of a 0-d tensor");
    int64_t size = x->ndim ? x->dims[dim] : 1;
    const struct xval *v = NULL, *sections = NULL;
    int64_t piece = 1, n;
    if (how != P_UNBIND) {
        v = bpcc_xarg(a, 1, how == P_CHUNK ? "chunks" : "split_size_or_sections");
        if (!v) v = bpcc_xarg(a, 1, "split_size");
    }
    if (v && v->k == XV_SEQ && how == P_SPLIT) {
        int64_t sum = 0;
        for (uint32_t i = 0; i < v->u.seq.n; i++) {
            if (v->u.seq.items[i].k != XV_INT || v->u.seq.items[i].u.i < 0) return bpcc_xerr(a, "split sections must be sizes");
            sum += v->u.seq.items[i].u.i;
        }
        if (sum != size) return bpcc_xerr(a, "split sections sum to %lld, not to the size %lld", (long long)sum, (long long)size);
        sections = v;
        n = v->u.seq.n;
    } else if (how == P_UNBIND) {
        n = size;
    } else {
        if (!v || v->k != XV_INT || v->u.i < (how == P_CHUNK ? 1 : 0) || (how == P_SPLIT && !v->u.i && size))
            return bpcc_xerr(a, how == P_CHUNK ? "chunks must be a positive int" : "split_size must be a positive int");
        piece = how == P_CHUNK ? (size + v->u.i - 1) / v->u.i : v->u.i;
        n = piece ? (size + piece - 1) / piece : 1; /* an empty dimension gives one empty piece */
        if (!n) n = 1;
    }
    if (n > UINT32_MAX / 2) return bpcc_xerr(a, "%lld pieces are too many", (long long)n);
    struct xval *items = bpcc_malloc((n ? (size_t)n : 1) * sizeof *items);
    if (!items) return bpcc_diag_nomem(a->d);
    *out = (struct xval){.k = XV_SEQ, .u.seq = {0, items}};
    for (int64_t at = 0; out->u.seq.n < n;) {
        int64_t len = sections ? sections->u.seq.items[out->u.seq.n].u.i : size - at < piece ? size - at : piece;
        struct xtensor *t = narrow(x, (uint32_t)dim, at, len);
        if (!t) {
            bpcc_xval_release(out);
            return bpcc_diag_nomem(a->d);
        }
        if (how == P_UNBIND) { /* the same elements without the dimension */
            memmove(t->dims + dim, t->dims + dim + 1, (t->ndim - (uint32_t)dim - 1) * sizeof *t->dims);
            t->ndim--;
        }
        items[out->u.seq.n++] = (struct xval){.k = XV_TENSOR, .u.t = t};
        at += len;
    }
    return BPCC_OK;
}

static enum bpcc_status k_chunk(const struct xargs *a, struct xval *out) { return pieces(a, P_CHUNK, out); }
static enum bpcc_status k_split(const struct xargs *a, struct xval *out) { return pieces(a, P_SPLIT, out); }
static enum bpcc_status k_unbind(const struct xargs *a, struct xval *out) { return pieces(a, P_UNBIND, out); }

/* pixel_shuffle(input, upscale_factor): [*, C r^2, H, W] -> [*, C, H r, W r];
** pixel_unshuffle(input, downscale_factor) the inverse */
static enum bpcc_status shuffle(const struct xargs *a, bool up, struct xval *out)
{
    const struct xtensor *x;
    int64_t r;
    const char *key = up ? "upscale_factor" : "downscale_factor";
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (a->module) {
        const struct bpcc_value *v = bpcc_module_attr(a->module, key);
        if (!v || v->kind != BPCC_VAL_INT) return bpcc_xerr(a, "the module needs its %s", key);
        r = v->u.i;
    } else if (!bpcc_xarg_int(a, 1, key, 0, &r)) {
        return BPCC_ERR_GRAPH;
    }
    if (r < 1 || r > 1 << 15) return bpcc_xerr(a, "%s must be positive and not huge", key);
    if (x->ndim < 3) return bpcc_xerr(a, "pixel (un)shuffle needs at least 3 dimensions");
    uint32_t nd = x->ndim;
    int64_t C = x->dims[nd - 3], H = x->dims[nd - 2], W = x->dims[nd - 1];
    if (up ? C % (r * r) : H % r || W % r)
        return bpcc_xerr(a, up ? "the channels are not divisible by the square of upscale_factor"
                               : "the height and width are not divisible by downscale_factor");
    int64_t dims[BPCC_MAX_DIMS];
    memcpy(dims, x->dims, nd * sizeof *dims);
    int64_t oc = up ? C / (r * r) : C * r * r; /* the shuffled side: [oc, r, r, h, w] against [oc, h, r, w, r] */
    int64_t h = up ? H : H / r, w = up ? W : W / r;
    dims[nd - 3] = oc;
    dims[nd - 2] = up ? H * r : H / r;
    dims[nd - 1] = up ? W * r : W / r;
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t planes = x->numel / nz((uint64_t)(C * H * W));
    int64_t c0 = up ? oc : C; /* channels of the spread-out image */
    for (uint64_t p = 0; p < planes; p++)
        for (int64_t c = 0; c < c0; c++)
            for (int64_t i = 0; i < r; i++)
                for (int64_t j = 0; j < r; j++)
                    for (int64_t yy = 0; yy < h; yy++)
                        for (int64_t xx = 0; xx < w; xx++) {
                            /* packed: channel (c r + i) r + j at (yy, xx); spread: channel c at (yy r + i, xx r + j) */
                            uint64_t packed = (((p * (uint64_t)c0 + (uint64_t)c) * (uint64_t)(r * r) + (uint64_t)(i * r + j)) * (uint64_t)h +
                                               (uint64_t)yy) * (uint64_t)w + (uint64_t)xx;
                            uint64_t spread = ((p * (uint64_t)c0 + (uint64_t)c) * (uint64_t)(h * r) + (uint64_t)(yy * r + i)) *
                                                  (uint64_t)(w * r) + (uint64_t)(xx * r + j);
                            if (up) y->data[spread] = x->data[packed];
                            else y->data[packed] = x->data[spread];
                        }
    return put_tensor(a, y, out);
}

/* pad(input, pad, mode="constant", value=None): pad lists (before, after) pairs from the last
** dimension back. constant pads any dimensions, negative amounts crop; reflect, replicate and
** circular pad the last 1 to 3 dimensions of a 2-d to 5-d input by amounts PyTorch allows (reflect:
** below the size, circular: up to it). The padding modules give their padding and value. */
static enum bpcc_status pad_with(const struct xargs *a, const int64_t *pad, uint32_t n_pad, const char *mode, double value,
                                 struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    int m = !strcmp(mode, "constant") ? 0 : !strcmp(mode, "reflect") ? 1 : !strcmp(mode, "replicate") ? 2
          : !strcmp(mode, "circular") ? 3 : -1;
    if (m < 0) return bpcc_xerr(a, "padding mode '%s' is not one of constant, reflect, replicate, circular", mode);
    if (n_pad % 2 || n_pad / 2 > x->ndim) return bpcc_xerr(a, "pad has %u entries for a %u-d input", n_pad, x->ndim);
    if (m && (n_pad / 2 > 3 || x->ndim < n_pad / 2 + 1 || x->ndim > n_pad / 2 + 2))
        return bpcc_xerr(a, "%s padding of %u dimensions needs a %u-d or %u-d input, not %u-d", mode, n_pad / 2,
                         n_pad / 2 + 1, n_pad / 2 + 2, x->ndim);
    int64_t before[BPCC_MAX_DIMS] = {0}, dims[BPCC_MAX_DIMS];
    for (uint32_t d = 0; d < x->ndim; d++) {
        uint32_t k = x->ndim - 1 - d; /* pad pair k is dimension ndim - 1 - k */
        int64_t b = k < n_pad / 2 ? pad[2 * k] : 0, e = k < n_pad / 2 ? pad[2 * k + 1] : 0, n = x->dims[d];
        if (m && (b < 0 || e < 0)) return bpcc_xerr(a, "%s padding must not be negative", mode);
        if (b < -((int64_t)1 << 40) || b > (int64_t)1 << 40 || e < -((int64_t)1 << 40) || e > (int64_t)1 << 40)
            return bpcc_xerr(a, "padding (%lld, %lld) is out of range", (long long)b, (long long)e);
        if ((m == 1 && (b >= n || e >= n)) || (m == 3 && (b > n || e > n)) || (m == 2 && (b || e) && !n))
            return bpcc_xerr(a, "%s padding (%lld, %lld) is too large for a dimension of %lld", mode, (long long)b, (long long)e,
                             (long long)n);
        before[d] = b;
        dims[d] = n + b + e;
        if (dims[d] < 0) return bpcc_xerr(a, "the padded size of dimension %u would be negative", d);
    }
    struct xtensor *y = bpcc_xtensor_new(x->ndim, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t stride[BPCC_MAX_DIMS], st = 1, idx[BPCC_MAX_DIMS] = {0};
    for (int d = (int)x->ndim - 1; d >= 0; d--) {
        stride[d] = st;
        st *= x->dims[d];
    }
    for (uint64_t i = 0; i < y->numel; i++) {
        int64_t off = 0;
        bool fill = false;
        for (uint32_t d = 0; d < x->ndim; d++) {
            int64_t n = x->dims[d], s = idx[d] - before[d];
            if (s < 0 || s >= n) {
                if (m == 0) fill = true;
                else if (m == 1) s = s < 0 ? -s : 2 * (n - 1) - s;
                else if (m == 2) s = s < 0 ? 0 : n - 1;
                else s = s < 0 ? s + n : s - n;
            }
            off += s * stride[d];
        }
        y->data[i] = fill ? (float)value : x->data[off];
        for (int d = (int)x->ndim - 1; d >= 0 && ++idx[d] == dims[d]; d--) idx[d] = 0;
    }
    return put_tensor(a, y, out);
}

static enum bpcc_status k_pad(const struct xargs *a, struct xval *out)
{
    int64_t pad[2 * BPCC_MAX_DIMS];
    uint32_t n;
    double value;
    const struct xval *mv = bpcc_xarg(a, 2, "mode");
    if (!bpcc_xarg_ints(a, 1, "pad", 0, NULL, pad, &n) || !bpcc_xarg_float(a, 3, "value", 0, &value)) return BPCC_ERR_GRAPH;
    if (mv && mv->k != XV_NONE && mv->k != XV_STR) return bpcc_xerr(a, "mode must be a string");
    return pad_with(a, pad, n, mv && mv->k == XV_STR ? mv->u.s : "constant", value, out);
}

/* ZeroPad2d, ConstantPadNd, ReflectionPadNd, ReplicationPadNd: padding (a tuple of 2 N) and value */
static enum bpcc_status k_pad_module(const struct xargs *a, struct xval *out)
{
    const char *t = a->module->type + strlen("torch.nn.");
    const char *mode = !strncmp(t, "Reflection", 10) ? "reflect" : !strncmp(t, "Replication", 11) ? "replicate" : "constant";
    int r = t[strlen(t) - 2] - '0';
    int64_t pad[6];
    if (r < 1 || r > 3 || !bpcc_mattr_ints(a, "padding", (uint32_t)(2 * r), NULL, pad)) return BPCC_ERR_GRAPH;
    return pad_with(a, pad, (uint32_t)(2 * r), mode, bpcc_mattr_float(a->module, "value", 0), out);
}

static enum bpcc_status k_pixel_shuffle(const struct xargs *a, struct xval *out) { return shuffle(a, true, out); }
static enum bpcc_status k_pixel_unshuffle(const struct xargs *a, struct xval *out) { return shuffle(a, false, out); }

static enum bpcc_status repeated(const struct xargs *a, const struct xtensor *x, const int64_t *reps, uint32_t n,
                                 struct xval *out);

/* sizes from argument i on: one list or tuple (or the keyword `name`), or the rest of the
** positional arguments as ints (x.repeat(2, 1), x.repeat((2, 1))) */
static bool sizes_arg(const struct xargs *a, uint32_t i, const char *name, int64_t *out, uint32_t *n)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    if (v && (v->k == XV_SEQ || i >= a->n)) return bpcc_xarg_ints(a, i, name, 0, NULL, out, n);
    *n = 0;
    for (uint32_t k = i; k < a->n; k++) {
        if (*n == BPCC_MAX_DIMS) {
            bpcc_xerr(a, "more than %d sizes", BPCC_MAX_DIMS);
            return false;
        }
        if (!bpcc_xarg_int(a, k, NULL, 0, &out[(*n)++])) return false;
    }
    return true;
}

/* x.repeat(*sizes): the tensor tiled sizes[i] times along dimension i; more sizes than dimensions
** tile a tensor with leading dimensions of 1 */
static enum bpcc_status k_repeat(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t reps[BPCC_MAX_DIMS];
    uint32_t n = 0;
    if (!bpcc_xarg_tensor(a, 0, "self", &x) || !sizes_arg(a, 1, "sizes", reps, &n)) return BPCC_ERR_GRAPH;
    if (n < x->ndim) return bpcc_xerr(a, "repeat needs at least as many sizes (%u) as the tensor has dimensions (%u)", n, x->ndim);
    return repeated(a, x, reps, n, out);
}

/* tile(input, dims): repeat with dims padded by leading 1s to the tensor's rank */
static enum bpcc_status k_tile(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t reps[BPCC_MAX_DIMS];
    uint32_t n;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (!sizes_arg(a, 1, "dims", reps, &n)) return BPCC_ERR_GRAPH;
    if (n < x->ndim) {
        uint32_t pad = x->ndim - n;
        memmove(reps + pad, reps, n * sizeof *reps);
        for (uint32_t i = 0; i < pad; i++) reps[i] = 1;
        n = x->ndim;
    }
    return repeated(a, x, reps, n, out);
}

/* x tiled reps[i] times along dimension i (n >= x's rank; leading dimensions of 1 added) */
static enum bpcc_status repeated(const struct xargs *a, const struct xtensor *x, const int64_t *reps, uint32_t n,
                                 struct xval *out)
{
    int64_t in[BPCC_MAX_DIMS], dims[BPCC_MAX_DIMS] = {0}; /* initialised for gcc, which cannot see n >= 1 here */
    for (uint32_t i = 0; i < n; i++) {
        in[i] = i < n - x->ndim ? 1 : x->dims[i - (n - x->ndim)];
        if (reps[i] < 0 || reps[i] > (int64_t)1 << 31) return bpcc_xerr(a, "repeat size %lld is out of range", (long long)reps[i]);
        dims[i] = in[i] * reps[i];
    }
    struct xtensor *y = bpcc_xtensor_new(n, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t stride[BPCC_MAX_DIMS], st = 1, idx[BPCC_MAX_DIMS] = {0};
    for (int i = (int)n - 1; i >= 0; i--) {
        stride[i] = st;
        st *= in[i];
    }
    for (uint64_t i = 0; i < y->numel; i++) {
        int64_t off = 0;
        for (uint32_t d = 0; d < n; d++) off += idx[d] % in[d] * stride[d];
        y->data[i] = x->data[off];
        for (int d = (int)n - 1; d >= 0 && ++idx[d] == dims[d]; d--) idx[d] = 0;
    }
    return put_tensor(a, marked(y, x->boolean), out);
}

static enum bpcc_status k_cat_(const struct xargs *a, struct xval *out) { return k_cat(a, out, false); }
static enum bpcc_status k_stack(const struct xargs *a, struct xval *out) { return k_cat(a, out, true); }

/* }================================================ */

/* {==================== reductions ==================== */

enum rop { RO_SUM, RO_MEAN, RO_AMAX, RO_AMIN, RO_VAR, RO_STD };

/* acc[o] op= x[i] over x in order, o the output element of i (ostride 0 on reduced dimensions);
** RO_VAR / RO_STD add the squared distance from mean[o] */
static void reduce_pass(const struct xtensor *x, const int64_t *ostride, enum rop op, const double *mean, double *acc)
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
static enum bpcc_status reduce(const struct xargs *a, enum rop op, struct xval *out)
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
            if (!dim_ok(a, &ds[i], x->ndim)) return BPCC_ERR_GRAPH;
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
        return put_tensor(a, y, out);
    }
    double *acc = bpcc_malloc(n_out * sizeof *acc), *mean = spread ? bpcc_malloc(n_out * sizeof *mean) : NULL;
    if (!acc || (spread && !mean)) {
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
    reduce_pass(x, ostride, op, mean, acc);
    double dof = (double)count - (double)correction;
    for (uint64_t i = 0; i < y->numel; i++) {
        double v = acc[i];
        if (op == RO_MEAN) v /= (double)count;
        else if (spread) v = dof > 0 ? v / dof : NAN;
        y->data[i] = (float)(op == RO_STD ? sqrt(v) : v);
    }
    bpcc_xfree(acc);
    bpcc_xfree(mean);
    return put_tensor(a, y, out);
}

static enum bpcc_status k_mean(const struct xargs *a, struct xval *out) { return reduce(a, RO_MEAN, out); }
static enum bpcc_status k_sum(const struct xargs *a, struct xval *out) { return reduce(a, RO_SUM, out); }
static enum bpcc_status k_amax(const struct xargs *a, struct xval *out) { return reduce(a, RO_AMAX, out); }
static enum bpcc_status k_amin(const struct xargs *a, struct xval *out) { return reduce(a, RO_AMIN, out); }
static enum bpcc_status k_var(const struct xargs *a, struct xval *out) { return reduce(a, RO_VAR, out); }
static enum bpcc_status k_std(const struct xargs *a, struct xval *out) { return reduce(a, RO_STD, out); }

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
    if (!dim_ok(a, &dim, x->ndim)) return BPCC_ERR_GRAPH;
    struct xtensor *y = like(x);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t inner = 1, n = x->ndim ? x->dims[dim] : 1;
    for (uint32_t i = (uint32_t)dim + 1; i < x->ndim; i++) inner *= x->dims[i];
    uint64_t outer = x->numel / nz((uint64_t)(n * inner));
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
    return put_tensor(a, y, out);
}

static enum bpcc_status k_softmax(const struct xargs *a, struct xval *out) { return softmax(a, false, out); }
static enum bpcc_status k_log_softmax(const struct xargs *a, struct xval *out) { return softmax(a, true, out); }

/* }================================================ */

/* {==================== the table ==================== */


struct kentry {
    char kind; /* 'm' module type, 'f' function, 't' Tensor method */
    const char *op;
    xkernel fn;
};

/* {==================== quantize / dequantize ==================== */

static bool qrange_of(enum bpcc_dtype t, int64_t *lo, int64_t *hi)
{
    switch (t) {
    case BPCC_DTYPE_QUINT8: *lo = 0, *hi = 255; return true;
    case BPCC_DTYPE_QINT8: *lo = -128, *hi = 127; return true;
    case BPCC_DTYPE_QINT32: *lo = INT32_MIN, *hi = INT32_MAX; return true;
    default: return false;
    }
}

/* a number, or a one-element tensor (get_attr of a scale / zero point buffer) */
static bool scalar_of(const struct xval *v, double *out)
{
    if (!v) return false;
    if (v->k == XV_FLOAT) *out = v->u.f;
    else if (v->k == XV_INT) *out = (double)v->u.i;
    else if (v->k == XV_TENSOR && v->u.t->numel == 1) *out = v->u.t->data[0];
    else return false;
    return true;
}

static bool dtype_arg(const struct xargs *a, uint32_t i, const char *name, enum bpcc_dtype *out)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    /* dtypes reach kernels as XV_OTHER from the IR's DTYPE values: read them from the node */
    const struct bpcc_value *iv = i < a->node->args.n ? &a->node->args.u.seq.items[i] : NULL;
    for (uint32_t k = 0; !iv && k < a->node->kwargs.n; k++)
        if (!strcmp(a->node->kwargs.u.seq.keys[k], name)) iv = &a->node->kwargs.u.seq.items[k];
    (void)v;
    if (!iv || iv->kind != BPCC_VAL_DTYPE) {
        bpcc_xerr(a, "argument %s must be a dtype", name);
        return false;
    }
    *out = iv->u.dtype;
    return true;
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
    if (!scalar_of(bpcc_xarg(a, 1, "scale"), &scale) || !scalar_of(bpcc_xarg(a, 2, "zero_point"), &zpd))
        return bpcc_xerr(a, "scale and zero_point must be numbers or one-element tensors");
    if (!dtype_arg(a, 3, "dtype", &dt)) return BPCC_ERR_GRAPH;
    if (!qrange_of(dt, &lo, &hi)) return bpcc_xerr(a, "cannot quantize to %s", bpcc_dtype_name(dt));
    if (x->qdtype != BPCC_DTYPE_NONE) return bpcc_xerr(a, "the input is quantized already");
    struct xtensor *y = like(x);
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
    return put_tensor(a, y, out);
}

static enum bpcc_status k_quantize_per_channel(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *sc, *zp;
    int64_t axis, lo, hi;
    enum bpcc_dtype dt;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "scales", &sc) ||
        !bpcc_xarg_tensor(a, 2, "zero_points", &zp) || !bpcc_xarg_int(a, 3, "axis", 0, &axis) ||
        !dtype_arg(a, 4, "dtype", &dt) || !dim_ok(a, &axis, x->ndim))
        return BPCC_ERR_GRAPH;
    if (!qrange_of(dt, &lo, &hi)) return bpcc_xerr(a, "cannot quantize to %s", bpcc_dtype_name(dt));
    int64_t C = x->dims[axis];
    if ((int64_t)sc->numel != C || (int64_t)zp->numel != C) return bpcc_xerr(a, "scales and zero_points need %lld values", (long long)C);
    struct xtensor *y = like(x);
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
    return put_tensor(a, y, out);
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
        return put_tensor(a, y, out);
    }
    int64_t inner = 1, C = x->qaxis < 0 ? 1 : x->dims[x->qaxis];
    for (uint32_t i = x->qaxis < 0 ? x->ndim : (uint32_t)x->qaxis + 1; i < x->ndim; i++) inner *= x->dims[i];
    for (uint64_t i = 0; i < x->numel; i++) {
        int64_t c = x->qaxis < 0 ? 0 : (int64_t)(i / (uint64_t)inner) % C;
        y->data[i] = (x->data[i] - (float)x->qzp[c]) * x->qscale[c];
    }
    return put_tensor(a, y, out);
}

/* }================================================ */

static enum bpcc_status expand_to(const struct xargs *a, const struct xtensor *x, uint32_t nd, int64_t *want,
                                  struct xval *out);

/* x.expand(*sizes): -1 keeps a size; new leading dims allowed */
static enum bpcc_status k_expand(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    int64_t want[BPCC_MAX_DIMS];
    uint32_t nd = 0;
    const struct xval *s1 = bpcc_xarg(a, 1, "size");
    if (s1 && s1->k == XV_SEQ) {
        if (!bpcc_xarg_ints(a, 1, "size", 0, NULL, want, &nd)) return BPCC_ERR_GRAPH;
    } else {
        for (uint32_t i = 1; i < a->n && nd < BPCC_MAX_DIMS; i++)
            if (!bpcc_xarg_int(a, i, NULL, 0, &want[nd++])) return BPCC_ERR_GRAPH;
    }
    return expand_to(a, x, nd, want, out);
}

/* x broadcast to the nd sizes of want (-1 keeps a size) */
static enum bpcc_status expand_to(const struct xargs *a, const struct xtensor *x, uint32_t nd, int64_t *want, struct xval *out)
{
    if (nd < x->ndim) return bpcc_xerr(a, "expand needs at least %u sizes", x->ndim);
    int64_t stride[BPCC_MAX_DIMS], st = 1;
    for (int i = (int)nd - 1; i >= 0; i--) {
        int xi = i - (int)(nd - x->ndim);
        int64_t xd = xi >= 0 ? x->dims[xi] : 1;
        if (want[i] == -1) {
            if (xi < 0) return bpcc_xerr(a, "-1 is not allowed for a new dimension");
            want[i] = xd;
        }
        if (xd != want[i] && xd != 1) return bpcc_xerr(a, "cannot expand size %lld to %lld", (long long)xd, (long long)want[i]);
        stride[i] = xd == 1 ? 0 : st;
        st *= xd;
    }
    struct xtensor *y = bpcc_xtensor_new(nd, want);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t idx[BPCC_MAX_DIMS] = {0}, off = 0;
    for (uint64_t i = 0; i < y->numel; i++) {
        y->data[i] = x->data[off];
        for (int k = (int)nd - 1; k >= 0; k--) {
            idx[k]++;
            off += stride[k];
            if (idx[k] < want[k]) break;
            off -= stride[k] * want[k];
            idx[k] = 0;
        }
    }
    return put_tensor(a, marked(y, x->boolean), out);
}

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

/* torchvision.ops.stochastic_depth(input, p, mode, training): the identity in eval */
static enum bpcc_status k_stochastic_depth(const struct xargs *a, struct xval *out)
{
    bool training;
    double p;
    if (!bpcc_xarg_bool(a, 3, "training", true, &training) || !bpcc_xarg_float(a, 1, "p", 0, &p)) return BPCC_ERR_GRAPH;
    if (training && p > 0) return bpcc_xerr(a, "stochastic depth in training mode is random; export the model in eval mode");
    return k_identity(a, out);
}

static enum bpcc_status k_rsub(const struct xargs *a, struct xval *out) { return binary(a, B_SUB, true, out); }

/* {==================== selection, casts and more shapes ==================== */

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
    else if (!scalar_of(v, &d)) {
        bpcc_xerr(a, "argument %s must be a tensor or a number", name);
        return false;
    }
    *o = (struct operand){0, NULL, NULL, (float)d};
    return true;
}

/* c ? x : y elementwise over the three operands broadcast together (torch.where) */
static enum bpcc_status select3(const struct xargs *a, struct operand *c, struct operand *x, struct operand *y, struct xval *out)
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
        t->data[i] = c->data[off[0]] != 0.0f ? x->data[off[1]] : y->data[off[2]];
        for (int k = (int)nd - 1; k >= 0; k--) {
            for (int q = 0; q < 3; q++) off[q] += st[q][k];
            if (++idx[k] < dims[k]) break;
            for (int q = 0; q < 3; q++) off[q] -= st[q][k] * dims[k];
            idx[k] = 0;
        }
    }
    return put_tensor(a, t, out);
}

/* where(condition, input, other) */
static enum bpcc_status k_where(const struct xargs *a, struct xval *out)
{
    struct operand c, x, y;
    if (a->n + a->n_kw < 3) return bpcc_xerr(a, "where(condition) (the indices of nonzero elements) is not supported");
    if (!operand_of(a, 0, "condition", &c) || !operand_of(a, 1, "input", &x) || !operand_of(a, 2, "other", &y))
        return BPCC_ERR_GRAPH;
    return select3(a, &c, &x, &y, out);
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
    enum bpcc_status st = select3(a, &c, &v, &in, out);
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

/* the layout of a reduction over one dimension: outer x n x inner */
static void around(const struct xtensor *x, int64_t dim, uint64_t *outer, int64_t *n, uint64_t *inner)
{
    *inner = 1;
    for (uint32_t i = (uint32_t)dim + 1; i < x->ndim; i++) *inner *= (uint64_t)x->dims[i];
    *n = x->ndim ? x->dims[dim] : 1;
    *outer = x->numel / nz((uint64_t)*n * *inner);
}

/* x's dims without dim (or with it as 1: keepdim) */
static uint32_t dims_without(const struct xtensor *x, int64_t dim, bool keep, int64_t *dims)
{
    uint32_t nd = 0;
    for (uint32_t i = 0; i < x->ndim; i++)
        if ((int64_t)i != dim) dims[nd++] = x->dims[i];
        else if (keep) dims[nd++] = 1;
    return nd;
}

/* max / min (input), (input, dim, keepdim=False) -> (values, indices), (input, other) = maximum /
** minimum; argmax / argmin (input, dim=None, keepdim=False). NaN wins, ties keep the first; indices
** are held as floats (exact below 2^24) */
static enum bpcc_status extreme(const struct xargs *a, bool want_max, bool arg, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    const struct xval *dv = bpcc_xarg(a, 1, "dim");
    if (!arg && dv && dv->k == XV_TENSOR) return binary(a, want_max ? B_MAX : B_MIN, false, out);
    bool keep, all = !dv || dv->k == XV_NONE;
    int64_t dim = 0;
    if (!bpcc_xarg_bool(a, 2, "keepdim", false, &keep) || (!all && !bpcc_xarg_int(a, 1, "dim", 0, &dim)) ||
        (!all && !dim_ok(a, &dim, x->ndim)))
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
        around(x, dim, &outer, &n, &inner);
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
        return put_tensor(a, arg ? ix : v, out);
    }
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

static enum bpcc_status k_max(const struct xargs *a, struct xval *out) { return extreme(a, true, false, out); }
static enum bpcc_status k_min(const struct xargs *a, struct xval *out) { return extreme(a, false, false, out); }
static enum bpcc_status k_argmax(const struct xargs *a, struct xval *out) { return extreme(a, true, true, out); }
static enum bpcc_status k_argmin(const struct xargs *a, struct xval *out) { return extreme(a, false, true, out); }

/* cumsum(input, dim): running sums along dim, accumulated in double and rounded at each element,
** as PyTorch's CPU kernel does (bit-equal) */
static enum bpcc_status k_cumsum(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &dim) || !dim_ok(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    struct xtensor *y = like(x);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t outer, inner;
    int64_t n;
    around(x, dim, &outer, &n, &inner);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            double s = 0;
            for (int64_t k = 0; k < n; k++) {
                uint64_t i = (o * (uint64_t)n + (uint64_t)k) * inner + in;
                s += x->data[i];
                y->data[i] = (float)s;
            }
        }
    return put_tensor(a, y, out);
}

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
            if (!dim_ok(a, &ds[i], x->ndim)) return BPCC_ERR_GRAPH;
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
    return put_tensor(a, y, out);
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
        !bpcc_xarg_float(a, 3, "eps", 1e-12, &eps) || !dim_ok(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    if (p != 2 && p != 1) return bpcc_xerr(a, "normalize with p = %g is not supported (2, 1)", p);
    struct xtensor *y = like(x);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t outer, inner;
    int64_t n;
    around(x, dim, &outer, &n, &inner);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t in = 0; in < inner; in++) {
            const float *q = x->data + o * (uint64_t)n * inner + in;
            double s = 0;
            for (int64_t k = 0; k < n; k++) s += p == 2 ? (double)q[k * inner] * q[k * inner] : fabs(q[k * inner]);
            float d = (float)(p == 2 ? sqrt(s) : s);
            d = d < (float)eps ? (float)eps : d;
            for (int64_t k = 0; k < n; k++) y->data[(o * (uint64_t)n + (uint64_t)k) * inner + in] = q[k * inner] / d;
        }
    return put_tensor(a, y, out);
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
    if (!dim_ok(a, &dim, x->ndim)) return BPCC_ERR_GRAPH;
    if (!x->ndim || x->dims[dim] % 2) return bpcc_xerr(a, "glu halves a dimension of even size");
    int64_t dims[BPCC_MAX_DIMS];
    memcpy(dims, x->dims, x->ndim * sizeof *dims);
    dims[dim] /= 2;
    struct xtensor *y = bpcc_xtensor_new(x->ndim, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t outer, inner;
    int64_t n;
    around(y, dim, &outer, &n, &inner);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t i = 0; i < (uint64_t)n * inner; i++) {
            float p = x->data[o * 2 * (uint64_t)n * inner + i], q = x->data[(o * 2 + 1) * (uint64_t)n * inner + i];
            y->data[o * (uint64_t)n * inner + i] = p * (1.0f / (1.0f + expf(-q)));
        }
    return put_tensor(a, y, out);
}

/* narrow(input, dim, start, length) and select(input, dim, index) */
static enum bpcc_status k_narrow(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim, start, len;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &dim) ||
        !bpcc_xarg_int(a, 2, "start", 0, &start) || !bpcc_xarg_int(a, 3, "length", 0, &len) || !dim_ok(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    if (!x->ndim) return bpcc_xerr(a, "narrow of a 0-d tensor");
    if (start < 0) start += x->dims[dim];
    if (start < 0 || len < 0 || start > x->dims[dim] - len)
        return bpcc_xerr(a, "narrow [%lld, +%lld) is out of range for size %lld", (long long)start, (long long)len,
                         (long long)x->dims[dim]);
    return put_tensor(a, narrow(x, (uint32_t)dim, start, len), out);
}

static enum bpcc_status k_select(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim, i;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &dim) ||
        !bpcc_xarg_int(a, 2, "index", 0, &i) || !dim_ok(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    if (!x->ndim) return bpcc_xerr(a, "select of a 0-d tensor");
    if (i < -x->dims[dim] || i >= x->dims[dim])
        return bpcc_xerr(a, "index %lld is out of range for size %lld", (long long)i, (long long)x->dims[dim]);
    struct xtensor *t = narrow(x, (uint32_t)dim, i < 0 ? i + x->dims[dim] : i, 1);
    if (!t) return bpcc_diag_nomem(a->d);
    memmove(t->dims + dim, t->dims + dim + 1, (t->ndim - (uint32_t)dim - 1) * sizeof *t->dims);
    t->ndim--;
    return put_tensor(a, t, out);
}

/* view_as / reshape_as / expand_as (input, other): the input in other's shape */
static enum bpcc_status k_view_as(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *o;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "other", &o)) return BPCC_ERR_GRAPH;
    return reshaped(a, x, o->ndim, o->dims, out);
}

static enum bpcc_status k_expand_as(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *o;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "other", &o)) return BPCC_ERR_GRAPH;
    int64_t want[BPCC_MAX_DIMS];
    memcpy(want, o->dims, o->ndim * sizeof *want);
    return expand_to(a, x, o->ndim, want, out);
}

/* unflatten(input, dim, sizes) */
static enum bpcc_status k_unflatten(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim, sizes[BPCC_MAX_DIMS], want[BPCC_MAX_DIMS];
    uint32_t n, nd = 0;
    if (a->module) {
        const struct bpcc_value *d = bpcc_module_attr(a->module, "dim"), *s = bpcc_module_attr(a->module, "unflattened_size");
        if (!d || d->kind != BPCC_VAL_INT || !s || (s->kind != BPCC_VAL_TUPLE && s->kind != BPCC_VAL_LIST) ||
            s->n > BPCC_MAX_DIMS || !bpcc_mattr_ints(a, "unflattened_size", s->n, NULL, sizes))
            return bpcc_xerr(a, "Unflatten needs its dim and unflattened_size");
        dim = d->u.i;
        n = s->n;
        if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    } else if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &dim) ||
               !bpcc_xarg_ints(a, 2, "sizes", 0, NULL, sizes, &n)) {
        return BPCC_ERR_GRAPH;
    }
    if (!dim_ok(a, &dim, x->ndim)) return BPCC_ERR_GRAPH;
    if (!x->ndim || x->ndim - 1 + n > BPCC_MAX_DIMS) return bpcc_xerr(a, "unflatten needs a dimension and at most %d in all", BPCC_MAX_DIMS);
    for (uint32_t i = 0; i < x->ndim; i++)
        if ((int64_t)i != dim) want[nd++] = x->dims[i];
        else
            for (uint32_t k = 0; k < n; k++) want[nd++] = sizes[k];
    /* -1 in sizes is inferred from the unflattened dimension, not from the whole tensor */
    int64_t known = 1, infer = -1;
    for (uint32_t k = 0; k < n; k++) {
        if (sizes[k] < -1 || (sizes[k] == -1 && infer >= 0) || (sizes[k] > 0 && known > INT64_MAX / sizes[k]))
            return bpcc_xerr(a, "unflatten's sizes are invalid");
        if (sizes[k] == -1) infer = dim + k;
        else known *= sizes[k];
    }
    if (infer >= 0 ? !known || x->dims[dim] % known : known != x->dims[dim])
        return bpcc_xerr(a, "sizes multiply to %lld, %s the size %lld", (long long)known, infer >= 0 ? "which does not divide" : "not to",
                         (long long)x->dims[dim]);
    if (infer >= 0) want[infer] = x->dims[dim] / known;
    return reshaped(a, x, nd, want, out);
}

/* movedim(input, source, destination): ints or lists */
static enum bpcc_status k_movedim(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t src[BPCC_MAX_DIMS], dst[BPCC_MAX_DIMS], perm[BPCC_MAX_DIMS];
    uint32_t ns, ndst;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_ints(a, 1, "source", 0, NULL, src, &ns) ||
        !bpcc_xarg_ints(a, 2, "destination", 0, NULL, dst, &ndst))
        return BPCC_ERR_GRAPH;
    if (ns != ndst) return bpcc_xerr(a, "movedim: %u sources but %u destinations", ns, ndst);
    bool used_src[BPCC_MAX_DIMS] = {0}, used_dst[BPCC_MAX_DIMS] = {0};
    for (uint32_t i = 0; i < x->ndim; i++) perm[i] = -1;
    for (uint32_t i = 0; i < ns; i++) {
        if (!dim_ok(a, &src[i], x->ndim) || !dim_ok(a, &dst[i], x->ndim)) return BPCC_ERR_GRAPH;
        if (used_src[src[i]] || used_dst[dst[i]]) return bpcc_xerr(a, "movedim repeats a dimension");
        used_src[src[i]] = used_dst[dst[i]] = true;
        perm[dst[i]] = src[i];
    }
    for (uint32_t i = 0, s = 0; i < x->ndim; i++) { /* the rest keep their order */
        if (perm[i] >= 0) continue;
        while (used_src[s]) s++;
        perm[i] = s++;
    }
    return permuted(a, x, perm, out);
}

/* flip(input, dims) and roll(input, shifts, dims=None): element i of y takes the element of x at
** the flipped / shifted index in each listed dimension */
static enum bpcc_status moved(const struct xargs *a, bool roll, struct xval *out)
{
    const struct xtensor *x;
    int64_t ds[BPCC_MAX_DIMS], sh[BPCC_MAX_DIMS], shift[BPCC_MAX_DIMS] = {0};
    uint32_t nd = 0, nsh = 0;
    bool flip[BPCC_MAX_DIMS] = {0}, flat = false;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    const struct xval *dv = bpcc_xarg(a, roll ? 2 : 1, "dims");
    if (roll && !bpcc_xarg_ints(a, 1, "shifts", 0, NULL, sh, &nsh)) return BPCC_ERR_GRAPH;
    if (roll && (!dv || dv->k == XV_NONE)) {
        if (nsh != 1) return bpcc_xerr(a, "roll without dims takes one shift");
        flat = true; /* over the flattened tensor */
    } else if (roll ? !bpcc_xarg_ints(a, 2, "dims", 0, NULL, ds, &nd) : !sizes_arg(a, 1, "dims", ds, &nd)) {
        return BPCC_ERR_GRAPH;
    }
    if (roll && !flat && nsh != nd) return bpcc_xerr(a, "roll: %u shifts but %u dims", nsh, nd);
    for (uint32_t i = 0; i < nd; i++) {
        if (!dim_ok(a, &ds[i], x->ndim)) return BPCC_ERR_GRAPH;
        if (!roll && flip[ds[i]]) return bpcc_xerr(a, "flip repeats dimension %lld", (long long)ds[i]);
        flip[ds[i]] = !roll;
        if (roll && x->dims[ds[i]]) shift[ds[i]] = (shift[ds[i]] + sh[i] % x->dims[ds[i]]) % x->dims[ds[i]];
    }
    struct xtensor *y = like(x);
    if (!y) return bpcc_diag_nomem(a->d);
    if (flat) {
        uint64_t n = x->numel, s = n ? (uint64_t)((sh[0] % (int64_t)n + (int64_t)n) % (int64_t)n) : 0;
        for (uint64_t i = 0; i < n; i++) y->data[(i + s) % n] = x->data[i];
        return put_tensor(a, marked(y, x->boolean), out);
    }
    int64_t stride[BPCC_MAX_DIMS], st = 1, idx[BPCC_MAX_DIMS] = {0};
    for (int i = (int)x->ndim - 1; i >= 0; i--) {
        stride[i] = st;
        st *= x->dims[i];
        if (x->dims[i]) shift[i] = (shift[i] % x->dims[i] + x->dims[i]) % x->dims[i];
    }
    for (uint64_t i = 0; i < y->numel; i++) {
        int64_t off = 0;
        for (uint32_t d = 0; d < x->ndim; d++) {
            int64_t j = flip[d] ? x->dims[d] - 1 - idx[d] : idx[d] - shift[d];
            off += (j < 0 ? j + x->dims[d] : j) * stride[d];
        }
        y->data[i] = x->data[off];
        for (int d = (int)x->ndim - 1; d >= 0 && ++idx[d] == x->dims[d]; d--) idx[d] = 0;
    }
    return put_tensor(a, marked(y, x->boolean), out);
}

static enum bpcc_status k_flip(const struct xargs *a, struct xval *out) { return moved(a, false, out); }
static enum bpcc_status k_roll(const struct xargs *a, struct xval *out) { return moved(a, true, out); }

/* repeat_interleave(input, repeats, dim=None): each element (a flattened input without dim) or
** each slice along dim repeated `repeats` times in place; repeats an int */
static enum bpcc_status k_repeat_interleave(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t r, dim = 0;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    const struct xval *rv = bpcc_xarg(a, 1, "repeats"), *dv = bpcc_xarg(a, 2, "dim");
    if (!rv || rv->k != XV_INT) return bpcc_xerr(a, "repeat_interleave is supported with an int number of repeats");
    r = rv->u.i;
    if (r < 0 || r > (int64_t)1 << 31) return bpcc_xerr(a, "repeats %lld is out of range", (long long)r);
    bool flat = !dv || dv->k == XV_NONE;
    if (!flat && (!bpcc_xarg_int(a, 2, "dim", 0, &dim) || !dim_ok(a, &dim, x->ndim))) return BPCC_ERR_GRAPH;
    int64_t dims[BPCC_MAX_DIMS], n;
    uint64_t outer, inner;
    uint32_t nd = flat ? 1 : x->ndim;
    if (flat) {
        outer = inner = 1;
        n = (int64_t)x->numel;
        dims[0] = n * r;
    } else {
        around(x, dim, &outer, &n, &inner);
        memcpy(dims, x->dims, x->ndim * sizeof *dims);
        dims[dim] = n * r;
    }
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    float *q = y->data;
    for (uint64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < n; k++)
            for (int64_t j = 0; j < r; j++, q += inner)
                memcpy(q, x->data + (o * (uint64_t)n + (uint64_t)k) * inner, inner * sizeof(float));
    return put_tensor(a, marked(y, x->boolean), out);
}

/* a float32 or bool dtype argument at i (absent: keep); false with an error for other dtypes */
static bool float_or_bool(const struct xargs *a, uint32_t i, const char *name, bool *boolean)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    if (!v || v->k == XV_NONE) return true;
    enum bpcc_dtype t;
    if (!dtype_arg(a, i, name, &t)) return false;
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
                 : !sizes_arg(a, 1, "size", dims, &nd))
            return BPCC_ERR_GRAPH;
        boolean = x->boolean;
        if (!float_or_bool(a, UINT32_MAX, "dtype", &boolean)) return BPCC_ERR_GRAPH;
    }
    for (uint32_t i = 0; i < nd; i++)
        if (dims[i] < 0) return bpcc_xerr(a, "negative size %lld", (long long)dims[i]);
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    for (uint64_t i = 0; i < y->numel; i++) y->data[i] = boolean ? (float)(fill != 0) : (float)fill;
    return put_tensor(a, marked(y, boolean), out);
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
        for (uint32_t k = 0; k < a->node->kwargs.n && !iv; k++)
            if (!strcmp(a->node->kwargs.u.seq.keys[k], "dtype")) iv = &a->node->kwargs.u.seq.items[k];
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
    struct xtensor *y = like(x);
    if (!y) return bpcc_diag_nomem(a->d);
    for (uint64_t i = 0; i < x->numel; i++)
        y->data[i] = how == C_BOOL ? (float)(x->data[i] != 0.0f) : how == C_INT ? truncf(x->data[i]) : x->data[i];
    return put_tensor(a, marked(y, how == C_BOOL), out);
}

static enum bpcc_status k_float(const struct xargs *a, struct xval *out) { return cast(a, C_FLOAT, out); }
static enum bpcc_status k_bool(const struct xargs *a, struct xval *out) { return cast(a, C_BOOL, out); }
static enum bpcc_status k_long(const struct xargs *a, struct xval *out) { return cast(a, C_INT, out); }
static enum bpcc_status k_to(const struct xargs *a, struct xval *out) { return cast(a, C_TO, out); }
static enum bpcc_status k_type_as(const struct xargs *a, struct xval *out) { return cast(a, C_TYPE_AS, out); }

/* softmin(input, dim) = softmax(-input, dim); Softmax2d: softmax over the channels (dim -3) */
static enum bpcc_status k_softmin(const struct xargs *a, struct xval *out)
{
    struct xval neg;
    enum bpcc_status st = unary(a, U_NEG, 0, 0, &neg);
    if (st != BPCC_OK) return st;
    struct xval pos[2] = {neg, {0}};
    struct xargs sub = *a;
    pos[1] = a->n > 1 ? a->pos[1] : (struct xval){.k = XV_NONE};
    sub.pos = pos;
    sub.n = a->n > 1 ? 2 : 1;
    sub.consume = false;
    st = softmax(&sub, false, out);
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

/* einsum(equation, *operands) or einsum(equation, [operands]): letters name dimensions (a letter
** repeated in one operand takes its diagonal); "->" names the output's, else the letters seen once,
** in alphabetical order. Two operands whose letters each appear once in them, and are in the
** output or in both, contract as PyTorch does, through batched GEMMs: the operands gathered as
** [batch, left, summed] and [batch, summed, right], the product gathered into the output's order.
** Any other equation sums each output element's products over the other letters in double,
** rounded once (within ~1e-7 of PyTorch's float sums). */
enum { EINSUM_MAX_OPS = 8 };

/* dst = src's elements over the n letters ls in row-major order (sizes size[], src strides st[]) */
static void einsum_gather(const float *src, const int64_t *st, const char *ls, uint32_t n, const int64_t *size, float *dst,
                          uint64_t count)
{
    int64_t idx[52] = {0}, off = 0;
    for (uint64_t i = 0; i < count; i++) {
        dst[i] = src[off];
        for (int q = (int)n - 1; q >= 0; q--) {
            int l = ls[q];
            off += st[l];
            if (++idx[q] < size[l]) break;
            off -= st[l] * size[l];
            idx[q] = 0;
        }
    }
}

/* the GEMM form of a two-operand einsum into y (false: the equation has no such form) */
static bool einsum_gemm(const struct xval *ops, const int64_t *size, int64_t (*ost)[52], uint8_t (*occ)[52],
                        const bool *in_out, const char *outl, uint32_t n_out, struct xtensor *y, bool *nomem)
{
    char bl[52], ml[52], nl[52], kl[52], al[104], brl[104], cl[156];
    uint32_t nb = 0, nm = 0, nn = 0, nk = 0;
    int64_t B = 1, M = 1, N = 1, K = 1;
    for (int l = 0; l < 52; l++) {
        if (occ[0][l] > 1 || occ[1][l] > 1) return false; /* a diagonal */
        bool x = occ[0][l], z = occ[1][l];
        if (!x && !z) continue;
        if (x && z) {
            if (in_out[l]) bl[nb++] = (char)l, B *= size[l];
            else kl[nk++] = (char)l, K *= size[l];
        } else if (!in_out[l]) {
            return false; /* summed within one operand */
        } else if (x) {
            ml[nm++] = (char)l, M *= size[l];
        } else {
            nl[nn++] = (char)l, N *= size[l];
        }
    }
    if (!y->numel || !ops[0].u.t->numel || !ops[1].u.t->numel) return false;
    float *pa = bpcc_malloc((size_t)(B * M * K) * sizeof *pa), *pb = bpcc_malloc((size_t)(B * K * N) * sizeof *pb);
    float *pc = bpcc_malloc((size_t)(B * M * N) * sizeof *pc);
    if (!pa || !pb || !pc) {
        bpcc_xfree(pa);
        bpcc_xfree(pb);
        bpcc_xfree(pc);
        *nomem = true;
        return true;
    }
    memcpy(al, bl, nb), memcpy(al + nb, ml, nm), memcpy(al + nb + nm, kl, nk);
    memcpy(brl, bl, nb), memcpy(brl + nb, kl, nk), memcpy(brl + nb + nk, nl, nn);
    einsum_gather(ops[0].u.t->data, ost[0], al, nb + nm + nk, size, pa, (uint64_t)(B * M * K));
    einsum_gather(ops[1].u.t->data, ost[1], brl, nb + nk + nn, size, pb, (uint64_t)(B * K * N));
    for (int64_t b = 0; b < B; b++)
        bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, pa + b * M * K, (int)K,
                   pb + b * K * N, (int)N, 0.0f, pc + b * M * N, (int)N);
    /* the product is [batch letters, left letters, right letters]: its strides, then the output's order */
    int64_t cst[52] = {0}, st = 1;
    memcpy(cl, bl, nb), memcpy(cl + nb, ml, nm), memcpy(cl + nb + nm, nl, nn);
    for (int q = (int)(nb + nm + nn) - 1; q >= 0; q--) cst[(int)cl[q]] = st, st *= size[(int)cl[q]];
    einsum_gather(pc, cst, outl, n_out, size, y->data, y->numel);
    bpcc_xfree(pa);
    bpcc_xfree(pb);
    bpcc_xfree(pc);
    return true;
}

static enum bpcc_status k_einsum(const struct xargs *a, struct xval *out)
{
    const struct xval *eq = bpcc_xarg(a, 0, "equation");
    if (!eq || eq->k != XV_STR) return bpcc_xerr(a, "einsum needs an equation string");
    const struct xval *ops = a->n == 2 && a->pos[1].k == XV_SEQ ? a->pos[1].u.seq.items : a->pos + 1;
    uint32_t n_ops = a->n == 2 && a->pos[1].k == XV_SEQ ? a->pos[1].u.seq.n : a->n - 1;
    if (!n_ops || n_ops > EINSUM_MAX_OPS) return bpcc_xerr(a, "einsum takes 1 to %d operands", EINSUM_MAX_OPS);
    int64_t size[52], ost[EINSUM_MAX_OPS][52] = {{0}}; /* per letter (a-z, A-Z): its size, each operand's stride */
    uint8_t occ[EINSUM_MAX_OPS][52] = {{0}};           /* and how often each operand names it */
    int seen[52] = {0};
    char outl[BPCC_MAX_DIMS + 1];
    uint32_t n_out = 0, op = 0, dim = 0;
    const char *c = eq->u.s;
    bool explicit_out = strstr(c, "->") != NULL;
    for (uint32_t i = 0; i < n_ops; i++)
        if (ops[i].k != XV_TENSOR) return bpcc_xerr(a, "einsum operand %u is not a tensor", i);
    const struct xtensor *t = ops[0].u.t;
    int64_t stride[BPCC_MAX_DIMS];
    for (;; c++) { /* the operands' letters */
        if (*c == ' ') continue;
        if (*c == ',' || *c == '-' || !*c) {
            if (dim != t->ndim) return bpcc_xerr(a, "einsum operand %u has %u dimensions, its subscripts %u", op, t->ndim, dim);
            if (*c != ',') break;
            if (++op == n_ops) return bpcc_xerr(a, "einsum's equation has more operands than given");
            t = ops[op].u.t;
            dim = 0;
            continue;
        }
        int l = *c >= 'a' && *c <= 'z' ? *c - 'a' : *c >= 'A' && *c <= 'Z' ? *c - 'A' + 26 : -1;
        if (l < 0) return bpcc_xerr(a, "einsum subscript '%c' is not supported (letters only)", *c);
        if (dim >= t->ndim) return bpcc_xerr(a, "einsum operand %u has %u dimensions, its subscripts more", op, t->ndim);
        if (!dim) { /* this operand's strides */
            int64_t st = 1;
            for (int k = (int)t->ndim - 1; k >= 0; k--) stride[k] = st, st *= t->dims[k];
        }
        if (seen[l] && size[l] != t->dims[dim])
            return bpcc_xerr(a, "einsum subscript '%c' has sizes %lld and %lld", *c, (long long)size[l], (long long)t->dims[dim]);
        size[l] = t->dims[dim];
        ost[op][l] += stride[dim++];
        occ[op][l] = (uint8_t)(occ[op][l] < 255 ? occ[op][l] + 1 : 255);
        seen[l]++;
    }
    if (op + 1 != n_ops) return bpcc_xerr(a, "einsum's equation has %u operands, %u given", op + 1, n_ops);
    bool in_out[52] = {false};
    if (explicit_out) {
        for (c += 2; *c; c++) {
            if (*c == ' ') continue;
            int l = *c >= 'a' && *c <= 'z' ? *c - 'a' : *c >= 'A' && *c <= 'Z' ? *c - 'A' + 26 : -1;
            if (l < 0 || !seen[l] || in_out[l] || n_out == BPCC_MAX_DIMS)
                return bpcc_xerr(a, "einsum's output subscripts are invalid at '%c'", *c);
            in_out[l] = true;
            outl[n_out++] = (char)l;
        }
    } else {
        for (int l = 0; l < 52; l++)
            if (seen[l] == 1) {
                if (n_out == BPCC_MAX_DIMS) return bpcc_xerr(a, "too many dimensions");
                in_out[l] = true;
                outl[n_out++] = (char)l;
            }
    }
    char sum[52];
    uint32_t n_sum = 0;
    uint64_t per = 1;
    for (int l = 0; l < 52; l++)
        if (seen[l] && !in_out[l]) sum[n_sum++] = (char)l, per *= (uint64_t)size[l];
    int64_t dims[BPCC_MAX_DIMS];
    for (uint32_t i = 0; i < n_out; i++) dims[i] = size[(int)outl[i]];
    struct xtensor *y = bpcc_xtensor_new(n_out, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    bool nomem = false;
    if (n_ops == 2) {
        bpcc_blas_set_threads(bpcc_exec_threads(a->ctx));
        if (einsum_gemm(ops, size, ost, occ, in_out, outl, n_out, y, &nomem)) {
            if (nomem) {
                bpcc_xtensor_free(y);
                return bpcc_diag_nomem(a->d);
            }
            return put_tensor(a, y, out);
        }
    }
    int64_t oi[BPCC_MAX_DIMS] = {0}, si[52] = {0}, base[EINSUM_MAX_OPS] = {0};
    for (uint64_t e = 0; e < y->numel; e++) {
        int64_t off[EINSUM_MAX_OPS];
        memcpy(off, base, sizeof off);
        double acc = 0;
        for (uint64_t k = 0; k < per; k++) {
            double p = 1;
            for (uint32_t o = 0; o < n_ops; o++) p *= ops[o].u.t->data[off[o]];
            acc += p;
            for (int q = (int)n_sum - 1; q >= 0; q--) { /* the next contracted index */
                int l = sum[q];
                for (uint32_t o = 0; o < n_ops; o++) off[o] += ost[o][l];
                if (++si[q] < size[l]) break;
                for (uint32_t o = 0; o < n_ops; o++) off[o] -= ost[o][l] * size[l];
                si[q] = 0;
            }
        }
        y->data[e] = (float)acc;
        for (int q = (int)n_out - 1; q >= 0; q--) { /* the next output index */
            int l = outl[q];
            for (uint32_t o = 0; o < n_ops; o++) base[o] += ost[o][l];
            if (++oi[q] < dims[q]) break;
            for (uint32_t o = 0; o < n_ops; o++) base[o] -= ost[o][l] * dims[q];
            oi[q] = 0;
        }
    }
    return put_tensor(a, y, out);
}

/* }================================================ */

static const struct kentry table[] = {
    {'m', "torch.nn.ReLU", k_relu}, {'m', "torch.nn.ReLU6", k_relu6}, {'m', "torch.nn.Hardtanh", k_hardtanh},
    {'m', "torch.nn.LeakyReLU", k_leaky_relu}, {'m', "torch.nn.ELU", k_elu}, {'m', "torch.nn.Hardswish", k_hardswish},
    {'m', "torch.nn.Hardsigmoid", k_hardsigmoid}, {'m', "torch.nn.Sigmoid", k_sigmoid}, {'m', "torch.nn.Tanh", k_tanh},
    {'m', "torch.nn.SiLU", k_silu}, {'m', "torch.nn.GELU", k_gelu}, {'m', "torch.nn.Softmax", k_softmax},
    {'m', "torch.nn.Dropout", k_dropout}, {'m', "torch.nn.Dropout1d", k_dropout}, {'m', "torch.nn.Dropout2d", k_dropout},
    {'m', "torch.nn.Dropout3d", k_dropout}, {'m', "torch.nn.AlphaDropout", k_dropout}, {'m', "torch.nn.Identity", k_identity},
    {'m', "torch.nn.Flatten", k_flatten},
    {'m', "torch.nn.Conv1d", bpcc_k_conv}, {'m', "torch.nn.Conv2d", bpcc_k_conv}, {'m', "torch.nn.Conv3d", bpcc_k_conv},
    {'m', "torch.nn.ConvTranspose1d", bpcc_k_conv_transpose}, {'m', "torch.nn.ConvTranspose2d", bpcc_k_conv_transpose},
    {'f', "torch.nn.functional.conv3d", bpcc_k_conv}, {'f', "torch.nn.functional.conv_transpose1d", bpcc_k_conv_transpose},
    {'f', "torch.nn.functional.conv_transpose2d", bpcc_k_conv_transpose},
    {'m', "torch.nn.Linear", bpcc_k_linear},
    {'m', "torch.ao.nn.quantized.reference.Linear", bpcc_k_reference},
    {'m', "torch.ao.nn.quantized.reference.Conv1d", bpcc_k_reference},
    {'m', "torch.ao.nn.quantized.reference.Conv2d", bpcc_k_reference},
    {'m', "torch.ao.nn.quantized.reference.Conv3d", bpcc_k_reference},
    {'m', "torch.ao.nn.quantized.reference.ConvTranspose1d", bpcc_k_reference},
    {'m', "torch.ao.nn.quantized.reference.ConvTranspose2d", bpcc_k_reference}, {'m', "torch.nn.BatchNorm1d", bpcc_k_batch_norm},
    {'m', "torch.nn.BatchNorm2d", bpcc_k_batch_norm}, {'m', "torch.nn.BatchNorm3d", bpcc_k_batch_norm},
    {'m', "torch.nn.LayerNorm", bpcc_k_layer_norm},
    {'m', "torch.nn.MaxPool1d", bpcc_k_max_pool1d}, {'m', "torch.nn.MaxPool2d", bpcc_k_max_pool2d},
    {'m', "torch.nn.MaxPool3d", bpcc_k_max_pool3d}, {'m', "torch.nn.AvgPool1d", bpcc_k_avg_pool1d},
    {'m', "torch.nn.AvgPool2d", bpcc_k_avg_pool2d}, {'m', "torch.nn.AvgPool3d", bpcc_k_avg_pool3d},
    {'m', "torch.nn.AdaptiveAvgPool1d", bpcc_k_adaptive_avg_pool1d},
    {'m', "torch.nn.AdaptiveAvgPool2d", bpcc_k_adaptive_avg_pool2d},
    {'m', "torch.nn.AdaptiveAvgPool3d", bpcc_k_adaptive_avg_pool3d},
    {'m', "torch.nn.AdaptiveMaxPool1d", bpcc_k_adaptive_max_pool1d},
    {'m', "torch.nn.AdaptiveMaxPool2d", bpcc_k_adaptive_max_pool2d},
    {'m', "torch.nn.AdaptiveMaxPool3d", bpcc_k_adaptive_max_pool3d},
    {'m', "torch.nn.Upsample", bpcc_k_upsample}, {'m', "torch.nn.UpsamplingNearest2d", bpcc_k_upsample},
    {'m', "torch.nn.UpsamplingBilinear2d", bpcc_k_upsample},
    {'f', "torch.nn.functional.relu", k_relu}, {'f', "torch.relu", k_relu}, {'f', "torch.nn.functional.relu6", k_relu6},
    {'f', "torch.nn.functional.hardtanh", k_hardtanh}, {'f', "torch.nn.functional.leaky_relu", k_leaky_relu},
    {'f', "torch.nn.functional.elu", k_elu}, {'f', "torch.nn.functional.hardswish", k_hardswish},
    {'f', "torch.nn.functional.hardsigmoid", k_hardsigmoid}, {'f', "torch.sigmoid", k_sigmoid},
    {'f', "torch.nn.functional.sigmoid", k_sigmoid}, {'f', "torch.tanh", k_tanh}, {'f', "torch.nn.functional.tanh", k_tanh},
    {'f', "torch.nn.functional.silu", k_silu}, {'f', "torch.nn.functional.gelu", k_gelu},
    {'f', "torch.nn.functional.softmax", k_softmax}, {'f', "torch.softmax", k_softmax},
    {'f', "torch.nn.functional.dropout", k_dropout}, {'f', "torch.clamp", k_clamp}, {'f', "torch.exp", k_exp},
    {'f', "torch.sqrt", k_sqrt}, {'f', "operator.neg", k_neg}, {'f', "torch.neg", k_neg}, {'t', "neg", k_neg},
    {'f', "torch.rsqrt", k_rsqrt}, {'t', "rsqrt", k_rsqrt}, {'f', "torch.reciprocal", k_reciprocal},
    {'t', "reciprocal", k_reciprocal},
    {'f', "operator.add", k_add}, {'f', "torch.add", k_add}, {'f', "operator.sub", k_sub}, {'f', "torch.sub", k_sub},
    {'f', "operator.mul", k_mul}, {'f', "torch.mul", k_mul}, {'f', "operator.truediv", k_div}, {'f', "torch.div", k_div},
    {'f', "operator.floordiv", k_floordiv},
    {'f', "torch.flatten", k_flatten}, {'f', "torch.reshape", k_view}, {'f', "torch.permute", k_permute},
    {'f', "torch.transpose", k_transpose}, {'f', "torch.unsqueeze", k_unsqueeze}, {'f', "torch.squeeze", k_squeeze},
    {'f', "torch.cat", k_cat_}, {'f', "torch.concat", k_cat_}, {'f', "torch.stack", k_stack},
    {'f', "torch.mean", k_mean}, {'f', "torch.sum", k_sum}, {'f', "operator.getitem", k_getitem},
    {'f', "getattr", k_getattr},
    {'f', "torch.nn.functional.conv1d", bpcc_k_conv}, {'f', "torch.nn.functional.conv2d", bpcc_k_conv},
    {'f', "torch.nn.functional.linear", bpcc_k_linear}, {'f', "torch.nn.functional.batch_norm", bpcc_k_batch_norm},
    {'f', "torch.nn.functional.layer_norm", bpcc_k_layer_norm},
    {'f', "torch.nn.functional.max_pool1d", bpcc_k_max_pool1d}, {'f', "torch.nn.functional.max_pool2d", bpcc_k_max_pool2d},
    {'f', "torch.nn.functional.max_pool3d", bpcc_k_max_pool3d}, {'f', "torch.nn.functional.avg_pool1d", bpcc_k_avg_pool1d},
    {'f', "torch.nn.functional.avg_pool2d", bpcc_k_avg_pool2d}, {'f', "torch.nn.functional.avg_pool3d", bpcc_k_avg_pool3d},
    {'f', "torch.nn.functional.adaptive_avg_pool1d", bpcc_k_adaptive_avg_pool1d},
    {'f', "torch.nn.functional.adaptive_avg_pool2d", bpcc_k_adaptive_avg_pool2d},
    {'f', "torch.nn.functional.adaptive_avg_pool3d", bpcc_k_adaptive_avg_pool3d},
    {'f', "torch.nn.functional.adaptive_max_pool1d", bpcc_k_adaptive_max_pool1d},
    {'f', "torch.nn.functional.adaptive_max_pool2d", bpcc_k_adaptive_max_pool2d},
    {'f', "torch.nn.functional.adaptive_max_pool3d", bpcc_k_adaptive_max_pool3d},
    {'f', "torch.nn.functional.interpolate", bpcc_k_interpolate}, {'f', "torch.nn.functional.upsample", bpcc_k_interpolate},
    {'f', "torch.matmul", bpcc_k_matmul}, {'f', "operator.matmul", bpcc_k_matmul}, {'f', "torch.bmm", bpcc_k_matmul},
    {'f', "torch.quantize_per_tensor", k_quantize_per_tensor},
    {'f', "torch.quantize_per_channel", k_quantize_per_channel}, {'f', "torch.dequantize", k_dequantize},
    {'t', "dequantize", k_dequantize}, {'t', "expand", k_expand}, {'f', "torchvision.ops.stochastic_depth", k_stochastic_depth},
    {'m', "torchvision.ops.StochasticDepth", k_dropout},
    {'t', "relu", k_relu}, {'t', "relu_", k_relu}, {'t', "sigmoid", k_sigmoid}, {'t', "tanh", k_tanh},
    {'t', "hardsigmoid", k_hardsigmoid}, {'t', "softmax", k_softmax}, {'t', "clamp", k_clamp},
    {'t', "add", k_add}, {'t', "add_", k_add}, {'t', "sub", k_sub}, {'t', "mul", k_mul}, {'t', "mul_", k_mul},
    {'t', "div", k_div}, {'t', "__rsub__", k_rsub},
    {'t', "view", k_view}, {'t', "reshape", k_view}, {'t', "flatten", k_flatten}, {'t', "permute", k_permute},
    {'t', "transpose", k_transpose}, {'t', "contiguous", k_contiguous}, {'t', "unsqueeze", k_unsqueeze},
    {'t', "squeeze", k_squeeze}, {'t', "size", k_size}, {'t', "mean", k_mean}, {'t', "sum", k_sum},
    {'t', "matmul", bpcc_k_matmul}, {'t', "exp", k_exp}, {'t', "sqrt", k_sqrt},
    {'f', "torch.chunk", k_chunk}, {'t', "chunk", k_chunk}, {'f', "torch.split", k_split}, {'t', "split", k_split},
    {'f', "torch.unbind", k_unbind}, {'t', "unbind", k_unbind},
    {'m', "torch.nn.PixelShuffle", k_pixel_shuffle}, {'f', "torch.nn.functional.pixel_shuffle", k_pixel_shuffle},
    {'f', "torch.pixel_shuffle", k_pixel_shuffle}, {'m', "torch.nn.PixelUnshuffle", k_pixel_unshuffle},
    {'f', "torch.nn.functional.pixel_unshuffle", k_pixel_unshuffle}, {'f', "torch.pixel_unshuffle", k_pixel_unshuffle},
    {'f', "torch.nn.functional.pad", k_pad}, {'m', "torch.nn.ZeroPad2d", k_pad_module},
    {'m', "torch.nn.ConstantPad1d", k_pad_module}, {'m', "torch.nn.ConstantPad2d", k_pad_module},
    {'m', "torch.nn.ConstantPad3d", k_pad_module}, {'m', "torch.nn.ReflectionPad1d", k_pad_module},
    {'m', "torch.nn.ReflectionPad2d", k_pad_module}, {'m', "torch.nn.ReflectionPad3d", k_pad_module},
    {'m', "torch.nn.ReplicationPad1d", k_pad_module}, {'m', "torch.nn.ReplicationPad2d", k_pad_module},
    {'m', "torch.nn.ReplicationPad3d", k_pad_module},
    {'m', "torch.nn.GroupNorm", bpcc_k_group_norm}, {'f', "torch.nn.functional.group_norm", bpcc_k_group_norm},
    {'m', "torch.nn.InstanceNorm1d", bpcc_k_instance_norm}, {'m', "torch.nn.InstanceNorm2d", bpcc_k_instance_norm},
    {'m', "torch.nn.InstanceNorm3d", bpcc_k_instance_norm},
    {'t', "repeat", k_repeat}, {'f', "torch.amax", k_amax}, {'t', "amax", k_amax}, {'f', "torch.amin", k_amin}, {'t', "amin", k_amin},
    {'f', "torch.var", k_var}, {'t', "var", k_var}, {'f', "torch.std", k_std}, {'t', "std", k_std},
    {'f', "torch.abs", k_abs}, {'f', "abs", k_abs}, {'t', "abs", k_abs}, {'f', "torch.log", k_log}, {'t', "log", k_log},
    {'m', "torch.nn.Softplus", k_softplus}, {'f', "torch.nn.functional.softplus", k_softplus},
    {'m', "torch.nn.Mish", k_mish}, {'f', "torch.nn.functional.mish", k_mish},
    {'m', "torch.nn.PReLU", bpcc_k_prelu}, {'f', "torch.nn.functional.prelu", bpcc_k_prelu}, {'f', "torch.prelu", bpcc_k_prelu},
    {'f', "operator.pow", k_pow}, {'f', "torch.pow", k_pow}, {'t', "pow", k_pow},
    {'m', "torch.nn.LogSoftmax", k_log_softmax}, {'f', "torch.nn.functional.log_softmax", k_log_softmax},
    {'f', "torch.log_softmax", k_log_softmax}, {'t', "log_softmax", k_log_softmax},
    /* elementwise */
    {'f', "torch.special.expit", k_sigmoid}, {'f', "torch.erf", k_erf}, {'t', "erf", k_erf}, {'f', "torch.special.erf", k_erf},
    {'f', "torch.floor", k_floor}, {'t', "floor", k_floor}, {'f', "math.floor", k_floor},
    {'f', "torch.ceil", k_ceil}, {'t', "ceil", k_ceil}, {'f', "torch.round", k_round}, {'t', "round", k_round},
    {'f', "torch.trunc", k_trunc}, {'t', "trunc", k_trunc}, {'f', "torch.sign", k_sign}, {'t', "sign", k_sign},
    {'f', "torch.sin", k_sin}, {'t', "sin", k_sin}, {'f', "torch.cos", k_cos}, {'t', "cos", k_cos},
    {'f', "torch.log1p", k_log1p}, {'t', "log1p", k_log1p}, {'f', "torch.expm1", k_expm1}, {'t', "expm1", k_expm1},
    {'f', "torch.log2", k_log2}, {'t', "log2", k_log2}, {'f', "torch.log10", k_log10}, {'t', "log10", k_log10},
    {'f', "torch.exp2", k_exp2}, {'t', "exp2", k_exp2},
    {'f', "torch.square", k_square}, {'t', "square", k_square},
    {'m', "torch.nn.SELU", k_selu}, {'f', "torch.nn.functional.selu", k_selu}, {'f', "torch.selu", k_selu},
    {'m', "torch.nn.CELU", k_celu}, {'f', "torch.nn.functional.celu", k_celu}, {'f', "torch.celu", k_celu},
    {'m', "torch.nn.Softsign", k_softsign}, {'f', "torch.nn.functional.softsign", k_softsign},
    {'m', "torch.nn.Hardshrink", k_hardshrink}, {'f', "torch.nn.functional.hardshrink", k_hardshrink},
    {'t', "hardshrink", k_hardshrink}, {'m', "torch.nn.Softshrink", k_softshrink},
    {'f', "torch.nn.functional.softshrink", k_softshrink},
    {'m', "torch.nn.Tanhshrink", k_tanhshrink}, {'f', "torch.nn.functional.tanhshrink", k_tanhshrink},
    {'m', "torch.nn.LogSigmoid", k_logsigmoid}, {'f', "torch.nn.functional.logsigmoid", k_logsigmoid},
    {'m', "torch.nn.GLU", k_glu}, {'f', "torch.nn.functional.glu", k_glu},
    {'m', "torch.nn.Softmin", k_softmin}, {'f', "torch.nn.functional.softmin", k_softmin},
    {'m', "torch.nn.Softmax2d", k_softmax2d},
    {'f', "torch.clamp_min", k_clamp_min}, {'t', "clamp_min", k_clamp_min}, {'f', "torch.clamp_max", k_clamp_max},
    {'t', "clamp_max", k_clamp_max}, {'f', "torch.clip", k_clamp}, {'t', "clip", k_clamp}, {'t', "clamp_", k_clamp},
    {'f', "torch.maximum", k_maximum}, {'t', "maximum", k_maximum}, {'f', "torch.minimum", k_minimum},
    {'t', "minimum", k_minimum},
    /* comparisons, logic and selection */
    {'f', "operator.gt", k_gt}, {'f', "torch.gt", k_gt}, {'t', "gt", k_gt}, {'f', "operator.lt", k_lt}, {'f', "torch.lt", k_lt},
    {'t', "lt", k_lt}, {'f', "operator.ge", k_ge}, {'f', "torch.ge", k_ge}, {'t', "ge", k_ge}, {'f', "operator.le", k_le},
    {'f', "torch.le", k_le}, {'t', "le", k_le}, {'f', "operator.eq", k_eq}, {'f', "torch.eq", k_eq}, {'t', "eq", k_eq},
    {'f', "operator.ne", k_ne}, {'f', "torch.ne", k_ne}, {'t', "ne", k_ne},
    {'f', "operator.and_", k_and}, {'f', "torch.logical_and", k_and}, {'t', "logical_and", k_and},
    {'f', "operator.or_", k_or}, {'f', "torch.logical_or", k_or}, {'t', "logical_or", k_or},
    {'f', "operator.xor", k_xor}, {'f', "torch.logical_xor", k_xor}, {'t', "logical_xor", k_xor}, {'t', "__xor__", k_xor},
    {'t', "__and__", k_and}, {'t', "__or__", k_or}, {'t', "__invert__", k_invert}, {'t', "bitwise_not", k_invert},
    {'f', "operator.invert", k_invert}, {'f', "torch.logical_not", k_logical_not}, {'t', "logical_not", k_logical_not},
    {'f', "torch.where", k_where}, {'t', "where", k_where},
    {'f', "torch.masked_fill", k_masked_fill}, {'t', "masked_fill", k_masked_fill}, {'t', "masked_fill_", k_masked_fill},
    /* reductions */
    {'f', "torch.max", k_max}, {'t', "max", k_max}, {'f', "torch.min", k_min}, {'t', "min", k_min},
    {'f', "torch.argmax", k_argmax}, {'t', "argmax", k_argmax}, {'f', "torch.argmin", k_argmin}, {'t', "argmin", k_argmin},
    {'f', "torch.cumsum", k_cumsum}, {'t', "cumsum", k_cumsum}, {'f', "torch.prod", k_prod}, {'t', "prod", k_prod},
    {'f', "torch.norm", k_norm}, {'t', "norm", k_norm}, {'f', "torch.linalg.norm", k_linalg_norm},
    {'f', "torch.linalg.vector_norm", k_linalg_norm}, {'f', "torch.nn.functional.normalize", k_normalize},
    /* shapes */
    {'f', "torch.narrow", k_narrow}, {'t', "narrow", k_narrow}, {'f', "torch.select", k_select}, {'t', "select", k_select},
    {'t', "view_as", k_view_as}, {'t', "reshape_as", k_view_as}, {'t', "expand_as", k_expand_as},
    {'f', "torch.unflatten", k_unflatten}, {'t', "unflatten", k_unflatten}, {'m', "torch.nn.Unflatten", k_unflatten},
    {'f', "torch.swapaxes", k_transpose}, {'t', "swapaxes", k_transpose}, {'f', "torch.swapdims", k_transpose},
    {'t', "swapdims", k_transpose}, {'f', "torch.movedim", k_movedim}, {'t', "movedim", k_movedim},
    {'f', "torch.moveaxis", k_movedim}, {'t', "moveaxis", k_movedim},
    {'f', "torch.flip", k_flip}, {'t', "flip", k_flip}, {'f', "torch.roll", k_roll}, {'t', "roll", k_roll},
    {'f', "torch.tile", k_tile}, {'t', "tile", k_tile},
    {'f', "torch.repeat_interleave", k_repeat_interleave}, {'t', "repeat_interleave", k_repeat_interleave},
    /* creation and casts */
    {'f', "torch.zeros_like", k_zeros_like}, {'f', "torch.ones_like", k_ones_like}, {'f', "torch.full_like", k_full_like},
    {'t', "new_zeros", k_new_zeros}, {'t', "new_ones", k_new_ones}, {'t', "new_full", k_new_full},
    {'t', "float", k_float}, {'t', "bool", k_bool}, {'t', "long", k_long}, {'t', "int", k_long}, {'t', "to", k_to},
    {'t', "type_as", k_type_as}, {'t', "clone", k_contiguous}, {'f', "torch.clone", k_contiguous},
    {'t', "detach", k_contiguous}, {'f', "torch.detach", k_contiguous},
    /* linear algebra */
    {'f', "torch.addmm", bpcc_k_addmm}, {'t', "addmm", bpcc_k_addmm}, {'f', "torch.baddbmm", bpcc_k_addmm},
    {'t', "baddbmm", bpcc_k_addmm}, {'f', "torch.einsum", k_einsum}, {'t', "bmm", bpcc_k_matmul},
    {'f', "torch.linalg.matmul", bpcc_k_matmul},
    /* layers of models beyond torchvision */
    {'m', "torch.nn.Embedding", bpcc_k_embedding}, {'f', "torch.nn.functional.embedding", bpcc_k_embedding},
    {'m', "torch.nn.LPPool1d", bpcc_k_lp_pool1d}, {'f', "torch.nn.functional.lp_pool1d", bpcc_k_lp_pool1d},
    {'m', "torch.nn.LPPool2d", bpcc_k_lp_pool2d}, {'f', "torch.nn.functional.lp_pool2d", bpcc_k_lp_pool2d},
    {'m', "torch.nn.LocalResponseNorm", bpcc_k_local_response_norm},
    {'f', "torch.nn.functional.local_response_norm", bpcc_k_local_response_norm},
    {'m', "torch.nn.MultiheadAttention", bpcc_k_multihead_attention},
    {'m', "torch.nn.TransformerEncoderLayer", bpcc_k_transformer_encoder_layer},
    {'m', "torch.nn.TransformerEncoder", bpcc_k_transformer_encoder},
    {'m', "torch.nn.LSTM", bpcc_k_recurrent}, {'m', "torch.nn.GRU", bpcc_k_recurrent},
};

bool bpcc_exec_kernel_takes_quantized(xkernel k) { return k == k_dequantize || k == k_size || k == k_getattr; }

/* The table's index: open addressing on the op's hash with its kind, a slot holding the entry's
** position + 1 (0 = empty). The interpreter asks once per node per run; scanning the table took
** ~100 string compares a node (a third of calibration's instructions on graphs of small tensors).
** Built when the library is loaded, so that threads only ever read it. */
#define KINDEX_SLOTS 1024u
_Static_assert(sizeof table / sizeof *table < KINDEX_SLOTS / 2, "the kernel index must stay at most half full");
static uint16_t kindex[KINDEX_SLOTS];

static uint32_t khash(char kind, const char *op) { return bpcc_str_hash(op, strlen(op)) * 31u + (uint32_t)kind; }

__attribute__((constructor)) static void kindex_init(void)
{
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        uint32_t h = khash(table[i].kind, table[i].op) & (KINDEX_SLOTS - 1);
        while (kindex[h]) h = (h + 1) & (KINDEX_SLOTS - 1);
        kindex[h] = (uint16_t)(i + 1);
    }
}

xkernel bpcc_exec_kernel(enum bpcc_node_kind kind, const char *op)
{
    char k = kind == BPCC_NODE_CALL_MODULE ? 'm' : kind == BPCC_NODE_CALL_FUNCTION ? 'f' : 't';
    for (uint32_t h = khash(k, op) & (KINDEX_SLOTS - 1); kindex[h]; h = (h + 1) & (KINDEX_SLOTS - 1)) {
        const struct kentry *e = &table[kindex[h] - 1];
        if (e->kind == k && !strcmp(e->op, op)) return e->fn;
    }
    return NULL;
}

/* }================================================ */
