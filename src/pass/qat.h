/*
** qat.h — QAT modules (prepare_qat_fx's) and their to_float for convert (qat.c).
*/
#ifndef BPCC_QAT_H
#define BPCC_QAT_H

#include "../calib/observer.h"
#include "../ir/ir.h"

/* Is `type` a QAT module class (torch.ao.nn.qat.Linear, torch.nn.intrinsic.qat.ConvBnReLU2d ...)?
** Its float root type (torch.nn.Linear, torch.nn.Conv2d ...), which PyTorch's qconfig mapping
** saw before prepare_qat_fx swapped the module; NULL for other types. */
BPCC_INTERNAL bool bpcc_qat_is_type(const char *type);
BPCC_INTERNAL const char *bpcc_qat_float_root(const char *type);

/* Has g a QAT module or a fake quantize (live or not)? When not, the passes need not ask of each
** node (one look at each distinct module type). */
BPCC_INTERNAL bool bpcc_graph_has_qat(const struct bpcc_graph *g);

/* What a QAT module's weight fake quantize leaves convert: its observer's spec and statistics
** (`has`), and whether the observer is on, so that convert runs it once on the float weight. */
struct bpcc_qat_weight {
    bool has, observe;
    struct observer_spec spec;
    struct obs_state st;
};

/* to_float: the QAT module m (called by node `at`, for messages) replaced by its float module
** *out (m itself when it is no QAT module), with *w from its weight fake quantize (release with
** bpcc_qat_weight_release on every path). */
BPCC_INTERNAL enum bpcc_status bpcc_qat_to_float(struct bpcc_graph *g, struct bpcc_module *m, const struct bpcc_node *at,
                                                 struct bpcc_qat_weight *w, struct bpcc_module **out,
                                                 struct bpcc_diag *d);
BPCC_INTERNAL void bpcc_qat_weight_release(struct bpcc_qat_weight *w);

#endif
