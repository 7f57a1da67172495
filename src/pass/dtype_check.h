/*
** dtype_check.h — PyTorch 1.13's backend support checks of a qconfig against dtype configs.
*/
#ifndef BPCC_DTYPE_CHECK_H
#define BPCC_DTYPE_CHECK_H

#include "../qconfig/qconfig.h"

/* What prepare expects at a node (get_target_activation_dtype_for_node, the observed case). */
struct target_dtypes {
    enum bpcc_dtype input, output, weight, bias;
    bool input_dynamic;
};

/* The targets a qconfig gives an observed node; NULL (float) gives float activations. */
BPCC_INTERNAL void bpcc_target_dtypes_from_qconfig(const struct qconfig *qc, struct target_dtypes *t);

/* _qconfig_satisfies_dtype_config_constraints for one observer: true when the constraint has no
** dtype or another dtype than the observer's, or the observer's quant range lies within the bounds
** (checked only when both are given) and its eps is at least scale_min_lower_bound, and, where the
** constraint fixes scale and zero point (2.x's exact-match constraints), it is a
** FixedQParamsObserver with exactly those. Otherwise
** false with the reason in why ("qconfig activation HistogramObserver quant_max 255 exceeds ...").
** `what` is "activation" or "weight". */
BPCC_INTERNAL bool bpcc_observer_satisfies(const struct observer_spec *o, const struct dtype_constraint *c,
                                           const char *what, char *why, size_t n);

/* The kinds of node arguments at a pattern's root (node_arg_is_weight / _is_bias). */
enum { BPCC_ARG_ACTIVATION = 1, BPCC_ARG_WEIGHT = 2, BPCC_ARG_BIAS = 4 };

/* One dtype config against a node's targets and qconfig, as PyTorch 1.13 checks a match: each
** kind of argument present (arg_kinds) and the output must have the config's dtype (unset = any)
** and satisfy its constraints; activations must also agree on dynamic quantization. */
BPCC_INTERNAL bool bpcc_dtype_config_accepts(const struct qconfig *qc, const struct target_dtypes *t,
                                             const struct dtype_config *dc, unsigned arg_kinds, char *why, size_t n);

#endif
