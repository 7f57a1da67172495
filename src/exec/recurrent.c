/*
** recurrent.c — nn.LSTM and nn.GRU in eval mode, as PyTorch 1.13's CPU cells compute them: per
** layer and direction, the input projections of every step in one GEMM (x W_ih^T + b_ih), then per
** step the hidden projection (h W_hh^T + b_hh) and the gates:
**   LSTM  i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of the summed gates (PyTorch's order);
**         c' = f c + i g,  h' = o tanh(c')
**   GRU   r, z = sigmoid(x_r + h_r), sigmoid(x_z + h_z);  n = tanh(x_n + r h_n);
**         h' = (h - n) z + n
** Layers stack; a bidirectional layer runs the reversed sequence with the _reverse weights and
** concatenates both directions' outputs. quantize_fx leaves these modules whole (no static
** pattern), so the interpreter runs them as one op. An LSTM with proj_size P projects each step's
** o tanh(c) to P values (h = W_hr (o tanh(c)), which the next step and layer take); dropout in
** training mode is refused. Outputs agree with PyTorch to ~1e-6.
** The cells (LSTMCell, GRUCell, RNNCell) take one step of the same gates (RNNCell: tanh or relu of
** the summed projections). The reference quantized LSTM and cells of dynamic quantization run the
** same way on their weights quantized and dequantized with each weight's own qparams.
*/
#include "exec.h"

#include <cblas.h>
#include <math.h>

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* the module's tensor `name` of n floats: required, or used when present; *failed when it is
** required and absent, or of another size */
static const float *rnn_tensor(const struct xargs *a, const char *name, int64_t n, bool required, bool *failed)
{
    if (!required && !bpcc_mtensor(a->module, name)) return NULL;
    const float *p = bpcc_mtensor_n(a, a->module, name, n);
    if (!p) *failed = true;
    return p;
}

/* a weight of n floats: a reference module's quantized and dequantized (*owned to free), else the
** module's own */
static const float *rnn_weight(const struct xargs *a, const char *name, int64_t n, bool ref, float **owned, bool *failed)
{
    *owned = NULL;
    const float *p = ref ? bpcc_ref_weight(a, a->module, name, n, owned) : rnn_tensor(a, name, n, true, failed);
    if (!p) *failed = true;
    return p;
}

/* the state argument hx: (h, c) for an LSTM or its cell, h for the others; NULLs when absent */
static bool state_arg(const struct xargs *a, bool lstm, const struct xtensor **h0, const struct xtensor **c0)
{
    *h0 = *c0 = NULL;
    const struct xval *hx = bpcc_xarg(a, 1, "hx");
    if (hx && hx->k == XV_SEQ && lstm && hx->u.seq.n == 2 && hx->u.seq.items[0].k == XV_TENSOR &&
        hx->u.seq.items[1].k == XV_TENSOR)
        *h0 = hx->u.seq.items[0].u.t, *c0 = hx->u.seq.items[1].u.t;
    else if (hx && hx->k == XV_TENSOR && !lstm)
        *h0 = hx->u.t;
    else if (hx && hx->k != XV_NONE) {
        bpcc_xerr(a, "%s's state must be %s", a->module->type, lstm ? "a pair of tensors (h, c)" : "a tensor");
        return false;
    }
    return true;
}

enum cell_kind { CELL_LSTM, CELL_GRU, CELL_TANH, CELL_RELU };

/* One step of H units from the summed projections' rows px = x W_ih^T + b_ih and ph = h W_hh^T +
** b_hh (PyTorch's gate order and arithmetic). h, c: the previous state (NULL: zeros); hy, cy: the
** new one, which may be h and c themselves (element j is read before it is written).
**   LSTM  c' = f c + i g, h' = o tanh(c');  GRU  h' = (h - n) z + n;  RNN  h' = tanh or relu. */
static void cell_step(enum cell_kind kind, const float *px, const float *ph, int64_t H, const float *h, const float *c,
                      float *hy, float *cy)
{
    for (int64_t j = 0; j < H; j++) {
        if (kind == CELL_LSTM) {
            float ig = sigmoid(px[j] + ph[j]), fg = sigmoid(px[H + j] + ph[H + j]);
            float gg = tanhf(px[2 * H + j] + ph[2 * H + j]), og = sigmoid(px[3 * H + j] + ph[3 * H + j]);
            float cv = fg * (c ? c[j] : 0.0f) + ig * gg;
            cy[j] = cv;
            hy[j] = og * tanhf(cv);
        } else if (kind == CELL_GRU) {
            float r = sigmoid(px[j] + ph[j]), z = sigmoid(px[H + j] + ph[H + j]);
            float nn = tanhf(px[2 * H + j] + r * ph[2 * H + j]);
            hy[j] = ((h ? h[j] : 0.0f) - nn) * z + nn;
        } else {
            float v = px[j] + ph[j];
            hy[j] = kind == CELL_RELU ? (v > 0.0f ? v : 0.0f) : tanhf(v);
        }
    }
}

static bool is_reference(const struct bpcc_module *m)
{
    return !strncmp(m->type, "torch.ao.nn.quantized.reference.", 32);
}

/* a * b * c, the floats of a weight or buffer, or -1 past 2^38 (1 TiB, the tensors' own limit) or
** when the product overflows */
static int64_t floats_of(int64_t a, int64_t b, int64_t c)
{
    int64_t ab, abc;
    if (a < 0 || b < 0 || c < 0 || __builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc) ||
        abc > ((int64_t)1 << 38))
        return -1;
    return abc;
}

/* sizes no weights can hold (a model text's hidden_size of 1e15 asked for petabytes) */
static enum bpcc_status beyond_weights(const struct xargs *a, int64_t in, int64_t h)
{
    return bpcc_xerr(a, "%s's sizes (input_size %lld, hidden_size %lld) are beyond 1 TiB of weights", a->module->type,
                     (long long)in, (long long)h);
}

static enum bpcc_status k_recurrent(const struct xargs *a, struct xval *out)
{
    const struct bpcc_module *m = a->module;
    const struct xtensor *x;
    if (!m || !bpcc_xarg_tensor(a, 0, "input", &x)) return m ? BPCC_ERR_GRAPH : bpcc_xerr(a, "a recurrent layer runs as a module");
    bool ref = is_reference(m);
    bool lstm = !strcmp(m->type, "torch.nn.LSTM") || ref;
    int G = lstm ? 4 : 3; /* gates */
    int64_t IN = bpcc_mattr_int(m, "input_size", 0), H = bpcc_mattr_int(m, "hidden_size", 0);
    int64_t layers = bpcc_mattr_int(m, "num_layers", 1);
    bool bf = bpcc_mattr_bool(m, "batch_first", false), bidir = bpcc_mattr_bool(m, "bidirectional", false);
    int64_t D = bidir ? 2 : 1;
    /* LSTM's proj_size P: the hidden state h (and the output) is W_hr (o tanh(c)), P wide; c stays H */
    int64_t P = bpcc_mattr_int(m, "proj_size", 0);
    if (P < 0 || (P && (!lstm || P >= bpcc_mattr_int(m, "hidden_size", 0))))
        return bpcc_xerr(a, "proj_size must be 0, or for an LSTM below hidden_size");
    bool proj = P > 0;
    if (bpcc_mattr_bool(m, "training", false) && bpcc_mattr_float(m, "dropout", 0) > 0 && layers > 1)
        return bpcc_xerr(a, "%s in training mode drops values at random; export the model in eval mode", m->type);
    if (IN <= 0 || H <= 0 || layers <= 0 || layers > 64) return bpcc_xerr(a, "%s needs input_size, hidden_size and num_layers", m->type);
    if (!proj) P = H;
    bool batched = x->ndim == 3;
    if ((x->ndim != 2 && x->ndim != 3) || x->dims[x->ndim - 1] != IN)
        return bpcc_xerr(a, "%s takes [seq, batch, %lld] (or batch first, or unbatched [seq, %lld])", m->type, (long long)IN,
                         (long long)IN);
    int64_t T = batched ? x->dims[bf ? 1 : 0] : x->dims[0], N = batched ? x->dims[bf ? 0 : 1] : 1;
    /* The attributes size every buffer and the state's check below: the first layer's weights
    ** must hold what they say before anything is allocated, and no size may overflow */
    int64_t n_ih = floats_of(G, H, IN), n_hh = floats_of(G, H, P);
    if (n_ih < 0 || n_hh < 0) return beyond_weights(a, IN, H);
    if (!bpcc_mtensor_n(a, m, "weight_ih_l0", n_ih) || !bpcc_mtensor_n(a, m, "weight_hh_l0", n_hh)) return BPCC_ERR_GRAPH;
    /* the initial state: hx, or (h0, c0) for LSTM; [layers D, N, P] and [layers D, N, H] (unbatched:
    ** without N) */
    const struct xtensor *h0, *c0;
    if (!state_arg(a, lstm, &h0, &c0)) return BPCC_ERR_GRAPH;
    for (int k = 0; k < 2; k++) {
        const struct xtensor *s = k ? c0 : h0;
        if (s && s->numel != (uint64_t)(layers * D * N * (k ? H : P)))
            return bpcc_xerr(a, "%s's initial state has %llu elements, not %lld", m->type, (unsigned long long)s->numel,
                             (long long)(layers * D * N * (k ? H : P)));
    }
    /* the sequence as [T, N, features], the running layer input and output */
    int64_t F = IN > D * P ? IN : D * P;
    int64_t n_seq = floats_of(T, N, F), n_nxt = floats_of(T, N, D * P), n_gx = floats_of(T, N, G * H);
    if (n_seq < 0 || n_nxt < 0 || n_gx < 0)
        return bpcc_xerr(a, "%s on a sequence of %lld x %lld would need more than 1 TiB", m->type, (long long)T, (long long)N);
    float *seq = bpcc_malloc((size_t)(n_seq + 1) * sizeof *seq), *nxt = bpcc_malloc((size_t)(n_nxt + 1) * sizeof *nxt);
    float *gx = bpcc_malloc((size_t)(n_gx + 1) * sizeof *gx), *gh = bpcc_malloc((size_t)(N * G * H + 1) * sizeof *gh);
    float *h = bpcc_malloc((size_t)(N * P + 1) * sizeof *h), *c = bpcc_malloc((size_t)(N * H + 1) * sizeof *c);
    float *hf = proj ? bpcc_malloc((size_t)(N * H + 1) * sizeof *hf) : h; /* o tanh(c) before the projection */
    int64_t sdims[3] = {layers * D, N, P}, cdims[3] = {layers * D, N, H};
    struct xtensor *hn = bpcc_xtensor_new(batched ? 3 : 2, batched ? sdims : (int64_t[]){layers * D, P});
    struct xtensor *cn = lstm ? bpcc_xtensor_new(batched ? 3 : 2, batched ? cdims : (int64_t[]){layers * D, H}) : NULL;
    struct xtensor *y = NULL;
    float *own_ih = NULL, *own_hh = NULL, *own_hr = NULL;
    enum bpcc_status st = BPCC_ERR_GRAPH;
    if (!seq || !nxt || !gx || !gh || !h || !c || !hf || !hn || (lstm && !cn)) {
        st = bpcc_diag_nomem(a->d);
        goto done;
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++)
            memcpy(seq + (t * N + n) * IN, x->data + (batched && bf ? n * T + t : t * N + n) * IN, (size_t)IN * sizeof *seq);
    bpcc_blas_set_threads(bpcc_exec_threads(a->ctx));
    int64_t in = IN;
    bool has_bias = bpcc_mattr_bool(m, "bias", true);
    for (int64_t l = 0; l < layers; l++) {
        for (int64_t dir = 0; dir < D; dir++) {
            char name[64];
            bool failed = false;
            const char *sfx = dir ? "_reverse" : "";
            snprintf(name, sizeof name, "weight_ih_l%lld%s", (long long)l, sfx);
            bpcc_xfree(own_ih);
            bpcc_xfree(own_hh);
            bpcc_xfree(own_hr);
            own_ih = own_hh = own_hr = NULL;
            const float *wih = rnn_weight(a, name, G * H * in, ref, &own_ih, &failed);
            snprintf(name, sizeof name, "weight_hh_l%lld%s", (long long)l, sfx);
            const float *whh = failed ? NULL : rnn_weight(a, name, G * H * P, ref, &own_hh, &failed);
            snprintf(name, sizeof name, "weight_hr_l%lld%s", (long long)l, sfx);
            const float *whr = failed || !proj ? NULL : rnn_weight(a, name, P * H, ref, &own_hr, &failed);
            snprintf(name, sizeof name, "bias_ih_l%lld%s", (long long)l, sfx);
            const float *bih = rnn_tensor(a, name, G * H, has_bias, &failed);
            snprintf(name, sizeof name, "bias_hh_l%lld%s", (long long)l, sfx);
            const float *bhh = rnn_tensor(a, name, G * H, has_bias, &failed);
            if (failed) goto done;
            /* every step's input projections at once: gx[T N, G H] = seq W_ih^T + b_ih */
            for (int64_t r = 0; r < T * N; r++)
                for (int64_t k = 0; k < G * H; k++) gx[r * G * H + k] = bih ? bih[k] : 0.0f;
            if (T && N)
                bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(T * N), (int)(G * H), (int)in, 1.0f, seq, (int)in,
                           wih, (int)in, 1.0f, gx, (int)(G * H));
            int64_t s0 = (l * D + dir) * N * P, c0s = (l * D + dir) * N * H;
            for (int64_t i = 0; i < N * P; i++) h[i] = h0 ? h0->data[s0 + i] : 0.0f;
            for (int64_t i = 0; i < N * H; i++) c[i] = c0 ? c0->data[c0s + i] : 0.0f;
            for (int64_t step = 0; step < T; step++) {
                int64_t t = dir ? T - 1 - step : step;
                for (int64_t n = 0; n < N; n++)
                    for (int64_t k = 0; k < G * H; k++) gh[n * G * H + k] = bhh ? bhh[k] : 0.0f;
                bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)(G * H), (int)P, 1.0f, h, (int)P, whh, (int)P,
                           1.0f, gh, (int)(G * H));
                /* the new state in place (an LSTM's h, before any projection, in hf) */
                for (int64_t n = 0; n < N; n++)
                    cell_step(lstm ? CELL_LSTM : CELL_GRU, gx + (t * N + n) * G * H, gh + n * G * H, H, hf + n * H, c + n * H,
                              hf + n * H, c + n * H);
                /* the projection, as PyTorch's matmul(h, w_hr^T) */
                if (proj)
                    bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)P, (int)H, 1.0f, hf, (int)H, whr, (int)H,
                               0.0f, h, (int)P);
                for (int64_t n = 0; n < N; n++)
                    memcpy(nxt + (t * N + n) * D * P + dir * P, h + n * P, (size_t)P * sizeof *h);
            }
            memcpy(hn->data + s0, h, (size_t)(N * P) * sizeof *h);
            if (lstm) memcpy(cn->data + c0s, c, (size_t)(N * H) * sizeof *c);
        }
        in = D * P;
        memcpy(seq, nxt, (size_t)(T * N * in) * sizeof *seq);
    }
    int64_t odims[3] = {bf ? N : T, bf ? T : N, D * P};
    y = batched ? bpcc_xtensor_new(3, odims) : bpcc_xtensor_new(2, (int64_t[]){T, D * P});
    if (!y) {
        st = bpcc_diag_nomem(a->d);
        goto done;
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++)
            memcpy(y->data + (batched && bf ? n * T + t : t * N + n) * D * P, seq + (t * N + n) * D * P,
                   (size_t)(D * P) * sizeof *seq);
    /* (output, h_n) or (output, (h_n, c_n)) */
    struct xval *items = bpcc_malloc(2 * sizeof *items), *state = lstm ? bpcc_malloc(2 * sizeof *state) : NULL;
    if (!items || (lstm && !state)) {
        bpcc_xfree(items);
        bpcc_xfree(state);
        st = bpcc_diag_nomem(a->d);
        goto done;
    }
    items[0] = (struct xval){.k = XV_TENSOR, .u.t = y};
    if (lstm) {
        state[0] = (struct xval){.k = XV_TENSOR, .u.t = hn};
        state[1] = (struct xval){.k = XV_TENSOR, .u.t = cn};
        items[1] = (struct xval){.k = XV_SEQ, .u.seq = {2, state}};
    } else {
        items[1] = (struct xval){.k = XV_TENSOR, .u.t = hn};
    }
    *out = (struct xval){.k = XV_SEQ, .u.seq = {2, items}};
    y = hn = cn = NULL;
    st = BPCC_OK;
done:
    bpcc_xfree(own_ih);
    bpcc_xfree(own_hh);
    bpcc_xfree(own_hr);
    if (hf != h) bpcc_xfree(hf);
    bpcc_xtensor_free(y);
    bpcc_xtensor_free(hn);
    bpcc_xtensor_free(cn);
    bpcc_xfree(seq);
    bpcc_xfree(nxt);
    bpcc_xfree(gx);
    bpcc_xfree(gh);
    bpcc_xfree(h);
    bpcc_xfree(c);
    return st;
}

/* LSTMCell(input, hx=None) -> (h', c'); GRUCell and RNNCell(input, hx=None) -> h'. input [N, IN]
** or unbatched [IN]; the state [N, H] (or [H]), zeros when absent. The gates as the layers above
** compute them: (x W_ih^T + b_ih) + (h W_hh^T + b_hh). */
static enum bpcc_status k_cell(const struct xargs *a, struct xval *out)
{
    const struct bpcc_module *m = a->module;
    const struct xtensor *x;
    if (!m || !bpcc_xarg_tensor(a, 0, "input", &x)) return m ? BPCC_ERR_GRAPH : bpcc_xerr(a, "a recurrent cell runs as a module");
    const char *t = strrchr(m->type, '.') + 1;
    bool ref = is_reference(m), lstm = !strcmp(t, "LSTMCell"), gru = !strcmp(t, "GRUCell");
    int G = lstm ? 4 : gru ? 3 : 1;
    enum cell_kind kind = lstm ? CELL_LSTM : gru ? CELL_GRU : CELL_TANH;
    if (!lstm && !gru) {
        const struct bpcc_value *nl = bpcc_module_attr(m, "nonlinearity");
        if (nl && nl->kind == BPCC_VAL_STR && !strcmp(nl->u.s, "relu")) kind = CELL_RELU;
        else if (nl && !(nl->kind == BPCC_VAL_STR && !strcmp(nl->u.s, "tanh")))
            return bpcc_xerr(a, "RNNCell's nonlinearity must be 'tanh' or 'relu'");
    }
    int64_t IN = bpcc_mattr_int(m, "input_size", 0), H = bpcc_mattr_int(m, "hidden_size", 0);
    if (IN <= 0 || H <= 0) return bpcc_xerr(a, "%s needs input_size and hidden_size", m->type);
    bool batched = x->ndim == 2;
    if ((x->ndim != 1 && x->ndim != 2) || x->dims[x->ndim - 1] != IN)
        return bpcc_xerr(a, "%s takes [batch, %lld] or unbatched [%lld]", m->type, (long long)IN, (long long)IN);
    int64_t N = batched ? x->dims[0] : 1;
    const struct xtensor *h0, *c0;
    if (!state_arg(a, lstm, &h0, &c0)) return BPCC_ERR_GRAPH;
    for (int k = 0; k < 2; k++) {
        const struct xtensor *s = k ? c0 : h0;
        if (s && (s->numel != (uint64_t)(N * H) || s->ndim != x->ndim))
            return bpcc_xerr(a, "%s's state must be [%s%lld]", m->type, batched ? "batch, " : "", (long long)H);
    }
    /* the attributes size the weights and the buffers: checked before either is read or made */
    int64_t n_ih = floats_of(G, H, IN), n_hh = floats_of(G, H, H), n_g = floats_of(N, G, H);
    if (n_ih < 0 || n_hh < 0 || n_g < 0) return beyond_weights(a, IN, H);
    bool failed = false, has_bias = bpcc_mattr_bool(m, "bias", true);
    float *own_ih = NULL, *own_hh = NULL;
    const float *wih = rnn_weight(a, "weight_ih", n_ih, ref, &own_ih, &failed);
    const float *whh = failed ? NULL : rnn_weight(a, "weight_hh", n_hh, ref, &own_hh, &failed);
    const float *bih = failed ? NULL : rnn_tensor(a, "bias_ih", G * H, has_bias, &failed);
    const float *bhh = failed ? NULL : rnn_tensor(a, "bias_hh", G * H, has_bias, &failed);
    /* weights that hold what the attributes say bound the buffers' sizes: none is made otherwise */
    size_t gbytes = (size_t)(n_g + 1) * sizeof(float);
    float *gx = failed ? NULL : bpcc_malloc(gbytes), *gh = failed ? NULL : bpcc_malloc(gbytes);
    int64_t sd[2] = {N, H};
    struct xtensor *hy = failed ? NULL : bpcc_xtensor_new(batched ? 2 : 1, batched ? sd : sd + 1);
    struct xtensor *cy = lstm && !failed ? bpcc_xtensor_new(batched ? 2 : 1, batched ? sd : sd + 1) : NULL;
    struct xval *items = lstm ? bpcc_malloc(2 * sizeof *items) : NULL;
    enum bpcc_status st = BPCC_ERR_GRAPH;
    if (failed) goto done;
    if (!gx || !gh || !hy || (lstm && (!cy || !items))) {
        st = bpcc_diag_nomem(a->d);
        goto done;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < G * H; k++) {
            gx[n * G * H + k] = bih ? bih[k] : 0.0f;
            gh[n * G * H + k] = bhh ? bhh[k] : 0.0f;
        }
    bpcc_blas_set_threads(bpcc_exec_threads(a->ctx));
    bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)(G * H), (int)IN, 1.0f, x->data, (int)IN, wih, (int)IN,
               1.0f, gx, (int)(G * H));
    if (h0)
        bpcc_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)(G * H), (int)H, 1.0f, h0->data, (int)H, whh,
                   (int)H, 1.0f, gh, (int)(G * H));
    for (int64_t n = 0; n < N; n++)
        cell_step(kind, gx + n * G * H, gh + n * G * H, H, h0 ? h0->data + n * H : NULL, c0 ? c0->data + n * H : NULL,
                  hy->data + n * H, cy ? cy->data + n * H : NULL);
    if (lstm) {
        items[0] = (struct xval){.k = XV_TENSOR, .u.t = hy};
        items[1] = (struct xval){.k = XV_TENSOR, .u.t = cy};
        *out = (struct xval){.k = XV_SEQ, .u.seq = {2, items}};
        items = NULL;
    } else {
        *out = (struct xval){.k = XV_TENSOR, .u.t = hy};
    }
    hy = cy = NULL;
    st = BPCC_OK;
done:
    bpcc_xfree(own_ih);
    bpcc_xfree(own_hh);
    bpcc_xfree(gx);
    bpcc_xfree(gh);
    bpcc_xfree(items);
    bpcc_xtensor_free(hy);
    bpcc_xtensor_free(cy);
    return st;
}

const struct xop bpcc_recurrent_ops[] = {
    {'m', "torch.nn.LSTM", k_recurrent}, {'m', "torch.nn.GRU", k_recurrent},
    {'m', "torch.ao.nn.quantized.reference.LSTM", k_recurrent}, {'m', "torch.nn.LSTMCell", k_cell},
    {'m', "torch.nn.GRUCell", k_cell}, {'m', "torch.nn.RNNCell", k_cell},
    {'m', "torch.ao.nn.quantized.reference.LSTMCell", k_cell}, {'m', "torch.ao.nn.quantized.reference.GRUCell", k_cell},
    {'m', "torch.ao.nn.quantized.reference.RNNCell", k_cell}, {0}
};
