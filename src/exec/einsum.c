/*
** einsum.c — torch.einsum, and tensordot through it.
*/
#include "exec.h"

#include <cblas.h>

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
            return bpcc_xput(a, y, out);
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
    return bpcc_xput(a, y, out);
}

/* tensordot(a, b, dims=2): a's last `dims` dimensions against b's first ones, or the dimensions
** two lists pair ([da...], [db...]), summed: einsum's contraction with a's free letters, then b's */
static enum bpcc_status k_tensordot(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *y;
    if (!bpcc_xarg_tensor(a, 0, "a", &x) || !bpcc_xarg_tensor(a, 1, "b", &y)) return BPCC_ERR_GRAPH;
    int64_t da[BPCC_MAX_DIMS], db[BPCC_MAX_DIMS];
    uint32_t n = 0, nb = 0;
    const struct xval *dv = bpcc_xarg(a, 2, "dims");
    if (!dv || dv->k == XV_INT) {
        int64_t k = dv ? dv->u.i : 2;
        if (k < 0 || k > x->ndim || k > y->ndim)
            return bpcc_xerr(a, "tensordot's dims %lld is out of range for tensors of %u and %u dimensions", (long long)k,
                             x->ndim, y->ndim);
        for (n = 0; n < (uint32_t)k; n++) {
            da[n] = (int64_t)x->ndim - k + n;
            db[n] = n;
        }
    } else if (dv->k == XV_SEQ && dv->u.seq.n == 2) {
        struct xargs sub = *a; /* each list read as an argument of its own */
        sub.pos = dv->u.seq.items;
        sub.n = 2;
        sub.n_kw = 0;
        if (!bpcc_xarg_ints(&sub, 0, "dims[0]", 0, NULL, da, &n) || !bpcc_xarg_ints(&sub, 1, "dims[1]", 0, NULL, db, &nb))
            return BPCC_ERR_GRAPH;
        if (n != nb) return bpcc_xerr(a, "tensordot's two lists of dims differ in length (%u, %u)", n, nb);
    } else {
        return bpcc_xerr(a, "tensordot's dims must be an int or two lists of dimensions");
    }
    char letter[2][BPCC_MAX_DIMS];
    for (uint32_t i = 0; i < x->ndim; i++) letter[0][i] = (char)('a' + i);
    for (uint32_t i = 0; i < y->ndim; i++) letter[1][i] = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (!bpcc_xdim(a, &da[k], x->ndim) || !bpcc_xdim(a, &db[k], y->ndim)) return BPCC_ERR_GRAPH;
        if (letter[1][db[k]]) return bpcc_xerr(a, "tensordot pairs dimension %lld of b twice", (long long)db[k]);
        letter[1][db[k]] = letter[0][da[k]];
    }
    for (uint32_t i = 0, next = x->ndim; i < y->ndim; i++)
        if (!letter[1][i]) letter[1][i] = (char)('a' + next++);
    char eq[3 * BPCC_MAX_DIMS + 8], *p = eq;
    bool summed[2][BPCC_MAX_DIMS] = {{0}};
    for (uint32_t k = 0; k < n; k++) {
        if (summed[0][da[k]]) return bpcc_xerr(a, "tensordot pairs dimension %lld of a twice", (long long)da[k]);
        summed[0][da[k]] = summed[1][db[k]] = true;
    }
    memcpy(p, letter[0], x->ndim), p += x->ndim, *p++ = ',';
    memcpy(p, letter[1], y->ndim), p += y->ndim, *p++ = '-', *p++ = '>';
    for (int t = 0; t < 2; t++)
        for (uint32_t i = 0; i < (t ? y->ndim : x->ndim); i++)
            if (!summed[t][i]) *p++ = letter[t][i];
    *p = 0;
    struct xval pos[3] = {{.k = XV_STR, .u.s = eq}, {.k = XV_TENSOR, .u.t = (struct xtensor *)x},
                          {.k = XV_TENSOR, .u.t = (struct xtensor *)y}};
    struct xargs sub = *a;
    sub.pos = pos;
    sub.n = 3;
    sub.n_kw = 0;
    sub.consume = false;
    return k_einsum(&sub, out);
}

const struct xop bpcc_einsum_ops[] = {
    {'f', "torch.einsum", k_einsum}, {'f', "torch.tensordot", k_tensordot}, {0}
};
