/*
** snapshot.c — a copy of a graph's structure, so that a failed pass can give its graph back as it
** was (bpcc_graph_restore in graph.c). Nodes keep their names, ids, order, users order, metadata,
** scopes and source positions, and the naming state is copied; the names themselves are not (a
** restore takes them back from the intern table it keeps, through by_id, the id -> copy map);
** modules keep their order, tree, attributes and tensors, whose headers are copied and whose data
** is shared (passes never write tensor data: they create new tensors). Strings are shared too and
** nothing is hashed again: a snapshot is a few copies per node, and lives no longer than its graph
** (freed when the pass succeeds; when it fails, the restored graph keeps the failed state's memory
** and intern table, which hold every shared string).
*/
#include "ir.h"

/* node references in a copied value: to the snapshot's nodes */
static void remap(struct bpcc_value *ref, void *ud)
{
    struct bpcc_node *const *map = ud;
    ref->u.node = map[ref->u.node->id];
}

static enum bpcc_status copy_nodes(struct bpcc_graph *dst, const struct bpcc_graph *g, struct bpcc_node **map)
{
    struct bpcc_node *prev = NULL;
    for (const struct bpcc_node *n = g->first; n; n = n->next) {
        struct bpcc_node *c = BPCC_ARENA_NEW(&dst->nodes, struct bpcc_node);
        if (!c) return BPCC_ERR_NOMEM;
        *c = *n;
        c->graph = dst;
        c->module = NULL; /* n's, not the snapshot's */
        c->module_type = NULL;
        c->prev = prev;
        c->next = NULL;
        if (prev) prev->next = c;
        else dst->first = c;
        prev = c;
        map[n->id] = c;
    }
    dst->last = prev;
    for (struct bpcc_node *c = dst->first; c; c = c->next) {
        struct bpcc_value a = c->args, k = c->kwargs, m = c->meta; /* still the originals' */
        if (bpcc_value_copy_shared(dst, &c->args, &a) || bpcc_value_copy_shared(dst, &c->kwargs, &k) ||
            bpcc_value_copy_shared(dst, &c->meta, &m))
            return BPCC_ERR_NOMEM;
        bpcc_value_visit_nodes(&c->args, remap, map);
        bpcc_value_visit_nodes(&c->kwargs, remap, map);
        if (c->cap_users) {
            struct user_entry *u = BPCC_ARENA_NEWN(&dst->arena, struct user_entry, c->cap_users);
            if (!u) return BPCC_ERR_NOMEM;
            for (uint32_t i = 0; i < c->n_users; i++) u[i] = (struct user_entry){map[c->users[i].node->id], c->users[i].count};
            c->users = u;
        }
    }
    dst->n_nodes = g->n_nodes;
    dst->next_id = g->next_id;
    return BPCC_OK;
}

void bpcc_graph_set_rollback(struct bpcc_graph *g, bool on) { g->no_rollback = !on; }

enum bpcc_status bpcc_graph_snapshot(const struct bpcc_graph *g, struct bpcc_graph **out, struct bpcc_diag *d)
{
    *out = NULL;
    if (g->no_rollback) return BPCC_OK; /* no snapshot: bpcc_graph_end_pass has nothing to restore */
    struct bpcc_graph *dst;
    enum bpcc_status s = bpcc_graph_new(&dst, d);
    if (s) return s;
    /* node id -> copy, NULL for the ids of erased nodes: kept as the snapshot's by_id, from which
    ** a restore gives the names back */
    struct bpcc_node **map = bpcc_malloc((g->next_id + 1) * sizeof *map);
    s = map ? BPCC_OK : BPCC_ERR_NOMEM;
    if (!s) memset(map, 0, (g->next_id + 1) * sizeof *map);
    dst->by_id = map;
    /* the module marks are borrowed for a moment (and put back): g is not changed */
    if (!s) s = bpcc_graph_copy_modules(dst, (struct bpcc_graph *)g);
    if (!s) s = copy_nodes(dst, g, map);
    if (!s) s = bpcc_graph_copy_naming(dst, g);
    dst->source_file = g->source_file;
    dst->weights_name = g->weights_name;
    dst->weights_line = g->weights_line;
    dst->weights_col = g->weights_col;
    if (s) {
        bpcc_graph_free(dst);
        return bpcc_diag_nomem(d);
    }
    *out = dst;
    return BPCC_OK;
}
