/*
** ir.h — the graph, its nodes, modules and tensors (internal layout). Public access goes
** through the functions in bpcc.h; passes inside the library may use these structs directly.
*/
#ifndef BPCC_IR_H
#define BPCC_IR_H

#include "../core/core.h"


/* Deepest value nesting accepted anywhere (parser, copies, printers). */
#define BPCC_MAX_VALUE_DEPTH 64

struct bpcc_safetensors;

struct user_entry {
    struct bpcc_node *node;
    uint32_t count; /* how many argument slots of `node` refer to the def */
};

struct bpcc_node { /* the small fields together: no padding (144 bytes on LP64) */
    uint32_t id;
    uint32_t n_users, cap_users;
    uint32_t mark;              /* scratch for passes (topo sort, verify) */
    uint32_t module_epoch;      /* with module_type: see bpcc_node_module */
    /* from src_line to scope: what bpcc_node_remake replaces, one undo record (BPCC_NODE_REMADE_BYTES) */
    uint32_t src_line, src_col; /* where the text file defined it; 0 if built in memory */
    uint8_t kind;               /* enum bpcc_node_kind */
    bool dead;
    const char *name, *target; /* interned */
    struct bpcc_value args;    /* TUPLE */
    struct bpcc_value *kwargs; /* a DICT, NULL when empty (most nodes: bpcc_node_kwargs gives an empty one) */
    /* NULL (none), or a TTYPE or a TUPLE/LIST of them, read only: a TTYPE is the graph's one copy
    ** for its dtype and shape (bpcc_graph_meta), as most nodes' are alike */
    const struct bpcc_value *meta;
    /* The module the node was traced in (PyTorch's node_name_to_scope): its dotted path and
    ** type, both interned, in an array of two in the graph's arena; NULL for the root scope (most
    ** nodes: the array is only paid for where there is a scope). call_module nodes take theirs
    ** from the target. */
    const char *const *scope;
    struct bpcc_node *prev, *next;
    struct bpcc_graph *graph;
    struct user_entry *users;
    struct bpcc_module *module; /* the module `target` last named: a cache, see bpcc_node_module */
    const char *module_type;    /* its type while the cache is known good, else NULL */
};

/* The bytes of a node that bpcc_node_remake replaces: one undo record of 88 bytes where a record
** per field took nine, 176 bytes in all (half of convert's log: it remakes each observer in place) */
#define BPCC_NODE_REMADE_BYTES (offsetof(struct bpcc_node, scope) + sizeof(const char *const *) - \
                                offsetof(struct bpcc_node, src_line))
_Static_assert(offsetof(struct bpcc_node, src_col) > offsetof(struct bpcc_node, src_line) &&
                   offsetof(struct bpcc_node, kind) > offsetof(struct bpcc_node, src_col) &&
                   offsetof(struct bpcc_node, name) > offsetof(struct bpcc_node, kind) &&
                   offsetof(struct bpcc_node, target) > offsetof(struct bpcc_node, name) &&
                   offsetof(struct bpcc_node, args) > offsetof(struct bpcc_node, target) &&
                   offsetof(struct bpcc_node, kwargs) > offsetof(struct bpcc_node, args) &&
                   offsetof(struct bpcc_node, meta) > offsetof(struct bpcc_node, kwargs) &&
                   offsetof(struct bpcc_node, scope) > offsetof(struct bpcc_node, meta) &&
                   offsetof(struct bpcc_node, mark) < offsetof(struct bpcc_node, src_line) &&
                   offsetof(struct bpcc_node, prev) > offsetof(struct bpcc_node, scope),
               "bpcc_node_remake's fields lie together, after the scratch ones and before the links");

/* A tensor's header is allocated for its rank (bpcc_tensor_header): most tensors of a converted
** graph are scalars (scales, zero points, observers' statistics), for which a BPCC_MAX_DIMS array
** would be two thirds of the header. */
struct bpcc_tensor {
    enum bpcc_dtype dtype;
    uint16_t ndim;
    uint16_t flags; /* BPCC_TENSOR_RANGED, _SHARED, _STORED, _ARENA */
    void *data;     /* NULL while unbound (parsed, weights not read) */
    size_t nbytes;
    uint32_t src_line, src_col;
    int64_t dims[]; /* ndim of them; then, in a header made by bpcc_tensor_new_ranged, the range */
};

/* The header holds its data's range after the dims, valid: for a float32 tensor of ndim >= 1
** without NaN, the min of each slice along axis 0, then the max of each (2 dims[0] floats), as a
** per-channel weight observer finds them (bpcc_obs_observe_range). Batch-norm folding writes a
** weight and its range in one pass, so that convert's weight observers need not read the weight
** again. Dropped by bpcc_tensor_data, through which the data may change. Only such headers pay
** for a range. */
#define BPCC_TENSOR_RANGED 1u
static inline const float *bpcc_tensor_range(const struct bpcc_tensor *t)
{
    return t->flags & BPCC_TENSOR_RANGED ? (const float *)(t->dims + t->ndim) : NULL;
}
/* A tensor put in a second module entry (by fusion copying a module, a fuser or a caller), or one
** of the weights file put in an entry after the load: another entry may hold it too, so replacing
** it in one leaves it in use (bpcc_graph_tensor_replaced), and giving one module's tensors back
** leaves it (bpcc_module_give_tensors). Set by such a store; a load binds each tensor of the file to
** one entry. */
#define BPCC_TENSOR_SHARED 2u
/* in a module entry (store_tensor): a second store makes the tensor BPCC_TENSOR_SHARED */
#define BPCC_TENSOR_STORED 4u
/* the data is in the graph's arena (made by bpcc_tensor_new, not the weights file's): a module's
** tensors given back give it back too */
#define BPCC_TENSOR_ARENA 8u

struct module_tensor {
    const char *name;
    enum bpcc_tensor_role role;
    struct bpcc_tensor *t;
};


struct bpcc_module { /* the 4-byte fields together: no padding (136 bytes on LP64) */
    const char *name, *type;  /* interned */
    struct bpcc_value attrs;  /* DICT */
    uint32_t attrs_cap;
    uint32_t n_tensors, cap_tensors;
    uint32_t n_tensor_slots;  /* the index below: open addressing on the interned name */
    uint32_t src_line, src_col;
    uint32_t mark;  /* scratch for passes */
    bool dead;      /* unlinked: lookups read it as none; dropped from `modules` at the next compaction */
    bool many_callers; /* more than one node has remembered it (see bpcc_node_module) */
    bool fresh;     /* made by the pass running (undo.c): changes to it need no records */
    struct module_tensor *tensors;
    uint32_t *tensor_slots;   /* modules with many tensors (a converted model's root): tensor index + 1; 0 = empty */
    struct bpcc_graph *graph;
    /* the module tree: the nearest ancestor present in the table, and children in order */
    struct bpcc_module *parent, *first_child, *last_child, *next_sibling;
    struct bpcc_node *caller; /* the node that remembered it, if only one did */
};

/* The undo log of the pass running on a graph (undo.c), and the graph's list, counts and module
** table as the pass found them. */
struct bpcc_undo {
    struct undo_chunk *head; /* the records, newest chunk first (undo.c) */
    bool on;            /* a pass is recording */
    bool failed;        /* a record found no memory: its change was left out, the pass will fail */
    struct bpcc_node *first, *last;
    uint32_t n_nodes;
    uint32_t next_id;   /* nodes with this id or later are the pass's own: changes to them need no record */
    uint32_t n_modules;
    struct bpcc_module **modules; /* a copy of the first n_modules entries of the table */
    struct bpcc_module **fresh;   /* the modules the pass made (their `fresh` flags, cleared at the end) */
    uint32_t n_fresh, cap_fresh;
    struct undo_seen *seen;       /* recent records by address (undo.c) */
};

struct bpcc_graph {
    struct bpcc_arena arena;
    /* the nodes alone, one after another in the order they were made: the passes' walks over the
    ** node list read nothing else, and on a graph far larger than the caches they then stream
    ** through a few dense pages instead of one node per page among args, names and tensors
    ** (1M-node synthetic model: fuse and prepare ~15 % faster) */
    struct bpcc_arena nodes;
    /* every name of the graph, once; a name's slot value (bpcc_intern_value) holds what has that
    ** name: the node and the module (see bpcc_name_node) */
    struct bpcc_intern intern;
    struct bpcc_node *first, *last;
    uint32_t n_nodes, next_id;
    /* every name ever given to a node keeps it in its intern slot's value (graph.c) */
    struct bpcc_undo undo;     /* while a pass runs with rollback on (undo.c) */
    struct bpcc_strmap bases;  /* FX-style numbering state: base name -> int64_t last number */
    /* the dims arrays of tensor types (TTYPE values), one per shape: keys are the dims' bytes
    ** (bpcc_graph_intern_dims); values never write through their const dims */
    struct bpcc_strmap shapes;
    /* the TTYPE values of nodes' metadata, one per dtype and shape: keys are the dtype and the dims
    ** as int64_t bytes, values the struct bpcc_value (bpcc_graph_meta) */
    struct bpcc_strmap metas;
    struct bpcc_module **modules;
    uint32_t n_modules, cap_modules;
    uint32_t module_epoch; /* moves on when a module more than one node remembered goes */
    const char *source_file;   /* interned: the text file this graph was parsed from */
    const char *weights_name;  /* interned: as written on the weights line */
    uint32_t weights_line, weights_col;
    bool no_rollback;          /* bpcc_graph_set_rollback(g, false): passes keep no undo log */
    bool erase_unused_in_place; /* bpcc_graph_set_erase_unused_in_place(g, true): convert as PyTorch's */
    bool implicit_qparams;      /* bpcc_graph_set_implicit_qparams(g, true): convert makes BPCC_VAL_ATTR arguments */
    /* with rollback off, erased nodes' memory is used again (graph.c: recycling): the nodes erased
    ** since the last pass ended wait in `erased` (that pass may still hold them), those erased
    ** before are in `free_nodes`, linked through `next` */
    struct bpcc_node **erased;
    uint32_t n_erased, cap_erased;
    struct bpcc_node *free_nodes;
    struct bpcc_safetensors *weights; /* kept open: tensors point into its mapping */
};

/* What a name of a graph names, kept in the name's intern slot value (no second index of the same
** strings: the slot that interning a name finds is where its node or module is looked up):
** - the node: every node ever given the name, also once it is erased or has another name (the
**   name stays reserved; the node answers to it while it is alive and its name is the slot's key,
**   see graph.c), and
** - the module: the last one added under the name, also once it is unlinked (dead; adding a module
**   under the name takes the slot over).
** Node and module names are separate namespaces, and a call_module node often has its module's
** name (an observer's activation_post_process_<n>): a slot with both holds a struct name_owners,
** allocated once in the graph's arena. The value's low bits say which (NULL: nothing). */
struct name_owners {
    struct bpcc_node *node;
    struct bpcc_module *module;
};
#define BPCC_NAME_MODULE 1u
#define BPCC_NAME_BOTH 2u
static inline struct bpcc_node *bpcc_name_node(const void *v)
{
    uintptr_t p = (uintptr_t)v;
    if (p & BPCC_NAME_BOTH) return ((const struct name_owners *)(p & ~(uintptr_t)3))->node;
    return p & BPCC_NAME_MODULE ? NULL : (struct bpcc_node *)p;
}
static inline struct bpcc_module *bpcc_name_module(const void *v)
{
    uintptr_t p = (uintptr_t)v;
    if (p & BPCC_NAME_BOTH) return ((const struct name_owners *)(p & ~(uintptr_t)3))->module;
    return p & BPCC_NAME_MODULE ? (struct bpcc_module *)(p & ~(uintptr_t)3) : NULL;
}
/* The slot can take a node and a module without allocating (bpcc_name_put_node / _module then
** cannot fail): a slot holding one of them takes its struct name_owners now. false when out of
** memory (the slot unchanged). */
BPCC_INTERNAL bool bpcc_name_make_room(struct bpcc_graph *g, void **slot);
/* the slot's node or module becomes n or m (NULL allowed: what a playback puts back); a slot that
** holds the other one has room (bpcc_name_make_room) */
BPCC_INTERNAL void bpcc_name_put_node(void **slot, struct bpcc_node *n);
BPCC_INTERNAL void bpcc_name_put_module(void **slot, struct bpcc_module *m);

/* value.c */
BPCC_INTERNAL enum bpcc_status bpcc_value_copy(struct bpcc_graph *g, struct bpcc_value *dst,
                                               const struct bpcc_value *src);
/* Visit every NODE reference in v (depth first, left to right). */
BPCC_INTERNAL void bpcc_value_visit_nodes(struct bpcc_value *v,
                                          void (*fn)(struct bpcc_value *ref, void *ud),
                                          void *ud);
BPCC_INTERNAL bool bpcc_value_has_nodes(const struct bpcc_value *v);
/* Visit every get_attr node left implicit in v (BPCC_VAL_ATTR, bpcc_graph_set_implicit_qparams),
** depth first, left to right: the order they stand in before the node v is an argument of. */
BPCC_INTERNAL void bpcc_value_visit_attrs(const struct bpcc_value *v, void (*fn)(const struct bpcc_value *attr, void *ud),
                                          void *ud);

/* model_print.c */
BPCC_INTERNAL void bpcc_print_value(struct bpcc_buf *b, const struct bpcc_value *v);
/* the longest torch dtype name or alias after "torch." (quint4x2, bfloat16) */
#define BPCC_DTYPE_NAME_MAX 8
/* A valid SYMBOL: a dotted word [A-Za-z_][A-Za-z0-9_.]* with a dot inside, not a dtype. */
BPCC_INTERNAL bool bpcc_symbol_valid(const char *s);
/* A valid node name: [A-Za-z0-9_.]+ */
BPCC_INTERNAL bool bpcc_node_name_valid(const char *s);

/* graph.c */
/* the graph's one copy of dims[0 .. n) (int64_t-aligned, in g's arena; NULL when n is 0 or out of
** memory): a graph's values have few shapes, held by most nodes' meta */
BPCC_INTERNAL const int64_t *bpcc_graph_intern_dims(struct bpcc_graph *g, const int64_t *dims, uint32_t n);
/* A node's metadata for `meta` (NONE, TTYPE or a TUPLE/LIST of them, checked by the caller): NULL for
** NONE, a TTYPE's one copy in g, else a copy in g's arena. BPCC_ERR_NOMEM when out of memory. */
BPCC_INTERNAL enum bpcc_status bpcc_graph_meta(struct bpcc_graph *g, const struct bpcc_value *meta,
                                               const struct bpcc_value **out);
/* bpcc_graph_create_node; with `adopt`, args/kwargs already live in g's arena and are taken
** over instead of copied. */
BPCC_INTERNAL enum bpcc_status bpcc_graph_node_new(struct bpcc_graph *g, enum bpcc_node_kind kind,
                                                   const char *name, const char *target,
                                                   const struct bpcc_value *args,
                                                   const struct bpcc_value *kwargs, bool adopt,
                                                   struct bpcc_node **out, struct bpcc_diag *d);
/* n becomes a node of `kind` with `target` and `args` (adopted: in g's arena), without kwargs,
** metadata or scope, named after `name` as a new node would be: in place, keeping its id, its users
** and its place in the list. Its old name stays reserved, as an erased node's does, but no longer
** finds it. Convert makes its dequantize nodes so, of the observers they replace: the observers'
** users need no change, and no node is allocated. */
BPCC_INTERNAL enum bpcc_status bpcc_node_remake(struct bpcc_node *n, enum bpcc_node_kind kind, const char *name,
                                                const char *target, const struct bpcc_value *args,
                                                struct bpcc_diag *d);
/* For a reader that names nodes as it goes (the text parser), which takes a name's slot in the
** graph's intern table (bpcc_intern_slot; the slot lasts while g->intern.table.epoch does):
** bpcc_graph_slot_node, the live node the slot names, or NULL; bpcc_graph_node_new_named,
** bpcc_graph_node_new with args/kwargs adopted, target interned in g and name interned with its
** still valid slot that no node has (a module may: bpcc_name_node), a name bpcc_node_name_valid
** accepts. */
BPCC_INTERNAL struct bpcc_node *bpcc_graph_slot_node(void *const *slot);
/* The name of a get_attr node of `target` (interned in g) that convert leaves implicit
** (bpcc_graph_set_implicit_qparams): named as bpcc_graph_node_new would name the node, taken among
** the node names from now on (the name's slot holds a node that is never alive), in *out. `slot`:
** the name's still valid slot when the caller has one that no node has (as for
** bpcc_graph_node_new_named), else NULL. */
BPCC_INTERNAL enum bpcc_status bpcc_graph_implicit_name(struct bpcc_graph *g, const char *target, void **slot,
                                                        const char **out, struct bpcc_diag *d);
BPCC_INTERNAL enum bpcc_status bpcc_graph_node_new_named(struct bpcc_graph *g, enum bpcc_node_kind kind,
                                                         const char *name, void **slot, const char *target,
                                                         const struct bpcc_value *args,
                                                         const struct bpcc_value *kwargs,
                                                         struct bpcc_node **out, struct bpcc_diag *d);
/* bpcc_graph_find_node for name[0 .. len), not NUL-terminated */
BPCC_INTERNAL struct bpcc_node *bpcc_graph_find_node_n(const struct bpcc_graph *g, const char *name, size_t len);
BPCC_INTERNAL enum bpcc_status bpcc_graph_add_use(struct bpcc_node *def, struct bpcc_node *user);
/* false when the change could not be recorded (undo.c): nothing changed then */
BPCC_INTERNAL bool bpcc_graph_remove_use(struct bpcc_node *def, struct bpcc_node *user);
/* One argument slot of user (ref, a NODE value inside its args or kwargs) refers to `to` instead,
** the uses following. BPCC_ERR_NOMEM when out of memory: nothing changed (while a pass records,
** what did change is in its log, which the failing pass plays back). */
BPCC_INTERNAL enum bpcc_status bpcc_node_set_ref(struct bpcc_node *user, struct bpcc_value *ref, struct bpcc_node *to);

/* Passes leave their graph untouched when they fail (undo.c): bpcc_graph_begin_pass starts the
** undo log (nothing with rollback off), and every change the IR's mutators make to an object that
** existed before records what it overwrites first; bpcc_graph_end_pass(g, s, d) plays the log back
** when s is a failure and drops it either way, returning s. Node and module pointers taken before
** the pass stay valid through a failure; those the pass made are then unreachable. A recorder
** returns false when out of memory: the change must then not be made (a mutator that can fail
** returns BPCC_ERR_NOMEM, one that cannot returns), and the pass ends in BPCC_ERR_NOMEM, played
** back. After a failed record every mutator changes nothing (bpcc_undo_failed). */
BPCC_INTERNAL enum bpcc_status bpcc_graph_begin_pass(struct bpcc_graph *g, struct bpcc_diag *d);
BPCC_INTERNAL enum bpcc_status bpcc_graph_end_pass(struct bpcc_graph *g, enum bpcc_status s, struct bpcc_diag *d);
BPCC_INTERNAL void bpcc_graph_release_undo(struct bpcc_graph *g);
/* rollback off, a pass ended well: the memory of the nodes erased since the last one is free for
** the nodes made next (graph.c: recycling) */
BPCC_INTERNAL void bpcc_graph_recycle_erased(struct bpcc_graph *g);
/* tests: the log takes a chunk of its own for each record, so that bpcc_alloc_fail_at reaches
** every record (the change it is for must then be left out, and the pass fail) */
BPCC_INTERNAL void bpcc_undo_grow_by_record(bool on);
/* the `size` bytes at addr, about to change */
BPCC_INTERNAL bool bpcc_undo_bytes(struct bpcc_graph *g, void *addr, size_t size);
/* an interned name whose slot, without a node until now, is about to name one */
BPCC_INTERNAL bool bpcc_undo_name(struct bpcc_graph *g, const char *interned);
/* the module of an interned name's slot (bpcc_name_module) about to change; old: it, NULL if none.
** Both are played back into slots made room in (bpcc_name_make_room) before the change. */
BPCC_INTERNAL bool bpcc_undo_module_entry(struct bpcc_graph *g, const char *key, struct bpcc_module *old);
/* a numbering base (interned) about to enter g->bases */
BPCC_INTERNAL bool bpcc_undo_base(struct bpcc_graph *g, const char *base);
#define BPCC_UNDO(g, lvalue) (!(g)->undo.on || bpcc_undo_bytes((g), &(lvalue), sizeof(lvalue)))
/* a record failed during the pass running: its change was left out, and the pass will fail */
static inline bool bpcc_undo_failed(const struct bpcc_graph *g) { return g->undo.failed; }
/* BPCC_UNDO for a field of node n, which needs no record when the pass made n */
static inline bool bpcc_undo_node(struct bpcc_node *n, void *addr, size_t size)
{
    struct bpcc_graph *g = n->graph;
    return !g->undo.on || n->id >= g->undo.next_id || bpcc_undo_bytes(g, addr, size);
}
#define BPCC_UNDO_NODE(n, lvalue) bpcc_undo_node((n), &(lvalue), sizeof(lvalue))
/* the same for a field of module m, which needs none when the pass made m */
#define BPCC_UNDO_MODULE(m, lvalue) ((m)->fresh || BPCC_UNDO((m)->graph, lvalue))
/* m was made by the pass running: flagged, and listed for its flag to be cleared at the pass's
** end (false when out of memory for the list: the pass fails, as for a record) */
BPCC_INTERNAL bool bpcc_undo_module_made(struct bpcc_graph *g, struct bpcc_module *m);

/* module.c */
/* bpcc_graph_find_module(n->graph, n->target) through the module remembered on the node: passes
** ask for a node's module many times, and each table lookup is a few cache misses on a big graph.
** Only mutators remember (node creation, retargeting, and bpcc_graph_resolve_modules at the end
** of each pass), so that readers of a const graph write nothing. The remembered module is known
** good, without reading it, while the node holds its type (module_type) under the graph's current
** module_epoch: unlinking a module or changing its type (bpcc_module_set_type) clears the type on
** the one node that remembered it, or moves the epoch on when more did. Otherwise it is used while
** it is still in the table (not unlinked) under the node's target, else the table is asked. On a
** 1M-node graph each pass walks the nodes several times asking for their modules' types; reading
** the module itself each time was a cache miss per node per walk. */
BPCC_INTERNAL struct bpcc_module *bpcc_node_module(const struct bpcc_node *n);
/* Whether n changes its first argument in place, as PyTorch runs it: a method or function named
** with one trailing underscore (x.add_(y), torch.relu_(x)), a call with inplace=True (F.relu(x,
** inplace=True)), a module whose inplace attribute is True (nn.ReLU(inplace=True)), or one of
** the functions torchvision wraps for tracing that change their first argument (MViT's
** _add_rel_pos and _add_shortcut). The interpreter writes such a result back into the argument;
** convert keeps such a node whose result nothing reads. */
BPCC_INTERNAL bool bpcc_node_in_place(const struct bpcc_node *n);
/* the type of bpcc_node_module(n) (NULL when none), from the node alone while its cache is good */
BPCC_INTERNAL const char *bpcc_node_module_type(const struct bpcc_node *n);
/* m->type = type (interned in m's graph); the nodes remembering m forget its type */
BPCC_INTERNAL void bpcc_module_set_type(struct bpcc_module *m, const char *type);
/* n remembers the module its target names (call_module nodes; others none); target_slot, when
** not NULL, is the intern slot of n's target, which holds it */
BPCC_INTERNAL void bpcc_node_resolve_module(struct bpcc_node *n, void *const *target_slot);
BPCC_INTERNAL void bpcc_graph_resolve_modules(struct bpcc_graph *g);
/* every node forgets its remembered module and every module its callers (after an undo playback
** the caches may name modules the failed pass made; bpcc_graph_resolve_modules fills them again) */
BPCC_INTERNAL void bpcc_graph_forget_modules(struct bpcc_graph *g);
/* m's tensor index (if it has one) built again in place from its tensors */
BPCC_INTERNAL void bpcc_module_reindex_tensors(struct bpcc_module *m);
/* The module a get_attr target names an attribute of: "a.b.c" -> module "a.b", leaf "c"; a name
** without dots -> the root module "". NULL when there is no such module. */
BPCC_INTERNAL struct bpcc_module *bpcc_graph_attr_owner(const struct bpcc_graph *g, const char *target,
                                                        const char **leaf_out);
/* The tensor a get_attr target reads ("a.b.c": tensor "c" of module "a.b"), or NULL */
BPCC_INTERNAL struct bpcc_tensor *bpcc_graph_attr_tensor(const struct bpcc_graph *g, const char *target);
BPCC_INTERNAL void bpcc_graph_release_modules(struct bpcc_graph *g);
/* bpcc_graph_add_module where a name in use is no error but *out NULL: a caller looking for a free
** name probes the table once per candidate instead of a lookup and then an add */
BPCC_INTERNAL enum bpcc_status bpcc_graph_add_module_if_free(struct bpcc_graph *g, const char *name, const char *type,
                                                             struct bpcc_module **out, struct bpcc_diag *d);
/* m's live submodule <m.name>.<leaf> (`leaf` at the root), or NULL: a walk over m's children */
BPCC_INTERNAL struct bpcc_module *bpcc_module_child(const struct bpcc_module *m, const char *leaf);
/* Has g a live module whose type `pred` accepts? Each distinct type is asked once (types are
** interned: a type is known by its pointer), so a model costs a look at its few dozen types. */
BPCC_INTERNAL bool bpcc_graph_any_module_type(const struct bpcc_graph *g, bool (*pred)(const char *type));
/* Unlink m and its submodules (O(subtree)): marked dead, lookups no longer find them (their names'
** slots keep them, read as none); `modules` keeps them until bpcc_graph_compact_modules. The module
** objects stay valid (graph arena). */
BPCC_INTERNAL void bpcc_graph_unlink_module(struct bpcc_graph *g, struct bpcc_module *m);
/* Module m, without submodules, under another name: out of its old place in the tree and its old
** name's slot, into `name`'s (which no live module may hold) and under its nearest ancestor there;
** an unlinked module comes back to life. It must be in `modules`: live, or unlinked by the pass
** running. Nodes that remembered it look again (by their targets). */
BPCC_INTERNAL enum bpcc_status bpcc_graph_rename_module(struct bpcc_graph *g, struct bpcc_module *m, const char *name,
                                                        struct bpcc_diag *d);
/* a zeroed header for a tensor of rank ndim (<= BPCC_MAX_DIMS) in g's arena, ndim set; NULL when out of memory */
BPCC_INTERNAL struct bpcc_tensor *bpcc_tensor_header(struct bpcc_arena *a, uint32_t ndim);
/* An uninitialized float32 tensor whose header has room for its range: the caller writes the
** 2 dims[0] floats at *range and then sets BPCC_TENSOR_RANGED (never for ndim 0) */
BPCC_INTERNAL enum bpcc_status bpcc_tensor_new_ranged(struct bpcc_graph *g, uint32_t ndim, const int64_t *dims,
                                                      float **range, struct bpcc_tensor **out, struct bpcc_diag *d);
/* bpcc_tensor_new without zeroing the data: the caller writes every element */
BPCC_INTERNAL enum bpcc_status bpcc_tensor_new_uninit(struct bpcc_graph *g, enum bpcc_dtype dtype, uint32_t ndim,
                                                      const int64_t *dims, struct bpcc_tensor **out, struct bpcc_diag *d);
BPCC_INTERNAL void bpcc_graph_compact_modules(struct bpcc_graph *g);
/* room for n attributes (the arena cannot grow an array in place: a module whose attribute count
** is known up front, a clone or an observer, takes it at once instead of by doubling) */
BPCC_INTERNAL enum bpcc_status bpcc_module_reserve_attrs(struct bpcc_module *m, uint32_t n);
/* Remove attribute `key` if present, keeping the others' order (undone with the pass). */
BPCC_INTERNAL enum bpcc_status bpcc_module_remove_attr(struct bpcc_module *m, const char *key);
/* Room for `extra` more tensors (and their index entries), so that as many bpcc_module_put_tensor
** calls cannot fail: a pass that must store into many modules all or nothing reserves first. The
** array grows to exactly that size (not by doubling), so reserve once for all that will come. */
BPCC_INTERNAL enum bpcc_status bpcc_module_reserve_tensors(struct bpcc_module *m, uint32_t extra);
/* A pass replaced t in the one module that held it (it is no one's now). With rollback off, where
** t lies in the weights file's mapping, its whole pages go back to the kernel: folding a model's
** batch norms then holds one copy of its conv weights, not two (bpcc quantize of resnet50: peak
** 242 -> 152 MB). A tensor that is also another module's (BPCC_TENSOR_SHARED) keeps its pages;
** with rollback on, the log may put t back, and it keeps them too. Not at the end of a pass with
** rollback on either: giving pages back costs ~0.26 us a page on this machine (resnet50's fuse 7 ->
** 14 ms), which the library's default mode would pay in every fuse, for memory it frees with the
** graph. */
BPCC_INTERNAL void bpcc_graph_tensor_replaced(struct bpcc_graph *g, const struct bpcc_tensor *t);
/* m's tensor headers, the data of those made in the arena and its array of them go back to its
** graph's arena (bpcc_arena_give), and m has no tensors: for a module that nothing will read again,
** with rollback off (convert's replaced observers, fusion's pruned modules). A tensor another module
** may hold too (BPCC_TENSOR_SHARED) stays, and so does data elsewhere (the weights file's). */
BPCC_INTERNAL void bpcc_module_give_tensors(struct bpcc_module *m);
/* m, a module without submodules that no node calls or remembers and the table no longer lists,
** goes: unlinked, its name finding no module, its tensors' headers and array and then the module
** itself given back to the arena (with rollback off: convert's observers, once their last caller
** is converted; the modules fusion prunes). m must not be used after. */
BPCC_INTERNAL void bpcc_module_give(struct bpcc_module *m);
/* bpcc_module_set_tensor for a name interned in m's graph where room was reserved: cannot fail */
BPCC_INTERNAL void bpcc_module_put_tensor(struct bpcc_module *m, const char *interned, enum bpcc_tensor_role role,
                                          struct bpcc_tensor *t);
/* a new tensor under a name interned in m's graph that none of m's tensors has (the caller knows):
** no lookup, where bpcc_module_set_tensor's would be a cache miss or more in a big module's index */
BPCC_INTERNAL enum bpcc_status bpcc_module_add_tensor(struct bpcc_module *m, const char *interned,
                                                      enum bpcc_tensor_role role, struct bpcc_tensor *t);
/* m (in from's graph) takes from's attributes, in place of its own, by sharing their array, as
** observers made from one spec, modules cloned by fusion and weighted modules converted alike have
** the same ones: the first change to either copies it (bpcc_module_set_attr,
** bpcc_module_reserve_attrs). */
BPCC_INTERNAL void bpcc_module_share_attrs(struct bpcc_module *m, struct bpcc_module *from);

/* qparams.c: a dequantize call (`x.dequantize()` or `torch.dequantize(x)`) */
BPCC_INTERNAL bool bpcc_node_is_dequantize(const struct bpcc_node *n);

/* dtype.c */
BPCC_INTERNAL const char *bpcc_dtype_st_name(enum bpcc_dtype t);
BPCC_INTERNAL enum bpcc_dtype bpcc_dtype_from_st_name(const char *s);
BPCC_INTERNAL enum bpcc_dtype bpcc_dtype_carrier(enum bpcc_dtype t);
/* a plain integer or bool dtype (int64 .. uint8, bool; not the quantized ones) */
BPCC_INTERNAL bool bpcc_dtype_is_integral(enum bpcc_dtype t);

/* safetensors.c: write n tensors under the given keys to fp, a file that can seek (the header is
** streamed, its length written over a placeholder at the end); path for messages */
BPCC_INTERNAL enum bpcc_status bpcc_safetensors_write(FILE *fp, const char *path,
                                                      const char *const *keys,
                                                      const struct bpcc_tensor *const *tensors,
                                                      uint32_t n, struct bpcc_diag *d);
/* safetensors.c: once the tensors point into st's data, keep only that (the mapping and the aligned
** copies): the names, shapes and index go, and st then holds no tensor (count 0). false when out of
** memory (st unchanged). */
BPCC_INTERNAL bool bpcc_safetensors_keep_data(struct bpcc_safetensors *st);
/* safetensors.c: whether [p, p + n) lies in st's mapping (st may be NULL) */
BPCC_INTERNAL bool bpcc_safetensors_holds(const struct bpcc_safetensors *st, const void *p, size_t n);
/* safetensors.c: the whole pages of [p, p + n), where it lies in st's mapping, given back to the
** kernel (read again, they are the file's bytes). false when it does not lie there. */
BPCC_INTERNAL bool bpcc_safetensors_release(const struct bpcc_safetensors *st, const void *p, size_t n);
/* json.c: route jansson's allocations through bpcc's hook (idempotent) */
BPCC_INTERNAL void bpcc_json_init(void);

/* tensor.c */
BPCC_INTERNAL size_t bpcc_tensor_expected_bytes(const struct bpcc_tensor *t, bool *overflow);

#endif /* BPCC_IR_H */
