/*
** check_qconfig.c — qconfig mappings: one bad file per error class (with its line:col), the
** effective observer settings (calculate_qmin_qmax), every rule kind, the built-in mappings,
** and out-of-memory.
*/
#include "testutil.h"

#include "qconfig/qconfig.h"

#ifndef QCONFIGS_DIR
#error "QCONFIGS_DIR must be defined by the build"
#endif

static char *bad_files[64];
static int n_bad;

START_TEST(bad_qconfig_reports_its_line_col)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad/%s", QCONFIGS_DIR, bad_files[_i]);
    struct tu_expect x;
    ck_assert_msg(tu_read_expect(path, &x), "%s has no '# expect:' line", path);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_qconfig_mapping *m = (void *)1;
    ck_assert_msg(bpcc_qconfig_load(path, NULL, &m, &d) != BPCC_OK, "%s loaded", path);
    ck_assert_ptr_null(m);
    const struct bpcc_diag_entry *e = tu_first_error(&d);
    ck_assert_msg(e != NULL, "%s: no error", path);
    ck_assert_msg(e->line == x.line && e->col == x.col, "%s: error at %u:%u, want %u:%u (%s)",
                  bad_files[_i], e->line, e->col, x.line, x.col, e->msg);
    ck_assert_msg(strstr(e->msg, x.msg), "%s: '%s' lacks '%s'", bad_files[_i], e->msg, x.msg);
}
END_TEST

START_TEST(every_rule_kind_and_observer_class_loads)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_qconfig_mapping *m;
    ck_assert_msg(bpcc_qconfig_load(QCONFIGS_DIR "/good/custom.yaml", NULL, &m, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_uint_eq(d.n_warnings, 0);
    ck_assert(m->has_global);
    /* customized range [0, 127] without reduce_range */
    ck_assert_int_eq(m->global->activation.quant_min, 0);
    ck_assert_int_eq(m->global->activation.quant_max, 127);
    ck_assert_int_eq(m->global->weight.qscheme, QS_PER_CHANNEL_SYMMETRIC);
    ck_assert_uint_eq(m->n_rules[QR_OBJECT_TYPE], 4);
    const struct qc_rule *lin = &m->rules[QR_OBJECT_TYPE][0];
    ck_assert_str_eq(lin->key, "torch.nn.Linear");
    ck_assert_int_eq(lin->qc->activation.cls, OC_HISTOGRAM);
    ck_assert_int_eq(lin->qc->activation.bins, 1024);
    ck_assert_int_eq(lin->qc->activation.quant_max, 127); /* default quint8 range, reduced */
    ck_assert_str_eq(m->rules[QR_OBJECT_TYPE][1].key, "torch.nn.functional.linear"); /* F. expanded */
    ck_assert_ptr_null(m->rules[QR_OBJECT_TYPE][1].qc);                               /* null: float */
    ck_assert(m->rules[QR_OBJECT_TYPE][2].qc->activation.scale == 1.0 / 256);
    ck_assert_int_eq(m->rules[QR_OBJECT_TYPE][3].qc->activation.compute_dtype, BPCC_DTYPE_QUINT8);
    const struct qc_rule *re = &m->rules[QR_MODULE_NAME_REGEX][0];
    ck_assert_int_eq(re->qc->activation.quant_max, 127);
    ck_assert(re->qc->activation.eps == 0.000244140625f);
    /* customized [-127, 127], not reduced */
    ck_assert_int_eq(re->qc->weight.quant_min, -127);
    ck_assert_int_eq(re->qc->weight.ch_axis, 1);
    ck_assert_uint_eq(m->n_rules[QR_MODULE_NAME], 2);
    ck_assert_str_eq(m->rules[QR_MODULE_NAME][1].key, "");
    /* the alias *int8 repeats the global qconfig */
    ck_assert_int_eq(m->rules[QR_MODULE_NAME][1].qc->activation.cls, OC_MINMAX);
    ck_assert_int_eq(m->rules[QR_MODULE_NAME][1].qc->activation.quant_max, 127);
    const struct qc_rule *ord = &m->rules[QR_MODULE_NAME_OBJECT_TYPE_ORDER][0];
    ck_assert_str_eq(ord->type, "torch.add");
    ck_assert_int_eq(ord->index, 0);
    ck_assert_int_eq(ord->qc->activation.cls, OC_REUSE_INPUT);
    char *json;
    ck_assert_int_eq(bpcc_qconfig_dump_json(m, 0, &json, &d), BPCC_OK);
    ck_assert_ptr_nonnull(strstr(json, "\"observer\":\"FixedQParamsObserver\""));
    bpcc_free(json);
    bpcc_qconfig_free(m);
}
END_TEST

static const struct observer_spec *global_act(const char *text, struct bpcc_qconfig_mapping **m)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_msg(bpcc_qconfig_load_text(text, strlen(text), "t.yaml", NULL, m, &d) == BPCC_OK, "%s", tu_msg(&d));
    return &(*m)->global->activation;
}

START_TEST(quant_range_follows_calculate_qmin_qmax)
{
    struct { const char *act; int64_t lo, hi; } cases[] = {
        {"{observer: MinMaxObserver}", 0, 255},
        {"{observer: MinMaxObserver, reduce_range: true}", 0, 127},
        {"{observer: MinMaxObserver, dtype: qint8}", -128, 127},
        {"{observer: MinMaxObserver, dtype: qint8, reduce_range: true}", -64, 63},
        {"{observer: MinMaxObserver, dtype: qint32}", INT32_MIN, INT32_MAX},
        {"{observer: MinMaxObserver, dtype: qint8, quant_min: -127, quant_max: 127, reduce_range: true}", -64, 63},
        {"{observer: MinMaxObserver, quant_min: 0, quant_max: 15}", 0, 15},
        {"{observer: PerChannelMinMaxObserver, dtype: quint4x2, qscheme: per_channel_affine_float_qparams}", 0, 15},
    };
    for (size_t i = 0; i < BPCC_ARRAY_LEN(cases); i++) {
        char text[512];
        snprintf(text, sizeof text, "global: {activation: %s, weight: {observer: MinMaxObserver, dtype: qint8}}\n",
                 cases[i].act);
        struct bpcc_qconfig_mapping *m;
        const struct observer_spec *o = global_act(text, &m);
        ck_assert_msg(o->quant_min == cases[i].lo && o->quant_max == cases[i].hi, "%s: [%lld, %lld]",
                      cases[i].act, (long long)o->quant_min, (long long)o->quant_max);
        bpcc_qconfig_free(m);
    }
}
END_TEST

START_TEST(builtin_mappings_load)
{
    uint32_t n;
    const char *const *names = bpcc_qconfig_builtin_names(&n);
    ck_assert_uint_eq(n, 4);
    for (uint32_t i = 0; i < n; i++) {
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        struct bpcc_qconfig_mapping *m;
        ck_assert_int_eq(bpcc_qconfig_load(names[i], NULL, &m, &d), BPCC_OK);
        ck_assert_uint_eq(d.n_warnings, 0);
        ck_assert(m->has_global && m->global);
        ck_assert_int_eq(m->global->activation.cls, OC_HISTOGRAM);
        /* fbgemm and x86 reduce the activation range, qnnpack and onednn do not */
        bool reduced = !strcmp(names[i], "fbgemm") || !strcmp(names[i], "x86");
        ck_assert_int_eq(m->global->activation.quant_max, reduced ? 127 : 255);
        bpcc_qconfig_free(m);
    }
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_qconfig_mapping *m;
    ck_assert_int_eq(bpcc_qconfig_load("fbgemmm", NULL, &m, &d), BPCC_ERR_IO);
    ck_assert(d.entries[0].has_note);
    ck_assert_ptr_nonnull(strstr(d.entries[0].note, "not a built-in qconfig mapping"));
}
END_TEST

START_TEST(loading_survives_every_allocation_failure)
{
    int failures = 0;
    for (uint64_t k = 1;; k++) {
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        struct bpcc_qconfig_mapping *m = NULL;
        bpcc_alloc_fail_at(k, false);
        enum bpcc_status s = bpcc_qconfig_load(QCONFIGS_DIR "/good/custom.yaml", NULL, &m, &d);
        char *j = NULL;
        if (!s) s = bpcc_qconfig_dump_json(m, 2, &j, &d);
        bpcc_alloc_fail_at(0, false);
        bpcc_free(j);
        if (m) bpcc_qconfig_free(m);
        if (s == BPCC_OK) break;
        ck_assert_msg(s == BPCC_ERR_NOMEM, "allocation %llu: %s (%s)", (unsigned long long)k, bpcc_status_name(s), tu_msg(&d));
        failures++;
        ck_assert_int_lt(k, 100000);
    }
    ck_assert_int_gt(failures, 10);
}
END_TEST

int main(void)
{
    n_bad = tu_list_yaml(QCONFIGS_DIR "/bad", bad_files, 64);
    Suite *s = suite_create("qconfig");
    TCase *tc = tcase_create("qconfig");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, bad_qconfig_reports_its_line_col, 0, n_bad);
    tcase_add_test(tc, every_rule_kind_and_observer_class_loads);
    tcase_add_test(tc, quant_range_follows_calculate_qmin_qmax);
    tcase_add_test(tc, builtin_mappings_load);
    tcase_add_test(tc, loading_survives_every_allocation_failure);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    for (int i = 0; i < n_bad; i++) free(bad_files[i]);
    return rc;
}
