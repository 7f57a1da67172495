/*
** config_dump.c — the effective (resolved) backend config as canonical YAML (dump -> load ->
** dump is byte-identical) and as JSON (the shape DESIGN.md documents), and the diff of two
** configs by pattern.
*/
#include "config.h"

#include "../io/json.h"

#include <ctype.h>
#include <math.h>

/* {==================== JSON ==================== */


static json_t *num(double v, bool is_int)
{
    if (is_int && fabs(v) < 9007199254740992.0) return json_integer((json_int_t)v);
    return json_real(v);
}

static json_t *pattern_json(const struct pattern *p)
{
    if (!p->n_args) return json_string(p->op);
    json_t *a = json_array();
    if (!a || json_array_append_new(a, json_string(p->op))) {
        json_decref(a);
        return NULL;
    }
    for (uint32_t i = 0; i < p->n_args; i++)
        if (json_array_append_new(a, pattern_json(p->args[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* forward-order ops of a simple chain pattern */
static uint32_t chain_ops(const struct pattern *p, const char *ops[3])
{
    uint32_t n = 0;
    const char *rev[3];
    for (const struct pattern *q = p; q && n < 3; q = q->n_args ? q->args[0] : NULL) rev[n++] = q->op;
    for (uint32_t i = 0; i < n; i++) ops[i] = rev[n - 1 - i];
    return n;
}

static json_t *constraint_json(const struct dtype_constraint *c)
{
    json_t *o = json_object();
    bool ok = o && bpcc_json_put(o, "dtype", json_string(bpcc_dtype_name(c->dtype)));
    if (ok && c->has_qmin) ok = bpcc_json_put(o, "quant_min_lower_bound", num(c->qmin, c->int_mask & 1));
    if (ok && c->has_qmax) ok = bpcc_json_put(o, "quant_max_upper_bound", num(c->qmax, c->int_mask & 2));
    if (ok && c->has_smin) ok = bpcc_json_put(o, "scale_min_lower_bound", num(c->smin, c->int_mask & 4));
    if (ok && c->has_smax) ok = bpcc_json_put(o, "scale_max_upper_bound", num(c->smax, c->int_mask & 8));
    if (ok && c->has_scale) ok = bpcc_json_put(o, "scale_exact_match", num(c->scale, c->int_mask & 16));
    if (ok && c->has_zp) ok = bpcc_json_put(o, "zero_point_exact_match", json_integer(c->zp));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *dtype_config_json(const struct dtype_config *dc)
{
    json_t *o = json_object();
    bool ok = o != NULL;
    if (ok && dc->input.dtype) ok = bpcc_json_put(o, "input_dtype", constraint_json(&dc->input));
    if (ok && dc->output.dtype) ok = bpcc_json_put(o, "output_dtype", constraint_json(&dc->output));
    if (ok && dc->weight.dtype) ok = bpcc_json_put(o, "weight_dtype", constraint_json(&dc->weight));
    if (ok && dc->bias) {
        struct dtype_constraint b = {.dtype = dc->bias};
        ok = bpcc_json_put(o, "bias_dtype", constraint_json(&b));
    }
    ok = ok && bpcc_json_put(o, "is_dynamic", json_boolean(dc->is_dynamic));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

BPCC_INTERNAL json_t *bpcc_entry_json(const struct pattern_entry *e);
json_t *bpcc_entry_json(const struct pattern_entry *e)
{
    json_t *o = json_object(), *dcs = NULL;
    bool ok = o != NULL;
    if (ok && e->simple && e->pattern->n_args) {
        const char *ops[3];
        uint32_t n = chain_ops(e->pattern, ops);
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < n; i++)
            if (json_array_append_new(a, json_string(ops[i]))) {
                json_decref(a);
                a = NULL;
            }
        ok = bpcc_json_put(o, "pattern", a);
    } else if (ok) {
        ok = bpcc_json_put(o, e->simple ? "pattern" : "pattern_complex_format", pattern_json(e->pattern));
    }
    ok = ok && bpcc_json_put(o, "observation_type", json_string(bpcc_obs_type_name(e->obs)));
    if (ok) {
        dcs = json_array();
        ok = bpcc_json_put(o, "dtype_configs", dcs);
    }
    for (uint32_t i = 0; ok && i < e->n_dtype_configs; i++)
        ok = json_array_append_new(dcs, dtype_config_json(&e->dtype_configs[i])) == 0;
    const char *names[] = {"root_module", "qat_module", "reference_quantized_module",
                           "fused_module", "fuser_method", "root_node_getter",
                           "extra_inputs_getter"};
    const char *vals[] = {e->root_module, e->qat_module, e->reference_module, e->fused_module,
                          e->fuser_method, e->root_node_getter, e->extra_inputs_getter};
    for (int k = 0; ok && k < 7; k++)
        if (vals[k]) ok = bpcc_json_put(o, names[k], json_string(vals[k]));
    if (ok && (e->has_num_tensor_args[0] || e->has_num_tensor_args[1] || e->has_num_tensor_args[2])) {
        json_t *m = json_object();
        ok = bpcc_json_put(o, "num_tensor_args_to_observation_type", m);
        for (int k = 0; ok && k < 3; k++)
            if (e->has_num_tensor_args[k]) {
                char key[2] = {(char)('0' + k), 0};
                ok = bpcc_json_put(m, key, json_string(bpcc_obs_type_name(e->num_tensor_args[k])));
            }
    }
    if (ok && e->n_type_index) {
        json_t *m = json_object();
        ok = bpcc_json_put(o, "input_type_to_index", m);
        for (uint32_t k = 0; ok && k < e->n_type_index; k++)
            ok = bpcc_json_put(m, e->type_index_key[k], json_integer(e->type_index_val[k]));
    }
    if (ok && e->fixed.set) {
        json_t *m = json_object();
        ok = bpcc_json_put(o, "fixed_qparams", m) && bpcc_json_put(m, "scale", num(e->fixed.scale, e->fixed.scale_is_int)) &&
             bpcc_json_put(m, "zero_point", json_integer(e->fixed.zero_point)) &&
             bpcc_json_put(m, "dtype", json_string(bpcc_dtype_name(e->fixed.dtype))) &&
             bpcc_json_put(m, "quant_min", json_integer(e->fixed.quant_min)) &&
             bpcc_json_put(m, "quant_max", json_integer(e->fixed.quant_max));
    }
    if (ok && e->input_output_observed >= 0)
        ok = bpcc_json_put(o, "input_output_observed", json_boolean(e->input_output_observed));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

enum bpcc_status bpcc_config_dump_json(const struct bpcc_config *c, int indent, char **out,
                                       struct bpcc_diag *d)
{
    *out = NULL;
    bpcc_json_init();
    uint64_t failures = bpcc_alloc_failures();
    json_t *root = json_object(), *cfgs = json_array();
    bool ok = root && cfgs && bpcc_json_put(root, "name", json_string(bpcc_config_name(c)));
    if (ok) ok = bpcc_json_put(root, "configs", cfgs);
    else json_decref(cfgs);
    for (uint32_t i = 0; ok && i < c->n_entries; i++)
        ok = json_array_append_new(cfgs, bpcc_entry_json(c->entries[i])) == 0;
    return bpcc_json_finish(root, ok, indent, failures, out, d);
}

/* }================================================ */

/* {==================== YAML ==================== */

/* A string as a YAML scalar: bare when it is a plain word ([A-Za-z0-9_][A-Za-z0-9_./-]* and no
** YAML keyword), else double-quoted with escapes. (bpcc_torch.backend_config writes the same.) */
static void yscalar(struct bpcc_buf *b, const char *s)
{
    static const char *const words[] = {"null", "true", "false", "yes", "no", "on", "off", "~"};
    bool bare = s[0] && (isalnum((unsigned char)s[0]) || s[0] == '_');
    for (const char *p = s; bare && *p; p++)
        bare = isalnum((unsigned char)*p) || strchr("_./-", *p);
    for (size_t i = 0; bare && i < BPCC_ARRAY_LEN(words); i++)
        if (!strcasecmp(s, words[i])) bare = false;
    if (bare) {
        bpcc_buf_adds(b, s);
        return;
    }
    bpcc_buf_addc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            bpcc_buf_addc(b, '\\');
            bpcc_buf_addc(b, (char)*p);
        } else if (*p == '\n') {
            bpcc_buf_adds(b, "\\n");
        } else if (*p == '\t') {
            bpcc_buf_adds(b, "\\t");
        } else if (*p < 0x20 || *p == 0x7f) {
            bpcc_buf_printf(b, "\\x%02x", *p);
        } else {
            bpcc_buf_addc(b, (char)*p);
        }
    }
    bpcc_buf_addc(b, '"');
}

static void ynum(struct bpcc_buf *b, double v, bool is_int)
{
    if (isinf(v)) {
        bpcc_buf_adds(b, v > 0 ? ".inf" : "-.inf");
        return;
    }
    if (is_int && fabs(v) < 9007199254740992.0) {
        bpcc_buf_printf(b, "%lld", (long long)v);
        return;
    }
    char t[32];
    bpcc_format_double(v, t);
    bpcc_buf_adds(b, t);
}

static void ypattern(struct bpcc_buf *b, const struct pattern *p)
{
    if (!p->n_args) {
        yscalar(b, p->op);
        return;
    }
    bpcc_buf_addc(b, '[');
    yscalar(b, p->op);
    for (uint32_t i = 0; i < p->n_args; i++) {
        bpcc_buf_adds(b, ", ");
        ypattern(b, p->args[i]);
    }
    bpcc_buf_addc(b, ']');
}

static void yconstraint(struct bpcc_buf *b, const char *key, const struct dtype_constraint *c,
                        bool *first)
{
    if (!c->dtype) return;
    if (!*first) bpcc_buf_adds(b, ", ");
    *first = false;
    bpcc_buf_printf(b, "%s: ", key);
    bool plain = !(c->has_qmin || c->has_qmax || c->has_smin || c->has_smax || c->has_scale || c->has_zp);
    if (plain) {
        bpcc_buf_adds(b, bpcc_dtype_name(c->dtype));
        return;
    }
    bpcc_buf_printf(b, "{dtype: %s", bpcc_dtype_name(c->dtype));
    const char *keys[] = {"quant_min_lower_bound", "quant_max_upper_bound", "scale_min_lower_bound",
                          "scale_max_upper_bound", "scale_exact_match"};
    bool has[] = {c->has_qmin, c->has_qmax, c->has_smin, c->has_smax, c->has_scale};
    double vals[] = {c->qmin, c->qmax, c->smin, c->smax, c->scale};
    for (int k = 0; k < 5; k++)
        if (has[k]) {
            bpcc_buf_printf(b, ", %s: ", keys[k]);
            ynum(b, vals[k], c->int_mask & (1u << k));
        }
    if (c->has_zp) bpcc_buf_printf(b, ", zero_point_exact_match: %lld", (long long)c->zp);
    bpcc_buf_addc(b, '}');
}

/* dtype_configs lists already written, for anchors: text -> anchor number */
struct anchors {
    char **text;
    uint32_t n, cap;
    bool oom;
};

static void ydtype_configs(struct bpcc_buf *b, const struct pattern_entry *e, struct anchors *an)
{
    if (!e->n_dtype_configs) {
        bpcc_buf_adds(b, "    dtype_configs: []\n");
        return;
    }
    struct bpcc_buf body;
    bpcc_buf_init(&body);
    for (uint32_t i = 0; i < e->n_dtype_configs; i++) {
        const struct dtype_config *dc = &e->dtype_configs[i];
        bool first = true;
        bpcc_buf_adds(&body, "      - {");
        yconstraint(&body, "input_dtype", &dc->input, &first);
        yconstraint(&body, "output_dtype", &dc->output, &first);
        yconstraint(&body, "weight_dtype", &dc->weight, &first);
        struct dtype_constraint bias = {.dtype = dc->bias};
        yconstraint(&body, "bias_dtype", &bias, &first);
        if (dc->is_dynamic) bpcc_buf_adds(&body, first ? "is_dynamic: true" : ", is_dynamic: true");
        bpcc_buf_adds(&body, "}\n");
    }
    char *text = bpcc_buf_take(&body, NULL);
    if (!text) {
        an->oom = true;
        bpcc_buf_set_oom(b);
        return;
    }
    /* a repeated list becomes an alias of its first use */
    for (uint32_t k = 0; k < an->n; k++)
        if (!strcmp(an->text[k], text)) {
            bpcc_buf_printf(b, "    dtype_configs: *dc%u\n", k + 1);
            bpcc_xfree(text);
            return;
        }
    if (an->n == an->cap) {
        uint32_t cap = an->cap ? an->cap * 2 : 16;
        char **t = bpcc_realloc(an->text, cap * sizeof *t);
        if (!t) {
            an->oom = true;
            bpcc_buf_set_oom(b);
            bpcc_xfree(text);
            return;
        }
        an->text = t;
        an->cap = cap;
    }
    an->text[an->n++] = text;
    bpcc_buf_printf(b, "    dtype_configs: &dc%u\n", an->n);
    bpcc_buf_adds(b, text);
}

static void yentry(struct bpcc_buf *b, const struct pattern_entry *e, struct anchors *an)
{
    if (e->simple && e->pattern->n_args) {
        const char *ops[3];
        uint32_t n = chain_ops(e->pattern, ops);
        bpcc_buf_adds(b, "  - pattern: [");
        for (uint32_t i = 0; i < n; i++) {
            if (i) bpcc_buf_adds(b, ", ");
            yscalar(b, ops[i]);
        }
        bpcc_buf_adds(b, "]\n");
    } else {
        bpcc_buf_adds(b, e->simple ? "  - pattern: " : "  - pattern_complex_format: ");
        ypattern(b, e->pattern);
        bpcc_buf_addc(b, '\n');
    }
    if (e->obs != OBS_DIFFERENT) /* the default is not written */
        bpcc_buf_printf(b, "    observation_type: %s\n", bpcc_obs_type_name(e->obs));
    ydtype_configs(b, e, an);
    const char *names[] = {"root_module", "qat_module", "reference_quantized_module",
                           "fused_module", "fuser_method", "root_node_getter",
                           "extra_inputs_getter"};
    const char *vals[] = {e->root_module, e->qat_module, e->reference_module, e->fused_module,
                          e->fuser_method, e->root_node_getter, e->extra_inputs_getter};
    for (int k = 0; k < 7; k++)
        if (vals[k]) {
            bpcc_buf_printf(b, "    %s: ", names[k]);
            yscalar(b, vals[k]);
            bpcc_buf_addc(b, '\n');
        }
    if (e->has_num_tensor_args[0] || e->has_num_tensor_args[1] || e->has_num_tensor_args[2]) {
        bpcc_buf_adds(b, "    num_tensor_args_to_observation_type: {");
        bool first = true;
        for (int k = 0; k < 3; k++)
            if (e->has_num_tensor_args[k]) {
                bpcc_buf_printf(b, "%s%d: %s", first ? "" : ", ", k, bpcc_obs_type_name(e->num_tensor_args[k]));
                first = false;
            }
        bpcc_buf_adds(b, "}\n");
    }
    if (e->n_type_index) {
        bpcc_buf_adds(b, "    input_type_to_index: {");
        for (uint32_t k = 0; k < e->n_type_index; k++)
            bpcc_buf_printf(b, "%s%s: %lld", k ? ", " : "", e->type_index_key[k],
                            (long long)e->type_index_val[k]);
        bpcc_buf_adds(b, "}\n");
    }
    if (e->fixed.set) {
        bpcc_buf_adds(b, "    fixed_qparams: {scale: ");
        ynum(b, e->fixed.scale, e->fixed.scale_is_int);
        bpcc_buf_printf(b, ", zero_point: %lld, dtype: %s, quant_min: %lld, quant_max: %lld}\n",
                        (long long)e->fixed.zero_point, bpcc_dtype_name(e->fixed.dtype),
                        (long long)e->fixed.quant_min, (long long)e->fixed.quant_max);
    }
    if (e->input_output_observed >= 0)
        bpcc_buf_printf(b, "    input_output_observed: %s\n", e->input_output_observed ? "true" : "false");
}

enum bpcc_status bpcc_config_dump_yaml(const struct bpcc_config *c, char **out, struct bpcc_diag *d)
{
    *out = NULL;
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    bpcc_buf_adds(&b, "name: ");
    yscalar(&b, bpcc_config_name(c));
    bpcc_buf_adds(&b, "\nconfigs:\n");
    struct anchors an = {0};
    for (uint32_t i = 0; i < c->n_entries; i++) yentry(&b, c->entries[i], &an);
    for (uint32_t k = 0; k < an.n; k++) bpcc_xfree(an.text[k]);
    bpcc_xfree(an.text);
    char *text = bpcc_buf_take(&b, NULL);
    if (!text) return bpcc_diag_nomem(d);
    *out = text;
    return BPCC_OK;
}

/* }================================================ */

/* {==================== diff ==================== */

/* Pattern identity across two configs compares op names, not pointers (different arenas). */
static bool same_pattern(const struct pattern *a, const struct pattern *b)
{
    if (strcmp(a->op, b->op) || a->n_args != b->n_args) return false;
    for (uint32_t i = 0; i < a->n_args; i++)
        if (!same_pattern(a->args[i], b->args[i])) return false;
    return true;
}

static const struct pattern_entry *find_other(const struct bpcc_config *c, const struct pattern *p)
{
    for (uint32_t i = 0; i < c->n_entries; i++)
        if (same_pattern(c->entries[i]->pattern, p)) return c->entries[i];
    return NULL;
}

enum bpcc_status bpcc_config_diff(const struct bpcc_config *a, const struct bpcc_config *b,
                                  char **out, uint32_t *n_changes, struct bpcc_diag *d)
{
    *out = NULL;
    bpcc_json_init();
    uint64_t failures = bpcc_alloc_failures();
    struct bpcc_buf t;
    bpcc_buf_init(&t);
    uint32_t added = 0, removed = 0, changed = 0;
    bool ok = true;
    for (uint32_t i = 0; ok && i < a->n_entries; i++) {
        const struct pattern_entry *ea = a->entries[i];
        const struct pattern_entry *eb = find_other(b, ea->pattern);
        if (eb) continue;
        removed++;
        bpcc_buf_adds(&t, "- ");
        bpcc_pattern_text(ea, &t);
        bpcc_buf_printf(&t, "  (%s:%u)\n", ea->file, ea->line);
    }
    for (uint32_t i = 0; ok && i < b->n_entries; i++) {
        const struct pattern_entry *eb = b->entries[i];
        const struct pattern_entry *ea = find_other(a, eb->pattern);
        if (!ea) {
            added++;
            bpcc_buf_adds(&t, "+ ");
            bpcc_pattern_text(eb, &t);
            bpcc_buf_printf(&t, "  (%s:%u)\n", eb->file, eb->line);
            continue;
        }
        json_t *ja = bpcc_entry_json(ea), *jb = bpcc_entry_json(eb);
        if (!ja || !jb) {
            ok = false;
        } else if (!json_equal(ja, jb)) {
            changed++;
            bpcc_buf_adds(&t, "~ ");
            bpcc_pattern_text(eb, &t);
            bpcc_buf_adds(&t, ":");
            const char *key;
            json_t *v;
            bool first = true;
            json_object_foreach(ja, key, v) {
                json_t *w = json_object_get(jb, key);
                if (!strcmp(key, "pattern") || !strcmp(key, "pattern_complex_format")) continue;
                if (!w || !json_equal(v, w)) {
                    bpcc_buf_printf(&t, "%s %s", first ? "" : ",", key);
                    first = false;
                }
            }
            json_object_foreach(jb, key, v) if (!json_object_get(ja, key)) {
                bpcc_buf_printf(&t, "%s %s", first ? "" : ",", key);
                first = false;
            }
            bpcc_buf_printf(&t, "  (%s:%u -> %s:%u)\n", ea->file, ea->line, eb->file, eb->line);
        }
        json_decref(ja);
        json_decref(jb);
    }
    if (added + removed + changed == 0) bpcc_buf_adds(&t, "no differences\n");
    else bpcc_buf_printf(&t, "%u added, %u removed, %u changed\n", added, removed, changed);
    char *text = bpcc_buf_take(&t, NULL);
    if (!ok || !text || bpcc_alloc_failures() != failures) {
        bpcc_xfree(text);
        return bpcc_diag_nomem(d);
    }
    *out = text;
    if (n_changes) *n_changes = added + removed + changed;
    return BPCC_OK;
}

/* }================================================ */
