/*
** config_load.c — backend pattern config YAML (PyTorch's BackendPatternConfig schema, keys
** spelled as PyTorch spells them) into registry entries. Every problem of a file is reported
** with its line:col and a note naming the enclosing entry; loading goes on after an error so
** that one run shows them all (the first BPCC_DIAG_MAX_ENTRIES are kept).
*/
#include "config.h"

#include "../pass/pass.h"
#include "yschema.h"

#include <errno.h>
#include <math.h>
#include <unistd.h>

struct loader {
    struct yschema ys;           /* file, diagnostics, strictness, error count */
    struct bpcc_config *cfg;
    const char *dir;             /* for relative extends */
    uint32_t entry_no;           /* 1-based index of the entry being read, 0 outside */
    const struct ynode *entry;   /* its mapping node */
    struct pattern_entry **own;  /* entries of this file, for duplicate detection */
    uint32_t n_own, cap_own;
};

static const char *const top_keys[] = {"name", "extends", "configs", NULL};
static const char *const entry_keys[] = {
    "pattern", "pattern_complex_format", "observation_type", "dtype_configs", "root_module",
    "qat_module", "reference_quantized_module", "reference_quantized_module_for_root",
    "fused_module", "fuser_method", "root_node_getter", "extra_inputs_getter",
    "num_tensor_args_to_observation_type", "input_type_to_index", "overwrite_output_observer",
    "fixed_qparams", "input_output_observed", NULL};
static const char *const dtype_config_keys[] = {"input_dtype", "output_dtype", "weight_dtype",
                                                "bias_dtype", "is_dynamic", NULL};
static const char *const constraint_keys[] = {"dtype", "quant_min_lower_bound",
                                              "quant_max_upper_bound", "scale_min_lower_bound",
                                              "scale_max_upper_bound", "scale_exact_match",
                                              "zero_point_exact_match", NULL};
static const char *const fixed_keys[] = {"scale", "zero_point", "dtype", "quant_min", "quant_max",
                                         NULL};
static const char *const obs_names[OBS_COUNT + 1] = {"OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT",
                                                     "OUTPUT_SHARE_OBSERVER_WITH_INPUT",
                                                     "INPUT_OUTPUT_NOT_OBSERVED", NULL};

const char *bpcc_obs_type_name(enum obs_type t)
{
    return (unsigned)t < OBS_COUNT ? obs_names[t] : "?";
}

static const char *const getters[] = {
    "conv_add_root_node_getter_left",          "conv_add_root_node_getter_right",
    "conv_add_extra_inputs_getter_left",       "conv_add_extra_inputs_getter_right",
    "conv_bn_add_root_node_getter_left",       "conv_bn_add_root_node_getter_right",
    "conv_bn_add_extra_inputs_getter_left",    "conv_bn_add_extra_inputs_getter_right",
    "conv_add_relu_root_node_getter_left",     "conv_add_relu_root_node_getter_right",
    "conv_add_relu_extra_inputs_getter_left",  "conv_add_relu_extra_inputs_getter_right",
    "conv_bn_add_relu_root_node_getter_left",  "conv_bn_add_relu_root_node_getter_right",
    "conv_bn_add_relu_extra_inputs_getter_left", "conv_bn_add_relu_extra_inputs_getter_right",
    NULL};

/* {==================== messages ==================== */

static void note_entry(void *ud)
{
    struct loader *L = ud;
    if (!L->entry_no || !L->entry) return;
    const struct ynode *p = bpcc_ynode_get(L->entry, "pattern");
    if (!p) p = bpcc_ynode_get(L->entry, "pattern_complex_format");
    char text[256];
    size_t used = 0;
    if (p && p->kind == YNODE_SCALAR) {
        snprintf(text, sizeof text, "%s", p->str);
        used = 1;
    } else if (p && p->kind == YNODE_SEQ) {
        used = (size_t)snprintf(text, sizeof text, "[");
        for (uint32_t i = 0; i < p->n && used < sizeof text; i++)
            used += (size_t)snprintf(text + used, sizeof text - used, "%s%s", i ? ", " : "",
                                     p->items[i]->kind == YNODE_SCALAR ? p->items[i]->str : "[...]");
        if (used < sizeof text) snprintf(text + used, sizeof text - used, "]");
    }
    if (used)
        bpcc_diag_note(L->ys.d, L->entry->line, L->entry->col, "in configs entry #%u (pattern %s)",
                       L->entry_no, text);
    else
        bpcc_diag_note(L->ys.d, L->entry->line, L->entry->col, "in configs entry #%u", L->entry_no);
}

static bool get_obs(struct loader *L, const struct ynode *n, const char *what, enum obs_type *out)
{
    if (!ys_want_kind(&L->ys, n, YNODE_SCALAR, what)) return false;
    const char *s = n->str;
    if (!strncmp(s, "ObservationType.", 16)) s += 16;
    for (int i = 0; i < OBS_COUNT; i++)
        if (!strcmp(s, obs_names[i])) {
            *out = (enum obs_type)i;
            return true;
        }
    char list[512];
    return ys_err(&L->ys, n, "unknown observation type '%s' (valid: %s)", n->str,
               ys_one_of(obs_names, list, sizeof list));
}

/* }================================================ */

/* {==================== ops and patterns ==================== */

/* An op name, canonicalized through the vocabulary; unknown names warn (error if strict). */
static bool get_op(struct loader *L, const struct ynode *n, bool allow_wildcard, const char **out,
                   char *kind_out)
{
    if (!ys_want_kind(&L->ys, n, YNODE_SCALAR, "a pattern op")) return false;
    const char *s = n->str;
    if (!s[0]) return ys_err(&L->ys, n, "empty op name in pattern");
    if (!strcmp(s, "MatchAllNode") || !strcmp(s, "torch.ao.quantization.utils.MatchAllNode")) {
        if (!allow_wildcard)
            return ys_err(&L->ys, n, "MatchAllNode is only allowed in pattern_complex_format");
        *out = bpcc_intern_n(&L->cfg->intern, "MatchAllNode", 12);
        if (kind_out) *kind_out = '*';
        return *out ? true : ys_oom(&L->ys);
    }
    if (!bpcc_vocab_is_name(s))
        return ys_err(&L->ys, n, "'%s' is not an op name (a torch module, function or Tensor method: a dotted Python name)",
                      s);
    char kind;
    const char *canon = bpcc_vocab_canonical(s, &kind);
    if (!canon) {
        const char *sug = bpcc_vocab_suggest(s);
        if (sug) ys_warn(&L->ys, n, "unknown op '%s' (did you mean '%s'?)", s, sug);
        else ys_warn(&L->ys, n, "unknown op '%s': not a torch module, function or Tensor method", s);
        canon = s;
        kind = 0;
    }
    if (kind_out) *kind_out = kind;
    *out = bpcc_intern_n(&L->cfg->intern, canon, strlen(canon));
    return *out ? true : ys_oom(&L->ys);
}

static struct pattern *leaf(struct loader *L, const char *op)
{
    struct pattern *p = BPCC_ARENA_NEW(&L->cfg->arena, struct pattern);
    if (!p) {
        ys_oom(&L->ys);
        return NULL;
    }
    p->op = op;
    return p;
}

/* simple form: an op, or a forward-order list of 1-3 ops -> reversed nested */
static struct pattern *simple_pattern(struct loader *L, const struct ynode *n, uint32_t *n_ops)
{
    if (n->kind == YNODE_SCALAR) {
        const char *op;
        if (!get_op(L, n, false, &op, NULL)) return NULL;
        *n_ops = 1;
        return leaf(L, op);
    }
    if (n->kind != YNODE_SEQ) {
        ys_err(&L->ys, n, "pattern must be an op or a list of ops, not %s", ys_kind_word(n));
        return NULL;
    }
    if (n->n < 1 || n->n > 3) {
        ys_err(&L->ys, n, "a simple pattern has 1 to 3 ops, this one has %u (use pattern_complex_format "
                  "for longer or branching patterns)", n->n);
        return NULL;
    }
    struct pattern *chain = NULL;
    bool ok = true;
    for (uint32_t i = 0; i < n->n; i++) {
        const char *op;
        if (n->items[i]->kind != YNODE_SCALAR) {
            ys_err(&L->ys, n->items[i], "pattern ops must be names, not %s (nested patterns go in "
                                "pattern_complex_format)", ys_kind_word(n->items[i]));
            ok = false;
            continue;
        }
        if (!get_op(L, n->items[i], false, &op, NULL)) {
            ok = false;
            continue;
        }
        struct pattern *p = leaf(L, op);
        if (!p) return NULL;
        if (chain) {
            p->n_args = 1;
            p->args = BPCC_ARENA_NEWN(&L->cfg->arena, struct pattern *, 1);
            if (!p->args) {
                ys_oom(&L->ys);
                return NULL;
            }
            p->args[0] = chain;
        }
        chain = p;
    }
    *n_ops = n->n;
    return ok ? chain : NULL;
}

static struct pattern *complex_pattern(struct loader *L, const struct ynode *n, int depth)
{
    if (depth > 32) {
        ys_err(&L->ys, n, "pattern nests deeper than 32 levels");
        return NULL;
    }
    if (n->kind == YNODE_SCALAR) {
        const char *op;
        return get_op(L, n, true, &op, NULL) ? leaf(L, op) : NULL;
    }
    if (n->kind != YNODE_SEQ || n->n == 0 || n->items[0]->kind != YNODE_SCALAR) {
        ys_err(&L->ys, n, "pattern_complex_format is an op or a list [op, argument patterns...]");
        return NULL;
    }
    const char *op;
    if (!get_op(L, n->items[0], true, &op, NULL)) return NULL;
    struct pattern *p = leaf(L, op);
    if (!p) return NULL;
    if (!strcmp(op, "MatchAllNode") && n->n > 1) {
        ys_err(&L->ys, n->items[0], "MatchAllNode matches anything and takes no argument patterns");
        return NULL;
    }
    p->n_args = n->n - 1;
    if (p->n_args) {
        p->args = BPCC_ARENA_NEWN(&L->cfg->arena, struct pattern *, p->n_args);
        if (!p->args) {
            ys_oom(&L->ys);
            return NULL;
        }
    }
    bool ok = true;
    for (uint32_t i = 0; i < p->n_args; i++) {
        p->args[i] = complex_pattern(L, n->items[i + 1], depth + 1);
        if (!p->args[i]) ok = false;
    }
    return ok ? p : NULL;
}

static uint32_t count_leaves(const struct pattern *p)
{
    uint32_t n = 1;
    for (uint32_t i = 0; i < p->n_args; i++) n += count_leaves(p->args[i]);
    return n;
}

static bool pattern_has_op(const struct pattern *p, const char *op)
{
    if (p->op == op) return true;
    for (uint32_t i = 0; i < p->n_args; i++)
        if (pattern_has_op(p->args[i], op)) return true;
    return false;
}

bool bpcc_pattern_equal(const struct pattern *a, const struct pattern *b)
{
    if (a->op != b->op || a->n_args != b->n_args) return false;
    for (uint32_t i = 0; i < a->n_args; i++)
        if (!bpcc_pattern_equal(a->args[i], b->args[i])) return false;
    return true;
}

/* }================================================ */

/* {==================== dtype configs ==================== */

static bool constraint(struct loader *L, const struct ynode *n, const char *what,
                       struct dtype_constraint *c)
{
    memset(c, 0, sizeof *c);
    if (n->kind == YNODE_SCALAR) return ys_dtype(&L->ys, n, what, &c->dtype);
    if (!ys_want_kind(&L->ys, n, YNODE_MAP, what)) return false;
    char where[64];
    snprintf(where, sizeof where, "%s", what);
    ys_check_keys(&L->ys, n, constraint_keys, where);
    bool ok = true;
    const struct ynode *v;
    if ((v = bpcc_ynode_get(n, "dtype"))) ok &= ys_dtype(&L->ys, v, what, &c->dtype);
    else ok &= ys_err(&L->ys, n, "%s needs a 'dtype'", what);
    static const char *const num_keys[] = {"quant_min_lower_bound", "quant_max_upper_bound",
                                           "scale_min_lower_bound", "scale_max_upper_bound",
                                           "scale_exact_match"};
    bool *has[] = {&c->has_qmin, &c->has_qmax, &c->has_smin, &c->has_smax, &c->has_scale};
    double *val[] = {&c->qmin, &c->qmax, &c->smin, &c->smax, &c->scale};
    for (int k = 0; k < 5; k++)
        if ((v = bpcc_ynode_get(n, num_keys[k])) && !ys_is_null(v)) {
            ok &= (*has[k] = ys_number(&L->ys, v, num_keys[k], val[k]));
            if (ys_written_int(v)) c->int_mask |= (uint8_t)(1u << k);
        }
    if ((v = bpcc_ynode_get(n, "zero_point_exact_match")) && !ys_is_null(v))
        ok &= (c->has_zp = ys_int(&L->ys, v, "zero_point_exact_match", &c->zp));
    if (!ok) return false;
    /* consistency */
    if (c->has_qmin && c->has_qmax && c->qmin > c->qmax)
        ok &= ys_err(&L->ys, bpcc_ynode_get(n, "quant_min_lower_bound"),
                  "quant_min_lower_bound %g is above quant_max_upper_bound %g", c->qmin, c->qmax);
    if (c->has_smin && c->has_smax && c->smin > c->smax)
        ok &= ys_err(&L->ys, bpcc_ynode_get(n, "scale_min_lower_bound"),
                  "scale_min_lower_bound %g is above scale_max_upper_bound %g", c->smin, c->smax);
    if (c->has_smin && c->smin < 0)
        ok &= ys_err(&L->ys, bpcc_ynode_get(n, "scale_min_lower_bound"),
                  "scale_min_lower_bound %g is negative", c->smin);
    if (c->has_smax && !(c->smax > 0))
        ok &= ys_err(&L->ys, bpcc_ynode_get(n, "scale_max_upper_bound"),
                  "scale_max_upper_bound must be positive (scales are), not %g", c->smax);
    if (c->has_smin && isinf(c->smin))
        ok &= ys_err(&L->ys, bpcc_ynode_get(n, "scale_min_lower_bound"),
                  "scale_min_lower_bound %g admits no scale", c->smin);
    if (c->has_qmin && isinf(c->qmin))
        ok &= ys_err(&L->ys, bpcc_ynode_get(n, "quant_min_lower_bound"), "quant_min_lower_bound must be finite");
    if (c->has_qmax && isinf(c->qmax))
        ok &= ys_err(&L->ys, bpcc_ynode_get(n, "quant_max_upper_bound"), "quant_max_upper_bound must be finite");
    if (c->has_scale && !(c->scale > 0))
        ok &= ys_err(&L->ys, bpcc_ynode_get(n, "scale_exact_match"),
                  "scale_exact_match must be positive, not %g", c->scale);
    if (c->has_zp && ((c->has_qmin && (double)c->zp < c->qmin) ||
                      (c->has_qmax && (double)c->zp > c->qmax)))
        ok &= ys_err(&L->ys, bpcc_ynode_get(n, "zero_point_exact_match"),
                  "zero_point_exact_match %lld is outside [quant_min_lower_bound, "
                  "quant_max_upper_bound]", (long long)c->zp);
    int64_t lo = 0, hi = 0;
    bool ranged = true;
    switch (c->dtype) {
    case BPCC_DTYPE_QUINT8: case BPCC_DTYPE_U8: lo = 0; hi = 255; break;
    case BPCC_DTYPE_QINT8: case BPCC_DTYPE_I8: lo = -128; hi = 127; break;
    case BPCC_DTYPE_QINT32: case BPCC_DTYPE_I32: lo = INT32_MIN; hi = INT32_MAX; break;
    case BPCC_DTYPE_QUINT4X2: lo = 0; hi = 15; break;
    default: ranged = false;
    }
    if (ranged && c->has_qmin && (c->qmin < (double)lo || c->qmin > (double)hi))
        ok &= ys_err(&L->ys, bpcc_ynode_get(n, "quant_min_lower_bound"),
                  "quant_min_lower_bound %g is outside the range of %s [%lld, %lld]", c->qmin,
                  bpcc_dtype_name(c->dtype), (long long)lo, (long long)hi);
    if (ranged && c->has_qmax && (c->qmax < (double)lo || c->qmax > (double)hi))
        ok &= ys_err(&L->ys, bpcc_ynode_get(n, "quant_max_upper_bound"),
                  "quant_max_upper_bound %g is outside the range of %s [%lld, %lld]", c->qmax,
                  bpcc_dtype_name(c->dtype), (long long)lo, (long long)hi);
    return ok;
}

static bool dtype_config(struct loader *L, const struct ynode *n, struct dtype_config *dc)
{
    memset(dc, 0, sizeof *dc);
    dc->line = n->line;
    dc->col = n->col;
    if (!ys_want_kind(&L->ys, n, YNODE_MAP, "a dtype config")) return false;
    ys_check_keys(&L->ys, n, dtype_config_keys, "a dtype config");
    bool ok = true;
    const struct ynode *v;
    if ((v = bpcc_ynode_get(n, "input_dtype")) && !ys_is_null(v))
        ok &= constraint(L, v, "input_dtype", &dc->input);
    if ((v = bpcc_ynode_get(n, "output_dtype")) && !ys_is_null(v))
        ok &= constraint(L, v, "output_dtype", &dc->output);
    if ((v = bpcc_ynode_get(n, "weight_dtype")) && !ys_is_null(v))
        ok &= constraint(L, v, "weight_dtype", &dc->weight);
    if ((v = bpcc_ynode_get(n, "bias_dtype")) && !ys_is_null(v)) {
        struct dtype_constraint b;
        ok &= constraint(L, v, "bias_dtype", &b);
        if (b.has_qmin || b.has_qmax || b.has_smin || b.has_smax || b.has_scale || b.has_zp)
            ok &= ys_err(&L->ys, v, "bias_dtype takes a dtype only, no constraints");
        dc->bias = b.dtype;
    }
    if ((v = bpcc_ynode_get(n, "is_dynamic")) && !ys_is_null(v))
        ok &= ys_bool(&L->ys, v, "is_dynamic", &dc->is_dynamic);
    return ok;
}

/* }================================================ */

static bool module_name(struct loader *L, const struct ynode *n, const char *what,
                        const char **out)
{
    if (ys_is_null(n)) {
        *out = NULL;
        return true;
    }
    char kind;
    if (!get_op(L, n, false, out, &kind)) return false;
    if (kind && kind != 'm')
        return ys_err(&L->ys, n, "%s must be a module class, '%s' is a %s", what, n->str,
                   kind == 'f' ? "function" : "Tensor method");
    return true;
}

static bool name_in(const char *s, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (!strcmp(s, list[i])) return true;
    return false;
}

static struct pattern_entry *entry(struct loader *L, const struct ynode *n)
{
    if (!ys_want_kind(&L->ys, n, YNODE_MAP, "a configs entry")) return NULL;
    struct pattern_entry *e = BPCC_ARENA_NEW(&L->cfg->arena, struct pattern_entry);
    if (!e) {
        ys_oom(&L->ys);
        return NULL;
    }
    e->file = L->ys.file;
    e->line = n->line;
    e->col = n->col;
    e->input_output_observed = -1;
    uint32_t errors_before = L->ys.errors;
    ys_check_keys(&L->ys, n, entry_keys, "a configs entry");

    const struct ynode *ps = bpcc_ynode_get(n, "pattern"), *pc = bpcc_ynode_get(n, "pattern_complex_format");
    uint32_t simple_ops = 0;
    if (ps && pc) ys_err(&L->ys, pc, "only one of 'pattern' and 'pattern_complex_format' may be given");
    else if (ps) {
        e->pattern = simple_pattern(L, ps, &simple_ops);
        e->simple = true;
    } else if (pc) {
        e->pattern = complex_pattern(L, pc, 0);
        if (e->pattern && !strcmp(e->pattern->op, "MatchAllNode")) {
            ys_err(&L->ys, pc, "a pattern cannot be anchored at MatchAllNode (it would match every node)");
            e->pattern = NULL;
        }
    }
    else ys_err(&L->ys, n, "the entry needs a 'pattern' (or 'pattern_complex_format')");
    if (e->pattern) e->n_leaves = count_leaves(e->pattern);

    const struct ynode *v;
    e->obs = OBS_DIFFERENT;
    if ((v = bpcc_ynode_get(n, "observation_type"))) get_obs(L, v, "observation_type", &e->obs);

    if ((v = bpcc_ynode_get(n, "dtype_configs")) && !ys_is_null(v) &&
        ys_want_kind(&L->ys, v, YNODE_SEQ, "dtype_configs")) {
        e->n_dtype_configs = v->n;
        e->dtype_configs = v->n ? BPCC_ARENA_NEWN(&L->cfg->arena, struct dtype_config, v->n) : NULL;
        if (v->n && !e->dtype_configs) {
            ys_oom(&L->ys);
            return NULL;
        }
        for (uint32_t i = 0; i < v->n; i++) dtype_config(L, v->items[i], &e->dtype_configs[i]);
    }

    if ((v = bpcc_ynode_get(n, "root_module"))) module_name(L, v, "root_module", &e->root_module);
    if ((v = bpcc_ynode_get(n, "qat_module"))) module_name(L, v, "qat_module", &e->qat_module);
    const struct ynode *ref = bpcc_ynode_get(n, "reference_quantized_module");
    const struct ynode *ref13 = bpcc_ynode_get(n, "reference_quantized_module_for_root");
    if (ref && ref13)
        ys_err(&L->ys, ref13, "'reference_quantized_module' and 'reference_quantized_module_for_root' "
                      "are the same setting; give one");
    else if (ref || ref13)
        module_name(L, ref ? ref : ref13, "reference_quantized_module", &e->reference_module);
    if ((v = bpcc_ynode_get(n, "fused_module"))) module_name(L, v, "fused_module", &e->fused_module);

    const struct ynode *fm = bpcc_ynode_get(n, "fuser_method");
    if (fm && !ys_is_null(fm) && ys_string(&L->ys, fm, "fuser_method", &e->fuser_method)) {
        uint32_t lo, hi;
        if (!bpcc_fuser_arity(e->fuser_method, &lo, &hi)) {
            char list[1024];
            bpcc_fuser_names(list, sizeof list);
            ys_err(&L->ys, fm, "unknown fuser method '%s' (valid: %s)", fm->str, list);
        } else if (e->pattern && (e->n_leaves < lo || e->n_leaves > hi)) {
            if (lo == hi)
                ys_err(&L->ys, fm, "fuser method '%s' fuses %u ops, but the pattern has %u", fm->str, lo,
                    e->n_leaves);
            else
                ys_err(&L->ys, fm, "fuser method '%s' fuses %u to %u ops, but the pattern has %u",
                    fm->str, lo, hi, e->n_leaves);
        }
    }
    for (int g = 0; g < 2; g++) {
        const char *key = g ? "extra_inputs_getter" : "root_node_getter";
        const char **slot = g ? &e->extra_inputs_getter : &e->root_node_getter;
        if ((v = bpcc_ynode_get(n, key)) && !ys_is_null(v) && ys_string(&L->ys, v, key, slot) &&
            !name_in(*slot, getters)) {
            char list[2048];
            ys_err(&L->ys, v, "unknown %s '%s' (valid: %s)", key, v->str, ys_one_of(getters, list, sizeof list));
        }
    }

    if ((v = bpcc_ynode_get(n, "num_tensor_args_to_observation_type")) && !ys_is_null(v) &&
        ys_want_kind(&L->ys, v, YNODE_MAP, "num_tensor_args_to_observation_type")) {
        for (uint32_t i = 0; i < v->n; i++) {
            int64_t k;
            if (!ys_int(&L->ys, v->items[2 * i], "a tensor argument count", &k)) continue;
            if (k < 0 || k > 2) {
                ys_err(&L->ys, v->items[2 * i], "tensor argument count %lld must be 0, 1 or 2", (long long)k);
                continue;
            }
            if (get_obs(L, v->items[2 * i + 1], "observation type", &e->num_tensor_args[k]))
                e->has_num_tensor_args[k] = true;
        }
    }
    if ((v = bpcc_ynode_get(n, "input_type_to_index")) && !ys_is_null(v) &&
        ys_want_kind(&L->ys, v, YNODE_MAP, "input_type_to_index")) {
        static const char *const types[] = {"weight", "bias", "input", NULL};
        for (uint32_t i = 0; i < v->n; i++) {
            const struct ynode *k = v->items[2 * i];
            if (!name_in(k->str, types)) {
                ys_err(&L->ys, k, "unknown input type '%s' in input_type_to_index (valid: weight, bias, input)", k->str);
                continue;
            }
            int64_t idx;
            if (!ys_int(&L->ys, v->items[2 * i + 1], "an argument index", &idx)) continue;
            if (idx < 0 || idx > 64) {
                ys_err(&L->ys, v->items[2 * i + 1], "argument index %lld is out of range", (long long)idx);
                continue;
            }
            e->type_index_key[e->n_type_index] = bpcc_intern_n(&L->cfg->intern, k->str, strlen(k->str));
            e->type_index_val[e->n_type_index++] = idx;
        }
    }
    const struct ynode *fq = bpcc_ynode_get(n, "overwrite_output_observer");
    const struct ynode *fq2 = bpcc_ynode_get(n, "fixed_qparams");
    if (fq && fq2) ys_err(&L->ys, fq2, "'overwrite_output_observer' and 'fixed_qparams' are the same setting; give one");
    if (!fq) fq = fq2;
    if (fq && !ys_is_null(fq) && ys_want_kind(&L->ys, fq, YNODE_MAP, "fixed qparams")) {
        ys_check_keys(&L->ys, fq, fixed_keys, "fixed qparams");
        struct fixed_qparams *f = &e->fixed;
        bool ok = true;
        const struct ynode *s = bpcc_ynode_get(fq, "scale"), *z = bpcc_ynode_get(fq, "zero_point");
        if (!s || !z) ok = ys_err(&L->ys, fq, "fixed qparams need 'scale' and 'zero_point'");
        if (s) ok &= ys_number(&L->ys, s, "scale", &f->scale);
        if (s) f->scale_is_int = ys_written_int(s);
        if (z) ok &= ys_int(&L->ys, z, "zero_point", &f->zero_point);
        f->dtype = BPCC_DTYPE_QUINT8;
        if ((v = bpcc_ynode_get(fq, "dtype"))) ok &= ys_dtype(&L->ys, v, "fixed qparams dtype", &f->dtype);
        f->quant_min = 0;
        f->quant_max = 255;
        if (f->dtype == BPCC_DTYPE_QINT8) f->quant_min = -128, f->quant_max = 127;
        if ((v = bpcc_ynode_get(fq, "quant_min"))) ok &= ys_int(&L->ys, v, "quant_min", &f->quant_min);
        if ((v = bpcc_ynode_get(fq, "quant_max"))) ok &= ys_int(&L->ys, v, "quant_max", &f->quant_max);
        if (ok && !(f->scale > 0)) ok = ys_err(&L->ys, s, "fixed qparams scale must be positive, not %g", f->scale);
        if (ok && f->quant_min > f->quant_max) ok = ys_err(&L->ys, fq, "fixed qparams quant_min %lld is above quant_max %lld", (long long)f->quant_min, (long long)f->quant_max);
        if (ok && (f->zero_point < f->quant_min || f->zero_point > f->quant_max))
            ok = ys_err(&L->ys, z, "fixed qparams zero_point %lld is outside [quant_min, quant_max]", (long long)f->zero_point);
        f->set = ok;
    }
    if ((v = bpcc_ynode_get(n, "input_output_observed")) && !ys_is_null(v)) {
        bool b;
        if (ys_bool(&L->ys, v, "input_output_observed", &b)) e->input_output_observed = b;
    }

    /* cross-field rules */
    if (e->reference_module && !e->root_module)
        ys_err(&L->ys, ref ? ref : ref13, "reference_quantized_module needs a root_module (the float "
                                  "module it replaces)");
    if (e->root_module && e->pattern && e->n_leaves > 1 && !pattern_has_op(e->pattern, e->root_module))
        ys_err(&L->ys, bpcc_ynode_get(n, "root_module"),
            "root_module '%s' is not an op of the pattern", e->root_module);
    if (e->fused_module && !e->fuser_method && e->pattern && e->n_leaves > 1)
        ys_warn(&L->ys, bpcc_ynode_get(n, "fused_module"),
             "fused_module without a fuser_method: PyTorch does not fuse this pattern");
    if (e->fuser_method && e->pattern && e->n_leaves == 1)
        ys_err(&L->ys, bpcc_ynode_get(n, "fuser_method"), "a fuser_method needs a pattern of two or more ops");
    (void)simple_ops;
    return L->ys.errors == errors_before ? e : NULL;
}

/* {==================== files and extends ==================== */

struct stack {
    const char *items[16];
    uint32_t n;
};

static enum bpcc_status load_text(struct bpcc_config *cfg, const char *text, size_t len,
                                  const char *file, const char *dir, bool strict,
                                  struct stack *stack, bool is_base, struct bpcc_diag *d);

/* Find a built-in by name. */
static const struct builtin_config *builtin(const char *name)
{
    uint32_t n;
    const struct builtin_config *b = bpcc_builtin_configs(&n);
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(b[i].name, name)) return &b[i];
    return NULL;
}

static bool looks_like_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') || (n > 5 && !strcmp(s + n - 5, ".yaml")) ||
           (n > 4 && !strcmp(s + n - 4, ".yml"));
}

static enum bpcc_status load_source(struct bpcc_config *cfg, const char *spec, const char *dir,
                                    bool strict, struct stack *stack, bool is_base,
                                    const struct ynode *at, const char *from_file,
                                    struct bpcc_diag *d)
{
    const struct builtin_config *b = looks_like_path(spec) ? NULL : builtin(spec);
    char *path = NULL;
    const char *key;
    if (b) {
        key = b->file;
    } else {
        path = dir ? bpcc_path_join(dir, spec) : bpcc_strdup(spec);
        if (!path) return bpcc_diag_nomem(d);
        if (access(path, R_OK) != 0) {
            enum bpcc_status s;
            uint32_t n;
            const struct builtin_config *all = bpcc_builtin_configs(&n);
            char list[256] = "";
            size_t used = 0;
            for (uint32_t i = 0; i < n && used < sizeof list; i++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", all[i].name);
            if (looks_like_path(spec) || !at) {
                s = bpcc_diag_error(d, at ? BPCC_ERR_CONFIG : BPCC_ERR_IO, at ? from_file : spec,
                                    at ? at->line : 0, at ? at->col : 0,
                                    "cannot read backend config '%s': %s", path, strerror(errno));
                /* a bare name given on the command line is most likely a mistyped built-in */
                if (!looks_like_path(spec)) bpcc_diag_note(d, 0, 0, "'%s' is not a built-in backend either (%s)", spec, list);
            } else
                s = bpcc_diag_error(d, BPCC_ERR_CONFIG, from_file, at->line, at->col,
                                    "'%s' is neither a built-in backend (%s) nor a readable file",
                                    spec, list);
            bpcc_xfree(path);
            return s;
        }
        key = path;
    }
    for (uint32_t i = 0; i < stack->n; i++)
        if (!strcmp(stack->items[i], key)) {
            enum bpcc_status s = bpcc_diag_error(d, BPCC_ERR_CONFIG, from_file, at ? at->line : 0,
                                                 at ? at->col : 0, "extends cycle: '%s' extends itself",
                                                 spec);
            bpcc_diag_note(d, 0, 0, "the chain starts at %s", stack->items[0]);
            bpcc_xfree(path);
            return s;
        }
    if (stack->n >= BPCC_ARRAY_LEN(stack->items)) {
        bpcc_xfree(path);
        return bpcc_diag_error(d, BPCC_ERR_LIMIT, from_file, at ? at->line : 0, at ? at->col : 0,
                               "extends chain deeper than 16 files");
    }
    const char *ikey = bpcc_intern_n(&cfg->intern, key, strlen(key));
    if (!ikey) {
        bpcc_xfree(path);
        return bpcc_diag_nomem(d);
    }
    stack->items[stack->n++] = ikey;
    enum bpcc_status s;
    uint32_t n_images;
    const struct builtin_image *images = bpcc_builtin_images(&n_images);
    const struct builtin_image *img = NULL;
    for (uint32_t i = 0; b && i < n_images && !img; i++)
        if (!strcmp(images[i].name, b->name)) img = &images[i];
    if (img) {
        /* the compiled image of the same YAML, made at build time */
        const char *name = NULL;
        s = bpcc_config_from_image(cfg, img->data, img->len, &name, d);
        if (!s && (!is_base || !cfg->name)) cfg->name = name;
    } else if (b) {
        s = load_text(cfg, b->text, b->len, b->file, NULL, strict, stack, is_base, d);
    } else {
        char *text;
        size_t len;
        s = bpcc_file_read(path, &text, &len, d);
        if (!s) {
            char *pdir = bpcc_path_dirname(path);
            s = pdir ? load_text(cfg, text, len, ikey, pdir, strict, stack, is_base, d)
                     : bpcc_diag_nomem(d);
            bpcc_xfree(pdir);
            bpcc_xfree(text);
        }
    }
    stack->n--;
    bpcc_xfree(path);
    return s;
}

static enum bpcc_status load_text(struct bpcc_config *cfg, const char *text, size_t len,
                                  const char *file, const char *dir, bool strict,
                                  struct stack *stack, bool is_base, struct bpcc_diag *d)
{
    const char *ifile = bpcc_intern_n(&cfg->intern, file, strlen(file));
    if (!ifile) return bpcc_diag_nomem(d);
    struct loader L = {.ys = {.file = ifile, .d = d, .intern = &cfg->intern, .strict = strict},
                       .cfg = cfg, .dir = dir};
    L.ys.note = note_entry;
    L.ys.note_ud = &L;
    struct ynode *root;
    enum bpcc_status s = bpcc_yaml_parse(text, len, ifile, &cfg->arena, &root, d);
    if (s) return s;
    if (!root) return bpcc_diag_error(d, BPCC_ERR_CONFIG, ifile, 1, 1, "empty backend config");
    if (root->kind != YNODE_MAP)
        return bpcc_diag_error(d, BPCC_ERR_CONFIG, ifile, root->line, root->col,
                               "a backend config is a mapping with 'name' and 'configs', not %s",
                               ys_kind_word(root));
    ys_check_keys(&L.ys, root, top_keys, "the backend config");
    const struct ynode *v;
    const char *name = NULL;
    if ((v = bpcc_ynode_get(root, "name"))) ys_string(&L.ys, v, "name", &name);
    else ys_err(&L.ys, root, "the backend config needs a 'name'");

    if ((v = bpcc_ynode_get(root, "extends")) && !ys_is_null(v)) {
        uint32_t n = v->kind == YNODE_SEQ ? v->n : 1;
        for (uint32_t i = 0; i < n; i++) {
            const struct ynode *b = v->kind == YNODE_SEQ ? v->items[i] : v;
            const char *spec;
            if (!ys_string(&L.ys, b, "extends", &spec)) continue;
            s = load_source(cfg, spec, dir, strict, stack, true, b, ifile, d);
            if (s) {
                L.ys.errors++;
                if (s == BPCC_ERR_NOMEM) return s;
            }
        }
    }
    const struct ynode *configs = bpcc_ynode_get(root, "configs");
    if (!configs) ys_err(&L.ys, root, "the backend config needs 'configs' (a list of pattern entries)");
    else if (!ys_is_null(configs) && ys_want_kind(&L.ys, configs, YNODE_SEQ, "configs")) {
        for (uint32_t i = 0; i < configs->n; i++) {
            L.entry_no = i + 1;
            L.entry = configs->items[i];
            struct pattern_entry *e = entry(&L, configs->items[i]);
            if (!e) continue;
            /* a duplicate inside one file is almost always a mistake */
            bool dup = false;
            for (uint32_t k = 0; k < L.n_own && !dup; k++)
                if (bpcc_pattern_equal(L.own[k]->pattern, e->pattern)) {
                    struct bpcc_buf t;
                    bpcc_buf_init(&t);
                    bpcc_pattern_text(e, &t);
                    L.ys.errors++;
                    bpcc_diag_error(d, BPCC_ERR_CONFIG, ifile, e->line, e->col,
                                    "duplicate pattern %s in one file (use 'extends' to override "
                                    "a base config)", t.data ? t.data : "");
                    bpcc_diag_note(d, L.own[k]->line, L.own[k]->col, "first given here");
                    bpcc_buf_release(&t);
                    dup = true;
                }
            if (dup) continue;
            if (L.n_own == L.cap_own) {
                uint32_t cap = L.cap_own ? L.cap_own * 2 : 32;
                struct pattern_entry **p = bpcc_realloc(L.own, cap * sizeof *p);
                if (!p) {
                    ys_oom(&L.ys);
                    break;
                }
                L.own = p;
                L.cap_own = cap;
            }
            L.own[L.n_own++] = e;
            if (bpcc_registry_add(cfg, e, true, d)) {
                ys_oom(&L.ys);
                break;
            }
        }
        L.entry_no = 0;
    }
    bpcc_xfree(L.own);
    if (L.ys.oom) return BPCC_ERR_NOMEM;
    if (L.ys.errors) return BPCC_ERR_CONFIG;
    if (!is_base || !cfg->name) cfg->name = name;
    return BPCC_OK;
}

/* }================================================ */

static enum bpcc_status new_config(struct bpcc_config **out, struct bpcc_diag *d)
{
    struct bpcc_config *c = bpcc_malloc(sizeof *c);
    if (!c) return bpcc_diag_nomem(d);
    memset(c, 0, sizeof *c);
    bpcc_arena_init(&c->arena);
    bpcc_intern_init(&c->intern, &c->arena);
    *out = c;
    return BPCC_OK;
}

static enum bpcc_status finish(struct bpcc_config *c, enum bpcc_status s,
                               struct bpcc_config **out, struct bpcc_diag *d)
{
    if (!s) s = bpcc_registry_finish(c, d);
    if (s) {
        bpcc_config_free(c);
        return s;
    }
    *out = c;
    return BPCC_OK;
}

enum bpcc_status bpcc_config_load(const char *name_or_path, const struct bpcc_config_options *o,
                                  struct bpcc_config **out, struct bpcc_diag *d)
{
    *out = NULL;
    struct bpcc_config *c = NULL;
    enum bpcc_status s = new_config(&c, d);
    if (s) return s;
    struct stack stack = {.n = 0};
    s = load_source(c, name_or_path, NULL, o && o->strict, &stack, false, NULL, name_or_path, d);
    return finish(c, s, out, d);
}

enum bpcc_status bpcc_config_load_text(const char *text, size_t len, const char *filename,
                                       const struct bpcc_config_options *o,
                                       struct bpcc_config **out, struct bpcc_diag *d)
{
    *out = NULL;
    struct bpcc_config *c = NULL;
    enum bpcc_status s = new_config(&c, d);
    if (s) return s;
    struct stack stack = {.n = 0};
    char *dir = filename ? bpcc_path_dirname(filename) : NULL;
    if (filename && !dir) {
        bpcc_config_free(c);
        return bpcc_diag_nomem(d);
    }
    s = load_text(c, text, len, filename ? filename : "<text>", dir, o && o->strict, &stack, false, d);
    bpcc_xfree(dir);
    return finish(c, s, out, d);
}
