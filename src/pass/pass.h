/*
** pass.h — graph passes (internal): the pattern matcher shared by fuse and prepare, the fuser
** method table, and the fusion pass.
*/
#ifndef BPCC_PASS_H
#define BPCC_PASS_H

#include "../config/config.h"
#include "../ir/ir.h"

#define MATCH_MAX_LEAVES 16

/* One match: the registry entry, its anchor, and per pattern leaf (pattern preorder: the node
** itself, then its argument patterns left to right) the graph node it matched, or NULL where
** MatchAllNode matched a literal. */
struct match {
    const struct pattern_entry *entry;
    struct bpcc_node *anchor;
    uint32_t n_leaves;
    struct bpcc_node *nodes[MATCH_MAX_LEAVES];
    const struct pattern *leaf_pattern[MATCH_MAX_LEAVES];
};

/* The op a node is matched by: a call_module's module type, a call_function's or
** call_method's target; NULL for other kinds. */
BPCC_INTERNAL const char *bpcc_node_op(const struct bpcc_node *n);

/* PyTorch's _is_match: does `node` match pattern p (anchor: any users; interior: max_uses)?
** On success the leaves are appended to m. */
BPCC_INTERNAL bool bpcc_pattern_match(const struct bpcc_graph *g, const struct pattern *p,
                                      const struct bpcc_value *v, uint32_t max_uses,
                                      struct match *m);

/* Walk the graph from the output toward the inputs; at each node not yet claimed try the
** candidate entries for its op in matching order (only those `accept` admits); the first that
** matches claims its nodes (MatchAllNode leaves too when `claim_wildcards`) and is handed to
** `found` (anchor-last-first: the walk order), whose match lives only for the call: the caller
** keeps what it needs of it (a struct match holds room for MATCH_MAX_LEAVES leaves, most matches
** have two or three). A status other than BPCC_OK from `found` ends the walk and is returned. */
BPCC_INTERNAL enum bpcc_status bpcc_match_graph(const struct bpcc_graph *g,
                                                const struct bpcc_config *c,
                                                bool (*accept)(const struct pattern_entry *e),
                                                bool claim_wildcards,
                                                enum bpcc_status (*found)(const struct match *m, void *ud),
                                                void *ud, struct bpcc_diag *d);

/* fuse.c: fold batch norm `bn` (eval: its running statistics) into the weight and bias of `conv`
** (new tensors; out_axis 0 for conv and linear weights, 1 for transposed convolutions), with
** torch.nn.utils.fusion's formulas in float32:
**   conv:   W' = W * (gamma * rsqrt(var + eps))      b' = (b - mean) * rsqrt(var + eps) * gamma + beta
**   linear: W' = W * (gamma * rsqrt(var + eps))      b' = (b - mean) * (gamma * rsqrt(var + eps)) + beta
** Parts that do not fit: BPCC_ERR_GRAPH, nothing changed, the reason in why (naming the conv as
** `from`) and not in d. */
BPCC_INTERNAL enum bpcc_status bpcc_fold_bn(struct bpcc_graph *g, struct bpcc_module *conv, const char *from,
                                            const struct bpcc_module *bn, int out_axis, bool linear, char *why,
                                            size_t n_why, struct bpcc_diag *d);

/* fuse.c: the fuser methods, built-in and registered (for config validation) */
BPCC_INTERNAL bool bpcc_fuser_arity(const char *name, uint32_t *min_out, uint32_t *max_out);
BPCC_INTERNAL void bpcc_fuser_names(char *buf, size_t n);

/* The root module's attribute in which prepare leaves PyTorch's observed_node_names for convert
** (prepare.c record_observed, record_for_convert) */
#define BPCC_OBSERVED_NODE_NAMES "_observed_node_names"
/* ... and the graph inputs and outputs prepare took as quantized (PrepareCustomConfig's indexes),
** present only when some are */
#define BPCC_INPUT_QUANTIZED_IDXS "_input_quantized_idxs"
#define BPCC_OUTPUT_QUANTIZED_IDXS "_output_quantized_idxs"
/* prepare.c: the first of the n quantized-input positions `pos` that names no graph input of g,
** UINT32_MAX when each names one; *n_inputs the model's input count. PyTorch ignores such a
** position; prepare refuses it as given, convert as recorded. */
BPCC_INTERNAL uint32_t bpcc_quantized_input_past(const struct bpcc_graph *g, const uint32_t *pos, uint32_t n,
                                                 uint32_t *n_inputs);

#endif
