/*
** prepare.c — the prepare pass (PyTorch 1.13's prepare_fx after fusion): match the backend's
** patterns over the fused graph, give each node its qconfig, derive the dtype each node's inputs
** and output are to have, check matches against their dtype configs, and insert observers as
** call_module nodes exactly where insert_observers_for_model does: inputs at a pattern's root,
** the output at its last node, no second observer of the same kind on one value, one shared
** observer for OUTPUT_SHARE_OBSERVER_WITH_INPUT ops and their inputs, fixed-qparams observers for
** fixed-range ops. The quirks of 1.13 that decide observer placement are kept (docs/PREPARE.md).
*/
#include "prepare.h"

#include "../calib/observer.h"

#include "../io/json.h"

#include <stdio.h>

const char *bpcc_tdt_name(uint8_t t)
{
    switch (t) {
    case TD_PY_INT: return "int";
    case TD_PY_FLOAT: return "float";
    case TD_NOTENSOR: return "none";
    case TD_ABSENT: return "absent";
    default: return t == BPCC_DTYPE_NONE ? "none" : bpcc_dtype_name((enum bpcc_dtype)t);
    }
}

const char *bpcc_prep_status_name(enum prep_status s)
{
    static const char *const names[] = {"not_applicable", "quantized", "no_qconfig", "no_pattern", "rejected",
                                        "not_observed", "no_tensors", "getitem", "float", "stub"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "?";
}

/* {==================== state ==================== */

struct prep {
    struct bpcc_graph *g;
    const struct bpcc_config *c;
    struct bpcc_prepare_report *r;
    struct bpcc_diag *d;
    uint32_t n_ids;              /* ids of the original nodes are below this */
    int32_t *owner;              /* original node id -> match index, -1 */
    const struct qconfig **qc;   /* original node id -> qconfig (NULL: float) */
    int32_t *pnode;              /* original node id -> index in r->nodes */
    uint8_t *notensor;           /* original node id -> all_node_args_have_no_tensors */
    uint32_t next_obs;           /* activation_post_process_<n> */
    uint32_t stub_lo, n_stubs;   /* the observers that replaced stubs have ids stub_lo .. +n_stubs */
    uint8_t *stub_dtype;         /* their dtypes */
    const struct bpcc_prepare_options *o;
    uint32_t n_placeholders;     /* seen so far, for input_quantized */
    struct bpcc_buf why;         /* scratch */
#define PREP_LIKE 8
    struct bpcc_module *like[PREP_LIKE]; /* observers whose attributes later ones may share */
    uint32_t next_like;
    bool report;                 /* the caller takes the report: its observer records are kept */
};

static struct prep_node *pn(struct prep *p, const struct bpcc_node *n)
{
    return n->id < p->n_ids && p->pnode[n->id] >= 0 ? &p->r->nodes[p->pnode[n->id]] : NULL;
}

static bool is_original(const struct prep *p, const struct bpcc_node *n) { return n->id < p->n_ids; }

static const char *obs_type_prefix = "torch.ao.quantization.";

/* The observer class of a call_module node's module, -1 when it is not an observer. */
static int observer_class(const struct bpcc_node *n)
{
    if (n->kind != BPCC_NODE_CALL_MODULE) return -1;
    const char *type = bpcc_node_module_type(n);
    return type ? bpcc_obs_type_class(type) : -1;
}

static enum bpcc_dtype observer_dtype(const struct bpcc_node *n)
{
    const struct bpcc_module *m = bpcc_node_module(n);
    const struct bpcc_value *v = m ? bpcc_module_attr(m, "dtype") : NULL;
    return v && v->kind == BPCC_VAL_DTYPE ? v->u.dtype : BPCC_DTYPE_NONE;
}

static bool is_getitem(const struct bpcc_node *n)
{
    return n->kind == BPCC_NODE_CALL_FUNCTION && !strcmp(n->target, "operator.getitem");
}

static struct bpcc_node *arg_node(const struct bpcc_node *n, uint32_t i)
{
    return i < n->args.n && n->args.u.seq.items[i].kind == BPCC_VAL_NODE ? n->args.u.seq.items[i].u.node : NULL;
}

/* }================================================ */

/* {==================== matching (find_matches) ==================== */

/* PyTorch's prepare matcher differs from fusion's in one point: every node of a match, MatchAllNode
** leaves included, is recorded, and a later match overwrites an earlier record. */
static enum bpcc_status find_matches(struct prep *p)
{
    struct bpcc_graph *g = p->g;
    uint32_t cap = 0;
    for (struct bpcc_node *node = g->last; node; node = node->prev) {
        if (!is_original(p, node) || p->owner[node->id] >= 0) continue; /* stubs' observers are not matched */
        const char *op = bpcc_node_op(node);
        if (!op) continue;
        uint32_t n_cand;
        const uint32_t *cand = bpcc_registry_candidates(p->c, op, &n_cand);
        for (uint32_t k = 0; k < n_cand; k++) {
            const struct pattern_entry *e = p->c->entries[cand[k]];
            struct match m = {.entry = e, .anchor = node};
            struct bpcc_value self = bpcc_value_node(node);
            if (!bpcc_pattern_match(g, e->pattern, &self, UINT32_MAX, &m)) continue;
            bool inside = true; /* a stub's observer is a boundary: no pattern reaches across it */
            for (uint32_t i = 0; i < m.n_leaves; i++)
                if (m.nodes[i] && !is_original(p, m.nodes[i])) inside = false;
            if (!inside) continue;
            if (p->r->n_matches == cap) {
                cap = cap ? cap * 2 : 64;
                struct prep_match *nm = bpcc_realloc(p->r->matches, cap * sizeof *nm);
                if (!nm) return bpcc_diag_nomem(p->d);
                p->r->matches = nm;
            }
            struct prep_match *pm = &p->r->matches[p->r->n_matches];
            *pm = (struct prep_match){.entry = e, .anchor = node, .obs = e->obs, .supported = true};
            pm->nodes = BPCC_ARENA_NEWN(&p->r->arena, struct bpcc_node *, m.n_leaves);
            if (!pm->nodes) return bpcc_diag_nomem(p->d);
            for (uint32_t i = 0; i < m.n_leaves; i++)
                if (m.nodes[i]) pm->nodes[pm->n_nodes++] = m.nodes[i];
            /* _default_root_node_getter: the last leaf of the matched node pattern */
            pm->root = m.nodes[m.n_leaves - 1];
            for (uint32_t i = 0; i < pm->n_nodes; i++) p->owner[pm->nodes[i]->id] = (int32_t)p->r->n_matches;
            p->r->n_matches++;
            break;
        }
    }
    return BPCC_OK;
}

/* }================================================ */

/* {==================== target dtypes ==================== */

/* all_node_args_have_no_tensors, computed once per node in graph order (1.13's cache never
** fills, so its result is what plain recursion gives). */
static bool no_tensors_of(struct prep *p, const struct bpcc_value *v);

static bool node_no_tensors(struct prep *p, const struct bpcc_node *n)
{
    if (is_original(p, n)) return p->notensor[n->id];
    return false;
}

static bool compute_no_tensors(struct prep *p, const struct bpcc_node *n)
{
    switch ((enum bpcc_node_kind)n->kind) {
    case BPCC_NODE_PLACEHOLDER:
    case BPCC_NODE_GET_ATTR: return false;
    case BPCC_NODE_CALL_MODULE:
        if (observer_class(n) >= 0) return n->args.n ? no_tensors_of(p, &n->args.u.seq.items[0]) : true;
        return false;
    default: break;
    }
    if (is_getitem(n)) return n->args.n ? no_tensors_of(p, &n->args.u.seq.items[0]) : true;
    if (n->kind == BPCC_NODE_CALL_FUNCTION && !strcmp(n->target, "getattr") && n->args.n >= 2) {
        const struct bpcc_value *a = &n->args.u.seq.items[1];
        if (a->kind == BPCC_VAL_STR && (!strcmp(a->u.s, "ndim") || !strcmp(a->u.s, "shape"))) return true;
    }
    if (n->kind == BPCC_NODE_CALL_METHOD && !strcmp(n->target, "size")) return true;
    /* otherwise: no tensor among the arguments; an argument that is not a node, an int or a list
    ** counts as a tensor, and a node without arguments is not known to have none */
    bool result = false;
    for (uint32_t i = 0; i < n->args.n; i++) {
        const struct bpcc_value *a = &n->args.u.seq.items[i];
        bool found = false;
        if (a->kind == BPCC_VAL_LIST) {
            for (uint32_t k = 0; k < a->n && !found; k++)
                if (a->u.seq.items[k].kind == BPCC_VAL_NODE && !node_no_tensors(p, a->u.seq.items[k].u.node)) found = true;
        } else if (a->kind == BPCC_VAL_INT || a->kind == BPCC_VAL_BOOL) {
        } else if (a->kind == BPCC_VAL_NODE) {
            found = !node_no_tensors(p, a->u.node);
        } else {
            found = true;
        }
        if (found) return false;
        result = true;
    }
    return result;
}

static bool no_tensors_of(struct prep *p, const struct bpcc_value *v)
{
    return v->kind != BPCC_VAL_NODE || node_no_tensors(p, v->u.node);
}

static bool input_output_observed(const struct pattern_entry *e) { return e->input_output_observed != 0; }

/* whether the bridge recorded the node's value as a tensor of bools or integers (a comparison, a
** mask, token ids). PyTorch 1.13 does not know and observes such a value where a float one would
** be (the input of a shared-observer op, view or unsqueeze of a mask): its converted model then
** fails with "Quantize only works on Float Tensor". bpcc leaves it unobserved
** (docs/PYTORCH_DIFFERENCES.md) */
static bool recorded_not_float(const struct bpcc_node *n)
{
    return n->meta && n->meta->kind == BPCC_VAL_TTYPE && bpcc_dtype_is_integral(n->meta->u.ttype.dtype);
}

/* get_target_activation_dtype_for_node */
static void target_dtypes(struct prep *p, struct bpcc_node *n, struct prep_node *x)
{
    x->in = x->out = BPCC_DTYPE_F32;
    x->weight = x->bias = TD_ABSENT;
    x->in_dynamic = false;
    if (n->kind == BPCC_NODE_PLACEHOLDER) {
        uint32_t idx = p->n_placeholders++;
        if (recorded_not_float(n)) x->out = BPCC_DTYPE_BOOL; /* never observed */
        for (uint32_t i = 0; p->o && i < p->o->n_input_quantized; i++)
            if (p->o->input_quantized[i] == idx) x->in = x->out = BPCC_DTYPE_QUINT8;
        return;
    }
    if (n->kind == BPCC_NODE_OUTPUT) {
        if (p->o && p->o->output_quantized) x->in = x->out = BPCC_DTYPE_QUINT8;
        return;
    }
    if (n->kind != BPCC_NODE_CALL_MODULE && n->kind != BPCC_NODE_CALL_FUNCTION && n->kind != BPCC_NODE_CALL_METHOD)
        return; /* get_attr */
    if (p->notensor[n->id]) {
        x->in = x->out = TD_NOTENSOR;
        return;
    }
    if (is_getitem(n)) return;
    const struct qconfig *qc = p->qc[n->id];
    int32_t mi = p->owner[n->id];
    if (qc && mi >= 0 && input_output_observed(p->r->matches[mi].entry)) {
        struct target_dtypes t;
        bpcc_target_dtypes_from_qconfig(qc, &t);
        x->in = (uint8_t)t.input;
        x->in_dynamic = t.input_dynamic;
        x->out = (uint8_t)t.output;
        x->weight = (uint8_t)t.weight;
        x->bias = (uint8_t)t.bias;
    }
    if (recorded_not_float(n)) x->out = BPCC_DTYPE_BOOL; /* its value is never observed */
}

/* NON_OBSERVABLE_ARG_DICT: argument positions of some Tensor methods that are not float tensors */
static uint8_t non_observable(const struct bpcc_node *n, uint32_t i)
{
    if (n->kind != BPCC_NODE_CALL_METHOD) return 0;
    const char *t = n->target;
    if (!strcmp(t, "masked_fill")) return i == 1 ? BPCC_DTYPE_BOOL : i == 2 ? TD_PY_FLOAT : 0;
    if (!strcmp(t, "permute") || !strcmp(t, "repeat") || !strcmp(t, "reshape") || !strcmp(t, "transpose") ||
        !strcmp(t, "view"))
        return i >= 1 ? TD_PY_INT : 0;
    if (!strcmp(t, "size") || !strcmp(t, "unsqueeze") || !strcmp(t, "unsqueeze_")) return i == 1 ? TD_PY_INT : 0;
    return 0;
}

/* maybe_propagate_dtype_for_node, iteratively along general tensor value ops' first arguments */
static void propagate(struct prep *p, struct bpcc_node *n, uint8_t dt, const struct bpcc_node *from)
{
    for (uint32_t guard = 0; n && is_original(p, n) && guard <= p->n_ids; guard++) {
        struct prep_node *x = pn(p, n);
        x->in = x->out = dt;
        x->in_dynamic = false;
        x->dtype_from = from;
        int32_t mi = p->owner[n->id];
        if (mi < 0 || p->r->matches[mi].obs != OBS_SHARE) return;
        n = arg_node(n, 0);
    }
}

static void propagate_known_dtypes(struct prep *p)
{
    for (uint32_t k = 0; k < p->r->n_nodes; k++) {
        struct bpcc_node *n = p->r->nodes[k].node;
        if (p->r->nodes[k].status == PS_STUB) continue;
        for (uint32_t i = 1; i < n->args.n; i++) {
            uint8_t dt = non_observable(n, i);
            if (!dt) continue;
            const struct bpcc_value *a = &n->args.u.seq.items[i];
            if (a->kind == BPCC_VAL_NODE) propagate(p, a->u.node, dt, n);
            else if (a->kind == BPCC_VAL_LIST || a->kind == BPCC_VAL_TUPLE)
                for (uint32_t j = 0; j < a->n; j++)
                    if (a->u.seq.items[j].kind == BPCC_VAL_NODE) propagate(p, a->u.seq.items[j].u.node, dt, n);
        }
    }
}

/* }================================================ */

/* {==================== argument kinds and backend support ==================== */

/* The simple single-op entry of a call_function's target (backend_config.configs[node.target]). */
static const struct pattern_entry *function_entry(const struct prep *p, const struct bpcc_node *n)
{
    if (n->kind != BPCC_NODE_CALL_FUNCTION) return NULL;
    uint32_t n_cand;
    const uint32_t *cand = bpcc_registry_candidates(p->c, n->target, &n_cand);
    for (uint32_t k = 0; k < n_cand; k++) {
        const struct pattern_entry *e = p->c->entries[cand[k]];
        if (!e->pattern->n_args && !strcmp(e->pattern->op, n->target)) return e;
    }
    return NULL;
}

/* node_arg_is_weight / node_arg_is_bias, with e = function_entry(p, n) looked up once by the caller */
static bool arg_is(const struct pattern_entry *e, const struct bpcc_node *n, const struct bpcc_node *arg, const char *key)
{
    if (!e) return false;
    for (uint32_t i = 0; i < e->n_type_index; i++)
        if (!strcmp(e->type_index_key[i], key)) {
            int64_t ix = e->type_index_val[i];
            if (ix >= 0 && ix < (int64_t)n->args.n && arg_node(n, (uint32_t)ix) == arg) return true;
        }
    const struct bpcc_value *kw = bpcc_node_kwargs(n);
    for (uint32_t i = 0; i < kw->n; i++)
        if (!strcmp(kw->u.seq.keys[i], key)) return kw->u.seq.items[i].kind == BPCC_VAL_NODE && kw->u.seq.items[i].u.node == arg;
    return false;
}

static unsigned arg_kind(const struct prep *p, const struct bpcc_node *n, const struct bpcc_node *arg)
{
    const struct pattern_entry *e = function_entry(p, n);
    if (arg_is(e, n, arg, "weight")) return BPCC_ARG_WEIGHT;
    if (arg_is(e, n, arg, "bias")) return BPCC_ARG_BIAS;
    return BPCC_ARG_ACTIVATION;
}

static bool has_weight(const struct prep *p, const struct bpcc_node *n)
{
    if (n->kind == BPCC_NODE_CALL_MODULE) {
        const struct bpcc_module *m = bpcc_node_module(n);
        if (!m) return false;
        if (bpcc_module_tensor(m, "weight")) return true;
        for (const struct bpcc_module *c = m->first_child; c; c = c->next_sibling)
            if (bpcc_module_tensor(c, "weight")) return true; /* a fused module's first part */
        return false;
    }
    const struct pattern_entry *e = function_entry(p, n);
    for (uint32_t i = 0; i < n->args.n; i++)
        if (n->args.u.seq.items[i].kind == BPCC_VAL_NODE && arg_is(e, n, n->args.u.seq.items[i].u.node, "weight")) return true;
    const struct bpcc_value *kw = bpcc_node_kwargs(n);
    for (uint32_t i = 0; i < kw->n; i++)
        if (!strcmp(kw->u.seq.keys[i], "weight") && kw->u.seq.items[i].kind == BPCC_VAL_NODE) return true;
    return false;
}

static bool tdt_is_dtype(uint8_t t) { return t < BPCC_DTYPE_COUNT; }

struct check {
    struct prep *p;
    const struct bpcc_node *root;
    const struct prep_node *rx;
    const struct qconfig *qc;
    const struct dtype_config *dc;
    char *why;
    size_t n;
};

/* is_input_arg_dtype_supported_by_backend for one node argument */
static bool arg_supported(struct check *k, const struct bpcc_node *arg)
{
    unsigned kind = arg_kind(k->p, k->root, arg);
    const struct dtype_config *dc = k->dc;
    if (kind == BPCC_ARG_ACTIVATION) {
        if (dc->input.dtype == BPCC_DTYPE_NONE) return true;
        uint8_t in = k->rx->in;
        bool dyn = tdt_is_dtype(in) && k->rx->in_dynamic;
        if (in != dc->input.dtype) {
            snprintf(k->why, k->n, "input activation dtype %s, backend wants %s", bpcc_tdt_name(in),
                     bpcc_dtype_name(dc->input.dtype));
            return false;
        }
        if (dyn != dc->is_dynamic) {
            snprintf(k->why, k->n, "the qconfig quantizes %s, the backend's dtype config is %s",
                     dyn ? "dynamically" : "statically", dc->is_dynamic ? "dynamic" : "static");
            return false;
        }
        return !k->qc || bpcc_observer_satisfies(&k->qc->activation, &dc->input, "activation", k->why, k->n);
    }
    if (kind == BPCC_ARG_WEIGHT) {
        if (dc->weight.dtype == BPCC_DTYPE_NONE) return true;
        if (k->rx->weight != dc->weight.dtype) {
            snprintf(k->why, k->n, "weight dtype %s, backend wants %s", bpcc_tdt_name(k->rx->weight),
                     bpcc_dtype_name(dc->weight.dtype));
            return false;
        }
        return !k->qc || bpcc_observer_satisfies(&k->qc->weight, &dc->weight, "weight", k->why, k->n);
    }
    if (dc->bias == BPCC_DTYPE_NONE || k->rx->bias == dc->bias) return true;
    snprintf(k->why, k->n, "bias dtype %s, backend wants %s", bpcc_tdt_name(k->rx->bias), bpcc_dtype_name(dc->bias));
    return false;
}

static bool value_supported(struct check *k, const struct bpcc_value *v)
{
    if (v->kind == BPCC_VAL_NODE) return arg_supported(k, v->u.node);
    if (v->kind == BPCC_VAL_LIST || v->kind == BPCC_VAL_TUPLE) {
        for (uint32_t i = 0; i < v->n; i++)
            if (!value_supported(k, &v->u.seq.items[i])) return false;
    }
    return true;
}

/* _is_pattern_dtype_config_and_qconfig_supported_by_backend for node n of match pm, with n's
** qconfig: some dtype config accepts the root's arguments and the last node's output. On failure
** the reasons (one per dtype config) are left in p->why. */
static bool match_supported(struct prep *p, const struct prep_match *pm, const struct qconfig *qc)
{
    const struct pattern_entry *e = pm->entry;
    bpcc_buf_release(&p->why);
    bpcc_buf_init(&p->why);
    if (!e->n_dtype_configs) {
        bpcc_buf_printf(&p->why, "the pattern has no dtype_configs (%s:%u)", e->file, e->line);
        return false;
    }
    const struct prep_node *rx = pn(p, pm->root), *ax = pn(p, pm->anchor);
    for (uint32_t i = 0; i < e->n_dtype_configs; i++) {
        const struct dtype_config *dc = &e->dtype_configs[i];
        char why[256] = "";
        struct check k = {p, pm->root, rx, qc, dc, why, sizeof why};
        bool ok = value_supported(&k, &pm->root->args);
        const struct bpcc_value *kw = bpcc_node_kwargs(pm->root);
        for (uint32_t j = 0; ok && j < kw->n; j++) ok = value_supported(&k, &kw->u.seq.items[j]);
        if (ok && dc->output.dtype != BPCC_DTYPE_NONE) {
            if (ax->out != dc->output.dtype) {
                snprintf(why, sizeof why, "output activation dtype %s, backend wants %s", bpcc_tdt_name(ax->out),
                         bpcc_dtype_name(dc->output.dtype));
                ok = false;
            } else if (qc && !bpcc_observer_satisfies(&qc->activation, &dc->output, "activation", why, sizeof why)) {
                ok = false;
            }
        }
        if (ok) return true;
        bpcc_buf_printf(&p->why, "%s%s (%s:%u)", i ? "; " : "", why, e->file, dc->line);
    }
    return false;
}

/* }================================================ */

/* {==================== observers ==================== */

/* An observer's constructor arguments as module attributes: a DICT on the stack (keys are
** literals, values scalars; the qscheme symbol is interned in the graph). */
#define OBS_ATTRS 10
struct obs_attrs {
    const char *keys[OBS_ATTRS];
    struct bpcc_value items[OBS_ATTRS];
    uint32_t n;
};

static void put(struct obs_attrs *a, const char *key, struct bpcc_value v)
{
    BPCC_ASSERT(a->n < OBS_ATTRS);
    a->keys[a->n] = key;
    a->items[a->n++] = v;
}

static enum bpcc_status observer_attrs(struct bpcc_graph *g, const struct observer_spec *o, struct obs_attrs *a)
{
    a->n = 0;
    put(a, "dtype", bpcc_value_dtype(o->dtype));
    bool ranged = o->cls != OC_PLACEHOLDER && o->cls != OC_NOOP && o->cls != OC_REUSE_INPUT;
    if (ranged) {
        char q[64];
        bpcc_str_cat(q, sizeof q, bpcc_str_cat(q, sizeof q, 0, "torch."), bpcc_qscheme_name(o->qscheme));
        struct bpcc_value qs;
        if (bpcc_value_str_new(g, BPCC_VAL_SYMBOL, q, &qs)) return BPCC_ERR_NOMEM;
        put(a, "qscheme", qs);
        put(a, "quant_min", bpcc_value_int(o->quant_min));
        put(a, "quant_max", bpcc_value_int(o->quant_max));
        put(a, "has_customized_qrange", bpcc_value_bool(o->has_customized_qrange));
    }
    switch (o->cls) {
    case OC_FIXED_QPARAMS:
        put(a, "scale", bpcc_value_float(o->scale));
        put(a, "zero_point", bpcc_value_int(o->zero_point));
        break;
    case OC_PLACEHOLDER:
        if (o->compute_dtype != BPCC_DTYPE_NONE) put(a, "compute_dtype", bpcc_value_dtype(o->compute_dtype));
        break;
    case OC_NOOP:
    case OC_REUSE_INPUT: break;
    default:
        put(a, "reduce_range", bpcc_value_bool(o->reduce_range));
        put(a, "eps", bpcc_value_float((double)o->eps));
        if (o->cls == OC_MOVING_AVERAGE_MINMAX || o->cls == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX)
            put(a, "averaging_constant", bpcc_value_float(o->averaging_constant));
        if (o->cls == OC_PER_CHANNEL_MINMAX || o->cls == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX)
            put(a, "ch_axis", bpcc_value_int(o->ch_axis));
        if (o->cls == OC_HISTOGRAM) {
            put(a, "bins", bpcc_value_int(o->bins));
            put(a, "upsample_rate", bpcc_value_int(o->upsample_rate));
        }
    }
    return BPCC_OK;
}

/* Observers made from one spec have the same attributes: m shares the array of an observer made
** before with them (p->like, the last few kinds made), or is given its own. */
static enum bpcc_status set_observer_attrs(struct prep *p, struct bpcc_module *m, const struct observer_spec *o)
{
    struct obs_attrs a;
    if (observer_attrs(p->g, o, &a)) return bpcc_diag_nomem(p->d);
    struct bpcc_value dict = {.kind = BPCC_VAL_DICT, .n = a.n, .u.seq = {a.items, a.keys}};
    for (uint32_t i = 0; i < PREP_LIKE; i++)
        if (p->like[i] && bpcc_value_equal(&p->like[i]->attrs, &dict)) {
            bpcc_module_share_attrs(m, p->like[i]);
            return BPCC_OK;
        }
    if (bpcc_module_reserve_attrs(m, a.n)) return bpcc_diag_nomem(p->d);
    for (uint32_t i = 0; i < a.n; i++) {
        enum bpcc_status s = bpcc_module_set_attr(m, a.keys[i], &a.items[i], p->d);
        if (s) return s;
    }
    p->like[p->next_like++ % PREP_LIKE] = m;
    return BPCC_OK;
}

/* insert_observer: a new observer module activation_post_process_<n> and a node calling it on
** `arg`, placed right after `arg`. */
static enum bpcc_status insert_observer(struct prep *p, struct bpcc_node *arg, const struct observer_spec *o,
                                        const char *role, const struct bpcc_node *for_node, struct bpcc_node **out)
{
    struct bpcc_graph *g = p->g;
    char name[64], type[96];
    bpcc_str_cat(type, sizeof type, bpcc_str_cat(type, sizeof type, 0, obs_type_prefix), bpcc_obs_class_name(o->cls));
    struct bpcc_module *m = NULL;
    enum bpcc_status s = BPCC_OK;
    while (!s && !m) { /* the first activation_post_process_<n> no module has */
        bpcc_str_cat_i64(name, sizeof name, bpcc_str_cat(name, sizeof name, 0, "activation_post_process_"), p->next_obs++);
        s = bpcc_graph_add_module_if_free(g, name, type, &m, p->d);
    }
    if (!s) s = set_observer_attrs(p, m, o);
    struct bpcc_value args;
    if (!s && bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 1, &args)) s = bpcc_diag_nomem(p->d);
    if (s) return s;
    args.u.seq.items[0] = bpcc_value_node(arg);
    s = bpcc_graph_node_new(g, BPCC_NODE_CALL_MODULE, name, name, &args, NULL, true, out, p->d);
    if (s) return s;
    bpcc_node_move_after(*out, arg);
    struct bpcc_prepare_report *r = p->r;
    if (!p->report) return BPCC_OK; /* the records are only the report's (at 1M nodes ~100 MB) */
    if (r->n_observers == r->cap_observers) {
        uint32_t cap = r->cap_observers ? r->cap_observers * 2 : 64;
        struct prep_observer *no = bpcc_realloc(r->observers, cap * sizeof *no);
        if (!no) return bpcc_diag_nomem(p->d);
        r->observers = no;
        r->cap_observers = cap;
    }
    size_t lr = strlen(role), ln = strlen(for_node->name);
    char *w = bpcc_arena_alloc_uninit(&r->arena, lr + 4 + ln + 1, 1); /* "<role> of <node>" */
    if (!w) return bpcc_diag_nomem(p->d);
    memcpy(w, role, lr);
    memcpy(w + lr, " of ", 4);
    memcpy(w + lr + 4, for_node->name, ln + 1);
    r->observers[r->n_observers++] = (struct prep_observer){*out, arg, for_node, (*out)->target, *o, w};
    return BPCC_OK;
}

/* The users of `from` other than `keep` now use `to` (FX's replace_input_with on each). */
static enum bpcc_status redirect_users(struct prep *p, struct bpcc_node *from, struct bpcc_node *to,
                                       const struct bpcc_node *keep)
{
    for (uint32_t i = 0; i < from->n_users;) {
        struct bpcc_node *u = from->users[i].node;
        if (u == keep) {
            i++;
            continue;
        }
        enum bpcc_status s = bpcc_node_replace_input(u, from, to, p->d);
        if (s) return s;
    }
    return BPCC_OK;
}

static bool is_reuse_input(const struct qconfig *qc)
{
    return qc && qc->activation.cls == OC_REUSE_INPUT && qc->weight.cls == OC_NOOP;
}

static bool do_not_observe(uint8_t t) { return t == TD_PY_INT || t == TD_PY_FLOAT || t == BPCC_DTYPE_BOOL || t == TD_NOTENSOR; }

/* get_arg_target_dtype_as_output; a stub's observer gives its own dtype */
static uint8_t arg_output_dtype(struct prep *p, const struct bpcc_node *arg)
{
    if (arg->id >= p->stub_lo && arg->id - p->stub_lo < p->n_stubs) return p->stub_dtype[arg->id - p->stub_lo];
    if (observer_class(arg) >= 0) {
        const struct bpcc_node *o = arg_node(arg, 0);
        return o && pn(p, o) ? pn(p, o)->out : TD_ABSENT;
    }
    const struct prep_node *x = pn(p, arg);
    return x ? x->out : TD_ABSENT;
}

static bool non_quantizable_weight_op(const struct bpcc_node *n)
{
    return n->kind == BPCC_NODE_CALL_FUNCTION &&
           (!strcmp(n->target, "torch.nn.functional.layer_norm") || !strcmp(n->target, "torch.nn.functional.group_norm") ||
            !strcmp(n->target, "torch.nn.functional.instance_norm"));
}

struct input_ctx {
    struct prep *p;
    struct bpcc_node *node;
    const struct prep_node *x;
    const struct qconfig *qc;
    const struct bpcc_node *first_arg; /* node.args[0] before any change */
};

/* maybe_insert_input_observer_for_arg_or_kwarg for one node reference, changed in place */
static enum bpcc_status input_ref(struct input_ctx *c, struct bpcc_value *ref)
{
    struct prep *p = c->p;
    struct bpcc_node *arg = ref->u.node;
    unsigned kind = arg_kind(p, c->node, arg);
    bool weight = kind == BPCC_ARG_WEIGHT;
    const struct observer_spec *ctr = weight ? &c->qc->weight : &c->qc->activation;
    uint8_t out_dt = arg_output_dtype(p, arg);
    uint8_t in_dt = kind == BPCC_ARG_ACTIVATION ? c->x->in
                    : weight ? (non_quantizable_weight_op(c->node) ? TD_NOTENSOR : c->x->weight)
                             : c->x->bias;
    bool dyn = kind == BPCC_ARG_ACTIVATION && tdt_is_dtype(c->x->in) && c->x->in_dynamic;
    bool needs = (!dyn && out_dt != in_dt && in_dt != BPCC_DTYPE_F32 && in_dt != TD_NOTENSOR && in_dt != TD_ABSENT &&
                  !do_not_observe(out_dt) && !is_reuse_input(c->qc)) ||
                 (dyn && arg == c->first_arg);
    if (!needs) return BPCC_OK;
    struct bpcc_node *obs = NULL;
    /* an observer of the same class and of the wanted dtype already on this value is reused */
    for (uint32_t i = 0; i < arg->n_users && !obs; i++) {
        struct bpcc_node *u = arg->users[i].node;
        int cls = observer_class(u);
        if (cls == (int)ctr->cls && tdt_is_dtype(in_dt) && observer_dtype(u) == (enum bpcc_dtype)in_dt) obs = u;
    }
    if (!obs) {
        enum bpcc_status s = insert_observer(p, arg, ctr, weight ? "weight input" : "input", c->node, &obs);
        if (s) return s;
    }
    if (obs == arg) return BPCC_OK;
    return bpcc_node_set_ref(c->node, ref, obs) ? bpcc_diag_nomem(p->d) : BPCC_OK;
}

static enum bpcc_status input_value(struct input_ctx *c, struct bpcc_value *v)
{
    if (v->kind == BPCC_VAL_NODE) return input_ref(c, v);
    if (v->kind == BPCC_VAL_LIST || v->kind == BPCC_VAL_TUPLE)
        for (uint32_t i = 0; i < v->n; i++) {
            enum bpcc_status s = input_value(c, &v->u.seq.items[i]);
            if (s) return s;
        }
    return BPCC_OK;
}

static enum bpcc_status insert_input_observers(struct prep *p, struct bpcc_node *n, const struct prep_node *x,
                                               const struct qconfig *qc)
{
    struct input_ctx c = {p, n, x, qc, arg_node(n, 0)};
    enum bpcc_status s = input_value(&c, &n->args);
    for (uint32_t i = 0; !s && n->kwargs && i < n->kwargs->n; i++) s = input_value(&c, &n->kwargs->u.seq.items[i]);
    return s;
}

static bool activation_statically_quantized(const struct qconfig *qc)
{
    enum bpcc_dtype a = qc->activation.dtype;
    bool dynamic = qc->activation.cls == OC_PLACEHOLDER &&
                   (qc->activation.compute_dtype == BPCC_DTYPE_QUINT8 || qc->activation.compute_dtype == BPCC_DTYPE_QINT8 ||
                    qc->activation.compute_dtype == BPCC_DTYPE_F16);
    return (a == BPCC_DTYPE_QUINT8 || a == BPCC_DTYPE_QINT8 || a == BPCC_DTYPE_F16) && !dynamic;
}

/* maybe_make_input_output_share_observers: the output observer of `n` (its one user), and the
** observers of its inputs, become one observer: the one found first up the first argument. */
static enum bpcc_status share_observers(struct prep *p, struct bpcc_node *n, bool *shared)
{
    *shared = false;
    const struct bpcc_value *first = NULL;
    for (uint32_t i = 0; i < n->args.n && !first; i++) {
        const struct bpcc_value *a = &n->args.u.seq.items[i];
        if (a->kind == BPCC_VAL_NODE || a->kind == BPCC_VAL_LIST || a->kind == BPCC_VAL_TUPLE) first = a;
    }
    if (!first) return BPCC_OK;
    const struct bpcc_value *fa = first;
    if (first->kind != BPCC_VAL_NODE) {
        if (!first->n) return BPCC_OK;
        fa = &first->u.seq.items[0];
    }
    if (fa->kind != BPCC_VAL_NODE) return BPCC_OK;
    struct bpcc_node *up = fa->u.node;
    for (uint32_t guard = 0; observer_class(up) < 0; guard++) {
        if (up->kind == BPCC_NODE_PLACEHOLDER || guard > 10000) return BPCC_OK;
        struct bpcc_node *next = NULL;
        bool last_is_node = false;
        for (uint32_t i = 0; i < up->args.n; i++) {
            last_is_node = up->args.u.seq.items[i].kind == BPCC_VAL_NODE;
            if (last_is_node) {
                next = up->args.u.seq.items[i].u.node;
                break;
            }
        }
        if (!next || !last_is_node) return BPCC_OK;
        up = next;
    }
    const char *use = up->target;
    if (first->kind != BPCC_VAL_NODE) {
        for (uint32_t i = 1; i < first->n; i++) {
            const struct bpcc_value *e = &first->u.seq.items[i];
            if (e->kind != BPCC_VAL_NODE) return BPCC_OK; /* PyTorch fails on it (AttributeError) */
            struct bpcc_node *in = e->u.node;
            for (uint32_t guard = 0; observer_class(in) < 0; guard++) {
                if (!in->args.n || guard > 10000) return BPCC_OK; /* the earlier inputs stay shared, as in PyTorch */
                if (in->args.u.seq.items[0].kind != BPCC_VAL_NODE) return BPCC_OK;
                in = in->args.u.seq.items[0].u.node;
            }
            enum bpcc_status s = bpcc_node_set_target(in, use, p->d);
            if (s) return s;
        }
    }
    for (uint32_t i = 0; i < n->n_users; i++) {
        enum bpcc_status s = bpcc_node_set_target(n->users[i].node, use, p->d);
        if (s) return s;
    }
    *shared = true;
    return BPCC_OK;
}

/* the FixedQParamsObserver a fixed-range op's config names for its output (1.13: overwrite_output_observer) */
static void fixed_observer(const struct fixed_qparams *f, struct observer_spec *o)
{
    *o = (struct observer_spec){.cls = OC_FIXED_QPARAMS, .dtype = f->dtype, .qscheme = QS_PER_TENSOR_AFFINE,
                                .has_customized_qrange = true, .quant_min = f->quant_min, .quant_max = f->quant_max,
                                .scale = f->scale, .zero_point = f->zero_point};
}

static enum bpcc_status insert_output_observer(struct prep *p, struct bpcc_node *n, const struct prep_node *x,
                                               const struct prep_match *pm, const struct qconfig *qc)
{
    uint8_t dt = x->out;
    if (dt == BPCC_DTYPE_F32 || do_not_observe(dt) || dt == TD_ABSENT || !activation_statically_quantized(qc))
        return BPCC_OK;
    /* a value whose every consumer is a stub's observer of the same dtype is observed already */
    bool stubbed = n->n_users > 0;
    for (uint32_t i = 0; i < n->n_users && stubbed; i++) {
        const struct bpcc_node *u = n->users[i].node;
        stubbed = u->id >= p->stub_lo && u->id - p->stub_lo < p->n_stubs && p->stub_dtype[u->id - p->stub_lo] == dt;
    }
    if (stubbed) return BPCC_OK;
    struct observer_spec fixed;
    const struct observer_spec *ctr = &qc->activation;
    if ((qc->activation.dtype == BPCC_DTYPE_QUINT8) && pm->entry->fixed.set) {
        fixed_observer(&pm->entry->fixed, &fixed);
        ctr = &fixed;
    }
    struct bpcc_node *obs;
    enum bpcc_status s = insert_observer(p, n, ctr, "output", n, &obs);
    if (!s) s = redirect_users(p, n, obs, obs);
    if (s) return s;
    /* is_observer_in_same_graph: a quint8 output of an op on a graph input is observed apart */
    const struct bpcc_node *a0 = arg_node(n, 0);
    bool same_graph = !(dt == BPCC_DTYPE_QUINT8 && a0 && a0->kind == BPCC_NODE_PLACEHOLDER);
    if ((pm->obs == OBS_SHARE && same_graph) || is_reuse_input(qc)) {
        bool shared;
        s = share_observers(p, n, &shared);
        if (!s && !shared) {
            /* remove_output_observer */
            s = bpcc_node_replace_all_uses(obs, n, NULL, p->d);
            if (!s) s = bpcc_node_erase(obs, p->d);
            if (!s && p->report) p->r->n_observers--; /* the last one recorded is this observer */
        }
    }
    return s;
}

/* }================================================ */

/* {==================== Paddle-style stubs ==================== */

static const char stub_type[] = "paddle.nn.quant.Stub";

/* 1 for a Paddle stub or an eager-mode QuantStub (an observation point), 2 for a DeQuantStub
** (an identity: its output is float), 0 otherwise */
static int stub_kind_of_type(const char *type)
{
    /* asked of every call_module node several times: most types do not end in "Stub" */
    size_t n = strlen(type);
    if (n < 4 || memcmp(type + n - 4, "Stub", 4)) return 0;
    if (!strcmp(type, stub_type) || !strcmp(type, "torch.ao.quantization.QuantStub") ||
        !strcmp(type, "torch.quantization.QuantStub"))
        return 1;
    if (!strcmp(type, "torch.ao.quantization.DeQuantStub") || !strcmp(type, "torch.quantization.DeQuantStub")) return 2;
    return 0;
}

static int stub_kind(const struct bpcc_node *n)
{
    if (n->kind != BPCC_NODE_CALL_MODULE) return 0;
    const char *type = bpcc_node_module_type(n);
    return type ? stub_kind_of_type(type) : 0;
}

static bool is_stub(const struct bpcc_node *n) { return stub_kind(n) != 0; }

/* paddle.nn.quant.Stub -> QuanterStub: each call of a stub module becomes an observer of its
** input with the stub's own `observer` spec, else its qconfig's activation observer; a stub with
** neither is an identity and goes away. Consumers take the stub's observation as their input's. */
static enum bpcc_status replace_stubs(struct prep *p)
{
    struct bpcc_graph *g = p->g;
    struct bpcc_prepare_report *r = p->r;
    uint32_t n = 0;
    for (uint32_t k = 0; k < r->n_nodes; k++) n += is_stub(r->nodes[k].node);
    if (!n) return BPCC_OK;
    p->stub_dtype = bpcc_malloc(n);
    if (!p->stub_dtype) return bpcc_diag_nomem(p->d);
    p->stub_lo = g->next_id;
    for (uint32_t k = 0; k < r->n_nodes; k++) {
        struct prep_node *x = &r->nodes[k];
        struct bpcc_node *node = x->node;
        if (!is_stub(node)) continue;
        const struct bpcc_module *m = bpcc_node_module(node);
        struct bpcc_node *in = arg_node(node, 0);
        if (node->args.n != 1 || !in || node->kwargs)
            return bpcc_diag_error(p->d, BPCC_ERR_GRAPH, g->source_file, node->src_line, node->src_col,
                                   "stub '%s' (%s) takes exactly one tensor argument", node->name, stub_type);
        const struct bpcc_value *attr = stub_kind(node) == 1 ? bpcc_module_attr(m, "observer") : NULL;
        struct observer_spec own;
        const struct observer_spec *spec = NULL;
        const char *role = "stub (the qconfig's activation)";
        if (stub_kind(node) == 2) {
            /* DeQuantStub: the value leaves quantization; it goes away */
        } else if (attr && attr->kind != BPCC_VAL_NONE) {
            enum bpcc_status s = bpcc_observer_spec_from_value(attr, g->source_file, m->src_line, m->src_col, &g->intern,
                                                               &own, p->d);
            if (s) return s;
            spec = &own;
            role = "stub (its own observer spec)";
        } else if (p->qc[node->id]) {
            spec = &p->qc[node->id]->activation;
        }
        x->status = PS_STUB;
        struct bpcc_node *obs = in;
        if (spec) {
            enum bpcc_status s = insert_observer(p, in, spec, role, node, &obs);
            if (s) return s;
            BPCC_ASSERT(obs->id == p->stub_lo + p->n_stubs);
            p->stub_dtype[p->n_stubs++] = (uint8_t)spec->dtype;
        }
        enum bpcc_status s = bpcc_node_replace_all_uses(node, obs, NULL, p->d);
        if (!s) s = bpcc_node_erase(node, p->d);
        if (s) return s;
    }
    return BPCC_OK;
}

/* maybe_insert_observers_before_graph_output: with a quantized output, every value the output
** returns that is not quint8 yet gets its qconfig's activation observer; but a value recorded as
** integers or bools (an argmax, a mask), which PyTorch observes too and then fails on (its
** histogram observer on int64; "Quantize only works on Float Tensor" in its converted model),
** stays as it is, as elsewhere (recorded_not_float) */
static enum bpcc_status output_value(struct prep *p, struct bpcc_node *out, struct bpcc_value *v)
{
    if (v->kind == BPCC_VAL_LIST || v->kind == BPCC_VAL_TUPLE || v->kind == BPCC_VAL_DICT) {
        for (uint32_t i = 0; i < v->n; i++) {
            enum bpcc_status s = output_value(p, out, &v->u.seq.items[i]);
            if (s) return s;
        }
        return BPCC_OK;
    }
    if (v->kind != BPCC_VAL_NODE) return BPCC_OK;
    struct bpcc_node *arg = v->u.node;
    if (arg_output_dtype(p, arg) == BPCC_DTYPE_QUINT8 || recorded_not_float(arg)) return BPCC_OK;
    const struct qconfig *qc = is_original(p, arg) ? p->qc[arg->id] : NULL;
    if (!qc)
        return bpcc_diag_error(p->d, BPCC_ERR_CONFIG, p->g->source_file, out->src_line, out->src_col,
                               "the output is to be quantized, but '%s' has no qconfig to observe it with (PyTorch: "
                               "\"Quantizing the output node without a qconfig is not supported\")", arg->name);
    struct bpcc_node *obs;
    enum bpcc_status s = insert_observer(p, arg, &qc->activation, "graph output", out, &obs);
    if (s) return s;
    return bpcc_node_set_ref(out, v, obs) ? bpcc_diag_nomem(p->d) : BPCC_OK;
}

/* }================================================ */

/* {==================== checks that refuse a configuration ==================== */

/* _FIXED_QPARAMS_OP_TO_OBSERVER: 0 none, 1 range [0, 1], 2 range [-1, 1] */
static int fixed_qparams_op(const struct bpcc_node *n, const char *op)
{
    if (!op) return 0;
    static const char *const r01[] = {"torch.nn.Hardsigmoid", "torch.nn.functional.hardsigmoid", "hardsigmoid", "hardsigmoid_",
                                      "torch.nn.Sigmoid", "torch.sigmoid", "sigmoid", "sigmoid_", "torch.nn.Softmax", NULL};
    static const char *const r11[] = {"torch.nn.Tanh", "torch.tanh", "tanh", "tanh_", NULL};
    /* 1.13 looks at call_function and call_module only: the method strings never match */
    if (n->kind == BPCC_NODE_CALL_METHOD) return 0;
    for (int i = 0; r01[i]; i++)
        if (!strcmp(op, r01[i])) return 1;
    for (int i = 0; r11[i]; i++)
        if (!strcmp(op, r11[i])) return 2;
    return 0;
}

static bool spec_is_fixed(const struct observer_spec *o, double scale, int64_t zp)
{
    return o->cls == OC_FIXED_QPARAMS && o->scale == scale && o->zero_point == zp && o->dtype == BPCC_DTYPE_QUINT8 &&
           o->quant_min == 0 && o->quant_max == 255 && o->qscheme == QS_PER_TENSOR_AFFINE;
}

static bool spec_is_fp16_placeholder(const struct observer_spec *o)
{
    return o->cls == OC_PLACEHOLDER && o->dtype == BPCC_DTYPE_F16 &&
           (o->compute_dtype == BPCC_DTYPE_NONE || o->compute_dtype == BPCC_DTYPE_F16) && !*o->custom_op_name;
}

/* where node k's qconfig comes from, as a note after an error about it */
static void qconfig_origin_note(struct prep *p, uint32_t k)
{
    const struct bpcc_node_qconfig *nq = p->r->nodes[k].qc;
    const char *mf = p->r->mapping->file ? p->r->mapping->file : p->r->mapping->name;
    if (nq && nq->rule)
        bpcc_diag_note(p->d, 0, 0, "the qconfig comes from the %s rule at %s:%u", bpcc_qc_origin_name(nq->origin),
                       mf ? mf : "the mapping", nq->rule->line);
    else
        bpcc_diag_note(p->d, 0, 0, "the qconfig is the global one of %s", mf ? mf : "the mapping");
}

static bool is_conv_transpose(const char *type)
{
    return type && (!strcmp(type, "torch.nn.ConvTranspose1d") || !strcmp(type, "torch.nn.ConvTranspose2d") ||
                    !strcmp(type, "torch.nn.ConvTranspose3d"));
}

/* The qconfigs prepare_fx refuses before it inserts anything; all offenders are reported.
** - _validate_fixed_qparams_qconfigs: a fixed-range op's qconfig must observe with its fixed
**   qparams (or float16 placeholders).
** - assert_valid_qconfig: a ConvTranspose module may not have a per-channel weight observer (its
**   weight is [in, out / groups, ...], and the observers quantize along axis 0, the input channels).
**   A fake quantize wrapping one is not refused, as in PyTorch: it checks the observer classes. */
static enum bpcc_status validate_qconfigs(struct prep *p)
{
    enum bpcc_status worst = BPCC_OK;
    for (uint32_t k = 0; k < p->r->n_nodes; k++) {
        const struct bpcc_node *n = p->r->nodes[k].node;
        if (n->kind != BPCC_NODE_CALL_FUNCTION && n->kind != BPCC_NODE_CALL_MODULE) continue;
        const struct qconfig *qc = p->qc[n->id];
        if (!qc) continue;
        const char *op = bpcc_node_op(n);
        const struct observer_spec *w = &qc->weight;
        if (n->kind == BPCC_NODE_CALL_MODULE && is_conv_transpose(op) && w->fake_quantize == FQ_NONE &&
            (w->cls == OC_PER_CHANNEL_MINMAX || w->cls == OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX)) {
            worst = bpcc_diag_error(p->d, BPCC_ERR_CONFIG, p->g->source_file, n->src_line, n->src_col,
                                    "node '%s' (%s): its qconfig observes the weight per channel (%s), which "
                                    "PyTorch does not support for ConvTranspose; give this module type a per-tensor "
                                    "weight observer (MinMaxObserver {dtype: qint8, qscheme: per_tensor_symmetric}, "
                                    "as get_default_qconfig_mapping does) or qconfig: null",
                                    n->name, op, bpcc_obs_class_name(w->cls));
            qconfig_origin_note(p, k);
            continue;
        }
        int f = fixed_qparams_op(n, op);
        if (!f) continue;
        double scale = f == 1 ? 1.0 / 256.0 : 2.0 / 256.0;
        int64_t zp = f == 1 ? 0 : 128;
        if (spec_is_fixed(&qc->activation, scale, zp) || spec_is_fp16_placeholder(&qc->activation)) continue;
        worst = bpcc_diag_error(p->d, BPCC_ERR_CONFIG, p->g->source_file, n->src_line, n->src_col,
                                "node '%s' (%s) is a fixed-qparams op, but its qconfig observes it with %s; use "
                                "FixedQParamsObserver {scale: %.17g, zero_point: %lld, dtype: quint8, quant_min: 0, "
                                "quant_max: 255} as get_default_qconfig_mapping does, or qconfig: null",
                                n->name, op, bpcc_obs_class_name(qc->activation.cls), scale, (long long)zp);
        qconfig_origin_note(p, k);
    }
    return worst;
}

/* }================================================ */

/* {==================== what convert swaps ==================== */

/* PyTorch's observed_node_names, as convert_fx reads it (convert_weighted_module: a weighted
** module becomes its reference module only when its node is in the set): every node of a match
** that some node of it went on to observe (insert_observers_for_model adds the whole matched
** pattern when one of its nodes is neither skipped nor refused by the backend; pm->observed). Only
** its call_module nodes are kept, the ones convert reads, in graph order, as the root module's
** attribute `_observed_node_names`; it travels with the model to convert (bpcc convert reads and
** drops it) and to PyTorch (bpcc_torch.load). Before this record, convert took a module as observed
** when an observer sat on an input or on the output, which a module whose pattern the backend
** refused can have too (its input observed for the producer, its output's dtype propagated to int
** by a `size` that reads it). */
static enum bpcc_status record_observed(struct prep *p, struct bpcc_module *root)
{
    struct bpcc_prepare_report *r = p->r;
    uint8_t *seen = bpcc_malloc((size_t)p->n_ids + 1);
    if (!seen) return bpcc_diag_nomem(p->d);
    memset(seen, 0, (size_t)p->n_ids + 1);
    struct bpcc_value list = {.kind = BPCC_VAL_LIST};
    for (uint32_t i = 0; i < r->n_matches; i++) {
        const struct prep_match *pm = &r->matches[i];
        for (uint32_t j = 0; pm->observed && j < pm->n_nodes; j++) {
            const struct bpcc_node *n = pm->nodes[j];
            if (n->kind == BPCC_NODE_CALL_MODULE && observer_class(n) < 0 && !seen[n->id]) {
                seen[n->id] = 1;
                list.n++;
            }
        }
    }
    enum bpcc_status s = BPCC_OK;
    list.u.seq.items = bpcc_malloc((list.n ? list.n : 1) * sizeof *list.u.seq.items);
    if (!list.u.seq.items) s = bpcc_diag_nomem(p->d);
    if (!s) {
        uint32_t k = 0;
        for (const struct bpcc_node *n = p->g->first; n; n = n->next)
            if (is_original(p, n) && seen[n->id]) list.u.seq.items[k++] = (struct bpcc_value){.kind = BPCC_VAL_STR, .u.s = n->name};
        s = bpcc_module_set_attr(root, BPCC_OBSERVED_NODE_NAMES, &list, p->d);
    }
    bpcc_xfree(list.u.seq.items);
    bpcc_xfree(seen);
    return s;
}

/* The graph inputs and the output taken as quantized (PrepareCustomConfig's indexes), which
** convert_fx dequantizes and leaves quantized: recorded only when there are some */
static enum bpcc_status record_quantized_io(struct prep *p, struct bpcc_module *root)
{
    enum bpcc_status s = BPCC_OK;
    if (p->o && p->o->n_input_quantized) {
        uint32_t n = p->o->n_input_quantized;
        struct bpcc_value v = {.kind = BPCC_VAL_LIST, .n = n, .u.seq.items = bpcc_malloc(n * sizeof(struct bpcc_value))};
        if (!v.u.seq.items) return bpcc_diag_nomem(p->d);
        for (uint32_t i = 0; i < n; i++) v.u.seq.items[i] = bpcc_value_int(p->o->input_quantized[i]);
        s = bpcc_module_set_attr(root, BPCC_INPUT_QUANTIZED_IDXS, &v, p->d);
        bpcc_xfree(v.u.seq.items);
    }
    if (!s && p->o && p->o->output_quantized) {
        struct bpcc_value zero = bpcc_value_int(0), v = {.kind = BPCC_VAL_LIST, .n = 1, .u.seq.items = &zero};
        s = bpcc_module_set_attr(root, BPCC_OUTPUT_QUANTIZED_IDXS, &v, p->d);
    }
    return s;
}

uint32_t bpcc_quantized_input_past(const struct bpcc_graph *g, const uint32_t *pos, uint32_t n, uint32_t *n_inputs)
{
    *n_inputs = 0;
    for (const struct bpcc_node *p = n ? g->first : NULL; p; p = p->next) *n_inputs += p->kind == BPCC_NODE_PLACEHOLDER;
    for (uint32_t i = 0; i < n; i++)
        if (pos[i] >= *n_inputs) return i;
    return UINT32_MAX;
}

/* What convert reads of prepare, on the root module (added when the model has none) */
static enum bpcc_status record_for_convert(struct prep *p)
{
    struct bpcc_module *root = bpcc_graph_find_module(p->g, "");
    enum bpcc_status s = root ? BPCC_OK : bpcc_graph_add_module(p->g, "", "torch.fx.GraphModule", &root, p->d);
    if (!s) s = record_observed(p, root);
    if (!s) s = record_quantized_io(p, root);
    return s;
}

/* }================================================ */

/* {==================== the pass ==================== */

static enum bpcc_status run(struct prep *p, const struct bpcc_prepare_options *o)
{
    struct bpcc_graph *g = p->g;
    struct bpcc_prepare_report *r = p->r;
    enum bpcc_status s = validate_qconfigs(p);
    if (!s) s = replace_stubs(p);
    if (s) return s;
    s = find_matches(p);
    if (s) return s;
    for (uint32_t k = 0; k < r->n_nodes; k++)
        if (r->nodes[k].status != PS_STUB) p->notensor[r->nodes[k].node->id] = compute_no_tensors(p, r->nodes[k].node);
    for (uint32_t i = 0; i < r->n_matches; i++) {
        /* num_tensor_args_to_observation_type: count the root's tensor arguments */
        struct prep_match *pm = &r->matches[i];
        const struct pattern_entry *e = pm->entry;
        if (!e->has_num_tensor_args[0] && !e->has_num_tensor_args[1] && !e->has_num_tensor_args[2]) continue;
        uint32_t nt = 0;
        for (uint32_t a = 0; a < pm->root->args.n; a++) {
            const struct bpcc_value *v = &pm->root->args.u.seq.items[a];
            if (v->kind == BPCC_VAL_NODE && !node_no_tensors(p, v->u.node)) nt++;
        }
        if (nt > 2 || !e->has_num_tensor_args[nt]) {
            const struct bpcc_node *n = pm->root;
            s = bpcc_diag_error(p->d, BPCC_ERR_CONFIG, g->source_file, n->src_line, n->src_col,
                                "node '%s' has %u tensor arguments, but its pattern's num_tensor_args_to_observation_type "
                                "has no entry for %u", n->name, nt, nt);
            bpcc_diag_note(p->d, 0, 0, "the pattern is defined at %s:%u", e->file, e->line);
            return s;
        }
        pm->obs = e->num_tensor_args[nt];
    }
    for (uint32_t k = 0; k < r->n_nodes; k++) {
        struct prep_node *x = &r->nodes[k];
        if (x->status == PS_STUB) continue;
        x->match = p->owner[x->node->id];
        target_dtypes(p, x->node, x);
        x->has_weight = has_weight(p, x->node);
    }
    propagate_known_dtypes(p);
    enum bpcc_status strict_fail = BPCC_OK;

    for (uint32_t k = 0; k < r->n_nodes; k++) {
        struct prep_node *x = &r->nodes[k];
        struct bpcc_node *n = x->node;
        if (x->status == PS_STUB) continue;
        if (n->kind == BPCC_NODE_PLACEHOLDER || n->kind == BPCC_NODE_GET_ATTR || n->kind == BPCC_NODE_OUTPUT) {
            x->status = PS_NOT_APPLICABLE; /* graph inputs are observed outside the graph, if quantized */
            if (n->kind == BPCC_NODE_OUTPUT && x->out == BPCC_DTYPE_QUINT8) {
                s = output_value(p, n, &n->args);
                if (s) return s;
            }
            continue;
        }
        struct prep_match *pm = x->match >= 0 ? &r->matches[x->match] : NULL;
        const struct qconfig *qc = pm ? p->qc[n->id] : NULL;
        if (!p->qc[n->id]) {
            x->status = PS_NO_QCONFIG;
            continue;
        }
        if (is_getitem(n)) {
            x->status = PS_GETITEM;
            continue;
        }
        if (!pm) {
            x->status = PS_NO_PATTERN;
            continue;
        }
        if (!match_supported(p, pm, qc)) {
            x->status = PS_REJECTED;
            char *w = bpcc_buf_take(&p->why, NULL);
            if (!w) return bpcc_diag_nomem(p->d);
            x->why = bpcc_arena_strndup(&r->arena, w, strlen(w));
            bpcc_xfree(w);
            if (!x->why) return bpcc_diag_nomem(p->d);
            if (n == pm->anchor) {
                pm->supported = false;
                pm->why = x->why;
            }
            /* --strict is about qconfigs the backend rejects; a value PyTorch takes as a non-tensor
            ** (dtype propagation, sizes) is explained but not refused */
            if (o && o->strict && !x->dtype_from && !p->notensor[n->id])
                strict_fail = bpcc_diag_error(p->d, BPCC_ERR_CONFIG, g->source_file, n->src_line, n->src_col,
                                              "node '%s' would stay float (--strict): %s", n->name, x->why);
            continue;
        }
        x->status = p->notensor[n->id] ? PS_NO_TENSORS : !input_output_observed(pm->entry) ? PS_NOT_OBSERVED
                                                                                           : PS_QUANTIZED;
        pm->observed = true;
        if (n == pm->root) {
            s = insert_input_observers(p, n, x, qc);
            if (s) return s;
        }
        if (n == pm->anchor) {
            s = insert_output_observer(p, n, x, pm, qc);
            if (s) return s;
        }
    }
    if (strict_fail) return strict_fail;
    s = record_for_convert(p);
    if (s) return s;
    /* observer modules left without a node (shared away, removed) are dropped */
    for (uint32_t i = 0; i < g->n_modules; i++) g->modules[i]->mark = 0;
    for (struct bpcc_node *n = g->first; n; n = n->next)
        if (n->kind == BPCC_NODE_CALL_MODULE) {
            struct bpcc_module *m = bpcc_node_module(n);
            if (m) m->mark = 1;
        }
    for (uint32_t i = 0; i < g->n_modules; i++) { /* unlinked one by one, the table compacted once */
        struct bpcc_module *m = g->modules[i];
        if (!m->dead && !m->mark && (stub_kind_of_type(m->type) || (!strncmp(m->name, "activation_post_process_", 24) &&
                                                                     !strncmp(m->type, obs_type_prefix, strlen(obs_type_prefix)))))
            bpcc_graph_unlink_module(g, m);
    }
    bpcc_graph_compact_modules(g);
    return BPCC_OK;
}

static enum bpcc_status prepare_in_place(struct bpcc_graph *g, const struct bpcc_config *c,
                                         const struct bpcc_qconfig_mapping *m, const struct bpcc_prepare_options *o,
                                         struct bpcc_prepare_report **out, struct bpcc_diag *d)
{
    if (out) *out = NULL;
    struct bpcc_prepare_report *r = bpcc_malloc(sizeof *r);
    if (!r) return bpcc_diag_nomem(d);
    memset(r, 0, sizeof *r);
    bpcc_arena_init(&r->arena);
    r->graph = g;
    r->config = c;
    r->mapping = m;
    struct prep p = {.g = g, .c = c, .r = r, .d = d, .n_ids = g->next_id, .o = o,
                     .report = out != NULL};
    bpcc_buf_init(&p.why);
    enum bpcc_status s = bpcc_qconfig_assign(g, m, &r->assignment, d);
    if (!s) {
        size_t n_alloc = (size_t)p.n_ids + 1;
        p.owner = bpcc_malloc(n_alloc * sizeof *p.owner);
        p.qc = bpcc_malloc(n_alloc * sizeof *p.qc);
        p.pnode = bpcc_malloc(n_alloc * sizeof *p.pnode);
        p.notensor = bpcc_malloc(n_alloc);
        r->nodes = BPCC_ARENA_NEWN(&r->arena, struct prep_node, g->n_nodes ? g->n_nodes : 1);
        if (!p.owner || !p.qc || !p.pnode || !p.notensor || !r->nodes) s = bpcc_diag_nomem(d);
    }
    if (!s) {
        for (uint32_t i = 0; i <= p.n_ids; i++) {
            p.owner[i] = p.pnode[i] = -1;
            p.qc[i] = NULL;
            p.notensor[i] = 0;
        }
        uint32_t n_assigned = bpcc_qconfig_assignment_count(r->assignment);
        for (uint32_t i = 0; i < n_assigned; i++) {
            const struct bpcc_node_qconfig *nq = bpcc_qconfig_assignment_at(r->assignment, i);
            p.qc[nq->node->id] = nq->qconfig;
            r->nodes[r->n_nodes] = (struct prep_node){.node = (struct bpcc_node *)nq->node, .match = -1, .qc = nq};
            p.pnode[nq->node->id] = (int32_t)r->n_nodes++;
        }
        s = run(&p, o);
    }
    bpcc_xfree(p.owner);
    bpcc_xfree(p.qc);
    bpcc_xfree(p.pnode);
    bpcc_xfree(p.notensor);
    bpcc_xfree(p.stub_dtype);
    bpcc_buf_release(&p.why);
    if (s || !out) {
        bpcc_prepare_report_free(r);
        return s;
    }
    *out = r;
    return BPCC_OK;
}

void bpcc_prepare_report_free(struct bpcc_prepare_report *r)
{
    if (!r) return;
    bpcc_qconfig_assignment_free(r->assignment);
    bpcc_xfree(r->matches);
    bpcc_xfree(r->observers);
    bpcc_arena_release(&r->arena);
    bpcc_xfree(r);
}

/* }================================================ */

/* an observer's type, or a fake quantize's */
static bool observer_type(const char *type) { return bpcc_obs_type_class(type) >= 0 || bpcc_obs_is_fake_quant_type(type); }

/* The first node of a prepared model that calls an observer or a fake quantize (prepare_fx's or
** prepare_qat_fx's, or bpcc prepare's), NULL for a float model: preparing it again would observe
** the observers. The modules' types are looked at first, so that a float model costs a look at
** its few dozen types. */
static const struct bpcc_node *prepared_already(const struct bpcc_graph *g)
{
    bool any = bpcc_graph_any_module_type(g, observer_type);
    for (const struct bpcc_node *n = any ? g->first : NULL; n; n = n->next) {
        const char *type = n->kind == BPCC_NODE_CALL_MODULE ? bpcc_node_module_type(n) : NULL;
        if (type && observer_type(type)) return n;
    }
    return NULL;
}

/* the pass leaves g as it was when it fails */
enum bpcc_status bpcc_prepare(struct bpcc_graph *g, const struct bpcc_config *c, const struct bpcc_qconfig_mapping *m,
                              const struct bpcc_prepare_options *o, struct bpcc_prepare_report **out,
                              struct bpcc_diag *d)
{
    if (out) *out = NULL;
    const struct bpcc_node *n = prepared_already(g);
    if (n) {
        const char *type = bpcc_node_module_type(n);
        bool fq = bpcc_obs_is_fake_quant_type(type);
        bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, n->src_line, n->src_col,
                        "node '%s' calls %s (%s): the model is prepared %s", n->name,
                        fq ? "a fake quantize" : "an observer", type, fq ? "for QAT already" : "already");
        bpcc_diag_note(d, 0, 0, fq ? "convert it as it is (bpcc convert); prepare and quantize take float models"
                                   : "calibrate it (bpcc calibrate) and convert it; prepare and quantize take float models");
        return BPCC_ERR_GRAPH;
    }
    /* a QAT mapping's activations are fake quantizes, which prepare_fx would insert; bpcc's prepare
    ** makes observers only, which would be another model */
    const struct observer_spec *fq = bpcc_qconfig_mapping_fake_quantize(m);
    if (fq) {
        bpcc_diag_error(d, BPCC_ERR_CONFIG, m->file, fq->line, fq->col,
                        "the qconfig mapping asks for fake quantizes (%s), which bpcc prepare does not make: QAT "
                        "prepare (prepare_qat_fx) is not supported", bpcc_fq_name(fq->fake_quantize));
        bpcc_diag_note(d, 0, 0, "prepare and train a QAT model in PyTorch, export it with the bridge, and give "
                                "bpcc convert the model and this mapping");
        return BPCC_ERR_CONFIG;
    }
    /* a quantized input position past the model's inputs is a mistake to name (counted from 1, say) */
    uint32_t n_inputs, past = o ? bpcc_quantized_input_past(g, o->input_quantized, o->n_input_quantized, &n_inputs)
                                : UINT32_MAX;
    if (past != UINT32_MAX) {
        bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, 0, 0, "quantized input %u named, and the model has %u input%s",
                        o->input_quantized[past], n_inputs, n_inputs == 1 ? "" : "s");
        bpcc_diag_note(d, 0, 0, "positions count the graph inputs (placeholders) from 0");
        return BPCC_ERR_GRAPH;
    }
    enum bpcc_status s = bpcc_graph_begin_pass(g, d);
    if (s) return s;
    /* the end may still fail the pass (a change its undo log found no memory for) */
    if ((s = bpcc_graph_end_pass(g, prepare_in_place(g, c, m, o, out, d), d)) && out) {
        bpcc_prepare_report_free(*out);
        *out = NULL;
    }
    return s;
}
