/*
** exec.h — the reference interpreter (internal): runtime values, the kernel table, and the
** helpers kernels use to read their arguments.
*/
#ifndef BPCC_EXEC_H
#define BPCC_EXEC_H

#include "../calib/observer.h"
#include "../ir/ir.h"

/* A float32 tensor, row-major, owned by whoever holds it. */
struct xtensor {
    uint32_t ndim;
    int64_t dims[BPCC_MAX_DIMS];
    uint64_t numel;
    float *data;
    /* a quantized tensor (torch.quantize_per_tensor / _per_channel): data holds the integer
    ** values; qdtype NONE for float tensors */
    enum bpcc_dtype qdtype;
    int64_t qaxis;            /* -1: per tensor */
    float *qscale;            /* 1 or dims[qaxis] values, owned */
    int64_t *qzp;
    /* a bool tensor (a comparison's result, a mask): data holds 0 or 1, which arithmetic takes as
    ** PyTorch promotes bools; the ops that move elements keep the mark, ~ and logical_not need it */
    bool boolean;
};

/* XV_DICT keeps its entries as a sequence of 2n items: key (XV_STR, the graph's string) and value */
enum xkind { XV_NONE = 0, XV_BOOL, XV_INT, XV_FLOAT, XV_STR, XV_TENSOR, XV_SEQ, XV_SLICE, XV_DICT, XV_ELLIPSIS, XV_OTHER };

/* A runtime value. Tensors and sequences are heap objects owned by the value that holds them
** (the node's slot); arguments borrow. */
struct xval {
    enum xkind k;
    bool borrowed; /* an argument's view of a node's sequence: not freed with the argument */
    union {
        bool b;
        int64_t i;
        double f;
        const char *s;
        struct xtensor *t;
        struct {
            uint32_t n;
            struct xval *items; /* XV_SLICE: 3 items */
        } seq; /* XV_SEQ, XV_SLICE, XV_DICT */
    } u;
};

struct xctx;

/* A node's arguments after evaluation: positional, then keyword. */
struct xargs {
    const struct bpcc_node *node;
    const struct bpcc_module *module; /* call_module: the module */
    uint32_t n;
    const struct xval *pos;
    uint32_t n_kw;
    const char *const *kw_names;
    const struct xval *kw;
    struct bpcc_diag *d;
    struct xctx *ctx;
    const float *weight_override; /* a reference module's quantized-dequantized weight */
    /* pos[0] is the caller's own value, which dies after this call (a fused module's intermediate):
    ** the kernel may change its tensor in place and return that very tensor as its result */
    bool consume;
};

typedef enum bpcc_status (*xkernel)(const struct xargs *a, struct xval *out);

/* An op a kernel runs: kind 'm' a module type, 'f' a function, 't' a Tensor method. */
struct xop {
    char kind;
    const char *op;
    xkernel fn;
};

/* Each kernel file's ops, ended by {0}: elementwise.c, shape.c, reduce.c, quantize.c, einsum.c,
** nn.c, resize.c, attention.c, recurrent.c, swin.c, mvit.c, distance.c. kernels.c indexes them all. */
BPCC_INTERNAL extern const struct xop bpcc_elementwise_ops[], bpcc_shape_ops[], bpcc_reduce_ops[], bpcc_quantize_ops[],
    bpcc_einsum_ops[], bpcc_nn_ops[], bpcc_resize_ops[], bpcc_attention_ops[], bpcc_recurrent_ops[], bpcc_swin_ops[], bpcc_mvit_ops[],
    bpcc_distance_ops[];

/* the kernel for op `op` of a node of kind `kind` (a module type for CALL_MODULE), NULL if none */
BPCC_INTERNAL xkernel bpcc_exec_kernel(enum bpcc_node_kind kind, const char *op);
/* whether kernel k takes quantized tensors (dequantize, size, getattr); the interpreter refuses
** them to the others */
BPCC_INTERNAL bool bpcc_exec_kernel_takes_quantized(xkernel k);

/* kernels one file calls in another: nn.c's adaptive average pooling (resize.c's area mode),
** shape.c's narrow (x's elements [start, start + len) along dim, as a new tensor; NULL on OOM) and
** nonzero */
BPCC_INTERNAL enum bpcc_status bpcc_k_adaptive_avg_pool1d(const struct xargs *a, struct xval *out);
BPCC_INTERNAL enum bpcc_status bpcc_k_adaptive_avg_pool2d(const struct xargs *a, struct xval *out);
BPCC_INTERNAL enum bpcc_status bpcc_k_adaptive_avg_pool3d(const struct xargs *a, struct xval *out);
/* attention.c: y[rows, out] = x[rows, in] w[out, in]^T + b (b may be NULL), F.linear through BLAS as
** PyTorch's addmm does it: y starts as the bias and the product is added to it */
BPCC_INTERNAL void bpcc_project(const float *x, int64_t rows, int64_t in, const float *w, const float *b, int64_t out,
                                float *y);
/* resize.c: each of `planes` rows of `in` floats at x linearly interpolated to `out` floats at y
** (F.interpolate(mode="linear"), align_corners False, no scale factor); false when out of memory */
BPCC_INTERNAL bool bpcc_resize_linear(const float *x, int64_t planes, int64_t in, int64_t out, float *y);
BPCC_INTERNAL struct xtensor *bpcc_xnarrow(const struct xtensor *x, uint32_t dim, int64_t start, int64_t len);
BPCC_INTERNAL enum bpcc_status bpcc_xnonzero(const struct xargs *a, const struct xtensor *x, bool as_tuple, struct xval *out);

/* helpers for kernels (interp.c) */
BPCC_INTERNAL enum bpcc_status bpcc_xerr(const struct xargs *a, const char *fmt, ...) BPCC_PRINTF(2, 3);
BPCC_INTERNAL const struct xval *bpcc_xarg(const struct xargs *a, uint32_t i, const char *name);
/* argument i (or the keyword `name`) not given, or None */
static inline bool bpcc_xarg_absent(const struct xargs *a, uint32_t i, const char *name)
{
    const struct xval *v = bpcc_xarg(a, i, name);
    return !v || v->k == XV_NONE;
}
/* argument i (or `name`) given and not None; false with "argument NAME is missing" otherwise */
BPCC_INTERNAL bool bpcc_xarg_required(const struct xargs *a, uint32_t i, const char *name);
/* Python's slice bounds [start:stop] over n elements as [*lo, *hi): a negative bound counts from
** the end, both are clamped to [0, n] (hi may end below lo: an empty slice) */
static inline void bpcc_slice_bounds(int64_t start, int64_t stop, int64_t n, int64_t *lo, int64_t *hi)
{
    start = start < 0 ? start + n : start;
    stop = stop < 0 ? stop + n : stop;
    *lo = start < 0 ? 0 : start > n ? n : start;
    *hi = stop < 0 ? 0 : stop > n ? n : stop;
}
/* NULL when the tensor would have more than bpcc_exec_max_elements elements (or on OOM) */
BPCC_INTERNAL extern uint64_t bpcc_exec_max_elements;
BPCC_INTERNAL struct xtensor *bpcc_xtensor_new(uint32_t ndim, const int64_t *dims);
/* t's elements from n integers or bools of dtype dt (I64, I32, I16, I8, U8, BOOL) at p: as floats,
** exact below 2^24; a bool tensor is marked */
BPCC_INTERNAL void bpcc_xtensor_from_integers(struct xtensor *t, enum bpcc_dtype dt, const void *p);
BPCC_INTERNAL void bpcc_xtensor_free(struct xtensor *t);
/* the integer range of a quantized dtype (quint8, qint8, qint32); false for any other */
BPCC_INTERNAL bool bpcc_xqrange(enum bpcc_dtype t, int64_t *lo, int64_t *hi);
/* x's values as floats: a quantized tensor dequantized, a float one copied; NULL out of memory */
BPCC_INTERNAL struct xtensor *bpcc_xtensor_dequantized(const struct xtensor *x);
/* x's values to read as floats: a float tensor's own data, a quantized one's dequantized copy, held
** in *owned until freed (bpcc_xtensor_free; NULL for a float tensor). NULL when out of memory. */
BPCC_INTERNAL const float *bpcc_xtensor_values(const struct xtensor *x, struct xtensor **owned);
BPCC_INTERNAL void bpcc_xval_release(struct xval *v);
BPCC_INTERNAL enum bpcc_status bpcc_xval_copy(const struct xval *src, struct xval *dst);
/* small helpers every kernel file uses */
static inline uint64_t bpcc_nz(uint64_t v) { return v ? v : 1; }
static inline int64_t bpcc_wrap_dim(int64_t d, uint32_t ndim) { return d < 0 ? d + (int64_t)ndim : d; }
/* a new tensor of x's shape (uninitialized; NULL on OOM or over the element limit) */
static inline struct xtensor *bpcc_xlike(const struct xtensor *x) { return bpcc_xtensor_new(x->ndim, x->dims); }
/* y (may be NULL) marked as holding bools (0 or 1) or not */
static inline struct xtensor *bpcc_xmark(struct xtensor *y, bool boolean)
{
    if (y) y->boolean = boolean;
    return y;
}
/* a kernel's result: t (NULL: out of memory) as the tensor value *out */
static inline enum bpcc_status bpcc_xput(const struct xargs *a, struct xtensor *t, struct xval *out)
{
    if (!t) return bpcc_diag_nomem(a->d);
    *out = (struct xval){.k = XV_TENSOR, .u.t = t};
    return BPCC_OK;
}
/* the layout of x around dimension dim: outer x n x inner elements */
static inline void bpcc_xaround(const struct xtensor *x, int64_t dim, uint64_t *outer, int64_t *n, uint64_t *inner)
{
    *inner = 1;
    for (uint32_t i = (uint32_t)dim + 1; i < x->ndim; i++) *inner *= (uint64_t)x->dims[i];
    *n = x->ndim ? x->dims[dim] : 1;
    *outer = x->numel / bpcc_nz((uint64_t)*n * *inner);
}
/* typed argument readers: false (with an error filled) on a wrong type */
BPCC_INTERNAL bool bpcc_xarg_tensor(const struct xargs *a, uint32_t i, const char *name, const struct xtensor **out);
BPCC_INTERNAL bool bpcc_xarg_int(const struct xargs *a, uint32_t i, const char *name, int64_t dflt, int64_t *out);
BPCC_INTERNAL bool bpcc_xarg_float(const struct xargs *a, uint32_t i, const char *name, double dflt, double *out);
BPCC_INTERNAL bool bpcc_xarg_bool(const struct xargs *a, uint32_t i, const char *name, bool dflt, bool *out);
/* an int or a list/tuple of ints (n_want > 1 repeats a single int) */
BPCC_INTERNAL bool bpcc_xarg_ints(const struct xargs *a, uint32_t i, const char *name, uint32_t n_want,
                                  const int64_t *dflt, int64_t *out, uint32_t *n_out);
/* sizes from argument i on: one list or tuple (or the keyword `name`), or the rest of the
** positional arguments as ints (x.repeat(2, 1), x.repeat((2, 1))) */
BPCC_INTERNAL bool bpcc_xarg_sizes(const struct xargs *a, uint32_t i, const char *name, int64_t *out, uint32_t *n);
/* a dtype argument (read from the node: dtypes are not runtime values) */
BPCC_INTERNAL bool bpcc_xarg_dtype(const struct xargs *a, uint32_t i, const char *name, enum bpcc_dtype *out);
/* a number, or a one-element tensor (get_attr of a scale / zero point buffer); false otherwise */
BPCC_INTERNAL bool bpcc_xscalar(const struct xval *v, double *out);
/* dimension *d of a tensor of rank ndim wrapped into [0, ndim) (a scalar takes 0 and -1); false
** with an error when out of range */
BPCC_INTERNAL bool bpcc_xdim(const struct xargs *a, int64_t *d, uint32_t ndim);
/* a module attribute as ints / number / bool */
BPCC_INTERNAL bool bpcc_mattr_ints(const struct xargs *a, const char *key, uint32_t n_want, const int64_t *dflt,
                                   int64_t *out);
BPCC_INTERNAL double bpcc_mattr_float(const struct bpcc_module *m, const char *key, double dflt);
/* an integer attribute (a float one if whole; INT64_MIN for one that is not, or out of range) */
BPCC_INTERNAL int64_t bpcc_mattr_int(const struct bpcc_module *m, const char *key, int64_t dflt);
BPCC_INTERNAL bool bpcc_mattr_bool(const struct bpcc_module *m, const char *key, bool dflt);
/* a module's float32 tensor (weight, bias, running_mean ...), NULL if absent */
BPCC_INTERNAL const struct bpcc_tensor *bpcc_mtensor(const struct bpcc_module *m, const char *name);
/* module m's float32 tensor `name` of n elements (a layer's weights); NULL with an error naming the
** owner's type when it is absent (or m is NULL) or of another size */
BPCC_INTERNAL const float *bpcc_mtensor_n(const struct xargs *a, const struct bpcc_module *m, const char *name, int64_t n);
/* x (float32, dims) quantized and dequantized with q into out (numel floats), as ATen's
** quantize_per_tensor / quantize_per_channel + dequantize; false when q has no integer range or
** does not fit the shape (nn.c). The _weight form reads an IR tensor. */
BPCC_INTERNAL bool bpcc_fake_quantize(const float *x, uint32_t ndim, const int64_t *dims, const struct bpcc_qparams *q,
                                      float *out);
BPCC_INTERNAL bool bpcc_fake_quantize_weight(const struct bpcc_tensor *w, const struct bpcc_qparams *q, float *out);
/* a reference RNN's weight `wn` (n floats) as its forward uses it: quantized and dequantized
** with its <wn>_ qparams, or as it is when it has none (a float dtype, no qscheme); *owned is what
** the caller frees (NULL when nothing was made). NULL with an error set when the weight is absent,
** or has a qscheme but no fitting <wn>_scale / <wn>_zero_point buffers (nn.c). */
BPCC_INTERNAL const float *bpcc_ref_weight(const struct xargs *a, const struct bpcc_module *m, const char *wn, int64_t n,
                                           float **owned);
/* x rounded to float16 and back (x.to(torch.float16).float()) (quantize.c) */
BPCC_INTERNAL float bpcc_round_to_half(float x);
/* ATen's ChooseQuantizationParams for the range [lo, hi] (finite, lo <= hi) and [qmin, qmax], as
** quantize_per_tensor_dynamic calls it (quantize.c) */
BPCC_INTERNAL void bpcc_choose_qparams(float lo, float hi, int64_t qmin, int64_t qmax, bool reduce_range, float *scale,
                                       int64_t *zp);
/* the observer state of an observer module (interp.c) */
BPCC_INTERNAL struct obs_state *bpcc_exec_observer(struct xctx *c, const struct bpcc_module *m);
/* run a module as a call (fused containers run their children) */
BPCC_INTERNAL enum bpcc_status bpcc_exec_module(const struct xargs *a, const struct bpcc_module *m, const struct xval *in,
                                                struct xval *out);
BPCC_INTERNAL int bpcc_exec_threads(const struct xctx *c);
/* Data a kernel derives from weights w (transformed convolution weights), kept from one run to the
** next for the node: only for a module's own weights, which do not change while the exec lives (not
** for function arguments or a reference module's per-call weights). derived: what was kept for
** this node, module and w, or NULL; *ran_before: whether the node ran with them before in this
** exec (a kernel may derive data only from its second run on, so that a single run pays nothing).
** keep_derived: keep `data` (bpcc_malloc'd; the exec frees it) after derived gave NULL; false
** (the caller keeps ownership) where it may not. */
BPCC_INTERNAL float *bpcc_exec_derived(const struct xargs *a, const float *w, bool *ran_before);
BPCC_INTERNAL bool bpcc_exec_keep_derived(const struct xargs *a, const float *w, float *data);

/* a batch: the graph inputs, in placeholder order (batch.c) */
struct xbatch {
    struct bpcc_safetensors *st;
    struct xval *inputs;
    uint32_t n;
};
/* Open a batch file and check it against g's inputs (one float32 tensor per placeholder, or a
** quantized one (batch.c), named after it, of the traced shape but for the batch dimension);
** load = read the tensors too. */
BPCC_INTERNAL enum bpcc_status bpcc_batch_open(const struct bpcc_graph *g, const char *path, bool load, struct xbatch *b,
                                               struct bpcc_diag *d);
BPCC_INTERNAL void bpcc_batch_release(struct xbatch *b);

/* blas.c: the BLAS, loaded once per process by bpcc_exec_new (a clear error where it cannot be),
** or by the first bpcc_sgemm of a kernel called on its own (an assertion then); then cblas_sgemm
** with CBLAS's enum values, and OpenBLAS's thread count where it has one */
BPCC_INTERNAL enum bpcc_status bpcc_blas_load(struct bpcc_diag *d);
BPCC_INTERNAL void bpcc_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                              const float *b, int ldb, float beta, float *c, int ldc);
BPCC_INTERNAL void bpcc_blas_set_threads(int n);

/* the run: execute the graph once on inputs (one per placeholder, in order); outputs into *out
** (the output node's value, owned by the caller) when out is not NULL */
struct bpcc_exec;
BPCC_INTERNAL enum bpcc_status bpcc_exec_new(const struct bpcc_graph *g, int threads, struct bpcc_exec **out,
                                             struct bpcc_diag *d);
BPCC_INTERNAL void bpcc_exec_free(struct bpcc_exec *e);
/* Called after each node has run with its value, which it may read or replace (owning what it puts
** there); a failure stops the run. */
typedef enum bpcc_status (*bpcc_exec_hook)(void *ud, const struct bpcc_node *n, struct xval *value, struct bpcc_diag *d);
BPCC_INTERNAL void bpcc_exec_set_hook(struct bpcc_exec *e, bpcc_exec_hook hook, void *ud);
BPCC_INTERNAL enum bpcc_status bpcc_exec_run(struct bpcc_exec *e, const struct xval *inputs, uint32_t n_inputs,
                                             struct xval *out, struct bpcc_diag *d);
/* The value at (y, x) of a [H, W] image padded by mode: 0 zeros, 1 reflect (|y| < H, |x| < W
** assumed), 2 replicate, 3 circular. */
static inline float bpcc_pad_at(const float *img, int64_t H, int64_t W, int64_t y, int64_t x, int mode)
{
    if (mode == 1) {
        if (y < 0) y = -y;
        if (y >= H) y = 2 * H - 2 - y;
        if (x < 0) x = -x;
        if (x >= W) x = 2 * W - 2 - x;
    } else if (mode == 2) {
        y = y < 0 ? 0 : y >= H ? H - 1 : y;
        x = x < 0 ? 0 : x >= W ? W - 1 : x;
    } else if (mode == 3) {
        y = ((y % H) + H) % H;
        x = ((x % W) + W) % W;
    } else if (y < 0 || y >= H || x < 0 || x >= W) {
        return 0.0f;
    }
    return img[y * W + x];
}

/* window.c: a 2-d sliding window over [H, W] planes (1-d: H = KH = 1) */
struct bpcc_window {
    int64_t H, W, KH, KW, OH, OW;
    int64_t sh, sw, ph, pw, dh, dw;
    int mode;   /* padding, as for bpcc_pad_at */
    float fill; /* mode 0's padding value */
};
/* convolution with one input channel per group (Cout a multiple of C): input [N, C, H, W], weight
** [Cout, 1, KH, KW], bias [Cout] or NULL, into y [N, Cout, OH, OW]; false on OOM */
BPCC_INTERNAL bool bpcc_dwconv(const struct bpcc_window *p, int64_t N, int64_t C, int64_t Cout, const float *x,
                               const float *w, const float *b, float *y);
/* max pooling of n_planes planes into y [n_planes, OH, OW] (pad with fill = -inf; NaN wins); false on OOM */
BPCC_INTERNAL bool bpcc_maxpool2d(const struct bpcc_window *p, uint64_t n_planes, const float *x, float *y);

/* winograd.c: a 3x3 convolution at stride 1 and dilation 1 (KH, KW, strides and dilations of p
** as such) by F(2x2, 3x3): input [N, C, H, W], bias [Cout] or NULL, into y [N, Cout, OH, OW],
** with the weights [Cout, C / groups, 3, 3] transformed by bpcc_winograd3x3_weights into U
** (bpcc_winograd3x3_size floats); GEMMs through OpenBLAS; false on OOM */
BPCC_INTERNAL size_t bpcc_winograd3x3_size(int64_t groups, int64_t C, int64_t Cout);
BPCC_INTERNAL bool bpcc_winograd3x3_weights(int64_t groups, int64_t C, int64_t Cout, const float *w, float *U);
BPCC_INTERNAL bool bpcc_winograd3x3(const struct bpcc_window *p, int64_t N, int64_t groups, int64_t C, int64_t Cout,
                                    const float *x, const float *U, const float *b, float *y);

/* fsum.c: x[0] + ... + x[n - 1] in float, in the order of PyTorch 1.13's CPU sum (its AVX2
** kernels), for the reductions whose summed elements are contiguous */
BPCC_INTERNAL float bpcc_fsum(const float *x, uint64_t n);
/* out[k] = the sum of column k of the row-major [rows, cols] block x, in the same order */
BPCC_INTERNAL void bpcc_fsum_columns(const float *x, uint64_t rows, uint64_t cols, float *out);

/* vmath.c: y[i] = f(x[i]) for i < n (x == y allowed), vectorized through libmvec where built */
BPCC_INTERNAL void bpcc_vexpf(const float *x, float *y, uint64_t n);
BPCC_INTERNAL void bpcc_vtanhf(const float *x, float *y, uint64_t n);
BPCC_INTERNAL void bpcc_verff(const float *x, float *y, uint64_t n);

/* store every observer's statistics and qparams on its module, as bpcc_calibrate does after its runs
** (calibrate.c) */
BPCC_INTERNAL enum bpcc_status bpcc_calibrate_store(struct bpcc_graph *g, const struct bpcc_exec *e, struct bpcc_diag *d);
/* observers after the runs: module -> state */
BPCC_INTERNAL uint32_t bpcc_exec_n_observers(const struct bpcc_exec *e);
BPCC_INTERNAL const struct bpcc_module *bpcc_exec_observer_at(const struct bpcc_exec *e, uint32_t i,
                                                              const struct obs_state **state);

#endif
