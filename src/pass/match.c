/*
** match.c — the pattern matcher, with the semantics of PyTorch's torch.ao.quantization.fx
** match_utils.is_match and the walk of _find_matches: patterns are tried at each node from the
** output toward the inputs, in registry matching order, taken from the anchor-op index so that
** the cost is linear in the graph.
*/
#include "pass.h"

const char *bpcc_node_op(const struct bpcc_node *n)
{
    switch ((enum bpcc_node_kind)n->kind) {
    case BPCC_NODE_CALL_MODULE:
        return bpcc_node_module_type(n);
    case BPCC_NODE_CALL_FUNCTION:
    case BPCC_NODE_CALL_METHOD:
        return n->target;
    default:
        return NULL;
    }
}

static bool is_wildcard(const struct pattern *p) { return !strcmp(p->op, "MatchAllNode"); }

bool bpcc_pattern_match(const struct bpcc_graph *g, const struct pattern *p,
                        const struct bpcc_value *v, uint32_t max_uses, struct match *m)
{
    if (m->n_leaves >= MATCH_MAX_LEAVES) return false;
    if (is_wildcard(p)) {
        m->leaf_pattern[m->n_leaves] = p;
        m->nodes[m->n_leaves++] = v->kind == BPCC_VAL_NODE ? v->u.node : NULL;
        return true;
    }
    if (v->kind != BPCC_VAL_NODE) return false;
    const struct bpcc_node *n = v->u.node;
    if (n->n_users > max_uses) return false;
    const char *op = bpcc_node_op(n);
    if (!op || strcmp(op, p->op) != 0) return false; /* canonical names: one op, one name */
    uint32_t mark = m->n_leaves;
    m->leaf_pattern[m->n_leaves] = p;
    m->nodes[m->n_leaves++] = (struct bpcc_node *)n;
    if (!p->n_args) return true;
    /* exact positional arity; kwargs are not looked at */
    if (p->n_args != n->args.n) {
        m->n_leaves = mark;
        return false;
    }
    for (uint32_t i = 0; i < p->n_args; i++)
        if (!bpcc_pattern_match(g, p->args[i], &n->args.u.seq.items[i], 1, m)) {
            m->n_leaves = mark;
            return false;
        }
    return true;
}

enum bpcc_status bpcc_match_graph(const struct bpcc_graph *g, const struct bpcc_config *c,
                                  bool (*accept)(const struct pattern_entry *e), bool claim_wildcards,
                                  enum bpcc_status (*found)(const struct match *m, void *ud), void *ud,
                                  struct bpcc_diag *d)
{
    /* claimed[id]: node id -> claimed by a match */
    uint8_t *claimed = bpcc_malloc(g->next_id + 1);
    if (!claimed) return bpcc_diag_nomem(d);
    memset(claimed, 0, g->next_id + 1);
    enum bpcc_status s = BPCC_OK;
    for (struct bpcc_node *node = g->last; node && !s; node = node->prev) {
        if (claimed[node->id]) continue;
        const char *op = bpcc_node_op(node);
        if (!op) continue;
        uint32_t n_cand;
        const uint32_t *cand = bpcc_registry_candidates(c, op, &n_cand);
        for (uint32_t k = 0; k < n_cand; k++) {
            const struct pattern_entry *e = c->entries[cand[k]];
            if (accept && !accept(e)) continue;
            struct match m = {.entry = e, .anchor = node};
            struct bpcc_value self = bpcc_value_node(node);
            if (!bpcc_pattern_match(g, e->pattern, &self, UINT32_MAX, &m)) continue;
            /* the first pattern to claim a node keeps it */
            for (uint32_t i = 0; i < m.n_leaves; i++)
                if (m.nodes[i] && (claim_wildcards || !is_wildcard(m.leaf_pattern[i])) &&
                    !claimed[m.nodes[i]->id])
                    claimed[m.nodes[i]->id] = 1;
            s = found(&m, ud);
            break;
        }
    }
    bpcc_xfree(claimed);
    return s;
}
