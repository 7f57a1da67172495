/*
** process.c — how the bpcc tool sets up its own process before any library in it starts.
**
** Two libraries settle things from the environment when they are loaded, before main:
** - OpenBLAS picks its kernels from the CPU's vendor and model (on AVX-512 CPUs it does not know
**   as such, AMD Zen 4, it falls back to its Haswell kernels, 1.5x slower than its SkylakeX ones)
**   and starts a thread pool of one worker per core, each spinning for a while, even when bpcc
**   computes on one thread;
** - glibc's malloc reads its tunables: with glibc.malloc.hugetlb=1 it grows the heap in 2 MiB
**   steps advised onto transparent huge pages. The tool's heap holds the interpreter's
**   activations and the folded weights; in 4 KiB pages each first touch is a page fault, 25 % of
**   a `bpcc quantize` run of mobilenet_v2 on a machine whose faults are dear (docs/PERFORMANCE.md).
**   The library's own advice covers blocks of 2 MiB and more only.
** So the verbs that load a model start once more with what is missing of OPENBLAS_NUM_THREADS
** (--threads, else 1), OPENBLAS_CORETYPE=SKYLAKEX (on CPUs with the AVX-512 subsets those kernels
** use) and glibc.malloc.hugetlb=1 (not with BPCC_HUGE_PAGES=0), unless the user set them. The new
** start happens in the executable's preinit function, which glibc runs before any shared
** library's constructor: the first process only maps and relocates the libraries. Under valgrind
** there is no new start (see cli_process_env).
*/
#include "cli.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the marker of a process that was set up: it never starts again */
#define CONFIGURED "BPCC_CONFIGURED=1"
#define HUGETLB "glibc.malloc.hugetlb=1"

static const char *const work_verbs[] = {"fuse", "prepare", "calibrate", "run", "convert", "quantize", "compare"};

/* the value of NAME in envp (NULL when absent), and its index in *at */
static const char *env_get(char *const *envp, const char *name, size_t *at)
{
    size_t n = strlen(name);
    for (size_t i = 0; envp[i]; i++)
        if (!strncmp(envp[i], name, n) && envp[i][n] == '=') {
            if (at) *at = i;
            return envp[i] + n + 1;
        }
    return NULL;
}

static char *join(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 1);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
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

char **cli_process_env(int argc, char *const *argv, char *const *envp, bool avx512)
{
    if (argc < 2 || env_get(envp, "BPCC_CONFIGURED", NULL)) return NULL;
    /* under valgrind /proc/self/exe is valgrind's tool, which refuses to start on its own, and a
    ** new start by another path would leave valgrind: the process goes on as it is */
    const char *preload = env_get(envp, "LD_PRELOAD", NULL);
    if (preload && strstr(preload, "vgpreload_core")) return NULL;
    bool work = false;
    for (size_t i = 0; i < sizeof work_verbs / sizeof work_verbs[0]; i++) work |= !strcmp(argv[1], work_verbs[i]);
    if (!work) return NULL;

    size_t n = 0, tunables_at = 0;
    while (envp[n]) n++;
    const char *tunables = env_get(envp, "GLIBC_TUNABLES", &tunables_at);
    const char *huge = env_get(envp, "BPCC_HUGE_PAGES", NULL);
    bool add_threads = !env_get(envp, "OPENBLAS_NUM_THREADS", NULL);
    bool add_core = avx512 && !env_get(envp, "OPENBLAS_CORETYPE", NULL);
    bool add_huge = !(huge && !strcmp(huge, "0")) && !(tunables && strstr(tunables, "glibc.malloc.hugetlb"));
    if (!add_threads && !add_core && !add_huge) return NULL;

    /* the user's entries, in order (their GLIBC_TUNABLES extended in place), then the additions;
    ** every string is allocated, so that cli_process_env_free frees them all */
    char **e = calloc(n + 5, sizeof *e);
    if (!e) return NULL;
    size_t k = 0;
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = (e[k++] = add_huge && tunables && i == tunables_at
                           ? join(envp[i], *tunables ? ":" HUGETLB : HUGETLB)
                           : join(envp[i], "")) != NULL;
    if (ok && add_threads) ok = (e[k++] = join("OPENBLAS_NUM_THREADS=", threads_of(argc, argv))) != NULL;
    if (ok && add_core) ok = (e[k++] = join("OPENBLAS_CORETYPE=", "SKYLAKEX")) != NULL;
    if (ok && add_huge && !tunables) ok = (e[k++] = join("GLIBC_TUNABLES=", HUGETLB)) != NULL;
    if (ok) ok = (e[k++] = join(CONFIGURED, "")) != NULL;
    if (!ok) {
        cli_process_env_free(e);
        return NULL;
    }
    return e;
}

void cli_process_env_free(char **e)
{
    if (!e) return;
    for (size_t i = 0; e[i]; i++) free(e[i]);
    free(e);
}

#if defined(__linux__) && defined(__GLIBC__)
/* glibc calls the executable's preinit functions with (argc, argv, envp) before the shared
** libraries' constructors; getenv does not work yet (libc sets its environment after), hence envp */
static void process_preinit(int argc, char **argv, char **envp)
{
    bool avx512 = false;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512cd");
#endif
    char **e = cli_process_env(argc, argv, envp, avx512);
    if (!e) return;
    execve("/proc/self/exe", argv, e); /* on failure: go on as the libraries set themselves up */
    cli_process_env_free(e);
}

__attribute__((section(".preinit_array"), used)) static void (*const process_preinit_entry)(int, char **, char **) =
    process_preinit;
#endif
