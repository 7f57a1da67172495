/*
** check_qconfig.c — qconfig mappings: one bad file per error class (with its line:col), the
** effective observer settings (calculate_qmin_qmax), every rule kind, the built-in mappings,
** and out-of-memory.
*/
#include "testutil.h"

#include "pass/dtype_check.h"
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
    ck_assert_uint_eq(n, 8);
    for (uint32_t i = 0; i < n; i++) {
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        struct bpcc_qconfig_mapping *m;
        ck_assert_int_eq(bpcc_qconfig_load(names[i], NULL, &m, &d), BPCC_OK);
        ck_assert_uint_eq(d.n_warnings, 0);
        ck_assert(m->has_global && m->global);
        /* the post-training mappings observe activations with histograms; the QAT ones (<name>_qat)
        ** fake-quantize them with the fused moving-average fake quantize */
        bool qat = strstr(names[i], "_qat") != NULL;
        ck_assert_int_eq(m->global->activation.cls, qat ? OC_MOVING_AVERAGE_MINMAX : OC_HISTOGRAM);
        ck_assert_int_eq(m->global->activation.fake_quantize, qat ? FQ_FUSED_MOVING_AVG : FQ_NONE);
        ck_assert_int_eq(m->global->weight.fake_quantize, qat ? FQ_FUSED_MOVING_AVG : FQ_NONE);
        /* fbgemm and x86 reduce the activation range, qnnpack and onednn do not */
        bool reduced = !strncmp(names[i], "fbgemm", 6) || !strncmp(names[i], "x86", 3);
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

static enum bpcc_status load_and_dump(void *path, struct bpcc_diag *d)
{
    struct bpcc_qconfig_mapping *m;
    enum bpcc_status s = bpcc_qconfig_load(path, NULL, &m, d);
    if (s) return s;
    char *j;
    s = bpcc_qconfig_dump_json(m, 2, &j, d);
    if (!s) bpcc_free(j);
    bpcc_qconfig_free(m);
    return s;
}

START_TEST(loading_survives_every_allocation_failure)
{
    ck_assert_int_gt(tu_oom_loop("load", load_and_dump, QCONFIGS_DIR "/good/custom.yaml"), 10);
}
END_TEST

/* {==================== per-node assignment (generate_qconfig_map) ==================== */

/* A graph in the shape tracing gives: modules, functions in scopes, a method, a get_attr. */
static const char assign_model[] =
    "bpcc-model 1\n"
    "\n"
    "module conv1 : torch.nn.Conv2d\n"
    "module blocks.0.conv : torch.nn.Conv2d\n"
    "module blocks.0.relu : torch.nn.ReLU\n"
    "module blocks.1.conv : torch.nn.Conv2d\n"
    "module head.fc : torch.nn.Linear\n"
    "module fused : torch.ao.nn.intrinsic.ConvReLU2d\n"
    "module fused.0 : torch.nn.Conv2d\n"
    "module fused.1 : torch.nn.ReLU\n"
    "\n"
    "graph\n"
    "  %x = placeholder x ()\n"
    "  %conv1 = call_module conv1 (%x,)\n"
    "  %b0 = call_module blocks.0.conv (%conv1,)\n"
    "  %add = call_function operator.add (%b0, %conv1) @ blocks.0 : my.Block\n"
    "  %add_1 = call_function operator.add (%add, %b0) @ blocks.0 : my.Block\n"
    "  %relu = call_module blocks.0.relu (%add_1,)\n"
    "  %b1 = call_module blocks.1.conv (%relu,)\n"
    "  %add_2 = call_function operator.add (%b1, %relu) @ blocks.1 : my.Block\n"
    "  %mean = call_method mean (%add_2,) @ blocks.1 : my.Block\n"
    "  %sig = call_function torch.sigmoid (%mean,)\n"
    "  %w = get_attr blocks.1.conv.weight ()\n"
    "  %fc = call_module head.fc (%sig,)\n"
    "  %f = call_module fused (%fc,)\n"
    "  %output = output output (%f,)\n";

#define QC_A "{activation: {observer: MinMaxObserver}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}"
#define QC_B "{activation: {observer: HistogramObserver}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}"

struct assigned {
    struct bpcc_graph *g;
    struct bpcc_qconfig_mapping *m;
    struct bpcc_qconfig_assignment *a;
};

static enum bpcc_status assign_text(const char *mapping, struct assigned *r, struct bpcc_diag *d)
{
    memset(r, 0, sizeof *r);
    enum bpcc_status s = bpcc_graph_parse(assign_model, strlen(assign_model), "m.bpcc", &r->g, d);
    if (!s) s = bpcc_qconfig_load_text(mapping, strlen(mapping), "q.yaml", NULL, &r->m, d);
    if (!s) s = bpcc_qconfig_assign(r->g, r->m, &r->a, d);
    return s;
}

static void assigned_free(struct assigned *r)
{
    bpcc_qconfig_assignment_free(r->a);
    bpcc_qconfig_free(r->m);
    bpcc_graph_free(r->g);
}

/* "origin:line" of node `name`, with '+' for quantized and '-' for float: "+global:0". */
static const char *how(const struct assigned *r, const char *name)
{
    static char buf[8][96];
    static int k;
    char *b = buf[k++ % 8];
    for (uint32_t i = 0; i < bpcc_qconfig_assignment_count(r->a); i++) {
        if (strcmp(bpcc_node_name(bpcc_qconfig_assignment_node(r->a, i)), name)) continue;
        uint32_t line;
        enum bpcc_qc_origin o = bpcc_qconfig_assignment_origin(r->a, i, &line);
        snprintf(b, 96, "%c%s:%u", bpcc_qconfig_assignment_quantized(r->a, i) ? '+' : '-', bpcc_qc_origin_name(o), line);
        return b;
    }
    return "missing";
}

#define ASSIGN(r, yaml)                                                              \
    do {                                                                             \
        struct bpcc_diag d_;                                                         \
        bpcc_diag_init(&d_);                                                         \
        ck_assert_msg(assign_text(yaml, r, &d_) == BPCC_OK, "%s", tu_msg(&d_));     \
    } while (0)

START_TEST(global_applies_where_no_rule_does_and_no_global_keeps_float)
{
    struct assigned r;
    ASSIGN(&r, "global: " QC_A "\n");
    ck_assert_str_eq(how(&r, "x"), "-not_applicable:0");
    ck_assert_str_eq(how(&r, "output"), "-not_applicable:0");
    ck_assert_str_eq(how(&r, "conv1"), "+global:0");
    ck_assert_str_eq(how(&r, "mean"), "+global:0");
    ck_assert_str_eq(how(&r, "w"), "+global:0");
    assigned_free(&r);
    ASSIGN(&r, "object_type:\n  - {type: torch.sigmoid, qconfig: " QC_A "}\n");
    ck_assert_str_eq(how(&r, "conv1"), "-default:0");
    ck_assert_str_eq(how(&r, "sig"), "+object_type:2");
    assigned_free(&r);
    ASSIGN(&r, "global: null\n");
    ck_assert_str_eq(how(&r, "conv1"), "-global:0");
    assigned_free(&r);
}
END_TEST

START_TEST(object_type_matches_module_classes_functions_and_methods)
{
    struct assigned r;
    ASSIGN(&r, "global: " QC_A "\n"
               "object_type:\n"
               "  - {type: torch.nn.Conv2d, qconfig: " QC_B "}\n"
               "  - {type: operator.add, qconfig: null}\n"
               "  - {type: mean, qconfig: null}\n"
               "  - {type: torch.nn.ReLU, qconfig: " QC_B "}\n");
    ck_assert_str_eq(how(&r, "conv1"), "+object_type:3");
    ck_assert_str_eq(how(&r, "b1"), "+object_type:3");
    ck_assert_str_eq(how(&r, "add"), "-object_type:4");
    ck_assert_str_eq(how(&r, "mean"), "-object_type:5");
    ck_assert_str_eq(how(&r, "fc"), "+global:0");
    ck_assert_str_eq(how(&r, "relu"), "+object_type:6");
    ck_assert_str_eq(how(&r, "f"), "+fused_object_type:3");
    assigned_free(&r);
}
END_TEST

START_TEST(scope_type_overrides_a_function_and_method_rule)
{
    /* maybe_adjust_qconfig_for_module_type_or_name(scope type, scope path, function qconfig) */
    struct assigned r;
    ASSIGN(&r, "global: " QC_A "\n"
               "object_type:\n"
               "  - {type: mean, qconfig: null}\n"
               "  - {type: my.Block, qconfig: " QC_B "}\n");
    ck_assert_str_eq(how(&r, "mean"), "+object_type:4");
    ck_assert_str_eq(how(&r, "add"), "+object_type:4");
    ck_assert_str_eq(how(&r, "sig"), "+global:0"); /* root scope */
    assigned_free(&r);
}
END_TEST

START_TEST(module_name_covers_submodules_and_functions_in_their_scope)
{
    struct assigned r;
    ASSIGN(&r, "global: " QC_A "\n"
               "module_name:\n"
               "  - {name: blocks, qconfig: null}\n"
               "  - {name: blocks.1.conv, qconfig: " QC_B "}\n"
               "  - {name: block, qconfig: " QC_B "}\n");
    ck_assert_str_eq(how(&r, "b0"), "-module_name:3");
    ck_assert_str_eq(how(&r, "add"), "-module_name:3");
    ck_assert_str_eq(how(&r, "mean"), "-module_name:3");
    ck_assert_str_eq(how(&r, "b1"), "+module_name:4");   /* the nearest listed name */
    ck_assert_str_eq(how(&r, "w"), "+module_name:4");    /* get_attr: its owner module */
    ck_assert_str_eq(how(&r, "conv1"), "+global:0");     /* 'block' is not a prefix by name parts */
    assigned_free(&r);
}
END_TEST

START_TEST(module_name_regex_is_anchored_at_the_start_and_first_match_wins)
{
    struct assigned r;
    ASSIGN(&r, "global: " QC_A "\n"
               "module_name_regex:\n"
               "  - {regex: 'blocks\\.[0-9]\\.c', qconfig: null}\n"
               "  - {regex: blocks, qconfig: " QC_B "}\n"
               "  - {regex: conv, qconfig: null}\n");
    ck_assert_str_eq(how(&r, "b0"), "-module_name_regex:3");
    ck_assert_str_eq(how(&r, "relu"), "+module_name_regex:4");
    ck_assert_str_eq(how(&r, "add"), "+module_name_regex:4");
    ck_assert_str_eq(how(&r, "conv1"), "-module_name_regex:5");
    ck_assert_str_eq(how(&r, "fc"), "+global:0");          /* head.fc: 'conv' matches nowhere at the start */
    assigned_free(&r);
}
END_TEST

START_TEST(precedence_is_order_over_name_over_regex_over_type_over_global)
{
    struct assigned r;
    ASSIGN(&r, "global: " QC_A "\n"
               "object_type:\n  - {type: torch.nn.Conv2d, qconfig: null}\n"
               "module_name_regex:\n  - {regex: blocks, qconfig: " QC_B "}\n"
               "module_name:\n  - {name: blocks.0, qconfig: null}\n"
               "module_name_object_type_order:\n  - {name: blocks.0, type: torch.nn.Conv2d, index: 0, qconfig: " QC_B "}\n");
    ck_assert_str_eq(how(&r, "conv1"), "-object_type:3");
    ck_assert_str_eq(how(&r, "b1"), "+module_name_regex:5");
    ck_assert_str_eq(how(&r, "relu"), "-module_name:7");
    ck_assert_str_eq(how(&r, "b0"), "+module_name_object_type_order:9");
    assigned_free(&r);
}
END_TEST

START_TEST(object_type_order_counts_calls_per_module_in_graph_order)
{
    struct assigned r;
    ASSIGN(&r, "global: " QC_A "\n"
               "module_name_object_type_order:\n"
               "  - {name: blocks.0, type: operator.add, index: 1, qconfig: null}\n"
               "  - {name: blocks.1, type: operator.add, index: 1, qconfig: null}\n"
               "  - {name: '', type: torch.nn.Conv2d, index: 0, qconfig: null}\n");
    ck_assert_str_eq(how(&r, "add"), "+global:0");
    ck_assert_str_eq(how(&r, "add_1"), "-module_name_object_type_order:3");
    ck_assert_str_eq(how(&r, "add_2"), "+global:0"); /* the first add in blocks.1 */
    ck_assert_str_eq(how(&r, "conv1"), "-module_name_object_type_order:5"); /* counted in its parent */
    ck_assert_str_eq(how(&r, "b0"), "+global:0");
    /* a fused module is counted as its first part (the pattern root it was traced as) */
    ck_assert_str_eq(how(&r, "f"), "+global:0");
    assigned_free(&r);
}
END_TEST

START_TEST(a_repeated_key_takes_the_last_entry_as_the_python_dicts_do)
{
    struct assigned r;
    ASSIGN(&r, "global: " QC_A "\n"
               "object_type:\n  - {type: torch.sigmoid, qconfig: null}\n  - {type: torch.sigmoid, qconfig: " QC_B "}\n"
               "module_name_regex:\n  - {regex: blocks, qconfig: null}\n  - {regex: conv, qconfig: null}\n"
               "  - {regex: blocks, qconfig: " QC_B "}\n"
               "module_name:\n  - {name: head, qconfig: " QC_B "}\n  - {name: head, qconfig: null}\n"
               "module_name_object_type_order:\n  - {name: blocks.1, type: operator.add, index: 0, qconfig: null}\n"
               "  - {name: blocks.1, type: operator.add, index: 0, qconfig: " QC_B "}\n");
    ck_assert_str_eq(how(&r, "sig"), "+object_type:4");
    ck_assert_str_eq(how(&r, "b0"), "+module_name_regex:8");   /* first position, last value */
    ck_assert_str_eq(how(&r, "fc"), "-module_name:11");
    ck_assert_str_eq(how(&r, "add_2"), "+module_name_object_type_order:14");
    assigned_free(&r);
}
END_TEST

START_TEST(fused_module_takes_the_object_type_of_its_parts)
{
    struct assigned r;
    ASSIGN(&r, "global: " QC_A "\n"
               "object_type:\n"
               "  - {type: torch.nn.Conv2d, qconfig: " QC_B "}\n"
               "  - {type: torch.nn.ReLU, qconfig: " QC_B "}\n");
    ck_assert_str_eq(how(&r, "f"), "+fused_object_type:3");
    assigned_free(&r);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(assign_text("global: " QC_A "\nobject_type:\n  - {type: torch.nn.Conv2d, qconfig: " QC_B "}\n"
                                 "  - {type: torch.nn.ReLU, qconfig: null}\n", &r, &d), BPCC_ERR_CONFIG);
    const struct bpcc_diag_entry *e = tu_first_error(&d);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e->file, "m.bpcc");
    ck_assert_uint_eq(e->line, 25);
    ck_assert_msg(strstr(e->msg, "torch.nn.Conv2d (line 3) and torch.nn.ReLU (line 4)"), "%s", e->msg);
    ck_assert_ptr_null(r.a);
    assigned_free(&r);
}
END_TEST

static enum bpcc_status assign_and_dump(void *yaml, struct bpcc_diag *d)
{
    struct assigned r;
    enum bpcc_status s = assign_text(yaml, &r, d);
    char *j;
    if (!s) s = bpcc_qconfig_assignment_json(r.a, 0, &j, d);
    if (!s) bpcc_free(j);
    assigned_free(&r);
    return s;
}

START_TEST(assignment_survives_every_allocation_failure)
{
    static char yaml[] = "global: " QC_A "\nmodule_name_regex:\n  - {regex: blocks, qconfig: null}\n"
                         "module_name_object_type_order:\n  - {name: blocks.0, type: operator.add, index: 1, qconfig: null}\n"
                         "object_type:\n  - {type: torch.nn.Conv2d, qconfig: " QC_A "}\n  - {type: torch.nn.ReLU, qconfig: " QC_A "}\n";
    ck_assert_int_gt(tu_oom_loop("assign", assign_and_dump, yaml), 20);
}
END_TEST

/* }================================================ */

/* {==================== backend support checks (1.13 semantics, verified against torch) ==================== */

/* The activation observer of `{activation: OBS, weight: ...}` loaded from YAML. */
static struct bpcc_qconfig_mapping *qc_of(const char *activation)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "global: {activation: %s, weight: {observer: MinMaxObserver, dtype: qint8, "
             "qscheme: per_tensor_symmetric}}\n", activation);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_qconfig_mapping *m;
    ck_assert_msg(bpcc_qconfig_load_text(yaml, strlen(yaml), "q.yaml", NULL, &m, &d) == BPCC_OK, "%s", tu_msg(&d));
    return m;
}

static bool sat(const char *activation, struct dtype_constraint c, char *why)
{
    struct bpcc_qconfig_mapping *m = qc_of(activation);
    bool ok = bpcc_observer_satisfies(&m->global->activation, &c, "activation", why, 256);
    bpcc_qconfig_free(m);
    return ok;
}

START_TEST(constraints_bound_the_range_and_eps_as_pytorch_does)
{
    /* qnnpack-like: quint8 within [0, 127], scale >= 2^-12 */
    struct dtype_constraint c = {.dtype = BPCC_DTYPE_QUINT8, .has_qmin = true, .has_qmax = true, .qmin = 0,
                                 .qmax = 127, .has_smin = true, .smin = 0x1p-12};
    char why[256] = "";
    ck_assert(!sat("MinMaxObserver", c, why));
    ck_assert_msg(strstr(why, "quant_max 255 exceeds backend quant_max_upper_bound 127 for dtype quint8"), "%s", why);
    ck_assert(!sat("{observer: MinMaxObserver, reduce_range: true}", c, why)); /* range ok, eps 2^-23 too small */
    ck_assert_msg(strstr(why, "eps 1.1920929e-07 is below backend scale_min_lower_bound"), "%s", why);
    ck_assert(sat("{observer: MinMaxObserver, reduce_range: true, eps: 0.000244140625}", c, why));
    /* observers without quant_min/quant_max or eps fail a bounded dtype */
    ck_assert(!sat("ReuseInputObserver", c, why));
    ck_assert_msg(strstr(why, "has no quant_min/quant_max"), "%s", why);
    ck_assert(!sat("{observer: FixedQParamsObserver, scale: 0.00390625, zero_point: 0, quant_max: 127}", c, why));
    ck_assert_msg(strstr(why, "has no eps"), "%s", why);
    struct dtype_constraint range_only = c;
    range_only.has_smin = false;
    ck_assert(sat("{observer: FixedQParamsObserver, scale: 0.00390625, zero_point: 0, quant_max: 127}", range_only, why));
}
END_TEST

START_TEST(constraints_skip_what_pytorch_skips)
{
    char why[256];
    struct dtype_constraint one_bound = {.dtype = BPCC_DTYPE_QUINT8, .has_qmax = true, .qmax = 127};
    ck_assert(sat("MinMaxObserver", one_bound, why)); /* the range is checked only with both bounds */
    struct dtype_constraint other = {.dtype = BPCC_DTYPE_QINT8, .has_qmin = true, .has_qmax = true, .qmin = -64, .qmax = 63};
    ck_assert(sat("MinMaxObserver", other, why));     /* quint8 observer, qint8 constraint */
    struct dtype_constraint none = {.has_qmin = true, .has_qmax = true, .qmin = 0, .qmax = 1};
    ck_assert(sat("MinMaxObserver", none, why));      /* no dtype: no constraint */
    /* eps is compared in float32: 1e-4 and 1.00000001e-4 are the same float */
    struct dtype_constraint s = {.dtype = BPCC_DTYPE_QUINT8, .has_smin = true, .smin = 1.00000001e-4};
    ck_assert(sat("{observer: MinMaxObserver, eps: 0.0001}", s, why));
}
END_TEST

START_TEST(exact_match_constraints_want_the_fixed_qparams)
{
    char why[256];
    struct dtype_constraint fixed = {.dtype = BPCC_DTYPE_QUINT8, .has_scale = true, .has_zp = true, .scale = 1.0 / 256.0, .zp = 0};
    ck_assert(sat("{observer: FixedQParamsObserver, scale: 0.00390625, zero_point: 0}", fixed, why));
    ck_assert(!sat("{observer: FixedQParamsObserver, scale: 0.0078125, zero_point: 128}", fixed, why));
    ck_assert_ptr_nonnull(strstr(why, "fixes them to 0.00390625, 0"));
    ck_assert(!sat("MinMaxObserver", fixed, why));
    ck_assert_ptr_nonnull(strstr(why, "not a FixedQParamsObserver"));
    ck_assert(sat("{observer: PlaceholderObserver, dtype: float16}", fixed, why)); /* another dtype */
}
END_TEST

START_TEST(dtype_config_checks_each_argument_kind_and_the_output)
{
    struct bpcc_qconfig_mapping *m = qc_of("MinMaxObserver");
    struct target_dtypes t;
    bpcc_target_dtypes_from_qconfig(m->global, &t);
    ck_assert_int_eq(t.input, BPCC_DTYPE_QUINT8);
    ck_assert_int_eq(t.output, BPCC_DTYPE_QUINT8);
    ck_assert_int_eq(t.weight, BPCC_DTYPE_QINT8);
    ck_assert_int_eq(t.bias, BPCC_DTYPE_F32);
    ck_assert(!t.input_dynamic);
    struct dtype_config dc = {.input = {.dtype = BPCC_DTYPE_QUINT8}, .output = {.dtype = BPCC_DTYPE_QUINT8},
                              .weight = {.dtype = BPCC_DTYPE_QINT8}, .bias = BPCC_DTYPE_F32};
    char why[256];
    unsigned all = BPCC_ARG_ACTIVATION | BPCC_ARG_WEIGHT | BPCC_ARG_BIAS;
    ck_assert(bpcc_dtype_config_accepts(m->global, &t, &dc, all, why, sizeof why));
    dc.weight.dtype = BPCC_DTYPE_QUINT8;
    ck_assert(!bpcc_dtype_config_accepts(m->global, &t, &dc, all, why, sizeof why));
    ck_assert_str_eq(why, "weight dtype qint8, backend wants quint8");
    /* a module call has no weight argument: the weight dtype is not checked */
    ck_assert(bpcc_dtype_config_accepts(m->global, &t, &dc, BPCC_ARG_ACTIVATION, why, sizeof why));
    dc.weight.dtype = BPCC_DTYPE_QINT8;
    dc.is_dynamic = true;
    ck_assert(!bpcc_dtype_config_accepts(m->global, &t, &dc, all, why, sizeof why));
    ck_assert_msg(strstr(why, "statically"), "%s", why);
    dc.is_dynamic = false;
    dc.output.dtype = BPCC_DTYPE_F32;
    ck_assert(!bpcc_dtype_config_accepts(m->global, &t, &dc, all, why, sizeof why));
    ck_assert_str_eq(why, "output activation dtype quint8, backend wants float32");
    bpcc_qconfig_free(m);
    /* dynamic: PlaceholderObserver with compute_dtype; the output stays float */
    m = qc_of("{observer: PlaceholderObserver, dtype: quint8, compute_dtype: quint8}");
    bpcc_target_dtypes_from_qconfig(m->global, &t);
    ck_assert(t.input_dynamic);
    ck_assert_int_eq(t.output, BPCC_DTYPE_F32);
    struct dtype_config dyn = {.input = {.dtype = BPCC_DTYPE_QUINT8}, .output = {.dtype = BPCC_DTYPE_F32},
                               .weight = {.dtype = BPCC_DTYPE_QINT8}, .bias = BPCC_DTYPE_F32, .is_dynamic = true};
    ck_assert_msg(bpcc_dtype_config_accepts(m->global, &t, &dyn, all, why, sizeof why), "%s", why);
    bpcc_qconfig_free(m);
    /* fp16 activations and weights give an fp16 bias */
    m = qc_of("{observer: PlaceholderObserver, dtype: float16}");
    bpcc_target_dtypes_from_qconfig(m->global, &t);
    ck_assert_int_eq(t.bias, BPCC_DTYPE_F32); /* the weight is qint8 here */
    bpcc_qconfig_free(m);
}
END_TEST

/* }================================================ */

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
    tcase_add_test(tc, global_applies_where_no_rule_does_and_no_global_keeps_float);
    tcase_add_test(tc, object_type_matches_module_classes_functions_and_methods);
    tcase_add_test(tc, scope_type_overrides_a_function_and_method_rule);
    tcase_add_test(tc, module_name_covers_submodules_and_functions_in_their_scope);
    tcase_add_test(tc, module_name_regex_is_anchored_at_the_start_and_first_match_wins);
    tcase_add_test(tc, precedence_is_order_over_name_over_regex_over_type_over_global);
    tcase_add_test(tc, object_type_order_counts_calls_per_module_in_graph_order);
    tcase_add_test(tc, a_repeated_key_takes_the_last_entry_as_the_python_dicts_do);
    tcase_add_test(tc, fused_module_takes_the_object_type_of_its_parts);
    tcase_add_test(tc, assignment_survives_every_allocation_failure);
    tcase_add_test(tc, constraints_bound_the_range_and_eps_as_pytorch_does);
    tcase_add_test(tc, constraints_skip_what_pytorch_skips);
    tcase_add_test(tc, exact_match_constraints_want_the_fixed_qparams);
    tcase_add_test(tc, dtype_config_checks_each_argument_kind_and_the_output);
    suite_add_tcase(s, tc);
    int rc = tu_run(s);
    for (int i = 0; i < n_bad; i++) free(bad_files[i]);
    return rc;
}
