/*
** check_cli.c — the tool's process set-up (src/cli/process.c): what a verb's process sets before
** it works (OpenBLAS's environment, the heap's huge-page advice), and that the set-up does it.
*/
#include "testutil.h"

#include "cli/cli.h"

#if defined(__linux__) && defined(__GLIBC__)
#include <unistd.h>
#endif

#define ENV(...) ((char *[]){__VA_ARGS__, NULL})
#define ARGV(...) ((char *[]){"bpcc", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"bpcc", __VA_ARGS__}) / sizeof(char *)))
#define PLAN(env, avx512, ...) (cli_process_plan(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), (env), (avx512), &p))

START_TEST(a_work_verb_gets_what_is_missing)
{
    struct cli_process_plan p;
    char **env = ENV("HOME=/root", "PATH=/usr/bin");
    ck_assert(PLAN(env, true, "quantize", "m.bpcc"));
    ck_assert_str_eq(p.threads, "1");
    ck_assert(p.coretype);
    ck_assert(p.heap);
    /* without AVX-512, OpenBLAS's own choice of kernels stands */
    ck_assert(PLAN(env, false, "run", "m.bpcc"));
    ck_assert(!p.coretype);
    ck_assert_str_eq(p.threads, "1");
    ck_assert(p.heap);
}
END_TEST

START_TEST(every_verb_that_loads_a_model_and_no_other)
{
    struct cli_process_plan p;
    char **env = ENV("HOME=/root");
    const char *work[] = {"fuse", "prepare", "calibrate", "run", "convert", "quantize", "compare"};
    for (size_t i = 0; i < sizeof work / sizeof work[0]; i++) {
        char *argv[] = {"bpcc", (char *)work[i], NULL};
        ck_assert_msg(cli_process_plan(2, argv, env, true, &p), "%s is not set up", work[i]);
        ck_assert_msg(p.threads && p.heap, "%s", work[i]);
    }
    const char *other[] = {"show", "fmt", "config", "qconfig", "explain", "--help", "--version", "nonsense", ""};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char *argv[] = {"bpcc", (char *)other[i], NULL};
        ck_assert_msg(!cli_process_plan(2, argv, env, true, &p), "'%s' is set up", other[i]);
        ck_assert(!p.threads && !p.coretype && !p.heap);
    }
    char *bare[] = {"bpcc", NULL};
    ck_assert(!cli_process_plan(1, bare, env, true, &p));
}
END_TEST

START_TEST(threads_follow_the_option)
{
    struct cli_process_plan p;
    char **env = ENV("HOME=/root");
    ck_assert(PLAN(env, false, "calibrate", "m.bpcc", "--threads", "4"));
    ck_assert_str_eq(p.threads, "4");
    /* a value the verb refuses (it says so itself) is no thread count for OpenBLAS */
    const char *bad[] = {"0", "257", "-2", "4x", "", "many"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"bpcc", "run", "m.bpcc", "--threads", (char *)bad[i], NULL};
        ck_assert(cli_process_plan(5, argv, env, false, &p));
        ck_assert_msg(!strcmp(p.threads, "1"), "--threads '%s'", bad[i]);
    }
    /* --threads as the last word has no value: the default */
    ck_assert(PLAN(env, false, "run", "m.bpcc", "--threads"));
    ck_assert_str_eq(p.threads, "1");
}
END_TEST

START_TEST(what_the_user_set_stands)
{
    struct cli_process_plan p;
    ck_assert(PLAN(ENV("OPENBLAS_NUM_THREADS=3", "OPENBLAS_CORETYPE=Haswell", "X=1"), true, "run", "m.bpcc", "--threads", "2"));
    ck_assert_ptr_null(p.threads);
    ck_assert(!p.coretype);
    ck_assert(p.heap);
    /* the user's own hugetlb tunable, whatever its value, and BPCC_HUGE_PAGES=0 keep the heap as
    ** glibc sets it up */
    ck_assert(PLAN(ENV("GLIBC_TUNABLES=glibc.malloc.hugetlb=0"), true, "run", "m.bpcc"));
    ck_assert(!p.heap);
    ck_assert(PLAN(ENV("GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"), true, "run", "m.bpcc"));
    ck_assert(!p.heap);
    ck_assert(PLAN(ENV("BPCC_HUGE_PAGES=0"), true, "run", "m.bpcc"));
    ck_assert(!p.heap);
    ck_assert_str_eq(p.threads, "1");
    /* other tunables, and BPCC_HUGE_PAGES with another value than 0, do not */
    ck_assert(PLAN(ENV("GLIBC_TUNABLES=glibc.malloc.arena_max=2"), true, "run", "m.bpcc"));
    ck_assert(p.heap);
    ck_assert(PLAN(ENV("BPCC_HUGE_PAGES=1"), true, "run", "m.bpcc"));
    ck_assert(p.heap);
    /* a variable whose name only starts like one of these is another variable */
    ck_assert(PLAN(ENV("OPENBLAS_NUM_THREADSX=9", "OPENBLAS_CORETYPE_=x", "GLIBC_TUNABLES_=glibc.malloc.hugetlb=0",
                       "BPCC_HUGE_PAGESX=0"),
                   true, "run", "m.bpcc"));
    ck_assert_str_eq(p.threads, "1");
    ck_assert(p.coretype && p.heap);
}
END_TEST

/* the BLAS starts loading at once only where a model will run: a verb given batches */
START_TEST(the_blas_starts_loading_only_for_a_verb_given_batches)
{
    struct cli_process_plan p;
    char **env = ENV("HOME=/root");
    ck_assert(PLAN(env, true, "quantize", "m.bpcc", "-b", "fbgemm", "-q", "fbgemm", "--data", "b.safetensors", "-o", "q.bpcc"));
    ck_assert(p.preload);
    ck_assert(PLAN(env, true, "calibrate", "m.bpcc", "--data", "d", "-o", "c.bpcc"));
    ck_assert(p.preload);
    ck_assert(PLAN(env, false, "run", "m.bpcc", "--input", "b.safetensors", "-o", "o.safetensors"));
    ck_assert(p.preload);
    ck_assert(PLAN(env, true, "compare", "outputs", "f.bpcc", "q.bpcc", "--data", "b.safetensors"));
    ck_assert(p.preload);
    /* what the user set for OpenBLAS does not change whether it is loaded early */
    ck_assert(PLAN(ENV("OPENBLAS_NUM_THREADS=2", "OPENBLAS_CORETYPE=Haswell"), true, "run", "m.bpcc", "--data", "b"));
    ck_assert(p.preload && !p.threads && !p.coretype);
    /* no batches: nothing runs (quantize then only says it needs some, or quantizes dynamically) */
    ck_assert(PLAN(env, true, "quantize", "m.bpcc", "-b", "fbgemm", "-q", "dynamic", "-o", "q.bpcc"));
    ck_assert(!p.preload);
    ck_assert(PLAN(env, true, "compare", "weights", "f.bpcc", "q.bpcc"));
    ck_assert(!p.preload);
    /* verbs that never run a model, whatever their words */
    const char *never[] = {"fuse", "prepare", "convert"};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        char *argv[] = {"bpcc", (char *)never[i], "m.bpcc", "--data", "b.safetensors", NULL};
        ck_assert(cli_process_plan(5, argv, env, true, &p));
        ck_assert_msg(!p.preload, "%s", never[i]);
    }
    char *show[] = {"bpcc", "show", "m.bpcc", "--data", "b", NULL};
    ck_assert(!cli_process_plan(5, show, env, true, &p));
    ck_assert(!p.preload);
    /* "--data" only as a word of its own */
    ck_assert(PLAN(env, true, "run", "m.bpcc", "--data=b", "--datax", "b"));
    ck_assert(!p.preload);
}
END_TEST

#if defined(__linux__) && defined(__GLIBC__)
/* malloc is glibc's own here: not under a sanitizer or valgrind, which bring theirs */
static bool glibc_malloc(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return false;
#endif
#endif
    const char *pre = getenv("LD_PRELOAD");
    return !(pre && strstr(pre, "vgpreload"));
}

/* 1 MiB blocks, below the library's own advice (2 MiB and more), until one grows the heap: that
** one's last byte, in the heap's new part (the others are left allocated) */
static char *block_growing_the_heap(void)
{
    for (int i = 0; i < 256; i++) {
        void *top = sbrk(0);
        char *b = bpcc_malloc(1u << 20);
        ck_assert_ptr_nonnull(b);
        if (sbrk(0) != top) return b + (1u << 20) - 1;
    }
    ck_abort_msg("the heap never grew");
    return NULL;
}

START_TEST(the_set_up_applies_the_plan)
{
    unsetenv("OPENBLAS_NUM_THREADS");
    unsetenv("BPCC_HUGE_PAGES");
    unsetenv("GLIBC_TUNABLES");
    char *argv[] = {"bpcc", "run", "m.bpcc", "--threads", "3", NULL};
    cli_process_setup(5, argv);
    ck_assert_str_eq(getenv("OPENBLAS_NUM_THREADS"), "3");
    if (!glibc_malloc()) return;
    /* a small block that grew the heap: its mapping is advised onto huge pages ("hg") */
    char flags[512];
    tu_vm_flags(block_growing_the_heap(), flags, sizeof flags);
    ck_assert_msg(strstr(flags, " hg"), "heap mapping not advised: %s", flags);
    bpcc_set_allocator(NULL);
}
END_TEST

START_TEST(no_heap_advice_when_turned_off)
{
    bpcc_set_allocator(NULL);
    setenv("BPCC_HUGE_PAGES", "0", 1);
    char *argv[] = {"bpcc", "run", "m.bpcc", NULL};
    cli_process_setup(3, argv);
    if (!glibc_malloc()) return;
    char flags[512];
    tu_vm_flags(block_growing_the_heap(), flags, sizeof flags);
    ck_assert_msg(flags[0] && !strstr(flags, " hg"), "heap mapping advised: %s", flags);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("process");
    tcase_set_timeout(tc, 60); /* Check's default, 4 s, is too short on a loaded machine under ASan */
    tcase_add_test(tc, a_work_verb_gets_what_is_missing);
    tcase_add_test(tc, every_verb_that_loads_a_model_and_no_other);
    tcase_add_test(tc, threads_follow_the_option);
    tcase_add_test(tc, what_the_user_set_stands);
    tcase_add_test(tc, the_blas_starts_loading_only_for_a_verb_given_batches);
#if defined(__linux__) && defined(__GLIBC__)
    /* in this order for CK_FORK=no: a heap advised once stays so as it grows */
    tcase_add_test(tc, no_heap_advice_when_turned_off);
    tcase_add_test(tc, the_set_up_applies_the_plan);
#endif
    suite_add_tcase(s, tc);
    return tu_run(s);
}
