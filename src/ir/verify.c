/*
** verify.c — the IR invariants every pass can check (bpcc_graph_verify).
*/
#include "ir.h"

struct ref_ctx {
    const struct bpcc_graph *g;
    const struct bpcc_node *user;
    uint32_t *refs;     /* by node id: references seen */
    uint32_t pos;       /* position of user */
    struct bpcc_diag *d;
    bool bad;
};

static void count_ref(struct bpcc_value *ref, void *ud)
{
    struct ref_ctx *c = ud;
    const struct bpcc_node *def = ref->u.node, *u = c->user;
    if (!def || def->graph != c->g || def->dead) {
        bpcc_diag_error(c->d, BPCC_ERR_GRAPH, c->g->source_file, u->src_line, u->src_col,
                        "node '%s' refers to a node that is not in the graph", u->name);
        c->bad = true;
        return;
    }
    c->refs[def->id]++;
    if (def->mark >= c->pos) {
        bpcc_diag_error(c->d, BPCC_ERR_GRAPH, c->g->source_file, u->src_line, u->src_col,
                        "node '%s' uses '%s' before it is defined", u->name, def->name);
        c->bad = true;
    }
    if (def->kind == BPCC_NODE_OUTPUT) {
        bpcc_diag_error(c->d, BPCC_ERR_GRAPH, c->g->source_file, u->src_line, u->src_col,
                        "node '%s' uses the output node", u->name);
        c->bad = true;
    }
}

struct count_ctx {
    const struct bpcc_node *def;
    uint32_t n;
};

static void count_def(struct bpcc_value *ref, void *ud)
{
    struct count_ctx *c = ud;
    if (ref->u.node == c->def) c->n++;
}

/* Does get_attr target `t` resolve? "a.b.c": module "a.b.c", or tensor/attribute "c" of
** module "a.b" (module "" for a name without dots). */
static bool attr_resolves(const struct bpcc_graph *g, const char *t)
{
    if (bpcc_graph_find_module(g, t)) return true;
    const char *leaf;
    const struct bpcc_module *m = bpcc_graph_attr_owner(g, t, &leaf);
    return m && (bpcc_module_tensor(m, leaf) || bpcc_module_attr(m, leaf));
}

/* an implicit get_attr node (BPCC_VAL_ATTR, bpcc_graph_set_implicit_qparams) in an argument of the
** ref_ctx's node reads what a module defines */
static void check_implicit(const struct bpcc_value *v, void *ud)
{
    const struct ref_ctx *c = ud;
    if (!attr_resolves(c->g, v->u.attr.target))
        bpcc_diag_error(c->d, BPCC_ERR_GRAPH, c->g->source_file, c->user->src_line, c->user->src_col,
                        "node '%s' reads attribute '%s' (its argument '%s'), which no module defines", c->user->name,
                        v->u.attr.target, v->u.attr.name);
}

enum bpcc_status bpcc_graph_verify(const struct bpcc_graph *g, struct bpcc_diag *d)
{
    struct bpcc_diag local;
    if (!d) {
        bpcc_diag_init(&local);
        d = &local;
    }
    const char *file = g->source_file;
    uint32_t errors_before = d->n_errors;
    uint32_t *refs = bpcc_malloc((g->next_id + 1) * sizeof *refs);
    if (!refs) return bpcc_diag_nomem(d);
    memset(refs, 0, (g->next_id + 1) * sizeof *refs);

    uint32_t pos = 1, n_outputs = 0, counted = 0;
    for (struct bpcc_node *n = g->first; n; n = n->next) n->mark = UINT32_MAX;
    bool bad = false;
    for (struct bpcc_node *n = g->first; n; n = n->next, pos++) {
        counted++;
        n->mark = pos;
        /* names are not looked up: they are unique by construction (a node is only ever named by
        ** its creation, with a name no node had; the parser refuses duplicates), and the lookup
        ** was a cache miss per node on a big graph */
        struct ref_ctx c = {g, n, refs, pos, d, false};
        bpcc_value_visit_nodes(&n->args, count_ref, &c);
        if (n->kwargs) bpcc_value_visit_nodes(n->kwargs, count_ref, &c);
        bad |= c.bad;
        bpcc_value_visit_attrs(&n->args, check_implicit, &c);
        if (n->kwargs) bpcc_value_visit_attrs(n->kwargs, check_implicit, &c);
        switch ((enum bpcc_node_kind)n->kind) {
        case BPCC_NODE_OUTPUT:
            n_outputs++;
            if (n->next)
                bpcc_diag_error(d, BPCC_ERR_GRAPH, file, n->src_line, n->src_col,
                                "the output node '%s' must be the last node", n->name);
            if (n->args.n != 1)
                bpcc_diag_error(d, BPCC_ERR_GRAPH, file, n->src_line, n->src_col,
                                "the output node takes exactly one argument, not %u", n->args.n);
            if (n->n_users)
                bpcc_diag_error(d, BPCC_ERR_GRAPH, file, n->src_line, n->src_col,
                                "the output node may not have users");
            break;
        case BPCC_NODE_CALL_MODULE:
            if (!bpcc_node_module(n)) {
                bpcc_diag_error(d, BPCC_ERR_GRAPH, file, n->src_line, n->src_col,
                                "node '%s' calls module '%s', which is not defined", n->name,
                                n->target);
            }
            break;
        case BPCC_NODE_GET_ATTR:
            if (!attr_resolves(g, n->target))
                bpcc_diag_error(d, BPCC_ERR_GRAPH, file, n->src_line, n->src_col,
                                "node '%s' reads attribute '%s', which no module defines",
                                n->name, n->target);
            break;
        case BPCC_NODE_PLACEHOLDER:
        case BPCC_NODE_CALL_FUNCTION:
        case BPCC_NODE_CALL_METHOD:
            if (!n->target[0])
                bpcc_diag_error(d, BPCC_ERR_GRAPH, file, n->src_line, n->src_col,
                                "node '%s' has an empty target", n->name);
            break;
        default:
            bpcc_diag_error(d, BPCC_ERR_GRAPH, file, n->src_line, n->src_col,
                            "node '%s' has an invalid kind", n->name);
        }
    }
    if (counted != g->n_nodes)
        bpcc_diag_error(d, BPCC_ERR_INTERNAL, file, 0, 0, "node count %u disagrees with list (%u)",
                        g->n_nodes, counted);
    if (n_outputs != 1)
        bpcc_diag_error(d, BPCC_ERR_GRAPH, file, 0, 0,
                        "the graph must have exactly one output node, it has %u", n_outputs);

    /* use-def: each def's users list must account for exactly the references made to it */
    if (!bad) {
        for (struct bpcc_node *n = g->first; n; n = n->next) {
            uint32_t total = 0;
            for (uint32_t i = 0; i < n->n_users; i++) {
                const struct bpcc_node *u = n->users[i].node;
                struct count_ctx c = {n, 0};
                bpcc_value_visit_nodes((struct bpcc_value *)&u->args, count_def, &c);
                if (u->kwargs) bpcc_value_visit_nodes(u->kwargs, count_def, &c);
                if (u->dead || c.n != n->users[i].count)
                    bpcc_diag_error(d, BPCC_ERR_INTERNAL, file, n->src_line, n->src_col,
                                    "users of '%s' are out of date ('%s')", n->name, u->name);
                total += n->users[i].count;
            }
            if (total != refs[n->id])
                bpcc_diag_error(d, BPCC_ERR_INTERNAL, file, n->src_line, n->src_col,
                                "users of '%s' are out of date (%u uses recorded, %u made)",
                                n->name, total, refs[n->id]);
        }
    }
    bpcc_xfree(refs);

    for (uint32_t i = 0; i < g->n_modules; i++) {
        const struct bpcc_module *m = g->modules[i];
        for (uint32_t k = 0; k < m->n_tensors; k++) {
            const struct bpcc_tensor *t = m->tensors[k].t;
            bool overflow;
            size_t want = bpcc_tensor_expected_bytes(t, &overflow);
            if (overflow)
                bpcc_diag_error(d, BPCC_ERR_GRAPH, file, t->src_line, t->src_col,
                                "tensor '%s' of module '%s' has an invalid shape",
                                m->tensors[k].name, m->name);
            else if (t->data && want != t->nbytes)
                bpcc_diag_error(d, BPCC_ERR_GRAPH, file, t->src_line, t->src_col,
                                "tensor '%s' of module '%s' holds %zu bytes, its type needs %zu",
                                m->tensors[k].name, m->name, t->nbytes, want);
        }
    }
    if (d->n_errors > errors_before) return BPCC_ERR_GRAPH;
    return BPCC_OK;
}
