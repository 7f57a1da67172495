/*
** blas.c — the BLAS the interpreter multiplies with (OpenBLAS), loaded when the first interpreter
** is made rather than when the program starts.
**
** OpenBLAS sets itself up in its constructor: it picks its kernels from the CPU and
** OPENBLAS_CORETYPE, and starts its thread pool after OPENBLAS_NUM_THREADS. Linked in, that happens
** before main, for every program linking libbpcc, whether it ever multiplies or not (`bpcc show`,
** a compiler that only fuses), and before a program can set those variables itself: the bpcc tool
** used to start itself a second time for that. Loaded here, OpenBLAS reads the environment as it is
** when the first model runs, and costs nothing until then (~4 ms of a process start on this
** project's machines: mapping it and libgfortran, 12k relocations, its thread pool and buffers).
** A program that knows it will run a model can have that load start on a thread of its own
** (bpcc_blas_preload), so that it happens while the model is read and fused rather than when the
** first batch waits for it: the bpcc tool does so for the verbs that run a model.
**
** The library is found by its soname: BPCC_BLAS in the environment (read at that first load), else
** the meson option blas_library, libopenblas.so.0 by default. Any CBLAS with cblas_sgemm will do;
** openblas_set_num_threads is used where present.
*/
#include "exec.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

#ifndef BPCC_BLAS_LIBRARY
#define BPCC_BLAS_LIBRARY "libopenblas.so.0"
#endif

static __typeof__(cblas_sgemm) *sgemm_fn;
static void (*set_threads_fn)(int);
static char load_error[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static const char *library = BPCC_BLAS_LIBRARY;

static void load(void)
{
    const char *env = getenv("BPCC_BLAS");
    if (env && *env) library = env;
    void *h = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(load_error, sizeof load_error, "%s", e ? e : "unknown error");
        return;
    }
    void *f = dlsym(h, "cblas_sgemm");
    if (!f) {
        snprintf(load_error, sizeof load_error, "it has no cblas_sgemm");
        dlclose(h);
        return;
    }
    set_threads_fn = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    sgemm_fn = (__typeof__(cblas_sgemm) *)f;
}

static void *preload_main(void *arg)
{
    (void)arg;
    pthread_once(&load_once, load);
    return NULL;
}

/* pthread_once makes the first run wait for a load under way, and a second preload or a run
** after the load finds it done. A thread that cannot start leaves the load to the first run. */
void bpcc_blas_preload(void)
{
    static atomic_flag started = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&started)) return;
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr)) return;
    if (!pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED)) (void)pthread_create(&t, &attr, preload_main, NULL);
    pthread_attr_destroy(&attr);
}

enum bpcc_status bpcc_blas_load(struct bpcc_diag *d)
{
    pthread_once(&load_once, load);
    if (sgemm_fn) return BPCC_OK;
    return bpcc_diag_error(d, BPCC_ERR_IO, NULL, 0, 0, "cannot load the BLAS library %s: %s", library, load_error);
}

void bpcc_blas_set_threads(int n)
{
    pthread_once(&load_once, load);
    if (set_threads_fn) set_threads_fn(n);
}

void bpcc_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                int ldb, float beta, float *c, int ldc)
{
    pthread_once(&load_once, load); /* done by bpcc_exec_new, unless a kernel is called on its own (tests) */
    BPCC_ASSERT(sgemm_fn);
    sgemm_fn((enum CBLAS_ORDER)order, (enum CBLAS_TRANSPOSE)ta, (enum CBLAS_TRANSPOSE)tb, m, n, k, alpha, a, lda, b, ldb, beta,
             c, ldc);
}
