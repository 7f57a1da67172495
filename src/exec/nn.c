/*
** nn.c — the interpreter's layers: convolution (im2col + OpenBLAS sgemm), linear and matmul
** (sgemm), batch and layer norm, max / average / adaptive pooling. Module calls read weights
** and hyperparameters from the module; functional calls from their arguments.
*/
#include "exec.h"

#include <cblas.h>
#include <math.h>

/* A parameter tensor: from the module (name) or from argument i / kwarg name. NULL if absent. */
static bool param(const struct xargs *a, uint32_t i, const char *name, const float **data, uint32_t *ndim,
                  const int64_t **dims, bool required)
{
    *data = NULL;
    if (a->module && a->weight_override && !strcmp(name, "weight")) {
        const struct bpcc_tensor *t = bpcc_module_tensor(a->module, name);
        *data = a->weight_override;
        *ndim = t->ndim;
        *dims = t->dims;
        return true;
    }
    if (a->module) {
        const struct bpcc_tensor *t = bpcc_module_tensor(a->module, name);
        if (t) {
            if (t->dtype != BPCC_DTYPE_F32 || !t->data) {
                bpcc_xerr(a, "%s.%s is not a float32 tensor with data", a->module->name, name);
                return false;
            }
            *data = t->data;
            *ndim = t->ndim;
            *dims = t->dims;
        }
    } else {
        const struct xval *v = bpcc_xarg(a, i, name);
        if (v && v->k == XV_TENSOR) {
            *data = v->u.t->data;
            *ndim = v->u.t->ndim;
            *dims = v->u.t->dims;
        } else if (v && v->k != XV_NONE) {
            bpcc_xerr(a, "argument %s must be a tensor", name);
            return false;
        }
    }
    if (!*data && required) {
        bpcc_xerr(a, "missing %s", name);
        return false;
    }
    return true;
}

/* param() for a tensor read element by element against the input (per channel, per normalized
** element): it must hold want elements, or reads would run past it */
static bool param_n(const struct xargs *a, uint32_t i, const char *name, const float **data, int64_t want, bool required)
{
    uint32_t nd = 0; /* set with *data; gcc -O3 cannot see that */
    const int64_t *dd = NULL;
    if (!param(a, i, name, data, &nd, &dd, required)) return false;
    if (!*data) return true;
    int64_t n = 1;
    for (uint32_t k = 0; k < nd; k++) n *= dd[k];
    if (n == want) return true;
    bpcc_xerr(a, "%s has %lld elements; the input needs %lld", name, (long long)n, (long long)want);
    return false;
}

static void set_threads(const struct xargs *a) { bpcc_blas_set_threads(bpcc_exec_threads(a->ctx)); }

/* {==================== convolution ==================== */

static enum bpcc_status conv3d(const struct xargs *a, const struct xtensor *x, const float *w, const int64_t *wd,
                               const float *b, struct xval *out);

/* The im2col block, in floats (2 MiB): OpenBLAS packs the block right after it is written, while
** it is still in cache. Of 256 KiB to 2 MiB and no blocking, 2 MiB ran fastest on resnet18, resnet50
** and densenet121 here (5-15 % over no blocking; bench/calibrate_bench.py). */
#define COL_BLOCK ((int64_t)1 << 19)

/* the geometry of a 2-d (or 1-d, H = KH = 1) convolution's unfolding */
struct im2col {
    int64_t Cg, H, W, KH, KW, OW, sh, sw, ph, pw, dh, dw;
    int mode;
};

/* unfold output rows [oy0, oy0 + nr) of the image in [Cg, H, W] into col [Cg KH KW, nr OW] */
BPCC_HOT static void im2col_rows(const struct im2col *q, const float *in, int64_t oy0, int64_t nr, float *restrict col)
{
    int64_t H = q->H, W = q->W, OW = q->OW, pb = nr * OW, sw = q->sw;
    for (int64_t c = 0; c < q->Cg; c++)
        for (int64_t ky = 0; ky < q->KH; ky++)
            for (int64_t kx = 0; kx < q->KW; kx++) {
                float *row = col + ((c * q->KH + ky) * q->KW + kx) * pb;
                const float *img = in + c * H * W;
                /* the output columns whose input column lies inside [0, W) */
                int64_t x0 = kx * q->dw - q->pw, lo = 0, hi = OW;
                while (lo < OW && x0 + lo * sw < 0) lo++;
                while (hi > lo && x0 + (hi - 1) * sw >= W) hi--;
                for (int64_t i = 0; i < nr; i++) {
                    int64_t iy = (oy0 + i) * q->sh - q->ph + ky * q->dh;
                    float *r = row + i * OW;
                    if (q->mode) {
                        for (int64_t ox = 0; ox < OW; ox++) r[ox] = bpcc_pad_at(img, H, W, iy, x0 + ox * sw, q->mode);
                        continue;
                    }
                    if (iy < 0 || iy >= H) {
                        memset(r, 0, (size_t)OW * sizeof *r);
                        continue;
                    }
                    const float *line = img + iy * W;
                    for (int64_t ox = 0; ox < lo; ox++) r[ox] = 0.0f;
                    const float *src = line + x0 + lo * sw; /* the first column inside */
                    float *dst = r + lo;
                    int64_t m = hi - lo;
                    if (sw == 1) memcpy(dst, src, (size_t)m * sizeof *r);
                    else if (sw == 2)
                        for (int64_t i = 0; i < m; i++) dst[i] = src[2 * i];
                    else
                        for (int64_t i = 0; i < m; i++) dst[i] = src[i * sw];
                    for (int64_t ox = hi; ox < OW; ox++) r[ox] = 0.0f;
                }
            }
}

/* Whether a 3x3 convolution at stride 1 runs faster by Winograd (winograd.c) than by im2col: it
** needs 16 channels or more in and out per group (fewer, and the transforms cost more than the
** multiplications saved) and 40 output tiles of 2 x 2 or more over the batch (the GEMMs take the
** images' tiles together; one 7 x 7 output has 16: each GEMM then repacks the transformed weights,
** 16/9 the size of the kernels, for too few columns). Measured on resnet18, resnet50 and
** densenet121 at one thread with one image: 40 tiles beat 16, 64 and 100. */
static bool winograd_pays(int64_t N, int64_t Cg, int64_t Cog, int64_t OH, int64_t OW)
{
    return Cg >= 16 && Cog >= 16 && N * ((OH + 1) / 2) * ((OW + 1) / 2) >= 40;
}

/* Whether n floats are all finite. Winograd's transforms subtract inputs from each other, so an
** infinity gives NaN where the direct sum gives the infinity: such inputs and weights take im2col. */
BPCC_HOT __attribute__((noinline)) static bool all_finite(const float *v, uint64_t n)
{
    /* an all-ones exponent (inf or NaN) carries into bit 31 when one more is added to it; bit
    ** operations only, so that the loop vectorizes */
    uint32_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, v + i, sizeof u);
        bad |= (u & 0x7f800000u) + 0x00800000u;
    }
    return !(bad & 0x80000000u);
}

BPCC_HOT static enum bpcc_status k_conv(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    const float *w, *b;
    uint32_t wnd, bnd;
    const int64_t *wd, *bd;
    if (!param(a, 1, "weight", &w, &wnd, &wd, true) || !param(a, 2, "bias", &b, &bnd, &bd, false)) return BPCC_ERR_GRAPH;
    uint32_t sd = wnd - 2; /* spatial dims of the kernel */
    if (wnd == 5) return conv3d(a, x, w, wd, b, out);
    if (wnd < 3 || wnd > 4) return bpcc_xerr(a, "only 1-d, 2-d and 3-d convolutions are supported (weight has %u dims)", wnd);
    if (x->ndim != wnd && x->ndim != wnd - 1) return bpcc_xerr(a, "input has %u dims for a %u-d convolution", x->ndim, sd);
    for (uint32_t i = 0; i < wnd; i++)
        if (wd[i] < 1) return bpcc_xerr(a, "the weight has a zero-size dimension (%u)", i);
    int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    int64_t stride[2], pad[2], dil[2], groups;
    int mode = 0;
    if (a->module) {
        if (!bpcc_mattr_ints(a, "stride", sd, one, stride) || !bpcc_mattr_ints(a, "dilation", sd, one, dil)) return BPCC_ERR_GRAPH;
        const struct bpcc_value *pv = bpcc_module_attr(a->module, "padding");
        if (pv && pv->kind == BPCC_VAL_STR) {
            if (!strcmp(pv->u.s, "valid")) pad[0] = pad[1] = 0;
            else if (!strcmp(pv->u.s, "same")) {
                for (uint32_t i = 0; i < sd; i++) {
                    int64_t k = wd[2 + i], total = dil[i] * (k - 1);
                    if (total % 2) return bpcc_xerr(a, "padding='same' with an even total padding is not supported");
                    pad[i] = total / 2;
                }
            } else return bpcc_xerr(a, "unknown padding '%s'", pv->u.s);
        } else if (!bpcc_mattr_ints(a, "padding", sd, zero, pad)) {
            return BPCC_ERR_GRAPH;
        }
        const struct bpcc_value *gv = bpcc_module_attr(a->module, "groups");
        groups = gv && gv->kind == BPCC_VAL_INT ? gv->u.i : 1;
        const struct bpcc_value *mv = bpcc_module_attr(a->module, "padding_mode");
        if (mv && mv->kind == BPCC_VAL_STR) {
            static const char *const modes[] = {"zeros", "reflect", "replicate", "circular"};
            for (mode = 0; mode < 4 && strcmp(mv->u.s, modes[mode]); mode++) {}
            if (mode == 4) return bpcc_xerr(a, "unknown padding_mode '%s'", mv->u.s);
        }
    } else {
        if (!bpcc_xarg_ints(a, 3, "stride", sd, one, stride, NULL) || !bpcc_xarg_ints(a, 4, "padding", sd, zero, pad, NULL) ||
            !bpcc_xarg_ints(a, 5, "dilation", sd, one, dil, NULL) || !bpcc_xarg_int(a, 6, "groups", 1, &groups))
            return BPCC_ERR_GRAPH;
    }
    bool batched = x->ndim == wnd;
    int64_t N = batched ? x->dims[0] : 1, C = x->dims[batched ? 1 : 0];
    int64_t H = sd == 2 ? x->dims[x->ndim - 2] : 1, W = x->dims[x->ndim - 1];
    int64_t Cout = wd[0], Cg = wd[1], KH = sd == 2 ? wd[2] : 1, KW = wd[wnd - 1];
    int64_t sh = sd == 2 ? stride[0] : 1, sw = stride[sd - 1], ph = sd == 2 ? pad[0] : 0, pw = pad[sd - 1];
    int64_t dh = sd == 2 ? dil[0] : 1, dw = dil[sd - 1];
    if (groups < 1 || C != Cg * groups || Cout % groups)
        return bpcc_xerr(a, "input has %lld channels, the weight expects %lld x %lld groups", (long long)C, (long long)Cg,
                         (long long)groups);
    if (sh < 1 || sw < 1 || dh < 1 || dw < 1 || ph < 0 || pw < 0) return bpcc_xerr(a, "invalid stride, dilation or padding");
    int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
    if (OH < 1 || OW < 1) return bpcc_xerr(a, "the input is smaller than the kernel");
    /* torch's own limits for these modes (F.pad); reflect reads inside the image only */
    if ((mode == 1 && (ph >= H || pw >= W)) || (mode == 3 && (ph > H || pw > W)))
        return bpcc_xerr(a, "padding (%lld, %lld) is too large for %s padding of a %lld x %lld input", (long long)ph,
                         (long long)pw, mode == 1 ? "reflect" : "circular", (long long)H, (long long)W);
    if (b && (bnd != 1 || bd[0] != Cout)) return bpcc_xerr(a, "bias has the wrong shape");
    int64_t odims[BPCC_MAX_DIMS];
    uint32_t ond = 0;
    if (batched) odims[ond++] = N;
    odims[ond++] = Cout;
    if (sd == 2) odims[ond++] = OH;
    odims[ond++] = OW;
    struct xtensor *y = bpcc_xtensor_new(ond, odims);
    if (!y) return bpcc_diag_nomem(a->d);
    /* the window geometry, for the depthwise and Winograd kernels */
    struct bpcc_window p = {H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, mode, 0.0f};
    if (Cg == 1 && groups > 1) {
        if (!bpcc_dwconv(&p, N, C, Cout, x->data, w, b, y->data)) {
            bpcc_xtensor_free(y);
            return bpcc_diag_nomem(a->d);
        }
        return bpcc_xput(a, y, out);
    }
    int64_t K = Cg * KH * KW, P = OH * OW, Cog = Cout / groups;
    /* Winograd from a module's second run on, with its transformed weights kept from then on: a
    ** single run (bpcc quantize with one batch) would spend more on transforming the weights than
    ** it saves */
    bool ran_before = false;
    float *U = sd == 2 && KH == 3 && KW == 3 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && winograd_pays(N, Cg, Cog, OH, OW)
                   ? bpcc_exec_derived(a, w, &ran_before)
                   : NULL;
    if ((U || ran_before) && all_finite(x->data, x->numel) && (U || all_finite(w, (uint64_t)(Cout * Cg * 9)))) {
        float *made = NULL;
        if (!U && (made = U = bpcc_malloc(bpcc_winograd3x3_size(groups, C, Cout) * sizeof(float))) &&
            !bpcc_winograd3x3_weights(groups, C, Cout, w, U))
            U = NULL;
        bool ok = U != NULL;
        if (ok) {
            set_threads(a);
            ok = bpcc_winograd3x3(&p, N, groups, C, Cout, x->data, U, b, y->data);
        }
        if (made && !(ok && bpcc_exec_keep_derived(a, w, made))) bpcc_xfree(made);
        if (!ok) {
            bpcc_xtensor_free(y);
            return bpcc_diag_nomem(a->d);
        }
        return bpcc_xput(a, y, out);
    }
    bool direct = KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
    /* the unfolded block: whole output rows, about COL_BLOCK floats (all of them if fewer) */
    int64_t rows = COL_BLOCK / (K * OW);
    rows = rows < 1 ? 1 : rows > OH ? OH : rows;
    struct im2col geo = {Cg, H, W, KH, KW, OW, sh, sw, ph, pw, dh, dw, mode};
    float *col = direct ? NULL : bpcc_malloc((size_t)(K * rows * OW) * sizeof(float));
    if (!direct && !col) {
        bpcc_xtensor_free(y);
        return bpcc_diag_nomem(a->d);
    }
    set_threads(a);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < groups; g++) {
            const float *in = x->data + (n * C + g * Cg) * H * W;
            float *dst = y->data + (n * Cout + g * Cog) * P;
            const float *wg = w + g * Cog * K;
            if (b)
                for (int64_t co = 0; co < Cog; co++) {
                    float bv = b[g * Cog + co];
                    for (int64_t p = 0; p < P; p++) dst[co * P + p] = bv;
                }
            float beta = b ? 1.0f : 0.0f;
            if (direct) {
                bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Cog, (int)P, (int)K, 1.0f, wg, (int)K, in,
                            (int)P, beta, dst, (int)P);
                continue;
            }
            /* output rows [oy0, oy0 + rows) at a time: their columns are unfolded and multiplied
            ** while they are still in cache */
            for (int64_t oy0 = 0; oy0 < OH; oy0 += rows) {
                int64_t nr = OH - oy0 < rows ? OH - oy0 : rows, pb = nr * OW;
                im2col_rows(&geo, in, oy0, nr, col);
                bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Cog, (int)pb, (int)K, 1.0f, wg, (int)K, col,
                            (int)pb, beta, dst + oy0 * OW, (int)P);
            }
        }
    bpcc_xfree(col);
    return bpcc_xput(a, y, out);
}

/* 3-d convolution: im2col over (kd, kh, kw) + sgemm per group (zeros padding) */
static enum bpcc_status conv3d(const struct xargs *a, const struct xtensor *x, const float *w, const int64_t *wd,
                               const float *b, struct xval *out)
{
    int64_t one[3] = {1, 1, 1}, zero[3] = {0, 0, 0}, st[3], pd[3], dl[3], groups = 1;
    if (a->module) {
        if (!bpcc_mattr_ints(a, "stride", 3, one, st) || !bpcc_mattr_ints(a, "padding", 3, zero, pd) ||
            !bpcc_mattr_ints(a, "dilation", 3, one, dl))
            return BPCC_ERR_GRAPH;
        const struct bpcc_value *gv = bpcc_module_attr(a->module, "groups");
        groups = gv && gv->kind == BPCC_VAL_INT ? gv->u.i : 1;
        const struct bpcc_value *mv = bpcc_module_attr(a->module, "padding_mode");
        if (mv && mv->kind == BPCC_VAL_STR && strcmp(mv->u.s, "zeros"))
            return bpcc_xerr(a, "3-d convolution supports only zeros padding");
    } else if (!bpcc_xarg_ints(a, 3, "stride", 3, one, st, NULL) || !bpcc_xarg_ints(a, 4, "padding", 3, zero, pd, NULL) ||
               !bpcc_xarg_ints(a, 5, "dilation", 3, one, dl, NULL) || !bpcc_xarg_int(a, 6, "groups", 1, &groups)) {
        return BPCC_ERR_GRAPH;
    }
    bool batched = x->ndim == 5;
    if (x->ndim != 5 && x->ndim != 4) return bpcc_xerr(a, "a 3-d convolution takes a 4-d or 5-d input");
    const int64_t *xd = x->dims + (batched ? 1 : 0);
    int64_t N = batched ? x->dims[0] : 1, C = xd[0], D = xd[1], H = xd[2], W = xd[3];
    int64_t Cout = wd[0], Cg = wd[1], K[3] = {wd[2], wd[3], wd[4]};
    if (groups < 1 || C != Cg * groups || Cout % groups) return bpcc_xerr(a, "channels do not match the weight and groups");
    int64_t O[3];
    int64_t in[3] = {D, H, W};
    for (int i = 0; i < 3; i++) {
        if (st[i] < 1 || dl[i] < 1 || pd[i] < 0) return bpcc_xerr(a, "invalid stride, dilation or padding");
        O[i] = (in[i] + 2 * pd[i] - dl[i] * (K[i] - 1) - 1) / st[i] + 1;
        if (O[i] < 1) return bpcc_xerr(a, "the input is smaller than the kernel");
    }
    int64_t odims[5], nd = 0;
    if (batched) odims[nd++] = N;
    odims[nd++] = Cout;
    for (int i = 0; i < 3; i++) odims[nd++] = O[i];
    struct xtensor *y = bpcc_xtensor_new((uint32_t)nd, odims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t Kn = Cg * K[0] * K[1] * K[2], P = O[0] * O[1] * O[2], Cog = Cout / groups;
    float *col = bpcc_malloc((size_t)(Kn * P) * sizeof(float));
    if (!col) {
        bpcc_xtensor_free(y);
        return bpcc_diag_nomem(a->d);
    }
    set_threads(a);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < groups; g++) {
            const float *src = x->data + (n * C + g * Cg) * D * H * W;
            float *c = col;
            for (int64_t ci = 0; ci < Cg; ci++)
                for (int64_t kz = 0; kz < K[0]; kz++)
                    for (int64_t ky = 0; ky < K[1]; ky++)
                        for (int64_t kx = 0; kx < K[2]; kx++)
                            for (int64_t oz = 0; oz < O[0]; oz++)
                                for (int64_t oy = 0; oy < O[1]; oy++)
                                    for (int64_t ox = 0; ox < O[2]; ox++) {
                                        int64_t iz = oz * st[0] - pd[0] + kz * dl[0], iy = oy * st[1] - pd[1] + ky * dl[1];
                                        int64_t ix = ox * st[2] - pd[2] + kx * dl[2];
                                        *c++ = iz < 0 || iz >= D || iy < 0 || iy >= H || ix < 0 || ix >= W
                                                   ? 0.0f
                                                   : src[((ci * D + iz) * H + iy) * W + ix];
                                    }
            float *dst = y->data + (n * Cout + g * Cog) * P;
            bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Cog, (int)P, (int)Kn, 1.0f, w + g * Cog * Kn,
                        (int)Kn, col, (int)P, 0.0f, dst, (int)P);
            if (b)
                for (int64_t co = 0; co < Cog; co++)
                    for (int64_t p = 0; p < P; p++) dst[co * P + p] += b[g * Cog + co];
        }
    bpcc_xfree(col);
    return bpcc_xput(a, y, out);
}

/* transposed 1-d / 2-d convolution: sgemm (W^T x) then col2im scatter-add */
BPCC_HOT static enum bpcc_status k_conv_transpose(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    const float *w, *b;
    uint32_t wnd, bnd;
    const int64_t *wd, *bd;
    if (!param(a, 1, "weight", &w, &wnd, &wd, true) || !param(a, 2, "bias", &b, &bnd, &bd, false)) return BPCC_ERR_GRAPH;
    if (wnd < 3 || wnd > 4) return bpcc_xerr(a, "only 1-d and 2-d transposed convolutions are supported");
    uint32_t sd = wnd - 2;
    int64_t one[2] = {1, 1}, zero[2] = {0, 0}, st[2], pd[2], dl[2], op[2], groups = 1;
    if (a->module) {
        if (!bpcc_mattr_ints(a, "stride", sd, one, st) || !bpcc_mattr_ints(a, "padding", sd, zero, pd) ||
            !bpcc_mattr_ints(a, "dilation", sd, one, dl) || !bpcc_mattr_ints(a, "output_padding", sd, zero, op))
            return BPCC_ERR_GRAPH;
        const struct bpcc_value *gv = bpcc_module_attr(a->module, "groups");
        groups = gv && gv->kind == BPCC_VAL_INT ? gv->u.i : 1;
    } else if (!bpcc_xarg_ints(a, 3, "stride", sd, one, st, NULL) || !bpcc_xarg_ints(a, 4, "padding", sd, zero, pd, NULL) ||
               !bpcc_xarg_ints(a, 5, "output_padding", sd, zero, op, NULL) || !bpcc_xarg_int(a, 6, "groups", 1, &groups) ||
               !bpcc_xarg_ints(a, 7, "dilation", sd, one, dl, NULL)) {
        return BPCC_ERR_GRAPH;
    }
    bool batched = x->ndim == wnd;
    if (x->ndim != wnd && x->ndim != wnd - 1) return bpcc_xerr(a, "input has %u dims", x->ndim);
    int64_t N = batched ? x->dims[0] : 1, C = x->dims[batched ? 1 : 0];
    int64_t H = sd == 2 ? x->dims[x->ndim - 2] : 1, W = x->dims[x->ndim - 1];
    int64_t Cg = C / (groups ? groups : 1), Cog = wd[1], Cout = Cog * groups;
    int64_t KH = sd == 2 ? wd[2] : 1, KW = wd[wnd - 1];
    int64_t sh = sd == 2 ? st[0] : 1, sw = st[sd - 1], ph = sd == 2 ? pd[0] : 0, pw = pd[sd - 1];
    int64_t dh = sd == 2 ? dl[0] : 1, dw = dl[sd - 1], oph = sd == 2 ? op[0] : 0, opw = op[sd - 1];
    if (groups < 1 || C % groups || wd[0] != C) return bpcc_xerr(a, "channels do not match the weight and groups");
    int64_t OH = (H - 1) * sh - 2 * ph + dh * (KH - 1) + oph + 1, OW = (W - 1) * sw - 2 * pw + dw * (KW - 1) + opw + 1;
    if (OH < 1 || OW < 1) return bpcc_xerr(a, "the output would be empty");
    int64_t odims[BPCC_MAX_DIMS];
    uint32_t ond = 0;
    if (batched) odims[ond++] = N;
    odims[ond++] = Cout;
    if (sd == 2) odims[ond++] = OH;
    odims[ond++] = OW;
    struct xtensor *y = bpcc_xtensor_new(ond, odims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t Kc = Cog * KH * KW, P = H * W;
    float *col = bpcc_malloc((size_t)(Kc * P) * sizeof(float));
    if (!col) {
        bpcc_xtensor_free(y);
        return bpcc_diag_nomem(a->d);
    }
    memset(y->data, 0, y->numel * sizeof(float));
    set_threads(a);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < groups; g++) {
            const float *src = x->data + (n * C + g * Cg) * P;
            /* col[Kc, P] = W_g^T [Kc, Cg] x X_g [Cg, P]; W_g is [Cg, Kc] */
            bpcc_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Kc, (int)P, (int)Cg, 1.0f, w + g * Cg * Kc, (int)Kc,
                        src, (int)P, 0.0f, col, (int)P);
            float *dst = y->data + (n * Cout + g * Cog) * OH * OW;
            for (int64_t co = 0; co < Cog; co++)
                for (int64_t ky = 0; ky < KH; ky++)
                    for (int64_t kx = 0; kx < KW; kx++) {
                        const float *row = col + ((co * KH + ky) * KW + kx) * P;
                        for (int64_t iy = 0; iy < H; iy++) {
                            int64_t oy = iy * sh - ph + ky * dh;
                            if (oy < 0 || oy >= OH) continue;
                            for (int64_t ix = 0; ix < W; ix++) {
                                int64_t ox = ix * sw - pw + kx * dw;
                                if (ox >= 0 && ox < OW) dst[(co * OH + oy) * OW + ox] += row[iy * W + ix];
                            }
                        }
                    }
            if (b)
                for (int64_t co = 0; co < Cog; co++)
                    for (int64_t p = 0; p < OH * OW; p++) dst[co * OH * OW + p] += b[g * Cog + co];
        }
    bpcc_xfree(col);
    return bpcc_xput(a, y, out);
}

/* }================================================ */

/* {==================== linear, matmul ==================== */

static enum bpcc_status k_linear(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    const float *w, *b;
    uint32_t wnd, bnd;
    const int64_t *wd, *bd;
    if (!param(a, 1, "weight", &w, &wnd, &wd, true) || !param(a, 2, "bias", &b, &bnd, &bd, false)) return BPCC_ERR_GRAPH;
    if (wnd != 2 || x->ndim < 1 || x->dims[x->ndim - 1] != wd[1])
        return bpcc_xerr(a, "input's last dimension does not match the weight's %lld", (long long)(wnd == 2 ? wd[1] : -1));
    int64_t Kd = wd[1], Nd = wd[0];
    int64_t M = (int64_t)(x->numel / (uint64_t)(Kd ? Kd : 1));
    int64_t odims[BPCC_MAX_DIMS];
    for (uint32_t i = 0; i + 1 < x->ndim; i++) odims[i] = x->dims[i];
    odims[x->ndim - 1] = Nd;
    struct xtensor *y = bpcc_xtensor_new(x->ndim, odims);
    if (!y) return bpcc_diag_nomem(a->d);
    set_threads(a);
    if (M && Nd)
        bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)Nd, (int)Kd, 1.0f, x->data, (int)Kd, w, (int)Kd,
                    0.0f, y->data, (int)Nd);
    if (b) {
        if (bnd != 1 || bd[0] != Nd) {
            bpcc_xtensor_free(y);
            return bpcc_xerr(a, "bias has the wrong shape");
        }
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < Nd; n++) y->data[m * Nd + n] += b[n];
    }
    return bpcc_xput(a, y, out);
}

/* matmul(input, other), @, bmm: torch.matmul's rules — a 1-d operand is a row (left) or a column
** (right) whose dimension leaves the result; the dimensions before the last two broadcast */
static enum bpcc_status k_matmul(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *z;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "other", &z)) return BPCC_ERR_GRAPH;
    if (!x->ndim || !z->ndim) return bpcc_xerr(a, "matmul of a 0-d tensor");
    bool xv = x->ndim == 1, zv = z->ndim == 1;
    int64_t M = xv ? 1 : x->dims[x->ndim - 2], K = x->dims[x->ndim - 1];
    int64_t K2 = zv ? z->dims[0] : z->dims[z->ndim - 2], N = zv ? 1 : z->dims[z->ndim - 1];
    if (K != K2) return bpcc_xerr(a, "matmul: %lld vs %lld", (long long)K, (long long)K2);
    /* the batch dimensions, broadcast; each operand's batch stride per dimension (0 where it is 1) */
    uint32_t bx = xv ? 0 : x->ndim - 2, bz = zv ? 0 : z->ndim - 2, nb = bx > bz ? bx : bz;
    int64_t bdims[BPCC_MAX_DIMS], sx[BPCC_MAX_DIMS], sz[BPCC_MAX_DIMS], stx = M * K, stz = K * N;
    for (int i = (int)nb - 1; i >= 0; i--) {
        int ix = i - (int)(nb - bx), iz = i - (int)(nb - bz);
        int64_t dx = ix >= 0 ? x->dims[ix] : 1, dz = iz >= 0 ? z->dims[iz] : 1;
        if (dx != dz && dx != 1 && dz != 1)
            return bpcc_xerr(a, "matmul: batch dimensions %lld and %lld do not broadcast", (long long)dx, (long long)dz);
        bdims[i] = dx == 1 ? dz : dx;
        sx[i] = dx == 1 ? 0 : stx;
        sz[i] = dz == 1 ? 0 : stz;
        stx *= dx;
        stz *= dz;
    }
    int64_t odims[BPCC_MAX_DIMS];
    uint32_t nd = 0;
    for (uint32_t i = 0; i < nb; i++) odims[nd++] = bdims[i];
    if (!xv) odims[nd++] = M;
    if (!zv) odims[nd++] = N;
    struct xtensor *y = bpcc_xtensor_new(nd, odims);
    if (!y) return bpcc_diag_nomem(a->d);
    set_threads(a);
    uint64_t batches = y->numel / bpcc_nz((uint64_t)(M * N));
    int64_t idx[BPCC_MAX_DIMS] = {0}, ox = 0, oz = 0;
    for (uint64_t i = 0; i < batches && M && N; i++) {
        bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, x->data + ox, (int)K,
                   z->data + oz, (int)N, 0.0f, y->data + i * M * N, (int)N);
        for (int k = (int)nb - 1; k >= 0; k--) {
            ox += sx[k];
            oz += sz[k];
            if (++idx[k] < bdims[k]) break;
            ox -= sx[k] * bdims[k];
            oz -= sz[k] * bdims[k];
            idx[k] = 0;
        }
    }
    if (!K) memset(y->data, 0, y->numel * sizeof *y->data);
    return bpcc_xput(a, y, out);
}

/* nn.Embedding / F.embedding(input, weight, padding_idx=None, max_norm=None, ...): the weight's
** rows at the input's indices, [*input, dim]. max_norm renormalizes the weight in place in
** PyTorch: refused */
/* an index into an embedding of `rows` rows (a float holding a whole number); false with an error
** when it is not one */
static bool embedding_row(const struct xargs *a, float f, int64_t rows, int64_t *r)
{
    if (!(f >= 0 && f < (float)rows) || f != floorf(f)) {
        bpcc_xerr(a, "index %g is out of range for an embedding of %lld rows", f, (long long)rows);
        return false;
    }
    *r = (int64_t)f;
    return true;
}

static enum bpcc_status k_embedding(const struct xargs *a, struct xval *out)
{
    const struct xtensor *ix;
    const float *w;
    uint32_t wn = 0;
    const int64_t *wd = NULL;
    if (!bpcc_xarg_tensor(a, 0, "input", &ix) || !param(a, 1, "weight", &w, &wn, &wd, true)) return BPCC_ERR_GRAPH;
    double max_norm = a->module ? bpcc_mattr_float(a->module, "max_norm", NAN) : NAN;
    const struct xval *mn = a->module ? NULL : bpcc_xarg(a, 3, "max_norm");
    if (!isnan(max_norm) || (mn && mn->k != XV_NONE))
        return bpcc_xerr(a, "embedding with max_norm changes its weight as it runs; not supported");
    if (wn != 2) return bpcc_xerr(a, "the embedding weight must have 2 dimensions");
    if (ix->ndim >= BPCC_MAX_DIMS) return bpcc_xerr(a, "too many dimensions");
    int64_t dims[BPCC_MAX_DIMS], rows = wd[0], dim = wd[1];
    memcpy(dims, ix->dims, ix->ndim * sizeof *dims);
    dims[ix->ndim] = dim;
    struct xtensor *y = bpcc_xtensor_new(ix->ndim + 1, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    for (uint64_t i = 0; i < ix->numel; i++) {
        int64_t r;
        if (!embedding_row(a, ix->data[i], rows, &r)) {
            bpcc_xtensor_free(y);
            return BPCC_ERR_GRAPH;
        }
        memcpy(y->data + i * (uint64_t)dim, w + r * dim, (size_t)dim * sizeof *w);
    }
    return bpcc_xput(a, y, out);
}

/* an optional tensor argument: module calls at mi, functional ones at fi (or the keyword) */
static const struct xtensor *opt_tensor(const struct xargs *a, uint32_t mi, uint32_t fi, const char *name, bool *bad)
{
    const struct xval *v = bpcc_xarg(a, a->module ? mi : fi, name);
    if (!v || v->k == XV_NONE) return NULL;
    if (v->k != XV_TENSOR) *bad = true;
    return v->k == XV_TENSOR ? v->u.t : NULL;
}

/* nn.EmbeddingBag(input, offsets=None, per_sample_weights=None) and F.embedding_bag(input, weight,
** offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse, per_sample_weights,
** include_last_offset, padding_idx): bags of rows summed in index order (per_sample_weights scale
** each row, mode sum only), averaged over the bag's rows, or their elementwise max; a 2-d input
** is one bag per row, a 1-d one is cut at the offsets (the last bag runs to the end unless
** include_last_offset). Rows of padding_idx are left out (and not counted); an empty bag is zeros. */
static enum bpcc_status k_embedding_bag(const struct xargs *a, struct xval *out)
{
    const struct xtensor *ix;
    const float *w;
    uint32_t wn = 0;
    const int64_t *wd = NULL;
    if (!bpcc_xarg_tensor(a, 0, "input", &ix) || !param(a, 1, "weight", &w, &wn, &wd, true)) return BPCC_ERR_GRAPH;
    if (wn != 2) return bpcc_xerr(a, "the embedding weight must have 2 dimensions");
    int64_t rows = wd[0], dim = wd[1];
    bool bad = false, last;
    const struct xtensor *offs = opt_tensor(a, 1, 2, "offsets", &bad), *psw = opt_tensor(a, 2, 8, "per_sample_weights", &bad);
    if (bad) return bpcc_xerr(a, "offsets and per_sample_weights must be tensors");
    const char *mode = "mean";
    int64_t pad = INT64_MIN;
    if (a->module) {
        const struct bpcc_value *mv = bpcc_module_attr(a->module, "mode"), *pv = bpcc_module_attr(a->module, "padding_idx");
        if (mv && mv->kind == BPCC_VAL_STR) mode = mv->u.s;
        if (pv && pv->kind == BPCC_VAL_INT) pad = pv->u.i;
        last = bpcc_mattr_bool(a->module, "include_last_offset", false);
        if (!isnan(bpcc_mattr_float(a->module, "max_norm", NAN)))
            return bpcc_xerr(a, "embedding_bag with max_norm changes its weight as it runs; not supported");
    } else {
        const struct xval *mv = bpcc_xarg(a, 6, "mode"), *mn = bpcc_xarg(a, 3, "max_norm"), *pv = bpcc_xarg(a, 10, "padding_idx");
        if (mv && mv->k == XV_STR) mode = mv->u.s;
        else if (mv && mv->k != XV_NONE) return bpcc_xerr(a, "mode must be 'sum', 'mean' or 'max'");
        if (mn && mn->k != XV_NONE) return bpcc_xerr(a, "embedding_bag with max_norm changes its weight as it runs; not supported");
        if (pv && pv->k == XV_INT) pad = pv->u.i;
        if (!bpcc_xarg_bool(a, 9, "include_last_offset", false, &last)) return BPCC_ERR_GRAPH;
    }
    int m = !strcmp(mode, "sum") ? 0 : !strcmp(mode, "mean") ? 1 : !strcmp(mode, "max") ? 2 : -1;
    if (m < 0) return bpcc_xerr(a, "mode must be 'sum', 'mean' or 'max', not '%s'", mode);
    if (pad != INT64_MIN && pad < 0) pad += rows;
    if (psw && (m != 0 || psw->numel != ix->numel))
        return bpcc_xerr(a, "per_sample_weights need mode 'sum' and one weight per index");
    int64_t B, n = (int64_t)ix->numel;
    if (ix->ndim == 2) {
        if (offs) return bpcc_xerr(a, "offsets go with a 1-d input; a 2-d input's rows are its bags");
        B = ix->dims[0];
    } else if (ix->ndim == 1) {
        if (!offs || offs->ndim != 1) return bpcc_xerr(a, "a 1-d input needs 1-d offsets");
        B = (int64_t)offs->numel - (last ? 1 : 0);
        if (B < 0) return bpcc_xerr(a, "include_last_offset needs at least one offset");
    } else {
        return bpcc_xerr(a, "embedding_bag takes a 1-d input with offsets or a 2-d input");
    }
    struct xtensor *y = bpcc_xtensor_new(2, (int64_t[]){B, dim});
    if (!y) return bpcc_diag_nomem(a->d);
    memset(y->data, 0, (size_t)(B * dim) * sizeof *y->data);
    for (int64_t b = 0; b < B; b++) {
        int64_t lo, hi;
        if (ix->ndim == 2) {
            lo = b * ix->dims[1], hi = lo + ix->dims[1];
        } else {
            /* offsets: whole numbers from 0, rising, within the input (checked before they are cast) */
            float fl = offs->data[b], fh = b + 1 < (int64_t)offs->numel ? offs->data[b + 1] : (float)n;
            if (!(fl >= 0 && fl <= fh && fh <= (float)n) || fl != floorf(fl) || fh != floorf(fh) || (b == 0 && fl != 0)) {
                bpcc_xtensor_free(y);
                return bpcc_xerr(a, "offsets must rise from 0 and stay within the input's %lld indices", (long long)n);
            }
            lo = (int64_t)fl, hi = (int64_t)fh;
        }
        float *o = y->data + b * dim;
        int64_t count = 0;
        for (int64_t i = lo; i < hi; i++) {
            int64_t r;
            if (!embedding_row(a, ix->data[i], rows, &r)) {
                bpcc_xtensor_free(y);
                return BPCC_ERR_GRAPH;
            }
            if (r == pad) continue;
            const float *row = w + r * dim;
            float s = psw ? psw->data[i] : 1.0f;
            for (int64_t j = 0; j < dim; j++) {
                if (m == 2) o[j] = count == 0 || row[j] > o[j] ? row[j] : o[j];
                else o[j] += psw ? s * row[j] : row[j];
            }
            count++;
        }
        if (m == 1 && count > 1)
            for (int64_t j = 0; j < dim; j++) o[j] /= (float)count;
    }
    return bpcc_xput(a, y, out);
}

/* addmm(input, mat1, mat2, *, beta=1, alpha=1) and baddbmm(input, batch1, batch2, *, beta=1,
** alpha=1): beta input + alpha (mat1 @ mat2), per batch for baddbmm; input broadcast to the
** product's shape, as BLAS's C = alpha A B + beta C on a copy of it (PyTorch's own call) */
static enum bpcc_status k_addmm(const struct xargs *a, struct xval *out)
{
    const struct xtensor *c, *x, *z;
    double beta, alpha;
    if (!bpcc_xarg_tensor(a, 0, "input", &c) || !bpcc_xarg_tensor(a, 1, "mat1", &x) ||
        !bpcc_xarg_tensor(a, 2, "mat2", &z) || !bpcc_xarg_float(a, UINT32_MAX, "beta", 1, &beta) ||
        !bpcc_xarg_float(a, UINT32_MAX, "alpha", 1, &alpha))
        return BPCC_ERR_GRAPH;
    bool batched = strstr(a->node->target, "baddbmm") != NULL;
    if (x->ndim != (batched ? 3 : 2) || z->ndim != x->ndim || (batched && x->dims[0] != z->dims[0]))
        return bpcc_xerr(a, batched ? "baddbmm takes two batches of matrices of the same count" : "addmm takes two matrices");
    uint32_t r = x->ndim;
    int64_t B = batched ? x->dims[0] : 1, M = x->dims[r - 2], K = x->dims[r - 1], N = z->dims[r - 1];
    if (z->dims[r - 2] != K) return bpcc_xerr(a, "%s: %lld vs %lld", batched ? "baddbmm" : "addmm", (long long)K,
                                              (long long)z->dims[r - 2]);
    int64_t dims[3] = {B, M, N};
    struct xtensor *y = bpcc_xtensor_new(r, batched ? dims : dims + 1);
    if (!y) return bpcc_diag_nomem(a->d);
    /* input broadcast over [B,] M, N */
    int64_t cd[3] = {1, 1, 1};
    if (c->ndim > r) {
        bpcc_xtensor_free(y);
        return bpcc_xerr(a, "the input has more dimensions than the product");
    }
    for (uint32_t i = 0; i < c->ndim; i++) cd[3 - c->ndim + i] = c->dims[i];
    for (int i = 0; i < 3; i++)
        if (cd[i] != 1 && cd[i] != dims[i]) {
            bpcc_xtensor_free(y);
            return bpcc_xerr(a, "the input does not broadcast to the product's shape");
        }
    for (int64_t b = 0; b < B; b++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++)
                y->data[(b * M + m) * N + n] =
                    beta == 0 ? 0.0f : c->data[((cd[0] == 1 ? 0 : b) * cd[1] + (cd[1] == 1 ? 0 : m)) * cd[2] + (cd[2] == 1 ? 0 : n)];
    set_threads(a);
    for (int64_t b = 0; b < B && M && N; b++)
        bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, (float)alpha, x->data + b * M * K,
                   (int)K, z->data + b * K * N, (int)N, (float)beta, y->data + b * M * N, (int)N);
    return bpcc_xput(a, y, out);
}

/* }================================================ */

/* {==================== normalization ==================== */

/* y[i] = x[i] alpha + beta rounded once (a fused multiply-add), as PyTorch's eval batch norm kernel
** computes it (its AVX2 build fuses them): bit-equal with it. The baseline build calls libm's fmaf,
** which gives the same bits more slowly. */
BPCC_HOT static void scale_shift(const float *x, float *y, int64_t n, float alpha, float beta)
{
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(x[i], alpha, beta);
}

#ifdef BPCC_AVX2_CLONES
BPCC_HOT __attribute__((target("avx2,fma"))) static void scale_shift_fma(const float *x, float *y, int64_t n, float alpha,
                                                                        float beta)
{
    for (int64_t i = 0; i < n; i++) y[i] = __builtin_fmaf(x[i], alpha, beta);
}
#endif

BPCC_HOT static enum bpcc_status k_batch_norm(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    const float *mean, *var, *w, *b;
    double eps = 1e-5;
    bool training;
    if (a->module) training = bpcc_mattr_bool(a->module, "training", false);
    else if (!bpcc_xarg_bool(a, 5, "training", false, &training)) return BPCC_ERR_GRAPH;
    if (training) return bpcc_xerr(a, "batch norm in training mode normalizes by the batch's statistics; export the model in eval mode");
    if (x->ndim < 2) return bpcc_xerr(a, "batch norm needs at least 2 dims");
    int64_t C = x->dims[1], inner = 1;
    bool m = a->module != NULL; /* a module's tensors, or the function's arguments 1 .. 4 */
    if (!param_n(a, m ? 0 : 1, "running_mean", &mean, C, true) || !param_n(a, m ? 0 : 2, "running_var", &var, C, true) ||
        !param_n(a, m ? 0 : 3, "weight", &w, C, false) || !param_n(a, m ? 0 : 4, "bias", &b, C, false))
        return BPCC_ERR_GRAPH;
    if (m) eps = bpcc_mattr_float(a->module, "eps", 1e-5);
    else if (!bpcc_xarg_float(a, 7, "eps", 1e-5, &eps)) return BPCC_ERR_GRAPH;
    for (uint32_t i = 2; i < x->ndim; i++) inner *= x->dims[i];
    struct xtensor *y = bpcc_xtensor_new(x->ndim, x->dims);
    if (!y) return bpcc_diag_nomem(a->d);
    void (*affine)(const float *, float *, int64_t, float, float) = scale_shift;
#ifdef BPCC_AVX2_CLONES
    if (bpcc_cpu_avx2()) affine = scale_shift_fma;
#endif
    for (int64_t n = 0; n < x->dims[0]; n++)
        for (int64_t c = 0; c < C; c++) {
            /* PyTorch's eval kernel: alpha = w / sqrt(var + eps), beta = b - mean * alpha, which its
            ** compiler fuses into one rounding too */
            float invstd = 1.0f / sqrtf(var[c] + (float)eps);
            float alpha = (w ? w[c] : 1.0f) * invstd, beta = fmaf(-mean[c], alpha, b ? b[c] : 0.0f);
            affine(x->data + (n * C + c) * inner, y->data + (n * C + c) * inner, inner, alpha, beta);
        }
    return bpcc_xput(a, y, out);
}

/* prelu(input, weight): x where x >= 0, else weight[c] x; c runs over dimension 1 (the channels),
** or one weight for every element */
static enum bpcc_status k_prelu(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    const float *w;
    uint32_t nd;
    const int64_t *dd;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !param(a, 1, "weight", &w, &nd, &dd, true)) return BPCC_ERR_GRAPH;
    int64_t nw = 1, C = x->ndim >= 2 ? x->dims[1] : 1;
    for (uint32_t k = 0; k < nd; k++) nw *= dd[k];
    if (nw != 1 && nw != C) return bpcc_xerr(a, "PReLU has %lld weights for %lld channels", (long long)nw, (long long)C);
    struct xtensor *y = bpcc_xtensor_new(x->ndim, x->dims);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t inner = 1;
    for (uint32_t i = 2; i < x->ndim; i++) inner *= (uint64_t)x->dims[i];
    for (uint64_t i = 0; i < x->numel; i++) {
        float v = x->data[i], s = nw == 1 ? w[0] : w[i / inner % (uint64_t)C];
        y->data[i] = v >= 0.0f ? v : s * v;
    }
    return bpcc_xput(a, y, out);
}

/* x [N, C, *] normalized over each of G groups of C / G channels (mean and biased variance in
** double), then scaled and shifted per channel by w and b (either may be NULL) */
static enum bpcc_status group_normalize(const struct xargs *a, const struct xtensor *x, int64_t G, const float *w,
                                        const float *b, double eps, struct xval *out)
{
    int64_t C = x->dims[1], inner = 1;
    for (uint32_t i = 2; i < x->ndim; i++) inner *= x->dims[i];
    if (G < 1 || C % G) return bpcc_xerr(a, "%lld channels do not split into %lld groups", (long long)C, (long long)G);
    struct xtensor *y = bpcc_xtensor_new(x->ndim, x->dims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t per = C / G * inner;
    for (int64_t n = 0; n < x->dims[0]; n++)
        for (int64_t g = 0; g < G; g++) {
            const float *p = x->data + (n * C + g * (C / G)) * inner;
            float *q = y->data + (n * C + g * (C / G)) * inner;
            double sum = 0, ss = 0;
            for (int64_t i = 0; i < per; i++) sum += p[i];
            double mean = per ? sum / (double)per : 0;
            for (int64_t i = 0; i < per; i++) ss += (p[i] - mean) * (p[i] - mean);
            float rstd = (float)(1.0 / sqrt((per ? ss / (double)per : 0) + eps)), m = (float)mean;
            for (int64_t c = g * (C / G); c < (g + 1) * (C / G); c++, p += inner, q += inner) {
                float sc = rstd * (w ? w[c] : 1.0f), sh = b ? b[c] : 0.0f;
                for (int64_t i = 0; i < inner; i++) q[i] = (p[i] - m) * sc + sh;
            }
        }
    return bpcc_xput(a, y, out);
}

/* GroupNorm / group_norm(input, num_groups, weight=None, bias=None, eps=1e-5) */
static enum bpcc_status k_group_norm(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    const float *w, *b;
    double eps = 1e-5;
    int64_t G;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (x->ndim < 2) return bpcc_xerr(a, "group norm needs at least 2 dims");
    bool m = a->module != NULL;
    if (m ? !bpcc_mattr_ints(a, "num_groups", 1, NULL, &G) : !bpcc_xarg_int(a, 1, "num_groups", 0, &G)) return BPCC_ERR_GRAPH;
    if (!param_n(a, m ? 0 : 2, "weight", &w, x->dims[1], false) || !param_n(a, m ? 0 : 3, "bias", &b, x->dims[1], false))
        return BPCC_ERR_GRAPH;
    if (m) eps = bpcc_mattr_float(a->module, "eps", 1e-5);
    else if (!bpcc_xarg_float(a, 4, "eps", 1e-5, &eps)) return BPCC_ERR_GRAPH;
    return group_normalize(a, x, G, w, b, eps, out);
}

/* InstanceNorm1d/2d/3d: each (sample, channel) over its own elements; with running statistics
** tracked, eval mode uses them as batch norm does (training mode the input's own). An unbatched input ([C, *]) is one sample. */
static enum bpcc_status k_instance_norm(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    int r = a->module->type[strlen(a->module->type) - 2] - '0';
    if ((int)x->ndim != r + 1 && (int)x->ndim != r + 2)
        return bpcc_xerr(a, "InstanceNorm%dd needs a %d-d or %d-d input, not %u-d", r, r + 1, r + 2, x->ndim);
    struct xtensor view = *x; /* an unbatched input as a batch of one: the same data */
    if ((int)x->ndim == r + 1) {
        view.ndim = x->ndim + 1;
        view.dims[0] = 1;
        memcpy(view.dims + 1, x->dims, x->ndim * sizeof *x->dims);
    }
    struct xval in = {.k = XV_TENSOR, .u.t = &view};
    struct xargs sub = *a;
    sub.pos = &in;
    sub.n = 1;
    sub.consume = false;
    enum bpcc_status s;
    if (bpcc_mattr_bool(a->module, "track_running_stats", false) && !bpcc_mattr_bool(a->module, "training", false)) {
        s = k_batch_norm(&sub, out);
    } else {
        const float *w, *b;
        if (!param_n(a, 0, "weight", &w, view.dims[1], false) || !param_n(a, 0, "bias", &b, view.dims[1], false))
            return BPCC_ERR_GRAPH;
        s = group_normalize(&sub, &view, view.dims[1], w, b, bpcc_mattr_float(a->module, "eps", 1e-5), out);
    }
    if (!s && (int)x->ndim == r + 1) { /* back to the input's shape */
        struct xtensor *t = out->u.t;
        t->ndim = x->ndim;
        memcpy(t->dims, x->dims, x->ndim * sizeof *x->dims);
    }
    return s;
}

/* F.instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
** use_input_stats=True, momentum=0.1, eps=1e-5): as InstanceNorm, each (sample, channel) over its
** own elements; without use_input_stats, by the running statistics as batch norm in eval (the same
** arguments in the same places). With running statistics and use_input_stats PyTorch updates
** them in place, a change kept for the next batch: refused. */
static enum bpcc_status k_instance_norm_f(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    bool own;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_bool(a, 5, "use_input_stats", true, &own)) return BPCC_ERR_GRAPH;
    if (x->ndim < 3) return bpcc_xerr(a, "instance norm takes [N, C, *] with one dimension or more past C, not %u-d", x->ndim);
    if (!own) return k_batch_norm(a, out);
    if (!bpcc_xarg_absent(a, 1, "running_mean") || !bpcc_xarg_absent(a, 2, "running_var"))
        return bpcc_xerr(a, "instance norm with use_input_stats updates running_mean and running_var in place, which PyTorch "
                            "keeps for the next batch and the interpreter does not");
    if (x->numel / bpcc_nz((uint64_t)(x->dims[0] * x->dims[1])) <= 1)
        return bpcc_xerr(a, "instance norm needs more than 1 spatial element, as PyTorch does");
    const float *w, *b;
    double eps;
    if (!param_n(a, 3, "weight", &w, x->dims[1], false) || !param_n(a, 4, "bias", &b, x->dims[1], false) ||
        !bpcc_xarg_float(a, 7, "eps", 1e-5, &eps))
        return BPCC_ERR_GRAPH;
    return group_normalize(a, x, x->dims[1], w, b, eps, out);
}

static enum bpcc_status k_layer_norm(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    int64_t shape[BPCC_MAX_DIMS];
    uint32_t ns = 0;
    double eps = 1e-5;
    const float *w, *b;
    if (a->module) {
        const struct bpcc_value *v = bpcc_module_attr(a->module, "normalized_shape");
        if (!v || (v->kind != BPCC_VAL_TUPLE && v->kind != BPCC_VAL_LIST) || v->n > BPCC_MAX_DIMS)
            return bpcc_xerr(a, "LayerNorm needs normalized_shape");
        for (uint32_t i = 0; i < v->n; i++) shape[ns++] = v->u.seq.items[i].kind == BPCC_VAL_INT ? v->u.seq.items[i].u.i : 0;
        eps = bpcc_mattr_float(a->module, "eps", 1e-5);
    } else if (!bpcc_xarg_ints(a, 1, "normalized_shape", 0, NULL, shape, &ns) || !bpcc_xarg_float(a, 4, "eps", 1e-5, &eps)) {
        return BPCC_ERR_GRAPH;
    }
    if (ns > x->ndim) return bpcc_xerr(a, "normalized_shape is longer than the input's shape");
    int64_t inner = 1;
    for (uint32_t i = 0; i < ns; i++) {
        if (x->dims[x->ndim - ns + i] != shape[i]) return bpcc_xerr(a, "normalized_shape does not match the input");
        inner *= shape[i];
    }
    if (!param_n(a, a->module ? 0 : 2, "weight", &w, inner, false) || !param_n(a, a->module ? 0 : 3, "bias", &b, inner, false))
        return BPCC_ERR_GRAPH;
    struct xtensor *y = bpcc_xtensor_new(x->ndim, x->dims);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t outer = x->numel / (uint64_t)(inner ? inner : 1);
    for (uint64_t o = 0; o < outer; o++) {
        const float *p = x->data + o * inner;
        float *q = y->data + o * inner;
        double s = 0, ss = 0;
        for (int64_t i = 0; i < inner; i++) s += p[i];
        double m = s / (double)inner;
        for (int64_t i = 0; i < inner; i++) ss += (p[i] - m) * (p[i] - m);
        float rstd = (float)(1.0 / sqrt(ss / (double)inner + eps));
        for (int64_t i = 0; i < inner; i++) q[i] = ((p[i] - (float)m) * rstd) * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
    return bpcc_xput(a, y, out);
}

/* }================================================ */

/* {==================== pooling: 1-d, 2-d and 3-d ==================== */

/* pooling_output_shape: the division rounds toward minus infinity (div_rtn) */
static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode)
{
    int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (o - 1) * s >= in + p) o--; /* the last window must start inside the input or left padding */
    return o;
}

/* The window in every spatial dimension of a rank-r op (1, 2 or 3): dimensions 3-r .. 2 are the
** op's, the ones before are a unit window (kernel 1, stride 1, no padding) over a unit extent. */
struct pool {
    int64_t k[3], s[3], p[3], d[3];
    bool ceil_mode, count_include_pad;
    int64_t divisor;
};

/* the input's spatial extents, the same way: in[0..2], and the number of planes before them */
static bool pool_input(const struct xargs *a, int r, const struct xtensor **x, int64_t in[3], uint64_t *planes)
{
    if (!bpcc_xarg_tensor(a, 0, "input", x)) return false;
    if ((*x)->ndim != (uint32_t)r + 1 && (*x)->ndim != (uint32_t)r + 2) {
        bpcc_xerr(a, "%d-d pooling needs a %d-d or %d-d input, not %u-d", r, r + 1, r + 2, (*x)->ndim);
        return false;
    }
    uint64_t n = 1;
    for (int i = 0; i < 3; i++) {
        in[i] = i < 3 - r ? 1 : (*x)->dims[(*x)->ndim - 3 + i];
        n *= (uint64_t)in[i];
    }
    *planes = (*x)->numel / bpcc_nz(n);
    return true;
}

/* the output's dimensions: the input's leading ones, then out[3-r..2] */
static struct xtensor *pool_output(const struct xtensor *x, int r, const int64_t out[3])
{
    int64_t dims[BPCC_MAX_DIMS];
    for (uint32_t i = 0; i < x->ndim; i++) dims[i] = i + (uint32_t)r < x->ndim ? x->dims[i] : out[3 - x->ndim + i];
    return bpcc_xtensor_new(x->ndim, dims);
}

/* r ints of argument i / module attribute key into v[3-r..2], the unit value before */
static bool pool_ints(const struct xargs *a, int r, uint32_t i, const char *key, const int64_t *dflt, int64_t unit,
                      int64_t v[3])
{
    int64_t t[3];
    if (a->module ? !bpcc_mattr_ints(a, key, (uint32_t)r, dflt, t) : !bpcc_xarg_ints(a, i, key, (uint32_t)r, dflt, t, NULL))
        return false;
    for (int k = 0; k < 3; k++) v[k] = k < 3 - r ? unit : t[k - 3 + r];
    return true;
}

static bool no_indices(const struct xargs *a, uint32_t i)
{
    bool ri;
    if (a->module) ri = bpcc_mattr_bool(a->module, "return_indices", false);
    else if (!bpcc_xarg_bool(a, i, "return_indices", false, &ri)) return false;
    if (ri) bpcc_xerr(a, "return_indices=True is not supported: the interpreter computes the pooled values only");
    return !ri;
}

/* max_poolNd(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False)
** avg_poolNd(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True[, divisor_override=None])
** and the modules' attributes of the same names */
static bool pool_params(const struct xargs *a, int r, bool avg, struct pool *pp)
{
    const int64_t one[3] = {1, 1, 1}, zero[3] = {0, 0, 0};
    pp->divisor = 0;
    pp->count_include_pad = true;
    pp->ceil_mode = false;
    if (!pool_ints(a, r, 1, "kernel_size", NULL, 1, pp->k)) return false;
    bool no_stride;
    if (a->module) {
        const struct bpcc_value *sv = bpcc_module_attr(a->module, "stride");
        no_stride = !sv || sv->kind == BPCC_VAL_NONE || ((sv->kind == BPCC_VAL_TUPLE || sv->kind == BPCC_VAL_LIST) && !sv->n);
    } else {
        const struct xval *sv = bpcc_xarg(a, 2, "stride");
        no_stride = !sv || sv->k == XV_NONE || (sv->k == XV_SEQ && !sv->u.seq.n);
    }
    if (no_stride) memcpy(pp->s, pp->k, sizeof pp->s);
    else if (!pool_ints(a, r, 2, "stride", NULL, 1, pp->s)) return false;
    if (!pool_ints(a, r, 3, "padding", zero, 0, pp->p)) return false;
    if (avg) {
        memcpy(pp->d, one, sizeof pp->d);
        if (a->module) {
            pp->ceil_mode = bpcc_mattr_bool(a->module, "ceil_mode", false);
            pp->count_include_pad = bpcc_mattr_bool(a->module, "count_include_pad", true);
            const struct bpcc_value *dv = bpcc_module_attr(a->module, "divisor_override");
            if (dv && dv->kind == BPCC_VAL_INT) pp->divisor = dv->u.i;
        } else if (!bpcc_xarg_bool(a, 4, "ceil_mode", false, &pp->ceil_mode) ||
                   !bpcc_xarg_bool(a, 5, "count_include_pad", true, &pp->count_include_pad) ||
                   (r > 1 && !bpcc_xarg_int(a, 6, "divisor_override", 0, &pp->divisor))) {
            return false;
        }
    } else {
        if (!pool_ints(a, r, 4, "dilation", one, 1, pp->d)) return false;
        if (a->module) pp->ceil_mode = bpcc_mattr_bool(a->module, "ceil_mode", false);
        else if (!bpcc_xarg_bool(a, 5, "ceil_mode", false, &pp->ceil_mode)) return false;
        if (!no_indices(a, 6)) return false;
    }
    const int64_t big = (int64_t)1 << 31; /* keeps the window arithmetic far from overflow */
    for (int i = 0; i < 3; i++)
        if (pp->k[i] < 1 || pp->s[i] < 1 || pp->p[i] < 0 || pp->d[i] < 1 || pp->p[i] * 2 > pp->k[i] || pp->k[i] > big ||
            pp->s[i] > big || pp->d[i] > big) {
            bpcc_xerr(a, "invalid pooling kernel, stride, padding or dilation");
            return false;
        }
    if (avg && pp->divisor < 0) {
        bpcc_xerr(a, "divisor_override must be positive");
        return false;
    }
    return true;
}

/* average pooling of one plane [D, H, W] into [OD, OH, OW]: each window summed in order */
static void avg_plane(const struct pool *pp, const int64_t in[3], const int64_t on[3], const float *img, float *o)
{
    for (int64_t od = 0; od < on[0]; od++)
        for (int64_t oy = 0; oy < on[1]; oy++)
            for (int64_t ox = 0; ox < on[2]; ox++) {
                int64_t st[3], en[3], pool_size = 1, count = 1;
                const int64_t at[3] = {od, oy, ox};
                for (int i = 0; i < 3; i++) {
                    st[i] = at[i] * pp->s[i] - pp->p[i];
                    en[i] = st[i] + pp->k[i] < in[i] + pp->p[i] ? st[i] + pp->k[i] : in[i] + pp->p[i];
                    pool_size *= en[i] - st[i];
                    if (st[i] < 0) st[i] = 0;
                    if (en[i] > in[i]) en[i] = in[i];
                    count *= en[i] - st[i] > 0 ? en[i] - st[i] : 0;
                }
                float s = 0;
                for (int64_t iz = st[0]; iz < en[0]; iz++)
                    for (int64_t iy = st[1]; iy < en[1]; iy++)
                        for (int64_t ix = st[2]; ix < en[2]; ix++) s += img[(iz * in[1] + iy) * in[2] + ix];
                int64_t div = pp->divisor ? pp->divisor : pp->count_include_pad ? pool_size : count;
                *o++ = div ? s / (float)div : 0.0f;
            }
}

/* max pooling of one plane [D, H, W] into [OD, OH, OW] (3-d pooling; 1-d and 2-d take bpcc_maxpool2d):
** padding never wins, NaN does */
static void max_plane(const struct pool *pp, const int64_t in[3], const int64_t on[3], const float *img, float *o)
{
    for (int64_t od = 0; od < on[0]; od++)
        for (int64_t oy = 0; oy < on[1]; oy++)
            for (int64_t ox = 0; ox < on[2]; ox++) {
                float m = -INFINITY;
                for (int64_t kz = 0; kz < pp->k[0]; kz++) {
                    int64_t iz = od * pp->s[0] - pp->p[0] + kz * pp->d[0];
                    if (iz < 0 || iz >= in[0]) continue;
                    for (int64_t ky = 0; ky < pp->k[1]; ky++) {
                        int64_t iy = oy * pp->s[1] - pp->p[1] + ky * pp->d[1];
                        if (iy < 0 || iy >= in[1]) continue;
                        for (int64_t kx = 0; kx < pp->k[2]; kx++) {
                            int64_t ix = ox * pp->s[2] - pp->p[2] + kx * pp->d[2];
                            if (ix < 0 || ix >= in[2]) continue;
                            float v = img[(iz * in[1] + iy) * in[2] + ix];
                            if (v > m || isnan(v)) m = v;
                        }
                    }
                }
                *o++ = m;
            }
}

BPCC_HOT static enum bpcc_status pool(const struct xargs *a, int r, bool avg, struct xval *out)
{
    const struct xtensor *x;
    int64_t in[3], on[3];
    uint64_t planes;
    struct pool pp;
    if (!pool_input(a, r, &x, in, &planes) || !pool_params(a, r, avg, &pp)) return BPCC_ERR_GRAPH;
    for (int i = 0; i < 3; i++) {
        on[i] = pool_out(in[i], pp.k[i], pp.s[i], pp.p[i], pp.d[i], pp.ceil_mode);
        if (on[i] < 1) return bpcc_xerr(a, "the output would be empty");
    }
    struct xtensor *y = pool_output(x, r, on);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t is = (uint64_t)(in[0] * in[1] * in[2]), os = (uint64_t)(on[0] * on[1] * on[2]);
    if (!avg && r < 3) {
        struct bpcc_window p = {in[1], in[2], pp.k[1], pp.k[2], on[1], on[2], pp.s[1], pp.s[2], pp.p[1], pp.p[2],
                                pp.d[1], pp.d[2], 0, -INFINITY};
        if (!bpcc_maxpool2d(&p, planes, x->data, y->data)) {
            bpcc_xtensor_free(y);
            return bpcc_diag_nomem(a->d);
        }
        return bpcc_xput(a, y, out);
    }
    for (uint64_t c = 0; c < planes; c++)
        (avg ? avg_plane : max_plane)(&pp, in, on, x->data + c * is, y->data + c * os);
    return bpcc_xput(a, y, out);
}

static enum bpcc_status k_max_pool1d(const struct xargs *a, struct xval *out) { return pool(a, 1, false, out); }
static enum bpcc_status k_max_pool2d(const struct xargs *a, struct xval *out) { return pool(a, 2, false, out); }
static enum bpcc_status k_max_pool3d(const struct xargs *a, struct xval *out) { return pool(a, 3, false, out); }
static enum bpcc_status k_avg_pool1d(const struct xargs *a, struct xval *out) { return pool(a, 1, true, out); }
static enum bpcc_status k_avg_pool2d(const struct xargs *a, struct xval *out) { return pool(a, 2, true, out); }
static enum bpcc_status k_avg_pool3d(const struct xargs *a, struct xval *out) { return pool(a, 3, true, out); }

/* lp_pool1d / lp_pool2d (input, norm_type, kernel_size, stride=None, ceil_mode=False) and the
** LPPool modules, as F.lp_pool computes them: average pooling of input^p, times the window's
** size, to the power 1 / p (sign(out) relu(|out|) is out itself) */
static enum bpcc_status lp_pool(const struct xargs *a, int r, struct xval *out)
{
    const struct xtensor *x;
    double p;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (a->module) p = bpcc_mattr_float(a->module, "norm_type", 2);
    else if (!bpcc_xarg_float(a, 1, "norm_type", 2, &p)) return BPCC_ERR_GRAPH;
    if (!(p > 0) || isinf(p)) return bpcc_xerr(a, "norm_type must be a positive number");
    struct xtensor *xp = bpcc_xtensor_new(x->ndim, x->dims);
    if (!xp) return bpcc_diag_nomem(a->d);
    for (uint64_t i = 0; i < x->numel; i++) {
        float v = x->data[i];
        xp->data[i] = p == 2 ? v * v : p == 1 ? v : powf(v, (float)p);
    }
    /* avg_pool's arguments: (input, kernel_size, stride, padding 0, ceil_mode) */
    struct xval pos[5] = {{.k = XV_TENSOR, .borrowed = true, .u.t = xp}, {0}, {0}, {.k = XV_INT, .u.i = 0}, {0}};
    struct xargs sub = *a;
    sub.consume = false;
    sub.pos = pos;
    sub.n = 1;
    if (!a->module)
        for (uint32_t i = 2; i < a->n && i < 5; i++) {
            pos[i == 4 ? 4 : i - 1] = a->pos[i];
            sub.n = i == 4 ? 5 : i;
        }
    struct pool pp;
    struct xval y;
    enum bpcc_status st = pool_params(&sub, r, true, &pp) ? pool(&sub, r, true, &y) : BPCC_ERR_GRAPH;
    bpcc_xtensor_free(xp);
    if (st) return st;
    float n = (float)(pp.k[0] * pp.k[1] * pp.k[2]), q = (float)(1.0 / p);
    float *d = y.u.t->data;
    for (uint64_t i = 0; i < y.u.t->numel; i++) {
        float v = d[i] * n;
        d[i] = q == 0.5f ? sqrtf(v) : q == 1.0f ? v : powf(v, q);
    }
    *out = y;
    return BPCC_OK;
}

static enum bpcc_status k_lp_pool1d(const struct xargs *a, struct xval *out) { return lp_pool(a, 1, out); }
static enum bpcc_status k_lp_pool2d(const struct xargs *a, struct xval *out) { return lp_pool(a, 2, out); }

/* LocalResponseNorm / local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0): each value
** over (k + alpha * the mean of the squares of the `size` channels around it)^beta, the channel
** window zero-padded (size / 2 before, (size - 1) / 2 after) and divided by size, as F's average
** pooling of the padded squares */
static enum bpcc_status k_local_response_norm(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t size;
    double alpha = 1e-4, beta = 0.75, k = 1.0;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (a->module) {
        size = bpcc_mattr_int(a->module, "size", 0);
        alpha = bpcc_mattr_float(a->module, "alpha", 1e-4);
        beta = bpcc_mattr_float(a->module, "beta", 0.75);
        k = bpcc_mattr_float(a->module, "k", 1.0);
    } else if (!bpcc_xarg_int(a, 1, "size", 0, &size) || !bpcc_xarg_float(a, 2, "alpha", 1e-4, &alpha) ||
               !bpcc_xarg_float(a, 3, "beta", 0.75, &beta) || !bpcc_xarg_float(a, 4, "k", 1.0, &k)) {
        return BPCC_ERR_GRAPH;
    }
    if (x->ndim < 3) return bpcc_xerr(a, "local response norm needs a 3-d input or more, not %u-d", x->ndim);
    if (size < 1 || size > ((int64_t)1 << 31)) return bpcc_xerr(a, "local response norm's size must be positive");
    struct xtensor *y = bpcc_xtensor_new(x->ndim, x->dims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t C = x->dims[1], inner = 1, lo = size / 2, hi = (size - 1) / 2;
    for (uint32_t i = 2; i < x->ndim; i++) inner *= x->dims[i];
    float fa = (float)alpha, fb = (float)beta, fk = (float)k, fs = (float)size;
    for (int64_t n = 0; n < x->dims[0]; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < inner; i++) {
                float sum = 0.0f;
                for (int64_t j = c - lo; j <= c + hi; j++) {
                    if (j < 0 || j >= C) continue;
                    float v = x->data[(n * C + j) * inner + i];
                    sum += v * v;
                }
                float div = powf(sum / fs * fa + fk, fb);
                y->data[(n * C + c) * inner + i] = x->data[(n * C + c) * inner + i] / div;
            }
    return bpcc_xput(a, y, out);
}

/* the largest of the window; NaN if any element is NaN (torch's max pooling propagates NaN) */
static float window_max(const float *img, int64_t W, int64_t ys, int64_t ye, int64_t xs, int64_t xe)
{
    float m = -INFINITY;
    for (int64_t iy = ys; iy < ye; iy++)
        for (int64_t ix = xs; ix < xe; ix++) {
            float v = img[iy * W + ix];
            if (v > m || isnan(v)) m = v;
        }
    return m;
}

/* adaptive_{avg,max}_poolNd(input, output_size[, return_indices=False]); output_size an int or r
** entries, None keeping the input's extent. Window i of n over I: [floor(i I / n), ceil((i+1) I / n)). */
static enum bpcc_status adaptive(const struct xargs *a, int r, bool avg, struct xval *out)
{
    const struct xtensor *x;
    int64_t in[3], on[3];
    uint64_t planes;
    if (!pool_input(a, r, &x, in, &planes)) return BPCC_ERR_GRAPH;
    if (!avg && !no_indices(a, 2)) return BPCC_ERR_GRAPH;
    memcpy(on, in, sizeof on);
    const struct bpcc_value *mv = a->module ? bpcc_module_attr(a->module, "output_size") : NULL;
    const struct xval *ov = a->module ? NULL : bpcc_xarg(a, 1, "output_size");
    if (mv && (mv->kind == BPCC_VAL_TUPLE || mv->kind == BPCC_VAL_LIST) && mv->n == (uint32_t)r) {
        for (int i = 0; i < r; i++)
            if (mv->u.seq.items[i].kind == BPCC_VAL_INT) on[3 - r + i] = mv->u.seq.items[i].u.i; /* None keeps */
    } else if (ov && ov->k == XV_SEQ && ov->u.seq.n == (uint32_t)r) {
        for (int i = 0; i < r; i++)
            if (ov->u.seq.items[i].k == XV_INT) on[3 - r + i] = ov->u.seq.items[i].u.i;
    } else if (!pool_ints(a, r, 1, "output_size", NULL, 1, on)) {
        return BPCC_ERR_GRAPH;
    }
    for (int i = 0; i < 3; i++)
        if (on[i] < 1 || on[i] > ((int64_t)1 << 31)) return bpcc_xerr(a, "output_size must be positive and not huge");
    struct xtensor *y = pool_output(x, r, on);
    if (!y) return bpcc_diag_nomem(a->d);
    const int64_t D = in[0], H = in[1], W = in[2];
    float *o = y->data;
    if (avg && on[0] == 1 && on[1] == 1 && on[2] == 1) {
        /* PyTorch takes the mean over the plane (input.mean(dims)): its cascade sum, one division */
        uint64_t n = (uint64_t)(D * H * W);
        for (uint64_t c = 0; c < planes; c++) o[c] = bpcc_fsum(x->data + c * n, n) / (float)n;
        return bpcc_xput(a, y, out);
    }
    for (uint64_t c = 0; c < planes; c++) {
        const float *plane = x->data + c * (uint64_t)(D * H * W);
        for (int64_t oz = 0; oz < on[0]; oz++) {
            int64_t zs = oz * D / on[0], ze = ((oz + 1) * D + on[0] - 1) / on[0];
            for (int64_t oy = 0; oy < on[1]; oy++) {
                int64_t ys = oy * H / on[1], ye = ((oy + 1) * H + on[1] - 1) / on[1];
                for (int64_t ox = 0; ox < on[2]; ox++) {
                    int64_t xs = ox * W / on[2], xe = ((ox + 1) * W + on[2] - 1) / on[2];
                    float acc = avg ? 0.0f : -INFINITY;
                    for (int64_t iz = zs; iz < ze; iz++) {
                        const float *img = plane + (uint64_t)iz * (uint64_t)(H * W);
                        if (!avg) {
                            float v = window_max(img, W, ys, ye, xs, xe);
                            acc = v > acc || isnan(v) ? v : acc;
                            continue;
                        }
                        /* PyTorch's kernel: one running float sum in order, divided by each extent */
                        for (int64_t iy = ys; iy < ye; iy++)
                            for (int64_t ix = xs; ix < xe; ix++) acc += img[iy * W + ix];
                    }
                    *o++ = avg ? acc / (float)(ze - zs) / (float)(ye - ys) / (float)(xe - xs) : acc;
                }
            }
        }
    }
    return bpcc_xput(a, y, out);
}

enum bpcc_status bpcc_k_adaptive_avg_pool1d(const struct xargs *a, struct xval *out) { return adaptive(a, 1, true, out); }
enum bpcc_status bpcc_k_adaptive_avg_pool2d(const struct xargs *a, struct xval *out) { return adaptive(a, 2, true, out); }
enum bpcc_status bpcc_k_adaptive_avg_pool3d(const struct xargs *a, struct xval *out) { return adaptive(a, 3, true, out); }
static enum bpcc_status k_adaptive_max_pool1d(const struct xargs *a, struct xval *out) { return adaptive(a, 1, false, out); }
static enum bpcc_status k_adaptive_max_pool2d(const struct xargs *a, struct xval *out) { return adaptive(a, 2, false, out); }
static enum bpcc_status k_adaptive_max_pool3d(const struct xargs *a, struct xval *out) { return adaptive(a, 3, false, out); }

/* }================================================ */

/* {==================== reference quantized modules ==================== */

bool bpcc_fake_quantize_weight(const struct bpcc_tensor *w, const struct bpcc_qparams *q, float *out)
{
    return w->data && bpcc_fake_quantize(w->data, w->ndim, w->dims, q, out);
}

/* quantize_val then dequantize in float32, as ATen's reference kernels (and this file's quantize
** and dequantize kernels) do */
BPCC_HOT bool bpcc_fake_quantize(const float *x, uint32_t ndim, const int64_t *dims, const struct bpcc_qparams *q,
                                 float *out)
{
    int64_t lo, hi;
    if (q->dtype == BPCC_DTYPE_QUINT8) lo = 0, hi = 255;
    else if (q->dtype == BPCC_DTYPE_QINT8) lo = -128, hi = 127;
    else if (q->dtype == BPCC_DTYPE_QINT32) lo = INT32_MIN, hi = INT32_MAX;
    else if (q->dtype == BPCC_DTYPE_QUINT4X2) lo = 0, hi = 15;
    else return false;
    bool per_channel = q->kind == BPCC_QPARAMS_PER_CHANNEL;
    if (!per_channel && q->kind != BPCC_QPARAMS_PER_TENSOR) return false;
    int64_t axis = per_channel ? q->axis : 0;
    if (axis < 0) axis += ndim;
    if (per_channel && (axis < 0 || axis >= (int64_t)ndim)) return false;
    uint64_t numel = 1, inner = 1, C = per_channel ? (uint64_t)dims[axis] : 1;
    for (uint32_t i = 0; i < ndim; i++) numel *= (uint64_t)dims[i];
    for (uint32_t i = (uint32_t)axis + 1; per_channel && i < ndim; i++) inner *= (uint64_t)dims[i];
    if (q->n < C) return false;
    if (q->zero_point && q->zero_point->dtype == BPCC_DTYPE_F32) {
        /* per_channel_affine_float_qparams (embeddings): lrintf(x / scale + zero_point), clamped;
        ** then (q - zero_point) * scale, all in float32 */
        for (uint64_t c0 = 0; c0 < numel; c0 += inner) {
            uint64_t c = per_channel ? (c0 / inner) % C : 0;
            float s = (float)bpcc_qparams_scale(q, c), inv = s == 0.0f ? 1.0f : 1.0f / s;
            float zf = (float)bpcc_qparams_zero_point(q, c);
            uint64_t end = per_channel ? c0 + inner : numel;
            for (uint64_t i = c0; i < end; i++) {
                long v = lrintf(x[i] * inv + zf);
                v = v < lo ? (long)lo : v > hi ? (long)hi : v;
                out[i] = ((float)v - zf) * s;
            }
            if (!per_channel) break;
        }
        return true;
    }
    for (uint64_t c0 = 0; c0 < numel; c0 += inner) {
        uint64_t c = per_channel ? (c0 / inner) % C : 0;
        float s = (float)bpcc_qparams_scale(q, c), inv = 1.0f / s;
        double z = bpcc_qparams_zero_point(q, c);
        float zf = (float)z;
        uint64_t end = per_channel ? c0 + inner : numel;
        for (uint64_t i = c0; i < end; i++) {
            double v = z + (double)nearbyintf(x[i] * inv);
            v = v < (double)lo ? (double)lo : v > (double)hi ? (double)hi : v;
            out[i] = ((float)v - zf) * s;
        }
        if (!per_channel) break;
    }
    return true;
}

const float *bpcc_ref_weight(const struct xargs *a, const struct bpcc_module *m, const char *wn, int64_t n, float **owned)
{
    *owned = NULL;
    const float *p = bpcc_mtensor_n(a, m, wn, n);
    struct bpcc_qparams q;
    if (!p) return NULL;
    if (!bpcc_module_weight_qparams_of(m, wn, &q)) {
        /* used as it is where PyTorch's reference RNNs use it so: a float dtype, or no dtype or
        ** qscheme; an integer dtype with a qscheme but without its buffers is refused (PyTorch's
        ** quantize fails on the missing scale) */
        char k[2][160];
        snprintf(k[0], sizeof k[0], "%s_qscheme", wn);
        snprintf(k[1], sizeof k[1], "%s_dtype", wn);
        const struct bpcc_value *qs = bpcc_module_attr(m, k[0]), *dt = bpcc_module_attr(m, k[1]);
        if (!qs || qs->kind == BPCC_VAL_NONE || !dt || dt->kind != BPCC_VAL_DTYPE || dt->u.dtype == BPCC_DTYPE_F32)
            return p;
        bpcc_xerr(a, "%s needs %s_scale and %s_zero_point buffers with a value per %s", m->name, wn, wn,
                  qs->kind == BPCC_VAL_SYMBOL && strstr(qs->u.s, "per_channel") ? "channel" : "tensor");
        return NULL;
    }
    if (q.kind == BPCC_QPARAMS_FLOAT16) return p; /* float16 weights are used as they are */
    const struct bpcc_tensor *w = bpcc_mtensor(m, wn);
    float *fq = bpcc_malloc((size_t)(n ? n : 1) * sizeof *fq);
    if (!fq) {
        bpcc_diag_nomem(a->d);
        return NULL;
    }
    if (!bpcc_fake_quantize_weight(w, &q, fq)) {
        bpcc_xfree(fq);
        bpcc_xerr(a, "%s needs %s_scale and %s_zero_point buffers with a value per %s", m->name, wn, wn,
                  q.kind == BPCC_QPARAMS_PER_CHANNEL ? "channel" : "tensor");
        return NULL;
    }
    return *owned = fq;
}

/* torch.ao.nn.quantized.reference.{Conv1d,Conv2d,Conv3d,Linear,ConvTranspose*}: the float op on
** the weight quantized and dequantized with the module's weight qparams (per tensor or per
** channel along weight_axis), as _quantize_and_dequantize_weight does */
BPCC_HOT static enum bpcc_status k_reference(const struct xargs *a, struct xval *out)
{
    const struct bpcc_module *m = a->module;
    const struct bpcc_tensor *w = bpcc_mtensor(m, "weight");
    if (!w) return bpcc_xerr(a, "%s has no float32 weight", m->name);
    const struct bpcc_value *qd = bpcc_module_attr(m, "weight_dtype");
    enum bpcc_dtype dt = qd && qd->kind == BPCC_VAL_DTYPE ? qd->u.dtype : BPCC_DTYPE_QINT8;
    if (dt != BPCC_DTYPE_QUINT8 && dt != BPCC_DTYPE_QINT8 && dt != BPCC_DTYPE_QINT32 && dt != BPCC_DTYPE_QUINT4X2 &&
        dt != BPCC_DTYPE_F16 && dt != BPCC_DTYPE_F32)
        return bpcc_xerr(a, "weight_dtype %s is not supported", bpcc_dtype_name(dt));
    uint64_t numel = 1;
    for (uint32_t i = 0; i < w->ndim; i++) numel *= (uint64_t)w->dims[i];
    float *fq = bpcc_malloc((numel ? numel : 1) * sizeof *fq);
    if (!fq) return bpcc_diag_nomem(a->d);
    struct bpcc_qparams q;
    if (dt == BPCC_DTYPE_F16 || dt == BPCC_DTYPE_F32) {
        memcpy(fq, w->data, numel * sizeof *fq); /* float weights: no fake quant */
    } else if (!bpcc_module_weight_qparams(m, &q) || !bpcc_fake_quantize_weight(w, &q, fq)) {
        bpcc_xfree(fq);
        return bpcc_xerr(a, "%s needs weight_scale and weight_zero_point buffers with a value per %s", m->name,
                         q.kind == BPCC_QPARAMS_PER_CHANNEL ? "channel" : "tensor");
    }
    struct xargs sub = *a;
    sub.weight_override = fq;
    enum bpcc_status st;
    const char *t = m->type + strlen("torch.ao.nn.quantized.reference.");
    if (!strcmp(t, "Linear")) st = k_linear(&sub, out);
    else if (!strcmp(t, "Embedding")) st = k_embedding(&sub, out);
    else if (!strcmp(t, "EmbeddingBag")) st = k_embedding_bag(&sub, out);
    else if (!strncmp(t, "ConvTranspose", 13)) st = k_conv_transpose(&sub, out);
    else st = k_conv(&sub, out);
    bpcc_xfree(fq);
    return st;
}

/* }================================================ */

const struct xop bpcc_nn_ops[] = {
    {'m', "torch.nn.Conv1d", k_conv}, {'m', "torch.nn.Conv2d", k_conv}, {'m', "torch.nn.Conv3d", k_conv},
    {'m', "torch.nn.ConvTranspose1d", k_conv_transpose}, {'m', "torch.nn.ConvTranspose2d", k_conv_transpose},
    {'f', "torch.nn.functional.conv3d", k_conv}, {'f', "torch.nn.functional.conv_transpose1d", k_conv_transpose},
    {'f', "torch.nn.functional.conv_transpose2d", k_conv_transpose}, {'m', "torch.nn.Linear", k_linear},
    {'m', "torch.ao.nn.quantized.reference.Linear", k_reference},
    {'m', "torch.ao.nn.quantized.reference.Embedding", k_reference},
    {'m', "torch.ao.nn.quantized.reference.EmbeddingBag", k_reference}, {'m', "torch.nn.EmbeddingBag", k_embedding_bag},
    {'f', "torch.nn.functional.embedding_bag", k_embedding_bag},
    {'m', "torch.ao.nn.quantized.reference.Conv1d", k_reference},
    {'m', "torch.ao.nn.quantized.reference.Conv2d", k_reference},
    {'m', "torch.ao.nn.quantized.reference.Conv3d", k_reference},
    {'m', "torch.ao.nn.quantized.reference.ConvTranspose1d", k_reference},
    {'m', "torch.ao.nn.quantized.reference.ConvTranspose2d", k_reference}, {'m', "torch.nn.BatchNorm1d", k_batch_norm},
    {'m', "torch.nn.BatchNorm2d", k_batch_norm}, {'m', "torch.nn.BatchNorm3d", k_batch_norm},
    {'m', "torch.nn.LayerNorm", k_layer_norm}, {'m', "torch.nn.MaxPool1d", k_max_pool1d},
    {'m', "torch.nn.MaxPool2d", k_max_pool2d}, {'m', "torch.nn.MaxPool3d", k_max_pool3d},
    {'m', "torch.nn.AvgPool1d", k_avg_pool1d}, {'m', "torch.nn.AvgPool2d", k_avg_pool2d},
    {'m', "torch.nn.AvgPool3d", k_avg_pool3d}, {'m', "torch.nn.AdaptiveAvgPool1d", bpcc_k_adaptive_avg_pool1d},
    {'m', "torch.nn.AdaptiveAvgPool2d", bpcc_k_adaptive_avg_pool2d},
    {'m', "torch.nn.AdaptiveAvgPool3d", bpcc_k_adaptive_avg_pool3d},
    {'m', "torch.nn.AdaptiveMaxPool1d", k_adaptive_max_pool1d},
    {'m', "torch.nn.AdaptiveMaxPool2d", k_adaptive_max_pool2d},
    {'m', "torch.nn.AdaptiveMaxPool3d", k_adaptive_max_pool3d}, {'f', "torch.nn.functional.conv1d", k_conv},
    {'f', "torch.nn.functional.conv2d", k_conv}, {'f', "torch.nn.functional.linear", k_linear},
    {'f', "torch.nn.functional.batch_norm", k_batch_norm}, {'f', "torch.nn.functional.layer_norm", k_layer_norm},
    {'f', "torch.nn.functional.max_pool1d", k_max_pool1d}, {'f', "torch.nn.functional.max_pool2d", k_max_pool2d},
    {'f', "torch.nn.functional.max_pool3d", k_max_pool3d}, {'f', "torch.nn.functional.avg_pool1d", k_avg_pool1d},
    {'f', "torch.nn.functional.avg_pool2d", k_avg_pool2d}, {'f', "torch.nn.functional.avg_pool3d", k_avg_pool3d},
    {'f', "torch.nn.functional.adaptive_avg_pool1d", bpcc_k_adaptive_avg_pool1d},
    {'f', "torch.nn.functional.adaptive_avg_pool2d", bpcc_k_adaptive_avg_pool2d},
    {'f', "torch.nn.functional.adaptive_avg_pool3d", bpcc_k_adaptive_avg_pool3d},
    {'f', "torch.nn.functional.adaptive_max_pool1d", k_adaptive_max_pool1d},
    {'f', "torch.nn.functional.adaptive_max_pool2d", k_adaptive_max_pool2d},
    {'f', "torch.nn.functional.adaptive_max_pool3d", k_adaptive_max_pool3d}, {'f', "torch.matmul", k_matmul},
    {'f', "torch.mm", k_matmul}, {'t', "mm", k_matmul}, {'f', "torch.mv", k_matmul}, {'t', "mv", k_matmul},
    {'f', "torch.dot", k_matmul}, {'t', "dot", k_matmul},
    {'f', "operator.matmul", k_matmul}, {'f', "torch.bmm", k_matmul}, {'t', "matmul", k_matmul},
    {'m', "torch.nn.GroupNorm", k_group_norm}, {'f', "torch.nn.functional.group_norm", k_group_norm},
    {'m', "torch.nn.InstanceNorm1d", k_instance_norm}, {'m', "torch.nn.InstanceNorm2d", k_instance_norm},
    {'m', "torch.nn.InstanceNorm3d", k_instance_norm}, {'f', "torch.nn.functional.instance_norm", k_instance_norm_f}, {'m', "torch.nn.PReLU", k_prelu},
    {'f', "torch.nn.functional.prelu", k_prelu}, {'f', "torch.prelu", k_prelu}, {'f', "torch.addmm", k_addmm},
    {'t', "addmm", k_addmm}, {'f', "torch.baddbmm", k_addmm}, {'t', "baddbmm", k_addmm}, {'t', "bmm", k_matmul},
    {'f', "torch.linalg.matmul", k_matmul}, {'m', "torch.nn.Embedding", k_embedding},
    {'f', "torch.nn.functional.embedding", k_embedding}, {'m', "torch.nn.LPPool1d", k_lp_pool1d},
    {'f', "torch.nn.functional.lp_pool1d", k_lp_pool1d}, {'m', "torch.nn.LPPool2d", k_lp_pool2d},
    {'f', "torch.nn.functional.lp_pool2d", k_lp_pool2d}, {'m', "torch.nn.LocalResponseNorm", k_local_response_norm},
    {'f', "torch.nn.functional.local_response_norm", k_local_response_norm}, {0}
};
