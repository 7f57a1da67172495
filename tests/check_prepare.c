/*
** check_prepare.c — the prepare pass, one test per rule of observer insertion, on hand-written
** graphs with the built-in backends (the conformance suite compares whole models with prepare_fx).
*/
#include "testutil.h"

#include "exec/exec.h"
#include "ir/ir.h" /* bpcc_undo_grow_by_record */
#include "pass/prepare.h"

#include <unistd.h>

#define QC_A "{activation: {observer: MinMaxObserver}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}"
#define QC_S8 "{activation: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}"
#define QC_DYN "{activation: {observer: PlaceholderObserver, dtype: quint8, compute_dtype: quint8}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}"
#define QC_FIXED01 "{activation: {observer: FixedQParamsObserver, scale: 0.00390625, zero_point: 0}, weight: {observer: MinMaxObserver, dtype: qint8, qscheme: per_tensor_symmetric}}"

#define CONV(name, in, out) \
    "module " name " : torch.nn.Conv2d {in_channels: " #in ", out_channels: " #out ", kernel_size: (1, 1)}\n" \
    "  param weight : f32[" #out ", " #in ", 1, 1]\n  param bias : f32[" #out "]\n"

struct prepared {
    struct bpcc_graph *g;
    struct bpcc_config *c;
    struct bpcc_qconfig_mapping *m;
    struct bpcc_prepare_report *r;
};

static enum bpcc_status prepare_text_with(const char *model, const char *backend, const char *qyaml,
                                          const struct bpcc_prepare_options *o, struct prepared *p, struct bpcc_diag *d)
{
    memset(p, 0, sizeof *p);
    enum bpcc_status s = bpcc_graph_parse(model, strlen(model), "m.bpcc", &p->g, d);
    if (!s) s = bpcc_config_load(backend, NULL, &p->c, d);
    if (!s) s = bpcc_qconfig_load_text(qyaml, strlen(qyaml), "q.yaml", NULL, &p->m, d);
    if (!s) s = bpcc_prepare(p->g, p->c, p->m, o, &p->r, d);
    return s;
}

static enum bpcc_status prepare_text(const char *model, const char *backend, const char *qyaml, bool strict,
                                     struct prepared *p, struct bpcc_diag *d)
{
    struct bpcc_prepare_options o = {.strict = strict};
    return prepare_text_with(model, backend, qyaml, &o, p, d);
}

static void prepared_free(struct prepared *p)
{
    bpcc_prepare_report_free(p->r);
    bpcc_qconfig_free(p->m);
    bpcc_config_free(p->c);
    bpcc_graph_free(p->g);
}

#define PREPARE(p, model, backend, q)                                                      \
    do {                                                                                   \
        struct bpcc_diag d_;                                                               \
        bpcc_diag_init(&d_);                                                               \
        ck_assert_msg(prepare_text(model, backend, q, false, p, &d_) == BPCC_OK, "%s", tu_msg(&d_)); \
        ck_assert_int_eq(bpcc_graph_verify((p)->g, &d_), BPCC_OK);                         \
    } while (0)

static bool is_observer(const struct bpcc_graph *g, const struct bpcc_node *n)
{
    if (bpcc_node_kind(n) != BPCC_NODE_CALL_MODULE) return false;
    const struct bpcc_module *m = bpcc_graph_find_module(g, bpcc_node_target(n));
    return m && !strncmp(bpcc_module_type(m), "torch.ao.quantization.", 22);
}

/* The observer between producer and consumer: the observer node that observes `prod` (through
** other observers) and that `cons` uses; NULL if cons uses prod unobserved or not at all. */
static const struct bpcc_node *obs_between(const struct bpcc_graph *g, const char *prod, const char *cons)
{
    const struct bpcc_node *c = bpcc_graph_find_node(g, cons);
    ck_assert_msg(c, "no node %s", cons);
    for (const struct bpcc_node *n = bpcc_graph_first(g); n; n = bpcc_node_next(n)) {
        if (!is_observer(g, n)) continue;
        const struct bpcc_node *src = n;
        while (is_observer(g, src)) src = bpcc_node_args(src)->u.seq.items[0].u.node;
        if (strcmp(bpcc_node_name(src), prod)) continue;
        for (uint32_t i = 0; i < bpcc_node_n_users(n); i++)
            if (bpcc_node_user(n, i) == c) return n;
    }
    return NULL;
}

static const char *obs_class(const struct bpcc_graph *g, const char *prod, const char *cons)
{
    const struct bpcc_node *o = obs_between(g, prod, cons);
    if (!o) return "-";
    return bpcc_module_type(bpcc_graph_find_module(g, bpcc_node_target(o))) + 22;
}

static uint32_t n_observers(const struct bpcc_graph *g)
{
    uint32_t k = 0;
    for (const struct bpcc_node *n = bpcc_graph_first(g); n; n = bpcc_node_next(n)) k += is_observer(g, n);
    return k;
}

static const char *status_of(const struct prepared *p, const char *name)
{
    for (uint32_t i = 0; i < p->r->n_nodes; i++)
        if (!strcmp(p->r->nodes[i].node->name, name)) return bpcc_prep_status_name(p->r->nodes[i].status);
    return "missing";
}

static enum bpcc_status ramp_calibrated(struct prepared *p, struct bpcc_diag *d, bool calibrate);

/* parse leaves a model's tensors unbound: give them values */
static enum bpcc_status bind_tensors(struct prepared *p, struct bpcc_diag *d)
{
    for (uint32_t i = 0; i < bpcc_graph_n_modules(p->g); i++) {
        struct bpcc_module *m = bpcc_graph_module(p->g, i);
        for (uint32_t k = 0; k < bpcc_module_n_tensors(m); k++) {
            const char *name;
            enum bpcc_tensor_role role;
            struct bpcc_tensor *t = bpcc_module_tensor_at(m, k, &name, &role);
            if (bpcc_tensor_data(t)) continue;
            struct bpcc_tensor *nt;
            enum bpcc_status s = bpcc_tensor_new(p->g, bpcc_tensor_dtype(t), bpcc_tensor_ndim(t), bpcc_tensor_dims(t), &nt, d);
            if (s) return s;
            for (uint64_t j = 0; j < bpcc_tensor_numel(nt); j++) ((float *)bpcc_tensor_data(nt))[j] = (float)((int)(j * 7 % 11) - 5) / 8.0f;
            if ((s = bpcc_module_set_tensor(m, name, role, nt, d))) return s;
        }
    }
    return BPCC_OK;
}

static const char *model_conv_relu =
    "bpcc-model 1\n\n" CONV("conv", 3, 4) "\ngraph\n"
    "  %x = placeholder x ()\n"
    "  %conv = call_module conv (%x,)\n"
    "  %relu = call_function torch.nn.functional.relu (%conv,)\n"
    "  %output = output output (%relu,)\n";

START_TEST(inputs_are_observed_at_the_root_and_the_output_at_the_last_node)
{
    struct prepared p;
    PREPARE(&p, model_conv_relu, "fbgemm", "global: " QC_A "\n");
    ck_assert_str_eq(obs_class(p.g, "x", "conv"), "MinMaxObserver");
    ck_assert_str_eq(obs_class(p.g, "conv", "relu"), "-"); /* inside the [conv, relu] pattern */
    ck_assert_str_eq(obs_class(p.g, "relu", "output"), "MinMaxObserver");
    ck_assert_uint_eq(n_observers(p.g), 2);
    ck_assert_str_eq(status_of(&p, "conv"), "quantized");
    ck_assert_str_eq(status_of(&p, "relu"), "quantized");
    prepared_free(&p);
}
END_TEST

START_TEST(a_value_used_twice_gets_one_observer)
{
    struct prepared p;
    PREPARE(&p, "bpcc-model 1\n\n" CONV("a", 3, 4) CONV("b", 3, 4) "\ngraph\n"
                "  %x = placeholder x ()\n  %a = call_module a (%x,)\n  %b = call_module b (%x,)\n"
                "  %add = call_function operator.add (%a, %b)\n  %output = output output (%add,)\n",
            "fbgemm", "global: " QC_A "\n");
    const struct bpcc_node *oa = obs_between(p.g, "x", "a"), *ob = obs_between(p.g, "x", "b");
    ck_assert_ptr_nonnull(oa);
    ck_assert_ptr_eq(oa, ob);
    /* a's output observer also serves add; 4 in all: x, a, b, add */
    ck_assert_uint_eq(n_observers(p.g), 4);
    prepared_free(&p);
}
END_TEST

/* get_new_observer_name: the first activation_post_process_<n> no module has, a module already so
** named kept as it is */
START_TEST(observer_names_skip_a_module_that_has_one)
{
    struct prepared p;
    PREPARE(&p, "bpcc-model 1\n\n" CONV("conv", 3, 4) "module activation_post_process_1 : torch.nn.ReLU\n\ngraph\n"
                "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
                "  %relu = call_module activation_post_process_1 (%conv,)\n  %output = output output (%relu,)\n",
            "fbgemm", "global: " QC_A "\n");
    ck_assert_str_eq(bpcc_node_target(obs_between(p.g, "x", "conv")), "activation_post_process_0");
    ck_assert_str_eq(bpcc_node_target(obs_between(p.g, "relu", "output")), "activation_post_process_2");
    const struct bpcc_module *relu = bpcc_graph_find_module(p.g, "activation_post_process_1");
    ck_assert_ptr_nonnull(relu);
    ck_assert_str_eq(bpcc_module_type(relu), "torch.nn.ReLU");
    ck_assert_uint_eq(n_observers(p.g), 2);
    prepared_free(&p);
}
END_TEST

START_TEST(output_share_observer_with_input_ops_share_one_module)
{
    struct prepared p;
    PREPARE(&p, "bpcc-model 1\n\n" CONV("conv", 3, 4) "module pool : torch.nn.MaxPool2d {kernel_size: 2}\n\ngraph\n"
                "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n  %pool = call_module pool (%conv,)\n"
                "  %flatten = call_function torch.flatten (%pool, 1)\n  %output = output output (%flatten,)\n",
            "fbgemm", "global: " QC_A "\n");
    const struct bpcc_node *in = obs_between(p.g, "conv", "pool"), *out = obs_between(p.g, "pool", "flatten");
    const struct bpcc_node *fl = obs_between(p.g, "flatten", "output");
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(fl);
    ck_assert_str_eq(bpcc_node_target(in), bpcc_node_target(out));
    ck_assert_str_eq(bpcc_node_target(in), bpcc_node_target(fl));
    /* the shared-away modules are gone from the table */
    uint32_t n_obs_modules = 0;
    for (uint32_t i = 0; i < bpcc_graph_n_modules(p.g); i++)
        n_obs_modules += !strncmp(bpcc_module_type(bpcc_graph_module(p.g, i)), "torch.ao.quantization.", 22);
    ck_assert_uint_eq(n_obs_modules, 2); /* x's and conv's */
    prepared_free(&p);
}
END_TEST

START_TEST(num_tensor_args_choose_the_observation_type)
{
    struct prepared p;
    /* add(conv, 1.0): one tensor argument -> OUTPUT_SHARE_OBSERVER_WITH_INPUT in fbgemm */
    PREPARE(&p, "bpcc-model 1\n\n" CONV("conv", 3, 4) "\ngraph\n"
                "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
                "  %add = call_function operator.add (%conv, 1.0)\n  %output = output output (%add,)\n",
            "fbgemm", "global: " QC_A "\n");
    ck_assert_str_eq(bpcc_node_target(obs_between(p.g, "conv", "add")), bpcc_node_target(obs_between(p.g, "add", "output")));
    prepared_free(&p);
    /* add(conv, x): two -> its own output observer */
    PREPARE(&p, "bpcc-model 1\n\n" CONV("conv", 3, 3) "\ngraph\n"
                "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
                "  %add = call_function operator.add (%conv, %x)\n  %output = output output (%add,)\n",
            "fbgemm", "global: " QC_A "\n");
    ck_assert_str_ne(bpcc_node_target(obs_between(p.g, "conv", "add")), bpcc_node_target(obs_between(p.g, "add", "output")));
    prepared_free(&p);
}
END_TEST

START_TEST(non_tensor_arguments_are_not_observed_and_their_dtype_propagates)
{
    struct prepared p;
    PREPARE(&p, "bpcc-model 1\n\n" CONV("conv", 3, 4) "\ngraph\n"
                "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
                "  %size = call_method size (%conv, 0)\n"
                "  %view = call_method view (%conv, %size, -1)\n  %output = output output (%view,)\n",
            "fbgemm", "global: " QC_A "\n");
    ck_assert_str_eq(obs_class(p.g, "size", "view"), "-");
    /* view's size argument is an int; size shares observers with its input, so 1.13 propagates
    ** int up to conv as well, and conv stays float (the conformance suite checks this on a model) */
    ck_assert_str_eq(status_of(&p, "size"), "rejected");
    ck_assert_str_eq(status_of(&p, "conv"), "rejected");
    ck_assert_str_eq(obs_class(p.g, "conv", "view"), "-");
    ck_assert_uint_eq(n_observers(p.g), 0);
    prepared_free(&p);
    /* without the size argument view observes its input */
    PREPARE(&p, "bpcc-model 1\n\n" CONV("conv", 3, 4) "\ngraph\n"
                "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
                "  %view = call_method view (%conv, 4, -1)\n  %output = output output (%view,)\n",
            "fbgemm", "global: " QC_A "\n");
    ck_assert_str_eq(obs_class(p.g, "conv", "view"), "MinMaxObserver");
    ck_assert_str_eq(bpcc_node_target(obs_between(p.g, "conv", "view")), bpcc_node_target(obs_between(p.g, "view", "output")));
    prepared_free(&p);
}
END_TEST

START_TEST(fixed_qparams_ops_get_their_fixed_observer)
{
    struct prepared p;
    PREPARE(&p, "bpcc-model 1\n\n" CONV("conv", 3, 4) "\ngraph\n"
                "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
                "  %sigmoid = call_function torch.sigmoid (%conv,)\n  %output = output output (%sigmoid,)\n",
            "fbgemm", "global: " QC_A "\nobject_type:\n  - {type: torch.sigmoid, qconfig: " QC_FIXED01 "}\n");
    ck_assert_str_eq(obs_class(p.g, "sigmoid", "output"), "FixedQParamsObserver");
    const struct bpcc_value *sc = bpcc_module_attr(bpcc_graph_find_module(p.g, bpcc_node_target(obs_between(p.g, "sigmoid", "output"))), "scale");
    ck_assert_ptr_nonnull(sc);
    ck_assert(sc->u.f == 1.0 / 256.0);
    prepared_free(&p);
}
END_TEST

START_TEST(a_fixed_qparams_op_with_another_observer_is_refused)
{
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    enum bpcc_status s = prepare_text("bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n"
                                      "  %tanh = call_function torch.tanh (%x,)\n  %output = output output (%tanh,)\n",
                                      "fbgemm", "global: " QC_A "\n", false, &p, &d);
    ck_assert_int_eq(s, BPCC_ERR_CONFIG);
    TU_ASSERT_DIAG(&d, 5, 3, "fixed-qparams op");
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "zero_point: 128"));
    prepared_free(&p);
}
END_TEST

/* float16 placeholders are the other activation a fixed-qparams op may have (float16_static_qconfig's,
** float16_dynamic_qconfig's); one with a custom op name is not PyTorch's, and is refused */
START_TEST(a_fixed_qparams_op_may_stay_float16)
{
    static const char *const model = "bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n"
                                     "  %tanh = call_function torch.tanh (%x,)\n  %output = output output (%tanh,)\n";
    static const char *const ok[] = {"{observer: PlaceholderObserver, dtype: float16}",
                                     "{observer: PlaceholderObserver, dtype: float16, compute_dtype: float16}"};
    char mapping[512];
    for (int i = 0; i < 2; i++) {
        snprintf(mapping, sizeof mapping, "global: {activation: %s, weight: {observer: PlaceholderObserver, dtype: float16}}\n", ok[i]);
        struct prepared p;
        PREPARE(&p, model, "fbgemm", mapping);
        prepared_free(&p);
    }
    snprintf(mapping, sizeof mapping, "global: {activation: {observer: PlaceholderObserver, dtype: float16, custom_op_name: "
                                      "\"mine\"}, weight: {observer: PlaceholderObserver, dtype: float16}}\n");
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(prepare_text(model, "fbgemm", mapping, false, &p, &d), BPCC_ERR_CONFIG);
    TU_ASSERT_DIAG(&d, 5, 3, "fixed-qparams op");
    prepared_free(&p);
}
END_TEST

START_TEST(a_conv_transpose_with_per_channel_weights_is_refused)
{
    /* assert_valid_qconfig: ConvTranspose weights are [in, out / groups, ...] */
#define CT "module up : torch.nn.ConvTranspose2d {in_channels: 4, out_channels: 2, kernel_size: (2, 2), stride: (2, 2), " \
           "padding: (0, 0), dilation: (1, 1), transposed: True, output_padding: (0, 0), groups: 1, padding_mode: \"zeros\"}\n" \
           "  param weight : f32[4, 2, 2, 2]\n"
    const char *model = "bpcc-model 1\n\n" CT "\ngraph\n  %x = placeholder x ()\n"
                        "  %up = call_module up (%x,)\n  %output = output output (%up,)\n";
    const char *per_channel[] = {"PerChannelMinMaxObserver", "MovingAveragePerChannelMinMaxObserver"};
    for (int i = 0; i < 2; i++) {
        char mapping[512];
        snprintf(mapping, sizeof mapping,
                 "global: {activation: {observer: MinMaxObserver}, weight: {observer: %s, dtype: qint8, "
                 "qscheme: per_channel_symmetric}}\n", per_channel[i]);
        struct prepared p;
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        ck_assert_int_eq(prepare_text(model, "fbgemm", mapping, false, &p, &d), BPCC_ERR_CONFIG);
        TU_ASSERT_DIAG(&d, 8, 3, "per channel");
        ck_assert_ptr_nonnull(strstr(tu_msg(&d), per_channel[i]));
        prepared_free(&p);
    }
    /* a per-tensor weight observer for the type, as get_default_qconfig_mapping gives it */
    struct prepared p;
    PREPARE(&p, model, "fbgemm",
            "global: {activation: {observer: MinMaxObserver}, weight: {observer: PerChannelMinMaxObserver, dtype: qint8, "
            "qscheme: per_channel_symmetric}}\nobject_type:\n  - {type: torch.nn.ConvTranspose2d, qconfig: " QC_A "}\n");
    ck_assert_str_eq(obs_class(p.g, "x", "up"), "MinMaxObserver");
    prepared_free(&p);
#undef CT
}
END_TEST

START_TEST(functional_weights_get_the_weight_observer)
{
    struct prepared p;
    PREPARE(&p, "bpcc-model 1\n\nmodule \"\" : torch.fx.GraphModule\n  param w : f32[3, 8]\n\ngraph\n"
                "  %x = placeholder x ()\n  %w = get_attr w ()\n"
                "  %linear = call_function torch.nn.functional.linear (%x, %w)\n  %output = output output (%linear,)\n",
            "fbgemm", "global: " QC_A "\n");
    const struct bpcc_node *o = obs_between(p.g, "w", "linear");
    ck_assert_ptr_nonnull(o);
    const struct bpcc_value *dt = bpcc_module_attr(bpcc_graph_find_module(p.g, bpcc_node_target(o)), "dtype");
    ck_assert_int_eq(dt->u.dtype, BPCC_DTYPE_QINT8); /* the qconfig's weight observer */
    ck_assert_str_eq(obs_class(p.g, "x", "linear"), "MinMaxObserver");
    prepared_free(&p);
}
END_TEST

START_TEST(dynamic_quantization_observes_only_the_first_input)
{
    struct prepared p;
    PREPARE(&p, "bpcc-model 1\n\nmodule fc : torch.nn.Linear {in_features: 8, out_features: 3}\n  param weight : f32[3, 8]\n\ngraph\n"
                "  %x = placeholder x ()\n  %fc = call_module fc (%x,)\n  %output = output output (%fc,)\n",
            "fbgemm", "global: " QC_DYN "\n");
    ck_assert_str_eq(obs_class(p.g, "x", "fc"), "PlaceholderObserver");
    ck_assert_str_eq(obs_class(p.g, "fc", "output"), "-"); /* output stays float */
    ck_assert_uint_eq(n_observers(p.g), 1);
    prepared_free(&p);
}
END_TEST

START_TEST(a_null_qconfig_keeps_a_node_float)
{
    struct prepared p;
    PREPARE(&p, model_conv_relu, "fbgemm", "global: " QC_A "\nmodule_name:\n  - {name: conv, qconfig: null}\n");
    ck_assert_uint_eq(n_observers(p.g), 0); /* relu's pattern is rooted at conv: nothing is observed */
    ck_assert_str_eq(status_of(&p, "conv"), "no_qconfig");
    prepared_free(&p);
}
END_TEST

START_TEST(a_rejected_qconfig_stays_float_and_strict_refuses_it)
{
    struct prepared p;
    /* qnnpack takes qint8 activations only with scale >= 2**-12; MinMax's default eps is smaller */
    PREPARE(&p, model_conv_relu, "qnnpack", "global: " QC_S8 "\n");
    ck_assert_uint_eq(n_observers(p.g), 0);
    ck_assert_str_eq(status_of(&p, "conv"), "rejected");
    const struct prep_node *x = NULL;
    for (uint32_t i = 0; i < p.r->n_nodes; i++)
        if (!strcmp(p.r->nodes[i].node->name, "conv")) x = &p.r->nodes[i];
    ck_assert_ptr_nonnull(strstr(x->why, "scale_min_lower_bound"));
    ck_assert_ptr_nonnull(strstr(x->why, "qnnpack.yaml:"));
    prepared_free(&p);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(prepare_text(model_conv_relu, "qnnpack", "global: " QC_S8 "\n", true, &p, &d), BPCC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "would stay float"));
    prepared_free(&p);
}
END_TEST

START_TEST(getitem_stays_float)
{
    struct prepared p;
    PREPARE(&p, "bpcc-model 1\n\n" CONV("conv", 3, 4) "\ngraph\n"
                "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
                "  %getitem = call_function operator.getitem (%conv, 0)\n  %output = output output (%getitem,)\n",
            "fbgemm", "global: " QC_A "\n");
    ck_assert_str_eq(status_of(&p, "getitem"), "getitem");
    ck_assert_str_eq(obs_class(p.g, "getitem", "output"), "-");
    prepared_free(&p);
}
END_TEST

START_TEST(input_output_not_observed_patterns_get_no_observers)
{
    struct prepared p;
    PREPARE(&p, "bpcc-model 1\n\nmodule emb : torch.nn.Embedding {num_embeddings: 10, embedding_dim: 4}\n"
                "  param weight : f32[10, 4]\n\ngraph\n"
                "  %x = placeholder x ()\n  %emb = call_module emb (%x,)\n  %output = output output (%emb,)\n",
            "fbgemm", "global: " QC_A "\n");
    ck_assert_uint_eq(n_observers(p.g), 0);
    ck_assert_str_eq(status_of(&p, "emb"), "not_observed");
    prepared_free(&p);
}
END_TEST

START_TEST(plan_lists_groups_and_observers_in_graph_order)
{
    struct prepared p;
    PREPARE(&p, model_conv_relu, "fbgemm", "global: " QC_A "\n");
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    char *j;
    ck_assert_int_eq(bpcc_prepare_plan_json(p.r, 0, &j, &d), BPCC_OK);
    ck_assert_ptr_nonnull(strstr(j, "\"nodes\":[\"conv\",\"relu\"],\"root\":\"conv\",\"last\":\"relu\""));
    const char *a = strstr(j, "\"observes\":\"x\""), *b = strstr(j, "\"observes\":\"relu\"");
    ck_assert(a && b && a < b);
    bpcc_free(j);
    ck_assert_int_eq(bpcc_prepare_explain(p.r, false, &j, &d), BPCC_OK);
    ck_assert_ptr_nonnull(strstr(j, "quantized: input quint8, output quint8, weight qint8"));
    bpcc_free(j);
    prepared_free(&p);
}
END_TEST

START_TEST(quantized_graph_inputs_and_outputs_follow_the_custom_config)
{
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    uint32_t in0 = 0;
    struct bpcc_prepare_options o = {.input_quantized = &in0, .n_input_quantized = 1, .output_quantized = true};
    ck_assert_int_eq(prepare_text_with(model_conv_relu, "fbgemm", "global: " QC_A "\n", &o, &p, &d), BPCC_OK);
    /* x arrives quint8: no observer before conv; relu's output observer already makes it quint8 */
    ck_assert_str_eq(obs_class(p.g, "x", "conv"), "-");
    ck_assert_str_eq(obs_class(p.g, "relu", "output"), "MinMaxObserver");
    ck_assert_uint_eq(n_observers(p.g), 1);
    /* recorded for convert, which dequantizes x and keeps the output quantized, as convert_fx does */
    ck_assert_int_eq(ramp_calibrated(&p, &d, true), BPCC_OK);
    struct bpcc_module *root = bpcc_graph_find_module(p.g, "");
    const struct bpcc_value *in = bpcc_module_attr(root, "_input_quantized_idxs"), *out = bpcc_module_attr(root, "_output_quantized_idxs");
    ck_assert(in && in->kind == BPCC_VAL_LIST && in->n == 1 && in->u.seq.items[0].u.i == 0);
    ck_assert(out && out->kind == BPCC_VAL_LIST && out->n == 1);
    /* a record that names an input the model has not fails convert, and leaves the graph as it was */
    struct bpcc_value five = bpcc_value_int(5), bad = {.kind = BPCC_VAL_LIST, .n = 1, .u.seq.items = &five};
    ck_assert_int_eq(bpcc_module_set_attr(root, "_input_quantized_idxs", &bad, &d), BPCC_OK);
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_convert(p.g, p.c, p.m, NULL, NULL, &d), BPCC_ERR_GRAPH);
    ck_assert_msg(strstr(tu_msg(&d), "names graph input 5, and the model has 1"), "%s", tu_msg(&d));
    ck_assert_ptr_nonnull(bpcc_graph_find_module(p.g, "activation_post_process_0"));
    ck_assert_ptr_nonnull(bpcc_module_attr(root, "_input_quantized_idxs"));
    struct bpcc_value zero = bpcc_value_int(0), good = {.kind = BPCC_VAL_LIST, .n = 1, .u.seq.items = &zero};
    ck_assert_int_eq(bpcc_module_set_attr(root, "_input_quantized_idxs", &good, &d), BPCC_OK);
    uint32_t nq = 0;
    bpcc_diag_init(&d);
    ck_assert_msg(bpcc_convert(p.g, p.c, p.m, &nq, NULL, &d) == BPCC_OK, "%s", tu_msg(&d));
    /* x -> dequantize -> conv ... relu -> quantize_per_tensor -> output, the records gone */
    const struct bpcc_node *x = bpcc_graph_find_node(p.g, "x"), *dq = bpcc_node_user(x, 0);
    ck_assert_uint_eq(bpcc_node_n_users(x), 1);
    ck_assert_str_eq(bpcc_node_name(dq), "dequantize");
    ck_assert_str_eq(bpcc_node_target(dq), "dequantize");
    ck_assert_ptr_eq(bpcc_node_next(x), dq);
    ck_assert_uint_eq(bpcc_node_n_users(dq), 1);
    ck_assert_str_eq(bpcc_node_name(bpcc_node_user(dq, 0)), "conv");
    const struct bpcc_value *ret = &bpcc_node_args(bpcc_graph_output(p.g))->u.seq.items[0];
    ck_assert(ret->kind == BPCC_VAL_NODE);
    ck_assert_str_eq(bpcc_node_target(ret->u.node), "torch.quantize_per_tensor");
    ck_assert_ptr_null(bpcc_graph_find_node(p.g, "dequantize_1")); /* the output's dequantize, erased */
    ck_assert_uint_eq(nq, 1);                                      /* its quantize point stays */
    root = bpcc_graph_find_module(p.g, "");
    ck_assert_ptr_null(bpcc_module_attr(root, "_input_quantized_idxs"));
    ck_assert_ptr_null(bpcc_module_attr(root, "_output_quantized_idxs"));
    prepared_free(&p);
}
END_TEST

START_TEST(a_quantized_output_gets_an_observer_on_what_it_returns)
{
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    const char *model = "bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n"
                        "  %relu = call_function torch.relu (%x,)\n  %output = output output ((%relu, %x),)\n";
    memset(&p, 0, sizeof p);
    ck_assert_int_eq(bpcc_graph_parse(model, strlen(model), "m.bpcc", &p.g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_config_load("fbgemm", NULL, &p.c, &d), BPCC_OK);
    const char *q = "global: " QC_A "\n";
    ck_assert_int_eq(bpcc_qconfig_load_text(q, strlen(q), "q.yaml", NULL, &p.m, &d), BPCC_OK);
    struct bpcc_prepare_options o = {.output_quantized = true};
    ck_assert_int_eq(bpcc_prepare(p.g, p.c, p.m, &o, &p.r, &d), BPCC_ERR_CONFIG); /* x has no qconfig */
    prepared_free(&p);
    model = "bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n"
            "  %relu = call_function torch.relu (%x,)\n  %output = output output ((%relu,),)\n";
    memset(&p, 0, sizeof p);
    ck_assert_int_eq(bpcc_graph_parse(model, strlen(model), "m.bpcc", &p.g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_config_load("fbgemm", NULL, &p.c, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_qconfig_load_text(q, strlen(q), "q.yaml", NULL, &p.m, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_prepare(p.g, p.c, p.m, &o, &p.r, &d), BPCC_OK);
    ck_assert_str_eq(obs_class(p.g, "relu", "output"), "MinMaxObserver"); /* torch.relu has no pattern */
    prepared_free(&p);
    /* a value recorded as integers stays unobserved (PyTorch observes it, and fails) */
    model = "bpcc-model 1\n\ngraph\n  %x = placeholder x () : f32[2, 3]\n"
            "  %relu = call_function torch.relu (%x,) : f32[2, 3]\n  %argmax = call_method argmax (%relu, 1) : i64[2]\n"
            "  %output = output output ((%relu, %argmax),)\n";
    ck_assert_int_eq(prepare_text_with(model, "fbgemm", q, &o, &p, &d), BPCC_OK);
    ck_assert_str_eq(obs_class(p.g, "relu", "output"), "MinMaxObserver");
    ck_assert_str_eq(obs_class(p.g, "argmax", "output"), "-");
    /* convert keeps a listed position quantized where it is a dequantize node; another listed
    ** value stays, with a warning; a position past the tuple is an error, the graph as it was */
    ck_assert_int_eq(ramp_calibrated(&p, &d, true), BPCC_OK);
    struct bpcc_module *root = bpcc_graph_find_module(p.g, "");
    struct bpcc_value pos[2] = {bpcc_value_int(0), bpcc_value_int(2)}, list = {.kind = BPCC_VAL_LIST, .n = 2, .u.seq.items = pos};
    ck_assert_int_eq(bpcc_module_set_attr(root, "_output_quantized_idxs", &list, &d), BPCC_OK);
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_convert(p.g, p.c, p.m, NULL, NULL, &d), BPCC_ERR_GRAPH);
    ck_assert_msg(strstr(tu_msg(&d), "names output 2, and the model's output tuple has 2"), "%s", tu_msg(&d));
    ck_assert_ptr_nonnull(bpcc_graph_find_module(p.g, "activation_post_process_0"));
    pos[1] = bpcc_value_int(1);
    ck_assert_int_eq(bpcc_module_set_attr(root, "_output_quantized_idxs", &list, &d), BPCC_OK);
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_convert(p.g, p.c, p.m, NULL, NULL, &d), BPCC_OK);
    ck_assert_uint_eq(d.n_warnings, 1);
    ck_assert_msg(strstr(tu_msg(&d), "is node argmax, not a dequantize node: it stays as it is"), "%s", tu_msg(&d));
    const struct bpcc_value *ret = &bpcc_node_args(bpcc_graph_output(p.g))->u.seq.items[0];
    ck_assert_str_eq(bpcc_node_target(ret->u.seq.items[0].u.node), "torch.quantize_per_tensor");
    ck_assert_str_eq(bpcc_node_name(ret->u.seq.items[1].u.node), "argmax");
    prepared_free(&p);
}
END_TEST

static const char *model_stubs =
    "bpcc-model 1\n\n" CONV("conv", 3, 4)
    "module q : paddle.nn.quant.Stub {observer: {observer: \"HistogramObserver\", reduce_range: True}}\n"
    "module q2 : paddle.nn.quant.Stub {}\n\ngraph\n"
    "  %x = placeholder x ()\n  %q = call_module q (%x,)\n  %conv = call_module conv (%q,)\n"
    "  %q2 = call_module q2 (%conv,)\n  %relu = call_function torch.relu (%q2,)\n  %output = output output (%relu,)\n";

START_TEST(a_stub_becomes_an_observer_with_its_own_spec_or_the_qconfigs)
{
    struct prepared p;
    PREPARE(&p, model_stubs, "fbgemm", "global: " QC_A "\n");
    /* q's own spec overrides the qconfig's MinMax, and conv needs no second input observer */
    ck_assert_str_eq(obs_class(p.g, "x", "conv"), "HistogramObserver");
    const struct bpcc_node *o = obs_between(p.g, "x", "conv");
    ck_assert_str_eq(bpcc_node_name(bpcc_node_args(o)->u.seq.items[0].u.node), "x");
    /* q2 has no spec: the qconfig's activation; conv's output is observed by it alone */
    ck_assert_str_eq(obs_class(p.g, "conv", "relu"), "MinMaxObserver");
    ck_assert_uint_eq(n_observers(p.g), 2);
    ck_assert_ptr_null(bpcc_graph_find_node(p.g, "q"));
    ck_assert_ptr_null(bpcc_graph_find_module(p.g, "q"));
    ck_assert_ptr_null(bpcc_graph_find_module(p.g, "q2"));
    ck_assert_str_eq(status_of(&p, "q"), "stub");
    prepared_free(&p);
    /* a stub with no spec and a null qconfig is an identity */
    PREPARE(&p, model_stubs, "fbgemm", "global: " QC_A "\nobject_type:\n  - {type: paddle.nn.quant.Stub, qconfig: null}\n");
    ck_assert_str_eq(obs_class(p.g, "x", "conv"), "HistogramObserver");
    ck_assert_str_eq(obs_class(p.g, "conv", "relu"), "MinMaxObserver"); /* conv's own output observer */
    const struct bpcc_node *relu = bpcc_graph_find_node(p.g, "relu");
    ck_assert_str_eq(bpcc_node_target(bpcc_node_args(relu)->u.seq.items[0].u.node), bpcc_node_target(obs_between(p.g, "conv", "relu")));
    prepared_free(&p);
}
END_TEST

START_TEST(quant_stub_observes_and_dequant_stub_goes_away)
{
    struct prepared p;
    PREPARE(&p, "bpcc-model 1\n\n" CONV("conv", 3, 4)
                "module quant : torch.ao.quantization.QuantStub\nmodule dequant : torch.ao.quantization.DeQuantStub\n\ngraph\n"
                "  %x = placeholder x ()\n  %quant = call_module quant (%x,)\n  %conv = call_module conv (%quant,)\n"
                "  %dequant = call_module dequant (%conv,)\n  %output = output output (%dequant,)\n",
            "fbgemm", "global: {activation: {observer: HistogramObserver}, weight: {observer: MinMaxObserver, dtype: qint8, "
                      "qscheme: per_tensor_symmetric}}\n");
    ck_assert_str_eq(obs_class(p.g, "x", "conv"), "HistogramObserver"); /* the QuantStub's, the qconfig's activation */
    ck_assert_str_eq(obs_class(p.g, "conv", "output"), "HistogramObserver");
    ck_assert_uint_eq(n_observers(p.g), 2);
    ck_assert_ptr_null(bpcc_graph_find_module(p.g, "quant"));
    ck_assert_ptr_null(bpcc_graph_find_module(p.g, "dequant"));
    ck_assert_ptr_null(bpcc_graph_find_node(p.g, "dequant"));
    prepared_free(&p);
}
END_TEST

START_TEST(a_bad_stub_spec_is_reported_at_its_module)
{
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    enum bpcc_status s = prepare_text("bpcc-model 1\n\nmodule q : paddle.nn.quant.Stub {observer: {observer: \"MinMaxObserver\", dtype: torch.float32}}\n\ngraph\n"
                                      "  %x = placeholder x ()\n  %q = call_module q (%x,)\n  %output = output output (%q,)\n",
                                      "fbgemm", "global: " QC_A "\n", false, &p, &d);
    ck_assert_int_eq(s, BPCC_ERR_CONFIG);
    TU_ASSERT_DIAG(&d, 3, 1, "not float32");
    ck_assert_ptr_nonnull(strstr(d.entries[0].note, "stub's 'observer' attribute"));
    prepared_free(&p);
}
END_TEST

/* a prepared model's tensors bound, and with `calibrate` its observers run on one ramp batch */
static enum bpcc_status ramp_calibrated(struct prepared *p, struct bpcc_diag *d, bool calibrate)
{
    enum bpcc_status s = bind_tensors(p, d);
    if (s) return s;
    if (calibrate) {
        struct bpcc_exec *e;
        s = bpcc_exec_new(p->g, 1, &e, d);
        if (s) return s;
        struct xtensor *x = bpcc_xtensor_new(4, (int64_t[]){1, 3, 4, 4});
        if (!x) {
            bpcc_exec_free(e);
            return bpcc_diag_nomem(d);
        }
        for (uint64_t i = 0; i < x->numel; i++) x->data[i] = (float)i / 8.0f - 2.0f;
        struct xval in = {.k = XV_TENSOR, .u.t = x};
        s = bpcc_exec_run(e, &in, 1, NULL, d);
        if (!s) s = bpcc_calibrate_store(p->g, e, d); /* qparams onto the observers, as bpcc_calibrate does */
        bpcc_exec_free(e);
        bpcc_xtensor_free(x);
    }
    return s;
}

/* prepare + run the observers on one ramp batch (calibrated_text) + convert (quantize_text) */
static enum bpcc_status calibrated_text(const char *model, const char *qyaml, struct prepared *p, struct bpcc_diag *d,
                                        bool calibrate)
{
    enum bpcc_status s = prepare_text(model, "fbgemm", qyaml, false, p, d);
    return s ? s : ramp_calibrated(p, d, calibrate);
}

static enum bpcc_status quantize_text(const char *model, const char *qyaml, struct prepared *p, struct bpcc_diag *d,
                                      bool calibrate)
{
    enum bpcc_status s = calibrated_text(model, qyaml, p, d, calibrate);
    uint32_t nq, nm;
    return s ? s : bpcc_convert(p->g, p->c, p->m, &nq, &nm, d);
}

static const struct bpcc_node *find_target(const struct bpcc_graph *g, const char *target, uint32_t nth)
{
    for (const struct bpcc_node *n = bpcc_graph_first(g); n; n = bpcc_node_next(n))
        if (!strcmp(bpcc_node_target(n), target) && nth-- == 0) return n;
    return NULL;
}

START_TEST(convert_turns_observers_into_quantize_dequantize_and_weighted_modules_into_reference_modules)
{
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_msg(quantize_text(model_conv_relu, "global: " QC_A "\n", &p, &d, true) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_int_eq(bpcc_graph_verify(p.g, &d), BPCC_OK);
    ck_assert_uint_eq(n_observers(p.g), 0);
    const struct bpcc_node *q0 = find_target(p.g, "torch.quantize_per_tensor", 0), *q1 = find_target(p.g, "torch.quantize_per_tensor", 1);
    ck_assert_ptr_nonnull(q0);
    ck_assert_ptr_nonnull(q1);
    ck_assert_ptr_null(find_target(p.g, "torch.quantize_per_tensor", 2));
    /* the input's quantize point is named after its consumer's module (conv), with _input */
    ck_assert_str_eq(bpcc_node_target(bpcc_node_args(q0)->u.seq.items[1].u.node), "conv_input_scale_0");
    ck_assert_str_eq(bpcc_node_target(bpcc_node_args(q1)->u.seq.items[1].u.node), "_scale_0"); /* relu: root scope */
    ck_assert_str_eq(bpcc_node_target(bpcc_node_user(q0, 0)), "dequantize");
    const struct bpcc_module *conv = bpcc_graph_find_module(p.g, "conv");
    ck_assert_str_eq(bpcc_module_type(conv), "torch.ao.nn.quantized.reference.Conv2d");
    const struct bpcc_tensor *ws = bpcc_module_tensor(conv, "weight_scale");
    ck_assert_ptr_nonnull(ws);
    /* QC_A's weight: MinMax qint8 per-tensor symmetric over the weight values [-5/8, 5/8] */
    ck_assert(*(const float *)bpcc_tensor_data((struct bpcc_tensor *)ws) == 0.625f / 127.5f);
    /* per tensor: [1], as calculate_qparams gives it (convert_weighted_module keeps its shape) */
    ck_assert_uint_eq(bpcc_tensor_ndim(ws), 1);
    ck_assert_int_eq(bpcc_tensor_dims(ws)[0], 1);
    ck_assert_int_eq(bpcc_tensor_dtype(bpcc_module_tensor(conv, "weight_zero_point")), BPCC_DTYPE_I64); /* symmetric */
    ck_assert_uint_eq(bpcc_tensor_ndim(bpcc_module_tensor(conv, "weight_axis")), 0);
    ck_assert_int_eq(bpcc_module_attr(conv, "weight_dtype")->u.dtype, BPCC_DTYPE_QINT8);
    ck_assert_str_eq(bpcc_module_attr(conv, "weight_qscheme")->u.s, "torch.per_tensor_affine");
    ck_assert_ptr_null(bpcc_graph_find_module(p.g, "activation_post_process_0"));
    prepared_free(&p);
}
END_TEST

/* convert ends as convert_fx does, with torch.fx's eliminate_dead_code: from the last node back,
** what no node uses goes unless it is impure; what the erased nodes named stays */
START_TEST(convert_erases_dead_code_as_pytorch_does)
{
    static const char *const model =
        "bpcc-model 1\n\n" CONV("conv", 3, 4) CONV("conv2", 3, 4) "\ngraph\n"
        "  %x = placeholder x ()\n"
        "  %getattr = call_function getattr (%x, \"shape\")\n"                /* dead: goes */
        "  %getattr_1 = call_function getattr (%x, \"shape\")\n"
        "  %getitem = call_function operator.getitem (%getattr_1, 1)\n"
        "  %eq = call_function operator.eq (%getitem, 3)\n"
        "  %_assert = call_function torch._assert (%eq, \"three channels\")\n" /* impure: stays, and its inputs */
        "  %conv2 = call_module conv2 (%x,)\n"                                /* dead, and its quantize point */
        "  %conv = call_module conv (%x,)\n"
        "  %relu = call_function torch.nn.functional.relu (%conv,)\n"
        "  %output = output output (%relu,)\n";
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_msg(calibrated_text(model, "global: " QC_A "\n", &p, &d, true) == BPCC_OK, "%s", tu_msg(&d));
    uint32_t nq = 0, nm = 0;
    ck_assert_msg(bpcc_convert(p.g, p.c, p.m, &nq, &nm, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_int_eq(bpcc_graph_verify(p.g, &d), BPCC_OK);
    /* the quantize points left: x's (read by conv) and relu's; conv2's went with it */
    ck_assert_uint_eq(nq, 2);
    ck_assert_ptr_nonnull(find_target(p.g, "torch.quantize_per_tensor", 1));
    ck_assert_ptr_null(find_target(p.g, "torch.quantize_per_tensor", 2));
    ck_assert_ptr_null(bpcc_graph_find_node(p.g, "getattr"));
    ck_assert_ptr_null(bpcc_graph_find_node(p.g, "conv2"));
    static const char *const kept[] = {"x", "getattr_1", "getitem", "eq", "_assert", "conv", "relu", "output"};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        ck_assert_msg(bpcc_graph_find_node(p.g, kept[i]), "node '%s' was erased", kept[i]);
    /* no get_attr reads conv2's qparams, but its buffers and its (reference) module stay, as in
    ** PyTorch's converted module */
    for (const struct bpcc_node *n = bpcc_graph_first(p.g); n; n = bpcc_node_next(n))
        ck_assert_msg(strcmp(bpcc_node_target(n), "conv2") && strcmp(bpcc_node_target(n), "conv2_scale_0") &&
                          strcmp(bpcc_node_target(n), "conv2_zero_point_0"),
                      "%s", bpcc_node_name(n));
    /* x's quantize point, named after its first consumer as PyTorch names it, stays: conv reads it */
    ck_assert_ptr_nonnull(bpcc_graph_find_node(p.g, "conv2_input_scale_0"));
    const struct bpcc_module *root = bpcc_graph_find_module(p.g, "");
    ck_assert_ptr_nonnull(bpcc_module_tensor(root, "conv2_scale_0"));
    ck_assert_ptr_nonnull(bpcc_module_tensor(root, "conv2_zero_point_0"));
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(p.g, "conv2")), "torch.ao.nn.quantized.reference.Conv2d");
    ck_assert_uint_eq(nm, 2);
    prepared_free(&p);
}
END_TEST

/* An in-place op whose result nothing reads changes a value later nodes read: convert keeps it, with
** one warning naming the first, where PyTorch's eliminate_dead_code takes it for pure and erases it
** (its converted model then computes other values than the float one); asked to, convert erases it
** as PyTorch does. A pure op nothing reads goes either way. */
START_TEST(convert_keeps_in_place_ops_nothing_reads_unless_asked_to_erase_them_as_pytorch_does)
{
    static const char *const model =
        "bpcc-model 1\n\n" CONV("conv", 3, 4) "module r : torch.nn.ReLU {inplace: True}\n"
        "module r2 : torch.nn.ReLU {inplace: False}\n\ngraph\n"
        "  %x = placeholder x ()\n"
        "  %conv = call_module conv (%x,)\n"
        "  %neg = call_method neg (%conv,)\n"                                              /* pure: goes */
        "  %add_ = call_method add_ (%conv, 1.0)\n"                                        /* in place: stays */
        "  %relu = call_function torch.nn.functional.relu (%conv,) {inplace: True}\n"     /* in place: stays */
        "  %r = call_module r (%conv,)\n"                                                  /* in place: stays */
        "  %r2 = call_module r2 (%conv,)\n"                                                /* pure: goes */
        "  %abs = call_function torch.abs (%conv,)\n"
        "  %output = output output (%abs,)\n";
    for (int erase = 0; erase < 2; erase++) {
        struct prepared p;
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        ck_assert_msg(calibrated_text(model, "global: " QC_A "\n", &p, &d, true) == BPCC_OK, "%s", tu_msg(&d));
        bpcc_diag_init(&d);
        bpcc_graph_set_erase_unused_in_place(p.g, erase);
        uint32_t nq = 0, nm = 0;
        ck_assert_msg(bpcc_convert(p.g, p.c, p.m, &nq, &nm, &d) == BPCC_OK, "%s", tu_msg(&d));
        ck_assert_int_eq(bpcc_graph_verify(p.g, &d), BPCC_OK);
        ck_assert_ptr_null(bpcc_graph_find_node(p.g, "neg"));
        ck_assert_ptr_null(bpcc_graph_find_node(p.g, "r2"));
        static const char *const in_place[] = {"add_", "relu", "r"};
        for (size_t i = 0; i < 3; i++)
            ck_assert_msg((bpcc_graph_find_node(p.g, in_place[i]) == NULL) == (erase == 1), "%s, erase %d", in_place[i], erase);
        if (erase) {
            ck_assert_uint_eq(d.n_warnings, 0);
        } else {
            ck_assert_uint_eq(d.n_warnings, 1);
            ck_assert_int_eq(d.entries[0].severity, BPCC_SEV_WARNING);
            ck_assert_msg(strstr(d.entries[0].msg, "kept 3 in-place ops whose result nothing reads ('add_' (add_) first), "
                                                   "which PyTorch 1.13's convert erases"),
                          "%s", d.entries[0].msg);
            ck_assert_uint_eq(d.entries[0].line, 13); /* add_'s line */
            ck_assert_ptr_nonnull(strstr(d.entries[0].note, "--erase-unused-in-place erases them as PyTorch does"));
            /* the kept ops read conv's dequantized value, which they change for abs's read */
            const struct bpcc_node *add = bpcc_graph_find_node(p.g, "add_");
            ck_assert_str_eq(bpcc_node_target(bpcc_node_args(add)->u.seq.items[0].u.node), "dequantize");
        }
        prepared_free(&p);
    }
}
END_TEST

/* PyTorch's observed_node_names: prepare records the weighted-module nodes it observed (their
** pattern not refused) on the root module, and convert swaps those and no others, then drops the
** record. conv's pattern [Conv2d, relu] is refused: `size` reads relu, so 1.13 takes relu's dtype as
** int. Its input is observed all the same, for conv0's output, which an observer-around rule read as
** "observed". */
START_TEST(convert_swaps_the_modules_prepare_observed)
{
    static const char *const model =
        "bpcc-model 1\n\n" CONV("conv0", 3, 3) CONV("conv", 3, 4) "\ngraph\n"
        "  %x = placeholder x ()\n"
        "  %conv0 = call_module conv0 (%x,)\n"
        "  %conv = call_module conv (%conv0,)\n"
        "  %relu = call_function torch.nn.functional.relu (%conv,)\n"
        "  %size = call_method size (%relu, 0)\n"
        "  %reshape = call_method reshape (%relu, %size, -1)\n"
        "  %output = output output (%reshape,)\n";
    for (int variant = 0; variant < 3; variant++) {
        struct prepared p;
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        ck_assert_msg(calibrated_text(model, "global: " QC_A "\n", &p, &d, true) == BPCC_OK, "%s", tu_msg(&d));
        struct bpcc_module *root = bpcc_graph_find_module(p.g, "");
        ck_assert_ptr_nonnull(root);
        const struct bpcc_value *rec = bpcc_module_attr(root, "_observed_node_names");
        ck_assert_ptr_nonnull(rec);
        ck_assert_int_eq(rec->kind, BPCC_VAL_LIST);
        ck_assert_uint_eq(rec->n, 1);
        ck_assert_str_eq(rec->u.seq.items[0].u.s, "conv0");
        ck_assert_ptr_nonnull(obs_between(p.g, "conv0", "conv")); /* conv's input is observed */
        if (variant == 1) {
            /* a model without the record (prepared before it): an observer around counts */
            ck_assert_int_eq(bpcc_module_remove_attr(root, "_observed_node_names"), BPCC_OK);
        } else if (variant == 2) {
            struct bpcc_value bad = bpcc_value_int(3);
            ck_assert_int_eq(bpcc_module_set_attr(root, "_observed_node_names", &bad, &d), BPCC_OK);
            ck_assert_int_eq(bpcc_convert(p.g, p.c, p.m, NULL, NULL, &d), BPCC_ERR_GRAPH);
            ck_assert_ptr_nonnull(strstr(tu_msg(&d), "must be a list of node names"));
            ck_assert_ptr_nonnull(bpcc_module_attr(root, "_observed_node_names")); /* rolled back */
            prepared_free(&p);
            continue;
        }
        uint32_t nm = 0;
        ck_assert_msg(bpcc_convert(p.g, p.c, p.m, NULL, &nm, &d) == BPCC_OK, "%s", tu_msg(&d));
        ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(p.g, "conv0")), "torch.ao.nn.quantized.reference.Conv2d");
        ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(p.g, "conv")),
                         variant == 0 ? "torch.nn.Conv2d" : "torch.ao.nn.quantized.reference.Conv2d");
        ck_assert_uint_eq(nm, variant == 0 ? 1 : 2);
        ck_assert_ptr_null(bpcc_module_attr(bpcc_graph_find_module(p.g, ""), "_observed_node_names"));
        prepared_free(&p);
    }
}
END_TEST

/* dynamic and weight-only quantization: an LSTM's reference module gets qparams per weight
** (<wn>_scale [1] f32, <wn>_zero_point [1] int32 as torch.int, <wn>_axis 0-d), the float16 one only
** <wn>_qscheme None and <wn>_dtype; an Embedding, whose pattern observes nothing, is converted
** all the same (per-channel float qparams), as PyTorch counts it observed */
START_TEST(convert_gives_each_weight_of_a_recurrent_module_its_qparams_and_embeddings_theirs)
{
    static const char *const model =
        "bpcc-model 1\n\nmodule lstm : torch.nn.LSTM {input_size: 4, hidden_size: 2, num_layers: 2}\n"
        "  param weight_ih_l0 : f32[8, 4]\n  param weight_hh_l0 : f32[8, 2]\n  param bias_ih_l0 : f32[8]\n"
        "  param bias_hh_l0 : f32[8]\n  param weight_ih_l1 : f32[8, 2]\n  param weight_hh_l1 : f32[8, 2]\n"
        "  param bias_ih_l1 : f32[8]\n  param bias_hh_l1 : f32[8]\n"
        "module emb : torch.nn.Embedding {num_embeddings: 5, embedding_dim: 3}\n  param weight : f32[5, 3]\n\ngraph\n"
        "  %x = placeholder x ()\n  %ids = placeholder ids ()\n  %lstm = call_module lstm (%x,)\n"
        "  %getitem = call_function operator.getitem (%lstm, 0)\n  %emb = call_module emb (%ids,)\n"
        "  %output = output output ((%getitem, %emb),)\n";
    static const char *const qcs[2] = {
        "object_type:\n  - {type: torch.nn.LSTM, qconfig: " QC_DYN "}\n"
        "  - {type: torch.nn.Embedding, qconfig: {activation: {observer: PlaceholderObserver}, weight: {observer: "
        "PerChannelMinMaxObserver, dtype: quint8, qscheme: per_channel_affine_float_qparams}}}\n",
        "object_type:\n  - {type: torch.nn.LSTM, qconfig: {activation: {observer: PlaceholderObserver, dtype: float16, "
        "compute_dtype: float16}, weight: {observer: PlaceholderObserver, dtype: float16}}}\n"};
    for (int f16 = 0; f16 < 2; f16++) {
        struct prepared p;
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        ck_assert_msg(quantize_text(model, qcs[f16], &p, &d, false) == BPCC_OK, "%s", tu_msg(&d));
        const struct bpcc_module *lstm = bpcc_graph_find_module(p.g, "lstm");
        ck_assert_str_eq(bpcc_module_type(lstm), "torch.ao.nn.quantized.reference.LSTM");
        static const char *const wn[4] = {"weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"};
        for (int i = 0; i < 4; i++) {
            char k[64];
            snprintf(k, sizeof k, "%s_dtype", wn[i]);
            ck_assert_int_eq(bpcc_module_attr(lstm, k)->u.dtype, f16 ? BPCC_DTYPE_F16 : BPCC_DTYPE_QINT8);
            snprintf(k, sizeof k, "%s_qscheme", wn[i]);
            const struct bpcc_value *qs = bpcc_module_attr(lstm, k);
            ck_assert_ptr_nonnull(qs);
            if (f16) ck_assert_int_eq(qs->kind, BPCC_VAL_NONE);
            else ck_assert_str_eq(qs->u.s, "torch.per_tensor_affine");
            snprintf(k, sizeof k, "%s_scale", wn[i]);
            const struct bpcc_tensor *sc = bpcc_module_tensor(lstm, k);
            snprintf(k, sizeof k, "%s_zero_point", wn[i]);
            const struct bpcc_tensor *zp = bpcc_module_tensor(lstm, k);
            snprintf(k, sizeof k, "%s_axis", wn[i]);
            const struct bpcc_tensor *ax = bpcc_module_tensor(lstm, k);
            if (f16) {
                ck_assert(!sc && !zp && !ax);
                continue;
            }
            ck_assert(sc && zp && ax);
            ck_assert(bpcc_tensor_ndim(sc) == 1 && bpcc_tensor_dims(sc)[0] == 1 && bpcc_tensor_dtype(zp) == BPCC_DTYPE_I32);
            ck_assert(bpcc_tensor_ndim(zp) == 1 && bpcc_tensor_ndim(ax) == 0);
            /* the weight's own range: MinMax symmetric over |w| */
            const struct bpcc_tensor *w = bpcc_module_tensor(lstm, wn[i]);
            const float *wd = bpcc_tensor_data((struct bpcc_tensor *)w);
            float amax = 0;
            for (uint64_t j = 0; j < bpcc_tensor_numel(w); j++) amax = fabsf(wd[j]) > amax ? fabsf(wd[j]) : amax;
            ck_assert(*(const float *)bpcc_tensor_data((struct bpcc_tensor *)sc) == amax / 127.5f);
        }
        struct bpcc_qparams q;
        ck_assert(!bpcc_module_weight_qparams(lstm, &q)); /* no `weight` of its own */
        const struct bpcc_module *emb = bpcc_graph_find_module(p.g, "emb");
        if (!f16) {
            ck_assert_str_eq(bpcc_module_type(emb), "torch.ao.nn.quantized.reference.Embedding");
            ck_assert(bpcc_module_weight_qparams(emb, &q) && q.kind == BPCC_QPARAMS_PER_CHANNEL && q.n == 5);
            ck_assert_int_eq(bpcc_tensor_dtype(bpcc_module_tensor(emb, "weight_zero_point")), BPCC_DTYPE_F32);
            ck_assert_str_eq(bpcc_module_attr(emb, "weight_qscheme")->u.s, "torch.per_channel_affine_float_qparams");
        } else {
            ck_assert_str_eq(bpcc_module_type(emb), "torch.nn.Embedding"); /* no qconfig: stays float */
        }
        prepared_free(&p);
    }
    /* a weighted module whose weight observer has no qparams for its integer dtype: refused, as
    ** PyTorch's convert fails (an LSTM takes such a weight as it is, as PyTorch's does) */
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(quantize_text("bpcc-model 1\n\nmodule fc : torch.nn.Linear {in_features: 8, out_features: 3}\n"
                                   "  param weight : f32[3, 8]\n\ngraph\n  %x = placeholder x ()\n"
                                   "  %fc = call_module fc (%x,)\n  %output = output output (%fc,)\n",
                                   "global: {activation: {observer: PlaceholderObserver, dtype: quint8, compute_dtype: "
                                   "quint8}, weight: {observer: PlaceholderObserver, dtype: qint8}}\n",
                                   &p, &d, false),
                     BPCC_ERR_CONFIG);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "'fc': the qconfig's weight observer (PlaceholderObserver) gives no scale or zero point for qint8 weights"));
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(p.g, "fc")), "torch.nn.Linear"); /* left as it was */
    prepared_free(&p);
}
END_TEST

/* get_new_attr_name_with_prefix: each buffer name takes the first free number of its own prefix,
** so a root buffer already called _scale_0 moves the scales on and not the zero points. The names
** are PyTorch 1.13's for the same module (a buffer _scale_0, forward `a = x + self._scale_0;
** return a + a`): the buffer's own quantize point is in the root scope too. */
START_TEST(convert_names_each_qparam_buffer_with_the_first_free_number_of_its_prefix)
{
    static const char *model = "bpcc-model 1\n\n"
                               "module \"\" : torch.fx.graph_module.GraphModule\n"
                               "  buffer _scale_0 : f32[1]\n"
                               "\ngraph\n"
                               "  %x = placeholder x ()\n"
                               "  %_scale_0 = get_attr _scale_0 ()\n"
                               "  %add = call_function operator.add (%x, %_scale_0)\n"
                               "  %add_1 = call_function operator.add (%add, %add)\n"
                               "  %output = output output (%add_1,)\n";
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_msg(quantize_text(model, "global: " QC_A "\n", &p, &d, true) == BPCC_OK, "%s", tu_msg(&d));
    const char *want[][2] = {{"_input_scale_0", "_input_zero_point_0"},
                             {"_scale_1", "_zero_point_0"},
                             {"_scale_2", "_zero_point_1"},
                             {"_scale_3", "_zero_point_2"}};
    for (uint32_t i = 0; i < 4; i++) {
        const struct bpcc_node *q = find_target(p.g, "torch.quantize_per_tensor", i);
        ck_assert_ptr_nonnull(q);
        ck_assert_str_eq(bpcc_node_target(bpcc_node_args(q)->u.seq.items[1].u.node), want[i][0]);
        ck_assert_str_eq(bpcc_node_target(bpcc_node_args(q)->u.seq.items[2].u.node), want[i][1]);
    }
    ck_assert_ptr_null(find_target(p.g, "torch.quantize_per_tensor", 4));
    prepared_free(&p);
}
END_TEST

/* A buffer's name need only be free among the root's attributes (get_new_attr_name_with_prefix);
** a node may have it already, and the get_attr node is then numbered as FX numbers a taken name. */
START_TEST(convert_numbers_a_get_attr_node_whose_buffer_name_a_node_has)
{
    static const char *model = "bpcc-model 1\n\n"
                               "graph\n"
                               "  %x = placeholder x ()\n"
                               "  %_scale_0 = call_function operator.add (%x, %x)\n"
                               "  %add = call_function operator.add (%_scale_0, %_scale_0)\n"
                               "  %output = output output (%add,)\n";
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_msg(quantize_text(model, "global: " QC_A "\n", &p, &d, true) == BPCC_OK, "%s", tu_msg(&d));
    const struct bpcc_node *q = find_target(p.g, "torch.quantize_per_tensor", 1); /* the first add's output */
    ck_assert_ptr_nonnull(q);
    const struct bpcc_node *scale = bpcc_node_args(q)->u.seq.items[1].u.node;
    ck_assert_str_eq(bpcc_node_target(scale), "_scale_0");
    ck_assert_str_eq(bpcc_node_name(scale), "_scale_1");
    const struct bpcc_node *add = bpcc_graph_find_node(p.g, "_scale_0");
    ck_assert_ptr_nonnull(add);
    ck_assert_str_eq(bpcc_node_target(add), "operator.add");
    const struct bpcc_module *root = bpcc_graph_find_module(p.g, "");
    ck_assert_ptr_nonnull(bpcc_module_tensor(root, "_scale_0"));
    /* the second add's output: buffer _scale_1 (no attribute has it), its node numbered on */
    q = find_target(p.g, "torch.quantize_per_tensor", 2);
    ck_assert_ptr_nonnull(q);
    scale = bpcc_node_args(q)->u.seq.items[1].u.node;
    ck_assert_str_eq(bpcc_node_target(scale), "_scale_1");
    ck_assert_str_eq(bpcc_node_name(scale), "_scale_2");
    prepared_free(&p);
}
END_TEST

START_TEST(convert_refuses_an_uncalibrated_model)
{
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(quantize_text(model_conv_relu, "global: " QC_A "\n", &p, &d, false), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "calibrate the model first"));
    prepared_free(&p);
}
END_TEST

/* A QAT model as prepare_qat_fx leaves it, written out: fake quantizes whose observers hold the
** statistics of training, and a QAT Linear with its weight fake quantize. */
#define FQ_ACT(name) \
    "module " name " : torch.ao.quantization.FakeQuantize {quant_min: 0, quant_max: 255, dtype: torch.quint8, " \
    "qscheme: torch.per_tensor_affine}\n  buffer observer_enabled : i64[1]\n  buffer scale : f32[1]\n" \
    "  buffer zero_point : i32[1]\n" \
    "module " name ".activation_post_process : torch.ao.quantization.MovingAverageMinMaxObserver {dtype: torch.quint8, " \
    "qscheme: torch.per_tensor_affine, quant_min: 0, quant_max: 255}\n  buffer min_val : f32[]\n  buffer max_val : f32[]\n"
static const char *model_qat_linear =
    "bpcc-model 1\n\n" FQ_ACT("fq0")
    "module fc : torch.ao.nn.qat.Linear {training: False, in_features: 4, out_features: 2}\n"
    "  param weight : f32[2, 4]\n  param bias : f32[2]\n"
    "module fc.weight_fake_quant : torch.ao.quantization.FakeQuantize {quant_min: -128, quant_max: 127, dtype: torch.qint8, "
    "qscheme: torch.per_tensor_symmetric}\n  buffer observer_enabled : i64[1]\n"
    "module fc.weight_fake_quant.activation_post_process : torch.ao.quantization.MovingAverageMinMaxObserver {dtype: "
    "torch.qint8, qscheme: torch.per_tensor_symmetric, quant_min: -128, quant_max: 127}\n"
    "  buffer min_val : f32[]\n  buffer max_val : f32[]\n" FQ_ACT("fq1")
    "\ngraph\n  %x = placeholder x ()\n  %fq0 = call_module fq0 (%x,)\n  %fc = call_module fc (%fq0,)\n"
    "  %fq1 = call_module fq1 (%fc,)\n  %output = output output (%fq1,)\n";

/* tensor `name` of module `module`: float32 values v, or (v NULL) the int64 value iv; a status,
** so that the allocation-failure loop can run it */
static enum bpcc_status set_tensor(struct bpcc_graph *g, const char *module, const char *name, uint32_t ndim,
                                   const int64_t *dims, const float *v, int64_t iv, struct bpcc_diag *d)
{
    struct bpcc_module *m = bpcc_graph_find_module(g, module);
    ck_assert_ptr_nonnull(m);
    struct bpcc_tensor *t;
    enum bpcc_status s = bpcc_tensor_new(g, v ? BPCC_DTYPE_F32 : BPCC_DTYPE_I64, ndim, dims, &t, d);
    if (s) return s;
    if (v) memcpy(bpcc_tensor_data(t), v, bpcc_tensor_numel(t) * sizeof(float));
    else *(int64_t *)bpcc_tensor_data(t) = iv;
    return bpcc_module_set_tensor(m, name, strcmp(name, "weight") && strcmp(name, "bias") ? BPCC_TENSOR_BUFFER : BPCC_TENSOR_PARAM,
                                  t, d);
}

/* the QAT model with training's statistics: activations in [0, 2.55] (the fake quantizes' own
** scale buffers 0.5, which convert must not read), the weight observer's [-2, 2] */
static enum bpcc_status qat_model_s(bool weight_observer_on, struct bpcc_graph **out, struct bpcc_diag *d)
{
    struct bpcc_graph *g;
    enum bpcc_status s = bpcc_graph_parse(model_qat_linear, strlen(model_qat_linear), "qat.bpcc", &g, d);
    if (s) return s;
    static const float w[8] = {-1.0f, 0.5f, 0.25f, 0.0f, 0.1f, 0.2f, 0.3f, 0.4f}, b[2] = {0.5f, -0.5f};
    s = set_tensor(g, "fc", "weight", 2, (int64_t[]){2, 4}, w, 0, d);
    if (!s) s = set_tensor(g, "fc", "bias", 1, (int64_t[]){2}, b, 0, d);
    const char *fqs[2] = {"fq0", "fq1"};
    for (int i = 0; i < 2 && !s; i++) {
        char obs[64];
        snprintf(obs, sizeof obs, "%s.activation_post_process", fqs[i]);
        s = set_tensor(g, obs, "min_val", 0, NULL, (float[]){0.0f}, 0, d);
        if (!s) s = set_tensor(g, obs, "max_val", 0, NULL, (float[]){2.55f}, 0, d);
        if (!s) s = set_tensor(g, fqs[i], "scale", 1, (int64_t[]){1}, (float[]){0.5f}, 0, d);
        if (!s) s = set_tensor(g, fqs[i], "observer_enabled", 1, (int64_t[]){1}, NULL, 1, d);
    }
    const char *wo = "fc.weight_fake_quant.activation_post_process";
    if (!s) s = set_tensor(g, wo, "min_val", 0, NULL, (float[]){-2.0f}, 0, d);
    if (!s) s = set_tensor(g, wo, "max_val", 0, NULL, (float[]){2.0f}, 0, d);
    if (!s) s = set_tensor(g, "fc.weight_fake_quant", "observer_enabled", 1, (int64_t[]){1}, NULL, weight_observer_on, d);
    if (s) bpcc_graph_free(g);
    else *out = g;
    return s;
}

static struct bpcc_graph *qat_model(bool weight_observer_on)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g = NULL;
    ck_assert_msg(qat_model_s(weight_observer_on, &g, &d) == BPCC_OK, "%s", tu_msg(&d));
    return g;
}

static void set_f32(struct bpcc_graph *g, const char *module, const char *name, uint32_t ndim, const int64_t *dims,
                    const float *v)
{
    ck_assert_int_eq(set_tensor(g, module, name, ndim, dims, v, 0, NULL), BPCC_OK);
}

static enum bpcc_status convert_qat(struct bpcc_graph *g, struct bpcc_diag *d)
{
    struct bpcc_config *c = NULL;
    struct bpcc_qconfig_mapping *m = NULL;
    const char *q = "global: {activation: {observer: MinMaxObserver}, weight: {observer: MinMaxObserver, dtype: qint8, "
                    "qscheme: per_tensor_symmetric}}\n";
    enum bpcc_status s = bpcc_config_load("fbgemm", NULL, &c, d);
    if (!s) s = bpcc_qconfig_load_text(q, strlen(q), "q.yaml", NULL, &m, d);
    if (!s) s = bpcc_convert(g, c, m, NULL, NULL, d);
    bpcc_qconfig_free(m);
    bpcc_config_free(c);
    return s;
}

static enum bpcc_status convert_qat_oom(void *ctx, struct bpcc_diag *d)
{
    struct bpcc_graph *g;
    enum bpcc_status s = qat_model_s(ctx != NULL, &g, d);
    if (s) return s;
    s = convert_qat(g, d);
    bpcc_graph_free(g);
    return s;
}

START_TEST(convert_of_a_qat_model_survives_every_allocation_failure)
{
    ck_assert_int_gt(tu_oom_loop("qat convert", convert_qat_oom, NULL), 20);
    ck_assert_int_gt(tu_oom_loop("qat convert, weight observer on", convert_qat_oom, (void *)1), 20);
}
END_TEST

/* Convert of a QAT model: each fake quantize's qparams are its observer's (not its own scale
** buffer); the QAT Linear becomes a reference Linear whose weight qparams are its weight fake
** quantize's observer's, which sees the float weight once more when it is on (a moving average:
** min -2 + 0.01 (-1 - -2), max 2 + 0.01 (0.5 - 2)) and not when it is off. */
START_TEST(convert_takes_a_qat_models_qparams_from_its_fake_quantizes_observers)
{
    for (int on = 0; on < 2; on++) {
        struct bpcc_graph *g = qat_model(on);
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        ck_assert_msg(convert_qat(g, &d) == BPCC_OK, "%s", tu_msg(&d));
        const struct bpcc_module *fc = bpcc_graph_find_module(g, "fc");
        ck_assert_str_eq(bpcc_module_type(fc), "torch.ao.nn.quantized.reference.Linear");
        ck_assert_ptr_null(bpcc_graph_find_module(g, "fc.weight_fake_quant"));
        ck_assert_ptr_null(bpcc_graph_find_module(g, "fq0"));
        struct bpcc_qparams q;
        ck_assert(bpcc_module_weight_qparams(fc, &q));
        float mx = on ? -(-2.0f + 0.01f * (-1.0f - -2.0f)) : 2.0f; /* symmetric: the larger magnitude */
        if (on) ck_assert(mx > 2.0f + 0.01f * (0.5f - 2.0f));
        ck_assert_float_eq((float)bpcc_qparams_scale(&q, 0), mx / 127.5f);
        const struct bpcc_node *qn = find_target(g, "torch.quantize_per_tensor", 0);
        ck_assert_ptr_nonnull(qn);
        ck_assert(bpcc_node_qparams(g, qn, &q));
        ck_assert_float_eq((float)bpcc_qparams_scale(&q, 0), 2.55f / 255.0f);
        ck_assert_int_eq((int64_t)bpcc_qparams_zero_point(&q, 0), 0);
        ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
        bpcc_graph_free(g);
    }
}
END_TEST

/* What cannot be converted is said, and the graph is left as it was: a QAT module without its
** weight fake quantize, an observer whose statistics do not fit it; and a QAT model is not run
** by the interpreter nor prepared again */
START_TEST(convert_refuses_a_qat_model_it_cannot_read_and_run_and_prepare_refuse_one)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g = qat_model(true);
    bpcc_graph_remove_module(g, "fc.weight_fake_quant", NULL);
    ck_assert_int_eq(convert_qat(g, &d), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "has no weight fake quantize"));
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "fc")), "torch.ao.nn.qat.Linear");
    ck_assert_ptr_nonnull(bpcc_graph_find_module(g, "fq0"));
    bpcc_graph_free(g);

    g = qat_model(true);
    set_f32(g, "fq1.activation_post_process", "min_val", 1, (int64_t[]){3}, (float[]){0, 0, 0});
    bpcc_diag_init(&d);
    ck_assert_int_eq(convert_qat(g, &d), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "min_val and max_val are not one-element"));
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "fc")), "torch.ao.nn.qat.Linear");

    /* the interpreter goes on from an observer's statistics, and says when they do not fit it */
    struct bpcc_exec *e;
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_exec_new(g, 1, &e, &d), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "observer 'fq1.activation_post_process': its min_val and max_val"));
    bpcc_graph_free(g);
    g = qat_model(true);
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_exec_new(g, 1, &e, &d), BPCC_OK);
    struct xtensor *x = bpcc_xtensor_new(2, (int64_t[]){1, 4});
    struct xval in = {.k = XV_TENSOR, .u.t = x};
    ck_assert_int_eq(bpcc_exec_run(e, &in, 1, NULL, &d), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "convert the model first"));
    bpcc_exec_free(e);
    bpcc_xtensor_free(x);

    struct bpcc_config *c;
    struct bpcc_qconfig_mapping *m;
    ck_assert_int_eq(bpcc_config_load("fbgemm", NULL, &c, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_qconfig_load_text("global: null\n", 13, "q.yaml", NULL, &m, &d), BPCC_OK);
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_prepare(g, c, m, NULL, NULL, &d), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "prepared for QAT already"));
    bpcc_qconfig_free(m);
    bpcc_config_free(c);
    bpcc_graph_free(g);
}
END_TEST

/* c2, c3 and c4 have one attribute array (the parser shares equal ones); c3's weight is per channel */
static const char *model_alike_convs =
    "bpcc-model 1\n\n" CONV("c1", 3, 4) CONV("c2", 4, 4) CONV("c3", 4, 4) CONV("c4", 4, 4)
    "\ngraph\n  %x = placeholder x ()\n  %c1 = call_module c1 (%x,)\n  %c2 = call_module c2 (%c1,)\n"
    "  %c3 = call_module c3 (%c2,)\n  %c4 = call_module c4 (%c3,)\n  %output = output output (%c4,)\n";
#define QC_ALIKE \
    "global: " QC_A "\nmodule_name:\n  - {name: c3, qconfig: {activation: {observer: MinMaxObserver}, weight: " \
    "{observer: PerChannelMinMaxObserver, dtype: qint8, qscheme: per_channel_symmetric}}}\n"

/* Weighted modules whose attributes were one array and that are given the same weight qscheme and
** dtype end with one array again; one given another qscheme has its own, and a change to one of
** those that share is its own. */
START_TEST(convert_gives_modules_converted_alike_one_attribute_array)
{
    struct prepared p;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_msg(quantize_text(model_alike_convs, QC_ALIKE, &p, &d, true) == BPCC_OK, "%s", tu_msg(&d));
    struct bpcc_module *c1 = bpcc_graph_find_module(p.g, "c1"), *c2 = bpcc_graph_find_module(p.g, "c2"),
                       *c3 = bpcc_graph_find_module(p.g, "c3"), *c4 = bpcc_graph_find_module(p.g, "c4");
    ck_assert(c1 && c2 && c3 && c4);
    /* one array: an attribute of each is at one address */
    ck_assert_ptr_eq(bpcc_module_attr(c2, "weight_dtype"), bpcc_module_attr(c4, "weight_dtype"));
    ck_assert_ptr_ne(bpcc_module_attr(c2, "weight_dtype"), bpcc_module_attr(c3, "weight_dtype"));
    ck_assert_ptr_ne(bpcc_module_attr(c1, "weight_dtype"), bpcc_module_attr(c2, "weight_dtype"));
    ck_assert_str_eq(bpcc_module_attr(c4, "weight_qscheme")->u.s, "torch.per_tensor_affine");
    ck_assert_str_eq(bpcc_module_attr(c3, "weight_qscheme")->u.s, "torch.per_channel_affine");
    ck_assert_int_eq(bpcc_module_attr(c4, "weight_dtype")->u.dtype, BPCC_DTYPE_QINT8);
    ck_assert_int_eq(bpcc_module_attr(c4, "in_channels")->u.i, 4);
    ck_assert_int_eq(bpcc_module_attr(c1, "in_channels")->u.i, 3);
    ck_assert_str_eq(bpcc_module_type(c4), "torch.ao.nn.quantized.reference.Conv2d");
    struct bpcc_value v = bpcc_value_int(9);
    ck_assert_int_eq(bpcc_module_set_attr(c4, "in_channels", &v, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_module_attr(c4, "in_channels")->u.i, 9);
    ck_assert_int_eq(bpcc_module_attr(c2, "in_channels")->u.i, 4);
    prepared_free(&p);
}
END_TEST

static enum bpcc_status quantize_oom(void *ctx, struct bpcc_diag *d)
{
    (void)ctx;
    struct prepared p;
    enum bpcc_status s = quantize_text(model_conv_relu, "global: " QC_A "\n", &p, d, true);
    prepared_free(&p);
    if (s) return s;
    s = quantize_text(model_alike_convs, QC_ALIKE, &p, d, true); /* the modules converted alike */
    prepared_free(&p);
    if (s) return s;
    /* a quantized input and output: a dequantize node made, the output's dequantize erased */
    uint32_t in0 = 0;
    struct bpcc_prepare_options o = {.input_quantized = &in0, .n_input_quantized = 1, .output_quantized = true};
    s = prepare_text_with(model_conv_relu, "fbgemm", "global: " QC_A "\n", &o, &p, d);
    if (!s) s = ramp_calibrated(&p, d, true);
    if (!s) s = bpcc_convert(p.g, p.c, p.m, NULL, NULL, d);
    prepared_free(&p);
    return s;
}

START_TEST(convert_survives_every_allocation_failure)
{
    int n = tu_oom_loop("quantize", quantize_oom, NULL);
    ck_assert_int_gt(n, 50);
    bpcc_undo_grow_by_record(true); /* and each record of the passes' undo logs */
    int m = tu_oom_loop("quantize", quantize_oom, NULL);
    bpcc_undo_grow_by_record(false);
    ck_assert_int_gt(m, n + 20);
}
END_TEST

static enum bpcc_status prepare_and_report(void *ctx, struct bpcc_diag *d)
{
    (void)ctx;
    struct prepared p;
    enum bpcc_status s = prepare_text("bpcc-model 1\n\n" CONV("conv", 3, 4) "module pool : torch.nn.MaxPool2d {kernel_size: 2}\n"
                                      "module q : paddle.nn.quant.Stub {observer: {observer: \"MinMaxObserver\"}}\n\ngraph\n"
                                      "  %x = placeholder x ()\n  %q = call_module q (%x,)\n  %conv = call_module conv (%q,)\n  %pool = call_module pool (%conv,)\n"
                                      "  %sig = call_function torch.sigmoid (%pool,)\n"
                                      "  %cat = call_function torch.cat ([%pool, %sig], 1)\n  %output = output output (%cat,)\n",
                                      "fbgemm", "global: " QC_A "\nobject_type:\n  - {type: torch.sigmoid, qconfig: " QC_FIXED01 "}\n",
                                      false, &p, d);
    char *j = NULL;
    if (!s) s = bpcc_prepare_plan_json(p.r, 2, &j, d);
    bpcc_free(j);
    j = NULL;
    if (!s) s = bpcc_prepare_explain(p.r, true, &j, d);
    bpcc_free(j);
    prepared_free(&p);
    return s;
}

START_TEST(prepare_survives_every_allocation_failure)
{
    int n = tu_oom_loop("prepare", prepare_and_report, NULL);
    ck_assert_int_gt(n, 30);
    /* and each record of the pass's undo log an allocation that fails in turn */
    bpcc_undo_grow_by_record(true);
    int m = tu_oom_loop("prepare", prepare_and_report, NULL);
    bpcc_undo_grow_by_record(false);
    ck_assert_int_gt(m, n + 20);
}
END_TEST

/* what a graph is: its JSON (nodes with users, modules, attributes, tensor headers), its text and
** every tensor's bytes */
static char *fingerprint(const struct bpcc_graph *g)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    char *json, *text;
    ck_assert_int_eq(bpcc_graph_to_json(g, 0, &json, &d), BPCC_OK);
    ck_assert_msg(bpcc_graph_print(g, "w.safetensors", &text, NULL, &d) == BPCC_OK, "%s", tu_msg(&d));
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < bpcc_graph_n_modules(g); i++) {
        struct bpcc_module *m = bpcc_graph_module(g, i);
        for (uint32_t k = 0; k < bpcc_module_n_tensors(m); k++) {
            struct bpcc_tensor *t = bpcc_module_tensor_at(m, k, NULL, NULL);
            const unsigned char *b = bpcc_tensor_data(t);
            for (size_t j = 0; b && j < bpcc_tensor_nbytes(t); j++) h = (h ^ b[j]) * 1099511628211ull;
        }
    }
    size_t n = strlen(json) + strlen(text) + 32;
    char *f = malloc(n);
    snprintf(f, n, "%s\n%s\n%016llx", json, text, (unsigned long long)h);
    bpcc_free(json);
    bpcc_free(text);
    return f;
}

enum pass_kind { PASS_FUSE, PASS_PREPARE, PASS_CALIBRATE, PASS_CONVERT };

struct flow {
    struct bpcc_graph *g;
    struct bpcc_config *c;
    struct bpcc_qconfig_mapping *m;
    const char *batch;
};

static enum bpcc_status pass(struct flow *f, enum pass_kind k, struct bpcc_diag *d)
{
    struct bpcc_prepare_report *r = NULL;
    enum bpcc_status s;
    switch (k) {
    case PASS_FUSE: return bpcc_fuse(f->g, f->c, NULL, NULL, d);
    case PASS_PREPARE:
        s = bpcc_prepare(f->g, f->c, f->m, NULL, &r, d);
        bpcc_prepare_report_free(r);
        return s;
    case PASS_CALIBRATE: return bpcc_calibrate(f->g, &f->batch, 1, NULL, d);
    default: return bpcc_convert(f->g, f->c, f->m, NULL, NULL, d);
    }
}

static float ramp23(uint64_t i) { return (float)((int)(i * 7919 % 23) - 11) / 8.0f; }

/* A tiny_resnet batch [1, 3, 8, 8] in a temporary file */
static char *tiny_batch(void) { return tu_write_batch("x", 4, (int64_t[]){1, 3, 8, 8}, ramp23); }

/* Each failure point of each pass in turn (heap allocations; with every_record, each record of
** the undo log as well): the pass fails with BPCC_ERR_NOMEM and leaves the graph as it was. */
static void check_rollback(const char *model, const int64_t *batch_dims, bool every_record, bool implicit)
{
    bpcc_undo_grow_by_record(every_record);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct flow f = {.batch = tu_write_batch("x", 4, batch_dims, ramp23)};
    ck_assert_int_eq(bpcc_config_load("fbgemm", NULL, &f.c, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_qconfig_load("fbgemm", NULL, &f.m, &d), BPCC_OK);
    ck_assert_msg(bpcc_graph_load(model, &f.g, &d) == BPCC_OK, "%s", tu_msg(&d));
    /* the same passes on a graph that no allocation failure touched */
    struct flow ref = f;
    ck_assert_int_eq(bpcc_graph_load(model, &ref.g, &d), BPCC_OK);
    bpcc_graph_set_implicit_qparams(f.g, implicit);
    bpcc_graph_set_implicit_qparams(ref.g, implicit);
    static const char *const names[] = {"fuse", "prepare", "calibrate", "convert"};
    for (int k = PASS_FUSE; k <= PASS_CONVERT; k++) {
        ck_assert_int_eq(pass(&ref, (enum pass_kind)k, &d), BPCC_OK);
        char *before = fingerprint(f.g);
        int failures = 0;
        for (uint64_t n = 1;; n++) {
            struct bpcc_diag dn;
            bpcc_diag_init(&dn);
            bpcc_alloc_fail_at(n, false);
            enum bpcc_status s = pass(&f, (enum pass_kind)k, &dn);
            bpcc_alloc_fail_at(0, false);
            if (s == BPCC_OK) break;
            ck_assert_msg(s == BPCC_ERR_NOMEM, "%s: allocation %llu: %s", names[k], (unsigned long long)n, tu_msg(&dn));
            ck_assert_msg(dn.code == BPCC_ERR_NOMEM, "%s: allocation %llu: %s", names[k], (unsigned long long)n, tu_msg(&dn));
            char *after = fingerprint(f.g);
            ck_assert_msg(!strcmp(before, after), "%s changed the graph when allocation %llu failed", names[k],
                          (unsigned long long)n);
            free(after);
            /* the restored graph still verifies and passes still run on it */
            ck_assert_int_eq(bpcc_graph_verify(f.g, &dn), BPCC_OK);
            failures++;
            ck_assert(n < 1000000);
        }
        /* not a vacuous loop: the passes take their memory from arenas in big chunks and log
        ** into one growing buffer, so each has a few heap allocations (fuse on this model 9) */
        ck_assert_msg(failures > 5, "%s: only %d allocation points", names[k], failures);
        char *done = fingerprint(f.g);
        ck_assert_msg(strcmp(before, done) || k == PASS_CALIBRATE, "%s did nothing", names[k]);
        /* the failed attempts left no trace: the names they gave were freed again (a name kept
        ** reserved would number the next one _1 further), and every node is found by its name */
        char *expect = fingerprint(ref.g);
        ck_assert_msg(!strcmp(done, expect), "%s after %d failed attempts differs from a clean run", names[k], failures);
        free(expect);
        for (struct bpcc_node *n = bpcc_graph_first(f.g); n; n = bpcc_node_next(n))
            ck_assert_ptr_eq(bpcc_graph_find_node(f.g, bpcc_node_name(n)), n);
        free(done);
        free(before);
    }
    bpcc_graph_free(ref.g);
    /* and a failure that is not an allocation: convert on a graph that is not calibrated */
    bpcc_graph_free(f.g);
    ck_assert_int_eq(bpcc_graph_load(model, &f.g, &d), BPCC_OK);
    ck_assert_int_eq(pass(&f, PASS_PREPARE, &d), BPCC_OK);
    char *before = fingerprint(f.g);
    ck_assert_int_eq(pass(&f, PASS_CONVERT, &d), BPCC_ERR_GRAPH);
    char *after = fingerprint(f.g);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    bpcc_graph_free(f.g);
    bpcc_config_free(f.c);
    bpcc_qconfig_free(f.m);
    unlink(f.batch);
    free((char *)f.batch);
    bpcc_undo_grow_by_record(false);
}

/* the model's output on a ramp batch of `dims` (the interpreter) */
static struct xval run_ramp(struct bpcc_graph *g, uint32_t ndim, const int64_t *dims)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_exec *e;
    ck_assert_msg(bpcc_exec_new(g, 1, &e, &d) == BPCC_OK, "%s", tu_msg(&d));
    struct xtensor *x = bpcc_xtensor_new(ndim, dims);
    ck_assert_ptr_nonnull(x);
    for (uint64_t i = 0; i < x->numel; i++) x->data[i] = (float)((int)(i * 7919 % 23) - 11) / 8.0f;
    struct xval in = {.k = XV_TENSOR, .u.t = x}, out = {0};
    ck_assert_msg(bpcc_exec_run(e, &in, 1, &out, &d) == BPCC_OK, "%s", tu_msg(&d));
    bpcc_exec_free(e);
    bpcc_xtensor_free(x);
    return out;
}

/* Two calibrated copies of a model, g[1] set to leave the qparams' get_attr nodes implicit: convert
** each and check they are the same model (see below); the converted text of g[1] in *text1 */
static void check_implicit_alike(struct bpcc_graph *g[2], const struct bpcc_config *c, const struct bpcc_qconfig_mapping *m,
                                 const int64_t dims[4], char **text1)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    uint32_t nq[2];
    char *text[2];
    for (int i = 0; i < 2; i++) {
        bpcc_graph_set_implicit_qparams(g[i], i == 1);
        ck_assert_msg(bpcc_convert(g[i], c, m, &nq[i], NULL, &d) == BPCC_OK, "%s", tu_msg(&d));
        ck_assert_msg(bpcc_graph_verify(g[i], &d) == BPCC_OK, "%s", tu_msg(&d));
        ck_assert_int_eq(bpcc_graph_print(g[i], "w.safetensors", &text[i], NULL, &d), BPCC_OK);
    }
    ck_assert_uint_gt(nq[0], 1);
    ck_assert_uint_eq(nq[0], nq[1]);
    ck_assert_msg(!strcmp(text[0], text[1]), "the text differs:\n%s\n---\n%s", text[0], text[1]);
    /* and the JSON, where the implicit nodes stand where the nodes are, with their users */
    char *json[2];
    for (int i = 0; i < 2; i++) ck_assert_int_eq(bpcc_graph_to_json(g[i], 0, &json[i], &d), BPCC_OK);
    ck_assert_msg(!strcmp(json[0], json[1]), "the JSON differs:\n%s\n---\n%s", json[0], json[1]);
    for (int i = 0; i < 2; i++) bpcc_free(json[i]);
    /* the same quantize nodes; the qparams read through get_attr nodes and through ATTR arguments */
    uint32_t n_quantize = 0, n_getattr = 0;
    for (const struct bpcc_node *n = bpcc_graph_first(g[0]); n; n = bpcc_node_next(n)) {
        const char *t = bpcc_node_target(n);
        if (bpcc_node_kind(n) == BPCC_NODE_GET_ATTR && strstr(t, "_scale_")) n_getattr++;
        if (strcmp(t, "torch.quantize_per_tensor") && strcmp(t, "torch.quantize_per_channel")) continue;
        n_quantize++;
        const struct bpcc_node *q = bpcc_graph_find_node(g[1], bpcc_node_name(n));
        ck_assert_ptr_nonnull(q);
        const struct bpcc_value *a = bpcc_node_args(q);
        ck_assert_int_eq(a->u.seq.items[1].kind, BPCC_VAL_ATTR);
        ck_assert_int_eq(a->u.seq.items[2].kind, BPCC_VAL_ATTR);
        /* named as the node is; the name finds no node, and a node made under it is numbered */
        const char *implicit = a->u.seq.items[1].u.attr.name;
        ck_assert_str_eq(implicit, bpcc_node_name(bpcc_node_args(n)->u.seq.items[1].u.node));
        ck_assert_ptr_null(bpcc_graph_find_node(g[1], implicit));
        struct bpcc_qparams q0, q1;
        ck_assert(bpcc_node_qparams(g[0], n, &q0));
        ck_assert(bpcc_node_qparams(g[1], q, &q1));
        ck_assert_int_eq(q0.kind, q1.kind);
        ck_assert_uint_eq(q0.n, q1.n);
        for (uint64_t k = 0; k < q0.n; k++) {
            ck_assert(bpcc_qparams_scale(&q0, k) == bpcc_qparams_scale(&q1, k));
            ck_assert(bpcc_qparams_zero_point(&q0, k) == bpcc_qparams_zero_point(&q1, k));
        }
        if (n_quantize == 1) {
            struct bpcc_node *made;
            ck_assert_int_eq(bpcc_graph_create_node(g[1], BPCC_NODE_GET_ATTR, implicit, implicit, NULL, NULL, &made, &d),
                             BPCC_OK);
            ck_assert_str_ne(bpcc_node_name(made), implicit);
            ck_assert_int_eq(bpcc_node_erase(made, &d), BPCC_OK);
        }
    }
    ck_assert_uint_eq(n_quantize, nq[0]);
    ck_assert_uint_eq(n_getattr, nq[0]);
    ck_assert_uint_eq(bpcc_graph_n_nodes(g[0]), bpcc_graph_n_nodes(g[1]) + 2 * nq[0]);
    /* the same outputs, bit for bit */
    struct xval o[2];
    for (int i = 0; i < 2; i++) o[i] = run_ramp(g[i], 4, dims);
    const struct xval *t0 = o[0].k == XV_SEQ ? &o[0].u.seq.items[0] : &o[0];
    const struct xval *t1 = o[1].k == XV_SEQ ? &o[1].u.seq.items[0] : &o[1];
    ck_assert_int_eq(t0->k, XV_TENSOR);
    ck_assert_int_eq(t1->k, XV_TENSOR);
    ck_assert_uint_eq(t0->u.t->numel, t1->u.t->numel);
    ck_assert(!memcmp(t0->u.t->data, t1->u.t->data, t0->u.t->numel * sizeof(float)));
    for (int i = 0; i < 2; i++) bpcc_xval_release(&o[i]);
    bpcc_free(text[0]);
    *text1 = text[1];
}

/* Convert leaving the qparams' get_attr nodes implicit (bpcc_graph_set_implicit_qparams, as the
** bpcc tool converts) gives the model it gives with the nodes: the same text byte for byte (the
** get_attr lines where PyTorch has them, numbered as FX numbers them where a node has the name), the
** same qparams read off each quantize node, the same outputs bit for bit, two nodes fewer a
** quantize point; their names are taken (a node made later under one is numbered) and find no node.
** On models exported from PyTorch (per-tensor and per-channel quantize points, functional linear's
** weight) and on one whose float nodes have the names the qparam nodes would get. */
START_TEST(convert_with_implicit_qparams_prints_runs_and_reads_as_with_the_nodes)
{
    const struct {
        const char *path;
        int64_t dims[4];
    } models[] = {{FIXTURES_DIR "/torch/tiny_resnet.bpcc", {1, 3, 8, 8}},
                  {FIXTURES_DIR "/torch/tiny_functional.bpcc", {2, 3, 4, 4}},
                  {FIXTURES_DIR "/torch/tiny_blocks.bpcc", {1, 4, 4, 4}}};
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        struct flow f = {.batch = tu_write_batch("x", 4, models[k].dims, ramp23)};
        ck_assert_int_eq(bpcc_config_load("fbgemm", NULL, &f.c, &d), BPCC_OK);
        ck_assert_int_eq(bpcc_qconfig_load("fbgemm", NULL, &f.m, &d), BPCC_OK);
        struct bpcc_graph *g[2];
        for (int i = 0; i < 2; i++) {
            ck_assert_msg(bpcc_graph_load(models[k].path, &f.g, &d) == BPCC_OK, "%s", tu_msg(&d));
            for (int j = PASS_FUSE; j < PASS_CONVERT; j++) ck_assert_int_eq(pass(&f, (enum pass_kind)j, &d), BPCC_OK);
            g[i] = f.g;
        }
        char *text;
        check_implicit_alike(g, f.c, f.m, models[k].dims, &text);
        bpcc_free(text);
        for (int i = 0; i < 2; i++) bpcc_graph_free(g[i]);
        bpcc_config_free(f.c);
        bpcc_qconfig_free(f.m);
        unlink(f.batch);
        free((char *)f.batch);
    }
    static const char *const clash =
        "bpcc-model 1\n\n" CONV("conv", 3, 4) "\ngraph\n"
        "  %x = placeholder x ()\n"
        "  %_input_scale_0 = call_function torch.nn.functional.relu (%x,)\n"
        "  %conv = call_module conv (%_input_scale_0,)\n"
        "  %_scale_1 = call_function torch.nn.functional.relu (%conv,)\n"
        "  %output = output output ((%_scale_1, %_input_scale_0),)\n";
    struct prepared p[2];
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(calibrated_text(clash, "global: " QC_A "\n", &p[i], &d, true) == BPCC_OK, "%s", tu_msg(&d));
    char *text;
    check_implicit_alike((struct bpcc_graph *[2]){p[0].g, p[1].g}, p[0].c, p[0].m, (int64_t[]){1, 3, 4, 4}, &text);
    /* FX numbers the qparam nodes whose names float nodes have, counting up from the name's number;
    ** the buffers keep theirs (the model has no scopes: the stems are empty) */
    ck_assert_msg(strstr(text, "%_input_scale_1 = get_attr _input_scale_0 ()\n") &&
                      strstr(text, "%_scale_2 = get_attr _scale_1 ()\n") && strstr(text, "%_scale_0 = get_attr _scale_0 ()\n"),
                  "%s", text);
    bpcc_free(text);
    for (int i = 0; i < 2; i++) prepared_free(&p[i]);
}
END_TEST

#define TINY_RESNET FIXTURES_DIR "/torch/tiny_resnet.bpcc", (int64_t[]){1, 3, 8, 8}

START_TEST(every_pass_leaves_its_graph_untouched_when_an_allocation_fails) { check_rollback(TINY_RESNET, false, false); }
END_TEST

/* convert with implicit qparam nodes (bpcc_graph_set_implicit_qparams) reserves their names: a
** failed convert gives them back, as it does the names of the nodes it made */
START_TEST(convert_with_implicit_qparams_leaves_its_graph_untouched_when_an_allocation_fails)
{
    check_rollback(TINY_RESNET, false, true);
    check_rollback(FIXTURES_DIR "/torch/tiny_functional.bpcc", (int64_t[]){2, 3, 4, 4}, true, true);
}
END_TEST

/* A change whose undo record finds no memory is left out, and the pass fails and is played back:
** the mutators that cannot fail (moving a node, unlinking a module) included. On the three
** models exported from PyTorch: conv-bn-relu chains with residual adds; functional ops (F.relu,
** torch.cat, linear); blocks with shared modules and submodules. */
START_TEST(every_pass_leaves_its_graph_untouched_when_its_undo_log_cannot_grow)
{
    check_rollback(TINY_RESNET, true, false);
    check_rollback(FIXTURES_DIR "/torch/tiny_functional.bpcc", (int64_t[]){2, 3, 4, 4}, true, false);
    check_rollback(FIXTURES_DIR "/torch/tiny_blocks.bpcc", (int64_t[]){1, 4, 4, 4}, true, false);
}
END_TEST

/* the weights of the conv modules batch norms were folded into (conv1, conv2 of tiny_resnet),
** after fusion: ConvReLU2d's child 0 or a plain Conv2d */
static uint32_t folded_weights(struct bpcc_graph *g, struct bpcc_tensor **out)
{
    static const char *const names[] = {"conv1.0", "conv2"};
    for (uint32_t i = 0; i < 2; i++) {
        struct bpcc_module *m = bpcc_graph_find_module(g, names[i]);
        ck_assert_msg(m, "no module %s", names[i]);
        out[i] = bpcc_module_tensor(m, "weight");
        ck_assert_ptr_nonnull(out[i]);
    }
    return 2;
}

/* fuse -> prepare -> calibrate -> convert on tiny_resnet with qconfig mapping `q`; `between` runs
** on the fused graph */
static char *quantized(const char *q, void (*between)(struct bpcc_graph *), float *conv1_scales)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct flow f = {.batch = tu_write_batch("x", 4, (int64_t[]){1, 3, 8, 8}, ramp23)};
    ck_assert_int_eq(bpcc_config_load("fbgemm", NULL, &f.c, &d), BPCC_OK);
    ck_assert_msg(bpcc_qconfig_load_text(q, strlen(q), "q.yaml", NULL, &f.m, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_int_eq(bpcc_graph_load(FIXTURES_DIR "/torch/tiny_resnet.bpcc", &f.g, &d), BPCC_OK);
    ck_assert_int_eq(pass(&f, PASS_FUSE, &d), BPCC_OK);
    between(f.g);
    for (int k = PASS_PREPARE; k <= PASS_CONVERT; k++) ck_assert_msg(pass(&f, (enum pass_kind)k, &d) == BPCC_OK, "%s", tu_msg(&d));
    char *fp = fingerprint(f.g);
    /* conv1's weight scales (8 channels, or 1 per tensor; the reference conv inside ConvReLU2d) */
    const struct bpcc_module *conv1 = bpcc_graph_find_module(f.g, "conv1.0");
    ck_assert_ptr_nonnull(conv1);
    struct bpcc_tensor *ws = bpcc_module_tensor(conv1, "weight_scale");
    ck_assert_ptr_nonnull(ws);
    ck_assert_uint_le(bpcc_tensor_numel(ws), 8);
    memcpy(conv1_scales, bpcc_tensor_data(ws), bpcc_tensor_numel(ws) * sizeof(float));
    bpcc_graph_free(f.g);
    bpcc_qconfig_free(f.m);
    bpcc_config_free(f.c);
    unlink(f.batch);
    free((char *)f.batch);
    return fp;
}

/* folding left each weight its per-channel range: the min and max of each output channel */
static void check_ranges(struct bpcc_graph *g)
{
    struct bpcc_tensor *w[2];
    for (uint32_t i = 0, n = folded_weights(g, w); i < n; i++) {
        const float *r = bpcc_tensor_range(w[i]), *x = w[i]->data;
        ck_assert_ptr_nonnull(r);
        uint64_t C = (uint64_t)w[i]->dims[0], inner = bpcc_tensor_numel(w[i]) / C;
        for (uint64_t c = 0; c < C; c++) {
            float lo = x[c * inner], hi = lo;
            for (uint64_t k = 1; k < inner; k++) {
                lo = fminf(lo, x[c * inner + k]);
                hi = fmaxf(hi, x[c * inner + k]);
            }
            ck_assert(r[c] == lo && r[C + c] == hi);
        }
    }
}

/* through the public accessor, which drops the range (the caller may write) */
static void drop_ranges(struct bpcc_graph *g)
{
    struct bpcc_tensor *w[2];
    for (uint32_t i = 0, n = folded_weights(g, w); i < n; i++) {
        ck_assert_ptr_nonnull(bpcc_tensor_data(w[i]));
        ck_assert_ptr_null(bpcc_tensor_range(w[i]));
    }
}

/* ... and a caller that writes: the weights doubled, as weight equalization might */
static void double_weights(struct bpcc_graph *g)
{
    struct bpcc_tensor *w[2];
    for (uint32_t i = 0, n = folded_weights(g, w); i < n; i++) {
        float *x = bpcc_tensor_data(w[i]);
        for (uint64_t k = 0; k < bpcc_tensor_numel(w[i]); k++) x[k] *= 2.0f;
    }
}

/* Batch-norm folding keeps each folded weight's per-channel range, and convert's MinMax-family
** weight observers take it instead of reading the weight again: the quantized model is the same
** byte for byte as when they read it, per channel and per tensor; a weight written through
** bpcc_tensor_data after fusion is read again (its doubled values double the weight scales). */
START_TEST(folded_weights_keep_their_range_and_convert_gives_what_reading_them_gives)
{
    static const char *const mappings[] = {
        "global: {activation: {observer: MinMaxObserver}, weight: {observer: PerChannelMinMaxObserver, dtype: qint8, "
        "qscheme: per_channel_symmetric}}\n",
        "global: " QC_A "\n",
        "global: {activation: {observer: MinMaxObserver}, weight: {observer: MovingAveragePerChannelMinMaxObserver, "
        "dtype: qint8, qscheme: per_channel_affine}}\n",
    };
    for (uint32_t i = 0; i < sizeof mappings / sizeof *mappings; i++) {
        float sk[8] = {0}, sr[8] = {0}, sd[8] = {0};
        char *kept = quantized(mappings[i], check_ranges, sk), *read = quantized(mappings[i], drop_ranges, sr);
        ck_assert_msg(!strcmp(kept, read), "mapping %u: the model differs when convert reads the weights", i);
        char *doubled = quantized(mappings[i], double_weights, sd);
        for (int c = 0; c < 8; c++) ck_assert_msg(sd[c] == 2.0f * sr[c], "channel %d: %g, not 2 x %g", c, sd[c], sr[c]);
        free(kept);
        free(read);
        free(doubled);
    }
}
END_TEST

/* Rollback off: the same results, no undo log's allocations, and a pass that fails
** (at any allocation) leaves a graph that frees cleanly (valgrind and LSan check the leaks). */
START_TEST(passes_without_rollback_give_the_same_model_and_fail_into_a_freeable_graph)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct flow on = {.batch = tiny_batch()}, off;
    ck_assert_int_eq(bpcc_config_load("fbgemm", NULL, &on.c, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_qconfig_load("fbgemm", NULL, &on.m, &d), BPCC_OK);
    off = on;
    ck_assert_int_eq(bpcc_graph_load(FIXTURES_DIR "/torch/tiny_resnet.bpcc", &on.g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_load(FIXTURES_DIR "/torch/tiny_resnet.bpcc", &off.g, &d), BPCC_OK);
    bpcc_graph_set_rollback(off.g, false);
    static const char *const names[] = {"fuse", "prepare", "calibrate", "convert"};
    for (int k = PASS_FUSE; k <= PASS_CONVERT; k++) {
        bpcc_alloc_fail_at(0, false); /* counts from here */
        ck_assert_int_eq(pass(&on, (enum pass_kind)k, &d), BPCC_OK);
        uint64_t a_on = bpcc_alloc_fail_at(0, false);
        ck_assert_int_eq(pass(&off, (enum pass_kind)k, &d), BPCC_OK);
        uint64_t a_off = bpcc_alloc_fail_at(0, false);
        char *fon = fingerprint(on.g), *foff = fingerprint(off.g);
        ck_assert_msg(!strcmp(fon, foff), "%s: the model differs without rollback", names[k]);
        /* the nodes fusion erased are free after it, and prepare's observers take them all */
        if (k == PASS_FUSE) ck_assert_ptr_nonnull(off.g->free_nodes);
        if (k == PASS_PREPARE) ck_assert_ptr_null(off.g->free_nodes);
        /* calibrate stores all or nothing without an undo log, so it allocates the same either way */
        if (k == PASS_CALIBRATE)
            ck_assert_msg(a_off == a_on, "%s: %llu allocations without rollback, %llu with", names[k],
                          (unsigned long long)a_off, (unsigned long long)a_on);
        else
            ck_assert_msg(a_off < a_on, "%s: %llu allocations without rollback, %llu with", names[k],
                          (unsigned long long)a_off, (unsigned long long)a_on);
        free(fon);
        free(foff);
        /* every allocation of the pass failing in turn, each on a fresh copy of the graph so far */
        int failures = 0;
        for (uint64_t n = 1;; n++) {
            struct flow f = off;
            ck_assert_int_eq(bpcc_graph_load(FIXTURES_DIR "/torch/tiny_resnet.bpcc", &f.g, &d), BPCC_OK);
            bpcc_graph_set_rollback(f.g, false);
            for (int j = PASS_FUSE; j < k; j++) ck_assert_int_eq(pass(&f, (enum pass_kind)j, &d), BPCC_OK);
            struct bpcc_diag dn;
            bpcc_diag_init(&dn);
            bpcc_alloc_fail_at(n, false);
            enum bpcc_status s = pass(&f, (enum pass_kind)k, &dn);
            bpcc_alloc_fail_at(0, false);
            bpcc_graph_free(f.g);
            if (s == BPCC_OK) break;
            ck_assert_msg(s == BPCC_ERR_NOMEM, "%s: allocation %llu: %s", names[k], (unsigned long long)n, tu_msg(&dn));
            failures++;
            ck_assert(n < 1000000);
        }
        ck_assert_msg(failures > 2, "%s: only %d allocation points", names[k], failures);
    }
    bpcc_graph_free(on.g);
    bpcc_graph_free(off.g);
    bpcc_config_free(on.c);
    bpcc_qconfig_free(on.m);
    unlink(on.batch);
    free((char *)on.batch);
}
END_TEST

/* Without rollback, convert gives each observer module, its tensor headers and array back to the
** graph's arena once its last caller is converted, and the buffers and nodes' arguments it makes
** next are made in that memory; the modules are gone from the table and by name, and the model is
** the one made with rollback on. */
START_TEST(convert_without_rollback_makes_buffers_in_the_memory_of_the_observers_it_replaced)
{
    /* the convolutions; two convolutions into a cat, whose inputs' observers are one module that
    ** two nodes call (its memory goes only after the second) */
    static const char *const models[] = {
        NULL,
        "bpcc-model 1\n\n" CONV("c1", 3, 4) CONV("c2", 3, 4) "\ngraph\n  %x = placeholder x ()\n"
        "  %c1 = call_module c1 (%x,)\n  %c2 = call_module c2 (%x,)\n  %cat = call_function torch.cat ([%c1, %c2], 1)\n"
        "  %output = output output (%cat,)\n"};
    static const uint32_t want_buffers[] = {10, 8}, want_reused[] = {8, 2}, want_obs[] = {5, 2}, want_in_modules[] = {4, 1};
    for (int i = 0; i < 2; i++) {
        const char *model = models[i] ? models[i] : model_alike_convs;
        const char *q = i ? "global: " QC_A "\n" : QC_ALIKE;
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        struct prepared on, off;
        ck_assert_msg(quantize_text(model, q, &on, &d, true) == BPCC_OK, "%s", tu_msg(&d));
        ck_assert_msg(calibrated_text(model, q, &off, &d, true) == BPCC_OK, "%s", tu_msg(&d));
        bpcc_graph_set_rollback(off.g, false);
        const void *was[64], *was_data[64];
        uint32_t n_was = 0, n_obs = 0;
        const struct bpcc_module *obs[16];
        char obs_names[16][64];
        for (uint32_t k = 0; k < bpcc_graph_n_modules(off.g); k++) {
            struct bpcc_module *m = bpcc_graph_module(off.g, k);
            if (bpcc_obs_module_class(m) < 0) continue;
            ck_assert_uint_lt(n_obs, 16);
            obs[n_obs] = m;
            snprintf(obs_names[n_obs++], sizeof obs_names[0], "%s", bpcc_module_name(m));
            for (uint32_t j = 0; j < bpcc_module_n_tensors(m) && n_was < 64; j++) {
                was_data[n_was] = bpcc_module_tensor_at(m, j, NULL, NULL)->data;
                was[n_was++] = bpcc_module_tensor_at(m, j, NULL, NULL);
            }
        }
        ck_assert_int_eq(bpcc_convert(off.g, off.c, off.m, NULL, NULL, &d), BPCC_OK);
        ck_assert_msg(bpcc_graph_verify(off.g, &d) == BPCC_OK, "%s", tu_msg(&d));
        /* the observer modules are gone: from the table, by name, and their memory holds the
        ** arguments of quantize nodes made after them */
        for (uint32_t k = 0; k < bpcc_graph_n_modules(off.g); k++)
            for (uint32_t j = 0; j < n_obs; j++) ck_assert_ptr_ne(bpcc_graph_module(off.g, k), obs[j]);
        for (uint32_t j = 0; j < n_obs; j++) ck_assert_ptr_null(bpcc_graph_find_module(off.g, obs_names[j]));
        uint32_t in_modules = 0;
        for (struct bpcc_node *n = off.g->first; n; n = n->next)
            for (uint32_t j = 0; n->args.n && j < n_obs; j++) {
                const char *a = (const char *)n->args.u.seq.items, *o = (const char *)obs[j];
                in_modules += a >= o && a < o + sizeof(struct bpcc_module);
            }
        ck_assert_uint_eq(n_obs, want_obs[i]);
        ck_assert_uint_eq(in_modules, want_in_modules[i]);
        char *fon = fingerprint(on.g), *foff = fingerprint(off.g);
        ck_assert_str_eq(fon, foff);
        free(fon);
        free(foff);
        struct bpcc_module *root = bpcc_graph_find_module(off.g, "");
        uint32_t reused = 0, reused_data = 0;
        for (uint32_t k = 0; k < bpcc_module_n_tensors(root); k++)
            for (uint32_t j = 0; j < n_was; j++) {
                reused += bpcc_module_tensor_at(root, k, NULL, NULL) == was[j];
                reused_data += bpcc_module_tensor_at(root, k, NULL, NULL)->data == was_data[j];
            }
        /* and the observers' statistics' memory (the graph's, not the weights file's) holds buffers' values */
        ck_assert_uint_gt(reused_data, 0);
        /* every buffer but those of the observers converted before any memory came back */
        ck_assert_uint_eq(bpcc_module_n_tensors(root), want_buffers[i]);
        ck_assert_uint_eq(reused, want_reused[i]);
        prepared_free(&on);
        prepared_free(&off);
    }
}
END_TEST

/* Without rollback, fuse gives the memory of each module it prunes (the batch norms it folds away)
** back to the graph's arena, and prepare's observer modules are made in it; the model is the one
** made with rollback on. */
START_TEST(fuse_without_rollback_gives_the_modules_it_prunes_to_prepares_observers)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct flow on = {0}, off;
    ck_assert_int_eq(bpcc_config_load("fbgemm", NULL, &on.c, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_qconfig_load("fbgemm", NULL, &on.m, &d), BPCC_OK);
    off = on;
    ck_assert_int_eq(bpcc_graph_load(FIXTURES_DIR "/torch/tiny_resnet.bpcc", &on.g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_load(FIXTURES_DIR "/torch/tiny_resnet.bpcc", &off.g, &d), BPCC_OK);
    bpcc_graph_set_rollback(off.g, false);
    const struct bpcc_module *bn[16];
    char bn_names[16][64];
    uint32_t n_bn = 0;
    for (uint32_t k = 0; k < bpcc_graph_n_modules(off.g); k++) {
        const struct bpcc_module *m = bpcc_graph_module(off.g, k);
        if (strcmp(bpcc_module_type(m), "torch.nn.BatchNorm2d")) continue;
        ck_assert_uint_lt(n_bn, 16);
        bn[n_bn] = m;
        snprintf(bn_names[n_bn++], sizeof bn_names[0], "%s", bpcc_module_name(m));
    }
    ck_assert_uint_eq(n_bn, 2);
    ck_assert_int_eq(pass(&on, PASS_FUSE, &d), BPCC_OK);
    ck_assert_int_eq(pass(&off, PASS_FUSE, &d), BPCC_OK);
    for (uint32_t j = 0; j < n_bn; j++) ck_assert_ptr_null(bpcc_graph_find_module(off.g, bn_names[j]));
    for (uint32_t k = 0; k < bpcc_graph_n_modules(off.g); k++)
        for (uint32_t j = 0; j < n_bn; j++) ck_assert_ptr_ne(bpcc_graph_module(off.g, k), bn[j]);
    ck_assert_int_eq(pass(&on, PASS_PREPARE, &d), BPCC_OK);
    ck_assert_int_eq(pass(&off, PASS_PREPARE, &d), BPCC_OK);
    uint32_t reused = 0;
    for (uint32_t k = 0; k < bpcc_graph_n_modules(off.g); k++) {
        const struct bpcc_module *m = bpcc_graph_module(off.g, k);
        for (uint32_t j = 0; j < n_bn; j++) reused += m == bn[j] && bpcc_obs_module_class(m) >= 0;
    }
    ck_assert_uint_ge(reused, 1); /* a batch norm's memory is an observer now (the other's went to a smaller block) */
    char *fon = fingerprint(on.g), *foff = fingerprint(off.g);
    ck_assert_str_eq(fon, foff);
    free(fon);
    free(foff);
    bpcc_graph_free(on.g);
    bpcc_graph_free(off.g);
    bpcc_config_free(on.c);
    bpcc_qconfig_free(on.m);
}
END_TEST

/* A module called twice is fused from its original each time, into copies that hold its tensors:
** the original and the first copy, pruned, give their memory back without rollback, but not those
** tensors (made by the caller in the graph's arena, so the weights file does not mark them): a
** second module entry marks a tensor shared. The model is the one made with rollback on, tensors'
** bytes included. */
START_TEST(fuse_without_rollback_keeps_the_tensors_a_pruned_module_shares_with_its_copies)
{
    static const char *const model =
        "bpcc-model 1\n\n" CONV("conv", 3, 3) "\ngraph\n"
        "  %x = placeholder x ()\n"
        "  %conv = call_module conv (%x,)\n"
        "  %relu = call_function torch.nn.functional.relu (%conv,)\n"
        "  %conv_1 = call_module conv (%relu,)\n"
        "  %relu_1 = call_function torch.nn.functional.relu (%conv_1,)\n"
        "  %output = output output (%relu_1,)\n";
    struct prepared p[2];
    char *f[2];
    for (int i = 0; i < 2; i++) {
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        memset(&p[i], 0, sizeof p[i]);
        ck_assert_int_eq(bpcc_graph_parse(model, strlen(model), "m.bpcc", &p[i].g, &d), BPCC_OK);
        ck_assert_int_eq(bind_tensors(&p[i], &d), BPCC_OK);
        ck_assert_int_eq(bpcc_config_load("fbgemm", NULL, &p[i].c, &d), BPCC_OK);
        ck_assert_int_eq(bpcc_qconfig_load("fbgemm", NULL, &p[i].m, &d), BPCC_OK);
        bpcc_graph_set_rollback(p[i].g, i == 0);
        const struct bpcc_tensor *w = bpcc_module_tensor(bpcc_graph_find_module(p[i].g, "conv"), "weight");
        ck_assert_int_eq(bpcc_fuse(p[i].g, p[i].c, NULL, NULL, &d), BPCC_OK);
        /* the second fusion's module is left at conv's path (as in PyTorch), with a copy of conv
        ** holding its weight; the original and the first fusion's copy are pruned */
        uint32_t holders = 0;
        for (uint32_t k = 0; k < bpcc_graph_n_modules(p[i].g); k++)
            holders += bpcc_module_tensor(bpcc_graph_module(p[i].g, k), "weight") == w;
        ck_assert_uint_eq(holders, 1);
        ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(p[i].g, "conv")), "torch.ao.nn.intrinsic.ConvReLU2d");
        ck_assert(w->flags & BPCC_TENSOR_SHARED);
        ck_assert_msg(bpcc_prepare(p[i].g, p[i].c, p[i].m, NULL, NULL, &d) == BPCC_OK, "%s", tu_msg(&d));
        f[i] = fingerprint(p[i].g);
    }
    ck_assert_str_eq(f[0], f[1]);
    for (int i = 0; i < 2; i++) {
        free(f[i]);
        prepared_free(&p[i]);
    }
}
END_TEST

/* Without a report asked for, prepare keeps no observer records and makes the same model; with
** one, the report lists every observer the model has (a shared observer's record withdrawn). */
START_TEST(prepare_without_a_report_makes_the_same_model)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct flow a = {0}, b;
    ck_assert_int_eq(bpcc_config_load("fbgemm", NULL, &a.c, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_qconfig_load("fbgemm", NULL, &a.m, &d), BPCC_OK);
    b = a;
    ck_assert_int_eq(bpcc_graph_load(FIXTURES_DIR "/torch/tiny_resnet.bpcc", &a.g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_load(FIXTURES_DIR "/torch/tiny_resnet.bpcc", &b.g, &d), BPCC_OK);
    ck_assert_int_eq(pass(&a, PASS_FUSE, &d), BPCC_OK);
    ck_assert_int_eq(pass(&b, PASS_FUSE, &d), BPCC_OK);
    struct bpcc_prepare_report *r = NULL;
    ck_assert_int_eq(bpcc_prepare(a.g, a.c, a.m, NULL, &r, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_prepare(b.g, b.c, b.m, NULL, NULL, &d), BPCC_OK);
    char *fa = fingerprint(a.g), *fb = fingerprint(b.g);
    ck_assert_str_eq(fa, fb);
    uint32_t n_obs = n_observers(a.g);
    ck_assert_uint_gt(n_obs, 3);
    ck_assert_uint_eq(r->n_observers, n_obs);
    for (uint32_t i = 0; i < r->n_observers; i++) {
        ck_assert(!r->observers[i].node->dead);
        ck_assert(is_observer(a.g, r->observers[i].node));
    }
    free(fa);
    free(fb);
    bpcc_prepare_report_free(r);
    bpcc_graph_free(a.g);
    bpcc_graph_free(b.g);
    bpcc_config_free(a.c);
    bpcc_qconfig_free(a.m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("prepare");
    TCase *tc = tcase_create("prepare");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, inputs_are_observed_at_the_root_and_the_output_at_the_last_node);
    tcase_add_test(tc, a_value_used_twice_gets_one_observer);
    tcase_add_test(tc, observer_names_skip_a_module_that_has_one);
    tcase_add_test(tc, output_share_observer_with_input_ops_share_one_module);
    tcase_add_test(tc, num_tensor_args_choose_the_observation_type);
    tcase_add_test(tc, non_tensor_arguments_are_not_observed_and_their_dtype_propagates);
    tcase_add_test(tc, fixed_qparams_ops_get_their_fixed_observer);
    tcase_add_test(tc, a_fixed_qparams_op_with_another_observer_is_refused);
    tcase_add_test(tc, a_conv_transpose_with_per_channel_weights_is_refused);
    tcase_add_test(tc, a_fixed_qparams_op_may_stay_float16);
    tcase_add_test(tc, functional_weights_get_the_weight_observer);
    tcase_add_test(tc, dynamic_quantization_observes_only_the_first_input);
    tcase_add_test(tc, a_null_qconfig_keeps_a_node_float);
    tcase_add_test(tc, a_rejected_qconfig_stays_float_and_strict_refuses_it);
    tcase_add_test(tc, getitem_stays_float);
    tcase_add_test(tc, input_output_not_observed_patterns_get_no_observers);
    tcase_add_test(tc, plan_lists_groups_and_observers_in_graph_order);
    tcase_add_test(tc, quantized_graph_inputs_and_outputs_follow_the_custom_config);
    tcase_add_test(tc, a_quantized_output_gets_an_observer_on_what_it_returns);
    tcase_add_test(tc, a_stub_becomes_an_observer_with_its_own_spec_or_the_qconfigs);
    tcase_add_test(tc, a_bad_stub_spec_is_reported_at_its_module);
    tcase_add_test(tc, quant_stub_observes_and_dequant_stub_goes_away);
    tcase_add_test(tc, convert_turns_observers_into_quantize_dequantize_and_weighted_modules_into_reference_modules);
    tcase_add_test(tc, convert_erases_dead_code_as_pytorch_does);
    tcase_add_test(tc, convert_keeps_in_place_ops_nothing_reads_unless_asked_to_erase_them_as_pytorch_does);
    tcase_add_test(tc, convert_swaps_the_modules_prepare_observed);
    tcase_add_test(tc, convert_gives_each_weight_of_a_recurrent_module_its_qparams_and_embeddings_theirs);
    tcase_add_test(tc, convert_names_each_qparam_buffer_with_the_first_free_number_of_its_prefix);
    tcase_add_test(tc, convert_gives_modules_converted_alike_one_attribute_array);
    tcase_add_test(tc, convert_numbers_a_get_attr_node_whose_buffer_name_a_node_has);
    tcase_add_test(tc, convert_refuses_an_uncalibrated_model);
    tcase_add_test(tc, convert_takes_a_qat_models_qparams_from_its_fake_quantizes_observers);
    tcase_add_test(tc, convert_refuses_a_qat_model_it_cannot_read_and_run_and_prepare_refuse_one);
    tcase_add_test(tc, convert_of_a_qat_model_survives_every_allocation_failure);
    tcase_add_test(tc, convert_survives_every_allocation_failure);
    tcase_add_test(tc, prepare_survives_every_allocation_failure);
    tcase_add_test(tc, every_pass_leaves_its_graph_untouched_when_an_allocation_fails);
    tcase_add_test(tc, convert_with_implicit_qparams_leaves_its_graph_untouched_when_an_allocation_fails);
    tcase_add_test(tc, convert_with_implicit_qparams_prints_runs_and_reads_as_with_the_nodes);
    tcase_add_test(tc, every_pass_leaves_its_graph_untouched_when_its_undo_log_cannot_grow);
    tcase_add_test(tc, passes_without_rollback_give_the_same_model_and_fail_into_a_freeable_graph);
    tcase_add_test(tc, prepare_without_a_report_makes_the_same_model);
    tcase_add_test(tc, convert_without_rollback_makes_buffers_in_the_memory_of_the_observers_it_replaced);
    tcase_add_test(tc, fuse_without_rollback_gives_the_modules_it_prunes_to_prepares_observers);
    tcase_add_test(tc, fuse_without_rollback_keeps_the_tensors_a_pruned_module_shares_with_its_copies);
    tcase_add_test(tc, folded_weights_keep_their_range_and_convert_gives_what_reading_them_gives);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
