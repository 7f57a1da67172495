/*
** bench_config_load.c — time to load (parse, validate, compile) every built-in backend config.
** Prints one line per backend and one for all seven: median, min and max over the runs, in
** microseconds. usage: bench_config_load [RUNS]
*/
#include "bpcc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, double *t, int n, unsigned patterns)
{
    qsort(t, (size_t)n, sizeof *t, cmp);
    printf("%-12s %5u patterns  median %8.1f us  min %8.1f us  max %8.1f us\n", name, patterns,
           t[n / 2], t[0], t[n - 1]);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 50;
    if (runs < 1) runs = 1;
    uint32_t n;
    const char *const *names = bpcc_config_builtin_names(&n);
    double *all = calloc((size_t)runs, sizeof *all);
    double *one = calloc((size_t)runs, sizeof *one);
    unsigned total = 0;
    for (uint32_t k = 0; k < n; k++) {
        unsigned patterns = 0;
        for (int r = 0; r < runs; r++) {
            struct bpcc_diag d;
            bpcc_diag_init(&d);
            struct bpcc_config *c;
            double t0 = now_us();
            if (bpcc_config_load(names[k], NULL, &c, &d) != BPCC_OK) {
                fprintf(stderr, "bench: %s failed to load: %s\n", names[k], d.entries[0].msg);
                return 1;
            }
            one[r] = now_us() - t0;
            all[r] += one[r];
            patterns = bpcc_config_n_patterns(c);
            bpcc_config_free(c);
        }
        total += patterns;
        report(names[k], one, runs, patterns);
    }
    report("all seven", all, runs, total);
    free(all);
    free(one);
    return 0;
}
