/*
** mvit.c — the four functions torchvision's multiscale vision transformers (mvit_v1_b, mvit_v2_s)
** wrap with torch.fx.wrap, so that a traced model calls them as functions instead of tracing
** through them: _unsqueeze and _squeeze (a sequence of tokens [B, N, C] taken as one head
** [B, 1, N, C] by the pooling layers, and back), _add_rel_pos (MViT v2's decomposed relative
** position bias added to the attention logits) and _add_shortcut (v2's residual pooling: the
** pooled query added to the attention's output).
**
** quantize_fx leaves these calls in float (no backend config has a pattern for them), so the
** interpreter runs each as one op, as torchvision 0.14's Python computes it. _add_rel_pos and
** _add_shortcut change their first argument in place (PyTorch's `attn[:, :, 1:, 1:] += rel_pos`,
** `x.add_(shortcut)`): the interpreter writes their result back into it (bpcc_node_in_place),
** as MViT reads the attention's output after an _add_shortcut whose result it drops, and convert
** keeps them.
*/
#include "exec.h"

#include <math.h>
#include <string.h>

#define MVIT "torchvision.models.video.mvit."

/* x.op(dim) for Tensor.unsqueeze / Tensor.squeeze, through the interpreter's own kernels */
static enum bpcc_status with_dim(const struct xargs *a, const char *op, int64_t dim, struct xval *out)
{
    struct xval pos[2] = {*bpcc_xarg(a, 0, "x"), {.k = XV_INT, .u.i = dim}};
    struct xargs sub = *a;
    sub.pos = pos;
    sub.n = 2;
    sub.n_kw = 0;
    sub.consume = false;
    return bpcc_exec_kernel(BPCC_NODE_CALL_METHOD, op)(&sub, out);
}

/* _unsqueeze(x, target_dim, expand_dim) -> (x, x.dim()): x.unsqueeze(expand_dim) when x has one
** dimension fewer than target_dim, x itself when it has target_dim, else an error */
static enum bpcc_status k_unsqueeze(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t target, expand;
    if (!bpcc_xarg_tensor(a, 0, "x", &x) || !bpcc_xarg_required(a, 1, "target_dim") || !bpcc_xarg_required(a, 2, "expand_dim") ||
        !bpcc_xarg_int(a, 1, "target_dim", 0, &target) || !bpcc_xarg_int(a, 2, "expand_dim", 0, &expand))
        return BPCC_ERR_GRAPH;
    int64_t nd = (int64_t)x->ndim;
    if (nd != target - 1 && nd != target)
        return bpcc_xerr(a, "a tensor of %lld dimensions where %lld or %lld are expected (torchvision's \"Unsupported "
                            "input dimension\")",
                         (long long)nd, (long long)target - 1, (long long)target);
    if (nd == target - 1 && (expand < -(nd + 1) || expand > nd))
        return bpcc_xerr(a, "expand_dim %lld is out of range for a tensor of %lld dimensions", (long long)expand,
                         (long long)nd);
    struct xval *items = bpcc_malloc(2 * sizeof *items);
    if (!items) return bpcc_diag_nomem(a->d);
    enum bpcc_status s = nd == target - 1 ? with_dim(a, "unsqueeze", expand, &items[0])
                         : bpcc_xval_copy(bpcc_xarg(a, 0, "x"), &items[0]) ? bpcc_diag_nomem(a->d) : BPCC_OK;
    if (s) {
        bpcc_xfree(items);
        return s;
    }
    items[1] = (struct xval){.k = XV_INT, .u.i = nd};
    *out = (struct xval){.k = XV_SEQ, .u.seq = {2, items}};
    return BPCC_OK;
}

/* _squeeze(x, target_dim, expand_dim, tensor_dim): x.squeeze(expand_dim) when tensor_dim is
** target_dim - 1 (the input _unsqueeze expanded), else x */
static enum bpcc_status k_squeeze(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t target, expand, tdim;
    if (!bpcc_xarg_tensor(a, 0, "x", &x) || !bpcc_xarg_required(a, 1, "target_dim") || !bpcc_xarg_required(a, 2, "expand_dim") ||
        !bpcc_xarg_required(a, 3, "tensor_dim") || !bpcc_xarg_int(a, 1, "target_dim", 0, &target) ||
        !bpcc_xarg_int(a, 2, "expand_dim", 0, &expand) || !bpcc_xarg_int(a, 3, "tensor_dim", 0, &tdim))
        return BPCC_ERR_GRAPH;
    if (tdim != target - 1) return bpcc_xval_copy(bpcc_xarg(a, 0, "x"), out) ? bpcc_diag_nomem(a->d) : BPCC_OK;
    return with_dim(a, "squeeze", expand, out);
}

/* y[region] += s[region] broadcast over it. The regions: y's and s's elements from index lo (y) and
** slo (s) along dimension `at`, all of the other dimensions; s has y's rank, and each dimension of
** its region has the extent of y's or 1 (checked by the caller). */
static void add_region(float *y, const int64_t *yd, uint32_t nd, uint32_t at, int64_t lo, const float *s,
                       const int64_t *sd, int64_t slo)
{
    if (!nd) {
        y[0] += s[0];
        return;
    }
    int64_t ext[BPCC_MAX_DIMS], ys[BPCC_MAX_DIMS], ss[BPCC_MAX_DIMS], idx[BPCC_MAX_DIMS] = {0};
    int64_t yst = 1, sst = 1, s_at = 1;
    for (uint32_t k = nd; k-- > 0;) {
        ext[k] = yd[k] - (k == at ? lo : 0);
        if (ext[k] <= 0) return;
        int64_t sext = sd[k] - (k == at ? slo : 0);
        ys[k] = yst;
        ss[k] = sext == 1 && ext[k] != 1 ? 0 : sst; /* broadcast: the one element throughout */
        if (k == at) s_at = sst;
        yst *= yd[k];
        sst *= sd[k];
    }
    y += lo * ys[at];
    s += slo * s_at;
    const int64_t inner = ext[nd - 1], sin = ss[nd - 1];
    for (;;) {
        int64_t yo = 0, so = 0;
        for (uint32_t k = 0; k + 1 < nd; k++) {
            yo += idx[k] * ys[k];
            so += idx[k] * ss[k];
        }
        for (int64_t i = 0; i < inner; i++) y[yo + i] += s[so + i * sin];
        uint32_t k = nd - 1;
        while (k > 0 && ++idx[k - 1] == ext[k - 1]) idx[--k] = 0;
        if (k == 0) return;
    }
}

/* _add_shortcut(x, shortcut, residual_with_cls_embed): x.add_(shortcut) when
** residual_with_cls_embed, else x[:, :, 1:, :] += shortcut[:, :, 1:, :] (the class token's row left
** as it is); x, changed, is the result */
static enum bpcc_status k_add_shortcut(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *sc;
    bool with_cls;
    if (!bpcc_xarg_tensor(a, 0, "x", &x) || !bpcc_xarg_tensor(a, 1, "shortcut", &sc) ||
        !bpcc_xarg_required(a, 2, "residual_with_cls_embed") || !bpcc_xarg_bool(a, 2, "residual_with_cls_embed", false, &with_cls))
        return BPCC_ERR_GRAPH;
    uint32_t nd = x->ndim;
    int64_t sd[BPCC_MAX_DIMS];
    if (with_cls) { /* the shortcut broadcast to x's shape, aligned at the last dimension */
        if (sc->ndim > nd) return bpcc_xerr(a, "the shortcut has %u dimensions, more than x's %u", sc->ndim, nd);
        for (uint32_t k = 0; k < nd; k++) sd[k] = k < nd - sc->ndim ? 1 : sc->dims[k - (nd - sc->ndim)];
    } else {
        if (nd < 4 || sc->ndim < 4) return bpcc_xerr(a, "x[:, :, 1:, :] needs 4 dimensions or more (x %u, the shortcut %u)", nd, sc->ndim);
        if (sc->ndim != nd) return bpcc_xerr(a, "the shortcut has %u dimensions, x %u", sc->ndim, nd);
        memcpy(sd, sc->dims, nd * sizeof *sd);
    }
    int64_t lo = with_cls ? 0 : 1;
    for (uint32_t k = 0; k < nd; k++) {
        int64_t xe = x->dims[k] - (k == 2 ? lo : 0), se = sd[k] - (k == 2 ? lo : 0);
        xe = xe < 0 ? 0 : xe;
        se = se < 0 ? 0 : se;
        if (se != xe && se != 1)
            return bpcc_xerr(a, "the shortcut%s's extent %lld does not broadcast to x%s's %lld at dimension %u",
                             with_cls ? "" : "[:, :, 1:, :]", (long long)se, with_cls ? "" : "[:, :, 1:, :]", (long long)xe, k);
    }
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    memcpy(y->data, x->data, x->numel * sizeof *y->data);
    add_region(y->data, x->dims, nd, with_cls ? 0 : 2, lo, sc->data, sd, lo);
    return bpcc_xput(a, y, out);
}

/* _interpolate(embedding [L, C], d): the table as it is when L is d, else each column linearly
** interpolated to d rows (F.interpolate(mode="linear") of its transpose, align_corners False);
** *owned holds a new table (freed by the caller), NULL when the input serves */
static bool rel_table(const struct xargs *a, const struct xtensor *e, int64_t d, int64_t C, const char *name,
                      const float **out, float **owned)
{
    *owned = NULL;
    if (e->ndim != 2 || e->dims[1] != C)
        return bpcc_xerr(a, "%s must be [rows, %lld], not of %u dimensions%s", name, (long long)C, e->ndim,
                         e->ndim == 2 ? " with another width" : ""),
               false;
    int64_t L = e->dims[0];
    if (L == d) {
        *out = e->data;
        return true;
    }
    if (!L) return bpcc_xerr(a, "%s is empty: it cannot be interpolated to %lld rows", name, (long long)d), false;
    float *t = bpcc_malloc((size_t)(C * (L + d)) * sizeof *t), *y = bpcc_malloc((size_t)(C * d) * sizeof *y);
    if (t && y)
        for (int64_t l = 0; l < L; l++) /* the columns as rows */
            for (int64_t c = 0; c < C; c++) t[c * L + l] = e->data[l * C + c];
    if (!t || !y || !bpcc_resize_linear(t, C, L, d, t + C * L)) {
        bpcc_xfree(t);
        bpcc_xfree(y);
        bpcc_diag_nomem(a->d);
        return false;
    }
    for (int64_t c = 0; c < C; c++)
        for (int64_t r = 0; r < d; r++) y[r * C + c] = t[C * L + c * d + r];
    bpcc_xfree(t);
    *out = *owned = y;
    return true;
}

/* the table rows _add_rel_pos gathers along one axis of q_n query and k_n key positions:
** dist[i][j] = i * max(k_n / q_n, 1) - (j + (1 - k_n)) * max(q_n / k_n, 1), in float32 as the
** tensors torch.arange makes compute it, truncated (.long()) */
static bool rel_rows(const struct xargs *a, int64_t q_n, int64_t k_n, int64_t rows, const char *axis, int64_t *idx)
{
    volatile float qr = (float)fmax((double)k_n / (double)q_n, 1.0), kr = (float)fmax((double)q_n / (double)k_n, 1.0);
    volatile float off = (float)(1.0 - (double)k_n);
    for (int64_t i = 0; i < q_n; i++)
        for (int64_t j = 0; j < k_n; j++) {
            volatile float p = (float)i * qr, b = (float)j + off;
            volatile float m = b * kr;
            volatile float dist = p - m;
            int64_t r = (int64_t)dist;
            if (r < -rows || r >= rows)
                return bpcc_xerr(a, "relative distance %lld along %s is out of the table's %lld rows", (long long)r, axis,
                                 (long long)rows),
                       false;
            idx[i * k_n + j] = r < 0 ? r + rows : r;
        }
    return true;
}

/* out[p, k] = sum_c r[p, c] R[row(p), k, c] for the p rows of r (C wide), whose row of R is given */
static void rel_logits(const float *r, int64_t C, const float *R, const int64_t *rowidx, int64_t kn, int64_t row,
                       float *out)
{
    const int64_t *ix = rowidx + row * kn;
    for (int64_t k = 0; k < kn; k++) {
        const float *t = R + ix[k] * C;
        float acc = 0.0f;
        for (int64_t c = 0; c < C; c++) acc += r[c] * t[c];
        out[k] = acc;
    }
}

/* _add_rel_pos(attn [B, heads, 1 + Nq, 1 + Nk], q [B, heads, 1 + Nq, C], q_thw, k_thw, rel_pos_h,
** rel_pos_w, rel_pos_t): attn[:, :, 1:, 1:] += the decomposed relative position bias; each of the
** query's (t, h, w) positions past the class token gets, for key (kt, kh, kw),
**   (q . Rh[h, kh] + q . Rw[w, kw]) + q . Rt[t, kt],
** Rh[h, kh] the row of rel_pos_h (interpolated to 2 max(q_h, k_h) - 1 rows where it has others)
** at their scaled distance (rel_rows); attn, changed, is the result */
static enum bpcc_status k_add_rel_pos(const struct xargs *a, struct xval *out)
{
    const struct xtensor *attn, *q, *tab[3];
    int64_t qthw[3], kthw[3];
    static const char *const names[3] = {"rel_pos_h", "rel_pos_w", "rel_pos_t"};
    if (!bpcc_xarg_tensor(a, 0, "attn", &attn) || !bpcc_xarg_tensor(a, 1, "q", &q) ||
        !bpcc_xarg_ints(a, 2, "q_thw", 3, NULL, qthw, NULL) || !bpcc_xarg_ints(a, 3, "k_thw", 3, NULL, kthw, NULL) ||
        !bpcc_xarg_tensor(a, 4, names[0], &tab[0]) || !bpcc_xarg_tensor(a, 5, names[1], &tab[1]) ||
        !bpcc_xarg_tensor(a, 6, names[2], &tab[2]))
        return BPCC_ERR_GRAPH;
    for (int k = 0; k < 3; k++)
        if (qthw[k] <= 0 || kthw[k] <= 0 || qthw[k] > (1 << 20) || kthw[k] > (1 << 20))
            return bpcc_xerr(a, "q_thw (%lld, %lld, %lld) and k_thw (%lld, %lld, %lld) must be positive sizes",
                             (long long)qthw[0], (long long)qthw[1], (long long)qthw[2], (long long)kthw[0],
                             (long long)kthw[1], (long long)kthw[2]);
    if (q->ndim != 4) return bpcc_xerr(a, "q must be [B, heads, tokens, C], not of %u dimensions", q->ndim);
    int64_t B = q->dims[0], H = q->dims[1], C = q->dims[3];
    int64_t Nq = qthw[0] * qthw[1] * qthw[2], Nk = kthw[0] * kthw[1] * kthw[2];
    if (q->dims[2] - 1 != Nq)
        return bpcc_xerr(a, "q has %lld tokens; q_thw (%lld, %lld, %lld) and the class token need %lld", (long long)q->dims[2],
                         (long long)qthw[0], (long long)qthw[1], (long long)qthw[2], (long long)Nq + 1);
    if (attn->ndim != 4 || attn->dims[0] != B || attn->dims[1] != H || attn->dims[2] != Nq + 1 || attn->dims[3] != Nk + 1)
        return bpcc_xerr(a, "attn must be [%lld, %lld, %lld, %lld] for q and k_thw", (long long)B, (long long)H,
                         (long long)Nq + 1, (long long)Nk + 1);
    /* axes in the order of the tables: h, w, t (q_thw's 1, 2, 0) */
    static const int ax[3] = {1, 2, 0};
    const float *R[3] = {0};
    float *owned[3] = {0};
    int64_t *idx[3] = {0}, kn[3];
    enum bpcc_status st = BPCC_OK;
    struct xtensor *y = NULL;
    float *logit = NULL;
    for (int k = 0; k < 3 && !st; k++) {
        int64_t qn = qthw[ax[k]];
        kn[k] = kthw[ax[k]];
        int64_t d = 2 * (qn > kn[k] ? qn : kn[k]) - 1;
        if (!rel_table(a, tab[k], d, C, names[k], &R[k], &owned[k])) st = BPCC_ERR_GRAPH;
        else if (!(idx[k] = bpcc_malloc((size_t)(qn * kn[k]) * sizeof *idx[k]))) st = bpcc_diag_nomem(a->d);
        else if (!rel_rows(a, qn, kn[k], d, names[k] + 8, idx[k])) st = BPCC_ERR_GRAPH;
    }
    if (!st && (!(y = bpcc_xlike(attn)) || !(logit = bpcc_malloc((size_t)(kn[0] + kn[1] + kn[2]) * sizeof *logit))))
        st = bpcc_diag_nomem(a->d);
    if (!st) {
        memcpy(y->data, attn->data, attn->numel * sizeof *y->data);
        float *lh = logit, *lw = logit + kn[0], *lt = logit + kn[0] + kn[1];
        const int64_t kt_n = kthw[0], kh_n = kthw[1], kw_n = kthw[2];
        for (int64_t bh = 0; bh < B * H; bh++)
            for (int64_t t = 0; t < qthw[0]; t++)
                for (int64_t h = 0; h < qthw[1]; h++)
                    for (int64_t w = 0; w < qthw[2]; w++) {
                        int64_t p = (t * qthw[1] + h) * qthw[2] + w;
                        const float *r = q->data + (bh * (Nq + 1) + 1 + p) * C;
                        rel_logits(r, C, R[0], idx[0], kn[0], h, lh);
                        rel_logits(r, C, R[1], idx[1], kn[1], w, lw);
                        rel_logits(r, C, R[2], idx[2], kn[2], t, lt);
                        float *row = y->data + (bh * (Nq + 1) + 1 + p) * (Nk + 1) + 1;
                        for (int64_t kt = 0; kt < kt_n; kt++)
                            for (int64_t kh = 0; kh < kh_n; kh++)
                                for (int64_t kw = 0; kw < kw_n; kw++) {
                                    float bias = (lh[kh] + lw[kw]) + lt[kt];
                                    row[(kt * kh_n + kh) * kw_n + kw] += bias;
                                }
                    }
        *out = (struct xval){.k = XV_TENSOR, .u.t = y};
        y = NULL;
    }
    bpcc_xtensor_free(y);
    bpcc_xfree(logit);
    for (int k = 0; k < 3; k++) {
        bpcc_xfree(owned[k]);
        bpcc_xfree(idx[k]);
    }
    return st;
}

const struct xop bpcc_mvit_ops[] = {
    {'f', MVIT "_unsqueeze", k_unsqueeze},
    {'f', MVIT "_squeeze", k_squeeze},
    {'f', MVIT "_add_rel_pos", k_add_rel_pos},
    {'f', MVIT "_add_shortcut", k_add_shortcut},
    {0},
};
