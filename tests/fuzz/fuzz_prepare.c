/* libFuzzer target: fusion and prepare on any graph that parses. The built-in fbgemm and qnnpack
** backends with a MinMax mapping (fixed-qparams entries included) and the built-in fbgemm mapping;
** the result must verify, and the plan and explain must be producible. Bad graphs may be refused,
** never crash. */
#include "bpcc.h"

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

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static struct bpcc_config *backends[2];
    static struct bpcc_qconfig_mapping *maps[2];
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    if (!backends[0]) {
        if (bpcc_config_load("fbgemm", NULL, &backends[0], &d) || bpcc_config_load("qnnpack", NULL, &backends[1], &d) ||
            bpcc_qconfig_load_text(mapping, strlen(mapping), "fuzz.yaml", NULL, &maps[0], &d) ||
            bpcc_qconfig_load("fbgemm", NULL, &maps[1], &d))
            abort();
    }
    unsigned pick = size ? data[size - 1] & 3u : 0;
    struct bpcc_graph *g;
    if (bpcc_graph_parse((const char *)data, size, "fuzz.bpcc", &g, &d) != BPCC_OK) return 0;
    struct bpcc_config *c = backends[pick & 1];
    if (bpcc_fuse(g, c, NULL, NULL, &d) == BPCC_OK) {
        uint32_t in0 = 0;
        struct bpcc_prepare_options o = {.strict = pick == 3, .input_quantized = &in0, .n_input_quantized = pick >> 1,
                                         .output_quantized = pick == 2};
        struct bpcc_prepare_report *r;
        if (bpcc_prepare(g, c, maps[pick >> 1], &o, &r, &d) == BPCC_OK) {
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
    bpcc_graph_free(g);
    return 0;
}
