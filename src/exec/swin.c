/*
** swin.c — the three functions torchvision's Swin Transformers (swin_t/s/b, swin_v2_t/s/b) wrap
** with torch.fx.wrap, so that a traced model calls them as functions instead of tracing through
** them: shifted_window_attention (windowed multi-head self-attention with a relative position
** bias, on cyclically shifted windows with their mask; Swin V2's cosine attention when given a
** logit scale), _get_relative_position_bias (the bias table gathered by the index buffer) and
** _patch_merging_pad (the 2 x 2 neighbours of each pixel side by side in the channels).
**
** quantize_fx leaves these calls in float (no backend config has a pattern for them), so the
** interpreter runs each as one op, step by step as torchvision 0.14's Python does: the same
** padding, shift, window order, mask values and order of the additions. Matrix products through
** BLAS; dropout with p > 0 is refused (the functions call F.dropout in training mode whatever the
** module's mode, so PyTorch drops at random there).
*/
#include "exec.h"

#include <cblas.h>
#include <math.h>

#define SWIN "torchvision.models.swin_transformer."

/* sizes past any Swin model (windows of 7 or 8, up to 48 heads of 32 channels), which keep every
** product of them within 64 bits */
#define MAX_WINDOW 1024
#define MAX_CHANNELS 65536

/* Python's slice [start:stop] of a dimension of n (None: stop = INT64_MAX) as [*lo, *hi) */
static void py_slice(int64_t start, int64_t stop, int64_t n, int64_t *lo, int64_t *hi)
{
    bpcc_slice_bounds(start, stop == INT64_MAX ? n : stop, n, lo, hi);
}

/* an optional tensor argument of n elements: *out NULL when absent */
static bool opt_tensor(const struct xargs *a, uint32_t i, const char *name, uint64_t n, const struct xtensor **out)
{
    *out = NULL;
    if (bpcc_xarg_absent(a, i, name)) return true;
    if (!bpcc_xarg_tensor(a, i, name, out)) return false;
    if ((*out)->numel != n) {
        bpcc_xerr(a, "%s has %llu elements where %llu are needed", name, (unsigned long long)(*out)->numel,
                  (unsigned long long)n);
        return false;
    }
    return true;
}

/* _get_relative_position_bias(table [K, heads], index [N * N], window_size): [1, heads, N, N],
** element (h, i, j) = table[index[i * N + j], h] */
static enum bpcc_status k_relative_position_bias(const struct xargs *a, struct xval *out)
{
    const struct xtensor *table, *index;
    int64_t ws[2];
    if (!bpcc_xarg_tensor(a, 0, "relative_position_bias_table", &table) ||
        !bpcc_xarg_tensor(a, 1, "relative_position_index", &index) ||
        !bpcc_xarg_ints(a, 2, "window_size", 2, NULL, ws, NULL))
        return BPCC_ERR_GRAPH;
    if (table->ndim != 2) return bpcc_xerr(a, "the bias table must have 2 dimensions, not %u", table->ndim);
    if (ws[0] < 0 || ws[1] < 0 || ws[0] > MAX_WINDOW || ws[1] > MAX_WINDOW)
        return bpcc_xerr(a, "window size [%lld, %lld] is out of range", (long long)ws[0], (long long)ws[1]);
    int64_t N = ws[0] * ws[1], K = table->dims[0], H = table->dims[1];
    if (index->numel != (uint64_t)(N * N))
        return bpcc_xerr(a, "the index has %llu elements; a window of %lld x %lld needs %lld",
                         (unsigned long long)index->numel, (long long)ws[0], (long long)ws[1], (long long)(N * N));
    struct xtensor *y = bpcc_xtensor_new(4, (int64_t[]){1, H, N, N});
    if (!y) return bpcc_diag_nomem(a->d);
    for (int64_t p = 0; p < N * N; p++) {
        float f = index->data[p];
        if (!(f >= -(float)K && f < (float)K) || f != floorf(f)) { /* NaN too, before any conversion */
            bpcc_xtensor_free(y);
            return bpcc_xerr(a, "index %g at %lld is out of the bias table's %lld rows", (double)f, (long long)p,
                             (long long)K);
        }
        int64_t r = (int64_t)f;
        r = r < 0 ? r + K : r;
        for (int64_t h = 0; h < H; h++) y->data[h * N * N + p] = table->data[r * H + h];
    }
    return bpcc_xput(a, y, out);
}

/* _patch_merging_pad(x [..., H, W, C]): x padded with zeros to an even H and W, then
** cat([x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :], x[..., 0::2, 1::2, :], x[..., 1::2, 1::2, :]], -1) */
static enum bpcc_status k_patch_merging_pad(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "x", &x)) return BPCC_ERR_GRAPH;
    if (x->ndim < 3) return bpcc_xerr(a, "the input must have 3 dimensions or more, not %u", x->ndim);
    int64_t H = x->dims[x->ndim - 3], W = x->dims[x->ndim - 2], C = x->dims[x->ndim - 1];
    int64_t dims[BPCC_MAX_DIMS];
    memcpy(dims, x->dims, x->ndim * sizeof *dims);
    int64_t OH = (H + 1) / 2, OW = (W + 1) / 2;
    dims[x->ndim - 3] = OH;
    dims[x->ndim - 2] = OW;
    dims[x->ndim - 1] = 4 * C;
    struct xtensor *y = bpcc_xtensor_new(x->ndim, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t outer = x->numel / bpcc_nz((uint64_t)(H * W * C));
    if (!H || !W || !C) outer = y->numel / bpcc_nz((uint64_t)(OH * OW * 4 * C));
    static const int dy[4] = {0, 1, 0, 1}, dx[4] = {0, 0, 1, 1};
    float *q = y->data;
    for (uint64_t o = 0; o < outer; o++) {
        const float *img = x->data + o * (uint64_t)(H * W * C);
        for (int64_t i = 0; i < OH; i++)
            for (int64_t j = 0; j < OW; j++)
                for (int k = 0; k < 4; k++, q += C) {
                    int64_t sy = 2 * i + dy[k], sx = 2 * j + dx[k];
                    if (sy < H && sx < W) memcpy(q, img + (sy * W + sx) * C, (size_t)C * sizeof *q);
                    else memset(q, 0, (size_t)C * sizeof *q);
                }
    }
    return bpcc_xput(a, y, out);
}

/* the shifted windows' mask as torchvision builds it: a [pH, pW] map of region numbers set slice by
** slice (later slices over earlier ones, Python's slice rules), then per window 0 where two
** positions share a region and -100 where they do not */
static void region_map(int64_t pH, int64_t pW, const int64_t ws[2], const int64_t shift[2], int *map)
{
    const int64_t hs[3][2] = {{0, -ws[0]}, {-ws[0], -shift[0]}, {-shift[0], INT64_MAX}};
    const int64_t wsl[3][2] = {{0, -ws[1]}, {-ws[1], -shift[1]}, {-shift[1], INT64_MAX}};
    memset(map, 0, (size_t)(pH * pW) * sizeof *map);
    int count = 0;
    for (int h = 0; h < 3; h++)
        for (int w = 0; w < 3; w++, count++) {
            int64_t y0, y1, x0, x1;
            py_slice(hs[h][0], hs[h][1], pH, &y0, &y1);
            py_slice(wsl[w][0], wsl[w][1], pW, &x0, &x1);
            for (int64_t y = y0; y < y1; y++)
                for (int64_t x = x0; x < x1; x++) map[y * pW + x] = count;
        }
}

/* p[0 .. n) divided by its L2 norm, at least 1e-12 (F.normalize(dim=-1)) */
static void normalize(float *p, int64_t n)
{
    float s = 0.0f;
    for (int64_t k = 0; k < n; k++) s += p[k] * p[k];
    float norm = sqrtf(s);
    norm = norm > 1e-12f ? norm : 1e-12f;
    for (int64_t k = 0; k < n; k++) p[k] /= norm;
}

/* a map [B, H, W, C] cut into windows: padded to pH x pW, rolled by -shift */
struct windows {
    int64_t B, H, W, C, pH, pW, ws[2], shift[2];
};

/* The windows' rows, window after window ([B * windows * ws[0] * ws[1], C]) against the map: row q
** of a window holds the map's position q + shift (modulo the padded size), or the padding. gather:
** the rows are copied from the map, the padding's as zeros; else the rows go back to the map, the
** padding's dropped (the reverse roll and the crop). */
static void window_rows(const struct windows *g, float *map, float *rows, bool gather)
{
    size_t bytes = (size_t)g->C * sizeof *rows;
    for (int64_t b = 0; b < g->B; b++)
        for (int64_t wy = 0; wy < g->pH; wy += g->ws[0])
            for (int64_t wx = 0; wx < g->pW; wx += g->ws[1])
                for (int64_t iy = 0; iy < g->ws[0]; iy++)
                    for (int64_t ix = 0; ix < g->ws[1]; ix++, rows += g->C) {
                        int64_t py = (wy + iy + g->shift[0]) % g->pH, px = (wx + ix + g->shift[1]) % g->pW;
                        float *at = py < g->H && px < g->W ? map + ((b * g->H + py) * g->W + px) * g->C : NULL;
                        if (gather && at) memcpy(rows, at, bytes);
                        else if (gather) memset(rows, 0, bytes);
                        else if (at) memcpy(at, rows, bytes);
                    }
}

static enum bpcc_status k_shifted_window_attention(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *wqkv, *wproj, *rpb, *bqkv, *bproj, *lscale;
    int64_t ws[2], shift[2], heads;
    double adrop, drop;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "qkv_weight", &wqkv) ||
        !bpcc_xarg_tensor(a, 2, "proj_weight", &wproj) || !bpcc_xarg_tensor(a, 3, "relative_position_bias", &rpb) ||
        !bpcc_xarg_ints(a, 4, "window_size", 2, NULL, ws, NULL) || !bpcc_xarg_int(a, 5, "num_heads", 0, &heads) ||
        !bpcc_xarg_ints(a, 6, "shift_size", 2, NULL, shift, NULL) ||
        !bpcc_xarg_float(a, 7, "attention_dropout", 0.0, &adrop) || !bpcc_xarg_float(a, 8, "dropout", 0.0, &drop))
        return BPCC_ERR_GRAPH;
    if (!bpcc_xarg_required(a, 5, "num_heads")) return BPCC_ERR_GRAPH;
    if (adrop > 0 || drop > 0)
        return bpcc_xerr(a, "dropout with p > 0 drops at random here, in eval mode too (the function calls "
                            "F.dropout in training mode); export the model with its dropouts at 0");
    if (x->ndim != 4) return bpcc_xerr(a, "the input must be [B, H, W, C], not of %u dimensions", x->ndim);
    int64_t B = x->dims[0], H = x->dims[1], W = x->dims[2], C = x->dims[3];
    if (ws[0] <= 0 || ws[1] <= 0 || ws[0] > MAX_WINDOW || ws[1] > MAX_WINDOW)
        return bpcc_xerr(a, "window size [%lld, %lld] is out of range", (long long)ws[0], (long long)ws[1]);
    if (C > MAX_CHANNELS) return bpcc_xerr(a, "%lld channels are more than %d", (long long)C, MAX_CHANNELS);
    if (heads <= 0 || heads > MAX_CHANNELS || C % heads)
        return bpcc_xerr(a, "%lld channels do not split into %lld heads", (long long)C, (long long)heads);
    if (shift[0] < 0 || shift[1] < 0 || shift[0] > ws[0] || shift[1] > ws[1])
        return bpcc_xerr(a, "shift size [%lld, %lld] is out of the window's range", (long long)shift[0],
                         (long long)shift[1]);
    int64_t N = ws[0] * ws[1], hd = C / heads;
    if (wqkv->numel != (uint64_t)(3 * C * C) || wproj->numel != (uint64_t)(C * C))
        return bpcc_xerr(a, "the weights must be [%lld, %lld] and [%lld, %lld] for %lld channels", (long long)(3 * C),
                         (long long)C, (long long)C, (long long)C, (long long)C);
    if (rpb->numel != (uint64_t)(heads * N * N))
        return bpcc_xerr(a, "the relative position bias has %llu elements; %lld heads over %lld x %lld windows need %lld",
                         (unsigned long long)rpb->numel, (long long)heads, (long long)ws[0], (long long)ws[1],
                         (long long)(heads * N * N));
    if (!opt_tensor(a, 9, "qkv_bias", (uint64_t)(3 * C), &bqkv) || !opt_tensor(a, 10, "proj_bias", (uint64_t)C, &bproj) ||
        !opt_tensor(a, 11, "logit_scale", (uint64_t)heads, &lscale))
        return BPCC_ERR_GRAPH;

    int64_t lim = (int64_t)bpcc_exec_max_elements; /* dims of an empty input are not bound by its size */
    if (B > lim || H > lim || W > lim)
        return bpcc_xerr(a, "[%lld, %lld, %lld, %lld] makes more windows than the interpreter's limit", (long long)B,
                         (long long)H, (long long)W, (long long)C);
    int64_t pH = H + (ws[0] - H % ws[0]) % ws[0], pW = W + (ws[1] - W % ws[1]) % ws[1];
    int64_t s[2] = {ws[0] >= pH ? 0 : shift[0], ws[1] >= pW ? 0 : shift[1]};
    int64_t nWh = pH / ws[0], nWw = pW / ws[1], nW, rows;
    if (__builtin_mul_overflow(nWh, nWw, &nW) || __builtin_mul_overflow(B * N, nW, &rows) || rows > lim)
        return bpcc_xerr(a, "[%lld, %lld, %lld, %lld] makes more windows than the interpreter's limit", (long long)B,
                         (long long)H, (long long)W, (long long)C);
    bool shifted = s[0] + s[1] > 0 && rows; /* the mask's map: pH x pW <= rows */

    enum bpcc_status st = BPCC_OK;
    struct xtensor *X = bpcc_xtensor_new(2, (int64_t[]){rows, C}), *QKV = bpcc_xtensor_new(2, (int64_t[]){rows, 3 * C});
    struct xtensor *O = bpcc_xtensor_new(2, (int64_t[]){rows, C}), *Y = bpcc_xtensor_new(2, (int64_t[]){rows, C});
    struct xtensor *P = bpcc_xtensor_new(2, (int64_t[]){N, N}), *y = bpcc_xtensor_new(4, x->dims);
    int *map = shifted ? bpcc_malloc((size_t)(pH * pW) * sizeof *map + 1) : NULL;
    int *label = shifted ? bpcc_malloc((size_t)N * sizeof *label + 1) : NULL;
    float *bias = bqkv ? bpcc_malloc((size_t)(3 * C) * sizeof *bias + 1) : NULL;
    if (!X || !QKV || !O || !Y || !P || !y || (shifted && (!map || !label)) || (bqkv && !bias)) {
        st = bpcc_diag_nomem(a->d);
        goto done;
    }
    const struct windows geo = {B, H, W, C, pH, pW, {ws[0], ws[1]}, {s[0], s[1]}};
    window_rows(&geo, x->data, X->data, true);
    /* qkv = F.linear(x, qkv_weight, qkv_bias); Swin V2 zeroes the keys' third of the bias */
    if (bias) {
        memcpy(bias, bqkv->data, (size_t)(3 * C) * sizeof *bias);
        if (lscale) memset(bias + C, 0, (size_t)C * sizeof *bias);
    }
    bpcc_blas_set_threads(bpcc_exec_threads(a->ctx));
    bpcc_project(X->data, rows, C, wqkv->data, bias, 3 * C, QKV->data);
    if (lscale) { /* cosine attention: q and k normalized per head */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t h = 0; h < heads; h++) {
                normalize(QKV->data + r * 3 * C + h * hd, hd);
                normalize(QKV->data + r * 3 * C + C + h * hd, hd);
            }
    } else { /* q * (C // num_heads) ** -0.5, the Python float taken as float32 */
        float scale = (float)pow((double)hd, -0.5);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t k = 0; k < C; k++) QKV->data[r * 3 * C + k] *= scale;
    }
    if (shifted) region_map(pH, pW, ws, s, map);
    for (int64_t w = 0; w < B * nW; w++) {
        if (shifted) { /* this window's positions' regions */
            int64_t wy = (w % nW) / nWw, wx = (w % nW) % nWw;
            for (int64_t iy = 0; iy < ws[0]; iy++)
                for (int64_t ix = 0; ix < ws[1]; ix++)
                    label[iy * ws[1] + ix] = map[(wy * ws[0] + iy) * pW + wx * ws[1] + ix];
        }
        const float *q0 = QKV->data + w * N * 3 * C;
        for (int64_t h = 0; h < heads; h++) {
            if (N && hd)
                bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)N, (int)hd, 1.0f, q0 + h * hd,
                           (int)(3 * C), q0 + C + h * hd, (int)(3 * C), 0.0f, P->data, (int)N);
            else
                memset(P->data, 0, (size_t)(N * N) * sizeof *P->data);
            float ls = 1.0f;
            if (lscale) { /* torch.clamp(logit_scale, max=math.log(100.0)).exp() */
                float l = lscale->data[h], cap = (float)log(100.0);
                ls = expf(isnan(l) || l <= cap ? l : cap);
            }
            const float *bh = rpb->data + h * N * N;
            for (int64_t i = 0; i < N; i++) {
                float *p = P->data + i * N, mx = -INFINITY, sum = 0.0f;
                for (int64_t j = 0; j < N; j++) {
                    float v = lscale ? p[j] * ls : p[j];
                    v = v + bh[i * N + j];
                    if (shifted) v = v + (label[i] != label[j] ? -100.0f : 0.0f);
                    p[j] = v;
                    mx = v > mx ? v : mx;
                }
                for (int64_t j = 0; j < N; j++) sum += (p[j] = expf(p[j] - mx));
                for (int64_t j = 0; j < N; j++) p[j] /= sum;
            }
            /* O[window rows, head's columns] = attn v */
            if (N && hd)
                bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)hd, (int)N, 1.0f, P->data, (int)N,
                           q0 + 2 * C + h * hd, (int)(3 * C), 0.0f, O->data + w * N * C + h * hd, (int)C);
        }
    }
    /* x = F.linear(x, proj_weight, proj_bias) */
    bpcc_project(O->data, rows, C, wproj->data, bproj ? bproj->data : NULL, C, Y->data);
    window_rows(&geo, y->data, Y->data, false); /* windows reversed, rolled back by +shift, the padding cut off */
    *out = (struct xval){.k = XV_TENSOR, .u.t = y};
    y = NULL;
done:
    bpcc_xtensor_free(X);
    bpcc_xtensor_free(QKV);
    bpcc_xtensor_free(O);
    bpcc_xtensor_free(Y);
    bpcc_xtensor_free(P);
    bpcc_xtensor_free(y);
    bpcc_xfree(map);
    bpcc_xfree(label);
    bpcc_xfree(bias);
    return st;
}

const struct xop bpcc_swin_ops[] = {
    {'f', SWIN "shifted_window_attention", k_shifted_window_attention},
    {'f', SWIN "_get_relative_position_bias", k_relative_position_bias},
    {'f', SWIN "_patch_merging_pad", k_patch_merging_pad},
    {0},
};
