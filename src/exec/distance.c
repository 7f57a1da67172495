/*
** distance.c — similarities and distances between tensors: F.cosine_similarity and
** nn.CosineSimilarity, F.pairwise_distance and nn.PairwiseDistance, torch.cdist. Sums in double
** per output element (within ~1e-7 relative of PyTorch's float sums); cdist directly, or for p = 2
** over more than 25 rows by matrix products as PyTorch does (whose cancellation moves the values
** by up to ~1e-4 of the largest from the direct form's).
*/
#include "exec.h"

#include <cblas.h>
#include <math.h>

/* the p-norm's accumulation of one |d| and its end (p 0: nonzeros counted, inf: the largest) */
static double p_add(double acc, double d, double p)
{
    d = fabs(d);
    return p == 2 ? acc + d * d : p == 1 ? acc + d : p == 0 ? acc + (d != 0) : isinf(p) ? (d > acc || isnan(d) ? d : acc)
                                                                                         : acc + pow(d, p);
}
static double p_end(double acc, double p)
{
    return p == 2 ? sqrt(acc) : p == 1 || p == 0 || isinf(p) ? acc : pow(acc, 1 / p);
}

/* two tensors broadcast together: the common dims and each one's strides in them (0 where it is
** broadcast); false with an error when they do not broadcast */
static bool broadcast2(const struct xargs *a, const struct xtensor *u, const struct xtensor *v, uint32_t *nd,
                       int64_t *dims, int64_t *su, int64_t *sv)
{
    *nd = u->ndim > v->ndim ? u->ndim : v->ndim;
    int64_t ru = 1, rv = 1;
    for (int i = (int)*nd - 1; i >= 0; i--) {
        int iu = i - (int)(*nd - u->ndim), iv = i - (int)(*nd - v->ndim);
        int64_t du = iu >= 0 ? u->dims[iu] : 1, dv = iv >= 0 ? v->dims[iv] : 1;
        if (du != dv && du != 1 && dv != 1) {
            bpcc_xerr(a, "shapes cannot be broadcast (dimension %d: %lld vs %lld)", i, (long long)du, (long long)dv);
            return false;
        }
        dims[i] = du == 1 ? dv : du;
        su[i] = du == 1 ? 0 : ru;
        sv[i] = dv == 1 ? 0 : rv;
        ru *= du;
        rv *= dv;
    }
    return true;
}

enum pair_op { PAIR_COSINE, PAIR_DISTANCE };

/* cosine_similarity(x1, x2, dim=1, eps=1e-8): sum(x1 x2) / (max(|x1|, eps) max(|x2|, eps)), each norm
** clamped on its own as PyTorch 1.13 does (its documentation's max(|x1| |x2|, eps) is not what it computes);
** pairwise_distance(x1, x2, p=2, eps=1e-6, keepdim=False): the p-norm of x1 - x2 + eps over the
** last dimension. Both over the inputs broadcast together. */
static enum bpcc_status pairwise(const struct xargs *a, enum pair_op op, struct xval *out)
{
    const struct xtensor *u, *v;
    int64_t dim = op == PAIR_COSINE ? 1 : -1;
    double eps = op == PAIR_COSINE ? 1e-8 : 1e-6, p = 2;
    bool keep = false;
    if (!bpcc_xarg_tensor(a, 0, "x1", &u) || !bpcc_xarg_tensor(a, 1, "x2", &v)) return BPCC_ERR_GRAPH;
    if (a->module) {
        if (op == PAIR_COSINE) dim = bpcc_mattr_int(a->module, "dim", 1);
        else p = bpcc_mattr_float(a->module, "norm", 2), keep = bpcc_mattr_bool(a->module, "keepdim", false);
        eps = bpcc_mattr_float(a->module, "eps", eps);
    } else if (op == PAIR_COSINE ? !bpcc_xarg_int(a, 2, "dim", 1, &dim) || !bpcc_xarg_float(a, 3, "eps", eps, &eps)
                                 : !bpcc_xarg_float(a, 2, "p", 2, &p) || !bpcc_xarg_float(a, 3, "eps", eps, &eps) ||
                                       !bpcc_xarg_bool(a, 4, "keepdim", false, &keep)) {
        return BPCC_ERR_GRAPH;
    }
    if (p < 0 || p != p) return bpcc_xerr(a, "p must be non-negative, not %g", p);
    uint32_t nd;
    int64_t dims[BPCC_MAX_DIMS], su[BPCC_MAX_DIMS], sv[BPCC_MAX_DIMS];
    if (!broadcast2(a, u, v, &nd, dims, su, sv)) return BPCC_ERR_GRAPH;
    if (!nd) return bpcc_xerr(a, "the inputs need a dimension to reduce");
    if (!bpcc_xdim(a, &dim, nd)) return BPCC_ERR_GRAPH;
    int64_t odims[BPCC_MAX_DIMS], idx[BPCC_MAX_DIMS] = {0};
    uint32_t ond = 0;
    for (uint32_t i = 0; i < nd; i++)
        if ((int64_t)i != dim) odims[ond++] = dims[i];
        else if (keep) odims[ond++] = 1;
    struct xtensor *y = bpcc_xtensor_new(ond, odims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t n = dims[dim];
    for (uint64_t e = 0; e < y->numel; e++) {
        int64_t ou = 0, ov = 0;
        for (uint32_t i = 0; i < nd; i++) ou += idx[i] * su[i], ov += idx[i] * sv[i];
        double s12 = 0, s1 = 0, s2 = 0;
        for (int64_t k = 0; k < n; k++) {
            double x1 = u->data[ou + k * su[dim]], x2 = v->data[ov + k * sv[dim]];
            if (op == PAIR_COSINE) s12 += x1 * x2, s1 += x1 * x1, s2 += x2 * x2;
            else s12 = p_add(s12, (float)((float)(x1 - x2) + (float)eps), p);
        }
        y->data[e] = op == PAIR_COSINE ? (float)(s12 / (fmax(sqrt(s1), eps) * fmax(sqrt(s2), eps))) : (float)p_end(s12, p);
        for (int i = (int)nd - 1; i >= 0; i--) { /* the next output element: every dimension but dim */
            if ((int64_t)i == dim) continue;
            if (++idx[i] < dims[i]) break;
            idx[i] = 0;
        }
    }
    return bpcc_xput(a, y, out);
}

static enum bpcc_status k_cosine_similarity(const struct xargs *a, struct xval *out) { return pairwise(a, PAIR_COSINE, out); }
static enum bpcc_status k_pairwise_distance(const struct xargs *a, struct xval *out) { return pairwise(a, PAIR_DISTANCE, out); }

/* ATen's _euclidean_dist for one batch: [-2 u, |u|^2, 1] [v, 1, |v|^2]^T through a GEMM, clamped at 0,
** square roots: cancellation and all, as PyTorch computes p = 2 over more than 25 rows */
static bool euclid_by_gemm(const float *U, const float *V, int64_t P, int64_t R, int64_t M, float *Y)
{
    int64_t K = M + 2;
    float *A = bpcc_malloc((size_t)(P * K) * sizeof *A + 1), *B = bpcc_malloc((size_t)(R * K) * sizeof *B + 1);
    if (!A || !B) {
        bpcc_xfree(A);
        bpcc_xfree(B);
        return false;
    }
    for (int64_t i = 0; i < P; i++) {
        float n = 0;
        for (int64_t k = 0; k < M; k++) A[i * K + k] = -2.0f * U[i * M + k], n += U[i * M + k] * U[i * M + k];
        A[i * K + M] = n;
        A[i * K + M + 1] = 1.0f;
    }
    for (int64_t j = 0; j < R; j++) {
        float n = 0;
        for (int64_t k = 0; k < M; k++) B[j * K + k] = V[j * M + k], n += V[j * M + k] * V[j * M + k];
        B[j * K + M] = 1.0f;
        B[j * K + M + 1] = n;
    }
    bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)P, (int)R, (int)K, 1.0f, A, (int)K, B, (int)K, 0.0f, Y, (int)R);
    for (int64_t e = 0; e < P * R; e++) Y[e] = sqrtf(Y[e] > 0.0f ? Y[e] : 0.0f);
    bpcc_xfree(A);
    bpcc_xfree(B);
    return true;
}

/* cdist(x1, x2, p=2.0, compute_mode=...): [*, P, M] and [*, R, M], the batch dimensions broadcast,
** to [*, P, R], the p-norm of each pair of rows' difference: directly, or for p = 2 by matrix
** products as PyTorch chooses (compute_mode's default: over 25 rows in either) */
static enum bpcc_status k_cdist(const struct xargs *a, struct xval *out)
{
    const struct xtensor *u, *v;
    double p;
    if (!bpcc_xarg_tensor(a, 0, "x1", &u) || !bpcc_xarg_tensor(a, 1, "x2", &v) || !bpcc_xarg_float(a, 2, "p", 2, &p))
        return BPCC_ERR_GRAPH;
    if (p < 0 || p != p) return bpcc_xerr(a, "p must be non-negative, not %g", p);
    const char *mode = "use_mm_for_euclid_dist_if_necessary";
    const struct xval *mv = bpcc_xarg(a, 3, "compute_mode");
    if (mv && mv->k == XV_STR) mode = mv->u.s;
    else if (mv && mv->k != XV_NONE) return bpcc_xerr(a, "compute_mode must be a string");
    if (strcmp(mode, "use_mm_for_euclid_dist_if_necessary") && strcmp(mode, "use_mm_for_euclid_dist") &&
        strcmp(mode, "donot_use_mm_for_euclid_dist"))
        return bpcc_xerr(a, "compute_mode '%s' is none of PyTorch's three", mode);
    if (u->ndim < 2 || v->ndim < 2) return bpcc_xerr(a, "cdist takes tensors of 2 dimensions or more");
    int64_t M = u->dims[u->ndim - 1], P = u->dims[u->ndim - 2], R = v->dims[v->ndim - 2];
    int64_t lim = (int64_t)bpcc_exec_max_elements; /* an empty input's dims are not bound by its size */
    if (M > lim || P > lim || R > lim) return bpcc_xerr(a, "the inputs' dimensions are beyond the interpreter's limit");
    if (v->dims[v->ndim - 1] != M)
        return bpcc_xerr(a, "x1 and x2 must have the same number of columns (%lld, %lld)", (long long)M,
                         (long long)v->dims[v->ndim - 1]);
    /* the batch dimensions, broadcast as two tensors of those dimensions would be */
    struct xtensor bu = {.ndim = u->ndim - 2}, bv = {.ndim = v->ndim - 2};
    memcpy(bu.dims, u->dims, bu.ndim * sizeof *bu.dims);
    memcpy(bv.dims, v->dims, bv.ndim * sizeof *bv.dims);
    uint32_t nb;
    int64_t dims[BPCC_MAX_DIMS], su[BPCC_MAX_DIMS], sv[BPCC_MAX_DIMS], idx[BPCC_MAX_DIMS] = {0};
    if (!broadcast2(a, &bu, &bv, &nb, dims, su, sv)) return BPCC_ERR_GRAPH;
    if (nb + 2 > BPCC_MAX_DIMS) return bpcc_xerr(a, "too many batch dimensions");
    dims[nb] = P;
    dims[nb + 1] = R;
    struct xtensor *y = bpcc_xtensor_new(nb + 2, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t batches = y->numel / bpcc_nz((uint64_t)(P * R));
    if (!P || !R) batches = 0;
    for (uint64_t b = 0; b < batches; b++) {
        int64_t ou = 0, ov = 0;
        for (uint32_t i = 0; i < nb; i++) ou += idx[i] * su[i], ov += idx[i] * sv[i];
        const float *U = u->data + ou * P * M, *V = v->data + ov * R * M;
        float *Y = y->data + b * (uint64_t)(P * R);
        bool mm = p == 2 && M && (!strcmp(mode, "use_mm_for_euclid_dist") ||
                                  (!strcmp(mode, "use_mm_for_euclid_dist_if_necessary") && (P > 25 || R > 25)));
        if (mm && !euclid_by_gemm(U, V, P, R, M, Y)) {
            bpcc_xtensor_free(y);
            return bpcc_diag_nomem(a->d);
        }
        for (int64_t i = 0; i < P && !mm; i++)
            for (int64_t j = 0; j < R; j++) {
                double s = 0;
                for (int64_t k = 0; k < M; k++) s = p_add(s, (double)U[i * M + k] - V[j * M + k], p);
                Y[i * R + j] = (float)p_end(s, p);
            }
        for (int i = (int)nb - 1; i >= 0 && ++idx[i] == dims[i]; i--) idx[i] = 0;
    }
    return bpcc_xput(a, y, out);
}

const struct xop bpcc_distance_ops[] = {
    {'f', "torch.nn.functional.cosine_similarity", k_cosine_similarity},
    {'f', "torch.cosine_similarity", k_cosine_similarity},
    {'m', "torch.nn.CosineSimilarity", k_cosine_similarity},
    {'f', "torch.nn.functional.pairwise_distance", k_pairwise_distance},
    {'f', "torch.pairwise_distance", k_pairwise_distance},
    {'m', "torch.nn.PairwiseDistance", k_pairwise_distance},
    {'f', "torch.cdist", k_cdist},
    {0},
};
