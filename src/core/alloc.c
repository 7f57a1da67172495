/*
** alloc.c — the single allocation hook every part of libbpcc goes through, with a
** fail-at-the-N-th-allocation switch for out-of-memory tests.
*/
#include "core.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

/* A big block (an arena chunk of a large graph, a name table, a folded weight) is advised to be
** backed by huge pages: its 2 MiB-aligned interior, where the kernel allows it (transparent huge
** pages in "madvise" or "always" mode). The memory is then faulted in 2 MiB at a time instead of
** 4 KiB: at a million nodes, 676k page faults become ~20k and the kernel's time falls by about
** half; resnet18's whole quantize run takes 3.7k faults instead of 13k. Advice only: a refusal
** changes nothing, and a caller's own allocator gets none. */
static bool huge_pages = true;

void bpcc_huge_pages_set(bool on) { huge_pages = on; }

/* BPCC_HUGE_PAGES=0 turns the advice off, read once when the library is loaded (as cpu.c reads
** BPCC_ISA): for a machine where huge pages cost more than they save, e.g. one whose fragmented
** memory makes the kernel compact on each huge fault (an earlier machine of this project's saw
** the kernel's time rise with them, docs/PERFORMANCE.md). */
__attribute__((constructor)) static void huge_pages_init(void)
{
    const char *v = getenv("BPCC_HUGE_PAGES");
    huge_pages = !(v && !strcmp(v, "0"));
}

static void advise_huge(void *p, size_t n)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = BPCC_HUGE_PAGE;
    if (!p || n < BPCC_HUGE_ADVICE_MIN || !huge_pages) return;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(huge - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

static void *default_malloc(void *ud, size_t n)
{
    (void)ud;
    void *p = malloc(n);
    advise_huge(p, n);
    return p;
}

static void *default_realloc(void *ud, void *p, size_t n)
{
    (void)ud;
    void *r = realloc(p, n);
    advise_huge(r, n);
    return r;
}
static void default_free(void *ud, void *p) { (void)ud; free(p); }

static struct bpcc_allocator alloc = {default_malloc, default_realloc, default_free, NULL};

static uint64_t n_allocs;   /* allocations since the last bpcc_alloc_fail_at call */
static uint64_t fail_at;    /* 0: never fail */
static bool fail_sticky;

void bpcc_set_allocator(const struct bpcc_allocator *a)
{
    if (a && a->malloc_fn && a->realloc_fn && a->free_fn)
        alloc = *a;
    else
        alloc = (struct bpcc_allocator){default_malloc, default_realloc, default_free, NULL};
}

uint64_t bpcc_alloc_fail_at(uint64_t n, bool sticky)
{
    uint64_t made = n_allocs;
    n_allocs = 0;
    fail_at = n;
    fail_sticky = sticky;
    return made;
}

static uint64_t n_failed; /* allocations that returned NULL, ever */

static bool should_fail(void)
{
    n_allocs++;
    if (fail_at == 0) return false;
    if (n_allocs == fail_at || (fail_sticky && n_allocs > fail_at)) {
        n_failed++;
        return true;
    }
    return false;
}

uint64_t bpcc_alloc_failures(void) { return n_failed; }

void *bpcc_malloc(size_t n)
{
    if (should_fail()) return NULL;
    void *p = alloc.malloc_fn(alloc.ud, n ? n : 1);
    if (!p) n_failed++;
    return p;
}

void *bpcc_realloc(void *p, size_t n)
{
    if (should_fail()) return NULL;
    void *r = alloc.realloc_fn(alloc.ud, p, n ? n : 1);
    if (!r) n_failed++;
    return r;
}

void bpcc_xfree(void *p)
{
    if (p) alloc.free_fn(alloc.ud, p);
}

void bpcc_pages_give_back(const void *p, size_t n)
{
#if defined(__linux__) && defined(MADV_DONTNEED)
    static uintptr_t page;
    if (!page) {
        long ps = sysconf(_SC_PAGESIZE);
        page = ps > 0 ? (uintptr_t)ps : 4096;
    }
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + n) & ~(page - 1);
    if (p && hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)p;
    (void)n;
#endif
}

void bpcc_xfree_pages(void *p, size_t n)
{
    if (n >= ((size_t)1 << 20)) bpcc_pages_give_back(p, n);
    bpcc_xfree(p);
}

void bpcc_free(void *p) { bpcc_xfree(p); }

char *bpcc_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *r = bpcc_malloc(n);
    if (r) memcpy(r, s, n);
    return r;
}

void bpcc_assert_fail(const char *expr, const char *file, int line)
{
    /* The one place the library writes to stderr: a broken invariant inside bpcc itself. */
    fprintf(stderr, "%s:%d: bpcc internal assertion failed: %s\n", file, line, expr);
    abort();
}

const char *bpcc_version(void) { return BPCC_VERSION_STRING; }
