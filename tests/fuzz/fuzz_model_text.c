/* libFuzzer target: the IR text parser. Whatever parses must print, parse again and print the
** same bytes (the canonical form is a fixed point). */
#include "bpcc.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    if (bpcc_graph_parse((const char *)data, size, "fuzz.bpcc", &g, &d) != BPCC_OK) return 0;
    char *a, *b;
    if (bpcc_graph_print(g, "w.safetensors", &a, NULL, &d) == BPCC_OK) {
        struct bpcc_graph *g2;
        if (bpcc_graph_parse(a, strlen(a), "again.bpcc", &g2, &d) != BPCC_OK) abort();
        if (bpcc_graph_print(g2, "w.safetensors", &b, NULL, &d) != BPCC_OK) abort();
        if (strcmp(a, b) != 0) abort();
        bpcc_free(b);
        bpcc_graph_free(g2);
        bpcc_free(a);
    }
    char *j;
    if (bpcc_graph_to_json(g, 0, &j, &d) == BPCC_OK) bpcc_free(j);
    bpcc_graph_verify(g, &d);
    bpcc_graph_free(g);
    return 0;
}
