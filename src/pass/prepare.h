/*
** prepare.h — the prepare pass's report (internal layout): what was matched, which qconfig applied,
** whether each node is quantized and why not, and every observer inserted. Written by prepare.c,
** read by prepare_report.c (`bpcc explain`, the plan).
*/
#ifndef BPCC_PREPARE_H
#define BPCC_PREPARE_H

#include "dtype_check.h"
#include "pass.h"

/* Why a node is (not) observed. */
enum prep_status {
    PS_NOT_APPLICABLE = 0, /* placeholder, get_attr, output: not a quantization decision */
    PS_QUANTIZED,          /* observed as its pattern and qconfig say */
    PS_NO_QCONFIG,         /* the mapping keeps it float */
    PS_NO_PATTERN,         /* no backend pattern matches it */
    PS_REJECTED,           /* the backend's dtype configs reject the qconfig */
    PS_NOT_OBSERVED,       /* the pattern is INPUT_OUTPUT_NOT_OBSERVED */
    PS_NO_TENSORS,         /* its arguments hold no tensors (sizes, shapes) */
    PS_GETITEM,            /* operator.getitem stays float in 1.13 */
    PS_FLOAT_TARGET,       /* quantized by its qconfig but to float (dynamic output, fp32 activations) */
    PS_STUB                /* a Paddle-style stub, replaced by its observer (or removed) */
};

struct prep_match {
    const struct pattern_entry *entry;
    struct bpcc_node *anchor, *root; /* last node of the pattern, and its input node */
    uint32_t n_nodes;
    struct bpcc_node **nodes;        /* the pattern's graph nodes, preorder (wildcards included) */
    enum obs_type obs;               /* after num_tensor_args_to_observation_type */
    bool supported;                  /* a dtype config accepts the qconfig of the anchor's check */
    bool observed;                   /* some node of it went on to be observed: PyTorch's observed_node_names */
    const char *why;                 /* when not supported: the reason per dtype config */
};

struct prep_node {
    struct bpcc_node *node;
    int32_t match;                   /* index in matches, -1 */
    const struct bpcc_node_qconfig *qc;
    enum prep_status status;
    const char *why;                 /* extra words for the status, may be NULL */
    uint8_t in, out, weight, bias;   /* target dtypes (enum tdt) */
    bool in_dynamic;
    bool has_weight;                 /* a weighted module, or a function given a weight argument */
    const struct bpcc_node *dtype_from; /* its dtype was propagated from this node's non-tensor argument */
};

struct prep_observer {
    struct bpcc_node *node;          /* the observer's call_module node */
    struct bpcc_node *observed;      /* its argument */
    const struct bpcc_node *for_node;/* the node it was inserted for */
    const char *module;              /* the module created for it (interned in the graph) */
    struct observer_spec spec;
    const char *why;                 /* "input of conv1", "output of relu", ... */
};

struct bpcc_prepare_report {
    struct bpcc_arena arena;
    const struct bpcc_graph *graph;
    const struct bpcc_config *config;
    struct bpcc_qconfig_mapping const *mapping;
    struct bpcc_qconfig_assignment *assignment;
    struct prep_match *matches;
    uint32_t n_matches;
    struct prep_node *nodes;         /* the graph's nodes before observers, in order */
    uint32_t n_nodes;
    struct prep_observer *observers;
    uint32_t n_observers, cap_observers;
};

/* Pseudo-dtypes of target dtype infos beyond enum bpcc_dtype: Python int/float, None (no tensor),
** and an absent key. */
enum tdt { TD_PY_INT = 100, TD_PY_FLOAT, TD_NOTENSOR, TD_ABSENT };
BPCC_INTERNAL const char *bpcc_tdt_name(uint8_t t);
BPCC_INTERNAL const char *bpcc_prep_status_name(enum prep_status s);

#endif
