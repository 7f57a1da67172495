/*
** check_fuse.c — the fusion pass: each fuser method on real weights (folded outputs against
** conv -> bn computed directly, relative error <= 1e-5), QAT fusion, every "not fused because"
** rule, the errors PyTorch would raise, explain output, and out-of-memory.
*/
#include "testutil.h"

#include "ir/ir.h"

#include <math.h>
#include <unistd.h>

static struct bpcc_diag d;
static struct bpcc_config *native;

static void setup(void)
{
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_config_load("native", NULL, &native, &d), BPCC_OK);
}

static void teardown(void) { bpcc_config_free(native); }

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* Parse model text and give every declared tensor seeded random data (running_var > 0). */
static struct bpcc_graph *model(const char *text)
{
    struct bpcc_graph *g;
    ck_assert_msg(bpcc_graph_parse(text, strlen(text), "t.bpcc", &g, &d) == BPCC_OK, "%s", tu_msg(&d));
    for (uint32_t i = 0; i < g->n_modules; i++) {
        struct bpcc_module *m = g->modules[i];
        for (uint32_t k = 0; k < m->n_tensors; k++) {
            struct bpcc_tensor *t = m->tensors[k].t;
            bool ovf;
            t->nbytes = bpcc_tensor_expected_bytes(t, &ovf);
            t->data = bpcc_arena_alloc(&g->arena, t->nbytes + 1, 64);
            if (t->dtype != BPCC_DTYPE_F32) continue;
            float *f = t->data;
            bool var = !strcmp(m->tensors[k].name, "running_var");
            for (uint64_t j = 0; j < bpcc_tensor_numel(t); j++) f[j] = var ? 0.5f + fabsf(frand()) : frand();
        }
    }
    return g;
}

static const float *fdata(struct bpcc_graph *g, const char *mod, const char *t)
{
    struct bpcc_module *m = bpcc_graph_find_module(g, mod);
    ck_assert_msg(m != NULL, "no module %s", mod);
    struct bpcc_tensor *x = bpcc_module_tensor(m, t);
    ck_assert_msg(x != NULL, "no tensor %s.%s", mod, t);
    return x->data;
}

/* direct NCHW conv, groups 1, dilation 1 */
static void conv2d(const float *x, int C, int H, int W, const float *w, const float *b, int O,
                   int K, int pad, float *y)
{
    for (int o = 0; o < O; o++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < W; j++) {
                double acc = b ? b[o] : 0.0;
                for (int c = 0; c < C; c++)
                    for (int u = 0; u < K; u++)
                        for (int v = 0; v < K; v++) {
                            int ii = i + u - pad, jj = j + v - pad;
                            if (ii < 0 || jj < 0 || ii >= H || jj >= W) continue;
                            acc += (double)x[(c * H + ii) * W + jj] * w[((o * C + c) * K + u) * K + v];
                        }
                y[(o * H + i) * W + j] = (float)acc;
            }
}

static void bn_eval(float *y, int O, int HW, const float *g, const float *b, const float *m,
                    const float *v, float eps)
{
    for (int o = 0; o < O; o++)
        for (int k = 0; k < HW; k++)
            y[o * HW + k] = (y[o * HW + k] - m[o]) / sqrtf(v[o] + eps) * g[o] + b[o];
}

static double rel_err(const float *a, const float *b, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > num) num = e;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return num / (den > 0 ? den : 1);
}

#define CONV(name, cin, cout, bias)                                                             \
    "module " name " : torch.nn.Conv2d {training: False, in_channels: " #cin                  \
    ", out_channels: " #cout ", kernel_size: (3, 3), stride: (1, 1), padding: (1, 1), groups: 1}\n" \
    "  param weight : f32[" #cout ", " #cin ", 3, 3]\n" bias
#define BN(name, c)                                                                             \
    "module " name " : torch.nn.BatchNorm2d {training: False, num_features: " #c ", eps: 1e-05, affine: True, track_running_stats: True}\n" \
    "  param weight : f32[" #c "]\n  param bias : f32[" #c "]\n  buffer running_mean : f32[" #c "]\n" \
    "  buffer running_var : f32[" #c "]\n"
#define RELU(name) "module " name " : torch.nn.ReLU {training: False, inplace: False}\n"

static const char cbr[] = "bpcc-model 1\nweights \"w.st\"\n\n" CONV("conv", 3, 4, "  param bias : f32[4]\n")
    BN("bn", 4) RELU("relu") "\ngraph\n"
    "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n  %bn = call_module bn (%conv,)\n"
    "  %relu = call_module relu (%bn,)\n  %output = output output (%relu,)\n";

START_TEST(conv_bn_relu_folds_into_conv_relu_numerically)
{
    struct bpcc_graph *g = model(cbr);
    enum { C = 3, O = 4, H = 5, W = 6 };
    float x[C * H * W], ref[O * H * W], got[O * H * W];
    for (int i = 0; i < C * H * W; i++) x[i] = frand();
    conv2d(x, C, H, W, fdata(g, "conv", "weight"), fdata(g, "conv", "bias"), O, 3, 1, ref);
    bn_eval(ref, O, H * W, fdata(g, "bn", "weight"), fdata(g, "bn", "bias"), fdata(g, "bn", "running_mean"),
            fdata(g, "bn", "running_var"), 1e-5f);
    char *ex;
    ck_assert_msg(bpcc_fuse(g, native, NULL, &ex, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_ptr_nonnull(strstr(ex, "conv -> torch.ao.nn.intrinsic.ConvReLU2d (fuse_conv_bn_relu): conv, bn, relu"));
    ck_assert_ptr_nonnull(strstr(ex, "native.yaml:"));
    bpcc_free(ex);
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "conv")), "torch.ao.nn.intrinsic.ConvReLU2d");
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "conv.0")), "torch.nn.Conv2d");
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "conv.1")), "torch.nn.ReLU");
    ck_assert_ptr_null(bpcc_graph_find_module(g, "bn"));
    ck_assert_ptr_null(bpcc_graph_find_module(g, "relu"));
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 3);
    struct bpcc_node *fused = bpcc_graph_find_node(g, "conv");
    ck_assert_ptr_eq(bpcc_node_user(fused, 0), bpcc_graph_output(g));
    conv2d(x, C, H, W, fdata(g, "conv.0", "weight"), fdata(g, "conv.0", "bias"), O, 3, 1, got);
    for (int i = 0; i < O * H * W; i++) {
        if (ref[i] < 0) ref[i] = 0;
        if (got[i] < 0) got[i] = 0;
    }
    ck_assert_double_le(rel_err(got, ref, O * H * W), 1e-5);
    bpcc_graph_free(g);
}
END_TEST

/* The containers a fusion makes, {training: True} each, share one attribute array, as parsed
** modules of equal attributes do; a change to one is its own. */
START_TEST(fused_containers_share_one_attribute_array)
{
    static const char text[] = "bpcc-model 1\nweights \"w.st\"\n\n" CONV("a", 3, 3, "") RELU("ra") CONV("b", 3, 3, "")
        RELU("rb") CONV("c", 3, 3, "") RELU("rc") "\ngraph\n  %x = placeholder x ()\n  %a = call_module a (%x,)\n"
        "  %ra = call_module ra (%a,)\n  %b = call_module b (%ra,)\n  %rb = call_module rb (%b,)\n"
        "  %c = call_module c (%rb,)\n  %rc = call_module rc (%c,)\n  %output = output output (%rc,)\n";
    struct bpcc_graph *g = model(text);
    ck_assert_msg(bpcc_fuse(g, native, NULL, NULL, &d) == BPCC_OK, "%s", tu_msg(&d));
    struct bpcc_module *a = bpcc_graph_find_module(g, "a"), *b = bpcc_graph_find_module(g, "b"),
                       *c = bpcc_graph_find_module(g, "c");
    ck_assert_str_eq(bpcc_module_type(a), "torch.ao.nn.intrinsic.ConvReLU2d");
    ck_assert_str_eq(bpcc_module_type(c), "torch.ao.nn.intrinsic.ConvReLU2d");
    ck_assert_uint_eq(a->attrs.n, 1);
    ck_assert_ptr_eq(b->attrs.u.seq.items, a->attrs.u.seq.items);
    ck_assert_ptr_eq(c->attrs.u.seq.items, a->attrs.u.seq.items);
    const struct bpcc_value *t = bpcc_module_attr(c, "training");
    ck_assert(t && t->kind == BPCC_VAL_BOOL && t->u.b);
    struct bpcc_value f = bpcc_value_bool(false);
    ck_assert_int_eq(bpcc_module_set_attr(b, "training", &f, &d), BPCC_OK);
    ck_assert(!bpcc_module_attr(b, "training")->u.b);
    ck_assert(bpcc_module_attr(a, "training")->u.b && bpcc_module_attr(c, "training")->u.b);
    ck_assert_ptr_eq(c->attrs.u.seq.items, a->attrs.u.seq.items);
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
    bpcc_graph_free(g);
}
END_TEST

/* A fused module's parts are the matched modules themselves, renamed, when only their own nodes
** refer to them (the conv gets folded weights, the ReLU is the same object); a ReLU module two
** nodes call is copied, and its other caller keeps it under its name. */
START_TEST(fused_parts_are_the_matched_modules_unless_something_else_refers_to_them)
{
    struct bpcc_graph *g = model(cbr);
    struct bpcc_module *conv = bpcc_graph_find_module(g, "conv"), *relu = bpcc_graph_find_module(g, "relu");
    const struct bpcc_tensor *w = bpcc_module_tensor(conv, "weight");
    ck_assert_msg(bpcc_fuse(g, native, NULL, NULL, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "conv.0"), conv);
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "conv.1"), relu);
    ck_assert_ptr_ne(bpcc_module_tensor(conv, "weight"), w); /* folded */
    ck_assert_ptr_eq(conv->parent, bpcc_graph_find_module(g, "conv"));
    ck_assert_ptr_null(bpcc_graph_find_module(g, "relu"));
    ck_assert_uint_eq(bpcc_graph_n_modules(g), 3);
    bpcc_graph_free(g);

    static const char shared[] = "bpcc-model 1\nweights \"w.st\"\n\n" CONV("conv", 3, 4, "  param bias : f32[4]\n")
        BN("bn", 4) RELU("relu") "\ngraph\n"
        "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n  %bn = call_module bn (%conv,)\n"
        "  %relu = call_module relu (%bn,)\n  %relu_1 = call_module relu (%relu,)\n  %output = output output (%relu_1,)\n";
    g = model(shared);
    conv = bpcc_graph_find_module(g, "conv");
    relu = bpcc_graph_find_module(g, "relu");
    ck_assert_msg(bpcc_fuse(g, native, NULL, NULL, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "conv.0"), conv);
    ck_assert_ptr_ne(bpcc_graph_find_module(g, "conv.1"), relu);
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "conv.1")), "torch.nn.ReLU");
    ck_assert_ptr_eq(bpcc_graph_find_module(g, "relu"), relu);
    ck_assert_ptr_eq(bpcc_node_module(bpcc_graph_find_node(g, "relu_1")), relu);
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(conv_bn_folds_into_a_plain_conv_and_gains_a_bias)
{
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\n" CONV("conv", 2, 3, "") BN("bn", 3) "\ngraph\n"
                    "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
                    "  %bn = call_module bn (%conv,)\n  %output = output output (%bn,)\n";
    struct bpcc_graph *g = model(t);
    enum { C = 2, O = 3, H = 4, W = 4 };
    float x[C * H * W], ref[O * H * W], got[O * H * W];
    for (int i = 0; i < C * H * W; i++) x[i] = frand();
    conv2d(x, C, H, W, fdata(g, "conv", "weight"), NULL, O, 3, 1, ref);
    bn_eval(ref, O, H * W, fdata(g, "bn", "weight"), fdata(g, "bn", "bias"), fdata(g, "bn", "running_mean"),
            fdata(g, "bn", "running_var"), 1e-5f);
    ck_assert_int_eq(bpcc_fuse(g, native, NULL, NULL, &d), BPCC_OK);
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "conv")), "torch.nn.Conv2d");
    conv2d(x, C, H, W, fdata(g, "conv", "weight"), fdata(g, "conv", "bias"), O, 3, 1, got);
    ck_assert_double_le(rel_err(got, ref, O * H * W), 1e-5);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(linear_bn_folds_numerically)
{
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\n"
                    "module fc : torch.nn.Linear {training: False, in_features: 5, out_features: 3}\n"
                    "  param weight : f32[3, 5]\n  param bias : f32[3]\n"
                    "module bn : torch.nn.BatchNorm1d {training: False, num_features: 3, eps: 0.001}\n"
                    "  param weight : f32[3]\n  param bias : f32[3]\n  buffer running_mean : f32[3]\n"
                    "  buffer running_var : f32[3]\n"
                    "\ngraph\n  %x = placeholder x ()\n  %fc = call_module fc (%x,)\n"
                    "  %bn = call_module bn (%fc,)\n  %output = output output (%bn,)\n";
    struct bpcc_graph *g = model(t);
    float x[5], ref[3], got[3];
    for (int i = 0; i < 5; i++) x[i] = frand();
    const float *w = fdata(g, "fc", "weight"), *b = fdata(g, "fc", "bias");
    for (int o = 0; o < 3; o++) {
        double acc = b[o];
        for (int i = 0; i < 5; i++) acc += (double)w[o * 5 + i] * x[i];
        ref[o] = (float)acc;
    }
    bn_eval(ref, 3, 1, fdata(g, "bn", "weight"), fdata(g, "bn", "bias"), fdata(g, "bn", "running_mean"),
            fdata(g, "bn", "running_var"), 1e-3f);
    ck_assert_int_eq(bpcc_fuse(g, native, NULL, NULL, &d), BPCC_OK);
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "fc")), "torch.nn.Linear");
    w = fdata(g, "fc", "weight");
    b = fdata(g, "fc", "bias");
    for (int o = 0; o < 3; o++) {
        double acc = b[o];
        for (int i = 0; i < 5; i++) acc += (double)w[o * 5 + i] * x[i];
        got[o] = (float)acc;
    }
    ck_assert_double_le(rel_err(got, ref, 3), 1e-5);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(convtranspose_bn_folds_along_the_output_axis)
{
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\n"
                    "module ct : torch.nn.ConvTranspose2d {training: False, in_channels: 2, out_channels: 3, groups: 1}\n"
                    "  param weight : f32[2, 3, 2, 2]\n  param bias : f32[3]\n" BN("bn", 3)
                    "\ngraph\n  %x = placeholder x ()\n  %ct = call_module ct (%x,)\n"
                    "  %bn = call_module bn (%ct,)\n  %output = output output (%bn,)\n";
    struct bpcc_graph *g = model(t);
    float w0[24];
    memcpy(w0, fdata(g, "ct", "weight"), sizeof w0);
    const float *gam = fdata(g, "bn", "weight"), *var = fdata(g, "bn", "running_var");
    ck_assert_int_eq(bpcc_fuse(g, native, NULL, NULL, &d), BPCC_OK);
    const float *w = fdata(g, "ct", "weight");
    for (int i = 0; i < 2; i++)
        for (int c = 0; c < 3; c++)
            for (int k = 0; k < 4; k++) {
                int at = (i * 3 + c) * 4 + k;
                float want = w0[at] * (gam[c] * (1.0f / sqrtf(var[c] + 1e-5f)));
                ck_assert_float_eq(w[at], want);
            }
    bpcc_graph_free(g);
}
END_TEST

START_TEST(qat_keeps_the_batch_norm_in_a_conv_bn_relu)
{
    struct bpcc_graph *g = model(cbr);
    const float *w0 = fdata(g, "conv", "weight");
    struct bpcc_fuse_options o = {.is_qat = true};
    ck_assert_int_eq(bpcc_fuse(g, native, &o, NULL, &d), BPCC_OK);
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "conv")), "torch.ao.nn.intrinsic.ConvBnReLU2d");
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "conv.1")), "torch.nn.BatchNorm2d");
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "conv.2")), "torch.nn.ReLU");
    ck_assert_ptr_eq(fdata(g, "conv.0", "weight"), w0); /* not folded */
    bpcc_graph_free(g);
}
END_TEST

static uint32_t count_fused(struct bpcc_graph *g)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->n_modules; i++)
        if (strstr(g->modules[i]->type, "intrinsic")) n++;
    return n;
}

START_TEST(not_fused_when_bn_has_two_users)
{
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\n" CONV("conv", 3, 4, "  param bias : f32[4]\n")
        BN("bn", 4) RELU("relu") "\ngraph\n  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
        "  %bn = call_module bn (%conv,)\n  %relu = call_module relu (%bn,)\n"
        "  %add = call_function operator.add (%relu, %bn)\n  %output = output output (%add,)\n";
    struct bpcc_graph *g = model(t);
    ck_assert_int_eq(bpcc_fuse(g, native, NULL, NULL, &d), BPCC_OK);
    /* bn is interior of conv-bn-relu but has two users: conv+bn (bn the anchor) fuses instead */
    ck_assert_uint_eq(count_fused(g), 0);
    ck_assert_ptr_null(bpcc_graph_find_module(g, "bn"));
    ck_assert_ptr_nonnull(bpcc_graph_find_node(g, "relu"));
    ck_assert_uint_eq(bpcc_node_n_users(bpcc_graph_find_node(g, "conv")), 2);
    bpcc_graph_free(g);
}
END_TEST

/* fusion keeps the modules the graph references, as GraphModule copies them; the root module ""
** is the GraphModule itself and every module's ancestor: kept though no node names it (pruning
** it took every module with it) */
START_TEST(the_root_module_stays_though_no_node_names_it)
{
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\nmodule \"\" : torch.fx.GraphModule {_observed_node_names: [\"conv\"]}\n"
        CONV("conv", 3, 4, "  param bias : f32[4]\n") BN("bn", 4) RELU("unused")
        "\ngraph\n  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
        "  %bn = call_module bn (%conv,)\n  %output = output output (%bn,)\n";
    struct bpcc_graph *g = model(t);
    ck_assert_int_eq(bpcc_fuse(g, native, NULL, NULL, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
    const struct bpcc_module *root = bpcc_graph_find_module(g, "");
    ck_assert_ptr_nonnull(root);
    ck_assert_ptr_nonnull(bpcc_module_attr(root, "_observed_node_names"));
    ck_assert_ptr_nonnull(bpcc_graph_find_module(g, "conv"));
    ck_assert_ptr_null(bpcc_graph_find_module(g, "unused")); /* what nothing references goes */
    ck_assert_uint_eq(bpcc_graph_n_modules(g), 2);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(not_fused_when_conv_output_also_leaves_the_graph)
{
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\n" CONV("conv", 3, 4, "  param bias : f32[4]\n")
        RELU("relu") "\ngraph\n  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
        "  %relu = call_module relu (%conv,)\n  %output = output output ((%relu, %conv),)\n";
    struct bpcc_graph *g = model(t);
    ck_assert_int_eq(bpcc_fuse(g, native, NULL, NULL, &d), BPCC_OK);
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 4);
    ck_assert_uint_eq(count_fused(g), 0);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(not_fused_when_the_arity_differs)
{
    const char *cfg = "name: t\nconfigs:\n"
                      "  - pattern_complex_format: [operator.add, torch.nn.Conv2d]\n"
                      "    fuser_method: sequential\n    fused_module: torch.ao.nn.intrinsic.ConvReLU2d\n";
    struct bpcc_config *c;
    ck_assert_int_eq(bpcc_config_load_text(cfg, strlen(cfg), "a.yaml", NULL, &c, &d), BPCC_OK);
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\n" CONV("conv", 3, 3, "  param bias : f32[3]\n")
        "\ngraph\n  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
        "  %add = call_function operator.add (%conv, %x)\n  %output = output output (%add,)\n";
    struct bpcc_graph *g = model(t);
    char *ex;
    ck_assert_int_eq(bpcc_fuse(g, c, NULL, &ex, &d), BPCC_OK);
    ck_assert_str_eq(ex, "no fusion pattern matched\n");
    bpcc_free(ex);
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 4);
    bpcc_graph_free(g);
    bpcc_config_free(c);
}
END_TEST

START_TEST(not_fused_when_the_module_is_a_subclass)
{
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\n"
        "module conv : my.pkg.MyConv2d {training: False}\n  param weight : f32[4, 3, 3, 3]\n"
        BN("bn", 4) "\ngraph\n  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
        "  %bn = call_module bn (%conv,)\n  %output = output output (%bn,)\n";
    struct bpcc_graph *g = model(t);
    ck_assert_int_eq(bpcc_fuse(g, native, NULL, NULL, &d), BPCC_OK);
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 4); /* module types match exactly, as in PyTorch */
    bpcc_graph_free(g);
}
END_TEST

START_TEST(functional_relu_becomes_a_fresh_relu_module)
{
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\n" CONV("conv", 3, 4, "  param bias : f32[4]\n")
        "\ngraph\n  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
        "  %relu = call_function torch.nn.functional.relu (%conv,) {inplace: False}\n"
        "  %output = output output (%relu,)\n";
    struct bpcc_graph *g = model(t);
    ck_assert_int_eq(bpcc_fuse(g, native, NULL, NULL, &d), BPCC_OK);
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "conv")), "torch.ao.nn.intrinsic.ConvReLU2d");
    struct bpcc_module *r = bpcc_graph_find_module(g, "conv.1");
    ck_assert_str_eq(bpcc_module_type(r), "torch.nn.ReLU");
    ck_assert(!bpcc_module_attr(r, "training")->u.b);
    ck_assert(!bpcc_module_attr(r, "inplace")->u.b);
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 3);
    bpcc_graph_free(g);
}
END_TEST

START_TEST(error_when_the_root_is_not_a_module_call)
{
    const char *cfg = "name: t\nconfigs:\n"
                      "  - pattern: [torch.nn.functional.conv2d, torch.nn.functional.relu]\n"
                      "    fuser_method: sequential\n    fused_module: torch.ao.nn.intrinsic.ConvReLU2d\n";
    struct bpcc_config *c;
    ck_assert_int_eq(bpcc_config_load_text(cfg, strlen(cfg), "f.yaml", NULL, &c, &d), BPCC_OK);
    const char *t = "bpcc-model 1\n\ngraph\n  %x = placeholder x ()\n  %w = placeholder w ()\n"
                    "  %c = call_function torch.nn.functional.conv2d (%x, %w)\n"
                    "  %r = call_function torch.nn.functional.relu (%c,)\n  %output = output output (%r,)\n";
    struct bpcc_graph *g = model(t);
    ck_assert_int_eq(bpcc_fuse(g, c, NULL, NULL, &d), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "is not a module call"));
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "(f.yaml:3)"));
    ck_assert_uint_eq(d.entries[0].line, 7); /* the anchor's line in t.bpcc */
    bpcc_graph_free(g);
    bpcc_config_free(c);
}
END_TEST

START_TEST(error_when_conv_and_bn_modes_differ)
{
    char t[2048];
    snprintf(t, sizeof t, "%s", cbr);
    char *p = strstr(t, "BatchNorm2d {training: False");
    memcpy(p + strlen("BatchNorm2d {training: "), "True, ", 6);
    memmove(p + strlen("BatchNorm2d {training: True, "), p + strlen("BatchNorm2d {training: False, ") - 1,
            strlen(p + strlen("BatchNorm2d {training: False, ") - 1) + 1);
    struct bpcc_graph *g = model(t);
    ck_assert_int_eq(bpcc_fuse(g, native, NULL, NULL, &d), BPCC_ERR_GRAPH);
    ck_assert_ptr_nonnull(strstr(tu_msg(&d), "must both be in the same mode"));
    bpcc_graph_free(g);
}
END_TEST

START_TEST(fused_models_keep_node_names_and_save)
{
    struct bpcc_graph *g;
    ck_assert_int_eq(bpcc_graph_load(FIXTURE("torch/tiny_resnet.bpcc"), &g, &d), BPCC_OK);
    ck_assert_int_eq(bpcc_fuse(g, native, NULL, NULL, &d), BPCC_OK);
    char *text;
    ck_assert_int_eq(bpcc_graph_print(g, "tiny_resnet_fused.safetensors", &text, NULL, &d), BPCC_OK);
    size_t len;
    char *want = tu_read(FIXTURE("torch/tiny_resnet_fused.bpcc"), &len);
    ck_assert_str_eq(text, want); /* exactly what PyTorch's fuse_fx made (the fixture) */
    free(want);
    bpcc_free(text);
    bpcc_graph_free(g);
}
END_TEST


/* the model in a fresh directory, saved and loaded back: its tensors then lie in the weights
** file's mapping (the directory in *dir, to remove) */
static struct bpcc_graph *mapped_model(const char *text, char **dir)
{
    struct bpcc_graph *g = model(text);
    *dir = tu_temp_dir();
    char path[600];
    snprintf(path, sizeof path, "%s/m.bpcc", *dir);
    ck_assert_msg(bpcc_graph_save(g, path, &d) == BPCC_OK, "%s", tu_msg(&d));
    bpcc_graph_free(g);
    ck_assert_msg(bpcc_graph_load(path, &g, &d) == BPCC_OK, "%s", tu_msg(&d));
    return g;
}

static void remove_mapped_model(char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/m.bpcc", dir);
    ck_assert_int_eq(unlink(path), 0);
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
    free(dir);
}

/* With rollback off, folding gives the pages of the float weight it replaced back to the kernel
** (the mapping then holds one copy of the weights, not two); with rollback on, or where the weight
** is also another module's (a conv called twice, which fusion copies; a caller's module given the
** loaded tensor), they stay. The folded weight is the same bytes in every case. */
START_TEST(folding_without_rollback_gives_the_float_weights_pages_back)
{
#define GRAPH_HEAD "bpcc-model 1\nweights \"w.st\"\n\n" CONV("conv", 64, 64, "") BN("bn", 64) "\ngraph\n" \
                   "  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n  %bn = call_module bn (%conv,)\n"
    static const char once[] = GRAPH_HEAD "  %output = output output (%bn,)\n";
    static const char twice[] = GRAPH_HEAD "  %conv_1 = call_module conv (%bn,)\n  %output = output output (%conv_1,)\n";
#undef GRAPH_HEAD
    float *folded = NULL;
    for (int k = 0; k < 4; k++) { /* rollback off, rollback on, the conv called twice, a caller's module (off) */
        char *dir;
        rng = 88172645463325252ull; /* the same weights each time */
        struct bpcc_graph *g = mapped_model(k == 2 ? twice : once, &dir);
        bpcc_graph_set_rollback(g, k == 1);
        struct bpcc_module *conv = bpcc_graph_find_module(g, "conv"), *mine;
        struct bpcc_tensor *w = bpcc_module_tensor(conv, "weight");
        if (k == 3) { /* the loaded weight in a module of the caller's too (which fuse then drops, as
                       ** fuse_fx keeps only the modules the graph calls: the store is what counts) */
            ck_assert_int_eq(bpcc_graph_add_module(g, "mine", "vendor.Keep", &mine, &d), BPCC_OK);
            ck_assert_int_eq(bpcc_module_set_tensor(mine, "w", BPCC_TENSOR_BUFFER, w, &d), BPCC_OK);
        }
        size_t n = w->nbytes, pages;
        float *orig = malloc(n);
        memcpy(orig, w->data, n); /* every page read, so mapped */
        size_t present = tu_pages_present_of(w->data, n, &pages);
        ck_assert_uint_ge(pages, 30);
        if (present != SIZE_MAX) ck_assert_uint_eq(present, pages);
        ck_assert_msg(bpcc_fuse(g, native, NULL, NULL, &d) == BPCC_OK, "%s", tu_msg(&d));
        present = tu_pages_present(w->data, n);
        if (present != SIZE_MAX) ck_assert_uint_eq(present, k == 0 ? 0 : pages);
        const struct bpcc_tensor *fw = NULL;
        for (uint32_t i = 0; i < g->n_modules; i++) {
            const struct bpcc_module *m = g->modules[i];
            if (m->dead) continue;
            for (uint32_t j = 0; j < m->n_tensors; j++) {
                if (m->tensors[j].t == w) ck_assert_int_ge(k, 2); /* kept by the second call's module, or the caller's */
                if (!strcmp(m->tensors[j].name, "weight") && m->tensors[j].t != w) fw = m->tensors[j].t;
            }
        }
        if (k >= 2) ck_assert(!memcmp(w->data, orig, n)); /* the other holder's weight as it was */
        ck_assert_ptr_nonnull(fw);
        ck_assert_uint_eq(fw->nbytes, n);
        if (!folded) {
            folded = malloc(n);
            memcpy(folded, fw->data, n);
        } else {
            ck_assert(!memcmp(folded, fw->data, n));
        }
        free(orig);
        bpcc_graph_free(g);
        remove_mapped_model(dir);
    }
    free(folded);
}
END_TEST

static int user_calls;

static enum bpcc_status my_fuser(const struct bpcc_fuser_call *call, struct bpcc_diag *dd)
{
    user_calls++;
    ck_assert_ptr_eq(call->user_data, &user_calls);
    ck_assert_uint_eq(call->n_ops, 2);
    ck_assert_str_eq(call->op_types[0], "torch.nn.ReLU");  /* preorder: the anchor first */
    ck_assert_str_eq(call->op_types[1], "torch.nn.Conv2d");
    ck_assert_ptr_nonnull(call->modules[1]);
    struct bpcc_module *m;
    enum bpcc_status st = bpcc_graph_add_module(call->graph, call->root_path, "vendor.ConvRelu", &m, dd);
    if (st) return st;
    struct bpcc_value v = bpcc_value_int(7);
    st = bpcc_module_set_attr(m, "vendor_mode", &v, dd);
    for (uint32_t i = 0; !st && i < bpcc_module_n_tensors(call->modules[1]); i++) {
        const char *tn;
        enum bpcc_tensor_role role;
        struct bpcc_tensor *t = bpcc_module_tensor_at(call->modules[1], i, &tn, &role);
        st = bpcc_module_set_tensor(m, tn, role, t, dd);
    }
    return st;
}

START_TEST(registered_fusers_are_used_by_configs)
{
    ck_assert_int_eq(bpcc_fuser_register("my_conv_relu", 2, 2, my_fuser, &user_calls, &d), BPCC_OK);
    const char *cfg = "name: vendor\nconfigs:\n  - pattern: [torch.nn.Conv2d, torch.nn.ReLU]\n"
                      "    fuser_method: my_conv_relu\n";
    struct bpcc_config *c;
    ck_assert_msg(bpcc_config_load_text(cfg, strlen(cfg), "v.yaml", NULL, &c, &d) == BPCC_OK, "%s", tu_msg(&d));
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\n" CONV("conv", 3, 4, "  param bias : f32[4]\n")
        RELU("relu") "\ngraph\n  %x = placeholder x ()\n  %conv = call_module conv (%x,)\n"
        "  %relu = call_module relu (%conv,)\n  %output = output output (%relu,)\n";
    struct bpcc_graph *g = model(t);
    ck_assert_int_eq(bpcc_fuse(g, c, NULL, NULL, &d), BPCC_OK);
    ck_assert_int_eq(user_calls, 1);
    struct bpcc_module *m = bpcc_graph_find_module(g, "conv");
    ck_assert_str_eq(bpcc_module_type(m), "vendor.ConvRelu");
    ck_assert_int_eq(bpcc_module_attr(m, "vendor_mode")->u.i, 7);
    ck_assert_ptr_nonnull(bpcc_module_tensor(m, "weight"));
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 3);
    /* the wrong arity is refused when the config loads */
    const char *bad = "name: vendor\nconfigs:\n  - pattern: [torch.nn.Conv2d, torch.nn.BatchNorm2d, torch.nn.ReLU]\n"
                      "    fuser_method: my_conv_relu\n";
    struct bpcc_config *c2;
    ck_assert_int_eq(bpcc_config_load_text(bad, strlen(bad), "b.yaml", NULL, &c2, &d), BPCC_ERR_CONFIG);
    bpcc_graph_free(g);
    bpcc_config_free(c);
}
END_TEST

START_TEST(onednn_conv_add_relu_takes_the_other_addend_as_input)
{
    struct bpcc_config *onednn;
    ck_assert_int_eq(bpcc_config_load("onednn", NULL, &onednn, &d), BPCC_OK);
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\n" CONV("conv", 3, 3, "  param bias : f32[3]\n")
        BN("bn", 3) RELU("relu") "\ngraph\n  %x = placeholder x ()\n  %y = placeholder y ()\n"
        "  %conv = call_module conv (%x,)\n  %bn = call_module bn (%conv,)\n"
        "  %add = call_function operator.add (%bn, %y)\n  %relu = call_module relu (%add,)\n"
        "  %output = output output (%relu,)\n";
    struct bpcc_graph *g = model(t);
    char *ex;
    ck_assert_msg(bpcc_fuse(g, onednn, NULL, &ex, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_ptr_nonnull(strstr(ex, "fuse_conv_bn_add_relu_left"));
    bpcc_free(ex);
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "conv")), "torch.ao.nn.intrinsic.ConvAddReLU2d");
    ck_assert_str_eq(bpcc_module_attr(bpcc_graph_find_module(g, "conv"), "add")->u.s, "operator.add");
    struct bpcc_node *n = bpcc_graph_find_node(g, "conv");
    ck_assert_uint_eq(bpcc_node_args(n)->n, 2); /* (x, y): the extra input */
    ck_assert_ptr_eq(bpcc_value_item(bpcc_node_args(n), 1)->u.node, bpcc_graph_find_node(g, "y"));
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 4);
    bpcc_graph_free(g);
    bpcc_config_free(onednn);
}
END_TEST

/* A residual block: the other addend is the relu of a conv+bn+relu fused just before, which that
** fusion erases (its conv takes its place). The conv+add fusion takes the fused conv as its extra
** input, as PyTorch's fused graph does, and the graph verifies. */
START_TEST(onednn_conv_add_takes_an_addend_fused_before)
{
    struct bpcc_config *onednn;
    ck_assert_int_eq(bpcc_config_load("onednn", NULL, &onednn, &d), BPCC_OK);
    const char *t = "bpcc-model 1\nweights \"w.st\"\n\n" CONV("c0", 3, 3, "") BN("b0", 3) RELU("r0")
        CONV("c1", 3, 3, "") BN("b1", 3) RELU("r1") "\ngraph\n  %x = placeholder x ()\n"
        "  %c0 = call_module c0 (%x,)\n  %b0 = call_module b0 (%c0,)\n  %r0 = call_module r0 (%b0,)\n"
        "  %c1 = call_module c1 (%r0,)\n  %b1 = call_module b1 (%c1,)\n"
        "  %add = call_function operator.add (%b1, %r0)\n  %r1 = call_module r1 (%add,)\n"
        "  %output = output output (%r1,)\n";
    struct bpcc_graph *g = model(t);
    ck_assert_msg(bpcc_fuse(g, onednn, NULL, NULL, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "c0")), "torch.ao.nn.intrinsic.ConvReLU2d");
    ck_assert_str_eq(bpcc_module_type(bpcc_graph_find_module(g, "c1")), "torch.ao.nn.intrinsic.ConvAddReLU2d");
    struct bpcc_node *c0 = bpcc_graph_find_node(g, "c0"), *c1 = bpcc_graph_find_node(g, "c1");
    ck_assert_uint_eq(bpcc_node_args(c1)->n, 2);
    ck_assert_ptr_eq(bpcc_value_item(bpcc_node_args(c1), 0)->u.node, c0);
    ck_assert_ptr_eq(bpcc_value_item(bpcc_node_args(c1), 1)->u.node, c0); /* r0's value, now c0's */
    ck_assert_uint_eq(bpcc_node_n_users(c0), 1);
    ck_assert_uint_eq(bpcc_graph_n_nodes(g), 4);
    ck_assert_int_eq(bpcc_graph_verify(g, &d), BPCC_OK);
    bpcc_graph_free(g);
    bpcc_config_free(onednn);
}
END_TEST

static enum bpcc_status fuse_op(void *unused, struct bpcc_diag *dd)
{
    (void)unused;
    struct bpcc_graph *g;
    enum bpcc_status s = bpcc_graph_load(FIXTURE("torch/tiny_resnet.bpcc"), &g, dd);
    if (s) return s;
    char *ex;
    s = bpcc_fuse(g, native, NULL, &ex, dd);
    if (!s) bpcc_free(ex);
    bpcc_graph_free(g);
    return s;
}

START_TEST(fusion_survives_every_allocation_failure)
{
    ck_assert_int_gt(tu_oom_loop("fuse", fuse_op, NULL), 20);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fuse");
    TCase *tc = tcase_create("fuse");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, conv_bn_relu_folds_into_conv_relu_numerically);
    tcase_add_test(tc, fused_containers_share_one_attribute_array);
    tcase_add_test(tc, fused_parts_are_the_matched_modules_unless_something_else_refers_to_them);
    tcase_add_test(tc, conv_bn_folds_into_a_plain_conv_and_gains_a_bias);
    tcase_add_test(tc, linear_bn_folds_numerically);
    tcase_add_test(tc, convtranspose_bn_folds_along_the_output_axis);
    tcase_add_test(tc, qat_keeps_the_batch_norm_in_a_conv_bn_relu);
    tcase_add_test(tc, not_fused_when_bn_has_two_users);
    tcase_add_test(tc, the_root_module_stays_though_no_node_names_it);
    tcase_add_test(tc, not_fused_when_conv_output_also_leaves_the_graph);
    tcase_add_test(tc, not_fused_when_the_arity_differs);
    tcase_add_test(tc, not_fused_when_the_module_is_a_subclass);
    tcase_add_test(tc, functional_relu_becomes_a_fresh_relu_module);
    tcase_add_test(tc, error_when_the_root_is_not_a_module_call);
    tcase_add_test(tc, error_when_conv_and_bn_modes_differ);
    tcase_add_test(tc, fused_models_keep_node_names_and_save);
    tcase_add_test(tc, folding_without_rollback_gives_the_float_weights_pages_back);
    tcase_add_test(tc, registered_fusers_are_used_by_configs);
    tcase_add_test(tc, onednn_conv_add_relu_takes_the_other_addend_as_input);
    tcase_add_test(tc, onednn_conv_add_takes_an_addend_fused_before);
    tcase_add_test(tc, fusion_survives_every_allocation_failure);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
