/*
** check_ns.c — the numeric suite on hand-made models whose errors are known: a weight quantized
** with a known step, an input quantized with one step and an output with another (propagated and
** shadow errors computed by hand), the reports, and every allocation failure.
*/
#include "testutil.h"

#include "exec/exec.h"

#include <math.h>
#include <unistd.h>

static struct bpcc_graph *parse(const char *text)
{
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_graph *g;
    ck_assert_msg(bpcc_graph_parse(text, strlen(text), "m.bpcc", &g, &d) == BPCC_OK, "%s", tu_msg(&d));
    return g;
}

static const double W[4] = {0.2, 0.6, -1.1, 3.0}, X[4] = {0.2, 0.6, 1.1, 3.0}, I2[4] = {1, 0, 0, 1};

/* float: x -> fc1 (Linear 2 -> 2, weight w) -> fc2 (identity) -> output */
static struct bpcc_graph *float_model(const double *w)
{
    struct bpcc_graph *g = parse("bpcc-model 1\n\nmodule fc1 : torch.nn.Linear {in_features: 2, out_features: 2}\n"
                                 "module fc2 : torch.nn.Linear {in_features: 2, out_features: 2}\n\ngraph\n"
                                 "  %x = placeholder x () : f32[2, 2]\n  %fc1 = call_module fc1 (%x,)\n"
                                 "  %fc2 = call_module fc2 (%fc1,)\n  %output = output output (%fc2,)\n");
    tu_set_values(g, "fc1", "weight", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 2, (int64_t[]){2, 2}, w);
    tu_set_values(g, "fc1", "bias", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 1, (int64_t[]){2}, (double[]){0, 0});
    tu_set_values(g, "fc2", "weight", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 2, (int64_t[]){2, 2}, I2);
    tu_set_values(g, "fc2", "bias", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 1, (int64_t[]){2}, (double[]){0, 0});
    return g;
}

static void reference_weight(struct bpcc_graph *g, const char *m, const double *w, bool per_channel)
{
    tu_set_values(g, m, "weight", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 2, (int64_t[]){2, 2}, w);
    tu_set_values(g, m, "bias", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 1, (int64_t[]){2}, (double[]){0, 0});
    if (per_channel) {
        tu_set_values(g, m, "weight_scale", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 1, (int64_t[]){2}, (double[]){0.5, 0.5});
        tu_set_values(g, m, "weight_zero_point", BPCC_TENSOR_PARAM, BPCC_DTYPE_I64, 1, (int64_t[]){2}, (double[]){0, 0});
    } else {
        tu_set_values(g, m, "weight_scale", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 0, NULL, (double[]){0.5});
        tu_set_values(g, m, "weight_zero_point", BPCC_TENSOR_PARAM, BPCC_DTYPE_I64, 0, NULL, (double[]){0});
    }
    tu_set_values(g, m, "weight_axis", BPCC_TENSOR_PARAM, BPCC_DTYPE_I32, 0, NULL, (double[]){0});
}

/* quantized: x quantized with step 0.5, fc1 and fc2 reference Linears (weights with step 0.5,
** fc1's per channel or per tensor), each output quantized with step 0.4; with out_q the model's
** output is fc2's quantized value (prepared with its output quantized), with step 0.5; with in_q it
** takes x quantized (prepared with its input quantized: x dequantized first, no q0) */
static struct bpcc_graph *quant_model(const double *w, bool per_channel, bool out_q, bool in_q)
{
    char text[2048];
    snprintf(text, sizeof text,
             "bpcc-model 1\n\nmodule \"\" : torch.fx.GraphModule {}\n"
             "module fc1 : torch.ao.nn.quantized.reference.Linear {in_features: 2, out_features: 2, "
             "weight_qscheme: %s, weight_dtype: torch.qint8}\n"
             "module fc2 : torch.ao.nn.quantized.reference.Linear {in_features: 2, out_features: 2, "
             "weight_qscheme: torch.per_tensor_affine, weight_dtype: torch.qint8}\n\ngraph\n"
             "  %%x = placeholder x () : f32[2, 2]\n"
             "  %%s0 = get_attr s0 ()\n  %%z0 = get_attr z0 ()\n  %%s1 = get_attr s1 ()\n  %%z1 = get_attr z1 ()\n"
             "%s"
             "  %%fc1 = call_module fc1 (%%d0,)\n"
             "  %%q1 = call_function torch.quantize_per_tensor (%%fc1, %%s1, %%z1, torch.quint8)\n"
             "  %%d1 = call_method dequantize (%%q1,)\n"
             "  %%fc2 = call_module fc2 (%%d1,)\n"
             "  %%q2 = call_function torch.quantize_per_tensor (%%fc2, %%s%d, %%z%d, torch.quint8)\n"
             "%s",
             per_channel ? "torch.per_channel_affine" : "torch.per_tensor_affine",
             in_q ? "  %d0 = call_method dequantize (%x,)\n"
                  : "  %q0 = call_function torch.quantize_per_tensor (%x, %s0, %z0, torch.quint8)\n"
                    "  %d0 = call_method dequantize (%q0,)\n",
             !out_q, !out_q,
             out_q ? "  %output = output output (%q2,)\n" : "  %d2 = call_method dequantize (%q2,)\n  %output = output output (%d2,)\n");
    struct bpcc_graph *g = parse(text);
    tu_set_values(g, "", "s0", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 0, NULL, (double[]){0.5});
    tu_set_values(g, "", "z0", BPCC_TENSOR_PARAM, BPCC_DTYPE_I64, 0, NULL, (double[]){0});
    tu_set_values(g, "", "s1", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 0, NULL, (double[]){0.4});
    tu_set_values(g, "", "z1", BPCC_TENSOR_PARAM, BPCC_DTYPE_I64, 0, NULL, (double[]){0});
    reference_weight(g, "fc1", w, per_channel);
    reference_weight(g, "fc2", I2, false);
    return g;
}

static float x_at(uint64_t i) { return (float)X[i]; }

/* a batch file holding x = X as [2, 2] */
static char *batch_file(void) { return tu_write_batch("x", 2, (int64_t[]){2, 2}, x_at); }

static double db(double signal, double noise) { return 10.0 * log10(signal / noise); }

/* a batch holding x = X quantized with step 0.5, zero point 0 (docs/FORMAT.md): (0, 1, 2, 6) */
static char *quantized_batch_file(void)
{
    struct bpcc_graph *g;
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    ck_assert_int_eq(bpcc_graph_new(&g, &d), BPCC_OK);
    struct bpcc_tensor *t[3];
    ck_assert_int_eq(bpcc_tensor_new(g, BPCC_DTYPE_U8, 2, (int64_t[]){2, 2}, &t[0], &d), BPCC_OK);
    ck_assert_int_eq(bpcc_tensor_new(g, BPCC_DTYPE_F32, 0, NULL, &t[1], &d), BPCC_OK);
    ck_assert_int_eq(bpcc_tensor_new(g, BPCC_DTYPE_I64, 0, NULL, &t[2], &d), BPCC_OK);
    memcpy(bpcc_tensor_data(t[0]), (uint8_t[]){0, 1, 2, 6}, 4);
    *(float *)bpcc_tensor_data(t[1]) = 0.5f;
    *(int64_t *)bpcc_tensor_data(t[2]) = 0;
    char *path = tu_write_temp("", 0, ".safetensors");
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    const char *names[3] = {"x", "x.scale", "x.zero_point"};
    ck_assert_int_eq(bpcc_safetensors_write(fp, path, names, (const struct bpcc_tensor *const *)t, 3, &d), BPCC_OK);
    fclose(fp);
    bpcc_graph_free(g);
    return path;
}

START_TEST(weight_sqnr_is_the_hand_computed_one)
{
    /* step 0.5: W -> (0, 0.5, -1.0, 3.0), errors (0.2, 0.1, -0.1, 0) */
    struct bpcc_graph *f = float_model(W), *q = quant_model(W, true, false, false);
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_compare_report *r;
    ck_assert_msg(bpcc_compare_weights(f, q, &r, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_int_eq(r->kind, BPCC_COMPARE_WEIGHTS);
    ck_assert_uint_eq(r->n_rows, 2);
    ck_assert_uint_eq(r->n_unmatched, 0);
    const struct bpcc_compare_row *w = &r->rows[0];
    ck_assert_str_eq(w->name, "fc1");
    ck_assert(isinf(r->rows[1].sqnr_db)); /* the identity is exact in steps of 0.5 */
    ck_assert_uint_eq(w->numel, 4);
    ck_assert_double_eq_tol(w->sqnr_db, db(10.61, 0.06), 1e-6);
    ck_assert_double_eq_tol(w->l2_error, sqrt(0.06 / 10.61), 1e-6);
    ck_assert_double_eq_tol(w->max_abs_error, 0.2, 1e-6);
    ck_assert_double_eq_tol(w->cosine, (0.3 + 1.1 + 9.0) / (sqrt(10.61) * sqrt(0.25 + 1 + 9)), 1e-6);
    /* channel 0 = (0.2, 0.6): 0.40 / 0.05; channel 1 = (-1.1, 3.0): 10.21 / 0.01 */
    ck_assert_uint_eq(w->n_channels, 2);
    ck_assert_uint_eq(w->worst_channel, 0);
    ck_assert_double_eq_tol(w->min_channel_sqnr_db, db(0.40, 0.05), 1e-6);
    bpcc_compare_report_free(r);
    /* a float model with another weight shape: nothing to compare */
    bpcc_graph_free(f);
    f = parse("bpcc-model 1\n\nmodule fc1 : torch.nn.Linear {in_features: 1, out_features: 1}\n\ngraph\n"
              "  %x = placeholder x ()\n  %fc1 = call_module fc1 (%x,)\n  %output = output output (%fc1,)\n");
    tu_set_values(f, "fc1", "weight", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 2, (int64_t[]){1, 1}, W);
    ck_assert_int_eq(bpcc_compare_weights(f, q, &r, &d), BPCC_OK);
    ck_assert_uint_eq(r->n_rows, 0);
    ck_assert_uint_eq(r->n_unmatched, 2);
    bpcc_compare_report_free(r);
    bpcc_graph_free(f);
    bpcc_graph_free(q);
}
END_TEST

/* a float LSTM (1 -> 1) with weights W, and its reference module of dynamic quantization:
** weight_ih_l0 qint8 with step 0.5, weight_hh_l0 the same or float16 */
static void lstm_models(bool hh_f16, struct bpcc_graph **f, struct bpcc_graph **q)
{
    char q_text[1024];
    snprintf(q_text, sizeof q_text,
             "bpcc-model 1\n\nmodule lstm : torch.ao.nn.quantized.reference.LSTM {input_size: 1, hidden_size: 1, "
             "weight_ih_l0_qscheme: torch.per_tensor_affine, weight_ih_l0_dtype: torch.qint8, "
             "weight_hh_l0_qscheme: %s, weight_hh_l0_dtype: %s}\n\ngraph\n"
             "  %%x = placeholder x ()\n  %%lstm = call_module lstm (%%x,)\n  %%output = output output (%%lstm,)\n",
             hh_f16 ? "None" : "torch.per_tensor_affine", hh_f16 ? "torch.float16" : "torch.qint8");
    *f = parse("bpcc-model 1\n\nmodule lstm : torch.nn.LSTM {input_size: 1, hidden_size: 1}\n\ngraph\n"
               "  %x = placeholder x ()\n  %lstm = call_module lstm (%x,)\n  %output = output output (%lstm,)\n");
    *q = parse(q_text);
    for (int k = 0; k < 2; k++) {
        struct bpcc_graph *g = k ? *q : *f;
        tu_set_values(g, "lstm", "weight_ih_l0", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 2, (int64_t[]){4, 1}, W);
        tu_set_values(g, "lstm", "weight_hh_l0", BPCC_TENSOR_PARAM, BPCC_DTYPE_F32, 2, (int64_t[]){4, 1}, W);
    }
    for (int k = 0; k < (hh_f16 ? 1 : 2); k++) {
        char n[3][32];
        snprintf(n[0], sizeof n[0], "weight_%s_l0_scale", k ? "hh" : "ih");
        snprintf(n[1], sizeof n[1], "weight_%s_l0_zero_point", k ? "hh" : "ih");
        snprintf(n[2], sizeof n[2], "weight_%s_l0_axis", k ? "hh" : "ih");
        tu_set_values(*q, "lstm", n[0], BPCC_TENSOR_BUFFER, BPCC_DTYPE_F32, 1, (int64_t[]){1}, (double[]){0.5});
        tu_set_values(*q, "lstm", n[1], BPCC_TENSOR_BUFFER, BPCC_DTYPE_I32, 1, (int64_t[]){1}, (double[]){0});
        tu_set_values(*q, "lstm", n[2], BPCC_TENSOR_BUFFER, BPCC_DTYPE_I32, 0, NULL, (double[]){0});
    }
}

/* a reference LSTM of dynamic quantization: a row per quantized weight (module.weight), with the
** same arithmetic; a float16 weight is not compared; the float model's LSTM is matched by name */
START_TEST(each_weight_of_a_recurrent_module_is_a_row)
{
    for (int hh_f16 = 1; hh_f16 >= 0; hh_f16--) {
        struct bpcc_graph *f, *q;
        lstm_models(hh_f16, &f, &q);
        struct bpcc_diag d;
        bpcc_diag_init(&d);
        struct bpcc_compare_report *r;
        /* the weights with qparams of their own, one by one (float16 ones too) */
        const struct bpcc_module *lm = bpcc_graph_find_module(q, "lstm");
        const char *wn;
        struct bpcc_qparams wq;
        uint32_t it = 0;
        ck_assert(bpcc_module_next_weight_qparams(lm, &it, &wn, &wq) && !strcmp(wn, "weight_ih_l0") &&
                  wq.kind == BPCC_QPARAMS_PER_TENSOR);
        ck_assert(bpcc_module_next_weight_qparams(lm, &it, &wn, &wq) && !strcmp(wn, "weight_hh_l0") &&
                  wq.kind == (hh_f16 ? BPCC_QPARAMS_FLOAT16 : BPCC_QPARAMS_PER_TENSOR));
        ck_assert(!bpcc_module_next_weight_qparams(lm, &it, &wn, &wq));
        ck_assert_msg(bpcc_compare_weights(f, q, &r, &d) == BPCC_OK, "%s", tu_msg(&d));
        ck_assert_uint_eq(r->n_rows, hh_f16 ? 1 : 2);
        for (uint32_t i = 0; i < r->n_rows; i++) {
            const char *want = i ? "lstm.weight_hh_l0" : "lstm.weight_ih_l0";
            ck_assert_str_eq(r->rows[i].name, want);
            ck_assert_str_eq(r->rows[i].float_name, want);
            /* step 0.5: W -> (0, 0.5, -1.0, 3.0), errors (0.2, 0.1, -0.1, 0), as for the linear above */
            ck_assert_double_eq_tol(r->rows[i].sqnr_db, db(10.61, 0.06), 1e-6);
        }
        char *text;
        ck_assert_int_eq(bpcc_compare_report_text(r, &text, &d), BPCC_OK);
        ck_assert_ptr_nonnull(strstr(text, hh_f16 ? "compare weights: 1 quantized weights" : "compare weights: 2 quantized weights"));
        ck_assert_ptr_nonnull(strstr(text, "lstm.weight_ih_l0"));
        bpcc_free(text);
        bpcc_compare_report_free(r);
        bpcc_graph_free(f);
        bpcc_graph_free(q);
    }
}
END_TEST

START_TEST(output_and_shadow_errors_are_the_hand_computed_ones)
{
    /* identity weights (exact in 0.5 steps), every value against the float x = (0.2, 0.6, 1.1, 3.0):
    ** x: step 0.5 -> (0, 0.5, 1.0, 3.0), errors (0.2, 0.1, 0.1, 0): 0.06
    ** fc1: then step 0.4 -> (0, 0.4, 0.8, 3.2), errors (0.2, 0.2, 0.3, -0.2): 0.21, propagated and shadow
    ** fc2 propagated: (0, 0.4, 0.8, 3.2) is exact in 0.4 steps: 0.21 again
    ** fc2 shadow: fed float fc1 = x, quantized by its input step 0.4 -> (0, 0.8, 1.2, 3.2),
    **     errors (0.2, -0.2, -0.1, -0.2): 0.13 */
    struct bpcc_graph *f = float_model(I2), *q = quant_model(I2, false, false, false);
    char *batch = batch_file();
    const char *batches[2] = {batch, batch};
    struct bpcc_diag d;
    bpcc_diag_init(&d);
    struct bpcc_compare_report *r;
    ck_assert_msg(bpcc_compare_outputs(f, q, batches, 2, 1, true, &r, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_int_eq(r->kind, BPCC_COMPARE_SHADOW);
    ck_assert_uint_eq(r->n_batches, 2);
    ck_assert_uint_eq(r->n_rows, 3);
    const struct bpcc_compare_row *x = &r->rows[0], *fc1 = &r->rows[1], *fc2 = &r->rows[2];
    ck_assert_str_eq(x->name, "x");
    ck_assert_str_eq(x->what, "placeholder");
    ck_assert_str_eq(fc2->name, "fc2");
    ck_assert_str_eq(fc1->what, "torch.ao.nn.quantized.reference.Linear");
    ck_assert_uint_eq(fc1->numel, 8); /* two batches */
    const double xx = 10.61;
    ck_assert_double_eq_tol(x->sqnr_db, db(xx, 0.06), 1e-5);
    ck_assert_double_eq_tol(x->shadow_sqnr_db, db(xx, 0.06), 1e-5);
    ck_assert_double_eq_tol(fc1->sqnr_db, db(xx, 0.21), 1e-5);
    ck_assert_double_eq_tol(fc1->shadow_sqnr_db, db(xx, 0.21), 1e-5);
    ck_assert_double_eq_tol(fc2->sqnr_db, db(xx, 0.21), 1e-5);
    ck_assert_double_eq_tol(fc2->shadow_sqnr_db, db(xx, 0.13), 1e-5);
    ck_assert_double_eq_tol(fc2->shadow_max_abs_error, 0.2, 1e-6);
    ck_assert_double_eq_tol(fc1->max_abs_error, 0.3, 1e-6);
    /* the report: worst first by shadow SQNR (x, then fc), ranks in JSON, the page's bars */
    char *text, *json, *html;
    ck_assert_int_eq(bpcc_compare_report_text(r, &text, &d), BPCC_OK);
    ck_assert_ptr_nonnull(strstr(text, "compare shadow: 3 nodes on 2 batches"));
    const char *p1 = strstr(text, "   1  fc1 "), *p2 = strstr(text, "   2  fc2 "), *p3 = strstr(text, "   3  x ");
    ck_assert_msg(p1 && p2 && p3 && p1 < p2 && p2 < p3, "%s", text);
    ck_assert_int_eq(bpcc_compare_report_json(r, 0, &json, &d), BPCC_OK);
    ck_assert_ptr_nonnull(strstr(json, "\"kind\":\"shadow\""));
    ck_assert_ptr_nonnull(strstr(json, "\"name\":\"fc1\""));
    ck_assert_int_eq(bpcc_compare_report_html(r, "a <b> & c", &html, &d), BPCC_OK);
    ck_assert_ptr_nonnull(strstr(html, "a &lt;b&gt; &amp; c"));
    ck_assert_ptr_nonnull(strstr(html, "class=\"bar worst\" data-name=\"fc2\""));
    bpcc_free(text);
    bpcc_free(json);
    bpcc_free(html);
    bpcc_compare_report_free(r);
    /* without shadow: the same propagated figures, no shadow run */
    ck_assert_int_eq(bpcc_compare_outputs(f, q, batches, 1, 1, false, &r, &d), BPCC_OK);
    ck_assert_int_eq(r->kind, BPCC_COMPARE_OUTPUTS);
    ck_assert_double_eq_tol(r->rows[2].sqnr_db, db(10.61, 0.21), 1e-5);
    ck_assert(r->rows[2].shadow_sqnr_db == 0);
    bpcc_compare_report_free(r);
    /* the output left quantized with step 0.5: fc2 measured on its quantized values (0, 0.5, 1.0,
    ** 3.0), errors (0.2, 0.1, 0.1, 0): 0.06, as its consumers would dequantize them (not 0.21, its
    ** value before); the whole output's SQNR likewise */
    struct bpcc_graph *qo = quant_model(I2, false, true, false);
    ck_assert_int_eq(bpcc_compare_outputs(f, qo, batches, 1, 1, false, &r, &d), BPCC_OK);
    ck_assert_uint_eq(r->n_rows, 3);
    ck_assert_str_eq(r->rows[2].name, "fc2");
    ck_assert_double_eq_tol(r->rows[2].sqnr_db, db(10.61, 0.06), 1e-5);
    bpcc_compare_report_free(r);
    double whole;
    ck_assert_int_eq(bpcc_sqnr(f, qo, batches, 1, 1, &whole, &d), BPCC_OK);
    ck_assert_double_eq_tol(whole, db(10.61, 0.06), 1e-5);
    bpcc_graph_free(qo);
    /* a quantized batch: the model that dequantizes x itself takes it as it is, the float model
    ** takes its values (0, 0.5, 1.0, 3.0), so x is the same in both; fc1 then quantizes them with
    ** step 0.4 to (0, 0.4, 0.8, 3.2): errors (0, 0.1, 0.2, -0.2), 0.09 against 10.25 */
    char *qbatch = quantized_batch_file();
    struct bpcc_graph *qi = quant_model(I2, false, false, true);
    const char *qb[1] = {qbatch};
    ck_assert_msg(bpcc_compare_outputs(f, qi, qb, 1, 1, false, &r, &d) == BPCC_OK, "%s", tu_msg(&d));
    ck_assert_uint_eq(r->n_rows, 3);
    ck_assert_str_eq(r->rows[0].name, "x");
    ck_assert(isinf(r->rows[0].sqnr_db));
    ck_assert_double_eq_tol(r->rows[1].sqnr_db, db(10.25, 0.09), 1e-5);
    bpcc_compare_report_free(r);
    /* a model that quantizes x itself takes the quantized batch's values: x's row is the
    ** requantization of (0, 0.5, 1.0, 3.0) with step 0.5, exact */
    ck_assert_int_eq(bpcc_compare_outputs(f, q, qb, 1, 1, false, &r, &d), BPCC_OK);
    ck_assert(isinf(r->rows[0].sqnr_db));
    bpcc_compare_report_free(r);
    bpcc_graph_free(qi);
    unlink(qbatch);
    free(qbatch);
    /* identical models: infinite SQNR, shown as inf */
    ck_assert_int_eq(bpcc_compare_outputs(f, f, batches, 1, 1, false, &r, &d), BPCC_OK);
    ck_assert(isinf(r->rows[1].sqnr_db) && r->rows[1].sqnr_db > 0);
    ck_assert_int_eq(bpcc_compare_report_json(r, 0, &json, &d), BPCC_OK);
    ck_assert_ptr_nonnull(strstr(json, "\"sqnr_db\":\"inf\""));
    bpcc_free(json);
    bpcc_compare_report_free(r);
    /* a batch that does not fit: an error naming the file */
    bpcc_diag_init(&d);
    const char *bad[1] = {"/nonexistent/b.safetensors"};
    ck_assert_int_ne(bpcc_compare_outputs(f, q, bad, 1, 1, false, &r, &d), BPCC_OK);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(d.entries[0].file, "b.safetensors"));
    unlink(batch);
    free(batch);
    bpcc_graph_free(f);
    bpcc_graph_free(q);
}
END_TEST

struct oom_ctx {
    struct bpcc_graph *f, *q;
    const char *batch;
};

static enum bpcc_status compare_all(void *ud, struct bpcc_diag *d)
{
    struct oom_ctx *c = ud;
    struct bpcc_compare_report *r;
    char *t;
    enum bpcc_status s = bpcc_compare_weights(c->f, c->q, &r, d);
    if (s) return s;
    s = bpcc_compare_report_text(r, &t, d);
    if (!s) bpcc_free(t);
    bpcc_compare_report_free(r);
    if (s) return s;
    s = bpcc_compare_outputs(c->f, c->q, &c->batch, 1, 1, true, &r, d);
    if (s) return s;
    s = bpcc_compare_report_json(r, 2, &t, d);
    if (!s) bpcc_free(t);
    if (!s) s = bpcc_compare_report_html(r, "t", &t, d);
    if (!s) bpcc_free(t);
    bpcc_compare_report_free(r);
    return s;
}

static enum bpcc_status compare_weights_only(void *ud, struct bpcc_diag *d)
{
    struct oom_ctx *c = ud;
    struct bpcc_compare_report *r;
    char *t;
    enum bpcc_status s = bpcc_compare_weights(c->f, c->q, &r, d);
    if (s) return s;
    s = bpcc_compare_report_json(r, 2, &t, d);
    if (!s) bpcc_free(t);
    bpcc_compare_report_free(r);
    return s;
}

START_TEST(the_numeric_suite_survives_every_allocation_failure)
{
    struct oom_ctx l;
    lstm_models(false, &l.f, &l.q); /* rows beyond the report's first room, names it owns */
    ck_assert_int_gt(tu_oom_loop("compare recurrent weights", compare_weights_only, &l), 4);
    bpcc_graph_free(l.f);
    bpcc_graph_free(l.q);
    struct oom_ctx c = {float_model(W), quant_model(W, true, false, false), batch_file()};
    ck_assert_int_gt(tu_oom_loop("compare", compare_all, &c), 20);
    unlink(c.batch);
    free((char *)c.batch);
    bpcc_graph_free(c.f);
    bpcc_graph_free(c.q);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ns");
    TCase *tc = tcase_create("ns");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, weight_sqnr_is_the_hand_computed_one);
    tcase_add_test(tc, each_weight_of_a_recurrent_module_is_a_row);
    tcase_add_test(tc, output_and_shadow_errors_are_the_hand_computed_ones);
    tcase_add_test(tc, the_numeric_suite_survives_every_allocation_failure);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
