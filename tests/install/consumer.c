/* A program built only against the installed bpcc (pkg-config --cflags --libs bpcc). */
#include <bpcc.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    struct bpcc_diag diag;
    struct bpcc_graph *g = NULL;
    bpcc_diag_init(&diag);
    if (bpcc_graph_load(argv[1], &g, &diag) != BPCC_OK) {
        char buf[2048];
        for (uint32_t i = 0; i < diag.n_entries; i++) {
            bpcc_diag_format(&diag.entries[i], buf, sizeof buf);
            fputs(buf, stderr);
        }
        return 1;
    }
    printf("bpcc %s: %u nodes, %u modules\n", bpcc_version(), bpcc_graph_n_nodes(g),
           bpcc_graph_n_modules(g));
    bpcc_graph_free(g);
    return 0;
}
