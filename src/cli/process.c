/*
** process.c — how the bpcc tool sets up its own process before a verb that loads a model works.
**
** - OpenBLAS (loaded when the first model runs, src/exec/blas.c) picks its kernels from the CPU's
**   vendor and model: on AVX-512 CPUs it does not know as such, AMD Zen 4, it falls back to its
**   Haswell kernels, 1.5x slower than its SkylakeX ones. It also starts a thread pool of one worker
**   per core, each spinning for a while, even when bpcc computes on one thread. So the tool sets
**   what is missing of OPENBLAS_NUM_THREADS (--threads, else 1) and OPENBLAS_CORETYPE=SKYLAKEX (on
**   CPUs with the AVX-512 subsets those kernels use) in its environment, which OpenBLAS reads then.
** - The heap holds the interpreter's activations and the folded weights. In 4 KiB pages each first
**   touch of them is a page fault, 25 % of a `bpcc quantize` run of mobilenet_v2 on a machine whose
**   faults are dear (docs/PERFORMANCE.md); the library's own advice covers blocks of 2 MiB and more
**   only. So the tool advises its heap onto transparent huge pages as it grows: malloc grows it in
**   steps of 32 MiB (M_TOP_PAD) and the tool's allocation hook advises each new step
**   (MADV_HUGEPAGE), as glibc.malloc.hugetlb=1 would, without starting the process again to give
**   glibc that tunable. Not with BPCC_HUGE_PAGES=0, nor when the user set the tunable (to any value).
** - A verb that runs a model (one given batches: --data, or run's --input) starts loading OpenBLAS
**   on a thread of its own once the environment above is set (bpcc_blas_preload), so that the
**   ~5 ms of its set-up overlap reading and fusing the model instead of delaying the first batch.
** The rules are a pure function, cli_process_plan, for the tests.
** Every verb: SIGINT, SIGTERM and SIGHUP (unless ignored) remove the temporaries of the outputs
** being written (bpcc_remove_partial_outputs) before the signal stops the process.
*/
#include "cli.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#define HAVE_HEAP_ADVICE 1
#endif

extern char **environ;

static const char *const work_verbs[] = {"fuse", "prepare", "calibrate", "run", "convert", "quantize", "compare"};

/* the value of NAME in envp, NULL when absent */
static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; envp[i]; i++)
        if (!strncmp(envp[i], name, n) && envp[i][n] == '=') return envp[i] + n + 1;
    return NULL;
}

bool cli_parse_threads(const char *value, int *out)
{
    char *end;
    long t = strtol(value, &end, 10);
    if (*end || t < 1 || t > 256) return false;
    *out = (int)t;
    return true;
}

/* --threads VALUE when VALUE is what the verb accepts, else "1": the verb reports a bad one */
static const char *threads_of(int argc, char *const *argv)
{
    const char *threads = "1";
    int t;
    for (int i = 2; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--threads")) threads = cli_parse_threads(argv[i + 1], &t) ? argv[i + 1] : "1";
    return threads;
}

bool cli_process_plan(int argc, char *const *argv, char *const *envp, bool avx512, struct cli_process_plan *out)
{
    *out = (struct cli_process_plan){0};
    if (argc < 2) return false;
    bool work = false;
    for (size_t i = 0; i < sizeof work_verbs / sizeof work_verbs[0]; i++) work |= !strcmp(argv[1], work_verbs[i]);
    if (!work) return false;
    const char *tunables = env_get(envp, "GLIBC_TUNABLES"), *huge = env_get(envp, "BPCC_HUGE_PAGES");
    if (!env_get(envp, "OPENBLAS_NUM_THREADS")) out->threads = threads_of(argc, argv);
    out->coretype = avx512 && !env_get(envp, "OPENBLAS_CORETYPE");
    out->heap = !(huge && !strcmp(huge, "0")) && !(tunables && strstr(tunables, "glibc.malloc.hugetlb"));
    /* the verbs that run a model when given batches (compare weights takes none) */
    bool runs = !strcmp(argv[1], "quantize") || !strcmp(argv[1], "calibrate") || !strcmp(argv[1], "run") ||
                !strcmp(argv[1], "compare");
    for (int i = 2; runs && !out->preload && i < argc; i++)
        out->preload = !strcmp(argv[i], "--data") || !strcmp(argv[i], "--input");
    return true;
}

#ifdef HAVE_HEAP_ADVICE
enum { HEAP_STEP = 32 << 20 };
static _Atomic uintptr_t heap_advised; /* the heap's end as last advised */

/* advise what the heap grew by since the last call. sbrk(0) reads glibc's copy of the break
** (no system call); a heap that shrank is advised again when it grows back. */
static void advise_heap(void)
{
    uintptr_t top = (uintptr_t)sbrk(0), from = atomic_load_explicit(&heap_advised, memory_order_relaxed);
    if (top == from) return;
    atomic_store_explicit(&heap_advised, top, memory_order_relaxed);
    if (top < from) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (from + page - 1) & ~(page - 1);
    if (top > lo) (void)madvise((void *)lo, top - lo, MADV_HUGEPAGE);
}

static void *heap_malloc(void *ud, size_t n)
{
    (void)ud;
    void *p = malloc(n);
    advise_heap();
    return p;
}

static void *heap_realloc(void *ud, void *p, size_t n)
{
    (void)ud;
    void *r = realloc(p, n);
    advise_heap();
    return r;
}

static void heap_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}
#endif

/* SIGINT, SIGTERM, SIGHUP: the temporaries of the outputs being written go (a model's weights
** may be hundreds of MB), then the signal does what it would have done */
static void on_stop_signal(int sig)
{
    bpcc_remove_partial_outputs();
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_process_setup(int argc, char **argv)
{
    static const int stops[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
        struct sigaction sa = {0}, old;
        sa.sa_handler = on_stop_signal;
        sigemptyset(&sa.sa_mask);
        /* a signal the caller ignores (nohup, a shell's background job) stays ignored */
        if (sigaction(stops[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) (void)sigaction(stops[i], &sa, NULL);
    }
#ifdef HAVE_HEAP_ADVICE
    /* every block below 1 GiB from the heap, which is never given back while the tool runs:
    ** activations freed and allocated again per layer reuse it instead of mapping fresh pages */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    bool avx512 = false;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512cd");
#endif
    struct cli_process_plan p;
    if (!cli_process_plan(argc, argv, environ, avx512, &p)) return;
    if (p.threads) setenv("OPENBLAS_NUM_THREADS", p.threads, 1);
    if (p.coretype) setenv("OPENBLAS_CORETYPE", "SKYLAKEX", 1);
#ifdef HAVE_HEAP_ADVICE
    if (p.heap) {
        mallopt(M_TOP_PAD, HEAP_STEP);
        atomic_store_explicit(&heap_advised, (uintptr_t)sbrk(0), memory_order_relaxed);
        bpcc_set_allocator(&(struct bpcc_allocator){heap_malloc, heap_realloc, heap_free, NULL});
    }
#endif
    /* last: the environment is set and stays so */
    if (p.preload) bpcc_blas_preload();
}

long cli_peak_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kib;
}
