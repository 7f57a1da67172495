/*
** resize.c — torch.nn.functional.interpolate and the Upsample modules over 1, 2 or 3 spatial
** dimensions: nearest, nearest-exact, linear / bilinear / trilinear, bicubic (2-d) and area, with
** PyTorch 1.13's rules (ATen's UpSample.h): the output size from `size`, or floor(input *
** scale_factor); the kernel's scale 1 / scale_factor where a scale factor was given and not
** recomputed, else input / output; linear and cubic modes' source positions in double from that
** float scale, their weights in float, their sums with the fused multiply-adds of PyTorch's AVX2
** kernels: bit-equal to them.
*/
#include "exec.h"

#include <math.h>
#include <string.h>

enum rmode { R_NEAREST, R_NEAREST_EXACT, R_LINEAR, R_CUBIC, R_AREA };

#define MAX_EXTENT ((int64_t)1 << 24) /* an output dimension, even of an empty tensor (its index tables) */

/* where output index o reads along one dimension: i0, i1 with weights l0, l1 (nearest: i0 only) */
struct taps {
    int64_t *i0, *i1;
    float *l0, *l1;
};

/* compute_scales_value: 1 / scale_factor when one was given (and positive), else in / out */
static float scale_of(bool has_scale, double sf, int64_t in, int64_t out)
{
    return has_scale && sf > 0 ? (float)(1.0 / sf) : (float)in / (float)out;
}

static void nearest_taps(enum rmode m, int64_t in, int64_t out, bool has_scale, double sf, struct taps *t)
{
    float scale = scale_of(has_scale, sf, in, out);
    for (int64_t o = 0; o < out; o++) {
        int64_t s;
        if (m == R_NEAREST_EXACT) s = (int64_t)floorf((float)(((double)o + 0.5) * scale));
        else if (out == in) s = o; /* nearest_idx: exact for a scale of 1 and 2 */
        else if (out == 2 * in) s = o >> 1;
        else s = (int64_t)floorf((float)o * scale);
        t->i0[o] = s < in - 1 ? s : in - 1;
    }
}

/* compute_source_index_and_lambda */
static void linear_taps(int64_t in, int64_t out, bool align_corners, bool has_scale, double sf, struct taps *t)
{
    float scale = align_corners ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f) : scale_of(has_scale, sf, in, out);
    for (int64_t o = 0; o < out; o++) {
        if (out == in) {
            t->i0[o] = t->i1[o] = o;
            t->l0[o] = 1.0f;
            t->l1[o] = 0.0f;
            continue;
        }
        /* the source position in double from the float scale, its fraction rounded to float once:
        ** PyTorch's bits (rounding the position to float first moved some weights by an ulp) */
        double real = align_corners ? (double)scale * (double)o : (double)scale * ((double)o + 0.5) - 0.5;
        if (!align_corners && real < 0) real = 0;
        int64_t i0 = (int64_t)real;
        if (i0 > in - 1) i0 = in - 1; /* never reached by the formula; kept so that no rounding reads past the row */
        t->i0[o] = i0;
        t->i1[o] = i0 + (i0 < in - 1 ? 1 : 0);
        double frac = real - (double)i0;
        t->l1[o] = (float)(frac < 0 ? 0 : frac > 1 ? 1 : frac);
        t->l0[o] = 1.0f - t->l1[o];
    }
}

/* Linear interpolation is separable, and PyTorch's kernel (ATen's Interpolate<n>) weighs the two
** taps of the innermost dimension first, then those of the next one out: each pair a, b with
** weights l0, l1 as fma(a, l0, b * l1), its a * l0 + b * l1 as the compiler contracts it in PyTorch's
** AVX2 kernels. bpcc computes the same per output row: the innermost dimension's pairs for each
** source row the row needs (hrow), then the pairs of those rows (mix). Bit-equal with PyTorch; the
** plain sum of products differed in a third of the values of an 8x8 -> 64x64 upsampling by an ulp,
** enough to move a value on a quantize point's rounding boundary a step. Each is built twice: the
** AVX2+FMA build where the CPU has them, and the baseline one, whose fmaf calls give the same bits. */
static void hrow(const float *row, const struct taps *t, int64_t n, float *h)
{
    for (int64_t o = 0; o < n; o++) h[o] = fmaf(row[t->i0[o]], t->l0[o], row[t->i1[o]] * t->l1[o]);
}

static void mix(const float *a, const float *b, float l0, float l1, int64_t n, float *out)
{
    for (int64_t o = 0; o < n; o++) out[o] = fmaf(a[o], l0, b[o] * l1);
}

#ifdef BPCC_AVX2_CLONES
BPCC_HOT __attribute__((target("avx2,fma"))) static void hrow_fma(const float *row, const struct taps *t, int64_t n, float *h)
{
    for (int64_t o = 0; o < n; o++) h[o] = __builtin_fmaf(row[t->i0[o]], t->l0[o], row[t->i1[o]] * t->l1[o]);
}

BPCC_HOT __attribute__((target("avx2,fma"))) static void mix_fma(const float *a, const float *b, float l0, float l1, int64_t n,
                                                               float *out)
{
    for (int64_t o = 0; o < n; o++) out[o] = __builtin_fmaf(a[o], l0, b[o] * l1);
}
#endif

/* one plane p [in0, in1, in2] into q [on0, on1, on2] (dimensions before `first` of unit extent);
** buf holds 4 rows of on2 floats */
static void lerp_plane(const float *p, const int64_t in[3], const int64_t on[3], const struct taps t[3], int first,
                       float *buf, float *q)
{
    void (*h)(const float *, const struct taps *, int64_t, float *) = hrow;
    void (*mx)(const float *, const float *, float, float, int64_t, float *) = mix;
#ifdef BPCC_AVX2_CLONES
    if (bpcc_cpu_avx2()) {
        h = hrow_fma;
        mx = mix_fma;
    }
#endif
    const int64_t W = on[2];
    if (first == 2) { /* 1-d */
        h(p, &t[2], W, q);
        return;
    }
    float *r0 = buf, *r1 = buf + W, *z0 = buf + 2 * W, *z1 = buf + 3 * W;
    for (int64_t oz = 0; oz < on[0]; oz++)
        for (int64_t oy = 0; oy < on[1]; oy++, q += W) {
            /* the value of plane z at row oy: its two source rows' pairs, then theirs */
            for (int k = 0; k < (first == 0 ? 2 : 1); k++) {
                int64_t z = k ? t[0].i1[oz] : t[0].i0[oz];
                const float *pz = p + z * in[1] * in[2];
                h(pz + t[1].i0[oy] * in[2], &t[2], W, r0);
                h(pz + t[1].i1[oy] * in[2], &t[2], W, r1);
                mx(r0, r1, t[1].l0[oy], t[1].l1[oy], W, first == 0 ? (k ? z1 : z0) : q);
            }
            if (first == 0) mx(z0, z1, t[0].l0[oz], t[0].l1[oz], W, q);
        }
}

bool bpcc_resize_linear(const float *x, int64_t planes, int64_t in, int64_t out, float *y)
{
    int64_t *idx = bpcc_malloc((size_t)(out ? out : 1) * 2 * sizeof *idx);
    float *lam = bpcc_malloc((size_t)(out ? out : 1) * 2 * sizeof *lam);
    if (!idx || !lam) {
        bpcc_xfree(idx);
        bpcc_xfree(lam);
        return false;
    }
    struct taps t[3] = {[2] = {idx, idx + out, lam, lam + out}};
    linear_taps(in, out, false, false, 0.0, &t[2]);
    const int64_t n[3] = {1, 1, in}, on[3] = {1, 1, out};
    for (int64_t p = 0; p < planes; p++) lerp_plane(x + p * in, n, on, t, 2, NULL, y + p * out);
    bpcc_xfree(idx);
    bpcc_xfree(lam);
    return true;
}

/* Bicubic interpolation (2-d only, as in PyTorch), Keys' kernel with A = -0.75 over the 4 source
** indices around each output position (clamped to the edge). PyTorch 1.13's kernel (ATen's
** generic one with HelperInterpCubic) computes the position in double from the float scale, takes
** floorf of it as a float and the fraction t in double, rounded to float; its coefficients and sums
** come out of its AVX2 build with some multiply-adds fused and others not, and bpcc repeats the
** very operations (found against PyTorch on many shapes; every other choice differed in the last
** bit somewhere):
**   coefficient for |d| in [1, 2): fma(fma(A, x, -5A), x, 8A) * x - 4A,
**   coefficient for |d| < 1:       fma(A + 2, x, -(A + 3)) * x * x + 1,
**   a sum of 4 taps:               fma(v3, w3, fma(v2, w2, fma(v0, w0, v1 * w1))),
** the 4 taps of the width for each of 4 source rows, then the rows by the height's 4 taps. */
struct cubic_taps {
    int64_t *i[4];
    float *w[4];
};

static float cubic_far(float x) { return fmaf(fmaf(-0.75f, x, 3.75f), x, -6.0f) * x + 3.0f; }
static float cubic_near(float x) { return fmaf(1.25f, x, -2.25f) * x * x + 1.0f; }

static void cubic_taps(int64_t in, int64_t out, bool align_corners, bool has_scale, double sf, const struct cubic_taps *t)
{
    float scale = align_corners ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f) : scale_of(has_scale, sf, in, out);
    for (int64_t o = 0; o < out; o++) {
        double real = align_corners ? (double)scale * (double)o : (double)scale * ((double)o + 0.5) - 0.5;
        int64_t i0 = (int64_t)floorf((float)real);
        float f = (float)(real - (double)i0), g = 1.0f - f;
        float w[4] = {cubic_far(f + 1.0f), cubic_near(f), cubic_near(g), cubic_far(g + 1.0f)};
        for (int k = 0; k < 4; k++) {
            int64_t s = i0 - 1 + k;
            t->i[k][o] = s < 0 ? 0 : s > in - 1 ? in - 1 : s;
            t->w[k][o] = w[k];
        }
    }
}

/* h[o] = the 4 taps of row at output column o; out[o] = the 4 rows r[] weighed by w[] */
static void cubic_row(const float *row, const struct cubic_taps *t, int64_t n, float *h)
{
    for (int64_t o = 0; o < n; o++) {
        float v = fmaf(row[t->i[0][o]], t->w[0][o], row[t->i[1][o]] * t->w[1][o]);
        v = fmaf(row[t->i[2][o]], t->w[2][o], v);
        h[o] = fmaf(row[t->i[3][o]], t->w[3][o], v);
    }
}

static void cubic_mix(float *const r[4], const float w[4], int64_t n, float *out)
{
    for (int64_t o = 0; o < n; o++) out[o] = fmaf(r[3][o], w[3], fmaf(r[2][o], w[2], fmaf(r[0][o], w[0], r[1][o] * w[1])));
}

#ifdef BPCC_AVX2_CLONES
BPCC_HOT __attribute__((target("avx2,fma"))) static void cubic_row_fma(const float *row, const struct cubic_taps *t, int64_t n,
                                                                     float *h)
{
    for (int64_t o = 0; o < n; o++) {
        float v = __builtin_fmaf(row[t->i[0][o]], t->w[0][o], row[t->i[1][o]] * t->w[1][o]);
        v = __builtin_fmaf(row[t->i[2][o]], t->w[2][o], v);
        h[o] = __builtin_fmaf(row[t->i[3][o]], t->w[3][o], v);
    }
}

BPCC_HOT __attribute__((target("avx2,fma"))) static void cubic_mix_fma(float *const r[4], const float w[4], int64_t n, float *out)
{
    for (int64_t o = 0; o < n; o++)
        out[o] = __builtin_fmaf(r[3][o], w[3], __builtin_fmaf(r[2][o], w[2], __builtin_fmaf(r[0][o], w[0], r[1][o] * w[1])));
}
#endif

/* one [ih, iw] plane p into q [oh, ow]; buf holds 4 rows of ow floats */
static void cubic_plane(const float *p, int64_t iw, int64_t oh, int64_t ow, const struct cubic_taps *th,
                        const struct cubic_taps *tw, float *buf, float *q)
{
    void (*h)(const float *, const struct cubic_taps *, int64_t, float *) = cubic_row;
    void (*mx)(float *const[4], const float[4], int64_t, float *) = cubic_mix;
#ifdef BPCC_AVX2_CLONES
    if (bpcc_cpu_avx2()) {
        h = cubic_row_fma;
        mx = cubic_mix_fma;
    }
#endif
    float *r[4] = {buf, buf + ow, buf + 2 * ow, buf + 3 * ow};
    for (int64_t oy = 0; oy < oh; oy++, q += ow) {
        float w[4];
        for (int k = 0; k < 4; k++) {
            h(p + th->i[k][oy] * iw, tw, ow, r[k]);
            w[k] = th->w[k][oy];
        }
        mx(r, w, ow, q);
    }
}

/* size (1) or scale_factor (2) into out[] and sf[] for the r spatial dimensions */
static bool output_size(const struct xargs *a, const struct xtensor *x, int r, bool *has_scale, double sf[3],
                        int64_t out[3])
{
    const struct xval *sv = bpcc_xarg(a, 1, "size"), *fv = bpcc_xarg(a, 2, "scale_factor");
    bool has_size = sv && sv->k != XV_NONE;
    *has_scale = fv && fv->k != XV_NONE;
    if (has_size == *has_scale) {
        bpcc_xerr(a, has_size ? "only one of size and scale_factor may be given" : "size or scale_factor must be given");
        return false;
    }
    const int64_t *in = x->dims + 2;
    if (has_size) {
        uint32_t n;
        int64_t given[BPCC_MAX_DIMS];
        if (!bpcc_xarg_ints(a, 1, "size", 0, NULL, given, &n)) return false;
        if (sv->k != XV_INT && n != (uint32_t)r) {
            bpcc_xerr(a, "size has %u entries for %d spatial dimensions", n, r);
            return false;
        }
        for (int i = 0; i < r; i++) out[i] = given[sv->k == XV_INT ? 0 : i];
        return true;
    }
    for (int i = 0; i < r; i++) {
        const struct xval *v = fv->k == XV_SEQ ? (fv->u.seq.n == (uint32_t)r ? &fv->u.seq.items[i] : NULL) : fv;
        if (!v || (v->k != XV_FLOAT && v->k != XV_INT)) {
            bpcc_xerr(a, "scale_factor must be a number or %d numbers", r);
            return false;
        }
        sf[i] = v->k == XV_FLOAT ? v->u.f : (double)v->u.i;
        double o = floor((double)in[i] * sf[i]);
        if (!(o >= 0 && o <= (double)MAX_EXTENT)) {
            bpcc_xerr(a, "scale_factor %g gives an output size out of range", sf[i]);
            return false;
        }
        out[i] = (int64_t)o;
    }
    return true;
}

/* x [N, C, ih, iw] to [N, C, os[0], os[1]] */
static enum bpcc_status bicubic(const struct xargs *a, const struct xtensor *x, const int64_t os[2], bool align_corners,
                                bool has_scale, const double sf[2], struct xval *out)
{
    int64_t dims[4] = {x->dims[0], x->dims[1], os[0], os[1]};
    struct xtensor *y = bpcc_xtensor_new(4, dims);
    int64_t *idx = bpcc_malloc((size_t)(os[0] + os[1]) * 4 * sizeof *idx);
    float *wts = bpcc_malloc((size_t)(os[0] + os[1]) * 4 * sizeof *wts);
    float *rows = bpcc_malloc((size_t)os[1] * 4 * sizeof *rows);
    if (!y || !idx || !wts || !rows) {
        bpcc_xtensor_free(y);
        bpcc_xfree(idx);
        bpcc_xfree(wts);
        bpcc_xfree(rows);
        return bpcc_diag_nomem(a->d);
    }
    struct cubic_taps t[2];
    for (int64_t d = 0, at = 0; d < 2; at += os[d] * 4, d++) {
        for (int k = 0; k < 4; k++) {
            t[d].i[k] = idx + at + k * os[d];
            t[d].w[k] = wts + at + k * os[d];
        }
        cubic_taps(x->dims[2 + d], os[d], align_corners, has_scale, sf[d], &t[d]);
    }
    uint64_t planes = (uint64_t)(x->dims[0] * x->dims[1]), is = (uint64_t)(x->dims[2] * x->dims[3]);
    for (uint64_t c = 0; c < planes; c++)
        cubic_plane(x->data + c * is, x->dims[3], os[0], os[1], &t[0], &t[1], rows, y->data + c * (uint64_t)(os[0] * os[1]));
    bpcc_xfree(idx);
    bpcc_xfree(wts);
    bpcc_xfree(rows);
    return bpcc_xput(a, y, out);
}

static enum bpcc_status k_interpolate(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    int r = (int)x->ndim - 2;
    if (r < 1 || r > 3)
        return bpcc_xerr(a, "interpolation needs a 3-d, 4-d or 5-d input (batch, channels, spatial), not %u-d", x->ndim);
    const struct xval *mv = bpcc_xarg(a, 3, "mode");
    const char *mode = !mv || mv->k == XV_NONE ? "nearest" : mv->k == XV_STR ? mv->u.s : NULL;
    if (!mode) return bpcc_xerr(a, "mode must be a string");
    static const char *const linear[] = {"linear", "bilinear", "trilinear"};
    enum rmode m;
    if (!strcmp(mode, "nearest")) m = R_NEAREST;
    else if (!strcmp(mode, "nearest-exact")) m = R_NEAREST_EXACT;
    else if (!strcmp(mode, "area")) m = R_AREA;
    else if (!strcmp(mode, linear[r - 1])) m = R_LINEAR;
    else if (!strcmp(mode, "bicubic") && r == 2) m = R_CUBIC;
    else
        return bpcc_xerr(a, "mode '%s' on a %u-d input is not supported (nearest, nearest-exact, area, %s%s)", mode,
                         x->ndim, linear[r - 1], r == 2 ? ", bicubic" : "");
    const struct xval *av = bpcc_xarg(a, 4, "align_corners");
    bool align_corners = false, recompute = false, antialias = false;
    if (av && av->k != XV_NONE && m != R_LINEAR && m != R_CUBIC)
        return bpcc_xerr(a, "align_corners can only be set with the interpolating modes (linear, bilinear, bicubic, "
                            "trilinear)");
    if (!bpcc_xarg_bool(a, 4, "align_corners", false, &align_corners) ||
        !bpcc_xarg_bool(a, 5, "recompute_scale_factor", false, &recompute) ||
        !bpcc_xarg_bool(a, 6, "antialias", false, &antialias))
        return BPCC_ERR_GRAPH;
    if (antialias) return bpcc_xerr(a, "antialias=True is not supported");
    bool has_scale;
    double sf[3] = {0, 0, 0};
    int64_t os[3];
    if (!output_size(a, x, r, &has_scale, sf, os)) return BPCC_ERR_GRAPH;
    if (has_scale && recompute) has_scale = false; /* the kernel's scale from the sizes */
    for (int i = 0; i < r; i++) {
        if (os[i] < 1 || x->dims[2 + i] < 1) return bpcc_xerr(a, "input and output sizes must be greater than 0");
        if (os[i] > MAX_EXTENT) return bpcc_xerr(a, "output size %lld is too large", (long long)os[i]);
    }
    if (m == R_AREA) { /* adaptive average pooling to the output size */
        struct xval items[3], pos[2] = {{.k = XV_TENSOR, .u.t = (struct xtensor *)x}, {.k = XV_SEQ}};
        for (int i = 0; i < r; i++) items[i] = (struct xval){.k = XV_INT, .u.i = os[i]};
        pos[1].u.seq.n = (uint32_t)r;
        pos[1].u.seq.items = items;
        struct xargs pa = *a;
        pa.module = NULL;
        pa.pos = pos;
        pa.n = 2;
        pa.n_kw = 0;
        pa.consume = false;
        return (r == 1 ? bpcc_k_adaptive_avg_pool1d : r == 2 ? bpcc_k_adaptive_avg_pool2d : bpcc_k_adaptive_avg_pool3d)(&pa, out);
    }

    if (m == R_CUBIC) return bicubic(a, x, os, align_corners, has_scale, sf, out);

    /* dimensions 3-r .. 2 are the spatial ones; a unit extent before them */
    int64_t in[3], on[3], dims[5];
    for (int i = 0; i < 3; i++) {
        in[i] = i < 3 - r ? 1 : x->dims[2 + i - (3 - r)];
        on[i] = i < 3 - r ? 1 : os[i - (3 - r)];
    }
    memcpy(dims, x->dims, 2 * sizeof *dims);
    for (int i = 0; i < r; i++) dims[2 + i] = os[i];
    struct xtensor *y = bpcc_xtensor_new(x->ndim, dims);
    struct taps t[3];
    int64_t *idx = bpcc_malloc((size_t)(on[0] + on[1] + on[2]) * 2 * sizeof *idx);
    float *lam = bpcc_malloc((size_t)(on[0] + on[1] + on[2]) * 2 * sizeof *lam);
    float *rows = m == R_LINEAR ? bpcc_malloc((size_t)on[2] * 4 * sizeof *rows) : NULL;
    if (!y || !idx || !lam || (m == R_LINEAR && !rows)) {
        bpcc_xtensor_free(y);
        bpcc_xfree(idx);
        bpcc_xfree(lam);
        bpcc_xfree(rows);
        return bpcc_diag_nomem(a->d);
    }
    for (int64_t i = 0, at = 0; i < 3; at += on[i] * 2, i++) {
        t[i] = (struct taps){idx + at, idx + at + on[i], lam + at, lam + at + on[i]};
        bool spatial = i >= 3 - r;
        double f = spatial ? sf[i - (3 - r)] : 1.0;
        if (m == R_LINEAR && spatial) linear_taps(in[i], on[i], align_corners, has_scale, f, &t[i]);
        else nearest_taps(m, in[i], on[i], has_scale && spatial, f, &t[i]);
    }
    uint64_t planes = x->dims[0] * x->dims[1] > 0 ? (uint64_t)(x->dims[0] * x->dims[1]) : 0;
    uint64_t is = (uint64_t)(in[0] * in[1] * in[2]);
    float *q = y->data;
    uint64_t os_plane = (uint64_t)(on[0] * on[1] * on[2]);
    for (uint64_t c = 0; c < planes; c++) {
        const float *p = x->data + c * is;
        if (m == R_LINEAR) {
            lerp_plane(p, in, on, t, 3 - r, rows, q);
            q += os_plane;
            continue;
        }
        int64_t o[3];
        for (o[0] = 0; o[0] < on[0]; o[0]++)
            for (o[1] = 0; o[1] < on[1]; o[1]++)
                for (o[2] = 0; o[2] < on[2]; o[2]++)
                    *q++ = p[(t[0].i0[o[0]] * in[1] + t[1].i0[o[1]]) * in[2] + t[2].i0[o[2]]];
    }
    bpcc_xfree(idx);
    bpcc_xfree(lam);
    bpcc_xfree(rows);
    *out = (struct xval){.k = XV_TENSOR, .u.t = y};
    return BPCC_OK;
}

/* nn.Upsample, UpsamplingNearest2d, UpsamplingBilinear2d: interpolate with the module's size,
** scale_factor, mode, align_corners and recompute_scale_factor */
static enum bpcc_status k_upsample(const struct xargs *a, struct xval *out)
{
    static const char *const keys[] = {"size", "scale_factor", "mode", "align_corners", "recompute_scale_factor"};
    struct xval pos[6], items[5][3];
    if (a->n < 1) return bpcc_xerr(a, "an Upsample module takes one input");
    pos[0] = a->pos[0];
    for (int k = 0; k < 5; k++) {
        const struct bpcc_value *v = bpcc_module_attr(a->module, keys[k]);
        struct xval *x = &pos[1 + k];
        *x = (struct xval){.k = XV_NONE};
        if (!v || v->kind == BPCC_VAL_NONE) continue;
        const struct bpcc_value *one = v;
        if (v->kind == BPCC_VAL_TUPLE || v->kind == BPCC_VAL_LIST) {
            if (v->n > 3) return bpcc_xerr(a, "module attribute '%s' has more than 3 entries", keys[k]);
            x->k = XV_SEQ;
            x->u.seq.n = v->n;
            x->u.seq.items = items[k];
        }
        for (uint32_t i = 0; i < (x->k == XV_SEQ ? v->n : 1); i++) {
            struct xval *e = x->k == XV_SEQ ? &items[k][i] : x;
            if (x->k == XV_SEQ) one = &v->u.seq.items[i];
            switch (one->kind) {
            case BPCC_VAL_BOOL: *e = (struct xval){.k = XV_BOOL, .u.b = one->u.b}; break;
            case BPCC_VAL_INT: *e = (struct xval){.k = XV_INT, .u.i = one->u.i}; break;
            case BPCC_VAL_FLOAT: *e = (struct xval){.k = XV_FLOAT, .u.f = one->u.f}; break;
            case BPCC_VAL_STR: *e = (struct xval){.k = XV_STR, .u.s = one->u.s}; break;
            default: return bpcc_xerr(a, "module attribute '%s' is not a number, bool or string", keys[k]);
            }
        }
    }
    struct xargs fa = *a;
    fa.module = NULL;
    fa.pos = pos;
    fa.n = 6;
    fa.n_kw = 0;
    return k_interpolate(&fa, out);
}

/* {==================== grid_sample ==================== */

/* ATen's reflect_coordinates: x reflected into [twice_low / 2, twice_high / 2] */
static float reflect(float x, int64_t twice_low, int64_t twice_high)
{
    if (twice_low == twice_high) return 0.0f;
    float lo = (float)twice_low / 2, span = (float)(twice_high - twice_low) / 2;
    x = fabsf(x - lo);
    float extra = fmodf(x, span);
    int flips = (int)floorf(x / span);
    return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

/* a normalized grid coordinate to a source position along a dimension of `size`, with the padding
** mode's rule (0 zeros, 1 border, 2 reflection), as ATen's grid_sampler_compute_source_index */
static float source_index(float c, int64_t size, int pad, bool corners)
{
    c = corners ? (c + 1) / 2 * (float)(size - 1) : ((c + 1) * (float)size - 1) / 2;
    if (pad == 2) c = corners ? reflect(c, 0, 2 * (size - 1)) : reflect(c, -1, 2 * size - 1);
    if (pad >= 1) c = isnan(c) ? c : fminf(fmaxf(c, 0.0f), (float)(size - 1)); /* clip (NaN stays, and reads nothing) */
    return c;
}

/* grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None): [N, C, H, W]
** sampled at grid [N, Ho, Wo, 2]'s (x, y) in [-1, 1], bilinear or nearest (halves to even); zeros,
** border or reflection padding; align_corners False unless given. Bicubic and 3-d are refused. */
static enum bpcc_status k_grid_sample(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *g;
    const char *mode = "bilinear", *padding = "zeros";
    bool corners;
    const struct xval *mv = bpcc_xarg(a, 2, "mode"), *pv = bpcc_xarg(a, 3, "padding_mode");
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "grid", &g) ||
        !bpcc_xarg_bool(a, 4, "align_corners", false, &corners))
        return BPCC_ERR_GRAPH;
    if (mv && mv->k == XV_STR) mode = mv->u.s;
    if (pv && pv->k == XV_STR) padding = pv->u.s;
    bool bilinear = !strcmp(mode, "bilinear");
    int pad = !strcmp(padding, "zeros") ? 0 : !strcmp(padding, "border") ? 1 : !strcmp(padding, "reflection") ? 2 : -1;
    if (!bilinear && strcmp(mode, "nearest")) return bpcc_xerr(a, "grid_sample's mode '%s' is not supported (bilinear, nearest)", mode);
    if (pad < 0) return bpcc_xerr(a, "grid_sample's padding_mode '%s' is none of zeros, border, reflection", padding);
    if (x->ndim != 4) return bpcc_xerr(a, "grid_sample takes a 4-d input here, not %u-d", x->ndim);
    if (g->ndim != 4 || g->dims[0] != x->dims[0] || g->dims[3] != 2)
        return bpcc_xerr(a, "the grid must be [%lld, H_out, W_out, 2]", (long long)x->dims[0]);
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], Ho = g->dims[1], Wo = g->dims[2];
    struct xtensor *y = bpcc_xtensor_new(4, (int64_t[]){N, C, Ho, Wo});
    if (!y) return bpcc_diag_nomem(a->d);
    if (!y->numel) return bpcc_xput(a, y, out);
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = 0; p < Ho * Wo; p++) {
            float ix = source_index(g->data[(n * Ho * Wo + p) * 2], W, pad, corners);
            float iy = source_index(g->data[(n * Ho * Wo + p) * 2 + 1], H, pad, corners);
            for (int64_t c = 0; c < C; c++) {
                const float *img = x->data + (n * C + c) * H * W;
                float v = 0.0f;
                if (!bilinear) {
                    float rx = nearbyintf(ix), ry = nearbyintf(iy);
                    if (rx >= 0 && rx < (float)W && ry >= 0 && ry < (float)H) v = img[(int64_t)ry * W + (int64_t)rx];
                } else if (ix == ix && iy == iy && fabsf(ix) < 1e18f && fabsf(iy) < 1e18f) {
                    float fx = floorf(ix), fy = floorf(iy);
                    int64_t x0 = (int64_t)fx, y0 = (int64_t)fy;
                    float e = ix - fx, s = iy - fy; /* the weights: nw (1-e)(1-s), ne e(1-s), sw (1-e)s, se es */
                    float w[4] = {(1 - e) * (1 - s), e * (1 - s), (1 - e) * s, e * s};
                    for (int t = 0; t < 4; t++) {
                        int64_t xx = x0 + (t & 1), yy = y0 + (t >> 1);
                        if (xx >= 0 && xx < W && yy >= 0 && yy < H) v += img[yy * W + xx] * w[t];
                    }
                }
                y->data[((n * C + c) * Ho * Wo) + p] = v;
            }
        }
    return bpcc_xput(a, y, out);
}

/* }================================================ */

const struct xop bpcc_resize_ops[] = {
    {'m', "torch.nn.Upsample", k_upsample}, {'m', "torch.nn.UpsamplingNearest2d", k_upsample},
    {'m', "torch.nn.UpsamplingBilinear2d", k_upsample}, {'f', "torch.nn.functional.interpolate", k_interpolate},
    {'f', "torch.nn.functional.upsample", k_interpolate}, {'f', "torch.nn.functional.grid_sample", k_grid_sample},
    {0}
};
