/*
** graph.c — graphs and nodes: creation, FX-style naming, use-def (users), ordering and
** mutation. Two arenas per graph, one for the nodes and one for everything else (see `nodes` in
** ir.h); nothing is freed individually. Each change to a node records what it overwrites while a
** pass runs with rollback on (BPCC_UNDO_NODE, undo.c), before it is made: the mutators that can
** fail do it before anything changes, and fail when it cannot be recorded.
*/
#include "ir.h"

/* Every name ever given to a node keeps the node in its intern slot's value (bpcc_name_node),
** also once the node is erased or remade under another name: the name stays reserved. The slot
** finds the node only while it is alive and its name is the slot's key (live), so neither
** erasing nor remaking touches the table, whose probe is a cache miss on a big graph, and an
** erased node's memory can become another node (recycling, below). g->bases: FX-style numbering
** state, base name -> the last number handed out (an int64_t in the arena), keyed by the interned
** base. */

/* the live node a name's intern slot (as bpcc_intern_slot and bpcc_intern_value give it) names, or
** NULL: none, or one erased or named otherwise now */
static struct bpcc_node *live(void *const *slot)
{
    struct bpcc_node *n = bpcc_name_node(*slot);
    return n && !n->dead && n->name == bpcc_strmap_value_key(slot) ? n : NULL;
}

bool bpcc_name_make_room(struct bpcc_graph *g, void **slot)
{
    uintptr_t p = (uintptr_t)*slot;
    if (!p || (p & BPCC_NAME_BOTH)) return true;
    struct name_owners *o = BPCC_ARENA_NEW(&g->arena, struct name_owners);
    if (!o) return false;
    o->node = bpcc_name_node(*slot);
    o->module = bpcc_name_module(*slot);
    *slot = (void *)((uintptr_t)o | BPCC_NAME_BOTH);
    return true;
}

static struct name_owners *owners(void *v) { return (struct name_owners *)((uintptr_t)v & ~(uintptr_t)3); }

void bpcc_name_put_node(void **slot, struct bpcc_node *n)
{
    if ((uintptr_t)*slot & BPCC_NAME_BOTH) owners(*slot)->node = n;
    else {
        BPCC_ASSERT(!bpcc_name_module(*slot));
        *slot = n;
    }
}

void bpcc_name_put_module(void **slot, struct bpcc_module *m)
{
    if ((uintptr_t)*slot & BPCC_NAME_BOTH) owners(*slot)->module = m;
    else {
        BPCC_ASSERT(!bpcc_name_node(*slot));
        *slot = m ? (void *)((uintptr_t)m | BPCC_NAME_MODULE) : NULL;
    }
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
    bpcc_strmap_release(&g->metas);
    bpcc_strmap_release(&g->bases);
    bpcc_graph_release_modules(g);
    bpcc_intern_release(&g->intern);
}

void bpcc_graph_set_erase_unused_in_place(struct bpcc_graph *g, bool on) { g->erase_unused_in_place = on; }
void bpcc_graph_set_implicit_qparams(struct bpcc_graph *g, bool on) { g->implicit_qparams = on; }

void bpcc_graph_free(struct bpcc_graph *g)
{
    if (!g) return;
    release_tables(g);
    bpcc_graph_release_undo(g);
    bpcc_xfree(g->erased);
    if (g->weights) bpcc_safetensors_close(g->weights);
    bpcc_arena_release(&g->arena);
    bpcc_arena_release(&g->nodes);
    bpcc_xfree(g);
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

enum bpcc_status bpcc_graph_meta(struct bpcc_graph *g, const struct bpcc_value *meta, const struct bpcc_value **out)
{
    *out = NULL;
    if (meta->kind == BPCC_VAL_NONE) return BPCC_OK;
    struct bpcc_value *v;
    if (meta->kind != BPCC_VAL_TTYPE || meta->n > BPCC_MAX_DIMS) {
        if (!(v = BPCC_ARENA_NEW(&g->arena, struct bpcc_value))) return BPCC_ERR_NOMEM;
        enum bpcc_status s = bpcc_value_copy(g, v, meta);
        if (!s) *out = v;
        return s;
    }
    int64_t key[1 + BPCC_MAX_DIMS];
    key[0] = meta->u.ttype.dtype;
    if (meta->n) memcpy(key + 1, meta->u.ttype.dims, meta->n * sizeof *key);
    size_t len = (1 + (size_t)meta->n) * sizeof *key;
    uint32_t h = bpcc_str_hash((const char *)key, len);
    struct bpcc_strmap_slot *e = bpcc_strmap_get(&g->metas, (const char *)key, len, h);
    if (e) {
        *out = e->value;
        return BPCC_OK;
    }
    int64_t *copy = BPCC_ARENA_NEWN(&g->arena, int64_t, 1 + meta->n);
    if (!copy || !(v = BPCC_ARENA_NEW(&g->arena, struct bpcc_value))) return BPCC_ERR_NOMEM;
    memcpy(copy, key, len);
    *v = (struct bpcc_value){.kind = BPCC_VAL_TTYPE, .n = meta->n, .u.ttype = {meta->u.ttype.dtype, NULL}};
    if (meta->n && !(v->u.ttype.dims = bpcc_graph_intern_dims(g, copy + 1, meta->n))) return BPCC_ERR_NOMEM;
    if (bpcc_strmap_put(&g->metas, (const char *)copy, len, h, v)) return BPCC_ERR_NOMEM;
    *out = v;
    return BPCC_OK;
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
    while ((v = bpcc_intern_slot(&g->intern, buf, c.len, c.hash, &c.s, NULL)) && bpcc_name_node(*v)) {
        num++;
        buf[base_len] = '_';
        c.len = base_len + 1 + bpcc_format_i64(num, buf + base_len + 1);
        c.hash = bpcc_str_hash(buf, c.len);
    }
    if (!v) return false;
    if (!last) {
        if (!(last = BPCC_ARENA_NEW(&g->arena, int64_t)) || !bpcc_undo_base(g, base) ||
            bpcc_strmap_put(&g->bases, base, base_len, bh, last))
            return false;
    } else if (!BPCC_UNDO(g, *last)) {
        return false;
    }
    *last = num;
    *out = c;
    *slot = v;
    return true;
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

/* def's users array made cap entries long (its entries kept). Most nodes have one user, so the
** first array has one entry (at 100k nodes 250k arrays, 16 bytes each where two entries took 32).
** Without rollback nothing can read the array outgrown: it goes back to the arena, where the
** allocations of its size take it (a node's second user's array is the size of two first ones). */
static enum bpcc_status grow_users(struct bpcc_node *def, uint32_t cap)
{
    struct bpcc_graph *g = def->graph;
    struct user_entry *u = BPCC_ARENA_NEWN(&g->arena, struct user_entry, cap);
    if (!u || !BPCC_UNDO_NODE(def, def->users) || !BPCC_UNDO_NODE(def, def->cap_users)) return BPCC_ERR_NOMEM;
    if (def->n_users) memcpy(u, def->users, def->n_users * sizeof *u);
    if (g->no_rollback && def->users) bpcc_arena_give(&g->arena, def->users, def->cap_users * sizeof *u);
    def->users = u;
    def->cap_users = cap;
    return BPCC_OK;
}

enum bpcc_status bpcc_graph_add_use(struct bpcc_node *def, struct bpcc_node *user)
{
    if (bpcc_undo_failed(def->graph)) return BPCC_ERR_NOMEM;
    uint32_t i = def->n_users;
    if (i && def->users[i - 1].node == user) i--;
    else
        for (i = 0; i < def->n_users && def->users[i].node != user; i++) continue;
    if (i < def->n_users) {
        if (!BPCC_UNDO_NODE(def, def->users[i].count)) return BPCC_ERR_NOMEM;
        def->users[i].count++;
        return BPCC_OK;
    }
    if (def->n_users == def->cap_users && grow_users(def, def->cap_users ? def->cap_users * 2 : 1)) return BPCC_ERR_NOMEM;
    /* the entry past the count needs no record: the count's puts it out of reach */
    if (!BPCC_UNDO_NODE(def, def->n_users)) return BPCC_ERR_NOMEM;
    def->users[def->n_users++] = (struct user_entry){user, 1};
    return BPCC_OK;
}

/* def's user entry i goes, the ones after it moving down (recorded first: false, nothing changed,
** when that is out of memory) */
static bool drop_user_at(struct bpcc_node *def, uint32_t i)
{
    if (!bpcc_undo_node(def, &def->users[i], (def->n_users - i) * sizeof *def->users) ||
        !BPCC_UNDO_NODE(def, def->n_users))
        return false;
    memmove(&def->users[i], &def->users[i + 1], (def->n_users - i - 1) * sizeof *def->users);
    def->n_users--;
    return true;
}

bool bpcc_graph_remove_use(struct bpcc_node *def, struct bpcc_node *user)
{
    for (uint32_t i = 0; i < def->n_users; i++)
        if (def->users[i].node == user) {
            if (def->users[i].count == 1) return drop_user_at(def, i);
            if (!BPCC_UNDO_NODE(def, def->users[i].count)) return false;
            def->users[i].count--;
            return true;
        }
    BPCC_ASSERT(!"remove_use: not a user");
    return true;
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
/* v: NULL for none (a node's empty kwargs) */
static enum bpcc_status add_uses(struct bpcc_node *user, struct bpcc_value *v)
{
    if (!v) return BPCC_OK;
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
    if (!v) return;
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

/* The list's changes. g->first, g->last and the count need no records: a pass's undo log keeps
** them as the pass found them. */
static bool link_last(struct bpcc_graph *g, struct bpcc_node *n)
{
    if (g->undo.on && (!BPCC_UNDO_NODE(n, n->prev) || !BPCC_UNDO_NODE(n, n->next) ||
                       (g->last && !BPCC_UNDO_NODE(g->last, g->last->next))))
        return false;
    n->prev = g->last;
    n->next = NULL;
    if (g->last) g->last->next = n; else g->first = n;
    g->last = n;
    return true;
}

static bool unlink_node(struct bpcc_graph *g, struct bpcc_node *n)
{
    if (g->undo.on && (!BPCC_UNDO_NODE(n, n->prev) || !BPCC_UNDO_NODE(n, n->next) ||
                       (n->prev && !BPCC_UNDO_NODE(n->prev, n->prev->next)) ||
                       (n->next && !BPCC_UNDO_NODE(n->next, n->next->prev))))
        return false;
    if (n->prev) n->prev->next = n->next; else g->first = n->next;
    if (n->next) n->next->prev = n->prev; else g->last = n->prev;
    n->prev = n->next = NULL;
    return true;
}

enum bpcc_status bpcc_graph_create_node(struct bpcc_graph *g, enum bpcc_node_kind kind,
                                        const char *name, const char *target,
                                        const struct bpcc_value *args,
                                        const struct bpcc_value *kwargs, struct bpcc_node **out,
                                        struct bpcc_diag *d)
{
    return bpcc_graph_node_new(g, kind, name, target, args, kwargs, false, out, d);
}

/* A node's kwargs for a DICT (NULL: none): NULL when empty, else in g's arena, its items taken
** over (`adopt`, already in g's arena) or copied */
static enum bpcc_status kwargs_of(struct bpcc_graph *g, const struct bpcc_value *kwargs, bool adopt,
                                  struct bpcc_value **out)
{
    *out = NULL;
    if (!kwargs || !kwargs->n) return BPCC_OK;
    struct bpcc_value *v = BPCC_ARENA_NEW(&g->arena, struct bpcc_value);
    if (!v) return BPCC_ERR_NOMEM;
    enum bpcc_status s = BPCC_OK;
    if (adopt) *v = *kwargs;
    else s = bpcc_value_copy(g, v, kwargs);
    if (!s) *out = v;
    return s;
}

/* {==================== recycling ==================== */

/* With rollback off, nothing needs an erased node once the pass that erased it has ended: no log
** will put it back, and the slot of its name, which keeps the name reserved, stops finding it as
** soon as its memory is a node of another name (live). So the nodes made next take that memory,
** with the erased node's users array (empty: an erased node has no users); at 1M nodes the 500k
** nodes fusion erases become prepare's observers. A caller that keeps a pointer to a node it or a
** pass erased must not use it after the next pass has ended (bpcc_graph_set_rollback). */
static void note_erased(struct bpcc_graph *g, struct bpcc_node *n)
{
    if (g->n_erased == g->cap_erased) {
        uint32_t cap = g->cap_erased ? 2 * g->cap_erased : 256;
        struct bpcc_node **e = cap > g->cap_erased ? bpcc_realloc(g->erased, (size_t)cap * sizeof *e) : NULL;
        if (!e) return; /* its memory is not used again: nothing else */
        g->erased = e;
        g->cap_erased = cap;
    }
    g->erased[g->n_erased++] = n;
}

void bpcc_graph_recycle_erased(struct bpcc_graph *g)
{
    for (uint32_t i = 0; i < g->n_erased; i++) {
        g->erased[i]->next = g->free_nodes;
        g->free_nodes = g->erased[i];
    }
    g->n_erased = 0;
}

/* an erased node's memory, zeroed but for its users array, or NULL */
static struct bpcc_node *reuse_erased(struct bpcc_graph *g)
{
    struct bpcc_node *n = g->free_nodes;
    if (!n) return NULL;
    g->free_nodes = n->next;
    struct user_entry *users = n->users;
    uint32_t cap = n->cap_users;
    memset(n, 0, sizeof *n);
    n->users = users;
    n->cap_users = cap;
    return n;
}

/* }================================================ */

/* The name a new node of kind and target gets after `name` (NULL: after its target), as FX names it:
** in *nm, with its intern slot, which has room for the node (bpcc_name_make_room; the slot lasts
** until the next interning). `given`: the free slot of `name` (interned) when the caller has it.
** NULL when out of memory. */
static void **name_slot(struct bpcc_graph *g, enum bpcc_node_kind kind, const char *name, const char *target,
                        void **given, struct name *nm)
{
    if (given) return bpcc_name_make_room(g, given) ? given : NULL;
    void **slot = NULL;
    if (name && bpcc_node_name_valid(name)) {
        *nm = name_of(name);
        if (!(slot = bpcc_intern_slot(&g->intern, name, nm->len, nm->hash, &nm->s, NULL))) return NULL;
        if (bpcc_name_node(*slot)) slot = NULL; /* taken: numbered below */
    }
    if (!slot) {
        char cand[256];
        if (name) bpcc_str_cat(cand, sizeof cand, 0, name);
        else default_candidate(kind, target, cand, sizeof cand);
        if (!unique_name(g, cand, nm, &slot)) return NULL;
    }
    return bpcc_name_make_room(g, slot) ? slot : NULL;
}

/* a new node of g with target `target` (interned in g); named `name` in its free intern slot
** `slot` when the caller has them (nothing interned since the slot was taken), else after `name`
** as bpcc_graph_node_new names it */
static enum bpcc_status node_make(struct bpcc_graph *g, enum bpcc_node_kind kind, const char *name, void **slot,
                                  const char *target, const struct bpcc_value *args,
                                  const struct bpcc_value *kwargs, bool adopt, struct bpcc_node **out,
                                  struct bpcc_diag *d)
{
    if (bpcc_undo_failed(g)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    enum bpcc_status s = check_arg_shapes(g, args, kwargs, d);
    if (s) return s;

    struct bpcc_node *n = reuse_erased(g);
    if (!n && !(n = BPCC_ARENA_NEW(&g->nodes, struct bpcc_node))) return bpcc_diag_nomem(d);
    n->graph = g;
    n->kind = kind;
    n->target = target;
    struct bpcc_value empty_tuple = {.kind = BPCC_VAL_TUPLE};
    if (!args) args = &empty_tuple;
    if (adopt) n->args = *args;
    else s = bpcc_value_copy(g, &n->args, args);
    if (!s) s = kwargs_of(g, kwargs, adopt, &n->kwargs);
    if (s)
        return s == BPCC_ERR_NOMEM ? bpcc_diag_nomem(d)
                                   : bpcc_diag_error(d, s, NULL, 0, 0, "node arguments nest too deep");

    /* the name's intern slot: every name ever given keeps its node there (reserved below, once
    ** nothing can fail; nothing is interned in between, so the slot stays valid) */
    struct name nm = {.s = name};
    if (!(slot = name_slot(g, kind, name, target, slot, &nm))) return bpcc_diag_nomem(d);
    /* a call_module node named as its module (an observer's) finds the module in its name's slot */
    bpcc_node_resolve_module(n, nm.s == target ? slot : NULL);
    n->name = nm.s;
    n->id = g->next_id; /* a new node's own fields need no records (ir.h: bpcc_undo_node) */
    if (!bpcc_undo_name(g, nm.s)) return bpcc_diag_nomem(d);
    if ((s = add_uses(n, &n->args))) return bpcc_diag_nomem(d);
    if ((s = add_uses(n, n->kwargs))) {
        remove_uses(n, &n->args);
        return bpcc_diag_nomem(d);
    }
    if (!link_last(g, n)) {
        remove_uses(n, &n->args);
        remove_uses(n, n->kwargs);
        return bpcc_diag_nomem(d);
    }
    bpcc_name_put_node(slot, n);
    g->next_id++;
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

struct bpcc_node *bpcc_graph_slot_node(void *const *slot) { return live(slot); }

enum bpcc_status bpcc_graph_node_new_named(struct bpcc_graph *g, enum bpcc_node_kind kind, const char *name, void **slot,
                                           const char *target, const struct bpcc_value *args,
                                           const struct bpcc_value *kwargs, struct bpcc_node **out,
                                           struct bpcc_diag *d)
{
    if (out) *out = NULL;
    if ((unsigned)kind >= BPCC_NODE_KIND_COUNT || !target || bpcc_name_node(*slot))
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "invalid node kind, target or name");
    return node_make(g, kind, name, slot, target, args, kwargs, true, out, d);
}

/* what the name slot of an implicit get_attr node holds: a node that is never alive, so that the
** name is taken for FX's numbering (unique_name) and finds no node (live) */
static struct bpcc_node implicit_node = {.dead = true};

enum bpcc_status bpcc_graph_implicit_name(struct bpcc_graph *g, const char *target, void **slot, const char **out,
                                          struct bpcc_diag *d)
{
    *out = NULL;
    if (bpcc_undo_failed(g)) return bpcc_diag_nomem(d);
    struct name nm = {.s = target};
    if (!(slot = name_slot(g, BPCC_NODE_GET_ATTR, target, target, slot, &nm))) return bpcc_diag_nomem(d);
    if (!bpcc_undo_name(g, nm.s)) return bpcc_diag_nomem(d);
    bpcc_name_put_node(slot, &implicit_node);
    *out = nm.s;
    return BPCC_OK;
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
    return v ? live(v) : NULL;
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
const struct bpcc_value *bpcc_node_kwargs(const struct bpcc_node *n)
{
    static const struct bpcc_value empty = {.kind = BPCC_VAL_DICT};
    return n->kwargs ? n->kwargs : &empty;
}
const struct bpcc_value *bpcc_node_meta(const struct bpcc_node *n)
{
    static const struct bpcc_value none = {.kind = BPCC_VAL_NONE};
    return n->meta ? n->meta : &none;
}

const char *bpcc_node_scope(const struct bpcc_node *n, const char **type_out)
{
    if (type_out) *type_out = n->scope ? n->scope[1] : NULL;
    return n->scope ? n->scope[0] : NULL;
}

enum bpcc_status bpcc_node_set_scope(struct bpcc_node *n, const char *path, const char *type,
                                     struct bpcc_diag *d)
{
    if (bpcc_undo_failed(n->graph)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    if (!BPCC_UNDO_NODE(n, n->scope)) return bpcc_diag_nomem(d);
    if (!path || !*path) {
        n->scope = NULL;
        return BPCC_OK;
    }
    if (!type || !*type)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "node '%s': scope '%s' needs a module type",
                               n->name, path);
    const char **sc = BPCC_ARENA_NEWN(&n->graph->arena, const char *, 2);
    if (!sc || !(sc[0] = bpcc_graph_intern(n->graph, path)) || !(sc[1] = bpcc_graph_intern(n->graph, type)))
        return bpcc_diag_nomem(d);
    n->scope = sc;
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
    if (bpcc_undo_failed(n->graph)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    if (!meta_ok(meta, 0))
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0,
                               "node metadata must be tensor types or tuples of them");
    const struct bpcc_value *copy;
    if (bpcc_graph_meta(n->graph, meta, &copy) || !BPCC_UNDO_NODE(n, n->meta)) return bpcc_diag_nomem(d);
    n->meta = copy;
    return BPCC_OK;
}

enum bpcc_status bpcc_node_set_args(struct bpcc_node *n, const struct bpcc_value *args,
                                    const struct bpcc_value *kwargs, struct bpcc_diag *d)
{
    if (bpcc_undo_failed(n->graph)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    struct bpcc_graph *g = n->graph;
    enum bpcc_status s = check_arg_shapes(g, args, kwargs, d);
    if (s) return s;
    struct bpcc_value na = n->args, *nk = n->kwargs;
    if ((args && (s = bpcc_value_copy(g, &na, args))) || (kwargs && (s = kwargs_of(g, kwargs, false, &nk))))
        return s == BPCC_ERR_NOMEM ? bpcc_diag_nomem(d)
                                   : bpcc_diag_error(d, s, NULL, 0, 0, "node arguments nest too deep");
    /* Register the new uses before dropping the old ones, so a failure changes nothing. */
    if ((args && !BPCC_UNDO_NODE(n, n->args)) || (kwargs && !BPCC_UNDO_NODE(n, n->kwargs))) return bpcc_diag_nomem(d);
    if (args && (s = add_uses(n, &na))) return bpcc_diag_nomem(d);
    if (kwargs && (s = add_uses(n, nk))) {
        if (args) remove_uses(n, &na);
        return bpcc_diag_nomem(d);
    }
    if (args) {
        remove_uses(n, &n->args);
        n->args = na;
    }
    if (kwargs) {
        remove_uses(n, n->kwargs);
        n->kwargs = nk;
    }
    return bpcc_undo_failed(g) ? bpcc_diag_nomem(d) : BPCC_OK;
}

enum bpcc_status bpcc_node_remake(struct bpcc_node *n, enum bpcc_node_kind kind, const char *name, const char *target,
                                  const struct bpcc_value *args, struct bpcc_diag *d)
{
    struct bpcc_graph *g = n->graph;
    if (bpcc_undo_failed(g)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    if ((unsigned)kind >= BPCC_NODE_KIND_COUNT || !target || !args)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "invalid node kind, target or args");
    enum bpcc_status s = check_arg_shapes(g, args, NULL, d);
    if (s) return s;
    const char *t = bpcc_graph_intern(g, target);
    struct name nm = {.s = name};
    void **slot = t ? name_slot(g, kind, name, t, NULL, &nm) : NULL;
    if (!slot) return bpcc_diag_nomem(d);
    /* the records first: nothing has changed when one fails (the remembered module is a cache);
    ** the fields replaced lie together, from src_line to scope, and `dead` among them stays false */
    if (!bpcc_undo_node(n, &n->src_line, BPCC_NODE_REMADE_BYTES) || !bpcc_undo_name(g, nm.s))
        return bpcc_diag_nomem(d);
    struct bpcc_value a = *args;
    if (add_uses(n, &a)) return bpcc_diag_nomem(d);
    remove_uses(n, &n->args);
    remove_uses(n, n->kwargs);
    n->kind = (uint8_t)kind;
    n->target = t;
    n->args = a;
    n->kwargs = NULL;
    n->meta = NULL;
    n->scope = NULL;
    n->src_line = n->src_col = 0;
    n->name = nm.s; /* the old name's slot no longer finds n (live) */
    bpcc_node_resolve_module(n, nm.s == t ? slot : NULL);
    bpcc_name_put_node(slot, n);
    return bpcc_undo_failed(g) ? bpcc_diag_nomem(d) : BPCC_OK;
}

enum bpcc_status bpcc_node_set_target(struct bpcc_node *n, const char *target,
                                      struct bpcc_diag *d)
{
    if (bpcc_undo_failed(n->graph)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    const char *t = bpcc_graph_intern(n->graph, target);
    if (!t || !BPCC_UNDO_NODE(n, n->target)) return bpcc_diag_nomem(d);
    n->target = t;
    bpcc_node_resolve_module(n, NULL);
    return BPCC_OK;
}

struct swap_ctx {
    struct bpcc_node *user, *from, *to;
    uint32_t n;
    bool failed; /* a change could not be recorded (and was not made) */
};

static void swap_ref(struct bpcc_value *ref, void *ud)
{
    struct swap_ctx *c = ud;
    if (ref->u.node == c->from && !c->failed) {
        if (!BPCC_UNDO_NODE(c->user, ref->u.node)) {
            c->failed = true;
            return;
        }
        ref->u.node = c->to;
        c->n++;
    }
}

/* user's references to from, to `to`, and the uses with them (to has room for user); false when
** out of memory for the undo log (then the pass fails, and its log takes back what was done) */
static bool swap_refs(struct bpcc_node *user, struct bpcc_node *from, uint32_t i, struct bpcc_node *to)
{
    struct swap_ctx c = {user, from, to, 0, false};
    bpcc_value_visit_nodes(&user->args, swap_ref, &c);
    if (user->kwargs) bpcc_value_visit_nodes(user->kwargs, swap_ref, &c);
    if (c.failed) return false;
    BPCC_ASSERT(c.n == from->users[i].count);
    for (uint32_t k = 0; k < c.n; k++)
        if (bpcc_graph_add_use(to, user)) return false; /* room was reserved: only the log can fail */
    return drop_user_at(from, i);
}

/* Make room for `extra` more distinct users, so that later add_use calls cannot fail. */
static enum bpcc_status reserve_users(struct bpcc_node *def, uint32_t extra)
{
    if (def->cap_users - def->n_users >= extra) return BPCC_OK;
    uint32_t cap = def->cap_users ? def->cap_users : 1;
    while (cap - def->n_users < extra) cap *= 2;
    return grow_users(def, cap);
}

enum bpcc_status bpcc_node_replace_all_uses(struct bpcc_node *from, struct bpcc_node *to,
                                            uint32_t *n_changed_out, struct bpcc_diag *d)
{
    if (bpcc_undo_failed(from->graph)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    if (n_changed_out) *n_changed_out = 0;
    if (from->graph != to->graph || from->dead || to->dead)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0,
                               "replace_all_uses needs two live nodes of one graph");
    if (from == to) return BPCC_OK;
    if (reserve_users(to, from->n_users)) return bpcc_diag_nomem(d);
    uint32_t changed = 0;
    while (from->n_users) {
        if (!swap_refs(from->users[0].node, from, 0, to)) return bpcc_diag_nomem(d);
        changed++;
    }
    if (n_changed_out) *n_changed_out = changed;
    return BPCC_OK;
}

enum bpcc_status bpcc_node_replace_input(struct bpcc_node *user, struct bpcc_node *from, struct bpcc_node *to,
                                        struct bpcc_diag *d)
{
    if (bpcc_undo_failed(user->graph)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    if (user->graph != from->graph || from->graph != to->graph || user->dead || from->dead || to->dead)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "replace_input needs live nodes of one graph");
    if (from == to) return BPCC_OK;
    uint32_t i = 0;
    while (i < from->n_users && from->users[i].node != user) i++;
    if (i == from->n_users) return BPCC_OK;
    if (reserve_users(to, 1) || !swap_refs(user, from, i, to)) return bpcc_diag_nomem(d);
    return BPCC_OK;
}

enum bpcc_status bpcc_node_set_ref(struct bpcc_node *user, struct bpcc_value *ref, struct bpcc_node *to)
{
    if (bpcc_undo_failed(user->graph)) return BPCC_ERR_NOMEM;
    struct bpcc_node *from = ref->u.node;
    if (from == to) return BPCC_OK;
    if (!BPCC_UNDO_NODE(user, ref->u.node)) return BPCC_ERR_NOMEM;
    enum bpcc_status s = bpcc_graph_add_use(to, user);
    if (s) return s;
    ref->u.node = to;
    return bpcc_graph_remove_use(from, user) ? BPCC_OK : BPCC_ERR_NOMEM;
}

void bpcc_node_move_before(struct bpcc_node *n, struct bpcc_node *anchor)
{
    if (n == anchor) return;
    struct bpcc_graph *g = n->graph;
    if ((anchor->prev && !BPCC_UNDO_NODE(anchor->prev, anchor->prev->next)) || !BPCC_UNDO_NODE(anchor, anchor->prev) ||
        !unlink_node(g, n))
        return;
    n->next = anchor;
    n->prev = anchor->prev;
    if (anchor->prev) anchor->prev->next = n; else g->first = n;
    anchor->prev = n;
}

void bpcc_node_move_after(struct bpcc_node *n, struct bpcc_node *anchor)
{
    if (n == anchor) return;
    struct bpcc_graph *g = n->graph;
    if ((anchor->next && !BPCC_UNDO_NODE(anchor->next, anchor->next->prev)) || !BPCC_UNDO_NODE(anchor, anchor->next) ||
        !unlink_node(g, n))
        return;
    n->prev = anchor;
    n->next = anchor->next;
    if (anchor->next) anchor->next->prev = n; else g->last = n;
    anchor->next = n;
}

enum bpcc_status bpcc_node_erase(struct bpcc_node *n, struct bpcc_diag *d)
{
    if (bpcc_undo_failed(n->graph)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    if (n->n_users)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0,
                               "cannot erase node '%s': it still has %u user(s), e.g. '%s'",
                               n->name, n->n_users, n->users[0].node->name);
    struct bpcc_graph *g = n->graph;
    if (!BPCC_UNDO_NODE(n, n->dead)) return bpcc_diag_nomem(d);
    remove_uses(n, &n->args);
    remove_uses(n, n->kwargs);
    if (!unlink_node(g, n) || bpcc_undo_failed(g)) return bpcc_diag_nomem(d);
    n->dead = true; /* its name's slot keeps it (see the top of this file) */
    g->n_nodes--;
    if (g->no_rollback) note_erased(g, n);
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
            if (!f.found && t->kwargs) bpcc_value_visit_nodes(t->kwargs, find_unplaced, &f);
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
        for (uint32_t i = 0; i < n_order && !s; i++)
            if (!link_last(g, order[i])) s = bpcc_diag_nomem(d); /* a pass's log takes it back */
    }
    bpcc_xfree(stack);
    bpcc_xfree(order);
    return s;
}

/* }================================================ */
