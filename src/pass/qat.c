/*
** qat.c — the QAT modules of a model prepared with prepare_qat_fx (and trained in PyTorch): what
** each QAT class is the trained form of, and its to_float, which convert_fx applies to every QAT
** module before it makes the reference module (convert_weighted_module):
**
**   torch.ao.nn.qat.Linear / Conv1d..3d / Embedding / EmbeddingBag   -> the float module
**   torch.nn.intrinsic.qat.ConvBn1d..3d       -> Conv, the batch norm folded (running statistics)
**   torch.nn.intrinsic.qat.ConvBnReLU1d..3d   -> ConvReLU(Conv folded, ReLU)
**   torch.nn.intrinsic.qat.ConvReLU1d..3d     -> ConvReLU(Conv, ReLU)
**   torch.nn.intrinsic.qat.LinearReLU         -> LinearReLU(Linear, ReLU)
**   torch.nn.intrinsic.qat.LinearBn1d         -> Linear, the batch norm folded
**
** The weight's qparams then come from the module's weight fake quantize, not from the qconfig:
** its observer's statistics from training, updated once more by the float weight when the
** observer is on (convert_fx runs weight_fake_quant on it).
*/
#include "pass.h"
#include "qat.h"

#include <stdarg.h>
#include <stdio.h>

/* The float module a QAT class becomes. The `training` flag of what to_float builds: the QAT
** module's (a `train(self.training)`), or a new module's True where 1.13's to_float makes none. */
struct qat_class {
    const char *name;      /* after the prefix */
    const char *root;      /* the float module (the fused module's first part) */
    const char *fused;     /* the fused float container (root, ReLU), or NULL */
    bool bn;               /* a batch norm to fold */
    bool keeps_training;   /* to_float trains the result as the QAT module */
};

static const struct qat_class classes[] = {
    {"Linear", "torch.nn.Linear", NULL, false, true},
    {"Conv1d", "torch.nn.Conv1d", NULL, false, false},
    {"Conv2d", "torch.nn.Conv2d", NULL, false, false},
    {"Conv3d", "torch.nn.Conv3d", NULL, false, false},
    {"Embedding", "torch.nn.Embedding", NULL, false, true},
    {"EmbeddingBag", "torch.nn.EmbeddingBag", NULL, false, true},
    {"ConvBn1d", "torch.nn.Conv1d", NULL, true, true},
    {"ConvBn2d", "torch.nn.Conv2d", NULL, true, true},
    {"ConvBn3d", "torch.nn.Conv3d", NULL, true, true},
    {"ConvBnReLU1d", "torch.nn.Conv1d", "torch.ao.nn.intrinsic.ConvReLU1d", true, true},
    {"ConvBnReLU2d", "torch.nn.Conv2d", "torch.ao.nn.intrinsic.ConvReLU2d", true, true},
    {"ConvBnReLU3d", "torch.nn.Conv3d", "torch.ao.nn.intrinsic.ConvReLU3d", true, true},
    {"ConvReLU1d", "torch.nn.Conv1d", "torch.ao.nn.intrinsic.ConvReLU1d", false, true},
    {"ConvReLU2d", "torch.nn.Conv2d", "torch.ao.nn.intrinsic.ConvReLU2d", false, true},
    {"ConvReLU3d", "torch.nn.Conv3d", "torch.ao.nn.intrinsic.ConvReLU3d", false, true},
    {"LinearReLU", "torch.nn.Linear", "torch.ao.nn.intrinsic.LinearReLU", false, false},
    {"LinearBn1d", "torch.nn.Linear", NULL, true, false},
};

/* s after the literal prefix lit, or NULL: byte by byte, most types leaving at their first byte
** that differs (every call_module node of a graph asks, in qconfig assignment and convert) */
static const char *after(const char *s, const char *lit)
{
    while (*lit)
        if (*s++ != *lit++) return NULL;
    return s;
}

/* the class of a QAT module type (1.13's paths and 2.x's: torch[.ao].nn[.intrinsic].qat.<name>),
** or NULL */
static const struct qat_class *qat_class(const char *type)
{
    const char *t = after(type, "torch.");
    if (t && t[0] == 'a') t = after(t, "ao.");
    if (t) t = after(t, "nn.");
    if (!t) return NULL;
    const char *in = after(t, "intrinsic.");
    bool intrinsic = in != NULL;
    if (!(t = after(in ? in : t, "qat."))) return NULL;
    for (size_t i = 0; i < BPCC_ARRAY_LEN(classes); i++) {
        const struct qat_class *c = &classes[i];
        /* the intrinsic classes are the fused ones (a ReLU or a batch norm in them) */
        if ((c->bn || c->fused) == intrinsic && !strcmp(t, c->name)) return c;
    }
    return NULL;
}

bool bpcc_qat_is_type(const char *type) { return qat_class(type) != NULL; }

const char *bpcc_qat_float_root(const char *type)
{
    const struct qat_class *c = qat_class(type);
    return c ? c->root : NULL;
}

static bool qat_type(const char *type) { return qat_class(type) || bpcc_obs_is_fake_quant_type(type); }

bool bpcc_graph_has_qat(const struct bpcc_graph *g) { return bpcc_graph_any_module_type(g, qat_type); }

/* a module of `type` at `name` with {training: train} (and the QAT module's other attributes but
** freeze_bn, a QAT flag, when `like` is given) */
static enum bpcc_status made(struct bpcc_graph *g, const char *name, const char *type, bool train,
                             const struct bpcc_module *like, struct bpcc_module **out, struct bpcc_diag *d)
{
    enum bpcc_status s = bpcc_graph_add_module(g, name, type, out, d);
    struct bpcc_value t = bpcc_value_bool(train);
    if (!s) s = bpcc_module_set_attr(*out, "training", &t, d);
    const struct bpcc_value *a = like ? &like->attrs : NULL;
    for (uint32_t i = 0; !s && a && i < a->n; i++)
        if (strcmp(a->u.seq.keys[i], "training") && strcmp(a->u.seq.keys[i], "freeze_bn"))
            s = bpcc_module_set_attr(*out, a->u.seq.keys[i], &a->u.seq.items[i], d);
    return s;
}

static enum bpcc_status refuse(struct bpcc_graph *g, const struct bpcc_node *at, struct bpcc_diag *d, const char *fmt, ...)
    BPCC_PRINTF(4, 5);
static enum bpcc_status refuse(struct bpcc_graph *g, const struct bpcc_node *at, struct bpcc_diag *d, const char *fmt, ...)
{
    char msg[BPCC_DIAG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, at->src_line, at->src_col, "%s", msg);
}

enum bpcc_status bpcc_qat_to_float(struct bpcc_graph *g, struct bpcc_module *m, const struct bpcc_node *at,
                                   struct bpcc_qat_weight *w, struct bpcc_module **out, struct bpcc_diag *d)
{
    memset(w, 0, sizeof *w);
    *out = m;
    const struct qat_class *c = qat_class(m->type);
    if (!c) return BPCC_OK;
    const char *was = m->type;
    const struct bpcc_module *fq = bpcc_module_child(m, "weight_fake_quant");
    const struct bpcc_module *obs = fq ? bpcc_obs_fake_quant_observer(fq) : NULL;
    const struct bpcc_module *bn = c->bn ? bpcc_module_child(m, "bn") : NULL;
    if (!obs || !bpcc_obs_spec_of_module(fq, &w->spec))
        return refuse(g, at, d, "QAT module '%s' (%s) has no weight fake quantize with an observer (weight_fake_quant."
                                "activation_post_process)", m->name, was);
    if (c->bn && !bn) return refuse(g, at, d, "QAT module '%s' (%s) has no batch norm 'bn'", m->name, was);
    const struct bpcc_tensor *oe = bpcc_module_tensor(fq, "observer_enabled");
    w->observe = !oe || (oe->data && bpcc_tensor_numel(oe) >= 1 &&
                         (oe->dtype == BPCC_DTYPE_I64 ? ((const int64_t *)oe->data)[0] == 1
                          : oe->dtype == BPCC_DTYPE_U8 ? ((const uint8_t *)oe->data)[0] == 1
                                                       : false));
    /* the weight observer as training left it */
    if (bpcc_obs_init(&w->st, &w->spec)) return bpcc_diag_nomem(d);
    w->has = true;
    char why[160];
    bool found;
    enum bpcc_status s = bpcc_obs_load(&w->st, obs, &found, why, sizeof why);
    if (s == BPCC_ERR_NOMEM) return bpcc_diag_nomem(d);
    if (s) return refuse(g, at, d, "weight observer '%s' of QAT module '%s': %s", obs->name, m->name, why);
    const struct bpcc_value *tv = bpcc_module_attr(m, "training");
    bool train = c->keeps_training ? tv && tv->kind == BPCC_VAL_BOOL && tv->u.b : true;
    /* the float module in the QAT module's place; nodes find it by their target */
    const char *name = m->name;
    struct bpcc_tensor *wt = bpcc_module_tensor(m, "weight"), *bt = bpcc_module_tensor(m, "bias");
    if (!wt) return refuse(g, at, d, "QAT module '%s' (%s) has no weight", m->name, was);
    bpcc_graph_unlink_module(g, m);
    struct bpcc_module *f = NULL, *root = NULL;
    if (c->fused) {
        size_t n = strlen(name) + 3;
        char *p0 = bpcc_malloc(n), *p1 = bpcc_malloc(n);
        if (!p0 || !p1) s = bpcc_diag_nomem(d);
        if (!s) {
            snprintf(p0, n, "%s.0", name);
            snprintf(p1, n, "%s.1", name);
        }
        struct bpcc_module *relu;
        if (!s) s = made(g, name, c->fused, train, NULL, &f, d);
        if (!s) s = made(g, p0, c->root, train, m, &root, d);
        if (!s) s = made(g, p1, "torch.nn.ReLU", train, NULL, &relu, d);
        struct bpcc_value no = bpcc_value_bool(false);
        if (!s) s = bpcc_module_set_attr(relu, "inplace", &no, d);
        bpcc_xfree(p0);
        bpcc_xfree(p1);
    } else {
        s = made(g, name, c->root, train, m, &f, d);
        root = f;
    }
    if (!s) s = bpcc_module_set_tensor(root, "weight", BPCC_TENSOR_PARAM, wt, d);
    if (!s && bt) s = bpcc_module_set_tensor(root, "bias", BPCC_TENSOR_PARAM, bt, d);
    if (!s && bn) {
        s = bpcc_fold_bn(g, root, name, bn, 0, !strcmp(c->root, "torch.nn.Linear"), why, sizeof why, d);
        if (s == BPCC_ERR_GRAPH) s = refuse(g, at, d, "QAT module '%s' (%s): %s", name, was, why);
    }
    if (!s) *out = f;
    return s;
}

void bpcc_qat_weight_release(struct bpcc_qat_weight *w)
{
    if (w->has) bpcc_obs_release(&w->st);
    w->has = false;
}
