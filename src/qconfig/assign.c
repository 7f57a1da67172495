/*
** assign.c — the qconfig of every node, as prepare_fx decides it (generate_qconfig_map and
** update_qconfig_for_fusion in torch/ao/quantization/fx/qconfig_mapping_utils.py, 1.13).
**
** Precedence, lowest first: global, object_type (the op's type: module class, function, method
** name), module_name_regex (first match, anchored at the start as re.match), module_name (the
** node's module path or its nearest listed ancestor), module_name_object_type_order (the n-th
** call of a type inside one module). A function or method takes the module path and type of the
** scope it was traced in; a call_module node its target; a get_attr node its owner module.
** Every decision records the rule that made it so that `bpcc explain` can name it.
*/
#include "qconfig.h"
#include "../pass/qat.h"

#include <jansson.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) bpcc_malloc(sz)
#define uthash_free(ptr, sz) bpcc_xfree(ptr)
#define uthash_nonfatal_oom(e) (assign_hash_oom = 1)
static int assign_hash_oom;
#include <uthash.h>

#include "../io/json.h"

struct counter {
    const char *key; /* interned "path\x1ftype" */
    int64_t n;
    UT_hash_handle hh;
};

struct bpcc_qconfig_assignment {
    struct bpcc_arena arena;
    struct bpcc_intern intern;
    const struct bpcc_graph *graph;
    const struct bpcc_qconfig_mapping *mapping;
    struct bpcc_node_qconfig *nodes;
    uint32_t n_nodes;
    /* update_qconfig_for_fusion: object_type entries added for fused module types */
    const char **fused_types;
    const struct qc_rule **fused_rules;
    uint32_t n_fused;
};

/* object_type and module_name rules by key; a later rule for the same key replaces an earlier
** (QConfigMapping's dicts). */
struct rule_ix {
    const struct qc_rule *rule;
    UT_hash_handle hh;
};

struct assigner {
    struct bpcc_qconfig_assignment *a;
    const struct bpcc_qconfig_mapping *m;
    struct rule_ix *by_type, *by_name;
    struct counter *counters;
    struct bpcc_diag *d;
    bool qat; /* QAT modules in the graph (bpcc_graph_has_qat) */
};

/* A decision: the qconfig and the rule that chose it (NULL rule: global or no global). */
struct pick {
    const struct qconfig *qc;
    enum bpcc_qc_origin origin;
    const struct qc_rule *rule;
};

static struct pick global_pick(const struct bpcc_qconfig_mapping *m)
{
    struct pick p = {NULL, BPCC_QC_DEFAULT, NULL};
    if (m->has_global) {
        p.qc = m->global;
        p.origin = BPCC_QC_GLOBAL;
    }
    return p;
}

static bool same(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

static const struct qc_rule *find_rule(struct rule_ix *ix, const char *key, size_t len)
{
    struct rule_ix *e;
    HASH_FIND(hh, ix, key, len, e);
    return e ? e->rule : NULL;
}

static enum bpcc_status index_rules(struct assigner *A, enum qc_rule_kind kind, struct rule_ix **head)
{
    for (uint32_t i = 0; i < A->m->n_rules[kind]; i++) {
        const struct qc_rule *r = &A->m->rules[kind][i];
        struct rule_ix *e;
        size_t len = strlen(r->key);
        HASH_FIND(hh, *head, r->key, len, e);
        if (e) {
            e->rule = r;
            continue;
        }
        e = BPCC_ARENA_NEW(&A->a->arena, struct rule_ix);
        if (!e) return bpcc_diag_nomem(A->d);
        e->rule = r;
        assign_hash_oom = 0;
        HASH_ADD_KEYPTR(hh, *head, r->key, len, e);
        if (assign_hash_oom) return bpcc_diag_nomem(A->d);
    }
    return BPCC_OK;
}

/* object_type_qconfigs.get(type, fallback) */
static struct pick object_type(const struct assigner *A, const char *type, struct pick fallback)
{
    if (!type || (!A->by_type && !A->a->n_fused)) return fallback; /* no rule: the type's bytes go unread */
    const struct qc_rule *hit = find_rule(A->by_type, type, strlen(type));
    if (hit) return (struct pick){hit->qc, BPCC_QC_OBJECT_TYPE, hit};
    for (uint32_t i = 0; i < A->a->n_fused; i++)
        if (same(A->a->fused_types[i], type))
            return (struct pick){A->a->fused_rules[i]->qc, BPCC_QC_FUSED_OBJECT_TYPE, A->a->fused_rules[i]};
    return fallback;
}

static struct pick module_name_regex(const struct assigner *A, const char *name, struct pick fallback)
{
    const struct qc_rule *rules = A->m->rules[QR_MODULE_NAME_REGEX];
    uint32_t n = A->m->n_rules[QR_MODULE_NAME_REGEX];
    for (uint32_t i = 0; i < n; i++)
        if (regexec(rules[i].re, name, 0, NULL, 0) == 0) {
            /* the dict keeps the first position of a regex and the value of its last entry */
            const struct qc_rule *r = &rules[i];
            for (uint32_t j = i + 1; j < n; j++)
                if (!strcmp(rules[j].key, r->key)) r = &rules[j];
            return (struct pick){r->qc, BPCC_QC_MODULE_NAME_REGEX, r};
        }
    return fallback;
}

/* The rule for `name`, else for its parent, and so on; "" has none. */
static struct pick module_name(const struct assigner *A, const char *name, struct pick fallback)
{
    if (!A->by_name) return fallback; /* no rule: the name's bytes go unread (a cache miss a node) */
    size_t len = strlen(name);
    while (len > 0) {
        const struct qc_rule *hit = find_rule(A->by_name, name, len);
        if (hit) return (struct pick){hit->qc, BPCC_QC_MODULE_NAME, hit};
        while (len > 0 && name[len - 1] != '.') len--;
        if (len > 0) len--; /* drop the '.' */
    }
    return fallback;
}

/* maybe_adjust_qconfig_for_module_type_or_name */
static struct pick type_or_name(const struct assigner *A, const char *type, const char *name, struct pick fallback)
{
    struct pick p = object_type(A, type, fallback);
    p = module_name_regex(A, name, p);
    return module_name(A, name, p);
}

/* The invocation index of `type` inside module `path` (counted in graph order), then the
** module_name_object_type_order rule for it, if any. */
static enum bpcc_status order(struct assigner *A, const char *path, size_t path_len, const char *type,
                              struct pick *p)
{
    if (!type || A->m->n_rules[QR_MODULE_NAME_OBJECT_TYPE_ORDER] == 0) return BPCC_OK; /* nothing to count for */
    struct bpcc_buf b;
    bpcc_buf_init(&b);
    bpcc_buf_printf(&b, "%.*s\x1f%s", (int)path_len, path, type);
    const char *key = b.oom ? NULL : bpcc_intern_n(&A->a->intern, b.data, b.len);
    bpcc_buf_release(&b);
    if (!key) return bpcc_diag_nomem(A->d);
    struct counter *c;
    HASH_FIND_PTR(A->counters, &key, c);
    if (!c) {
        c = BPCC_ARENA_NEW(&A->a->arena, struct counter);
        if (!c) return bpcc_diag_nomem(A->d);
        c->key = key;
        assign_hash_oom = 0;
        HASH_ADD_PTR(A->counters, key, c);
        if (assign_hash_oom) return bpcc_diag_nomem(A->d);
    }
    int64_t idx = c->n++;
    const struct qc_rule *hit = NULL; /* a later entry for the same (name, type, index) replaces an earlier */
    for (uint32_t i = 0; i < A->m->n_rules[QR_MODULE_NAME_OBJECT_TYPE_ORDER]; i++) {
        const struct qc_rule *r = &A->m->rules[QR_MODULE_NAME_OBJECT_TYPE_ORDER][i];
        if (r->index == idx && same(r->type, type) && strlen(r->key) == path_len &&
            memcmp(r->key, path, path_len) == 0)
            hit = r;
    }
    if (hit) *p = (struct pick){hit->qc, BPCC_QC_MODULE_NAME_OBJECT_TYPE_ORDER, hit};
    return BPCC_OK;
}

static bool is_fused_type(const char *t)
{
    static const char *const prefixes[] = {"torch.ao.nn.intrinsic.", "torch.nn.intrinsic."};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        size_t n = strlen(prefixes[i]);
        if (strncmp(t, prefixes[i], n) == 0 && !strchr(t + n, '.')) return true;
    }
    return false;
}

/* update_qconfig_for_fusion: a fused module called by the graph takes the object_type qconfig of
** its first part, which every other part must share. */
static enum bpcc_status fusion(struct assigner *A)
{
    struct bpcc_qconfig_assignment *a = A->a;
    if (A->m->n_rules[QR_OBJECT_TYPE] == 0) return BPCC_OK;
    for (const struct bpcc_node *n = a->graph->first; n; n = n->next) {
        if (n->kind != BPCC_NODE_CALL_MODULE) continue;
        const struct bpcc_module *mod = bpcc_node_module(n);
        if (!mod || !is_fused_type(mod->type) || !mod->first_child) continue;
        struct pick none = {NULL, BPCC_QC_DEFAULT, NULL};
        struct pick first = object_type(A, mod->first_child->type, none);
        for (const struct bpcc_module *c = mod->first_child->next_sibling; c; c = c->next_sibling) {
            struct pick other = object_type(A, c->type, none);
            if (!bpcc_qconfig_equal(other.qc, first.qc)) {
                char w1[32] = "no rule", w2[32] = "no rule";
                if (first.rule) snprintf(w1, sizeof w1, "line %u", first.rule->line);
                if (other.rule) snprintf(w2, sizeof w2, "line %u", other.rule->line);
                bpcc_diag_error(A->d, BPCC_ERR_CONFIG, a->graph->source_file, n->src_line, n->src_col,
                                "node '%s': the parts of fused module '%s' (%s) have different object_type "
                                "qconfigs in %s: %s (%s) and %s (%s)", n->name, mod->name, mod->type,
                                A->m->file ? A->m->file : "the mapping", mod->first_child->type, w1, c->type, w2);
                bpcc_diag_note(A->d, 0, 0, "give every part of a fused module the same object_type qconfig, "
                                           "as PyTorch requires (update_qconfig_for_fusion)");
                return BPCC_ERR_CONFIG;
            }
        }
        if (!first.qc) continue;
        bool known = false;
        for (uint32_t i = 0; i < a->n_fused; i++) known = known || same(a->fused_types[i], mod->type);
        if (known) continue;
        const char **t = BPCC_ARENA_NEWN(&a->arena, const char *, a->n_fused + 1);
        const struct qc_rule **r = BPCC_ARENA_NEWN(&a->arena, const struct qc_rule *, a->n_fused + 1);
        if (!t || !r) return bpcc_diag_nomem(A->d);
        if (a->n_fused) {
            memcpy(t, a->fused_types, a->n_fused * sizeof *t);
            memcpy(r, a->fused_rules, a->n_fused * sizeof *r);
        }
        t[a->n_fused] = mod->type;
        r[a->n_fused] = first.rule;
        a->fused_types = t;
        a->fused_rules = r;
        a->n_fused++;
    }
    return BPCC_OK;
}

static size_t parent_len(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot ? (size_t)(dot - name) : 0;
}

/* The type a call_module node was traced as: a fused module's first part (the fused node keeps
** the name, hence the scope, of the pattern's root module), otherwise the module's own type. */
/* the type of a call_module node's module as traced: a fused module's first part's */
static const char *traced_type(const struct bpcc_node *n, const char *type)
{
    if (!is_fused_type(type)) return type;
    const struct bpcc_module *mod = bpcc_node_module(n);
    return mod->first_child ? mod->first_child->type : type;
}

static enum bpcc_status assign_node(struct assigner *A, const struct bpcc_node *n, struct bpcc_node_qconfig *out)
{
    const struct bpcc_graph *g = A->a->graph;
    struct pick p = {NULL, BPCC_QC_NOT_APPLICABLE, NULL};
    struct pick glob = global_pick(A->m);
    const char *stype, *spath = bpcc_node_scope(n, &stype);
    const char *path = spath ? spath : "";
    enum bpcc_status s = BPCC_OK;
    switch ((enum bpcc_node_kind)n->kind) {
    case BPCC_NODE_GET_ATTR: {
        size_t pl = parent_len(n->target);
        char *owner = bpcc_arena_strndup(&A->a->arena, n->target, pl);
        if (!owner) return bpcc_diag_nomem(A->d);
        const struct bpcc_module *mod = bpcc_graph_find_module(g, owner);
        /* tracing leaves containers as plain modules; the root is the GraphModule */
        const char *type = mod ? mod->type : pl ? "torch.nn.Module" : "torch.fx.GraphModule";
        p = type_or_name(A, type, owner, glob);
        break;
    }
    case BPCC_NODE_CALL_FUNCTION:
        p = object_type(A, n->target, glob);
        p = type_or_name(A, stype, path, p);
        s = order(A, path, strlen(path), n->target, &p);
        break;
    case BPCC_NODE_CALL_METHOD:
        p = type_or_name(A, n->target, path, glob);
        p = type_or_name(A, stype, path, p);
        break;
    case BPCC_NODE_CALL_MODULE: {
        const char *type = bpcc_node_module_type(n);
        if (!type)
            return bpcc_diag_error(A->d, BPCC_ERR_GRAPH, g->source_file, n->src_line, n->src_col,
                                   "node '%s' calls '%s', which is not a module", n->name, n->target);
        /* a QAT module was its float root when prepare_qat_fx assigned its qconfig (PyTorch's
        ** update_qconfig_for_qat gives the QAT class the float class's object_type qconfig) */
        const char *qat_root = A->qat ? bpcc_qat_float_root(type) : NULL;
        p = type_or_name(A, qat_root ? qat_root : type, n->target, glob);
        s = order(A, n->target, parent_len(n->target), qat_root ? qat_root : traced_type(n, type), &p);
        break;
    }
    default:
        break;
    }
    out->node = n;
    out->qconfig = p.qc;
    out->origin = p.origin;
    out->rule = p.rule;
    return s;
}

static void assigner_free(struct assigner *A)
{
    HASH_CLEAR(hh, A->counters);
    HASH_CLEAR(hh, A->by_type);
    HASH_CLEAR(hh, A->by_name);
}

void bpcc_qconfig_assignment_free(struct bpcc_qconfig_assignment *a)
{
    if (!a) return;
    bpcc_intern_release(&a->intern);
    bpcc_arena_release(&a->arena);
    bpcc_xfree(a);
}

enum bpcc_status bpcc_qconfig_assign(const struct bpcc_graph *g, const struct bpcc_qconfig_mapping *m,
                                     struct bpcc_qconfig_assignment **out, struct bpcc_diag *d)
{
    *out = NULL;
    struct bpcc_qconfig_assignment *a = bpcc_malloc(sizeof *a);
    if (!a) return bpcc_diag_nomem(d);
    memset(a, 0, sizeof *a);
    bpcc_arena_init(&a->arena);
    bpcc_intern_init(&a->intern, &a->arena);
    a->graph = g;
    a->mapping = m;
    struct assigner A = {.a = a, .m = m, .d = d, .qat = bpcc_graph_has_qat(g)};
    enum bpcc_status s = index_rules(&A, QR_OBJECT_TYPE, &A.by_type);
    if (!s) s = index_rules(&A, QR_MODULE_NAME, &A.by_name);
    if (!s) s = fusion(&A);
    if (!s) {
        a->nodes = BPCC_ARENA_NEWN(&a->arena, struct bpcc_node_qconfig, g->n_nodes ? g->n_nodes : 1);
        if (!a->nodes) s = bpcc_diag_nomem(d);
    }
    for (const struct bpcc_node *n = g->first; !s && n; n = n->next)
        s = assign_node(&A, n, &a->nodes[a->n_nodes++]);
    assigner_free(&A);
    if (s) {
        bpcc_qconfig_assignment_free(a);
        return s;
    }
    *out = a;
    return BPCC_OK;
}

uint32_t bpcc_qconfig_assignment_count(const struct bpcc_qconfig_assignment *a) { return a->n_nodes; }

const struct bpcc_node_qconfig *bpcc_qconfig_assignment_at(const struct bpcc_qconfig_assignment *a, uint32_t i)
{
    return i < a->n_nodes ? &a->nodes[i] : NULL;
}

const struct bpcc_node *bpcc_qconfig_assignment_node(const struct bpcc_qconfig_assignment *a, uint32_t i)
{
    return i < a->n_nodes ? a->nodes[i].node : NULL;
}

bool bpcc_qconfig_assignment_quantized(const struct bpcc_qconfig_assignment *a, uint32_t i)
{
    return i < a->n_nodes && a->nodes[i].qconfig != NULL;
}

enum bpcc_qc_origin bpcc_qconfig_assignment_origin(const struct bpcc_qconfig_assignment *a, uint32_t i,
                                                   uint32_t *line_out)
{
    if (line_out) *line_out = i < a->n_nodes && a->nodes[i].rule ? a->nodes[i].rule->line : 0;
    return i < a->n_nodes ? a->nodes[i].origin : BPCC_QC_NOT_APPLICABLE;
}

const char *bpcc_qc_origin_name(enum bpcc_qc_origin o)
{
    static const char *const names[] = {"not_applicable", "default", "global", "object_type", "fused_object_type",
                                        "module_name_regex", "module_name", "module_name_object_type_order"};
    return (unsigned)o < sizeof names / sizeof *names ? names[o] : "?";
}


json_t *bpcc_qconfig_rule_json(const struct bpcc_qconfig_assignment *a, const struct bpcc_node_qconfig *nq)
{
    json_t *r = json_object();
    bool ok = r && bpcc_json_put(r, "kind", json_string(bpcc_qc_origin_name(nq->origin)));
    if (ok && nq->rule) {
        ok = bpcc_json_put(r, nq->origin == BPCC_QC_MODULE_NAME_REGEX ? "regex" :
                    nq->origin == BPCC_QC_OBJECT_TYPE || nq->origin == BPCC_QC_FUSED_OBJECT_TYPE ? "type" : "name",
                 json_string(nq->rule->key));
        if (ok && nq->origin == BPCC_QC_MODULE_NAME_OBJECT_TYPE_ORDER)
            ok = bpcc_json_put(r, "type", json_string(nq->rule->type)) && bpcc_json_put(r, "index", json_integer(nq->rule->index));
        if (ok && a->mapping->file) ok = bpcc_json_put(r, "file", json_string(a->mapping->file));
        ok = ok && bpcc_json_put(r, "line", json_integer(nq->rule->line));
    }
    if (!ok) {
        json_decref(r);
        return NULL;
    }
    return r;
}

enum bpcc_status bpcc_qconfig_assignment_json(const struct bpcc_qconfig_assignment *a, int indent, char **out,
                                              struct bpcc_diag *d)
{
    *out = NULL;
    bpcc_json_init();
    uint64_t failures = bpcc_alloc_failures();
    json_t *root = json_object(), *nodes = json_array();
    bool ok = root && nodes && bpcc_json_put(root, "qconfig_mapping", a->mapping->name ? json_string(a->mapping->name) : json_null());
    ok = ok && json_object_set(root, "nodes", nodes) == 0;
    for (uint32_t i = 0; ok && i < a->n_nodes; i++) {
        const struct bpcc_node_qconfig *nq = &a->nodes[i];
        json_t *e = json_object();
        ok = e && json_array_append_new(nodes, e) == 0 && bpcc_json_put(e, "name", json_string(nq->node->name)) &&
             bpcc_json_put(e, "op", json_string(bpcc_node_kind_name(nq->node->kind))) &&
             bpcc_json_put(e, "target", json_string(nq->node->target)) && bpcc_json_put(e, "qconfig", bpcc_qconfig_json(nq->qconfig)) &&
             bpcc_json_put(e, "rule", bpcc_qconfig_rule_json(a, nq));
    }
    json_decref(nodes);
    return bpcc_json_finish(root, ok, indent, failures, out, d);
}
