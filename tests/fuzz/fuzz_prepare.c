/* libFuzzer target: fusion and prepare on any graph that parses. The built-in fbgemm and qnnpack
** backends with a MinMax mapping (fixed-qparams entries included) and the built-in fbgemm mapping;
** the result must verify, and the plan and explain must be producible. Bad graphs may be refused,
** never crash; a pass that refuses one leaves it as it was (its undo log played back: the same
** text, and it still verifies). */
#include "bpcc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char mapping[] =
    "global: {activation: {observer: MinMaxObserver}, weight: {observer: PerChannelMinMaxObserver, dtype: qint8, "
    "qscheme: per_channel_symmetric}}\n"
    "object_type:\n"
    "  - {type: torch.sigmoid, qconfig: {activation: {observer: FixedQParamsObserver, scale: 0.00390625, zero_point: 0}, "
    "weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}}\n"
    "  - {type: torch.tanh, qconfig: null}\n"
    "module_name:\n  - {name: fc, qconfig: {activation: {observer: PlaceholderObserver, dtype: quint8, compute_dtype: quint8}, "
    "weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}}\n";

/* the graph's text (bpcc_free), NULL when it cannot be printed */
static char *text(struct bpcc_graph *g)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    char *t;
    return bpcc_graph_print(g, "w.safetensors", &t, NULL, &d) == BPCC_OK ? t : NULL;
}

static bool valid(struct bpcc_graph *g)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    return bpcc_graph_verify(g, &d) == BPCC_OK;
}

/* after a failed pass: g as it was (its text `before`, and valid if it was) */
static void check_untouched(struct bpcc_graph *g, char *before, bool was_valid)
{
    char *after = text(g);
    if ((before == NULL) != (after == NULL) || (before && strcmp(before, after)) || valid(g) != was_valid) abort();
    bpcc_free(after);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static struct bpcc_config *backends[3];
    static struct bpcc_qconfig_mapping *maps[2];
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    if (!backends[0]) {
        if (bpcc_config_load("fbgemm", NULL, &backends[0], &d) || bpcc_config_load("qnnpack", NULL, &backends[1], &d) ||
            bpcc_config_load("onednn", NULL, &backends[2], &d) ||
            bpcc_qconfig_load_text(mapping, strlen(mapping), "fuzz.yaml", NULL, &maps[0], &d) ||
            bpcc_qconfig_load("fbgemm", NULL, &maps[1], &d))
            abort();
    }
    unsigned pick = size ? data[size - 1] & 3u : 0;
    struct bpcc_graph *g;
    if (bpcc_graph_parse((const char *)data, size, "fuzz.bpcc", &g, &d) != BPCC_OK) return 0;
    /* onednn's conv+add fusions (extra inputs) when bit 2 of the last byte is set */
    struct bpcc_config *c = backends[size && (data[size - 1] & 4u) ? 2 : pick & 1];
    char *before = text(g);
    bool was_valid = valid(g);
    if (bpcc_fuse(g, c, NULL, NULL, &d) != BPCC_OK) {
        check_untouched(g, before, was_valid);
    } else {
        bpcc_free(before);
        before = text(g);
        uint32_t in0 = 0;
        struct bpcc_prepare_options o = {.strict = pick == 3, .input_quantized = &in0, .n_input_quantized = pick >> 1,
                                         .output_quantized = pick == 2};
        struct bpcc_prepare_report *r;
        if (bpcc_prepare(g, c, maps[pick >> 1], &o, &r, &d) != BPCC_OK) {
            check_untouched(g, before, true); /* fusion's result verifies */
        } else {
            struct bpcc_diag dv;
            bpcc_diag_init(&dv);
            if (bpcc_graph_verify(g, &dv) != BPCC_OK) abort();
            char *t;
            if (bpcc_prepare_plan_json(r, 0, &t, &d) == BPCC_OK) bpcc_free(t);
            if (bpcc_prepare_explain(r, false, &t, &d) == BPCC_OK) bpcc_free(t);
            if (bpcc_prepare_explain(r, true, &t, &d) == BPCC_OK) bpcc_free(t);
            if (bpcc_graph_print(g, "w.safetensors", &t, NULL, &d) == BPCC_OK) bpcc_free(t);
            bpcc_prepare_report_free(r);
        }
    }
    bpcc_free(before);
    bpcc_graph_free(g);
    return 0;
}
