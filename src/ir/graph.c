/*
** graph.c — graphs and nodes: creation, FX-style naming, use-def (users), ordering and
** mutation. Two arenas per graph, one for the nodes and one for everything else (see `nodes` in
** ir.h); nothing is freed individually.
*/
#include "ir.h"

/* Every name ever given to a node keeps the node in its intern slot's value (bpcc_intern_value),
** also once the node is erased (dead; its memory stays): the name stays reserved. Erasing a node
** does not touch the table, whose probe is a cache miss on a big graph; a restored graph has ERASED
** for the names of nodes erased before its snapshot. g->bases: FX-style numbering state, base
** name -> the last number handed out (an int64_t in the arena), keyed by the interned base. */
static char erased_mark;
#define ERASED ((void *)&erased_mark)

/* the live node a name's slot value holds, or NULL (none, ERASED, or an erased node) */
static struct bpcc_node *live(void *v)
{
    struct bpcc_node *n = v != ERASED ? v : NULL;
    return n && !n->dead ? n : NULL;
}

static const char *const node_kind_names[BPCC_NODE_KIND_COUNT] = {
    [BPCC_NODE_PLACEHOLDER] = "placeholder",     [BPCC_NODE_GET_ATTR] = "get_attr",
    [BPCC_NODE_CALL_MODULE] = "call_module",     [BPCC_NODE_CALL_FUNCTION] = "call_function",
    [BPCC_NODE_CALL_METHOD] = "call_method",     [BPCC_NODE_OUTPUT] = "output",
};
_Static_assert(BPCC_NODE_KIND_COUNT == 6, "node_kind_names needs the new kind");

const char *bpcc_node_kind_name(enum bpcc_node_kind k)
{
    return (unsigned)k < BPCC_NODE_KIND_COUNT ? node_kind_names[k] : "?";
}

enum bpcc_node_kind bpcc_node_kind_from_name(const char *name)
{
    for (int k = 0; k < BPCC_NODE_KIND_COUNT; k++)
        if (strcmp(name, node_kind_names[k]) == 0) return (enum bpcc_node_kind)k;
    return BPCC_NODE_KIND_COUNT;
}


enum bpcc_status bpcc_graph_new(struct bpcc_graph **out, struct bpcc_diag *d)
{
    *out = NULL;
    struct bpcc_graph *g = bpcc_malloc(sizeof *g);
    if (!g) return bpcc_diag_nomem(d);
    memset(g, 0, sizeof *g);
    bpcc_arena_init(&g->arena);
    bpcc_arena_init(&g->nodes);
    bpcc_intern_init(&g->intern, &g->arena);
    *out = g;
    return BPCC_OK;
}

/* the heap parts beside the arenas: hash tables, the module table */
static void release_tables(struct bpcc_graph *g)
{
    bpcc_strmap_release(&g->shapes);
    bpcc_strmap_release(&g->bases);
    bpcc_graph_release_modules(g);
    bpcc_intern_release(&g->intern);
}

void bpcc_graph_free(struct bpcc_graph *g)
{
    if (!g) return;
    release_tables(g);
    bpcc_xfree(g->by_id);
    if (g->weights) bpcc_safetensors_close(g->weights);
    bpcc_arena_release(&g->arena);
    bpcc_arena_release(&g->nodes);
    bpcc_xfree(g);
}

enum bpcc_status bpcc_graph_end_pass(struct bpcc_graph *g, struct bpcc_graph *snap, enum bpcc_status s)
{
    if (s && !snap) return s; /* rollback off: g is only fit for bpcc_graph_free */
    if (s) bpcc_graph_restore(g, snap);
    else bpcc_graph_free(snap);
    bpcc_graph_resolve_modules(g); /* modules replaced during the pass, or the snapshot's nodes */
    return s;
}

void bpcc_graph_restore(struct bpcc_graph *g, struct bpcc_graph *snap)
{
    struct bpcc_graph failed = *g;
    struct bpcc_safetensors *weights = failed.weights;
    failed.weights = NULL;
    /* the failed state's intern table holds every string the snapshot shares (and those the pass
    ** made): the restored graph keeps it */
    struct bpcc_intern strings = failed.intern;
    failed.intern.table = (struct bpcc_strmap){0};
    struct bpcc_strmap shapes = failed.shapes; /* the same for the dims of tensor types */
    failed.shapes = (struct bpcc_strmap){0};
    release_tables(&failed);
    bpcc_intern_release(&snap->intern);
    bpcc_strmap_release(&snap->shapes);
    /* the node names as they were, in the table kept (every name of the snapshot is there:
    ** interning only adds). A slot holds a node of the failed state, whose memory stays (below),
    ** or ERASED: a node the snapshot copied names its copy again, one made after the snapshot
    ** (its id at or past the snapshot's next_id) names nothing, one erased before it stays
    ** ERASED. Ids are unique among the nodes the slots hold: the ids a restore hands out again
    ** were those of nodes whose names it freed. */
    BPCC_STRMAP_FOREACH(&strings.table, e) if (e->value && e->value != ERASED) {
        uint32_t id = ((const struct bpcc_node *)e->value)->id;
        e->value = id >= snap->next_id ? NULL : snap->by_id[id] ? (void *)snap->by_id[id] : ERASED;
    }
    bpcc_xfree(snap->by_id);
    snap->by_id = NULL;
    /* the failed state's storage stays alive in the restored graph: the snapshot's tensors share
    ** their data with it */
    bpcc_arena_adopt(&snap->arena, &failed.arena);
    bpcc_arena_adopt(&snap->arena, &failed.nodes);
    *g = *snap;
    g->weights = weights;
    g->intern = strings;
    g->intern.arena = &g->arena;
    g->shapes = shapes;
    for (struct bpcc_node *x = g->first; x; x = x->next) x->graph = g;
    for (uint32_t i = 0; i < g->n_modules; i++) g->modules[i]->graph = g;
    bpcc_xfree(snap);
}

const char *bpcc_graph_intern(struct bpcc_graph *g, const char *s)
{
    return bpcc_intern_n(&g->intern, s, strlen(s));
}

const int64_t *bpcc_graph_intern_dims(struct bpcc_graph *g, const int64_t *dims, uint32_t n)
{
    if (!n) return NULL;
    size_t len = (size_t)n * sizeof *dims;
    uint32_t h = bpcc_str_hash((const char *)dims, len);
    struct bpcc_strmap_slot *e = bpcc_strmap_get(&g->shapes, (const char *)dims, len, h);
    if (e) return (const int64_t *)(const void *)e->key;
    int64_t *copy = BPCC_ARENA_NEWN(&g->arena, int64_t, n);
    if (!copy) return NULL;
    memcpy(copy, dims, len);
    return bpcc_strmap_put(&g->shapes, (const char *)copy, len, h, NULL) ? NULL : copy;
}

/* {==================== names ==================== */

/* A node's name comes with its length and hash (struct name), computed once: looked up, interned
** and reserved under the same hash. */
struct name {
    const char *s;
    size_t len;
    uint32_t hash;
};

static struct name name_of(const char *s)
{
    size_t len = strlen(s);
    return (struct name){s, len, bpcc_str_hash(s, len)};
}

/* FX's _Namespace.create_name: split a trailing "_<digits>", then count up from the last
** number handed out for that base until the candidate is free. Candidates are built on the stack;
** each is looked up and interned by one probe (taken ones are node names, interned already), and
** the chosen one comes back in *out with its intern slot, for the node (false when out of memory).
** The slot lasts until the next string is interned. */
static bool unique_name(struct bpcc_graph *g, const char *candidate, struct name *out, void ***slot)
{
    size_t clen = strlen(candidate);
    if (clen > 4000) clen = 4000; /* names are shortened rather than refused */
    char buf[4096];
    size_t len = 0;
    if (candidate[0] >= '0' && candidate[0] <= '9') buf[len++] = '_';
    for (size_t i = 0; i < clen; i++) {
        char c = candidate[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        buf[len++] = ok ? c : '_';
    }
    if (len == 0) {
        memcpy(buf, "_unnamed", 8);
        len = 8;
    }
    buf[len] = 0;
    /* split base_num */
    size_t j = len;
    while (j > 0 && buf[j - 1] >= '0' && buf[j - 1] <= '9') j--;
    int64_t num = -1;
    size_t base_len = len;
    if (j < len && j > 1 && buf[j - 1] == '_' && len - j < 18) {
        num = strtoll(buf + j, NULL, 10);
        base_len = j - 1;
    }
    /* the numbering state of the base; the base is interned (as the state's key) only when new */
    uint32_t bh = bpcc_str_hash(buf, base_len);
    struct bpcc_strmap_slot *be = bpcc_strmap_get(&g->bases, buf, base_len, bh);
    int64_t *last = be ? be->value : NULL;
    const char *base = NULL;
    if (!be && !(base = bpcc_intern_n(&g->intern, buf, base_len))) return false;
    /* the candidate: base itself, or base_num as written */
    if (num < 0) {
        buf[base_len] = 0;
    } else {
        buf[base_len] = '_';
        bpcc_format_i64(num, buf + base_len + 1);
    }
    if (num <= 0) num = last ? *last : 0;
    struct name c = name_of(buf);
    void **v;
    while ((v = bpcc_intern_slot(&g->intern, buf, c.len, c.hash, &c.s, NULL)) && *v) {
        num++;
        buf[base_len] = '_';
        c.len = base_len + 1 + bpcc_format_i64(num, buf + base_len + 1);
        c.hash = bpcc_str_hash(buf, c.len);
    }
    if (!v) return false;
    if (!last) {
        if (!(last = BPCC_ARENA_NEW(&g->arena, int64_t)) || bpcc_strmap_put(&g->bases, base, base_len, bh, last)) return false;
    }
    *last = num;
    *out = c;
    *slot = v;
    return true;
}

enum bpcc_status bpcc_graph_copy_naming(struct bpcc_graph *dst, const struct bpcc_graph *src)
{
    if (bpcc_strmap_copy(&dst->bases, &src->bases)) return BPCC_ERR_NOMEM;
    BPCC_STRMAP_FOREACH(&dst->bases, e) {
        int64_t *num = BPCC_ARENA_NEW(&dst->arena, int64_t);
        if (!num) return BPCC_ERR_NOMEM;
        *num = *(const int64_t *)e->value;
        e->value = num;
    }
    return BPCC_OK;
}

/* Candidate name for a node without one, as FX derives it from the target. */
static void default_candidate(enum bpcc_node_kind kind, const char *target, char *out, size_t n)
{
    const char *t = target;
    if (kind == BPCC_NODE_CALL_FUNCTION) {
        const char *dot = strrchr(target, '.');
        if (dot) t = dot + 1;
    } else if (kind == BPCC_NODE_OUTPUT) {
        t = "output";
    }
    bpcc_str_cat(out, n, 0, t);
}

/* }================================================ */

/* {==================== use-def ==================== */

enum bpcc_status bpcc_graph_add_use(struct bpcc_node *def, struct bpcc_node *user)
{
    if (def->n_users && def->users[def->n_users - 1].node == user) {
        def->users[def->n_users - 1].count++;
        return BPCC_OK;
    }
    for (uint32_t i = 0; i < def->n_users; i++)
        if (def->users[i].node == user) {
            def->users[i].count++;
            return BPCC_OK;
        }
    if (def->n_users == def->cap_users) {
        uint32_t cap = def->cap_users ? def->cap_users * 2 : 2;
        struct user_entry *u = BPCC_ARENA_NEWN(&def->graph->arena, struct user_entry, cap);
        if (!u) return BPCC_ERR_NOMEM;
        if (def->n_users) memcpy(u, def->users, def->n_users * sizeof *u);
        def->users = u;
        def->cap_users = cap;
    }
    def->users[def->n_users++] = (struct user_entry){user, 1};
    return BPCC_OK;
}

void bpcc_graph_remove_use(struct bpcc_node *def, struct bpcc_node *user)
{
    for (uint32_t i = 0; i < def->n_users; i++)
        if (def->users[i].node == user) {
            if (--def->users[i].count == 0) {
                memmove(&def->users[i], &def->users[i + 1],
                        (def->n_users - i - 1) * sizeof *def->users);
                def->n_users--;
            }
            return;
        }
    BPCC_ASSERT(!"remove_use: not a user");
}

struct use_ctx {
    struct bpcc_node *user;
    struct bpcc_graph *graph;
    enum bpcc_status status;
    uint32_t n_done;
};

static void check_ref(struct bpcc_value *ref, void *ud)
{
    struct use_ctx *c = ud;
    if (!ref->u.node || ref->u.node->graph != c->graph || ref->u.node->dead)
        c->status = BPCC_ERR_INVALID;
}

static void add_ref(struct bpcc_value *ref, void *ud)
{
    struct use_ctx *c = ud;
    if (c->status) return;
    c->status = bpcc_graph_add_use(ref->u.node, c->user);
    if (!c->status) c->n_done++;
}

static void remove_ref(struct bpcc_value *ref, void *ud)
{
    struct use_ctx *c = ud;
    if (c->n_done == 0) return;
    c->n_done--;
    bpcc_graph_remove_use(ref->u.node, c->user);
}

/* Register the uses in v; on failure undo the ones made, so the graph is unchanged. */
static enum bpcc_status add_uses(struct bpcc_node *user, struct bpcc_value *v)
{
    struct use_ctx c = {user, user->graph, BPCC_OK, 0};
    bpcc_value_visit_nodes(v, add_ref, &c);
    if (c.status) {
        uint32_t done = c.n_done;
        struct use_ctx u = {user, user->graph, BPCC_OK, done};
        bpcc_value_visit_nodes(v, remove_ref, &u);
    }
    return c.status;
}

static void remove_uses(struct bpcc_node *user, struct bpcc_value *v)
{
    struct use_ctx c = {user, user->graph, BPCC_OK, UINT32_MAX};
    bpcc_value_visit_nodes(v, remove_ref, &c);
}

/* }================================================ */

static enum bpcc_status check_arg_shapes(struct bpcc_graph *g, const struct bpcc_value *args,
                                         const struct bpcc_value *kwargs, struct bpcc_diag *d)
{
    if (args && args->kind != BPCC_VAL_TUPLE)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "node args must be a tuple, not %s",
                               bpcc_value_kind_name(args->kind));
    if (kwargs && kwargs->kind != BPCC_VAL_DICT)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "node kwargs must be a dict, not %s",
                               bpcc_value_kind_name(kwargs->kind));
    struct use_ctx c = {NULL, g, BPCC_OK, 0};
    if (args) bpcc_value_visit_nodes((struct bpcc_value *)args, check_ref, &c);
    if (kwargs) bpcc_value_visit_nodes((struct bpcc_value *)kwargs, check_ref, &c);
    if (c.status)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0,
                               "node argument refers to a node that is not live in this graph");
    return BPCC_OK;
}

static void link_last(struct bpcc_graph *g, struct bpcc_node *n)
{
    n->prev = g->last;
    n->next = NULL;
    if (g->last) g->last->next = n; else g->first = n;
    g->last = n;
}

static void unlink_node(struct bpcc_graph *g, struct bpcc_node *n)
{
    if (n->prev) n->prev->next = n->next; else g->first = n->next;
    if (n->next) n->next->prev = n->prev; else g->last = n->prev;
    n->prev = n->next = NULL;
}

enum bpcc_status bpcc_graph_create_node(struct bpcc_graph *g, enum bpcc_node_kind kind,
                                        const char *name, const char *target,
                                        const struct bpcc_value *args,
                                        const struct bpcc_value *kwargs, struct bpcc_node **out,
                                        struct bpcc_diag *d)
{
    return bpcc_graph_node_new(g, kind, name, target, args, kwargs, false, out, d);
}

/* a new node of g with target `target` (interned in g); named `name` in its free intern slot
** `slot` when the caller has them (nothing interned since the slot was taken), else after `name`
** as bpcc_graph_node_new names it */
static enum bpcc_status node_make(struct bpcc_graph *g, enum bpcc_node_kind kind, const char *name, void **slot,
                                  const char *target, const struct bpcc_value *args,
                                  const struct bpcc_value *kwargs, bool adopt, struct bpcc_node **out,
                                  struct bpcc_diag *d)
{
    enum bpcc_status s = check_arg_shapes(g, args, kwargs, d);
    if (s) return s;

    struct bpcc_node *n = BPCC_ARENA_NEW(&g->nodes, struct bpcc_node);
    if (!n) return bpcc_diag_nomem(d);
    n->graph = g;
    n->kind = kind;
    n->target = target;
    bpcc_node_resolve_module(n);
    struct bpcc_value empty_tuple = {.kind = BPCC_VAL_TUPLE};
    struct bpcc_value empty_dict = {.kind = BPCC_VAL_DICT};
    if (!args) args = &empty_tuple;
    if (!kwargs) kwargs = &empty_dict;
    if (adopt) {
        n->args = *args;
        n->kwargs = *kwargs;
    } else if ((s = bpcc_value_copy(g, &n->args, args)) ||
               (s = bpcc_value_copy(g, &n->kwargs, kwargs)))
        return s == BPCC_ERR_NOMEM ? bpcc_diag_nomem(d)
                                   : bpcc_diag_error(d, s, NULL, 0, 0, "node arguments nest too deep");
    n->meta.kind = BPCC_VAL_NONE;

    /* the name's intern slot: every name ever given keeps its node there (reserved below, once
    ** nothing can fail; nothing is interned in between, so the slot stays valid) */
    struct name nm = {.s = name};
    if (!slot && name && bpcc_node_name_valid(name)) {
        nm = name_of(name);
        if (!(slot = bpcc_intern_slot(&g->intern, name, nm.len, nm.hash, &nm.s, NULL))) return bpcc_diag_nomem(d);
        if (*slot) slot = NULL; /* taken: numbered below */
    }
    if (!slot) {
        char cand[256];
        if (name) bpcc_str_cat(cand, sizeof cand, 0, name);
        else default_candidate(kind, n->target, cand, sizeof cand);
        if (!unique_name(g, cand, &nm, &slot)) return bpcc_diag_nomem(d);
    }
    n->name = nm.s;
    if ((s = add_uses(n, &n->args))) return bpcc_diag_nomem(d);
    if ((s = add_uses(n, &n->kwargs))) {
        remove_uses(n, &n->args);
        return bpcc_diag_nomem(d);
    }
    *slot = n;
    n->id = g->next_id++;
    link_last(g, n);
    g->n_nodes++;
    if (out) *out = n;
    return BPCC_OK;
}

enum bpcc_status bpcc_graph_node_new(struct bpcc_graph *g, enum bpcc_node_kind kind,
                                     const char *name, const char *target,
                                     const struct bpcc_value *args,
                                     const struct bpcc_value *kwargs, bool adopt,
                                     struct bpcc_node **out, struct bpcc_diag *d)
{
    if (out) *out = NULL;
    if ((unsigned)kind >= BPCC_NODE_KIND_COUNT || !target)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "invalid node kind or target");
    const char *t = bpcc_graph_intern(g, target);
    if (!t) return bpcc_diag_nomem(d);
    return node_make(g, kind, name, NULL, t, args, kwargs, adopt, out, d);
}

struct bpcc_node *bpcc_graph_slot_node(void *const *slot) { return live(*slot); }

enum bpcc_status bpcc_graph_node_new_named(struct bpcc_graph *g, enum bpcc_node_kind kind, const char *name, void **slot,
                                           const char *target, const struct bpcc_value *args,
                                           const struct bpcc_value *kwargs, struct bpcc_node **out,
                                           struct bpcc_diag *d)
{
    if (out) *out = NULL;
    if ((unsigned)kind >= BPCC_NODE_KIND_COUNT || !target || *slot)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "invalid node kind, target or name");
    return node_make(g, kind, name, slot, target, args, kwargs, true, out, d);
}

struct bpcc_node *bpcc_graph_first(const struct bpcc_graph *g) { return g->first; }
struct bpcc_node *bpcc_graph_last(const struct bpcc_graph *g) { return g->last; }
uint32_t bpcc_graph_n_nodes(const struct bpcc_graph *g) { return g->n_nodes; }

struct bpcc_node *bpcc_graph_find_node(const struct bpcc_graph *g, const char *name)
{
    return bpcc_graph_find_node_n(g, name, strlen(name));
}

struct bpcc_node *bpcc_graph_find_node_n(const struct bpcc_graph *g, const char *name, size_t len)
{
    void **v = bpcc_intern_value(&g->intern, name, len, bpcc_str_hash(name, len));
    return v ? live(*v) : NULL;
}

struct bpcc_node *bpcc_graph_output(const struct bpcc_graph *g)
{
    for (struct bpcc_node *n = g->last; n; n = n->prev)
        if (n->kind == BPCC_NODE_OUTPUT) return n;
    return NULL;
}

struct bpcc_node *bpcc_node_next(const struct bpcc_node *n) { return n->next; }
struct bpcc_node *bpcc_node_prev(const struct bpcc_node *n) { return n->prev; }
const char *bpcc_node_name(const struct bpcc_node *n) { return n->name; }
const char *bpcc_node_target(const struct bpcc_node *n) { return n->target; }
enum bpcc_node_kind bpcc_node_kind(const struct bpcc_node *n) { return n->kind; }
uint32_t bpcc_node_id(const struct bpcc_node *n) { return n->id; }
const struct bpcc_value *bpcc_node_args(const struct bpcc_node *n) { return &n->args; }
const struct bpcc_value *bpcc_node_kwargs(const struct bpcc_node *n) { return &n->kwargs; }
const struct bpcc_value *bpcc_node_meta(const struct bpcc_node *n) { return &n->meta; }

const char *bpcc_node_scope(const struct bpcc_node *n, const char **type_out)
{
    if (type_out) *type_out = n->scope_type;
    return n->scope_path;
}

enum bpcc_status bpcc_node_set_scope(struct bpcc_node *n, const char *path, const char *type,
                                     struct bpcc_diag *d)
{
    if (!path || !*path) {
        n->scope_path = n->scope_type = NULL;
        return BPCC_OK;
    }
    if (!type || !*type)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "node '%s': scope '%s' needs a module type",
                               n->name, path);
    const char *p = bpcc_graph_intern(n->graph, path), *t = bpcc_graph_intern(n->graph, type);
    if (!p || !t) return bpcc_diag_nomem(d);
    n->scope_path = p;
    n->scope_type = t;
    return BPCC_OK;
}
uint32_t bpcc_node_n_users(const struct bpcc_node *n) { return n->n_users; }

struct bpcc_node *bpcc_node_user(const struct bpcc_node *n, uint32_t i)
{
    return i < n->n_users ? n->users[i].node : NULL;
}

static bool meta_ok(const struct bpcc_value *m, int depth)
{
    if (depth > BPCC_MAX_VALUE_DEPTH) return false;
    if (m->kind == BPCC_VAL_NONE || m->kind == BPCC_VAL_TTYPE) return true;
    if (m->kind != BPCC_VAL_TUPLE && m->kind != BPCC_VAL_LIST) return false;
    for (uint32_t i = 0; i < m->n; i++)
        if (!meta_ok(&m->u.seq.items[i], depth + 1)) return false;
    return true;
}

enum bpcc_status bpcc_node_set_meta(struct bpcc_node *n, const struct bpcc_value *meta,
                                    struct bpcc_diag *d)
{
    if (!meta_ok(meta, 0))
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0,
                               "node metadata must be tensor types or tuples of them");
    struct bpcc_value copy;
    enum bpcc_status s = bpcc_value_copy(n->graph, &copy, meta);
    if (s) return bpcc_diag_nomem(d);
    n->meta = copy;
    return BPCC_OK;
}

enum bpcc_status bpcc_node_set_args(struct bpcc_node *n, const struct bpcc_value *args,
                                    const struct bpcc_value *kwargs, struct bpcc_diag *d)
{
    struct bpcc_graph *g = n->graph;
    enum bpcc_status s = check_arg_shapes(g, args, kwargs, d);
    if (s) return s;
    struct bpcc_value na = n->args, nk = n->kwargs;
    if ((args && (s = bpcc_value_copy(g, &na, args))) ||
        (kwargs && (s = bpcc_value_copy(g, &nk, kwargs))))
        return s == BPCC_ERR_NOMEM ? bpcc_diag_nomem(d)
                                   : bpcc_diag_error(d, s, NULL, 0, 0, "node arguments nest too deep");
    /* Register the new uses before dropping the old ones, so a failure changes nothing. */
    if (args && (s = add_uses(n, &na))) return bpcc_diag_nomem(d);
    if (kwargs && (s = add_uses(n, &nk))) {
        if (args) remove_uses(n, &na);
        return bpcc_diag_nomem(d);
    }
    if (args) {
        remove_uses(n, &n->args);
        n->args = na;
    }
    if (kwargs) {
        remove_uses(n, &n->kwargs);
        n->kwargs = nk;
    }
    return BPCC_OK;
}

enum bpcc_status bpcc_node_set_target(struct bpcc_node *n, const char *target,
                                      struct bpcc_diag *d)
{
    const char *t = bpcc_graph_intern(n->graph, target);
    if (!t) return bpcc_diag_nomem(d);
    n->target = t;
    bpcc_node_resolve_module(n);
    return BPCC_OK;
}

struct swap_ctx {
    struct bpcc_node *from, *to;
    uint32_t n;
};

static void swap_ref(struct bpcc_value *ref, void *ud)
{
    struct swap_ctx *c = ud;
    if (ref->u.node == c->from) {
        ref->u.node = c->to;
        c->n++;
    }
}

/* Make room for `extra` more distinct users, so that later add_use calls cannot fail. */
static enum bpcc_status reserve_users(struct bpcc_node *def, uint32_t extra)
{
    if (def->cap_users - def->n_users >= extra) return BPCC_OK;
    uint32_t cap = def->cap_users ? def->cap_users : 2;
    while (cap - def->n_users < extra) cap *= 2;
    struct user_entry *u = BPCC_ARENA_NEWN(&def->graph->arena, struct user_entry, cap);
    if (!u) return BPCC_ERR_NOMEM;
    if (def->n_users) memcpy(u, def->users, def->n_users * sizeof *u);
    def->users = u;
    def->cap_users = cap;
    return BPCC_OK;
}

enum bpcc_status bpcc_node_replace_all_uses(struct bpcc_node *from, struct bpcc_node *to,
                                            uint32_t *n_changed_out, struct bpcc_diag *d)
{
    if (n_changed_out) *n_changed_out = 0;
    if (from->graph != to->graph || from->dead || to->dead)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0,
                               "replace_all_uses needs two live nodes of one graph");
    if (from == to) return BPCC_OK;
    if (reserve_users(to, from->n_users)) return bpcc_diag_nomem(d);
    uint32_t changed = 0;
    while (from->n_users) {
        struct bpcc_node *user = from->users[0].node;
        struct swap_ctx c = {from, to, 0};
        bpcc_value_visit_nodes(&user->args, swap_ref, &c);
        bpcc_value_visit_nodes(&user->kwargs, swap_ref, &c);
        BPCC_ASSERT(c.n == from->users[0].count);
        for (uint32_t k = 0; k < c.n; k++) {
            enum bpcc_status s = bpcc_graph_add_use(to, user);
            BPCC_ASSERT(s == BPCC_OK); /* capacity was reserved */
        }
        memmove(&from->users[0], &from->users[1], (from->n_users - 1) * sizeof *from->users);
        from->n_users--;
        changed++;
    }
    if (n_changed_out) *n_changed_out = changed;
    return BPCC_OK;
}

enum bpcc_status bpcc_node_replace_input(struct bpcc_node *user, struct bpcc_node *from, struct bpcc_node *to,
                                        struct bpcc_diag *d)
{
    if (user->graph != from->graph || from->graph != to->graph || user->dead || from->dead || to->dead)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "replace_input needs live nodes of one graph");
    if (from == to) return BPCC_OK;
    uint32_t i = 0;
    while (i < from->n_users && from->users[i].node != user) i++;
    if (i == from->n_users) return BPCC_OK;
    if (reserve_users(to, 1)) return bpcc_diag_nomem(d);
    struct swap_ctx c = {from, to, 0};
    bpcc_value_visit_nodes(&user->args, swap_ref, &c);
    bpcc_value_visit_nodes(&user->kwargs, swap_ref, &c);
    BPCC_ASSERT(c.n == from->users[i].count);
    for (uint32_t k = 0; k < c.n; k++) {
        enum bpcc_status s = bpcc_graph_add_use(to, user);
        BPCC_ASSERT(s == BPCC_OK); /* capacity was reserved */
    }
    memmove(&from->users[i], &from->users[i + 1], (from->n_users - i - 1) * sizeof *from->users);
    from->n_users--;
    return BPCC_OK;
}

void bpcc_node_move_before(struct bpcc_node *n, struct bpcc_node *anchor)
{
    if (n == anchor) return;
    struct bpcc_graph *g = n->graph;
    unlink_node(g, n);
    n->next = anchor;
    n->prev = anchor->prev;
    if (anchor->prev) anchor->prev->next = n; else g->first = n;
    anchor->prev = n;
}

void bpcc_node_move_after(struct bpcc_node *n, struct bpcc_node *anchor)
{
    if (n == anchor) return;
    struct bpcc_graph *g = n->graph;
    unlink_node(g, n);
    n->prev = anchor;
    n->next = anchor->next;
    if (anchor->next) anchor->next->prev = n; else g->last = n;
    anchor->next = n;
}

enum bpcc_status bpcc_node_erase(struct bpcc_node *n, struct bpcc_diag *d)
{
    if (n->n_users)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0,
                               "cannot erase node '%s': it still has %u user(s), e.g. '%s'",
                               n->name, n->n_users, n->users[0].node->name);
    struct bpcc_graph *g = n->graph;
    remove_uses(n, &n->args);
    remove_uses(n, &n->kwargs);
    unlink_node(g, n);
    n->dead = true; /* its name's slot keeps it (see the top of this file) */
    g->n_nodes--;
    return BPCC_OK;
}

/* {==================== topological order ==================== */

struct first_unplaced {
    struct bpcc_node *found;
};

static void find_unplaced(struct bpcc_value *ref, void *ud)
{
    struct first_unplaced *f = ud;
    if (!f->found && ref->u.node->mark != 2) f->found = ref->u.node;
}

enum bpcc_status bpcc_graph_topo_sort(struct bpcc_graph *g, struct bpcc_diag *d)
{
    if (g->n_nodes == 0) return BPCC_OK;
    struct bpcc_node **stack = bpcc_malloc(g->n_nodes * sizeof *stack);
    struct bpcc_node **order = bpcc_malloc(g->n_nodes * sizeof *order);
    if (!stack || !order) {
        bpcc_xfree(stack);
        bpcc_xfree(order);
        return bpcc_diag_nomem(d);
    }
    for (struct bpcc_node *n = g->first; n; n = n->next) n->mark = 0;
    uint32_t n_order = 0;
    enum bpcc_status s = BPCC_OK;
    struct bpcc_node *output = NULL;
    for (struct bpcc_node *n = g->first; n; n = n->next)
        if (n->kind == BPCC_NODE_OUTPUT) {
            if (output) {
                bpcc_xfree(stack);
                bpcc_xfree(order);
                return bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, n->src_line,
                                       n->src_col, "graph has more than one output node ('%s')",
                                       n->name);
            }
            output = n;
        }
    /* Depth-first, iterative: a node is placed once all the nodes it reads are placed.
    ** mark: 0 unvisited, 1 on the stack, 2 placed. The output node goes last. */
    for (struct bpcc_node *root = g->first; root && !s; root = root->next) {
        if (root->mark) continue;
        if (root == output) continue;
        uint32_t sp = 0;
        stack[sp++] = root;
        root->mark = 1;
        while (sp) {
            struct bpcc_node *t = stack[sp - 1];
            struct first_unplaced f = {NULL};
            bpcc_value_visit_nodes(&t->args, find_unplaced, &f);
            if (!f.found) bpcc_value_visit_nodes(&t->kwargs, find_unplaced, &f);
            if (f.found) {
                if (f.found->mark == 1) {
                    s = bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, f.found->src_line,
                                        f.found->src_col,
                                        "graph has a cycle through node '%s' (used by '%s')",
                                        f.found->name, t->name);
                    break;
                }
                if (f.found->kind == BPCC_NODE_OUTPUT) {
                    s = bpcc_diag_error(d, BPCC_ERR_GRAPH, g->source_file, t->src_line, t->src_col,
                                        "node '%s' uses the output node", t->name);
                    break;
                }
                f.found->mark = 1;
                stack[sp++] = f.found;
            } else {
                t->mark = 2;
                order[n_order++] = t;
                sp--;
            }
        }
    }
    if (!s && output) { /* every other node is placed: the output's operands are too */
        output->mark = 2;
        order[n_order++] = output;
    }
    if (!s) {
        BPCC_ASSERT(n_order == g->n_nodes);
        g->first = g->last = NULL;
        for (uint32_t i = 0; i < n_order; i++) link_last(g, order[i]);
    }
    bpcc_xfree(stack);
    bpcc_xfree(order);
    return s;
}

/* }================================================ */
