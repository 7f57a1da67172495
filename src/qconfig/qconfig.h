/*
** qconfig.h — qconfig mappings (PyTorch's QConfigMapping) and observer specs, internal layout.
*/
#ifndef BPCC_QCONFIG_H
#define BPCC_QCONFIG_H

#include "../config/config.h"

#include <regex.h>

/* Append-only; names as PyTorch's classes. */
enum obs_class {
    OC_MINMAX = 0,
    OC_MOVING_AVERAGE_MINMAX,
    OC_PER_CHANNEL_MINMAX,
    OC_MOVING_AVERAGE_PER_CHANNEL_MINMAX,
    OC_HISTOGRAM,
    OC_PLACEHOLDER,
    OC_FIXED_QPARAMS,
    OC_NOOP,
    OC_REUSE_INPUT,
    OC_COUNT
};

enum qscheme {
    QS_PER_TENSOR_AFFINE = 0,
    QS_PER_TENSOR_SYMMETRIC,
    QS_PER_CHANNEL_AFFINE,
    QS_PER_CHANNEL_SYMMETRIC,
    QS_PER_CHANNEL_AFFINE_FLOAT_QPARAMS,
    QS_COUNT
};

/* The fake quantize an observer is wrapped in (a QAT qconfig's), or none. Append-only. */
enum fq_kind { FQ_NONE = 0, FQ_FAKE_QUANTIZE, FQ_FUSED_MOVING_AVG, FQ_FIXED_QPARAMS, FQ_COUNT };

BPCC_INTERNAL const char *bpcc_obs_class_name(enum obs_class c);
BPCC_INTERNAL const char *bpcc_fq_name(enum fq_kind k); /* "FakeQuantize" ...; NULL for FQ_NONE */
BPCC_INTERNAL const char *bpcc_qscheme_name(enum qscheme q);

/* An observer as constructed: every field holds the effective value, defaults applied and the
** quantization range computed as PyTorch's calculate_qmin_qmax does. */
struct observer_spec {
    enum obs_class cls;
    enum bpcc_dtype dtype;
    enum qscheme qscheme;
    bool reduce_range;
    bool has_customized_qrange;  /* quant_min and quant_max were both given */
    int64_t quant_min, quant_max;
    float eps;
    double averaging_constant;
    int64_t ch_axis;
    int64_t bins, upsample_rate;
    double scale;                /* FixedQParamsObserver */
    int64_t zero_point;
    enum bpcc_dtype compute_dtype; /* PlaceholderObserver (1.13): set = dynamic quantization */
    enum fq_kind fake_quantize;  /* the observer inside a fake quantize (QAT qconfigs); its qparams are the observer's */
    const char *custom_op_name;
    uint32_t line, col;
};

struct qconfig {
    struct observer_spec activation, weight;
    uint32_t line, col;
};

enum qc_rule_kind { QR_OBJECT_TYPE = 0, QR_MODULE_NAME_REGEX, QR_MODULE_NAME, QR_MODULE_NAME_OBJECT_TYPE_ORDER, QR_COUNT };

/* One rule; qc NULL = keep float (`qconfig: null`). */
struct qc_rule {
    const char *key;   /* op type (canonical), regex, or module name */
    const char *type;  /* module_name_object_type_order: the op type */
    int64_t index;     /* module_name_object_type_order: the invocation index */
    const struct qconfig *qc;
    regex_t *re;       /* module_name_regex: compiled once at load, anchored; owned by the mapping */
    uint32_t line, col;
};

struct bpcc_qconfig_mapping {
    struct bpcc_arena arena;
    struct bpcc_intern intern;
    const char *name;
    const char *file;  /* interned: where it was loaded from */
    bool has_global;
    const struct qconfig *global;
    struct qc_rule *rules[QR_COUNT];
    uint32_t n_rules[QR_COUNT];
};

struct builtin_qconfig {
    const char *name, *file, *text;
    size_t len;
};
BPCC_INTERNAL const struct builtin_qconfig *bpcc_builtin_qconfigs(uint32_t *n);
/* The first activation spec of m wrapped in a fake quantize (a QAT mapping's), NULL if none */
BPCC_INTERNAL const struct observer_spec *bpcc_qconfig_mapping_fake_quantize(const struct bpcc_qconfig_mapping *m);
BPCC_INTERNAL const char *bpcc_qc_rule_kind_name(enum qc_rule_kind k);

/* One node's qconfig (NULL: stays float) and the rule that chose it (NULL for global/default). */
struct bpcc_node_qconfig {
    const struct bpcc_node *node;
    const struct qconfig *qconfig;
    enum bpcc_qc_origin origin;
    const struct qc_rule *rule;
};
BPCC_INTERNAL const struct bpcc_node_qconfig *bpcc_qconfig_assignment_at(const struct bpcc_qconfig_assignment *a,
                                                                        uint32_t i);
/* The JSON of a qconfig (null for NULL = keep float), as `bpcc qconfig dump` writes it. */
struct json_t;
BPCC_INTERNAL struct json_t *bpcc_qconfig_json(const struct qconfig *qc);
/* One observer spec as JSON: {"observer": class, "dtype": ..., the class's fields}. */
BPCC_INTERNAL struct json_t *bpcc_observer_json(const struct observer_spec *o);
/* An observer spec given as a model attribute (a DICT with the YAML spec's keys: observer, dtype,
** qscheme, quant_min ...; or just the class name), checked as the YAML loader checks one; errors
** are reported at file:line:col (the module that carries it). */
BPCC_INTERNAL enum bpcc_status bpcc_observer_spec_from_value(const struct bpcc_value *v, const char *file, uint32_t line,
                                                             uint32_t col, struct bpcc_intern *intern,
                                                             struct observer_spec *out, struct bpcc_diag *d);
/* The rule that chose a node's qconfig: {kind, type|regex|name, file, line}. */
BPCC_INTERNAL struct json_t *bpcc_qconfig_rule_json(const struct bpcc_qconfig_assignment *a,
                                                    const struct bpcc_node_qconfig *nq);
/* Same effective observers (PyTorch's qconfig_equals compares constructor arguments; bpcc
** compares what they construct). */
BPCC_INTERNAL bool bpcc_qconfig_equal(const struct qconfig *a, const struct qconfig *b);

#endif
