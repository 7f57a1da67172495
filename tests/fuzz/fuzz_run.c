/* libFuzzer target: the reference interpreter on any graph that parses (tensors unbound, so
** weights are missing: kernels must refuse them), with inputs made from the placeholders' traced
** shapes; and the same graph prepared for fbgemm and run through its observers. Nothing may crash. */
#include "fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run(struct bpcc_graph *g)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    fuzz_run_twice(g, NULL, &d);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static struct bpcc_config *c;
    static struct bpcc_qconfig_mapping *q;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    bpcc_exec_max_elements = (uint64_t)1 << 22;
    if (!c && (bpcc_config_load("fbgemm", NULL, &c, &d) || bpcc_qconfig_load("fbgemm", NULL, &q, &d))) abort();
    struct bpcc_graph *g;
    if (bpcc_graph_parse((const char *)data, size, "fuzz.bpcc", &g, &d) != BPCC_OK) return 0;
    fuzz_bind_tensors(g);
    run(g);
    if (bpcc_fuse(g, c, NULL, NULL, &d) == BPCC_OK && bpcc_prepare(g, c, q, NULL, NULL, &d) == BPCC_OK) run(g);
    bpcc_graph_free(g);
    return 0;
}
