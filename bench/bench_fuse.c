/*
** bench_fuse.c — time of the fusion pass (match + fuse, the backend config already loaded):
**   bench_fuse MODEL [RUNS]      on a model file (reloaded before each run, not timed)
**   bench_fuse --synthetic N     on a generated chain of N/3 conv -> bn -> relu blocks
** With `-q QCONFIG` (anywhere) it also times the qconfig assignment of the fused graph
** (bpcc_qconfig_assign, PyTorch's update_qconfig_for_fusion + generate_qconfig_map) and the
** prepare pass after it (bpcc_prepare: assignment, matching, observer insertion; PyTorch's
** prepare() on the fused GraphModule).
** Prints median, min and max in milliseconds, and for synthetic graphs the time per node and
** the peak resident memory.
*/
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>


/* conv(1x1, C channels) -> bn -> relu, repeated; tensors are real (C = 4). */
static struct bpcc_graph *synthetic(uint32_t n_nodes, struct bpcc_diag *d)
{
    struct bpcc_graph *g;
    if (bpcc_graph_new(&g, d)) die(d);
    struct bpcc_value none = {.kind = BPCC_VAL_TUPLE};
    struct bpcc_node *prev;
    if (bpcc_graph_create_node(g, BPCC_NODE_PLACEHOLDER, "x", "x", &none, NULL, &prev, d)) die(d);
    const int64_t C = 4, wdims[4] = {4, 4, 1, 1}, cdims[1] = {4};
    struct bpcc_value f = bpcc_value_bool(false), eps = bpcc_value_float(1e-5), c4 = bpcc_value_int(C);
    for (uint32_t b = 0; 3 * b + 2 < n_nodes; b++) {
        char name[64];
        const char *types[3] = {"torch.nn.Conv2d", "torch.nn.BatchNorm2d", "torch.nn.ReLU"};
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "b%u.%c", b, "cbr"[k]);
            struct bpcc_module *m;
            if (bpcc_graph_add_module(g, name, types[k], &m, d) || bpcc_module_set_attr(m, "training", &f, d)) die(d);
            if (k == 0) {
                struct bpcc_tensor *w;
                if (bpcc_module_set_attr(m, "out_channels", &c4, d) ||
                    bpcc_tensor_new(g, BPCC_DTYPE_F32, 4, wdims, &w, d) ||
                    bpcc_module_set_tensor(m, "weight", BPCC_TENSOR_PARAM, w, d)) die(d);
            } else if (k == 1) {
                if (bpcc_module_set_attr(m, "eps", &eps, d) || bpcc_module_set_attr(m, "num_features", &c4, d)) die(d);
                const char *ts[] = {"weight", "bias", "running_mean", "running_var"};
                for (int t = 0; t < 4; t++) {
                    struct bpcc_tensor *x;
                    if (bpcc_tensor_new(g, BPCC_DTYPE_F32, 1, cdims, &x, d) ||
                        bpcc_module_set_tensor(m, ts[t], t < 2 ? BPCC_TENSOR_PARAM : BPCC_TENSOR_BUFFER, x, d)) die(d);
                    if (t == 3) for (int i = 0; i < C; i++) ((float *)bpcc_tensor_data(x))[i] = 1.0f;
                }
            }
            struct bpcc_value args;
            if (bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 1, &args) != BPCC_OK) die(d);
            args.u.seq.items[0] = bpcc_value_node(prev);
            if (bpcc_graph_create_node(g, BPCC_NODE_CALL_MODULE, NULL, name, &args, NULL, &prev, d)) die(d);
        }
    }
    struct bpcc_value out;
    if (bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 1, &out) != BPCC_OK) die(d);
    out.u.seq.items[0] = bpcc_value_node(prev);
    if (bpcc_graph_create_node(g, BPCC_NODE_OUTPUT, "output", "output", &out, NULL, NULL, d)) die(d);
    return g;
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void print_stats(const char *what, const char *name, uint32_t before, uint32_t after, double *t, int runs)
{
    qsort(t, (size_t)runs, sizeof *t, cmp);
    printf("bpcc %-14s %-28s %4u -> %4u nodes  median %7.3f ms  min %7.3f ms  max %7.3f ms\n", what,
           name, before, after, t[runs / 2], t[0], t[runs - 1]);
}

int main(int argc, char **argv)
{
    struct bpcc_qconfig_mapping *qm = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-q")) {
            struct bpcc_diag dq;
            bpcc_diag_init(&dq);
            if (bpcc_qconfig_load(argv[i + 1], NULL, &qm, &dq)) die(&dq);
            for (int k = i; k + 2 <= argc; k++) argv[k] = argv[k + 2];
            argc -= 2;
            break;
        }
    if (argc < 2) {
        fprintf(stderr, "usage: bench_fuse MODEL [RUNS] | --synthetic N [BACKEND]  [-q QCONFIG]\n");
        return 2;
    }
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c;
    const char *backend = "native";
    if (!strcmp(argv[1], "--synthetic") && argc > 3) backend = argv[3];
    if (bpcc_config_load(backend, NULL, &c, &d)) die(&d);
    if (!strcmp(argv[1], "--synthetic")) {
        uint32_t n = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 1000;
        long rss0 = peak_rss_kib();
        double t0 = now_ms();
        struct bpcc_graph *g = synthetic(n, &d);
        double t1 = now_ms();
        uint32_t nodes = bpcc_graph_n_nodes(g);
        if (bpcc_fuse(g, c, NULL, NULL, &d)) die(&d);
        double t2 = now_ms();
        long rss = peak_rss_kib();
        printf("synthetic %8u nodes: build %8.1f ms  fuse %8.1f ms  (%.0f ns/node)  peak RSS %ld MiB "
               "(%.0f bytes/node)  -> %u nodes\n", nodes, t1 - t0, t2 - t1, (t2 - t1) * 1e6 / nodes,
               rss / 1024, (double)(rss - rss0) * 1024 / nodes, bpcc_graph_n_nodes(g));
        if (qm) {
            struct bpcc_qconfig_assignment *a;
            double t3 = now_ms();
            if (bpcc_qconfig_assign(g, qm, &a, &d)) die(&d);
            double t4 = now_ms();
            uint32_t fused = bpcc_graph_n_nodes(g);
            printf("synthetic %8u nodes: qconfig assign %8.1f ms  (%.0f ns/node)  peak RSS %ld MiB\n", fused,
                   t4 - t3, (t4 - t3) * 1e6 / fused, peak_rss_kib() / 1024);
            bpcc_qconfig_assignment_free(a);
            struct bpcc_prepare_report *pr;
            t3 = now_ms();
            if (bpcc_prepare(g, c, qm, NULL, &pr, &d)) die(&d);
            t4 = now_ms();
            printf("synthetic %8u nodes: prepare %8.1f ms  (%.0f ns/node)  peak RSS %ld MiB  -> %u nodes\n", fused,
                   t4 - t3, (t4 - t3) * 1e6 / fused, peak_rss_kib() / 1024, bpcc_graph_n_nodes(g));
            bpcc_prepare_report_free(pr);
            bpcc_qconfig_free(qm);
        }
        bpcc_graph_free(g);
        bpcc_config_free(c);
        return 0;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 20;
    if (runs < 1) runs = 1;
    double *t = calloc((size_t)runs, sizeof *t), *ta = calloc((size_t)runs, sizeof *ta);
    double *tp = calloc((size_t)runs, sizeof *tp);
    uint32_t before = 0, after = 0;
    for (int r = 0; r < runs; r++) {
        struct bpcc_graph *g;
        if (bpcc_graph_load(argv[1], &g, &d)) die(&d);
        before = bpcc_graph_n_nodes(g);
        double t0 = now_ms();
        if (bpcc_fuse(g, c, NULL, NULL, &d)) die(&d);
        t[r] = now_ms() - t0;
        after = bpcc_graph_n_nodes(g);
        if (qm) {
            struct bpcc_qconfig_assignment *a;
            t0 = now_ms();
            if (bpcc_qconfig_assign(g, qm, &a, &d)) die(&d);
            ta[r] = now_ms() - t0;
            bpcc_qconfig_assignment_free(a);
            t0 = now_ms();
            if (bpcc_prepare(g, c, qm, NULL, NULL, &d)) die(&d);
            tp[r] = now_ms() - t0;
        }
        bpcc_graph_free(g);
    }
    print_stats("fuse", argv[1], before, after, t, runs);
    if (qm) print_stats("qconfig assign", argv[1], after, after, ta, runs);
    if (qm) print_stats("prepare", argv[1], after, after, tp, runs);
    free(t);
    free(tp);
    free(ta);
    bpcc_qconfig_free(qm);
    bpcc_config_free(c);
    return 0;
}
