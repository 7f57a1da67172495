/*
** shape.c — the kernels that move elements without computing new ones: views and reshapes,
** permutations, indexing (getitem, narrow, select), cat / stack and their inverses, padding, pixel
** shuffles, repeats, flips and rolls, expand; and size / getattr on tensors.
*/
#include "exec.h"

#include <math.h>

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
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
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
    if (!bpcc_xdim(a, &s, x->ndim) || !bpcc_xdim(a, &e, x->ndim)) return BPCC_ERR_GRAPH;
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
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
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
        if (!bpcc_xdim(a, &perm[i], x->ndim)) return BPCC_ERR_GRAPH;
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
        !bpcc_xarg_int(a, 2, "dim1", 1, &d1) || !bpcc_xdim(a, &d0, x->ndim) || !bpcc_xdim(a, &d1, x->ndim))
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
    if (!bpcc_xdim(a, &d, x->ndim + 1)) return BPCC_ERR_GRAPH;
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
        if (!bpcc_xarg_int(a, 1, "dim", 0, &d) || !bpcc_xdim(a, &d, x->ndim)) return BPCC_ERR_GRAPH;
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
        if (!bpcc_xarg_int(a, 1, "dim", 0, &d) || !bpcc_xdim(a, &d, x->ndim)) return BPCC_ERR_GRAPH;
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
    if (obj->k == XV_SEQ && obj->u.seq.n == 2 && (!strcmp(name->u.s, "min") || !strcmp(name->u.s, "max")))
        /* aminmax: torch.return_types (min, max) */
        return bpcc_xval_copy(&obj->u.seq.items[name->u.s[1] == 'a'], out) ? bpcc_diag_nomem(a->d) : BPCC_OK;
    if (obj->k == XV_TENSOR && !strcmp(name->u.s, "ndim")) {
        *out = (struct xval){.k = XV_INT, .u.i = obj->u.t->ndim};
        return BPCC_OK;
    }
    if (obj->k == XV_TENSOR && (!strcmp(name->u.s, "T") || !strcmp(name->u.s, "mT"))) {
        /* x.T: the dimensions reversed; x.mT: the last two swapped */
        const struct xtensor *x = obj->u.t;
        if (x->qdtype != BPCC_DTYPE_NONE) return bpcc_xerr(a, "%s of a quantized tensor", name->u.s);
        if (name->u.s[0] == 'm' && x->ndim < 2) return bpcc_xerr(a, "mT needs 2 dimensions or more, not %u", x->ndim);
        int64_t perm[BPCC_MAX_DIMS];
        for (uint32_t i = 0; i < x->ndim; i++) perm[i] = name->u.s[0] == 'T' ? (int64_t)(x->ndim - 1 - i) : (int64_t)i;
        if (name->u.s[0] == 'm') perm[x->ndim - 2] = x->ndim - 1, perm[x->ndim - 1] = x->ndim - 2;
        return permuted(a, x, perm, out);
    }
    return bpcc_xerr(a, "getattr %s is not supported", name->u.s);
}

/* x.dim(), x.ndimension(): the number of dimensions, an int */
static enum bpcc_status k_dim(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    *out = (struct xval){.k = XV_INT, .u.i = x->ndim};
    return BPCC_OK;
}

/* torch._assert(condition, message), which torch.fx keeps as a node (torchvision's vision
** transformer checks its input's size so): Python's `assert condition, message`. A tensor's truth
** is its one element's (more than one is ambiguous, as in PyTorch); a number's, a string's and a
** sequence's are Python's. Its value is None. */
static enum bpcc_status k_assert(const struct xargs *a, struct xval *out)
{
    const struct xval *c = bpcc_xarg(a, 0, "condition"), *m = bpcc_xarg(a, 1, "message");
    if (!c) return bpcc_xerr(a, "_assert needs a condition");
    bool ok;
    switch (c->k) {
    case XV_NONE: ok = false; break;
    case XV_BOOL: ok = c->u.b; break;
    case XV_INT: ok = c->u.i != 0; break;
    case XV_FLOAT: ok = c->u.f != 0.0; break;
    case XV_STR: ok = c->u.s[0] != '\0'; break;
    case XV_SEQ: case XV_DICT: ok = c->u.seq.n != 0; break;
    case XV_TENSOR:
        if (c->u.t->numel != 1)
            return bpcc_xerr(a, "_assert: the truth of a tensor of %llu elements is ambiguous",
                             (unsigned long long)c->u.t->numel);
        if (c->u.t->qdtype != BPCC_DTYPE_NONE) /* its data are integer values, not its truth */
            return bpcc_xerr(a, "_assert: the condition is a quantized tensor");
        ok = c->u.t->data[0] != 0.0f;
        break;
    default: ok = true; break; /* a slice, an ellipsis, an object: true in Python */
    }
    if (!ok) return bpcc_xerr(a, "assertion failed: %s", m && m->k == XV_STR ? m->u.s : "(no message)");
    *out = (struct xval){.k = XV_NONE};
    return BPCC_OK;
}

/* the elements a slice (start, stop, step; Python's rules, positive steps) takes of `size`: the
** first, the step and the count; false for a step below 1 */
static bool slice_range(const struct xval *slice, int64_t size, int64_t *first, int64_t *step, int64_t *count)
{
    const struct xval *s = slice->u.seq.items;
    int64_t st = s[2].k == XV_INT ? s[2].u.i : 1;
    if (st <= 0) return false;
    int64_t b, e;
    bpcc_slice_bounds(s[0].k == XV_INT ? s[0].u.i : 0, s[1].k == XV_INT ? s[1].u.i : size, size, &b, &e);
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
        return bpcc_xerr(a, v->u.t->boolean ? "a bool mask together with other indices is not supported"
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

/* {==================== selections whose shape depends on the data ==================== */

/* nonzero(input, *, as_tuple=False): the positions of the nonzero elements (NaN is) in row-major
** order, as an [n, ndim] tensor, or, as_tuple (and torch.where(condition)), ndim tensors of n (a
** 0-d input: one); positions held as floats (exact below 2^24) */
enum bpcc_status bpcc_xnonzero(const struct xargs *a, const struct xtensor *x, bool as_tuple, struct xval *out)
{
    int64_t n = 0, idx[BPCC_MAX_DIMS] = {0};
    for (uint64_t i = 0; i < x->numel; i++) n += x->data[i] != 0.0f;
    uint32_t nd = x->ndim, parts = as_tuple ? (nd ? nd : 1) : 1;
    struct xval *items = as_tuple ? bpcc_malloc(parts * sizeof *items) : NULL;
    if (as_tuple && !items) return bpcc_diag_nomem(a->d);
    struct xtensor *t[BPCC_MAX_DIMS] = {NULL};
    for (uint32_t p = 0; p < parts; p++) {
        t[p] = as_tuple ? bpcc_xtensor_new(1, &n) : bpcc_xtensor_new(2, (int64_t[]){n, nd});
        if (!t[p]) {
            for (uint32_t q = 0; q < p; q++) bpcc_xtensor_free(t[q]);
            bpcc_xfree(items);
            return bpcc_diag_nomem(a->d);
        }
    }
    uint64_t r = 0;
    for (uint64_t i = 0; i < x->numel; i++) {
        if (x->data[i] != 0.0f) {
            for (uint32_t d = 0; d < nd; d++)
                if (as_tuple) t[d]->data[r] = (float)idx[d];
                else t[0]->data[r * nd + d] = (float)idx[d];
            if (as_tuple && !nd) t[0]->data[r] = 0.0f;
            r++;
        }
        for (int d = (int)nd - 1; d >= 0 && ++idx[d] == x->dims[d]; d--) idx[d] = 0;
    }
    if (!as_tuple) return bpcc_xput(a, t[0], out);
    for (uint32_t p = 0; p < parts; p++) items[p] = (struct xval){.k = XV_TENSOR, .u.t = t[p]};
    *out = (struct xval){.k = XV_SEQ, .u.seq = {parts, items}};
    return BPCC_OK;
}

static enum bpcc_status k_nonzero(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    bool as_tuple;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_bool(a, UINT32_MAX, "as_tuple", false, &as_tuple))
        return BPCC_ERR_GRAPH;
    return bpcc_xnonzero(a, x, as_tuple, out);
}

/* x[mask] for a bool mask over x's leading dimensions: the selected slices stacked,
** [count, the other dimensions...] */
static enum bpcc_status mask_getitem(const struct xargs *a, const struct xtensor *x, const struct xtensor *m, struct xval *out)
{
    if (m->ndim > x->ndim) return bpcc_xerr(a, "a mask of %u dimensions indexes a %u-dimensional tensor", m->ndim, x->ndim);
    for (uint32_t d = 0; d < m->ndim; d++)
        if (m->dims[d] != x->dims[d])
            return bpcc_xerr(a, "the mask's size %lld does not match the tensor's %lld in dimension %u", (long long)m->dims[d],
                             (long long)x->dims[d], d);
    int64_t n = 0, dims[BPCC_MAX_DIMS];
    for (uint64_t i = 0; i < m->numel; i++) n += m->data[i] != 0.0f;
    uint64_t inner = 1;
    dims[0] = n;
    for (uint32_t d = m->ndim; d < x->ndim; d++) inner *= (uint64_t)(dims[1 + d - m->ndim] = x->dims[d]);
    struct xtensor *y = bpcc_xtensor_new(1 + x->ndim - m->ndim, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    for (uint64_t i = 0, r = 0; i < m->numel; i++)
        if (m->data[i] != 0.0f) memcpy(y->data + r++ * inner, x->data + i * inner, inner * sizeof(float));
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}

/* the strides of a mask m over x's dimensions (aligned at the last; 0 where m broadcasts), for
** masked_select and masked_scatter; false with an error when m does not broadcast to x's shape */
static bool mask_strides(const struct xargs *a, const struct xtensor *x, const struct xtensor *m, int64_t *ms)
{
    if (m->ndim > x->ndim) return bpcc_xerr(a, "the mask has more dimensions than the input"), false;
    int64_t st = 1;
    for (int d = (int)x->ndim - 1; d >= 0; d--) {
        int j = d - (int)(x->ndim - m->ndim);
        int64_t md = j >= 0 ? m->dims[j] : 1;
        if (md != 1 && md != x->dims[d])
            return bpcc_xerr(a, "the mask's size %lld cannot be broadcast to the input's %lld in dimension %d", (long long)md,
                             (long long)x->dims[d], d),
                   false;
        ms[d] = md == 1 ? 0 : st;
        st *= md;
    }
    return true;
}

/* the next element of x in row-major order: its index idx moves on, and the mask's offset *o with it */
static void mask_step(const struct xtensor *x, const int64_t *ms, int64_t *idx, uint64_t *o)
{
    for (int d = (int)x->ndim - 1; d >= 0; d--) {
        *o += (uint64_t)ms[d];
        if (++idx[d] < x->dims[d]) return;
        *o -= (uint64_t)(ms[d] * x->dims[d]);
        idx[d] = 0;
    }
}

/* masked_select(input, mask): the input's elements where the mask (broadcast to the input's
** shape) is true, in row-major order, as a 1-d tensor */
static enum bpcc_status k_masked_select(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *m;
    int64_t ms[BPCC_MAX_DIMS], idx[BPCC_MAX_DIMS] = {0};
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "mask", &m) || !mask_strides(a, x, m, ms))
        return BPCC_ERR_GRAPH;
    int64_t n = 0;
    for (uint64_t i = 0, o = 0; i < x->numel; i++, mask_step(x, ms, idx, &o)) n += m->data[o] != 0.0f;
    struct xtensor *y = bpcc_xtensor_new(1, &n);
    if (!y) return bpcc_diag_nomem(a->d);
    for (uint64_t i = 0, o = 0, r = 0; i < x->numel; i++, mask_step(x, ms, idx, &o)) {
        if (m->data[o] != 0.0f) y->data[r++] = x->data[i];
    }
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}

/* }================================================ */

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
    const struct xval *lone = ix->k == XV_SEQ && ix->u.seq.n == 1 ? &ix->u.seq.items[0] : ix;
    if (lone->k == XV_TENSOR && lone->u.t->boolean) return mask_getitem(a, x, lone->u.t, out);
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
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
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
    if (!bpcc_xdim(a, &dim, nd)) return BPCC_ERR_GRAPH;
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
    return bpcc_xput(a, y, out);
}

/* x's elements [start, start + len) along dimension dim, as a new tensor */
struct xtensor *bpcc_xnarrow(const struct xtensor *x, uint32_t dim, int64_t start, int64_t len)
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

/* chunk(input, chunks, dim=0), split(tensor, split_size_or_sections, dim=0), unbind(input,
** dim=0) and tensor_split(input, indices_or_sections, dim=0): a tuple of pieces along dim. chunk:
** pieces of ceil(size / chunks), the last shorter, possibly fewer than asked; split: pieces of the
** given size (the last shorter) or of the listed sizes, which must sum to size; unbind: every
** index, dim removed; tensor_split: n pieces of size / n, the first size % n one longer, or the
** pieces between the listed indices (Python's slice rules: negative from the end, clamped) */
enum piecing { P_CHUNK, P_SPLIT, P_UNBIND, P_TENSOR_SPLIT };

/* tensor_split's pieces as (start, length) pairs into *out (n of them); false with an error */
static bool tensor_split_bounds(const struct xargs *a, int64_t size, int64_t **out, int64_t *n)
{
    const struct xval *v = bpcc_xarg(a, 1, "indices_or_sections");
    if (!v) v = bpcc_xarg(a, 1, "sections");
    if (!v) v = bpcc_xarg(a, 1, "indices");
    if (!v) v = bpcc_xarg(a, 1, "tensor_indices_or_sections");
    int64_t sections = 0, n_idx = 0;
    const struct xval *list = NULL;
    const struct xtensor *t = NULL;
    if (v && v->k == XV_INT) sections = v->u.i;
    else if (v && v->k == XV_SEQ) list = v, n_idx = v->u.seq.n;
    else if (v && v->k == XV_TENSOR && v->u.t->ndim <= 1 && !v->u.t->qdtype) {
        t = v->u.t;
        if (t->ndim == 0) {
            if (t->data[0] != floorf(t->data[0])) return bpcc_xerr(a, "tensor_split's sections must be an integer"), false;
            sections = (int64_t)t->data[0], t = NULL;
        } else n_idx = (int64_t)t->numel;
    } else
        return bpcc_xerr(a, "tensor_split takes a number of sections, a list of indices or a 0-d or 1-d tensor of "
                            "them"),
               false;
    if (!list && !t && sections <= 0) return bpcc_xerr(a, "tensor_split's sections must be positive, not %lld", (long long)sections), false;
    *n = list || t ? n_idx + 1 : sections;
    if (*n > (int64_t)(UINT32_MAX / 4)) return bpcc_xerr(a, "%lld pieces are too many", (long long)*n), false;
    int64_t *b = *out = bpcc_malloc((size_t)*n * 2 * sizeof *b);
    if (!b) return bpcc_diag_nomem(a->d), false;
    if (!list && !t) {
        for (int64_t i = 0, at = 0; i < sections; i++) {
            int64_t len = size / sections + (i < size % sections);
            b[2 * i] = at, b[2 * i + 1] = len;
            at += len;
        }
        return true;
    }
    int64_t start = 0;
    for (int64_t i = 0; i <= n_idx; i++) {
        int64_t end = size;
        if (i < n_idx) {
            if (list && list->u.seq.items[i].k != XV_INT) {
                bpcc_xfree(b);
                return bpcc_xerr(a, "tensor_split's indices must be ints"), false;
            }
            double f = list ? (double)list->u.seq.items[i].u.i : (double)t->data[i];
            if (f != floor(f) || fabs(f) > 9e15) {
                bpcc_xfree(b);
                return bpcc_xerr(a, "tensor_split's indices must be integers"), false;
            }
            end = (int64_t)f;
        }
        int64_t lo, hi; /* at::slice: Python's bounds, the end at least the start */
        bpcc_slice_bounds(start, end, size, &lo, &hi);
        b[2 * i] = lo, b[2 * i + 1] = hi < lo ? 0 : hi - lo;
        start = end;
    }
    return true;
}

static enum bpcc_status pieces(const struct xargs *a, enum piecing how, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim;
    if (!bpcc_xarg_tensor(a, 0, how == P_SPLIT ? "tensor" : "input", &x) ||
        !bpcc_xarg_int(a, how == P_UNBIND ? 1 : 2, "dim", 0, &dim) || !bpcc_xdim(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    if ((how == P_UNBIND || how == P_TENSOR_SPLIT) && !x->ndim)
        return bpcc_xerr(a, "%s of a 0-d tensor", how == P_UNBIND ? "unbind" : "tensor_split");
    int64_t size = x->ndim ? x->dims[dim] : 1;
    const struct xval *v = NULL, *sections = NULL;
    int64_t piece = 1, n, *bounds = NULL;
    if (how == P_TENSOR_SPLIT) {
        if (!tensor_split_bounds(a, size, &bounds, &n)) return BPCC_ERR_GRAPH;
    } else if (how != P_UNBIND) {
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
    } else if (how != P_TENSOR_SPLIT) {
        if (!v || v->k != XV_INT || v->u.i < (how == P_CHUNK ? 1 : 0) || (how == P_SPLIT && !v->u.i && size))
            return bpcc_xerr(a, how == P_CHUNK ? "chunks must be a positive int" : "split_size must be a positive int");
        piece = how == P_CHUNK ? (size + v->u.i - 1) / v->u.i : v->u.i;
        n = piece ? (size + piece - 1) / piece : 1; /* an empty dimension gives one empty piece */
        if (!n) n = 1;
    }
    if (n > UINT32_MAX / 2) return bpcc_xerr(a, "%lld pieces are too many", (long long)n);
    struct xval *items = bpcc_malloc((n ? (size_t)n : 1) * sizeof *items);
    if (!items) {
        bpcc_xfree(bounds);
        return bpcc_diag_nomem(a->d);
    }
    *out = (struct xval){.k = XV_SEQ, .u.seq = {0, items}};
    for (int64_t at = 0; out->u.seq.n < n;) {
        int64_t len = sections ? sections->u.seq.items[out->u.seq.n].u.i : size - at < piece ? size - at : piece;
        if (bounds) {
            at = bounds[2 * out->u.seq.n];
            len = bounds[2 * out->u.seq.n + 1];
        }
        struct xtensor *t = bpcc_xnarrow(x, (uint32_t)dim, at, len);
        if (!t) {
            bpcc_xfree(bounds);
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
    bpcc_xfree(bounds);
    return BPCC_OK;
}

static enum bpcc_status k_chunk(const struct xargs *a, struct xval *out) { return pieces(a, P_CHUNK, out); }
static enum bpcc_status k_split(const struct xargs *a, struct xval *out) { return pieces(a, P_SPLIT, out); }
static enum bpcc_status k_unbind(const struct xargs *a, struct xval *out) { return pieces(a, P_UNBIND, out); }
static enum bpcc_status k_tensor_split(const struct xargs *a, struct xval *out) { return pieces(a, P_TENSOR_SPLIT, out); }

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
    uint64_t planes = x->numel / bpcc_nz((uint64_t)(C * H * W));
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
    return bpcc_xput(a, y, out);
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
    return bpcc_xput(a, y, out);
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

/* x.repeat(*sizes): the tensor tiled sizes[i] times along dimension i; more sizes than dimensions
** tile a tensor with leading dimensions of 1 */
static enum bpcc_status k_repeat(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t reps[BPCC_MAX_DIMS];
    uint32_t n = 0;
    if (!bpcc_xarg_tensor(a, 0, "self", &x) || !bpcc_xarg_sizes(a, 1, "sizes", reps, &n)) return BPCC_ERR_GRAPH;
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
    if (!bpcc_xarg_sizes(a, 1, "dims", reps, &n)) return BPCC_ERR_GRAPH;
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
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}

static enum bpcc_status k_cat_(const struct xargs *a, struct xval *out) { return k_cat(a, out, false); }
static enum bpcc_status k_stack(const struct xargs *a, struct xval *out) { return k_cat(a, out, true); }

/* hstack, vstack (row_stack), dstack and column_stack (tensors): cat after giving each tensor at
** least 1, 2 or 3 dimensions (atleast_1d/2d/3d: [n] -> [1, n] -> [1, n, 1], [m, n] -> [m, n, 1]),
** along dimension 0 (hstack of 1-d tensors, vstack), 1 (hstack, column_stack: 0-d and 1-d tensors
** as columns [n, 1]) or 2 (dstack). The tensors are read through headers of their own shape. */
enum stacking { S_H, S_V, S_D, S_COLUMN };

static enum bpcc_status stack_along(const struct xargs *a, enum stacking how, struct xval *out)
{
    const struct xval *l = bpcc_xarg(a, 0, "tensors");
    if (!l || l->k != XV_SEQ || !l->u.seq.n) return bpcc_xerr(a, "needs a non-empty list of tensors");
    uint32_t n = l->u.seq.n;
    struct xtensor *views = bpcc_malloc(n * sizeof *views);
    struct xval *items = bpcc_malloc(n * sizeof *items);
    if (!views || !items) {
        bpcc_xfree(views);
        bpcc_xfree(items);
        return bpcc_diag_nomem(a->d);
    }
    enum bpcc_status s = BPCC_OK;
    for (uint32_t k = 0; k < n && !s; k++) {
        if (l->u.seq.items[k].k != XV_TENSOR) {
            s = bpcc_xerr(a, "element %u is not a tensor", k);
            break;
        }
        struct xtensor *v = &views[k];
        *v = *l->u.seq.items[k].u.t;
        int64_t d0 = v->ndim ? v->dims[0] : 1, d1 = v->ndim > 1 ? v->dims[1] : 1;
        if (how == S_COLUMN && v->ndim <= 1) *v = (struct xtensor){.ndim = 2, .dims = {d0, 1}, .numel = v->numel, .data = v->data, .boolean = v->boolean};
        else if (how == S_H && !v->ndim) v->ndim = 1, v->dims[0] = 1;
        else if (how == S_V && v->ndim < 2) v->ndim = 2, v->dims[0] = 1, v->dims[1] = d0;
        else if (how == S_D && v->ndim < 3) {
            if (v->ndim < 2) v->dims[0] = 1, v->dims[1] = d0; /* [1, n, 1] */
            else v->dims[0] = d0, v->dims[1] = d1;
            v->dims[2] = 1;
            v->ndim = 3;
        }
        items[k] = (struct xval){.k = XV_TENSOR, .borrowed = true, .u.t = v};
    }
    if (!s) {
        int64_t dim = how == S_V ? 0 : how == S_D ? 2 : how == S_H && views[0].ndim == 1 ? 0 : 1;
        struct xval pos[2] = {{.k = XV_SEQ, .borrowed = true, .u.seq = {n, items}}, {.k = XV_INT, .u.i = dim}};
        struct xargs sub = *a;
        sub.pos = pos;
        sub.n = 2;
        sub.n_kw = 0;
        sub.consume = false;
        s = k_cat(&sub, out, false);
    }
    bpcc_xfree(views);
    bpcc_xfree(items);
    return s;
}

static enum bpcc_status k_hstack(const struct xargs *a, struct xval *out) { return stack_along(a, S_H, out); }
static enum bpcc_status k_vstack(const struct xargs *a, struct xval *out) { return stack_along(a, S_V, out); }
static enum bpcc_status k_dstack(const struct xargs *a, struct xval *out) { return stack_along(a, S_D, out); }
static enum bpcc_status k_column_stack(const struct xargs *a, struct xval *out) { return stack_along(a, S_COLUMN, out); }

/* block_diag(*tensors): the tensors (0-d as [1, 1], 1-d [n] as [1, n], 2-d) on the diagonal of a
** zero matrix, in order */
static enum bpcc_status k_block_diag(const struct xargs *a, struct xval *out)
{
    int64_t rows = 0, cols = 0;
    for (uint32_t k = 0; k < a->n; k++) {
        const struct xtensor *t;
        if (!bpcc_xarg_tensor(a, k, "tensors", &t)) return BPCC_ERR_GRAPH;
        if (t->ndim > 2) return bpcc_xerr(a, "block_diag takes tensors of 2 dimensions or fewer; argument %u has %u", k, t->ndim);
        rows += t->ndim == 2 ? t->dims[0] : 1;
        cols += t->ndim == 2 ? t->dims[1] : t->ndim == 1 ? t->dims[0] : 1;
    }
    struct xtensor *y = bpcc_xtensor_new(2, (int64_t[]){rows, cols});
    if (!y) return bpcc_diag_nomem(a->d);
    memset(y->data, 0, y->numel * sizeof *y->data);
    int64_t r0 = 0, c0 = 0;
    for (uint32_t k = 0; k < a->n; k++) {
        const struct xtensor *t = a->pos[k].u.t;
        int64_t r = t->ndim == 2 ? t->dims[0] : 1, c = t->ndim == 2 ? t->dims[1] : t->ndim == 1 ? t->dims[0] : 1;
        for (int64_t i = 0; i < r; i++) memcpy(y->data + (r0 + i) * cols + c0, t->data + i * c, (size_t)c * sizeof *y->data);
        r0 += r, c0 += c;
    }
    return bpcc_xput(a, y, out);
}

/* kron(input, other): the Kronecker product; the two shapes aligned at the last dimension (the
** shorter padded with 1s before), each output dimension the product of theirs:
** y[i * B + j] = a[i] b[j] along each */
static enum bpcc_status k_kron(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *z;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "other", &z)) return BPCC_ERR_GRAPH;
    uint32_t nd = x->ndim > z->ndim ? x->ndim : z->ndim;
    int64_t xd[BPCC_MAX_DIMS], zd[BPCC_MAX_DIMS], dims[BPCC_MAX_DIMS];
    for (uint32_t d = 0; d < nd; d++) {
        xd[d] = d + x->ndim >= nd ? x->dims[d + x->ndim - nd] : 1;
        zd[d] = d + z->ndim >= nd ? z->dims[d + z->ndim - nd] : 1;
        dims[d] = xd[d] * zd[d];
    }
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t idx[BPCC_MAX_DIMS] = {0};
    for (uint64_t i = 0; i < y->numel; i++) {
        int64_t xo = 0, zo = 0;
        for (uint32_t d = 0; d < nd; d++) {
            xo = xo * xd[d] + idx[d] / zd[d];
            zo = zo * zd[d] + idx[d] % zd[d];
        }
        y->data[i] = x->data[xo] * z->data[zo];
        for (int d = (int)nd - 1; d >= 0 && ++idx[d] == dims[d]; d--) idx[d] = 0;
    }
    return bpcc_xput(a, y, out);
}

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
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}


/* x's row-major strides */
static void strides_of(const struct xtensor *x, int64_t *st)
{
    for (int d = (int)x->ndim - 1; d >= 0; d--) st[d] = d == (int)x->ndim - 1 ? 1 : st[d + 1] * x->dims[d + 1];
}

/* an index tensor's element as a position along a dimension of `size`: integral, in [0, size) */
static bool position(const struct xargs *a, float f, int64_t size, int64_t *at)
{
    if (!(f >= 0 && f < (float)size) || f != floorf(f)) {
        bpcc_xerr(a, f == floorf(f) ? "index %g is out of bounds for a dimension of size %lld"
                                    : "index %g is not an integer (dimension of size %lld)", f, (long long)size);
        return false;
    }
    *at = (int64_t)f;
    return true;
}

static bool index_tensor(const struct xargs *a, uint32_t i, const struct xtensor **t)
{
    if (!bpcc_xarg_tensor(a, i, "index", t)) return false;
    if ((*t)->boolean) {
        bpcc_xerr(a, "the index must hold integers, not bools");
        return false;
    }
    return true;
}

/* gather(input, dim, index): out[..i..] = input[..index[..i..]..] along dim; out has index's shape,
** which may be smaller than input's on the other dimensions */
static enum bpcc_status k_gather(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *ix;
    int64_t dim;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &dim) || !index_tensor(a, 2, &ix) ||
        !bpcc_xdim(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    if (ix->ndim != x->ndim) return bpcc_xerr(a, "the index has %u dimensions, the input %u", ix->ndim, x->ndim);
    for (uint32_t d = 0; d < x->ndim; d++)
        if ((int64_t)d != dim && ix->dims[d] > x->dims[d])
            return bpcc_xerr(a, "the index's size %lld exceeds the input's %lld in dimension %u", (long long)ix->dims[d],
                             (long long)x->dims[d], d);
    struct xtensor *y = bpcc_xlike(ix);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t st[BPCC_MAX_DIMS], idx[BPCC_MAX_DIMS] = {0}; /* x's strides; the position in index */
    strides_of(x, st);
    for (uint64_t e = 0; e < ix->numel; e++) {
        int64_t at, off = 0;
        if (!position(a, ix->data[e], x->ndim ? x->dims[dim] : 1, &at)) {
            bpcc_xtensor_free(y);
            return BPCC_ERR_GRAPH;
        }
        for (uint32_t d = 0; d < x->ndim; d++) off += ((int64_t)d == dim ? at : idx[d]) * st[d];
        y->data[e] = x->data[off];
        for (int d = (int)ix->ndim - 1; d >= 0 && ++idx[d] == ix->dims[d]; d--) idx[d] = 0;
    }
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}

/* index_select(input, dim, index): the slices at the positions a 1-d (or 0-d) index lists */
static enum bpcc_status k_index_select(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *ix;
    int64_t dim;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &dim) || !index_tensor(a, 2, &ix) ||
        !bpcc_xdim(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    if (ix->ndim > 1) return bpcc_xerr(a, "index_select takes a 1-d index, not %u-d", ix->ndim);
    int64_t dims[BPCC_MAX_DIMS];
    memcpy(dims, x->dims, x->ndim * sizeof *dims);
    if (x->ndim) dims[dim] = (int64_t)ix->numel;
    struct xtensor *y = bpcc_xtensor_new(x->ndim ? x->ndim : ix->ndim, x->ndim ? dims : ix->dims);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t outer, inner;
    int64_t n;
    bpcc_xaround(x, dim, &outer, &n, &inner);
    for (uint64_t j = 0; j < ix->numel; j++) {
        int64_t at;
        if (!position(a, ix->data[j], n, &at)) {
            bpcc_xtensor_free(y);
            return BPCC_ERR_GRAPH;
        }
        for (uint64_t o = 0; o < outer; o++)
            memcpy(y->data + (o * ix->numel + j) * inner, x->data + (o * (uint64_t)n + (uint64_t)at) * inner,
                   inner * sizeof(float));
    }
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}

/* index_add(input, dim, index, source, alpha=1), index_copy(input, dim, index, source),
** index_fill(input, dim, index, value) (and their in-place forms): a copy of input whose slices at
** the positions a 1-d index lists along dim get source's slices added (times alpha), put, or the
** value. The slices of source follow the index's order; copies to one position twice keep the
** last, as PyTorch's serial kernel does. */
enum index_op { IX_ADD, IX_COPY, IX_FILL };

static enum bpcc_status index_update(const struct xargs *a, enum index_op how, struct xval *out)
{
    const struct xtensor *x, *ix, *src = NULL;
    int64_t dim;
    double alpha = 1.0, value = 0.0;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &dim) || !index_tensor(a, 2, &ix) ||
        !bpcc_xdim(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    if (how == IX_FILL) {
        const struct xval *v = bpcc_xarg(a, 3, "value");
        if (!v || !bpcc_xscalar(v, &value) || (v->k == XV_TENSOR && v->u.t->ndim))
            return bpcc_xerr(a, "index_fill's value must be a number or a 0-dimensional tensor");
    } else if (!bpcc_xarg_tensor(a, 3, "source", &src) ||
               (how == IX_ADD && !bpcc_xarg_float(a, UINT32_MAX, "alpha", 1.0, &alpha))) {
        return BPCC_ERR_GRAPH;
    }
    if (ix->ndim > 1) return bpcc_xerr(a, "the index must be 1-d, not %u-d", ix->ndim);
    uint64_t outer, inner;
    int64_t n;
    bpcc_xaround(x, dim, &outer, &n, &inner);
    if (src) { /* source: input's shape but ix->numel along dim (a 0-d input takes a 0-d or 1-element source) */
        bool fits = src->ndim == x->ndim || (!x->ndim && src->ndim <= 1);
        for (uint32_t d = 0; fits && d < x->ndim; d++)
            fits = src->dims[d] == ((int64_t)d == dim ? (int64_t)ix->numel : x->dims[d]);
        if (!fits || (!x->ndim && src->numel != ix->numel))
            return bpcc_xerr(a, "the source must have the input's shape with %llu along dimension %lld",
                             (unsigned long long)ix->numel, (long long)dim);
    }
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    memcpy(y->data, x->data, x->numel * sizeof *y->data);
    for (uint64_t j = 0; j < ix->numel; j++) {
        int64_t at;
        if (!position(a, ix->data[j], n, &at)) {
            bpcc_xtensor_free(y);
            return BPCC_ERR_GRAPH;
        }
        for (uint64_t o = 0; o < outer; o++) {
            float *q = y->data + (o * (uint64_t)n + (uint64_t)at) * inner;
            const float *p = src ? src->data + (o * ix->numel + j) * inner : NULL;
            for (uint64_t i = 0; i < inner; i++)
                q[i] = how == IX_FILL ? (float)value : how == IX_COPY ? p[i] : q[i] + (alpha == 1.0 ? p[i] : (float)alpha * p[i]);
        }
    }
    y->boolean = x->boolean && how != IX_ADD && (!src || src->boolean);
    return bpcc_xput(a, y, out);
}

static enum bpcc_status k_index_add(const struct xargs *a, struct xval *out) { return index_update(a, IX_ADD, out); }
static enum bpcc_status k_index_copy(const struct xargs *a, struct xval *out) { return index_update(a, IX_COPY, out); }
static enum bpcc_status k_index_fill(const struct xargs *a, struct xval *out) { return index_update(a, IX_FILL, out); }

/* masked_scatter(input, mask, source): input's elements where mask (broadcast to input's shape)
** is true replaced, in row-major order, by source's first elements */
static enum bpcc_status k_masked_scatter(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *m, *src;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "mask", &m) || !bpcc_xarg_tensor(a, 2, "source", &src))
        return BPCC_ERR_GRAPH;
    if (!m->boolean) return bpcc_xerr(a, "masked_scatter's mask must be a bool tensor");
    int64_t ms[BPCC_MAX_DIMS], idx[BPCC_MAX_DIMS] = {0};
    if (!mask_strides(a, x, m, ms)) return BPCC_ERR_GRAPH;
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t taken = 0;
    for (uint64_t i = 0, o = 0; i < x->numel; i++, mask_step(x, ms, idx, &o)) {
        if (m->data[o] != 0.0f) {
            if (taken == src->numel) {
                bpcc_xtensor_free(y);
                return bpcc_xerr(a, "the source has %llu elements, fewer than the mask selects",
                                 (unsigned long long)src->numel);
            }
            y->data[i] = src->data[taken++];
        } else {
            y->data[i] = x->data[i];
        }
    }
    y->boolean = x->boolean && src->boolean;
    return bpcc_xput(a, y, out);
}

/* narrow(input, dim, start, length) and select(input, dim, index) */
static enum bpcc_status k_narrow(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim, start, len;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &dim) ||
        !bpcc_xarg_int(a, 2, "start", 0, &start) || !bpcc_xarg_int(a, 3, "length", 0, &len) || !bpcc_xdim(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    if (!x->ndim) return bpcc_xerr(a, "narrow of a 0-d tensor");
    if (start < 0) start += x->dims[dim];
    if (start < 0 || len < 0 || start > x->dims[dim] - len)
        return bpcc_xerr(a, "narrow [%lld, +%lld) is out of range for size %lld", (long long)start, (long long)len,
                         (long long)x->dims[dim]);
    return bpcc_xput(a, bpcc_xnarrow(x, (uint32_t)dim, start, len), out);
}

static enum bpcc_status k_select(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t dim, i;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &dim) ||
        !bpcc_xarg_int(a, 2, "index", 0, &i) || !bpcc_xdim(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    if (!x->ndim) return bpcc_xerr(a, "select of a 0-d tensor");
    if (i < -x->dims[dim] || i >= x->dims[dim])
        return bpcc_xerr(a, "index %lld is out of range for size %lld", (long long)i, (long long)x->dims[dim]);
    struct xtensor *t = bpcc_xnarrow(x, (uint32_t)dim, i < 0 ? i + x->dims[dim] : i, 1);
    if (!t) return bpcc_diag_nomem(a->d);
    memmove(t->dims + dim, t->dims + dim + 1, (t->ndim - (uint32_t)dim - 1) * sizeof *t->dims);
    t->ndim--;
    return bpcc_xput(a, t, out);
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
    if (!bpcc_xdim(a, &dim, x->ndim)) return BPCC_ERR_GRAPH;
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
        if (!bpcc_xdim(a, &src[i], x->ndim) || !bpcc_xdim(a, &dst[i], x->ndim)) return BPCC_ERR_GRAPH;
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
    } else if (roll ? !bpcc_xarg_ints(a, 2, "dims", 0, NULL, ds, &nd) : !bpcc_xarg_sizes(a, 1, "dims", ds, &nd)) {
        return BPCC_ERR_GRAPH;
    }
    if (roll && !flat && nsh != nd) return bpcc_xerr(a, "roll: %u shifts but %u dims", nsh, nd);
    for (uint32_t i = 0; i < nd; i++) {
        if (!bpcc_xdim(a, &ds[i], x->ndim)) return BPCC_ERR_GRAPH;
        if (!roll && flip[ds[i]]) return bpcc_xerr(a, "flip repeats dimension %lld", (long long)ds[i]);
        flip[ds[i]] = !roll;
        if (roll && x->dims[ds[i]]) shift[ds[i]] = (shift[ds[i]] + sh[i] % x->dims[ds[i]]) % x->dims[ds[i]];
    }
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    if (flat) {
        uint64_t n = x->numel, s = n ? (uint64_t)((sh[0] % (int64_t)n + (int64_t)n) % (int64_t)n) : 0;
        for (uint64_t i = 0; i < n; i++) y->data[(i + s) % n] = x->data[i];
        return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
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
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
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
    if (!flat && (!bpcc_xarg_int(a, 2, "dim", 0, &dim) || !bpcc_xdim(a, &dim, x->ndim))) return BPCC_ERR_GRAPH;
    int64_t dims[BPCC_MAX_DIMS], n;
    uint64_t outer, inner;
    uint32_t nd = flat ? 1 : x->ndim;
    if (flat) {
        outer = inner = 1;
        n = (int64_t)x->numel;
        dims[0] = n * r;
    } else {
        bpcc_xaround(x, dim, &outer, &n, &inner);
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
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}

/* {==================== more of the tensor ops users write ==================== */

/* t(input): a matrix transposed; 0-d and 1-d tensors as they are */
static enum bpcc_status k_t(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (x->ndim > 2) return bpcc_xerr(a, "t() expects a tensor of at most 2 dimensions, not %u", x->ndim);
    static const int64_t swap[2] = {1, 0}, same[2] = {0, 1};
    return permuted(a, x, x->ndim == 2 ? swap : same, out);
}

/* numel(): the element count, an int */
static enum bpcc_status k_numel(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    *out = (struct xval){.k = XV_INT, .u.i = (int64_t)x->numel};
    return BPCC_OK;
}

/* diagonal(input, offset=0, dim1=0, dim2=1): the other dimensions, then the diagonal's */
static enum bpcc_status k_diagonal(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t off, d1, d2;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "offset", 0, &off) ||
        !bpcc_xarg_int(a, 2, "dim1", 0, &d1) || !bpcc_xarg_int(a, 3, "dim2", 1, &d2))
        return BPCC_ERR_GRAPH;
    if (x->ndim < 2) return bpcc_xerr(a, "diagonal needs 2 dimensions or more, not %u", x->ndim);
    if (off > INT32_MAX || off < -INT32_MAX) return bpcc_xerr(a, "offset %lld is out of range", (long long)off);
    if (!bpcc_xdim(a, &d1, x->ndim) || !bpcc_xdim(a, &d2, x->ndim)) return BPCC_ERR_GRAPH;
    if (d1 == d2) return bpcc_xerr(a, "diagonal dimensions cannot be identical (%lld)", (long long)d1);
    int64_t n1 = x->dims[d1], n2 = x->dims[d2], r0 = off < 0 ? -off : 0, c0 = off > 0 ? off : 0;
    int64_t len = n1 - r0 < n2 - c0 ? n1 - r0 : n2 - c0, dims[BPCC_MAX_DIMS], st[BPCC_MAX_DIMS], keep[BPCC_MAX_DIMS];
    len = len < 0 ? 0 : len;
    uint32_t nd = 0;
    for (uint32_t d = 0; d < x->ndim; d++)
        if ((int64_t)d != d1 && (int64_t)d != d2) keep[nd] = d, dims[nd++] = x->dims[d];
    dims[nd++] = len;
    strides_of(x, st);
    struct xtensor *y = bpcc_xtensor_new(nd, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t idx[BPCC_MAX_DIMS] = {0};
    for (uint64_t e = 0; e < y->numel; e++) {
        int64_t k = idx[nd - 1], src = (r0 + k) * st[d1] + (c0 + k) * st[d2];
        for (uint32_t i = 0; i + 1 < nd; i++) src += idx[i] * st[keep[i]];
        y->data[e] = x->data[src];
        for (int d = (int)nd - 1; d >= 0 && ++idx[d] == dims[d]; d--) idx[d] = 0;
    }
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}

/* rot90(input, k=1, dims=[0, 1]): k quarter turns from dims[0] towards dims[1] */
static enum bpcc_status k_rot90(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t k, dd[2], dflt[2] = {0, 1};
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "k", 1, &k) ||
        !bpcc_xarg_ints(a, 2, "dims", 2, dflt, dd, NULL))
        return BPCC_ERR_GRAPH;
    if (x->ndim < 2) return bpcc_xerr(a, "rot90 needs 2 dimensions or more, not %u", x->ndim);
    if (!bpcc_xdim(a, &dd[0], x->ndim) || !bpcc_xdim(a, &dd[1], x->ndim)) return BPCC_ERR_GRAPH;
    if (dd[0] == dd[1]) return bpcc_xerr(a, "rot90's dims must differ");
    k = ((k % 4) + 4) % 4;
    int64_t dims[BPCC_MAX_DIMS], st[BPCC_MAX_DIMS], idx[BPCC_MAX_DIMS] = {0};
    memcpy(dims, x->dims, x->ndim * sizeof *dims);
    if (k % 2) dims[dd[0]] = x->dims[dd[1]], dims[dd[1]] = x->dims[dd[0]];
    strides_of(x, st);
    struct xtensor *y = bpcc_xtensor_new(x->ndim, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t n0 = x->dims[dd[0]], n1 = x->dims[dd[1]];
    for (uint64_t e = 0; e < y->numel; e++) {
        int64_t i = idx[dd[0]], j = idx[dd[1]], s0, s1; /* out[i, j] from x[s0, s1] */
        if (k == 0) s0 = i, s1 = j;
        else if (k == 1) s0 = j, s1 = n1 - 1 - i;
        else if (k == 2) s0 = n0 - 1 - i, s1 = n1 - 1 - j;
        else s0 = n0 - 1 - j, s1 = i;
        int64_t src = 0;
        for (uint32_t d = 0; d < x->ndim; d++)
            src += ((int64_t)d == dd[0] ? s0 : (int64_t)d == dd[1] ? s1 : idx[d]) * st[d];
        y->data[e] = x->data[src];
        for (int d = (int)x->ndim - 1; d >= 0 && ++idx[d] == dims[d]; d--) idx[d] = 0;
    }
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}

/* outer(input, vec2) / ger: [n] x [m] -> [n, m] */
static enum bpcc_status k_outer(const struct xargs *a, struct xval *out)
{
    const struct xtensor *u, *v;
    if (!bpcc_xarg_tensor(a, 0, "input", &u) || !bpcc_xarg_tensor(a, 1, "vec2", &v)) return BPCC_ERR_GRAPH;
    if (u->ndim != 1 || v->ndim != 1) return bpcc_xerr(a, "outer takes two 1-d tensors");
    struct xtensor *y = bpcc_xtensor_new(2, (int64_t[]){u->dims[0], v->dims[0]});
    if (!y) return bpcc_diag_nomem(a->d);
    for (int64_t i = 0; i < u->dims[0]; i++)
        for (int64_t j = 0; j < v->dims[0]; j++) y->data[i * v->dims[0] + j] = u->data[i] * v->data[j];
    return bpcc_xput(a, y, out);
}

/* diff(input, n=1, dim=-1, prepend=None, append=None): n times the differences of neighbours along
** dim, after prepend and append joined on (bool tensors: whether neighbours differ, as PyTorch's
** logical_xor) */
static enum bpcc_status k_diff(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *pre = NULL, *app = NULL;
    int64_t n, dim;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "n", 1, &n) || !bpcc_xarg_int(a, 2, "dim", -1, &dim))
        return BPCC_ERR_GRAPH;
    if ((!bpcc_xarg_absent(a, 3, "prepend") && !bpcc_xarg_tensor(a, 3, "prepend", &pre)) ||
        (!bpcc_xarg_absent(a, 4, "append") && !bpcc_xarg_tensor(a, 4, "append", &app)))
        return BPCC_ERR_GRAPH;
    if (!x->ndim) return bpcc_xerr(a, "diff needs a tensor of 1 dimension or more");
    if (n < 0) return bpcc_xerr(a, "diff's order must be non-negative, not %lld", (long long)n);
    if (!bpcc_xdim(a, &dim, x->ndim)) return BPCC_ERR_GRAPH;
    const struct xtensor *parts[3] = {pre, x, app};
    int64_t len = 0;
    for (int p = 0; p < 3; p++) {
        if (!parts[p]) continue;
        bool fits = parts[p]->ndim == x->ndim;
        for (uint32_t d = 0; fits && d < x->ndim; d++) fits = (int64_t)d == dim || parts[p]->dims[d] == x->dims[d];
        if (!fits) return bpcc_xerr(a, "%s must have the input's shape but along dim", p ? "append" : "prepend");
        len += parts[p]->dims[dim];
    }
    int64_t dims[BPCC_MAX_DIMS];
    memcpy(dims, x->dims, x->ndim * sizeof *dims);
    dims[dim] = len;
    struct xtensor *y = bpcc_xtensor_new(x->ndim, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    uint64_t outer, inner;
    int64_t m;
    bpcc_xaround(y, dim, &outer, &m, &inner);
    for (uint64_t o = 0; o < outer; o++) { /* the joined tensor, part by part */
        int64_t at = 0;
        for (int p = 0; p < 3; p++) {
            if (!parts[p]) continue;
            uint64_t run = (uint64_t)parts[p]->dims[dim] * inner;
            memcpy(y->data + (o * (uint64_t)m + (uint64_t)at) * inner, parts[p]->data + o * run, run * sizeof *y->data);
            at += parts[p]->dims[dim];
        }
    }
    bool boolean = x->boolean;
    for (int64_t r = 0; r < n && m > 0; r++, m--) /* in place, each line one shorter */
        for (uint64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k + 1 < m; k++)
                for (uint64_t in = 0; in < inner; in++) {
                    float *p = y->data + (o * (uint64_t)m + (uint64_t)k) * inner + in, *q = p + inner;
                    y->data[(o * (uint64_t)(m - 1) + (uint64_t)k) * inner + in] = boolean ? (*q != *p) : *q - *p;
                }
    y->dims[dim] = m;
    y->numel = outer * (uint64_t)m * inner;
    return bpcc_xput(a, bpcc_xmark(y, boolean), out);
}

/* take_along_dim(input, indices, dim=None): gather along dim with the other dimensions broadcast
** (over the flattened input when dim is None) */
static enum bpcc_status k_take_along_dim(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *ix;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !index_tensor(a, 1, &ix)) return BPCC_ERR_GRAPH;
    if (bpcc_xarg_absent(a, 2, "dim")) { /* flattened: indices into all of x, in their own shape flattened */
        struct xtensor *y = bpcc_xtensor_new(1, (int64_t[]){(int64_t)ix->numel});
        if (!y) return bpcc_diag_nomem(a->d);
        for (uint64_t e = 0; e < ix->numel; e++) {
            int64_t at;
            if (!position(a, ix->data[e], (int64_t)x->numel, &at)) {
                bpcc_xtensor_free(y);
                return BPCC_ERR_GRAPH;
            }
            y->data[e] = x->data[at];
        }
        return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
    }
    int64_t dim;
    if (!bpcc_xarg_int(a, 2, "dim", 0, &dim) || !bpcc_xdim(a, &dim, x->ndim)) return BPCC_ERR_GRAPH;
    if (ix->ndim != x->ndim) return bpcc_xerr(a, "the indices have %u dimensions, the input %u", ix->ndim, x->ndim);
    int64_t dims[BPCC_MAX_DIMS], sx[BPCC_MAX_DIMS], si[BPCC_MAX_DIMS], tx[BPCC_MAX_DIMS], ti[BPCC_MAX_DIMS];
    strides_of(x, tx);
    strides_of(ix, ti);
    for (uint32_t d = 0; d < x->ndim; d++) {
        if ((int64_t)d == dim) {
            dims[d] = ix->dims[d];
            sx[d] = 0;
            si[d] = ti[d];
            continue;
        }
        if (x->dims[d] != ix->dims[d] && x->dims[d] != 1 && ix->dims[d] != 1)
            return bpcc_xerr(a, "the indices (%lld) and the input (%lld) do not broadcast in dimension %u",
                             (long long)ix->dims[d], (long long)x->dims[d], d);
        dims[d] = x->dims[d] == 1 ? ix->dims[d] : x->dims[d];
        sx[d] = x->dims[d] == 1 ? 0 : tx[d];
        si[d] = ix->dims[d] == 1 ? 0 : ti[d];
    }
    struct xtensor *y = bpcc_xtensor_new(x->ndim, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    int64_t idx[BPCC_MAX_DIMS] = {0};
    for (uint64_t e = 0; e < y->numel; e++) {
        int64_t ox = 0, oi = 0, at;
        for (uint32_t d = 0; d < x->ndim; d++) ox += idx[d] * sx[d], oi += idx[d] * si[d];
        if (!position(a, ix->data[oi], x->dims[dim], &at)) {
            bpcc_xtensor_free(y);
            return BPCC_ERR_GRAPH;
        }
        y->data[e] = x->data[ox + at * tx[dim]];
        for (int d = (int)x->ndim - 1; d >= 0 && ++idx[d] == dims[d]; d--) idx[d] = 0;
    }
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}

/* scatter(input, dim, index, src or value, reduce=None) and scatter_add(input, dim, index, src): a
** copy of input with, for each element of index, the element of src (or the value) at that place
** written, added or multiplied into input's element the index names along dim; in index order, so
** a later write to one place wins */
static enum bpcc_status scatter(const struct xargs *a, bool add, struct xval *out)
{
    const struct xtensor *x, *ix, *src = NULL;
    int64_t dim;
    double value = 0;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_int(a, 1, "dim", 0, &dim) || !index_tensor(a, 2, &ix) ||
        !bpcc_xdim(a, &dim, x->ndim))
        return BPCC_ERR_GRAPH;
    const struct xval *sv = bpcc_xarg(a, 3, "src");
    if (!sv && !add) sv = bpcc_xarg(a, UINT32_MAX, "value");
    if (!sv) return bpcc_xerr(a, "scatter needs a src tensor or a value");
    if (sv->k == XV_TENSOR) src = sv->u.t;
    else if (add || !bpcc_xscalar(sv, &value)) return bpcc_xerr(a, "src must be a tensor%s", add ? "" : " or a number");
    const char *reduce = "";
    const struct xval *rv = bpcc_xarg(a, UINT32_MAX, "reduce");
    if (rv && rv->k == XV_STR) reduce = rv->u.s;
    else if (rv && rv->k != XV_NONE) return bpcc_xerr(a, "reduce must be a string");
    bool sum = add || !strcmp(reduce, "add"), prod = !strcmp(reduce, "multiply");
    if (*reduce && !sum && !prod) return bpcc_xerr(a, "scatter's reduce '%s' is not 'add' or 'multiply'", reduce);
    if (ix->ndim != x->ndim || (src && src->ndim != x->ndim))
        return bpcc_xerr(a, "index%s must have the input's %u dimensions", src ? " and src" : "", x->ndim);
    for (uint32_t d = 0; d < x->ndim; d++)
        if ((src && ix->dims[d] > src->dims[d]) || ((int64_t)d != dim && ix->dims[d] > x->dims[d]))
            return bpcc_xerr(a, "the index's size %lld in dimension %u exceeds %s's", (long long)ix->dims[d], d,
                             src && ix->dims[d] > src->dims[d] ? "src" : "the input");
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    memcpy(y->data, x->data, x->numel * sizeof *y->data);
    int64_t tx[BPCC_MAX_DIMS], ts[BPCC_MAX_DIMS], idx[BPCC_MAX_DIMS] = {0};
    strides_of(x, tx);
    if (src) strides_of(src, ts);
    for (uint64_t e = 0; e < ix->numel; e++) {
        int64_t at, ox = 0, os = 0;
        if (!position(a, ix->data[e], x->ndim ? x->dims[dim] : 1, &at)) {
            bpcc_xtensor_free(y);
            return BPCC_ERR_GRAPH;
        }
        for (uint32_t d = 0; d < x->ndim; d++) {
            ox += ((int64_t)d == dim ? at : idx[d]) * tx[d];
            if (src) os += idx[d] * ts[d];
        }
        float v = src ? src->data[os] : (float)value;
        y->data[ox] = sum ? y->data[ox] + v : prod ? y->data[ox] * v : v;
        for (int d = (int)ix->ndim - 1; d >= 0 && ++idx[d] == ix->dims[d]; d--) idx[d] = 0;
    }
    return bpcc_xput(a, y, out);
}

static enum bpcc_status k_scatter(const struct xargs *a, struct xval *out) { return scatter(a, false, out); }
static enum bpcc_status k_scatter_add(const struct xargs *a, struct xval *out) { return scatter(a, true, out); }

/* one_hot(tensor, num_classes=-1): class ids to rows of 0 and 1 (as integers), num_classes -1 the
** largest id + 1 */
static enum bpcc_status k_one_hot(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t c;
    if (!index_tensor(a, 0, &x) || !bpcc_xarg_int(a, 1, "num_classes", -1, &c)) return BPCC_ERR_GRAPH;
    if (c < -1) return bpcc_xerr(a, "num_classes must be -1 or non-negative, not %lld", (long long)c);
    float mx = -1;
    for (uint64_t e = 0; e < x->numel; e++) {
        float f = x->data[e];
        if (!(f >= 0) || f != floorf(f)) return bpcc_xerr(a, "class values must be non-negative integers, not %g", f);
        if (f >= 16777216.0f) return bpcc_xerr(a, "class value %g is beyond the integers floats hold exactly", f);
        if (f > mx) mx = f;
    }
    if (c == -1) {
        if (!x->numel) return bpcc_xerr(a, "cannot infer the number of classes from an empty tensor");
        c = (int64_t)mx + 1;
    } else if (mx >= (float)c) {
        return bpcc_xerr(a, "class value %g is not smaller than num_classes (%lld)", mx, (long long)c);
    }
    if (x->ndim >= BPCC_MAX_DIMS) return bpcc_xerr(a, "one_hot of a tensor of %u dimensions", x->ndim);
    int64_t dims[BPCC_MAX_DIMS];
    memcpy(dims, x->dims, x->ndim * sizeof *dims);
    dims[x->ndim] = c;
    struct xtensor *y = bpcc_xtensor_new(x->ndim + 1, dims);
    if (!y) return bpcc_diag_nomem(a->d);
    memset(y->data, 0, y->numel * sizeof *y->data);
    for (uint64_t e = 0; e < x->numel; e++) y->data[e * (uint64_t)c + (uint64_t)x->data[e]] = 1.0f;
    return bpcc_xput(a, y, out);
}

/* channel_shuffle(input, groups) and nn.ChannelShuffle: [N, C, *] seen as [N, groups, C / groups, *]
** with the two middle dimensions swapped */
static enum bpcc_status k_channel_shuffle(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t g;
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (a->module) g = bpcc_mattr_int(a->module, "groups", 0);
    else if (!bpcc_xarg_int(a, 1, "groups", 0, &g)) return BPCC_ERR_GRAPH;
    if (x->ndim < 3) return bpcc_xerr(a, "channel_shuffle needs [N, C, *], not %u dimensions", x->ndim);
    if (g <= 0 || x->dims[1] % g)
        return bpcc_xerr(a, "%lld channels do not split into %lld groups", (long long)x->dims[1], (long long)g);
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    if (!x->numel) return bpcc_xput(a, bpcc_xmark(y, x->boolean), out); /* (its other dims need not be small) */
    int64_t C = x->dims[1], per = C / g;
    uint64_t plane = x->numel / bpcc_nz((uint64_t)(x->dims[0] * C));
    for (int64_t n = 0; n < x->dims[0]; n++)
        for (int64_t c = 0; c < C; c++) /* out channel j * groups + i from in channel i * per + j */
            memcpy(y->data + ((uint64_t)(n * C + c)) * plane,
                   x->data + ((uint64_t)(n * C + (c % g) * per + c / g)) * plane, plane * sizeof *y->data);
    return bpcc_xput(a, bpcc_xmark(y, x->boolean), out);
}

/* unfold(input, kernel_size, dilation=1, padding=0, stride=1) and nn.Unfold: the sliding blocks of
** [N, C, H, W] (or [C, H, W]) as columns, [N, C * kh * kw, L], zeros where a block leaves the input */
static enum bpcc_status k_unfold(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    int64_t k[2], dl[2], pd[2], st[2], one[2] = {1, 1}, zero[2] = {0, 0};
    if (!bpcc_xarg_tensor(a, 0, "input", &x)) return BPCC_ERR_GRAPH;
    if (a->module ? !bpcc_mattr_ints(a, "kernel_size", 2, NULL, k) || !bpcc_mattr_ints(a, "dilation", 2, one, dl) ||
                        !bpcc_mattr_ints(a, "padding", 2, zero, pd) || !bpcc_mattr_ints(a, "stride", 2, one, st)
                  : !bpcc_xarg_ints(a, 1, "kernel_size", 2, NULL, k, NULL) ||
                        !bpcc_xarg_ints(a, 2, "dilation", 2, one, dl, NULL) ||
                        !bpcc_xarg_ints(a, 3, "padding", 2, zero, pd, NULL) || !bpcc_xarg_ints(a, 4, "stride", 2, one, st, NULL))
        return BPCC_ERR_GRAPH;
    if (x->ndim != 3 && x->ndim != 4) return bpcc_xerr(a, "unfold takes [N, C, H, W] or [C, H, W], not %u dimensions", x->ndim);
    for (int i = 0; i < 2; i++)
        if (k[i] <= 0 || dl[i] <= 0 || st[i] <= 0 || pd[i] < 0 || k[i] > 65536 || dl[i] > 65536 || pd[i] > 65536)
            return bpcc_xerr(a, "kernel size, dilation and stride must be positive and padding non-negative");
    bool batched = x->ndim == 4;
    int64_t N = batched ? x->dims[0] : 1, C = x->dims[batched], H = x->dims[batched + 1], W = x->dims[batched + 2];
    int64_t lim = (int64_t)bpcc_exec_max_elements; /* an empty input's dims are not bound by its size */
    if (N > lim || C > lim || H > lim || W > lim) return bpcc_xerr(a, "the input's dimensions are beyond the interpreter's limit");
    int64_t OH = (H + 2 * pd[0] - dl[0] * (k[0] - 1) - 1) / st[0] + 1, OW = (W + 2 * pd[1] - dl[1] * (k[1] - 1) - 1) / st[1] + 1;
    if (OH <= 0 || OW <= 0) return bpcc_xerr(a, "the blocks do not fit in the padded %lld x %lld input", (long long)H, (long long)W);
    int64_t rows = C * k[0] * k[1], L = OH * OW, dims[3] = {N, rows, L};
    struct xtensor *y = bpcc_xtensor_new(batched ? 3 : 2, batched ? dims : dims + 1);
    if (!y) return bpcc_diag_nomem(a->d);
    float *q = y->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < k[0]; i++)
                for (int64_t j = 0; j < k[1]; j++) {
                    const float *img = x->data + (n * C + c) * H * W;
                    for (int64_t oy = 0; oy < OH; oy++)
                        for (int64_t ox = 0; ox < OW; ox++) {
                            int64_t yy = oy * st[0] - pd[0] + i * dl[0], xx = ox * st[1] - pd[1] + j * dl[1];
                            *q++ = yy >= 0 && yy < H && xx >= 0 && xx < W ? img[yy * W + xx] : 0.0f;
                        }
                }
    return bpcc_xput(a, y, out);
}

/* argwhere(input): nonzero(input), [count, ndim] */
static enum bpcc_status k_argwhere(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    return bpcc_xarg_tensor(a, 0, "input", &x) ? bpcc_xnonzero(a, x, false, out) : BPCC_ERR_GRAPH;
}

/* bucketize(input, boundaries, right=False): per element, the number of boundaries below it (at or
** below it with right), by binary search of the sorted 1-d boundaries; NaN after every one */
static enum bpcc_status k_bucketize(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x, *b;
    bool right;
    if (!bpcc_xarg_tensor(a, 0, "input", &x) || !bpcc_xarg_tensor(a, 1, "boundaries", &b) ||
        !bpcc_xarg_bool(a, UINT32_MAX, "right", false, &right))
        return BPCC_ERR_GRAPH;
    if (b->ndim != 1) return bpcc_xerr(a, "the boundaries must be 1-d, not of %u dimensions", b->ndim);
    struct xtensor *y = bpcc_xlike(x);
    if (!y) return bpcc_diag_nomem(a->d);
    for (uint64_t e = 0; e < x->numel; e++) {
        float v = x->data[e];
        int64_t lo = 0, hi = b->dims[0];
        while (lo < hi) { /* the first boundary >= v (> v with right); NaN compares below nothing */
            int64_t mid = lo + (hi - lo) / 2;
            float m = b->data[mid];
            if (v != v || (right ? m <= v : m < v)) lo = mid + 1;
            else hi = mid;
        }
        y->data[e] = (float)lo;
    }
    return bpcc_xput(a, y, out);
}

/* }================================================ */

const struct xop bpcc_shape_ops[] = {
    {'m', "torch.nn.Flatten", k_flatten}, {'f', "torch.flatten", k_flatten}, {'f', "torch.reshape", k_view},
    {'f', "torch.permute", k_permute}, {'f', "torch.transpose", k_transpose}, {'f', "torch.unsqueeze", k_unsqueeze},
    {'f', "torch.squeeze", k_squeeze}, {'f', "torch.cat", k_cat_}, {'f', "torch.concat", k_cat_},
    {'f', "torch.stack", k_stack}, {'f', "operator.getitem", k_getitem}, {'f', "getattr", k_getattr},
    {'t', "expand", k_expand}, {'t', "view", k_view}, {'t', "reshape", k_view}, {'t', "flatten", k_flatten},
    {'t', "permute", k_permute}, {'t', "transpose", k_transpose}, {'t', "contiguous", k_contiguous},
    {'t', "unsqueeze", k_unsqueeze}, {'t', "squeeze", k_squeeze}, {'t', "size", k_size},
    {'f', "torch.chunk", k_chunk}, {'t', "chunk", k_chunk}, {'f', "torch.split", k_split}, {'t', "split", k_split},
    {'f', "torch.unbind", k_unbind}, {'t', "unbind", k_unbind}, {'m', "torch.nn.PixelShuffle", k_pixel_shuffle},
    {'f', "torch.nn.functional.pixel_shuffle", k_pixel_shuffle}, {'f', "torch.pixel_shuffle", k_pixel_shuffle},
    {'m', "torch.nn.PixelUnshuffle", k_pixel_unshuffle},
    {'f', "torch.nn.functional.pixel_unshuffle", k_pixel_unshuffle}, {'f', "torch.pixel_unshuffle", k_pixel_unshuffle},
    {'f', "torch.nn.functional.pad", k_pad}, {'m', "torch.nn.ZeroPad2d", k_pad_module},
    {'m', "torch.nn.ConstantPad1d", k_pad_module}, {'m', "torch.nn.ConstantPad2d", k_pad_module},
    {'m', "torch.nn.ConstantPad3d", k_pad_module}, {'m', "torch.nn.ReflectionPad1d", k_pad_module},
    {'m', "torch.nn.ReflectionPad2d", k_pad_module}, {'m', "torch.nn.ReflectionPad3d", k_pad_module},
    {'m', "torch.nn.ReplicationPad1d", k_pad_module}, {'m', "torch.nn.ReplicationPad2d", k_pad_module},
    {'m', "torch.nn.ReplicationPad3d", k_pad_module}, {'t', "repeat", k_repeat}, {'f', "torch.gather", k_gather}, {'f', "torch.nonzero", k_nonzero}, {'t', "nonzero", k_nonzero},
    {'f', "torch.masked_select", k_masked_select}, {'t', "masked_select", k_masked_select}, {'t', "gather", k_gather},
    {'f', "torch.index_select", k_index_select}, {'t', "index_select", k_index_select}, {'f', "torch.narrow", k_narrow},
    {'t', "narrow", k_narrow}, {'f', "torch.select", k_select}, {'t', "select", k_select}, {'t', "view_as", k_view_as},
    {'t', "reshape_as", k_view_as}, {'t', "expand_as", k_expand_as}, {'f', "torch.unflatten", k_unflatten},
    {'t', "unflatten", k_unflatten}, {'m', "torch.nn.Unflatten", k_unflatten}, {'f', "torch.swapaxes", k_transpose},
    {'t', "swapaxes", k_transpose}, {'f', "torch.swapdims", k_transpose}, {'t', "swapdims", k_transpose},
    {'f', "torch.movedim", k_movedim}, {'t', "movedim", k_movedim}, {'f', "torch.moveaxis", k_movedim},
    {'t', "moveaxis", k_movedim}, {'f', "torch.flip", k_flip}, {'t', "flip", k_flip}, {'f', "torch.roll", k_roll},
    {'t', "roll", k_roll}, {'f', "torch.tile", k_tile}, {'t', "tile", k_tile},
    {'f', "torch.repeat_interleave", k_repeat_interleave}, {'t', "repeat_interleave", k_repeat_interleave},
    {'t', "clone", k_contiguous}, {'f', "torch.clone", k_contiguous}, {'t', "detach", k_contiguous},
    {'f', "torch.detach", k_contiguous}, {'f', "torch._assert", k_assert},
    {'t', "dim", k_dim}, {'t', "ndimension", k_dim}, {'t', "t", k_t}, {'f', "torch.t", k_t}, {'t', "numel", k_numel},
    {'f', "torch.numel", k_numel}, {'f', "torch.diagonal", k_diagonal}, {'t', "diagonal", k_diagonal},
    {'f', "torch.rot90", k_rot90}, {'t', "rot90", k_rot90}, {'f', "torch.outer", k_outer}, {'t', "outer", k_outer},
    {'f', "torch.ger", k_outer}, {'t', "ger", k_outer}, {'f', "torch.diff", k_diff}, {'t', "diff", k_diff},
    {'f', "torch.take_along_dim", k_take_along_dim}, {'t', "take_along_dim", k_take_along_dim},
    {'f', "torch.scatter", k_scatter}, {'t', "scatter", k_scatter}, {'f', "torch.scatter_add", k_scatter_add},
    {'t', "scatter_add", k_scatter_add}, {'f', "torch.nn.functional.one_hot", k_one_hot},
    {'f', "torch.nn.functional.channel_shuffle", k_channel_shuffle}, {'f', "torch.channel_shuffle", k_channel_shuffle},
    {'m', "torch.nn.ChannelShuffle", k_channel_shuffle}, {'f', "torch.nn.functional.unfold", k_unfold},
    {'m', "torch.nn.Unfold", k_unfold}, {'f', "torch.argwhere", k_argwhere}, {'t', "argwhere", k_argwhere},
    {'f', "torch.bucketize", k_bucketize}, {'f', "torch.broadcast_to", k_expand}, {'t', "broadcast_to", k_expand},
    {'t', "split_with_sizes", k_split}, {'f', "torch.split_with_sizes", k_split},
    {'f', "torch.tensor_split", k_tensor_split}, {'t', "tensor_split", k_tensor_split},
    {'f', "torch.hstack", k_hstack}, {'f', "torch.vstack", k_vstack}, {'f', "torch.row_stack", k_vstack},
    {'f', "torch.dstack", k_dstack}, {'f', "torch.column_stack", k_column_stack}, {'f', "torch.block_diag", k_block_diag},
    {'f', "torch.kron", k_kron}, {'t', "kron", k_kron}, {'f', "torch.index_add", k_index_add}, {'t', "index_add", k_index_add},
    {'t', "index_add_", k_index_add}, {'f', "torch.index_copy", k_index_copy}, {'t', "index_copy", k_index_copy},
    {'t', "index_copy_", k_index_copy}, {'f', "torch.index_fill", k_index_fill}, {'t', "index_fill", k_index_fill},
    {'t', "index_fill_", k_index_fill}, {'f', "torch.masked_scatter", k_masked_scatter},
    {'t', "masked_scatter", k_masked_scatter}, {'t', "masked_scatter_", k_masked_scatter}, {0}
};
