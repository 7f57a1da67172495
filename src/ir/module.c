/*
** module.c — the module table (dotted name -> type, attributes, tensors) and tensors.
*/
#include "ir.h"

static const char *const role_names[BPCC_TENSOR_ROLE_COUNT] = {"param", "buffer", "constant"};

const char *bpcc_tensor_role_name(enum bpcc_tensor_role r)
{
    return (unsigned)r < BPCC_TENSOR_ROLE_COUNT ? role_names[r] : "?";
}


/* A module is found through its name's intern slot (bpcc_name_module), which keeps an unlinked
** module (dead, its memory kept): taking it out was a probe of the table, a cache miss per module
** on a big graph, and fusion unlinks three modules per group. Lookups read a dead module as none,
** and adding a module under its name takes the slot over. */

static struct bpcc_module *present(const void *v)
{
    struct bpcc_module *m = bpcc_name_module(v);
    return m && !m->dead ? m : NULL;
}

void bpcc_graph_release_modules(struct bpcc_graph *g)
{
    bpcc_xfree(g->modules);
    g->modules = NULL;
    g->n_modules = g->cap_modules = 0;
}

/* m (named, out of any child list) into the tree: the last child of the nearest ancestor in the
** table. A failed record leaves m out of the tree: the pass fails (bpcc_undo_failed). */
static void join_ancestor(struct bpcc_graph *g, struct bpcc_module *m, size_t len)
{
    char buf[512];
    if (len >= sizeof buf || !len) return;
    memcpy(buf, m->name, len + 1);
    for (char *dot = strrchr(buf, '.');; dot = strrchr(buf, '.')) {
        if (dot) *dot = 0;
        else buf[0] = 0;
        struct bpcc_module *p = bpcc_graph_find_module(g, buf);
        if (p && p != m) {
            if (!(p->last_child ? BPCC_UNDO_MODULE(p->last_child, p->last_child->next_sibling)
                                : BPCC_UNDO_MODULE(p, p->first_child)) ||
                !BPCC_UNDO_MODULE(p, p->last_child) || !BPCC_UNDO_MODULE(m, m->parent))
                return;
            m->parent = p;
            if (p->last_child) p->last_child->next_sibling = m;
            else p->first_child = m;
            p->last_child = m;
            return;
        }
        if (!dot) return;
    }
}

/* m out of its parent's child list */
static void leave_parent(struct bpcc_module *m)
{
    struct bpcc_module *p = m->parent;
    if (!p) return;
    struct bpcc_module **link = &p->first_child, *prev = NULL;
    while (*link && *link != m) {
        prev = *link;
        link = &(*link)->next_sibling;
    }
    /* *link is p's first_child or a sibling's next_sibling, prev's if there is one */
    if (!(prev ? BPCC_UNDO_MODULE(prev, *link) : BPCC_UNDO_MODULE(p, *link)) || !BPCC_UNDO_MODULE(p, p->last_child) ||
        !BPCC_UNDO_MODULE(m, m->parent) || !BPCC_UNDO_MODULE(m, m->next_sibling))
        return;
    if (*link) {
        *link = m->next_sibling;
        if (p->last_child == m) p->last_child = prev;
    }
    m->parent = NULL;
    m->next_sibling = NULL;
}

/* bpcc_graph_add_module; with `if_free`, a name in use is no error: *out is then NULL */
static enum bpcc_status add_module(struct bpcc_graph *g, const char *name, const char *type, bool if_free,
                                   struct bpcc_module **out, struct bpcc_diag *d)
{
    if (bpcc_undo_failed(g)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    if (out) *out = NULL;
    if (!name || !type)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "module needs a name and a type");
    /* the type first: interning moves the slots, and the name's slot is held to the end. One probe
    ** of the table interns the name and finds what has it. */
    const char *itype = bpcc_graph_intern(g, type);
    if (!itype) return bpcc_diag_nomem(d);
    size_t len = strlen(name);
    const char *iname;
    void **slot = bpcc_intern_slot(&g->intern, name, len, bpcc_str_hash(name, len), &iname, NULL);
    if (!slot) return bpcc_diag_nomem(d);
    struct bpcc_module *was = bpcc_name_module(*slot);
    if (was && !was->dead)
        return if_free ? BPCC_OK : bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "module '%s' already exists", name);
    if (!bpcc_name_make_room(g, slot)) return bpcc_diag_nomem(d);
    if (g->n_modules == g->cap_modules) {
        uint32_t cap = g->cap_modules ? g->cap_modules * 2 : 16;
        struct bpcc_module **p = bpcc_realloc(g->modules, cap * sizeof *p);
        if (!p) return bpcc_diag_nomem(d);
        g->modules = p;
        g->cap_modules = cap;
    }
    struct bpcc_module *m = BPCC_ARENA_NEW(&g->arena, struct bpcc_module);
    if (!m) return bpcc_diag_nomem(d);
    m->graph = g;
    m->name = iname;
    m->type = itype;
    m->attrs.kind = BPCC_VAL_DICT;
    /* a pass's log: the slot's module as it was; the table of modules and its count need no
    ** records (undo.c keeps them as the pass found them) */
    if (!bpcc_undo_module_made(g, m) || !bpcc_undo_module_entry(g, m->name, was)) return bpcc_diag_nomem(d);
    bpcc_name_put_module(slot, m);
    g->modules[g->n_modules++] = m;
    join_ancestor(g, m, len);
    if (bpcc_undo_failed(g)) return bpcc_diag_nomem(d);
    if (out) *out = m;
    return BPCC_OK;
}

enum bpcc_status bpcc_graph_add_module(struct bpcc_graph *g, const char *name, const char *type,
                                       struct bpcc_module **out, struct bpcc_diag *d)
{
    return add_module(g, name, type, false, out, d);
}

enum bpcc_status bpcc_graph_add_module_if_free(struct bpcc_graph *g, const char *name, const char *type,
                                               struct bpcc_module **out, struct bpcc_diag *d)
{
    return add_module(g, name, type, true, out, d);
}

/* The nodes that remembered m may no longer take it on trust (bpcc_node_module): the one that
** did forgets its type, or, when more did, every node's trust ends with the epoch. */
static void forget_callers(struct bpcc_graph *g, struct bpcc_module *m)
{
    if (m->many_callers) g->module_epoch++;
    else if (m->caller) m->caller->module_type = NULL;
    m->caller = NULL;
    m->many_callers = false;
}

/* forget_callers writes caches only: a pass's log needs no records of them (a playback makes
** every node forget its module, bpcc_graph_forget_modules) */
static void unlink_rec(struct bpcc_graph *g, struct bpcc_module *m)
{
    for (struct bpcc_module *c = m->first_child; c; c = c->next_sibling) unlink_rec(g, c);
    if (!BPCC_UNDO_MODULE(m, m->dead)) return;
    m->dead = true; /* its name's slot keeps it (see `present`) */
    forget_callers(g, m);
}

void bpcc_module_set_type(struct bpcc_module *m, const char *type)
{
    if (!BPCC_UNDO_MODULE(m, m->type)) return;
    forget_callers(m->graph, m);
    m->type = type;
}

struct bpcc_module *bpcc_module_child(const struct bpcc_module *m, const char *leaf)
{
    size_t n = strlen(m->name);
    for (struct bpcc_module *c = m->first_child; c; c = c->next_sibling) {
        if (c->dead || strncmp(c->name, m->name, n) || (n && c->name[n] != '.')) continue;
        if (!strcmp(c->name + n + (n ? 1 : 0), leaf)) return c;
    }
    return NULL;
}

bool bpcc_graph_any_module_type(const struct bpcc_graph *g, bool (*pred)(const char *type))
{
    const char *seen[64] = {0}; /* the last types asked, direct-mapped by pointer */
    for (uint32_t i = 0; i < g->n_modules; i++) {
        const struct bpcc_module *m = g->modules[i];
        const char **slot = &seen[((uintptr_t)m->type >> 3) % BPCC_ARRAY_LEN(seen)];
        if (m->dead || *slot == m->type) continue;
        *slot = m->type;
        if (pred(m->type)) return true;
    }
    return false;
}

void bpcc_graph_unlink_module(struct bpcc_graph *g, struct bpcc_module *m)
{
    if (m->dead) return;
    leave_parent(m);
    unlink_rec(g, m);
}

/* m's name no longer finds it (unless a module took that name meanwhile); false when the record
** of the change finds no memory (nothing changed) */
static bool drop_name(struct bpcc_graph *g, struct bpcc_module *m)
{
    size_t len = strlen(m->name);
    void **slot = bpcc_intern_value(&g->intern, m->name, len, bpcc_str_hash(m->name, len));
    if (!slot || bpcc_name_module(*slot) != m) return true;
    if (!bpcc_undo_module_entry(g, m->name, m)) return false;
    bpcc_name_put_module(slot, NULL);
    return true;
}

enum bpcc_status bpcc_graph_rename_module(struct bpcc_graph *g, struct bpcc_module *m, const char *name,
                                          struct bpcc_diag *d)
{
    if (bpcc_undo_failed(g)) return bpcc_diag_nomem(d);
    if (m->first_child)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "module '%s' has submodules: it cannot be renamed alone",
                               m->name);
    size_t len = strlen(name);
    const char *iname;
    void **slot = bpcc_intern_slot(&g->intern, name, len, bpcc_str_hash(name, len), &iname, NULL);
    if (!slot) return bpcc_diag_nomem(d);
    struct bpcc_module *was = bpcc_name_module(*slot);
    if (was && !was->dead && was != m)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "module '%s' already exists", name);
    if (!bpcc_name_make_room(g, slot)) return bpcc_diag_nomem(d);
    if (iname != m->name && !drop_name(g, m)) return bpcc_diag_nomem(d);
    leave_parent(m); /* none left for an unlinked module */
    if (!BPCC_UNDO_MODULE(m, m->name) || !BPCC_UNDO_MODULE(m, m->dead) || !bpcc_undo_module_entry(g, iname, was))
        return bpcc_diag_nomem(d);
    m->name = iname;
    m->dead = false;
    bpcc_name_put_module(slot, m);
    join_ancestor(g, m, len);
    forget_callers(g, m);
    return bpcc_undo_failed(g) ? bpcc_diag_nomem(d) : BPCC_OK;
}

void bpcc_graph_compact_modules(struct bpcc_graph *g)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->n_modules; i++)
        if (!g->modules[i]->dead) g->modules[k++] = g->modules[i];
    g->n_modules = k;
}

struct bpcc_module *bpcc_graph_find_module(const struct bpcc_graph *g, const char *name)
{
    size_t len = strlen(name);
    void **v = bpcc_intern_value(&g->intern, name, len, bpcc_str_hash(name, len));
    return v ? present(*v) : NULL;
}

/* n's remembered module is still the one the table gives for its target: it is in the table (a
** module replaced under the same name is unlinked first) under that name (names and targets are
** interned in the same graph: equal strings are equal pointers) */
static bool remembered(const struct bpcc_node *n)
{
    const struct bpcc_module *m = n->module;
    return m && !m->dead && m->name == n->target;
}

/* n's remembered module is known good without reading it */
static bool trusted(const struct bpcc_node *n)
{
    return n->module_type && n->module_epoch == n->graph->module_epoch;
}

struct bpcc_module *bpcc_node_module(const struct bpcc_node *n)
{
    return trusted(n) || remembered(n) ? n->module : bpcc_graph_find_module(n->graph, n->target);
}

const char *bpcc_node_module_type(const struct bpcc_node *n)
{
    if (trusted(n)) return n->module_type;
    const struct bpcc_module *m = bpcc_node_module(n);
    return m ? m->type : NULL;
}

/* n remembers m (NULL: none), which is in the table under n's target */
static void remember(struct bpcc_node *n, struct bpcc_module *m)
{
    n->module = m;
    n->module_type = m ? m->type : NULL;
    n->module_epoch = n->graph->module_epoch;
    if (m && !m->caller) m->caller = n;
    else if (m && m->caller != n) m->many_callers = true;
}

void bpcc_node_resolve_module(struct bpcc_node *n, void *const *target_slot)
{
    if (n->kind != BPCC_NODE_CALL_MODULE) remember(n, NULL);
    else remember(n, target_slot ? present(*target_slot) : bpcc_graph_find_module(n->graph, n->target));
}

void bpcc_graph_forget_modules(struct bpcc_graph *g)
{
    for (uint32_t i = 0; i < g->n_modules; i++) {
        g->modules[i]->caller = NULL;
        g->modules[i]->many_callers = false;
    }
    for (struct bpcc_node *n = g->first; n; n = n->next) {
        n->module = NULL;
        n->module_type = NULL;
    }
}

void bpcc_graph_resolve_modules(struct bpcc_graph *g)
{
    /* only the call_module nodes whose remembered module is gone are looked up */
    for (struct bpcc_node *n = g->first; n; n = n->next)
        if (n->kind != BPCC_NODE_CALL_MODULE) remember(n, NULL);
        else if (!trusted(n)) remember(n, bpcc_node_module(n));
}

struct bpcc_module *bpcc_graph_attr_owner(const struct bpcc_graph *g, const char *target, const char **leaf_out)
{
    const char *dot = strrchr(target, '.');
    size_t len = dot ? (size_t)(dot - target) : 0;
    void **v = bpcc_intern_value(&g->intern, target, len, bpcc_str_hash(target, len));
    if (leaf_out) *leaf_out = dot ? dot + 1 : target;
    return v ? present(*v) : NULL;
}

struct bpcc_tensor *bpcc_graph_attr_tensor(const struct bpcc_graph *g, const char *target)
{
    const char *leaf;
    const struct bpcc_module *m = bpcc_graph_attr_owner(g, target, &leaf);
    return m ? bpcc_module_tensor(m, leaf) : NULL;
}

uint32_t bpcc_graph_n_modules(const struct bpcc_graph *g) { return g->n_modules; }

struct bpcc_module *bpcc_graph_module(const struct bpcc_graph *g, uint32_t i)
{
    return i < g->n_modules ? g->modules[i] : NULL;
}

enum bpcc_status bpcc_graph_remove_module(struct bpcc_graph *g, const char *name,
                                          struct bpcc_diag *d)
{
    if (bpcc_undo_failed(g)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    struct bpcc_module *m = bpcc_graph_find_module(g, name);
    if (!m) return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "no module '%s'", name);
    bpcc_graph_unlink_module(g, m);
    bpcc_graph_compact_modules(g);
    return BPCC_OK;
}

const char *bpcc_module_name(const struct bpcc_module *m) { return m->name; }
const char *bpcc_module_type(const struct bpcc_module *m) { return m->type; }
const struct bpcc_value *bpcc_module_attrs(const struct bpcc_module *m) { return &m->attrs; }

const struct bpcc_value *bpcc_module_attr(const struct bpcc_module *m, const char *key)
{
    return bpcc_value_get(&m->attrs, key);
}

/* Modules may share one attribute array (bpcc_module_share_attrs): attrs_cap below attrs.n marks
** it, and a change copies it first (reserve) unless it writes a value equal to the one there. */
void bpcc_module_share_attrs(struct bpcc_module *m, struct bpcc_module *from)
{
    BPCC_ASSERT(m->graph == from->graph);
    if (!BPCC_UNDO_MODULE(m, m->attrs) || !BPCC_UNDO_MODULE(m, m->attrs_cap) || !BPCC_UNDO_MODULE(from, from->attrs_cap))
        return;
    m->attrs = from->attrs;
    m->attrs_cap = from->attrs_cap = 0;
}

enum bpcc_status bpcc_module_reserve_attrs(struct bpcc_module *m, uint32_t n)
{
    if (bpcc_undo_failed(m->graph)) return BPCC_ERR_NOMEM;
    if (n < m->attrs.n) n = m->attrs.n; /* a shared array is copied whole */
    if (n <= m->attrs_cap) return BPCC_OK;
    struct bpcc_value *a = &m->attrs;
    struct bpcc_value *items = BPCC_ARENA_NEWN(&m->graph->arena, struct bpcc_value, n);
    const char **keys = BPCC_ARENA_NEWN(&m->graph->arena, const char *, n);
    if (!items || !keys || !BPCC_UNDO_MODULE(m, m->attrs) || !BPCC_UNDO_MODULE(m, m->attrs_cap)) return BPCC_ERR_NOMEM;
    if (a->n) {
        memcpy(items, a->u.seq.items, a->n * sizeof *items);
        memcpy(keys, a->u.seq.keys, a->n * sizeof *keys);
    }
    a->u.seq.items = items;
    a->u.seq.keys = keys;
    m->attrs_cap = n;
    return BPCC_OK;
}

enum bpcc_status bpcc_module_set_attr(struct bpcc_module *m, const char *key,
                                      const struct bpcc_value *v, struct bpcc_diag *d)
{
    if (bpcc_undo_failed(m->graph)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    struct bpcc_graph *g = m->graph;
    if (bpcc_value_has_nodes(v))
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0,
                               "module attribute '%s' may not refer to nodes", key);
    struct bpcc_value *a = &m->attrs;
    uint32_t i = 0;
    while (i < a->n && strcmp(a->u.seq.keys[i], key) != 0) i++;
    if (i < a->n && bpcc_value_equal(&a->u.seq.items[i], v)) return BPCC_OK; /* a shared array stays so */
    struct bpcc_value copy;
    enum bpcc_status s = bpcc_value_copy(g, &copy, v);
    if (s) return s == BPCC_ERR_NOMEM ? bpcc_diag_nomem(d)
                                      : bpcc_diag_error(d, s, NULL, 0, 0, "attribute nests too deep");
    if (i < a->n) {
        if (bpcc_module_reserve_attrs(m, a->n)) return bpcc_diag_nomem(d); /* copies a shared array */
        if (!BPCC_UNDO_MODULE(m, a->u.seq.items[i])) return bpcc_diag_nomem(d);
        a->u.seq.items[i] = copy;
        return BPCC_OK;
    }
    const char *k = bpcc_graph_intern(g, key);
    if (!k) return bpcc_diag_nomem(d);
    if (a->n >= m->attrs_cap && bpcc_module_reserve_attrs(m, a->n ? 2 * a->n : 4))
        return bpcc_diag_nomem(d);
    /* the entries past the count need no records: the count's puts them out of reach */
    if (!BPCC_UNDO_MODULE(m, a->n)) return bpcc_diag_nomem(d);
    a->u.seq.keys[a->n] = k;
    a->u.seq.items[a->n] = copy;
    a->n++;
    return BPCC_OK;
}

/* The others are copied to new arrays, so that the old ones stay as a rollback (or another module
** sharing them) finds them: two records, whatever the attribute's place. */
enum bpcc_status bpcc_module_remove_attr(struct bpcc_module *m, const char *key)
{
    if (bpcc_undo_failed(m->graph)) return BPCC_ERR_NOMEM;
    struct bpcc_value *a = &m->attrs;
    uint32_t i = 0;
    while (i < a->n && strcmp(a->u.seq.keys[i], key) != 0) i++;
    if (i == a->n) return BPCC_OK;
    uint32_t n = a->n - 1;
    struct bpcc_value *items = BPCC_ARENA_NEWN(&m->graph->arena, struct bpcc_value, n ? n : 1);
    const char **keys = BPCC_ARENA_NEWN(&m->graph->arena, const char *, n ? n : 1);
    if (!items || !keys || !BPCC_UNDO_MODULE(m, m->attrs) || !BPCC_UNDO_MODULE(m, m->attrs_cap)) return BPCC_ERR_NOMEM;
    for (uint32_t j = 0, k = 0; j < a->n; j++) {
        if (j == i) continue;
        items[k] = a->u.seq.items[j];
        keys[k++] = a->u.seq.keys[j];
    }
    a->u.seq.items = items;
    a->u.seq.keys = keys;
    a->n = n;
    m->attrs_cap = n;
    return BPCC_OK;
}

uint32_t bpcc_module_n_tensors(const struct bpcc_module *m) { return m->n_tensors; }

struct bpcc_tensor *bpcc_module_tensor_at(const struct bpcc_module *m, uint32_t i,
                                          const char **name_out, enum bpcc_tensor_role *role_out)
{
    if (i >= m->n_tensors) return NULL;
    if (name_out) *name_out = m->tensors[i].name;
    if (role_out) *role_out = m->tensors[i].role;
    return m->tensors[i].t;
}

/* the tensor index: built once a module has this many tensors, so that the lookups convert makes
** on the root module (thousands of qparam buffers) stay constant time */
#define TENSOR_INDEX_MIN 16

static uint32_t slot_of(const char *interned, uint32_t n_slots)
{
    uintptr_t h = (uintptr_t)interned;
    h ^= h >> 17;
    h *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 7) & (n_slots - 1);
}

static void fill_index(struct bpcc_module *m, uint32_t *slots, uint32_t n)
{
    memset(slots, 0, n * sizeof *slots);
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        uint32_t k = slot_of(m->tensors[i].name, n);
        while (slots[k]) k = (k + 1) & (n - 1);
        slots[k] = i + 1;
    }
}

static bool index_tensors(struct bpcc_module *m)
{
    uint32_t n = 64;
    while (n < 2 * m->cap_tensors) n *= 2;
    uint32_t *slots = BPCC_ARENA_NEWN(&m->graph->arena, uint32_t, n);
    if (!slots || !BPCC_UNDO_MODULE(m, m->tensor_slots) || !BPCC_UNDO_MODULE(m, m->n_tensor_slots)) return false;
    fill_index(m, slots, n);
    m->tensor_slots = slots;
    m->n_tensor_slots = n;
    return true;
}

void bpcc_module_reindex_tensors(struct bpcc_module *m)
{
    if (m->tensor_slots) fill_index(m, m->tensor_slots, m->n_tensor_slots);
}

/* a big module's index asked for a name interned in m's graph (the entries' names are too, so
** pointers compare) */
static int64_t find_indexed_tensor(const struct bpcc_module *m, const char *p)
{
    for (uint32_t k = slot_of(p, m->n_tensor_slots); m->tensor_slots[k]; k = (k + 1) & (m->n_tensor_slots - 1))
        if (m->tensors[m->tensor_slots[k] - 1].name == p) return m->tensor_slots[k] - 1;
    return -1;
}

/* the index of the tensor named `name` (any string), or -1 */
static int64_t find_tensor(const struct bpcc_module *m, const char *name)
{
    if (!m->tensor_slots) {
        for (uint32_t i = 0; i < m->n_tensors; i++)
            if (strcmp(m->tensors[i].name, name) == 0) return i;
        return -1;
    }
    const char *p = bpcc_intern_lookup(&m->graph->intern, name);
    return p ? find_indexed_tensor(m, p) : -1;
}

struct bpcc_tensor *bpcc_module_tensor(const struct bpcc_module *m, const char *name)
{
    int64_t i = find_tensor(m, name);
    return i < 0 ? NULL : m->tensors[i].t;
}

/* room for `want` tensors: exactly that many when the caller knows the count (a reserve), else by
** doubling; the index grows with the array (the table stays at most half full) */
static bool grow_tensors(struct bpcc_module *m, uint32_t want, bool exact)
{
    if (want <= m->cap_tensors) return true;
    uint32_t cap = want;
    if (!exact) {
        cap = m->cap_tensors ? m->cap_tensors * 2 : 4;
        while (cap < want) cap *= 2;
    }
    struct module_tensor *p = BPCC_ARENA_NEWN(&m->graph->arena, struct module_tensor, cap);
    if (!p || !BPCC_UNDO_MODULE(m, m->tensors) || !BPCC_UNDO_MODULE(m, m->cap_tensors) ||
        !BPCC_UNDO_MODULE(m, m->tensor_slots))
        return false;
    if (m->n_tensors) memcpy(p, m->tensors, m->n_tensors * sizeof *p);
    m->tensors = p;
    m->cap_tensors = cap;
    if (m->tensor_slots || cap >= TENSOR_INDEX_MIN) {
        m->tensor_slots = NULL;
        if (!index_tensors(m)) return false;
    }
    return true;
}

/* the entry `at` given t, or, at < 0, a new entry where there is room (nm interned in m's graph) */
/* false when out of memory for a pass's log (nothing changed then) */
static bool store_tensor(struct bpcc_module *m, int64_t at, const char *nm, enum bpcc_tensor_role role,
                         struct bpcc_tensor *t)
{
    if ((t->flags & BPCC_TENSOR_STORED) || (t->data && bpcc_safetensors_holds(m->graph->weights, t->data, t->nbytes)))
        t->flags |= BPCC_TENSOR_SHARED;
    t->flags |= BPCC_TENSOR_STORED;
    if (at >= 0) {
        if (!BPCC_UNDO_MODULE(m, m->tensors[at])) return false;
        m->tensors[at].role = role;
        m->tensors[at].t = t;
        return true;
    }
    BPCC_ASSERT(m->n_tensors < m->cap_tensors);
    /* the entry past the count needs no record (the count's puts it out of reach), nor does the
    ** index: a playback builds each index again (bpcc_module_reindex_tensors) */
    if (!BPCC_UNDO_MODULE(m, m->n_tensors)) return false;
    m->tensors[m->n_tensors++] = (struct module_tensor){nm, role, t};
    if (m->tensor_slots) {
        uint32_t k = slot_of(nm, m->n_tensor_slots);
        while (m->tensor_slots[k]) k = (k + 1) & (m->n_tensor_slots - 1);
        m->tensor_slots[k] = m->n_tensors;
    }
    return true;
}

enum bpcc_status bpcc_module_set_tensor(struct bpcc_module *m, const char *name,
                                        enum bpcc_tensor_role role, struct bpcc_tensor *t,
                                        struct bpcc_diag *d)
{
    if (bpcc_undo_failed(m->graph)) return bpcc_diag_nomem(d); /* a change was left out: the pass fails */
    if ((unsigned)role >= BPCC_TENSOR_ROLE_COUNT || !t || !name)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "invalid tensor attribute");
    struct bpcc_graph *g = m->graph;
    /* a small module's few names are compared where they are, before anything is interned; a big
    ** one's index is asked with the name interned first (it is needed when new): one hash of it */
    const char *nm = NULL;
    int64_t at;
    if (m->tensor_slots) {
        if (!(nm = bpcc_graph_intern(g, name))) return bpcc_diag_nomem(d);
        at = find_indexed_tensor(m, nm);
    } else {
        at = find_tensor(m, name);
    }
    if (at < 0) {
        if (!nm && !(nm = bpcc_graph_intern(g, name))) return bpcc_diag_nomem(d);
        return bpcc_module_add_tensor(m, nm, role, t) ? bpcc_diag_nomem(d) : BPCC_OK;
    }
    return store_tensor(m, at, nm, role, t) ? BPCC_OK : bpcc_diag_nomem(d);
}

void bpcc_graph_tensor_replaced(struct bpcc_graph *g, const struct bpcc_tensor *t)
{
    if (t && t->data && g->no_rollback && !(t->flags & BPCC_TENSOR_SHARED))
        (void)bpcc_safetensors_release(g->weights, t->data, t->nbytes);
}

enum bpcc_status bpcc_module_reserve_tensors(struct bpcc_module *m, uint32_t extra)
{
    if (bpcc_undo_failed(m->graph)) return BPCC_ERR_NOMEM;
    if (extra > UINT32_MAX - m->n_tensors) return BPCC_ERR_LIMIT;
    return grow_tensors(m, m->n_tensors + extra, true) ? BPCC_OK : BPCC_ERR_NOMEM;
}

/* the bytes tensor_new allocates for `nbytes` of data: small data (a converted model has two scalars
** per quantize node) in whole 8-byte words, 8-aligned, so that it fits the blocks given back (and
** they it); cache-line aligned data beyond, for the kernels' vector loops */
static size_t data_bytes(size_t nbytes) { return nbytes < 64 ? (nbytes + 7) / 8 * 8 + (nbytes == 0) * 8 : nbytes; }

/* the bytes of a header of ndim dims and `extra` bytes after them */
static size_t header_bytes(uint32_t ndim, size_t extra)
{
    return sizeof(struct bpcc_tensor) + ndim * sizeof(int64_t) + extra;
}

void bpcc_module_give_tensors(struct bpcc_module *m)
{
    struct bpcc_arena *a = &m->graph->arena;
    for (uint32_t i = 0; i < m->n_tensors; i++) {
        struct bpcc_tensor *t = m->tensors[i].t;
        uint32_t k = 0;
        while (k < i && m->tensors[k].t != t) k++;
        /* once, if held twice; not one another module may hold too (a fused module's copy); a range after
        ** the dims stays */
        if (k < i || (t->flags & BPCC_TENSOR_SHARED)) continue;
        if ((t->flags & BPCC_TENSOR_ARENA) && t->data) bpcc_arena_give(a, t->data, data_bytes(t->nbytes));
        bpcc_arena_give(a, t, header_bytes(t->ndim, 0));
    }
    bpcc_arena_give(a, m->tensors, (size_t)m->cap_tensors * sizeof *m->tensors);
    bpcc_arena_give(a, m->tensor_slots, (size_t)m->n_tensor_slots * sizeof *m->tensor_slots);
    m->tensors = NULL;
    m->tensor_slots = NULL;
    m->n_tensors = m->cap_tensors = m->n_tensor_slots = 0;
}

void bpcc_module_give(struct bpcc_module *m)
{
    struct bpcc_graph *g = m->graph;
    BPCC_ASSERT(g->no_rollback && !m->first_child);
    bpcc_graph_unlink_module(g, m);
    (void)drop_name(g, m); /* no record without rollback: cannot fail */
    bpcc_module_give_tensors(m);
    bpcc_arena_give(&g->arena, m, sizeof *m);
}

enum bpcc_status bpcc_module_add_tensor(struct bpcc_module *m, const char *interned, enum bpcc_tensor_role role,
                                        struct bpcc_tensor *t)
{
    if (bpcc_undo_failed(m->graph)) return BPCC_ERR_NOMEM;
    return grow_tensors(m, m->n_tensors + 1, false) && store_tensor(m, -1, interned, role, t) ? BPCC_OK : BPCC_ERR_NOMEM;
}

void bpcc_module_put_tensor(struct bpcc_module *m, const char *interned, enum bpcc_tensor_role role,
                            struct bpcc_tensor *t)
{
    /* out of memory for a pass's log: left out, and the pass fails (bpcc_undo_failed) */
    (void)store_tensor(m, m->tensor_slots ? find_indexed_tensor(m, interned) : find_tensor(m, interned), interned, role,
                       t);
}

size_t bpcc_tensor_expected_bytes(const struct bpcc_tensor *t, bool *overflow)
{
    *overflow = false;
    uint64_t n = bpcc_dtype_size(t->dtype);
    for (uint32_t i = 0; i < t->ndim; i++) {
        uint64_t dim = (uint64_t)t->dims[i];
        if (t->dims[i] < 0 || (dim && n > UINT64_MAX / dim)) {
            *overflow = true;
            return 0;
        }
        n *= dim;
    }
    if (n > SIZE_MAX) {
        *overflow = true;
        return 0;
    }
    return (size_t)n;
}

/* a zeroed header for ndim dims and `extra` bytes after them */
static struct bpcc_tensor *header(struct bpcc_arena *a, uint32_t ndim, size_t extra)
{
    BPCC_ASSERT(ndim <= BPCC_MAX_DIMS);
    struct bpcc_tensor *t = bpcc_arena_alloc(a, header_bytes(ndim, extra), _Alignof(struct bpcc_tensor));
    if (t) t->ndim = (uint16_t)ndim;
    return t;
}

struct bpcc_tensor *bpcc_tensor_header(struct bpcc_arena *a, uint32_t ndim) { return header(a, ndim, 0); }

static enum bpcc_status tensor_new(struct bpcc_graph *g, enum bpcc_dtype dtype, uint32_t ndim, const int64_t *dims,
                                   bool zero, size_t extra, struct bpcc_tensor **out, struct bpcc_diag *d)
{
    *out = NULL;
    if ((unsigned)dtype >= BPCC_DTYPE_COUNT || bpcc_dtype_size(dtype) == 0 || ndim > BPCC_MAX_DIMS)
        return bpcc_diag_error(d, BPCC_ERR_INVALID, NULL, 0, 0, "invalid tensor dtype or rank");
    struct bpcc_tensor *t = header(&g->arena, ndim, extra);
    if (!t) return bpcc_diag_nomem(d);
    t->dtype = dtype;
    for (uint32_t i = 0; i < ndim; i++) t->dims[i] = dims[i];
    bool overflow;
    t->nbytes = bpcc_tensor_expected_bytes(t, &overflow);
    if (overflow || t->nbytes > ((size_t)1 << 40))
        return bpcc_diag_error(d, BPCC_ERR_LIMIT, NULL, 0, 0, "tensor size overflows or exceeds 1 TiB");
    size_t n = data_bytes(t->nbytes), align = n >= 64 ? 64 : 8;
    t->data = zero ? bpcc_arena_alloc(&g->arena, n, align) : bpcc_arena_alloc_uninit(&g->arena, n, align);
    if (!t->data) return bpcc_diag_nomem(d);
    t->flags |= BPCC_TENSOR_ARENA;
    *out = t;
    return BPCC_OK;
}

enum bpcc_status bpcc_tensor_new(struct bpcc_graph *g, enum bpcc_dtype dtype, uint32_t ndim, const int64_t *dims,
                                 struct bpcc_tensor **out, struct bpcc_diag *d)
{
    return tensor_new(g, dtype, ndim, dims, true, 0, out, d);
}

enum bpcc_status bpcc_tensor_new_uninit(struct bpcc_graph *g, enum bpcc_dtype dtype, uint32_t ndim, const int64_t *dims,
                                        struct bpcc_tensor **out, struct bpcc_diag *d)
{
    return tensor_new(g, dtype, ndim, dims, false, 0, out, d);
}

enum bpcc_status bpcc_tensor_new_ranged(struct bpcc_graph *g, uint32_t ndim, const int64_t *dims, float **range,
                                        struct bpcc_tensor **out, struct bpcc_diag *d)
{
    BPCC_ASSERT(ndim >= 1 && dims[0] >= 0);
    enum bpcc_status s = tensor_new(g, BPCC_DTYPE_F32, ndim, dims, false, 2 * (size_t)dims[0] * sizeof(float), out, d);
    *range = s ? NULL : (float *)((*out)->dims + ndim);
    return s;
}

enum bpcc_dtype bpcc_tensor_dtype(const struct bpcc_tensor *t) { return t->dtype; }
uint32_t bpcc_tensor_ndim(const struct bpcc_tensor *t) { return t->ndim; }
const int64_t *bpcc_tensor_dims(const struct bpcc_tensor *t) { return t->dims; }
size_t bpcc_tensor_nbytes(const struct bpcc_tensor *t) { return t->nbytes; }
void *bpcc_tensor_data(struct bpcc_tensor *t)
{
    t->flags &= (uint16_t)~BPCC_TENSOR_RANGED; /* the caller may write the data */
    return t->data;
}

uint64_t bpcc_tensor_numel(const struct bpcc_tensor *t)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++) n *= (uint64_t)t->dims[i];
    return n;
}

bool bpcc_node_in_place(const struct bpcc_node *n)
{
    if (n->kind == BPCC_NODE_CALL_MODULE) {
        const struct bpcc_module *m = bpcc_node_module(n);
        const struct bpcc_value *v = m ? bpcc_module_attr(m, "inplace") : NULL;
        return v && v->kind == BPCC_VAL_BOOL && v->u.b;
    }
    if (n->kind != BPCC_NODE_CALL_FUNCTION && n->kind != BPCC_NODE_CALL_METHOD) return false;
    size_t len = strlen(n->target);
    if (len >= 2 && n->target[len - 1] == '_' && n->target[len - 2] != '_') return true;
    if (n->kind == BPCC_NODE_CALL_FUNCTION && (!strcmp(n->target, "torchvision.models.video.mvit._add_rel_pos") ||
                                               !strcmp(n->target, "torchvision.models.video.mvit._add_shortcut")))
        return true;
    const struct bpcc_value *v = bpcc_value_get(bpcc_node_kwargs(n), "inplace");
    return v && v->kind == BPCC_VAL_BOOL && v->u.b;
}
