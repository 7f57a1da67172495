/*
** check_config.c — backend pattern configs: one bad file per error class (each states the
** line:col and message it must produce), the built-ins, canonical dumps, extends and
** overrides, diff, anchors, op names, registry order, and out-of-memory.
*/
#include "testutil.h"

#include "config/config.h"


#ifndef CONFIGS_DIR
#error "CONFIGS_DIR must be defined by the build"
#endif

static char *bad_files[128];
static int n_bad;

START_TEST(bad_config_reports_its_line_col)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad/%s", CONFIGS_DIR, bad_files[_i]);
    struct tu_expect x;
    ck_assert_msg(tu_read_expect(path, &x), "%s has no '# expect:' line", path);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config_options o = {.strict = x.strict};
    struct bpcc_config *c = (void *)1;
    ck_assert_msg(bpcc_config_load(path, &o, &c, &d) != BPCC_OK, "%s loaded", path);
    ck_assert_ptr_null(c);
    const struct bpcc_diag_entry *e = tu_first_error(&d);
    ck_assert_msg(e != NULL, "%s: no error", path);
    ck_assert_msg(e->line == x.line && e->col == x.col, "%s: error at %u:%u, want %u:%u (%s)",
                  bad_files[_i], e->line, e->col, x.line, x.col, e->msg);
    ck_assert_msg(strstr(e->msg, x.msg), "%s: '%s' lacks '%s'", bad_files[_i], e->msg, x.msg);
    ck_assert_ptr_nonnull(strstr(e->file, bad_files[_i]));
}
END_TEST

START_TEST(errors_in_an_entry_name_the_entry)
{
    const char *t = "name: t\nconfigs:\n  - pattern: torch.cat\n    observation_type: SHARE\n";
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c;
    ck_assert_int_eq(bpcc_config_load_text(t, strlen(t), "x.yaml", NULL, &c, &d), BPCC_ERR_CONFIG);
    ck_assert(d.entries[0].has_note);
    ck_assert_uint_eq(d.entries[0].note_line, 3);
    ck_assert_uint_eq(d.entries[0].note_col, 5);
    char buf[2048];
    bpcc_diag_format(&d.entries[0], buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "x.yaml:4:23: error: unknown observation type 'SHARE'"));
    ck_assert_ptr_nonnull(strstr(buf, "x.yaml:3:5: note: in configs entry #1 (pattern torch.cat)"));
}
END_TEST

START_TEST(all_problems_of_a_file_are_reported)
{
    const char *t = "name: t\nconfigs:\n"
                    "  - pattern: torch.cat\n    observation_typ: OUTPUT_SHARE_OBSERVER_WITH_INPUT\n"
                    "  - pattern: [torch.nn.Conv2d, torch.nn.ReLU]\n    fuser_method: nope\n"
                    "  - pattern: torch.nn.Linear\n    dtype_configs: [{input_dtype: qint9}]\n";
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c;
    ck_assert_int_eq(bpcc_config_load_text(t, strlen(t), "m.yaml", NULL, &c, &d), BPCC_ERR_CONFIG);
    ck_assert_uint_eq(d.n_errors, 3);
    ck_assert_uint_eq(d.entries[0].line, 4);
    ck_assert_uint_eq(d.entries[1].line, 6);
    ck_assert_uint_eq(d.entries[2].line, 8);
}
END_TEST

START_TEST(unknown_ops_warn_with_a_suggestion)
{
    const char *t = "name: t\nconfigs:\n  - pattern: [torch.nn.Conv2d, torch.nn.functional.rleu]\n";
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c;
    ck_assert_int_eq(bpcc_config_load_text(t, strlen(t), "w.yaml", NULL, &c, &d), BPCC_OK);
    ck_assert_uint_eq(d.n_warnings, 1);
    ck_assert_uint_eq(d.n_errors, 0);
    ck_assert_int_eq(d.entries[0].severity, BPCC_SEV_WARNING);
    ck_assert_ptr_nonnull(strstr(d.entries[0].msg, "did you mean 'torch.nn.functional.relu'"));
    ck_assert_uint_eq(d.entries[0].line, 3);
    ck_assert_uint_eq(d.entries[0].col, 32);
    ck_assert_uint_eq(bpcc_config_n_patterns(c), 1);
    bpcc_config_free(c);
    /* --strict turns it into an error */
    bpcc_diag_init(&d);
    struct bpcc_config_options o = {.strict = true};
    ck_assert_int_eq(bpcc_config_load_text(t, strlen(t), "w.yaml", &o, &c, &d), BPCC_ERR_CONFIG);
}
END_TEST

START_TEST(dump_quotes_what_is_not_a_plain_word)
{
    /* found by fuzzing: a block-scalar name "t\n" was dumped bare and did not read back */
    const char *texts[] = {"name: |\n t\nconfigs:", "name: '- a: b #c'\nconfigs: []\n",
                           "name: \"tab\\there\\x01\"\nconfigs: []\n", "name: 'null'\nconfigs: []\n"};
    const char *names[] = {"t\n", "- a: b #c", "tab\there\x01", "null"};
    for (size_t i = 0; i < BPCC_ARRAY_LEN(texts); i++) {
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        struct bpcc_config *c, *c2;
        ck_assert_msg(bpcc_config_load_text(texts[i], strlen(texts[i]), NULL, NULL, &c, &d) == BPCC_OK, "%s", tu_msg(&d));
        ck_assert_str_eq(bpcc_config_name(c), names[i]);
        char *y, *y2;
        ck_assert_int_eq(bpcc_config_dump_yaml(c, &y, &d), BPCC_OK);
        ck_assert_msg(bpcc_config_load_text(y, strlen(y), NULL, NULL, &c2, &d) == BPCC_OK, "%s: %s", y, tu_msg(&d));
        ck_assert_str_eq(bpcc_config_name(c2), names[i]);
        ck_assert_int_eq(bpcc_config_dump_yaml(c2, &y2, &d), BPCC_OK);
        ck_assert_str_eq(y, y2);
        bpcc_free(y);
        bpcc_free(y2);
        bpcc_config_free(c);
        bpcc_config_free(c2);
    }
}
END_TEST

START_TEST(builtins_load_cleanly_and_dump_canonically)
{
    uint32_t n;
    const char *const *names = bpcc_config_builtin_names(&n);
    ck_assert_uint_eq(n, 7);
    const char *want[] = {"native", "fbgemm", "qnnpack", "x86", "onednn", "tensorrt", "executorch"};
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_str_eq(names[i], want[i]);
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        struct bpcc_config *c;
        ck_assert_int_eq(bpcc_config_load(names[i], NULL, &c, &d), BPCC_OK);
        ck_assert_msg(d.n_warnings == 0, "%s: %s", names[i], tu_msg(&d));
        ck_assert_str_eq(bpcc_config_name(c), names[i]);
        ck_assert_uint_gt(bpcc_config_n_patterns(c), 20);
        char *y1, *y2;
        ck_assert_int_eq(bpcc_config_dump_yaml(c, &y1, &d), BPCC_OK);
        struct bpcc_config *c2;
        ck_assert_int_eq(bpcc_config_load_text(y1, strlen(y1), "dump.yaml", NULL, &c2, &d), BPCC_OK);
        ck_assert_int_eq(bpcc_config_dump_yaml(c2, &y2, &d), BPCC_OK);
        ck_assert_str_eq(y1, y2);
        /* the shipped file is itself canonical: its text after the header comment */
        char path[512];
        snprintf(path, sizeof path, "%s/../../patterns/%s.yaml", CONFIGS_DIR, names[i]);
        size_t len;
        char *file = tu_read(path, &len);
        ck_assert_ptr_nonnull(file);
        const char *body = strstr(file, "\nname: ");
        ck_assert_ptr_nonnull(body);
        ck_assert_str_eq(body + 1, y1);
        char *j1, *j2;
        ck_assert_int_eq(bpcc_config_dump_json(c, 0, &j1, &d), BPCC_OK);
        ck_assert_int_eq(bpcc_config_dump_json(c2, 0, &j2, &d), BPCC_OK);
        ck_assert_str_eq(j1, j2);
        uint32_t changes;
        char *diff;
        ck_assert_int_eq(bpcc_config_diff(c, c2, &diff, &changes, &d), BPCC_OK);
        ck_assert_uint_eq(changes, 0);
        ck_assert_str_eq(diff, "no differences\n");
        bpcc_free(diff);
        free(file);
        bpcc_free(y1);
        bpcc_free(y2);
        bpcc_free(j1);
        bpcc_free(j2);
        bpcc_config_free(c);
        bpcc_config_free(c2);
    }
}
END_TEST

START_TEST(precompiled_builtins_equal_their_yaml)
{
    uint32_t n;
    const struct builtin_config *b = bpcc_builtin_configs(&n);
    uint32_t n_img;
    bpcc_builtin_images(&n_img);
    ck_assert_uint_eq(n_img, n); /* the final library carries an image of each built-in */
    for (uint32_t i = 0; i < n; i++) {
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        struct bpcc_config *from_image, *from_yaml;
        ck_assert_int_eq(bpcc_config_load(b[i].name, NULL, &from_image, &d), BPCC_OK);
        ck_assert_int_eq(bpcc_config_load_text(b[i].text, b[i].len, b[i].file, NULL, &from_yaml, &d),
                         BPCC_OK);
        char *a, *y;
        ck_assert_int_eq(bpcc_config_dump_json(from_image, 0, &a, &d), BPCC_OK);
        ck_assert_int_eq(bpcc_config_dump_json(from_yaml, 0, &y, &d), BPCC_OK);
        ck_assert_str_eq(a, y);
        bpcc_free(a);
        bpcc_free(y);
        ck_assert_int_eq(bpcc_config_dump_yaml(from_image, &a, &d), BPCC_OK);
        ck_assert_int_eq(bpcc_config_dump_yaml(from_yaml, &y, &d), BPCC_OK);
        ck_assert_str_eq(a, y);
        bpcc_free(a);
        bpcc_free(y);
        for (uint32_t k = 0; k < from_yaml->n_entries; k++) {
            ck_assert_str_eq(from_image->entries[k]->file, from_yaml->entries[k]->file);
            ck_assert_uint_eq(from_image->entries[k]->line, from_yaml->entries[k]->line);
            ck_assert_uint_eq(from_image->sorted[k], from_yaml->sorted[k]);
        }
        bpcc_config_free(from_image);
        bpcc_config_free(from_yaml);
    }
}
END_TEST

START_TEST(extends_overrides_in_place_and_appends)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c, *base;
    ck_assert_int_eq(bpcc_config_load(CONFIGS_DIR "/good/derived.yaml", NULL, &c, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_config_load(CONFIGS_DIR "/good/base.yaml", NULL, &base, &d), BPCC_OK);
    ck_assert_uint_eq(d.n_warnings, 0);
    ck_assert_str_eq(bpcc_config_name(c), "my_npu");
    ck_assert_uint_eq(bpcc_config_n_patterns(c), 5);
    /* torch.cat keeps base's position (second) with derived's value */
    ck_assert_str_eq(c->entries[1]->pattern->op, "torch.cat");
    ck_assert_int_eq(c->entries[1]->obs, OBS_DIFFERENT);
    ck_assert_ptr_nonnull(strstr(c->entries[1]->file, "derived.yaml"));
    ck_assert_uint_eq(c->entries[1]->line, 5);
    ck_assert_str_eq(c->entries[3]->pattern->op, "torch.nn.Hardswish");
    char *diff;
    uint32_t changes;
    ck_assert_int_eq(bpcc_config_diff(base, c, &diff, &changes, &d), BPCC_OK);
    ck_assert_uint_eq(changes, 3);
    ck_assert_ptr_nonnull(strstr(diff, "~ torch.cat: observation_type, dtype_configs"));
    ck_assert_ptr_nonnull(strstr(diff, "+ torch.nn.Hardswish"));
    ck_assert_ptr_nonnull(strstr(diff, "2 added, 0 removed, 1 changed"));
    bpcc_free(diff);
    ck_assert_int_eq(bpcc_config_diff(c, base, &diff, &changes, &d), BPCC_OK);
    ck_assert_ptr_nonnull(strstr(diff, "- torch.nn.Hardswish"));
    bpcc_free(diff);
    bpcc_config_free(c);
    bpcc_config_free(base);
}
END_TEST

START_TEST(extends_a_builtin_and_overrides_it)
{
    const char *t = "name: vendor\nextends: fbgemm\nconfigs:\n"
                    "  - pattern: torch.cat\n    observation_type: OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT\n"
                    "  - pattern: torch.nn.GELU\n";
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c, *f;
    ck_assert_int_eq(bpcc_config_load_text(t, strlen(t), "v.yaml", NULL, &c, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_config_load("fbgemm", NULL, &f, &d), BPCC_OK);
    ck_assert_uint_eq(bpcc_config_n_patterns(c), bpcc_config_n_patterns(f) + 1);
    for (uint32_t i = 0; i < f->n_entries; i++)
        ck_assert_str_eq(c->entries[i]->pattern->op, f->entries[i]->pattern->op);
    ck_assert_str_eq(bpcc_config_name(c), "vendor");
    bpcc_config_free(c);
    bpcc_config_free(f);
}
END_TEST

START_TEST(anchors_merge_keys_and_aliases_resolve)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c;
    ck_assert_int_eq(bpcc_config_load(CONFIGS_DIR "/good/anchors.yaml", NULL, &c, &d), BPCC_OK);
    ck_assert_msg(d.n_warnings == 0, "%s", tu_msg(&d));
    ck_assert_uint_eq(c->entries[1]->n_dtype_configs, 1);
    ck_assert_int_eq(c->entries[1]->dtype_configs[0].weight.dtype, BPCC_DTYPE_QINT8);
    ck_assert(c->entries[1]->dtype_configs[0].weight.has_qmin);
    ck_assert(c->entries[1]->dtype_configs[0].weight.qmin == -127);
    /* merge key: the anchored mapping plus is_dynamic */
    ck_assert(c->entries[2]->dtype_configs[0].is_dynamic);
    ck_assert_int_eq(c->entries[2]->dtype_configs[0].input.dtype, BPCC_DTYPE_QINT8);
    ck_assert(c->entries[2]->dtype_configs[0].input.smin == 1.0 / 4096);
    /* aliases of an op resolve to its canonical name */
    ck_assert_str_eq(c->entries[3]->pattern->op, "torch.nn.functional.conv2d");
    ck_assert(c->entries[4]->fixed.set);
    ck_assert(c->entries[4]->fixed.scale == 1.0 / 256);
    ck_assert(c->entries[5]->dtype_configs[0].output.has_scale);
    bpcc_config_free(c);
}
END_TEST

START_TEST(registry_orders_and_indexes_like_pytorch)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_config *c;
    ck_assert_int_eq(bpcc_config_load("native", NULL, &c, &d), BPCC_OK);
    /* _sorted_patterns_dict: tuple patterns first by leaf count descending, stable; singles last */
    int prev = -1000;
    for (uint32_t i = 0; i < c->n_entries; i++) {
        const struct pattern_entry *e = c->entries[c->sorted[i]];
        int key = e->pattern->n_args ? -(int)e->n_leaves : 1;
        ck_assert_int_ge(key, prev);
        if (i && key == prev) ck_assert_uint_gt(c->sorted[i], c->sorted[i - 1]);
        prev = key;
    }
    uint32_t n;
    const uint32_t *cand = bpcc_registry_candidates(c, "torch.nn.ReLU", &n);
    ck_assert_uint_ge(n, 4);
    ck_assert_uint_eq(c->entries[cand[0]]->n_leaves, 3); /* conv-bn-relu first */
    bool saw_single = false;
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_str_eq(c->entries[cand[i]]->pattern->op, "torch.nn.ReLU");
        if (!c->entries[cand[i]]->pattern->n_args) saw_single = true;
        else ck_assert(!saw_single);
    }
    ck_assert(saw_single);
    ck_assert_ptr_null(bpcc_registry_candidates(c, "not.an.op", &n));
    ck_assert_uint_eq(n, 0);
    bpcc_config_free(c);
}
END_TEST

START_TEST(abbreviations_and_aliases_canonicalize)
{
    char k;
    ck_assert_str_eq(bpcc_vocab_canonical("nn.Conv2d", &k), "torch.nn.Conv2d");
    ck_assert_int_eq(k, 'm');
    ck_assert_str_eq(bpcc_vocab_canonical("F.relu", &k), "torch.nn.functional.relu");
    ck_assert_int_eq(k, 'f');
    ck_assert_str_eq(bpcc_vocab_canonical("torch.conv2d", NULL), "torch.nn.functional.conv2d");
    ck_assert_str_eq(bpcc_vocab_canonical("torch.nn.intrinsic.ConvReLU2d", NULL),
                     "torch.ao.nn.intrinsic.ConvReLU2d");
    ck_assert_str_eq(bpcc_vocab_canonical("nnqr.Linear", NULL), "torch.ao.nn.quantized.reference.Linear");
    ck_assert_str_eq(bpcc_vocab_canonical("view", &k), "view");
    ck_assert_int_eq(k, 't');
    ck_assert_ptr_null(bpcc_vocab_canonical("torch.nn.Conv2D", NULL));
    ck_assert_str_eq(bpcc_vocab_suggest("torch.nn.Conv2D"), "torch.nn.Conv2d");
    ck_assert_uint_eq(bpcc_edit_distance("kitten", "sitting", 5), 3);
    ck_assert_uint_eq(bpcc_edit_distance("abc", "abcdefgh", 2), 3);
    ck_assert_uint_eq(bpcc_edit_distance("rleu", "relu", 3), 1); /* a transposition is one edit */
}
END_TEST

static enum bpcc_status load_builtin(void *arg, struct bpcc_diag *d)
{
    struct bpcc_config *c;
    enum bpcc_status s = bpcc_config_load(arg, NULL, &c, d);
    if (!s) {
        char *y;
        s = bpcc_config_dump_yaml(c, &y, d);
        if (!s) bpcc_free(y);
        if (!s) s = bpcc_config_dump_json(c, 2, &y, d);
        if (!s) bpcc_free(y);
        bpcc_config_free(c);
    }
    return s;
}

START_TEST(loading_survives_every_allocation_failure)
{
    const char *specs[] = {"executorch", CONFIGS_DIR "/good/derived.yaml", CONFIGS_DIR "/good/anchors.yaml"};
    for (size_t k = 0; k < BPCC_ARRAY_LEN(specs); k++) {
        ck_assert_int_gt(tu_oom_loop(specs[k], load_builtin, (void *)(uintptr_t)specs[k]), 10);
    }
}
END_TEST

int main(void)
{
    n_bad = tu_list_yaml(CONFIGS_DIR "/bad", bad_files, 128);
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, bad_config_reports_its_line_col, 0, n_bad);
    tcase_add_test(tc, errors_in_an_entry_name_the_entry);
    tcase_add_test(tc, all_problems_of_a_file_are_reported);
    tcase_add_test(tc, unknown_ops_warn_with_a_suggestion);
    tcase_add_test(tc, dump_quotes_what_is_not_a_plain_word);
    tcase_add_test(tc, builtins_load_cleanly_and_dump_canonically);
    tcase_add_test(tc, precompiled_builtins_equal_their_yaml);
    tcase_add_test(tc, extends_overrides_in_place_and_appends);
    tcase_add_test(tc, extends_a_builtin_and_overrides_it);
    tcase_add_test(tc, anchors_merge_keys_and_aliases_resolve);
    tcase_add_test(tc, registry_orders_and_indexes_like_pytorch);
    tcase_add_test(tc, abbreviations_and_aliases_canonicalize);
    tcase_add_test(tc, loading_survives_every_allocation_failure);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    for (int i = 0; i < n_bad; i++) free(bad_files[i]);
    return rc;
}
