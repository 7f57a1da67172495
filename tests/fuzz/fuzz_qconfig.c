/* libFuzzer target: the qconfig-mapping YAML loader and the per-node assignment. A loaded mapping
** must dump to JSON, and assigning it to a small traced graph (modules, scoped functions, a
** method, a get_attr, a fused module) must succeed or fail with a diagnostic, never crash. */
#include "bpcc.h"

#include <stdlib.h>
#include <string.h>

static const char model[] =
    "bpcc-model 1\n"
    "module conv1 : torch.nn.Conv2d\n"
    "module blocks.0.conv : torch.nn.Conv2d\n"
    "module blocks.0.relu : torch.nn.ReLU\n"
    "module fused : torch.ao.nn.intrinsic.ConvReLU2d\n"
    "module fused.0 : torch.nn.Conv2d\n"
    "module fused.1 : torch.nn.ReLU\n"
    "graph\n"
    "  %x = placeholder x ()\n"
    "  %conv1 = call_module conv1 (%x,)\n"
    "  %b0 = call_module blocks.0.conv (%conv1,)\n"
    "  %add = call_function operator.add (%b0, %conv1) @ blocks.0 : my.Block\n"
    "  %add_1 = call_function torch.add (%add, %b0) @ blocks.0 : my.Block\n"
    "  %relu = call_module blocks.0.relu (%add_1,)\n"
    "  %mean = call_method mean (%relu,) @ blocks.0 : my.Block\n"
    "  %w = get_attr blocks.0.conv.weight ()\n"
    "  %f = call_module fused (%mean,)\n"
    "  %output = output output (%f,)\n";

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static struct bpcc_graph *g;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    if (!g && bpcc_graph_parse(model, sizeof model - 1, "m.bpcc", &g, &d) != BPCC_OK) abort();
    struct bpcc_qconfig_mapping *m;
    if (bpcc_qconfig_load_text((const char *)data, size, NULL, NULL, &m, &d) != BPCC_OK) return 0;
    char *j;
    if (bpcc_qconfig_dump_json(m, 0, &j, &d) != BPCC_OK) abort();
    bpcc_free(j);
    struct bpcc_qconfig_assignment *a;
    enum bpcc_status s = bpcc_qconfig_assign(g, m, &a, &d);
    if (s == BPCC_OK) {
        if (bpcc_qconfig_assignment_count(a) != 10) abort();
        if (bpcc_qconfig_assignment_json(a, 2, &j, &d) != BPCC_OK) abort();
        bpcc_free(j);
        bpcc_qconfig_assignment_free(a);
    } else if (d.n_entries == 0) {
        abort(); /* a failure always says why */
    }
    bpcc_qconfig_free(m);
    return 0;
}
