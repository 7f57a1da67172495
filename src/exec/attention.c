/*
** attention.c — torch.nn.MultiheadAttention in eval mode, as PyTorch 1.13's
** F.multi_head_attention_forward computes it: the three input projections, per head the scaled
** scores q / sqrt(head_dim) . k^T plus the float mask (a bool mask or key_padding_mask as -inf),
** softmax over the keys, the weighted sum of the values, and the output projection; the attention
** weights averaged over the heads (or per head) when asked for.
**
** Over it, the transformer modules: TransformerEncoderLayer / TransformerEncoder,
** TransformerDecoderLayer / TransformerDecoder and Transformer (encoder, then decoder).
**
** quantize_fx leaves these modules whole and in float (no backend config has a pattern for them), so
** the interpreter runs each as one op. bias_k / bias_v, add_zero_attn and dropout in training mode
** are refused. Matrix products through BLAS, as PyTorch's; the values agree with it to ~1e-6.
*/
#include "exec.h"

#include <cblas.h>
#include <math.h>

void bpcc_project(const float *x, int64_t rows, int64_t in, const float *w, const float *b, int64_t out, float *y)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) y[r * out + o] = b ? b[o] : 0.0f;
    if (rows && out)
        bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)out, (int)in, 1.0f, x, (int)in, w, (int)in,
                   b ? 1.0f : 0.0f, y, (int)out);
}

/* an input [L, N, E] (seq first), [N, L, E] (batch first) or [L, E] (unbatched) as a batch-first
** copy [N, L, E] */
static float *batch_first(const struct xtensor *t, bool bf, int64_t *N, int64_t *L, int64_t *E)
{
    bool batched = t->ndim == 3;
    *E = t->dims[t->ndim - 1];
    *N = batched ? t->dims[bf ? 0 : 1] : 1;
    *L = batched ? t->dims[bf ? 1 : 0] : t->dims[0];
    float *p = bpcc_malloc((size_t)(*N * *L * *E + 1) * sizeof *p);
    if (!p) return NULL;
    for (int64_t n = 0; n < *N; n++)
        for (int64_t l = 0; l < *L; l++)
            memcpy(p + (n * *L + l) * *E, t->data + (bf || !batched ? n * *L + l : l * *N + n) * *E,
                   (size_t)*E * sizeof *p);
    return p;
}

static enum bpcc_status k_multihead_attention(const struct xargs *a, struct xval *out)
{
    const struct bpcc_module *m = a->module;
    const struct xtensor *q, *k, *v;
    if (!m) return bpcc_xerr(a, "MultiheadAttention runs as a module");
    if (!bpcc_xarg_tensor(a, 0, "query", &q) || !bpcc_xarg_tensor(a, 1, "key", &k) || !bpcc_xarg_tensor(a, 2, "value", &v))
        return BPCC_ERR_GRAPH;
    bool bf = bpcc_mattr_bool(m, "batch_first", false), need, average;
    int64_t E = bpcc_mattr_int(m, "embed_dim", 0), H = bpcc_mattr_int(m, "num_heads", 0);
    int64_t kdim = bpcc_mattr_int(m, "kdim", E), vdim = bpcc_mattr_int(m, "vdim", E);
    if (bpcc_mattr_bool(m, "training", false) && bpcc_mattr_float(m, "dropout", 0) > 0)
        return bpcc_xerr(a, "MultiheadAttention in training mode drops weights at random; export the model in eval mode");
    if (bpcc_mattr_bool(m, "add_zero_attn", false) || bpcc_mtensor(m, "bias_k") || bpcc_mtensor(m, "bias_v"))
        return bpcc_xerr(a, "MultiheadAttention with bias_k / bias_v or add_zero_attn is not supported");
    if (E <= 0 || H <= 0 || E % H) return bpcc_xerr(a, "MultiheadAttention needs embed_dim divisible by num_heads");
    if (!bpcc_xarg_bool(a, 4, "need_weights", true, &need) || !bpcc_xarg_bool(a, 6, "average_attn_weights", true, &average))
        return BPCC_ERR_GRAPH;
    if (q->ndim != k->ndim || q->ndim != v->ndim || (q->ndim != 2 && q->ndim != 3))
        return bpcc_xerr(a, "MultiheadAttention takes query, key and value of rank 3 (or 2, unbatched)");
    int64_t N, L, S, Sv, Nk, Nv, Eq, Ek, Ev, hd = E / H;
    float *xq = batch_first(q, bf, &N, &L, &Eq), *xk = batch_first(k, bf, &Nk, &S, &Ek), *xv = batch_first(v, bf, &Nv, &Sv, &Ev);
    float *Q = NULL, *K = NULL, *V = NULL, *O = NULL, *Y = NULL, *P = NULL;
    struct xtensor *y = NULL, *w = NULL;
    enum bpcc_status st = BPCC_ERR_GRAPH;
    if (!xq || !xk || !xv) {
        st = bpcc_diag_nomem(a->d);
        goto done;
    }
    if (Eq != E || Ek != kdim || Ev != vdim || Nk != N || Nv != N || Sv != S) {
        bpcc_xerr(a, "MultiheadAttention's query, key and value do not fit it (embed_dim %lld, kdim %lld, vdim %lld)",
                  (long long)E, (long long)kdim, (long long)vdim);
        goto done;
    }
    /* the masks: attn_mask [L, S] or [N H, L, S], key_padding_mask [N, S]; bool ones are -inf */
    const struct xval *amv = bpcc_xarg(a, 5, "attn_mask"), *kpv = bpcc_xarg(a, 3, "key_padding_mask");
    const struct xtensor *am = amv && amv->k == XV_TENSOR ? amv->u.t : NULL, *kp = kpv && kpv->k == XV_TENSOR ? kpv->u.t : NULL;
    bool am3 = am && am->ndim == 3;
    if (am && !((am->ndim == 2 && am->dims[0] == L && am->dims[1] == S) ||
                (am3 && am->dims[0] == N * H && am->dims[1] == L && am->dims[2] == S))) {
        bpcc_xerr(a, "attn_mask must be [%lld, %lld] or [%lld, %lld, %lld]", (long long)L, (long long)S, (long long)(N * H),
                  (long long)L, (long long)S);
        goto done;
    }
    if (kp && !((kp->ndim == 2 && kp->dims[0] == N && kp->dims[1] == S) || (q->ndim == 2 && kp->ndim == 1 && kp->dims[0] == S))) {
        bpcc_xerr(a, "key_padding_mask must be [%lld, %lld]", (long long)N, (long long)S);
        goto done;
    }
    bool packed = kdim == E && vdim == E; /* one in_proj_weight, else three */
    const float *in_w = packed ? bpcc_mtensor_n(a, m, "in_proj_weight", 3 * E * E) : NULL;
    if (packed && !in_w) goto done;
    const float *wq = packed ? in_w : bpcc_mtensor_n(a, m, "q_proj_weight", E * E);
    const float *wk = packed ? in_w + E * E : bpcc_mtensor_n(a, m, "k_proj_weight", E * kdim);
    const float *wv = packed ? in_w + 2 * E * E : bpcc_mtensor_n(a, m, "v_proj_weight", E * vdim);
    const struct bpcc_module *op = bpcc_module_child(m, "out_proj");
    bool has_in_b = bpcc_mtensor(m, "in_proj_bias"), has_bo = op && bpcc_mtensor(op, "bias");
    const float *in_b = has_in_b ? bpcc_mtensor_n(a, m, "in_proj_bias", 3 * E) : NULL;
    const float *wo = bpcc_mtensor_n(a, op, "weight", E * E), *bo = has_bo ? bpcc_mtensor_n(a, op, "bias", E) : NULL;
    if (!wq || !wk || !wv || !wo || (has_in_b && !in_b) || (has_bo && !bo)) goto done;
    Q = bpcc_malloc((size_t)(N * L * E + 1) * sizeof *Q);
    K = bpcc_malloc((size_t)(N * S * E + 1) * sizeof *K);
    V = bpcc_malloc((size_t)(N * S * E + 1) * sizeof *V);
    O = bpcc_malloc((size_t)(N * L * E + 1) * sizeof *O);
    Y = bpcc_malloc((size_t)(N * L * E + 1) * sizeof *Y);
    P = bpcc_malloc((size_t)(L * S + 1) * sizeof *P);
    int64_t wdims[4] = {N, average ? L : H, average ? S : L, S};
    w = need ? bpcc_xtensor_new(q->ndim == 2 ? (average ? 2 : 3) : (average ? 3 : 4), q->ndim == 2 ? wdims + 1 : wdims) : NULL;
    if (!Q || !K || !V || !O || !Y || !P || (need && !w)) {
        st = bpcc_diag_nomem(a->d);
        goto done;
    }
    if (w) memset(w->data, 0, w->numel * sizeof *w->data);
    bpcc_blas_set_threads(bpcc_exec_threads(a->ctx));
    bpcc_project(xq, N * L, E, wq, in_b, E, Q);
    bpcc_project(xk, N * S, kdim, wk, in_b ? in_b + E : NULL, E, K);
    bpcc_project(xv, N * S, vdim, wv, in_b ? in_b + 2 * E : NULL, E, V);
    float scale = sqrtf((float)hd);
    for (int64_t i = 0; i < N * L * E; i++) Q[i] /= scale; /* q / sqrt(head_dim), before the product */
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++) {
            /* P[L, S] = Q_h K_h^T (+ mask), then softmax over S */
            if (L && S)
                bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)L, (int)S, (int)hd, 1.0f, Q + n * L * E + h * hd,
                           (int)E, K + n * S * E + h * hd, (int)E, 0.0f, P, (int)S);
            for (int64_t l = 0; l < L; l++) {
                float *p = P + l * S, mx = -INFINITY, sum = 0.0f;
                for (int64_t s = 0; s < S; s++) {
                    float add = 0.0f;
                    if (am) {
                        float e = am->data[(am3 ? (n * H + h) * L * S : 0) + l * S + s];
                        add = am->boolean ? (e != 0.0f ? -INFINITY : 0.0f) : e;
                    }
                    if (kp) {
                        float e = kp->data[(kp->ndim == 2 ? n * S : 0) + s];
                        add = kp->boolean ? (e != 0.0f ? -INFINITY : add) : add + e;
                    }
                    p[s] = add + p[s];
                    mx = p[s] > mx ? p[s] : mx;
                }
                for (int64_t s = 0; s < S; s++) sum += (p[s] = expf(p[s] - mx));
                for (int64_t s = 0; s < S; s++) p[s] /= sum;
                if (w)
                    for (int64_t s = 0; s < S; s++)
                        w->data[(average ? n * L + l : (n * H + h) * L + l) * S + s] += average ? p[s] / (float)H : p[s];
            }
            /* O_h[L, hd] = P V_h */
            if (L && hd)
                bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)L, (int)hd, (int)S, 1.0f, P, (int)S,
                           V + n * S * E + h * hd, (int)E, 0.0f, O + n * L * E + h * hd, (int)E);
        }
    bpcc_project(O, N * L, E, wo, bo, E, Y);
    int64_t odims[3] = {bf ? N : L, bf ? L : N, E};
    y = q->ndim == 2 ? bpcc_xtensor_new(2, (int64_t[]){L, E}) : bpcc_xtensor_new(3, odims);
    if (!y) {
        st = bpcc_diag_nomem(a->d);
        goto done;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t l = 0; l < L; l++)
            memcpy(y->data + (bf || q->ndim == 2 ? n * L + l : l * N + n) * E, Y + (n * L + l) * E, (size_t)E * sizeof *Y);
    struct xval *items = bpcc_malloc(2 * sizeof *items);
    if (!items) {
        st = bpcc_diag_nomem(a->d);
        goto done;
    }
    items[0] = (struct xval){.k = XV_TENSOR, .u.t = y};
    items[1] = w ? (struct xval){.k = XV_TENSOR, .u.t = w} : (struct xval){.k = XV_NONE};
    *out = (struct xval){.k = XV_SEQ, .u.seq = {2, items}};
    y = w = NULL;
    st = BPCC_OK;
done:
    bpcc_xtensor_free(y);
    bpcc_xtensor_free(w);
    bpcc_xfree(xq);
    bpcc_xfree(xk);
    bpcc_xfree(xv);
    bpcc_xfree(Q);
    bpcc_xfree(K);
    bpcc_xfree(V);
    bpcc_xfree(O);
    bpcc_xfree(Y);
    bpcc_xfree(P);
    return st;
}

/* {==================== transformer layers ==================== */

/* module m run on positional inputs and keywords (no consuming: the caller keeps its values) */
static enum bpcc_status call(const struct xargs *a, const struct bpcc_module *m, const struct xval *pos, uint32_t n,
                             const char *const *kw_names, const struct xval *kw, uint32_t n_kw, struct xval *out)
{
    if (!m) return bpcc_xerr(a, "%s lacks a submodule it runs", a->module->type);
    xkernel k = bpcc_exec_kernel(BPCC_NODE_CALL_MODULE, m->type);
    if (!k) return bpcc_xerr(a, "the interpreter cannot run module type %s (in %s)", m->type, a->module->name);
    struct xargs sub = *a;
    sub.module = m;
    sub.pos = pos;
    sub.n = n;
    sub.kw_names = kw_names;
    sub.kw = kw;
    sub.n_kw = n_kw;
    sub.consume = false;
    sub.weight_override = NULL;
    return k(&sub, out);
}

static enum bpcc_status call1(const struct xargs *a, const struct bpcc_module *m, const struct xval *in, struct xval *out)
{
    return call(a, m, in, 1, NULL, NULL, 0, out);
}

/* x += y elementwise (same shapes); y released */
static enum bpcc_status add_into(const struct xargs *a, struct xval *x, struct xval *y)
{
    enum bpcc_status st = BPCC_OK;
    if (y->k != XV_TENSOR || y->u.t->numel != x->u.t->numel) st = bpcc_xerr(a, "a residual's shapes differ");
    else
        for (uint64_t i = 0; i < x->u.t->numel; i++) x->u.t->data[i] += y->u.t->data[i];
    bpcc_xval_release(y);
    return st;
}

/* the activation of a TransformerEncoderLayer: its function (a symbol) or relu / gelu by number */
static enum bpcc_status activate(const struct xargs *a, const struct xval *in, struct xval *out)
{
    const struct bpcc_value *v = bpcc_module_attr(a->module, "activation");
    const char *f = v && (v->kind == BPCC_VAL_SYMBOL || v->kind == BPCC_VAL_STR) ? v->u.s : NULL;
    if (!f) {
        double which = bpcc_mattr_float(a->module, "activation_relu_or_gelu", 1);
        f = which == 2 ? "torch.nn.functional.gelu" : "torch.nn.functional.relu";
    }
    xkernel k = bpcc_exec_kernel(BPCC_NODE_CALL_FUNCTION, f);
    if (!k) return bpcc_xerr(a, "the interpreter cannot run the activation %s", f);
    struct xargs sub = *a;
    sub.module = NULL;
    sub.pos = in;
    sub.n = 1;
    sub.n_kw = 0;
    sub.consume = false;
    return k(&sub, out);
}

/* attention module m over (q, kv, kv) with its masks (NULL: none), without weights: out */
static enum bpcc_status attend(const struct xargs *a, const struct bpcc_module *m, const struct xval *q, const struct xval *kv,
                               const struct xval *mask, const struct xval *kpm, struct xval *out)
{
    struct xval pos[3] = {*q, *kv, *kv}, kw[3] = {{.k = XV_NONE}, {.k = XV_NONE}, {.k = XV_BOOL, .u.b = false}};
    static const char *const names[3] = {"attn_mask", "key_padding_mask", "need_weights"};
    if (mask) kw[0] = *mask;
    if (kpm) kw[1] = *kpm;
    for (int i = 0; i < 3; i++) pos[i].borrowed = true, kw[i].borrowed = true;
    struct xval u;
    enum bpcc_status st = call(a, m, pos, 3, names, kw, 3, &u);
    if (st) return st;
    *out = u.u.seq.items[0];
    u.u.seq.items[0] = (struct xval){.k = XV_NONE};
    bpcc_xval_release(&u);
    return BPCC_OK;
}

/* the masks a layer's attentions take (NULL: none): the self-attention's (src_mask /
** tgt_mask and the key padding mask of its input), the cross-attention's over the memory */
struct lmasks {
    const struct xval *self, *self_kpm, *mem, *mem_kpm;
};

/* TransformerEncoderLayer (src, masks) and, with a memory, TransformerDecoderLayer (tgt, memory,
** masks), eval: the blocks self-attention, cross-attention over the memory (decoder only) and
** feed-forward (linear2(activation(linear1))), block i with norm<i+1>: post-norm x = norm(x +
** block(x)), or pre-norm x = x + block(norm(x)); the attentions without weights; dropouts are
** identities */
static enum bpcc_status layer(const struct xargs *a, const struct xval *src, const struct xval *memory,
                              const struct lmasks *lm, struct xval *out)
{
    const struct bpcc_module *m = a->module;
    if (bpcc_mattr_bool(m, "training", false))
        return bpcc_xerr(a, "%s in training mode drops values at random; export the model in eval mode", m->type);
    bool norm_first = bpcc_mattr_bool(m, "norm_first", false);
    const struct bpcc_module *sa = bpcc_module_child(m, "self_attn"), *ca = bpcc_module_child(m, "multihead_attn");
    const struct bpcc_module *l1 = bpcc_module_child(m, "linear1"), *l2 = bpcc_module_child(m, "linear2");
    const struct bpcc_module *norms[3] = {bpcc_module_child(m, "norm1"), bpcc_module_child(m, "norm2"),
                                          bpcc_module_child(m, "norm3")};
    int n_blocks = memory ? 3 : 2; /* the last is the feed-forward */
    struct xval x, t = {0};
    enum bpcc_status st = bpcc_xval_copy(src, &x) ? bpcc_diag_nomem(a->d) : BPCC_OK;
    for (int b = 0; b < n_blocks && st == BPCC_OK; b++) {
        const struct xval *in = &x;
        if (norm_first) {
            if ((st = call1(a, norms[b], &x, &t))) break;
            in = &t;
        }
        struct xval r;
        if (b == 0) st = attend(a, sa, in, in, lm->self, lm->self_kpm, &r);
        else if (b < n_blocks - 1) st = attend(a, ca, in, memory, lm->mem, lm->mem_kpm, &r);
        else {
            struct xval h, g;
            if ((st = call1(a, l1, in, &h))) break;
            st = activate(a, &h, &g);
            bpcc_xval_release(&h);
            if (st) break;
            st = call1(a, l2, &g, &r);
            bpcc_xval_release(&g);
        }
        if (st) break;
        bpcc_xval_release(&t);
        if ((st = add_into(a, &x, &r))) break;
        if (!norm_first) {
            st = call1(a, norms[b], &x, &t);
            bpcc_xval_release(&x);
            x = t;
            t = (struct xval){0};
        }
    }
    bpcc_xval_release(&t);
    if (st) {
        bpcc_xval_release(&x);
        return st;
    }
    *out = x;
    return BPCC_OK;
}

/* the last part of a dotted type name */
static const char *short_type(const char *type)
{
    const char *dot = strrchr(type, '.');
    return dot ? dot + 1 : type;
}

/* the layers of `layers` (all of type `type`) in turn over *cur, with memory for decoder layers */
static enum bpcc_status stack(const struct xargs *a, const struct bpcc_module *layers, const char *type,
                              const struct xval *memory, const struct lmasks *lm, struct xval *cur)
{
    if (!layers || !layers->first_child) return bpcc_xerr(a, "%s has no layers", short_type(a->module->type));
    for (const struct bpcc_module *l = layers->first_child; l; l = l->next_sibling) {
        if (strcmp(l->type, type))
            return bpcc_xerr(a, "%s's layer %s is a %s, not a %s", short_type(a->module->type), l->name, l->type,
                             short_type(type));
        struct xval next;
        struct xargs sub = *a;
        sub.module = l;
        enum bpcc_status st = layer(&sub, cur, memory, lm, &next);
        if (st) return st;
        bpcc_xval_release(cur);
        *cur = next;
    }
    return BPCC_OK;
}

/* *cur through module norm, when there is one */
static enum bpcc_status normed(const struct xargs *a, const struct bpcc_module *norm, struct xval *cur)
{
    if (!norm) return BPCC_OK;
    struct xval y;
    enum bpcc_status st = call1(a, norm, cur, &y);
    if (st) return st;
    bpcc_xval_release(cur);
    *cur = y;
    return BPCC_OK;
}

/* an optional tensor argument (None or absent: NULL) */
static const struct xval *optional(const struct xargs *a, uint32_t i, const char *name)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    return v && v->k == XV_TENSOR ? v : NULL;
}

static enum bpcc_status k_transformer_encoder_layer(const struct xargs *a, struct xval *out)
{
    const struct xtensor *x;
    if (!a->module || !bpcc_xarg_tensor(a, 0, "src", &x)) return BPCC_ERR_GRAPH;
    struct lmasks lm = {optional(a, 1, "src_mask"), optional(a, 2, "src_key_padding_mask"), NULL, NULL};
    return layer(a, &a->pos[0], NULL, &lm, out);
}

/* TransformerEncoder (src, mask=None, src_key_padding_mask=None): its layers in turn, then its norm.
** With a key padding mask and no mask, PyTorch 1.13 runs the layers on a nested tensor when its
** fast path applies (batch first, post-norm, enable_nested_tensor, ...) and pads the result with
** zeros: the padded positions come out 0 before the norm. The same here, under the same test. */
static enum bpcc_status k_transformer_encoder(const struct xargs *a, struct xval *out)
{
    const struct bpcc_module *m = a->module;
    const struct xtensor *x;
    if (!m || !bpcc_xarg_tensor(a, 0, "src", &x)) return BPCC_ERR_GRAPH;
    const struct xval *mask = optional(a, 1, "mask"), *kpm = optional(a, 2, "src_key_padding_mask");
    const struct bpcc_module *layers = bpcc_module_child(m, "layers"), *norm = bpcc_module_child(m, "norm");
    if (!layers || !layers->first_child) return bpcc_xerr(a, "TransformerEncoder has no layers");
    const struct bpcc_module *first = layers->first_child, *sa = bpcc_module_child(first, "self_attn");
    const struct bpcc_module *n1 = bpcc_module_child(first, "norm1"), *n2 = bpcc_module_child(first, "norm2");
    bool nested = kpm && !mask && x->ndim == 3 && bpcc_mattr_bool(m, "enable_nested_tensor", true) &&
                  !strcmp(first->type, "torch.nn.TransformerEncoderLayer") && !bpcc_mattr_bool(first, "norm_first", false) &&
                  sa && bpcc_mattr_bool(sa, "batch_first", false) &&
                  bpcc_mattr_float(sa, "kdim", -1) == bpcc_mattr_float(sa, "embed_dim", -2) &&
                  bpcc_mattr_float(sa, "vdim", -1) == bpcc_mattr_float(sa, "embed_dim", -2) &&
                  bpcc_mattr_float(first, "activation_relu_or_gelu", 0) != 0 && n1 && n2 &&
                  bpcc_mattr_float(n1, "eps", 1e-5) == bpcc_mattr_float(n2, "eps", 1e-5);
    if (nested && (kpm->u.t->ndim != 2 || kpm->u.t->dims[0] != x->dims[0] || kpm->u.t->dims[1] != x->dims[1]))
        return bpcc_xerr(a, "src_key_padding_mask must be [%lld, %lld]", (long long)x->dims[0], (long long)x->dims[1]);
    struct xval cur;
    if (bpcc_xval_copy(&a->pos[0], &cur)) return bpcc_diag_nomem(a->d);
    struct lmasks lm = {mask, kpm, NULL, NULL};
    enum bpcc_status st = stack(a, layers, "torch.nn.TransformerEncoderLayer", NULL, &lm, &cur);
    if (st) {
        bpcc_xval_release(&cur);
        return st;
    }
    if (nested) { /* padded positions: zeros */
        struct xtensor *t = cur.u.t;
        int64_t L = t->dims[1], E = t->dims[2];
        for (int64_t n = 0; n < t->dims[0]; n++)
            for (int64_t l = 0; l < L; l++)
                if (kpm->u.t->data[n * L + l] != 0.0f) memset(t->data + (n * L + l) * E, 0, (size_t)E * sizeof(float));
    }
    if ((st = normed(a, norm, &cur))) {
        bpcc_xval_release(&cur);
        return st;
    }
    *out = cur;
    return BPCC_OK;
}

/* {==================== transformer decoder ==================== */

/* a decoder's (and decoder layer's) arguments: tgt, memory, tgt_mask, memory_mask,
** tgt_key_padding_mask, memory_key_padding_mask; false with an error when tgt or memory is no tensor */
static bool decoder_args(const struct xargs *a, struct lmasks *lm)
{
    const struct xtensor *x, *mem;
    if (!a->module || !bpcc_xarg_tensor(a, 0, "tgt", &x) || !bpcc_xarg_tensor(a, 1, "memory", &mem)) return false;
    *lm = (struct lmasks){optional(a, 2, "tgt_mask"), optional(a, 4, "tgt_key_padding_mask"), optional(a, 3, "memory_mask"),
                          optional(a, 5, "memory_key_padding_mask")};
    return true;
}

static enum bpcc_status k_transformer_decoder_layer(const struct xargs *a, struct xval *out)
{
    struct lmasks lm;
    if (!decoder_args(a, &lm)) return BPCC_ERR_GRAPH;
    return layer(a, bpcc_xarg(a, 0, "tgt"), bpcc_xarg(a, 1, "memory"), &lm, out);
}

/* TransformerDecoder (tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
** memory_key_padding_mask): its layers in turn, then its norm */
static enum bpcc_status k_transformer_decoder(const struct xargs *a, struct xval *out)
{
    struct lmasks lm;
    if (!decoder_args(a, &lm)) return BPCC_ERR_GRAPH;
    struct xval cur;
    if (bpcc_xval_copy(bpcc_xarg(a, 0, "tgt"), &cur)) return bpcc_diag_nomem(a->d);
    enum bpcc_status st = stack(a, bpcc_module_child(a->module, "layers"), "torch.nn.TransformerDecoderLayer",
                                bpcc_xarg(a, 1, "memory"), &lm, &cur);
    if (!st) st = normed(a, bpcc_module_child(a->module, "norm"), &cur);
    if (st) {
        bpcc_xval_release(&cur);
        return st;
    }
    *out = cur;
    return BPCC_OK;
}

/* Transformer (src, tgt, src_mask, tgt_mask, memory_mask, src_key_padding_mask,
** tgt_key_padding_mask, memory_key_padding_mask): memory = encoder(src, src_mask,
** src_key_padding_mask), then decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
** memory_key_padding_mask) */
static enum bpcc_status k_transformer(const struct xargs *a, struct xval *out)
{
    const struct xtensor *s, *t;
    if (!a->module || !bpcc_xarg_tensor(a, 0, "src", &s) || !bpcc_xarg_tensor(a, 1, "tgt", &t)) return BPCC_ERR_GRAPH;
    const struct bpcc_module *enc = bpcc_module_child(a->module, "encoder"), *dec = bpcc_module_child(a->module, "decoder");
    const struct xval *sm = optional(a, 2, "src_mask"), *skpm = optional(a, 5, "src_key_padding_mask");
    struct xval pos[3] = {*bpcc_xarg(a, 0, "src"), {.k = XV_NONE}, {.k = XV_NONE}}, memory;
    if (sm) pos[1] = *sm;
    if (skpm) pos[2] = *skpm;
    for (int i = 0; i < 3; i++) pos[i].borrowed = true;
    enum bpcc_status st = call(a, enc, pos, 3, NULL, NULL, 0, &memory);
    if (st) return st;
    struct xval dpos[6] = {*bpcc_xarg(a, 1, "tgt"), memory, {.k = XV_NONE}, {.k = XV_NONE}, {.k = XV_NONE}, {.k = XV_NONE}};
    static const struct {
        uint32_t i;
        const char *name;
    } masks[4] = {{3, "tgt_mask"}, {4, "memory_mask"}, {6, "tgt_key_padding_mask"}, {7, "memory_key_padding_mask"}};
    for (int k = 0; k < 4; k++) {
        const struct xval *v = optional(a, masks[k].i, masks[k].name);
        if (v) dpos[2 + k] = *v;
    }
    for (int i = 0; i < 6; i++) dpos[i].borrowed = true;
    st = call(a, dec, dpos, 6, NULL, NULL, 0, out);
    bpcc_xval_release(&memory);
    return st;
}

/* }================================================ */

const struct xop bpcc_attention_ops[] = {
    {'m', "torch.nn.MultiheadAttention", k_multihead_attention},
    {'m', "torch.nn.TransformerEncoderLayer", k_transformer_encoder_layer},
    {'m', "torch.nn.TransformerEncoder", k_transformer_encoder},
    {'m', "torch.nn.TransformerDecoderLayer", k_transformer_decoder_layer},
    {'m', "torch.nn.TransformerDecoder", k_transformer_decoder}, {'m', "torch.nn.Transformer", k_transformer}, {0}
};
