/*
** bench_util.h — what the C benchmarks share: a millisecond clock, a comparison for qsort of
** doubles (medians), and failing with the library's diagnostics.
*/
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include "bpcc.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline void die(const struct bpcc_diag *d)
{
    char buf[2048];
    for (uint32_t i = 0; i < d->n_entries; i++) {
        bpcc_diag_format(&d->entries[i], buf, sizeof buf);
        fputs(buf, stderr);
    }
    exit(1);
}

#endif
