/*
** check_model_io.c — loading and saving whole models: tensors bound to the weights they name,
** every inconsistency reported where it is, atomic saves, and the JSON description.
*/
#include "testutil.h"

#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

static struct bpcc_diag d;

static void setup(void) { bpcc_diag_init(&d); }

/* Copy a fixture's two files into dir, the text rewritten through `edit` (may be NULL). */
static char *stage(const char *dir, const char *name, const char *find, const char *replace)
{
    char src[512], dst[512];
    snprintf(src, sizeof src, "%s/%s.bpcc", FIXTURES_DIR, name);
    size_t len;
    char *text = tu_read(src, &len);
    ck_assert_ptr_nonnull(text);
    char *out = text;
    if (find) {
        char *at = strstr(text, find);
        ck_assert_msg(at != NULL, "'%s' not in %s", find, name);
        size_t n = strlen(text) - strlen(find) + strlen(replace) + 1;
        out = malloc(n);
        snprintf(out, n, "%.*s%s%s", (int)(at - text), text, replace, at + strlen(find));
    }
    snprintf(dst, sizeof dst, "%s/%s.bpcc", dir, name);
    FILE *fp = fopen(dst, "wb");
    fputs(out, fp);
    fclose(fp);
    snprintf(src, sizeof src, "%s/%s.safetensors", FIXTURES_DIR, name);
    char *w = tu_read(src, &len);
    if (w) {
        snprintf(dst, sizeof dst, "%s/%s.safetensors", dir, name);
        fp = fopen(dst, "wb");
        fwrite(w, 1, len, fp);
        fclose(fp);
        free(w);
    }
    if (out != text) free(out);
    free(text);
    snprintf(dst, sizeof dst, "%s/%s.bpcc", dir, name);
    return strdup(dst);
}

static int count_files(const char *dir, const char *contains)
{
    DIR *dp = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (e->d_name[0] != '.' || (contains && strstr(e->d_name, contains)))
            if (!contains || strstr(e->d_name, contains)) n++;
    closedir(dp);
    return n;
}

static void rm_dir(const char *dir)
{
    DIR *dp = opendir(dir);
    struct dirent *e;
    char p[1024];
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(dp);
    rmdir(dir);
}

START_TEST(load_binds_tensors_to_their_data)
{
    struct bpcc_graph *g;
    ck_assert_msg(bpcc_graph_load(FIXTURE("conv_bn_relu.bpcc"), &g, &d) == BPCC_OK, "%s", tu_msg(&d));
    struct bpcc_module *bn = bpcc_graph_find_module(g, "bn");
    struct bpcc_tensor *rv = bpcc_module_tensor(bn, "running_var");
    ck_assert_ptr_nonnull(rv);
    const float *v = bpcc_tensor_data(rv);
    /* make_fixtures.py sets running_var to 0.5 + 0.1 i */
    for (int i = 0; i < 4; i++) ck_assert_float_eq_tol(v[i], 0.5f + 0.1f * (float)i, 1e-6f);
    struct bpcc_tensor *nbt = bpcc_module_tensor(bn, "num_batches_tracked");
    ck_assert_int_eq(bpcc_tensor_dtype(nbt), BPCC_DTYPE_I64);
    ck_assert_uint_eq(bpcc_tensor_ndim(nbt), 0);
    ck_assert_uint_eq(bpcc_tensor_nbytes(nbt), 8);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(every_fixture_loads_and_saves_back_identically)
{
    static const char *const names[] = {"conv_bn_relu", "residual", "cat", "linear_head", "literals",
                                        "torch/tiny_resnet", "torch/tiny_functional",
                                        "torch/tiny_resnet_fused", "torch/tiny_blocks"};
    char *dir = tu_temp_dir();
    char sub[600];
    snprintf(sub, sizeof sub, "%s/torch", dir);
    mkdir(sub, 0700);
    for (size_t i = 0; i < BPCC_ARRAY_LEN(names); i++) {
        char src[512], dst[512];
        snprintf(src, sizeof src, "%s/%s.bpcc", FIXTURES_DIR, names[i]);
        snprintf(dst, sizeof dst, "%s/%s.bpcc", dir, names[i]);
        struct bpcc_graph *g;
        ck_assert_msg(bpcc_graph_load(src, &g, &d) == BPCC_OK, "%s: %s", names[i], tu_msg(&d));
        ck_assert_msg(bpcc_graph_save(g, dst, &d) == BPCC_OK, "%s", tu_msg(&d));
        bpcc_graph_free(g);
        for (int k = 0; k < 2; k++) {
            const char *ext = k ? "safetensors" : "bpcc";
            snprintf(src, sizeof src, "%s/%s.%s", FIXTURES_DIR, names[i], ext);
            snprintf(dst, sizeof dst, "%s/%s.%s", dir, names[i], ext);
            size_t a_len, b_len;
            char *a = tu_read(src, &a_len), *b = tu_read(dst, &b_len);
            ck_assert_msg(a && b && a_len == b_len && memcmp(a, b, a_len) == 0,
                          "%s differs after load+save", src);
            free(a);
            free(b);
        }
    }
    ck_assert_int_eq(count_files(dir, ".tmp"), 0);
    ck_assert_int_eq(count_files(sub, ".tmp"), 0);
    rm_dir(sub);
    rm_dir(dir);
    free(dir);
}
END_TEST

struct load_case {
    const char *name, *fixture, *find, *replace;
    enum bpcc_status status;
    uint32_t line, col;
    const char *msg;
};

static const struct load_case load_bad[] = {
    {"weights file missing", "cat", "weights \"cat.safetensors\"", "weights \"gone.safetensors\"",
     BPCC_ERR_IO, 2, 9, "cannot read weights file"},
    {"tensor not in weights", "cat", "  param bias : f32[2]\n", "  param bias : f32[2]\n  buffer extra : f32[2]\n",
     BPCC_ERR_GRAPH, 7, 3, "tensor 'branch_a.extra' is not in the weights file"},
    {"dtype mismatch", "cat", "  param bias : f32[2]", "  param bias : i32[2]",
     BPCC_ERR_GRAPH, 6, 3, "declared i32 but stored as f32"},
    {"shape mismatch", "cat", "  param bias : f32[2]", "  param bias : f32[1, 2]",
     BPCC_ERR_GRAPH, 6, 3, "declared with shape [1, 2] but stored with shape [2]"},
    {"undeclared stored tensor", "cat", "  param bias : f32[2]\n", "",
     BPCC_ERR_GRAPH, 2, 9, "holds tensor 'branch_a.bias', which the model does not declare"},
    {"tensors without weights line", "cat", "weights \"cat.safetensors\"\n", "",
     BPCC_ERR_GRAPH, 1, 1, "names no weights file"},
    {"call of undefined module", "cat", "call_module branch_b", "call_module branch_c",
     BPCC_ERR_GRAPH, 14, 3, "calls module 'branch_c', which is not defined"},
    {"get_attr of nothing", "literals", "get_attr _tensor_constant0", "get_attr _tensor_constant9",
     BPCC_ERR_GRAPH, 23, 3, "reads attribute '_tensor_constant9'"},
};

START_TEST(load_errors_point_at_the_declaration)
{
    const struct load_case *c = &load_bad[_i];
    char *dir = tu_temp_dir();
    char *path = stage(dir, c->fixture, c->find, c->replace);
    struct bpcc_graph *g = (void *)1;
    enum bpcc_status s = bpcc_graph_load(path, &g, &d);
    ck_assert_msg(s == c->status, "[%s] status %d want %d: %s", c->name, s, c->status, tu_msg(&d));
    ck_assert_ptr_null(g);
    ck_assert_msg(d.entries[0].line == c->line && d.entries[0].col == c->col,
                  "[%s] at %u:%u want %u:%u (%s)", c->name, d.entries[0].line, d.entries[0].col,
                  c->line, c->col, tu_msg(&d));
    ck_assert_msg(strstr(tu_msg(&d), c->msg), "[%s] '%s' lacks '%s'", c->name, tu_msg(&d), c->msg);
    ck_assert_str_eq(d.entries[0].file, path);
    rm_dir(dir);
    free(dir);
    free(path);
}
END_TEST

START_TEST(corrupt_weights_report_the_weights_file)
{
    char *dir = tu_temp_dir();
    char *path = stage(dir, "cat", NULL, NULL);
    char w[512];
    snprintf(w, sizeof w, "%s/cat.safetensors", dir);
    ck_assert_int_eq(truncate(w, 100), 0);
    struct bpcc_graph *g;
    ck_assert_int_eq(bpcc_graph_load(path, &g, &d), BPCC_ERR_FORMAT);
    ck_assert_str_eq(d.entries[0].file, w);
    ck_assert(d.entries[0].has_offset);
    ck_assert(d.entries[0].has_note);
    ck_assert_ptr_nonnull(strstr(d.entries[0].note, "the weights file of"));
    rm_dir(dir);
    free(dir);
    free(path);
}
END_TEST

START_TEST(failed_save_leaves_existing_files_untouched)
{
    char *dir = tu_temp_dir();
    char *path = stage(dir, "cat", NULL, NULL);
    size_t len0;
    char *before = tu_read(path, &len0);
    struct bpcc_graph *g;
    ck_assert_int_eq(bpcc_graph_load(FIXTURE("cat.bpcc"), &g, &d), BPCC_OK);
    /* break an invariant: a second output node */
    struct bpcc_node *n = bpcc_graph_first(g);
    struct bpcc_value args;
    ck_assert_int_eq(bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 1, &args), BPCC_OK);
    args.u.seq.items[0] = bpcc_value_node(n);
    ck_assert_int_eq(bpcc_graph_create_node(g, BPCC_NODE_OUTPUT, NULL, "output", &args, NULL, NULL, &d),
                     BPCC_OK);
    ck_assert_int_eq(bpcc_graph_save(g, path, &d), BPCC_ERR_GRAPH);
    size_t len1;
    char *after = tu_read(path, &len1);
    ck_assert(len0 == len1 && memcmp(before, after, len0) == 0);
    ck_assert_int_eq(count_files(dir, ".tmp"), 0);
    /* an unwritable destination: nothing appears */
    bpcc_diag_init(&d);
    struct bpcc_graph *ok;
    ck_assert_int_eq(bpcc_graph_load(FIXTURE("cat.bpcc"), &ok, &d), BPCC_OK);
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/m.bpcc", dir);
    ck_assert_int_eq(bpcc_graph_save(ok, bad, &d), BPCC_ERR_IO);
    ck_assert_int_eq(count_files(dir, NULL), 2);
    bpcc_graph_free(ok);
    bpcc_graph_free(g);
    free(before);
    free(after);
    rm_dir(dir);
    free(dir);
    free(path);
}
END_TEST

/* Without BPCC_WRITE_SYNC a save waits for no disk; with it, each file and then its directory is
** fsync'd: four calls for a model (weights and text), two for bpcc_write_file_ex. The files are the
** same either way. */
START_TEST(a_save_waits_for_the_disk_only_when_asked)
{
    char *dir = tu_temp_dir();
    char path[600], wpath[600], jpath[600];
    snprintf(path, sizeof path, "%s/m.bpcc", dir);
    snprintf(wpath, sizeof wpath, "%s/m.safetensors", dir);
    snprintf(jpath, sizeof jpath, "%s/plan.json", dir);
    struct bpcc_graph *g;
    ck_assert_int_eq(bpcc_graph_load(FIXTURE("cat.bpcc"), &g, &d), BPCC_OK);
    size_t tl, wl;
    char *text = tu_read(FIXTURE("cat.bpcc"), &tl), *weights = tu_read(FIXTURE("cat.safetensors"), &wl);
    unsigned long n0 = bpcc_file_sync_count();
    ck_assert_msg(bpcc_graph_save(g, path, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_uint_eq(bpcc_file_sync_count(), n0);
    ck_assert_msg(bpcc_graph_save_ex(g, path, BPCC_WRITE_SYNC, &d) == BPCC_OK, "%s", tu_msg(&d)); /* over the first */
    ck_assert_uint_eq(bpcc_file_sync_count(), n0 + 4);
    ck_assert_int_eq(bpcc_graph_save_ex(g, path, 2, &d), BPCC_ERR_INVALID);
    ck_assert_uint_eq(bpcc_file_sync_count(), n0 + 4);
    size_t a_len, b_len;
    char *a = tu_read(path, &a_len), *b = tu_read(wpath, &b_len);
    ck_assert_msg(a_len == tl - strlen("weights \"cat.safetensors\"") + strlen("weights \"m.safetensors\"") &&
                  strstr(a, "weights \"m.safetensors\"") && b_len == wl && !memcmp(b, weights, wl), "the saved files differ");
    free(a);
    free(b);
    ck_assert_int_eq(bpcc_write_file(jpath, "{}", 2, &d), BPCC_OK);
    ck_assert_uint_eq(bpcc_file_sync_count(), n0 + 4);
    ck_assert_int_eq(bpcc_write_file_ex(jpath, "{ }", 3, BPCC_WRITE_SYNC, &d), BPCC_OK);
    ck_assert_uint_eq(bpcc_file_sync_count(), n0 + 6);
    ck_assert_int_eq(bpcc_write_file_ex(jpath, "[]", 2, 4, &d), BPCC_ERR_INVALID);
    a = tu_read(jpath, &a_len);
    ck_assert(a_len == 3 && !memcmp(a, "{ }", 3));
    free(a);
    ck_assert_int_eq(count_files(dir, NULL), 3);
    bpcc_graph_free(g);
    free(text);
    free(weights);
    rm_dir(dir);
    free(dir);
}
END_TEST

/* A save refuses, before writing anything, targets that would clobber what they are not: a path
** that is a directory or another non-regular file, a path ending in .safetensors (text and weights
** one file), the input model's own weights file under another text name, and an empty name; over
** the input itself it writes. */
START_TEST(a_save_refuses_targets_that_clobber_other_files)
{
    char *dir = tu_temp_dir();
    char *path = stage(dir, "cat", NULL, NULL);
    char wpath[600], other[600], sub[600], st_path[600];
    snprintf(wpath, sizeof wpath, "%s/cat.safetensors", dir);
    snprintf(other, sizeof other, "%s/cat.fused", dir);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(st_path, sizeof st_path, "%s/out.safetensors", dir);
    size_t wl0;
    char *w0 = tu_read(wpath, &wl0);
    struct bpcc_graph *g;
    ck_assert_int_eq(bpcc_graph_load(path, &g, &d), BPCC_OK);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    static const struct {
        const char *what, *message;
    } refused[] = {{"sub", "it is a directory"},
                   {"out.safetensors", "the model's text and its weights file would both be"},
                   {"cat.fused", "is the weights file of the input model"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char target[600];
        snprintf(target, sizeof target, "%s/%s", dir, refused[i].what);
        bpcc_diag_init(&d);
        ck_assert_int_eq(bpcc_graph_save(g, target, &d), BPCC_ERR_IO);
        ck_assert_msg(strstr(tu_msg(&d), refused[i].message), "%s: %s", refused[i].what, tu_msg(&d));
        ck_assert_int_eq(count_files(dir, NULL), 3); /* cat.bpcc, cat.safetensors, sub */
        ck_assert_int_eq(count_files(dir, ".tmp"), 0);
        size_t wl;
        char *w = tu_read(wpath, &wl);
        ck_assert(wl == wl0 && !memcmp(w, w0, wl0));
        free(w);
    }
    /* an empty name: the weights would have gone to ".safetensors" in the working directory */
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_graph_save(g, "", &d), BPCC_ERR_IO);
    ck_assert_msg(strstr(tu_msg(&d), "its file name is empty"), "%s", tu_msg(&d));
    ck_assert_int_ne(access(".safetensors", F_OK), 0);
    ck_assert_int_eq(bpcc_write_file("", "x", 1, &d), BPCC_ERR_IO);
    bpcc_diag_init(&d);
    ck_assert_msg(bpcc_graph_save(g, path, &d) == BPCC_OK, "over the input itself: %s", tu_msg(&d));
    bpcc_graph_free(g);
    ck_assert_int_eq(bpcc_graph_load(path, &g, &d), BPCC_OK);
    bpcc_graph_free(g);
    rmdir(sub);
    free(w0);
    rm_dir(dir);
    free(dir);
    free(path);
}
END_TEST

/* bpcc_remove_partial_outputs (a signal handler's call) removes the temporaries being written, and
** neither a committed output nor a temporary aborted before; the save in progress then fails */
START_TEST(partial_outputs_are_removed_on_request)
{
    char *dir = tu_temp_dir();
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/a.bin", dir);
    snprintf(b, sizeof b, "%s/b.bin", dir);
    struct bpcc_atomic_file fa, fb;
    ck_assert_int_eq(bpcc_atomic_open(&fa, a, 0, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_atomic_open(&fb, b, 0, &d), BPCC_OK);
    fputs("a", fa.fp);
    fputs("b", fb.fp);
    ck_assert_int_eq(bpcc_atomic_commit(&fa, &d), BPCC_OK);
    ck_assert_int_eq(count_files(dir, ".tmp"), 1);
    bpcc_remove_partial_outputs();
    ck_assert_int_eq(count_files(dir, ".tmp"), 0);
    ck_assert_int_eq(access(a, F_OK), 0); /* committed: kept */
    ck_assert_int_eq(bpcc_atomic_commit(&fb, &d), BPCC_ERR_IO);
    ck_assert_int_ne(access(b, F_OK), 0);
    /* the slots are free again: more files than slots at once, each removed */
    struct bpcc_atomic_file many[12];
    for (int i = 0; i < 12; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/m%d.bin", dir, i);
        ck_assert_int_eq(bpcc_atomic_open(&many[i], p, 0, &d), BPCC_OK);
    }
    ck_assert_int_eq(count_files(dir, ".tmp"), 12);
    bpcc_atomic_abort(&many[0]); /* its slot goes to no one now */
    bpcc_remove_partial_outputs();
    ck_assert_int_eq(count_files(dir, ".tmp"), 12 - 1 - 7); /* eight slots: the first seven after the aborted one */
    for (int i = 1; i < 12; i++) bpcc_atomic_abort(&many[i]);
    ck_assert_int_eq(count_files(dir, ".tmp"), 0);
    rm_dir(dir);
    free(dir);
}
END_TEST

START_TEST(save_survives_every_allocation_failure)
{
    char *dir = tu_temp_dir();
    char *path = stage(dir, "residual", NULL, NULL);
    size_t len0;
    char *before = tu_read(path, &len0);
    struct bpcc_graph *g;
    ck_assert_int_eq(bpcc_graph_load(FIXTURE("residual.bpcc"), &g, &d), BPCC_OK);
    /* rewrite the attribute so that a successful save changes the file */
    struct bpcc_value v = bpcc_value_int(1);
    ck_assert_int_eq(bpcc_module_set_attr(bpcc_graph_find_module(g, "layer.relu"), "marker", &v, &d),
                     BPCC_OK);
    int failures = 0;
    for (uint64_t n = 1;; n++) {
        bpcc_diag_init(&d);
        bpcc_alloc_fail_at(n, false);
        enum bpcc_status s = bpcc_graph_save(g, path, &d);
        bpcc_alloc_fail_at(0, false);
        if (s == BPCC_OK) break;
        failures++;
        ck_assert_int_eq(s, BPCC_ERR_NOMEM);
        size_t len1;
        char *now = tu_read(path, &len1);
        ck_assert_msg(len0 == len1 && memcmp(before, now, len0) == 0, "allocation %llu changed the file",
                      (unsigned long long)n);
        free(now);
        ck_assert_int_eq(count_files(dir, ".tmp"), 0);
        ck_assert_int_lt(n, 100000);
    }
    ck_assert_int_gt(failures, 3);
    size_t len2;
    char *after = tu_read(path, &len2);
    ck_assert_ptr_nonnull(strstr(after, "marker: 1"));
    free(after);
    free(before);
    bpcc_graph_free(g);
    rm_dir(dir);
    free(dir);
    free(path);
}
END_TEST

START_TEST(a_text_and_a_header_of_many_megabytes_are_saved_as_they_are_made)
{
    /* save writes the text to its file a megabyte at a time: the pieces, joined, are the text
    ** bpcc_graph_print gives, lines whole; the weights' header likewise, its length written over a
    ** placeholder at the end: the model loads back with every tensor */
    struct bpcc_graph *g;
    ck_assert_int_eq(bpcc_graph_new(&g, &d), BPCC_OK);
    struct bpcc_module *m;
    ck_assert_int_eq(bpcc_graph_add_module(g, "consts", "torch.nn.Module", &m, &d), BPCC_OK);
    enum { N_CONSTS = 40000 };
    for (int i = 0; i < N_CONSTS; i++) {
        struct bpcc_tensor *t;
        char name[32];
        snprintf(name, sizeof name, "c%d", i);
        ck_assert_int_eq(bpcc_tensor_new(g, i % 3 ? BPCC_DTYPE_F32 : BPCC_DTYPE_I64, 1, (int64_t[]){1 + i % 2}, &t, &d),
                         BPCC_OK);
        if (i % 3) ((float *)bpcc_tensor_data(t))[0] = (float)i;
        else ((int64_t *)bpcc_tensor_data(t))[0] = -i;
        ck_assert_int_eq(bpcc_module_set_tensor(m, name, BPCC_TENSOR_BUFFER, t, &d), BPCC_OK);
    }
    struct bpcc_node *x;
    ck_assert_int_eq(bpcc_graph_create_node(g, BPCC_NODE_PLACEHOLDER, "x", "x", NULL, NULL, &x, &d), BPCC_OK);
    for (int i = 0; i < 60000; i++) {
        struct bpcc_value args;
        ck_assert_int_eq(bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 2, &args), BPCC_OK);
        args.u.seq.items[0] = bpcc_value_node(x);
        args.u.seq.items[1] = bpcc_value_float(0.125 * i);
        ck_assert_int_eq(bpcc_graph_create_node(g, BPCC_NODE_CALL_FUNCTION, NULL, "operator.mul", &args, NULL, &x, &d),
                         BPCC_OK);
    }
    struct bpcc_value out;
    ck_assert_int_eq(bpcc_value_seq_new(g, BPCC_VAL_TUPLE, 1, &out), BPCC_OK);
    out.u.seq.items[0] = bpcc_value_node(x);
    ck_assert_int_eq(bpcc_graph_create_node(g, BPCC_NODE_OUTPUT, "output", "output", &out, NULL, NULL, &d), BPCC_OK);
    char *text;
    size_t len;
    ck_assert_int_eq(bpcc_graph_print(g, "big.safetensors", &text, &len, &d), BPCC_OK);
    ck_assert_uint_gt(len, 3u << 20);
    /* the same text streamed into a file */
    FILE *fp = tmpfile();
    ck_assert_ptr_nonnull(fp);
    ck_assert_int_eq(bpcc_graph_print_to(g, "big.safetensors", fp, &d), BPCC_OK);
    ck_assert_int_eq(fflush(fp), 0);
    ck_assert_int_eq(ftell(fp), (long)len);
    rewind(fp);
    char *streamed = malloc(len);
    ck_assert_uint_eq(fread(streamed, 1, len, fp), len);
    ck_assert(memcmp(streamed, text, len) == 0);
    free(streamed);
    fclose(fp);
    /* no file: an error, not a silent nothing */
    ck_assert_int_eq(bpcc_graph_print_to(g, "big.safetensors", NULL, &d), BPCC_ERR_INVALID);
    ck_assert_str_eq(tu_msg(&d), "no file to print the model into");
    bpcc_diag_init(&d);
    char *dir = tu_temp_dir(), path[600];
    snprintf(path, sizeof path, "%s/big.bpcc", dir);
    ck_assert_msg(bpcc_graph_save(g, path, &d) == BPCC_OK, "%s", tu_msg(&d));
    size_t flen;
    char *file = tu_read(path, &flen);
    ck_assert_uint_eq(flen, len);
    ck_assert(memcmp(file, text, len) == 0);
    ck_assert_int_eq(count_files(dir, NULL), 2);
    free(file);
    snprintf(path, sizeof path, "%s/big.safetensors", dir);
    char *st = tu_read(path, &flen);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | (unsigned char)st[i];
    ck_assert_uint_gt(hlen, 2u << 20); /* several pieces */
    ck_assert_uint_eq(hlen % 8, 0);
    ck_assert(st[8] == '{' && st[8 + hlen - 1] != 0);
    free(st);
    struct bpcc_graph *back;
    snprintf(path, sizeof path, "%s/big.bpcc", dir);
    ck_assert_msg(bpcc_graph_load(path, &back, &d) == BPCC_OK, "%s", tu_msg(&d));
    struct bpcc_module *mb = bpcc_graph_find_module(back, "consts");
    ck_assert_uint_eq(bpcc_module_n_tensors(mb), N_CONSTS);
    for (int i = 0; i < N_CONSTS; i += 997) {
        char name[32];
        snprintf(name, sizeof name, "c%d", i);
        struct bpcc_tensor *t = bpcc_module_tensor(mb, name);
        ck_assert_ptr_nonnull(t);
        if (i % 3) ck_assert(((float *)bpcc_tensor_data(t))[0] == (float)i);
        else ck_assert(((int64_t *)bpcc_tensor_data(t))[0] == -i);
    }
    bpcc_graph_free(back);
    bpcc_free(text);
    bpcc_graph_free(g);
    rm_dir(dir);
    free(dir);
}
END_TEST

START_TEST(json_of_conv_bn_relu_matches_the_documented_golden)
{
    size_t len;
    char *text = tu_read(FIXTURE("conv_bn_relu.bpcc"), &len);
    struct bpcc_graph *g;
    ck_assert_int_eq(bpcc_graph_parse(text, len, "conv_bn_relu.bpcc", &g, &d), BPCC_OK);
    char *json;
    ck_assert_int_eq(bpcc_graph_to_json(g, 2, &json, &d), BPCC_OK);
    size_t glen;
    char *golden = tu_read(GOLDEN_DIR "/conv_bn_relu.json", &glen);
    ck_assert_ptr_nonnull(golden);
    if (glen && golden[glen - 1] == '\n') golden[glen - 1] = 0;
    ck_assert_str_eq(json, golden);
    free(golden);
    bpcc_free(json);
    bpcc_graph_free(g);
    free(text);
}
END_TEST

/* Every {"node": X} inside v names a node in `names`. */
static void check_refs(json_t *v, json_t *names)
{
    if (json_is_object(v)) {
        json_t *n = json_object_get(v, "node");
        if (n && json_object_size(v) == 1) {
            ck_assert(json_is_string(n));
            ck_assert_msg(json_object_get(names, json_string_value(n)), "dangling ref %s",
                          json_string_value(n));
            return;
        }
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) check_refs(x, names);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) check_refs(x, names);
    }
}

START_TEST(json_follows_the_documented_shape_on_every_fixture)
{
    static const char *const names[] = {"conv_bn_relu", "residual", "cat", "linear_head", "literals"};
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bpcc", FIXTURES_DIR, names[_i]);
    struct bpcc_graph *g;
    ck_assert_int_eq(bpcc_graph_load(path, &g, &d), BPCC_OK);
    char *text;
    ck_assert_int_eq(bpcc_graph_to_json(g, 0, &text, &d), BPCC_OK);
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    ck_assert_msg(root != NULL, "invalid JSON: %s", err.text);
    ck_assert_str_eq(json_string_value(json_object_get(root, "format")), "bpcc-model");
    ck_assert_int_eq(json_integer_value(json_object_get(root, "version")), 1);
    json_t *nodes = json_object_get(root, "nodes"), *mods = json_object_get(root, "modules");
    json_t *summary = json_object_get(root, "summary");
    ck_assert(json_is_array(nodes) && json_is_array(mods) && json_is_object(summary));
    ck_assert_int_eq(json_integer_value(json_object_get(summary, "nodes")),
                     (json_int_t)json_array_size(nodes));
    ck_assert_int_eq(json_array_size(nodes), bpcc_graph_n_nodes(g));
    ck_assert_int_eq(json_integer_value(json_object_get(summary, "modules")),
                     (json_int_t)json_array_size(mods));
    json_t *by_name = json_object();
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n) json_object_set(by_name, json_string_value(json_object_get(n, "name")), n);
    json_array_foreach(nodes, i, n) {
        ck_assert(json_is_string(json_object_get(n, "op")));
        ck_assert(json_is_string(json_object_get(n, "target")));
        ck_assert(json_is_array(json_object_get(n, "args")));
        ck_assert(json_is_object(json_object_get(n, "kwargs")));
        ck_assert(json_is_array(json_object_get(n, "users")));
        ck_assert(json_object_get(n, "meta") != NULL);
        check_refs(json_object_get(n, "args"), by_name);
        check_refs(json_object_get(n, "kwargs"), by_name);
        size_t k;
        json_t *u;
        json_array_foreach(json_object_get(n, "users"), k, u)
            ck_assert(json_object_get(by_name, json_string_value(u)));
    }
    json_t *m;
    uint64_t tensors = 0;
    json_array_foreach(mods, i, m) {
        ck_assert(json_is_string(json_object_get(m, "type")));
        ck_assert(json_is_object(json_object_get(m, "attributes")));
        tensors += json_array_size(json_object_get(m, "tensors"));
    }
    ck_assert_int_eq(json_integer_value(json_object_get(summary, "tensors")), (json_int_t)tensors);
    json_decref(by_name);
    json_decref(root);
    bpcc_free(text);
    bpcc_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model_io");
    TCase *tc = tcase_create("model_io");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, load_binds_tensors_to_their_data);
    tcase_add_test(tc, every_fixture_loads_and_saves_back_identically);
    tcase_add_loop_test(tc, load_errors_point_at_the_declaration, 0, (int)BPCC_ARRAY_LEN(load_bad));
    tcase_add_test(tc, corrupt_weights_report_the_weights_file);
    tcase_add_test(tc, a_text_and_a_header_of_many_megabytes_are_saved_as_they_are_made);
    tcase_add_test(tc, failed_save_leaves_existing_files_untouched);
    tcase_add_test(tc, save_survives_every_allocation_failure);
    tcase_add_test(tc, a_save_waits_for_the_disk_only_when_asked);
    tcase_add_test(tc, a_save_refuses_targets_that_clobber_other_files);
    tcase_add_test(tc, partial_outputs_are_removed_on_request);
    tcase_add_test(tc, json_of_conv_bn_relu_matches_the_documented_golden);
    tcase_add_loop_test(tc, json_follows_the_documented_shape_on_every_fixture, 0, 5);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
