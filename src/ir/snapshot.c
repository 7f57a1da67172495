/*
** snapshot.c — a copy of a graph's structure, so that a failed pass can give its graph back as it
** was (bpcc_graph_restore in graph.c). Nodes keep their names, ids, order, users order, metadata,
** scopes and source positions; the naming state and the reserved names of erased nodes are kept;
** modules keep their order, attributes and tensors, whose headers are copied and whose data is
** shared (never written by passes: they create new tensors).
*/
#include "ir.h"

/* node references in a copied value: to the snapshot's nodes */
static void remap(struct bpcc_value *ref, void *ud)
{
    struct bpcc_node *const *map = ud;
    ref->u.node = map[ref->u.node->id];
}

static enum bpcc_status copy_value(struct bpcc_graph *dst, struct bpcc_value *out, const struct bpcc_value *v,
                                   struct bpcc_node **map)
{
    enum bpcc_status s = bpcc_value_copy(dst, out, v);
    if (s) return BPCC_ERR_NOMEM; /* nesting was checked when v was made */
    bpcc_value_visit_nodes(out, remap, map);
    return BPCC_OK;
}

static enum bpcc_status copy_modules(struct bpcc_graph *dst, const struct bpcc_graph *g, struct bpcc_diag *d)
{
    for (uint32_t i = 0; i < g->n_modules; i++) {
        const struct bpcc_module *m = g->modules[i];
        if (m->dead) continue;
        struct bpcc_module *c;
        enum bpcc_status s = bpcc_graph_add_module(dst, m->name, m->type, &c, d);
        if (s) return s;
        if (bpcc_value_copy(dst, &c->attrs, &m->attrs)) return bpcc_diag_nomem(d);
        c->attrs_cap = c->attrs.n;
        c->src_line = m->src_line;
        c->src_col = m->src_col;
        c->mark = m->mark;
        for (uint32_t k = 0; k < m->n_tensors; k++) {
            struct bpcc_tensor *t = BPCC_ARENA_NEW(&dst->arena, struct bpcc_tensor);
            if (!t) return bpcc_diag_nomem(d);
            *t = *m->tensors[k].t;
            s = bpcc_module_set_tensor(c, m->tensors[k].name, m->tensors[k].role, t, d);
            if (s) return s;
        }
    }
    return BPCC_OK;
}

static enum bpcc_status copy_nodes(struct bpcc_graph *dst, const struct bpcc_graph *g, struct bpcc_node **map,
                                   struct bpcc_diag *d)
{
    for (const struct bpcc_node *n = g->first; n; n = n->next) {
        struct bpcc_value args, kwargs;
        if (copy_value(dst, &args, &n->args, map) || copy_value(dst, &kwargs, &n->kwargs, map)) return bpcc_diag_nomem(d);
        struct bpcc_node *c;
        enum bpcc_status s = bpcc_graph_node_new(dst, n->kind, n->name, n->target, &args, &kwargs, true, &c, d);
        if (s) return s;
        if (c->name != bpcc_graph_intern(dst, n->name))
            return bpcc_diag_error(d, BPCC_ERR_INTERNAL, NULL, 0, 0, "snapshot: node '%s' renamed", n->name);
        if (bpcc_value_copy(dst, &c->meta, &n->meta)) return bpcc_diag_nomem(d);
        if (n->scope_path && (!(c->scope_path = bpcc_graph_intern(dst, n->scope_path)) ||
                              !(c->scope_type = bpcc_graph_intern(dst, n->scope_type))))
            return bpcc_diag_nomem(d);
        c->src_line = n->src_line;
        c->src_col = n->src_col;
        c->mark = n->mark;
        map[n->id] = c;
    }
    /* ids and users exactly as they were (users in the order the uses were made) */
    for (const struct bpcc_node *n = g->first; n; n = n->next) {
        struct bpcc_node *c = map[n->id];
        c->id = n->id;
        if (c->n_users != n->n_users)
            return bpcc_diag_error(d, BPCC_ERR_INTERNAL, NULL, 0, 0, "snapshot: users of '%s' differ", n->name);
        for (uint32_t i = 0; i < n->n_users; i++)
            c->users[i] = (struct user_entry){map[n->users[i].node->id], n->users[i].count};
    }
    dst->next_id = g->next_id;
    return BPCC_OK;
}

enum bpcc_status bpcc_graph_snapshot(const struct bpcc_graph *g, struct bpcc_graph **out, struct bpcc_diag *d)
{
    *out = NULL;
    struct bpcc_graph *dst;
    enum bpcc_status s = bpcc_graph_new(&dst, d);
    if (s) return s;
    struct bpcc_node **map = bpcc_malloc((g->next_id + 1) * sizeof *map);
    if (!map) s = bpcc_diag_nomem(d);
    if (!s && bpcc_graph_copy_names(dst, g)) s = bpcc_diag_nomem(d);
    if (!s) s = copy_modules(dst, g, d);
    if (!s) s = copy_nodes(dst, g, map, d);
    if (!s && ((g->source_file && !(dst->source_file = bpcc_graph_intern(dst, g->source_file))) ||
               (g->weights_name && !(dst->weights_name = bpcc_graph_intern(dst, g->weights_name)))))
        s = bpcc_diag_nomem(d);
    dst->weights_line = g->weights_line;
    dst->weights_col = g->weights_col;
    bpcc_xfree(map);
    if (s) {
        bpcc_graph_free(dst);
        return s;
    }
    *out = dst;
    return BPCC_OK;
}
