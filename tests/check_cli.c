/*
** check_cli.c — the tool's process set-up (src/cli/process.c): which environment a verb starts
** again with. (This program links process.c, so its own start runs the preinit hook too, which
** does nothing here: no verb.)
*/
#include "testutil.h"

#include "cli/cli.h"

/* the number of entries of e that are exactly `entry` */
static int count(char **e, const char *entry)
{
    int n = 0;
    for (size_t i = 0; e[i]; i++) n += !strcmp(e[i], entry);
    return n;
}

/* the number of entries of e named `name` */
static int named(char **e, const char *name)
{
    int n = 0;
    size_t len = strlen(name);
    for (size_t i = 0; e[i]; i++) n += !strncmp(e[i], name, len) && e[i][len] == '=';
    return n;
}

static size_t length(char **e)
{
    size_t n = 0;
    while (e[n]) n++;
    return n;
}

#define ENV(...) ((char *[]){__VA_ARGS__, NULL})
#define ARGV(...) ((char *[]){"bpcc", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"bpcc", __VA_ARGS__}) / sizeof(char *)))

START_TEST(a_work_verb_gets_what_is_missing)
{
    char **env = ENV("HOME=/root", "PATH=/usr/bin");
    char **e = cli_process_env(ARGC("quantize", "m.bpcc"), ARGV("quantize", "m.bpcc"), env, true);
    ck_assert_ptr_nonnull(e);
    /* the user's entries first, in order, then the additions */
    ck_assert_str_eq(e[0], "HOME=/root");
    ck_assert_str_eq(e[1], "PATH=/usr/bin");
    ck_assert_int_eq(count(e, "OPENBLAS_NUM_THREADS=1"), 1);
    ck_assert_int_eq(count(e, "OPENBLAS_CORETYPE=SKYLAKEX"), 1);
    ck_assert_int_eq(count(e, "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"), 1);
    ck_assert_int_eq(count(e, "BPCC_CONFIGURED=1"), 1);
    ck_assert_uint_eq(length(e), 6);
    cli_process_env_free(e);

    /* without AVX-512, OpenBLAS's own choice of kernels stands */
    e = cli_process_env(ARGC("run", "m.bpcc"), ARGV("run", "m.bpcc"), env, false);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(named(e, "OPENBLAS_CORETYPE"), 0);
    ck_assert_int_eq(count(e, "OPENBLAS_NUM_THREADS=1"), 1);
    cli_process_env_free(e);
}
END_TEST

START_TEST(every_verb_that_loads_a_model_and_no_other)
{
    char **env = ENV("HOME=/root");
    const char *work[] = {"fuse", "prepare", "calibrate", "run", "convert", "quantize", "compare"};
    for (size_t i = 0; i < sizeof work / sizeof work[0]; i++) {
        char *argv[] = {"bpcc", (char *)work[i], NULL};
        char **e = cli_process_env(2, argv, env, true);
        ck_assert_msg(e != NULL, "%s is not set up", work[i]);
        cli_process_env_free(e);
    }
    const char *other[] = {"show", "fmt", "config", "qconfig", "explain", "--help", "--version", "nonsense", ""};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char *argv[] = {"bpcc", (char *)other[i], NULL};
        ck_assert_msg(cli_process_env(2, argv, env, true) == NULL, "'%s' starts again", other[i]);
    }
    char *bare[] = {"bpcc", NULL};
    ck_assert_ptr_null(cli_process_env(1, bare, env, true));
}
END_TEST

START_TEST(threads_follow_the_option)
{
    char **env = ENV("HOME=/root");
    char **e = cli_process_env(ARGC("calibrate", "m.bpcc", "--threads", "4"), ARGV("calibrate", "m.bpcc", "--threads", "4"),
                               env, false);
    ck_assert_int_eq(count(e, "OPENBLAS_NUM_THREADS=4"), 1);
    cli_process_env_free(e);
    /* a value the verb refuses (it says so itself) is no thread count for OpenBLAS */
    const char *bad[] = {"0", "257", "-2", "4x", "", "many"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"bpcc", "run", "m.bpcc", "--threads", (char *)bad[i], NULL};
        e = cli_process_env(5, argv, env, false);
        ck_assert_msg(count(e, "OPENBLAS_NUM_THREADS=1") == 1, "--threads '%s'", bad[i]);
        cli_process_env_free(e);
    }
    /* --threads as the last word has no value: the default */
    e = cli_process_env(ARGC("run", "m.bpcc", "--threads"), ARGV("run", "m.bpcc", "--threads"), env, false);
    ck_assert_int_eq(count(e, "OPENBLAS_NUM_THREADS=1"), 1);
    cli_process_env_free(e);
}
END_TEST

START_TEST(what_the_user_set_stands)
{
    char **env = ENV("OPENBLAS_NUM_THREADS=3", "OPENBLAS_CORETYPE=Haswell", "X=1");
    char **e = cli_process_env(ARGC("run", "m.bpcc", "--threads", "2"), ARGV("run", "m.bpcc", "--threads", "2"), env, true);
    ck_assert_ptr_nonnull(e); /* the tunable is still missing */
    ck_assert_int_eq(named(e, "OPENBLAS_NUM_THREADS"), 1);
    ck_assert_int_eq(count(e, "OPENBLAS_NUM_THREADS=3"), 1);
    ck_assert_int_eq(named(e, "OPENBLAS_CORETYPE"), 1);
    ck_assert_int_eq(count(e, "OPENBLAS_CORETYPE=Haswell"), 1);
    ck_assert_int_eq(count(e, "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"), 1);
    cli_process_env_free(e);

    /* the user's tunables are kept, the huge-page one added to them: one GLIBC_TUNABLES */
    env = ENV("GLIBC_TUNABLES=glibc.malloc.arena_max=2", "OPENBLAS_NUM_THREADS=1");
    e = cli_process_env(ARGC("run", "m.bpcc"), ARGV("run", "m.bpcc"), env, false);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(named(e, "GLIBC_TUNABLES"), 1);
    ck_assert_str_eq(e[0], "GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
    cli_process_env_free(e);
    env = ENV("GLIBC_TUNABLES=", "OPENBLAS_NUM_THREADS=1");
    e = cli_process_env(ARGC("run", "m.bpcc"), ARGV("run", "m.bpcc"), env, false);
    ck_assert_str_eq(e[0], "GLIBC_TUNABLES=glibc.malloc.hugetlb=1");
    cli_process_env_free(e);

    /* a hugetlb tunable of the user's own, whatever its value, and BPCC_HUGE_PAGES=0 keep the
    ** heap as glibc sets it up; with all three set there is nothing to start again for */
    env = ENV("GLIBC_TUNABLES=glibc.malloc.hugetlb=0", "OPENBLAS_NUM_THREADS=1", "OPENBLAS_CORETYPE=ZEN");
    ck_assert_ptr_null(cli_process_env(ARGC("run", "m.bpcc"), ARGV("run", "m.bpcc"), env, true));
    env = ENV("BPCC_HUGE_PAGES=0", "OPENBLAS_NUM_THREADS=1");
    ck_assert_ptr_null(cli_process_env(ARGC("run", "m.bpcc"), ARGV("run", "m.bpcc"), env, false));
    env = ENV("BPCC_HUGE_PAGES=0");
    e = cli_process_env(ARGC("run", "m.bpcc"), ARGV("run", "m.bpcc"), env, false);
    ck_assert_int_eq(named(e, "GLIBC_TUNABLES"), 0);
    cli_process_env_free(e);
    /* BPCC_HUGE_PAGES with another value than 0 does not turn it off */
    env = ENV("BPCC_HUGE_PAGES=1", "OPENBLAS_NUM_THREADS=1");
    e = cli_process_env(ARGC("run", "m.bpcc"), ARGV("run", "m.bpcc"), env, false);
    ck_assert_int_eq(count(e, "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"), 1);
    cli_process_env_free(e);
}
END_TEST

START_TEST(a_process_set_up_once_never_starts_again)
{
    char **env = ENV("HOME=/root");
    char **e = cli_process_env(ARGC("quantize", "m.bpcc"), ARGV("quantize", "m.bpcc"), env, true);
    ck_assert_ptr_nonnull(e);
    /* the environment it starts with asks for nothing more */
    ck_assert_ptr_null(cli_process_env(ARGC("quantize", "m.bpcc"), ARGV("quantize", "m.bpcc"), e, true));
    cli_process_env_free(e);
    /* nor a process valgrind runs: its /proc/self/exe is valgrind's own tool */
    env = ENV("LD_PRELOAD=/usr/libexec/valgrind/vgpreload_core-amd64-linux.so:/usr/libexec/valgrind/"
              "vgpreload_memcheck-amd64-linux.so");
    ck_assert_ptr_null(cli_process_env(ARGC("quantize", "m.bpcc"), ARGV("quantize", "m.bpcc"), env, true));
    env = ENV("LD_PRELOAD=/usr/lib/libother.so");
    e = cli_process_env(ARGC("quantize", "m.bpcc"), ARGV("quantize", "m.bpcc"), env, true);
    ck_assert_ptr_nonnull(e);
    cli_process_env_free(e);
    /* nor does the marker alone */
    env = ENV("BPCC_CONFIGURED=1");
    ck_assert_ptr_null(cli_process_env(ARGC("quantize", "m.bpcc"), ARGV("quantize", "m.bpcc"), env, true));
    /* a variable whose name only starts like one of these is another variable */
    env = ENV("BPCC_CONFIGURED_X=1", "OPENBLAS_NUM_THREADSX=9", "GLIBC_TUNABLES_=glibc.malloc.hugetlb=0");
    e = cli_process_env(ARGC("run", "m.bpcc"), ARGV("run", "m.bpcc"), env, false);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(count(e, "OPENBLAS_NUM_THREADS=1"), 1);
    ck_assert_int_eq(count(e, "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"), 1);
    ck_assert_int_eq(count(e, "BPCC_CONFIGURED=1"), 1);
    cli_process_env_free(e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("process");
    tcase_add_test(tc, a_work_verb_gets_what_is_missing);
    tcase_add_test(tc, every_verb_that_loads_a_model_and_no_other);
    tcase_add_test(tc, threads_follow_the_option);
    tcase_add_test(tc, what_the_user_set_stands);
    tcase_add_test(tc, a_process_set_up_once_never_starts_again);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
