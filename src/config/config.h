/*
** config.h — backend pattern configs (internal layout): the YAML document tree, the schema's
** entries, and the compiled registry. Public access goes through bpcc.h.
*/
#ifndef BPCC_CONFIG_H
#define BPCC_CONFIG_H

#include "../core/core.h"

/* {==================== YAML document tree (yaml_tree.c) ==================== */

enum ynode_kind { YNODE_SCALAR, YNODE_SEQ, YNODE_MAP };

struct ynode {
    enum ynode_kind kind;
    uint32_t line, col;   /* 1-based start of the node */
    bool plain;           /* scalar written without quotes (may be a number, bool or null) */
    const char *str;      /* scalar text (NUL-terminated) */
    uint32_t n;           /* items of a sequence; pairs of a mapping */
    struct ynode **items; /* mapping: items[2i] key, items[2i+1] value */
};

/* Limits against hostile input. */
#define YAML_MAX_DEPTH 64
#define YAML_MAX_EXPANDED (1u << 20) /* nodes after alias expansion */
#define YAML_MAX_MAP 4096

/* Parse one YAML document into a tree in arena `a`. Syntax errors, duplicate keys, undefined
** aliases and limits are reported with positions. An empty document gives *out == NULL. */
BPCC_INTERNAL enum bpcc_status bpcc_yaml_parse(const char *text, size_t len, const char *file,
                                               struct bpcc_arena *a, struct ynode **out,
                                               struct bpcc_diag *d);
/* Value of key in a mapping, NULL if absent. */
BPCC_INTERNAL struct ynode *bpcc_ynode_get(const struct ynode *map, const char *key);

/* }=========================================================================== */

/* {==================== the schema's model ==================== */

enum obs_type {
    OBS_DIFFERENT = 0, /* OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT */
    OBS_SHARE,         /* OUTPUT_SHARE_OBSERVER_WITH_INPUT */
    OBS_NOT_OBSERVED,  /* INPUT_OUTPUT_NOT_OBSERVED */
    OBS_COUNT
};
BPCC_INTERNAL const char *bpcc_obs_type_name(enum obs_type t);

/* A pattern in PyTorch's reversed nested ("complex") form: the anchor op, then one
** sub-pattern per positional argument. `op` is interned; "MatchAllNode" is the wildcard. */
struct pattern {
    const char *op;
    uint32_t n_args;
    struct pattern **args;
};

struct dtype_constraint {
    enum bpcc_dtype dtype;         /* NONE: unset */
    bool has_qmin, has_qmax, has_smin, has_smax, has_scale, has_zp;
    uint8_t int_mask;              /* which of qmin, qmax, smin, smax, scale were integers */
    double qmin, qmax;             /* quant_min_lower_bound, quant_max_upper_bound */
    double smin, smax;             /* scale_min_lower_bound, scale_max_upper_bound */
    double scale;                  /* scale_exact_match */
    int64_t zp;                    /* zero_point_exact_match */
};

struct dtype_config {
    struct dtype_constraint input, output, weight;
    enum bpcc_dtype bias;
    bool is_dynamic;
    uint32_t line, col;
};

struct fixed_qparams {
    bool set;
    bool scale_is_int;
    double scale;
    int64_t zero_point, quant_min, quant_max;
    enum bpcc_dtype dtype;
};

#define MAX_TYPE_INDEX 4

struct pattern_entry {
    struct pattern *pattern;       /* complex form */
    bool simple;                   /* written as `pattern:` (forward order or a single op) */
    enum obs_type obs;
    struct dtype_config *dtype_configs;
    uint32_t n_dtype_configs;
    const char *root_module, *qat_module, *reference_module, *fused_module;
    const char *fuser_method, *root_node_getter, *extra_inputs_getter;
    bool has_num_tensor_args[3];
    enum obs_type num_tensor_args[3];
    uint32_t n_type_index;
    const char *type_index_key[MAX_TYPE_INDEX];
    int64_t type_index_val[MAX_TYPE_INDEX];
    struct fixed_qparams fixed;
    int input_output_observed;     /* -1 unset, 0, 1 */
    const char *file;              /* interned source file */
    uint32_t line, col;
    uint32_t n_leaves;             /* for ordering */
};

struct index_entry;

struct bpcc_config {
    struct bpcc_arena arena;
    struct bpcc_intern intern;
    const char *name;
    struct pattern_entry **entries; /* registry order (PyTorch's dict order) */
    uint32_t n_entries, cap_entries;
    uint32_t *sorted;               /* entry indices in matching order (_sorted_patterns_dict) */
    struct index_entry *by_anchor;  /* anchor op -> sorted candidate list */
    uint32_t *wildcard;             /* entries anchored on MatchAllNode, sorted */
    uint32_t n_wildcard;
};

/* the pattern's text for messages: "[torch.nn.Conv2d, torch.nn.ReLU]" or the nested form */
BPCC_INTERNAL void bpcc_pattern_text(const struct pattern_entry *e, struct bpcc_buf *b);
BPCC_INTERNAL bool bpcc_pattern_equal(const struct pattern *a, const struct pattern *b);

/* vocab.c: the canonical name of an op (aliases and abbreviations resolved), its kind
** ('m' module, 'f' function, 't' Tensor method; 0 unknown). */
BPCC_INTERNAL const char *bpcc_vocab_canonical(const char *name, char *kind_out);
/* Could name an op: a dotted Python name (torch.nn.Conv2d, add, operator.getitem). */
BPCC_INTERNAL bool bpcc_vocab_is_name(const char *name);
/* Closest known op name for a suggestion (NULL when none is close). */
BPCC_INTERNAL const char *bpcc_vocab_suggest(const char *name);

/* Levenshtein distance, capped at `cap` (returns cap+1 when further). */
BPCC_INTERNAL unsigned bpcc_edit_distance(const char *a, const char *b, unsigned cap);

/* builtin_patterns.c (generated): the built-in YAML texts */
struct builtin_config {
    const char *name;
    const char *file;      /* "fbgemm.yaml" */
    const char *text;
    size_t len;
};
BPCC_INTERNAL const struct builtin_config *bpcc_builtin_configs(uint32_t *n);

/* builtin_images.c (generated) or builtin_images_none.c: compiled images of the built-ins */
struct builtin_image {
    const char *name;
    const unsigned char *data;
    size_t len;
};
BPCC_INTERNAL const struct builtin_image *bpcc_builtin_images(uint32_t *n);
/* config_image.c */
BPCC_INTERNAL enum bpcc_status bpcc_config_image(const struct bpcc_config *c, char **out,
                                                 size_t *len_out, struct bpcc_diag *d);
/* Add an image's entries to c (overriding as `extends` does); the name is returned in
** *name_out. */
BPCC_INTERNAL enum bpcc_status bpcc_config_from_image(struct bpcc_config *c, const void *data,
                                                      size_t len, const char **name_out,
                                                      struct bpcc_diag *d);

/* registry.c */
BPCC_INTERNAL const uint32_t *bpcc_registry_candidates(const struct bpcc_config *c, const char *op,
                                                       uint32_t *n_out);
BPCC_INTERNAL enum bpcc_status bpcc_registry_add(struct bpcc_config *c, struct pattern_entry *e,
                                                 bool override, struct bpcc_diag *d);
BPCC_INTERNAL enum bpcc_status bpcc_registry_finish(struct bpcc_config *c, struct bpcc_diag *d);

/* }=========================================================================== */

#endif
