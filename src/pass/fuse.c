/*
** fuse.c — the fusion pass (PyTorch's fuse_fx with a backend config): match the patterns that
** have a fuser method, replace each match by its fused module at the root node's place, and
** fold batch norms numerically in eval mode exactly as torch.nn.utils.fusion does (float32).
*/
#include "pass.h"
#include "../calib/observer.h"

#include <math.h>

/* {==================== helpers on modules ==================== */

static bool attr_bool(const struct bpcc_module *m, const char *key, bool dflt)
{
    const struct bpcc_value *v = bpcc_module_attr(m, key);
    return v && v->kind == BPCC_VAL_BOOL ? v->u.b : dflt;
}

static int64_t attr_int(const struct bpcc_module *m, const char *key, int64_t dflt)
{
    const struct bpcc_value *v = bpcc_module_attr(m, key);
    return v && v->kind == BPCC_VAL_INT ? v->u.i : dflt;
}

static double attr_float(const struct bpcc_module *m, const char *key, double dflt)
{
    const struct bpcc_value *v = bpcc_module_attr(m, key);
    if (v && v->kind == BPCC_VAL_FLOAT) return v->u.f;
    if (v && v->kind == BPCC_VAL_INT) return (double)v->u.i;
    return dflt;
}

/* training flag; modules written without one are taken as in eval mode */
static bool training(const struct bpcc_module *m) { return attr_bool(m, "training", false); }

/* A copy of module `src` (type, attributes, tensor references) under `name`; the attributes are
** shared until either module changes one. */
static enum bpcc_status clone_module(struct bpcc_graph *g, struct bpcc_module *src,
                                     const char *name, struct bpcc_module **out,
                                     struct bpcc_diag *d)
{
    struct bpcc_module *m;
    enum bpcc_status s = bpcc_graph_add_module(g, name, src->type, &m, d);
    if (!s) bpcc_module_share_attrs(m, src);
    for (uint32_t i = 0; !s && i < src->n_tensors; i++) /* two modules' now (BPCC_TENSOR_SHARED) */
        s = bpcc_module_set_tensor(m, src->tensors[i].name, src->tensors[i].role, src->tensors[i].t, d);
    if (!s) *out = m;
    return s;
}

/* How many nodes refer to each module (its `mark`): calls, and get_attr of it or of its attributes. */
static void count_refs(struct bpcc_graph *g)
{
    for (uint32_t i = 0; i < g->n_modules; i++) g->modules[i]->mark = 0;
    for (const struct bpcc_node *n = g->first; n; n = n->next) {
        struct bpcc_module *m = NULL;
        if (n->kind == BPCC_NODE_CALL_MODULE) {
            m = bpcc_node_module(n);
        } else if (n->kind == BPCC_NODE_GET_ATTR) {
            if ((m = bpcc_graph_find_module(g, n->target))) m->mark++;
            m = bpcc_graph_attr_owner(g, n->target, NULL);
        }
        if (m) m->mark++;
    }
}

/* A matched module is its fused module's part itself, renamed, when only its own node refers to
** it, it has no submodules and no node refers to a module it is part of: nothing else can tell
** it moved. Otherwise the part is a copy (a module called twice, as torchvision's shared ReLUs,
** is fused from its original each time, as in PyTorch). */
static bool movable(const struct bpcc_module *m)
{
    if (!m || m->mark != 1 || m->first_child) return false;
    for (const struct bpcc_module *p = m->parent; p; p = p->parent)
        if (p->mark) return false;
    return true;
}

/* module m as the part of a fused module at `path`: m itself when it can move, else a copy */
static enum bpcc_status place(struct bpcc_graph *g, struct bpcc_module *m, const char *path,
                              struct bpcc_module **out, struct bpcc_diag *d)
{
    if (!movable(m)) return clone_module(g, m, path, out, d);
    enum bpcc_status s = bpcc_graph_rename_module(g, m, path, d);
    if (!s) *out = m;
    return s;
}

/* A new module whose attributes are {training: train}. With `made` (the last container of the
** pass), the containers share one such array, as the parser's modules of equal attributes do (a
** change to one copies it first): at 1M nodes 300k containers, 128 bytes each. */
static enum bpcc_status new_module(struct bpcc_graph *g, const char *name, const char *type, bool train,
                                   struct bpcc_module **made, struct bpcc_module **out, struct bpcc_diag *d)
{
    enum bpcc_status s = bpcc_graph_add_module(g, name, type, out, d);
    if (s) return s;
    struct bpcc_value t = bpcc_value_bool(train);
    const struct bpcc_value *was = made && *made && (*made)->attrs.n == 1 ? bpcc_module_attr(*made, "training") : NULL;
    if (was && bpcc_value_equal(was, &t)) {
        bpcc_module_share_attrs(*out, *made);
        return bpcc_undo_failed(g) ? bpcc_diag_nomem(d) : BPCC_OK;
    }
    s = bpcc_module_set_attr(*out, "training", &t, d);
    if (!s && made) *made = *out;
    return s;
}

/* }================================================ */

/* {==================== the fuser call ==================== */

/* What a fuser sees: the matched leaves in pattern preorder (the anchor first, then argument
** patterns left to right), as module (call_module) or op name, and where to put the result. */
struct fuse_call {
    struct bpcc_graph *g;
    bool is_qat;
    const char *root_path;              /* module path of the root node: the result goes here */
    struct bpcc_module *root;           /* the root module (before fusion) */
    const char *fused_module;           /* the config's fused_module (sequential), may be NULL */
    uint32_t n;
    struct bpcc_module *mod[MATCH_MAX_LEAVES]; /* NULL: not a module (not const: clones share their attributes) */
    const char *op[MATCH_MAX_LEAVES];   /* the leaf's type or target ("torch.nn.ReLU" for F.relu) */
    const struct match *m;              /* for messages */
    struct bpcc_module **made;          /* the pass's last container, for new_module */
    struct bpcc_diag *d;
};

static void pattern_text(const struct pattern_entry *e, char *buf, size_t n);

typedef enum bpcc_status (*fuser_fn)(struct fuse_call *fc);

static enum bpcc_status fail(struct fuse_call *fc, const char *fmt, ...) BPCC_PRINTF(2, 3);
static enum bpcc_status fail(struct fuse_call *fc, const char *fmt, ...)
{
    char msg[BPCC_DIAG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char ptext[256];
    pattern_text(fc->m->entry, ptext, sizeof ptext);
    const struct bpcc_node *a = fc->m->anchor;
    return bpcc_diag_error(fc->d, BPCC_ERR_GRAPH, fc->g->source_file, a->src_line, a->src_col,
                           "cannot fuse pattern %s (%s:%u) at node '%s': %s", ptext,
                           fc->m->entry->file, fc->m->entry->line, a->name, msg);
}

/* the forward-order modules of a simple chain: leaves are preorder (anchor first) */
static struct bpcc_module *fwd(const struct fuse_call *fc, uint32_t i)
{
    return fc->mod[fc->n - 1 - i];
}

static const struct bpcc_tensor *tensor_f32(const struct bpcc_module *m, const char *name)
{
    const struct bpcc_tensor *t = bpcc_module_tensor(m, name);
    return t && t->dtype == BPCC_DTYPE_F32 && t->data ? t : NULL;
}

/* dst[k] = src[k] * s: a folded weight's run of one output channel, in a function of its own so
** that it is vectorized (inside fold_bn, at -O2, it was scalar) */
BPCC_HOT __attribute__((noinline)) static void scale_run(const float *restrict src, uint64_t n, float s,
                                                         float *restrict dst)
{
    for (uint64_t k = 0; k < n; k++) dst[k] = src[k] * s;
}

/* Fold batch norm `bn` into the weights of `conv` (see pass.h); `from` is the conv's name as the
** user knows it, for the messages. */
enum bpcc_status bpcc_fold_bn(struct bpcc_graph *g, struct bpcc_module *conv, const char *from, const struct bpcc_module *bn,
                              int out_axis, bool linear, char *why, size_t n_why, struct bpcc_diag *d)
{
    const struct bpcc_tensor *w = tensor_f32(conv, "weight"), *b = tensor_f32(conv, "bias");
    const struct bpcc_tensor *rm = tensor_f32(bn, "running_mean"), *rv = tensor_f32(bn, "running_var");
    const struct bpcc_tensor *gw = tensor_f32(bn, "weight"), *gb = tensor_f32(bn, "bias");
#define WHY(...) (snprintf(why, n_why, __VA_ARGS__), BPCC_ERR_GRAPH)
    if (!w) return WHY("'%s' has no float32 weight", from);
    if (!rm || !rv) return WHY("batch norm '%s' has no running statistics (track_running_stats=False)", bn->name);
    if (linear && (!gw || !gb))
        return WHY("batch norm '%s' has no affine weight and bias, which fuse_linear_bn_eval needs", bn->name);
    uint64_t C = bpcc_tensor_numel(rm);
    if (bpcc_tensor_numel(rv) != C || (gw && bpcc_tensor_numel(gw) != C) || (gb && bpcc_tensor_numel(gb) != C))
        return WHY("batch norm '%s' has inconsistent parameter sizes", bn->name);
    if (w->ndim < 2 || (uint64_t)w->dims[out_axis] != C)
        return WHY("'%s' has %lld output channels in weight dimension %d but batch norm '%s' has %llu features", from,
                   (long long)(w->ndim > (uint32_t)out_axis ? w->dims[out_axis] : 0), out_axis, bn->name,
                   (unsigned long long)C);
    if (b && bpcc_tensor_numel(b) != C) return WHY("'%s' bias size does not match", from);
#undef WHY
    float eps = (float)attr_float(bn, "eps", 1e-5);
    struct bpcc_tensor *nw, *nb;
    int64_t cdim[1] = {(int64_t)C};
    /* each output channel's range too, found as the weight is written (out_axis 0): convert's
    ** weight observer then need not read the weight again */
    float *range = NULL;
    enum bpcc_status s = out_axis == 0 ? bpcc_tensor_new_ranged(g, w->ndim, w->dims, &range, &nw, d)
                                       : bpcc_tensor_new_uninit(g, BPCC_DTYPE_F32, w->ndim, w->dims, &nw, d);
    if (!s) s = bpcc_tensor_new(g, BPCC_DTYPE_F32, 1, cdim, &nb, d);
    if (s) return s;
    const float *W = w->data, *B = b ? b->data : NULL, *RM = rm->data, *RV = rv->data;
    const float *G = gw ? gw->data : NULL, *BE = gb ? gb->data : NULL;
    float *NW = nw->data, *NB = nb->data;
    /* weight: (outer, C, inner) view around out_axis */
    uint64_t outer = 1, inner = 1;
    for (int i = 0; i < out_axis; i++) outer *= (uint64_t)w->dims[i];
    for (uint32_t i = (uint32_t)out_axis + 1; i < w->ndim; i++) inner *= (uint64_t)w->dims[i];
    bool ranged = range && inner;
    for (uint64_t c = 0; c < C; c++) {
        float r = 1.0f / sqrtf(RV[c] + eps);
        float gamma = G ? G[c] : 1.0f, beta = BE ? BE[c] : 0.0f, bias = B ? B[c] : 0.0f;
        float scale = gamma * r;
        NB[c] = linear ? (bias - RM[c]) * scale + beta : (bias - RM[c]) * r * gamma + beta;
        if (ranged) { /* out_axis 0: the channel is one run */
            ranged = bpcc_obs_scale_minmax(W + c * inner, inner, scale, NW + c * inner, &range[c], &range[C + c]);
            if (ranged) continue;
        }
        for (uint64_t o = 0; o < outer; o++)
            scale_run(W + (o * C + c) * inner, inner, scale, NW + (o * C + c) * inner);
    }
    if (ranged) nw->flags |= BPCC_TENSOR_RANGED;
    s = bpcc_module_set_tensor(conv, "weight", BPCC_TENSOR_PARAM, nw, d);
    if (!s) s = bpcc_module_set_tensor(conv, "bias", BPCC_TENSOR_PARAM, nb, d);
    if (!s) { /* the float weight and bias are no one's now */
        bpcc_graph_tensor_replaced(g, w);
        bpcc_graph_tensor_replaced(g, b);
    }
    return s;
}

/* bpcc_fold_bn for a fuser: its refusals in the fuser's message */
static enum bpcc_status fold_bn(struct fuse_call *fc, struct bpcc_module *conv, const char *from,
                                const struct bpcc_module *bn, int out_axis, bool linear)
{
    char why[BPCC_DIAG_MSG_MAX / 2];
    enum bpcc_status s = bpcc_fold_bn(fc->g, conv, from, bn, out_axis, linear, why, sizeof why, fc->d);
    return s == BPCC_ERR_GRAPH ? fail(fc, "%s", why) : s;
}

/* The root module's path as a fresh (fused) container or plain module. The old root entry is
** removed first: its path now names the fused module. */
static char *child_path(const char *root, const char *child)
{
    size_t n = strlen(root) + strlen(child) + 2;
    char *p = bpcc_malloc(n);
    if (p) bpcc_str_cat(p, n, bpcc_str_cat(p, n, bpcc_str_cat(p, n, 0, root), "."), child);
    return p;
}

/* A container module (a torch Sequential subclass) at the root path, children 0, 1, ... from
** `parts` (each cloned; NULL part = a fresh torch.nn.ReLU). */
static enum bpcc_status container(struct fuse_call *fc, const char *type,
                                  struct bpcc_module *const *parts, uint32_t n_parts,
                                  struct bpcc_module **children_out)
{
    struct bpcc_module *c;
    enum bpcc_status s = new_module(fc->g, fc->root_path, type, true, fc->made, &c, fc->d);
    for (uint32_t i = 0; !s && i < n_parts; i++) {
        char idx[24];
        bpcc_format_i64(i, idx);
        char *p = child_path(fc->root_path, idx);
        if (!p) return bpcc_diag_nomem(fc->d);
        struct bpcc_module *m;
        if (parts[i]) {
            s = place(fc->g, parts[i], p, &m, fc->d);
        } else {
            /* F.relu in the pattern: PyTorch makes a fresh nn.ReLU with the root's training flag */
            s = new_module(fc->g, p, "torch.nn.ReLU", training(fc->root), NULL, &m, fc->d);
            struct bpcc_value f = bpcc_value_bool(false);
            if (!s) s = bpcc_module_set_attr(m, "inplace", &f, fc->d);
        }
        bpcc_xfree(p);
        if (!s && children_out) children_out[i] = m;
    }
    return s;
}

/* prefix + "1d" / "2d" / "3d" after the conv's type, in buf[TYPE_NAME_MAX]; NULL for other types */
#define TYPE_NAME_MAX 128
static const char *conv_dim_type(char *buf, const char *conv_type, const char *prefix)
{
    const char *d = NULL;
    if (!strcmp(conv_type, "torch.nn.Conv1d")) d = "1d";
    else if (!strcmp(conv_type, "torch.nn.Conv2d")) d = "2d";
    else if (!strcmp(conv_type, "torch.nn.Conv3d")) d = "3d";
    if (!d) return NULL;
    bpcc_str_cat(buf, TYPE_NAME_MAX, bpcc_str_cat(buf, TYPE_NAME_MAX, 0, prefix), d);
    return buf;
}

static enum bpcc_status check_same_mode(struct fuse_call *fc, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++)
        if (fwd(fc, i) && fwd(fc, 0) && training(fwd(fc, i)) != training(fwd(fc, 0)))
            return fail(fc, "'%s' and '%s' must both be in the same mode (train or eval), as "
                            "PyTorch's fuser requires", fwd(fc, 0)->name, fwd(fc, i)->name);
    return BPCC_OK;
}

static enum bpcc_status qat_bn_checks(struct fuse_call *fc, const struct bpcc_module *conv,
                                      const struct bpcc_module *bn, const char *out_key)
{
    if (attr_int(bn, "num_features", -1) != attr_int(conv, out_key, -2))
        return fail(fc, "output channels of '%s' do not match num_features of '%s'", conv->name, bn->name);
    if (!attr_bool(bn, "affine", true)) return fail(fc, "'%s' has affine=False; QAT fusion needs affine", bn->name);
    if (!attr_bool(bn, "track_running_stats", true))
        return fail(fc, "'%s' has track_running_stats=False; QAT fusion needs running statistics", bn->name);
    return BPCC_OK;
}

/* eval: a plain copy of the conv/linear at the root path with the BN folded in */
static enum bpcc_status folded(struct fuse_call *fc, struct bpcc_module *conv,
                               const struct bpcc_module *bn, const char *path, int axis,
                               bool linear, struct bpcc_module **out)
{
    if (training(conv) || training(bn)) return fail(fc, "batch-norm folding is for eval mode only");
    const char *from = conv->name; /* interned: the name the user knows, after a move too */
    enum bpcc_status s = place(fc->g, conv, path, out, fc->d);
    return s ? s : fold_bn(fc, *out, from, bn, axis, linear);
}

static enum bpcc_status fuse_conv_bn(struct fuse_call *fc)
{
    struct bpcc_module *conv = fwd(fc, 0), *bn = fwd(fc, 1);
    if (!conv || !bn) return fail(fc, "fuse_conv_bn needs a conv and a batch norm module");
    enum bpcc_status s = check_same_mode(fc, 2);
    if (s) return s;
    if (fc->is_qat) {
        if ((s = qat_bn_checks(fc, conv, bn, "out_channels"))) return s;
        char type[TYPE_NAME_MAX];
        const char *t = conv_dim_type(type, conv->type, "torch.ao.nn.intrinsic.ConvBn");
        if (!t) return fail(fc, "cannot fuse train modules (%s, %s)", conv->type, bn->type);
        struct bpcc_module *parts[] = {conv, bn};
        return container(fc, t, parts, 2, NULL);
    }
    struct bpcc_module *m;
    return folded(fc, conv, bn, fc->root_path, 0, false, &m);
}

static enum bpcc_status fuse_conv_bn_relu(struct fuse_call *fc)
{
    struct bpcc_module *conv = fwd(fc, 0), *bn = fwd(fc, 1), *relu = fwd(fc, 2) /* NULL when the pattern had F.relu */;
    if (!conv || !bn) return fail(fc, "fuse_conv_bn_relu needs conv and batch norm modules");
    enum bpcc_status s = check_same_mode(fc, 3);
    if (s) return s;
    if (fc->is_qat) {
        if ((s = qat_bn_checks(fc, conv, bn, "out_channels"))) return s;
        char type[TYPE_NAME_MAX];
        const char *t = conv_dim_type(type, conv->type, "torch.ao.nn.intrinsic.ConvBnReLU");
        if (!t) return fail(fc, "cannot fuse train modules (%s, %s, relu)", conv->type, bn->type);
        struct bpcc_module *parts[] = {conv, bn, relu};
        return container(fc, t, parts, 3, NULL);
    }
    char type[TYPE_NAME_MAX];
    if (!conv_dim_type(type, conv->type, "torch.ao.nn.intrinsic.ConvReLU"))
        return fail(fc, "cannot fuse eval modules (%s, %s, relu)", conv->type, bn->type);
    /* ConvReLU(fuse_conv_bn_eval(conv, bn), relu) */
    const char *from = conv->name;
    struct bpcc_module *parts[] = {conv, relu};
    struct bpcc_module *children[2];
    if ((s = container(fc, type, parts, 2, children))) return s;
    if (training(conv) || training(bn)) return fail(fc, "batch-norm folding is for eval mode only");
    return fold_bn(fc, children[0], from, bn, 0, false);
}

static enum bpcc_status fuse_linear_bn(struct fuse_call *fc)
{
    struct bpcc_module *lin = fwd(fc, 0), *bn = fwd(fc, 1);
    if (!lin || !bn) return fail(fc, "fuse_linear_bn needs a linear and a batch norm module");
    enum bpcc_status s = check_same_mode(fc, 2);
    if (s) return s;
    if (fc->is_qat) {
        if ((s = qat_bn_checks(fc, lin, bn, "out_features"))) return s;
        struct bpcc_module *parts[] = {lin, bn};
        return container(fc, "torch.ao.nn.intrinsic.LinearBn1d", parts, 2, NULL);
    }
    int64_t nf = attr_int(bn, "num_features", -1);
    if (nf != attr_int(lin, "out_features", -2) && nf != 1)
        return fail(fc, "to fuse, linear.out_features == bn.num_features or bn.num_features == 1");
    struct bpcc_module *m;
    return folded(fc, lin, bn, fc->root_path, 0, true, &m);
}

static enum bpcc_status fuse_convtranspose_bn(struct fuse_call *fc)
{
    struct bpcc_module *conv = fwd(fc, 0), *bn = fwd(fc, 1);
    if (!conv || !bn) return fail(fc, "fuse_convtranspose_bn needs modules");
    enum bpcc_status s = check_same_mode(fc, 2);
    if (s) return s;
    if (fc->is_qat) return fail(fc, "fusing ConvTranspose+BatchNorm is not supported in QAT (as in PyTorch)");
    if (attr_int(conv, "groups", 1) != 1)
        return fail(fc, "'%s' has groups > 1: PyTorch's transposed fold reshapes the scale as "
                        "[1, -1, ...], which fails for grouped weights", conv->name);
    struct bpcc_module *m;
    return folded(fc, conv, bn, fc->root_path, 1, false, &m);
}

static enum bpcc_status fuse_sequential(struct fuse_call *fc)
{
    if (!fc->fused_module) return fail(fc, "the 'sequential' fuser needs the entry's fused_module");
    struct bpcc_module *parts[MATCH_MAX_LEAVES];
    for (uint32_t i = 0; i < fc->n; i++) parts[i] = fwd(fc, i);
    if (!parts[0]) return fail(fc, "the first op of the pattern is not a module");
    return container(fc, fc->fused_module, parts, fc->n, NULL);
}

static enum bpcc_status fuse_linear_bn_leaky_relu(struct fuse_call *fc)
{
    struct bpcc_module *lin = fwd(fc, 0), *bn = fwd(fc, 1), *act = fwd(fc, 2);
    if (!lin || !bn || !act) return fail(fc, "fuse_linear_bn_leaky_relu needs three modules");
    enum bpcc_status s = check_same_mode(fc, 3);
    if (s) return s;
    if (fc->is_qat) return fail(fc, "cannot fuse train modules (linear, bn, leaky_relu)");
    const char *from = lin->name;
    struct bpcc_module *parts[] = {lin, act};
    struct bpcc_module *children[2];
    if ((s = container(fc, "torch.ao.nn.intrinsic.LinearLeakyReLU", parts, 2, children))) return s;
    return fold_bn(fc, children[0], from, bn, 0, true);
}

/* onednn's conv + add (+ relu): leaves in preorder, e.g. [add, conv, x] or
** [relu, add, x, bn, conv]. ConvAdd2d(conv, add) keeps the add op as attribute `add`. */
static enum bpcc_status fuse_conv_add_any(struct fuse_call *fc)
{
    struct bpcc_module *conv = NULL, *bn = NULL, *relu = NULL;
    const char *add = NULL;
    for (uint32_t i = 0; i < fc->n; i++) {
        const char *op = fc->op[i];
        if (!op) continue;
        if (!strcmp(op, "torch.nn.Conv2d")) conv = fc->mod[i];
        else if (!strcmp(op, "torch.nn.BatchNorm2d")) bn = fc->mod[i];
        else if (!strcmp(op, "torch.nn.ReLU")) relu = fc->mod[i];
        else if (!strcmp(op, "operator.add") || !strcmp(op, "torch.add")) add = op;
    }
    if (!conv || !add) return fail(fc, "a conv+add fusion needs a Conv2d module and an add");
    if (bn && fc->is_qat) return fail(fc, "cannot fuse train modules (conv, bn, add)");
    const char *from = conv->name;
    struct bpcc_module *parts[2] = {conv, relu};
    struct bpcc_module *children[2];
    bool with_relu = !strcmp(fc->op[0], "torch.nn.ReLU"); /* the anchor */
    const char *type = with_relu ? "torch.ao.nn.intrinsic.ConvAddReLU2d" : "torch.ao.nn.intrinsic.ConvAdd2d";
    enum bpcc_status s = container(fc, type, parts, with_relu ? 2 : 1, children);
    if (!s && bn) {
        if (training(conv) || training(bn)) return fail(fc, "batch-norm folding is for eval mode only");
        s = fold_bn(fc, children[0], from, bn, 0, false);
    }
    if (!s) {
        struct bpcc_value v;
        s = bpcc_value_str_new(fc->g, BPCC_VAL_SYMBOL, add, &v);
        if (s) return bpcc_diag_nomem(fc->d);
        s = bpcc_module_set_attr(bpcc_graph_find_module(fc->g, fc->root_path), "add", &v, fc->d);
    }
    return s;
}

struct fuser_def {
    const char *name;
    uint32_t min_ops, max_ops; /* pattern leaves (ops and MatchAllNode) it fuses */
    fuser_fn fn;               /* built-in */
    bpcc_fuser_fn user_fn;     /* registered through bpcc_fuser_register */
    void *user_data;
};

static const struct fuser_def builtin_fusers[] = {
    {"fuse_conv_bn", 2, 2, fuse_conv_bn, NULL, NULL},
    {"fuse_conv_bn_relu", 3, 3, fuse_conv_bn_relu, NULL, NULL},
    {"fuse_linear_bn", 2, 2, fuse_linear_bn, NULL, NULL},
    {"fuse_convtranspose_bn", 2, 2, fuse_convtranspose_bn, NULL, NULL},
    {"sequential", 2, 3, fuse_sequential, NULL, NULL},
    {"fuse_linear_bn_leaky_relu", 3, 3, fuse_linear_bn_leaky_relu, NULL, NULL},
    {"fuse_conv_add_left", 3, 3, fuse_conv_add_any, NULL, NULL},
    {"fuse_conv_add_right", 3, 3, fuse_conv_add_any, NULL, NULL},
    {"fuse_conv_bn_add_left", 4, 4, fuse_conv_add_any, NULL, NULL},
    {"fuse_conv_bn_add_right", 4, 4, fuse_conv_add_any, NULL, NULL},
    {"fuse_conv_add_relu_left", 4, 4, fuse_conv_add_any, NULL, NULL},
    {"fuse_conv_add_relu_right", 4, 4, fuse_conv_add_any, NULL, NULL},
    {"fuse_conv_bn_add_relu_left", 5, 5, fuse_conv_add_any, NULL, NULL},
    {"fuse_conv_bn_add_relu_right", 5, 5, fuse_conv_add_any, NULL, NULL},
};

#define MAX_USER_FUSERS 64
static struct fuser_def user_fusers[MAX_USER_FUSERS];
static uint32_t n_user_fusers;
static char user_names[MAX_USER_FUSERS][64];

static const struct fuser_def *find_def(const char *name)
{
    for (uint32_t i = n_user_fusers; i-- > 0;) /* later registrations win */
        if (!strcmp(user_fusers[i].name, name)) return &user_fusers[i];
    for (size_t i = 0; i < BPCC_ARRAY_LEN(builtin_fusers); i++)
        if (!strcmp(builtin_fusers[i].name, name)) return &builtin_fusers[i];
    return NULL;
}

bool bpcc_fuser_arity(const char *name, uint32_t *min_out, uint32_t *max_out)
{
    const struct fuser_def *f = find_def(name);
    if (!f) return false;
    *min_out = f->min_ops;
    *max_out = f->max_ops;
    return true;
}

void bpcc_fuser_names(char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < BPCC_ARRAY_LEN(builtin_fusers) && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", builtin_fusers[i].name);
    for (uint32_t i = 0; i < n_user_fusers && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, ", %s", user_fusers[i].name);
}

enum bpcc_status bpcc_fuser_register(const char *name, uint32_t min_ops, uint32_t max_ops,
                                     bpcc_fuser_fn fn, void *user_data, struct bpcc_diag *d)
{
    if (!name || !fn || !min_ops || min_ops > max_ops || max_ops > MATCH_MAX_LEAVES ||
        strlen(name) >= sizeof user_names[0])
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "invalid fuser registration");
    if (n_user_fusers == MAX_USER_FUSERS)
        return bpcc_diag_error(d, BPCC_ERR_LIMIT, NULL, 0, 0, "more than %d fusers registered",
                               MAX_USER_FUSERS);
    snprintf(user_names[n_user_fusers], sizeof user_names[0], "%s", name);
    user_fusers[n_user_fusers] = (struct fuser_def){user_names[n_user_fusers], min_ops, max_ops,
                                                    NULL, fn, user_data};
    n_user_fusers++;
    return BPCC_OK;
}

/* Run fuser `f` on a call. */
static enum bpcc_status run_fuser(const struct fuser_def *f, struct fuse_call *fc)
{
    if (f->fn) return f->fn(fc);
    struct bpcc_fuser_call call = {.graph = fc->g, .is_qat = fc->is_qat, .root_path = fc->root_path,
                                   .fused_module = fc->fused_module, .n_ops = fc->n,
                                   .op_types = fc->op, .modules = (const struct bpcc_module *const *)fc->mod, .user_data = f->user_data};
    return f->user_fn(&call, fc->d);
}

/* }================================================ */

/* {==================== the pass ==================== */

static bool has_fuser(const struct pattern_entry *e) { return e->fuser_method != NULL; }

/* The leaf type PyTorch's get_fuser_method_new looks up: a call_module's module type, nn.ReLU
** for F.relu, a function or method target, MatchAllNode for anything else. */
static const char *leaf_type(const struct match *m, uint32_t i)
{
    const struct bpcc_node *n = m->nodes[i];
    if (!strcmp(m->leaf_pattern[i]->op, "MatchAllNode") || !n) return "MatchAllNode";
    if (n->kind == BPCC_NODE_CALL_MODULE) return bpcc_node_op(n);
    if (n->kind == BPCC_NODE_CALL_FUNCTION && !strcmp(n->target, "torch.nn.functional.relu"))
        return "torch.nn.ReLU";
    if (n->kind == BPCC_NODE_CALL_FUNCTION || n->kind == BPCC_NODE_CALL_METHOD) return n->target;
    return "MatchAllNode";
}

/* Does pattern p have the shape of the match and, leaf by leaf, the given ops? */
static bool shape_is(const struct pattern *p, const struct pattern *like, const char *const *ops,
                     uint32_t *i)
{
    if (p->n_args != like->n_args || strcmp(p->op, ops[*i])) return false;
    (*i)++;
    for (uint32_t k = 0; k < p->n_args; k++)
        if (!shape_is(p->args[k], like->args[k], ops, i)) return false;
    return true;
}

/* get_fuser_method_new: the fuser registered for the matched types, trying MatchAllNode in
** place of leaves (the original first; the last position varies fastest). */
static const struct pattern_entry *fuser_entry(const struct bpcc_config *c, const struct match *m)
{
    uint32_t L = m->n_leaves;
    const char *types[MATCH_MAX_LEAVES], *ops[MATCH_MAX_LEAVES];
    for (uint32_t i = 0; i < L; i++) types[i] = leaf_type(m, i);
    uint32_t limit = L < 10 ? (1u << L) : 1024;
    for (uint32_t mask = 0; mask < limit; mask++) {
        for (uint32_t i = 0; i < L; i++)
            ops[i] = (mask >> (L - 1 - i)) & 1 ? "MatchAllNode" : types[i];
        for (uint32_t k = 0; k < c->n_entries; k++) {
            const struct pattern_entry *e = c->entries[k];
            uint32_t at = 0;
            if (e->fuser_method && shape_is(e->pattern, m->entry->pattern, ops, &at)) return e;
        }
    }
    return NULL;
}

/* The root node: PyTorch's default getter follows the last argument pattern down to a leaf;
** the named conv+add getters pick the Conv2d leaf. Returns the leaf index. */
static uint32_t root_leaf(const struct match *m)
{
    if (m->entry->root_node_getter) {
        for (uint32_t i = 0; i < m->n_leaves; i++)
            if (!strcmp(m->leaf_pattern[i]->op, "torch.nn.Conv2d")) return i;
    }
    /* preorder index of the last-descent leaf */
    const struct pattern *p = m->entry->pattern;
    uint32_t idx = 0;
    while (p->n_args) {
        /* skip the anchor and every argument subtree but the last */
        idx++;
        for (uint32_t k = 0; k + 1 < p->n_args; k++) {
            const struct pattern *stack[64];
            uint32_t sp = 0;
            stack[sp++] = p->args[k];
            while (sp) {
                const struct pattern *q = stack[--sp];
                idx++;
                for (uint32_t j = 0; j < q->n_args && sp < 64; j++) stack[sp++] = q->args[j];
            }
        }
        p = p->args[p->n_args - 1];
    }
    return idx;
}

static void pattern_text(const struct pattern_entry *e, char *buf, size_t n)
{
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    bpcc_pattern_text(e, &b);
    snprintf(buf, n, "%s", b.data ? b.data : "?");
    bpcc_buf_release(&b);
}

/* Keep the modules the graph references — call_module targets with their submodules,
** get_attr owners — in the order GraphModule would copy them: by first reference in graph
** order. Linear: one index look-up per node, each kept module visited once. The root module ""
** stays whatever references it, last if nothing does: it is the GraphModule itself (with its
** attributes: a prepared model's record of observed nodes), and every module is its descendant,
** so pruning it would prune them all. */
static void keep_subtree(struct bpcc_module *m, struct bpcc_module **keep, uint32_t *k)
{
    if (m->mark) return;
    m->mark = 1;
    keep[(*k)++] = m;
    for (struct bpcc_module *c = m->first_child; c; c = c->next_sibling) keep_subtree(c, keep, k);
}

static enum bpcc_status prune_modules(struct bpcc_graph *g, struct bpcc_diag *d)
{
    bpcc_graph_compact_modules(g);
    uint32_t n = g->n_modules;
    if (!n) return BPCC_OK;
    struct bpcc_module **keep = bpcc_malloc(n * sizeof *keep);
    if (!keep) return bpcc_diag_nomem(d);
    for (uint32_t i = 0; i < n; i++) g->modules[i]->mark = 0;
    uint32_t k = 0;
    for (const struct bpcc_node *node = g->first; node; node = node->next) {
        if (node->kind != BPCC_NODE_CALL_MODULE && node->kind != BPCC_NODE_GET_ATTR) continue;
        struct bpcc_module *m = bpcc_node_module(node);
        if (m) keep_subtree(m, keep, &k);
        if (node->kind != BPCC_NODE_GET_ATTR) continue;
        struct bpcc_module *o = bpcc_graph_attr_owner(g, node->target, NULL);
        if (o && !o->mark) {
            o->mark = 1;
            keep[k++] = o;
        }
    }
    struct bpcc_module *root = bpcc_graph_find_module(g, "");
    if (root && !root->mark) {
        root->mark = 1;
        keep[k++] = root;
    }
    for (uint32_t i = 0; i < n; i++)
        if (!g->modules[i]->mark) bpcc_graph_unlink_module(g, g->modules[i]);
    /* Without rollback nothing reads a pruned module again (bpcc_graph_set_rollback): the memory of
    ** each one without submodules (the batch norms folded away, the parts fused modules copied)
    ** goes back to the arena, where prepare's observers take it. One with submodules stays: a kept
    ** module may have it as its parent. */
    if (g->no_rollback)
        for (uint32_t i = 0; i < n; i++)
            if (!g->modules[i]->mark && !g->modules[i]->first_child) bpcc_module_give(g->modules[i]);
    memcpy(g->modules, keep, k * sizeof *keep);
    g->n_modules = k;
    bpcc_xfree(keep);
    return BPCC_OK;
}

/* Everything a match needs, taken before any fusion changes the graph: PyTorch computes
** named_modules once, so a module shared by two matches is fused from its original both
** times (and the later fusion's result is the one left at the shared path). Compact, as a
** graph can hold hundreds of thousands of matches (a struct match has room for
** MATCH_MAX_LEAVES leaves, a fusion has two or three): the leaves of all plans are one array. */
struct plan_leaf {
    struct bpcc_node *node;        /* NULL where MatchAllNode matched a literal */
    const struct pattern *pattern;
    struct bpcc_module *mod;       /* NULL: not a module (not const: clones share their attributes) */
    const char *op;                /* leaf_type */
};

struct planned {
    const struct pattern_entry *entry, *fuser;
    const struct fuser_def *def;
    struct bpcc_node *anchor, *root;
    struct bpcc_module *root_module; /* before fusion */
    uint32_t first, n;               /* the plan's leaves, in pattern preorder */
};

struct plans {
    struct planned *p;
    struct plan_leaf *leaves;
    uint32_t n, cap, n_leaves, cap_leaves;
    struct bpcc_diag *d;
};

/* bpcc_match_graph's `found`: the match's entry, anchor and leaves */
static enum bpcc_status keep_match(const struct match *m, void *ud)
{
    struct plans *ps = ud;
    if (ps->n == ps->cap) {
        uint32_t cap = ps->cap ? 2 * ps->cap : 64;
        struct planned *p = bpcc_realloc(ps->p, cap * sizeof *p);
        if (!p) return bpcc_diag_nomem(ps->d);
        ps->p = p;
        ps->cap = cap;
    }
    if (m->n_leaves > ps->cap_leaves - ps->n_leaves) {
        uint32_t cap = ps->cap_leaves ? 2 * ps->cap_leaves : 256;
        if (cap < ps->n_leaves + m->n_leaves) cap = ps->n_leaves + m->n_leaves;
        struct plan_leaf *l = bpcc_realloc(ps->leaves, cap * sizeof *l);
        if (!l) return bpcc_diag_nomem(ps->d);
        ps->leaves = l;
        ps->cap_leaves = cap;
    }
    ps->p[ps->n++] = (struct planned){.entry = m->entry, .anchor = m->anchor, .first = ps->n_leaves, .n = m->n_leaves};
    for (uint32_t i = 0; i < m->n_leaves; i++)
        ps->leaves[ps->n_leaves++] = (struct plan_leaf){.node = m->nodes[i], .pattern = m->leaf_pattern[i]};
    return BPCC_OK;
}

/* the plan's match, whole again */
static void load_match(const struct plans *ps, const struct planned *p, struct match *m)
{
    m->entry = p->entry;
    m->anchor = p->anchor;
    m->n_leaves = p->n;
    for (uint32_t i = 0; i < p->n; i++) {
        m->nodes[i] = ps->leaves[p->first + i].node;
        m->leaf_pattern[i] = ps->leaves[p->first + i].pattern;
    }
}

static enum bpcc_status plan(struct bpcc_graph *g, const struct bpcc_config *c, struct plans *ps,
                             struct planned *p, struct bpcc_diag *d)
{
    struct match mm;
    load_match(ps, p, &mm);
    const struct match *m = &mm;
    char ptext[256], where[512];
#define WHERE()                                                                               \
    (pattern_text(m->entry, ptext, sizeof ptext),                                             \
     snprintf(where, sizeof where, "pattern %s (%s:%u) at node '%s'", ptext, m->entry->file,   \
              m->entry->line, m->anchor->name),                                               \
     where)
    uint32_t ri = root_leaf(m);
    p->root = ri < m->n_leaves ? m->nodes[ri] : NULL;
    if (!p->root || p->root->kind != BPCC_NODE_CALL_MODULE)
        return bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, m->anchor->src_line,
                               m->anchor->src_col,
                               "cannot fuse %s: its root op '%s' is not a module call (PyTorch's "
                               "fuser requires a call_module root)", WHERE(),
                               p->root ? p->root->name : "?");
    p->fuser = fuser_entry(c, m);
    if (!p->fuser)
        return bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, m->anchor->src_line,
                               m->anchor->src_col,
                               "cannot fuse %s: no fuser method is registered for the matched "
                               "module types (as PyTorch: 'did not find fuser method')", WHERE());
#undef WHERE
    p->def = find_def(p->fuser->fuser_method);
    if (!p->def)
        return bpcc_diag_error(d, BPCC_ERR_INTERNAL, NULL, 0, 0, "fuser '%s' has no implementation",
                               p->fuser->fuser_method);
    p->root_module = bpcc_node_module(p->root);
    for (uint32_t i = 0; i < m->n_leaves; i++) {
        struct plan_leaf *l = &ps->leaves[p->first + i];
        l->op = leaf_type(m, i);
        l->mod = l->node && l->node->kind == BPCC_NODE_CALL_MODULE ? bpcc_node_module(l->node) : NULL;
    }
    return BPCC_OK;
}

/* The nodes whose values earlier fusions moved: by id, the root that took an erased anchor's place
** (NULL elsewhere; made at the first such fusion when the config has extra inputs to resolve). */
struct moved {
    struct bpcc_node **by_id;
    uint32_t n;
};

/* What holds x's value now: x, or the root of the fusion that erased it. A conv+add pattern's
** extra input is often the last node of a fusion made just before (a residual block's input is
** the previous block's relu, fused into its conv), as in PyTorch, where the fused graph's
** environment maps the old node to the fused one. */
static struct bpcc_node *now_holding(const struct moved *mv, struct bpcc_node *x)
{
    while (x->dead && x->id < mv->n && mv->by_id[x->id]) x = mv->by_id[x->id];
    return x;
}

/* The graph side of one fusion: the root node takes the anchor's place and users (plus the
** extra inputs of conv+add patterns); the other matched nodes, MatchAllNode ones excepted, go. */
static enum bpcc_status rewire(struct bpcc_graph *g, const struct match *m, struct bpcc_node *root,
                              const struct moved *mv, struct bpcc_diag *d)
{
    struct bpcc_node *anchor = m->anchor;
    enum bpcc_status s = BPCC_OK;
    if (m->entry->extra_inputs_getter) {
        uint32_t extra = 0;
        for (uint32_t i = 0; i < m->n_leaves; i++)
            if (!strcmp(m->leaf_pattern[i]->op, "MatchAllNode") && m->nodes[i]) extra++;
        struct bpcc_value args;
        if (bpcc_value_seq_new(g, BPCC_VAL_TUPLE, root->args.n + extra, &args)) return bpcc_diag_nomem(d);
        for (uint32_t i = 0; i < root->args.n; i++) args.u.seq.items[i] = root->args.u.seq.items[i];
        uint32_t at = root->args.n;
        for (uint32_t i = 0; i < m->n_leaves; i++)
            if (!strcmp(m->leaf_pattern[i]->op, "MatchAllNode") && m->nodes[i])
                args.u.seq.items[at++] = bpcc_value_node(now_holding(mv, m->nodes[i]));
        if ((s = bpcc_node_set_args(root, &args, NULL, d))) return s;
    }
    if (root == anchor) return BPCC_OK;
    bpcc_node_move_after(root, anchor);
    if ((s = bpcc_node_replace_all_uses(anchor, root, NULL, d))) return s;
    /* from the anchor down: each matched node loses its last user before its turn */
    for (uint32_t i = 0; i < m->n_leaves && !s; i++) {
        struct bpcc_node *x = m->nodes[i];
        if (!x || x == root || !strcmp(m->leaf_pattern[i]->op, "MatchAllNode")) continue;
        s = bpcc_node_erase(x, d);
    }
    return s;
}

static enum bpcc_status fuse_in_place(struct bpcc_graph *g, const struct bpcc_config *c,
                                      const struct bpcc_fuse_options *o, char **explain_out, struct bpcc_diag *d)
{
    if (explain_out) *explain_out = NULL;
    bool is_qat = o && o->is_qat;
    struct plans ps = {.d = d};
    enum bpcc_status s = bpcc_match_graph(g, c, has_fuser, false, keep_match, &ps, d);
    /* graph order: the walk found the matches from the output back */
    for (uint32_t i = ps.n; i-- > 0 && !s;) s = plan(g, c, &ps, &ps.p[i], d);
    if (!s && ps.n) count_refs(g); /* before any fusion: which parts can move */
    struct bpcc_buf ex;
    bpcc_buf_init(&ex);
    struct bpcc_module *made = NULL;
    struct moved mv = {0};
    bool extra_inputs = false;
    for (uint32_t k = 0; k < c->n_entries && !extra_inputs; k++) extra_inputs = c->entries[k]->extra_inputs_getter;
    for (uint32_t i = ps.n; i-- > 0 && !s;) {
        const struct planned *p = &ps.p[i];
        struct match m;
        load_match(&ps, p, &m);
        struct fuse_call fc = {.g = g, .is_qat = is_qat, .root_path = p->root->target, .root = p->root_module,
                               .fused_module = p->fuser->fused_module, .n = p->n, .m = &m, .made = &made, .d = d};
        for (uint32_t k = 0; k < p->n; k++) {
            fc.mod[k] = ps.leaves[p->first + k].mod;
            fc.op[k] = ps.leaves[p->first + k].op;
        }
        /* the root's path now names the fused module */
        struct bpcc_module *old = bpcc_node_module(p->root);
        if (old) bpcc_graph_unlink_module(g, old);
        if ((s = run_fuser(p->def, &fc)) || (s = rewire(g, &m, p->root, &mv, d))) break;
        if (extra_inputs && m.anchor != p->root) {
            if (!mv.by_id) {
                mv.n = g->next_id;
                if (!(mv.by_id = bpcc_malloc((size_t)mv.n * sizeof *mv.by_id))) {
                    s = bpcc_diag_nomem(d);
                    break;
                }
                memset(mv.by_id, 0, (size_t)mv.n * sizeof *mv.by_id);
            }
            if (m.anchor->id < mv.n) mv.by_id[m.anchor->id] = p->root;
        }
        bpcc_node_resolve_module(p->root, NULL); /* the fused module, while its name's slot is at hand */
        if (explain_out) {
            const struct bpcc_module *fm = bpcc_node_module(p->root);
            bpcc_buf_printf(&ex, "%s -> %s (%s): ", p->root->name, fm ? fm->type : "?",
                            p->fuser->fuser_method);
            bool first = true;
            for (uint32_t k = m.n_leaves; k-- > 0;) {
                if (!m.nodes[k] || !strcmp(m.leaf_pattern[k]->op, "MatchAllNode")) continue;
                bpcc_buf_printf(&ex, "%s%s", first ? "" : ", ", m.nodes[k]->name);
                first = false;
            }
            char ptext[256];
            pattern_text(m.entry, ptext, sizeof ptext);
            bpcc_buf_printf(&ex, "  pattern %s  (%s:%u)\n", ptext, m.entry->file, m.entry->line);
        }
    }
    bpcc_xfree(ps.p);
    bpcc_xfree(ps.leaves);
    bpcc_xfree(mv.by_id);
    if (!s) s = prune_modules(g, d);
    if (!s) s = bpcc_graph_verify(g, d);
    if (s) {
        bpcc_buf_release(&ex);
        return s;
    }
    if (explain_out) {
        if (!ps.n) bpcc_buf_adds(&ex, "no fusion pattern matched\n");
        *explain_out = bpcc_buf_take(&ex, NULL);
        if (!*explain_out) return bpcc_diag_nomem(d);
    }
    return BPCC_OK;
}

/* }================================================ */

/* the pass leaves g as it was when it fails */
enum bpcc_status bpcc_fuse(struct bpcc_graph *g, const struct bpcc_config *c, const struct bpcc_fuse_options *o,
                           char **explain_out, struct bpcc_diag *d)
{
    if (explain_out) *explain_out = NULL;
    enum bpcc_status s = bpcc_graph_begin_pass(g, d);
    if (s) return s;
    /* the end may still fail the pass (a change its undo log found no memory for) */
    if ((s = bpcc_graph_end_pass(g, fuse_in_place(g, c, o, explain_out, d), d)) && explain_out) {
        bpcc_xfree(*explain_out);
        *explain_out = NULL;
    }
    return s;
}
