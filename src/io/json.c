/*
** json.c — JSON output (jansson): the model description behind `bpcc show --json`, whose
** shape docs/SHOW.md documents, and the value encoding shared by every --json output.
*/
#include "json.h"

#include <math.h>

/* jansson's allocations go through bpcc's hook (failure injection, the caller's allocator) */
static void *json_alloc(size_t n) { return bpcc_malloc(n); }
static void json_release(void *p) { bpcc_xfree(p); }

void bpcc_json_init(void)
{
    static bool done;
    if (!done) {
        json_set_alloc_funcs(json_alloc, json_release);
        done = true;
    }
}

/* {tag: v}, taking v's reference in every case. */
static json_t *tagged(const char *tag, json_t *v)
{
    json_t *o = json_object();
    if (!o) {
        json_decref(v);
        return NULL;
    }
    if (json_object_set_new(o, tag, v)) { /* takes v even when it fails */
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *ttype_json(const struct bpcc_value *v)
{
    json_t *o = json_object(), *shape = json_array();
    bool ok = o && shape &&
              json_object_set_new(o, "dtype", json_string(bpcc_dtype_name(v->u.ttype.dtype))) == 0;
    for (uint32_t i = 0; ok && i < v->n; i++)
        ok = json_array_append_new(shape, json_integer(v->u.ttype.dims[i])) == 0;
    if (ok) {
        ok = json_object_set_new(o, "shape", shape) == 0;
        shape = NULL;
    }
    json_decref(shape);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Encoding: None null, bool, int, float (non-finite: {"float": "inf"}), str, and tagged objects
** {"node"}, {"tuple"}, {"dict"}, {"slice"}, {"dtype"}, {"ellipsis"}, {"symbol"}, {"device"};
** lists are arrays. `top` encodes a TUPLE as an array and a DICT as an object (args, kwargs,
** attributes). */
json_t *bpcc_value_to_json(const struct bpcc_value *v, bool top)
{
    switch (v->kind) {
    case BPCC_VAL_NONE: return json_null();
    case BPCC_VAL_BOOL: return json_boolean(v->u.b);
    case BPCC_VAL_INT: return json_integer(v->u.i);
    case BPCC_VAL_FLOAT:
        if (isfinite(v->u.f)) return json_real(v->u.f);
        return tagged("float", json_string(isnan(v->u.f) ? "nan" : v->u.f > 0 ? "inf" : "-inf"));
    case BPCC_VAL_STR: return json_string(v->u.s);
    case BPCC_VAL_NODE: return tagged("node", json_string(v->u.node->name));
    case BPCC_VAL_ATTR: return tagged("node", json_string(v->u.attr.name)); /* the node it stands for */
    case BPCC_VAL_DTYPE: return tagged("dtype", json_string(bpcc_dtype_name(v->u.dtype)));
    case BPCC_VAL_ELLIPSIS: return tagged("ellipsis", json_true());
    case BPCC_VAL_SYMBOL: return tagged("symbol", json_string(v->u.s));
    case BPCC_VAL_DEVICE: return tagged("device", json_string(v->u.s));
    case BPCC_VAL_TTYPE: return ttype_json(v);
    case BPCC_VAL_DICT: {
        json_t *o = json_object();
        for (uint32_t i = 0; o && i < v->n; i++) {
            json_t *item = bpcc_value_to_json(&v->u.seq.items[i], false);
            if (!item || json_object_set_new(o, v->u.seq.keys[i], item)) {
                json_decref(o);
                return NULL;
            }
        }
        return top ? o : tagged("dict", o);
    }
    case BPCC_VAL_LIST:
    case BPCC_VAL_TUPLE:
    case BPCC_VAL_SLICE: {
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < v->n; i++)
            if (json_array_append_new(a, bpcc_value_to_json(&v->u.seq.items[i], false))) {
                json_decref(a);
                return NULL;
            }
        if (v->kind == BPCC_VAL_LIST || (top && v->kind == BPCC_VAL_TUPLE)) return a;
        return tagged(v->kind == BPCC_VAL_SLICE ? "slice" : "tuple", a);
    }
    default: return NULL;
    }
}

/* Meta: a tensor type object, an array of metas, or null. */
static json_t *meta_json(const struct bpcc_value *m)
{
    if (m->kind == BPCC_VAL_TTYPE) return ttype_json(m);
    if (m->kind == BPCC_VAL_TUPLE || m->kind == BPCC_VAL_LIST) {
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < m->n; i++)
            if (json_array_append_new(a, meta_json(&m->u.seq.items[i]))) {
                json_decref(a);
                return NULL;
            }
        return a;
    }
    return json_null();
}


/* A new empty array stored under key in o (o owns it); a borrowed pointer, NULL on failure. */
static json_t *put_array(json_t *o, const char *key)
{
    json_t *a = json_array();
    return bpcc_json_put(o, key, a) ? a : NULL;
}

/* the same for an empty object */
static json_t *put_object(json_t *o, const char *key)
{
    json_t *a = json_object();
    return bpcc_json_put(o, key, a) ? a : NULL;
}

/* {"kind", "dtype", "scale", "zero_point"} (numbers per tensor, arrays per channel, with "axis") */
static json_t *zero_point_json(const struct bpcc_qparams *q, uint64_t i)
{
    double z = bpcc_qparams_zero_point(q, i);
    bool integral = !q->zero_point || (q->zero_point->dtype != BPCC_DTYPE_F32 && q->zero_point->dtype != BPCC_DTYPE_F64);
    return integral ? json_integer((json_int_t)z) : json_real(z);
}

static json_t *qparams_json(const struct bpcc_qparams *q)
{
    json_t *o = json_object();
    bool ok = o && bpcc_json_put(o, "kind", json_string(bpcc_qparams_kind_name(q->kind))) &&
              bpcc_json_put(o, "dtype", json_string(bpcc_dtype_name(q->dtype)));
    if (ok && q->kind == BPCC_QPARAMS_PER_TENSOR)
        ok = bpcc_json_put(o, "scale", json_real(bpcc_qparams_scale(q, 0))) &&
             bpcc_json_put(o, "zero_point", zero_point_json(q, 0));
    if (ok && q->kind == BPCC_QPARAMS_PER_CHANNEL) {
        json_t *sc = put_array(o, "scale"), *zp = sc ? put_array(o, "zero_point") : NULL;
        ok = zp && bpcc_json_put(o, "axis", json_integer(q->axis));
        for (uint64_t i = 0; ok && i < q->n; i++)
            ok = !json_array_append_new(sc, json_real(bpcc_qparams_scale(q, i))) &&
                 !json_array_append_new(zp, zero_point_json(q, i));
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *node_json(const struct bpcc_graph *g, const struct bpcc_node *n)
{
    json_t *o = json_object(), *users = NULL;
    bool ok = o && bpcc_json_put(o, "name", json_string(n->name)) &&
              bpcc_json_put(o, "op", json_string(bpcc_node_kind_name(n->kind))) &&
              bpcc_json_put(o, "target", json_string(n->target)) &&
              bpcc_json_put(o, "args", bpcc_value_to_json(&n->args, true)) &&
              bpcc_json_put(o, "kwargs", bpcc_value_to_json(bpcc_node_kwargs(n), true)) &&
              (users = put_array(o, "users")) != NULL;
    for (uint32_t i = 0; ok && i < n->n_users; i++)
        ok = json_array_append_new(users, json_string(n->users[i].node->name)) == 0;
    ok = ok && bpcc_json_put(o, "meta", meta_json(bpcc_node_meta(n)));
    if (ok && n->scope) {
        json_t *sc = json_pack("[ss]", n->scope[0], n->scope[1]);
        ok = bpcc_json_put(o, "scope", sc);
    }
    struct bpcc_qparams q;
    if (ok && bpcc_node_qparams(g, n, &q)) ok = bpcc_json_put(o, "qparams", qparams_json(&q));
    const struct bpcc_module *wm = ok ? bpcc_node_weight_module(g, n) : NULL;
    if (wm && bpcc_module_weight_qparams(wm, &q)) {
        json_t *w = qparams_json(&q);
        ok = bpcc_json_put(o, "weight_qparams", w) && bpcc_json_put(w, "module", json_string(wm->name));
    } else if (ok && n->kind == BPCC_NODE_CALL_MODULE && (wm = bpcc_graph_find_module(g, n->target))) {
        /* a reference LSTM or cell: {"weight_ih_l0": {...}, ...}, each with the module */
        json_t *all = NULL;
        const char *wn;
        for (uint32_t i = 0; ok && bpcc_module_next_weight_qparams(wm, &i, &wn, &q);) {
            if (!all) ok = (all = put_object(o, "weights_qparams")) != NULL;
            json_t *w = ok ? qparams_json(&q) : NULL;
            ok = ok && bpcc_json_put(all, wn, w) && bpcc_json_put(w, "module", json_string(wm->name));
        }
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static bool tensor_json(json_t *ts, const struct bpcc_module *m, const struct module_tensor *mt)
{
    json_t *t = json_object(), *shape = NULL;
    if (!t || json_array_append_new(ts, t)) return false; /* ts owns t from here */
    char key[1024];
    snprintf(key, sizeof key, "%s%s%s", m->name, m->name[0] ? "." : "", mt->name);
    bool bad_shape;
    size_t nb = bpcc_tensor_expected_bytes(mt->t, &bad_shape);
    bool ok = bpcc_json_put(t, "name", json_string(mt->name)) &&
              bpcc_json_put(t, "role", json_string(bpcc_tensor_role_name(mt->role))) &&
              bpcc_json_put(t, "key", json_string(key)) &&
              bpcc_json_put(t, "dtype", json_string(bpcc_dtype_name(mt->t->dtype))) &&
              (shape = put_array(t, "shape")) != NULL;
    for (uint32_t i = 0; ok && i < mt->t->ndim; i++)
        ok = json_array_append_new(shape, json_integer(mt->t->dims[i])) == 0;
    return ok && bpcc_json_put(t, "bytes", json_integer((json_int_t)nb));
}

static json_t *module_json(const struct bpcc_module *m, uint64_t *n_params, uint64_t *bytes)
{
    json_t *o = json_object(), *ts = NULL;
    bool ok = o && bpcc_json_put(o, "name", json_string(m->name)) && bpcc_json_put(o, "type", json_string(m->type)) &&
              bpcc_json_put(o, "attributes", bpcc_value_to_json(&m->attrs, true)) &&
              (ts = put_array(o, "tensors")) != NULL;
    for (uint32_t k = 0; ok && k < m->n_tensors; k++) {
        const struct module_tensor *mt = &m->tensors[k];
        ok = tensor_json(ts, m, mt);
        bool bad_shape;
        if (mt->role == BPCC_TENSOR_PARAM) *n_params += bpcc_tensor_numel(mt->t);
        *bytes += bpcc_tensor_expected_bytes(mt->t, &bad_shape);
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

struct implicit_json {
    json_t *nodes;
    const struct bpcc_node *user;
    uint32_t count;
    bool ok;
};

/* A get_attr node left implicit in an argument of the user (BPCC_VAL_ATTR,
** bpcc_graph_set_implicit_qparams), appended to the nodes as the node it stands for: as the text
** has it, just before its user. */
static void implicit_json(const struct bpcc_value *v, void *ud)
{
    struct implicit_json *c = ud;
    c->count++;
    json_t *o = c->ok ? json_pack("{s:s, s:s, s:s, s:[], s:{}, s:[s], s:n}", "name", v->u.attr.name, "op", "get_attr",
                                  "target", v->u.attr.target, "args", "kwargs", "users", c->user->name, "meta")
                      : NULL;
    c->ok = o && json_array_append_new(c->nodes, o) == 0;
}

enum bpcc_status bpcc_graph_to_json(const struct bpcc_graph *g, int indent, char **json_out,
                                    struct bpcc_diag *d)
{
    *json_out = NULL;
    bpcc_json_init();
    uint64_t failures = bpcc_alloc_failures();
    json_t *root = json_object(), *nodes = json_array(), *mods = json_array();
    json_t *summary = json_object(), *kinds = json_object();
    bool ok = root && nodes && mods && summary && kinds;
    uint32_t kind_count[BPCC_NODE_KIND_COUNT] = {0};
    struct implicit_json implicit = {.nodes = nodes, .ok = true};
    for (const struct bpcc_node *n = g->first; ok && n; n = n->next) {
        kind_count[n->kind]++;
        implicit.user = n;
        bpcc_value_visit_attrs(&n->args, implicit_json, &implicit);
        if (n->kwargs) bpcc_value_visit_attrs(n->kwargs, implicit_json, &implicit);
        ok = implicit.ok && json_array_append_new(nodes, node_json(g, n)) == 0;
    }
    uint32_t n_implicit = implicit.count;
    kind_count[BPCC_NODE_GET_ATTR] += n_implicit;
    uint64_t n_params = 0, bytes = 0, n_tensors = 0;
    for (uint32_t i = 0; ok && i < g->n_modules; i++) {
        n_tensors += g->modules[i]->n_tensors;
        ok = json_array_append_new(mods, module_json(g->modules[i], &n_params, &bytes)) == 0;
    }
    for (int k = 0; ok && k < BPCC_NODE_KIND_COUNT; k++)
        ok = bpcc_json_put(kinds, bpcc_node_kind_name((enum bpcc_node_kind)k), json_integer(kind_count[k]));
    ok = ok && bpcc_json_put(summary, "nodes", json_integer((json_int_t)g->n_nodes + n_implicit)) &&
         bpcc_json_put(summary, "modules", json_integer(g->n_modules)) &&
         bpcc_json_put(summary, "tensors", json_integer((json_int_t)n_tensors)) &&
         bpcc_json_put(summary, "parameters", json_integer((json_int_t)n_params)) &&
         bpcc_json_put(summary, "tensor_bytes", json_integer((json_int_t)bytes));
    if (ok) {
        ok = bpcc_json_put(summary, "node_kinds", kinds);
        kinds = NULL;
    }
    ok = ok && bpcc_json_put(root, "format", json_string("bpcc-model")) &&
         bpcc_json_put(root, "version", json_integer(1)) &&
         bpcc_json_put(root, "source", g->source_file ? json_string(g->source_file) : json_null()) &&
         bpcc_json_put(root, "weights", g->weights_name ? json_string(g->weights_name) : json_null());
    if (ok) { ok = bpcc_json_put(root, "summary", summary); summary = NULL; }
    if (ok) { ok = bpcc_json_put(root, "nodes", nodes); nodes = NULL; }
    if (ok) { ok = bpcc_json_put(root, "modules", mods); mods = NULL; }
    json_decref(nodes);
    json_decref(mods);
    json_decref(summary);
    json_decref(kinds);
    return bpcc_json_finish(root, ok, indent, failures, json_out, d);
}

bool bpcc_json_put(json_t *o, const char *key, json_t *v) { return v && json_object_set_new(o, key, v) == 0; }

enum bpcc_status bpcc_json_finish(json_t *root, bool ok, int indent, uint64_t failures, char **out,
                                  struct bpcc_diag *d)
{
    char *text = ok && root ? json_dumps(root, (indent > 0 ? JSON_INDENT(indent) : JSON_COMPACT) |
                                                   JSON_REAL_PRECISION(17))
                            : NULL;
    json_decref(root);
    if (!text || bpcc_alloc_failures() != failures) { /* see safetensors.c */
        bpcc_xfree(text);
        return bpcc_diag_nomem(d);
    }
    *out = text;
    return BPCC_OK;
}
