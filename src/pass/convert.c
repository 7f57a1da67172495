/*
** convert.c — convert_to_reference_fx on a calibrated model: every observer becomes
** quantize_per_tensor / quantize_per_channel (scale and zero point as root buffers named as
** PyTorch names them) / quantize_per_tensor_dynamic / to(float16), then dequantize; observers
** PyTorch drops are dropped; weighted modules (and the root inside fused modules) become the
** config's reference_quantized_module with the weight qparams their weight observer computes.
*/
#include "../calib/observer.h"
#include "pass.h"
#include "qat.h"

#include <stdio.h>

struct conv {
    struct bpcc_graph *g;
    const struct bpcc_config *c;
    struct bpcc_qconfig_assignment *qa;
    const struct qconfig **qc; /* node id -> qconfig (ids of the nodes before conversion) */
    uint8_t *in_map;           /* node id -> had an entry in the qconfig map */
    uint8_t *observed;         /* node id -> in prepare's record of observed modules; NULL without one */
    /* prepare's record of the graph inputs taken as quantized (placeholder positions) and the
    ** output's positions left quantized (PrepareCustomConfig's indexes), malloc'd; none: NULL, 0 */
    uint32_t *in_q, n_in_q, *out_q, n_out_q;
    uint32_t n_ids;
    struct bpcc_diag *d;
    uint32_t n_quantized, n_dropped, n_modules;
    struct bpcc_module *root;  /* the root module, once asked for */
    uint32_t n_observers_left; /* observers not converted yet: each adds at most two root buffers */
    bool qat;                  /* fake quantizes or QAT modules in the graph (bpcc_graph_has_qat) */
    /* the next numbers to try for the scale and zero point buffers per name stem (struct next_free
    ** in `scratch`, keyed by a copy there), so naming n buffers is not n^2 tries; one entry for both
    ** names, asked only when number 0 is taken (getattr_node) */
    struct bpcc_strmap prefixes;
    struct bpcc_arena scratch;
    struct obs_spec_memo specs; /* the observers' specs, read once per distinct attribute array */
    /* the last few weighted modules converted: what their attributes were (array and count), the
    ** weight qscheme and dtype they were given; a module whose attributes are the same array and
    ** is given the same ends with the same attributes, and shares theirs (at 100k nodes, converting
    ** a convolution allocated 548 -> 292 bytes) */
    struct weight_like {
        const struct bpcc_value *items;
        uint32_t n;
        enum bpcc_dtype wd;
        const char *qs;
        struct bpcc_module *m;
    } like[8];
    uint32_t next_like;
};

static const struct qconfig *qc_of(const struct conv *cv, const struct bpcc_node *n)
{
    return n->id < cv->n_ids ? cv->qc[n->id] : NULL;
}

/* has_none_qconfig: in the map and None there */
static bool none_qconfig(const struct conv *cv, const struct bpcc_node *n)
{
    return n->id < cv->n_ids && cv->in_map[n->id] && !cv->qc[n->id];
}

static bool is_obs_node(const struct conv *cv, const struct bpcc_node *n)
{
    if (n->kind != BPCC_NODE_CALL_MODULE) return false;
    const char *type = bpcc_node_module_type(n);
    return type && (bpcc_obs_type_class(type) >= 0 || (cv->qat && bpcc_obs_is_fake_quant_type(type)));
}

/* The qparams an activation observer gives convert (calculate_qparams), n values of each: bpcc
** calibrate stores them on the module (scale, zero_point), read where they are (ts, tz); from
** statistics alone (min_val, max_val: a model calibrated in PyTorch, or trained there, whose fake
** quantizes' observers hold them) they are computed as PyTorch's convert computes them (sc, zp,
** malloc'd: free with qp_release). A fake quantize's own scale and zero point are what its last
** training step used, not what calculate_qparams gives, and are not read. */
struct obs_qp {
    uint32_t n;
    const struct bpcc_tensor *ts, *tz;
    float *sc;
    double *zp;
};

static float qp_scale(const struct obs_qp *q, uint32_t i) { return q->sc ? q->sc[i] : ((const float *)q->ts->data)[i]; }

static int64_t qp_zero_point(const struct obs_qp *q, uint32_t i)
{
    if (q->zp) return (int64_t)q->zp[i];
    return q->tz->dtype == BPCC_DTYPE_I64 ? ((const int64_t *)q->tz->data)[i] : (int64_t)((const float *)q->tz->data)[i];
}

static void qp_release(struct obs_qp *q)
{
    bpcc_xfree(q->sc);
    bpcc_xfree(q->zp);
}

static enum bpcc_status observer_qparams(struct conv *cv, const struct bpcc_node *obs, const struct bpcc_module *m,
                                         const struct observer_spec *spec, struct obs_qp *q)
{
    memset(q, 0, sizeof *q);
    const struct bpcc_module *inner = cv->qat ? bpcc_obs_fake_quant_observer(m) : NULL;
    const struct bpcc_tensor *ts = bpcc_module_tensor(m, "scale"), *tz = bpcc_module_tensor(m, "zero_point");
    uint64_t k = ts ? bpcc_tensor_numel(ts) : 0;
    if (!inner && k >= 1 && k <= UINT32_MAX && tz && ts->data && tz->data && ts->dtype == BPCC_DTYPE_F32 &&
        (tz->dtype == BPCC_DTYPE_I64 || tz->dtype == BPCC_DTYPE_F32) && bpcc_tensor_numel(tz) == k) {
        q->n = (uint32_t)k;
        q->ts = ts;
        q->tz = tz;
        return BPCC_OK;
    }
    struct obs_state st;
    if (bpcc_obs_init(&st, spec)) return bpcc_diag_nomem(cv->d);
    char why[160];
    bool found = spec->cls == OC_FIXED_QPARAMS;
    enum bpcc_status s = found ? BPCC_OK : bpcc_obs_load(&st, inner ? inner : m, &found, why, sizeof why);
    if (!s && found) s = bpcc_obs_qparams(&st, &q->sc, &q->zp, &q->n);
    bpcc_obs_release(&st);
    if (s == BPCC_ERR_NOMEM) return bpcc_diag_nomem(cv->d);
    if (s) return bpcc_diag_error(cv->d, BPCC_ERR_GRAPH, cv->g->source_file, obs->src_line, obs->src_col,
                                  "observer '%s' (%s): %s", obs->name, (inner ? inner : m)->name, why);
    if (!q->n)
        return bpcc_diag_error(cv->d, BPCC_ERR_GRAPH, cv->g->source_file, obs->src_line, obs->src_col,
                               "observer '%s' has no qparams: calibrate the model first (bpcc calibrate)", obs->name);
    return BPCC_OK;
}

static struct bpcc_module *root_module(struct conv *cv)
{
    if (cv->root) return cv->root;
    struct bpcc_module *r = bpcc_graph_find_module(cv->g, "");
    if (!r && bpcc_graph_add_module(cv->g, "", "torch.fx.GraphModule", &r, cv->d)) return NULL;
    /* room for the buffers at once: growing by doubling would copy the array and rebuild its
    ** index some twenty times on a big graph (without the room, they grow as they come) */
    if (cv->n_observers_left < UINT32_MAX / 4) (void)bpcc_module_reserve_tensors(r, 2 * cv->n_observers_left);
    return cv->root = r;
}

struct next_free {
    uint32_t scale, zero_point;
};

/* The counters for buffer names <stem>_scale_<n> and <stem>_zero_point_<n>; NULL when out of memory */
static struct next_free *next_free(struct conv *cv, const char *stem, size_t len)
{
    uint32_t h = bpcc_str_hash(stem, len);
    struct bpcc_strmap_slot *e = bpcc_strmap_get(&cv->prefixes, stem, len, h);
    if (e) return e->value;
    const char *key = bpcc_arena_strndup(&cv->scratch, stem, len);
    struct next_free *next = key ? BPCC_ARENA_NEW(&cv->scratch, struct next_free) : NULL;
    return next && !bpcc_strmap_put(&cv->prefixes, key, len, h, next) ? next : NULL;
}

/* `name` interned in the graph (*str, with its slot for a node of that name); whether it is free
** for a root buffer: no tensor, attribute or module has it. Tensor names, attribute keys and module
** names are all interned in the graph: a name interned only now is free, and most are, so one
** probe of the table both answers and interns. false in *is_free and NULL when out of memory. */
static void **claim_name(struct conv *cv, struct bpcc_module *root, const char *name, size_t len, const char **str,
                         bool *is_free)
{
    bool added;
    void **slot = bpcc_intern_slot(&cv->g->intern, name, len, bpcc_str_hash(name, len), str, &added);
    const struct bpcc_module *m = slot ? bpcc_name_module(*slot) : NULL;
    *is_free = slot && (added || (!bpcc_module_tensor(root, *str) && !bpcc_module_attr(root, *str) && (!m || m->dead)));
    return slot;
}

/* create_getattr_from_value: a root buffer <stem><suffix><n> for the first free n (PyTorch's
** get_new_attr_name_with_prefix) and a get_attr node for it, before `before`, as the argument that
** refers to it in *out; with the graph's implicit qparams, the node's name only, in a BPCC_VAL_ATTR
** argument (bpcc_graph_set_implicit_qparams). Most stems are used once: n = 0 is tried first, and
** only when it is taken is the stem's counter looked up (a table that on a big graph is a cache miss
** a lookup). The name is free among the root's tensors, so the buffer is added without asking the
** root's index, and the node takes the name's slot unless a node has the name already or it is no
** node name (then it is numbered or mended as FX does). */
static enum bpcc_status getattr_node(struct conv *cv, const char *stem, size_t stem_len, bool zero_point,
                                     struct bpcc_tensor *t, struct bpcc_node *before, struct bpcc_value *out)
{
    struct bpcc_module *root = root_module(cv);
    if (!root) return BPCC_ERR_NOMEM;
    char name[300];
    size_t lb = bpcc_str_cat(name, sizeof name, 0, stem);
    lb = bpcc_str_cat(name, sizeof name, lb, zero_point ? "_zero_point_" : "_scale_");
    size_t len = bpcc_str_cat_i64(name, sizeof name, lb, 0);
    const char *str;
    bool is_free;
    void **slot = claim_name(cv, root, name, len, &str, &is_free);
    if (slot && !is_free) {
        struct next_free *nf = next_free(cv, stem, stem_len);
        if (!nf) return bpcc_diag_nomem(cv->d);
        uint32_t *next = zero_point ? &nf->zero_point : &nf->scale;
        /* names are only added meanwhile: below *next all are taken, and so is number 0 */
        for (uint32_t i = *next ? *next : 1;; i++) {
            len = bpcc_str_cat_i64(name, sizeof name, lb, i);
            if (!(slot = claim_name(cv, root, name, len, &str, &is_free)) || is_free) {
                *next = i + 1;
                break;
            }
        }
    }
    if (!slot || bpcc_module_add_tensor(root, str, BPCC_TENSOR_BUFFER, t)) return bpcc_diag_nomem(cv->d);
    /* a node has the name, or it is none: named as FX names */
    bool numbered = bpcc_name_node(*slot) || !bpcc_node_name_valid(str);
    if (cv->g->implicit_qparams) {
        const char *node_name;
        enum bpcc_status s = bpcc_graph_implicit_name(cv->g, str, numbered ? NULL : slot, &node_name, cv->d);
        if (!s) *out = (struct bpcc_value){.kind = BPCC_VAL_ATTR, .u.attr = {node_name, str}};
        return s;
    }
    struct bpcc_node *n;
    enum bpcc_status s = numbered ? bpcc_graph_create_node(cv->g, BPCC_NODE_GET_ATTR, str, str, NULL, NULL, &n, cv->d)
                                  : bpcc_graph_node_new_named(cv->g, BPCC_NODE_GET_ATTR, str, slot, str, NULL, NULL, &n, cv->d);
    if (!s) {
        bpcc_node_move_before(n, before);
        *out = bpcc_value_node(n);
    }
    return s;
}

/* get_module_path_and_prefix */
static const char *module_path(struct conv *cv, const struct bpcc_node *obs, const char **prefix)
{
    const struct bpcc_node *observed = obs->args.u.seq.items[0].u.node;
    bool input_only = observed->id < cv->n_ids && cv->in_map[observed->id] && !cv->qc[observed->id];
    const struct bpcc_node *at = observed;
    *prefix = "";
    if (input_only) {
        at = obs->n_users ? obs->users[0].node : NULL;
        for (uint32_t i = 0; i < obs->n_users; i++)
            if (obs->users[i].node->kind == BPCC_NODE_CALL_FUNCTION &&
                !strcmp(obs->users[i].node->target, "torch.nn.functional.linear")) {
                at = obs->users[i].node;
                break;
            }
        *prefix = "_input";
    }
    if (!at) return "";
    if (at->kind == BPCC_NODE_CALL_MODULE) return at->target; /* a module call's scope is the module */
    const char *type;
    const char *p = bpcc_node_scope(at, &type);
    return p ? p : "";
}

/* The quantize node q goes before the observer, which becomes q.dequantize() in place: PyTorch
** makes the dequantize node where the observer is, moves the observer's users onto it and erases
** the observer. The same graph, names and order, without a node made, the users' arguments
** rewritten or a node left dead. */
static enum bpcc_status quantized_in_place(struct conv *cv, struct bpcc_node *q, struct bpcc_node *obs)
{
    bpcc_node_move_before(q, obs);
    struct bpcc_value a1;
    if (bpcc_value_seq_new(cv->g, BPCC_VAL_TUPLE, 1, &a1)) return bpcc_diag_nomem(cv->d);
    a1.u.seq.items[0] = bpcc_value_node(q);
    enum bpcc_status s = bpcc_node_remake(obs, BPCC_NODE_CALL_METHOD, "dequantize", "dequantize", &a1, cv->d);
    if (!s) {
        cv->n_quantized++;
        obs->mark = 1; /* a quantize point's dequantize (eliminate_dead_code counts those it erases) */
    }
    return s;
}

/* Node.is_impure: placeholders, the output and the side-effectful functions of torch.fx
** (torch._assert, the profiler's record_function calls). A module call is pure: torch.fx asks the
** module's _is_impure, which no torch.nn module sets and the bridge does not export. */
static bool impure(const struct bpcc_node *n)
{
    if (n->kind == BPCC_NODE_PLACEHOLDER || n->kind == BPCC_NODE_OUTPUT) return true;
    if (n->kind != BPCC_NODE_CALL_FUNCTION) return false;
    static const char *const effects[] = {"torch._assert", "torch.ops.profiler._record_function_enter",
                                          "torch.ops.profiler._record_function_enter_new",
                                          "torch.ops.profiler._record_function_exit"};
    for (size_t i = 0; i < sizeof effects / sizeof effects[0]; i++)
        if (!strcmp(n->target, effects[i])) return true;
    return false;
}

/* convert_fx's last step, Graph.eliminate_dead_code: from the last node back, a node that has no
** user and is not impure is erased, so that what only it used may go in turn (an unused x.shape;
** a quantize point nothing reads: its dequantize, quantize and qparam get_attr nodes). What the
** erased nodes named stays, as in PyTorch's converted module, which copied its attributes before:
** a module called, a root buffer read.
** PyTorch takes an in-place op (`x.add_(y)` as a statement) for pure too, and erases it: its
** converted model then computes other values than the float one, silently. bpcc keeps such a
** node, with one warning for the pass, unless the graph asks for PyTorch's behaviour
** (bpcc_graph_set_erase_unused_in_place). */
static enum bpcc_status eliminate_dead_code(struct conv *cv)
{
    const struct bpcc_node *first_kept = NULL;
    uint32_t n_kept = 0;
    for (struct bpcc_node *n = cv->g->last, *prev; n; n = prev) {
        prev = n->prev;
        if (n->n_users || impure(n)) continue;
        if (!cv->g->erase_unused_in_place && bpcc_node_in_place(n)) {
            first_kept = n; /* walking back: the last one met is the first in the graph */
            n_kept++;
            continue;
        }
        if (n->mark == 1) cv->n_quantized--;
        enum bpcc_status s = bpcc_node_erase(n, cv->d);
        if (s) return s;
    }
    if (n_kept) {
        bpcc_diag_warning(cv->d, cv->g->source_file, first_kept->src_line, first_kept->src_col,
                          "kept %u in-place op%s whose result nothing reads ('%s' (%s)%s), which PyTorch 1.13's convert "
                          "erases",
                          n_kept, n_kept == 1 ? "" : "s", first_kept->name, first_kept->target, n_kept == 1 ? "" : " first");
        bpcc_diag_note(cv->d, 0, 0,
                       "the op changes a value later nodes read, so PyTorch's converted model computes other values than "
                       "the float one; --erase-unused-in-place erases them as PyTorch does");
    }
    return BPCC_OK;
}

static enum bpcc_status convert_observer(struct conv *cv, struct bpcc_node *obs)
{
    struct bpcc_graph *g = cv->g;
    const struct bpcc_module *m = bpcc_node_module(obs);
    struct observer_spec spec;
    bpcc_obs_spec_of_module_memo(m, &cv->specs, &spec);
    struct bpcc_node *in = obs->args.n && obs->args.u.seq.items[0].kind == BPCC_VAL_NODE ? obs->args.u.seq.items[0].u.node : NULL;
    if (!in) return bpcc_diag_error(cv->d, BPCC_ERR_GRAPH, g->source_file, obs->src_line, obs->src_col,
                                    "observer '%s' has no input", obs->name);
    bool skip = none_qconfig(cv, in);
    for (uint32_t i = 0; skip && i < obs->n_users; i++) skip = none_qconfig(cv, obs->users[i].node);
    bool stat = (spec.dtype == BPCC_DTYPE_QUINT8 || spec.dtype == BPCC_DTYPE_QINT8) && spec.cls != OC_PLACEHOLDER &&
                spec.cls != OC_NOOP && spec.cls != OC_REUSE_INPUT;
    bool dyn = spec.cls == OC_PLACEHOLDER && (spec.compute_dtype == BPCC_DTYPE_QUINT8 || spec.compute_dtype == BPCC_DTYPE_QINT8 ||
                                               spec.compute_dtype == BPCC_DTYPE_F16);
    bool fp16 = !stat && !dyn && spec.dtype == BPCC_DTYPE_F16;
    enum bpcc_status s = BPCC_OK;
    if (!skip && stat) {
        struct obs_qp qp;
        if ((s = observer_qparams(cv, obs, m, &spec, &qp))) {
            qp_release(&qp);
            return s;
        }
        bool per_channel = spec.qscheme == QS_PER_CHANNEL_AFFINE || spec.qscheme == QS_PER_CHANNEL_SYMMETRIC ||
                           spec.qscheme == QS_PER_CHANNEL_AFFINE_FLOAT_QPARAMS;
        const char *prefix;
        const char *path = module_path(cv, obs, &prefix);
        char stem[256]; /* the buffers are <stem>_scale_<n>, <stem>_zero_point_<n>; the path's dots as underscores */
        size_t lp = bpcc_str_cat(stem, sizeof stem, bpcc_str_cat(stem, sizeof stem, 0, path), prefix);
        for (char *c = stem; *c; c++)
            if (*c == '.') *c = '_';
        struct bpcc_tensor *ts = NULL, *tz = NULL;
        int64_t C = qp.n;
        if (per_channel) {
            /* the observer's tensors: affine zero points are int32, symmetric ones int64 */
            enum bpcc_dtype zdt = spec.qscheme == QS_PER_CHANNEL_AFFINE ? BPCC_DTYPE_I32 : BPCC_DTYPE_I64;
            s = bpcc_tensor_new(g, BPCC_DTYPE_F32, 1, &C, &ts, cv->d);
            if (!s) s = bpcc_tensor_new(g, zdt, 1, &C, &tz, cv->d);
            for (uint32_t i = 0; !s && i < qp.n; i++) {
                ((float *)ts->data)[i] = qp_scale(&qp, i);
                if (zdt == BPCC_DTYPE_I32) ((int32_t *)tz->data)[i] = (int32_t)qp_zero_point(&qp, i);
                else ((int64_t *)tz->data)[i] = qp_zero_point(&qp, i);
            }
        } else {
            s = bpcc_tensor_new(g, BPCC_DTYPE_F32, 0, NULL, &ts, cv->d);
            if (!s) s = bpcc_tensor_new(g, BPCC_DTYPE_I64, 0, NULL, &tz, cv->d);
            if (!s) {
                *(float *)ts->data = qp_scale(&qp, 0);
                *(int64_t *)tz->data = qp_zero_point(&qp, 0);
            }
        }
        qp_release(&qp);
        if (s) return s;
        struct bpcc_value vs, vz;
        struct bpcc_node *q;
        s = getattr_node(cv, stem, lp, false, ts, obs, &vs);
        if (!s) s = getattr_node(cv, stem, lp, true, tz, obs, &vz);
        if (s) return s;
        struct bpcc_value args;
        uint32_t na = per_channel ? 5 : 4;
        if (bpcc_value_seq_new(g, BPCC_VAL_TUPLE, na, &args)) return bpcc_diag_nomem(cv->d);
        args.u.seq.items[0] = bpcc_value_node(in);
        args.u.seq.items[1] = vs;
        args.u.seq.items[2] = vz;
        if (per_channel) args.u.seq.items[3] = bpcc_value_int(spec.ch_axis);
        args.u.seq.items[na - 1] = bpcc_value_dtype(spec.dtype);
        s = bpcc_graph_node_new(g, BPCC_NODE_CALL_FUNCTION, per_channel ? "quantize_per_channel" : "quantize_per_tensor",
                                per_channel ? "torch.quantize_per_channel" : "torch.quantize_per_tensor", &args, NULL, true, &q,
                                cv->d);
        return s ? s : quantized_in_place(cv, q, obs);
    } else if (!skip && (dyn || fp16)) {
        struct bpcc_value args;
        struct bpcc_node *q;
        if (dyn) {
            /* reduce_range: torch.backends.quantized.engine in (fbgemm, x86), the x86 default */
            if (bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 3, &args)) return bpcc_diag_nomem(cv->d);
            args.u.seq.items[0] = bpcc_value_node(in);
            args.u.seq.items[1] = bpcc_value_dtype(spec.compute_dtype);
            args.u.seq.items[2] = bpcc_value_bool(true);
            s = bpcc_graph_node_new(g, BPCC_NODE_CALL_FUNCTION, "quantize_per_tensor_dynamic",
                                    "torch.quantize_per_tensor_dynamic", &args, NULL, true, &q, cv->d);
        } else {
            if (bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 2, &args)) return bpcc_diag_nomem(cv->d);
            args.u.seq.items[0] = bpcc_value_node(in);
            args.u.seq.items[1] = bpcc_value_dtype(BPCC_DTYPE_F16);
            s = bpcc_graph_node_new(g, BPCC_NODE_CALL_METHOD, "to", "to", &args, NULL, true, &q, cv->d);
        }
        return s ? s : quantized_in_place(cv, q, obs);
    }
    /* dropped: its users take its input */
    s = bpcc_node_replace_all_uses(obs, in, NULL, cv->d);
    if (!s) s = bpcc_node_erase(obs, cv->d);
    if (!s) cv->n_dropped++;
    return s;
}

/* the simple single-op entry for a module type */
static const struct pattern_entry *entry_for(const struct bpcc_config *c, const char *type)
{
    uint32_t n;
    const uint32_t *cand = bpcc_registry_candidates(c, type, &n);
    for (uint32_t k = 0; k < n; k++) {
        const struct pattern_entry *e = c->entries[cand[k]];
        if (!e->pattern->n_args && !strcmp(e->pattern->op, type)) return e;
    }
    return NULL;
}

/* is_qconfig_supported_by_dtype_configs */
static bool qconfig_supported(const struct qconfig *qc, const struct pattern_entry *e)
{
    enum bpcc_dtype act = qc->activation.dtype, w = qc->weight.dtype;
    enum bpcc_dtype comp = qc->activation.cls == OC_PLACEHOLDER ? qc->activation.compute_dtype : BPCC_DTYPE_NONE;
    for (uint32_t i = 0; e && i < e->n_dtype_configs; i++) {
        const struct dtype_config *dc = &e->dtype_configs[i];
        enum bpcc_dtype in = dc->input.dtype ? dc->input.dtype : BPCC_DTYPE_F32, wd = dc->weight.dtype ? dc->weight.dtype : BPCC_DTYPE_F32;
        enum bpcc_dtype bd = dc->bias ? dc->bias : BPCC_DTYPE_F32, out = dc->output.dtype ? dc->output.dtype : BPCC_DTYPE_F32;
        enum bpcc_dtype qb = act == BPCC_DTYPE_F16 && w == BPCC_DTYPE_F16 && !dc->is_dynamic ? BPCC_DTYPE_F16 : BPCC_DTYPE_F32;
        bool ok = dc->is_dynamic ? in == comp && out == BPCC_DTYPE_F32 && wd == w
                                 : in == act && out == act && wd == w && bd == qb;
        if (ok) return true;
    }
    return false;
}

/* the reference module's weight_qscheme (qs: one of quantize_weight's literals, NULL for None)
** and weight_dtype */
static enum bpcc_status set_weight_attrs(struct conv *cv, struct bpcc_module *root, const char *qs, enum bpcc_dtype wd)
{
    /* an array that modules share is never written (a change copies it), and one a module owns
    ** no other module can come to hold unless it is shared: the same array and count are the
    ** same attributes */
    struct weight_like was = {root->attrs.u.seq.items, root->attrs.n, wd, qs, root};
    for (uint32_t i = 0; was.n && i < BPCC_ARRAY_LEN(cv->like); i++) {
        const struct weight_like *l = &cv->like[i];
        if (l->m && l->items == was.items && l->n == was.n && l->wd == wd && l->qs == qs) {
            bpcc_module_share_attrs(root, l->m);
            return BPCC_OK;
        }
    }
    struct bpcc_value v = bpcc_value_none();
    if (qs && bpcc_value_str_new(cv->g, BPCC_VAL_SYMBOL, qs, &v)) return bpcc_diag_nomem(cv->d);
    enum bpcc_status s = bpcc_module_set_attr(root, "weight_qscheme", &v, cv->d);
    v = bpcc_value_dtype(wd);
    if (!s) s = bpcc_module_set_attr(root, "weight_dtype", &v, cv->d);
    if (!s && was.n) cv->like[cv->next_like++ % BPCC_ARRAY_LEN(cv->like)] = was;
    return s;
}

/* How a reference module keeps a weight's qparams (torch.ao.nn.quantized.reference):
** W_MODULE  Linear, Conv*, Embedding ... (ReferenceQuantizedModule): one weight, `weight`; the
**           observer's tensors as they are; float weights get scale 1.0, zero point 0 and axis 0
**           all the same;
** W_CELL    LSTMCell, GRUCell, RNNCell: weight_ih and weight_hh, the observer's tensors; no
**           buffers for a weight without a qscheme;
** W_LSTM    LSTM: every weight of its flat weights; zero points made int32 (torch.int); 1.13 runs
**           the weight observer only when its dtype is qint8 (another dtype keeps the defaults of
**           an observer that saw nothing: scale 1.0, zero point 0), as convert_weighted_module does. */
enum wkind { W_MODULE, W_CELL, W_LSTM };

static const char *wname(struct conv *cv, const char *wn, const char *sfx)
{
    static const char *const common[3][2] = {{"scale", "weight_scale"}, {"zero_point", "weight_zero_point"}, {"axis", "weight_axis"}};
    for (int i = 0; i < 3 && !strcmp(wn, "weight"); i++) /* most modules of a model: no formatting, no lookup here */
        if (!strcmp(sfx, common[i][0])) return common[i][1];
    char buf[192];
    if ((size_t)snprintf(buf, sizeof buf, "%s_%s", wn, sfx) >= sizeof buf) return NULL;
    return bpcc_graph_intern(cv->g, buf);
}

/* Run the qconfig's weight observer on root's weight `wn` and give root what get_qparam_dict and
** the reference module's constructor make of it: the attributes <wn>_qscheme (symmetric schemes as
** affine; None for an observer without one, a float16 weight's) and <wn>_dtype, and the buffers
** <wn>_scale, <wn>_zero_point ([C] per channel, [1] per tensor, as calculate_qparams gives them)
** and <wn>_axis (0-d int32; 0 per tensor). */
static enum bpcc_status quantize_weight(struct conv *cv, struct bpcc_node *n, struct bpcc_module *root, const char *wn,
                                        const struct qconfig *qc, enum wkind kind, struct bpcc_qat_weight *qw)
{
    struct bpcc_graph *g = cv->g;
    /* a QAT module's weight fake quantize stands for the qconfig's weight observer */
    const struct observer_spec *spec = qw && qw->has ? &qw->spec : &qc->weight;
    enum bpcc_dtype wd = spec->dtype;
    const struct bpcc_tensor *w = bpcc_module_tensor(root, wn);
    if (!w || !w->data || w->dtype != BPCC_DTYPE_F32)
        return bpcc_diag_error(cv->d, BPCC_ERR_GRAPH, g->source_file, n->src_line, n->src_col,
                               "'%s' has no float32 %s to quantize", root->name, wn);
    /* run the weight observer on the weight (a fake quantize's, its owner's to release, when its
    ** observer is on) */
    struct obs_state own, *st = qw && qw->has ? &qw->st : &own;
    if (st == &own && bpcc_obs_init(&own, spec)) return bpcc_diag_nomem(cv->d);
    char why[200];
    bool used = false;
    enum bpcc_status s = BPCC_OK;
    if (qw && qw->has ? qw->observe : kind != W_LSTM || wd == BPCC_DTYPE_QINT8) {
        const float *range = !strcmp(wn, "weight") ? bpcc_tensor_range(w) : NULL;
        s = range ? bpcc_obs_observe_range(st, range, w->ndim, w->dims, &used) : BPCC_OK;
        if (!s && !used) s = bpcc_obs_observe(st, w->data, w->ndim, w->dims, why, sizeof why);
    }
    float *sc = NULL;
    double *zp = NULL;
    uint32_t nq = 0;
    if (!s) s = bpcc_obs_qparams(st, &sc, &zp, &nq);
    if (st == &own) bpcc_obs_release(&own);
    if (s == BPCC_ERR_NOMEM) return bpcc_diag_nomem(cv->d);
    if (s) return bpcc_diag_error(cv->d, BPCC_ERR_GRAPH, g->source_file, n->src_line, n->src_col, "%s of '%s': %s", wn,
                                  root->name, why);
    if (!nq && kind == W_MODULE && wd != BPCC_DTYPE_F16) {
        /* an integer weight dtype from an observer without qparams (PlaceholderObserver(dtype=qint8)):
        ** the reference module has nothing to quantize it with; PyTorch's convert fails there too */
        bpcc_xfree(sc);
        bpcc_xfree(zp);
        return bpcc_diag_error(cv->d, BPCC_ERR_CONFIG, g->source_file, n->src_line, n->src_col,
                               "'%s': the qconfig's weight observer (%s) gives no scale or zero point for %s weights; "
                               "PyTorch's convert fails here too (KeyError 'zero_point'): use a MinMax-family weight "
                               "observer, or float16 weights",
                               root->name, bpcc_obs_class_name(spec->cls), bpcc_dtype_name(wd));
    }
    enum qscheme q = spec->qscheme;
    bool per_channel = nq && (q == QS_PER_CHANNEL_AFFINE || q == QS_PER_CHANNEL_SYMMETRIC || q == QS_PER_CHANNEL_AFFINE_FLOAT_QPARAMS);
    const char *qs = !nq                                     ? NULL
                     : q == QS_PER_CHANNEL_AFFINE_FLOAT_QPARAMS ? "torch.per_channel_affine_float_qparams"
                     : per_channel                           ? "torch.per_channel_affine"
                                                             : "torch.per_tensor_affine";
    if (kind == W_MODULE) {
        s = set_weight_attrs(cv, root, qs, wd);
    } else {
        const char *kq = wname(cv, wn, "qscheme"), *kd = wname(cv, wn, "dtype");
        struct bpcc_value v = bpcc_value_none();
        if (!kq || !kd || (qs && bpcc_value_str_new(g, BPCC_VAL_SYMBOL, qs, &v))) s = bpcc_diag_nomem(cv->d);
        if (!s) s = bpcc_module_set_attr(root, kq, &v, cv->d);
        v = bpcc_value_dtype(wd);
        if (!s) s = bpcc_module_set_attr(root, kd, &v, cv->d);
    }
    struct bpcc_tensor *ts = NULL, *tz = NULL, *ta = NULL;
    if (!s && (nq || kind == W_MODULE)) {
        int64_t C = nq ? nq : 1;
        /* affine zero points come out of the observer as int32, symmetric ones as int64, float
        ** qparams' as float32; LSTM's are int32; a float weight's 0-d int32 */
        enum bpcc_dtype zdt = q == QS_PER_CHANNEL_AFFINE || q == QS_PER_TENSOR_AFFINE ? BPCC_DTYPE_I32 : BPCC_DTYPE_I64;
        if (q == QS_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) zdt = BPCC_DTYPE_F32;
        if (kind == W_LSTM || !nq) zdt = BPCC_DTYPE_I32;
        const char *ks = wname(cv, wn, "scale"), *kz = wname(cv, wn, "zero_point"), *ka = wname(cv, wn, "axis");
        /* the three buffers' room at once (a folded convolution's weight and bias: 5, not 8) */
        s = !ks || !kz || !ka || bpcc_module_reserve_tensors(root, 3) ? bpcc_diag_nomem(cv->d) : BPCC_OK;
        if (!s) s = bpcc_tensor_new(g, BPCC_DTYPE_F32, nq ? 1 : 0, &C, &ts, cv->d);
        if (!s) s = bpcc_tensor_new(g, zdt, nq ? 1 : 0, &C, &tz, cv->d);
        if (!s) s = bpcc_tensor_new(g, BPCC_DTYPE_I32, 0, NULL, &ta, cv->d);
        if (!s) {
            for (uint32_t i = 0; i < (uint32_t)C; i++) {
                ((float *)ts->data)[i] = nq ? sc[i] : 1.0f;
                double z = nq ? zp[i] : 0.0;
                if (tz->dtype == BPCC_DTYPE_I32) ((int32_t *)tz->data)[i] = (int32_t)z;
                else if (tz->dtype == BPCC_DTYPE_I64) ((int64_t *)tz->data)[i] = (int64_t)z;
                else ((float *)tz->data)[i] = (float)z;
            }
            *(int32_t *)ta->data = per_channel ? (int32_t)spec->ch_axis : 0;
            s = bpcc_module_set_tensor(root, ks, BPCC_TENSOR_BUFFER, ts, cv->d);
            if (!s) s = bpcc_module_set_tensor(root, kz, BPCC_TENSOR_BUFFER, tz, cv->d);
            if (!s) s = bpcc_module_set_tensor(root, ka, BPCC_TENSOR_BUFFER, ta, cv->d);
        }
    }
    bpcc_xfree(sc);
    bpcc_xfree(zp);
    return s;
}

/* the reference module of a weighted module node m (convert_weighted_module) */
static enum bpcc_status reference_module(struct conv *cv, struct bpcc_node *n, struct bpcc_module *m, bool observed,
                                         struct bpcc_qat_weight *qw)
{
    struct bpcc_graph *g = cv->g;
    struct bpcc_module *root = m;
    const struct pattern_entry *e = entry_for(cv->c, m->type);
    if (m->first_child && !strncmp(m->type, "torch.ao.nn.intrinsic.", 22)) {
        root = m->first_child;
        if (!entry_for(cv->c, root->type)) return BPCC_OK;
    }
    const struct pattern_entry *re = entry_for(cv->c, root->type);
    if (!re || !re->reference_module) return BPCC_OK;
    const struct qconfig *qc = qc_of(cv, n);
    if (!qc) return BPCC_OK;
    /* without prepare's record: prepare counts a node whose pattern observes neither inputs nor
    ** output (Embedding) as observed when its qconfig is there and the backend takes it */
    if (!observed && (cv->observed || !(e && e->input_output_observed == 0))) return BPCC_OK;
    if (!qconfig_supported(qc, e ? e : re)) return BPCC_OK;
    enum bpcc_dtype wd = qc->weight.dtype;
    if (wd != BPCC_DTYPE_QINT8 && wd != BPCC_DTYPE_QUINT8 && wd != BPCC_DTYPE_QUINT4X2 && wd != BPCC_DTYPE_F16) return BPCC_OK;
    enum bpcc_status s = BPCC_OK;
    if (!strcmp(root->type, "torch.nn.LSTM")) {
        /* its flat weights' `weight...` in the module's order (weight_ih_l0, weight_hh_l0, ...) */
        uint32_t nt = root->n_tensors, k = 0;
        const char **names = bpcc_malloc((nt ? nt : 1) * sizeof *names);
        if (!names) return bpcc_diag_nomem(cv->d);
        for (uint32_t i = 0; i < nt; i++)
            if (root->tensors[i].role == BPCC_TENSOR_PARAM && !strncmp(root->tensors[i].name, "weight_", 7))
                names[k++] = root->tensors[i].name;
        for (uint32_t i = 0; i < k && !s; i++) s = quantize_weight(cv, n, root, names[i], qc, W_LSTM, NULL);
        bpcc_xfree(names);
    } else if (!strcmp(root->type, "torch.nn.LSTMCell") || !strcmp(root->type, "torch.nn.GRUCell") ||
               !strcmp(root->type, "torch.nn.RNNCell")) {
        s = quantize_weight(cv, n, root, "weight_ih", qc, W_CELL, NULL);
        if (!s) s = quantize_weight(cv, n, root, "weight_hh", qc, W_CELL, NULL);
    } else {
        s = quantize_weight(cv, n, root, "weight", qc, W_MODULE, qw);
    }
    if (s) return s;
    const char *type = bpcc_graph_intern(g, re->reference_module);
    if (!type) return bpcc_diag_nomem(cv->d);
    bpcc_module_set_type(root, type);
    cv->n_modules++;
    return BPCC_OK;
}

/* A weighted module node: a QAT module becomes its float module first, whatever its qconfig
** (to_float), then the reference module where the node is quantized */
static enum bpcc_status convert_module(struct conv *cv, struct bpcc_node *n, bool observed)
{
    struct bpcc_module *m = bpcc_node_module(n);
    if (!m) return BPCC_OK;
    struct bpcc_qat_weight qw = {0};
    enum bpcc_status s = cv->qat ? bpcc_qat_to_float(cv->g, m, n, &qw, &m, cv->d) : BPCC_OK;
    if (!s) s = reference_module(cv, n, m, observed, &qw);
    bpcc_qat_weight_release(&qw);
    return s;
}

/* an observer on one of n's inputs or on its output: what "observed" means for a prepared model
** without prepare's record */
static bool observer_around(const struct conv *cv, const struct bpcc_node *n)
{
    for (uint32_t i = 0; i < n->args.n; i++)
        if (n->args.u.seq.items[i].kind == BPCC_VAL_NODE && is_obs_node(cv, n->args.u.seq.items[i].u.node)) return true;
    for (uint32_t i = 0; i < n->n_users; i++)
        if (is_obs_node(cv, n->users[i].node)) return true;
    return false;
}

/* A record of graph input or output positions on the root module (a list of non-negative ints)
** copied into *out (malloc'd) and taken off the root module; none: *out NULL, *n 0 */
static enum bpcc_status read_positions(struct conv *cv, struct bpcc_module *root, const char *key, uint32_t **out,
                                       uint32_t *n)
{
    const struct bpcc_value *v = bpcc_module_attr(root, key);
    if (!v) return BPCC_OK;
    const struct bpcc_graph *g = cv->g;
    if (v->kind != BPCC_VAL_LIST && v->kind != BPCC_VAL_TUPLE)
        return bpcc_diag_error(cv->d, BPCC_ERR_GRAPH, g->source_file, root->src_line, root->src_col,
                               "the root module's attribute '%s' must be a list of positions, not a %s", key,
                               bpcc_value_kind_name(v->kind));
    if (!(*out = bpcc_malloc((v->n ? v->n : 1) * sizeof **out))) return bpcc_diag_nomem(cv->d);
    for (uint32_t i = 0; i < v->n; i++) {
        const struct bpcc_value *item = &v->u.seq.items[i];
        if (item->kind != BPCC_VAL_INT || item->u.i < 0 || item->u.i >= UINT32_MAX)
            return bpcc_diag_error(cv->d, BPCC_ERR_GRAPH, g->source_file, root->src_line, root->src_col,
                                   "the root module's attribute '%s' must be a list of positions: item %u is %s", key, i,
                                   item->kind == BPCC_VAL_INT ? "out of range" : bpcc_value_kind_name(item->kind));
        (*out)[i] = (uint32_t)item->u.i;
    }
    *n = v->n;
    return bpcc_module_remove_attr(root, key) ? bpcc_diag_nomem(cv->d) : BPCC_OK;
}

/* What prepare left on the root module for convert (record_for_convert in prepare.c), read and
** taken off it, as PyTorch's converted model keeps neither: its record of the weighted-module nodes
** it observed (PyTorch's observed_node_names) into cv->observed, and the quantized graph inputs and
** outputs into cv->in_q and cv->out_q. A model without the first (prepared before the record, or
** written by hand) leaves cv->observed NULL, and a module is then observed when an observer sits
** on an input or on its output. */
static enum bpcc_status read_prepare_records(struct conv *cv)
{
    struct bpcc_graph *g = cv->g;
    struct bpcc_module *root = bpcc_graph_find_module(g, "");
    if (!root) return BPCC_OK;
    enum bpcc_status s = read_positions(cv, root, BPCC_INPUT_QUANTIZED_IDXS, &cv->in_q, &cv->n_in_q);
    if (!s) s = read_positions(cv, root, BPCC_OUTPUT_QUANTIZED_IDXS, &cv->out_q, &cv->n_out_q);
    const struct bpcc_value *v = bpcc_module_attr(root, BPCC_OBSERVED_NODE_NAMES);
    if (s || !v) return s;
    if (v->kind != BPCC_VAL_LIST)
        return bpcc_diag_error(cv->d, BPCC_ERR_GRAPH, g->source_file, root->src_line, root->src_col,
                               "the root module's attribute '%s' must be a list of node names, not a %s",
                               BPCC_OBSERVED_NODE_NAMES, bpcc_value_kind_name(v->kind));
    cv->observed = bpcc_malloc((size_t)cv->n_ids + 1);
    if (!cv->observed) return bpcc_diag_nomem(cv->d);
    memset(cv->observed, 0, (size_t)cv->n_ids + 1);
    for (uint32_t i = 0; i < v->n; i++) {
        const struct bpcc_value *item = &v->u.seq.items[i];
        if (item->kind != BPCC_VAL_STR)
            return bpcc_diag_error(cv->d, BPCC_ERR_GRAPH, g->source_file, root->src_line, root->src_col,
                                   "the root module's attribute '%s' must be a list of node names: item %u is a %s",
                                   BPCC_OBSERVED_NODE_NAMES, i, bpcc_value_kind_name(item->kind));
        const struct bpcc_node *n = bpcc_graph_find_node(g, item->u.s); /* a name no node has: no module to swap */
        if (n && n->id < cv->n_ids) cv->observed[n->id] = 1;
    }
    return bpcc_module_remove_attr(root, BPCC_OBSERVED_NODE_NAMES) ? bpcc_diag_nomem(cv->d) : BPCC_OK;
}

static bool listed(const uint32_t *v, uint32_t n, uint32_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

/* A recorded quantized-input position past the model's inputs is an error (PyTorch ignores it) */
static enum bpcc_status check_quantized_inputs(struct conv *cv)
{
    struct bpcc_graph *g = cv->g;
    uint32_t n_inputs, past = bpcc_quantized_input_past(g, cv->in_q, cv->n_in_q, &n_inputs);
    if (past == UINT32_MAX) return BPCC_OK;
    const struct bpcc_module *root = bpcc_graph_find_module(g, "");
    enum bpcc_status s = bpcc_diag_error(cv->d, BPCC_ERR_GRAPH, g->source_file, root->src_line, root->src_col,
                                         "'%s' names graph input %u, and the model has %u", BPCC_INPUT_QUANTIZED_IDXS,
                                         cv->in_q[past], n_inputs);
    bpcc_diag_note(cv->d, 0, 0, "positions count the graph inputs (placeholders) from 0");
    return s;
}

/* convert_fx's insert_dequantize_node for a graph input prepare took as quantized: a dequantize
** node after the placeholder takes all its uses (a reference module's input, a float op, an
** observer of another dtype), as the reference model's ops take float (a float batch is
** dequantized to itself, as PyTorch's Tensor.dequantize does). Called in the observers' walk, so
** that the dequantize nodes are numbered in graph order, as PyTorch's one walk numbers them. */
static enum bpcc_status dequantize_input(struct conv *cv, struct bpcc_node *n)
{
    uint32_t nu = n->n_users;
    struct bpcc_node **users = bpcc_malloc((nu ? nu : 1) * sizeof *users), *dq;
    if (!users) return bpcc_diag_nomem(cv->d);
    for (uint32_t i = 0; i < nu; i++) users[i] = n->users[i].node;
    struct bpcc_value a1;
    enum bpcc_status s = bpcc_value_seq_new(cv->g, BPCC_VAL_TUPLE, 1, &a1) ? bpcc_diag_nomem(cv->d) : BPCC_OK;
    if (!s) {
        a1.u.seq.items[0] = bpcc_value_node(n);
        s = bpcc_graph_node_new(cv->g, BPCC_NODE_CALL_METHOD, "dequantize", "dequantize", &a1, NULL, true, &dq, cv->d);
    }
    if (!s) {
        bpcc_node_move_after(dq, n);
        dq->meta = n->meta; /* the float tensor the input was traced as (the graph's read-only copy) */
    }
    for (uint32_t i = 0; i < nu && !s; i++) s = bpcc_node_replace_input(users[i], n, dq, cv->d);
    bpcc_xfree(users);
    return s;
}

/* maybe_recursive_remove_dequantize: the output node o takes the quantized value where v (an
** output, or a tuple, list or dict of them) is a dequantize node; anything else stays, with a
** warning as PyTorch's */
static enum bpcc_status keep_quantized(struct conv *cv, struct bpcc_node *o, const struct bpcc_value *v)
{
    if (v->kind == BPCC_VAL_LIST || v->kind == BPCC_VAL_TUPLE || v->kind == BPCC_VAL_DICT) {
        for (uint32_t i = 0; i < v->n; i++) {
            enum bpcc_status s = keep_quantized(cv, o, &v->u.seq.items[i]);
            if (s) return s;
        }
        return BPCC_OK;
    }
    struct bpcc_node *dq = v->kind == BPCC_VAL_NODE ? v->u.node : NULL;
    if (dq && dq->kind == BPCC_NODE_CALL_METHOD && !strcmp(dq->target, "dequantize") && dq->args.n &&
        dq->args.u.seq.items[0].kind == BPCC_VAL_NODE) {
        dq->mark = 0; /* erased when o was its only user, its quantize point stays: not one less */
        return bpcc_node_replace_input(o, dq, dq->args.u.seq.items[0].u.node, cv->d);
    }
    bpcc_diag_warning(cv->d, cv->g->source_file, o->src_line, o->src_col,
                      "an output taken as quantized ('%s') is %s%s, not a dequantize node: it stays as it is",
                      BPCC_OUTPUT_QUANTIZED_IDXS, dq ? "node " : "a ", dq ? dq->name : bpcc_value_kind_name(v->kind));
    return BPCC_OK;
}

/* The output's positions prepare took as quantized (convert_fx, at the output node): of a tuple or
** list output, each position's value; of a single value or a dict, the whole when position 0 is
** listed. A tuple's position past its end is an error (an IndexError in PyTorch). */
static enum bpcc_status keep_quantized_outputs(struct conv *cv)
{
    struct bpcc_node *o = bpcc_graph_output(cv->g);
    if (!cv->n_out_q || !o || !o->args.n) return BPCC_OK;
    const struct bpcc_value *out = &o->args.u.seq.items[0];
    if (out->kind != BPCC_VAL_LIST && out->kind != BPCC_VAL_TUPLE)
        return listed(cv->out_q, cv->n_out_q, 0) ? keep_quantized(cv, o, out) : BPCC_OK;
    for (uint32_t i = 0; i < cv->n_out_q; i++) {
        if (cv->out_q[i] >= out->n) {
            enum bpcc_status s = bpcc_diag_error(cv->d, BPCC_ERR_GRAPH, cv->g->source_file, o->src_line, o->src_col,
                                                 "'%s' names output %u, and the model's output %s has %u",
                                                 BPCC_OUTPUT_QUANTIZED_IDXS, cv->out_q[i], bpcc_value_kind_name(out->kind),
                                                 out->n);
            bpcc_diag_note(cv->d, 0, 0, "positions count the output %s's items from 0", bpcc_value_kind_name(out->kind));
            return s;
        }
        enum bpcc_status s = keep_quantized(cv, o, &out->u.seq.items[cv->out_q[i]]);
        if (s) return s;
    }
    return BPCC_OK;
}

static enum bpcc_status convert_in_place(struct bpcc_graph *g, const struct bpcc_config *c,
                                         const struct bpcc_qconfig_mapping *m, uint32_t *n_quantized_out,
                                         uint32_t *n_modules_out, struct bpcc_diag *d)
{
    struct conv cv = {.g = g, .c = c, .d = d, .n_ids = g->next_id, .qat = bpcc_graph_has_qat(g)};
    enum bpcc_status s = bpcc_qconfig_assign(g, m, &cv.qa, d);
    if (s) return s;
    cv.qc = bpcc_malloc((cv.n_ids + 1) * sizeof *cv.qc);
    cv.in_map = bpcc_malloc(cv.n_ids + 1);
    if (!cv.qc || !cv.in_map) s = bpcc_diag_nomem(d);
    if (!s) {
        memset(cv.qc, 0, (cv.n_ids + 1) * sizeof *cv.qc);
        memset(cv.in_map, 0, cv.n_ids + 1);
        uint32_t na = bpcc_qconfig_assignment_count(cv.qa);
        for (uint32_t i = 0; i < na; i++) {
            const struct bpcc_node_qconfig *nq = bpcc_qconfig_assignment_at(cv.qa, i);
            if (is_obs_node(&cv, nq->node)) continue; /* PyTorch's map predates the observers */
            cv.qc[nq->node->id] = nq->qconfig;
            cv.in_map[nq->node->id] = 1;
        }
        s = read_prepare_records(&cv);
    }
    if (!s) {
        /* weighted modules first (observed: in prepare's record, or without one an observer on an
        ** input or the output); the observer modules' marks count the nodes that call them */
        for (uint32_t i = 0; i < g->n_modules; i++) g->modules[i]->mark = 0;
        for (struct bpcc_node *n = g->first; n && !s; n = n->next) {
            n->mark = 0;
            if (n->kind != BPCC_NODE_CALL_MODULE) continue;
            if (is_obs_node(&cv, n)) {
                cv.n_observers_left++;
                bpcc_node_module(n)->mark++;
                continue;
            }
            s = convert_module(&cv, n, cv.observed ? cv.observed[n->id] : observer_around(&cv, n));
        }
        /* Without rollback, an observer module goes once its last caller is converted, and what
        ** convert makes next takes its memory (at 100k nodes 50k observers: 6.8 MB of modules,
        ** 11 MB of their tensors' headers and arrays): the called ones leave the table now (a
        ** failed pass leaves a graph only to free). */
        if (!s && g->no_rollback) {
            uint32_t k = 0;
            for (uint32_t i = 0; i < g->n_modules; i++) {
                struct bpcc_module *m = g->modules[i];
                if (!(m->mark && !m->first_child && bpcc_obs_module_class(m) >= 0)) g->modules[k++] = m;
            }
            g->n_modules = k;
        }
        /* room in the name table for what the quantize points will name (at most two root
        ** buffers, a quantize and a dequantize node each) at once, the table sized to them: the
        ** walk doubled it instead (1M nodes: 8.4M slots, 201 MB, where 5.5M hold the 4.1M names) */
        uint64_t names = (uint64_t)g->intern.table.n + 4 * (uint64_t)cv.n_observers_left;
        if (!s && cv.n_observers_left && names < UINT32_MAX / 2) (void)bpcc_strmap_reserve(&g->intern.table, (uint32_t)names);
        if (!s) s = check_quantized_inputs(&cv);
        uint32_t input = 0; /* placeholders seen */
        for (struct bpcc_node *n = g->first; n && !s;) {
            struct bpcc_node *next = n->next;
            if (n->kind == BPCC_NODE_PLACEHOLDER && listed(cv.in_q, cv.n_in_q, input++)) {
                if (!(s = dequantize_input(&cv, n))) next = n->next->next; /* past the dequantize */
            } else if (is_obs_node(&cv, n)) {
                struct bpcc_module *m = bpcc_node_module(n);
                s = convert_observer(&cv, n);
                cv.n_observers_left--;
                if (!s && g->no_rollback && --m->mark == 0 && !m->first_child) bpcc_module_give(m);
            }
            n = next;
        }
        if (!s) s = keep_quantized_outputs(&cv);
        if (!s) s = eliminate_dead_code(&cv);
        /* the observer modules go (unlinked one by one, the table compacted once) */
        for (uint32_t i = 0; !s && i < g->n_modules; i++)
            if (!g->modules[i]->dead && bpcc_obs_module_class(g->modules[i]) >= 0) bpcc_graph_unlink_module(g, g->modules[i]);
        bpcc_graph_compact_modules(g);
    }
    if (!s && n_quantized_out) *n_quantized_out = cv.n_quantized;
    if (!s && n_modules_out) *n_modules_out = cv.n_modules;
    bpcc_strmap_release(&cv.prefixes);
    bpcc_arena_release(&cv.scratch);
    bpcc_xfree(cv.qc);
    bpcc_xfree(cv.in_map);
    bpcc_xfree(cv.observed);
    bpcc_xfree(cv.in_q);
    bpcc_xfree(cv.out_q);
    bpcc_qconfig_assignment_free(cv.qa);
    return s;
}

/* the pass leaves g as it was when it fails */
enum bpcc_status bpcc_convert(struct bpcc_graph *g, const struct bpcc_config *c, const struct bpcc_qconfig_mapping *m,
                              uint32_t *n_quantized_out, uint32_t *n_modules_out, struct bpcc_diag *d)
{
    enum bpcc_status s = bpcc_graph_begin_pass(g, d);
    return s ? s : bpcc_graph_end_pass(g, convert_in_place(g, c, m, n_quantized_out, n_modules_out, d), d);
}
