/*
** bench_calibrate.c — time of bpcc_calibrate alone (the model loaded before, not saved after):
**   bench_calibrate PREPARED_MODEL BATCH... [--threads N]
** Prints the seconds and batches per second of the calibration run. One batch is run first and
** not counted, as calibrate_bench.py does for PyTorch: both sides are timed warm (the first batch
** faults in every activation buffer, which on a VM costs as much as the batch itself).
*/
#include "bpcc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <malloc.h>
#endif

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_calibrate PREPARED_MODEL BATCH... [--threads N]\n");
        return 2;
    }
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, 1 << 30); /* as the bpcc CLI does */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    int threads = 1, n = 0;
    const char **files = calloc((size_t)argc, sizeof *files);
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else files[n++] = argv[i];
    }
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    char buf[2048];
    if (bpcc_graph_load(argv[1], &g, &d)) {
        bpcc_diag_format(&d.entries[0], buf, sizeof buf);
        fputs(buf, stderr);
        return 1;
    }
    struct bpcc_calibrate_options o = {.threads = threads};
    struct timespec t0, t1;
    enum bpcc_status s = bpcc_calibrate(g, files, 1, &o, &d); /* the warm-up */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!s) s = bpcc_calibrate(g, files, (uint32_t)n, &o, &d);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (s) {
        bpcc_diag_format(&d.entries[0], buf, sizeof buf);
        fputs(buf, stderr);
        return 1;
    }
    double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%.6f s  %.2f batches/s\n", sec, n / sec);
    bpcc_graph_free(g);
    free(files);
    return 0;
}
