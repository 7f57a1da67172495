/*
** testutil.h — helpers shared by the Check suites.
*/
#ifndef BPCC_TESTUTIL_H
#define BPCC_TESTUTIL_H

#include "bpcc.h"
#include "core/core.h"
#include "ir/ir.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FIXTURES_DIR
#error "FIXTURES_DIR must be defined by the build"
#endif

#define FIXTURE(name) FIXTURES_DIR "/" name

/* Run one suite and return the exit status meson expects. */
static inline int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* Message text of the first diagnostic entry ("" if none). */
static inline const char *tu_msg(const struct bpcc_diag *d)
{
    return d->n_entries ? d->entries[0].msg : "";
}

/* Assert that d's first entry is at line:col and its message contains `sub`. */
#define TU_ASSERT_DIAG(d, l, c, sub)                                                     \
    do {                                                                                 \
        ck_assert_msg((d)->n_entries > 0, "no diagnostic recorded");                     \
        ck_assert_msg((d)->entries[0].line == (uint32_t)(l) &&                          \
                          (d)->entries[0].col == (uint32_t)(c),                          \
                      "expected %d:%d, got %u:%u (%s)", (int)(l), (int)(c),             \
                      (d)->entries[0].line, (d)->entries[0].col, (d)->entries[0].msg);   \
        ck_assert_msg(strstr((d)->entries[0].msg, (sub)) != NULL,                        \
                      "message '%s' lacks '%s'", (d)->entries[0].msg, (sub));            \
    } while (0)

/* Write bytes to a fresh temporary file; returns its malloc'd path. */
static inline char *tu_write_temp(const void *data, size_t n, const char *suffix)
{
    char tmpl[256];
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpl, sizeof tmpl, "%s/bpcc-test-XXXXXX%s", dir, suffix);
    int fd = mkstemps(tmpl, (int)strlen(suffix));
    ck_assert_int_ge(fd, 0);
    FILE *fp = fdopen(fd, "wb");
    ck_assert_ptr_nonnull(fp);
    if (n) ck_assert_uint_eq(fwrite(data, 1, n, fp), n);
    fclose(fp);
    return strdup(tmpl);
}

/* A fresh empty temporary directory (malloc'd path). */
static inline char *tu_temp_dir(void)
{
    char tmpl[256];
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpl, sizeof tmpl, "%s/bpcc-test-dir-XXXXXX", dir);
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    return strdup(tmpl);
}

static inline char *tu_read(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (len) *len = 0;
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, fp);
    fclose(fp);
    b[got] = 0;
    if (len) *len = got;
    return b;
}

/* A bad-input file states what loading it must report on its first lines:
**   # expect: LINE:COL message substring      (and optionally "# strict" as the first line)
** Parses that header; returns false if there is none. */
struct tu_expect {
    unsigned line, col;
    char msg[512];
    bool strict;
};

static inline bool tu_read_expect(const char *path, struct tu_expect *e)
{
    size_t len;
    char *text = tu_read(path, &len);
    if (!text) return false;
    const char *x = strstr(text, "# expect: ");
    int used = 0;
    bool ok = x && sscanf(x + 10, "%u:%u %n", &e->line, &e->col, &used) == 2;
    if (ok) {
        const char *msg = x + 10 + used;
        snprintf(e->msg, sizeof e->msg, "%.*s", (int)strcspn(msg, "\n"), msg);
        e->strict = strstr(text, "# strict\n") == text;
    }
    free(text);
    return ok;
}

/* The first error of d, NULL if none. */
static inline const struct bpcc_diag_entry *tu_first_error(const struct bpcc_diag *d)
{
    for (uint32_t i = 0; i < d->n_entries; i++)
        if (d->entries[i].severity == BPCC_SEV_ERROR) return &d->entries[i];
    return NULL;
}

/* Fail the 1st, 2nd, ... allocation of fn(ctx) until it succeeds: every failure must report
** out-of-memory (status and diagnostic). Returns the number of failure points exercised. */
typedef enum bpcc_status (*tu_op_fn)(void *ctx, struct bpcc_diag *d);
static inline int tu_oom_loop(const char *what, tu_op_fn fn, void *ctx)
{
    int n_failed = 0;
    for (uint64_t n = 1;; n++) {
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        bpcc_alloc_fail_at(n, false);
        enum bpcc_status s = fn(ctx, &d);
        bpcc_alloc_fail_at(0, false);
        if (s == BPCC_OK) break;
        ck_assert_msg(s == BPCC_ERR_NOMEM, "%s: allocation %llu failed with '%s' (%s)", what,
                      (unsigned long long)n, bpcc_status_name(s), tu_msg(&d));
        ck_assert_int_eq(d.code, BPCC_ERR_NOMEM);
        ck_assert_msg(d.n_errors == 1, "%s: allocation %llu reported %u errors (%s)", what, (unsigned long long)n,
                      d.n_errors, tu_msg(&d));
        n_failed++;
        ck_assert_msg(n < 1000000, "%s does not converge", what);
    }
    return n_failed;
}

/* The .yaml files of a directory, sorted (names malloc'd into out[]). */
static inline int tu_list_yaml(const char *dir, char **out, int max)
{
    int n = 0;
    DIR *dp = opendir(dir);
    struct dirent *e;
    while (dp && (e = readdir(dp)) && n < max)
        if (strstr(e->d_name, ".yaml")) out[n++] = strdup(e->d_name);
    if (dp) closedir(dp);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(out[j - 1], out[j]) > 0; j--) {
            char *t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* Give module m of g a tensor `name` (role `role`) of dtype dt (f32, i64 or i32) holding v. */
static inline void tu_set_values(struct bpcc_graph *g, const char *m, const char *name, enum bpcc_tensor_role role,
                                 enum bpcc_dtype dt, uint32_t ndim, const int64_t *dims, const double *v)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_tensor *t;
    ck_assert_int_eq(bpcc_tensor_new(g, dt, ndim, dims, &t, &d), BPCC_OK);
    void *p = bpcc_tensor_data(t);
    for (uint64_t i = 0; i < bpcc_tensor_numel(t); i++) {
        if (dt == BPCC_DTYPE_F32) ((float *)p)[i] = (float)v[i];
        else if (dt == BPCC_DTYPE_I64) ((int64_t *)p)[i] = (int64_t)v[i];
        else ((int32_t *)p)[i] = (int32_t)v[i];
    }
    ck_assert_int_eq(bpcc_module_set_tensor(bpcc_graph_find_module(g, m), name, role, t, &d), BPCC_OK);
}

/* A batch file (temporary; malloc'd path): one float32 tensor `name` of the given shape, element i
** being f(i). */
static inline char *tu_write_batch(const char *name, uint32_t ndim, const int64_t *dims, float (*f)(uint64_t))
{
    struct bpcc_graph *g;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_graph_new(&g, &d), BPCC_OK);
    struct bpcc_tensor *t;
    ck_assert_int_eq(bpcc_tensor_new(g, BPCC_DTYPE_F32, ndim, dims, &t, &d), BPCC_OK);
    for (uint64_t i = 0; i < bpcc_tensor_numel(t); i++) ((float *)bpcc_tensor_data(t))[i] = f(i);
    char *path = tu_write_temp("", 0, ".safetensors");
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    const struct bpcc_tensor *ts[1] = {t};
    ck_assert_int_eq(bpcc_safetensors_write(fp, path, &name, ts, 1, &d), BPCC_OK);
    fclose(fp);
    bpcc_graph_free(g);
    return path;
}

/* How many of the whole pages inside [p, p + n) have page-table entries (/proc/self/pagemap's bit
** 63), and in *pages how many there are; SIZE_MAX where the process cannot read its pagemap:
** Linux. */
static inline size_t tu_pages_present_of(const void *p, size_t n, size_t *pages)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), first = ((uintptr_t)p + pg - 1) / pg, end = ((uintptr_t)p + n) / pg;
    *pages = end > first ? end - first : 0;
    FILE *f = fopen("/proc/self/pagemap", "rb");
    if (!f) return SIZE_MAX;
    size_t present = 0;
    for (size_t i = first; i < end; i++) {
        uint64_t e = 0;
        ck_assert_int_eq(fseeko(f, (off_t)(i * sizeof e), SEEK_SET), 0);
        ck_assert_uint_eq(fread(&e, sizeof e, 1, f), 1);
        present += (size_t)(e >> 63);
    }
    fclose(f);
    return present;
}
static inline size_t tu_pages_present(const void *p, size_t n)
{
    size_t pages;
    return tu_pages_present_of(p, n, &pages);
}

/* The flags of the mapping in /proc/self/smaps that holds addr (its VmFlags line after the colon,
** e.g. " rd wr mr mw me ac hg"), "" if not found: Linux. */
static inline void tu_vm_flags(const void *addr, char *out, size_t n)
{
    out[0] = 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    bool inside = false;
    uintptr_t a = (uintptr_t)addr;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = a >= lo && a < hi;
        } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            size_t k = strlen(line + 8);
            if (k >= n) k = n - 1;
            memcpy(out, line + 8, k);
            out[k] = 0;
            break;
        }
    }
    fclose(f);
}

#endif
