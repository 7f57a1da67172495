/*
** prepare_report.c — what prepare decided, for people and for diffs: the plan (fused groups and
** observer points, JSON) and `bpcc explain` (per node: pattern, qconfig and rule, quantized or
** the exact reason it is not; text or JSON).
*/
#include "prepare.h"

#include "../io/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *pattern_text(const struct pattern_entry *e)
{
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    bpcc_pattern_text(e, &b);
    return bpcc_buf_take(&b, NULL);
}

static const char *config_name(const struct bpcc_prepare_report *r)
{
    const char *n = bpcc_config_name(r->config);
    return n && *n ? n : "the backend";
}

/* {==================== the plan ==================== */

static json_t *names_json(struct bpcc_node *const *nodes, uint32_t n, bool reverse)
{
    json_t *a = json_array();
    for (uint32_t i = 0; a && i < n; i++) {
        const struct bpcc_node *x = nodes[reverse ? n - 1 - i : i];
        if (json_array_append_new(a, json_string(x->name))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *users_json(const struct bpcc_node *n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; a && i < n->n_users; i++)
        if (json_array_append_new(a, json_string(n->users[i].node->name))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *group_json(const struct bpcc_prepare_report *r, const struct prep_match *pm)
{
    json_t *o = json_object();
    char *pt = pattern_text(pm->entry);
    char where[300];
    snprintf(where, sizeof where, "%s:%u", pm->entry->file, pm->entry->line);
    const struct prep_node *ax = NULL;
    for (uint32_t i = 0; i < r->n_nodes && !ax; i++)
        if (r->nodes[i].node == pm->anchor) ax = &r->nodes[i];
    bool q = ax && ax->status == PS_QUANTIZED;
    bool ok = o && pt && bpcc_json_put(o, "pattern", json_string(pt)) && bpcc_json_put(o, "config", json_string(where)) &&
              bpcc_json_put(o, "observation_type", json_string(bpcc_obs_type_name(pm->obs))) &&
              bpcc_json_put(o, "nodes", names_json(pm->nodes, pm->n_nodes, true)) &&
              bpcc_json_put(o, "root", json_string(pm->root->name)) && bpcc_json_put(o, "last", json_string(pm->anchor->name)) &&
              bpcc_json_put(o, "quantized", json_boolean(q));
    if (ok && ax && !q) ok = bpcc_json_put(o, "reason", json_string(ax->why ? ax->why : bpcc_prep_status_name(ax->status)));
    bpcc_xfree(pt);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* observers by the module created for them, to find the spec of a shared one */
struct by_mod {
    const char *module;
    const struct observer_spec *spec;
};

static int by_mod_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct by_mod *)a)->module, y = (uintptr_t)((const struct by_mod *)b)->module;
    return x < y ? -1 : x > y;
}

/* the spec of the observer the node calls (a shared one was created for another node) */
static const struct observer_spec *called_spec(const struct bpcc_prepare_report *r, const struct by_mod *bm,
                                               const struct prep_observer *po)
{
    struct by_mod key = {po->node->target, NULL};
    const struct by_mod *hit = bsearch(&key, bm, r->n_observers, sizeof *bm, by_mod_cmp);
    return hit ? hit->spec : &po->spec;
}

static json_t *observer_entry_json(const struct bpcc_prepare_report *r, const struct by_mod *by_module,
                                   const struct prep_observer *po)
{
    const struct bpcc_node *n = po->node;
    json_t *o = json_object();
    bool ok = o && bpcc_json_put(o, "name", json_string(n->name)) && bpcc_json_put(o, "module", json_string(n->target)) &&
              bpcc_json_put(o, "observer", bpcc_observer_json(called_spec(r, by_module, po))) &&
              bpcc_json_put(o, "observes", json_string(po->observed->name)) && bpcc_json_put(o, "users", users_json(n)) &&
              bpcc_json_put(o, "role", json_string(po->why));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* observers in graph order */
static enum bpcc_status observer_order(const struct bpcc_prepare_report *r, uint32_t **out, struct bpcc_diag *d)
{
    *out = NULL;
    if (!r->n_observers) return BPCC_OK;
    const struct bpcc_graph *g = r->graph;
    int32_t *at = bpcc_malloc((g->next_id + 1) * sizeof *at);
    uint32_t *order = bpcc_malloc(r->n_observers * sizeof *order);
    if (!at || !order) {
        bpcc_xfree(at);
        bpcc_xfree(order);
        return bpcc_diag_nomem(d);
    }
    for (uint32_t i = 0; i <= g->next_id; i++) at[i] = -1;
    for (uint32_t i = 0; i < r->n_observers; i++) at[r->observers[i].node->id] = (int32_t)i;
    uint32_t k = 0;
    for (const struct bpcc_node *n = g->first; n; n = n->next)
        if (at[n->id] >= 0 && k < r->n_observers) order[k++] = (uint32_t)at[n->id];
    bpcc_xfree(at);
    *out = order;
    return BPCC_OK;
}

enum bpcc_status bpcc_prepare_plan_json(const struct bpcc_prepare_report *r, int indent, char **out,
                                        struct bpcc_diag *d)
{
    *out = NULL;
    bpcc_json_init();
    uint64_t failures = bpcc_alloc_failures();
    uint32_t *order;
    enum bpcc_status s = observer_order(r, &order, d);
    if (s) return s;
    struct by_mod *by_module = bpcc_malloc((r->n_observers ? r->n_observers : 1) * sizeof *by_module);
    if (!by_module) {
        bpcc_xfree(order);
        return bpcc_diag_nomem(d);
    }
    for (uint32_t i = 0; i < r->n_observers; i++) by_module[i] = (struct by_mod){r->observers[i].module, &r->observers[i].spec};
    qsort(by_module, r->n_observers, sizeof *by_module, by_mod_cmp);
    json_t *root = json_object(), *groups = json_array(), *obs = json_array();
    bool ok = root && groups && obs && bpcc_json_put(root, "backend", json_string(bpcc_config_name(r->config))) &&
              bpcc_json_put(root, "qconfig_mapping", r->mapping->name ? json_string(r->mapping->name) : json_null()) &&
              json_object_set(root, "groups", groups) == 0 && json_object_set(root, "observers", obs) == 0;
    for (uint32_t i = r->n_matches; ok && i-- > 0;) ok = json_array_append_new(groups, group_json(r, &r->matches[i])) == 0;
    for (uint32_t i = 0; ok && i < r->n_observers; i++)
        ok = json_array_append_new(obs, observer_entry_json(r, by_module, &r->observers[order[i]])) == 0;
    json_decref(groups);
    json_decref(obs);
    bpcc_xfree(order);
    bpcc_xfree(by_module);
    return bpcc_json_finish(root, ok, indent, failures, out, d);
}

/* }================================================ */

/* {==================== explain ==================== */

static void reason_text(const struct bpcc_prepare_report *r, const struct prep_node *x, struct bpcc_buf *b)
{
    const struct bpcc_node *n = x->node;
    const struct prep_match *pm = x->match >= 0 ? &r->matches[x->match] : NULL;
    switch (x->status) {
    case PS_NOT_APPLICABLE:
        if (n->kind == BPCC_NODE_GET_ATTR) bpcc_buf_adds(b, "attribute");
        else bpcc_buf_printf(b, "graph %s (%s)", n->kind == BPCC_NODE_PLACEHOLDER ? "input" : "output",
                             x->out != BPCC_DTYPE_QUINT8                       ? "float"
                             : n->kind == BPCC_NODE_PLACEHOLDER ? "quint8, quantized outside the graph"
                                                               : "quint8");
        break;
    case PS_QUANTIZED:
        bpcc_buf_printf(b, "quantized: input %s, output %s", bpcc_tdt_name(x->in), bpcc_tdt_name(x->out));
        if (x->weight != TD_ABSENT && x->has_weight) bpcc_buf_printf(b, ", weight %s", bpcc_tdt_name(x->weight));
        if (x->in_dynamic) bpcc_buf_adds(b, " (dynamic)");
        if (pm && n != pm->root && n != pm->anchor)
            bpcc_buf_printf(b, "; observed with its group (input at '%s', output at '%s')", pm->root->name, pm->anchor->name);
        break;
    case PS_NO_QCONFIG: bpcc_buf_adds(b, "float: its qconfig is null"); break;
    case PS_NO_PATTERN:
        bpcc_buf_printf(b, "float: no pattern of %s matches %s", config_name(r), bpcc_node_op(n));
        break;
    case PS_REJECTED:
        bpcc_buf_adds(b, "float: the backend rejects its qconfig: ");
        if (x->dtype_from)
            bpcc_buf_printf(b, "its value reaches a non-tensor argument of '%s', so PyTorch 1.13 takes its dtype as %s "
                            "(propagate_dtypes_for_known_nodes); ", x->dtype_from->name, bpcc_tdt_name(x->in));
        bpcc_buf_adds(b, x->why ? x->why : "?");
        break;
    case PS_NOT_OBSERVED:
        bpcc_buf_adds(b, "not observed: the pattern observes neither input nor output (INPUT_OUTPUT_NOT_OBSERVED); "
                         "convert quantizes its weight when the qconfig's weight dtype is quantized");
        break;
    case PS_NO_TENSORS: bpcc_buf_adds(b, "not observed: its arguments hold no tensors"); break;
    case PS_GETITEM: bpcc_buf_adds(b, "float: operator.getitem stays float (PyTorch 1.13)"); break;
    case PS_FLOAT_TARGET: bpcc_buf_adds(b, "float: its qconfig keeps float activations"); break;
    case PS_STUB: bpcc_buf_adds(b, "stub: replaced by the observer below (none: the stub is an identity)"); break;
    }
}

static void rule_text(const struct bpcc_prepare_report *r, const struct prep_node *x, struct bpcc_buf *b)
{
    const struct bpcc_node_qconfig *nq = x->qc;
    const char *mf = r->mapping->file ? r->mapping->file : r->mapping->name;
    if (!nq || nq->origin == BPCC_QC_NOT_APPLICABLE) {
        bpcc_buf_adds(b, "-");
        return;
    }
    bpcc_buf_adds(b, bpcc_qc_origin_name(nq->origin));
    if (nq->rule) {
        if (nq->origin == BPCC_QC_MODULE_NAME_OBJECT_TYPE_ORDER)
            bpcc_buf_printf(b, " %s %s #%lld", nq->rule->key, nq->rule->type, (long long)nq->rule->index);
        else bpcc_buf_printf(b, " %s", nq->rule->key);
        bpcc_buf_printf(b, " (%s:%u)", mf ? mf : "?", nq->rule->line);
    } else if (nq->origin == BPCC_QC_GLOBAL && mf) {
        bpcc_buf_printf(b, " (%s)", mf);
    }
    if (nq->qconfig)
        bpcc_buf_printf(b, ": activation %s %s, weight %s %s", bpcc_obs_class_name(nq->qconfig->activation.cls),
                        bpcc_dtype_name(nq->qconfig->activation.dtype), bpcc_obs_class_name(nq->qconfig->weight.cls),
                        bpcc_dtype_name(nq->qconfig->weight.dtype));
    else bpcc_buf_adds(b, ": null (float)");
}

static void pattern_line(const struct prep_match *pm, const struct bpcc_node *n, struct bpcc_buf *b)
{
    char *pt = pattern_text(pm->entry);
    bpcc_buf_printf(b, "%s (%s:%u)", pt ? pt : "?", pm->entry->file, pm->entry->line);
    bpcc_xfree(pt);
    bool root = n == pm->root, last = n == pm->anchor;
    bpcc_buf_adds(b, root && last ? "" : root ? ", its input node" : last ? ", its output node" : ", inside");
    if (pm->obs != OBS_DIFFERENT) bpcc_buf_printf(b, ", %s", bpcc_obs_type_name(pm->obs));
}

/* observers by the node they were inserted for: head[node id] -> first, next[i] -> following */
struct obs_index {
    int32_t *head, *next;
};

static enum bpcc_status obs_index_build(const struct bpcc_prepare_report *r, struct obs_index *ix, struct bpcc_diag *d)
{
    uint32_t n_ids = r->graph->next_id + 1;
    ix->head = bpcc_malloc(n_ids * sizeof *ix->head);
    ix->next = bpcc_malloc((r->n_observers ? r->n_observers : 1) * sizeof *ix->next);
    if (!ix->head || !ix->next) {
        bpcc_xfree(ix->head);
        bpcc_xfree(ix->next);
        return bpcc_diag_nomem(d);
    }
    for (uint32_t i = 0; i < n_ids; i++) ix->head[i] = -1;
    for (uint32_t i = r->n_observers; i-- > 0;) {
        uint32_t id = r->observers[i].for_node->id;
        ix->next[i] = ix->head[id];
        ix->head[id] = (int32_t)i;
    }
    return BPCC_OK;
}

static void obs_index_free(struct obs_index *ix)
{
    bpcc_xfree(ix->head);
    bpcc_xfree(ix->next);
}

static enum bpcc_status explain_text(const struct bpcc_prepare_report *r, char **out, struct bpcc_diag *d)
{
    struct obs_index ix;
    enum bpcc_status s = obs_index_build(r, &ix, d);
    if (s) return s;
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    const char *mf = r->mapping->file ? r->mapping->file : r->mapping->name;
    bpcc_buf_printf(&b, "backend %s, qconfig mapping %s\n", config_name(r), mf ? mf : "?");
    for (uint32_t i = 0; i < r->n_nodes; i++) {
        const struct prep_node *x = &r->nodes[i];
        const struct bpcc_node *n = x->node;
        bpcc_buf_printf(&b, "\n%s  %s %s\n", n->name, bpcc_node_kind_name(n->kind), n->target);
        if (x->status == PS_NOT_APPLICABLE) {
            bpcc_buf_adds(&b, "  result   ");
            reason_text(r, x, &b);
            bpcc_buf_addc(&b, '\n');
            continue;
        }
        bpcc_buf_adds(&b, "  pattern  ");
        if (x->match >= 0) pattern_line(&r->matches[x->match], n, &b);
        else bpcc_buf_adds(&b, "none");
        bpcc_buf_adds(&b, "\n  qconfig  ");
        rule_text(r, x, &b);
        bpcc_buf_adds(&b, "\n  result   ");
        reason_text(r, x, &b);
        bpcc_buf_addc(&b, '\n');
        for (int32_t k = ix.head[n->id]; k >= 0; k = ix.next[k])
                bpcc_buf_printf(&b, "  observer %s (%s %s) on %s, %s\n", r->observers[k].node->name,
                                bpcc_obs_class_name(r->observers[k].spec.cls), bpcc_dtype_name(r->observers[k].spec.dtype),
                                r->observers[k].observed->name, r->observers[k].why);
    }
    obs_index_free(&ix);
    *out = bpcc_buf_take(&b, NULL);
    return *out ? BPCC_OK : bpcc_diag_nomem(d);
}

static json_t *str_of(void (*fn)(const struct bpcc_prepare_report *, const struct prep_node *, struct bpcc_buf *),
                      const struct bpcc_prepare_report *r, const struct prep_node *x)
{
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    fn(r, x, &b);
    char *t = bpcc_buf_take(&b, NULL);
    json_t *j = t ? json_string(t) : NULL;
    bpcc_xfree(t);
    return j;
}

static json_t *pattern_json(const struct prep_match *pm, const struct bpcc_node *n)
{
    json_t *o = json_object();
    char *pt = pattern_text(pm->entry);
    const char *role = n == pm->root && n == pm->anchor ? "root_and_last" : n == pm->root ? "root" : n == pm->anchor ? "last" : "inner";
    bool ok = o && pt && bpcc_json_put(o, "pattern", json_string(pt)) && bpcc_json_put(o, "file", json_string(pm->entry->file)) &&
              bpcc_json_put(o, "line", json_integer(pm->entry->line)) && bpcc_json_put(o, "role", json_string(role)) &&
              bpcc_json_put(o, "observation_type", json_string(bpcc_obs_type_name(pm->obs)));
    bpcc_xfree(pt);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static enum bpcc_status explain_json(const struct bpcc_prepare_report *r, char **out, struct bpcc_diag *d)
{
    struct obs_index ix;
    enum bpcc_status s = obs_index_build(r, &ix, d);
    if (s) return s;
    bpcc_json_init();
    uint64_t failures = bpcc_alloc_failures();
    json_t *root = json_object(), *nodes = json_array();
    bool ok = root && nodes && bpcc_json_put(root, "backend", json_string(bpcc_config_name(r->config))) &&
              bpcc_json_put(root, "qconfig_mapping", r->mapping->name ? json_string(r->mapping->name) : json_null()) &&
              json_object_set(root, "nodes", nodes) == 0;
    for (uint32_t i = 0; ok && i < r->n_nodes; i++) {
        const struct prep_node *x = &r->nodes[i];
        const struct bpcc_node *n = x->node;
        json_t *e = json_object();
        ok = e && json_array_append_new(nodes, e) == 0;
        json_t *obs = ok ? json_array() : NULL;
        ok = ok && obs && bpcc_json_put(e, "name", json_string(n->name)) &&
             bpcc_json_put(e, "op", json_string(bpcc_node_kind_name(n->kind))) && bpcc_json_put(e, "target", json_string(n->target)) &&
             bpcc_json_put(e, "pattern", x->match >= 0 ? pattern_json(&r->matches[x->match], n) : json_null()) &&
             bpcc_json_put(e, "qconfig", bpcc_qconfig_json(x->qc ? x->qc->qconfig : NULL)) &&
             bpcc_json_put(e, "rule", x->qc ? bpcc_qconfig_rule_json(r->assignment, x->qc) : json_null()) &&
             bpcc_json_put(e, "status", json_string(bpcc_prep_status_name(x->status))) &&
             bpcc_json_put(e, "reason", str_of(reason_text, r, x)) &&
             bpcc_json_put(e, "input_dtype", json_string(bpcc_tdt_name(x->in))) &&
             bpcc_json_put(e, "output_dtype", json_string(bpcc_tdt_name(x->out)));
        if (ok && x->weight != TD_ABSENT && x->has_weight) ok = bpcc_json_put(e, "weight_dtype", json_string(bpcc_tdt_name(x->weight)));
        for (int32_t k = ix.head[n->id]; ok && k >= 0; k = ix.next[k])
            ok = json_array_append_new(obs, json_string(r->observers[k].node->name)) == 0;
        ok = ok && json_object_set(e, "observers", obs) == 0;
        json_decref(obs);
    }
    json_decref(nodes);
    obs_index_free(&ix);
    return bpcc_json_finish(root, ok, 2, failures, out, d);
}

enum bpcc_status bpcc_prepare_explain(const struct bpcc_prepare_report *r, bool json, char **out, struct bpcc_diag *d)
{
    *out = NULL;
    return json ? explain_json(r, out, d) : explain_text(r, out, d);
}

/* }================================================ */
